/* run.c - the experiment runner (see run.h).
 *
 * NOTES ON THE DESIGN OF THE RUNNER
 *
 * One thread drives everything (method() ticks every TICK_MS); one more
 * renews the agents' leases (lease_thread, every ttl/3) so a slow HTTP call
 * in the main loop can never let a lease lapse. Everything the hypotheses
 * are judged on is collected here: the syncer's events (GET /v1/events,
 * incrementally by seq), every agent's fault records (GET /v1/faults), and
 * the harness's own action events (also appended to RUN/events.jsonl).
 *
 * The run's lifecycle:
 *
 *   LOADED --start_topology()--> LAUNCHED --take_leases()--> STEADY
 *     |  (dry run: print timeline, done)                        |
 *     |                                    steady_state() held  | did not hold
 *     |                                         v               v
 *     |                                      METHOD ---------> (skip to REVERT)
 *     |      play_timeline()+poll_all() until training ended     |
 *     |      or the time bound; a stop condition / signal /     |
 *     |      error sets r->abort and leaves at once             |
 *     |                                         v               |
 *     |                                      VERIFY  judge the verify list
 *     |                                         v               |
 *     +------------------------------------> REVERT <-----------+
 *          DELETE active faults, rollbacks, POST /v1/halt when aborted,
 *          release leases
 *                                               v
 *                                           STOPPED  topo_stop(): nothing left
 *                                               v
 *                                            DONE    journal, junit, events,
 *                                                    faults, summary, report
 *
 * In every state after LAUNCHED the leases are renewed; from REVERT on no
 * new fault is sent (assert_run_state checks the state/field invariants in
 * debug builds).
 */
#include "harness/run.h"

#include <assert.h>
#include <stdarg.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/file.h"
#include "common/http_client.h"
#include "common/log.h"
#include "common/proc.h"
#include "dashboards/server.h"
#include "harness/experiment.h"
#include "harness/horizon.h"
#include "harness/hypothesis.h"
#include "harness/journal.h"
#include "harness/report.h"
#include "harness/schedule.h"
#include "harness/topology.h"
#include "trainer/config.h"

#define TICK_MS 100           /* main loop period */
#define STATUS_EVERY_MS 500   /* syncer /v1/status poll period */
#define AGENT_EVERY_MS 1000   /* agents' /v1/status poll period */
#define LEASE_TTL_MS 10000    /* lease ttl (renewed every ttl/3) */
#define STEADY_DEFAULT_S 30.0 /* steady-state deadline when no hypothesis says by_s */
#define STOP_GRACE_MS 10000   /* SIGTERM grace per process at the end */
#define PATHLEN 1024
#define HZ_BUDGET_X 100 /* learners' --steps budget: x the file's steps (the harness ends the run) */

/* The harness's own fault: SIGKILL (or TERM) the syncer, start it again. */
#define RUN_SYNCER_FAULT EXP_SYNCER_RESTART

static volatile sig_atomic_t g_signal; /* first SIGINT/SIGTERM received, 0 none */

/* ---- run: state ---- */

typedef enum run_state {
    RS_LOADED,
    RS_LAUNCHED,
    RS_STEADY,
    RS_METHOD,
    RS_VERIFY,
    RS_REVERT,
    RS_STOPPED,
    RS_DONE,
} run_state;

static const char *const run_state_names[] = {"loaded", "launched", "steady_state", "method",
                                              "verify", "revert",   "stopped",      "done"};

typedef struct fired {
    int fired;           /* 1 once sent (or skipped / failed) */
    int ok;              /* the agent accepted it */
    int skipped;         /* a chaos draw not sent (floor / unit not running) */
    int healed;          /* its fault ended (or it never started) */
    char fault_id[64];   /* the agent's id ("" none) */
    int64_t start_mono;  /* ms when sent */
    int64_t last_check;  /* ms of the last heal check */
    int64_t healed_mono; /* ms its fault was seen healed (0: never, or it never ran) */
    int64_t wait_since;  /* ms a method action first found its unit not running (0 none) */
} fired;

typedef struct agent_view {
    cx_http_client *http; /* main-thread client */
    int64_t last_ok_mono; /* ms of the last answered status */
    int64_t last_poll;    /* ms of the last poll */
    char unit_state[16];  /* unit.state as last seen */
    int exit_code;        /* last_exit.code, -1 none */
    int faults_active;    /* faults_active as last seen */
    json_t *faults;       /* last GET /v1/faults list (owned) */
} agent_view;

typedef struct runner {
    const run_opts *o; /* flags (borrowed) */
    run_state state;   /* see the diagram above */
    experiment *e;     /* the loaded experiment (ci variant applied) */
    schedule *sched;   /* its resolved timeline */
    fired *fx;         /* one per sched entry */
    uint64_t seed;     /* run seed */
    char run_dir[512]; /* the run directory */
    char slug[96];
    topo *t;              /* launched or attached processes */
    journal *j;           /* journal.json / junit.xml */
    jr_events *ev;        /* events.jsonl */
    dash_server *dash;    /* embedded dashboard or NULL */
    json_t *dash_hyps;    /* the dashboard's hypotheses table (array) */
    agent_view *av;       /* one per learner */
    cx_http_client *sy;   /* syncer client (main thread) */
    int m;                /* learners */
    int64_t steps_target; /* inner steps per learner (effective config) */
    int64_t batch;        /* sequences (= tokens) per inner step (effective config) */
    /* collected */
    json_t *sev;             /* syncer events, in seq order */
    int64_t last_seq;        /* highest seq fetched */
    json_t *acts;            /* harness action events */
    json_t *status;          /* last syncer /v1/status (owned) */
    int64_t merges;          /* last merges counter */
    double eval_loss;        /* last eval loss (NAN none) */
    int64_t last_merge_mono; /* ms of the last merge event (or of the method start) */
    int64_t start_mono;      /* ms when the topology was ready (run start) */
    int64_t method_mono;     /* ms when the method started, 0 before */
    int64_t end_mono;        /* ms when training ended / was cut */
    int64_t start_real;      /* ns realtime of the start */
    int64_t last_status;     /* ms of the last syncer status poll */
    int64_t last_progress;   /* ms of the last progress output */
    int tty;                 /* progress redrawn on stderr */
    /* syncer fault */
    int syncer_down;      /* the harness killed the syncer and will restart it */
    int64_t syncer_up_at; /* ms when to restart it */
    int syncer_entry;     /* sched entry that did it */
    /* lease thread */
    pthread_t lease_tid;
    int lease_running;
    pthread_mutex_t lease_mu;
    pthread_cond_t lease_cv;
    int lease_stop;
    /* outcome */
    int abort;         /* 1 stop condition / signal / halt */
    int error;         /* 1 harness or injection error */
    char why[512];     /* abort or error reason */
    int steady_ok;     /* 1 steady state held (or none) */
    int training_over; /* 1 all learners done */
    /* horizon (horizon.h) */
    hz_window *hw;      /* [nverify] windows of the verify hypotheses */
    int *hw_spec;       /* [nverify] the verify index of hw[i] */
    int nhw;            /* windows */
    int64_t min_tokens; /* tokens the run trains at least */
    int end_sent;       /* 1 once POST /v1/end was sent (the horizon was reached) */
} runner;

#ifndef NDEBUG
static void assert_run_state(const runner *r)
{
    if (r->state >= RS_LAUNCHED && r->state < RS_STOPPED)
        assert(r->t != NULL);
    if (r->state >= RS_METHOD)
        assert(r->method_mono > 0 || !r->steady_ok || r->abort || r->error);
    if (r->state >= RS_STEADY && r->state < RS_REVERT)
        assert(r->lease_running || !topo_launched(r->t) || r->error);
}
#else
#define assert_run_state(r) ((void)0)
#endif

static void set_state(runner *r, run_state s)
{
    r->state = s;
    assert_run_state(r);
    cx_debug("run state=%s", run_state_names[s]);
}

/* ---- run: signals ---- */

static void on_signal(int sig)
{
    if (!g_signal)
        g_signal = sig;
}

void run_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int run_interrupted(void)
{
    return g_signal != 0;
}

/* ---- run: small helpers ---- */

static void progress_end(runner *r); /* clear the TTY progress line before a log line */

