/* hypothesis.c - the event history and the built-in hypotheses (see
 * hypothesis.h). Formulas are documented in docs/experiments.md; keep the
 * two in step. */
#include "harness/hypothesis.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

/* ---- history ---- */

#define MAX_COUNTERS 32

typedef struct hx_fault {
    int learner; /* agent beside this learner */
    json_t *rec; /* the fault record (owned) */
} hx_fault;

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
    hx_fault *faults; /* agent fault records */
    size_t nfaults, capfaults;
    json_t **act; /* harness action events (owned) */
    size_t nact, capact;
    struct {
        char name[32]; /* HYP_C_* */
        double value;
    } counters[MAX_COUNTERS];
    int ncounters;
    hx_final *finals; /* [learners] */
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

static int64_t jint(const json_t *o, const char *key, int64_t dflt)
{
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v) && isfinite(json_real_value(v)))
        return (int64_t)json_real_value(v);
    return dflt;
}

/* A finite number at key: 1 and *out, else 0 (absent, null, NaN). */
static int jnum(const json_t *o, const char *key, double *out)
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
static int jloss(const json_t *o, const char *key, double *out)
{
    double x;
    if (!jnum(o, key, &x) || x < 0.0)
        return 0;
    *out = x;
    return 1;
}

static const char *jstr(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : "";
}

static int64_t ev_seq(const json_t *e)
{
    return jint(e, "seq", -1);
}

static int64_t ev_t(const json_t *e)
{
    return jint(e, "t_mono_ms", 0);
}

static int ev_is(const json_t *e, const char *type)
{
    return strcmp(jstr(e, "type"), type) == 0;
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
    while (i > 0 && ev_seq(h->ev[i - 1]) > ev_seq(c)) {
        h->ev[i] = h->ev[i - 1];
        i--;
    }
    h->ev[i] = c;
    h->nev++;
    return 0;
}

