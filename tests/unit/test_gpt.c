/* test_gpt.c - the byte-level GPT: each layer's backward against finite
 * differences (llm.c check_tensor style), the sgemm kernels against the plain
 * loops, causal masking, the whole model's gradient, a short training run,
 * and the tensor table fragments and merging rely on.
 *
 * Tolerances. Finite differences are central with eps = 1e-2 on a weighted
 * sum of outputs L = sum r_i out_i (|L| ~ 1): float rounding contributes
 * ~ 6e-8 * |L| / eps ~ 1e-5, the O(eps^2) truncation ~ 1e-4 for these
 * smooth layers, so |a - n| <= 3e-2 * max(|a|, |n|) + 2e-3. Fast vs reference
 * kernels: the same sums in another order (and another BLAS blocking on
 * AVX-512, AVX2 or AMD kernels, with 1 or more threads), so
 * |f - r| <= 1e-4 * (1 + |r|), orders of magnitude above float
 * reassociation error at these sizes.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/pool.h"
#include "trainer/checkpoint.h"
#include "numerics/data.h"
#include "numerics/gpt.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "numcheck.h"

/* ---- helpers ---- */

static void check_grad(const char *what, size_t i, double analytic, double numeric)
{
    double tol = 3e-2 * fmax(fabs(analytic), fabs(numeric)) + 2e-3;
    cr_assert(fabs(analytic - numeric) <= tol, "%s[%zu]: analytic %.6g vs numeric %.6g (tol %.3g)", what, i,
              analytic, numeric, tol);
}

static void check_close(const char *what, const float *f, const float *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(fabsf(f[i] - r[i]) <= 1e-4f * (1.0f + fabsf(r[i])), "%s[%zu]: fast %.8g vs ref %.8g", what,
                  i, (double)f[i], (double)r[i]);
}

/* A layer under test: fills out from its inputs (whatever ctx points at). */
typedef void (*fwd_fn)(void *ctx, float *out);

/* Central differences of L = <out, r> w.r.t. each x[i], against grad. */
static void check_tensor_fd(const char *what, float *x, const float *grad, size_t n, fwd_fn f, void *ctx,
                            float *out, const float *r, size_t nout)
{
    const float eps = 1e-2f;
    for (size_t i = 0; i < n; i++) {
        float save = x[i];
        x[i] = save + eps;
        f(ctx, out);
        double lp = dot(out, r, nout);
        x[i] = save - eps;
        f(ctx, out);
        double lm = dot(out, r, nout);
        x[i] = save;
        check_grad(what, i, grad[i], (lp - lm) / (2 * eps));
    }
}

/* ---- layernorm ---- */

enum { LN_N = 3, LN_C = 8 };
typedef struct {
    float inp[LN_N * LN_C], w[LN_C], b[LN_C], mean[LN_N], rstd[LN_N];
} ln_case;

static void ln_fwd(void *ctx, float *out)
{
    ln_case *c = ctx;
    gpt_layernorm_forward(out, c->mean, c->rstd, c->inp, c->w, c->b, LN_N, LN_C);
}

Test(gpt, layernorm_backward_matches_finite_differences)
{
    ln_case c;
    float out[LN_N * LN_C], r[LN_N * LN_C], dinp[LN_N * LN_C] = {0}, dw[LN_C] = {0}, db[LN_C] = {0};
    rng_reset(1);
    fill_uniform(c.inp, LN_N * LN_C, -2, 2);
    fill_uniform(c.w, LN_C, 0.5f, 1.5f);
    fill_uniform(c.b, LN_C, -1, 1);
    fill_uniform(r, LN_N * LN_C, -1, 1);
    ln_fwd(&c, out);
    gpt_layernorm_backward(dinp, dw, db, r, c.inp, c.w, c.mean, c.rstd, LN_N, LN_C);
    check_tensor_fd("ln.dinp", c.inp, dinp, LN_N * LN_C, ln_fwd, &c, out, r, LN_N * LN_C);
    check_tensor_fd("ln.dw", c.w, dw, LN_C, ln_fwd, &c, out, r, LN_N * LN_C);
    check_tensor_fd("ln.db", c.b, db, LN_C, ln_fwd, &c, out, r, LN_N * LN_C);
}