static void set_abort(runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_abort(runner *r, const char *fmt, ...)
{
    if (r->abort || r->error)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
    r->abort = 1;
    progress_end(r);
    cx_warn("aborting: %s", r->why);
}

static void set_error(runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(runner *r, const char *fmt, ...)
{
    if (r->error)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
    r->error = 1;
    progress_end(r);
    cx_error("harness error: %s", r->why);
}

/* A harness event into events.jsonl (steals obj). */
static void emit(runner *r, json_t *obj)
{
    if (!obj)
        return;
    char err[CX_ERRLEN];
    if (r->ev && jr_events_append(r->ev, obj, err, sizeof err) < 0)
        cx_warn("events.jsonl: %s", err);
    if (r->dash) {
        json_t *c = json_deep_copy(obj);
        const char *kind = json_string_value(json_object_get(c, "kind"));
        if (!json_is_string(json_object_get(c, "type")))
            json_object_set_new(c, "type", json_string(kind ? kind : "harness"));
        dash_server_push_event(r->dash, c, NULL, 0);
        json_decref(c);
    }
    json_decref(obj);
}

static void emit_run(runner *r, const char *what, const char *detail)
{
    json_t *o = json_pack("{s:s,s:s}", "kind", "run", "event", what);
    if (detail)
        json_object_set_new(o, "detail", json_string(detail));
    emit(r, o);
}

static double now_s_since(int64_t mono)
{
    return (double)(cx_mono_ms() - mono) / 1000.0;
}

/* Sleep up to ms, waking early on a signal. */
static void nap(int64_t ms)
{
    int64_t end = cx_mono_ms() + ms;
    while (!g_signal && cx_mono_ms() < end) {
        int64_t left = end - cx_mono_ms();
        cx_sleep_ms(left < 50 ? left : 50);
    }
}

/* A string member or "" (never NULL). */
static const char *jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* out = dir/name. noinline: the paths are bounded at make_run_dir, and
 * GCC's truncation analysis cannot see through the struct otherwise. */
static __attribute__((noinline)) void join_path(char *out, size_t len, const char *dir, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

static int http_ok(int status)
{
    return status >= 200 && status < 300;
}

/* error text of a JSON error answer, or the transport error */
static void answer_error(const json_t *ans, int status, const char *transport, char *out, size_t len)
{
    const char *e = json_string_value(json_object_get(ans, "error"));
    if (status == 0)
        snprintf(out, len, "no answer: %s", transport && transport[0] ? transport : "unreachable");
    else
        snprintf(out, len, "HTTP %d: %s", status, e ? e : "(no error text)");
}

/* ---- run: leases ---- */

static void *lease_thread(void *arg)
{
    runner *r = arg;
    int m = r->m;
    cx_http_client **c = calloc((size_t)m, sizeof *c);
    if (!c)
        return NULL;
    cx_http_opts ho = {.connect_timeout_ms = 500, .timeout_ms = 2000, .bearer = topo_token(r->t)};
    for (int i = 0; i < m; i++)
        c[i] = cx_http_client_new(topo_agent_url(r->t, i), &ho);
    pthread_mutex_lock(&r->lease_mu);
    while (!r->lease_stop) {
        pthread_mutex_unlock(&r->lease_mu);
        for (int i = 0; i < m; i++) {
            json_t *body = json_pack("{s:I}", "ttl_ms", (json_int_t)LEASE_TTL_MS);
            int st = 0;
            json_t *ans = NULL;
            char err[CX_ERRLEN] = "";
            if (c[i] && (cx_http_json(c[i], "POST", "/v1/lease", body, &st, &ans, err, sizeof err) < 0 ||
                         !http_ok(st)))
                cx_warn("lease renewal on agent %d failed (status %d) %s", i, st, err);
            json_decref(body);
            json_decref(ans);
        }
        pthread_mutex_lock(&r->lease_mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = ts.tv_nsec + (int64_t)(LEASE_TTL_MS / 3) * 1000000;
        ts.tv_sec += ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        if (!r->lease_stop)
            pthread_cond_timedwait(&r->lease_cv, &r->lease_mu, &ts);
    }
    pthread_mutex_unlock(&r->lease_mu);
    for (int i = 0; i < m; i++)
        cx_http_client_free(c[i]);
    free(c);
    return NULL;
}

/* Take a lease on every agent (synchronously, so a refusal is an error),
 * then start the renewal thread. */
static int take_leases(runner *r)
{
    for (int i = 0; i < r->m; i++) {
        json_t *body = json_pack("{s:I}", "ttl_ms", (json_int_t)LEASE_TTL_MS);
        int st = 0;
        json_t *ans = NULL;
        char err[CX_ERRLEN] = "", msg[CX_ERRLEN + 64];
        cx_http_json(r->av[i].http, "POST", "/v1/lease", body, &st, &ans, err, sizeof err);
        json_decref(body);
        if (!http_ok(st)) {
            answer_error(ans, st, err, msg, sizeof msg);
            json_decref(ans);
            set_error(r, "lease on agent %d (%s): %s", i, topo_agent_url(r->t, i), msg);
            return CX_EUNAVAIL;
        }
        json_decref(ans);
    }
    pthread_mutex_init(&r->lease_mu, NULL);
    pthread_cond_init(&r->lease_cv, NULL);
    if (pthread_create(&r->lease_tid, NULL, lease_thread, r) != 0) {
        set_error(r, "cannot start the lease thread");
        return CX_ESYS;
    }
    r->lease_running = 1;
    cx_info("leases taken on %d agents ttl_ms=%d (renewed every %d ms)", r->m, LEASE_TTL_MS,
            LEASE_TTL_MS / 3);
    return 0;
}

/* Stop renewing and release (ttl 0: no revert; the faults were already
 * reverted or the agents are about to stop). */
static void release_leases(runner *r)
{
    if (!r->lease_running)
        return;
    pthread_mutex_lock(&r->lease_mu);
    r->lease_stop = 1;
    pthread_cond_signal(&r->lease_cv);
    pthread_mutex_unlock(&r->lease_mu);
    pthread_join(r->lease_tid, NULL);
    r->lease_running = 0;
    pthread_mutex_destroy(&r->lease_mu);
    pthread_cond_destroy(&r->lease_cv);
    for (int i = 0; i < r->m; i++) {
        json_t *body = json_pack("{s:i}", "ttl_ms", 0);
        int st = 0;
        json_t *ans = NULL;
        cx_http_json(r->av[i].http, "POST", "/v1/lease", body, &st, &ans, NULL, 0);
        json_decref(body);
        json_decref(ans);
    }
}

/* ---- run: collecting ---- */

/* Fetch the syncer's new events. */
static void poll_events(runner *r)
{
    if (r->syncer_down)
        return;
    for (int round = 0; round < 20; round++) {
        char path[96];
        snprintf(path, sizeof path, "/v1/events?since=%" PRId64 "&limit=5000", r->last_seq);
        cx_http_result res;
        cx_http_result_init(&res);
        int n = 0;
        if (cx_http_do(r->sy, "GET", path, NULL, NULL, 0, NULL, 0, &res, NULL, 0) == 0 && res.status == 200 &&
            res.body.data) {
            char *save = NULL;
            for (char *line = strtok_r(res.body.data, "\n", &save); line;
                 line = strtok_r(NULL, "\n", &save)) {
                json_t *ev = json_loads(line, 0, NULL);
                if (!json_is_object(ev)) {
                    json_decref(ev);
                    continue;
                }
                int64_t seq = json_integer_value(json_object_get(ev, "seq"));
                if (seq <= r->last_seq) {
                    json_decref(ev);
                    continue;
                }
                r->last_seq = seq;
                n++;
                const char *type = json_string_value(json_object_get(ev, "type"));
                if (type && strcmp(type, "merge") == 0) {
                    int64_t t = json_integer_value(json_object_get(ev, "t_mono_ms"));
                    if (t > r->last_merge_mono)
                        r->last_merge_mono = t;
                } else if (type && strcmp(type, "eval") == 0) {
                    json_t *l = json_object_get(ev, "loss");
                    double loss = json_is_number(l) ? json_number_value(l) : NAN;
                    if (loss < 0)
                        loss = NAN; /* the syncer writes a non-finite loss as -1 */
                    r->eval_loss = loss;
                    if (r->state == RS_STEADY || r->state == RS_METHOD) {
                        if (r->e->stop.nan && !isfinite(loss))
                            set_abort(r, "stop condition nan: non-finite eval loss (event seq %" PRId64 ")",
                                      seq);
                        else if (r->e->stop.has_eval_loss_above && isfinite(loss) &&
                                 loss > r->e->stop.eval_loss_above)
                            set_abort(r,
                                      "stop condition eval_loss_above %g: eval loss %.4f (event seq %" PRId64
                                      ")",
                                      r->e->stop.eval_loss_above, loss, seq);
                    }
                }
                json_array_append_new(r->sev, ev);
            }
        }
        cx_http_result_cleanup(&res);
        if (n < 5000)
            break;
    }
}

static void poll_syncer_status(runner *r)
{
    if (r->syncer_down)
        return;
    int st = 0;
    json_t *s = NULL;
    cx_http_json(r->sy, "GET", "/v1/status", NULL, &st, &s, NULL, 0);
    if (st == 200 && json_is_object(s)) {
        json_decref(r->status);
        r->status = s;
        r->merges = json_integer_value(json_object_get(s, "merges"));
    } else {
        json_decref(s);
    }
}

static void poll_agent(runner *r, int i)
{
    agent_view *a = &r->av[i];
    a->last_poll = cx_mono_ms();
    int st = 0;
    json_t *s = NULL;
    cx_http_json(a->http, "GET", "/v1/status", NULL, &st, &s, NULL, 0);
    if (st == 200 && json_is_object(s)) {
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
            topo_note_unit(r->t, i, (pid_t)pid);
        if (json_is_true(json_object_get(s, "halted")) && r->state == RS_METHOD)
            set_abort(r, "agent %d was halted (chaosloco halt or the dashboard's HALT ALL)", i);
    }
    json_decref(s);
}

/* Every agent's fault list (kept when an agent does not answer). */
static void fetch_faults(runner *r)
{
    for (int i = 0; i < r->m; i++) {
        int st = 0;
        json_t *ans = NULL;
        cx_http_json(r->av[i].http, "GET", "/v1/faults", NULL, &st, &ans, NULL, 0);
        json_t *list = json_object_get(ans, "faults");
        if (st == 200 && json_is_array(list)) {
            json_decref(r->av[i].faults);
            r->av[i].faults = json_incref(list);
        }
        json_decref(ans);
    }
}

/* The history the hypotheses judge, as of now (new). */
static hyp_history *build_history(runner *r, int with_faults)
{
    hyp_history *h = hyp_history_new(r->m, r->e->quorum);
    if (!h)
        return NULL;
    size_t i;
    json_t *v;
    char err[CX_ERRLEN];
    json_array_foreach(r->sev, i, v) if (hyp_history_add_syncer_event(h, v, err, sizeof err) < 0)
        cx_debug("event skipped: %s", err);
    if (with_faults)
        fetch_faults(r);
    for (int l = 0; l < r->m; l++)
        json_array_foreach(r->av[l].faults, i, v) hyp_history_add_fault(h, l, v, NULL, 0);
    json_array_foreach(r->acts, i, v) hyp_history_add_action(h, v, NULL, 0);
    hyp_history_set_counter(h, HYP_C_START_MONO, (double)r->start_mono);
    hyp_history_set_counter(h, HYP_C_END_MONO, (double)(r->end_mono ? r->end_mono : cx_mono_ms()));
    if (r->steps_target > 0)
        hyp_history_set_counter(h, HYP_C_STEPS_TARGET, (double)r->steps_target);
    if (r->status) {
        json_t *b = json_object_get(r->status, "bytes");
        hyp_history_set_counter(h, HYP_C_BYTES_IN, (double)json_integer_value(json_object_get(b, "in")));
        hyp_history_set_counter(h, HYP_C_BYTES_OUT, (double)json_integer_value(json_object_get(b, "out")));
        double tokens = 0;
        json_array_foreach(json_object_get(r->status, "learners"), i, v)
        {
            int64_t id = json_integer_value(json_object_get(v, "id"));
            int64_t tk = json_integer_value(json_object_get(v, "tokens"));
            tokens += (double)tk;
            if (id >= 0 && id < r->m)
                hyp_history_set_learner_final(h, (int)id, json_integer_value(json_object_get(v, "step")), tk);
        }
        /* Learners report tokens in heartbeats (<= 1 per second), so a short
         * run can end before the syncer heard of them: when every learner
         * finished, it trained at least steps x batch tokens. */
        double nominal = r->training_over && !r->end_sent && r->batch > 0
                             ? (double)r->m * (double)r->steps_target * (double)r->batch
                             : 0.0;
        if (nominal > tokens)
            tokens = nominal;
        if (tokens > 0)
            hyp_history_set_counter(h, HYP_C_TOKENS, tokens);
    }
    return h;
}

/* ---- run: hypotheses ---- */

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
    if (!r->dash) {
        json_decref(entry);
        return;
    }
    if (!r->dash_hyps)
        r->dash_hyps = json_array();
    const char *name = json_string_value(json_object_get(entry, "name"));
    const char *phase = json_string_value(json_object_get(entry, "phase"));
    size_t i;
    json_t *v;
    json_array_foreach(r->dash_hyps, i, v)
    {
        if (strcmp(json_string_value(json_object_get(v, "name")), name) == 0 &&
            strcmp(json_string_value(json_object_get(v, "phase")), phase) == 0) {
            json_array_set_new(r->dash_hyps, i, entry);
            dash_server_set_hypotheses(r->dash, r->dash_hyps, NULL, 0);
            return;
        }
    }
    json_array_append_new(r->dash_hyps, entry);
    dash_server_set_hypotheses(r->dash, r->dash_hyps, NULL, 0);
}

static void dash_pending(runner *r)
{
    if (!r->dash)
        return;
    for (int i = 0; i < r->e->nsteady; i++)
        dash_hyp(r, json_pack("{s:s,s:s,s:s}", "name", hyp_spec_label(r->e->steady_state[i]), "phase",
                              "steady_state", "status", "pending"));
    for (int i = 0; i < r->e->nverify; i++)
        dash_hyp(r, json_pack("{s:s,s:s,s:s}", "name", hyp_spec_label(r->e->verify[i]), "phase", "verify",
                              "status", "pending"));
}

/* by_s of a steady-state entry, when it has one. */
static double spec_by_s(const hyp_spec *s)
{
    json_t *b = json_object_get(hyp_spec_json(s), "by_s");
    return json_is_number(b) ? json_number_value(b) : -1.0;
}

static void poll_all(runner *r);

/* Judge the steady state: re-evaluated every second until every entry
 * passes or the deadline passes: the largest by_s + 5 s, else 30 s; an
 * entry judged by training progress (by_tokens) is waited for up to the
 * run's time bound instead, so a slow machine is not judged by the clock. */
static void steady_state(runner *r, double limit_s)
{
    r->steady_ok = 1;
    if (r->e->nsteady == 0)
        return;
    double deadline_s = STEADY_DEFAULT_S;
    double maxby = -1;
    int by_progress = 0;
    for (int i = 0; i < r->e->nsteady; i++) {
        if (spec_by_s(r->e->steady_state[i]) > maxby)
            maxby = spec_by_s(r->e->steady_state[i]);
        by_progress |= json_object_get(hyp_spec_json(r->e->steady_state[i]), "by_tokens") != NULL;
    }
    if (maxby > 0)
        deadline_s = maxby + 5.0;
    if (by_progress && limit_s > deadline_s)
        deadline_s = limit_s;
    int64_t t0 = cx_real_ns();
    hyp_verdict *v = calloc((size_t)r->e->nsteady, sizeof *v);
    if (!v) {
        set_error(r, "out of memory");
        return;
    }
    cx_info("steady state: %d hypotheses, deadline %.0f s after the run start", r->e->nsteady, deadline_s);
    for (;;) {
        poll_all(r);
        if (r->abort || r->error || g_signal)
            break;
        hyp_history *h = build_history(r, 1);
        int all = 1;
        for (int i = 0; i < r->e->nsteady; i++) {
            hyp_spec_eval(r->e->steady_state[i], h, &v[i]);
            all &= v[i].status == HYP_PASS;
        }
        hyp_history_free(h);
        if (all || now_s_since(r->start_mono) >= deadline_s)
            break;
        nap(1000);
    }
    for (int i = 0; i < r->e->nsteady; i++) {
        const hyp_spec *s = r->e->steady_state[i];
        journal_add_hypothesis(r->j, JR_BEFORE, s, &v[i], t0, cx_real_ns());
        dash_hyp(r, verdict_json(hyp_spec_label(s), "steady_state", &v[i], 0));
        cx_log(v[i].status == HYP_PASS ? CX_LOG_INFO : CX_LOG_WARN, "steady state %s: %s (%s)",
               hyp_spec_label(s), hyp_status_name(v[i].status), v[i].explanation);
        if (v[i].status != HYP_PASS)
            r->steady_ok = 0;
    }
    free(v);
}

/* ---- run: the timeline ---- */

static int fault_is_down_kind(const char *type)
{
    static const char *const down[] = {"kill", "preempt", "pause", "partition", "blackhole", NULL};
    for (int i = 0; down[i]; i++)
        if (strcmp(type, down[i]) == 0)
            return 1;
    return 0;
}

static int unit_running(const agent_view *a)
{
    return strcmp(a->unit_state, "running") == 0 || strcmp(a->unit_state, "paused") == 0 ||
           strcmp(a->unit_state, "starting") == 0;
}

/* Learners under an unhealed down-kind fault of ours, or not running. */
static int busy_learners(runner *r, int except)
{
    int n = 0;
    for (int l = 0; l < r->m; l++) {
        if (l == except)
            continue;
        int busy = !unit_running(&r->av[l]);
        for (int k = 0; k < r->sched->n && !busy; k++) {
            sched_entry *se = &r->sched->entries[k];
            if (se->learner == l && r->fx[k].ok && !r->fx[k].healed && fault_is_down_kind(se->fault))
                busy = 1;
        }
        n += busy;
    }
    return n;
}

static void action_event(runner *r, const char *phase, const sched_entry *se, int learner, const char *fid,
                         const char *error)
{
    json_t *ev = jr_action_event(phase, se->name, se->fault, learner, fid, error);
    if (!ev)
        return;
    json_array_append(r->acts, ev);
    emit(r, ev);
}

/* The harness's own fault: kill the syncer now, restart it after down_ms. */
static void fire_syncer_fault(runner *r, int k)
{
    sched_entry *se = &r->sched->entries[k];
    fired *f = &r->fx[k];
    int64_t t0 = cx_real_ns();
    f->fired = 1;
    f->start_mono = cx_mono_ms();
    action_event(r, "invoke", se, -1, NULL, NULL);
    const char *sig = json_string_value(json_object_get(se->params, "signal"));
    int signo = sig && (strcmp(sig, "TERM") == 0 || strcmp(sig, "SIGTERM") == 0) ? SIGTERM : SIGKILL;
    json_t *dm = json_object_get(se->params, "down_ms");
    int64_t down_ms = json_is_integer(dm) ? json_integer_value(dm) : se->duration_ms;
    char err[CX_ERRLEN] = "";
    if (r->syncer_down || topo_syncer_kill(r->t, signo, err, sizeof err) < 0) {
        if (!err[0])
            snprintf(err, sizeof err, "the syncer is already down");
        action_event(r, "fail", se, -1, NULL, err);
        journal_add_action(r->j, 0, se->name, se->fault, -1, "failed", NULL, t0, cx_real_ns());
        f->healed = 1;
        set_error(r, "action %s: %s", se->name, err);
        return;
    }
    f->ok = 1;
    snprintf(f->fault_id, sizeof f->fault_id, "syncer");
    r->syncer_down = 1;
    r->syncer_up_at = cx_mono_ms() + down_ms;
    r->syncer_entry = k;
    action_event(r, "ok", se, -1, "syncer", NULL);
    json_t *out =
        json_pack("{s:s,s:I}", "signal", signo == SIGKILL ? "KILL" : "TERM", "down_ms", (json_int_t)down_ms);
    journal_add_action(r->j, 0, se->name, se->fault, -1, "succeeded", out, t0, cx_real_ns());
    json_decref(out);
    cx_info("action %s: syncer killed (SIG%s), restart in %" PRId64 " ms", se->name,
            signo == SIGKILL ? "KILL" : "TERM", down_ms);
}

static void maybe_restart_syncer(runner *r)
{
    if (!r->syncer_down || cx_mono_ms() < r->syncer_up_at)
        return;
    char err[CX_ERRLEN] = "";
    progress_end(r);
    int rc = topo_syncer_start(r->t, 30000, err, sizeof err);
    r->syncer_down = 0;
    r->fx[r->syncer_entry].healed = 1;
    r->fx[r->syncer_entry].healed_mono = cx_mono_ms();
    r->last_merge_mono = cx_mono_ms(); /* the no-merge clock restarts with the syncer */
    if (rc < 0) {
        emit_run(r, "syncer_restart_failed", err);
        set_error(r, "restarting the syncer: %s", err);
        return;
    }
    emit_run(r, "syncer_restarted", topo_syncer_url(r->t));
    cx_info("syncer restarted url=%s", topo_syncer_url(r->t));
}

/* A method action whose unit is not running (not started yet, restarting,
 * finished) waits for it up to its wait_ms (if_not_running "wait"), or not at
 * all ("skip"), then is skipped and the skip recorded (journal, events):
 * never an error that aborts the run. Returns 1 when the action must not be
 * sent now (f->fired stays 0 while waiting). */
static int wait_for_unit(runner *r, int k, const char *state)
{
    sched_entry *se = &r->sched->entries[k];
    fired *f = &r->fx[k];
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
    action_event(r, "skip", se, se->learner, NULL, why);
    int64_t t = cx_real_ns();
    json_t *out = json_pack("{s:s}", "skipped", why); /* not sent: "failed" in Chaos Toolkit's terms */
    journal_add_action(r->j, 0, se->name, se->fault, se->learner, "failed", out, t, t);
    json_decref(out);
    cx_warn("action %s: %s", se->name, why);
    return 1;
}

static void fire(runner *r, int k)
{
    progress_end(r);
    sched_entry *se = &r->sched->entries[k];
    fired *f = &r->fx[k];
    if (strcmp(se->fault, RUN_SYNCER_FAULT) == 0) {
        /* one syncer fault per action, whatever its targets */
        for (int j = 0; j < k; j++)
            if (r->sched->entries[j].action == se->action && se->action >= 0 && r->fx[j].fired) {
                f->fired = f->healed = f->skipped = 1;
                return;
            }
        fire_syncer_fault(r, k);
        return;
    }
    int l = se->learner;
    f->fired = 1;
    f->start_mono = cx_mono_ms();
    if (se->action >= 0 && !unit_running(&r->av[l]) && wait_for_unit(r, k, r->av[l].unit_state))
        return;
    if (se->action < 0) {
        /* chaos draws keep the live floor at run time too */
        const char *skip = NULL;
        char why[128];
        if (!unit_running(&r->av[l])) {
            snprintf(why, sizeof why, "unit %d is %s", l, r->av[l].unit_state);
            skip = why;
        } else if (fault_is_down_kind(se->fault) && r->m - busy_learners(r, l) - 1 < r->e->chaos.min_live) {
            snprintf(why, sizeof why, "would leave fewer than %d learners alive", r->e->chaos.min_live);
            skip = why;
        }
        if (skip) {
            f->skipped = f->healed = 1;
            json_t *ev = jr_action_event("skip", se->name, se->fault, l, NULL, skip);
            emit(r, ev);
            cx_info("chaos %s on learner %d skipped: %s", se->name, l, skip);
            return;
        }
    }
    int64_t t0 = cx_real_ns();
    action_event(r, "invoke", se, l, NULL, NULL);
    json_t *body = json_pack("{s:s,s:O,s:I,s:I}", "type", se->fault, "params", se->params, "duration_ms",
                             (json_int_t)se->duration_ms, "seed", (json_int_t)se->seed);
    if (se->has_toxicity)
        json_object_set_new(body, "toxicity", json_real(se->toxicity));
    int st = 0;
    json_t *ans = NULL;
    char err[CX_ERRLEN] = "";
    cx_http_json(r->av[l].http, "POST", "/v1/faults", body, &st, &ans, err, sizeof err);
    json_decref(body);
    const char *id = json_string_value(json_object_get(ans, "id"));
    if (http_ok(st) && id) {
        f->ok = 1;
        snprintf(f->fault_id, sizeof f->fault_id, "%s", id);
        action_event(r, "ok", se, l, id, NULL);
        journal_add_action(r->j, 0, se->name, se->fault, l, "succeeded", ans, t0, cx_real_ns());
        cx_info("action %s: %s on learner %d for %" PRId64 " ms -> fault %s", se->name, se->fault, l,
                se->duration_ms, id);
    } else {
        char msg[CX_ERRLEN + 64];
        answer_error(ans, st, err, msg, sizeof msg);
        if (se->action >= 0 && st == 409 && strstr(msg, "not running")) {
            /* our view of the unit was stale: wait for it like above */
            json_decref(ans);
            snprintf(r->av[l].unit_state, sizeof r->av[l].unit_state, "restarting");
            wait_for_unit(r, k, "not running");
            return;
        }
        f->healed = 1;
        action_event(r, "fail", se, l, NULL, msg);
        json_t *rec = json_object_get(ans, "fault");
        journal_add_action(r->j, 0, se->name, se->fault, l, "failed", rec ? rec : ans, t0, cx_real_ns());
        if (st == 503 && strstr(msg, "halted"))
            set_abort(r, "agent %d is halted: %s", l, msg);
        else
            set_error(r, "action %s on learner %d: %s", se->name, l, msg);
    }
    json_decref(ans);
}

/* Has every fault of method action a ended? */
static int action_healed(runner *r, int a)
{
    int any = 0;
    for (int k = 0; k < r->sched->n; k++) {
        if (r->sched->entries[k].action != a)
            continue;
        any = 1;
        if (!r->fx[k].fired || !r->fx[k].healed)
            return 0;
    }
    return any;
}

/* Heal checks: a fault past its duration is asked for its state. */
static void check_heals(runner *r)
{
    int64_t now = cx_mono_ms();
    for (int k = 0; k < r->sched->n; k++) {
        fired *f = &r->fx[k];
        sched_entry *se = &r->sched->entries[k];
        if (!f->ok || f->healed || strcmp(se->fault, RUN_SYNCER_FAULT) == 0)
            continue;
        if (now < f->start_mono + se->duration_ms || now - f->last_check < 500)
            continue;
        f->last_check = now;
        char path[128];
        snprintf(path, sizeof path, "/v1/faults/%s", f->fault_id);
        int st = 0;
        json_t *ans = NULL;
        cx_http_json(r->av[se->learner].http, "GET", path, NULL, &st, &ans, NULL, 0);
        const char *state = json_string_value(json_object_get(ans, "state"));
        if ((st == 200 && state && strcmp(state, "active") != 0) || st == 404) {
            f->healed = 1;
            f->healed_mono = now;
        }
        json_decref(ans);
    }
}

static int entry_due(runner *r, int k)
{
    sched_entry *se = &r->sched->entries[k];
    switch (se->when) {
    case EXP_AT_S:
        return now_s_since(r->method_mono) >= se->at_s;
    case EXP_AT_OUTER_STEP:
        return !r->syncer_down && r->merges >= se->at_outer_step;
    case EXP_AFTER:
        return action_healed(r, se->after);
    }
    return 0;
}

static void play_timeline(runner *r)
{
    for (int k = 0; k < r->sched->n && !r->abort && !r->error && !g_signal; k++)
        if (!r->fx[k].fired && entry_due(r, k))
            fire(r, k);
    check_heals(r);
    maybe_restart_syncer(r);
}

/* Entries the horizon waits for: not fired yet, or fired and not healed
 * (an until_end fault, once fired, lasts until the run ends instead). */
static int pending_entries(runner *r)
{
    int n = 0;
    for (int k = 0; k < r->sched->n; k++)
        n += !r->fx[k].fired || (r->fx[k].ok && !r->fx[k].healed && !r->sched->entries[k].until_end);
    return n;
}

static int active_faults(runner *r)
{
    int n = 0;
    for (int k = 0; k < r->sched->n; k++)
        n += r->fx[k].ok && !r->fx[k].healed;
    return n;
}

/* ---- run: polling, stop conditions, end of training ---- */

static void check_training_over(runner *r)
{
    int done = 1, exited0 = 0;
    for (int l = 0; l < r->m; l++) {
        agent_view *a = &r->av[l];
        if (strcmp(a->unit_state, "exited") == 0 && a->exit_code == 0) {
            exited0++;
            continue;
        }
        /* a unit down for good (killed, no restart pending) counts as over
         * once nothing of ours is pending on it */
        if ((strcmp(a->unit_state, "killed") == 0 || strcmp(a->unit_state, "exited") == 0) &&
            a->faults_active == 0 && pending_entries(r) == 0)
            continue;
        done = 0;
    }
    if (done && exited0 > 0 && !r->syncer_down)
        r->training_over = 1;
}

static void poll_all(runner *r)
{
    int64_t now = cx_mono_ms();
    poll_events(r);
    if (now - r->last_status >= STATUS_EVERY_MS) {
        r->last_status = now;
        poll_syncer_status(r);
    }
    for (int l = 0; l < r->m; l++)
        if (now - r->av[l].last_poll >= AGENT_EVERY_MS)
            poll_agent(r, l);
    if (r->state != RS_STEADY && r->state != RS_METHOD)
        return;
    const exp_stop *sc = &r->e->stop;
    now = cx_mono_ms();
    if (sc->has_no_merge_for_s && !r->syncer_down && !r->training_over) {
        int64_t since = r->last_merge_mono > r->start_mono ? r->last_merge_mono : r->start_mono;
        if ((double)(now - since) / 1000.0 > sc->no_merge_for_s)
            set_abort(r, "stop condition no_merge_for_s %g: no merge for %.1f s", sc->no_merge_for_s,
                      (double)(now - since) / 1000.0);
    }
    if (sc->has_agent_unreachable_s)
        for (int l = 0; l < r->m; l++) {
            int64_t last = r->av[l].last_ok_mono ? r->av[l].last_ok_mono : r->start_mono;
            if ((double)(now - last) / 1000.0 > sc->agent_unreachable_s)
                set_abort(r, "stop condition agent_unreachable_s %g: agent %d silent for %.1f s",
                          sc->agent_unreachable_s, l, (double)(now - last) / 1000.0);
        }
    if (g_signal)
        set_abort(r, "interrupted by %s", g_signal == SIGINT ? "SIGINT" : "SIGTERM");
}

/* ---- run: progress ---- */

static void progress(runner *r, const char *phase, double left_s)
{
    int64_t now = cx_mono_ms();
    int every = r->tty ? 250 : 10000;
    if (now - r->last_progress < every)
        return;
    r->last_progress = now;
    char loss[32];
    if (isfinite(r->eval_loss))
        snprintf(loss, sizeof loss, "%.4f", r->eval_loss);
    else
        snprintf(loss, sizeof loss, "-");
    if (r->tty)
        fprintf(stderr,
                "\r\033[K%-12s outer step %-6" PRId64 " eval loss %-8s faults %-2d time left %4.0f s ", phase,
                r->merges, loss, active_faults(r), left_s);
    else
        cx_info("progress phase=%s merges=%" PRId64 " eval_loss=%s faults_active=%d time_left_s=%.0f", phase,
                r->merges, loss, active_faults(r), left_s);
    if (r->dash)
        dash_server_set_progress(r->dash, phase, now - r->start_mono, (int64_t)(left_s * 1000));
}

static void progress_end(runner *r)
{
    if (r->tty && r->last_progress) {
        fprintf(stderr, "\r\033[K");
        r->last_progress = 0;
    }
}

/* ---- run: the horizon ---- */

/* What horizon.h decides on, from what the runner saw. heal must hold m. */
static void hz_fill(runner *r, int64_t *heal, hz_progress *p)
{
    memset(p, 0, sizeof *p);
    p->start_ms = r->method_mono ? r->method_mono : r->start_mono;
    p->now_ms = r->end_mono ? r->end_mono : cx_mono_ms();
    p->pending = pending_entries(r);
    p->heal_ms = heal;
    p->m = r->m;
    p->min_tokens = r->min_tokens;
    p->min_merges = r->e->min_merges;
    p->merges = r->merges;
    p->eval_tokens = json_integer_value(json_object_get(json_object_get(r->status, "eval"), "tokens"));
    for (int l = 0; l < r->m; l++)
        heal[l] = 0;
    for (int k = 0; k < r->sched->n; k++) {
        int64_t h = r->fx[k].healed_mono;
        int l = r->sched->entries[k].learner;
        if (h > p->any_heal_ms)
            p->any_heal_ms = h;
        if (l >= 0 && l < r->m && h > heal[l])
            heal[l] = h;
        if (l < 0 && h > 0) /* the syncer's restart reopens every learner's window */
            for (int i = 0; i < r->m; i++)
                heal[i] = h > heal[i] ? h : heal[i];
    }
    json_t *ls = json_object_get(r->status, "learners"), *v;
    size_t i;
    json_array_foreach(ls, i, v) p->tokens += json_integer_value(json_object_get(v, "tokens"));
}

/* The run is long enough: tell the syncer to end it (learners finish,
 * send, leave and exit 0; check_training_over then sees it). */
static void maybe_end(runner *r)
{
    if (r->end_sent || r->syncer_down || !topo_launched(r->t))
        return;
    int64_t heal[EXP_MAX_LEARNERS];
    hz_progress p;
    char why[256];
    hz_fill(r, heal, &p);
    if (!horizon_done(r->hw, r->nhw, &p, why, sizeof why))
        return;
    json_t *body = json_pack("{s:s}", "reason", why), *ans = NULL;
    int st = 0;
    char err[CX_ERRLEN] = "";
    cx_http_json(r->sy, "POST", "/v1/end", body, &st, &ans, err, sizeof err);
    json_decref(body);
    json_decref(ans);
    if (st != 200) {
        cx_warn("POST /v1/end: HTTP %d %s (will retry)", st, err);
        return;
    }
    r->end_sent = 1;
    progress_end(r);
    emit_run(r, "end", why);
    cx_info("horizon reached at t=%.1f s: %s", now_s_since(p.start_ms), why);
}

/* Windows of the verify list; min_tokens from the file or M x steps x batch. */
static int hz_setup(runner *r)
{
    r->hw = calloc((size_t)r->e->nverify + 1, sizeof *r->hw);
    r->hw_spec = calloc((size_t)r->e->nverify + 1, sizeof *r->hw_spec);
    if (!r->hw || !r->hw_spec)
        return CX_ENOMEM;
    for (int i = 0; i < r->e->nverify; i++) {
        const hyp_spec *sp = r->e->verify[i];
        if (horizon_window(hyp_spec_json(sp), hyp_spec_label(sp), &r->hw[r->nhw]))
            r->hw_spec[r->nhw++] = i;
    }
    /* a foreign trainer's horizon is the file's (the validator requires one): steps x batch are ours */
    r->min_tokens = r->e->min_tokens > 0 ? r->e->min_tokens
                    : r->e->trainer      ? 0
                                         : (int64_t)r->m * r->steps_target * r->batch;
    return 0;
}

/* ---- run: method ---- */

static void method(runner *r, double limit_s)
{
    r->last_merge_mono = r->last_merge_mono > r->method_mono ? r->last_merge_mono : r->method_mono;
    emit_run(r, "method_start", NULL);
    cx_info("method: %d timeline entries (%d chaos draws), time bound %.0f s", r->sched->n,
            r->sched->chaos_drawn, limit_s);
    for (;;) {
        poll_all(r);
        if (r->abort || r->error)
            break;
        play_timeline(r);
        if (r->abort || r->error)
            break;
        check_training_over(r);
        if (!r->training_over)
            maybe_end(r);
        double left = limit_s - now_s_since(r->start_mono);
        if (r->training_over) {
            progress_end(r);
            cx_info("training over: every learner finished");
            break;
        }
        if (left <= 0) {
            progress_end(r);
            cx_warn("time bound of %.0f s reached before training ended; verifying what ran", limit_s);
            emit_run(r, "time_bound", NULL);
            break;
        }
        progress(r, "method", left);
        nap(TICK_MS);
    }
    progress_end(r);
    /* an action that never came due is an injection that did not happen */
    if (!r->abort && !r->error)
        for (int k = 0; k < r->sched->n; k++)
            if (!r->fx[k].fired && r->sched->entries[k].action >= 0) {
                sched_entry *se = &r->sched->entries[k];
                r->fx[k].fired = r->fx[k].healed = 1;
                action_event(r, "fail", se, se->learner, NULL, "training ended before this action was due");
                set_error(r, "action %s (learner %d) never came due before training ended", se->name,
                          se->learner);
            }
    if (r->syncer_down) {
        r->syncer_up_at = 0;
        maybe_restart_syncer(r);
    }
    r->end_mono = cx_mono_ms();
}

/* ---- run: verify ---- */

/* A window the run did not see close (it ended by its time bound, a stop
 * condition or the learners' budget, not by the horizon) cannot be judged:
 * the verdict becomes an error that says so. */
static void unobserved(runner *r, int spec, hyp_verdict *v)
{
    if (r->end_sent)
        return;
    int64_t heal[EXP_MAX_LEARNERS];
    hz_progress p;
    hz_fill(r, heal, &p);
    for (int i = 0; i < r->nhw; i++) {
        char msg[sizeof v->explanation];
        if (r->hw_spec[i] != spec || !horizon_unobserved(&r->hw[i], &p, msg, sizeof msg))
            continue;
        v->status = HYP_ERROR;
        snprintf(v->explanation, sizeof v->explanation, "%s", msg);
    }
}

static void verify(runner *r)
{
    /* final collection: every event, every fault record, final status */
    poll_events(r);
    poll_syncer_status(r);
    hyp_history *h = build_history(r, 1);
    if (!h) {
        set_error(r, "out of memory");
        return;
    }
    for (int i = 0; i < r->e->nverify; i++) {
        const hyp_spec *s = r->e->verify[i];
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
static json_t *summary_json(runner *r)
{
    hyp_history *h = build_history(r, 0);
    if (!h)
        return NULL;
    static const char *const probes[][2] = {
        {"goodput", "{\"hypothesis\":\"goodput\",\"min\":0}"},
        {"bytes_per_token", "{\"hypothesis\":\"bandwidth\",\"max\":1e300}"},
        {"longest_merge_gap_s", "{\"hypothesis\":\"no_global_downtime\",\"max_gap_s\":1e9}"},
    };
    json_t *o = json_object();
    json_object_set_new(o, "mode", json_string(r->e->mode));
    json_object_set_new(o, "learners", json_integer(r->m));
    json_object_set_new(o, "seed", json_integer((json_int_t)r->seed));
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        json_t *spec = json_loads(probes[i][1], 0, NULL);
        hyp_spec *s = hyp_spec_parse(spec, "$", r->m, NULL);
        json_decref(spec);
        double x = NAN;
        if (s) {
            hyp_verdict v;
            hyp_spec_eval(s, h, &v);
            if (v.status != HYP_ERROR)
                x = v.measured;
            hyp_spec_free(s);
        }
        json_object_set_new(o, probes[i][0], isfinite(x) ? json_real(x) : json_null());
    }
    hyp_history_free(h);
    /* tokens the learners reported (what the figures above were measured over) */
    json_int_t tokens = 0;
    json_t *lv;
    size_t li;
    json_array_foreach(json_object_get(r->status, "learners"), li, lv) tokens +=
        json_integer_value(json_object_get(lv, "tokens"));
    json_object_set_new(o, "tokens", json_integer(tokens));
    /* the eval curve, s since the run start */
    json_t *curve = json_array();
    double final = NAN;
    size_t i;
    json_t *ev;
    json_array_foreach(r->sev, i, ev)
    {
        if (strcmp(jstr(ev, "type"), "eval") != 0)
            continue;
        json_t *l = json_object_get(ev, "loss");
        double loss = json_is_number(l) ? json_number_value(l) : NAN;
        double t = (double)(json_integer_value(json_object_get(ev, "t_mono_ms")) - r->start_mono) / 1000.0;
        json_array_append_new(
            curve, json_pack("[f,o]", t, isfinite(loss) && loss >= 0 ? json_real(loss) : json_null()));
        final = isfinite(loss) && loss >= 0 ? loss : NAN;
    }
    json_object_set_new(o, "final_loss", isfinite(final) ? json_real(final) : json_null());
    json_object_set_new(o, "final_bpb", isfinite(final) ? json_real(final / M_LN2) : json_null());
    json_object_set_new(o, "eval_curve", curve);
    json_object_set_new(o, "duration_s", json_real((double)(r->end_mono - r->start_mono) / 1000.0));
    json_object_set_new(o, "merges", json_integer((json_int_t)r->merges));
    return o;
}

/* ---- run: revert ---- */

static void delete_active(runner *r, int l, const char *why)
{
    int st = 0;
    json_t *ans = NULL;
    cx_http_json(r->av[l].http, "GET", "/v1/faults", NULL, &st, &ans, NULL, 0);
    size_t i;
    json_t *rec;
    json_array_foreach(json_object_get(ans, "faults"), i, rec)
    {
        if (strcmp(jstr(rec, "state"), "active") != 0)
            continue;
        const char *id = json_string_value(json_object_get(rec, "id"));
        char path[128];
        snprintf(path, sizeof path, "/v1/faults/%s", id ? id : "");
        int dst = 0;
        json_t *d = NULL;
        cx_http_json(r->av[l].http, "DELETE", path, NULL, &dst, &d, NULL, 0);
        json_decref(d);
        if (!http_ok(dst))
            cx_warn("revert of fault %s on agent %d failed (HTTP %d) (%s)", id, l, dst, why);
        else
            cx_info("reverted fault %s on learner %d (%s)", id, l, why);
    }
    json_decref(ans);
}

static int agent_post(runner *r, int l, const char *path, json_t **ans)
{
    json_t *body = json_object();
    int st = 0;
    cx_http_json(r->av[l].http, "POST", path, body, &st, ans, NULL, 0);
    json_decref(body);
    return st;
}

static void revert(runner *r)
{
    int aborted = r->abort || r->error || g_signal;
    for (int l = 0; l < r->m; l++)
        delete_active(r, l, "end of run");
    /* rollbacks from the file, whatever happened */
    for (int i = 0; i < r->e->nrollbacks; i++) {
        exp_rollback *rb = &r->e->rollbacks[i];
        int ids[EXP_MAX_LEARNERS], n = 0;
        if (rb->targets.kind == EXP_TARGET_IDS && rb->targets.nids > 0) {
            for (int k = 0; k < rb->targets.nids; k++)
                ids[n++] = rb->targets.ids[k];
        } else if (rb->targets.kind == EXP_TARGET_IDS) {
            for (int k = 0; k < r->m; k++)
                ids[n++] = k;
        } else {
            /* random/percent: the same seeded draw style as the schedule */
            int want = rb->targets.kind == EXP_TARGET_RANDOM ? rb->targets.random_n
                                                             : (int)ceil(rb->targets.percent * r->m / 100.0);
            for (int k = 0; k < r->m && n < want; k++)
                ids[n++] = k;
        }
        const char *kind = rb->kind == EXP_RB_HALT     ? "halt"
                           : rb->kind == EXP_RB_RESUME ? "resume"
                                                       : "revert_faults";
        for (int k = 0; k < n; k++) {
            int l = ids[k];
            int64_t t0 = cx_real_ns();
            int st = 200;
            json_t *ans = NULL;
            if (rb->kind == EXP_RB_REVERT_FAULTS)
                delete_active(r, l, rb->name);
            else
                st = agent_post(r, l, rb->kind == EXP_RB_HALT ? "/v1/halt" : "/v1/resume", &ans);
            journal_add_action(r->j, 1, rb->name, kind, l, http_ok(st) ? "succeeded" : "failed", ans, t0,
                               cx_real_ns());
            json_decref(ans);
        }
    }
    if (aborted)
        for (int l = 0; l < r->m; l++) {
            int64_t t0 = cx_real_ns();
            json_t *ans = NULL;
            int st = agent_post(r, l, "/v1/halt", &ans);
            journal_add_action(r->j, 1, "halt-on-abort", "halt", l, http_ok(st) ? "succeeded" : "failed", ans,
                               t0, cx_real_ns());
            json_decref(ans);
            if (!http_ok(st))
                cx_warn("POST /v1/halt on agent %d failed (HTTP %d)", l, st);
        }
    fetch_faults(r);
    for (int l = 0; l < r->m; l++) {
        size_t i;
        json_t *rec;
        json_array_foreach(r->av[l].faults, i, rec) if (strcmp(jstr(rec, "state"), "active") == 0)
            cx_warn("fault %s on learner %d is still active after the revert",
                    json_string_value(json_object_get(rec, "id")), l);
    }
    release_leases(r);
}

/* ---- run: outputs ---- */

static void append_collected(runner *r)
{
    /* events.jsonl also carries every training event and the final fault
     * records, so one file tells the whole story (report.c reads it). */
    size_t i;
    json_t *v;
    json_array_foreach(r->sev, i, v)
    {
        json_t *c = json_deep_copy(v);
        json_object_set_new(c, "kind", json_string("training"));
        jr_events_append(r->ev, c, NULL, 0);
        json_decref(c);
    }
    for (int l = 0; r->av && l < r->m; l++) /* no agent views when the topology never started */
        json_array_foreach(r->av[l].faults, i, v)
        {
            json_t *c = json_pack("{s:s,s:i,s:O}", "kind", "fault", "learner", l, "record", v);
            jr_events_append(r->ev, c, NULL, 0);
            json_decref(c);
        }
    json_t *fl = json_array();
    for (int l = 0; r->av && l < r->m; l++)
        json_array_foreach(r->av[l].faults, i, v)
            json_array_append_new(fl, json_pack("{s:i,s:O}", "learner", l, "record", v));
    char path[PATHLEN + 32];
    join_path(path, sizeof path, r->run_dir, "faults.json");
    json_dump_file(fl, path, JSON_INDENT(1));
    json_decref(fl);
}

/* The addresses the journal's translated experiment calls. */
static void journal_endpoints(runner *r)
{
    const char *urls[EXP_MAX_LEARNERS];
    for (int i = 0; i < r->m && i < EXP_MAX_LEARNERS; i++)
        urls[i] = topo_agent_url(r->t, i);
    journal_set_endpoints(r->j, topo_syncer_url(r->t), urls,
                          r->m < EXP_MAX_LEARNERS ? r->m : EXP_MAX_LEARNERS);
}

static void print_verdicts(runner *r, const run_result *res)
{
    json_t *jj = journal_json(r->j);
    printf("\n%s\n  status %s, exit %d, run dir %s\n", r->e->title, res->status, res->exit_code, r->run_dir);
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
                   jstr(out, "verdict"), jstr(out, "explanation"));
        }
    }
    if (r->why[0])
        printf("  %s: %s\n", r->error ? "error" : "aborted", r->why);
    fflush(stdout);
    json_decref(jj);
}

/* ---- run: set-up ---- */

static void make_slug(const char *path, const char *title, char *out, size_t len)
{
    const char *src = title;
    char base[256];
    if (path) {
        const char *b = strrchr(path, '/');
        snprintf(base, sizeof base, "%s", b ? b + 1 : path);
        char *dot = strrchr(base, '.');
        if (dot && strcmp(dot, ".json") == 0)
            *dot = '\0';
        src = base;
    }
    size_t n = 0;
    int dash = 0;
    for (const char *p = src; *p && n + 1 < len && n < 60; p++) {
        char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') {
            out[n++] = c;
            dash = 0;
        } else if (c >= 'A' && c <= 'Z') {
            out[n++] = (char)(c - 'A' + 'a');
            dash = 0;
        } else if (!dash && n > 0) {
            out[n++] = '-';
            dash = 1;
        }
    }
    while (n > 0 && out[n - 1] == '-')
        n--;
    out[n] = '\0';
    if (!n)
        snprintf(out, len, "experiment");
}

