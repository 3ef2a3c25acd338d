/* loss_continuity.c - every eval loss is finite, none rises more than
 * max_jump_rel over the last one before a fault, and the last one by
 * recover_s after the heal is back at or below reference x (1 + slack_rel).
 * Formula: docs/experiments.md "loss_continuity". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/hypotheses/hyp_kind.h"

typedef struct lc_params {
    double max_jump_rel; /* rel: the largest rise allowed */
    double recover_s;    /* s after the heal by which the loss is back */
    double slack_rel;    /* rel over the reference still counted as back (default 0.02) */
} lc_params;

typedef struct lc_win {
    size_t fault; /* index of the fault record */
    int64_t end;  /* ms the fault healed */
    double ref;   /* nats: the last eval loss at or before the fault's start */
    double peak;  /* nats: the highest eval loss in the window (>= ref) */
    double last;  /* nats: the window's last eval loss (NAN: none) */
    int edge;     /* an eval back at the reference lies within the clocks' error of the window's end */
} lc_win;

typedef struct lc_figure {
    size_t nev;      /* eval events in the history */
    int64_t bad_seq; /* seq of the first non-finite eval loss, -1 none */
    int64_t bad_t;   /* its t_mono_ms */
    lc_win *win;     /* [windows] the fault windows with a reference (new) */
    int windows;     /* entries of win */
    int noref;       /* faults that began before the first eval (skipped) */
    double worst;    /* rel: the largest peak / ref - 1 over the windows (>= 0) */
    int oom;         /* 1 when win could not be allocated */
} lc_figure;

static const param_def lc_params_def[] = {
    {.name = "max_jump_rel",
     .type = PARAM_NUMBER,
     .flags = PARAM_REQUIRED | PARAM_CAP,
     .min = 0,
     .max = 1e6,
     .what = "a relative jump",
     .unit = "rel",
     .doc = "the largest rise of an eval loss over the last one before a fault",
     .offset = PARAM_AT(lc_params, max_jump_rel)},
    {.name = "recover_s",
     .type = PARAM_SECONDS,
     .flags = PARAM_REQUIRED,
     .doc = "after the heal, by when the loss is back",
     .offset = PARAM_AT(lc_params, recover_s)},
    {.name = "slack_rel",
     .type = PARAM_NUMBER,
     .flags = PARAM_CAP,
     .min = 0,
     .max = 1e6,
     .def = 0.02,
     .what = "a relative slack",
     .unit = "rel",
     .doc = "over the reference still counted as back",
     .offset = PARAM_AT(lc_params, slack_rel)},
    {0},
};

/* Each fault window: fault start .. heal + recover_s, measured against the
 * last eval at or before the start. */
static void lc_measure(const lc_params *p, const hyp_history *h, lc_figure *f)
{
    memset(f, 0, sizeof *f);
    f->bad_seq = -1;
    const json_t *e;
    double loss;
    for (size_t i = 0; (e = hx_next_event(h, "eval", &i));) {
        f->nev++;
        if (f->bad_seq < 0 && !hx_jloss(e, "loss", &loss)) {
            f->bad_seq = hx_ev_seq(e);
            f->bad_t = hx_ev_t(e);
        }
    }
    f->win = calloc(hx_nfaults(h) ? hx_nfaults(h) : 1, sizeof *f->win);
    if (!f->win) {
        f->oom = 1;
        return;
    }
    for (size_t k = 0; k < hx_nfaults(h); k++) {
        const json_t *r = hx_fault(h, k);
        if (!hx_fault_ran(r))
            continue;
        int64_t s = hx_fault_start(r), end = hx_fault_end(r);
        int64_t horizon = end + (int64_t)(p->recover_s * 1000.0);
        /* The window's edges are the agent's times, the evals the syncer's:
         * the reference is an eval certainly before the fault, the window
         * holds every eval that may be in it (its peak counts), and the
         * last one must be back certainly by the window's end. */
        double ref = NAN;
        for (size_t i = 0; (e = hx_next_event(h, "eval", &i));)
            if (hx_ev_t(e) + hx_cross_err(e, r) <= s)
                hx_jloss(e, "loss", &ref);
        if (isnan(ref)) {
            f->noref++;
            continue;
        }
        /* Recovered = the last eval of the window (fault start .. heal +
         * recover_s) is back at or below the reference. The last one, not
         * the first after the heal: a run may end before the fault heals,
         * and a loss that never rose has nothing to recover from. */
        lc_win *w = &f->win[f->windows++];
        w->fault = k;
        w->end = end;
        w->ref = w->peak = ref;
        w->last = NAN;
        for (size_t i = 0; (e = hx_next_event(h, "eval", &i));) {
            int64_t err = hx_cross_err(e, r);
            if (!hx_jloss(e, "loss", &loss) || hx_ev_t(e) + err <= s || hx_ev_t(e) > horizon + err)
                continue;
            if (loss > w->peak)
                w->peak = loss;
            if (hx_ev_t(e) + err <= horizon)
                w->last = loss;
            else if (loss <= ref * (1.0 + p->slack_rel))
                w->edge = 1;
        }
        double jump = ref > 0 ? w->peak / ref - 1.0 : 0.0;
        if (jump > f->worst)
            f->worst = jump;
    }
}

