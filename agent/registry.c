/* registry.c - a fault's lifecycle: create (with persistence before apply
 * and the stop rule), expiry, revert.
 *
 * NOTES ON THE DESIGN OF A FAULT'S LIFECYCLE
 *
 *   reg_create(): validate ──► prepare() ──► stop rule ──► persist(applying) ──► apply()
 *        │ bad input: nothing     │ conflict: 409,            │ written under           │ ok       │ fails
 *        │ changed, 400           │ nothing changed           │ the lock                ▼          ▼
 *        ▼                        ▼                                                 ┌────────┐ ┌────────┐
 *   ┌──────────┐◄─────────────────┘                                                 │ active │ │ failed │
 *   │ rejected │   (stop rule: see "faults that stop the unit" below; a kill or     └────────┘ └────────┘
 *   └──────────┘    preempt ends the stopping faults there, before it is persisted and applied)
 *
 *     reg_tick(): tick()     │ expiry: end_fault("expiry")   → expired
 *                            │ reg_revert(): end_fault(reason) → reverted
 *                            │ reg_revert_all(): halt, lease, shutdown, unit_exit
 *                            ▼
 *                 revert() ──► ended list (last 1000) ──► unlock ──► write the snapshot (without it)
 *
 * Invariant: every fault in the active list is in faults.json with its
 * undo record; faults.json is rewritten (atomically) before apply, while
 * the lock is held, and again after the apply and after each revert, from
 * a snapshot taken under the lock and written once it is released (see
 * "registry: persistence" in reg_persist.c). A crash at any point leaves a file from which
 * sweep() can undo everything that may have been done.
 *
 * The persistence (snapshots of the active list, their writers) and the
 * crash sweep live in reg_persist.c; the records as JSON, the lookups and
 * the read-only queries in reg_records.c; what they share is in
 * reg_internal.h.
 */
#include "agent/registry.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/reg_internal.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/json.h"
#include "common/log.h"

/* ---- registry: construction ---- */

reg *reg_new(const char *state_dir, int64_t max_duration_ms, const reg_hooks *hooks, char *err, size_t errlen)
{
    reg *r = calloc(1, sizeof *r);
    size_t n = strlen(state_dir) + 16;
    if (r)
        r->path = malloc(n);
    if (!r || !r->path) {
        free(r);
        cx_fail(err, errlen, CX_ENOMEM, "registry: out of memory");
        return NULL;
    }
    snprintf(r->path, n, "%s/faults.json", state_dir);
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->wlock, NULL);
    r->max_duration_ms = max_duration_ms;
    r->hooks = *hooks;
    if (!r->hooks.find)
        r->hooks.find = injector_find;
    r->next_id = 1;
    r->faults_total = json_object();
    r->reverted_total = json_object();
    return r;
}

void reg_free(reg *r)
{
    if (!r)
        return;
    for (fault *f = r->active, *nx; f; f = nx) {
        nx = f->next;
        reg_fault_free(f);
    }
    for (fault *f = r->ended, *nx; f; f = nx) {
        nx = f->next;
        reg_fault_free(f);
    }
    json_decref(r->faults_total);
    json_decref(r->reverted_total);
    pthread_mutex_destroy(&r->lock);
    pthread_mutex_destroy(&r->wlock);
    free(r->path);
    free(r);
}

/* Move f (already unlinked) to the head of the ended list, trimming it. */
void reg_push_ended(reg *r, fault *f)
{
    if (f->ctx && f->inj && f->inj->free)
        f->inj->free(f->ctx);
    f->ctx = NULL;
    f->next = r->ended;
    r->ended = f;
    if (++r->nended > REG_KEEP_ENDED) {
        fault *p = r->ended;
        for (int i = 1; i < REG_KEEP_ENDED; i++)
            p = p->next;
        reg_fault_free(p->next);
        p->next = NULL;
        r->nended = REG_KEEP_ENDED;
    }
}

static void end_fault(reg *r, fault *f, const char *reason, fault_state final);

