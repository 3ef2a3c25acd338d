/* model.h - the language models the learners train, behind one interface.
 *
 * A model is a const table of operations plus a private context, registered
 * by name in one static array in model.c ("mlp" today; a small transformer
 * can follow behind the same interface). Vocabulary: bytes (256 symbols);
 * inputs and targets are uint8_t.
 *
 * Memory (llm.c `malloc_and_point_parameters`): parameters are ONE flat float
 * array, gradients another of the same length, and each named tensor is a
 * range of it (see model_tensor). Optimizers and fragments work on flat
 * ranges of these arrays. Activations are allocated once in model_new() for
 * cfg->max_batch examples; forward/backward never allocate.
 *
 * What this module is not: it does not own an optimizer or data. It owns
 * threads only with cfg.threads > 1 (see model_new).
 * A model is used by one thread at a time.
 *
 * The "mlp" model (Bengio-style byte MLP LM), shapes for a batch of B:
 *
 *   inputs  [B, C] bytes ──embed (wte [256, E], shared by positions)──►
 *   x       [B, C*E]     (the C embeddings concatenated)
 *   hpre    [B, Hd]  = x @ W1^T + b1          W1 [Hd, C*E], b1 [Hd]
 *   h       [B, Hd]  = gelu_tanh(hpre)
 *   logits  [B, 256] = h @ W2^T + b2          W2 [256, Hd], b2 [256]
 *   loss             = mean_b -ln softmax(logits[b])[target[b]]   (nats)
 *
 * Tensor table of "mlp", in flat order: "wte" (embedding), "w1", "b1",
 * "w2", "b2". Defaults C=8, E=16, Hd=256: 102912 parameters.
 */
#ifndef CX_MODEL_H
#define CX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define MODEL_VOCAB 256       /* byte-level vocabulary */
#define MODEL_MAX_CONTEXT 128 /* upper bound on cfg.context (data cursors store this many bytes) */

typedef struct model model; /* opaque */

/* Hyper-parameters. Zero fields mean "default" in model_new(). */
typedef struct model_config {
    int context;   /* C: previous bytes seen, 1..MODEL_MAX_CONTEXT (default 8) */
    int embed;     /* E: embedding width per byte, 1..1024 (default 16) */
    int hidden;    /* Hd: hidden units, 1..16384 (default 256) */
    int max_batch; /* examples per internal chunk; activations sized for it, 1..65536 (default 32) */
    int layers;    /* gpt: transformer blocks L, 1..64 (default 4); mlp: unused */
    int heads;     /* gpt: attention heads, divides embed (default 4); mlp: unused */
    int threads;   /* threads of the model's own loops, 1..64 (default 1); gpt only, see model_new */
} model_config;

/* One named tensor: a range of the flat parameter (and gradient) array. */
typedef struct model_tensor {
    const char *name; /* static string, e.g. "w1" */
    size_t offset;    /* floats from the start of the flat array */
    size_t length;    /* floats */
    int rows;         /* leading dimension (1 for vectors) */
    int cols;         /* trailing dimension */
    int is_embedding; /* 1: merged with the plain weighted average, never RDA */
    int weight_decay; /* 1: AdamW applies decoupled weight decay (matrices, not biases) */
} model_tensor;

/* Fill cfg with the defaults (C=8, E=16, Hd=256, max_batch=32). */
void model_config_default(model_config *cfg);

/* 1 if kind names a registered model ("mlp"), else 0. */
int model_kind_known(const char *kind);

/* Threads: with cfg->threads = N > 1 a "gpt" model starts a pool of N - 1
 * worker threads (common/pool.h) that runs its loops and matmuls in fixed
 * chunks (each matmul split into row blocks, one cblas_sgemm per block), and
 * sets OpenBLAS to 1 thread (openblas_set_num_threads, process-wide) so the
 * two do not oversubscribe the cores. N = 1 starts nothing and leaves
 * OpenBLAS alone. Results with N > 1 equal N = 1's up to float reassociation
 * inside the split sgemms. "mlp" ignores threads.
 *
 * Create a model of the named kind. cfg may be NULL (all defaults); zero
 * fields take their defaults; out-of-range fields fail with CX_EINVAL naming
 * the field. Parameters are initialised deterministically from seed (same
 * seed, same config -> bit-identical parameters on every machine):
 *   wte ~ N(0, 1), w1 ~ N(0, 1/sqrt(C*E)), w2 ~ N(0, 0.02), biases 0,
 * so a fresh model's loss is close to ln 256 = 5.545 nats.
 * Returns NULL on failure with the reason in err. */
