/* syncer_internal.h - the syncer's private state, shared by its files.
 *
 * What it is: struct syncer and the types it holds (learner slots,
 * per-fragment rounds, downstream delta history, the rebuild's records),
 * the syncer's limits, and the functions one syncer file calls in another.
 * What it is not: an interface. Nothing outside trainer/syncer*.c includes
 * it (it is not installed); the public face is syncer.h. The locking rule
 * of syncer.c's design notes holds for everything here: one mutex, s->mu,
 * guards every field below the "shared state" line of struct syncer, and
 * each function says whether it wants s->mu held ("mu held") or takes it.
 *
 * Which file holds what:
 *   syncer.c             lifecycle (new/run/free), ticker and worker threads, GET /metrics
 *   syncer_learners.c    membership: learner slots, join, leave, heartbeat, end, rejections
 *   syncer_rounds.c      per-fragment rounds (diloco, decoupled): contributions, grace, merge
 *   syncer_deltas.c      downstream deltas, GET /v1/fragments/{p}, GET /v1/versions
 *   syncer_ddp.c         ddp barrier: gradients, step completion, GET /v1/optimizer
 *   syncer_rebuild.c     rebuild from the learners, POST /v1/fragments/{p}/state
 *   syncer_durability.c  eval, checkpoints, restore and version bump at start-up
 *   syncer_api.c         HTTP helpers, status, events, route and access tables, listen
 *   syncer_guard.c       what one learner's contribution weighs, how large it may be, whether a
 *                        merge's result may be applied (its own header, syncer_guard.h; no syncer
 *                        state: the rounds and durability call it)
 * Functions keep the names they had as statics of one syncer.c where they
 * already name their concern (round_, ddp_, rebuild_, reject_, hist_,
 * downstream_, h_ for a route handler); the generic ones are prefixed
 * syncer_.
 */
#ifndef TRN_SYNCER_INTERNAL_H
#define TRN_SYNCER_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/http_server.h"
#include "common/json.h"
#include "trainer/config.h"
#include "trainer/credential.h"
#include "numerics/data.h"
#include "trainer/events.h"
#include "numerics/fragment.h"
#include "numerics/merge.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "trainer/protocol.h"
#include "numerics/round.h"
#include "trainer/seal.h"
#include "trainer/syncer.h"
#include "trainer/syncer_guard.h"

#define MAX_LEARNERS CONFIG_LEARNERS_MAX
#define RECENT_MERGES 16
#define BARRIER_WAIT_MS 5000   /* a ddp handler answers 503 "retry" after this */
#define LONG_POLL_MAX_MS 30000 /* cap on ?wait-ms */
#define HOLD_PER_LEARNER 4     /* requests one learner may hold waiting at once */
#define HOLD_ANON 16           /* ... all callers without a learner credential together */
#define HOLD_BUCKETS (MAX_LEARNERS + 1)
#define TICK_MS 20
#define DDP_COMPUTE_SAMPLES 32    /* auto deadline: recent compute times kept */
#define DDP_AUTO_MIN_SAMPLES 4    /* ... taken before they decide */
#define DDP_AUTO_INITIAL_MS 1000  /* ... deadline until then */
#define DDP_AUTO_FLOOR_MS 20      /* ... never below */
#define DELTA_HISTORY 8           /* encoded downstream deltas kept per fragment */
#define DELTA_HISTORY_F32X 2      /* ... and at most this many f32 fragments' worth of bytes */
#define INCARNATION_MAX_STEP 1000 /* a join may name an incarnation at most this far above the current */
#define T_REAL_MAX_MS 253402300799999LL /* 9999-12-31T23:59:59.999Z: bound of heartbeat t_real_ms */
#define REJECT_EVENT_MS 1000            /* at most one reject event per reason per this interval */

/* Why a GET /v1/fragments/{p} was answered with the full f32 fragment. */
typedef enum full_reason {
    FULL_PULL = 0,  /* plain pull (join, rejoin, resync, no delta=1) */
    FULL_HISTORY,   /* delta asked, but the kept deltas do not reach back to V */
    FULL_MISMATCH,  /* resync=1: the learner's delta result failed the CRC check */
    FULL_SIZE,      /* the chain would be bigger than the f32 fragment */
    FULL_UNENCODED, /* the run's encoding is f32: no deltas */
    FULL_R_COUNT
} full_reason;
extern const char *const syncer_full_reason_names[FULL_R_COUNT]; /* syncer_deltas.c */

