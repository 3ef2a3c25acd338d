/* protocol.c - tensor headers, CRC framing and payload checks (protocol.h). */
#include "trainer/protocol.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/err.h"
#include "common/parse.h"
#include "trainer/config.h"

static const char *const reason_names[PROTO_R_COUNT + 1] = {
    "ok",
    "checksum",
    "length",
    "nonfinite",
    "unknown_learner",
    "stale_incarnation",
    "stale_version",
    "bad_header",
    "halted",
    "norm",
    "claim",
    "auth",
    "merge",
    NULL,
};
_Static_assert(PROTO_R_MERGE == PROTO_R_COUNT - 1, "reason_names names every proto_reason");

const char *proto_reason_name(proto_reason r)
{
    return cx_enum_name(reason_names, r);
}

int proto_reason_value(const char *name, proto_reason *out)
{
    int64_t v;
    int rc = cx_enum_value(reason_names, name, &v);
    if (rc == 0)
        *out = (proto_reason)v;
    return rc;
}

/* ---- protocol: CRC text ---- */

void proto_crc_format(uint32_t crc, char out[9])
{
    snprintf(out, 9, "%08x", crc);
}

int proto_crc_parse(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n > 8)
        return CX_EINVAL;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        uint32_t d;
        if (c >= '0' && c <= '9')
            d = (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (uint32_t)(c - 'A' + 10);
        else
            return CX_EINVAL;
        v = (v << 4) | d;
    }
    *out = v;
    return 0;
}

/* ---- protocol: headers ---- */

static int parse_field(proto_header_fn get, const void *ctx, const char *name, int need, int64_t min,
                       int64_t max, int64_t *out, char *err, size_t errlen)
{
    const char *v = get(ctx, name);
    char why[CX_ERRLEN];
    *out = -1;
    if (!v)
        return need ? cx_fail(err, errlen, CX_EINVAL, "missing header %s", name) : 0;
    if (cx_parse_i64(v, name, min, max, out, why, sizeof why) != 0) {
        *out = -1;
        return need ? cx_fail(err, errlen, CX_EINVAL, "bad header %s", why) : 0;
    }
    return 0;
}

int proto_hdr_parse(proto_hdr *h, proto_header_fn get, const void *ctx, unsigned need, char *err,
                    size_t errlen)
{
    int rc;
    const char *v;
    memset(h, 0, sizeof *h);
    if ((rc = parse_field(get, ctx, PROTO_H_LEARNER, need & PROTO_NEED_LEARNER, 0, PROTO_MAX_LEARNER_ID,
                          &h->learner, err, errlen)))
        return rc;
    if ((rc = parse_field(get, ctx, PROTO_H_INCARNATION, need & PROTO_NEED_INCARNATION, 1, INT64_MAX / 2,
                          &h->incarnation, err, errlen)))
        return rc;
    if ((rc = parse_field(get, ctx, PROTO_H_FRAGMENT, need & PROTO_NEED_FRAGMENT, 0, 1 << 20, &h->fragment,
                          err, errlen)))
        return rc;
    if ((rc = parse_field(get, ctx, PROTO_H_BASE_VERSION, need & PROTO_NEED_BASE_VERSION, 0, INT64_MAX / 2,
                          &h->base_version, err, errlen)))
        return rc;
    if ((rc = parse_field(get, ctx, PROTO_H_TOKENS, need & PROTO_NEED_TOKENS, 0, INT64_MAX / 2, &h->tokens,
                          err, errlen)))
        return rc;
    if ((rc = parse_field(get, ctx, PROTO_H_STEPS, need & PROTO_NEED_STEPS, 0, INT64_MAX / 2, &h->steps, err,
                          errlen)))
        return rc;
    if ((rc = parse_field(get, ctx, PROTO_H_ROUND, (need & PROTO_NEED_ROUND) || get(ctx, PROTO_H_ROUND), 0,
                          INT64_MAX / 2, &h->round, err, errlen)))
        return rc;
    if ((rc = parse_field(get, ctx, PROTO_H_STEP, (need & PROTO_NEED_STEP) || get(ctx, PROTO_H_STEP), 0,
                          INT64_MAX / 2, &h->step, err, errlen)))
        return rc;
    h->encoding = -1;
    v = get(ctx, PROTO_H_ENCODING);
    if (v && config_parse_encoding(v, &h->encoding) != 0) {
        h->encoding = -1;
        if (need & PROTO_NEED_ENCODING)
            return cx_fail(err, errlen, CX_EINVAL, "bad header %s: '%s' is not f32|bf16|int8|int4|int2|q2",
                           PROTO_H_ENCODING, v);
    } else if (!v && (need & PROTO_NEED_ENCODING)) {
        return cx_fail(err, errlen, CX_EINVAL, "missing header %s", PROTO_H_ENCODING);
    }
    v = get(ctx, PROTO_H_CRC32C);
    if (!v && (need & PROTO_NEED_CRC))
        return cx_fail(err, errlen, CX_EINVAL, "missing header %s", PROTO_H_CRC32C);
    if (v && proto_crc_parse(v, &h->crc32c) != 0)
        return cx_fail(err, errlen, CX_EINVAL, "bad header %s: '%s' is not 1-8 hex digits", PROTO_H_CRC32C,
                       v);
    return 0;
}

