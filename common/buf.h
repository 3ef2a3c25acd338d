/* buf.h - a growable byte buffer with a hard cap (curl's dynbuf idea).
 * Used for HTTP bodies, JSON output, proxy queues. data is always
 * NUL-terminated (the NUL is not counted in len) so text can be used as a
 * C string.
 */
#ifndef CX_BUF_H
#define CX_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct cx_buf {
    char *data; /* NULL until the first append; NUL-terminated after */
    size_t len; /* bytes used */
    size_t cap; /* bytes allocated */
    size_t max; /* hard cap on len; appends past it fail with CX_ETOOBIG */
} cx_buf;

void cx_buf_init(cx_buf *b, size_t max);
void cx_buf_cleanup(cx_buf *b); /* frees data; b can be reused after init */
void cx_buf_reset(cx_buf *b);   /* len = 0, keeps memory */
int cx_buf_append(cx_buf *b, const void *p, size_t n);
int cx_buf_printf(cx_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cx_buf_vprintf(cx_buf *b, const char *fmt, va_list ap);
/* Remove the first n bytes (n <= len). */
void cx_buf_consume(cx_buf *b, size_t n);
/* Move the contents out: returns data (caller frees), leaves b empty. */
char *cx_buf_take(cx_buf *b, size_t *len);

#endif
