/* syncer.c - the synchronizer: global state, HTTP API, merges (syncer.h).
 *
 * ---- NOTES ON THE DESIGN OF THE SYNCER ----
 *
 * One mutex (s->mu) guards everything below the "shared state" line of
 * struct syncer. Handlers block on condition variables with bounded waits:
 *   s->frag_cv  broadcast when any fragment version changes (long polls,
 *               diloco/decoupled learners waiting for the merged fragment);
 *   s->step_cv  broadcast when a ddp step completes;
 *   s->tick_cv  wakes the ticker early (a round reached its quorum, ...).
 * The ticker thread closes deadlines (ddp-elastic steps, diloco elastic
 * rounds, decoupled grace windows), marks silent learners absent, and runs
 * eval and checkpoints on snapshots taken under the lock and used outside it.
 *
 * The per-fragment round (diloco and decoupled), slot-aligned (round.h):
 * round r of fragment p is the r-th time the stagger schedule makes p due;
 * a contribution names it (X-Chaosloco-Round) and joins that round.
 *
 *        h_contribution(): first accepted contribution,
 *        id = round_join_id() > closed_id
 *   IDLE ──────────────────────────────────────────► COLLECTING
 *    │ │ a late one opens it (decoupled)                 ▲  │   │
 *    │ └──────────────────────────► HELD ───────────────┘  │   │
 *    │     an on-time contribution joins (h_contribution),   │   │
 *    │     or hold_until_ms passed (round_check)             │   │
 *    ▲                                                 │   │
 *    │   round_merge(): merge, outer Nesterov,         │   │ n >= need (round_check):
 *    │   version++, map id -> version, closed_id = id, │   │ decoupled: grace computed
 *    │   wake long-polls                               │   ▼ (round_grace_ms)
 *    ├─────────────────── n >= need, no grace ─────────┘  GRACE
 *    │                    or elastic deadline (ticker)     │
 *    └──────────── grace over, or every live learner ──────┘
 *                  contributed (round_check / ticker: round_close_due)
 *
 *   IDLE        no contribution held; opened_ms = 0; the next round to open
 *               gets an id above closed_id.
 *   HELD        decoupled only: opened by a late contribution; n >= 1, no
 *               quorum counted until an on-time contribution joins or
 *               hold_until_ms (one period, H·t_step, at most grace_cap_ms)
 *               passes; id > closed_id.
 *   COLLECTING  1 <= n < need contributions held (need: diloco = every
 *               expected learner, decoupled = quorum K); id > closed_id.
 *   GRACE       n >= K; grace_end_ms set; contributions still accepted;
 *               id > closed_id.
 * The late rule: a contribution naming a round that already closed (or that
 * the open round has passed) is folded into the open round, or opens the
 * next one HELD for the on-time contributions of that round (so a learner
 * that runs behind merges with the others instead of alone), with its own
 * base (counted in rounds.late); it is refused only
 * when its base is more than max_staleness rounds of p behind (each merged
 * round is one version, so that is versions[p] - base). The 202 answer says
 * the round joined and the version its merge will produce
 * (versions[p] + 1: one round of p is open at a time).
 * A contribution from a learner already in the round replaces its previous
 * one (its newer delta includes the older progress: the learner has not
 * received the fragment in between). At merge, contributions of learners
 * marked absent get no weight (they are dropped); if none is left the round
 * stays open.
 *
 * Downstream deltas (diloco/decoupled, encoding != f32): each merge of
 * fragment p quantizes its update with error feedback (downstream_encode):
 * d' = Θ_new − Θ_V + r_p, d^ = decode(encode(d')), r_p = d' − d^, and the
 * canonical Θ_{V+1} = Θ_V + d^ (the f32 add learners repeat bit for bit).
 * The encoded d^ of the last DELTA_HISTORY versions are kept; a learner
 * holding V gets the chain V+1..current (delta_chain) or, when it is not
 * kept or not smaller, the full f32 fragment. Residuals and history live in
 * memory; theta (canonical) is what is checkpointed.
 *
 * ddp steps: step t collects one gradient per learner; it completes when
 * every expected learner has sent one (ddp: all M; ddp-elastic: every live
 * learner, or at the deadline after the first arrival with whoever came:
 * elastic_deadline_ms, or when that is 0 twice the median of the recent
 * compute times, each the gap between a step's completion and the first
 * gradient of the next — so the deadline follows the machine's speed and
 * a dead learner's missed steps do not inflate it). Completion averages, applies AdamW to the global
 * parameters (the source of truth for eval and rejoin) and wakes the waiting handlers, which answer the mean;
 * each learner applies the same AdamW step.
 */
#include "trainer/syncer.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/err.h"
#include "common/file.h"
#include "common/http_server.h"
#include "common/json.h"
#include "common/log.h"
#include "common/parse.h"
#include "trainer/checkpoint.h"
#include "trainer/credential.h"
#include "trainer/data.h"
#include "trainer/encoding.h"
#include "trainer/events.h"
#include "trainer/fragment.h"
#include "trainer/merge.h"
#include "trainer/model.h"
#include "trainer/optim.h"
#include "trainer/protocol.h"
#include "trainer/round.h"

#define MAX_LEARNERS CONFIG_LEARNERS_MAX
#define RECENT_MERGES 16
#define BARRIER_WAIT_MS 5000   /* a ddp handler answers 503 "retry" after this */
#define LONG_POLL_MAX_MS 30000 /* cap on ?wait-ms */
#define TICK_MS 20
#define DDP_COMPUTE_SAMPLES 32    /* auto deadline: recent compute times kept */
#define DDP_AUTO_MIN_SAMPLES 4    /* ... taken before they decide */
#define DDP_AUTO_INITIAL_MS 1000  /* ... deadline until then */
#define DDP_AUTO_FLOOR_MS 20      /* ... never below */
#define DELTA_HISTORY 8           /* encoded downstream deltas kept per fragment */
#define DELTA_HISTORY_F32X 2      /* ... and at most this many f32 fragments' worth of bytes */
#define INCARNATION_MAX_STEP 1000 /* a join may name an incarnation at most this far above the current */
#define T_REAL_MAX_MS 253402300799999LL /* 9999-12-31T23:59:59.999Z: bound of heartbeat t_real_ms */
#define NORM_SAMPLES 32                 /* accepted contribution norms kept per fragment (running median) */
#define NORM_WARMUP 4                   /* accepted contributions before the norm bound applies */
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
static const char *const full_reason_names[FULL_R_COUNT] = {"pull", "history", "mismatch", "size", "f32"};

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
static const char *const learner_state_names[] = {"active", "absent", "left"};

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
    int64_t ddp_arrived;      /* last ddp step it sent a gradient for (-1 none) */
    int64_t ddp_dropped;      /* last ddp step closed without it (-1 none) */
    int64_t batch;            /* sequences per step it reported (its --batch; cfg.batch until then) */
    int64_t steps_total;      /* inner steps it runs (its --steps; cfg.steps until reported) */
    int must_rejoin;          /* 1: restored from a checkpoint older than the log; 409 until it rejoins
                                 and reports what it holds (rebuild) */
    merge_ema step_wall;      /* ms of wall time per inner step, measured between its contributions */
    int64_t c_ms;             /* mono ms of its last contribution naming a round (0: none this incarnation) */
    int64_t c_step;           /* ... the schedule step of that round (fragment_round_step) */
    double pull_ms;           /* its reported EMA of fragment pull round trips, ms (0: none) */
    int64_t adopted;          /* merged fragments it pulled after contributing to them */
    int64_t adopted_own;      /* ... of which the version contained its contribution */
} learner_rec;

typedef enum round_state { RS_IDLE = 0, RS_COLLECTING, RS_GRACE, RS_HELD } round_state;
static const char *const round_state_names[] = {"idle", "collecting", "grace", "held"};

typedef struct contrib {
    int slot;             /* learner slot */
    int64_t learner;      /* id */
    int64_t incarnation;  /* its incarnation */
    int64_t base_version; /* version the delta is against */
    int64_t tokens;       /* since it last received the fragment */
    int64_t steps;        /* since it last received the fragment */
    float *delta;         /* [fragment_length] decoded outer gradient */
} contrib;

/* The norms of the last accepted contributions of one fragment: the
 * running median a new one is bounded by (cfg.norm_bound). */
typedef struct norm_hist {
    double l2[NORM_SAMPLES];     /* L2 norms, ring */
    double maxabs[NORM_SAMPLES]; /* max |x|, ring */
    int64_t n;                   /* accepted so far (ring index = n % NORM_SAMPLES) */
} norm_hist;

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
    norm_hist norms;         /* accepted contributions' norms */
    contrib c[MAX_LEARNERS]; /* held contributions, [0, n) */
    int n;                   /* contributions held */
    int64_t opened_ms;       /* mono ms of the first contribution */
    int64_t quorum_ms;       /* mono ms the quorum was reached */
    int64_t grace_end_ms;    /* mono ms the grace window ends */
    double grace_ms;         /* ms of the grace window granted */
    merge_ema t_quorum;      /* ms from the first to the K-th arrival of a round */
    merge_ema t_sync;        /* ms of a merge (sub-ms resolution) */
    int64_t id;              /* round (slot, round.h) being collected; valid unless IDLE */
    int64_t closed_id;       /* last merged round (-1 none) */
    int late;                /* contributions in the open round that named an earlier round */
    int64_t hold_until_ms;   /* HELD: mono ms until which it waits for an on-time contribution */
    int opened_late;         /* 1: opened by a late contribution (no t_quorum sample) */
    round_map map;           /* merged rounds -> the version each produced */
} frag_round;

/* What restore() found in the state dir (logged, in the start event). */
typedef enum start_kind {
    START_FRESH = 0, /* no checkpoint, no merge in events.jsonl: a new run (or a wiped dir) */
    START_LOST,      /* no checkpoint, but events.jsonl shows merges: the checkpoints were lost */
    START_CORRUPT,   /* checkpoint slots exist, none is valid */
    START_RESTORED,  /* a valid checkpoint was restored */
} start_kind;
static const char *const start_kind_names[] = {"fresh", "lost", "corrupt", "restored"};

/* The start-up rebuild (see "syncer: rebuild from the learners"). */
typedef enum rebuild_state { RB_NONE = 0, RB_COLLECTING, RB_WRITING, RB_REFUSED } rebuild_state;
static const char *const rebuild_state_names[] = {"none", "collecting", "writing", "refused"};

/* One fragment's rebuild: the newest copy any learner reported, and the
 * newest one uploaded (staged until the rebuild completes). */
typedef struct rb_frag {
    int64_t ckpt_version;  /* version restore() found (0 without checkpoint): reports above it are newer */
    int64_t start_version; /* version after bump_versions: while unchanged, ckpt_version is the bar */
    int64_t max_reported;  /* highest version any learner reported (published at some point) */
    int64_t want_version;  /* newest reported copy above the bar (0 none) */
    int64_t want_learner;  /* who reported it */
    uint32_t want_crc;     /* its CRC32C */
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
    int64_t bytes_in;                   /* tensor bytes received */
    int64_t bytes_out;                  /* tensor bytes sent */
    int64_t rejects[PROTO_R_COUNT];     /* by reason */
    reject_agg ragg[PROTO_R_COUNT];     /* rejections not yet logged, by reason */
    int64_t *pull_step;                 /* [MAX_LEARNERS * P] learner's reported step at its last pull of p */
    int64_t accepted_total;             /* accepted contributions/gradients */
    int64_t *own_ver;       /* [MAX_LEARNERS * P] learner's last accepted contribution to p: -1 none
                               pending, 0 not merged yet, > 0 the version that merged it (reset at a pull) */
    int64_t rounds_merged;  /* diloco/decoupled rounds merged */
    int64_t rounds_parts;   /* contributions merged in them */
    int64_t rounds_late;    /* contributions that named a closed round (folded into the next) */
    int64_t stale_rejected; /* contributions refused as stale (base too many rounds behind, or ahead) */
    double eval_loss;                   /* nats, NAN before the first eval */
    int64_t eval_merges;                /* merges at the last eval */
    int64_t eval_tokens;                /* tokens_merged at the last eval */
    int64_t last_eval_ms;               /* mono ms of the last eval */
    int eval_pending;                   /* 1: a merge happened since the last eval */
    int64_t last_ckpt_merges;           /* merges at the last checkpoint */
    int64_t last_ckpt_ms;               /* mono ms of the last checkpoint snapshot (0: none yet) */
    int64_t last_merge_ms;              /* mono ms of the last merge */
    int64_t longest_gap_ms;             /* longest gap between two merges */
    merge_note recent[RECENT_MERGES];   /* ring of recent merges */
    int64_t recent_n;                   /* merges noted (ring index = n % RECENT_MERGES) */
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
    /* downstream deltas (diloco/decoupled with an encoding other than f32) */
    frag_hist *hist;                    /* [P] */
    int64_t answers_delta;              /* fragment answers sent as delta chains */
    int64_t answers_delta_versions;     /* deltas in those chains */
    int64_t bytes_out_delta;            /* bytes of those chains */
    int64_t answers_full[FULL_R_COUNT]; /* full f32 answers by reason */
    int64_t bytes_out_full;             /* bytes of full fragment answers */
    /* access (see "syncer: access") */
    cred_store *creds; /* credentials accepted; NULL when insecure */
    char *tls_cert;    /* PEM read from --tls-cert, or NULL */
    char *tls_key;     /* PEM read from --tls-key, or NULL */
    int insecure;      /* 1: --insecure-no-auth, no credential checks */
    /* rebuild from the learners (see "syncer: rebuild from the learners") */
    int on_lost_state;           /* syncer_lost_state (--on-lost-state) */
    start_kind start;            /* what restore() found; not under mu (set before serving) */
    rebuild_state rb;            /* under mu */
    int64_t rb_opened_ms;        /* mono ms the collection opened */
    rb_frag *rbf;                /* [P] under mu */
    rb_report *rb_rep;           /* [MAX_LEARNERS * P] under mu: what each slot reported at its last join */
    int rb_joined[MAX_LEARNERS]; /* 1: the slot joined since the collection opened */
    int64_t rb_count;            /* rebuilds done since start */
    int rb_guard; /* 1: pulls by learners not joined since the start are refused (rebuild_stale_pull) */
};

static int is_ddp(const syncer *s)
{
    return s->cfg.mode == CONFIG_MODE_DDP || s->cfg.mode == CONFIG_MODE_DDP_ELASTIC;
}
static const char *mode_name(const syncer *s)
{
    return config_mode_name(s->cfg.mode);
}

/* ---- syncer: learners ---- */

static int find_slot(syncer *s, int64_t id)
{
    for (int i = 0; i < MAX_LEARNERS; i++)
        if (s->learners[i].id == id)
            return i;
    return -1;
}

static int count_learners(const syncer *s, int only_active)
{
    int n = 0;
    for (int i = 0; i < MAX_LEARNERS; i++) {
        const learner_rec *l = &s->learners[i];
        if (l->id < 0 || l->incarnation == 0)
            continue;
        if (only_active ? l->state == LS_ACTIVE : l->state != LS_LEFT)
            n++;
    }
    return n;
}

/* How many learners a barrier waits for. Strict barriers (ddp, diloco
 * without deadline) wait for all M except those that finished; elastic ones
 * for the learners currently alive. */
static int barrier_need(const syncer *s)
{
    int elastic = s->cfg.mode == CONFIG_MODE_DDP_ELASTIC ||
                  (s->cfg.mode == CONFIG_MODE_DILOCO && s->cfg.elastic_deadline_ms > 0);
    if (elastic) {
        int a = count_learners(s, 1);
        return a > 0 ? a : 1;
    }
    int left = 0;
    for (int i = 0; i < MAX_LEARNERS; i++)
        if (s->learners[i].id >= 0 && s->learners[i].incarnation > 0 && s->learners[i].state == LS_LEFT)
            left++;
    int need = (int)s->cfg.learners - left;
    return need > 0 ? need : 1;
}

/* Check learner + incarnation of a request. Returns PROTO_OK and *slot, or
 * the reject reason. */
static proto_reason check_learner(syncer *s, int64_t id, int64_t inc, int *slot)
{
    int i = find_slot(s, id);
    if (i < 0 || s->learners[i].incarnation == 0)
        return PROTO_R_UNKNOWN_LEARNER;
    if (inc != s->learners[i].incarnation || s->learners[i].must_rejoin)
        return PROTO_R_STALE_INCARNATION;
    *slot = i;
    return PROTO_OK;
}

static void touch(syncer *s, int slot)
{
    learner_rec *l = &s->learners[slot];
    l->last_seen_ms = cx_mono_ms();
    if (l->state == LS_ABSENT)
        l->state = LS_ACTIVE;
}

static int reason_status(proto_reason r)
{
    switch (r) {
    case PROTO_R_UNKNOWN_LEARNER:
        return 403;
    case PROTO_R_STALE_INCARNATION:
    case PROTO_R_STALE_VERSION:
        return 409;
    case PROTO_R_HALTED:
        return 503;
    default:
        return 400;
    }
}

/* Write the reject event of reason r for its pending rejections (mu held). */
static void reject_flush(syncer *s, proto_reason r, int64_t now)
{
    reject_agg *a = &s->ragg[r];
    if (a->pending == 0)
        return;
    events_emit(s->ev, "reject",
                json_pack("{s:I, s:I, s:I, s:s, s:s, s:I}", "learner", (json_int_t)a->learner, "incarnation",
                          (json_int_t)a->incarnation, "fragment", (json_int_t)a->fragment, "reason",
                          proto_reason_name(r), "detail", a->detail, "count", (json_int_t)a->pending));
    cx_warn("reject learner=%lld incarnation=%lld fragment=%lld reason=%s count=%lld: %s",
            (long long)a->learner, (long long)a->incarnation, (long long)a->fragment, proto_reason_name(r),
            (long long)a->pending, a->detail);
    a->pending = 0;
    a->window_ms = now;
}

/* Flush every reason whose interval is over (mu held; the ticker, and
 * syncer_free with force). */
static void reject_flush_due(syncer *s, int64_t now, int force)
{
    for (int r = 1; r < PROTO_R_COUNT; r++)
        if (s->ragg[r].pending > 0 && (force || now - s->ragg[r].window_ms >= REJECT_EVENT_MS))
            reject_flush(s, (proto_reason)r, now);
}

/* Count a rejection and log it (mu held): the first of a reason in an
 * interval is written at once, the others are counted into one event when
 * the interval ends, so a flood of bad requests grows events.jsonl and the
 * log by O(1) lines per second. */
static void reject_note(syncer *s, proto_reason r, int64_t learner, int64_t inc, int64_t fragment,
                        const char *detail)
{
    int64_t now = cx_mono_ms();
    reject_agg *a = &s->ragg[r];
    s->rejects[r]++;
    int slot = learner >= 0 ? find_slot(s, learner) : -1;
    if (slot >= 0)
        s->learners[slot].rejected++;
    if (a->pending++ == 0) {
        a->learner = learner;
        a->incarnation = inc;
        a->fragment = fragment;
        snprintf(a->detail, sizeof a->detail, "%s", detail);
    }
    if (a->window_ms == 0 || now - a->window_ms >= REJECT_EVENT_MS)
        reject_flush(s, r, now);
}

/* Count, log and answer a rejection (called with mu held or not: takes it). */
static void reject(syncer *s, cx_http_resp *resp, proto_reason r, int64_t learner, int64_t inc,
                   int64_t fragment, const char *detail, int locked)
{
    if (!locked)
        pthread_mutex_lock(&s->mu);
    reject_note(s, r, learner, inc, fragment, detail);
    json_t *body = json_pack("{s:s, s:i, s:s}", "error", detail, "status", reason_status(r), "reason",
                             proto_reason_name(r));
    /* tell the learner where the syncer is */
    if ((r == PROTO_R_STALE_VERSION || r == PROTO_R_STALE_INCARNATION) && fragment >= 0 && fragment < s->P)
        json_object_set_new(body, "version", json_integer(s->versions[fragment]));
    if (!locked)
        pthread_mutex_unlock(&s->mu);
    cx_http_reply_json(resp, reason_status(r), body);
}

/* ---- syncer: merge bookkeeping shared by every mode ---- */

static void note_merge(syncer *s, int64_t fragment, int64_t version, const int64_t *ids, int n)
{
    merge_note *m = &s->recent[s->recent_n % RECENT_MERGES];
    int64_t now = cx_mono_ms();
    m->fragment = fragment;
    m->version = version;
    m->t_mono_ms = now;
    m->n = n;
    for (int i = 0; i < n && i < MAX_LEARNERS; i++)
        m->learners[i] = ids[i];
    s->recent_n++;
    if (s->last_merge_ms > 0 && now - s->last_merge_ms > s->longest_gap_ms)
        s->longest_gap_ms = now - s->last_merge_ms;
    s->last_merge_ms = now;
    s->merges++;
    s->eval_pending = 1;
    pthread_cond_broadcast(&s->work_cv);
}

