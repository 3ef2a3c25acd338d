/* gpt_impl.h - the pieces of the gpt layers that gpt.c's threaded step
 * splits its work into (private to numerics/gpt.c and numerics/gpt_layers.c;
 * users of the layers include gpt.h, users of the model model.h).
 *
 * Each writes a disjoint part of its layer's output and sums in the same
 * order as the whole layer, so any split into these pieces gives the bits of
 * the whole (docs/internals/model.md, "Threads").
 */
#ifndef CX_GPT_IMPL_H
#define CX_GPT_IMPL_H

#include <stdint.h>

/* Embedding backward, columns [c0, c1) of dwte and dwpe. */
void gpt_embed_backward_cols(float *dwte, float *dwpe, const float *dout, const uint8_t *inp, int B, int T,
                             int C, int c0, int c1);
/* Layernorm backward: rows [n0, n1) of dinp; columns [c0, c1) of dw, dbias. */
void gpt_layernorm_backward_rows(float *dinp, const float *dout, const float *inp, const float *w,
                                 const float *mean, const float *rstd, int C, int n0, int n1);
void gpt_layernorm_backward_cols(float *dw, float *dbias, const float *dout, const float *inp,
                                 const float *mean, const float *rstd, int N, int C, int c0, int c1);
/* Attention forward and backward of one (sequence b, head h) pair: _ref the
 * plain loops, the others two (forward) or four (backward) sgemms, twice
 * as many smaller ones at T >= 128 (split at T/2, skipping a zero block). */
void gpt_attention_forward_ref_pair(float *out, float *att, const float *inp, int b, int h, int T, int C,
                                    int NH);
void gpt_attention_forward_pair(float *out, float *att, const float *inp, int b, int h, int T, int C, int NH);
void gpt_attention_backward_ref_pair(float *dinp, float *datt, const float *dout, const float *inp,
                                     const float *att, int b, int h, int T, int C, int NH);
void gpt_attention_backward_pair(float *dinp, float *datt, const float *dout, const float *inp,
                                 const float *att, int b, int h, int T, int C, int NH);

#endif
