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

/* Start agent a (tag) whose unit is fork_unit in mode (NULL: the plain
 * leader and child) writing its pid files into udir; with cgroup 0 the
 * agent runs with --no-cgroup (the process-group sweep alone). */
static void start_fork_agent(ag *a, const char *tag, const char *udir, const char *mode, int cgroup,
                             const ag *state_from)
{
    const char *unit[] = {IT_FORK_UNIT, udir, mode, NULL};
    static const char *const nocg[] = {"--no-cgroup", NULL};
    ag_start(a, tag, cgroup ? NULL : nocg, unit, state_from);
}

/* One test's unit: fork_unit under a fresh agent, running. */
typedef struct fk {
    ag a;         /* its agent */
    char *udir;   /* fork_unit's pid files (malloc'd temp dir) */
    pid_t leader; /* the unit's leader */
} fk;

/* Start u: a temp dir "<tag>-u", an agent (tag) whose unit is fork_unit in
 * mode; waits for the leader to run. */
static void fk_start(fk *u, const char *tag, const char *mode, int cgroup)
{
    char utag[64];
    snprintf(utag, sizeof utag, "%s-u", tag);
    u->udir = it_mkdtemp(utag);
    start_fork_agent(&u->a, tag, u->udir, mode, cgroup, NULL);
    u->leader = ag_wait_running(&u->a, 10000);
}

/* Free what fk_start allocated (the agent's dir is NULL after ag_stop). */
static void fk_free(fk *u)
{
    free(u->a.dir);
    free(u->udir);
}

/* The leader's child (it ignores SIGTERM), once it wrote its pid; fini
 * kills it should it outlive the test. */
static pid_t fk_child(const fk *u)
{
    pid_t child = it_wait_pid_file(u->udir, "child.pid", 10000);
    stray(child);
    cr_assert(child > 0, "the unit's child wrote its pid");
    return child;
}

/* The agent dies by SIGKILL (the agent alone, not its process group); with
 * watchdog_too its watchdog dies first: a crash that takes both, so that
 * what outlives the leader is left for the next agent's sweep. The leader
 * dies with its agent either way (PR_SET_PDEATHSIG). */
static void fk_crash(fk *u, int watchdog_too)
{
    if (watchdog_too) {
        pid_t wd = ag_watchdog_of(u->a.pid, u->leader);
        cr_assert(wd > 0, "the agent has a watchdog child beside its unit");
        kill(wd, SIGKILL);
        cr_assert(ag_wait_proc(wd, "Z", 3000) || it_proc_dead(wd));
    }
    it_signal(u->a.pid, SIGKILL, 0);
    cr_assert(it_wait_exit(u->a.pid, 5000) >= 0, "agent reaped");
    cr_assert(it_wait_proc_dead(u->leader, 3000),
              "the leader dies with its agent (PR_SET_PDEATHSIG, state %c)", uproc_state(u->leader));
}

/* SIGKILL the agent alone (fk_crash): what outlived the unit's leader
 * (survivor: its child, its escaped grandchild) dies with the agent too;
 * then frees u. */
static void expect_dies_with_agent(fk *u, pid_t survivor, const char *what)
{
    fk_crash(u, 0);
    cr_assert(it_wait_proc_dead(survivor, 3000), "%s dies with its agent (state %c)", what,
              uproc_state(survivor));
    fk_free(u);
}

/* Wait (bounded) until the unit's incarnation is 2: it restarted. */
static void fk_wait_restarted(const fk *u, long timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    while (ag_incarnation(&u->a) < 2 && cx_mono_ms() < end)
        cx_sleep_ms(20);
    cr_assert_eq(ag_incarnation(&u->a), 2, "the unit restarted");
}

/* The child of the unit's next incarnation: udir/child.pid once it names
 * another process than old (bounded; old again on time-out). */
static pid_t fk_next_child(const char *udir, pid_t old)
{
    pid_t child = 0;
    int64_t end = cx_mono_ms() + 10000;
    while ((child = it_wait_pid_file(udir, "child.pid", 100)) == old && cx_mono_ms() < end)
        cx_sleep_ms(10);
    stray(child);
    return child;
}

