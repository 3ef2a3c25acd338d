/* loss_target.c - the final eval loss (or the lowest one within by_s or
 * by by_tokens merged tokens) is <= max, <= the first eval x max_rel, or
 * <= control x (1 + tol). Formula: docs/experiments.md "loss_target". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/hypotheses/hyp_kind.h"

typedef struct lt_params {
    int has_max;
    double max; /* nats: absolute target */
    int has_max_rel;
    double max_rel; /* ratio to the run's first eval loss */
    int has_tol;
    double tol; /* rel over the control loss (default 0.10) */
    int has_control;
    double control; /* nats: the control loss (else the runner's control run) */
    int has_by_s;
    double by_s;       /* s after the start: judge the lowest eval loss within it */
    int64_t by_tokens; /* merged tokens: judge the lowest eval loss by then (0 = none) */
} lt_params;

typedef struct lt_figure {
    double first;        /* nats: the first finite eval loss (NAN none) */
    int has_control;     /* the runner's control-run counter is set */
    double control;      /* nats: that counter */
    size_t n;            /* finite eval losses considered */
    double best;         /* nats: the lowest within by_s (INFINITY none) */
    double last;         /* nats: the last eval loss considered (NAN: it was not finite) */
    int reached;         /* by_tokens: an eval covered by_tokens merged tokens */
    int64_t last_tokens; /* by_tokens: merged tokens of the last eval considered */
} lt_figure;

/* Every key an entry may have. */
static const char *const lt_keys[] = {"hypothesis", "name", "max",       "max_rel", "tol",
                                      "control",    "by_s", "by_tokens", NULL};

static void lt_parse(const json_t *s, const char *path, int m, jv_diag *d, void **ctx)
{
    (void)m;
    lt_params *p = *ctx = calloc(1, sizeof *p);
    if (!p)
        return;
    p->tol = 0.10;
    p->has_max = jv_get_number(d, path, s, "max", 0, 0.0, 1e6, "a loss in nats", &p->max) == 1;
    p->has_max_rel = jv_get_number(d, path, s, "max_rel", 0, 1e-6, 10.0, "a ratio to the first eval loss",
                                   &p->max_rel) == 1;
    jv_get_int(d, path, s, "by_tokens", 0, 1, INT64_MAX, "a number of merged tokens", &p->by_tokens);
    p->has_tol = jv_get_number(d, path, s, "tol", 0, 0.0, 1e6, "a relative tolerance", &p->tol) == 1;
    p->has_control = jv_get_number(d, path, s, "control", 0, 0.0, 1e6, "a loss in nats", &p->control) == 1;
    p->has_by_s = jv_get_number(d, path, s, "by_s", 0, 1e-3, 1e7, "seconds", &p->by_s) == 1;
    int nmax = !!json_object_get(s, "max"), ntol = !!json_object_get(s, "tol");
    int nrel = !!json_object_get(s, "max_rel");
    if (nmax + ntol + nrel != 1)
        jv_diag_add(d, path,
                    "expected exactly one of max (absolute), max_rel (relative to the run's first eval) or "
                    "tol (relative to a control run), got %d",
                    nmax + ntol + nrel);
    if (json_object_get(s, "by_s") && json_object_get(s, "by_tokens"))
        jv_diag_add(d, path, "expected at most one of by_s and by_tokens, got both");
    if (json_object_get(s, "control") && !ntol)
        jv_diag_add(d, path, "expected control only together with tol");
}

static void lt_measure(const lt_params *p, const hyp_history *h, lt_figure *f)
{
    memset(f, 0, sizeof *f);
    f->first = f->last = NAN;
    f->best = INFINITY;
    f->has_control = hyp_history_counter(h, HYP_C_CONTROL_LOSS, &f->control);
    const json_t *e;
    for (size_t i = 0; isnan(f->first) && (e = hx_next_event(h, "eval", &i));)
        if (!hx_jloss(e, "loss", &f->first))
            f->first = NAN;
    int64_t deadline = hx_start(h) + (int64_t)(p->by_s * 1000.0);
    for (size_t i = 0; !f->reached && (e = hx_next_event(h, "eval", &i));) {
        double loss;
        if (p->by_tokens > 0) {
            f->last_tokens = hx_jint(e, "tokens", 0);
            f->reached = f->last_tokens >= p->by_tokens;
        }
        if (!hx_jloss(e, "loss", &loss)) {
            f->last = NAN;
            continue;
        }
        f->n++;
        f->last = loss;
        /* by_s counts from the run start (the harness's clock): an eval (the
         * syncer's) counts when it is certainly before the deadline */
        if ((!p->has_by_s || hx_ev_t(e) + hx_ev_err(e) <= deadline) && loss < f->best)
            f->best = loss;
    }
}

