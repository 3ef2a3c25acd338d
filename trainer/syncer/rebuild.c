/* rebuild.c - the syncer's rebuild component (rebuild.h): rebuild its global state from the learners
 * after a lost or stale state dir.
 *
 * What it is: the rebuild state machine drawn below, the report a learner
 * makes at join (rebuild_join, called from members.c), the 503 gate
 * of reads and contributions while it runs, and POST
 * /v1/fragments/{p}/state. What it is not: what dur_restore() found at start
 * (durability.c).
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
#include "common/parse.h"
#include "trainer/events.h"
#include "numerics/fragment.h"
#include "numerics/optim.h"
#include "trainer/protocol.h"
#include "trainer/syncer/core.h"

const char *const rebuild_state_names[] = {"none", "collecting", "writing", "refused"};

/* ---- syncer: rebuild from the learners ----
 *
 * A syncer that lost its state dir (or its last minutes) would hand out an
 * older global model than every learner holds. Learners report at join
 * what they hold ("holds": per-fragment version and CRC32C of their copy of
 * the global fragment, exactly as the syncer sent it). A report above what
 * the syncer restored opens a collection:
 *
 *         rebuild_join(): a report above the bar
 *   NONE ───────────────────────────────────────────► COLLECTING
 *    ▲  │ (no valid checkpoint and --on-lost-state       │ rebuild_route_state(): uploads staged
 *    │  │  refuse: REFUSED for good, 503 everywhere)     │ rebuild_tick(): every wanted copy in and
 *    │  ▼                                               │ every expected learner joined, or the
 *    │ REFUSED                                          │ window (heartbeat_timeout_ms) is over
 *    │                                                  ▼
 *    └──── rebuild_tick(): checkpoint written, ───── WRITING (staged copies applied,
 *          `rebuild` event, long-polls woken            versions bumped, momentum reset)
 *
 *   NONE        serving normally.
 *   COLLECTING  joins answer 503 with the fragments this learner must
 *               upload; fragment GETs and contributions answer 503
 *               "rebuilding" (retryable); uploads are staged in frag[].vals.
 *   WRITING     the rebuilt state is in theta; still 503 until the
 *               checkpoint is on disk.
 * A rebuilt fragment continues at max reported + 1 + M * tau (rb_gap).
 * Only versions > 0 count: an untrained learner never seeds the state.
 * The bar of fragment p is the checkpoint's version while p has not
 * changed since the start, then its current version (a learner cannot hold
 * a version the syncer did not publish since).
 * ddp modes use the same machine with a bigger copy: a ddp learner is
 * bit-identical with the syncer after each step it received, so what it
 * holds is the syncer's whole state at the version of that step. Its report
 * names that version for every fragment and the CRC32C of each fragment's
 * params | AdamW m | v; an upload carries those 3 x length values plus the
 * ddp step and AdamW step counter (headers). All fragments must come from
 * one version (one step): rebuild_tick applies a ddp collection only when
 * every fragment is staged at the same version, step and AdamW count, and
 * otherwise opens it again (the live learners, still joining, report
 * afresh). rebuild_apply then also sets the AdamW state and the ddp step;
 * the learners take it with GET /v1/optimizer after their join. */

#define RB_VERSION_MAX (INT64_MAX / 4) /* bound of a reported version (the bump adds 1) */

/* What holds of s->rebuild between calls (mu held): REFUSED only after a
 * start without a valid checkpoint under --on-lost-state refuse; a
 * collection has its opening time; copies are wanted and staged only while
 * one runs, and a fragment starts at or above its checkpoint's version;
 * who joined is a flag per slot. */
static void assert_rebuild_state(const syncer *s)
{
#ifndef NDEBUG
    const syncer_rebuild *rb = &s->rebuild;
    assert(rb->state >= RB_NONE && rb->state <= RB_REFUSED);
    assert(rb->state != RB_REFUSED ||
           (s->start != START_RESTORED && rb->on_lost_state == SYNCER_LOST_REFUSE));
    assert(rb->state != RB_COLLECTING || rb->opened_ms > 0);
    assert(rb->count >= 0 && (rb->guard == 0 || rb->guard == 1));
    for (int i = 0; i < MAX_LEARNERS; i++)
        assert(rb->joined[i] == 0 || rb->joined[i] == 1);
    for (int p = 0; p < s->P; p++) {
        const rb_frag *f = &rb->frag[p];
        assert(rb->state == RB_COLLECTING || rb->state == RB_WRITING || (f->want_version == 0 && !f->vals));
        assert(!f->vals == (f->got_version == 0));
        assert(f->ckpt_version <= f->start_version && f->published >= -1);
    }
#else
    (void)s;
#endif
}

