/* test_inj_clock.c - the clock fault: params, the timestamp-file line, a
 * real libfaketime'd `date` when installed, and stale shm cleanup. */
#include "inj_test.h"

#include <sys/time.h>

#include "injectors/clock.h"

extern const injector inj_clock;

#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"

TestSuite(inj_clock);

Test(inj_clock, params_are_strict)
{
    injt_bad(&inj_clock, "{}", "offset_s");
    injt_bad(&inj_clock, "{\"offset_s\":\"1h\"}", "offset_s");
    injt_bad(&inj_clock, "{\"offset_s\":1e12}", "offset_s");
    injt_bad(&inj_clock, "{\"offset_s\":10,\"rate\":0}", "rate");
    injt_bad(&inj_clock, "{\"offset_s\":10,\"rate\":-1}", "rate");
    injt_bad(&inj_clock, "{\"offset_s\":10,\"skew\":1}", "skew");
    injt_good(&inj_clock, "{\"offset_s\":-5}", NULL);
}

static void clock_line(const char *params, const char *want)
{
    char *dir = injt_tmpdir("clock");
    char file[512], buf[128];
    snprintf(file, sizeof file, "%s/faketime", dir);
    injt_write(dir, "faketime", "+0\n");
    inj_target t = injt_target("u", 0, -1, dir, NULL);
    t.faketime_file = file;
    injt_run r;
    injt_run_init(&r, &inj_clock, params, 1, t);
    injt_apply_ok(&r);
    cr_assert_str_eq(injt_read(dir, "faketime", buf, sizeof buf), want);
    cr_assert_eq(strncmp(json_string_value(json_object_get(r.ev, "line")), want, strlen(want) - 1), 0);
    injt_check_undo(&r, dir, "faketime", want, "+0\n");
    injt_run_cleanup(&r);
    injt_rmtree(dir);
    free(dir);
}

Test(inj_clock, writes_libfaketime_syntax)
{
    clock_line("{\"offset_s\":3600}", "+3600.000\n");
    clock_line("{\"offset_s\":-30.5,\"rate\":1.5}", "-30.500 x1.5\n");
    clock_line("{\"offset_s\":0,\"rate\":2}", "+0.000 x2\n");
}

Test(inj_clock, no_faketime_file_is_not_supported)
{
    injt_run r;
    injt_run_init(&r, &inj_clock, "{\"offset_s\":60}", 1, injt_target("u", 0, -1, "/tmp", NULL));
    cr_assert_eq(injt_apply(&r), CX_ENOTSUP);
    cr_assert_eq(injt_revert(&r), 0);
    injt_run_cleanup(&r);
}

/* End to end: `date +%s` under libfaketime with the file we wrote. */
Test(inj_clock, real_libfaketime_sees_the_offset)
{
    if (access(FAKETIME_LIB, R_OK) != 0)
        cr_skip_test("libfaketime not installed (" FAKETIME_LIB ")");
    char *dir = injt_tmpdir("clock-real");
    char file[512], env1[600], out[600], buf[128];
    snprintf(file, sizeof file, "%s/faketime", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    injt_write(dir, "faketime", "+0\n");
    inj_target t = injt_target("u", 0, -1, dir, NULL);
    t.faketime_file = file;
    injt_run r;
    injt_run_init(&r, &inj_clock, "{\"offset_s\":-7200}", 1, t);
    injt_apply_ok(&r);
    snprintf(env1, sizeof env1, "FAKETIME_TIMESTAMP_FILE=%s", file);
    const char *env[] = {"LD_PRELOAD=" FAKETIME_LIB,
                         env1,
                         "FAKETIME_NO_CACHE=1",
                         "DONT_FAKE_MONOTONIC=1",
                         "ASAN_OPTIONS=verify_asan_link_order=0",
                         NULL};
    const char *argv[] = {"date", "+%s", NULL};
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0);
    cx_spawn_opts o = {.new_pgrp = 1, .stdout_fd = fd, .stderr_fd = -1, .extra_env = env};
    pid_t pid;
    cr_assert_eq(cx_spawn(argv, &o, &pid, r.err, sizeof r.err), 0, "spawn: %s", r.err);
    close(fd);
    int st = 0;
    cr_assert_eq(cx_wait_timeout(pid, 5000, &st), 0);
    struct timeval now;
    gettimeofday(&now, NULL);
    long faked = strtol(injt_read(dir, "out", buf, sizeof buf), NULL, 10);
    long skew = faked - (long)now.tv_sec;
    cr_assert(skew > -7210 && skew < -7190, "date under libfaketime is %ld s off, want -7200 +- 10", skew);
    cr_assert_eq(injt_revert(&r), 0);
    injt_run_cleanup(&r);
    injt_rmtree(dir);
    free(dir);
}

Test(inj_clock, clean_shm_removes_only_dead_owners)
{
    char *dir = injt_tmpdir("shm");
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    char name[64];
    snprintf(name, sizeof name, "faketime_shm_%d", (int)dead);
    injt_write(dir, name, "x");
    snprintf(name, sizeof name, "sem.faketime_sem_%d", (int)dead);
    injt_write(dir, name, "x");
    snprintf(name, sizeof name, "faketime_shm_%d", (int)getpid());
    injt_write(dir, name, "x");
    injt_write(dir, "faketime_shm_abc", "x");
    injt_write(dir, "unrelated", "x");
    int removed = -1;
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_clock_clean_shm(dir, &removed, err, sizeof err), 0, "%s", err);
    cr_assert_eq(removed, 2);
    char path[600];
    snprintf(path, sizeof path, "%s/faketime_shm_%d", dir, (int)getpid());
    cr_assert_eq(access(path, F_OK), 0, "a live owner's file was removed");
    snprintf(path, sizeof path, "%s/faketime_shm_%d", dir, (int)dead);
    cr_assert_neq(access(path, F_OK), 0, "a dead owner's file was kept");
    snprintf(path, sizeof path, "%s/unrelated", dir);
    cr_assert_eq(access(path, F_OK), 0);
    cr_assert_eq(inj_clock_clean_shm("/nonexistent-cx", NULL, err, sizeof err), CX_ESYS);
    injt_rmtree(dir);
    free(dir);
}
