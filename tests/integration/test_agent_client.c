/* test_agent_client.c - common/agent_client.h against real agents on
 * 127.0.0.1: every typed call, its error convention (0 on 2xx, the status's
 * cx_err with "HTTP <status>: <agent's error>" otherwise, no answer as
 * CX_EUNAVAIL/CX_ETIMEDOUT with status 0), and the parallel fan-out the
 * harness's `chaosloco halt` and the dashboard's HALT ALL use. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "agent_it.h"
#include "common/agent_client.h"

static void fini(void)
{
    ag_cleanup_all();
}

TestSuite(agent_client, .fini = fini, .timeout = 60);

/* Is a fault with this id in list? Its state into state. */
static int find_fault(json_t *list, const char *id, char *state, size_t len)
{
    size_t i;
    json_t *f;
    json_array_foreach(list, i, f)
    {
        if (strcmp(js(f, "id"), id) == 0) {
            snprintf(state, len, "%s", js(f, "state"));
            return 1;
        }
    }
    return 0;
}

Test(agent_client, typed_calls_and_their_errors)
{
    ag a;
    ag_start(&a, "agc", NULL, NULL, NULL);
    ag_wait_running(&a, 5000);
    agc_opts o = {.token = AG_TOKEN, .timeout_ms = 5000};
    agc *c = agc_new(a.url, &o);
    agc *anon = agc_new(a.url, NULL);
    cr_assert(c && anon);
    cr_assert_str_eq(agc_url(c), a.url);
    agc_reply r;
    agc_reply_init(&r);
    char err[CX_ERRLEN] = "";

    /* no token: the agent's 401, as CX_EAUTH with its message */
    cr_assert_eq(agc_halt(anon, &r, err, sizeof err), CX_EAUTH);
    cr_assert_eq(r.status, 401);
    cr_assert(strstr(err, "HTTP 401: "), "%s", err);
    json_t *st = NULL;
    cr_assert_eq(agc_status(c, &st, err, sizeof err), 0, "%s", err);
    cr_assert(json_is_object(json_object_get(st, "unit")));
    cr_assert(json_is_false(json_object_get(st, "halted")));
    json_decref(st);

    cr_assert_eq(agc_lease(c, 30000, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.status, 200);

    /* inject, list, read one, delete */
    json_t *fault = json_pack("{s:s,s:i,s:{s:i}}", "type", "nan", "duration_ms", 30000, "params", "count", 5);
    cr_assert_eq(agc_inject(c, fault, &r, err, sizeof err), 0, "%s", err);
    char id[64];
    snprintf(id, sizeof id, "%s", js(r.json, "id"));
    cr_assert(id[0], "the fault record has an id");
    json_t *list = NULL;
    char state[32] = "";
    cr_assert_eq(agc_faults(c, &list, err, sizeof err), 0, "%s", err);
    cr_assert(find_fault(list, id, state, sizeof state), "fault %s listed", id);
    json_decref(list);
    cr_assert_eq(agc_fault(c, id, &r, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(js(r.json, "id"), id);
    cr_assert_eq(agc_delete_fault(c, id, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(agc_fault(c, id, &r, err, sizeof err), 0, "%s", err);
    cr_assert_str_neq(js(r.json, "state"), "active");

    /* errors: unknown fault, bad id (nothing sent), bad body */
    cr_assert_eq(agc_delete_fault(c, "no-such-fault", &r, err, sizeof err), CX_ENOTFOUND);
    cr_assert_eq(r.status, 404);
    cr_assert_eq(agc_delete_fault(c, "../v1/halt", &r, err, sizeof err), CX_EINVAL);
    cr_assert_eq(r.status, 0, "a bad id is refused before any request");
    json_t *bad = json_pack("{s:s,s:i}", "type", "no-such-kind", "duration_ms", 1000);
    cr_assert_eq(agc_inject(c, bad, &r, err, sizeof err), CX_EINVAL);
    cr_assert_eq(r.status, 400);
    cr_assert(strstr(err, "HTTP 400: "), "%s", err);
    json_decref(bad);

    /* logs: text */
    cr_assert_eq(agc_logs(c, 10, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.status, 200);

    /* halt: new faults are refused (503 = CX_EUNAVAIL with an answer) until resume */
    cr_assert_eq(agc_halt(c, &r, err, sizeof err), 0, "%s", err);
    cr_assert(json_is_integer(json_object_get(r.json, "reverted")));
    cr_assert_eq(agc_inject(c, fault, &r, err, sizeof err), CX_EUNAVAIL);
    cr_assert_eq(r.status, 503);
    cr_assert_eq(agc_resume(c, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(agc_inject(c, fault, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(agc_lease(c, 0, NULL, err, sizeof err), 0, "%s", err);
    json_decref(fault);
    agc_reply_cleanup(&r);
    agc_free(c);
    agc_free(anon);
    ag_stop(&a);
}

static int halted(const ag *a)
{
    json_t *s = ag_status(a);
    int h = json_is_true(json_object_get(s, "halted"));
    json_decref(s);
    return h;
}

Test(agent_client, fanout_reaches_every_agent_and_reports_the_dead_one)
{
    ag a, b;
    ag_start(&a, "agcfa", NULL, NULL, NULL);
    ag_start(&b, "agcfb", NULL, NULL, NULL);
    const char *urls[] = {a.url, "http://127.0.0.1:1", b.url};
    /* options per agent: each agent has a token of its own */
    agc_opts o[3];
    for (int i = 0; i < 3; i++)
        o[i] = (agc_opts){.token = AG_TOKEN, .connect_timeout_ms = 1000, .timeout_ms = 5000};
    agc_fan_result res[3];
    cr_assert_eq(agc_fanout(urls, 3, o, agc_halt, res), 2);
    cr_assert_eq(res[0].rc, 0, "%s", res[0].err);
    cr_assert_eq(res[0].reply.status, 200);
    cr_assert(json_is_integer(json_object_get(res[0].reply.json, "reverted")));
    cr_assert_eq(res[2].rc, 0, "%s", res[2].err);
    cr_assert(res[1].rc == CX_EUNAVAIL || res[1].rc == CX_ETIMEDOUT, "rc %d", res[1].rc);
    cr_assert_eq(res[1].reply.status, 0);
    cr_assert(res[1].err[0], "why the dead agent failed");
    agc_fanout_cleanup(res, 3);
    cr_assert(halted(&a) && halted(&b), "both agents halted");
    /* and back; agent b's options carry another token: only b refuses */
    o[2].token = "not-b-s-token-000";
    cr_assert_eq(agc_fanout(urls, 3, o, agc_resume, res), 1);
    cr_assert_eq(res[2].rc, CX_EAUTH, "b refused the wrong token: rc %d", res[2].rc);
    agc_fanout_cleanup(res, 3);
    cr_assert(!halted(&a) && halted(&b), "a resumed, b still halted");
    o[2].token = AG_TOKEN;
    cr_assert_eq(agc_fanout(urls, 3, o, agc_resume, res), 2);
    agc_fanout_cleanup(res, 3);
    cr_assert(!halted(&a) && !halted(&b), "both agents resumed");
    ag_stop(&a);
    ag_stop(&b);
}