/* ---- syncer: per-fragment rounds (diloco, decoupled) ---- */

#ifndef NDEBUG
static void assert_round_state(const syncer *s, const frag_round *r)
{
    switch (r->state) {
    case RS_IDLE:
        assert(r->n == 0);
        break;
    case RS_COLLECTING:
        assert(r->n >= 1 && r->opened_ms > 0 && r->id > r->closed_id);
        break;
    case RS_GRACE:
        assert(r->n >= 1 && s->cfg.mode == CONFIG_MODE_DECOUPLED && r->grace_end_ms > 0 &&
               r->id > r->closed_id);
        break;
    case RS_HELD:
        assert(r->n >= 1 && s->cfg.mode == CONFIG_MODE_DECOUPLED && r->hold_until_ms > 0 &&
               r->id > r->closed_id && r->opened_late);
        break;
    }
}
#else
#define assert_round_state(s, r) ((void)0)
#endif

/* The grace window of round p reaching its quorum now (mu held):
 * clamp(γ·(τ·t_step − (t_quorum + t_sync)), 0, cap) with, all EMAs,
 *   t_step   the active learners' mean wall time per inner step, measured
 *            here between each learner's contributions (schedule steps
 *            between two rounds it named / ms between their arrivals);
 *            their heartbeat step_ms until there is a sample;
 *   t_quorum ms from the first to the K-th arrival of p's rounds;
 *   t_sync   ms of p's merges plus the active learners' mean reported pull
 *            round trip (what it takes the merged value to reach them).
 * τ·t_step is the time between a learner sending p and needing its merged
 * value (τ steps of overlap); γ < 1 takes only part of what is left. */
static void learner_timings(const syncer *s, double *t_step, double *t_pull)
{
    double step = 0, pull = 0;
    int ns = 0, np = 0;
    for (int i = 0; i < MAX_LEARNERS; i++) {
        const learner_rec *l = &s->learners[i];
        if (l->id < 0 || l->state != LS_ACTIVE)
            continue;
        double t = merge_ema_get(&l->step_wall, l->step_ms);
        if (t > 0) {
            step += t;
            ns++;
        }
        if (l->pull_ms > 0) {
            pull += l->pull_ms;
            np++;
        }
    }
    *t_step = ns ? step / ns : 0;
    *t_pull = np ? pull / np : 0;
}

static double round_grace_ms(const syncer *s, int p)
{
    const frag_round *r = &s->rounds[p];
    double t_step, t_pull;
    learner_timings(s, &t_step, &t_pull);
    return merge_grace_ms(s->cfg.grace_gamma, (int)s->cfg.tau, t_step, merge_ema_get(&r->t_quorum, 0),
                          merge_ema_get(&r->t_sync, 0) + t_pull, (double)s->cfg.grace_cap_ms);
}

/* How long a round opened by a late contribution waits for the on-time
 * ones of its slot (mu held): one period of the schedule, H·t_step, at most
 * grace_cap_ms; 0 (no wait) before any step time is known. The late
 * learner waits that long for its merged value at most, and loses what it
 * trains on the fragment meanwhile (its copy is overwritten at adoption);
 * nobody else waits. One schedule slot (H/P·t_step) lost fewer tokens but
 * gathered fewer learners (4 learners, small GPT under ASan: 1.6-1.8
 * contributions per round instead of 2.4-2.6; docs/training.md). */
static int64_t round_hold_ms(const syncer *s)
{
    double t_step, t_pull;
    learner_timings(s, &t_step, &t_pull);
    double h = (double)s->cfg.H * t_step;
    if (!(h > 0))
        return 0;
    return (int64_t)ceil(h < (double)s->cfg.grace_cap_ms ? h : (double)s->cfg.grace_cap_ms);
}

/* Where the stagger schedule is now (mu held): the mean over the active
 * learners other than slot `except` that named a round since they joined
 * of their schedule step then plus the steps they have run since at their
 * measured pace; 0 when no learner gives an estimate. A joining learner
 * takes it as its schedule position, so that its round r of fragment p
 * comes due when everyone else's does (a learner that started or
 * restarted later would otherwise be late for every round of the run). */
static int64_t schedule_step_now(const syncer *s, int except, int64_t now)
{
    double sum = 0;
    int n = 0;
    for (int i = 0; i < MAX_LEARNERS; i++) {
        const learner_rec *l = &s->learners[i];
        double t = merge_ema_get(&l->step_wall, 0);
        if (i == except || l->id < 0 || l->state != LS_ACTIVE || l->c_ms == 0 || !(t > 0))
            continue;
        /* a live learner names a round at least every H steps: extrapolate no further */
        double ahead = (double)(now - l->c_ms) / t;
        sum += (double)l->c_step + (ahead < (double)s->cfg.H ? ahead : (double)s->cfg.H);
        n++;
    }
    return n ? (int64_t)llround(sum / n) : 0;
}

/* ---- syncer: downstream deltas with error feedback ---- */

static void hist_drop_oldest(frag_hist *h)
{
    if (h->n == 0)
        return;
    h->bytes -= h->d[0].len;
    free(h->d[0].bytes);
    memmove(&h->d[0], &h->d[1], (size_t)(h->n - 1) * sizeof h->d[0]);
    h->n--;
}

static void hist_clear(frag_hist *h)
{
    while (h->n > 0)
        hist_drop_oldest(h);
}

/* Whether downstream_encode does anything for fragment p (and so needs Θ_V). */
static int downstream_encodes(const syncer *s, int p)
{
    return (encoding_kind)s->cfg.encoding != ENCODING_F32 && s->hist[p].resid;
}

/* Quantize the update of fragment p (mu held). old = Θ_V, th = the exact
 * Θ_new on entry; on return th = Θ_{V+1} = Θ_V + d^, the canonical value
 * every learner reproduces by the same f32 add, where d^ = decode(encode(
 * Θ_new − Θ_V + r)) and the residual r keeps what the encoding lost. The
 * encoded d^ is kept (DELTA_HISTORY deltas, at most DELTA_HISTORY_F32X f32
 * fragments of bytes). f32 runs and ddp modes: nothing to do. */
static void downstream_encode(syncer *s, int p, const float *old, float *th, int64_t version)
{
    frag_hist *h = &s->hist[p];
    encoding_kind enc = (encoding_kind)s->cfg.encoding;
    if (!downstream_encodes(s, p))
        return;
    size_t len = fragment_length(s->ft, p), bytes = encoding_size(enc, len);
    float *d = malloc(len * sizeof *d), *dh = malloc(len * sizeof *dh);
    uint8_t *wire = malloc(bytes);
    char why[CX_ERRLEN];
    int ok = d && dh && wire;
    if (ok) {
        for (size_t i = 0; i < len; i++)
            d[i] = (th[i] - old[i]) + h->resid[i];
        ok = encoding_encode(enc, d, len, wire, bytes, why, sizeof why) == 0 &&
             encoding_decode(enc, wire, bytes, dh, len, why, sizeof why) == 0;
        if (!ok)
            cx_warn("fragment %d version %lld: update not encodable (%s); sending it in f32", p,
                    (long long)version, why);
    } else {
        cx_warn("fragment %d version %lld: out of memory encoding the update; sending it in f32", p,
                (long long)version);
    }
    if (!ok) {
        /* th stays exact; learners take the full fragment (reason history) */
        hist_clear(h);
        memset(h->resid, 0, len * sizeof *h->resid);
        free(d), free(dh), free(wire);
        return;
    }
    for (size_t i = 0; i < len; i++) {
        h->resid[i] = d[i] - dh[i];
        th[i] = old[i] + dh[i];
    }
    free(d), free(dh);
    if (h->n > 0 && h->d[h->n - 1].version != version - 1)
        hist_clear(h); /* never a gap in the chain */
    if (h->n == DELTA_HISTORY)
        hist_drop_oldest(h);
    while (h->n > 0 && h->bytes + bytes > (size_t)DELTA_HISTORY_F32X * len * 4)
        hist_drop_oldest(h);
    h->d[h->n++] = (delta_rec){version, wire, bytes};
    h->bytes += bytes;
}

/* Merge what round p holds (mu held). Contributions of absent learners get
 * no weight; returns 0 when merged, 1 when nothing was mergeable (round stays
 * open). */
static int round_merge(syncer *s, int p, const char *why)
{
    frag_round *r = &s->rounds[p];
    size_t len = fragment_length(s->ft, p);
    merge_contrib mc[MAX_LEARNERS];
    int idx[MAX_LEARNERS];
    double w[MAX_LEARNERS];
    int k = 0;
    int64_t t0 = cx_mono_ns();
    char err[CX_ERRLEN];

    for (int i = 0; i < r->n; i++) {
        learner_rec *l = &s->learners[r->c[i].slot];
        if (l->state == LS_ABSENT || l->incarnation != r->c[i].incarnation)
            continue;
        mc[k].delta = r->c[i].delta;
        mc[k].tokens = (uint64_t)r->c[i].tokens;
        mc[k].steps = (uint64_t)r->c[i].steps;
        idx[k++] = i;
    }
    if (k == 0)
        return 1;
    merge_rule rule = MERGE_RULE_MEAN;
    merge_weighting weighting = MERGE_WEIGHTS_UNIFORM;
    if (s->cfg.mode == CONFIG_MODE_DECOUPLED) {
        rule = s->cfg.merge == CONFIG_MERGE_RDA ? MERGE_RULE_RDA : MERGE_RULE_MEAN;
        weighting = s->cfg.weights == CONFIG_WEIGHTS_TOKEN ? MERGE_WEIGHTS_TOKEN : MERGE_WEIGHTS_UNIFORM;
    }
    /* A decoupled round merged from k of the M live learners applies k/M of
     * the merged outer gradient: over one period (every learner sending the
     * fragment once) Θ then moves about as far as in one synchronous round.
     * Without it K=1 applies a full outer Nesterov step M times per period
     * and diverges (docs/internals/syncer.md). */
    double scale = 1.0;
    if (s->cfg.mode == CONFIG_MODE_DECOUPLED) {
        int live = count_learners(s, 1);
        if (live < k)
            live = k;
        scale = (double)k / live;
    }
    /* merge_apply merges, scales and takes the outer step on the fragment's
     * Θ (th) and momentum (mo) in place, allocating nothing. A fragment of
     * one range is contiguous in theta/momentum and updated there; others
     * are gathered into the workspace's buffers and scattered back. Θ_V
     * (old) is copied only when downstream_encode uses it. */
    const fragment_range *fr = fragment_ranges(s->ft, p);
    int direct = fragment_num_ranges(s->ft, p) == 1;
    float *th = direct ? s->theta + fr[0].offset : merge_ws_buf(s->mws, 0);
    float *mo = direct ? s->momentum + fr[0].offset : merge_ws_buf(s->mws, 1);
    float *old = merge_ws_buf(s->mws, 2);
    if (!direct) {
        fragment_gather(s->ft, p, s->theta, th);
        fragment_gather(s->ft, p, s->momentum, mo);
    }
    if (downstream_encodes(s, p))
        memcpy(old, th, len * sizeof *old);
    float lr = (float)s->cfg.outer_lr, mu = (float)s->cfg.outer_momentum;
    double norm = 0.0;
    int rc = merge_apply(s->mws, th, mo, s->ft, p, mc, k, rule, weighting, scale, lr, mu, w, &norm, err,
                         sizeof err);
    if (rc != 0 && weighting == MERGE_WEIGHTS_TOKEN) /* all steps 0: fall back to uniform */
        rc = merge_apply(s->mws, th, mo, s->ft, p, mc, k, rule, MERGE_WEIGHTS_UNIFORM, scale, lr, mu, w,
                         &norm, err, sizeof err);
    if (rc != 0) { /* th/mo untouched on error */
        cx_error("merge fragment=%d failed: %s", p, err);
        return 1;
    }
    downstream_encode(s, p, old, th, s->versions[p] + 1);
    if (!direct) {
        fragment_scatter(s->ft, p, th, s->theta);
        fragment_scatter(s->ft, p, mo, s->momentum);
    }

    int64_t version = ++s->versions[p];
    json_t *parts = json_array();
    int64_t ids[MAX_LEARNERS];
    int64_t tokens = 0;
    for (int j = 0; j < k; j++) {
        contrib *c = &r->c[idx[j]];
        ids[j] = c->learner;
        tokens += c->tokens;
        if (s->own_ver[c->slot * s->P + p] == 0) /* its pending contribution is in this version */
            s->own_ver[c->slot * s->P + p] = version;
        json_array_append_new(parts,
                              json_pack("{s:I, s:I, s:f, s:I, s:I, s:I}", "learner", (json_int_t)c->learner,
                                        "incarnation", (json_int_t)c->incarnation, "weight", w[j], "tokens",
                                        (json_int_t)c->tokens, "steps", (json_int_t)c->steps, "base_version",
                                        (json_int_t)c->base_version));
    }
    /* a contribution's tokens were trained on the whole model; this merge
     * moves 1/P of it, so the run's merged-token count grows by tokens/P */
    if (__builtin_add_overflow(s->tokens_frag_raw, tokens, &s->tokens_frag_raw))
        s->tokens_frag_raw = INT64_MAX; /* unreachable with bounded claims; saturate, never wrap */
    s->tokens_merged = s->tokens_frag_raw / s->P;
    for (int i = 0; i < r->n; i++) {
        learner_rec *l = &s->learners[r->c[i].slot];
        int used = 0;
        for (int j = 0; j < k; j++)
            used |= idx[j] == i;
        if (!used)
            events_emit(s->ev, "drop",
                        json_pack("{s:I, s:I, s:s, s:i}", "learner", (json_int_t)l->id, "incarnation",
                                  (json_int_t)r->c[i].incarnation, "reason", "absent", "fragment", p));
        free(r->c[i].delta);
        r->c[i].delta = NULL;
    }
    /* elastic diloco: expected learners that did not make it */
    if (s->cfg.mode == CONFIG_MODE_DILOCO && strcmp(why, "deadline") == 0) {
        for (int i = 0; i < MAX_LEARNERS; i++) {
            learner_rec *l = &s->learners[i];
            int in = 0;
            if (l->id < 0 || l->incarnation == 0 || l->state == LS_LEFT)
                continue;
            for (int j = 0; j < r->n; j++)
                in |= r->c[j].slot == i;
            if (!in)
                events_emit(s->ev, "drop",
                            json_pack("{s:I, s:I, s:s, s:i}", "learner", (json_int_t)l->id, "incarnation",
                                      (json_int_t)l->incarnation, "reason", "deadline", "fragment", p));
        }
    }
    double sync_ms = (double)(cx_mono_ns() - t0) / 1e6;
    merge_ema_add(&r->t_sync, sync_ms);
    round_map_add(&r->map, r->id, version, k);
    r->closed_id = r->id;
    s->rounds_merged++;
    s->rounds_parts += k;
    events_emit(s->ev, "merge",
                json_pack("{s:i, s:I, s:o, s:f, s:f, s:s, s:s, s:I, s:f, s:I, s:i}", "fragment", p, "version",
                          (json_int_t)version, "participants", parts, "grace_ms", r->grace_ms, "update_norm",
                          norm, "mode", mode_name(s), "trigger", why, "tokens", (json_int_t)tokens, "scale",
                          scale, "round", (json_int_t)r->id, "late", r->late));
    cx_info("merge fragment=%d round=%lld version=%lld participants=%d late=%d trigger=%s grace_ms=%.1f "
            "norm=%.4g",
            p, (long long)r->id, (long long)version, k, r->late, why, r->grace_ms, norm);
    note_merge(s, p, version, ids, k);
    r->n = 0;
    r->late = 0;
    r->hold_until_ms = 0;
    r->opened_late = 0;
    r->state = RS_IDLE;
    r->opened_ms = r->quorum_ms = r->grace_end_ms = 0;
    r->grace_ms = 0;
    assert_round_state(s, r);
    pthread_cond_broadcast(&s->frag_cv);
    return 0;
}

/* Move round p along its state machine after a contribution arrived or
 * time passed (mu held). */
static void round_check(syncer *s, int p, int64_t now)
{
    frag_round *r = &s->rounds[p];
    if (r->state == RS_IDLE)
        return;
    int live = count_learners(s, 1);
    if (s->cfg.mode == CONFIG_MODE_DILOCO) {
        int need = barrier_need(s);
        if (r->n >= need)
            round_merge(s, p, "barrier");
        else if (s->cfg.elastic_deadline_ms > 0 && now - r->opened_ms >= s->cfg.elastic_deadline_ms)
            round_merge(s, p, "deadline");
        return;
    }
    /* decoupled */
    if (r->state == RS_HELD) {
        if (now < r->hold_until_ms)
            return;
        r->state = RS_COLLECTING; /* nobody on time came: merge the late ones */
    }
    if (r->state == RS_COLLECTING && r->n >= s->cfg.quorum) {
        r->quorum_ms = now;
        if (!r->opened_late)
            merge_ema_add(&r->t_quorum, (double)(now - r->opened_ms));
        r->grace_ms = round_grace_ms(s, p);
        r->grace_end_ms = now + (int64_t)ceil(r->grace_ms);
        r->state = RS_GRACE;
    }
    if (r->state == RS_GRACE) {
        round_close why = round_close_due(r->n, (int)s->cfg.quorum, live, now, r->grace_end_ms, r->grace_ms);
        if (why != ROUND_WAIT)
            round_merge(s, p, round_close_name(why));
    }
}

/* ---- syncer: ddp steps ---- */

