/* test_api.c - the agent's HTTP API validation: every malformed,
 * unauthenticated or refused call gets the right 4xx/503 with a reason and
 * changes nothing (no fault, nothing persisted), and is audited. An agent
 * core without a unit serves the API in-process on an ephemeral port. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/err.h"
#include "common/file.h"
#include "common/http_client.h"
#include "injectors/inj_params.h"
#include "agent_fixture.h"

#define TOKEN AGENT_FIXTURE_TOKEN

static char g_dir[256];
static agent *g_agent;
static cx_http_client *g_cli;

static void setup(void)
{
    char base[200];
    g_agent = agent_fixture_new("api", "api-test", g_dir, sizeof g_dir, base, sizeof base);
    g_cli = cx_http_client_new(base, NULL);
    cr_assert_not_null(g_cli);
}

static void teardown(void)
{
    cx_http_client_free(g_cli);
    agent_free(g_agent);
    /* Leave the temp dir: it is small and helps debugging a failure. */
}

/* One call; returns the status and the parsed body in *out (may be NULL). */
static int call(const char *method, const char *path, const char *body, const char *token, json_t **out)
{
    char auth[256];
    const char *hdrs[2] = {NULL, NULL};
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        hdrs[0] = auth;
    }
    cx_http_result r;
    cx_http_result_init(&r);
    char err[CX_ERRLEN];
    int rc = cx_http_do(g_cli, method, path, hdrs, body, body ? strlen(body) : 0, "application/json", 0, &r,
                        err, sizeof err);
    cr_assert_eq(rc, 0, "%s %s: %s", method, path, err);
    int status = r.status;
    if (out)
        *out = r.body.data ? json_loads(r.body.data, 0, NULL) : NULL;
    cx_http_result_cleanup(&r);
    return status;
}

static int audit_lines(void)
{
    char path[300], *data = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/audit.jsonl", g_dir);
    if (cx_file_read(path, 1 << 20, &data, &len, NULL, 0) < 0)
        return 0;
    int n = 0;
    for (size_t i = 0; i < len; i++)
        n += data[i] == '\n';
    free(data);
    return n;
}

static void assert_nothing_changed(const char *what)
{
    json_t *o = NULL;
    cr_assert_eq(call("GET", "/v1/faults", NULL, TOKEN, &o), 200);
    cr_assert_eq(json_array_size(json_object_get(o, "faults")), 0, "%s created a fault", what);
    json_decref(o);
    char path[300];
    snprintf(path, sizeof path, "%s/faults.json", g_dir);
    json_t *f = json_load_file(path, 0, NULL);
    if (f)
        cr_assert_eq(json_array_size(json_object_get(f, "faults")), 0, "%s persisted a fault", what);
    json_decref(f);
}

TestSuite(api, .init = setup, .fini = teardown);

Test(api, bad_fault_requests_get_400_and_change_nothing)
{
    struct {
        const char *body;
        int status;
        const char *names; /* must appear in the error text */
    } cases[] = {
        {"{not json", 400, ""},
        {"[1,2]", 400, ""},
        {"{\"type\":\"nan\",\"duration_ms\":1000,\"bogus\":1}", 400, "bogus"},
        {"{\"type\":\"nan\"}", 400, "duration_ms"},
        {"{\"type\":\"nan\",\"duration_ms\":-1}", 400, "duration_ms"},
        {"{\"type\":\"nan\",\"duration_ms\":0}", 400, "duration_ms"},
        {"{\"type\":\"nan\",\"duration_ms\":\"10\"}", 400, "duration_ms"},
        {"{\"type\":\"nan\",\"duration_ms\":60001}", 400, "max-duration-ms"},
        {"{\"type\":\"warp\",\"duration_ms\":1000}", 400, "warp"},
        {"{\"duration_ms\":1000}", 400, "type"},
        {"{\"type\":\"nan\",\"duration_ms\":1000,\"toxicity\":1.5}", 400, "toxicity"},
        {"{\"type\":\"nan\",\"duration_ms\":1000,\"toxicity\":-0.1}", 400, "toxicity"},
        {"{\"type\":\"nan\",\"duration_ms\":1000,\"params\":[]}", 400, "params"},
        {"{\"type\":\"nan\",\"duration_ms\":1000,\"params\":{\"count\":0}}", 400, "count"},
        {"{\"type\":\"nan\",\"duration_ms\":1000,\"params\":{\"cnt\":1}}", 400, "cnt"},
        {"{\"type\":\"kill\",\"duration_ms\":1000,\"params\":{\"signal\":\"NOPE\"}}", 400, "NOPE"},
        {"{\"type\":\"nan\",\"duration_ms\":1000,\"target\":\"nowhere\"}", 400, "nowhere"},
        {"{\"type\":\"nan\",\"duration_ms\":1000,\"seed\":-3}", 400, "seed"},
    };
    int audited = audit_lines();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *o = NULL;
        int st = call("POST", "/v1/faults", cases[i].body, TOKEN, &o);
        cr_assert_eq(st, cases[i].status, "case %zu (%s): status %d", i, cases[i].body, st);
        cr_assert_not_null(o, "case %zu: JSON error body", i);
        const char *e = json_string_value(json_object_get(o, "error"));
        cr_assert_not_null(e, "case %zu: no error text", i);
        cr_assert(strstr(e, cases[i].names), "case %zu: error '%s' does not name '%s'", i, e, cases[i].names);
        cr_assert_eq(json_integer_value(json_object_get(o, "status")), cases[i].status);
        json_decref(o);
        assert_nothing_changed(cases[i].body);
        cr_assert_eq(audit_lines(), audited + (int)i + 1, "case %zu was not audited", i);
    }
}

