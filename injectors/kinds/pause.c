/* pause.c - the `pause` fault: freeze the unit.
 *
 * Preferred method: the cgroup freezer (v1 freezer.state=FROZEN, v2
 * cgroup.freeze=1) on the unit's cgroup, after attaching the whole process
 * group to it; the process cannot tell it was frozen and no signal is
 * involved. Fallback (no writable freezer, or method "signal"): SIGSTOP to
 * the process group, undone with SIGCONT.
 *
 *   prepare ──► apply: method = freezer | signal ──► revert: thaw | SIGCONT
 *                                     sweep (after an agent crash): same, from
 *                                     the record {method, pid, starttime,
 *                                     cgroup_root, unit_id}
 *
 * The record's (pid, starttime) keeps a sweep from SIGCONTing a recycled
 * pid. A frozen or stopped unit that exits is fine: revert then succeeds.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/log.h"
#include "injectors/cgroup.h"
#include "injectors/inj_params.h"
#include "injectors/injector.h"
#include "injectors/unit_proc.h"

typedef enum { PAUSE_AUTO, PAUSE_FREEZER, PAUSE_SIGNAL } pause_method;

typedef struct pause_ctx {
    pause_method want;  /* requested method */
    pause_method used;  /* method apply() used (FREEZER or SIGNAL) */
    int applied;        /* 1 between a successful apply and revert */
    pid_t pid;          /* unit leader at apply */
    uint64_t starttime; /* its /proc start time */
    char root[512];     /* cgroup root of the set (freezer method) */
    char unit_id[65];   /* the unit's id (freezer method) */
} pause_ctx;

/* In pause_method order. */
static const char *const pause_methods[] = {"auto", "freezer", "signal", NULL};
static const inj_param pause_params[] = {
    {"method", INJ_ENUM, 0, .max = 16, .def_str = "auto", .values = pause_methods,
     .help = "auto: the freezer, else signals; freezer: 501 if unavailable; signal: SIGSTOP/SIGCONT"},
    {0},
};

static int pause_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    (void)seed;
    inj_value v[1];
    int rc = inj_params_decode(params, pause_params, v, err, errlen);
    if (rc)
        return rc;
    pause_method want = (pause_method)v[0].index;
    pause_ctx *p = calloc(1, sizeof *p);
    if (!p)
        return cx_fail(err, errlen, CX_ENOMEM, "pause ctx");
    p->want = want;
    *ctx = p;
    return 0;
}

/* Freeze through the cgroup; fills evidence. On failure nothing stays
 * frozen (the process may stay attached to the unit's cgroup, harmless). */
static int pause_freeze(pause_ctx *p, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    cg_set *s = NULL;
    int rc = cg_set_open(NULL, t->unit_id, &s, err, errlen);
    if (rc)
        return rc;
    if (!cg_set_available(s, CG_FREEZER)) {
        rc = cx_fail(err, errlen, CX_ENOTSUP, "no writable cgroup freezer: %s", cg_set_why(s, CG_FREEZER));
        goto out;
    }
    /* Freeze first: the agent put the unit into this cgroup when it spawned
     * it, so the effect lands with one write. The attach that follows (a
     * scan of all of /proc) only catches group members that are elsewhere;
     * they freeze as they join the frozen cgroup. It used to run first and
     * was most of this path's latency (docs/benchmarks.md). */
    rc = cg_set_freeze(s, 1, err, errlen);
    if (!rc) {
        rc = cg_set_attach_group(s, CG_FREEZER, t->pid, err, errlen);
        if (rc)
            (void)cg_set_freeze(s, 0, NULL, 0); /* nothing stays frozen */
    }
    if (rc)
        goto out;
    char state[64] = "";
    int frozen = 0;
    for (int i = 0; i < 10 && !frozen; i++) { /* v1 passes FREEZING; at most ~5 ms here */
        if (cg_set_freezer_state(s, state, sizeof state, &frozen, NULL, 0) != 0)
            break;
        if (!frozen)
            nanosleep(&(struct timespec){0, 500000}, NULL);
    }
    snprintf(p->root, sizeof p->root, "%s", cg_set_root(s));
    snprintf(p->unit_id, sizeof p->unit_id, "%s", t->unit_id);
    json_object_set_new(evidence, "method", json_string("freezer"));
    json_object_set_new(evidence, "cgroup", json_string(cg_set_dir(s, CG_FREEZER)));
    json_object_set_new(evidence, "freezer_state", json_string(state));
    json_object_set_new(evidence, "frozen", json_boolean(frozen));
    char st = uproc_state(t->pid); /* frozen, not stopped: no 'T' (v1 shows 'D') */
    char sbuf[2] = {st ? st : '?', '\0'};
    json_object_set_new(evidence, "proc_state", json_string(sbuf));
out:
    cg_set_free(s);
    return rc;
}

