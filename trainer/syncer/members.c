/* members.c - the syncer's members component (members.h): learner slots, joins,
 * leaves, heartbeats, the end of the run, and rejections.
 *
 * What it is: the learner table (find, count, check, touch), how many
 * learners a barrier waits for, POST /v1/join (with the rebuild's report of
 * what the learner holds), /v1/leave, /v1/heartbeat, /v1/end, and the
 * rejection counter and its aggregated reject events, the marking of
 * silent learners absent (for the ticker), the restore of the slots from a
 * checkpoint, and what the other components note on a slot. The only
 * writer of s->members. What it is not: the rebuild decision (rebuild.c).
 * Everything here runs with s->mu held or takes it, like every handler, or
 * runs before serving (members.h).
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
#include "common/json.h"
#include "common/log.h"
#include "trainer/events.h"
#include "numerics/fragment.h"
#include "numerics/merge.h"
#include "trainer/protocol.h"
#include "trainer/syncer/core.h"

const char *const members_state_names[] = {"active", "absent", "left"};

/* ---- syncer: learners ---- */

static int find_slot(syncer *s, int64_t id)
{
    for (int i = 0; i < MAX_LEARNERS; i++)
        if (s->members.learners[i].id == id)
            return i;
    return -1;
}

int64_t members_tokens_trained(const syncer *s)
{
    int64_t t = s->members.tokens_trained_closed;
    for (int i = 0; i < MAX_LEARNERS; i++) {
        const learner_rec *l = &s->members.learners[i];
        if (l->id >= 0 && l->incarnation > 0 && l->start_tokens >= 0 && l->tokens > l->start_tokens)
            t += l->tokens - l->start_tokens;
    }
    return t;
}

int members_count(const syncer *s, int only_active)
{
    int n = 0;
    for (int i = 0; i < MAX_LEARNERS; i++) {
        const learner_rec *l = &s->members.learners[i];
        if (l->id < 0 || l->incarnation == 0)
            continue;
        if (only_active ? l->state == LS_ACTIVE : l->state != LS_LEFT)
            n++;
    }
    return n;
}

/* How many learners a barrier waits for. Strict barriers (ddp, diloco
 * without deadline) wait for all M except those that finished; elastic ones
 * for the learners currently alive. */
int members_barrier_need(const syncer *s)
{
    int elastic = s->cfg.mode == CONFIG_MODE_DDP_ELASTIC ||
                  (s->cfg.mode == CONFIG_MODE_DILOCO && s->cfg.elastic_deadline_ms > 0);
    if (elastic) {
        int a = members_count(s, 1);
        return a > 0 ? a : 1;
    }
    int left = 0;
    for (int i = 0; i < MAX_LEARNERS; i++)
        if (s->members.learners[i].id >= 0 && s->members.learners[i].incarnation > 0 &&
            s->members.learners[i].state == LS_LEFT)
            left++;
    int need = (int)s->cfg.learners - left;
    return need > 0 ? need : 1;
}

/* Check learner + incarnation of a request. Returns PROTO_OK and *slot, or
 * the reject reason. */
proto_reason members_check(syncer *s, int64_t id, int64_t inc, int *slot)
{
    int i = find_slot(s, id);
    if (i < 0 || s->members.learners[i].incarnation == 0)
        return PROTO_R_UNKNOWN_LEARNER;
    if (inc != s->members.learners[i].incarnation || s->members.learners[i].must_rejoin)
        return PROTO_R_STALE_INCARNATION;
    *slot = i;
    return PROTO_OK;
}

/* Slots hold distinct ids (-1: free, and never joined); a slot's
 * counters are non-negative and its clipped ones among its accepted ones;
 * every counter of the component is non-negative; the end has its time
 * once it happened, and none before (mu held). */
static void assert_members_state(const syncer *s)
{
#ifndef NDEBUG
    const syncer_members *m = &s->members;
    for (int i = 0; i < MAX_LEARNERS; i++) {
        const learner_rec *l = &m->learners[i];
        assert(l->id >= -1);
        if (l->id < 0) {
            assert(l->incarnation == 0);
            continue;
        }
        for (int j = i + 1; j < MAX_LEARNERS; j++)
            assert(m->learners[j].id != l->id);
        assert(l->incarnation >= 0 && (unsigned)l->state <= LS_LEFT);
        assert(l->accepted >= 0 && l->rejected >= 0 && l->clipped >= 0 && l->clipped <= l->accepted);
        assert(l->adopted_own >= 0 && l->adopted_own <= l->adopted);
    }
    for (int r = 0; r < PROTO_R_COUNT; r++)
        assert(m->rejects[r] >= 0 && m->ragg[r].pending >= 0 && m->ragg[r].pending <= m->rejects[r]);
    assert(m->tokens_trained_closed >= 0 && m->lost_frag_steps >= 0 && m->lost_frag_tokens >= 0);
    assert(m->ended == 0 || m->ended == 1);
    assert(m->ended ? m->end_ms > 0 : m->end_ms == 0 && m->end_reason[0] == '\0');
#else
    (void)s;
#endif
}

