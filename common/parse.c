/* parse.c - strict parsing of flag values. */
#include "common/parse.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

int cx_parse_i64(const char *s, const char *what, int64_t min, int64_t max, int64_t *out, char *err,
                 size_t errlen)
{
    if (!s || !*s)
        return cx_fail(err, errlen, CX_EINVAL, "%s: empty value, expected an integer", what);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return cx_fail(err, errlen, CX_EINVAL, "%s: '%s' is not an integer", what, s);
    if (v < min || v > max)
        return cx_fail(err, errlen, CX_EINVAL, "%s: %lld is out of range %lld..%lld", what, v, (long long)min,
                       (long long)max);
    *out = v;
    return 0;
}

int cx_parse_int(const char *s, const char *what, int min, int max, int *out, char *err, size_t errlen)
{
    int64_t v = 0;
    int rc = cx_parse_i64(s, what, min, max, &v, err, errlen);
    if (rc == 0)
        *out = (int)v;
    return rc;
}

int cx_parse_double(const char *s, const char *what, double min, double max, double *out, char *err,
                    size_t errlen)
{
    if (!s || !*s)
        return cx_fail(err, errlen, CX_EINVAL, "%s: empty value, expected a number", what);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return cx_fail(err, errlen, CX_EINVAL, "%s: '%s' is not a finite number", what, s);
    if (v < min || v > max)
        return cx_fail(err, errlen, CX_EINVAL, "%s: %g is out of range %g..%g", what, v, min, max);
    *out = v;
    return 0;
}

int cx_parse_hostport(const char *s, const char *what, char *host, size_t hostlen, int *port, char *err,
                      size_t errlen)
{
    const char *colon = s ? strrchr(s, ':') : NULL;
    if (!colon || colon == s)
        return cx_fail(err, errlen, CX_EINVAL, "%s: '%s' is not HOST:PORT", what, s ? s : "");
    size_t hl = (size_t)(colon - s);
    if (hl >= hostlen)
        return cx_fail(err, errlen, CX_EINVAL, "%s: host in '%s' is too long", what, s);
    char pw[64];
    snprintf(pw, sizeof pw, "%s port", what);
    int rc = cx_parse_int(colon + 1, pw, 0, 65535, port, err, errlen);
    if (rc)
        return rc;
    memcpy(host, s, hl);
    host[hl] = '\0';
    return 0;
}
