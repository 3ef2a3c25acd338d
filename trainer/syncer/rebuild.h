/* rebuild.h - the syncer's rebuild component: rebuilding the global
 * state from the learners after a start without it (see "syncer: rebuild
 * from the learners" in rebuild.c, where its state machine is drawn).
 *
 * Owns: s->rebuild (struct syncer_rebuild): the state, each fragment's
 * best report and upload, what each slot reported at its last join, who
 * joined since the collection opened, the rebuilds done, the stale-pull
 * guard and --on-lost-state.
 * Operations: set up and free it, note what the start restored, decode a
 * join's holds, a join's part in the rebuild, the gate that holds pulls
 * and contributions while the state is not served, the worker's step,
 * staging an uploaded copy (rebuild_stage) and the upload route that
 * calls it.
 * Lock: s->mu held, except the route handler, which takes it; rebuild_tick
 * drops it while the checkpoint is written.
 */
#ifndef TRN_SYNCER_REBUILD_H
#define TRN_SYNCER_REBUILD_H

#include <stdint.h>

#include "common/http_server.h"
#include "trainer/config.h"
#include "trainer/protocol.h"
#include "trainer/syncer/api.h"

/* The start-up rebuild (see "syncer: rebuild from the learners"). */
typedef enum rebuild_state { RB_NONE = 0, RB_COLLECTING, RB_WRITING, RB_REFUSED } rebuild_state;
extern const char *const rebuild_state_names[]; /* rebuild.c */

/* One fragment's rebuild: the newest copy any learner reported, and the
 * newest one uploaded (staged until the rebuild completes). */
typedef struct rb_frag {
    int64_t ckpt_version; /* version dur_restore() found (0 without checkpoint): reports above it are newer */
    int64_t start_version; /* version after dur_bump_versions: while unchanged, ckpt_version is the bar */
    int64_t max_reported;  /* highest version any learner reported (published at some point) */
    int64_t want_version;  /* newest reported copy above the bar (0 none) */
    int64_t want_learner;  /* who reported it */
    uint32_t want_crc;     /* its CRC32C */
    int64_t published;     /* highest version this syncer knows it published (-1: no record, a wiped
                              state dir); a report above it is refused (rebuild_claim_refused) */
    int64_t got_version;   /* newest uploaded copy (0 none) */
    int64_t got_learner;   /* who uploaded it */
    uint32_t got_crc;      /* its CRC32C */
    int64_t disagree;      /* reports of want_version with another CRC32C */
    int64_t got_step;      /* ddp: the ddp step the uploaded copy is at (the learner's next step) */
    int64_t got_adam;      /* ddp: its AdamW step counter */
    float *vals;           /* [rb_state_len] the uploaded copy (NULL none); ddp: params | m | v */
} rb_frag;

/* A learner's report of one fragment at its last join. */
typedef struct rb_report {
    int64_t version; /* version of its copy (<= 0: none or untrained) */
    uint32_t crc;    /* CRC32C of its copy as f32 LE bytes (ddp: params | m | v of the fragment) */
    int64_t step;    /* ddp: the step its join named (its copy is the state before that step) */
} rb_report;

/* The rebuild's state; rebuild.c is its only writer (under s->mu, but
 * for rebuild_init/rebuild_note_restored/rebuild_note_start before
 * serving). */
typedef struct syncer_rebuild {
    rebuild_state state;             /* see "syncer: rebuild from the learners" */
    int64_t opened_ms;               /* mono ms the collection opened */
    rb_frag *frag;                   /* [P] */
    rb_report *rep;                  /* [MAX_LEARNERS * P] what each slot reported at its last join */
    int joined[CONFIG_LEARNERS_MAX]; /* 1: the slot joined since the collection opened */
    int64_t count;                   /* rebuilds done since start */
    int guard;         /* 1: pulls by learners not joined since the start are refused (rebuild_stale_pull) */
    int on_lost_state; /* syncer_lost_state (--on-lost-state) */
} syncer_rebuild;

