/* test_dashboard.c - `chaosloco dashboard` against a fake syncer and fake
 * agents served from this test process (cx_http_server answering the
 * documented shapes of DESIGN §3.1/§4, docs/api.md and docs/telemetry.md). Checks that
 * /api/state aggregates them, /api/events streams a snapshot then updates
 * and events, the controls forward to the agents with the bearer token and
 * refuse without it, and an unreachable agent is shown as such.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/file.h"
#include "common/http_client.h"
#include "common/http_server.h"
#include "support.h"
#include "trainer/credential.h"

#define TOKEN "s3cret-token"
#define NFAKE 2

/* ---- fake syncer ---- */

static struct {
    pthread_mutex_t mu;
    json_t *events; /* every event, seq 1.. */
    int64_t merges;
    int64_t bytes;
} fs = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void fs_add(json_t *ev)
{
    pthread_mutex_lock(&fs.mu);
    json_object_set_new(ev, "seq", json_integer((json_int_t)json_array_size(fs.events) + 1));
    json_object_set_new(ev, "t_mono_ms", json_integer(cx_mono_ms()));
    json_object_set_new(ev, "t_real", json_string("2026-12-02T11:30:26.123Z"));
    json_array_append_new(fs.events, ev);
    pthread_mutex_unlock(&fs.mu);
}

/* The fake syncer wants its own credential (the dashboard's
 * --syncer-credential-file), like the real one: never the agents' token. */
#define SYNCER_CRED "read.00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static int fs_refused(const cx_http_req *req, cx_http_resp *resp)
{
    const char *h = cx_http_header(req, "Authorization");
    if (h && strcmp(h, "Bearer " SYNCER_CRED) == 0)
        return 0;
    cx_http_reply_error(resp, 401, "fake syncer: wrong credential (%s)", h ? h : "none");
    return 1;
}

static int fs_status(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    if (fs_refused(req, resp))
        return 0;
    pthread_mutex_lock(&fs.mu);
    fs.merges += 2;
    fs.bytes += 1000;
    json_t *st = json_pack("{s:s,s:{s:f,s:i},s:I,s:[{s:i,s:i}],s:[{s:i,s:s,s:i,s:i,s:i,s:{s:i,s:i}},"
                           "{s:i,s:s,s:i,s:i,s:i,s:{s:i,s:i}}],s:{s:I,s:I}}",
                           "mode", "decoupled", "eval", "loss", 4.25, "step", 10, "merges",
                           (json_int_t)fs.merges, "fragments", "id", 0, "version", 3, "learners", "id", 0,
                           "state", "active", "incarnation", 1, "step", 120, "tokens", 7680, "contributions",
                           "accepted", 5, "rejected", 0, "id", 1, "state", "active", "incarnation", 2, "step",
                           80, "tokens", 5120, "contributions", "accepted", 3, "rejected", 1, "bytes", "in",
                           (json_int_t)fs.bytes, "out", (json_int_t)(2 * fs.bytes));
    pthread_mutex_unlock(&fs.mu);
    cx_http_reply_json(resp, 200, st);
    return 0;
}

static int fs_events(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    if (fs_refused(req, resp))
        return 0;
    const char *since_s = cx_http_query(req, "since");
    long since = since_s ? atol(since_s) : 0;
    resp->status = 200;
    resp->content_type = "application/x-ndjson";
    pthread_mutex_lock(&fs.mu);
    for (size_t i = (size_t)since; i < json_array_size(fs.events); i++) {
        char *line = json_dumps(json_array_get(fs.events, i), JSON_COMPACT);
        cx_buf_printf(&resp->body, "%s\n", line);
        free(line);
    }
    pthread_mutex_unlock(&fs.mu);
    return 0;
}

static const cx_http_route fs_routes[] = {
    {"GET", "/v1/status", fs_status},
    {"GET", "/v1/events", fs_events},
};

