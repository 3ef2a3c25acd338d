/* optim.h - the inner optimizer (AdamW), its learning-rate schedule, and the
 * outer optimizer (SGD with Nesterov momentum), all over flat float ranges.
 *
 * AdamW (Loshchilov & Hutter), per element i at step t (1-based):
 *   m = b1 m + (1-b1) g;   v = b2 v + (1-b2) g^2
 *   mhat = m / (1-b1^t);   vhat = v / (1-b2^t)
 *   p -= lr * (mhat / (sqrt(vhat) + eps) + wd * decay[i] * p)
 * Decoupled weight decay, scaled by lr (as in PyTorch AdamW), applied only to
 * elements marked with adamw_set_decay (by convention: matrices and the
 * embedding; never biases -- see model_tensor.weight_decay). Defaults:
 * b1 0.9, b2 0.95, eps 1e-8, wd 0.1.
 *
 * The moments m, v are flat arrays owned by the adamw object and exposed so
 * that a checkpoint can save and restore them with the step counter.
 *
 * Outer Nesterov (DiLoCo): for an outer gradient delta = theta_base - theta_local
 * (averaged over learners),
 *   buf <- mu buf + delta;   theta <- theta - lr (delta + mu buf)
 * Stateless function over caller-owned arrays: the syncer keeps theta and
 * buf (one flat array each; a fragment's state is its ranges of them).
 *
 * Not here: gradient averaging across learners (merge.h), fragments.
 */
#ifndef CX_OPTIM_H
#define CX_OPTIM_H

#include <stddef.h>
#include <stdint.h>

typedef struct adamw adamw; /* opaque */

typedef struct adamw_config {
    float beta1;        /* first-moment decay (default 0.9) */
    float beta2;        /* second-moment decay (default 0.95) */
    float eps;          /* denominator floor (default 1e-8) */
    float weight_decay; /* decoupled decay per unit lr (default 0.1) */
} adamw_config;

void adamw_config_default(adamw_config *cfg);

/* Optimizer state for n parameters: m = v = 0, step 0, no element decayed
 * until adamw_set_decay marks it. cfg may be NULL (defaults). CX_EINVAL for
 * n == 0 or betas outside [0,1), eps <= 0, wd < 0. NULL on failure. */
adamw *adamw_new(size_t n, const adamw_config *cfg, char *err, size_t errlen);
void adamw_free(adamw *opt); /* NULL is a no-op */

/* Mark [offset, offset+length) as decayed (on=1) or not (on=0). Typically:
 * for each model tensor, adamw_set_decay(opt, t->offset, t->length, t->weight_decay).
 * CX_EINVAL if the range exceeds n. */
int adamw_set_decay(adamw *opt, size_t offset, size_t length, int on, char *err, size_t errlen);

/* One step over all n elements with learning rate lr: increments the step
 * counter, then updates params in place from grads. No allocation. With a
 * pool set, the elements are split over its threads in fixed blocks; the
 * result is bit-identical to the serial step. */
void adamw_step(adamw *opt, float *params, const float *grads, float lr);

/* Run adamw_step's element loop on pool (borrowed: it must outlive its use
 * here, e.g. model_pool(m) of the model being trained); NULL: the caller's
 * thread only (the default). */
struct cx_pool;
void adamw_set_pool(adamw *opt, struct cx_pool *pool);

size_t adamw_size(const adamw *opt);          /* n */
float *adamw_m(adamw *opt);                   /* borrowed, n floats (checkpoint) */
float *adamw_v(adamw *opt);                   /* borrowed, n floats (checkpoint) */
uint64_t adamw_steps(const adamw *opt);       /* steps taken (t of the last step) */
void adamw_set_steps(adamw *opt, uint64_t t); /* restore from a checkpoint */
/* Zero m and v of [offset, offset+length) (e.g. after adopting foreign params
 * there). CX_EINVAL if out of range. */
int adamw_reset_range(adamw *opt, size_t offset, size_t length, char *err, size_t errlen);

/* Linear warmup from 0 to lr_max over `warmup` steps, then cosine decay to
 * lr_min at `total`, lr_min after. step is the 0-based index of the step
 * about to be taken:
 *   step < warmup:  lr_max * (step + 1) / warmup
 *   else:           lr_min + (lr_max - lr_min) * 0.5 (1 + cos(pi * min(1, (step - warmup) / max(1, total -
 * warmup)))) So lr_at(warmup-1) = lr_max and lr_at(>= total) = lr_min. */
float optim_lr_at(int64_t step, int64_t warmup, int64_t total, float lr_max, float lr_min);

/* Global L2 norm of g[0..n) (accumulated in double). If max_norm > 0 and
 * the norm exceeds it, scale g in place to norm max_norm. Returns the norm
 * before clipping (NaN/Inf propagate: the caller checks isfinite). */
double optim_clip_grad_norm(float *g, size_t n, double max_norm);

/* ---- outer optimizer ---- */

#define NESTEROV_DEFAULT_LR 0.7f
#define NESTEROV_DEFAULT_MOMENTUM 0.9f

/* theta [n] -= lr (delta + mu buf') where buf' = mu buf + delta (buf [n]
 * updated in place). delta is the averaged outer gradient. */
void nesterov_step(float *theta, float *buf, const float *delta, size_t n, float lr, float mu);

#endif
