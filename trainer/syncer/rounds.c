/* rounds.c - the syncer's rounds component (rounds.h): per-fragment rounds (diloco, decoupled):
 * contributions, quorum and grace window, merge. The only writer of
 * s->rounds (assert_rounds_state after each change); the route that
 * decodes a contribution is rounds_route.c, the grace window's and the
 * schedule's estimates rounds_pace.c.
 *
 * The per-fragment round (diloco and decoupled), numbered by the syncer
 * (round.h): a contribution names no round; it joins the round of its
 * fragment that is open when it arrives, or opens the next one.
 *
 *        rounds_route_contribution(): first accepted contribution,
 *        id = round_join_id() = closed_id + 1
 *   IDLE ──────────────────────────────────────────► COLLECTING
 *    ▲                                                 │   │
 *    │   round_merge(): merge, outer Nesterov,         │   │ n >= need (rounds_check):
 *    │   version++, map id -> version, closed_id = id, │   │ decoupled: grace computed
 *    │   wake long-polls                               │   ▼ (rounds_grace_ms)
 *    ├─────────────────── n >= need, no grace ─────────┘  GRACE
 *    │                    or elastic deadline (ticker)     │
 *    └──────────── grace over, or every live learner ──────┘
 *                  contributed (rounds_check / ticker: round_close_due)
 *
 *   IDLE        no contribution held; opened_ms = 0; the next round to open
 *               is closed_id + 1.
 *   COLLECTING  1 <= n < need contributions held (need: diloco = every
 *               expected learner, decoupled = quorum K); id > closed_id.
 *   GRACE       n >= K; grace_end_ms set; contributions still accepted;
 *               id > closed_id.
 * Late and stale: a contribution whose base is behind the fragment's
 * version (rounds merged since its learner took the base, the paper's
 * staleness) is merged like any other, with its own base and token weight
 * (counted in rounds.lagged); it is refused only when its base is more than
 * max_staleness rounds of p behind (each merged round is one version, so
 * that is versions[p] - base), and then its learner keeps the steps and
 * sends them against a newer base. Nothing is held for a late learner. The
 * 202 answer says the round joined and the version its merge will produce
 * (versions[p] + 1: one round of p is open at a time).
 * A contribution from a learner already in the round (it rejoined since
 * its first) is added to that one: learners rebase, so two contributions
 * never cover the same steps. At merge, contributions of learners marked
 * absent get no weight (they are dropped, with the steps they carried); if
 * none is left the round stays open.
 */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/http_server.h"
#include "common/log.h"
#include "trainer/events.h"
#include "numerics/fragment.h"
#include "numerics/merge.h"
#include "trainer/protocol.h"
#include "numerics/round.h"
#include "trainer/syncer/core.h"

const char *const rounds_state_names[] = {"idle", "collecting", "grace"};

#ifndef NDEBUG
static void assert_round_state(const syncer *s, const frag_round *r)
{
    switch (r->state) {
    case RS_IDLE:
        assert(r->n == 0);
        break;
    case RS_COLLECTING:
        assert(r->n >= 1 && r->opened_ms > 0 && r->id > r->closed_id);
        break;
    case RS_GRACE:
        assert(r->n >= 1 && s->cfg.mode == CONFIG_MODE_DECOUPLED && r->grace_end_ms > 0 &&
               r->id > r->closed_id);
        break;
    }
}
#endif

/* Every round in a state of its machine; own_ver names nothing past the
 * fragment's version; counters non-negative, every merged round had a
 * contribution, every lagged one lagged by at least 1; the ring's count
 * and the last merge's time agree (mu held). */
static void assert_rounds_state(const syncer *s)
{
#ifndef NDEBUG
    const syncer_rounds *r = &s->rounds;
    assert(r->merged >= 0 && r->parts >= r->merged && r->lagged >= 0 && r->lag_sum >= r->lagged);
    assert(r->stale_rejected >= 0 && r->merges_refused >= 0 && r->clipped_total >= 0);
    assert(r->recent_n >= 0 && r->longest_gap_ms >= 0 && (r->recent_n == 0) == (r->last_merge_ms == 0));
    for (int p = 0; p < s->P; p++) {
        assert(r->frag[p].n >= 0 && r->frag[p].n <= MAX_LEARNERS);
        assert_round_state(s, &r->frag[p]);
        for (int i = 0; i < MAX_LEARNERS; i++) {
            size_t at = (size_t)i * (size_t)s->P + (size_t)p;
            assert(r->own_ver[at] >= -1 && r->own_ver[at] <= s->versions[p]);
            assert(r->acc_step[at] >= -1 && r->acc_inc[at] >= 0);
        }
    }
#else
    (void)s;
#endif
}

