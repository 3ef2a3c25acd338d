/* rejoin_time.c - every learner a fault restarted (kill, preempt) had a
 * contribution merged again within max_s of the heal: the time from its
 * restart to its first merged contribution as a new incarnation. Unlike
 * reintegration it needs no learner id, so it also judges the kills of a
 * chaos schedule. Formula: docs/experiments.md "rejoin_time". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/fault_kinds.h"
#include "harness/hypotheses/hyp_kind.h"

typedef struct rj_params {
    double max_s;    /* s: the longest heal-to-merge time allowed */
    int64_t learner; /* only this learner's faults, -1 = every learner */
} rj_params;

typedef struct rj_figure {
    int faults;         /* restarting faults that ran (on the learner asked for) */
    double worst_s;     /* s: the longest heal-to-first-merge time, its error added (NAN: none rejoined) */
    int64_t worst_err;  /* ms: the clocks' error included in worst_s */
    size_t worst;       /* index of that fault */
    int never;          /* faults after which no contribution was merged */
    size_t first_never; /* index of the first of them */
} rj_figure;

static const param_def rj_params_def[] = {
    {.name = "max_s",
     .type = PARAM_SECONDS,
     .flags = PARAM_REQUIRED,
     .doc = "the longest time from a restart's heal to the learner's first merged contribution",
     .offset = PARAM_AT(rj_params, max_s)},
    {.name = "learner",
     .type = PARAM_LEARNER,
     .def = -1,
     .def_text = "every learner",
     .doc = "only this learner's faults",
     .offset = PARAM_AT(rj_params, learner)},
    {0},
};

/* ms from the fault's heal to the first merge its learner's next
 * incarnation took part in (0 when it came before the heal), with the
 * clocks' error of the merge (the syncer's time) against the heal (the
 * agent's) added in *err: the time is at most ms + *err. -1 when none. */
static int64_t rejoin_ms(const hyp_history *h, int l, const json_t *fault, int64_t *err)
{
    int64_t healed = hx_fault_end(fault);
    hx_rejoin_info ri;
    hx_rejoin(h, l, fault, &ri);
    if (!ri.join)
        return -1;
    int64_t inc = hx_jint(ri.join, "incarnation", 0), seq = hx_ev_seq(ri.join);
    const json_t *e;
    for (size_t i = 0; (e = hx_next_event(h, "merge", &i));)
        if (hx_ev_seq(e) > seq && hx_participated(e, l, inc)) {
            *err = hx_cross_err(e, fault);
            return hx_ev_t(e) > healed ? hx_ev_t(e) - healed : 0;
        }
    return -1;
}

static void rj_measure(const rj_params *p, const hyp_history *h, rj_figure *f)
{
    memset(f, 0, sizeof *f);
    f->worst_s = NAN;
    for (size_t i = 0; i < hx_nfaults(h); i++) {
        const json_t *r = hx_fault(h, i);
        int l = hx_fault_learner(h, i);
        if (!hx_kind_restarts_unit(hx_jstr(r, "type")) || !hx_fault_ran(r) ||
            (p->learner >= 0 && l != p->learner))
            continue;
        f->faults++;
        int64_t err = 0, ms = rejoin_ms(h, l, r, &err);
        if (ms < 0) {
            if (f->never++ == 0)
                f->first_never = i;
            continue;
        }
        /* judged by the upper end of what the clocks allow */
        if (isnan(f->worst_s) || (ms + err) / 1000.0 > f->worst_s) {
            f->worst_s = (ms + err) / 1000.0;
            f->worst_err = err;
            f->worst = i;
        }
    }
}

static void rj_judge(const rj_params *p, const rj_figure *f, const hyp_history *h, hyp_verdict *v)
{
    char at[48];
    if (f->faults == 0) {
        hyp_verdict_set(v, HYP_ERROR, NAN, "<=", p->max_s, "s", "no kill/preempt fault%s in the history",
                        p->learner >= 0 ? " on that learner" : "");
        return;
    }
    if (f->never) {
        const json_t *r = hx_fault(h, f->first_never);
        hyp_verdict_set(
            v, HYP_FAIL, f->worst_s, "<=", p->max_s, "s",
            "%d of %d restarted learners never had a contribution merged again; first: learner %d "
            "after the %s fault healed at %s",
            f->never, f->faults, hx_fault_learner(h, f->first_never), hx_jstr(r, "type"),
            hx_fmt_t(h, hx_fault_end(r), at, sizeof at));
        return;
    }
    const json_t *r = hx_fault(h, f->worst);
    char edge[160] = "";
    if (f->worst_s > p->max_s && f->worst_s - f->worst_err / 1000.0 <= p->max_s)
        snprintf(edge, sizeof edge, "; within max_s only if the clocks' error bound (%lld ms) is discounted",
                 (long long)f->worst_err);
    hyp_verdict_set(
        v, f->worst_s <= p->max_s ? HYP_PASS : HYP_FAIL, f->worst_s, "<=", p->max_s, "s",
        "longest time from a restart to the first merged contribution %.*fs (learner %d after the %s "
        "fault healed at %s; %d restart%s%s)",
        edge[0] ? 3 : 1, f->worst_s, hx_fault_learner(h, f->worst), hx_jstr(r, "type"),
        hx_fmt_t(h, hx_fault_end(r), at, sizeof at), f->faults, f->faults == 1 ? "" : "s", edge);
}

static void rj_eval(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    rj_figure f;
    rj_measure(ctx, h, &f);
    rj_judge(ctx, &f, h, v);
}

/* The longest heal-to-merge time in s; NAN when no restarted learner
 * had a contribution merged again. */
static double rj_figure_of(const void *ctx, const hyp_history *h)
{
    rj_params dflt = {0};
    if (!ctx)
        param_defaults(rj_params_def, &dflt);
    rj_figure f;
    rj_measure(ctx ? ctx : &dflt, h, &f);
    return f.worst_s;
}

/* Open at the last heal (of the learner asked for, else of any fault),
 * closed max_s later. */
static int rj_window(const json_t *spec, hz_window *w)
{
    json_t *l = json_object_get(spec, "learner");
    w->key = "max_s";
    w->learner = json_is_integer(l) ? (int)json_integer_value(l) : -1;
    w->len_ms = (int64_t)(hyp_spec_num(spec, "max_s") * 1000.0);
    return 1;
}

const hypothesis hyp_rejoin_time = {
    .name = "rejoin_time",
    .summary =
        "every learner a kill/preempt restarted had a contribution merged again within max_s of the heal",
    .params = rj_params_def,
    .params_size = sizeof(rj_params),
    .eval = rj_eval,
    .measure = rj_figure_of,
    .window = rj_window,
};
