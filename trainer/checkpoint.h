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

#define CKPT_MAX_LEARNERS 1024

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
    int64_t *frag_steps;   /* [P] inner steps since it last received the fragment */
    int64_t *frag_tokens;  /* [P] tokens since it last received the fragment */
    uint64_t cursor_len;   /* bytes in cursor */
    void *cursor;          /* the data cursor, opaque bytes */
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

#endif
