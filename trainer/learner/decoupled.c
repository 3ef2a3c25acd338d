/* decoupled.c - the learner's decoupled mode (decoupled.h): the comm
 * thread and the main thread's side of it.
 *
 * What it is: comm_main (sends queued contributions, long-polls the merged
 * fragments, rejoins when the syncer says its incarnation is stale), the
 * inbox the inner loop drains (apply_inbox), the overlap wait at s + tau,
 * the stagger schedule's enqueue, the final send after the last step, and
 * learner_decoupled_loop. What it is not: the calls themselves (link.c,
 * contrib.c) nor the rebase arithmetic (rebase.c).
 *
 * A decoupled fragment's life on the learner:
 *
 *        due (fragment_due) and < tau in flight: enqueue Δ_p
 *   TRAINING ─────────────────────────────────────────────► QUEUED
 *     (due while tau contributions are queued/sending: PENDING until a
 *      slot frees, then QUEUED with the delta of that moment)
 *     ▲                                                      │ comm: POST
 *     │  main: apply_inbox() rebases: θ_p = merged +          ▼
 *     │  progress since the send, Θ_base_p = merged  AWAITING (long-poll
 *     └───────────────────────────────────────────── newer-than=base)
 *   A rejected (400) contribution goes back to TRAINING at once (its steps
 *   go with the next send); a 409 stale version waits for a newer fragment
 *   and rebases on it with every step since origin_step. After the last
 *   step final_send() sends each fragment's remaining progress.
 */
#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/http_client.h"
#include "common/log.h"
#include "numerics/fragment.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "trainer/config.h"
#include "trainer/learner/contrib.h"
#include "trainer/learner/decoupled.h"
#include "trainer/learner/link.h"
#include "trainer/learner/rebase.h"
#include "trainer/protocol.h"

#define MAX_QUEUE LEARNER_DECOUPLED_MAX_QUEUE
#define FINAL_SEND_MS 10000     /* longest the end of training waits to send its last progress */
#define OVERLAP_WAIT_MAX_MS 250 /* longest wait at s + tau for a merged value that is late */

/* ---- decoupled: state ---- */

learner_decoupled *learner_decoupled_new(int P)
{
    learner_decoupled *D = calloc(1, sizeof *D);
    if (!D)
        return NULL;
    D->inflight = calloc((size_t)P, sizeof(int));
    D->accepted = calloc((size_t)P, sizeof(int));
    D->no_wait = calloc((size_t)P, sizeof(int));
    D->pending = calloc((size_t)P, sizeof(int));
    D->apply_at = malloc((size_t)P * sizeof(int64_t));
    D->wait_done = calloc((size_t)P, sizeof(int));
    if (!D->inflight || !D->accepted || !D->no_wait || !D->pending || !D->apply_at || !D->wait_done) {
        free(D->inflight), free(D->accepted), free(D->no_wait), free(D->pending), free(D->apply_at);
        free(D->wait_done), free(D);
        return NULL;
    }
    for (int p = 0; p < P; p++)
        D->apply_at[p] = -1;
    pthread_cond_init(&D->cv, NULL);
    return D;
}

void learner_decoupled_free(learner_decoupled *D)
{
    if (!D)
        return;
    for (int i = 0; i < D->n_out; i++)
        free(D->outbox[i].buf);
    for (int i = 0; i < D->n_in; i++)
        free(D->inbox[i].buf);
    pthread_cond_destroy(&D->cv);
    free(D->inflight), free(D->accepted), free(D->no_wait), free(D->pending), free(D->apply_at);
    free(D->wait_done), free(D);
}

