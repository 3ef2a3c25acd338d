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
    injt_good(&inj_memory, "{\"limit_bytes\":4194304}", NULL);
}

Test(inj_memory, limit_on_a_fake_v2_tree)
{
    char *root = injt_fake_cgroup("mem-fake");
    injt_write(root, "cgroup.controllers", "cpu memory\n");
    char dir[512], buf[64];
    injt_fake_unit(dir, sizeof dir, root, "", "memory.max", "max\n", "memory.current", "1234\n", NULL);
    injt_run r;
    injt_run_start(&r, &inj_memory, "{\"limit_bytes\":67108864}", "u1", 0);
    injt_apply_ok(&r);
    cr_assert_str_eq(json_string_value(json_object_get(r.ev, "limit")), "67108864");
    cr_assert_eq(json_integer_value(json_object_get(r.ev, "usage_bytes")), 1234);
    cr_assert_str_eq(injt_read(dir, "memory.max", buf, sizeof buf), "67108864");
    injt_check_undo(&r, dir, "memory.max", "67108864", "max");
    injt_run_cleanup(&r);
    injt_fake_cgroup_drop(root);
}

Test(inj_memory, unavailable_is_not_supported)
{
    injt_check_no_cgroup(&inj_memory, "{\"limit_bytes\":67108864}", "memory");
    cr_assert_eq(cx_err_http_status(CX_ENOTSUP), 501);
}

Test(inj_memory, real_memory_cgroup)
{
    char unit[64];
    cg_set *s = injt_real_cgroup("mem", CG_MEMORY, "memory cgroup", unit, sizeof unit);
    injt_run r;
    injt_run_start(&r, &inj_memory, "{\"limit_bytes\":67108864}", unit, 0);
    injt_apply_ok(&r);
    cr_assert_str_eq(json_string_value(json_object_get(r.ev, "limit")), "67108864");
    cr_assert_eq(injt_revert(&r), 0, "revert: %s", r.err);
    char contents[64];
    cr_assert_eq(cg_set_memory_limit(s, -1, contents, sizeof contents, r.err, sizeof r.err), 0);
    cr_assert(strcmp(contents, "67108864") != 0, "limit still set: %s", contents);
    injt_run_stop_child(&r);
    cr_assert_eq(cg_set_remove(s, r.err, sizeof r.err), 0, "remove: %s", r.err);
    injt_run_cleanup(&r);
    cg_set_free(s);
}
