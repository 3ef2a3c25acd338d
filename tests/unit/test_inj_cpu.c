/* test_inj_cpu.c - the cpu fault: params, duty-cycle fallback, cgroup quota
 * on a fake tree and (as root) on the real cpu hierarchy. */
#include "inj_test.h"

#include "common/clock.h"
#include "injectors/cgroup.h"

extern const injector inj_cpu;

TestSuite(inj_cpu);

Test(inj_cpu, params_are_strict)
{
    injt_bad(&inj_cpu, "{}", "cpus");
    injt_bad(&inj_cpu, "{\"cpus\":0}", "cpus");
    injt_bad(&inj_cpu, "{\"cpus\":0.001}", "cpus");
    injt_bad(&inj_cpu, "{\"cpus\":100000}", "cpus");
    injt_bad(&inj_cpu, "{\"cpus\":\"1\"}", "cpus");
    injt_bad(&inj_cpu, "{\"cpus\":0.5,\"method\":\"nice\"}", "method");
    injt_bad(&inj_cpu, "{\"cpus\":0.5,\"period_ms\":5}", "period_ms");
    injt_bad(&inj_cpu, "{\"cpus\":0.5,\"quota\":5}", "quota");
    inj_cpu.free(injt_ok(&inj_cpu, "{\"cpus\":0.01}", 1));
}

Test(inj_cpu, duty_method_stops_part_of_each_period)
{
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target("u", pid, pidfd, "/tmp", NULL);
    char params[128];
    /* half of every online CPU: run half of each 100 ms period */
    snprintf(params, sizeof params, "{\"cpus\":%g,\"method\":\"duty\"}", uproc_ncpus() * 0.5);
    void *ctx = injt_ok(&inj_cpu, params, 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_cpu.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "method")), "duty");
    cr_assert_eq(json_integer_value(json_object_get(ev, "stopped_ms")), 50);
    cr_assert_eq(injt_wait_state(pid, 'T', 1000), 'T');
    cr_assert_eq(inj_cpu.revert(ctx, &t, err, sizeof err), 0, "revert: %s", err);
    cr_assert_eq(injt_wait_state(pid, 'S', 1000), 'S');
    injt_reap(pid, pidfd);
    json_decref(ev);
    inj_cpu.free(ctx);
}

Test(inj_cpu, cgroup_quota_on_a_fake_v1_tree)
{
    char *root = injt_tmpdir("cpu-fake");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cpu/chaosloco/u1", root);
    injt_mkdirs(dir);
    injt_write(dir, "cpu.cfs_quota_us", "-1\n");
    injt_write(dir, "cpu.cfs_period_us", "100000\n");
    injt_write(dir, "cgroup.procs", "");
    setenv("CHAOSLOCO_CGROUP_ROOT", root, 1);
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target("u1", pid, pidfd, "/tmp", NULL);
    void *ctx = injt_ok(&inj_cpu, "{\"cpus\":0.25}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "", buf[128];
    cr_assert_eq(inj_cpu.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "method")), "cgroup");
    cr_assert_str_eq(json_string_value(json_object_get(ev, "quota")),
                     "cfs_quota_us=25000 cfs_period_us=100000");
    cr_assert_str_eq(injt_read(dir, "cpu.cfs_quota_us", buf, sizeof buf), "25000");
    char pidtxt[32];
    snprintf(pidtxt, sizeof pidtxt, "%d", (int)pid);
    cr_assert_str_eq(injt_read(dir, "cgroup.procs", buf, sizeof buf), pidtxt);
    json_t *rec = inj_cpu.undo_record(ctx);
    cr_assert_eq(inj_cpu.revert(ctx, &t, err, sizeof err), 0, "revert: %s", err);
    cr_assert_str_eq(injt_read(dir, "cpu.cfs_quota_us", buf, sizeof buf), "-1");
    /* sweep from the record after a "crash" with the quota set again */
    injt_write(dir, "cpu.cfs_quota_us", "25000");
    cr_assert_eq(inj_cpu.sweep(rec, &t, err, sizeof err), 0, "sweep: %s", err);
    cr_assert_str_eq(injt_read(dir, "cpu.cfs_quota_us", buf, sizeof buf), "-1");
    injt_reap(pid, pidfd);
    json_decref(rec);
    json_decref(ev);
    inj_cpu.free(ctx);
    unsetenv("CHAOSLOCO_CGROUP_ROOT");
    injt_rmtree(root);
    free(root);
}

