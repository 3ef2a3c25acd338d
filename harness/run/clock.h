/* clock.h - the runner's one time base (docs/internals/timebase.md): one
 * cx_tb_clock per remote process, fed by every HTTP answer, and every
 * remote time mapped onto the harness's CLOCK_MONOTONIC, with its bound,
 * before the hypotheses see it. Not a clock of its own: common/timebase.h
 * estimates, this applies.
 *
 * Owner: struct rclock_state (runner.h's r->clk) is written here only
 * (rclock_new / rclock_free); the clients of the collection, the setup and
 * the lease thread feed the clocks through cx_tb_observe.
 * Threads: the main thread; the clocks themselves are fed from the lease
 * thread too (each cx_tb_clock has its own lock).
 */
#ifndef HARNESS_RUN_CLOCK_H
#define HARNESS_RUN_CLOCK_H

#include <jansson.h>
#include <stdint.h>

#include "common/timebase.h"

typedef struct runner runner;

typedef struct rclock_state {
    cx_tb_clock *sy_clock;  /* the syncer's / coordinator's clock (HTTP answers) */
    cx_tb_clock **ag_clock; /* [m] each agent's clock */
} rclock_state;

/* One clock per remote process, before the clients that feed them;
 * CX_ENOMEM. */
int rclock_new(runner *r);
void rclock_free(runner *r); /* after the clients */
/* At the start: a few GET /v1/status per process; one whose answers carry
 * no clock stamp (or that never answered) is the run's error, naming it
 * (run_set_error, < 0). Logs each offset. */
int rclock_check(runner *r);
/* A coordinator event on the harness's clock (new; t_mono_ms mapped,
 * t_err_ms its bound, t_src_mono_ms the coordinator's own): a copy as it
 * is in the file form. When the clock has no sample, t_mono_ms is moved to
 * t_src_mono_ms and "unmapped_clock" set (the history skips it). NULL only
 * when out of memory. */
json_t *rclock_map_event(runner *r, const json_t *ev);
/* Agent l's fault record on the harness's clock (new; started_mono_ms and
 * ended_mono_ms mapped, mono_err_ms their bound, src_started_mono_ms /
 * src_ended_mono_ms the agent's own; unmapped as above). NULL when out of
 * memory. */
json_t *rclock_map_fault(runner *r, int l, const json_t *rec);
/* A coordinator time (ms) on the harness's clock (unmapped without a sample). */
int64_t rclock_map_syncer_ms(runner *r, int64_t t);
/* An event stamped after the harness read it (read_ms, the harness's
 * clock), or in the file form before the coordinator's launch: the run's
 * error (run_set_error, < 0). */
int rclock_check_event_time(runner *r, const json_t *ev, int64_t read_ms);
/* Each process's clock, offset and bound (new array): journal and summary. */
json_t *rclock_json(runner *r);

#endif