/* ---- syncer: the rounds' state set up, and what the other components tell it ---- */

int rounds_init(syncer *s, char *err, size_t errlen)
{
    size_t cells = (size_t)MAX_LEARNERS * (size_t)s->P;
    s->rounds.frag = calloc((size_t)s->P, sizeof *s->rounds.frag);
    s->rounds.own_ver = malloc(cells * sizeof *s->rounds.own_ver);
    s->rounds.acc_step = malloc(cells * sizeof *s->rounds.acc_step);
    s->rounds.acc_inc = calloc(cells, sizeof *s->rounds.acc_inc);
    if (!s->rounds.frag || !s->rounds.own_ver || !s->rounds.acc_step || !s->rounds.acc_inc) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        return -1;
    }
    for (int p = 0; p < s->P; p++) {
        merge_ema_init(&s->rounds.frag[p].t_quorum, 0.2);
        merge_ema_init(&s->rounds.frag[p].t_sync, 0.2);
        s->rounds.frag[p].closed_id = -1;
    }
    for (size_t i = 0; i < cells; i++)
        s->rounds.own_ver[i] = s->rounds.acc_step[i] = -1;
    assert_rounds_state(s);
    return 0;
}

void rounds_cleanup(syncer *s)
{
    for (int p = 0; s->rounds.frag && p < s->P; p++)
        for (int i = 0; i < s->rounds.frag[p].n; i++)
            free(s->rounds.frag[p].c[i].delta);
    free(s->rounds.frag);
    free(s->rounds.own_ver);
    free(s->rounds.acc_step);
    free(s->rounds.acc_inc);
    s->rounds.frag = NULL;
    s->rounds.own_ver = s->rounds.acc_step = s->rounds.acc_inc = NULL;
}

int rounds_load_norms(syncer *s, int p, json_t *j, char *err, size_t errlen)
{
    return guard_norms_parse(&s->rounds.frag[p].norms, j, err, errlen);
}

void rounds_forget(syncer *s, int p)
{
    frag_round *rd = &s->rounds.frag[p];
    for (int i = 0; i < rd->n; i++)
        free(rd->c[i].delta);
    rd->n = 0;
    rd->state = RS_IDLE;
    rd->opened_ms = rd->quorum_ms = rd->grace_end_ms = 0;
    assert_rounds_state(s);
}

void rounds_learner_new(syncer *s, int slot)
{
    for (int p = 0; p < s->P; p++)
        s->rounds.acc_step[slot * s->P + p] = -1;
}

void rounds_learner_joined(syncer *s, int slot)
{
    for (int p = 0; p < s->P; p++)
        s->rounds.own_ver[slot * s->P + p] = -1;
}

int64_t rounds_own_take(syncer *s, int slot, int p)
{
    int64_t own = s->rounds.own_ver[slot * s->P + p];
    s->rounds.own_ver[slot * s->P + p] = -1;
    return own;
}

void rounds_note_clipped(syncer *s)
{
    s->rounds.clipped_total++;
}

/* ---- syncer: merge bookkeeping shared by every mode ---- */

void rounds_note_merge(syncer *s, int64_t fragment, int64_t version, const int64_t *ids, int n)
{
    merge_note *m = &s->rounds.recent[s->rounds.recent_n % RECENT_MERGES];
    int64_t now = cx_mono_ms();
    m->fragment = fragment;
    m->version = version;
    m->t_mono_ms = now;
    m->n = n;
    for (int i = 0; i < n && i < MAX_LEARNERS; i++)
        m->learners[i] = ids[i];
    s->rounds.recent_n++;
    if (s->rounds.last_merge_ms > 0 && now - s->rounds.last_merge_ms > s->rounds.longest_gap_ms)
        s->rounds.longest_gap_ms = now - s->rounds.last_merge_ms;
    s->rounds.last_merge_ms = now;
    s->merges++;
    dur_note_merge(s);
    if (fragment < 0) /* a ddp step; a round is checked once its merge left it idle (round_to_idle) */
        assert_rounds_state(s);
    pthread_cond_broadcast(&s->work_cv);
}

