/* setup.h - the runner before the run: the experiment and its timeline,
 * the run directory, the syncer's config checked with the trainer's rules,
 * the topology (launch, or attach through attach.h) with the syncer's HTTP
 * client, and the embedded dashboard.
 *
 * Owner: setup writes the runner's core description of the run (r->e,
 * r->sched, r->seed, r->slug, r->run_dir, r->m, r->steps_target, r->batch,
 * r->t, r->sy, r->evf, r->launch_mono, r->dash) before the method starts;
 * from STEADY on these are read-only (the run.c core frees them).
 * Threads: the main thread only.
 */
#ifndef HARNESS_RUN_SETUP_H
#define HARNESS_RUN_SETUP_H

#include <jansson.h>
#include <stddef.h>

typedef struct runner runner;

/* r->run_dir: --out, else out/SLUG-STAMP; refuses one that holds a run. */
int setup_make_run_dir(runner *r, char *err, size_t errlen);
/* The syncer's config (new), checked with the trainer's rules; sets
 * r->steps_target and r->batch. NULL with err when invalid. */
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

#endif