void members_touch(syncer *s, int slot)
{
    learner_rec *l = &s->members.learners[slot];
    l->last_seen_ms = cx_mono_ms();
    if (l->state == LS_ABSENT)
        l->state = LS_ACTIVE;
}

/* ---- syncer: slots set up, restored, and noted by the other components ---- */

void members_init(syncer *s)
{
    memset(&s->members, 0, sizeof s->members);
    for (int i = 0; i < MAX_LEARNERS; i++)
        s->members.learners[i].id = -1;
    assert_members_state(s);
}

void members_restore(syncer *s, const ckpt_syncer *c)
{
    s->members.tokens_trained_closed = c->tokens_trained; /* what restored learners trained is in it */
    for (int64_t i = 0; i < c->n_learners && i < MAX_LEARNERS; i++) {
        learner_rec *l = &s->members.learners[i];
        memset(l, 0, sizeof *l);
        l->id = c->learners[i].learner;
        l->incarnation = c->learners[i].incarnation;
        l->state = LS_ABSENT; /* until it is heard from */
        l->last_seen_ms = cx_mono_ms();
        l->ddp_arrived = l->ddp_dropped = -1;
        l->batch = s->cfg.batch;
        l->steps_total = s->cfg.steps;
        l->start_tokens = -1; /* its tokens so far are in tokens_trained_closed */
    }
    assert_members_state(s);
}

void members_require_rejoin(syncer *s)
{
    for (int i = 0; i < MAX_LEARNERS; i++)
        if (s->members.learners[i].id >= 0 && s->members.learners[i].incarnation > 0)
            s->members.learners[i].must_rejoin = 1;
}

void members_check_absent(syncer *s, int64_t now)
{
    for (int i = 0; i < MAX_LEARNERS; i++) {
        learner_rec *l = &s->members.learners[i];
        if (l->id >= 0 && l->incarnation > 0 && l->state == LS_ACTIVE &&
            now - l->last_seen_ms > s->cfg.heartbeat_timeout_ms) {
            l->state = LS_ABSENT;
            cx_warn("learner %lld incarnation %lld absent (no heartbeat for %lld ms)", (long long)l->id,
                    (long long)l->incarnation, (long long)(now - l->last_seen_ms));
            events_emit(s->ev, "drop",
                        json_pack("{s:I, s:I, s:s}", "learner", (json_int_t)l->id, "incarnation",
                                  (json_int_t)l->incarnation, "reason", "absent"));
        }
    }
}

void members_note_contribution(syncer *s, int slot, int64_t step, int clipped)
{
    learner_rec *l = &s->members.learners[slot];
    if (step > l->step)
        l->step = step;
    l->accepted++;
    l->clipped += clipped != 0;
    assert_members_state(s);
}

void members_note_pace(syncer *s, int slot, int64_t cstep, int64_t now)
{
    learner_rec *l = &s->members.learners[slot];
    /* queued contributions arrive bunched: a span shorter than H would measure the queue, not the steps */
    if (l->c_ms == 0 || cstep < l->c_step) {
        l->c_ms = now;
        l->c_step = cstep;
    } else if (cstep - l->c_step >= s->cfg.H) {
        merge_ema_add(&l->step_wall, (double)(now - l->c_ms) / (double)(cstep - l->c_step));
        l->c_ms = now;
        l->c_step = cstep;
    }
}

void members_note_gradient(syncer *s, int slot, int64_t t, int clipped)
{
    learner_rec *l = &s->members.learners[slot];
    l->ddp_arrived = t;
    l->accepted++;
    l->clipped += clipped != 0;
    assert_members_state(s);
}

void members_note_ddp_dropped(syncer *s, int slot, int64_t t)
{
    s->members.learners[slot].ddp_dropped = t;
}

void members_ddp_forget(syncer *s)
{
    for (int i = 0; i < MAX_LEARNERS; i++)
        s->members.learners[i].ddp_arrived = s->members.learners[i].ddp_dropped = -1;
}

