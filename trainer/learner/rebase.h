/* rebase.h - every trained step reaches the global model: how a learner
 * takes a global fragment without throwing away what it trained.
 *
 * What it is: adoption (nothing to keep), the decoupled rebase (the merged
 * value plus the progress not yet in it), the start pull of a restarted
 * learner (the progress its checkpoint holds that the syncer never
 * accepted), and the bookkeeping of a send. What it is not: when fragments
 * are sent or received (the modes) nor the checkpoint (ckpt.h).
 *
 * Owns struct learner_rebase_state (L->rb: each fragment's progress),
 * written here only: made by learner_rebase_init, filled from a checkpoint
 * by learner_rebase_restore, counted by learner_rebase_count_steps (the
 * core's learner_after_step); the modes and the checkpoint read it. It
 * also writes θ and Θ_base over a fragment's ranges when it takes a global
 * value. Main thread only. The arithmetic is drawn in rebase.c.
 */
#ifndef TRN_LEARNER_REBASE_H
#define TRN_LEARNER_REBASE_H

#include <stdint.h>

#include "trainer/checkpoint.h"

/* core.h includes this header for the struct below; these are its types. */
typedef struct learner learner;
typedef struct frag_msg frag_msg;

/* Each fragment's progress: θ_p − Θ_base_p is the progress since
 * origin_step[p]; the contribution in flight carried the part up to
 * send_step[p], whose θ_p is in sent. */
typedef struct learner_rebase_state {
    int64_t *base_version;   /* [P] version of Θ_base per fragment */
    int64_t *frag_steps;     /* [P] inner steps not yet in the global model: since origin_step */
    int64_t *frag_tokens;    /* [P] tokens of those steps */
    float *sent;             /* [n] θ at the send of each fragment's contribution in flight */
    int64_t *origin_step;    /* [P] step the progress θ_p − Θ_base_p starts at */
    int64_t *send_step;      /* [P] step of the contribution in flight (-1 none) */
    int64_t *send_steps;     /* [P] steps it carried (frag_steps at the send) */
    int64_t *send_tokens;    /* [P] tokens it carried */
    int64_t lost_frag_steps; /* fragment-steps thrown away (non-finite parameters); sum over fragments */
} learner_rebase_state;

/* L->rb for L->n parameters in L->P fragments: nothing trained, nothing in
 * flight (send_step -1). CX_ENOMEM (what was made is freed by
 * learner_rebase_cleanup). */
int learner_rebase_init(learner *L);
void learner_rebase_cleanup(learner *L);
/* The progress a local checkpoint holds (its base versions, counters and
 * sent; c is for this model: same n and P). */
void learner_rebase_restore(learner *L, const ckpt_learner *c);
/* steps inner steps of tokens tokens in all, trained into every fragment. */
void learner_rebase_count_steps(learner *L, int64_t steps, int64_t tokens);

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
