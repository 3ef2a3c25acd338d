/* holds.c - the fair share of held requests (long polls, ddp barrier
 * waits): the contract is in holds.h. The only
 * writer of s->holds; every call with s->mu held. */
#include <assert.h>

#include "trainer/syncer/core.h"

/* The share of bucket b. */
static int holds_cap(int b)
{
    return b == MAX_LEARNERS ? HOLD_ANON : HOLD_PER_LEARNER;
}

/* Every bucket holds 0..its share (mu held). */
static void assert_holds_state(const syncer *s)
{
#ifndef NDEBUG
    for (int b = 0; b < HOLD_BUCKETS; b++)
        assert(s->holds.held[b] >= 0 && s->holds.held[b] <= holds_cap(b));
    assert(s->holds.early >= 0);
#else
    (void)s;
#endif
}

int holds_take(syncer *s, const cx_http_req *req)
{
    return holds_take_as(s, syncer_api_caller_learner(s, req));
}

int holds_take_as(syncer *s, int64_t id)
{
    int b = id >= 0 && id < MAX_LEARNERS ? (int)id : MAX_LEARNERS;
    if (s->holds.held[b] >= holds_cap(b)) {
        s->holds.early++;
        return -1;
    }
    s->holds.held[b]++;
    assert_holds_state(s);
    return b;
}

void holds_drop(syncer *s, int b)
{
    if (b < 0)
        return;
    assert(b < HOLD_BUCKETS && s->holds.held[b] > 0);
    s->holds.held[b]--;
    assert_holds_state(s);
}