static void lc_judge(const lc_params *p, const lc_figure *f, const hyp_history *h, hyp_verdict *v)
{
    char at[48];
    if (f->bad_seq >= 0) {
        hyp_verdict_set(v, HYP_FAIL, NAN, "<=", p->max_jump_rel, "rel",
                        "eval loss is not finite at seq %lld (%s)", (long long)f->bad_seq,
                        hx_fmt_t(h, f->bad_t, at, sizeof at));
        return;
    }
    if (f->nev == 0) {
        hyp_verdict_set(v, HYP_ERROR, NAN, "<=", p->max_jump_rel, "rel", "no eval events in the history");
        return;
    }
    if (f->oom) {
        hyp_verdict_set(v, HYP_ERROR, NAN, "<=", p->max_jump_rel, "rel", "out of memory");
        return;
    }
    for (int i = 0; i < f->windows; i++) {
        const lc_win *w = &f->win[i];
        if (!isnan(w->last) && w->last <= w->ref * (1.0 + p->slack_rel))
            continue;
        const json_t *r = hx_fault(h, w->fault);
        hyp_verdict_set(
            v, HYP_FAIL, f->worst, "<=", p->max_jump_rel, "rel",
            "after the %s fault on learner %d (healed at %s) the eval loss was not back at <= %.4g "
            "(reference %.4g + %.0f%%) by %gs after the heal%s",
            hx_jstr(r, "type"), hx_fault_learner(h, w->fault), hx_fmt_t(h, w->end, at, sizeof at),
            w->ref * (1.0 + p->slack_rel), w->ref, p->slack_rel * 100.0, p->recover_s,
            w->edge ? " (an eval that was back lies within the clocks' error bound of the window's end)"
                    : "");
        return;
    }
    hyp_status st = f->worst <= p->max_jump_rel ? HYP_PASS : HYP_FAIL;
    hyp_verdict_set(
        v, st, f->worst, "<=", p->max_jump_rel, "rel",
        "largest eval-loss rise over the pre-fault reference %.2f%% (limit %.2f%%) across %d fault "
        "window%s, %zu eval losses all finite%s",
        f->worst * 100.0, p->max_jump_rel * 100.0, f->windows, f->windows == 1 ? "" : "s", f->nev,
        f->noref ? "; some faults began before the first eval and were skipped" : "");
}

static void lc_eval(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    lc_figure f;
    lc_measure(ctx, h, &f);
    lc_judge(ctx, &f, h, v);
    free(f.win);
}

/* The largest rise; NAN without recover_s (no default) or with a non-finite eval. */
static double lc_figure_of(const void *ctx, const hyp_history *h)
{
    if (!ctx)
        return NAN;
    lc_figure f;
    lc_measure(ctx, h, &f);
    double x = f.bad_seq >= 0 || f.nev == 0 || f.oom ? NAN : f.worst;
    free(f.win);
    return x;
}

/* Open at the heal of any fault, closed recover_s later. */
static int lc_window(const json_t *spec, hz_window *w)
{
    w->key = "recover_s";
    w->len_ms = (int64_t)(hyp_spec_num(spec, "recover_s") * 1000.0);
    return 1;
}

const hypothesis hyp_loss_continuity = {
    .name = "loss_continuity",
    .summary = "every eval loss is finite, none rises more than max_jump_rel over the last one before a "
               "fault, and the "
               "last one by recover_s after the heal is at or below reference x (1 + slack_rel)",
    .params = lc_params_def,
    .params_size = sizeof(lc_params),
    .eval = lc_eval,
    .measure = lc_figure_of,
    .window = lc_window,
};