/* ---- syncer: per-fragment rounds (diloco, decoupled) ---- */


/* round_merge, step 1: the contributions of round p that still count
 * (their learner is not absent) into mc[], their index in r->c into idx[];
 * returns how many (mu held). One accepted before its learner rejoined
 * still counts: it was valid when it came, and the rejoined learner
 * counts it as sent (it carries only the steps after it, join's
 * accepted_steps). */
static int round_mergeable(syncer *s, frag_round *r, merge_contrib *mc, int *idx)
{
    int k = 0;
    for (int i = 0; i < r->n; i++) {
        const learner_rec *l = &s->members.learners[r->c[i].slot];
        if (l->state == LS_ABSENT)
            continue;
        mc[k].delta = r->c[i].delta;
        /* the weight is what the syncer assigns (guard.h), not the claim */
        mc[k].tokens = (uint64_t)r->c[i].w_tokens;
        mc[k].steps = (uint64_t)r->c[i].w_steps;
        idx[k++] = i;
    }
    return k;
}

/* round_merge, step 2: merge the k contributions mc[] into fragment p's Θ
 * and momentum with the run's rule and weighting, quantize the update
 * (deltas_encode); w[] gets their weights, *norm the update's norm,
 * *scale the share of the outer step applied. 0, 1 when the merge
 * failed, or 2 when its result was refused (guard_merge_result: not
 * finite or unbounded; the reason in `refused`); Θ and momentum are
 * untouched unless 0 (mu held). */
static int round_apply(syncer *s, int p, const merge_contrib *mc, int k, double *w, double *norm_out,
                       double *scale_out, char *refused, size_t refused_len)
{
    size_t len = fragment_length(s->ft, p);
    char err[CX_ERRLEN];
    merge_rule rule = MERGE_RULE_MEAN;
    merge_weighting weighting = MERGE_WEIGHTS_UNIFORM;
    if (s->cfg.mode == CONFIG_MODE_DECOUPLED) {
        rule = s->cfg.merge == CONFIG_MERGE_RDA ? MERGE_RULE_RDA : MERGE_RULE_MEAN;
        weighting = s->cfg.weights == CONFIG_WEIGHTS_TOKEN ? MERGE_WEIGHTS_TOKEN : MERGE_WEIGHTS_UNIFORM;
    }
    /* A decoupled round merged from k of the M live learners applies k/M of
     * the merged outer gradient: over one period (every learner sending the
     * fragment once) Θ then moves about as far as in one synchronous round.
     * Without it K=1 applies a full outer Nesterov step M times per period
     * and diverges (docs/internals/syncer.md). --partial-scale off applies
     * every round in full (bench/claims compares both). */
    double scale = 1.0;
    if (s->cfg.mode == CONFIG_MODE_DECOUPLED && s->cfg.partial_scale) {
        int live = members_count(s, 1);
        if (live < k)
            live = k;
        scale = (double)k / live;
    }
    /* merge_apply merges, scales and takes the outer step on the fragment's
     * Θ (th) and momentum (mo) in place, allocating nothing. A fragment of
     * one range is contiguous in theta/momentum and updated there; others
     * are gathered into the workspace's buffers and scattered back. Θ_V
     * (old) is copied only when deltas_encode uses it. */
    const fragment_range *fr = fragment_ranges(s->ft, p);
    int direct = fragment_num_ranges(s->ft, p) == 1;
    float *th = direct ? s->theta + fr[0].offset : merge_ws_buf(s->mws, 0);
    float *mo = direct ? s->momentum + fr[0].offset : merge_ws_buf(s->mws, 1);
    float *old = merge_ws_buf(s->mws, 2);
    if (!direct) {
        fragment_gather(s->ft, p, s->theta, th);
        fragment_gather(s->ft, p, s->momentum, mo);
    }
    float *mo_old = merge_ws_buf(s->mws, 3);
    memcpy(old, th, len * sizeof *old); /* to undo a merge whose result is refused */
    memcpy(mo_old, mo, len * sizeof *mo_old);
    float lr = (float)s->cfg.outer_lr, mu = (float)s->cfg.outer_momentum;
    double norm = 0.0;
    *scale_out = scale;
    int rc = merge_apply(s->mws, th, mo, s->ft, p, mc, k, rule, weighting, scale, lr, mu, w, &norm, err,
                         sizeof err);
    if (rc != 0 && weighting == MERGE_WEIGHTS_TOKEN) /* all steps 0: fall back to uniform */
        rc = merge_apply(s->mws, th, mo, s->ft, p, mc, k, rule, MERGE_WEIGHTS_UNIFORM, scale, lr, mu, w,
                         &norm, err, sizeof err);
    if (rc != 0) { /* th/mo untouched on error */
        cx_error("merge fragment=%d failed: %s", p, err);
        return 1;
    }
    if (guard_merge_result(old, th, mo, len, refused, refused_len) != 0) {
        /* never applied: th/mo back as they were (a direct fragment is theta itself) */
        memcpy(th, old, len * sizeof *th);
        memcpy(mo, mo_old, len * sizeof *mo);
        return 2;
    }
    deltas_encode(s, p, old, th, s->versions[p] + 1);
    if (!direct) {
        fragment_scatter(s->ft, p, th, s->theta);
        fragment_scatter(s->ft, p, mo, s->momentum);
    }
    *norm_out = norm;
    return 0;
}