int rebuild_init(syncer *s, int on_lost_state, char *err, size_t errlen)
{
    syncer_rebuild *rb = &s->rebuild;
    rb->on_lost_state = on_lost_state;
    rb->frag = calloc((size_t)s->P, sizeof *rb->frag);
    rb->rep = calloc((size_t)MAX_LEARNERS * (size_t)s->P, sizeof *rb->rep);
    if (!rb->frag || !rb->rep) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        return -1;
    }
    return 0;
}

void rebuild_cleanup(syncer *s)
{
    for (int p = 0; s->rebuild.frag && p < s->P; p++)
        free(s->rebuild.frag[p].vals);
    free(s->rebuild.frag), free(s->rebuild.rep);
}

void rebuild_note_restored(syncer *s)
{
    for (int p = 0; p < s->P; p++)
        s->rebuild.frag[p].ckpt_version = s->versions[p];
}

void rebuild_note_start(syncer *s, int bumped)
{
    /* what this syncer published: the checkpoint and the merges logged after it, which the bump
     * put every version above; no record at all (a new run or a wiped dir): unknown (-1) */
    int record = s->start == START_RESTORED || bumped;
    for (int p = 0; p < s->P; p++) {
        rb_frag *f = &s->rebuild.frag[p];
        f->start_version = s->versions[p];
        f->want_learner = f->got_learner = -1;
        f->published = record ? s->versions[p] : -1;
    }
    s->rebuild.guard = s->start != START_RESTORED || bumped;
    assert_rebuild_state(s);
}

/* Versions a rebuild skips past the newest reported one (rebuild_apply). */
static int64_t rb_gap(const syncer *s)
{
    return s->cfg.learners * (s->cfg.tau > 0 ? s->cfg.tau : 1);
}

/* Floats in a learner's copy of fragment p: the fragment, or in ddp modes
 * the fragment's params, AdamW m and v. */
static size_t rb_state_len(const syncer *s, int p)
{
    return fragment_length(s->ft, p) * (syncer_is_ddp(s) ? 3 : 1);
}

static int64_t rb_bar(const syncer *s, int p)
{
    const rb_frag *f = &s->rebuild.frag[p];
    return s->versions[p] == f->start_version ? f->ckpt_version : s->versions[p];
}

/* The highest version of fragment p this syncer knows it published (mu
 * held), or -1 when it has no record: it started from a state dir with
 * neither a checkpoint nor a merge in its event log (a new run, or a wiped
 * dir) and has merged nothing since (once it has merged any fragment, it
 * published every version of every fragment itself). A learner cannot hold a version above
 * it: such a report is a claim, never a copy (rebuild_join refuses it).
 * Without a record the syncer cannot tell a wiped dir from a new run and
 * trusts the reports as before (docs/security.md says what that leaves). */
static int64_t rb_published(const syncer *s, int p)
{
    const rb_frag *f = &s->rebuild.frag[p];
    if (f->published >= 0)
        return f->published > s->versions[p] ? f->published : s->versions[p];
    for (int q = 0; q < s->P; q++)
        if (s->versions[q] != s->rebuild.frag[q].start_version)
            return s->versions[p];
    return -1;
}

/* A join's report of fragment p at version v that is not a copy of ours
 * (mu held): above what this syncer published (published >= 0), or not
 * sealed by it (trainer/seal.h; why = "unsealed"); logged and counted as a
 * rebuild_claim_refused event; the report is dropped. */
