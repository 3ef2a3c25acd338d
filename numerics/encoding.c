/* encoding.c - f32 / bf16 / blockwise int8, int4, int2 and q2 encodings of float
 * vectors. See encoding.h for the byte layouts and error bounds.
 */
#include "numerics/encoding.h"

#include <math.h>
#include <string.h>

#include "common/err.h"
#include "common/parse.h"

const char *const encoding_names[ENCODING_COUNT + 1] = {"f32", "bf16", "int8", "int4", "int2", "q2", NULL};

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

/* Values per scale of a blockwise encoding. */
static size_t encoding_block_len(encoding_kind k)
{
    return k == ENCODING_Q2 ? ENCODING_Q2_BLOCK : ENCODING_BLOCK;
}

/* ---- names and sizes ---- */

const char *encoding_name(encoding_kind kind)
{
    return cx_enum_name(encoding_names, kind);
}

/* Payload bytes of a block of b values (without its 4-byte scale). */
static size_t encoding_block_bytes(encoding_kind k, size_t b)
{
    size_t bits = k == ENCODING_Q2 ? 2 : (size_t)encoding_bits(k);
    return (b * bits + 7) / 8;
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
    case ENCODING_INT2:
    case ENCODING_Q2: {
        size_t bl = encoding_block_len(kind), full = n / bl, tail = n % bl;
        size_t sz = full * (4 + encoding_block_bytes(kind, bl));
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

/* The q2 scale of a block of finite values: s0 = mean|x| / 2, then two
 * Lloyd steps (assign each |x| to the nearer of s, 3s, i.e. 3 when |x| > 2s;
 * refit s = sum(c |x|) / sum(c^2), the least-squares s for that
 * assignment). Each step does not raise the squared error. s <= maxabs,
 * since c >= 1. Sums in double, so the result is deterministic. */
static float encoding_q2_scale(const float *x, size_t b)
{
    double sum = 0.0;
    for (size_t i = 0; i < b; i++)
        sum += fabs((double)x[i]);
    double s = sum / (double)b / 2.0;
    for (int it = 0; it < 2 && s > 0.0; it++) {
        double num = 0.0, den = 0.0;
        for (size_t i = 0; i < b; i++) {
            double a = fabs((double)x[i]), c = a > 2.0 * s ? 3.0 : 1.0;
            num += c * a;
            den += c * c;
        }
        s = num / den;
    }
    float fs = (float)s;
    while (isinf(3.0f * fs)) /* keep 3 * scale finite near FLT_MAX */
        fs = nextafterf(fs, 0.0f);
    return fs;
}

/* One q2 block of b values: scale, then b 2-bit codes u, value (2u - 3) *
 * scale, element j in bits 2(j%4).. of byte j/4. */
static uint8_t *encoding_encode_q2_block(const float *x, size_t b, uint8_t *o)
{
    int finite = 1;
    for (size_t i = 0; i < b; i++)
        if (!isfinite(x[i]))
            finite = 0;
    float scale = finite ? encoding_q2_scale(x, b) : NAN;
    encoding_put_f32(o, scale);
    o += 4;
    size_t nbytes = encoding_block_bytes(ENCODING_Q2, b);
    memset(o, 0, nbytes);
    for (size_t i = 0; i < b && finite; i++) {
        /* nearest level: |x| > 2s -> 3s, else s; x >= 0 (and 0 itself) -> + */
        unsigned big = fabsf(x[i]) > 2.0f * scale, pos = x[i] >= 0.0f;
        unsigned u = pos ? 2u + big : 1u - big;
        o[i / 4] |= (uint8_t)(u << (2 * (i % 4)));
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
    size_t bl = encoding_block_len(kind);
    for (size_t i = 0; i < n; i += bl) {
        size_t b = n - i < bl ? n - i : bl;
        o = kind == ENCODING_Q2 ? encoding_encode_q2_block(in + i, b, o)
                                : encoding_encode_block(kind, in + i, b, o);
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
    int q2 = kind == ENCODING_Q2;
    int Q = q2 ? 3 : encoding_qmax(kind), bits = q2 ? 2 : encoding_bits(kind);
    unsigned mask = (1u << bits) - 1u, sign = 1u << (bits - 1);
    size_t bl = encoding_block_len(kind);
    const uint8_t *p = in;
    for (size_t i = 0; i < n; i += bl) {
        size_t b = n - i < bl ? n - i : bl;
        float scale = encoding_get_f32(p);
        if (!isfinite(scale))
            return cx_fail(err, errlen, CX_ECORRUPT, "decode: non-finite scale of block %zu", i / bl);
        if (scale < 0.0f)
            return cx_fail(err, errlen, CX_ECORRUPT, "decode: negative scale of block %zu (out of range)",
                           i / bl);
        p += 4;
        for (size_t j = 0; j < b; j++) {
            size_t bit = j * (size_t)bits;
            unsigned u = (p[bit / 8] >> (bit % 8)) & mask;
            int q = q2 ? 2 * (int)u - 3 : (u & sign) ? (int)u - (int)(mask + 1u) : (int)u;
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
            return cx_fail(err, errlen, CX_ECORRUPT, "decode: nonzero padding bits in block %zu", i / bl);
        p += nb;
    }
    return CX_OK;
}

/* ---- error feedback ---- */

int encoding_encode_residual(encoding_kind kind, const float *x, size_t n, uint8_t *out, size_t outlen,
                             float *resid, float *tmp, char *err, size_t errlen)
{
    int rc = encoding_encode(kind, x, n, out, outlen, err, errlen);
    if (rc)
        return rc;
    rc = encoding_decode(kind, out, encoding_size(kind, n), tmp, n, err, errlen);
    for (size_t i = 0; i < n; i++)
        resid[i] = rc ? 0.0f : x[i] - tmp[i];
    return rc;
}

/* ---- bounds ---- */

double encoding_error_bound(encoding_kind kind, float xi, float block_maxabs)
{
    if (kind == ENCODING_F32)
        return 0.0;
    if (kind == ENCODING_BF16) /* + half a bf16 subnormal ulp (2^-134) */
        return fabs((double)xi) * 0x1.0p-8 + 0x1.0p-134;
    if (kind == ENCODING_Q2) /* |y - x| <= max(s, |x| - 3s) <= maxabs, as s <= maxabs */
        return fabs((double)block_maxabs) * (1.0 + 1e-6) + 2.0 * 0x1.0p-149;
    if (!encoding_is_int(kind))
        return INFINITY;
    /* scale/2 plus the float rounding of scale, x*inv and q*scale (a few ulps
     * of maxabs) */
    double M = fabs((double)block_maxabs);
    return M / (2.0 * encoding_qmax(kind)) * (1.0 + 1e-6) + M * 1e-6 + 2.0 * 0x1.0p-149;
}