/* ---- fake agents ---- */

typedef struct fake_agent {
    int n; /* learner id; status id "learner-<n>" */
    pthread_mutex_t mu;
    json_t *faults;     /* records */
    int halts_ok;       /* POST /v1/halt with the right token */
    int halts_denied;   /* ... without it */
    int posts_ok;       /* POST /v1/faults with the right token */
    json_t *last_fault; /* body of the last accepted POST /v1/faults */
    int deletes_ok;
    char last_deleted[64];
    int logs_asked_tail;
    cx_http_server *srv;
    char url[64];
} fake_agent;

static fake_agent fa[NFAKE];

static int fa_status(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    fake_agent *a = ctx;
    char id[32];
    snprintf(id, sizeof id, "learner-%d", a->n);
    pthread_mutex_lock(&a->mu);
    json_t *st = json_pack("{s:s,s:{s:s,s:i,s:i,s:i,s:n},s:b,s:n,s:i,s:[]}", "id", id, "unit", "state",
                           "running", "pid", 4242 + a->n, "incarnation", 1 + a->n, "restarts", a->n,
                           "last_exit", "halted", a->halts_ok > 0, "lease", "faults_active", 0, "proxies");
    pthread_mutex_unlock(&a->mu);
    cx_http_reply_json(resp, 200, st);
    return 0;
}

static int fa_faults(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    fake_agent *a = ctx;
    pthread_mutex_lock(&a->mu);
    json_t *copy = json_deep_copy(a->faults);
    pthread_mutex_unlock(&a->mu);
    cx_http_reply_json(resp, 200, copy);
    return 0;
}

static int fa_post_fault(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    fake_agent *a = ctx;
    if (cx_http_check_bearer(req, TOKEN) != 0) {
        cx_http_reply_error(resp, 401, "missing or wrong token");
        return 0;
    }
    json_t *body;
    if (cx_http_body_json(req, resp, 0, &body) != 0)
        return 0;
    pthread_mutex_lock(&a->mu);
    a->posts_ok++;
    json_decref(a->last_fault);
    a->last_fault = json_incref(body);
    char id[32];
    snprintf(id, sizeof id, "f%zu", json_array_size(a->faults) + 1);
    json_t *rec =
        json_pack("{s:s,s:O,s:s,s:O?,s:O,s:s,s:I,s:n,s:{},s:n,s:n}", "id", id, "type",
                  json_object_get(body, "type"), "target", "unit", "params", json_object_get(body, "params"),
                  "duration_ms", json_object_get(body, "duration_ms"), "state", "active", "started_mono_ms",
                  (json_int_t)cx_mono_ms(), "ended_mono_ms", "evidence", "revert_reason", "error");
    json_array_append(a->faults, rec);
    pthread_mutex_unlock(&a->mu);
    json_decref(body);
    cx_http_reply_json(resp, 201, rec);
    return 0;
}

static int fa_delete_fault(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    fake_agent *a = ctx;
    if (cx_http_check_bearer(req, TOKEN) != 0) {
        cx_http_reply_error(resp, 401, "missing or wrong token");
        return 0;
    }
    pthread_mutex_lock(&a->mu);
    size_t i;
    json_t *rec, *found = NULL;
    json_array_foreach(a->faults, i, rec)
    {
        if (strcmp(json_string_value(json_object_get(rec, "id")), req->params[0]) == 0)
            found = rec;
    }
    if (found) {
        json_object_set_new(found, "state", json_string("reverted"));
        json_object_set_new(found, "ended_mono_ms", json_integer(cx_mono_ms()));
        json_object_set_new(found, "revert_reason", json_string("delete"));
        a->deletes_ok++;
        snprintf(a->last_deleted, sizeof a->last_deleted, "%s", req->params[0]);
        cx_http_reply_json(resp, 200, json_deep_copy(found));
    } else {
        cx_http_reply_error(resp, 404, "no such fault");
    }
    pthread_mutex_unlock(&a->mu);
    return 0;
}