static int make_run_dir(runner *r, char *err, size_t errlen)
{
    if (r->o->out_dir && strlen(r->o->out_dir) >= sizeof r->run_dir - 64)
        return cx_fail(err, errlen, CX_EINVAL, "--out: path longer than %zu bytes", sizeof r->run_dir - 64);
    if (r->o->out_root && strlen(r->o->out_root) >= 256)
        return cx_fail(err, errlen, CX_EINVAL, "output root longer than 255 bytes");
    if (r->o->out_dir) {
        snprintf(r->run_dir, sizeof r->run_dir, "%s", r->o->out_dir);
    } else {
        char iso[40];
        cx_iso_time(iso, sizeof iso, cx_real_ns());
        /* 2026-12-02T11:30:26.123Z -> 20261202T113026Z */
        char stamp[24];
        size_t n = 0;
        for (const char *p = iso; *p && *p != '.' && n + 2 < sizeof stamp; p++)
            if (*p != '-' && *p != ':')
                stamp[n++] = *p;
        stamp[n++] = 'Z';
        stamp[n] = '\0';
        const char *root = r->o->out_root ? r->o->out_root : "out";
        snprintf(r->run_dir, sizeof r->run_dir, "%s/%s-%s", root, r->slug, stamp);
        struct stat sb;
        for (int k = 2; stat(r->run_dir, &sb) == 0 && k < 100; k++)
            snprintf(r->run_dir, sizeof r->run_dir, "%s/%s-%s-%d", root, r->slug, stamp, k);
    }
    struct stat sb;
    if (stat(r->run_dir, &sb) == 0) {
        char probe[PATHLEN + 32];
        snprintf(probe, sizeof probe, "%s/journal.json", r->run_dir);
        if (access(probe, F_OK) == 0 ||
            (snprintf(probe, sizeof probe, "%s/pids.json", r->run_dir), access(probe, F_OK) == 0))
            return cx_fail(
                err, errlen, CX_ECONFLICT,
                "--out %s already holds a run (journal.json or pids.json); choose a fresh directory",
                r->run_dir);
    }
    return cx_mkdir_p(r->run_dir, err, errlen);
}