void members_note_adopted(syncer *s, int slot, int own)
{
    s->members.learners[slot].adopted++;
    s->members.learners[slot].adopted_own += own != 0;
    assert_members_state(s);
}

/* The HTTP status a rejection of each reason is answered with: the only
 * list. A reason added at the end without its line fails to compile;
 * test_syncer_members checks that every reason has one. */
static const int reason_status[] = {
    [PROTO_OK] = 400, /* not a rejection */
    [PROTO_R_CHECKSUM] = 400,
    [PROTO_R_LENGTH] = 400,
    [PROTO_R_NONFINITE] = 400,
    [PROTO_R_UNKNOWN_LEARNER] = 403,
    [PROTO_R_STALE_INCARNATION] = 409,
    [PROTO_R_STALE_VERSION] = 409,
    [PROTO_R_BAD_HEADER] = 400,
    [PROTO_R_HALTED] = 503,
    [PROTO_R_NORM] = 400,
    [PROTO_R_CLAIM] = 400,
    [PROTO_R_AUTH] = 400, /* the access table answers 401/403 before any reason */
    [PROTO_R_MERGE] = 400,
};
_Static_assert(sizeof reason_status / sizeof reason_status[0] == PROTO_R_COUNT,
               "members.c: reason_status needs one line per proto_reason");

int members_reason_status(proto_reason r)
{
    return (unsigned)r < PROTO_R_COUNT ? reason_status[r] : 400;
}

/* Write the reject event of reason r for its pending rejections (mu held). */
static void reject_flush(syncer *s, proto_reason r, int64_t now)
{
    reject_agg *a = &s->members.ragg[r];
    if (a->pending == 0)
        return;
    events_emit(s->ev, "reject",
                json_pack("{s:I, s:I, s:I, s:s, s:s, s:I}", "learner", (json_int_t)a->learner, "incarnation",
                          (json_int_t)a->incarnation, "fragment", (json_int_t)a->fragment, "reason",
                          proto_reason_name(r), "detail", a->detail, "count", (json_int_t)a->pending));
    cx_warn("reject learner=%lld incarnation=%lld fragment=%lld reason=%s count=%lld: %s",
            (long long)a->learner, (long long)a->incarnation, (long long)a->fragment, proto_reason_name(r),
            (long long)a->pending, a->detail);
    a->pending = 0;
    a->window_ms = now;
}

/* Flush every reason whose interval is over (mu held; the ticker, and
 * syncer_free with force). */
void members_reject_flush_due(syncer *s, int64_t now, int force)
{
    for (int r = 1; r < PROTO_R_COUNT; r++)
        if (s->members.ragg[r].pending > 0 &&
            (force || now - s->members.ragg[r].window_ms >= REJECT_EVENT_MS))
            reject_flush(s, (proto_reason)r, now);
}

/* Count a rejection and log it (mu held): the first of a reason in an
 * interval is written at once, the others are counted into one event when
 * the interval ends, so a flood of bad requests grows events.jsonl and the
 * log by O(1) lines per second. */
void members_reject_note(syncer *s, proto_reason r, int64_t learner, int64_t inc, int64_t fragment,
                         const char *detail)
{
    int64_t now = cx_mono_ms();
    reject_agg *a = &s->members.ragg[r];
    s->members.rejects[r]++;
    int slot = learner >= 0 ? find_slot(s, learner) : -1;
    if (slot >= 0)
        s->members.learners[slot].rejected++;
    if (a->pending++ == 0) {
        a->learner = learner;
        a->incarnation = inc;
        a->fragment = fragment;
        snprintf(a->detail, sizeof a->detail, "%s", detail);
    }
    assert_members_state(s);
    if (a->window_ms == 0 || now - a->window_ms >= REJECT_EVENT_MS)
        reject_flush(s, r, now);
}

/* Count, log and answer a rejection (called with mu held or not: takes it). */
void members_reject(syncer *s, cx_http_resp *resp, proto_reason r, int64_t learner, int64_t inc,
                    int64_t fragment, const char *detail, int locked)
{
    if (!locked)
        pthread_mutex_lock(&s->mu);
    members_reject_note(s, r, learner, inc, fragment, detail);
    /* tell the learner where the syncer is */
    json_t *where = NULL;
    if ((r == PROTO_R_STALE_VERSION || r == PROTO_R_STALE_INCARNATION) && fragment >= 0 && fragment < s->P)
        where = json_pack("{s:I}", "version", (json_int_t)s->versions[fragment]);
    if (!locked)
        pthread_mutex_unlock(&s->mu);
    cx_http_reply_problem(resp, members_reason_status(r), proto_reason_name(r), where, "%s", detail);
}

