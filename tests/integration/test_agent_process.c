/* test_agent_process.c - every process-level fault kind in injector_table,
 * applied through a real `chaosloco agent` supervising `sleep 1000`, checked
 * from outside (/proc/PID/stat, cgroup files, hook files) and reverted by
 * expiry and by DELETE. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent_it.h"

static void fini(void)
{
    ag_cleanup_all();
}

TestSuite(agent_process, .fini = fini, .timeout = 60);

/* ---- pause ---- */

Test(agent_process, pause_freezer_expiry_and_delete)
{
    ag a;
    ag_start(&a, "pause", NULL, NULL, NULL);
    pid_t pid = ag_wait_running(&a, 5000);
    json_t *f = ag_fault(&a, "{\"type\":\"pause\",\"duration_ms\":400}");
    char id[32], path[600], line[64];
    snprintf(id, sizeof id, "%s", js(f, "id"));
    if (ag_evidence_line(f, "freezer", "freezer.state", path, sizeof path, line, sizeof line)) {
        if (line[0]) { /* v1 */
            cr_assert_str_eq(line, "FROZEN", "freezer.state after apply: %s", line);
        }
        json_t *s = ag_status(&a);
        cr_assert_str_eq(js(json_object_get(s, "unit"), "state"), "paused");
        json_decref(s);
        cr_assert(ag_wait_fault(&a, id, "expired", 3000), "pause did not expire");
        ag_read_line(path, line, sizeof line);
        if (line[0])
            cr_assert_str_eq(line, "THAWED");
    } else {
        cr_assert_eq(uproc_state(pid), 'T');
        cr_assert(ag_wait_fault(&a, id, "expired", 3000));
    }
    cr_assert(ag_wait_proc(pid, "RS", 2000), "unit runs again after expiry (state %c)", uproc_state(pid));
    json_decref(f);

    /* Same kind, reverted by DELETE long before its expiry. */
    f = ag_fault(&a, "{\"type\":\"pause\",\"duration_ms\":60000,\"params\":{\"method\":\"signal\"}}");
    snprintf(id, sizeof id, "%s", js(f, "id"));
    cr_assert_str_eq(js(json_object_get(f, "evidence"), "method"), "signal");
    cr_assert(ag_wait_proc(pid, "T", 1000), "SIGSTOPped unit shows T (state %c)", uproc_state(pid));
    json_decref(f);
    ag_delete(&a, id);
    cr_assert(ag_wait_proc(pid, "RS", 1000), "unit continues after DELETE (state %c)", uproc_state(pid));
    ag_stop(&a);
}

/* ---- kill and preempt ---- */

Test(agent_process, kill_restarts_after_its_delay)
{
    ag a;
    ag_start(&a, "kill", NULL, NULL, NULL);
    pid_t pid = ag_wait_running(&a, 5000);
    cr_assert_eq(ag_incarnation(&a), 1);
    int64_t t0 = cx_mono_ms();
    json_t *f = ag_fault(&a, "{\"type\":\"kill\",\"duration_ms\":1500,\"params\":{\"signal\":\"KILL\","
                             "\"restart_after_ms\":300}}");
    char id[32];
    snprintf(id, sizeof id, "%s", js(f, "id"));
    cr_assert_str_eq(js(json_object_get(f, "evidence"), "signal"), "KILL");
    json_decref(f);
    cr_assert(ag_wait_gone(pid, 2000), "old unit reaped");
    pid_t pid2 = 0;
    while (cx_mono_ms() - t0 < 5000) {
        pid2 = ag_unit_pid(&a);
        if (pid2 > 0 && pid2 != pid)
            break;
        cx_sleep_ms(10);
    }
    cr_assert(pid2 > 0 && pid2 != pid, "a new unit started");
    cr_assert_geq(cx_mono_ms() - t0, 290, "restart waited restart_after_ms");
    cr_assert_eq(ag_incarnation(&a), 2);
    cr_assert(ag_wait_proc(pid2, "RS", 2000));
    json_t *s = ag_status(&a);
    json_t *u = json_object_get(s, "unit");
    cr_assert_eq(json_integer_value(json_object_get(u, "restarts")), 1);
    cr_assert(json_is_true(json_object_get(json_object_get(u, "last_exit"), "expected")));
    json_decref(s);
    cr_assert(ag_wait_fault(&a, id, "expired", 3000), "kill fault expires after its duration");

    /* preempt: TERM, grace, restart; reverted by DELETE while active. */
    f = ag_fault(&a, "{\"type\":\"preempt\",\"duration_ms\":30000,\"params\":{\"grace_ms\":200,"
                     "\"restart_after_ms\":100}}");
    snprintf(id, sizeof id, "%s", js(f, "id"));
    json_decref(f);
    pid_t pid3 = 0;
    t0 = cx_mono_ms();
    while (cx_mono_ms() - t0 < 5000) {
        pid3 = ag_unit_pid(&a);
        if (pid3 > 0 && pid3 != pid2)
            break;
        cx_sleep_ms(10);
    }
    cr_assert(pid3 > 0 && pid3 != pid2, "preempted unit restarted");
    cr_assert_eq(uproc_state(pid2), 0, "preempted process is gone");
    ag_delete(&a, id);
    ag_stop(&a);
    cr_assert_eq(uproc_state(pid3), 0, "agent shutdown stops the unit");
}

