/* sim.c - the discrete-event goodput simulator (see sim.h, docs/simulate.md).
 *
 * One trial is a single event loop over a binary heap of timed events. Each
 * group of chips (the whole job for DP and elastic DP, one learner for
 * decoupled) owns one random stream and at most one pending failure
 * arrival; its failures are a Poisson process at rate chips/MTBF in wall
 * time, thinned for chips whose domain is already down. Nothing is stepped
 * per chip or per training step, so 2.4M chips over 30 days is ~200k
 * failure events: milliseconds.
 *
 * Lifecycle of a group (each transition names the function doing it):
 *
 *   restart group (DP, or a learner with learner_elastic = 0):
 *
 *            grp_ckpt_due               grp_ckpt_end (commit pending work)
 *   RUNNING ----------------> CHECKPOINTING ----------------> RUNNING
 *      |                           |
 *      | grp_fail (pending work    | grp_fail (checkpoint and pending
 *      v  lost, restart drawn)     v  work lost)
 *   STOPPED <----------------------+
 *      |  grp_fail: none (not interrupted), fold (nothing) or extend
 *      |            (restart drawn again)
 *      +--- grp_stop_end ---> RUNNING
 *
 *   elastic group (elastic DP, or a learner with learner_elastic = 1):
 *
 *             grp_fail / grp_recover (re-shard)
 *   RUNNING --------------------------------------> STOPPED
 *      ^                                              |  grp_fail: none, or domain down + fold/extend
 *      |      grp_stop_end (alive chips > 0)          |  grp_recover: domain back, folded in
 *      +----------------------------------------------+
 *                     grp_stop_end (no chip alive)    |
 *   WAITING <-----------------------------------------+
 *      |  grp_recover (re-shard)
 *      +------------------> STOPPED
 *
 * States and what holds:
 *   RUNNING        every alive chip computes; restart groups accrue pending
 *                  (uncommitted) work, elastic groups commit as they go
 *   CHECKPOINTING  restart group only: nothing computes; pending work is
 *                  being made durable
 *   STOPPED        nothing computes; a grp_stop_end event with the group's
 *                  current generation is in the heap
 *   WAITING        elastic group only: every domain is down
 */
#include "sim/sim.h"

#include "common/rng.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

#define SIM_SECONDS_PER_YEAR (365.25 * 86400.0)
#define SIM_HEAP_CAP ((size_t)1 << 26) /* events; far above any sane run */

/* ---- sim: random numbers (common/rng.h; one stream per group) ---- */

/* A duration with the configured shape and the given mean. */
static double rng_duration(cx_rng *r, const sim_params *p, double mean)
{
    if (mean <= 0)
        return 0;
    switch (p->dist) {
    case SIM_DIST_FIXED:
        return mean;
    case SIM_DIST_EXP:
        return cx_rng_exponential(r, mean);
    case SIM_DIST_LOGNORMAL: {
        double sig = p->lognormal_sigma;
        return exp(log(mean) - 0.5 * sig * sig + sig * cx_rng_normal(r));
    }
    }
    return mean;
}

/* ---- sim: event heap ---- */

enum ev_kind {
    EV_FAIL,     /* next failure arrival of a group */
    EV_RECOVER,  /* a down domain is back in service */
    EV_STOP_END, /* a restart or re-shard completes (generation-checked) */
    EV_CKPT_DUE, /* a restart group starts a checkpoint (generation-checked) */
    EV_CKPT_END, /* a checkpoint is durable (generation-checked) */
};

typedef struct sim_event {
    double t_s;     /* when, s since trial start */
    uint64_t seq;   /* insertion order: deterministic tie-break */
    int64_t domain; /* EV_RECOVER: domain index in its group */
    uint32_t group; /* group index */
    uint32_t gen;   /* group generation when scheduled */
    uint8_t kind;   /* enum ev_kind */
} sim_event;

typedef struct sim_heap {
    sim_event *ev; /* 1 + len used, min-heap on (t_s, seq) */
    size_t len;    /* events */
    size_t cap;    /* allocated events */
    uint64_t seq;  /* next sequence number */
} sim_heap;

