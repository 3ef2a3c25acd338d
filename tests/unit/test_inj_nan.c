/* test_inj_nan.c - the nan fault writes and removes the hook file. */
#include "inj_test.h"

extern const injector inj_nan;

TestSuite(inj_nan);

Test(inj_nan, params_are_strict)
{
    injt_bad(&inj_nan, "{\"count\":0}", "count");
    injt_bad(&inj_nan, "{\"count\":1001}", "count");
    injt_bad(&inj_nan, "{\"count\":\"3\"}", "count");
    injt_bad(&inj_nan, "{\"count\":2.5}", "count");
    injt_bad(&inj_nan, "{\"n\":2}", "n");
    injt_good(&inj_nan, "{}", NULL);
}

Test(inj_nan, writes_the_count_and_revert_removes_it)
{
    char *dir = injt_tmpdir("nan");
    char hooks[512], buf[64];
    snprintf(hooks, sizeof hooks, "%s/hooks", dir);
    inj_target t = injt_target("u", 0, -1, dir, NULL);
    t.hook_dir = hooks;
    injt_run r;
    injt_run_init(&r, &inj_nan, "{\"count\":3}", 1, t);
    injt_apply_ok(&r);
    cr_assert_str_eq(injt_read(hooks, "nan", buf, sizeof buf), "3");
    cr_assert_str_eq(json_string_value(json_object_get(r.ev, "content")), "3");
    cr_assert_eq(injt_revert(&r), 0, "revert: %s", r.err);
    char path[600];
    snprintf(path, sizeof path, "%s/nan", hooks);
    cr_assert_neq(access(path, F_OK), 0, "hook file still there");
    cr_assert_eq(injt_revert(&r), 0, "second revert");
    /* sweep from the record */
    injt_write(hooks, "nan", "2");
    json_t *rec = inj_nan.undo_record(r.ctx);
    cr_assert_eq(inj_nan.sweep(rec, &r.t, r.err, sizeof r.err), 0, "sweep: %s", r.err);
    cr_assert_neq(access(path, F_OK), 0);
    json_decref(rec);
    injt_run_cleanup(&r);
    injt_rmtree(dir);
    free(dir);
}

Test(inj_nan, no_hook_dir_is_not_supported)
{
    injt_run r;
    injt_run_init(&r, &inj_nan, "{\"count\":1}", 1, injt_target("u", 0, -1, "/tmp", NULL));
    cr_assert_eq(injt_apply(&r), CX_ENOTSUP);
    injt_run_cleanup(&r);
}