/* An agent's log (malloc'd), or NULL when it cannot be read. */
static char *agent_log(const ag *a)
{
    char path[700], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/%s.log", a->dir, a->name);
    if (cx_file_read(path, 1 << 20, &text, &len, NULL, 0) != 0)
        return NULL;
    return text;
}

/* 1 when a's log (which must be readable) contains needle. */
static int agent_log_has(const ag *a, const char *needle)
{
    char *text = agent_log(a);
    cr_assert_not_null(text, "%s/%s.log", a->dir, a->name);
    int has = strstr(text, needle) != NULL;
    free(text);
    return has;
}

/* a as a crashed agent would leave it, not started: a fresh state dir
 * (tag) for unit.json records; then start_fork_agent(a, ..., a) reuses it. */
static void agent_before_start(ag *a, const char *tag)
{
    memset(a, 0, sizeof *a);
    a->dir = it_mkdtemp(tag);
    snprintf(a->state, sizeof a->state, "%s/state", a->dir);
    snprintf(a->id, sizeof a->id, "it-%s-%d", tag, (int)getpid());
    cr_assert_eq(cx_mkdir_p(a->state, NULL, 0), 0);
}

/* Replace a's unit.json with rec. */
static void write_unit_record(const ag *a, const char *rec)
{
    char path[700];
    snprintf(path, sizeof path, "%s/unit.json", a->state);
    cr_assert_eq(cx_file_write_atomic(path, rec, strlen(rec), NULL, 0), 0);
}

Test(agent_fork, agent_sigkill_takes_the_whole_group)
{
    fk u;
    fk_start(&u, "fk-kill", NULL, 1);
    pid_t child = fk_child(&u);
    cr_assert_eq(uproc_state(child) != 0 && !it_proc_dead(child), 1);
    expect_dies_with_agent(&u, child, "the leader's child");
}

Test(agent_fork, the_next_agent_sweeps_a_group_whose_watchdog_died)
{
    fk u;
    /* without cgroups: the decoy is the unit's child, so with a writable
     * cgroup it is in the unit's cgroup and the cgroup sweep (tested below)
     * rightly ends it; this is about the group sweep's marks rule */
    fk_start(&u, "fk-sweep", "with-decoy", 0);
    pid_t child = fk_child(&u);
    pid_t decoy = it_wait_pid_file(u.udir, "decoy.pid", 10000);
    stray(decoy);
    cr_assert(decoy > 0, "the decoy wrote its pid");
    char path[700];
    snprintf(path, sizeof path, "%s/unit.json", u.a.state);
    cr_assert_eq(access(path, F_OK), 0, "the agent records its unit in unit.json");
    fk_crash(&u, 1);
    cx_sleep_ms(300);
    cr_assert(!it_proc_dead(child), "test bug: with its watchdog dead the child should still run");
    cr_assert(!it_proc_dead(decoy), "test bug: the decoy should still run");

    ag b;
    start_fork_agent(&b, "fk-sweep", u.udir, NULL, 0, &u.a);
    /* The sweep runs before the agent listens: the child is gone by now. */
    cr_assert(it_wait_proc_dead(child, 1000),
              "the restarted agent's sweep ended the leftover child (state %c)", uproc_state(child));
    cr_assert(!it_proc_dead(decoy), "the decoy (same group, no agent marks) is never signalled");
    ag_wait_running(&b, 10000);
    cr_assert(agent_log_has(&b, "left alone"), "the sweep logs the process it left alone");
    cr_assert_eq(uproc_signal_same(decoy, uproc_starttime(decoy), SIGKILL), 0);
    ag_stop(&b);
    fk_free(&u);
}

