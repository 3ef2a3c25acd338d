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

/* One call to an agent with its own curl handle (HTTP threads run
 * concurrently). Returns as cx_http_do. */
static int agent_call(const char *url, const char *token, const char *method, const char *path,
                      const char *body, cx_http_result *r, char *err, size_t errlen)
{
    cx_http_opts o = {
        .connect_timeout_ms = 1000, .timeout_ms = 5000, .bearer = token, .max_body = (size_t)4 << 20};
    cx_http_client *c = cx_http_client_new(url, &o);
    if (!c)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    int rc = cx_http_do(c, method, path, NULL, body, body ? strlen(body) : 0,
                        body ? "application/json" : NULL, 0, r, err, errlen);
    cx_http_client_free(c);
    return rc;
}

/* Answer with the agent's own answer (status and body) when it gave one. */
static void relay(cx_http_resp *resp, const char *name, int rc, const cx_http_result *r, const char *err)
{
    if (rc != 0) {
        cx_http_reply_error(resp, 502, "agent %s unreachable: %s", name, err[0] ? err : cx_strerror(rc));
        return;
    }
    char ctype[128] = "application/json";
    cx_http_result_header(r, "Content-Type", ctype, sizeof ctype);
    /* only the few types an agent answers; never reflect anything else */
    const char *ct = strncmp(ctype, "text/plain", 10) == 0 ? "text/plain; charset=utf-8" : "application/json";
    cx_http_reply_bytes(resp, r->status, ct, r->body.data ? r->body.data : "", r->body.len);
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
    if (agent_lookup(s, key, url, sizeof url, name, sizeof name, resp) < 0) {
        json_decref(body);
        return 0;
    }
    char *fj = json_dumps(fault, JSON_COMPACT);
    json_decref(body);
    if (!fj) {
        cx_http_reply_error(resp, 500, "cannot encode the fault");
        return 0;
    }
    cx_http_result r;
    cx_http_result_init(&r);
    err[0] = '\0';
    int rc = agent_call(url, s->token, "POST", "/v1/faults", fj, &r, err, sizeof err);
    cx_info("dashboard: POST /v1/faults to %s %s -> %d", name, fj, rc ? -1 : r.status);
    free(fj);
    relay(resp, name, rc, &r, err);
    cx_http_result_cleanup(&r);
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
    if (agent_lookup(s, key, url, sizeof url, name, sizeof name, resp) < 0)
        return 0;
    for (const char *p = id; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') {
            cx_http_reply_error(resp, 400, "fault id '%s': only letters, digits, '-', '_' and '.'", id);
            return 0;
        }
    char path[160];
    snprintf(path, sizeof path, "/v1/faults/%s", id);
    cx_http_result r;
    cx_http_result_init(&r);
    char err[CX_ERRLEN] = "";
    int rc = agent_call(url, s->token, "DELETE", path, NULL, &r, err, sizeof err);
    cx_info("dashboard: DELETE %s on %s -> %d", path, name, rc ? -1 : r.status);
    relay(resp, name, rc, &r, err);
    cx_http_result_cleanup(&r);
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
    if (agent_lookup(s, key, url, sizeof url, name, sizeof name, resp) < 0)
        return 0;
    int tail = 200;
    const char *t = cx_http_query(req, "tail");
    char err[CX_ERRLEN] = "";
    if (t && cx_parse_int(t, "tail", 1, DASH_LOG_TAIL_MAX, &tail, err, sizeof err) != 0) {
        cx_http_reply_error(resp, 400, "%s", err);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/v1/logs?tail=%d", tail);
    cx_http_result r;
    cx_http_result_init(&r);
    int rc = agent_call(url, s->token, "GET", path, NULL, &r, err, sizeof err);
    relay(resp, name, rc, &r, err);
    cx_http_result_cleanup(&r);
    return 0;
}

/* POST path to every agent in parallel (HALT ALL must not wait on one
 * hung agent before telling the next). */
typedef struct fanout_job {
    char url[256];
    char name[64];
    const char *token;
    const char *path;
    int rc; /* cx_http_do's */
    cx_http_result r;
    char err[CX_ERRLEN];
    pthread_t th;
    int started;
} fanout_job;

static void *fanout_main(void *arg)
{
    fanout_job *j = arg;
    j->rc = agent_call(j->url, j->token, "POST", j->path, "{}", &j->r, j->err, sizeof j->err);
    return NULL;
}

static void fanout(dash_server *s, const cx_http_req *req, const char *path, cx_http_resp *resp)
{
    if (require_token(s, req, resp) != 0)
        return;
    fanout_job *jobs = calloc((size_t)s->nagents + 1, sizeof *jobs);
    if (!jobs) {
        cx_http_reply_error(resp, 500, "out of memory");
        return;
    }
    pthread_mutex_lock(&s->mu);
    int n = s->nagents;
    for (int i = 0; i < n; i++) {
        snprintf(jobs[i].url, sizeof jobs[i].url, "%s", s->agents[i].url);
        snprintf(jobs[i].name, sizeof jobs[i].name, "%s", s->agents[i].name);
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n; i++) {
        jobs[i].token = s->token;
        jobs[i].path = path;
        cx_http_result_init(&jobs[i].r);
        jobs[i].started = pthread_create(&jobs[i].th, NULL, fanout_main, &jobs[i]) == 0;
        if (!jobs[i].started) /* no thread: do it here */
            fanout_main(&jobs[i]);
    }
    json_t *results = json_array();
    int all_ok = 1;
    for (int i = 0; i < n; i++) {
        if (jobs[i].started)
            pthread_join(jobs[i].th, NULL);
        fanout_job *j = &jobs[i];
        json_t *o = json_pack("{s:s,s:s}", "agent", j->name, "url", j->url);
        int ok = j->rc == 0 && j->r.status >= 200 && j->r.status < 300;
        all_ok &= ok;
        json_object_set_new(o, "ok", json_boolean(ok));
        json_object_set_new(o, "status", json_integer(j->rc == 0 ? j->r.status : 0));
        json_t *answer = j->rc == 0 && j->r.body.data ? json_loads(j->r.body.data, 0, NULL) : NULL;
        json_object_set_new(o, "answer", answer ? answer : json_null());
        if (j->rc != 0)
            json_object_set_new(o, "error", json_string(j->err[0] ? j->err : cx_strerror(j->rc)));
        else if (!ok)
            json_object_set_new(o, "error", json_sprintf("agent answered HTTP %d", j->r.status));
        json_array_append_new(results, o);
        cx_http_result_cleanup(&j->r);
    }
    free(jobs);
    cx_info("dashboard: POST %s on %d agents: %s", path, n, all_ok ? "all ok" : "some failed");
    cx_http_reply_json(resp, all_ok ? 200 : 502, json_pack("{s:b,s:o}", "ok", all_ok, "results", results));
}

int dash_h_halt(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    fanout(ctx, req, "/v1/halt", resp);
    return 0;
}

int dash_h_resume(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    fanout(ctx, req, "/v1/resume", resp);
    return 0;
}