/* ---- attention ---- */

enum { AT_B = 2, AT_T = 5, AT_C = 8, AT_NH = 2 };
typedef struct {
    float qkv[AT_B * AT_T * 3 * AT_C], att[AT_B * AT_NH * AT_T * AT_T];
    int fast;
} at_case;

static void at_fwd(void *ctx, float *out)
{
    at_case *c = ctx;
    (c->fast ? gpt_attention_forward : gpt_attention_forward_ref)(out, c->att, c->qkv, AT_B, AT_T, AT_C,
                                                                  AT_NH);
}

Test(gpt, attention_backward_matches_finite_differences)
{
    enum { NO = AT_B * AT_T * AT_C, NI = AT_B * AT_T * 3 * AT_C, NA = AT_B * AT_NH * AT_T * AT_T };
    for (int fast = 0; fast < 2; fast++) {
        at_case c = {.fast = fast};
        float out[NO], r[NO], dqkv[NI] = {0}, datt[NA];
        rng_reset(2);
        fill_uniform(c.qkv, NI, -1.5f, 1.5f);
        fill_uniform(r, NO, -1, 1);
        at_fwd(&c, out);
        (fast ? gpt_attention_backward : gpt_attention_backward_ref)(dqkv, datt, r, c.qkv, c.att, AT_B, AT_T,
                                                                     AT_C, AT_NH);
        check_tensor_fd(fast ? "attn.fast.dqkv" : "attn.ref.dqkv", c.qkv, dqkv, NI, at_fwd, &c, out, r, NO);
    }
}

/* One shape of the fast attention pair against the reference; the scores
 * span several units (qkv in [-2, 2]) so the softmax's exp sees a range. */
static void attention_fast_vs_ref(int B, int T, int C, int NH)
{
    size_t NI = (size_t)B * T * 3 * C, NO = (size_t)B * T * C, NA = (size_t)B * NH * T * T;
    float *qkv = malloc(NI * 4), *o1 = malloc(NO * 4), *o2 = malloc(NO * 4), *a1 = malloc(NA * 4);
    float *a2 = malloc(NA * 4), *dout = malloc(NO * 4), *d1 = calloc(NI, 4), *d2 = calloc(NI, 4);
    float *s1 = malloc(NA * 4), *s2 = malloc(NA * 4);
    rng_reset(3 + (uint64_t)T);
    fill_uniform(qkv, NI, -2, 2);
    fill_uniform(dout, NO, -1, 1);
    gpt_attention_forward(o1, a1, qkv, B, T, C, NH);
    gpt_attention_forward_ref(o2, a2, qkv, B, T, C, NH);
    check_close("attn.out", o1, o2, NO);
    check_close("attn.att", a1, a2, NA);
    gpt_attention_backward(d1, s1, dout, qkv, a1, B, T, C, NH);
    gpt_attention_backward_ref(d2, s2, dout, qkv, a2, B, T, C, NH);
    check_close("attn.dqkv", d1, d2, NI);
    free(qkv), free(o1), free(o2), free(a1), free(a2), free(dout), free(d1), free(d2), free(s1), free(s2);
}

/* T below, at and off the softmax's 8-lane blocks (1, 7, 8, 33, 64, 67),
 * and past GPT_ATTN_SPLIT_MIN_T = 128, where the rows split at T/2, even
 * and odd (128, 131); head sizes 8 to 32. */
Test(gpt, attention_fast_matches_reference)
{
    static const int shapes[][4] = {{2, 33, 32, 4}, {1, 1, 16, 2},  {3, 7, 24, 3},   {2, 8, 32, 1},
                                    {2, 64, 64, 2}, {1, 67, 64, 4}, {1, 128, 32, 1}, {2, 131, 48, 3}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        attention_fast_vs_ref(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3]);
}

