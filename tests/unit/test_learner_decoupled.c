/* test_learner_decoupled.c - the invariants of decoupled mode's state
 * (trainer/learner/decoupled.h: learner_decoupled_check and
 * assert_decoupled_state), without a process or a syncer: states the
 * diagram in decoupled.c allows pass, and each broken invariant is named.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/learner/core.h"
#include "trainer/learner/decoupled.h"

#define NFRAG 4

static learner *L;
static learner_decoupled *D;

static void setup(void)
{
    L = calloc(1, sizeof *L);
    cr_assert_not_null(L);
    L->P = NFRAG;
    D = L->dec = learner_decoupled_new(NFRAG);
    cr_assert_not_null(D);
}

static void teardown(void)
{
    learner_decoupled_free(L->dec);
    free(L);
}

TestSuite(learner_decoupled, .init = setup, .fini = teardown);

/* What enqueue_one leaves: fragment p's contribution queued, in flight. */
static void queue(int p)
{
    frag_msg m = {p, 1, 8, 4, malloc(16), 16, 0, 10};
    cr_assert_not_null(m.buf);
    D->outbox[D->n_out++] = m;
    D->inflight[p] = 1;
    D->apply_at[p] = 12;
}

/* What the comm thread hands the main thread: fragment p's merged value. */
static void receive(int p)
{
    frag_msg m = {p, 2, 0, 0, malloc(16), 16, 0, -1};
    cr_assert_not_null(m.buf);
    D->inbox[D->n_in++] = m;
}

/* learner_decoupled_check fails, naming what (a substring of its reason). */
static void broken(const char *what)
{
    char why[256] = "";
    cr_assert_eq(learner_decoupled_check(D, NFRAG, why, sizeof why), -1, "expected broken: %s", what);
    cr_assert(strstr(why, what), "reason \"%s\" does not say \"%s\"", why, what);
}

static void holds(void)
{
    char why[256] = "";
    cr_assert_eq(learner_decoupled_check(D, NFRAG, why, sizeof why), 0, "%s", why);
    assert_decoupled_state(L); /* aborts in a debug build when it does not hold */
}

Test(learner_decoupled, the_states_of_the_diagram_hold)
{
    holds(); /* a new state: nothing queued, nothing in flight */
    queue(1);
    queue(3);
    holds();
    /* the comm thread took fragment 1's contribution off the queue and
     * posted it: accepted, still in flight */
    free(D->outbox[0].buf);
    memmove(&D->outbox[0], &D->outbox[1], sizeof D->outbox[0]);
    D->n_out--;
    D->accepted[1] = 1;
    holds();
    /* its merged value came; fragment 2 is due but waits for a slot */
    receive(1);
    D->pending[2] = 1;
    holds();
    /* overlap waits: some timed out */
    D->n_overlap_waits = 3;
    D->n_overlap_timeouts = 1;
    D->overlap_wait_ms = 12.5;
    holds();
}

Test(learner_decoupled, a_queued_contribution_is_in_flight_and_queued_once)
{
    queue(2);
    D->inflight[2] = 0;
    broken("fragment 2 is queued but not in flight");
    D->inflight[2] = 1;
    holds();
    queue(2);
    broken("fragment 2 is queued twice");
}

Test(learner_decoupled, queued_and_received_messages_name_a_fragment_and_carry_a_buffer)
{
    queue(0);
    D->outbox[0].p = NFRAG;
    broken("outbox[0]: fragment 4 of 4");
    D->outbox[0].p = 0;
    receive(3);
    free(D->inbox[0].buf);
    D->inbox[0].buf = NULL;
    broken("inbox[0]: fragment 3 of 4");
}

Test(learner_decoupled, the_queues_stay_within_their_capacity)
{
    D->n_in = LEARNER_DECOUPLED_MAX_QUEUE + 1;
    broken("queue counts out of range");
    D->n_in = 0;
    D->n_out = -1;
    broken("queue counts out of range");
    D->n_out = 0;
    D->sending = 2;
    broken("sending is 2");
}

Test(learner_decoupled, accepted_and_pending_follow_the_flight)
{
    D->accepted[1] = 1;
    broken("fragment 1: accepted but not in flight");
    D->accepted[1] = 0;
    D->inflight[0] = 1;
    D->pending[0] = 1;
    broken("fragment 0: pending while in flight");
    D->pending[0] = 0;
    D->apply_at[3] = -2;
    broken("fragment 3: apply_at -2");
}

Test(learner_decoupled, the_overlap_counts_agree)
{
    D->n_overlap_waits = 1;
    D->n_overlap_timeouts = 2;
    broken("overlap counts: 2 timeouts of 1 waits");
    D->n_overlap_timeouts = 1;
    D->overlap_wait_ms = -1.0;
    broken("overlap counts");
}

#ifndef NDEBUG
Test(learner_decoupled, assert_decoupled_state_aborts_on_a_broken_state, .signal = SIGABRT)
{
    D->accepted[2] = 1; /* accepted, never sent */
    assert_decoupled_state(L);
}
#endif
