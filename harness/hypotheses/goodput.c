/* goodput.c - useful learner-time / allocated learner-time >= min, or,
 * with min_rel, the goodput after a fault-free reference phase over the
 * goodput in it >= min_rel. Useful learner-time is merged inner steps x
 * step time (basis "steps", the default), or the learner-time between a
 * learner's contributions that were merged (basis "time").
 * Formula: docs/experiments.md "goodput". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/hypotheses/hyp_kind.h"

typedef struct gp_params {
    double min; /* ratio 0..1: absolute goodput floor */
    int has_min_rel;
    double min_rel; /* ratio to the same run's reference phase */
    int has_ref_s;
    double ref_s; /* s of the reference phase after the first join */
    int has_step_ms;
    double step_ms; /* ms per inner step when no heartbeat says */
    int time_basis; /* 1: "basis": "time" (useful = learner-time covered by merged contributions) */
} gp_params;

typedef struct gp_figure {
    char none[256];   /* why there is no figure ("" when there is one) */
    double g;         /* ratio: the goodput (absolute), or g_rest / g_ref (min_rel) */
    double steps;     /* absolute: merged inner steps */
    double useful_ms; /* absolute: useful learner-ms */
    double alloc_ms;  /* absolute: allocated learner-ms */
    int64_t span_ms;  /* absolute: the run's span */
    double g_ref;     /* min_rel: goodput in the reference phase */
    double g_rest;    /* min_rel: goodput after it */
    double s_ref;     /* min_rel: merged inner steps in it */
    double s_rest;    /* min_rel: merged inner steps after it */
    int64_t ref_ms;   /* min_rel: length of the reference phase */
} gp_figure;

static const char *const gp_bases[] = {"steps", "time", NULL};

static const param_def gp_params_def[] = {
    {.name = "min",
     .type = PARAM_NUMBER,
     .flags = PARAM_NODEF,
     .min = 0,
     .max = 1,
     .what = "a goodput ratio",
     .unit = "ratio",
     .doc = "absolute floor of useful over allocated learner-time",
     .offset = PARAM_AT(gp_params, min)},
    {.name = "min_rel",
     .type = PARAM_NUMBER,
     .flags = PARAM_NODEF,
     .min = 0,
     .max = 10,
     .what = "a ratio to the reference goodput",
     .unit = "ratio",
     .doc = "floor of the goodput after the run's fault-free reference phase over the goodput in it",
     .offset = PARAM_AT(gp_params, min_rel),
     .set_at = PARAM_SET_AT(gp_params, has_min_rel)},
    {.name = "ref_s",
     .type = PARAM_NUMBER,
     .flags = PARAM_CAP,
     .min = 1,
     .max = 1e7,
     .what = "seconds",
     .unit = "s",
     .def_text = "until the first fault",
     .doc = "the reference phase's length after the first join",
     .offset = PARAM_AT(gp_params, ref_s),
     .set_at = PARAM_SET_AT(gp_params, has_ref_s)},
    {.name = "step_ms",
     .type = PARAM_NUMBER,
     .flags = PARAM_CAP | PARAM_ABOVE_ZERO,
     .min = 1e-3,
     .max = 1e7,
     .what = "ms per inner step",
     .unit = "ms",
     .def_text = "the heartbeats' step_ms",
     .doc = "the step time when no heartbeat carries one",
     .offset = PARAM_AT(gp_params, step_ms),
     .set_at = PARAM_SET_AT(gp_params, has_step_ms)},
    {.name = "basis",
     .type = PARAM_ENUM,
     .values = gp_bases,
     .def = 0,
     .doc =
         "useful learner-time: merged inner steps x step time, or the time covered by merged contributions",
     .offset = PARAM_AT(gp_params, time_basis)},
    {0},
};