/* ---- embedding ---- */

enum { EM_B = 2, EM_T = 3, EM_C = 4 };
typedef struct {
    uint8_t inp[EM_B * EM_T];
    float wte[256 * EM_C], wpe[EM_T * EM_C];
} em_case;

static void em_fwd(void *ctx, float *out)
{
    em_case *c = ctx;
    gpt_embed_forward(out, c->inp, c->wte, c->wpe, EM_B, EM_T, EM_C);
}

Test(gpt, embed_backward_matches_finite_differences)
{
    enum { NO = EM_B * EM_T * EM_C };
    static em_case c;
    static float dwte[256 * EM_C], dwpe[EM_T * EM_C];
    float out[NO], r[NO];
    rng_reset(4);
    const uint8_t inp[EM_B * EM_T] = {7, 9, 7, 0, 255, 9}; /* repeats: scatter must add */
    memcpy(c.inp, inp, sizeof(inp));
    fill_uniform(c.wte, 256 * EM_C, -1, 1);
    fill_uniform(c.wpe, EM_T * EM_C, -1, 1);
    fill_uniform(r, NO, -1, 1);
    gpt_embed_backward(dwte, dwpe, r, c.inp, EM_B, EM_T, EM_C);
    check_tensor_fd("embed.dwpe", c.wpe, dwpe, EM_T * EM_C, em_fwd, &c, out, r, NO);
    check_tensor_fd("embed.dwte[0..10)", c.wte, dwte, 10 * EM_C, em_fwd, &c, out, r, NO);
    check_tensor_fd("embed.dwte[255]", c.wte + 255 * EM_C, dwte + 255 * EM_C, EM_C, em_fwd, &c, out, r, NO);
}

/* ---- the whole model ---- */

static model *tiny_gpt_threads(int max_batch, int threads)
{
    model_config mc = {.context = 6,
                       .embed = 8,
                       .hidden = 16,
                       .layers = 2,
                       .heads = 2,
                       .max_batch = max_batch,
                       .threads = threads};
    char err[256] = "";
    model *m = model_new("gpt", &mc, 42, err, sizeof err);
    cr_assert(m, "model_new: %s", err);
    return m;
}

static model *tiny_gpt(int max_batch)
{
    return tiny_gpt_threads(max_batch, 1);
}

Test(gpt, tensor_table_covers_the_parameters_and_marks_embeddings)
{
    model *m = tiny_gpt(2);
    const model_tensor *t = model_tensors(m);
    size_t off = 0;
    int emb = 0;
    for (int i = 0; i < model_num_tensors(m); i++) {
        cr_assert_eq(t[i].offset, off, "%s not contiguous", t[i].name);
        cr_assert_eq(t[i].length, (size_t)t[i].rows * t[i].cols, "%s shape", t[i].name);
        off += t[i].length;
        emb += t[i].is_embedding;
        if (t[i].is_embedding)
            cr_assert(!strcmp(t[i].name, "wte") || !strcmp(t[i].name, "wpe"), "%s marked embedding",
                      t[i].name);
    }
    cr_assert_eq(off, model_num_params(m));
    cr_assert_eq(emb, 2);
    model_free(m);

    model_config dflt = {0};
    char err[256];
    m = model_new("gpt", &dflt, 1, err, sizeof err);
    cr_assert(m, "%s", err);
    cr_assert_eq(model_num_params(m), 842496, "default gpt size changed: %zu", model_num_params(m));
    model_free(m);
    model_config bad = {.embed = 30, .heads = 4};
    cr_assert_null(model_new("gpt", &bad, 1, err, sizeof err));
    cr_assert(strstr(err, "heads"), "%s", err);
}

/* Also with 3 threads: the pooled layers (row, column and head splits, the
 * split sgemms) carry the same gradient. */
