/* test_cgroup.c - the cgroup module against fake v1/v2 trees and, as root
 * with writable hierarchies, against the real one. */
#include "inj_test.h"

#include "injectors/cgroup.h"
#include "injectors/unit_proc.h"

TestSuite(cgroup);

Test(cgroup, bad_unit_ids_are_refused)
{
    cg_set *s = NULL;
    char err[CX_ERRLEN] = "";
    static const char *const bad[] = {
        "",
        ".",
        "..",
        "a/b",
        "a b",
        "x\n",
        "0123456789012345678901234567890123456789012345678901234567890123456789"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(cg_set_open("/tmp/cx-nonexistent", bad[i], &s, err, sizeof err), CX_EINVAL, "'%s'",
                     bad[i]);
        cr_assert_null(s);
    }
}

Test(cgroup, empty_root_has_nothing_available)
{
    char *root = injt_tmpdir("cg-empty");
    cg_set *s = NULL;
    char err[CX_ERRLEN] = "";
    cr_assert_eq(cg_set_open(root, "u1", &s, err, sizeof err), 0, "%s", err);
    for (int c = 0; c < CG_NCTRL; c++) {
        cr_assert_eq(cg_set_available(s, (cg_ctrl)c), 0);
        cr_assert(strlen(cg_set_why(s, (cg_ctrl)c)) > 0);
        cr_assert_str_eq(cg_set_dir(s, (cg_ctrl)c), "");
    }
    cr_assert_eq(cg_set_freeze(s, 1, err, sizeof err), CX_ENOTSUP);
    cr_assert_eq(cg_set_cpu_quota(s, 1, NULL, 0, err, sizeof err), CX_ENOTSUP);
    cr_assert_eq(cg_set_memory_limit(s, 1 << 24, NULL, 0, err, sizeof err), CX_ENOTSUP);
    cr_assert_eq(cg_set_remove(s, err, sizeof err), 0);
    cg_set_free(s);
    cg_set_free(NULL);
    injt_rmtree(root);
    free(root);
}

