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
