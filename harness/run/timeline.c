/* timeline.c - the runner's actions (see timeline.h): the timeline (fire
 * each entry when due, the live floor, heal checks), the harness's own
 * syncer fault, and the revert at the end (active faults, rollbacks, halt
 * on abort, leases). */
#include "harness/run/timeline.h"

#include "harness/run/runner.h"

#include <assert.h>
#include <inttypes.h>
#include <string.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/log.h"
#include "harness/fault_kinds.h"
#include "common/err.h"

/* ---- timeline: state ---- */

int timeline_init(runner *r)
{
    r->tl.fx = calloc((size_t)(r->setup.sched->n ? r->setup.sched->n : 1), sizeof *r->tl.fx);
    r->tl.acts = json_array();
    r->tl.rb = calloc((size_t)(r->setup.e->nrollbacks ? r->setup.e->nrollbacks : 1), sizeof *r->tl.rb);
    if (!r->tl.fx || !r->tl.acts || !r->tl.rb)
        return CX_ENOMEM;
    for (int i = 0; i < r->setup.e->nrollbacks; i++)
        r->tl.rb[i].n = exp_rollback_targets(r->setup.e, &r->setup.e->rollbacks[i], r->tl.rb[i].ids);
    return 0;
}

void timeline_cleanup(runner *r)
{
    free(r->tl.fx);
    free(r->tl.rb);
    json_decref(r->tl.acts);
    r->tl.fx = NULL;
    r->tl.rb = NULL;
    r->tl.acts = NULL;
}

/* ---- timeline: firing ---- */

static int unit_running(const agent_view *a)
{
    return strcmp(a->unit_state, "running") == 0 || strcmp(a->unit_state, "paused") == 0 ||
           strcmp(a->unit_state, "starting") == 0;
}

/* Learners under an unhealed down-kind fault of ours, or not running. */
static int busy_learners(runner *r, int except)
{
    int n = 0;
    for (int l = 0; l < r->setup.m; l++) {
        if (l == except)
            continue;
        int busy = !unit_running(&r->col.av[l]);
        for (int k = 0; k < r->setup.sched->n && !busy; k++) {
            sched_entry *se = &r->setup.sched->entries[k];
            if (se->learner == l && r->tl.fx[k].ok && !r->tl.fx[k].healed &&
                hx_kind_takes_unit_down(se->fault))
                busy = 1;
        }
        n += busy;
    }
    return n;
}

void timeline_action_event(runner *r, const char *phase, const sched_entry *se, int learner, const char *fid,
                           const char *error)
{
    json_t *ev = jr_action_event(phase, se->name, se->fault, learner, fid, error);
    if (!ev)
        return;
    json_array_append(r->tl.acts, ev);
    run_emit(r, ev);
}

/* The harness's own fault (hx_harness_kinds: today syncer_restart alone):
 * kill the syncer now, restart it after down_ms. */
