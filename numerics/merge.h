/* merge.h - the decoupled merge rules: contribution weights, the plain and
 * radial-directional (RDA) weighted averages, the fragment-level merge that
 * picks one per tensor segment, and the grace-window arithmetic.
 *
 * Inputs are decoded f32 vectors (encoding.h decodes); every sum is
 * accumulated in double and the result written as f32. Nothing here
 * allocates or keeps state, except the EMA helper which the caller embeds
 * and the merge_ws workspace of merge_apply (allocated once, by the caller).
 *
 *   token weight   w = tokens * (tokens / steps)    (0 if steps == 0)
 *   mean           out = sum_k w_k v_k / sum_k w_k
 *   RDA            out = (sum_k w_k |v_k| / sum_k w_k) * phi(sum_k w_k phi(v_k) / sum_k w_k)
 *                  phi(x) = x / |x|, phi(0) = 0, |.| the L2 norm over the segment
 *
 * RDA keeps the average norm of the contributions even when their
 * directions disagree (a plain mean of orthogonal unit vectors shrinks to
 * 1/sqrt(k)); for identical inputs it equals the plain mean.
 *
 * Not here: quorum, versions, staleness checks (the syncer). The outer step
 * is optim.h nesterov_step; merge_apply fuses it with the merge.
 */
#ifndef CX_MERGE_H
#define CX_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "numerics/fragment.h"

typedef enum merge_rule {
    MERGE_RULE_RDA = 0,  /* RDA on non-embedding segments, mean on embeddings (the paper) */
    MERGE_RULE_MEAN = 1, /* plain weighted mean everywhere (ablation) */
} merge_rule;

typedef enum merge_weighting {
    MERGE_WEIGHTS_TOKEN = 0,   /* w = tokens * tokens / steps (the paper) */
    MERGE_WEIGHTS_UNIFORM = 1, /* w = 1 for every contribution (ablation) */
} merge_weighting;

/* The names, indexed by the enums, NULL after the last (common/parse.h's
 * enum tables): trainer/config.c's `merge` and `weights` keys parse and
 * print with them. */
extern const char *const merge_rule_names[];
extern const char *const merge_weighting_names[];

#define MERGE_MAX_CONTRIB 1024 /* k cap (contributions per merge); more is CX_EINVAL */

/* One learner's contribution to a fragment round. */
typedef struct merge_contrib {
    const float *delta; /* [fragment_length] decoded outer gradient, borrowed */
    uint64_t tokens;    /* tokens trained since it last received this fragment */
    uint64_t steps;     /* inner steps since it last received this fragment */
} merge_contrib;

/* w = tokens * (tokens / steps), 0 when steps == 0. */
double merge_token_weight(uint64_t tokens, uint64_t steps);

/* out [n] = sum_k w[k] vs[k] / sum_k w[k]. CX_EINVAL if k < 1 (or > MERGE_MAX_CONTRIB), a weight is
 * negative or non-finite, or sum w == 0 (out untouched then). out may alias
 * no input. */
int merge_mean(float *out, const float *const *vs, const double *w, int k, size_t n, char *err,
               size_t errlen);

/* RDA of k vectors of n floats (one tensor segment), same errors as
 * merge_mean. All-zero inputs give an all-zero output. */
int merge_rda(float *out, const float *const *vs, const double *w, int k, size_t n, char *err, size_t errlen);

/* Merge fragment p of table t: out [fragment_length(t, p)] from k
 * contributions (each delta [fragment_length(t, p)]). Each range of the
 * fragment is one tensor segment: RDA for non-embedding segments under
 * MERGE_RULE_RDA, weighted mean for embedding segments and under
 * MERGE_RULE_MEAN. Weights per `weighting`; if weights_out is non-NULL it
 * receives the k weights used (for the merge event). CX_EINVAL if k < 1 or
 * all weights are 0 (e.g. every contribution has steps == 0). */
int merge_fragment(float *out, const fragment_table *t, int p, const merge_contrib *c, int k, merge_rule rule,
                   merge_weighting weighting, double *weights_out, char *err, size_t errlen);

/* ---- fused merge + outer step (the syncer's hot path) ---- */

/* Workspace for merge_apply, sized once: fragments of up to max_len floats,
 * up to max_k contributions. Besides merge_apply's own scratch it holds
 * MERGE_WS_BUFS caller buffers of max_len floats (merge_ws_buf), which the
 * syncer uses for the gathered Θ, momentum, and Θ and momentum before the
 * merge (to undo a refused one). Not
 * thread-safe: one merge at a time per workspace. */
typedef struct merge_ws merge_ws;

#define MERGE_WS_BUFS 4

/* NULL with CX_EINVAL (max_len 0, max_k outside 1..MERGE_MAX_CONTRIB) or
 * CX_ENOMEM in err. */
merge_ws *merge_ws_new(size_t max_len, int max_k, char *err, size_t errlen);
void merge_ws_free(merge_ws *ws);
size_t merge_ws_max_len(const merge_ws *ws);
int merge_ws_max_k(const merge_ws *ws);
/* Caller buffer i (0..MERGE_WS_BUFS-1) of max_len floats; NULL otherwise. */
float *merge_ws_buf(merge_ws *ws, int i);

/* Merge fragment p of table t from k contributions exactly as
 * merge_fragment does (same rule, weighting, weights_out and errors), scale
 * the merged outer gradient by `scale` (the k/M of a partial round; 1 for
 * none), and apply the outer Nesterov step of nesterov_step (lr, mu) to
 * theta [fragment_length(t, p)] and mom [same] in place. *update_norm
 * (if non-NULL) receives the L2 norm of the scaled merged gradient.
 *
 * Mean segments are one pass over the contributions; RDA segments two (the
 * contribution norms, then the direction into the workspace) plus one over
 * the direction that applies the step. Allocates nothing. Errors are
 * detected before theta and mom are touched: CX_EINVAL as merge_fragment,
 * or if k > merge_ws_max_k, the fragment is longer than merge_ws_max_len,
 * or scale is not finite. */
int merge_apply(merge_ws *ws, float *theta, float *mom, const fragment_table *t, int p,
                const merge_contrib *c, int k, merge_rule rule, merge_weighting weighting, double scale,
                float lr, float mu, double *weights_out, double *update_norm, char *err, size_t errlen);

/* L2 norm of v[0..n) accumulated in double (the "update_norm" of a merge). */
double merge_l2norm(const float *v, size_t n);

/* ---- grace window ---- */

/* grace = clamp(gamma * (tau * t_step - (t_quorum + t_sync)), 0, cap), all in
 * ms. Non-finite inputs give 0 (never block on garbage). */
double merge_grace_ms(double gamma, int tau, double t_step_ms, double t_quorum_ms, double t_sync_ms,
                      double cap_ms);

/* Exponential moving average for the grace timings; an embedded value.
 * The first sample initialises it; then value += alpha (x - value). */
typedef struct merge_ema {
    double alpha; /* weight of a new sample, (0, 1] */
    double value; /* current average (unit of the samples) */
    uint64_t n;   /* samples seen */
} merge_ema;

/* Empty average; alpha outside (0, 1] is taken as 1 (no smoothing). */
void merge_ema_init(merge_ema *e, double alpha);
/* Adds x (ignored if non-finite) and returns the new value. */
double merge_ema_add(merge_ema *e, double x);
/* Current value, or fallback when no sample has been seen. */
double merge_ema_get(const merge_ema *e, double fallback);

#endif
