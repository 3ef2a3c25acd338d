/* The Prometheus text writer: exact lines, label escaping, non-finite
 * values, and no partial line past the buffer's cap. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "common/prom.h"

Test(prom, family_and_samples_exact_text)
{
    cx_buf b;
    cx_buf_init(&b, 1 << 16);
    cx_prom_family(&b, "x_bytes_total", CX_PROM_COUNTER, "Bytes, by direction.");
    const char *up[] = {"proxy", "sy", "direction", "upstream", NULL};
    cx_prom_uint(&b, "x_bytes_total", up, 18446744073709551615ull);
    cx_prom_family(&b, "x_up", CX_PROM_GAUGE, "1 when up.");
    cx_prom_int(&b, "x_up", NULL, -3);
    cx_prom_real(&b, "x_seconds", NULL, 1.23456, 3);
    cr_assert_str_eq(b.data, "# HELP x_bytes_total Bytes, by direction.\n"
                             "# TYPE x_bytes_total counter\n"
                             "x_bytes_total{proxy=\"sy\",direction=\"upstream\"} 18446744073709551615\n"
                             "# HELP x_up 1 when up.\n"
                             "# TYPE x_up gauge\n"
                             "x_up -3\n"
                             "x_seconds 1.235\n");
    cx_buf_cleanup(&b);
}

Test(prom, label_values_escaped_and_non_finite_spelled)
{
    cx_buf b;
    cx_buf_init(&b, 1 << 16);
    const char *l[] = {"path", "a\\b\"c\nd", NULL};
    cx_prom_int(&b, "x", l, 1);
    cx_prom_real(&b, "x_loss", NULL, NAN, 6);
    cx_prom_real(&b, "x_loss", NULL, INFINITY, 6);
    cx_prom_real(&b, "x_loss", NULL, -INFINITY, 6);
    cr_assert_str_eq(b.data, "x{path=\"a\\\\b\\\"c\\nd\"} 1\n"
                             "x_loss NaN\n"
                             "x_loss +Inf\n"
                             "x_loss -Inf\n");
    cx_buf_cleanup(&b);
}

Test(prom, no_partial_line_past_the_cap)
{
    cx_buf b;
    cx_buf_init(&b, 24);
    cx_prom_int(&b, "short", NULL, 1);               /* 8 bytes */
    cx_prom_int(&b, "a_much_longer_name", NULL, 12); /* 22 bytes: over the cap */
    cr_assert_str_eq(b.data, "short 1\n");
    char huge[2000];
    memset(huge, 'v', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    const char *l[] = {"k", huge, NULL};
    cx_buf_reset(&b);
    cx_prom_int(&b, "x", l, 1); /* over one line's limit: dropped */
    cr_assert_eq(b.len, 0);
    cx_buf_cleanup(&b);
}

Test(prom, one_sample_families_are_header_then_value)
{
    cx_buf b;
    cx_buf_init(&b, 1 << 16);
    cx_prom_one_int(&b, "x_merges_total", CX_PROM_COUNTER, "Merges.", 42);
    cx_prom_one_real(&b, "x_loss", CX_PROM_GAUGE, "Loss.", NAN, 6);
    cr_assert_str_eq(b.data, "# HELP x_merges_total Merges.\n"
                             "# TYPE x_merges_total counter\n"
                             "x_merges_total 42\n"
                             "# HELP x_loss Loss.\n"
                             "# TYPE x_loss gauge\n"
                             "x_loss NaN\n");
    cx_buf_cleanup(&b);
}
