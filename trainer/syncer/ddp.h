/* ddp.h - the syncer's ddp component: the per-step gradient barrier of
 * the ddp and ddp-elastic modes.
 *
 * Owns: the step being collected and its sum, the mean of the last
 * completed step as sent, its seal, and the automatic deadline's samples
 * (the s->ddp_* fields).
 * Operations: a gradient joins its step (its route), the barrier or
 * deadline completes a step (ddp_check, the ticker's), the deadline, and
 * GET /v1/optimizer.
 * Lock: s->mu held, except the route handlers, which take it.
 */
#ifndef TRN_SYNCER_DDP_H
#define TRN_SYNCER_DDP_H

#include <stdint.h>

#include "trainer/syncer/api.h"

#define BARRIER_WAIT_MS 5000     /* a ddp handler answers 503 "retry" after this */
#define DDP_COMPUTE_SAMPLES 32   /* auto deadline: recent compute times kept */
#define DDP_AUTO_MIN_SAMPLES 4   /* ... taken before they decide */
#define DDP_AUTO_INITIAL_MS 1000 /* ... deadline until then */
#define DDP_AUTO_FLOOR_MS 20     /* ... never below */

/* The ddp-elastic deadline of a step after its first gradient, ms: the
 * configured one, or the automatic one from recent compute times (mu held). */
int64_t ddp_deadline_ms(const syncer *s);
/* Complete the step being collected if its barrier or deadline says so (mu
 * held; the ticker calls it every tick in ddp modes). */
void ddp_check(syncer *s, int64_t now);
/* POST /v1/steps/{t}/gradients: one learner's gradient of step t; answers
 * the mean once the step completes. */
SYNCER_HANDLER(ddp_route_gradient);
/* GET /v1/optimizer: params | AdamW m | v, one snapshot. */
SYNCER_HANDLER(ddp_route_optimizer);

#endif
