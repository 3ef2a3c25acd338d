/* test_model.c - the MLP LM: layer gradients against finite differences,
 * BLAS kernels against the reference loops, init, chunking, and that AdamW
 * on the synthetic corpus actually lowers the loss.
 *
 * Tolerances: finite differences in float with central eps 1e-3 carry an
 * absolute error of roughly (float eps * |f|) / eps ~ 1e-3 for f ~ 5, so
 * gradients are compared with |a - n| <= 2e-2 * max(|a|, |n|) + 2e-3
 * (layer tests sum a weighted loss to keep f ~ 1). BLAS vs reference: same
 * maths in different order, |a - r| <= 1e-4 * (1 + |r|).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "numerics/data.h"
#include "numerics/model.h"
#include "numerics/model_impl.h"
#include "numerics/optim.h"
#include "numcheck.h"

/* ---- helpers ---- */

static void check_grad(const char *what, size_t i, double analytic, double numeric)
{
    double tol = 2e-2 * fmax(fabs(analytic), fabs(numeric)) + 2e-3;
    cr_assert(fabs(analytic - numeric) <= tol, "%s[%zu]: analytic %.6g vs numeric %.6g (tol %.3g)", what, i,
              analytic, numeric, tol);
}

/* ---- layers vs finite differences ---- */

Test(model, matmul_backward_matches_finite_differences)
{
    enum { B = 3, IC = 5, OC = 4 };
    float inp[B * IC], w[OC * IC], bias[OC], out[B * OC], r[B * OC];
    rng_reset(1);
    fill_uniform(inp, B * IC, -1, 1);
    fill_uniform(w, OC * IC, -1, 1);
    fill_uniform(bias, OC, -1, 1);
    fill_uniform(r, B * OC, -1, 1);
    for (int blas = 0; blas < 2; blas++) {
        float dinp[B * IC] = {0}, dw[OC * IC] = {0}, db[OC] = {0};
        (blas ? model_matmul_backward : model_matmul_backward_ref)(dinp, dw, db, r, inp, w, B, IC, OC);
        const float eps = 1e-3f;
        float *targets[3] = {inp, w, bias};
        float *grads[3] = {dinp, dw, db};
        size_t lens[3] = {B * IC, OC * IC, OC};
        const char *names[3] = {"dinp", "dweight", "dbias"};
        for (int t = 0; t < 3; t++)
            for (size_t i = 0; i < lens[t]; i++) {
                float save = targets[t][i];
                targets[t][i] = save + eps;
                model_matmul_forward_ref(out, inp, w, bias, B, IC, OC);
                double lp = dot(out, r, B * OC);
                targets[t][i] = save - eps;
                model_matmul_forward_ref(out, inp, w, bias, B, IC, OC);
                double lm = dot(out, r, B * OC);
                targets[t][i] = save;
                check_grad(names[t], i, grads[t][i], (lp - lm) / (2 * eps));
            }
    }
}

Test(model, gelu_backward_matches_finite_differences)
{
    enum { N = 41 };
    float x[N], y[N], r[N], dx[N] = {0};
    for (int i = 0; i < N; i++)
        x[i] = -5.0f + 0.25f * (float)i; /* covers both tails and 0 */
    rng_reset(2);
    fill_uniform(r, N, -1, 1);
    model_gelu_backward(dx, x, r, N);
    for (int i = 0; i < N; i++) {
        const float eps = 1e-3f;
        float save = x[i];
        x[i] = save + eps;
        model_gelu_forward(y, x, N);
        double lp = dot(y, r, N);
        x[i] = save - eps;
        model_gelu_forward(y, x, N);
        double lm = dot(y, r, N);
        x[i] = save;
        check_grad("gelu", (size_t)i, dx[i], (lp - lm) / (2 * eps));
    }
    /* and the forward values at known points: gelu(0) = 0, gelu(x) ~ x for large x */
    float pts[3] = {0.0f, 1.0f, 6.0f}, out[3];
    model_gelu_forward(out, pts, 3);
    cr_assert_float_eq(out[0], 0.0f, 1e-7);
    cr_assert_float_eq(out[1], 0.841192f, 1e-5); /* tanh-approx GELU(1) */
    cr_assert_float_eq(out[2], 6.0f, 1e-5);
}

/* The cached GELU pair (the models' step, with vecmath_expf) against the
 * plain layer (expf): tanh's absolute error is a few float ulps, so
 * |fast - ref| <= 2e-6 * (1 + |ref|) for values and gradients, over both
 * tails, 0 and the saturated range (|x| up to 60). */
