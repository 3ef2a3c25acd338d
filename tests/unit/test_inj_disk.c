/* test_inj_disk.c - the disk fault: params, the control line, and the
 * LD_PRELOAD shim against a tiny child program.
 *
 * The child is this test executable itself: re-executed with CX_DF_CHILD
 * set, the constructor below does its file operations and _exits before
 * Criterion starts. */
#include "inj_test.h"


extern const injector inj_disk;

#define SHIM CHAOSLOCO_BUILD "/injectors/libchaosloco_diskfault.so"

/* ---- the child ---- */

static void df_child_report(const char *line)
{
    (void)!write(1, line, strlen(line)); /* fd 1 is never failed by the shim */
}

__attribute__((constructor)) static void df_child(void)
{
    const char *dir = getenv("CX_DF_CHILD");
    if (!dir)
        return;
    const char *mode = getenv("CX_DF_MODE");
    char path[512], moved[600], line[256];
    if (mode && strcmp(mode, "count") == 0) {
        snprintf(path, sizeof path, "%s/ckpt_count.bin", dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fails = 0, other = 0;
        for (int i = 0; i < 400; i++) {
            if (write(fd, "x", 1) < 0) {
                if (errno == EIO)
                    fails++;
                else
                    other++;
            }
        }
        close(fd);
        snprintf(line, sizeof line, "fails=%d other=%d\n", fails, other);
        df_child_report(line);
        _exit(0);
    }
    static const char *const names[] = {"ckpt_a.bin", "other_b.bin"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(moved, sizeof moved, "%s.moved", path);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int w = write(fd, "hello", 5) < 0 ? errno : 0;
        int pw = pwrite(fd, "hi", 2, 0) < 0 ? errno : 0;
        int f = fsync(fd) < 0 ? errno : 0;
        int fd2 = fdatasync(fd) < 0 ? errno : 0;
        close(fd);
        int r = rename(path, moved) < 0 ? errno : 0;
        snprintf(line, sizeof line, "%s write=%d pwrite=%d fsync=%d fdatasync=%d rename=%d\n", names[i], w,
                 pw, f, fd2, r);
        df_child_report(line);
    }
    _exit(0);
}

/* ---- the parent ---- */

/* Run the child with the shim preloaded; its output into out. */
static void df_run(const char *dir, const char *ctl, const char *mode, char *out, size_t len)
{
    cr_assert_eq(access(SHIM, R_OK), 0, "shim not built: %s (build target chaosloco_diskfault)", SHIM);
    char exe[512], e1[600], e2[600], e3[64], outpath[600];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert(n > 0);
    exe[n] = '\0';
    snprintf(e1, sizeof e1, "CHAOSLOCO_DISKFAULT_FILE=%s", ctl);
    snprintf(e2, sizeof e2, "CX_DF_CHILD=%s", dir);
    snprintf(e3, sizeof e3, "CX_DF_MODE=%s", mode);
    const char *env[] = {
        "LD_PRELOAD=" SHIM, e1, e2, e3, "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0", NULL};
    const char *argv[] = {exe, NULL};
    snprintf(outpath, sizeof outpath, "%s/child.out", dir);
    int fd = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0);
    cx_spawn_opts o = {.new_pgrp = 1, .stdout_fd = fd, .stderr_fd = -1, .extra_env = env};
    pid_t pid;
    char err[CX_ERRLEN] = "";
    cr_assert_eq(cx_spawn(argv, &o, &pid, err, sizeof err), 0, "spawn: %s", err);
    close(fd);
    int st = 0;
    cr_assert_eq(cx_wait_timeout(pid, 20000, &st), 0, "child hung");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    injt_read(dir, "child.out", out, len);
}

TestSuite(inj_disk);

Test(inj_disk, params_are_strict)
{
    injt_bad(&inj_disk, "{\"errno\":\"EBADF\"}", "errno");
    injt_bad(&inj_disk, "{\"errno\":5}", "errno");
    injt_bad(&inj_disk, "{\"ops\":[]}", "ops");
    injt_bad(&inj_disk, "{\"ops\":\"write\"}", "ops");
    injt_bad(&inj_disk, "{\"ops\":[\"write\",\"read\"]}", "ops[1]");
    injt_bad(&inj_disk, "{\"ops\":[\"fsync\",\"fsync\"]}", "ops[1]");
    injt_bad(&inj_disk, "{\"probability\":1.5}", "probability");
    injt_bad(&inj_disk, "{\"probability\":-0.1}", "probability");
    injt_bad(&inj_disk, "{\"path\":\"/a b\"}", "path");
    injt_bad(&inj_disk, "{\"path\":\"\"}", "path");
    injt_bad(&inj_disk, "{\"paths\":\"*\"}", "paths");
}

