/* journal.h - the run's outputs: journal.json, junit.xml, events.jsonl.
 *
 * journal.json is a Chaos Toolkit journal (docs/journal.schema.json):
 * chaoslib-version (the chaoslib release whose format it follows, SemVer),
 * platform, node, experiment (a Chaos Toolkit experiment: ctk.h translates
 * ours), start, end, duration, status, deviated, steady_states {before,
 * after, during}, run [...], rollbacks [...], and chaosloco's own
 * {version, experiment (the file as validated), final_loss, final_bpb,
 * clocks (each process's clock offset and bound: the runner's run/clock.c)}
 * under "chaosloco". Every hypothesis is a probe run whose output carries
 * the measured figure beside its threshold (and, for figures in nats, both
 * again in bits per byte: measured_bpb, threshold_bpb); every harness call a
 * run record whose activity is the experiment's activity for it.
 * junit.xml has one testcase per hypothesis. events.jsonl gets one line per
 * action phase (invoke, then ok or fail), stamped with realtime and
 * monotonic clocks, written with one write(2) each so concurrent writers
 * never interleave inside a line.
 *
 * A journal only records what the runner tells it; it decides nothing but
 * `deviated` (some hypothesis after the method did not pass) and the
 * failed status when a steady state before the method did not hold.
 */
#ifndef HARNESS_JOURNAL_H
#define HARNESS_JOURNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#include "harness/experiment.h"
#include "harness/hypothesis.h"
#include "harness/schedule.h"

/* ---- events.jsonl ---- */

typedef struct jr_events jr_events;

/* Open (create or append) path. */
int jr_events_open(const char *path, jr_events **out, char *err, size_t errlen);
void jr_events_close(jr_events *ev); /* NULL is a no-op */
/* Stamp obj in place with "t_real" (ISO-8601 UTC ms) and "t_mono_ms" unless
 * present, and append it as one line. */
int jr_events_append(jr_events *ev, json_t *obj, char *err, size_t errlen);
/* A harness action event (new reference):
 *   {"kind":"action", "phase":"invoke"|"ok"|"fail", "action", "fault",
 *    "learner", "fault_id"?, "error"?}
 * fault_id / error may be NULL (omitted). This is the shape
 * hyp_history_add_action reads. */
json_t *jr_action_event(const char *phase, const char *action, const char *fault, int learner,
                        const char *fault_id, const char *error);

/* ---- journal.json and junit.xml ---- */

/* Chaos Toolkit's statuses, with its meanings (chaoslib run.py). */
typedef enum jr_status {
    JR_COMPLETED,   /* ran to the end (hypotheses may still have deviated) */
    JR_FAILED,      /* the steady state before the method did not hold */
    JR_ABORTED,     /* broke for an unforeseen reason: a harness or injection error */
    JR_INTERRUPTED, /* stopped from outside or by a guard: SIGINT/SIGTERM, a stop condition, a halt */
} jr_status;

/* The chaostoolkit-lib release whose journal format journal.json follows
 * (its "chaoslib-version"; chaosloco's own is chaosloco.version). */
#define JR_CHAOSLIB_VERSION "1.45.0"

typedef enum jr_phase { JR_BEFORE, JR_AFTER, JR_DURING } jr_phase;

typedef struct journal journal;

/* Borrows nothing: the experiment's document is copied and translated
 * (with an empty method until journal_set_plan). */
journal *journal_new(const experiment *e);
void journal_free(journal *j);
/* The run's timeline: the translated experiment's method gets one activity
 * per scheduled fault. Call before the first journal_add_action. */
int journal_set_plan(journal *j, const experiment *e, const schedule *s);
/* The run's addresses, for the translated experiment's configuration
 * (agent_urls: learner i's, n of them). */
void journal_set_endpoints(journal *j, const char *syncer_url, const char *const *agent_urls, int n);
/* Realtime ns of the start and end (cx_real_ns()); set_end also the status. */
void journal_set_start(journal *j, int64_t real_ns);
void journal_set_end(journal *j, int64_t real_ns, jr_status status);
/* The run's last held-out eval loss in nats (NAN: none, the default). The
 * journal writes it under "chaosloco" as final_loss (nats) and final_bpb
 * (bits per byte = nats / ln 2), null when none. */
void journal_set_final_loss(journal *j, double nats);
/* Each process's clock as the run mapped it (an array of objects: process,
 * offset_ms, error_ms, ...; copied), under "chaosloco" as clocks ([] until
 * set). */
void journal_set_clocks(journal *j, const json_t *clocks);
/* Record one hypothesis verdict as a probe of phase. */
int journal_add_hypothesis(journal *j, jr_phase phase, const hyp_spec *s, const hyp_verdict *v,
                           int64_t start_ns, int64_t end_ns);
/* Record one method action (a fault on one learner): status "succeeded" or
 * "failed"; output borrowed (copied; may be NULL). rollback != 0 files it
 * under rollbacks. */
int journal_add_action(journal *j, int rollback, const char *name, const char *fault, int learner,
                       const char *status, const json_t *output, int64_t start_ns, int64_t end_ns);
/* Some verify/after hypothesis did not pass. */
int journal_deviated(const journal *j);
jr_status journal_status(const journal *j);
const char *jr_status_name(jr_status s); /* "completed" | "failed" | "aborted" | "interrupted" */
/* The journal as JSON (new reference). */
json_t *journal_json(const journal *j);
/* Write journal.json / junit.xml atomically. */
int journal_write(const journal *j, const char *path, char *err, size_t errlen);
int journal_write_junit(const journal *j, const char *path, char *err, size_t errlen);
/* The JUnit document (malloc'd, caller frees) — exposed for tests. */
char *journal_junit(const journal *j);

/* Escape s (NULL = "") for XML and HTML text and attribute values into b:
 * & < > " ' become entities, control characters XML 1.0 cannot hold '?'.
 * Shared by junit.xml and report.html. */
void jr_escape_markup(cx_buf *b, const char *s);

#endif
