/* gpt.c - the "gpt" model kind: a decoder-only byte-level transformer.
 *
 * Shapes (see gpt.h), for b sequences of T = cfg.context bytes, width
 * C = cfg.embed, NH = cfg.heads, H = cfg.hidden (MLP width), L = cfg.layers:
 *
 *   x0       = wte[inp] + wpe[t]                              [b, T, C]
 *   block l  : ln1  = layernorm(x)      qkv  = ln1 @ qkvw^T + qkvb   [b,T,3C]
 *              atty = causal_attention(qkv)                   [b, T, C]
 *              x   += atty @ attprojw^T + attprojb
 *              ln2  = layernorm(x)      fch  = gelu(ln2 @ fcw^T + fcb) [b,T,H]
 *              x   += fch @ fcprojw^T + fcprojb
 *   logits   = layernorm_f(x) @ wte^T                         [b, T, 256]
 *
 * An example of the model interface is a window of T input bytes plus its
 * target: position t < T-1 predicts input t+1 and position T-1 predicts the
 * target, so one example trains T next-byte predictions, and its loss is
 * the mean over them. The layer kernels are in gpt_layers.c; this file holds
 * the model (layout, init, forward/backward) and its threaded step.
 */
#include "numerics/gpt.h"

#include "numerics/gpt_impl.h"
#include "numerics/model_impl.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

/* ---- threads: the layers over the model's pool ----
 *
 * Each layer is split over an index range whose pieces write disjoint
 * outputs: rows (positions) for the elementwise and per-row layers and for
 * the activation side of the matmuls, (example, head) pairs for attention,
 * output columns for the reductions over rows (weight gradients, biases,
 * layernorm gains, embeddings). Every piece sums in the same order as the
 * whole, so with one exception the pooled model gives the same bits as the
 * serial one: the split sgemms, where OpenBLAS may block a smaller matrix
 * differently (reassociation only). A NULL pool runs each layer whole. */

typedef struct gpt_job {
    float *out, *out2, *out3;                /* outputs (layer-specific) */
    const float *in, *in2, *in3, *in4, *in5; /* inputs and weights */
    const uint8_t *bytes;                    /* token ids / targets */
    int B, T, C, NH, IC, OC;                 /* sizes */
    float scale;                             /* xent backward */
    int ref;                                 /* 1: reference kernels */
    int op;                                  /* job_elementwise: EW_* */
} gpt_job;

static void job_embed_fwd(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const gpt_job *j = ctx;
    int T = j->T, C = j->C;
    for (size_t n = lo; n < hi; n++) {
        float *o = j->out + n * C;
        const float *we = j->in + (size_t)j->bytes[n] * C, *pe = j->in2 + (n % (size_t)T) * C;
        for (int i = 0; i < C; i++)
            o[i] = we[i] + pe[i];
    }
}

static void job_embed_bwd(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const gpt_job *j = ctx;
    gpt_embed_backward_cols(j->out, j->out2, j->in, j->bytes, j->B, j->T, j->C, (int)lo, (int)hi);
}

static void job_ln_fwd(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const gpt_job *j = ctx;
    size_t C = (size_t)j->C;
    gpt_layernorm_forward(j->out + lo * C, j->out2 + lo, j->out3 + lo, j->in + lo * C, j->in2, j->in3,
                          (int)(hi - lo), j->C);
}

static void job_ln_bwd_rows(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const gpt_job *j = ctx; /* out dinp; in dout, in2 inp, in3 w, in4 mean, in5 rstd */
    gpt_layernorm_backward_rows(j->out, j->in, j->in2, j->in3, j->in4, j->in5, j->C, (int)lo, (int)hi);
}

static void job_ln_bwd_cols(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const gpt_job *j = ctx; /* out2 dw, out3 dbias */
    gpt_layernorm_backward_cols(j->out2, j->out3, j->in, j->in2, j->in4, j->in5, j->B, j->C, (int)lo,
                                (int)hi);
}

