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
    injt_good(&inj_cpu, "{\"cpus\":0.01}", NULL);
}

Test(inj_cpu, duty_method_stops_part_of_each_period)
{
    char params[128];
    /* half of every online CPU: run half of each 100 ms period */
    snprintf(params, sizeof params, "{\"cpus\":%g,\"method\":\"duty\"}", uproc_ncpus() * 0.5);
    injt_run r;
    injt_run_start(&r, &inj_cpu, params, "u", 0);
    injt_apply_ok(&r);
    cr_assert_str_eq(json_string_value(json_object_get(r.ev, "method")), "duty");
    cr_assert_eq(json_integer_value(json_object_get(r.ev, "stopped_ms")), 50);
    cr_assert_eq(injt_wait_state(r.pid, 'T', 1000), 'T');
    cr_assert_eq(injt_revert(&r), 0, "revert: %s", r.err);
    cr_assert_eq(injt_wait_state(r.pid, 'S', 1000), 'S');
    injt_run_cleanup(&r);
}

Test(inj_cpu, cgroup_quota_on_a_fake_v1_tree)
{
    char *root = injt_fake_cgroup("cpu-fake");
    char dir[512], buf[128];
    injt_fake_unit(dir, sizeof dir, root, "cpu/", "cpu.cfs_quota_us", "-1\n", "cpu.cfs_period_us", "100000\n",
                   NULL);
    injt_run r;
    injt_run_start(&r, &inj_cpu, "{\"cpus\":0.25}", "u1", 0);
    injt_apply_ok(&r);
    cr_assert_str_eq(json_string_value(json_object_get(r.ev, "method")), "cgroup");
    cr_assert_str_eq(json_string_value(json_object_get(r.ev, "quota")),
                     "cfs_quota_us=25000 cfs_period_us=100000");
    cr_assert_str_eq(injt_read(dir, "cpu.cfs_quota_us", buf, sizeof buf), "25000");
    char pidtxt[32];
    snprintf(pidtxt, sizeof pidtxt, "%d", (int)r.pid);
    cr_assert_str_eq(injt_read(dir, "cgroup.procs", buf, sizeof buf), pidtxt);
    /* the sweep comes after a "crash" with the quota set again */
    injt_check_undo(&r, dir, "cpu.cfs_quota_us", "25000", "-1");
    injt_run_cleanup(&r);
    injt_fake_cgroup_drop(root);
}

Test(inj_cpu, cgroup_method_fails_cleanly_without_cgroup)
{
    injt_check_no_cgroup(&inj_cpu, "{\"cpus\":0.5,\"method\":\"cgroup\"}", "cpu");
}

Test(inj_cpu, real_cgroup_quota)
{
    char unit[64];
    cg_set *s = injt_real_cgroup("cpu", CG_CPU, "cpu cgroup", unit, sizeof unit);
    injt_run r;
    injt_run_start(&r, &inj_cpu, "{\"cpus\":0.3,\"method\":\"cgroup\"}", unit, 0);
    injt_apply_ok(&r);
    const char *q = json_string_value(json_object_get(r.ev, "quota"));
    cr_assert(q && (strstr(q, "30000") != NULL), "quota evidence '%s'", q ? q : "");
    cr_assert_eq(injt_revert(&r), 0, "revert: %s", r.err);
    char contents[128];
    cr_assert_eq(cg_set_cpu_quota(s, 0, contents, sizeof contents, r.err, sizeof r.err), 0);
    cr_assert(strstr(contents, "-1") || strstr(contents, "max"), "%s", contents);
    injt_run_stop_child(&r);
    cr_assert_eq(cg_set_remove(s, r.err, sizeof r.err), 0, "remove: %s", r.err);
    injt_run_cleanup(&r);
    cg_set_free(s);
}

Test(inj_cpu, duty_with_all_cpus_stops_nothing)
{
    char params[128];
    snprintf(params, sizeof params, "{\"cpus\":%d,\"method\":\"duty\"}", uproc_ncpus());
    injt_run r;
    injt_run_start(&r, &inj_cpu, params, "u", 0);
    injt_apply_ok(&r);
    cr_assert_eq(json_integer_value(json_object_get(r.ev, "stopped_ms")), 0);
    for (int i = 0; i < 30; i++) {
        inj_cpu.tick(r.ctx, &r.t, cx_mono_ms());
        cr_assert_neq(uproc_state(r.pid), 'T', "stopped although cpus = online CPUs");
        usleep(5000);
    }
    cr_assert_eq(injt_revert(&r), 0);
    injt_run_cleanup(&r);
}
