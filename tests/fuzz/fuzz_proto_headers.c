/* fuzz_proto_headers.c - libFuzzer target: the syncer's parsing of the
 * tensor headers of a contribution or gradient (proto_hdr_parse, as
 * the syncer's handlers (trainer/syncer/) call it through cx_http_header). Input: bytes 0-1
 * are the PROTO_NEED_* set (little-endian), the rest "Name: value" lines (header names match
 * case-insensitively, as in HTTP). Oracles: a parse that succeeds leaves
 * every needed field in its documented range, and proto_hdr_format of the
 * result parses back to the same values. Seeds: written by gen_seeds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/err.h"
#include "numerics/encoding.h"
#include "trainer/protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_HDRS 32

typedef struct hdrs {
    char *name[MAX_HDRS];  /* NUL-terminated copies */
    char *value[MAX_HDRS]; /* NUL-terminated copies */
    int n;
} hdrs;

static const char *get(const void *ctx, const char *name)
{
    const hdrs *h = ctx;
    for (int i = 0; i < h->n; i++)
        if (strcasecmp(h->name[i], name) == 0)
            return h->value[i];
    return NULL;
}

static const char *get_lines(const void *ctx, const char *name)
{
    const char *const *lines = ctx;
    size_t nl = strlen(name);
    for (int i = 0; lines[i]; i++)
        if (strncmp(lines[i], name, nl) == 0 && lines[i][nl] == ':')
            return lines[i] + nl + 2;
    return NULL;
}

static void check(const proto_hdr *h, unsigned need)
{
    if (((need & PROTO_NEED_LEARNER) && (h->learner < 0 || h->learner > PROTO_MAX_LEARNER_ID)) ||
        ((need & PROTO_NEED_INCARNATION) && h->incarnation < 1) ||
        ((need & PROTO_NEED_FRAGMENT) && h->fragment < 0) ||
        ((need & PROTO_NEED_BASE_VERSION) && h->base_version < 0) ||
        ((need & PROTO_NEED_TOKENS) && h->tokens < 0) || ((need & PROTO_NEED_STEPS) && h->steps < 0) ||
        ((need & PROTO_NEED_STEP) && h->step < 0) ||
        ((need & PROTO_NEED_ENCODING) && (h->encoding < 0 || h->encoding >= ENCODING_COUNT)))
        abort();
    /* what the learner would send for this header set parses back the same */
    char lines[PROTO_MAX_LINES][PROTO_LINE];
    const char *ptrs[PROTO_MAX_LINES + 1];
    proto_hdr_format(h, lines, ptrs);
    proto_hdr back;
    char err[CX_ERRLEN];
    if (proto_hdr_parse(&back, get_lines, ptrs, need, err, sizeof err) != 0 ||
        memcmp(&back, h, sizeof back) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 16384)
        return 0;
    unsigned need = data[0] | (unsigned)data[1] << 8;
    hdrs h = {.n = 0};
    const char *p = (const char *)data + 2, *end = (const char *)data + size;
    while (p < end && h.n < MAX_HDRS) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (colon) {
            const char *v = colon + 1;
            while (v < le && *v == ' ')
                v++;
            h.name[h.n] = strndup(p, (size_t)(colon - p));
            h.value[h.n] = strndup(v, (size_t)(le - v));
            if (!h.name[h.n] || !h.value[h.n]) {
                free(h.name[h.n]);
                free(h.value[h.n]);
                break;
            }
            h.n++;
        }
        p = le + 1;
    }
    proto_hdr out;
    char err[CX_ERRLEN];
    if (proto_hdr_parse(&out, get, &h, need, err, sizeof err) == 0)
        check(&out, need);
    for (int i = 0; i < h.n; i++) {
        free(h.name[i]);
        free(h.value[i]);
    }
    return 0;
}