/* round_merge, step 3: free every delta round p held, with a drop event for
 * the ones that did not count (idx[k]: those that did), and in elastic
 * diloco one for each expected learner missing at the deadline (mu held). */
static void round_drops(syncer *s, int p, frag_round *r, const int *idx, int k, const char *why)
{
    for (int i = 0; i < r->n; i++) {
        const learner_rec *l = &s->members.learners[r->c[i].slot];
        int used = 0;
        for (int j = 0; j < k; j++)
            used |= idx[j] == i;
        if (!used) /* what it carried is lost: the learner counts it as sent */
            events_emit(s->ev, "drop",
                        json_pack("{s:I, s:I, s:s, s:i, s:I, s:I, s:I}", "learner", (json_int_t)l->id,
                                  "incarnation", (json_int_t)r->c[i].incarnation, "reason", "absent",
                                  "fragment", p, "step", (json_int_t)r->c[i].step, "steps",
                                  (json_int_t)r->c[i].steps, "tokens", (json_int_t)r->c[i].tokens));
        free(r->c[i].delta);
        r->c[i].delta = NULL;
    }
    /* elastic diloco: expected learners that did not make it */
    if (s->cfg.mode == CONFIG_MODE_DILOCO && strcmp(why, "deadline") == 0) {
        for (int i = 0; i < MAX_LEARNERS; i++) {
            const learner_rec *l = &s->members.learners[i];
            int in = 0;
            if (l->id < 0 || l->incarnation == 0 || l->state == LS_LEFT)
                continue;
            for (int j = 0; j < r->n; j++)
                in |= r->c[j].slot == i;
            if (!in)
                events_emit(s->ev, "drop",
                            json_pack("{s:I, s:I, s:s, s:i}", "learner", (json_int_t)l->id, "incarnation",
                                      (json_int_t)l->incarnation, "reason", "deadline", "fragment", p));
        }
    }
}

/* Round r holds nothing any more: back to IDLE (mu held). */
static void round_to_idle(syncer *s, frag_round *r)
{
    r->n = 0;
    r->lagged = 0;
    r->state = RS_IDLE;
    r->opened_ms = r->quorum_ms = r->grace_end_ms = 0;
    r->grace_ms = 0;
    assert_rounds_state(s);
}

/* The merge of round p was refused (guard_merge_result; mu held): Θ and
 * the version stay, every contribution the round held is rejected with
 * reason "merge" and freed, the round is idle again (its id reopens), and
 * a merge_refused event and merges_refused count it. The learners were
 * answered 202: like a dropped contribution, what they carried is lost. */
