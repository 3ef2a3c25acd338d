/* test_hypothesis.c - every built-in hypothesis on a synthetic event
 * history built to pass and one built to fail, with the figure checked. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "harness/fault_kinds.h"
#include "harness/horizon.h"
#include "harness/hypothesis.h"

/* ---- a synthetic run ----
 * 4 learners, 2 fragments, K=1. Every learner trains 100 steps/s (10 ms a
 * step, 1000 tokens a step) and heartbeats every second. From t=1 s a
 * fragment is merged every 500 ms (alternating), each participant bringing
 * 100 steps; an eval follows each merge 1 ms later. Learner 2 is killed at
 * t=10 s (fault healed at 15 s) and rejoins at 15.5 s as incarnation 2 from
 * its step-800 checkpoint. The run ends at t=30 s. */

typedef struct opts {
    int spike;            /* eval loss x1.5 from the kill on, never recovers */
    int gap_from, gap_to; /* no merges in [from, to) ms */
    int no_rejoin;        /* learner 2 never comes back */
    int skip_pull;        /* the rejoined learner pulls only fragment 0 */
    int restart_at0;      /* a second syncer start at 20 s with versions [0, 0] */
    int resumed_step;     /* learner 2's checkpoint step (default 800) */
    int nan_eval;         /* one eval loss is NaN: 1 written as null, 2 as the syncer's -1 */
    int loss2;            /* rejoined learner 2's train losses: 1 last one x1.5, 2 all x1.5 */
} opts;

static const opts plain = {0}; /* the run as described above */

#define KILL_T 10000
#define HEAL_T 15000
#define REJOIN_T 15500
#define END_T 30000

static double loss_at(const opts *o, int t)
{
    double l = 5.0 * exp(-t / 20000.0) + 1.5;
    return o->spike && t >= KILL_T ? l * 1.5 : l;
}

static json_t *all; /* events before sorting */

static void add(int t, json_t *ev)
{
    cr_assert_not_null(ev);
    json_object_set_new(ev, "t_mono_ms", json_integer(t));
    json_array_append_new(all, ev);
}

static int by_time(const void *a, const void *b)
{
    int64_t x = json_integer_value(json_object_get(*(json_t *const *)a, "t_mono_ms"));
    int64_t y = json_integer_value(json_object_get(*(json_t *const *)b, "t_mono_ms"));
    int64_t ia = json_integer_value(json_object_get(*(json_t *const *)a, "_i"));
    int64_t ib = json_integer_value(json_object_get(*(json_t *const *)b, "_i"));
    return x != y ? (x > y) - (x < y) : (ia > ib) - (ia < ib);
}

static int alive2(const opts *o, int t)
{
    return t < KILL_T || (!o->no_rejoin && t >= REJOIN_T);
}

/* Learner 2 contributes again from the first merge after its pulls (16 s). */
static int contributes2(const opts *o, int t)
{
    return t < KILL_T || (!o->no_rejoin && t >= REJOIN_T + 500);
}

static hyp_history *build(const opts *o)
{
    int resumed = o->resumed_step ? o->resumed_step : 800;
    all = json_array();
    int v[2] = {0, 0};
    add(0, json_pack("{s:s, s:s, s:b, s:i, s:[i,i], s:i}", "type", "start", "mode", "decoupled", "restored",
                     0, "merges", 0, "versions", 0, 0, "learners", 4));
    for (int l = 0; l < 4; l++) {
        add(100, json_pack("{s:s, s:i, s:i, s:i}", "type", "join", "learner", l, "incarnation", 1,
                           "resumed_step", 0));
        for (int f = 0; f < 2; f++)
            add(101, json_pack("{s:s, s:i, s:i, s:i, s:i}", "type", "pull", "learner", l, "incarnation", 1,
                               "fragment", f, "version", 0));
    }
    for (int t = 100; t <= END_T; t += 100) {
        if (!o->no_rejoin && t == REJOIN_T) {
            add(t, json_pack("{s:s, s:i, s:i, s:i}", "type", "join", "learner", 2, "incarnation", 2,
                             "resumed_step", resumed));
            for (int f = 0; f < (o->skip_pull ? 1 : 2); f++)
                add(t + 10, json_pack("{s:s, s:i, s:i, s:i, s:i}", "type", "pull", "learner", 2,
                                      "incarnation", 2, "fragment", f, "version", v[f]));
        }
        if (o->restart_at0 && t == 20000)
            add(t, json_pack("{s:s, s:s, s:b, s:i, s:[i,i], s:i}", "type", "start", "mode", "decoupled",
                             "restored", 0, "merges", 0, "versions", 0, 0, "learners", 4));
        if (t % 1000 == 0)
            for (int l = 0; l < 4; l++) {
                if (l == 2 && !alive2(o, t))
                    continue;
                int inc = l == 2 && t >= REJOIN_T ? 2 : 1;
                int step = l == 2 && t >= REJOIN_T ? resumed + (t - REJOIN_T) / 10 : t / 10;
                double tl = loss_at(o, t);
                if (l == 2 && inc == 2 && (o->loss2 == 2 || (o->loss2 == 1 && t == END_T)))
                    tl *= 1.5;
                add(t, json_pack("{s:s, s:i, s:i, s:i, s:f, s:i, s:i, s:i}", "type", "heartbeat", "learner",
                                 l, "incarnation", inc, "step", step, "train_loss", tl, "tokens", step * 1000,
                                 "step_ms", 10, "clock_skew_ms", 0));
            }
        if (t % 500 == 0 && t >= 1000 && !(t >= o->gap_from && t < o->gap_to)) {
            int f = (t / 500) % 2;
            json_t *parts = json_array();
            for (int l = 0; l < 4; l++) {
                if (l == 2 && !contributes2(o, t))
                    continue;
                int inc = l == 2 && t >= REJOIN_T ? 2 : 1;
                add(t - 5, json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:i}", "type", "contribution",
                                     "learner", l, "incarnation", inc, "fragment", f, "base_version", v[f],
                                     "tokens", 100000, "steps", 100, "encoding", "f32", "bytes", 4000));
                json_array_append_new(parts,
                                      json_pack("{s:i, s:i, s:f, s:i, s:i}", "learner", l, "incarnation", inc,
                                                "weight", 1.0, "tokens", 100000, "steps", 100));
            }
            v[f]++;
            add(t, json_pack("{s:s, s:i, s:i, s:o, s:i, s:f, s:s}", "type", "merge", "fragment", f, "version",
                             v[f], "participants", parts, "grace_ms", 0, "update_norm", 0.1, "mode",
                             "decoupled"));
            /* merged tokens grow 10 per ms of the run */
            json_t *ev = json_pack("{s:s, s:f, s:i, s:i}", "type", "eval", "loss", loss_at(o, t), "merges", 0,
                                   "tokens", (t + 1) * 10);
            if (o->nan_eval && t == 20000)
                json_object_set_new(ev, "loss", o->nan_eval == 1 ? json_null() : json_real(-1.0));
            add(t + 1, ev);
        }
    }
    /* Sort by time (stable), number them. */
    size_t n = json_array_size(all);
    json_t **evs = calloc(n, sizeof(json_t *));
    for (size_t i = 0; i < n; i++) {
        evs[i] = json_array_get(all, i);
        json_object_set_new(evs[i], "_i", json_integer((json_int_t)i));
    }
    qsort(evs, n, sizeof(json_t *), by_time);
    hyp_history *h = hyp_history_new(4, 1);
    char err[CX_ERRLEN];
    for (size_t i = 0; i < n; i++) {
        json_object_del(evs[i], "_i");
        json_object_set_new(evs[i], "seq", json_integer((json_int_t)i + 1));
        cr_assert_eq(hyp_history_add_syncer_event(h, evs[i], err, sizeof(err)), 0, "%s", err);
    }
    free(evs);
    json_decref(all);
    json_t *rec =
        json_pack("{s:s, s:s, s:n, s:{s:s, s:i}, s:i, s:f, s:i, s:s, s:s, s:i, s:i, s:{s:s, s:i}, s:s, s:n}",
                  "id", "f1", "type", "kill", "target", "params", "signal", "KILL", "restart_after_ms", 5000,
                  "duration_ms", HEAL_T - KILL_T, "toxicity", 1.0, "seed", 1, "state", "expired",
                  "created_real", "2026-12-02T12:00:10.000Z", "started_mono_ms", KILL_T, "ended_mono_ms",
                  HEAL_T, "evidence", "signal", "KILL", "pid", 1234, "revert_reason", "expiry", "error");
    cr_assert_eq(hyp_history_add_fault(h, 2, rec, err, sizeof(err)), 0, "%s", err);
    json_decref(rec);
    return h;
}