static void job_attn_fwd(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const gpt_job *j = ctx;
    for (size_t p = lo; p < hi; p++) {
        int b = (int)(p / (size_t)j->NH), h = (int)(p % (size_t)j->NH);
        (j->ref ? gpt_attention_forward_ref_pair : gpt_attention_forward_pair)(j->out, j->out2, j->in, b, h,
                                                                               j->T, j->C, j->NH);
    }
}

static void job_attn_bwd(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const gpt_job *j = ctx;
    for (size_t p = lo; p < hi; p++) {
        int b = (int)(p / (size_t)j->NH), h = (int)(p % (size_t)j->NH);
        (j->ref ? gpt_attention_backward_ref_pair : gpt_attention_backward_pair)(
            j->out, j->out2, j->in, j->in2, j->in3, b, h, j->T, j->C, j->NH);
    }
}

/* The element-wise layers, split into ranges of the flat index. */
enum { EW_RESIDUAL_FWD, EW_RESIDUAL_BWD, EW_GELU_FWD, EW_GELU_BWD };

static void job_elementwise(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const gpt_job *j = ctx;
    size_t n = hi - lo;
    switch (j->op) {
    case EW_RESIDUAL_FWD:
        gpt_residual_forward(j->out + lo, j->in + lo, j->in2 + lo, n);
        break;
    case EW_RESIDUAL_BWD:
        gpt_residual_backward(j->out + lo, j->out2 + lo, j->in + lo, n);
        break;
    case EW_GELU_FWD:
        model_gelu_forward_cached(j->out + lo, j->out2 + lo, j->in + lo, n);
        break;
    case EW_GELU_BWD: /* dinp is OVERWRITTEN here (its only writer; the caller does not zero it) */
        memset(j->out + lo, 0, n * sizeof(float));
        model_gelu_backward_cached(j->out + lo, j->in + lo, j->in2 + lo, j->in3 + lo, n);
        break;
    }
}

static void job_xent_fwd(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const gpt_job *j = ctx;
    size_t V = MODEL_VOCAB;
    model_xent_forward(j->out + lo * V, j->out2 + lo, j->in + lo * V, j->bytes + lo, (int)(hi - lo),
                       MODEL_VOCAB);
}

static void job_xent_bwd(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const gpt_job *j = ctx;
    size_t V = MODEL_VOCAB;
    model_xent_backward(j->out + lo * V, j->in + lo * V, j->bytes + lo, (int)(hi - lo), MODEL_VOCAB,
                        j->scale);
}

/* matmul forward, rows [lo, hi) of out [B, OC] */
static void job_mm_fwd(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const gpt_job *j = ctx; /* out; in inp, in2 weight, in3 bias */
    (j->ref ? model_matmul_forward_ref : model_matmul_forward)(j->out + lo * j->OC, j->in + lo * j->IC,
                                                               j->in2, j->in3, (int)(hi - lo), j->IC, j->OC);
}

/* matmul backward, rows [lo, hi) of dinp [B, IC] = dout @ weight: OVERWRITTEN
 * (every dinp of the model has this as its only writer, so the caller need
 * not zero it: sgemm with beta 0, the reference loop after zeroing its rows) */
static void job_mm_bwd_inp(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const gpt_job *j = ctx; /* out dinp; in dout, in2 inp, in3 weight */
    int n = (int)(hi - lo), IC = j->IC, OC = j->OC;
    const float *d = j->in + lo * OC;
    float *di = j->out + lo * IC;
    if (j->ref) {
        memset(di, 0, (size_t)n * IC * sizeof(float));
        for (int b = 0; b < n; b++)
            for (int o = 0; o < OC; o++) {
                float g = d[(size_t)b * OC + o];
                const float *w = j->in3 + (size_t)o * IC;
                for (int i = 0; i < IC; i++)
                    di[(size_t)b * IC + i] += g * w[i];
            }
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, IC, OC, 1.0f, d, OC, j->in3, IC, 0.0f, di, IC);
}

