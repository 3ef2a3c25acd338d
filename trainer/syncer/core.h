/* core.h - the syncer's core: struct syncer, the model it serves and the
 * lock that guards it; the components' state lives in it by their structs'
 * fields (see each component's header for what it owns).
 *
 * What it is: the private state of the syncer, shared by the files of
 * trainer/syncer/. What it is not: an interface. Nothing outside
 * trainer/syncer/ includes it but the unit tests of the components
 * (tests/unit/test_syncer_*.c), which drive them without HTTP through
 * syncer_core_new; the public face is trainer/syncer.h. The locking rule
 * of core.c's design notes holds for everything here: one mutex, s->mu,
 * guards every field below the "shared state" line of struct syncer, and
 * each function says whether it wants s->mu held ("mu held") or takes it.
 *
 * The components, one file (and header) each:
 *   core.c        lifecycle (new/run/free), ticker and worker threads
 *   members.c     learner slots: join, leave, heartbeat, end, rejections
 *   rounds.c      per-fragment rounds (diloco, decoupled): contributions, grace, merge
 *   rounds_pace.c (part of rounds) the grace window and the stagger schedule's position
 *   rounds_route.c (part of rounds) POST /v1/fragments/{p}/contributions
 *   deltas.c      downstream deltas, GET /v1/fragments/{p}, GET /v1/versions
 *   ddp.c         ddp barrier: gradients, step completion, GET /v1/optimizer
 *   rebuild.c     rebuild from the learners, POST /v1/fragments/{p}/state
 *   durability.c  eval, checkpoints, restore and version bump at start-up
 *   holds.c       the fair share of waiting requests
 *   api.c         route and access tables, HTTP helpers, status, events, listen
 *   metrics.c     GET /metrics (part of api)
 *   guard.c       what one contribution weighs, how large it may be, whether a merge's
 *                 result may be applied (no syncer state: rounds, ddp and durability call it)
 *   main.c        the `chaosloco syncer` subcommand
 * The split of struct syncer into one struct per component, each written
 * only by its component, has begun: s->members (members.h), s->rounds
 * (rounds.h), s->ddp (ddp.h), s->holds (holds.h), s->deltas (deltas.h),
 * s->access (api.h), s->rebuild (rebuild.h) and s->dur (durability.h);
 * the flat fields below them are still shared (their owner is named in
 * its component's header). Written by several components today, so still
 * flat: versions (rounds, ddp, durability, rebuild), merges
 * (rounds_note_merge, durability), tokens_merged and tokens_frag_raw
 * (rounds, durability), bytes_in (rounds, ddp, rebuild), bytes_out (ddp,
 * deltas), accepted_total (rounds, ddp).
 * Exported names carry their component's prefix: members_, rounds_,
 * deltas_, ddp_, rebuild_, dur_, holds_, guard_, syncer_api_ (api), and
 * syncer_ (core); route handlers are <component>_route_<name>.
 */
#ifndef TRN_SYNCER_CORE_H
#define TRN_SYNCER_CORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/http_server.h"
#include "numerics/data.h"
#include "numerics/fragment.h"
#include "numerics/merge.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "trainer/config.h"
#include "trainer/events.h"
#include "trainer/protocol.h"
#include "trainer/syncer.h"
#include "trainer/syncer/api.h"
#include "trainer/syncer/ddp.h"
#include "trainer/syncer/deltas.h"
#include "trainer/syncer/durability.h"
#include "trainer/syncer/holds.h"
#include "trainer/syncer/members.h"
#include "trainer/syncer/rebuild.h"
#include "trainer/syncer/rounds.h"

#define TICK_MS 20 /* the ticker's period, ms */

struct syncer {
    config cfg;           /* effective config (never changes) */
    char state_dir[1024]; /* checkpoints, events, listen.addr */
    model *eval_model;    /* ticker only: params are a snapshot of theta */
    data_source *data;    /* corpus (eval split) */
    uint8_t *eval_in;     /* [eval_n, C] */
    uint8_t *eval_tg;     /* [eval_n] */
    int eval_n;           /* eval examples */
    double entropy_floor; /* nats, NAN for a file */
    fragment_table *ft;   /* fragments of the model */
    merge_ws *mws;        /* round_merge's buffers (largest fragment, MAX_LEARNERS); mu */
    size_t n;             /* parameters */
    int P;                /* fragments */
    events *ev;           /* the event log */
    cx_http_server *http; /* the API */
    pthread_t ticker;     /* deadlines, absent learners */
    pthread_t worker;     /* eval, checkpoints */
    int ticker_started;   /* 1 once ticker and worker run */
    int64_t start_ms;     /* mono ms at start */

    /* ---- shared state (under mu) ---- */
    pthread_mutex_t mu;
    pthread_cond_t frag_cv, step_cv, tick_cv, work_cv;
    int stopping;            /* 1: handlers return, ticker exits */
    float *theta;            /* [n] global parameters */
    float *momentum;         /* [n] outer Nesterov buffer */
    adamw *opt;              /* ddp modes: AdamW state of the global params */
    int64_t *versions;       /* [P] */
    int64_t merges;          /* merges (ddp: completed steps) */
    int64_t tokens_merged;   /* tokens of merged contributions (whole-model equivalent) */
    int64_t tokens_frag_raw; /* sum of the tokens of merged fragment contributions */
    int64_t bytes_in;        /* tensor bytes received */
    int64_t bytes_out;       /* tensor bytes sent */
    int64_t accepted_total;  /* accepted contributions/gradients */
    syncer_holds holds;      /* waiting requests by caller (holds.h: holds.c its only writer) */
    syncer_members members;  /* learner slots, rejections, the end (members.h: members.c its only writer) */
    syncer_rounds rounds;    /* rounds, their counters, recent merges (rounds.h: rounds.c its only writer) */
    syncer_ddp ddp;          /* the ddp barrier (ddp.h: ddp.c its only writer) */
    syncer_deltas deltas;    /* downstream deltas and fragment answers (deltas.h: deltas.c its only writer) */
    syncer_access access;    /* credentials, seal key, TLS (api.h: api.c its only writer) */
    start_kind start;        /* what dur_restore() found; not under mu (set before serving) */
    syncer_rebuild rebuild;  /* rebuild from the learners (rebuild.h: rebuild.c its only writer) */
    syncer_dur dur;          /* eval and checkpoint schedule (durability.h: durability.c its only writer) */
};

/* A syncer with its model, state and event log (restored from
 * o->state_dir like syncer_new's) that neither listens nor runs threads:
 * what the unit tests of the components drive, calling their operations
 * with s->mu held as the handlers do. Free with syncer_free (which writes
 * no final checkpoint for it). NULL with err on failure. */
syncer *syncer_core_new(const syncer_opts *o, char *err, size_t errlen);

static inline int syncer_is_ddp(const syncer *s)
{
    return s->cfg.mode == CONFIG_MODE_DDP || s->cfg.mode == CONFIG_MODE_DDP_ELASTIC;
}
static inline const char *syncer_mode_name(const syncer *s)
{
    return config_mode_name(s->cfg.mode);
}

#endif
