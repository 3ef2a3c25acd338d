/* buf.c - capped growable buffer. */
#include "common/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

void cx_buf_init(cx_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void cx_buf_cleanup(cx_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void cx_buf_reset(cx_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static int buf_reserve(cx_buf *b, size_t extra)
{
    if (extra > b->max || b->len > b->max - extra)
        return CX_ETOOBIG;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p)
        return CX_ENOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int cx_buf_append(cx_buf *b, const void *p, size_t n)
{
    int rc = buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int cx_buf_vprintf(cx_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return CX_EINVAL;
    int rc = buf_reserve(b, (size_t)n);
    if (rc)
        return rc;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int cx_buf_printf(cx_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = cx_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void cx_buf_consume(cx_buf *b, size_t n)
{
    if (n >= b->len) {
        cx_buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

char *cx_buf_take(cx_buf *b, size_t *len)
{
    char *p = b->data ? b->data : calloc(1, 1);
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}