static int ev_before(const sim_event *a, const sim_event *b)
{
    return a->t_s < b->t_s || (a->t_s == b->t_s && a->seq < b->seq);
}

static int heap_push(sim_heap *h, sim_event e)
{
    if (h->len == h->cap) {
        if (h->cap >= SIM_HEAP_CAP)
            return CX_ETOOBIG;
        size_t ncap = h->cap ? h->cap * 2 : 1024;
        sim_event *n = realloc(h->ev, ncap * sizeof *n);
        if (!n)
            return CX_ENOMEM;
        h->ev = n;
        h->cap = ncap;
    }
    e.seq = h->seq++;
    size_t i = h->len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!ev_before(&e, &h->ev[parent]))
            break;
        h->ev[i] = h->ev[parent];
        i = parent;
    }
    h->ev[i] = e;
    return 0;
}

static sim_event heap_pop(sim_heap *h)
{
    assert(h->len > 0);
    sim_event top = h->ev[0];
    sim_event last = h->ev[--h->len];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const sim_event *best = &last;
        if (l < h->len && ev_before(&h->ev[l], best)) {
            m = l;
            best = &h->ev[l];
        }
        if (r < h->len && ev_before(&h->ev[r], best))
            m = r;
        if (m == i)
            break;
        h->ev[i] = h->ev[m];
        i = m;
    }
    if (h->len > 0)
        h->ev[i] = last;
    return top;
}

/* ---- sim: groups ---- */

typedef enum grp_state { GRP_RUNNING, GRP_CHECKPOINTING, GRP_STOPPED, GRP_WAITING } grp_state;

typedef struct sim_group {
    int64_t chips;         /* chips allocated to this group */
    int64_t alive_chips;   /* chips in domains that are up (elastic), chips */
    int64_t ndomains;      /* failure domains, count */
    uint8_t *down;         /* [ndomains] 1 = domain out of service (elastic only) */
    int elastic;           /* 1 elastic, 0 restart */
    grp_state state;       /* see the diagram at the top */
    uint32_t gen;          /* bumped to invalidate pending stop/checkpoint events */
    double fail_rate;      /* failure arrivals, 1/s (all chips, before thinning) */
    double ckpt_interval;  /* compute between checkpoints, s; 0 = commit continuously */
    double last_s;         /* time accounted up to, s */
    double pending_chip_s; /* computed but not yet checkpointed, chip-s */
    double useful_chip_s;  /* committed useful work, chip-s */
    int64_t failures;      /* failures that struck an up chip */
    int64_t stops;         /* restarts / re-shards begun */
    cx_rng rng;            /* this group's only random stream */
} sim_group;

typedef struct sim_run_state {
    const sim_params *p; /* borrowed */
    sim_heap heap;       /* pending events */
    sim_group *groups;   /* [ngroups] */
    uint32_t ngroups;    /* count */
    int quorum;          /* groups that must be RUNNING for global progress */
    int running;         /* groups in GRP_RUNNING now */
    double up_s;         /* wall time with running >= quorum, s */
    double up_last_s;    /* up_s accounted up to, s */
} sim_run_state;

#ifndef NDEBUG
static void assert_group_state(const sim_group *g)
{
    assert(g->alive_chips >= 0 && g->alive_chips <= g->chips);
    assert(g->pending_chip_s >= 0 && g->useful_chip_s >= 0);
    if (g->elastic) {
        assert(g->state != GRP_CHECKPOINTING);
        assert(g->pending_chip_s == 0);
        assert(g->state != GRP_WAITING || g->alive_chips == 0);
        assert(g->state != GRP_RUNNING || g->alive_chips > 0);
    } else {
        assert(g->state != GRP_WAITING);
        assert(g->alive_chips == g->chips);
    }
}
#else
#define assert_group_state(g) ((void)0)
#endif

