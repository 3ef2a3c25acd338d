/* output.c - the runner's judging and outputs (see output.h): the steady
 * state, verify, summary.json's figures, the dashboard's hypotheses table,
 * the progress line, events.jsonl/faults.json at the end, the verdicts
 * printed on stdout. */
#include "harness/run/output.h"

#include "harness/run/runner.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/log.h"
#include "harness/fault_cost.h"
#include "harness/report.h"
#include "common/err.h"

/* ---- output: hypotheses ---- */

void output_cleanup(runner *r)
{
    json_decref(r->out.dash_hyps);
    r->out.dash_hyps = NULL;
}

static json_t *verdict_json(const char *label, const char *phase, const hyp_verdict *v, int pending)
{
    json_t *o = json_pack("{s:s,s:s,s:s}", "name", label, "phase", phase, "status",
                          pending ? "running" : hyp_status_name(v->status));
    if (!pending) {
        json_object_set_new(o, "measured", isfinite(v->measured) ? json_real(v->measured) : json_null());
        json_object_set_new(o, "threshold", isfinite(v->threshold) ? json_real(v->threshold) : json_null());
        json_object_set_new(o, "cmp", json_string(v->cmp));
        json_object_set_new(o, "unit", json_string(v->unit));
        json_object_set_new(o, "explanation", json_string(v->explanation));
    }
    return o;
}

static void dash_hyp(runner *r, json_t *entry)
{
    if (!r->setup.dash) {
        json_decref(entry);
        return;
    }
    if (!r->out.dash_hyps)
        r->out.dash_hyps = json_array();
    const char *name = json_string_value(json_object_get(entry, "name"));
    const char *phase = json_string_value(json_object_get(entry, "phase"));
    size_t i;
    json_t *v;
    json_array_foreach(r->out.dash_hyps, i, v)
    {
        if (strcmp(json_string_value(json_object_get(v, "name")), name) == 0 &&
            strcmp(json_string_value(json_object_get(v, "phase")), phase) == 0) {
            json_array_set_new(r->out.dash_hyps, i, entry);
            dash_server_set_hypotheses(r->setup.dash, r->out.dash_hyps, NULL, 0);
            return;
        }
    }
    json_array_append_new(r->out.dash_hyps, entry);
    dash_server_set_hypotheses(r->setup.dash, r->out.dash_hyps, NULL, 0);
}

void output_dash_pending(runner *r)
{
    if (!r->setup.dash)
        return;
    for (int i = 0; i < r->setup.e->nsteady; i++)
        dash_hyp(r, json_pack("{s:s,s:s,s:s}", "name", hyp_spec_label(r->setup.e->steady_state[i]), "phase",
                              "steady_state", "status", "pending"));
    for (int i = 0; i < r->setup.e->nverify; i++)
        dash_hyp(r, json_pack("{s:s,s:s,s:s}", "name", hyp_spec_label(r->setup.e->verify[i]), "phase",
                              "verify", "status", "pending"));
}

/* by_s of a steady-state entry, when it has one. */
static double spec_by_s(const hyp_spec *s)
{
    json_t *b = json_object_get(hyp_spec_json(s), "by_s");
    return json_is_number(b) ? json_number_value(b) : -1.0;
}

/* Judge the steady state: re-evaluated every second until every entry
 * passes or the deadline passes: the largest by_s + 5 s, else 30 s; an
 * entry judged by training progress (by_tokens) is waited for up to the
 * run's time bound instead, so a slow machine is not judged by the clock. */
