/* test_hypothesis_clocks.c - hypotheses on times mapped from other clocks
 * (history.h, "One time base"): an event's t_err_ms and a fault record's
 * mono_err_ms are error bounds, and an edge between the two is judged on
 * the conservative side, with the explanation saying when the bound alone
 * decided. The same history with bounds 0 is judged as before.
 *
 * A synthetic run: 2 learners, one fragment merged every 500 ms from 1 s
 * (each learner alive contributes), an eval after each merge, heartbeats
 * every second. Learner 1 is killed at 10 s (healed at 11 s) and joins
 * again as incarnation 2 at `rejoin` ms; it contributes from the next merge
 * at least 500 ms later. The run ends at 30 s. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/hypothesis.h"

#define KILL_T 10000
#define HEAL_T 11000
#define END_T 30000

static void add(hyp_history *h, int64_t *seq, int t, int err, json_t *ev)
{
    char e[256];
    cr_assert_not_null(ev);
    json_object_set_new(ev, "seq", json_integer(++*seq));
    json_object_set_new(ev, "t_mono_ms", json_integer(t));
    if (err)
        json_object_set_new(ev, "t_err_ms", json_integer(err));
    cr_assert_eq(hyp_history_add_syncer_event(h, ev, e, sizeof e), 0, "%s", e);
    json_decref(ev);
}

/* ev_err: every event's bound; fault_err: the kill record's. */
static hyp_history *build(int rejoin, int ev_err, int fault_err)
{
    hyp_history *h = hyp_history_new(2, 1);
    int64_t seq = 0;
    add(h, &seq, 0, ev_err, json_pack("{s:s, s:[i]}", "type", "start", "versions", 0));
    for (int l = 0; l < 2; l++) {
        add(h, &seq, 100, ev_err,
            json_pack("{s:s, s:i, s:i, s:i}", "type", "join", "learner", l, "incarnation", 1, "resumed_step",
                      0));
        add(h, &seq, 101, ev_err,
            json_pack("{s:s, s:i, s:i, s:i, s:i}", "type", "pull", "learner", l, "incarnation", 1, "fragment",
                      0, "version", 0));
    }
    int version = 0, joined2 = 0;
    for (int t = 200; t <= END_T; t += 100) {
        if (!joined2 && t >= rejoin) {
            add(h, &seq, rejoin, ev_err,
                json_pack("{s:s, s:i, s:i, s:i}", "type", "join", "learner", 1, "incarnation", 2,
                          "resumed_step", 0));
            add(h, &seq, rejoin + 1, ev_err,
                json_pack("{s:s, s:i, s:i, s:i, s:i}", "type", "pull", "learner", 1, "incarnation", 2,
                          "fragment", 0, "version", version));
            joined2 = 1;
        }
        if (t % 1000 == 0)
            for (int l = 0; l < 2; l++) {
                int inc = l == 1 && joined2 ? 2 : 1;
                if (l == 1 && t >= KILL_T && !joined2)
                    continue;
                add(h, &seq, t, ev_err,
                    json_pack("{s:s, s:i, s:i, s:i, s:f, s:i, s:i}", "type", "heartbeat", "learner", l,
                              "incarnation", inc, "step", t / 10, "train_loss", 2.0, "tokens", t * 100,
                              "step_ms", 10));
            }
        if (t % 500 == 0 && t >= 1000) {
            /* who contributes to this merge: learner 0 always, learner 1's
             * first incarnation until the kill, its second from 500 ms
             * after its join */
            int inc1 = t < KILL_T ? 1 : joined2 && t >= rejoin + 500 ? 2 : 0;
            json_t *parts = json_array();
            for (int l = 0; l < 2; l++) {
                int inc = l == 0 ? 1 : inc1;
                if (!inc)
                    continue;
                add(h, &seq, t - 5, ev_err,
                    json_pack("{s:s, s:i, s:i, s:i, s:i, s:i}", "type", "contribution", "learner", l,
                              "incarnation", inc, "fragment", 0, "steps", 50, "bytes", 100));
                json_array_append_new(
                    parts, json_pack("{s:i, s:i, s:i}", "learner", l, "incarnation", inc, "steps", 50));
            }
            add(h, &seq, t, ev_err,
                json_pack("{s:s, s:i, s:i, s:o, s:i}", "type", "merge", "fragment", 0, "version", ++version,
                          "participants", parts, "tokens", 10000));
            add(h, &seq, t + 1, ev_err,
                json_pack("{s:s, s:f, s:i}", "type", "eval", "loss", 2.0, "tokens", t * 100));
        }
    }
    json_t *rec = json_pack("{s:s, s:s, s:{s:s, s:i}, s:i, s:s, s:i, s:i, s:{s:s}}", "id", "f1", "type",
                            "kill", "params", "signal", "KILL", "restart_after_ms", 1000, "duration_ms",
                            HEAL_T - KILL_T, "state", "expired", "started_mono_ms", KILL_T, "ended_mono_ms",
                            HEAL_T, "evidence", "signal", "KILL");
    if (fault_err)
        json_object_set_new(rec, "mono_err_ms", json_integer(fault_err));
    char e[256];
    cr_assert_eq(hyp_history_add_fault(h, 1, rec, e, sizeof e), 0, "%s", e);
    json_decref(rec);
    hyp_history_set_counter(h, HYP_C_START_MONO, 0);
    hyp_history_set_counter(h, HYP_C_END_MONO, END_T);
    return h;
}