static int64_t domain_size(const sim_run_state *st, const sim_group *g, int64_t d)
{
    int64_t s = st->p->domain_chips;
    int64_t left = g->chips - d * s;
    return left < s ? left : s;
}

/* Account global uptime up to t (call before any change of `running`). */
static void uptime_accrue(sim_run_state *st, double t)
{
    if (st->running >= st->quorum)
        st->up_s += t - st->up_last_s;
    st->up_last_s = t;
}

/* Account this group's work up to t. */
static void grp_accrue(sim_group *g, double t)
{
    double dt = t - g->last_s;
    g->last_s = t;
    if (g->state != GRP_RUNNING || dt <= 0)
        return;
    if (g->elastic)
        g->useful_chip_s += (double)g->alive_chips * dt;
    else if (g->ckpt_interval <= 0)
        g->useful_chip_s += (double)g->chips * dt; /* nothing to roll back to lose */
    else
        g->pending_chip_s += (double)g->chips * dt;
}

static void grp_set_state(sim_run_state *st, sim_group *g, grp_state s, double t)
{
    if ((g->state == GRP_RUNNING) != (s == GRP_RUNNING)) {
        uptime_accrue(st, t);
        st->running += s == GRP_RUNNING ? 1 : -1;
    }
    g->state = s;
}

static int grp_push(sim_run_state *st, uint32_t gi, enum ev_kind kind, double t, int64_t domain)
{
    sim_event e = {.t_s = t, .domain = domain, .group = gi, .gen = st->groups[gi].gen, .kind = (uint8_t)kind};
    return heap_push(&st->heap, e);
}

/* RUNNING with a fresh checkpoint window (restart groups). */
static int grp_run(sim_run_state *st, uint32_t gi, double t)
{
    sim_group *g = &st->groups[gi];
    grp_set_state(st, g, GRP_RUNNING, t);
    if (!g->elastic && g->ckpt_interval > 0)
        return grp_push(st, gi, EV_CKPT_DUE, t + g->ckpt_interval, 0);
    return 0;
}

/* Enter STOPPED for `dur` seconds; invalidates pending stop/ckpt events. */
static int grp_stop(sim_run_state *st, uint32_t gi, double t, double dur)
{
    sim_group *g = &st->groups[gi];
    g->gen++;
    g->stops++;
    grp_set_state(st, g, GRP_STOPPED, t);
    return grp_push(st, gi, EV_STOP_END, t + dur, 0);
}

static double grp_stop_duration(sim_run_state *st, sim_group *g)
{
    return g->elastic ? st->p->rescale_s : rng_duration(&g->rng, st->p, st->p->restart_s);
}

static int grp_fail(sim_run_state *st, uint32_t gi, double t)
{
    sim_group *g = &st->groups[gi];
    const sim_params *p = st->p;
    int rc = grp_push(st, gi, EV_FAIL, t + cx_rng_exponential(&g->rng, 1.0 / g->fail_rate), 0);
    if (rc)
        return rc;
    int64_t chip = (int64_t)cx_rng_below(&g->rng, (uint64_t)g->chips);
    if (p->stop_policy == SIM_STOP_NONE && (g->state == GRP_STOPPED || g->state == GRP_WAITING))
        return 0; /* thinning: idle chips are not interrupted */
    grp_accrue(g, t);
    if (g->elastic) {
        int64_t d = chip / p->domain_chips;
        if (g->down[d])
            return 0; /* thinning: a chip of a down domain cannot fail again */
        g->down[d] = 1;
        g->alive_chips -= domain_size(st, g, d);
        g->failures++;
        rc = grp_push(st, gi, EV_RECOVER, t + rng_duration(&g->rng, p, p->recovery_s), d);
        if (rc)
            return rc;
    } else {
        g->failures++;
        g->pending_chip_s = 0; /* rolled back to the last checkpoint */
    }
    switch (g->state) {
    case GRP_RUNNING:
    case GRP_CHECKPOINTING:
        return grp_stop(st, gi, t, grp_stop_duration(st, g));
    case GRP_STOPPED:
        if (p->stop_policy == SIM_STOP_EXTEND) {
            g->stops--; /* the same stop, started over */
            return grp_stop(st, gi, t, grp_stop_duration(st, g));
        }
        return 0;
    case GRP_WAITING:
        return 0;
    }
    return 0;
}

