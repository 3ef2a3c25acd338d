/* preempt.c - the `preempt` fault: SIGTERM, a grace period, then SIGKILL.
 *
 * Like a cloud preemption notice. apply() sends SIGTERM to the group and
 * arms a deadline; tick() sends SIGKILL once the deadline passes if the same
 * process is still alive (checked by pid + /proc start time, so a restarted
 * unit is never hit). A revert before the deadline cancels the SIGKILL.
 *
 *   apply: TERM sent ──(tick, deadline, still alive: SIGKILL)──► done
 *        │                    └──(exited in time)────────────► done
 *        └──(revert before deadline)──► cancelled
 */
#include <assert.h>
#include <signal.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "injectors/inj_params.h"
#include "injectors/injector.h"
#include "injectors/unit_proc.h"

typedef enum { PREEMPT_IDLE, PREEMPT_GRACE, PREEMPT_DONE } preempt_phase;

typedef struct preempt_ctx {
    int64_t grace_ms;         /* SIGTERM → SIGKILL delay, ms */
    int64_t restart_after_ms; /* supervisor restart delay, -1 = never */
    preempt_phase phase;      /* see diagram */
    pid_t pid;                /* process that got SIGTERM */
    uint64_t starttime;       /* its /proc start time */
    int64_t deadline_ms;      /* monotonic time of the SIGKILL */
    int killed;               /* 1 if SIGKILL was needed */
} preempt_ctx;

enum { P_GRACE, P_RESTART };
static const inj_param preempt_params[] = {
    [P_GRACE] = {"grace_ms", INJ_INT, 0, 0, 600000, .def = 5000, .unit = "ms",
                 .help = "SIGTERM to SIGKILL; 0 = SIGKILL at once"},
    [P_RESTART] = {"restart_after_ms", INJ_INT, INJ_NODEF, 0, 86400000, .def = -1, .unit = "ms",
                   .help = "restart the unit this long after its exit; absent = do not restart"},
    {0},
};

static int preempt_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    (void)seed;
    inj_value v[2];
    int rc = inj_params_decode(params, preempt_params, v, err, errlen);
    if (rc)
        return rc;
    int64_t grace = v[P_GRACE].i, restart = v[P_RESTART].i;
    preempt_ctx *p = calloc(1, sizeof *p);
    if (!p)
        return cx_fail(err, errlen, CX_ENOMEM, "preempt ctx");
    p->grace_ms = grace;
    p->restart_after_ms = restart;
    *ctx = p;
    return 0;
}

/* Invariants of the diagram above (debug builds only). */
static void assert_preempt_state(const preempt_ctx *p)
{
    assert(p->phase != PREEMPT_IDLE || (p->pid == 0 && !p->killed));
    assert(p->phase != PREEMPT_GRACE || (p->pid > 0 && !p->killed));
    assert(!p->killed || p->phase == PREEMPT_DONE);
    (void)p;
}

/* 1 once the unit left: its leader and every process of its group. The
 * leader may exit within the grace period while processes it forked do
 * not: the supervisor keeps it unreaped (a zombie with the same start
 * time) until its group is empty, so -pid still names that group and what
 * is left of it gets the SIGKILL at the deadline. */
static int preempt_gone(const preempt_ctx *p)
{
    if (uproc_same(p->pid, p->starttime))
        return 0;
    return uproc_starttime(p->pid) != p->starttime || uproc_group_members(p->pid, NULL, 0) <= 0;
}

static void preempt_kill(preempt_ctx *p, inj_target *t)
{
    p->phase = PREEMPT_DONE;
    if (preempt_gone(p))
        return; /* exited, with its whole group, within the grace period */
    int fd = t && t->pid == p->pid ? t->pidfd : -1;
    if (uproc_signal_group(p->pid, fd, SIGKILL, NULL, NULL, 0) == 0) {
        p->killed = 1;
        cx_info("preempt: grace of %lld ms over, SIGKILL to process group %d", (long long)p->grace_ms,
                (int)p->pid);
    }
}

static int preempt_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    preempt_ctx *p = ctx;
    int rc = uproc_need_running(t->pid, err, errlen);
    if (rc)
        return rc;
    p->pid = t->pid;
    p->starttime = uproc_starttime(t->pid);
    if (t->expect_exit)
        t->expect_exit(t, p->restart_after_ms);
    const char *via = NULL;
    rc = uproc_signal_group(t->pid, t->pidfd, SIGTERM, &via, err, errlen);
    if (rc)
        return rc == CX_ENOTFOUND ? cx_fail(err, errlen, CX_ENOUNIT, "unit exited before the signal") : rc;
    p->deadline_ms = cx_mono_ms() + p->grace_ms;
    p->phase = PREEMPT_GRACE;
    if (p->grace_ms == 0)
        preempt_kill(p, t);
    json_object_set_new(evidence, "signal", json_string("TERM"));
    json_object_set_new(evidence, "pid", json_integer(t->pid));
    json_object_set_new(evidence, "via", json_string(via));
    json_object_set_new(evidence, "grace_ms", json_integer(p->grace_ms));
    json_object_set_new(evidence, "restart_after_ms",
                        p->restart_after_ms >= 0 ? json_integer(p->restart_after_ms) : json_null());
    return 0;
}

static void preempt_tick(void *ctx, inj_target *t, int64_t now_mono_ms)
{
    preempt_ctx *p = ctx;
    assert_preempt_state(p);
    if (p->phase != PREEMPT_GRACE)
        return;
    if (preempt_gone(p)) {
        p->phase = PREEMPT_DONE; /* left in time */
        return;
    }
    if (now_mono_ms >= p->deadline_ms)
        preempt_kill(p, t);
}

static int preempt_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    (void)t, (void)err, (void)errlen;
    preempt_ctx *p = ctx;
    if (p->phase == PREEMPT_GRACE)
        p->phase = PREEMPT_DONE; /* cancel the pending SIGKILL; a SIGTERM cannot be undone */
    return 0;
}

static json_t *preempt_undo_record(void *ctx)
{
    (void)ctx;
    return NULL;
}

static void preempt_free(void *ctx)
{
    free(ctx);
}

const injector inj_preempt = {
    .type = "preempt",
    .summary = "Preemption notice: SIGTERM to the unit's process group, then SIGKILL after grace_ms "
               "if it is still alive; restart after restart_after_ms, or never.",
    .params = preempt_params,
    .traits = INJ_TRAIT_TERMINATES | INJ_TRAIT_TAKES_DOWN,
    .prepare = preempt_prepare,
    .apply = preempt_apply,
    .tick = preempt_tick,
    .revert = preempt_revert,
    .undo_record = preempt_undo_record,
    .sweep = NULL,
    .free = preempt_free,
};
