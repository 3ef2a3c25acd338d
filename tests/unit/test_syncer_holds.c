/* test_syncer_holds.c - the syncer's holds component
 * (trainer/syncer/holds.h) without HTTP: each learner holds at most
 * HOLD_PER_LEARNER waits, callers without a learner HOLD_ANON together; a
 * request over its caller's share is answered early and counted, without
 * taking anything from the other callers; a dropped wait frees its place. */
#include <criterion/criterion.h>

#include "syncer_fixture.h"

static sfx f;

static void setup(void)
{
    sfx_start(&f, CONFIG_MODE_DILOCO, 2, 1);
}

static void teardown(void)
{
    sfx_stop(&f);
}

TestSuite(syncer_holds, .init = setup, .fini = teardown);

/* holds_take_as for caller id (mu taken here). */
static int take(int64_t id)
{
    pthread_mutex_lock(&f.s->mu);
    int b = holds_take_as(f.s, id);
    pthread_mutex_unlock(&f.s->mu);
    return b;
}

static void drop(int b)
{
    pthread_mutex_lock(&f.s->mu);
    holds_drop(f.s, b);
    pthread_mutex_unlock(&f.s->mu);
}

Test(syncer_holds, each_learner_holds_its_own_share_and_the_one_over_it_is_answered_early)
{
    for (int k = 0; k < HOLD_PER_LEARNER; k++)
        cr_assert_eq(take(0), 0, "learner 0's wait %d", k);
    cr_assert_eq(f.s->holds.held[0], HOLD_PER_LEARNER);
    cr_assert_eq(f.s->holds.early, 0);
    cr_assert_eq(take(0), -1, "over learner 0's share");
    cr_assert_eq(f.s->holds.early, 1);
    cr_assert_eq(f.s->holds.held[0], HOLD_PER_LEARNER, "the refused one holds nothing");

    /* learner 1 and anonymous callers are not crowded out by learner 0 */
    cr_assert_eq(take(1), 1);
    cr_assert_eq(take(-1), MAX_LEARNERS);
    cr_assert_eq(f.s->holds.held[1], 1);
    cr_assert_eq(f.s->holds.early, 1);
}

Test(syncer_holds, callers_without_a_learner_share_one_bucket)
{
    for (int k = 0; k < HOLD_ANON; k++)
        cr_assert_eq(take(k % 2 ? -1 : MAX_LEARNERS + k), MAX_LEARNERS,
                     "no credential and ids beyond the slots alike (%d)", k);
    cr_assert_eq(f.s->holds.held[MAX_LEARNERS], HOLD_ANON);
    cr_assert_eq(take(-1), -1);
    cr_assert_eq(take(MAX_LEARNERS), -1);
    cr_assert_eq(f.s->holds.early, 2);
    cr_assert_eq(take(0), 0, "a learner still has its own share");
}

Test(syncer_holds, a_dropped_wait_frees_its_place)
{
    for (int k = 0; k < HOLD_PER_LEARNER; k++)
        cr_assert_eq(take(1), 1);
    cr_assert_eq(take(1), -1);
    drop(1);
    cr_assert_eq(f.s->holds.held[1], HOLD_PER_LEARNER - 1);
    cr_assert_eq(take(1), 1, "the place freed is taken again");
    cr_assert_eq(take(1), -1);
    drop(-1); /* an early answer gives back nothing */
    cr_assert_eq(f.s->holds.held[1], HOLD_PER_LEARNER);
    for (int k = 0; k < HOLD_PER_LEARNER; k++)
        drop(1);
    cr_assert_eq(f.s->holds.held[1], 0);
    cr_assert_eq(f.s->holds.early, 2, "drops do not touch the early count");
}
