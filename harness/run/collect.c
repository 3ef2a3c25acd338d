/* collect.c - what the runner collects while it runs (see collect.h):
 * the lease thread, the syncer's events and status, the agents' status and
 * fault records, the history the hypotheses judge, stop conditions and the
 * end of training. */
#include "harness/run/collect.h"

#include "harness/run/runner.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

/* ---- collect: the views ---- */

int collect_init(runner *r)
{
    r->col.eval_loss = NAN;
    r->col.sev = json_array();
    return r->col.sev ? 0 : CX_ENOMEM;
}

void collect_cleanup(runner *r)
{
    if (r->col.av)
        for (int l = 0; l < r->setup.m; l++) {
            agc_free(r->col.av[l].agent);
            json_decref(r->col.av[l].faults);
        }
    free(r->col.av);
    r->col.av = NULL;
    json_decref(r->col.sev);
    json_decref(r->col.status);
    r->col.sev = r->col.status = NULL;
}

int collect_views_new(runner *r)
{
    r->col.av = calloc((size_t)r->setup.m, sizeof *r->col.av);
    if (!r->col.av)
        return CX_ENOMEM;
    agc_opts ao = {.ca_file = topo_ca_file(r->setup.t),
                   .connect_timeout_ms = 500,
                   .timeout_ms = 3000,
                   .max_body = (size_t)256 << 20};
    for (int l = 0; l < r->setup.m; l++) {
        agent_view *a = &r->col.av[l];
        ao.observe = cx_tb_observe; /* every answer feeds its agent's clock (clock.h) */
        ao.observe_ctx = r->clk.ag_clock[l];
        ao.token = topo_agent_token(r->setup.t, l);
        a->agent = agc_new(topo_agent_url(r->setup.t, l), &ao);
        a->exit_code = -1;
        snprintf(a->unit_state, sizeof a->unit_state, "starting");
        if (!a->agent)
            return CX_ENOMEM;
    }
    return 0;
}

void collect_mark_not_running(runner *r, int l)
{
    snprintf(r->col.av[l].unit_state, sizeof r->col.av[l].unit_state, "restarting");
}

void collect_merge_clock_at_least(runner *r, int64_t mono_ms)
{
    if (mono_ms > r->col.last_merge_mono)
        r->col.last_merge_mono = mono_ms;
}

/* ---- collect: leases ---- */

static void *lease_thread(void *arg)
{
    runner *r = arg;
    int m = r->setup.m;
    agc **c = calloc((size_t)m, sizeof *c);
    if (!c)
        return NULL;
    agc_opts ao = {.ca_file = topo_ca_file(r->setup.t), .connect_timeout_ms = 500, .timeout_ms = 2000};
    for (int i = 0; i < m; i++) {
        ao.token = topo_agent_token(r->setup.t, i);
        ao.observe = cx_tb_observe; /* renewals are round trips too: each feeds its agent's clock */
        ao.observe_ctx = r->clk.ag_clock[i];
        c[i] = agc_new(topo_agent_url(r->setup.t, i), &ao);
    }
    pthread_mutex_lock(&r->col.lease_mu);
    while (!r->col.lease_stop) {
        pthread_mutex_unlock(&r->col.lease_mu);
        for (int i = 0; i < m; i++) {
            agc_reply rep;
            agc_reply_init(&rep);
            char err[CX_ERRLEN] = "";
            if (c[i] && agc_lease(c[i], LEASE_TTL_MS, &rep, err, sizeof err) != 0)
                cx_warn("lease renewal on agent %d failed (status %d) %s", i, rep.status, err);
            agc_reply_cleanup(&rep);
        }
        pthread_mutex_lock(&r->col.lease_mu);
        /* renew every third of the TTL; collect_release_leases signals to end early */
        int64_t deadline = cx_mono_ms() + LEASE_TTL_MS / 3;
        while (!r->col.lease_stop && cx_cond_wait_until_ms(&r->col.lease_cv, &r->col.lease_mu, deadline) == 0)
            ;
    }
    pthread_mutex_unlock(&r->col.lease_mu);
    for (int i = 0; i < m; i++)
        agc_free(c[i]);
    free(c);
    return NULL;
}

