/* guard.h - what one learner's contribution may weigh in a merge, how
 * large it may be, and whether a merge's result may be applied (issue 28:
 * one learner's credential must not be able to destroy, replace or stall
 * the global model).
 *
 * What it is: pure functions and one embedded value (guard_norms, a
 * per-fragment ring of accepted contribution norms) that the syncer's
 * rounds (rounds.c) call with s->mu held. It owns no memory and
 * takes no lock. What it is not: authentication (api.c's access
 * table), the claim checks on X-Chaosloco-Step/-Steps/-Tokens
 * (rounds.c claim_check: they decide what is accepted; this module
 * decides what an accepted claim weighs), nor the rebuild's trust rules
 * (rebuild.c).
 *
 * The contract, for a learner holding a valid credential:
 *  - Weight. A contribution weighs at most what an honest learner's could:
 *    its steps are counted up to 2H (the syncer's --H) and its tokens up to
 *    those steps x the syncer's --batch, whatever the learner declared in
 *    its heartbeats (batch, steps_total) or its headers. With token
 *    weighting (w = tokens^2 / steps) no contribution weighs more than
 *    2 x an honest H-step one.
 *  - Size. A contribution is never refused for its size: one whose L2
 *    norm exceeds its limit is scaled down to the limit before it joins a
 *    round (clipped; accepted with 202, so the learner does not retry).
 *    The limit is `bound` (--norm-bound, default 10) x m x e, where
 *    e = guard_norm_steps(steps, H) = clamp(steps, H, GUARD_NORM_STEPS_H x H)
 *    is the number of steps the contribution may be as large as, and m the
 *    median of the last GUARD_NORM_SAMPLES accepted contributions' norms
 *    per such step (their clipped L2 / their e) to that fragment from OTHER
 *    learners, once GUARD_NORM_WARMUP of those exist (a one-learner run
 *    counts its own). Linear in e: an honest delta's norm grows at most
 *    linearly with its steps (sqrt(steps) for a random walk), so a learner
 *    back from a partition or a restart with many steps' progress is not
 *    clipped unless it covers more than GUARD_NORM_STEPS_H periods, and
 *    then only by about (steps / (GUARD_NORM_STEPS_H x H)) or its square
 *    root. e is at least H: a short contribution may be as large as an
 *    H-step one. Before the median exists (or while it is 0) the limit is
 *    GUARD_WARMUP_REL x the fragment's own L2 norm (floored at
 *    GUARD_WARMUP_FLOOR x sqrt(length), for a fragment still near zero):
 *    tight, because nothing honest is known yet and a clipped contribution
 *    is merged; the ring keeps clipped norms, so the limit that follows
 *    (10 x their median) lets honest ones through again.
 *    bound 0 turns both off. The ring survives a restart (guard_norms_json
 *    in the syncer's checkpoint sidecar).
 *  - Result. A merged Θ or outer momentum with a non-finite value, or a Θ
 *    whose L2 norm grew past GUARD_MERGE_GROWTH x max(old norm, floor), is
 *    never applied (guard_merge_result).
 *  - ddp gradients (ddp.c). Each weighs 1 / (learners in the step)
 *    by construction; its learners clip their gradient to --grad-clip
 *    (1 on the GPT, 20 on the MLP) before sending, so one above
 *    GUARD_GRAD_SLACK x the clip is scaled down to it (never refused).
 * Not promised here: that a learner cannot move the model by up to the
 * limit per contribution (it can: bound x GUARD_NORM_STEPS_H x an honest
 * H-step contribution's norm, or GUARD_WARMUP_REL x the fragment's norm
 * in the warm-up), that a contribution concentrated on a few values is
 * bounded other than by its L2 norm, nor anything about a learner that
 * impersonates others (one credential per learner is what stops that).
 */
#ifndef TRN_SYNCER_GUARD_H
#define TRN_SYNCER_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define GUARD_NORM_SAMPLES 32   /* accepted contribution norms kept per fragment */
#define GUARD_NORM_WARMUP 4     /* samples from other learners before the median bound applies */
#define GUARD_NORM_STEPS_H 4    /* the limit grows with a contribution's steps up to this many periods */
#define GUARD_WARMUP_REL 0.1    /* before it: total L2 at most this x the fragment's L2 ... */
#define GUARD_WARMUP_FLOOR 0.01 /* ... whose L2 counts as at least this x sqrt(length) there */
#define GUARD_FRAG_FLOOR 0.1    /* ... whose L2 counts as at least this x sqrt(length) */
#define GUARD_MERGE_GROWTH 100  /* a merge may not grow the fragment's L2 past this x (floored) */
#define GUARD_GRAD_SLACK 1.001  /* ddp: a gradient's L2 may exceed --grad-clip by float rounding */

/* The norms of the last accepted contributions to one fragment. Embedded
 * (zeroed = empty); the ring index is n % GUARD_NORM_SAMPLES. */
typedef struct guard_norms {
    int64_t learner[GUARD_NORM_SAMPLES]; /* who sent each (learner id) */
    double l2[GUARD_NORM_SAMPLES];       /* L2 norm (after clipping) per guard_norm_steps step */
    int64_t n;                           /* samples added so far */
} guard_norms;

/* The steps a contribution claiming `steps` weighs: clamp(steps, 0, 2H)
 * (H >= 1; H < 1 counts as 1). */
int64_t guard_weight_steps(int64_t steps, int64_t H);

/* The tokens it weighs: min(tokens, wsteps x batch), never below 0; batch
 * is the syncer's --batch. */
int64_t guard_weight_tokens(int64_t tokens, int64_t wsteps, int64_t batch);

/* The steps a contribution claiming `steps` may be as large as:
 * clamp(steps, H, GUARD_NORM_STEPS_H x H) (H < 1 counts as 1). */
int64_t guard_norm_steps(int64_t steps, int64_t H);

/* The L2 norm a contribution of `learner` to the fragment whose norms are
 * g may have: bound x the others' median per step x nsteps (from
 * guard_norm_steps), or in the warm-up GUARD_WARMUP_REL x
 * max(frag_l2, floor) where frag_l2 is the fragment's current L2 norm over
 * frag_len floats. own_counts: 1 when the learner's own samples count as
 * "others" (a one-learner run). bound <= 0: INFINITY (no limit). why gets
 * how the limit was made (the statistic and its sample count). */
double guard_norm_limit(const guard_norms *g, int64_t learner, int own_counts, int64_t nsteps, double frag_l2,
                        size_t frag_len, double bound, char *why, size_t len);

/* The factor that brings a contribution of L2 norm l2 within limit:
 * 1 when l2 <= limit, else limit / l2 (in (0, 1)); 0 when l2 is not
 * finite (the caller refuses such a contribution before; this never
 * lets one through scaled). */
double guard_clip_factor(double l2, double limit);

/* Add an accepted contribution's L2 norm per guard_norm_steps step (after
 * clipping) to the ring. */
void guard_norm_add(guard_norms *g, int64_t learner, double l2_step);

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

/* L2 norm of v[0..n) in double (a sum of squares of finite floats may
 * still be +inf in float). */
double guard_l2(const float *v, size_t n);

#endif
