/* history.c - the event history and the queries the hypotheses share
 * (see history.h). The formulas that use them are documented in
 * docs/experiments.md. */
#include "harness/history.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "harness/fault_kinds.h"

/* ---- history ---- */

#define MAX_COUNTERS 32

typedef struct hx_fault_rec {
    int learner; /* agent beside this learner */
    json_t *rec; /* the fault record (owned) */
} hx_fault_rec;

typedef struct hx_final {
    int set;        /* set by hyp_history_set_learner_final */
    int64_t step;   /* inner steps */
    int64_t tokens; /* cumulative tokens */
} hx_final;

struct hyp_history {
    int learners; /* M */
    int quorum;   /* K */
    json_t **ev;  /* syncer events, sorted by seq (owned) */
    size_t nev, capev;
    hx_fault_rec *faults; /* agent fault records */
    size_t nfaults, capfaults;
    json_t **act; /* harness action events (owned) */
    size_t nact, capact;
    struct {
        char name[32]; /* HYP_C_* */
        double value;
    } counters[MAX_COUNTERS];
    int ncounters;
    hx_final *finals; /* [learners] */
    int64_t err_max;  /* ms: the largest t_err_ms / mono_err_ms fed */
};

hyp_history *hyp_history_new(int learners, int quorum)
{
    hyp_history *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->learners = learners > 0 ? learners : 1;
    h->quorum = quorum > 0 ? quorum : 1;
    h->finals = calloc((size_t)h->learners, sizeof(hx_final));
    if (!h->finals) {
        free(h);
        return NULL;
    }
    return h;
}

void hyp_history_free(hyp_history *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->nev; i++)
        json_decref(h->ev[i]);
    free(h->ev);
    for (size_t i = 0; i < h->nfaults; i++)
        json_decref(h->faults[i].rec);
    free(h->faults);
    for (size_t i = 0; i < h->nact; i++)
        json_decref(h->act[i]);
    free(h->act);
    free(h->finals);
    free(h);
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, ncap * elem);
    if (!p)
        return CX_ENOMEM;
    *arr = p;
    *cap = ncap;
    return 0;
}

int64_t hx_jint(const json_t *o, const char *key, int64_t dflt)
{
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v) && isfinite(json_real_value(v)))
        return (int64_t)json_real_value(v);
    return dflt;
}

/* A finite number at key: 1 and *out, else 0 (absent, null, NaN). */
int hx_jnum(const json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return 0;
    *out = json_number_value(v);
    return 1;
}

/* A loss (nats): finite and >= 0. The syncer writes a NaN/Inf loss as -1
 * (JSON has no NaN) and a cross-entropy is never negative, so a negative,
 * null or missing value all mean "not finite". */
int hx_jloss(const json_t *o, const char *key, double *out)
{
    double x;
    if (!hx_jnum(o, key, &x) || x < 0.0)
        return 0;
    *out = x;
    return 1;
}

const char *hx_jstr(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : "";
}

int64_t hx_ev_seq(const json_t *e)
{
    return hx_jint(e, "seq", -1);
}

int64_t hx_ev_t(const json_t *e)
{
    return hx_jint(e, "t_mono_ms", 0);
}

int64_t hx_ev_err(const json_t *e)
{
    int64_t v = hx_jint(e, "t_err_ms", 0);
    return v > 0 ? v : 0;
}

int64_t hx_fault_err(const json_t *rec)
{
    int64_t v = hx_jint(rec, "mono_err_ms", 0);
    return v > 0 ? v : 0;
}

int64_t hx_cross_err(const json_t *ev, const json_t *rec)
{
    return hx_ev_err(ev) + hx_fault_err(rec);
}

int64_t hx_err_max(const hyp_history *h)
{
    return h->err_max;
}

int hx_ev_is(const json_t *e, const char *type)
{
    return strcmp(hx_jstr(e, "type"), type) == 0;
}