static hyp_verdict judge(const hyp_history *h, const char *spec_json)
{
    json_error_t je;
    json_t *spec = json_loads(spec_json, 0, &je);
    cr_assert_not_null(spec, "%s", je.text);
    jv_diag *d = jv_diag_new();
    hyp_spec *s = hyp_spec_parse(spec, "$.verify[0]", 4, d);
    for (size_t i = 0; i < jv_diag_count(d); i++)
        fprintf(stderr, "diag: %s\n", jv_diag_get(d, i));
    cr_assert_not_null(s, "spec %s rejected", spec_json);
    hyp_verdict v;
    hyp_spec_eval(s, h, &v);
    hyp_spec_free(s);
    jv_diag_free(d);
    json_decref(spec);
    fprintf(stderr, "%s -> %s %g %s %g %s: %s\n", spec_json, hyp_status_name(v.status), v.measured, v.cmp,
            v.threshold, v.unit, v.explanation);
    return v;
}

/* Judge spec_json on h; the verdict must have status want. The verdict is
 * returned for the figure and explanation checks that follow. */
static hyp_verdict expect(const hyp_history *h, const char *spec_json, hyp_status want)
{
    hyp_verdict v = judge(h, spec_json);
    cr_assert_eq(v.status, want, "expected %s: %s", hyp_status_name(want), v.explanation);
    return v;
}

/* expect() on a history built from o alone (built, judged, freed). */
static hyp_verdict expect_run(opts o, const char *spec_json, hyp_status want)
{
    hyp_history *h = build(&o);
    hyp_verdict v = expect(h, spec_json, want);
    hyp_history_free(h);
    return v;
}

/* ---- registry and params ---- */

Test(hypothesis, registry_has_every_design_hypothesis)
{
    const char *names[] = {"loss_continuity", "loss_target", "reintegration",      "no_global_downtime",
                           "goodput",         "bandwidth",   "versions_monotonic", "data_accounting",
                           "fault_effective", "rejoin_time"};
    int n = 0;
    for (const hypothesis *const *p = hyp_table; *p; p++)
        n++;
    cr_assert_eq(n, 10);
    for (size_t i = 0; i < 10; i++) {
        const hypothesis *k = hyp_find(names[i]);
        cr_assert_not_null(k, "%s", names[i]);
        char params[512];
        param_line(k->params, params, sizeof params);
        cr_assert(strlen(k->summary) > 10 && strlen(params) > 3);
    }
    cr_assert_null(hyp_find("vibes"));
}