Test(model, gelu_cached_matches_plain)
{
    enum { N = 1201 };
    float x[N], y1[N], y2[N], t[N], r[N], d1[N] = {0}, d2[N] = {0};
    for (int i = 0; i < N; i++)
        x[i] = -60.0f + 0.1f * (float)i;
    rng_reset(4);
    fill_uniform(r, N, -1, 1);
    model_gelu_forward_cached(y1, t, x, N);
    model_gelu_forward(y2, x, N);
    model_gelu_backward_cached(d1, x, t, r, N);
    model_gelu_backward(d2, x, r, N);
    for (int i = 0; i < N; i++) {
        cr_assert(fabsf(y1[i] - y2[i]) <= 2e-6f * (1.0f + fabsf(y2[i])), "gelu(%g): %.9g vs %.9g",
                  (double)x[i], (double)y1[i], (double)y2[i]);
        cr_assert(fabsf(d1[i] - d2[i]) <= 2e-6f * (1.0f + fabsf(d2[i])), "gelu'(%g): %.9g vs %.9g",
                  (double)x[i], (double)d1[i], (double)d2[i]);
    }
}

Test(model, embed_backward_matches_finite_differences)
{
    enum { B = 4, C = 3, E = 2 };
    float wte[256 * E], out[B * C * E], r[B * C * E], dwte[256 * E] = {0};
    uint8_t inp[B * C] = {1, 2, 1, 7, 7, 7, 0, 255, 2, 3, 1, 255}; /* repeats accumulate */
    rng_reset(3);
    fill_uniform(wte, 256 * E, -1, 1);
    fill_uniform(r, B * C * E, -1, 1);
    model_embed_backward(dwte, r, inp, B, C, E);
    for (size_t i = 0; i < 256 * E; i++) {
        const float eps = 1e-3f;
        float save = wte[i];
        wte[i] = save + eps;
        model_embed_forward(out, inp, wte, B, C, E);
        double lp = dot(out, r, B * C * E);
        wte[i] = save - eps;
        model_embed_forward(out, inp, wte, B, C, E);
        double lm = dot(out, r, B * C * E);
        wte[i] = save;
        check_grad("dwte", i, dwte[i], (lp - lm) / (2 * eps));
    }
}

Test(model, xent_backward_matches_finite_differences)
{
    enum { B = 3, V = 7 };
    float logits[B * V], probs[B * V], losses[B], dl[B * V] = {0};
    uint8_t tg[B] = {0, 6, 3};
    rng_reset(4);
    fill_uniform(logits, B * V, -3, 3);
    float mean = model_xent_forward(probs, losses, logits, tg, B, V);
    model_xent_backward(dl, probs, tg, B, V, 1.0f / B);
    /* the loss itself against a direct log-sum-exp in double */
    double ref = 0.0;
    for (int b = 0; b < B; b++) {
        double s = 0.0;
        for (int v = 0; v < V; v++)
            s += exp(logits[b * V + v]);
        ref += log(s) - logits[b * V + tg[b]];
    }
    cr_assert_float_eq(mean, ref / B, 1e-5);
    for (size_t i = 0; i < B * V; i++) {
        const float eps = 1e-3f;
        float save = logits[i];
        logits[i] = save + eps;
        double lp = model_xent_forward(probs, losses, logits, tg, B, V);
        logits[i] = save - eps;
        double lm = model_xent_forward(probs, losses, logits, tg, B, V);
        logits[i] = save;
        check_grad("dlogits", i, dl[i], (lp - lm) / (2 * eps));
    }
    /* huge logits stay finite (max subtracted) */
    float big[V] = {1000, -1000, 999, 0, 0, 0, 0}, pb[V], lb[1];
    uint8_t t1 = 2;
    float l = model_xent_forward(pb, lb, big, &t1, 1, V);
    cr_assert(isfinite(l) && fabsf(l - 1.3132617f) < 1e-4, "loss %g", l);
}

/* The whole model: every parameter of a tiny MLP against finite differences
 * of model_loss, with B > max_batch so the chunked path is checked too. */