/* ---- syncer: POST /v1/join ---- */

static int join_checked(syncer *s, cx_http_resp *resp, const members_join_req *in);

int members_route_join(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    json_t *body, *holds = NULL;
    json_int_t id = -1, inc = 0, step = 0, tokens = -1;
    char err[CX_ERRLEN];
    if (cx_http_body_json(req, resp, 0, &body) != 0)
        return 0;
    if (cx_json_unpack(body, "body", err, sizeof err, "{s:I, s:I, s?I, s?I, s?o}", "learner", &id,
                       "incarnation", &inc, "step", &step, "tokens", &tokens, "holds", &holds) != 0) {
        json_decref(body);
        cx_http_reply_error(resp, 400, "%s", err);
        return 0;
    }
    /* what the learner holds (optional: old learners and first joins send
     * none) */
    int64_t *hv = NULL, *hp = NULL;
    uint32_t *hc = NULL;
    int *upload = NULL, *hs = NULL;
    if (holds) {
        hv = malloc((size_t)s->P * sizeof *hv);
        hp = malloc((size_t)s->P * sizeof *hp);
        hc = malloc((size_t)s->P * sizeof *hc);
        hs = malloc((size_t)s->P * sizeof *hs);
        upload = malloc((size_t)s->P * sizeof *upload);
        if (!hv || !hp || !hc || !hs || !upload) {
            free(hv), free(hp), free(hc), free(hs), free(upload);
            json_decref(body);
            cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
            return 0;
        }
        if (rebuild_parse_holds(s, holds, hv, hc, hp, hs, resp) != 0) {
            free(hv), free(hp), free(hc), free(hs), free(upload);
            json_decref(body);
            return 0;
        }
    }
    json_decref(body);
    if (!syncer_api_learner_is_caller(s, req, resp, id, "join")) {
        free(hv), free(hp), free(hc), free(hs), free(upload);
        return 0;
    }
    members_join_req in = {.id = id,
                           .inc = inc,
                           .step = step,
                           .tokens = tokens,
                           .hv = hv,
                           .hc = hc,
                           .hp = hp,
                           .hs = hs,
                           .upload = upload};
    join_checked(s, resp, &in);
    free(hv), free(hp), free(hc), free(hs), free(upload);
    return 0;
}

/* The 503 answer of a join during a rebuild (mu held): the fragments this
 * learner must upload to POST /v1/fragments/{p}/state with the incarnation
 * given here, then join again. */
static void join_rebuilding(syncer *s, cx_http_resp *resp, rebuild_state rb, json_int_t id, int64_t inc,
                            const int *upload, int n_up)
{
    json_t *up = json_array();
    for (int i = 0; i < n_up; i++)
        json_array_append_new(up, json_integer(upload[i]));
    if (rb == RB_REFUSED) {
        json_decref(up);
        rebuild_gate(s, resp);
        return;
    }
    cx_info("join learner=%lld incarnation=%lld during the rebuild: %d fragments to upload", (long long)id,
            (long long)inc, n_up);
    cx_http_reply_problem(
        resp, 503, NULL,
        json_pack("{s:{s:I, s:o, s:i}}", "rebuild", "incarnation", (json_int_t)inc, "upload", up, "retry_ms",
                  RB_RETRY_MS),
        "rebuilding the global state from the learners; upload what is asked, then join again");
    cx_http_add_header(resp, "Retry-After", "1");
}

/* Decoupled: the steps the previous incarnation of the learner in slot
 * trained and that are lost now that it resumes at `step` (mu held, before
 * the join overwrites its record). Per fragment p, with a = the step of
 * its last accepted contribution to p: it reported training up to
 * last = l->step; what it sent (up to a) is in the global model, what its
 * checkpoint holds unsent (up to `step`) its restart carries
 * (learner_start_fragment), so max(0, last − max(step, a)) steps are lost.
 * Counted in lost_frag_steps/_tokens; the `lost` event (new reference,
 * also when nothing was lost: it carries last_step, how far the previous
 * incarnation trained) or NULL when the learner resumes at or past what it
 * reported (a rejoin of a live learner, a first join). */
