/* encoding.h - wire encodings of contributions (outer gradients) and
 * fragments: f32, bf16, blockwise symmetric int8 / int4 / int2, and q2, a
 * true 2-bit code.
 *
 * Byte layouts (all little-endian, no header; the length n is known from the
 * fragment table, so the encoded size is a function of (kind, n)):
 *   f32   n x float32                                     4n bytes
 *   bf16  n x uint16: the top 16 bits of the float32, rounded to nearest
 *         even (NaN stays NaN)                            2n bytes
 *   int8  per block of ENCODING_BLOCK (64) values (last block may be
 *         shorter, b values): float32 scale, then b x int8 q in [-127, 127]
 *   int4  float32 scale, then ceil(b/2) bytes: q in [-7, 7] as 4-bit two's
 *         complement, element 2j in the low nibble of byte j
 *   int2  float32 scale, then ceil(b/4) bytes: q in [-1, 1] as 2-bit two's
 *         complement, element 4j+k in bits 2k..2k+1 of byte j
 *   value = q * scale;  scale = maxabs(block) / Q with Q = 127, 7, 1;
 *   q = round-half-away(x / scale) clamped to [-Q, Q]; an all-zero block
 *   has scale 0 and q = 0. int2 is a ternary code {-s, 0, +s} spending 2
 *   bits on log2(3) = 1.58 bits of information: 2.5 bits/value at block 64.
 *   q2    per block of ENCODING_Q2_BLOCK (128) values (last block may be
 *         shorter): float32 scale s, then ceil(b/4) bytes of 2-bit codes u
 *         in 0..3, element 4j+k in bits 2k..2k+1 of byte j; value =
 *         (2u - 3) * s, so the levels are {-3s, -s, +s, +3s} (no zero).
 *         2 + 32/128 = 2.25 bits/value. Encode assigns each x to the nearest
 *         level (|x| > 2s -> 3s, x >= 0 -> positive). The scale is a
 *         least-squares fit, not a max-abs one: s0 = mean|x|/2, then two
 *         Lloyd steps (assign, refit s = sum(c|x|)/sum(c^2) with c in
 *         {1, 3}). On Gaussian-like deltas a max-abs scale (s = M/3) would put
 *         most values far from both inner levels; the fit minimises the mean
 *         square error instead, and an all-equal block decodes exactly.
 *
 * Error bounds (checked by the unit tests), per element x of a block with
 * maxabs M, decoded as y:
 *   f32   y == x
 *   bf16  |y - x| <= |x| * 2^-8 + 2^-134  (round to nearest even on an 8-bit
 *         mantissa; the constant is half a bf16 subnormal ulp)
 *   intQ  |y - x| <= scale / 2 = M / (2Q), up to float rounding of scale and
 *         the subnormal grid: encoding_error_bound() returns
 *         M/(2Q) * (1 + 1e-6) + M * 1e-6 + 2 * 2^-149.
 *   So int8 loses at most M/254, int4 M/14 and int2 M/2 per element.
 *   q2    |y - x| <= max(s, |x| - 3s) (nearest of the four levels); the fit
 *         keeps s <= M, so encoding_error_bound() returns the loose
 *         M * (1 + 1e-6) + 2 * 2^-149. The fitted scale trades this worst
 *         case for a lower mean square error than int2 (unit-tested).
 *
 * Non-finite input: encode never fails. f32/bf16 carry NaN/Inf through
 * (and bf16 rounds |x| above ~3.39e38 to Inf);
 * int encodings store a NaN scale for a block holding a non-finite value.
 * Decode rejects (CX_ECORRUPT) any non-finite or negative scale or value, a
 * q outside [-Q, Q] (-128, -8, -2; every q2 code is valid), nonzero padding bits at the end of a
 * ragged block, and a wrong length: so a poisoned
 * contribution is caught by the receiver's decode, never merged.
 */
#ifndef CX_ENCODING_H
#define CX_ENCODING_H

#include <stddef.h>
#include <stdint.h>

typedef enum encoding_kind {
    ENCODING_F32 = 0,
    ENCODING_BF16 = 1,
    ENCODING_INT8 = 2,
    ENCODING_INT4 = 3,
    ENCODING_INT2 = 4,
    ENCODING_Q2 = 5,
} encoding_kind;

#define ENCODING_COUNT 6
#define ENCODING_BLOCK 64     /* values per scale in the int encodings */
#define ENCODING_Q2_BLOCK 128 /* values per scale in q2 */

/* "f32" | "bf16" | "int8" | "int4" | "int2" | "q2" -> kind. CX_EINVAL naming the
 * value and listing the valid ones otherwise. */
/* The names, indexed by encoding_kind, NULL after the last (common/parse.h's
 * enum tables): trainer/config.c's `encoding` key parses with it. */
extern const char *const encoding_names[ENCODING_COUNT + 1];
/* Static name of a kind ("f32"...), "?" for an invalid value. */
const char *encoding_name(encoding_kind kind);

/* Bytes of an encoded vector of n floats. */
size_t encoding_size(encoding_kind kind, size_t n);

/* Encode in[0..n) into out (outlen must be >= encoding_size(kind, n), else
 * CX_EINVAL). Returns 0. Deterministic (the same input gives the same bytes). */
int encoding_encode(encoding_kind kind, const float *in, size_t n, uint8_t *out, size_t outlen, char *err,
                    size_t errlen);

/* Decode in[0..inlen) into out[0..n). CX_ECORRUPT if inlen !=
 * encoding_size(kind, n) (message says "length") or if the content is
 * non-finite/out of range (message says "non-finite" or "out of range" with
 * the element index). On failure out is unspecified. */
int encoding_decode(encoding_kind kind, const uint8_t *in, size_t inlen, float *out, size_t n, char *err,
                    size_t errlen);

/* Encode x[0..n) into out like encoding_encode, then resid[i] = x[i] -
 * decode(out)[i]: what the encoding lost, for error feedback (the caller
 * adds resid to its next vector of the same fragment). tmp holds n floats.
 * A non-finite x (its encoding does not decode) gives resid = 0 and
 * CX_ECORRUPT, with out still the encoding of x (the receiver refuses it).
 * CX_EINVAL as encoding_encode for a short buffer. */
int encoding_encode_residual(encoding_kind kind, const float *x, size_t n, uint8_t *out, size_t outlen,
                             float *resid, float *tmp, char *err, size_t errlen);

/* The documented per-element bound |decode(encode(x))_i - x_i| for element
 * x_i = xi whose block has maxabs block_maxabs (see the table above). */
double encoding_error_bound(encoding_kind kind, float xi, float block_maxabs);

/* ---- scalar helpers (exposed for tests) ---- */
uint16_t encoding_f32_to_bf16(float x); /* round to nearest even; NaN stays NaN */
float encoding_bf16_to_f32(uint16_t h);

#endif