Test(model, forward_backward_matches_finite_differences)
{
    model_config cfg = {.context = 3, .embed = 4, .hidden = 8, .max_batch = 4};
    char err[CX_ERRLEN];
    model *m = model_new("mlp", &cfg, 42, err, sizeof(err));
    cr_assert_not_null(m, "%s", err);
    enum { B = 6 };
    uint8_t in[B * 3], tg[B];
    rng_reset(5);
    fill_bytes(in, sizeof(in), 10); /* few distinct bytes: embedding rows get several hits */
    fill_bytes(tg, sizeof(tg), 10);
    size_t n = model_num_params(m);
    float *p = model_params(m);
    /* larger w2 than the init so that every path carries signal */
    const model_tensor *w2 = model_tensor_get(m, 3);
    cr_assert_str_eq(w2->name, "w2");
    rng_reset(6);
    fill_uniform(p + w2->offset, w2->length, -0.5f, 0.5f);
    for (int ref = 0; ref < 2; ref++) {
        model_set_reference_kernels(m, ref);
        model_forward_backward(m, in, tg, B);
        float *g = malloc(n * sizeof(float));
        memcpy(g, model_grads(m), n * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            double num = model_loss_fd(m, in, tg, B, &p[i], 1e-3f);
            /* only bytes 0..9 occur: every other embedding row gets exactly 0 */
            if (i < 256 * 4 && i / 4 >= 10)
                cr_assert(g[i] == 0.0f, "unused embedding grad %zu = %g", i, g[i]);
            check_grad(ref ? "grad(ref)" : "grad(blas)", i, g[i], num);
        }
        free(g);
    }
    model_free(m);
}

/* ---- BLAS vs reference ---- */

Test(model, sgemm_kernels_match_reference)
{
    const int shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {32, 128, 256}, {32, 256, 256}, {5, 64, 3}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        int B = shapes[s][0], IC = shapes[s][1], OC = shapes[s][2];
        float *inp = malloc(sizeof(float) * B * IC), *w = malloc(sizeof(float) * OC * IC);
        float *bias = malloc(sizeof(float) * OC), *o1 = malloc(sizeof(float) * B * OC);
        float *o2 = malloc(sizeof(float) * B * OC), *dout = malloc(sizeof(float) * B * OC);
        float *di1 = calloc((size_t)B * IC, 4), *di2 = calloc((size_t)B * IC, 4);
        float *dw1 = calloc((size_t)OC * IC, 4), *dw2 = calloc((size_t)OC * IC, 4);
        float *db1 = calloc((size_t)OC, 4), *db2 = calloc((size_t)OC, 4);
        rng_reset(100 + s);
        fill_uniform(inp, (size_t)B * IC, -1, 1);
        fill_uniform(w, (size_t)OC * IC, -1, 1);
        fill_uniform(bias, (size_t)OC, -1, 1);
        fill_uniform(dout, (size_t)B * OC, -1, 1);
        /* pre-existing gradient values: backward must accumulate, not overwrite */
        for (int i = 0; i < OC; i++)
            db1[i] = db2[i] = 0.5f;
        model_matmul_forward(o1, inp, w, bias, B, IC, OC);
        model_matmul_forward_ref(o2, inp, w, bias, B, IC, OC);
        for (int i = 0; i < B * OC; i++)
            cr_assert(fabsf(o1[i] - o2[i]) <= 1e-4f * (1 + fabsf(o2[i])), "fwd shape %zu [%d] %g vs %g", s, i,
                      o1[i], o2[i]);
        model_matmul_forward(o1, inp, w, NULL, B, IC, OC);
        model_matmul_forward_ref(o2, inp, w, NULL, B, IC, OC);
        for (int i = 0; i < B * OC; i++)
            cr_assert(fabsf(o1[i] - o2[i]) <= 1e-4f * (1 + fabsf(o2[i])), "fwd nobias %d", i);
        model_matmul_backward(di1, dw1, db1, dout, inp, w, B, IC, OC);
        model_matmul_backward_ref(di2, dw2, db2, dout, inp, w, B, IC, OC);
        for (int i = 0; i < B * IC; i++)
            cr_assert(fabsf(di1[i] - di2[i]) <= 1e-4f * (1 + fabsf(di2[i])), "dinp %d", i);
        for (int i = 0; i < OC * IC; i++)
            cr_assert(fabsf(dw1[i] - dw2[i]) <= 1e-4f * (1 + fabsf(dw2[i])), "dw %d", i);
        for (int i = 0; i < OC; i++)
            cr_assert(fabsf(db1[i] - db2[i]) <= 1e-4f * (1 + fabsf(db2[i])), "db %d", i);
        free(inp), free(w), free(bias), free(o1), free(o2), free(dout);
        free(di1), free(di2), free(dw1), free(dw2), free(db1), free(db2);
    }
}

