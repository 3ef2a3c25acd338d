/* setup.h - the runner before the run: the experiment and its timeline,
 * the run directory, the syncer's config checked with the trainer's rules,
 * the topology (launch, or attach through attach.h) with the syncer's HTTP
 * client, and the embedded dashboard.
 *
 * Owner: struct setup_state (runner.h's r->setup: the run's description)
 * is written here only, before the method starts (attach.h hands it the
 * attached topology); every other component reads it. Its end is here too:
 * the dashboard stopped, the topology freed, the rest at the runner's
 * cleanup (run.c calls them; it never frees a field itself).
 * Threads: the main thread only.
 */
#ifndef HARNESS_RUN_SETUP_H
#define HARNESS_RUN_SETUP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/http_client.h"
#include "dashboards/server.h"
#include "harness/events_file.h"
#include "harness/experiment.h"
#include "harness/schedule.h"
#include "harness/topology.h"

typedef struct runner runner;

typedef struct setup_state {
    experiment *e;        /* the loaded experiment (ci variant applied) */
    schedule *sched;      /* its resolved timeline */
    uint64_t seed;        /* run seed */
    char run_dir[512];    /* the run directory */
    char slug[96];        /* the run directory's name stem */
    topo *t;              /* launched or attached processes */
    dash_server *dash;    /* embedded dashboard or NULL */
    cx_http_client *sy;   /* syncer client (main thread) */
    evf *evf;             /* the coordinator's events file (file form), NULL = HTTP telemetry */
    int m;                /* learners */
    int64_t steps_target; /* inner steps per learner (effective config) */
    int64_t batch;        /* sequences (= tokens) per inner step (effective config) */
    int64_t launch_mono;  /* ms just before the topology started (the file form's events are not older) */
} setup_state;

/* r->setup.run_dir: --out, else out/SLUG-STAMP; refuses one that holds a run. */
int setup_make_run_dir(runner *r, char *err, size_t errlen);
/* The syncer's config (new), checked with the trainer's rules; sets
 * r->setup.steps_target and r->setup.batch. NULL with err when invalid. */
json_t *setup_syncer_config(runner *r, char *err, size_t errlen);
/* The experiment (its errors printed with their paths), the seed, the
 * timeline, the slug. < 0 with err when invalid. */
int setup_load(runner *r, char *err, size_t errlen);
void setup_dry_run(runner *r); /* print the timeline */
/* Launch (or attach to) the syncer and agents; the clocks, the syncer's
 * client and the agents' views (collect_views_new). In attach mode it
 * returns once all of them answer (attach_wait). */
int setup_start_topology(runner *r, char *err, size_t errlen);
void setup_start_dashboard(runner *r); /* the embedded dashboard, when asked for (a failure only warns) */
void setup_stop_dashboard(runner *r);  /* before its sources go away; a no-op when none */
void setup_drop_topology(runner *r);   /* free the topology's handles (topo_free; after topo_stop) */
/* Everything the setup made: the dashboard, the topology, the syncer's
 * client, the events file, the timeline, the experiment (m and the
 * figures stay: the clocks' cleanup reads m). */
void setup_cleanup(runner *r);

#endif
