/* reintegration.c - after a fault that took it down, a learner joins with a
 * new incarnation within join_s of the heal, pulls every fragment at the
 * current version before contributing, has >= merged contributions merged
 * within merged_s, and its train loss is within tol of the others' median.
 * Formula: docs/experiments.md "reintegration". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/fault_kinds.h"
#include "harness/hypotheses/hyp_kind.h"

typedef struct ri_params {
    int64_t learner; /* the learner that was taken down */
    double join_s;   /* s after the heal by which it joins again */
    int64_t merged;  /* contributions merged (default 1) */
    double merged_s; /* s after the join within which they are merged */
    double tol;      /* rel: its train loss vs the others' median (default 0.10) */
    int pull_all;    /* require pulls of every fragment (default 1) */
} ri_params;

typedef struct ri_figure {
    const json_t *fault; /* the learner's last down-kind fault that ran (NULL none) */
    int restart;         /* it ends the process: a new incarnation must join */
    int64_t prev_inc;    /* incarnation before the fault */
    int joined;          /* restart: it joined again (else the fault's heal counts) */
    int64_t inc;         /* incarnation after the fault */
    int64_t join_seq;    /* seq of that join, -1 when none was needed */
    int64_t t_join;      /* ms of the join (or the heal) */
    int64_t healed;      /* ms the fault healed */
    int64_t join_err;    /* ms: the clocks' error of t_join against healed (0 when t_join is the heal) */
    int64_t win_err;     /* ms: the clocks' error of the window's edges against the syncer's events */
    const json_t *edge;  /* restart: a join within the bound of the fault's start (hx_rejoin), NULL none */
    int64_t edge_err;    /* ms: that bound */
    int64_t merged_edge; /* merges left out only because they lie within win_err of the window's edges */
    int nfrag;           /* fragments (pull_all) */
    int missing;         /* fragments not pulled at the current version before the first contribution */
    int first_missing;   /* the first of them, -1 none */
    int64_t merged;      /* contributions merged within merged_s of the join */
    double mine;         /* nats: its last train loss after the join (NAN none) */
    double others;       /* nats: the median of the others' last (NAN none) */
    size_t nothers;      /* learners in that median */
} ri_figure;

static const param_def ri_params_def[] = {
    {.name = "learner",
     .type = PARAM_LEARNER,
     .flags = PARAM_REQUIRED,
     .doc = "the learner that was taken down",
     .offset = PARAM_AT(ri_params, learner)},
    {.name = "join_s",
     .type = PARAM_SECONDS,
     .flags = PARAM_REQUIRED,
     .doc = "after the heal, by when it joins again",
     .offset = PARAM_AT(ri_params, join_s)},
    {.name = "merged",
     .type = PARAM_INT,
     .flags = PARAM_CAP,
     .min = 1,
     .max = 1000000,
     .def = 1,
     .what = "a number of merged contributions",
     .unit = "contributions",
     .doc = "its contributions merged after the join",
     .offset = PARAM_AT(ri_params, merged)},
    {.name = "merged_s",
     .type = PARAM_SECONDS,
     .flags = PARAM_REQUIRED,
     .doc = "after the join, within which they are merged",
     .offset = PARAM_AT(ri_params, merged_s)},
    {.name = "tol",
     .type = PARAM_NUMBER,
     .flags = PARAM_CAP,
     .min = 0,
     .max = 1e6,
     .def = 0.1,
     .what = "a relative tolerance",
     .unit = "rel",
     .doc = "its train loss against the others' median",
     .offset = PARAM_AT(ri_params, tol)},
    {.name = "pull_all",
     .type = PARAM_BOOL,
     .def = 1,
     .doc = "it pulls every fragment at the current version before contributing",
     .offset = PARAM_AT(ri_params, pull_all)},
    {0},
};

