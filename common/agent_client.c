/* agent_client.c - the typed client of the agent's control API
 * (agent_client.h): one request path, agc_call(), under every call, and a
 * thread per agent for agc_fanout. */
#include "common/agent_client.h"

#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct agc {
    cx_http_client *http; /* one curl handle: one thread at a time */
};

/* ---- reasons ---- */

static const struct {
    const char *name; /* wire name */
    int status;       /* HTTP status */
} reasons[AGC_R_COUNT] = {
    [AGC_R_NONE] = {"", 0},
    [AGC_R_BAD_REQUEST] = {"bad_request", 400},
    [AGC_R_UNAUTHORIZED] = {"unauthorized", 401},
    [AGC_R_NOT_FOUND] = {"not_found", 404},
    [AGC_R_CONFLICT] = {"conflict", 409},
    [AGC_R_UNIT_NOT_RUNNING] = {"unit_not_running", 409},
    [AGC_R_TOO_LARGE] = {"too_large", 413},
    [AGC_R_INTERNAL] = {"internal", 500},
    [AGC_R_NOT_SUPPORTED] = {"not_supported", 501},
    [AGC_R_HALTED] = {"agent_halted", 503},
    [AGC_R_UNAVAILABLE] = {"unavailable", 503},
    [AGC_R_TIMED_OUT] = {"timed_out", 504},
};

const char *agc_reason_name(agc_reason r)
{
    return (unsigned)r < AGC_R_COUNT ? reasons[r].name : "";
}

int agc_reason_status(agc_reason r)
{
    return (unsigned)r < AGC_R_COUNT ? reasons[r].status : 0;
}

agc_reason agc_reason_parse(const char *name)
{
    for (int i = 1; name && i < AGC_R_COUNT; i++)
        if (strcmp(reasons[i].name, name) == 0)
            return (agc_reason)i;
    return AGC_R_NONE;
}

agc_reason agc_reason_of_err(int code)
{
    switch (code) {
    case CX_EINVAL:
    case CX_ECORRUPT:
        return AGC_R_BAD_REQUEST;
    case CX_EAUTH:
        return AGC_R_UNAUTHORIZED;
    case CX_ENOTFOUND:
        return AGC_R_NOT_FOUND;
    case CX_ECONFLICT:
        return AGC_R_CONFLICT;
    case CX_ENOUNIT:
        return AGC_R_UNIT_NOT_RUNNING;
    case CX_ETOOBIG:
        return AGC_R_TOO_LARGE;
    case CX_ENOTSUP:
        return AGC_R_NOT_SUPPORTED;
    case CX_EUNAVAIL:
    case CX_EBUSY:
        return AGC_R_UNAVAILABLE;
    case CX_ETIMEDOUT:
        return AGC_R_TIMED_OUT;
    default:
        return AGC_R_INTERNAL;
    }
}

/* ---- replies ---- */

void agc_reply_init(agc_reply *r)
{
    r->status = 0;
    r->reason = AGC_R_NONE;
    r->json = NULL;
    cx_http_result_init(&r->raw);
}

void agc_reply_cleanup(agc_reply *r)
{
    json_decref(r->json);
    r->json = NULL;
    r->status = 0;
    r->reason = AGC_R_NONE;
    cx_http_result_cleanup(&r->raw);
    cx_http_result_init(&r->raw);
}

json_t *agc_reply_take_json(agc_reply *r)
{
    json_t *j = r->json;
    r->json = NULL;
    return j;
}

agc *agc_new(const char *base_url, const agc_opts *opts)
{
    agc_opts o = opts ? *opts : (agc_opts){0};
    cx_http_opts ho = {.connect_timeout_ms = o.connect_timeout_ms > 0 ? o.connect_timeout_ms : 1000,
                       .timeout_ms = o.timeout_ms > 0 ? o.timeout_ms : 5000,
                       .retries = o.retries,
                       .bearer = o.token,
                       .ca_file = o.ca_file,
                       .max_body = o.max_body ? o.max_body : (size_t)4 << 20,
                       .observe = o.observe,
                       .observe_ctx = o.observe_ctx};
    agc *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->http = cx_http_client_new(base_url, &ho);
    if (!c->http) {
        free(c);
        return NULL;
    }
    return c;
}

