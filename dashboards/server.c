/* server.c - the dashboard: lifecycle, routes, assets and what the
 * harness pushes (server.h; the other concerns are split over the files
 * dash_internal.h lists).
 *
 * Threads:
 *   poller       dash_poll.c: GETs without the lock, then merges the
 *                answers into the history under s->mu (dash_state.c) and
 *                appends `update`/`event` messages to the SSE ring.
 *   HTTP threads common/http_server.h, one per connection. Plain requests
 *                copy what they need under s->mu and answer; controls
 *                forward to agents with their own curl handle
 *                (dash_agents.c).
 *   SSE streams  one HTTP thread each, a cx_http_stream blocked in
 *                sse_read() on s->cond (at most 1 s at a time, so stopping
 *                is noticed; dash_sse.c).
 *
 * Connection limits (common/http_guard.h, through cx_http_server): held
 * connections are evicted near the limit, requests over the caps get 503,
 * POST /api/halt (HALT ALL) is reserved and always gets through. A
 * dashboard bound to loopback answers only requests whose Host names
 * loopback (the server's gate, before any body byte is read).
 *
 * Lifecycle of the object:
 *
 *   dash_server_new ──► serving (poller + HTTP server running)
 *                          │ dash_server_free: stopping=1, broadcast,
 *                          │ join poller, cx_http_server_free (waits ≤ 3 s
 *                          ▼ for the streams' last chunk, joins the rest)
 *                        freed
 */
#include "dashboards/server.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "injectors/kinds_route.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/file.h"
#include "common/json.h"
#include "common/parse.h"
#include "dashboards/assets.h"
#include "dashboards/dash_internal.h"

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* ---- HTTP: the page and the model ---- */

static int h_asset_named(const char *name, cx_http_resp *resp)
{
    const dash_asset *a = strchr(name, '/') ? NULL : dash_asset_find(name);
    if (!a) {
        cx_http_reply_error(resp, 404, "no such asset: %s", name);
        return 0;
    }
    cx_http_reply_bytes(resp, 200, a->content_type, a->data, a->len);
    return 0;
}

/* GET / and /index.html */
static int h_index(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    (void)req;
    return h_asset_named("index.html", resp);
}

/* GET /assets/NAME */
static int h_asset(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    return h_asset_named(req->params[0], resp);
}

/* GET /api/state */
static int h_state(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    dash_server *s = ctx;
    (void)req;
    pthread_mutex_lock(&s->mu);
    json_t *snap = dash_snapshot_locked(s);
    char *js = json_dumps(snap, JSON_COMPACT);
    json_decref(snap);
    pthread_mutex_unlock(&s->mu);
    if (!js) {
        cx_http_reply_error(resp, 500, "cannot encode the snapshot");
        return 0;
    }
    cx_http_reply_bytes(resp, 200, "application/json", js, strlen(js));
    free(js);
    return 0;
}

/* ---- HTTP: routes and gate ---- */

/* Paths: see server.h. HEAD is answered like GET (no body). */
static const cx_http_route dash_routes[] = {
    {"GET", "/", h_index},
    {"HEAD", "/", h_index},
    {"GET", "/index.html", h_index},
    {"HEAD", "/index.html", h_index},
    {"GET", "/assets/{}", h_asset},
    {"HEAD", "/assets/{}", h_asset},
    {"GET", "/api/state", h_state},
    {"HEAD", "/api/state", h_state},
    {"GET", "/api/fault-kinds", api_fault_kinds}, /* injectors/kinds_route.h */
    {"HEAD", "/api/fault-kinds", api_fault_kinds},
    {"GET", "/api/events", dash_h_events},
    {"POST", "/api/halt", dash_h_halt},
    {"POST", "/api/resume", dash_h_resume},
    {"POST", "/api/faults", dash_h_post_fault},
    {"DELETE", "/api/faults/{}/{}", dash_h_delete_fault},
    {"GET", "/api/logs/{}", dash_h_logs},
    {"HEAD", "/api/logs/{}", dash_h_logs},
};

/* HALT ALL gets through a connection flood (common/http_guard.h). */
static const char *const dash_reserved[] = {"POST /api/halt", NULL};

/* A dashboard bound to loopback answers only requests that name a loopback
 * host: a web page elsewhere cannot read it through DNS rebinding. */
