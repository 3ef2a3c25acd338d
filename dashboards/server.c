/* server.c - the dashboard aggregator and its HTTP/SSE server (server.h).
 *
 * Threads:
 *   poller       poll_once() every poll_ms: HTTP GETs without the lock, then
 *                merges the answers into the history under s->mu and
 *                appends `update`/`event` messages to the SSE ring.
 *   HTTP threads libmicrohttpd, one per connection. Plain requests copy
 *                what they need under s->mu and answer; controls forward to
 *                agents with their own curl handle (never the poller's).
 *   SSE streams  one HTTP thread each, blocked in sse_read() on s->cond
 *                (at most 1 s at a time, so stopping is noticed).
 *
 * Connection limits (common/http_guard.h): held connections are evicted
 * near the limit, requests over the caps get 503, POST /api/halt (HALT ALL)
 * is reserved and always gets through. Event streams: at most
 * DASH_SSE_PER_CLIENT per client address (loopback: one pool) and
 * DASH_SSE_MAX in all; a new stream over a cap ends the oldest stream of
 * the client with the most (its EventSource reconnects), so a new viewer
 * always gets a live view.
 *
 * Why our own libmicrohttpd glue instead of common/http_server.h: SSE needs
 * a streamed (callback) response, and cx_http_server only sends buffered
 * bodies. The request/response helpers of common/http_server.h
 * (cx_http_reply_*, cx_http_header, cx_http_check_bearer, ...) are reused:
 * they only need a cx_http_req whose mhd_conn is a libmicrohttpd connection.
 *
 * Lifecycle of the object:
 *
 *   dash_server_new ──► serving (poller + daemon running)
 *                          │ dash_server_free: stopping=1, broadcast,
 *                          ▼ join poller, MHD_stop_daemon (joins streams)
 *                        freed
 *
 * Bounded memory: every history array has a cap (DASH_*_MAX); series over
 * their cap are halved (every second point of the older half dropped), so
 * the chart keeps the whole run at a coarser grain.
 */
#include "dashboards/server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/file.h"
#include "common/http_client.h"
#include "common/http_guard.h"
#include "common/http_server.h"
#include "common/json.h"
#include "common/log.h"
#include "common/parse.h"
#include "dashboards/assets.h"
#include "injectors/injector.h"

#define DASH_BODY_MAX (64 * 1024)        /* bytes: request bodies */
#define DASH_RESP_MAX ((size_t)64 << 20) /* bytes: one response */
#define DASH_LOSS_MAX 4000               /* eval loss points kept */
#define DASH_MERGES_MAX 4000             /* merge markers kept */
#define DASH_RATES_MAX 2000              /* rate samples kept */
#define DASH_EVENTS_MAX 300              /* event log entries kept */
#define DASH_FAULTS_MAX 1000             /* fault windows kept */
#define DASH_MSGS_MAX 256                /* SSE messages kept for slow readers */
#define DASH_SSE_MAX 32                  /* concurrent SSE streams */
#define DASH_SSE_PER_CLIENT 8            /* SSE streams per client address (not loopback) */
#define DASH_LEARNERS_MAX 256            /* learner ids tracked */
#define DASH_EVENTS_PAGE 2000            /* events asked per poll */
#define DASH_LOG_TAIL_MAX 5000           /* lines: cap on ?tail= */

/* ---- state ---- */

typedef struct dash_agent {
    char url[256];           /* base URL */
    char name[64];           /* status "id" once seen, else "agent-<i>" */
    int learner_cfg;         /* configured learner id, -1 = infer */
    cx_http_client *cli;     /* the poller's handle (poller thread only) */
    int reachable;           /* -1 not polled yet, 0 no, 1 yes */
    char error[256];         /* why unreachable */
    int64_t last_ok_mono_ms; /* last successful poll, 0 never */
    json_t *status;          /* last GET /v1/status body, or NULL */
    json_t *faults;          /* last GET /v1/faults list (array), or NULL */
} dash_agent;

/* What the syncer's events tell about one learner id. */
typedef struct dash_learner {
    json_t *heartbeat;       /* last heartbeat event, or NULL */
    double tokens_per_s;     /* tokens/s, EMA over heartbeats */
    int64_t rate_tokens;     /* tokens at the previous heartbeat */
    int64_t rate_mono_ms;    /* ms: t_mono_ms of the previous heartbeat, 0 none */
    int64_t merged_count;    /* merges this learner took part in */
    int64_t merged_mono_ms;  /* ms: t_mono_ms of its last merge, 0 none */
    int64_t merged_fragment; /* fragment of that merge */
    int64_t merged_version;  /* version it produced */
} dash_learner;

typedef struct dash_msg {
    uint64_t seq; /* 1, 2, ... */
    char *text;   /* "event: ...\nid: ...\ndata: ...\n\n" (owned) */
} dash_msg;

struct dash_server {
    /* configuration (copied) */
    char *listen;     /* "HOST:PORT" */
    char *syncer_url; /* or NULL */
    char *token;      /* or NULL: controls off */
    char *state_dir;  /* or NULL */
    char *title;      /* or NULL */
    long poll_ms;     /* ms */
    long sse_hb_ms;   /* ms */
    char url[300];    /* "http://127.0.0.1:PORT/" */
    int loopback;     /* bound to 127.0.0.1: only loopback Host headers are served */
    int port;

    struct MHD_Daemon *daemon;
    cx_http_guard *guard; /* connection admission */
    pthread_t poller;
    int poller_started;
    pthread_mutex_t mu;  /* guards everything below */
    pthread_cond_t cond; /* poller wake-up and new SSE messages */
    int stopping;

    cx_http_client *syncer_cli; /* poller thread only */
    int syncer_reachable;       /* -1 not polled yet, 0, 1 */
    char syncer_error[256];
    int64_t syncer_last_ok_mono_ms;
    json_t *syncer_status; /* last /v1/status body, or NULL */
    int64_t last_seq;      /* newest syncer event seq taken */
    int64_t t0_mono_ms;    /* ms: origin of the charts */

    dash_agent agents[DASH_MAX_AGENTS];
    int nagents;
    dash_learner learners[DASH_LEARNERS_MAX];

    /* history (arrays of arrays/objects, see snapshot_json) */
    json_t *loss;   /* [[t_mono_ms, loss|null, merges, tokens]] */
    json_t *merges; /* [[t_mono_ms, fragment, version, participants]] */
    json_t *rates;  /* [[t_mono_ms, merges/s, bytes_in/s, bytes_out/s]] */
    json_t *faults; /* fault windows [{agent, id, type, state, start_mono_ms, ...}] */
    json_t *events; /* last DASH_EVENTS_MAX events (no heartbeats) */
    /* what changed since the last `update` message */
    json_t *loss_new, *merges_new, *rates_new;
    int faults_changed;
    /* previous counters for rates */
    int rate_have;
    int64_t rate_mono_ms, rate_merges, rate_bin, rate_bout;

    /* pushed by the harness */
    json_t *hypotheses; /* array */
    json_t *progress;   /* object or NULL */

    /* SSE */
    dash_msg msgs[DASH_MSGS_MAX];
    uint64_t msg_seq;         /* seq of the newest message, 0 none */
    int nsse;                 /* open streams */
    struct sse_conn *streams; /* open streams, oldest first */
};

/* ---- small helpers ---- */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int64_t jint(const json_t *o, const char *key, int64_t dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? (int64_t)json_number_value(v) : dflt;
}

/* Copy v into obj[key] (json_null when NULL). */
static void set_copy(json_t *obj, const char *key, json_t *v)
{
    json_object_set_new(obj, key, v ? json_deep_copy(v) : json_null());
}

/* Append v (stolen) to a capped series; over cap, drop every second point
 * of the older half. */
static void series_push(json_t *arr, json_t *v, size_t cap)
{
    json_array_append_new(arr, v);
    size_t n = json_array_size(arr);
    if (n <= cap)
        return;
    size_t half = n / 2;
    json_t *kept = json_array();
    for (size_t i = 0; i < n; i++)
        if (i >= half || i % 2 == 0)
            json_array_append(kept, json_array_get(arr, i));
    json_array_clear(arr);
    json_array_extend(arr, kept);
    json_decref(kept);
}

