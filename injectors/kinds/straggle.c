/* straggle.c - the `straggle` fault: a slow learner by duty-cycled pausing.
 *
 * The unit's process group is SIGSTOPped for stopped_ms of every period_ms
 * (unit_proc's duty cycle, driven by tick), so it makes progress at
 * (period - stopped) / period of its normal speed. Given {slowdown: s}
 * instead, the stopped fraction is 1 - 1/s (a unit that is s times slower),
 * over period_ms (default 1000). Signals rather than the freezer: a v1
 * freeze passes through FREEZING and may take longer than a tick.
 * Revert SIGCONTs a stopped unit and leaves it running.
 */
#include <stdlib.h>

#include "common/clock.h"
#include "common/err.h"
#include "injectors/inj_params.h"
#include "injectors/injector.h"
#include "injectors/unit_proc.h"

typedef struct straggle_ctx {
    uproc_duty duty; /* the cycle (period, stopped part, jitter, state) */
} straggle_ctx;

enum { P_PERIOD, P_STOPPED, P_SLOWDOWN, P_JITTER };
static const inj_param straggle_params[] = {
    [P_PERIOD] = {"period_ms", INJ_INT, 0, 50, 600000, .def = 1000, .unit = "ms", .help = "one duty cycle"},
    [P_STOPPED] = {"stopped_ms", INJ_INT, INJ_NODEF | INJ_CUSTOM, 1, 599999, .max_note = "period_ms-1",
                   .unit = "ms",
                   .help = "stopped part of each cycle; give exactly one of stopped_ms and slowdown"},
    [P_SLOWDOWN] = {"slowdown", INJ_NUMBER, INJ_NODEF | INJ_CUSTOM, 1.001, 100,
                    .help = "the unit runs 1/slowdown of its speed (stopped fraction 1-1/slowdown); "
                            "give exactly one of stopped_ms and slowdown"},
    [P_JITTER] = {"jitter", INJ_NUMBER, 0, 0, 0.5, .def = 0,
                  .help = "each cycle's stopped time scaled by U[1-jitter, 1+jitter]"},
    {0},
};

static int straggle_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    inj_value v[4];
    int64_t stopped = 0;
    double slowdown = 0;
    int rc = inj_params_decode(params, straggle_params, v, err, errlen);
    if (rc)
        return rc;
    int64_t period = v[P_PERIOD].i;
    double jitter = v[P_JITTER].d;
    const inj_param *ps = &straggle_params[P_STOPPED], *pw = &straggle_params[P_SLOWDOWN];
    int has_stopped = inj_param_has(params, "stopped_ms");
    int has_slowdown = inj_param_has(params, "slowdown");
    if (has_stopped == has_slowdown)
        return cx_fail(err, errlen, CX_EINVAL, "params.%s: give exactly one of stopped_ms and slowdown",
                       has_stopped ? "slowdown" : "stopped_ms");
    if (has_stopped) {
        rc = inj_param_int(params, ps->name, 1, 0, (int64_t)ps->min, period - 1, &stopped, err, errlen);
    } else {
        rc = inj_param_number(params, pw->name, 1, 0, pw->min, pw->max, &slowdown, err, errlen);
        /* only a valid slowdown is converted: 0 (the default of a rejected
         * value) gave -inf, and casting that to int64 is undefined */
        if (!rc)
            stopped = (int64_t)((double)period * (1.0 - 1.0 / slowdown) + 0.5);
        if (!rc && (stopped < 1 || stopped > period - 1))
            rc = cx_fail(err, errlen, CX_EINVAL,
                         "params.slowdown: %g over period_ms %lld gives a stopped time of %lld ms, outside "
                         "[1, period_ms-1]",
                         slowdown, (long long)period, (long long)stopped);
    }
    if (rc)
        return rc;
    straggle_ctx *s = calloc(1, sizeof *s);
    if (!s)
        return cx_fail(err, errlen, CX_ENOMEM, "straggle ctx");
    uproc_duty_init(&s->duty, period, stopped, jitter, seed);
    *ctx = s;
    return 0;
}

static int straggle_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    straggle_ctx *s = ctx;
    int rc = uproc_duty_start(&s->duty, t->pid, t->pidfd, cx_mono_ms(), err, errlen);
    if (rc)
        return rc == CX_ENOTFOUND ? cx_fail(err, errlen, CX_ENOUNIT, "unit is not running") : rc;
    char st = uproc_wait_state(t->pid, 'T', 10);
    char sbuf[2] = {st ? st : '?', '\0'};
    json_object_set_new(evidence, "method", json_string("signal"));
    json_object_set_new(evidence, "pid", json_integer(t->pid));
    json_object_set_new(evidence, "period_ms", json_integer(s->duty.period_ms));
    json_object_set_new(evidence, "stopped_ms", json_integer(s->duty.stopped_ms));
    json_object_set_new(evidence, "jitter", json_real(s->duty.jitter));
    json_object_set_new(evidence, "stopped_fraction",
                        json_real((double)s->duty.stopped_ms / (double)s->duty.period_ms));
    json_object_set_new(evidence, "proc_state", json_string(sbuf));
    return 0;
}

static void straggle_tick(void *ctx, inj_target *t, int64_t now_mono_ms)
{
    straggle_ctx *s = ctx;
    uproc_duty_tick(&s->duty, t->pid, t->pidfd, now_mono_ms);
}

static int straggle_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    straggle_ctx *s = ctx;
    return uproc_duty_stop(&s->duty, t ? t->pid : 0, t ? t->pidfd : -1, err, errlen);
}

static json_t *straggle_undo_record(void *ctx)
{
    straggle_ctx *s = ctx;
    return json_pack("{s:I, s:I}", "pid", (json_int_t)s->duty.pid, "starttime",
                     (json_int_t)s->duty.starttime);
}

/* After a crash the phase is unknown: SIGCONT the recorded process if it is
 * still the same one (SIGCONT to a running process is a no-op). */
static int straggle_sweep(json_t *record, inj_target *t, char *err, size_t errlen)
{
    (void)t;
    json_int_t pid = 0, starttime = 0;
    json_error_t je;
    if (json_unpack_ex(record, &je, JSON_STRICT, "{s:I, s:I}", "pid", &pid, "starttime", &starttime) != 0)
        return cx_fail(err, errlen, CX_EINVAL, "straggle undo record: %s", je.text);
    return uproc_duty_sweep((pid_t)pid, (uint64_t)starttime, err, errlen);
}

static void straggle_free(void *ctx)
{
    free(ctx);
}

const injector inj_straggle = {
    .type = "straggle",
    .summary = "Slow learner: SIGSTOP the unit's process group for stopped_ms of every period_ms "
               "(tick-driven, ~10 ms granularity), SIGCONT for the rest; revert leaves it running.",
    .params = straggle_params,
    .traits = INJ_TRAIT_STOPS_UNIT,
    .prepare = straggle_prepare,
    .apply = straggle_apply,
    .tick = straggle_tick,
    .revert = straggle_revert,
    .undo_record = straggle_undo_record,
    .sweep = straggle_sweep,
    .free = straggle_free,
};