Test(cgroup, fake_v1_tree_via_env)
{
    char *root = injt_tmpdir("cg-v1");
    char fz[512], cpu[512], mem[512], buf[128];
    snprintf(fz, sizeof fz, "%s/freezer/chaosloco/u1", root);
    snprintf(cpu, sizeof cpu, "%s/cpu/chaosloco/u1", root);
    snprintf(mem, sizeof mem, "%s/memory/chaosloco/u1", root);
    injt_mkdirs(fz);
    injt_mkdirs(cpu);
    injt_mkdirs(mem);
    injt_write(fz, "freezer.state", "THAWED\n");
    injt_write(fz, "cgroup.procs", "");
    injt_write(cpu, "cpu.cfs_quota_us", "-1\n");
    injt_write(cpu, "cpu.cfs_period_us", "100000\n");
    injt_write(mem, "memory.limit_in_bytes", "9223372036854771712\n");
    injt_write(mem, "memory.usage_in_bytes", "4096\n");
    setenv("CHAOSLOCO_CGROUP_ROOT", root, 1);
    cg_set *s = NULL;
    char err[CX_ERRLEN] = "";
    cr_assert_eq(cg_set_open(NULL, "u1", &s, err, sizeof err), 0, "%s", err);
    unsetenv("CHAOSLOCO_CGROUP_ROOT");
    cr_assert_str_eq(cg_set_root(s), root);
    for (int c = 0; c < CG_NCTRL; c++) {
        cr_assert(cg_set_available(s, (cg_ctrl)c), "ctrl %d: %s", c, cg_set_why(s, (cg_ctrl)c));
        cr_assert_eq(cg_set_version(s, (cg_ctrl)c), 1);
    }
    cr_assert_str_eq(cg_set_dir(s, CG_FREEZER), fz);

    int frozen = -1;
    cr_assert_eq(cg_set_freeze(s, 1, err, sizeof err), 0, "%s", err);
    cr_assert_eq(cg_set_freezer_state(s, buf, sizeof buf, &frozen, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(buf, "FROZEN");
    cr_assert_eq(frozen, 1);
    cr_assert_eq(cg_set_freeze(s, 0, err, sizeof err), 0);
    cr_assert_str_eq(injt_read(fz, "freezer.state", buf, sizeof buf), "THAWED");

    char contents[128];
    cr_assert_eq(cg_set_cpu_quota(s, 1.5, contents, sizeof contents, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(contents, "cfs_quota_us=150000 cfs_period_us=100000");
    cr_assert_eq(cg_set_cpu_quota(s, 0.001, contents, sizeof contents, err, sizeof err), 0);
    cr_assert_str_eq(contents, "cfs_quota_us=1000 cfs_period_us=100000", "kernel minimum 1 ms");
    cr_assert_eq(cg_set_cpu_quota(s, 0, contents, sizeof contents, err, sizeof err), 0);
    cr_assert_str_eq(contents, "cfs_quota_us=-1 cfs_period_us=100000");

    cr_assert_eq(cg_set_memory_limit(s, 8 << 20, contents, sizeof contents, err, sizeof err), 0);
    cr_assert_str_eq(contents, "8388608");
    int64_t usage = 0;
    cr_assert_eq(cg_set_memory_usage(s, &usage, err, sizeof err), 0);
    cr_assert_eq(usage, 4096);
    cr_assert_eq(cg_set_memory_limit(s, -1, contents, sizeof contents, err, sizeof err), 0);
    cr_assert_str_eq(contents, "-1");

    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    cr_assert_eq(cg_set_attach_group(s, CG_FREEZER, pid, err, sizeof err), 0, "%s", err);
    char want[32];
    snprintf(want, sizeof want, "%d", (int)pid);
    cr_assert_str_eq(injt_read(fz, "cgroup.procs", buf, sizeof buf), want);
    /* a pid listed in a cgroup.procs is signalled only if /proc/PID/cgroup
     * agrees: this fake tree's list names a process that is not there */
    cg_kill_spec k;
    cr_assert_eq(cg_set_kill_spec(s, &k), 0);
    cr_assert_eq(strcmp(k.rel, "/chaosloco/u1"), 0, "rel: %s", k.rel);
    cr_assert_eq(cg_kill_spec_signal(&k, SIGKILL, 0), 0, "no process of the fake cgroup is signalled");
    int kn = -1;
    cr_assert_eq(cg_set_kill(s, &kn, err, sizeof err), 0, "%s", err);
    cr_assert_eq(kn, 0);
    char st = uproc_state(pid);
    cr_assert(st != 0 && st != 'Z', "the listed child was never signalled (state %c)", st ? st : '-');
    injt_reap(pid, pidfd);
    cr_assert_eq(cg_set_attach_group(s, CG_FREEZER, pid, err, sizeof err), CX_ENOTFOUND);
    cg_set_free(s);
    injt_rmtree(root);
    free(root);
}

Test(cgroup, fake_v2_tree)
{
    char *root = injt_tmpdir("cg-v2");
    char dir[512], buf[128], contents[128];
    injt_write(root, "cgroup.controllers", "cpuset cpu io memory pids\n");
    snprintf(dir, sizeof dir, "%s/chaosloco/u2", root);
    injt_mkdirs(dir);
    injt_write(dir, "cgroup.freeze", "0\n");
    injt_write(dir, "cgroup.events", "populated 1\nfrozen 1\n");
    injt_write(dir, "cpu.max", "max 100000\n");
    injt_write(dir, "memory.max", "max\n");
    cg_set *s = NULL;
    char err[CX_ERRLEN] = "";
    cr_assert_eq(cg_set_open(root, "u2", &s, err, sizeof err), 0, "%s", err);
    for (int c = 0; c < CG_NCTRL; c++) {
        cr_assert(cg_set_available(s, (cg_ctrl)c), "ctrl %d: %s", c, cg_set_why(s, (cg_ctrl)c));
        cr_assert_eq(cg_set_version(s, (cg_ctrl)c), 2);
    }
    cr_assert_eq(cg_set_freeze(s, 1, err, sizeof err), 0);
    cr_assert_str_eq(injt_read(dir, "cgroup.freeze", buf, sizeof buf), "1");
    int frozen = 0;
    cr_assert_eq(cg_set_freezer_state(s, buf, sizeof buf, &frozen, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(buf, "frozen 1");
    cr_assert_eq(frozen, 1);
    cr_assert_eq(cg_set_cpu_quota(s, 0.5, contents, sizeof contents, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(contents, "50000 100000");
    cr_assert_eq(cg_set_cpu_quota(s, -1, contents, sizeof contents, err, sizeof err), 0);
    cr_assert_str_eq(contents, "max 100000");
    cr_assert_eq(cg_set_memory_limit(s, 1 << 26, contents, sizeof contents, err, sizeof err), 0);
    cr_assert_str_eq(contents, "67108864");
    cr_assert_eq(cg_set_memory_limit(s, -1, contents, sizeof contents, err, sizeof err), 0);
    cr_assert_str_eq(contents, "max");
    cg_set_free(s);

    /* a v2 tree without the memory controller */
    injt_write(root, "cgroup.controllers", "cpu\n");
    cr_assert_eq(cg_set_open(root, "u2", &s, err, sizeof err), 0);
    cr_assert(!cg_set_available(s, CG_MEMORY));
    cr_assert(strstr(cg_set_why(s, CG_MEMORY), "memory"), "%s", cg_set_why(s, CG_MEMORY));
    cr_assert(cg_set_available(s, CG_CPU));
    cg_set_free(s);
    injt_rmtree(root);
    free(root);
}

/* The real hierarchies: create, attach, freeze/thaw, quota, remove. */
Test(cgroup, real_tree_lifecycle)
{
    char unit[64];
    snprintf(unit, sizeof unit, "cxtest-cg-%d", (int)getpid());
    cg_set *s = NULL;
    char err[CX_ERRLEN] = "", state[64];
    cr_assert_eq(cg_set_open(NULL, unit, &s, err, sizeof err), 0, "%s", err);
    if (geteuid() != 0 || !cg_set_available(s, CG_FREEZER)) {
        cr_log_warn("skipped: not root or no writable freezer (%s)", cg_set_why(s, CG_FREEZER));
        cg_set_remove(s, NULL, 0);
        cg_set_free(s);
        cr_skip_test("no writable cgroup freezer");
    }
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    cr_assert_eq(cg_set_attach_group(s, CG_FREEZER, pid, err, sizeof err), 0, "%s", err);
    cr_assert_eq(cg_set_freeze(s, 1, err, sizeof err), 0, "%s", err);
    int frozen = 0;
    for (int i = 0; i < 1000 && !frozen; i++) {
        cr_assert_eq(cg_set_freezer_state(s, state, sizeof state, &frozen, err, sizeof err), 0, "%s", err);
        if (!frozen)
            usleep(1000);
    }
    cr_assert(frozen, "state %s", state);
    /* a frozen process does not react to SIGTERM until thawed */
    kill(pid, SIGTERM);
    usleep(50000);
    char ps = uproc_state(pid);
    cr_assert(ps != 0 && ps != 'Z', "frozen child died");
    cr_assert_eq(cg_set_freeze(s, 0, err, sizeof err), 0);
    cr_assert_eq(injt_wait_state(pid, 0, 2000), 'Z', "thawed child did not handle SIGTERM");
    injt_reap(pid, pidfd);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", cg_set_dir(s, CG_FREEZER));
    struct stat st;
    cr_assert_eq(stat(dir, &st), 0, "unit cgroup %s missing before removal", dir);
    cr_assert_eq(cg_set_remove(s, err, sizeof err), 0, "%s", err);
    cr_assert_neq(stat(dir, &st), 0, "unit cgroup %s still exists", dir);
    cg_set_free(s);
}

/* As root with a writable cgroup: cg_kill_spec_signal ends what is in the
 * unit's cgroup (a process that left its group included), spares a process
 * outside it, and with started_by spares what started later (the next
 * agent's unit, while a dead agent's watchdog still loops); cg_set_kill
 * empties the cgroup. */
Test(cgroup, real_tree_kill)
{
    char unit[64];
    snprintf(unit, sizeof unit, "cxtest-cgk-%d", (int)getpid());
    cg_set *s = NULL;
    char err[CX_ERRLEN] = "";
    cr_assert_eq(cg_set_open(NULL, unit, &s, err, sizeof err), 0, "%s", err);
    cg_kill_spec k;
    if (geteuid() != 0 || cg_set_kill_spec(s, &k) != 0) {
        cr_log_warn("skipped: not root or no writable cgroup (%s)", cg_set_why(s, CG_FREEZER));
        cg_set_remove(s, NULL, 0);
        cg_set_free(s);
        cr_skip_test("no writable cgroup");
    }
    int fd_old, fd_new, fd_out;
    pid_t old = injt_child(&fd_old, 1), out = injt_child(&fd_out, 0); /* each leads its own group */
    for (int c = 0; c < CG_NCTRL; c++)
        if (cg_set_available(s, (cg_ctrl)c))
            cr_assert_eq(cg_set_attach_group(s, (cg_ctrl)c, old, err, sizeof err), 0, "%s", err);
    /* started_by: now, in /proc start-time ticks; then a later process joins */
    struct timespec now;
    cr_assert_eq(clock_gettime(CLOCK_BOOTTIME, &now), 0);
    uint64_t by = (uint64_t)now.tv_sec * (uint64_t)k.clk_tck +
                  (uint64_t)now.tv_nsec / (1000000000ULL / (uint64_t)k.clk_tck);
    usleep(3 * 1000000 / (useconds_t)k.clk_tck); /* past the tick */
    pid_t later = injt_child(&fd_new, 0);
    cr_assert_gt(uproc_starttime(later), by, "test bug: the later child started after `by`");
    for (int c = 0; c < CG_NCTRL; c++)
        if (cg_set_available(s, (cg_ctrl)c))
            cr_assert_eq(cg_set_attach_group(s, (cg_ctrl)c, later, err, sizeof err), 0, "%s", err);
    cr_assert_eq(cg_kill_spec_signal(&k, SIGKILL, by), 1, "only the process that started by then");
    cr_assert_eq(injt_wait_state(old, 0, 2000), 'Z', "the earlier process (ignoring SIGTERM) is SIGKILLed");
    char st = uproc_state(later);
    cr_assert(st != 0 && st != 'Z', "the later process is spared (state %c)", st ? st : '-');
    /* cg_set_kill: everything in the cgroup, nothing outside it */
    int n = -1;
    cr_assert_eq(cg_set_kill(s, &n, err, sizeof err), 0, "%s", err);
    cr_assert_eq(n, 1);
    cr_assert_eq(injt_wait_state(later, 0, 2000), 'Z');
    st = uproc_state(out);
    cr_assert(st != 0 && st != 'Z', "a process outside the cgroup is never signalled (state %c)",
              st ? st : '-');
    injt_reap(old, fd_old);
    injt_reap(later, fd_new);
    kill(out, SIGKILL);
    injt_reap(out, fd_out);
    cr_assert_eq(cg_set_remove(s, err, sizeof err), 0, "%s", err);
    cg_set_free(s);
}