/* ---- straggle ---- */

Test(agent_process, straggle_duty_cycles_and_stops_on_delete)
{
    ag a;
    ag_start(&a, "straggle", NULL, NULL, NULL);
    pid_t pid = ag_wait_running(&a, 5000);
    json_t *f = ag_fault(&a, "{\"type\":\"straggle\",\"duration_ms\":20000,\"params\":{\"period_ms\":100,"
                             "\"stopped_ms\":50}}");
    char id[32];
    snprintf(id, sizeof id, "%s", js(f, "id"));
    json_decref(f);
    int stopped = 0, running = 0;
    for (int i = 0; i < 300; i++) {
        char s = uproc_state(pid);
        stopped += s == 'T';
        running += s == 'S' || s == 'R';
        cx_sleep_ms(3);
    }
    cr_assert_gt(stopped, 20, "stopped part of the time (%d/300)", stopped);
    cr_assert_gt(running, 20, "running part of the time (%d/300)", running);
    ag_delete(&a, id);
    cr_assert(ag_wait_proc(pid, "RS", 1000));
    for (int i = 0; i < 60; i++) {
        cr_assert_neq(uproc_state(pid), 'T', "stopped after DELETE");
        cx_sleep_ms(5);
    }
    ag_stop(&a);
}

/* ---- cpu and memory (cgroup files) ---- */

Test(agent_process, cpu_and_memory_limits_in_cgroup_files)
{
    ag a;
    ag_start(&a, "cgroup", NULL, NULL, NULL);
    ag_wait_running(&a, 5000);
    json_t *f = ag_fault(&a, "{\"type\":\"cpu\",\"duration_ms\":400,\"params\":{\"cpus\":0.5}}");
    char id[32], path[600], line[64];
    snprintf(id, sizeof id, "%s", js(f, "id"));
    if (ag_evidence_line(f, "cgroup", "cpu.cfs_quota_us", path, sizeof path, line, sizeof line)) {
        if (line[0]) {
            cr_assert_str_eq(line, "50000", "quota after apply: %s", line);
            cr_assert(ag_wait_fault(&a, id, "expired", 3000));
            ag_read_line(path, line, sizeof line);
            cr_assert_str_eq(line, "-1", "quota after expiry: %s", line);
        } else {
            cr_assert(ag_wait_fault(&a, id, "expired", 3000));
        }
    } else {
        cr_assert(ag_wait_fault(&a, id, "expired", 3000));
    }
    json_decref(f);

    int st = 0;
    json_t *r =
        ag_call(&a, "POST", "/v1/faults",
                "{\"type\":\"memory\",\"duration_ms\":30000,\"params\":{\"limit_bytes\":268435456}}", 1, &st);
    if (st == 201) {
        snprintf(id, sizeof id, "%s", js(r, "id"));
        snprintf(path, sizeof path, "%s/memory.limit_in_bytes", js(json_object_get(r, "evidence"), "cgroup"));
        ag_read_line(path, line, sizeof line);
        if (line[0])
            cr_assert_str_eq(line, "268435456");
        ag_delete(&a, id);
        ag_read_line(path, line, sizeof line);
        if (line[0])
            cr_assert_str_neq(line, "268435456", "limit removed on DELETE");
    } else {
        cr_assert_eq(st, 501, "memory without a cgroup answers 501 (got %d)", st);
    }
    json_decref(r);
    ag_stop(&a);
}

/* ---- in-band and environment faults: clock, nan, disk ---- */