/* The rules across params (hypothesis.h: check, rules, schema_rules). */
static void gp_check(const void *ctx, const json_t *s, const char *path, jv_diag *d)
{
    const gp_params *p = ctx;
    int nmin = !!json_object_get(s, "min"), nrel = !!json_object_get(s, "min_rel");
    if (nmin + nrel != 1)
        jv_diag_add(d, path,
                    "expected exactly one of min (absolute) or min_rel (relative to the run's fault-free "
                    "reference phase), got %d",
                    nmin + nrel);
    if (json_object_get(s, "ref_s") && !nrel)
        jv_diag_add(d, path, "expected ref_s only together with min_rel");
    if (p->time_basis && json_object_get(s, "step_ms"))
        jv_diag_add(d, path, "expected step_ms only with basis \"steps\" (basis \"time\" uses no step time)");
}

static const char gp_rules[] =
    "exactly one of `min` or `min_rel`; `ref_s` only with `min_rel`; `step_ms` only with basis `\"steps\"`";
static const char gp_schema_rules[] =
    "\"oneOf\": [{\"required\": [\"min\"]}, {\"required\": [\"min_rel\"]}],\n"
    "\"dependentRequired\": {\"ref_s\": [\"min_rel\"]},\n"
    "\"if\": {\"required\": [\"basis\"], \"properties\": {\"basis\": {\"const\": \"time\"}}},\n"
    "\"then\": {\"not\": {\"required\": [\"step_ms\"]}},";

/* Overlap of [a, b) and [c, d), >= 0. */
static int64_t overlap(int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t lo = a > c ? a : c, hi = b < d ? b : d;
    return hi > lo ? hi - lo : 0;
}

/* basis "time": useful learner-ms within [a, b). The time a learner spent
 * since its join (or its previous contribution or rejection of that
 * fragment) up to a contribution is useful once that contribution is
 * merged, weighed 1/np per fragment, less any part of it during which a
 * fault had taken the learner down (iv[]: hx_down_intervals). Time down,
 * rejected work and work lost in a crash before it was merged are not. */
static double useful_time_ms(const hyp_history *h, const hx_interval *iv, size_t niv, int np, int64_t a,
                             int64_t b)
{
    int m = hx_learners(h), slots = np > 0 ? np : 1;
    int64_t emax = hx_err_max(h);
    size_t n = (size_t)m * (size_t)slots;
    int64_t *inc = calloc((size_t)m, sizeof *inc), *prev = calloc(n, sizeof *prev);
    double *pend = calloc(n, sizeof *pend), useful = 0; /* pend: learner-ms awaiting a merge */
    if (!inc || !prev || !pend) {
        free(inc), free(prev), free(pend);
        return NAN;
    }
    for (size_t i = 0; i < hx_nevents(h); i++) {
        const json_t *e = hx_event(h, i);
        int64_t l = hx_jint(e, "learner", -1), t = hx_ev_t(e), f = hx_jint(e, "fragment", -1);
        if (hx_ev_is(e, "merge") && f >= 0 && f < slots) {
            json_t *parts = json_object_get(e, "participants");
            for (size_t j = 0; j < json_array_size(parts); j++) {
                json_t *pa = json_array_get(parts, j);
                int64_t pl = hx_jint(pa, "learner", -1);
                if (pl >= 0 && pl < m && hx_jint(pa, "incarnation", -1) == inc[pl]) {
                    useful += pend[pl * slots + f] / slots;
                    pend[pl * slots + f] = 0;
                }
            }
        }
        if (l < 0 || l >= m)
            continue;
        if (hx_ev_is(e, "join")) {
            inc[l] = hx_jint(e, "incarnation", 0);
            for (int k = 0; k < slots; k++)
                prev[l * slots + k] = t, pend[l * slots + k] = 0; /* what was pending died with it */
            continue;
        }
        int contrib = hx_ev_is(e, "contribution");
        if ((contrib || hx_ev_is(e, "reject")) && hx_jint(e, "incarnation", 0) == inc[l] && f >= 0 &&
            f < slots) {
            size_t k = (size_t)l * (size_t)slots + (size_t)f;
            if (contrib) {
                int64_t lo = prev[k] > a ? prev[k] : a, hi = t < b ? t : b, down = 0;
                /* a down interval's edges are an agent's or the syncer's
                 * times: widened by their error, it is never less than the
                 * learner was really down */
                for (size_t d = 0; d < niv && hi > lo; d++)
                    if (iv[d].learner == l)
                        down += overlap(lo, hi, iv[d].a - iv[d].ea - emax, iv[d].b + iv[d].eb + emax);
                if (hi > lo && hi - lo > down)
                    pend[k] += (double)(hi - lo - down);
            }
            prev[k] = t; /* a rejection: the work since prev is lost */
            continue;
        }
    }
    free(inc), free(prev), free(pend);
    return useful;
}