void output_steady_state(runner *r, double limit_s)
{
    r->out.steady_ok = 1;
    if (r->setup.e->nsteady == 0)
        return;
    double deadline_s = STEADY_DEFAULT_S;
    double maxby = -1;
    int by_progress = 0;
    for (int i = 0; i < r->setup.e->nsteady; i++) {
        if (spec_by_s(r->setup.e->steady_state[i]) > maxby)
            maxby = spec_by_s(r->setup.e->steady_state[i]);
        by_progress |= json_object_get(hyp_spec_json(r->setup.e->steady_state[i]), "by_tokens") != NULL;
    }
    if (maxby > 0)
        deadline_s = maxby + 5.0;
    if (by_progress && limit_s > deadline_s)
        deadline_s = limit_s;
    int64_t t0 = cx_real_ns();
    hyp_verdict *v = calloc((size_t)r->setup.e->nsteady, sizeof *v);
    if (!v) {
        run_set_error(r, "out of memory");
        return;
    }
    cx_info("steady state: %d hypotheses, deadline %.0f s after the run start", r->setup.e->nsteady,
            deadline_s);
    for (;;) {
        collect_poll_all(r);
        if (r->abort || r->error || run_interrupted())
            break;
        hyp_history *h = collect_history(r, 1);
        int all = 1;
        for (int i = 0; i < r->setup.e->nsteady; i++) {
            hyp_spec_eval(r->setup.e->steady_state[i], h, &v[i]);
            all &= v[i].status == HYP_PASS;
        }
        hyp_history_free(h);
        if (all || run_now_s_since(r->start_mono) >= deadline_s)
            break;
        run_nap(1000);
    }
    for (int i = 0; i < r->setup.e->nsteady; i++) {
        const hyp_spec *s = r->setup.e->steady_state[i];
        journal_add_hypothesis(r->j, JR_BEFORE, s, &v[i], t0, cx_real_ns());
        dash_hyp(r, verdict_json(hyp_spec_label(s), "steady_state", &v[i], 0));
        cx_log(v[i].status == HYP_PASS ? CX_LOG_INFO : CX_LOG_WARN, "steady state %s: %s (%s)",
               hyp_spec_label(s), hyp_status_name(v[i].status), v[i].explanation);
        if (v[i].status != HYP_PASS)
            r->out.steady_ok = 0;
    }
    free(v);
}

/* ---- output: verify ---- */

/* A window the run did not see close (it ended by its time bound, a stop
 * condition or the learners' budget, not by the horizon) cannot be judged:
 * the verdict becomes an error that says so. */
static void unobserved(runner *r, int spec, hyp_verdict *v)
{
    char msg[sizeof v->explanation];
    if (!rhorizon_unobserved(r, spec, msg, sizeof msg))
        return;
    v->status = HYP_ERROR;
    snprintf(v->explanation, sizeof v->explanation, "%s", msg);
}

void output_verify(runner *r)
{
    /* final collection: every event, every fault record, final status */
    collect_poll_events(r);
    collect_poll_syncer_status(r);
    hyp_history *h = collect_history(r, 1);
    if (!h) {
        run_set_error(r, "out of memory");
        return;
    }
    for (int i = 0; i < r->setup.e->nverify; i++) {
        const hyp_spec *s = r->setup.e->verify[i];
        int64_t t0 = cx_real_ns();
        hyp_verdict v;
        hyp_spec_eval(s, h, &v);
        unobserved(r, i, &v);
        journal_add_hypothesis(r->j, JR_AFTER, s, &v, t0, cx_real_ns());
        dash_hyp(r, verdict_json(hyp_spec_label(s), "verify", &v, 0));
        cx_log(v.status == HYP_PASS ? CX_LOG_INFO : CX_LOG_WARN, "verify %s: %s measured=%g %s %g %s (%s)",
               hyp_spec_label(s), hyp_status_name(v.status), v.measured, v.cmp, v.threshold, v.unit,
               v.explanation);
    }
    hyp_history_free(h);
}