/* Take a lease on every agent (synchronously, so a refusal is an error),
 * then start the renewal thread. */
int collect_take_leases(runner *r)
{
    for (int i = 0; i < r->setup.m; i++) {
        agc_reply rep;
        agc_reply_init(&rep);
        char err[CX_ERRLEN] = "", msg[CX_ERRLEN + 64];
        if (agc_lease(r->col.av[i].agent, LEASE_TTL_MS, &rep, err, sizeof err) != 0) {
            run_answer_error(rep.json, rep.status, err, msg, sizeof msg);
            agc_reply_cleanup(&rep);
            run_set_error(r, "lease on agent %d (%s): %s", i, topo_agent_url(r->setup.t, i), msg);
            return CX_EUNAVAIL;
        }
        agc_reply_cleanup(&rep);
    }
    pthread_mutex_init(&r->col.lease_mu, NULL);
    pthread_cond_init(&r->col.lease_cv, NULL);
    if (pthread_create(&r->col.lease_tid, NULL, lease_thread, r) != 0) {
        run_set_error(r, "cannot start the lease thread");
        return CX_ESYS;
    }
    r->col.lease_running = 1;
    cx_info("leases taken on %d agents ttl_ms=%d (renewed every %d ms)", r->setup.m, LEASE_TTL_MS,
            LEASE_TTL_MS / 3);
    return 0;
}

/* Stop renewing and release (ttl 0: no revert; the faults were already
 * reverted or the agents are about to stop). */
void collect_release_leases(runner *r)
{
    if (!r->col.lease_running)
        return;
    pthread_mutex_lock(&r->col.lease_mu);
    r->col.lease_stop = 1;
    pthread_cond_signal(&r->col.lease_cv);
    pthread_mutex_unlock(&r->col.lease_mu);
    pthread_join(r->col.lease_tid, NULL);
    r->col.lease_running = 0;
    pthread_mutex_destroy(&r->col.lease_mu);
    pthread_cond_destroy(&r->col.lease_cv);
    for (int i = 0; i < r->setup.m; i++)
        agc_lease(r->col.av[i].agent, 0, NULL, NULL, 0);
}

/* ---- collect: the coordinator ---- */

/* One new event of the coordinator (seq > r->col.last_seq; stolen): the last
 * merge time, the eval loss and its stop conditions, into r->col.sev. The same
 * for both forms of the telemetry contract. */
static void take_event(runner *r, json_t *ev, int64_t read_ms)
{
    int64_t seq = json_integer_value(json_object_get(ev, "seq"));
    r->col.last_seq = seq;
    rclock_check_event_time(r, ev, read_ms);
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (type && strcmp(type, "merge") == 0) {
        /* the no-merge stop condition compares it with the harness's now */
        int64_t t = rclock_map_syncer_ms(r, json_integer_value(json_object_get(ev, "t_mono_ms")));
        if (t > r->col.last_merge_mono)
            r->col.last_merge_mono = t;
    } else if (type && strcmp(type, "eval") == 0) {
        json_t *l = json_object_get(ev, "loss");
        double loss = json_is_number(l) ? json_number_value(l) : NAN;
        if (loss < 0)
            loss = NAN; /* the syncer writes a non-finite loss as -1 */
        r->col.eval_loss = loss;
        const exp_stop *sc = &r->setup.e->stop;
        int above = sc->has_eval_loss_above && isfinite(loss) && loss > sc->eval_loss_above;
        if (above && r->col.evals_above++ == 0)
            r->col.above_since_seq = seq;
        if (!above)
            r->col.evals_above = 0;
        if (r->state == RS_STEADY || r->state == RS_METHOD) {
            if (sc->nan && !isfinite(loss))
                run_set_abort(r, "stop condition nan: non-finite eval loss (event seq %" PRId64 ")", seq);
            else if (above && r->col.evals_above >= sc->eval_loss_evals)
                run_set_abort(r,
                              "stop condition eval_loss_above %g: eval loss %.4f (event seq %" PRId64
                              "), above it in %d consecutive evals since seq %" PRId64,
                              sc->eval_loss_above, loss, seq, r->col.evals_above, r->col.above_since_seq);
        }
    }
    json_array_append_new(r->col.sev, ev);
}

