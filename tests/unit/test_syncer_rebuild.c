/* test_syncer_rebuild.c - the syncer's rebuild component
 * (trainer/syncer/rebuild.h) without HTTP: on a fresh start, a learner's
 * report of a trained fragment opens a collection that asks for the copy
 * and holds reads; the freshest report wins; an upload is staged only when
 * it is what its learner reported; the worker adopts the freshest staged
 * copies past every reported version; --on-lost-state refuse serves
 * nothing; pulls by learners that did not rejoin are refused. */
#include <criterion/criterion.h>

#include "common/buf.h"
#include "common/err.h"
#include "numerics/fragment.h"
#include "syncer_fixture.h"

static sfx f;

static void setup(void)
{
    sfx_start(&f, CONFIG_MODE_DILOCO, 2, 2);
}

/* --on-lost-state refuse (a test's own .init runs after the suite's: it
 * replaces that syncer) */
static void setup_refuse(void)
{
    sfx_stop(&f);
    sfx_start_ex(&f, CONFIG_MODE_DILOCO, 2, 2, CONFIG_ENC_F32, SYNCER_LOST_REFUSE);
}

static void teardown(void)
{
    sfx_stop(&f);
}

TestSuite(syncer_rebuild, .init = setup, .fini = teardown);

/* Join learner id (incarnation inc named) reporting versions v0, v1 of
 * fragments 0, 1 with CRCs c0, c1; upload[] gets what it must send. */
static members_join_verdict report(int64_t id, int64_t inc, int64_t v0, uint32_t c0, int64_t v1, uint32_t c1,
                                   int *upload, members_join_res *res)
{
    int64_t hv[2] = {v0, v1};
    uint32_t hc[2] = {c0, c1};
    return sfx_join_holds(&f, id, inc, hv, hc, upload, res);
}

/* An upload by learner id (incarnation inc) of fragment p at version with
 * CRC crc, every value `value` (mu taken here). */
static rebuild_stage_verdict upload(int64_t id, int64_t inc, int p, int64_t version, uint32_t crc,
                                    float value, proto_reason *r)
{
    size_t len = fragment_length(f.s->ft, p);
    float *vals = malloc(len * sizeof *vals);
    cr_assert_not_null(vals);
    for (size_t i = 0; i < len; i++)
        vals[i] = value;
    proto_hdr h = {.learner = id, .incarnation = inc, .fragment = p, .crc32c = crc};
    char why[CX_ERRLEN] = "";
    pthread_mutex_lock(&f.s->mu);
    rebuild_stage_verdict v = rebuild_stage(f.s, p, &h, version, 0, 0, &vals, len * 4, r, why, sizeof why);
    pthread_mutex_unlock(&f.s->mu);
    cr_assert_eq(v == REBUILD_STAGE_STAGED, vals == NULL, "taken only when staged (%s)", why);
    free(vals);
    return v;
}

/* rebuild_gate and rebuild_stale_pull (for learner id, incarnation inc;
 * id -1: no learner headers) under the lock: the status they answered, 0
 * when they let the read through. */
static int gate_status(void)
{
    cx_http_resp resp = {0};
    cx_buf_init(&resp.body, 1 << 16);
    pthread_mutex_lock(&f.s->mu);
    int held = rebuild_gate(f.s, &resp);
    pthread_mutex_unlock(&f.s->mu);
    cx_buf_cleanup(&resp.body);
    return held ? resp.status : 0;
}

static int stale_pull_status(int64_t id, int64_t inc)
{
    cx_http_resp resp = {0};
    cx_buf_init(&resp.body, 1 << 16);
    proto_hdr h = {.learner = id, .incarnation = inc};
    pthread_mutex_lock(&f.s->mu);
    int held = rebuild_stale_pull(f.s, &h, &resp);
    pthread_mutex_unlock(&f.s->mu);
    cx_buf_cleanup(&resp.body);
    return held ? resp.status : 0;
}

static void tick(void)
{
    pthread_mutex_lock(&f.s->mu);
    rebuild_tick(f.s);
    pthread_mutex_unlock(&f.s->mu);
}

Test(syncer_rebuild, an_untrained_report_joins_normally_and_opens_nothing)
{
    int up[2];
    members_join_res r;
    cr_assert_eq(report(0, 0, 0, 0, 0, 0, up, &r), MEMBERS_JOIN_OK);
    cr_assert_eq(f.s->rebuild.state, RB_NONE);
    cr_assert_eq(gate_status(), 0, "reads are served");
}