static void rb_claim_refused(syncer *s, int slot, int p, int64_t v, int64_t published, const char *why)
{
    const learner_rec *l = &s->members.learners[slot];
    if (strcmp(why, "unpublished") == 0)
        cx_warn(
            "rebuild: learner %lld claims fragment %d version %lld, above the %lld this syncer published: "
            "ignored",
            (long long)l->id, p, (long long)v, (long long)published);
    else
        cx_warn("rebuild: learner %lld reports fragment %d version %lld without this syncer's seal on it: "
                "ignored",
                (long long)l->id, p, (long long)v);
    events_emit(s->ev, "rebuild_claim_refused",
                json_pack("{s:I, s:I, s:i, s:I, s:I, s:s}", "learner", (json_int_t)l->id, "incarnation",
                          (json_int_t)l->incarnation, "fragment", p, "version", (json_int_t)v, "published",
                          (json_int_t)published, "reason", why));
}

/* Decode the optional "holds" of a join body into v[P], crc[P], pub[P]
 * and sealed[P] (1 when the report of p carries this syncer's seal on
 * (p, v, crc)). 0, or -1 with a 400 naming what was wrong. */
int rebuild_parse_holds(syncer *s, json_t *holds, int64_t *v, uint32_t *crc, int64_t *pub, int *sealed,
                        cx_http_resp *resp)
{
    json_t *jv = NULL, *jc = NULL, *jp = NULL, *js = NULL;
    char err[CX_ERRLEN];
    if (cx_json_unpack(holds, "join: field 'holds'", err, sizeof err, "{s:o, s:o, s?o, s?o}", "versions", &jv,
                       "crc32c", &jc, "published", &jp, "seal", &js) != 0) {
        cx_http_reply_error(resp, 400, "%s", err);
        return -1;
    }
    if (!json_is_array(jv) || !json_is_array(jc) || json_array_size(jv) != (size_t)s->P ||
        json_array_size(jc) != (size_t)s->P) {
        cx_http_reply_error(resp, 400,
                            "join: field 'holds': versions and crc32c must be arrays of %d entries", s->P);
        return -1;
    }
    for (int p = 0; p < s->P; p++) {
        json_t *a = json_array_get(jv, (size_t)p), *b = json_array_get(jc, (size_t)p);
        if (!json_is_integer(a) || json_integer_value(a) < -1 || json_integer_value(a) > RB_VERSION_MAX) {
            cx_http_reply_error(resp, 400, "join: field 'holds.versions[%d]' must be an integer -1..%lld", p,
                                (long long)RB_VERSION_MAX);
            return -1;
        }
        if (!json_is_string(b) || proto_crc_parse(json_string_value(b), &crc[p]) != 0) {
            cx_http_reply_error(resp, 400, "join: field 'holds.crc32c[%d]' must be 1-8 hex digits", p);
            return -1;
        }
        v[p] = json_integer_value(a);
        pub[p] = v[p];
    }
    if (jp && (!json_is_array(jp) || json_array_size(jp) != (size_t)s->P)) {
        cx_http_reply_error(resp, 400, "join: field 'holds.published' must be an array of %d entries", s->P);
        return -1;
    }
    for (int p = 0; jp && p < s->P; p++) {
        json_t *a = json_array_get(jp, (size_t)p);
        if (!json_is_integer(a) || json_integer_value(a) < 0 || json_integer_value(a) > RB_VERSION_MAX) {
            cx_http_reply_error(resp, 400, "join: field 'holds.published[%d]' must be an integer 0..%lld", p,
                                (long long)RB_VERSION_MAX);
            return -1;
        }
        if (json_integer_value(a) > pub[p])
            pub[p] = json_integer_value(a);
    }
    if (js && (!json_is_array(js) || json_array_size(js) != (size_t)s->P)) {
        cx_http_reply_error(resp, 400, "join: field 'holds.seal' must be an array of %d entries", s->P);
        return -1;
    }
    for (int p = 0; p < s->P; p++) {
        json_t *a = js ? json_array_get(js, (size_t)p) : NULL;
        const char *t = json_string_value(a);
        if (js && (!t || (t[0] && !seal_well_formed(t)))) {
            cx_http_reply_error(resp, 400, "join: field 'holds.seal[%d]' must be \"\" or %d hex digits", p,
                                SEAL_HEX);
            return -1;
        }
        sealed[p] = t && t[0] && !syncer_is_ddp(s) &&
                    seal_check(&s->access.seal, fragment_table_digest(s->ft), p, v[p], crc[p], t);
    }
    if (syncer_is_ddp(s) && js) {
        /* one state: every fragment at one version under one seal */
        const char *t0 = json_string_value(json_array_get(js, 0));
        int one = t0 && t0[0];
        for (int p = 1; p < s->P && one; p++)
            one = v[p] == v[0] && strcmp(json_string_value(json_array_get(js, (size_t)p)), t0) == 0;
        one = one && seal_check_state(&s->access.seal, fragment_table_digest(s->ft), v[0], crc, s->P, t0);
        for (int p = 0; p < s->P; p++)
            sealed[p] = one;
    }
    return 0;
}