static void fire_syncer_fault(runner *r, int k)
{
    sched_entry *se = &r->setup.sched->entries[k];
    fired *f = &r->tl.fx[k];
    int64_t t0 = cx_real_ns();
    f->fired = 1;
    f->start_mono = cx_mono_ms();
    timeline_action_event(r, "invoke", se, -1, NULL, NULL);
    const char *sig = json_string_value(json_object_get(se->params, "signal"));
    int signo = sig && (strcmp(sig, "TERM") == 0 || strcmp(sig, "SIGTERM") == 0) ? SIGTERM : SIGKILL;
    json_t *dm = json_object_get(se->params, "down_ms");
    int64_t down_ms = json_is_integer(dm) ? json_integer_value(dm) : se->duration_ms;
    char err[CX_ERRLEN] = "";
    if (r->tl.syncer_down || topo_syncer_kill(r->setup.t, signo, err, sizeof err) < 0) {
        if (!err[0])
            snprintf(err, sizeof err, "the syncer is already down");
        timeline_action_event(r, "fail", se, -1, NULL, err);
        journal_add_action(r->j, 0, se->name, se->fault, -1, "failed", NULL, t0, cx_real_ns());
        f->healed = 1;
        run_set_error(r, "action %s: %s", se->name, err);
        return;
    }
    f->ok = 1;
    snprintf(f->fault_id, sizeof f->fault_id, "syncer");
    r->tl.syncer_down = 1;
    r->tl.syncer_up_at = cx_mono_ms() + down_ms;
    r->tl.syncer_entry = k;
    timeline_action_event(r, "ok", se, -1, "syncer", NULL);
    json_t *out =
        json_pack("{s:s,s:I}", "signal", signo == SIGKILL ? "KILL" : "TERM", "down_ms", (json_int_t)down_ms);
    journal_add_action(r->j, 0, se->name, se->fault, -1, "succeeded", out, t0, cx_real_ns());
    json_decref(out);
    cx_info("action %s: syncer killed (SIG%s), restart in %" PRId64 " ms", se->name,
            signo == SIGKILL ? "KILL" : "TERM", down_ms);
}

void timeline_maybe_restart_syncer(runner *r)
{
    if (!r->tl.syncer_down || cx_mono_ms() < r->tl.syncer_up_at)
        return;
    char err[CX_ERRLEN] = "";
    output_progress_end(r);
    int rc = topo_syncer_start(r->setup.t, 30000, err, sizeof err);
    r->tl.syncer_down = 0;
    r->tl.fx[r->tl.syncer_entry].healed = 1;
    r->tl.fx[r->tl.syncer_entry].healed_mono = cx_mono_ms();
    collect_merge_clock_at_least(r, cx_mono_ms()); /* the no-merge clock restarts with the syncer */
    if (rc < 0) {
        run_emit_run(r, "syncer_restart_failed", err);
        run_set_error(r, "restarting the syncer: %s", err);
        return;
    }
    run_emit_run(r, "syncer_restarted", topo_syncer_url(r->setup.t));
    cx_info("syncer restarted url=%s", topo_syncer_url(r->setup.t));
}

/* A method action whose unit is not running (not started yet, restarting,
 * finished) waits for it up to its wait_ms (if_not_running "wait"), or not at
 * all ("skip"), then is skipped and the skip recorded (journal, events):
 * never an error that aborts the run. Returns 1 when the action must not be
 * sent now (f->fired stays 0 while waiting). */
static int wait_for_unit(runner *r, int k, const char *state)
{
    sched_entry *se = &r->setup.sched->entries[k];
    fired *f = &r->tl.fx[k];
    int64_t now = cx_mono_ms();
    if (!f->wait_since) {
        f->wait_since = now;
        if (se->wait_ms > 0)
            cx_info("action %s: learner %d is %s; waiting up to %.1f s for it to run", se->name, se->learner,
                    state, (double)se->wait_ms / 1000.0);
    }
    if (now - f->wait_since < se->wait_ms) {
        f->fired = 0;
        return 1;
    }
    char why[160];
    if (se->wait_ms > 0)
        snprintf(why, sizeof why, "unit %d was %s for %.1f s: skipped", se->learner, state,
                 (double)se->wait_ms / 1000.0);
    else
        snprintf(why, sizeof why, "unit %d was %s: skipped (if_not_running \"skip\")", se->learner, state);
    f->fired = f->skipped = f->healed = 1;
    timeline_action_event(r, "skip", se, se->learner, NULL, why);
    int64_t t = cx_real_ns();
    json_t *out = json_pack("{s:s}", "skipped", why); /* not sent: "failed" in Chaos Toolkit's terms */
    journal_add_action(r->j, 0, se->name, se->fault, se->learner, "failed", out, t, t);
    json_decref(out);
    cx_warn("action %s: %s", se->name, why);
    return 1;
}

