/* holds.h - the syncer's holds component: a fair share of waiting
 * requests.
 *
 * Owns: s->holds (struct syncer_holds: waits held now by caller, and the
 * ones answered early).
 * A handler that waits (a long poll, a ddp barrier) first takes a hold:
 * each learner, by its credential, holds at most HOLD_PER_LEARNER waits at
 * once, callers without a learner credential HOLD_ANON together. A request
 * over its caller's share does not wait: it is answered at once with what
 * is there (as if its wait had ended), and counted. Waits occupy the
 * server's request slots (common/http_guard.h: active_max), so without the
 * share one learner holding hundreds of long polls would get every other
 * learner's calls refused 503.
 * Lock: both calls with s->mu held.
 */
#ifndef TRN_SYNCER_HOLDS_H
#define TRN_SYNCER_HOLDS_H

#include <stdint.h>

#include "common/http_server.h"
#include "trainer/syncer.h"
#include "trainer/syncer/members.h"

#define HOLD_PER_LEARNER 4 /* requests one learner may hold waiting at once */
#define HOLD_ANON 16       /* ... all callers without a learner credential together */
#define HOLD_BUCKETS (MAX_LEARNERS + 1)

/* The held waits; holds.c is its only writer. */
typedef struct syncer_holds {
    int held[HOLD_BUCKETS]; /* requests waiting now, by caller bucket */
    int64_t early;          /* waits answered at once: their caller was over its share */
} syncer_holds;

/* The caller's bucket, holding one wait; -1: over its share, do not wait.
 * The caller is the learner of req's credential (syncer_api_caller_learner). */
int holds_take(syncer *s, const cx_http_req *req);
/* The same for the caller learner id (-1 or beyond MAX_LEARNERS: no
 * learner, the anonymous bucket). */
int holds_take_as(syncer *s, int64_t id);
/* Give back the wait of bucket b (b < 0: a no-op). */
void holds_drop(syncer *s, int b);

#endif