static int pause_stop(inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    const char *via = NULL;
    int rc = uproc_signal_group(t->pid, t->pidfd, SIGSTOP, &via, err, errlen);
    if (rc)
        return rc;
    char st = uproc_wait_state(t->pid, 'T', 10);
    char sbuf[2] = {st ? st : '?', '\0'};
    json_object_set_new(evidence, "method", json_string("signal"));
    json_object_set_new(evidence, "via", json_string(via));
    json_object_set_new(evidence, "proc_state", json_string(sbuf));
    return 0;
}

static int pause_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    pause_ctx *p = ctx;
    int rc = uproc_need_running(t->pid, err, errlen);
    if (rc)
        return rc;
    p->pid = t->pid;
    p->starttime = uproc_starttime(t->pid);
    rc = CX_ENOTSUP;
    char why[CX_ERRLEN] = "";
    if (p->want != PAUSE_SIGNAL) {
        rc = pause_freeze(p, t, evidence, why, sizeof why);
        if (rc == 0) {
            p->used = PAUSE_FREEZER;
        } else if (p->want == PAUSE_FREEZER) {
            return cx_fail(err, errlen, rc, "%s", why);
        } else {
            cx_warn("pause: freezer unusable (%s), falling back to SIGSTOP", why);
            json_object_set_new(evidence, "fallback_reason", json_string(why));
        }
    }
    if (rc != 0) {
        rc = pause_stop(t, evidence, err, errlen);
        if (rc)
            return rc;
        p->used = PAUSE_SIGNAL;
    }
    json_object_set_new(evidence, "pid", json_integer(t->pid));
    p->applied = 1;
    return 0;
}

/* Undo by method; shared by revert and sweep. */
static int pause_undo(pause_method used, pid_t pid, uint64_t starttime, const char *root, const char *unit_id,
                      int pidfd, char *err, size_t errlen)
{
    if (used == PAUSE_FREEZER) {
        cg_set *s = NULL;
        int rc = cg_set_open(root, unit_id, &s, err, errlen);
        if (rc)
            return rc;
        rc = cg_set_available(s, CG_FREEZER) ? cg_set_freeze(s, 0, err, errlen) : 0;
        cg_set_free(s);
        return rc;
    }
    if (!uproc_same(pid, starttime))
        return 0; /* gone: nothing is stopped any more */
    int rc = uproc_signal_group(pid, pidfd, SIGCONT, NULL, err, errlen);
    return rc == CX_ENOTFOUND ? 0 : rc;
}

static int pause_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    pause_ctx *p = ctx;
    if (!p->applied)
        return 0;
    int rc = pause_undo(p->used, p->pid, p->starttime, p->root, p->unit_id,
                        t && t->pid == p->pid ? t->pidfd : -1, err, errlen);
    if (rc == 0)
        p->applied = 0;
    return rc;
}

static json_t *pause_undo_record(void *ctx)
{
    pause_ctx *p = ctx;
    return json_pack("{s:s, s:I, s:I, s:s, s:s}", "method", p->used == PAUSE_FREEZER ? "freezer" : "signal",
                     "pid", (json_int_t)p->pid, "starttime", (json_int_t)p->starttime, "cgroup_root", p->root,
                     "unit_id", p->unit_id);
}

static int pause_sweep(json_t *record, inj_target *t, char *err, size_t errlen)
{
    const char *method = NULL, *root = NULL, *unit_id = NULL;
    json_int_t pid = 0, starttime = 0;
    json_error_t je;
    if (json_unpack_ex(record, &je, JSON_STRICT, "{s:s, s:I, s:I, s:s, s:s}", "method", &method, "pid", &pid,
                       "starttime", &starttime, "cgroup_root", &root, "unit_id", &unit_id) != 0)
        return cx_fail(err, errlen, CX_EINVAL, "pause undo record: %s", je.text);
    pause_method used = strcmp(method, "freezer") == 0 ? PAUSE_FREEZER : PAUSE_SIGNAL;
    return pause_undo(used, (pid_t)pid, (uint64_t)starttime, root[0] ? root : NULL,
                      unit_id[0] ? unit_id : (t ? t->unit_id : ""), -1, err, errlen);
}

static void pause_free(void *ctx)
{
    free(ctx);
}

const injector inj_pause = {
    .type = "pause",
    .summary = "Freeze the unit: cgroup freezer (v2 cgroup.freeze, v1 freezer.state) when writable, else "
               "SIGSTOP to its process group; revert thaws / SIGCONTs.",
    .params = pause_params,
    .traits = INJ_TRAIT_STOPS_UNIT | INJ_TRAIT_TAKES_DOWN,
    .prepare = pause_prepare,
    .apply = pause_apply,
    .tick = NULL,
    .revert = pause_revert,
    .undo_record = pause_undo_record,
    .sweep = pause_sweep,
    .free = pause_free,
};