model *model_new(const char *kind, const model_config *cfg, uint64_t seed, char *err, size_t errlen);
void model_free(model *m); /* NULL is a no-op */

const char *model_kind(const model *m);               /* "mlp" */
const model_config *model_get_config(const model *m); /* effective config (defaults applied) */

size_t model_num_params(const model *m);
float *model_params(model *m); /* borrowed, model_num_params floats */
float *model_grads(model *m);  /* borrowed, model_num_params floats */

int model_num_tensors(const model *m);
const model_tensor *model_tensor_get(const model *m, int i); /* 0 <= i < num_tensors, else NULL */
const model_tensor *model_tensors(const model *m);           /* the whole table, borrowed */

/* Forward + backward over B examples: inputs [B, C] bytes (row b = the C
 * bytes before target b, oldest first), targets [B]. Gradients are
 * OVERWRITTEN with d(mean loss)/d(params). Returns the mean loss in nats.
 * Any B >= 1 is accepted: batches larger than max_batch are processed in
 * chunks of max_batch (grads weighted so the result is the full-batch mean).
 * Does not allocate. */
float model_forward_backward(model *m, const uint8_t *inputs, const uint8_t *targets, int B);

/* Forward only: mean loss in nats over B examples (any B >= 1, chunked).
 * Gradients are left untouched. */
float model_loss(model *m, const uint8_t *inputs, const uint8_t *targets, int B);

/* Floating-point operations per trained token for forward + backward
 * (matmuls only: 6 * (C*E*Hd + Hd*256)), for GFLOP/s figures. */
double model_flops_per_token(const model *m);

/* Scale the gradients so that their global L2 norm is at most max_norm
 * (max_norm <= 0: no-op). Returns the norm before clipping. */
double model_clip_grad_norm(model *m, double max_norm);

/* The model's pool (borrowed; NULL with 1 thread), e.g. for adamw_set_pool. */
struct cx_pool *model_pool(model *m);

/* Use the plain reference loops instead of cblas_sgemm for every matmul of
 * this model (1) or BLAS (0, the default). For tests comparing the paths. */
void model_set_reference_kernels(model *m, int on);

/* ---- layer kernels (exposed for tests and benches) ----
 *
 * Argument order: outputs, inputs, weights, sizes. Backward passes
 * ACCUMULATE (+=) into their gradient outputs, as in llm.c; the caller zeroes
 * them. Shapes in the comments; all arrays row-major.
 */

/* out [B, C*E] = concat_c wte[inp[b, c], :];  inp [B, C], wte [256, E] */
void model_embed_forward(float *out, const uint8_t *inp, const float *wte, int B, int C, int E);
/* dwte [256, E] += scatter of dout [B, C*E] */
void model_embed_backward(float *dwte, const float *dout, const uint8_t *inp, int B, int C, int E);

/* out [B, OC] = inp [B, IC] @ weight[OC, IC]^T + bias [OC] (bias may be NULL).
 * _forward uses cblas_sgemm; _forward_ref is the plain triple loop. */
void model_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int B, int IC,
                          int OC);
void model_matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias, int B,
                              int IC, int OC);
/* dinp [B, IC] += dout @ weight;  dweight [OC, IC] += dout^T @ inp;
 * dbias [OC] += sum_b dout (dbias may be NULL; dinp may be NULL to skip). */
void model_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                           const float *weight, int B, int IC, int OC);
void model_matmul_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, int B, int IC, int OC);

/* out [N] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
void model_gelu_forward(float *out, const float *inp, size_t N);
/* dinp [N] += gelu'(inp) * dout */
void model_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N);

/* probs [B, V] = softmax(logits [B, V]); losses [B] = -ln probs[b, target[b]].
 * Returns the mean of losses (nats). Numerically stable (max subtracted). */
float model_xent_forward(float *probs, float *losses, const float *logits, const uint8_t *targets, int B,
                         int V);
/* dlogits [B, V] += (probs - onehot(target)) * scale  (scale = 1/B for a mean) */
void model_xent_backward(float *dlogits, const float *probs, const uint8_t *targets, int B, int V,
                         float scale);

#endif