Test(inj_cpu, cgroup_method_fails_cleanly_without_cgroup)
{
    char *root = injt_tmpdir("cpu-none");
    setenv("CHAOSLOCO_CGROUP_ROOT", root, 1);
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target("u1", pid, pidfd, "/tmp", NULL);
    void *ctx = injt_ok(&inj_cpu, "{\"cpus\":0.5,\"method\":\"cgroup\"}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_cpu.apply(ctx, &t, ev, err, sizeof err), CX_ENOTSUP);
    cr_assert(strstr(err, "cpu"), "%s", err);
    cr_assert_eq(uproc_state(pid), 'S');
    injt_reap(pid, pidfd);
    json_decref(ev);
    inj_cpu.free(ctx);
    unsetenv("CHAOSLOCO_CGROUP_ROOT");
    injt_rmtree(root);
    free(root);
}

Test(inj_cpu, real_cgroup_quota)
{
    char unit[64];
    snprintf(unit, sizeof unit, "cxtest-cpu-%d", (int)getpid());
    cg_set *s = NULL;
    cr_assert_eq(cg_set_open(NULL, unit, &s, NULL, 0), 0);
    if (geteuid() != 0 || !cg_set_available(s, CG_CPU)) {
        cr_log_warn("skipped: no writable cpu cgroup (%s)", cg_set_why(s, CG_CPU));
        cg_set_remove(s, NULL, 0);
        cg_set_free(s);
        cr_skip_test("no writable cpu cgroup");
    }
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target(unit, pid, pidfd, "/tmp", NULL);
    void *ctx = injt_ok(&inj_cpu, "{\"cpus\":0.3,\"method\":\"cgroup\"}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_cpu.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    const char *q = json_string_value(json_object_get(ev, "quota"));
    cr_assert(q && (strstr(q, "30000") != NULL), "quota evidence '%s'", q ? q : "");
    cr_assert_eq(inj_cpu.revert(ctx, &t, err, sizeof err), 0, "revert: %s", err);
    char contents[128];
    cr_assert_eq(cg_set_cpu_quota(s, 0, contents, sizeof contents, err, sizeof err), 0);
    cr_assert(strstr(contents, "-1") || strstr(contents, "max"), "%s", contents);
    injt_reap(pid, pidfd);
    cr_assert_eq(cg_set_remove(s, err, sizeof err), 0, "remove: %s", err);
    json_decref(ev);
    inj_cpu.free(ctx);
    cg_set_free(s);
}

Test(inj_cpu, duty_with_all_cpus_stops_nothing)
{
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target("u", pid, pidfd, "/tmp", NULL);
    char params[128];
    snprintf(params, sizeof params, "{\"cpus\":%d,\"method\":\"duty\"}", uproc_ncpus());
    void *ctx = injt_ok(&inj_cpu, params, 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_cpu.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    cr_assert_eq(json_integer_value(json_object_get(ev, "stopped_ms")), 0);
    for (int i = 0; i < 30; i++) {
        inj_cpu.tick(ctx, &t, cx_mono_ms());
        cr_assert_neq(uproc_state(pid), 'T', "stopped although cpus = online CPUs");
        usleep(5000);
    }
    cr_assert_eq(inj_cpu.revert(ctx, &t, err, sizeof err), 0);
    injt_reap(pid, pidfd);
    json_decref(ev);
    inj_cpu.free(ctx);
}
