/* test_agent_safety.c - the revert guarantee from outside: a lapsed lease
 * reverts a pause and a partition (and only what was made under it), halt
 * reverts everything and refuses new faults until resume, and an agent
 * SIGKILLed while a pause is active leaves nothing frozen once it is
 * started again. Plus the 4xx answers of a real agent and its audit log. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent_it.h"
#include "common/http_client.h"

static void fini(void)
{
    ag_cleanup_all();
}

TestSuite(agent_safety, .fini = fini, .timeout = 60);

/* The v1 freezer.state of a pause made through the freezer (its path in
 * out), or NULL: a pause by signal, or cgroup v2 (no freezer.state). */
static const char *freezer_file(json_t *fault, char *out, size_t len)
{
    char line[64];
    return ag_evidence_line(fault, "freezer", "freezer.state", out, len, line, sizeof line) && line[0] ? out
                                                                                                       : NULL;
}

/* Fault id of a holds state (NULL: any) and revert_reason (NULL: any). */
static void expect_fault(const ag *a, const char *id, const char *state, const char *reason)
{
    char st[32], why[32];
    ag_fault_state(a, id, st, sizeof st, why, sizeof why);
    if (state)
        cr_assert_str_eq(st, state, "fault %s", id);
    if (reason)
        cr_assert_str_eq(why, reason, "fault %s", id);
}

Test(agent_safety, lease_lapse_reverts_pause_and_partition)
{
    ag_echo echo;
    ag_echo_start(&echo);
    char proxy[128];
    snprintf(proxy, sizeof proxy, "up=127.0.0.1:0->127.0.0.1:%d", echo.port);
    const char *extra[] = {"--proxy", proxy, NULL};
    ag a;
    ag_start(&a, "lease", extra, NULL, NULL);
    pid_t pid = ag_wait_running(&a, 5000);
    int port = ag_proxy_port(&a, "up");
    cr_assert_geq(ag_echo_rtt(port, 100, 2000), 0, "echo through the proxy works before");

    /* Made before any lease: survives the lapse. */
    char keep_id[32];
    ag_fault_id(&a, "{\"type\":\"nan\",\"duration_ms\":30000}", keep_id, sizeof keep_id);

    int st = 0;
    json_decref(ag_call(&a, "POST", "/v1/lease", "{\"ttl_ms\":800}", 1, &st));
    cr_assert_eq(st, 200);
    json_t *p = ag_fault(&a, "{\"type\":\"pause\",\"duration_ms\":30000}");
    char pause_id[32], ff[700];
    snprintf(pause_id, sizeof pause_id, "%s", js(p, "id"));
    cr_assert(json_is_true(json_object_get(p, "lease")));
    const char *fz = freezer_file(p, ff, sizeof ff);
    json_decref(p);
    char part_id[32] = "";
    if (ag_has_type(&a, "partition")) {
        ag_fault_id(&a, "{\"type\":\"partition\",\"duration_ms\":30000,\"target\":\"up\"}", part_id,
                    sizeof part_id);
        int fd = ag_connect(port);
        if (fd >= 0) {
            /* Accepted by the kernel backlog at most; no echo may come back. */
            cr_assert_lt(ag_echo_rtt(port, 10, 300), 0, "partitioned proxy must not relay");
            close(fd);
        }
    }
    if (!fz)
        cr_assert(ag_wait_proc(pid, "T", 1000));

    /* No renewal: the dead-man's switch fires after ~800 ms. */
    cr_assert(ag_wait_fault(&a, pause_id, "reverted", 5000), "pause reverted on lease lapse");
    expect_fault(&a, pause_id, NULL, "lease");
    if (part_id[0]) {
        expect_fault(&a, part_id, "reverted", "lease");
        cr_assert_geq(ag_echo_rtt(port, 100, 2000), 0, "proxy relays again after the lapse");
    }
    if (fz) {
        char line[64];
        ag_read_line(fz, line, sizeof line);
        cr_assert_str_eq(line, "THAWED");
    }
    cr_assert(ag_wait_proc(pid, "RS", 2000), "unit runs again (state %c)", uproc_state(pid));
    expect_fault(&a, keep_id, "active", NULL); /* made without a lease: it survives the lapse */
    json_t *s = ag_status(&a);
    cr_assert(json_is_null(json_object_get(s, "lease")));
    json_decref(s);
    ag_stop(&a);
    ag_echo_stop(&echo);
}

