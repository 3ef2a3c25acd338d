/* run.c - the experiment runner's state machine (see run.h; its
 * components are listed in runner.h).
 *
 * NOTES ON THE DESIGN OF THE RUNNER
 *
 * One thread drives everything (method() ticks every TICK_MS); one more
 * renews the agents' leases (collect.c's lease thread, every ttl/3) so a
 * slow HTTP call in the main loop can never let a lease lapse. Everything
 * the hypotheses are judged on is gathered by the collection (collect.h):
 * the syncer's events (GET /v1/events, incrementally by seq), every
 * agent's fault records (GET /v1/faults), and the timeline's action events
 * (also appended to RUN/events.jsonl).
 *
 * The run's lifecycle (set_state() allows exactly these transitions, and
 * run_assert_state() checks what each state holds in debug builds):
 *
 *   LOADED --setup_start_topology--> LAUNCHED --collect_take_leases--> STEADY
 *     |                                 |                               |
 *     | --check / --dry-run end here;   | leases refused                | output_steady_state()
 *     | topology failed: to STOPPED     |                               |
 *     |                                 |  did not hold, abort, error   |
 *     |                                 |<------------------------------+
 *     |                                 |                               | held
 *     |                                 |                               v
 *     |                                 |  abort, error, signal       METHOD  method(): timeline_play()
 *     |                                 |<------------------------------+     + collect_poll_all() until training
 *     |                                 |                               |     ended or the time bound
 *     |                                 |                               | ok
 *     |                                 |                               v
 *     |                                 |                             VERIFY  output_verify()
 *     |                                 v                               |
 *     |                               REVERT <--------------------------+
 *     |                                 |  timeline_revert(): DELETE active faults, rollbacks,
 *     |                                 |  POST /v1/halt when aborted, release the leases
 *     v                                 v
 *   STOPPED <---------------------------+  topo_stop(): nothing left
 *     |
 *     v
 *   DONE    output_write(): journal, junit, events, faults, summary, report
 *
 * What holds: from LAUNCHED to REVERT a topology and its HTTP clients
 * exist; from STEADY to VERIFY the lease thread renews the leases (REVERT
 * releases them); METHOD and VERIFY have a steady state that held and a
 * method start (method_mono); VERIFY follows a method that neither aborted
 * nor failed; a fault is sent only in METHOD (fire() asserts it), so
 * from REVERT on nothing new is injected; from STOPPED on the dashboard is
 * gone.
 */
#include "harness/run/runner.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/stop_signals.h"
#include "common/log.h"
#include "common/err.h"

/* ---- run: state ---- */

static const char *const run_state_names[] = {"loaded", "launched", "steady_state", "method",
                                              "verify", "revert",   "stopped",      "done"};

/* The transitions of the diagram above: run_next[from] has bit `to` set. */
#define RS_BIT(s) (1u << (s))
__attribute__((unused)) /* read by assert() only: unused under NDEBUG */
static const unsigned run_next[] = {
    [RS_LOADED] = RS_BIT(RS_LAUNCHED) | RS_BIT(RS_STOPPED),
    [RS_LAUNCHED] = RS_BIT(RS_STEADY) | RS_BIT(RS_REVERT),
    [RS_STEADY] = RS_BIT(RS_METHOD) | RS_BIT(RS_REVERT),
    [RS_METHOD] = RS_BIT(RS_VERIFY) | RS_BIT(RS_REVERT),
    [RS_VERIFY] = RS_BIT(RS_REVERT),
    [RS_REVERT] = RS_BIT(RS_STOPPED),
    [RS_STOPPED] = RS_BIT(RS_DONE),
    [RS_DONE] = 0,
};

#ifndef NDEBUG
/* What each state promises (the diagram's "what holds"). */
void run_assert_state(const runner *r)
{
    assert(r->state >= RS_LOADED && r->state <= RS_DONE);
    /* a topology (and its clients) from LAUNCHED until it is stopped */
    if (r->state >= RS_LAUNCHED && r->state <= RS_REVERT)
        assert(r->setup.t != NULL && r->setup.sy != NULL && r->col.av != NULL);
    /* the lease thread runs from STEADY until REVERT releases it */
    if (r->state >= RS_STEADY && r->state <= RS_VERIFY)
        assert(r->col.lease_running);
    if (r->state == RS_LOADED || r->state >= RS_STOPPED)
        assert(!r->col.lease_running);
    /* the method runs only on a steady state that held, and has a start */
    if (r->state == RS_METHOD || r->state == RS_VERIFY)
        assert(r->out.steady_ok && r->method_mono > 0);
    if (r->state < RS_METHOD)
        assert(r->method_mono == 0 && r->end_mono == 0);
    /* verify judges a run that neither aborted nor failed, and has ended */
    if (r->state == RS_VERIFY)
        assert(!r->abort && !r->error && r->end_mono > 0);
    /* the dashboard is gone before its sources are */
    if (r->state >= RS_STOPPED)
        assert(r->setup.dash == NULL);
}
#endif

