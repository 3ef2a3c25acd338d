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
/* "HOST:PORT" with PORT 0..65535 (0 = ephemeral); host copied into host. */
int cx_parse_hostport(const char *s, const char *what, char *host, size_t hostlen, int *port, char *err,
                      size_t errlen);

#endif
