/* test_supervisor.c - the unit lifecycle: start, running, crash with the
 * never / on-failure policies, an injected exit that restarts after its own
 * delay whatever the policy, pause bookkeeping, and size-capped rotated
 * output capture. Real child processes (sh, sleep); bounded waits. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/supervisor.h"
#include "common/clock.h"
#include "common/err.h"
#include "tmpdir.h"

static char g_dir[256];
static char g_log[300];

static void setup(void)
{
    tmpdir_with_file(g_dir, sizeof g_dir, "/tmp/cx-test-supervisor-XXXXXX", g_log, sizeof g_log, "unit.log");
}

TestSuite(supervisor, .init = setup);

static sup *mk(const char *const *argv, sup_restart policy, int64_t backoff, int64_t log_max)
{
    sup_opts o = {.argv = argv,
                  .log_path = g_log,
                  .log_max_bytes = log_max,
                  .restart = policy,
                  .restart_backoff_ms = backoff,
                  .startup_ms = 50};
    char err[CX_ERRLEN] = "";
    sup *s = sup_new(&o, err, sizeof err);
    cr_assert_not_null(s, "%s", err);
    return s;
}

/* Poll until the state is want or timeout_ms passes. */
static int wait_state(sup *s, sup_state want, int64_t timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    while (cx_mono_ms() < end) {
        sup_poll(s, cx_mono_ms());
        if (sup_get_state(s) == want)
            return 1;
        cx_sleep_ms(5);
    }
    return 0;
}