void agc_free(agc *c)
{
    if (!c)
        return;
    cx_http_client_free(c->http);
    free(c);
}

const char *agc_url(const agc *c)
{
    return cx_http_client_base(c->http);
}

/* The cx_err for an agent's error status. */
static int status_err(int status)
{
    switch (status) {
    case 400:
        return CX_EINVAL;
    case 401:
    case 403:
        return CX_EAUTH;
    case 404:
        return CX_ENOTFOUND;
    case 409:
        return CX_ECONFLICT;
    case 413:
        return CX_ETOOBIG;
    case 503:
        return CX_EUNAVAIL;
    case 504:
        return CX_ETIMEDOUT;
    default:
        return CX_EIO;
    }
}

/* METHOD path with body (borrowed, may be NULL) into reply (reset first;
 * an internal one when NULL). Returns as agent_client.h says. */
static int agc_call(agc *c, const char *method, const char *path, const json_t *body, agc_reply *reply,
                    char *err, size_t errlen)
{
    agc_reply own;
    agc_reply *r = reply ? reply : &own;
    if (!reply)
        agc_reply_init(&own);
    else
        agc_reply_cleanup(r);
    char *js = body ? json_dumps(body, JSON_COMPACT) : NULL;
    int rc;
    if (body && !js) {
        rc = cx_fail(err, errlen, CX_ENOMEM, "cannot encode the request");
        goto out;
    }
    rc = cx_http_do(c->http, method, path, NULL, js, js ? strlen(js) : 0, js ? "application/json" : NULL, 0,
                    &r->raw, err, errlen);
    free(js);
    if (rc != 0)
        goto out;
    r->status = r->raw.status;
    if (r->raw.body.len)
        r->json = json_loadb(r->raw.body.data, r->raw.body.len, 0, NULL);
    if (r->status < 200 || r->status > 299) {
        r->reason = agc_reason_parse(json_string_value(json_object_get(r->json, "reason")));
        const char *e = json_string_value(json_object_get(r->json, "error"));
        rc = cx_fail(err, errlen, status_err(r->status), "HTTP %d: %s", r->status, e ? e : "(no error text)");
    }
out:
    if (!reply)
        agc_reply_cleanup(&own);
    return rc;
}

int agc_inject(agc *c, const json_t *fault, agc_reply *reply, char *err, size_t errlen)
{
    return agc_call(c, "POST", AGC_PATH_FAULTS, fault, reply, err, errlen);
}

/* GET path into *out (new reference) when the answer is a JSON object
 * (with key: that member, which must be an array, or a bare array). */
static int get_json(agc *c, const char *path, const char *key, json_t **out, char *err, size_t errlen)
{
    agc_reply r;
    agc_reply_init(&r);
    *out = NULL;
    int rc = agc_call(c, "GET", path, NULL, &r, err, errlen);
    if (rc == 0) {
        json_t *v = key && json_is_object(r.json) ? json_object_get(r.json, key) : r.json;
        if (key ? json_is_array(v) : json_is_object(v))
            *out = json_incref(v);
        else
            rc = cx_fail(err, errlen, CX_ECORRUPT, "GET %s: %s", path,
                         key ? "not a list of faults" : "not a JSON object");
    }
    agc_reply_cleanup(&r);
    return rc;
}

int agc_faults(agc *c, json_t **list, char *err, size_t errlen)
{
    return get_json(c, AGC_PATH_FAULTS, "faults", list, err, errlen);
}