static void round_refuse(syncer *s, int p, frag_round *r, const char *why)
{
    json_t *parts = json_array();
    s->rounds.merges_refused++;
    for (int i = 0; i < r->n; i++) {
        contrib *c = &r->c[i];
        json_array_append_new(parts, json_pack("{s:I, s:I, s:I, s:I}", "learner", (json_int_t)c->learner,
                                               "incarnation", (json_int_t)c->incarnation, "steps",
                                               (json_int_t)c->steps, "tokens", (json_int_t)c->tokens));
        members_reject_note(s, PROTO_R_MERGE, c->learner, c->incarnation, p, why);
        if (s->rounds.own_ver[c->slot * s->P + p] == 0) /* nothing pending any more */
            s->rounds.own_ver[c->slot * s->P + p] = -1;
        free(c->delta);
        c->delta = NULL;
    }
    events_emit(s->ev, "merge_refused",
                json_pack("{s:i, s:I, s:I, s:s, s:o}", "fragment", p, "version", (json_int_t)s->versions[p],
                          "round", (json_int_t)r->id, "reason", why, "contributions", parts));
    cx_error("merge fragment=%d round=%lld refused, not applied: %s", p, (long long)r->id, why);
    round_to_idle(s, r);
}

/* Merge what round p holds (mu held). Contributions of absent learners get
 * no weight; returns 0 when merged or refused (round_refuse), 1 when
 * nothing was mergeable (round stays open). */
static int round_merge(syncer *s, int p, const char *why)
{
    frag_round *r = &s->rounds.frag[p];
    merge_contrib mc[MAX_LEARNERS];
    int idx[MAX_LEARNERS];
    double w[MAX_LEARNERS];
    int64_t t0 = cx_mono_ns();
    int k = round_mergeable(s, r, mc, idx);
    if (k == 0)
        return 1;
    double norm = 0.0, scale = 1.0;
    char refused[CX_ERRLEN];
    int rc = round_apply(s, p, mc, k, w, &norm, &scale, refused, sizeof refused);
    if (rc == 2) {
        round_refuse(s, p, r, refused);
        return 0;
    }
    if (rc != 0)
        return 1;

    int64_t version = ++s->versions[p];
    json_t *parts = json_array();
    int64_t ids[MAX_LEARNERS];
    int64_t tokens = 0;
    for (int j = 0; j < k; j++) {
        contrib *c = &r->c[idx[j]];
        ids[j] = c->learner;
        tokens += c->tokens;
        if (s->rounds.own_ver[c->slot * s->P + p] == 0) /* its pending contribution is in this version */
            s->rounds.own_ver[c->slot * s->P + p] = version;
        json_array_append_new(parts,
                              json_pack("{s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:f}", "learner",
                                        (json_int_t)c->learner, "incarnation", (json_int_t)c->incarnation,
                                        "weight", w[j], "tokens", (json_int_t)c->tokens, "steps",
                                        (json_int_t)c->steps, "base_version", (json_int_t)c->base_version,
                                        "step", (json_int_t)c->step, "update_norm", c->norm));
    }
    /* a contribution's tokens were trained on the whole model; this merge
     * moves 1/P of it, so the run's merged-token count grows by tokens/P */
    if (__builtin_add_overflow(s->tokens_frag_raw, tokens, &s->tokens_frag_raw))
        s->tokens_frag_raw = INT64_MAX; /* unreachable with bounded claims; saturate, never wrap */
    s->tokens_merged = s->tokens_frag_raw / s->P;
    round_drops(s, p, r, idx, k, why);
    double sync_ms = (double)(cx_mono_ns() - t0) / 1e6;
    merge_ema_add(&r->t_sync, sync_ms);
    round_map_add(&r->map, r->id, version, k);
    r->closed_id = r->id;
    s->rounds.merged++;
    s->rounds.parts += k;
    events_emit(s->ev, "merge",
                json_pack("{s:i, s:I, s:o, s:f, s:f, s:s, s:s, s:I, s:f, s:I, s:i}", "fragment", p, "version",
                          (json_int_t)version, "participants", parts, "grace_ms", r->grace_ms, "update_norm",
                          norm, "mode", syncer_mode_name(s), "trigger", why, "tokens", (json_int_t)tokens,
                          "scale", scale, "round", (json_int_t)r->id, "lagged", r->lagged));
    cx_info("merge fragment=%d round=%lld version=%lld participants=%d lagged=%d trigger=%s grace_ms=%.1f "
            "norm=%.4g",
            p, (long long)r->id, (long long)version, k, r->lagged, why, r->grace_ms, norm);
    rounds_note_merge(s, p, version, ids, k);
    round_to_idle(s, r);
    pthread_cond_broadcast(&s->frag_cv);
    return 0;
}

/* Move round p along its state machine after a contribution arrived or
 * time passed (mu held). */
