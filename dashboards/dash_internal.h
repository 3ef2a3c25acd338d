/* dash_internal.h - what the dashboard's files share (never included
 * outside dashboards/).
 *
 * One object, struct dash_server, split by concern over five files:
 *   server.c      lifecycle (new/free), the route table and its gate, the
 *                 page's assets, what the harness pushes
 *   dash_state.c  the model of the run the page shows: merging what the
 *                 poller brought, the snapshot, the SSE message ring
 *   dash_poll.c   the poll thread (HTTP GETs without the lock, then merge)
 *   dash_sse.c    the event streams (GET /api/events) and their caps
 *   dash_agents.c controls forwarded to agents (inject, delete, logs,
 *                 HALT ALL / resume fan-out)
 * Locking: s->mu guards every field below the "guards everything below"
 * line; functions named *_locked or documented "caller holds s->mu" expect
 * it held; nothing slow (no HTTP) runs under it.
 */
#ifndef DASH_INTERNAL_H
#define DASH_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/agent_client.h"
#include "common/http_client.h"
#include "common/http_server.h"
#include "common/timebase.h"
#include "dashboards/server.h"

#define DASH_BODY_MAX (64 * 1024)        /* bytes: request bodies */
#define DASH_RESP_MAX ((size_t)64 << 20) /* bytes: one response */
#define DASH_LOSS_MAX 4000               /* eval loss points kept */
#define DASH_MERGES_MAX 4000             /* merge markers kept */
#define DASH_RATES_MAX 2000              /* rate samples kept */
#define DASH_EVENTS_MAX 300              /* event log entries kept */
#define DASH_FAULTS_MAX 1000             /* fault windows kept */
#define DASH_MSGS_MAX 256                /* SSE messages kept for slow readers */
#define DASH_SSE_MAX 32                  /* concurrent SSE streams */
#define DASH_SSE_PER_CLIENT 8            /* SSE streams per client address (not loopback) */
#define DASH_LEARNERS_MAX 256            /* learner ids tracked */
#define DASH_EVENTS_PAGE 2000            /* events asked per poll */
#define DASH_LOG_TAIL_MAX 5000           /* lines: cap on ?tail= */

/* ---- state ---- */

typedef struct dash_agent {
    char url[256];           /* base URL */
    char token[128];         /* its bearer token (config: fixed from the start), "" none */
    char name[64];           /* status "id" once seen, else "agent-<i>" */
    int learner_cfg;         /* configured learner id, -1 = infer */
    agc *cli;                /* the poller's client (poller thread only) */
    cx_tb_clock *clock;      /* its clock, fed by cli's answers (timebase.h) */
    int clock_warned;        /* warned once that its answers carry no stamp (poller thread only) */
    int reachable;           /* -1 not polled yet, 0 no, 1 yes */
    char error[256];         /* why unreachable */
    int64_t last_ok_mono_ms; /* last successful poll, 0 never */
    json_t *status;          /* last GET /v1/status body, or NULL */
    json_t *faults;          /* last GET /v1/faults list (array), or NULL */
} dash_agent;

/* What the syncer's events tell about one learner id. */
typedef struct dash_learner {
    json_t *heartbeat;       /* last heartbeat event, or NULL */
    double tokens_per_s;     /* tokens/s, EMA over heartbeats */
    int64_t rate_tokens;     /* tokens at the previous heartbeat */
    int64_t rate_mono_ms;    /* ms: t_mono_ms of the previous heartbeat, 0 none */
    int64_t merged_count;    /* merges this learner took part in */
    int64_t merged_mono_ms;  /* ms: t_mono_ms of its last merge, 0 none */
    int64_t merged_fragment; /* fragment of that merge */
    int64_t merged_version;  /* version it produced */
    int64_t merged_at;       /* the run's merge count (merges_seen) at its last merge */
    int64_t join_mono_ms;    /* ms: t_mono_ms of its latest join event, 0 none */
    int64_t join_inc;        /* the incarnation that join announced */
} dash_learner;

typedef struct dash_msg {
    uint64_t seq; /* 1, 2, ... */
    char *text;   /* "event: ...\nid: ...\ndata: ...\n\n" (owned) */
} dash_msg;

struct dash_server {
    /* configuration (copied) */
    char *listen;     /* "HOST:PORT" */
    char *syncer_url; /* or NULL */
    char *token;      /* the page's controls' token, or NULL: controls off */
    char *ca_file;    /* PEM CA of https agents and syncer, or NULL: the system's */
    char *state_dir;  /* or NULL */
    char *title;      /* or NULL */
    long poll_ms;     /* ms */
    long sse_hb_ms;   /* ms */
    char url[300];    /* "http://127.0.0.1:PORT/" */
    int loopback;     /* bound to 127.0.0.1: only loopback Host headers are served */
    int port;