/* The file form has no GET /v1/status: the figures the runner reads of it
 * come from the events (docs/telemetry.md, "The file form"): merges = the
 * merge events seen, learners[] = each learner's latest heartbeat (id,
 * incarnation, step, tokens, train_loss), eval = the latest eval event
 * (loss, tokens); no bytes. */
static void derive_status(runner *r, const json_t *ev)
{
    if (!r->col.status && !(r->col.status = json_pack("{s:I,s:[],s:n}", "merges", (json_int_t)0, "learners", "eval")))
        return;
    const char *type = run_jstr(ev, "type");
    if (strcmp(type, "merge") == 0) {
        r->col.merges++;
        json_object_set_new(r->col.status, "merges", json_integer((json_int_t)r->col.merges));
    } else if (strcmp(type, "eval") == 0) {
        json_object_set_new(r->col.status, "eval",
                            json_pack("{s:O?,s:O?}", "loss", json_object_get(ev, "loss"), "tokens",
                                      json_object_get(ev, "tokens")));
    } else if (strcmp(type, "heartbeat") == 0 && json_is_integer(json_object_get(ev, "learner"))) {
        json_int_t id = json_integer_value(json_object_get(ev, "learner"));
        json_t *ls = json_object_get(r->col.status, "learners"), *l = NULL, *v;
        size_t i;
        json_array_foreach(ls, i, v) if (json_integer_value(json_object_get(v, "id")) == id) l = v;
        if (!l) {
            l = json_pack("{s:I}", "id", id);
            json_array_append_new(ls, l);
        }
        static const char *const keys[] = {"incarnation", "step", "tokens", "train_loss", NULL};
        for (int k = 0; l && keys[k]; k++)
            if (json_object_get(ev, keys[k]))
                json_object_set(l, keys[k], json_object_get(ev, keys[k]));
    }
}

/* File form: what the coordinator appended to its events file. */
static void poll_events_file(runner *r)
{
    json_t *got = json_array();
    char err[CX_ERRLEN] = "";
    int rc = got ? evf_poll(r->setup.evf, got, err, sizeof err) : CX_ENOMEM;
    int64_t read_ms = cx_mono_ms(); /* every line read was written before this */
    /* a malformed line is the file's first error: named before any check
     * of the events read ahead of it (their times, take_event) */
    if (rc < 0)
        run_set_error(r, "%s", rc == CX_ENOMEM && !err[0] ? "out of memory" : err);
    size_t i;
    json_t *ev;
    json_array_foreach(got, i, ev)
    {
        /* a learner the topology does not have: the file is not this
         * run's (and an unbounded set of ids would cost the per-learner
         * tables without limit) */
        json_t *lv = json_object_get(ev, "learner");
        if (json_is_integer(lv) && (json_integer_value(lv) < 0 || json_integer_value(lv) >= r->setup.m)) {
            run_set_error(r, "events file, event seq %" JSON_INTEGER_FORMAT ": learner %" JSON_INTEGER_FORMAT
                             " is not one of the topology's %d learners (0..%d)",
                          json_integer_value(json_object_get(ev, "seq")), json_integer_value(lv), r->setup.m, r->setup.m - 1);
            break;
        }
        derive_status(r, ev);
        take_event(r, json_incref(ev), read_ms);
    }
    json_decref(got);
}

/* Fetch the syncer's new events. */
void collect_poll_events(runner *r)
{
    if (r->setup.evf) {
        poll_events_file(r);
        return;
    }
    if (r->tl.syncer_down)
        return;
    for (int round = 0; round < 20; round++) {
        char path[96];
        snprintf(path, sizeof path, "/v1/events?since=%" PRId64 "&limit=5000", r->col.last_seq);
        cx_http_result res;
        cx_http_result_init(&res);
        int n = 0;
        if (cx_http_do(r->setup.sy, "GET", path, NULL, NULL, 0, NULL, 0, &res, NULL, 0) == 0 && res.status == 200 &&
            res.body.data) {
            char *save = NULL;
            for (char *line = strtok_r(res.body.data, "\n", &save); line;
                 line = strtok_r(NULL, "\n", &save)) {
                json_t *ev = json_loads(line, 0, NULL);
                if (!json_is_object(ev) || json_integer_value(json_object_get(ev, "seq")) <= r->col.last_seq) {
                    json_decref(ev);
                    continue;
                }
                n++;
                take_event(r, ev, (int64_t)ceil(res.t_recv_ms));
            }
        }
        cx_http_result_cleanup(&res);
        if (n < 5000)
            break;
    }
}

