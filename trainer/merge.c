/* merge.c - weighted mean, radial-directional averaging, the fragment merge,
 * grace window and EMA. See merge.h for the formulas.
 *
 * Each output element is summed in double over the k inputs (in a small
 * stack block, so the inner loops stay contiguous and vectorise): no heap
 * scratch, and float rounding happens once per element.
 */
#include "trainer/merge.h"

#include <math.h>
#include <string.h>

#include "common/err.h"

/* ---- names ---- */

int merge_rule_parse(const char *name, merge_rule *out, char *err, size_t errlen)
{
    if (name && strcmp(name, "rda") == 0)
        *out = MERGE_RULE_RDA;
    else if (name && strcmp(name, "mean") == 0)
        *out = MERGE_RULE_MEAN;
    else
        return cx_fail(err, errlen, CX_EINVAL, "unknown merge rule '%s' (expected rda or mean)",
                       name ? name : "(null)");
    return CX_OK;
}

const char *merge_rule_name(merge_rule r)
{
    return r == MERGE_RULE_RDA ? "rda" : r == MERGE_RULE_MEAN ? "mean" : "?";
}

int merge_weighting_parse(const char *name, merge_weighting *out, char *err, size_t errlen)
{
    if (name && strcmp(name, "token") == 0)
        *out = MERGE_WEIGHTS_TOKEN;
    else if (name && strcmp(name, "uniform") == 0)
        *out = MERGE_WEIGHTS_UNIFORM;
    else
        return cx_fail(err, errlen, CX_EINVAL, "unknown merge weighting '%s' (expected token or uniform)",
                       name ? name : "(null)");
    return CX_OK;
}

const char *merge_weighting_name(merge_weighting w)
{
    return w == MERGE_WEIGHTS_TOKEN ? "token" : w == MERGE_WEIGHTS_UNIFORM ? "uniform" : "?";
}

/* ---- weights ---- */

double merge_token_weight(uint64_t tokens, uint64_t steps)
{
    if (steps == 0)
        return 0.0;
    double t = (double)tokens;
    return t * (t / (double)steps);
}

/* Validate k and w; return sum w via *sum. */
static int merge_check(const float *const *vs, const double *w, int k, double *sum, char *err, size_t errlen)
{
    if (k < 1 || k > MERGE_MAX_CONTRIB)
        return cx_fail(err, errlen, CX_EINVAL, "merge: %d contributions, expected 1..%d", k,
                       MERGE_MAX_CONTRIB);
    double s = 0.0;
    for (int i = 0; i < k; i++) {
        if (!(w[i] >= 0.0) || !isfinite(w[i]))
            return cx_fail(err, errlen, CX_EINVAL, "merge: weight %d is %g (must be finite and >= 0)", i,
                           w[i]);
        if (!vs[i])
            return cx_fail(err, errlen, CX_EINVAL, "merge: contribution %d has no data", i);
        s += w[i];
    }
    if (!(s > 0.0))
        return cx_fail(err, errlen, CX_EINVAL, "merge: all %d weights are zero", k);
    *sum = s;
    return CX_OK;
}

/* ---- averages ---- */

/* out [n] = sum_j c[j] vs[j], summed in double. Blocked so that the inner
 * loop runs over contiguous elements (vectorisable) while each output
 * element is still accumulated in double over the k inputs. Returns the
 * sum of squares of the (double) result when ss is non-NULL. */
#define MERGE_BLOCK 256

static void merge_combine(float *out, const float *const *vs, const double *c, int k, size_t n, double *ss)
{
    double acc[MERGE_BLOCK];
    double sq = 0.0;
    for (size_t b0 = 0; b0 < n; b0 += MERGE_BLOCK) {
        size_t bn = n - b0 < MERGE_BLOCK ? n - b0 : MERGE_BLOCK;
        const float *v0 = vs[0] + b0;
        for (size_t i = 0; i < bn; i++)
            acc[i] = c[0] * v0[i];
        for (int j = 1; j < k; j++) {
            const float *vj = vs[j] + b0;
            double cj = c[j];
            for (size_t i = 0; i < bn; i++)
                acc[i] += cj * vj[i];
        }
        for (size_t i = 0; i < bn; i++) /* vectorises */
            out[b0 + i] = (float)acc[i];
        if (ss) { /* four partial sums, see merge_l2norm */
            double q0 = 0, q1 = 0, q2 = 0, q3 = 0;
            size_t i = 0;
            for (; i + 4 <= bn; i += 4) {
                q0 += acc[i] * acc[i];
                q1 += acc[i + 1] * acc[i + 1];
                q2 += acc[i + 2] * acc[i + 2];
                q3 += acc[i + 3] * acc[i + 3];
            }
            for (; i < bn; i++)
                q0 += acc[i] * acc[i];
            sq += (q0 + q1) + (q2 + q3);
        }
    }
    if (ss)
        *ss = sq;
}

static void merge_mean_unchecked(float *out, const float *const *vs, const double *w, int k, size_t n,
                                 double sum)
{
    double c[MERGE_MAX_CONTRIB];
    for (int j = 0; j < k; j++)
        c[j] = w[j] / sum;
    merge_combine(out, vs, c, k, n, NULL);
}