Test(gpt, model_gradient_matches_finite_differences)
{
    enum { B = 3, T = 6 };
    for (int threads = 1; threads <= 3; threads += 2) {
        model *m = tiny_gpt_threads(2, threads); /* B > max_batch: chunks too */
        cr_assert_eq(model_pool(m) != NULL, threads > 1);
        uint8_t in[B * T], tg[B];
        rng_reset(5);
        fill_bytes(in, sizeof in, 256);
        fill_bytes(tg, sizeof tg, 256);
        float *P = model_params(m);
        /* larger weights than init so that every path carries gradient */
        for (int i = 0; i < model_num_tensors(m); i++) {
            const model_tensor *t = model_tensor_get(m, i);
            int gain = !strcmp(t->name, "ln1w") || !strcmp(t->name, "ln2w") || !strcmp(t->name, "lnfw");
            fill_uniform(P + t->offset, t->length, gain ? 0.5f : -0.5f, gain ? 1.5f : 0.5f);
        }
        for (int ref = 0; ref < 2; ref++) {
            model_set_reference_kernels(m, ref);
            model_forward_backward(m, in, tg, B);
            float *G = malloc(model_num_params(m) * sizeof(float));
            memcpy(G, model_grads(m), model_num_params(m) * sizeof(float));
            for (int i = 0; i < model_num_tensors(m); i++) {
                const model_tensor *t = model_tensor_get(m, i);
                size_t stride = t->length > 12 ? t->length / 12 : 1;
                for (size_t j = 0; j < t->length; j += stride) {
                    size_t k = t->offset + j;
                    if (!strcmp(t->name, "wte"))
                        k = t->offset + (size_t)in[j % (B * T)] * t->cols +
                            j % t->cols; /* rows that are used */
                    check_grad(t->name, k - t->offset, G[k], model_loss_fd(m, in, tg, B, &P[k], 1e-2f));
                }
            }
            free(G);
        }
        model_free(m);
    }
}

Test(gpt, a_future_byte_cannot_change_an_earlier_output)
{
    enum { T = 6, V = 256 };
    model *m = tiny_gpt(1);
    uint8_t in[T] = {'h', 'e', 'l', 'l', 'o', ' '}, tg[1] = {'w'};
    float before[T * V];
    for (int ref = 0; ref < 2; ref++)
        for (int pos = 1; pos < T; pos++) {
            model_set_reference_kernels(m, ref);
            in[pos] = 'x';
            model_loss(m, in, tg, 1);
            memcpy(before, gpt_last_probs(m), sizeof before);
            in[pos] = 'Q'; /* change byte pos: outputs 0..pos-1 must not move */
            model_loss(m, in, tg, 1);
            const float *after = gpt_last_probs(m);
            for (int t = 0; t < pos; t++)
                for (int v = 0; v < V; v++)
                    cr_assert(fabsf(after[t * V + v] - before[t * V + v]) <= 1e-6f,
                              "ref=%d: byte %d changed output %d (symbol %d)", ref, pos, t, v);
            double diff = 0;
            for (int v = 0; v < V; v++)
                diff += fabsf(after[pos * V + v] - before[pos * V + v]);
            cr_assert(diff > 1e-5, "ref=%d: byte %d did not change its own output", ref, pos);
        }
    model_free(m);
}