static void ddp_complete(syncer *s, const char *why)
{
    int64_t t = s->ddp_step;
    int count = s->ddp_count;
    float inv = 1.0f / (float)count;
    for (size_t i = 0; i < s->n; i++)
        s->ddp_mean[i] = s->ddp_sum[i] * inv;
    float lr =
        optim_lr_at(t, s->cfg.warmup, s->cfg.steps, (float)s->cfg.inner_lr, (float)(s->cfg.inner_lr * 0.1));
    adamw_step(s->opt, s->theta, s->ddp_mean, lr);
    proto_f32_encode(s->ddp_mean, s->n, s->ddp_mean_wire);
    s->ddp_mean_crc = cx_crc32c(0, s->ddp_mean_wire, s->n * 4);
    s->ddp_mean_step = t;
    s->ddp_step = t + 1;
    s->ddp_count = 0;
    s->ddp_first_ms = 0;
    s->ddp_done_ms = cx_mono_ms();
    memset(s->ddp_sum, 0, s->n * sizeof *s->ddp_sum);
    for (int p = 0; p < s->P; p++)
        s->versions[p]++;

    json_t *parts = json_array();
    int64_t ids[MAX_LEARNERS];
    int k = 0;
    for (int i = 0; i < MAX_LEARNERS; i++) {
        learner_rec *l = &s->learners[i];
        if (l->id < 0 || l->incarnation == 0)
            continue;
        if (l->ddp_arrived == t) {
            ids[k++] = l->id;
            json_array_append_new(parts,
                                  json_pack("{s:I, s:I, s:f, s:I, s:I}", "learner", (json_int_t)l->id,
                                            "incarnation", (json_int_t)l->incarnation, "weight", 1.0 / count,
                                            "tokens", (json_int_t)s->cfg.batch, "steps", (json_int_t)1));
        } else if (l->state != LS_LEFT) {
            l->ddp_dropped = t;
            events_emit(s->ev, "drop",
                        json_pack("{s:I, s:I, s:s, s:I}", "learner", (json_int_t)l->id, "incarnation",
                                  (json_int_t)l->incarnation, "reason",
                                  l->state == LS_ABSENT ? "absent" : "deadline", "step", (json_int_t)t));
        }
    }
    s->tokens_merged += (int64_t)count * s->cfg.batch;
    /* bytes: the step's gradients in (ddp has no contribution events) */
    events_emit(s->ev, "merge",
                json_pack("{s:i, s:I, s:I, s:o, s:f, s:f, s:s, s:s, s:I}", "fragment", -1, "version",
                          (json_int_t)s->versions[0], "step", (json_int_t)t, "participants", parts,
                          "grace_ms", 0.0, "update_norm", merge_l2norm(s->ddp_mean, s->n), "mode",
                          mode_name(s), "trigger", why, "bytes",
                          (json_int_t)((int64_t)count * (int64_t)s->n * 4)));
    if (t % 50 == 0)
        cx_info("ddp step=%lld participants=%d trigger=%s lr=%.3g", (long long)t, count, why, lr);
    note_merge(s, -1, s->versions[0], ids, k);
    pthread_cond_broadcast(&s->step_cv);
    pthread_cond_broadcast(&s->frag_cv);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* ms a ddp-elastic step waits after its first gradient (see the top). */
static int64_t ddp_deadline_ms(const syncer *s)
{
    if (s->cfg.elastic_deadline_ms > 0)
        return s->cfg.elastic_deadline_ms;
    int n = s->ddp_ncompute < DDP_COMPUTE_SAMPLES ? (int)s->ddp_ncompute : DDP_COMPUTE_SAMPLES;
    if (n < DDP_AUTO_MIN_SAMPLES)
        return DDP_AUTO_INITIAL_MS;
    int64_t v[DDP_COMPUTE_SAMPLES];
    memcpy(v, s->ddp_compute_ms, (size_t)n * sizeof v[0]);
    qsort(v, (size_t)n, sizeof v[0], cmp_i64);
    int64_t d = 2 * v[n / 2];
    return d < DDP_AUTO_FLOOR_MS ? DDP_AUTO_FLOOR_MS : d;
}

static void ddp_check(syncer *s, int64_t now)
{
    if (s->ddp_count == 0)
        return;
    if (s->ddp_count >= barrier_need(s))
        ddp_complete(s, "barrier");
    else if (s->cfg.mode == CONFIG_MODE_DDP_ELASTIC && now - s->ddp_first_ms >= ddp_deadline_ms(s))
        ddp_complete(s, "deadline");
}

/* ---- syncer: HTTP helpers ---- */

static const char *req_header(const void *ctx, const char *name)
{
    return cx_http_header((const cx_http_req *)ctx, name);
}

static int path_int(const char *s, int64_t max, int64_t *out)
{
    char *end;
    if (!s || !*s || *s == '-' || *s == '+')
        return CX_EINVAL;
    long long v = strtoll(s, &end, 10);
    if (*end || v < 0 || v > max)
        return CX_EINVAL;
    *out = v;
    return 0;
}

static json_t *fragments_json(syncer *s)
{
    json_t *a = json_array();
    for (int p = 0; p < s->P; p++) {
        const fragment_range *rg = fragment_ranges(s->ft, p);
        json_array_append_new(
            a, json_pack("{s:i, s:I, s:I, s:I}", "id", p, "offset", (json_int_t)rg[0].offset, "length",
                         (json_int_t)fragment_length(s->ft, p), "version", (json_int_t)s->versions[p]));
    }
    return a;
}

/* 0 when lo <= v <= hi, else a 400 naming the call and the field. */
static int check_field(cx_http_resp *resp, const char *call, const char *field, int64_t v, int64_t lo,
                       int64_t hi)
{
    if (v >= lo && v <= hi)
        return 0;
    cx_http_reply_error(resp, 400, "%s: field '%s' is %lld, expected %lld..%lld", call, field, (long long)v,
                        (long long)lo, (long long)hi);
    return -1;
}

static int check_real(cx_http_resp *resp, const char *call, const char *field, double v, double lo, double hi)
{
    if (isfinite(v) && v >= lo && v <= hi)
        return 0;
    cx_http_reply_error(resp, 400, "%s: field '%s' is %g, expected %g..%g", call, field, v, lo, hi);
    return -1;
}

/* ---- syncer: rebuild from the learners ----
 *
 * A syncer that lost its state dir (or its last minutes) would hand out an
 * older global model than every learner holds. Learners report at join
 * what they hold ("holds": per-fragment version and CRC32C of their copy of
 * the global fragment, exactly as the syncer sent it). A report above what
 * the syncer restored opens a collection:
 *
 *         rebuild_join(): a report above the bar
 *   NONE ───────────────────────────────────────────► COLLECTING
 *    ▲  │ (no valid checkpoint and --on-lost-state       │ h_fragment_state(): uploads staged
 *    │  │  refuse: REFUSED for good, 503 everywhere)     │ rebuild_tick(): every wanted copy in and
 *    │  ▼                                               │ every expected learner joined, or the
 *    │ REFUSED                                          │ window (heartbeat_timeout_ms) is over
 *    │                                                  ▼
 *    └──── rebuild_tick(): checkpoint written, ───── WRITING (staged copies applied,
 *          `rebuild` event, long-polls woken            versions bumped, momentum reset)
 *
 *   NONE        serving normally.
 *   COLLECTING  joins answer 503 with the fragments this learner must
 *               upload; fragment GETs and contributions answer 503
 *               "rebuilding" (retryable); uploads are staged in rbf[].vals.
 *   WRITING     the rebuilt state is in theta; still 503 until the
 *               checkpoint is on disk.
 * A rebuilt fragment continues at max reported + 1 + M * tau (rb_gap).
 * Only versions > 0 count: an untrained learner never seeds the state.
 * The bar of fragment p is the checkpoint's version while p has not
 * changed since the start, then its current version (a learner cannot hold
 * a version the syncer did not publish since).
 * ddp modes use the same machine with a bigger copy: a ddp learner is
 * bit-identical with the syncer after each step it received, so what it
 * holds is the syncer's whole state at the version of that step. Its report
 * names that version for every fragment and the CRC32C of each fragment's
 * params | AdamW m | v; an upload carries those 3 x length values plus the
 * ddp step and AdamW step counter (headers). All fragments must come from
 * one version (one step): rebuild_tick applies a ddp collection only when
 * every fragment is staged at the same version, step and AdamW count, and
 * otherwise opens it again (the live learners, still joining, report
 * afresh). rebuild_apply then also sets the AdamW state and the ddp step;
 * the learners take it with GET /v1/optimizer after their join.
 * This section stays in syncer.c rather than its own file because it works
 * on struct syncer's private state under s->mu like every handler here;
 * moving the struct into a private header would touch all of them. */

#define RB_VERSION_MAX (INT64_MAX / 4) /* bound of a reported version (the bump adds 1) */
#define RB_RETRY_MS 500                /* Retry-After hint of the 503 answers, ms */

static int write_checkpoint(syncer *s, char *err, size_t errlen);

static void assert_rebuild_state(const syncer *s)
{
#ifndef NDEBUG
    assert(s->rb >= RB_NONE && s->rb <= RB_REFUSED);
    assert(s->rb != RB_REFUSED || s->start != START_RESTORED);
    for (int p = 0; p < s->P; p++) {
        const rb_frag *f = &s->rbf[p];
        assert(s->rb == RB_COLLECTING || s->rb == RB_WRITING || (f->want_version == 0 && !f->vals));
        assert(!f->vals == (f->got_version == 0));
    }
#else
    (void)s;
#endif
}

/* Versions a rebuild skips past the newest reported one (rebuild_apply). */
static int64_t rb_gap(const syncer *s)
{
    return s->cfg.learners * (s->cfg.tau > 0 ? s->cfg.tau : 1);
}

/* Floats in a learner's copy of fragment p: the fragment, or in ddp modes
 * the fragment's params, AdamW m and v. */
static size_t rb_state_len(const syncer *s, int p)
{
    return fragment_length(s->ft, p) * (is_ddp(s) ? 3 : 1);
}

static int64_t rb_bar(const syncer *s, int p)
{
    const rb_frag *f = &s->rbf[p];
    return s->versions[p] == f->start_version ? f->ckpt_version : s->versions[p];
}

/* Decode the optional "holds" of a join body into v[P], crc[P]. 0, or -1
 * with a 400 naming what was wrong. */
static int rb_parse_holds(syncer *s, json_t *holds, int64_t *v, uint32_t *crc, int64_t *pub,
                          cx_http_resp *resp)
{
    json_t *jv = NULL, *jc = NULL, *jp = NULL;
    char err[CX_ERRLEN];
    if (cx_json_unpack(holds, "join: field 'holds'", err, sizeof err, "{s:o, s:o, s?o}", "versions", &jv,
                       "crc32c", &jc, "published", &jp) != 0) {
        cx_http_reply_error(resp, 400, "%s", err);
        return -1;
    }
    if (!json_is_array(jv) || !json_is_array(jc) || json_array_size(jv) != (size_t)s->P ||
        json_array_size(jc) != (size_t)s->P) {
        cx_http_reply_error(resp, 400,
                            "join: field 'holds': versions and crc32c must be arrays of %d entries", s->P);
        return -1;
    }
    for (int p = 0; p < s->P; p++) {
        json_t *a = json_array_get(jv, (size_t)p), *b = json_array_get(jc, (size_t)p);
        if (!json_is_integer(a) || json_integer_value(a) < -1 || json_integer_value(a) > RB_VERSION_MAX) {
            cx_http_reply_error(resp, 400, "join: field 'holds.versions[%d]' must be an integer -1..%lld", p,
                                (long long)RB_VERSION_MAX);
            return -1;
        }
        if (!json_is_string(b) || proto_crc_parse(json_string_value(b), &crc[p]) != 0) {
            cx_http_reply_error(resp, 400, "join: field 'holds.crc32c[%d]' must be 1-8 hex digits", p);
            return -1;
        }
        v[p] = json_integer_value(a);
        pub[p] = v[p];
    }
    if (jp && (!json_is_array(jp) || json_array_size(jp) != (size_t)s->P)) {
        cx_http_reply_error(resp, 400, "join: field 'holds.published' must be an array of %d entries", s->P);
        return -1;
    }
    for (int p = 0; jp && p < s->P; p++) {
        json_t *a = json_array_get(jp, (size_t)p);
        if (!json_is_integer(a) || json_integer_value(a) < 0 || json_integer_value(a) > RB_VERSION_MAX) {
            cx_http_reply_error(resp, 400, "join: field 'holds.published[%d]' must be an integer 0..%lld", p,
                                (long long)RB_VERSION_MAX);
            return -1;
        }
        if (json_integer_value(a) > pub[p])
            pub[p] = json_integer_value(a);
    }
    return 0;
}

/* A join of the learner in `slot` that reported v/crc (NULL: no holds)
 * and named `step` (ddp: the step its copy is at) (mu held). Returns
 * RB_NONE to join normally, RB_COLLECTING to answer 503 with the fragments
 * it must upload (upload[*n]), RB_REFUSED to refuse. */
static rebuild_state rebuild_join(syncer *s, int slot, const int64_t *v, const uint32_t *crc,
                                  const int64_t *pub, int64_t step, int *upload, int *n)
{
    int64_t id = s->learners[slot].id;
    *n = 0;
    if (s->rb == RB_REFUSED)
        return RB_REFUSED;
    if (s->rb == RB_WRITING) /* rebuilt, not yet on disk: join again in a moment */
        return RB_COLLECTING;
    if (!v) /* a first join (restarted learner) or an old learner: it holds nothing we can use */
        memset(&s->rb_rep[slot * s->P], 0, (size_t)s->P * sizeof *s->rb_rep);
    for (int p = 0; v && p < s->P; p++) {
        rb_frag *f = &s->rbf[p];
        s->rb_rep[slot * s->P + p] = (rb_report){v[p], crc[p], step};
        if (pub[p] > f->max_reported) /* published (it holds or saw it): a rebuild goes above */
            f->max_reported = pub[p];
        if (v[p] <= 0) /* untrained (or nothing held): never seeds the state */
            continue;
        if (v[p] <= rb_bar(s, p))
            continue;
        if (v[p] == f->want_version && crc[p] != f->want_crc) {
            f->disagree++;
            cx_warn(
                "rebuild: learner %lld holds fragment %d version %lld with CRC32C %08x, learner %lld with "
                "%08x; keeping the first",
                (long long)id, p, (long long)v[p], crc[p], (long long)f->want_learner, f->want_crc);
        }
        if (v[p] > f->want_version) {
            f->want_version = v[p];
            f->want_learner = id;
            f->want_crc = crc[p];
        }
        if (v[p] > f->got_version)
            upload[(*n)++] = p;
    }
    if (*n > 0 && s->rb == RB_NONE) {
        if (s->start != START_RESTORED && s->on_lost_state == SYNCER_LOST_REFUSE) {
            s->rb = RB_REFUSED;
            cx_error(
                "learner %lld holds trained fragments but this syncer started without a valid checkpoint "
                "(%s state dir) and --on-lost-state is refuse: serving nothing; restore %s and restart",
                (long long)id, start_kind_names[s->start], s->state_dir);
            events_emit(s->ev, "lost_state",
                        json_pack("{s:s, s:I, s:s}", "start_state", start_kind_names[s->start], "learner",
                                  (json_int_t)id, "action", "refuse"));
            for (int p = 0; p < s->P; p++)
                s->rbf[p].want_version = 0;
            return RB_REFUSED;
        }
        s->rb = RB_COLLECTING;
        s->rb_opened_ms = cx_mono_ms();
        memset(s->rb_joined, 0, sizeof s->rb_joined);
        cx_warn(
            "learner %lld holds fragments newer than this syncer's state (%s start): rebuilding the global "
            "state from the learners; fragments and contributions answer 503 until done",
            (long long)id, start_kind_names[s->start]);
    }
    if (s->rb == RB_COLLECTING) {
        s->rb_joined[slot] = 1;
        return RB_COLLECTING;
    }
    return RB_NONE;
}

/* 1 (and a 503 in resp) while the global state is not being served (mu
 * held): fragment GETs and contributions retry. */
static int rebuild_gate(syncer *s, cx_http_resp *resp)
{
    if (s->rb == RB_NONE)
        return 0;
    if (s->rb == RB_REFUSED)
        cx_http_reply_error(
            resp, 503,
            "refused: this syncer lost its state (--on-lost-state refuse); restore %s and restart "
            "it",
            s->state_dir);
    else
        cx_http_reply_error(resp, 503, "rebuilding the global state from the learners; retry");
    cx_http_add_header(resp, "Retry-After", "1");
    return 1;
}

/* 1 (and a 403/409 in resp) for a pull by a learner that has not joined
 * since this syncer started, when the start may need a rebuild (mu held):
 * its copy must stay what it is until it reports it. Otherwise a learner
 * long-polling across the restart would take the syncer's initial (or
 * stale restored) fragment at a bumped version and report that as its
 * copy. Pulls without learner headers are served as before. */
static int rebuild_stale_pull(syncer *s, const proto_hdr *h, cx_http_resp *resp)
{
    int slot;
    if (!s->rb_guard || h->learner < 0 || h->incarnation <= 0)
        return 0;
    proto_reason r = check_learner(s, h->learner, h->incarnation, &slot);
    if (r == PROTO_OK)
        return 0;
    cx_http_reply_error(
        resp, reason_status(r),
        "%s: learner %lld incarnation %lld must rejoin (and report what it holds) before it pulls",
        proto_reason_name(r), (long long)h->learner, (long long)h->incarnation);
    return 1;
}

/* 1 when a ddp collection can be applied (mu held): every fragment staged
 * at one version, one step and one AdamW count (one learner state). */
static int rb_ddp_consistent(const syncer *s)
{
    const rb_frag *f0 = &s->rbf[0];
    for (int p = 0; p < s->P; p++) {
        const rb_frag *f = &s->rbf[p];
        if (!f->vals || f->got_version != f0->got_version || f->got_step != f0->got_step ||
            f->got_adam != f0->got_adam)
            return 0;
    }
    return 1;
}

/* The ddp part of rebuild_apply (mu held; rb_ddp_consistent): the AdamW
 * step counter and the ddp step of the staged state; the step being
 * collected and the last mean are dropped (learners resync to this step). */
static void rebuild_apply_ddp(syncer *s)
{
    adamw_set_steps(s->opt, (uint64_t)s->rbf[0].got_adam);
    s->ddp_step = s->rbf[0].got_step;
    memset(s->ddp_sum, 0, s->n * sizeof *s->ddp_sum);
    s->ddp_count = 0;
    s->ddp_first_ms = s->ddp_done_ms = 0;
    s->ddp_mean_step = -1;
    for (int i = 0; i < MAX_LEARNERS; i++)
        s->learners[i].ddp_arrived = s->learners[i].ddp_dropped = -1;
}

/* Apply the staged copies (mu held): theta, versions past everything
 * reported, outer momentum and held contributions of each rebuilt fragment
 * reset; in ddp modes the AdamW moments, step counter and ddp step from the
 * staged copy instead of a momentum reset. Returns the per-fragment
 * sources (new reference). */
static json_t *rebuild_apply(syncer *s)
{
    json_t *src = json_array();
    if (is_ddp(s) && s->rbf[0].vals) /* rb_ddp_ready: all fragments or none */
        rebuild_apply_ddp(s);
    for (int p = 0; p < s->P; p++) {
        rb_frag *f = &s->rbf[p];
        size_t len = fragment_length(s->ft, p);
        int64_t old = s->versions[p];
        if (!f->vals) {
            json_array_append_new(src, json_pack("{s:i, s:s, s:I}", "fragment", p, "from", "syncer",
                                                 "version", (json_int_t)old));
            continue;
        }
        fragment_scatter(s->ft, p, f->vals, s->theta);
        if (is_ddp(s)) {
            fragment_scatter(s->ft, p, f->vals + len, adamw_m(s->opt));
            fragment_scatter(s->ft, p, f->vals + 2 * len, adamw_v(s->opt));
        }
        memset(f->vals, 0, len * sizeof(float));
        fragment_scatter(s->ft, p, f->vals, s->momentum); /* the outer momentum restarts at 0 */
        /* past everything published: a merge no surviving learner saw
         * (the last instant before the crash) took at least one
         * contribution whose sender had not yet seen the result, and a
         * learner has at most tau of those, so at most M * tau versions of
         * p can be published beyond the newest one reported */
        int64_t top = f->max_reported > old ? f->max_reported : old;
        s->versions[p] = top + 1 + rb_gap(s);
        f->ckpt_version = f->start_version = s->versions[p];
        frag_round *rd = &s->rounds[p];
        for (int i = 0; i < rd->n; i++)
            free(rd->c[i].delta);
        rd->n = 0;
        rd->state = RS_IDLE;
        rd->opened_ms = rd->quorum_ms = rd->grace_end_ms = 0;
        if (s->hist) {
            hist_clear(&s->hist[p]);
            if (s->hist[p].resid)
                memset(s->hist[p].resid, 0, len * sizeof(float));
        }
        char crc[9];
        proto_crc_format(f->got_crc, crc);
        json_array_append_new(
            src, json_pack("{s:i, s:s, s:I, s:I, s:s, s:I, s:I, s:I}", "fragment", p, "from", "learner",
                           "learner", (json_int_t)f->got_learner, "held_version", (json_int_t)f->got_version,
                           "crc32c", crc, "previous_version", (json_int_t)old, "version",
                           (json_int_t)s->versions[p], "disagreeing", (json_int_t)f->disagree));
        cx_info("rebuild: fragment %d from learner %lld (its version %lld, crc32c %s): version %lld -> %lld",
                p, (long long)f->got_learner, (long long)f->got_version, crc, (long long)old,
                (long long)s->versions[p]);
    }
    return src;
}

/* Forget what was collected and collect again (mu held): the learners
 * still alive are still joining (503 until the rebuild is done) and
 * report afresh. */
static void rebuild_reopen(syncer *s, const char *why)
{
    cx_warn("rebuild: %s; collecting the learners' reports again", why);
    for (int p = 0; p < s->P; p++) {
        rb_frag *f = &s->rbf[p];
        free(f->vals);
        f->vals = NULL;
        f->want_version = f->got_version = 0;
        f->want_learner = f->got_learner = -1;
        f->disagree = 0;
    }
    s->rb_opened_ms = cx_mono_ms();
    memset(s->rb_joined, 0, sizeof s->rb_joined);
}

/* ddp: 1 when the collection can be applied (mu held): every fragment is
 * staged from one state (rb_ddp_consistent), or nothing is staged nor
 * wanted any more (whoever held a newer state is gone: the syncer keeps
 * its own). A partial or mixed collection is opened again: fragments of
 * two steps are not one model with its AdamW state. */
static int rb_ddp_ready(syncer *s)
{
    int staged = 0, wanted = 0;
    for (int p = 0; p < s->P; p++) {
        staged += s->rbf[p].vals != NULL;
        wanted += s->rbf[p].want_version > 0;
    }
    if ((staged == s->P && rb_ddp_consistent(s)) || (staged == 0 && wanted == 0))
        return 1;
    rebuild_reopen(s, staged == s->P ? "the uploaded copies are of different ddp steps"
                                     : "some fragments of the newest ddp state never came");
    return 0;
}

/* The worker's step of the rebuild (mu held; drops it while the
 * checkpoint is written). */
static void rebuild_tick(syncer *s)
{
    if (s->rb != RB_COLLECTING)
        return;
    int64_t now = cx_mono_ms(), age = now - s->rb_opened_ms, window = s->cfg.heartbeat_timeout_ms;
    int complete = 1, joined = 0;
    for (int p = 0; p < s->P; p++)
        if (s->rbf[p].want_version > s->rbf[p].got_version)
            complete = 0;
    for (int i = 0; i < MAX_LEARNERS; i++)
        joined += s->rb_joined[i];
    /* a learner that holds a newer copy and is alive rejoins within a
     * heartbeat or two of the restart; one silent for the heartbeat timeout
     * counts as absent anyway. Past 3 windows, go with what came. */
    if (!((complete && (joined >= s->cfg.learners || age >= window)) || age >= 3 * window))
        return;
    if (is_ddp(s) && !rb_ddp_ready(s))
        return;
    s->rb = RB_WRITING;
    json_t *src = rebuild_apply(s);
    s->eval_pending = 1;
    s->last_eval_ms = 0;
    s->rb_count++;
    double waited = (double)age;
    int64_t ddp_step = s->ddp_step, adam_steps = s->opt ? (int64_t)adamw_steps(s->opt) : 0;
    pthread_mutex_unlock(&s->mu);
    char err[CX_ERRLEN];
    int rc = write_checkpoint(s, err, sizeof err);
    if (rc != 0)
        cx_error("rebuild: checkpoint failed (%s); serving the rebuilt state anyway", err);
    json_t *ev = json_pack("{s:s, s:o, s:b, s:b, s:f, s:b}", "start_state", start_kind_names[s->start],
                           "fragments", src, "momentum_reset", !is_ddp(s), "checkpoint", rc == 0, "waited_ms",
                           waited, "complete", complete);
    if (is_ddp(s)) /* the step and AdamW count the rebuilt state is at (unchanged if none came) */
        json_object_update_new(ev, json_pack("{s:I, s:I}", "ddp_step", (json_int_t)ddp_step, "adam_steps",
                                             (json_int_t)adam_steps));
    events_emit(s->ev, "rebuild", ev);
    cx_info("rebuild done after %.0f ms (%s); serving", waited,
            complete ? "every reported copy uploaded" : "window over, some copies never came");
    pthread_mutex_lock(&s->mu);
    for (int p = 0; p < s->P; p++) {
        rb_frag *f = &s->rbf[p];
        free(f->vals);
        f->vals = NULL;
        f->want_version = f->got_version = 0;
        f->want_learner = f->got_learner = -1;
        f->disagree = 0;
    }
    s->rb = RB_NONE;
    assert_rebuild_state(s);
    pthread_cond_broadcast(&s->frag_cv);
}

/* POST /v1/fragments/{p}/state: a learner's copy of global fragment p,
 * asked for by its join's 503 answer. Headers: learner, incarnation,
 * fragment, X-Chaosloco-Version (the version it reported), CRC32C, in ddp
 * modes also X-Chaosloco-Step (the step its join named) and
 * X-Chaosloco-Adam-Steps; body: the f32 values (ddp: params | m | v of the
 * fragment, v >= 0). Staged when it matches the report and is newer than
 * what is staged. */
static int h_fragment_state(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t p, version;
    proto_hdr h;
    char why[CX_ERRLEN];
    int slot;
    if (path_int(req->params[0], s->P - 1, &p) != 0) {
        cx_http_reply_error(resp, 404, "no fragment '%s' (fragments are 0..%d)", req->params[0], s->P - 1);
        return 0;
    }
    if (proto_hdr_parse(&h, req_header, req,
                        PROTO_NEED_LEARNER | PROTO_NEED_INCARNATION | PROTO_NEED_FRAGMENT | PROTO_NEED_CRC,
                        why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "state upload: %s", why);
        return 0;
    }
    const char *vh = cx_http_header(req, PROTO_H_VERSION);
    if (!vh || cx_parse_i64(vh, PROTO_H_VERSION, 1, RB_VERSION_MAX, &version, why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "state upload: header %s: %s", PROTO_H_VERSION, vh ? why : "missing");
        return 0;
    }
    if (h.fragment != p) {
        cx_http_reply_error(resp, 400, "state upload: header %s is %lld but the path names fragment %lld",
                            PROTO_H_FRAGMENT, (long long)h.fragment, (long long)p);
        return 0;
    }
    int64_t ddp_step = 0, adam = 0;
    if (is_ddp(s)) {
        const char *names[2] = {PROTO_H_STEP, PROTO_H_ADAM_STEPS};
        int64_t *outs[2] = {&ddp_step, &adam};
        for (int k = 0; k < 2; k++) {
            const char *hv = cx_http_header(req, names[k]);
            if (!hv || cx_parse_i64(hv, names[k], 0, RB_VERSION_MAX, outs[k], why, sizeof why) != 0) {
                cx_http_reply_error(resp, 400, "state upload: header %s: %s", names[k], hv ? why : "missing");
                return 0;
            }
        }
    }
    size_t flen = fragment_length(s->ft, (int)p), len = rb_state_len(s, (int)p);
    if (proto_check_body(req->body, req->body_len, len * 4, h.crc32c, why, sizeof why) != PROTO_OK) {
        cx_http_reply_error(resp, 400, "state upload: %s", why);
        return 0;
    }
    float *vals = malloc(len * sizeof *vals);
    if (!vals) {
        cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
        return 0;
    }
    proto_f32_decode(req->body, len, vals);
    ptrdiff_t bad = proto_first_nonfinite(vals, len);
    if (bad >= 0) {
        free(vals);
        cx_http_reply_error(resp, 400, "state upload: value %td of fragment %lld is not finite", bad,
                            (long long)p);
        return 0;
    }
    for (size_t i = 2 * flen; is_ddp(s) && i < len; i++)
        if (vals[i] < 0.0f) { /* AdamW's second moment: its square root is taken */
            free(vals);
            cx_http_reply_error(resp, 400, "state upload: AdamW v value %zu of fragment %lld is negative",
                                i - 2 * flen, (long long)p);
            return 0;
        }
    pthread_mutex_lock(&s->mu);
    proto_reason r = check_learner(s, h.learner, h.incarnation, &slot);
    int status = 200, staged = 0;
    if (s->rb != RB_COLLECTING) {
        status = 409;
        snprintf(why, sizeof why, "state upload: no rebuild is collecting (state %s)",
                 rebuild_state_names[s->rb]);
    } else if (r != PROTO_OK) {
        status = reason_status(r);
        snprintf(why, sizeof why, "state upload: %s", proto_reason_name(r));
    } else {
        rb_report rep = s->rb_rep[slot * s->P + p];
        rb_frag *f = &s->rbf[p];
        if (rep.version != version || rep.crc != h.crc32c || (is_ddp(s) && rep.step != ddp_step)) {
            status = 409;
            snprintf(
                why, sizeof why,
                "state upload: learner %lld reported fragment %lld version %lld crc32c %08x step %lld at "
                "join, this is version %lld crc32c %08x step %lld",
                (long long)h.learner, (long long)p, (long long)rep.version, rep.crc, (long long)rep.step,
                (long long)version, h.crc32c, (long long)ddp_step);
        } else if (version > f->got_version && version > rb_bar(s, (int)p)) {
            free(f->vals);
            f->vals = vals;
            vals = NULL;
            f->got_version = version;
            f->got_learner = h.learner;
            f->got_crc = h.crc32c;
            f->got_step = ddp_step;
            f->got_adam = adam;
            staged = 1;
            touch(s, slot);
            s->bytes_in += (int64_t)req->body_len;
        }
    }
    assert_rebuild_state(s);
    pthread_mutex_unlock(&s->mu);
    free(vals);
    if (status != 200) {
        cx_http_reply_error(resp, status, "%s", why);
        return 0;
    }
    cx_info("state upload learner=%lld fragment=%lld version=%lld %s", (long long)h.learner, (long long)p,
            (long long)version, staged ? "staged" : "not needed (a newer copy is staged)");
    cx_http_reply_json(resp, 200,
                       json_pack("{s:I, s:I, s:b}", "fragment", (json_int_t)p, "version", (json_int_t)version,
                                 "staged", staged));
    return 0;
}

/* ---- syncer: POST /v1/join ---- */

static int learner_is_caller(syncer *s, const cx_http_req *req, cx_http_resp *resp, int64_t id,
                             const char *call);
static int join_checked(syncer *s, const cx_http_req *req, cx_http_resp *resp, json_int_t id, json_int_t inc,
                        json_int_t step, const int64_t *hv, const uint32_t *hc, const int64_t *hp,
                        int *upload);

static int h_join(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    json_t *body, *holds = NULL;
    json_int_t id = -1, inc = 0, step = 0;
    char err[CX_ERRLEN];
    if (cx_http_body_json(req, resp, 0, &body) != 0)
        return 0;
    if (cx_json_unpack(body, "body", err, sizeof err, "{s:I, s:I, s?I, s?o}", "learner", &id, "incarnation",
                       &inc, "step", &step, "holds", &holds) != 0) {
        json_decref(body);
        cx_http_reply_error(resp, 400, "%s", err);
        return 0;
    }
    /* what the learner holds (optional: old learners and first joins send
     * none) */
    int64_t *hv = NULL, *hp = NULL;
    uint32_t *hc = NULL;
    int *upload = NULL;
    if (holds) {
        hv = malloc((size_t)s->P * sizeof *hv);
        hp = malloc((size_t)s->P * sizeof *hp);
        hc = malloc((size_t)s->P * sizeof *hc);
        upload = malloc((size_t)s->P * sizeof *upload);
        if (!hv || !hp || !hc || !upload) {
            free(hv), free(hp), free(hc), free(upload);
            json_decref(body);
            cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
            return 0;
        }
        if (rb_parse_holds(s, holds, hv, hc, hp, resp) != 0) {
            free(hv), free(hp), free(hc), free(upload);
            json_decref(body);
            return 0;
        }
    }
    json_decref(body);
    if (!learner_is_caller(s, req, resp, id, "join")) {
        free(hv), free(hp), free(hc), free(upload);
        return 0;
    }
    join_checked(s, req, resp, id, inc, step, hv, hc, hp, upload);
    free(hv), free(hp), free(hc), free(upload);
    return 0;
}

/* The 503 answer of a join during a rebuild (mu held): the fragments this
 * learner must upload to POST /v1/fragments/{p}/state with the incarnation
 * given here, then join again. */
static void join_rebuilding(syncer *s, cx_http_resp *resp, rebuild_state rb, json_int_t id, int64_t inc,
                            const int *upload, int n_up)
{
    json_t *up = json_array();
    for (int i = 0; i < n_up; i++)
        json_array_append_new(up, json_integer(upload[i]));
    if (rb == RB_REFUSED) {
        json_decref(up);
        rebuild_gate(s, resp);
        return;
    }
    cx_info("join learner=%lld incarnation=%lld during the rebuild: %d fragments to upload", (long long)id,
            (long long)inc, n_up);
    cx_http_reply_json(resp, 503,
                       json_pack("{s:s, s:i, s:{s:I, s:o, s:i}}", "error",
                                 "rebuilding the global state from the learners; upload what is asked, then "
                                 "join again",
                                 "status", 503, "rebuild", "incarnation", (json_int_t)inc, "upload", up,
                                 "retry_ms", RB_RETRY_MS));
    cx_http_add_header(resp, "Retry-After", "1");
}

/* The join once the body is decoded (h_join); hv/hc: the holds or NULL,
 * upload: room for P fragment ids. */
static int join_checked(syncer *s, const cx_http_req *req, cx_http_resp *resp, json_int_t id, json_int_t inc,
                        json_int_t step, const int64_t *hv, const uint32_t *hc, const int64_t *hp,
                        int *upload)
{
    (void)req;
    if (check_field(resp, "join", "learner", id, 0, PROTO_MAX_LEARNER_ID) ||
        check_field(resp, "join", "incarnation", inc, 0, INT64_MAX / 2) ||
        check_field(resp, "join", "step", step, 0, CONFIG_STEPS_MAX))
        return 0;
    pthread_mutex_lock(&s->mu);
    int slot = find_slot(s, id);
    /* an incarnation grows by at most INCARNATION_MAX_STEP per join, so one
     * request cannot push a learner id out of reach (nor near overflow) */
    int64_t cur = slot >= 0 ? s->learners[slot].incarnation : 0;
    if (inc > cur + INCARNATION_MAX_STEP) {
        pthread_mutex_unlock(&s->mu);
        cx_http_reply_error(
            resp, 400, "join: field 'incarnation' is %lld, more than %d above learner %lld's current %lld",
            (long long)inc, INCARNATION_MAX_STEP, (long long)id, (long long)cur);
        return 0;
    }
    if (slot < 0) {
        int known = 0;
        for (int i = 0; i < MAX_LEARNERS; i++)
            if (s->learners[i].id >= 0)
                known++;
        for (int i = 0; i < MAX_LEARNERS && slot < 0; i++)
            if (s->learners[i].id < 0 && known < s->cfg.learners)
                slot = i;
        if (slot < 0) {
            pthread_mutex_unlock(&s->mu);
            cx_http_reply_error(resp, 409, "the run expects %lld learners and %d other ids have joined",
                                (long long)s->cfg.learners, known);
            return 0;
        }
        memset(&s->learners[slot], 0, sizeof s->learners[slot]);
        s->learners[slot].id = id;
        s->learners[slot].ddp_arrived = s->learners[slot].ddp_dropped = -1;
        s->learners[slot].batch = s->cfg.batch;
        s->learners[slot].steps_total = s->cfg.steps;
    }
    learner_rec *l = &s->learners[slot];
    for (int p = 0; p < s->P; p++) { /* it pulls every fragment after a join */
        s->pull_step[slot * s->P + p] = step;
        s->own_ver[slot * s->P + p] = -1;
    }
    merge_ema_init(&l->step_wall, 0.2); /* a new incarnation may run at another speed */
    l->c_ms = l->c_step = 0;
    int64_t new_inc = (l->incarnation > inc ? l->incarnation : inc) + 1;
    l->incarnation = new_inc;
    l->state = LS_ACTIVE;
    l->joined_ms = l->last_seen_ms = cx_mono_ms();
    l->step = step;
    l->ddp_arrived = -1;
    l->must_rejoin = 0;
    int n_up = 0;
    rebuild_state rb = rebuild_join(s, slot, hv, hc, hp, step, upload, &n_up);
    if (rb != RB_NONE) {
        join_rebuilding(s, resp, rb, id, new_inc, upload, n_up);
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    json_t *ans =
        json_pack("{s:I, s:I, s:o, s:o, s:I, s:i, s:I, s:s, s:I}", "learner", id, "incarnation",
                  (json_int_t)new_inc, "config", config_to_json(&s->cfg), "fragments", fragments_json(s),
                  "n_params", (json_int_t)s->n, "table_digest", (int)fragment_table_digest(s->ft), "step",
                  (json_int_t)s->ddp_step, "mode", mode_name(s), "merges", (json_int_t)s->merges);
    if (s->cfg.mode == CONFIG_MODE_DECOUPLED)
        json_object_set_new(ans, "schedule_step", json_integer(schedule_step_now(s, slot, cx_mono_ms())));
    pthread_mutex_unlock(&s->mu);
    events_emit(s->ev, "join",
                json_pack("{s:I, s:I, s:I}", "learner", id, "incarnation", (json_int_t)new_inc,
                          "resumed_step", step));
    cx_info("join learner=%lld incarnation=%lld resumed_step=%lld", (long long)id, (long long)new_inc,
            (long long)step);
    cx_http_reply_json(resp, 200, ans);
    return 0;
}

/* ---- syncer: POST /v1/leave ---- */

static int h_leave(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    json_t *body;
    json_int_t id = -1, inc = 0;
    char err[CX_ERRLEN];
    int slot;
    if (cx_http_body_json(req, resp, 0, &body) != 0)
        return 0;
    if (cx_json_unpack(body, "body", err, sizeof err, "{s:I, s:I}", "learner", &id, "incarnation", &inc) !=
        0) {
        json_decref(body);
        cx_http_reply_error(resp, 400, "%s", err);
        return 0;
    }
    json_decref(body);
    if (!learner_is_caller(s, req, resp, id, "leave"))
        return 0;
    pthread_mutex_lock(&s->mu);
    proto_reason r = check_learner(s, id, inc, &slot);
    if (r != PROTO_OK) {
        pthread_mutex_unlock(&s->mu);
        cx_http_reply_error(resp, reason_status(r), "leave: %s", proto_reason_name(r));
        return 0;
    }
    s->learners[slot].state = LS_LEFT;
    /* barriers waiting for it may now be complete */
    pthread_cond_broadcast(&s->tick_cv);
    pthread_mutex_unlock(&s->mu);
    cx_info("leave learner=%lld incarnation=%lld", (long long)id, (long long)inc);
    cx_http_reply_json(resp, 200, json_pack("{s:b}", "ok", 1));
    return 0;
}

/* ---- syncer: POST /v1/heartbeat ---- */

static int h_heartbeat(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    json_t *body;
    json_int_t id = -1, inc = 0, step = 0, tokens = 0, t_real_ms = 0, cursor = 0, batch = -1,
               steps_total = -1;
    double loss = 0, step_ms = 0, pull_ms = 0;
    char err[CX_ERRLEN];
    int slot;
    if (cx_http_body_json(req, resp, 0, &body) != 0)
        return 0;
    if (cx_json_unpack(body, "body", err, sizeof err,
                       "{s:I, s:I, s:I, s:F, s:I, s:F, s:I, s?I, s?I, s?I, s?F}", "learner", &id,
                       "incarnation", &inc, "step", &step, "train_loss", &loss, "tokens", &tokens, "step_ms",
                       &step_ms, "t_real_ms", &t_real_ms, "cursor", &cursor, "batch", &batch, "steps_total",
                       &steps_total, "pull_ms", &pull_ms) != 0) {
        json_decref(body);
        cx_http_reply_error(resp, 400, "%s", err);
        return 0;
    }
    json_decref(body);
    if (!learner_is_caller(s, req, resp, id, "heartbeat"))
        return 0;
    /* every field in range before any arithmetic on it (the skew below) */
    if (check_field(resp, "heartbeat", "learner", id, 0, PROTO_MAX_LEARNER_ID) ||
        check_field(resp, "heartbeat", "incarnation", inc, 1, INT64_MAX / 2) ||
        check_field(resp, "heartbeat", "step", step, 0, CONFIG_STEPS_MAX) ||
        check_field(resp, "heartbeat", "tokens", tokens, 0, CONFIG_STEPS_MAX * CONFIG_BATCH_MAX) ||
        check_field(resp, "heartbeat", "t_real_ms", t_real_ms, 0, T_REAL_MAX_MS) ||
        check_field(resp, "heartbeat", "cursor", cursor, 0, INT64_MAX / 2) ||
        (batch != -1 && check_field(resp, "heartbeat", "batch", batch, 1, CONFIG_BATCH_MAX)) ||
        (steps_total != -1 &&
         check_field(resp, "heartbeat", "steps_total", steps_total, 1, CONFIG_STEPS_MAX)) ||
        check_real(resp, "heartbeat", "train_loss", loss, 0, 1e9) ||
        check_real(resp, "heartbeat", "step_ms", step_ms, 0, 1e9) ||
        check_real(resp, "heartbeat", "pull_ms", pull_ms, 0, 1e9))
        return 0;
    int64_t skew = t_real_ms - cx_real_ns() / 1000000;
    pthread_mutex_lock(&s->mu);
    proto_reason r = check_learner(s, id, inc, &slot);
    if (r != PROTO_OK) {
        pthread_mutex_unlock(&s->mu);
        cx_http_reply_error(resp, reason_status(r), "heartbeat: %s (learner %lld incarnation %lld)",
                            proto_reason_name(r), (long long)id, (long long)inc);
        return 0;
    }
    learner_rec *l = &s->learners[slot];
    touch(s, slot);
    l->step = step;
    l->tokens = tokens;
    l->train_loss = loss;
    l->step_ms = step_ms;
    l->pull_ms = pull_ms;
    l->clock_skew_ms = skew;
    if (batch > 0)
        l->batch = batch;
    if (steps_total > 0)
        l->steps_total = steps_total;
    int64_t now = cx_mono_ms();
    int emit = now - l->last_hb_event_ms >= 1000;
    if (emit)
        l->last_hb_event_ms = now;
    int ended = s->ended;
    pthread_mutex_unlock(&s->mu);
    if (emit)
        events_emit(s->ev, "heartbeat",
                    json_pack("{s:I, s:I, s:I, s:o, s:I, s:f, s:I}", "learner", id, "incarnation", inc,
                              "step", step, "train_loss", isfinite(loss) ? json_real(loss) : json_null(),
                              "tokens", tokens, "step_ms", step_ms, "clock_skew_ms", (json_int_t)skew));
    /* "end": the run was ended (POST /v1/end): finish the step, send, leave */
    cx_http_reply_json(resp, 200, json_pack("{s:b, s:b}", "ok", 1, "end", ended));
    return 0;
}

/* ---- syncer: POST /v1/end ---- */

/* End the run gracefully: from now on every heartbeat answer says "end",
 * learners finish their inner step, send what they have and leave. The
 * syncer keeps serving (merges, reads) until it is stopped; its final eval
 * and checkpoint run at shutdown as always. Idempotent: a second call
 * answers "already": true and keeps the first reason. */
static int h_end(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    json_t *body;
    const char *r = "";
    char err[CX_ERRLEN], reason[sizeof s->end_reason];
    if (cx_http_body_json(req, resp, 1, &body) != 0)
        return 0;
    json_t *jr = json_object_get(body, "reason");
    if (jr && !json_is_string(jr)) {
        json_decref(body);
        cx_http_reply_error(resp, 400, "body: reason must be a string");
        return 0;
    }
    if (cx_json_unpack(body, "body", err, sizeof err, "{s?s}", "reason", &r) != 0) {
        json_decref(body);
        cx_http_reply_error(resp, 400, "%s", err);
        return 0;
    }
    if (strlen(r) >= sizeof reason) {
        json_decref(body);
        cx_http_reply_error(resp, 400, "body: reason is longer than %zu bytes", sizeof reason - 1);
        return 0;
    }
    snprintf(reason, sizeof reason, "%s", r);
    json_decref(body);
    pthread_mutex_lock(&s->mu);
    int already = s->ended;
    if (!already) {
        s->ended = 1;
        s->end_ms = cx_mono_ms();
        snprintf(s->end_reason, sizeof s->end_reason, "%s", reason);
    }
    json_t *ans = json_pack("{s:b, s:b, s:s, s:I}", "ended", 1, "already", already, "reason", s->end_reason,
                            "merges", (json_int_t)s->merges);
    pthread_mutex_unlock(&s->mu);
    if (!already) {
        events_emit(s->ev, "end", json_pack("{s:s}", "reason", reason));
        cx_info("end requested: %s", reason[0] ? reason : "(no reason)");
    }
    cx_http_reply_json(resp, 200, ans);
    return 0;
}

/* ---- syncer: GET /v1/fragments/{p} ---- */

/* 0/1 query flag: absent = 0. */
static int query_flag(const cx_http_req *req, const char *name, int64_t *out, char *why, size_t whylen)
{
    const char *q = cx_http_query(req, name);
    *out = 0;
    return q ? cx_parse_i64(q, name, 0, 1, out, why, whylen) : 0;
}

/* The chain of kept deltas V+1..cur of fragment p as one body (mu held).
 * NULL (and *reason) when it cannot or should not be sent. */
static uint8_t *delta_chain(syncer *s, int p, int64_t from, int64_t cur, size_t *blen, int *count,
                            full_reason *reason)
{
    frag_hist *h = &s->hist[p];
    size_t len = fragment_length(s->ft, p), total = 0;
    if ((encoding_kind)s->cfg.encoding == ENCODING_F32 || !h->resid) {
        *reason = FULL_UNENCODED;
        return NULL;
    }
    if (h->n == 0 || h->d[h->n - 1].version != cur || h->d[0].version > from + 1) {
        *reason = FULL_HISTORY;
        return NULL;
    }
    int first = h->n - (int)(cur - from);
    for (int i = first; i < h->n; i++)
        total += PROTO_DELTA_REC_HDR + h->d[i].len;
    if (total >= len * 4) {
        *reason = FULL_SIZE;
        return NULL;
    }
    uint8_t *body = malloc(total), *o = body;
    if (!body) {
        *reason = FULL_SIZE;
        return NULL;
    }
    for (int i = first; i < h->n; i++) {
        proto_delta_put_hdr(o, h->d[i].version, (uint32_t)h->d[i].len);
        memcpy(o + PROTO_DELTA_REC_HDR, h->d[i].bytes, h->d[i].len);
        o += PROTO_DELTA_REC_HDR + h->d[i].len;
    }
    *blen = total;
    *count = h->n - first;
    return body;
}

/* The current fragment p: full f32, or with ?newer-than=V&delta=1 the
 * chain of encoded deltas V+1..current when it is kept (see
 * docs/internals/syncer.md "Downstream deltas"). */
static int h_fragment_get(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t p, newer = -1, wait_ms = 0, want_delta = 0, resync = 0;
    char why[CX_ERRLEN];
    proto_hdr h;
    const char *q;
    if (path_int(req->params[0], s->P - 1, &p) != 0) {
        cx_http_reply_error(resp, 404, "no fragment '%s' (fragments are 0..%d)", req->params[0], s->P - 1);
        return 0;
    }
    if ((q = cx_http_query(req, "newer-than")) &&
        cx_parse_i64(q, "newer-than", 0, INT64_MAX / 2, &newer, why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "%s", why);
        return 0;
    }
    if ((q = cx_http_query(req, "wait-ms")) &&
        cx_parse_i64(q, "wait-ms", 0, LONG_POLL_MAX_MS, &wait_ms, why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "%s", why);
        return 0;
    }
    if (query_flag(req, "delta", &want_delta, why, sizeof why) != 0 ||
        query_flag(req, "resync", &resync, why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "%s", why);
        return 0;
    }
    if (want_delta && newer < 0) {
        cx_http_reply_error(resp, 400, "delta=1 needs newer-than=V (the version the learner holds)");
        return 0;
    }
    /* Learner headers are optional here: with them the pull is recorded. */
    if (proto_hdr_parse(&h, req_header, req, 0, why, sizeof why) != 0)
        h.learner = h.incarnation = -1;
    size_t len = fragment_length(s->ft, p);
    float *tmp = malloc(len * sizeof *tmp);
    if (!tmp) {
        cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    if (newer >= 0 && wait_ms > 0) {
        int64_t end = cx_mono_ms() + wait_ms;
        while (!s->stopping && s->versions[p] <= newer) {
            int64_t left = end - cx_mono_ms();
            if (left <= 0)
                break;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t w = left > 200 ? 200 : left; /* re-check: the realtime clock may be skewed */
            ts.tv_nsec += (long)(w % 1000) * 1000000L;
            ts.tv_sec += w / 1000 + ts.tv_nsec / 1000000000L;
            ts.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&s->frag_cv, &s->mu, &ts);
        }
    }
    if (rebuild_gate(s, resp) || rebuild_stale_pull(s, &h, resp)) {
        pthread_mutex_unlock(&s->mu);
        free(tmp);
        return 0;
    }
    int64_t version = s->versions[p];
    if (newer >= 0 && version <= newer) {
        pthread_mutex_unlock(&s->mu);
        free(tmp);
        resp->status = 204;
        cx_http_add_header(resp, PROTO_H_VERSION, "%lld", (long long)version);
        return 0;
    }
    fragment_gather(s->ft, (int)p, s->theta, tmp);
    full_reason reason = resync ? FULL_MISMATCH : FULL_PULL;
    uint8_t *chain = NULL;
    size_t chain_len = 0;
    int chain_n = 0;
    if (want_delta && !resync)
        chain = delta_chain(s, (int)p, newer, version, &chain_len, &chain_n, &reason);
    int record = 0;
    if (h.learner >= 0 && h.incarnation > 0) {
        int slot;
        if (check_learner(s, h.learner, h.incarnation, &slot) == PROTO_OK) {
            touch(s, slot);
            s->pull_step[slot * s->P + p] = s->learners[slot].step;
            record = 1;
            /* a merged value it takes after contributing to p: does it hold its own work? */
            int64_t *own = &s->own_ver[slot * s->P + p];
            if (*own >= 0) {
                s->learners[slot].adopted++;
                s->learners[slot].adopted_own += *own > 0 && *own <= version;
                *own = -1;
            }
        }
    }
    if (chain) {
        s->bytes_out += (int64_t)chain_len;
        s->bytes_out_delta += (int64_t)chain_len;
        s->answers_delta++;
        s->answers_delta_versions += chain_n;
    } else {
        s->bytes_out += (int64_t)len * 4;
        s->bytes_out_full += (int64_t)len * 4;
        s->answers_full[reason]++;
    }
    pthread_mutex_unlock(&s->mu);
    uint32_t frag_crc = proto_f32_crc(tmp, len);
    if (record)
        events_emit(s->ev, "pull",
                    json_pack("{s:I, s:I, s:I, s:I, s:s, s:I}", "learner", (json_int_t)h.learner,
                              "incarnation", (json_int_t)h.incarnation, "fragment", (json_int_t)p, "version",
                              (json_int_t)version, "kind", chain ? "delta" : full_reason_names[reason],
                              "delta_from", (json_int_t)(chain ? newer : -1)));
    if (chain) {
        cx_http_reply_bytes(resp, 200, "application/octet-stream", chain, chain_len);
        cx_http_add_header(resp, PROTO_H_CRC32C, "%08x", cx_crc32c(0, chain, chain_len));
        cx_http_add_header(resp, PROTO_H_DELTA_FROM, "%lld", (long long)newer);
        cx_http_add_header(resp, PROTO_H_ENCODING, "%s", config_encoding_name(s->cfg.encoding));
        free(chain);
    } else {
        unsigned char *wire = malloc(len * 4);
        if (!wire) {
            free(tmp);
            cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
            return 0;
        }
        proto_f32_encode(tmp, len, wire);
        cx_http_reply_bytes(resp, 200, "application/octet-stream", wire, len * 4);
        cx_http_add_header(resp, PROTO_H_CRC32C, "%08x", frag_crc);
        cx_http_add_header(resp, PROTO_H_ENCODING, "f32");
        free(wire);
    }
    cx_http_add_header(resp, PROTO_H_VERSION, "%lld", (long long)version);
    cx_http_add_header(resp, PROTO_H_FRAGMENT, "%lld", (long long)p);
    cx_http_add_header(resp, PROTO_H_FRAGMENT_CRC32C, "%08x", frag_crc);
    free(tmp);
    return 0;
}

/* ---- syncer: GET /v1/versions ---- */

/* Every fragment's version and the merge counter; with
 * ?merges-above=M&wait-ms=T it long-polls until some merge happened after
 * the learner's last look (one wait for all the fragments it waits on). */
static int h_versions(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t above = -1, wait_ms = 0;
    char why[CX_ERRLEN];
    const char *q;
    if ((q = cx_http_query(req, "merges-above")) &&
        cx_parse_i64(q, "merges-above", 0, INT64_MAX / 2, &above, why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "%s", why);
        return 0;
    }
    if ((q = cx_http_query(req, "wait-ms")) &&
        cx_parse_i64(q, "wait-ms", 0, LONG_POLL_MAX_MS, &wait_ms, why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "%s", why);
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    int64_t end = cx_mono_ms() + wait_ms;
    while (above >= 0 && !s->stopping && s->merges <= above) {
        int64_t left = end - cx_mono_ms();
        if (left <= 0)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t w = left > 200 ? 200 : left;
        ts.tv_nsec += (long)(w % 1000) * 1000000L;
        ts.tv_sec += w / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->frag_cv, &s->mu, &ts);
    }
    json_t *v = json_array();
    for (int p = 0; p < s->P; p++)
        json_array_append_new(v, json_integer(s->versions[p]));
    json_t *o = json_pack("{s:o, s:I}", "versions", v, "merges", (json_int_t)s->merges);
    pthread_mutex_unlock(&s->mu);
    cx_http_reply_json(resp, 200, o);
    return 0;
}

/* ---- syncer: POST /v1/fragments/{p}/contributions ---- */

/* PROTO_OK when the tokens/steps claim of a contribution to fragment p is
 * possible (mu held): no more steps than the learner's run has left after
 * the step it reported when it last pulled p (+ H of slack: reported steps
 * lag, which only loosens the bound), no more tokens than its batch per
 * step. Both bounds keep every sum of claims far from overflow. */
static proto_reason claim_check(syncer *s, int slot, int p, const proto_hdr *h, char *why, size_t len)
{
    const learner_rec *l = &s->learners[slot];
    int64_t since = s->pull_step[slot * s->P + p];
    int64_t left = l->steps_total > since ? l->steps_total - since : 0;
    int64_t max_steps = left + s->cfg.H;
    if (h->steps > max_steps) {
        snprintf(why, len,
                 "header %s is %lld: learner %lld cannot have trained more than %lld steps since it pulled "
                 "fragment %d (at step %lld of %lld, +H)",
                 PROTO_H_STEPS, (long long)h->steps, (long long)l->id, (long long)max_steps, p,
                 (long long)since, (long long)l->steps_total);
        return PROTO_R_CLAIM;
    }
    if (h->tokens > h->steps * l->batch) { /* steps <= CONFIG_STEPS_MAX + H: no overflow */
        snprintf(why, len, "header %s is %lld, more than %s %lld x batch %lld", PROTO_H_TOKENS,
                 (long long)h->tokens, PROTO_H_STEPS, (long long)h->steps, (long long)l->batch);
        return PROTO_R_CLAIM;
    }
    return PROTO_OK;
}

static double ring_median(const double *ring, int64_t n)
{
    double v[NORM_SAMPLES];
    int k = n < NORM_SAMPLES ? (int)n : NORM_SAMPLES;
    memcpy(v, ring, (size_t)k * sizeof v[0]);
    for (int i = 1; i < k; i++) /* insertion sort: k <= 32 */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

/* PROTO_OK when the per-step norms of a contribution (L2 / steps and
 * max-abs / steps) are within cfg.norm_bound x the medians of fragment p's
 * last NORM_SAMPLES accepted ones (mu held). Per step, because a delta
 * grows with the steps it covers (a learner back after a long partition).
 * No bound before NORM_WARMUP accepted, with norm_bound 0, or while a
 * median is 0. */
static proto_reason norm_check(syncer *s, int p, double l2, double maxabs, char *why, size_t len)
{
    const norm_hist *nh = &s->rounds[p].norms;
    double b = s->cfg.norm_bound;
    if (b <= 0 || nh->n < NORM_WARMUP)
        return PROTO_OK;
    double ml2 = ring_median(nh->l2, nh->n), mmax = ring_median(nh->maxabs, nh->n);
    int k = nh->n < NORM_SAMPLES ? (int)nh->n : NORM_SAMPLES;
    if (ml2 > 0 && l2 > b * ml2) {
        snprintf(why, len, "L2 norm per step %.4g is more than %g x the median %.4g of fragment %d's last %d",
                 l2, b, ml2, p, k);
        return PROTO_R_NORM;
    }
    if (mmax > 0 && maxabs > b * mmax) {
        snprintf(why, len, "max-abs per step %.4g is more than %g x the median %.4g of fragment %d's last %d",
                 maxabs, b, mmax, p, k);
        return PROTO_R_NORM;
    }
    return PROTO_OK;
}

static void norm_add(syncer *s, int p, double l2, double maxabs)
{
    norm_hist *nh = &s->rounds[p].norms;
    nh->l2[nh->n % NORM_SAMPLES] = l2;
    nh->maxabs[nh->n % NORM_SAMPLES] = maxabs;
    nh->n++;
}

static double max_abs(const float *v, size_t n)
{
    float m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabsf(v[i]) > m ? fabsf(v[i]) : m;
    return m;
}

/* Whether a well-formed contribution to fragment p may join its round
 * (mu held): a current learner, a base version the mode accepts, a
 * possible claim and a bounded norm. PROTO_OK and *slot, or the reason with
 * the detail in why. */
static proto_reason admit(syncer *s, int p, const proto_hdr *h, double l2, double mx, int *slot, char *why,
                          size_t len)
{
    proto_reason r = check_learner(s, h->learner, h->incarnation, slot);
    int64_t version = s->versions[p], lag = version - h->base_version;
    if (r != PROTO_OK) {
        snprintf(why, len, "%s: learner %lld incarnation %lld", proto_reason_name(r), (long long)h->learner,
                 (long long)h->incarnation);
        return r;
    }
    if (h->base_version > version) {
        snprintf(why, len, "base version %lld is newer than the syncer's %lld", (long long)h->base_version,
                 (long long)version);
        return PROTO_R_STALE_VERSION;
    }
    if (s->cfg.mode == CONFIG_MODE_DILOCO && lag != 0) {
        snprintf(why, len, "diloco round %lld is closed (current version %lld)", (long long)h->base_version,
                 (long long)version);
        return PROTO_R_STALE_VERSION;
    }
    /* each merged round of p is one version: the lag is in rounds of p. The
     * default scales with M: with every learner's contribution in a round
     * of its own (the worst case) a period has M rounds; two periods pass. */
    int64_t max_stale = s->cfg.max_staleness >= 0 ? s->cfg.max_staleness
                        : 2 * s->cfg.learners > 4 ? 2 * s->cfg.learners
                                                  : 4;
    if (lag > max_stale) {
        snprintf(why, len, "base version %lld is %lld rounds behind %lld (max staleness %lld)",
                 (long long)h->base_version, (long long)lag, (long long)version, (long long)max_stale);
        return PROTO_R_STALE_VERSION;
    }
    r = claim_check(s, *slot, p, h, why, len);
    return r != PROTO_OK ? r : norm_check(s, p, l2, mx, why, len);
}

static int h_contribution(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t p;
    proto_hdr h;
    char why[CX_ERRLEN];
    int slot;
    if (path_int(req->params[0], s->P - 1, &p) != 0) {
        cx_http_reply_error(resp, 404, "no fragment '%s' (fragments are 0..%d)", req->params[0], s->P - 1);
        return 0;
    }
    if (is_ddp(s)) {
        cx_http_reply_error(
            resp, 409, "mode %s takes gradients at /v1/steps/{t}/gradients, not contributions", mode_name(s));
        return 0;
    }
    if (proto_hdr_parse(&h, req_header, req, PROTO_NEED_CONTRIBUTION, why, sizeof why) != 0) {
        reject(s, resp, PROTO_R_BAD_HEADER, h.learner, h.incarnation, p, why, 0);
        return 0;
    }
    if (h.fragment != p) {
        snprintf(why, sizeof why, "header %s is %lld but the path names fragment %lld", PROTO_H_FRAGMENT,
                 (long long)h.fragment, (long long)p);
        reject(s, resp, PROTO_R_BAD_HEADER, h.learner, h.incarnation, p, why, 0);
        return 0;
    }
    size_t len = fragment_length(s->ft, (int)p);
    size_t want = encoding_size((encoding_kind)h.encoding, len);
    proto_reason r = proto_check_body(req->body, req->body_len, want, h.crc32c, why, sizeof why);
    if (r != PROTO_OK) {
        reject(s, resp, r, h.learner, h.incarnation, p, why, 0);
        return 0;
    }
    float *delta = malloc(len * sizeof *delta);
    if (!delta) {
        cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
        return 0;
    }
    if (encoding_decode((encoding_kind)h.encoding, (const uint8_t *)req->body, req->body_len, delta, len, why,
                        sizeof why) != 0 ||
        proto_first_nonfinite(delta, len) >= 0) {
        free(delta);
        reject(s, resp, PROTO_R_NONFINITE, h.learner, h.incarnation, p, why[0] ? why : "non-finite value", 0);
        return 0;
    }
    double per = h.steps > 0 ? (double)h.steps : 1.0;
    double l2 = merge_l2norm(delta, len) / per, mx = max_abs(delta, len) / per;
    pthread_mutex_lock(&s->mu);
    if (rebuild_gate(s, resp)) {
        pthread_mutex_unlock(&s->mu);
        free(delta);
        return 0;
    }
    int64_t version = s->versions[p];
    r = admit(s, (int)p, &h, l2, mx, &slot, why, sizeof why);
    if (r == PROTO_OK && h.round >= 0) {
        /* a round no learner of this run can reach: the schedule (which a
         * joining learner takes from the others) ends at the longest run's
         * steps_total, +H of slack */
        int64_t most = 0;
        for (int i = 0; i < MAX_LEARNERS; i++)
            if (s->learners[i].id >= 0 && s->learners[i].steps_total > most)
                most = s->learners[i].steps_total;
        int64_t max_round = fragment_round(most + s->cfg.H, (int)p, (int)s->cfg.H, s->P);
        if (h.round > max_round) {
            snprintf(why, sizeof why,
                     "header %s is %lld: fragment %lld has at most %lld rounds in %lld steps", PROTO_H_ROUND,
                     (long long)h.round, (long long)p, (long long)max_round, (long long)most);
            r = PROTO_R_BAD_HEADER;
        }
    }
    if (r != PROTO_OK) {
        s->bytes_in += (int64_t)req->body_len;
        if (r == PROTO_R_STALE_VERSION)
            s->stale_rejected++;
        free(delta);
        reject(s, resp, r, h.learner, h.incarnation, p, why, 1);
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    touch(s, slot);
    norm_add(s, (int)p, l2, mx);
    s->bytes_in += (int64_t)req->body_len;
    s->learners[slot].accepted++;
    s->accepted_total++;
    frag_round *rd = &s->rounds[p];
    int at = -1;
    for (int i = 0; i < rd->n; i++)
        if (rd->c[i].slot == slot)
            at = i;
    if (at < 0)
        at = rd->n++;
    else
        free(rd->c[at].delta);
    rd->c[at] = (contrib){slot, h.learner, h.incarnation, h.base_version, h.tokens, h.steps, delta};
    int64_t now = cx_mono_ms();
    int late = 0;
    int64_t round = round_join_id(rd->state != RS_IDLE, rd->id, rd->closed_id, h.round, &late);
    if (rd->state == RS_IDLE) {
        int64_t hold = late && s->cfg.mode == CONFIG_MODE_DECOUPLED ? round_hold_ms(s) : 0;
        rd->state = hold > 0 ? RS_HELD : RS_COLLECTING;
        rd->hold_until_ms = hold > 0 ? now + hold : 0;
        rd->opened_late = late;
        rd->opened_ms = now;
        rd->late = 0;
    } else if (rd->state == RS_HELD && !late) {
        rd->state = RS_COLLECTING; /* the slot's on-time contribution: count the quorum now */
        rd->hold_until_ms = 0;
    }
    rd->id = round;
    rd->late += late;
    s->rounds_late += late;
    s->own_ver[slot * s->P + p] = 0; /* pending: the version that merges it says whether a pull has it */
    learner_rec *lr = &s->learners[slot];
    int64_t cstep = fragment_round_step(h.round, (int)p, (int)s->cfg.H, s->P);
    if (cstep > 0) {
        /* wall time per inner step between two of its contributions at least H schedule steps apart
         * (queued contributions arrive bunched: a shorter span would measure the queue, not the steps) */
        if (lr->c_ms == 0 || cstep < lr->c_step) {
            lr->c_ms = now;
            lr->c_step = cstep;
        } else if (cstep - lr->c_step >= s->cfg.H) {
            merge_ema_add(&lr->step_wall, (double)(now - lr->c_ms) / (double)(cstep - lr->c_step));
            lr->c_ms = now;
            lr->c_step = cstep;
        }
    }
    pthread_mutex_unlock(&s->mu);
    /* the event goes out before a merge it may trigger, so the log reads in order */
    events_emit(s->ev, "contribution",
                json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I, s:b}", "learner",
                          (json_int_t)h.learner, "incarnation", (json_int_t)h.incarnation, "fragment",
                          (json_int_t)p, "base_version", (json_int_t)h.base_version, "tokens",
                          (json_int_t)h.tokens, "steps", (json_int_t)h.steps, "encoding",
                          config_encoding_name(h.encoding), "bytes", (json_int_t)req->body_len, "round",
                          (json_int_t)round, "named_round", (json_int_t)h.round, "late", late));
    pthread_mutex_lock(&s->mu);
    round_check(s, (int)p, cx_mono_ms());
    assert_round_state(s, &s->rounds[p]);
    pthread_mutex_unlock(&s->mu);
    /* one round of p is open at a time and each merge is one version: the
     * round joined merges into version + 1 (round_merge; a rebuild that
     * drops held contributions moves versions and makes the learner rejoin) */
    cx_http_reply_json(resp, 202,
                       json_pack("{s:I, s:I, s:I, s:I, s:b}", "round", (json_int_t)round, "fragment",
                                 (json_int_t)p, "version", (json_int_t)version, "merges_into",
                                 (json_int_t)(version + 1), "late", late));
    return 0;
}

/* ---- syncer: POST /v1/steps/{t}/gradients (ddp modes) ---- */

static void reply_mean(syncer *s, cx_http_resp *resp, int64_t t)
{
    char crchex[9];
    proto_crc_format(s->ddp_mean_crc, crchex);
    s->bytes_out += (int64_t)s->n * 4;
    cx_http_reply_bytes(resp, 200, "application/octet-stream", s->ddp_mean_wire, s->n * 4);
    cx_http_add_header(resp, PROTO_H_STEP, "%lld", (long long)t);
    cx_http_add_header(resp, PROTO_H_CRC32C, "%s", crchex);
    cx_http_add_header(resp, PROTO_H_VERSION, "%lld", (long long)s->versions[0]);
}

static void reply_step_conflict(syncer *s, cx_http_resp *resp, int64_t t, const char *what)
{
    json_t *b = json_pack("{s:s, s:i, s:I, s:I}", "error", what, "status", 409, "step",
                          (json_int_t)s->ddp_step, "requested", (json_int_t)t);
    cx_http_reply_json(resp, 409, b);
}

static int h_gradient(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t t;
    proto_hdr h;
    char why[CX_ERRLEN];
    int slot;
    if (!is_ddp(s)) {
        cx_http_reply_error(resp, 409, "mode %s takes contributions, not per-step gradients", mode_name(s));
        return 0;
    }
    if (path_int(req->params[0], INT64_MAX / 2, &t) != 0) {
        cx_http_reply_error(resp, 404, "bad step '%s'", req->params[0]);
        return 0;
    }
    if (proto_hdr_parse(&h, req_header, req, PROTO_NEED_GRADIENT, why, sizeof why) != 0) {
        reject(s, resp, PROTO_R_BAD_HEADER, h.learner, h.incarnation, -1, why, 0);
        return 0;
    }
    if (h.encoding >= 0 && h.encoding != CONFIG_ENC_F32) {
        reject(s, resp, PROTO_R_BAD_HEADER, h.learner, h.incarnation, -1, "ddp gradients are f32", 0);
        return 0;
    }
    proto_reason r = proto_check_body(req->body, req->body_len, s->n * 4, h.crc32c, why, sizeof why);
    if (r != PROTO_OK) {
        reject(s, resp, r, h.learner, h.incarnation, -1, why, 0);
        return 0;
    }
    float *g = malloc(s->n * sizeof *g);
    if (!g) {
        cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
        return 0;
    }
    proto_f32_decode(req->body, s->n, g);
    ptrdiff_t bad = proto_first_nonfinite(g, s->n);
    if (bad >= 0) {
        free(g);
        snprintf(why, sizeof why, "gradient element %td is not finite", bad);
        reject(s, resp, PROTO_R_NONFINITE, h.learner, h.incarnation, -1, why, 0);
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    s->bytes_in += (int64_t)req->body_len;
    r = check_learner(s, h.learner, h.incarnation, &slot);
    if (r != PROTO_OK) {
        free(g);
        snprintf(why, sizeof why, "%s: learner %lld incarnation %lld", proto_reason_name(r),
                 (long long)h.learner, (long long)h.incarnation);
        reject(s, resp, r, h.learner, h.incarnation, -1, why, 1);
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    if (rebuild_gate(s, resp)) {
        pthread_mutex_unlock(&s->mu);
        free(g);
        return 0;
    }
    learner_rec *l = &s->learners[slot];
    touch(s, slot);
    if (t == s->ddp_mean_step && l->ddp_arrived == t) {
        /* a retry after its step completed: answer the mean again */
        reply_mean(s, resp, t);
        pthread_mutex_unlock(&s->mu);
        free(g);
        return 0;
    }
    if (t != s->ddp_step) {
        reply_step_conflict(s, resp, t,
                            t < s->ddp_step ? "step closed without this learner; resync"
                                            : "step is ahead of the syncer; resync");
        pthread_mutex_unlock(&s->mu);
        free(g);
        return 0;
    }
    if (l->ddp_arrived != t) {
        for (size_t i = 0; i < s->n; i++)
            s->ddp_sum[i] += g[i];
        l->ddp_arrived = t;
        l->accepted++;
        s->accepted_total++;
        if (s->ddp_count++ == 0) {
            s->ddp_first_ms = cx_mono_ms();
            if (s->ddp_done_ms > 0)
                s->ddp_compute_ms[s->ddp_ncompute++ % DDP_COMPUTE_SAMPLES] = s->ddp_first_ms - s->ddp_done_ms;
        }
    }
    free(g);
    ddp_check(s, cx_mono_ms());
    int64_t end = cx_mono_ms() + BARRIER_WAIT_MS;
    while (!s->stopping && s->ddp_mean_step < t) {
        int64_t left = end - cx_mono_ms();
        if (left <= 0)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t w = left > 200 ? 200 : left;
        ts.tv_nsec += (long)(w % 1000) * 1000000L;
        ts.tv_sec += w / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->step_cv, &s->mu, &ts);
    }
    if (s->ddp_mean_step == t && l->ddp_arrived == t && l->incarnation == h.incarnation) {
        reply_mean(s, resp, t);
    } else if (s->ddp_mean_step >= t) {
        reply_step_conflict(s, resp, t, "step closed without this learner; resync");
    } else {
        json_t *b =
            json_pack("{s:s, s:i, s:I, s:i, s:i}", "error", "barrier still waiting for learners; retry",
                      "status", 503, "step", (json_int_t)t, "arrived", s->ddp_count, "need", barrier_need(s));
        cx_http_reply_json(resp, 503, b);
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* ---- syncer: GET /v1/optimizer (ddp modes) ---- */

/* The ddp source of truth, for a learner that (re)joins, missed a step or
 * went non-finite: body = params[n] | AdamW m[n] | v[n], little-endian f32;
 * X-Chaosloco-Crc32c over the body, X-Chaosloco-Step the step being
 * collected (the learner's next gradient is for it), X-Chaosloco-Adam-Steps
 * the AdamW step counter. One snapshot under the lock, so the four agree.
 * Like a fragment pull: 503 while a rebuild collects, and with learner
 * headers refused to a learner that must rejoin first (rebuild_stale_pull),
 * so that it cannot take a restarted syncer's initial state over its own. */
static int h_optimizer(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    proto_hdr h;
    if (proto_hdr_parse(&h, req_header, req, 0, NULL, 0) != 0)
        h.learner = h.incarnation = -1;
    if (!is_ddp(s)) {
        cx_http_reply_error(resp, 409, "mode %s has no global optimizer state (ddp modes only)",
                            mode_name(s));
        return 0;
    }
    size_t n = s->n;
    unsigned char *b = malloc(n * 12);
    if (!b) {
        cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    if (rebuild_stale_pull(s, &h, resp) || rebuild_gate(s, resp)) {
        pthread_mutex_unlock(&s->mu);
        free(b);
        return 0;
    }
    proto_f32_encode(s->theta, n, b);
    proto_f32_encode(adamw_m(s->opt), n, b + n * 4);
    proto_f32_encode(adamw_v(s->opt), n, b + n * 8);
    int64_t step = s->ddp_step, adam_steps = (int64_t)adamw_steps(s->opt), version = s->versions[0];
    s->bytes_out += (int64_t)n * 12;
    pthread_mutex_unlock(&s->mu);
    char crchex[9];
    proto_crc_format(cx_crc32c(0, b, n * 12), crchex);
    cx_http_reply_bytes(resp, 200, "application/octet-stream", b, n * 12);
    free(b);
    cx_http_add_header(resp, PROTO_H_CRC32C, "%s", crchex);
    cx_http_add_header(resp, PROTO_H_STEP, "%lld", (long long)step);
    cx_http_add_header(resp, PROTO_H_ADAM_STEPS, "%lld", (long long)adam_steps);
    cx_http_add_header(resp, PROTO_H_VERSION, "%lld", (long long)version);
    return 0;
}

/* ---- syncer: GET /v1/status ---- */

static int h_status(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t now = cx_mono_ms();
    pthread_mutex_lock(&s->mu);
    json_t *frags = json_array(), *ls = json_array(), *merges = json_array(), *rej = json_object();
    for (int p = 0; p < s->P; p++) {
        json_t *f = json_pack("{s:i, s:I, s:I}", "id", p, "version", (json_int_t)s->versions[p], "length",
                              (json_int_t)fragment_length(s->ft, p));
        if (!is_ddp(s)) {
            const frag_round *rd = &s->rounds[p];
            json_object_set_new(f, "round",
                                json_pack("{s:s, s:i, s:o, s:I}", "state", round_state_names[rd->state],
                                          "contributions", rd->n, "id",
                                          rd->state != RS_IDLE ? json_integer(rd->id) : json_null(), "closed",
                                          (json_int_t)rd->closed_id));
        }
        json_array_append_new(frags, f);
    }
    for (int i = 0; i < MAX_LEARNERS; i++) {
        learner_rec *l = &s->learners[i];
        if (l->id < 0)
            continue;
        json_array_append_new(
            ls, json_pack("{s:I, s:s, s:I, s:I, s:I, s:f, s:f, s:I, s:f, s:{s:I, s:I}}", "id",
                          (json_int_t)l->id, "state", learner_state_names[l->state], "incarnation",
                          (json_int_t)l->incarnation, "step", (json_int_t)l->step, "tokens",
                          (json_int_t)l->tokens, "train_loss", isfinite(l->train_loss) ? l->train_loss : 0.0,
                          "step_ms", l->step_ms, "clock_skew_ms", (json_int_t)l->clock_skew_ms, "last_seen_s",
                          l->last_seen_ms ? (double)(now - l->last_seen_ms) / 1000.0 : -1.0, "contributions",
                          "accepted", (json_int_t)l->accepted, "rejected", (json_int_t)l->rejected));
        json_t *lj = json_array_get(ls, json_array_size(ls) - 1);
        /* fraction of the merged fragments it pulled after contributing that held its contribution */
        json_object_set_new(lj, "adopted_with_own",
                            l->adopted ? json_real((double)l->adopted_own / (double)l->adopted)
                                       : json_null());
        json_object_set_new(lj, "adopted", json_integer(l->adopted));
        json_object_set_new(lj, "step_wall_ms", json_real(merge_ema_get(&l->step_wall, 0)));
    }
    int64_t first = s->recent_n > RECENT_MERGES ? s->recent_n - RECENT_MERGES : 0;
    for (int64_t i = first; i < s->recent_n; i++) {
        merge_note *m = &s->recent[i % RECENT_MERGES];
        json_t *parts = json_array();
        for (int j = 0; j < m->n; j++)
            json_array_append_new(parts, json_integer(m->learners[j]));
        json_array_append_new(merges, json_pack("{s:I, s:I, s:I, s:o}", "fragment", (json_int_t)m->fragment,
                                                "version", (json_int_t)m->version, "t_mono_ms",
                                                (json_int_t)m->t_mono_ms, "participants", parts));
    }
    int64_t rejected = 0;
    for (int r = 1; r < PROTO_R_COUNT; r++) {
        json_object_set_new(rej, proto_reason_name((proto_reason)r), json_integer(s->rejects[r]));
        rejected += s->rejects[r];
    }
    json_t *eval = json_pack("{s:o, s:o, s:I, s:I, s:I}", "loss",
                             isfinite(s->eval_loss) ? json_real(s->eval_loss) : json_null(), "bpb",
                             isfinite(s->eval_loss) ? json_real(s->eval_loss / M_LN2) : json_null(), "step",
                             (json_int_t)s->eval_merges, "merges", (json_int_t)s->eval_merges, "tokens",
                             (json_int_t)s->eval_tokens);
    json_t *o = json_pack(
        "{s:s, s:o, s:I, s:I, s:o, s:o, s:o, s:{s:I, s:I}, s:{s:I, s:I, s:o}, s:I, s:I, s:I, s:i, s:o}",
        "mode", mode_name(s), "eval", eval, "merges", (json_int_t)s->merges, "tokens_merged",
        (json_int_t)s->tokens_merged, "fragments", frags, "learners", ls, "recent_merges", merges, "bytes",
        "in", (json_int_t)s->bytes_in, "out", (json_int_t)s->bytes_out, "contributions", "accepted",
        (json_int_t)s->accepted_total, "rejected", (json_int_t)rejected, "rejected_by_reason", rej,
        "ddp_step", (json_int_t)s->ddp_step, "longest_merge_gap_ms", (json_int_t)s->longest_gap_ms,
        "uptime_ms", (json_int_t)(now - s->start_ms), "learners_expected", (int)s->cfg.learners, "loss_floor",
        isfinite(s->entropy_floor) ? json_real(s->entropy_floor) : json_null());
    json_object_set_new(o, "n_params", json_integer((json_int_t)s->n));
    if (!is_ddp(s))
        json_object_set_new(o, "rounds",
                            json_pack("{s:o, s:I, s:I, s:I, s:I}", "participants_mean",
                                      s->rounds_merged
                                          ? json_real((double)s->rounds_parts / (double)s->rounds_merged)
                                          : json_null(),
                                      "stale_rejected", (json_int_t)s->stale_rejected, "merged",
                                      (json_int_t)s->rounds_merged, "contributions_merged",
                                      (json_int_t)s->rounds_parts, "late", (json_int_t)s->rounds_late));
    char pcrc[9];
    proto_crc_format(proto_f32_crc(s->theta, s->n), pcrc);
    json_object_set_new(o, "params_crc32c", json_string(pcrc));
    if (s->cfg.mode == CONFIG_MODE_DDP_ELASTIC)
        json_object_set_new(o, "elastic_deadline_ms", json_integer((json_int_t)ddp_deadline_ms(s)));
    json_t *fr = json_object();
    int64_t fallbacks = s->answers_full[FULL_HISTORY] + s->answers_full[FULL_MISMATCH];
    for (int r = 0; r < FULL_R_COUNT; r++)
        json_object_set_new(fr, full_reason_names[r], json_integer(s->answers_full[r]));
    json_object_set_new(o, "downstream",
                        json_pack("{s:s, s:I, s:I, s:I, s:I, s:o, s:I}", "encoding",
                                  config_encoding_name(s->cfg.encoding), "delta",
                                  (json_int_t)s->answers_delta, "delta_versions",
                                  (json_int_t)s->answers_delta_versions, "delta_bytes",
                                  (json_int_t)s->bytes_out_delta, "full_bytes", (json_int_t)s->bytes_out_full,
                                  "full", fr, "fallbacks", (json_int_t)fallbacks));
    json_object_set_new(
        o, "end",
        s->ended ? json_pack("{s:s, s:I}", "reason", s->end_reason, "ms_ago", (json_int_t)(now - s->end_ms))
                 : json_null());
    json_object_set_new(o, "ms_since_last_merge",
                        json_integer(s->last_merge_ms ? (json_int_t)(now - s->last_merge_ms) : -1));
    json_object_set_new(o, "rebuild",
                        json_pack("{s:s, s:s, s:I}", "state", rebuild_state_names[s->rb], "start_state",
                                  start_kind_names[s->start], "rebuilds", (json_int_t)s->rb_count));
    pthread_mutex_unlock(&s->mu);
    cx_http_reply_json(resp, 200, o);
    return 0;
}

/* ---- syncer: GET /v1/events ---- */

static int h_events(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t since = 0, limit = 10000;
    char why[CX_ERRLEN];
    const char *q;
    if ((q = cx_http_query(req, "since")) &&
        cx_parse_i64(q, "since", 0, INT64_MAX / 2, &since, why, sizeof why)) {
        cx_http_reply_error(resp, 400, "%s", why);
        return 0;
    }
    if ((q = cx_http_query(req, "limit")) && cx_parse_i64(q, "limit", 1, 100000, &limit, why, sizeof why)) {
        cx_http_reply_error(resp, 400, "%s", why);
        return 0;
    }
    cx_buf out;
    cx_buf_init(&out, (size_t)64 << 20);
    events_since(s->ev, since, (size_t)limit, &out);
    cx_http_reply_bytes(resp, 200, "application/x-ndjson", out.data ? out.data : "", out.len);
    cx_buf_cleanup(&out);
    return 0;
}

/* ---- syncer: GET /metrics ---- */

static int h_metrics(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    cx_buf *b = &resp->body;
    int64_t now = cx_mono_ms();
    pthread_mutex_lock(&s->mu);
    cx_buf_printf(b,
                  "# HELP chaosloco_syncer_merges_total Merges done (ddp: averaged steps).\n"
                  "# TYPE chaosloco_syncer_merges_total counter\nchaosloco_syncer_merges_total %lld\n",
                  (long long)s->merges);
    cx_buf_printf(b,
                  "# HELP chaosloco_syncer_contributions_total Contributions and gradients by result and "
                  "reason.\n# TYPE chaosloco_syncer_contributions_total counter\n"
                  "chaosloco_syncer_contributions_total{result=\"accepted\",reason=\"\"} %lld\n",
                  (long long)s->accepted_total);
    for (int r = 1; r < PROTO_R_COUNT; r++)
        cx_buf_printf(b, "chaosloco_syncer_contributions_total{result=\"rejected\",reason=\"%s\"} %lld\n",
                      proto_reason_name((proto_reason)r), (long long)s->rejects[r]);
    cx_buf_printf(b,
                  "# HELP chaosloco_syncer_bytes_total Tensor payload bytes by direction.\n"
                  "# TYPE chaosloco_syncer_bytes_total counter\n"
                  "chaosloco_syncer_bytes_total{direction=\"in\"} %lld\n"
                  "chaosloco_syncer_bytes_total{direction=\"out\"} %lld\n",
                  (long long)s->bytes_in, (long long)s->bytes_out);
    cx_buf_printf(b,
                  "# HELP chaosloco_syncer_fragment_answers_total Fragment answers: delta chains, and full "
                  "f32 fragments by reason (history and mismatch are fallbacks).\n"
                  "# TYPE chaosloco_syncer_fragment_answers_total counter\n");
    cx_buf_printf(b, "chaosloco_syncer_fragment_answers_total{kind=\"delta\",reason=\"\"} %lld\n",
                  (long long)s->answers_delta);
    for (int r = 0; r < FULL_R_COUNT; r++)
        cx_buf_printf(b, "chaosloco_syncer_fragment_answers_total{kind=\"full\",reason=\"%s\"} %lld\n",
                      full_reason_names[r], (long long)s->answers_full[r]);
    cx_buf_printf(b,
                  "# HELP chaosloco_syncer_fragment_answer_bytes_total Bytes of fragment answers by kind.\n"
                  "# TYPE chaosloco_syncer_fragment_answer_bytes_total counter\n"
                  "chaosloco_syncer_fragment_answer_bytes_total{kind=\"delta\"} %lld\n"
                  "chaosloco_syncer_fragment_answer_bytes_total{kind=\"full\"} %lld\n",
                  (long long)s->bytes_out_delta, (long long)s->bytes_out_full);
    cx_buf_printf(
        b,
        "# HELP chaosloco_syncer_tokens_merged_total Tokens of merged contributions.\n"
        "# TYPE chaosloco_syncer_tokens_merged_total counter\nchaosloco_syncer_tokens_merged_total %lld\n",
        (long long)s->tokens_merged);
    cx_buf_printf(b,
                  "# HELP chaosloco_syncer_eval_loss Eval loss of the global model, nats per byte.\n"
                  "# TYPE chaosloco_syncer_eval_loss gauge\nchaosloco_syncer_eval_loss %s%.6f\n",
                  "", isfinite(s->eval_loss) ? s->eval_loss : NAN);
    cx_buf_printf(b,
                  "# HELP chaosloco_syncer_longest_merge_gap_seconds Longest gap between two merges.\n"
                  "# TYPE chaosloco_syncer_longest_merge_gap_seconds gauge\n"
                  "chaosloco_syncer_longest_merge_gap_seconds %.3f\n",
                  (double)s->longest_gap_ms / 1000.0);
    if (!is_ddp(s))
        cx_buf_printf(b,
                      "# HELP chaosloco_syncer_rounds_merged_total Rounds merged (diloco, decoupled).\n"
                      "# TYPE chaosloco_syncer_rounds_merged_total counter\n"
                      "chaosloco_syncer_rounds_merged_total %lld\n"
                      "# HELP chaosloco_syncer_round_contributions_total Contributions merged in rounds.\n"
                      "# TYPE chaosloco_syncer_round_contributions_total counter\n"
                      "chaosloco_syncer_round_contributions_total %lld\n"
                      "# HELP chaosloco_syncer_stale_rejected_total Contributions refused as stale.\n"
                      "# TYPE chaosloco_syncer_stale_rejected_total counter\n"
                      "chaosloco_syncer_stale_rejected_total %lld\n",
                      (long long)s->rounds_merged, (long long)s->rounds_parts, (long long)s->stale_rejected);
    cx_buf_printf(b, "# HELP chaosloco_syncer_fragment_version Current version of each fragment.\n"
                     "# TYPE chaosloco_syncer_fragment_version gauge\n");
    for (int p = 0; p < s->P; p++)
        cx_buf_printf(b, "chaosloco_syncer_fragment_version{fragment=\"%d\"} %lld\n", p,
                      (long long)s->versions[p]);
    static const char *const lm[][3] = {
        {"learner_step", "gauge", "Inner steps a learner reported."},
        {"learner_tokens_total", "counter", "Tokens a learner reported."},
        {"learner_last_seen_seconds", "gauge", "Seconds since the learner was last heard from."},
        {"learner_incarnation", "gauge", "Current incarnation of the learner."},
        {"learner_up", "gauge", "1 while the learner is active (not absent or left)."},
        {"learner_clock_skew_seconds", "gauge", "Learner realtime minus syncer realtime."},
        {"learner_adopted_with_own", "gauge",
         "Fraction of the merged fragments a learner pulled after contributing that held its contribution."},
    };
    for (size_t m = 0; m < sizeof lm / sizeof lm[0]; m++) {
        cx_buf_printf(b, "# HELP chaosloco_syncer_%s %s\n# TYPE chaosloco_syncer_%s %s\n", lm[m][0], lm[m][2],
                      lm[m][0], lm[m][1]);
        for (int i = 0; i < MAX_LEARNERS; i++) {
            learner_rec *l = &s->learners[i];
            double v;
            if (l->id < 0 || l->incarnation == 0)
                continue;
            switch (m) {
            case 0:
                v = (double)l->step;
                break;
            case 1:
                v = (double)l->tokens;
                break;
            case 2:
                v = (double)(now - l->last_seen_ms) / 1000.0;
                break;
            case 3:
                v = (double)l->incarnation;
                break;
            case 4:
                v = l->state == LS_ACTIVE;
                break;
            case 5:
                v = (double)l->clock_skew_ms / 1000.0;
                break;
            default:
                if (l->adopted == 0)
                    continue; /* no value yet: no sample */
                v = (double)l->adopted_own / (double)l->adopted;
                break;
            }
            cx_buf_printf(b, "chaosloco_syncer_%s{learner=\"%lld\"} %.17g\n", lm[m][0], (long long)l->id, v);
        }
    }
    pthread_mutex_unlock(&s->mu);
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4";
    return 0;
}

static const cx_http_route routes[] = {
    {"POST", "/v1/join", h_join},
    {"POST", "/v1/leave", h_leave},
    {"POST", "/v1/heartbeat", h_heartbeat},
    {"POST", "/v1/end", h_end},
    {"GET", "/v1/fragments/{}", h_fragment_get},
    {"GET", "/v1/versions", h_versions},
    {"POST", "/v1/fragments/{}/contributions", h_contribution},
    {"POST", "/v1/fragments/{}/state", h_fragment_state},
    {"POST", "/v1/steps/{}/gradients", h_gradient},
    {"GET", "/v1/optimizer", h_optimizer},
    {"GET", "/v1/status", h_status},
    {"GET", "/v1/events", h_events},
    {"GET", "/metrics", h_metrics},
};
/* Control calls that get through a connection flood (http_guard.h). */
static const char *const reserved_routes[] = {"GET /v1/status", NULL};

/* ---- syncer: access ----
 *
 * Who may call which route: ONE table, checked by the server's gate before
 * any body byte is read. A route without a rule is refused (403): the table
 * fails closed, and tests/unit/test_syncer.c walks the route table.
 *   learner  a learner's credential (learner-<i>); the learner id the call
 *            names (X-Chaosloco-Learner header here, the body's "learner"
 *            in the handler) must be <i>, else 403
 *   admin    the admin credential (the harness, an operator)
 *   read     any valid credential, or none when the peer is loopback and
 *            the Host header names a loopback host (a web page reaching
 *            127.0.0.1 through DNS rebinding sends its own name)
 * A wrong credential is 401 on every route, reads included. Every POST
 * must carry Content-Type application/json or application/octet-stream
 * (415): a cross-origin form post can only send text/plain and friends.
 * Refusals are counted and logged as rejects of reason "auth", aggregated
 * like the others. --insecure-no-auth skips the credential checks (not the
 * Content-Type check) and is refused unless the syncer listens on loopback.
 */
typedef enum access_who { ACC_LEARNER, ACC_ADMIN, ACC_READ } access_who;
static const char *const access_names[] = {"learner", "admin", "read"};

typedef struct access_rule {
    const char *method;  /* as in routes[] */
    const char *pattern; /* as in routes[] */
    access_who who;      /* who may call it */
} access_rule;

static const access_rule access_rules[] = {
    {"POST", "/v1/join", ACC_LEARNER},
    {"POST", "/v1/leave", ACC_LEARNER},
    {"POST", "/v1/heartbeat", ACC_LEARNER},
    {"POST", "/v1/end", ACC_ADMIN},
    {"GET", "/v1/fragments/{}", ACC_LEARNER}, /* the model itself: learners only */
    {"GET", "/v1/optimizer", ACC_LEARNER},    /* ddp: the model and its AdamW state */
    {"GET", "/v1/versions", ACC_READ},
    {"POST", "/v1/fragments/{}/contributions", ACC_LEARNER},
    {"POST", "/v1/fragments/{}/state", ACC_LEARNER}, /* rebuild: a learner's copy of the fragment */
    {"POST", "/v1/steps/{}/gradients", ACC_LEARNER},
    {"GET", "/v1/status", ACC_READ},
    {"GET", "/v1/events", ACC_READ},
    {"GET", "/metrics", ACC_READ},
};

static const access_rule *access_find(const char *method, const char *pattern)
{
    for (size_t i = 0; i < sizeof access_rules / sizeof access_rules[0]; i++)
        if (strcmp(access_rules[i].method, method) == 0 && strcmp(access_rules[i].pattern, pattern) == 0)
            return &access_rules[i];
    return NULL;
}

size_t syncer_route_count(void)
{
    return sizeof routes / sizeof routes[0];
}

const char *syncer_route_access(size_t i, const char **method, const char **pattern)
{
    if (i >= syncer_route_count())
        return NULL;
    *method = routes[i].method;
    *pattern = routes[i].pattern;
    const access_rule *r = access_find(routes[i].method, routes[i].pattern);
    return r ? access_names[r->who] : NULL;
}

/* "application/json" or "application/octet-stream", any case, optional
 * parameters. */
static int mutating_type_ok(const char *ct)
{
    static const char *const ok[] = {"application/json", "application/octet-stream"};
    if (!ct)
        return 0;
    while (*ct == ' ')
        ct++;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t n = strlen(ok[i]);
        if (strncasecmp(ct, ok[i], n) != 0)
            continue;
        const char *t = ct + n;
        while (*t == ' ')
            t++;
        if (*t == '\0' || *t == ';')
            return 1;
    }
    return 0;
}

/* The learner id of a request's (already verified) learner credential, or
 * -1 when it carries none. */
static int64_t auth_learner_id(const cx_http_req *req)
{
    const char *h = cx_http_header(req, "Authorization");
    cred_kind k;
    int64_t id = -1;
    if (!h || strncmp(h, "Bearer ", 7) != 0 || cred_parse(h + 7, &k, &id, NULL, 0) != 0 || k != CRED_LEARNER)
        return -1;
    return id;
}

/* Refuse a call (not locked): counted as reason "auth", answered with
 * status and a message; 401s say how to authenticate. */
static void auth_refuse(syncer *s, cx_http_resp *resp, int status, int64_t learner, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void auth_refuse(syncer *s, cx_http_resp *resp, int status, int64_t learner, const char *fmt, ...)
{
    char msg[CX_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&s->mu);
    reject_note(s, PROTO_R_AUTH, learner, -1, -1, msg);
    pthread_mutex_unlock(&s->mu);
    json_t *body = json_pack("{s:s, s:i, s:s}", "error", msg, "status", status, "reason", "auth");
    if (status == 401)
        cx_http_add_header(resp, "WWW-Authenticate", "Bearer realm=\"chaosloco-syncer\"");
    cx_http_reply_json(resp, status, body);
}

/* In a handler of a learner route: the id the body names must be the
 * credential's. 1 when it may go on; 0 when it was refused (403). */
static int learner_is_caller(syncer *s, const cx_http_req *req, cx_http_resp *resp, int64_t id,
                             const char *call)
{
    if (s->insecure)
        return 1;
    int64_t who = auth_learner_id(req);
    if (who == id)
        return 1;
    /* counted against the caller, not the learner it named */
    auth_refuse(s, resp, 403, who, "%s: the credential of learner-%lld cannot act for learner %lld", call,
                (long long)who, (long long)id);
    return 0;
}

static int syncer_gate(void *ctx, cx_http_req *req, const cx_http_route *route, cx_http_resp *resp)
{
    syncer *s = ctx;
    const access_rule *rule = access_find(route->method, route->pattern);
    if (!rule) {
        auth_refuse(s, resp, 403, -1, "%s %s: no access rule for this route (refused)", route->method,
                    route->pattern);
        return CX_EAUTH;
    }
    if (strcmp(req->method, "GET") != 0 && !mutating_type_ok(cx_http_header(req, "Content-Type"))) {
        const char *ct = cx_http_header(req, "Content-Type");
        char v[64];
        cx_utf8_sanitize(ct ? ct : "(none)", v, sizeof v);
        pthread_mutex_lock(&s->mu);
        reject_note(s, PROTO_R_AUTH, -1, -1, -1, "Content-Type not application/json or octet-stream");
        pthread_mutex_unlock(&s->mu);
        cx_http_reply_error(resp, 415,
                            "%s %s: Content-Type %s: must be application/json or application/octet-stream",
                            req->method, route->pattern, v);
        return CX_EINVAL;
    }
    if (s->insecure) {
        req->auth = "insecure";
        return 0;
    }
    const char *h = cx_http_header(req, "Authorization");
    if (!h) {
        if (rule->who == ACC_READ && cx_http_peer_is_loopback(req) &&
            cx_http_host_is_loopback(cx_http_header(req, "Host"))) {
            req->auth = "loopback";
            return 0;
        }
        auth_refuse(s, resp, 401, -1, "%s %s: needs Authorization: Bearer <credential> (%s)%s", req->method,
                    route->pattern, access_names[rule->who],
                    rule->who == ACC_READ ? "; reads without one only from loopback with a loopback Host"
                                          : "");
        return CX_EAUTH;
    }
    cred_kind kind;
    int64_t id;
    char why[CX_ERRLEN];
    if (strncmp(h, "Bearer ", 7) != 0) {
        auth_refuse(s, resp, 401, -1, "%s %s: Authorization must be 'Bearer <credential>'", req->method,
                    route->pattern);
        return CX_EAUTH;
    }
    if (cred_store_check(s->creds, h + 7, &kind, &id, why, sizeof why) != 0) {
        auth_refuse(s, resp, 401, -1, "%s %s: %s", req->method, route->pattern, why);
        return CX_EAUTH;
    }
    static const char *const kind_names[] = {"learner", "admin", "read"};
    if ((rule->who == ACC_LEARNER && kind != CRED_LEARNER) ||
        (rule->who == ACC_ADMIN && kind != CRED_ADMIN)) {
        auth_refuse(s, resp, 403, id, "%s %s: needs the %s credential, not a %s one", req->method,
                    route->pattern, access_names[rule->who], kind_names[kind]);
        return CX_EAUTH;
    }
    if (rule->who == ACC_LEARNER) {
        /* the learner the headers name (tensor calls, pulls) must be the caller */
        const char *lh = cx_http_header(req, PROTO_H_LEARNER);
        int64_t named;
        if (lh && (cx_parse_i64(lh, PROTO_H_LEARNER, 0, PROTO_MAX_LEARNER_ID, &named, NULL, 0) != 0 ||
                   named != id)) {
            char v[32];
            cx_utf8_sanitize(lh, v, sizeof v);
            auth_refuse(s, resp, 403, id, "%s %s: the credential of learner-%lld cannot act for learner %s",
                        req->method, route->pattern, (long long)id, v);
            return CX_EAUTH;
        }
    }
    req->auth = kind_names[kind];
    return 0;
}

static const cx_http_gate syncer_http_gate = {.check = syncer_gate, .refused = NULL};

/* ---- syncer: eval and checkpoints (ticker thread, outside the lock) ---- */

static void run_eval(syncer *s)
{
    pthread_mutex_lock(&s->mu);
    memcpy(model_params(s->eval_model), s->theta, s->n * sizeof(float));
    int64_t merges = s->merges, tokens = s->tokens_merged;
    s->eval_pending = 0;
    pthread_mutex_unlock(&s->mu);
    double loss = model_loss(s->eval_model, s->eval_in, s->eval_tg, s->eval_n);
    pthread_mutex_lock(&s->mu);
    s->eval_loss = loss;
    s->eval_merges = merges;
    s->eval_tokens = tokens;
    s->last_eval_ms = cx_mono_ms();
    pthread_mutex_unlock(&s->mu);
    events_emit(s->ev, "eval",
                json_pack("{s:o, s:o, s:I, s:I}", "loss", isfinite(loss) ? json_real(loss) : json_null(),
                          "bpb", isfinite(loss) ? json_real(loss / M_LN2) : json_null(), "merges",
                          (json_int_t)merges, "tokens", (json_int_t)tokens));
    cx_info("eval loss=%.4f bpb=%.4f merges=%lld tokens=%lld", loss, loss / M_LN2, (long long)merges,
            (long long)tokens);
}

/* Snapshot under the lock, write outside it. */
static int write_checkpoint(syncer *s, char *err, size_t errlen)
{
    ckpt_syncer c;
    int rc = CX_ENOMEM;
    memset(&c, 0, sizeof c);
    c.n = s->n;
    c.P = s->P;
    c.params = malloc(s->n * sizeof(float));
    c.momentum = malloc(s->n * sizeof(float));
    c.versions = malloc((size_t)s->P * sizeof(int64_t));
    c.learners = calloc(MAX_LEARNERS, sizeof *c.learners);
    if (s->opt) {
        c.adam_m = malloc(s->n * sizeof(float));
        c.adam_v = malloc(s->n * sizeof(float));
    }
    if (!c.params || !c.momentum || !c.versions || !c.learners || (s->opt && (!c.adam_m || !c.adam_v)))
        goto out;
    pthread_mutex_lock(&s->mu);
    c.mode = s->cfg.mode;
    c.table_digest = fragment_table_digest(s->ft);
    c.merges = s->merges;
    c.tokens_merged = s->tokens_merged;
    c.ddp_step = s->ddp_step;
    c.event_seq = events_last_seq(s->ev);
    memcpy(c.params, s->theta, s->n * sizeof(float));
    memcpy(c.momentum, s->momentum, s->n * sizeof(float));
    memcpy(c.versions, s->versions, (size_t)s->P * sizeof(int64_t));
    if (s->opt) {
        memcpy(c.adam_m, adamw_m(s->opt), s->n * sizeof(float));
        memcpy(c.adam_v, adamw_v(s->opt), s->n * sizeof(float));
        c.adam_steps = (int64_t)adamw_steps(s->opt);
    }
    for (int i = 0; i < MAX_LEARNERS; i++)
        if (s->learners[i].id >= 0 && s->learners[i].incarnation > 0)
            c.learners[c.n_learners++] = (ckpt_learner_inc){s->learners[i].id, s->learners[i].incarnation};
    s->last_ckpt_merges = s->merges;
    s->last_ckpt_ms = cx_mono_ms();
    pthread_mutex_unlock(&s->mu);
    rc = ckpt_syncer_save(s->state_dir, &c, err, errlen);
    if (rc == 0) {
        size_t bytes = s->n * 4 * (s->opt ? 4 : 2);
        events_emit(s->ev, "checkpoint",
                    json_pack("{s:I, s:I, s:I}", "merges", (json_int_t)c.merges, "bytes", (json_int_t)bytes,
                              "generation", (json_int_t)c.generation));
    }
out:
    ckpt_syncer_cleanup(&c);
    return rc;
}

static void *ticker_main(void *arg)
{
    syncer *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += TICK_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->tick_cv, &s->mu, &ts);
        if (s->stopping)
            break;
        int64_t now = cx_mono_ms();
        /* silent learners become absent */
        for (int i = 0; i < MAX_LEARNERS; i++) {
            learner_rec *l = &s->learners[i];
            if (l->id >= 0 && l->incarnation > 0 && l->state == LS_ACTIVE &&
                now - l->last_seen_ms > s->cfg.heartbeat_timeout_ms) {
                l->state = LS_ABSENT;
                cx_warn("learner %lld incarnation %lld absent (no heartbeat for %lld ms)", (long long)l->id,
                        (long long)l->incarnation, (long long)(now - l->last_seen_ms));
                events_emit(s->ev, "drop",
                            json_pack("{s:I, s:I, s:s}", "learner", (json_int_t)l->id, "incarnation",
                                      (json_int_t)l->incarnation, "reason", "absent"));
            }
        }
        reject_flush_due(s, now, 0);
        if (is_ddp(s))
            ddp_check(s, now);
        else
            for (int p = 0; p < s->P; p++)
                round_check(s, p, now);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* The worker thread: eval and checkpoints, so that a slow eval never delays
 * a deadline or a grace window the ticker must close. */
static void *worker_main(void *arg)
{
    syncer *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->work_cv, &s->mu, &ts);
        if (s->stopping)
            break;
        rebuild_tick(s);
        int64_t now = cx_mono_ms();
        int do_eval = s->eval_pending && now - s->last_eval_ms >= s->cfg.eval_every_ms;
        /* every checkpoint_every merges, but not more often than
         * checkpoint_min_ms: a merge count alone wrote thousands of
         * checkpoints a minute (the final one in syncer_free is not gated) */
        int do_ckpt = s->cfg.checkpoint_every > 0 &&
                      s->merges - s->last_ckpt_merges >= s->cfg.checkpoint_every &&
                      (s->last_ckpt_ms == 0 || now - s->last_ckpt_ms >= s->cfg.checkpoint_min_ms);
        if (do_eval || do_ckpt) {
            pthread_mutex_unlock(&s->mu);
            if (do_eval)
                run_eval(s);
            if (do_ckpt) {
                char err[CX_ERRLEN];
                if (write_checkpoint(s, err, sizeof err) != 0)
                    cx_error("checkpoint failed: %s", err);
            }
            pthread_mutex_lock(&s->mu);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- syncer: start-up ---- */

typedef struct seen_versions {
    int64_t *v;  /* [P] newest version seen in merge events */
    int P;       /* fragments */
    int64_t ddp; /* newest ddp merge version */
} seen_versions;

static int scan_event(void *ctx, json_t *e)
{
    seen_versions *sv = ctx;
    json_t *type = json_object_get(e, "type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "merge") != 0)
        return 0;
    json_int_t f = json_integer_value(json_object_get(e, "fragment"));
    json_int_t v = json_integer_value(json_object_get(e, "version"));
    if (f == -1 && v > sv->ddp)
        sv->ddp = v;
    else if (f >= 0 && f < sv->P && v > sv->v[f])
        sv->v[f] = v;
    return 0;
}

static int restore(syncer *s, char *err, size_t errlen)
{
    ckpt_syncer c;
    char why[CX_ERRLEN];
    int rc = ckpt_syncer_load(s->state_dir, &c, s->n, s->P, fragment_table_digest(s->ft), why, sizeof why);
    s->start = START_FRESH; /* START_LOST is told from the event log later (start_log) */
    if (rc == CX_ENOTFOUND)
        return 0;
    if (rc == CX_ECORRUPT) {
        cx_warn("ignoring damaged checkpoints: %s", why);
        s->start = START_CORRUPT;
        return 0;
    }
    if (rc)
        return cx_fail(err, errlen, rc, "%s", why);
    if (c.mode != s->cfg.mode) {
        ckpt_syncer_cleanup(&c);
        return cx_fail(err, errlen, CX_EINVAL, "the checkpoint in %s is of a %s run, not %s", s->state_dir,
                       config_mode_name(c.mode), mode_name(s));
    }
    memcpy(s->theta, c.params, s->n * sizeof(float));
    memcpy(s->momentum, c.momentum, s->n * sizeof(float));
    memcpy(s->versions, c.versions, (size_t)s->P * sizeof(int64_t));
    if (s->opt && c.adam_m) {
        memcpy(adamw_m(s->opt), c.adam_m, s->n * sizeof(float));
        memcpy(adamw_v(s->opt), c.adam_v, s->n * sizeof(float));
        adamw_set_steps(s->opt, (uint64_t)c.adam_steps);
    }
    s->merges = s->last_ckpt_merges = c.merges;
    s->tokens_merged = c.tokens_merged;
    s->tokens_frag_raw = c.tokens_merged * s->P;
    s->ddp_step = c.ddp_step;
    for (int64_t i = 0; i < c.n_learners && i < MAX_LEARNERS; i++) {
        learner_rec *l = &s->learners[i];
        memset(l, 0, sizeof *l);
        l->id = c.learners[i].learner;
        l->incarnation = c.learners[i].incarnation;
        l->state = LS_ABSENT; /* until it is heard from */
        l->last_seen_ms = cx_mono_ms();
        l->ddp_arrived = l->ddp_dropped = -1;
        l->batch = s->cfg.batch;
        l->steps_total = s->cfg.steps;
    }
    events_set_seq_floor(s->ev, c.event_seq);
    s->ckpt_event_seq = c.event_seq;
    s->start = START_RESTORED;
    cx_info("restored checkpoint generation=%lld merges=%lld ddp_step=%lld", (long long)c.generation,
            (long long)c.merges, (long long)c.ddp_step);
    ckpt_syncer_cleanup(&c);
    return 1;
}

/* Versions never go backwards: merges published after the checkpoint (and
 * lost with the process) were logged; restart above them. Only the events
 * after the checkpoint's seq are read (events_foreach_file bisects to
 * them), so a restart costs the history since the last checkpoint, not the
 * run's. */
static void bump_versions(syncer *s)
{
    seen_versions sv = {calloc((size_t)s->P, sizeof(int64_t)), s->P, -1};
    if (!sv.v)
        return;
    for (int p = 0; p < s->P; p++)
        sv.v[p] = -1;
    events_foreach_file(s->ev, s->ckpt_event_seq, "merge", scan_event, &sv);
    for (int p = 0; p < s->P; p++) {
        int64_t seen = is_ddp(s) ? sv.ddp : sv.v[p];
        if (seen >= s->versions[p]) {
            cx_warn(
                "fragment %d: version %lld was published after the checkpoint (at %lld); continuing at %lld",
                p, (long long)seen, (long long)s->versions[p], (long long)(seen + 1));
            s->versions[p] = seen + 1;
        }
    }
    free(sv.v);
}

/* Say what the state dir held (a fresh run, lost or corrupt checkpoints,
 * or a restore) and remember the start versions: the bar above which a
 * learner's report is newer (see "syncer: rebuild from the learners"). */
static void start_log(syncer *s, int64_t before_bump)
{
    int64_t after = 0;
    for (int p = 0; p < s->P; p++) {
        s->rbf[p].start_version = s->versions[p];
        s->rbf[p].want_learner = s->rbf[p].got_learner = -1;
        after += s->versions[p];
    }
    if (s->start == START_FRESH && after > before_bump)
        s->start = START_LOST; /* merges in the log, no checkpoint: it was lost */
    s->rb_guard = s->start != START_RESTORED || after > before_bump;
    switch (s->start) {
    case START_FRESH:
        cx_info("state dir %s holds no checkpoint and no merge: starting from the initial model (learners "
                "that report trained fragments at join will rebuild it, --on-lost-state %s)",
                s->state_dir, s->on_lost_state == SYNCER_LOST_REFUSE ? "refuse" : "rebuild");
        break;
    case START_LOST:
    case START_CORRUPT:
        cx_warn("state dir %s: checkpoints %s; the global state will come from the learners' copies "
                "(--on-lost-state %s)",
                s->state_dir, s->start == START_LOST ? "lost (the event log shows merges)" : "damaged",
                s->on_lost_state == SYNCER_LOST_REFUSE ? "refuse" : "rebuild");
        break;
    case START_RESTORED:
        /* merges (ddp: steps) were published after the checkpoint: the
         * learners hold them. Make every known learner rejoin (its calls
         * answer 409 stale_incarnation) so that it reports what it holds. */
        if (after > before_bump) {
            for (int i = 0; i < MAX_LEARNERS; i++)
                if (s->learners[i].id >= 0 && s->learners[i].incarnation > 0)
                    s->learners[i].must_rejoin = 1;
            cx_warn("merges were published after the restored checkpoint: learners must rejoin and report "
                    "their copies (newer ones rebuild those fragments)");
        }
        break;
    }
}

syncer *syncer_new(const syncer_opts *o, char *err, size_t errlen)
{
    syncer *s = calloc(1, sizeof *s);
    char path[1200], why[CX_ERRLEN];
    if (!s) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        return NULL;
    }
    s->cfg = o->cfg;
    s->start_ms = cx_mono_ms();
    s->eval_loss = NAN;
    s->ddp_mean_step = -1;
    snprintf(s->state_dir, sizeof s->state_dir, "%s", o->state_dir);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->frag_cv, NULL);
    pthread_cond_init(&s->step_cv, NULL);
    pthread_cond_init(&s->tick_cv, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    for (int i = 0; i < MAX_LEARNERS; i++)
        s->learners[i].id = -1;
    if (cx_mkdir_p(o->state_dir, err, errlen) != 0)
        goto fail;
    s->insecure = o->insecure_no_auth;
    if (!s->insecure) {
        char cdir[1200];
        if (o->credentials_dir) {
            snprintf(cdir, sizeof cdir, "%s", o->credentials_dir);
        } else {
            /* secure by default: the first start makes them, restarts keep them */
            snprintf(cdir, sizeof cdir, "%s/credentials", o->state_dir);
            if (cred_dir_create(cdir, s->cfg.learners, err, errlen) != 0)
                goto fail;
        }
        s->creds = cred_store_load(cdir, err, errlen);
        if (!s->creds)
            goto fail;
        cx_info("credentials: %s (%d learners, admin%s)", cdir, cred_store_learners(s->creds), "");
    } else {
        cx_warn("--insecure-no-auth: every caller may act as any learner or the admin");
    }

    model_config mc;
    config_model_config(&s->cfg, INT64_MAX, &mc); /* the eval set: chunks of the cap */
    s->eval_model = model_new(config_model_name(s->cfg.model), &mc, (uint64_t)s->cfg.seed, err, errlen);
    if (!s->eval_model)
        goto fail;
    s->n = model_num_params(s->eval_model);
    s->P = (int)s->cfg.fragments;
    s->ft =
        fragment_table_new(model_tensors(s->eval_model), model_num_tensors(s->eval_model), s->P, err, errlen);
    if (!s->ft)
        goto fail;
    size_t max_frag = 1;
    for (int p = 0; p < s->P; p++)
        if (fragment_length(s->ft, p) > max_frag)
            max_frag = fragment_length(s->ft, p);
    s->mws = merge_ws_new(max_frag, MAX_LEARNERS, err, errlen);
    if (!s->mws)
        goto fail;

    data_config dc;
    data_config_default(&dc);
    dc.path = s->cfg.data[0] ? s->cfg.data : NULL;
    dc.seed = (uint64_t)s->cfg.seed;
    s->data = data_source_new(&dc, err, errlen);
    if (!s->data)
        goto fail;
    s->entropy_floor = data_entropy_rate(s->data);
    size_t cap = data_eval_capacity(s->data, (int)s->cfg.context);
    s->eval_n = (int)((size_t)s->cfg.eval_tokens < cap ? (size_t)s->cfg.eval_tokens : cap);
    s->eval_in = malloc((size_t)s->eval_n * (size_t)s->cfg.context);
    s->eval_tg = malloc((size_t)s->eval_n);
    s->theta = malloc(s->n * sizeof(float));
    s->momentum = calloc(s->n, sizeof(float));
    s->versions = calloc((size_t)s->P, sizeof(int64_t));
    s->rounds = calloc((size_t)s->P, sizeof *s->rounds);
    s->hist = calloc((size_t)s->P, sizeof *s->hist);
    s->pull_step = calloc((size_t)MAX_LEARNERS * (size_t)s->P, sizeof *s->pull_step);
    s->own_ver = malloc((size_t)MAX_LEARNERS * (size_t)s->P * sizeof *s->own_ver);
    s->rbf = calloc((size_t)s->P, sizeof *s->rbf);
    s->rb_rep = calloc((size_t)MAX_LEARNERS * (size_t)s->P, sizeof *s->rb_rep);
    s->on_lost_state = o->on_lost_state;
    if (!s->eval_in || !s->eval_tg || !s->theta || !s->momentum || !s->versions || !s->rounds || !s->hist ||
        !s->pull_step || !s->own_ver || !s->rbf || !s->rb_rep) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        goto fail;
    }
    if (data_eval_examples(s->data, (int)s->cfg.context, (size_t)s->eval_n, s->eval_in, s->eval_tg, err,
                           errlen))
        goto fail;
    memcpy(s->theta, model_params(s->eval_model), s->n * sizeof(float));
    for (int p = 0; p < s->P; p++) {
        merge_ema_init(&s->rounds[p].t_quorum, 0.2);
        merge_ema_init(&s->rounds[p].t_sync, 0.2);
        s->rounds[p].closed_id = -1;
    }
    for (size_t i = 0; i < (size_t)MAX_LEARNERS * (size_t)s->P; i++)
        s->own_ver[i] = -1;
    /* error-feedback residuals of the downstream deltas: in memory only (a
     * restart resets them; the canonical theta is what is checkpointed) */
    if (!is_ddp(s) && (encoding_kind)s->cfg.encoding != ENCODING_F32)
        for (int p = 0; p < s->P; p++)
            if (!(s->hist[p].resid = calloc(fragment_length(s->ft, p), sizeof(float)))) {
                cx_fail(err, errlen, CX_ENOMEM, "out of memory");
                goto fail;
            }
    if (is_ddp(s)) {
        adamw_config ac;
        adamw_config_default(&ac);
        ac.weight_decay = (float)s->cfg.weight_decay;
        s->opt = adamw_new(s->n, &ac, err, errlen);
        if (!s->opt)
            goto fail;
        for (int i = 0; i < model_num_tensors(s->eval_model); i++) {
            const model_tensor *t = model_tensor_get(s->eval_model, i);
            adamw_set_decay(s->opt, t->offset, t->length, t->weight_decay, NULL, 0);
        }
        s->ddp_sum = calloc(s->n, sizeof(float));
        s->ddp_mean = calloc(s->n, sizeof(float));
        s->ddp_mean_wire = malloc(s->n * 4);
        if (!s->ddp_sum || !s->ddp_mean || !s->ddp_mean_wire) {
            cx_fail(err, errlen, CX_ENOMEM, "out of memory");
            goto fail;
        }
    }
    snprintf(path, sizeof path, "%s/events.jsonl", o->state_dir);
    s->ev = events_new(path, 65536, err, errlen);
    if (!s->ev)
        goto fail;
    int restored = restore(s, err, errlen);
    if (restored < 0)
        goto fail;
    for (int p = 0; p < s->P; p++)
        s->rbf[p].ckpt_version = s->versions[p];
    int64_t before_bump = 0;
    for (int p = 0; p < s->P; p++)
        before_bump += s->versions[p];
    bump_versions(s);
    start_log(s, before_bump);

    json_t *vers = json_array();
    for (int p = 0; p < s->P; p++)
        json_array_append_new(vers, json_integer(s->versions[p]));
    events_emit(s->ev, "start",
                json_pack("{s:s, s:b, s:s, s:I, s:o, s:I, s:I, s:I}", "mode", mode_name(s), "restored",
                          restored, "start_state", start_kind_names[s->start], "merges",
                          (json_int_t)s->merges, "versions", vers, "learners", (json_int_t)s->cfg.learners,
                          "n_params", (json_int_t)s->n, "log_bytes_read",
                          (json_int_t)events_read_bytes(s->ev)));
    double h0, h1;
    data_order_entropies(s->data, &h0, &h1);
    cx_info("model %s params=%zu fragments=%d data=%s loss_floor=%.4f nats order0=%.3f order1=%.3f bits/byte",
            model_kind(s->eval_model), s->n, s->P, data_source_describe(s->data), s->entropy_floor, h0, h1);
    run_eval(s);

    size_t body_max = s->n * 4 + (1 << 20);
    cx_http_server_opts hopts = {.reserved = reserved_routes, .gate = &syncer_http_gate};
    if (o->tls_cert || o->tls_key) {
        size_t len;
        if (!o->tls_cert || !o->tls_key) {
            cx_fail(err, errlen, CX_EINVAL, "--tls-cert and --tls-key go together");
            goto fail;
        }
        /* the key is a secret: refused when group/others may read it, as a
         * credential file is (docs/security.md) */
        if (cx_file_read(o->tls_cert, 1 << 20, &s->tls_cert, &len, why, sizeof why) != 0 ||
            cred_read_private_file(o->tls_key, "--tls-key file", 1 << 20, &s->tls_key, &len, why,
                                   sizeof why) != 0) {
            cx_fail(err, errlen, CX_EINVAL, "TLS: %s", why);
            goto fail;
        }
        hopts.tls_cert_pem = s->tls_cert;
        hopts.tls_key_pem = s->tls_key;
    }
    s->http = cx_http_server_new_opts(o->listen, routes, sizeof routes / sizeof routes[0], s, body_max,
                                      &hopts, why, sizeof why);
    if (!s->http) {
        cx_fail(err, errlen, CX_EUNAVAIL, "--listen %s: %s", o->listen, why);
        goto fail;
    }
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", cx_http_server_port(s->http));
    snprintf(path, sizeof path, "%s/listen.addr", o->state_dir);
    if (cx_file_write_atomic(path, addr, strlen(addr), err, errlen) != 0)
        goto fail;
    if (pthread_create(&s->ticker, NULL, ticker_main, s) != 0) {
        cx_fail(err, errlen, CX_ESYS, "cannot start the ticker thread");
        goto fail;
    }
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        pthread_mutex_lock(&s->mu);
        s->stopping = 1;
        pthread_cond_broadcast(&s->tick_cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->ticker, NULL);
        cx_fail(err, errlen, CX_ESYS, "cannot start the worker thread");
        goto fail;
    }
    s->ticker_started = 1;
    cx_info("listening on %s (mode %s, %lld learners expected)", addr, mode_name(s),
            (long long)s->cfg.learners);
    return s;
fail:
    syncer_free(s);
    return NULL;
}

void syncer_run(syncer *s, volatile sig_atomic_t *stop)
{
    while (!*stop)
        cx_sleep_ms(50);
}

void syncer_free(syncer *s)
{
    if (!s)
        return;
    int was_running = s->ticker_started;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->frag_cv);
    pthread_cond_broadcast(&s->step_cv);
    pthread_cond_broadcast(&s->tick_cv);
    pthread_cond_broadcast(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->ticker_started) {
        pthread_join(s->ticker, NULL);
        pthread_join(s->worker, NULL);
    }
    cx_http_server_free(s->http);
    if (s->ev) {
        pthread_mutex_lock(&s->mu);
        reject_flush_due(s, cx_mono_ms(), 1);
        pthread_mutex_unlock(&s->mu);
    }
    if (was_running) {
        if (s->eval_pending)
            run_eval(s);
        char err[CX_ERRLEN];
        if (write_checkpoint(s, err, sizeof err) != 0)
            cx_error("final checkpoint failed: %s", err);
        else
            cx_info("final checkpoint written (merges=%lld)", (long long)s->merges);
    }
    for (int p = 0; s->rounds && p < s->P; p++)
        for (int i = 0; i < s->rounds[p].n; i++)
            free(s->rounds[p].c[i].delta);
    for (int p = 0; s->hist && p < s->P; p++) {
        hist_clear(&s->hist[p]);
        free(s->hist[p].resid);
    }
    free(s->hist);
    free(s->pull_step);
    free(s->own_ver);
    for (int p = 0; s->rbf && p < s->P; p++)
        free(s->rbf[p].vals);
    free(s->rbf), free(s->rb_rep);
    events_free(s->ev);
    cred_store_free(s->creds);
    free(s->tls_cert);
    if (s->tls_key)
        memset(s->tls_key, 0, strlen(s->tls_key));
    free(s->tls_key);
    model_free(s->eval_model);
    data_source_free(s->data);
    fragment_table_free(s->ft);
    merge_ws_free(s->mws);
    adamw_free(s->opt);
    free(s->eval_in), free(s->eval_tg), free(s->theta), free(s->momentum), free(s->versions), free(s->rounds);
    free(s->ddp_sum), free(s->ddp_mean), free(s->ddp_mean_wire);
    pthread_cond_destroy(&s->frag_cv);
    pthread_cond_destroy(&s->step_cv);
    pthread_cond_destroy(&s->tick_cv);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