/* matmul backward, output rows [lo, hi) of dweight [OC, IC] and dbias [OC] */
static void job_mm_bwd_w(void *ctx, size_t lo, size_t hi, int k)
{
    (void)k;
    const gpt_job *j = ctx; /* out2 dweight, out3 dbias; in dout, in2 inp */
    int n = (int)(hi - lo), IC = j->IC, OC = j->OC, B = j->B;
    if (j->ref) {
        for (size_t o = lo; o < hi; o++) {
            float *dw = j->out2 + o * IC;
            for (int b = 0; b < B; b++) {
                float g = j->in[(size_t)b * OC + o];
                const float *x = j->in2 + (size_t)b * IC;
                for (int i = 0; i < IC; i++)
                    dw[i] += g * x[i];
            }
        }
    } else {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, IC, B, 1.0f, j->in + lo, OC, j->in2, IC, 1.0f,
                    j->out2 + lo * IC, IC);
    }
    if (j->out3)
        for (int b = 0; b < B; b++) {
            const float *d = j->in + (size_t)b * OC;
            for (size_t o = lo; o < hi; o++)
                j->out3[o] += d[o];
        }
}

static void par_matmul_forward(cx_pool *p, int ref, float *out, const float *inp, const float *w,
                               const float *bias, int B, int IC, int OC)
{
    gpt_job j = {.out = out, .in = inp, .in2 = w, .in3 = bias, .B = B, .IC = IC, .OC = OC, .ref = ref};
    cx_pool_for(p, (size_t)B, job_mm_fwd, &j);
}

static void par_matmul_backward(cx_pool *p, int ref, float *dinp, float *dw, float *dbias, const float *dout,
                                const float *inp, const float *w, int B, int IC, int OC)
{
    gpt_job j = {.out = dinp,
                 .out2 = dw,
                 .out3 = dbias,
                 .in = dout,
                 .in2 = inp,
                 .in3 = w,
                 .B = B,
                 .IC = IC,
                 .OC = OC,
                 .ref = ref};
    if (dinp)
        cx_pool_for(p, (size_t)B, job_mm_bwd_inp, &j);
    cx_pool_for(p, (size_t)OC, job_mm_bwd_w, &j);
}

static void par_layernorm_forward(cx_pool *p, float *out, float *mean, float *rstd, const float *inp,
                                  const float *w, const float *bias, int N, int C)
{
    gpt_job j = {.out = out, .out2 = mean, .out3 = rstd, .in = inp, .in2 = w, .in3 = bias, .C = C};
    cx_pool_for(p, (size_t)N, job_ln_fwd, &j);
}

static void par_layernorm_backward(cx_pool *p, float *dinp, float *dw, float *dbias, const float *dout,
                                   const float *inp, const float *w, const float *mean, const float *rstd,
                                   int N, int C)
{
    gpt_job j = {.out = dinp,
                 .out2 = dw,
                 .out3 = dbias,
                 .in = dout,
                 .in2 = inp,
                 .in3 = w,
                 .in4 = mean,
                 .in5 = rstd,
                 .B = N,
                 .C = C};
    cx_pool_for(p, (size_t)N, job_ln_bwd_rows, &j);
    cx_pool_for(p, (size_t)C, job_ln_bwd_cols, &j);
}

static void par_residual_forward(cx_pool *p, float *out, const float *a, const float *b, size_t N)
{
    gpt_job j = {.op = EW_RESIDUAL_FWD, .out = out, .in = a, .in2 = b};
    cx_pool_for(p, N, job_elementwise, &j);
}

static void par_residual_backward(cx_pool *p, float *da, float *db, const float *dout, size_t N)
{
    gpt_job j = {.op = EW_RESIDUAL_BWD, .out = da, .out2 = db, .in = dout};
    cx_pool_for(p, N, job_elementwise, &j);
}

/* ---- the model: layout, activations, init ---- */

