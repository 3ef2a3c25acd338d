/* test_harness_attach.c - `chaosloco run` against processes it did not
 * start (topology.attach): it injects through the given agents with the
 * given token, judges, reverts, and leaves the processes running. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent_it.h"
#include "harness_it.h"

static void fini(void)
{
    ag_cleanup_all();
}

TestSuite(harness_attach, .fini = fini, .timeout = 120);

Test(harness_attach, runs_against_existing_syncer_and_agents)
{
    char *dir = it_mkdtemp("hatt");
    char sstate[1100], saddr[128];
    snprintf(sstate, sizeof sstate, "%s/syncer", dir);
    const char *sargs[] = {"syncer",  "--listen",  "127.0.0.1:0",     "--state-dir", sstate,          IT_MLP,
                           "--mode",  "decoupled", "--learners",      "2",           "--fragments",   "2",
                           "--H",     "8",         "--hidden",        "32",          "--batch",       "4",
                           "--steps", "400",       "--eval-every-ms", "200",         "--eval-tokens", "1024",
                           NULL};
    pid_t spid = it_start(dir, "syncer", sargs, NULL);
    cr_assert_eq(it_wait_addr(sstate, saddr, sizeof saddr, 20000), 0, "syncer listen.addr");
    /* two agents as an operator would deploy them, each with its learner
     * behind its proxy "syncer"; both hold the token AG_TOKEN */
    ag agents[2];
    for (int i = 0; i < 2; i++)
        ag_start_learner(&agents[i], "hatt", dir, sstate, saddr, "syncer", i, NULL);
    char path[1100], out[1100], tok[1100], doc[4096];
    snprintf(path, sizeof path, "%s/attach.json", dir);
    snprintf(out, sizeof out, "%s/run", dir);
    snprintf(tok, sizeof tok, "%s/token", agents[0].dir);
    snprintf(
        doc, sizeof doc,
        "{\"title\": \"attach\", \"seed\": 4,"
        " \"topology\": {\"learners\": 2, \"attach\": {\"syncer\": \"http://%s\","
        " \"agents\": [\"%s\", \"%s\"], \"token_file\": \"%s\"}},"
        " \"method\": [{\"name\": \"nan-1\", \"fault\": \"nan\", \"targets\": {\"ids\": [1]},"
        " \"at_s\": 0, \"params\": {\"count\": 1}, \"duration_ms\": 20000}],"
        " \"verify\": [{\"hypothesis\": \"fault_effective\"}, {\"hypothesis\": \"versions_monotonic\"}]}",
        saddr, agents[0].url, agents[1].url, tok);
    hx_write(path, doc);
    char admin[1200];
    snprintf(admin, sizeof admin, "%s/credentials/admin.cred", sstate);
    const char *args[] = {"run", path, "--out", out, "--time-limit", "60", "--syncer-credential-file",
                          admin, NULL};
    int rc = hx_run(dir, "run", args, 100000);
    cr_assert_eq(rc, 0, "attach run exits 0 (got %d)", rc);
    /* the harness started nothing, so it stopped nothing */
    cr_expect(hx_alive(spid), "the attached syncer is still running");
    cr_expect(hx_alive(agents[0].pid) && hx_alive(agents[1].pid), "the attached agents are still running");
    char url[300];
    snprintf(url, sizeof url, "%s/v1/faults", agents[1].url);
    int st = 0;
    json_t *ans = it_http_json("GET", url, NULL, NULL, &st);
    json_t *rec = json_array_get(json_object_get(ans, "faults"), 0);
    cr_assert_not_null(rec, "agent 1 holds the nan fault record");
    cr_expect_str_neq(json_string_value(json_object_get(rec, "state")), "active", "no fault left active");
    json_decref(ans);
    for (int i = 0; i < 2; i++)
        free(agents[i].dir);
    free(dir);
}