void rounds_check(syncer *s, int p, int64_t now)
{
    frag_round *r = &s->rounds.frag[p];
    if (r->state == RS_IDLE)
        return;
    int live = members_count(s, 1);
    if (s->cfg.mode == CONFIG_MODE_DILOCO) {
        int need = members_barrier_need(s);
        if (r->n >= need)
            round_merge(s, p, "barrier");
        else if (s->cfg.elastic_deadline_ms > 0 && now - r->opened_ms >= s->cfg.elastic_deadline_ms)
            round_merge(s, p, "deadline");
    } else { /* decoupled */
        if (r->state == RS_COLLECTING && r->n >= s->cfg.quorum) {
            r->quorum_ms = now;
            merge_ema_add(&r->t_quorum, (double)(now - r->opened_ms));
            r->grace_ms = rounds_grace_ms(s, p);
            r->grace_end_ms = now + (int64_t)ceil(r->grace_ms);
            r->state = RS_GRACE;
        }
        if (r->state == RS_GRACE) {
            round_close why =
                round_close_due(r->n, (int)s->cfg.quorum, live, now, r->grace_end_ms, r->grace_ms);
            if (why != ROUND_WAIT)
                round_merge(s, p, round_close_name(why));
        }
    }
    assert_rounds_state(s);
}

/* ---- syncer: a contribution joins its round (rounds_contribute) ---- */

/* PROTO_OK when the tokens/steps claim of a contribution to fragment p is
 * possible (mu held). X-Chaosloco-Step numbers it: its steps
 * (step − steps, step] lie in the learner's run (+ H of slack: its own
 * --steps reaches us with its first heartbeat) and are not all steps an
 * accepted contribution of this learner already covered: each step is
 * sent once (a learner rebases), so a replay is refused; one that overlaps
 * keeps only its new steps (*keep_steps). A restarted learner trains
 * again from its checkpoint: its new incarnation may start below what the
 * old one sent, not below where it resumed. No more tokens than its batch
 * per step. The bounds keep every sum of claims far from overflow. */
static proto_reason claim_check(syncer *s, int slot, int p, const proto_hdr *h, int64_t *keep_steps,
                                char *why, size_t len)
{
    const learner_rec *l = &s->members.learners[slot];
    *keep_steps = h->steps;
    int64_t a = s->rounds.acc_step[slot * s->P + p], from = h->step - h->steps;
    int64_t floor = s->rounds.acc_inc[slot * s->P + p] == l->incarnation || a < l->resumed_step ? a : l->resumed_step;
    if (h->steps > h->step || h->step > l->steps_total + s->cfg.H) {
        snprintf(why, len, "header %s is %lld and %s %lld: learner %lld runs steps 1..%lld (+H)", PROTO_H_STEPS,
                 (long long)h->steps, PROTO_H_STEP, (long long)h->step, (long long)l->id,
                 (long long)l->steps_total);
        return PROTO_R_CLAIM;
    }
    if (from < floor && h->step > floor) {
        /* it starts inside what was accepted: an honest learner whose 202
         * was lost (a partition cut the answer) carries those steps again,
         * and refusing it would refuse every later one too. Its new steps
         * (floor, step] are kept; the delta is scaled to their share
         * (rounds_route_contribution), so the accepted ones are not merged twice and a
         * replay gains nothing */
        *keep_steps = h->step - floor;
    } else if (from < floor) {
        snprintf(why, len,
                 "steps %lld..%lld of learner %lld on fragment %d: it already sent up to step %lld (%s %lld, "
                 "%s %lld)",
                 (long long)from + 1, (long long)h->step, (long long)l->id, p, (long long)floor, PROTO_H_STEP,
                 (long long)h->step, PROTO_H_STEPS, (long long)h->steps);
        return PROTO_R_CLAIM;
    }
    if (h->tokens > h->steps * l->batch) { /* steps <= CONFIG_STEPS_MAX + H: no overflow */
        snprintf(why, len, "header %s is %lld, more than %s %lld x batch %lld", PROTO_H_TOKENS,
                 (long long)h->tokens, PROTO_H_STEPS, (long long)h->steps, (long long)l->batch);
        return PROTO_R_CLAIM;
    }
    return PROTO_OK;
}

/* The L2 norm a contribution of learner covering steps may have in
 * fragment p (mu held): guard.h's limit, from the other learners'
 * recent norms or, before enough of those, from the fragment's own norm;
 * why says which. INFINITY with --norm-bound 0. */