Test(agent_process, clock_nan_disk_control_files)
{
    ag a;
    ag_start(&a, "files", NULL, NULL, NULL);
    ag_wait_running(&a, 5000);
    json_t *s = ag_status(&a);
    json_t *hooks = json_object_get(s, "hooks");
    char ft[600] = "", df[600] = "", hd[600] = "";
    snprintf(ft, sizeof ft, "%s", js(hooks, "faketime_file"));
    snprintf(df, sizeof df, "%s", js(hooks, "diskfault_file"));
    snprintf(hd, sizeof hd, "%s", js(hooks, "hook_dir"));
    json_decref(s);
    char line[256], id[32];

    if (ft[0]) {
        ag_read_line(ft, line, sizeof line);
        cr_assert_str_eq(line, "+0", "neutral faketime file at start");
        json_t *f = ag_fault(&a, "{\"type\":\"clock\",\"duration_ms\":300,\"params\":{\"offset_s\":3600}}");
        snprintf(id, sizeof id, "%s", js(f, "id"));
        json_decref(f);
        ag_read_line(ft, line, sizeof line);
        cr_assert_str_neq(line, "+0", "faketime file skewed: %s", line);
        cr_assert(ag_wait_fault(&a, id, "expired", 3000));
        ag_read_line(ft, line, sizeof line);
        cr_assert_str_eq(line, "+0", "faketime file reset on expiry: %s", line);
    }

    char nanf[700];
    snprintf(nanf, sizeof nanf, "%s/nan", hd);
    json_t *f = ag_fault(&a, "{\"type\":\"nan\",\"duration_ms\":30000,\"params\":{\"count\":3}}");
    snprintf(id, sizeof id, "%s", js(f, "id"));
    json_decref(f);
    ag_read_line(nanf, line, sizeof line);
    cr_assert_str_eq(line, "3");
    ag_delete(&a, id);
    ag_read_line(nanf, line, sizeof line);
    cr_assert(line[0] == '\0' || strcmp(line, "0") == 0, "nan hook cleared on DELETE: %s", line);

    if (df[0]) {
        ag_read_line(df, line, sizeof line);
        cr_assert_str_eq(line, "off");
        f = ag_fault(&a, "{\"type\":\"disk\",\"duration_ms\":30000,\"params\":{\"errno\":\"ENOSPC\"}}");
        snprintf(id, sizeof id, "%s", js(f, "id"));
        json_decref(f);
        ag_read_line(df, line, sizeof line);
        cr_assert(strstr(line, "ENOSPC"), "disk control file: %s", line);
        ag_delete(&a, id);
        ag_read_line(df, line, sizeof line);
        cr_assert_str_eq(line, "off");
    }
    ag_stop(&a);
}

/* ---- libfaketime's shared memory of a killed unit ---- */

static int shm_files_of(pid_t pid)
{
    char path[128];
    int n = 0;
    snprintf(path, sizeof path, "/dev/shm/faketime_shm_%d", (int)pid);
    n += access(path, F_OK) == 0;
    snprintf(path, sizeof path, "/dev/shm/sem.faketime_sem_%d", (int)pid);
    n += access(path, F_OK) == 0;
    return n;
}

static int wait_shm_files(pid_t pid, int want, long timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    while (cx_mono_ms() < end) {
        if (shm_files_of(pid) == want)
            return 1;
        cx_sleep_ms(10);
    }
    return shm_files_of(pid) == want;
}

Test(agent_process, killed_faked_unit_leaves_no_faketime_shm)
{
    ag a;
    ag_start(&a, "shm", NULL, NULL, NULL);
    pid_t pid = ag_wait_running(&a, 5000);
    json_t *s = ag_status(&a);
    int faked = json_is_string(json_object_get(json_object_get(s, "hooks"), "faketime_lib"));
    json_decref(s);
    if (!faked) {
        ag_stop(&a);
        cr_skip_test(
            "libfaketime not installed (no /usr/lib/*/faketime/libfaketimeMT.so.1): nothing to clean");
    }
    /* libfaketime 0.9.x creates both files when the unit loads it. */
    if (!wait_shm_files(pid, 2, 2000)) {
        ag_stop(&a);
        cr_skip_test("this libfaketime creates no /dev/shm/faketime_shm_<pid> (%d file(s) found)",
                     shm_files_of(pid));
    }

    /* SIGKILL: libfaketime's destructor never runs, the agent cleans up at
     * the exit (and before the restart); the new unit's files stay. */
    json_decref(ag_fault(&a, "{\"type\":\"kill\",\"duration_ms\":30000,\"params\":{\"signal\":\"KILL\","
                             "\"restart_after_ms\":100}}"));
    cr_assert(ag_wait_gone(pid, 2000), "old unit reaped");
    cr_assert(wait_shm_files(pid, 0, 2000), "the killed unit's shm files are gone (%d left)",
              shm_files_of(pid));
    pid_t pid2 = 0;
    int64_t end = cx_mono_ms() + 5000;
    while (cx_mono_ms() < end && (pid2 <= 0 || pid2 == pid)) {
        pid2 = ag_unit_pid(&a);
        cx_sleep_ms(10);
    }
    cr_assert(pid2 > 0 && pid2 != pid, "restarted");
    cr_assert(wait_shm_files(pid2, 2, 2000), "the live unit keeps its files (%d)", shm_files_of(pid2));

    /* Shutdown: SIGTERM kills `sleep` without libfaketime's destructor
     * either; the agent cleans after the reap. */
    ag_stop(&a);
    cr_assert_eq(uproc_state(pid2), 0);
    cr_assert_eq(shm_files_of(pid2), 0, "no shm files left after the agent stopped");
}
