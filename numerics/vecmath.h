/* vecmath.h - an expf that GCC and clang vectorise, for the elementwise
 * passes of the models (softmax, GELU's tanh). It is not a libm replacement:
 * no errno, no exceptions, and a narrower accuracy contract than glibc's.
 *
 * Why: a loop that calls expf() stays scalar (one libm call per element),
 * and in the gpt step the attention softmax and GELU spent more time in expf
 * than in their own arithmetic. vecmath_expf is branch-free straight-line
 * code (static inline, so it is inlined into the caller's loop), which the
 * vectoriser turns into 4 (SSE2) or more lanes.
 *
 * Contract: for x in [-87, 88] the relative error against expf is at most
 * 2e-7 (measured 1.2e-7, 1 float ulp on this grid; tests/unit/test_vecmath.c
 * checks it over the range).
 * Below ln FLT_MIN = -87.34 it returns 0 (expf is subnormal there), between
 * that and -87 a result near FLT_MIN, possibly subnormal; above 88 it returns
 * exp(88) ~ 1.65e38 rather than inf (callers only use it where that is the
 * same, e.g. 2 / (e + 1)); a NaN gives a NaN; -inf gives 0.
 */
#ifndef CX_VECMATH_H
#define CX_VECMATH_H

#include <stdint.h>
#include <string.h>

/* exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2]
 * (ln 2 split in two so r is exact), exp(r) by Cephes' degree-7 expf
 * polynomial, 2^n built in the exponent bits. The rounding adds and
 * subtracts 1.5 * 2^23, which rounds to nearest in the default mode without
 * floorf/rintf (not vectorisable under SSE2).
 *
 * The clamps and the special cases are bit masks, not ?: selects: GCC
 * (12, default -ftrapping-math) threads the selects' conditions into
 * branches around the float arithmetic that follows, and then refuses to
 * if-convert it ("tree could trap"), so the loop stayed scalar. */
static inline float vecmath_expf(float x)
{
    const float hi = 88.0f, lo = -87.33654f, magic = 12582912.0f; /* lo = ln FLT_MIN; 1.5 * 2^23 */
    int32_t xi, lo_i, hi_i;
    memcpy(&xi, &x, sizeof xi);
    memcpy(&lo_i, &lo, sizeof lo_i);
    memcpy(&hi_i, &hi, sizeof hi_i);
    int32_t in_lo = -(int32_t)(x >= lo), over_hi = -(int32_t)(x > hi); /* all ones or 0; a NaN: 0, 0 */
    xi = (xi & in_lo) | (lo_i & ~in_lo);
    xi = (hi_i & over_hi) | (xi & ~over_hi);
    float xc; /* x clamped to [lo, hi], a NaN to lo: the float-to-int below stays defined */
    memcpy(&xc, &xi, sizeof xc);
    float n = (xc * 1.44269504088896341f + magic) - magic;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    int32_t is_nan = -(int32_t)(x != x);
    bits = (bits & in_lo) | (0x7fc00000 & is_nan); /* x < lo: 2^n = 0; NaN: a NaN */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* CX_VEC_CLONES on a function with hot loops: the compiler builds it twice,
 * for AVX2 and for the baseline (SSE2), and the loader picks one for the CPU
 * it runs on (function multiversioning through an ifunc; GCC and clang on
 * x86-64). Only "avx2", not "fma": without FMA the compiler cannot contract
 * a*b+c, so both clones do the same IEEE operations in the same order on
 * each element and give the same bits; only the vector width differs.
 * Static helpers the function calls are inlined into each clone, so their
 * loops widen with it. Put it on static functions only (an exported one
 * wraps a static clone): clang 14 resolves a clone set in its own file, and
 * a call from another file fails to link. Off x86-64, and under TSan (whose
 * runtime is not up when ifunc resolvers run), it is nothing. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define CX_VEC_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CX_VEC_CLONES
#endif

#endif
