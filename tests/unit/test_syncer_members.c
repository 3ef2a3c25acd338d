/* test_syncer_members.c - the syncer's members component
 * (trainer/syncer/members.h) without HTTP: joins take slots and
 * incarnations, a full run and a far incarnation are refused, a request's
 * learner and incarnation are checked, rejections are counted. */
#include <criterion/criterion.h>

#include "syncer_fixture.h"

static sfx f;

static void setup_diloco(void)
{
    sfx_start(&f, CONFIG_MODE_DILOCO, 2, 2);
}

static void teardown(void)
{
    sfx_stop(&f);
}

TestSuite(syncer_members, .init = setup_diloco, .fini = teardown);

/* members_check under the lock, as a handler calls it; asserted outside
 * it (a failed assertion ends the test, and the fixture's syncer_free
 * takes the lock). */
static proto_reason check(int64_t id, int64_t incarnation, int *slot)
{
    pthread_mutex_lock(&f.s->mu);
    proto_reason r = members_check(f.s, id, incarnation, slot);
    pthread_mutex_unlock(&f.s->mu);
    return r;
}

static int barrier_need(void)
{
    pthread_mutex_lock(&f.s->mu);
    int need = members_barrier_need(f.s);
    pthread_mutex_unlock(&f.s->mu);
    return need;
}

Test(syncer_members, a_first_join_takes_a_slot_and_incarnation_one)
{
    members_join_res r;
    cr_assert_eq(sfx_join(&f, 0, 0, 0, &r), MEMBERS_JOIN_OK);
    cr_assert_eq(r.incarnation, 1);
    cr_assert(r.slot >= 0 && r.slot < MAX_LEARNERS);
    const learner_rec *l = &f.s->members.learners[r.slot];
    cr_assert_eq(l->id, 0);
    cr_assert_eq(l->incarnation, 1);
    cr_assert_eq(l->state, LS_ACTIVE);
    cr_assert_eq(members_count(f.s, 1), 1);
}

Test(syncer_members, a_rejoin_gets_an_incarnation_above_its_own_and_the_one_it_names)
{
    members_join_res r;
    cr_assert_eq(sfx_join(&f, 1, 0, 0, &r), MEMBERS_JOIN_OK);
    int slot = r.slot;
    cr_assert_eq(sfx_join(&f, 1, 1, 24, &r), MEMBERS_JOIN_OK);
    cr_assert_eq(r.incarnation, 2, "current 1 -> 2");
    cr_assert_eq(r.slot, slot, "the same id keeps its slot");
    cr_assert_eq(sfx_join(&f, 1, 7, 24, &r), MEMBERS_JOIN_OK);
    cr_assert_eq(r.incarnation, 8, "it named 7, above its current 2");
    cr_assert_eq(f.s->members.learners[slot].resumed_step, 24);
}

Test(syncer_members, an_incarnation_too_far_above_the_current_changes_nothing)
{
    members_join_res r;
    cr_assert_eq(sfx_join(&f, 0, 0, 0, &r), MEMBERS_JOIN_OK);
    int slot = r.slot;
    cr_assert_eq(sfx_join(&f, 0, 1 + INCARNATION_MAX_STEP + 1, 0, &r), MEMBERS_JOIN_INC_TOO_FAR);
    cr_assert_eq(r.incarnation, 1, "the answer names its current incarnation");
    cr_assert_eq(f.s->members.learners[slot].incarnation, 1, "unchanged");
    cr_assert_eq(sfx_join(&f, 0, 1 + INCARNATION_MAX_STEP, 0, &r), MEMBERS_JOIN_OK, "at the bound: allowed");
    cr_assert_eq(r.incarnation, 2 + INCARNATION_MAX_STEP);
}

Test(syncer_members, a_new_id_beyond_the_runs_learners_is_refused)
{
    members_join_res r;
    cr_assert_eq(sfx_join(&f, 5, 0, 0, &r), MEMBERS_JOIN_OK);
    cr_assert_eq(sfx_join(&f, 9, 0, 0, &r), MEMBERS_JOIN_OK);
    cr_assert_eq(sfx_join(&f, 3, 0, 0, &r), MEMBERS_JOIN_FULL);
    cr_assert_eq(r.known, 2);
    int slot;
    cr_assert_eq(check(3, 1, &slot), PROTO_R_UNKNOWN_LEARNER, "the refused id has no slot");
    cr_assert_eq(sfx_join(&f, 9, 1, 0, &r), MEMBERS_JOIN_OK, "a known id still rejoins");
}

