/* clock.c - the runner's one time base (see clock.h).
 *
 * Every time the hypotheses judge is mapped onto the harness's own
 * CLOCK_MONOTONIC before they see it (docs/internals/timebase.md). The
 * runner keeps one cx_tb_clock (common/timebase.h) per remote process: the
 * syncer's (or a foreign coordinator's, over HTTP) and each agent's. Every
 * request it makes anyway feeds them (the clients' observer: status polls,
 * event fetches, leases, injections), so the offsets are estimated through
 * the whole run and drift is followed. Here:
 *
 *   rclock_new       the clocks, before the clients that feed them
 *   rclock_check     at the start: each process stamps its answers, or
 *                    the run fails naming it (nothing it says could be
 *                    placed on the harness's clock)
 *   rclock_map_event a coordinator event with t_mono_ms on the harness's
 *   rclock_map_fault clock, t_err_ms / mono_err_ms its bound, the
 *                    process's own time kept as t_src_mono_ms /
 *                    src_started_mono_ms, src_ended_mono_ms
 *   rclock_check_event_time  an event cannot be stamped after the harness
 *                    read it (nor, in the file form, before the
 *                    coordinator was launched): a coordinator whose
 *                    events are on another clock than its stamps (or,
 *                    in the file form, than the harness's) fails the run
 *   rclock_json      the offsets and bounds for journal.json and
 *                    summary.json
 *
 * The file form has no round trips: its events must be stamped on the
 * harness's own clock (the coordinator runs on the harness's host, in its
 * time namespace; docs/telemetry.md, "Time"), so they are taken as they
 * are (bound 0) and checked by rclock_check_event_time.
 */
#include "harness/run/clock.h"

#include "harness/run/runner.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/err.h"

#define PROBES 3 /* GET /v1/status per process at the start */

int rclock_new(runner *r)
{
    r->clk.sy_clock = cx_tb_clock_new(r->setup.e->trainer ? "coordinator" : "syncer");
    r->clk.ag_clock = calloc((size_t)r->setup.m, sizeof *r->clk.ag_clock);
    if (!r->clk.sy_clock || !r->clk.ag_clock)
        return CX_ENOMEM;
    for (int l = 0; l < r->setup.m; l++) {
        char name[32];
        snprintf(name, sizeof name, "agent %d", l);
        if (!(r->clk.ag_clock[l] = cx_tb_clock_new(name)))
            return CX_ENOMEM;
    }
    return 0;
}

void rclock_free(runner *r)
{
    for (int l = 0; r->clk.ag_clock && l < r->setup.m; l++)
        cx_tb_clock_free(r->clk.ag_clock[l]);
    free(r->clk.ag_clock);
    r->clk.ag_clock = NULL;
    cx_tb_clock_free(r->clk.sy_clock);
    r->clk.sy_clock = NULL;
}

/* 0 when c has samples; else the run's error naming whose clock it is. */
static int require_stamps(runner *r, cx_tb_clock *c, const char *who, const char *url, int answered)
{
    cx_tb_stats st;
    cx_tb_stats_get(c, &st);
    if (st.have) {
        cx_info("clock %s: offset %+.3f ms +- %.3f ms from the harness's (rtt min %.3f ms, %" PRId64
                " samples)",
                who, st.offset_ms, st.error_ms, st.rtt_min_ms, st.samples);
        return 0;
    }
    if (!answered)
        run_set_error(r, "%s at %s did not answer: its clock cannot be mapped onto the harness's", who, url);
    else
        run_set_error(r,
                      "%s at %s answers without an %s header (its CLOCK_MONOTONIC): its times cannot be "
                      "mapped onto the harness's clock, so no verdict on them could be trusted "
                      "(docs/telemetry.md, \"Time\")",
                      who, url, CX_TB_HEADER);
    return CX_EINVAL;
}

int rclock_check(runner *r)
{
    int rc = 0;
    if (!r->setup.evf) {
        int answered = 0;
        for (int i = 0; i < PROBES; i++) {
            int st = 0;
            cx_http_json(r->setup.sy, "GET", "/v1/status", NULL, &st, NULL, NULL, 0);
            answered |= st != 0;
        }
        if (require_stamps(r, r->clk.sy_clock, r->setup.e->trainer ? "the coordinator" : "the syncer",
                           topo_syncer_url(r->setup.t), answered) < 0)
            rc = CX_EINVAL;
    }
    for (int l = 0; l < r->setup.m && rc == 0; l++) {
        int answered = 0;
        for (int i = 0; i < PROBES; i++) {
            json_t *s = NULL;
            answered |= agc_status(r->col.av[l].agent, &s, NULL, 0) == 0;
            json_decref(s);
        }
        char who[32];
        snprintf(who, sizeof who, "agent %d", l);
        if (require_stamps(r, r->clk.ag_clock[l], who, topo_agent_url(r->setup.t, l), answered) < 0)
            rc = CX_EINVAL;
    }
    return rc;
}

/* t (a remote's integer ms: its instant lies in [t, t + 1)) on the
 * harness's clock, rounded, and the bound of both roundings and the
 * mapping. 0, or CX_ENOTFOUND without a sample. */
static int map_ms(cx_tb_clock *c, int64_t t, int64_t *out, int64_t *err)
{
    double local, e;
    int rc = cx_tb_map(c, (double)t + 0.5, &local, &e);
    if (rc < 0)
        return rc;
    *out = (int64_t)llround(local);
    *err = (int64_t)ceil(e + 1.0);
    return 0;
}

int64_t rclock_map_syncer_ms(runner *r, int64_t t)
{
    int64_t out, err;
    if (r->setup.evf || !r->clk.sy_clock || map_ms(r->clk.sy_clock, t, &out, &err) < 0)
        return t; /* the file form's times are the harness's */
    return out;
}