static void lt_judge(const lt_params *p, const lt_figure *f, hyp_verdict *v)
{
    double thr = p->max;
    char form[96] = "";
    if (p->has_max_rel) {
        /* relative to the same run: the first eval is the untrained model */
        if (isnan(f->first)) {
            hyp_verdict_set(v, HYP_ERROR, NAN, "<=", NAN, "nats",
                            "max_rel target but no finite eval loss in the history");
            return;
        }
        thr = f->first * p->max_rel;
        snprintf(form, sizeof form, ", first eval %.4f x max_rel %g", f->first, p->max_rel);
    } else if (!p->has_max) {
        double control = p->control;
        if (!p->has_control && !f->has_control) {
            hyp_verdict_set(v, HYP_ERROR, NAN, "<=", NAN, "nats",
                            "relative target but no control loss (param control or "
                            "the runner's control run)");
            return;
        }
        if (!p->has_control)
            control = f->control;
        thr = control * (1.0 + p->tol);
        snprintf(form, sizeof form, ", control x (1 + tol)");
    }
    double best = f->best, last = f->last;
    if (f->n == 0) {
        hyp_verdict_set(v, HYP_ERROR, NAN, "<=", thr, "nats", "no finite eval loss in the history");
        return;
    }
    if (p->by_tokens > 0) {
        if (!f->reached && best > thr) {
            hyp_verdict_set(v, HYP_ERROR, NAN, "<=", thr, "nats",
                            "run ended before an eval covered %lld merged tokens (the last covered %lld)",
                            (long long)p->by_tokens, (long long)f->last_tokens);
            return;
        }
        hyp_verdict_set(v, best <= thr ? HYP_PASS : HYP_FAIL, best, "<=", thr, "nats",
                        "lowest eval loss by %lld merged tokens %.4f (target <= %.4f%s)%s",
                        (long long)p->by_tokens, best, thr, form,
                        f->reached ? "" : "; reached before that many tokens");
        return;
    }
    if (p->has_by_s) {
        if (isinf(best)) {
            hyp_verdict_set(v, HYP_FAIL, NAN, "<=", thr, "nats", "no eval within %gs of the start", p->by_s);
            return;
        }
        hyp_verdict_set(v, best <= thr ? HYP_PASS : HYP_FAIL, best, "<=", thr, "nats",
                        "lowest eval loss within %gs of the start %.4f (target <= %.4f%s)", p->by_s, best,
                        thr, form);
        return;
    }
    if (isnan(last)) {
        hyp_verdict_set(v, HYP_FAIL, NAN, "<=", thr, "nats", "the final eval loss is not finite");
        return;
    }
    hyp_verdict_set(v, last <= thr ? HYP_PASS : HYP_FAIL, last, "<=", thr, "nats",
                    "final eval loss %.4f (target <= %.4f%s)", last, thr, form);
}

static void lt_eval(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    lt_figure f;
    lt_measure(ctx, h, &f);
    lt_judge(ctx, &f, v);
}

/* The loss judged: the lowest by by_tokens / within by_s, else the final
 * one; NAN when there is none. Without params: the final eval loss. */
static double lt_figure_of(const void *ctx, const hyp_history *h)
{
    static const lt_params dflt = {.tol = 0.10};
    const lt_params *p = ctx ? ctx : &dflt;
    lt_figure f;
    lt_measure(p, h, &f);
    if (f.n == 0)
        return NAN;
    if (p->by_tokens > 0 || p->has_by_s)
        return isinf(f.best) ? NAN : f.best;
    return f.last;
}

/* by_s from the run's start, or by_tokens merged tokens; none for the
 * final loss. */
static int lt_window(const json_t *spec, hz_window *w)
{
    if (json_object_get(spec, "by_s")) {
        w->key = "by_s";
        w->from_start = 1;
        w->len_ms = (int64_t)(hyp_spec_num(spec, "by_s") * 1000.0);
        return 1;
    }
    if (json_object_get(spec, "by_tokens")) {
        w->key = "by_tokens";
        w->tokens = (int64_t)hyp_spec_num(spec, "by_tokens");
        return 1;
    }
    return 0;
}

const hypothesis hyp_loss_target = {
    .name = "loss_target",
    .summary = "the final eval loss (or the lowest one within by_s) is <= max, or <= control x (1 + tol)",
    .params = "max (nats) | tol (rel, with control in nats or the runner's control run); by_s (s, optional)",
    .keys = lt_keys,
    .parse = lt_parse,
    .eval = lt_eval,
    .measure = lt_figure_of,
    .free = free,
    .window = lt_window,
};