timeline_refusal timeline_on_refusal(int method_action, agc_reason why)
{
    switch (why) {
    case AGC_R_UNIT_NOT_RUNNING:
        /* a method action waits for its unit (if_not_running); a chaos
         * draw was checked against the runner's view before it was sent,
         * and a refusal then is an error */
        return method_action ? TL_REFUSAL_WAIT : TL_REFUSAL_ERROR;
    case AGC_R_HALTED:
        return TL_REFUSAL_ABORT;
    default:
        return TL_REFUSAL_ERROR;
    }
}

static void fire(runner *r, int k)
{
    assert(r->state == RS_METHOD); /* from REVERT on nothing new is injected */
    output_progress_end(r);
    sched_entry *se = &r->setup.sched->entries[k];
    fired *f = &r->tl.fx[k];
    if (hx_kind_is_harness(se->fault)) {
        /* one syncer fault per action, whatever its targets */
        for (int j = 0; j < k; j++)
            if (r->setup.sched->entries[j].action == se->action && se->action >= 0 && r->tl.fx[j].fired) {
                f->fired = f->healed = f->skipped = 1;
                return;
            }
        fire_syncer_fault(r, k);
        return;
    }
    int l = se->learner;
    f->fired = 1;
    f->start_mono = cx_mono_ms();
    if (se->action >= 0 && !unit_running(&r->col.av[l]) && wait_for_unit(r, k, r->col.av[l].unit_state))
        return;
    if (se->action < 0) {
        /* chaos draws keep the live floor at run time too */
        const char *skip = NULL;
        char why[128];
        if (!unit_running(&r->col.av[l])) {
            snprintf(why, sizeof why, "unit %d is %s", l, r->col.av[l].unit_state);
            skip = why;
        } else if (hx_kind_takes_unit_down(se->fault) &&
                   r->setup.m - busy_learners(r, l) - 1 < r->setup.e->chaos.min_live) {
            snprintf(why, sizeof why, "would leave fewer than %d learners alive", r->setup.e->chaos.min_live);
            skip = why;
        }
        if (skip) {
            f->skipped = f->healed = 1;
            json_t *ev = jr_action_event("skip", se->name, se->fault, l, NULL, skip);
            run_emit(r, ev);
            cx_info("chaos %s on learner %d skipped: %s", se->name, l, skip);
            return;
        }
    }
    int64_t t0 = cx_real_ns();
    timeline_action_event(r, "invoke", se, l, NULL, NULL);
    json_t *body = json_pack("{s:s,s:O,s:I,s:I}", "type", se->fault, "params", se->params, "duration_ms",
                             (json_int_t)se->duration_ms, "seed", (json_int_t)se->seed);
    if (se->has_toxicity)
        json_object_set_new(body, "toxicity", json_real(se->toxicity));
    agc_reply rep;
    agc_reply_init(&rep);
    char err[CX_ERRLEN] = "";
    agc_inject(r->col.av[l].agent, body, &rep, err, sizeof err);
    json_decref(body);
    int st = rep.status;
    agc_reason why = rep.reason;
    json_t *ans = agc_reply_take_json(&rep);
    agc_reply_cleanup(&rep);
    const char *id = json_string_value(json_object_get(ans, "id"));
    if (run_http_ok(st) && id) {
        f->ok = 1;
        snprintf(f->fault_id, sizeof f->fault_id, "%s", id);
        timeline_action_event(r, "ok", se, l, id, NULL);
        journal_add_action(r->j, 0, se->name, se->fault, l, "succeeded", ans, t0, cx_real_ns());
        cx_info("action %s: %s on learner %d for %" PRId64 " ms -> fault %s", se->name, se->fault, l,
                se->duration_ms, id);
    } else {
        char msg[CX_ERRLEN + 64];
        run_answer_error(ans, st, err, msg, sizeof msg);
        timeline_refusal then = timeline_on_refusal(se->action >= 0, why);
        if (then == TL_REFUSAL_WAIT) {
            /* our view of the unit was stale: wait for it like above */
            json_decref(ans);
            collect_mark_not_running(r, l);
            wait_for_unit(r, k, "not running");
            return;
        }
        f->healed = 1;
        timeline_action_event(r, "fail", se, l, NULL, msg);
        json_t *rec = json_object_get(ans, "fault");
        journal_add_action(r->j, 0, se->name, se->fault, l, "failed", rec ? rec : ans, t0, cx_real_ns());
        if (then == TL_REFUSAL_ABORT)
            run_set_abort(r, "agent %d is halted: %s", l, msg);
        else
            run_set_error(r, "action %s on learner %d: %s", se->name, l, msg);
    }
    json_decref(ans);
}