/* The syncer's config: topology.training, M, the mode override; checked
 * with the trainer's own rules so a bad key fails before anything starts. */
static json_t *syncer_config(runner *r, char *err, size_t errlen)
{
    json_t *c = json_deep_copy(r->e->training ? r->e->training : json_object());
    if (!c)
        c = json_object();
    json_object_set_new(c, "learners", json_integer(r->m));
    if (r->o->mode)
        json_object_set_new(c, "mode", json_string(r->o->mode));
    /* CI's slow pass: every learner slowed (docs/experiments.md) */
    const char *slow = getenv("CHAOSLOCO_SLOWDOWN");
    if (slow && *slow) {
        char *end = NULL;
        double x = strtod(slow, &end);
        if (*end || !(x >= 1.0 && x <= 1000.0)) {
            cx_fail(err, errlen, CX_EINVAL, "CHAOSLOCO_SLOWDOWN=%s: expected a number in 1..1000", slow);
            json_decref(c);
            return NULL;
        }
        json_object_set_new(c, "slowdown", json_real(x));
    }
    config cfg;
    config_defaults(&cfg);
    int64_t mode = cfg.mode, model = cfg.model; /* what the file does not name */
    json_t *jm = json_object_get(c, "mode");
    if (json_is_string(jm) && config_parse_mode(json_string_value(jm), &mode) < 0) {
        cx_fail(err, errlen, CX_EINVAL, "training mode '%s' is not ddp|ddp-elastic|diloco|decoupled",
                json_string_value(jm));
        json_decref(c);
        return NULL;
    }
    json_t *jk = json_object_get(c, "model");
    if (json_is_string(jk) && config_parse_model(json_string_value(jk), &model) < 0) {
        cx_fail(err, errlen, CX_EINVAL, "model '%s' is not mlp|gpt", json_string_value(jk));
        json_decref(c);
        return NULL;
    }
    config_kind_defaults(&cfg, mode, model);
    char e2[CX_ERRLEN];
    if (config_from_json(&cfg, c, "topology.training", e2, sizeof e2) < 0 ||
        config_validate(&cfg, e2, sizeof e2) < 0) {
        cx_fail(err, errlen, CX_EINVAL, "topology.training: %s", e2);
        json_decref(c);
        return NULL;
    }
    r->steps_target = cfg.steps;
    r->batch = cfg.batch;
    return c;
}