Test(hypothesis, params_are_strict)
{
    const char *bad[][2] = {
        {"{\"hypothesis\": \"loss_target\", \"max\": 3, \"tol\": 0.1}", "$.v: expected exactly one of max"},
        {"{\"hypothesis\": \"loss_target\"}", "$.v: expected exactly one of max"},
        {"{\"hypothesis\": \"reintegration\", \"learner\": 4, \"join_s\": 1, \"merged_s\": 1}",
         "$.v.learner: expected a learner id in 0..3, got 4"},
        {"{\"hypothesis\": \"goodput\", \"min\": 1.5}",
         "$.v.min: expected a goodput ratio in [0, 1], got 1.5"},
        {"{\"hypothesis\": \"goodput\", \"min\": 0.5, \"min_rel\": 0.5}", "$.v: expected exactly one of min"},
        {"{\"hypothesis\": \"goodput\"}", "$.v: expected exactly one of min"},
        {"{\"hypothesis\": \"goodput\", \"min\": 0.5, \"ref_s\": 3}", "$.v: expected ref_s only together"},
        {"{\"hypothesis\": \"goodput\", \"min\": 0.5, \"basis\": \"bytes\"}", "$.v.basis: "},
        {"{\"hypothesis\": \"goodput\", \"min\": 0.5, \"basis\": \"time\", \"step_ms\": 5}",
         "$.v: expected step_ms only with basis \"steps\""},
        {"{\"hypothesis\": \"loss_target\", \"max\": 3, \"max_rel\": 0.5}",
         "$.v: expected exactly one of max"},
        {"{\"hypothesis\": \"loss_target\", \"max_rel\": 0}", "$.v.max_rel: expected a ratio to the first"},
        {"{\"hypothesis\": \"loss_target\", \"max\": 3, \"by_s\": 3, \"by_tokens\": 5}",
         "$.v: expected at most one of by_s and by_tokens"},
        {"{\"hypothesis\": \"loss_target\", \"max\": 3, \"by_tokens\": 0}",
         "$.v.by_tokens: expected a number of merged tokens"},
        {"{\"hypothesis\": \"versions_monotonic\", \"x\": 1}", "$.v.x: unknown key"},
        {"{\"hypothesis\": \"no_global_downtime\"}", "$.v.max_gap_s: missing required key"},
        {"{\"hypothesis\": \"bandwidth\", \"max\": \"lots\"}", "$.v.max: expected bytes per token"},
        {"{\"hypothesis\": \"fault_effective\", \"allow_none\": 1}",
         "$.v.allow_none: expected true or false, got 1"},
        {"{\"hypothesis\": \"data_accounting\", \"slack_steps\": -1}",
         "$.v.slack_steps: expected inner steps >= 0"},
        {"{\"hypothesis\": \"loss_continuity\", \"max_jump_rel\": 0.1, \"recover_s\": 1, \"name\": \"\"}",
         "$.v.name: expected a non-empty string"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *spec = json_loads(bad[i][0], 0, NULL);
        jv_diag *d = jv_diag_new();
        hyp_spec *s = hyp_spec_parse(spec, "$.v", 4, d);
        cr_assert_null(s, "accepted: %s", bad[i][0]);
        int found = 0;
        for (size_t k = 0; k < jv_diag_count(d); k++)
            found |= strncmp(jv_diag_get(d, k), bad[i][1], strlen(bad[i][1])) == 0;
        cr_assert(found, "%s: no message starting with %s (first: %s)", bad[i][0], bad[i][1],
                  jv_diag_get(d, 0));
        jv_diag_free(d);
        json_decref(spec);
    }
}

/* ---- one test per hypothesis ---- */

Test(hypothesis, loss_continuity)
{
    const char *spec = "{\"hypothesis\": \"loss_continuity\", \"max_jump_rel\": 0.1, \"recover_s\": 5}";
    hyp_verdict v = expect_run(plain, spec, HYP_PASS);
    cr_assert_float_eq(v.measured, 0.0, 1e-9, "the loss only fell");
    cr_assert_float_eq(v.threshold, 0.1, 1e-12);

    v = expect_run((opts){.spike = 1}, spec, HYP_FAIL);
    /* Reference: the eval at 10.001 s is after the kill, so the last one
     * before it is at 9.501 s; peak: the first spiked eval at 10.001 s. */
    double ref = 5.0 * exp(-9500 / 20000.0) + 1.5, peak = (5.0 * exp(-10000 / 20000.0) + 1.5) * 1.5;
    cr_assert_float_eq(v.measured, peak / ref - 1.0, 1e-6);

    for (int how = 1; how <= 2; how++) {
        v = expect_run((opts){.nan_eval = how}, spec, HYP_FAIL);
        cr_assert(strstr(v.explanation, "not finite") != NULL);
    }
}

Test(hypothesis, loss_target)
{
    hyp_history *h = build(&plain);
    double final = 5.0 * exp(-END_T / 20000.0) + 1.5;
    hyp_verdict v = expect(h, "{\"hypothesis\": \"loss_target\", \"max\": 3.0}", HYP_PASS);
    cr_assert_float_eq(v.measured, final, 1e-9);
    v = expect(h, "{\"hypothesis\": \"loss_target\", \"max\": 2.0}", HYP_FAIL);
    cr_assert_float_eq(v.measured, final, 1e-9);
    /* by_s: the lowest eval within 5 s of the start (t=4.501 s). */
    v = expect(h, "{\"hypothesis\": \"loss_target\", \"max\": 5.5, \"by_s\": 5}", HYP_PASS);
    cr_assert_float_eq(v.measured, 5.0 * exp(-4500 / 20000.0) + 1.5, 1e-9);
    v = expect(h, "{\"hypothesis\": \"loss_target\", \"max\": 5.0, \"by_s\": 5}", HYP_FAIL);
    /* Relative to a control run: from params, then from the runner. */
    v = expect(h, "{\"hypothesis\": \"loss_target\", \"tol\": 0.05, \"control\": 2.55}", HYP_PASS);
    cr_assert_float_eq(v.threshold, 2.55 * 1.05, 1e-9);
    v = judge(h, "{\"hypothesis\": \"loss_target\", \"tol\": 0.01}");
    cr_assert_eq(v.status, HYP_ERROR, "no control loss: cannot judge");
    hyp_history_set_counter(h, HYP_C_CONTROL_LOSS, 2.0);
    v = expect(h, "{\"hypothesis\": \"loss_target\", \"tol\": 0.01}", HYP_FAIL);
    cr_assert_float_eq(v.threshold, 2.02, 1e-9);
    /* max_rel: relative to the run's first eval (t=1.001 s). */
    double first = loss_at(&plain, 1000);
    v = expect(h, "{\"hypothesis\": \"loss_target\", \"max_rel\": 0.5}", HYP_PASS);
    cr_assert_float_eq(v.threshold, first * 0.5, 1e-9);
    cr_assert_float_eq(v.measured, final, 1e-9);
    v = expect(h, "{\"hypothesis\": \"loss_target\", \"max_rel\": 0.4}", HYP_FAIL);
    hyp_history_free(h);
}

Test(hypothesis, loss_target_by_tokens)
{
    hyp_history *h = build(&plain);
    /* the eval at t=4.501 s is the first to cover 45000 merged tokens */
    hyp_verdict v =
        expect(h, "{\"hypothesis\": \"loss_target\", \"max\": 5.5, \"by_tokens\": 45000}", HYP_PASS);
    cr_assert_float_eq(v.measured, loss_at(&plain, 4500), 1e-9);
    v = expect(h, "{\"hypothesis\": \"loss_target\", \"max\": 5.0, \"by_tokens\": 45000}", HYP_FAIL);
    cr_assert_float_eq(v.measured, loss_at(&plain, 4500), 1e-9);
    /* more tokens than the run merged: a pass on the way still counts ... */
    v = expect(h, "{\"hypothesis\": \"loss_target\", \"max\": 5.5, \"by_tokens\": 1000000000}", HYP_PASS);
    cr_assert(strstr(v.explanation, "reached before") != NULL, "%s", v.explanation);
    /* ... but a target not met by then cannot be judged */
    v = judge(h, "{\"hypothesis\": \"loss_target\", \"max\": 1.0, \"by_tokens\": 1000000000}");
    cr_assert_eq(v.status, HYP_ERROR, "%s", v.explanation);
    cr_assert(strstr(v.explanation, "run ended before an eval covered 1000000000 merged tokens") != NULL,
              "%s", v.explanation);
    hyp_history_free(h);
}

Test(hypothesis, reintegration)
{
    const char *spec = "{\"hypothesis\": \"reintegration\", \"learner\": 2, \"join_s\": 2, \"merged\": 3, "
                       "\"merged_s\": 10, \"tol\": 0.05}";
    hyp_verdict v = expect_run(plain, spec, HYP_PASS);
    /* Merges in [16 s, 25.5 s] carrying learner 2 incarnation 2: 20. */
    cr_assert_float_eq(v.measured, 20.0, 1e-9);
    cr_assert_float_eq(v.threshold, 3.0, 1e-9);

    v = expect_run((opts){.skip_pull = 1}, spec, HYP_FAIL);
    cr_assert(strstr(v.explanation, "1 of 2 fragments not pulled") != NULL, "%s", v.explanation);

    v = expect_run((opts){.no_rejoin = 1}, spec, HYP_FAIL);
    cr_assert_float_eq(v.measured, 0.0, 1e-9);
    cr_assert(strstr(v.explanation, "never joined again") != NULL);

    /* Joined 0.5 s after healing: a 0.2 s limit fails. */
    hyp_history *h = build(&plain);
    v = expect(h, "{\"hypothesis\": \"reintegration\", \"learner\": 2, \"join_s\": 0.2, \"merged_s\": 10}",
               HYP_FAIL);
    cr_assert(strstr(v.explanation, "joined 0.5s after") != NULL, "%s", v.explanation);
    /* No fault on learner 1: cannot be judged. */
    v = judge(h, "{\"hypothesis\": \"reintegration\", \"learner\": 1, \"join_s\": 2, \"merged_s\": 10}");
    cr_assert_eq(v.status, HYP_ERROR);
    hyp_history_free(h);
}

/* The train-loss check compares means over the last 10 heartbeats: one
 * outlying step loss (x1.5 in the very last heartbeat) moves the mean 5 %,
 * inside tol 0.10; every heartbeat x1.5 is 50 % off and fails. */
Test(hypothesis, reintegration_train_loss_is_a_mean)
{
    const char *spec = "{\"hypothesis\": \"reintegration\", \"learner\": 2, \"join_s\": 2, \"merged\": 3, "
                       "\"merged_s\": 10, \"tol\": 0.10}";
    hyp_verdict v = expect_run((opts){.loss2 = 1}, spec, HYP_PASS);
    cr_assert(strstr(v.explanation, "train loss") != NULL, "%s", v.explanation);
    v = expect_run((opts){.loss2 = 2}, spec, HYP_FAIL);
    cr_assert(strstr(v.explanation, "50.0% away") != NULL, "%s", v.explanation);
}

Test(hypothesis, no_global_downtime)
{
    hyp_verdict v = expect_run(plain, "{\"hypothesis\": \"no_global_downtime\", \"max_gap_s\": 1}", HYP_PASS);
    cr_assert_float_eq(v.measured, 0.5, 1e-9);

    opts o = {.gap_from = 12000, .gap_to = 20000};
    hyp_history *h = build(&o);
    v = expect(h, "{\"hypothesis\": \"no_global_downtime\", \"max_gap_s\": 5}", HYP_FAIL);
    cr_assert_float_eq(v.measured, 8.5, 1e-9, "11.5 s -> 20 s with 3 of 4 alive (K=1)");
    /* With a floor of 4 live learners, the time learner 2 was down
     * (10 s .. its join at 15.5 s) is excused: 8.5 - 4.0 = 4.5 s. */
    v = expect(h, "{\"hypothesis\": \"no_global_downtime\", \"max_gap_s\": 5, \"min_live\": 4}", HYP_PASS);
    cr_assert_float_eq(v.measured, 4.5, 1e-9);
    hyp_history_free(h);
}

Test(hypothesis, goodput)
{
    hyp_history *h = build(&plain);
    /* Useful steps: learners 0, 1, 3 in 59 merges x 100 steps / 2
     * fragments = 2950 each; learner 2: 18 merges before the kill + 29
     * after its rejoin = 2350. x 10 ms. Allocated: 4 x (30.001 - 0.1) s. */
    double useful = (3 * 2950 + 2350) * 0.010, allocated = 4 * (30.001 - 0.1);
    hyp_verdict v = expect(h, "{\"hypothesis\": \"goodput\", \"min\": 0.9}", HYP_PASS);
    cr_assert_float_eq(v.measured, useful / allocated, 1e-9);
    v = expect(h, "{\"hypothesis\": \"goodput\", \"min\": 0.95}", HYP_FAIL);
    cr_assert_float_eq(v.measured, useful / allocated, 1e-9);
    /* min_rel: reference phase from the first join (0.1 s) to the kill
     * (10 s): 18 merges x 4 participants x 100 steps / 2 fragments x 10 ms.
     * After it, to the end (30.001 s): 41 merges with 3 participants plus
     * learner 2 in the 29 from 16 s on. The reference phase holds the
     * start-up before the first merge, so the rest scores higher here. */
    double g_ref = 18 * 4 * 50 * 0.010 / (4 * 9.9), g_rest = (41 * 3 + 29) * 50 * 0.010 / (4 * 20.001);
    v = expect(h, "{\"hypothesis\": \"goodput\", \"min_rel\": 0.8}", HYP_PASS);
    cr_assert_float_eq(v.measured, g_rest / g_ref, 1e-9);
    v = expect(h, "{\"hypothesis\": \"goodput\", \"min_rel\": 1.1}", HYP_FAIL);
    /* ref_s: the reference phase is the first 5 s after the first join */
    g_ref = 9 * 4 * 50 * 0.010 / (4 * 5.0);
    g_rest = (9 * 4 + 12 * 3 + 29 * 4) * 50 * 0.010 / (4 * 24.901);
    v = expect(h, "{\"hypothesis\": \"goodput\", \"min_rel\": 0.5, \"ref_s\": 5}", HYP_PASS);
    cr_assert_float_eq(v.measured, g_rest / g_ref, 1e-9);
    /* a reference phase that does not fit the run cannot be judged */
    v = judge(h, "{\"hypothesis\": \"goodput\", \"min_rel\": 0.5, \"ref_s\": 40}");
    cr_assert_eq(v.status, HYP_ERROR, "%s", v.explanation);
    hyp_history_free(h);
}

/* basis "time": a learner's time up to a merged contribution of a
 * fragment (since its join or its previous contribution of it), 1/2 per
 * fragment; contributions come 5 ms before their merges (f0 at 0.995 s,
 * 1.995 s, ..., f1 at 1.495 s, ...). */
Test(hypothesis, goodput_time_basis)
{
    hyp_history *h = build(&plain);
    /* learners 0, 1, 3: joined at 0.1 s, last contributions at 29.995 s
     * (f0) and 29.495 s (f1). Learner 2: the same until its kill at 10 s
     * (f0 at 8.995 s, f1 at 9.495 s), nothing while down, then from its
     * rejoin at 15.5 s to 29.995 / 29.495 s. What it trained after its last
     * contributions until the kill never reached a merge. */
    double each = (29.895 + 29.395) / 2, l2 = (8.895 + 9.395 + 14.495 + 13.995) / 2;
    double allocated = 4 * (30.001 - 0.1);
    hyp_verdict v = expect(h, "{\"hypothesis\": \"goodput\", \"basis\": \"time\", \"min\": 0.9}", HYP_PASS);
    cr_assert_float_eq(v.measured, (3 * each + l2) / allocated, 1e-9);
    cr_assert(strstr(v.explanation, "covered by merged contributions"), "%s", v.explanation);
    /* min_rel: each phase counts the time spent in it; the contributions
     * merged after the kill at 10 s (10.495 s, 10.995 s) bring time from
     * both phases */
    double g_ref = (3 * 9.9 + (8.895 + 9.395) / 2) / (4 * 9.9);
    double g_rest = (3 * (19.995 + 19.495) / 2 + (14.495 + 13.995) / 2) / (4 * 20.001);
    v = expect(h, "{\"hypothesis\": \"goodput\", \"basis\": \"time\", \"min_rel\": 0.9}", HYP_PASS);
    cr_assert_float_eq(v.measured, g_rest / g_ref, 1e-9);

    /* a pause on learner 1 from 20 s to 22 s: those 2 s of each fragment's
     * time are not useful, though its next contributions merged */
    json_t *rec =
        json_pack("{s:s, s:s, s:s, s:{}, s:i, s:n, s:i, s:s, s:s, s:i, s:i, s:{s:s}, s:s, s:n}", "id", "f2",
                  "type", "pause", "target", "unit", "params", "duration_ms", 2000, "toxicity", "seed", 2,
                  "state", "expired", "created_real", "2026-12-02T12:00:20.000Z", "started_mono_ms", 20000,
                  "ended_mono_ms", 22000, "evidence", "via", "SIGSTOP", "revert_reason", "expiry", "error");
    char err[CX_ERRLEN];
    cr_assert_eq(hyp_history_add_fault(h, 1, rec, err, sizeof(err)), 0, "%s", err);
    json_decref(rec);
    v = expect(h, "{\"hypothesis\": \"goodput\", \"basis\": \"time\", \"min\": 0.9}", HYP_PASS);
    cr_assert_float_eq(v.measured, (3 * each + l2 - 2.0) / allocated, 1e-9);
    hyp_history_free(h);

    /* no contribution events (ddp): this basis cannot tell waiting from work */
    h = hyp_history_new(2, 1);
    json_t *evs[] = {
        json_pack("{s:s, s:i, s:i, s:i}", "type", "join", "learner", 0, "incarnation", 1, "seq", 1),
        json_pack("{s:s, s:i, s:i, s:i}", "type", "join", "learner", 1, "incarnation", 1, "seq", 2),
        json_pack("{s:s, s:i, s:i, s:[{s:i, s:i, s:i}], s:i}", "type", "merge", "fragment", -1, "version", 1,
                  "participants", "learner", 0, "incarnation", 1, "steps", 1, "seq", 3),
    };
    for (int i = 0; i < 3; i++) {
        json_object_set_new(evs[i], "t_mono_ms", json_integer(1000 * (i + 1)));
        cr_assert_eq(hyp_history_add_syncer_event(h, evs[i], err, sizeof(err)), 0, "%s", err);
        json_decref(evs[i]);
    }
    v = judge(h, "{\"hypothesis\": \"goodput\", \"basis\": \"time\", \"min\": 0.5}");
    cr_assert_eq(v.status, HYP_ERROR, "%s", v.explanation);
    cr_assert(strstr(v.explanation, "contribution events"), "%s", v.explanation);
    hyp_history_free(h);
}

Test(hypothesis, bandwidth)
{
    hyp_history *h = build(&plain);
    /* Without syncer counters: contribution bytes / max heartbeat tokens. */
    double contributions = 3 * 59 + 18 + 29;
    double tokens = 3 * 3000000.0 + (800 + 1450) * 1000.0;
    hyp_verdict v = expect(h, "{\"hypothesis\": \"bandwidth\", \"max\": 0.1}", HYP_PASS);
    cr_assert_float_eq(v.measured, contributions * 4000 / tokens, 1e-9);
    cr_assert(strstr(v.explanation, "contribution payloads only") != NULL);
    hyp_history_set_counter(h, HYP_C_BYTES_IN, 1.5e6);
    hyp_history_set_counter(h, HYP_C_BYTES_OUT, 0.5e6);
    hyp_history_set_counter(h, HYP_C_TOKENS, 1e6);
    v = expect(h, "{\"hypothesis\": \"bandwidth\", \"max\": 1.5}", HYP_FAIL);
    cr_assert_float_eq(v.measured, 2.0, 1e-12);
    hyp_history_free(h);
}

Test(hypothesis, versions_monotonic)
{
    const char *spec = "{\"hypothesis\": \"versions_monotonic\"}";
    hyp_verdict v = expect_run(plain, spec, HYP_PASS);
    cr_assert_float_eq(v.measured, 0.0, 1e-12);

    v = expect_run((opts){.restart_at0 = 1}, spec, HYP_FAIL);
    /* Both fragments restart at 0, then each later merge re-issues a
     * version already seen: 2 + the merges of [20 s, 30 s] up to where
     * they catch up again. At least the two restarts. */
    cr_assert_geq(v.measured, 2.0);
    cr_assert(strstr(v.explanation, "restarted at version 0") != NULL, "%s", v.explanation);

    /* A gap in seq is a violation too. */
    hyp_history *h = hyp_history_new(1, 1);
    char err[CX_ERRLEN];
    json_t *a = json_pack("{s:i, s:i, s:s, s:i, s:i, s:[]}", "seq", 1, "t_mono_ms", 1, "type", "merge",
                          "fragment", 0, "version", 1, "participants");
    json_t *b = json_pack("{s:i, s:i, s:s, s:i, s:i, s:[]}", "seq", 3, "t_mono_ms", 2, "type", "merge",
                          "fragment", 0, "version", 2, "participants");
    hyp_history_add_syncer_event(h, b, err, sizeof(err));
    hyp_history_add_syncer_event(h, a, err, sizeof(err)); /* out of order: sorted by seq */
    v = expect(h, spec, HYP_FAIL);
    cr_assert_float_eq(v.measured, 1.0, 1e-12);
    cr_assert(strstr(v.explanation, "seq 3 follows 1") != NULL, "%s", v.explanation);
    json_decref(a);
    json_decref(b);
    hyp_history_free(h);

    /* A syncer whose checkpoints were corrupt starts at versions 0 but
     * serves only after its rebuild from the learners: the rebuilt
     * versions must be above what was published, the start's are not. */
    for (int bad = 0; bad <= 1; bad++) {
        h = hyp_history_new(1, 1);
        json_t *evs[] = {json_pack("{s:i, s:i, s:s, s:i, s:i, s:[]}", "seq", 1, "t_mono_ms", 1, "type",
                                   "merge", "fragment", 0, "version", 7, "participants"),
                         json_pack("{s:i, s:i, s:s, s:s, s:[i]}", "seq", 2, "t_mono_ms", 2, "type", "start",
                                   "start_state", "corrupt", "versions", 0),
                         json_pack("{s:i, s:i, s:s, s:s, s:[{s:i, s:s, s:i}]}", "seq", 3, "t_mono_ms", 3,
                                   "type", "rebuild", "start_state", "corrupt", "fragments", "fragment", 0,
                                   "from", "learner", "version", bad ? 5 : 12),
                         json_pack("{s:i, s:i, s:s, s:i, s:i, s:[]}", "seq", 4, "t_mono_ms", 4, "type",
                                   "merge", "fragment", 0, "version", bad ? 6 : 13, "participants")};
        for (int k = 0; k < 4; k++) {
            cr_assert_eq(hyp_history_add_syncer_event(h, evs[k], err, sizeof(err)), 0, "%s", err);
            json_decref(evs[k]);
        }
        v = expect(h, spec, bad ? HYP_FAIL : HYP_PASS);
        if (bad)
            cr_assert(strstr(v.explanation, "rebuilt at version 5 after reaching 7") != NULL, "%s",
                      v.explanation);
        hyp_history_free(h);
    }
}

Test(hypothesis, data_accounting)
{
    hyp_history *h = build(&plain);
    hyp_history_set_counter(h, HYP_C_STEPS_TARGET, 3000);
    /* Learner 2 ended at step 2250 by its heartbeats: 750 steps short. */
    hyp_verdict v = expect(h, "{\"hypothesis\": \"data_accounting\"}", HYP_FAIL);
    cr_assert_float_eq(v.measured, 750 * 1000.0, 1e-6);
    /* The runner saw it finish (final status): nothing lost; 100 steps
     * (900 reached before the kill - 800 resumed) re-trained. */
    hyp_history_set_learner_final(h, 2, 3000, 3000000);
    v = expect(h, "{\"hypothesis\": \"data_accounting\"}", HYP_PASS);
    cr_assert_float_eq(v.measured, 0.0, 1e-12);
    cr_assert(strstr(v.explanation, "100 steps (100000 tokens) re-trained") != NULL, "%s", v.explanation);
    v = expect(h, "{\"hypothesis\": \"data_accounting\", \"max_retrained_tokens\": 50000}", HYP_FAIL);
    hyp_history_free(h);

    /* A checkpoint from beyond what was trained skips data. */
    h = build(&(opts){.resumed_step = 1000});
    hyp_history_set_learner_final(h, 2, 3000, 3000000);
    v = expect(h, "{\"hypothesis\": \"data_accounting\", \"steps\": 3000}", HYP_FAIL);
    cr_assert_float_eq(v.measured, 100 * 1000.0, 1e-6, "steps 900..1000 never trained");
    hyp_history_free(h);
}

Test(hypothesis, fault_effective)
{
    hyp_history *h = build(&plain);
    hyp_verdict v = expect(h, "{\"hypothesis\": \"fault_effective\"}", HYP_PASS);
    cr_assert_float_eq(v.measured, 1.0, 1e-12);
    char err[CX_ERRLEN];
    /* A nan fault the syncer never rejected did not take effect. */
    json_t *nan = json_pack("{s:s, s:s, s:{s:i}, s:i, s:s, s:i, s:i, s:{s:s}}", "id", "f2", "type", "nan",
                            "params", "count", 1, "duration_ms", 1000, "state", "expired", "started_mono_ms",
                            20000, "ended_mono_ms", 21000, "evidence", "hook_file", "1");
    cr_assert_eq(hyp_history_add_fault(h, 1, nan, err, sizeof(err)), 0);
    v = expect(h, "{\"hypothesis\": \"fault_effective\"}", HYP_FAIL);
    cr_assert_float_eq(v.measured, 0.5, 1e-12);
    cr_assert(strstr(v.explanation, "no nonfinite reject") != NULL, "%s", v.explanation);
    hyp_history_free(h);

    h = build(&plain);
    json_t *rej = json_pack("{s:i, s:i, s:s, s:i, s:i, s:i, s:s}", "seq", 100000, "t_mono_ms", 20100, "type",
                            "reject", "learner", 1, "incarnation", 1, "fragment", 0, "reason", "nonfinite");
    cr_assert_eq(hyp_history_add_syncer_event(h, rej, err, sizeof(err)), 0);
    cr_assert_eq(hyp_history_add_fault(h, 1, nan, err, sizeof(err)), 0);
    v = expect(h, "{\"hypothesis\": \"fault_effective\"}", HYP_PASS);
    /* A failed injection recorded by the harness counts against it. */
    json_t *act = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s}", "kind", "action", "phase", "fail", "action",
                            "pause-1", "fault", "pause", "learner", 0, "error", "agent unreachable");
    cr_assert_eq(hyp_history_add_action(h, act, err, sizeof(err)), 0);
    v = expect(h, "{\"hypothesis\": \"fault_effective\"}", HYP_FAIL);
    cr_assert_float_eq(v.measured, 2.0 / 3.0, 1e-12);
    json_decref(act);
    json_decref(rej);
    json_decref(nan);
    hyp_history_free(h);

    /* Nothing injected: fails unless allowed. */
    h = hyp_history_new(2, 1);
    v = expect(h, "{\"hypothesis\": \"fault_effective\"}", HYP_FAIL);
    v = expect(h, "{\"hypothesis\": \"fault_effective\", \"allow_none\": true}", HYP_PASS);
    hyp_history_free(h);
}

