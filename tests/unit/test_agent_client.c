/* test_agent_client.c - the agent's error reasons (common/agent_client.h):
 * the one table (name, HTTP status), and each reason as the agent writes
 * it (agent/api.c) and the client decodes it once (agc_reply.reason). An
 * agent core without a unit serves the API in-process on an ephemeral
 * port. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/agent_client.h"
#include "common/err.h"
#include "agent_fixture.h"

#define TOKEN AGENT_FIXTURE_TOKEN

static char g_dir[256];
static agent *g_agent;
static agc *g_agc;

static void setup(void)
{
    char base[200];
    g_agent = agent_fixture_new("agc", "agc-test", g_dir, sizeof g_dir, base, sizeof base);
    agc_opts ao = {.token = TOKEN};
    g_agc = agc_new(base, &ao);
    cr_assert_not_null(g_agc);
}

static void teardown(void)
{
    agc_free(g_agc);
    agent_free(g_agent);
}

TestSuite(agent_client, .init = setup, .fini = teardown);

Test(agent_client, reason_names_round_trip)
{
    for (int i = 1; i < AGC_R_COUNT; i++) {
        const char *name = agc_reason_name((agc_reason)i);
        cr_assert(name[0], "reason %d has no name", i);
        cr_assert_eq(agc_reason_parse(name), (agc_reason)i, "%s", name);
        cr_assert(agc_reason_status((agc_reason)i) >= 400, "%s", name);
        for (int j = 1; j < i; j++)
            cr_assert_str_neq(name, agc_reason_name((agc_reason)j));
    }
    cr_assert_eq(agc_reason_parse(NULL), AGC_R_NONE);
    cr_assert_eq(agc_reason_parse("not running"), AGC_R_NONE, "a text is not a reason");
    cr_assert_eq(agc_reason_parse(""), AGC_R_NONE);
    cr_assert_str_eq(agc_reason_name(AGC_R_UNIT_NOT_RUNNING), "unit_not_running");
    cr_assert_str_eq(agc_reason_name(AGC_R_HALTED), "agent_halted");
    cr_assert_eq(agc_reason_status(AGC_R_NONE), 0);
}

Test(agent_client, a_codes_reason_keeps_its_status)
{
    /* the agent answered cx_err_http_status(code) before it had reasons */
    for (int code = CX_ERR_LAST; code <= CX_EINVAL; code++)
        cr_assert_eq(agc_reason_status(agc_reason_of_err(code)), cx_err_http_status(code), "code %d (%s)",
                     code, cx_strerror(code));
    cr_assert_eq(agc_reason_of_err(CX_ECONFLICT), AGC_R_CONFLICT);
    cr_assert_eq(agc_reason_of_err(CX_ENOUNIT), AGC_R_UNIT_NOT_RUNNING);
    cr_assert_eq(agc_reason_status(agc_reason_of_err(-99)), 500);
}

/* POST /v1/faults with body; the reply's status and reason. */
static int inject(const char *body, agc_reason *why, json_t **ans)
{
    json_t *f = json_loads(body, 0, NULL);
    cr_assert_not_null(f);
    agc_reply rep;
    agc_reply_init(&rep);
    agc_inject(g_agc, f, &rep, NULL, 0);
    json_decref(f);
    int st = rep.status;
    *why = rep.reason;
    *ans = agc_reply_take_json(&rep);
    agc_reply_cleanup(&rep);
    return st;
}

Test(agent_client, the_agent_answers_with_a_reason)
{
    agc_reason why;
    json_t *ans = NULL;
    /* a kill needs a unit: 409 unit_not_running, the text and the failed record kept */
    cr_assert_eq(inject("{\"type\":\"kill\",\"duration_ms\":1000}", &why, &ans), 409);
    cr_assert_eq(why, AGC_R_UNIT_NOT_RUNNING, "reason %s", agc_reason_name(why));
    cr_assert_str_eq(json_string_value(json_object_get(ans, "reason")), "unit_not_running");
    cr_assert_eq(json_integer_value(json_object_get(ans, "status")), 409);
    cr_assert(strstr(json_string_value(json_object_get(ans, "error")), "unit is not running"));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(ans, "fault"), "state")), "failed");
    json_decref(ans);

    /* bad input: 400 bad_request */
    cr_assert_eq(inject("{\"type\":\"nan\",\"duration_ms\":-1}", &why, &ans), 400);
    cr_assert_eq(why, AGC_R_BAD_REQUEST, "reason %s", agc_reason_name(why));
    json_decref(ans);

    /* a fault that needs no unit is accepted: no reason */
    cr_assert_eq(inject("{\"type\":\"nan\",\"duration_ms\":5000,\"params\":{\"count\":2}}", &why, &ans), 201);
    cr_assert_eq(why, AGC_R_NONE);
    json_decref(ans);

    /* an unknown fault: 404 not_found */
    agc_reply rep;
    agc_reply_init(&rep);
    cr_assert_eq(agc_fault(g_agc, "f-424242", &rep, NULL, 0), CX_ENOTFOUND);
    cr_assert_eq(rep.status, 404);
    cr_assert_eq(rep.reason, AGC_R_NOT_FOUND, "reason %s", agc_reason_name(rep.reason));
    agc_reply_cleanup(&rep);
    cr_assert_eq(rep.reason, AGC_R_NONE, "cleanup empties the reply");

    /* halted: 503 agent_halted until resumed */
    cr_assert_eq(agc_halt(g_agc, NULL, NULL, 0), 0);
    cr_assert_eq(inject("{\"type\":\"nan\",\"duration_ms\":5000,\"params\":{\"count\":2}}", &why, &ans), 503);
    cr_assert_eq(why, AGC_R_HALTED, "reason %s", agc_reason_name(why));
    json_decref(ans);
    cr_assert_eq(agc_resume(g_agc, NULL, NULL, 0), 0);
    cr_assert_eq(inject("{\"type\":\"nan\",\"duration_ms\":5000,\"params\":{\"count\":2}}", &why, &ans), 201);
    json_decref(ans);
}
