/* holds.c - the fair share of held requests (long polls, ddp barrier
 * waits): the contract is in holds.h. The only
 * writer of s->holds and s->holds_early; every call with s->mu held. */
#include <assert.h>

#include "trainer/syncer/core.h"

int holds_take(syncer *s, const cx_http_req *req)
{
    int64_t id = syncer_api_caller_learner(s, req);
    int b = id >= 0 && id < MAX_LEARNERS ? (int)id : MAX_LEARNERS;
    int cap = b == MAX_LEARNERS ? HOLD_ANON : HOLD_PER_LEARNER;
    if (s->holds[b] >= cap) {
        s->holds_early++;
        return -1;
    }
    s->holds[b]++;
    return b;
}

void holds_drop(syncer *s, int b)
{
    if (b < 0)
        return;
    assert(b < HOLD_BUCKETS && s->holds[b] > 0);
    s->holds[b]--;
}