/* A fault record's id as a string key (ids may be numbers or strings). */
static void fault_id(const json_t *rec, char *out, size_t len)
{
    json_t *id = json_object_get(rec, "id");
    if (json_is_string(id))
        snprintf(out, len, "%s", json_string_value(id));
    else if (json_is_integer(id))
        snprintf(out, len, "%lld", (long long)json_integer_value(id));
    else
        snprintf(out, len, "?");
}

/* Learner id of agent i: configured, else the trailing integer of its
 * name ("learner-2" → 2), else its index. */
static int agent_learner(const dash_server *s, int i)
{
    const dash_agent *a = &s->agents[i];
    if (a->learner_cfg >= 0)
        return a->learner_cfg;
    size_t n = strlen(a->name);
    size_t d = n;
    while (d > 0 && isdigit((unsigned char)a->name[d - 1]))
        d--;
    if (d < n && n - d < 6)
        return atoi(a->name + d);
    return i;
}

/* Index of the agent named name (or given by its index), -1 if none.
 * Caller holds s->mu. */
static int agent_find(const dash_server *s, const char *name)
{
    for (int i = 0; i < s->nagents; i++)
        if (strcmp(s->agents[i].name, name) == 0)
            return i;
    char *end = NULL;
    errno = 0;
    long v = strtol(name, &end, 10);
    if (*name && end && *end == '\0' && errno == 0 && v >= 0 && v < s->nagents)
        return (int)v;
    return -1;
}

/* ---- snapshot ---- */

static json_t *learner_json(dash_server *s, int id, int64_t now)
{
    json_t *base = NULL;
    json_t *ls = s->syncer_status ? json_object_get(s->syncer_status, "learners") : NULL;
    size_t i;
    json_t *l;
    json_array_foreach(ls, i, l)
    {
        if (jint(l, "id", -1) == id) {
            base = json_deep_copy(l);
            break;
        }
    }
    if (id < 0 || id >= DASH_LEARNERS_MAX)
        return base ? base : json_null();
    const dash_learner *dl = &s->learners[id];
    if (!base && !dl->heartbeat && !dl->merged_count)
        return json_null();
    if (!base)
        base = json_pack("{s:i}", "id", id);
    if (dl->heartbeat) {
        json_t *hb = dl->heartbeat;
        const char *keys[] = {"train_loss", "step_ms", "clock_skew_ms"};
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
            set_copy(base, keys[k], json_object_get(hb, keys[k]));
        if (!json_object_get(base, "step"))
            set_copy(base, "step", json_object_get(hb, "step"));
        if (!json_object_get(base, "tokens"))
            set_copy(base, "tokens", json_object_get(hb, "tokens"));
        json_object_set_new(base, "heartbeat_age_ms", json_integer(now - jint(hb, "t_mono_ms", now)));
    }
    json_object_set_new(base, "tokens_per_s", json_real(dl->tokens_per_s));
    json_object_set_new(base, "merged_count", json_integer(dl->merged_count));
    if (dl->merged_mono_ms)
        json_object_set_new(base, "last_merged",
                            json_pack("{s:I,s:I,s:I,s:I}", "t_mono_ms", (json_int_t)dl->merged_mono_ms,
                                      "age_ms", (json_int_t)(now - dl->merged_mono_ms), "fragment",
                                      (json_int_t)dl->merged_fragment, "version",
                                      (json_int_t)dl->merged_version));
    else
        json_object_set_new(base, "last_merged", json_null());
    return base;
}

static json_t *units_json(dash_server *s, int64_t now)
{
    json_t *arr = json_array();
    unsigned char used[DASH_LEARNERS_MAX] = {0};
    for (int i = 0; i < s->nagents; i++) {
        dash_agent *a = &s->agents[i];
        int lid = agent_learner(s, i);
        if (lid >= 0 && lid < DASH_LEARNERS_MAX)
            used[lid] = 1;
        json_t *active = json_array();
        size_t k;
        json_t *f;
        json_array_foreach(a->faults, k, f)
        {
            const char *state = json_string_value(json_object_get(f, "state"));
            if (!state || strcmp(state, "active") != 0)
                continue;
            json_t *c = json_deep_copy(f);
            int64_t start = jint(f, "started_mono_ms", 0), dur = jint(f, "duration_ms", 0);
            int64_t left = start + dur - now;
            json_object_set_new(c, "time_left_ms", json_integer(left > 0 ? left : 0));
            json_array_append_new(active, c);
        }
        json_t *u = json_object();
        json_object_set_new(u, "agent", json_string(a->name));
        json_object_set_new(u, "index", json_integer(i));
        json_object_set_new(u, "url", json_string(a->url));
        json_object_set_new(u, "reachable", a->reachable < 0 ? json_null() : json_boolean(a->reachable));
        json_object_set_new(u, "error", a->error[0] ? json_string(a->error) : json_null());
        json_object_set_new(u, "last_ok_age_ms",
                            a->last_ok_mono_ms ? json_integer(now - a->last_ok_mono_ms) : json_null());
        json_object_set_new(u, "learner_id", json_integer(lid));
        set_copy(u, "unit", a->status ? json_object_get(a->status, "unit") : NULL);
        set_copy(u, "halted", a->status ? json_object_get(a->status, "halted") : NULL);
        set_copy(u, "lease", a->status ? json_object_get(a->status, "lease") : NULL);
        json_object_set_new(u, "faults_active", active);
        json_object_set_new(u, "learner", learner_json(s, lid, now));
        json_array_append_new(arr, u);
    }
    /* learners the syncer knows that no agent supervises */
    json_t *ls = s->syncer_status ? json_object_get(s->syncer_status, "learners") : NULL;
    size_t i;
    json_t *l;
    json_array_foreach(ls, i, l)
    {
        int64_t id = jint(l, "id", -1);
        if (id >= 0 && id < DASH_LEARNERS_MAX && used[id])
            continue;
        json_array_append_new(arr, json_pack("{s:n,s:n,s:n,s:n,s:n,s:I,s:n,s:n,s:n,s:[],s:o}", "agent",
                                             "index", "url", "reachable", "error", "learner_id",
                                             (json_int_t)id, "unit", "halted", "lease", "faults_active",
                                             "learner", learner_json(s, (int)id, now)));
    }
    return arr;
}

static json_t *syncer_json(dash_server *s, int64_t now)
{
    if (!s->syncer_url)
        return json_null();
    json_t *o = json_object();
    json_object_set_new(o, "url", json_string(s->syncer_url));
    json_object_set_new(o, "reachable",
                        s->syncer_reachable < 0 ? json_null() : json_boolean(s->syncer_reachable));
    json_object_set_new(o, "error", s->syncer_error[0] ? json_string(s->syncer_error) : json_null());
    json_object_set_new(o, "last_ok_age_ms",
                        s->syncer_last_ok_mono_ms ? json_integer(now - s->syncer_last_ok_mono_ms)
                                                  : json_null());
    set_copy(o, "status", s->syncer_status);
    return o;
}

/* The parts both the snapshot and an update carry. Caller holds s->mu. */
static json_t *common_json(dash_server *s, int64_t now)
{
    char iso[40];
    cx_iso_time(iso, sizeof iso, cx_real_ns());
    json_t *o = json_object();
    json_object_set_new(o, "version", json_integer(1));
    json_object_set_new(o, "title", s->title ? json_string(s->title) : json_null());
    json_object_set_new(o, "now_mono_ms", json_integer(now));
    json_object_set_new(o, "now_real", json_string(iso));
    json_object_set_new(o, "t0_mono_ms", json_integer(s->t0_mono_ms));
    json_object_set_new(o, "controls", json_boolean(s->token != NULL));
    json_object_set_new(o, "last_seq", json_integer(s->last_seq));
    json_object_set_new(o, "syncer", syncer_json(s, now));
    json_object_set_new(o, "units", units_json(s, now));
    json_object_set_new(o, "hypotheses", json_deep_copy(s->hypotheses));
    set_copy(o, "progress", s->progress);
    return o;
}

