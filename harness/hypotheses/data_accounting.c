/* data_accounting.c - every learner trained its whole shard (no step
 * skipped, final step >= steps - slack_steps); re-trained tokens are
 * counted and reported. Formula: docs/experiments.md "data_accounting". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/hypotheses/hyp_kind.h"

typedef struct da_params {
    int64_t steps;       /* inner steps per learner, 0 = the runner's counter */
    int64_t slack_steps; /* tolerated shortfall of the final step */
    int has_max_retrained;
    double max_retrained; /* tokens: re-trained tokens allowed */
} da_params;

typedef struct da_figure {
    int64_t target;     /* steps per learner (0: none known, only gaps checked) */
    int64_t lost_steps; /* steps never trained */
    int64_t re_steps;   /* steps trained twice after restarts */
    double lost_tok;    /* tokens never trained */
    double re_tok;      /* tokens trained twice */
    int worst;          /* the first learner that lost steps (or never joined), -1 none */
} da_figure;

static const param_def da_params_def[] = {
    {.name = "steps",
     .type = PARAM_INT,
     .min = 1,
     .max = INFINITY,
     .def = 0,
     .def_text = "the run's training.steps",
     .what = "inner steps per learner",
     .unit = "steps",
     .doc = "the inner steps each learner trains",
     .offset = PARAM_AT(da_params, steps)},
    {.name = "slack_steps",
     .type = PARAM_INT,
     .min = 0,
     .max = INFINITY,
     .def = 0,
     .what = "inner steps",
     .unit = "steps",
     .doc = "the tolerated shortfall of a learner's final step",
     .offset = PARAM_AT(da_params, slack_steps)},
    {.name = "max_retrained_tokens",
     .type = PARAM_NUMBER,
     .flags = PARAM_CAP | PARAM_NODEF,
     .min = 0,
     .max = 1e18,
     .what = "tokens",
     .unit = "tokens",
     .doc = "re-trained tokens allowed (absent: they are only counted and reported)",
     .offset = PARAM_AT(da_params, max_retrained),
     .set_at = PARAM_SET_AT(da_params, has_max_retrained)},
    {0},
};

/* One learner: walk its incarnations in join order ([resumed_step, highest
 * step it reported)) and add its lost and re-trained steps and tokens. */
static void measure_learner(const da_params *p, const hyp_history *h, int l, da_figure *f)
{
    int64_t covered = 0, tok_last = 0, step_last = 0;
    int64_t inc = -1, inc_from = 0, inc_top = 0;
    int joined = 0;
    int64_t l_lost = 0, l_re = 0;
    for (size_t i = 0; i <= hx_nevents(h); i++) {
        const json_t *e = hx_event(h, i); /* NULL past the end: close the last incarnation */
        if (e && hx_jint(e, "learner", -1) != l)
            continue;
        int is_join = e && hx_ev_is(e, "join");
        if (!e || is_join) {
            if (joined) { /* close the previous incarnation */
                if (inc_from > covered)
                    l_lost += inc_from - covered;
                else
                    l_re += covered - inc_from;
                if (inc_top > covered)
                    covered = inc_top;
            }
            if (is_join) {
                joined = 1;
                inc = hx_jint(e, "incarnation", 0);
                inc_from = hx_jint(e, "resumed_step", 0);
                inc_top = inc_from;
            }
            continue;
        }
        if (hx_ev_is(e, "heartbeat") && hx_jint(e, "incarnation", -1) == inc) {
            int64_t s = hx_jint(e, "step", 0);
            if (s > inc_top)
                inc_top = s;
            if (s > 0 && hx_jint(e, "tokens", 0) > 0) {
                step_last = s;
                tok_last = hx_jint(e, "tokens", 0);
            }
        }
    }
    int64_t fstep, ftok;
    if (hx_learner_final(h, l, &fstep, &ftok) && fstep > covered) {
        covered = fstep;
        if (fstep > 0 && ftok > 0) {
            step_last = fstep;
            tok_last = ftok;
        }
    }
    if (f->target > 0 && f->target - covered > p->slack_steps)
        l_lost += f->target - covered;
    double tps = step_last > 0 ? (double)tok_last / (double)step_last : 0.0;
    if (l_lost > 0 && f->worst < 0)
        f->worst = l;
    f->lost_steps += l_lost;
    f->re_steps += l_re;
    f->lost_tok += (double)l_lost * tps;
    f->re_tok += (double)l_re * tps;
    if (!joined && f->target > 0 && f->worst < 0)
        f->worst = l;
}

static void da_measure(const da_params *p, const hyp_history *h, da_figure *f)
{
    memset(f, 0, sizeof *f);
    f->worst = -1;
    double target_c = 0;
    f->target = p->steps;
    if (!f->target && hyp_history_counter(h, HYP_C_STEPS_TARGET, &target_c))
        f->target = (int64_t)target_c;
    for (int l = 0; l < hx_learners(h); l++)
        measure_learner(p, h, l, f);
}

static void da_judge(const da_params *p, const da_figure *f, hyp_verdict *v)
{
    char tgt[64];
    if (f->target > 0)
        snprintf(tgt, sizeof(tgt), "target %lld steps per learner", (long long)f->target);
    else
        snprintf(tgt, sizeof(tgt), "no step target: only gaps checked");
    if (f->lost_steps > 0) {
        hyp_verdict_set(
            v, HYP_FAIL, f->lost_tok, "<=", 0, "tokens",
            "%lld steps (%.0f tokens) never trained, first on learner %d; %lld steps (%.0f tokens) "
            "re-trained "
            "after restarts; %s",
            (long long)f->lost_steps, f->lost_tok, f->worst, (long long)f->re_steps, f->re_tok, tgt);
        return;
    }
    if (p->has_max_retrained && f->re_tok > p->max_retrained) {
        hyp_verdict_set(
            v, HYP_FAIL, f->lost_tok, "<=", 0, "tokens",
            "none lost, but %.0f tokens re-trained after restarts exceed max_retrained_tokens %.0f",
            f->re_tok, p->max_retrained);
        return;
    }
    hyp_verdict_set(v, HYP_PASS, f->lost_tok, "<=", 0, "tokens",
                    "no token lost; %lld steps (%.0f tokens) re-trained after restarts; %s",
                    (long long)f->re_steps, f->re_tok, tgt);
}

static void da_eval(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    da_figure f;
    da_measure(ctx, h, &f);
    da_judge(ctx, &f, v);
}

/* Tokens never trained. */
static double da_figure_of(const void *ctx, const hyp_history *h)
{
    da_params dflt = {0};
    if (!ctx)
        param_defaults(da_params_def, &dflt);
    da_figure f;
    da_measure(ctx ? ctx : &dflt, h, &f);
    return f.lost_tok;
}

/* Open until every learner reached the steps target less slack_steps:
 * the run must not end while a slow learner is short of its shard
 * because faster ones made up the total. */
static int da_window(const json_t *spec, hz_window *w)
{
    w->key = "steps";
    w->shard = 1;
    w->steps = json_integer_value(json_object_get(spec, "steps"));
    w->slack = json_integer_value(json_object_get(spec, "slack_steps"));
    return 1;
}

const hypothesis hyp_data_accounting = {
    .name = "data_accounting",
    .summary = "every learner trained its whole shard (no step skipped, final step >= steps - slack_steps); "
               "re-trained "
               "tokens "
               "are counted and reported",
    .params = da_params_def,
    .params_size = sizeof(da_params),
    .eval = da_eval,
    .measure = da_figure_of,
    .window = da_window,
};
