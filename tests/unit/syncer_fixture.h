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
#include "trainer/config.h"
#include "trainer/syncer/core.h"

typedef struct sfx {
    char dir[64]; /* the state dir */
    syncer *s;
} sfx;

/* A syncer of mode with M learners and P fragments, fresh state dir. */
static inline void sfx_start(sfx *f, config_mode mode, int learners, int fragments)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/test_syncer.XXXXXX");
    cr_assert_not_null(mkdtemp(f->dir), "mkdtemp: %s", strerror(errno));
    syncer_opts o = {.listen = "127.0.0.1:0", .state_dir = f->dir, .insecure_no_auth = 1};
    config *c = &o.cfg;
    config_defaults(c);
    config_kind_defaults(c, mode, CONFIG_MODEL_MLP);
    c->learners = learners;
    c->fragments = fragments;
    c->context = 4;
    c->embed = 4;
    c->hidden = 8;
    c->eval_tokens = 64;
    snprintf(c->data, sizeof c->data, "synthetic");
    char err[CX_ERRLEN] = "";
    f->s = syncer_core_new(&o, err, sizeof err);
    cr_assert_not_null(f->s, "syncer_core_new: %s", err);
}

static inline void sfx_stop(sfx *f)
{
    syncer_free(f->s);
    f->s = NULL;
    tmpdir_remove(f->dir);
}

/* Join learner id naming incarnation inc, no holds report (mu taken
 * here). Returns the verdict, res filled. */
static inline members_join_verdict sfx_join(sfx *f, int64_t id, int64_t inc, int64_t step,
                                            members_join_res *res)
{
    members_join_req in = {.id = id, .inc = inc, .step = step, .tokens = -1};
    pthread_mutex_lock(&f->s->mu);
    members_join_verdict v = members_join(f->s, &in, res);
    pthread_mutex_unlock(&f->s->mu);
    json_decref(res->lost);
    res->lost = NULL;
    return v;
}

#endif