Test(agent_safety, halt_reverts_all_and_refuses_until_resume)
{
    ag a;
    ag_start(&a, "halt", NULL, NULL, NULL);
    pid_t pid = ag_wait_running(&a, 5000);
    char id1[32], id2[32];
    ag_fault_id(&a, "{\"type\":\"pause\",\"duration_ms\":30000,\"params\":{\"method\":\"signal\"}}", id1,
                sizeof id1);
    ag_fault_id(&a, "{\"type\":\"nan\",\"duration_ms\":30000,\"params\":{\"count\":5}}", id2, sizeof id2);
    cr_assert(ag_wait_proc(pid, "T", 1000));

    int st = 0;
    json_t *h = ag_call(&a, "POST", "/v1/halt", NULL, 1, &st);
    cr_assert_eq(st, 200);
    cr_assert_eq(json_integer_value(json_object_get(h, "reverted")), 2);
    json_decref(h);
    cr_assert(ag_wait_proc(pid, "RS", 1000), "halt continued the unit");
    expect_fault(&a, id1, NULL, "halt");
    expect_fault(&a, id2, NULL, "halt");

    json_t *r = ag_call(&a, "POST", "/v1/faults", "{\"type\":\"nan\",\"duration_ms\":1000}", 1, &st);
    cr_assert_eq(st, 503);
    json_decref(r);
    json_t *s = ag_status(&a);
    cr_assert(json_is_true(json_object_get(s, "halted")));
    cr_assert_eq(json_integer_value(json_object_get(s, "faults_active")), 0);
    json_decref(s);

    json_decref(ag_call(&a, "POST", "/v1/resume", NULL, 1, &st));
    cr_assert_eq(st, 200);
    json_decref(ag_fault(&a, "{\"type\":\"nan\",\"duration_ms\":1000}"));
    ag_stop(&a);
}

Test(agent_safety, sigkill_during_pause_then_restart_thaws_and_runs)
{
    ag a;
    ag_start(&a, "crash", NULL, NULL, NULL);
    pid_t pid = ag_wait_running(&a, 5000);
    json_t *p = ag_fault(&a, "{\"type\":\"pause\",\"duration_ms\":60000}");
    char id[32], ff[700];
    snprintf(id, sizeof id, "%s", js(p, "id"));
    const char *fz = freezer_file(p, ff, sizeof ff);
    json_decref(p);
    if (!fz)
        cr_assert(ag_wait_proc(pid, "T", 1000));

    /* The agent dies without reverting anything, and its watchdog with it
     * (a crash that takes both): a live watchdog would thaw and end the
     * unit itself (test_agent_fork a_frozen_unit_dies_with_its_agent);
     * here the next agent's sweep must thaw it. */
    pid_t wd = ag_watchdog_of(a.pid, pid);
    cr_assert(wd > 0, "the agent has a watchdog beside its unit");
    kill(wd, SIGKILL);
    cr_assert(ag_wait_proc(wd, "Z", 3000) || uproc_state(wd) == 0);
    it_signal(a.pid, SIGKILL, 0);
    cr_assert_geq(it_wait_exit(a.pid, 5000), 0);
    if (fz) {
        char line[64];
        ag_read_line(fz, line, sizeof line);
        cr_assert_str_eq(line, "FROZEN", "still frozen while no agent runs");
    }

    ag b;
    ag_start(&b, "crash", NULL, NULL, &a);
    free(a.dir);
    pid_t pid2 = ag_wait_running(&b, 10000);
    cr_assert_neq(pid2, pid);
    cr_assert(ag_wait_proc(pid2, "RS", 2000), "new unit runs (state %c)", uproc_state(pid2));
    if (fz) {
        char line[64];
        ag_read_line(fz, line, sizeof line);
        cr_assert_str_eq(line, "THAWED", "the sweep thawed the cgroup");
    }
    /* The old unit (killed by PDEATHSIG once thawed) does not stay stopped. */
    cr_assert(ag_wait_gone(pid, 3000) || uproc_state(pid) != 'T', "old unit left stopped");
    expect_fault(&b, id, "reverted", "agent_restart");
    ag_stop(&b);
}

