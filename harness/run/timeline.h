/* timeline.h - the runner's timeline: each schedule entry fired when due
 * (at_s, at_outer_step, after), the live floor for chaos draws, the heal
 * checks, the harness's own syncer fault, and the revert at the end
 * (every active fault deleted, the rollbacks, halt on abort, the leases
 * released). It decides what to send and when; what it learns of the
 * agents comes from the collection (collect.h), and it never judges.
 *
 * Owner: struct timeline_state (runner.h's r->tl) is written here only.
 * The rollbacks' targets are resolved once, at timeline_init, by the
 * experiment module (exp_rollback_targets).
 * Threads: the main thread only.
 */
#ifndef HARNESS_RUN_TIMELINE_H
#define HARNESS_RUN_TIMELINE_H

#include <jansson.h>
#include <stdint.h>

#include "common/agent_client.h"
#include "harness/experiment.h"
#include "harness/schedule.h"

typedef struct runner runner;

typedef struct fired {
    int fired;           /* 1 once sent (or skipped / failed) */
    int ok;              /* the agent accepted it */
    int skipped;         /* a chaos draw not sent (floor / unit not running) */
    int healed;          /* its fault ended (or it never started) */
    char fault_id[64];   /* the agent's id ("" none) */
    int64_t start_mono;  /* ms when sent */
    int64_t last_check;  /* ms of the last heal check */
    int64_t healed_mono; /* ms its fault was seen healed (0: never, or it never ran) */
    int64_t wait_since;  /* ms a method action first found its unit not running (0 none) */
} fired;

/* One rollback's learners, resolved once (exp_rollback_targets). */
typedef struct rollback_plan {
    int ids[EXP_MAX_LEARNERS]; /* learner ids */
    int n;                     /* of them */
} rollback_plan;

typedef struct timeline_state {
    fired *fx;            /* [sched->n] what became of each entry */
    json_t *acts;         /* the action events (invoke/ok/fail/skip), in order */
    rollback_plan *rb;    /* [e->nrollbacks] */
    int syncer_down;      /* the harness killed the syncer and will restart it */
    int64_t syncer_up_at; /* ms when to restart it */
    int syncer_entry;     /* sched entry that did it */
} timeline_state;

/* What an agent's refusal of a fault means for the run. */
typedef enum timeline_refusal {
    TL_REFUSAL_ERROR, /* an injection error: the run fails (exit 3) */
    TL_REFUSAL_ABORT, /* the agent is halted: the run aborts (exit 2) */
    TL_REFUSAL_WAIT,  /* the unit was not running after all: the action waits for it (if_not_running) */
} timeline_refusal;

/* The refusal's meaning, from the agent's reason (agc_reply.reason);
 * method_action: the entry is a method action (not a chaos draw). */
timeline_refusal timeline_on_refusal(int method_action, agc_reason why);

/* One record per schedule entry, the action list, the rollbacks' targets
 * (r->setup.e, r->setup.sched and r->setup.m set); CX_ENOMEM. */
int timeline_init(runner *r);
void timeline_cleanup(runner *r);
/* An action event (journal.h jr_action_event) into acts and events.jsonl. */
void timeline_action_event(runner *r, const char *phase, const sched_entry *se, int learner, const char *fid,
                           const char *error);
/* Restart the syncer the harness killed once its down time has passed. */
void timeline_maybe_restart_syncer(runner *r);
/* Fire every entry that is due (METHOD only), check heals, restart the syncer. */
void timeline_play(runner *r);
/* The method ended: a method action that never came due is a failed
 * injection (run_set_error) unless the run already stopped; a syncer the
 * harness holds down is restarted now. */
void timeline_end_method(runner *r);
int timeline_pending(runner *r); /* entries not fired, or fired and not healed (until_end: not fired) */
int timeline_active(runner *r);  /* entries sent and not healed */
/* REVERT: delete every active fault, run the rollbacks, halt the agents
 * when aborted, warn of what is still active, release the leases. */
void timeline_revert(runner *r);

#endif