Test(syncer_rebuild, a_report_above_the_start_opens_a_collection_that_asks_for_the_copy)
{
    int up[2] = {-1, -1};
    members_join_res r;
    cr_assert_eq(report(0, 0, 5, 0xabc, 0, 0, up, &r), MEMBERS_JOIN_REBUILD);
    cr_assert_eq(r.rb, RB_COLLECTING);
    cr_assert_eq(r.n_up, 1, "only the trained fragment");
    cr_assert_eq(up[0], 0);
    cr_assert_eq(f.s->rebuild.state, RB_COLLECTING);
    cr_assert_eq(f.s->rebuild.frag[0].want_version, 5);
    cr_assert_eq(f.s->rebuild.frag[0].want_learner, 0);
    cr_assert_eq(f.s->rebuild.frag[0].want_crc, 0xabc);
    cr_assert_eq(f.s->rebuild.frag[1].want_version, 0);
    cr_assert_eq(gate_status(), 503, "reads and contributions wait for the rebuild");
    /* an older report above the start is asked for too: it may be the best copy that comes */
    cr_assert_eq(report(1, 0, 3, 0x123, 0, 0, up, &r), MEMBERS_JOIN_REBUILD);
    cr_assert_eq(r.n_up, 1);
    cr_assert_eq(up[0], 0);
    cr_assert_eq(f.s->rebuild.frag[0].want_version, 5, "the freshest report stays wanted");
}

Test(syncer_rebuild, the_freshest_report_wins_and_a_disagreeing_copy_is_counted)
{
    int up[2];
    members_join_res r;
    cr_assert_eq(report(0, 0, 5, 0xa, 0, 0, up, &r), MEMBERS_JOIN_REBUILD);
    cr_assert_eq(report(1, 0, 7, 0xb, 2, 0xc, up, &r), MEMBERS_JOIN_REBUILD);
    cr_assert_eq(r.n_up, 2);
    cr_assert_eq(f.s->rebuild.frag[0].want_version, 7);
    cr_assert_eq(f.s->rebuild.frag[0].want_learner, 1);
    cr_assert_eq(f.s->rebuild.frag[1].want_version, 2);
    cr_assert_eq(f.s->rebuild.frag[0].disagree, 0);
    cr_assert_eq(report(0, 1, 7, 0xd, 0, 0, up, &r), MEMBERS_JOIN_REBUILD,
                 "learner 0 rejoins at 7, other CRC");
    cr_assert_eq(f.s->rebuild.frag[0].disagree, 1);
    cr_assert_eq(f.s->rebuild.frag[0].want_learner, 1, "the first report of 7 is kept");
    cr_assert_eq(f.s->rebuild.frag[0].want_crc, 0xb);
    cr_assert_eq(f.s->rebuild.frag[0].max_reported, 7);
}

Test(syncer_rebuild, an_upload_is_staged_only_when_it_is_what_its_learner_reported)
{
    int up[2];
    members_join_res r;
    proto_reason why;
    cr_assert_eq(upload(0, 1, 0, 5, 0xa, 1.0f, &why), REBUILD_STAGE_IDLE, "no collection yet");
    cr_assert_eq(report(0, 0, 5, 0xa, 0, 0, up, &r), MEMBERS_JOIN_REBUILD);
    int64_t inc0 = r.incarnation;
    cr_assert_eq(upload(0, inc0, 0, 5, 0xbad, 1.0f, &why), REBUILD_STAGE_MISMATCH, "another CRC");
    cr_assert_eq(upload(0, inc0, 0, 4, 0xa, 1.0f, &why), REBUILD_STAGE_MISMATCH, "another version");
    cr_assert_eq(upload(0, inc0 + 1, 0, 5, 0xa, 1.0f, &why), REBUILD_STAGE_MEMBER);
    cr_assert_eq(why, PROTO_R_STALE_INCARNATION);
    cr_assert_eq(upload(1, 1, 0, 5, 0xa, 1.0f, &why), REBUILD_STAGE_MEMBER);
    cr_assert_eq(why, PROTO_R_UNKNOWN_LEARNER);
    cr_assert_eq(f.s->rebuild.frag[0].got_version, 0, "nothing staged by those");
    int64_t in = f.s->bytes_in;
    cr_assert_eq(upload(0, inc0, 0, 5, 0xa, 1.0f, &why), REBUILD_STAGE_STAGED);
    cr_assert_eq(f.s->rebuild.frag[0].got_version, 5);
    cr_assert_eq(f.s->rebuild.frag[0].got_learner, 0);
    cr_assert_eq(f.s->rebuild.frag[0].got_crc, 0xa);
    cr_assert_eq(f.s->bytes_in, in + (int64_t)fragment_length(f.s->ft, 0) * 4);
    cr_assert_eq(upload(0, inc0, 0, 5, 0xa, 1.0f, &why), REBUILD_STAGE_NOT_NEEDED, "already staged");
}