void collect_poll_syncer_status(runner *r)
{
    if (r->tl.syncer_down || r->setup.evf)
        return;
    int st = 0;
    json_t *s = NULL;
    cx_http_json(r->setup.sy, "GET", "/v1/status", NULL, &st, &s, NULL, 0);
    if (st == 200 && json_is_object(s)) {
        json_decref(r->col.status);
        r->col.status = s;
        r->col.merges = json_integer_value(json_object_get(s, "merges"));
    } else {
        json_decref(s);
    }
}

static void poll_agent(runner *r, int i)
{
    agent_view *a = &r->col.av[i];
    a->last_poll = cx_mono_ms();
    json_t *s = NULL;
    if (agc_status(a->agent, &s, NULL, 0) == 0) {
        a->last_ok_mono = cx_mono_ms();
        json_t *unit = json_object_get(s, "unit");
        const char *us = json_string_value(json_object_get(unit, "state"));
        snprintf(a->unit_state, sizeof a->unit_state, "%s", us ? us : "?");
        json_t *le = json_object_get(unit, "last_exit");
        a->exit_code = json_is_object(le) ? (int)json_integer_value(json_object_get(le, "code")) : -1;
        if (json_is_object(le) && json_integer_value(json_object_get(le, "signal")) != 0)
            a->exit_code = -1;
        a->faults_active = (int)json_integer_value(json_object_get(s, "faults_active"));
        json_int_t pid = json_integer_value(json_object_get(unit, "pid"));
        if (pid > 0)
            topo_note_unit(r->setup.t, i, (pid_t)pid);
        if (json_is_true(json_object_get(s, "halted")) && r->state == RS_METHOD)
            run_set_abort(r, "agent %d was halted (chaosloco halt or the dashboard's HALT ALL)", i);
    }
    json_decref(s);
}

/* Every agent's fault list (kept when an agent does not answer). */
void collect_fetch_faults(runner *r)
{
    for (int i = 0; i < r->setup.m; i++) {
        json_t *list = NULL;
        if (agc_faults(r->col.av[i].agent, &list, NULL, 0) == 0) {
            json_decref(r->col.av[i].faults);
            r->col.av[i].faults = list;
        }
    }
}