int hyp_history_add_fault(hyp_history *h, int learner, const json_t *record, char *err, size_t errlen)
{
    if (!json_is_object(record) || !json_is_string(json_object_get(record, "type")))
        return cx_fail(err, errlen, CX_EINVAL, "fault record: expected an object with a string type");
    if (learner < 0 || learner >= h->learners)
        return cx_fail(err, errlen, CX_EINVAL, "fault record: learner %d outside 0..%d", learner,
                       h->learners - 1);
    if (grow((void **)&h->faults, &h->capfaults, h->nfaults, sizeof(hx_fault)) < 0)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    json_t *c = json_deep_copy(record);
    if (!c)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    h->faults[h->nfaults].learner = learner;
    h->faults[h->nfaults].rec = c;
    h->nfaults++;
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

/* ---- history queries ---- */

static int64_t hist_start(const hyp_history *h)
{
    double c;
    if (hyp_history_counter(h, HYP_C_START_MONO, &c))
        return (int64_t)c;
    int64_t t = INT64_MAX;
    for (size_t i = 0; i < h->nev; i++)
        if (ev_t(h->ev[i]) < t)
            t = ev_t(h->ev[i]);
    return t == INT64_MAX ? 0 : t;
}

static int64_t hist_end(const hyp_history *h)
{
    double c;
    if (hyp_history_counter(h, HYP_C_END_MONO, &c))
        return (int64_t)c;
    int64_t t = 0;
    for (size_t i = 0; i < h->nev; i++)
        if (ev_t(h->ev[i]) > t)
            t = ev_t(h->ev[i]);
    for (size_t i = 0; i < h->nfaults; i++) {
        int64_t e = jint(h->faults[i].rec, "ended_mono_ms", jint(h->faults[i].rec, "started_mono_ms", 0));
        if (e > t)
            t = e;
    }
    return t;
}

static int64_t fault_start(const json_t *rec)
{
    return jint(rec, "started_mono_ms", -1);
}

/* When the fault healed: ended_mono_ms, else started + duration_ms. */
static int64_t fault_end(const json_t *rec)
{
    json_t *e = json_object_get(rec, "ended_mono_ms");
    if (json_is_integer(e))
        return json_integer_value(e);
    return fault_start(rec) + jint(rec, "duration_ms", 0);
}

static int is_restart_kind(const char *type)
{
    return strcmp(type, "kill") == 0 || strcmp(type, "preempt") == 0;
}

/* Fault kinds that take a learner out of training while active. */
static int is_down_kind(const char *type)
{
    return is_restart_kind(type) || strcmp(type, "pause") == 0 || strcmp(type, "partition") == 0 ||
           strcmp(type, "blackhole") == 0;
}

/* First join of learner at or after t (seq order); NULL if none. */
static const json_t *next_join(const hyp_history *h, int learner, int64_t t, int64_t min_inc)
{
    for (size_t i = 0; i < h->nev; i++) {
        const json_t *e = h->ev[i];
        if (ev_is(e, "join") && jint(e, "learner", -1) == learner && ev_t(e) >= t &&
            jint(e, "incarnation", 0) > min_inc)
            return e;
    }
    return NULL;
}

typedef struct hx_interval {
    int learner;  /* who is down */
    int64_t a, b; /* [a, b) mono ms */
} hx_interval;

/* Down intervals: a down-kind fault from its start until it healed, and for
 * kill/preempt until the learner joined again (or the end of the history). */
static hx_interval *down_intervals(const hyp_history *h, size_t *n)
{
    *n = 0;
    hx_interval *iv = calloc(h->nfaults ? h->nfaults : 1, sizeof(*iv));
    if (!iv)
        return NULL;
    int64_t end = hist_end(h);
    for (size_t i = 0; i < h->nfaults; i++) {
        const json_t *r = h->faults[i].rec;
        const char *type = jstr(r, "type");
        if (!is_down_kind(type) || fault_start(r) < 0 || strcmp(jstr(r, "state"), "failed") == 0)
            continue;
        int64_t a = fault_start(r), b = fault_end(r);
        if (is_restart_kind(type)) {
            const json_t *j = next_join(h, h->faults[i].learner, a, 0);
            b = j ? ev_t(j) : end;
        }
        iv[*n].learner = h->faults[i].learner;
        iv[*n].a = a;
        iv[*n].b = b > a ? b : a;
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

/* Time within [a, b) during which fewer than k learners were alive. */
static int64_t excused_ms(const hyp_history *h, const hx_interval *iv, size_t n, int k, int64_t a, int64_t b)
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

/* Fragment count: the latest start event's versions, else max id + 1. */
static int fragment_count(const hyp_history *h)
{
    int p = 0;
    for (size_t i = 0; i < h->nev; i++) {
        const json_t *e = h->ev[i];
        if (ev_is(e, "start") && json_is_array(json_object_get(e, "versions")))
            p = (int)json_array_size(json_object_get(e, "versions"));
    }
    if (p > 0)
        return p;
    for (size_t i = 0; i < h->nev; i++) {
        int64_t f = jint(h->ev[i], "fragment", -1);
        if (f + 1 > p)
            p = (int)(f + 1);
    }
    return p;
}

/* ---- verdict helpers ---- */

const char *hyp_status_name(hyp_status s)
{
    return s == HYP_PASS ? "pass" : s == HYP_FAIL ? "fail" : "error";
}

static void verdict(hyp_verdict *v, hyp_status st, double measured, const char *cmp, double threshold,
                    const char *unit, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static void verdict(hyp_verdict *v, hyp_status st, double measured, const char *cmp, double threshold,
                    const char *unit, const char *fmt, ...)
{
    v->status = st;
    v->measured = measured;
    v->threshold = threshold;
    snprintf(v->cmp, sizeof(v->cmp), "%s", cmp);
    snprintf(v->unit, sizeof(v->unit), "%s", unit);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->explanation, sizeof(v->explanation), fmt, ap);
    va_end(ap);
}

/* Append to a fixed note buffer (never overflows). */
static void note(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

/* ---- params: one struct for every hypothesis (each uses its own fields) ---- */

typedef struct hp {
    double max_jump_rel; /* loss_continuity: rel */
    double recover_s;    /* loss_continuity: s */
    double slack_rel;    /* loss_continuity: rel, default 0.02 */
    int has_max;         /* loss_target */
    double max;          /* loss_target: nats; bandwidth: bytes/token */
    int has_tol;
    double tol; /* loss_target: rel vs control; reintegration: rel train loss */
    int has_control;
    double control; /* loss_target: nats */
    int has_by_s;
    double by_s;       /* loss_target: s after start */
    int64_t by_tokens; /* loss_target: merged tokens (0 = none) */
    int has_max_rel;
    double max_rel;   /* loss_target: ratio to the run's first eval loss */
    int64_t learner;  /* reintegration */
    double join_s;    /* reintegration: s after the fault healed */
    int64_t merged;   /* reintegration: contributions merged */
    double merged_s;  /* reintegration: s after the join */
    int pull_all;     /* reintegration: require pulls of every fragment */
    double max_gap_s; /* no_global_downtime: s */
    int64_t min_live; /* no_global_downtime: K, 0 = history's quorum */
    double min;       /* goodput: ratio */
    int has_min_rel;
    double min_rel; /* goodput: ratio to the same run's reference phase */
    int has_ref_s;
    double ref_s; /* goodput: s of the reference phase after the first join */
    int has_step_ms;
    double step_ms;      /* goodput: ms per inner step if no heartbeats */
    int64_t steps;       /* data_accounting: per-learner steps, 0 = counter */
    int64_t slack_steps; /* data_accounting: tolerated shortfall */
    int has_max_retrained;
    double max_retrained; /* data_accounting: tokens */
    int allow_none;       /* fault_effective */
} hp;

static void *hp_new(void)
{
    hp *p = calloc(1, sizeof(hp));
    if (p) {
        p->slack_rel = 0.02;
        p->tol = 0.10;
        p->merged = 1;
        p->pull_all = 1;
    }
    return p;
}

static void hp_free(void *ctx)
{
    free(ctx);
}

#define KEYS(...) static const char *const keys[] = {"hypothesis", "name", __VA_ARGS__, NULL}

static void parse_loss_continuity(const json_t *s, const char *path, int m, jv_diag *d, void **ctx)
{
    KEYS("max_jump_rel", "recover_s", "slack_rel");
    hp *p = *ctx = hp_new();
    if (!p || jv_check_keys(d, path, s, keys) < 0)
        return;
    jv_get_number(d, path, s, "max_jump_rel", 1, 0.0, 1e6, "a relative jump", &p->max_jump_rel);
    jv_get_number(d, path, s, "recover_s", 1, 1e-3, 1e7, "seconds", &p->recover_s);
    jv_get_number(d, path, s, "slack_rel", 0, 0.0, 1e6, "a relative slack", &p->slack_rel);
}

static void parse_loss_target(const json_t *s, const char *path, int m, jv_diag *d, void **ctx)
{
    KEYS("max", "max_rel", "tol", "control", "by_s", "by_tokens");
    hp *p = *ctx = hp_new();
    if (!p || jv_check_keys(d, path, s, keys) < 0)
        return;
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

static void parse_reintegration(const json_t *s, const char *path, int m, jv_diag *d, void **ctx)
{
    KEYS("learner", "join_s", "merged", "merged_s", "tol", "pull_all");
    hp *p = *ctx = hp_new();
    if (!p || jv_check_keys(d, path, s, keys) < 0)
        return;
    jv_get_int(d, path, s, "learner", 1, 0, m - 1, "a learner id", &p->learner);
    jv_get_number(d, path, s, "join_s", 1, 1e-3, 1e7, "seconds", &p->join_s);
    jv_get_int(d, path, s, "merged", 0, 1, 1000000, "a number of merged contributions", &p->merged);
    jv_get_number(d, path, s, "merged_s", 1, 1e-3, 1e7, "seconds", &p->merged_s);
    jv_get_number(d, path, s, "tol", 0, 0.0, 1e6, "a relative tolerance", &p->tol);
    jv_get_bool(d, path, s, "pull_all", 0, &p->pull_all);
}

static void parse_no_global_downtime(const json_t *s, const char *path, int m, jv_diag *d, void **ctx)
{
    KEYS("max_gap_s", "min_live");
    hp *p = *ctx = hp_new();
    if (!p || jv_check_keys(d, path, s, keys) < 0)
        return;
    jv_get_number(d, path, s, "max_gap_s", 1, 1e-3, 1e7, "seconds", &p->max_gap_s);
    jv_get_int(d, path, s, "min_live", 0, 1, m, "a number of live learners", &p->min_live);
}

static void parse_goodput(const json_t *s, const char *path, int m, jv_diag *d, void **ctx)
{
    KEYS("min", "min_rel", "ref_s", "step_ms");
    hp *p = *ctx = hp_new();
    if (!p || jv_check_keys(d, path, s, keys) < 0)
        return;
    jv_get_number(d, path, s, "min", 0, 0.0, 1.0, "a goodput ratio", &p->min);
    p->has_min_rel = jv_get_number(d, path, s, "min_rel", 0, 0.0, 10.0, "a ratio to the reference goodput",
                                   &p->min_rel) == 1;
    p->has_ref_s = jv_get_number(d, path, s, "ref_s", 0, 1.0, 1e7, "seconds", &p->ref_s) == 1;
    int nmin = !!json_object_get(s, "min"), nrel = !!json_object_get(s, "min_rel");
    if (nmin + nrel != 1)
        jv_diag_add(d, path,
                    "expected exactly one of min (absolute) or min_rel (relative to the run's fault-free "
                    "reference phase), got %d",
                    nmin + nrel);
    if (json_object_get(s, "ref_s") && !nrel)
        jv_diag_add(d, path, "expected ref_s only together with min_rel");
    p->has_step_ms =
        jv_get_number(d, path, s, "step_ms", 0, 1e-3, 1e7, "ms per inner step", &p->step_ms) == 1;
}

static void parse_bandwidth(const json_t *s, const char *path, int m, jv_diag *d, void **ctx)
{
    KEYS("max");
    hp *p = *ctx = hp_new();
    if (!p || jv_check_keys(d, path, s, keys) < 0)
        return;
    jv_get_number(d, path, s, "max", 1, 1e-9, 1e12, "bytes per token", &p->max);
}

static void parse_versions_monotonic(const json_t *s, const char *path, int m, jv_diag *d, void **ctx)
{
    static const char *const keys[] = {"hypothesis", "name", NULL};
    *ctx = hp_new();
    jv_check_keys(d, path, s, keys);
}

static void parse_data_accounting(const json_t *s, const char *path, int m, jv_diag *d, void **ctx)
{
    KEYS("steps", "slack_steps", "max_retrained_tokens");
    hp *p = *ctx = hp_new();
    if (!p || jv_check_keys(d, path, s, keys) < 0)
        return;
    jv_get_int(d, path, s, "steps", 0, 1, INT64_MAX, "inner steps per learner", &p->steps);
    jv_get_int(d, path, s, "slack_steps", 0, 0, INT64_MAX, "inner steps", &p->slack_steps);
    p->has_max_retrained =
        jv_get_number(d, path, s, "max_retrained_tokens", 0, 0.0, 1e18, "tokens", &p->max_retrained) == 1;
}

static void parse_fault_effective(const json_t *s, const char *path, int m, jv_diag *d, void **ctx)
{
    KEYS("allow_none");
    hp *p = *ctx = hp_new();
    if (!p || jv_check_keys(d, path, s, keys) < 0)
        return;
    jv_get_bool(d, path, s, "allow_none", 0, &p->allow_none);
}

/* ---- loss_continuity ---- */

static void eval_loss_continuity(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    const hp *p = ctx;
    size_t nev = 0;
    for (size_t i = 0; i < h->nev; i++) {
        const json_t *e = h->ev[i];
        if (!ev_is(e, "eval"))
            continue;
        nev++;
        double loss;
        if (!jloss(e, "loss", &loss)) {
            verdict(v, HYP_FAIL, NAN, "<=", p->max_jump_rel, "rel",
                    "eval loss is not finite at seq %lld (t=%.1f s of the run)", (long long)ev_seq(e),
                    (double)(ev_t(e) - hist_start(h)) / 1000.0);
            return;
        }
    }
    if (nev == 0) {
        verdict(v, HYP_ERROR, NAN, "<=", p->max_jump_rel, "rel", "no eval events in the history");
        return;
    }
    double worst = 0.0;
    int windows = 0, noref = 0;
    char why[384] = "";
    for (size_t f = 0; f < h->nfaults; f++) {
        const json_t *r = h->faults[f].rec;
        int64_t s = fault_start(r), e = fault_end(r);
        if (s < 0 || strcmp(jstr(r, "state"), "failed") == 0)
            continue;
        int64_t horizon = e + (int64_t)(p->recover_s * 1000.0);
        double ref = NAN;
        for (size_t i = 0; i < h->nev; i++)
            if (ev_is(h->ev[i], "eval") && ev_t(h->ev[i]) <= s)
                jloss(h->ev[i], "loss", &ref);
        if (isnan(ref)) {
            noref++;
            continue;
        }
        windows++;
        /* Recovered = the last eval of the window (fault start .. heal +
         * recover_s) is back at or below the reference. The last one, not
         * the first after the heal: a run may end before the fault heals,
         * and a loss that never rose has nothing to recover from. */
        double peak = ref, last = NAN;
        for (size_t i = 0; i < h->nev; i++) {
            const json_t *ev = h->ev[i];
            double loss;
            if (!ev_is(ev, "eval") || !jloss(ev, "loss", &loss) || ev_t(ev) <= s || ev_t(ev) > horizon)
                continue;
            if (loss > peak)
                peak = loss;
            last = loss;
        }
        double jump = ref > 0 ? peak / ref - 1.0 : 0.0;
        if (jump > worst)
            worst = jump;
        if (isnan(last) || last > ref * (1.0 + p->slack_rel)) {
            if (!why[0])
                snprintf(
                    why, sizeof(why),
                    "after the %s fault on learner %d (healed at t=%.1f s of the run) the eval loss was not "
                    "back at <= %.4g (reference %.4g + %.0f%%) by %gs after the heal",
                    jstr(r, "type"), h->faults[f].learner, (double)(e - hist_start(h)) / 1000.0,
                    ref * (1.0 + p->slack_rel), ref, p->slack_rel * 100.0, p->recover_s);
        }
    }
    if (why[0]) {
        verdict(v, HYP_FAIL, worst, "<=", p->max_jump_rel, "rel", "%s", why);
        return;
    }
    hyp_status st = worst <= p->max_jump_rel ? HYP_PASS : HYP_FAIL;
    verdict(
        v, st, worst, "<=", p->max_jump_rel, "rel",
        "largest eval-loss rise over the pre-fault reference %.2f%% (limit %.2f%%) across %d fault window%s, "
        "%zu eval losses all finite%s",
        worst * 100.0, p->max_jump_rel * 100.0, windows, windows == 1 ? "" : "s", nev,
        noref ? "; some faults began before the first eval and were skipped" : "");
}

/* ---- loss_target ---- */

static void eval_loss_target(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    const hp *p = ctx;
    double thr = p->max;
    char form[96] = "";
    double first = NAN;
    for (size_t i = 0; i < h->nev && isnan(first); i++)
        if (ev_is(h->ev[i], "eval") && !jloss(h->ev[i], "loss", &first))
            first = NAN;
    if (p->has_max_rel) {
        /* relative to the same run: the first eval is the untrained model */
        if (isnan(first)) {
            verdict(v, HYP_ERROR, NAN, "<=", NAN, "nats",
                    "max_rel target but no finite eval loss in the history");
            return;
        }
        thr = first * p->max_rel;
        snprintf(form, sizeof form, ", first eval %.4f x max_rel %g", first, p->max_rel);
    } else if (!p->has_max) {
        double control = p->control;
        if (!p->has_control && !hyp_history_counter(h, HYP_C_CONTROL_LOSS, &control)) {
            verdict(v, HYP_ERROR, NAN, "<=", NAN, "nats",
                    "relative target but no control loss (param control or "
                    "the runner's control run)");
            return;
        }
        thr = control * (1.0 + p->tol);
        snprintf(form, sizeof form, ", control x (1 + tol)");
    }
    int64_t start = hist_start(h), deadline = start + (int64_t)(p->by_s * 1000.0);
    double best = INFINITY, last = NAN;
    size_t n = 0;
    int reached = 0; /* by_tokens: an eval covered by_tokens merged tokens */
    int64_t last_tokens = 0;
    for (size_t i = 0; i < h->nev && !reached; i++) {
        const json_t *e = h->ev[i];
        double loss;
        if (!ev_is(e, "eval"))
            continue;
        if (p->by_tokens > 0) {
            last_tokens = jint(e, "tokens", 0);
            reached = last_tokens >= p->by_tokens;
        }
        if (!jloss(e, "loss", &loss)) {
            last = NAN;
            continue;
        }
        n++;
        last = loss;
        if ((!p->has_by_s || ev_t(e) <= deadline) && loss < best)
            best = loss;
    }
    if (n == 0) {
        verdict(v, HYP_ERROR, NAN, "<=", thr, "nats", "no finite eval loss in the history");
        return;
    }
    if (p->by_tokens > 0) {
        if (!reached && best > thr) {
            verdict(v, HYP_ERROR, NAN, "<=", thr, "nats",
                    "run ended before an eval covered %lld merged tokens (the last covered %lld)",
                    (long long)p->by_tokens, (long long)last_tokens);
            return;
        }
        verdict(v, best <= thr ? HYP_PASS : HYP_FAIL, best, "<=", thr, "nats",
                "lowest eval loss by %lld merged tokens %.4f (target <= %.4f%s)%s", (long long)p->by_tokens,
                best, thr, form, reached ? "" : "; reached before that many tokens");
        return;
    }
    if (p->has_by_s) {
        if (isinf(best)) {
            verdict(v, HYP_FAIL, NAN, "<=", thr, "nats", "no eval within %gs of the start", p->by_s);
            return;
        }
        verdict(v, best <= thr ? HYP_PASS : HYP_FAIL, best, "<=", thr, "nats",
                "lowest eval loss within %gs of the start %.4f (target <= %.4f%s)", p->by_s, best, thr, form);
        return;
    }
    if (isnan(last)) {
        verdict(v, HYP_FAIL, NAN, "<=", thr, "nats", "the final eval loss is not finite");
        return;
    }
    verdict(v, last <= thr ? HYP_PASS : HYP_FAIL, last, "<=", thr, "nats",
            "final eval loss %.4f (target <= %.4f%s)", last, thr, form);
}

/* ---- reintegration ---- */

static int participated(const json_t *merge, int learner, int64_t inc)
{
    json_t *parts = json_object_get(merge, "participants");
    for (size_t i = 0; i < json_array_size(parts); i++) {
        json_t *x = json_array_get(parts, i);
        if (jint(x, "learner", -1) == learner && jint(x, "incarnation", -1) == inc)
            return 1;
    }
    return 0;
}

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

static void eval_reintegration(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    const hp *p = ctx;
    int l = (int)p->learner;
    const json_t *fault = NULL;
    for (size_t i = 0; i < h->nfaults; i++)
        if (h->faults[i].learner == l && is_down_kind(jstr(h->faults[i].rec, "type")) &&
            fault_start(h->faults[i].rec) >= 0 && strcmp(jstr(h->faults[i].rec, "state"), "failed") != 0)
            fault = h->faults[i].rec;
    if (!fault) {
        verdict(v, HYP_ERROR, NAN, ">=", (double)p->merged, "merges",
                "no kill/preempt/pause/partition/blackhole fault on learner %d in the history", l);
        return;
    }
    int64_t fs = fault_start(fault), healed = fault_end(fault);
    int restart = is_restart_kind(jstr(fault, "type"));
    int64_t prev_inc = 0, join_seq = -1, t_join = healed, inc;
    for (size_t i = 0; i < h->nev; i++)
        if (ev_is(h->ev[i], "join") && jint(h->ev[i], "learner", -1) == l && ev_t(h->ev[i]) < fs &&
            jint(h->ev[i], "incarnation", 0) > prev_inc)
            prev_inc = jint(h->ev[i], "incarnation", 0);
    inc = prev_inc;
    char why[448] = "";
    if (restart) {
        const json_t *j = next_join(h, l, fs, prev_inc);
        if (!j) {
            verdict(v, HYP_FAIL, 0, ">=", (double)p->merged, "merges",
                    "learner %d never joined again after the %s fault (incarnation stayed %lld)", l,
                    jstr(fault, "type"), (long long)prev_inc);
            return;
        }
        inc = jint(j, "incarnation", 0);
        join_seq = ev_seq(j);
        t_join = ev_t(j);
        if (t_join > healed + (int64_t)(p->join_s * 1000.0))
            note(why, sizeof(why), "joined %.1fs after the fault healed (limit %gs); ",
                 (t_join - healed) / 1000.0, p->join_s);
        if (p->pull_all) {
            int np = fragment_count(h);
            int64_t first_contrib = INT64_MAX;
            for (size_t i = 0; i < h->nev; i++)
                if (ev_is(h->ev[i], "contribution") && jint(h->ev[i], "learner", -1) == l &&
                    jint(h->ev[i], "incarnation", -1) == inc && ev_seq(h->ev[i]) < first_contrib)
                    first_contrib = ev_seq(h->ev[i]);
            int missing = 0, first_missing = -1;
            for (int f = 0; f < np; f++) {
                int64_t cur = 0;
                for (size_t i = 0; i < h->nev && ev_seq(h->ev[i]) < join_seq; i++) {
                    const json_t *e = h->ev[i];
                    if (ev_is(e, "start") && json_array_size(json_object_get(e, "versions")) > (size_t)f)
                        cur = json_integer_value(json_array_get(json_object_get(e, "versions"), (size_t)f));
                    if (ev_is(e, "merge") && jint(e, "fragment", -2) == f)
                        cur = jint(e, "version", cur);
                }
                int ok = 0;
                for (size_t i = 0; i < h->nev && !ok; i++) {
                    const json_t *e = h->ev[i];
                    ok = ev_is(e, "pull") && jint(e, "learner", -1) == l &&
                         jint(e, "incarnation", -1) == inc && jint(e, "fragment", -1) == f &&
                         ev_seq(e) > join_seq && ev_seq(e) < first_contrib && jint(e, "version", -1) >= cur;
                }
                if (!ok) {
                    if (missing == 0)
                        first_missing = f;
                    missing++;
                }
            }
            if (missing)
                note(why, sizeof(why),
                     "%d of %d fragments not pulled at the current version before its first "
                     "contribution (first: %d); ",
                     missing, np, first_missing);
        }
    }
    int64_t until = t_join + (int64_t)(p->merged_s * 1000.0);
    int64_t merged = 0;
    for (size_t i = 0; i < h->nev; i++) {
        const json_t *e = h->ev[i];
        if (ev_is(e, "merge") && ev_t(e) >= t_join && ev_t(e) <= until && ev_seq(e) > join_seq &&
            participated(e, l, inc))
            merged++;
    }
    if (merged < p->merged)
        note(why, sizeof(why), "%lld contributions merged within %gs of the join (need %lld); ",
             (long long)merged, p->merged_s, (long long)p->merged);
    /* Train loss: its last heartbeat beside the median of the others'. */
    double mine = NAN;
    double *others = calloc((size_t)h->learners, sizeof(double));
    int *seen = calloc((size_t)h->learners, sizeof(int));
    size_t no = 0;
    if (others && seen) {
        double *last = calloc((size_t)h->learners, sizeof(double));
        if (last) {
            for (size_t i = 0; i < h->nev; i++) {
                const json_t *e = h->ev[i];
                double loss;
                int64_t who = jint(e, "learner", -1);
                if (!ev_is(e, "heartbeat") || who < 0 || who >= h->learners || ev_t(e) < t_join ||
                    !jloss(e, "train_loss", &loss))
                    continue;
                if (who == l && jint(e, "incarnation", -1) != inc)
                    continue;
                last[who] = loss;
                seen[who] = 1;
            }
            for (int k = 0; k < h->learners; k++)
                if (seen[k] && k != l)
                    others[no++] = last[k];
            if (seen[l])
                mine = last[l];
            free(last);
        }
    }
    char lossnote[128] = "";
    if (!isnan(mine) && no > 0) {
        double o = median(others, no);
        double rel = o > 0 ? fabs(mine - o) / o : 0.0;
        snprintf(lossnote, sizeof(lossnote), ", train loss %.4f vs others' median %.4f", mine, o);
        if (rel > p->tol)
            note(why, sizeof(why), "train loss %.4f is %.1f%% away from the others' %.4f (tol %.1f%%); ",
                 mine, rel * 100.0, o, p->tol * 100.0);
    } else if (isnan(mine) && no > 0) {
        note(why, sizeof(why), "no heartbeat from learner %d after it rejoined; ", l);
    }
    free(others);
    free(seen);
    if (why[0]) {
        verdict(v, HYP_FAIL, (double)merged, ">=", (double)p->merged, "merges", "learner %d: %s", l, why);
        return;
    }
    verdict(
        v, HYP_PASS, (double)merged, ">=", (double)p->merged, "merges",
        "learner %d rejoined as incarnation %lld %.1fs after the %s fault healed, %lld contributions merged "
        "within %gs%s",
        l, (long long)inc, (t_join - healed) / 1000.0, jstr(fault, "type"), (long long)merged, p->merged_s,
        lossnote);
}

/* ---- no_global_downtime ---- */

static void eval_no_global_downtime(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    const hp *p = ctx;
    int k = p->min_live ? (int)p->min_live : h->quorum;
    size_t niv = 0;
    hx_interval *iv = down_intervals(h, &niv);
    if (!iv) {
        verdict(v, HYP_ERROR, NAN, "<=", p->max_gap_s, "s", "out of memory");
        return;
    }
    int64_t prev = -1, worst = 0, worst_at = 0, last_beat = -1;
    size_t merges = 0;
    for (size_t i = 0; i < h->nev; i++) {
        const json_t *e = h->ev[i];
        if (ev_is(e, "heartbeat") && ev_t(e) > last_beat)
            last_beat = ev_t(e);
        if (!ev_is(e, "merge"))
            continue;
        merges++;
        int64_t t = ev_t(e);
        if (prev >= 0) {
            int64_t gap = (t - prev) - excused_ms(h, iv, niv, k, prev, t);
            if (gap > worst) {
                worst = gap;
                worst_at = prev;
            }
        }
        prev = t;
    }
    /* Learners still heartbeating after the last merge: that tail counts. */
    if (prev >= 0 && last_beat > prev) {
        int64_t gap = (last_beat - prev) - excused_ms(h, iv, niv, k, prev, last_beat);
        if (gap > worst) {
            worst = gap;
            worst_at = prev;
        }
    }
    free(iv);
    if (merges == 0) {
        verdict(v, HYP_FAIL, NAN, "<=", p->max_gap_s, "s", "no merge in the history");
        return;
    }
    double w = worst / 1000.0;
    verdict(
        v, w <= p->max_gap_s ? HYP_PASS : HYP_FAIL, w, "<=", p->max_gap_s, "s",
        "longest gap between merges while >= %d learners were alive: %.2fs (from t=%.1f s of the run; %zu "
        "merges)",
        k, w, (double)(worst_at - hist_start(h)) / 1000.0, merges);
}

/* ---- goodput ---- */

/* Useful learner-ms of the merges in [a, b): each participant's merged
 * steps (1/P of them for a fragment merge) times its step time then (its
 * last heartbeat's step_ms before the merge; mean_ms[l] before its first),
 * so a phase of the run is weighed by the step times of that phase. */
static double useful_ms(const hyp_history *h, const double *mean_ms, int np, int64_t a, int64_t b,
                        double *steps)
{
    double useful = 0, *ms = malloc((size_t)h->learners * sizeof *ms);
    if (!ms)
        return NAN;
    memcpy(ms, mean_ms, (size_t)h->learners * sizeof *ms);
    for (size_t i = 0; i < h->nev; i++) {
        const json_t *e = h->ev[i];
        int64_t who = jint(e, "learner", -1);
        double x;
        if (ev_is(e, "heartbeat") && who >= 0 && who < h->learners && jnum(e, "step_ms", &x) && x > 0)
            ms[who] = x;
        if (!ev_is(e, "merge") || ev_t(e) < a || ev_t(e) >= b)
            continue;
        int64_t frag = jint(e, "fragment", -1);
        double w = frag < 0 || np <= 0 ? 1.0 : 1.0 / np;
        json_t *parts = json_object_get(e, "participants");
        for (size_t j = 0; j < json_array_size(parts); j++) {
            json_t *pa = json_array_get(parts, j);
            int64_t l = jint(pa, "learner", -1);
            if (l >= 0 && l < h->learners) {
                useful += w * (double)jint(pa, "steps", 0) * ms[l];
                *steps += w * (double)jint(pa, "steps", 0);
            }
        }
    }
    free(ms);
    return useful;
}

/* Goodput = useful learner-time / allocated learner-time. With min_rel the
 * figure is relative to the same run: goodput after the reference phase
 * (from the first join to the first fault's start, or ref_s) over goodput
 * in it, so that what a 2-core box or a CPU hog costs every learner alike
 * (a machine's capacity, not the faults) cancels out. */
static void eval_goodput(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    const hp *p = ctx;
    int np = fragment_count(h);
    int m = h->learners;
    double thr = p->has_min_rel ? p->min_rel : p->min;
    double *ms = calloc((size_t)m, sizeof(double)), *ms_n = calloc((size_t)m, sizeof(double));
    if (!ms || !ms_n) {
        free(ms), free(ms_n);
        verdict(v, HYP_ERROR, NAN, ">=", thr, "ratio", "out of memory");
        return;
    }
    int64_t first_join = -1;
    double all_ms = 0, all_n = 0;
    for (size_t i = 0; i < h->nev; i++) {
        const json_t *e = h->ev[i];
        if (ev_is(e, "join") && first_join < 0)
            first_join = ev_t(e);
        double x;
        int64_t who = jint(e, "learner", -1);
        if (ev_is(e, "heartbeat") && who >= 0 && who < m && jnum(e, "step_ms", &x) && x > 0) {
            ms[who] += x;
            ms_n[who] += 1;
            all_ms += x;
            all_n += 1;
        }
    }
    int missing_ms = 0;
    for (int l = 0; l < m; l++) {
        ms[l] = ms_n[l] > 0      ? ms[l] / ms_n[l]
                : all_n > 0      ? all_ms / all_n
                : p->has_step_ms ? p->step_ms
                                 : NAN;
        missing_ms |= isnan(ms[l]);
    }
    free(ms_n);
    double start_c;
    int64_t start = hyp_history_counter(h, HYP_C_START_MONO, &start_c) ? (int64_t)start_c : first_join;
    int64_t end = hist_end(h);
    if (start < 0 || end <= start) {
        free(ms);
        verdict(v, HYP_ERROR, NAN, ">=", thr, "ratio", "no run span (no join event and no start counter)");
        return;
    }
    if (missing_ms) {
        free(ms);
        verdict(v, HYP_ERROR, NAN, ">=", thr, "ratio",
                "no step time: no heartbeat step_ms and no step_ms param");
        return;
    }
    if (!p->has_min_rel) {
        double steps = 0, useful = useful_ms(h, ms, np, INT64_MIN, INT64_MAX, &steps);
        free(ms);
        double allocated = (double)m * (double)(end - start);
        double g = useful / allocated;
        verdict(
            v, g >= p->min ? HYP_PASS : HYP_FAIL, g, ">=", p->min, "ratio",
            "goodput %.3f: %.1f merged inner steps = %.1f learner-s useful of %.1f learner-s allocated (%d "
            "learners x %.1fs)",
            g, steps, useful / 1000.0, allocated / 1000.0, m, (end - start) / 1000.0);
        return;
    }
    /* the reference phase: first join .. first fault (or first join + ref_s) */
    int64_t a = first_join >= 0 ? first_join : start, ref_end = INT64_MAX;
    if (p->has_ref_s) {
        ref_end = a + (int64_t)(p->ref_s * 1000.0);
    } else {
        for (size_t i = 0; i < h->nfaults; i++) {
            int64_t fs = fault_start(h->faults[i].rec);
            if (fs >= 0 && fs < ref_end)
                ref_end = fs;
        }
    }
    if (ref_end == INT64_MAX || ref_end - a < 1000 || end - ref_end < 1000) {
        free(ms);
        verdict(
            v, HYP_ERROR, NAN, ">=", thr, "ratio",
            "min_rel needs a fault-free reference phase of >= 1 s after the first join and >= 1 s after it "
            "(reference %.1f s, rest %.1f s; set ref_s or start the faults later)",
            ref_end == INT64_MAX ? 0.0 : (ref_end - a) / 1000.0,
            ref_end == INT64_MAX ? 0.0 : (end - ref_end) / 1000.0);
        return;
    }
    double s_ref = 0, s_rest = 0;
    double g_ref = useful_ms(h, ms, np, a, ref_end, &s_ref) / ((double)m * (double)(ref_end - a));
    double g_rest = useful_ms(h, ms, np, ref_end, INT64_MAX, &s_rest) / ((double)m * (double)(end - ref_end));
    free(ms);
    if (!(g_ref > 0)) {
        verdict(v, HYP_ERROR, NAN, ">=", thr, "ratio",
                "no merged progress in the reference phase (first %.1f s after the first join)",
                (ref_end - a) / 1000.0);
        return;
    }
    double rel = g_rest / g_ref;
    verdict(v, rel >= thr ? HYP_PASS : HYP_FAIL, rel, ">=", thr, "ratio",
            "goodput %.3f after the reference phase over %.3f in it (%.1f s fault-free from the first join; "
            "%.1f and %.1f merged inner steps; %d learners)",
            g_rest, g_ref, (ref_end - a) / 1000.0, s_rest, s_ref, m);
}

/* ---- bandwidth ---- */

/* Tokens trained: the runner's counter, else each learner's largest
 * cumulative token count (heartbeats, final status). */
static double tokens_trained(const hyp_history *h)
{
    double c;
    if (hyp_history_counter(h, HYP_C_TOKENS, &c))
        return c;
    double total = 0;
    for (int l = 0; l < h->learners; l++) {
        int64_t best = h->finals[l].set ? h->finals[l].tokens : 0;
        for (size_t i = 0; i < h->nev; i++)
            if (ev_is(h->ev[i], "heartbeat") && jint(h->ev[i], "learner", -1) == l &&
                jint(h->ev[i], "tokens", 0) > best)
                best = jint(h->ev[i], "tokens", 0);
        total += (double)best;
    }
    return total;
}

static void eval_bandwidth(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    const hp *p = ctx;
    double in = 0, out = 0, bytes;
    const char *src;
    if (hyp_history_counter(h, HYP_C_BYTES_IN, &in) + hyp_history_counter(h, HYP_C_BYTES_OUT, &out) > 0) {
        bytes = in + out;
        src = "syncer bytes in+out";
    } else {
        bytes = 0;
        for (size_t i = 0; i < h->nev; i++)
            if (ev_is(h->ev[i], "contribution"))
                bytes += (double)jint(h->ev[i], "bytes", 0);
        src = "contribution payloads only (no syncer byte counters)";
    }
    double tokens = tokens_trained(h);
    if (tokens <= 0) {
        verdict(v, HYP_ERROR, NAN, "<=", p->max, "bytes/token", "no trained tokens in the history");
        return;
    }
    double bpt = bytes / tokens;
    verdict(v, bpt <= p->max ? HYP_PASS : HYP_FAIL, bpt, "<=", p->max, "bytes/token",
            "%.4g bytes per trained token (%.0f bytes from %s, %.0f tokens)", bpt, bytes, src, tokens);
}

/* ---- versions_monotonic ---- */

#define MAX_FRAGS 4096

static void eval_versions_monotonic(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    /* Index f+1 so that ddp's fragment -1 has a slot. */
    int64_t *cur = calloc(MAX_FRAGS + 1, sizeof(int64_t));
    if (!cur) {
        verdict(v, HYP_ERROR, NAN, "<=", 0, "violations", "out of memory");
        return;
    }
    for (size_t i = 0; i <= MAX_FRAGS; i++)
        cur[i] = -1;
    int64_t violations = 0, prev_seq = 0, merges = 0, starts = 0;
    char first[256] = "";
    for (size_t i = 0; i < h->nev; i++) {
        const json_t *e = h->ev[i];
        int64_t seq = ev_seq(e);
        /* A syncer that started without a valid checkpoint (start_state
         * "lost" or "corrupt") serves nothing until it rebuilt the model
         * from the learners (its "rebuild" event, versions above anything
         * published): its start versions are never published. */
        const char *st = ev_is(e, "start") ? jstr(e, "start_state") : "";
        int lost = strcmp(st, "lost") == 0 || strcmp(st, "corrupt") == 0;
        if (i > 0 && seq != prev_seq + 1) {
            violations++;
            if (!first[0])
                snprintf(first, sizeof(first), "event seq %lld follows %lld (gap or repeat)", (long long)seq,
                         (long long)prev_seq);
        }
        prev_seq = seq;
        if (ev_is(e, "rebuild")) {
            json_t *fs = json_object_get(e, "fragments"), *x;
            size_t k;
            json_array_foreach(fs, k, x)
            {
                int64_t f = jint(x, "fragment", -1), ver = jint(x, "version", -1);
                if (f < 0 || f >= MAX_FRAGS)
                    continue;
                if (ver < cur[f + 1]) {
                    violations++;
                    if (!first[0])
                        snprintf(first, sizeof(first),
                                 "fragment %lld rebuilt at version %lld after reaching %lld (seq %lld)",
                                 (long long)f, (long long)ver, (long long)cur[f + 1], (long long)seq);
                } else {
                    cur[f + 1] = ver;
                }
            }
        } else if (ev_is(e, "start")) {
            starts++;
            json_t *vs = json_object_get(e, "versions");
            for (size_t f = 0; f < json_array_size(vs) && f < MAX_FRAGS && !lost; f++) {
                int64_t ver = json_integer_value(json_array_get(vs, f));
                if (ver < cur[f + 1]) {
                    violations++;
                    if (!first[0])
                        snprintf(first, sizeof(first),
                                 "fragment %zu restarted at version %lld after reaching %lld (seq %lld)", f,
                                 (long long)ver, (long long)cur[f + 1], (long long)seq);
                }
                if (ver > cur[f + 1])
                    cur[f + 1] = ver;
            }
        } else if (ev_is(e, "merge")) {
            merges++;
            int64_t f = jint(e, "fragment", -1), ver = jint(e, "version", -1);
            if (f < -1 || f >= MAX_FRAGS)
                continue;
            if (ver <= cur[f + 1]) {
                violations++;
                if (!first[0])
                    snprintf(first, sizeof(first), "fragment %lld merged version %lld after %lld (seq %lld)",
                             (long long)f, (long long)ver, (long long)cur[f + 1], (long long)seq);
            } else {
                cur[f + 1] = ver;
            }
        }
    }
    free(cur);
    if (merges == 0) {
        verdict(v, HYP_ERROR, NAN, "<=", 0, "violations", "no merge in the history");
        return;
    }
    if (violations) {
        verdict(v, HYP_FAIL, (double)violations, "<=", 0, "violations", "%lld violation%s; first: %s",
                (long long)violations, violations == 1 ? "" : "s", first);
        return;
    }
    verdict(v, HYP_PASS, 0, "<=", 0, "violations",
            "%lld merges and %lld syncer start%s: every fragment version only went up, event seq gapless",
            (long long)merges, (long long)starts, starts == 1 ? "" : "s");
}

/* ---- data_accounting ---- */

static void eval_data_accounting(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    const hp *p = ctx;
    double target_c = 0;
    int64_t target = p->steps;
    if (!target && hyp_history_counter(h, HYP_C_STEPS_TARGET, &target_c))
        target = (int64_t)target_c;
    double lost_tok = 0, re_tok = 0;
    int64_t lost_steps = 0, re_steps = 0;
    int worst = -1;
    for (int l = 0; l < h->learners; l++) {
        /* Walk this learner's incarnations in join order: [resumed_step,
         * highest step it reported). */
        int64_t covered = 0, tok_last = 0, step_last = 0;
        int64_t inc = -1, inc_from = 0, inc_top = 0;
        int joined = 0;
        int64_t l_lost = 0, l_re = 0;
        for (size_t i = 0; i <= h->nev; i++) {
            const json_t *e = i < h->nev ? h->ev[i] : NULL;
            if (e && jint(e, "learner", -1) != l)
                continue;
            int is_join = e && ev_is(e, "join");
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
                    inc = jint(e, "incarnation", 0);
                    inc_from = jint(e, "resumed_step", 0);
                    inc_top = inc_from;
                }
                continue;
            }
            if (ev_is(e, "heartbeat") && jint(e, "incarnation", -1) == inc) {
                int64_t s = jint(e, "step", 0);
                if (s > inc_top)
                    inc_top = s;
                if (s > 0 && jint(e, "tokens", 0) > 0) {
                    step_last = s;
                    tok_last = jint(e, "tokens", 0);
                }
            }
        }
        if (h->finals[l].set && h->finals[l].step > covered) {
            covered = h->finals[l].step;
            if (h->finals[l].step > 0 && h->finals[l].tokens > 0) {
                step_last = h->finals[l].step;
                tok_last = h->finals[l].tokens;
            }
        }
        if (target > 0 && target - covered > p->slack_steps)
            l_lost += target - covered;
        double tps = step_last > 0 ? (double)tok_last / (double)step_last : 0.0;
        if (l_lost > 0 && worst < 0)
            worst = l;
        lost_steps += l_lost;
        re_steps += l_re;
        lost_tok += (double)l_lost * tps;
        re_tok += (double)l_re * tps;
        if (!joined && target > 0 && worst < 0)
            worst = l;
    }
    char tgt[64];
    if (target > 0)
        snprintf(tgt, sizeof(tgt), "target %lld steps per learner", (long long)target);
    else
        snprintf(tgt, sizeof(tgt), "no step target: only gaps checked");
    if (lost_steps > 0) {
        verdict(v, HYP_FAIL, lost_tok, "<=", 0, "tokens",
                "%lld steps (%.0f tokens) never trained, first on learner %d; %lld steps (%.0f tokens) "
                "re-trained "
                "after restarts; %s",
                (long long)lost_steps, lost_tok, worst, (long long)re_steps, re_tok, tgt);
        return;
    }
    if (p->has_max_retrained && re_tok > p->max_retrained) {
        verdict(v, HYP_FAIL, lost_tok, "<=", 0, "tokens",
                "none lost, but %.0f tokens re-trained after restarts exceed max_retrained_tokens %.0f",
                re_tok, p->max_retrained);
        return;
    }
    verdict(v, HYP_PASS, lost_tok, "<=", 0, "tokens",
            "no token lost; %lld steps (%.0f tokens) re-trained after restarts; %s", (long long)re_steps,
            re_tok, tgt);
}

/* ---- fault_effective ---- */

/* A cross-check against the syncer's events for kinds that leave a trace
 * there; NULL when it holds (or the kind leaves none). */
static const char *cross_check(const hyp_history *h, int l, const json_t *r)
{
    const char *type = jstr(r, "type");
    int64_t s = fault_start(r), e = fault_end(r);
    json_t *params = json_object_get(r, "params");
    if (strcmp(type, "nan") == 0) {
        for (size_t i = 0; i < h->nev; i++)
            if (ev_is(h->ev[i], "reject") && jint(h->ev[i], "learner", -1) == l && ev_t(h->ev[i]) >= s &&
                strcmp(jstr(h->ev[i], "reason"), "nonfinite") == 0)
                return NULL;
        return "no nonfinite reject by the syncer after it";
    }
    if (is_restart_kind(type) && json_is_integer(json_object_get(params, "restart_after_ms"))) {
        int64_t prev = 0;
        for (size_t i = 0; i < h->nev; i++)
            if (ev_is(h->ev[i], "join") && jint(h->ev[i], "learner", -1) == l && ev_t(h->ev[i]) < s)
                prev = jint(h->ev[i], "incarnation", prev);
        return next_join(h, l, s, prev) ? NULL : "the learner never joined again with a new incarnation";
    }
    double off;
    if (strcmp(type, "clock") == 0 && jnum(params, "offset_s", &off) && off != 0.0) {
        for (size_t i = 0; i < h->nev; i++) {
            double skew;
            const json_t *ev = h->ev[i];
            if (ev_is(ev, "heartbeat") && jint(ev, "learner", -1) == l && ev_t(ev) >= s && ev_t(ev) <= e &&
                jnum(ev, "clock_skew_ms", &skew) && fabs(skew) >= 0.5 * fabs(off) * 1000.0)
                return NULL;
        }
        return "no heartbeat showed the clock skew";
    }
    return NULL;
}

static void eval_fault_effective(const void *ctx, const hyp_history *h, hyp_verdict *v)
{
    const hp *p = ctx;
    size_t total = 0, ok = 0;
    char why[384] = "";
    for (size_t i = 0; i < h->nfaults; i++) {
        const json_t *r = h->faults[i].rec;
        total++;
        json_t *ev = json_object_get(r, "evidence");
        const char *state = jstr(r, "state");
        const char *bad = NULL;
        if (strcmp(state, "failed") == 0)
            bad = json_is_string(json_object_get(r, "error")) ? jstr(r, "error") : "state failed";
        else if (!json_is_object(ev) || json_object_size(ev) == 0)
            bad = "no evidence";
        else
            bad = cross_check(h, h->faults[i].learner, r);
        if (!bad) {
            ok++;
            continue;
        }
        if (!why[0])
            snprintf(why, sizeof(why), "%s fault %s on learner %d: %s", jstr(r, "type"), jstr(r, "id"),
                     h->faults[i].learner, bad);
    }
    for (size_t i = 0; i < h->nact; i++) {
        if (strcmp(jstr(h->act[i], "phase"), "fail") != 0)
            continue;
        total++;
        if (!why[0])
            snprintf(why, sizeof(why), "action %s failed to inject: %s", jstr(h->act[i], "action"),
                     jstr(h->act[i], "error"));
    }
    if (total == 0) {
        verdict(v, p->allow_none ? HYP_PASS : HYP_FAIL, NAN, ">=", 1.0, "ratio", "no fault was injected%s",
                p->allow_none ? " (allowed)" : "");
        return;
    }
    double ratio = (double)ok / (double)total;
    if (ok < total) {
        verdict(v, HYP_FAIL, ratio, ">=", 1.0, "ratio", "%zu of %zu faults showed evidence; %s", ok, total,
                why);
        return;
    }
    verdict(v, HYP_PASS, ratio, ">=", 1.0, "ratio", "all %zu faults showed evidence they took effect", total);
}

/* ---- registry ---- */

static const hypothesis hyp_loss_continuity = {
    "loss_continuity",
    "every eval loss is finite, none rises more than max_jump_rel over the last one before a fault, and the "
    "last one by recover_s after the heal is at or below reference x (1 + slack_rel)",
    "max_jump_rel (rel, >= 0, required), recover_s (s, > 0, required), slack_rel (rel, >= 0, default 0.02)",
    parse_loss_continuity,
    eval_loss_continuity,
    hp_free};
static const hypothesis hyp_loss_target = {
    "loss_target",
    "the final eval loss (or the lowest one within by_s) is <= max, or <= control x (1 + tol)",
    "max (nats) | tol (rel, with control in nats or the runner's control run); by_s (s, optional)",
    parse_loss_target,
    eval_loss_target,
    hp_free};
static const hypothesis hyp_reintegration = {"reintegration",
                                             "the learner joins with a new incarnation within join_s of the "
                                             "fault healing, pulls every fragment at the "
                                             "current version before contributing, has >= merged "
                                             "contributions merged within merged_s, and its train loss "
                                             "is within tol of the others' median",
                                             "learner (id, required), join_s (s, required), merged (count, "
                                             "default 1), merged_s (s, required), tol (rel, "
                                             "default 0.10), pull_all (bool, default true)",
                                             parse_reintegration,
                                             eval_reintegration,
                                             hp_free};
static const hypothesis hyp_no_global_downtime = {
    "no_global_downtime",
    "the longest gap between merges, not counting time with fewer than min_live learners alive, is <= "
    "max_gap_s",
    "max_gap_s (s, required), min_live (learners, default the quorum K)",
    parse_no_global_downtime,
    eval_no_global_downtime,
    hp_free};
static const hypothesis hyp_goodput = {
    "goodput",
    "useful learner-time / allocated learner-time >= min (useful = merged inner steps x step time)",
    "min (ratio 0..1, required), step_ms (ms, used only without heartbeats)",
    parse_goodput,
    eval_goodput,
    hp_free};
static const hypothesis hyp_bandwidth = {"bandwidth",
                                         "bytes on the wire per trained token <= max",
                                         "max (bytes/token, required)",
                                         parse_bandwidth,
                                         eval_bandwidth,
                                         hp_free};
static const hypothesis hyp_versions_monotonic = {
    "versions_monotonic",
    "no fragment version ever goes backwards, also across syncer restarts; the event seq is gapless",
    "(none)",
    parse_versions_monotonic,
    eval_versions_monotonic,
    hp_free};
static const hypothesis hyp_data_accounting = {
    "data_accounting",
    "every learner trained its whole shard (no step skipped, final step >= steps - slack_steps); re-trained "
    "tokens "
    "are counted and reported",
    "steps (per learner, default the run's), slack_steps (default 0), max_retrained_tokens (optional)",
    parse_data_accounting,
    eval_data_accounting,
    hp_free};
static const hypothesis hyp_fault_effective = {
    "fault_effective",
    "every injected fault has evidence and did not fail; nan faults are rejected by the syncer, restarted "
    "kills "
    "rejoin, clock skews show in heartbeats",
    "allow_none (bool, default false: an experiment that injected nothing fails)",
    parse_fault_effective,
    eval_fault_effective,
    hp_free};

const hypothesis *const hyp_table[] = {
    &hyp_loss_continuity,
    &hyp_loss_target,
    &hyp_reintegration,
    &hyp_no_global_downtime,
    &hyp_goodput,
    &hyp_bandwidth,
    &hyp_versions_monotonic,
    &hyp_data_accounting,
    &hyp_fault_effective,
    NULL,
};

const hypothesis *hyp_find(const char *name)
{
    for (const hypothesis *const *p = hyp_table; name && *p; p++)
        if (strcmp((*p)->name, name) == 0)
            return *p;
    return NULL;
}

/* ---- specs ---- */

struct hyp_spec {
    const hypothesis *kind; /* registry entry */
    void *ctx;              /* parsed params (kind->free) */
    char *label;            /* "name" or the hypothesis name */
    json_t *json;           /* the entry as written (owned) */
};

hyp_spec *hyp_spec_parse(const json_t *spec, const char *path, int learners, jv_diag *d)
{
    if (!json_is_object(spec)) {
        char got[64];
        jv_describe(got, sizeof(got), spec);
        jv_diag_add(d, path, "expected a hypothesis object, got %s", got);
        return NULL;
    }
    const char *name = NULL, *label = NULL;
    size_t before = jv_diag_count(d);
    char p[JV_PATHLEN];
    jv_path_key(p, sizeof(p), path, "hypothesis");
    if (jv_get_string(d, path, spec, "hypothesis", 1, NULL, &name) != 1)
        return NULL;
    const hypothesis *kind = hyp_find(name);
    if (!kind) {
        char list[512] = "";
        for (const hypothesis *const *k = hyp_table; *k; k++)
            note(list, sizeof(list), "%s%s", list[0] ? "|" : "", (*k)->name);
        jv_diag_add(d, p, "expected a hypothesis (%s), got \"%s\"", list, name);
        return NULL;
    }
    if (jv_get_string(d, path, spec, "name", 0, NULL, &label) == 1 && !label[0]) {
        jv_path_key(p, sizeof(p), path, "name");
        jv_diag_add(d, p, "expected a non-empty string, got \"\"");
    }
    void *ctx = NULL;
    kind->parse(spec, path, learners, d, &ctx);
    hyp_spec *s = NULL;
    if (jv_diag_count(d) == before && ctx)
        s = calloc(1, sizeof(*s));
    if (!s) {
        if (ctx)
            kind->free(ctx);
        if (jv_diag_count(d) == before)
            jv_diag_add(d, path, "out of memory");
        return NULL;
    }
    s->kind = kind;
    s->ctx = ctx;
    s->label = strdup(label && label[0] ? label : kind->name);
    s->json = json_deep_copy(spec);
    if (!s->label || !s->json) {
        hyp_spec_free(s);
        jv_diag_add(d, path, "out of memory");
        return NULL;
    }
    return s;
}

void hyp_spec_free(hyp_spec *s)
{
    if (!s)
        return;
    if (s->ctx)
        s->kind->free(s->ctx);
    free(s->label);
    json_decref(s->json);
    free(s);
}

const hypothesis *hyp_spec_kind(const hyp_spec *s)
{
    return s->kind;
}

const char *hyp_spec_label(const hyp_spec *s)
{
    return s->label;
}

const json_t *hyp_spec_json(const hyp_spec *s)
{
    return s->json;
}

void hyp_spec_eval(const hyp_spec *s, const hyp_history *h, hyp_verdict *v)
{
    memset(v, 0, sizeof(*v));
    s->kind->eval(s->ctx, h, v);
}