/* Caller holds s->mu. */
static json_t *snapshot_locked(dash_server *s)
{
    json_t *o = common_json(s, cx_mono_ms());
    json_object_set_new(o, "series",
                        json_pack("{s:O,s:O,s:O}", "loss", s->loss, "merges", s->merges, "rates", s->rates));
    json_object_set_new(o, "faults", json_deep_copy(s->faults));
    json_object_set_new(o, "events", json_deep_copy(s->events));
    /* series arrays are referenced, not copied: dump before unlocking */
    return o;
}

json_t *dash_server_snapshot(dash_server *s)
{
    pthread_mutex_lock(&s->mu);
    json_t *snap = snapshot_locked(s);
    /* detach from the live series */
    json_t *copy = json_deep_copy(snap);
    pthread_mutex_unlock(&s->mu);
    json_decref(snap);
    return copy;
}

/* ---- SSE message ring ---- */

/* Append one message (data stolen). Caller holds s->mu. */
static void msg_push(dash_server *s, const char *event, json_t *data)
{
    char *js = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    if (!js)
        return;
    cx_buf b;
    cx_buf_init(&b, DASH_RESP_MAX);
    uint64_t seq = s->msg_seq + 1;
    if (cx_buf_printf(&b, "event: %s\nid: %llu\ndata: ", event, (unsigned long long)seq) != 0 ||
        cx_buf_append(&b, js, strlen(js)) != 0 || cx_buf_append(&b, "\n\n", 2) != 0) {
        free(js);
        cx_buf_cleanup(&b);
        return;
    }
    free(js);
    dash_msg *m = &s->msgs[seq % DASH_MSGS_MAX];
    free(m->text);
    m->text = cx_buf_take(&b, NULL);
    m->seq = seq;
    s->msg_seq = seq;
}

/* The `update` after a poll: the small live parts plus what was appended
 * to the series since the previous update. Caller holds s->mu. */
static void push_update(dash_server *s)
{
    json_t *o = common_json(s, cx_mono_ms());
    json_object_set_new(
        o, "series_new",
        json_pack("{s:o,s:o,s:o}", "loss", s->loss_new, "merges", s->merges_new, "rates", s->rates_new));
    s->loss_new = json_array();
    s->merges_new = json_array();
    s->rates_new = json_array();
    if (s->faults_changed)
        json_object_set_new(o, "faults", json_deep_copy(s->faults));
    s->faults_changed = 0;
    msg_push(s, "update", o);
    pthread_cond_broadcast(&s->cond);
}

/* ---- merging what the poll brought ---- */

static void take_event(dash_server *s, json_t *ev)
{
    int64_t seq = jint(ev, "seq", -1);
    if (seq <= s->last_seq)
        return;
    s->last_seq = seq;
    int64_t t = jint(ev, "t_mono_ms", 0);
    if (t > 0 && t < s->t0_mono_ms)
        s->t0_mono_ms = t;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (!type)
        type = "";
    if (strcmp(type, "eval") == 0) {
        json_t *loss = json_object_get(ev, "loss");
        json_t *pt = json_pack("[I,O,I,I]", (json_int_t)t, json_is_number(loss) ? loss : json_null(),
                               (json_int_t)jint(ev, "merges", 0), (json_int_t)jint(ev, "tokens", 0));
        series_push(s->loss, json_incref(pt), DASH_LOSS_MAX);
        json_array_append_new(s->loss_new, pt);
    } else if (strcmp(type, "merge") == 0) {
        json_t *parts = json_object_get(ev, "participants");
        json_t *pt = json_pack("[I,I,I,I]", (json_int_t)t, (json_int_t)jint(ev, "fragment", -1),
                               (json_int_t)jint(ev, "version", 0), (json_int_t)json_array_size(parts));
        series_push(s->merges, json_incref(pt), DASH_MERGES_MAX);
        json_array_append_new(s->merges_new, pt);
        size_t i;
        json_t *p;
        json_array_foreach(parts, i, p)
        {
            int64_t id = jint(p, "learner", -1);
            if (id < 0 || id >= DASH_LEARNERS_MAX)
                continue;
            dash_learner *dl = &s->learners[id];
            dl->merged_count++;
            dl->merged_mono_ms = t;
            dl->merged_fragment = jint(ev, "fragment", -1);
            dl->merged_version = jint(ev, "version", 0);
        }
    } else if (strcmp(type, "heartbeat") == 0) {
        int64_t id = jint(ev, "learner", -1);
        if (id >= 0 && id < DASH_LEARNERS_MAX) {
            dash_learner *dl = &s->learners[id];
            int64_t tokens = jint(ev, "tokens", 0);
            if (dl->rate_mono_ms && t > dl->rate_mono_ms && tokens >= dl->rate_tokens) {
                double r = (double)(tokens - dl->rate_tokens) * 1000.0 / (double)(t - dl->rate_mono_ms);
                dl->tokens_per_s = dl->tokens_per_s > 0 ? 0.5 * dl->tokens_per_s + 0.5 * r : r;
            } else if (tokens < dl->rate_tokens) {
                dl->tokens_per_s = 0; /* restarted from an older checkpoint */
            }
            dl->rate_tokens = tokens;
            dl->rate_mono_ms = t;
            json_decref(dl->heartbeat);
            dl->heartbeat = json_incref(ev);
        }
        return; /* heartbeats stay out of the event log */
    }
    json_t *c = json_deep_copy(ev);
    json_object_set_new(c, "source", json_string("syncer"));
    json_array_append(s->events, c);
    while (json_array_size(s->events) > DASH_EVENTS_MAX)
        json_array_remove(s->events, 0);
    msg_push(s, "event", c);
}

static void take_rates(dash_server *s, const json_t *st, int64_t now)
{
    int64_t m = jint(st, "merges", -1);
    json_t *bytes = json_object_get(st, "bytes");
    int64_t bin = jint(bytes, "in", -1), bout = jint(bytes, "out", -1);
    if (m < 0 || bin < 0 || bout < 0)
        return;
    if (s->rate_have && now > s->rate_mono_ms && m >= s->rate_merges && bin >= s->rate_bin &&
        bout >= s->rate_bout) {
        double dt = (double)(now - s->rate_mono_ms) / 1000.0;
        json_t *pt = json_pack("[I,f,f,f]", (json_int_t)now, (double)(m - s->rate_merges) / dt,
                               (double)(bin - s->rate_bin) / dt, (double)(bout - s->rate_bout) / dt);
        series_push(s->rates, json_incref(pt), DASH_RATES_MAX);
        json_array_append_new(s->rates_new, pt);
    }
    /* a counter going backwards (syncer restarted) just restarts the rate */
    s->rate_have = 1;
    s->rate_mono_ms = now;
    s->rate_merges = m;
    s->rate_bin = bin;
    s->rate_bout = bout;
}

/* Update the fault windows from one agent's fault list. */
static void take_faults(dash_server *s, const dash_agent *a, const json_t *list)
{
    size_t i;
    json_t *rec;
    json_array_foreach(list, i, rec)
    {
        if (!json_is_object(rec))
            continue;
        char id[64];
        fault_id(rec, id, sizeof id);
        json_t *w = json_pack(
            "{s:s,s:s,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?,s:O?}", "agent", a->name, "id", id, "type",
            json_object_get(rec, "type"), "state", json_object_get(rec, "state"), "start_mono_ms",
            json_object_get(rec, "started_mono_ms"), "end_mono_ms", json_object_get(rec, "ended_mono_ms"),
            "duration_ms", json_object_get(rec, "duration_ms"), "params", json_object_get(rec, "params"),
            "revert_reason", json_object_get(rec, "revert_reason"), "error", json_object_get(rec, "error"));
        if (!w)
            continue;
        int64_t start = jint(w, "start_mono_ms", 0);
        if (start > 0 && start < s->t0_mono_ms)
            s->t0_mono_ms = start;
        size_t j;
        json_t *old;
        int found = 0;
        json_array_foreach(s->faults, j, old)
        {
            const char *oa = json_string_value(json_object_get(old, "agent"));
            const char *oi = json_string_value(json_object_get(old, "id"));
            if (oa && oi && strcmp(oa, a->name) == 0 && strcmp(oi, id) == 0) {
                found = 1;
                if (!json_equal(old, w)) {
                    json_array_set(s->faults, j, w);
                    s->faults_changed = 1;
                }
                break;
            }
        }
        if (!found) {
            json_array_append(s->faults, w);
            s->faults_changed = 1;
            /* over the cap: drop the oldest ended window */
            if (json_array_size(s->faults) > DASH_FAULTS_MAX) {
                json_array_foreach(s->faults, j, old)
                {
                    if (!json_is_null(json_object_get(old, "end_mono_ms")) &&
                        json_object_get(old, "end_mono_ms")) {
                        json_array_remove(s->faults, j);
                        break;
                    }
                }
                if (json_array_size(s->faults) > DASH_FAULTS_MAX)
                    json_array_remove(s->faults, 0);
            }
        }
        json_decref(w);
    }
}

