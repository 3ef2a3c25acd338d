/* schedule.h - an experiment turned into a concrete fault timeline.
 *
 * Resolves each method action's targets (random N / percent P drawn with
 * the run seed) into one entry per learner, and draws the chaos block's
 * faults: per unit, a seeded Poisson process (exponential inter-arrival
 * times with mean mtbf_s) between start_s and end_s, each fault lasting a
 * recovery time drawn from the recovery distribution, its type drawn by
 * weight. A unit under a fault gets its next draw only after it recovered
 * (alternating renewal process). A draw whose whole window [t, t+recovery)
 * would overlap a method fault on the same unit is skipped (skipped_busy);
 * one that would leave fewer than min_live units free of faults at any
 * instant of its window is skipped too (skipped_floor); both are counted
 * and the unit's next arrival is drawn from t.
 * method faults with a fixed at_s count towards that floor, faults timed
 * by outer step or `after` cannot be known here and are the runner's to
 * police.
 *
 * Same experiment + same seed = the same timeline on every host (harness/
 * common/rng.h: splitmix64 + xoshiro256**, one stream per unit and per action).
 * Pure: no I/O, no clocks.
 */
#ifndef HARNESS_SCHEDULE_H
#define HARNESS_SCHEDULE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/experiment.h"

#define SCHED_MAX_DRAWS 1000000 /* bound on Poisson draws per schedule */

typedef struct sched_entry {
    int action;            /* index into method[], or -1 for a chaos draw */
    char name[64];         /* action name, or "chaos-<n>" */
    const char *fault;     /* fault type (borrowed from the experiment) */
    int learner;           /* target learner id */
    exp_when_kind when;    /* EXP_AT_S for every chaos draw */
    double at_s;           /* EXP_AT_S: s after the method starts */
    int64_t at_outer_step; /* EXP_AT_OUTER_STEP: merge count */
    int after;             /* EXP_AFTER: method index it waits for */
    int64_t duration_ms;   /* ms */
    const json_t *params;  /* borrowed from the experiment */
    double toxicity;       /* 0..1 */
    int has_toxicity;      /* pass toxicity to the agent */
    uint64_t seed;         /* the fault's seed, < 2^63 (a JSON integer) */
    int64_t wait_ms;       /* method actions: how long to wait for a unit that is not running (0: skip) */
    int until_end; /* method actions: the fault lasts until the run ends (not awaited by the horizon) */
} sched_entry;

typedef struct schedule {
    sched_entry
        *entries; /* sorted: at_s entries by time, then outer-step entries by step, then `after` ones */
    int n;
    int chaos_drawn;   /* chaos faults accepted */
    int skipped_floor; /* chaos draws skipped: they would break min_live */
    int skipped_busy;  /* chaos draws skipped: they would overlap a method fault on the unit */
    uint64_t seed;     /* the run seed used */
} schedule;

/* Build the timeline of e for the run seed (e->seed unless overridden).
 * CX_ETOOBIG when the chaos block would need more than SCHED_MAX_DRAWS
 * draws; CX_ENOMEM. */
int sched_build(const experiment *e, uint64_t seed, schedule **out, char *err, size_t errlen);
void sched_free(schedule *s);
/* {"seed", "chaos_drawn", "skipped_floor", "skipped_busy", "entries": [...]} (new reference). */
json_t *sched_json(const schedule *s);
/* Learners of an action's targets for this run seed: writes up to max ids
 * into ids, returns how many (the same draw sched_build makes). */
int sched_resolve_targets(const experiment *e, int action, uint64_t seed, int *ids, int max);

#endif