/* Has every fault of method action a ended? */
static int action_healed(runner *r, int a)
{
    int any = 0;
    for (int k = 0; k < r->setup.sched->n; k++) {
        if (r->setup.sched->entries[k].action != a)
            continue;
        any = 1;
        if (!r->tl.fx[k].fired || !r->tl.fx[k].healed)
            return 0;
    }
    return any;
}

/* Heal checks: a fault past its duration is asked for its state. */
static void check_heals(runner *r)
{
    int64_t now = cx_mono_ms();
    for (int k = 0; k < r->setup.sched->n; k++) {
        fired *f = &r->tl.fx[k];
        sched_entry *se = &r->setup.sched->entries[k];
        if (!f->ok || f->healed || hx_kind_is_harness(se->fault))
            continue;
        if (now < f->start_mono + se->duration_ms || now - f->last_check < 500)
            continue;
        f->last_check = now;
        agc_reply rep;
        agc_reply_init(&rep);
        agc_fault(r->col.av[se->learner].agent, f->fault_id, &rep, NULL, 0);
        const char *state = json_string_value(json_object_get(rep.json, "state"));
        if ((rep.status == 200 && state && strcmp(state, "active") != 0) || rep.status == 404) {
            f->healed = 1;
            f->healed_mono = now;
        }
        agc_reply_cleanup(&rep);
    }
}

static int entry_due(runner *r, int k)
{
    sched_entry *se = &r->setup.sched->entries[k];
    switch (se->when) {
    case EXP_AT_S:
        return run_now_s_since(r->method_mono) >= se->at_s;
    case EXP_AT_OUTER_STEP:
        return !r->tl.syncer_down && r->col.merges >= se->at_outer_step;
    case EXP_AFTER:
        return action_healed(r, se->after);
    }
    return 0;
}

void timeline_play(runner *r)
{
    for (int k = 0; k < r->setup.sched->n && !r->abort && !r->error && !run_interrupted(); k++)
        if (!r->tl.fx[k].fired && entry_due(r, k))
            fire(r, k);
    check_heals(r);
    timeline_maybe_restart_syncer(r);
}

/* Entries the horizon waits for: not fired yet, or fired and not healed
 * (an until_end fault, once fired, lasts until the run ends instead). */
int timeline_pending(runner *r)
{
    int n = 0;
    for (int k = 0; k < r->setup.sched->n; k++)
        n += !r->tl.fx[k].fired ||
             (r->tl.fx[k].ok && !r->tl.fx[k].healed && !r->setup.sched->entries[k].until_end);
    return n;
}

void timeline_end_method(runner *r)
{
    /* an action that never came due is an injection that did not happen */
    if (!r->abort && !r->error)
        for (int k = 0; k < r->setup.sched->n; k++)
            if (!r->tl.fx[k].fired && r->setup.sched->entries[k].action >= 0) {
                sched_entry *se = &r->setup.sched->entries[k];
                r->tl.fx[k].fired = r->tl.fx[k].healed = 1;
                timeline_action_event(r, "fail", se, se->learner, NULL,
                                      "training ended before this action was due");
                run_set_error(r, "action %s (learner %d) never came due before training ended", se->name,
                              se->learner);
            }
    if (r->tl.syncer_down) {
        r->tl.syncer_up_at = 0;
        timeline_maybe_restart_syncer(r);
    }
}