static int grp_recover(sim_run_state *st, uint32_t gi, int64_t d, double t)
{
    sim_group *g = &st->groups[gi];
    grp_accrue(g, t);
    assert(g->elastic && g->down[d]);
    g->down[d] = 0;
    g->alive_chips += domain_size(st, g, d);
    if (g->state == GRP_STOPPED)
        return 0; /* joins the re-shard in progress */
    return grp_stop(st, gi, t, st->p->rescale_s);
}

static int grp_stop_end(sim_run_state *st, uint32_t gi, double t)
{
    sim_group *g = &st->groups[gi];
    grp_accrue(g, t);
    if (g->elastic && g->alive_chips == 0) {
        grp_set_state(st, g, GRP_WAITING, t);
        return 0;
    }
    return grp_run(st, gi, t);
}

static int grp_ckpt_due(sim_run_state *st, uint32_t gi, double t)
{
    sim_group *g = &st->groups[gi];
    grp_accrue(g, t);
    grp_set_state(st, g, GRP_CHECKPOINTING, t);
    return grp_push(st, gi, EV_CKPT_END, t + st->p->checkpoint_cost_s, 0);
}

static int grp_ckpt_end(sim_run_state *st, uint32_t gi, double t)
{
    sim_group *g = &st->groups[gi];
    grp_accrue(g, t);
    g->useful_chip_s += g->pending_chip_s;
    g->pending_chip_s = 0;
    return grp_run(st, gi, t);
}

static int run_dispatch(sim_run_state *st, const sim_event *e)
{
    sim_group *g = &st->groups[e->group];
    int rc = 0;
    switch ((enum ev_kind)e->kind) {
    case EV_FAIL:
        rc = grp_fail(st, e->group, e->t_s);
        break;
    case EV_RECOVER:
        rc = grp_recover(st, e->group, e->domain, e->t_s);
        break;
    case EV_STOP_END:
        if (e->gen == g->gen && g->state == GRP_STOPPED)
            rc = grp_stop_end(st, e->group, e->t_s);
        break;
    case EV_CKPT_DUE:
        if (e->gen == g->gen && g->state == GRP_RUNNING)
            rc = grp_ckpt_due(st, e->group, e->t_s);
        break;
    case EV_CKPT_END:
        if (e->gen == g->gen && g->state == GRP_CHECKPOINTING)
            rc = grp_ckpt_end(st, e->group, e->t_s);
        break;
    }
    assert_group_state(g);
    return rc;
}

/* ---- sim: parameters ---- */

void sim_params_init(sim_params *p)
{
    /* Calibrated against the paper's DP and elastic rows; see
     * docs/simulate.md "Calibration" before changing any of these. */
    *p = (sim_params){
        .mtbf_years = 1.0,
        .restart_s = 60.0,
        .recovery_s = 1800.0,
        .dist = SIM_DIST_EXP,
        .lognormal_sigma = 1.0,
        .rescale_s = 13.0,
        .checkpoint_s = 0,
        .checkpoint_cost_s = 0.5,
        .domain_chips = 256,
        .horizon_days = 30,
        .stop_policy = SIM_STOP_NONE,
        .learner_elastic = 1,
        .quorum = 1,
    };
}

