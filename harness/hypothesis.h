/* hypothesis.h - the built-in hypotheses of an experiment: the registry,
 * parsed specs and verdicts.
 *
 * A hypothesis is one file under harness/hypotheses/ that defines one const
 * table entry (name, summary, params, check, measure, eval, window); the
 * registry hyp_table (hypothesis.c) is the only list of them. Each file has
 * its own params struct, declared once as a param_def table (param.h), and
 * splits the work in two: *measure* computes the figure from the history
 * (no threshold), *judge* compares it with the threshold and writes the
 * explanation; eval is judge(measure).
 * A hypothesis is pure: it never talks to a process. The runner feeds a
 * hyp_history (history.h) with what it collected and asks each spec for a
 * verdict, or a kind for its figure alone (summary.json).
 *
 * Adding one: its file, one line in hypothesis.c's HYP_KINDS, its cases in
 * tests/unit/test_hypothesis.c and its section in docs/experiments.md; its
 * params are declared once, in its file (a param_def table), and the
 * params-docs target writes their docs table and schema (the test
 * docs/params fails until it ran).
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
#include "harness/param.h"

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
    /* Its params, {NULL}-terminated (param.h): the only declaration of
     * them. An entry may have "hypothesis", "name" and these keys;
     * hyp_spec_parse decodes them into a new struct of params_size bytes
     * (defaults first) and rejects any other key. The docs' params tables
     * and docs/experiment.schema.json are generated from it
     * (harness/tools/params_docs.c). NULL: none. */
    const param_def *params;
    size_t params_size; /* bytes of its params struct (0: none) */
    /* Rules across params that the table cannot say (exactly one of, only
     * together with), or NULL: check reports each broken rule into d with
     * the entry's path, after the params were decoded into p; rules is
     * the same in words for the docs, schema_rules as JSON Schema members
     * of the entry ("oneOf": [...], ...) for the generated schema. */
    void (*check)(const void *p, const json_t *spec, const char *path, jv_diag *d);
    const char *rules;
    const char *schema_rules;
    /* Judge: measure, then compare with the params' threshold. */
    void (*eval)(const void *p, const hyp_history *h, hyp_verdict *v);
    /* The figure alone (what eval reports as measured), NAN when there is
     * none. p NULL = the params' defaults (no threshold is needed; the file
     * gets them with param_defaults); NAN too when the figure needs a
     * param that has no default. */
    double (*measure)(const void *p, const hyp_history *h);
    /* The window the run must observe before this entry can be judged
     * (horizon.h), from the entry as written: fill *w (label and learner
     * -1 preset) and return 1, or 0 when it has none. NULL: never one. */
    int (*window)(const json_t *spec, hz_window *w);
} hypothesis;

/* NULL-terminated, in docs order. */
extern const hypothesis *const hyp_table[];
const hypothesis *hyp_find(const char *name);
/* The figure of hypothesis name with default params (hypothesis.measure
 * with p NULL); NAN when it has none or name is not registered. */
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
