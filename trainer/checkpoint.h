/* checkpoint.h - syncer and learner checkpoints on disk.
 *
 * Each checkpoint is one cx_file_write_blob (atomic temp+fsync+rename+dir
 * fsync, CRC32C over the payload) holding a little-endian record: a magic,
 * a format version, scalars, then the float arrays. Loading checks the blob
 * CRC, the magic, every length against the file size, and the shape against
 * what the caller expects (parameter count, fragment count and table
 * digest), so a checkpoint of another model is refused, never half-applied.
 *
 * Two slots ("<name>.a", "<name>.b") are written alternately; loading picks
 * the valid one with the larger `generation`, so a checkpoint damaged after
 * it was written (bit rot, a truncating disk fault) falls back to the one
 * before instead of losing everything.
 *
 * Ownership: on save the arrays are borrowed; on load they are malloc'd and
 * released by *_cleanup().
 */
#ifndef TRN_CHECKPOINT_H
#define TRN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/config.h"

/* A syncer checkpoint never holds more learners than a run can have. */
#define CKPT_MAX_LEARNERS CONFIG_LEARNERS_MAX

typedef struct ckpt_learner_inc {
    int64_t learner;     /* learner id */
    int64_t incarnation; /* last incarnation the syncer handed out to it */
} ckpt_learner_inc;

typedef struct ckpt_syncer {
    int64_t generation;         /* increases with every save */
    int64_t mode;               /* config_mode the run was started with */
    uint64_t n;                 /* parameters */
    int64_t P;                  /* fragments */
    uint32_t table_digest;      /* fragment_table_digest */
    int64_t merges;             /* merges done */
    int64_t tokens_merged;      /* tokens of all merged contributions */
    int64_t tokens_trained;     /* tokens the learners trained (syncer_tokens_trained) */
    int64_t ddp_step;           /* ddp modes: completed global steps */
    int64_t event_seq;          /* last event seq at save time */
    int64_t *versions;          /* [P] */
    float *params;              /* [n] global parameters */
    float *momentum;            /* [n] outer Nesterov buffer (zeros in ddp) */
    int64_t adam_steps;         /* ddp modes: AdamW step counter; 0 otherwise */
    float *adam_m;              /* [n] or NULL (no AdamW state) */
    float *adam_v;              /* [n] or NULL */
    int64_t n_learners;         /* entries in learners */
    ckpt_learner_inc *learners; /* [n_learners] */
} ckpt_syncer;

typedef struct ckpt_learner {
    int64_t generation;    /* increases with every save */
    int64_t learner;       /* its id */
    int64_t incarnation;   /* last incarnation it was given */
    int64_t step;          /* inner steps done */
    int64_t tokens;        /* tokens trained */
    uint64_t n;            /* parameters */
    int64_t P;             /* fragments */
    uint32_t table_digest; /* fragment_table_digest */
    float *params;         /* [n] */
    int64_t adam_steps;    /* AdamW step counter */
    float *adam_m;         /* [n] */
    float *adam_v;         /* [n] */
    int64_t *base_version; /* [P] version of each fragment it last received */
    int64_t
        *frag_steps; /* [P] inner steps not yet merged: since origin_step (decoupled), else since received */
    int64_t *frag_tokens; /* [P] tokens not yet merged: since origin_step (decoupled), else since received */
    /* decoupled rebase (trainer/learner/rebase.c): what a restart needs to carry
     * the progress it has not sent onto the global value it pulls */
    float *base;          /* [n] Θ_base: the global values it last took */
    float *sent;          /* [n] θ at the send of each fragment's contribution in flight (send_step >= 0) */
    int64_t *origin_step; /* [P] step the progress θ − Θ_base starts at (the last send merged into Θ_base) */
    int64_t *send_step;     /* [P] step of the contribution in flight, -1 none */
    int64_t *send_steps;    /* [P] steps it carried */
    int64_t *send_tokens;   /* [P] tokens it carried */
    int64_t *send_accepted; /* [P] 1 once the syncer accepted it (202) */
    uint64_t cursor_len;    /* bytes in cursor */
    void *cursor;           /* the data cursor, opaque bytes */
} ckpt_learner;

/* Write to the slot after the newest one in dir/<name>.{a,b}; sets
 * c->generation to newest + 1 first (so pass a mutable struct). */
int ckpt_syncer_save(const char *dir, ckpt_syncer *c, char *err, size_t errlen);
/* Load the newest valid slot. Loading is what a process does at start, so
 * it first removes the temp files of saves a crash interrupted
 * ("<name>.{a,b}.tmp.PID", see cx_file_remove_stale_tmp); call it before
 * any save of this process. CX_ENOTFOUND when neither slot exists,
 * CX_ECORRUPT when they exist but none is valid, CX_EINVAL on a shape
 * mismatch (expect_n, expect_P, expect_digest; 0 = don't check). */
int ckpt_syncer_load(const char *dir, ckpt_syncer *c, uint64_t expect_n, int64_t expect_P,
                     uint32_t expect_digest, char *err, size_t errlen);
void ckpt_syncer_cleanup(ckpt_syncer *c);

int ckpt_learner_save(const char *dir, ckpt_learner *c, char *err, size_t errlen);
int ckpt_learner_load(const char *dir, ckpt_learner *c, uint64_t expect_n, int64_t expect_P,
                      uint32_t expect_digest, char *err, size_t errlen);
void ckpt_learner_cleanup(ckpt_learner *c);

/* ---- background learner checkpoints ----
 *
 * A learner checkpoints off its inner loop: ckpt_writer_submit() copies the
 * state into buffers allocated once (ckpt_writer_new) and wakes a writer
 * thread that saves them with ckpt_learner_save (same atomic two-slot
 * write). The caller pays the memcpy only. While a write is running a
 * submit is skipped and counted, never waited for. The writer is the only
 * one saving while it lives: a final synchronous save comes after
 * ckpt_writer_wait() (or ckpt_writer_free()).
 *
 *   IDLE ── submit(): copy, busy=1 ──► WRITING ── thread: saved ──► IDLE
 *   (submit while WRITING: skipped++, nothing copied)
 */
typedef struct ckpt_writer ckpt_writer;

typedef struct ckpt_writer_stats {
    int64_t written; /* checkpoints saved by the thread */
    int64_t skipped; /* submits refused because a write was still running */
    int64_t failed;  /* saves that failed (logged; the previous slot stays) */
} ckpt_writer_stats;

/* Buffers for n params, P fragments and a cursor of cursor_len bytes; the
 * thread writes into dir. before_write (may be NULL) runs on the thread
 * before each save: a test hook (hold a write to see a skip). NULL on
 * failure (out of memory or no thread). */
ckpt_writer *ckpt_writer_new(const char *dir, uint64_t n, int64_t P, uint64_t cursor_len,
                             void (*before_write)(void *ctx), void *ctx);
/* Snapshot c (its arrays are copied; shapes must match ckpt_writer_new)
 * and hand it to the thread. 1 when taken, 0 when skipped because the
 * previous write still runs, CX_EINVAL on a shape mismatch. */
int ckpt_writer_submit(ckpt_writer *w, const ckpt_learner *c);
/* Block until no write is in progress. */
void ckpt_writer_wait(ckpt_writer *w);
void ckpt_writer_get_stats(ckpt_writer *w, ckpt_writer_stats *out);
/* Wait for the write in progress, stop the thread, free. NULL is a no-op. */
void ckpt_writer_free(ckpt_writer *w);

#endif