int sim_params_check(const sim_params *p, char *err, size_t errlen)
{
    struct {
        const char *name;
        double v, lo, hi;
    } ranges[] = {
        {"mtbf_years", p->mtbf_years, 0, 1e6},
        {"restart_s", p->restart_s, 0, 1e7},
        {"recovery_s", p->recovery_s, 0, 1e8},
        {"lognormal_sigma", p->lognormal_sigma, 0, 5},
        {"rescale_s", p->rescale_s, 0, 1e7},
        {"checkpoint_s", p->checkpoint_s, 0, 1e8},
        {"checkpoint_cost_s", p->checkpoint_cost_s, 0, 1e7},
        {"horizon_days", p->horizon_days, 1e-3, 3650},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        if (!isfinite(ranges[i].v) || ranges[i].v < ranges[i].lo || ranges[i].v > ranges[i].hi)
            return cx_fail(err, errlen, CX_EINVAL, "%s: %g is out of range [%g, %g]", ranges[i].name,
                           ranges[i].v, ranges[i].lo, ranges[i].hi);
    if (p->domain_chips < 1 || p->domain_chips > 100000000)
        return cx_fail(err, errlen, CX_EINVAL, "domain_chips: %lld is out of range [1, 1e8]",
                       (long long)p->domain_chips);
    if (p->dist != SIM_DIST_FIXED && p->dist != SIM_DIST_EXP && p->dist != SIM_DIST_LOGNORMAL)
        return cx_fail(err, errlen, CX_EINVAL, "dist: unknown distribution %d", (int)p->dist);
    if (p->stop_policy != SIM_STOP_NONE && p->stop_policy != SIM_STOP_FOLD &&
        p->stop_policy != SIM_STOP_EXTEND)
        return cx_fail(err, errlen, CX_EINVAL, "stop_policy: unknown policy %d", (int)p->stop_policy);
    if (p->quorum < 1)
        return cx_fail(err, errlen, CX_EINVAL, "quorum: %d must be >= 1", p->quorum);
    return 0;
}

double sim_checkpoint_interval_s(const sim_params *p, int64_t chips)
{
    if (p->checkpoint_s > 0)
        return p->checkpoint_s;
    if (p->mtbf_years <= 0 || chips <= 0)
        return 0;
    /* Daly (2006), "A higher order estimate of the optimum checkpoint
     * interval for restart dumps", eq. 37; M is the group's MTBF. */
    double m = p->mtbf_years * SIM_SECONDS_PER_YEAR / (double)chips;
    double d = p->checkpoint_cost_s;
    if (d <= 0)
        return 0; /* free checkpoints: commit continuously */
    if (d >= 2 * m)
        return m;
    double x = d / (2 * m);
    return sqrt(2 * d * m) * (1 + sqrt(x) / 3 + x / 9) - d;
}

/* ---- sim: one trial ---- */

static void run_cleanup(sim_run_state *st)
{
    for (uint32_t i = 0; st->groups && i < st->ngroups; i++)
        free(st->groups[i].down);
    free(st->groups);
    free(st->heap.ev);
}

int sim_run(const sim_params *p, sim_mode mode, int64_t chips, int learners, uint64_t seed, sim_result *out,
            char *err, size_t errlen)
{
    int rc = sim_params_check(p, err, errlen);
    if (rc)
        return rc;
    if (chips < 1 || chips > (int64_t)1 << 40)
        return cx_fail(err, errlen, CX_EINVAL, "chips: %lld is out of range [1, 2^40]", (long long)chips);
    if (mode != SIM_DP && mode != SIM_ELASTIC && mode != SIM_DECOUPLED)
        return cx_fail(err, errlen, CX_EINVAL, "mode: unknown mode %d", (int)mode);
    int ngroups = mode == SIM_DECOUPLED ? learners : 1;
    if (mode == SIM_DECOUPLED && (learners < 1 || learners > 4096 || learners > chips))
        return cx_fail(err, errlen, CX_EINVAL, "learners: %d is out of range [1, min(4096, chips)]",
                       learners);
    if (mode == SIM_DECOUPLED && p->quorum > learners)
        return cx_fail(err, errlen, CX_EINVAL, "quorum: %d is more than the %d learners", p->quorum,
                       learners);

    int64_t events = 0;
    sim_run_state st = {
        .p = p, .ngroups = (uint32_t)ngroups, .quorum = mode == SIM_DECOUPLED ? p->quorum : 1};
    st.groups = calloc((size_t)ngroups, sizeof *st.groups);
    if (!st.groups)
        return cx_fail(err, errlen, CX_ENOMEM, "groups: out of memory");
    double horizon = p->horizon_days * 86400.0;
    for (int i = 0; i < ngroups; i++) {
        sim_group *g = &st.groups[i];
        g->chips = chips / ngroups + (i < chips % ngroups ? 1 : 0);
        g->alive_chips = g->chips;
        g->elastic = mode == SIM_ELASTIC || (mode == SIM_DECOUPLED && p->learner_elastic);
        g->ndomains = (g->chips + p->domain_chips - 1) / p->domain_chips;
        g->state = GRP_STOPPED; /* left by grp_run below */
        g->fail_rate = p->mtbf_years > 0 ? (double)g->chips / (p->mtbf_years * SIM_SECONDS_PER_YEAR) : 0;
        g->ckpt_interval = g->elastic ? 0 : sim_checkpoint_interval_s(p, g->chips);
        cx_rng_seed(&g->rng, cx_seed_derive(seed, (uint64_t)i));
        if (g->elastic) {
            g->down = calloc((size_t)g->ndomains, 1);
            if (!g->down) {
                rc = cx_fail(err, errlen, CX_ENOMEM, "domains: out of memory");
                goto done;
            }
        }
        rc = grp_run(&st, (uint32_t)i, 0);
        if (!rc && g->fail_rate > 0)
            rc = grp_push(&st, (uint32_t)i, EV_FAIL, cx_rng_exponential(&g->rng, 1.0 / g->fail_rate), 0);
        if (rc) {
            cx_fail(err, errlen, rc, "event heap: %s", cx_strerror(rc));
            goto done;
        }
    }

    while (st.heap.len > 0 && st.heap.ev[0].t_s <= horizon) {
        sim_event e = heap_pop(&st.heap);
        events++;
        rc = run_dispatch(&st, &e);
        if (rc) {
            cx_fail(err, errlen, rc, "event heap: %s", cx_strerror(rc));
            goto done;
        }
    }

    /* Work computed but not yet checkpointed at the horizon counts: only a
     * failure can lose it, and none came. */
    double useful = 0;
    sim_result r = {0};
    uptime_accrue(&st, horizon);
    for (int i = 0; i < ngroups; i++) {
        sim_group *g = &st.groups[i];
        grp_accrue(g, horizon);
        useful += g->useful_chip_s + g->pending_chip_s;
        r.failures += g->failures;
        r.stops += g->stops;
        if (!g->elastic && g->ckpt_interval > r.checkpoint_s)
            r.checkpoint_s = g->ckpt_interval;
    }
    r.events = events;
    r.goodput = useful / ((double)chips * horizon);
    r.uptime = st.up_s / horizon;
    *out = r;
done:
    run_cleanup(&st);
    return rc;
}

/* ---- sim: trials and statistics ---- */

/* Two-sided 95% Student t quantile for df degrees of freedom. */
static double t95(int df)
{
    static const double tab[] = {0,     12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                 2.201, 2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080,
                                 2.074, 2.069,  2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
    if (df < 1)
        return 0;
    if (df <= 30)
        return tab[df];
    if (df <= 60)
        return 2.000 + (2.042 - 2.000) * (60 - df) / 30.0;
    return 1.96;
}

static void mean_ci(const double *x, int n, double *mean, double *ci)
{
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    *mean = s / n;
    for (int i = 0; i < n; i++)
        ss += (x[i] - *mean) * (x[i] - *mean);
    *ci = n > 1 ? t95(n - 1) * sqrt(ss / (n - 1)) / sqrt((double)n) : 0;
}

int sim_run_trials(const sim_params *p, sim_mode mode, int64_t chips, int learners, uint64_t seed, int trials,
                   sim_stats *out, char *err, size_t errlen)
{
    if (trials < 1 || trials > 100000)
        return cx_fail(err, errlen, CX_EINVAL, "trials: %d is out of range [1, 100000]", trials);
    double *gp = malloc((size_t)trials * 2 * sizeof *gp);
    if (!gp)
        return cx_fail(err, errlen, CX_ENOMEM, "trials: out of memory");
    double *up = gp + trials;
    double fails = 0;
    int rc = 0;
    for (int i = 0; i < trials; i++) {
        sim_result r;
        rc =
            sim_run(p, mode, chips, learners, cx_seed_derive(seed, 0x7472ULL + (uint64_t)i), &r, err, errlen);
        if (rc)
            goto done;
        gp[i] = r.goodput;
        up[i] = r.uptime;
        fails += (double)r.failures;
    }
    sim_stats s = {.trials = trials, .failures_mean = fails / trials};
    mean_ci(gp, trials, &s.goodput_mean, &s.goodput_ci95);
    mean_ci(up, trials, &s.uptime_mean, &s.uptime_ci95);
    *out = s;
done:
    free(gp);
    return rc;
}

/* ---- sim: the paper's figures and names ---- */

double sim_paper_goodput_pct(sim_mode mode, int learners, int64_t chips)
{
    /* Decoupled DiLoCo (arXiv 2604.21428), Table 1: per-chip MTBI 1 year. */
    static const int64_t cols[] = {150000, 300000, 600000, 1200000, 2400000};
    static const double dp[] = {72, 57, 38, 27, 18};
    static const double elastic[] = {88, 80, 69, 58, 40};
    static const double m8[] = {98, 96, 94, 88, 80};
    for (int i = 0; i < 5; i++) {
        if (cols[i] != chips)
            continue;
        if (mode == SIM_DP)
            return dp[i];
        if (mode == SIM_ELASTIC)
            return elastic[i];
        if (mode == SIM_DECOUPLED && learners == 8)
            return m8[i];
    }
    return -1;
}

const char *sim_mode_name(sim_mode mode)
{
    switch (mode) {
    case SIM_DP:
        return "dp";
    case SIM_ELASTIC:
        return "elastic";
    case SIM_DECOUPLED:
        return "decoupled";
    }
    return "?";
}

int sim_mode_parse(const char *s, sim_mode *out, char *err, size_t errlen)
{
    for (int m = SIM_DP; m <= SIM_DECOUPLED; m++)
        if (strcmp(s, sim_mode_name((sim_mode)m)) == 0) {
            *out = (sim_mode)m;
            return 0;
        }
    return cx_fail(err, errlen, CX_EINVAL, "'%s' is not a mode (dp, elastic, decoupled)", s);
}

const char *sim_dist_name(sim_dist d)
{
    switch (d) {
    case SIM_DIST_FIXED:
        return "fixed";
    case SIM_DIST_EXP:
        return "exp";
    case SIM_DIST_LOGNORMAL:
        return "lognormal";
    }
    return "?";
}

int sim_dist_parse(const char *s, sim_dist *out, char *err, size_t errlen)
{
    for (int d = SIM_DIST_FIXED; d <= SIM_DIST_LOGNORMAL; d++)
        if (strcmp(s, sim_dist_name((sim_dist)d)) == 0) {
            *out = (sim_dist)d;
            return 0;
        }
    return cx_fail(err, errlen, CX_EINVAL, "'%s' is not a distribution (fixed, exp, lognormal)", s);
}

const char *sim_stop_policy_name(sim_stop_policy s)
{
    switch (s) {
    case SIM_STOP_NONE:
        return "none";
    case SIM_STOP_FOLD:
        return "fold";
    case SIM_STOP_EXTEND:
        return "extend";
    }
    return "?";
}

int sim_stop_policy_parse(const char *s, sim_stop_policy *out, char *err, size_t errlen)
{
    for (int v = SIM_STOP_NONE; v <= SIM_STOP_EXTEND; v++)
        if (strcmp(s, sim_stop_policy_name((sim_stop_policy)v)) == 0) {
            *out = (sim_stop_policy)v;
            return 0;
        }
    return cx_fail(err, errlen, CX_EINVAL, "'%s' is not a policy (none, fold, extend)", s);
}
