/* fault_cost.c - what each fault of a run cost (fault_cost.h). */
#include "harness/fault_cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One fault's stretch: [a, b) the fault, [a, r) until its learner rejoined. */
typedef struct fc_fault {
    const json_t *rec;
    int learner;
    int64_t a, b; /* start, end (mono ms) */
    int64_t r;    /* first merge with the learner at or after b; -1 never */
} fc_fault;

/* Merged tokens of one merge event: a fragment merge moves 1/P of its
 * contributions' tokens, a ddp step all of them. */
static double merged_tokens(const json_t *m, int np)
{
    double t = (double)hx_jint(m, "tokens", 0);
    return hx_jint(m, "fragment", -1) >= 0 && np > 0 ? t / np : t;
}

static int took_part(const json_t *m, int learner)
{
    json_t *parts = json_object_get(m, "participants");
    for (size_t j = 0; j < json_array_size(parts); j++)
        if (hx_jint(json_array_get(parts, j), "learner", -1) == learner)
            return 1;
    return 0;
}

/* A stretch shorter than this has no goodput figure: merges are discrete
 * events, and a rate over a fraction of a second is mostly noise. */
#define FC_MIN_STRETCH_MS 2000

/* Merged tokens per second over [a, b), or NAN for a stretch too short. */
static double rate(const hyp_history *h, int np, int64_t a, int64_t b)
{
    if (b - a < FC_MIN_STRETCH_MS)
        return NAN;
    double t = 0;
    for (size_t i = 0; i < hx_nevents(h); i++) {
        const json_t *e = hx_event(h, i);
        if (hx_ev_is(e, "merge") && hx_ev_t(e) >= a && hx_ev_t(e) < b)
            t += merged_tokens(e, np);
    }
    return t * 1000.0 / (double)(b - a);
}

/* Tokens of learner's contributions sent within [a, r) that no merge took:
 * a contribution is pending per fragment until a merge of that fragment
 * takes (learner, its incarnation); a newer one of the same fragment
 * carries its tokens on (a rebase keeps trained steps), a join of a new
 * incarnation or the end of the history loses what is pending. */
static double unmerged_tokens(const hyp_history *h, int learner, int np, int64_t a, int64_t r)
{
    int slots = np > 0 ? np : 1;
    double *pend = calloc((size_t)slots, sizeof *pend), lost = 0;
    int64_t *pinc = calloc((size_t)slots, sizeof *pinc);
    if (!pend || !pinc) {
        free(pend), free(pinc);
        return NAN;
    }
    for (size_t i = 0; i < hx_nevents(h); i++) {
        const json_t *e = hx_event(h, i);
        int64_t t = hx_ev_t(e), f = hx_jint(e, "fragment", -1);
        if (hx_ev_is(e, "merge") && f >= 0 && f < slots && pend[f] > 0) {
            if (hx_participated(e, learner, pinc[f]))
                pend[f] = 0;
        } else if (hx_ev_is(e, "join") && hx_jint(e, "learner", -1) == learner) {
            for (int k = 0; k < slots; k++)
                lost += pend[k], pend[k] = 0; /* died with the incarnation */
        } else if (hx_ev_is(e, "contribution") && hx_jint(e, "learner", -1) == learner && f >= 0 &&
                   f < slots) {
            if (t >= a && (r < 0 || t < r)) {
                pend[f] = (double)hx_jint(e, "tokens", 0) / slots;
                pinc[f] = hx_jint(e, "incarnation", 0);
            } else {
                pend[f] = 0; /* outside the stretch: not this fault's */
            }
        }
    }
    for (int k = 0; k < slots; k++)
        lost += pend[k];
    free(pend), free(pinc);
    return lost;
}

/* A unit restarted within [a, r): what the dead incarnation trained past
 * the point its successor resumed from (heartbeat token counters), else 0. */
static double crash_tokens(const hyp_history *h, int learner, int64_t a, int64_t r)
{
    int64_t last_old = -1, first_new = -1;
    int joined = 0;
    for (size_t i = 0; i < hx_nevents(h); i++) {
        const json_t *e = hx_event(h, i);
        if (hx_jint(e, "learner", -1) != learner)
            continue;
        int64_t t = hx_ev_t(e);
        if (hx_ev_is(e, "join") && t >= a && (r < 0 || t <= r) && !joined)
            joined = 1;
        else if (hx_ev_is(e, "heartbeat") && !joined)
            last_old = hx_jint(e, "tokens", last_old);
        else if (hx_ev_is(e, "heartbeat") && first_new < 0)
            first_new = hx_jint(e, "tokens", -1);
    }
    return joined && last_old > 0 && first_new >= 0 && last_old > first_new ? (double)(last_old - first_new)
                                                                            : 0.0;
}

/* ms of [start, end) inside at least one stretch [a, r) (r -1: the end). */
static int64_t covered_ms(const fc_fault *fx, size_t n, int64_t start, int64_t end)
{
    int64_t *ea = malloc((n ? n : 1) * sizeof *ea), *eb = malloc((n ? n : 1) * sizeof *eb), covered = 0;
    if (!ea || !eb) {
        free(ea), free(eb);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        ea[i] = fx[i].a > start ? fx[i].a : start;
        eb[i] = fx[i].r >= 0 && fx[i].r < end ? fx[i].r : end;
    }
    for (size_t i = 1; i < n; i++) /* insertion sort by start */
        for (size_t j = i; j > 0 && ea[j] < ea[j - 1]; j--) {
            int64_t t = ea[j];
            ea[j] = ea[j - 1], ea[j - 1] = t;
            t = eb[j];
            eb[j] = eb[j - 1], eb[j - 1] = t;
        }
    int64_t cur_a = 0, cur_b = 0; /* the union's current piece */
    for (size_t i = 0; i < n; i++) {
        if (eb[i] <= ea[i])
            continue;
        if (ea[i] > cur_b) {
            covered += cur_b - cur_a;
            cur_a = ea[i], cur_b = eb[i];
        } else if (eb[i] > cur_b) {
            cur_b = eb[i];
        }
    }
    covered += cur_b - cur_a;
    free(ea), free(eb);
    return covered;
}

