/* cpu.c - the `cpu` fault: cap the unit's CPU time.
 *
 * Preferred: a CFS quota on the unit's cpu cgroup (v2 cpu.max "Q 100000",
 * v1 cpu.cfs_quota_us=Q with cpu.cfs_period_us=100000, Q = cpus * 100000
 * us), after attaching the process group. Fallback (no writable cpu cgroup,
 * or method "duty"): a SIGSTOP/SIGCONT duty cycle that lets the unit run
 * min(1, cpus / online CPUs) of each period_ms. That fraction is what keeps
 * a unit able to use every CPU at or below `cpus` on average; a
 * single-threaded unit is throttled harder than the quota would.
 *
 *   apply: method = cgroup (quota written) | duty (cycle started)
 *   revert: quota removed (-1 / "max") | SIGCONT; sweep: same from the record
 */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "injectors/cgroup.h"
#include "injectors/inj_params.h"
#include "injectors/injector.h"
#include "injectors/unit_proc.h"

typedef enum { CPU_AUTO, CPU_CGROUP, CPU_DUTY } cpu_method;

typedef struct cpu_ctx {
    double cpus;      /* CPUs allowed, 0.01..online CPUs */
    cpu_method want;  /* requested method */
    cpu_method used;  /* CPU_CGROUP or CPU_DUTY after apply */
    int applied;      /* 1 between apply and revert */
    char root[512];   /* cgroup root (cgroup method) */
    char unit_id[65]; /* unit id (cgroup method) */
    uproc_duty duty;  /* the cycle (duty method) */
    int duty_noop;    /* 1 if cpus >= online CPUs: the duty method stops nothing */
} cpu_ctx;

static double cpu_online(void)
{
    return (double)uproc_ncpus();
}

/* In cpu_method order. */
static const char *const cpu_methods[] = {"auto", "cgroup", "duty", NULL};
enum { P_CPUS, P_METHOD, P_PERIOD };
static const inj_param cpu_params[] = {
    [P_CPUS] = {"cpus", INJ_NUMBER, INJ_REQUIRED, 0.01, 1024, .max_fn = cpu_online, .max_note = "online CPUs",
                .help = "CPUs the unit may use"},
    [P_METHOD] = {"method", INJ_ENUM, 0, .max = 16, .def_str = "auto", .values = cpu_methods,
                  .help = "auto: the cgroup quota, else the duty cycle; cgroup: 501 if unavailable; duty: "
                          "SIGSTOP/SIGCONT duty cycle"},
    [P_PERIOD] = {"period_ms", INJ_INT, 0, 20, 10000, .def = 100, .unit = "ms", .help = "duty-cycle period"},
    {0},
};

static int cpu_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    inj_value v[3];
    int ncpu = uproc_ncpus();
    int rc = inj_params_decode(params, cpu_params, v, err, errlen);
    if (rc)
        return rc;
    double cpus = v[P_CPUS].d;
    int64_t period = v[P_PERIOD].i;
    cpu_method want = (cpu_method)v[P_METHOD].index;
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return cx_fail(err, errlen, CX_ENOMEM, "cpu ctx");
    c->cpus = cpus;
    c->want = want;
    double run = cpus / (double)ncpu;
    if (run > 1)
        run = 1;
    int64_t stopped = (int64_t)((double)period * (1.0 - run) + 0.5);
    if (stopped > period - 1)
        stopped = period - 1;
    c->duty_noop = stopped < 1;
    uproc_duty_init(&c->duty, period, stopped < 1 ? 1 : stopped, 0, seed);
    *ctx = c;
    return 0;
}

static int cpu_quota(cpu_ctx *c, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    cg_set *s = NULL;
    int rc = cg_set_open(NULL, t->unit_id, &s, err, errlen);
    if (rc)
        return rc;
    char contents[128] = "";
    if (!cg_set_available(s, CG_CPU))
        rc = cx_fail(err, errlen, CX_ENOTSUP, "no writable cpu cgroup: %s", cg_set_why(s, CG_CPU));
    if (!rc)
        rc = cg_set_attach_group(s, CG_CPU, t->pid, err, errlen);
    if (!rc)
        rc = cg_set_cpu_quota(s, c->cpus, contents, sizeof contents, err, errlen);
    if (!rc) {
        snprintf(c->root, sizeof c->root, "%s", cg_set_root(s));
        snprintf(c->unit_id, sizeof c->unit_id, "%s", t->unit_id);
        json_object_set_new(evidence, "method", json_string("cgroup"));
        json_object_set_new(evidence, "cgroup", json_string(cg_set_dir(s, CG_CPU)));
        json_object_set_new(evidence, "quota", json_string(contents));
    }
    cg_set_free(s);
    return rc;
}

