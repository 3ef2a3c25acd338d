/* members.h - the syncer's members component: the learner slots.
 *
 * Owns: s->members (struct syncer_members): one learner_rec per slot, the
 * rejection counters and their aggregation, the run's end, the tokens
 * closed incarnations trained and the lost fragment-steps of restarts.
 * members.c is its only writer; the other components read it (const) and
 * change a slot through the members_note_* operations below.
 * Operations: join, leave, heartbeat, end (their routes), the check of a
 * request's learner and incarnation, the barrier's head count, the
 * rejection path (count, log, answer) and its reason -> status table,
 * absence (the ticker's), restore from a checkpoint, and what the other
 * components note on a slot (an accepted contribution or gradient, a ddp
 * step closed without it, a pull of its own merge).
 * Lock: every operation wants s->mu held unless it says it takes it (the
 * route handlers take it themselves), or runs before serving.
 * What it is not: the rebuild's view of a join (rebuild.h) nor the rounds'
 * per-learner contribution tables (s->rounds.own_ver, s->rounds.acc_step: rounds.h).
 */
#ifndef TRN_SYNCER_MEMBERS_H
#define TRN_SYNCER_MEMBERS_H

#include <stdint.h>

#include "common/http_server.h"
#include "numerics/merge.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/protocol.h"
#include "trainer/syncer/api.h"
#include "trainer/syncer/rebuild.h"

#define MAX_LEARNERS CONFIG_LEARNERS_MAX
#define INCARNATION_MAX_STEP 1000 /* a join may name an incarnation at most this far above the current */
#define T_REAL_MAX_MS 253402300799999LL /* 9999-12-31T23:59:59.999Z: bound of heartbeat t_real_ms */
#define REJECT_EVENT_MS 1000            /* at most one reject event per reason per this interval */

typedef enum learner_state { LS_ACTIVE = 0, LS_ABSENT, LS_LEFT } learner_state;
extern const char *const members_state_names[]; /* members.c */

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
    int64_t clipped;          /* of those accepted, scaled down to the norm limit (guard.h) */
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

/* The members component's state; members.c is its only writer. */
typedef struct syncer_members {
    learner_rec learners[MAX_LEARNERS]; /* slots, id -1 = free */
    int64_t rejects[PROTO_R_COUNT];     /* rejections by reason */
    reject_agg ragg[PROTO_R_COUNT];     /* rejections not yet logged, by reason */
    int64_t tokens_trained_closed; /* tokens trained by incarnations that ended (members_tokens_trained) */
    int64_t lost_frag_steps;  /* steps a restarted learner trained and never sent, summed over fragments */
    int64_t lost_frag_tokens; /* ... their tokens */
    int ended;                /* 1 after POST /v1/end: learners are told to finish */
    int64_t end_ms;           /* mono ms of the first POST /v1/end (0 none) */
    char end_reason[128];     /* its reason ("" none) */
} syncer_members;

/* Set up s->members at start-up: every slot free, nothing counted. */
void members_init(syncer *s);
/* Take the learners of a restored checkpoint (before serving): each of
 * its ids in a slot with its incarnation, absent until heard from, and
 * the tokens trained so far. */
void members_restore(syncer *s, const ckpt_syncer *c);
/* Every known learner must rejoin and report what it holds (a restore
 * older than the log; before serving). */
void members_require_rejoin(syncer *s);
/* Active learners silent for longer than the heartbeat timeout become
 * absent, with a drop event each (mu held; the ticker). */
void members_check_absent(syncer *s, int64_t now);
/* The learner in slot had a contribution accepted: it said it ran to step
 * (-1: not said), and it was clipped (1) or not (mu held). */
void members_note_contribution(syncer *s, int slot, int64_t step, int clipped);
/* Its contribution carried schedule step cstep, now: its wall time per
 * inner step is measured between contributions at least H schedule steps
 * apart (mu held; decoupled pacing, rounds_schedule_step_now). */
void members_note_pace(syncer *s, int slot, int64_t cstep, int64_t now);
/* The learner in slot had its gradient of ddp step t accepted (clipped: 1
 * when it was scaled down) (mu held). */
void members_note_gradient(syncer *s, int slot, int64_t t, int clipped);
/* Ddp step t closed without the learner in slot (mu held). */
void members_note_ddp_dropped(syncer *s, int slot, int64_t t);
/* Every learner's ddp arrivals and drops are forgotten (a rebuild restarts
 * the step count) (mu held). */
void members_ddp_forget(syncer *s);
/* The learner in slot pulled a merged fragment after contributing to it;
 * own: 1 when the version contained its contribution (mu held). */
void members_note_adopted(syncer *s, int slot, int own);