static json_t *join_lost(syncer *s, int slot, int64_t step)
{
    const learner_rec *l = &s->members.learners[slot];
    if (s->cfg.mode != CONFIG_MODE_DECOUPLED || l->incarnation == 0 || l->step <= step)
        return NULL;
    json_t *steps = json_array();
    int64_t sum = 0;
    for (int p = 0; p < s->P; p++) {
        int64_t a = s->rounds.acc_step[slot * s->P + p], kept = a > step ? a : step;
        int64_t n = l->step > kept ? l->step - kept : 0;
        sum += n;
        json_array_append_new(steps, json_integer(n));
    }
    s->members.lost_frag_steps += sum;
    s->members.lost_frag_tokens += sum * l->batch;
    if (sum > 0)
        cx_info("learner %lld resumes at step %lld after reporting %lld: %lld fragment-steps trained and "
                "never sent "
                "are lost",
                (long long)l->id, (long long)step, (long long)l->step, (long long)sum);
    return json_pack("{s:I, s:I, s:I, s:I, s:o, s:I}", "learner", (json_int_t)l->id, "incarnation",
                     (json_int_t)l->incarnation, "resumed_step", (json_int_t)step, "last_step",
                     (json_int_t)l->step, "steps", steps, "tokens", (json_int_t)(sum * l->batch));
}

members_join_verdict members_join(syncer *s, const members_join_req *in, members_join_res *out)
{
    memset(out, 0, sizeof *out);
    int slot = find_slot(s, in->id);
    /* an incarnation grows by at most INCARNATION_MAX_STEP per join, so one
     * request cannot push a learner id out of reach (nor near overflow) */
    int64_t cur = slot >= 0 ? s->members.learners[slot].incarnation : 0;
    out->incarnation = cur;
    if (in->inc > cur + INCARNATION_MAX_STEP)
        return MEMBERS_JOIN_INC_TOO_FAR;
    if (slot < 0) {
        int known = 0;
        for (int i = 0; i < MAX_LEARNERS; i++)
            if (s->members.learners[i].id >= 0)
                known++;
        for (int i = 0; i < MAX_LEARNERS && slot < 0; i++)
            if (s->members.learners[i].id < 0 && known < s->cfg.learners)
                slot = i;
        out->known = known;
        if (slot < 0)
            return MEMBERS_JOIN_FULL;
        memset(&s->members.learners[slot], 0, sizeof s->members.learners[slot]);
        s->members.learners[slot].id = in->id;
        s->members.learners[slot].ddp_arrived = s->members.learners[slot].ddp_dropped = -1;
        s->members.learners[slot].batch = s->cfg.batch;
        s->members.learners[slot].steps_total = s->cfg.steps;
        rounds_learner_new(s, slot);
    }
    out->slot = slot;
    learner_rec *l = &s->members.learners[slot];
    out->lost = join_lost(s, slot, in->step);
    rounds_learner_joined(s, slot);     /* it pulls every fragment after a join */
    merge_ema_init(&l->step_wall, 0.2); /* a new incarnation may run at another speed */
    l->c_ms = l->c_step = 0;
    int64_t new_inc = (l->incarnation > in->inc ? l->incarnation : in->inc) + 1;
    l->incarnation = new_inc;
    out->incarnation = new_inc;
    l->state = LS_ACTIVE;
    l->joined_ms = l->last_seen_ms = cx_mono_ms();
    /* the tokens its previous incarnation trained: to the last count it
     * reported, or to its checkpoint's when that is newer (it trained
     * that far); a join without tokens counts from its steps */
    int64_t tok = in->tokens >= 0 ? in->tokens : in->step * l->batch;
    if (l->start_tokens >= 0 && l->incarnation > 0)
        s->members.tokens_trained_closed += (l->tokens > tok ? l->tokens : tok) - l->start_tokens;
    l->start_tokens = tok;
    l->tokens = tok;
    l->step = in->step;
    l->resumed_step = in->step;
    l->ddp_arrived = -1;
    l->must_rejoin = 0;
    assert_members_state(s);
    out->rb = rebuild_join(s, slot, in->hv, in->hc, in->hp, in->hs, in->step, in->upload, &out->n_up);
    if (out->rb != RB_NONE)
        return MEMBERS_JOIN_REBUILD;
    if (s->cfg.mode == CONFIG_MODE_DECOUPLED) {
        /* it counts its schedule from there (trainer/learner/link.c): the same offset here turns the step its
         * contributions name into schedule steps */
        out->schedule_step = rounds_schedule_step_now(s, slot, cx_mono_ms());
        l->sched_off = out->schedule_step > 0 ? out->schedule_step - in->step : 0;
    }
    return MEMBERS_JOIN_OK;
}

/* The join once the body is decoded (members_route_join): range checks,
 * members_join under the lock, and the answer; in carries the holds
 * (versions, CRCs, published, sealed) or NULL, and room for P fragment ids
 * in upload. */
