/* test_fault_cost.c - what each fault cost, on a history made up here:
 * two learners, two fragments, a merge every 100 ms of 100 tokens per
 * participant; learner 1 is killed from 2.0 s to 4.5 s, rejoins with
 * incarnation 2 at 4.5 s and is merged again from 5.0 s. Every figure is
 * worked out by hand in the comments. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>

#include "harness/fault_cost.h"

static int64_t g_seq;

static void ev(hyp_history *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    json_t *e = json_vpack_ex(NULL, 0, fmt, ap);
    va_end(ap);
    cr_assert_not_null(e, "bad test event %s", fmt);
    json_object_set_new(e, "seq", json_integer(++g_seq));
    char err[256];
    cr_assert_eq(hyp_history_add_syncer_event(h, e, err, sizeof err), 0, "%s", err);
    json_decref(e);
}

static hyp_history *made_up_run(void)
{
    g_seq = 0;
    hyp_history *h = hyp_history_new(2, 1);
    hyp_history_set_counter(h, HYP_C_START_MONO, 0);
    hyp_history_set_counter(h, HYP_C_END_MONO, 10000);
    ev(h, "{s:s,s:I,s:[i,i]}", "type", "start", "t_mono_ms", (json_int_t)0, "versions", 0, 0);
    ev(h, "{s:s,s:I,s:i,s:i}", "type", "join", "t_mono_ms", (json_int_t)0, "learner", 0, "incarnation", 1);
    ev(h, "{s:s,s:I,s:i,s:i}", "type", "join", "t_mono_ms", (json_int_t)0, "learner", 1, "incarnation", 1);
    for (int64_t t = 0; t < 10000; t += 100) {
        if (t == 1900) /* learner 1's last heartbeat before the kill: 5000 tokens */
            ev(h, "{s:s,s:I,s:i,s:i}", "type", "heartbeat", "t_mono_ms", (json_int_t)t, "learner", 1,
               "tokens", 5000);
        if (t == 1900) /* and a contribution no merge will take */
            ev(h, "{s:s,s:I,s:i,s:i,s:i,s:i}", "type", "contribution", "t_mono_ms", (json_int_t)(t + 50),
               "learner", 1, "incarnation", 1, "fragment", 0, "tokens", 400);
        if (t == 4500) {
            ev(h, "{s:s,s:I,s:i,s:i}", "type", "join", "t_mono_ms", (json_int_t)t, "learner", 1,
               "incarnation", 2);
            /* resumed from its checkpoint at 4200 tokens: 800 trained for nothing */
            ev(h, "{s:s,s:I,s:i,s:i}", "type", "heartbeat", "t_mono_ms", (json_int_t)(t + 10), "learner", 1,
               "tokens", 4200);
        }
        int with1 = t < 2000 || t >= 5000;
        json_t *parts = json_pack("[{s:i,s:i,s:i}]", "learner", 0, "incarnation", 1, "tokens", 100);
        if (with1)
            json_array_append_new(parts, json_pack("{s:i,s:I,s:i}", "learner", 1, "incarnation",
                                                   (json_int_t)(t < 2000 ? 1 : 2), "tokens", 100));
        ev(h, "{s:s,s:I,s:I,s:o,s:i}", "type", "merge", "t_mono_ms", (json_int_t)t, "fragment",
           (json_int_t)(t / 100 % 2), "participants", parts, "tokens", with1 ? 200 : 100);
    }
    json_t *rec = json_pack("{s:s,s:s,s:s,s:i,s:i,s:i}", "id", "f-1", "type", "kill", "state", "reverted",
                            "started_mono_ms", 2000, "ended_mono_ms", 4500, "duration_ms", 2500);
    cr_assert_eq(hyp_history_add_fault(h, 1, rec, NULL, 0), 0);
    json_decref(rec);
    return h;
}

static double num(const json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    cr_assert(json_is_number(v), "%s is a number", k);
    return json_number_value(v);
}

Test(fault_cost, a_kill_and_its_rejoin)
{
    hyp_history *h = made_up_run();
    json_t *c = fault_cost_json(h);
    cr_assert_not_null(c);
    /* fault-free: [0, 2) and [5, 10) s: 70 merges x 200 tokens / P=2 over 7 s */
    cr_assert_float_eq(num(json_object_get(c, "reference"), "merged_tokens_per_s"), 1000.0, 1e-6);
    cr_assert_float_eq(num(json_object_get(c, "reference"), "span_s"), 7.0, 1e-9);
    json_t *f = json_array_get(json_object_get(c, "faults"), 0);
    cr_assert_not_null(f);
    cr_assert_str_eq(json_string_value(json_object_get(f, "type")), "kill");
    cr_assert_eq(json_integer_value(json_object_get(f, "learner")), 1);
    /* the first merge with learner 1 after the 4.5 s heal is at 5.0 s */
    cr_assert_float_eq(num(f, "time_to_rejoin_s"), 0.5, 1e-9);
    /* 30 merges in [2, 5) s, it is in every merge otherwise and in none of them */
    cr_assert_eq(json_integer_value(json_object_get(f, "merges_missed")), 30);
    cr_assert_eq(json_integer_value(json_object_get(f, "merges_in_window")), 30);
    /* the unmerged contribution (400 / P = 200) died with it; the crash lost
     * 5000 - 4200 = 800 tokens, which include it: the larger one */
    cr_assert_float_eq(num(f, "tokens_never_merged"), 800.0, 1e-9);
    /* during [2, 4.5) s: 100 / 2 per 100 ms = 500/s = 0.5 of the reference;
     * after, [4.5, 7) s: 5 merges of 50 then 20 of 100 over 2.5 s = 900/s */
    cr_assert_float_eq(num(f, "goodput_during"), 0.5, 1e-9);
    cr_assert_float_eq(num(f, "goodput_after"), 0.9, 1e-9);
    cr_assert_float_eq(num(f, "start_s"), 2.0, 1e-9);
    cr_assert_float_eq(num(f, "end_s"), 4.5, 1e-9);
    json_decref(c);
    hyp_history_free(h);
}

Test(fault_cost, no_faults_and_short_stretches)
{
    hyp_history *h = hyp_history_new(1, 1);
    json_t *c = fault_cost_json(h);
    cr_assert_eq(json_array_size(json_object_get(c, "faults")), 0);
    json_decref(c);
    /* a fault of 0.5 s: no goodput figure (too short a stretch), the rest is there */
    g_seq = 0;
    hyp_history_set_counter(h, HYP_C_START_MONO, 0);
    hyp_history_set_counter(h, HYP_C_END_MONO, 5000);
    for (int64_t t = 0; t < 5000; t += 100)
        ev(h, "{s:s,s:I,s:i,s:[{s:i,s:i}],s:i}", "type", "merge", "t_mono_ms", (json_int_t)t, "fragment", -1,
           "participants", "learner", 0, "incarnation", 0, "tokens", 10);
    json_t *rec = json_pack("{s:s,s:s,s:s,s:i,s:i}", "id", "f-2", "type", "latency", "state", "expired",
                            "started_mono_ms", 1000, "ended_mono_ms", 1500);
    hyp_history_add_fault(h, 0, rec, NULL, 0);
    json_decref(rec);
    c = fault_cost_json(h);
    json_t *f = json_array_get(json_object_get(c, "faults"), 0);
    cr_assert(json_is_null(json_object_get(f, "goodput_during")));
    cr_assert_float_eq(num(f, "time_to_rejoin_s"), 0.0, 1e-9);
    cr_assert_eq(json_integer_value(json_object_get(f, "merges_missed")), 0);
    json_decref(c);
    hyp_history_free(h);
}
