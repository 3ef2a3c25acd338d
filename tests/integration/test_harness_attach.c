/* test_harness_attach.c - `chaosloco run` against processes it did not
 * start (topology.attach): it injects through the given agents with the
 * given token, judges, reverts, and leaves the processes running; it
 * waits (bounded) for processes started after it, names the ones that
 * never come up (exit 3), and ends the run at the horizon (POST /v1/end). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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
                           "--steps", "100000000", "--eval-every-ms", "200",         "--eval-tokens", "1024",
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
    json_t *ans = it_http_json("GET", url, NULL, AG_TOKEN, &st);
    json_t *rec = json_array_get(json_object_get(ans, "faults"), 0);
    cr_assert_not_null(rec, "agent 1 holds the nan fault record");
    cr_expect_str_neq(json_string_value(json_object_get(rec, "state")), "active", "no fault left active");
    json_decref(ans);
    for (int i = 0; i < 2; i++)
        free(agents[i].dir);
    free(dir);
}

/* A port nobody listens on at the moment (bound to 127.0.0.1:0, released):
 * what a cluster's fixed per-task ports are to a harness started first. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* Agent i on 127.0.0.1:port supervising learner i of the syncer at saddr
 * (its credential in sstate/credentials), as a cluster task would start
 * it; the learner's own --steps are far away, so only POST /v1/end ends it. */
static pid_t start_agent_at(const char *dir, int i, int port, const char *tok, const char *sstate,
                            const char *saddr)
{
    char listen[64], id[32], state[1100], proxy[200], num[8], lstate[1100], lcred[1200], name[16];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(id, sizeof id, "it-hatw-%d-%d", (int)getpid(), i);
    snprintf(state, sizeof state, "%s/agent%d", dir, i);
    snprintf(proxy, sizeof proxy, "syncer=127.0.0.1:0->%s", saddr);
    snprintf(num, sizeof num, "%d", i);
    snprintf(lstate, sizeof lstate, "%s/learner%d", dir, i);
    snprintf(lcred, sizeof lcred, "%s/credentials/learner-%d.cred", sstate, i);
    snprintf(name, sizeof name, "agent%d", i);
    const char *args[] = {"agent",
                          "--listen",
                          listen,
                          "--id",
                          id,
                          "--state-dir",
                          state,
                          "--token-file",
                          tok,
                          "--proxy",
                          proxy,
                          "--restart",
                          "on-failure",
                          "--no-cgroup",
                          "--",
                          CHAOSLOCO_BIN,
                          "learner",
                          "--syncer",
                          "http://{proxy.syncer}",
                          "--id",
                          num,
                          "--state-dir",
                          lstate,
                          "--credential-file",
                          lcred,
                          "--steps",
                          "100000000",
                          NULL};
    return it_start(dir, name, args, NULL);
}

/* The attach experiment of the tests below: a syncer and two agents at
 * fixed ports, a short nan fault on learner 1; extra: more attach keys. */
static void write_attach(const char *path, int sport, const int *aport, const char *tok, const char *cred,
                         const char *extra)
{
    char doc[4096];
    snprintf(doc, sizeof doc,
             "{\"title\": \"attach in any order\", \"seed\": 4,"
             " \"topology\": {\"learners\": 2, \"attach\": {\"syncer\": \"http://127.0.0.1:%d\","
             " \"agents\": [\"http://127.0.0.1:%d\", \"http://127.0.0.1:%d\"], \"token_file\": \"%s\","
             " \"syncer_credential_file\": \"%s\"%s}},"
             " \"method\": [{\"name\": \"nan-1\", \"fault\": \"nan\", \"targets\": {\"ids\": [1]},"
             " \"at_s\": 0, \"params\": {\"count\": 1}, \"duration_ms\": 2000}],"
             " \"verify\": [{\"hypothesis\": \"fault_effective\"}]}",
             sport, aport[0], aport[1], tok, cred, extra ? extra : "");
    hx_write(path, doc);
}

static pid_t start_syncer_at(const char *dir, const char *sstate, int port, char *saddr, size_t len)
{
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    const char *sargs[] = {"syncer",
                           "--listen",
                           listen,
                           "--state-dir",
                           sstate,
                           IT_MLP,
                           "--mode",
                           "decoupled",
                           "--learners",
                           "2",
                           "--fragments",
                           "2",
                           "--H",
                           "8",
                           "--hidden",
                           "32",
                           "--batch",
                           "4",
                           "--steps",
                           "100000000",
                           "--eval-every-ms",
                           "200",
                           "--eval-tokens",
                           "1024",
                           NULL};
    pid_t pid = it_start(dir, "syncer", sargs, NULL);
    cr_assert_eq(it_wait_addr(sstate, saddr, len, 20000), 0, "syncer listen.addr");
    return pid;
}

/* The harness starts first, as a cluster engine may start it: it waits for
 * the syncer's credential file, the syncer and both agents, says whom it
 * waits for, then runs, and ends the run at the horizon itself (POST
 * /v1/end: the learners' own --steps are a million). */
