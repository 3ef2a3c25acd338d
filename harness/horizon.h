/* horizon.h - when a harness run has trained long enough to be judged.
 *
 * The harness owns the training horizon: learners get a large --steps
 * budget and the runner ends the run (POST /v1/end on the syncer) once
 *   - every timeline entry (method action, chaos draw) fired and healed
 *     (an until_end action only fired: it lasts until the run ends),
 *   - every verify hypothesis's window has closed (each hypothesis's table
 *     entry says, hypothesis.h window(): loss_continuity's recover_s and
 *     reintegration's join_s + merged_s after the heal of the fault on its
 *     learner, loss_target's by_s after the start, and its by_tokens once
 *     an eval has seen that many merged tokens), and
 *   - every learner trained its own shard when a hypothesis asks for it
 *     (data_accounting: each learner's step >= the target - slack_steps;
 *     a total alone would let fast learners stand in for a slow one), and
 *   - the learners trained at least min_tokens in total and the syncer
 *     merged at least min_merges times (outer steps: a run whose links are
 *     capped in bytes/s must not end before its merges happened, however
 *     fast the CPU trains its tokens),
 * so no verdict races a fixed amount of work against a wall-clock window.
 * A run that ended otherwise (time bound, stop condition, budget spent)
 * may have ended before a window closed: horizon_unobserved() says so, and
 * the runner reports that hypothesis as an error, never a pass or a fail.
 *
 * Pure: no I/O, no clock; every time is CLOCK_MONOTONIC ms given by the
 * caller. Windows borrow the spec's label (keep the spec alive).
 */
#ifndef HARNESS_HORIZON_H
#define HARNESS_HORIZON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hz_window {
    const char *label; /* the hypothesis's label (borrowed) */
    const char
        *key; /* the param whose window closes last: "merged_s", "recover_s", "by_s", "by_tokens" (static) */
    int learner;    /* the learner whose heal opens it; -1: the last heal of any fault */
    int from_start; /* 1: opens at the run's start (loss_target by_s) */
    int64_t len_ms; /* ms from the anchor to the close */
    int64_t tokens; /* > 0: closes once an eval saw this many merged tokens (loss_target by_tokens) */
    int shard;      /* 1: closes once every learner's step >= its steps target - slack (data_accounting) */
    int64_t steps;  /* shard: the steps target (0: the run's, hz_progress.steps_target) */
    int64_t slack;  /* shard: steps it may fall short */
} hz_window;

/* The window of one verify entry ({"hypothesis": NAME, ...params}) with
 * label. Returns 1 and *w, or 0 when the hypothesis has no window. */
int horizon_window(const json_t *spec, const char *label, hz_window *w);

typedef struct hz_progress {
    int64_t start_ms;       /* mono ms the run (its method) started */
    int64_t now_ms;         /* mono ms now (or when the run ended) */
    int pending;            /* timeline entries not fired, or fired and not healed (until_end: not fired) */
    int entries;            /* timeline entries in all (for the progress fraction; 0: none) */
    const int64_t *heal_ms; /* [m] mono ms of the last heal of a fault on learner i (0 none) */
    int m;                  /* learners */
    int64_t any_heal_ms;    /* mono ms of the last heal of any fault (0 none) */
    int64_t tokens;         /* tokens trained by all learners so far */
    int64_t min_tokens;     /* tokens the run must train (0: no minimum) */
    int64_t merges;         /* merges (outer steps) the syncer made so far */
    int64_t min_merges;     /* merges the run must see (0: no minimum) */
    int64_t eval_tokens;    /* merged tokens the syncer's last eval covered */
    const int64_t *steps;   /* [m] the step each learner reported last (NULL: none known yet) */
    int64_t steps_target;   /* inner steps each learner must train (0: unknown, e.g. a foreign trainer) */
} hz_progress;

/* Mono ms at which w closes; -1 while it cannot be known (a fault is still
 * pending and may yet open it, a by_tokens window whose tokens no eval
 * has seen yet, a shard window some learner is short of); 0 when it never
 * opened (nothing healed on its learner: nothing to observe) or, for
 * by_tokens and shard, when it has closed. */
int64_t horizon_close_ms(const hz_window *w, const hz_progress *p);

/* 1: the run may end now. 0: keep training; why (may be NULL) names what
 * it waits for. */
int horizon_done(const hz_window *w, int n, const hz_progress *p, char *why, size_t len);

/* The run ended at p->now_ms. 1 when w had not closed by then, with msg
 * ("run ended before learner 1's merged_s window closed (closes at
 * t=52.3 s, ended at t=20.1 s)", times from p->start_ms); else 0. */
int horizon_unobserved(const hz_window *w, const hz_progress *p, char *msg, size_t len);

/* How far the run is from its end, for the progress line: the end is
 * when the last of the conditions horizon_done() checks holds, so the
 * fraction is the least-advanced condition's share done and the time left
 * is the latest condition's estimate: a window's close is known once it
 * opened; tokens, merges and a by_tokens window are extrapolated at the
 * rate seen so far; a timeline entry still pending (a fault not fired or
 * not healed, which may open windows) has no estimate, so the time left is
 * then a lower bound. */
typedef struct hz_estimate {
    double fraction;   /* 0..1: the share done of the least-advanced condition */
    int64_t left_ms;   /* estimated ms to the end; -1 when nothing can be estimated yet */
    int lower_bound;   /* 1: some condition has no estimate: the end is at least left_ms away */
    char waiting[160]; /* what the end waits for longest ("" when done) */
} hz_estimate;

void horizon_estimate(const hz_window *w, int n, const hz_progress *p, hz_estimate *e);

/* The --steps budget the harness gives each learner for an experiment of
 * `steps` steps per learner: HORIZON_BUDGET_X times as many (the runner, not
 * the budget, ends the run), capped at what a learner accepts
 * (CONFIG_STEPS_MAX), so a file's large step count is never turned into a
 * flag every learner refuses. */
#define HORIZON_BUDGET_X 100
long long horizon_learner_budget(int64_t steps);

#endif
