/* test_inj_pause.c - the pause fault: SIGSTOP fallback, the cgroup freezer
 * (real one when root with a writable freezer), revert and sweep. */
#include "inj_test.h"

#include "injectors/cgroup.h"

extern const injector inj_pause;

TestSuite(inj_pause);

Test(inj_pause, params_are_strict)
{
    injt_bad(&inj_pause, "{\"method\":\"magic\"}", "method");
    injt_bad(&inj_pause, "{\"method\":1}", "method");
    injt_bad(&inj_pause, "{\"duration_ms\":5}", "duration_ms");
    injt_bad(&inj_pause, "\"x\"", "params");
    injt_good(&inj_pause, "{}", "{\"method\":\"freezer\"}", NULL);
}

Test(inj_pause, signal_method_stops_and_continues)
{
    injt_run r;
    injt_run_start(&r, &inj_pause, "{\"method\":\"signal\"}", "u", 0);
    injt_apply_ok(&r);
    cr_assert_str_eq(json_string_value(json_object_get(r.ev, "method")), "signal");
    cr_assert_eq(injt_wait_state(r.pid, 'T', 1000), 'T');
    const char *ps = json_string_value(json_object_get(r.ev, "proc_state"));
    cr_assert(ps && strlen(ps) == 1, "proc_state evidence");
    cr_assert_eq(injt_revert(&r), 0, "revert: %s", r.err);
    cr_assert_eq(injt_wait_state(r.pid, 'S', 1000), 'S');
    cr_assert_eq(injt_revert(&r), 0, "second revert must be a no-op");
    injt_run_cleanup(&r);
}

Test(inj_pause, revert_after_the_unit_died_succeeds)
{
    injt_run r;
    injt_run_start(&r, &inj_pause, "{\"method\":\"signal\"}", "u", 0);
    injt_apply_ok(&r);
    injt_run_stop_child(&r);
    r.t.pid = 0;
    r.t.pidfd = -1;
    cr_assert_eq(injt_revert(&r), 0, "revert: %s", r.err);
    injt_run_cleanup(&r);
}

Test(inj_pause, auto_falls_back_to_signal_without_freezer)
{
    char *root = injt_fake_cgroup("pause-nofreezer"); /* an empty tree: no hierarchy */
    injt_run r;
    injt_run_start(&r, &inj_pause, "{}", "u1", 0);
    injt_apply_ok(&r);
    cr_assert_str_eq(json_string_value(json_object_get(r.ev, "method")), "signal");
    cr_assert(json_is_string(json_object_get(r.ev, "fallback_reason")));
    cr_assert_eq(injt_wait_state(r.pid, 'T', 1000), 'T');
    cr_assert_eq(injt_revert(&r), 0);
    cr_assert_eq(injt_wait_state(r.pid, 'S', 1000), 'S');

    injt_run_reprepare(&r, "{\"method\":\"freezer\"}", 1);
    cr_assert_eq(injt_apply(&r), CX_ENOTSUP);
    cr_assert(strstr(r.err, "freezer"), "%s", r.err);
    cr_assert_eq(uproc_state(r.pid), 'S', "a failed apply must leave the unit running");
    injt_run_cleanup(&r);
    injt_fake_cgroup_drop(root);
}

Test(inj_pause, sweep_continues_a_stopped_unit)
{
    injt_run r;
    injt_run_start(&r, &inj_pause, "{\"method\":\"signal\"}", "u", 0);
    injt_apply_ok(&r);
    json_t *rec = inj_pause.undo_record(r.ctx);
    cr_assert_not_null(rec);
    /* the agent "crashes": ctx is lost, only the record survives */
    char *dump = json_dumps(rec, 0);
    json_t *back = json_loads(dump, 0, NULL);
    free(dump);
    cr_assert_eq(injt_wait_state(r.pid, 'T', 1000), 'T');
    inj_target t2 = injt_target("u", 0, -1, "/tmp", NULL);
    cr_assert_eq(inj_pause.sweep(back, &t2, r.err, sizeof r.err), 0, "sweep: %s", r.err);
    cr_assert_eq(injt_wait_state(r.pid, 'S', 1000), 'S');
    /* a bad record is refused, not guessed at */
    json_t *bad = json_pack("{s:s}", "method", "signal");
    cr_assert_eq(inj_pause.sweep(bad, &t2, r.err, sizeof r.err), CX_EINVAL);
    json_decref(bad);
    json_decref(back);
    json_decref(rec);
    injt_run_cleanup(&r);
}

/* The real v1/v2 freezer when this process may use it. */
Test(inj_pause, real_freezer_freezes_and_thaws)
{
    char unit[64];
    cg_set *s = injt_real_cgroup("pause", CG_FREEZER, "cgroup freezer", unit, sizeof unit);
    injt_run r;
    injt_run_start(&r, &inj_pause, "{\"method\":\"freezer\"}", unit, 0);
    char *err = r.err, state[64];
    injt_apply_ok(&r);
    cr_assert_str_eq(json_string_value(json_object_get(r.ev, "method")), "freezer");
    int frozen = 0;
    for (int i = 0; i < 1000 && !frozen; i++) {
        cr_assert_eq(cg_set_freezer_state(s, state, sizeof state, &frozen, err, CX_ERRLEN), 0, "%s", err);
        if (!frozen)
            usleep(1000);
    }
    cr_assert(frozen, "freezer state '%s'", state);
    /* sweep from the record thaws too (as after an agent crash) */
    json_t *rec = inj_pause.undo_record(r.ctx);
    cr_assert_eq(inj_pause.sweep(rec, &r.t, err, CX_ERRLEN), 0, "sweep: %s", err);
    cr_assert_eq(cg_set_freezer_state(s, state, sizeof state, &frozen, err, CX_ERRLEN), 0);
    cr_assert(!frozen, "still frozen after sweep: %s", state);
    cr_assert_eq(injt_revert(&r), 0, "revert: %s", err);
    cr_assert_eq(injt_wait_state(r.pid, 'S', 1000), 'S');
    injt_run_stop_child(&r);
    cr_assert_eq(cg_set_remove(s, err, CX_ERRLEN), 0, "remove: %s", err);
    json_decref(rec);
    injt_run_cleanup(&r);
    cg_set_free(s);
}