/* A join of the learner in `slot` that reported v/crc (NULL: no holds)
 * and named `step` (ddp: the step its copy is at) (mu held). Returns
 * RB_NONE to join normally, RB_COLLECTING to answer 503 with the fragments
 * it must upload (upload[*n]), RB_REFUSED to refuse. */
rebuild_state rebuild_join(syncer *s, int slot, const int64_t *v, const uint32_t *crc, const int64_t *pub,
                           const int *sealed, int64_t step, int *upload, int *n)
{
    int64_t id = s->members.learners[slot].id;
    *n = 0;
    if (s->rebuild.state == RB_REFUSED)
        return RB_REFUSED;
    if (s->rebuild.state == RB_WRITING) /* rebuilt, not yet on disk: join again in a moment */
        return RB_COLLECTING;
    if (!v) /* a first join (restarted learner) or an old learner: it holds nothing we can use */
        memset(&s->rebuild.rep[slot * s->P], 0, (size_t)s->P * sizeof *s->rebuild.rep);
    for (int p = 0; v && p < s->P; p++) {
        rb_frag *f = &s->rebuild.frag[p];
        int64_t published = rb_published(s, p), seen = pub[p];
        if (published >= 0 && v[p] > published) {
            /* never published here: not a copy of ours; it opens nothing and cannot be uploaded */
            rb_claim_refused(s, slot, p, v[p], published, "unpublished");
            s->rebuild.rep[slot * s->P + p] = (rb_report){0, 0, step};
            continue;
        }
        if (v[p] > 0 && s->access.seal.set && !sealed[p]) {
            /* not a copy this syncer sealed when it served it: a claim (or a copy from before seals) */
            rb_claim_refused(s, slot, p, v[p], published, "unsealed");
            s->rebuild.rep[slot * s->P + p] = (rb_report){0, 0, step};
            continue;
        }
        if (published >= 0 && seen > published) { /* nor can it have seen one above: no version jump */
            rb_claim_refused(s, slot, p, seen, published, "unpublished");
            seen = published;
        }
        s->rebuild.rep[slot * s->P + p] = (rb_report){v[p], crc[p], step};
        if (seen > f->max_reported) /* published (it holds or saw it): a rebuild goes above */
            f->max_reported = seen;
        if (v[p] <= 0) /* untrained (or nothing held): never seeds the state */
            continue;
        if (v[p] <= rb_bar(s, p))
            continue;
        if (v[p] == f->want_version && crc[p] != f->want_crc) {
            f->disagree++;
            cx_warn(
                "rebuild: learner %lld holds fragment %d version %lld with CRC32C %08x, learner %lld with "
                "%08x; keeping the first",
                (long long)id, p, (long long)v[p], crc[p], (long long)f->want_learner, f->want_crc);
        }
        if (v[p] > f->want_version) {
            f->want_version = v[p];
            f->want_learner = id;
            f->want_crc = crc[p];
        }
        if (v[p] > f->got_version)
            upload[(*n)++] = p;
    }
    if (*n > 0 && s->rebuild.state == RB_NONE) {
        if (s->start != START_RESTORED && s->rebuild.on_lost_state == SYNCER_LOST_REFUSE) {
            s->rebuild.state = RB_REFUSED;
            cx_error(
                "learner %lld holds trained fragments but this syncer started without a valid checkpoint "
                "(%s state dir) and --on-lost-state is refuse: serving nothing; restore %s and restart",
                (long long)id, dur_start_kind_names[s->start], s->state_dir);
            events_emit(s->ev, "lost_state",
                        json_pack("{s:s, s:I, s:s}", "start_state", dur_start_kind_names[s->start], "learner",
                                  (json_int_t)id, "action", "refuse"));
            for (int p = 0; p < s->P; p++)
                s->rebuild.frag[p].want_version = 0;
            assert_rebuild_state(s);
            return RB_REFUSED;
        }
        s->rebuild.state = RB_COLLECTING;
        s->rebuild.opened_ms = cx_mono_ms();
        memset(s->rebuild.joined, 0, sizeof s->rebuild.joined);
        cx_warn(
            "learner %lld holds fragments newer than this syncer's state (%s start): rebuilding the global "
            "state from the learners; fragments and contributions answer 503 until done",
            (long long)id, dur_start_kind_names[s->start]);
    }
    if (s->rebuild.state == RB_COLLECTING)
        s->rebuild.joined[slot] = 1;
    assert_rebuild_state(s);
    return s->rebuild.state == RB_COLLECTING ? RB_COLLECTING : RB_NONE;
}

