/* test_syncer_rounds.c - the syncer's rounds component
 * (trainer/syncer/rounds.h) without HTTP: contributions join the round of
 * their fragment, a diloco round merges at its barrier and bumps only its
 * fragment's version, and stale or replayed contributions are refused with
 * their reason. */
#include <criterion/criterion.h>
#include <math.h>

#include "common/clock.h"
#include "numerics/fragment.h"
#include "syncer_fixture.h"

static sfx f;
static int64_t inc[2]; /* incarnation of learners 0 and 1 */

/* diloco, 2 learners, 2 fragments; both joined */
static void setup(void)
{
    sfx_start(&f, CONFIG_MODE_DILOCO, 2, 2);
    for (int id = 0; id < 2; id++) {
        members_join_res r;
        cr_assert_eq(sfx_join(&f, id, 0, 0, &r), MEMBERS_JOIN_OK);
        inc[id] = r.incarnation;
    }
}

static void teardown(void)
{
    sfx_stop(&f);
}

TestSuite(syncer_rounds, .init = setup, .fini = teardown);

/* sfx_contribute on this suite's syncer. */
static proto_reason contribute(int64_t id, int64_t incarnation, int p, int64_t base, int64_t step,
                               float value, rounds_contribution *c)
{
    return sfx_contribute(&f, id, incarnation, p, base, step, value, c);
}

static void check(int p)
{
    pthread_mutex_lock(&f.s->mu);
    rounds_check(f.s, p, cx_mono_ms());
    pthread_mutex_unlock(&f.s->mu);
}

Test(syncer_rounds, a_diloco_round_merges_at_its_barrier_and_bumps_its_version)
{
    size_t n = f.s->n;
    float *before = malloc(n * sizeof *before);
    cr_assert_not_null(before);
    memcpy(before, f.s->theta, n * sizeof *before);
    rounds_contribution c;
    int64_t H = f.s->cfg.H;

    cr_assert_eq(contribute(0, inc[0], 0, 0, H, 1e-3f, &c), PROTO_OK, "%s", c.why);
    cr_assert_eq(c.round, 0, "the first round of fragment 0");
    cr_assert_eq(c.version, 0);
    check(0);
    cr_assert_eq(f.s->rounds.frag[0].state, RS_COLLECTING, "one of two: the barrier waits");
    cr_assert_eq(f.s->rounds.frag[0].n, 1);
    cr_assert_eq(f.s->versions[0], 0);
    cr_assert_eq(f.s->merges, 0);

    cr_assert_eq(contribute(1, inc[1], 0, 0, H, 1e-3f, &c), PROTO_OK, "%s", c.why);
    cr_assert_eq(c.round, 0, "joins the open round");
    check(0);
    cr_assert_eq(f.s->rounds.frag[0].state, RS_IDLE, "merged");
    cr_assert_eq(f.s->rounds.frag[0].n, 0);
    cr_assert_eq(f.s->rounds.frag[0].closed_id, 0);
    cr_assert_eq(f.s->versions[0], 1, "one merge, one version");
    cr_assert_eq(f.s->versions[1], 0, "the other fragment untouched");
    cr_assert_eq(f.s->merges, 1);
    cr_assert_eq(f.s->rounds.parts, 2);
    cr_assert_eq(f.s->accepted_total, 2);

    /* the merge moved fragment 0's parameters, and only those */
    int moved0 = 0, moved1 = 0;
    for (int p = 0; p < 2; p++) {
        const fragment_range *fr = fragment_ranges(f.s->ft, p);
        for (int i = 0; i < fragment_num_ranges(f.s->ft, p); i++)
            for (size_t k = fr[i].offset; k < fr[i].offset + fr[i].length; k++) {
                cr_assert(isfinite(f.s->theta[k]));
                if (f.s->theta[k] != before[k])
                    *(p == 0 ? &moved0 : &moved1) += 1;
            }
    }
    cr_assert_gt(moved0, 0, "fragment 0 merged a non-zero delta");
    cr_assert_eq(moved1, 0, "fragment 1 had no round");
    free(before);

    /* the next round of fragment 0 is numbered 1 and merges into version 2 */
    cr_assert_eq(contribute(0, inc[0], 0, 1, 2 * H, 1e-3f, &c), PROTO_OK, "%s", c.why);
    cr_assert_eq(c.round, 1);
    cr_assert_eq(c.version, 1);
}

