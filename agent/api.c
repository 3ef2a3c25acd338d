/* api.c - HTTP API v1 handlers, auth, audit, and the route table. */
#include "agent/api.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "injectors/kinds_route.h"
#include "agent/metrics.h"
#include "agent/toxiproxy.h"
#include "common/agent_client.h"
#include "common/err.h"
#include "common/json.h"
#include "common/log.h"
#include "common/parse.h"
#include <strings.h>

/* ---- api: error answers ---- */

/* The /v1 routes' error answers, through the project's one error writer
 * (cx_http_reply_problem, common/http_server.h): {"error": text,
 * "status": N, "reason": name}, N and name from the reason table
 * (common/agent_client.h), so a client switches on the reason, never on
 * the text. extra (stolen, or NULL) adds its members (a failed fault's
 * "fault" record). The Toxiproxy-compatible routes (toxiproxy.c), the
 * token check shared with them (api_auth) and the HTTP server's own
 * refusals keep their answers without a reason. */
static void reply_reason(cx_http_resp *resp, agc_reason why, json_t *extra, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void reply_reason(cx_http_resp *resp, agc_reason why, json_t *extra, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cx_http_reply_problem(resp, agc_reason_status(why), agc_reason_name(why), extra, "%s", msg);
}

/* A cx_err code's answer, with detail (else the code's own text). */
static void reply_err_reason(cx_http_resp *resp, int code, const char *detail)
{
    reply_reason(resp, agc_reason_of_err(code), NULL, "%s", detail && *detail ? detail : cx_strerror(code));
}

/* ---- api: auth and audit ---- */

int api_auth(agent *a, const cx_http_req *req, cx_http_resp *resp, int basic_ok, const char **auth)
{
    if (a->token[0] && (cx_http_check_bearer(req, a->token) == 0 ||
                        (basic_ok && cx_http_check_basic_password(req, a->token) == 0))) {
        *auth = "token";
        return 0;
    }
    const char *h = cx_http_header(req, "Authorization");
    *auth = h ? "bad" : "none";
    cx_http_add_header(resp, "WWW-Authenticate", "Bearer realm=\"chaosloco-agent\"");
    cx_http_reply_err(resp, CX_EAUTH,
                      h ? "wrong bearer token" : "missing Authorization: Bearer <token> header");
    return CX_EAUTH;
}

void api_audit(agent *a, const cx_http_req *req, const cx_http_resp *resp, const char *fault_id,
               const char *auth)
{
    const char *detail = NULL;
    json_t *body = NULL;
    if (resp->status >= 400 && resp->body.data) {
        body = json_loads(resp->body.data, 0, NULL);
        detail = json_string_value(json_object_get(body, "error"));
    }
    audit_log(a->audit, req->method, req->path, resp->status, fault_id && fault_id[0] ? fault_id : NULL, auth,
              detail);
    json_decref(body);
}

/* GET /v1/health: the only call without a token. It says the agent's HTTP
 * server answers, and nothing about the run (Kubernetes probes, load
 * balancers: they cannot hold a secret). */
static int h_health(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    (void)req;
    cx_http_reply_json(resp, 200, json_pack("{s:b}", "ok", 1));
    return 0;
}

/* ---- api: the gate, before any body byte is read ----
 *
 * Every call, reads too:
 *   1. Host: an agent listening on loopback answers only requests
 *      addressed to a loopback name (127.x.y.z, localhost, [::1]), so a
 *      web page cannot reach it through DNS rebinding (403);
 *   2. the token (api_auth), on every route but GET /v1/health (which
 *      says "ok" and nothing else, for probes that cannot hold a secret):
 *      `Authorization: Bearer <token>`; with --toxiproxy-compat the
 *      Toxiproxy routes also take it as the password of Basic auth, which
 *      is all Toxiproxy's Go and Python clients can send (a URL with
 *      credentials) (401). No route changes anything unauthenticated (a
 *      local process that could re-point a learner's link would receive
 *      its credential), and none reads anything either: logs, status,
 *      faults and metrics say a lot about a run.
 * Every mutating call (any method but GET/HEAD), v1 and Toxiproxy alike,
 * also (Origin and Sec-Fetch-Site before the token, so a web page's call is
 * a 403 whatever it guessed):
 *   3. Origin (when sent) must be this agent itself, and Sec-Fetch-Site
 *      (when sent) same-origin or none: browsers send them, so a page on
 *      another site is refused even if it guessed everything else (403);
 *   4. a body, when there is one, must be declared application/json: the
 *      content types a page can send cross-origin without a preflight
 *      (text/plain, forms) are refused (415).
 * All of it runs on the headers alone: nothing is buffered for a refused
 * call. Refusals (and the router's own: bad path, 404, 405, 413) are
 * logged and audited by api_refused.
 */

static int is_read(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

/* The Toxiproxy-compatible routes (everything outside /v1/ and /metrics). */
static int is_toxiproxy_route(const cx_http_route *route)
{
    return strncmp(route->pattern, "/v1/", 4) != 0 && strcmp(route->pattern, "/metrics") != 0;
}

/* "application/json" (any case), with optional parameters. */
static int is_json_type(const char *ct)
{
    while (*ct == ' ')
        ct++;
    size_t n = strlen("application/json");
    if (strncasecmp(ct, "application/json", n) != 0)
        return 0;
    ct += n;
    while (*ct == ' ')
        ct++;
    return *ct == '\0' || *ct == ';';
}

static void refuse(cx_http_resp *resp, int status, const char *what, const char *value, const char *why)
{
    char v[256];
    cx_utf8_sanitize(value ? value : "(none)", v, sizeof v);
    cx_http_reply_error(resp, status, "%s: %s: %s", what, v, why);
}

static int api_gate(void *ctx, cx_http_req *req, const cx_http_route *route, cx_http_resp *resp)
{
    agent *a = ctx;
    req->auth = "none";
    /* a refusal below is an answer of the Toxiproxy API too (a read that
     * passes gets its id from its handler) */
    int tp = is_toxiproxy_route(route);
    const char *host = cx_http_header(req, "Host");
    if (a->loopback && (!host || !cx_http_host_is_loopback(host))) {
        if (tp)
            tp_request_id(resp);
        refuse(resp, 403, "Host", host,
               "not a loopback name; this agent listens on loopback and answers only 127.0.0.1, localhost "
               "or [::1] (a web page could otherwise reach it through DNS rebinding)");
        return CX_EAUTH;
    }
    if (route->fn == h_health)
        return 0;
    if (is_read(req->method)) {
        if (api_auth(a, req, resp, tp && a->o.toxiproxy_compat, &req->auth) == 0)
            return 0;
        if (tp)
            tp_request_id(resp);
        return CX_EAUTH;
    }
    if (tp)
        tp_request_id(resp);
    const char *origin = cx_http_header(req, "Origin");
    if (origin) {
        char self[300];
        snprintf(self, sizeof self, "%s://%s", a->tls_cert ? "https" : "http", host ? host : "");
        if (!host || strcasecmp(origin, self) != 0) {
            refuse(resp, 403, "Origin", origin,
                   "not this agent; calls from web pages of other origins are refused");
            return CX_EAUTH;
        }
    }
    const char *site = cx_http_header(req, "Sec-Fetch-Site");
    if (site && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0) {
        refuse(resp, 403, "Sec-Fetch-Site", site, "calls from web pages of other sites are refused");
        return CX_EAUTH;
    }
    if (api_auth(a, req, resp, tp && a->o.toxiproxy_compat, &req->auth) < 0)
        return CX_EAUTH;
    const char *cl = cx_http_header(req, "Content-Length");
    const char *te = cx_http_header(req, "Transfer-Encoding");
    int has_body = (te && te[0]) || (cl && strtoll(cl, NULL, 10) != 0);
    const char *ct = cx_http_header(req, "Content-Type");
    if (has_body && (!ct || !is_json_type(ct))) {
        refuse(resp, 415, "Content-Type", ct, "request bodies must be application/json");
        return CX_EINVAL;
    }
    return 0;
}

/* Answers the router gave without a handler: logged (with the path made
 * printable), and audited when the call would have changed something. */
static void api_refused(void *ctx, const cx_http_req *req, const cx_http_route *route,
                        const cx_http_resp *resp)
{
    agent *a = ctx;
    (void)route;
    int hostile = resp->status == 400 || resp->status == 403 || resp->status == 413 || resp->status == 414 ||
                  resp->status == 415;
    if (is_read(req->method) && !hostile)
        return;
    char path[512];
    cx_utf8_sanitize(req->path, path, sizeof path);
    json_t *body = resp->body.data ? json_loads(resp->body.data, 0, NULL) : NULL;
    const char *detail = json_string_value(json_object_get(body, "error"));
    cx_warn("http: refused %s %s -> %d: %s", req->method, path, resp->status, detail ? detail : "");
    json_decref(body);
    api_audit(a, req, resp, NULL, req->auth ? req->auth : "none");
}

const cx_http_gate agent_gate = {.check = api_gate, .refused = api_refused};

/* ---- api: faults ---- */

int api_decode_fault(json_t *body, reg_spec *spec, char *err, size_t errlen)
{
    const char *type = NULL, *target = NULL;
    json_t *params = NULL, *duration = NULL, *toxicity = NULL, *seed = NULL;
    int rc = cx_json_unpack(body, "body", err, errlen, "{s:s,s?:s,s?:o,s?:o,s?:o,s?:o}", "type", &type,
                            "target", &target, "params", &params, "duration_ms", &duration, "toxicity",
                            &toxicity, "seed", &seed);
    if (rc < 0)
        return rc;
    memset(spec, 0, sizeof *spec);
    spec->type = type;
    spec->target = target;
    if (params && !json_is_null(params) && !json_is_object(params))
        return cx_fail(err, errlen, CX_EINVAL, "params: must be an object");
    spec->params = params && json_is_object(params) ? params : NULL;
    if (!duration)
        return cx_fail(err, errlen, CX_EINVAL,
                       "duration_ms: required (every fault has a duration; it is reverted after it)");
    if (!json_is_integer(duration))
        return cx_fail(err, errlen, CX_EINVAL, "duration_ms: must be an integer number of ms");
    spec->duration_ms = json_integer_value(duration);
    if (spec->duration_ms <= 0)
        return cx_fail(err, errlen, CX_EINVAL, "duration_ms: must be > 0 (got %" PRId64 ")",
                       spec->duration_ms);
    if (toxicity && !json_is_null(toxicity)) {
        if (!json_is_number(toxicity))
            return cx_fail(err, errlen, CX_EINVAL, "toxicity: must be a number within [0, 1]");
        spec->has_toxicity = 1;
        spec->toxicity = json_number_value(toxicity);
        if (!(spec->toxicity >= 0.0 && spec->toxicity <= 1.0))
            return cx_fail(err, errlen, CX_EINVAL, "toxicity: must be within [0, 1] (got %g)",
                           spec->toxicity);
    }
    if (seed && !json_is_null(seed)) {
        if (!json_is_integer(seed) || json_integer_value(seed) < 0)
            return cx_fail(err, errlen, CX_EINVAL, "seed: must be a non-negative integer");
        spec->has_seed = 1;
        spec->seed = (uint64_t)json_integer_value(seed);
    }
    if (target && !target[0])
        return cx_fail(err, errlen, CX_EINVAL, "target: must not be empty");
    return 0;
}


static void faults_post(agent *a, const cx_http_req *req, cx_http_resp *resp, char *fid, size_t fidlen)
{
    if (agent_halted(a)) {
        reply_reason(resp, AGC_R_HALTED, NULL,
                     "agent is halted: new faults are refused until POST /v1/resume");
        return;
    }
    json_t *body = NULL;
    if (cx_http_body_json(req, resp, 0, &body) < 0)
        return;
    reg_spec spec;
    char err[CX_ERRLEN] = "";
    if (api_decode_fault(body, &spec, err, sizeof err) < 0) {
        reply_err_reason(resp, CX_EINVAL, err);
        json_decref(body);
        return;
    }
    spec.lease = agent_lease_held(a);
    spec.origin = "api";
    json_t *rec = NULL;
    int rc = reg_create(a->reg, &spec, &rec, err, sizeof err);
    if (rec) {
        snprintf(fid, fidlen, "%s", json_string_value(json_object_get(rec, "id")));
    }
    if (rc == 0) {
        char loc[128];
        snprintf(loc, sizeof loc, "/v1/faults/%s", fid);
        cx_http_add_header(resp, "Location", "%s", loc);
        cx_http_reply_json(resp, 201, rec);
    } else if (rec) {
        /* Applying failed: the error, with the failed record for the why
         * (an injector that needs a running unit and found none says so
         * with CX_ENOUNIT: unit_not_running). */
        reply_reason(resp, agc_reason_of_err(rc), json_pack("{s:o}", "fault", rec), "%s", err);
    } else {
        reply_err_reason(resp, rc, err);
    }
    json_decref(body);
}

static int h_faults_post(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    char fid[64] = "";
    faults_post(a, req, resp, fid, sizeof fid);
    api_audit(a, req, resp, fid, req->auth);
    return 0;
}

static int h_faults_list(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    (void)req;
    json_t *o = json_pack("{s:o}", "faults", reg_list(a->reg));
    cx_http_reply_json(resp, 200, o);
    return 0;
}

static int h_fault_get(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    json_t *rec = NULL;
    if (reg_get(a->reg, req->params[0], &rec) < 0) {
        reply_reason(resp, AGC_R_NOT_FOUND, NULL, "no fault with id '%s'", req->params[0]);
        return 0;
    }
    cx_http_reply_json(resp, 200, rec);
    return 0;
}

static int h_fault_delete(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    json_t *rec = NULL;
    char err[CX_ERRLEN] = "";
    int rc = reg_revert(a->reg, req->params[0], "delete", &rec, err, sizeof err);
    if (rc == 0) {
        cx_http_reply_json(resp, 200, rec);
    } else if (rc == CX_ECONFLICT && rec) {
        /* Already over: deleting is idempotent, the record says how it ended. */
        cx_http_reply_json(resp, 200, rec);
    } else {
        json_decref(rec);
        reply_err_reason(resp, rc, err);
    }
    api_audit(a, req, resp, req->params[0], req->auth);
    return 0;
}

static int no_params(const cx_http_req *req, cx_http_resp *resp);

/* DELETE /v1/faults: revert every active fault now (revert_reason
 * "delete"), new ones stay welcome (unlike halt). */
static int h_faults_delete(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    if (no_params(req, resp) == 0) {
        int n = reg_revert_all(a->reg, "delete", 0);
        cx_info("DELETE /v1/faults: %d fault(s) reverted", n);
        cx_http_reply_json(resp, 200, json_pack("{s:i}", "reverted", n));
    }
    api_audit(a, req, resp, NULL, req->auth);
    return 0;
}

/* ---- api: halt, resume, lease ---- */

/* The body of a call that takes no parameters: empty or {}. Anything else
 * gets a 400 naming what was sent, and CX_EINVAL. */
static int no_params(const cx_http_req *req, cx_http_resp *resp)
{
    json_t *body = NULL;
    if (cx_http_body_json(req, resp, 1, &body) != 0)
        return CX_EINVAL;
    char err[CX_ERRLEN];
    int rc = cx_json_unpack(body, "body", err, sizeof err, "{}");
    json_decref(body);
    if (rc < 0)
        reply_err_reason(resp, CX_EINVAL, err);
    return rc < 0 ? CX_EINVAL : 0;
}

static int h_halt(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    if (no_params(req, resp) == 0) {
        int n = agent_halt(a);
        cx_http_reply_json(resp, 200, json_pack("{s:b,s:i}", "halted", 1, "reverted", n));
    }
    api_audit(a, req, resp, NULL, req->auth);
    return 0;
}

static int h_resume(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    if (no_params(req, resp) == 0) {
        agent_resume(a);
        cx_http_reply_json(resp, 200, json_pack("{s:b}", "halted", 0));
    }
    api_audit(a, req, resp, NULL, req->auth);
    return 0;
}

static int h_lease(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    json_t *body = NULL;
    if (cx_http_body_json(req, resp, 0, &body) == 0) {
        char err[CX_ERRLEN];
        json_t *ttl = NULL;
        if (cx_json_unpack(body, "body", err, sizeof err, "{s:o}", "ttl_ms", &ttl) < 0) {
            reply_err_reason(resp, CX_EINVAL, err);
        } else if (!json_is_integer(ttl) || json_integer_value(ttl) < 0 ||
                   json_integer_value(ttl) > API_LEASE_MAX_TTL_MS) {
            reply_reason(resp, AGC_R_BAD_REQUEST, NULL,
                         "ttl_ms: must be an integer within [0, %lld] (0 releases the lease)",
                         (long long)API_LEASE_MAX_TTL_MS);
        } else {
            if (json_integer_value(ttl) == 0)
                agent_lease_release(a);
            else
                agent_lease_renew(a, json_integer_value(ttl));
            cx_http_reply_json(resp, 200, json_pack("{s:o}", "lease", agent_lease_json(a)));
        }
        json_decref(body);
    }
    api_audit(a, req, resp, NULL, req->auth);
    return 0;
}

/* ---- api: read-only ---- */

static int h_status(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)req;
    cx_http_reply_json(resp, 200, agent_status_json(ctx));
    return 0;
}

static int h_version(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    (void)req;
    json_t *types = json_array();
    for (const injector *const *p = injector_table; *p; p++)
        json_array_append_new(types, json_string((*p)->type));
    cx_http_reply_json(resp, 200,
                       json_pack("{s:s,s:s,s:s,s:o}", "name", "chaosloco-agent", "version", CHAOSLOCO_VERSION,
                                 "api", "v1", "fault_types", types));
    return 0;
}

static int h_logs(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    int tail = 100;
    const char *q = cx_http_query(req, "tail");
    char err[CX_ERRLEN];
    if (q && cx_parse_int(q, "tail", 1, API_LOG_TAIL_MAX_LINES, &tail, err, sizeof err) < 0) {
        reply_err_reason(resp, CX_EINVAL, err);
        return 0;
    }
    if (!a->sup) {
        cx_http_reply_text(resp, 200, "text/plain; charset=utf-8", "");
        return 0;
    }
    char *text = sup_log_tail(a->sup, tail, API_LOG_TAIL_MAX_BYTES);
    cx_http_reply_text(resp, 200, "text/plain; charset=utf-8", text ? text : "");
    free(text);
    return 0;
}

static int h_metrics(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)req;
    cx_buf b;
    cx_buf_init(&b, 4 * 1024 * 1024);
    metrics_render(ctx, &b);
    cx_http_reply_bytes(resp, 200, "text/plain; version=0.0.4; charset=utf-8", b.data ? b.data : "", b.len);
    cx_buf_cleanup(&b);
    return 0;
}