static json_t *num_or_null(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

json_t *fault_cost_json(const hyp_history *h)
{
    size_t nf = hx_nfaults(h), n = 0;
    int np = hx_fragment_count(h);
    int64_t start = hx_start(h), end = hx_end(h);
    fc_fault *fx = calloc(nf ? nf : 1, sizeof *fx);
    json_t *out = json_object(), *rows = json_array();
    if (!fx || !out || !rows) {
        free(fx), json_decref(out), json_decref(rows);
        return NULL;
    }
    for (size_t i = 0; i < nf; i++) {
        const json_t *rec = hx_fault(h, i);
        if (!hx_fault_ran(rec))
            continue;
        fc_fault *f = &fx[n++];
        f->rec = rec;
        f->learner = hx_fault_learner(h, i);
        f->a = hx_fault_start(rec);
        f->b = hx_fault_end(rec) < end ? hx_fault_end(rec) : end;
        f->b = f->b > f->a ? f->b : f->a;
        f->r = -1;
        for (size_t k = 0; k < hx_nevents(h) && f->r < 0; k++) {
            const json_t *e = hx_event(h, k);
            if (hx_ev_is(e, "merge") && hx_ev_t(e) >= f->b && took_part(e, f->learner))
                f->r = hx_ev_t(e);
        }
    }
    /* the fault-free stretch: every ms of [start, end) outside all [a, r) */
    int64_t free_ms = 0;
    double free_tokens = 0;
    for (size_t k = 0; k < hx_nevents(h); k++) {
        const json_t *e = hx_event(h, k);
        int64_t t = hx_ev_t(e);
        int in = 0;
        for (size_t i = 0; i < n && !in; i++)
            in = t >= fx[i].a && t < (fx[i].r >= 0 ? fx[i].r : end);
        if (hx_ev_is(e, "merge") && !in && t >= start && t < end)
            free_tokens += merged_tokens(e, np);
    }
    free_ms = end - start - covered_ms(fx, n, start, end);
    double ref = free_ms >= FC_MIN_STRETCH_MS ? free_tokens * 1000.0 / (double)free_ms : NAN;
    json_object_set_new(out, "reference",
                        json_pack("{s:o,s:f}", "merged_tokens_per_s", num_or_null(ref), "span_s",
                                  free_ms > 0 ? (double)free_ms / 1000.0 : 0.0));
    for (size_t i = 0; i < n; i++) {
        fc_fault *f = &fx[i];
        int64_t r_or_end = f->r >= 0 ? f->r : end;
        int64_t in_window = 0, with = 0, out_all = 0, out_with = 0;
        for (size_t k = 0; k < hx_nevents(h); k++) {
            const json_t *e = hx_event(h, k);
            if (!hx_ev_is(e, "merge"))
                continue;
            int64_t t = hx_ev_t(e);
            int part = took_part(e, f->learner);
            if (t >= f->a && t < r_or_end)
                in_window++, with += part;
            else
                out_all++, out_with += part;
        }
        double share = out_all > 0 ? (double)out_with / (double)out_all : 1.0;
        double missed = floor(share * (double)in_window + 0.5) - (double)with;
        /* "after": as long as the fault, cut at the next fault's start or the end */
        int64_t after_b = f->b + (f->b - f->a > 1000 ? f->b - f->a : 1000);
        for (size_t j = 0; j < n; j++)
            if (fx[j].a > f->b && fx[j].a < after_b)
                after_b = fx[j].a;
        after_b = after_b < end ? after_b : end;
        double during = rate(h, np, f->a, f->b), after = rate(h, np, f->b, after_b);
        double lost = unmerged_tokens(h, f->learner, np, f->a, f->r);
        double crash = crash_tokens(h, f->learner, f->a, f->r);
        json_t *row = json_pack(
            "{s:s,s:s,s:i,s:f,s:f,s:f,s:o,s:I,s:I,s:o,s:o,s:o}", "id", hx_jstr(f->rec, "id"), "type",
            hx_jstr(f->rec, "type"), "learner", f->learner, "start_s", hx_run_s(h, f->a), "end_s",
            hx_run_s(h, f->b), "tokens_never_merged", floor((crash > lost ? crash : lost) + 0.5),
            "time_to_rejoin_s", f->r >= 0 ? json_real((double)(f->r - f->b) / 1000.0) : json_null(),
            "merges_missed", (json_int_t)(missed > 0 ? missed : 0), "merges_in_window", (json_int_t)in_window,
            "merged_tokens_per_s_during", num_or_null(during), "goodput_during",
            num_or_null(isfinite(ref) && ref > 0 ? during / ref : NAN), "goodput_after",
            num_or_null(isfinite(ref) && ref > 0 ? after / ref : NAN));
        if (row) { /* the same instants on the monotonic clock, for charts with another origin */
            json_object_set_new(row, "start_mono_ms", json_integer(f->a));
            json_object_set_new(row, "end_mono_ms", json_integer(f->b));
            json_array_append_new(rows, row);
        }
    }
    json_object_set_new(out, "faults", rows);
    free(fx);
    return out;
}
