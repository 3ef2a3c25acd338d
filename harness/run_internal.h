/* run_internal.h - the runner's private state, shared by the files of
 * chaosloco run (not part of any API: run.h is).
 *
 *   run.c          lifecycle: the state machine, signals, the method loop,
 *                  the horizon, run_experiment
 *   run_poll.c     leases, the syncer's events and status, the agents'
 *                  status and faults, stop conditions, progress
 *   run_actions.c  the timeline: fire, heal checks, the syncer fault, revert
 *   run_output.c   the hypotheses (steady state, verify, summary) and the
 *                  run directory's outputs (events, faults, verdicts)
 *   run_setup.c    loading, the run directory, the syncer's config, the
 *                  topology and the embedded dashboard
 *   run_attach.c   attach mode's bounded wait for the processes it attaches to
 *   run_clock.c    the one time base: each remote process's clock, and
 *                  its times mapped onto the harness's before any verdict
 *
 * One runner lives on run_experiment's stack; every function here takes it
 * and runs on the main thread, except lease_thread (run_poll.c), which
 * reads only r->m, r->t and the lease_* fields under lease_mu, and feeds
 * r->ag_clock (each cx_tb_clock has its own lock).
 */
#ifndef HARNESS_RUN_INTERNAL_H
#define HARNESS_RUN_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include "common/agent_client.h"
#include "common/http_client.h"
#include "common/timebase.h"
#include "dashboards/server.h"
#include "harness/events_file.h"
#include "harness/experiment.h"
#include "harness/horizon.h"
#include "harness/hypothesis.h"
#include "harness/journal.h"
#include "harness/run.h"
#include "harness/schedule.h"
#include "harness/topology.h"

#define TICK_MS 100           /* main loop period */
#define STATUS_EVERY_MS 500   /* syncer /v1/status poll period */
#define AGENT_EVERY_MS 1000   /* agents' /v1/status poll period */
#define LEASE_TTL_MS 10000    /* lease ttl (renewed every ttl/3) */
#define STEADY_DEFAULT_S 30.0 /* steady-state deadline when no hypothesis says by_s */
#define STOP_GRACE_MS 10000   /* SIGTERM grace per process at the end */
#define PATHLEN 1024

/* The harness's own fault: SIGKILL (or TERM) the syncer, start it again. */
#define RUN_SYNCER_FAULT EXP_SYNCER_RESTART

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

typedef struct agent_view {
    agc *agent;           /* main-thread client */
    int64_t last_ok_mono; /* ms of the last answered status */
    int64_t last_poll;    /* ms of the last poll */
    char unit_state[16];  /* unit.state as last seen */
    int exit_code;        /* last_exit.code, -1 none */
    int faults_active;    /* faults_active as last seen */
    json_t *faults;       /* last GET /v1/faults list (owned) */
} agent_view;