/* 1 when GET url (text/plain) contains the unit's greeting. */
static int logs_have_greeting(const char *url)
{
    const char *slash = strchr(url + 7, '/');
    char base[200];
    snprintf(base, sizeof base, "%.*s", (int)(slash - url), url);
    cx_http_opts o = {.bearer = AG_TOKEN};
    cx_http_client *c = cx_http_client_new(base, &o);
    cx_http_result r;
    cx_http_result_init(&r);
    int ok = cx_http_do(c, "GET", slash, NULL, NULL, 0, NULL, 0, &r, NULL, 0) == 0 && r.status == 200 &&
             r.body.data && strstr(r.body.data, "hello-from-the-unit") != NULL;
    cx_http_result_cleanup(&r);
    cx_http_client_free(c);
    return ok;
}

Test(agent_safety, bad_calls_get_4xx_change_nothing_and_are_audited)
{
    ag a;
    const char *unit[] = {"sh", "-c", "echo hello-from-the-unit; exec sleep 1000", NULL};
    ag_start(&a, "bad", NULL, unit, NULL);
    pid_t pid = ag_wait_running(&a, 5000);
    int st = 0;
    json_t *r = ag_call(&a, "POST", "/v1/faults", "{\"type\":\"pause\",\"duration_ms\":1000}", 0, &st);
    cr_assert_eq(st, 401);
    json_decref(r);
    r = ag_call(&a, "POST", "/v1/faults", "{\"type\":\"pause\",\"duration_ms\":-5}", 1, &st);
    cr_assert_eq(st, 400);
    cr_assert(strstr(js(r, "error"), "duration_ms"));
    json_decref(r);
    r = ag_call(&a, "POST", "/v1/faults", "{\"type\":\"pause\",\"duration_ms\":1000,\"extra\":true}", 1, &st);
    cr_assert_eq(st, 400);
    cr_assert(strstr(js(r, "error"), "extra"));
    json_decref(r);
    r = ag_call(&a, "POST", "/v1/faults",
                "{\"type\":\"kill\",\"duration_ms\":1000,\"params\":{\"signal\":\"FOO\"}}", 1, &st);
    cr_assert_eq(st, 400);
    json_decref(r);
    r = ag_call(&a, "POST", "/v1/faults", "{\"type\":\"pause\",\"duration_ms\":600001}", 1, &st);
    cr_assert_eq(st, 400, "over the default 10 min cap");
    json_decref(r);
    r = ag_call(&a, "GET", "/v1/faults/f-999", NULL, 1, &st);
    cr_assert_eq(st, 404);
    json_decref(r);
    r = ag_call(&a, "GET", "/v1/nowhere", NULL, 1, &st);
    cr_assert_eq(st, 404);
    json_decref(r);

    cr_assert(ag_wait_proc(pid, "RS", 100), "the unit was never touched");
    r = ag_call(&a, "GET", "/v1/faults", NULL, 1, &st);
    cr_assert_eq(json_array_size(json_object_get(r, "faults")), 0);
    json_decref(r);
    cr_assert_eq(ag_incarnation(&a), 1);

    /* The unit's output is captured and served by /v1/logs. */
    char url[300];
    snprintf(url, sizeof url, "%s/v1/logs?tail=5", a.url);
    int64_t end = cx_mono_ms() + 3000;
    int seen = 0;
    while (!seen && cx_mono_ms() < end) {
        char lp[700], *text = NULL;
        size_t tl = 0;
        snprintf(lp, sizeof lp, "%s/unit.log", a.state);
        if (cx_file_read(lp, 1 << 20, &text, &tl, NULL, 0) == 0)
            seen = strstr(text, "hello-from-the-unit") != NULL;
        free(text);
        cx_sleep_ms(20);
    }
    cr_assert(seen, "unit output captured in unit.log");
    cr_assert_eq(logs_have_greeting(url), 1, "GET /v1/logs serves the unit's output");

    char path[700], *data = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/audit.jsonl", a.state);
    cr_assert_eq(cx_file_read(path, 1 << 20, &data, &len, NULL, 0), 0);
    int lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += data[i] == '\n';
    cr_assert_eq(lines, 5, "each mutating call audited once (%d lines):\n%s", lines, data);
    cr_assert(strstr(data, "\"status\":401"));
    free(data);
    ag_stop(&a);
}

