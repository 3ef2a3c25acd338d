/* schedule.c - targets, times and seeded Poisson chaos draws (see
 * schedule.h). */
#include "harness/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/rng.h"

/* ---- targets ---- */

/* k distinct ids out of 0..m-1 (partial Fisher-Yates), sorted. */
static int pick(cx_rng *r, int m, int k, int *ids, int max)
{
    int *all = malloc((size_t)m * sizeof(int));
    if (!all)
        return 0;
    for (int i = 0; i < m; i++)
        all[i] = i;
    if (k > m)
        k = m;
    for (int i = 0; i < k; i++) {
        int j = i + (int)cx_rng_below(r, (uint64_t)(m - i));
        int t = all[i];
        all[i] = all[j];
        all[j] = t;
    }
    int n = k < max ? k : max;
    for (int i = 1; i < n; i++) /* sort the picked prefix (tiny) */
        for (int j = i; j > 0 && all[j - 1] > all[j]; j--) {
            int t = all[j];
            all[j] = all[j - 1];
            all[j - 1] = t;
        }
    memcpy(ids, all, (size_t)n * sizeof(int));
    free(all);
    return n;
}

static int resolve(const experiment *e, const exp_targets *t, uint64_t stream_seed, int *ids, int max)
{
    if (t->kind == EXP_TARGET_IDS) {
        int n = t->nids < max ? t->nids : max;
        memcpy(ids, t->ids, (size_t)n * sizeof(int));
        return n;
    }
    cx_rng r;
    cx_rng_seed(&r, stream_seed);
    int k = t->kind == EXP_TARGET_RANDOM ? t->random_n : (int)ceil(t->percent / 100.0 * e->learners - 1e-9);
    if (k < 1)
        k = 1;
    return pick(&r, e->learners, k, ids, max);
}

int sched_resolve_targets(const experiment *e, int action, uint64_t seed, int *ids, int max)
{
    if (action < 0 || action >= e->nmethod)
        return 0;
    return resolve(e, &e->method[action].targets, cx_seed_derive(seed, 2000 + (uint64_t)action), ids, max);
}

/* ---- the timeline ---- */

typedef struct busy {
    int learner;
    double a, b; /* [a, b) s */
} busy;

typedef struct builder {
    schedule *s;
    int cap;
    busy *busy;
    int nbusy, capbusy;
} builder;

static sched_entry *push(builder *b)
{
    if (b->s->n == b->cap) {
        int ncap = b->cap ? b->cap * 2 : 32;
        sched_entry *p = realloc(b->s->entries, (size_t)ncap * sizeof(*p));
        if (!p)
            return NULL;
        b->s->entries = p;
        b->cap = ncap;
    }
    sched_entry *x = &b->s->entries[b->s->n++];
    memset(x, 0, sizeof(*x));
    x->after = -1;
    return x;
}

static int push_busy(builder *b, int learner, double a, double dur)
{
    if (b->nbusy == b->capbusy) {
        int ncap = b->capbusy ? b->capbusy * 2 : 32;
        busy *p = realloc(b->busy, (size_t)ncap * sizeof(*p));
        if (!p)
            return CX_ENOMEM;
        b->busy = p;
        b->capbusy = ncap;
    }
    b->busy[b->nbusy].learner = learner;
    b->busy[b->nbusy].a = a;
    b->busy[b->nbusy].b = a + dur;
    b->nbusy++;
    return 0;
}

/* learner has a fault overlapping [a, z). */
static int is_busy(const builder *b, int learner, double a, double z)
{
    for (int i = 0; i < b->nbusy; i++)
        if (b->busy[i].learner == learner && b->busy[i].a < z && a < b->busy[i].b)
            return 1;
    return 0;
}

static int live_at(const builder *b, int m, int extra_down, double t)
{
    int live = 0;
    for (int l = 0; l < m; l++)
        live += l != extra_down && !is_busy(b, l, t, t + 1e-9);
    return live;
}

/* Fewest learners free of faults at any time in [a, z) if extra_down were
 * down too: the count only changes where an interval starts, so checking
 * a and every start inside is enough. */
static int min_live_over(const builder *b, int m, int extra_down, double a, double z)
{
    int least = live_at(b, m, extra_down, a);
    for (int i = 0; i < b->nbusy; i++)
        if (b->busy[i].a > a && b->busy[i].a < z) {
            int l = live_at(b, m, extra_down, b->busy[i].a);
            if (l < least)
                least = l;
        }
    return least;
}