enum {
    GPT_WTE,
    GPT_WPE,
    GPT_LN1W,
    GPT_LN1B,
    GPT_QKVW,
    GPT_QKVB,
    GPT_ATTPROJW,
    GPT_ATTPROJB,
    GPT_LN2W,
    GPT_LN2B,
    GPT_FCW,
    GPT_FCB,
    GPT_FCPROJW,
    GPT_FCPROJB,
    GPT_LNFW,
    GPT_LNFB,
    GPT_NT
};

/* Per-layer activations (each [L, ...]) and the head's, llm.c's ActivationTensors. */
enum {
    A_ENC,
    A_LN1,
    A_LN1M,
    A_LN1R,
    A_QKV,
    A_ATTY,
    A_ATT,
    A_ATTPROJ,
    A_RES2,
    A_LN2,
    A_LN2M,
    A_LN2R,
    A_FCH,
    A_FCHT,
    A_FCHG,
    A_FCPROJ,
    A_RES3,
    A_LNF,
    A_LNFM,
    A_LNFR,
    A_LOGITS,
    A_PROBS,
    A_LOSSES,
    A_NA
};

typedef struct gpt_ctx {
    float *mem;       /* acts then grads of acts: one allocation */
    float *a[A_NA];   /* activations */
    float *d[A_NA];   /* their gradients (same shapes) */
    size_t sz[A_NA];  /* floats per buffer */
    uint8_t *targets; /* [Bmax, T] per-position targets */
} gpt_ctx;

static void gpt_defaults(model_config *cfg)
{
    cfg->context = 128;
    cfg->embed = 128;
    cfg->hidden = 512;
    cfg->max_batch = 8;
    cfg->layers = 4;
    cfg->heads = 4;
    cfg->threads = 1;
}

static void gpt_layout(model *m)
{
    const model_config *c = &m->cfg;
    size_t C = (size_t)c->embed, L = (size_t)c->layers, H = (size_t)c->hidden;
    static const char *const names[GPT_NT] = {"wte",      "wpe",      "ln1w", "ln1b", "qkvw", "qkvb",
                                              "attprojw", "attprojb", "ln2w", "ln2b", "fcw",  "fcb",
                                              "fcprojw",  "fcprojb",  "lnfw", "lnfb"};
    const size_t rows[GPT_NT] = {
        MODEL_VOCAB, (size_t)c->context, L, L, L * 3 * C, L, L * C, L, L, L, L * H, L, L * C, L, 1, 1};
    const size_t cols[GPT_NT] = {C, C, C, C, C, 3 * C, C, C, C, C, C, H, H, C, C, C};
    size_t off = 0;
    for (int i = 0; i < GPT_NT; i++) {
        model_tensor *t = &m->tensors[i];
        t->name = names[i];
        t->offset = off;
        t->length = rows[i] * cols[i];
        t->rows = (int)rows[i];
        t->cols = (int)cols[i];
        t->is_embedding = i == GPT_WTE || i == GPT_WPE;
        t->weight_decay =
            i == GPT_WTE || i == GPT_QKVW || i == GPT_ATTPROJW || i == GPT_FCW || i == GPT_FCPROJW;
        off += t->length;
    }
    m->num_tensors = GPT_NT;
    m->num_params = off;
}

static void gpt_act_sizes(const model_config *c, size_t sz[A_NA])
{
    size_t BT = (size_t)c->max_batch * c->context, C = (size_t)c->embed, L = (size_t)c->layers;
    size_t H = (size_t)c->hidden, NH = (size_t)c->heads, T = (size_t)c->context;
    const size_t s[A_NA] = {BT * C,           L * BT * C,       L * BT,     L * BT,     L * BT * 3 * C,
                            L * BT * C,       L * BT * NH * T,  L * BT * C, L * BT * C, L * BT * C,
                            L * BT,           L * BT,           L * BT * H, L * BT * H, L * BT * H,
                            L * BT * C,       L * BT * C,       BT * C,     BT,         BT,
                            BT * MODEL_VOCAB, BT * MODEL_VOCAB, BT};
    memcpy(sz, s, sizeof(s));
}

