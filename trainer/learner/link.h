/* link.h - the learner's link to the syncer: calls with give-up, join,
 * pulls, and the reason of a refusal.
 *
 * What it is: every request to the syncer retried until an answer or
 * --give-up-s of silence (the give-up clock is L->last_ok_ms, any thread),
 * the HTTP client each thread uses, the join (the first one also builds
 * model, optimizer, shard and fragment table, and applies the local
 * checkpoint; a rejoin reports what it holds and uploads what a rebuilding
 * syncer asks for), fragment pulls (full or CRC-checked delta chains into
 * the global copy, L->gcopy), and the decoding of a refusal's reason into
 * proto_reason. What it is not: when to join or pull (the modes decide),
 * nor the heartbeat (learner.c).
 *
 * Owns: L->gcopy, gver, gseal, seen_ver's writes from pulls, the delta
 * counters, and at each join L->incarnation, sched_off, join_accepted and
 * need_rejoin (cleared). It reads no mode's state: a ddp learner's holdings
 * come in as an argument of the join (learner_link_held). Which thread: the one that talks to the syncer
 * (main, or decoupled's comm thread once it runs), as each function says.
 */
#ifndef TRN_LEARNER_LINK_H
#define TRN_LEARNER_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "common/http_client.h"
#include "trainer/learner/core.h"
#include "trainer/protocol.h"

/* 1 (and L->fatal set) once the syncer has been silent for give_up_s or a
 * thread already gave up. Any thread; takes L->mu. */
int learner_link_gave_up(learner *L);
/* The syncer answered: restart the give-up clock. Any thread; takes L->mu. */
void learner_link_mark_ok(learner *L);
/* One request, retried (with the client's backoff) until an HTTP answer
 * comes or the syncer has been silent for give_up_s. 0 = answered (r holds
 * it; the caller cleans it up), CX_EUNAVAIL = given up or a signal. Any
 * thread, with its own client. */
int learner_link_call(learner *L, cx_http_client *c, const char *method, const char *path,
                      const char *const *hdrs, const void *body, size_t len, const char *ctype,
                      long timeout_ms, cx_http_result *r);
/* learner_link_call with a JSON body (borrowed) and answer: the decoded
 * answer (new reference) or NULL, *status the HTTP status (0: no answer). */
json_t *learner_link_call_json(learner *L, cx_http_client *c, const char *method, const char *path,
                               json_t *body, int *status);
/* A new HTTP client for the syncer (credential, CA file, timeouts), or
 * NULL; each thread that talks to the syncer has its own. */
cx_http_client *learner_link_new_client(const learner *L);
/* The reason of a refusal whose body is {"error": ..., "reason": NAME,
 * ...} (the syncer's rejection answer, docs/api.md): the proto_reason NAME
 * names, or PROTO_R_COUNT when the body is not JSON or names no reason this
 * learner knows. body need not be NUL-terminated (NULL with len 0 is fine). */
proto_reason learner_link_reason(const char *body, size_t len);
/* What a ddp learner holds, for a join to report (ddp.c owns it and passes
 * it in, so that the link never reaches into a mode): its params and AdamW
 * state equal the syncer's at version (-1 unknown), which the syncer sealed
 * with seal (trainer/seal.h; "" none). */
typedef struct learner_link_held {
    int64_t version;  /* the syncer's version of that state, -1 unknown */
    const char *seal; /* the syncer's seal on it, "" none (borrowed) */
} learner_link_held;

/* POST /v1/join; on the first join also build everything. A rejoin
 * reports what this learner holds (and uploads it to a rebuilding syncer):
 * in ddp modes `held` (required), else the global copy (gcopy, gver,
 * gseal; held NULL). 0, or a negative cx_err with err. The thread that
 * talks to the syncer. */
int learner_link_join(learner *L, cx_http_client *c, int first, const learner_link_held *held, char *err,
                      size_t errlen);
/* GET fragment p (newer than `newer`, or the current one when < 0) into
 * out, full or as a CRC-checked delta chain. Returns 1 with out and
 * *version set, 0 when nothing newer came in the wait, negative on
 * failure. The thread that owns gcopy. */
int learner_link_pull_one(learner *L, cx_http_client *c, int p, int64_t newer, long wait_ms, float *out,
                          int64_t *version);
/* Main thread: pull every fragment at its current version (the first one
 * after a restart carries the checkpoint's unsent progress in decoupled
 * mode, learner_rebase_start). */
int learner_link_pull_all(learner *L);

#endif