static int fa_halt(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    fake_agent *a = ctx;
    pthread_mutex_lock(&a->mu);
    int ok = cx_http_check_bearer(req, TOKEN) == 0;
    if (ok)
        a->halts_ok++;
    else
        a->halts_denied++;
    pthread_mutex_unlock(&a->mu);
    if (ok)
        cx_http_reply_json(resp, 200, json_pack("{s:b,s:i}", "halted", 1, "reverted", 0));
    else
        cx_http_reply_error(resp, 401, "missing or wrong token");
    return 0;
}

static int fa_logs(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    fake_agent *a = ctx;
    const char *t = cx_http_query(req, "tail");
    pthread_mutex_lock(&a->mu);
    a->logs_asked_tail = t ? atoi(t) : -1;
    pthread_mutex_unlock(&a->mu);
    char text[64];
    snprintf(text, sizeof text, "unit log of learner-%d\nstep 120 loss 4.2\n", a->n);
    cx_http_reply_text(resp, 200, "text/plain; charset=utf-8", text);
    return 0;
}

static const cx_http_route fa_routes[] = {
    {"GET", "/v1/status", fa_status},      {"GET", "/v1/faults", fa_faults},
    {"POST", "/v1/faults", fa_post_fault}, {"DELETE", "/v1/faults/{}", fa_delete_fault},
    {"POST", "/v1/halt", fa_halt},         {"GET", "/v1/logs", fa_logs},
};

/* ---- topology ---- */

static cx_http_server *syncer_srv;
static char *dir;
static char dash[128]; /* "http://127.0.0.1:PORT" */

