/* diloco.h - the learner's diloco mode: local AdamW steps, and every H
 * steps (and at the last one) a synchronous exchange of every fragment.
 *
 * What it is: the diloco loop over the core's inner step (send Δ_p for
 * every fragment, then long-poll each for its merged version and adopt
 * it). What it is not: the contribution itself (contrib.h) nor the pulls
 * (link.h). No state of its own. Main thread only.
 */
#ifndef TRN_LEARNER_DILOCO_H
#define TRN_LEARNER_DILOCO_H

#include <stddef.h>

#include "trainer/learner/core.h"

/* Train in diloco mode until the end of training: 0, or a negative cx_err
 * with err. */
int learner_diloco_loop(learner *L, char *err, size_t errlen);

#endif