/* ---- polling ---- */

/* GET path as JSON; 0 and *out on a 200 JSON answer, else fills why. */
static int poll_get(cx_http_client *c, const char *path, json_t **out, char *why, size_t whylen)
{
    char err[CX_ERRLEN] = "";
    int status = 0;
    *out = NULL;
    int rc = cx_http_json(c, "GET", path, NULL, &status, out, err, sizeof err);
    if (rc != 0) {
        snprintf(why, whylen, "%s", err[0] ? err : cx_strerror(rc));
        return rc;
    }
    if (status != 200 || !*out) {
        snprintf(why, whylen, "GET %s: HTTP %d%s", path, status, *out ? "" : " (not JSON)");
        json_decref(*out);
        *out = NULL;
        return CX_EUNAVAIL;
    }
    return 0;
}

/* GET /v1/events?since=SEQ: NDJSON lines into an array (new reference). */
static int poll_events(cx_http_client *c, int64_t since, json_t **out, char *why, size_t whylen)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/events?since=%lld&limit=%d", (long long)since, DASH_EVENTS_PAGE);
    cx_http_result r;
    cx_http_result_init(&r);
    char err[CX_ERRLEN] = "";
    *out = NULL;
    int rc = cx_http_do(c, "GET", path, NULL, NULL, 0, NULL, 0, &r, err, sizeof err);
    if (rc != 0 || r.status != 200) {
        if (rc != 0)
            snprintf(why, whylen, "%s", err[0] ? err : cx_strerror(rc));
        else
            snprintf(why, whylen, "GET /v1/events: HTTP %d", r.status);
        cx_http_result_cleanup(&r);
        return rc ? rc : CX_EUNAVAIL;
    }
    json_t *arr = json_array();
    char *line = r.body.data;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (*line) {
            json_error_t je;
            json_t *ev = json_loads(line, 0, &je);
            if (json_is_object(ev))
                json_array_append(arr, ev);
            else
                cx_warn("dashboard: skipping a syncer event that is not a JSON object: %s", je.text);
            json_decref(ev);
        }
        line = nl ? nl + 1 : NULL;
    }
    cx_http_result_cleanup(&r);
    *out = arr;
    return 0;
}

static void poll_once(dash_server *s)
{
    /* 1. ask, without the lock */
    json_t *sy_status = NULL, *sy_events = NULL;
    char sy_err[256] = "";
    int sy_ok = 0;
    if (s->syncer_cli) {
        pthread_mutex_lock(&s->mu);
        int64_t since = s->last_seq;
        pthread_mutex_unlock(&s->mu);
        if (poll_get(s->syncer_cli, "/v1/status", &sy_status, sy_err, sizeof sy_err) == 0) {
            sy_ok = 1;
            /* drain a backlog in pages, bounded per poll */
            for (int page = 0; page < 5; page++) {
                json_t *evs = NULL;
                if (poll_events(s->syncer_cli, since, &evs, sy_err, sizeof sy_err) != 0) {
                    sy_ok = 0;
                    break;
                }
                if (!sy_events)
                    sy_events = json_array();
                json_array_extend(sy_events, evs);
                size_t n = json_array_size(evs);
                if (n)
                    since = jint(json_array_get(evs, n - 1), "seq", since);
                json_decref(evs);
                if (n < DASH_EVENTS_PAGE)
                    break;
            }
        }
    }
    json_t *ag_status[DASH_MAX_AGENTS] = {0}, *ag_faults[DASH_MAX_AGENTS] = {0};
    char ag_err[DASH_MAX_AGENTS][256];
    for (int i = 0; i < s->nagents; i++) {
        ag_err[i][0] = '\0';
        if (poll_get(s->agents[i].cli, "/v1/status", &ag_status[i], ag_err[i], sizeof ag_err[i]) != 0)
            continue;
        json_t *f = NULL;
        if (poll_get(s->agents[i].cli, "/v1/faults", &f, ag_err[i], sizeof ag_err[i]) != 0) {
            json_decref(ag_status[i]);
            ag_status[i] = NULL;
            continue;
        }
        /* a bare array, or {"faults": [...]} */
        if (json_is_object(f)) {
            json_t *inner = json_incref(json_object_get(f, "faults"));
            json_decref(f);
            f = inner;
        }
        if (!json_is_array(f)) {
            json_decref(f);
            json_decref(ag_status[i]);
            ag_status[i] = NULL;
            snprintf(ag_err[i], sizeof ag_err[i], "GET /v1/faults: not a list of faults");
            continue;
        }
        ag_faults[i] = f;
    }

    /* 2. merge, under the lock */
    int64_t now = cx_mono_ms();
    pthread_mutex_lock(&s->mu);
    if (s->syncer_cli) {
        int was = s->syncer_reachable;
        s->syncer_reachable = sy_ok || sy_status != NULL;
        snprintf(s->syncer_error, sizeof s->syncer_error, "%s", sy_status ? (sy_ok ? "" : sy_err) : sy_err);
        if (sy_status) {
            s->syncer_last_ok_mono_ms = now;
            json_decref(s->syncer_status);
            s->syncer_status = sy_status;
            take_rates(s, sy_status, now);
        }
        if (was != s->syncer_reachable && !s->syncer_reachable)
            cx_warn("dashboard: syncer %s unreachable: %s", s->syncer_url, s->syncer_error);
        size_t i;
        json_t *ev;
        json_array_foreach(sy_events, i, ev) take_event(s, ev);
        json_decref(sy_events);
    }
    for (int i = 0; i < s->nagents; i++) {
        dash_agent *a = &s->agents[i];
        int was = a->reachable;
        if (ag_status[i]) {
            a->reachable = 1;
            a->error[0] = '\0';
            a->last_ok_mono_ms = now;
            const char *id = json_string_value(json_object_get(ag_status[i], "id"));
            if (id && *id && strlen(id) < sizeof a->name)
                snprintf(a->name, sizeof a->name, "%s", id);
            json_decref(a->status);
            a->status = ag_status[i];
            json_decref(a->faults);
            a->faults = ag_faults[i];
            take_faults(s, a, a->faults);
        } else {
            a->reachable = 0;
            snprintf(a->error, sizeof a->error, "%s", ag_err[i]);
            if (was != 0)
                cx_warn("dashboard: agent %s (%s) unreachable: %s", a->name, a->url, a->error);
        }
    }
    push_update(s);
    pthread_mutex_unlock(&s->mu);
}

static void *poller_main(void *arg)
{
    dash_server *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        pthread_mutex_unlock(&s->mu);
        int64_t t = cx_mono_ms();
        poll_once(s);
        int64_t next = t + s->poll_ms;
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && cx_mono_ms() < next) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t wait_ms = next - cx_mono_ms();
            if (wait_ms <= 0)
                break;
            ts.tv_sec += wait_ms / 1000;
            ts.tv_nsec += (wait_ms % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&s->cond, &s->mu, &ts);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- SSE streams ---- */

typedef struct sse_conn {
    dash_server *s;
    uint64_t cursor;              /* last message seq sent */
    cx_buf pending;               /* bytes not yet handed to MHD */
    size_t off;                   /* bytes of pending already handed */
    int64_t last_write_ms;        /* mono ms of the last bytes written */
    uint32_t client;              /* client IPv4 address, host order */
    int evicted;                  /* ended to make room for a newer stream */
    struct sse_conn *prev, *next; /* s->streams, oldest first */
} sse_conn;