/* 1 (and a 503 in resp) while the global state is not being served (mu
 * held): fragment GETs and contributions retry. */
int rebuild_gate(syncer *s, cx_http_resp *resp)
{
    if (s->rebuild.state == RB_NONE)
        return 0;
    if (s->rebuild.state == RB_REFUSED)
        cx_http_reply_error(
            resp, 503,
            "refused: this syncer lost its state (--on-lost-state refuse); restore %s and restart "
            "it",
            s->state_dir);
    else
        cx_http_reply_error(resp, 503, "rebuilding the global state from the learners; retry");
    cx_http_add_header(resp, "Retry-After", "1");
    return 1;
}

/* 1 (and a 403/409 in resp) for a pull by a learner that has not joined
 * since this syncer started, when the start may need a rebuild (mu held):
 * its copy must stay what it is until it reports it. Otherwise a learner
 * long-polling across the restart would take the syncer's initial (or
 * stale restored) fragment at a bumped version and report that as its
 * copy. Pulls without learner headers are served as before. */
int rebuild_stale_pull(syncer *s, const proto_hdr *h, cx_http_resp *resp)
{
    int slot;
    if (!s->rebuild.guard || h->learner < 0 || h->incarnation <= 0)
        return 0;
    proto_reason r = members_check(s, h->learner, h->incarnation, &slot);
    if (r == PROTO_OK)
        return 0;
    cx_http_reply_error(
        resp, members_reason_status(r),
        "%s: learner %lld incarnation %lld must rejoin (and report what it holds) before it pulls",
        proto_reason_name(r), (long long)h->learner, (long long)h->incarnation);
    return 1;
}

/* 1 when a ddp collection can be applied (mu held): every fragment staged
 * at one version, one step and one AdamW count (one learner state). */
static int rb_ddp_consistent(const syncer *s)
{
    const rb_frag *f0 = &s->rebuild.frag[0];
    for (int p = 0; p < s->P; p++) {
        const rb_frag *f = &s->rebuild.frag[p];
        if (!f->vals || f->got_version != f0->got_version || f->got_step != f0->got_step ||
            f->got_adam != f0->got_adam)
            return 0;
    }
    return 1;
}

/* The ddp part of rebuild_apply (mu held; rb_ddp_consistent): the AdamW
 * step counter and the ddp step of the staged state; the step being
 * collected and the last mean are dropped (learners resync to this step). */
static void rebuild_apply_ddp(syncer *s)
{
    adamw_set_steps(s->opt, (uint64_t)s->rebuild.frag[0].got_adam);
    ddp_restart_at(s, s->rebuild.frag[0].got_step);
    members_ddp_forget(s);
}

/* Apply the staged copies (mu held): theta, versions past everything
 * reported, outer momentum and held contributions of each rebuilt fragment
 * reset; in ddp modes the AdamW moments, step counter and ddp step from the
 * staged copy instead of a momentum reset. Returns the per-fragment
 * sources (new reference). */