Test(gpt, twenty_adamw_steps_on_synthetic_text_lower_the_loss)
{
    enum { B = 4, T = 16, STEPS = 20 };
    model_config mc = {.context = T, .embed = 32, .hidden = 64, .layers = 2, .heads = 2, .max_batch = B};
    char err[256];
    model *m = model_new("gpt", &mc, 7, err, sizeof err);
    cr_assert(m, "%s", err);
    /* a repeating phrase with a little noise: learnable in a few steps */
    static const char text[] = "the quick brown fox jumps over the lazy dog. ";
    size_t n = sizeof(text) - 1;
    uint8_t in[B * T], tg[B];
    adamw_config oc;
    adamw_config_default(&oc);
    adamw *opt = adamw_new(model_num_params(m), &oc, err, sizeof err);
    cr_assert(opt, "%s", err);
    float first = 0, last = 0;
    for (int s = 0; s < STEPS; s++) {
        for (int b = 0; b < B; b++) {
            size_t o = (size_t)(s * 7 + b * 11) % n;
            for (int t = 0; t < T; t++)
                in[b * T + t] = (uint8_t)text[(o + (size_t)t) % n];
            tg[b] = (uint8_t)text[(o + T) % n];
        }
        float loss = model_forward_backward(m, in, tg, B);
        cr_assert(isfinite(loss));
        if (s == 0)
            first = loss;
        last = loss;
        adamw_step(opt, model_params(m), model_grads(m), 3e-3f);
    }
    cr_assert(first > 5.0f && first < 6.0f, "initial loss %.3f, expected near ln 256", (double)first);
    cr_assert(last < first - 1.0f, "loss %.3f -> %.3f after %d steps", (double)first, (double)last, STEPS);
    adamw_free(opt);
    model_free(m);
}

/* The backward pass zeroes only the activation gradients it accumulates
 * into and overwrites the rest: a second pass over other data, then one
 * over the first batch again, must give the first pass's gradients bit for
 * bit (stale values left in a buffer that is neither zeroed nor fully
 * overwritten would show here), on every kernel path. */
Test(gpt, repeated_passes_give_the_same_gradients)
{
    enum { B = 3, T = 6 };
    for (int path = 0; path < 3; path++) {
        model *m = tiny_gpt_threads(2, path == 2 ? 2 : 1);
        model_set_reference_kernels(m, path == 1);
        size_t n = model_num_params(m);
        uint8_t in[B * T], tg[B], in2[B * T], tg2[B];
        rng_reset(21);
        fill_bytes(in, sizeof in, 256);
        fill_bytes(tg, sizeof tg, 256);
        fill_bytes(in2, sizeof in2, 256);
        fill_bytes(tg2, sizeof tg2, 256);
        float l1 = model_forward_backward(m, in, tg, B);
        float *g1 = malloc(n * sizeof(float));
        memcpy(g1, model_grads(m), n * sizeof(float));
        model_forward_backward(m, in2, tg2, B);
        cr_assert_neq(memcmp(g1, model_grads(m), n * sizeof(float)), 0, "other data, other gradients");
        float l2 = model_forward_backward(m, in, tg, B);
        cr_assert_eq(l1, l2, "path %d: loss %.9g then %.9g", path, (double)l1, (double)l2);
        cr_assert_eq(memcmp(g1, model_grads(m), n * sizeof(float)), 0, "path %d: gradients changed", path);
        free(g1);
        model_free(m);
    }
}

/* ---- threads ---- */

/* |x - r| <= 1e-4 (|r| + 1e-3 max|r|): relative, with a floor at a
 * thousandth of the array's scale for entries that are nearly 0 (the split
 * sgemms reassociate, which moves tiny sums by more than 1e-4 of
 * themselves). */
static void check_rel(const char *what, int threads, const float *x, const float *r, size_t n)
{
    float scale = 0.0f;
    for (size_t i = 0; i < n; i++)
        scale = fmaxf(scale, fabsf(r[i]));
    cr_assert(scale > 0.0f, "%s: all zero", what);
    for (size_t i = 0; i < n; i++)
        cr_assert(fabsf(x[i] - r[i]) <= 1e-4f * (fabsf(r[i]) + 1e-3f * scale),
                  "%s[%zu]: %d threads %.9g vs 1 thread %.9g", what, i, threads, (double)x[i], (double)r[i]);
}

/* Loss, gradients, and parameters after 3 AdamW steps (the optimizer on the
 * model's pool) with 2 and 3 threads against 1. B = 6 over max_batch 4:
 * chunks of 4 and 2 sequences, so the splits see uneven row counts; the
 * sizes give head, row and column ranges that do not divide evenly. */