static void topology_up(void)
{
    char err[256];
    fs.events = json_array();
    fs.merges = 0;
    fs.bytes = 0;
    fs_add(json_pack("{s:s,s:s,s:b,s:i,s:[i],s:i}", "type", "start", "mode", "decoupled", "restored", 0,
                     "merges", 0, "versions", 0, "learners", 2));
    fs_add(json_pack("{s:s,s:i,s:i,s:i}", "type", "join", "learner", 0, "incarnation", 1, "resumed_step", 0));
    fs_add(
        json_pack("{s:s,s:i,s:i,s:i}", "type", "join", "learner", 1, "incarnation", 2, "resumed_step", 40));
    fs_add(json_pack("{s:s,s:f,s:i,s:i}", "type", "eval", "loss", 5.5, "merges", 0, "tokens", 0));
    fs_add(json_pack("{s:s,s:i,s:i,s:[{s:i,s:i,s:f,s:i,s:i},{s:i,s:i,s:f,s:i,s:i}],s:i,s:f,s:s}", "type",
                     "merge", "fragment", 0, "version", 1, "participants", "learner", 0, "incarnation", 1,
                     "weight", 1.0, "tokens", 640, "steps", 10, "learner", 1, "incarnation", 2, "weight", 0.5,
                     "tokens", 320, "steps", 10, "grace_ms", 12, "update_norm", 0.3, "mode", "decoupled"));
    fs_add(json_pack("{s:s,s:f,s:i,s:i}", "type", "eval", "loss", 4.9, "merges", 1, "tokens", 960));
    fs_add(json_pack("{s:s,s:i,s:i,s:i,s:f,s:i,s:i,s:i}", "type", "heartbeat", "learner", 0, "incarnation", 1,
                     "step", 120, "train_loss", 4.7, "tokens", 7680, "step_ms", 20, "clock_skew_ms", 0));
    fs_add(json_pack("{s:s,s:f,s:i,s:i}", "type", "eval", "loss", 4.25, "merges", 2, "tokens", 1920));
    syncer_srv = cx_http_server_new("127.0.0.1:0", fs_routes, 2, NULL, 1 << 20, err, sizeof err);
    cr_assert(syncer_srv, "fake syncer: %s", err);

    int64_t now = cx_mono_ms();
    for (int i = 0; i < NFAKE; i++) {
        fake_agent *a = &fa[i];
        memset(a, 0, sizeof *a);
        a->n = i;
        pthread_mutex_init(&a->mu, NULL);
        a->faults = json_array();
        /* one fault already over: a window to shade */
        json_array_append_new(
            a->faults, json_pack("{s:s,s:s,s:s,s:{},s:i,s:s,s:I,s:I,s:{},s:s,s:n}", "id", "f0", "type",
                                 "pause", "target", "unit", "params", "duration_ms", 2000, "state",
                                 "reverted", "started_mono_ms", (json_int_t)(now - 3000), "ended_mono_ms",
                                 (json_int_t)(now - 1000), "evidence", "revert_reason", "expiry", "error"));
        a->srv = cx_http_server_new("127.0.0.1:0", fa_routes, sizeof fa_routes / sizeof *fa_routes, a,
                                    1 << 20, err, sizeof err);
        cr_assert(a->srv, "fake agent: %s", err);
        snprintf(a->url, sizeof a->url, "http://127.0.0.1:%d", cx_http_server_port(a->srv));
    }

    dir = it_mkdtemp("dashboard");
    char token_path[512], state_dir[512], syncer[64], agents[512];
    snprintf(token_path, sizeof token_path, "%s/token", dir);
    /* a secret file (common/secret.h): its owner's only */
    cr_assert_eq(cx_file_write_atomic_mode(token_path, TOKEN "\n", strlen(TOKEN) + 1, 0600, err, sizeof err),
                 0, "%s", err);
    char cred_path[600];
    snprintf(cred_path, sizeof cred_path, "%s/read.cred", dir);
    cr_assert_eq(cred_write_file(cred_path, SYNCER_CRED, err, sizeof err), 0, "%s", err);
    snprintf(state_dir, sizeof state_dir, "%s/state", dir);
    snprintf(syncer, sizeof syncer, "http://127.0.0.1:%d", cx_http_server_port(syncer_srv));
    /* the third agent is a port nobody listens on: unreachable */
    snprintf(agents, sizeof agents, "%s,%s,http://127.0.0.1:1", fa[0].url, fa[1].url);
    const char *args[] = {"dashboard", "--syncer",
                          syncer,      "--agents",
                          agents,      "--token-file",
                          token_path,  "--state-dir",
                          state_dir,   "--poll-ms",
                          "100",       "--title",
                          "it",        "--syncer-credential-file",
                          cred_path,   NULL};
    it_start(dir, "dashboard", args, NULL);
    char addr[64];
    if (it_wait_addr(state_dir, addr, sizeof addr, 20000) != 0) {
        it_dump_log(dir, "dashboard");
        cr_assert_fail("the dashboard did not write listen.addr");
    }
    snprintf(dash, sizeof dash, "http://%s", addr);
}

static void topology_down(void)
{
    it_cleanup();
    for (int i = 0; i < NFAKE; i++) {
        cx_http_server_free(fa[i].srv);
        json_decref(fa[i].faults);
        json_decref(fa[i].last_fault);
    }
    cx_http_server_free(syncer_srv);
    json_decref(fs.events);
    free(dir);
}

TestSuite(dashboard, .init = topology_up, .fini = topology_down, .timeout = 60);

/* ---- helpers ---- */

static json_t *call(const char *method, const char *path, json_t *body, const char *token, int *status)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", dash, path);
    json_t *out = it_http_json(method, url, body, token, status);
    json_decref(body);
    return out;
}

static json_t *unit_named(json_t *state, const char *agent)
{
    size_t i;
    json_t *u;
    json_array_foreach(json_object_get(state, "units"), i, u)
    {
        const char *a = json_string_value(json_object_get(u, "agent"));
        if (a && strcmp(a, agent) == 0)
            return u;
    }
    return NULL;
}

