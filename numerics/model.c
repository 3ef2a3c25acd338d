/* model.c - the model registry and the byte-level MLP language model.
 *
 * See model.h for shapes. The layer kernels follow llm.c's train_gpt2.c:
 * each layer is a _forward/_backward pair, argument order (outputs, inputs,
 * weights, sizes), backward passes accumulate into gradients.
 */
#include "numerics/model.h"
#include "numerics/model_impl.h"
#include "numerics/vecmath.h"

#include "common/rng.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

/* ---- model interface: vtable + registry ---- */

static const model_ops mlp_ops;

static const model_ops *const model_registry[] = {&mlp_ops, &gpt_ops};

static const model_ops *model_find(const char *kind)
{
    if (!kind)
        return NULL;
    for (size_t i = 0; i < sizeof(model_registry) / sizeof(model_registry[0]); i++)
        if (strcmp(model_registry[i]->kind, kind) == 0)
            return model_registry[i];
    return NULL;
}

/* ---- deterministic init (common/rng.h) ---- */

void model_fill_normal(float *p, size_t n, double std, cx_rng *r)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(std * cx_rng_normal(r));
}

/* ---- layer: embedding ---- */

void model_embed_forward(float *out, const uint8_t *inp, const float *wte, int B, int C, int E)
{
    /* out [B, C*E], inp [B, C], wte [256, E] */
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            memcpy(out + ((size_t)b * C + c) * E, wte + (size_t)inp[b * C + c] * E,
                   (size_t)E * sizeof(float));
}

void model_embed_backward(float *dwte, const float *dout, const uint8_t *inp, int B, int C, int E)
{
    /* dwte [256, E] += dout [B, C*E] scattered by inp [B, C] */
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            float *dw = dwte + (size_t)inp[b * C + c] * E;
            const float *d = dout + ((size_t)b * C + c) * E;
            for (int e = 0; e < E; e++)
                dw[e] += d[e];
        }
}

/* ---- layer: matmul (BLAS and reference) ---- */

void model_matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias, int B,
                              int IC, int OC)
{
    /* out [B, OC] = inp [B, IC] @ weight [OC, IC]^T + bias [OC] */
    for (int b = 0; b < B; b++) {
        const float *x = inp + (size_t)b * IC;
        for (int o = 0; o < OC; o++) {
            const float *w = weight + (size_t)o * IC;
            float acc = bias ? bias[o] : 0.0f;
            for (int i = 0; i < IC; i++)
                acc += x[i] * w[i];
            out[(size_t)b * OC + o] = acc;
        }
    }
}

void model_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int B, int IC,
                          int OC)
{
    /* out [B, OC] = bias broadcast, then += inp @ weight^T */
    float beta = 0.0f;
    if (bias) {
        for (int b = 0; b < B; b++)
            memcpy(out + (size_t)b * OC, bias, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, OC, IC, 1.0f, inp, IC, weight, IC, beta, out, OC);
}

void model_matmul_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, int B, int IC, int OC)
{
    /* dinp [B, IC] += dout [B, OC] @ weight [OC, IC] */
    if (dinp)
        for (int b = 0; b < B; b++)
            for (int o = 0; o < OC; o++) {
                float d = dout[(size_t)b * OC + o];
                const float *w = weight + (size_t)o * IC;
                float *di = dinp + (size_t)b * IC;
                for (int i = 0; i < IC; i++)
                    di[i] += d * w[i];
            }
    /* dweight [OC, IC] += dout^T @ inp;  dbias [OC] += sum_b dout */
    for (int o = 0; o < OC; o++) {
        float *dw = dweight + (size_t)o * IC;
        for (int b = 0; b < B; b++) {
            float d = dout[(size_t)b * OC + o];
            const float *x = inp + (size_t)b * IC;
            for (int i = 0; i < IC; i++)
                dw[i] += d * x[i];
            if (dbias)
                dbias[o] += d;
        }
    }
}

void model_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                           const float *weight, int B, int IC, int OC)
{
    if (dinp) /* dinp [B, IC] += dout [B, OC] @ weight [OC, IC] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, IC, OC, 1.0f, dout, OC, weight, IC, 1.0f,
                    dinp, IC);
    /* dweight [OC, IC] += dout^T [OC, B] @ inp [B, IC] */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, B, 1.0f, dout, OC, inp, IC, 1.0f, dweight,
                IC);
    if (dbias)
        for (int b = 0; b < B; b++) {
            const float *d = dout + (size_t)b * OC;
            for (int o = 0; o < OC; o++)
                dbias[o] += d[o];
        }
}

/* ---- layer: GELU (tanh approximation) ---- */