/* ---- registry: faults that stop the unit ----
 *
 * THE RULE (user docs: docs/faults.md, "Faults that stop the unit")
 *
 * Some kinds stop and resume the unit's processes: pause (freezer or
 * SIGSTOP), straggle (SIGSTOP/SIGCONT duty cycle) and cpu when it runs its
 * duty-cycle fallback. Two of them at once do not compose: one's SIGCONT
 * (or thaw) resumes what the other holds stopped, and whichever reverts
 * first lets the unit run while the other still says "active". So:
 *
 *   1. At most one active stopping fault per agent (the agent has one
 *      unit, whatever the target names). A second is refused with 409,
 *      naming the active fault. A cpu fault with method "auto" is stopping
 *      only if it falls back to its duty cycle; while another stopping
 *      fault is active it is prepared with method "cgroup" instead, and
 *      refused (409) if there is no writable cpu cgroup.
 *   2. A stopping fault is also refused while a preempt is in its grace
 *      period (until started + grace_ms): freezing the unit then would
 *      hold back the preempt's SIGKILL (a v1-frozen task acts on SIGKILL
 *      only after thaw) and its SIGTERM handler.
 *   3. kill and preempt end every active stopping fault first (revert:
 *      thaw / SIGCONT, revert_reason "unit_exit"; their ids go into the
 *      kill's evidence.ended_first), then send their signal, so it lands at
 *      once and the exit is reaped promptly. The restarted unit runs
 *      unstopped; a new pause/straggle may be requested for it.
 *
 * All of it lives here, in reg_create, keyed by the kinds' traits
 * (INJ_TRAIT_STOPS_UNIT and nonstop_method, INJ_TRAIT_TERMINATES); the
 * injectors know nothing of each other, and the rule names no kind.
 */

/* The stop rule knows kinds only by their traits (injectors/injector.h):
 * INJ_TRAIT_STOPS_UNIT with an optional nonstop_method, and
 * INJ_TRAIT_TERMINATES. */

static int is_terminating(const injector *inj)
{
    return inj && (inj->traits & INJ_TRAIT_TERMINATES);
}

/* A request: 0 never stops the unit, 1 stops it, 2 stops it only if its
 * method "auto" falls back (it may be steered to nonstop_method). */
static int request_stops(const injector *inj, json_t *params)
{
    if (!inj || !(inj->traits & INJ_TRAIT_STOPS_UNIT))
        return 0;
    if (!inj->nonstop_method)
        return 1;
    const char *m = json_string_value(json_object_get(params, "method"));
    if (!m || strcmp(m, "auto") == 0)
        return 2;
    return strcmp(m, inj->nonstop_method) == 0 ? 0 : 1;
}

/* An active fault stops the unit (by the method its apply used). */
static int active_stops(const fault *f)
{
    if (!f->inj || !(f->inj->traits & INJ_TRAIT_STOPS_UNIT))
        return 0;
    if (!f->inj->nonstop_method)
        return 1;
    const char *m = json_string_value(json_object_get(f->evidence, "method"));
    return !(m && strcmp(m, f->inj->nonstop_method) == 0);
}

/* "pause, straggle and cpu (but for method cgroup)": the kinds of the
 * table that stop the unit, for messages. */
static void stopping_kinds(char *buf, size_t len)
{
    const injector *k[16];
    int n = 0;
    for (const injector *const *p = injector_table; *p && n < 16; p++)
        if ((*p)->traits & INJ_TRAIT_STOPS_UNIT)
            k[n++] = *p;
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s%s%s%s",
                         i == 0       ? ""
                         : i == n - 1 ? " and "
                                      : ", ",
                         k[i]->type, k[i]->nonstop_method ? " (but for method " : "",
                         k[i]->nonstop_method ? k[i]->nonstop_method : "", k[i]->nonstop_method ? ")" : "");
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* The active fault a new stopping fault conflicts with (rules 1 and 2), or
 * NULL. Writes the 409 message into msg. Lock held. */
