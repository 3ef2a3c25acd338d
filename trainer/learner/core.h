/* core.h - the learner's shared core: struct learner and the inner step.
 *
 * What it is: struct learner (the local model and optimizer, the copies of
 * the global fragments, the per-fragment progress, the flags the threads
 * signal each other with), the learner's limits, and the core's own
 * operations (the inner step, the end-of-training rule, the NaN hook),
 * defined in learner.c next to learner_run and the heartbeat thread. What
 * it is not: an interface; nothing outside trainer/learner/ includes it (the
 * public face is learner.h). Decoupled keeps its queues and comm-thread
 * state in its own struct (decoupled.c), ddp what it holds of the syncer's
 * state in its own (ddp.c; a rejoin passes it to the link as an argument).
 *
 * The components over this core, each with its contract header:
 *   learner.c    core: learner_run, the inner step, the heartbeat thread (this header)
 *   link.h       the link to the syncer: calls with give-up, join, pulls, answer reasons
 *   contrib.h    the contribution path: error feedback, encode, POST
 *   rebase.h     keeping every trained step when a global fragment comes (L->rb)
 *   ckpt.h       local checkpoints
 *   diloco.h, ddp.h, decoupled.h   one file per mode, each a loop over this core
 * Exported names carry the component's prefix (learner_link_, ...); the
 * core's own are plain learner_.
 *
 * Threads and locking: L->mu guards the fields below "shared"; the rest is
 * the main thread's, except gcopy/gver/gseal/seen_ver and the delta
 * counters, owned by whichever thread talks to the syncer (main before the
 * decoupled comm thread starts and in ddp/diloco, the comm thread in
 * decoupled mode). Each field says who writes it.
 */
#ifndef TRN_LEARNER_CORE_H
#define TRN_LEARNER_CORE_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "common/http_client.h"
#include "numerics/data.h"
#include "numerics/fragment.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/learner/learner.h"
#include "trainer/learner/rebase.h"
#include "trainer/seal.h"

#define HTTP_TIMEOUT_MS 15000
#define POLL_WAIT_MS 10000

/* One fragment's contribution (the outbox of decoupled, diloco's sends) or
 * merged value (decoupled's inbox). */
typedef struct frag_msg {
    int p;              /* fragment */
    int64_t version;    /* its version (inbox) / base version (outbox) */
    int64_t tokens;     /* outbox: tokens since received */
    int64_t steps;      /* outbox: steps since received */
    unsigned char *buf; /* inbox: f32 values; outbox: encoded payload */
    size_t len;         /* bytes in buf */
    uint32_t crc;       /* outbox: CRC32C of buf */
    int64_t step;       /* outbox: the learner's step at the send (X-Chaosloco-Step) */
} frag_msg;

struct learner_decoupled; /* decoupled mode's own state (decoupled.c) */

