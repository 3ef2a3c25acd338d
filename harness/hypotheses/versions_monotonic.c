/* versions_monotonic.c - no fragment version ever goes backwards, also
 * across syncer restarts, and the event seq is gapless. Formula:
 * docs/experiments.md "versions_monotonic". */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/hypotheses/hyp_kind.h"

#define MAX_FRAGS 4096

typedef struct vm_figure {
    int oom;            /* 1 when the version table could not be allocated */
    int64_t violations; /* versions that went back, seq gaps or repeats */
    int64_t merges;     /* merge events */
    int64_t starts;     /* syncer start events */
    char first[256];    /* the first violation ("" none) */
} vm_figure;

static void violation(vm_figure *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(vm_figure *f, const char *fmt, ...)
{
    f->violations++;
    if (f->first[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->first, sizeof f->first, fmt, ap);
    va_end(ap);
}

/* A rebuild event: each fragment's version must not be below what it reached. */
static void check_rebuild(const json_t *e, int64_t seq, int64_t *cur, vm_figure *f)
{
    json_t *fs = json_object_get(e, "fragments"), *x;
    size_t k;
    json_array_foreach(fs, k, x)
    {
        int64_t frag = hx_jint(x, "fragment", -1), ver = hx_jint(x, "version", -1);
        if (frag < 0 || frag >= MAX_FRAGS)
            continue;
        if (ver < cur[frag + 1])
            violation(f, "fragment %lld rebuilt at version %lld after reaching %lld (seq %lld)",
                      (long long)frag, (long long)ver, (long long)cur[frag + 1], (long long)seq);
        else
            cur[frag + 1] = ver;
    }
}

static void vm_measure(const hyp_history *h, vm_figure *f)
{
    memset(f, 0, sizeof *f);
    /* Index f+1 so that ddp's fragment -1 has a slot. */
    int64_t *cur = calloc(MAX_FRAGS + 1, sizeof(int64_t));
    if (!cur) {
        f->oom = 1;
        return;
    }
    for (size_t i = 0; i <= MAX_FRAGS; i++)
        cur[i] = -1;
    int64_t prev_seq = 0;
    for (size_t i = 0; i < hx_nevents(h); i++) {
        const json_t *e = hx_event(h, i);
        int64_t seq = hx_ev_seq(e);
        /* A syncer that started without a valid checkpoint (start_state
         * "lost" or "corrupt") serves nothing until it rebuilt the model
         * from the learners (its "rebuild" event, versions above anything
         * published): its start versions are never published. */
        const char *st = hx_ev_is(e, "start") ? hx_jstr(e, "start_state") : "";
        int lost = strcmp(st, "lost") == 0 || strcmp(st, "corrupt") == 0;
        if (i > 0 && seq != prev_seq + 1)
            violation(f, "event seq %lld follows %lld (gap or repeat)", (long long)seq, (long long)prev_seq);
        prev_seq = seq;
        if (hx_ev_is(e, "rebuild")) {
            check_rebuild(e, seq, cur, f);
        } else if (hx_ev_is(e, "start")) {
            f->starts++;
            json_t *vs = json_object_get(e, "versions");
            for (size_t k = 0; k < json_array_size(vs) && k < MAX_FRAGS && !lost; k++) {
                int64_t ver = json_integer_value(json_array_get(vs, k));
                if (ver < cur[k + 1])
                    violation(f, "fragment %zu restarted at version %lld after reaching %lld (seq %lld)", k,
                              (long long)ver, (long long)cur[k + 1], (long long)seq);
                if (ver > cur[k + 1])
                    cur[k + 1] = ver;
            }
        } else if (hx_ev_is(e, "merge")) {
            f->merges++;
            int64_t frag = hx_jint(e, "fragment", -1), ver = hx_jint(e, "version", -1);
            if (frag < -1 || frag >= MAX_FRAGS)
                continue;
            if (ver <= cur[frag + 1])
                violation(f, "fragment %lld merged version %lld after %lld (seq %lld)", (long long)frag,
                          (long long)ver, (long long)cur[frag + 1], (long long)seq);
            else
                cur[frag + 1] = ver;
        }
    }
    free(cur);
}

static void vm_judge(const vm_figure *f, hyp_verdict *v)
{
    if (f->oom) {
        hyp_verdict_set(v, HYP_ERROR, NAN, "<=", 0, "violations", "out of memory");
        return;
    }
    if (f->merges == 0) {
        hyp_verdict_set(v, HYP_ERROR, NAN, "<=", 0, "violations", "no merge in the history");
        return;
    }
    if (f->violations) {
        hyp_verdict_set(v, HYP_FAIL, (double)f->violations, "<=", 0, "violations",
                        "%lld violation%s; first: %s", (long long)f->violations,
                        f->violations == 1 ? "" : "s", f->first);
        return;
    }
    hyp_verdict_set(
        v, HYP_PASS, 0, "<=", 0, "violations",
        "%lld merges and %lld syncer start%s: every fragment version only went up, event seq gapless",
        (long long)f->merges, (long long)f->starts, f->starts == 1 ? "" : "s");
}

static void vm_eval(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    (void)ctx;
    vm_figure f;
    vm_measure(h, &f);
    vm_judge(&f, v);
}

/* Violations; NAN without a merge. */
static double vm_figure_of(const void *ctx, const hyp_history *h)
{
    (void)ctx;
    vm_figure f;
    vm_measure(h, &f);
    return f.oom || f.merges == 0 ? NAN : (double)f.violations;
}

const hypothesis hyp_versions_monotonic = {
    .name = "versions_monotonic",
    .summary =
        "no fragment version ever goes backwards, also across syncer restarts; the event seq is gapless",
    .eval = vm_eval,
    .measure = vm_figure_of,
};
