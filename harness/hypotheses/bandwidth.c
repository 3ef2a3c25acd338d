/* bandwidth.c - bytes on the wire per trained token <= max. Formula:
 * docs/experiments.md "bandwidth". */
#include <math.h>
#include <stdlib.h>

#include "harness/hypotheses/hyp_kind.h"

typedef struct bw_params {
    double max; /* bytes/token: the ceiling */
} bw_params;

typedef struct bw_figure {
    double bytes;    /* bytes counted */
    const char *src; /* where they were counted (static text) */
    double tokens;   /* tokens trained */
    double bpt;      /* bytes/token (NAN when no token was trained) */
} bw_figure;

static const param_def bw_params_def[] = {
    {.name = "max",
     .type = PARAM_NUMBER,
     .flags = PARAM_REQUIRED | PARAM_CAP | PARAM_ABOVE_ZERO,
     .min = 1e-9,
     .max = 1e12,
     .what = "bytes per token",
     .unit = "bytes/token",
     .doc = "the ceiling on bytes on the wire per trained token",
     .offset = PARAM_AT(bw_params, max)},
    {0},
};

/* The syncer's byte counters (in + out) when the runner set them, else the
 * contribution payloads in the events. */
static void bw_measure(const hyp_history *h, bw_figure *f)
{
    double in = 0, out = 0;
    if (hyp_history_counter(h, HYP_C_BYTES_IN, &in) + hyp_history_counter(h, HYP_C_BYTES_OUT, &out) > 0) {
        f->bytes = in + out;
        f->src = "syncer bytes in+out";
    } else {
        f->bytes = 0;
        const json_t *e;
        for (size_t i = 0; (e = hx_next_event(h, "contribution", &i));)
            f->bytes += (double)hx_jint(e, "bytes", 0);
        f->src = "contribution payloads only (no syncer byte counters)";
    }
    f->tokens = hx_tokens_trained(h);
    f->bpt = f->tokens > 0 ? f->bytes / f->tokens : NAN;
}

static void bw_judge(const bw_params *p, const bw_figure *f, hyp_verdict *v)
{
    if (f->tokens <= 0) {
        hyp_verdict_set(v, HYP_ERROR, NAN, "<=", p->max, "bytes/token", "no trained tokens in the history");
        return;
    }
    hyp_verdict_set(v, f->bpt <= p->max ? HYP_PASS : HYP_FAIL, f->bpt, "<=", p->max, "bytes/token",
                    "%.4g bytes per trained token (%.0f bytes from %s, %.0f tokens)", f->bpt, f->bytes,
                    f->src, f->tokens);
}

static void bw_eval(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    bw_figure f;
    bw_measure(h, &f);
    bw_judge(ctx, &f, v);
}

/* Bytes per trained token; NAN when no token was trained. */
static double bw_figure_of(const void *ctx, const hyp_history *h)
{
    (void)ctx;
    bw_figure f;
    bw_measure(h, &f);
    return f.bpt;
}

const hypothesis hyp_bandwidth = {
    .name = "bandwidth",
    .summary = "bytes on the wire per trained token <= max",
    .params = bw_params_def,
    .params_size = sizeof(bw_params),
    .eval = bw_eval,
    .measure = bw_figure_of,
};