static void set_state(runner *r, run_state s)
{
    assert(run_next[r->state] & RS_BIT(s));
    r->state = s;
    run_assert_state(r);
    cx_debug("run state=%s", run_state_names[s]);
}

/* ---- run: signals ---- */

static volatile sig_atomic_t *stop_flag; /* cx_stop_on_signals, once installed */

void run_install_signals(void)
{
    stop_flag = cx_stop_on_signals();
}

/* The first SIGINT/SIGTERM received, 0 none. */
static int run_signal_number(void)
{
    return stop_flag ? *stop_flag : 0;
}

int run_interrupted(void)
{
    return run_signal_number() != 0;
}

void run_abort_if_interrupted(runner *r)
{
    if (run_interrupted())
        run_set_abort(r, "interrupted by %s", run_signal_number() == SIGINT ? "SIGINT" : "SIGTERM");
}

/* ---- run: small helpers ---- */

/* The run stops: r->why from fmt (the TTY progress line ends before the log
 * line). An error (the harness's own failure) overrides an abort (the
 * experiment's); the first of each kind is kept. */
static void stop_run(runner *r, int error, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
static void stop_run(runner *r, int error, const char *fmt, va_list ap)
{
    if (r->error || (r->abort && !error))
        return;
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    output_progress_end(r);
    if (error) {
        r->error = 1;
        cx_error("harness error: %s", r->why);
    } else {
        r->abort = 1;
        cx_warn("aborting: %s", r->why);
    }
}

void run_set_abort(runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void run_set_abort(runner *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    stop_run(r, 0, fmt, ap);
    va_end(ap);
}

void run_set_error(runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void run_set_error(runner *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    stop_run(r, 1, fmt, ap);
    va_end(ap);
}

/* A harness event into events.jsonl (steals obj). */
void run_emit(runner *r, json_t *obj)
{
    if (!obj)
        return;
    char err[CX_ERRLEN];
    if (r->ev && jr_events_append(r->ev, obj, err, sizeof err) < 0)
        cx_warn("events.jsonl: %s", err);
    if (r->setup.dash) {
        json_t *c = json_deep_copy(obj);
        const char *kind = json_string_value(json_object_get(c, "kind"));
        if (!json_is_string(json_object_get(c, "type")))
            json_object_set_new(c, "type", json_string(kind ? kind : "harness"));
        dash_server_push_event(r->setup.dash, c, NULL, 0);
        json_decref(c);
    }
    json_decref(obj);
}

void run_emit_run(runner *r, const char *what, const char *detail)
{
    json_t *o = json_pack("{s:s,s:s}", "kind", "run", "event", what);
    if (detail)
        json_object_set_new(o, "detail", json_string(detail));
    run_emit(r, o);
}

double run_now_s_since(int64_t mono)
{
    return (double)(cx_mono_ms() - mono) / 1000.0;
}

/* Sleep up to ms, waking early on a signal. */
void run_nap(int64_t ms)
{
    int64_t end = cx_mono_ms() + ms;
    while (!run_interrupted() && cx_mono_ms() < end) {
        int64_t left = end - cx_mono_ms();
        cx_sleep_ms(left < 50 ? left : 50);
    }
}

/* A string member or "" (never NULL). */
const char *run_jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* out = dir/name. noinline: the paths are bounded at make_run_dir, and
 * GCC's truncation analysis cannot see through the struct otherwise. */
__attribute__((noinline)) void run_join_path(char *out, size_t len, const char *dir, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

int run_http_ok(int status)
{
    return status >= 200 && status < 300;
}

/* error text of a JSON error answer, or the transport error */
void run_answer_error(const json_t *ans, int status, const char *transport, char *out, size_t len)
{
    const char *e = json_string_value(json_object_get(ans, "error"));
    if (status == 0)
        snprintf(out, len, "no answer: %s", transport && transport[0] ? transport : "unreachable");
    else
        snprintf(out, len, "HTTP %d: %s", status, e ? e : "(no error text)");
}

/* ---- run: method ---- */

static void method(runner *r, double limit_s)
{
    collect_merge_clock_at_least(r, r->method_mono);
    run_emit_run(r, "method_start", NULL);
    cx_info("method: %d timeline entries (%d chaos draws), time bound %.0f s", r->setup.sched->n,
            r->setup.sched->chaos_drawn, limit_s);
    for (;;) {
        collect_poll_all(r);
        if (r->abort || r->error)
            break;
        timeline_play(r);
        if (r->abort || r->error)
            break;
        collect_check_training_over(r);
        if (!r->col.training_over)
            rhorizon_maybe_end(r);
        double left = limit_s - run_now_s_since(r->start_mono);
        if (r->col.training_over) {
            output_progress_end(r);
            cx_info("training over: every learner finished");
            break;
        }
        if (left <= 0) {
            output_progress_end(r);
            cx_warn("time bound of %.0f s reached before training ended; verifying what ran", limit_s);
            run_emit_run(r, "time_bound", NULL);
            break;
        }
        output_progress(r, "method", left);
        run_assert_state(r);
        run_nap(TICK_MS);
    }
    output_progress_end(r);
    timeline_end_method(r);
    r->end_mono = cx_mono_ms();
}

/* ---- run: the whole run ---- */

static void runner_cleanup(runner *r)
{
    if (r->col.lease_running)
        collect_release_leases(r);
    setup_stop_dashboard(r);
    setup_drop_topology(r);
    output_cleanup(r);
    rhorizon_cleanup(r);
    collect_cleanup(r);
    jr_events_close(r->ev);
    journal_free(r->j);
    timeline_cleanup(r);
    setup_cleanup(r);
    rclock_free(r); /* after every client that feeds them (setup_cleanup: the syncer's) */
}

void run_result_cleanup(run_result *res)
{
    if (!res)
        return;
    json_decref(res->summary);
    res->summary = NULL;
}

/* Everything before the topology: the experiment, its timeline, the
 * journal, the run directory. Returns 1 when run_experiment is done (a
 * check, a dry run or an error: *rc and res->exit_code set), else 0. */
static int run_prepare(runner *r, run_result *res, char *err, size_t errlen, int *rc)
{
    const run_opts *o = r->o;
    *rc = 0;
    if (setup_load(r, err, errlen) < 0) {
        res->exit_code = CX_EXIT_USAGE;
        *rc = CX_EINVAL;
        return 1;
    }
    if (o->check || o->dry_run) {
        if (!o->check)
            setup_dry_run(r);
        res->exit_code = CX_EXIT_OK;
        return 1;
    }
    char e2[CX_ERRLEN] = "";
    /* attach mode: a topology.training describes the attached syncer's
     * training (the horizon's default token minimum, data_accounting's
     * steps); checked with the same rules, passed to no one */
    if (!r->setup.e->attach_syncer || json_object_size(r->setup.e->training) > 0) {
        json_t *sc = setup_syncer_config(r, e2, sizeof e2);
        if (!sc) {
            snprintf(err, errlen, "%s", e2);
            res->exit_code = CX_EXIT_USAGE;
            *rc = CX_EINVAL;
            return 1;
        }
        json_decref(sc);
    }
    int tl_rc = timeline_init(r);
    r->j = journal_new(r->setup.e);
    if (r->j && journal_set_plan(r->j, r->setup.e, r->setup.sched) < 0) {
        journal_free(r->j);
        r->j = NULL;
    }
    if (tl_rc < 0 || !r->j) {
        res->exit_code = CX_EXIT_ERROR;
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    if (setup_make_run_dir(r, e2, sizeof e2) < 0) {
        snprintf(err, errlen, "%s", e2);
        res->exit_code = CX_EXIT_USAGE;
        *rc = CX_EINVAL;
        return 1;
    }
    snprintf(res->run_dir, sizeof res->run_dir, "%s", r->setup.run_dir);
    char path[PATHLEN + 64];
    run_join_path(path, sizeof path, r->setup.run_dir, "events.jsonl");
    if (jr_events_open(path, &r->ev, e2, sizeof e2) < 0)
        run_set_error(r, "%s", e2);
    run_join_path(path, sizeof path, r->setup.run_dir, "timeline.json");
    json_t *tl = sched_json(r->setup.sched);
    json_dump_file(tl, path, JSON_INDENT(1) | JSON_SORT_KEYS);
    json_decref(tl);
    return 0;
}

/* STEADY (the leases are held) .. the end of VERIFY: the steady state, the
 * method, the verdicts. */
static void run_judged(runner *r)
{
    const run_opts *o = r->o;
    set_state(r, RS_STEADY);
    double limit = o->time_limit_s > 0 ? o->time_limit_s : (o->ci ? 300.0 : 600.0);
    output_steady_state(r, limit);
    if (r->out.steady_ok && !r->abort && !r->error && !run_interrupted()) {
        r->method_mono = cx_mono_ms(); /* RS_METHOD holds: the method has a start */
        set_state(r, RS_METHOD);
        if (rhorizon_init(r) != 0)
            run_set_error(r, "out of memory");
        else
            method(r, limit);
    } else if (!r->out.steady_ok) {
        cx_warn("the steady state did not hold: the method is skipped");
        run_emit_run(r, "steady_state_failed", NULL);
    }
    run_abort_if_interrupted(r);
    if (!r->end_mono)
        r->end_mono = cx_mono_ms();
    if (r->out.steady_ok && !r->abort && !r->error) {
        set_state(r, RS_VERIFY);
        if (r->setup.dash)
            dash_server_set_progress(r->setup.dash, "verify", cx_mono_ms() - r->start_mono, 0);
        output_verify(r);
    }
}

/* LOADED .. STOPPED: the topology up, judged, reverted and stopped. */
static void run_live(runner *r, run_result *res)
{
    const run_opts *o = r->o;
    char e2[CX_ERRLEN] = "";
    r->start_real = cx_real_ns();
    journal_set_start(r->j, r->start_real);
    cx_info("run experiment=\"%s\" variant=%s learners=%d mode=%s seed=%" PRIu64 " run_dir=%s timeline=%d "
            "steps=%" PRId64,
            r->setup.e->title, o->ci ? "ci" : "base", r->setup.m, r->setup.e->mode, r->setup.seed,
            r->setup.run_dir, r->setup.sched->n, r->setup.steps_target);
    run_emit_run(r, "start", r->setup.e->title);

    if (!r->error && !run_interrupted()) {
        if (setup_start_topology(r, e2, sizeof e2) < 0) {
            if (run_interrupted()) {
                /* a signal ended the start (an attach wait): interrupted, not an error */
                run_abort_if_interrupted(r);
                setup_drop_topology(r);
            } else {
                run_set_error(r, "starting the topology: %s", e2);
            }
        } else {
            set_state(r, RS_LAUNCHED);
            output_journal_endpoints(r);
        }
    }
    r->start_mono = cx_mono_ms();
    if (r->setup.t && !r->error) {
        setup_start_dashboard(r);
        if (collect_take_leases(r) == 0 && rclock_check(r) == 0)
            run_judged(r);
        set_state(r, RS_REVERT);
        if (r->setup.dash)
            dash_server_set_progress(r->setup.dash, "revert", cx_mono_ms() - r->start_mono, 0);
        collect_poll_events(r);
        collect_poll_syncer_status(r);
        res->summary = output_summary_json(r);
        json_t *fl = json_object_get(res->summary, "final_loss"); /* NULL-safe: journal.json's final_bpb */
        journal_set_final_loss(r->j, json_is_number(fl) ? json_number_value(fl) : NAN);
        timeline_revert(r);
    }
    if (o->keep && r->setup.t) {
        printf("--keep: processes stay up (syncer %s); Ctrl-C to stop them\n", topo_syncer_url(r->setup.t));
        fflush(stdout);
        while (!run_interrupted())
            run_nap(500);
    }
    setup_stop_dashboard(r); /* before its sources go away */
    if (r->setup.t) {
        int killed = topo_stop(r->setup.t, STOP_GRACE_MS);
        if (killed)
            cx_warn("%d processes needed SIGKILL", killed);
    }
    set_state(r, RS_STOPPED);
}

int run_experiment(const run_opts *o, run_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    runner rr;
    runner *r = &rr;
    memset(r, 0, sizeof *r);
    r->o = o;
    r->tty = o->progress < 0 ? isatty(STDERR_FILENO) : o->progress;
    r->state = RS_LOADED;
    run_assert_state(r);

    int rc;
    if (collect_init(r) < 0) {
        res->exit_code = CX_EXIT_ERROR;
        snprintf(err, errlen, "out of memory");
        runner_cleanup(r);
        return CX_ENOMEM;
    }
    if (run_prepare(r, res, err, errlen, &rc)) {
        runner_cleanup(r);
        return rc;
    }
    run_live(r, res);
    output_write(r, res);
    snprintf(res->status, sizeof res->status, "%s", jr_status_name(journal_status(r->j)));
    if (r->error)
        res->exit_code = CX_EXIT_ERROR;
    else if (r->abort || run_interrupted())
        res->exit_code = CX_EXIT_ABORTED;
    else if (!r->out.steady_ok || journal_deviated(r->j))
        res->exit_code = CX_EXIT_DEVIATED;
    else
        res->exit_code = CX_EXIT_OK;
    if (r->why[0])
        snprintf(err, errlen, "%s", r->why);
    if (!o->quiet_summary)
        output_print_verdicts(r, res);
    set_state(r, RS_DONE);
    cx_info("run done status=%s exit=%d run_dir=%s", res->status, res->exit_code, r->setup.run_dir);
    runner_cleanup(r);
    return 0;
}
