/* no_global_downtime.c - the longest gap between merges, not counting time
 * with fewer than min_live learners alive, is <= max_gap_s. Formula:
 * docs/experiments.md "no_global_downtime". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/hypotheses/hyp_kind.h"

typedef struct ng_params {
    double max_gap_s; /* s: the longest gap allowed */
    int64_t min_live; /* K: the live floor, 0 = the history's quorum */
} ng_params;

typedef struct ng_figure {
    int k;            /* the live floor used */
    int oom;          /* 1 when the down intervals could not be built */
    size_t merges;    /* merge events */
    int64_t worst;    /* ms: the longest unexcused gap */
    int64_t worst_at; /* ms: where it began */
} ng_figure;

static const param_def ng_params_def[] = {
    {.name = "max_gap_s",
     .type = PARAM_SECONDS,
     .flags = PARAM_REQUIRED,
     .doc = "the longest gap between merges allowed",
     .offset = PARAM_AT(ng_params, max_gap_s)},
    {.name = "min_live",
     .type = PARAM_INT,
     .flags = PARAM_MAX_LEARNERS,
     .min = 1,
     .def = 0,
     .def_text = "the quorum K",
     .what = "a number of live learners",
     .doc = "time with fewer learners alive is not counted",
     .offset = PARAM_AT(ng_params, min_live)},
    {0},
};

static void ng_measure(const ng_params *p, const hyp_history *h, ng_figure *f)
{
    memset(f, 0, sizeof *f);
    f->k = p->min_live ? (int)p->min_live : hx_quorum(h);
    size_t niv = 0;
    hx_interval *iv = hx_down_intervals(h, &niv);
    if (!iv) {
        f->oom = 1;
        return;
    }
    /* A gap is excused only while learners were certainly down: each down
     * interval (an agent's and the syncer's times) narrowed by its edges'
     * error against the merges (the syncer's). */
    int64_t emax = hx_err_max(h);
    for (size_t i = 0; i < niv; i++) {
        iv[i].a += iv[i].ea + emax;
        iv[i].b -= iv[i].eb + emax;
        if (iv[i].b < iv[i].a)
            iv[i].b = iv[i].a;
    }
    int64_t prev = -1, last_beat = -1;
    for (size_t i = 0; i < hx_nevents(h); i++) {
        const json_t *e = hx_event(h, i);
        if (hx_ev_is(e, "heartbeat") && hx_ev_t(e) > last_beat)
            last_beat = hx_ev_t(e);
        if (!hx_ev_is(e, "merge"))
            continue;
        f->merges++;
        int64_t t = hx_ev_t(e);
        if (prev >= 0) {
            int64_t gap = (t - prev) - hx_excused_ms(h, iv, niv, f->k, prev, t);
            if (gap > f->worst) {
                f->worst = gap;
                f->worst_at = prev;
            }
        }
        prev = t;
    }
    /* Learners still heartbeating after the last merge: that tail counts. */
    if (prev >= 0 && last_beat > prev) {
        int64_t gap = (last_beat - prev) - hx_excused_ms(h, iv, niv, f->k, prev, last_beat);
        if (gap > f->worst) {
            f->worst = gap;
            f->worst_at = prev;
        }
    }
    free(iv);
}

static void ng_judge(const ng_params *p, const ng_figure *f, const hyp_history *h, hyp_verdict *v)
{
    if (f->oom) {
        hyp_verdict_set(v, HYP_ERROR, NAN, "<=", p->max_gap_s, "s", "out of memory");
        return;
    }
    if (f->merges == 0) {
        hyp_verdict_set(v, HYP_FAIL, NAN, "<=", p->max_gap_s, "s", "no merge in the history");
        return;
    }
    double w = f->worst / 1000.0;
    char at[48];
    hyp_verdict_set(v, w <= p->max_gap_s ? HYP_PASS : HYP_FAIL, w, "<=", p->max_gap_s, "s",
                    "longest gap between merges while >= %d learners were alive: %.2fs (from %s; %zu merges)",
                    f->k, w, hx_fmt_t(h, f->worst_at, at, sizeof at), f->merges);
}

static void ng_eval(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    ng_figure f;
    ng_measure(ctx, h, &f);
    ng_judge(ctx, &f, h, v);
}

/* The longest merge gap in s; NAN without a merge. */
static double ng_figure_of(const void *ctx, const hyp_history *h)
{
    ng_params dflt = {0};
    if (!ctx)
        param_defaults(ng_params_def, &dflt);
    ng_figure f;
    ng_measure(ctx ? ctx : &dflt, h, &f);
    return f.oom || f.merges == 0 ? NAN : f.worst / 1000.0;
}

const hypothesis hyp_no_global_downtime = {
    .name = "no_global_downtime",
    .summary =
        "the longest gap between merges, not counting time with fewer than min_live learners alive, is <= "
        "max_gap_s",
    .params = ng_params_def,
    .params_size = sizeof(ng_params),
    .eval = ng_eval,
    .measure = ng_figure_of,
};