static int load(runner *r, char *err, size_t errlen)
{
    jv_diag *d = jv_diag_new();
    unsigned flags = r->o->ci ? EXP_CI : 0;
    int rc = r->o->experiment ? exp_load(r->o->experiment, flags, &r->e, d, err, errlen)
                              : exp_load_string(run_default_experiment(), flags, &r->e, d, err, errlen);
    if (rc < 0) {
        char pre[600];
        snprintf(pre, sizeof pre, "%s: ", r->o->experiment ? r->o->experiment : "(default)");
        jv_diag_print(stderr, d, pre);
        jv_diag_free(d);
        return rc;
    }
    jv_diag_free(d);
    if (r->e->attach_syncer && r->o->mode) {
        return cx_fail(err, errlen, CX_EINVAL, "--mode cannot change the mode of an attached syncer");
    }
    if (r->o->mode) {
        int64_t m;
        if (config_parse_mode(r->o->mode, &m) < 0)
            return cx_fail(err, errlen, CX_EINVAL, "--mode: '%s' is not ddp|ddp-elastic|diloco|decoupled",
                           r->o->mode);
        free(r->e->mode);
        r->e->mode = strdup(r->o->mode);
    }
    r->m = r->e->learners;
    r->seed = r->o->has_seed ? r->o->seed : r->e->seed;
    rc = sched_build(r->e, r->seed, &r->sched, err, errlen);
    if (rc < 0)
        return rc;
    make_slug(r->o->experiment, r->e->title, r->slug, sizeof r->slug);
    if (!r->o->experiment)
        snprintf(r->slug, sizeof r->slug, "default");
    return 0;
}