/* The fault tests' temp dir, its control file <dir>/diskfault, and the
 * fault under test (df_prepare) on a unit with no process that uses that
 * control file; df_teardown frees them all. */
static char *dir;
static char ctl[512];
static injt_run r;

static void df_setup(void)
{
    dir = injt_tmpdir("disk");
    snprintf(ctl, sizeof ctl, "%s/diskfault", dir);
    r.inj = NULL;
}

static void df_prepare(const char *json, uint64_t seed)
{
    inj_target t = injt_target("u", 0, -1, dir, NULL);
    t.diskfault_file = ctl;
    injt_run_init(&r, &inj_disk, json, seed, t);
}

static void df_teardown(void)
{
    if (r.inj)
        injt_run_cleanup(&r);
    injt_rmtree(dir);
    free(dir);
}

Test(inj_disk, writes_the_control_line_and_off, .init = df_setup, .fini = df_teardown)
{
    char buf[512];
    injt_write(dir, "diskfault", "off\n");
    df_prepare("{\"errno\":\"ENOSPC\",\"ops\":[\"rename\",\"write\"],\"path\":\"*/ckpt*\","
               "\"probability\":0.25}",
               42);
    injt_apply_ok(&r);
    cr_assert_str_eq(injt_read(dir, "diskfault", buf, sizeof buf),
                     "errno=ENOSPC ops=write,rename path=*/ckpt* probability=0.25 seed=42\n");
    injt_check_undo(&r, dir, "diskfault", "errno=EIO ops=write path=* probability=1 seed=1\n", "off\n");
    r.t.diskfault_file = NULL;
    cr_assert_eq(injt_apply(&r), CX_ENOTSUP);
}

Test(inj_disk, shim_fails_only_matching_paths_and_ops, .init = df_setup, .fini = df_teardown)
{
    char out[1024];
    df_prepare("{\"errno\":\"ENOSPC\",\"path\":\"*/ckpt_*\"}", 9);
    injt_apply_ok(&r);
    df_run(dir, ctl, "ops", out, sizeof out);
    char want[512];
    snprintf(want, sizeof want,
             "ckpt_a.bin write=%d pwrite=%d fsync=%d fdatasync=%d rename=%d\n"
             "other_b.bin write=0 pwrite=0 fsync=0 fdatasync=0 rename=0\n",
             ENOSPC, ENOSPC, ENOSPC, ENOSPC, ENOSPC);
    cr_assert_str_eq(out, want);

    /* only fsync, EIO */
    injt_run_reprepare(&r, "{\"ops\":[\"fsync\"],\"path\":\"*/ckpt_*\"}", 9);
    injt_apply_ok(&r);
    df_run(dir, ctl, "ops", out, sizeof out);
    snprintf(want, sizeof want,
             "ckpt_a.bin write=0 pwrite=0 fsync=%d fdatasync=%d rename=0\n"
             "other_b.bin write=0 pwrite=0 fsync=0 fdatasync=0 rename=0\n",
             EIO, EIO);
    cr_assert_str_eq(out, want);

    /* reverted: nothing fails */
    cr_assert_eq(injt_revert(&r), 0);
    df_run(dir, ctl, "ops", out, sizeof out);
    cr_assert_str_eq(out, "ckpt_a.bin write=0 pwrite=0 fsync=0 fdatasync=0 rename=0\n"
                          "other_b.bin write=0 pwrite=0 fsync=0 fdatasync=0 rename=0\n");
}

Test(inj_disk, shim_probability, .init = df_setup, .fini = df_teardown)
{
    char out[256];
    df_prepare("{\"probability\":0,\"ops\":[\"write\"]}", 5);
    injt_apply_ok(&r);
    df_run(dir, ctl, "count", out, sizeof out);
    cr_assert_str_eq(out, "fails=0 other=0\n", "probability 0 failed calls: %s", out);

    injt_run_reprepare(&r, "{\"probability\":0.5,\"ops\":[\"write\"]}", 5);
    injt_apply_ok(&r);
    df_run(dir, ctl, "count", out, sizeof out);
    int fails = -1, other = -1;
    cr_assert_eq(sscanf(out, "fails=%d other=%d", &fails, &other), 2, "%s", out);
    cr_assert_eq(other, 0);
    /* 400 Bernoulli(0.5) draws: 200 +- 60 is beyond 6 sigma */
    cr_assert(fails > 140 && fails < 260, "fails %d of 400 at p=0.5", fails);
    /* same seed, same line: same failures */
    char out2[256];
    df_run(dir, ctl, "count", out2, sizeof out2);
    cr_assert_str_eq(out, out2);

    /* a control line that does not parse fails nothing */
    injt_write(dir, "diskfault", "errno=EIO ops=write\n");
    df_run(dir, ctl, "count", out, sizeof out);
    cr_assert_str_eq(out, "fails=0 other=0\n");
}