/* The history the hypotheses judge, as of now (new). */
hyp_history *collect_history(runner *r, int with_faults)
{
    hyp_history *h = hyp_history_new(r->setup.m, r->setup.e->quorum);
    if (!h)
        return NULL;
    size_t i;
    json_t *v;
    char err[CX_ERRLEN];
    /* one time base: every remote time on the harness's clock (clock.h) */
    json_array_foreach(r->col.sev, i, v)
    {
        json_t *m = rclock_map_event(r, v);
        if (!m || hyp_history_add_syncer_event(h, m, err, sizeof err) < 0)
            cx_debug("event skipped: %s", m ? err : "out of memory");
        json_decref(m);
    }
    if (with_faults)
        collect_fetch_faults(r);
    for (int l = 0; l < r->setup.m; l++)
        json_array_foreach(r->col.av[l].faults, i, v)
        {
            json_t *m = rclock_map_fault(r, l, v);
            if (!m || hyp_history_add_fault(h, l, m, err, sizeof err) < 0)
                cx_debug("fault record skipped: %s", m ? err : "out of memory");
            json_decref(m);
        }
    json_array_foreach(r->tl.acts, i, v) hyp_history_add_action(h, v, NULL, 0);
    hyp_history_set_counter(h, HYP_C_START_MONO, (double)r->start_mono);
    hyp_history_set_counter(h, HYP_C_END_MONO, (double)(r->end_mono ? r->end_mono : cx_mono_ms()));
    if (r->setup.steps_target > 0)
        hyp_history_set_counter(h, HYP_C_STEPS_TARGET, (double)r->setup.steps_target);
    if (r->col.status) {
        json_t *b = json_object_get(r->col.status, "bytes");
        if (json_is_object(b)) { /* none in the file form: bandwidth then counts contribution bytes */
            hyp_history_set_counter(h, HYP_C_BYTES_IN, (double)json_integer_value(json_object_get(b, "in")));
            hyp_history_set_counter(h, HYP_C_BYTES_OUT,
                                    (double)json_integer_value(json_object_get(b, "out")));
        }
        double tokens = 0;
        json_array_foreach(json_object_get(r->col.status, "learners"), i, v)
        {
            int64_t id = json_integer_value(json_object_get(v, "id"));
            int64_t tk = json_integer_value(json_object_get(v, "tokens"));
            tokens += (double)tk;
            if (id >= 0 && id < r->setup.m)
                hyp_history_set_learner_final(h, (int)id, json_integer_value(json_object_get(v, "step")), tk);
        }
        /* Learners report tokens in heartbeats (<= 1 per second), so a short
         * run can end before the syncer heard of them: when every learner
         * finished, it trained at least steps x batch tokens. */
        double nominal = r->col.training_over && !r->hz.end_sent && r->setup.batch > 0
                             ? (double)r->setup.m * (double)r->setup.steps_target * (double)r->setup.batch
                             : 0.0;
        if (nominal > tokens)
            tokens = nominal;
        if (tokens > 0)
            hyp_history_set_counter(h, HYP_C_TOKENS, tokens);
    }
    return h;
}

/* ---- collect: polling, stop conditions, end of training ---- */

void collect_check_training_over(runner *r)
{
    int done = 1, exited0 = 0;
    for (int l = 0; l < r->setup.m; l++) {
        agent_view *a = &r->col.av[l];
        if (strcmp(a->unit_state, "exited") == 0 && a->exit_code == 0) {
            exited0++;
            continue;
        }
        /* a unit down for good (killed, no restart pending) counts as over
         * once nothing of ours is pending on it */
        if ((strcmp(a->unit_state, "killed") == 0 || strcmp(a->unit_state, "exited") == 0) &&
            a->faults_active == 0 && timeline_pending(r) == 0)
            continue;
        done = 0;
    }
    if (done && exited0 > 0 && !r->tl.syncer_down)
        r->col.training_over = 1;
}

void collect_poll_all(runner *r)
{
    int64_t now = cx_mono_ms();
    collect_poll_events(r);
    if (now - r->col.last_status >= STATUS_EVERY_MS) {
        r->col.last_status = now;
        collect_poll_syncer_status(r);
    }
    for (int l = 0; l < r->setup.m; l++)
        if (now - r->col.av[l].last_poll >= AGENT_EVERY_MS)
            poll_agent(r, l);
    if (r->state != RS_STEADY && r->state != RS_METHOD)
        return;
    const exp_stop *sc = &r->setup.e->stop;
    now = cx_mono_ms();
    /* once the run was ended (POST /v1/end) no merge is due any more: a unit
     * slow to exit is waited for (up to the time bound), not an abort */
    if (sc->has_no_merge_for_s && !r->tl.syncer_down && !r->col.training_over && !r->hz.end_sent) {
        int64_t since = r->col.last_merge_mono > r->start_mono ? r->col.last_merge_mono : r->start_mono;
        if ((double)(now - since) / 1000.0 > sc->no_merge_for_s)
            run_set_abort(r, "stop condition no_merge_for_s %g: no merge for %.1f s", sc->no_merge_for_s,
                          (double)(now - since) / 1000.0);
    }
    if (sc->has_agent_unreachable_s)
        for (int l = 0; l < r->setup.m; l++) {
            int64_t last = r->col.av[l].last_ok_mono ? r->col.av[l].last_ok_mono : r->start_mono;
            if ((double)(now - last) / 1000.0 > sc->agent_unreachable_s)
                run_set_abort(r, "stop condition agent_unreachable_s %g: agent %d silent for %.1f s",
                              sc->agent_unreachable_s, l, (double)(now - last) / 1000.0);
        }
    run_abort_if_interrupted(r);
}
