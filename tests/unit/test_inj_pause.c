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
    inj_pause.free(injt_ok(&inj_pause, "{}", 1));
    inj_pause.free(injt_ok(&inj_pause, "{\"method\":\"freezer\"}", 1));
}

Test(inj_pause, signal_method_stops_and_continues)
{
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    injt_expect e = {0, 0};
    inj_target t = injt_target("u", pid, pidfd, "/tmp", &e);
    void *ctx = injt_ok(&inj_pause, "{\"method\":\"signal\"}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_pause.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "method")), "signal");
    cr_assert_eq(injt_wait_state(pid, 'T', 1000), 'T');
    const char *ps = json_string_value(json_object_get(ev, "proc_state"));
    cr_assert(ps && strlen(ps) == 1, "proc_state evidence");
    cr_assert_eq(inj_pause.revert(ctx, &t, err, sizeof err), 0, "revert: %s", err);
    cr_assert_eq(injt_wait_state(pid, 'S', 1000), 'S');
    cr_assert_eq(inj_pause.revert(ctx, &t, err, sizeof err), 0, "second revert must be a no-op");
    injt_reap(pid, pidfd);
    json_decref(ev);
    inj_pause.free(ctx);
}

Test(inj_pause, revert_after_the_unit_died_succeeds)
{
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target("u", pid, pidfd, "/tmp", NULL);
    void *ctx = injt_ok(&inj_pause, "{\"method\":\"signal\"}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_pause.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    injt_reap(pid, pidfd);
    t.pid = 0;
    t.pidfd = -1;
    cr_assert_eq(inj_pause.revert(ctx, &t, err, sizeof err), 0, "revert: %s", err);
    json_decref(ev);
    inj_pause.free(ctx);
}

Test(inj_pause, auto_falls_back_to_signal_without_freezer)
{
    char *root = injt_tmpdir("pause-nofreezer"); /* an empty tree: no hierarchy */
    setenv("CHAOSLOCO_CGROUP_ROOT", root, 1);
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target("u1", pid, pidfd, "/tmp", NULL);
    void *ctx = injt_ok(&inj_pause, "{}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_pause.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "method")), "signal");
    cr_assert(json_is_string(json_object_get(ev, "fallback_reason")));
    cr_assert_eq(injt_wait_state(pid, 'T', 1000), 'T');
    cr_assert_eq(inj_pause.revert(ctx, &t, err, sizeof err), 0);
    cr_assert_eq(injt_wait_state(pid, 'S', 1000), 'S');
    inj_pause.free(ctx);
    json_decref(ev);

    ctx = injt_ok(&inj_pause, "{\"method\":\"freezer\"}", 1);
    ev = json_object();
    cr_assert_eq(inj_pause.apply(ctx, &t, ev, err, sizeof err), CX_ENOTSUP);
    cr_assert(strstr(err, "freezer"), "%s", err);
    cr_assert_eq(uproc_state(pid), 'S', "a failed apply must leave the unit running");
    inj_pause.free(ctx);
    json_decref(ev);
    injt_reap(pid, pidfd);
    unsetenv("CHAOSLOCO_CGROUP_ROOT");
    injt_rmtree(root);
    free(root);
}

Test(inj_pause, sweep_continues_a_stopped_unit)
{
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target("u", pid, pidfd, "/tmp", NULL);
    void *ctx = injt_ok(&inj_pause, "{\"method\":\"signal\"}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_pause.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    json_t *rec = inj_pause.undo_record(ctx);
    cr_assert_not_null(rec);
    /* the agent "crashes": ctx is lost, only the record survives */
    inj_pause.free(ctx);
    char *dump = json_dumps(rec, 0);
    json_t *back = json_loads(dump, 0, NULL);
    free(dump);
    cr_assert_eq(injt_wait_state(pid, 'T', 1000), 'T');
    inj_target t2 = injt_target("u", 0, -1, "/tmp", NULL);
    cr_assert_eq(inj_pause.sweep(back, &t2, err, sizeof err), 0, "sweep: %s", err);
    cr_assert_eq(injt_wait_state(pid, 'S', 1000), 'S');
    /* a bad record is refused, not guessed at */
    json_t *bad = json_pack("{s:s}", "method", "signal");
    cr_assert_eq(inj_pause.sweep(bad, &t2, err, sizeof err), CX_EINVAL);
    json_decref(bad);
    json_decref(back);
    json_decref(rec);
    json_decref(ev);
    injt_reap(pid, pidfd);
}

/* The real v1/v2 freezer when this process may use it. */
Test(inj_pause, real_freezer_freezes_and_thaws)
{
    char unit[64];
    snprintf(unit, sizeof unit, "cxtest-pause-%d", (int)getpid());
    cg_set *s = NULL;
    cr_assert_eq(cg_set_open(NULL, unit, &s, NULL, 0), 0);
    if (geteuid() != 0 || !cg_set_available(s, CG_FREEZER)) {
        cr_log_warn("skipped: no writable cgroup freezer (%s)", cg_set_why(s, CG_FREEZER));
        cg_set_remove(s, NULL, 0);
        cg_set_free(s);
        cr_skip_test("no writable cgroup freezer");
    }
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target(unit, pid, pidfd, "/tmp", NULL);
    void *ctx = injt_ok(&inj_pause, "{\"method\":\"freezer\"}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "", state[64];
    cr_assert_eq(inj_pause.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "method")), "freezer");
    int frozen = 0;
    for (int i = 0; i < 1000 && !frozen; i++) {
        cr_assert_eq(cg_set_freezer_state(s, state, sizeof state, &frozen, err, sizeof err), 0, "%s", err);
        if (!frozen)
            usleep(1000);
    }
    cr_assert(frozen, "freezer state '%s'", state);
    /* sweep from the record thaws too (as after an agent crash) */
    json_t *rec = inj_pause.undo_record(ctx);
    cr_assert_eq(inj_pause.sweep(rec, &t, err, sizeof err), 0, "sweep: %s", err);
    cr_assert_eq(cg_set_freezer_state(s, state, sizeof state, &frozen, err, sizeof err), 0);
    cr_assert(!frozen, "still frozen after sweep: %s", state);
    cr_assert_eq(inj_pause.revert(ctx, &t, err, sizeof err), 0, "revert: %s", err);
    cr_assert_eq(injt_wait_state(pid, 'S', 1000), 'S');
    injt_reap(pid, pidfd);
    cr_assert_eq(cg_set_remove(s, err, sizeof err), 0, "remove: %s", err);
    json_decref(rec);
    json_decref(ev);
    inj_pause.free(ctx);
    cg_set_free(s);
}
