/* test_merge.c - token weights, weighted mean, RDA (norm preservation,
 * identical inputs, zero vectors), the fragment merge's per-segment rule
 * choice, the fused merge_apply against merge_fragment + scale +
 * nesterov_step, its workspace, grace window clamps and the EMA.
 *
 * Tolerances: results are summed in double and stored as float: 1e-6
 * relative on O(1) values. merge_apply does the same float operations as
 * the reference in the same order, so Θ and momentum agree to 1e-6 absolute
 * on O(1) values (in practice bit for bit); the update norm is summed in a
 * different order: 1e-9 relative.
 *
 * "No allocation per call" is not observed directly: ASan interposes
 * malloc, so a counting wrapper cannot be linked into this binary. What is
 * tested instead is the sizing it rests on: merge_apply works on a
 * workspace sized exactly to the fragment and k, and refuses (CX_EINVAL,
 * Θ untouched) a fragment or k the workspace was not sized for.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/parse.h"
#include "numerics/merge.h"
#include "numerics/model.h"
#include "numerics/optim.h"

static double norm(const float *v, size_t n)
{
    return merge_l2norm(v, n);
}

Test(merge, token_weight)
{
    cr_assert_float_eq(merge_token_weight(100, 10), 1000.0, 1e-12);
    cr_assert_float_eq(merge_token_weight(64, 64), 64.0, 1e-12);
    cr_assert_eq(merge_token_weight(100, 0), 0.0);
    cr_assert_eq(merge_token_weight(0, 5), 0.0);
    /* a learner with twice the tokens per step at equal steps weighs 4x */
    cr_assert_float_eq(merge_token_weight(200, 10) / merge_token_weight(100, 10), 4.0, 1e-12);
}

Test(merge, names)
{
    int64_t v = -1;
    cr_assert(cx_enum_value(merge_rule_names, "rda", &v) == 0 && v == MERGE_RULE_RDA);
    cr_assert(cx_enum_value(merge_rule_names, "mean", &v) == 0 && v == MERGE_RULE_MEAN);
    cr_assert_eq(cx_enum_value(merge_rule_names, "median", &v), CX_EINVAL);
    cr_assert(cx_enum_value(merge_weighting_names, "token", &v) == 0 && v == MERGE_WEIGHTS_TOKEN);
    cr_assert(cx_enum_value(merge_weighting_names, "uniform", &v) == 0 && v == MERGE_WEIGHTS_UNIFORM);
    cr_assert_eq(cx_enum_value(merge_weighting_names, "", &v), CX_EINVAL);
    cr_assert_str_eq(cx_enum_name(merge_rule_names, MERGE_RULE_RDA), "rda");
    cr_assert_str_eq(cx_enum_name(merge_weighting_names, MERGE_WEIGHTS_UNIFORM), "uniform");
    cr_assert_str_eq(cx_enum_name(merge_weighting_names, 2), "?");
}

Test(merge, weighted_mean)
{
    const float a[3] = {1, 2, 3}, b[3] = {5, 6, -3};
    const float *vs[2] = {a, b};
    const double w[2] = {1.0, 3.0};
    float out[3];
    cr_assert_eq(merge_mean(out, vs, w, 2, 3, NULL, 0), 0);
    cr_assert_float_eq(out[0], 4.0f, 1e-6);  /* (1 + 15) / 4 */
    cr_assert_float_eq(out[1], 5.0f, 1e-6);  /* (2 + 18) / 4 */
    cr_assert_float_eq(out[2], -1.5f, 1e-6); /* (3 - 9) / 4 */
    /* a zero weight ignores its vector */
    const double w0[2] = {0.0, 2.0};
    cr_assert_eq(merge_mean(out, vs, w0, 2, 3, NULL, 0), 0);
    cr_assert(out[0] == 5.0f && out[2] == -3.0f);
}

Test(merge, bad_weights_are_rejected)
{
    char err[CX_ERRLEN] = "";
    const float a[2] = {1, 2};
    const float *vs[2] = {a, a};
    float out[2] = {7, 7};
    const double zero[2] = {0, 0}, neg[2] = {1, -1}, nan_[2] = {1, NAN};
    cr_assert_eq(merge_mean(out, vs, zero, 2, 2, err, sizeof(err)), CX_EINVAL);
    cr_assert(strstr(err, "zero") != NULL, "%s", err);
    cr_assert(out[0] == 7 && out[1] == 7, "out untouched on failure");
    cr_assert_eq(merge_rda(out, vs, zero, 2, 2, err, sizeof(err)), CX_EINVAL);
    cr_assert_eq(merge_mean(out, vs, neg, 2, 2, err, sizeof(err)), CX_EINVAL);
    cr_assert_eq(merge_rda(out, vs, nan_, 2, 2, err, sizeof(err)), CX_EINVAL);
    cr_assert_eq(merge_mean(out, vs, zero, 0, 2, err, sizeof(err)), CX_EINVAL);
}