Test(api, token_is_required_on_every_mutating_call)
{
    const char *calls[][3] = {
        {"POST", "/v1/faults", "{\"type\":\"nan\",\"duration_ms\":1000}"},
        {"DELETE", "/v1/faults/f-1", NULL},
        {"POST", "/v1/halt", "{}"},
        {"POST", "/v1/resume", "{}"},
        {"POST", "/v1/lease", "{\"ttl_ms\":1000}"},
        {"POST", "/reset", NULL},
        {"POST", "/proxies/none/toxics", "{\"type\":\"latency\"}"},
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        for (int wrong = 0; wrong < 2; wrong++) {
            json_t *o = NULL;
            int st = call(calls[i][0], calls[i][1], calls[i][2], wrong ? "not-the-token-at-all" : NULL, &o);
            cr_assert_eq(st, 401, "%s %s (%s token): %d", calls[i][0], calls[i][1], wrong ? "wrong" : "no",
                         st);
            cr_assert_not_null(json_object_get(o, "error"));
            json_decref(o);
        }
    }
    assert_nothing_changed("unauthenticated calls");
    json_t *st = agent_status_json(g_agent);
    cr_assert(json_is_false(json_object_get(st, "halted")), "an unauthenticated halt took effect");
    cr_assert(json_is_null(json_object_get(st, "lease")), "an unauthenticated lease took effect");
    json_decref(st);
}

/* Reads say a lot about a run (logs, status, faults, metrics): every one
 * needs the token too, but GET /v1/health, which says "ok" and nothing else
 * (for probes that cannot hold a secret). */
Test(api, reads_need_the_token_too_but_health)
{
    const char *reads[] = {"/v1/status", "/v1/version", "/v1/faults", "/v1/fault-kinds", "/v1/logs",
                           "/metrics", "/proxies", "/version"};
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
        json_t *o = NULL;
        for (int wrong = 0; wrong < 2; wrong++) {
            int st = call("GET", reads[i], NULL, wrong ? "not-the-token-at-all" : NULL, &o);
            cr_assert_eq(st, 401, "GET %s %s token -> %d", reads[i], wrong ? "with a wrong" : "without a", st);
            cr_assert(strstr(json_string_value(json_object_get(o, "error")), "token"), "the answer says why");
            json_decref(o);
        }
        cr_assert_eq(call("GET", reads[i], NULL, TOKEN, NULL), 200, "GET %s with the token", reads[i]);
    }
    json_t *o = NULL;
    cr_assert_eq(call("GET", "/v1/health", NULL, NULL, &o), 200);
    cr_assert(json_is_true(json_object_get(o, "ok")));
    cr_assert_eq(json_object_size(o), 1, "health says ok and nothing else");
    json_decref(o);
}

/* GET /v1/fault-kinds serves injector_table: every kind, in order, with its
 * params (this host's ranges) and traits. */
Test(api, fault_kinds_from_the_table)
{
    json_t *o = NULL;
    cr_assert_eq(call("GET", "/v1/fault-kinds", NULL, TOKEN, &o), 200);
    json_t *kinds = json_object_get(o, "kinds");
    size_t n = 0;
    for (const injector *const *p = injector_table; *p; p++, n++) {
        json_t *k = json_array_get(kinds, n);
        cr_assert_str_eq(json_string_value(json_object_get(k, "type")), (*p)->type);
        cr_assert_eq(json_array_size(json_object_get(k, "params")), inj_params_count((*p)->params), "%s",
                     (*p)->type);
    }
    cr_assert_eq(json_array_size(kinds), n);
    /* spot checks: a range, a host-dependent bound, a trait, an enum */
    json_t *straggle = json_array_get(kinds, 3), *cpu = json_array_get(kinds, 4);
    json_t *period = json_array_get(json_object_get(straggle, "params"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(period, "name")), "period_ms");
    cr_assert_eq(json_integer_value(json_object_get(period, "min")), 50);
    cr_assert_eq(json_integer_value(json_object_get(period, "max")), 600000);
    cr_assert_eq(json_integer_value(json_object_get(period, "default")), 1000);
    json_t *cpus = json_array_get(json_object_get(cpu, "params"), 0);
    cr_assert_eq(json_number_value(json_object_get(cpus, "max")), (double)sysconf(_SC_NPROCESSORS_ONLN));
    cr_assert(json_is_true(json_object_get(cpus, "required")));
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(straggle, "traits"), 0)), "stops_unit");
    json_t *method = json_array_get(json_object_get(cpu, "params"), 1);
    cr_assert_eq(json_array_size(json_object_get(method, "enum")), 3);
    json_decref(o);
}