typedef struct runner {
    const run_opts *o; /* flags (borrowed) */
    run_state state;   /* see the diagram in run.c */
    experiment *e;     /* the loaded experiment (ci variant applied) */
    schedule *sched;   /* its resolved timeline */
    fired *fx;         /* one per sched entry */
    uint64_t seed;     /* run seed */
    char run_dir[512]; /* the run directory */
    char slug[96];
    topo *t;              /* launched or attached processes */
    journal *j;           /* journal.json / junit.xml */
    jr_events *ev;        /* events.jsonl */
    dash_server *dash;    /* embedded dashboard or NULL */
    json_t *dash_hyps;    /* the dashboard's hypotheses table (array) */
    agent_view *av;       /* one per learner */
    cx_http_client *sy;   /* syncer client (main thread) */
    evf *evf;             /* the coordinator's events file (file form), NULL = HTTP telemetry */
    int m;                /* learners */
    int64_t steps_target; /* inner steps per learner (effective config) */
    int64_t batch;        /* sequences (= tokens) per inner step (effective config) */
    /* collected */
    json_t *sev;             /* syncer events, in seq order */
    int64_t last_seq;        /* highest seq fetched */
    json_t *acts;            /* harness action events */
    json_t *status;          /* last syncer /v1/status, or (file form) derived from the events (owned) */
    int64_t merges;          /* last merges counter */
    double eval_loss;        /* last eval loss (NAN none) */
    int evals_above;         /* consecutive evals above stop.eval_loss_above */
    int64_t above_since_seq; /* the first of them */
    int64_t last_merge_mono; /* ms of the last merge event (or of the method start) */
    int64_t start_mono;      /* ms when the topology was ready (run start) */
    int64_t method_mono;     /* ms when the method started, 0 before */
    int64_t end_mono;        /* ms when training ended / was cut */
    int64_t start_real;      /* ns realtime of the start */
    int64_t launch_mono;     /* ms just before the topology started (the file form's events are not older) */
    int64_t last_status;     /* ms of the last syncer status poll */
    int64_t last_progress;   /* ms of the last progress output */
    int tty;                 /* progress redrawn on stderr */
    /* the one time base (run_clock.c) */
    cx_tb_clock *sy_clock;  /* the syncer's / coordinator's clock (HTTP answers) */
    cx_tb_clock **ag_clock; /* [m] each agent's clock */
    /* syncer fault */
    int syncer_down;      /* the harness killed the syncer and will restart it */
    int64_t syncer_up_at; /* ms when to restart it */
    int syncer_entry;     /* sched entry that did it */
    /* lease thread */
    pthread_t lease_tid;
    int lease_running;
    pthread_mutex_t lease_mu;
    pthread_cond_t lease_cv;
    int lease_stop;
    /* outcome */
    int abort;         /* 1 stop condition / signal / halt */
    int error;         /* 1 harness or injection error */
    char why[512];     /* abort or error reason */
    int steady_ok;     /* 1 steady state held (or none) */
    int training_over; /* 1 all learners done */
    /* horizon (horizon.h) */
    hz_window *hw;      /* [nverify] windows of the verify hypotheses */
    int *hw_spec;       /* [nverify] the verify index of hw[i] */
    int nhw;            /* windows */
    int64_t hz_steps[EXP_MAX_LEARNERS]; /* the step each learner reported last (syncer status) */
    int64_t min_tokens; /* tokens the run trains at least */
    int end_sent;       /* 1 once POST /v1/end was sent / the end file written (the horizon was reached) */
    int end_refused;    /* 1: the syncer refused POST /v1/end (401/403); not asked again */
    /* attach mode */
    int64_t attach_until_mono; /* ms: the wait for the attached processes ends */
} runner;

/* ---- run.c ---- */

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
/* What horizon.h decides on, from what the runner saw; heal holds r->m. */
void run_hz_fill(runner *r, int64_t *heal, hz_progress *p);

/* ---- run_poll.c ---- */

/* Lease every agent synchronously (a refusal: run_set_error, < 0), then
 * start the renewal thread (r->lease_running). */
int run_take_leases(runner *r);
/* Stop the renewal thread and release every lease (ttl 0); no-op when none. */
void run_release_leases(runner *r);
/* The syncer's new events (since r->last_seq) into r->sev; eval-loss stop
 * conditions. Over HTTP skipped while the harness holds the syncer down;
 * the file form (r->evf) reads the file always, derives r->status from the
 * events and fails the run (run_set_error) on a bad line. */
void run_poll_events(runner *r);
void run_poll_syncer_status(runner *r); /* r->status, r->merges (HTTP only: a no-op with r->evf) */
/* Every agent's fault list (kept when an agent does not answer). */
void run_fetch_faults(runner *r);
/* The history the hypotheses judge, as of now (new; NULL when out of
 * memory); with_faults: fetch the agents' fault records first. */
hyp_history *run_build_history(runner *r, int with_faults);
void run_check_training_over(runner *r); /* sets r->training_over */
/* One tick's polling (events, status when due, agents when due) and, in
 * STEADY/METHOD, the stop conditions and signals. */
void run_poll_all(runner *r);
/* The progress line (TTY) or log (every 10 s), and the dashboard's. */
void run_progress(runner *r, const char *phase, double left_s);
void run_progress_end(runner *r); /* clear the TTY progress line before a log line */

/* ---- run_actions.c ---- */

/* An action event (journal.h jr_action_event) into r->acts and events.jsonl. */
void run_action_event(runner *r, const char *phase, const sched_entry *se, int learner, const char *fid,
                      const char *error);
/* Restart the syncer the harness killed once its down time has passed. */
void run_maybe_restart_syncer(runner *r);
/* Fire every entry that is due (METHOD only), check heals, restart the syncer. */
void run_play_timeline(runner *r);
int run_pending_entries(runner *r); /* entries not fired, or fired and not healed (until_end: not fired) */
int run_active_faults(runner *r);   /* entries sent and not healed */
/* REVERT: delete every active fault, run the rollbacks, halt the agents
 * when aborted, warn of what is still active, release the leases. */
