/* optim.c - AdamW, the warmup + cosine schedule, gradient clipping and the
 * outer Nesterov step. See optim.h for the formulas.
 */
#include "numerics/optim.h"

#include <math.h>
#include <stdlib.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif
#include <string.h>

#include "common/err.h"
#include "common/pool.h"

struct adamw {
    adamw_config cfg; /* hyper-parameters */
    size_t n;         /* parameters */
    uint64_t t;       /* steps taken */
    float *m;         /* [n] first moment */
    float *v;         /* [n] second moment */
    float *decay;     /* [n] 1.0 = apply weight decay, 0.0 = not */
    cx_pool *pool;    /* borrowed: adamw_step splits the elements over it; NULL = caller only */
};

/* ---- AdamW ---- */

void adamw_config_default(adamw_config *cfg)
{
    cfg->beta1 = 0.9f;
    cfg->beta2 = 0.95f;
    cfg->eps = 1e-8f;
    cfg->weight_decay = 0.1f;
}

adamw *adamw_new(size_t n, const adamw_config *cfg, char *err, size_t errlen)
{
    adamw_config c;
    adamw_config_default(&c);
    if (cfg)
        c = *cfg;
    if (n == 0) {
        cx_fail(err, errlen, CX_EINVAL, "adamw: no parameters");
        return NULL;
    }
    if (!(c.beta1 >= 0.0f && c.beta1 < 1.0f) || !(c.beta2 >= 0.0f && c.beta2 < 1.0f)) {
        cx_fail(err, errlen, CX_EINVAL, "adamw: betas (%g, %g) must be in [0, 1)", c.beta1, c.beta2);
        return NULL;
    }
    if (!(c.eps > 0.0f) || !(c.weight_decay >= 0.0f) || !isfinite(c.weight_decay)) {
        cx_fail(err, errlen, CX_EINVAL, "adamw: eps=%g must be > 0 and weight_decay=%g >= 0", c.eps,
                c.weight_decay);
        return NULL;
    }
    adamw *o = calloc(1, sizeof(*o));
    if (!o) {
        cx_fail(err, errlen, CX_ENOMEM, "adamw: out of memory");
        return NULL;
    }
    o->cfg = c;
    o->n = n;
    o->m = calloc(n, sizeof(float));
    o->v = calloc(n, sizeof(float));
    o->decay = calloc(n, sizeof(float));
    if (!o->m || !o->v || !o->decay) {
        cx_fail(err, errlen, CX_ENOMEM, "adamw: out of memory for %zu parameters", n);
        adamw_free(o);
        return NULL;
    }
    return o;
}

void adamw_free(adamw *opt)
{
    if (!opt)
        return;
    free(opt->m);
    free(opt->v);
    free(opt->decay);
    free(opt);
}

static int adamw_check_range(const adamw *opt, size_t offset, size_t length, char *err, size_t errlen)
{
    if (offset > opt->n || length > opt->n - offset)
        return cx_fail(err, errlen, CX_EINVAL, "adamw: range [%zu, +%zu) outside %zu parameters", offset,
                       length, opt->n);
    return CX_OK;
}

int adamw_set_decay(adamw *opt, size_t offset, size_t length, int on, char *err, size_t errlen)
{
    int rc = adamw_check_range(opt, offset, length, err, errlen);
    if (rc != CX_OK)
        return rc;
    for (size_t i = 0; i < length; i++)
        opt->decay[offset + i] = on ? 1.0f : 0.0f;
    return CX_OK;
}

/* The element loop. restrict: params, grads, m, v never overlap (adamw owns
 * m, v). GCC will not vectorise a loop calling sqrtf (the errno path), and
 * this loop is a third of a small-batch step, so on x86-64 the body is
 * written with SSE intrinsics (baseline on every x86-64 CPU); the scalar
 * loop does the tail and other architectures. Same arithmetic either way. */
static inline float adamw_elem(float *restrict p, float gi, float *restrict m, float *restrict v, float decay,
                               float b1, float b2, float eps, float wd, float c1, float c2, float lr)
{
    float mi = b1 * *m + (1.0f - b1) * gi;
    float vi = b2 * *v + (1.0f - b2) * gi * gi;
    *m = mi;
    *v = vi;
    float upd = (mi * c1) / (sqrtf(vi * c2) + eps) + wd * decay * *p;
    return *p - lr * upd;
}