int merge_mean(float *out, const float *const *vs, const double *w, int k, size_t n, char *err, size_t errlen)
{
    double sum;
    int rc = merge_check(vs, w, k, &sum, err, errlen);
    if (rc != CX_OK)
        return rc;
    merge_mean_unchecked(out, vs, w, k, n, sum);
    return CX_OK;
}

double merge_l2norm(const float *v, size_t n)
{
    /* 4 independent partial sums: a single running sum is bound by the
     * latency of one floating add per element */
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)v[i] * v[i];
        s1 += (double)v[i + 1] * v[i + 1];
        s2 += (double)v[i + 2] * v[i + 2];
        s3 += (double)v[i + 3] * v[i + 3];
    }
    for (; i < n; i++)
        s0 += (double)v[i] * v[i];
    return sqrt((s0 + s1) + (s2 + s3));
}

static void merge_rda_unchecked(float *out, const float *const *vs, const double *w, int k, size_t n,
                                double sum)
{
    /* c_j = (w_j / sum) / |v_j| is the weight of v_j in the mean direction
     * sum_j (w_j/sum) phi(v_j); zero vectors contribute nothing (phi(0)=0). */
    double c[MERGE_MAX_CONTRIB];
    double avg_norm = 0.0;
    for (int j = 0; j < k; j++) {
        double nj = merge_l2norm(vs[j], n);
        avg_norm += w[j] / sum * nj;
        c[j] = nj > 0.0 ? (w[j] / sum) / nj : 0.0;
    }
    double dir_ss = 0.0;
    merge_combine(out, vs, c, k, n, &dir_ss);
    double dir_norm = sqrt(dir_ss);
    /* phi(mean direction) scaled to the mean norm; phi(0) = 0 */
    double s = dir_norm > 0.0 ? avg_norm / dir_norm : 0.0;
    for (size_t i = 0; i < n; i++)
        out[i] = (float)(s * out[i]);
}

int merge_rda(float *out, const float *const *vs, const double *w, int k, size_t n, char *err, size_t errlen)
{
    double sum;
    int rc = merge_check(vs, w, k, &sum, err, errlen);
    if (rc != CX_OK)
        return rc;
    merge_rda_unchecked(out, vs, w, k, n, sum);
    return CX_OK;
}

/* ---- fragment merge ---- */

int merge_fragment(float *out, const fragment_table *t, int p, const merge_contrib *c, int k, merge_rule rule,
                   merge_weighting weighting, double *weights_out, char *err, size_t errlen)
{
    if (p < 0 || p >= fragment_count(t))
        return cx_fail(err, errlen, CX_EINVAL, "merge: fragment %d out of range 0..%d", p,
                       fragment_count(t) - 1);
    if (k < 1 || k > MERGE_MAX_CONTRIB)
        return cx_fail(err, errlen, CX_EINVAL, "merge: %d contributions, expected 1..%d", k,
                       MERGE_MAX_CONTRIB);
    double w[MERGE_MAX_CONTRIB];
    const float *vs[MERGE_MAX_CONTRIB];
    for (int j = 0; j < k; j++) {
        w[j] = weighting == MERGE_WEIGHTS_UNIFORM ? 1.0 : merge_token_weight(c[j].tokens, c[j].steps);
        vs[j] = c[j].delta;
    }
    double sum;
    int rc = merge_check(vs, w, k, &sum, err, errlen);
    if (rc != CX_OK)
        return rc;
    if (weights_out)
        memcpy(weights_out, w, (size_t)k * sizeof(double));

    const fragment_range *r = fragment_ranges(t, p);
    int nr = fragment_num_ranges(t, p);
    size_t seg = 0; /* offset of the current range in the payload */
    for (int j = 0; j < nr; j++) {
        const float *sv[MERGE_MAX_CONTRIB];
        for (int q = 0; q < k; q++)
            sv[q] = vs[q] + seg;
        if (rule == MERGE_RULE_RDA && !fragment_range_is_embedding(t, p, j))
            merge_rda_unchecked(out + seg, sv, w, k, r[j].length, sum);
        else
            merge_mean_unchecked(out + seg, sv, w, k, r[j].length, sum);
        seg += r[j].length;
    }
    return CX_OK;
}

/* ---- grace window and EMA ---- */

double merge_grace_ms(double gamma, int tau, double t_step_ms, double t_quorum_ms, double t_sync_ms,
                      double cap_ms)
{
    double g = gamma * ((double)tau * t_step_ms - (t_quorum_ms + t_sync_ms));
    if (!isfinite(g) || !isfinite(cap_ms) || g <= 0.0 || cap_ms <= 0.0)
        return 0.0;
    return g < cap_ms ? g : cap_ms;
}

void merge_ema_init(merge_ema *e, double alpha)
{
    if (!(alpha > 0.0) || alpha > 1.0)
        alpha = 1.0;
    e->alpha = alpha;
    e->value = 0.0;
    e->n = 0;
}

double merge_ema_add(merge_ema *e, double x)
{
    if (!isfinite(x))
        return e->value;
    if (e->n == 0)
        e->value = x;
    else
        e->value += e->alpha * (x - e->value);
    e->n++;
    return e->value;
}

double merge_ema_get(const merge_ema *e, double fallback)
{
    return e->n ? e->value : fallback;
}