#define MODEL_GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* tanh via expf: 1 - 2 / (e^{2u} + 1). glibc's tanhf goes through expm1f,
 * which is several times slower than expf; the absolute error here is a few
 * float ulps (the relative error near 0 is larger, but GELU only ever uses
 * 0.5 (1 + tanh) and 1 - tanh^2, where the absolute error is what counts).
 * Saturates correctly: e^{2u} = inf gives 1, e^{2u} = 0 gives -1. */
static inline float model_tanh(float u)
{
    return 1.0f - 2.0f / (expf(2.0f * u) + 1.0f);
}

/* The same with vecmath_expf, which vectorises (vecmath.h): the cached GELU
 * pair of the models' step. Its absolute error stays a few float ulps (e^{2u}
 * relative error <= 2e-7; vecmath_expf(2u) saturating at e^88 still gives
 * exactly 1). model_gelu_forward/_backward keep expf as the reference. */
static inline float model_tanh_fast(float u)
{
    return 1.0f - 2.0f / (vecmath_expf(2.0f * u) + 1.0f);
}

/* GELU forward that also stores t = tanh(k (x + 0.044715 x^3)) for the
 * backward pass (the model's path; model_gelu_forward is the plain layer). */
void model_gelu_forward_cached(float *out, float *tcache, const float *inp, size_t N)
{
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float t = model_tanh_fast(MODEL_GELU_K * (x + 0.044715f * x * x * x));
        tcache[i] = t;
        out[i] = 0.5f * x * (1.0f + t);
    }
}

/* dinp [N] += gelu'(x) dout with t from the forward pass. */
void model_gelu_backward_cached(float *dinp, const float *inp, const float *tcache, const float *dout,
                                size_t N)
{
    for (size_t i = 0; i < N; i++) {
        float x = inp[i], t = tcache[i];
        float g =
            0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * MODEL_GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += g * dout[i];
    }
}

void model_gelu_forward(float *out, const float *inp, size_t N)
{
    /* out [N] = 0.5 x (1 + tanh(k (x + 0.044715 x^3))) */
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float u = MODEL_GELU_K * (x + 0.044715f * x * x * x);
        out[i] = 0.5f * x * (1.0f + model_tanh(u));
    }
}

void model_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
    /* dinp [N] += gelu'(x) dout, gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 0.044715 x^2) */
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float t = model_tanh(MODEL_GELU_K * (x + 0.044715f * x * x * x));
        float g =
            0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * MODEL_GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += g * dout[i];
    }
}

/* ---- layer: softmax + cross-entropy ---- */

float model_xent_forward(float *probs, float *losses, const float *logits, const uint8_t *targets, int B,
                         int V)
{
    /* probs [B, V] = softmax(logits [B, V]); losses [B] = -ln probs[b, targets[b]] */
    double sum_loss = 0.0;
    for (int b = 0; b < B; b++) {
        const float *l = logits + (size_t)b * V;
        float *p = probs + (size_t)b * V;
        float maxv = l[0];
        for (int v = 1; v < V; v++)
            if (l[v] > maxv)
                maxv = l[v];
        double sum = 0.0;
        for (int v = 0; v < V; v++) {
            p[v] = expf(l[v] - maxv);
            sum += p[v];
        }
        float inv = (float)(1.0 / sum);
        for (int v = 0; v < V; v++)
            p[v] *= inv;
        /* ln p[t] computed from the logits, not from p (p may underflow to 0) */
        float loss = (float)(log(sum) - (double)(l[targets[b]] - maxv));
        losses[b] = loss;
        sum_loss += loss;
    }
    return (float)(sum_loss / B);
}

void model_xent_backward(float *dlogits, const float *probs, const uint8_t *targets, int B, int V,
                         float scale)
{
    /* dlogits [B, V] += (probs - onehot(targets)) * scale */
    for (int b = 0; b < B; b++) {
        float *d = dlogits + (size_t)b * V;
        const float *p = probs + (size_t)b * V;
        for (int v = 0; v < V; v++)
            d[v] += p[v] * scale;
        d[targets[b]] -= scale;
    }
}

/* ---- the MLP model ---- */

enum { MLP_WTE, MLP_W1, MLP_B1, MLP_W2, MLP_B2, MLP_NT };