Test(agent_fork, a_forged_unit_record_never_signals_an_unmarked_process)
{
    char *udir = it_mkdtemp("fk-forge-u");
    /* A process of the test's own (no agent marks), leading its own group. */
    const char *argv[] = {IT_FORK_UNIT, udir, "decoy", NULL};
    pid_t victim = it_start_prog(udir, "victim", argv, NULL);
    cr_assert(it_wait_pid_file(udir, "decoy.pid", 10000) == victim);
    unsigned long long t0 = uproc_starttime(victim);
    cr_assert_neq(t0, 0, "the victim's start time");

    ag a;
    agent_before_start(&a, "fk-forge");
    char rec[200];
    snprintf(rec, sizeof rec, "{\"pgid\": %d, \"pid\": %d, \"starttime\": %llu}\n", (int)victim, (int)victim,
             t0);
    write_unit_record(&a, rec);
    start_fork_agent(&a, "fk-forge", udir, NULL, 1, &a);
    ag_wait_running(&a, 10000);
    cx_sleep_ms(200);
    cr_assert(!it_proc_dead(victim),
              "a forged unit.json naming a process without the marks does not kill it");
    cr_assert(agent_log_has(&a, "left alone") && agent_log_has(&a, "environment marks"),
              "the sweep read the record and logged why it left the process alone");
    ag_stop(&a);
    free(udir);
}

Test(agent_fork, a_clean_stop_ends_the_whole_group)
{
    fk u;
    fk_start(&u, "fk-stop", NULL, 1);
    pid_t child = fk_child(&u);
    char state[512];
    snprintf(state, sizeof state, "%s/unit.json", u.a.state);
    ag_stop(&u.a); /* SIGTERM: the child ignores it, the stop grace ends it */
    cr_assert(it_proc_dead(u.leader));
    cr_assert(it_wait_proc_dead(child, 1000), "a clean stop leaves no process of the unit's group (state %c)",
              uproc_state(child));
    cr_assert_neq(access(state, F_OK), 0, "unit.json is removed once the group is gone");
    fk_free(&u);
}

Test(agent_fork, a_restart_ends_the_old_group_before_the_new_unit_starts)
{
    fk u;
    fk_start(&u, "fk-restart", NULL, 1);
    pid_t child = fk_child(&u);
    char path[700], line[32];
    snprintf(path, sizeof path, "%s/prev.state", u.udir);
    ag_read_line(path, line, sizeof line);
    cr_assert_str_eq(line, "gone", "the first incarnation had no previous child");
    /* SIGTERM to the group: the leader exits, its child ignores it. */
    json_t *f = ag_fault(&u.a, "{\"type\":\"kill\",\"duration_ms\":60000,\"params\":{\"signal\":\"TERM\","
                               "\"restart_after_ms\":0}}");
    json_decref(f);
    fk_wait_restarted(&u, 20000);
    cr_assert(it_proc_dead(u.leader) && it_proc_dead(child), "the old group is gone once the new unit runs");
    pid_t child2 = fk_next_child(u.udir, child);
    ag_read_line(path, line, sizeof line);
    cr_assert(strcmp(line, "gone") == 0 || strcmp(line, "Z") == 0,
              "the new leader found the old child dead when it started (state '%s')", line);
    ag_stop(&u.a);
    cr_assert(it_wait_proc_dead(child2, 1000));
    fk_free(&u);
}

