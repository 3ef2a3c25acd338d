/* rebase.h - every trained step reaches the global model: how a learner
 * takes a global fragment without throwing away what it trained.
 *
 * What it is: adoption (nothing to keep), the decoupled rebase (the merged
 * value plus the progress not yet in it), the start pull of a restarted
 * learner (the progress its checkpoint holds that the syncer never
 * accepted), and the bookkeeping of a send. What it is not: when fragments
 * are sent or received (the modes) nor the checkpoint (ckpt.h).
 *
 * Owns the per-fragment progress in struct learner: θ and Θ_base of each
 * fragment's ranges, base_version, frag_steps, frag_tokens, sent,
 * origin_step, send_step, send_steps, send_tokens, lost_frag_steps. Main
 * thread only (learner_after_step counts steps into frag_steps/frag_tokens).
 * The arithmetic is drawn in rebase.c.
 */
#ifndef TRN_LEARNER_REBASE_H
#define TRN_LEARNER_REBASE_H

#include <stdint.h>

#include "trainer/learner/core.h"

/* Take fragment p from payload: θ_p = Θ_base_p = payload, nothing carried
 * (a fresh start, diloco, ddp); the counters restart at the current step. */
void learner_rebase_adopt(learner *L, int p, const float *payload, int64_t version);
/* Rebase fragment p on payload (decoupled): θ_p ← payload + (θ_p − ref),
 * Θ_base_p ← payload. ref is sent_p when the contribution in flight was
 * accepted (its steps are in the merged value: the steps since the send are
 * carried, counted from send_step), else Θ_base_p (every step since
 * origin_step is carried, counters kept). */
void learner_rebase_apply(learner *L, int p, const float *payload, int64_t version, int accepted);
/* The start pull of fragment p after a restart from a local checkpoint
 * (decoupled): carry what the checkpoint holds that the syncer has not
 * accepted (join_accepted), see docs/internals/learner.md "Rebase". */
void learner_rebase_start(learner *L, int p, const float *payload, int64_t version);
/* Note that fragment p's contribution of *m is sent: sent_p = θ_p,
 * send_step and its counters. */
void learner_rebase_note_send(learner *L, const frag_msg *m);
/* Throw away the progress of every fragment (non-finite parameters, after
 * θ was reset to Θ_base): counted in lost_frag_steps. */
void learner_rebase_drop_progress(learner *L);
/* Steps of fragment p not handed to the syncer yet: frag_steps less what
 * the contribution in flight carries when `sent_accepted` (it was
 * accepted). */
int64_t learner_rebase_unsent_steps(const learner *L, int p, int sent_accepted);

#endif
