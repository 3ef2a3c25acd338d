/* merge.c - weighted mean, radial-directional averaging, the fragment merge,
 * grace window and EMA. See merge.h for the formulas.
 *
 * Each output element is summed in double over the k inputs, in a register
 * (4 elements at a time, see "the kernels" below): no scratch, and float
 * rounding happens once per element. merge_apply runs the same arithmetic
 * in one pass into the outer step, so its results match merge_fragment +
 * scale + nesterov_step element for element (only the update norm's
 * summation order differs).
 */
#include "numerics/merge.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "numerics/vecmath.h"

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

/* The kernels work on 4 elements at a time as GCC/clang vector types: 4
 * lanes of double (accumulation, squares) and of float (inputs, results).
 * Each lane does exactly the scalar arithmetic of its element (no FMA: see
 * vecmath.h CX_VEC_CLONES), so the results do not depend on the width the
 * compiler maps them to (one AVX register in the avx2 clone, two SSE2 ones
 * in the baseline). The accumulator of an element stays in a register over
 * the k inputs: no scratch array, one pass over the inputs. The last n % 4
 * elements run through the same code with partial loads and stores. */
/* No 32-byte vector is passed or returned by value (a pointer, or a
 * macro, instead): the baseline clone has no AVX registers to pass them
 * in, and clang refuses such calls even when they are inlined. */
typedef double mv_d4 __attribute__((vector_size(32)));
typedef float mv_f4 __attribute__((vector_size(16)));
#define MV 4

/* The first r (1..4) lanes from p, the rest 0 (zeros add nothing to a sum
 * of squares); store writes the first r lanes back. In the main loops r is
 * the constant 4, so they are plain vector loads and stores. */
static inline __attribute__((always_inline)) mv_f4 mv_load(const float *p, size_t r)
{
    mv_f4 v = {0};
    memcpy(&v, p, r * sizeof(float));
    return v;
}
static inline __attribute__((always_inline)) void mv_store(float *p, mv_f4 v, size_t r)
{
    memcpy(p, &v, r * sizeof(float));
}
#define MV_WIDE(v) __builtin_convertvector((v), mv_d4)
#define MV_NARROW(v) __builtin_convertvector((v), mv_f4)
static inline __attribute__((always_inline)) double mv_sum(const mv_d4 *v)
{
    return ((*v)[0] + (*v)[1]) + ((*v)[2] + (*v)[3]);
}

/* *a = sum_j c[j] vs[j][i .. i+r), in double (r <= 4 lanes). */
static inline __attribute__((always_inline)) void mv_combine(mv_d4 *a, const float *const *vs,
                                                             const double *c, int k, size_t i, size_t r)
{
    *a = MV_WIDE(mv_load(vs[0] + i, r)) * c[0];
    for (int j = 1; j < k; j++)
        *a += MV_WIDE(mv_load(vs[j] + i, r)) * c[j];
}

/* *sq += the squares of v [r], in double. */
static inline __attribute__((always_inline)) void mv_add_squares(mv_d4 *sq, const float *v, size_t r)
{
    mv_d4 d = MV_WIDE(mv_load(v, r));
    *sq += d * d;
}

/* Sum of squares in double of v [n], in two accumulators (the adds of
 * consecutive groups do not wait on each other): lane l of sq0 sums the
 * elements i % 8 == l, of sq1 those i % 8 == 4 + l. */
static inline __attribute__((always_inline)) double sum_squares(const float *v, size_t n)
{
    mv_d4 sq0 = {0}, sq1 = {0};
    size_t i = 0;
    for (; i + 2 * MV <= n; i += 2 * MV) {
        mv_add_squares(&sq0, v + i, MV);
        mv_add_squares(&sq1, v + i + MV, MV);
    }
    for (; i < n; i += MV)
        mv_add_squares(&sq0, v + i, n - i < MV ? n - i : MV);
    sq0 += sq1;
    return mv_sum(&sq0);
}

/* out [i .. i+r) = (float) mv_combine; *sq += the squares of the sums. */
static inline __attribute__((always_inline)) void mv_combine_to(mv_d4 *sq, float *out, const float *const *vs,
                                                                const double *c, int k, size_t i, size_t r)
{
    mv_d4 a;
    mv_combine(&a, vs, c, k, i, r);
    mv_store(out + i, MV_NARROW(a), r);
    *sq += a * a;
}

/* out [n] = (float) sum_j c[j] vs[j], summed in double; *ss (if non-NULL)
 * = the sum of squares of the double sums. */
CX_VEC_CLONES static void merge_combine(float *out, const float *const *vs, const double *c, int k, size_t n,
                                        double *ss)
{
    mv_d4 sq0 = {0}, sq1 = {0};
    size_t i = 0;
    for (; i + 2 * MV <= n; i += 2 * MV) {
        mv_combine_to(&sq0, out, vs, c, k, i, MV);
        mv_combine_to(&sq1, out, vs, c, k, i + MV, MV);
    }
    for (; i < n; i += MV)
        mv_combine_to(&sq0, out, vs, c, k, i, n - i < MV ? n - i : MV);
    sq0 += sq1;
    if (ss)
        *ss = mv_sum(&sq0);
}

static void merge_mean_unchecked(float *out, const float *const *vs, const double *w, int k, size_t n,
                                 double sum)
{
    double c[MERGE_MAX_CONTRIB];
    for (int j = 0; j < k; j++)
        c[j] = w[j] / sum;
    merge_combine(out, vs, c, k, n, NULL);
}

/* Only static functions are cloned: clang resolves a clone set in the file
 * that defines it, not across files. */
CX_VEC_CLONES static double merge_sum_squares(const float *v, size_t n)
{
    return sum_squares(v, n);
}

