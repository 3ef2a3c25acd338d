/* test_agent_fork.c - a unit that forks (tests/integration/fork_unit.c: a
 * leader whose child ignores SIGTERM and outlives it) does not survive its
 * agent: not a SIGKILL of the agent (the watchdog), not a crash that took
 * the watchdog too (the next agent's sweep of unit.json), not a clean stop
 * or a restart (SIGTERM, grace, SIGKILL to the whole group before the next
 * incarnation). The sweep never signals a process without the agent's
 * environment marks. A child that left the unit's process group (double
 * fork + setsid) is still in the unit's cgroup and dies with a stop, with
 * its agent and in the next agent's sweep (skipped where no cgroup is
 * writable). Real agents on 127.0.0.1. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent_it.h"
#include "injectors/unit_proc.h"

/* Processes outside every group it_cleanup() kills (a unit's children, the
 * decoy), with their start times: fini SIGKILLs those still alive, never a
 * process that reused one of their pids. */
static pid_t g_stray[8];
static uint64_t g_stray_t0[8];
static int g_nstray;

static void fini(void)
{
    for (int i = 0; i < g_nstray; i++)
        (void)uproc_signal_same(g_stray[i], g_stray_t0[i], SIGKILL);
    g_nstray = 0;
    ag_cleanup_all();
}

TestSuite(agent_fork, .fini = fini, .timeout = 120);

static void stray(pid_t pid)
{
    if (pid > 0 && g_nstray < 8) {
        g_stray_t0[g_nstray] = uproc_starttime(pid);
        g_stray[g_nstray++] = pid;
    }
}

/* Start an agent whose unit is fork_unit writing into udir. */
static void start_fork_agent(ag *a, const char *tag, const char *udir, const char *mode, const ag *state_from)
{
    const char *unit[] = {IT_FORK_UNIT, udir, mode, NULL};
    ag_start(a, tag, NULL, unit, state_from);
}

/* The same without cgroups (--no-cgroup): the process-group sweep alone. */
static void start_fork_agent_nocg(ag *a, const char *tag, const char *udir, const char *mode,
                                  const ag *state_from)
{
    const char *unit[] = {IT_FORK_UNIT, udir, mode, NULL};
    const char *extra[] = {"--no-cgroup", NULL};
    ag_start(a, tag, extra, unit, state_from);
}

static void unit_file_path(const char *udir, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", udir, name);
}

Test(agent_fork, agent_sigkill_takes_the_whole_group)
{
    char *udir = it_mkdtemp("fk-kill-u");
    ag a;
    start_fork_agent(&a, "fk-kill", udir, NULL, NULL);
    pid_t leader = ag_wait_running(&a, 10000);
    pid_t child = it_wait_pid_file(udir, "child.pid", 10000);
    cr_assert(child > 0, "the unit's child wrote its pid");
    cr_assert_eq(uproc_state(child) != 0 && !it_proc_dead(child), 1);
    it_signal(a.pid, SIGKILL, 0); /* the agent alone, not its process group */
    cr_assert(it_wait_exit(a.pid, 5000) >= 0, "agent reaped");
    cr_assert(it_wait_proc_dead(leader, 3000), "the leader dies with its agent (PR_SET_PDEATHSIG)");
    cr_assert(it_wait_proc_dead(child, 3000), "the leader's child dies with the agent too (state %c)",
              uproc_state(child));
    free(a.dir);
    free(udir);
}

