/* prom.c - Prometheus text exposition (prom.h): each sample is formatted
 * whole into a line buffer first, then appended, so a full cx_buf never
 * gets half a line. */
#include "common/prom.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define PROM_LINE_MAX 1024 /* bytes: one sample line; longer ones are dropped */

void cx_prom_family(cx_buf *b, const char *name, cx_prom_type type, const char *help)
{
    cx_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
                  type == CX_PROM_COUNTER ? "counter" : "gauge");
}

/* Append s to line[*n] escaped for a label value; 0, or -1 when it does
 * not fit. */
static int put_escaped(char *line, size_t *n, const char *s)
{
    for (; *s; s++) {
        const char *rep = *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : *s == '\n' ? "\\n" : NULL;
        size_t k = rep ? 2 : 1;
        if (*n + k >= PROM_LINE_MAX)
            return -1;
        memcpy(line + *n, rep ? rep : s, k);
        *n += k;
    }
    return 0;
}

/* Append text to line[*n]; 0, or -1 when it does not fit. */
static int put(char *line, size_t *n, const char *text)
{
    size_t k = strlen(text);
    if (*n + k >= PROM_LINE_MAX)
        return -1;
    memcpy(line + *n, text, k);
    *n += k;
    return 0;
}

/* name{labels} value\n, whole or not at all. */
static void sample(cx_buf *b, const char *name, const char *const *labels, const char *value)
{
    char line[PROM_LINE_MAX];
    size_t n = 0;
    int rc = put(line, &n, name);
    for (int i = 0; rc == 0 && labels && labels[i] && labels[i + 1]; i += 2) {
        rc = put(line, &n, i == 0 ? "{" : ",");
        if (rc == 0)
            rc = put(line, &n, labels[i]);
        if (rc == 0)
            rc = put(line, &n, "=\"");
        if (rc == 0)
            rc = put_escaped(line, &n, labels[i + 1]);
        if (rc == 0)
            rc = put(line, &n, "\"");
    }
    if (rc == 0 && labels && labels[0] && labels[1])
        rc = put(line, &n, "}");
    if (rc == 0)
        rc = put(line, &n, " ");
    if (rc == 0)
        rc = put(line, &n, value);
    if (rc == 0)
        rc = put(line, &n, "\n");
    if (rc == 0)
        cx_buf_append(b, line, n);
}

void cx_prom_int(cx_buf *b, const char *name, const char *const *labels, long long v)
{
    char value[32];
    snprintf(value, sizeof value, "%lld", v);
    sample(b, name, labels, value);
}

void cx_prom_uint(cx_buf *b, const char *name, const char *const *labels, unsigned long long v)
{
    char value[32];
    snprintf(value, sizeof value, "%llu", v);
    sample(b, name, labels, value);
}

void cx_prom_real(cx_buf *b, const char *name, const char *const *labels, double v, int decimals)
{
    char value[512]; /* %.17f of DBL_MAX: 309 digits, the point and 17 more */
    if (isnan(v))
        snprintf(value, sizeof value, "NaN");
    else if (isinf(v))
        snprintf(value, sizeof value, "%s", v > 0 ? "+Inf" : "-Inf");
    else
        snprintf(value, sizeof value, "%.*f", decimals < 0 ? 0 : decimals > 17 ? 17 : decimals, v);
    sample(b, name, labels, value);
}

void cx_prom_one_int(cx_buf *b, const char *name, cx_prom_type type, const char *help, long long v)
{
    cx_prom_family(b, name, type, help);
    cx_prom_int(b, name, NULL, v);
}

void cx_prom_one_real(cx_buf *b, const char *name, cx_prom_type type, const char *help, double v,
                      int decimals)
{
    cx_prom_family(b, name, type, help);
    cx_prom_real(b, name, NULL, v, decimals);
}