/* Poll /api/state until every agent and the syncer were polled and the
 * history holds what the fakes serve (bounded: 15 s). */
static json_t *settled_state(void)
{
    int64_t deadline = cx_mono_ms() + 15000;
    json_t *st = NULL;
    while (cx_mono_ms() < deadline) {
        json_decref(st);
        int status = 0;
        st = call("GET", "/api/state", NULL, NULL, &status);
        json_t *u0 = st ? unit_named(st, "learner-0") : NULL;
        json_t *u1 = st ? unit_named(st, "learner-1") : NULL;
        json_t *bad = st ? json_array_get(json_object_get(st, "units"), 2) : NULL;
        if (status == 200 && u0 && u1 && bad && json_is_false(json_object_get(bad, "reachable")) &&
            json_array_size(json_object_get(json_object_get(st, "series"), "loss")) >= 3 &&
            json_array_size(json_object_get(st, "faults")) >= 2)
            return st;
        cx_sleep_ms(100);
    }
    it_dump_log(dir, "dashboard");
    cr_assert_fail("the dashboard never aggregated the fake topology: %s",
                   st ? json_dumps(st, 0) : "(no answer)");
    return NULL;
}

/* ---- tests ---- */

Test(dashboard, state_aggregates_syncer_and_agents)
{
    json_t *st = settled_state();
    cr_assert_str_eq(json_string_value(json_object_get(st, "title")), "it");
    cr_assert(json_is_true(json_object_get(st, "controls")));
    /* syncer */
    json_t *sy = json_object_get(st, "syncer");
    cr_assert(json_is_true(json_object_get(sy, "reachable")));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(sy, "status"), "mode")), "decoupled");
    /* series: three eval points in order, one merge marker */
    json_t *loss = json_object_get(json_object_get(st, "series"), "loss");
    cr_assert_eq(json_array_size(loss), 3);
    cr_assert_float_eq(json_real_value(json_array_get(json_array_get(loss, 0), 1)), 5.5, 1e-9);
    cr_assert_float_eq(json_real_value(json_array_get(json_array_get(loss, 2), 1)), 4.25, 1e-9);
    cr_assert_eq(json_array_size(json_object_get(json_object_get(st, "series"), "merges")), 1);
    /* rates come from successive status polls: merges +2 and bytes +1000 per call */
    int64_t deadline = cx_mono_ms() + 5000;
    while (json_array_size(json_object_get(json_object_get(st, "series"), "rates")) == 0 &&
           cx_mono_ms() < deadline) {
        json_decref(st);
        cx_sleep_ms(150);
        st = call("GET", "/api/state", NULL, NULL, NULL);
    }
    json_t *rate = json_array_get(json_object_get(json_object_get(st, "series"), "rates"), 0);
    cr_assert(rate, "no rate samples");
    cr_assert_gt(json_number_value(json_array_get(rate, 1)), 0.0, "merges/s must be positive");
    cr_assert_gt(json_number_value(json_array_get(rate, 3)), json_number_value(json_array_get(rate, 2)),
                 "bytes out grow twice as fast as bytes in");

    /* units: agents by their status id, joined with the syncer's learners */
    json_t *u1 = unit_named(st, "learner-1");
    cr_assert_eq(json_integer_value(json_object_get(u1, "learner_id")), 1);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(u1, "unit"), "state")), "running");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(u1, "unit"), "incarnation")), 2);
    json_t *l1 = json_object_get(u1, "learner");
    cr_assert_eq(json_integer_value(json_object_get(l1, "step")), 80);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(l1, "last_merged"), "version")), 1);
    json_t *l0 = json_object_get(unit_named(st, "learner-0"), "learner");
    cr_assert_float_eq(json_number_value(json_object_get(l0, "train_loss")), 4.7, 1e-9);
    /* the unreachable agent: marked, with the reason */
    json_t *bad = json_array_get(json_object_get(st, "units"), 2);
    cr_assert(json_is_false(json_object_get(bad, "reachable")));
    cr_assert(json_is_string(json_object_get(bad, "error")));
    cr_assert_str_eq(json_string_value(json_object_get(bad, "url")), "http://127.0.0.1:1");
    /* fault windows from both agents, ended */
    json_t *w = json_array_get(json_object_get(st, "faults"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(w, "type")), "pause");
    cr_assert_gt(json_integer_value(json_object_get(w, "end_mono_ms")),
                 json_integer_value(json_object_get(w, "start_mono_ms")));
    /* event log: syncer events without heartbeats */
    json_t *evs = json_object_get(st, "events");
    cr_assert_eq(json_array_size(evs), 7, "8 events minus 1 heartbeat, got %zu", json_array_size(evs));
    json_decref(st);
}