int hyp_history_add_syncer_event(hyp_history *h, const json_t *ev, char *err, size_t errlen)
{
    if (!json_is_object(ev) || !json_is_integer(json_object_get(ev, "seq")) ||
        !json_is_integer(json_object_get(ev, "t_mono_ms")) || !json_is_string(json_object_get(ev, "type")))
        return cx_fail(err, errlen, CX_EINVAL,
                       "syncer event: expected an object with integer seq, integer "
                       "t_mono_ms and string type");
    if (grow((void **)&h->ev, &h->capev, h->nev, sizeof(json_t *)) < 0)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    json_t *c = json_deep_copy(ev);
    if (!c)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    /* Keep seq order; events normally arrive in order, so this is O(1). */
    size_t i = h->nev;
    while (i > 0 && hx_ev_seq(h->ev[i - 1]) > hx_ev_seq(c)) {
        h->ev[i] = h->ev[i - 1];
        i--;
    }
    h->ev[i] = c;
    h->nev++;
    if (hx_ev_err(c) > h->err_max)
        h->err_max = hx_ev_err(c);
    return 0;
}

int hyp_history_add_fault(hyp_history *h, int learner, const json_t *record, char *err, size_t errlen)
{
    if (!json_is_object(record) || !json_is_string(json_object_get(record, "type")))
        return cx_fail(err, errlen, CX_EINVAL, "fault record: expected an object with a string type");
    if (learner < 0 || learner >= h->learners)
        return cx_fail(err, errlen, CX_EINVAL, "fault record: learner %d outside 0..%d", learner,
                       h->learners - 1);
    if (grow((void **)&h->faults, &h->capfaults, h->nfaults, sizeof(hx_fault_rec)) < 0)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    json_t *c = json_deep_copy(record);
    if (!c)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    h->faults[h->nfaults].learner = learner;
    h->faults[h->nfaults].rec = c;
    h->nfaults++;
    if (hx_fault_err(c) > h->err_max)
        h->err_max = hx_fault_err(c);
    return 0;
}

int hyp_history_add_action(hyp_history *h, const json_t *ev, char *err, size_t errlen)
{
    if (!json_is_object(ev) || !json_is_string(json_object_get(ev, "phase")))
        return cx_fail(err, errlen, CX_EINVAL, "action event: expected an object with a string phase");
    if (grow((void **)&h->act, &h->capact, h->nact, sizeof(json_t *)) < 0)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    json_t *c = json_deep_copy(ev);
    if (!c)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    h->act[h->nact++] = c;
    return 0;
}

void hyp_history_set_counter(hyp_history *h, const char *name, double value)
{
    for (int i = 0; i < h->ncounters; i++)
        if (strcmp(h->counters[i].name, name) == 0) {
            h->counters[i].value = value;
            return;
        }
    if (h->ncounters == MAX_COUNTERS)
        return;
    snprintf(h->counters[h->ncounters].name, sizeof(h->counters[0].name), "%s", name);
    h->counters[h->ncounters++].value = value;
}

int hyp_history_counter(const hyp_history *h, const char *name, double *out)
{
    for (int i = 0; i < h->ncounters; i++)
        if (strcmp(h->counters[i].name, name) == 0) {
            *out = h->counters[i].value;
            return 1;
        }
    return 0;
}

void hyp_history_set_learner_final(hyp_history *h, int learner, int64_t step, int64_t tokens)
{
    if (learner < 0 || learner >= h->learners)
        return;
    h->finals[learner].set = 1;
    h->finals[learner].step = step;
    h->finals[learner].tokens = tokens;
}

/* ---- reading ---- */

int hx_learners(const hyp_history *h)
{
    return h->learners;
}

int hx_quorum(const hyp_history *h)
{
    return h->quorum;
}

size_t hx_nevents(const hyp_history *h)
{
    return h->nev;
}

const json_t *hx_event(const hyp_history *h, size_t i)
{
    return i < h->nev ? h->ev[i] : NULL;
}

const json_t *hx_next_event(const hyp_history *h, const char *type, size_t *i)
{
    for (; *i < h->nev; (*i)++)
        if (hx_ev_is(h->ev[*i], type))
            return h->ev[(*i)++];
    return NULL;
}

size_t hx_nfaults(const hyp_history *h)
{
    return h->nfaults;
}

const json_t *hx_fault(const hyp_history *h, size_t i)
{
    return i < h->nfaults ? h->faults[i].rec : NULL;
}