/* Useful learner-ms of the merges in [a, b): each participant's merged
 * steps (1/P of them for a fragment merge) times its step time then (its
 * last heartbeat's step_ms before the merge; mean_ms[l] before its first),
 * so a phase of the run is weighed by the step times of that phase. */
static double useful_ms(const hyp_history *h, const double *mean_ms, int np, int64_t a, int64_t b,
                        double *steps)
{
    int m = hx_learners(h);
    double useful = 0, *ms = malloc((size_t)m * sizeof *ms);
    if (!ms)
        return NAN;
    memcpy(ms, mean_ms, (size_t)m * sizeof *ms);
    for (size_t i = 0; i < hx_nevents(h); i++) {
        const json_t *e = hx_event(h, i);
        int64_t who = hx_jint(e, "learner", -1);
        double x;
        if (hx_ev_is(e, "heartbeat") && who >= 0 && who < m && hx_jnum(e, "step_ms", &x) && x > 0)
            ms[who] = x;
        if (!hx_ev_is(e, "merge") || hx_ev_t(e) < a || hx_ev_t(e) >= b)
            continue;
        int64_t frag = hx_jint(e, "fragment", -1);
        double w = frag < 0 || np <= 0 ? 1.0 : 1.0 / np;
        json_t *parts = json_object_get(e, "participants");
        for (size_t j = 0; j < json_array_size(parts); j++) {
            json_t *pa = json_array_get(parts, j);
            int64_t l = hx_jint(pa, "learner", -1);
            if (l >= 0 && l < m) {
                useful += w * (double)hx_jint(pa, "steps", 0) * ms[l];
                *steps += w * (double)hx_jint(pa, "steps", 0);
            }
        }
    }
    free(ms);
    return useful;
}

/* Each learner's mean step time (else everyone's, else step_ms) into ms[m];
 * the first join's time into *first_join (-1 none). 0, or -1 when a learner
 * has no step time. */
static int step_times(const gp_params *p, const hyp_history *h, double *ms, double *ms_n, int64_t *first_join)
{
    int m = hx_learners(h);
    double all_ms = 0, all_n = 0;
    *first_join = -1;
    for (size_t i = 0; i < hx_nevents(h); i++) {
        const json_t *e = hx_event(h, i);
        if (hx_ev_is(e, "join") && *first_join < 0)
            *first_join = hx_ev_t(e);
        double x;
        int64_t who = hx_jint(e, "learner", -1);
        if (hx_ev_is(e, "heartbeat") && who >= 0 && who < m && hx_jnum(e, "step_ms", &x) && x > 0) {
            ms[who] += x;
            ms_n[who] += 1;
            all_ms += x;
            all_n += 1;
        }
    }
    int missing = 0;
    for (int l = 0; l < m; l++) {
        ms[l] = ms_n[l] > 0      ? ms[l] / ms_n[l]
                : all_n > 0      ? all_ms / all_n
                : p->has_step_ms ? p->step_ms
                                 : NAN;
        missing |= isnan(ms[l]);
    }
    return missing ? -1 : 0;
}

/* What the basis needs besides the history: the step times (steps) or
 * the down intervals (time). */
typedef struct gp_inputs {
    const double *ms;      /* basis steps: each learner's mean step time */
    const hx_interval *iv; /* basis time: hx_down_intervals */
    size_t niv;
    int np; /* fragments */
} gp_inputs;

