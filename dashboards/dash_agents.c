/* dash_agents.c - the dashboard's controls: what it forwards to agents
 * (dash_internal.h).
 *
 * POST /api/faults, DELETE /api/faults/AGENT/ID and GET /api/logs/AGENT go
 * to one agent; POST /api/halt (HALT ALL, a reserved route that gets
 * through a connection flood) and POST /api/resume go to every agent in
 * parallel, so one hung agent does not delay the others. Controls need the
 * bearer token the agents use, which the dashboard forwards. Every call
 * runs in its HTTP thread with its own curl handle (never the poller's),
 * bounded: 1 s to connect, 5 s in all. What it is not: a source of truth;
 * the agent's answer (status and body) is relayed as it came.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/agent_client.h"
#include "common/err.h"
#include "common/json.h"
#include "common/log.h"
#include "common/parse.h"
#include "dashboards/dash_internal.h"

/* Controls: 0 when allowed, else the answer is written. */
static int require_token(dash_server *s, const cx_http_req *req, cx_http_resp *resp)
{
    if (!s->token) {
        cx_http_reply_error(resp, 403,
                            "controls are disabled: the dashboard was started without --token-file");
        return CX_EAUTH;
    }
    if (cx_http_check_bearer(req, s->token) != 0) {
        cx_http_reply_error(resp, 401, "missing or wrong bearer token (Authorization: Bearer <token>)");
        return CX_EAUTH;
    }
    return 0;
}

/* Copy the URL and name of the agent given by key; -1 and a 404 if none. */
static int agent_lookup(dash_server *s, const char *key, char *url, size_t ulen, char *name, size_t nlen,
                        cx_http_resp *resp)
{
    pthread_mutex_lock(&s->mu);
    int i = dash_agent_find(s, key);
    if (i >= 0) {
        snprintf(url, ulen, "%s", s->agents[i].url);
        snprintf(name, nlen, "%s", s->agents[i].name);
    }
    pthread_mutex_unlock(&s->mu);
    if (i < 0)
        cx_http_reply_error(resp, 404, "no such agent: '%s' (give its name or index)", key);
    return i;
}

/* Every control call on agent i: its own client (HTTP threads run
 * concurrently, the poller's clients are the poller's) with that agent's
 * own token, 1 s to connect, 5 s in all. */
static agc_opts control_opts(const dash_server *s, int i)
{
    const char *tok = s->agents[i].token; /* config: fixed from the start, no lock needed */
    return (agc_opts){
        .token = tok[0] ? tok : NULL, .ca_file = s->ca_file, .connect_timeout_ms = 1000, .timeout_ms = 5000};
}

/* Answer with the agent's own answer (status and body) when it gave one,
 * else 502. */
static void relay(cx_http_resp *resp, const char *name, int rc, const agc_reply *r, const char *err)
{
    if (r->status == 0) {
        cx_http_reply_error(resp, 502, "agent %s unreachable: %s", name, err[0] ? err : cx_strerror(rc));
        return;
    }
    char ctype[128] = "application/json";
    cx_http_result_header(&r->raw, "Content-Type", ctype, sizeof ctype);
    /* only the few types an agent answers; never reflect anything else */
    const char *ct = strncmp(ctype, "text/plain", 10) == 0 ? "text/plain; charset=utf-8" : "application/json";
    cx_http_reply_bytes(resp, r->status, ct, r->raw.body.data ? r->raw.body.data : "", r->raw.body.len);
}

/* One call on the agent at url (call_fault/call_logs below), relayed. */
static void call_and_relay(dash_server *s, int i, const char *url, const char *name, cx_http_resp *resp,
                           int (*call)(agc *c, const void *arg, agc_reply *r, char *err, size_t errlen),
                           const void *arg, const char *what)
{
    agc_opts o = control_opts(s, i);
    agc *c = agc_new(url, &o);
    agc_reply r;
    agc_reply_init(&r);
    char err[CX_ERRLEN] = "";
    int rc = c ? call(c, arg, &r, err, sizeof err) : cx_fail(err, sizeof err, CX_ENOMEM, "out of memory");
    if (what)
        cx_info("dashboard: %s on %s -> %d", what, name, r.status ? r.status : -1);
    relay(resp, name, rc, &r, err);
    agc_reply_cleanup(&r);
    agc_free(c);
}

static int call_inject(agc *c, const void *fault, agc_reply *r, char *err, size_t errlen)
{
    return agc_inject(c, fault, r, err, errlen);
}

static int call_delete(agc *c, const void *id, agc_reply *r, char *err, size_t errlen)
{
    return agc_delete_fault(c, id, r, err, errlen);
}

static int call_logs(agc *c, const void *tail, agc_reply *r, char *err, size_t errlen)
{
    return agc_logs(c, *(const int *)tail, r, err, errlen);
}

