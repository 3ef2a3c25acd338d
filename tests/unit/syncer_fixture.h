/* syncer_fixture.h - a syncer without HTTP nor threads for the unit tests
 * of its components (tests/unit/test_syncer_<component>.c): a tiny mlp on
 * the synthetic corpus, a fresh state dir, built by syncer_core_new
 * (trainer/syncer/core.h). The tests call the components' operations with
 * s->mu held, as the route handlers do. Header-only (static inline) so
 * that only the tests that include it compile it. */
#ifndef CX_TESTS_SYNCER_FIXTURE_H
#define CX_TESTS_SYNCER_FIXTURE_H

#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "tmpdir.h"
#include "numerics/fragment.h"
#include "trainer/config.h"
#include "trainer/syncer/core.h"

#define MAX_FRAGMENTS_TEST 8 /* fragments a fixture's syncer may have */

typedef struct sfx {
    char dir[64]; /* the state dir */
    syncer *s;
} sfx;

/* A syncer of mode with M learners and P fragments, fresh state dir,
 * contributions in `encoding` (downstream deltas unless f32), and what it
 * does when learners hold a newer state than it started with
 * (on_lost_state, syncer_lost_state). */
static inline void sfx_start_ex(sfx *f, config_mode mode, int learners, int fragments,
                                config_encoding encoding, syncer_lost_state on_lost_state)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/test_syncer.XXXXXX");
    cr_assert_not_null(mkdtemp(f->dir), "mkdtemp: %s", strerror(errno));
    syncer_opts o = {
        .listen = "127.0.0.1:0", .state_dir = f->dir, .insecure_no_auth = 1, .on_lost_state = on_lost_state};
    config *c = &o.cfg;
    config_defaults(c);
    config_kind_defaults(c, mode, CONFIG_MODEL_MLP);
    c->learners = learners;
    c->fragments = fragments;
    c->context = 4;
    c->embed = 4;
    c->hidden = 8;
    c->eval_tokens = 64;
    c->encoding = encoding;
    snprintf(c->data, sizeof c->data, "synthetic");
    char err[CX_ERRLEN] = "";
    f->s = syncer_core_new(&o, err, sizeof err);
    cr_assert_not_null(f->s, "syncer_core_new: %s", err);
}

/* A syncer of mode with M learners and P fragments, fresh state dir, f32
 * contributions, rebuilding from the learners when they hold a newer state. */
static inline void sfx_start(sfx *f, config_mode mode, int learners, int fragments)
{
    sfx_start_ex(f, mode, learners, fragments, CONFIG_ENC_F32, SYNCER_LOST_REBUILD);
}

static inline void sfx_stop(sfx *f)
{
    syncer_free(f->s);
    f->s = NULL;
    tmpdir_remove(f->dir);
}

/* The join in asks for (mu taken here). Returns the verdict, res filled
 * (its list of lost steps dropped). */
static inline members_join_verdict sfx_join_req(sfx *f, const members_join_req *in, members_join_res *res)
{
    pthread_mutex_lock(&f->s->mu);
    members_join_verdict v = members_join(f->s, in, res);
    pthread_mutex_unlock(&f->s->mu);
    json_decref(res->lost);
    res->lost = NULL;
    return v;
}

/* Join learner id naming incarnation inc, no holds report (mu taken
 * here). Returns the verdict, res filled. */
static inline members_join_verdict sfx_join(sfx *f, int64_t id, int64_t inc, int64_t step,
                                            members_join_res *res)
{
    members_join_req in = {.id = id, .inc = inc, .step = step, .tokens = -1};
    return sfx_join_req(f, &in, res);
}

/* Join learner id naming incarnation inc with a report of what it holds:
 * hv[P] versions, hc[P] their CRC32C, unsealed, as published as held (mu
 * taken here). upload[P] gets the fragments asked for. */
static inline members_join_verdict sfx_join_holds(sfx *f, int64_t id, int64_t inc, const int64_t *hv,
                                                  const uint32_t *hc, int *upload, members_join_res *res)
{
    int sealed[MAX_FRAGMENTS_TEST] = {0};
    cr_assert_leq(f->s->P, MAX_FRAGMENTS_TEST);
    members_join_req in = {
        .id = id, .inc = inc, .tokens = -1, .hv = hv, .hc = hc, .hp = hv, .hs = sealed, .upload = upload};
    return sfx_join_req(f, &in, res);
}

/* A contribution of learner id to fragment p against base, covering steps
 * (step - H, step], every value `value` (mu taken here). */
static inline proto_reason sfx_contribute(sfx *f, int64_t id, int64_t incarnation, int p, int64_t base,
                                          int64_t step, float value, rounds_contribution *c)
{
    size_t len = fragment_length(f->s->ft, p);
    float *delta = malloc(len * sizeof *delta);
    cr_assert_not_null(delta);
    for (size_t i = 0; i < len; i++)
        delta[i] = value;
    proto_hdr h = {.learner = id,
                   .incarnation = incarnation,
                   .fragment = p,
                   .base_version = base,
                   .steps = f->s->cfg.H,
                   .tokens = f->s->cfg.H * f->s->cfg.batch,
                   .encoding = CONFIG_ENC_F32,
                   .round = -1,
                   .step = step};
    pthread_mutex_lock(&f->s->mu);
    proto_reason r = rounds_contribute(f->s, p, &h, delta, len * 4, c);
    pthread_mutex_unlock(&f->s->mu);
    return r;
}

#endif