static void dry_run(runner *r)
{
    json_t *s = sched_json(r->sched);
    printf("experiment: %s\nvariant: %s\nlearners: %d  mode: %s  seed: %" PRIu64 "\n", r->e->title,
           r->o->ci ? "ci" : "base", r->m, r->e->mode, r->seed);
    printf("timeline: %d entries (%d chaos draws, %d skipped for the live floor, %d skipped as busy)\n",
           r->sched->n, r->sched->chaos_drawn, r->sched->skipped_floor, r->sched->skipped_busy);
    for (int k = 0; k < r->sched->n; k++) {
        sched_entry *se = &r->sched->entries[k];
        char when[64];
        if (se->when == EXP_AT_S)
            snprintf(when, sizeof when, "at %.1f s", se->at_s);
        else if (se->when == EXP_AT_OUTER_STEP)
            snprintf(when, sizeof when, "at outer step %" PRId64, se->at_outer_step);
        else
            snprintf(when, sizeof when, "after %s", r->e->method[se->after].name);
        char *params = json_dumps(se->params, JSON_COMPACT | JSON_SORT_KEYS);
        printf("  %-22s %-10s learner %-3d %-20s for %" PRId64 " ms  params %s\n", se->name, se->fault,
               se->learner, when, se->duration_ms, params ? params : "{}");
        free(params);
    }
    char *js = json_dumps(s, JSON_COMPACT | JSON_SORT_KEYS);
    printf("%s\n", js ? js : "{}");
    free(js);
    json_decref(s);
}