double merge_l2norm(const float *v, size_t n)
{
    return sqrt(merge_sum_squares(v, n));
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

/* The outer step on r (<= 4) elements: o holds the merged gradient as
 * merge_fragment writes it (float); scale it as the syncer did when scaled
 * (a separate float rounding; a scale of 1 is exact and skipped), add its
 * squares to *sq and apply nesterov_step's arithmetic to theta/mom [r]. */
static inline __attribute__((always_inline)) void merge_step(float *theta, float *mom, mv_f4 o, size_t r,
                                                             int scaled, double scale, float lr, float mu,
                                                             mv_d4 *sq)
{
    if (scaled)
        o = MV_NARROW(MV_WIDE(o) * scale);
    mv_d4 od = MV_WIDE(o);
    *sq += od * od;
    mv_f4 b = mu * mv_load(mom, r) + o;
    mv_store(mom, b, r);
    mv_store(theta, mv_load(theta, r) - lr * (o + mu * b), r);
}

/* Where a pass's merged gradient comes from. */
enum merge_src {
    MERGE_SRC_SUM,  /* (float) sum_j c[j] vs[j] */
    MERGE_SRC_COPY, /* vs[0] itself: k is 1 with weight 1, (float)(1.0 * (double)v) == v */
    MERGE_SRC_DIR,  /* RDA: (float)(s * dir) */
};

/* The merged gradient of r (<= 4) elements from i. */
static inline __attribute__((always_inline)) mv_f4 merge_grad(enum merge_src src, const float *const *vs,
                                                              const double *c, int k, const float *dir,
                                                              double s, size_t i, size_t r)
{
    if (src == MERGE_SRC_DIR)
        return MV_NARROW(MV_WIDE(mv_load(dir + i, r)) * s);
    if (src == MERGE_SRC_COPY)
        return mv_load(vs[0] + i, r);
    mv_d4 a;
    mv_combine(&a, vs, c, k, i, r);
    return MV_NARROW(a);
}

/* One pass over n elements; src and scaled are constants in each caller
 * below, so each gets its own loop without tests. Two squares
 * accumulators, so the adds of consecutive groups do not wait on each
 * other. */
static inline __attribute__((always_inline)) void
merge_pass(enum merge_src src, int scaled, float *theta, float *mom, const float *const *vs, const double *c,
           int k, const float *dir, double s, size_t n, double scale, float lr, float mu, double *ss)
{
    mv_d4 sq0 = {0}, sq1 = {0};
    size_t i = 0;
    for (; i + 2 * MV <= n; i += 2 * MV) {
        merge_step(theta + i, mom + i, merge_grad(src, vs, c, k, dir, s, i, MV), MV, scaled, scale, lr, mu,
                   &sq0);
        merge_step(theta + i + MV, mom + i + MV, merge_grad(src, vs, c, k, dir, s, i + MV, MV), MV, scaled,
                   scale, lr, mu, &sq1);
    }
    for (; i < n; i += MV) {
        size_t r = n - i < MV ? n - i : MV;
        merge_step(theta + i, mom + i, merge_grad(src, vs, c, k, dir, s, i, r), r, scaled, scale, lr, mu,
                   &sq0);
    }
    mv_d4 sq = sq0 + sq1;
    *ss += mv_sum(&sq);
}

/* The merged gradient (src) into the outer step, in one pass reading the k
 * inputs (or dir), theta and mom once. */
CX_VEC_CLONES static void merge_apply_pass(float *theta, float *mom, const float *const *vs, const double *c,
                                           int k, const float *dir, double s, size_t n, double scale,
                                           float lr, float mu, double *ss)
{
    enum merge_src src = dir ? MERGE_SRC_DIR : k == 1 && c[0] == 1.0 ? MERGE_SRC_COPY : MERGE_SRC_SUM;
#define MERGE_PASS(src_, scaled_)                                                                            \
    merge_pass(src_, scaled_, theta, mom, vs, c, k, dir, s, n, scale, lr, mu, ss)
    int scaled = scale != 1.0;
    if (src == MERGE_SRC_DIR)
        scaled ? MERGE_PASS(MERGE_SRC_DIR, 1) : MERGE_PASS(MERGE_SRC_DIR, 0);
    else if (src == MERGE_SRC_COPY)
        scaled ? MERGE_PASS(MERGE_SRC_COPY, 1) : MERGE_PASS(MERGE_SRC_COPY, 0);
    else
        scaled ? MERGE_PASS(MERGE_SRC_SUM, 1) : MERGE_PASS(MERGE_SRC_SUM, 0);
#undef MERGE_PASS
}

/* Mean segment: a single pass reading the k inputs, theta and mom. */
static void merge_apply_mean(float *theta, float *mom, const float *const *vs, const double *w, int k,
                             size_t n, double sum, double scale, float lr, float mu, double *ss)
{
    double c[MERGE_MAX_CONTRIB];
    for (int j = 0; j < k; j++)
        c[j] = w[j] / sum;
    merge_apply_pass(theta, mom, vs, c, k, NULL, 0.0, n, scale, lr, mu, ss);
}

/* RDA segment: the final scale needs the norm of the whole direction, so
 * the unscaled direction goes to dir [n] first, then one pass over dir
 * applies RDA's scale (the same float rounding as merge_rda_unchecked), the
 * syncer's scale and the step: no separate pass for RDA's scale. */
static void merge_apply_rda(float *dir, float *theta, float *mom, const float *const *vs, const double *w,
                            int k, size_t n, double sum, double scale, float lr, float mu, double *ss)
{
    double s = merge_rda_direction(dir, vs, w, k, n, sum);
    merge_apply_pass(theta, mom, vs, NULL, k, dir, s, n, scale, lr, mu, ss);
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
