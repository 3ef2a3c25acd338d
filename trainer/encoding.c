/* encoding.c - f32 / bf16 / blockwise int8, int4, int2 encodings of float
 * vectors. See encoding.h for the byte layouts and error bounds.
 */
#include "trainer/encoding.h"

#include <math.h>
#include <string.h>

#include "common/err.h"

static const char *const encoding_names[ENCODING_COUNT] = {"f32", "bf16", "int8", "int4", "int2"};

/* Largest |q| and bits per value of the int encodings. */
static int encoding_qmax(encoding_kind k)
{
    return k == ENCODING_INT8 ? 127 : k == ENCODING_INT4 ? 7 : 1;
}

static int encoding_bits(encoding_kind k)
{
    return k == ENCODING_INT8 ? 8 : k == ENCODING_INT4 ? 4 : 2;
}

static int encoding_is_int(encoding_kind k)
{
    return k == ENCODING_INT8 || k == ENCODING_INT4 || k == ENCODING_INT2;
}

/* ---- names and sizes ---- */

int encoding_parse(const char *name, encoding_kind *out, char *err, size_t errlen)
{
    for (int i = 0; name && i < ENCODING_COUNT; i++)
        if (strcmp(name, encoding_names[i]) == 0) {
            *out = (encoding_kind)i;
            return CX_OK;
        }
    return cx_fail(err, errlen, CX_EINVAL, "unknown encoding '%s' (expected f32, bf16, int8, int4 or int2)",
                   name ? name : "(null)");
}

const char *encoding_name(encoding_kind kind)
{
    if ((int)kind < 0 || (int)kind >= ENCODING_COUNT)
        return "?";
    return encoding_names[kind];
}

/* Payload bytes of a block of b values (without its 4-byte scale). */
static size_t encoding_block_bytes(encoding_kind k, size_t b)
{
    return (b * (size_t)encoding_bits(k) + 7) / 8;
}

size_t encoding_size(encoding_kind kind, size_t n)
{
    switch (kind) {
    case ENCODING_F32:
        return 4 * n;
    case ENCODING_BF16:
        return 2 * n;
    case ENCODING_INT8:
    case ENCODING_INT4:
    case ENCODING_INT2: {
        size_t full = n / ENCODING_BLOCK, tail = n % ENCODING_BLOCK;
        size_t sz = full * (4 + encoding_block_bytes(kind, ENCODING_BLOCK));
        if (tail)
            sz += 4 + encoding_block_bytes(kind, tail);
        return sz;
    }
    }
    return 0;
}

/* ---- scalar helpers ---- */

static uint32_t encoding_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float encoding_bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

uint16_t encoding_f32_to_bf16(float x)
{
    uint32_t u = encoding_f32_bits(x);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) /* NaN: keep it a (quiet) NaN */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* round to nearest even: add 0x7FFF plus the lowest kept bit; overflow
     * into the exponent rounds up correctly, and to Inf past the max. */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float encoding_bf16_to_f32(uint16_t h)
{
    return encoding_bits_f32((uint32_t)h << 16);
}

static void encoding_put_f32(uint8_t *p, float x)
{
    uint32_t u = encoding_f32_bits(x);
    p[0] = (uint8_t)u;
    p[1] = (uint8_t)(u >> 8);
    p[2] = (uint8_t)(u >> 16);
    p[3] = (uint8_t)(u >> 24);
}

static float encoding_get_f32(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return encoding_bits_f32(u);
}

/* ---- encode ---- */

/* One int block of b values: scale, then packed q. */
static uint8_t *encoding_encode_block(encoding_kind k, const float *x, size_t b, uint8_t *o)
{
    int Q = encoding_qmax(k), bits = encoding_bits(k);
    float maxabs = 0.0f;
    int finite = 1;
    for (size_t i = 0; i < b; i++) {
        float a = fabsf(x[i]);
        if (!isfinite(a))
            finite = 0;
        else if (a > maxabs)
            maxabs = a;
    }
    float scale = finite ? maxabs / (float)Q : NAN;
    while (isinf(scale * (float)Q)) /* keep q * scale finite near FLT_MAX */
        scale = nextafterf(scale, 0.0f);
    encoding_put_f32(o, scale);
    o += 4;
    size_t nbytes = encoding_block_bytes(k, b);
    memset(o, 0, nbytes);
    if (!finite || scale == 0.0f)
        return o + nbytes; /* all q = 0 (a NaN scale poisons the block) */
    /* divide (not multiply by 1/scale): 1/scale overflows for subnormal scales */
    unsigned mask = (1u << bits) - 1u;
    for (size_t i = 0; i < b; i++) {
        float r = roundf(x[i] / scale);
        if (r > (float)Q)
            r = (float)Q;
        if (r < (float)-Q)
            r = (float)-Q;
        unsigned q = (unsigned)(int)r & mask;
        size_t bit = i * (size_t)bits;
        o[bit / 8] |= (uint8_t)(q << (bit % 8));
    }
    return o + nbytes;
}