static json_t *rebuild_apply(syncer *s)
{
    json_t *src = json_array();
    if (syncer_is_ddp(s) && s->rebuild.frag[0].vals) /* rb_ddp_ready: all fragments or none */
        rebuild_apply_ddp(s);
    for (int p = 0; p < s->P; p++) {
        rb_frag *f = &s->rebuild.frag[p];
        size_t len = fragment_length(s->ft, p);
        int64_t old = s->versions[p];
        if (!f->vals) {
            json_array_append_new(src, json_pack("{s:i, s:s, s:I}", "fragment", p, "from", "syncer",
                                                 "version", (json_int_t)old));
            continue;
        }
        fragment_scatter(s->ft, p, f->vals, s->theta);
        if (syncer_is_ddp(s)) {
            fragment_scatter(s->ft, p, f->vals + len, adamw_m(s->opt));
            fragment_scatter(s->ft, p, f->vals + 2 * len, adamw_v(s->opt));
        }
        memset(f->vals, 0, len * sizeof(float));
        fragment_scatter(s->ft, p, f->vals, s->momentum); /* the outer momentum restarts at 0 */
        /* past everything published: a merge no surviving learner saw
         * (the last instant before the crash) took at least one
         * contribution whose sender had not yet seen the result, and a
         * learner has at most tau of those, so at most M * tau versions of
         * p can be published beyond the newest one reported */
        int64_t top = f->max_reported > old ? f->max_reported : old;
        s->versions[p] = top + 1 + rb_gap(s);
        f->ckpt_version = f->start_version = f->published = s->versions[p];
        rounds_forget(s, p);
        if (s->deltas.hist)
            deltas_forget(s, p);
        char crc[9];
        proto_crc_format(f->got_crc, crc);
        json_array_append_new(
            src, json_pack("{s:i, s:s, s:I, s:I, s:s, s:I, s:I, s:I}", "fragment", p, "from", "learner",
                           "learner", (json_int_t)f->got_learner, "held_version", (json_int_t)f->got_version,
                           "crc32c", crc, "previous_version", (json_int_t)old, "version",
                           (json_int_t)s->versions[p], "disagreeing", (json_int_t)f->disagree));
        cx_info("rebuild: fragment %d from learner %lld (its version %lld, crc32c %s): version %lld -> %lld",
                p, (long long)f->got_learner, (long long)f->got_version, crc, (long long)old,
                (long long)s->versions[p]);
    }
    return src;
}

/* Drop every fragment's collected copy and what it waits for (mu held). */
static void rb_frags_clear(syncer *s)
{
    for (int p = 0; p < s->P; p++) {
        rb_frag *f = &s->rebuild.frag[p];
        free(f->vals);
        f->vals = NULL;
        f->want_version = f->got_version = 0;
        f->want_learner = f->got_learner = -1;
        f->disagree = 0;
    }
}

/* Forget what was collected and collect again (mu held): the learners
 * still alive are still joining (503 until the rebuild is done) and
 * report afresh. */
static void rebuild_reopen(syncer *s, const char *why)
{
    cx_warn("rebuild: %s; collecting the learners' reports again", why);
    rb_frags_clear(s);
    s->rebuild.opened_ms = cx_mono_ms();
    memset(s->rebuild.joined, 0, sizeof s->rebuild.joined);
    assert_rebuild_state(s);
}

/* ddp: 1 when the collection can be applied (mu held): every fragment is
 * staged from one state (rb_ddp_consistent), or nothing is staged nor
 * wanted any more (whoever held a newer state is gone: the syncer keeps
 * its own). A partial or mixed collection is opened again: fragments of
 * two steps are not one model with its AdamW state. */
static int rb_ddp_ready(syncer *s)
{
    int staged = 0, wanted = 0;
    for (int p = 0; p < s->P; p++) {
        staged += s->rebuild.frag[p].vals != NULL;
        wanted += s->rebuild.frag[p].want_version > 0;
    }
    if ((staged == s->P && rb_ddp_consistent(s)) || (staged == 0 && wanted == 0))
        return 1;
    rebuild_reopen(s, staged == s->P ? "the uploaded copies are of different ddp steps"
                                     : "some fragments of the newest ddp state never came");
    return 0;
}

/* The worker's step of the rebuild (mu held; drops it while the
 * checkpoint is written). */