/* Figures for compare and summary.json. */
json_t *output_summary_json(runner *r)
{
    hyp_history *h = collect_history(r, 0);
    if (!h)
        return NULL;
    /* each figure measured by the hypothesis that judges it, without a verdict */
    static const char *const figures[][2] = {
        {"goodput", "goodput"},
        {"bytes_per_token", "bandwidth"},
        {"longest_merge_gap_s", "no_global_downtime"},
    };
    json_t *o = json_object();
    json_object_set_new(o, "mode", json_string(r->setup.e->mode));
    json_object_set_new(o, "learners", json_integer(r->setup.m));
    json_object_set_new(o, "seed", json_integer((json_int_t)r->setup.seed));
    for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++) {
        double x = hyp_measure(figures[i][1], h);
        json_object_set_new(o, figures[i][0], isfinite(x) ? json_real(x) : json_null());
    }
    hyp_history_free(h);
    /* tokens the learners reported (what the figures above were measured over) */
    json_int_t tokens = 0;
    json_t *lv;
    size_t li;
    json_array_foreach(json_object_get(r->col.status, "learners"), li, lv) tokens +=
        json_integer_value(json_object_get(lv, "tokens"));
    json_object_set_new(o, "tokens", json_integer(tokens));
    /* merge efficiency (merged tokens / trained tokens), as the syncer
     * counts it; null for a coordinator that does not say (telemetry.md).
     * Not goodput: that weighs useful compute under faults against the
     * compute allocated */
    json_t *me = json_object_get(r->col.status, "merge_efficiency");
    json_object_set_new(o, "merge_efficiency",
                        json_is_number(me) ? json_real(json_number_value(me)) : json_null());
    json_t *tt = json_object_get(r->col.status, "tokens_trained");
    json_object_set_new(o, "tokens_trained",
                        json_is_integer(tt) ? json_integer(json_integer_value(tt)) : json_null());
    /* the eval curve, s since the run start */
    json_t *curve = json_array();
    double final = NAN;
    size_t i;
    json_t *ev;
    json_array_foreach(r->col.sev, i, ev)
    {
        if (strcmp(run_jstr(ev, "type"), "eval") != 0)
            continue;
        json_t *l = json_object_get(ev, "loss");
        double loss = json_is_number(l) ? json_number_value(l) : NAN;
        double t = (double)(rclock_map_syncer_ms(r, json_integer_value(json_object_get(ev, "t_mono_ms"))) -
                            r->start_mono) /
                   1000.0;
        json_array_append_new(
            curve, json_pack("[f,o]", t, isfinite(loss) && loss >= 0 ? json_real(loss) : json_null()));
        final = isfinite(loss) && loss >= 0 ? loss : NAN;
    }
    json_object_set_new(o, "final_loss", isfinite(final) ? json_real(final) : json_null());
    json_object_set_new(o, "final_bpb", isfinite(final) ? json_real(final / M_LN2) : json_null());
    json_object_set_new(o, "eval_curve", curve);
    json_object_set_new(o, "duration_s", json_real((double)(r->end_mono - r->start_mono) / 1000.0));
    json_object_set_new(o, "merges", json_integer((json_int_t)r->col.merges));
    json_object_set_new(o, "clocks", rclock_json(r));
    return o;
}

/* ---- output: the run directory ---- */

/* events.jsonl: every training event and final fault record; faults.json. */
static void append_collected(runner *r)
{
    /* events.jsonl also carries every training event and the final fault
     * records, so one file tells the whole story (report.c reads it), all
     * on the harness's clock (clock.c: the processes' own times are
     * kept beside as t_src_mono_ms, src_started_mono_ms, ...). */
    size_t i;
    json_t *v;
    json_array_foreach(r->col.sev, i, v)
    {
        json_t *c = rclock_map_event(r, v);
        if (!c)
            continue;
        json_object_set_new(c, "kind", json_string("training"));
        jr_events_append(r->ev, c, NULL, 0);
        json_decref(c);
    }
    json_t *fl = json_array();
    for (int l = 0; r->col.av && l < r->setup.m; l++) /* no agent views when the topology never started */
        json_array_foreach(r->col.av[l].faults, i, v)
        {
            json_t *m = rclock_map_fault(r, l, v);
            json_t *c = json_pack("{s:s,s:i,s:O}", "kind", "fault", "learner", l, "record", m ? m : v);
            jr_events_append(r->ev, c, NULL, 0);
            json_decref(c);
            json_array_append_new(fl, json_pack("{s:i,s:O}", "learner", l, "record", m ? m : v));
            json_decref(m);
        }
    char path[PATHLEN + 32];
    run_join_path(path, sizeof path, r->setup.run_dir, "faults.json");
    json_dump_file(fl, path, JSON_INDENT(1));
    json_decref(fl);
}