int encoding_encode(encoding_kind kind, const float *in, size_t n, uint8_t *out, size_t outlen, char *err,
                    size_t errlen)
{
    size_t need = encoding_size(kind, n);
    if ((int)kind < 0 || (int)kind >= ENCODING_COUNT)
        return cx_fail(err, errlen, CX_EINVAL, "encode: invalid encoding %d", (int)kind);
    if (outlen < need)
        return cx_fail(err, errlen, CX_EINVAL, "encode: %s of %zu values needs %zu bytes, buffer has %zu",
                       encoding_name(kind), n, need, outlen);
    if (kind == ENCODING_F32) {
        for (size_t i = 0; i < n; i++)
            encoding_put_f32(out + 4 * i, in[i]);
        return CX_OK;
    }
    if (kind == ENCODING_BF16) {
        for (size_t i = 0; i < n; i++) {
            uint16_t h = encoding_f32_to_bf16(in[i]);
            out[2 * i] = (uint8_t)h;
            out[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return CX_OK;
    }
    uint8_t *o = out;
    for (size_t i = 0; i < n; i += ENCODING_BLOCK) {
        size_t b = n - i < ENCODING_BLOCK ? n - i : ENCODING_BLOCK;
        o = encoding_encode_block(kind, in + i, b, o);
    }
    return CX_OK;
}

/* ---- decode ---- */

int encoding_decode(encoding_kind kind, const uint8_t *in, size_t inlen, float *out, size_t n, char *err,
                    size_t errlen)
{
    if ((int)kind < 0 || (int)kind >= ENCODING_COUNT)
        return cx_fail(err, errlen, CX_EINVAL, "decode: invalid encoding %d", (int)kind);
    size_t need = encoding_size(kind, n);
    if (inlen != need)
        return cx_fail(err, errlen, CX_ECORRUPT, "decode: length %zu bytes, %s of %zu values is %zu", inlen,
                       encoding_name(kind), n, need);
    if (kind == ENCODING_F32 || kind == ENCODING_BF16) {
        for (size_t i = 0; i < n; i++) {
            float x = kind == ENCODING_F32
                          ? encoding_get_f32(in + 4 * i)
                          : encoding_bf16_to_f32((uint16_t)(in[2 * i] | (unsigned)in[2 * i + 1] << 8));
            if (!isfinite(x))
                return cx_fail(err, errlen, CX_ECORRUPT, "decode: non-finite value at element %zu", i);
            out[i] = x;
        }
        return CX_OK;
    }
    int Q = encoding_qmax(kind), bits = encoding_bits(kind);
    unsigned mask = (1u << bits) - 1u, sign = 1u << (bits - 1);
    const uint8_t *p = in;
    for (size_t i = 0; i < n; i += ENCODING_BLOCK) {
        size_t b = n - i < ENCODING_BLOCK ? n - i : ENCODING_BLOCK;
        float scale = encoding_get_f32(p);
        if (!isfinite(scale))
            return cx_fail(err, errlen, CX_ECORRUPT, "decode: non-finite scale of block %zu",
                           i / ENCODING_BLOCK);
        if (scale < 0.0f)
            return cx_fail(err, errlen, CX_ECORRUPT, "decode: negative scale of block %zu (out of range)",
                           i / ENCODING_BLOCK);
        p += 4;
        for (size_t j = 0; j < b; j++) {
            size_t bit = j * (size_t)bits;
            unsigned u = (p[bit / 8] >> (bit % 8)) & mask;
            int q = (u & sign) ? (int)u - (int)(mask + 1u) : (int)u;
            if (q < -Q || q > Q)
                return cx_fail(err, errlen, CX_ECORRUPT, "decode: quantum %d out of range at element %zu", q,
                               i + j);
            float y = (float)q * scale;
            if (!isfinite(y)) /* a crafted scale near FLT_MAX */
                return cx_fail(err, errlen, CX_ECORRUPT, "decode: non-finite value at element %zu", i + j);
            out[i + j] = y;
        }
        size_t used = b * (size_t)bits, nb = encoding_block_bytes(kind, b);
        if (used % 8 && (p[nb - 1] >> (used % 8)))
            return cx_fail(err, errlen, CX_ECORRUPT, "decode: nonzero padding bits in block %zu",
                           i / ENCODING_BLOCK);
        p += nb;
    }
    return CX_OK;
}

/* ---- bounds ---- */

double encoding_error_bound(encoding_kind kind, float xi, float block_maxabs)
{
    if (kind == ENCODING_F32)
        return 0.0;
    if (kind == ENCODING_BF16) /* + half a bf16 subnormal ulp (2^-134) */
        return fabs((double)xi) * 0x1.0p-8 + 0x1.0p-134;
    if (!encoding_is_int(kind))
        return INFINITY;
    /* scale/2 plus the float rounding of scale, x*inv and q*scale (a few ulps
     * of maxabs) */
    double M = fabs((double)block_maxabs);
    return M / (2.0 * encoding_qmax(kind)) * (1.0 + 1e-6) + M * 1e-6 + 2.0 * 0x1.0p-149;
}