int dash_h_post_fault(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    dash_server *s = ctx;
    if (require_token(s, req, resp) != 0)
        return 0;
    json_t *body = NULL;
    if (cx_http_body_json(req, resp, 0, &body) != 0)
        return 0;
    json_t *agent = NULL, *fault = NULL;
    char err[CX_ERRLEN];
    if (cx_json_unpack(body, "body", err, sizeof err, "{s:o,s:o}", "agent", &agent, "fault", &fault) != 0) {
        cx_http_reply_error(resp, 400, "%s (want {\"agent\": name or index, \"fault\": {...}})", err);
        json_decref(body);
        return 0;
    }
    char key[64];
    if (json_is_string(agent) && json_string_length(agent) < sizeof key)
        snprintf(key, sizeof key, "%s", json_string_value(agent));
    else if (json_is_integer(agent))
        snprintf(key, sizeof key, "%lld", (long long)json_integer_value(agent));
    else {
        cx_http_reply_error(resp, 400, "body.agent: expected an agent name or index");
        json_decref(body);
        return 0;
    }
    if (!json_is_object(fault)) {
        cx_http_reply_error(resp, 400, "body.fault: expected an object {type, params, duration_ms, ...}");
        json_decref(body);
        return 0;
    }
    char url[256], name[64];
    int ai = agent_lookup(s, key, url, sizeof url, name, sizeof name, resp);
    if (ai < 0) {
        json_decref(body);
        return 0;
    }
    char *fj = json_dumps(fault, JSON_COMPACT);
    char what[CX_ERRLEN];
    snprintf(what, sizeof what, "POST /v1/faults %s", fj ? fj : "?");
    free(fj);
    call_and_relay(s, ai, url, name, resp, call_inject, fault, what);
    json_decref(body);
    return 0;
}

int dash_h_delete_fault(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    dash_server *s = ctx;
    const char *key = req->params[0], *id = req->params[1];
    if (strlen(key) >= 64 || strlen(id) >= 96) {
        cx_http_reply_error(resp, 404, "no such endpoint: %s %s (want /api/faults/AGENT/ID)", req->method,
                            req->path);
        return 0;
    }
    if (require_token(s, req, resp) != 0)
        return 0;
    char url[256], name[64];
    int ai = agent_lookup(s, key, url, sizeof url, name, sizeof name, resp);
    if (ai < 0)
        return 0;
    for (const char *p = id; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') {
            cx_http_reply_error(resp, 400, "fault id '%s': only letters, digits, '-', '_' and '.'", id);
            return 0;
        }
    char what[160];
    snprintf(what, sizeof what, "DELETE /v1/faults/%s", id);
    call_and_relay(s, ai, url, name, resp, call_delete, id, what);
    return 0;
}

int dash_h_logs(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    dash_server *s = ctx;
    const char *key = req->params[0];
    if (strlen(key) >= 64) {
        cx_http_reply_error(resp, 404, "no such endpoint: %s %s (want /api/logs/AGENT)", req->method,
                            req->path);
        return 0;
    }
    char url[256], name[64];
    int ai = agent_lookup(s, key, url, sizeof url, name, sizeof name, resp);
    if (ai < 0)
        return 0;
    int tail = 200;
    const char *t = cx_http_query(req, "tail");
    char err[CX_ERRLEN] = "";
    if (t && cx_parse_int(t, "tail", 1, DASH_LOG_TAIL_MAX, &tail, err, sizeof err) != 0) {
        cx_http_reply_error(resp, 400, "%s", err);
        return 0;
    }
    call_and_relay(s, ai, url, name, resp, call_logs, &tail, NULL);
    return 0;
}

/* call on every agent in parallel (HALT ALL must not wait on one hung
 * agent before telling the next); path names it in the log. */
static void fanout(dash_server *s, const cx_http_req *req, agc_call_fn call, const char *path,
                   cx_http_resp *resp)
{
    if (require_token(s, req, resp) != 0)
        return;
    char(*urls)[256] = calloc((size_t)s->nagents + 1, sizeof *urls);
    char(*names)[64] = calloc((size_t)s->nagents + 1, sizeof *names);
    const char **up = calloc((size_t)s->nagents + 1, sizeof *up);
    agc_fan_result *res = calloc((size_t)s->nagents + 1, sizeof *res);
    if (!urls || !names || !up || !res) {
        cx_http_reply_error(resp, 500, "out of memory");
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    int n = s->nagents;
    for (int i = 0; i < n; i++) {
        snprintf(urls[i], sizeof urls[i], "%s", s->agents[i].url);
        snprintf(names[i], sizeof names[i], "%s", s->agents[i].name);
        up[i] = urls[i];
    }
    pthread_mutex_unlock(&s->mu);
    agc_opts *opts = calloc((size_t)n + 1, sizeof *opts);
    if (!opts) {
        cx_http_reply_error(resp, 500, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        opts[i] = control_opts(s, i);
    int all_ok = agc_fanout(up, n, opts, call, res) == n;
    free(opts);
    json_t *results = json_array();
    for (int i = 0; i < n; i++) {
        const agc_fan_result *j = &res[i];
        json_t *o1 = json_pack("{s:s,s:s}", "agent", names[i], "url", urls[i]);
        json_object_set_new(o1, "ok", json_boolean(j->rc == 0));
        json_object_set_new(o1, "status", json_integer(j->reply.status));
        json_object_set_new(o1, "answer", j->reply.json ? json_incref(j->reply.json) : json_null());
        if (j->reply.status == 0)
            json_object_set_new(o1, "error", json_string(j->err[0] ? j->err : cx_strerror(j->rc)));
        else if (j->rc != 0)
            json_object_set_new(o1, "error", json_sprintf("agent answered HTTP %d", j->reply.status));
        json_array_append_new(results, o1);
    }
    agc_fanout_cleanup(res, n);
    cx_info("dashboard: POST %s on %d agents: %s", path, n, all_ok ? "all ok" : "some failed");
    cx_http_reply_json(resp, all_ok ? 200 : 502, json_pack("{s:b,s:o}", "ok", all_ok, "results", results));
out:
    free(urls);
    free(names);
    free(up);
    free(res);
}

int dash_h_halt(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    fanout(ctx, req, agc_halt, AGC_PATH_HALT, resp);
    return 0;
}

int dash_h_resume(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    fanout(ctx, req, agc_resume, AGC_PATH_RESUME, resp);
    return 0;
}
