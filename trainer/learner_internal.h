/* learner_internal.h - the learner's private state, shared by its files.
 *
 * What it is: struct learner (the local model and optimizer, the copies of
 * the global fragments, the decoupled queues), the learner's limits, and
 * the functions one learner file calls in another. What it is not: an
 * interface; nothing outside trainer/learner*.c includes it (not
 * installed); the public face is learner.h. Threads and locking are as
 * learner.c's notes say: L->mu guards the fields below "shared"; the rest
 * is main-thread only except gcopy/gver, owned by whichever thread talks to
 * the syncer. Each function below says which thread may call it.
 *
 * Which file holds what:
 *   learner.c            lifecycle (learner_run), inner step, heartbeat thread, diloco loop
 *   learner_join.c       syncer calls with give-up, build, join, pulls
 *   learner_contrib.c    contributions: upstream error feedback, encode, POST
 *   learner_ckpt.c       the NaN hook and local checkpoints
 *   learner_ddp.c        ddp / ddp-elastic: gradient barrier, optimizer sync
 *   learner_decoupled.c  decoupled: the comm thread and the main-thread side
 * Functions that were statics of one learner.c keep their names where they
 * name their concern (ddp_, decoupled_, ef_); the generic ones are
 * prefixed learner_.
 */
#ifndef TRN_LEARNER_INTERNAL_H
#define TRN_LEARNER_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "common/http_client.h"
#include "common/json.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "numerics/data.h"
#include "numerics/fragment.h"
#include "trainer/learner.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "trainer/seal.h"

#define HTTP_TIMEOUT_MS 15000
#define POLL_WAIT_MS 10000
/* Queue capacity: a full pull hands the main thread one message per
 * fragment, so the inbox must hold P of them. */
#define MAX_QUEUE CONFIG_FRAGMENTS_MAX
#define FINAL_SEND_MS 10000     /* decoupled: longest the end of training waits to send its last progress */
#define OVERLAP_WAIT_MAX_MS 250 /* decoupled: longest wait at s + tau for a merged value that is late */

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