int hx_fault_learner(const hyp_history *h, size_t i)
{
    return i < h->nfaults ? h->faults[i].learner : -1;
}

size_t hx_nactions(const hyp_history *h)
{
    return h->nact;
}

const json_t *hx_action(const hyp_history *h, size_t i)
{
    return i < h->nact ? h->act[i] : NULL;
}

int hx_learner_final(const hyp_history *h, int learner, int64_t *step, int64_t *tokens)
{
    if (learner < 0 || learner >= h->learners || !h->finals[learner].set)
        return 0;
    *step = h->finals[learner].step;
    *tokens = h->finals[learner].tokens;
    return 1;
}

/* ---- history queries ---- */

int64_t hx_start(const hyp_history *h)
{
    double c;
    if (hyp_history_counter(h, HYP_C_START_MONO, &c))
        return (int64_t)c;
    int64_t t = INT64_MAX;
    for (size_t i = 0; i < h->nev; i++)
        if (hx_ev_t(h->ev[i]) < t)
            t = hx_ev_t(h->ev[i]);
    return t == INT64_MAX ? 0 : t;
}

int64_t hx_end(const hyp_history *h)
{
    double c;
    if (hyp_history_counter(h, HYP_C_END_MONO, &c))
        return (int64_t)c;
    int64_t t = 0;
    for (size_t i = 0; i < h->nev; i++)
        if (hx_ev_t(h->ev[i]) > t)
            t = hx_ev_t(h->ev[i]);
    for (size_t i = 0; i < h->nfaults; i++) {
        int64_t e =
            hx_jint(h->faults[i].rec, "ended_mono_ms", hx_jint(h->faults[i].rec, "started_mono_ms", 0));
        if (e > t)
            t = e;
    }
    return t;
}

double hx_run_s(const hyp_history *h, int64_t t)
{
    return (double)(t - hx_start(h)) / 1000.0;
}

const char *hx_fmt_t(const hyp_history *h, int64_t t, char *buf, size_t len)
{
    snprintf(buf, len, "t=%.1f s of the run", hx_run_s(h, t));
    return buf;
}

int64_t hx_fault_start(const json_t *rec)
{
    return hx_jint(rec, "started_mono_ms", -1);
}

int64_t hx_fault_end(const json_t *rec)
{
    json_t *e = json_object_get(rec, "ended_mono_ms");
    if (json_is_integer(e))
        return json_integer_value(e);
    return hx_fault_start(rec) + hx_jint(rec, "duration_ms", 0);
}

int hx_fault_ran(const json_t *rec)
{
    return hx_fault_start(rec) >= 0 && strcmp(hx_jstr(rec, "state"), "failed") != 0;
}

hx_interval *hx_down_intervals(const hyp_history *h, size_t *n)
{
    *n = 0;
    hx_interval *iv = calloc(h->nfaults ? h->nfaults : 1, sizeof(*iv));
    if (!iv)
        return NULL;
    int64_t end = hx_end(h);
    for (size_t i = 0; i < h->nfaults; i++) {
        const json_t *r = h->faults[i].rec;
        const char *type = hx_jstr(r, "type");
        if (!hx_kind_takes_unit_down(type) || !hx_fault_ran(r))
            continue;
        int64_t a = hx_fault_start(r), b = hx_fault_end(r), eb = hx_fault_err(r);
        if (hx_kind_restarts_unit(type)) {
            hx_rejoin_info ri;
            hx_rejoin(h, h->faults[i].learner, r, &ri);
            b = ri.join ? hx_ev_t(ri.join) : end;
            eb = ri.join ? hx_ev_err(ri.join) : 0;
        }
        iv[*n].learner = h->faults[i].learner;
        iv[*n].a = a;
        iv[*n].b = b > a ? b : a;
        iv[*n].ea = hx_fault_err(r);
        iv[*n].eb = eb;
        (*n)++;
    }
    return iv;
}

