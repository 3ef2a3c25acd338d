/* fault_effective.c - every injected fault has evidence and did not fail;
 * nan faults are rejected by the syncer, restarted kills rejoin, clock
 * skews show in heartbeats. Formula: docs/experiments.md "fault_effective". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/fault_kinds.h"
#include "harness/hypotheses/hyp_kind.h"

typedef struct fe_params {
    int allow_none; /* an experiment that injected nothing passes */
} fe_params;

typedef struct fe_figure {
    size_t total;  /* faults and failed injections */
    size_t ok;     /* faults with evidence that held the cross-check */
    char why[448]; /* the first that did not ("" none) */
} fe_figure;

static const param_def fe_params_def[] = {
    {.name = "allow_none",
     .type = PARAM_BOOL,
     .doc = "an experiment that injected nothing passes (else it fails)",
     .offset = PARAM_AT(fe_params, allow_none)},
    {0},
};

/* A cross-check against the syncer's events for kinds that leave a trace
 * there; NULL when it holds (or the kind leaves none). The evidence must lie
 * certainly inside the fault's window whatever the clocks' error (history.h);
 * evidence only the error bound keeps out is named in note. */
static const char *cross_check(const hyp_history *h, int l, const json_t *r, char *note, size_t notelen)
{
    const char *type = hx_jstr(r, "type");
    int64_t s = hx_fault_start(r), e = hx_fault_end(r);
    json_t *params = json_object_get(r, "params");
    const json_t *ev;
    if (strcmp(type, "nan") == 0) {
        for (size_t i = 0; (ev = hx_next_event(h, "reject", &i));) {
            if (hx_jint(ev, "learner", -1) != l || strcmp(hx_jstr(ev, "reason"), "nonfinite") != 0)
                continue;
            int64_t err = hx_cross_err(ev, r);
            if (hx_ev_t(ev) - s >= err)
                return NULL;
            if (hx_ev_t(ev) >= s - err && !note[0])
                snprintf(note, notelen,
                         " (a nonfinite reject lies within the clocks' error bound of %lld ms of its start)",
                         (long long)err);
        }
        return "no nonfinite reject by the syncer after it";
    }
    if (hx_kind_restarts_unit(type) && json_is_integer(json_object_get(params, "restart_after_ms"))) {
        hx_rejoin_info ri;
        hx_rejoin(h, l, r, &ri);
        if (ri.join)
            return NULL;
        if (ri.edge)
            snprintf(note, notelen,
                     " (its join of incarnation %lld lies within the clocks' error bound of %lld ms of the "
                     "fault's start)",
                     (long long)hx_jint(ri.edge, "incarnation", 0), (long long)ri.edge_err);
        return "the learner never joined again with a new incarnation";
    }
    double off;
    if (strcmp(type, "clock") == 0 && hx_jnum(params, "offset_s", &off) && off != 0.0) {
        for (size_t i = 0; (ev = hx_next_event(h, "heartbeat", &i));) {
            double skew;
            if (hx_jint(ev, "learner", -1) != l || !hx_jnum(ev, "clock_skew_ms", &skew) ||
                fabs(skew) < 0.5 * fabs(off) * 1000.0)
                continue;
            int64_t err = hx_cross_err(ev, r), t = hx_ev_t(ev);
            if (t >= s + err && t <= e - err)
                return NULL;
            if (t >= s - err && t <= e + err && !note[0])
                snprintf(
                    note, notelen,
                    " (a skewed heartbeat lies within the clocks' error bound of %lld ms of its window's "
                    "edges)",
                    (long long)err);
        }
        return "no heartbeat showed the clock skew";
    }
    return NULL;
}

static void fe_measure(const hyp_history *h, fe_figure *f)
{
    memset(f, 0, sizeof *f);
    for (size_t i = 0; i < hx_nfaults(h); i++) {
        const json_t *r = hx_fault(h, i);
        f->total++;
        json_t *ev = json_object_get(r, "evidence");
        const char *state = hx_jstr(r, "state");
        const char *bad = NULL;
        char note[160] = "";
        if (strcmp(state, "failed") == 0)
            bad = json_is_string(json_object_get(r, "error")) ? hx_jstr(r, "error") : "state failed";
        else if (!json_is_object(ev) || json_object_size(ev) == 0)
            bad = "no evidence";
        else
            bad = cross_check(h, hx_fault_learner(h, i), r, note, sizeof note);
        if (!bad) {
            f->ok++;
            continue;
        }
        if (!f->why[0])
            snprintf(f->why, sizeof(f->why), "%s fault %s on learner %d: %s%s", hx_jstr(r, "type"),
                     hx_jstr(r, "id"), hx_fault_learner(h, i), bad, note);
    }
    for (size_t i = 0; i < hx_nactions(h); i++) {
        const json_t *a = hx_action(h, i);
        if (strcmp(hx_jstr(a, "phase"), "fail") != 0)
            continue;
        f->total++;
        if (!f->why[0])
            snprintf(f->why, sizeof(f->why), "action %s failed to inject: %s", hx_jstr(a, "action"),
                     hx_jstr(a, "error"));
    }
}

static void fe_judge(const fe_params *p, const fe_figure *f, hyp_verdict *v)
{
    if (f->total == 0) {
        hyp_verdict_set(v, p->allow_none ? HYP_PASS : HYP_FAIL, NAN, ">=", 1.0, "ratio",
                        "no fault was injected%s", p->allow_none ? " (allowed)" : "");
        return;
    }
    double ratio = (double)f->ok / (double)f->total;
    if (f->ok < f->total) {
        hyp_verdict_set(v, HYP_FAIL, ratio, ">=", 1.0, "ratio", "%zu of %zu faults showed evidence; %s",
                        f->ok, f->total, f->why);
        return;
    }
    hyp_verdict_set(v, HYP_PASS, ratio, ">=", 1.0, "ratio", "all %zu faults showed evidence they took effect",
                    f->total);
}

static void fe_eval(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    fe_figure f;
    fe_measure(h, &f);
    fe_judge(ctx, &f, v);
}

/* The share of faults that took effect; NAN when none was injected. */
static double fe_figure_of(const void *ctx, const hyp_history *h)
{
    (void)ctx;
    fe_figure f;
    fe_measure(h, &f);
    return f.total ? (double)f.ok / (double)f.total : NAN;
}

const hypothesis hyp_fault_effective = {
    .name = "fault_effective",
    .summary = "every injected fault has evidence and did not fail; nan faults are rejected by the syncer, "
               "restarted "
               "kills "
               "rejoin, clock skews show in heartbeats",
    .params = fe_params_def,
    .params_size = sizeof(fe_params),
    .eval = fe_eval,
    .measure = fe_figure_of,
};
