/* durability.h - the syncer's durability component: eval, checkpoints,
 * and the restore at start-up.
 *
 * Owns: the eval results and schedule (s->eval_loss, s->eval_merges,
 * s->eval_tokens, s->last_eval_ms, s->eval_pending), the checkpoint
 * schedule (s->last_ckpt_merges, s->last_ckpt_ms), what the start found
 * (s->start, s->ckpt_event_seq).
 * Operations: run an eval, write a checkpoint, restore, bump the versions
 * above the log, log the start.
 * Lock: each says; the eval and the checkpoint write run outside s->mu on
 * snapshots taken under it (the worker thread's).
 */
#ifndef TRN_SYNCER_DURABILITY_H
#define TRN_SYNCER_DURABILITY_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/syncer.h"

/* What dur_restore() found in the state dir (logged, in the start event). */
typedef enum start_kind {
    START_FRESH = 0, /* no checkpoint, no merge in events.jsonl: a new run (or a wiped dir) */
    START_LOST,      /* no checkpoint, but events.jsonl shows merges: the checkpoints were lost */
    START_CORRUPT,   /* checkpoint slots exist, none is valid */
    START_RESTORED,  /* a valid checkpoint was restored */
} start_kind;
extern const char *const dur_start_kind_names[]; /* durability.c */

/* Eval the global model on a snapshot of theta (takes mu for the snapshot
 * and the result only) and emit an eval event. */
void dur_run_eval(syncer *s);
/* Write a checkpoint: snapshot under mu (taken here), write outside it.
 * 0, or a negative cx_err with err. */
int dur_write_checkpoint(syncer *s, char *err, size_t errlen);
/* Restore the newest valid checkpoint of the state dir, before serving:
 * 1 restored, 0 none (s->start says why), negative cx_err with err. */
int dur_restore(syncer *s, char *err, size_t errlen);
/* Versions never go backwards: restart above the merges logged after the
 * checkpoint (start-up, before serving). */
void dur_bump_versions(syncer *s);
/* Log what the state dir held and remember the start versions (the
 * rebuild's bar); before_bump: sum of the versions before the bump. */
void dur_start_log(syncer *s, int64_t before_bump);

#endif