Test(agent_fork, the_next_agent_sweeps_a_group_whose_watchdog_died)
{
    char *udir = it_mkdtemp("fk-sweep-u");
    ag a;
    /* without cgroups: the decoy is the unit's child, so with a writable
     * cgroup it is in the unit's cgroup and the cgroup sweep (tested below)
     * rightly ends it; this is about the group sweep's marks rule */
    start_fork_agent_nocg(&a, "fk-sweep", udir, "with-decoy", NULL);
    pid_t leader = ag_wait_running(&a, 10000);
    pid_t child = it_wait_pid_file(udir, "child.pid", 10000);
    pid_t decoy = it_wait_pid_file(udir, "decoy.pid", 10000);
    stray(child);
    stray(decoy);
    cr_assert(child > 0 && decoy > 0, "child and decoy wrote their pids");
    char path[700];
    snprintf(path, sizeof path, "%s/unit.json", a.state);
    cr_assert_eq(access(path, F_OK), 0, "the agent records its unit in unit.json");
    pid_t wd = ag_watchdog_of(a.pid, leader);
    cr_assert(wd > 0, "the agent has a watchdog child beside its unit");
    /* A crash that takes the watchdog too: it first, then the agent. */
    kill(wd, SIGKILL);
    cr_assert(ag_wait_proc(wd, "Z", 3000) || it_proc_dead(wd));
    it_signal(a.pid, SIGKILL, 0);
    cr_assert(it_wait_exit(a.pid, 5000) >= 0);
    cr_assert(it_wait_proc_dead(leader, 3000), "the leader dies with its agent");
    cx_sleep_ms(300);
    cr_assert(!it_proc_dead(child), "test bug: with its watchdog dead the child should still run");
    cr_assert(!it_proc_dead(decoy), "test bug: the decoy should still run");

    ag b;
    start_fork_agent_nocg(&b, "fk-sweep", udir, NULL, &a);
    /* The sweep runs before the agent listens: the child is gone by now. */
    cr_assert(it_wait_proc_dead(child, 1000),
              "the restarted agent's sweep ended the leftover child (state %c)", uproc_state(child));
    cr_assert(!it_proc_dead(decoy), "the decoy (same group, no agent marks) is never signalled");
    ag_wait_running(&b, 10000);
    char log[700];
    snprintf(log, sizeof log, "%s/%s.log", b.dir, b.name);
    char *text = NULL;
    size_t tl = 0;
    cr_assert_eq(cx_file_read(log, 1 << 20, &text, &tl, NULL, 0), 0);
    cr_assert(strstr(text, "left alone"), "the sweep logs the process it left alone");
    free(text);
    cr_assert_eq(uproc_signal_same(decoy, uproc_starttime(decoy), SIGKILL), 0);
    ag_stop(&b);
    free(a.dir);
    free(udir);
}

Test(agent_fork, a_forged_unit_record_never_signals_an_unmarked_process)
{
    char *udir = it_mkdtemp("fk-forge-u");
    /* A process of the test's own (no agent marks), leading its own group. */
    const char *argv[] = {IT_FORK_UNIT, udir, "decoy", NULL};
    pid_t victim = it_start_prog(udir, "victim", argv, NULL);
    cr_assert(it_wait_pid_file(udir, "decoy.pid", 10000) == victim);
    char path[700], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)victim);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    char *p = strrchr(stat, ')') + 2;
    for (int field = 3; field < 22; field++)
        p = strchr(p, ' ') + 1;
    unsigned long long t0 = strtoull(p, NULL, 10);

    ag a;
    memset(&a, 0, sizeof a);
    a.dir = it_mkdtemp("fk-forge");
    snprintf(a.state, sizeof a.state, "%s/state", a.dir);
    cr_assert_eq(cx_mkdir_p(a.state, NULL, 0), 0);
    snprintf(path, sizeof path, "%s/unit.json", a.state);
    char rec[200];
    snprintf(rec, sizeof rec, "{\"pgid\": %d, \"pid\": %d, \"starttime\": %llu}\n", (int)victim, (int)victim,
             t0);
    cr_assert_eq(cx_file_write_atomic(path, rec, strlen(rec), NULL, 0), 0);
    snprintf(a.id, sizeof a.id, "it-fk-forge-%d", (int)getpid());
    start_fork_agent(&a, "fk-forge", udir, NULL, &a);
    ag_wait_running(&a, 10000);
    cx_sleep_ms(200);
    cr_assert(!it_proc_dead(victim),
              "a forged unit.json naming a process without the marks does not kill it");
    char log[700];
    snprintf(log, sizeof log, "%s/%s.log", a.dir, a.name);
    char *text = NULL;
    size_t tl = 0;
    cr_assert_eq(cx_file_read(log, 1 << 20, &text, &tl, NULL, 0), 0);
    cr_assert(strstr(text, "left alone") && strstr(text, "environment marks"),
              "the sweep read the record and logged why it left the process alone");
    free(text);
    ag_stop(&a);
    free(udir);
}

