/* ckpt.h - the learner's local checkpoints.
 *
 * What it is: the periodic checkpoint (a copy into the background writer's
 * buffers, the write on its thread) and the final synchronous one. What it
 * is not: the checkpoint format and writer thread (trainer/checkpoint.h)
 * nor the restore at start (link.c, at the first join).
 *
 * Owns L->ckw, ckw_broken, ckw_skip_logged, ckpt_step, ckpt_accepted. Main
 * thread only; only one thread saves into the state dir at a time.
 */
#ifndef TRN_LEARNER_CKPT_H
#define TRN_LEARNER_CKPT_H

#include "trainer/learner/core.h"

/* The periodic checkpoint from the inner loop: the write runs on the
 * writer's thread; skipped (and counted) while the previous one runs. */
void learner_ckpt_periodic(learner *L);
/* The final checkpoint (SIGTERM or the end of training): synchronous and
 * complete before the process goes on. */
void learner_ckpt_save(learner *L);

#endif