Test(merge, rda_preserves_norm_on_orthogonal_inputs)
{
    /* unit vectors e0, e1: mean has norm 1/sqrt 2, RDA keeps norm 1 */
    const float e0[4] = {1, 0, 0, 0}, e1[4] = {0, 1, 0, 0};
    const float *vs[2] = {e0, e1};
    const double w[2] = {1, 1};
    float out[4], mean[4];
    cr_assert_eq(merge_rda(out, vs, w, 2, 4, NULL, 0), 0);
    cr_assert_eq(merge_mean(mean, vs, w, 2, 4, NULL, 0), 0);
    cr_assert_float_eq(norm(out, 4), 1.0, 1e-6);
    cr_assert_float_eq(norm(mean, 4), sqrt(0.5), 1e-6);
    cr_assert_float_eq(out[0], (float)sqrt(0.5), 1e-6);
    cr_assert_float_eq(out[1], (float)sqrt(0.5), 1e-6);
    /* norms 2 and 4, weights 1 and 3: norm = (2 + 12)/4 = 3.5; direction
     * phi(0.25 e0 + 0.75 e1) */
    const float a[4] = {2, 0, 0, 0}, b[4] = {0, 4, 0, 0};
    const float *vs2[2] = {a, b};
    const double w2[2] = {1, 3};
    cr_assert_eq(merge_rda(out, vs2, w2, 2, 4, NULL, 0), 0);
    cr_assert_float_eq(norm(out, 4), 3.5, 1e-6);
    double d = sqrt(0.25 * 0.25 + 0.75 * 0.75);
    cr_assert_float_eq(out[0], (float)(3.5 * 0.25 / d), 1e-5);
    cr_assert_float_eq(out[1], (float)(3.5 * 0.75 / d), 1e-5);
    /* k = 8 random orthogonal-ish high-dimensional vectors of norm ~1:
     * RDA output norm equals the weighted mean of the norms */
    enum { N = 4096, K = 8 };
    float *v[K], *o = malloc(N * sizeof(float));
    double wk[K], wsum = 0, nsum = 0;
    unsigned s = 1;
    for (int k = 0; k < K; k++) {
        v[k] = malloc(N * sizeof(float));
        for (int i = 0; i < N; i++) {
            s = s * 1103515245u + 12345u;
            v[k][i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * (float)(k + 1);
        }
        wk[k] = k + 1;
        wsum += wk[k];
        nsum += wk[k] * norm(v[k], N);
    }
    cr_assert_eq(merge_rda(o, (const float *const *)v, wk, K, N, NULL, 0), 0);
    cr_assert_float_eq(norm(o, N), nsum / wsum, 1e-5 * nsum / wsum);
    for (int k = 0; k < K; k++)
        free(v[k]);
    free(o);
}

Test(merge, rda_equals_mean_for_identical_inputs)
{
    const float a[5] = {0.5f, -1.25f, 3.0f, 0.0f, 2.0f};
    const float *vs[3] = {a, a, a};
    const double w[3] = {1, 7, 0.5};
    float out[5], mean[5];
    cr_assert_eq(merge_rda(out, vs, w, 3, 5, NULL, 0), 0);
    cr_assert_eq(merge_mean(mean, vs, w, 3, 5, NULL, 0), 0);
    for (int i = 0; i < 5; i++) {
        cr_assert_float_eq(out[i], a[i], 1e-6);
        cr_assert_float_eq(out[i], mean[i], 1e-6);
    }
}

Test(merge, rda_zero_vectors)
{
    const float z[3] = {0, 0, 0}, a[3] = {0, 3, 4};
    float out[3] = {9, 9, 9};
    const float *zz[2] = {z, z};
    const double w[2] = {1, 1};
    cr_assert_eq(merge_rda(out, zz, w, 2, 3, NULL, 0), 0);
    cr_assert(out[0] == 0 && out[1] == 0 && out[2] == 0, "all-zero in, all-zero out");
    /* phi(0) = 0: the zero vector adds no direction but halves the norm */
    const float *za[2] = {z, a};
    cr_assert_eq(merge_rda(out, za, w, 2, 3, NULL, 0), 0);
    cr_assert_float_eq(norm(out, 3), 2.5, 1e-6);
    cr_assert_float_eq(out[1], 1.5f, 1e-6);
    cr_assert_float_eq(out[2], 2.0f, 1e-6);
    /* opposite vectors: directions cancel -> zero output, no NaN */
    const float b[3] = {0, -3, -4};
    const float *ab[2] = {a, b};
    cr_assert_eq(merge_rda(out, ab, w, 2, 3, NULL, 0), 0);
    cr_assert(out[0] == 0 && out[1] == 0 && out[2] == 0);
}

Test(merge, fragment_merge_uses_rda_except_on_embeddings)
{
    char err[CX_ERRLEN];
    model *m = model_new("mlp", NULL, 1, err, sizeof(err));
    cr_assert_not_null(m, "%s", err);
    fragment_table *t = fragment_table_new(model_tensors(m), model_num_tensors(m), 8, err, sizeof(err));
    cr_assert_not_null(t, "%s", err);
    /* find the fragment holding the embedding */
    int pe = -1;
    for (int p = 0; p < 8 && pe < 0; p++)
        for (int j = 0; j < fragment_num_ranges(t, p); j++)
            if (fragment_range_is_embedding(t, p, j))
                pe = p;
    cr_assert(pe >= 0);
    cr_assert(fragment_num_ranges(t, pe) >= 2, "test wants a fragment mixing embedding and others");
    size_t L = fragment_length(t, pe);
    enum { K = 3 };
    float *d[K], *out = malloc(L * sizeof(float)), *exp_ = malloc(L * sizeof(float));
    merge_contrib c[K];
    unsigned s = 7;
    for (int k = 0; k < K; k++) {
        d[k] = malloc(L * sizeof(float));
        for (size_t i = 0; i < L; i++) {
            s = s * 1103515245u + 12345u;
            d[k][i] = (float)(s >> 8) / 16777216.0f - 0.5f + (float)k * 0.1f;
        }
        c[k] = (merge_contrib){d[k], (uint64_t)(1000 * (k + 1)), (uint64_t)(10 + k)};
    }
    double wout[K];
    cr_assert_eq(
        merge_fragment(out, t, pe, c, K, MERGE_RULE_RDA, MERGE_WEIGHTS_TOKEN, wout, err, sizeof(err)), 0,
        "%s", err);
    for (int k = 0; k < K; k++)
        cr_assert_float_eq(wout[k], merge_token_weight(c[k].tokens, c[k].steps), 1e-9);
    /* per segment: embedding = mean, others = RDA */
    size_t seg = 0;
    const fragment_range *r = fragment_ranges(t, pe);
    for (int j = 0; j < fragment_num_ranges(t, pe); j++) {
        const float *sv[K];
        for (int k = 0; k < K; k++)
            sv[k] = d[k] + seg;
        if (fragment_range_is_embedding(t, pe, j))
            merge_mean(exp_ + seg, sv, wout, K, r[j].length, NULL, 0);
        else
            merge_rda(exp_ + seg, sv, wout, K, r[j].length, NULL, 0);
        seg += r[j].length;
    }
    for (size_t i = 0; i < L; i++)
        cr_assert_float_eq(out[i], exp_[i], 1e-6, "element %zu", i);
    /* rule=mean: the whole fragment is the weighted mean; uniform weights */
    cr_assert_eq(
        merge_fragment(out, t, pe, c, K, MERGE_RULE_MEAN, MERGE_WEIGHTS_UNIFORM, wout, err, sizeof(err)), 0);
    cr_assert(wout[0] == 1.0 && wout[1] == 1.0 && wout[2] == 1.0);
    const float *all[K] = {d[0], d[1], d[2]};
    merge_mean(exp_, all, wout, K, L, NULL, 0);
    for (size_t i = 0; i < L; i++)
        cr_assert_float_eq(out[i], exp_[i], 1e-6);
    /* RDA differs from mean on the non-embedding part (the check has teeth) */
    float *rda = malloc(L * sizeof(float));
    merge_fragment(rda, t, pe, c, K, MERGE_RULE_RDA, MERGE_WEIGHTS_UNIFORM, NULL, err, sizeof(err));
    double diff = 0;
    for (size_t i = 0; i < L; i++)
        diff += fabs(rda[i] - out[i]);
    cr_assert(diff > 1e-3, "rda and mean agree everywhere?");
    /* all steps == 0: token weights are all 0 -> refused */
    for (int k = 0; k < K; k++)
        c[k].steps = 0;
    cr_assert_eq(
        merge_fragment(out, t, pe, c, K, MERGE_RULE_RDA, MERGE_WEIGHTS_TOKEN, NULL, err, sizeof(err)),
        CX_EINVAL);
    cr_assert_eq(
        merge_fragment(out, t, 99, c, K, MERGE_RULE_RDA, MERGE_WEIGHTS_UNIFORM, NULL, err, sizeof(err)),
        CX_EINVAL);
    for (int k = 0; k < K; k++)
        free(d[k]);
    free(out);
    free(exp_);
    free(rda);
    fragment_table_free(t);
    model_free(m);
}

/* k contributions of fragment length L, random around distinct means. */
static void fill_contribs(float **d, merge_contrib *c, int k, size_t L, unsigned seed)
{
    unsigned s = seed;
    for (int j = 0; j < k; j++) {
        for (size_t i = 0; i < L; i++) {
            s = s * 1103515245u + 12345u;
            d[j][i] = ((float)(s >> 8) / 16777216.0f - 0.5f + (float)j * 0.05f) * 1e-2f;
        }
        c[j] = (merge_contrib){d[j], (uint64_t)(500 * (j + 1) + 37 * j * j), (uint64_t)(10 + 3 * j)};
    }
}

/* The fragment mixing an embedding range with others (RDA and mean
 * segments in one fragment) of an 8-fragment table of the mlp model. */
static int mixed_fragment(const fragment_table *t)
{
    for (int p = 0; p < fragment_count(t); p++)
        for (int j = 0; j < fragment_num_ranges(t, p); j++)
            if (fragment_range_is_embedding(t, p, j) && fragment_num_ranges(t, p) >= 2)
                return p;
    return -1;
}

Test(merge, merge_apply_matches_merge_fragment_and_nesterov)
{
    char err[CX_ERRLEN];
    model *m = model_new("mlp", NULL, 1, err, sizeof(err));
    cr_assert_not_null(m, "%s", err);
    fragment_table *t = fragment_table_new(model_tensors(m), model_num_tensors(m), 8, err, sizeof(err));
    cr_assert_not_null(t, "%s", err);
    int pe = mixed_fragment(t);
    cr_assert(pe >= 0, "test wants a fragment mixing embedding and others");
    int frags[2] = {pe, (pe + 1) % fragment_count(t)};
    enum { KMAX = 8 };
    const int ks[] = {1, 3, 8};
    const float lr = 0.7f, mu = 0.9f;
    size_t Lmax = 0;
    for (int f = 0; f < 2; f++)
        Lmax = fragment_length(t, frags[f]) > Lmax ? fragment_length(t, frags[f]) : Lmax;
    merge_ws *ws = merge_ws_new(Lmax, KMAX, err, sizeof(err));
    cr_assert_not_null(ws, "%s", err);
    float *d[KMAX];
    for (int j = 0; j < KMAX; j++)
        d[j] = malloc(Lmax * sizeof(float));
    float *th = malloc(Lmax * sizeof(float)), *mo = malloc(Lmax * sizeof(float));
    float *th_ref = malloc(Lmax * sizeof(float)), *mo_ref = malloc(Lmax * sizeof(float));
    float *out = malloc(Lmax * sizeof(float));
    merge_contrib c[KMAX];
    int cases = 0;
    for (int f = 0; f < 2; f++) {
        int p = frags[f];
        size_t L = fragment_length(t, p);
        for (int rule = 0; rule < 2; rule++)
            for (int wt = 0; wt < 2; wt++)
                for (int ki = 0; ki < 3; ki++) {
                    int k = ks[ki];
                    double scale = ki == 0 ? 1.0 : (double)k / 8.0 + 0.03; /* 1 and a partial round */
                    unsigned s = 99u + (unsigned)(p * 7 + rule * 3 + wt + ki * 11);
                    for (size_t i = 0; i < L; i++) {
                        s = s * 1103515245u + 12345u;
                        th[i] = th_ref[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
                        mo[i] = mo_ref[i] = 0.0f;
                    }
                    /* two rounds: the second runs with a non-zero momentum */
                    for (int round = 0; round < 2; round++) {
                        fill_contribs(d, c, k, L, s + (unsigned)round * 1000u);
                        double w_ref[KMAX], w_new[KMAX];
                        cr_assert_eq(merge_fragment(out, t, p, c, k, (merge_rule)rule, (merge_weighting)wt,
                                                    w_ref, err, sizeof(err)),
                                     0, "%s", err);
                        for (size_t i = 0; i < L; i++)
                            out[i] = (float)(out[i] * scale);
                        double norm_ref = merge_l2norm(out, L);
                        nesterov_step(th_ref, mo_ref, out, L, lr, mu);
                        double norm_new = -1.0;
                        cr_assert_eq(merge_apply(ws, th, mo, t, p, c, k, (merge_rule)rule,
                                                 (merge_weighting)wt, scale, lr, mu, w_new, &norm_new, err,
                                                 sizeof(err)),
                                     0, "%s", err);
                        for (int j = 0; j < k; j++)
                            cr_assert_eq(w_new[j], w_ref[j], "weight %d", j);
                        cr_assert(norm_ref > 0.0);
                        cr_assert(fabs(norm_new - norm_ref) <= 1e-9 * norm_ref, "norm %g vs %g", norm_new,
                                  norm_ref);
                        for (size_t i = 0; i < L; i++) {
                            cr_assert(fabsf(th[i] - th_ref[i]) <= 1e-6f,
                                      "p=%d rule=%d w=%d k=%d theta[%zu] %g vs %g", p, rule, wt, k, i,
                                      (double)th[i], (double)th_ref[i]);
                            cr_assert(fabsf(mo[i] - mo_ref[i]) <= 1e-6f,
                                      "p=%d rule=%d w=%d k=%d mom[%zu] %g vs %g", p, rule, wt, k, i,
                                      (double)mo[i], (double)mo_ref[i]);
                        }
                    }
                    cases++;
                }
    }
    cr_assert_eq(cases, 2 * 2 * 2 * 3);
    /* the comparison has teeth: theta moved, and RDA differs from mean */
    fill_contribs(d, c, 3, fragment_length(t, pe), 5u);
    size_t L = fragment_length(t, pe);
    memset(th, 0, L * sizeof(float)), memset(mo, 0, L * sizeof(float));
    memset(th_ref, 0, L * sizeof(float)), memset(mo_ref, 0, L * sizeof(float));
    cr_assert_eq(merge_apply(ws, th, mo, t, pe, c, 3, MERGE_RULE_RDA, MERGE_WEIGHTS_UNIFORM, 1.0, lr, mu,
                             NULL, NULL, err, sizeof(err)),
                 0);
    cr_assert_eq(merge_apply(ws, th_ref, mo_ref, t, pe, c, 3, MERGE_RULE_MEAN, MERGE_WEIGHTS_UNIFORM, 1.0, lr,
                             mu, NULL, NULL, err, sizeof(err)),
                 0);
    double diff = 0.0, moved = 0.0;
    for (size_t i = 0; i < L; i++)
        diff += fabs(th[i] - th_ref[i]), moved += fabs(th[i]);
    cr_assert(diff > 1e-4 && moved > 1e-3, "diff %g moved %g", diff, moved);
    for (int j = 0; j < KMAX; j++)
        free(d[j]);
    free(th), free(mo), free(th_ref), free(mo_ref), free(out);
    merge_ws_free(ws);
    fragment_table_free(t);
    model_free(m);
}

Test(merge, merge_apply_refuses_before_touching_theta)
{
    char err[CX_ERRLEN];
    model *m = model_new("mlp", NULL, 1, err, sizeof(err));
    cr_assert_not_null(m, "%s", err);
    fragment_table *t = fragment_table_new(model_tensors(m), model_num_tensors(m), 8, err, sizeof(err));
    cr_assert_not_null(t, "%s", err);
    int p = mixed_fragment(t);
    cr_assert(p >= 0);
    size_t L = fragment_length(t, p);
    enum { K = 4 };
    /* sized exactly: L floats, K contributions */
    merge_ws *ws = merge_ws_new(L, K, err, sizeof(err));
    cr_assert_not_null(ws, "%s", err);
    cr_assert_eq(merge_ws_max_len(ws), L);
    cr_assert_eq(merge_ws_max_k(ws), K);
    float *d[K + 1];
    for (int j = 0; j < K + 1; j++)
        d[j] = malloc(L * sizeof(float));
    merge_contrib c[K + 1];
    fill_contribs(d, c, K + 1, L, 3u);
    float *th = calloc(L, sizeof(float)), *mo = calloc(L, sizeof(float));
    for (size_t i = 0; i < L; i++)
        th[i] = 1.0f, mo[i] = 2.0f;
#define UNTOUCHED()                                                                                          \
    do {                                                                                                     \
        for (size_t i_ = 0; i_ < L; i_++)                                                                    \
            cr_assert(th[i_] == 1.0f && mo[i_] == 2.0f, "element %zu touched", i_);                          \
    } while (0)
    double wout[K + 1] = {-1, -1, -1, -1, -1};
    /* more contributions than the workspace was sized for */
    cr_assert_eq(merge_apply(ws, th, mo, t, p, c, K + 1, MERGE_RULE_RDA, MERGE_WEIGHTS_TOKEN, 1.0, 1.0f, 0.9f,
                             wout, NULL, err, sizeof(err)),
                 CX_EINVAL);
    cr_assert(strstr(err, "5 contributions") != NULL, "%s", err);
    UNTOUCHED();
    cr_assert_eq(wout[0], -1.0, "weights written on error");
    /* all steps 0 under token weights */
    merge_contrib z[K];
    for (int j = 0; j < K; j++)
        z[j] = c[j], z[j].steps = 0;
    cr_assert_eq(merge_apply(ws, th, mo, t, p, z, K, MERGE_RULE_RDA, MERGE_WEIGHTS_TOKEN, 1.0, 1.0f, 0.9f,
                             wout, NULL, err, sizeof(err)),
                 CX_EINVAL);
    cr_assert(strstr(err, "zero") != NULL, "%s", err);
    UNTOUCHED();
    /* fragment out of range, scale not finite, a missing delta */
    cr_assert_eq(merge_apply(ws, th, mo, t, 99, c, K, MERGE_RULE_MEAN, MERGE_WEIGHTS_UNIFORM, 1.0, 1.0f, 0.9f,
                             NULL, NULL, err, sizeof(err)),
                 CX_EINVAL);
    cr_assert(strstr(err, "fragment 99") != NULL, "%s", err);
    cr_assert_eq(merge_apply(ws, th, mo, t, p, c, K, MERGE_RULE_MEAN, MERGE_WEIGHTS_UNIFORM, NAN, 1.0f, 0.9f,
                             NULL, NULL, err, sizeof(err)),
                 CX_EINVAL);
    cr_assert(strstr(err, "scale") != NULL, "%s", err);
    merge_contrib nd[K];
    memcpy(nd, c, sizeof nd);
    nd[2].delta = NULL;
    cr_assert_eq(merge_apply(ws, th, mo, t, p, nd, K, MERGE_RULE_MEAN, MERGE_WEIGHTS_UNIFORM, 1.0, 1.0f, 0.9f,
                             NULL, NULL, err, sizeof(err)),
                 CX_EINVAL);
    UNTOUCHED();
    /* a fragment longer than the workspace: pick one longer than p's */
    int longer = -1;
    for (int q = 0; q < fragment_count(t); q++)
        if (fragment_length(t, q) > L)
            longer = q;
    if (longer >= 0) {
        size_t LL = fragment_length(t, longer);
        float *big[K];
        merge_contrib bc[K];
        for (int j = 0; j < K; j++)
            big[j] = calloc(LL, sizeof(float));
        fill_contribs(big, bc, K, LL, 4u);
        float *bt = calloc(LL, sizeof(float)), *bm = calloc(LL, sizeof(float));
        cr_assert_eq(merge_apply(ws, bt, bm, t, longer, bc, K, MERGE_RULE_MEAN, MERGE_WEIGHTS_UNIFORM, 1.0,
                                 1.0f, 0.9f, NULL, NULL, err, sizeof(err)),
                     CX_EINVAL);
        cr_assert(strstr(err, "workspace") != NULL, "%s", err);
        for (size_t i = 0; i < LL; i++)
            cr_assert(bt[i] == 0.0f && bm[i] == 0.0f);
        for (int j = 0; j < K; j++)
            free(big[j]);
        free(bt), free(bm);
    }
    /* and at exactly its size it merges, and moves theta */
    cr_assert_eq(merge_apply(ws, th, mo, t, p, c, K, MERGE_RULE_RDA, MERGE_WEIGHTS_TOKEN, 1.0, 1.0f, 0.9f,
                             wout, NULL, err, sizeof(err)),
                 0, "%s", err);
    cr_assert(wout[0] > 0.0);
    int moved = 0;
    for (size_t i = 0; i < L; i++)
        moved += th[i] != 1.0f;
    cr_assert(moved > 0);
#undef UNTOUCHED
    for (int j = 0; j < K + 1; j++)
        free(d[j]);
    free(th), free(mo);
    merge_ws_free(ws);
    fragment_table_free(t);
    model_free(m);
}

Test(merge, merge_ws_sizing)
{
    char err[CX_ERRLEN];
    cr_assert_null(merge_ws_new(0, 4, err, sizeof(err)));
    cr_assert(strstr(err, "workspace") != NULL, "%s", err);
    cr_assert_null(merge_ws_new(100, 0, err, sizeof(err)));
    cr_assert_null(merge_ws_new(100, MERGE_MAX_CONTRIB + 1, err, sizeof(err)));
    merge_ws *ws = merge_ws_new(1000, MERGE_MAX_CONTRIB, err, sizeof(err));
    cr_assert_not_null(ws, "%s", err);
    /* caller buffers: distinct, max_len floats each (ASan checks the writes) */
    for (int i = 0; i < MERGE_WS_BUFS; i++) {
        float *b = merge_ws_buf(ws, i);
        cr_assert_not_null(b);
        for (int j = 0; j < i; j++)
            cr_assert_neq(b, merge_ws_buf(ws, j));
        for (size_t e = 0; e < 1000; e++)
            b[e] = (float)i;
    }
    cr_assert_eq(merge_ws_buf(ws, 0)[999], 0.0f);
    cr_assert_null(merge_ws_buf(ws, MERGE_WS_BUFS));
    cr_assert_null(merge_ws_buf(ws, -1));
    merge_ws_free(ws);
    merge_ws_free(NULL);
}

Test(merge, grace_window_clamps)
{
    /* gamma 0.5, tau 2, t_step 100: slack = 200 - (quorum + sync) */
    cr_assert_float_eq(merge_grace_ms(0.5, 2, 100, 50, 30, 1000), 60.0, 1e-9);  /* 0.5 * 120 */
    cr_assert_eq(merge_grace_ms(0.5, 2, 100, 150, 80, 1000), 0.0);              /* no slack: 0 */
    cr_assert_float_eq(merge_grace_ms(0.9, 4, 1000, 10, 10, 500), 500.0, 1e-9); /* cap */
    cr_assert_eq(merge_grace_ms(0.5, 2, NAN, 1, 1, 100), 0.0);
    cr_assert_eq(merge_grace_ms(0.5, 2, INFINITY, 1, 1, 100), 0.0);
    cr_assert_eq(merge_grace_ms(0.5, 2, 100, 1, 1, -5), 0.0);
}

Test(merge, ema)
{
    merge_ema e;
    merge_ema_init(&e, 0.25);
    cr_assert_eq(merge_ema_get(&e, -1.0), -1.0);
    double v = merge_ema_add(&e, 100.0); /* (the assert macros evaluate twice) */
    cr_assert_eq(v, 100.0);              /* first sample initialises */
    v = merge_ema_add(&e, 200.0);
    cr_assert_float_eq(v, 125.0, 1e-12);
    v = merge_ema_add(&e, NAN); /* ignored */
    cr_assert_float_eq(v, 125.0, 1e-12);
    cr_assert_float_eq(merge_ema_get(&e, -1.0), 125.0, 1e-12);
    cr_assert_eq(e.n, 2);
    merge_ema_init(&e, 7.0); /* invalid alpha: no smoothing */
    merge_ema_add(&e, 1.0);
    v = merge_ema_add(&e, 5.0);
    cr_assert_eq(v, 5.0);
}

/* The kernels work on 4 elements at a time and end with a shorter group:
 * every length from 1 to 19 gives, element for element, the scalar
 * arithmetic (sum in double over the inputs, one float rounding), and the
 * update norm and RDA's norms agree with a scalar sum of squares. */
Test(merge, every_length_matches_the_scalar_arithmetic)
{
    enum { NMAX = 19, KMAX = 5 };
    float in[KMAX][NMAX], out[NMAX];
    const float *vs[KMAX];
    double w[KMAX];
    unsigned s = 7u;
    for (int j = 0; j < KMAX; j++) {
        for (int i = 0; i < NMAX; i++) {
            s = s * 1103515245u + 12345u;
            in[j][i] = (float)(s >> 8) / 16777216.0f - 0.5f + 0.1f * (float)j;
        }
        vs[j] = in[j];
        w[j] = 1.0 + 0.37 * j;
    }
    char err[CX_ERRLEN];
    for (int k = 1; k <= KMAX; k++) {
        double sum = 0.0;
        for (int j = 0; j < k; j++)
            sum += w[j];
        for (size_t n = 1; n <= NMAX; n++) {
            cr_assert_eq(merge_mean(out, vs, w, k, n, err, sizeof err), 0, "%s", err);
            double ss = 0.0;
            for (size_t i = 0; i < n; i++) {
                double acc = w[0] / sum * in[0][i];
                for (int j = 1; j < k; j++)
                    acc += w[j] / sum * in[j][i];
                cr_assert_eq(out[i], (float)acc, "k=%d n=%zu out[%zu] %a vs %a", k, n, i, (double)out[i],
                             (double)(float)acc);
                ss += (double)out[i] * out[i];
            }
            double l2 = merge_l2norm(out, n);
            cr_assert(fabs(l2 - sqrt(ss)) <= 1e-12 * sqrt(ss), "k=%d n=%zu norm %.17g vs %.17g", k, n, l2,
                      sqrt(ss));
        }
    }
}

/* merge_apply over a fragment whose ranges are all shorter than, or not a
 * multiple of, the kernels' 4 elements (an embedding range among them, so
 * both the RDA and the mean pass end with a short group) matches
 * merge_fragment + scale + nesterov_step. */
Test(merge, merge_apply_matches_on_ranges_of_any_length)
{
    const model_tensor ts[] = {
        {.name = "a", .offset = 0, .length = 5, .rows = 1, .cols = 5},
        {.name = "emb", .offset = 5, .length = 3, .rows = 1, .cols = 3, .is_embedding = 1},
        {.name = "b", .offset = 8, .length = 11, .rows = 1, .cols = 11},
        {.name = "c", .offset = 19, .length = 1, .rows = 1, .cols = 1},
    };
    enum { L = 20, K = 3 };
    char err[CX_ERRLEN];
    fragment_table *t = fragment_table_new(ts, 4, 1, err, sizeof err);
    cr_assert_not_null(t, "%s", err);
    cr_assert_eq(fragment_length(t, 0), (size_t)L);
    merge_ws *ws = merge_ws_new(L, K, err, sizeof err);
    cr_assert_not_null(ws, "%s", err);
    float *d[K];
    for (int j = 0; j < K; j++)
        d[j] = malloc(L * sizeof(float));
    merge_contrib c[K];
    const float lr = 0.7f, mu = 0.9f;
    for (int rule = 0; rule < 2; rule++)
        for (int k = 1; k <= K; k++) {
            float th[L], mo[L], th_ref[L], mo_ref[L], out[L];
            for (int i = 0; i < L; i++) {
                th[i] = th_ref[i] = 0.01f * (float)i - 0.1f;
                mo[i] = mo_ref[i] = 0.0f;
            }
            double scale = k == 1 ? 1.0 : 0.53;
            for (int round = 0; round < 2; round++) {
                fill_contribs(d, c, k, L, 31u * (unsigned)(rule + 1) + (unsigned)(k + round));
                cr_assert_eq(merge_fragment(out, t, 0, c, k, (merge_rule)rule, MERGE_WEIGHTS_TOKEN, NULL, err,
                                            sizeof err),
                             0, "%s", err);
                for (int i = 0; i < L; i++)
                    out[i] = (float)(out[i] * scale);
                double norm_ref = merge_l2norm(out, L);
                nesterov_step(th_ref, mo_ref, out, L, lr, mu);
                double norm = -1.0;
                cr_assert_eq(merge_apply(ws, th, mo, t, 0, c, k, (merge_rule)rule, MERGE_WEIGHTS_TOKEN, scale,
                                         lr, mu, NULL, &norm, err, sizeof err),
                             0, "%s", err);
                cr_assert(fabs(norm - norm_ref) <= 1e-9 * norm_ref, "norm %g vs %g", norm, norm_ref);
                for (int i = 0; i < L; i++) {
                    cr_assert(th[i] != 0.01f * (float)i - 0.1f, "rule=%d k=%d theta[%d] did not move", rule,
                              k, i);
                    cr_assert(fabsf(th[i] - th_ref[i]) <= 1e-6f, "rule=%d k=%d theta[%d] %g vs %g", rule, k,
                              i, (double)th[i], (double)th_ref[i]);
                    cr_assert(fabsf(mo[i] - mo_ref[i]) <= 1e-6f, "rule=%d k=%d mom[%d] %g vs %g", rule, k, i,
                              (double)mo[i], (double)mo_ref[i]);
                }
            }
        }
    for (int j = 0; j < K; j++)
        free(d[j]);
    merge_ws_free(ws);
    fragment_table_free(t);
}