Test(syncer_rebuild, the_worker_adopts_the_freshest_copies_past_every_reported_version)
{
    int up[2];
    members_join_res r0, r1;
    proto_reason why;
    cr_assert_eq(report(0, 0, 5, 0xa, 0, 0, up, &r0), MEMBERS_JOIN_REBUILD);
    cr_assert_eq(upload(0, r0.incarnation, 0, 5, 0xa, 1.0f, &why), REBUILD_STAGE_STAGED);
    tick();
    cr_assert_eq(f.s->rebuild.state, RB_COLLECTING, "one of two learners joined, the window is open");
    cr_assert_eq(report(1, 0, 7, 0xb, 3, 0xc, up, &r1), MEMBERS_JOIN_REBUILD);
    cr_assert_eq(upload(1, r1.incarnation, 0, 7, 0xb, 2.0f, &why), REBUILD_STAGE_STAGED, "newer than 5");
    tick();
    cr_assert_eq(f.s->rebuild.state, RB_COLLECTING, "fragment 1's copy is still wanted");
    cr_assert_eq(upload(1, r1.incarnation, 1, 3, 0xc, 3.0f, &why), REBUILD_STAGE_STAGED);
    pthread_mutex_lock(&f.s->mu);
    for (size_t i = 0; i < f.s->n; i++)
        f.s->momentum[i] = 1.0f; /* as if the syncer had merged before */
    pthread_mutex_unlock(&f.s->mu);
    tick();
    cr_assert_eq(f.s->rebuild.state, RB_NONE, "every wanted copy came and both learners joined: rebuilt");
    cr_assert_eq(f.s->rebuild.count, 1);
    int64_t gap = f.s->cfg.learners * (f.s->cfg.tau > 0 ? f.s->cfg.tau : 1);
    cr_assert_eq(f.s->versions[0], 7 + 1 + gap, "past the newest version reported");
    cr_assert_eq(f.s->versions[1], 3 + 1 + gap);
    for (int p = 0; p < 2; p++) {
        size_t len = fragment_length(f.s->ft, p);
        float *vals = malloc(len * sizeof *vals);
        cr_assert_not_null(vals);
        fragment_gather(f.s->ft, p, f.s->theta, vals);
        for (size_t i = 0; i < len; i++)
            cr_assert_eq(vals[i], p == 0 ? 2.0f : 3.0f, "fragment %d is the freshest upload", p);
        fragment_gather(f.s->ft, p, f.s->momentum, vals);
        for (size_t i = 0; i < len; i++)
            cr_assert_eq(vals[i], 0.0f, "the outer momentum restarts");
        free(vals);
        cr_assert_null(f.s->rebuild.frag[p].vals, "the staged copies are dropped");
        cr_assert_eq(f.s->rebuild.frag[p].want_version, 0);
    }
    cr_assert_eq(gate_status(), 0, "serving again");
    /* the rebuilt versions are the new bar: the old reports open nothing */
    cr_assert_eq(report(0, r0.incarnation, 5, 0xa, 0, 0, up, &r0), MEMBERS_JOIN_OK);
}

Test(syncer_rebuild, lost_state_refuse_serves_nothing, .init = setup_refuse)
{
    int up[2];
    members_join_res r;
    cr_assert_eq(report(0, 0, 5, 0xa, 0, 0, up, &r), MEMBERS_JOIN_REBUILD);
    cr_assert_eq(r.rb, RB_REFUSED);
    cr_assert_eq(f.s->rebuild.state, RB_REFUSED);
    cr_assert_eq(f.s->rebuild.frag[0].want_version, 0, "nothing is collected");
    cr_assert_eq(gate_status(), 503);
    cr_assert_eq(report(1, 0, 0, 0, 0, 0, up, &r), MEMBERS_JOIN_REBUILD, "refused for good");
    cr_assert_eq(r.rb, RB_REFUSED);
}

Test(syncer_rebuild, a_pull_by_a_learner_that_has_not_rejoined_since_the_start_is_refused)
{
    cr_assert_eq(stale_pull_status(0, 1), 403, "learner 0 never joined this syncer");
    cr_assert_eq(stale_pull_status(-1, -1), 0, "a pull without learner headers is served");
    members_join_res r;
    cr_assert_eq(sfx_join(&f, 0, 0, 0, &r), MEMBERS_JOIN_OK);
    cr_assert_eq(stale_pull_status(0, r.incarnation), 0, "joined since the start");
    cr_assert_eq(stale_pull_status(0, r.incarnation + 1), 409, "an incarnation it was not given");
    pthread_mutex_lock(&f.s->mu);
    f.s->rebuild.guard = 0; /* a start from a checkpoint nothing was published after */
    pthread_mutex_unlock(&f.s->mu);
    cr_assert_eq(stale_pull_status(1, 1), 0, "no guard: pulls as before");
}