/* In c, the time at key moves to src_key and "unmapped_clock" is set: no
 * reader takes it for the harness's time. */
static void unmapped(json_t *c, const char *key, const char *src_key)
{
    json_t *t = json_object_get(c, key);
    if (t)
        json_object_set(c, src_key, t);
    json_object_del(c, key);
    json_object_set_new(c, "unmapped_clock", json_true());
}

json_t *rclock_map_event(runner *r, const json_t *ev)
{
    json_t *c = json_deep_copy(ev);
    json_t *t = json_object_get(ev, "t_mono_ms");
    if (!c || !json_is_integer(t) || r->setup.evf)
        return c; /* the file form: the harness's clock already (bound 0) */
    int64_t out, err;
    if (!r->clk.sy_clock || map_ms(r->clk.sy_clock, json_integer_value(t), &out, &err) < 0) {
        unmapped(c, "t_mono_ms", "t_src_mono_ms");
        return c;
    }
    json_object_set(c, "t_src_mono_ms", t);
    json_object_set_new(c, "t_mono_ms", json_integer((json_int_t)out));
    json_object_set_new(c, "t_err_ms", json_integer((json_int_t)err));
    return c;
}

json_t *rclock_map_fault(runner *r, int l, const json_t *rec)
{
    json_t *c = json_deep_copy(rec);
    if (!c)
        return NULL;
    static const char *const keys[][2] = {{"started_mono_ms", "src_started_mono_ms"},
                                          {"ended_mono_ms", "src_ended_mono_ms"}};
    int64_t worst = 0;
    for (size_t k = 0; k < 2; k++) {
        json_t *t = json_object_get(rec, keys[k][0]);
        if (!json_is_integer(t))
            continue;
        int64_t out, err;
        if (l < 0 || l >= r->setup.m || !r->clk.ag_clock ||
            map_ms(r->clk.ag_clock[l], json_integer_value(t), &out, &err) < 0) {
            unmapped(c, keys[0][0], keys[0][1]);
            unmapped(c, keys[1][0], keys[1][1]);
            return c;
        }
        json_object_set(c, keys[k][1], t);
        json_object_set_new(c, keys[k][0], json_integer((json_int_t)out));
        worst = err > worst ? err : worst;
    }
    json_object_set_new(c, "mono_err_ms", json_integer((json_int_t)worst));
    return c;
}

int rclock_check_event_time(runner *r, const json_t *ev, int64_t read_ms)
{
    json_t *t = json_object_get(ev, "t_mono_ms");
    if (!json_is_integer(t))
        return 0;
    int64_t seq = json_integer_value(json_object_get(ev, "seq"));
    int64_t tm = json_integer_value(t);
    if (r->setup.evf) {
        /* same clock, so exact: not after it was read, not before the launch */
        if (tm > read_ms || (r->setup.launch_mono > 0 && tm < r->setup.launch_mono)) {
            run_set_error(r,
                          "events file %s: event seq %" PRId64 " has t_mono_ms %" PRId64
                          ", %.3f s %s the harness's clock %s: the file form requires the coordinator to "
                          "stamp its events with the harness's own CLOCK_MONOTONIC (the same host and time "
                          "namespace; docs/telemetry.md, \"Time\")",
                          topo_events_file(r->setup.t), seq, tm,
                          (double)(tm > read_ms ? tm - read_ms : r->setup.launch_mono - tm) / 1000.0,
                          tm > read_ms ? "ahead of" : "behind",
                          tm > read_ms ? "when it was read" : "at launch");
            return CX_EINVAL;
        }
        return 0;
    }
    int64_t out, err;
    if (!r->clk.sy_clock || map_ms(r->clk.sy_clock, tm, &out, &err) < 0)
        return 0; /* no sample yet: rclock_check reports it */
    if (out - err > read_ms) {
        run_set_error(r,
                      "%s event seq %" PRId64
                      " is stamped %.3f s after the harness received it: its t_mono_ms "
                      "and its answers' %s stamps are not the same clock (docs/telemetry.md, \"Time\")",
                      r->setup.e->trainer ? "the coordinator's" : "the syncer's", seq,
                      (double)(out - err - read_ms) / 1000.0, CX_TB_HEADER);
        return CX_EINVAL;
    }
    return 0;
}

/* One process's entry: what the clock says, and where it is. */
static json_t *clock_entry(cx_tb_clock *c, const char *process, const char *url, int learner)
{
    json_t *o = cx_tb_json(c);
    if (!o)
        return NULL;
    json_object_set_new(o, "process", json_string(process));
    if (url)
        json_object_set_new(o, "url", json_string(url));
    if (learner >= 0)
        json_object_set_new(o, "learner", json_integer(learner));
    return o;
}

json_t *rclock_json(runner *r)
{
    json_t *arr = json_array();
    if (!arr || !r->setup.t || !r->clk.sy_clock)
        return arr;
    const char *coord = r->setup.e->trainer ? "coordinator" : "syncer";
    if (r->setup.evf)
        json_array_append_new(
            arr, json_pack("{s:s,s:s,s:s,s:f,s:f}", "process", coord, "clock", "the harness's (events file)",
                           "source", topo_events_file(r->setup.t), "offset_ms", 0.0, "error_ms", 0.0));
    else
        json_array_append_new(arr, clock_entry(r->clk.sy_clock, coord, topo_syncer_url(r->setup.t), -1));
    for (int l = 0; r->clk.ag_clock && l < r->setup.m; l++) {
        char name[32];
        snprintf(name, sizeof name, "agent %d", l);
        json_array_append_new(arr, clock_entry(r->clk.ag_clock[l], name, topo_agent_url(r->setup.t, l), l));
    }
    return arr;
}
