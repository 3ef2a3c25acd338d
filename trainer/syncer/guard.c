/* guard.c - bounds on one learner's contribution and on a merge's
 * result; the contract is in guard.h. */
#include "trainer/syncer/guard.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"

int64_t guard_weight_steps(int64_t steps, int64_t H)
{
    int64_t cap = 2 * (H >= 1 ? H : 1);
    return steps < 0 ? 0 : steps > cap ? cap : steps;
}

int64_t guard_weight_tokens(int64_t tokens, int64_t wsteps, int64_t batch)
{
    /* wsteps <= 2H and batch <= CONFIG_BATCH_MAX: the product stays far below 2^63 */
    int64_t cap = wsteps * (batch > 0 ? batch : 0);
    return tokens < 0 ? 0 : tokens > cap ? cap : tokens;
}

double guard_l2(const float *v, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)v[i] * (double)v[i];
    return sqrt(s);
}

/* ---- the norm statistic ---- */

int64_t guard_norm_steps(int64_t steps, int64_t H)
{
    int64_t h = H >= 1 ? H : 1, cap = GUARD_NORM_STEPS_H * h;
    return steps < h ? h : steps > cap ? cap : steps;
}

/* Median of the l2 samples of g that count for learner (not its own
 * unless own_counts); *k gets how many. */
static double others_median(const guard_norms *g, int64_t learner, int own_counts, int *k)
{
    double v[GUARD_NORM_SAMPLES];
    int m = 0;
    int64_t have = g->n < GUARD_NORM_SAMPLES ? g->n : GUARD_NORM_SAMPLES;
    for (int64_t i = 0; i < have; i++)
        if (own_counts || g->learner[i] != learner)
            v[m++] = g->l2[i];
    *k = m;
    if (m == 0)
        return 0.0;
    for (int i = 1; i < m; i++) /* insertion sort: m <= 32 */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

double guard_norm_limit(const guard_norms *g, int64_t learner, int own_counts, int64_t nsteps, double frag_l2,
                        size_t frag_len, double bound, char *why, size_t len)
{
    if (!(bound > 0)) {
        snprintf(why, len, "no norm bound (--norm-bound 0)");
        return INFINITY;
    }
    int k = 0;
    double med = others_median(g, learner, own_counts, &k);
    if (k < GUARD_NORM_WARMUP || !(med > 0)) {
        /* too few samples from the others (or only zero updates, which bound nothing): bounded by the
         * fragment itself */
        double floor = GUARD_WARMUP_FLOOR * sqrt((double)frag_len);
        double ref = frag_l2 > floor ? frag_l2 : floor;
        snprintf(why, len,
                 "warm-up bound: %g x the fragment's L2 norm %.4g (%d of %d samples from other learners)",
                 GUARD_WARMUP_REL, ref, k, GUARD_NORM_WARMUP);
        return GUARD_WARMUP_REL * ref;
    }
    snprintf(why, len,
             "norm bound: %g x the median %.4g per step of the last %d from other learners x %lld steps",
             bound, med, k, (long long)nsteps);
    return bound * med * (double)nsteps;
}

double guard_clip_factor(double l2, double limit)
{
    if (!isfinite(l2))
        return 0.0;
    return l2 <= limit ? 1.0 : limit / l2;
}

void guard_norm_add(guard_norms *g, int64_t learner, double l2_step)
{
    int i = (int)(g->n % GUARD_NORM_SAMPLES);
    g->learner[i] = learner;
    g->l2[i] = l2_step;
    g->n++;
}

/* ---- persistence ---- */

json_t *guard_norms_json(const guard_norms *g)
{
    json_t *ids = json_array(), *l2 = json_array();
    int64_t have = g->n < GUARD_NORM_SAMPLES ? g->n : GUARD_NORM_SAMPLES;
    for (int64_t i = 0; i < have; i++) {
        json_array_append_new(ids, json_integer(g->learner[i]));
        json_array_append_new(l2, json_real(g->l2[i]));
    }
    return json_pack("{s:I, s:o, s:o}", "n", (json_int_t)g->n, "learner", ids, "l2", l2);
}

int guard_norms_parse(guard_norms *g, json_t *j, char *err, size_t errlen)
{
    json_int_t n = -1;
    json_t *ids = NULL, *l2 = NULL;
    guard_norms t;
    memset(&t, 0, sizeof t);
    if (cx_json_unpack(j, "norms", err, errlen, "{s:I, s:o, s:o}", "n", &n, "learner", &ids, "l2", &l2) != 0)
        return -1;
    size_t have = n < 0 ? 0 : n < GUARD_NORM_SAMPLES ? (size_t)n : GUARD_NORM_SAMPLES;
    if (n < 0 || !json_is_array(ids) || !json_is_array(l2) || json_array_size(ids) != have ||
        json_array_size(l2) != have) {
        snprintf(err, errlen, "norms: n must be >= 0 and learner, l2 arrays of min(n, %d) entries",
                 GUARD_NORM_SAMPLES);
        return -1;
    }
    for (size_t i = 0; i < have; i++) {
        json_t *a = json_array_get(ids, i), *b = json_array_get(l2, i);
        if (!json_is_integer(a) || !json_is_number(b) ||
            !(json_number_value(b) >= 0 && isfinite(json_number_value(b)))) {
            snprintf(err, errlen, "norms: entry %zu must be an integer learner and a finite norm >= 0", i);
            return -1;
        }
        t.learner[i] = json_integer_value(a);
        t.l2[i] = json_number_value(b);
    }
    t.n = n;
    *g = t;
    return 0;
}

/* ---- the merge's result ---- */

int guard_merge_result(const float *old, const float *th, const float *mo, size_t len, char *why, size_t wlen)
{
    for (size_t i = 0; i < len; i++)
        if (!isfinite(th[i]) || !isfinite(mo[i])) {
            snprintf(why, wlen, "merged %s value %zu is not finite (%g)",
                     isfinite(th[i]) ? "momentum" : "theta", i,
                     isfinite(th[i]) ? (double)mo[i] : (double)th[i]);
            return 1;
        }
    double before = guard_l2(old, len), after = guard_l2(th, len);
    double floor = GUARD_FRAG_FLOOR * sqrt((double)len);
    double ref = before > floor ? before : floor;
    if (!(after <= GUARD_MERGE_GROWTH * ref)) {
        snprintf(why, wlen, "merged L2 norm %.4g is more than %d x the fragment's %.4g before the merge",
                 after, GUARD_MERGE_GROWTH, ref);
        return 1;
    }
    return 0;
}
