/* output.h - the runner's judging and outputs: the steady state and the
 * verify list judged on the collection's history, summary.json's figures,
 * the dashboard's hypotheses table and progress, the progress line,
 * events.jsonl/faults.json at the end, journal.json, junit.xml,
 * report.html and the verdicts printed on stdout. It reads what the
 * collection and the timeline gathered and changes neither.
 *
 * Owner: struct output_state (runner.h's r->out) is written here only.
 * Threads: the main thread only.
 */
#ifndef HARNESS_RUN_OUTPUT_H
#define HARNESS_RUN_OUTPUT_H

#include <jansson.h>
#include <stdint.h>

#include "harness/run.h"

typedef struct runner runner;

typedef struct output_state {
    json_t *dash_hyps;     /* the dashboard's hypotheses table (array, owned) */
    int steady_ok;         /* 1 the steady state held (or there is none) */
    int64_t last_progress; /* ms of the last progress output (0: the TTY line is clear) */
} output_state;

void output_cleanup(runner *r);
void output_dash_pending(runner *r); /* every hypothesis "pending" on the dashboard */
/* Judge the steady state (re-evaluated every second until all pass or the
 * deadline); steady_ok; journal and dashboard entries. */
void output_steady_state(runner *r, double limit_s);
/* Judge the verify list on the final history (a window the run did not see
 * close: an error); journal and dashboard entries. */
void output_verify(runner *r);
/* summary.json's figures (new; NULL when out of memory). */
json_t *output_summary_json(runner *r);
void output_journal_endpoints(runner *r);                     /* the journal's syncer and agent URLs */
void output_print_verdicts(runner *r, const run_result *res); /* the verdicts on stdout */
/* events.jsonl (every training event and final fault record), faults.json,
 * summary.json, journal.json, junit.xml, report.html. */
void output_write(runner *r, run_result *res);
/* The progress line (TTY) or log (every 10 s), and the dashboard's;
 * bound_left_s: seconds to the time bound. */
void output_progress(runner *r, const char *phase, double bound_left_s);
void output_progress_end(runner *r); /* clear the TTY progress line before a log line */

#endif