/* One encoded downstream delta: Θ_version = Θ_{version-1} + decode(bytes). */
typedef struct delta_rec {
    int64_t version; /* the version it produces */
    uint8_t *bytes;  /* encoded d^ (the run's encoding) */
    size_t len;      /* bytes */
} delta_rec;

/* Per-fragment downstream state (encoded runs; diloco and decoupled). */
typedef struct frag_hist {
    float *resid;               /* [fragment_length] error-feedback residual (in memory only) */
    delta_rec d[DELTA_HISTORY]; /* kept deltas, oldest first, versions contiguous */
    int n;                      /* deltas kept */
    size_t bytes;               /* sum of d[].len */
} frag_hist;

typedef enum learner_state { LS_ACTIVE = 0, LS_ABSENT, LS_LEFT } learner_state;
extern const char *const syncer_learner_state_names[]; /* syncer_learners.c */

typedef struct learner_rec {
    int64_t id;          /* learner id (-1 = free slot) */
    int64_t incarnation; /* current incarnation (0 = never joined this run) */
    learner_state state;
    int64_t joined_ms;        /* mono ms of the last join */
    int64_t last_seen_ms;     /* mono ms of the last request from it */
    int64_t last_hb_event_ms; /* mono ms of the last heartbeat event */
    int64_t step;             /* inner steps it reported */
    int64_t tokens;           /* tokens it reported */
    double train_loss;        /* nats, last reported */
    double step_ms;           /* ms per inner step, last reported */
    int64_t clock_skew_ms;    /* its realtime minus ours */
    int64_t accepted;         /* contributions/gradients accepted */
    int64_t rejected;         /* contributions/gradients rejected */
    int64_t clipped;          /* of those accepted, scaled down to the norm limit (syncer_guard.h) */
    int64_t ddp_arrived;      /* last ddp step it sent a gradient for (-1 none) */
    int64_t ddp_dropped;      /* last ddp step closed without it (-1 none) */
    int64_t batch;            /* sequences per step it reported (its --batch; cfg.batch until then) */
    int64_t steps_total;      /* inner steps it runs (its --steps; cfg.steps until reported) */
    int must_rejoin;          /* 1: restored from a checkpoint older than the log; 409 until it rejoins
                                 and reports what it holds (rebuild) */
    merge_ema step_wall;      /* ms of wall time per inner step, measured between its contributions */
    int64_t c_ms;         /* mono ms of its last contribution naming its step (0: none this incarnation) */
    int64_t c_step;       /* ... its schedule step then (X-Chaosloco-Step + sched_off) */
    int64_t sched_off;    /* its schedule step minus its own step (from the join's schedule_step) */
    int64_t resumed_step; /* the step its current incarnation joined at */
    int64_t start_tokens; /* its token count then (-1: unknown, restored from a checkpoint) */
    double pull_ms;       /* its reported EMA of fragment pull round trips, ms (0: none) */
    int64_t adopted;      /* merged fragments it pulled after contributing to them */
    int64_t adopted_own;  /* ... of which the version contained its contribution */
} learner_rec;

typedef enum round_state { RS_IDLE = 0, RS_COLLECTING, RS_GRACE } round_state;
extern const char *const syncer_round_state_names[]; /* syncer_rounds.c */

typedef struct contrib {
    int slot;             /* learner slot */
    int64_t learner;      /* id */
    int64_t incarnation;  /* its incarnation */
    int64_t base_version; /* version the delta is against */
    int64_t tokens;       /* since it last received the fragment */
    int64_t steps;        /* since it last received the fragment */
    int64_t step;         /* the learner's step at the send (-1 not said) */
    int64_t w_tokens;     /* tokens it weighs in the merge (guard_weight_tokens: the syncer's batch) */
    int64_t w_steps;      /* steps it weighs (guard_weight_steps: at most 2H) */
    double norm;  /* L2 norm of delta as merged (after clipping; of the sum when its learner rejoined) */
    float *delta; /* [fragment_length] decoded outer gradient */
} contrib;