/* ---- SSE ---- */

typedef struct sse_read {
    cx_buf got;
    int added;        /* the new eval event was added to the fake syncer */
    int64_t want_seq; /* its seq */
} sse_read;

static size_t on_sse(char *ptr, size_t size, size_t nmemb, void *ud)
{
    sse_read *r = ud;
    cx_buf_append(&r->got, ptr, size * nmemb);
    if (!r->added && strstr(r->got.data, "event: snapshot")) {
        /* the stream is open: now make something happen */
        fs_add(json_pack("{s:s,s:f,s:i,s:i}", "type", "eval", "loss", 3.75, "merges", 3, "tokens", 2880));
        r->added = 1;
    }
    if (r->added) {
        char want[64];
        snprintf(want, sizeof want, "\"seq\":%lld", (long long)r->want_seq);
        const char *ev = strstr(r->got.data, "event: event");
        const char *up = strstr(r->got.data, "event: update");
        if (ev && up && strstr(ev, want) && strstr(r->got.data, "3.75"))
            return 0; /* seen enough: abort the transfer */
    }
    return size * nmemb;
}

Test(dashboard, events_stream_snapshot_then_updates)
{
    json_decref(settled_state());
    sse_read r = {0};
    cx_buf_init(&r.got, 16 << 20);
    pthread_mutex_lock(&fs.mu);
    r.want_seq = (int64_t)json_array_size(fs.events) + 1;
    pthread_mutex_unlock(&fs.mu);
    char url[256];
    snprintf(url, sizeof url, "%s/api/events", dash);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_sse);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    CURLcode cc = curl_easy_perform(c);
    long code = 0;
    char *ctype = NULL;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ctype);
    cr_assert_eq(code, 200);
    cr_assert(ctype && strncmp(ctype, "text/event-stream", 17) == 0, "content type %s", ctype ? ctype : "-");
    curl_easy_cleanup(c);
    cr_assert_eq(cc, CURLE_WRITE_ERROR, "the stream ended (%s) before the update and event arrived:\n%.2000s",
                 curl_easy_strerror(cc), r.got.data ? r.got.data : "");
    /* order: snapshot first, then the rest */
    const char *snap = strstr(r.got.data, "event: snapshot");
    const char *up = strstr(r.got.data, "event: update");
    cr_assert(snap && up && snap < up);
    cr_assert(strstr(r.got.data, "retry: ") < snap, "the stream tells the client to reconnect itself");
    /* the snapshot is one JSON line with the whole state */
    const char *data = strstr(snap, "data: ") + 6;
    const char *end = strchr(data, '\n');
    json_t *js = json_loadb(data, (size_t)(end - data), 0, NULL);
    cr_assert(json_is_object(js), "snapshot data is not JSON");
    cr_assert(json_object_get(js, "series") && json_object_get(js, "units") && json_object_get(js, "events"));
    json_decref(js);
    /* an update with the new eval point in series_new */
    cr_assert(strstr(r.got.data, "\"series_new\""));
    cx_buf_cleanup(&r.got);
}

