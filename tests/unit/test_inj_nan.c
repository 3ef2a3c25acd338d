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
    inj_nan.free(injt_ok(&inj_nan, "{}", 1));
}

Test(inj_nan, writes_the_count_and_revert_removes_it)
{
    char *dir = injt_tmpdir("nan");
    char hooks[512], buf[64];
    snprintf(hooks, sizeof hooks, "%s/hooks", dir);
    inj_target t = injt_target("u", 0, -1, dir, NULL);
    t.hook_dir = hooks;
    void *ctx = injt_ok(&inj_nan, "{\"count\":3}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_nan.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    cr_assert_str_eq(injt_read(hooks, "nan", buf, sizeof buf), "3");
    cr_assert_str_eq(json_string_value(json_object_get(ev, "content")), "3");
    cr_assert_eq(inj_nan.revert(ctx, &t, err, sizeof err), 0, "revert: %s", err);
    char path[600];
    snprintf(path, sizeof path, "%s/nan", hooks);
    cr_assert_neq(access(path, F_OK), 0, "hook file still there");
    cr_assert_eq(inj_nan.revert(ctx, &t, err, sizeof err), 0, "second revert");
    /* sweep from the record */
    injt_write(hooks, "nan", "2");
    json_t *rec = inj_nan.undo_record(ctx);
    cr_assert_eq(inj_nan.sweep(rec, &t, err, sizeof err), 0, "sweep: %s", err);
    cr_assert_neq(access(path, F_OK), 0);
    json_decref(rec);
    json_decref(ev);
    inj_nan.free(ctx);
    injt_rmtree(dir);
    free(dir);
}

Test(inj_nan, no_hook_dir_is_not_supported)
{
    inj_target t = injt_target("u", 0, -1, "/tmp", NULL);
    void *ctx = injt_ok(&inj_nan, "{\"count\":1}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_nan.apply(ctx, &t, ev, err, sizeof err), CX_ENOTSUP);
    json_decref(ev);
    inj_nan.free(ctx);
}