Test(syncer_members, a_request_names_its_current_incarnation_or_is_refused)
{
    members_join_res r;
    cr_assert_eq(sfx_join(&f, 0, 0, 0, &r), MEMBERS_JOIN_OK);
    cr_assert_eq(sfx_join(&f, 0, 1, 0, &r), MEMBERS_JOIN_OK);
    int slot = -1;
    cr_assert_eq(check(0, 2, &slot), PROTO_OK);
    cr_assert_eq(slot, r.slot);
    cr_assert_eq(check(0, 1, &slot), PROTO_R_STALE_INCARNATION, "its previous incarnation");
    cr_assert_eq(check(0, 3, &slot), PROTO_R_STALE_INCARNATION, "one it was never given");
    cr_assert_eq(check(1, 1, &slot), PROTO_R_UNKNOWN_LEARNER, "an id that never joined");
    f.s->members.learners[r.slot].must_rejoin = 1; /* restored from a checkpoint older than the log */
    cr_assert_eq(check(0, 2, &slot), PROTO_R_STALE_INCARNATION, "must rejoin first");
    cr_assert_eq(sfx_join(&f, 0, 2, 0, &r), MEMBERS_JOIN_OK);
    cr_assert_eq(check(0, 3, &slot), PROTO_OK, "the rejoin cleared it");
}

Test(syncer_members, the_diloco_barrier_waits_for_every_learner)
{
    members_join_res r;
    cr_assert_eq(barrier_need(), 2, "M, before anyone joined");
    cr_assert_eq(sfx_join(&f, 0, 0, 0, &r), MEMBERS_JOIN_OK);
    cr_assert_eq(barrier_need(), 2, "still M with one joined");
    f.s->members.learners[r.slot].state = LS_LEFT;
    cr_assert_eq(barrier_need(), 1, "not the one that left");
}

Test(syncer_members, rejections_are_counted_by_reason)
{
    pthread_mutex_lock(&f.s->mu);
    members_reject_note(f.s, PROTO_R_STALE_INCARNATION, 0, 1, -1, "test");
    members_reject_note(f.s, PROTO_R_STALE_INCARNATION, 0, 1, -1, "test");
    members_reject_note(f.s, PROTO_R_CLAIM, 1, 1, 0, "test");
    pthread_mutex_unlock(&f.s->mu);
    cr_assert_eq(f.s->members.rejects[PROTO_R_STALE_INCARNATION], 2);
    cr_assert_eq(f.s->members.rejects[PROTO_R_CLAIM], 1);
    cr_assert_eq(f.s->members.rejects[PROTO_R_UNKNOWN_LEARNER], 0);
    cr_assert_eq(members_reason_status(PROTO_R_UNKNOWN_LEARNER), 403);
    cr_assert_eq(members_reason_status(PROTO_R_STALE_INCARNATION), 409);
}

Test(syncer_members, every_reason_has_its_status)
{
    cr_assert_eq(members_reason_status(PROTO_R_STALE_VERSION), 409);
    cr_assert_eq(members_reason_status(PROTO_R_HALTED), 503);
    const proto_reason bad_request[] = {PROTO_R_CHECKSUM,   PROTO_R_LENGTH, PROTO_R_NONFINITE,
                                        PROTO_R_BAD_HEADER, PROTO_R_NORM,   PROTO_R_CLAIM,
                                        PROTO_R_AUTH,       PROTO_R_MERGE};
    for (size_t i = 0; i < sizeof bad_request / sizeof bad_request[0]; i++)
        cr_assert_eq(members_reason_status(bad_request[i]), 400, "%s", proto_reason_name(bad_request[i]));
    cr_assert_eq(members_reason_status(PROTO_R_COUNT), 400, "out of range");
    for (int r = PROTO_R_CHECKSUM; r < PROTO_R_COUNT; r++) {
        int st = members_reason_status((proto_reason)r);
        cr_assert(st == 400 || st == 403 || st == 409 || st == 503, "%s: %d", proto_reason_name(r), st);
    }
}