Test(api, halt_refuses_until_resume)
{
    const char *good = "{\"type\":\"nan\",\"duration_ms\":5000,\"params\":{\"count\":2}}";
    json_t *o = NULL;
    cr_assert_eq(call("POST", "/v1/faults", good, TOKEN, &o), 201);
    const char *id = json_string_value(json_object_get(o, "id"));
    cr_assert_not_null(id);
    char fid[32];
    snprintf(fid, sizeof fid, "%s", id);
    cr_assert_str_eq(json_string_value(json_object_get(o, "state")), "active");
    json_decref(o);

    cr_assert_eq(call("POST", "/v1/halt", "{\"x\":1}", TOKEN, NULL), 400, "halt takes no keys");
    cr_assert_eq(call("POST", "/v1/halt", NULL, TOKEN, &o), 200);
    cr_assert_eq(json_integer_value(json_object_get(o, "reverted")), 1);
    json_decref(o);
    char path[64];
    snprintf(path, sizeof path, "/v1/faults/%s", fid);
    cr_assert_eq(call("GET", path, NULL, TOKEN, &o), 200);
    cr_assert_str_eq(json_string_value(json_object_get(o, "revert_reason")), "halt");
    json_decref(o);

    cr_assert_eq(call("POST", "/v1/faults", good, TOKEN, &o), 503);
    cr_assert(strstr(json_string_value(json_object_get(o, "error")), "halted"));
    json_decref(o);
    cr_assert_eq(reg_active(g_agent->reg, NULL), 0);

    cr_assert_eq(call("POST", "/v1/resume", "{}", TOKEN, NULL), 200);
    cr_assert_eq(call("POST", "/v1/faults", good, TOKEN, &o), 201);
    snprintf(fid, sizeof fid, "%s", json_string_value(json_object_get(o, "id")));
    json_decref(o);
    snprintf(path, sizeof path, "/v1/faults/%s", fid);
    cr_assert_eq(call("DELETE", path, NULL, TOKEN, &o), 200);
    cr_assert_str_eq(json_string_value(json_object_get(o, "revert_reason")), "delete");
    json_decref(o);
    cr_assert_eq(call("DELETE", "/v1/faults/f-424242", NULL, TOKEN, NULL), 404);
}

Test(api, lease_validation_and_metrics)
{
    cr_assert_eq(call("POST", "/v1/lease", "{\"ttl_ms\":-1}", TOKEN, NULL), 400);
    cr_assert_eq(call("POST", "/v1/lease", "{\"ttl\":100}", TOKEN, NULL), 400);
    cr_assert_eq(call("POST", "/v1/lease", "{}", TOKEN, NULL), 400);
    json_t *st = agent_status_json(g_agent);
    cr_assert(json_is_null(json_object_get(st, "lease")));
    json_decref(st);
    json_t *o = NULL;
    cr_assert_eq(call("POST", "/v1/lease", "{\"ttl_ms\":30000}", TOKEN, &o), 200);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(o, "lease"), "ttl_ms")), 30000);
    json_decref(o);
    cr_assert(agent_lease_held(g_agent));
    cr_assert_eq(call("POST", "/v1/lease", "{\"ttl_ms\":0}", TOKEN, NULL), 200);
    cr_assert(!agent_lease_held(g_agent));

    cr_assert_eq(call("GET", "/v1/logs?tail=abc", NULL, TOKEN, NULL), 400);

    cx_http_result r;
    cx_http_result_init(&r);
    const char *auth[] = {"Authorization: Bearer " TOKEN, NULL};
    cr_assert_eq(cx_http_do(g_cli, "GET", "/metrics", auth, NULL, 0, NULL, 0, &r, NULL, 0), 0);
    cr_assert_eq(r.status, 200);
    const char *want[] = {"# HELP chaosloco_agent_faults_active",
                          "# TYPE chaosloco_agent_faults_total counter", "chaosloco_agent_unit_up 0",
                          "# TYPE chaosloco_agent_unit_restarts_total counter", "chaosloco_agent_halted 0"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(r.body.data, want[i]), "metrics lack '%s'", want[i]);
    cx_http_result_cleanup(&r);
}
