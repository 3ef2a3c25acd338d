/* collect.h - the runner's collection: what it learns of the run while it
 * runs. It owns the agents' views (one typed client per agent and what its
 * last GET /v1/status and GET /v1/faults said), the leases and their
 * renewal thread, the coordinator's events (GET /v1/events by seq, or the
 * file form's events file) and status (GET /v1/status, or derived from the
 * events), the eval-loss / no-merge / agent-unreachable stop conditions,
 * the end of training, and the history the hypotheses judge. It is not
 * the timeline (timeline.h decides and sends faults) and writes no output
 * file.
 *
 * Owner: struct collect_state (runner.h's r->col) is written here only;
 * the timeline marks a unit not running and restarts the no-merge clock
 * through collect_mark_not_running / collect_merge_clock_at_least.
 * Threads: every function runs on the main thread. The lease thread
 * (collect.c) reads r->setup.m, r->setup.t and the lease_* fields under lease_mu, and
 * feeds r->clk.ag_clock (each cx_tb_clock has its own lock).
 */
#ifndef HARNESS_RUN_COLLECT_H
#define HARNESS_RUN_COLLECT_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "common/agent_client.h"
#include "harness/history.h"

typedef struct runner runner;

typedef struct agent_view {
    agc *agent;           /* main-thread client */
    int64_t last_ok_mono; /* ms of the last answered status */
    int64_t last_poll;    /* ms of the last poll */
    char unit_state[16];  /* unit.state as last seen */
    int exit_code;        /* last_exit.code, -1 none */
    int faults_active;    /* faults_active as last seen */
    json_t *faults;       /* last GET /v1/faults list (owned) */
} agent_view;

typedef struct collect_state {
    agent_view *av;          /* [m] one per learner (collect_views_new) */
    json_t *sev;             /* syncer events, in seq order */
    int64_t last_seq;        /* highest seq fetched */
    json_t *status;          /* last syncer /v1/status, or (file form) derived from the events (owned) */
    int64_t merges;          /* last merges counter */
    double eval_loss;        /* last eval loss (NAN none) */
    int evals_above;         /* consecutive evals above stop.eval_loss_above */
    int64_t above_since_seq; /* the first of them */
    int64_t
        last_merge_mono; /* ms of the last merge event (or of the method start, or the syncer's restart) */
    int64_t last_status; /* ms of the last syncer status poll */
    int training_over;   /* 1 all learners done */
    /* lease thread */
    pthread_t lease_tid;
    int lease_running;        /* 1 from collect_take_leases to collect_release_leases */
    pthread_mutex_t lease_mu; /* guards lease_stop */
    pthread_cond_t lease_cv;  /* wakes the renewal thread early */
    int lease_stop;           /* 1: the renewal thread ends */
} collect_state;

/* An empty collection (no event, eval loss NAN); CX_ENOMEM. */
int collect_init(runner *r);
/* Frees what collect_init and collect_views_new made (the leases must be
 * released first). */
void collect_cleanup(runner *r);
/* One view and one client per agent of r->setup.t, each client feeding its
 * agent's clock (after rclock_new); CX_ENOMEM. */
int collect_views_new(runner *r);
/* Lease every agent synchronously (a refusal: run_set_error, < 0), then
 * start the renewal thread (lease_running). */
int collect_take_leases(runner *r);
/* Stop the renewal thread and release every lease (ttl 0); no-op when none. */
void collect_release_leases(runner *r);
/* The syncer's new events (since last_seq) into sev; eval-loss stop
 * conditions. Over HTTP skipped while the harness holds the syncer down;
 * the file form (r->setup.evf) reads the file always, derives status from the
 * events and fails the run (run_set_error) on a bad line. */
void collect_poll_events(runner *r);
void collect_poll_syncer_status(runner *r); /* status, merges (HTTP only: a no-op with r->setup.evf) */
/* Every agent's fault list (kept when an agent does not answer). */
void collect_fetch_faults(runner *r);
/* The history the hypotheses judge, as of now (new; NULL when out of
 * memory); with_faults: fetch the agents' fault records first. */
hyp_history *collect_history(runner *r, int with_faults);
void collect_check_training_over(runner *r); /* sets training_over */
/* One tick's polling (events, status when due, agents when due) and, in
 * STEADY/METHOD, the stop conditions and signals. */
void collect_poll_all(runner *r);
/* Agent l's unit is not running after all (the agent said so): until its
 * next status, the runner sees it "restarting". */
void collect_mark_not_running(runner *r, int l);
/* The no-merge clock counts from mono_ms at the earliest (the method's
 * start, the syncer's restart). */
void collect_merge_clock_at_least(runner *r, int64_t mono_ms);

#endif