Test(syncer_rounds, a_stale_incarnation_is_refused_and_holds_nothing)
{
    members_join_res r;
    cr_assert_eq(sfx_join(&f, 0, inc[0], 0, &r), MEMBERS_JOIN_OK);
    cr_assert_gt(r.incarnation, inc[0]);
    rounds_contribution c;
    cr_assert_eq(contribute(0, inc[0], 0, 0, f.s->cfg.H, 1e-3f, &c), PROTO_R_STALE_INCARNATION);
    cr_assert(strstr(c.why, "stale_incarnation"), "%s", c.why);
    cr_assert_eq(f.s->rounds.frag[0].n, 0);
    cr_assert_eq(f.s->rounds.frag[0].state, RS_IDLE);
    cr_assert_eq(f.s->accepted_total, 0);
    cr_assert_eq(contribute(7, 1, 0, 0, f.s->cfg.H, 1e-3f, &c), PROTO_R_UNKNOWN_LEARNER);
}

Test(syncer_rounds, a_base_version_ahead_or_behind_a_diloco_round_is_stale)
{
    rounds_contribution c;
    int64_t H = f.s->cfg.H;
    cr_assert_eq(contribute(0, inc[0], 1, 3, H, 1e-3f, &c), PROTO_R_STALE_VERSION, "base ahead");
    cr_assert_eq(f.s->rounds.stale_rejected, 1);
    /* merge fragment 1 once: version 1 */
    cr_assert_eq(contribute(0, inc[0], 1, 0, H, 1e-3f, &c), PROTO_OK, "%s", c.why);
    cr_assert_eq(contribute(1, inc[1], 1, 0, H, 1e-3f, &c), PROTO_OK, "%s", c.why);
    check(1);
    cr_assert_eq(f.s->versions[1], 1);
    cr_assert_eq(contribute(0, inc[0], 1, 0, 2 * H, 1e-3f, &c), PROTO_R_STALE_VERSION,
                 "diloco: the round of version 0 is closed");
    cr_assert(strstr(c.why, "is closed"), "%s", c.why);
    cr_assert_eq(f.s->rounds.stale_rejected, 2);
    cr_assert_eq(f.s->rounds.frag[1].n, 0);
}

Test(syncer_rounds, steps_already_accepted_are_refused_or_cut)
{
    rounds_contribution c;
    int64_t H = f.s->cfg.H;
    cr_assert_eq(contribute(0, inc[0], 0, 0, H, 1e-3f, &c), PROTO_OK, "%s", c.why);
    cr_assert_eq(contribute(0, inc[0], 0, 0, H, 1e-3f, &c), PROTO_R_CLAIM, "a replay of steps 1..H");
    cr_assert_eq(f.s->rounds.frag[0].n, 1, "only the first is held");
    /* steps H/2+1 .. H+H/2: the first half was accepted, the new half is kept */
    cr_assert_eq(contribute(0, inc[0], 0, 0, H + H / 2, 1e-3f, &c), PROTO_OK, "%s", c.why);
    cr_assert_eq(f.s->rounds.frag[0].n, 1, "the same learner's two contributions are one in its round");
    cr_assert_eq(f.s->rounds.frag[0].c[0].steps, H + H / 2, "H, then only the H/2 new steps");
    cr_assert_eq(f.s->members.learners[f.s->rounds.frag[0].c[0].slot].step, H + H / 2);
}