/* Learners alive at t given the down intervals. */
static int live_at(const hyp_history *h, const hx_interval *iv, size_t n, int64_t t)
{
    int live = 0;
    for (int l = 0; l < h->learners; l++) {
        int down = 0;
        for (size_t i = 0; i < n && !down; i++)
            down = iv[i].learner == l && t >= iv[i].a && t < iv[i].b;
        live += !down;
    }
    return live;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t hx_excused_ms(const hyp_history *h, const hx_interval *iv, size_t n, int k, int64_t a, int64_t b)
{
    if (b <= a)
        return 0;
    int64_t *cut = malloc((2 * n + 2) * sizeof(int64_t));
    if (!cut)
        return 0;
    size_t nc = 0;
    cut[nc++] = a;
    cut[nc++] = b;
    for (size_t i = 0; i < n; i++) {
        if (iv[i].a > a && iv[i].a < b)
            cut[nc++] = iv[i].a;
        if (iv[i].b > a && iv[i].b < b)
            cut[nc++] = iv[i].b;
    }
    qsort(cut, nc, sizeof(int64_t), cmp_i64);
    int64_t excused = 0;
    for (size_t i = 0; i + 1 < nc; i++)
        if (cut[i + 1] > cut[i] && live_at(h, iv, n, cut[i]) < k)
            excused += cut[i + 1] - cut[i];
    free(cut);
    return excused;
}

int hx_fragment_count(const hyp_history *h)
{
    int p = 0;
    for (size_t i = 0; i < h->nev; i++) {
        const json_t *e = h->ev[i];
        if (hx_ev_is(e, "start") && json_is_array(json_object_get(e, "versions")))
            p = (int)json_array_size(json_object_get(e, "versions"));
    }
    if (p > 0)
        return p;
    for (size_t i = 0; i < h->nev; i++) {
        int64_t f = hx_jint(h->ev[i], "fragment", -1);
        if (f + 1 > p)
            p = (int)(f + 1);
    }
    return p;
}

void hx_rejoin(const hyp_history *h, int learner, const json_t *fault, hx_rejoin_info *out)
{
    memset(out, 0, sizeof *out);
    int64_t fs = hx_fault_start(fault);
    /* before: every join not certainly after the start (seq order) */
    size_t i = 0;
    for (; i < h->nev; i++) {
        const json_t *e = h->ev[i];
        if (!hx_ev_is(e, "join") || hx_jint(e, "learner", -1) != learner)
            continue;
        int64_t err = hx_cross_err(e, fault);
        if (hx_ev_t(e) - fs >= err)
            continue; /* certainly not before: a rejoin candidate, below */
        if (hx_jint(e, "incarnation", 0) > out->prev_inc)
            out->prev_inc = hx_jint(e, "incarnation", 0);
        if (hx_ev_t(e) > fs - err) {
            out->edge = e;
            out->edge_err = err;
        }
    }
    for (i = 0; i < h->nev; i++) {
        const json_t *e = h->ev[i];
        if (hx_ev_is(e, "join") && hx_jint(e, "learner", -1) == learner &&
            hx_ev_t(e) - fs >= hx_cross_err(e, fault) && hx_jint(e, "incarnation", 0) > out->prev_inc) {
            out->join = e;
            return;
        }
    }
}

int hx_participated(const json_t *merge, int learner, int64_t incarnation)
{
    json_t *parts = json_object_get(merge, "participants");
    for (size_t i = 0; i < json_array_size(parts); i++) {
        json_t *x = json_array_get(parts, i);
        if (hx_jint(x, "learner", -1) == learner && hx_jint(x, "incarnation", -1) == incarnation)
            return 1;
    }
    return 0;
}

double hx_tokens_trained(const hyp_history *h)
{
    double c;
    if (hyp_history_counter(h, HYP_C_TOKENS, &c))
        return c;
    double total = 0;
    for (int l = 0; l < h->learners; l++) {
        int64_t best = h->finals[l].set ? h->finals[l].tokens : 0;
        for (size_t i = 0; i < h->nev; i++)
            if (hx_ev_is(h->ev[i], "heartbeat") && hx_jint(h->ev[i], "learner", -1) == l &&
                hx_jint(h->ev[i], "tokens", 0) > best)
                best = hx_jint(h->ev[i], "tokens", 0);
        total += (double)best;
    }
    return total;
}