typedef struct mlp_ctx {
    float *acts;    /* one allocation for everything below */
    float *x;       /* [Bmax, C*E] concatenated embeddings */
    float *hpre;    /* [Bmax, Hd] pre-activation */
    float *h;       /* [Bmax, Hd] GELU output */
    float *tanh_t;  /* [Bmax, Hd] tanh inside GELU, kept for backward */
    float *logits;  /* [Bmax, 256] */
    float *probs;   /* [Bmax, 256] */
    float *losses;  /* [Bmax] nats */
    float *dx;      /* [Bmax, C*E] */
    float *dh;      /* [Bmax, Hd] (reused for d hpre) */
    float *dhpre;   /* [Bmax, Hd] */
    float *dlogits; /* [Bmax, 256] */
} mlp_ctx;

static void mlp_layout(model *m)
{
    const model_config *c = &m->cfg;
    size_t CE = (size_t)c->context * c->embed, Hd = (size_t)c->hidden, V = MODEL_VOCAB;
    static const char *const names[MLP_NT] = {"wte", "w1", "b1", "w2", "b2"};
    const size_t rows[MLP_NT] = {V, Hd, 1, V, 1};
    const size_t cols[MLP_NT] = {(size_t)c->embed, CE, Hd, Hd, V};

    size_t off = 0;
    for (int i = 0; i < MLP_NT; i++) {
        model_tensor *t = &m->tensors[i];
        t->name = names[i];
        t->offset = off;
        t->length = rows[i] * cols[i];
        t->rows = (int)rows[i];
        t->cols = (int)cols[i];
        t->is_embedding = i == MLP_WTE;
        t->weight_decay = i == MLP_WTE || i == MLP_W1 || i == MLP_W2;
        off += t->length;
    }
    m->num_tensors = MLP_NT;
    m->num_params = off;
}

static int mlp_create(model *m, uint64_t seed, char *err, size_t errlen)
{
    const model_config *c = &m->cfg;
    size_t CE = (size_t)c->context * c->embed, Hd = (size_t)c->hidden, V = MODEL_VOCAB;
    size_t Bm = (size_t)c->max_batch;
    mlp_ctx *x = calloc(1, sizeof(*x));
    if (!x)
        return cx_fail(err, errlen, CX_ENOMEM, "model: out of memory");
    size_t sizes[] = {Bm * CE, Bm * Hd, Bm * Hd, Bm * Hd, Bm * V, Bm * V,
                      Bm,      Bm * CE, Bm * Hd, Bm * Hd, Bm * V};
    size_t total = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        total += sizes[i];
    x->acts = malloc(total * sizeof(float));
    if (!x->acts) {
        free(x);
        return cx_fail(err, errlen, CX_ENOMEM, "model: out of memory for %zu activations", total);
    }
    float **ptrs[] = {&x->x,      &x->hpre, &x->h,  &x->tanh_t, &x->logits, &x->probs,
                      &x->losses, &x->dx,   &x->dh, &x->dhpre,  &x->dlogits};
    float *p = x->acts;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        *ptrs[i] = p;
        p += sizes[i];
    }
    m->ctx = x;

    /* Init: embeddings N(0,1); w1 N(0, 1/sqrt(fan_in)); w2 small so that the
     * initial logits are ~0 and the loss starts near ln 256. */
    cx_rng r;
    cx_rng_seed(&r, seed ^ 0x6D6C706D6F64656Cull /* "mlpmodel" */);
    float *P = m->params;
    model_fill_normal(P + m->tensors[MLP_WTE].offset, m->tensors[MLP_WTE].length, 1.0, &r);
    model_fill_normal(P + m->tensors[MLP_W1].offset, m->tensors[MLP_W1].length, 1.0 / sqrt((double)CE), &r);
    model_fill_normal(P + m->tensors[MLP_W2].offset, m->tensors[MLP_W2].length, 0.02, &r);
    memset(P + m->tensors[MLP_B1].offset, 0, m->tensors[MLP_B1].length * sizeof(float));
    memset(P + m->tensors[MLP_B2].offset, 0, m->tensors[MLP_B2].length * sizeof(float));
    return CX_OK;
}

static void mlp_destroy(model *m)
{
    mlp_ctx *x = m->ctx;
    if (!x)
        return;
    free(x->acts);
    free(x);
    m->ctx = NULL;
}

/* Forward pass of b examples into the activations; returns the mean loss. */
static float mlp_forward(model *m, const uint8_t *inputs, const uint8_t *targets, int b)
{
    mlp_ctx *x = m->ctx;
    const model_config *c = &m->cfg;
    int C = c->context, E = c->embed, Hd = c->hidden, CE = C * E;
    const float *P = m->params;
    const model_tensor *T = m->tensors;
    void (*mm)(float *, const float *, const float *, const float *, int, int, int) =
        m->reference ? model_matmul_forward_ref : model_matmul_forward;

    model_embed_forward(x->x, inputs, P + T[MLP_WTE].offset, b, C, E);
    mm(x->hpre, x->x, P + T[MLP_W1].offset, P + T[MLP_B1].offset, b, CE, Hd);
    model_gelu_forward_cached(x->h, x->tanh_t, x->hpre, (size_t)b * Hd);
    mm(x->logits, x->h, P + T[MLP_W2].offset, P + T[MLP_B2].offset, b, Hd, MODEL_VOCAB);
    return model_xent_forward(x->probs, x->losses, x->logits, targets, b, MODEL_VOCAB);
}