static int cpu_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    cpu_ctx *c = ctx;
    int rc = uproc_need_running(t->pid, err, errlen);
    if (rc)
        return rc;
    rc = CX_ENOTSUP;
    char why[CX_ERRLEN] = "";
    if (c->want != CPU_DUTY) {
        rc = cpu_quota(c, t, evidence, why, sizeof why);
        if (rc == 0) {
            c->used = CPU_CGROUP;
        } else if (c->want == CPU_CGROUP) {
            return cx_fail(err, errlen, rc, "%s", why);
        } else {
            cx_warn("cpu: cgroup quota unusable (%s), falling back to a duty cycle", why);
            json_object_set_new(evidence, "fallback_reason", json_string(why));
        }
    }
    if (rc != 0) {
        if (!c->duty_noop) {
            rc = uproc_duty_start(&c->duty, t->pid, t->pidfd, cx_mono_ms(), err, errlen);
            if (rc)
                return rc == CX_ENOTFOUND ? cx_fail(err, errlen, CX_ENOUNIT, "unit is not running") : rc;
        }
        c->used = CPU_DUTY;
        json_object_set_new(evidence, "method", json_string("duty"));
        json_object_set_new(evidence, "period_ms", json_integer(c->duty.period_ms));
        json_object_set_new(evidence, "stopped_ms", json_integer(c->duty_noop ? 0 : c->duty.stopped_ms));
    }
    json_object_set_new(evidence, "cpus", json_real(c->cpus));
    json_object_set_new(evidence, "pid", json_integer(t->pid));
    c->applied = 1;
    return 0;
}

static void cpu_tick(void *ctx, inj_target *t, int64_t now_mono_ms)
{
    cpu_ctx *c = ctx;
    if (c->applied && c->used == CPU_DUTY && !c->duty_noop)
        uproc_duty_tick(&c->duty, t->pid, t->pidfd, now_mono_ms);
}

static int cpu_clear(const char *root, const char *unit_id, char *err, size_t errlen)
{
    cg_set *s = NULL;
    int rc = cg_set_open(root, unit_id, &s, err, errlen);
    if (rc)
        return rc;
    if (cg_set_available(s, CG_CPU))
        rc = cg_set_cpu_quota(s, 0, NULL, 0, err, errlen);
    cg_set_free(s);
    return rc;
}

static int cpu_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    cpu_ctx *c = ctx;
    if (!c->applied)
        return 0;
    int rc = c->used == CPU_CGROUP
                 ? cpu_clear(c->root, c->unit_id, err, errlen)
                 : uproc_duty_stop(&c->duty, t ? t->pid : 0, t ? t->pidfd : -1, err, errlen);
    if (rc == 0)
        c->applied = 0;
    return rc;
}

static json_t *cpu_undo_record(void *ctx)
{
    cpu_ctx *c = ctx;
    return json_pack("{s:s, s:s, s:s, s:I, s:I}", "method", c->used == CPU_CGROUP ? "cgroup" : "duty",
                     "cgroup_root", c->root, "unit_id", c->unit_id, "pid", (json_int_t)c->duty.pid,
                     "starttime", (json_int_t)c->duty.starttime);
}

static int cpu_sweep(json_t *record, inj_target *t, char *err, size_t errlen)
{
    (void)t;
    const char *method = NULL, *root = NULL, *unit_id = NULL;
    json_int_t pid = 0, starttime = 0;
    json_error_t je;
    if (json_unpack_ex(record, &je, JSON_STRICT, "{s:s, s:s, s:s, s:I, s:I}", "method", &method,
                       "cgroup_root", &root, "unit_id", &unit_id, "pid", &pid, "starttime", &starttime) != 0)
        return cx_fail(err, errlen, CX_EINVAL, "cpu undo record: %s", je.text);
    if (strcmp(method, "cgroup") == 0)
        return cpu_clear(root[0] ? root : NULL, unit_id, err, errlen);
    return uproc_duty_sweep((pid_t)pid, (uint64_t)starttime, err, errlen);
}

static void cpu_free(void *ctx)
{
    free(ctx);
}

const injector inj_cpu = {
    .type = "cpu",
    .summary = "Cap the unit's CPU time: CFS quota cpus*100 ms per 100 ms period on its cpu cgroup "
               "(v2 cpu.max, v1 cpu.cfs_quota_us), else a SIGSTOP/SIGCONT duty cycle running "
               "min(1, cpus/online CPUs) of each period.",
    .params = cpu_params,
    .traits = INJ_TRAIT_STOPS_UNIT,
    .nonstop_method = "cgroup", /* "duty" stops; "auto" stops only when it falls back */
    .prepare = cpu_prepare,
    .apply = cpu_apply,
    .tick = cpu_tick,
    .revert = cpu_revert,
    .undo_record = cpu_undo_record,
    .sweep = cpu_sweep,
    .free = cpu_free,
};