Test(model, whole_model_blas_matches_reference)
{
    char err[CX_ERRLEN];
    model *m = model_new("mlp", NULL, 9, err, sizeof(err));
    cr_assert_not_null(m, "%s", err);
    size_t n = model_num_params(m);
    enum { B = 32 };
    uint8_t in[B * 8], tg[B];
    rng_reset(7);
    fill_bytes(in, sizeof(in), 256);
    fill_bytes(tg, sizeof(tg), 256);
    float l1 = model_forward_backward(m, in, tg, B);
    float *g1 = malloc(n * sizeof(float));
    memcpy(g1, model_grads(m), n * sizeof(float));
    model_set_reference_kernels(m, 1);
    float l2 = model_forward_backward(m, in, tg, B);
    cr_assert_float_eq(l1, l2, 1e-5);
    const float *g2 = model_grads(m);
    double gmax = 0;
    for (size_t i = 0; i < n; i++)
        gmax = fmax(gmax, fabs(g2[i]));
    for (size_t i = 0; i < n; i++)
        cr_assert(fabsf(g1[i] - g2[i]) <= 1e-4 * gmax, "grad %zu: %g vs %g", i, g1[i], g2[i]);
    free(g1);
    model_free(m);
}

/* ---- construction ---- */

Test(model, default_layout_and_init)
{
    char err[CX_ERRLEN];
    model *m = model_new("mlp", NULL, 1, err, sizeof(err));
    cr_assert_not_null(m, "%s", err);
    const model_config *c = model_get_config(m);
    cr_assert(c->context == 8 && c->embed == 16 && c->hidden == 256 && c->max_batch == 32);
    cr_assert_eq(model_num_params(m), 256 * 16 + 256 * 128 + 256 + 256 * 256 + 256);
    cr_assert_eq(model_num_tensors(m), 5);
    const char *names[] = {"wte", "w1", "b1", "w2", "b2"};
    size_t off = 0;
    for (int i = 0; i < 5; i++) {
        const model_tensor *t = model_tensor_get(m, i);
        cr_assert_str_eq(t->name, names[i]);
        cr_assert_eq(t->offset, off);
        cr_assert_eq(t->length, (size_t)t->rows * t->cols);
        cr_assert_eq(t->is_embedding, i == 0);
        cr_assert_eq(t->weight_decay, i == 0 || i == 1 || i == 3);
        off += t->length;
    }
    cr_assert_eq(off, model_num_params(m));
    cr_assert_null(model_tensor_get(m, 5));
    cr_assert_null(model_tensor_get(m, -1));
    cr_assert_str_eq(model_kind(m), "mlp");
    cr_assert_float_eq(model_flops_per_token(m), 6.0 * (128 * 256 + 256 * 256), 1e-6);

    /* a fresh model predicts ~uniform bytes: loss ~ ln 256 */
    enum { B = 256 };
    uint8_t in[B * 8], tg[B];
    rng_reset(8);
    fill_bytes(in, sizeof(in), 256);
    fill_bytes(tg, sizeof(tg), 256);
    float loss = model_loss(m, in, tg, B);
    cr_assert(fabsf(loss - logf(256.0f)) < 0.05f, "fresh loss %g, ln 256 = %g", loss, logf(256.0f));

    /* same seed -> identical params; other seed -> different */
    model *m2 = model_new("mlp", NULL, 1, err, sizeof(err));
    model *m3 = model_new("mlp", NULL, 2, err, sizeof(err));
    cr_assert(memcmp(model_params(m), model_params(m2), model_num_params(m) * 4) == 0);
    cr_assert(memcmp(model_params(m), model_params(m3), model_num_params(m) * 4) != 0);
    model_free(m);
    model_free(m2);
    model_free(m3);
    model_free(NULL);
}

Test(model, bad_config_is_rejected_with_the_field_named)
{
    char err[CX_ERRLEN] = "";
    model_config cfg = {.context = MODEL_MAX_CONTEXT + 1};
    cr_assert_null(model_new("mlp", &cfg, 1, err, sizeof(err)));
    cr_assert(strstr(err, "context") != NULL, "%s", err);
    cfg = (model_config){.hidden = -3};
    cr_assert_null(model_new("mlp", &cfg, 1, err, sizeof(err)));
    cr_assert(strstr(err, "hidden") != NULL, "%s", err);
    cr_assert_null(model_new("transformer9000", NULL, 1, err, sizeof(err)));
    cr_assert(strstr(err, "transformer9000") != NULL, "%s", err);
    cr_assert(model_kind_known("mlp"));
    cr_assert(!model_kind_known("nope"));
    cr_assert(!model_kind_known(NULL));
}