    cx_http_server *http; /* routes (server.c), connection guard, streams */
    pthread_t poller;
    int poller_started;
    pthread_mutex_t mu;  /* guards everything below */
    pthread_cond_t cond; /* poller wake-up and new SSE messages */
    int stopping;

    cx_http_client *syncer_cli; /* poller thread only */
    cx_tb_clock *syncer_clock;  /* the syncer's clock, fed by syncer_cli's answers */
    int syncer_clock_warned;    /* warned once that its answers carry no stamp (poller thread only) */
    int syncer_reachable;       /* -1 not polled yet, 0, 1 */
    char syncer_error[256];
    int64_t syncer_last_ok_mono_ms;
    json_t *syncer_status; /* last /v1/status body, or NULL */
    int64_t last_seq;      /* newest syncer event seq taken */
    int64_t t0_mono_ms;    /* ms: origin of the charts */

    dash_agent agents[DASH_MAX_AGENTS];
    int nagents;
    dash_learner learners[DASH_LEARNERS_MAX];
    int64_t merges_seen; /* merge events taken */

    /* history (arrays of arrays/objects, see snapshot_json) */
    json_t *loss;   /* [[t_mono_ms, loss|null, merges, tokens, bpb|null]] */
    json_t *merges; /* [[t_mono_ms, fragment, version, participants]] */
    json_t *rates;  /* [[t_mono_ms, merges/s, bytes_in/s, bytes_out/s]] */
    json_t *faults; /* fault windows [{agent, id, type, state, start_mono_ms, ...}] */
    json_t *events; /* last DASH_EVENTS_MAX events (no heartbeats) */
    /* what changed since the last `update` message */
    json_t *loss_new, *merges_new, *rates_new;
    int faults_changed;
    /* previous counters for rates */
    int rate_have;
    int64_t rate_mono_ms, rate_merges, rate_bin, rate_bout;

    /* pushed by the harness */
    json_t *hypotheses; /* array */
    json_t *progress;   /* object or NULL */

    /* SSE */
    dash_msg msgs[DASH_MSGS_MAX];
    uint64_t msg_seq;         /* seq of the newest message, 0 none */
    struct sse_conn *streams; /* open streams, oldest first */
};

/* ---- dash_state.c ---- */

/* o[key] as an integer, dflt when absent or not a number. */
int64_t dash_jint(const json_t *o, const char *key, int64_t dflt);
/* Index of the agent named name (or given by its index), -1 if none.
 * Caller holds s->mu. */
int dash_agent_find(const dash_server *s, const char *name);
/* The whole snapshot (new reference; its series arrays are shared with the
 * live history, so dump or copy it before unlocking). Caller holds s->mu. */
json_t *dash_snapshot_locked(dash_server *s);
/* Append one SSE message (data stolen) to the ring. Caller holds s->mu. */
void dash_msg_push(dash_server *s, const char *event, json_t *data);
/* Push the `update` after a poll and wake the streams. Caller holds s->mu. */
void dash_push_update(dash_server *s);
/* Merge one syncer event, the syncer's counters, one agent's fault list.
 * Caller holds s->mu. */
void dash_take_event(dash_server *s, json_t *ev);
void dash_take_rates(dash_server *s, const json_t *st, int64_t now);
void dash_take_faults(dash_server *s, const dash_agent *a, const json_t *list);
/* Add an event to the capped log and the SSE ring (ev stolen). Caller
 * holds s->mu. */
void dash_log_event(dash_server *s, json_t *ev);

/* ---- dash_poll.c ---- */

/* The poll thread: poll_once() every poll_ms until s->stopping. */
void *dash_poller_main(void *arg);

/* ---- dash_sse.c ---- */

/* GET /api/events: a stream of `snapshot`, `update` and `event` messages
 * (cx_http_handler; ctx is the dash_server). */
int dash_h_events(void *ctx, const cx_http_req *req, cx_http_resp *resp);

/* ---- dash_agents.c (controls; cx_http_handler, ctx is the dash_server) ---- */

int dash_h_post_fault(void *ctx, const cx_http_req *req, cx_http_resp *resp);   /* POST /api/faults */
int dash_h_delete_fault(void *ctx, const cx_http_req *req, cx_http_resp *resp); /* DELETE /api/faults/{}/{} */
int dash_h_logs(void *ctx, const cx_http_req *req, cx_http_resp *resp);         /* GET /api/logs/{} */
int dash_h_halt(void *ctx, const cx_http_req *req, cx_http_resp *resp);         /* POST /api/halt */
int dash_h_resume(void *ctx, const cx_http_req *req, cx_http_resp *resp);       /* POST /api/resume */

#endif