/* Useful learner-ms in [a, b) by the entry's basis; merged inner steps
 * added to *steps (basis steps). NAN when out of memory. */
static double phase_useful(const gp_params *p, const hyp_history *h, const gp_inputs *in, int64_t a,
                           int64_t b, double *steps)
{
    if (p->time_basis)
        return useful_time_ms(h, in->iv, in->niv, in->np, a, b);
    return useful_ms(h, in->ms, in->np, a, b, steps);
}

/* min_rel: goodput after the reference phase (first join .. first fault, or
 * first join + ref_s) over goodput in it. */
static void measure_relative(const gp_params *p, const hyp_history *h, const gp_inputs *in, int64_t a,
                             int64_t end, gp_figure *f)
{
    int m = hx_learners(h);
    int64_t ref_end = INT64_MAX;
    if (p->has_ref_s) {
        ref_end = a + (int64_t)(p->ref_s * 1000.0);
    } else {
        /* fault-free: it ends before the first fault could have begun on
         * the syncer's clock (the fault's start is an agent's time) */
        for (size_t i = 0; i < hx_nfaults(h); i++) {
            int64_t fs = hx_fault_start(hx_fault(h, i));
            if (fs >= 0)
                fs -= hx_fault_err(hx_fault(h, i)) + hx_err_max(h);
            if (fs >= 0 && fs < ref_end)
                ref_end = fs;
        }
    }
    if (ref_end == INT64_MAX || ref_end - a < 1000 || end - ref_end < 1000) {
        snprintf(
            f->none, sizeof f->none,
            "min_rel needs a fault-free reference phase of >= 1 s after the first join and >= 1 s after it "
            "(reference %.1f s, rest %.1f s; set ref_s or start the faults later)",
            ref_end == INT64_MAX ? 0.0 : (ref_end - a) / 1000.0,
            ref_end == INT64_MAX ? 0.0 : (end - ref_end) / 1000.0);
        return;
    }
    f->ref_ms = ref_end - a;
    f->g_ref = phase_useful(p, h, in, a, ref_end, &f->s_ref) / ((double)m * (double)(ref_end - a));
    f->g_rest =
        phase_useful(p, h, in, ref_end, INT64_MAX, &f->s_rest) / ((double)m * (double)(end - ref_end));
    if (!(f->g_ref > 0)) {
        snprintf(f->none, sizeof f->none,
                 "no merged progress in the reference phase (first %.1f s after the first join)",
                 (ref_end - a) / 1000.0);
        return;
    }
    f->g = f->g_rest / f->g_ref;
}

/* Goodput = useful learner-time / allocated learner-time. With min_rel the
 * figure is relative to the same run, so that what a 2-core box or a CPU
 * hog costs every learner alike (a machine's capacity, not the faults)
 * cancels out. */
static void gp_measure(const gp_params *p, const hyp_history *h, gp_figure *f)
{
    memset(f, 0, sizeof *f);
    f->g = NAN;
    int np = hx_fragment_count(h);
    int m = hx_learners(h);
    double *ms = calloc((size_t)m, sizeof(double)), *ms_n = calloc((size_t)m, sizeof(double));
    if (!ms || !ms_n) {
        free(ms), free(ms_n);
        snprintf(f->none, sizeof f->none, "out of memory");
        return;
    }
    int64_t first_join;
    int missing_ms = step_times(p, h, ms, ms_n, &first_join) < 0 && !p->time_basis;
    free(ms_n);
    gp_inputs in = {.ms = ms, .np = np};
    hx_interval *iv = p->time_basis ? hx_down_intervals(h, &in.niv) : NULL;
    in.iv = iv;
    double start_c;
    int64_t start = hyp_history_counter(h, HYP_C_START_MONO, &start_c) ? (int64_t)start_c : first_join;
    int64_t end = hx_end(h);
    size_t i0 = 0;
    if (p->time_basis && !iv)
        snprintf(f->none, sizeof f->none, "out of memory");
    else if (p->time_basis && !hx_next_event(h, "contribution", &i0))
        /* ddp: its steps all wait for every learner, which this basis cannot see */
        snprintf(f->none, sizeof f->none,
                 "basis \"time\" needs contribution events (decoupled or diloco); this run has none");
    else if (start < 0 || end <= start)
        snprintf(f->none, sizeof f->none, "no run span (no join event and no start counter)");
    else if (missing_ms)
        snprintf(f->none, sizeof f->none, "no step time: no heartbeat step_ms and no step_ms param");
    else if (p->has_min_rel)
        measure_relative(p, h, &in, first_join >= 0 ? first_join : start, end, f);
    else {
        f->useful_ms = phase_useful(p, h, &in, INT64_MIN, INT64_MAX, &f->steps);
        f->alloc_ms = (double)m * (double)(end - start);
        f->span_ms = end - start;
        f->g = f->useful_ms / f->alloc_ms;
    }
    free(iv);
    free(ms);
}

