/* numcheck.h - shared helpers of the model gradient tests (test_model.c,
 * test_gpt.c): seeded uniform fills from common/rng.h and the linear
 * functional L = sum_i a[i] * b[i] whose gradient w.r.t. a is b, and the
 * central difference of a whole model's loss. Each test file keeps its own
 * tolerance check, stated in its header. */
#ifndef CX_TESTS_NUMCHECK_H
#define CX_TESTS_NUMCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "numerics/model.h"

static cx_rng numcheck_rng;

static inline void rng_reset(uint64_t seed)
{
    cx_rng_seed(&numcheck_rng, seed);
}

static inline double urand(void) /* [0, 1) */
{
    return cx_rng_uniform(&numcheck_rng);
}

static inline void fill_uniform(float *p, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        p[i] = lo + (hi - lo) * (float)urand();
}

/* n bytes, each uniform in [0, modulo) */
static inline void fill_bytes(uint8_t *p, size_t n, int modulo)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(urand() * modulo);
}

static inline double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* (L(p + eps) - L(p - eps)) / 2 eps for L = model_loss(m, in, tg, B) and p
 * one of m's parameters; *p is restored. */
static inline double model_loss_fd(model *m, const uint8_t *in, const uint8_t *tg, int B, float *p, float eps)
{
    float save = *p;
    *p = save + eps;
    double lp = model_loss(m, in, tg, B);
    *p = save - eps;
    double lm = model_loss(m, in, tg, B);
    *p = save;
    return (lp - lm) / (2 * eps);
}

#endif
