/* syncer_guard.h - what one learner's contribution may weigh in a merge, how
 * large it may be, and whether a merge's result may be applied (issue 28:
 * one learner's credential must not be able to destroy, replace or stall
 * the global model).
 *
 * What it is: pure functions and one embedded value (guard_norms, a
 * per-fragment ring of accepted contribution norms) that the syncer's
 * rounds (syncer_rounds.c) call with s->mu held. It owns no memory and
 * takes no lock. What it is not: authentication (syncer_api.c's access
 * table), the claim checks on X-Chaosloco-Step/-Steps/-Tokens
 * (syncer_rounds.c claim_check: they decide what is accepted; this module
 * decides what an accepted claim weighs), nor the rebuild's trust rules
 * (syncer_rebuild.c).
 *
 * The contract, for a learner holding a valid credential:
 *  - Weight. A contribution weighs at most what an honest learner's could:
 *    its steps are counted up to 2H (the syncer's --H) and its tokens up to
 *    those steps x the syncer's --batch, whatever the learner declared in
 *    its heartbeats (batch, steps_total) or its headers. With token
 *    weighting (w = tokens^2 / steps) no contribution weighs more than
 *    2 x an honest H-step one.
 *  - Size. Its per-step L2 norm and max-abs (norm / min(steps, 2H)) are at
 *    most `bound` (--norm-bound, default 10) x the median of the last
 *    GUARD_NORM_SAMPLES accepted contributions to that fragment from OTHER
 *    learners, once GUARD_NORM_WARMUP of those exist (a one-learner run
 *    counts its own). Before that (or while that median is 0), its total
 *    L2 norm is at most
 *    GUARD_WARMUP_REL x the fragment's own L2 norm (floored at
 *    GUARD_FRAG_FLOOR x sqrt(length), for a fragment still near zero).
 *    bound 0 turns both off. The ring survives a restart (guard_norms_json
 *    in the syncer's checkpoint sidecar).
 *  - Result. A merged Θ or outer momentum with a non-finite value, or a Θ
 *    whose L2 norm grew past GUARD_MERGE_GROWTH x max(old norm, floor), is
 *    never applied (guard_merge_result).
 * Not promised here: that a learner cannot move the model by up to the
 * bound per merge (it can; the bound makes that no worse than an honest
 * learner with a large update), nor anything about a learner that
 * impersonates others (one credential per learner is what stops that).
 */
#ifndef TRN_SYNCER_GUARD_H
#define TRN_SYNCER_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define GUARD_NORM_SAMPLES 32  /* accepted contribution norms kept per fragment */
#define GUARD_NORM_WARMUP 4    /* samples from other learners before the median bound applies */
#define GUARD_WARMUP_REL 10.0  /* before it: total L2 at most this x the fragment's L2 */
#define GUARD_FRAG_FLOOR 0.1   /* ... whose L2 counts as at least this x sqrt(length) */
#define GUARD_MERGE_GROWTH 100 /* a merge may not grow the fragment's L2 past this x (floored) */

/* The norms of the last accepted contributions to one fragment. Embedded
 * (zeroed = empty); the ring index is n % GUARD_NORM_SAMPLES. */
typedef struct guard_norms {
    int64_t learner[GUARD_NORM_SAMPLES]; /* who sent each (learner id) */
    double l2[GUARD_NORM_SAMPLES];       /* L2 norm per weighted step */
    double maxabs[GUARD_NORM_SAMPLES];   /* max |x| per weighted step */
    int64_t n;                           /* samples added so far */
} guard_norms;

/* The steps a contribution claiming `steps` weighs: clamp(steps, 0, 2H)
 * (H >= 1; H < 1 counts as 1). */
int64_t guard_weight_steps(int64_t steps, int64_t H);

/* The tokens it weighs: min(tokens, wsteps x batch), never below 0; batch
 * is the syncer's --batch. */
int64_t guard_weight_tokens(int64_t tokens, int64_t wsteps, int64_t batch);

/* Whether a contribution of `learner` may join a round of the fragment
 * whose norms are g: l2_step and maxabs_step are its norms divided by its
 * weighted steps (at least 1), l2 its total L2 norm, frag_l2 the
 * fragment's current L2 norm over frag_len floats. own_counts: 1 when the
 * learner's own samples count as "others" (a one-learner run). bound 0:
 * always 0. Returns 0 when it may, 1 when it exceeds a bound, with why
 * naming the bound, the values and the statistic. */
int guard_norm_check(const guard_norms *g, int64_t learner, int own_counts, double l2_step,
                     double maxabs_step, double l2, double frag_l2, size_t frag_len, double bound, char *why,
                     size_t len);

/* Add an accepted contribution's per-step norms to the ring. */
void guard_norm_add(guard_norms *g, int64_t learner, double l2_step, double maxabs_step);

/* The ring as JSON (new reference; NULL on allocation failure). */
json_t *guard_norms_json(const guard_norms *g);

/* Read a ring written by guard_norms_json into *g (untouched on error):
 * 0, or -1 with what was wrong in err. Values must be finite and >= 0. */
int guard_norms_parse(guard_norms *g, json_t *j, char *err, size_t errlen);

/* Whether a merge's result may be applied to a fragment of len floats:
 * old = Θ before, th = Θ after, mo = outer momentum after. 0 when it may;
 * 1 when a value is not finite or ||th|| > GUARD_MERGE_GROWTH x
 * max(||old||, GUARD_FRAG_FLOOR x sqrt(len)), with why. */
int guard_merge_result(const float *old, const float *th, const float *mo, size_t len, char *why,
                       size_t wlen);

/* L2 norm and max |x| of v[0..n) in double (a sum of squares of finite
 * floats may still be +inf in float). */
double guard_l2(const float *v, size_t n);
double guard_maxabs(const float *v, size_t n);

#endif