int timeline_active(runner *r)
{
    int n = 0;
    for (int k = 0; k < r->setup.sched->n; k++)
        n += r->tl.fx[k].ok && !r->tl.fx[k].healed;
    return n;
}

/* ---- timeline: revert ---- */

static void delete_active(runner *r, int l, const char *why)
{
    json_t *list = NULL;
    agc_faults(r->col.av[l].agent, &list, NULL, 0);
    size_t i;
    json_t *rec;
    json_array_foreach(list, i, rec)
    {
        if (strcmp(run_jstr(rec, "state"), "active") != 0)
            continue;
        const char *id = json_string_value(json_object_get(rec, "id"));
        agc_reply d;
        agc_reply_init(&d);
        agc_delete_fault(r->col.av[l].agent, id ? id : "", &d, NULL, 0);
        int dst = d.status;
        agc_reply_cleanup(&d);
        if (!run_http_ok(dst))
            cx_warn("revert of fault %s on agent %d failed (HTTP %d) (%s)", id, l, dst, why);
        else
            cx_info("reverted fault %s on learner %d (%s)", id, l, why);
    }
    json_decref(list);
}

/* call (agc_halt, agc_resume) on agent l: its HTTP status (0: no answer)
 * and its answer in *ans (new reference or NULL). */
static int agent_post(runner *r, int l, agc_call_fn call, json_t **ans)
{
    agc_reply rep;
    agc_reply_init(&rep);
    call(r->col.av[l].agent, &rep, NULL, 0);
    int st = rep.status;
    *ans = agc_reply_take_json(&rep);
    agc_reply_cleanup(&rep);
    return st;
}

void timeline_revert(runner *r)
{
    int aborted = r->abort || r->error || run_interrupted();
    for (int l = 0; l < r->setup.m; l++)
        delete_active(r, l, "end of run");
    /* rollbacks from the file, whatever happened */
    for (int i = 0; i < r->setup.e->nrollbacks; i++) {
        exp_rollback *rb = &r->setup.e->rollbacks[i];
        const char *kind = exp_rollback_kind_name(rb->kind);
        const rollback_plan *plan = &r->tl.rb[i];
        for (int k = 0; k < plan->n; k++) {
            int l = plan->ids[k];
            int64_t t0 = cx_real_ns();
            int st = 200;
            json_t *ans = NULL;
            if (rb->kind == EXP_RB_REVERT_FAULTS)
                delete_active(r, l, rb->name);
            else
                st = agent_post(r, l, rb->kind == EXP_RB_HALT ? agc_halt : agc_resume, &ans);
            journal_add_action(r->j, 1, rb->name, kind, l, run_http_ok(st) ? "succeeded" : "failed", ans, t0,
                               cx_real_ns());
            json_decref(ans);
        }
    }
    if (aborted)
        for (int l = 0; l < r->setup.m; l++) {
            int64_t t0 = cx_real_ns();
            json_t *ans = NULL;
            int st = agent_post(r, l, agc_halt, &ans);
            journal_add_action(r->j, 1, "halt-on-abort", "halt", l, run_http_ok(st) ? "succeeded" : "failed",
                               ans, t0, cx_real_ns());
            json_decref(ans);
            if (!run_http_ok(st))
                cx_warn("POST /v1/halt on agent %d failed (HTTP %d)", l, st);
        }
    collect_fetch_faults(r);
    for (int l = 0; l < r->setup.m; l++) {
        size_t i;
        json_t *rec;
        json_array_foreach(r->col.av[l].faults, i, rec) if (strcmp(run_jstr(rec, "state"), "active") == 0)
            cx_warn("fault %s on learner %d is still active after the revert",
                    json_string_value(json_object_get(rec, "id")), l);
    }
    collect_release_leases(r);
}