/* Rejections of one reason not yet in an event (the log gets one event per
 * reason per REJECT_EVENT_MS with their count, not one line per request). */
typedef struct reject_agg {
    int64_t window_ms;   /* mono ms the last reject event of this reason was written (0 none) */
    int64_t pending;     /* rejections since, not yet in an event */
    int64_t learner;     /* the first pending one's learner id (-1 unknown) */
    int64_t incarnation; /* ... its incarnation */
    int64_t fragment;    /* ... its fragment (-1 none) */
    char detail[200];    /* ... its detail */
} reject_agg;

typedef struct frag_round {
    round_state state;
    guard_norms norms;       /* accepted contributions' norms (syncer_guard.h) */
    contrib c[MAX_LEARNERS]; /* held contributions, [0, n) */
    int n;                   /* contributions held */
    int64_t opened_ms;       /* mono ms of the first contribution */
    int64_t quorum_ms;       /* mono ms the quorum was reached */
    int64_t grace_end_ms;    /* mono ms the grace window ends */
    double grace_ms;         /* ms of the grace window granted */
    merge_ema t_quorum;      /* ms from the first to the K-th arrival of a round */
    merge_ema t_sync;        /* ms of a merge (sub-ms resolution) */
    int64_t id;              /* round (numbered by the syncer, round.h) being collected; valid unless IDLE */
    int64_t closed_id;       /* last merged round (-1 none) */
    int lagged;              /* contributions in the open round whose base was behind the version */
    round_map map;           /* merged rounds -> the version each produced */
} frag_round;

/* What syncer_restore() found in the state dir (logged, in the start event). */
typedef enum start_kind {
    START_FRESH = 0, /* no checkpoint, no merge in events.jsonl: a new run (or a wiped dir) */
    START_LOST,      /* no checkpoint, but events.jsonl shows merges: the checkpoints were lost */
    START_CORRUPT,   /* checkpoint slots exist, none is valid */
    START_RESTORED,  /* a valid checkpoint was restored */
} start_kind;
extern const char *const syncer_start_kind_names[]; /* syncer_durability.c */

/* The start-up rebuild (see "syncer: rebuild from the learners"). */
typedef enum rebuild_state { RB_NONE = 0, RB_COLLECTING, RB_WRITING, RB_REFUSED } rebuild_state;
extern const char *const syncer_rebuild_state_names[]; /* syncer_rebuild.c */

/* One fragment's rebuild: the newest copy any learner reported, and the
 * newest one uploaded (staged until the rebuild completes). */