Test(agent_fork, a_clean_stop_ends_the_whole_group)
{
    char *udir = it_mkdtemp("fk-stop-u");
    ag a;
    start_fork_agent(&a, "fk-stop", udir, NULL, NULL);
    pid_t leader = ag_wait_running(&a, 10000);
    pid_t child = it_wait_pid_file(udir, "child.pid", 10000);
    stray(child);
    cr_assert(child > 0);
    char state[512];
    snprintf(state, sizeof state, "%s/unit.json", a.state);
    ag_stop(&a); /* SIGTERM: the child ignores it, the stop grace ends it */
    cr_assert(it_proc_dead(leader));
    cr_assert(it_wait_proc_dead(child, 1000), "a clean stop leaves no process of the unit's group (state %c)",
              uproc_state(child));
    cr_assert_neq(access(state, F_OK), 0, "unit.json is removed once the group is gone");
    free(udir);
}

Test(agent_fork, a_restart_ends_the_old_group_before_the_new_unit_starts)
{
    char *udir = it_mkdtemp("fk-restart-u");
    ag a;
    start_fork_agent(&a, "fk-restart", udir, NULL, NULL);
    pid_t leader = ag_wait_running(&a, 10000);
    pid_t child = it_wait_pid_file(udir, "child.pid", 10000);
    stray(child);
    cr_assert(child > 0);
    char path[700];
    unit_file_path(udir, "prev.state", path, sizeof path);
    char line[32];
    ag_read_line(path, line, sizeof line);
    cr_assert_str_eq(line, "gone", "the first incarnation had no previous child");
    /* SIGTERM to the group: the leader exits, its child ignores it. */
    json_t *f = ag_fault(&a, "{\"type\":\"kill\",\"duration_ms\":60000,\"params\":{\"signal\":\"TERM\","
                             "\"restart_after_ms\":0}}");
    json_decref(f);
    int64_t end = cx_mono_ms() + 20000;
    while (ag_incarnation(&a) < 2 && cx_mono_ms() < end)
        cx_sleep_ms(20);
    cr_assert_eq(ag_incarnation(&a), 2, "the unit restarted");
    cr_assert(it_proc_dead(leader) && it_proc_dead(child), "the old group is gone once the new unit runs");
    pid_t child2 = 0;
    end = cx_mono_ms() + 10000;
    while ((child2 = it_wait_pid_file(udir, "child.pid", 100)) == child && cx_mono_ms() < end)
        cx_sleep_ms(10);
    stray(child2);
    ag_read_line(path, line, sizeof line);
    cr_assert(strcmp(line, "gone") == 0 || strcmp(line, "Z") == 0,
              "the new leader found the old child dead when it started (state '%s')", line);
    ag_stop(&a);
    cr_assert(it_wait_proc_dead(child2, 1000));
    free(udir);
}

Test(agent_fork, preempt_sigkills_what_outlives_the_leader_at_its_deadline)
{
    char *udir = it_mkdtemp("fk-preempt-u");
    ag a;
    start_fork_agent(&a, "fk-preempt", udir, NULL, NULL);
    pid_t leader = ag_wait_running(&a, 10000);
    pid_t child = it_wait_pid_file(udir, "child.pid", 10000);
    stray(child);
    cr_assert(child > 0);
    int64_t t0 = cx_mono_ms();
    json_t *f = ag_fault(&a, "{\"type\":\"preempt\",\"duration_ms\":60000,\"params\":{\"grace_ms\":300,"
                             "\"restart_after_ms\":0}}");
    json_decref(f);
    cr_assert(it_wait_proc_dead(leader, 3000), "the leader exits on SIGTERM");
    /* preempt's SIGKILL at 300 ms, not the supervisor's 5 s group grace */
    cr_assert(it_wait_proc_dead(child, 3000),
              "the child that ignores SIGTERM is SIGKILLed at the preempt deadline");
    cr_log_info("child gone %lld ms after the preempt", (long long)(cx_mono_ms() - t0));
    int64_t end = cx_mono_ms() + 10000;
    while (ag_incarnation(&a) < 2 && cx_mono_ms() < end)
        cx_sleep_ms(20);
    cr_assert_eq(ag_incarnation(&a), 2, "the unit restarted");
    ag_stop(&a);
    free(udir);
}