static void adamw_kernel(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                         const float *restrict dk, size_t n, float b1, float b2, float eps, float wd,
                         float c1, float c2, float lr)
{
    size_t i = 0;
#if defined(__SSE2__)
    const __m128 vb1 = _mm_set1_ps(b1), vb1c = _mm_set1_ps(1.0f - b1);
    const __m128 vb2 = _mm_set1_ps(b2), vb2c = _mm_set1_ps(1.0f - b2);
    const __m128 veps = _mm_set1_ps(eps), vwd = _mm_set1_ps(wd), vc1 = _mm_set1_ps(c1);
    const __m128 vc2 = _mm_set1_ps(c2), vlr = _mm_set1_ps(lr);
    for (; i + 4 <= n; i += 4) {
        __m128 gi = _mm_loadu_ps(g + i), pi = _mm_loadu_ps(p + i);
        __m128 mi = _mm_add_ps(_mm_mul_ps(vb1, _mm_loadu_ps(m + i)), _mm_mul_ps(vb1c, gi));
        __m128 vi = _mm_add_ps(_mm_mul_ps(vb2, _mm_loadu_ps(v + i)), _mm_mul_ps(vb2c, _mm_mul_ps(gi, gi)));
        _mm_storeu_ps(m + i, mi);
        _mm_storeu_ps(v + i, vi);
        __m128 den = _mm_add_ps(_mm_sqrt_ps(_mm_mul_ps(vi, vc2)), veps);
        __m128 upd = _mm_add_ps(_mm_div_ps(_mm_mul_ps(mi, vc1), den),
                                _mm_mul_ps(_mm_mul_ps(vwd, _mm_loadu_ps(dk + i)), pi));
        _mm_storeu_ps(p + i, _mm_sub_ps(pi, _mm_mul_ps(vlr, upd)));
    }
#endif
    for (; i < n; i++)
        p[i] = adamw_elem(p + i, g[i], m + i, v + i, dk[i], b1, b2, eps, wd, c1, c2, lr);
}

/* One call of adamw_step: the arrays and the step's scalars. */
typedef struct adamw_job {
    adamw *opt;         /* state */
    float *params;      /* [n] updated */
    const float *grads; /* [n] */
    float c1, c2, lr;   /* bias corrections, learning rate */
} adamw_job;

#define ADAMW_BLOCK 64 /* elements per pool index: chunk edges stay 16-byte aligned */

static void adamw_chunk(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const adamw_job *j = ctx;
    adamw *o = j->opt;
    size_t a = lo * ADAMW_BLOCK, b = hi * ADAMW_BLOCK < o->n ? hi * ADAMW_BLOCK : o->n;
    adamw_kernel(j->params + a, j->grads + a, o->m + a, o->v + a, o->decay + a, b - a, o->cfg.beta1,
                 o->cfg.beta2, o->cfg.eps, o->cfg.weight_decay, j->c1, j->c2, j->lr);
}

void adamw_set_pool(adamw *opt, cx_pool *pool)
{
    opt->pool = pool;
}

void adamw_step(adamw *opt, float *params, const float *grads, float lr)
{
    opt->t++;
    /* bias corrections in double: b^t underflows gracefully */
    const float c1 = (float)(1.0 / (1.0 - pow((double)opt->cfg.beta1, (double)opt->t)));
    const float c2 = (float)(1.0 / (1.0 - pow((double)opt->cfg.beta2, (double)opt->t)));
    /* Elementwise, and the SSE body and the scalar tail do the same IEEE
     * arithmetic, so any split gives the bits of the serial loop. */
    adamw_job j = {.opt = opt, .params = params, .grads = grads, .c1 = c1, .c2 = c2, .lr = lr};
    cx_pool_for(opt->pool, (opt->n + ADAMW_BLOCK - 1) / ADAMW_BLOCK, adamw_chunk, &j);
}

size_t adamw_size(const adamw *opt)
{
    return opt->n;
}
float *adamw_m(adamw *opt)
{
    return opt->m;
}
float *adamw_v(adamw *opt)
{
    return opt->v;
}
uint64_t adamw_steps(const adamw *opt)
{
    return opt->t;
}
void adamw_set_steps(adamw *opt, uint64_t t)
{
    opt->t = t;
}

int adamw_reset_range(adamw *opt, size_t offset, size_t length, char *err, size_t errlen)
{
    int rc = adamw_check_range(opt, offset, length, err, errlen);
    if (rc != CX_OK)
        return rc;
    memset(opt->m + offset, 0, length * sizeof(float));
    memset(opt->v + offset, 0, length * sizeof(float));
    return CX_OK;
}

/* ---- schedule and clipping ---- */

float optim_lr_at(int64_t step, int64_t warmup, int64_t total, float lr_max, float lr_min)
{
    if (step < 0)
        step = 0;
    if (step < warmup)
        return lr_max * (float)(step + 1) / (float)warmup;
    if (step >= total)
        return lr_min;
    int64_t span = total - warmup;
    if (span < 1)
        span = 1;
    double frac = (double)(step - warmup) / (double)span;
    if (frac > 1.0)
        frac = 1.0;
    return (float)(lr_min + (lr_max - lr_min) * 0.5 * (1.0 + cos(M_PI * frac)));
}

double optim_clip_grad_norm(float *g, size_t n, double max_norm)
{
    double ss = 0.0;
    for (size_t i = 0; i < n; i++)
        ss += (double)g[i] * g[i];
    double norm = sqrt(ss);
    if (max_norm > 0.0 && isfinite(norm) && norm > max_norm) {
        float s = (float)(max_norm / norm);
        for (size_t i = 0; i < n; i++)
            g[i] *= s;
    }
    return norm;
}

/* ---- outer Nesterov ---- */

void nesterov_step(float *theta, float *buf, const float *delta, size_t n, float lr, float mu)
{
    for (size_t i = 0; i < n; i++) {
        float b = mu * buf[i] + delta[i];
        buf[i] = b;
        theta[i] -= lr * (delta[i] + mu * b);
    }
}