typedef struct rb_frag {
    int64_t
        ckpt_version; /* version syncer_restore() found (0 without checkpoint): reports above it are newer */
    int64_t start_version; /* version after syncer_bump_versions: while unchanged, ckpt_version is the bar */
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

typedef struct merge_note {
    int64_t fragment;               /* -1 for a ddp step */
    int64_t version;                /* version produced */
    int64_t t_mono_ms;              /* when */
    int n;                          /* participants */
    int64_t learners[MAX_LEARNERS]; /* ids */
} merge_note;

struct syncer {
    config cfg;             /* effective config (never changes) */
    char state_dir[1024];   /* checkpoints, events, listen.addr */
    model *eval_model;      /* ticker only: params are a snapshot of theta */
    data_source *data;      /* corpus (eval split) */
    uint8_t *eval_in;       /* [eval_n, C] */
    uint8_t *eval_tg;       /* [eval_n] */
    int eval_n;             /* eval examples */
    double entropy_floor;   /* nats, NAN for a file */
    fragment_table *ft;     /* fragments of the model */
    merge_ws *mws;          /* round_merge's buffers (largest fragment, MAX_LEARNERS); mu */
    size_t n;               /* parameters */
    int P;                  /* fragments */
    events *ev;             /* the event log */
    cx_http_server *http;   /* the API */
    pthread_t ticker;       /* deadlines, absent learners */
    pthread_t worker;       /* eval, checkpoints */
    int ticker_started;     /* 1 once ticker and worker run */
    int64_t start_ms;       /* mono ms at start */
    int64_t ckpt_event_seq; /* event seq the restored checkpoint was taken at (0: none) */

    /* ---- shared state (under mu) ---- */
    pthread_mutex_t mu;
    pthread_cond_t frag_cv, step_cv, tick_cv, work_cv;
    int stopping;                       /* 1: handlers return, ticker exits */
    int ended;                          /* 1 after POST /v1/end: learners are told to finish */
    int64_t end_ms;                     /* mono ms of the first POST /v1/end (0 none) */
    char end_reason[128];               /* its reason ("" none) */
    float *theta;                       /* [n] global parameters */
    float *momentum;                    /* [n] outer Nesterov buffer */
    adamw *opt;                         /* ddp modes: AdamW state of the global params */
    int64_t *versions;                  /* [P] */
    frag_round *rounds;                 /* [P] diloco/decoupled */
    learner_rec learners[MAX_LEARNERS]; /* slots, id -1 = free */
    int64_t merges;                     /* merges (ddp: completed steps) */
    int64_t tokens_merged;              /* tokens of merged contributions (whole-model equivalent) */
    int64_t tokens_frag_raw;            /* sum of the tokens of merged fragment contributions */
    int64_t tokens_trained_closed;  /* tokens trained by incarnations that ended (syncer_tokens_trained) */
    int64_t bytes_in;               /* tensor bytes received */
    int64_t bytes_out;              /* tensor bytes sent */
    int64_t rejects[PROTO_R_COUNT]; /* by reason */
    reject_agg ragg[PROTO_R_COUNT]; /* rejections not yet logged, by reason */
    int64_t accepted_total;         /* accepted contributions/gradients */
    int64_t *own_ver;               /* [MAX_LEARNERS * P] learner's last accepted contribution to p: -1 none
                               pending, 0 not merged yet, > 0 the version that merged it (reset at a pull) */
    int64_t *acc_step;        /* [MAX_LEARNERS * P] step (X-Chaosloco-Step) of the learner's last accepted
                                 contribution to p, any incarnation; -1 none or unknown (join answer) */
    int64_t *acc_inc;         /* [MAX_LEARNERS * P] the incarnation that sent it (0 none) */
    int64_t lost_frag_steps;  /* steps a restarted learner trained and never sent, summed over fragments */
    int64_t lost_frag_tokens; /* ... their tokens */
    int64_t rounds_merged;    /* diloco/decoupled rounds merged */
    int64_t rounds_parts;     /* contributions merged in them */
    int64_t rounds_lagged;    /* contributions accepted whose base was behind the fragment's version */
    int64_t rounds_lag_sum;   /* sum of their lags (versions behind) over every accepted contribution */
    int64_t stale_rejected;   /* contributions refused as stale (base too many rounds behind, or ahead) */
    int64_t merges_refused;   /* merges whose result was not finite or bounded: never applied */
    int holds[HOLD_BUCKETS];  /* requests waiting now, by caller (syncer_holds.c) */
    int64_t holds_early;      /* waits answered at once: their caller was over its share */
    int64_t clipped_total;    /* contributions accepted scaled down to the norm limit (syncer_guard.h) */
    double eval_loss;         /* nats, NAN before the first eval */
    int64_t eval_merges;      /* merges at the last eval */
    int64_t eval_tokens;      /* tokens_merged at the last eval */
    int64_t last_eval_ms;     /* mono ms of the last eval */
    int eval_pending;         /* 1: a merge happened since the last eval */
    int64_t last_ckpt_merges; /* merges at the last checkpoint */
    int64_t last_ckpt_ms;     /* mono ms of the last checkpoint snapshot (0: none yet) */
    int64_t last_merge_ms;    /* mono ms of the last merge */
    int64_t longest_gap_ms;   /* longest gap between two merges */
    merge_note recent[RECENT_MERGES]; /* ring of recent merges */
    int64_t recent_n;                 /* merges noted (ring index = n % RECENT_MERGES) */
    /* ddp */
    int64_t ddp_step;                            /* step being collected */
    float *ddp_sum;                              /* [n] sum of gradients of ddp_step */
    int ddp_count;                               /* gradients in ddp_sum */
    int64_t ddp_first_ms;                        /* mono ms of the first gradient of ddp_step */
    int64_t ddp_done_ms;                         /* mono ms the last step completed (0: none yet) */
    int64_t ddp_compute_ms[DDP_COMPUTE_SAMPLES]; /* ring: completion -> next first gradient */
    int64_t ddp_ncompute;                        /* samples taken (ring index = count % size) */
    float *ddp_mean;                             /* [n] mean gradient of step ddp_mean_step */
    int64_t ddp_mean_step;                       /* step whose mean is in ddp_mean (-1 none) */
    unsigned char *ddp_mean_wire;                /* [4n] ddp_mean as sent */
    uint32_t ddp_mean_crc;                       /* CRC32C of ddp_mean_wire */
    char ddp_seal[SEAL_HEX + 1];                 /* seal of the state after ddp_mean_step ("" none) */
    int64_t ddp_seal_version;                    /* the version it seals */
    /* downstream deltas (diloco/decoupled with an encoding other than f32) */
    frag_hist *hist;                    /* [P] */
    int64_t answers_delta;              /* fragment answers sent as delta chains */
    int64_t answers_delta_versions;     /* deltas in those chains */
    int64_t bytes_out_delta;            /* bytes of those chains */
    int64_t answers_full[FULL_R_COUNT]; /* full f32 answers by reason */
    int64_t bytes_out_full;             /* bytes of full fragment answers */
    /* access (see "syncer: access") */
    cred_store *creds; /* credentials accepted; NULL when insecure */
    seal_key seal;     /* from the admin credential: seals served fragments (unset when insecure) */
    char *tls_cert;    /* PEM read from --tls-cert, or NULL */
    char *tls_key;     /* PEM read from --tls-key, or NULL */
    int insecure;      /* 1: --insecure-no-auth, no credential checks */
    /* rebuild from the learners (see "syncer: rebuild from the learners") */
    int on_lost_state;           /* syncer_lost_state (--on-lost-state) */
    start_kind start;            /* what syncer_restore() found; not under mu (set before serving) */
    rebuild_state rb;            /* under mu */
    int64_t rb_opened_ms;        /* mono ms the collection opened */
    rb_frag *rbf;                /* [P] under mu */
    rb_report *rb_rep;           /* [MAX_LEARNERS * P] under mu: what each slot reported at its last join */
    int rb_joined[MAX_LEARNERS]; /* 1: the slot joined since the collection opened */
    int64_t rb_count;            /* rebuilds done since start */
    int rb_guard; /* 1: pulls by learners not joined since the start are refused (rebuild_stale_pull) */
};

static inline int is_ddp(const syncer *s)
{
    return s->cfg.mode == CONFIG_MODE_DDP || s->cfg.mode == CONFIG_MODE_DDP_ELASTIC;
}
static inline const char *mode_name(const syncer *s)
{
    return config_mode_name(s->cfg.mode);
}

/* A route handler (common/http_server.h): ctx is the syncer; it takes s->mu
 * itself and answers in resp. Each is listed in the route table
 * (syncer_api.c) with its access rule. */
#define SYNCER_HANDLER(name) int name(void *ctx, const cx_http_req *req, cx_http_resp *resp)

/* ---- syncer.c: lifecycle ---- */

/* GET /metrics: the Prometheus text exposition of the counters, gauges and
 * per-learner families. */
SYNCER_HANDLER(h_metrics);

/* ---- syncer_learners.c: membership ---- */

/* Tokens the learners trained this run (mu held): each incarnation from the
 * token count it joined with to the last one it reported, so steps trained
 * again after a restart count again (merge efficiency = tokens_merged / this,
 * docs/api.md). Kept in the checkpoint. */
int64_t syncer_tokens_trained(const syncer *s);
/* Learners that joined and have not left (only_active: and are not absent)
 * (mu held). */
int syncer_count_learners(const syncer *s, int only_active);
/* How many learners a barrier waits for. Strict barriers (ddp, diloco
 * without deadline) wait for all M except those that finished; elastic ones
 * for the learners currently alive (mu held). */
int syncer_barrier_need(const syncer *s);
/* Check learner + incarnation of a request (mu held). Returns PROTO_OK and
 * *slot, or the reject reason. */
proto_reason syncer_check_learner(syncer *s, int64_t id, int64_t inc, int *slot);
/* A request from the learner in slot arrived now: it is seen, and active
 * again if it was absent (mu held). */
void syncer_touch(syncer *s, int slot);
/* The HTTP status a rejection of reason r is answered with. */
int syncer_reason_status(proto_reason r);
/* Flush every reason whose interval is over (mu held; the ticker, and
 * syncer_free with force). */
void reject_flush_due(syncer *s, int64_t now, int force);
/* Count a rejection and log it (mu held): the first of a reason in an
 * interval is written at once, the others are counted into one event when
 * the interval ends, so a flood of bad requests grows events.jsonl and the
 * log by O(1) lines per second. */
void reject_note(syncer *s, proto_reason r, int64_t learner, int64_t inc, int64_t fragment,
                 const char *detail);
/* Count, log and answer a rejection (locked: 1 when the caller holds mu,
 * 0 to take it). */
void reject(syncer *s, cx_http_resp *resp, proto_reason r, int64_t learner, int64_t inc, int64_t fragment,
            const char *detail, int locked);
/* POST /v1/join, /v1/leave, /v1/heartbeat. */
SYNCER_HANDLER(h_join);
SYNCER_HANDLER(h_leave);
SYNCER_HANDLER(h_heartbeat);
/* POST /v1/end: end the run gracefully (learners finish and leave);
 * idempotent. */
SYNCER_HANDLER(h_end);

/* ---- syncer_rounds.c: per-fragment rounds ---- */

/* Record a merge (fragment -1: a ddp step) of version by the learners ids[n]
 * in the recent ring, the merge counters and gap, and wake the worker for
 * eval and checkpoints (mu held). */
void syncer_note_merge(syncer *s, int64_t fragment, int64_t version, const int64_t *ids, int n);
/* Where the stagger schedule is now (mu held): the mean over the active
 * learners other than slot `except` of their last round's schedule step
 * plus the steps run since at their measured pace; 0 without an estimate.
 * A joining learner takes it as its schedule position. */
int64_t syncer_schedule_step_now(const syncer *s, int except, int64_t now);
/* Move round p along its state machine after a contribution arrived or
 * time passed (mu held; the ticker calls it every tick). */
void round_check(syncer *s, int p, int64_t now);
/* POST /v1/fragments/{p}/contributions: a learner's delta joins its round. */
SYNCER_HANDLER(h_contribution);

/* ---- syncer_deltas.c: downstream deltas and fragment reads ---- */

/* Free every kept delta of h (the residual stays). */
void hist_clear(frag_hist *h);
/* Whether downstream_encode does anything for fragment p (and so needs Θ_V). */
int downstream_encodes(const syncer *s, int p);
/* Quantize the update of fragment p (mu held). old = Θ_V, th = the exact
 * Θ_new on entry; on return th = Θ_{V+1} = Θ_V + d^, the canonical value
 * every learner reproduces by the same f32 add. f32 runs and ddp modes:
 * nothing to do. */
void downstream_encode(syncer *s, int p, const float *old, float *th, int64_t version);
/* GET /v1/fragments/{p}: full f32 or a chain of encoded deltas. */
SYNCER_HANDLER(h_fragment_get);
/* GET /v1/versions: every fragment's version; long-polls on request. */
SYNCER_HANDLER(h_versions);

/* ---- syncer_ddp.c: the ddp barrier ---- */

/* The ddp-elastic deadline of a step after its first gradient, ms: the
 * configured one, or the automatic one from recent compute times (mu held). */
int64_t ddp_deadline_ms(const syncer *s);
/* Complete the step being collected if its barrier or deadline says so (mu
 * held; the ticker calls it every tick in ddp modes). */
void ddp_check(syncer *s, int64_t now);
/* POST /v1/steps/{t}/gradients: one learner's gradient of step t; answers
 * the mean once the step completes. */
SYNCER_HANDLER(h_gradient);
/* GET /v1/optimizer: params | AdamW m | v, one snapshot. */
SYNCER_HANDLER(h_optimizer);

/* ---- syncer_rebuild.c: rebuild from the learners ---- */

#define RB_RETRY_MS 500 /* Retry-After hint of the 503 answers, ms */
/* Decode the optional "holds" of a join body into v[P], crc[P], pub[P]
 * and sealed[P] (1: the report of p carries this syncer's seal). 0, or -1
 * with a 400 naming what was wrong in resp. */
int rb_parse_holds(syncer *s, json_t *holds, int64_t *v, uint32_t *crc, int64_t *pub, int *sealed,
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
/* POST /v1/fragments/{p}/state: a learner's copy of global fragment p. */
SYNCER_HANDLER(h_fragment_state);

/* ---- syncer_durability.c: eval, checkpoints, restore ---- */

/* Eval the global model on a snapshot of theta (takes mu for the snapshot
 * and the result only) and emit an eval event. */
void syncer_run_eval(syncer *s);
/* Write a checkpoint: snapshot under mu (taken here), write outside it.
 * 0, or a negative cx_err with err. */
int syncer_write_checkpoint(syncer *s, char *err, size_t errlen);
/* Restore the newest valid checkpoint of the state dir, before serving:
 * 1 restored, 0 none (s->start says why), negative cx_err with err. */
int syncer_restore(syncer *s, char *err, size_t errlen);
/* Versions never go backwards: restart above the merges logged after the
 * checkpoint (start-up, before serving). */
void syncer_bump_versions(syncer *s);
/* Log what the state dir held and remember the start versions (the
 * rebuild's bar); before_bump: sum of the versions before the bump. */
void syncer_start_log(syncer *s, int64_t before_bump);

/* ---- syncer_api.c: HTTP helpers, routes, access ---- */

/* A header of the request ctx (a cx_http_req), for protocol.h's parsers. */
const char *syncer_req_header(const void *ctx, const char *name);
/* Parse a path segment as 0..max. 0, or CX_EINVAL. */
int syncer_path_int(const char *s, int64_t max, int64_t *out);
/* [{id, offset, length, version}] of every fragment (mu held; new ref). */
json_t *syncer_fragments_json(syncer *s);
/* 0 when lo <= v <= hi, else -1 and a 400 naming the call and the field. */
int syncer_check_field(cx_http_resp *resp, const char *call, const char *field, int64_t v, int64_t lo,
                       int64_t hi);
/* The same for a real: finite and lo <= v <= hi. */
int syncer_check_real(cx_http_resp *resp, const char *call, const char *field, double v, double lo,
                      double hi);
/* In a handler of a learner route: the id the body names must be the
 * credential's. 1 when it may go on; 0 when it was refused (403). */
int syncer_learner_is_caller(syncer *s, const cx_http_req *req, cx_http_resp *resp, int64_t id,
                             const char *call);
/* The learner id whose credential a request carries (with
 * --insecure-no-auth: the id its X-Chaosloco-Learner header names), or -1. */
int64_t syncer_caller_learner(const syncer *s, const cx_http_req *req);

/* ---- held requests: a fair share (syncer_holds.c) ----
 * A handler that waits (a long poll, a ddp barrier) first takes a hold:
 * each learner, by its credential, holds at most HOLD_PER_LEARNER waits at
 * once, callers without a learner credential HOLD_ANON together. A request
 * over its caller's share does not wait: it is answered at once with what
 * is there (as if its wait had ended), and counted. Waits occupy the
 * server's request slots (common/http_guard.h: active_max), so without the
 * share one learner holding hundreds of long polls would get every other
 * learner's calls refused 503. Both calls with mu held. */
/* The caller's bucket, holding one wait; -1: over its share, do not wait. */
int syncer_hold_take(syncer *s, const cx_http_req *req);
/* Give back the wait of bucket b (b < 0: a no-op). */
void syncer_hold_drop(syncer *s, int b);

/* Serve the routes on o->listen (HTTPS with o->tls_cert and o->tls_key)
 * behind the access gate: 0 with s->http set, or a negative cx_err with
 * err (the caller frees s). Start-up only. */
int syncer_api_listen(syncer *s, const syncer_opts *o, char *err, size_t errlen);

#endif