static int gpt_create(model *m, uint64_t seed, char *err, size_t errlen)
{
    const model_config *c = &m->cfg;
    gpt_ctx *x = calloc(1, sizeof(*x));
    if (!x)
        return cx_fail(err, errlen, CX_ENOMEM, "model: out of memory");
    gpt_act_sizes(c, x->sz);
    size_t total = 0;
    for (int i = 0; i < A_NA; i++)
        total += x->sz[i];
    x->mem = malloc(2 * total * sizeof(float));
    x->targets = malloc((size_t)c->max_batch * c->context);
    if (!x->mem || !x->targets) {
        free(x->mem);
        free(x->targets);
        free(x);
        return cx_fail(err, errlen, CX_ENOMEM, "model: out of memory for %zu activations", 2 * total);
    }
    float *p = x->mem;
    for (int i = 0; i < A_NA; i++) {
        x->a[i] = p;
        p += x->sz[i];
    }
    for (int i = 0; i < A_NA; i++) {
        x->d[i] = p;
        p += x->sz[i];
    }
    m->ctx = x;

    /* Init (GPT-2): matrices and embeddings N(0, 0.02), the two residual
     * projections N(0, 0.02/sqrt(2L)), layernorm gains 1, biases 0. The
     * logits start near 0, the loss near ln 256. */
    cx_rng r;
    cx_rng_seed(&r, seed ^ 0x6770746D6F64656Cull /* "gptmodel" */);
    float *P = m->params;
    for (int i = 0; i < GPT_NT; i++) {
        const model_tensor *t = &m->tensors[i];
        float *w = P + t->offset;
        if (i == GPT_LN1W || i == GPT_LN2W || i == GPT_LNFW)
            for (size_t j = 0; j < t->length; j++)
                w[j] = 1.0f;
        else if (i == GPT_ATTPROJW || i == GPT_FCPROJW)
            model_fill_normal(w, t->length, 0.02 / sqrt(2.0 * c->layers), &r);
        else if (i == GPT_WTE || i == GPT_WPE || i == GPT_QKVW || i == GPT_FCW)
            model_fill_normal(w, t->length, 0.02, &r);
        else
            memset(w, 0, t->length * sizeof(float));
    }
    return CX_OK;
}

static void gpt_destroy(model *m)
{
    gpt_ctx *x = m->ctx;
    if (!x)
        return;
    free(x->mem);
    free(x->targets);
    free(x);
    m->ctx = NULL;
}

/* ---- forward / backward ---- */

/* Per-position targets of b examples (see the file comment). */
static void gpt_targets(uint8_t *tg, const uint8_t *inputs, const uint8_t *targets, int b, int T)
{
    for (int i = 0; i < b; i++) {
        memcpy(tg + (size_t)i * T, inputs + (size_t)i * T + 1, (size_t)T - 1);
        tg[(size_t)i * T + T - 1] = targets[i];
    }
}

/* Pointers of layer l into a stacked tensor/activation of per-layer size n. */
#define LAYER(base, l, n) ((base) + (size_t)(l) * (n))