void rebuild_tick(syncer *s)
{
    if (s->rebuild.state != RB_COLLECTING)
        return;
    int64_t now = cx_mono_ms(), age = now - s->rebuild.opened_ms, window = s->cfg.heartbeat_timeout_ms;
    int complete = 1, joined = 0;
    for (int p = 0; p < s->P; p++)
        if (s->rebuild.frag[p].want_version > s->rebuild.frag[p].got_version)
            complete = 0;
    for (int i = 0; i < MAX_LEARNERS; i++)
        joined += s->rebuild.joined[i];
    /* a learner that holds a newer copy and is alive rejoins within a
     * heartbeat or two of the restart; one silent for the heartbeat timeout
     * counts as absent anyway. Past 3 windows, go with what came. */
    if (!((complete && (joined >= s->cfg.learners || age >= window)) || age >= 3 * window))
        return;
    if (syncer_is_ddp(s) && !rb_ddp_ready(s))
        return;
    s->rebuild.state = RB_WRITING;
    json_t *src = rebuild_apply(s);
    dur_eval_soon(s);
    s->rebuild.count++;
    double waited = (double)age;
    int64_t ddp_step = s->ddp.step, adam_steps = s->opt ? (int64_t)adamw_steps(s->opt) : 0;
    pthread_mutex_unlock(&s->mu);
    char err[CX_ERRLEN];
    int rc = dur_write_checkpoint(s, err, sizeof err);
    if (rc != 0)
        cx_error("rebuild: checkpoint failed (%s); serving the rebuilt state anyway", err);
    json_t *ev = json_pack("{s:s, s:o, s:b, s:b, s:f, s:b}", "start_state", dur_start_kind_names[s->start],
                           "fragments", src, "momentum_reset", !syncer_is_ddp(s), "checkpoint", rc == 0,
                           "waited_ms", waited, "complete", complete);
    if (syncer_is_ddp(s)) /* the step and AdamW count the rebuilt state is at (unchanged if none came) */
        json_object_update_new(ev, json_pack("{s:I, s:I}", "ddp_step", (json_int_t)ddp_step, "adam_steps",
                                             (json_int_t)adam_steps));
    events_emit(s->ev, "rebuild", ev);
    cx_info("rebuild done after %.0f ms (%s); serving", waited,
            complete ? "every reported copy uploaded" : "window over, some copies never came");
    pthread_mutex_lock(&s->mu);
    rb_frags_clear(s);
    s->rebuild.state = RB_NONE;
    assert_rebuild_state(s);
    pthread_cond_broadcast(&s->frag_cv);
}

/* A learner's copy of fragment p (mu held); see rebuild.h. */
rebuild_stage_verdict rebuild_stage(syncer *s, int p, const proto_hdr *h, int64_t version, int64_t ddp_step,
                                    int64_t adam, float **vals, size_t body_len, proto_reason *r, char *why,
                                    size_t whylen)
{
    int slot;
    rebuild_stage_verdict v = REBUILD_STAGE_NOT_NEEDED;
    *r = members_check(s, h->learner, h->incarnation, &slot);
    if (s->rebuild.state != RB_COLLECTING) {
        v = REBUILD_STAGE_IDLE;
        snprintf(why, whylen, "state upload: no rebuild is collecting (state %s)",
                 rebuild_state_names[s->rebuild.state]);
    } else if (*r != PROTO_OK) {
        v = REBUILD_STAGE_MEMBER;
        snprintf(why, whylen, "state upload: %s", proto_reason_name(*r));
    } else {
        rb_report rep = s->rebuild.rep[slot * s->P + p];
        rb_frag *f = &s->rebuild.frag[p];
        if (rep.version != version || rep.crc != h->crc32c || (syncer_is_ddp(s) && rep.step != ddp_step)) {
            v = REBUILD_STAGE_MISMATCH;
            snprintf(
                why, whylen,
                "state upload: learner %lld reported fragment %lld version %lld crc32c %08x step %lld at "
                "join, this is version %lld crc32c %08x step %lld",
                (long long)h->learner, (long long)p, (long long)rep.version, rep.crc, (long long)rep.step,
                (long long)version, h->crc32c, (long long)ddp_step);
        } else if (version > f->got_version && version > rb_bar(s, p)) {
            free(f->vals);
            f->vals = *vals;
            *vals = NULL;
            f->got_version = version;
            f->got_learner = h->learner;
            f->got_crc = h->crc32c;
            f->got_step = ddp_step;
            f->got_adam = adam;
            v = REBUILD_STAGE_STAGED;
            members_touch(s, slot);
            s->bytes_in += (int64_t)body_len;
        }
    }
    assert_rebuild_state(s);
    return v;
}