static int host_allowed(const dash_server *s, const cx_http_req *req)
{
    if (!s->loopback)
        return 1;
    const char *host = cx_http_header(req, "Host");
    if (!host)
        return 1; /* HTTP/1.0 clients send none; a browser always does */
    size_t n = strcspn(host, ":");
    if (host[0] == '[')
        n = strcspn(host, "]") + 1;
    return (n == 9 && strncmp(host, "127.0.0.1", 9) == 0) ||
           (n == 9 && strncasecmp(host, "localhost", 9) == 0) || (n == 5 && strncmp(host, "[::1]", 5) == 0);
}

/* cx_http_gate.check: the Host check, before any body byte is read. */
static int gate_check(void *ctx, cx_http_req *req, const cx_http_route *route, cx_http_resp *resp)
{
    (void)route;
    if (host_allowed(ctx, req))
        return 0;
    cx_http_reply_error(resp, 403, "this dashboard answers only to Host 127.0.0.1 or localhost");
    return CX_EAUTH;
}

/* ---- assets ---- */

const dash_asset *dash_asset_find(const char *name)
{
    for (const dash_asset *a = dash_assets; a->name; a++)
        if (strcmp(a->name, name) == 0)
            return a;
    return NULL;
}

/* ---- lifecycle ---- */

static int check_url(const char *what, const char *url, char *err, size_t errlen)
{
    if (!url || strncmp(url, "http://", 7) != 0 || strlen(url) <= 7 || strlen(url) >= 256)
        return cx_fail(err, errlen, CX_EINVAL, "%s: '%s' is not an http://HOST:PORT URL", what,
                       url ? url : "(null)");
    return 0;
}

/* The agents' table and the poller's clients (bounded: 0.5 s to connect,
 * 2 s in all). 0, or CX_ENOMEM; dash_server_free cleans up either way. */
static int open_clients(dash_server *s, const dash_config *cfg, char *err, size_t errlen)
{
    /* polls: 0.5 s to connect, 2 s in all */
    cx_http_opts sy_opts = {.connect_timeout_ms = 500,
                            .timeout_ms = 2000,
                            .retries = 0,
                            .bearer =
                                cfg->syncer_credential, /* the syncer refuses a wrong one even on reads */
                            .ca_file = cfg->ca_file,
                            .max_body = (size_t)64 << 20};
    agc_opts ag_opts = {
        .ca_file = cfg->ca_file, .connect_timeout_ms = 500, .timeout_ms = 2000, .max_body = (size_t)64 << 20};
    /* every poll answer feeds its process's clock: the charts put the
     * syncer's and the agents' times on this process's clock (dash_poll.c) */
    if (s->syncer_url && (s->syncer_clock = cx_tb_clock_new("syncer"))) {
        sy_opts.observe = cx_tb_observe;
        sy_opts.observe_ctx = s->syncer_clock;
        s->syncer_cli = cx_http_client_new(s->syncer_url, &sy_opts);
    }
    s->nagents = cfg->nagents;
    for (int i = 0; i < cfg->nagents; i++) {
        dash_agent *a = &s->agents[i];
        snprintf(a->url, sizeof a->url, "%s", cfg->agent_urls[i]);
        size_t ul = strlen(a->url);
        if (ul > 7 && a->url[ul - 1] == '/')
            a->url[ul - 1] = '\0';
        snprintf(a->name, sizeof a->name, "agent-%d", i);
        const char *tok = cfg->agent_tokens ? cfg->agent_tokens[i] : cfg->token;
        snprintf(a->token, sizeof a->token, "%s", tok ? tok : "");
        ag_opts.token = a->token[0] ? a->token : NULL;
        a->learner_cfg = cfg->agent_learners ? cfg->agent_learners[i] : -1;
        a->reachable = -1;
        if ((a->clock = cx_tb_clock_new(a->name))) {
            ag_opts.observe = cx_tb_observe;
            ag_opts.observe_ctx = a->clock;
            a->cli = agc_new(a->url, &ag_opts);
        }
    }
    if (cfg->syncer_url && !s->syncer_cli)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    for (int i = 0; i < s->nagents; i++)
        if (!s->agents[i].cli)
            return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    return 0;
}