static int join_checked(syncer *s, cx_http_resp *resp, const members_join_req *in)
{
    if (syncer_api_check_field(resp, "join", "learner", in->id, 0, PROTO_MAX_LEARNER_ID) ||
        syncer_api_check_field(resp, "join", "incarnation", in->inc, 0, INT64_MAX / 2) ||
        syncer_api_check_field(resp, "join", "step", in->step, 0, CONFIG_STEPS_MAX) ||
        (in->tokens != -1 &&
         syncer_api_check_field(resp, "join", "tokens", in->tokens, 0, CONFIG_STEPS_MAX * CONFIG_BATCH_MAX)))
        return 0;
    members_join_res r;
    pthread_mutex_lock(&s->mu);
    members_join_verdict v = members_join(s, in, &r);
    if (v == MEMBERS_JOIN_INC_TOO_FAR) {
        pthread_mutex_unlock(&s->mu);
        cx_http_reply_error(
            resp, 400, "join: field 'incarnation' is %lld, more than %d above learner %lld's current %lld",
            (long long)in->inc, INCARNATION_MAX_STEP, (long long)in->id, (long long)r.incarnation);
        return 0;
    }
    if (v == MEMBERS_JOIN_FULL) {
        pthread_mutex_unlock(&s->mu);
        cx_http_reply_error(resp, 409, "the run expects %lld learners and %d other ids have joined",
                            (long long)s->cfg.learners, r.known);
        return 0;
    }
    if (v == MEMBERS_JOIN_REBUILD) {
        join_rebuilding(s, resp, r.rb, in->id, r.incarnation, in->upload, r.n_up);
        pthread_mutex_unlock(&s->mu);
        if (r.lost)
            events_emit(s->ev, "lost", r.lost);
        return 0;
    }
    json_t *ans =
        json_pack("{s:I, s:I, s:o, s:o, s:I, s:i, s:I, s:s, s:I}", "learner", (json_int_t)in->id,
                  "incarnation", (json_int_t)r.incarnation, "config", config_to_json(&s->cfg), "fragments",
                  syncer_api_fragments_json(s), "n_params", (json_int_t)s->n, "table_digest",
                  (int)fragment_table_digest(s->ft), "step", (json_int_t)s->ddp.step, "mode",
                  syncer_mode_name(s), "merges", (json_int_t)s->merges);
    if (s->cfg.mode == CONFIG_MODE_DECOUPLED) {
        json_object_set_new(ans, "schedule_step", json_integer(r.schedule_step));
        json_t *acc = json_array(); /* what a restarted learner may carry (learner_start_fragment) */
        for (int p = 0; p < s->P; p++)
            json_array_append_new(acc, json_integer(s->rounds.acc_step[r.slot * s->P + p]));
        json_object_set_new(ans, "accepted_steps", acc);
    }
    pthread_mutex_unlock(&s->mu);
    if (r.lost)
        events_emit(s->ev, "lost", r.lost);
    json_t *jev = json_pack("{s:I, s:I, s:I}", "learner", (json_int_t)in->id, "incarnation",
                            (json_int_t)r.incarnation, "resumed_step", (json_int_t)in->step);
    if (in->hv && jev) { /* the versions it reported holding (a rejoin after a syncer restart) */
        json_t *held = json_array();
        for (int p = 0; p < s->P; p++)
            json_array_append_new(held, json_integer(in->hv[p]));
        json_object_set_new(jev, "held_versions", held);
    }
    events_emit(s->ev, "join", jev);
    cx_info("join learner=%lld incarnation=%lld resumed_step=%lld", (long long)in->id,
            (long long)r.incarnation, (long long)in->step);
    cx_http_reply_json(resp, 200, ans);
    return 0;
}

/* ---- syncer: POST /v1/leave ---- */

