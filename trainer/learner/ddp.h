/* ddp.h - the learner's ddp and ddp-elastic mode: every step's gradient
 * through the syncer's barrier.
 *
 * What it is: the ddp loop (POST the gradient, apply the mean with the
 * same AdamW step as the syncer) and the resync to the syncer's state
 * (GET /v1/optimizer) whenever the learner lost step with it. What it is
 * not: the inner step (core.h) nor the join (link.h).
 *
 * Owns its ddp_state (ddp.c, on learner_ddp_loop's stack: the syncer's
 * version and seal of the state this learner holds), nothing in the core;
 * a rejoin passes it to the link as learner_link_held, so the link never
 * reads a mode's state. Main thread only.
 */
#ifndef TRN_LEARNER_DDP_H
#define TRN_LEARNER_DDP_H

#include <stddef.h>

#include "trainer/learner/core.h"

/* Train in ddp / ddp-elastic mode until the end of training: 0, or a
 * negative cx_err with err. */
int learner_ddp_loop(learner *L, char *err, size_t errlen);

#endif