Test(model, chunked_batch_equals_one_big_batch)
{
    char err[CX_ERRLEN];
    model_config small = {.max_batch = 16}, big = {.max_batch = 128};
    model *a = model_new("mlp", &small, 3, err, sizeof(err));
    model *b = model_new("mlp", &big, 3, err, sizeof(err));
    cr_assert(a && b);
    enum { B = 70 };
    uint8_t in[B * 8], tg[B];
    rng_reset(9);
    fill_bytes(in, sizeof(in), 256);
    fill_bytes(tg, sizeof(tg), 256);
    float la = model_forward_backward(a, in, tg, B), lb = model_forward_backward(b, in, tg, B);
    cr_assert_float_eq(la, lb, 1e-5);
    cr_assert_float_eq(model_loss(a, in, tg, B), la, 1e-5);
    size_t n = model_num_params(a);
    const float *ga = model_grads(a), *gb = model_grads(b);
    double gmax = 0;
    for (size_t i = 0; i < n; i++)
        gmax = fmax(gmax, fabs(gb[i]));
    cr_assert(gmax > 0);
    for (size_t i = 0; i < n; i++)
        cr_assert(fabsf(ga[i] - gb[i]) <= 1e-4 * gmax, "grad %zu %g vs %g", i, ga[i], gb[i]);
    /* grads are overwritten, not accumulated, by a second call */
    model_forward_backward(a, in, tg, B);
    for (size_t i = 0; i < n; i++)
        cr_assert(fabsf(ga[i] - gb[i]) <= 1e-4 * gmax, "grad %zu after 2nd call", i);
    model_free(a);
    model_free(b);
}

/* ---- it learns ---- */

Test(model, adamw_on_synthetic_data_lowers_the_loss)
{
    char err[CX_ERRLEN];
    data_source *src = data_source_new(NULL, err, sizeof(err));
    cr_assert_not_null(src, "%s", err);
    model *m = model_new("mlp", NULL, 1, err, sizeof(err));
    cr_assert_not_null(m, "%s", err);
    data_shard *sh = data_shard_new(src, 0, 1, 8, err, sizeof(err));
    cr_assert_not_null(sh, "%s", err);
    adamw *opt = adamw_new(model_num_params(m), NULL, err, sizeof(err));
    cr_assert_not_null(opt, "%s", err);
    for (int i = 0; i < model_num_tensors(m); i++) {
        const model_tensor *t = model_tensor_get(m, i);
        cr_assert_eq(adamw_set_decay(opt, t->offset, t->length, t->weight_decay, err, sizeof(err)), 0);
    }
    enum { NE = 2048, B = 32, STEPS = 400 };
    uint8_t *ein = malloc(NE * 8), *etg = malloc(NE), in[B * 8], tg[B];
    cr_assert_eq(data_eval_examples(src, 8, NE, ein, etg, err, sizeof(err)), 0, "%s", err);
    float before = model_loss(m, ein, etg, NE);
    for (int s = 0; s < STEPS; s++) {
        data_shard_next_batch(sh, B, in, tg);
        float l = model_forward_backward(m, in, tg, B);
        cr_assert(isfinite(l));
        adamw_step(opt, model_params(m), model_grads(m), optim_lr_at(s, 20, STEPS, 3e-3f, 3e-4f));
    }
    float after = model_loss(m, ein, etg, NE);
    double floor = data_entropy_rate(src);
    cr_log_info("eval loss %.4f -> %.4f after %d steps (floor %.4f)", before, after, STEPS, floor);
    cr_assert(fabsf(before - logf(256.0f)) < 0.05f, "before %g", before);
    /* clearly down: more than half of the way from ln 256 to the floor */
    cr_assert(after < before - 0.5 * (before - floor), "after %g before %g floor %g", after, before, floor);
    cr_assert(after > floor - 0.05, "below the entropy floor? %g < %g", after, floor);
    free(ein);
    free(etg);
    adamw_free(opt);
    data_shard_free(sh);
    model_free(m);
    data_source_free(src);
}