Test(hypothesis, rejoin_time)
{
    hyp_history *h = build(&plain);
    /* Healed at 15 s, rejoined at 15.5 s, first merged contribution at 16 s. */
    hyp_verdict v = expect(h, "{\"hypothesis\": \"rejoin_time\", \"max_s\": 2}", HYP_PASS);
    cr_assert_float_eq(v.measured, 1.0, 1e-9);
    cr_assert_float_eq(v.threshold, 2.0, 1e-9);
    cr_assert(strstr(v.explanation, "learner 2 after the kill fault healed at t=15.0 s of the run") != NULL,
              "%s", v.explanation);
    v = expect(h, "{\"hypothesis\": \"rejoin_time\", \"max_s\": 0.5}", HYP_FAIL);
    cr_assert_float_eq(v.measured, 1.0, 1e-9);
    /* No kill on learner 1: cannot be judged. */
    v = judge(h, "{\"hypothesis\": \"rejoin_time\", \"max_s\": 2, \"learner\": 1}");
    cr_assert_eq(v.status, HYP_ERROR);
    hyp_history_free(h);

    v = expect_run((opts){.no_rejoin = 1}, "{\"hypothesis\": \"rejoin_time\", \"max_s\": 60}", HYP_FAIL);
    cr_assert(strstr(v.explanation, "1 of 1 restarted learners never had a contribution merged") != NULL,
              "%s", v.explanation);

    /* Its window: max_s after the last heal (of its learner when named). */
    json_t *spec = json_loads("{\"hypothesis\": \"rejoin_time\", \"max_s\": 2.5, \"learner\": 2}", 0, NULL);
    hz_window w;
    cr_assert_eq(horizon_window(spec, "rj", &w), 1);
    cr_assert_eq(w.len_ms, 2500);
    cr_assert_eq(w.learner, 2);
    cr_assert_str_eq(w.key, "max_s");
    json_decref(spec);
}