Test(agent_safety, usage_errors_exit_64_naming_the_flag)
{
    char *dir = it_mkdtemp("usage");
    char tok[600], st[600];
    ag_write_token(dir, tok, sizeof tok);
    snprintf(st, sizeof st, "%s/state", dir);
    struct {
        const char *args[16];
        const char *names;
    } cases[] = {
        {{"agent", "--bogus", NULL}, "--bogus"},
        {{"agent", "--state-dir", st, "--token-file", tok, "--", "sleep", "1", NULL}, "--id"},
        {{"agent", "--id", "u", "--state-dir", st, "--token-file", tok, "--restart", "sometimes", "--",
          "sleep", "1", NULL},
         "sometimes"},
        {{"agent", "--id", "u", "--state-dir", st, "--token-file", tok, "--proxy", "p=nowhere", "--", "sleep",
          "1", NULL},
         "--proxy"},
        {{"agent", "--id", "u", "--state-dir", st, "--token-file", tok, NULL}, "command"},
        {{"agent", "--id", "bad/id", "--state-dir", st, "--token-file", tok, "--", "sleep", "1", NULL},
         "--id"},
        {{"agent", "--id", "u", "--state-dir", st, "--token-file", "/nonexistent/token", "--", "sleep", "1",
          NULL},
         "--token-file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32], path[700];
        snprintf(name, sizeof name, "usage%zu", i);
        pid_t p = it_start(dir, name, cases[i].args, NULL);
        int status = it_wait_exit(p, 10000);
        cr_assert(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 64, "case %zu: exit status %d",
                  i, status);
        snprintf(path, sizeof path, "%s/%s.log", dir, name);
        char *log = NULL;
        size_t len = 0;
        cr_assert_eq(cx_file_read(path, 1 << 20, &log, &len, NULL, 0), 0);
        cr_assert(strstr(log, cases[i].names), "case %zu: message should name %s: %s", i, cases[i].names,
                  log);
        free(log);
    }
    free(dir);
}

/* A harness that dies during its start-up, before it took a lease, leaves
 * agents that no lease will ever lapse on: with --orphan-exit-ms they go
 * (and stop their units) that long after the process that started them
 * died. Here a shell starts the agent in the background and exits. */
Test(agent_safety, an_agent_never_leased_goes_when_its_starter_dies)
{
    char *dir = it_mkdtemp("aorph");
    char tok[600], state[600], unit_pid[600], cmd[4096];
    ag_write_token(dir, tok, sizeof tok);
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(unit_pid, sizeof unit_pid, "%s/unit.pid", dir);
    snprintf(cmd, sizeof cmd,
             "'%s' agent --listen 127.0.0.1:0 --id it-aorph-%d --state-dir '%s' --token-file '%s' "
             "--no-cgroup --orphan-exit-ms 1000 -- /bin/sh -c 'echo $$ > %s; exec sleep 1000' "
             ">'%s/agent.log' 2>&1 & echo $! > '%s/agent.pid'; sleep 2",
             CHAOSLOCO_BIN, (int)getpid(), state, tok, unit_pid, dir, dir);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    pid_t starter = it_start_prog(dir, "starter", argv, NULL);
    pid_t agent = it_wait_pid_file(dir, "agent.pid", 10000);
    pid_t unit = it_wait_pid_file(dir, "unit.pid", 20000);
    cr_assert_gt(agent, 0, "the agent was started");
    cr_assert_gt(unit, 0, "its unit runs");
    int st = it_wait_exit(starter, 10000);
    /* 1 s of orphan time, then the unit's stop (at most its 5 s grace) */
    int gone = st != -1 && it_wait_proc_dead(agent, 15000);
    int unit_gone = gone && it_wait_proc_dead(unit, 2000);
    if (!gone || !unit_gone) { /* not started by it_start: leave nothing behind */
        it_dump_log(dir, "agent");
        kill(agent, SIGKILL);
        kill(unit, SIGKILL);
    }
    cr_assert_neq(st, -1, "the starter exited");
    cr_assert(gone, "the never-leased agent left after its starter died");
    cr_assert(unit_gone, "and stopped its unit");
    it_rm_tree(dir);
    free(dir);
}