static hyp_verdict judge(int rejoin, int ev_err, int fault_err, const char *spec_json)
{
    hyp_history *h = build(rejoin, ev_err, fault_err);
    json_t *spec = json_loads(spec_json, 0, NULL);
    cr_assert_not_null(spec);
    jv_diag *d = jv_diag_new();
    hyp_spec *s = hyp_spec_parse(spec, "$.verify[0]", 2, d);
    cr_assert_not_null(s, "spec %s rejected", spec_json);
    hyp_verdict v;
    hyp_spec_eval(s, h, &v);
    hyp_spec_free(s);
    jv_diag_free(d);
    json_decref(spec);
    hyp_history_free(h);
    fprintf(stderr, "rejoin %d err %d+%d %s -> %s %g: %s\n", rejoin, ev_err, fault_err, spec_json,
            hyp_status_name(v.status), v.measured, v.explanation);
    return v;
}

#define REINTEGRATION                                                                                        \
    "{\"hypothesis\": \"reintegration\", \"learner\": 1, \"join_s\": 2, \"merged\": 1, \"merged_s\": 5}"

/* A join 3 ms after the kill's start: with exact clocks it is the rejoin;
 * with bounds of 2 + 2 ms it may have come before the kill, so it is not
 * taken for one ("never joined again", the conservative side), and the
 * explanation names the join the bound kept out. */
Test(hypothesis_clocks, a_join_within_the_bound_of_the_kill_is_not_its_rejoin)
{
    hyp_verdict v = judge(KILL_T + 3, 0, 0, REINTEGRATION);
    cr_expect_eq(v.status, HYP_PASS, "exact: %s", v.explanation);
    v = judge(KILL_T + 3, 2, 2, REINTEGRATION);
    cr_expect_eq(v.status, HYP_FAIL);
    cr_expect(strstr(v.explanation, "never joined again") != NULL, "%s", v.explanation);
    cr_expect(strstr(v.explanation, "within the clocks' error bound (4 ms)") != NULL, "%s", v.explanation);
    v = judge(KILL_T + 3, 2, 2, "{\"hypothesis\": \"fault_effective\"}");
    cr_expect_eq(v.status, HYP_FAIL);
    cr_expect(strstr(v.explanation, "lies within the clocks' error bound of 4 ms") != NULL, "%s",
              v.explanation);
    /* 5 ms after: certainly after, whatever the 4 ms */
    v = judge(KILL_T + 5, 2, 2, REINTEGRATION);
    cr_expect_eq(v.status, HYP_PASS, "%s", v.explanation);
}

/* A join 1.998 s after the heal against join_s 2: within the limit on
 * exact clocks; with bounds of 1 + 2 ms it may be 2.001 s, so it fails,
 * and the explanation says only the bound decided. */
Test(hypothesis_clocks, a_join_at_the_limit_fails_by_the_bound_and_says_so)
{
    hyp_verdict v = judge(HEAL_T + 1998, 0, 0, REINTEGRATION);
    cr_expect_eq(v.status, HYP_PASS, "exact: %s", v.explanation);
    v = judge(HEAL_T + 1998, 1, 2, REINTEGRATION);
    cr_expect_eq(v.status, HYP_FAIL);
    cr_expect(strstr(v.explanation,
                     "joined 1.998s after the fault healed: within the limit of 2s only if the "
                     "clocks' error bound (3 ms) is discounted") != NULL,
              "%s", v.explanation);
}

/* rejoin_time is measured to the upper end of what the clocks allow: the
 * first merged contribution 1.0 s after the heal, with bounds 100 + 200 ms,
 * is 1.3 s; against max_s 1.2 that fails, saying the bound decided. */
Test(hypothesis_clocks, rejoin_time_is_judged_at_its_upper_end)
{
    hyp_verdict v = judge(HEAL_T + 500, 0, 0, "{\"hypothesis\": \"rejoin_time\", \"max_s\": 1.2}");
    cr_expect_eq(v.status, HYP_PASS, "%s", v.explanation);
    cr_expect_float_eq(v.measured, 1.0, 1e-9);
    v = judge(HEAL_T + 500, 100, 200, "{\"hypothesis\": \"rejoin_time\", \"max_s\": 1.2}");
    cr_expect_eq(v.status, HYP_FAIL);
    cr_expect_float_eq(v.measured, 1.3, 1e-9);
    cr_expect(strstr(v.explanation, "within max_s only if the clocks' error bound (300 ms) is discounted") !=
                  NULL,
              "%s", v.explanation);
    /* far from the limit, a bound changes nothing */
    v = judge(HEAL_T + 500, 100, 200, "{\"hypothesis\": \"rejoin_time\", \"max_s\": 10}");
    cr_expect_eq(v.status, HYP_PASS, "%s", v.explanation);
}

/* Bounds of milliseconds against thresholds of seconds: every verdict is
 * the exact clocks' (what a run across hosts must give). */
Test(hypothesis_clocks, small_bounds_change_no_verdict)
{
    static const char *const specs[] = {
        REINTEGRATION,
        "{\"hypothesis\": \"fault_effective\"}",
        "{\"hypothesis\": \"rejoin_time\", \"max_s\": 5}",
        "{\"hypothesis\": \"loss_continuity\", \"max_jump_rel\": 0.1, \"recover_s\": 5}",
        "{\"hypothesis\": \"no_global_downtime\", \"max_gap_s\": 2}",
        "{\"hypothesis\": \"goodput\", \"basis\": \"time\", \"min\": 0.5}",
        NULL,
    };
    for (int i = 0; specs[i]; i++) {
        hyp_verdict exact = judge(HEAL_T + 400, 0, 0, specs[i]);
        hyp_verdict mapped = judge(HEAL_T + 400, 2, 3, specs[i]);
        cr_expect_eq(exact.status, HYP_PASS, "%s: %s", specs[i], exact.explanation);
        cr_expect_eq(mapped.status, exact.status, "%s: %s", specs[i], mapped.explanation);
    }
}