/* ---- api: route table ---- */

const cx_http_route agent_routes[] = {
    {"GET", "/v1/status", h_status},
    {"GET", "/v1/faults", h_faults_list},
    {"POST", "/v1/faults", h_faults_post},
    {"DELETE", "/v1/faults", h_faults_delete},
    {"GET", "/v1/faults/{}", h_fault_get},
    {"DELETE", "/v1/faults/{}", h_fault_delete},
    {"POST", "/v1/halt", h_halt},
    {"POST", "/v1/resume", h_resume},
    {"POST", "/v1/lease", h_lease},
    {"GET", "/v1/version", h_version},
    {"GET", "/v1/health", h_health},
    {"GET", "/v1/fault-kinds", api_fault_kinds},
    {"GET", "/v1/logs", h_logs},
    {"GET", "/metrics", h_metrics},
    /* Toxiproxy 2.x API (toxiproxy.c) */
    {"GET", "/proxies", tp_proxies_list},
    {"POST", "/proxies", tp_proxies_create},
    {"POST", "/populate", tp_populate},
    {"GET", "/proxies/{}", tp_proxy_get},
    {"POST", "/proxies/{}", tp_proxy_update},
    {"PATCH", "/proxies/{}", tp_proxy_update},
    {"DELETE", "/proxies/{}", tp_proxy_delete},
    {"GET", "/proxies/{}/toxics", tp_toxics_list},
    {"POST", "/proxies/{}/toxics", tp_toxic_create},
    {"GET", "/proxies/{}/toxics/{}", tp_toxic_get},
    {"POST", "/proxies/{}/toxics/{}", tp_toxic_update},
    {"PATCH", "/proxies/{}/toxics/{}", tp_toxic_update},
    {"DELETE", "/proxies/{}/toxics/{}", tp_toxic_delete},
    {"POST", "/reset", tp_reset},
    {"GET", "/version", tp_version},
};
const size_t agent_nroutes = sizeof agent_routes / sizeof agent_routes[0];
/* Control calls that get through a connection flood (http_guard.h). */
const char *const agent_reserved_routes[] = {"POST /v1/halt", "POST /v1/lease", NULL};