Test(agent_fork, preempt_sigkills_what_outlives_the_leader_at_its_deadline)
{
    fk u;
    fk_start(&u, "fk-preempt", NULL, 1);
    pid_t child = fk_child(&u);
    int64_t t0 = cx_mono_ms();
    json_t *f = ag_fault(&u.a, "{\"type\":\"preempt\",\"duration_ms\":60000,\"params\":{\"grace_ms\":300,"
                               "\"restart_after_ms\":0}}");
    json_decref(f);
    cr_assert(it_wait_proc_dead(u.leader, 3000), "the leader exits on SIGTERM");
    /* preempt's SIGKILL at 300 ms, not the supervisor's 5 s group grace */
    cr_assert(it_wait_proc_dead(child, 3000),
              "the child that ignores SIGTERM is SIGKILLed at the preempt deadline");
    cr_log_info("child gone %lld ms after the preempt", (long long)(cx_mono_ms() - t0));
    fk_wait_restarted(&u, 10000);
    ag_stop(&u.a);
    fk_free(&u);
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
    agent_before_start(&a, "fk-bad");
    for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++) {
        write_unit_record(&a, recs[i][0]);
        start_fork_agent(&a, "fk-bad", udir, NULL, 1, &a);
        ag_wait_running(&a, 10000);
        char *text = agent_log(&a);
        cr_assert_not_null(text, "the agent's log");
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

/* The escaped grandchild of u's unit (fork_unit escape): its pid, after
 * checking that it did leave the leader's process group. Skips the test,
 * with the reason, when the unit is in no cgroup of the agent's (no cgroup
 * writable here: docs/security.md says what then holds). */
static pid_t escaped_child(const fk *u)
{
    pid_t esc = it_wait_pid_file(u->udir, "escaped.pid", 10000);
    cr_assert(esc > 0, "the escaped child wrote its pid");
    stray(esc);
    stray(
        it_wait_pid_file(u->udir, "child.pid", 10000)); /* fini's cleanup kills the agent with its watchdog */
    cr_assert_neq(uproc_pgrp(esc), uproc_pgrp(u->leader), "it left the unit's process group");
    char path[64], *text = NULL, want[200];
    size_t tl = 0;
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)esc);
    snprintf(want, sizeof want, "/chaosloco/%s\n", u->a.id);
    cr_assert_eq(cx_file_read(path, 1 << 16, &text, &tl, NULL, 0), 0);
    int in = strstr(text, want) != NULL;
    free(text);
    if (!in) {
        char *lt = agent_log(&u->a);
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
    fk u;
    fk_start(&u, "fk-esc-stop", "escape", 1);
    pid_t esc = escaped_child(&u);
    ag_stop(&u.a);
    cr_assert(it_proc_dead(u.leader));
    cr_assert(it_wait_proc_dead(esc, 2000), "the setsid child is ended with its unit's cgroup (state %c)",
              uproc_state(esc));
    fk_free(&u);
}

Test(agent_fork, an_escaped_child_dies_with_its_agent)
{
    fk u;
    fk_start(&u, "fk-esc-kill", "escape", 1);
    expect_dies_with_agent(&u, escaped_child(&u), "the setsid child"); /* its watchdog empties the cgroup */
}

Test(agent_fork, the_next_agent_sweeps_an_escaped_child_whose_watchdog_died)
{
    fk u;
    fk_start(&u, "fk-esc-sweep", "escape", 1);
    pid_t esc = escaped_child(&u);
    pid_t child = it_wait_pid_file(u.udir, "child.pid", 10000);
    fk_crash(&u, 1);
    cx_sleep_ms(300);
    cr_assert(!it_proc_dead(esc), "test bug: with the watchdog dead the escaped child should still run");

    ag b;
    start_fork_agent(&b, "fk-esc-sweep", u.udir, NULL, 1, &u.a);
    /* The sweep runs before the agent listens. */
    cr_assert(it_wait_proc_dead(esc, 2000), "the restarted agent's sweep ended the escaped child (state %c)",
              uproc_state(esc));
    ag_wait_running(&b, 10000);
    fk_next_child(u.udir, child);
    cr_assert(
        agent_log_has(&b, "crash sweep: 1 process(es) left the unit's process group but not its cgroup"),
        "the sweep logs what it ended through the cgroup");
    ag_stop(&b);
    fk_free(&u);
}

/* A unit frozen by a pause fault (cgroup freezer) cannot act on the
 * SIGKILL its dying agent's watchdog sends: the watchdog thaws the cgroup
 * first, so the frozen leader and its escaped child die with the agent. */
Test(agent_fork, a_frozen_unit_dies_with_its_agent)
{
    fk u;
    fk_start(&u, "fk-esc-frozen", "escape", 1);
    pid_t esc = escaped_child(&u);
    json_t *f =
        ag_fault(&u.a, "{\"type\":\"pause\",\"duration_ms\":60000,\"params\":{\"method\":\"freezer\"}}");
    cr_assert(f, "a pause through the freezer");
    json_decref(f);
    cx_sleep_ms(300);
    expect_dies_with_agent(&u, esc, "the frozen setsid child");
}
