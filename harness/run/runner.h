/* runner.h - the runner's core: the state every component of
 * `chaosloco run` shares (not part of any API: harness/run.h is), and the
 * helpers of run.c. The components, each with its own header saying what
 * it owns and who may call it:
 *
 *   run.c       the state machine (its diagram atop run.c), signals, the
 *               method loop, run_experiment
 *   collect.h   leases, the syncer's events and status, the agents' status
 *               and faults, stop conditions, the history (r->col)
 *   timeline.h  fire, heal checks, the syncer fault, revert (r->tl)
 *   horizon.h   the verify windows, the token minimum and the end request
 *               once they closed (r->hz)
 *   output.h    the hypotheses (steady state, verify, summary), the
 *               progress line and the run directory's outputs (r->out)
 *   setup.h     loading, the run directory, the syncer's config, the
 *               topology and the embedded dashboard: the run's
 *               description (r->setup), read by every component
 *   attach.h    attach mode's bounded wait (r->att)
 *   clock.h     the one time base (r->clk)
 *
 * One runner lives on run_experiment's stack. Each component struct is
 * written by its component only; another one asks it through a call in
 * its header. The core's own fields are written by run.c (the state, the
 * phases' times, the outcome, the records). Every function runs on the main thread,
 * except the lease thread (collect.h).
 */
#ifndef HARNESS_RUN_RUNNER_H
#define HARNESS_RUN_RUNNER_H

#include <jansson.h>
#include <signal.h>
#include <stdint.h>

#include "harness/journal.h"
#include "harness/run.h"
#include "harness/run/attach.h"
#include "harness/run/clock.h"
#include "harness/run/collect.h"
#include "harness/run/horizon.h"
#include "harness/run/output.h"
#include "harness/run/setup.h"
#include "harness/run/timeline.h"

#define TICK_MS 100           /* main loop period */
#define STATUS_EVERY_MS 500   /* syncer /v1/status poll period */
#define AGENT_EVERY_MS 1000   /* agents' /v1/status poll period */
#define LEASE_TTL_MS 10000    /* lease ttl (renewed every ttl/3) */
#define STEADY_DEFAULT_S 30.0 /* steady-state deadline when no hypothesis says by_s */
#define STOP_GRACE_MS 10000   /* SIGTERM grace per process at the end */
#define PATHLEN 1024

/* ---- the runner ---- */

typedef enum run_state {
    RS_LOADED,
    RS_LAUNCHED,
    RS_STEADY,
    RS_METHOD,
    RS_VERIFY,
    RS_REVERT,
    RS_STOPPED,
    RS_DONE,
} run_state;

struct runner {
    const run_opts *o; /* flags (borrowed) */
    run_state state;   /* see the diagram in run.c */
    setup_state setup; /* the run's description: setup.h */
    /* records (run.c) */
    journal *j;    /* journal.json / junit.xml */
    jr_events *ev; /* events.jsonl */
    int tty;       /* progress redrawn on stderr */
    /* the phases (run.c) */
    int64_t start_mono;  /* ms when the topology was ready (run start) */
    int64_t method_mono; /* ms when the method started, 0 before */
    int64_t end_mono;    /* ms when training ended / was cut */
    int64_t start_real;  /* ns realtime of the start */
    /* outcome (run.c) */
    int abort;     /* 1 stop condition / signal / halt */
    int error;     /* 1 harness or injection error */
    char why[512]; /* abort or error reason */
    /* the components */
    collect_state col; /* collect.h */
    timeline_state tl; /* timeline.h */
    rhorizon_state hz; /* horizon.h */
    output_state out;  /* output.h */
    rclock_state clk;  /* clock.h */
    attach_state att;  /* attach.h */
};

/* ---- run.c: the core ---- */

#ifndef NDEBUG
/* Assert what r->state promises (run.c's diagram); debug builds only. */
void run_assert_state(const runner *r);
#else
#define run_assert_state(r) ((void)0)
#endif

/* The first stop condition / signal / halt: r->abort and r->why (a later
 * one, or one after an error, is ignored). */
void run_set_abort(runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An abort naming the signal, once SIGINT/SIGTERM was received. */
void run_abort_if_interrupted(runner *r);
/* The first harness or injection error: r->error and r->why (exit 3). */
void run_set_error(runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A harness event into events.jsonl and the dashboard (steals obj). */
void run_emit(runner *r, json_t *obj);
/* A {"kind": "run", "event": what, "detail"?} event. */
void run_emit_run(runner *r, const char *what, const char *detail);
double run_now_s_since(int64_t mono);                   /* s from mono ms to now */
void run_nap(int64_t ms);                               /* sleep up to ms, waking early on a signal */
const char *run_jstr(const json_t *o, const char *key); /* a string member, "" when none */
void run_join_path(char *out, size_t len, const char *dir, const char *name); /* out = dir/name */
int run_http_ok(int status);                                                  /* 1 for 2xx */
/* The error text of a JSON error answer, or the transport error, into out. */
void run_answer_error(const json_t *ans, int status, const char *transport, char *out, size_t len);

#endif