/* The first broken invariant into why; -1. */
static int broken(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int broken(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (why && len)
        vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return -1;
}

int learner_decoupled_check(const learner_decoupled *D, int P, char *why, size_t len)
{
    if (D->n_out < 0 || D->n_out > MAX_QUEUE || D->n_in < 0 || D->n_in > MAX_QUEUE)
        return broken(why, len, "queue counts out of range: n_out %d, n_in %d (capacity %d)", D->n_out,
                      D->n_in, MAX_QUEUE);
    if (D->sending != 0 && D->sending != 1)
        return broken(why, len, "sending is %d: one contribution is on the wire at most", D->sending);
    for (int i = 0; i < D->n_out; i++) {
        const frag_msg *m = &D->outbox[i];
        if (m->p < 0 || m->p >= P || !m->buf)
            return broken(why, len, "outbox[%d]: fragment %d of %d, buffer %p", i, m->p, P, (void *)m->buf);
        if (!D->inflight[m->p])
            return broken(why, len, "outbox[%d]: fragment %d is queued but not in flight", i, m->p);
        for (int k = 0; k < i; k++)
            if (D->outbox[k].p == m->p)
                return broken(why, len, "fragment %d is queued twice (outbox[%d] and [%d])", m->p, k, i);
    }
    for (int i = 0; i < D->n_in; i++) {
        const frag_msg *m = &D->inbox[i];
        if (m->p < 0 || m->p >= P || !m->buf)
            return broken(why, len, "inbox[%d]: fragment %d of %d, buffer %p", i, m->p, P, (void *)m->buf);
    }
    for (int p = 0; p < P; p++) {
        if (D->accepted[p] && !D->inflight[p])
            return broken(why, len, "fragment %d: accepted but not in flight", p);
        if (D->pending[p] && D->inflight[p])
            return broken(why, len, "fragment %d: pending while in flight (it waits for its merged value)",
                          p);
        if (D->apply_at[p] < -1)
            return broken(why, len, "fragment %d: apply_at %lld (a step, or -1 none)", p,
                          (long long)D->apply_at[p]);
    }
    if (D->n_overlap_timeouts < 0 || D->n_overlap_timeouts > D->n_overlap_waits || D->overlap_wait_ms < 0)
        return broken(why, len, "overlap counts: %lld timeouts of %lld waits, %.1f ms",
                      (long long)D->n_overlap_timeouts, (long long)D->n_overlap_waits, D->overlap_wait_ms);
    return 0;
}

#ifndef NDEBUG
void assert_decoupled_state(const learner *L)
{
    char why[256];
    int rc = learner_decoupled_check(L->dec, L->P, why, sizeof why);
    if (rc != 0)
        cx_error("decoupled state: %s", why);
    assert(rc == 0);
}
#endif

int learner_decoupled_sent_accepted(learner *L, int p)
{
    if (!L->dec)
        return 0;
    pthread_mutex_lock(&L->mu);
    int sent = L->dec->inflight[p] && L->dec->accepted[p];
    pthread_mutex_unlock(&L->mu);
    return sent;
}

/* ---- decoupled: the comm thread ---- */

/* comm_main, step 1: rejoin (when the syncer no longer knows this
 * incarnation) and hand every fragment to the main thread through the
 * inbox (reset_all); on a failed pull pull_all stays set and it is tried
 * again. Returns 1 when the thread must leave (the rejoin failed, or the
 * syncer has been silent past give_up_s), else 0. */
static int comm_resync(learner *L, cx_http_client *c, int rejoin, float *buf, int64_t *awaiting)
{
    learner_decoupled *D = L->dec;
    char err[CX_ERRLEN];
    if (rejoin && learner_link_join(L, c, 0, NULL, err, sizeof err) != 0) {
        cx_error("rejoin failed: %s", err);
        pthread_mutex_lock(&L->mu);
        L->fatal = 1;
        pthread_mutex_unlock(&L->mu);
        return 1;
    }
    int ok = 1;
    frag_msg got[MAX_QUEUE];
    int ng = 0;
    for (int p = 0; p < L->P && ok; p++) {
        int64_t v;
        size_t len = fragment_length(L->ft, p);
        int rc = learner_link_pull_one(L, c, p, -1, 0, buf, &v);
        if (rc != 1) {
            ok = 0;
            break;
        }
        got[ng] = (frag_msg){p, v, 0, 0, malloc(len * 4), len * 4, 0, -1};
        if (got[ng].buf)
            memcpy(got[ng].buf, buf, len * 4);
        ng++;
    }
    pthread_mutex_lock(&L->mu);
    if (ok) {
        for (int i = 0; i < D->n_in; i++)
            free(D->inbox[i].buf);
        /* what is still queued was never sent: its progress is carried by
         * the rebase on these values (apply_inbox), not sent against an
         * older base */
        for (int i = 0; i < D->n_out; i++)
            free(D->outbox[i].buf);
        D->n_out = 0;
        for (int i = 0; i < ng; i++)
            D->inbox[i] = got[i];
        D->n_in = ng;
        D->reset_all = 1;
        pthread_cond_broadcast(&D->cv);
        D->pull_all = 0;
        for (int p = 0; p < L->P; p++)
            awaiting[p] = -1;
    } else {
        for (int i = 0; i < ng; i++)
            free(got[i].buf);
        D->pull_all = 1; /* e.g. 503 while the syncer rebuilds: pull again */
    }
    pthread_mutex_unlock(&L->mu);
    if (!ok && learner_link_gave_up(L))
        return 1;
    if (!ok)
        cx_sleep_ms(200);
    return 0;
}

/* comm_main, step 2: POST the contribution m took from the outbox (frees
 * its buffer) and note what to wait for: the version its round merges
 * into, anything newer than its base, or nothing (refused: the fragment
 * is no longer in flight). Returns 1 when the thread must leave. */
static int comm_send(learner *L, cx_http_client *c, frag_msg *m, int64_t *awaiting)
{
    learner_decoupled *D = L->dec;
    int64_t into;
    int status = learner_contrib_post(L, c, m, &into);
    free(m->buf);
    pthread_mutex_lock(&L->mu);
    D->sending = 0;
    D->accepted[m->p] = status == 202; /* its steps are sent: a rebase keeps only what came after */
    D->no_wait[m->p] = status != 202 || into < 0; /* no merged value to wait for at s + tau */
    if (status == 202 && into > m->version)
        awaiting[m->p] = into - 1; /* the version our round merges into, which holds our work */
    else if (status == 202 || status == 409)
        awaiting[m->p] = m->version; /* refused as stale, or no round said: anything newer */
    else
        D->inflight[m->p] = 0; /* refused: the fragment goes back to training */
    pthread_mutex_unlock(&L->mu);
    return status == 0 && learner_link_gave_up(L);
}

/* comm_main, step 3: nothing to send or wait for: sleep on D->cv (100 ms
 * at most) unless work came in meanwhile. */
static void comm_idle(learner *L)
{
    learner_decoupled *D = L->dec;
    pthread_mutex_lock(&L->mu);
    if (D->n_out == 0 && !L->threads_stop && !L->need_rejoin && !D->pull_all)
        (void)cx_cond_wait_until_ms(&D->cv, &L->mu, cx_mono_ms() + 100);
    pthread_mutex_unlock(&L->mu);
}

/* comm_main, step 4: one long poll of GET /v1/versions on the merge
 * counter for every fragment awaited, then fetch those that moved past
 * what they wait for into the inbox. */
static void comm_poll(learner *L, cx_http_client *c, int64_t *seen_merges, int64_t *awaiting, float *buf)
{
    learner_decoupled *D = L->dec;
    char path[96];
    cx_http_result r;
    int64_t vers[FRAGMENT_MAX < 256 ? FRAGMENT_MAX : 256];
    int nv = 0;
    snprintf(path, sizeof path, "/v1/versions?merges-above=%lld&wait-ms=50", (long long)*seen_merges);
    cx_http_result_init(&r);
    if (learner_link_call(L, c, "GET", path, NULL, NULL, 0, NULL, HTTP_TIMEOUT_MS, &r) == 0 &&
        r.status == 200) {
        json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
        json_t *va = json_object_get(j, "versions");
        *seen_merges = json_integer_value(json_object_get(j, "merges"));
        for (size_t i = 0; i < json_array_size(va) && nv < 256; i++)
            vers[nv++] = json_integer_value(json_array_get(va, i));
        json_decref(j);
    }
    cx_http_result_cleanup(&r);
    for (int p = 0; p < L->P && p < nv; p++) {
        if (vers[p] > L->seen_ver[p])
            L->seen_ver[p] = vers[p]; /* published: a rebuild goes above it */
        if (awaiting[p] < 0 || vers[p] <= awaiting[p])
            continue;
        int64_t v = L->gver[p];
        if (vers[p] <= L->gver[p]) /* our copy is already that new (after a resync) */
            fragment_gather(L->ft, p, L->gcopy, buf);
        else if (learner_link_pull_one(L, c, p, L->gver[p], 0, buf, &v) != 1)
            continue;
        size_t len = fragment_length(L->ft, p);
        frag_msg in = {p, v, 0, 0, malloc(len * 4), len * 4, 0, -1};
        if (in.buf)
            memcpy(in.buf, buf, len * 4);
        pthread_mutex_lock(&L->mu);
        if (D->n_in < MAX_QUEUE && in.buf)
            D->inbox[D->n_in++] = in;
        else
            free(in.buf);
        pthread_cond_broadcast(&D->cv); /* an overlap wait may be for it */
        pthread_mutex_unlock(&L->mu);
        awaiting[p] = -1;
    }
}

static void *comm_main(void *arg)
{
    learner *L = arg;
    learner_decoupled *D = L->dec;
    cx_http_client *c = learner_link_new_client(L);
    int64_t *awaiting = malloc((size_t)L->P * sizeof(int64_t)); /* base version waited on, -1 none */
    size_t maxlen = 0;
    for (int p = 0; p < L->P; p++)
        if (fragment_length(L->ft, p) > maxlen)
            maxlen = fragment_length(L->ft, p);
    float *buf = malloc(maxlen * sizeof(float));
    int64_t seen_merges = 0; /* merge counter at our last look */
    if (!c || !awaiting || !buf) {
        pthread_mutex_lock(&L->mu);
        L->fatal = 1;
        pthread_mutex_unlock(&L->mu);
        goto out;
    }
    for (int p = 0; p < L->P; p++)
        awaiting[p] = -1;
    for (;;) {
        pthread_mutex_lock(&L->mu);
        if (L->threads_stop && D->n_out == 0) {
            pthread_mutex_unlock(&L->mu);
            break;
        }
        int rejoin = L->need_rejoin, pull = D->pull_all;
        frag_msg m = {0};
        int have = 0;
        if (!rejoin && !pull && !D->reset_all && D->n_out > 0) {
            m = D->outbox[0];
            memmove(&D->outbox[0], &D->outbox[1], (size_t)(D->n_out - 1) * sizeof m);
            D->n_out--;
            have = 1;
            D->sending = 1;
        }
        pthread_mutex_unlock(&L->mu);
        if (*L->stop && !L->threads_stop) {
            /* a signal: leave now, what is queued is dropped (the flush
             * does not wait for it, see comm_done) */
            if (have)
                free(m.buf);
            break;
        }

        if (rejoin || pull) {
            if (comm_resync(L, c, rejoin, buf, awaiting))
                break;
            continue;
        }
        if (have) {
            if (comm_send(L, c, &m, awaiting))
                break;
            continue;
        }
        /* long-poll what we wait for: one wait on the merge counter for all
         * fragments, then fetch the ones that moved past our base */
        int n_await = 0;
        for (int p = 0; p < L->P; p++)
            n_await += awaiting[p] >= 0;
        if (n_await == 0) {
            comm_idle(L);
            continue;
        }
        comm_poll(L, c, &seen_merges, awaiting, buf);
        if (learner_link_gave_up(L))
            break;
    }
out:
    pthread_mutex_lock(&L->mu);
    D->sending = 0;
    D->comm_done = 1;
    pthread_mutex_unlock(&L->mu);
    free(awaiting);
    free(buf);
    cx_http_client_free(c);
    return NULL;
}

/* Main thread, between two steps: take what the comm thread received, by
 * rebasing (learner_rebase: the merged value plus our progress not in it).
 * The merged value of a contribution sent at step s is applied at step
 * s + tau (apply_at): one that came earlier stays in the inbox until then
 * (not once training is over); after a (re)join or a resync everything is
 * taken at once. */
static void apply_inbox(learner *L)
{
    learner_decoupled *D = L->dec;
    pthread_mutex_lock(&L->mu);
    if (D->reset_all) {
        for (int p = 0; p < L->P; p++)
            D->apply_at[p] = -1;
        D->reset_all = 0;
        cx_info("took every fragment after a (re)join or a resync");
    }
    int kept = 0;
    for (int i = 0; i < D->n_in; i++) {
        frag_msg *m = &D->inbox[i];
        if (D->apply_at[m->p] >= 0 && L->step < D->apply_at[m->p] && !D->finishing) {
            D->inbox[kept++] = *m; /* not yet: tau steps of overlap */
            continue;
        }
        D->apply_at[m->p] = -1;
        size_t len = fragment_length(L->ft, m->p);
        proto_f32_decode(m->buf, len, L->scratch);
        learner_rebase_apply(L, m->p, L->scratch, m->version, D->inflight[m->p] && D->accepted[m->p]);
        D->inflight[m->p] = 0;
        D->accepted[m->p] = 0;
        D->pending[m->p] = 0; /* just received: its next turn comes on schedule */
        free(m->buf);
    }
    D->n_in = kept;
    assert_decoupled_state(L);
    pthread_mutex_unlock(&L->mu);
}

/* Main thread, before a step: a fragment whose merged value is due now
 * (step >= apply_at) and has not arrived is waited for, once per
 * contribution, at most min(tau x step time, OVERLAP_WAIT_MAX_MS) — unless
 * its answer named no merged value to wait for (no_wait), or the
 * last wait timed out and no value has been on time since (a syncer that is
 * gone or slow costs one bounded wait, not one per fragment). A K=1 round
 * closes without waiting for slow peers, so this waits only for the
 * syncer's merge and the transfer. */
static void overlap_wait(learner *L)
{
    learner_decoupled *D = L->dec;
    for (int p = 0; p < L->P; p++) {
        if (D->apply_at[p] < 0 || D->wait_done[p] || L->step < D->apply_at[p])
            continue;
        D->wait_done[p] = 1;
        pthread_mutex_lock(&L->mu);
        int here = 0;
        for (int i = 0; i < D->n_in; i++)
            here |= D->inbox[i].p == p;
        if (here) {
            D->overlap_off = 0; /* on time */
            pthread_mutex_unlock(&L->mu);
            continue;
        }
        if (D->no_wait[p] || D->overlap_off || !D->inflight[p]) {
            pthread_mutex_unlock(&L->mu);
            continue;
        }
        double w = (double)L->cfg.tau * L->step_ms_ema;
        if (w > OVERLAP_WAIT_MAX_MS)
            w = OVERLAP_WAIT_MAX_MS;
        if (w < 1)
            w = 1;
        int64_t t0 = cx_mono_ns(), end = t0 + (int64_t)(w * 1e6);
        while (!here && !*L->stop && !L->fatal && !L->need_rejoin && !D->pull_all && !D->reset_all) {
            int rc = cx_cond_wait_until_ns(&D->cv, &L->mu, end);
            for (int i = 0; i < D->n_in; i++)
                here |= D->inbox[i].p == p;
            if (rc == CX_ETIMEDOUT)
                break;
        }
        pthread_mutex_unlock(&L->mu);
        double ms = (double)(cx_mono_ns() - t0) / 1e6;
        D->n_overlap_waits++;
        D->overlap_wait_ms += ms;
        if (!here) {
            D->overlap_off = 1;
            if (D->n_overlap_timeouts++ == 0)
                cx_info(
                    "fragment %d: its merged value was not here %lld steps after the send; waited %.1f ms "
                    "and went on (logged once; counts at exit)",
                    p, (long long)L->cfg.tau, ms);
        }
    }
}

/* Hand fragment p's contribution (Δ_p = Θ_base_p − θ_p, every step since
 * origin_step) to the comm thread. 0, or -1 when out of memory (nothing
 * changed). Main thread. */
static int enqueue_one(learner *L, int p)
{
    learner_decoupled *D = L->dec;
    frag_msg m = {p, L->rb.base_version[p], L->rb.frag_tokens[p], L->rb.frag_steps[p], NULL, 0, 0, L->step};
    m.buf = learner_contrib_make(L, p, &m.len, &m.crc);
    if (!m.buf)
        return -1;
    learner_contrib_commit(L, p); /* sent from here on: its fate is the comm thread's */
    learner_rebase_note_send(L, &m);
    D->pending[p] = 0;
    D->apply_at[p] = L->step + L->cfg.tau; /* its merged value is applied tau steps from now */
    D->wait_done[p] = 0;
    pthread_mutex_lock(&L->mu);
    D->no_wait[p] = 0; /* until its answer says otherwise */
    D->accepted[p] = 0;
    D->outbox[D->n_out++] = m;
    D->inflight[p] = 1;
    assert_decoupled_state(L);
    pthread_cond_broadcast(&D->cv);
    pthread_mutex_unlock(&L->mu);
    return 0;
}

/* Fragments due by the stagger schedule are sent at once unless tau
 * contributions are already queued or on the wire; then they wait (pending)
 * for a free slot, and go with the delta of that moment. A fragment still
 * waiting for its merged version is not sent again: its progress goes with
 * its next turn (rebase). */
static void enqueue_due(learner *L)
{
    learner_decoupled *D = L->dec;
    int due[CONFIG_FRAGMENTS_MAX];
    pthread_mutex_lock(&L->mu);
    int64_t sched = L->step + L->sched_off; /* the run's schedule position (join) */
    pthread_mutex_unlock(&L->mu);
    int nd = fragment_due(sched, (int)L->cfg.H, L->P, due, CONFIG_FRAGMENTS_MAX);
    if (nd > CONFIG_FRAGMENTS_MAX)
        nd = CONFIG_FRAGMENTS_MAX;
    for (int i = 0; i < nd; i++)
        if (!D->inflight[due[i]])
            D->pending[due[i]] = 1;
    for (int p = 0; p < L->P; p++) {
        if (!D->pending[p])
            continue;
        pthread_mutex_lock(&L->mu);
        int blocked = D->n_out + D->sending >= L->cfg.tau || D->n_out >= MAX_QUEUE || D->reset_all ||
                      D->pull_all || L->need_rejoin;
        int busy = D->inflight[p];
        pthread_mutex_unlock(&L->mu);
        if (busy) {
            D->pending[p] = 0;
            continue;
        }
        if (blocked)
            break;
        (void)enqueue_one(L, p);
    }
}

/* After the last step: send what every fragment has not sent, so that no
 * trained step stays behind. A fragment whose contribution is in flight
 * first takes its merged value (rebase), then sends the steps since; one
 * whose contribution was accepted with nothing after it is done. Bounded
 * by FINAL_SEND_MS; what could not be sent is reported in the leave
 * (learner.c, "unsent"). Main thread. */
static void final_send(learner *L)
{
    learner_decoupled *D = L->dec;
    D->finishing = 1;
    int64_t end = cx_mono_ms() + FINAL_SEND_MS;
    for (;;) {
        apply_inbox(L);
        pthread_mutex_lock(&L->mu);
        int gone = D->comm_done || L->fatal;
        int hold = L->need_rejoin || D->pull_all || D->reset_all; /* a resync first: it rebases everything */
        pthread_mutex_unlock(&L->mu);
        int left = hold;
        for (int p = 0; p < L->P && !gone && !hold; p++) {
            pthread_mutex_lock(&L->mu);
            int infl = D->inflight[p], acc = D->accepted[p], room = D->n_out < MAX_QUEUE;
            pthread_mutex_unlock(&L->mu);
            if (infl) /* waiting for its answer, or for its merged value to send the rest */
                left += !acc || L->rb.frag_steps[p] > L->rb.send_steps[p];
            else if (L->rb.frag_steps[p] > 0 && room && enqueue_one(L, p) == 0)
                left++;
        }
        if (left == 0 || gone || *L->stop || cx_mono_ms() > end)
            break;
        pthread_mutex_lock(&L->mu);
        (void)cx_cond_wait_until_ms(&D->cv, &L->mu, cx_mono_ms() + 50);
        pthread_mutex_unlock(&L->mu);
    }
}

/* ---- decoupled: the loop ---- */

int learner_decoupled_loop(learner *L, char *err, size_t errlen)
{
    learner_decoupled *D = L->dec = learner_decoupled_new(L->P);
    pthread_t comm;
    if (!D)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    if (pthread_create(&comm, NULL, comm_main, L) != 0)
        return cx_fail(err, errlen, CX_ESYS, "cannot start the comm thread");
    int rc = 0;
    while (learner_keep_training(L)) {
        apply_inbox(L);
        pthread_mutex_lock(&L->mu);
        int fatal = L->fatal;
        pthread_mutex_unlock(&L->mu);
        if (fatal) {
            rc = cx_fail(err, errlen, CX_EUNAVAIL, "syncer %s unreachable for more than %.0f s",
                         L->o->syncer_url, L->o->give_up_s);
            break;
        }
        overlap_wait(L); /* training goes on while the comm thread rejoins */
        apply_inbox(L);
        learner_local_step(L);
        if (!learner_params_finite(L)) {
            cx_warn("own parameters are not finite; discarding them and pulling the global ones");
            adamw_reset_range(L->opt, 0, L->n, NULL, 0);
            memcpy(model_params(L->m), L->base, L->n * sizeof(float));
            learner_rebase_drop_progress(L);
            pthread_mutex_lock(&L->mu);
            D->pull_all = 1;
            pthread_cond_broadcast(&D->cv);
            pthread_mutex_unlock(&L->mu);
            continue;
        }
        enqueue_due(L);
    }
    if (rc == 0 && !*L->stop)
        final_send(L);
    /* flush: let the comm thread send what is queued (bounded). Only while
     * it still runs: on a signal it leaves its loop at once and nobody
     * would empty the queue, so waiting would only spend the stop grace
     * (the SIGTERM checkpoint comes after this). */
    int64_t end = cx_mono_ms() + 10000;
    for (;;) {
        pthread_mutex_lock(&L->mu);
        int pending = D->n_out + D->sending, gone = D->comm_done;
        pthread_mutex_unlock(&L->mu);
        if (pending == 0 || gone || *L->stop || cx_mono_ms() > end || rc != 0)
            break;
        cx_sleep_ms(20);
    }
    apply_inbox(L);
    pthread_mutex_lock(&L->mu);
    L->threads_stop = 1;
    for (int i = 0; i < D->n_out; i++) /* anything still queued after the bound is dropped */
        free(D->outbox[i].buf);
    D->n_out = 0;
    pthread_cond_broadcast(&D->cv);
    pthread_mutex_unlock(&L->mu);
    pthread_join(comm, NULL);
    for (int i = 0; i < D->n_in; i++)
        free(D->inbox[i].buf);
    D->n_in = 0;
    cx_info("overlap: %lld waits for a merged value at s + tau (%.0f ms in all), %lld timed out",
            (long long)D->n_overlap_waits, D->overlap_wait_ms, (long long)D->n_overlap_timeouts);
    return rc;
}
