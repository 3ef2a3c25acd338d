/* hypothesis.h - the built-in hypotheses of an experiment and the event
 * history they are judged on.
 *
 * A hypothesis is a const table entry (name, params parser, evaluator)
 * registered in hyp_table (DESIGN §5's table: loss_continuity, loss_target,
 * reintegration, no_global_downtime, goodput, bandwidth, versions_monotonic,
 * data_accounting, fault_effective). It is pure: it never talks to a
 * process. The runner (part 2) feeds a hyp_history with what it collected,
 *
 *   syncer events   (GET /v1/events, docs/telemetry.md: seq, t_mono_ms, type, ...)
 *   fault records   (each agent's GET /v1/faults, tagged with its learner id)
 *   action events   (the harness's own events.jsonl lines, journal.h)
 *   counters        (figures only the runner knows: wire bytes, control loss)
 *
 * and asks each spec for a verdict. Every time is CLOCK_MONOTONIC ms; on one
 * host every process shares that clock (attach mode across hosts would need
 * an offset; not handled here).
 *
 * Ownership: hyp_history keeps its own references to what it is fed; a
 * hyp_spec owns its parsed params; verdicts are plain values.
 */
#ifndef HARNESS_HYPOTHESIS_H
#define HARNESS_HYPOTHESIS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/jsonv.h"

/* ---- history ---- */

typedef struct hyp_history hyp_history;

/* Counters a runner may set (hyp_history_set_counter). */
#define HYP_C_BYTES_IN "bytes_in"         /* syncer /v1/status bytes.in at the end */
#define HYP_C_BYTES_OUT "bytes_out"       /* syncer /v1/status bytes.out at the end */
#define HYP_C_TOKENS "tokens_trained"     /* total tokens trained by all learners */
#define HYP_C_CONTROL_LOSS "control_loss" /* final eval loss of a control run */
#define HYP_C_STEPS_TARGET "steps_target" /* inner steps each learner must train */
#define HYP_C_END_MONO "end_mono_ms"      /* end of the observed run */
#define HYP_C_START_MONO "start_mono_ms"  /* start of the observed run */

/* learners: M; quorum: K (the live floor of no_global_downtime). */
hyp_history *hyp_history_new(int learners, int quorum);
void hyp_history_free(hyp_history *h);
/* A syncer event (docs/telemetry.md shape). Copied. Returns CX_EINVAL (with err)
 * when it lacks seq/t_mono_ms/type. */
int hyp_history_add_syncer_event(hyp_history *h, const json_t *ev, char *err, size_t errlen);
/* An agent fault record (docs/api.md shape) of the agent beside learner. */
int hyp_history_add_fault(hyp_history *h, int learner, const json_t *record, char *err, size_t errlen);
/* A harness action event (journal.h: phase invoke|ok|fail ...). */
int hyp_history_add_action(hyp_history *h, const json_t *ev, char *err, size_t errlen);
void hyp_history_set_counter(hyp_history *h, const char *name, double value);
/* 1 and *out when set, else 0. */
int hyp_history_counter(const hyp_history *h, const char *name, double *out);
/* Final per-learner progress as the runner saw it (syncer status at the
 * end): step and cumulative tokens. Optional; heartbeats are used too. */
void hyp_history_set_learner_final(hyp_history *h, int learner, int64_t step, int64_t tokens);

/* ---- verdicts ---- */

typedef enum hyp_status {
    HYP_PASS = 0,  /* the hypothesis held */
    HYP_FAIL = 1,  /* it deviated: measured is on the wrong side of threshold */
    HYP_ERROR = 2, /* it could not be judged (no data); never counts as a pass */
} hyp_status;

typedef struct hyp_verdict {
    hyp_status status;
    double measured;       /* the figure (NAN when there is none) */
    double threshold;      /* what it is compared with (NAN when none) */
    char cmp[4];           /* "<=", ">=" or "==": measured cmp threshold must hold */
    char unit[16];         /* unit of both: "s", "rel", "bytes/token", ... */
    char explanation[512]; /* one line: why it passed or failed */
} hyp_verdict;

const char *hyp_status_name(hyp_status s); /* "pass" | "fail" | "error" */

/* ---- registry ---- */

typedef struct hypothesis {
    const char *name;    /* as written in experiments: "loss_continuity" */
    const char *summary; /* one line: when it passes */
    const char *params;  /* one line: keys, units, ranges, defaults */
    /* Parse params strictly: spec is the whole experiment entry; keys
     * "hypothesis" and "name" are the caller's. Every problem goes to d
     * with path (e.g. "$.verify[0]"). *ctx is NULL when any error was
     * reported. learners: M, to range-check learner ids. */
    void (*parse)(const json_t *spec, const char *path, int learners, jv_diag *d, void **ctx);
    void (*eval)(const void *ctx, const hyp_history *h, hyp_verdict *v);
    void (*free)(void *ctx);
} hypothesis;

/* NULL-terminated, in docs order. */
extern const hypothesis *const hyp_table[];
const hypothesis *hyp_find(const char *name);

/* ---- specs: one parsed hypothesis entry of an experiment ---- */

typedef struct hyp_spec hyp_spec;

/* Parse {"hypothesis": NAME, "name"?: LABEL, ...params}. NULL with errors
 * in d (paths under path) when invalid. */
hyp_spec *hyp_spec_parse(const json_t *spec, const char *path, int learners, jv_diag *d);
void hyp_spec_free(hyp_spec *s);
const hypothesis *hyp_spec_kind(const hyp_spec *s);
/* The label: the entry's "name", else the hypothesis name. Borrowed. */
const char *hyp_spec_label(const hyp_spec *s);
/* The entry as written (borrowed), for journals. */
const json_t *hyp_spec_json(const hyp_spec *s);
void hyp_spec_eval(const hyp_spec *s, const hyp_history *h, hyp_verdict *v);

#endif