static const fault *stop_conflict(reg *r, int64_t now, char *msg, size_t msglen)
{
    for (const fault *f = r->active; f; f = f->next) {
        if (active_stops(f)) {
            char kinds[256];
            stopping_kinds(kinds, sizeof kinds);
            snprintf(msg, msglen,
                     "conflict: fault %s (%s) is active and stops the unit's processes; only one of "
                     "%s may be active at a time (DELETE /v1/faults/%s first, or wait for its expiry)",
                     f->id, f->type, kinds, f->id);
            return f;
        }
        json_t *g = json_object_get(f->evidence, "grace_ms");
        if (is_terminating(f->inj) && json_is_integer(g) &&
            now < f->started_mono_ms + (int64_t)json_integer_value(g)) {
            snprintf(msg, msglen,
                     "conflict: fault %s (%s) is in its grace period (SIGKILL due in %" PRId64
                     " ms); stopping the unit now would hold it back",
                     f->id, f->type, f->started_mono_ms + (int64_t)json_integer_value(g) - now);
            return f;
        }
    }
    return NULL;
}

/* ---- registry: create ---- */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* The request's own checks, before anything is looked up or locked: 0 or
 * CX_EINVAL with err naming the field. */
static int check_spec(const reg *r, const reg_spec *spec, const injector *inj, char *err, size_t errlen)
{
    if (!inj)
        return cx_fail(err, errlen, CX_EINVAL, "type: unknown fault type '%s'", spec->type);
    if (!spec->until_deleted && spec->duration_ms <= 0)
        return cx_fail(err, errlen, CX_EINVAL, "duration_ms: must be > 0 (got %" PRId64 ")",
                       spec->duration_ms);
    if (!spec->until_deleted && spec->duration_ms > r->max_duration_ms)
        return cx_fail(err, errlen, CX_EINVAL,
                       "duration_ms: %" PRId64 " is over the agent's cap of %" PRId64
                       " ms (--max-duration-ms)",
                       spec->duration_ms, r->max_duration_ms);
    if (spec->has_toxicity && !(spec->toxicity >= 0.0 && spec->toxicity <= 1.0))
        return cx_fail(err, errlen, CX_EINVAL, "toxicity: must be within [0, 1] (got %g)", spec->toxicity);
    if (spec->params && !json_is_object(spec->params))
        return cx_fail(err, errlen, CX_EINVAL, "params: must be an object");
    return 0;
}

/* Params the injector sees: the request's, plus toxicity for kinds that
 * take it (INJ_TRAIT_TOXICITY: the network toxics) so one field serves
 * both APIs. 0 and *out (new reference), or a negative code. */
static int injector_params(const reg_spec *spec, const injector *inj, json_t **out, char *err, size_t errlen)
{
    json_t *params = spec->params ? json_deep_copy(spec->params) : json_object();
    if (!params)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    int takes_toxicity = (inj->traits & INJ_TRAIT_TOXICITY) != 0;
    if (spec->has_toxicity && takes_toxicity && !json_object_get(params, "toxicity"))
        json_object_set_new(params, "toxicity", json_real(spec->toxicity));
    else if (spec->has_toxicity && spec->toxicity < 1.0 && !takes_toxicity) {
        json_decref(params);
        return cx_fail(err, errlen, CX_EINVAL, "toxicity: fault type '%s' does not take a toxicity",
                       spec->type);
    }
    *out = params;
    return 0;
}

/* prepare(), then faults that stop the unit: rules 1 and 2 (see above).
 * Checked after prepare so that bad params are a 400 whatever else is
 * active. A kind with a non-stopping method in conflict is prepared again
 * with it (params gets "method"; steered and steered_by say why and by
 * which fault); any other conflict is CX_ECONFLICT. Lock held. 0 with *ctx,
 * or a negative code (then *ctx is NULL or prepare's own failure). */