static double norm_limit(syncer *s, int p, int64_t learner, int64_t steps, char *why, size_t len)
{
    const fragment_range *fr = fragment_ranges(s->ft, p);
    double sq = 0.0;
    for (int i = 0; s->cfg.norm_bound > 0 && i < fragment_num_ranges(s->ft, p); i++) {
        double n = guard_l2(s->theta + fr[i].offset, fr[i].length);
        sq += n * n;
    }
    return guard_norm_limit(&s->rounds.frag[p].norms, learner, s->cfg.learners <= 1,
                            guard_norm_steps(steps, s->cfg.H), sqrt(sq), fragment_length(s->ft, p),
                            s->cfg.norm_bound, why, len);
}

/* Whether a well-formed contribution to fragment p may join its round
 * (mu held): a current learner, a base version the mode accepts and a
 * possible claim (its size is clipped, never refused: rounds_route_contribution).
 * PROTO_OK and *slot, or the reason with the detail in why. */
static proto_reason admit(syncer *s, int p, const proto_hdr *h, int *slot, int64_t *keep_steps, char *why,
                          size_t len)
{
    proto_reason r = members_check(s, h->learner, h->incarnation, slot);
    int64_t version = s->versions[p], lag = version - h->base_version;
    if (r != PROTO_OK) {
        snprintf(why, len, "%s: learner %lld incarnation %lld", proto_reason_name(r), (long long)h->learner,
                 (long long)h->incarnation);
        return r;
    }
    if (h->base_version > version) {
        snprintf(why, len, "base version %lld is newer than the syncer's %lld", (long long)h->base_version,
                 (long long)version);
        return PROTO_R_STALE_VERSION;
    }
    if (s->cfg.mode == CONFIG_MODE_DILOCO && lag != 0) {
        snprintf(why, len, "diloco round %lld is closed (current version %lld)", (long long)h->base_version,
                 (long long)version);
        return PROTO_R_STALE_VERSION;
    }
    /* each merged round of p is one version: the lag is in rounds of p. The
     * default scales with M: with every learner's contribution in a round
     * of its own (the worst case) a period has M rounds; two periods pass. */
    int64_t max_stale = s->cfg.max_staleness >= 0 ? s->cfg.max_staleness
                        : 2 * s->cfg.learners > 4 ? 2 * s->cfg.learners
                                                  : 4;
    if (lag > max_stale) {
        snprintf(why, len, "base version %lld is %lld rounds behind %lld (max staleness %lld)",
                 (long long)h->base_version, (long long)lag, (long long)version, (long long)max_stale);
        return PROTO_R_STALE_VERSION;
    }
    return claim_check(s, *slot, p, h, keep_steps, why, len);
}

/* rounds_contribute, last step: the accepted contribution of the learner in slot
 * joins the open round of p, or opens the next one (see the drawing above);
 * the learner's step wall time is measured from its contributions. Returns
 * the round it joined, *lag how many versions its base is behind (mu held;
 * takes delta). */
static int64_t round_add_contribution(syncer *s, int64_t p, int slot, const proto_hdr *h, float *delta,
                                      double norm, int64_t *lag_out)
{
    frag_round *rd = &s->rounds.frag[p];
    int at = -1;
    for (int i = 0; i < rd->n; i++)
        if (rd->c[i].slot == slot)
            at = i;
    if (at < 0) {
        at = rd->n++;
        rd->c[at] =
            (contrib){slot, h->learner, h->incarnation, h->base_version, h->tokens, h->steps, h->step, 0,
                      0,    norm,       delta};
    } else {
        /* the learner is in this round already (it rejoined meanwhile):
         * both deltas are its progress, over disjoint steps (a learner
         * rebases, so a contribution never repeats an earlier one), and go
         * in as one contribution carrying both */
        contrib *c = &rd->c[at];
        size_t len = fragment_length(s->ft, (int)p);
        for (size_t i = 0; i < len; i++)
            c->delta[i] += delta[i];
        free(delta);
        c->norm = guard_l2(c->delta, len);
        c->tokens += h->tokens;
        c->steps += h->steps;
        c->base_version = c->base_version < h->base_version ? c->base_version : h->base_version;
        c->incarnation = h->incarnation;
        c->step = h->step > c->step ? h->step : c->step;
    }
    /* what it weighs: the syncer's H and batch, never the learner's own */
    contrib *c = &rd->c[at];
    c->w_steps = guard_weight_steps(c->steps, s->cfg.H);
    c->w_tokens = guard_weight_tokens(c->tokens, c->w_steps, s->cfg.batch);
    int64_t now = cx_mono_ms();
    int64_t round = round_join_id(rd->state != RS_IDLE, rd->id, rd->closed_id);
    if (rd->state == RS_IDLE) {
        rd->state = RS_COLLECTING;
        rd->opened_ms = now;
        rd->lagged = 0;
    }
    rd->id = round;
    int64_t lag = s->versions[p] - h->base_version;
    rd->lagged += lag > 0;
    s->rounds.lagged += lag > 0;
    s->rounds.lag_sum += lag;
    s->rounds.own_ver[slot * s->P + p] = 0; /* pending: the version that merges it says whether a pull has it */
    int64_t cstep = h->step >= 0 ? h->step + s->members.learners[slot].sched_off : -1; /* its schedule step */
    if (cstep > 0) /* wall time per inner step between two of its contributions (members_note_pace) */
        members_note_pace(s, slot, cstep, now);
    *lag_out = lag;
    return round;
}

