/* contrib.h - the learner's contribution path (diloco, decoupled).
 *
 * What it is: the contribution Δ_p = Θ_base_p − θ_p of one fragment, with
 * the upstream error-feedback residual when on, encoded for the wire; the
 * residual's commit once the contribution is sent; and the POST with what
 * its answer says. What it is not: when a contribution is due (diloco.c,
 * decoupled.c) nor what happens to the progress it carried (rebase.h).
 *
 * Owns: the error-feedback residual (L->ef, ef_next, ef_off,
 * ef_incarnation, ef_broken), main thread only. learner_contrib_post runs
 * on the thread that sends (main in diloco, comm in decoupled) and sets
 * L->need_rejoin (under L->mu) when the syncer no longer knows us.
 */
#ifndef TRN_LEARNER_CONTRIB_H
#define TRN_LEARNER_CONTRIB_H

#include <stddef.h>
#include <stdint.h>

#include "common/http_client.h"
#include "trainer/learner/core.h"

/* Δ_p = Θ_base_p − θ_p (plus the error-feedback residual when on) encoded
 * into a malloc'd buffer (the caller frees it) of *len bytes with its
 * CRC32C; NULL when out of memory. Main thread. */
unsigned char *learner_contrib_make(learner *L, int p, size_t *len, uint32_t *crc);
/* Keep the residual of the contribution of fragment p just built (it is
 * sent: queued, or answered 202). Main thread. */
void learner_contrib_commit(learner *L, int p);
/* POST one contribution. Returns the HTTP status (0 = no answer); on 202
 * *merges_into is the version the syncer said its round will produce
 * (-1 when the answer did not say). A 403, or a 409 whose reason is
 * stale_incarnation, sets L->need_rejoin. The sending thread. */
int learner_contrib_post(learner *L, cx_http_client *c, const frag_msg *m, int64_t *merges_into);

#endif