static int prepare_under_stop_rule(reg *r, const injector *inj, json_t *params, uint64_t seed, void **ctx,
                                   char *steered, size_t steered_len, char *steered_by, size_t steered_by_len,
                                   char *err, size_t errlen)
{
    int rc = inj->prepare(params, seed, ctx, err, errlen);
    int stops = rc == 0 ? request_stops(inj, params) : 0;
    if (stops) {
        char msg[CX_ERRLEN];
        const fault *c = stop_conflict(r, cx_mono_ms(), msg, sizeof msg);
        if (c && stops == 2) {
            inj->free(*ctx);
            *ctx = NULL;
            json_object_set_new(params, "method", json_string(inj->nonstop_method));
            rc = inj->prepare(params, seed, ctx, err, errlen);
            snprintf(steered, steered_len, "%s", msg);
            snprintf(steered_by, steered_by_len, "%s", c->id);
        } else if (c) {
            inj->free(*ctx);
            *ctx = NULL;
            rc = cx_fail(err, errlen, CX_ECONFLICT, "%s", msg);
        }
    }
    return rc;
}

/* Rule 3's step: end every active fault that stops the unit, so that a
 * kill/preempt (type) lands on a running unit. Their ids (new array), or
 * NULL when none was active. Lock held. */
static json_t *end_stopping_faults(reg *r, const char *type)
{
    json_t *ended_first = NULL;
    for (fault *g = r->active, *nx; g; g = nx) {
        nx = g->next;
        if (!active_stops(g))
            continue;
        if (!ended_first)
            ended_first = json_array();
        json_array_append_new(ended_first, json_string(g->id));
        cx_info("%s: ending %s (%s) first so that the signal lands on a running unit", type, g->id, g->type);
        end_fault(r, g, "unit_exit", F_REVERTED);
    }
    return ended_first;
}

/* f was applied: it expires duration_ms from now (never with duration 0:
 * until deleted), its undo record is the
 * one apply() completed, and it heads the active list. Lock held. */
static void fault_activate(reg *r, fault *f)
{
    f->expires_mono_ms = f->duration_ms > 0 ? f->started_mono_ms + f->duration_ms : INT64_MAX;
    json_decref(f->undo);
    f->undo = f->inj->undo_record ? f->inj->undo_record(f->ctx) : NULL;
    f->state = F_ACTIVE;
    f->next = r->active;
    r->active = f;
    r->nactive++;
    reg_count(r->faults_total, f->type, "applied");
}

/* Fill a new record (its id already set) from the request; takes ctx and
 * ended_first (may be NULL). */
static void fault_fill(fault *f, const reg_spec *spec, const injector *inj, const char *target, uint64_t seed,
                       void *ctx, json_t *ended_first, const char *steered_by)
{
    f->type = strdup(spec->type);
    f->inj = inj;
    f->target = strdup(target);
    f->params = spec->params ? json_deep_copy(spec->params) : json_object();
    f->duration_ms = spec->until_deleted ? 0 : spec->duration_ms;
    f->has_toxicity = spec->has_toxicity;
    f->toxicity = spec->toxicity;
    f->seed = seed;
    f->lease = spec->lease;
    f->origin = strdup(spec->origin ? spec->origin : "api");
    f->tag = dup_or_null(spec->tag);
    f->ctx = ctx;
    f->evidence = json_object();
    if (ended_first)
        json_object_set_new(f->evidence, "ended_first", ended_first);
    if (steered_by[0])
        json_object_set_new(f->evidence, "auto_method_steered_by", json_string(steered_by));
    f->undo = inj->undo_record ? inj->undo_record(ctx) : NULL;
    cx_iso_time(f->created_real, sizeof f->created_real, cx_real_ns());
}

/* err = before + err + after (cut to errlen). */
static void err_wrap(char *err, size_t errlen, const char *before, const char *after)
{
    char tmp[CX_ERRLEN];
    snprintf(tmp, sizeof tmp, "%s", err);
    snprintf(err, errlen, "%s%s%s", before, tmp, after);
}