static void gp_judge(const gp_params *p, const gp_figure *f, const hyp_history *h, hyp_verdict *v)
{
    double thr = p->has_min_rel ? p->min_rel : p->min;
    int m = hx_learners(h);
    if (f->none[0]) {
        hyp_verdict_set(v, HYP_ERROR, NAN, ">=", thr, "ratio", "%s", f->none);
        return;
    }
    if (!p->has_min_rel && p->time_basis) {
        hyp_verdict_set(v, f->g >= p->min ? HYP_PASS : HYP_FAIL, f->g, ">=", p->min, "ratio",
                        "goodput %.3f: %.1f learner-s covered by merged contributions of %.1f learner-s "
                        "allocated (%d learners x %.1fs)",
                        f->g, f->useful_ms / 1000.0, f->alloc_ms / 1000.0, m, f->span_ms / 1000.0);
        return;
    }
    if (!p->has_min_rel) {
        hyp_verdict_set(v, f->g >= p->min ? HYP_PASS : HYP_FAIL, f->g, ">=", p->min, "ratio",
                        "goodput %.3f: %.1f merged inner steps = %.1f learner-s useful of %.1f learner-s "
                        "allocated (%d learners x %.1fs)",
                        f->g, f->steps, f->useful_ms / 1000.0, f->alloc_ms / 1000.0, m, f->span_ms / 1000.0);
        return;
    }
    char basis[96] = "basis time";
    if (!p->time_basis)
        snprintf(basis, sizeof basis, "%.1f and %.1f merged inner steps", f->s_rest, f->s_ref);
    hyp_verdict_set(
        v, f->g >= thr ? HYP_PASS : HYP_FAIL, f->g, ">=", thr, "ratio",
        "goodput %.3f after the reference phase over %.3f in it (%.1f s fault-free from the first "
        "join; %s; %d learners)",
        f->g_rest, f->g_ref, f->ref_ms / 1000.0, basis, m);
}

static void gp_eval(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    gp_figure f;
    gp_measure(ctx, h, &f);
    gp_judge(ctx, &f, h, v);
}

/* The goodput ratio (absolute without params); NAN when there is none. */
static double gp_figure_of(const void *ctx, const hyp_history *h)
{
    gp_params dflt = {0};
    if (!ctx)
        param_defaults(gp_params_def, &dflt);
    gp_figure f;
    gp_measure(ctx ? ctx : &dflt, h, &f);
    return f.none[0] ? NAN : f.g;
}

const hypothesis hyp_goodput = {
    .name = "goodput",
    .summary =
        "useful learner-time / allocated learner-time >= min (useful = merged inner steps x step time, "
        "or the learner-time covered by merged contributions)",
    .params = gp_params_def,
    .params_size = sizeof(gp_params),
    .check = gp_check,
    .rules = gp_rules,
    .schema_rules = gp_schema_rules,
    .eval = gp_eval,
    .measure = gp_figure_of,
};
