/* merge.c - weighted mean, radial-directional averaging, the fragment merge,
 * grace window and EMA. See merge.h for the formulas.
 *
 * Each output element is summed in double over the k inputs (in a small
 * stack block, so the inner loops stay contiguous and vectorise): no heap
 * scratch, and float rounding happens once per element. merge_apply runs
 * the same arithmetic block by block into the outer step, so its results
 * match merge_fragment + scale + nesterov_step element for element (only
 * the update norm's summation order differs).
 */
#include "numerics/merge.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "numerics/optim.h"

/* ---- names ---- */

const char *const merge_rule_names[] = {"rda", "mean", NULL};
const char *const merge_weighting_names[] = {"token", "uniform", NULL};

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

/* acc [bn] = sum_j c[j] vs[j][b0 .. b0+bn), in double: the k inputs one
 * after the other over a contiguous block (vectorisable). */
static void merge_block_acc(double *acc, const float *const *vs, const double *c, int k, size_t b0, size_t bn)
{
    const float *v0 = vs[0] + b0;
    for (size_t i = 0; i < bn; i++)
        acc[i] = c[0] * v0[i];
    for (int j = 1; j < k; j++) {
        const float *vj = vs[j] + b0;
        double cj = c[j];
        for (size_t i = 0; i < bn; i++)
            acc[i] += cj * vj[i];
    }
}

/* Sum of squares in double, over float or double elements. 4 independent
 * partial sums: a single running sum is bound by the latency of one
 * floating add per element. */
#define DEFINE_SUM_SQUARES(name, T)                                                                          \
    static double name(const T *v, size_t n)                                                                 \
    {                                                                                                        \
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;                                                       \
        size_t i = 0;                                                                                        \
        for (; i + 4 <= n; i += 4) {                                                                         \
            s0 += (double)v[i] * v[i];                                                                       \
            s1 += (double)v[i + 1] * v[i + 1];                                                               \
            s2 += (double)v[i + 2] * v[i + 2];                                                               \
            s3 += (double)v[i + 3] * v[i + 3];                                                               \
        }                                                                                                    \
        for (; i < n; i++)                                                                                   \
            s0 += (double)v[i] * v[i];                                                                       \
        return (s0 + s1) + (s2 + s3);                                                                        \
    }
DEFINE_SUM_SQUARES(sum_squares, float)
DEFINE_SUM_SQUARES(merge_ss_d, double)