int members_route_leave(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    json_t *body, *unsent = NULL;
    json_int_t id = -1, inc = 0, step = -1, tokens = -1;
    char err[CX_ERRLEN];
    int slot;
    if (cx_http_body_json(req, resp, 0, &body) != 0)
        return 0;
    if (cx_json_unpack(body, "body", err, sizeof err, "{s:I, s:I, s?I, s?I, s?o}", "learner", &id,
                       "incarnation", &inc, "step", &step, "tokens", &tokens, "unsent", &unsent) != 0) {
        json_decref(body);
        cx_http_reply_error(resp, 400, "%s", err);
        return 0;
    }
    /* the final step, tokens and per-fragment unsent steps (optional): the
     * leave event, where accounting reads them */
    json_t *ev = json_pack("{s:I, s:I}", "learner", id, "incarnation", inc);
    if ((step != -1 && syncer_api_check_field(resp, "leave", "step", step, 0, CONFIG_STEPS_MAX)) ||
        (tokens != -1 &&
         syncer_api_check_field(resp, "leave", "tokens", tokens, 0, CONFIG_STEPS_MAX * CONFIG_BATCH_MAX))) {
        json_decref(ev);
        json_decref(body);
        return 0;
    }
    if (step >= 0)
        json_object_set_new(ev, "step", json_integer(step));
    if (tokens >= 0)
        json_object_set_new(ev, "tokens", json_integer(tokens));
    if (unsent) {
        json_t *u = json_array(), *e;
        size_t i;
        int ok = json_is_array(unsent) && json_array_size(unsent) == (size_t)s->P;
        json_array_foreach(unsent, i, e)
        {
            ok = ok && json_is_integer(e) && json_integer_value(e) >= 0 &&
                 json_integer_value(e) <= CONFIG_STEPS_MAX;
            json_array_append_new(u, json_integer(json_integer_value(e)));
        }
        if (!ok) {
            json_decref(u);
            json_decref(ev);
            json_decref(body);
            cx_http_reply_error(resp, 400, "leave: field 'unsent' must be %d integers in 0..%lld", s->P,
                                (long long)CONFIG_STEPS_MAX);
            return 0;
        }
        json_object_set_new(ev, "unsent", u);
    }
    json_decref(body);
    if (!syncer_api_learner_is_caller(s, req, resp, id, "leave")) {
        json_decref(ev);
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    proto_reason r = members_check(s, id, inc, &slot);
    if (r != PROTO_OK) {
        pthread_mutex_unlock(&s->mu);
        json_decref(ev);
        cx_http_reply_error(resp, members_reason_status(r), "leave: %s", proto_reason_name(r));
        return 0;
    }
    s->members.learners[slot].state = LS_LEFT;
    if (step > s->members.learners[slot].step)
        s->members.learners[slot].step = step;
    if (tokens > s->members.learners[slot].tokens)
        s->members.learners[slot].tokens = tokens;
    assert_members_state(s);
    /* barriers waiting for it may now be complete */
    pthread_cond_broadcast(&s->tick_cv);
    pthread_mutex_unlock(&s->mu);
    events_emit(s->ev, "leave", ev);
    cx_info("leave learner=%lld incarnation=%lld", (long long)id, (long long)inc);
    cx_http_reply_json(resp, 200, json_pack("{s:b}", "ok", 1));
    return 0;
}

/* ---- syncer: POST /v1/heartbeat ---- */

int members_route_heartbeat(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    json_t *body;
    json_int_t id = -1, inc = 0, step = 0, tokens = 0, t_real_ms = 0, cursor = 0, batch = -1,
               steps_total = -1;
    double loss = 0, step_ms = 0, pull_ms = 0;
    char err[CX_ERRLEN];
    int slot;
    if (cx_http_body_json(req, resp, 0, &body) != 0)
        return 0;
    if (cx_json_unpack(body, "body", err, sizeof err,
                       "{s:I, s:I, s:I, s:F, s:I, s:F, s:I, s?I, s?I, s?I, s?F}", "learner", &id,
                       "incarnation", &inc, "step", &step, "train_loss", &loss, "tokens", &tokens, "step_ms",
                       &step_ms, "t_real_ms", &t_real_ms, "cursor", &cursor, "batch", &batch, "steps_total",
                       &steps_total, "pull_ms", &pull_ms) != 0) {
        json_decref(body);
        cx_http_reply_error(resp, 400, "%s", err);
        return 0;
    }
    json_decref(body);
    if (!syncer_api_learner_is_caller(s, req, resp, id, "heartbeat"))
        return 0;
    /* every field in range before any arithmetic on it (the skew below) */
    if (syncer_api_check_field(resp, "heartbeat", "learner", id, 0, PROTO_MAX_LEARNER_ID) ||
        syncer_api_check_field(resp, "heartbeat", "incarnation", inc, 1, INT64_MAX / 2) ||
        syncer_api_check_field(resp, "heartbeat", "step", step, 0, CONFIG_STEPS_MAX) ||
        syncer_api_check_field(resp, "heartbeat", "tokens", tokens, 0, CONFIG_STEPS_MAX * CONFIG_BATCH_MAX) ||
        syncer_api_check_field(resp, "heartbeat", "t_real_ms", t_real_ms, 0, T_REAL_MAX_MS) ||
        syncer_api_check_field(resp, "heartbeat", "cursor", cursor, 0, INT64_MAX / 2) ||
        (batch != -1 && syncer_api_check_field(resp, "heartbeat", "batch", batch, 1, CONFIG_BATCH_MAX)) ||
        (steps_total != -1 &&
         syncer_api_check_field(resp, "heartbeat", "steps_total", steps_total, 1, CONFIG_STEPS_MAX)) ||
        syncer_api_check_real(resp, "heartbeat", "train_loss", loss, 0, 1e9) ||
        syncer_api_check_real(resp, "heartbeat", "step_ms", step_ms, 0, 1e9) ||
        syncer_api_check_real(resp, "heartbeat", "pull_ms", pull_ms, 0, 1e9))
        return 0;
    int64_t skew = t_real_ms - cx_real_ns() / 1000000;
    pthread_mutex_lock(&s->mu);
    proto_reason r = members_check(s, id, inc, &slot);
    if (r != PROTO_OK) {
        pthread_mutex_unlock(&s->mu);
        cx_http_reply_error(resp, members_reason_status(r), "heartbeat: %s (learner %lld incarnation %lld)",
                            proto_reason_name(r), (long long)id, (long long)inc);
        return 0;
    }
    learner_rec *l = &s->members.learners[slot];
    members_touch(s, slot);
    l->step = step;
    l->tokens = tokens;
    l->train_loss = loss;
    l->step_ms = step_ms;
    l->pull_ms = pull_ms;
    l->clock_skew_ms = skew;
    if (batch > 0)
        l->batch = batch;
    if (steps_total > 0)
        l->steps_total = steps_total;
    int64_t now = cx_mono_ms();
    int emit = now - l->last_hb_event_ms >= 1000;
    if (emit)
        l->last_hb_event_ms = now;
    assert_members_state(s);
    int ended = s->members.ended;
    pthread_mutex_unlock(&s->mu);
    if (emit)
        events_emit(s->ev, "heartbeat",
                    json_pack("{s:I, s:I, s:I, s:o, s:I, s:f, s:I}", "learner", id, "incarnation", inc,
                              "step", step, "train_loss", isfinite(loss) ? json_real(loss) : json_null(),
                              "tokens", tokens, "step_ms", step_ms, "clock_skew_ms", (json_int_t)skew));
    /* "end": the run was ended (POST /v1/end): finish the step, send, leave */
    cx_http_reply_json(resp, 200, json_pack("{s:b, s:b}", "ok", 1, "end", ended));
    return 0;
}

/* ---- syncer: POST /v1/end ---- */

/* End the run gracefully: from now on every heartbeat answer says "end",
 * learners finish their inner step, send what they have and leave. The
 * syncer keeps serving (merges, reads) until it is stopped; its final eval
 * and checkpoint run at shutdown as always. Idempotent: a second call
 * answers "already": true and keeps the first reason. */
int members_route_end(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    json_t *body;
    const char *r = "";
    char err[CX_ERRLEN], reason[sizeof s->members.end_reason];
    if (cx_http_body_json(req, resp, 1, &body) != 0)
        return 0;
    json_t *jr = json_object_get(body, "reason");
    if (jr && !json_is_string(jr)) {
        json_decref(body);
        cx_http_reply_error(resp, 400, "body: reason must be a string");
        return 0;
    }
    if (cx_json_unpack(body, "body", err, sizeof err, "{s?s}", "reason", &r) != 0) {
        json_decref(body);
        cx_http_reply_error(resp, 400, "%s", err);
        return 0;
    }
    if (strlen(r) >= sizeof reason) {
        json_decref(body);
        cx_http_reply_error(resp, 400, "body: reason is longer than %zu bytes", sizeof reason - 1);
        return 0;
    }
    snprintf(reason, sizeof reason, "%s", r);
    json_decref(body);
    pthread_mutex_lock(&s->mu);
    int already = s->members.ended;
    if (!already) {
        s->members.ended = 1;
        s->members.end_ms = cx_mono_ms();
        snprintf(s->members.end_reason, sizeof s->members.end_reason, "%s", reason);
    }
    assert_members_state(s);
    json_t *ans = json_pack("{s:b, s:b, s:s, s:I}", "ended", 1, "already", already, "reason",
                            s->members.end_reason, "merges", (json_int_t)s->merges);
    pthread_mutex_unlock(&s->mu);
    if (!already) {
        events_emit(s->ev, "end", json_pack("{s:s}", "reason", reason));
        cx_info("end requested: %s", reason[0] ? reason : "(no reason)");
    }
    cx_http_reply_json(resp, 200, ans);
    return 0;
}
