/* horizon.c - the runner's horizon (see horizon.h): what the run still
 * waits for, from what the collection and the timeline saw, and the end
 * request once every verify window has closed (harness/horizon.h decides;
 * this fills its inputs and acts on its answer). */
#include "harness/run/horizon.h"

#include "harness/run/runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

/* ---- horizon: the windows ---- */

/* Windows of the verify list; min_tokens from the file or M x steps x batch. */
int rhorizon_init(runner *r)
{
    r->hz.hw = calloc((size_t)r->setup.e->nverify + 1, sizeof *r->hz.hw);
    r->hz.hw_spec = calloc((size_t)r->setup.e->nverify + 1, sizeof *r->hz.hw_spec);
    if (!r->hz.hw || !r->hz.hw_spec)
        return CX_ENOMEM;
    for (int i = 0; i < r->setup.e->nverify; i++) {
        const hyp_spec *sp = r->setup.e->verify[i];
        if (horizon_window(hyp_spec_json(sp), hyp_spec_label(sp), &r->hz.hw[r->hz.nhw]))
            r->hz.hw_spec[r->hz.nhw++] = i;
    }
    /* a foreign trainer's horizon is the file's (the validator requires one): steps x batch are ours */
    r->hz.min_tokens = r->setup.e->min_tokens > 0 ? r->setup.e->min_tokens
                       : r->setup.e->trainer      ? 0
                                             : (int64_t)r->setup.m * r->setup.steps_target * r->setup.batch;
    return 0;
}

void rhorizon_cleanup(runner *r)
{
    free(r->hz.hw);
    free(r->hz.hw_spec);
    r->hz.hw = NULL;
    r->hz.hw_spec = NULL;
    r->hz.nhw = 0;
}

/* What harness/horizon.h decides on, from what the runner saw. heal must
 * hold m. */
void rhorizon_fill(runner *r, int64_t *heal, hz_progress *p)
{
    memset(p, 0, sizeof *p);
    p->start_ms = r->method_mono ? r->method_mono : r->start_mono;
    p->now_ms = r->end_mono ? r->end_mono : cx_mono_ms();
    p->pending = timeline_pending(r);
    p->entries = r->setup.sched->n;
    p->heal_ms = heal;
    p->m = r->setup.m;
    p->min_tokens = r->hz.min_tokens;
    p->min_merges = r->setup.e->min_merges;
    p->merges = r->col.merges;
    p->eval_tokens = json_integer_value(json_object_get(json_object_get(r->col.status, "eval"), "tokens"));
    for (int l = 0; l < r->setup.m; l++)
        heal[l] = 0;
    for (int k = 0; k < r->setup.sched->n; k++) {
        int64_t h = r->tl.fx[k].healed_mono;
        int l = r->setup.sched->entries[k].learner;
        if (h > p->any_heal_ms)
            p->any_heal_ms = h;
        if (l >= 0 && l < r->setup.m && h > heal[l])
            heal[l] = h;
        if (l < 0 && h > 0) /* the syncer's restart reopens every learner's window */
            for (int i = 0; i < r->setup.m; i++)
                heal[i] = h > heal[i] ? h : heal[i];
    }
    json_t *ls = json_object_get(r->col.status, "learners"), *v;
    size_t i;
    json_array_foreach(ls, i, v)
    {
        p->tokens += json_integer_value(json_object_get(v, "tokens"));
        json_int_t id = json_integer_value(json_object_get(v, "id"));
        if (id >= 0 && id < r->setup.m)
            r->hz.steps[id] = json_integer_value(json_object_get(v, "step"));
    }
    p->steps = r->hz.steps;
    p->steps_target = r->setup.steps_target;
}

int rhorizon_unobserved(runner *r, int spec, char *msg, size_t len)
{
    if (r->hz.end_sent)
        return 0;
    int64_t heal[EXP_MAX_LEARNERS];
    hz_progress p;
    rhorizon_fill(r, heal, &p);
    for (int i = 0; i < r->hz.nhw; i++) /* at most one window per entry (rhorizon_init) */
        if (r->hz.hw_spec[i] == spec)
            return horizon_unobserved(&r->hz.hw[i], &p, msg, len);
    return 0;
}

void rhorizon_estimate(runner *r, hz_estimate *est)
{
    int64_t heal[EXP_MAX_LEARNERS];
    hz_progress hp;
    rhorizon_fill(r, heal, &hp);
    horizon_estimate(r->hz.hw, r->hz.nhw, &hp, est);
}

/* ---- horizon: the end ---- */

/* The run is long enough: tell the syncer to end it (learners finish,
 * send, leave and exit 0; check_training_over then sees it). The file form
 * writes the coordinator's end file instead of POST /v1/end (also while it
 * is down: it reads the file when it starts again). Attach mode ends the
 * run the same way, with the credential the harness was given; a syncer
 * that refuses it (401/403: no admin credential) is told once, and the run
 * then lasts until the learners finish their own --steps or the time
 * bound. */
void rhorizon_maybe_end(runner *r)
{
    if (r->hz.end_sent || r->hz.end_refused || (r->tl.syncer_down && !r->setup.evf))
        return;
    int64_t heal[EXP_MAX_LEARNERS];
    hz_progress p;
    char why[256];
    rhorizon_fill(r, heal, &p);
    if (!horizon_done(r->hz.hw, r->hz.nhw, &p, why, sizeof why))
        return;
    char err[CX_ERRLEN] = "";
    if (r->setup.evf) {
        if (topo_request_end(r->setup.t, why, err, sizeof err) < 0) {
            cx_warn("writing the coordinator's end file: %s (will retry)", err);
            return;
        }
    } else {
        json_t *body = json_pack("{s:s}", "reason", why), *ans = NULL;
        int st = 0;
        cx_http_json(r->setup.sy, "POST", "/v1/end", body, &st, &ans, err, sizeof err);
        json_decref(body);
        if (st == 401 || st == 403) {
            char said[CX_ERRLEN];
            run_answer_error(ans, st, err, said, sizeof said);
            json_decref(ans);
            r->hz.end_refused = 1;
            output_progress_end(r);
            cx_warn(
                "horizon reached (%s) but the syncer refused POST /v1/end (%s): the harness needs the "
                "syncer's admin credential (--syncer-credential-file); the run goes on until the learners "
                "finish their own --steps or the time bound",
                why, said);
            run_emit_run(r, "end_refused", said);
            return;
        }
        json_decref(ans);
        if (st != 200) {
            cx_warn("POST /v1/end: HTTP %d %s (will retry)", st, err);
            return;
        }
    }
    r->hz.end_sent = 1;
    output_progress_end(r);
    run_emit_run(r, "end", why);
    cx_info("horizon reached at t=%.1f s: %s", run_now_s_since(p.start_ms), why);
}