static double mlp_loss(model *m, const uint8_t *inputs, const uint8_t *targets, int b)
{
    return (double)mlp_forward(m, inputs, targets, b) * b;
}

static double mlp_fwd_bwd(model *m, const uint8_t *inputs, const uint8_t *targets, int b, float scale)
{
    mlp_ctx *x = m->ctx;
    const model_config *c = &m->cfg;
    int C = c->context, E = c->embed, Hd = c->hidden, CE = C * E;
    const float *P = m->params;
    float *G = m->grads;
    const model_tensor *T = m->tensors;
    void (*mmb)(float *, float *, float *, const float *, const float *, const float *, int, int, int) =
        m->reference ? model_matmul_backward_ref : model_matmul_backward;

    float mean = mlp_forward(m, inputs, targets, b);

    memset(x->dlogits, 0, (size_t)b * MODEL_VOCAB * sizeof(float));
    memset(x->dh, 0, (size_t)b * Hd * sizeof(float));
    memset(x->dhpre, 0, (size_t)b * Hd * sizeof(float));
    memset(x->dx, 0, (size_t)b * CE * sizeof(float));

    model_xent_backward(x->dlogits, x->probs, targets, b, MODEL_VOCAB, scale);
    mmb(x->dh, G + T[MLP_W2].offset, G + T[MLP_B2].offset, x->dlogits, x->h, P + T[MLP_W2].offset, b, Hd,
        MODEL_VOCAB);
    model_gelu_backward_cached(x->dhpre, x->hpre, x->tanh_t, x->dh, (size_t)b * Hd);
    mmb(x->dx, G + T[MLP_W1].offset, G + T[MLP_B1].offset, x->dhpre, x->x, P + T[MLP_W1].offset, b, CE, Hd);
    model_embed_backward(G + T[MLP_WTE].offset, x->dx, inputs, b, C, E);
    return (double)mean * b;
}

static double mlp_flops_per_token(const model *m)
{
    const model_config *c = &m->cfg;
    double CE = (double)c->context * c->embed, Hd = c->hidden;
    return 6.0 * (CE * Hd + Hd * MODEL_VOCAB);
}

static const model_ops mlp_ops = {
    .kind = "mlp",
    .defaults = model_config_default,
    .layout = mlp_layout,
    .create = mlp_create,
    .destroy = mlp_destroy,
    .fwd_bwd = mlp_fwd_bwd,
    .loss = mlp_loss,
    .flops_per_token = mlp_flops_per_token,
};

/* ---- public API ---- */

void model_config_default(model_config *cfg)
{
    cfg->context = 8;
    cfg->embed = 16;
    cfg->hidden = 256;
    cfg->max_batch = 32;
    cfg->layers = 0; /* unused by mlp */
    cfg->heads = 0;
    cfg->threads = 1;
}

int model_kind_known(const char *kind)
{
    return model_find(kind) != NULL;
}

static int model_check_field(const char *name, int v, int lo, int hi, char *err, size_t errlen)
{
    if (v < lo || v > hi)
        return cx_fail(err, errlen, CX_EINVAL, "model: %s=%d out of range %d..%d", name, v, lo, hi);
    return CX_OK;
}

