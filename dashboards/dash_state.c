/* dash_state.c - the model of the run the dashboard shows (dash_internal.h).
 *
 * What it is: the merge of what the poller brought (syncer events and
 * counters, agents' fault lists) into the bounded history, the JSON the
 * page reads (snapshot, update), and the ring of ready-to-send SSE
 * messages. What it is not: I/O; every function here runs under s->mu
 * except dash_server_snapshot, which takes it.
 *
 * Bounded memory: every history array has a cap (DASH_*_MAX); series over
 * their cap are halved (every second point of the older half dropped), so
 * the chart keeps the whole run at a coarser grain.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "dashboards/dash_internal.h"

/* ---- small helpers ---- */

int64_t dash_jint(const json_t *o, const char *key, int64_t dflt)
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
int dash_agent_find(const dash_server *s, const char *name)
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

/* The syncer's view of a learner, beside its process state on the card:
 *   absent, left   the syncer's own state (no heartbeat for its timeout; left)
 *   joining        joined (first incarnation), nothing of it merged since
 *   rejoining      a later incarnation joined, nothing of it merged since
 *   stale          active, but silent (no heartbeat for 3 s and 5 steps) or
 *                  left out of the last 4 x P merges the others made
 *   in sync        otherwise
 *   unknown        the syncer does not list it
 * base is the learner's JSON so far (the syncer's entry, heartbeat
 * fields); dl its dashboard record. */
static const char *sync_state(dash_server *s, const json_t *base, const dash_learner *dl)
{
    const char *st = json_string_value(json_object_get(base, "state"));
    if (!st)
        return "unknown";
    if (strcmp(st, "active") != 0)
        return st;
    if (dl->join_mono_ms && dl->merged_mono_ms < dl->join_mono_ms)
        return dl->join_inc > 1 ? "rejoining" : "joining";
    double step_ms = 0;
    json_t *sm = json_object_get(base, "step_ms");
    if (json_is_number(sm))
        step_ms = json_number_value(sm);
    int64_t hb_age = dash_jint(base, "heartbeat_age_ms", 0);
    if (hb_age > 3000 && (double)hb_age > 5.0 * step_ms)
        return "stale";
    size_t nfrag = s->syncer_status ? json_array_size(json_object_get(s->syncer_status, "fragments")) : 0;
    if (dl->merged_mono_ms && s->merges_seen - dl->merged_at > 4 * (int64_t)(nfrag > 0 ? nfrag : 1))
        return "stale";
    return "in sync";
}

static json_t *learner_json(dash_server *s, int id, int64_t now)
{
    json_t *base = NULL;
    json_t *ls = s->syncer_status ? json_object_get(s->syncer_status, "learners") : NULL;
    size_t i;
    json_t *l;
    json_array_foreach(ls, i, l)
    {
        if (dash_jint(l, "id", -1) == id) {
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
        json_object_set_new(base, "heartbeat_age_ms", json_integer(now - dash_jint(hb, "t_mono_ms", now)));
    }
    json_object_set_new(base, "tokens_per_s", json_real(dl->tokens_per_s));
    json_object_set_new(base, "sync_state", json_string(sync_state(s, base, dl)));
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
            int64_t start = dash_jint(f, "started_mono_ms", 0), dur = dash_jint(f, "duration_ms", 0);
            int64_t left = start + dur - now;
            /* a fault made through the Toxiproxy API has no duration: until deleted */
            json_object_set_new(c, "time_left_ms", dur > 0 ? json_integer(left > 0 ? left : 0) : json_null());
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
        int64_t id = dash_jint(l, "id", -1);
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
json_t *dash_snapshot_locked(dash_server *s)
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
    json_t *snap = dash_snapshot_locked(s);
    /* detach from the live series */
    json_t *copy = json_deep_copy(snap);
    pthread_mutex_unlock(&s->mu);
    json_decref(snap);
    return copy;
}

/* ---- SSE message ring ---- */

/* Append one message (data stolen). Caller holds s->mu. */
void dash_msg_push(dash_server *s, const char *event, json_t *data)
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
void dash_push_update(dash_server *s)
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
    dash_msg_push(s, "update", o);
    pthread_cond_broadcast(&s->cond);
}

/* ---- merging what the poll brought ---- */

void dash_take_event(dash_server *s, json_t *ev)
{
    int64_t seq = dash_jint(ev, "seq", -1);
    if (seq <= s->last_seq)
        return;
    s->last_seq = seq;
    int64_t t = dash_jint(ev, "t_mono_ms", 0);
    if (t > 0 && t < s->t0_mono_ms)
        s->t0_mono_ms = t;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (!type)
        type = "";
    if (strcmp(type, "eval") == 0) {
        json_t *loss = json_object_get(ev, "loss"), *bpb = json_object_get(ev, "bpb");
        json_t *pt = json_pack("[I,O,I,I,O]", (json_int_t)t, json_is_number(loss) ? loss : json_null(),
                               (json_int_t)dash_jint(ev, "merges", 0), (json_int_t)dash_jint(ev, "tokens", 0),
                               json_is_number(bpb) ? bpb : json_null());
        series_push(s->loss, json_incref(pt), DASH_LOSS_MAX);
        json_array_append_new(s->loss_new, pt);
    } else if (strcmp(type, "merge") == 0) {
        json_t *parts = json_object_get(ev, "participants");
        json_t *pt = json_pack("[I,I,I,I]", (json_int_t)t, (json_int_t)dash_jint(ev, "fragment", -1),
                               (json_int_t)dash_jint(ev, "version", 0), (json_int_t)json_array_size(parts));
        series_push(s->merges, json_incref(pt), DASH_MERGES_MAX);
        json_array_append_new(s->merges_new, pt);
        s->merges_seen++;
        size_t i;
        json_t *p;
        json_array_foreach(parts, i, p)
        {
            int64_t id = dash_jint(p, "learner", -1);
            if (id < 0 || id >= DASH_LEARNERS_MAX)
                continue;
            dash_learner *dl = &s->learners[id];
            dl->merged_count++;
            dl->merged_mono_ms = t;
            dl->merged_fragment = dash_jint(ev, "fragment", -1);
            dl->merged_version = dash_jint(ev, "version", 0);
            dl->merged_at = s->merges_seen;
        }
    } else if (strcmp(type, "join") == 0) {
        int64_t id = dash_jint(ev, "learner", -1);
        if (id >= 0 && id < DASH_LEARNERS_MAX) {
            s->learners[id].join_mono_ms = t;
            s->learners[id].join_inc = dash_jint(ev, "incarnation", 0);
        }
    } else if (strcmp(type, "heartbeat") == 0) {
        int64_t id = dash_jint(ev, "learner", -1);
        if (id >= 0 && id < DASH_LEARNERS_MAX) {
            dash_learner *dl = &s->learners[id];
            int64_t tokens = dash_jint(ev, "tokens", 0);
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
    dash_log_event(s, c);
}

void dash_log_event(dash_server *s, json_t *ev)
{
    json_array_append(s->events, ev);
    while (json_array_size(s->events) > DASH_EVENTS_MAX)
        json_array_remove(s->events, 0);
    dash_msg_push(s, "event", ev);
}

void dash_take_rates(dash_server *s, const json_t *st, int64_t now)
{
    int64_t m = dash_jint(st, "merges", -1);
    json_t *bytes = json_object_get(st, "bytes");
    int64_t bin = dash_jint(bytes, "in", -1), bout = dash_jint(bytes, "out", -1);
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
void dash_take_faults(dash_server *s, const dash_agent *a, const json_t *list)
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
        int64_t start = dash_jint(w, "start_mono_ms", 0);
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
