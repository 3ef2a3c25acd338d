#include <criterion/criterion.h>
#include <string.h>

#include "common/err.h"
#include "common/parse.h"

Test(parse, integers_and_ranges)
{
    char err[256];
    int v;
    cr_assert_eq(cx_parse_int("42", "--steps", 1, 100, &v, err, sizeof err), 0);
    cr_assert_eq(v, 42);
    cr_assert_eq(cx_parse_int("abc", "--steps", 1, 100, &v, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "--steps") && strstr(err, "abc"), "%s", err);
    cr_assert_eq(cx_parse_int("0", "--steps", 1, 100, &v, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "out of range"), "%s", err);
    cr_assert_eq(cx_parse_int("12x", "--steps", 1, 100, &v, err, sizeof err), CX_EINVAL);
    cr_assert_eq(cx_parse_int("", "--steps", 1, 100, &v, err, sizeof err), CX_EINVAL);
    double d;
    cr_assert_eq(cx_parse_double("0.5", "--lr", 0, 1, &d, err, sizeof err), 0);
    cr_assert_float_eq(d, 0.5, 1e-12);
    cr_assert_eq(cx_parse_double("nan", "--lr", 0, 1, &d, err, sizeof err), CX_EINVAL);
    cr_assert_eq(cx_parse_double("inf", "--lr", 0, 1, &d, err, sizeof err), CX_EINVAL);
}

Test(parse, hostport)
{
    char err[256], host[64];
    int port;
    cr_assert_eq(cx_parse_hostport("127.0.0.1:8080", "--listen", host, sizeof host, &port, err, sizeof err),
                 0);
    cr_assert_str_eq(host, "127.0.0.1");
    cr_assert_eq(port, 8080);
    cr_assert_eq(cx_parse_hostport("127.0.0.1", "--listen", host, sizeof host, &port, err, sizeof err),
                 CX_EINVAL);
    cr_assert_eq(cx_parse_hostport("h:70000", "--listen", host, sizeof host, &port, err, sizeof err),
                 CX_EINVAL);
    cr_assert(strstr(err, "--listen"), "%s", err);
}

Test(parse, utf8_valid_and_sanitized)
{
    cr_assert(cx_utf8_valid("", 0));
    cr_assert(cx_utf8_valid("/proxies/up", 11));
    const char *ok = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80";
    cr_assert(cx_utf8_valid(ok, strlen(ok)));
    cr_assert(!cx_utf8_valid("\xFF", 1), "never valid");
    cr_assert(!cx_utf8_valid("\xC3\x28", 2), "bad continuation");
    cr_assert(!cx_utf8_valid("\xC0\xAF", 2), "overlong '/'");
    cr_assert(!cx_utf8_valid("\xED\xA0\x80", 3), "surrogate");
    cr_assert(!cx_utf8_valid("\xF4\x90\x80\x80", 4), "above U+10FFFF");
    cr_assert(!cx_utf8_valid("\xE2\x82", 2), "truncated");
    char out[64];
    cx_utf8_sanitize("/p/\xFF\xFEup\x01"
                     "caf\xC3\xA9",
                     out, sizeof out);
    cr_assert_str_eq(out, "/p/\\xFF\\xFEup\\x01caf\xC3\xA9");
    cx_utf8_sanitize("\xFF\xFF\xFF", out, 6); /* truncated on an escape boundary */
    cr_assert_str_eq(out, "\\xFF");
    cx_utf8_sanitize(NULL, out, sizeof out);
    cr_assert_str_eq(out, "");
}

/* Enum name tables: one NULL-terminated array gives name, value and list. */
Test(parse, enum_tables)
{
    static const char *const names[] = {"off", "on", "auto", NULL};
    cr_assert_str_eq(cx_enum_name(names, 0), "off");
    cr_assert_str_eq(cx_enum_name(names, 2), "auto");
    cr_assert_str_eq(cx_enum_name(names, 3), "?", "one past the last");
    cr_assert_str_eq(cx_enum_name(names, -1), "?");
    int64_t v = -7;
    cr_assert_eq(cx_enum_value(names, "on", &v), 0);
    cr_assert_eq(v, 1);
    v = -7;
    cr_assert_eq(cx_enum_value(names, "On", &v), CX_EINVAL, "exact match only");
    cr_assert_eq(cx_enum_value(names, NULL, &v), CX_EINVAL);
    cr_assert_eq(v, -7, "untouched on failure");
    char out[32];
    cr_assert_str_eq(cx_enum_list(names, "|", out, sizeof out), "off|on|auto");
    cr_assert_str_eq(cx_enum_list(names, ", ", out, 8), "off, on", "truncated, NUL-terminated");
}