model *model_new(const char *kind, const model_config *cfg, uint64_t seed, char *err, size_t errlen)
{
    const model_ops *ops = model_find(kind);
    if (!ops) {
        cx_fail(err, errlen, CX_EINVAL, "model: unknown kind '%s' (known: mlp, gpt)", kind ? kind : "(null)");
        return NULL;
    }
    model_config c;
    ops->defaults(&c);
    if (cfg) {
        if (cfg->context)
            c.context = cfg->context;
        if (cfg->embed)
            c.embed = cfg->embed;
        if (cfg->hidden)
            c.hidden = cfg->hidden;
        if (cfg->max_batch)
            c.max_batch = cfg->max_batch;
        if (cfg->layers)
            c.layers = cfg->layers;
        if (cfg->heads)
            c.heads = cfg->heads;
        if (cfg->threads)
            c.threads = cfg->threads;
    }
    if (model_check_field("context", c.context, 1, MODEL_MAX_CONTEXT, err, errlen) ||
        model_check_field("embed", c.embed, 1, 1024, err, errlen) ||
        model_check_field("hidden", c.hidden, 1, 16384, err, errlen) ||
        model_check_field("max_batch", c.max_batch, 1, 65536, err, errlen) ||
        model_check_field("threads", c.threads, 1, CX_POOL_MAX_THREADS, err, errlen))
        return NULL;
    if (ops == &gpt_ops && (model_check_field("layers", c.layers, 1, 64, err, errlen) ||
                            model_check_field("heads", c.heads, 1, c.embed, err, errlen)))
        return NULL;
    if (ops == &gpt_ops && c.embed % c.heads != 0) {
        cx_fail(err, errlen, CX_EINVAL, "model: embed=%d is not a multiple of heads=%d", c.embed, c.heads);
        return NULL;
    }

    model *m = calloc(1, sizeof(*m));
    if (!m) {
        cx_fail(err, errlen, CX_ENOMEM, "model: out of memory");
        return NULL;
    }
    m->ops = ops;
    m->cfg = c;
    ops->layout(m);
    size_t n = m->num_params;
    m->params = malloc(n * sizeof(float));
    m->grads = calloc(n, sizeof(float));
    if (!m->params || !m->grads) {
        cx_fail(err, errlen, CX_ENOMEM, "model: out of memory for %zu parameters", n);
        goto fail;
    }
    if (ops == &gpt_ops && c.threads > 1) {
        m->pool = cx_pool_new(c.threads, err, errlen);
        if (!m->pool)
            goto fail;
        openblas_set_num_threads(1); /* our threads split the sgemms */
    }
    if (ops->create(m, seed, err, errlen) != CX_OK)
        goto fail;
    return m;
fail:
    model_free(m);
    return NULL;
}

void model_free(model *m)
{
    if (!m)
        return;
    if (m->ops && m->ctx)
        m->ops->destroy(m);
    cx_pool_free(m->pool);
    free(m->params);
    free(m->grads);
    free(m);
}

const char *model_kind(const model *m)
{
    return m->ops->kind;
}
const model_config *model_get_config(const model *m)
{
    return &m->cfg;
}
size_t model_num_params(const model *m)
{
    return m->num_params;
}
float *model_params(model *m)
{
    return m->params;
}
float *model_grads(model *m)
{
    return m->grads;
}
int model_num_tensors(const model *m)
{
    return m->num_tensors;
}
const model_tensor *model_tensors(const model *m)
{
    return m->tensors;
}
cx_pool *model_pool(model *m)
{
    return m->pool;
}
void model_set_reference_kernels(model *m, int on)
{
    m->reference = on != 0;
}

const model_tensor *model_tensor_get(const model *m, int i)
{
    if (i < 0 || i >= m->num_tensors)
        return NULL;
    return &m->tensors[i];
}

float model_forward_backward(model *m, const uint8_t *inputs, const uint8_t *targets, int B)
{
    assert(B >= 1);
    memset(m->grads, 0, m->num_params * sizeof(float));
    int C = m->cfg.context, Bm = m->cfg.max_batch;
    float scale = 1.0f / (float)B; /* every chunk contributes d(sum loss)/B */
    double sum = 0.0;
    for (int b0 = 0; b0 < B; b0 += Bm) {
        int b = B - b0 < Bm ? B - b0 : Bm;
        sum += m->ops->fwd_bwd(m, inputs + (size_t)b0 * C, targets + b0, b, scale);
    }
    return (float)(sum / B);
}

float model_loss(model *m, const uint8_t *inputs, const uint8_t *targets, int B)
{
    assert(B >= 1);
    int C = m->cfg.context, Bm = m->cfg.max_batch;
    double sum = 0.0;
    for (int b0 = 0; b0 < B; b0 += Bm) {
        int b = B - b0 < Bm ? B - b0 : Bm;
        sum += m->ops->loss(m, inputs + (size_t)b0 * C, targets + b0, b);
    }
    return (float)(sum / B);
}

double model_clip_grad_norm(model *m, double max_norm)
{
    double ss = 0.0;
    for (size_t i = 0; i < m->num_params; i++)
        ss += (double)m->grads[i] * m->grads[i];
    double norm = sqrt(ss);
    if (max_norm > 0 && norm > max_norm) {
        float k = (float)(max_norm / norm);
        for (size_t i = 0; i < m->num_params; i++)
            m->grads[i] *= k;
    }
    return norm;
}

double model_flops_per_token(const model *m)
{
    return m->ops->flops_per_token(m);
}