void proto_hdr_format(const proto_hdr *h, char lines[PROTO_MAX_LINES][PROTO_LINE], const char **ptrs)
{
    int n = 0;
    char crc[9];
#define ADD(name, val)                                                                                       \
    do {                                                                                                     \
        if ((val) >= 0) {                                                                                    \
            snprintf(lines[n], PROTO_LINE, "%s: %lld", name, (long long)(val));                              \
            ptrs[n] = lines[n];                                                                              \
            n++;                                                                                             \
        }                                                                                                    \
    } while (0)
    ADD(PROTO_H_LEARNER, h->learner);
    ADD(PROTO_H_INCARNATION, h->incarnation);
    ADD(PROTO_H_FRAGMENT, h->fragment);
    ADD(PROTO_H_BASE_VERSION, h->base_version);
    ADD(PROTO_H_TOKENS, h->tokens);
    ADD(PROTO_H_STEPS, h->steps);
    ADD(PROTO_H_ROUND, h->round);
    ADD(PROTO_H_STEP, h->step);
#undef ADD
    if (h->encoding >= 0) {
        snprintf(lines[n], PROTO_LINE, "%s: %s", PROTO_H_ENCODING, config_encoding_name(h->encoding));
        ptrs[n] = lines[n];
        n++;
    }
    proto_crc_format(h->crc32c, crc);
    snprintf(lines[n], PROTO_LINE, "%s: %s", PROTO_H_CRC32C, crc);
    ptrs[n] = lines[n];
    n++;
    ptrs[n] = NULL;
}

/* ---- protocol: payload checks ---- */

proto_reason proto_check_body(const void *body, size_t len, size_t expected_len, uint32_t crc, char *err,
                              size_t errlen)
{
    if (len != expected_len) {
        cx_fail(err, errlen, CX_ECORRUPT, "payload is %zu bytes, expected %zu", len, expected_len);
        return PROTO_R_LENGTH;
    }
    uint32_t got = cx_crc32c(0, body, len);
    if (got != crc) {
        cx_fail(err, errlen, CX_ECORRUPT, "CRC32C mismatch: header says %08x, payload has %08x", crc, got);
        return PROTO_R_CHECKSUM;
    }
    return PROTO_OK;
}

ptrdiff_t proto_first_nonfinite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return (ptrdiff_t)i;
    return -1;
}

void proto_f32_encode(const float *v, size_t n, void *out)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(out, v, n * sizeof(float));
#else
    unsigned char *o = out;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        o[4 * i] = (unsigned char)u;
        o[4 * i + 1] = (unsigned char)(u >> 8);
        o[4 * i + 2] = (unsigned char)(u >> 16);
        o[4 * i + 3] = (unsigned char)(u >> 24);
    }
#endif
}

void proto_f32_decode(const void *in, size_t n, float *v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(v, in, n * sizeof(float));
#else
    const unsigned char *b = in;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
                     (uint32_t)b[4 * i + 3] << 24;
        memcpy(&v[i], &u, 4);
    }
#endif
}

uint32_t proto_f32_crc(const float *v, size_t n)
{
    unsigned char chunk[4096];
    uint32_t crc = 0;
    for (size_t i = 0; i < n;) {
        size_t k = n - i < sizeof chunk / 4 ? n - i : sizeof chunk / 4;
        proto_f32_encode(v + i, k, chunk);
        crc = cx_crc32c(crc, chunk, k * 4);
        i += k;
    }
    return crc;
}

/* ---- protocol: delta chains ---- */

void proto_delta_put_hdr(uint8_t out[PROTO_DELTA_REC_HDR], int64_t version, uint32_t payload_len)
{
    uint64_t v = (uint64_t)version;
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(v >> (8 * i));
    for (int i = 0; i < 4; i++)
        out[8 + i] = (uint8_t)(payload_len >> (8 * i));
}

int proto_delta_next(const uint8_t *body, size_t len, size_t *off, int64_t *version, const uint8_t **payload,
                     size_t *plen, char *err, size_t errlen)
{
    size_t o = *off;
    if (o == len)
        return 0;
    if (o > len || len - o < PROTO_DELTA_REC_HDR)
        return cx_fail(err, errlen, CX_ECORRUPT, "delta chain: truncated record header at byte %zu", o);
    uint64_t v = 0;
    uint32_t b = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)body[o + (size_t)i] << (8 * i);
    for (int i = 0; i < 4; i++)
        b |= (uint32_t)body[o + 8 + (size_t)i] << (8 * i);
    o += PROTO_DELTA_REC_HDR;
    if (v > (uint64_t)INT64_MAX / 2 || b > len - o)
        return cx_fail(err, errlen, CX_ECORRUPT, "delta chain: record at byte %zu claims %u bytes, %zu left",
                       *off, b, len - o);
    *version = (int64_t)v;
    *payload = body + o;
    *plen = b;
    *off = o + b;
    return 1;
}