static int64_t json_int(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

Test(supervisor, start_runs_and_stop_kills_the_group)
{
    const char *argv[] = {"sleep", "1000", NULL};
    sup *s = mk(argv, SUP_RESTART_NEVER, 50, 1 << 20);
    cr_assert_eq(sup_get_state(s), SUP_EXITED);
    char err[CX_ERRLEN];
    cr_assert_eq(sup_start(s, err, sizeof err), 0, "%s", err);
    cr_assert_eq(sup_get_state(s), SUP_STARTING);
    cr_assert(wait_state(s, SUP_RUNNING, 2000));
    pid_t pid;
    int pfd;
    sup_target(s, &pid, &pfd);
    cr_assert_gt(pid, 0);
    cr_assert_geq(pfd, 0);
    close(pfd);
    cr_assert_eq(getpgid(pid), pid, "the unit leads its own process group");
    json_t *st = sup_status_json(s);
    cr_assert_eq(json_int(st, "incarnation"), 1);
    cr_assert_str_eq(json_string_value(json_object_get(st, "state")), "running");
    json_decref(st);

    sup_set_paused(s, 1);
    cr_assert_eq(sup_get_state(s), SUP_PAUSED);
    sup_set_paused(s, 0);
    cr_assert_eq(sup_get_state(s), SUP_RUNNING);

    sup_stop(s, 1000);
    cr_assert_eq(kill(pid, 0), -1, "the unit is gone after stop");
    cr_assert_eq(sup_get_state(s), SUP_KILLED);
    sup_free(s, 100);
}

Test(supervisor, crash_with_policy_never_stays_exited)
{
    const char *argv[] = {"sh", "-c", "exit 3", NULL};
    sup *s = mk(argv, SUP_RESTART_NEVER, 20, 1 << 20);
    cr_assert_eq(sup_start(s, NULL, 0), 0);
    cr_assert(wait_state(s, SUP_EXITED, 3000));
    cx_sleep_ms(100);
    sup_poll(s, cx_mono_ms());
    cr_assert_eq(sup_get_state(s), SUP_EXITED);
    json_t *st = sup_status_json(s);
    cr_assert_eq(json_int(st, "incarnation"), 1);
    cr_assert_eq(json_int(st, "restarts"), 0);
    json_t *le = json_object_get(st, "last_exit");
    cr_assert_eq(json_int(le, "code"), 3);
    cr_assert(json_is_false(json_object_get(le, "expected")));
    json_decref(st);
    sup_free(s, 100);
}

Test(supervisor, crash_with_on_failure_restarts_with_new_incarnations)
{
    const char *argv[] = {"sh", "-c", "sleep 0.1; exit 1", NULL};
    sup *s = mk(argv, SUP_RESTART_ON_FAILURE, 20, 1 << 20);
    cr_assert_eq(sup_start(s, NULL, 0), 0);
    int64_t end = cx_mono_ms() + 8000;
    json_t *st = NULL;
    while (cx_mono_ms() < end) {
        sup_poll(s, cx_mono_ms());
        json_decref(st);
        st = sup_status_json(s);
        if (json_int(st, "incarnation") >= 3)
            break;
        cx_sleep_ms(5);
    }
    cr_assert_geq(json_int(st, "incarnation"), 3, "restarted at least twice");
    cr_assert_geq(json_int(st, "restarts"), 2);
    json_decref(st);
    sup_free(s, 100);
}

Test(supervisor, injected_exit_restarts_after_its_delay_whatever_the_policy)
{
    const char *argv[] = {"sleep", "1000", NULL};
    sup *s = mk(argv, SUP_RESTART_NEVER, 20, 1 << 20);
    cr_assert_eq(sup_start(s, NULL, 0), 0);
    cr_assert(wait_state(s, SUP_RUNNING, 2000));
    pid_t pid;
    int pfd;
    sup_target(s, &pid, &pfd);
    close(pfd);
    sup_expect_exit(s, 300);
    int64_t t0 = cx_mono_ms();
    kill(-pid, SIGKILL);
    /* killed, then restarting (waiting), then alive again after ~300 ms */
    int64_t end = t0 + 5000;
    int saw_killed_or_restarting = 0;
    pid_t pid2 = 0;
    while (cx_mono_ms() < end) {
        sup_poll(s, cx_mono_ms());
        sup_state st = sup_get_state(s);
        if (st == SUP_KILLED || st == SUP_RESTARTING)
            saw_killed_or_restarting = 1;
        int fd2;
        sup_target(s, &pid2, &fd2);
        if (fd2 >= 0)
            close(fd2);
        if (pid2 > 0 && pid2 != pid)
            break;
        cx_sleep_ms(5);
    }
    int64_t took = cx_mono_ms() - t0;
    cr_assert(saw_killed_or_restarting);
    cr_assert(pid2 > 0 && pid2 != pid, "a new unit process started");
    cr_assert_geq(took, 290, "restart honoured the 300 ms delay (took %lld ms)", (long long)took);
    json_t *st = sup_status_json(s);
    cr_assert_eq(json_int(st, "incarnation"), 2);
    cr_assert(json_is_true(json_object_get(json_object_get(st, "last_exit"), "expected")));
    cr_assert_eq(json_int(json_object_get(st, "last_exit"), "signal"), SIGKILL);
    json_decref(st);

    /* restart_after_ms < 0: killed for good. */
    sup_expect_exit(s, -1);
    kill(-pid2, SIGKILL);
    cr_assert(wait_state(s, SUP_KILLED, 3000));
    cx_sleep_ms(100);
    sup_poll(s, cx_mono_ms());
    cr_assert_eq(sup_get_state(s), SUP_KILLED);
    sup_free(s, 100);
}

Test(supervisor, output_is_captured_capped_and_rotated)
{
    /* ~40 KB of output with a 16 KiB cap: unit.log and unit.log.1 both
     * exist and neither exceeds the cap. */
    const char *argv[] = {
        "sh", "-c",
        "i=0; while [ $i -lt 800 ]; do echo \"line $i 0123456789012345678901234567890123456789\"; "
        "i=$((i+1)); done; echo LAST-LINE",
        NULL};
    sup *s = mk(argv, SUP_RESTART_NEVER, 20, 16384);
    cr_assert_eq(sup_start(s, NULL, 0), 0);
    cr_assert(wait_state(s, SUP_EXITED, 10000));
    /* Give the writer thread a moment to drain the pipe. */
    char *tail = NULL;
    int64_t end = cx_mono_ms() + 3000;
    while (cx_mono_ms() < end) {
        free(tail);
        tail = sup_log_tail(s, 3, 1 << 20);
        if (strstr(tail, "LAST-LINE"))
            break;
        cx_sleep_ms(20);
    }
    cr_assert(strstr(tail, "LAST-LINE"), "tail: %s", tail);
    cr_assert(strstr(tail, "line 799"), "tail has the last 3 lines: %s", tail);
    cr_assert_null(strstr(tail, "line 797"), "tail has only 3 lines: %s", tail);
    free(tail);
    struct stat a, b;
    char rot[320];
    snprintf(rot, sizeof rot, "%s.1", g_log);
    cr_assert_eq(stat(g_log, &a), 0);
    cr_assert_eq(stat(rot, &b), 0, "rotated file exists");
    cr_assert_leq(a.st_size, 16384);
    cr_assert_leq(b.st_size, 16384);
    int up;
    int64_t restarts, inc, bytes;
    sup_counters(s, &up, &restarts, &inc, &bytes);
    cr_assert_gt(bytes, 32768, "every byte was counted (%lld)", (long long)bytes);
    sup_free(s, 100);
}

/* ---- the cleanup hook ---- */

static pid_t g_cleanup_pids[16];
static int g_ncleanup;

static void record_cleanup(void *ctx, pid_t dead_pid)
{
    (void)ctx;
    if (g_ncleanup < 16)
        g_cleanup_pids[g_ncleanup++] = dead_pid;
}

Test(supervisor, cleanup_hook_runs_after_each_exit_and_before_each_spawn)
{
    g_ncleanup = 0;
    const char *argv[] = {"sleep", "1000", NULL};
    sup_opts o = {.argv = argv,
                  .log_path = g_log,
                  .log_max_bytes = 1 << 20,
                  .restart = SUP_RESTART_NEVER,
                  .restart_backoff_ms = 20,
                  .startup_ms = 50,
                  .on_cleanup = record_cleanup};
    char err[CX_ERRLEN] = "";
    sup *s = sup_new(&o, err, sizeof err);
    cr_assert_not_null(s, "%s", err);
    cr_assert_eq(g_ncleanup, 0, "nothing before the first start");
    cr_assert_eq(sup_start(s, err, sizeof err), 0, "%s", err);
    cr_assert_eq(g_ncleanup, 1);
    cr_assert_eq(g_cleanup_pids[0], 0, "before the spawn: no dead pid");
    pid_t pid;
    int pfd;
    sup_target(s, &pid, &pfd);
    close(pfd);

    /* An injected exit with a restart: after the reap (the dead pid), then
     * before the respawn. */
    sup_expect_exit(s, 50);
    kill(-pid, SIGKILL);
    int64_t end = cx_mono_ms() + 5000;
    pid_t pid2 = 0;
    while (cx_mono_ms() < end && (pid2 == 0 || pid2 == pid)) {
        sup_poll(s, cx_mono_ms());
        int fd2;
        sup_target(s, &pid2, &fd2);
        if (fd2 >= 0)
            close(fd2);
        cx_sleep_ms(5);
    }
    cr_assert(pid2 > 0 && pid2 != pid, "restarted");
    cr_assert_eq(g_ncleanup, 3, "start, exit, respawn (%d calls)", g_ncleanup);
    cr_assert_eq(g_cleanup_pids[1], pid, "after the exit: the reaped pid");
    cr_assert_eq(g_cleanup_pids[2], 0, "before the respawn");

    /* Stop (agent shutdown) reaps too. */
    sup_stop(s, 1000);
    cr_assert_eq(g_ncleanup, 4);
    cr_assert_eq(g_cleanup_pids[3], pid2);
    sup_free(s, 100);
    cr_assert_eq(g_ncleanup, 4, "free after stop: nothing more to clean");
}