Test(gpt, two_and_three_threads_match_one)
{
    enum { B = 6, T = 16, STEPS = 3 };
    model_config mc = {.context = T, .embed = 24, .hidden = 40, .layers = 2, .heads = 3, .max_batch = 4};
    char err[256];
    uint8_t in[B * T], tg[B];
    rng_reset(11);
    fill_bytes(in, sizeof in, 96);
    fill_bytes(tg, sizeof tg, 96);
    model *m1 = model_new("gpt", &mc, 3, err, sizeof err);
    cr_assert(m1, "%s", err);
    size_t n = model_num_params(m1);
    float *g1 = malloc(n * sizeof(float));
    float loss1[STEPS];
    adamw *o1 = adamw_new(n, NULL, err, sizeof err);
    cr_assert(o1);
    for (int s = 0; s < STEPS; s++) {
        loss1[s] = model_forward_backward(m1, in, tg, B);
        if (s == 0)
            memcpy(g1, model_grads(m1), n * sizeof(float));
        adamw_step(o1, model_params(m1), model_grads(m1), 1e-3f);
    }
    for (int threads = 2; threads <= 3; threads++) {
        mc.threads = threads;
        model *m = model_new("gpt", &mc, 3, err, sizeof err);
        cr_assert(m, "%s", err);
        cr_assert(model_pool(m), "%d threads: no pool", threads);
        adamw *o = adamw_new(n, NULL, err, sizeof err);
        cr_assert(o);
        adamw_set_pool(o, model_pool(m));
        for (int s = 0; s < STEPS; s++) {
            float loss = model_forward_backward(m, in, tg, B);
            cr_assert(fabsf(loss - loss1[s]) <= 1e-4f * loss1[s],
                      "step %d: loss %.9g with %d threads vs %.9g", s, (double)loss, threads,
                      (double)loss1[s]);
            if (s == 0)
                check_rel("grads", threads, model_grads(m), g1, n);
            adamw_step(o, model_params(m), model_grads(m), 1e-3f);
        }
        /* The key bias has a zero gradient in exact arithmetic (softmax is
         * invariant to it): its rounding noise, which any reassociation
         * changes, becomes +-lr steps under AdamW. Compare it as zero. */
        float *pm = model_params(m), *p1 = model_params(m1);
        for (int i = 0; i < model_num_tensors(m); i++) {
            const model_tensor *t = model_tensor_get(m, i);
            if (strcmp(t->name, "qkvb"))
                continue;
            for (int l = 0; l < mc.layers; l++)
                for (int c = 0; c < mc.embed; c++) {
                    size_t k = t->offset + (size_t)l * 3 * mc.embed + (size_t)mc.embed + (size_t)c;
                    cr_assert(fabsf(g1[k]) <= 1e-6f, "key bias gradient %.3g is not ~0", (double)g1[k]);
                    pm[k] = p1[k] = 0.0f;
                }
        }
        check_rel("params", threads, pm, p1, n);
        adamw_free(o);
        model_free(m);
    }
    mc.threads = CX_POOL_MAX_THREADS + 1;
    cr_assert_null(model_new("gpt", &mc, 3, err, sizeof err));
    cr_assert(strstr(err, "threads"), "%s", err);
    free(g1);
    adamw_free(o1);
    model_free(m1);
}

/* ---- checkpoint round trip of a gpt learner's state ---- */

typedef struct gpt_learner {
    model *m;
    adamw *opt;
    data_shard *sh;
} gpt_learner;

static void gpt_learner_new(gpt_learner *g, const data_source *src)
{
    char err[CX_ERRLEN];
    model_config mc = {.context = 16, .embed = 16, .hidden = 32, .layers = 2, .heads = 2, .max_batch = 4};
    g->m = model_new("gpt", &mc, 5, err, sizeof err);
    cr_assert(g->m, "%s", err);
    g->opt = adamw_new(model_num_params(g->m), NULL, err, sizeof err);
    cr_assert(g->opt, "%s", err);
    g->sh = data_shard_new(src, 1, 2, 16, err, sizeof err);
    cr_assert(g->sh, "%s", err);
}