/* measure() is the figure eval() reports: for every kind, on a history
 * where it passes and one where it fails. Every registered kind must be
 * listed here. */
Test(hypothesis, measure_is_the_judged_figure)
{
    static const char *const specs[] = {
        "{\"hypothesis\": \"loss_continuity\", \"max_jump_rel\": 0.1, \"recover_s\": 5}",
        "{\"hypothesis\": \"loss_target\", \"max\": 3.0}",
        "{\"hypothesis\": \"loss_target\", \"max_rel\": 0.5, \"by_s\": 10}",
        "{\"hypothesis\": \"reintegration\", \"learner\": 2, \"join_s\": 2, \"merged_s\": 10}",
        "{\"hypothesis\": \"no_global_downtime\", \"max_gap_s\": 1}",
        "{\"hypothesis\": \"goodput\", \"min\": 0.5}",
        "{\"hypothesis\": \"goodput\", \"min_rel\": 0.5}",
        "{\"hypothesis\": \"goodput\", \"min\": 0.5, \"basis\": \"time\"}",
        "{\"hypothesis\": \"bandwidth\", \"max\": 1.0}",
        "{\"hypothesis\": \"versions_monotonic\"}",
        "{\"hypothesis\": \"data_accounting\", \"steps\": 3000}",
        "{\"hypothesis\": \"fault_effective\"}",
        "{\"hypothesis\": \"rejoin_time\", \"max_s\": 2}",
    };
    const size_t n = sizeof specs / sizeof specs[0];
    opts hist[] = {{0}, {.spike = 1, .gap_from = 12000, .gap_to = 18000, .no_rejoin = 1, .restart_at0 = 1}};
    for (size_t k = 0; k < 2; k++) {
        hyp_history *h = build(&hist[k]);
        for (size_t i = 0; i < n; i++) {
            json_t *spec = json_loads(specs[i], 0, NULL);
            hyp_spec *s = hyp_spec_parse(spec, "$", 4, NULL);
            cr_assert_not_null(s, "%s", specs[i]);
            hyp_verdict v;
            hyp_spec_eval(s, h, &v);
            double x = hyp_spec_measure(s, h);
            if (v.status != HYP_ERROR) {
                if (isnan(v.measured))
                    cr_assert(isnan(x), "%s: measure %g, eval NaN", specs[i], x);
                else
                    cr_assert_float_eq(x, v.measured, 1e-12, "%s: measure %g, eval %g", specs[i], x,
                                       v.measured);
            }
            hyp_spec_free(s);
            json_decref(spec);
        }
        hyp_history_free(h);
    }
    for (const hypothesis *const *p = hyp_table; *p; p++) {
        cr_assert_not_null((*p)->measure, "%s has no measure", (*p)->name);
        char want[64];
        snprintf(want, sizeof want, "\"hypothesis\": \"%s\"", (*p)->name);
        int listed = 0;
        for (size_t i = 0; i < n; i++)
            listed |= strstr(specs[i], want) != NULL;
        cr_assert(listed, "%s is not in measure_is_the_judged_figure's list", (*p)->name);
    }
}