int reg_create(reg *r, const reg_spec *spec, json_t **record, char *err, size_t errlen)
{
    *record = NULL;
    const injector *inj = spec->inj ? spec->inj : r->hooks.find(spec->type);
    const char *counted_type = inj ? spec->type : "unknown";
    int rc = check_spec(r, spec, inj, err, errlen);
    if (rc < 0)
        goto rejected_nolock;
    const char *target = spec->target ? spec->target : "unit";
    uint64_t seed = spec->has_seed ? spec->seed : (uint64_t)cx_real_ns() ^ ((uint64_t)getpid() << 32);
    seed &= (uint64_t)INT64_MAX; /* it is echoed as a JSON integer */

    json_t *params = NULL;
    if ((rc = injector_params(spec, inj, &params, err, errlen)) < 0)
        goto rejected_nolock;

    pthread_mutex_lock(&r->lock);
    if (r->nactive >= REG_MAX_ACTIVE) {
        pthread_mutex_unlock(&r->lock);
        json_decref(params);
        rc = cx_fail(err, errlen, CX_EBUSY, "too many active faults (%d)", REG_MAX_ACTIVE);
        goto rejected_nolock;
    }
    /* The target must exist before anything is prepared. */
    inj_target t;
    memset(&t, 0, sizeof t);
    rc = r->hooks.target_get(r->hooks.ctx, target, &t, err, errlen);
    if (rc < 0) {
        pthread_mutex_unlock(&r->lock);
        json_decref(params);
        if (rc == CX_ENOTFOUND)
            rc = CX_EINVAL; /* an unknown target is bad input here */
        goto rejected_nolock;
    }
    void *ctx = NULL;
    char steered[CX_ERRLEN] = ""; /* cpu "auto" steered away from its duty cycle: why */
    char steered_by[32] = "";     /* ... by this active fault */
    rc = prepare_under_stop_rule(r, inj, params, seed, &ctx, steered, sizeof steered, steered_by,
                                 sizeof steered_by, err, errlen);
    if (rc < 0) {
        r->hooks.target_put(r->hooks.ctx, &t);
        pthread_mutex_unlock(&r->lock);
        json_decref(params);
        if (rc == CX_EINVAL && strncmp(err, "params", 6) != 0)
            err_wrap(err, errlen, "params: ", ""); /* name where the problem is */
        goto rejected_nolock;
    }
    /* Rule 3: a kill/preempt ends the stopping faults first, so that its
     * signal lands on a running unit (only when there is a unit to hit:
     * otherwise apply refuses with 409 and nothing must change). */
    json_t *ended_first = NULL;
    if (is_terminating(inj) && t.pid > 0)
        ended_first = end_stopping_faults(r, spec->type);

    fault *f = calloc(1, sizeof *f);
    if (!f) {
        inj->free(ctx);
        r->hooks.target_put(r->hooks.ctx, &t);
        pending p = reg_pending_take(r); /* the faults rule 3 ended */
        pthread_mutex_unlock(&r->lock);
        reg_pending_write(r, p, "after ending the stopping faults");
        json_decref(params);
        json_decref(ended_first);
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    snprintf(f->id, sizeof f->id, "f-%" PRIu64, r->next_id++);
    json_decref(params);
    fault_fill(f, spec, inj, target, seed, ctx, ended_first, steered_by);

    /* Persist BEFORE apply: if we die inside apply, the sweep undoes it. */
    rc = reg_persist(r, f, err, errlen);
    if (rc < 0) {
        cx_error("fault %s not applied: cannot persist the registry: %s", f->id, err);
        r->hooks.target_put(r->hooks.ctx, &t);
        reg_count(r->faults_total, f->type, "failed");
        reg_fault_free(f);
        pthread_mutex_unlock(&r->lock);
        return rc;
    }
    f->started_mono_ms = cx_mono_ms();
    rc = inj->apply(ctx, &t, f->evidence, err, errlen);
    r->hooks.target_put(r->hooks.ctx, &t);
    if (rc == CX_ENOTSUP && steered[0]) {
        /* "auto" could only have fallen back to its duty cycle. */
        char head[2 * CX_ERRLEN];
        snprintf(head, sizeof head, "%s (method auto would fall back to its duty cycle: ", steered);
        err_wrap(err, errlen, head, ")");
        rc = CX_ECONFLICT;
    }
    if (rc < 0) {
        f->state = F_FAILED;
        f->error = strdup(err);
        f->ended_mono_ms = cx_mono_ms();
        reg_count(r->faults_total, f->type, "failed");
        pending p = reg_pending_take(r);
        *record = reg_fault_json(f, f->ended_mono_ms);
        cx_warn("fault %s (%s) failed to apply: %s", f->id, f->type, err);
        reg_push_ended(r, f);
        pthread_mutex_unlock(&r->lock);
        reg_pending_write(r, p, "after a failed apply");
        return rc;
    }
    fault_activate(r, f);
    /* The record with the undo after apply; written once the lock is
     * released (if it fails, the one written before apply stays). */
    pending p = reg_pending_take(r);
    char *ev = cx_json_dumps(f->evidence);
    cx_info("fault %s applied type=%s target=%s duration_ms=%" PRId64 "%s evidence=%s", f->id, f->type,
            f->target, f->duration_ms, f->duration_ms > 0 ? "" : " (until deleted)", ev ? ev : "{}");
    free(ev);
    *record = reg_fault_json(f, cx_mono_ms());
    pthread_mutex_unlock(&r->lock);
    reg_pending_write(r, p, "after an apply (the record written before it stays)");
    return 0;

rejected_nolock:
    pthread_mutex_lock(&r->lock);
    reg_count(r->faults_total, counted_type, "rejected");
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* ---- registry: revert ---- */

/* Unlink f from the active list, revert it, move it to ended. Lock held;
 * the caller writes faults.json (pending_take, then pending_write once the
 * lock is released). */
static void end_fault(reg *r, fault *f, const char *reason, fault_state final)
{
    fault **pp = &r->active;
    while (*pp && *pp != f)
        pp = &(*pp)->next;
    if (*pp)
        *pp = f->next;
    r->nactive--;
    inj_target t;
    memset(&t, 0, sizeof t);
    char err[CX_ERRLEN] = "";
    int rc = r->hooks.target_get(r->hooks.ctx, f->target, &t, err, sizeof err);
    if (rc == 0) {
        rc = f->inj->revert(f->ctx, &t, err, sizeof err);
        r->hooks.target_put(r->hooks.ctx, &t);
    } else if (rc == CX_ENOTFOUND) {
        /* The target went away with whatever this fault did to it. */
        json_object_set_new(f->evidence, "target_gone", json_true());
        rc = 0;
    }
    f->ended_mono_ms = cx_mono_ms();
    f->revert_reason = reason;
    f->state = final;
    if (rc < 0) {
        f->state = F_FAILED;
        free(f->error);
        f->error = strdup(err);
        cx_error("fault %s (%s) revert failed (%s): %s", f->id, f->type, reason, err);
    } else {
        cx_info("fault %s reverted type=%s reason=%s active_ms=%" PRId64, f->id, f->type, reason,
                f->ended_mono_ms - f->started_mono_ms);
    }
    reg_count(r->reverted_total, f->type, reason);
    reg_push_ended(r, f);
}

int reg_revert(reg *r, const char *id, const char *reason, json_t **out, char *err, size_t errlen)
{
    pthread_mutex_lock(&r->lock);
    fault *f = reg_find_active(r, id);
    int rc = 0;
    if (!f) {
        fault *e = reg_find_ended(r, id);
        if (e) {
            if (out)
                *out = reg_fault_json(e, cx_mono_ms());
            rc = cx_fail(err, errlen, CX_ECONFLICT, "fault %s has already ended (%s)", id,
                         reg_state_name(e->state));
        } else {
            rc = cx_fail(err, errlen, CX_ENOTFOUND, "no fault with id '%s'", id);
        }
        pthread_mutex_unlock(&r->lock);
        return rc;
    }
    end_fault(r, f, reason, F_REVERTED);
    if (out)
        *out = reg_fault_json(f, cx_mono_ms());
    if (f->state == F_FAILED)
        rc = cx_fail(err, errlen, CX_ESYS, "revert failed: %s", f->error ? f->error : "");
    pending p = reg_pending_take(r);
    pthread_mutex_unlock(&r->lock);
    reg_pending_write(r, p, "after a revert");
    return rc;
}

/* Which active faults a bulk revert takes; NULL/0 fields match all. */
typedef struct revert_sel {
    int lease_only;          /* only faults made under a lease */
    const char *target;      /* only faults on this target */
    const char *origin;      /* only faults of this origin ("api" when unset) */
    const char *except_type; /* never faults of this type */
} revert_sel;

static bool revert_selects(const revert_sel *sel, const fault *f)
{
    return !(sel->lease_only && !f->lease) && !(sel->target && strcmp(f->target, sel->target) != 0) &&
           !(sel->origin && strcmp(f->origin ? f->origin : "api", sel->origin) != 0) &&
           !(sel->except_type && strcmp(f->type, sel->except_type) == 0);
}

/* Revert every active fault sel selects, then persist once; how many. */
static int revert_selected(reg *r, const revert_sel *sel, const char *reason)
{
    int n = 0;
    pthread_mutex_lock(&r->lock);
    for (fault *f = r->active, *nx; f; f = nx) {
        nx = f->next;
        if (!revert_selects(sel, f))
            continue;
        end_fault(r, f, reason, F_REVERTED);
        n++;
    }
    pending p = {NULL, 0};
    if (n > 0)
        p = reg_pending_take(r);
    pthread_mutex_unlock(&r->lock);
    if (n > 0)
        reg_pending_write(r, p, "after a revert");
    return n;
}

int reg_revert_all(reg *r, const char *reason, int lease_only)
{
    revert_sel sel = {.lease_only = lease_only};
    return revert_selected(r, &sel, reason);
}

int reg_revert_match(reg *r, const char *target, const char *origin, const char *except_type,
                     const char *reason)
{
    revert_sel sel = {.target = target, .origin = origin, .except_type = except_type};
    return revert_selected(r, &sel, reason);
}

int reg_tick(reg *r, int64_t now)
{
    if (pthread_mutex_trylock(&r->lock) != 0)
        return CX_EBUSY;
    int expired = 0;
    for (fault *f = r->active, *nx; f; f = nx) {
        nx = f->next;
        if (now >= f->expires_mono_ms) {
            end_fault(r, f, "expiry", F_EXPIRED);
            expired++;
            continue;
        }
        if (f->inj->tick) {
            inj_target t;
            memset(&t, 0, sizeof t);
            char err[CX_ERRLEN];
            if (r->hooks.target_get(r->hooks.ctx, f->target, &t, err, sizeof err) == 0) {
                f->inj->tick(f->ctx, &t, now);
                r->hooks.target_put(r->hooks.ctx, &t);
            }
        }
    }
    pending p = {NULL, 0};
    if (expired)
        p = reg_pending_take(r);
    pthread_mutex_unlock(&r->lock);
    if (expired)
        reg_pending_write(r, p, "after an expiry");
    return 0;
}

int reg_try_active(reg *r, const char *type, int *total, int *of_type)
{
    if (pthread_mutex_trylock(&r->lock) != 0)
        return CX_EBUSY;
    *total = 0;
    *of_type = 0;
    for (fault *f = r->active; f; f = f->next) {
        (*total)++;
        if (type && strcmp(f->type, type) == 0)
            (*of_type)++;
    }
    pthread_mutex_unlock(&r->lock);
    return 0;
}
