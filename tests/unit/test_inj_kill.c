/* test_inj_kill.c - the kill and preempt fault kinds against real children,
 * and the registry entries of the process-level kinds. */
#include "inj_test.h"

#include "common/clock.h"

extern const injector inj_kill, inj_preempt;

TestSuite(inj_kill);

Test(inj_kill, registry_lists_process_kinds_with_docs)
{
    static const char *const kinds[] = {"kill",   "preempt", "pause", "straggle", "cpu",
                                        "memory", "clock",   "disk",  "nan",      NULL};
    for (const char *const *k = kinds; *k; k++) {
        const injector *inj = injector_find(*k);
        cr_assert_not_null(inj, "%s not registered", *k);
        cr_assert_str_eq(inj->type, *k);
        cr_assert(inj->summary && strlen(inj->summary) > 20, "%s: summary", *k);
        cr_assert(inj->params && inj->params[0].name, "%s: params table", *k);
        for (const inj_param *p = inj->params; p->name; p++)
            cr_assert(p->help && strlen(p->help) > 5, "%s: params.%s has no help", *k, p->name);
        cr_assert(inj->prepare && inj->apply && inj->revert && inj->undo_record && inj->free, "%s: ops", *k);
    }
    cr_assert_null(injector_find("no-such-kind"));
}

Test(inj_kill, params_are_strict)
{
    injt_bad(&inj_kill, "{\"signal\":\"FOO\"}", "signal");
    injt_bad(&inj_kill, "{\"signal\":\"STOP\"}", "signal");
    injt_bad(&inj_kill, "{\"signal\":9}", "signal");
    injt_bad(&inj_kill, "{\"signal\":\"\"}", "signal");
    injt_bad(&inj_kill, "{\"restart_after_ms\":-1}", "restart_after_ms");
    injt_bad(&inj_kill, "{\"restart_after_ms\":1.5}", "restart_after_ms");
    injt_bad(&inj_kill, "{\"restart_after_ms\":\"10\"}", "restart_after_ms");
    injt_bad(&inj_kill, "{\"sig\":\"KILL\"}", "sig");
    injt_bad(&inj_kill, "[1]", "params");
    static const char *const ok[] = {"KILL", "TERM", "INT",  "SEGV", "ABRT",
                                     "HUP",  "QUIT", "USR1", "USR2", "SIGTERM"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char j[64];
        snprintf(j, sizeof j, "{\"signal\":\"%s\"}", ok[i]);
        injt_good(&inj_kill, j, NULL);
    }
    injt_good(&inj_kill, "{}", "null", NULL);
}

Test(inj_kill, term_kills_the_child_and_expects_the_exit)
{
    injt_run r;
    injt_run_start(&r, &inj_kill, "{\"signal\":\"TERM\",\"restart_after_ms\":250}", "u", 0);
    injt_apply_ok(&r);
    cr_assert_eq(r.e.calls, 1);
    cr_assert_eq(r.e.restart_ms, 250);
    cr_assert_str_eq(json_string_value(json_object_get(r.ev, "signal")), "TERM");
    cr_assert_eq(json_integer_value(json_object_get(r.ev, "pid")), r.pid);
    int st = injt_wait_exit(r.pid, 2000);
    cr_assert(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "child not killed by TERM (%d)", st);
    cr_assert_eq(injt_revert(&r), 0);
    cr_assert_null(inj_kill.undo_record(r.ctx));
    injt_run_cleanup(&r);
}

Test(inj_kill, default_kill_without_restart)
{
    injt_run r;
    injt_run_start(&r, &inj_kill, "{}", "u", 1); /* ignores TERM; KILL cannot be ignored */
    injt_apply_ok(&r);
    cr_assert_eq(r.e.restart_ms, -1);
    cr_assert(json_is_null(json_object_get(r.ev, "restart_after_ms")));
    int st = injt_wait_exit(r.pid, 2000);
    cr_assert(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    injt_run_cleanup(&r);
}

Test(inj_kill, not_running_is_no_unit)
{
    injt_run r;
    injt_run_init(&r, &inj_kill, "{}", 1, injt_target("u", 0, -1, "/tmp", NULL));
    cr_assert_eq(injt_apply(&r), CX_ENOUNIT, "the agent's reason unit_not_running comes from this code");
    cr_assert_eq(r.e.calls, 0, "expect_exit must not be called for a dead unit");
    injt_run_cleanup(&r);
}

/* ---- preempt ---- */

Test(inj_kill, preempt_params_are_strict)
{
    injt_bad(&inj_preempt, "{\"grace_ms\":-1}", "grace_ms");
    injt_bad(&inj_preempt, "{\"grace_ms\":600001}", "grace_ms");
    injt_bad(&inj_preempt, "{\"grace_ms\":true}", "grace_ms");
    injt_bad(&inj_preempt, "{\"restart_after_ms\":-5}", "restart_after_ms");
    injt_bad(&inj_preempt, "{\"signal\":\"TERM\"}", "signal");
    injt_good(&inj_preempt, "{\"grace_ms\":0,\"restart_after_ms\":0}", NULL);
}

Test(inj_kill, preempt_escalates_to_kill_after_grace)
{
    injt_run r;
    injt_run_start(&r, &inj_preempt, "{\"grace_ms\":150,\"restart_after_ms\":1000}", "u",
                   1); /* ignores SIGTERM */
    int64_t t0 = cx_mono_ms();
    injt_apply_ok(&r);
    cr_assert_eq(r.e.calls, 1);
    cr_assert_eq(r.e.restart_ms, 1000);
    cr_assert_str_eq(json_string_value(json_object_get(r.ev, "signal")), "TERM");
    /* drive ticks as the agent does; within the grace the child must live */
    int st = -1;
    int64_t died_ms = -1;
    while (cx_mono_ms() - t0 < 3000) {
        inj_preempt.tick(r.ctx, &r.t, cx_mono_ms());
        if (waitpid(r.pid, &st, WNOHANG) == r.pid) {
            died_ms = cx_mono_ms() - t0;
            break;
        }
        usleep(10000);
    }
    cr_assert(died_ms >= 0, "child survived the preemption");
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child not SIGKILLed");
    cr_assert(died_ms >= 140, "SIGKILL after %lld ms, before the 150 ms grace", (long long)died_ms);
    injt_run_cleanup(&r);
}

Test(inj_kill, preempt_term_within_grace_needs_no_kill)
{
    injt_run r;
    injt_run_start(&r, &inj_preempt, "{\"grace_ms\":5000}", "u", 0);
    injt_apply_ok(&r);
    int st = injt_wait_exit(r.pid, 2000);
    cr_assert(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    inj_preempt.tick(r.ctx, &r.t, cx_mono_ms() + 10000); /* past the deadline: the pid is gone, no-op */
    cr_assert_eq(injt_revert(&r), 0);
    injt_run_cleanup(&r);
}

Test(inj_kill, preempt_revert_cancels_the_kill)
{
    injt_run r;
    injt_run_start(&r, &inj_preempt, "{\"grace_ms\":50}", "u", 1);
    injt_apply_ok(&r);
    cr_assert_eq(injt_revert(&r), 0);
    inj_preempt.tick(r.ctx, &r.t, cx_mono_ms() + 1000);
    usleep(50000);
    char s = uproc_state(r.pid);
    cr_assert(s != 0 && s != 'Z', "child died after the revert (state %c)", s ? s : '0');
    injt_run_cleanup(&r);
}
