/* server.h - the dashboard aggregator: polls one syncer and N agents, keeps
 * a bounded history, and serves the operator page over HTTP + server-sent
 * events.
 *
 * What it is: one object that owns (a) a poll thread that every poll_ms
 * asks the syncer for GET /v1/status and GET /v1/events?since=SEQ and each
 * agent for GET /v1/status and GET /v1/faults, and (b) an HTTP server
 * (common/http_server.h, thread-per-connection) with
 *
 *   GET  /                         the page (embedded, see assets.h)
 *   GET  /assets/NAME              embedded assets (uPlot, app.js, ...)
 *   GET  /api/state                the whole snapshot as JSON
 *   GET  /api/fault-kinds          {kinds: [...]}: every fault kind with its params and
 *                                  traits (injector_table; the inject form is built from it)
 *   GET  /api/events               SSE: `snapshot` on connect, then `update`
 *                                  after each poll and `event` per new event
 *   GET  /api/logs/AGENT?tail=N    the agent's GET /v1/logs?tail=N
 *   POST /api/faults {agent,fault} forwarded to AGENT's POST /v1/faults   (token)
 *   DELETE /api/faults/AGENT/ID    forwarded to AGENT's DELETE /v1/faults/ID (token)
 *   POST /api/halt                 POST /v1/halt on every agent, in parallel (token)
 *   POST /api/resume               POST /v1/resume on every agent (token)
 *
 * AGENT is the agent's name (its status "id" once seen, else "agent-<i>")
 * or its index in the configured list. Controls need `Authorization: Bearer
 * <token>` with the same token the agents use (the dashboard forwards it).
 *
 * What it is not: a source of truth. It never changes training state by
 * itself; it shows what the processes report, and it forwards controls.
 * Times on the charts are this process's CLOCK_MONOTONIC ms: the syncer's
 * t_mono_ms and the agents' started/ended_mono_ms are mapped onto it from
 * the clock stamp of every answer (common/timebase.h), so fault windows and
 * the loss curve line up even when each process runs on its own host. A
 * process whose answers carry no stamp is shown on its own clock (warned
 * once).
 *
 * The harness embeds it (`chaosloco run --dashboard ADDR`) and pushes what
 * only it knows through the dash_server_set_* / push functions below; every
 * function here is thread-safe.
 *
 * Ownership: the server copies every string and JSON value it is given.
 */
#ifndef DASH_SERVER_H
#define DASH_SERVER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define DASH_MAX_AGENTS 64

typedef struct dash_server dash_server;

typedef struct dash_config {
    const char *listen;            /* "HOST:PORT"; NULL = "127.0.0.1:0" */
    const char *syncer_url;        /* "http://127.0.0.1:PORT", or NULL: no syncer */
    const char *const *agent_urls; /* nagents base URLs of agents */
    const int *agent_learners;     /* nagents learner ids (-1 = infer), or NULL */
    int nagents;                   /* 0..DASH_MAX_AGENTS */
    const char *token;             /* bearer the page's controls need (and the agents' when
                                      agent_tokens is NULL); NULL = controls off */
    const char *const *agent_tokens; /* nagents: each agent's own bearer, or NULL: token */
    const char *ca_file;           /* PEM CA of https agents and syncer, or NULL: the system's */
    const char *syncer_credential; /* bearer for the syncer (trainer/credential.h; never the agents'
                                      token), or NULL: loopback reads only */
    long poll_ms;                  /* poll period; 0 = 500 */
    long sse_heartbeat_ms;         /* SSE keep-alive comment period; 0 = 15000 */
    const char *state_dir;         /* writes <state_dir>/listen.addr when non-NULL */
    const char *title;             /* page title (an experiment's), or NULL */
} dash_config;

/* Bind, start the poll thread and the HTTP server. Returns NULL and fills
 * err on a bad config (CX_EINVAL) or when it cannot listen. */
dash_server *dash_server_new(const dash_config *cfg, char *err, size_t errlen);
/* Stop polling, close every SSE stream, stop the server. NULL is a no-op. */
void dash_server_free(dash_server *s);

int dash_server_port(const dash_server *s);
/* "http://127.0.0.1:PORT/" (borrowed, valid until free). */
const char *dash_server_url(const dash_server *s);

/* ---- what the harness pushes ---- */

/* Replace the hypotheses table. list: an array of objects
 *   {name, status: "pending"|"running"|"pass"|"fail"|"error",
 *    phase?: "steady_state"|"verify", measured?: number|null,
 *    threshold?: number|null, cmp?, unit?, explanation?}
 * decoded strictly (unknown keys are CX_EINVAL, nothing changes). Copied. */
int dash_server_set_hypotheses(dash_server *s, const json_t *list, char *err, size_t errlen);
/* Experiment progress: phase ("steady_state", "method", "verify", "done",
 * ...), elapsed and remaining ms (remaining < 0: unknown). */
void dash_server_set_progress(dash_server *s, const char *phase, int64_t elapsed_ms, int64_t remaining_ms);
/* The same from a whole progress object (taken): {phase, elapsed_ms,
 * remaining_ms|null, fraction, lower_bound, merges, waiting}, the
 * harness's horizon estimate (harness/horizon.h). */
void dash_server_set_progress_json(dash_server *s, json_t *progress);
/* Add one event of the harness's own (an action invoke/ok/fail, ...) to the
 * event log. It must be an object with a string "type"; "source":"harness"
 * is added. Copied. */
int dash_server_push_event(dash_server *s, const json_t *ev, char *err, size_t errlen);

/* The snapshot /api/state serves (new reference). Also what report.html
 * can hand to the page's chart code (assets charts.js: renderRun). */
json_t *dash_server_snapshot(dash_server *s);

#endif