typedef struct learner {
    const learner_opts *o;       /* borrowed from learner_run's caller */
    volatile sig_atomic_t *stop; /* set by a signal */
    config cfg;                  /* from the syncer at join, plus overrides (link.c, first join) */
    int64_t sched_steps;         /* the syncer's --steps: the lr schedule horizon (same on every learner) */
    cx_http_client *http;        /* main thread */
    model *m;                    /* the local model */
    adamw *opt;                  /* inner optimizer */
    data_source *src;            /* corpus */
    data_shard *shard;           /* this learner's shard */
    fragment_table *ft;          /* fragments (must match the syncer's digest) */
    size_t n;                    /* parameters */
    int P;                       /* fragments */
    float *base;                 /* [n] Θ_base: global params as last received */
    learner_rebase_state rb;     /* each fragment's progress (rebase.h; written by rebase.c only) */
    int64_t *ckpt_accepted;      /* [P] ckpt.c's copy of "the contribution in flight was accepted" */
    int64_t
        *join_accepted;  /* [P] join answer: step of our last contribution the syncer accepted (-1 unknown) */
    int restored_carry;  /* 1: the start pull carries the restored checkpoint's unsent progress */
    uint8_t *in, *tg;    /* [B, C] and [B] batch buffers */
    float *scratch;      /* [2n] deltas and decoded payloads */
    unsigned char *wire; /* [4n] encoded payloads */
    float train_loss;    /* nats, last step (written under mu: the heartbeat reads it) */
    double step_ms_ema;  /* ms per inner step (compute + slowdown; written under mu) */
    double pull_ms_ema;  /* ms per fragment pull round trip (whoever pulls; under mu) */
    int64_t ckpt_step;   /* step of the last checkpoint */
    ckpt_learner *restored; /* local checkpoint read at start, or NULL */
    ckpt_writer *ckw;       /* background checkpoint writer (created at the first periodic one), or NULL */
    int ckw_broken;         /* 1: no writer could be made; periodic checkpoints are synchronous */
    int ckw_skip_logged;    /* 1 once a skipped checkpoint was logged */
    char hook_path[1024];   /* CHAOSLOCO_HOOK_DIR/nan, "" if unset */
    /* The copy of the global fragments exactly as the syncer sent them
     * (full pulls and applied delta chains), written by link.c for the
     * thread that talks to the syncer: main before the decoupled comm
     * thread starts and in ddp/diloco, the comm thread in decoupled mode. */
    float *gcopy;                /* [n] */
    int64_t *gver;               /* [P] version of gcopy per fragment (-1 none) */
    char (*gseal)[SEAL_HEX + 1]; /* [P] the syncer's seal of that copy (trainer/seal.h), "" none */
    int64_t n_delta;             /* fragments received as delta chains */
    int64_t n_delta_vers;        /* deltas applied */
    int64_t n_full;              /* fragments received in full */
    int64_t n_mismatch;          /* delta results that failed the CRC check (then pulled in full) */
    int64_t *seen_ver; /* [P] newest version of each fragment GET /v1/versions showed (same owner as gcopy) */
    /* Upstream error feedback (contrib.c; main thread only; memory only,
     * never checkpointed): what the encoding lost of each fragment's last
     * contribution, added to the next one. NULL until the first contribution
     * of a run with upstream_ef on and an encoding other than f32. */
    float *ef;                     /* [n] residual, fragment p at ef_off[p] */
    float *ef_next;                /* [n] residual of the contribution just built (commit keeps it) */
    size_t *ef_off;                /* [P] offsets into ef */
    int64_t ef_incarnation;        /* the residual belongs to this incarnation; a rejoin resets it */
    int ef_broken;                 /* 1: out of memory for the residual; contributions go without it */
    struct learner_decoupled *dec; /* decoupled mode's state (decoupled.c), NULL in other modes */

    /* ---- shared (under mu) ---- */
    pthread_mutex_t mu;
    int64_t incarnation; /* current incarnation (link.c, at each join) */
    int64_t step;        /* inner steps done (main; ddp: also the join and the resync) */
    int64_t sched_off;   /* decoupled: schedule step = step + sched_off (link.c, at each join) */
    int64_t tokens;      /* tokens trained (main) */
    int64_t last_ok_ms;  /* mono ms of the last answer from the syncer (link.c, any thread) */
    int64_t last_hb_ms;  /* mono ms the last heartbeat POST returned (0 none; heartbeat) */
    int fatal;           /* link.c / comm: give up (syncer gone) */
    int need_rejoin;     /* heartbeat, contrib.c, comm: the syncer no longer knows us; link.c clears it */
    int threads_stop;    /* main -> heartbeat and comm threads: exit */
    int end_seen;        /* heartbeat -> main: the syncer said "end" (POST /v1/end) */
} learner;

static inline int is_ddp(const learner *L)
{
    return L->cfg.mode == CONFIG_MODE_DDP || L->cfg.mode == CONFIG_MODE_DDP_ELASTIC;
}

/* ---- learner.c: the inner step ---- */

/* 1 when the last loss and every parameter are finite. Main thread. */
int learner_params_finite(learner *L);
/* The inner learning rate at step (the syncer's --steps as horizon). */
float learner_lr_now(learner *L, int64_t step);
/* Forward/backward on the next batch; grads in model_grads(). Main thread. */
void learner_compute_grads(learner *L);
/* After an inner step: counters, --slowdown padding of compute_ns (the
 * step's own compute time, without any wait for the syncer), the periodic
 * checkpoint. Main thread. */
void learner_after_step(learner *L, int64_t compute_ns);
/* One local inner step (diloco, decoupled): learner_compute_grads, AdamW
 * at the scheduled rate, learner_after_step. Main thread. */
void learner_local_step(learner *L);
/* 1 while the inner loop should go on: no signal, the --steps budget not
 * spent, and the syncer has not ended the run (heartbeat answer "end"). */
int learner_keep_training(learner *L);
/* 1 when a thread saw that the syncer no longer knows this incarnation
 * (need_rejoin). Any thread; takes L->mu. */
int learner_rejoin_asked(learner *L);
/* The NaN hook (docs/faults.md, "nan"): 1 when this contribution or
 * gradient must carry NaN. Main thread. */
int learner_nan_hook(learner *L);

#endif