static int start_topology(runner *r, char *err, size_t errlen)
{
    char exe[PATHLEN];
    int rc = cx_self_exe(exe, sizeof exe);
    if (rc < 0)
        return cx_fail(err, errlen, rc, "cannot find the chaosloco binary (/proc/self/exe)");
    if (r->e->attach_syncer) {
        rc = topo_attach(
            r->e->attach_syncer, r->e->attach_agents, r->e->nattach_agents, r->e->attach_token_file,
            r->o->syncer_credential_file ? r->o->syncer_credential_file : r->e->attach_syncer_credential_file,
            &r->t, err, errlen);
    } else {
        json_t *sc = syncer_config(r, err, errlen);
        if (!sc)
            return CX_EINVAL;
        char prefix[48];
        snprintf(prefix, sizeof prefix, "cl%d", (int)getpid());
        topo_launch_cfg lc = {.run_dir = r->run_dir,
                              .exe = exe,
                              .learners = r->m,
                              .syncer_cfg = sc,
                              .unit_prefix = prefix,
                              .ready_timeout_ms = 60000,
                              .learner_steps = (long long)r->steps_target * HZ_BUDGET_X,
                              .trainer = r->e->trainer,
                              .experiment_path = r->o->experiment,
                              .seed = r->seed};
        rc = topo_launch(&lc, &r->t, err, errlen);
        json_decref(sc);
    }
    if (rc < 0)
        return rc;
    /* the syncer gets the harness's own (admin) credential, never the agents' token */
    cx_http_opts so = {.connect_timeout_ms = 500, .timeout_ms = 5000, .bearer = topo_syncer_credential(r->t)};
    r->sy = cx_http_client_new(topo_syncer_url(r->t), &so);
    r->av = calloc((size_t)r->m, sizeof *r->av);
    if (!r->sy || !r->av)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    cx_http_opts ao = {.connect_timeout_ms = 500, .timeout_ms = 3000, .bearer = topo_token(r->t)};
    for (int l = 0; l < r->m; l++) {
        r->av[l].http = cx_http_client_new(topo_agent_url(r->t, l), &ao);
        r->av[l].exit_code = -1;
        snprintf(r->av[l].unit_state, sizeof r->av[l].unit_state, "starting");
        if (!r->av[l].http)
            return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    return 0;
}

static void start_dashboard(runner *r)
{
    const char *listen = r->o->dashboard ? r->o->dashboard : (!r->o->experiment ? "127.0.0.1:0" : NULL);
    if (!listen)
        return;
    const char *urls[EXP_MAX_LEARNERS];
    int ids[EXP_MAX_LEARNERS];
    int n = r->m < DASH_MAX_AGENTS ? r->m : DASH_MAX_AGENTS;
    for (int l = 0; l < n; l++) {
        urls[l] = topo_agent_url(r->t, l);
        ids[l] = l;
    }
    char dstate[PATHLEN + 16];
    snprintf(dstate, sizeof dstate, "%s/dashboard", r->run_dir);
    cx_mkdir_p(dstate, NULL, 0);
    dash_config dc = {.listen = listen,
                      .syncer_url = topo_syncer_url(r->t),
                      .agent_urls = urls,
                      .agent_learners = ids,
                      .nagents = n,
                      .token = topo_token(r->t),
                      .syncer_credential = topo_syncer_credential(r->t),
                      .poll_ms = 500,
                      .state_dir = dstate,
                      .title = r->e->title};
    char err[CX_ERRLEN];
    r->dash = dash_server_new(&dc, err, sizeof err);
    if (!r->dash) {
        cx_warn("dashboard not started: %s", err);
        return;
    }
    printf("dashboard: %s\n", dash_server_url(r->dash));
    fflush(stdout);
    cx_info("dashboard url=%s", dash_server_url(r->dash));
    dash_pending(r);
}

/* ---- run: the whole run ---- */

static void runner_cleanup(runner *r)
{
    if (r->lease_running)
        release_leases(r);
    topo_free(r->t);
    r->t = NULL;
    dash_server_free(r->dash);
    r->dash = NULL;
    json_decref(r->dash_hyps);
    free(r->hw);
    free(r->hw_spec);
    r->hw = NULL;
    r->hw_spec = NULL;
    if (r->av)
        for (int l = 0; l < r->m; l++) {
            cx_http_client_free(r->av[l].http);
            json_decref(r->av[l].faults);
        }
    free(r->av);
    cx_http_client_free(r->sy);
    jr_events_close(r->ev);
    journal_free(r->j);
    sched_free(r->sched);
    free(r->fx);
    exp_free(r->e);
    json_decref(r->sev);
    json_decref(r->acts);
    json_decref(r->status);
}

void run_result_cleanup(run_result *res)
{
    if (!res)
        return;
    json_decref(res->summary);
    res->summary = NULL;
}

int run_experiment(const run_opts *o, run_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    runner rr;
    runner *r = &rr;
    memset(r, 0, sizeof *r);
    r->o = o;
    r->eval_loss = NAN;
    r->sev = json_array();
    r->acts = json_array();
    r->tty = o->progress < 0 ? isatty(STDERR_FILENO) : o->progress;
    set_state(r, RS_LOADED);

    if (load(r, err, errlen) < 0) {
        res->exit_code = RUN_EXIT_USAGE;
        runner_cleanup(r);
        return CX_EINVAL;
    }
    if (o->check) {
        res->exit_code = RUN_EXIT_OK;
        runner_cleanup(r);
        return 0;
    }
    if (o->dry_run) {
        dry_run(r);
        res->exit_code = RUN_EXIT_OK;
        runner_cleanup(r);
        return 0;
    }
    if (!r->e->attach_syncer) {
        char e2[CX_ERRLEN];
        json_t *sc = syncer_config(r, e2, sizeof e2);
        if (!sc) {
            snprintf(err, errlen, "%s", e2);
            res->exit_code = RUN_EXIT_USAGE;
            runner_cleanup(r);
            return CX_EINVAL;
        }
        json_decref(sc);
    }
    r->fx = calloc((size_t)(r->sched->n ? r->sched->n : 1), sizeof *r->fx);
    r->j = journal_new(r->e);
    if (r->j && journal_set_plan(r->j, r->e, r->sched) < 0) {
        journal_free(r->j);
        r->j = NULL;
    }
    if (!r->fx || !r->j) {
        res->exit_code = RUN_EXIT_ERROR;
        snprintf(err, errlen, "out of memory");
        runner_cleanup(r);
        return 0;
    }
    char e2[CX_ERRLEN] = "";
    if (make_run_dir(r, e2, sizeof e2) < 0) {
        snprintf(err, errlen, "%s", e2);
        res->exit_code = RUN_EXIT_USAGE;
        runner_cleanup(r);
        return CX_EINVAL;
    }
    snprintf(res->run_dir, sizeof res->run_dir, "%s", r->run_dir);
    char path[PATHLEN + 64];
    join_path(path, sizeof path, r->run_dir, "events.jsonl");
    if (jr_events_open(path, &r->ev, e2, sizeof e2) < 0)
        set_error(r, "%s", e2);
    join_path(path, sizeof path, r->run_dir, "timeline.json");
    json_t *tl = sched_json(r->sched);
    json_dump_file(tl, path, JSON_INDENT(1) | JSON_SORT_KEYS);
    json_decref(tl);

    r->start_real = cx_real_ns();
    journal_set_start(r->j, r->start_real);
    cx_info("run experiment=\"%s\" variant=%s learners=%d mode=%s seed=%" PRIu64 " run_dir=%s timeline=%d "
            "steps=%" PRId64,
            r->e->title, o->ci ? "ci" : "base", r->m, r->e->mode, r->seed, r->run_dir, r->sched->n,
            r->steps_target);
    emit_run(r, "start", r->e->title);

    if (!r->error && !g_signal) {
        if (start_topology(r, e2, sizeof e2) < 0) {
            set_error(r, "starting the topology: %s", e2);
        } else {
            set_state(r, RS_LAUNCHED);
            journal_endpoints(r);
        }
    }
    r->start_mono = cx_mono_ms();
    if (r->t && !r->error) {
        start_dashboard(r);
        if (take_leases(r) == 0) {
            set_state(r, RS_STEADY);
            double limit = o->time_limit_s > 0 ? o->time_limit_s : (o->ci ? 300.0 : 600.0);
            steady_state(r, limit);
            if (r->steady_ok && !r->abort && !r->error && !g_signal) {
                r->method_mono = cx_mono_ms(); /* RS_METHOD holds: the method has a start */
                set_state(r, RS_METHOD);
                if (hz_setup(r) != 0)
                    set_error(r, "out of memory");
                else
                    method(r, limit);
            } else if (!r->steady_ok) {
                cx_warn("the steady state did not hold: the method is skipped");
                emit_run(r, "steady_state_failed", NULL);
            }
            if (g_signal)
                set_abort(r, "interrupted by %s", g_signal == SIGINT ? "SIGINT" : "SIGTERM");
            if (!r->end_mono)
                r->end_mono = cx_mono_ms();
            if (r->steady_ok && !r->abort && !r->error) {
                set_state(r, RS_VERIFY);
                if (r->dash)
                    dash_server_set_progress(r->dash, "verify", cx_mono_ms() - r->start_mono, 0);
                verify(r);
            }
        }
        set_state(r, RS_REVERT);
        if (r->dash)
            dash_server_set_progress(r->dash, "revert", cx_mono_ms() - r->start_mono, 0);
        poll_events(r);
        poll_syncer_status(r);
        res->summary = summary_json(r);
        json_t *fl = json_object_get(res->summary, "final_loss"); /* NULL-safe: journal.json's final_bpb */
        journal_set_final_loss(r->j, json_is_number(fl) ? json_number_value(fl) : NAN);
        revert(r);
    }
    if (o->keep && r->t) {
        printf("--keep: processes stay up (syncer %s); Ctrl-C to stop them\n", topo_syncer_url(r->t));
        fflush(stdout);
        while (!g_signal)
            nap(500);
    }
    dash_server_free(r->dash); /* before its sources go away */
    r->dash = NULL;
    if (r->t) {
        int killed = topo_stop(r->t, STOP_GRACE_MS);
        if (killed)
            cx_warn("%d processes needed SIGKILL", killed);
    }
    set_state(r, RS_STOPPED);

    /* outputs */
    /* Chaos Toolkit's meanings: a signal, a stop condition or a halt
     * interrupts the run; an error nobody planned for aborts it. */
    jr_status js = JR_COMPLETED;
    if (g_signal)
        js = JR_INTERRUPTED;
    else if (r->error)
        js = JR_ABORTED;
    else if (r->abort)
        js = JR_INTERRUPTED;
    journal_set_end(r->j, cx_real_ns(), js);
    if (r->why[0]) {
        emit_run(r, r->error ? "error" : "aborted", r->why);
    }
    if (r->ev) {
        append_collected(r);
    }
    join_path(path, sizeof path, r->run_dir, "journal.json");
    if (journal_write(r->j, path, e2, sizeof e2) < 0)
        set_error(r, "journal: %s", e2);
    if (o->junit)
        snprintf(path, sizeof path, "%s", o->junit);
    else
        join_path(path, sizeof path, r->run_dir, "junit.xml");
    if (journal_write_junit(r->j, path, e2, sizeof e2) < 0)
        set_error(r, "junit: %s", e2);
    if (res->summary) {
        json_object_set_new(res->summary, "status", json_string(jr_status_name(journal_status(r->j))));
        json_object_set_new(res->summary, "deviated", json_boolean(journal_deviated(r->j)));
        join_path(path, sizeof path, r->run_dir, "summary.json");
        json_dump_file(res->summary, path, JSON_INDENT(1) | JSON_SORT_KEYS);
    }
    if (report_render(r->run_dir, e2, sizeof e2) < 0)
        cx_warn("report.html: %s", e2);

    snprintf(res->status, sizeof res->status, "%s", jr_status_name(journal_status(r->j)));
    if (r->error)
        res->exit_code = RUN_EXIT_ERROR;
    else if (r->abort || g_signal)
        res->exit_code = RUN_EXIT_ABORTED;
    else if (!r->steady_ok || journal_deviated(r->j))
        res->exit_code = RUN_EXIT_DEVIATED;
    else
        res->exit_code = RUN_EXIT_OK;
    if (r->why[0])
        snprintf(err, errlen, "%s", r->why);
    if (!o->quiet_summary)
        print_verdicts(r, res);
    set_state(r, RS_DONE);
    cx_info("run done status=%s exit=%d run_dir=%s", res->status, res->exit_code, r->run_dir);
    runner_cleanup(r);
    return 0;
}