/* The addresses the journal's translated experiment calls. */
void output_journal_endpoints(runner *r)
{
    const char *urls[EXP_MAX_LEARNERS];
    for (int i = 0; i < r->setup.m && i < EXP_MAX_LEARNERS; i++)
        urls[i] = topo_agent_url(r->setup.t, i);
    journal_set_endpoints(r->j, topo_syncer_url(r->setup.t), urls,
                          r->setup.m < EXP_MAX_LEARNERS ? r->setup.m : EXP_MAX_LEARNERS);
}

void output_print_verdicts(runner *r, const run_result *res)
{
    json_t *jj = journal_json(r->j);
    printf("\n%s\n  status %s, exit %d, run dir %s\n", r->setup.e->title, res->status, res->exit_code,
           r->setup.run_dir);
    json_t *ss = json_object_get(jj, "steady_states");
    const char *phases[] = {"before", "after"};
    for (int p = 0; p < 2; p++) {
        json_t *probes = json_object_get(json_object_get(ss, phases[p]), "probes");
        size_t i;
        json_t *pr;
        json_array_foreach(probes, i, pr)
        {
            json_t *out = json_object_get(pr, "output");
            const char *name = json_string_value(json_object_get(json_object_get(pr, "activity"), "name"));
            printf("  %-6s %-28s %-5s %s\n", p == 0 ? "steady" : "verify", name ? name : "?",
                   run_jstr(out, "verdict"), run_jstr(out, "explanation"));
        }
    }
    if (r->why[0])
        printf("  %s: %s\n", r->error ? "error" : "aborted", r->why);
    fflush(stdout);
    json_decref(jj);
}

/* DONE's outputs: the journal's end and status, events.jsonl's collected
 * events, journal.json, junit.xml, summary.json, report.html. A write that
 * fails is a harness error (the journal, JUnit) or a warning (the report). */
void output_write(runner *r, run_result *res)
{
    char path[PATHLEN + 64], e2[CX_ERRLEN] = "";
    /* Chaos Toolkit's meanings: a signal, a stop condition or a halt
     * interrupts the run; an error nobody planned for aborts it. */
    jr_status js = JR_COMPLETED;
    if (run_interrupted())
        js = JR_INTERRUPTED;
    else if (r->error)
        js = JR_ABORTED;
    else if (r->abort)
        js = JR_INTERRUPTED;
    journal_set_end(r->j, cx_real_ns(), js);
    json_t *clocks = rclock_json(r);
    journal_set_clocks(r->j, clocks);
    json_decref(clocks);
    if (r->why[0]) {
        run_emit_run(r, r->error ? "error" : "aborted", r->why);
    }
    if (r->ev) {
        append_collected(r);
    }
    run_join_path(path, sizeof path, r->setup.run_dir, "journal.json");
    if (journal_write(r->j, path, e2, sizeof e2) < 0)
        run_set_error(r, "journal: %s", e2);
    if (r->o->junit)
        snprintf(path, sizeof path, "%s", r->o->junit);
    else
        run_join_path(path, sizeof path, r->setup.run_dir, "junit.xml");
    if (journal_write_junit(r->j, path, e2, sizeof e2) < 0)
        run_set_error(r, "junit: %s", e2);
    if (res->summary) {
        /* what each fault cost, from the final fault records (after the
         * revert), as report.html shows it */
        hyp_history *h = r->col.av ? collect_history(r, 0) : NULL;
        json_t *cost = h ? fault_cost_json(h) : NULL;
        json_object_set_new(res->summary, "fault_cost", cost ? cost : json_null());
        hyp_history_free(h);
        json_object_set_new(res->summary, "status", json_string(jr_status_name(journal_status(r->j))));
        json_object_set_new(res->summary, "deviated", json_boolean(journal_deviated(r->j)));
        run_join_path(path, sizeof path, r->setup.run_dir, "summary.json");
        json_dump_file(res->summary, path, JSON_INDENT(1) | JSON_SORT_KEYS);
    }
    if (report_render(r->setup.run_dir, e2, sizeof e2) < 0)
        cx_warn("report.html: %s", e2);
}

