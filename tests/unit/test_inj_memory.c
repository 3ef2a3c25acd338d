/* test_inj_memory.c - the memory fault: params, fake v2 tree, 501 without a
 * memory cgroup, and (as root) the real hierarchy. */
#include "inj_test.h"

#include "injectors/cgroup.h"

extern const injector inj_memory;

TestSuite(inj_memory);

Test(inj_memory, params_are_strict)
{
    injt_bad(&inj_memory, "{}", "limit_bytes");
    injt_bad(&inj_memory, "{\"limit_bytes\":4194303}", "limit_bytes");
    injt_bad(&inj_memory, "{\"limit_bytes\":1e9}", "limit_bytes");
    injt_bad(&inj_memory, "{\"limit_bytes\":\"64M\"}", "limit_bytes");
    injt_bad(&inj_memory, "{\"limit_bytes\":8388608,\"swap\":0}", "swap");
    inj_memory.free(injt_ok(&inj_memory, "{\"limit_bytes\":4194304}", 1));
}

Test(inj_memory, limit_on_a_fake_v2_tree)
{
    char *root = injt_tmpdir("mem-fake");
    injt_write(root, "cgroup.controllers", "cpu memory\n");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/chaosloco/u1", root);
    injt_mkdirs(dir);
    injt_write(dir, "memory.max", "max\n");
    injt_write(dir, "memory.current", "1234\n");
    injt_write(dir, "cgroup.procs", "");
    setenv("CHAOSLOCO_CGROUP_ROOT", root, 1);
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target("u1", pid, pidfd, "/tmp", NULL);
    void *ctx = injt_ok(&inj_memory, "{\"limit_bytes\":67108864}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "", buf[64];
    cr_assert_eq(inj_memory.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "limit")), "67108864");
    cr_assert_eq(json_integer_value(json_object_get(ev, "usage_bytes")), 1234);
    cr_assert_str_eq(injt_read(dir, "memory.max", buf, sizeof buf), "67108864");
    json_t *rec = inj_memory.undo_record(ctx);
    cr_assert_eq(inj_memory.revert(ctx, &t, err, sizeof err), 0, "revert: %s", err);
    cr_assert_str_eq(injt_read(dir, "memory.max", buf, sizeof buf), "max");
    cr_assert_eq(inj_memory.revert(ctx, &t, err, sizeof err), 0);
    injt_write(dir, "memory.max", "67108864");
    cr_assert_eq(inj_memory.sweep(rec, &t, err, sizeof err), 0, "sweep: %s", err);
    cr_assert_str_eq(injt_read(dir, "memory.max", buf, sizeof buf), "max");
    injt_reap(pid, pidfd);
    json_decref(rec);
    json_decref(ev);
    inj_memory.free(ctx);
    unsetenv("CHAOSLOCO_CGROUP_ROOT");
    injt_rmtree(root);
    free(root);
}

Test(inj_memory, unavailable_is_not_supported)
{
    char *root = injt_tmpdir("mem-none");
    setenv("CHAOSLOCO_CGROUP_ROOT", root, 1);
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target("u1", pid, pidfd, "/tmp", NULL);
    void *ctx = injt_ok(&inj_memory, "{\"limit_bytes\":67108864}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_memory.apply(ctx, &t, ev, err, sizeof err), CX_ENOTSUP);
    cr_assert_eq(cx_err_http_status(CX_ENOTSUP), 501);
    cr_assert(strstr(err, "memory"), "%s", err);
    cr_assert_eq(inj_memory.revert(ctx, &t, err, sizeof err), 0, "revert of an unapplied fault is a no-op");
    injt_reap(pid, pidfd);
    json_decref(ev);
    inj_memory.free(ctx);
    unsetenv("CHAOSLOCO_CGROUP_ROOT");
    injt_rmtree(root);
    free(root);
}

Test(inj_memory, real_memory_cgroup)
{
    char unit[64];
    snprintf(unit, sizeof unit, "cxtest-mem-%d", (int)getpid());
    cg_set *s = NULL;
    cr_assert_eq(cg_set_open(NULL, unit, &s, NULL, 0), 0);
    if (geteuid() != 0 || !cg_set_available(s, CG_MEMORY)) {
        cr_log_warn("skipped: no writable memory cgroup (%s)", cg_set_why(s, CG_MEMORY));
        cg_set_remove(s, NULL, 0);
        cg_set_free(s);
        cr_skip_test("no writable memory cgroup");
    }
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target(unit, pid, pidfd, "/tmp", NULL);
    void *ctx = injt_ok(&inj_memory, "{\"limit_bytes\":67108864}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_memory.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "limit")), "67108864");
    cr_assert_eq(inj_memory.revert(ctx, &t, err, sizeof err), 0, "revert: %s", err);
    char contents[64];
    cr_assert_eq(cg_set_memory_limit(s, -1, contents, sizeof contents, err, sizeof err), 0);
    cr_assert(strcmp(contents, "67108864") != 0, "limit still set: %s", contents);
    injt_reap(pid, pidfd);
    cr_assert_eq(cg_set_remove(s, err, sizeof err), 0, "remove: %s", err);
    json_decref(ev);
    inj_memory.free(ctx);
    cg_set_free(s);
}
