/* test_inj_straggle.c - the straggle fault: params, slowdown conversion and
 * the observed duty cycle of a real child. */
#include "inj_test.h"

#include "common/clock.h"

extern const injector inj_straggle;

TestSuite(inj_straggle);

Test(inj_straggle, params_are_strict)
{
    injt_bad(&inj_straggle, "{}", "stopped_ms");
    injt_bad(&inj_straggle, "{\"period_ms\":1000}", "stopped_ms");
    injt_bad(&inj_straggle, "{\"stopped_ms\":100,\"slowdown\":2}", "slowdown");
    injt_bad(&inj_straggle, "{\"period_ms\":100,\"stopped_ms\":100}", "stopped_ms");
    injt_bad(&inj_straggle, "{\"stopped_ms\":0}", "stopped_ms");
    injt_bad(&inj_straggle, "{\"period_ms\":10,\"stopped_ms\":5}", "period_ms");
    injt_bad(&inj_straggle, "{\"slowdown\":1.0}", "slowdown");
    injt_bad(&inj_straggle, "{\"slowdown\":\"2\"}", "slowdown");
    injt_bad(&inj_straggle, "{\"slowdown\":101}", "slowdown");
    injt_bad(&inj_straggle, "{\"slowdown\":2,\"jitter\":0.6}", "jitter");
    injt_bad(&inj_straggle, "{\"slowdown\":1.0015,\"period_ms\":50}", "slowdown"); /* < 1 ms stopped */
    injt_bad(&inj_straggle, "{\"slowdown\":2,\"speed\":1}", "speed");
    /* libFuzzer: a rejected slowdown left 0 behind, and 1/0 made the
     * stopped-time conversion cast -inf to int64 (undefined; caught with
     * -fsanitize=float-cast-overflow) */
    injt_bad(&inj_straggle, "{\"slowdown\":0}", "slowdown");
    injt_bad(&inj_straggle, "{\"slowdown\":-1e308}", "slowdown");
}

Test(inj_straggle, slowdown_converts_to_a_duty_cycle)
{
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target("u", pid, pidfd, "/tmp", NULL);
    void *ctx = injt_ok(&inj_straggle, "{\"slowdown\":1.18,\"jitter\":0.1}", 7);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_straggle.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    cr_assert_eq(json_integer_value(json_object_get(ev, "period_ms")), 1000);
    /* 1 - 1/1.18 = 0.1525... */
    cr_assert_eq(json_integer_value(json_object_get(ev, "stopped_ms")), 153);
    /* evidence is read within apply's 10 ms budget; on a loaded box the
     * stop may land later, so /proc is checked directly too */
    const char *ps = json_string_value(json_object_get(ev, "proc_state"));
    cr_assert(ps && strlen(ps) == 1, "proc_state evidence");
    cr_assert_eq(injt_wait_state(pid, 'T', 1000), 'T');
    cr_assert_eq(inj_straggle.revert(ctx, &t, err, sizeof err), 0);
    cr_assert_eq(injt_wait_state(pid, 'S', 1000), 'S');
    injt_reap(pid, pidfd);
    json_decref(ev);
    inj_straggle.free(ctx);
}

/* Drive tick every ~5 ms like the agent and sample the child's state: the
 * fraction of samples in 'T' must match stopped/period within 0.12. */
static double straggle_observe(const char *params, int ms)
{
    int pidfd;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target("u", pid, pidfd, "/tmp", NULL);
    void *ctx = injt_ok(&inj_straggle, params, 3);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_straggle.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    int64_t t0 = cx_mono_ms();
    long stopped = 0, samples = 0;
    while (cx_mono_ms() - t0 < ms) {
        inj_straggle.tick(ctx, &t, cx_mono_ms());
        char s = uproc_state(pid);
        samples++;
        stopped += s == 'T';
        usleep(5000);
    }
    cr_assert_eq(inj_straggle.revert(ctx, &t, err, sizeof err), 0, "revert: %s", err);
    cr_assert_eq(injt_wait_state(pid, 'S', 1000), 'S', "revert left the child stopped");
    injt_reap(pid, pidfd);
    json_decref(ev);
    inj_straggle.free(ctx);
    cr_assert(samples > 50, "too few samples (%ld)", samples);
    return (double)stopped / (double)samples;
}

Test(inj_straggle, duty_cycle_is_observed)
{
    double f = straggle_observe("{\"period_ms\":200,\"stopped_ms\":100}", 2400);
    cr_assert(f > 0.38 && f < 0.62, "stopped fraction %.3f, want 0.50 +- 0.12", f);
    f = straggle_observe("{\"period_ms\":250,\"stopped_ms\":50}", 2500);
    cr_assert(f > 0.08 && f < 0.32, "stopped fraction %.3f, want 0.20 +- 0.12", f);
}

Test(inj_straggle, follows_a_restarted_unit_and_sweeps)
{
    int pidfd, pidfd2;
    pid_t pid = injt_child(&pidfd, 0);
    inj_target t = injt_target("u", pid, pidfd, "/tmp", NULL);
    void *ctx = injt_ok(&inj_straggle, "{\"period_ms\":100,\"stopped_ms\":60}", 3);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_straggle.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    injt_reap(pid, pidfd); /* the unit dies; the supervisor restarts it */
    pid_t pid2 = injt_child(&pidfd2, 0);
    t.pid = pid2;
    t.pidfd = pidfd2;
    int64_t now = cx_mono_ms();
    inj_straggle.tick(ctx, &t, now);
    cr_assert_eq(injt_wait_state(pid2, 'T', 1000), 'T', "new unit not cycled");
    json_t *rec = inj_straggle.undo_record(ctx);
    cr_assert_eq(json_integer_value(json_object_get(rec, "pid")), pid2);
    inj_straggle.free(ctx); /* agent crash while the unit is stopped */
    cr_assert_eq(inj_straggle.sweep(rec, &t, err, sizeof err), 0, "sweep: %s", err);
    cr_assert_eq(injt_wait_state(pid2, 'S', 1000), 'S');
    injt_reap(pid2, pidfd2);
    json_decref(rec);
    json_decref(ev);
}