/* ---- controls ---- */

Test(dashboard, halt_calls_every_agent_with_the_token)
{
    json_decref(settled_state());
    int status = 0;
    json_t *out = call("POST", "/api/halt", NULL, TOKEN, &status);
    /* one agent is unreachable: 502, with every agent's result */
    cr_assert_eq(status, 502);
    cr_assert(json_is_false(json_object_get(out, "ok")));
    json_t *res = json_object_get(out, "results");
    cr_assert_eq(json_array_size(res), 3);
    for (int i = 0; i < NFAKE; i++) {
        cr_assert_eq(fa[i].halts_ok, 1, "agent %d got %d halts with the token", i, fa[i].halts_ok);
        cr_assert_eq(fa[i].halts_denied, 0);
        cr_assert(json_is_true(json_object_get(json_array_get(res, (size_t)i), "ok")));
    }
    json_t *r2 = json_array_get(res, 2);
    cr_assert(json_is_false(json_object_get(r2, "ok")));
    cr_assert(json_is_string(json_object_get(r2, "error")));
    json_decref(out);
}

Test(dashboard, controls_need_the_token)
{
    json_decref(settled_state());
    int status = 0;
    json_t *out = call("POST", "/api/halt", NULL, NULL, &status);
    cr_assert_eq(status, 401, "no token: %d", status);
    cr_assert(json_is_string(json_object_get(out, "error")));
    cr_assert_eq(json_integer_value(json_object_get(out, "status")), 401);
    json_decref(out);
    out = call("POST", "/api/halt", NULL, "wrong-token", &status);
    cr_assert_eq(status, 401);
    json_decref(out);
    out = call("POST", "/api/faults",
               json_pack("{s:s,s:{s:s,s:{},s:i}}", "agent", "learner-0", "fault", "type", "pause", "params",
                         "duration_ms", 1000),
               NULL, &status);
    cr_assert_eq(status, 401);
    json_decref(out);
    out = call("DELETE", "/api/faults/learner-0/f0", NULL, "nope", &status);
    cr_assert_eq(status, 401);
    json_decref(out);
    /* nothing reached the agents */
    for (int i = 0; i < NFAKE; i++) {
        cr_assert_eq(fa[i].halts_ok + fa[i].halts_denied + fa[i].posts_ok + fa[i].deletes_ok, 0);
    }
}