/* Forward of b sequences; returns the SUM over examples of their mean loss. */
static double gpt_forward(model *m, const uint8_t *inputs, const uint8_t *targets, int b)
{
    gpt_ctx *x = m->ctx;
    const model_config *c = &m->cfg;
    int T = c->context, C = c->embed, H = c->hidden, NH = c->heads, L = c->layers, N = b * T;
    size_t BT = (size_t)c->max_batch * T;
    const float *P = m->params;
    const model_tensor *W = m->tensors;
    cx_pool *pool = m->pool;
    int ref = m->reference;
    float **a = x->a;

    gpt_targets(x->targets, inputs, targets, b, T);
    gpt_job ej = {.out = a[A_ENC],
                  .in = P + W[GPT_WTE].offset,
                  .in2 = P + W[GPT_WPE].offset,
                  .bytes = inputs,
                  .T = T,
                  .C = C};
    cx_pool_for(pool, (size_t)N, job_embed_fwd, &ej);
    const float *res = a[A_ENC];
    for (int l = 0; l < L; l++) {
        size_t BC = BT * C, BH = BT * H;
        float *ln1 = LAYER(a[A_LN1], l, BC), *qkv = LAYER(a[A_QKV], l, 3 * BC),
              *atty = LAYER(a[A_ATTY], l, BC);
        float *att = LAYER(a[A_ATT], l, BT * NH * T), *attproj = LAYER(a[A_ATTPROJ], l, BC);
        float *res2 = LAYER(a[A_RES2], l, BC), *ln2 = LAYER(a[A_LN2], l, BC), *fch = LAYER(a[A_FCH], l, BH);
        float *fcht = LAYER(a[A_FCHT], l, BH), *fchg = LAYER(a[A_FCHG], l, BH);
        float *fcproj = LAYER(a[A_FCPROJ], l, BC), *res3 = LAYER(a[A_RES3], l, BC);
        par_layernorm_forward(pool, ln1, LAYER(a[A_LN1M], l, BT), LAYER(a[A_LN1R], l, BT), res,
                              P + W[GPT_LN1W].offset + (size_t)l * C, P + W[GPT_LN1B].offset + (size_t)l * C,
                              N, C);
        par_matmul_forward(pool, ref, qkv, ln1, P + W[GPT_QKVW].offset + (size_t)l * 3 * C * C,
                           P + W[GPT_QKVB].offset + (size_t)l * 3 * C, N, C, 3 * C);
        gpt_job aj = {.out = atty, .out2 = att, .in = qkv, .T = T, .C = C, .NH = NH, .ref = ref};
        cx_pool_for(pool, (size_t)b * NH, job_attn_fwd, &aj);
        par_matmul_forward(pool, ref, attproj, atty, P + W[GPT_ATTPROJW].offset + (size_t)l * C * C,
                           P + W[GPT_ATTPROJB].offset + (size_t)l * C, N, C, C);
        par_residual_forward(pool, res2, res, attproj, (size_t)N * C);
        par_layernorm_forward(pool, ln2, LAYER(a[A_LN2M], l, BT), LAYER(a[A_LN2R], l, BT), res2,
                              P + W[GPT_LN2W].offset + (size_t)l * C, P + W[GPT_LN2B].offset + (size_t)l * C,
                              N, C);
        par_matmul_forward(pool, ref, fch, ln2, P + W[GPT_FCW].offset + (size_t)l * H * C,
                           P + W[GPT_FCB].offset + (size_t)l * H, N, C, H);
        gpt_job gj = {.op = EW_GELU_FWD, .out = fchg, .out2 = fcht, .in = fch};
        cx_pool_for(pool, (size_t)N * H, job_elementwise, &gj);
        par_matmul_forward(pool, ref, fcproj, fchg, P + W[GPT_FCPROJW].offset + (size_t)l * C * H,
                           P + W[GPT_FCPROJB].offset + (size_t)l * C, N, H, C);
        par_residual_forward(pool, res3, res2, fcproj, (size_t)N * C);
        res = res3;
    }
    par_layernorm_forward(pool, a[A_LNF], a[A_LNFM], a[A_LNFR], res, P + W[GPT_LNFW].offset,
                          P + W[GPT_LNFB].offset, N, C);
    par_matmul_forward(pool, ref, a[A_LOGITS], a[A_LNF], P + W[GPT_WTE].offset, NULL, N, C, MODEL_VOCAB);
    gpt_job xj = {.out = a[A_PROBS], .out2 = a[A_LOSSES], .in = a[A_LOGITS], .bytes = x->targets};
    cx_pool_for(pool, (size_t)N, job_xent_fwd, &xj);
    double sum_loss = 0.0; /* in position order, as model_xent_forward sums */
    for (int n = 0; n < N; n++)
        sum_loss += a[A_LOSSES][n];
    float mean = (float)(sum_loss / N);
    return (double)mean * b; /* sum over examples of the mean over T */
}

