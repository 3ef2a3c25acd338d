/* hypothesis.c - the registry of hypotheses, parsed specs and the verdict
 * writer (see hypothesis.h). Each hypothesis lives in its own file under
 * harness/hypotheses/; its formulas are documented in docs/experiments.md. */
#include "harness/hypothesis.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/hypotheses/hyp_kind.h"

/* ---- verdicts ---- */

const char *hyp_status_name(hyp_status s)
{
    return s == HYP_PASS ? "pass" : s == HYP_FAIL ? "fail" : "error";
}

void hyp_verdict_set(hyp_verdict *v, hyp_status st, double measured, const char *cmp, double threshold,
                     const char *unit, const char *fmt, ...)
{
    v->status = st;
    v->measured = measured;
    v->threshold = threshold;
    snprintf(v->cmp, sizeof(v->cmp), "%s", cmp);
    snprintf(v->unit, sizeof(v->unit), "%s", unit);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->explanation, sizeof(v->explanation), fmt, ap);
    va_end(ap);
}

void hyp_note(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

double hyp_spec_num(const json_t *spec, const char *key)
{
    const json_t *v = json_object_get(spec, key);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

/* ---- registry ---- */

/* The only list of hypotheses, in docs order: one line each; the file
 * harness/hypotheses/<name>.c defines `const hypothesis hyp_<name>`. */
// clang-format off
#define HYP_KINDS(X)        \
    X(loss_continuity)      \
    X(loss_target)          \
    X(reintegration)        \
    X(no_global_downtime)   \
    X(goodput)              \
    X(bandwidth)            \
    X(versions_monotonic)   \
    X(data_accounting)      \
    X(fault_effective)      \
    X(rejoin_time)
// clang-format on

#define HYP_DECLARE(name) extern const hypothesis hyp_##name;
HYP_KINDS(HYP_DECLARE)
#define HYP_ENTRY(name) &hyp_##name,
const hypothesis *const hyp_table[] = {HYP_KINDS(HYP_ENTRY) NULL};

const hypothesis *hyp_find(const char *name)
{
    for (const hypothesis *const *p = hyp_table; name && *p; p++)
        if (strcmp((*p)->name, name) == 0)
            return *p;
    return NULL;
}

double hyp_measure(const char *name, const hyp_history *h)
{
    const hypothesis *k = hyp_find(name);
    return k && k->measure ? k->measure(NULL, h) : NAN;
}

/* ---- specs ---- */

struct hyp_spec {
    const hypothesis *kind; /* registry entry */
    void *ctx;              /* parsed params (owned; kind->params_size bytes) */
    char *label;            /* "name" or the hypothesis name */
    json_t *json;           /* the entry as written (owned) */
};

hyp_spec *hyp_spec_parse(const json_t *spec, const char *path, int learners, jv_diag *d)
{
    if (!json_is_object(spec)) {
        char got[64];
        jv_describe(got, sizeof(got), spec);
        jv_diag_add(d, path, "expected a hypothesis object, got %s", got);
        return NULL;
    }
    const char *name = NULL, *label = NULL;
    size_t before = jv_diag_count(d);
    char p[JV_PATHLEN];
    jv_path_key(p, sizeof(p), path, "hypothesis");
    if (jv_get_string(d, path, spec, "hypothesis", 1, NULL, &name) != 1)
        return NULL;
    const hypothesis *kind = hyp_find(name);
    if (!kind) {
        char list[512] = "";
        for (const hypothesis *const *k = hyp_table; *k; k++)
            hyp_note(list, sizeof(list), "%s%s", list[0] ? "|" : "", (*k)->name);
        jv_diag_add(d, p, "expected a hypothesis (%s), got \"%s\"", list, name);
        return NULL;
    }
    if (jv_get_string(d, path, spec, "name", 0, NULL, &label) == 1 && !label[0]) {
        jv_path_key(p, sizeof(p), path, "name");
        jv_diag_add(d, p, "expected a non-empty string, got \"\"");
    }
    static const char *const own[] = {"hypothesis", "name", NULL};
    /* a kind without params gets one byte: a spec's params are never NULL */
    void *ctx = calloc(1, kind->params_size ? kind->params_size : 1);
    if (ctx && param_decode(kind->params, own, spec, path, learners, d, ctx) == 0 && kind->check)
        kind->check(ctx, spec, path, d);
    hyp_spec *s = NULL;
    if (jv_diag_count(d) == before && ctx)
        s = calloc(1, sizeof(*s));
    if (!s) {
        free(ctx);
        if (jv_diag_count(d) == before)
            jv_diag_add(d, path, "out of memory");
        return NULL;
    }
    s->kind = kind;
    s->ctx = ctx;
    s->label = strdup(label && label[0] ? label : kind->name);
    s->json = json_deep_copy(spec);
    if (!s->label || !s->json) {
        hyp_spec_free(s);
        jv_diag_add(d, path, "out of memory");
        return NULL;
    }
    return s;
}

void hyp_spec_free(hyp_spec *s)
{
    if (!s)
        return;
    free(s->ctx);
    free(s->label);
    json_decref(s->json);
    free(s);
}

const hypothesis *hyp_spec_kind(const hyp_spec *s)
{
    return s->kind;
}

const char *hyp_spec_label(const hyp_spec *s)
{
    return s->label;
}

const json_t *hyp_spec_json(const hyp_spec *s)
{
    return s->json;
}

void hyp_spec_eval(const hyp_spec *s, const hyp_history *h, hyp_verdict *v)
{
    memset(v, 0, sizeof(*v));
    s->kind->eval(s->ctx, h, v);
}

double hyp_spec_measure(const hyp_spec *s, const hyp_history *h)
{
    return s->kind->measure ? s->kind->measure(s->ctx, h) : NAN;
}
