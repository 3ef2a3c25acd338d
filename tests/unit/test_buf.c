#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/err.h"

Test(buf, append_printf_consume)
{
    cx_buf b;
    cx_buf_init(&b, 1000);
    cr_assert_eq(cx_buf_append(&b, "abc", 3), 0);
    cr_assert_eq(cx_buf_printf(&b, "-%d-", 42), 0);
    cr_assert_str_eq(b.data, "abc-42-");
    cx_buf_consume(&b, 4);
    cr_assert_str_eq(b.data, "42-");
    cr_assert_eq(b.len, 3);
    size_t n;
    char *p = cx_buf_take(&b, &n);
    cr_assert_str_eq(p, "42-");
    cr_assert_eq(n, 3);
    cr_assert_null(b.data);
    free(p);
    cx_buf_cleanup(&b);
}

Test(buf, hard_cap)
{
    cx_buf b;
    cx_buf_init(&b, 10);
    cr_assert_eq(cx_buf_append(&b, "0123456789", 10), 0);
    cr_assert_eq(cx_buf_append(&b, "x", 1), CX_ETOOBIG);
    cr_assert_eq(b.len, 10, "a refused append changes nothing");
    cr_assert_eq(cx_buf_printf(&b, "%s", "y"), CX_ETOOBIG);
    cx_buf_reset(&b);
    cr_assert_eq(cx_buf_printf(&b, "%s", "0123456789abc"), CX_ETOOBIG);
    cr_assert_eq(b.len, 0);
    cx_buf_cleanup(&b);
}