/* The runner's summary figures (hyp_measure, default params) are what the
 * hypotheses judge with those defaults. */
Test(hypothesis, default_figures)
{
    hyp_history *h = build(&plain);
    hyp_history_set_counter(h, HYP_C_BYTES_IN, 1e6);
    hyp_history_set_counter(h, HYP_C_BYTES_OUT, 3e6);
    hyp_verdict g = judge(h, "{\"hypothesis\": \"goodput\", \"min\": 0}");
    hyp_verdict b = judge(h, "{\"hypothesis\": \"bandwidth\", \"max\": 1e12}");
    hyp_verdict n = judge(h, "{\"hypothesis\": \"no_global_downtime\", \"max_gap_s\": 1e7}");
    cr_assert_float_eq(hyp_measure("goodput", h), g.measured, 1e-12);
    cr_assert_float_eq(hyp_measure("bandwidth", h), b.measured, 1e-12);
    cr_assert_float_eq(hyp_measure("no_global_downtime", h), n.measured, 1e-12);
    cr_assert(g.measured > 0 && b.measured > 0 && n.measured > 0);
    cr_assert(isnan(hyp_measure("vibes", h)));
    /* a figure that needs a param without a default has none */
    cr_assert(isnan(hyp_measure("reintegration", h)));
    hyp_history_free(h);
}