void run_revert(runner *r);

/* ---- run_output.c ---- */

void run_dash_pending(runner *r); /* every hypothesis "pending" on the dashboard */
/* Judge the steady state (re-evaluated every second until all pass or the
 * deadline); r->steady_ok; journal and dashboard entries. */
void run_steady_state(runner *r, double limit_s);
/* Judge the verify list on the final history (a window the run did not see
 * close: an error); journal and dashboard entries. */
void run_verify(runner *r);
/* summary.json's figures (new; NULL when out of memory). */
json_t *run_summary_json(runner *r);
/* events.jsonl: every training event and final fault record; faults.json. */
void run_append_collected(runner *r);
void run_journal_endpoints(runner *r);                     /* the journal's syncer and agent URLs */
void run_print_verdicts(runner *r, const run_result *res); /* the verdicts on stdout */
void run_write_outputs(runner *r, run_result *res);

/* ---- run_clock.c ---- */

/* One clock per remote process (r->sy_clock, r->ag_clock[m]), before the
 * clients that feed them; CX_ENOMEM. */
int run_clocks_new(runner *r);
void run_clocks_free(runner *r); /* after the clients */
/* At the start: a few GET /v1/status per process; one whose answers carry
 * no clock stamp (or that never answered) is the run's error, naming it
 * (run_set_error, < 0). Logs each offset. */
int run_clocks_check(runner *r);
/* A coordinator event on the harness's clock (new; t_mono_ms mapped,
 * t_err_ms its bound, t_src_mono_ms the coordinator's own): a copy as it
 * is in the file form. When the clock has no sample, t_mono_ms is moved to
 * t_src_mono_ms and "unmapped_clock" set (the history skips it). NULL only
 * when out of memory. */
json_t *run_map_event(runner *r, const json_t *ev);
/* Agent l's fault record on the harness's clock (new; started_mono_ms and
 * ended_mono_ms mapped, mono_err_ms their bound, src_started_mono_ms /
 * src_ended_mono_ms the agent's own; unmapped as above). NULL when out of
 * memory. */
json_t *run_map_fault(runner *r, int l, const json_t *rec);
/* A coordinator time (ms) on the harness's clock (unmapped without a sample). */
int64_t run_map_syncer_ms(runner *r, int64_t t);
/* An event stamped after the harness read it (read_ms, the harness's
 * clock), or in the file form before the coordinator's launch: the run's
 * error (run_set_error, < 0). */
int run_check_event_time(runner *r, const json_t *ev, int64_t read_ms);
/* Each process's clock, offset and bound (new array): journal and summary. */
json_t *run_clocks_json(runner *r);

/* ---- run_setup.c ---- */

/* r->run_dir: --out, else out/SLUG-STAMP; refuses one that holds a run. */
int run_make_run_dir(runner *r, char *err, size_t errlen);
/* The syncer's config (new), checked with the trainer's rules; sets
 * r->steps_target and r->batch. NULL with err when invalid. */
json_t *run_syncer_config(runner *r, char *err, size_t errlen);
/* The experiment (its errors printed with their paths), the seed, the
 * timeline, the slug. < 0 with err when invalid. */
int run_load(runner *r, char *err, size_t errlen);
void run_dry_run(runner *r); /* print the timeline */
/* Launch (or attach to) the syncer and agents; the HTTP clients. In
 * attach mode it returns once all of them answer (run_attach_wait). */
int run_start_topology(runner *r, char *err, size_t errlen);
void run_start_dashboard(runner *r); /* the embedded dashboard, when asked for (a failure only warns) */

/* ---- run_attach.c ---- */

/* Attach mode: wait (bounded by topology.attach.wait_s or --attach-wait)
 * for the token and credential files, then topo_attach (r->t); sets
 * r->attach_until_mono. < 0 with err naming what is missing. */
int run_attach_topology(runner *r, char *err, size_t errlen);
/* Wait, until r->attach_until_mono, for the syncer and every agent to
 * answer GET /v1/status, logging whom it still waits for; < 0 with err
 * naming each that never answered, or at once on a 401/403. */
int run_attach_wait(runner *r, char *err, size_t errlen);

#endif
