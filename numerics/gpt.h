/* gpt.h - layer kernels of the "gpt" model kind (a byte-level decoder-only
 * transformer; model shapes and the example convention in gpt.c's header).
 *
 * The model itself is used through model.h (model_new("gpt", ...)); this
 * header only exposes its layers (numerics/gpt_layers.c) for tests and benches. Config fields:
 * context = T (sequence length), embed = C (width), hidden = MLP width,
 * layers = L, heads = NH (C % NH == 0), max_batch = sequences per chunk.
 * Defaults: T=128, C=128, hidden=512, L=4, NH=4, max_batch=8 (842,496 params
 * with T=128).
 *
 * Argument order: outputs, inputs, weights, sizes; all row-major. Backward
 * passes ACCUMULATE (+=) into their gradient outputs.
 */
#ifndef CX_GPT_H
#define CX_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "numerics/model.h"

/* Softmax outputs [b, T, 256] of the last forward pass of a "gpt" model
 * (borrowed; valid until the next pass). For tests: row t of example i is the
 * distribution of the byte after position t. */
const float *gpt_last_probs(const model *m);

/* out [B, T, C] = wte[inp[b, t]] + wpe[t];  inp [B, T], wte [256, C], wpe [T, C] */
void gpt_embed_forward(float *out, const uint8_t *inp, const float *wte, const float *wpe, int B, int T,
                       int C);
void gpt_embed_backward(float *dwte, float *dwpe, const float *dout, const uint8_t *inp, int B, int T, int C);

/* out [N, C] = (inp - mean) * rstd * w + bias; mean, rstd [N] kept for backward. */
void gpt_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                           const float *bias, int N, int C);
void gpt_layernorm_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                            const float *w, const float *mean, const float *rstd, int N, int C);

/* Causal multi-head self-attention. inp = qkv [B, T, 3C] (q, k, v; head h in
 * columns h*C/NH..), att [B, NH, T, T] = softmax (zero above the diagonal),
 * out [B, T, C]. _ref: plain loops; the others: cblas_sgemm per (b, head).
 * Backward: dinp [B, T, 3C] accumulates; datt [B, NH, T, T] is scratch. */
void gpt_attention_forward(float *out, float *att, const float *inp, int B, int T, int C, int NH);
void gpt_attention_forward_ref(float *out, float *att, const float *inp, int B, int T, int C, int NH);
void gpt_attention_backward(float *dinp, float *datt, const float *dout, const float *inp, const float *att,
                            int B, int T, int C, int NH);
void gpt_attention_backward_ref(float *dinp, float *datt, const float *dout, const float *inp,
                                const float *att, int B, int T, int C, int NH);

/* out [N] = a + b;  da, db [N] += dout */
void gpt_residual_forward(float *out, const float *a, const float *b, size_t N);
void gpt_residual_backward(float *da, float *db, const float *dout, size_t N);

#endif