/* docs/experiment.schema.json's hypothesis entries: one per registered
 * hypothesis, each with exactly the keys its table entry accepts (the
 * entries are generated: harness/tools/params_docs.c, test docs/params). */
Test(hypothesis, schema_matches_the_registry)
{
    json_error_t je;
    json_t *schema = json_load_file(CHAOSLOCO_SRC "/docs/experiment.schema.json", 0, &je);
    cr_assert_not_null(schema, "%s", je.text);
    json_t *alts = json_object_get(json_object_get(json_object_get(schema, "$defs"), "hypothesis"), "oneOf");
    cr_assert(json_is_array(alts));
    int nreg = 0;
    for (const hypothesis *const *p = hyp_table; *p; p++)
        nreg++;
    cr_assert_eq((int)json_array_size(alts), nreg, "schema lists %zu hypotheses, the registry %d",
                 json_array_size(alts), nreg);
    size_t i;
    json_t *alt;
    json_array_foreach(alts, i, alt)
    {
        json_t *props = json_object_get(alt, "properties");
        const char *name = json_string_value(json_object_get(json_object_get(props, "hypothesis"), "const"));
        cr_assert_not_null(name, "schema hypothesis %zu has no const name", i);
        const hypothesis *k = hyp_find(name);
        cr_assert_not_null(k, "schema names \"%s\", which is not registered", name);
        const char *own[] = {"hypothesis", "name"};
        size_t nkeys = 2;
        for (size_t o = 0; o < 2; o++)
            cr_assert_not_null(json_object_get(props, own[o]), "%s: key %s missing from the schema", name,
                               own[o]);
        for (const param_def *key = k->params; key && key->name; key++, nkeys++)
            cr_assert_not_null(json_object_get(props, key->name), "%s: key %s missing from the schema", name,
                               key->name);
        cr_assert_eq(json_object_size(props), nkeys, "%s: the schema has %zu keys, the registry %zu", name,
                     json_object_size(props), nkeys);
        cr_assert(json_is_false(json_object_get(alt, "additionalProperties")), "%s", name);
    }
    json_decref(schema);
}