/* ---- output: progress ---- */

/* The progress line: the horizon's real progress (what the run still
 * waits for, horizon_estimate) and its estimate of the end, not the time
 * bound (said only when it comes first). Counters carry the names the log,
 * the dashboard and the report use: "merges" (the syncer's outer steps),
 * the eval loss in bits/byte for chaosloco's byte-level models (nats for a
 * foreign trainer). bound_left_s: seconds to the time bound. */
void output_progress(runner *r, const char *phase, double bound_left_s)
{
    int64_t now = cx_mono_ms();
    int every = r->tty ? 250 : 10000;
    if (now - r->out.last_progress < every)
        return;
    r->out.last_progress = now;
    hz_estimate est;
    rhorizon_estimate(r, &est);
    int bytes = !r->setup.e->trainer; /* chaosloco's models are byte-level */
    char loss[48], left[64];
    if (isfinite(r->col.eval_loss))
        snprintf(loss, sizeof loss, "%.3f %s", bytes ? r->col.eval_loss / M_LN2 : r->col.eval_loss,
                 bytes ? "bits/byte" : "nats");
    else
        snprintf(loss, sizeof loss, "-");
    if (est.left_ms < 0)
        snprintf(left, sizeof left, "end unknown yet");
    else if (est.left_ms / 1000.0 > bound_left_s)
        snprintf(left, sizeof left, "time bound in %.0f s", bound_left_s);
    else
        snprintf(left, sizeof left, "%s%.0f s left", est.lower_bound ? ">= " : "~", est.left_ms / 1000.0);
    if (r->tty)
        fprintf(stderr, "\r\033[K%-8s %3.0f%%  merges %-6" PRId64 " eval %-18s faults %-2d %s ", phase,
                100.0 * est.fraction, r->col.merges, loss, timeline_active(r), left);
    else
        cx_info("progress phase=%s done_pct=%.0f merges=%" PRId64 " eval=\"%s\" faults_active=%d left=\"%s\" "
                "waiting=\"%s\"",
                phase, 100.0 * est.fraction, r->col.merges, loss, timeline_active(r), left, est.waiting);
    if (r->setup.dash) {
        int64_t left_ms = est.left_ms;
        if (left_ms >= 0 && left_ms > (int64_t)(bound_left_s * 1000))
            left_ms = (int64_t)(bound_left_s * 1000);
        dash_server_set_progress_json(
            r->setup.dash,
            json_pack("{s:s,s:I,s:o,s:f,s:b,s:I,s:s,s:f}", "phase", phase, "elapsed_ms",
                      (json_int_t)(now - r->start_mono), "remaining_ms",
                      left_ms >= 0 ? json_integer(left_ms) : json_null(), "fraction", est.fraction,
                      "lower_bound", est.lower_bound, "merges", (json_int_t)r->col.merges, "waiting",
                      est.waiting, "bound_left_s", bound_left_s));
    }
}

void output_progress_end(runner *r)
{
    if (r->tty && r->out.last_progress) {
        fprintf(stderr, "\r\033[K");
        r->out.last_progress = 0;
    }
}
