/* prom.h - the Prometheus text exposition format (0.0.4), written into a
 * cx_buf: what every GET /metrics of chaosloco answers.
 *
 * What it is: a family header (HELP and TYPE lines) and samples
 * `name{label="value",...} value`, with label values escaped as the format
 * asks (backslash, double quote, newline) and non-finite values spelled
 * NaN, +Inf, -Inf. What it is not: a registry of metrics or a client
 * library; the caller keeps its own counters and renders them on each
 * request, one family header before that family's samples.
 *
 * labels: NULL, or a NULL-terminated array of name, value, name, value, ...
 * (borrowed). Names of metrics and labels are the caller's to get right
 * ([a-zA-Z_:][a-zA-Z0-9_:]*); they are written as given. A buffer over its
 * cap drops what does not fit (cx_buf semantics), never a partial line.
 */
#ifndef CX_PROM_H
#define CX_PROM_H

#include "common/buf.h"

typedef enum cx_prom_type {
    CX_PROM_COUNTER, /* only goes up (restarts reset it); name ends in _total */
    CX_PROM_GAUGE,   /* goes up and down */
} cx_prom_type;

/* "# HELP name help\n# TYPE name counter|gauge\n". help must be one line. */
void cx_prom_family(cx_buf *b, const char *name, cx_prom_type type, const char *help);
/* One sample with an integer value. */
void cx_prom_int(cx_buf *b, const char *name, const char *const *labels, long long v);
/* One sample with an unsigned integer value (byte and event counters). */
void cx_prom_uint(cx_buf *b, const char *name, const char *const *labels, unsigned long long v);
/* One sample with a real value printed with `decimals` digits after the
 * point (NaN, +Inf, -Inf when not finite). */
void cx_prom_real(cx_buf *b, const char *name, const char *const *labels, double v, int decimals);
/* A family with one unlabelled sample: the header, then the value. */
void cx_prom_one_int(cx_buf *b, const char *name, cx_prom_type type, const char *help, long long v);
void cx_prom_one_real(cx_buf *b, const char *name, cx_prom_type type, const char *help, double v,
                      int decimals);

#endif