static void merge_combine(float *out, const float *const *vs, const double *c, int k, size_t n, double *ss)
{
    double acc[MERGE_BLOCK];
    double sq = 0.0;
    for (size_t b0 = 0; b0 < n; b0 += MERGE_BLOCK) {
        size_t bn = n - b0 < MERGE_BLOCK ? n - b0 : MERGE_BLOCK;
        merge_block_acc(acc, vs, c, k, b0, bn);
        for (size_t i = 0; i < bn; i++) /* vectorises */
            out[b0 + i] = (float)acc[i];
        if (ss)
            sq += merge_ss_d(acc, bn);
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

double merge_l2norm(const float *v, size_t n)
{
    return sqrt(sum_squares(v, n));
}

/* RDA's mean direction into dir [n] (unscaled, float) and the factor s
 * that scales it to the mean norm: the rule's result is (float)(s * dir[i]). */
static double merge_rda_direction(float *dir, const float *const *vs, const double *w, int k, size_t n,
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
    merge_combine(dir, vs, c, k, n, &dir_ss);
    double dir_norm = sqrt(dir_ss);
    /* phi(mean direction) scaled to the mean norm; phi(0) = 0 */
    return dir_norm > 0.0 ? avg_norm / dir_norm : 0.0;
}

static void merge_rda_unchecked(float *out, const float *const *vs, const double *w, int k, size_t n,
                                double sum)
{
    double s = merge_rda_direction(out, vs, w, k, n, sum);
    for (size_t i = 0; i < n; i++)
        out[i] = (float)(s * out[i]);
}

/* A rule's merge after merge_check: CX_OK, or its error with nothing written. */
static int merge_checked(void (*rule)(float *, const float *const *, const double *, int, size_t, double),
                         float *out, const float *const *vs, const double *w, int k, size_t n, char *err,
                         size_t errlen)
{
    double sum;
    int rc = merge_check(vs, w, k, &sum, err, errlen);
    if (rc == CX_OK)
        rule(out, vs, w, k, n, sum);
    return rc;
}

int merge_mean(float *out, const float *const *vs, const double *w, int k, size_t n, char *err, size_t errlen)
{
    return merge_checked(merge_mean_unchecked, out, vs, w, k, n, err, errlen);
}

int merge_rda(float *out, const float *const *vs, const double *w, int k, size_t n, char *err, size_t errlen)
{
    return merge_checked(merge_rda_unchecked, out, vs, w, k, n, err, errlen);
}

/* ---- fragment merge ---- */

/* The weighing prelude of merge_fragment and merge_apply: checks p, k and
 * the fragment length (against max_k / max_len, the workspace's limits),
 * fills w [k] per `weighting` and vs [k] with the deltas, validates them
 * (merge_check) and copies the weights to weights_out (if non-NULL) once
 * everything passed. *sum = sum of the weights. */
static int merge_weigh(const fragment_table *t, int p, const merge_contrib *c, int k, int max_k,
                       size_t max_len, merge_weighting weighting, double *w, const float **vs, double *sum,
                       double *weights_out, char *err, size_t errlen)
{
    if (p < 0 || p >= fragment_count(t))
        return cx_fail(err, errlen, CX_EINVAL, "merge: fragment %d out of range 0..%d", p,
                       fragment_count(t) - 1);
    if (k < 1 || k > max_k)
        return cx_fail(err, errlen, CX_EINVAL, "merge: %d contributions, expected 1..%d", k, max_k);
    if (fragment_length(t, p) > max_len)
        return cx_fail(err, errlen, CX_EINVAL, "merge: fragment %d has %zu floats, workspace holds %zu", p,
                       fragment_length(t, p), max_len);
    for (int j = 0; j < k; j++) {
        w[j] = weighting == MERGE_WEIGHTS_UNIFORM ? 1.0 : merge_token_weight(c[j].tokens, c[j].steps);
        vs[j] = c[j].delta;
    }
    int rc = merge_check(vs, w, k, sum, err, errlen);
    if (rc != CX_OK)
        return rc;
    if (weights_out)
        memcpy(weights_out, w, (size_t)k * sizeof(double));
    return CX_OK;
}

int merge_fragment(float *out, const fragment_table *t, int p, const merge_contrib *c, int k, merge_rule rule,
                   merge_weighting weighting, double *weights_out, char *err, size_t errlen)
{
    double w[MERGE_MAX_CONTRIB];
    const float *vs[MERGE_MAX_CONTRIB];
    double sum;
    int rc = merge_weigh(t, p, c, k, MERGE_MAX_CONTRIB, SIZE_MAX, weighting, w, vs, &sum, weights_out, err,
                         errlen);
    if (rc != CX_OK)
        return rc;

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

/* ---- fused merge + outer Nesterov ---- */

struct merge_ws {
    size_t max_len;
    int max_k;
    float *dir;                /* [max_len] RDA direction of the current segment */
    float *buf[MERGE_WS_BUFS]; /* [max_len] each, the caller's */
};

merge_ws *merge_ws_new(size_t max_len, int max_k, char *err, size_t errlen)
{
    if (max_len == 0 || max_len > SIZE_MAX / sizeof(float) || max_k < 1 || max_k > MERGE_MAX_CONTRIB) {
        cx_fail(err, errlen, CX_EINVAL,
                "merge workspace: %zu floats, %d contributions (expected >= 1, 1..%d)", max_len, max_k,
                MERGE_MAX_CONTRIB);
        return NULL;
    }
    merge_ws *ws = calloc(1, sizeof *ws);
    if (!ws) {
        cx_fail(err, errlen, CX_ENOMEM, "merge workspace: out of memory");
        return NULL;
    }
    ws->max_len = max_len;
    ws->max_k = max_k;
    int ok = (ws->dir = malloc(max_len * sizeof(float))) != NULL;
    for (int i = 0; i < MERGE_WS_BUFS; i++)
        ok &= (ws->buf[i] = malloc(max_len * sizeof(float))) != NULL;
    if (!ok) {
        merge_ws_free(ws);
        cx_fail(err, errlen, CX_ENOMEM, "merge workspace: out of memory for %zu floats", max_len);
        return NULL;
    }
    return ws;
}

void merge_ws_free(merge_ws *ws)
{
    if (!ws)
        return;
    free(ws->dir);
    for (int i = 0; i < MERGE_WS_BUFS; i++)
        free(ws->buf[i]);
    free(ws);
}

size_t merge_ws_max_len(const merge_ws *ws)
{
    return ws->max_len;
}

int merge_ws_max_k(const merge_ws *ws)
{
    return ws->max_k;
}

float *merge_ws_buf(merge_ws *ws, int i)
{
    return i >= 0 && i < MERGE_WS_BUFS ? ws->buf[i] : NULL;
}

/* One block of the outer step: o [bn] holds the merged gradient as
 * merge_fragment writes it (float); scale it as the syncer did (a separate
 * float rounding, skipped for 1 which is exact), add its squares to *ss and
 * apply nesterov_step to theta/mom [bn]. */
static void merge_step_block(float *theta, float *mom, float *o, size_t bn, double scale, float lr, float mu,
                             double *ss)
{
    if (scale != 1.0)
        for (size_t i = 0; i < bn; i++)
            o[i] = (float)(o[i] * scale);
    *ss += sum_squares(o, bn);
    nesterov_step(theta, mom, o, bn, lr, mu);
}

/* Mean segment: a single pass reading the k inputs, theta and mom. */
static void merge_apply_mean(float *theta, float *mom, const float *const *vs, const double *w, int k,
                             size_t n, double sum, double scale, float lr, float mu, double *ss)
{
    double c[MERGE_MAX_CONTRIB];
    for (int j = 0; j < k; j++)
        c[j] = w[j] / sum;
    double acc[MERGE_BLOCK];
    float o[MERGE_BLOCK];
    for (size_t b0 = 0; b0 < n; b0 += MERGE_BLOCK) {
        size_t bn = n - b0 < MERGE_BLOCK ? n - b0 : MERGE_BLOCK;
        merge_block_acc(acc, vs, c, k, b0, bn);
        for (size_t i = 0; i < bn; i++)
            o[i] = (float)acc[i];
        merge_step_block(theta + b0, mom + b0, o, bn, scale, lr, mu, ss);
    }
}

/* RDA segment: the final scale needs the norm of the whole direction, so
 * the unscaled direction goes to dir [n] first, then one pass over dir
 * applies RDA's scale (the same float rounding as merge_rda_unchecked), the
 * syncer's scale and the step: no separate pass for RDA's scale. */
static void merge_apply_rda(float *dir, float *theta, float *mom, const float *const *vs, const double *w,
                            int k, size_t n, double sum, double scale, float lr, float mu, double *ss)
{
    double s = merge_rda_direction(dir, vs, w, k, n, sum);
    float o[MERGE_BLOCK];
    for (size_t b0 = 0; b0 < n; b0 += MERGE_BLOCK) {
        size_t bn = n - b0 < MERGE_BLOCK ? n - b0 : MERGE_BLOCK;
        for (size_t i = 0; i < bn; i++)
            o[i] = (float)(s * dir[b0 + i]);
        merge_step_block(theta + b0, mom + b0, o, bn, scale, lr, mu, ss);
    }
}

int merge_apply(merge_ws *ws, float *theta, float *mom, const fragment_table *t, int p,
                const merge_contrib *c, int k, merge_rule rule, merge_weighting weighting, double scale,
                float lr, float mu, double *weights_out, double *update_norm, char *err, size_t errlen)
{
    if (!isfinite(scale))
        return cx_fail(err, errlen, CX_EINVAL, "merge: scale %g is not finite", scale);
    double w[MERGE_MAX_CONTRIB];
    const float *vs[MERGE_MAX_CONTRIB];
    double sum;
    int rc =
        merge_weigh(t, p, c, k, ws->max_k, ws->max_len, weighting, w, vs, &sum, weights_out, err, errlen);
    if (rc != CX_OK)
        return rc;

    const fragment_range *r = fragment_ranges(t, p);
    int nr = fragment_num_ranges(t, p);
    size_t seg = 0;
    double ss = 0.0;
    for (int j = 0; j < nr; j++) {
        const float *sv[MERGE_MAX_CONTRIB];
        for (int q = 0; q < k; q++)
            sv[q] = vs[q] + seg;
        if (rule == MERGE_RULE_RDA && !fragment_range_is_embedding(t, p, j))
            merge_apply_rda(ws->dir, theta + seg, mom + seg, sv, w, k, r[j].length, sum, scale, lr, mu, &ss);
        else
            merge_apply_mean(theta + seg, mom + seg, sv, w, k, r[j].length, sum, scale, lr, mu, &ss);
        seg += r[j].length;
    }
    if (update_norm)
        *update_norm = sqrt(ss);
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
