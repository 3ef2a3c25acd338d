/* durability.h - the syncer's durability component: eval, checkpoints,
 * and the restore at start-up.
 *
 * Owns: s->dur (struct syncer_dur: the eval results and schedule, the
 * checkpoint schedule, the event seq of the restored checkpoint) and what
 * the start found (s->start).
 * Operations: set up s->dur, note a merge or ask for an eval soon (the
 * eval's schedule), run an eval, write a checkpoint, restore, bump the
 * versions above the log, log the start.
 * Lock: each says; the eval and the checkpoint write run outside s->mu on
 * snapshots taken under it (the worker thread's).
 */
#ifndef TRN_SYNCER_DURABILITY_H
#define TRN_SYNCER_DURABILITY_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/syncer.h"

/* The eval and checkpoint schedule; durability.c is its only writer
 * (under s->mu, but for dur_init and dur_restore before serving). */
typedef struct syncer_dur {
    double eval_loss;         /* nats, NAN before the first eval */
    int64_t eval_merges;      /* merges at the last eval */
    int64_t eval_tokens;      /* tokens_merged at the last eval */
    int64_t last_eval_ms;     /* mono ms of the last eval */
    int eval_pending;         /* 1: a merge happened since the last eval */
    int64_t last_ckpt_merges; /* merges at the last checkpoint */
    int64_t last_ckpt_ms;     /* mono ms of the last checkpoint snapshot (0: none yet) */
    int64_t ckpt_event_seq;   /* event seq the restored checkpoint was taken at (0: none) */
} syncer_dur;

/* Set up s->dur at start-up: no eval yet, no checkpoint. */
void dur_init(syncer *s);
/* A merge happened: the worker evals once eval_every_ms allows (mu held). */
void dur_note_merge(syncer *s);
/* The global state changed at once (a restore, a rebuild): the worker
 * evals as soon as it runs (mu held, or before serving). */
void dur_eval_soon(syncer *s);

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