static double median(double *x, size_t n)
{
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && x[j - 1] > x[j]; j--) {
            double t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Fragments the rejoined incarnation did not pull at the version current at
 * its join before its first contribution. */
static void measure_pulls(const hyp_history *h, int l, ri_figure *f)
{
    f->nfrag = hx_fragment_count(h);
    int64_t first_contrib = INT64_MAX;
    const json_t *e;
    for (size_t i = 0; (e = hx_next_event(h, "contribution", &i));)
        if (hx_jint(e, "learner", -1) == l && hx_jint(e, "incarnation", -1) == f->inc &&
            hx_ev_seq(e) < first_contrib)
            first_contrib = hx_ev_seq(e);
    for (int k = 0; k < f->nfrag; k++) {
        int64_t cur = 0;
        for (size_t i = 0; i < hx_nevents(h) && hx_ev_seq(hx_event(h, i)) < f->join_seq; i++) {
            e = hx_event(h, i);
            if (hx_ev_is(e, "start") && json_array_size(json_object_get(e, "versions")) > (size_t)k)
                cur = json_integer_value(json_array_get(json_object_get(e, "versions"), (size_t)k));
            if (hx_ev_is(e, "merge") && hx_jint(e, "fragment", -2) == k)
                cur = hx_jint(e, "version", cur);
        }
        int ok = 0;
        for (size_t i = 0; !ok && (e = hx_next_event(h, "pull", &i));)
            ok = hx_jint(e, "learner", -1) == l && hx_jint(e, "incarnation", -1) == f->inc &&
                 hx_jint(e, "fragment", -1) == k && hx_ev_seq(e) > f->join_seq &&
                 hx_ev_seq(e) < first_contrib && hx_jint(e, "version", -1) >= cur;
        if (!ok) {
            if (f->missing == 0)
                f->first_missing = k;
            f->missing++;
        }
    }
}

/* Heartbeats per learner whose train losses are averaged: a heartbeat
 * carries one step's loss on one batch, which swings +-20 % between
 * neighbouring heartbeats (MLP, 16 tokens per step), so one of them against
 * one of the others' is a coin flip near any tolerance. */
#define RI_LOSS_WINDOW 10

/* Train loss after the join: the mean of its last RI_LOSS_WINDOW
 * heartbeats beside the median of the others' means over theirs. */
static void measure_train_loss(const hyp_history *h, int l, ri_figure *f)
{
    int m = hx_learners(h);
    double *others = calloc((size_t)m, sizeof(double));
    double *ring = calloc((size_t)m * RI_LOSS_WINDOW, sizeof(double));
    int *seen = calloc((size_t)m, sizeof(int));
    if (others && seen && ring) {
        const json_t *e;
        for (size_t i = 0; (e = hx_next_event(h, "heartbeat", &i));) {
            double loss;
            int64_t who = hx_jint(e, "learner", -1);
            if (who < 0 || who >= m || hx_ev_t(e) < f->t_join + f->win_err ||
                !hx_jloss(e, "train_loss", &loss))
                continue;
            if (who == l && hx_jint(e, "incarnation", -1) != f->inc)
                continue;
            ring[who * RI_LOSS_WINDOW + seen[who] % RI_LOSS_WINDOW] = loss;
            seen[who]++;
        }
        for (int k = 0; k < m; k++) {
            if (!seen[k])
                continue;
            int n = seen[k] < RI_LOSS_WINDOW ? seen[k] : RI_LOSS_WINDOW;
            double sum = 0;
            for (int j = 0; j < n; j++)
                sum += ring[k * RI_LOSS_WINDOW + j];
            if (k == l)
                f->mine = sum / n;
            else
                others[f->nothers++] = sum / n;
        }
        if (f->nothers > 0)
            f->others = median(others, f->nothers);
    }
    free(others);
    free(ring);
    free(seen);
}

static void ri_measure(const ri_params *p, const hyp_history *h, ri_figure *f)
{
    memset(f, 0, sizeof *f);
    f->first_missing = -1;
    f->join_seq = -1;
    f->mine = f->others = NAN;
    int l = (int)p->learner;
    for (size_t i = 0; i < hx_nfaults(h); i++)
        if (hx_fault_learner(h, i) == l && hx_kind_takes_unit_down(hx_jstr(hx_fault(h, i), "type")) &&
            hx_fault_ran(hx_fault(h, i)))
            f->fault = hx_fault(h, i);
    if (!f->fault)
        return;
    f->healed = hx_fault_end(f->fault);
    f->restart = hx_kind_restarts_unit(hx_jstr(f->fault, "type"));
    hx_rejoin_info ri;
    hx_rejoin(h, l, f->fault, &ri);
    f->prev_inc = f->inc = ri.prev_inc;
    f->edge = ri.edge;
    f->edge_err = ri.edge_err;
    f->t_join = f->healed;
    if (f->restart) {
        if (!ri.join)
            return;
        f->joined = 1;
        f->inc = hx_jint(ri.join, "incarnation", 0);
        f->join_seq = hx_ev_seq(ri.join);
        f->t_join = hx_ev_t(ri.join);
        f->join_err = hx_cross_err(ri.join, f->fault);
        if (p->pull_all)
            measure_pulls(h, l, f);
    } else {
        /* the window opens at the heal, an agent's time: the syncer's events
         * count in it only when certainly inside */
        f->win_err = hx_fault_err(f->fault) + hx_err_max(h);
    }
    int64_t until = f->t_join + (int64_t)(p->merged_s * 1000.0);
    const json_t *e;
    for (size_t i = 0; (e = hx_next_event(h, "merge", &i));) {
        if (hx_ev_seq(e) <= f->join_seq || !hx_participated(e, l, f->inc))
            continue;
        int64_t t = hx_ev_t(e);
        if (t >= f->t_join + f->win_err && t <= until - f->win_err)
            f->merged++;
        else if (t >= f->t_join - f->win_err && t <= until + f->win_err)
            f->merged_edge++;
    }
    measure_train_loss(h, l, f);
}

static void ri_judge(const ri_params *p, const ri_figure *f, hyp_verdict *v)
{
    int l = (int)p->learner;
    if (!f->fault) {
        hyp_verdict_set(v, HYP_ERROR, NAN, ">=", (double)p->merged, "merges",
                        "no kill/preempt/pause/partition/blackhole fault on learner %d in the history", l);
        return;
    }
    if (f->restart && !f->joined) {
        char edge[160] = "";
        if (f->edge)
            snprintf(edge, sizeof edge,
                     "; its join of incarnation %lld lies within the clocks' error bound (%lld ms) of the "
                     "fault's start, so it counts as before it",
                     (long long)hx_jint(f->edge, "incarnation", 0), (long long)f->edge_err);
        hyp_verdict_set(v, HYP_FAIL, 0, ">=", (double)p->merged, "merges",
                        "learner %d never joined again after the %s fault (incarnation stayed %lld)%s", l,
                        hx_jstr(f->fault, "type"), (long long)f->prev_inc, edge);
        return;
    }
    char why[448] = "";
    /* the join (the syncer's clock) against the heal (the agent's): late
     * unless certainly within join_s */
    int64_t limit = (int64_t)(p->join_s * 1000.0);
    if (f->restart && f->t_join + f->join_err - f->healed > limit) {
        if (f->t_join - f->healed <= limit)
            hyp_note(why, sizeof(why),
                     "joined %.3fs after the fault healed: within the limit of %gs only if the clocks' error "
                     "bound (%lld ms) is discounted; ",
                     (f->t_join - f->healed) / 1000.0, p->join_s, (long long)f->join_err);
        else
            hyp_note(why, sizeof(why), "joined %.1fs after the fault healed (limit %gs); ",
                     (f->t_join - f->healed) / 1000.0, p->join_s);
    }
    if (f->missing)
        hyp_note(why, sizeof(why),
                 "%d of %d fragments not pulled at the current version before its first "
                 "contribution (first: %d); ",
                 f->missing, f->nfrag, f->first_missing);
    if (f->merged < p->merged && f->merged_edge)
        hyp_note(
            why, sizeof(why),
            "%lld contributions merged within %gs of the heal (need %lld; %lld more lie within the clocks' "
            "error bound of %lld ms of the window's edges and are not counted); ",
            (long long)f->merged, p->merged_s, (long long)p->merged, (long long)f->merged_edge,
            (long long)f->win_err);
    else if (f->merged < p->merged)
        hyp_note(why, sizeof(why), "%lld contributions merged within %gs of the join (need %lld); ",
                 (long long)f->merged, p->merged_s, (long long)p->merged);
    char lossnote[128] = "";
    if (!isnan(f->mine) && f->nothers > 0) {
        double o = f->others;
        double rel = o > 0 ? fabs(f->mine - o) / o : 0.0;
        snprintf(lossnote, sizeof(lossnote), ", train loss %.4f vs others' median %.4f", f->mine, o);
        if (rel > p->tol)
            hyp_note(why, sizeof(why), "train loss %.4f is %.1f%% away from the others' %.4f (tol %.1f%%); ",
                     f->mine, rel * 100.0, o, p->tol * 100.0);
    } else if (isnan(f->mine) && f->nothers > 0) {
        hyp_note(why, sizeof(why), "no heartbeat from learner %d after it rejoined; ", l);
    }
    if (why[0]) {
        hyp_verdict_set(v, HYP_FAIL, (double)f->merged, ">=", (double)p->merged, "merges", "learner %d: %s",
                        l, why);
        return;
    }
    hyp_verdict_set(
        v, HYP_PASS, (double)f->merged, ">=", (double)p->merged, "merges",
        "learner %d rejoined as incarnation %lld %.1fs after the %s fault healed, %lld contributions "
        "merged within %gs%s",
        l, (long long)f->inc, (f->t_join - f->healed) / 1000.0, hx_jstr(f->fault, "type"),
        (long long)f->merged, p->merged_s, lossnote);
}

static void ri_eval(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    ri_figure f;
    ri_measure(ctx, h, &f);
    ri_judge(ctx, &f, v);
}

/* Contributions merged within merged_s of the rejoin; NAN without params
 * (learner and merged_s have no default) or without a fault. */
static double ri_figure_of(const void *ctx, const hyp_history *h)
{
    if (!ctx)
        return NAN;
    ri_figure f;
    ri_measure(ctx, h, &f);
    return !f.fault ? NAN : f.restart && !f.joined ? 0.0 : (double)f.merged;
}

/* Join within join_s of the heal on its learner, merges within merged_s
 * of the join. */
static int ri_window(const json_t *spec, hz_window *w)
{
    w->key = "merged_s";
    w->learner = (int)json_integer_value(json_object_get(spec, "learner"));
    w->len_ms = (int64_t)((hyp_spec_num(spec, "join_s") + hyp_spec_num(spec, "merged_s")) * 1000.0);
    return 1;
}

const hypothesis hyp_reintegration = {
    .name = "reintegration",
    .summary = "the learner joins with a new incarnation within join_s of the "
               "fault healing, pulls every fragment at the "
               "current version before contributing, has >= merged "
               "contributions merged within merged_s, and its train loss "
               "is within tol of the others' median",
    .params = ri_params_def,
    .params_size = sizeof(ri_params),
    .eval = ri_eval,
    .measure = ri_figure_of,
    .window = ri_window,
};
