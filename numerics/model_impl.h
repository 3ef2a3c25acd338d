/* model_impl.h - what a model kind's file sees of the model object.
 *
 * Private to trainer/: model.c (registry, public API, the "mlp" kind) and
 * each other kind's file (gpt.c) include it. Users of models include
 * model.h only. A kind defines one const model_ops and model.c lists it in
 * its registry.
 */
#ifndef CX_MODEL_IMPL_H
#define CX_MODEL_IMPL_H

#include "common/pool.h"
#include "common/rng.h"
#include "numerics/model.h"

typedef struct model_ops {
    const char *kind;
    /* Fill every field of cfg with this kind's defaults. */
    void (*defaults)(model_config *cfg);
    /* Fill m->tensors, m->num_tensors and m->num_params from m->cfg (already
     * validated, defaults applied). Touches nothing else. */
    void (*layout)(model *m);
    /* With params/grads allocated: allocate ctx (activations for max_batch)
     * and init params from seed. */
    int (*create)(model *m, uint64_t seed, char *err, size_t errlen);
    void (*destroy)(model *m);
    /* One chunk of b <= max_batch examples. fwd_bwd accumulates scale *
     * d(sum of chunk losses)/d(params) into grads and returns the SUM of the
     * chunk's losses; loss returns the sum only. */
    double (*fwd_bwd)(model *m, const uint8_t *inputs, const uint8_t *targets, int b, float scale);
    double (*loss)(model *m, const uint8_t *inputs, const uint8_t *targets, int b);
    double (*flops_per_token)(const model *m);
} model_ops;

#define MODEL_MAX_TENSORS 16

struct model {
    const model_ops *ops;                    /* the kind's operations */
    model_config cfg;                        /* effective config */
    size_t num_params;                       /* floats in params and grads */
    float *params;                           /* [num_params], one allocation */
    float *grads;                            /* [num_params], one allocation */
    model_tensor tensors[MODEL_MAX_TENSORS]; /* ranges of params/grads */
    int num_tensors;                         /* used entries of tensors */
    int reference;                           /* 1: plain loops instead of BLAS */
    cx_pool *pool;                           /* cfg.threads > 1: the kind's loops run on it; else NULL */
    void *ctx;                               /* the kind's private state */
};

extern const model_ops gpt_ops;

/* p[0..n) ~ N(0, std^2) from r (deterministic on every machine). */
void model_fill_normal(float *p, size_t n, double std, cx_rng *r);

/* GELU that keeps t = tanh(..) of the forward for the backward pass. */
void model_gelu_forward_cached(float *out, float *tcache, const float *inp, size_t N);
void model_gelu_backward_cached(float *dinp, const float *inp, const float *tcache, const float *dout,
                                size_t N);

#endif