/* Set up s->rebuild at start-up (after s->P is known): nothing collecting,
 * what to do with a lost state (syncer_lost_state). 0, or -1 with err. */
int rebuild_init(syncer *s, int on_lost_state, char *err, size_t errlen);
/* Free what rebuild_init allocated (and any staged copy). */
void rebuild_cleanup(syncer *s);
/* Start-up, right after dur_restore: the versions restored are each
 * fragment's checkpoint version (0 without a checkpoint). */
void rebuild_note_restored(syncer *s);
/* Start-up, after dur_bump_versions and s->start is final: the versions
 * now are the start versions (while a fragment keeps its own, its
 * checkpoint version is the bar of a report); bumped: merges were logged
 * after the checkpoint. Sets what the syncer knows it published and
 * whether stale pulls are refused. */
void rebuild_note_start(syncer *s, int bumped);

#define RB_RETRY_MS 500 /* Retry-After hint of the 503 answers, ms */
/* Decode the optional "holds" of a join body into v[P], crc[P], pub[P]
 * and sealed[P] (1: the report of p carries this syncer's seal). 0, or -1
 * with a 400 naming what was wrong in resp. */
int rebuild_parse_holds(syncer *s, json_t *holds, int64_t *v, uint32_t *crc, int64_t *pub, int *sealed,
                        cx_http_resp *resp);
/* A join of the learner in `slot` that reported v/crc/sealed (NULL: no
 * holds) and named `step` (ddp: the step its copy is at) (mu held). A
 * report is a copy only when sealed (a syncer with a seal key, diloco and
 * decoupled). Returns RB_NONE to join normally, RB_COLLECTING to answer
 * 503 with the fragments it must upload (upload[*n]), RB_REFUSED to
 * refuse. */
rebuild_state rebuild_join(syncer *s, int slot, const int64_t *v, const uint32_t *crc, const int64_t *pub,
                           const int *sealed, int64_t step, int *upload, int *n);
/* 1 (and a 503 in resp) while the global state is not being served (mu
 * held): fragment GETs and contributions retry. */
int rebuild_gate(syncer *s, cx_http_resp *resp);
/* 1 (and a 403/409 in resp) for a pull by a learner that has not joined
 * since this syncer started, when the start may need a rebuild (mu held). */
int rebuild_stale_pull(syncer *s, const proto_hdr *h, cx_http_resp *resp);
/* The worker's step of the rebuild (mu held; drops it while the
 * checkpoint is written). */
void rebuild_tick(syncer *s);
/* What rebuild_stage did with an uploaded copy. */
typedef enum rebuild_stage_verdict {
    REBUILD_STAGE_STAGED = 0, /* staged: the newest copy of the fragment so far (200) */
    REBUILD_STAGE_NOT_NEEDED, /* a copy as new is staged, or it is not above the bar (200) */
    REBUILD_STAGE_IDLE,       /* no collection is open (409) */
    REBUILD_STAGE_MEMBER,     /* the learner or incarnation is not current: *r says why */
    REBUILD_STAGE_MISMATCH,   /* not the version, CRC32C (ddp: step) the learner reported at join (409) */
} rebuild_stage_verdict;

/* A decoded, finite upload (mu held) of fragment p by the learner h names
 * (h->crc32c: its CRC32C), at `version`, in ddp modes at ddp_step with the
 * AdamW count `adam`: *vals (rb_state_len floats, body_len bytes on the
 * wire) is taken when staged (*vals set to NULL), else left to the caller.
 * why gets the refusal's text (what the handler answers). */
rebuild_stage_verdict rebuild_stage(syncer *s, int p, const proto_hdr *h, int64_t version, int64_t ddp_step,
                                    int64_t adam, float **vals, size_t body_len, proto_reason *r, char *why,
                                    size_t whylen);
/* POST /v1/fragments/{p}/state: a learner's copy of global fragment p
 * (decodes it and calls rebuild_stage). */
SYNCER_HANDLER(rebuild_route_state);

#endif