dash_server *dash_server_new(const dash_config *cfg, char *err, size_t errlen)
{
    if (cfg->nagents < 0 || cfg->nagents > DASH_MAX_AGENTS) {
        cx_fail(err, errlen, CX_EINVAL, "agents: %d given, at most %d", cfg->nagents, DASH_MAX_AGENTS);
        return NULL;
    }
    if (cfg->syncer_url && check_url("syncer", cfg->syncer_url, err, errlen) != 0)
        return NULL;
    for (int i = 0; i < cfg->nagents; i++)
        if (check_url("agent", cfg->agent_urls[i], err, errlen) != 0)
            return NULL;
    const char *listen = cfg->listen ? cfg->listen : "127.0.0.1:0";
    char host[256];
    int port;
    if (cx_parse_hostport(listen, "--listen", host, sizeof host, &port, err, errlen) != 0)
        return NULL;
    struct in_addr in4;
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &in4) != 1) {
        cx_fail(err, errlen, CX_EINVAL, "--listen: '%s' is not an IPv4 address", host);
        return NULL;
    }

    dash_server *s = calloc(1, sizeof *s);
    if (!s) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->listen = strdup(listen);
    s->syncer_url = dup_or_null(cfg->syncer_url);
    s->token = dup_or_null(cfg->token);
    s->ca_file = dup_or_null(cfg->ca_file);
    s->state_dir = dup_or_null(cfg->state_dir);
    s->title = dup_or_null(cfg->title);
    s->poll_ms = cfg->poll_ms > 0 ? cfg->poll_ms : 500;
    s->sse_hb_ms = cfg->sse_heartbeat_ms > 0 ? cfg->sse_heartbeat_ms : 15000;
    s->syncer_reachable = -1;
    s->t0_mono_ms = cx_mono_ms();
    s->loss = json_array();
    s->merges = json_array();
    s->rates = json_array();
    s->faults = json_array();
    s->events = json_array();
    s->loss_new = json_array();
    s->merges_new = json_array();
    s->rates_new = json_array();
    s->hypotheses = json_array();
    if (!s->listen || open_clients(s, cfg, err, errlen) != 0) {
        if (!s->listen)
            cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        goto err;
    }

    /* half of the services' limits: a dashboard serves a few viewers */
    cx_http_limits lim;
    cx_http_limits_default(&lim);
    lim.conn_max = 256;
    lim.conn_soft = 224;
    lim.active_max = 160;
    char bind[300];
    snprintf(bind, sizeof bind, "%s:%d", host, port);
    s->loopback = strncmp(host, "127.", 4) == 0; /* before the first request reaches gate_check */
    cx_http_gate gate = {.check = gate_check};
    cx_http_server_opts hopts = {
        .limits = &lim, .reserved = dash_reserved, .gate = &gate, .name = "dashboard"};
    s->http = cx_http_server_new_opts(bind, dash_routes, sizeof dash_routes / sizeof *dash_routes, s,
                                      DASH_BODY_MAX, &hopts, err, errlen);
    if (!s->http)
        goto err;
    s->port = cx_http_server_port(s->http);
    /* 0.0.0.0 binds every address; the URL to print is loopback's */
    const char *shown = strcmp(host, "0.0.0.0") == 0 ? "127.0.0.1" : host;
    snprintf(s->url, sizeof s->url, "http://%s:%d/", shown, s->port);

    if (pthread_create(&s->poller, NULL, dash_poller_main, s) != 0) {
        cx_fail(err, errlen, CX_ESYS, "cannot start the poll thread");
        goto err;
    }
    s->poller_started = 1;

    if (s->state_dir) {
        char path[1024], addr[300];
        if (cx_mkdir_p(s->state_dir, err, errlen) != 0)
            goto err;
        snprintf(path, sizeof path, "%s/listen.addr", s->state_dir);
        snprintf(addr, sizeof addr, "%s:%d\n", shown, s->port);
        if (cx_file_write_atomic(path, addr, strlen(addr), err, errlen) != 0)
            goto err;
    }
    return s;

err:
    dash_server_free(s);
    return NULL;
}

int dash_server_port(const dash_server *s)
{
    return s->port;
}

const char *dash_server_url(const dash_server *s)
{
    return s->url;
}

