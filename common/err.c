/* err.c - error strings and their HTTP statuses (one table). */
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>

static const struct {
    int code;
    int http;
    const char *text;
} err_table[] = {
    {CX_OK, 200, "ok"},
    {CX_EINVAL, 400, "bad input"},
    {CX_ENOMEM, 500, "out of memory"},
    {CX_EIO, 500, "i/o error"},
    {CX_ENOTFOUND, 404, "not found"},
    {CX_ECONFLICT, 409, "conflict"},
    {CX_ETIMEDOUT, 504, "timed out"},
    {CX_EUNAVAIL, 503, "unavailable"},
    {CX_ECORRUPT, 400, "corrupt payload"},
    {CX_EAUTH, 401, "unauthorized"},
    {CX_ETOOBIG, 413, "too large"},
    {CX_ENOTSUP, 501, "not supported here"},
    {CX_EBUSY, 503, "busy"},
    {CX_ESYS, 500, "system error"},
    {CX_ENOUNIT, 409, "unit is not running"},
};

const char *cx_strerror(int err)
{
    for (size_t i = 0; i < sizeof err_table / sizeof err_table[0]; i++)
        if (err_table[i].code == err)
            return err_table[i].text;
    return "unknown error";
}

int cx_err_http_status(int err)
{
    for (size_t i = 0; i < sizeof err_table / sizeof err_table[0]; i++)
        if (err_table[i].code == err)
            return err_table[i].http;
    return 500;
}

int cx_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}
