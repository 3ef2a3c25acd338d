/* rounds.h - the syncer's rounds component: per-fragment rounds of the
 * diloco and decoupled modes.
 *
 * Owns: s->rounds (struct syncer_rounds): each fragment's round (held
 * contributions, grace, timings; the state machine is drawn in rounds.c),
 * the round and merge counters, the ring of recent merges, the
 * per-learner contribution tables (own_ver, acc_step, acc_inc). rounds.c
 * is its only writer; rounds_pace.c (the grace window and the stagger
 * schedule's position) and the other components read it.
 * Operations: a contribution joins its round (its route), a round moves on
 * its state machine (rounds_check, the ticker's), a merge is noted (also
 * the merge counters s->merges and s->eval_pending, still shared), the
 * stagger schedule's position, and what the other components tell it: a
 * learner joined, a fragment was rebuilt, a fragment pulled, a gradient
 * clipped, the norm rings restored.
 * Lock: everything here wants s->mu held, except the route handler, which
 * takes it.
 * What it is not: the downstream encoding of a merged fragment (deltas.h)
 * nor the ddp barrier (ddp.h), which notes its steps here.
 */
#ifndef TRN_SYNCER_ROUNDS_H
#define TRN_SYNCER_ROUNDS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/json.h"
#include "numerics/merge.h"
#include "numerics/round.h"
#include "trainer/protocol.h"
#include "trainer/syncer/api.h"
#include "trainer/syncer/guard.h"
#include "trainer/syncer/members.h"

#define RECENT_MERGES 16

typedef enum round_state { RS_IDLE = 0, RS_COLLECTING, RS_GRACE } round_state;
extern const char *const rounds_state_names[]; /* rounds.c */

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

typedef struct frag_round {
    round_state state;
    guard_norms norms;       /* accepted contributions' norms (guard.h) */
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

typedef struct merge_note {
    int64_t fragment;               /* -1 for a ddp step */
    int64_t version;                /* version produced */
    int64_t t_mono_ms;              /* when */
    int n;                          /* participants */
    int64_t learners[MAX_LEARNERS]; /* ids */
} merge_note;

/* The rounds component's state; rounds.c is its only writer. */
typedef struct syncer_rounds {
    frag_round *frag;       /* [P] each fragment's round (diloco/decoupled) */
    int64_t *own_ver;       /* [MAX_LEARNERS * P] the learner's last accepted contribution to p: -1
                               none pending, 0 not merged yet, > 0 the version that merged it (reset
                               at a pull) */
    int64_t *acc_step;      /* [MAX_LEARNERS * P] step (X-Chaosloco-Step) of the learner's last
                               accepted contribution to p, any incarnation; -1 none or unknown (join
                               answer) */
    int64_t *acc_inc;       /* [MAX_LEARNERS * P] the incarnation that sent it (0 none) */
    int64_t merged;         /* diloco/decoupled rounds merged */
    int64_t parts;          /* contributions merged in them */
    int64_t lagged;         /* contributions accepted whose base was behind the fragment's version */
    int64_t lag_sum;        /* sum of their lags (versions behind) over every accepted contribution */
    int64_t stale_rejected; /* contributions refused as stale (base too many rounds behind, or ahead) */
    int64_t merges_refused; /* merges whose result was not finite or bounded: never applied */
    int64_t clipped_total;  /* contributions (and ddp gradients) accepted scaled down to the norm limit */
    int64_t last_merge_ms;  /* mono ms of the last merge (0: none yet) */
    int64_t longest_gap_ms; /* longest gap between two merges, ms */
    merge_note recent[RECENT_MERGES]; /* ring of recent merges */
    int64_t recent_n;                 /* merges noted (ring index = n % RECENT_MERGES) */
} syncer_rounds;

/* Set up s->rounds at start-up (s->P known): every round idle, no
 * contribution known. 0, or -1 with err. */
int rounds_init(syncer *s, char *err, size_t errlen);
/* Free what rounds_init allocated (a partial init too) and the
 * contributions the rounds hold. */
void rounds_cleanup(syncer *s);
/* Restore fragment p's ring of accepted norms from its saved form j
 * (guard_norms_parse; before serving). 0, or -1 with err. */
int rounds_load_norms(syncer *s, int p, json_t *j, char *err, size_t errlen);
/* Fragment p was replaced wholesale (a rebuild): its round drops what it
 * holds and is idle (mu held). */
void rounds_forget(syncer *s, int p);
/* A new learner id took slot: nothing of it was accepted (mu held). */
void rounds_learner_new(syncer *s, int slot);
/* The learner in slot joined: it pulls every fragment, so none holds its
 * own pending contribution (mu held). */
void rounds_learner_joined(syncer *s, int slot);
/* The learner in slot pulled a merged fragment p: what own_ver said
 * (-1 none, 0 pending, > 0 the version that merged its contribution),
 * which is reset to -1 (mu held). */
int64_t rounds_own_take(syncer *s, int slot, int p);
/* A ddp gradient was accepted scaled down to its norm limit (mu held). */
void rounds_note_clipped(syncer *s);
/* The grace window of round p reaching its quorum now, ms (mu held;
 * rounds_pace.c). */
double rounds_grace_ms(const syncer *s, int p);
/* Record a merge (fragment -1: a ddp step) of version by the learners ids[n]
 * in the recent ring, the merge counters and gap, and wake the worker for
 * eval and checkpoints (mu held). */
void rounds_note_merge(syncer *s, int64_t fragment, int64_t version, const int64_t *ids, int n);
/* Where the stagger schedule is now (mu held): the mean over the active
 * learners other than slot `except` of their last round's schedule step
 * plus the steps run since at their measured pace; 0 without an estimate.
 * A joining learner takes it as its schedule position. */
int64_t rounds_schedule_step_now(const syncer *s, int except, int64_t now);
/* Move round p along its state machine after a contribution arrived or
 * time passed (mu held; the ticker calls it every tick). */
void rounds_check(syncer *s, int p, int64_t now);
/* What an accepted contribution did (rounds_contribute). */
typedef struct rounds_contribution {
    int64_t version;           /* the fragment's version when it arrived (it merges into version + 1) */
    int64_t round;             /* the round it joined */
    int64_t lag;               /* versions its base was behind */
    double norm_in;            /* L2 norm of its delta as sent (after the share of a repeat) */
    double norm;               /* ... as merged (after clipping) */
    double limit;              /* the norm limit it was held to (INFINITY: none) */
    double factor;             /* the clip factor (1: not clipped) */
    char bound_why[CX_ERRLEN]; /* where the limit came from */
    int64_t w_steps;           /* steps it weighs in its merge */
    int64_t w_tokens;          /* tokens it weighs */
    char why[CX_ERRLEN];       /* the refusal's detail (a reason other than PROTO_OK) */
} rounds_contribution;

/* A decoded, finite contribution to fragment p joins its round (mu held;
 * takes delta of fragment_length floats, which may be rescaled in place,
 * and body_len, the bytes it came in): the learner and incarnation must
 * be current, its base version one the mode accepts, its claim possible
 * (h's steps and tokens are cut to the steps not accepted before). Its
 * size is clipped to the norm limit, never refused. PROTO_OK and *out,
 * or the refusal's reason with out->why (counted: bytes in, stale; the
 * caller answers it with members_reject). It does not move the round:
 * the caller calls rounds_check. */
proto_reason rounds_contribute(syncer *s, int p, proto_hdr *h, float *delta, size_t body_len,
                               rounds_contribution *out);
/* POST /v1/fragments/{p}/contributions: a learner's delta joins its round. */
SYNCER_HANDLER(rounds_route_contribution);

#endif