void dash_server_free(dash_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    if (s->poller_started)
        pthread_join(s->poller, NULL);
    /* s->stopping ends every stream at its next wake-up (now: broadcast
     * above); cx_http_server_free waits for their last chunk (≤ 3 s), then
     * joins the connection threads. */
    cx_http_server_free(s->http);
    cx_http_client_free(s->syncer_cli);
    cx_tb_clock_free(s->syncer_clock);
    for (int i = 0; i < s->nagents; i++) {
        agc_free(s->agents[i].cli);
        cx_tb_clock_free(s->agents[i].clock);
        json_decref(s->agents[i].status);
        json_decref(s->agents[i].faults);
    }
    for (int i = 0; i < DASH_LEARNERS_MAX; i++)
        json_decref(s->learners[i].heartbeat);
    for (int i = 0; i < DASH_MSGS_MAX; i++)
        free(s->msgs[i].text);
    json_decref(s->syncer_status);
    json_decref(s->loss);
    json_decref(s->merges);
    json_decref(s->rates);
    json_decref(s->faults);
    json_decref(s->events);
    json_decref(s->loss_new);
    json_decref(s->merges_new);
    json_decref(s->rates_new);
    json_decref(s->hypotheses);
    json_decref(s->progress);
    free(s->listen);
    free(s->syncer_url);
    free(s->token);
    free(s->ca_file);
    for (int i = 0; i < s->nagents; i++)
        memset(s->agents[i].token, 0, sizeof s->agents[i].token);
    free(s->state_dir);
    free(s->title);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ---- what the harness pushes ---- */

int dash_server_set_hypotheses(dash_server *s, const json_t *list, char *err, size_t errlen)
{
    if (!json_is_array(list))
        return cx_fail(err, errlen, CX_EINVAL, "hypotheses: expected an array");
    json_t *copy = json_array();
    size_t i;
    json_t *h;
    json_array_foreach(list, i, h)
    {
        const char *name = NULL, *status = NULL, *phase = NULL, *cmp = NULL, *unit = NULL, *expl = NULL;
        json_t *measured = NULL, *threshold = NULL;
        char where[48];
        snprintf(where, sizeof where, "hypotheses[%zu]", i);
        if (cx_json_unpack((json_t *)h, where, err, errlen, "{s:s,s:s,s?:s,s?:o,s?:o,s?:s,s?:s,s?:s}", "name",
                           &name, "status", &status, "phase", &phase, "measured", &measured, "threshold",
                           &threshold, "cmp", &cmp, "unit", &unit, "explanation", &expl) != 0) {
            json_decref(copy);
            return CX_EINVAL;
        }
        const char *ok[] = {"pending", "running", "pass", "fail", "error"};
        int valid = 0;
        for (size_t k = 0; k < sizeof ok / sizeof *ok; k++)
            valid |= strcmp(status, ok[k]) == 0;
        if (!valid || (measured && !json_is_number(measured) && !json_is_null(measured)) ||
            (threshold && !json_is_number(threshold) && !json_is_null(threshold))) {
            json_decref(copy);
            return cx_fail(err, errlen, CX_EINVAL,
                           "%s: status must be pending|running|pass|fail|error and measured/threshold "
                           "numbers or null",
                           where);
        }
        json_array_append_new(copy, json_deep_copy(h));
    }
    pthread_mutex_lock(&s->mu);
    json_decref(s->hypotheses);
    s->hypotheses = copy;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void dash_server_set_progress(dash_server *s, const char *phase, int64_t elapsed_ms, int64_t remaining_ms)
{
    json_t *p = json_pack("{s:s,s:I,s:o}", "phase", phase ? phase : "", "elapsed_ms", (json_int_t)elapsed_ms,
                          "remaining_ms", remaining_ms >= 0 ? json_integer(remaining_ms) : json_null());
    pthread_mutex_lock(&s->mu);
    json_decref(s->progress);
    s->progress = p;
    pthread_mutex_unlock(&s->mu);
}

void dash_server_set_progress_json(dash_server *s, json_t *progress)
{
    pthread_mutex_lock(&s->mu);
    json_decref(s->progress);
    s->progress = progress;
    pthread_mutex_unlock(&s->mu);
}

int dash_server_push_event(dash_server *s, const json_t *ev, char *err, size_t errlen)
{
    if (!json_is_object(ev) || !json_is_string(json_object_get(ev, "type")))
        return cx_fail(err, errlen, CX_EINVAL, "event: expected an object with a string \"type\"");
    json_t *c = json_deep_copy(ev);
    json_object_set_new(c, "source", json_string("harness"));
    if (!json_object_get(c, "t_mono_ms"))
        json_object_set_new(c, "t_mono_ms", json_integer(cx_mono_ms()));
    pthread_mutex_lock(&s->mu);
    dash_log_event(s, c);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    return 0;
}