/* Build the `snapshot` message into b. Caller holds s->mu. */
static int sse_snapshot(dash_server *s, cx_buf *b)
{
    json_t *snap = snapshot_locked(s);
    char *js = json_dumps(snap, JSON_COMPACT);
    json_decref(snap);
    if (!js)
        return CX_ENOMEM;
    int rc = cx_buf_printf(b, "event: snapshot\nid: %llu\ndata: ", (unsigned long long)s->msg_seq);
    if (rc == 0)
        rc = cx_buf_append(b, js, strlen(js));
    if (rc == 0)
        rc = cx_buf_append(b, "\n\n", 2);
    free(js);
    return rc;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    sse_conn *c = cls;
    dash_server *s = c->s;
    for (;;) {
        if (c->off < c->pending.len) {
            size_t n = c->pending.len - c->off;
            if (n > max)
                n = max;
            memcpy(buf, c->pending.data + c->off, n);
            c->off += n;
            c->last_write_ms = cx_mono_ms();
            return (ssize_t)n;
        }
        cx_buf_reset(&c->pending);
        c->off = 0;
        pthread_mutex_lock(&s->mu);
        if (!s->stopping && s->msg_seq == c->cursor) {
            /* wait at most 1 s so that stopping and keep-alives are noticed */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&s->cond, &s->mu, &ts);
        }
        if (s->stopping || c->evicted) {
            pthread_mutex_unlock(&s->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        int rc = 0;
        if (s->msg_seq > c->cursor) {
            if (s->msg_seq - c->cursor >= DASH_MSGS_MAX) {
                /* fell behind the ring: start over from a snapshot */
                rc = sse_snapshot(s, &c->pending);
            } else {
                for (uint64_t q = c->cursor + 1; q <= s->msg_seq && rc == 0; q++) {
                    const dash_msg *m = &s->msgs[q % DASH_MSGS_MAX];
                    if (m->seq == q && m->text)
                        rc = cx_buf_append(&c->pending, m->text, strlen(m->text));
                }
            }
            c->cursor = s->msg_seq;
        }
        pthread_mutex_unlock(&s->mu);
        if (rc != 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (c->pending.len == 0 && cx_mono_ms() - c->last_write_ms >= s->sse_hb_ms)
            cx_buf_printf(&c->pending, ": keep-alive\n\n");
    }
}

static void sse_free(void *cls)
{
    sse_conn *c = cls;
    pthread_mutex_lock(&c->s->mu);
    c->s->nsse--;
    if (c->prev)
        c->prev->next = c->next;
    else if (c->s->streams == c)
        c->s->streams = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_cond_broadcast(&c->s->cond); /* dash_server_free may be waiting for it */
    pthread_mutex_unlock(&c->s->mu);
    cx_buf_cleanup(&c->pending);
    free(c);
}

/* ---- HTTP: plumbing ---- */

typedef struct dash_conn {
    cx_buf body; /* request body so far */
    int too_big; /* over DASH_BODY_MAX: answer 413 */
} dash_conn;

static enum MHD_Result send_resp(struct MHD_Connection *conn, cx_http_resp *resp)
{
    return (enum MHD_Result)cx_http_send(conn, resp);
}

/* The oldest live stream of the client with the most live streams (of
 * client only, when only_client). Caller holds s->mu. */
static sse_conn *sse_victim(dash_server *s, int only_client, uint32_t client)
{
    sse_conn *victim = NULL;
    int victim_n = 0;
    for (sse_conn *c = s->streams; c; c = c->next) {
        if (c->evicted || (only_client && c->client != client))
            continue;
        int n = 0;
        for (sse_conn *d = s->streams; d; d = d->next)
            n += !d->evicted && d->client == c->client;
        if (n > victim_n) { /* oldest first: ties keep the earlier one */
            victim = c;
            victim_n = n;
        }
    }
    return victim;
}

/* Make room for a new stream from client: end the oldest stream of that
 * client when it has its share, else the oldest of the heaviest client
 * when all DASH_SSE_MAX are taken. Caller holds s->mu. */
static void sse_make_room(dash_server *s, uint32_t client)
{
    int live = 0, mine = 0;
    for (sse_conn *c = s->streams; c; c = c->next)
        if (!c->evicted) {
            live++;
            mine += c->client == client;
        }
    sse_conn *v = NULL;
    if ((client >> 24) != 127 && mine >= DASH_SSE_PER_CLIENT)
        v = sse_victim(s, 1, client);
    else if (live >= DASH_SSE_MAX)
        v = sse_victim(s, 0, 0);
    if (v) {
        v->evicted = 1;
        pthread_cond_broadcast(&s->cond);
        cx_debug("dashboard: ended an event stream to make room for a newer one");
    }
}

static enum MHD_Result sse_start(dash_server *s, struct MHD_Connection *conn)
{
    sse_conn *c = calloc(1, sizeof *c);
    if (!c)
        return MHD_NO;
    c->s = s;
    cx_buf_init(&c->pending, DASH_RESP_MAX);
    c->last_write_ms = cx_mono_ms();
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
        c->client = ntohl(((const struct sockaddr_in *)ci->client_addr)->sin_addr.s_addr);
    pthread_mutex_lock(&s->mu);
    sse_make_room(s, c->client);
    s->nsse++;
    sse_conn **tail = &s->streams; /* append: the list stays oldest first */
    while (*tail) {
        c->prev = *tail;
        tail = &(*tail)->next;
    }
    *tail = c;
    /* the client's EventSource reconnects itself after 2 s */
    int rc = cx_buf_printf(&c->pending, "retry: 2000\n\n");
    if (rc == 0)
        rc = sse_snapshot(s, &c->pending);
    c->cursor = s->msg_seq;
    pthread_mutex_unlock(&s->mu);
    struct MHD_Response *r =
        rc == 0 ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, sse_read, c, sse_free)
                : NULL;
    if (!r) {
        sse_free(c);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    enum MHD_Result ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- HTTP: handlers ---- */

static void h_asset(const char *name, cx_http_resp *resp)
{
    const dash_asset *a = strchr(name, '/') ? NULL : dash_asset_find(name);
    if (!a) {
        cx_http_reply_error(resp, 404, "no such asset: %s", name);
        return;
    }
    cx_http_reply_bytes(resp, 200, a->content_type, a->data, a->len);
}

static void h_state(dash_server *s, cx_http_resp *resp)
{
    pthread_mutex_lock(&s->mu);
    json_t *snap = snapshot_locked(s);
    char *js = json_dumps(snap, JSON_COMPACT);
    json_decref(snap);
    pthread_mutex_unlock(&s->mu);
    if (!js) {
        cx_http_reply_error(resp, 500, "cannot encode the snapshot");
        return;
    }
    cx_http_reply_bytes(resp, 200, "application/json", js, strlen(js));
    free(js);
}

/* Controls: 0 when allowed, else the answer is written. */
static int require_token(dash_server *s, const cx_http_req *req, cx_http_resp *resp)
{
    if (!s->token) {
        cx_http_reply_error(resp, 403,
                            "controls are disabled: the dashboard was started without --token-file");
        return CX_EAUTH;
    }
    if (cx_http_check_bearer(req, s->token) != 0) {
        cx_http_reply_error(resp, 401, "missing or wrong bearer token (Authorization: Bearer <token>)");
        return CX_EAUTH;
    }
    return 0;
}

/* Copy the URL and name of the agent given by key; -1 and a 404 if none. */
static int agent_lookup(dash_server *s, const char *key, char *url, size_t ulen, char *name, size_t nlen,
                        cx_http_resp *resp)
{
    pthread_mutex_lock(&s->mu);
    int i = agent_find(s, key);
    if (i >= 0) {
        snprintf(url, ulen, "%s", s->agents[i].url);
        snprintf(name, nlen, "%s", s->agents[i].name);
    }
    pthread_mutex_unlock(&s->mu);
    if (i < 0)
        cx_http_reply_error(resp, 404, "no such agent: '%s' (give its name or index)", key);
    return i;
}

/* One call to an agent with its own curl handle (HTTP threads run
 * concurrently). Returns as cx_http_do. */
static int agent_call(const char *url, const char *token, const char *method, const char *path,
                      const char *body, cx_http_result *r, char *err, size_t errlen)
{
    cx_http_opts o = {
        .connect_timeout_ms = 1000, .timeout_ms = 5000, .bearer = token, .max_body = (size_t)4 << 20};
    cx_http_client *c = cx_http_client_new(url, &o);
    if (!c)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    int rc = cx_http_do(c, method, path, NULL, body, body ? strlen(body) : 0,
                        body ? "application/json" : NULL, 0, r, err, errlen);
    cx_http_client_free(c);
    return rc;
}

/* Answer with the agent's own answer (status and body) when it gave one. */
static void relay(cx_http_resp *resp, const char *name, int rc, const cx_http_result *r, const char *err)
{
    if (rc != 0) {
        cx_http_reply_error(resp, 502, "agent %s unreachable: %s", name, err[0] ? err : cx_strerror(rc));
        return;
    }
    char ctype[128] = "application/json";
    cx_http_result_header(r, "Content-Type", ctype, sizeof ctype);
    /* only the few types an agent answers; never reflect anything else */
    const char *ct = strncmp(ctype, "text/plain", 10) == 0 ? "text/plain; charset=utf-8" : "application/json";
    cx_http_reply_bytes(resp, r->status, ct, r->body.data ? r->body.data : "", r->body.len);
}

static void h_post_fault(dash_server *s, const cx_http_req *req, cx_http_resp *resp)
{
    if (require_token(s, req, resp) != 0)
        return;
    json_t *body = NULL;
    if (cx_http_body_json(req, resp, 0, &body) != 0)
        return;
    json_t *agent = NULL, *fault = NULL;
    char err[CX_ERRLEN];
    if (cx_json_unpack(body, "body", err, sizeof err, "{s:o,s:o}", "agent", &agent, "fault", &fault) != 0) {
        cx_http_reply_error(resp, 400, "%s (want {\"agent\": name or index, \"fault\": {...}})", err);
        json_decref(body);
        return;
    }
    char key[64];
    if (json_is_string(agent) && json_string_length(agent) < sizeof key)
        snprintf(key, sizeof key, "%s", json_string_value(agent));
    else if (json_is_integer(agent))
        snprintf(key, sizeof key, "%lld", (long long)json_integer_value(agent));
    else {
        cx_http_reply_error(resp, 400, "body.agent: expected an agent name or index");
        json_decref(body);
        return;
    }
    if (!json_is_object(fault)) {
        cx_http_reply_error(resp, 400, "body.fault: expected an object {type, params, duration_ms, ...}");
        json_decref(body);
        return;
    }
    char url[256], name[64];
    if (agent_lookup(s, key, url, sizeof url, name, sizeof name, resp) < 0) {
        json_decref(body);
        return;
    }
    char *fj = json_dumps(fault, JSON_COMPACT);
    json_decref(body);
    if (!fj) {
        cx_http_reply_error(resp, 500, "cannot encode the fault");
        return;
    }
    cx_http_result r;
    cx_http_result_init(&r);
    err[0] = '\0';
    int rc = agent_call(url, s->token, "POST", "/v1/faults", fj, &r, err, sizeof err);
    cx_info("dashboard: POST /v1/faults to %s %s -> %d", name, fj, rc ? -1 : r.status);
    free(fj);
    relay(resp, name, rc, &r, err);
    cx_http_result_cleanup(&r);
}

static void h_delete_fault(dash_server *s, const cx_http_req *req, const char *key, const char *id,
                           cx_http_resp *resp)
{
    if (require_token(s, req, resp) != 0)
        return;
    char url[256], name[64];
    if (agent_lookup(s, key, url, sizeof url, name, sizeof name, resp) < 0)
        return;
    for (const char *p = id; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') {
            cx_http_reply_error(resp, 400, "fault id '%s': only letters, digits, '-', '_' and '.'", id);
            return;
        }
    char path[160];
    snprintf(path, sizeof path, "/v1/faults/%s", id);
    cx_http_result r;
    cx_http_result_init(&r);
    char err[CX_ERRLEN] = "";
    int rc = agent_call(url, s->token, "DELETE", path, NULL, &r, err, sizeof err);
    cx_info("dashboard: DELETE %s on %s -> %d", path, name, rc ? -1 : r.status);
    relay(resp, name, rc, &r, err);
    cx_http_result_cleanup(&r);
}

static void h_logs(dash_server *s, const cx_http_req *req, const char *key, cx_http_resp *resp)
{
    char url[256], name[64];
    if (agent_lookup(s, key, url, sizeof url, name, sizeof name, resp) < 0)
        return;
    int tail = 200;
    const char *t = cx_http_query(req, "tail");
    char err[CX_ERRLEN] = "";
    if (t && cx_parse_int(t, "tail", 1, DASH_LOG_TAIL_MAX, &tail, err, sizeof err) != 0) {
        cx_http_reply_error(resp, 400, "%s", err);
        return;
    }
    char path[64];
    snprintf(path, sizeof path, "/v1/logs?tail=%d", tail);
    cx_http_result r;
    cx_http_result_init(&r);
    int rc = agent_call(url, s->token, "GET", path, NULL, &r, err, sizeof err);
    relay(resp, name, rc, &r, err);
    cx_http_result_cleanup(&r);
}

/* POST path to every agent in parallel (HALT ALL must not wait on one
 * hung agent before telling the next). */
typedef struct fanout_job {
    char url[256];
    char name[64];
    const char *token;
    const char *path;
    int rc; /* cx_http_do's */
    cx_http_result r;
    char err[CX_ERRLEN];
    pthread_t th;
    int started;
} fanout_job;

static void *fanout_main(void *arg)
{
    fanout_job *j = arg;
    j->rc = agent_call(j->url, j->token, "POST", j->path, "{}", &j->r, j->err, sizeof j->err);
    return NULL;
}

static void h_fanout(dash_server *s, const cx_http_req *req, const char *path, cx_http_resp *resp)
{
    if (require_token(s, req, resp) != 0)
        return;
    fanout_job *jobs = calloc((size_t)s->nagents + 1, sizeof *jobs);
    if (!jobs) {
        cx_http_reply_error(resp, 500, "out of memory");
        return;
    }
    pthread_mutex_lock(&s->mu);
    int n = s->nagents;
    for (int i = 0; i < n; i++) {
        snprintf(jobs[i].url, sizeof jobs[i].url, "%s", s->agents[i].url);
        snprintf(jobs[i].name, sizeof jobs[i].name, "%s", s->agents[i].name);
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n; i++) {
        jobs[i].token = s->token;
        jobs[i].path = path;
        cx_http_result_init(&jobs[i].r);
        jobs[i].started = pthread_create(&jobs[i].th, NULL, fanout_main, &jobs[i]) == 0;
        if (!jobs[i].started) /* no thread: do it here */
            fanout_main(&jobs[i]);
    }
    json_t *results = json_array();
    int all_ok = 1;
    for (int i = 0; i < n; i++) {
        if (jobs[i].started)
            pthread_join(jobs[i].th, NULL);
        fanout_job *j = &jobs[i];
        json_t *o = json_pack("{s:s,s:s}", "agent", j->name, "url", j->url);
        int ok = j->rc == 0 && j->r.status >= 200 && j->r.status < 300;
        all_ok &= ok;
        json_object_set_new(o, "ok", json_boolean(ok));
        json_object_set_new(o, "status", json_integer(j->rc == 0 ? j->r.status : 0));
        json_t *answer = j->rc == 0 && j->r.body.data ? json_loads(j->r.body.data, 0, NULL) : NULL;
        json_object_set_new(o, "answer", answer ? answer : json_null());
        if (j->rc != 0)
            json_object_set_new(o, "error", json_string(j->err[0] ? j->err : cx_strerror(j->rc)));
        else if (!ok)
            json_object_set_new(o, "error", json_sprintf("agent answered HTTP %d", j->r.status));
        json_array_append_new(results, o);
        cx_http_result_cleanup(&j->r);
    }
    free(jobs);
    cx_info("dashboard: POST %s on %d agents: %s", path, n, all_ok ? "all ok" : "some failed");
    cx_http_reply_json(resp, all_ok ? 200 : 502, json_pack("{s:b,s:o}", "ok", all_ok, "results", results));
}

/* Route one request. Paths: see server.h. */
static void route(dash_server *s, const cx_http_req *req, cx_http_resp *resp)
{
    const char *m = req->method, *p = req->path;
    int get = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;
    int post = strcmp(m, "POST") == 0;
    if (strcmp(p, "/") == 0 || strcmp(p, "/index.html") == 0) {
        if (get) {
            h_asset("index.html", resp);
            return;
        }
    } else if (strncmp(p, "/assets/", 8) == 0) {
        if (get) {
            h_asset(p + 8, resp);
            return;
        }
    } else if (strcmp(p, "/api/state") == 0) {
        if (get) {
            h_state(s, resp);
            return;
        }
    } else if (strcmp(p, "/api/fault-kinds") == 0) {
        if (get) { /* the inject form's kinds and params: injector_table, like GET /v1/fault-kinds */
            cx_http_reply_json(resp, 200, json_pack("{s:o}", "kinds", injector_table_json()));
            return;
        }
    } else if (strcmp(p, "/api/halt") == 0) {
        if (post) {
            h_fanout(s, req, "/v1/halt", resp);
            return;
        }
    } else if (strcmp(p, "/api/resume") == 0) {
        if (post) {
            h_fanout(s, req, "/v1/resume", resp);
            return;
        }
    } else if (strcmp(p, "/api/faults") == 0) {
        if (post) {
            h_post_fault(s, req, resp);
            return;
        }
    } else if (strncmp(p, "/api/faults/", 12) == 0) {
        char agent[64], id[96];
        const char *rest = p + 12, *slash = strchr(rest, '/');
        size_t al = slash ? (size_t)(slash - rest) : 0;
        if (!slash || al == 0 || al >= sizeof agent || !slash[1] || strchr(slash + 1, '/') ||
            strlen(slash + 1) >= sizeof id) {
            cx_http_reply_error(resp, 404, "no such endpoint: %s %s (want /api/faults/AGENT/ID)", m, p);
            return;
        }
        memcpy(agent, rest, al);
        agent[al] = '\0';
        snprintf(id, sizeof id, "%s", slash + 1);
        if (strcmp(m, "DELETE") == 0) {
            h_delete_fault(s, req, agent, id, resp);
            return;
        }
    } else if (strncmp(p, "/api/logs/", 10) == 0) {
        const char *agent = p + 10;
        if (!*agent || strchr(agent, '/') || strlen(agent) >= 64) {
            cx_http_reply_error(resp, 404, "no such endpoint: %s %s (want /api/logs/AGENT)", m, p);
            return;
        }
        if (get) {
            h_logs(s, req, agent, resp);
            return;
        }
    } else {
        cx_http_reply_error(resp, 404, "no such endpoint: %s %s", m, p);
        return;
    }
    cx_http_reply_error(resp, 405, "method %s not allowed on %s", m, p);
}

/* A dashboard bound to loopback answers only requests that name a loopback
 * host: a web page elsewhere cannot read it through DNS rebinding. */
static int host_allowed(const dash_server *s, struct MHD_Connection *conn)
{
    if (!s->loopback)
        return 1;
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    if (!host)
        return 1; /* HTTP/1.0 clients send none; a browser always does */
    size_t n = strcspn(host, ":");
    if (host[0] == '[')
        n = strcspn(host, "]") + 1;
    return (n == 9 && strncmp(host, "127.0.0.1", 9) == 0) ||
           (n == 9 && strncasecmp(host, "localhost", 9) == 0) || (n == 5 && strncmp(host, "[::1]", 5) == 0);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    dash_server *s = cls;
    dash_conn *dc = *con_cls;
    if (!dc) {
        /* headers are in: admit or refuse before reading any body */
        char why[256];
        int reserved = strcmp(method, "POST") == 0 && strcmp(url, "/api/halt") == 0;
        if (cx_http_guard_begin(s->guard, conn, reserved, why, sizeof why) != 0) {
            cx_http_resp resp = {.status = 503, .content_type = "application/json"};
            cx_buf_init(&resp.body, 4096);
            cx_http_reply_error(&resp, 503, "%s", why);
            cx_http_add_header(&resp, "Retry-After", "1");
            return send_resp(conn, &resp);
        }
        dc = calloc(1, sizeof *dc);
        if (!dc)
            return MHD_NO;
        cx_buf_init(&dc->body, DASH_BODY_MAX);
        *con_cls = dc;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!dc->too_big && cx_buf_append(&dc->body, upload_data, *upload_data_size) != 0) {
            dc->too_big = 1;
            cx_buf_cleanup(&dc->body);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    cx_http_guard_handling(s->guard, conn);
    cx_http_resp resp = {.status = 200, .content_type = "application/json"};
    cx_buf_init(&resp.body, DASH_RESP_MAX);
    if (!host_allowed(s, conn)) {
        cx_http_reply_error(&resp, 403, "this dashboard answers only to Host 127.0.0.1 or localhost");
        return send_resp(conn, &resp);
    }
    if (strcmp(method, "GET") == 0 && strcmp(url, "/api/events") == 0) {
        cx_buf_cleanup(&resp.body);
        return sse_start(s, conn);
    }
    if (dc->too_big) {
        cx_http_reply_error(&resp, 413, "request body is over the %d byte limit", DASH_BODY_MAX);
        return send_resp(conn, &resp);
    }
    if (strlen(url) >= 1024) {
        cx_http_reply_error(&resp, 414, "path too long");
        return send_resp(conn, &resp);
    }
    cx_http_req req = {.method = method, .path = url, .mhd_conn = conn};
    req.body = dc->body.data ? dc->body.data : "";
    req.body_len = dc->body.len;
    route(s, &req, &resp);
    return send_resp(conn, &resp);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    dash_server *s = cls;
    cx_http_guard_end(s->guard, conn);
    dash_conn *dc = *con_cls;
    if (dc) {
        cx_buf_cleanup(&dc->body);
        free(dc);
        *con_cls = NULL;
    }
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    cx_debug("dashboard http: %s", msg);
}

/* ---- assets ---- */

const dash_asset *dash_asset_find(const char *name)
{
    for (const dash_asset *a = dash_assets; a->name; a++)
        if (strcmp(a->name, name) == 0)
            return a;
    return NULL;
}

/* ---- lifecycle ---- */

static int check_url(const char *what, const char *url, char *err, size_t errlen)
{
    if (!url || strncmp(url, "http://", 7) != 0 || strlen(url) <= 7 || strlen(url) >= 256)
        return cx_fail(err, errlen, CX_EINVAL, "%s: '%s' is not an http://HOST:PORT URL", what,
                       url ? url : "(null)");
    return 0;
}

dash_server *dash_server_new(const dash_config *cfg, char *err, size_t errlen)
{
    if (cfg->nagents < 0 || cfg->nagents > DASH_MAX_AGENTS) {
        cx_fail(err, errlen, CX_EINVAL, "agents: %d given, at most %d", cfg->nagents, DASH_MAX_AGENTS);
        return NULL;
    }
    if (cfg->syncer_url && check_url("syncer", cfg->syncer_url, err, errlen) != 0)
        return NULL;
    for (int i = 0; i < cfg->nagents; i++)
        if (check_url("agent", cfg->agent_urls[i], err, errlen) != 0)
            return NULL;
    const char *listen = cfg->listen ? cfg->listen : "127.0.0.1:0";
    char host[256];
    int port;
    if (cx_parse_hostport(listen, "--listen", host, sizeof host, &port, err, errlen) != 0)
        return NULL;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        cx_fail(err, errlen, CX_EINVAL, "--listen: '%s' is not an IPv4 address", host);
        return NULL;
    }

    dash_server *s = calloc(1, sizeof *s);
    if (!s) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->listen = strdup(listen);
    s->syncer_url = dup_or_null(cfg->syncer_url);
    s->token = dup_or_null(cfg->token);
    s->state_dir = dup_or_null(cfg->state_dir);
    s->title = dup_or_null(cfg->title);
    s->poll_ms = cfg->poll_ms > 0 ? cfg->poll_ms : 500;
    s->sse_hb_ms = cfg->sse_heartbeat_ms > 0 ? cfg->sse_heartbeat_ms : 15000;
    s->syncer_reachable = -1;
    s->t0_mono_ms = cx_mono_ms();
    s->loss = json_array();
    s->merges = json_array();
    s->rates = json_array();
    s->faults = json_array();
    s->events = json_array();
    s->loss_new = json_array();
    s->merges_new = json_array();
    s->rates_new = json_array();
    s->hypotheses = json_array();
    cx_http_opts poll_opts = {.connect_timeout_ms = 500,
                              .timeout_ms = 2000,
                              .retries = 0,
                              .bearer = cfg->token,
                              .max_body = (size_t)64 << 20};
    cx_http_opts sy_opts = poll_opts; /* the syncer refuses a wrong credential even on reads */
    sy_opts.bearer = cfg->syncer_credential;
    if (s->syncer_url)
        s->syncer_cli = cx_http_client_new(s->syncer_url, &sy_opts);
    s->nagents = cfg->nagents;
    for (int i = 0; i < cfg->nagents; i++) {
        dash_agent *a = &s->agents[i];
        snprintf(a->url, sizeof a->url, "%s", cfg->agent_urls[i]);
        size_t ul = strlen(a->url);
        if (ul > 7 && a->url[ul - 1] == '/')
            a->url[ul - 1] = '\0';
        snprintf(a->name, sizeof a->name, "agent-%d", i);
        a->learner_cfg = cfg->agent_learners ? cfg->agent_learners[i] : -1;
        a->reachable = -1;
        a->cli = cx_http_client_new(a->url, &poll_opts);
    }
    if (!s->listen || (cfg->syncer_url && !s->syncer_cli)) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        goto err;
    }
    for (int i = 0; i < s->nagents; i++)
        if (!s->agents[i].cli) {
            cx_fail(err, errlen, CX_ENOMEM, "out of memory");
            goto err;
        }

    /* half of the services' limits: a dashboard serves a few viewers */
    cx_http_limits lim;
    cx_http_limits_default(&lim);
    lim.conn_max = 256;
    lim.conn_soft = 224;
    lim.active_max = 160;
    s->guard = cx_http_guard_new(&lim, "dashboard");
    if (!s->guard) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        goto err;
    }
    s->daemon =
        MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
                         0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
                         cx_http_guard_notify, s->guard, MHD_OPTION_CONNECTION_LIMIT, lim.conn_max,
                         MHD_OPTION_CONNECTION_TIMEOUT, lim.idle_timeout_s, MHD_OPTION_EXTERNAL_LOGGER,
                         on_mhd_log, NULL, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
    if (!s->daemon) {
        cx_fail(err, errlen, CX_EUNAVAIL, "cannot listen on %s (address in use or not local?)", listen);
        goto err;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : port;
    s->loopback = strncmp(host, "127.", 4) == 0;
    /* 0.0.0.0 binds every address; the URL to print is loopback's */
    const char *shown = strcmp(host, "0.0.0.0") == 0 ? "127.0.0.1" : host;
    snprintf(s->url, sizeof s->url, "http://%s:%d/", shown, s->port);

    if (pthread_create(&s->poller, NULL, poller_main, s) != 0) {
        cx_fail(err, errlen, CX_ESYS, "cannot start the poll thread");
        goto err;
    }
    s->poller_started = 1;

    if (s->state_dir) {
        char path[1024], addr[300];
        if (cx_mkdir_p(s->state_dir, err, errlen) != 0)
            goto err;
        snprintf(path, sizeof path, "%s/listen.addr", s->state_dir);
        snprintf(addr, sizeof addr, "%s:%d\n", shown, s->port);
        if (cx_file_write_atomic(path, addr, strlen(addr), err, errlen) != 0)
            goto err;
    }
    return s;

err:
    dash_server_free(s);
    return NULL;
}

int dash_server_port(const dash_server *s)
{
    return s->port;
}

const char *dash_server_url(const dash_server *s)
{
    return s->url;
}

void dash_server_free(dash_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    if (s->poller_started)
        pthread_join(s->poller, NULL);
    /* Let every open stream send its last chunk before the daemon closes
     * the sockets (bounded: 3 s), so that clients see a clean end. */
    pthread_mutex_lock(&s->mu);
    int64_t until = cx_mono_ms() + 3000;
    while (s->nsse > 0 && cx_mono_ms() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cond, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    if (s->daemon)
        MHD_stop_daemon(s->daemon); /* joins the connection threads, SSE streams included */
    cx_http_guard_free(s->guard);
    cx_http_client_free(s->syncer_cli);
    for (int i = 0; i < s->nagents; i++) {
        cx_http_client_free(s->agents[i].cli);
        json_decref(s->agents[i].status);
        json_decref(s->agents[i].faults);
    }
    for (int i = 0; i < DASH_LEARNERS_MAX; i++)
        json_decref(s->learners[i].heartbeat);
    for (int i = 0; i < DASH_MSGS_MAX; i++)
        free(s->msgs[i].text);
    json_decref(s->syncer_status);
    json_decref(s->loss);
    json_decref(s->merges);
    json_decref(s->rates);
    json_decref(s->faults);
    json_decref(s->events);
    json_decref(s->loss_new);
    json_decref(s->merges_new);
    json_decref(s->rates_new);
    json_decref(s->hypotheses);
    json_decref(s->progress);
    free(s->listen);
    free(s->syncer_url);
    free(s->token);
    free(s->state_dir);
    free(s->title);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ---- what the harness pushes ---- */

int dash_server_set_hypotheses(dash_server *s, const json_t *list, char *err, size_t errlen)
{
    if (!json_is_array(list))
        return cx_fail(err, errlen, CX_EINVAL, "hypotheses: expected an array");
    json_t *copy = json_array();
    size_t i;
    json_t *h;
    json_array_foreach(list, i, h)
    {
        const char *name = NULL, *status = NULL, *phase = NULL, *cmp = NULL, *unit = NULL, *expl = NULL;
        json_t *measured = NULL, *threshold = NULL;
        char where[48];
        snprintf(where, sizeof where, "hypotheses[%zu]", i);
        if (cx_json_unpack((json_t *)h, where, err, errlen, "{s:s,s:s,s?:s,s?:o,s?:o,s?:s,s?:s,s?:s}", "name",
                           &name, "status", &status, "phase", &phase, "measured", &measured, "threshold",
                           &threshold, "cmp", &cmp, "unit", &unit, "explanation", &expl) != 0) {
            json_decref(copy);
            return CX_EINVAL;
        }
        const char *ok[] = {"pending", "running", "pass", "fail", "error"};
        int valid = 0;
        for (size_t k = 0; k < sizeof ok / sizeof *ok; k++)
            valid |= strcmp(status, ok[k]) == 0;
        if (!valid || (measured && !json_is_number(measured) && !json_is_null(measured)) ||
            (threshold && !json_is_number(threshold) && !json_is_null(threshold))) {
            json_decref(copy);
            return cx_fail(err, errlen, CX_EINVAL,
                           "%s: status must be pending|running|pass|fail|error and measured/threshold "
                           "numbers or null",
                           where);
        }
        json_array_append_new(copy, json_deep_copy(h));
    }
    pthread_mutex_lock(&s->mu);
    json_decref(s->hypotheses);
    s->hypotheses = copy;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void dash_server_set_progress(dash_server *s, const char *phase, int64_t elapsed_ms, int64_t remaining_ms)
{
    json_t *p = json_pack("{s:s,s:I,s:o}", "phase", phase ? phase : "", "elapsed_ms", (json_int_t)elapsed_ms,
                          "remaining_ms", remaining_ms >= 0 ? json_integer(remaining_ms) : json_null());
    pthread_mutex_lock(&s->mu);
    json_decref(s->progress);
    s->progress = p;
    pthread_mutex_unlock(&s->mu);
}

int dash_server_push_event(dash_server *s, const json_t *ev, char *err, size_t errlen)
{
    if (!json_is_object(ev) || !json_is_string(json_object_get(ev, "type")))
        return cx_fail(err, errlen, CX_EINVAL, "event: expected an object with a string \"type\"");
    json_t *c = json_deep_copy(ev);
    json_object_set_new(c, "source", json_string("harness"));
    if (!json_object_get(c, "t_mono_ms"))
        json_object_set_new(c, "t_mono_ms", json_integer(cx_mono_ms()));
    pthread_mutex_lock(&s->mu);
    json_array_append(s->events, c);
    while (json_array_size(s->events) > DASH_EVENTS_MAX)
        json_array_remove(s->events, 0);
    msg_push(s, "event", c);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    return 0;
}