Test(agent_fork, a_bad_unit_record_is_refused_with_a_logged_error)
{
    static const char *const recs[][2] = {
        {"{\"pgid\": 4242, \"pid\": 4242, \"starttime\": 7, \"file\": \"/etc/passwd\"}", "unit.json"},
        {"{\"pgid\": 1, \"pid\": 1, \"starttime\": 7}", "out of range"},
        {"[1, 2, 3]", "unit.json"},
    };
    char *udir = it_mkdtemp("fk-bad-u");
    ag a;
    memset(&a, 0, sizeof a);
    a.dir = it_mkdtemp("fk-bad");
    snprintf(a.state, sizeof a.state, "%s/state", a.dir);
    snprintf(a.id, sizeof a.id, "it-fk-bad-%d", (int)getpid());
    cr_assert_eq(cx_mkdir_p(a.state, NULL, 0), 0);
    for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/unit.json", a.state);
        cr_assert_eq(cx_file_write_atomic(path, recs[i][0], strlen(recs[i][0]), NULL, 0), 0);
        start_fork_agent(&a, "fk-bad", udir, NULL, &a);
        ag_wait_running(&a, 10000);
        char log[700];
        snprintf(log, sizeof log, "%s/%s.log", a.dir, a.name);
        char *text = NULL;
        size_t tl = 0;
        cr_assert_eq(cx_file_read(log, 1 << 20, &text, &tl, NULL, 0), 0);
        const char *e = strstr(text, "crash sweep: unit:");
        cr_assert(e && strstr(e, recs[i][1]), "record %zu: a logged error naming '%s'", i, recs[i][1]);
        free(text);
        it_signal(a.pid, SIGKILL, 0); /* not ag_stop: it frees a.dir, which the next round reuses */
        cr_assert(it_wait_exit(a.pid, 5000) >= 0);
    }
    free(a.dir);
    free(udir);
}

/* ---- a child that escapes the process group (setsid) ---- */

/* The escaped grandchild of an agent's unit (fork_unit escape): its pid,
 * after checking that it did leave the leader's process group. Skips the
 * test, with the reason, when the unit is in no cgroup of the agent's
 * (no cgroup writable here: docs/security.md says what then holds). */
static pid_t escaped_child(ag *a, const char *udir, pid_t leader)
{
    pid_t esc = it_wait_pid_file(udir, "escaped.pid", 10000);
    cr_assert(esc > 0, "the escaped child wrote its pid");
    stray(esc);
    stray(it_wait_pid_file(udir, "child.pid", 10000)); /* fini's cleanup kills the agent with its watchdog */
    cr_assert_neq(uproc_pgrp(esc), uproc_pgrp(leader), "it left the unit's process group");
    char path[64], *text = NULL, want[200];
    size_t tl = 0;
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)esc);
    snprintf(want, sizeof want, "/chaosloco/%s\n", a->id);
    cr_assert_eq(cx_file_read(path, 1 << 16, &text, &tl, NULL, 0), 0);
    int in = strstr(text, want) != NULL;
    free(text);
    if (!in) {
        char log[700], *lt = NULL;
        size_t ll = 0;
        snprintf(log, sizeof log, "%s/%s.log", a->dir, a->name);
        cx_file_read(log, 1 << 20, &lt, &ll, NULL, 0);
        const char *cg = lt ? strstr(lt, "cgroup=") : NULL;
        char why[160];
        snprintf(why, sizeof why, "%.120s", cg ? cg : "(no cgroup note in the agent log)");
        why[strcspn(why, "\n")] = '\0';
        free(lt);
        (void)uproc_signal_same(esc, uproc_starttime(esc), SIGKILL);
        cr_skip_test("no writable cgroup for the unit here (agent: %s): a setsid child is not tracked", why);
    }
    return esc;
}

Test(agent_fork, an_escaped_child_dies_with_the_clean_stop)
{
    char *udir = it_mkdtemp("fk-esc-stop-u");
    ag a;
    start_fork_agent(&a, "fk-esc-stop", udir, "escape", NULL);
    pid_t leader = ag_wait_running(&a, 10000);
    pid_t esc = escaped_child(&a, udir, leader);
    ag_stop(&a);
    cr_assert(it_proc_dead(leader));
    cr_assert(it_wait_proc_dead(esc, 2000), "the setsid child is ended with its unit's cgroup (state %c)",
              uproc_state(esc));
    free(udir);
}

