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
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (s[0] == '[') { /* "[IPv6]:PORT", as in URLs */
        if (hl < 3 || s[hl - 1] != ']' || memchr(s + 1, ']', hl - 2) != NULL)
            return cx_fail(err, errlen, CX_EINVAL, "%s: '%s' is not HOST:PORT or [IPv6]:PORT", what, s);
        h = s + 1;
        hl -= 2;
    } else if (memchr(s, ']', hl) != NULL) {
        return cx_fail(err, errlen, CX_EINVAL, "%s: '%s' is not HOST:PORT or [IPv6]:PORT", what, s);
    }
    if (hl >= hostlen)
        return cx_fail(err, errlen, CX_EINVAL, "%s: host in '%s' is too long", what, s);
    char pw[64];
    snprintf(pw, sizeof pw, "%s port", what);
    int rc = cx_parse_int(colon + 1, pw, 0, 65535, port, err, errlen);
    if (rc)
        return rc;
    memcpy(host, h, hl);
    host[hl] = '\0';
    return 0;
}

/* Length of the well-formed UTF-8 sequence at s (n bytes left), 0 if none. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    unsigned cp = c & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

int cx_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_seq(p + i, n - i);
        if (l == 0)
            return 0;
        i += l;
    }
    return 1;
}

void cx_utf8_sanitize(const char *s, char *out, size_t outlen)
{
    if (outlen == 0)
        return;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)p), o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_seq(p + i, n - i);
        if (l == 0 || (l == 1 && (p[i] < 0x20 || p[i] == 0x7F))) {
            if (o + 4 >= outlen)
                break;
            snprintf(out + o, outlen - o, "\\x%02X", p[i]);
            o += 4;
            i++;
            continue;
        }
        if (o + l >= outlen)
            break;
        memcpy(out + o, p + i, l);
        o += l;
        i += l;
    }
    out[o] = '\0';
}

/* ---- enum name tables ---- */

const char *cx_enum_name(const char *const *names, int64_t v)
{
    for (int64_t i = 0; names[i]; i++)
        if (i == v)
            return names[i];
    return "?";
}

int cx_enum_value(const char *const *names, const char *s, int64_t *out)
{
    for (int64_t i = 0; s && names[i]; i++)
        if (strcmp(names[i], s) == 0) {
            *out = i;
            return CX_OK;
        }
    return CX_EINVAL;
}

const char *cx_enum_list(const char *const *names, const char *sep, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; names[i] && used < outlen; i++) {
        int n = snprintf(out + used, outlen - used, "%s%s", i ? sep : "", names[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return out;
}