/* Tokens the learners trained this run (mu held): each incarnation from the
 * token count it joined with to the last one it reported, so steps trained
 * again after a restart count again (merge efficiency = tokens_merged / this,
 * docs/api.md). Kept in the checkpoint. */
int64_t members_tokens_trained(const syncer *s);
/* Learners that joined and have not left (only_active: and are not absent)
 * (mu held). */
int members_count(const syncer *s, int only_active);
/* How many learners a barrier waits for. Strict barriers (ddp, diloco
 * without deadline) wait for all M except those that finished; elastic ones
 * for the learners currently alive (mu held). */
int members_barrier_need(const syncer *s);
/* Check learner + incarnation of a request (mu held). Returns PROTO_OK and
 * *slot, or the reject reason. */
proto_reason members_check(syncer *s, int64_t id, int64_t inc, int *slot);
/* A request from the learner in slot arrived now: it is seen, and active
 * again if it was absent (mu held). */
void members_touch(syncer *s, int slot);
/* The HTTP status a rejection of reason r is answered with. */
int members_reason_status(proto_reason r);
/* Flush every reason whose interval is over (mu held; the ticker, and
 * syncer_free with force). */
void members_reject_flush_due(syncer *s, int64_t now, int force);
/* Count a rejection and log it (mu held): the first of a reason in an
 * interval is written at once, the others are counted into one event when
 * the interval ends, so a flood of bad requests grows events.jsonl and the
 * log by O(1) lines per second. */
void members_reject_note(syncer *s, proto_reason r, int64_t learner, int64_t inc, int64_t fragment,
                         const char *detail);
/* Count, log and answer a rejection (locked: 1 when the caller holds mu,
 * 0 to take it). */
void members_reject(syncer *s, cx_http_resp *resp, proto_reason r, int64_t learner, int64_t inc,
                    int64_t fragment, const char *detail, int locked);
/* A decoded join (POST /v1/join): the learner's id, the incarnation it
 * names, the step it resumes at, its token count (-1: not said), and what
 * it holds (rebuild_parse_holds: P versions, CRCs, published, sealed; all
 * NULL without a report); upload: room for P fragment ids. */
typedef struct members_join_req {
    int64_t id;         /* learner id */
    int64_t inc;        /* incarnation it names */
    int64_t step;       /* step it resumes at */
    int64_t tokens;     /* tokens it trained (-1: not said) */
    const int64_t *hv;  /* [P] versions it holds, or NULL */
    const uint32_t *hc; /* [P] their CRC32C */
    const int64_t *hp;  /* [P] the highest version it saw published */
    const int *hs;      /* [P] 1: the report carries this syncer's seal */
    int *upload;        /* [P] out: fragments to upload (MEMBERS_JOIN_REBUILD) */
} members_join_req;

/* What a join did. */
typedef enum members_join_verdict {
    MEMBERS_JOIN_OK = 0,      /* joined: res.incarnation is its new one */
    MEMBERS_JOIN_INC_TOO_FAR, /* the incarnation named is more than INCARNATION_MAX_STEP above
                                 res.incarnation (its current): nothing changed (400) */
    MEMBERS_JOIN_FULL,        /* a new id, and res.known others fill the run's M: nothing changed (409) */
    MEMBERS_JOIN_REBUILD,     /* joined, but the rebuild holds it (res.rb: collecting, upload
                                res.n_up fragments; refused) (503) */
} members_join_verdict;

typedef struct members_join_res {
    int slot;              /* its slot (OK, REBUILD) */
    int64_t incarnation;   /* its new incarnation (OK, REBUILD); its current (INC_TOO_FAR) */
    int known;             /* ids known (FULL) */
    rebuild_state rb;      /* the rebuild's answer (REBUILD) */
    int n_up;              /* fragments in req.upload (REBUILD, collecting) */
    int64_t schedule_step; /* decoupled: the stagger schedule's step it starts at (OK) */
    json_t *lost;          /* the `lost` event to emit (new reference), or NULL (OK, REBUILD) */
} members_join_res;

/* Join the learner in->id (mu held): a slot (a new id takes a free one
 * while fewer than M ids are known), a new incarnation above both its
 * current and the one it names, its counters reset for the incarnation,
 * and the rebuild's view of what it holds (rebuild_join). The caller
 * emits res.lost after dropping mu and answers by the verdict. */
members_join_verdict members_join(syncer *s, const members_join_req *in, members_join_res *out);
/* POST /v1/join, /v1/leave, /v1/heartbeat. */
SYNCER_HANDLER(members_route_join);
SYNCER_HANDLER(members_route_leave);
SYNCER_HANDLER(members_route_heartbeat);
/* POST /v1/end: end the run gracefully (learners finish and leave);
 * idempotent. */
SYNCER_HANDLER(members_route_end);

#endif
