/* parse.h - strict parsing of numbers and addresses from flags and files.
 * Each names the flag in its error: "--steps: 'abc' is not an integer".
 */
#ifndef CX_PARSE_H
#define CX_PARSE_H

#include <stddef.h>
#include <stdint.h>

int cx_parse_i64(const char *s, const char *what, int64_t min, int64_t max, int64_t *out, char *err,
                 size_t errlen);
int cx_parse_int(const char *s, const char *what, int min, int max, int *out, char *err, size_t errlen);
int cx_parse_double(const char *s, const char *what, double min, double max, double *out, char *err,
                    size_t errlen);
/* "HOST:PORT" or "[IPv6]:PORT" with PORT 0..65535 (0 = ephemeral); host
 * copied into host without the brackets. */
int cx_parse_hostport(const char *s, const char *what, char *host, size_t hostlen, int *port, char *err,
                      size_t errlen);

/* Enum name tables: an enum of values 0..n-1 names them once, as
 *   static const char *const x_names[] = {"a", "b", "c", NULL};
 * (names[v] is value v's name, NULL after the last), and every name,
 * parse and message comes from that one table. */
/* names[v], or "?" when v is not in the table. */
const char *cx_enum_name(const char *const *names, int64_t v);
/* 0 and *out = the value named s; CX_EINVAL when s (or NULL) names none. */
int cx_enum_value(const char *const *names, const char *s, int64_t *out);
/* The names joined with sep ("a|b|c") into out (always NUL-terminated,
 * truncated to outlen); returns out. */
const char *cx_enum_list(const char *const *names, const char *sep, char *out, size_t outlen);

/* 1 when the n bytes at s are well-formed UTF-8 (no overlong forms, no
 * surrogates, nothing above U+10FFFF), else 0. */
int cx_utf8_valid(const char *s, size_t n);
/* Copy s into out (always NUL-terminated, truncated to outlen) with every
 * byte that is not part of a well-formed UTF-8 sequence, and every control
 * character, written as the four characters \xHH: for logs and audit
 * lines that must keep a hostile path visible. */
void cx_utf8_sanitize(const char *s, char *out, size_t outlen);

#endif
