/* dash_poll.c - the dashboard's poll thread (dash_internal.h).
 *
 * poll_once() every poll_ms: first the HTTP GETs, without the lock (syncer
 * GET /v1/status and GET /v1/events?since=SEQ, each agent's GET /v1/status
 * and GET /v1/faults), then the merge into the history under s->mu
 * (dash_state.c), then one `update` message for the streams. The curl
 * handles it uses (s->syncer_cli, s->agents[i].cli) belong to this thread.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/agent_client.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "dashboards/dash_internal.h"

/* ---- one time base ---- */

/* Map o[key] (a remote's CLOCK_MONOTONIC ms) onto this process's clock in
 * place. 0, or CX_ENOTFOUND when c has no sample yet (o unchanged). */
static int map_key(cx_tb_clock *c, json_t *o, const char *key)
{
    json_t *t = json_object_get(o, key);
    if (!json_is_integer(t))
        return 0;
    double local, err;
    if (!c || cx_tb_map(c, (double)json_integer_value(t) + 0.5, &local, &err) != 0)
        return CX_ENOTFOUND;
    json_object_set_new(o, key, json_integer((json_int_t)llround(local)));
    return 0;
}

/* Every time the poll brought, onto this process's clock, before it is
 * merged (a chart never mixes two hosts' clocks). A process that never
 * stamps is left on its own clock, with one warning. */
static void map_poll(dash_server *s, json_t *sy_events, json_t **ag_faults)
{
    size_t i;
    json_t *v;
    int bad = 0;
    json_array_foreach(sy_events, i, v) bad |= map_key(s->syncer_clock, v, "t_mono_ms") != 0;
    if (bad && !s->syncer_clock_warned++)
        cx_warn("dashboard: the syncer's answers carry no %s stamp: its times are shown on its own clock",
                CX_TB_HEADER);
    for (int a = 0; a < s->nagents; a++) {
        bad = 0;
        json_array_foreach(ag_faults[a], i, v)
        {
            bad |= map_key(s->agents[a].clock, v, "started_mono_ms") != 0;
            bad |= map_key(s->agents[a].clock, v, "ended_mono_ms") != 0;
        }
        if (bad && !s->agents[a].clock_warned++)
            cx_warn(
                "dashboard: agent %s answers carry no %s stamp: its fault times are shown on its own clock",
                s->agents[a].url, CX_TB_HEADER);
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

/* One agent's GET /v1/status and GET /v1/faults (a list). 0 with both (new
 * references), else both NULL and why filled. */
static int poll_agent(agc *c, json_t **status, json_t **faults, char *why, size_t whylen)
{
    char err[CX_ERRLEN] = "";
    *faults = NULL;
    int rc = agc_status(c, status, err, sizeof err);
    if (rc != 0) {
        snprintf(why, whylen, "GET /v1/status: %s", err[0] ? err : cx_strerror(rc));
        return rc;
    }
    rc = agc_faults(c, faults, err, sizeof err);
    if (rc != 0) {
        json_decref(*status);
        *status = NULL;
        snprintf(why, whylen, "GET /v1/faults: %s", err[0] ? err : cx_strerror(rc));
    }
    return rc;
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
                    since = dash_jint(json_array_get(evs, n - 1), "seq", since);
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
        poll_agent(s->agents[i].cli, &ag_status[i], &ag_faults[i], ag_err[i], sizeof ag_err[i]);
    }

    map_poll(s, sy_events, ag_faults);

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
            dash_take_rates(s, sy_status, now);
        }
        if (was != s->syncer_reachable && !s->syncer_reachable)
            cx_warn("dashboard: syncer %s unreachable: %s", s->syncer_url, s->syncer_error);
        size_t i;
        json_t *ev;
        json_array_foreach(sy_events, i, ev) dash_take_event(s, ev);
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
            dash_take_faults(s, a, a->faults);
        } else {
            a->reachable = 0;
            snprintf(a->error, sizeof a->error, "%s", ag_err[i]);
            if (was != 0)
                cx_warn("dashboard: agent %s (%s) unreachable: %s", a->name, a->url, a->error);
        }
    }
    dash_push_update(s);
    pthread_mutex_unlock(&s->mu);
}

void *dash_poller_main(void *arg)
{
    dash_server *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        pthread_mutex_unlock(&s->mu);
        int64_t t = cx_mono_ms();
        poll_once(s);
        int64_t next = t + s->poll_ms;
        pthread_mutex_lock(&s->mu);
        while (!s->stopping)
            if (cx_cond_wait_until_ms(&s->cond, &s->mu, next) == CX_ETIMEDOUT)
                break;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}
