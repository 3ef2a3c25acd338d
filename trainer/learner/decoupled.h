/* decoupled.h - the learner's decoupled mode: a comm thread sends and
 * receives fragments while the inner loop never waits on the network.
 *
 * What it is: the decoupled loop (it starts and stops the comm thread), and
 * the one question others ask about its state. What it is not: the
 * contribution (contrib.h), the pulls (link.h) nor the rebase arithmetic
 * (rebase.h).
 *
 * Owns struct learner_decoupled (L->dec: the outbox and inbox, the
 * per-fragment in-flight state, the overlap wait's counts, the comm
 * thread's flags), made by learner_decoupled_loop and freed by
 * learner_decoupled_free; its shared fields are under L->mu, with its own
 * condition variable. The state machine is drawn in decoupled.c.
 */
#ifndef TRN_LEARNER_DECOUPLED_H
#define TRN_LEARNER_DECOUPLED_H

#include <stddef.h>

#include "trainer/learner/core.h"

/* Train in decoupled mode (makes L->dec, starts and stops the comm
 * thread): 0, or a negative cx_err with err. Main thread. */
int learner_decoupled_loop(learner *L, char *err, size_t errlen);
/* 1 when fragment p's contribution in flight was accepted (202); 0 when
 * none is, or outside decoupled mode (L->dec NULL). Any thread; takes
 * L->mu. */
int learner_decoupled_sent_accepted(learner *L, int p);
/* Free decoupled mode's state (after the comm thread stopped); NULL is a
 * no-op. */
void learner_decoupled_free(struct learner_decoupled *d);

#endif