static double draw_recovery(const exp_chaos *c, cx_rng *r)
{
    switch (c->recovery) {
    case EXP_DIST_FIXED:
        return c->mean_s;
    case EXP_DIST_UNIFORM:
        return c->min_s + cx_rng_uniform(r) * (c->max_s - c->min_s);
    case EXP_DIST_EXPONENTIAL: {
        double x = cx_rng_exponential(r, c->mean_s);
        if (x < c->min_s)
            x = c->min_s;
        if (x > c->max_s)
            x = c->max_s;
        return x;
    }
    }
    return c->mean_s;
}

static int draw_type(const exp_chaos *c, cx_rng *r)
{
    double total = 0;
    for (int i = 0; i < c->nfaults; i++)
        total += c->faults[i].weight;
    double x = cx_rng_uniform(r) * total;
    for (int i = 0; i < c->nfaults; i++) {
        if (x < c->faults[i].weight)
            return i;
        x -= c->faults[i].weight;
    }
    return c->nfaults - 1;
}

static int draw_chaos(builder *b, const experiment *e, uint64_t seed, char *err, size_t errlen)
{
    const exp_chaos *c = &e->chaos;
    int m = e->learners;
    cx_rng *rng = calloc((size_t)m, sizeof(cx_rng));
    double *next = calloc((size_t)m, sizeof(double));
    if (!rng || !next) {
        free(rng);
        free(next);
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    for (int u = 0; u < m; u++) {
        cx_rng_seed(&rng[u], cx_seed_derive(seed, 10000 + (uint64_t)u));
        next[u] = c->start_s + cx_rng_exponential(&rng[u], c->mtbf_s);
    }
    int rc = 0;
    for (long draws = 0;; draws++) {
        int u = -1;
        for (int i = 0; i < m; i++)
            if (next[i] < c->end_s && (u < 0 || next[i] < next[u]))
                u = i;
        if (u < 0)
            break;
        if (draws >= SCHED_MAX_DRAWS) {
            rc = cx_fail(err, errlen, CX_ETOOBIG, "chaos: more than %d draws (mtbf_s %g over %gs x %d units)",
                         SCHED_MAX_DRAWS, c->mtbf_s, c->end_s - c->start_s, m);
            break;
        }
        double t = next[u];
        double rec = draw_recovery(c, &rng[u]);
        int k = draw_type(c, &rng[u]);
        int64_t dur = (int64_t)llround(rec * 1000.0);
        if (dur < 1)
            dur = 1;
        double until = t + dur / 1000.0;
        if (is_busy(b, u, t, until)) {
            b->s->skipped_busy++;
            next[u] = t + cx_rng_exponential(&rng[u], c->mtbf_s);
            continue;
        }
        if (min_live_over(b, m, u, t, until) < c->min_live) {
            b->s->skipped_floor++;
            next[u] = t + cx_rng_exponential(&rng[u], c->mtbf_s);
            continue;
        }
        sched_entry *x = push(b);
        if (!x || push_busy(b, u, t, dur / 1000.0) < 0) {
            rc = cx_fail(err, errlen, CX_ENOMEM, "out of memory");
            break;
        }
        snprintf(x->name, sizeof(x->name), "chaos-%d", b->s->chaos_drawn);
        x->action = -1;
        x->fault = c->faults[k].type;
        x->learner = u;
        x->when = EXP_AT_S;
        x->at_s = t;
        x->duration_ms = dur;
        x->params = c->faults[k].params;
        x->toxicity = 1.0;
        x->seed = cx_seed_derive(seed, 3000000 + (uint64_t)b->s->chaos_drawn) & INT64_MAX;
        b->s->chaos_drawn++;
        next[u] = t + dur / 1000.0 + cx_rng_exponential(&rng[u], c->mtbf_s);
    }
    free(rng);
    free(next);
    return rc;
}

static int entry_rank(const sched_entry *x)
{
    return x->when == EXP_AT_S ? 0 : x->when == EXP_AT_OUTER_STEP ? 1 : 2;
}

static int cmp_entry(const void *pa, const void *pb)
{
    const sched_entry *a = pa, *b = pb;
    int ra = entry_rank(a), rb = entry_rank(b);
    if (ra != rb)
        return ra - rb;
    if (ra == 0 && a->at_s != b->at_s)
        return a->at_s < b->at_s ? -1 : 1;
    if (ra == 1 && a->at_outer_step != b->at_outer_step)
        return a->at_outer_step < b->at_outer_step ? -1 : 1;
    /* Stable tie-break: method order, then learner, then chaos order. */
    if (a->action != b->action)
        return a->action < 0 ? 1 : b->action < 0 ? -1 : a->action - b->action;
    if (a->learner != b->learner)
        return a->learner - b->learner;
    return strcmp(a->name, b->name);
}

int sched_build(const experiment *e, uint64_t seed, schedule **out, char *err, size_t errlen)
{
    *out = NULL;
    builder b = {0};
    b.s = calloc(1, sizeof(schedule));
    int *ids = calloc((size_t)(e->learners > 0 ? e->learners : 1), sizeof(int));
    if (!b.s || !ids) {
        free(b.s);
        free(ids);
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    b.s->seed = seed;
    int rc = 0;
    for (int i = 0; i < e->nmethod && rc == 0; i++) {
        const exp_action *a = &e->method[i];
        int n = sched_resolve_targets(e, i, seed, ids, e->learners);
        for (int k = 0; k < n; k++) {
            sched_entry *x = push(&b);
            if (!x) {
                rc = cx_fail(err, errlen, CX_ENOMEM, "out of memory");
                break;
            }
            x->action = i;
            snprintf(x->name, sizeof(x->name), "%s", a->name);
            x->fault = a->fault;
            x->learner = ids[k];
            x->when = a->when;
            x->at_s = a->at_s;
            x->at_outer_step = a->at_outer_step;
            x->after = a->after;
            x->duration_ms = a->duration_ms;
            x->wait_ms = a->skip_if_not_running ? 0 : a->wait_ms;
            x->until_end = a->until_end;
            x->params = a->params;
            x->toxicity = a->toxicity;
            x->has_toxicity = a->has_toxicity;
            /* One fault per target: each gets its own seed. */
            uint64_t base = a->has_seed ? a->seed : exp_action_seed(seed, i);
            x->seed = k == 0 ? base : cx_seed_derive(base, (uint64_t)k) & INT64_MAX;
            if (a->when == EXP_AT_S && push_busy(&b, ids[k], a->at_s, a->duration_ms / 1000.0) < 0)
                rc = cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        }
    }
    free(ids);
    if (rc == 0 && e->chaos.enabled)
        rc = draw_chaos(&b, e, seed, err, errlen);
    free(b.busy);
    if (rc < 0) {
        sched_free(b.s);
        return rc;
    }
    if (b.s->n > 1)
        qsort(b.s->entries, (size_t)b.s->n, sizeof(sched_entry), cmp_entry);
    *out = b.s;
    return 0;
}

void sched_free(schedule *s)
{
    if (!s)
        return;
    free(s->entries);
    free(s);
}

json_t *sched_json(const schedule *s)
{
    json_t *arr = json_array();
    for (int i = 0; arr && i < s->n; i++) {
        const sched_entry *x = &s->entries[i];
        json_t *o =
            json_pack("{s:s, s:s, s:i, s:I, s:O, s:I}", "name", x->name, "fault", x->fault ? x->fault : "",
                      "learner", x->learner, "duration_ms", (json_int_t)x->duration_ms, "params",
                      x->params ? x->params : json_null(), "seed", (json_int_t)x->seed);
        if (!o)
            continue;
        if (x->when == EXP_AT_S)
            json_object_set_new(o, "at_s", json_real(x->at_s));
        else if (x->when == EXP_AT_OUTER_STEP)
            json_object_set_new(o, "at_outer_step", json_integer(x->at_outer_step));
        else
            json_object_set_new(o, "after", json_integer(x->after));
        if (x->has_toxicity)
            json_object_set_new(o, "toxicity", json_real(x->toxicity));
        json_object_set_new(o, "source", json_string(x->action < 0 ? "chaos" : "method"));
        json_array_append_new(arr, o);
    }
    return json_pack("{s:I, s:i, s:i, s:i, s:o}", "seed", (json_int_t)(s->seed & INT64_MAX), "chaos_drawn",
                     s->chaos_drawn, "skipped_floor", s->skipped_floor, "skipped_busy", s->skipped_busy,
                     "entries", arr ? arr : json_array());
}
