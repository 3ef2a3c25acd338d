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

static const param_def lt_params_def[] = {
    {.name = "max",
     .type = PARAM_NUMBER,
     .flags = PARAM_CAP | PARAM_NODEF,
     .min = 0,
     .max = 1e6,
     .what = "a loss in nats",
     .unit = "nats",
     .doc = "absolute target",
     .offset = PARAM_AT(lt_params, max),
     .set_at = PARAM_SET_AT(lt_params, has_max)},
    {.name = "max_rel",
     .type = PARAM_NUMBER,
     .flags = PARAM_NODEF,
     .min = 1e-6,
     .max = 10,
     .what = "a ratio to the first eval loss",
     .unit = "ratio",
     .doc = "target relative to the run's first eval loss (the untrained model)",
     .offset = PARAM_AT(lt_params, max_rel),
     .set_at = PARAM_SET_AT(lt_params, has_max_rel)},
    {.name = "tol",
     .type = PARAM_NUMBER,
     .flags = PARAM_CAP | PARAM_NODEF,
     .min = 0,
     .max = 1e6,
     .def = 0.10,
     .what = "a relative tolerance",
     .unit = "rel",
     .doc = "target relative to a control loss: control x (1 + tol)",
     .offset = PARAM_AT(lt_params, tol),
     .set_at = PARAM_SET_AT(lt_params, has_tol)},
    {.name = "control",
     .type = PARAM_NUMBER,
     .flags = PARAM_CAP,
     .min = 0,
     .max = 1e6,
     .what = "a loss in nats",
     .unit = "nats",
     .def_text = "the runner's control run",
     .doc = "the control loss of a tol target",
     .offset = PARAM_AT(lt_params, control),
     .set_at = PARAM_SET_AT(lt_params, has_control)},
    {.name = "by_s",
     .type = PARAM_SECONDS,
     .flags = PARAM_NODEF,
     .doc = "judge the lowest eval loss within this time of the run's start (wall-clock)",
     .offset = PARAM_AT(lt_params, by_s),
     .set_at = PARAM_SET_AT(lt_params, has_by_s)},
    {.name = "by_tokens",
     .type = PARAM_INT,
     .flags = PARAM_NODEF,
     .min = 1,
     .max = INFINITY,
     .what = "a number of merged tokens",
     .unit = "tokens",
     .doc = "judge the lowest eval loss up to the first eval that covered this many merged tokens",
     .offset = PARAM_AT(lt_params, by_tokens)},
    {0},
};

/* The rules across params (hypothesis.h: check, rules, schema_rules). */
static void lt_check(const void *ctx, const json_t *s, const char *path, jv_diag *d)
{
    (void)ctx;
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

/* The schema leaves "control only with tol" to chaosloco validate. */
static const char lt_rules[] = "exactly one of `max`, `max_rel` or `tol`; at most one of `by_s` and "
                               "`by_tokens`; `control` only with `tol`";
static const char lt_schema_rules[] =
    "\"oneOf\": [{\"required\": [\"max\"]}, {\"required\": [\"max_rel\"]}, {\"required\": [\"tol\"]}],\n"
    "\"not\": {\"required\": [\"by_s\", \"by_tokens\"]},";

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
    lt_params dflt = {0};
    if (!ctx)
        param_defaults(lt_params_def, &dflt);
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
    .params = lt_params_def,
    .params_size = sizeof(lt_params),
    .check = lt_check,
    .rules = lt_rules,
    .schema_rules = lt_schema_rules,
    .eval = lt_eval,
    .measure = lt_figure_of,
    .window = lt_window,
};
