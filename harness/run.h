/* run.h - the experiment runner: `chaosloco run` without the flag parsing.
 *
 * Loads an experiment (or the built-in default), launches or attaches to
 * the topology (topology.h), holds a lease on every agent, checks the
 * steady state, plays the method and the chaos timeline (schedule.h) as
 * POST /v1/faults calls, watches the stop conditions, waits for training to
 * end, judges the verify hypotheses (hypothesis.h) on what it collected,
 * reverts every fault, stops every process it started and writes the run
 * directory (journal.h outputs, report.html, summary.json).
 *
 * What it is not: a fault injector (the agents are) or a judge (the
 * hypotheses are); it only schedules, collects and records.
 *
 * Signals: run_install_signals() makes SIGINT/SIGTERM request an orderly
 * abort (revert, stop, journal "interrupted", exit 2); a second signal is
 * ignored so the cleanup always finishes.
 */
#ifndef HARNESS_RUN_H
#define HARNESS_RUN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/exitcode.h"

typedef struct run_opts {
    const char *experiment; /* path, or NULL: the built-in default */
    const char *out_dir;    /* run directory, or NULL: <out_root>/<slug>-<UTC time> */
    const char *out_root;   /* parent of generated run dirs; NULL = "out" */
    int has_seed;           /* seed overrides the file's */
    uint64_t seed;          /* run seed */
    const char *junit;      /* junit path, or NULL: RUN/junit.xml */
    const char *mode;       /* training mode override, or NULL */
    const char *dashboard;  /* dashboard listen HOST:PORT, or NULL (default run: 127.0.0.1:0) */
    int ci;                 /* use the "ci" variant */
    int dry_run;            /* validate and print the timeline only */
    int check;              /* validate only (chaosloco run --check): load, build the timeline, no output */
    int keep;               /* keep processes (and dashboard) up after the run until a signal */
    double time_limit_s;    /* s bound on the training phase; 0 = 600 (300 with ci) */
    int progress;           /* -1 auto (stderr is a TTY), 0 log lines, 1 redrawn line */
    int quiet_summary;      /* 1: do not print the verdict table on stdout */
    /* attach mode: the credential file the harness presents to the syncer
     * (overrides topology.attach.syncer_credential_file), or NULL */
    const char *syncer_credential_file;
    /* attach mode: s to wait for the syncer and every agent to answer
     * (overrides topology.attach.wait_s); 0 = the file's */
    double attach_wait_s;
} run_opts;

typedef struct run_result {
    int exit_code;      /* enum cx_exit: OK, DEVIATED, ABORTED, ERROR or USAGE */
    char status[16];    /* journal status: completed|failed|aborted|interrupted ("" before a journal) */
    char run_dir[1024]; /* where the outputs are ("" for a dry run) */
    json_t *summary;    /* figures for compare (owned; NULL when the run did not train) */
} run_result;

void run_install_signals(void);
/* 1 once SIGINT/SIGTERM was received. */
int run_interrupted(void);

/* Run one experiment. Always fills res (exit_code included) and returns 0,
 * except on a usage-level problem (bad experiment file, bad override)
 * where res->exit_code is CX_EXIT_USAGE and the message is in err. */
int run_experiment(const run_opts *o, run_result *res, char *err, size_t errlen);
void run_result_cleanup(run_result *res);

/* The built-in default experiment (JSON text, static). Also shipped as
 * experiments/kill-one-reintegrate.json. */
const char *run_default_experiment(void);

#endif