typedef struct learner {
    const learner_opts *o;
    volatile sig_atomic_t *stop;
    config cfg;            /* from the syncer at join, plus overrides */
    int64_t sched_steps;   /* the syncer's --steps: the lr schedule horizon (same on every learner) */
    cx_http_client *http;  /* main thread */
    model *m;              /* the local model */
    adamw *opt;            /* inner optimizer */
    data_source *src;      /* corpus */
    data_shard *shard;     /* this learner's shard */
    fragment_table *ft;    /* fragments (must match the syncer's digest) */
    size_t n;              /* parameters */
    int P;                 /* fragments */
    float *base;           /* [n] Θ_base: global params as last received */
    int64_t *base_version; /* [P] version of Θ_base per fragment */
    int64_t *frag_steps;   /* [P] inner steps not yet in the global model: since origin_step */
    int64_t *frag_tokens;  /* [P] tokens of those steps */
    /* Rebase (decoupled; learner_rebase.c). θ_p − Θ_base_p is the progress
     * since origin_step[p]; the contribution in flight carried the part up to
     * send_step[p], whose θ_p is in sent. Main thread only. */
    float *sent;            /* [n] θ at the send of each fragment's contribution in flight */
    int64_t *origin_step;   /* [P] step the progress θ_p − Θ_base_p starts at */
    int64_t *send_step;     /* [P] step of the contribution in flight (-1 none) */
    int64_t *send_steps;    /* [P] steps it carried (frag_steps at the send) */
    int64_t *send_tokens;   /* [P] tokens it carried */
    int64_t *ckpt_accepted; /* [P] checkpoint_view's copy of inflight && accepted */
    int64_t
        *join_accepted; /* [P] join answer: step of our last contribution the syncer accepted (-1 unknown) */
    int restored_carry; /* 1: the start pull carries the restored checkpoint's unsent progress */
    int finishing;      /* 1: training is over, the remaining progress is being sent */
    int64_t lost_frag_steps; /* fragment-steps thrown away (non-finite parameters); sum over fragments */
    uint8_t *in, *tg;        /* [B, C] and [B] batch buffers */
    float *scratch;          /* [n] deltas and decoded payloads */
    unsigned char *wire;     /* [4n] encoded payloads */
    float train_loss;        /* nats, last step */
    double step_ms_ema;      /* ms per inner step (compute + slowdown) */
    double pull_ms_ema;      /* ms per fragment pull round trip (comm thread; read under mu) */
    int64_t ckpt_step;       /* step of the last checkpoint */
    ckpt_learner *restored;  /* local checkpoint read at start, or NULL */
    ckpt_writer *ckw;        /* background checkpoint writer (created at the first periodic one), or NULL */
    int ckw_broken;          /* 1: no writer could be made; periodic checkpoints are synchronous */
    int ckw_skip_logged;     /* 1 once a skipped checkpoint was logged */
    char hook_path[1024];    /* CHAOSLOCO_HOOK_DIR/nan, "" if unset */
    /* The copy of the global fragments exactly as the syncer sent them
     * (full pulls and applied delta chains), owned by the thread that
     * talks to the syncer: main before the decoupled comm thread starts
     * and in ddp/diloco, the comm thread in decoupled mode. */
    float *gcopy;                /* [n] */
    int64_t *gver;               /* [P] version of gcopy per fragment (-1 none) */
    char (*gseal)[SEAL_HEX + 1]; /* [P] the syncer's seal of that copy (trainer/seal.h), "" none */
    int64_t n_delta;             /* fragments received as delta chains */
    int64_t n_delta_vers;        /* deltas applied */
    int64_t n_full;              /* fragments received in full */
    int64_t n_mismatch;          /* delta results that failed the CRC check (then pulled in full) */
    int64_t *seen_ver; /* [P] newest version of each fragment GET /v1/versions showed (same owner as gcopy) */
    int64_t ddp_version;         /* ddp: the syncer's version of the state this learner holds (its params and
                            AdamW state equal the syncer's at that version); -1 unknown. Main thread */
    char ddp_seal[SEAL_HEX + 1]; /* ddp: the syncer's seal on that state (trainer/seal.h), "" none */
    /* Upstream error feedback (main thread only; memory only, never
     * checkpointed): what the encoding lost of each fragment's last
     * contribution, added to the next one. NULL until the first contribution
     * of a run with upstream_ef on and an encoding other than f32. */
    float *ef;              /* [n] residual, fragment p at ef_off[p] */
    float *ef_next;         /* [n] residual of the contribution just built (ef_commit keeps it) */
    size_t *ef_off;         /* [P] offsets into ef */
    int64_t ef_incarnation; /* the residual belongs to this incarnation; a rejoin resets it */
    int ef_broken;          /* 1: out of memory for the residual; contributions go without it */

    /* ---- shared (under mu) ---- */
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* outbox / inbox changes */
    int64_t incarnation; /* current incarnation */
    int64_t step;        /* inner steps done */
    int64_t sched_off;   /* decoupled: schedule step = step + sched_off (set at each join) */
    int64_t tokens;      /* tokens trained */
    int64_t last_ok_ms;  /* mono ms of the last answer from the syncer */
    int64_t last_hb_ms;  /* mono ms the last heartbeat POST returned (0 none) */
    int fatal;           /* comm/heartbeat: give up (syncer gone) */
    int need_rejoin;     /* heartbeat/comm: the syncer no longer knows us */
    int comm_stop;       /* main -> comm: exit */
    int end_seen;        /* heartbeat -> main: the syncer said "end" (POST /v1/end) */
    int pull_all;        /* main -> comm: re-pull every fragment (non-finite params) */
    frag_msg outbox[MAX_QUEUE];
    int n_out; /* queued contributions */
    frag_msg inbox[MAX_QUEUE];
    int n_in;          /* received fragments not yet applied */
    int reset_all;     /* comm -> main: a rejoin happened; inbox holds every fragment */
    int *inflight;     /* [P] 1 from enqueue until the merged fragment is applied */
    int *accepted;     /* [P] comm -> main: the contribution in flight was accepted (202) */
    int *pending;      /* [P] main only: due, waiting for a free slot (tau) */
    int64_t *apply_at; /* [P] main only: step at which the merged value of p's contribution in flight is
                          applied (its send step + tau; -1 none): an earlier arrival waits in the inbox */
    int *wait_done;    /* [P] main only: 1 once the overlap wait for p's contribution in flight happened */
    int *no_wait;      /* [P] comm -> main: no merged value to wait for at s + tau (refused, or the 202
                          named no version) */
    int overlap_off;   /* main: 1 after an overlap wait timed out, until a merged value is on time again */
    int64_t n_overlap_waits;    /* main: waits at s + tau */
    int64_t n_overlap_timeouts; /* ... that ended without the value */
    double overlap_wait_ms;     /* ... ms spent waiting */
    int n_inflight;             /* sum of inflight */
    int sending;                /* comm is posting a contribution */
    int comm_done;              /* comm -> main: the comm thread left its loop (nothing more will be sent) */
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

/* ---- learner_join.c: syncer calls, join, pulls ---- */

/* 1 (and L->fatal set) once the syncer has been silent for give_up_s or a
 * thread already gave up. Any thread; takes L->mu. */
int learner_gave_up(learner *L);
/* The syncer answered: restart the give-up clock. Any thread; takes L->mu. */
void learner_mark_ok(learner *L);
/* One request, retried (with the client's backoff) until an HTTP answer
 * comes or the syncer has been silent for give_up_s. 0 = answered (r holds
 * it; the caller cleans it up). */
int learner_call(learner *L, cx_http_client *c, const char *method, const char *path, const char *const *hdrs,
                 const void *body, size_t len, const char *ctype, long timeout_ms, cx_http_result *r);
/* learner_call with a JSON body (borrowed) and answer: the decoded answer
 * (new reference) or NULL, *status the HTTP status (0: no answer). */
json_t *learner_call_json(learner *L, cx_http_client *c, const char *method, const char *path, json_t *body,
                          int *status);
/* A new HTTP client for the syncer (credential, CA file, timeouts), or
 * NULL; each thread that talks to the syncer has its own. */
cx_http_client *learner_new_client(const learner *L);
/* POST /v1/join; on the first join also build everything. 0, or a
 * negative cx_err with err. */
int learner_join(learner *L, cx_http_client *c, int first, char *err, size_t errlen);
/* GET fragment p (newer than `newer`, or the current one when < 0) into
 * out, full or as a CRC-checked delta chain. Returns 1 with out and
 * *version set, 0 when nothing newer came in the wait, negative on
 * failure. The thread that owns gcopy. */
int learner_pull_one(learner *L, cx_http_client *c, int p, int64_t newer, long wait_ms, float *out,
                     int64_t *version);
/* Main thread: pull every fragment at its current version (the first one
 * after a restart carries the checkpoint's unsent progress in decoupled
 * mode, learner_start_fragment). */
int learner_pull_all(learner *L);

/* ---- learner_rebase.c: keeping every trained step ---- */

/* Take fragment p from payload: θ_p = Θ_base_p = payload, nothing carried
 * (a fresh start, diloco, ddp); the counters restart at the current step.
 * Main thread. */
void learner_adopt(learner *L, int p, const float *payload, int64_t version);
/* Rebase fragment p on payload (decoupled): θ_p ← payload + (θ_p − ref),
 * Θ_base_p ← payload. ref is sent_p when the contribution in flight was
 * accepted (its steps are in the merged value: the steps since the send are
 * carried, counted from send_step), else Θ_base_p (every step since
 * origin_step is carried, counters kept). Main thread. */
void learner_rebase(learner *L, int p, const float *payload, int64_t version, int accepted);
/* The start pull of fragment p after a restart from a local checkpoint
 * (decoupled): carry what the checkpoint holds that the syncer has not
 * accepted (join_accepted), see docs/internals/learner.md "Rebase". Main
 * thread. */
void learner_start_fragment(learner *L, int p, const float *payload, int64_t version);
/* Note that fragment p's contribution of *m is handed to the comm thread:
 * sent_p = θ_p, send_step and its counters. Main thread. */
void learner_note_send(learner *L, const frag_msg *m);
/* Throw away the progress of every fragment (non-finite parameters, after
 * θ was reset to Θ_base): counted in lost_frag_steps. Main thread. */
void learner_drop_progress(learner *L);
/* Steps of fragment p not handed to the syncer yet: frag_steps less what
 * an accepted contribution in flight carries. Main thread; takes L->mu. */
int64_t learner_unsent_steps(learner *L, int p);

/* ---- learner_ckpt.c: NaN hook and checkpoints ---- */

/* The NaN hook (docs/faults.md, "nan"): 1 when this contribution must carry NaN. */
int learner_nan_hook(learner *L);
/* The periodic checkpoint from the inner loop: the write runs on the
 * writer's thread; skipped (and counted) while the previous one runs. */
void learner_checkpoint_periodic(learner *L);
/* The final checkpoint (SIGTERM or the end of training): synchronous and
 * complete before the process goes on. */
void learner_save_checkpoint(learner *L);

/* ---- learner_contrib.c: contributions ---- */

/* Keep the residual of the contribution of fragment p just built (sent). */
void ef_commit(learner *L, int p);
/* Δ_p = Θ_base_p − θ_p (plus the error-feedback residual when on) encoded
 * into a malloc'd buffer (the caller frees it) of *len bytes with its
 * CRC32C; NULL when out of memory. Main thread. */
unsigned char *learner_make_contribution(learner *L, int p, size_t *len, uint32_t *crc);
/* POST one contribution. Returns the HTTP status (0 = no answer); on 202
 * *merges_into is the version the syncer said its round will produce
 * (-1 when the answer did not say). */
int learner_post_contribution(learner *L, cx_http_client *c, const frag_msg *m, int64_t *merges_into);

/* ---- the mode loops (learner_ddp.c, learner_decoupled.c) ---- */

/* Train in ddp / ddp-elastic mode until the end of training: 0, or a
 * negative cx_err with err. */
int ddp_loop(learner *L, char *err, size_t errlen);
/* Train in decoupled mode (starts and stops the comm thread): 0, or a
 * negative cx_err with err. */
int decoupled_loop(learner *L, char *err, size_t errlen);

#endif