static double gpt_loss(model *m, const uint8_t *inputs, const uint8_t *targets, int b)
{
    return gpt_forward(m, inputs, targets, b);
}

static double gpt_fwd_bwd(model *m, const uint8_t *inputs, const uint8_t *targets, int b, float scale)
{
    gpt_ctx *x = m->ctx;
    const model_config *c = &m->cfg;
    int T = c->context, C = c->embed, H = c->hidden, NH = c->heads, L = c->layers, N = b * T;
    size_t BT = (size_t)c->max_batch * T, BC = BT * C, BH = BT * H;
    const float *P = m->params;
    float *G = m->grads;
    const model_tensor *W = m->tensors;
    cx_pool *pool = m->pool;
    int ref = m->reference;
    float **a = x->a, **d = x->d;

    double sum = gpt_forward(m, inputs, targets, b);
    /* Zero only the gradients that are accumulated into (by more than one
     * layer, or by a += kernel). The matmul dinp's and GELU's are overwritten
     * by their only writer; d[A_ATT] is attention's scratch; the tanh cache,
     * probs, losses and layernorm statistics have no gradient. Zeroing all
     * of d was 26.8 MB of stores per chunk at the default size, this 8.1. */
    static const int accumulated[] = {A_LOGITS, A_RES3, A_RES2, A_QKV, A_ENC, A_FCPROJ, A_ATTPROJ};
    for (size_t i = 0; i < sizeof accumulated / sizeof accumulated[0]; i++)
        memset(d[accumulated[i]], 0, x->sz[accumulated[i]] * sizeof(float));

    /* each example's loss is a mean over T positions: scale / T per position */
    gpt_job xj = {.out = d[A_LOGITS], .in = a[A_PROBS], .bytes = x->targets, .scale = scale / (float)T};
    cx_pool_for(pool, (size_t)N, job_xent_bwd, &xj);
    par_matmul_backward(pool, ref, d[A_LNF], G + W[GPT_WTE].offset, NULL, d[A_LOGITS], a[A_LNF],
                        P + W[GPT_WTE].offset, N, C, MODEL_VOCAB);
    const float *res = L > 0 ? LAYER(a[A_RES3], L - 1, BC) : a[A_ENC];
    float *dres = L > 0 ? LAYER(d[A_RES3], L - 1, BC) : d[A_ENC];
    par_layernorm_backward(pool, dres, G + W[GPT_LNFW].offset, G + W[GPT_LNFB].offset, d[A_LNF], res,
                           P + W[GPT_LNFW].offset, a[A_LNFM], a[A_LNFR], N, C);
    for (int l = L - 1; l >= 0; l--) {
        const float *resin = l ? LAYER(a[A_RES3], l - 1, BC) : a[A_ENC];
        float *dresin = l ? LAYER(d[A_RES3], l - 1, BC) : d[A_ENC];
        float *dres3 = LAYER(d[A_RES3], l, BC), *dres2 = LAYER(d[A_RES2], l, BC);
        size_t lc = (size_t)l * C;
        par_residual_backward(pool, dres2, LAYER(d[A_FCPROJ], l, BC), dres3, (size_t)N * C);
        par_matmul_backward(pool, ref, LAYER(d[A_FCHG], l, BH), G + W[GPT_FCPROJW].offset + lc * H,
                            G + W[GPT_FCPROJB].offset + lc, LAYER(d[A_FCPROJ], l, BC),
                            LAYER(a[A_FCHG], l, BH), P + W[GPT_FCPROJW].offset + lc * H, N, H, C);
        gpt_job gj = {.op = EW_GELU_BWD,
                      .out = LAYER(d[A_FCH], l, BH),
                      .in = LAYER(a[A_FCH], l, BH),
                      .in2 = LAYER(a[A_FCHT], l, BH),
                      .in3 = LAYER(d[A_FCHG], l, BH)};
        cx_pool_for(pool, (size_t)N * H, job_elementwise, &gj);
        par_matmul_backward(pool, ref, LAYER(d[A_LN2], l, BC), G + W[GPT_FCW].offset + (size_t)l * H * C,
                            G + W[GPT_FCB].offset + (size_t)l * H, LAYER(d[A_FCH], l, BH),
                            LAYER(a[A_LN2], l, BC), P + W[GPT_FCW].offset + (size_t)l * H * C, N, C, H);
        par_layernorm_backward(pool, dres2, G + W[GPT_LN2W].offset + lc, G + W[GPT_LN2B].offset + lc,
                               LAYER(d[A_LN2], l, BC), LAYER(a[A_RES2], l, BC), P + W[GPT_LN2W].offset + lc,
                               LAYER(a[A_LN2M], l, BT), LAYER(a[A_LN2R], l, BT), N, C);
        par_residual_backward(pool, dresin, LAYER(d[A_ATTPROJ], l, BC), dres2, (size_t)N * C);
        par_matmul_backward(pool, ref, LAYER(d[A_ATTY], l, BC), G + W[GPT_ATTPROJW].offset + lc * C,
                            G + W[GPT_ATTPROJB].offset + lc, LAYER(d[A_ATTPROJ], l, BC),
                            LAYER(a[A_ATTY], l, BC), P + W[GPT_ATTPROJW].offset + lc * C, N, C, C);
        gpt_job aj = {.out = LAYER(d[A_QKV], l, 3 * BC),
                      .out2 = LAYER(d[A_ATT], l, BT * NH * T),
                      .in = LAYER(d[A_ATTY], l, BC),
                      .in2 = LAYER(a[A_QKV], l, 3 * BC),
                      .in3 = LAYER(a[A_ATT], l, BT * NH * T),
                      .T = T,
                      .C = C,
                      .NH = NH,
                      .ref = ref};
        cx_pool_for(pool, (size_t)b * NH, job_attn_bwd, &aj);
        par_matmul_backward(pool, ref, LAYER(d[A_LN1], l, BC), G + W[GPT_QKVW].offset + lc * 3 * C,
                            G + W[GPT_QKVB].offset + lc * 3, LAYER(d[A_QKV], l, 3 * BC),
                            LAYER(a[A_LN1], l, BC), P + W[GPT_QKVW].offset + lc * 3 * C, N, C, 3 * C);
        par_layernorm_backward(pool, dresin, G + W[GPT_LN1W].offset + lc, G + W[GPT_LN1B].offset + lc,
                               LAYER(d[A_LN1], l, BC), resin, P + W[GPT_LN1W].offset + lc,
                               LAYER(a[A_LN1M], l, BT), LAYER(a[A_LN1R], l, BT), N, C);
    }
    gpt_job ej = {.out = G + W[GPT_WTE].offset,
                  .out2 = G + W[GPT_WPE].offset,
                  .in = d[A_ENC],
                  .bytes = inputs,
                  .B = b,
                  .T = T,
                  .C = C};
    cx_pool_for(pool, (size_t)C, job_embed_bwd, &ej);
    return sum;
}

const float *gpt_last_probs(const model *m)
{
    const gpt_ctx *x = m->ctx;
    return x->a[A_PROBS];
}

static double gpt_flops_per_token(const model *m)
{
    const model_config *c = &m->cfg;
    double C = c->embed, H = c->hidden, L = c->layers, T = c->context;
    /* matmuls: qkv 3C^2, proj C^2, fc 2CH, head 256C; attention 2 T C (qk and av, full square) */
    return 6.0 * (L * (4.0 * C * C + 2.0 * C * H + 2.0 * T * C) + MODEL_VOCAB * C);
}

const model_ops gpt_ops = {
    .kind = "gpt",
    .defaults = gpt_defaults,
    .layout = gpt_layout,
    .create = gpt_create,
    .destroy = gpt_destroy,
    .fwd_bwd = gpt_fwd_bwd,
    .loss = gpt_loss,
    .flops_per_token = gpt_flops_per_token,
};
