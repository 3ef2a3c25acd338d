/* hypothesis.h - the built-in hypotheses of an experiment: the registry,
 * parsed specs and verdicts.
 *
 * A hypothesis is one file under harness/hypotheses/ that defines one const
 * table entry (name, summary, params, parse, measure, eval, free); the
 * registry hyp_table (hypothesis.c) is the only list of them. Each file has
 * its own params struct and parser, and splits the work in two: *measure*
 * computes the figure from the history (no threshold), *judge* compares it
 * with the threshold and writes the explanation; eval is judge(measure).
 * A hypothesis is pure: it never talks to a process. The runner feeds a
 * hyp_history (history.h) with what it collected and asks each spec for a
 * verdict, or a kind for its figure alone (summary.json).
 *
 * Adding one: its file, one line in hypothesis.c's HYP_KINDS, its cases in
 * tests/unit/test_hypothesis.c, its section in docs/experiments.md and its
 * params in docs/experiment.schema.json (test_hypothesis checks the schema
 * against the table).
 *
 * Ownership: a hyp_spec owns its parsed params; verdicts are plain values.
 */
#ifndef HARNESS_HYPOTHESIS_H
#define HARNESS_HYPOTHESIS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/history.h"
#include "harness/horizon.h"
#include "harness/jsonv.h"

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
    /* Every key an entry may have: "hypothesis", "name", then the params
     * (NULL-terminated). hyp_spec_parse rejects any other before parse
     * runs; docs/experiment.schema.json lists the same (a test checks). */
    const char *const *keys;
    /* Parse params (the keys are checked): spec is the whole experiment
     * entry; keys "hypothesis" and "name" are the caller's. Every problem
     * goes to d with path (e.g. "$.verify[0]"); the spec is invalid when d
     * grew. *ctx: the params (new, kind->free), NULL when out of memory.
     * learners: M, to range-check learner ids. */
    void (*parse)(const json_t *spec, const char *path, int learners, jv_diag *d, void **ctx);
    /* Judge: measure, then compare with the params' threshold. */
    void (*eval)(const void *ctx, const hyp_history *h, hyp_verdict *v);
    /* The figure alone (what eval reports as measured), NAN when there is
     * none. ctx NULL = the params' defaults (no threshold is needed); NAN
     * too when the figure needs a param that has no default. */
    double (*measure)(const void *ctx, const hyp_history *h);
    void (*free)(void *ctx);
    /* The window the run must observe before this entry can be judged
     * (horizon.h), from the entry as written: fill *w (label and learner
     * -1 preset) and return 1, or 0 when it has none. NULL: never one. */
    int (*window)(const json_t *spec, hz_window *w);
} hypothesis;

/* NULL-terminated, in docs order. */
extern const hypothesis *const hyp_table[];
const hypothesis *hyp_find(const char *name);
/* The figure of hypothesis name with default params (hypothesis.measure
 * with ctx NULL); NAN when it has none or name is not registered. */
double hyp_measure(const char *name, const hyp_history *h);

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
/* The entry's figure alone (its kind's measure with its params), NAN when
 * there is none. */
double hyp_spec_measure(const hyp_spec *s, const hyp_history *h);

#endif