/* Fault ids go into a path: letters, digits, '-', '_' and '.' only. */
static int fault_path(const char *id, char *path, size_t len, char *err, size_t errlen)
{
    if (!id || !*id || strlen(id) > 96)
        return cx_fail(err, errlen, CX_EINVAL, "fault id: empty or over 96 characters");
    for (const char *p = id; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return cx_fail(err, errlen, CX_EINVAL, "fault id '%s': only letters, digits, '-', '_' and '.'",
                           id);
    snprintf(path, len, AGC_PATH_FAULTS "/%s", id);
    return 0;
}

/* METHOD /v1/faults/{id}: a bad id is refused before any request, with
 * the reply reset (no answer). */
static int fault_call(agc *c, const char *method, const char *id, agc_reply *reply, char *err, size_t errlen)
{
    char path[160];
    int rc = fault_path(id, path, sizeof path, err, errlen);
    if (rc && reply)
        agc_reply_cleanup(reply);
    return rc ? rc : agc_call(c, method, path, NULL, reply, err, errlen);
}

int agc_fault(agc *c, const char *id, agc_reply *reply, char *err, size_t errlen)
{
    return fault_call(c, "GET", id, reply, err, errlen);
}

int agc_delete_fault(agc *c, const char *id, agc_reply *reply, char *err, size_t errlen)
{
    return fault_call(c, "DELETE", id, reply, err, errlen);
}

/* POST path with an empty object. */
static int post_empty(agc *c, const char *path, agc_reply *reply, char *err, size_t errlen)
{
    json_t *body = json_object();
    int rc = agc_call(c, "POST", path, body, reply, err, errlen);
    json_decref(body);
    return rc;
}

int agc_halt(agc *c, agc_reply *reply, char *err, size_t errlen)
{
    return post_empty(c, AGC_PATH_HALT, reply, err, errlen);
}

int agc_resume(agc *c, agc_reply *reply, char *err, size_t errlen)
{
    return post_empty(c, AGC_PATH_RESUME, reply, err, errlen);
}

int agc_lease(agc *c, int64_t ttl_ms, agc_reply *reply, char *err, size_t errlen)
{
    json_t *body = json_pack("{s:I}", "ttl_ms", (json_int_t)ttl_ms);
    int rc = agc_call(c, "POST", AGC_PATH_LEASE, body, reply, err, errlen);
    json_decref(body);
    return rc;
}

int agc_status(agc *c, json_t **status, char *err, size_t errlen)
{
    return get_json(c, AGC_PATH_STATUS, NULL, status, err, errlen);
}

int agc_logs(agc *c, int tail, agc_reply *reply, char *err, size_t errlen)
{
    char path[64];
    snprintf(path, sizeof path, AGC_PATH_LOGS "?tail=%d", tail);
    return agc_call(c, "GET", path, NULL, reply, err, errlen);
}

/* ---- fan-out ---- */

typedef struct fan_job {
    const char *url;
    const agc_opts *opts;
    agc_call_fn call;
    agc_fan_result *res;
    pthread_t th;
    int started;
} fan_job;

static void *fan_main(void *arg)
{
    fan_job *j = arg;
    agc *c = agc_new(j->url, j->opts);
    if (!c)
        j->res->rc =
            cx_fail(j->res->err, sizeof j->res->err, CX_EINVAL, "cannot make a client for %s", j->url);
    else
        j->res->rc = j->call(c, &j->res->reply, j->res->err, sizeof j->res->err);
    agc_free(c);
    return NULL;
}

int agc_fanout(const char *const *urls, int n, const agc_opts *opts, agc_call_fn call,
               agc_fan_result *results)
/* opts: n entries, opts[i] for urls[i] (each agent its own token) */
{
    fan_job *jobs = calloc((size_t)n + 1, sizeof *jobs);
    for (int i = 0; i < n; i++) {
        results[i].rc = 0;
        results[i].err[0] = '\0';
        agc_reply_init(&results[i].reply);
    }
    for (int i = 0; i < n; i++) {
        fan_job local = {.url = urls[i], .opts = &opts[i], .call = call, .res = &results[i]};
        if (!jobs) { /* no memory for the jobs: one at a time */
            fan_main(&local);
            continue;
        }
        jobs[i] = local;
        jobs[i].started = pthread_create(&jobs[i].th, NULL, fan_main, &jobs[i]) == 0;
        if (!jobs[i].started) /* no thread: do it here */
            fan_main(&jobs[i]);
    }
    int ok = 0;
    for (int i = 0; i < n; i++) {
        if (jobs && jobs[i].started)
            pthread_join(jobs[i].th, NULL);
        ok += results[i].rc == 0;
    }
    free(jobs);
    return ok;
}

void agc_fanout_cleanup(agc_fan_result *results, int n)
{
    for (int i = 0; i < n; i++)
        agc_reply_cleanup(&results[i].reply);
}