/* POST /v1/fragments/{p}/state: a learner's copy of global fragment p,
 * asked for by its join's 503 answer. Headers: learner, incarnation,
 * fragment, X-Chaosloco-Version (the version it reported), CRC32C, in ddp
 * modes also X-Chaosloco-Step (the step its join named) and
 * X-Chaosloco-Adam-Steps; body: the f32 values (ddp: params | m | v of the
 * fragment, v >= 0). Staged when it matches the report and is newer than
 * what is staged. */
int rebuild_route_state(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t p, version;
    proto_hdr h;
    char why[CX_ERRLEN];
    if (syncer_api_path_int(req->params[0], s->P - 1, &p) != 0) {
        cx_http_reply_error(resp, 404, "no fragment '%s' (fragments are 0..%d)", req->params[0], s->P - 1);
        return 0;
    }
    if (proto_hdr_parse(&h, syncer_api_req_header, req,
                        PROTO_NEED_LEARNER | PROTO_NEED_INCARNATION | PROTO_NEED_FRAGMENT | PROTO_NEED_CRC,
                        why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "state upload: %s", why);
        return 0;
    }
    const char *vh = cx_http_header(req, PROTO_H_VERSION);
    if (!vh || cx_parse_i64(vh, PROTO_H_VERSION, 1, RB_VERSION_MAX, &version, why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "state upload: header %s: %s", PROTO_H_VERSION, vh ? why : "missing");
        return 0;
    }
    if (h.fragment != p) {
        cx_http_reply_error(resp, 400, "state upload: header %s is %lld but the path names fragment %lld",
                            PROTO_H_FRAGMENT, (long long)h.fragment, (long long)p);
        return 0;
    }
    int64_t ddp_step = 0, adam = 0;
    if (syncer_is_ddp(s)) {
        const char *names[2] = {PROTO_H_STEP, PROTO_H_ADAM_STEPS};
        int64_t *outs[2] = {&ddp_step, &adam};
        for (int k = 0; k < 2; k++) {
            const char *hv = cx_http_header(req, names[k]);
            if (!hv || cx_parse_i64(hv, names[k], 0, RB_VERSION_MAX, outs[k], why, sizeof why) != 0) {
                cx_http_reply_error(resp, 400, "state upload: header %s: %s", names[k], hv ? why : "missing");
                return 0;
            }
        }
    }
    size_t flen = fragment_length(s->ft, (int)p), len = rb_state_len(s, (int)p);
    if (proto_check_body(req->body, req->body_len, len * 4, h.crc32c, why, sizeof why) != PROTO_OK) {
        cx_http_reply_error(resp, 400, "state upload: %s", why);
        return 0;
    }
    float *vals = malloc(len * sizeof *vals);
    if (!vals) {
        cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
        return 0;
    }
    proto_f32_decode(req->body, len, vals);
    ptrdiff_t bad = proto_first_nonfinite(vals, len);
    if (bad >= 0) {
        free(vals);
        cx_http_reply_error(resp, 400, "state upload: value %td of fragment %lld is not finite", bad,
                            (long long)p);
        return 0;
    }
    for (size_t i = 2 * flen; syncer_is_ddp(s) && i < len; i++)
        if (vals[i] < 0.0f) { /* AdamW's second moment: its square root is taken */
            free(vals);
            cx_http_reply_error(resp, 400, "state upload: AdamW v value %zu of fragment %lld is negative",
                                i - 2 * flen, (long long)p);
            return 0;
        }
    pthread_mutex_lock(&s->mu);
    proto_reason r;
    rebuild_stage_verdict v =
        rebuild_stage(s, (int)p, &h, version, ddp_step, adam, &vals, req->body_len, &r, why, sizeof why);
    pthread_mutex_unlock(&s->mu);
    free(vals);
    if (v != REBUILD_STAGE_STAGED && v != REBUILD_STAGE_NOT_NEEDED) {
        cx_http_reply_error(resp, v == REBUILD_STAGE_MEMBER ? members_reason_status(r) : 409, "%s", why);
        return 0;
    }
    int staged = v == REBUILD_STAGE_STAGED;
    cx_info("state upload learner=%lld fragment=%lld version=%lld %s", (long long)h.learner, (long long)p,
            (long long)version, staged ? "staged" : "not needed (a newer copy is staged)");
    cx_http_reply_json(resp, 200,
                       json_pack("{s:I, s:I, s:b}", "fragment", (json_int_t)p, "version", (json_int_t)version,
                                 "staged", staged));
    return 0;
}