static float gpt_learner_step(gpt_learner *g)
{
    uint8_t in[4 * 16], tg[4];
    data_shard_next_batch(g->sh, 4, in, tg);
    float loss = model_forward_backward(g->m, in, tg, 4);
    model_clip_grad_norm(g->m, 1.0);
    adamw_step(g->opt, model_params(g->m), model_grads(g->m), 3e-3f);
    return loss;
}

static void gpt_learner_free(gpt_learner *g)
{
    data_shard_free(g->sh);
    adamw_free(g->opt);
    model_free(g->m);
}

/* Save params, AdamW state and data cursor after 3 steps; a fresh learner
 * loaded from the checkpoint takes the same 4th step bit for bit. */
Test(gpt, checkpoint_round_trip_resumes_the_same_step)
{
    char dir[] = "/tmp/cx_test_gpt_ckpt_XXXXXX", err[CX_ERRLEN];
    cr_assert(mkdtemp(dir));
    data_config dc;
    data_config_default(&dc);
    data_source *src = data_source_new(&dc, err, sizeof err);
    cr_assert(src, "%s", err);
    gpt_learner a, b;
    gpt_learner_new(&a, src);
    gpt_learner_new(&b, src);
    for (int i = 0; i < 3; i++)
        gpt_learner_step(&a);
    data_cursor cur;
    data_shard_get_cursor(a.sh, &cur);
    size_t n = model_num_params(a.m);
    int64_t bv[1] = {0}, fs[1] = {3}, ft[1] = {12}, os[1] = {0}, ss[1] = {-1}, sn[1] = {0}, st[1] = {0},
            sa[1] = {0};
    ckpt_learner c = {.learner = 1,
                      .incarnation = 1,
                      .step = 3,
                      .tokens = 12,
                      .n = n,
                      .P = 1,
                      .table_digest = 7,
                      .params = model_params(a.m),
                      .adam_steps = 3,
                      .adam_m = adamw_m(a.opt),
                      .adam_v = adamw_v(a.opt),
                      .base_version = bv,
                      .frag_steps = fs,
                      .frag_tokens = ft,
                      .base = model_params(a.m),
                      .sent = model_params(a.m),
                      .origin_step = os,
                      .send_step = ss,
                      .send_steps = sn,
                      .send_tokens = st,
                      .send_accepted = sa,
                      .cursor_len = sizeof cur,
                      .cursor = &cur};
    cr_assert_eq(ckpt_learner_save(dir, &c, err, sizeof err), 0, "%s", err);
    ckpt_learner back;
    cr_assert_eq(ckpt_learner_load(dir, &back, n, 1, 7, err, sizeof err), 0, "%s", err);
    memcpy(model_params(b.m), back.params, n * sizeof(float));
    memcpy(adamw_m(b.opt), back.adam_m, n * sizeof(float));
    memcpy(adamw_v(b.opt), back.adam_v, n * sizeof(float));
    adamw_set_steps(b.opt, (uint64_t)back.adam_steps);
    cr_assert_eq(back.cursor_len, sizeof cur);
    cr_assert_eq(data_shard_set_cursor(b.sh, back.cursor, err, sizeof err), 0, "%s", err);
    ckpt_learner_cleanup(&back);
    float la = gpt_learner_step(&a), lb = gpt_learner_step(&b);
    cr_assert_eq(la, lb, "resumed loss %.9g differs from %.9g", lb, la);
    cr_assert_eq(memcmp(model_params(a.m), model_params(b.m), n * sizeof(float)), 0,
                 "params differ after step 4");
    gpt_learner_free(&a);
    gpt_learner_free(&b);
    data_source_free(src);
    char p[128];
    const char *names[] = {"learner.ckpt.a", "learner.ckpt.b"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    cr_assert_eq(rmdir(dir), 0, "%s holds only the two checkpoint slots", dir);
}