proto_reason rounds_contribute(syncer *s, int p, proto_hdr *h, float *delta, size_t body_len,
                               rounds_contribution *out)
{
    size_t len = fragment_length(s->ft, p);
    double l2_total = guard_l2(delta, len); /* finite: contribution_decode refused non-finite values */
    out->version = s->versions[p];
    int slot;
    int64_t keep = h->steps;
    proto_reason r = admit(s, p, h, &slot, &keep, out->why, sizeof out->why);
    if (r == PROTO_OK && keep < h->steps) { /* its accepted steps again (claim_check): only the new share */
        double share = (double)keep / (double)h->steps;
        cx_info(
            "contribution learner=%lld fragment=%lld: steps %lld..%lld, of which %lld were accepted before "
            "(a lost answer): the %lld new ones kept, the delta scaled by %.3f",
            (long long)h->learner, (long long)p, (long long)(h->step - h->steps + 1), (long long)h->step,
            (long long)(h->steps - keep), (long long)keep, share);
        for (size_t i = 0; i < len; i++)
            delta[i] = (float)((double)delta[i] * share);
        l2_total = guard_l2(delta, len);
        h->tokens = (int64_t)((double)h->tokens * share);
        h->steps = keep;
    }
    if (r != PROTO_OK) {
        s->bytes_in += (int64_t)body_len;
        if (r == PROTO_R_STALE_VERSION)
            s->rounds.stale_rejected++;
        free(delta);
        assert_rounds_state(s);
        return r;
    }
    /* its size: clipped to the limit, never refused (a learner back from a partition sends many
     * steps' progress at once; refusing it made it retry the same contribution forever) */
    int64_t nsteps = guard_norm_steps(h->steps, s->cfg.H);
    out->limit = norm_limit(s, p, h->learner, h->steps, out->bound_why, sizeof out->bound_why);
    out->factor = guard_clip_factor(l2_total, out->limit);
    out->norm_in = l2_total;
    if (out->factor < 1.0) {
        for (size_t i = 0; i < len; i++)
            delta[i] = (float)((double)delta[i] * out->factor);
        l2_total = guard_l2(delta, len);
        s->rounds.clipped_total++;
    }
    members_touch(s, slot);
    guard_norm_add(&s->rounds.frag[p].norms, h->learner, l2_total / (double)nsteps);
    /* what a restart of this learner may carry (join's accepted_steps) */
    s->rounds.acc_step[slot * s->P + p] = h->step;
    s->rounds.acc_inc[slot * s->P + p] = h->incarnation;
    members_note_contribution(s, slot, h->step, out->factor < 1.0);
    s->bytes_in += (int64_t)body_len;
    s->accepted_total++;
    out->norm = l2_total;
    out->round = round_add_contribution(s, p, slot, h, delta, l2_total, &out->lag);
    /* what this contribution weighs in its merge (the syncer's caps, round_mergeable) */
    out->w_steps = guard_weight_steps(h->steps, s->cfg.H);
    out->w_tokens = guard_weight_tokens(h->tokens, out->w_steps, s->cfg.batch);
    assert_rounds_state(s);
    return PROTO_OK;
}