Test(agent_fork, an_escaped_child_dies_with_its_agent)
{
    char *udir = it_mkdtemp("fk-esc-kill-u");
    ag a;
    start_fork_agent(&a, "fk-esc-kill", udir, "escape", NULL);
    pid_t leader = ag_wait_running(&a, 10000);
    pid_t esc = escaped_child(&a, udir, leader);
    it_signal(a.pid, SIGKILL, 0); /* the agent alone: its watchdog empties the cgroup */
    cr_assert(it_wait_exit(a.pid, 5000) >= 0);
    cr_assert(it_wait_proc_dead(leader, 3000), "the leader dies with its agent");
    cr_assert(it_wait_proc_dead(esc, 3000), "the setsid child dies with its agent (state %c)",
              uproc_state(esc));
    free(a.dir);
    free(udir);
}

Test(agent_fork, the_next_agent_sweeps_an_escaped_child_whose_watchdog_died)
{
    char *udir = it_mkdtemp("fk-esc-sweep-u");
    ag a;
    start_fork_agent(&a, "fk-esc-sweep", udir, "escape", NULL);
    pid_t leader = ag_wait_running(&a, 10000);
    pid_t esc = escaped_child(&a, udir, leader);
    pid_t child = it_wait_pid_file(udir, "child.pid", 10000);
    pid_t wd = ag_watchdog_of(a.pid, leader);
    cr_assert(wd > 0, "the agent has a watchdog child beside its unit");
    kill(wd, SIGKILL); /* a crash that takes the watchdog too */
    cr_assert(ag_wait_proc(wd, "Z", 3000) || it_proc_dead(wd));
    it_signal(a.pid, SIGKILL, 0);
    cr_assert(it_wait_exit(a.pid, 5000) >= 0);
    cr_assert(it_wait_proc_dead(leader, 3000), "the leader dies with its agent");
    cx_sleep_ms(300);
    cr_assert(!it_proc_dead(esc), "test bug: with the watchdog dead the escaped child should still run");

    ag b;
    start_fork_agent(&b, "fk-esc-sweep", udir, NULL, &a);
    /* The sweep runs before the agent listens. */
    cr_assert(it_wait_proc_dead(esc, 2000), "the restarted agent's sweep ended the escaped child (state %c)",
              uproc_state(esc));
    ag_wait_running(&b, 10000);
    pid_t child2 = 0;
    int64_t end = cx_mono_ms() + 10000;
    while ((child2 = it_wait_pid_file(udir, "child.pid", 100)) == child && cx_mono_ms() < end)
        cx_sleep_ms(10);
    stray(child2);
    char log[700];
    snprintf(log, sizeof log, "%s/%s.log", b.dir, b.name);
    char *text = NULL;
    size_t tl = 0;
    cr_assert_eq(cx_file_read(log, 1 << 20, &text, &tl, NULL, 0), 0);
    cr_assert(strstr(text, "crash sweep: 1 process(es) left the unit's process group but not its cgroup"),
              "the sweep logs what it ended through the cgroup");
    free(text);
    ag_stop(&b);
    free(a.dir);
    free(udir);
}

/* A unit frozen by a pause fault (cgroup freezer) cannot act on the
 * SIGKILL its dying agent's watchdog sends: the watchdog thaws the cgroup
 * first, so the frozen leader and its escaped child die with the agent. */
Test(agent_fork, a_frozen_unit_dies_with_its_agent)
{
    char *udir = it_mkdtemp("fk-esc-frozen-u");
    ag a;
    start_fork_agent(&a, "fk-esc-frozen", udir, "escape", NULL);
    pid_t leader = ag_wait_running(&a, 10000);
    pid_t esc = escaped_child(&a, udir, leader);
    json_t *f =
        ag_fault(&a, "{\"type\":\"pause\",\"duration_ms\":60000,\"params\":{\"method\":\"freezer\"}}");
    cr_assert(f, "a pause through the freezer");
    json_decref(f);
    cx_sleep_ms(300);
    it_signal(a.pid, SIGKILL, 0);
    cr_assert(it_wait_exit(a.pid, 5000) >= 0);
    cr_assert(it_wait_proc_dead(leader, 3000), "the frozen leader dies with its agent (state %c)",
              uproc_state(leader));
    cr_assert(it_wait_proc_dead(esc, 3000), "the frozen setsid child dies with its agent (state %c)",
              uproc_state(esc));
    free(a.dir);
    free(udir);
}