/* docs/experiments.md describes every registered hypothesis in a section
 * of its own. */
Test(hypothesis, docs_describe_every_hypothesis)
{
    FILE *f = fopen(CHAOSLOCO_SRC "/docs/experiments.md", "r");
    cr_assert_not_null(f);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    for (const hypothesis *const *p = hyp_table; *p; p++) {
        char head[80];
        snprintf(head, sizeof head, "\n### %s\n", (*p)->name);
        cr_assert(strstr(text, head) != NULL, "docs/experiments.md has no \"### %s\" section", (*p)->name);
    }
}

/* The effects the history and the live floor ask of a kind come from the
 * injector table's traits. */
Test(hypothesis, fault_kinds_by_effect)
{
    const char *down[] = {"kill", "preempt", "pause", "partition", "blackhole"};
    for (size_t i = 0; i < 5; i++)
        cr_assert(hx_kind_takes_unit_down(down[i]), "%s", down[i]);
    cr_assert(hx_kind_restarts_unit("kill") && hx_kind_restarts_unit("preempt"));
    const char *up[] = {"latency", "straggle", "nan", "clock", "corrupt", "syncer_restart", "vibes"};
    for (size_t i = 0; i < 7; i++)
        cr_assert(!hx_kind_takes_unit_down(up[i]) && !hx_kind_restarts_unit(up[i]), "%s", up[i]);
    cr_assert(!hx_kind_restarts_unit("pause") && !hx_kind_restarts_unit("partition"));
    cr_assert(!hx_kind_takes_unit_down(NULL) && !hx_kind_restarts_unit(NULL));
}

Test(hypothesis, history_rejects_malformed_input)
{
    hyp_history *h = hyp_history_new(2, 1);
    char err[CX_ERRLEN];
    json_t *bad = json_pack("{s:i, s:s}", "seq", 1, "type", "merge");
    cr_assert_eq(hyp_history_add_syncer_event(h, bad, err, sizeof(err)), CX_EINVAL);
    cr_assert(strstr(err, "t_mono_ms") != NULL);
    json_t *rec = json_pack("{s:s}", "type", "kill");
    cr_assert_eq(hyp_history_add_fault(h, 2, rec, err, sizeof(err)), CX_EINVAL, "learner out of range");
    cr_assert_eq(hyp_history_add_action(h, rec, err, sizeof(err)), CX_EINVAL, "no phase");
    json_decref(bad);
    json_decref(rec);
    hyp_history_free(h);
}
