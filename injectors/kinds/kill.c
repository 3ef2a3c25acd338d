/* kill.c - the `kill` fault: one signal to the unit's process group.
 *
 * apply() tells the supervisor to expect the exit (t->expect_exit, with the
 * restart delay) and then signals the group through unit_proc (pidfd check,
 * then kill(-pgid)). Nothing outlives the signal, so revert is a no-op and
 * there is no undo record; the restart is the supervisor's business.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "injectors/inj_params.h"
#include "injectors/injector.h"
#include "injectors/unit_proc.h"

typedef struct kill_ctx {
    char name[8];             /* canonical signal name without SIG: "KILL" */
    int sig;                  /* its number */
    int64_t restart_after_ms; /* delay before the supervisor restarts, -1 = never */
} kill_ctx;

/* The signals a kill fault may send (STOP/CONT belong to pause). */
static const char *const kill_names[] = {"KILL", "TERM", "INT",  "SEGV", "ABRT",
                                         "HUP",  "QUIT", "USR1", "USR2", NULL};

enum { P_SIGNAL, P_RESTART };
static const inj_param kill_params[] = {
    [P_SIGNAL] = {"signal", INJ_ENUM, INJ_CUSTOM, .max = 16, .def_str = "KILL", .values = kill_names,
                  .help = "the signal, with or without a SIG prefix"},
    [P_RESTART] = {"restart_after_ms", INJ_INT, INJ_NODEF, 0, 86400000, .def = -1, .unit = "ms",
                   .help = "restart the unit this long after its exit; absent = do not restart"},
    {0},
};

static int kill_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    (void)seed;
    inj_value v[2];
    const char *name = "KILL";
    int rc = inj_params_decode(params, kill_params, v, err, errlen);
    /* the SIG prefix is what the table cannot say: decoded here */
    if (!rc)
        rc = inj_param_string(params, "signal", 0, "KILL", 16, &name, err, errlen);
    if (rc)
        return rc;
    int64_t restart = v[P_RESTART].i;
    if (strncmp(name, "SIG", 3) == 0)
        name += 3;
    int known = 0;
    for (const char *const *n = kill_names; *n; n++)
        if (strcmp(*n, name) == 0)
            known = 1;
    if (!known)
        return cx_fail(
            err, errlen, CX_EINVAL,
            "params.signal: unknown signal '%s' (KILL, TERM, INT, SEGV, ABRT, HUP, QUIT, USR1, USR2)", name);
    kill_ctx *k = calloc(1, sizeof *k);
    if (!k)
        return cx_fail(err, errlen, CX_ENOMEM, "kill ctx");
    snprintf(k->name, sizeof k->name, "%s", name);
    k->sig = uproc_signal_from_name(name);
    k->restart_after_ms = restart;
    *ctx = k;
    return 0;
}

static int kill_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    kill_ctx *k = ctx;
    int rc = uproc_need_running(t->pid, err, errlen);
    if (rc)
        return rc;
    /* Before the signal: the supervisor's reaper may see the exit at once. */
    if (t->expect_exit)
        t->expect_exit(t, k->restart_after_ms);
    const char *via = NULL;
    rc = uproc_signal_group(t->pid, t->pidfd, k->sig, &via, err, errlen);
    if (rc)
        return rc == CX_ENOTFOUND ? cx_fail(err, errlen, CX_ENOUNIT, "unit exited before the signal") : rc;
    cx_info("kill: sent SIG%s to process group %d via %s", k->name, (int)t->pid, via);
    json_object_set_new(evidence, "signal", json_string(k->name));
    json_object_set_new(evidence, "signo", json_integer(k->sig));
    json_object_set_new(evidence, "pid", json_integer(t->pid));
    json_object_set_new(evidence, "via", json_string(via));
    json_object_set_new(evidence, "restart_after_ms",
                        k->restart_after_ms >= 0 ? json_integer(k->restart_after_ms) : json_null());
    return 0;
}

static int kill_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    (void)ctx, (void)t, (void)err, (void)errlen;
    return 0; /* a delivered signal cannot be undone; restarting is the supervisor's */
}

static json_t *kill_undo_record(void *ctx)
{
    (void)ctx;
    return NULL;
}

static void kill_free(void *ctx)
{
    free(ctx);
}

const injector inj_kill = {
    .type = "kill",
    .summary = "Send one signal to the unit's process group (through its pidfd); the supervisor "
               "treats the exit as injected and restarts the unit after restart_after_ms, or never.",
    .params = kill_params,
    .traits = INJ_TRAIT_TERMINATES | INJ_TRAIT_TAKES_DOWN,
    .prepare = kill_prepare,
    .apply = kill_apply,
    .tick = NULL,
    .revert = kill_revert,
    .undo_record = kill_undo_record,
    .sweep = NULL,
    .free = kill_free,
};