Test(dashboard, inject_and_heal_are_forwarded_to_the_named_agent)
{
    json_decref(settled_state());
    int status = 0;
    json_t *out = call("POST", "/api/faults",
                       json_pack("{s:s,s:{s:s,s:{},s:i}}", "agent", "learner-1", "fault", "type", "pause",
                                 "params", "duration_ms", 5000),
                       TOKEN, &status);
    cr_assert_eq(status, 201, "status %d", status);
    cr_assert_str_eq(json_string_value(json_object_get(out, "state")), "active");
    const char *id = json_string_value(json_object_get(out, "id"));
    cr_assert_eq(fa[1].posts_ok, 1);
    cr_assert_eq(fa[0].posts_ok, 0, "the other agent got nothing");
    cr_assert_str_eq(json_string_value(json_object_get(fa[1].last_fault, "type")), "pause");
    cr_assert_eq(json_integer_value(json_object_get(fa[1].last_fault, "duration_ms")), 5000);

    /* the active fault shows on the unit card with time left */
    int64_t deadline = cx_mono_ms() + 5000;
    json_t *active = NULL;
    while (cx_mono_ms() < deadline) {
        json_t *st = call("GET", "/api/state", NULL, NULL, NULL);
        json_t *a = json_object_get(unit_named(st, "learner-1"), "faults_active");
        if (json_array_size(a) == 1) {
            active = json_deep_copy(json_array_get(a, 0));
            json_decref(st);
            break;
        }
        json_decref(st);
        cx_sleep_ms(100);
    }
    cr_assert(active, "the injected fault never showed as active on its unit");
    int64_t left = json_integer_value(json_object_get(active, "time_left_ms"));
    cr_assert(left > 0 && left <= 5000, "time left %lld", (long long)left);
    json_decref(active);

    /* by index as well as by name */
    char path[128];
    snprintf(path, sizeof path, "/api/faults/1/%s", id);
    json_t *del = call("DELETE", path, NULL, TOKEN, &status);
    cr_assert_eq(status, 200);
    cr_assert_eq(fa[1].deletes_ok, 1);
    cr_assert_str_eq(fa[1].last_deleted, id);
    json_decref(del);
    json_decref(out);

    /* bad requests: unknown agent, unknown key, no fault object */
    out = call("POST", "/api/faults", json_pack("{s:s,s:{}}", "agent", "nobody", "fault"), TOKEN, &status);
    cr_assert_eq(status, 404);
    json_decref(out);
    out = call("POST", "/api/faults", json_pack("{s:s,s:{},s:i}", "agent", "learner-0", "fault", "extra", 1),
               TOKEN, &status);
    cr_assert_eq(status, 400);
    cr_assert(strstr(json_string_value(json_object_get(out, "error")), "extra"), "the error names the key");
    json_decref(out);
    out =
        call("POST", "/api/faults", json_pack("{s:s,s:i}", "agent", "learner-0", "fault", 3), TOKEN, &status);
    cr_assert_eq(status, 400);
    json_decref(out);
    cr_assert_eq(fa[0].posts_ok, 0);
}

/* GET as text: status and body. */
static int get_text(const char *path, cx_http_result *r)
{
    cx_http_client *c = cx_http_client_new(dash, NULL);
    int rc = cx_http_do(c, "GET", path, NULL, NULL, 0, NULL, 0, r, NULL, 0);
    cx_http_client_free(c);
    return rc;
}

Test(dashboard, page_assets_and_log_tail)
{
    json_decref(settled_state());
    cx_http_result r;
    cx_http_result_init(&r);
    char ctype[128];
    cr_assert_eq(get_text("/", &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert_eq(cx_http_result_header(&r, "Content-Type", ctype, sizeof ctype), 0);
    cr_assert(strncmp(ctype, "text/html", 9) == 0, "%s", ctype);
    cr_assert(strstr(r.body.data, "/assets/uPlot.iife.min.js") && strstr(r.body.data, "HALT ALL"));
    cr_assert_eq(get_text("/assets/uPlot.iife.min.js", &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert_gt(r.body.len, 10000, "uPlot is embedded (%zu bytes)", r.body.len);
    cr_assert(strstr(r.body.data, "uPlot"));
    cx_http_result_header(&r, "Content-Type", ctype, sizeof ctype);
    cr_assert(strncmp(ctype, "text/javascript", 15) == 0, "%s", ctype);
    cr_assert_eq(get_text("/assets/charts.js", &r), 0);
    cr_assert(strstr(r.body.data, "renderRun"));
    cr_assert_eq(get_text("/assets/no-such.js", &r), 0);
    cr_assert_eq(r.status, 404);
    cr_assert_eq(get_text("/nope", &r), 0);
    cr_assert_eq(r.status, 404);
    /* the log tail comes from the agent */
    cr_assert_eq(get_text("/api/logs/learner-1?tail=7", &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert(strstr(r.body.data, "unit log of learner-1"), "%s", r.body.data);
    cr_assert_eq(fa[1].logs_asked_tail, 7);
    cr_assert_eq(get_text("/api/logs/learner-1?tail=zero", &r), 0);
    cr_assert_eq(r.status, 400);
    /* the unreachable agent's log: a clear 502 */
    cr_assert_eq(get_text("/api/logs/2", &r), 0);
    cr_assert_eq(r.status, 502);
    cx_http_result_cleanup(&r);
}