Test(harness_attach, waits_for_processes_started_after_it_and_ends_the_run)
{
    char *dir = it_mkdtemp("hatw");
    char sstate[1100], saddr[128], tok[1100], cred[1200], path[1100], out[1100];
    snprintf(sstate, sizeof sstate, "%s/syncer", dir);
    snprintf(cred, sizeof cred, "%s/credentials/admin.cred", sstate);
    ag_write_token(dir, tok, sizeof tok);
    int sport = free_port(), aport[2] = {free_port(), free_port()};
    snprintf(path, sizeof path, "%s/attach.json", dir);
    snprintf(out, sizeof out, "%s/run", dir);
    write_attach(path, sport, aport, tok, cred, NULL);
    const char *args[] = {"run", path, "--out", out, "--time-limit", "90", "--attach-wait", "60", NULL};
    pid_t run = it_start(dir, "run", args, NULL);
    char log[1100];
    snprintf(log, sizeof log, "%s/run.log", dir);
    cr_assert(hx_wait_contains(log, "attach: waiting (", 20000), "the harness says it waits");
    cr_assert(hx_wait_contains(log, "the syncer credential file", 1000), "... and for what");
    cr_assert(hx_alive(run), "the harness waits instead of failing");
    start_syncer_at(dir, sstate, sport, saddr, sizeof saddr);
    cr_assert(hx_wait_contains(log, "agent 1 http://127.0.0.1:", 20000), "then it waits for the agents");
    pid_t apid[2];
    for (int i = 0; i < 2; i++)
        apid[i] = start_agent_at(dir, i, aport[i], tok, sstate, saddr);
    int rc = hx_wait_rc(dir, "run", run, 150000, 0);
    cr_assert_eq(rc, 0, "the attach run exits 0 (got %d)", rc);
    cr_expect(hx_wait_contains(log, "attach: the syncer and 2 agents answer", 100),
              "it says when all answer");
    cr_expect(hx_wait_contains(log, "horizon reached", 100), "the harness ended the run at its horizon");
    /* the syncer was told: its status carries the end, and the learners left */
    char url[300];
    snprintf(url, sizeof url, "http://%s/v1/status", saddr);
    int st = 0;
    json_t *s = it_http_json("GET", url, NULL, NULL, &st);
    cr_assert_eq(st, 200);
    cr_expect(json_is_object(json_object_get(s, "end")), "GET /v1/status shows the end");
    json_decref(s);
    cr_expect(hx_alive(apid[0]) && hx_alive(apid[1]), "the attached agents are still running");
    free(dir);
}

/* An agent that never comes up: after --attach-wait the run fails (exit 3)
 * naming it, and not the ones that answered. */
Test(harness_attach, names_the_agent_that_never_answers)
{
    char *dir = it_mkdtemp("hatn");
    char sstate[1100], saddr[128], tok[1100], cred[1200], path[1100], out[1100];
    snprintf(sstate, sizeof sstate, "%s/syncer", dir);
    snprintf(cred, sizeof cred, "%s/credentials/admin.cred", sstate);
    ag_write_token(dir, tok, sizeof tok);
    int sport = free_port(), aport[2] = {free_port(), free_port()};
    start_syncer_at(dir, sstate, sport, saddr, sizeof saddr);
    start_agent_at(dir, 0, aport[0], tok, sstate, saddr);
    snprintf(path, sizeof path, "%s/attach.json", dir);
    snprintf(out, sizeof out, "%s/run", dir);
    /* the file's wait_s (60) is overridden by the flag */
    write_attach(path, sport, aport, tok, cred, ", \"wait_s\": 60");
    const char *args[] = {"run", path, "--out", out, "--attach-wait", "3", NULL};
    char want[128];
    snprintf(want, sizeof want, "no answer within 3 s from agent 1 http://127.0.0.1:%d", aport[1]);
    char *log = hx_expect_harness_error(dir, it_start(dir, "run", args, NULL), 60000, want);
    cr_expect(log && !strstr(strstr(log, want), "agent 0"), "agent 0 answered: it is not named");
    free(log);
    free(dir);
}

/* A credential the syncer refuses is no reason to wait: exit 3 at once,
 * naming the file. */
Test(harness_attach, a_refused_credential_fails_at_once)
{
    char *dir = it_mkdtemp("hatc");
    char sstate[1100], saddr[128], tok[1100], cred[1200], path[1100], out[1100];
    snprintf(sstate, sizeof sstate, "%s/syncer", dir);
    snprintf(cred, sizeof cred, "%s/wrong-admin.cred", dir);
    ag_write_token(dir, tok, sizeof tok);
    FILE *f = fopen(cred, "w");
    cr_assert_not_null(f);
    fprintf(f, "admin.%064d\n", 0);
    fclose(f);
    chmod(cred, 0600);
    int sport = free_port(), aport[2] = {free_port(), free_port()};
    start_syncer_at(dir, sstate, sport, saddr, sizeof saddr);
    snprintf(path, sizeof path, "%s/attach.json", dir);
    snprintf(out, sizeof out, "%s/run", dir);
    write_attach(path, sport, aport, tok, cred, NULL);
    const char *args[] = {"run", path, "--out", out, "--attach-wait", "600", NULL};
    /* 30 s: far below the 600 s it would wait for a process that is not up */
    char *log =
        hx_expect_harness_error(dir, it_start(dir, "run", args, NULL), 30000, "refused the credential in");
    free(log);
    free(dir);
}
