/* test_horizon.c - the run ends only after the last window closed; a window
 * the run could not observe is reported as such. */
#include <criterion/criterion.h>
#include <string.h>

#include "harness/horizon.h"
#include "trainer/config.h"

static hz_window win(const char *text, const char *label)
{
    json_t *j = json_loads(text, 0, NULL);
    cr_assert_not_null(j);
    hz_window w;
    int has = horizon_window(j, label, &w);
    json_decref(j);
    cr_assert_eq(has, 1, "%s has a window", text);
    return w;
}

Test(horizon, windows_of_the_hypotheses)
{
    hz_window w = win("{\"hypothesis\":\"reintegration\",\"learner\":1,\"join_s\":20,\"merged_s\":30}", "r");
    cr_assert_eq(w.learner, 1);
    cr_assert_eq(w.len_ms, 50000);
    cr_assert_str_eq(w.key, "merged_s");
    w = win("{\"hypothesis\":\"loss_continuity\",\"max_jump_rel\":0.1,\"recover_s\":12.5}", "c");
    cr_assert_eq(w.learner, -1);
    cr_assert_eq(w.len_ms, 12500);
    w = win("{\"hypothesis\":\"loss_target\",\"max\":4,\"by_s\":9}", "t");
    cr_assert(w.from_start);
    json_t *j = json_loads("{\"hypothesis\":\"goodput\",\"min\":0.3}", 0, NULL);
    cr_assert_eq(horizon_window(j, "g", &w), 0, "goodput has no window");
    json_decref(j);
}

Test(horizon, ends_only_after_the_last_window_closes)
{
    hz_window w[2] = {
        win("{\"hypothesis\":\"reintegration\",\"learner\":1,\"join_s\":2,\"merged_s\":3}", "r"),
        win("{\"hypothesis\":\"loss_continuity\",\"max_jump_rel\":0.1,\"recover_s\":8}", "c")};
    int64_t heal[3] = {0, 10000, 0};
    hz_progress p = {.start_ms = 1000,
                     .now_ms = 5000,
                     .pending = 1,
                     .heal_ms = heal,
                     .m = 3,
                     .any_heal_ms = 10000,
                     .tokens = 500,
                     .min_tokens = 100};
    char why[256];
    cr_assert_eq(horizon_done(w, 2, &p, why, sizeof why), 0, "a pending fault keeps the run going");
    cr_assert(strstr(why, "not healed"), "%s", why);
    p.pending = 0;
    p.now_ms = 15000; /* reintegration closed at 15000, loss_continuity at 18000 */
    cr_assert_eq(horizon_done(w, 2, &p, why, sizeof why), 0);
    cr_assert(strstr(why, "c's window"), "%s", why);
    p.now_ms = 17999;
    cr_assert_eq(horizon_done(w, 2, &p, why, sizeof why), 0, "one ms before the last close");
    p.now_ms = 18000;
    cr_assert_eq(horizon_done(w, 2, &p, why, sizeof why), 1, "%s", why);
    p.tokens = 99;
    cr_assert_eq(horizon_done(w, 2, &p, why, sizeof why), 0, "the minimum training counts too");
    cr_assert(strstr(why, "99 of 100 tokens"), "%s", why);
}

Test(horizon, an_unobserved_window_is_reported)
{
    hz_window w = win("{\"hypothesis\":\"reintegration\",\"learner\":1,\"join_s\":20,\"merged_s\":30}", "r");
    int64_t heal[2] = {0, 12300};
    hz_progress p = {
        .start_ms = 2000, .now_ms = 22000, .pending = 0, .heal_ms = heal, .m = 2, .any_heal_ms = 12300};
    char msg[256];
    cr_assert_eq(horizon_unobserved(&w, &p, msg, sizeof msg), 1);
    cr_assert(strstr(msg, "run ended before learner 1's merged_s window closed"), "%s", msg);
    cr_assert(strstr(msg, "t=60.3 s") && strstr(msg, "t=20.0 s"), "times are from the start: %s", msg);
    p.now_ms = 62300;
    cr_assert_eq(horizon_unobserved(&w, &p, msg, sizeof msg), 0, "closed by the end");
    p.pending = 1;
    cr_assert_eq(horizon_unobserved(&w, &p, msg, sizeof msg), 1, "a fault still pending at the end");
    cr_assert(strstr(msg, "could open"), "%s", msg);
    heal[1] = 0;
    p.pending = 0;
    cr_assert_eq(horizon_unobserved(&w, &p, msg, sizeof msg), 0, "never opened: nothing to observe");
}

Test(horizon, progress_windows_and_minimum_merges)
{
    hz_window w = win("{\"hypothesis\":\"loss_target\",\"max\":4,\"by_tokens\":5000}", "t");
    cr_assert_eq(w.tokens, 5000);
    cr_assert_str_eq(w.key, "by_tokens");
    hz_progress p = {
        .start_ms = 1000, .now_ms = 900000, .m = 1, .eval_tokens = 4999, .merges = 10, .min_merges = 20};
    char why[256];
    cr_assert_eq(horizon_done(&w, 1, &p, why, sizeof why), 0,
                 "no eval covered 5000 tokens yet, however late");
    cr_assert(strstr(why, "covers 5000 merged tokens (now 4999)"), "%s", why);
    cr_assert_eq(horizon_unobserved(&w, &p, why, sizeof why), 1);
    cr_assert(strstr(why, "4999 of 5000"), "%s", why);
    p.eval_tokens = 5000;
    cr_assert_eq(horizon_unobserved(&w, &p, why, sizeof why), 0, "covered: observed");
    cr_assert_eq(horizon_done(&w, 1, &p, why, sizeof why), 0, "the minimum merges count too");
    cr_assert(strstr(why, "10 of 20 merges"), "%s", why);
    p.merges = 20;
    cr_assert_eq(horizon_done(&w, 1, &p, why, sizeof why), 1, "%s", why);
}

Test(horizon, learner_budget_stays_within_what_a_learner_accepts)
{
    cr_assert_eq(horizon_learner_budget(600), 60000);
    cr_assert_eq(horizon_learner_budget(0), 0, "no steps: no budget flag");
    cr_assert_eq(horizon_learner_budget(CONFIG_STEPS_MAX / HORIZON_BUDGET_X - 1),
                 (CONFIG_STEPS_MAX / HORIZON_BUDGET_X - 1) * HORIZON_BUDGET_X);
    /* the schema allows steps up to CONFIG_STEPS_MAX: x100 would be refused by every learner */
    cr_assert_eq(horizon_learner_budget(CONFIG_STEPS_MAX), CONFIG_STEPS_MAX);
    cr_assert_eq(horizon_learner_budget(CONFIG_STEPS_MAX / HORIZON_BUDGET_X), CONFIG_STEPS_MAX);
}

/* The progress line's estimate: the least-advanced condition's share done,
 * the latest condition's time left, a lower bound while a fault is pending. */
Test(horizon, estimate_of_the_end)
{
    hz_window w[1] = {
        win("{\"hypothesis\":\"reintegration\",\"learner\":1,\"join_s\":2,\"merged_s\":8}", "r")};
    int64_t heal[2] = {0, 0};
    hz_progress p = {.start_ms = 0,
                     .now_ms = 10000,
                     .pending = 1,
                     .entries = 2,
                     .heal_ms = heal,
                     .m = 2,
                     .tokens = 2000,
                     .min_tokens = 4000};
    hz_estimate e;
    horizon_estimate(w, 1, &p, &e);
    /* one of two faults done; tokens at half, 10 s more at the rate seen */
    cr_assert_float_eq(e.fraction, 0.5, 1e-9);
    cr_assert_eq(e.left_ms, 10000);
    cr_assert(e.lower_bound, "a pending fault: the end is at least that far");
    cr_assert(strstr(e.waiting, "tokens"), "%s", e.waiting);

    /* healed at 8 s: the window closes at 18 s, later than the tokens' end */
    p.pending = 0;
    heal[1] = 8000;
    p.any_heal_ms = 8000;
    p.tokens = 3000; /* 3000 in 10 s: 1000 more in 3.3 s */
    horizon_estimate(w, 1, &p, &e);
    cr_assert_not(e.lower_bound);
    cr_assert_eq(e.left_ms, 8000, "the window closes at 18 s: %lld", (long long)e.left_ms);
    cr_assert_float_eq(e.fraction, 0.2, 1e-9, "2 of the window's 10 s: %g", e.fraction);
    cr_assert(strstr(e.waiting, "learner 1's merged_s window"), "%s", e.waiting);

    /* everything done */
    p.now_ms = 20000;
    p.tokens = 5000;
    horizon_estimate(w, 1, &p, &e);
    cr_assert_float_eq(e.fraction, 1.0, 1e-9);
    cr_assert_eq(e.left_ms, 0);
    cr_assert_eq(e.waiting[0], '\0');

    /* nothing to extrapolate from yet: unknown, not zero */
    hz_progress q = {.start_ms = 0, .now_ms = 1000, .heal_ms = heal, .m = 2, .min_merges = 50};
    horizon_estimate(NULL, 0, &q, &e);
    cr_assert_eq(e.left_ms, -1);
    cr_assert(e.lower_bound);
}

/* data_accounting's window: the run waits for the slowest learner's
 * shard even when the others' tokens already make up the total (CI of
 * a812804: learner 3 was 178 steps short when the total was reached). */
Test(horizon, waits_for_every_learners_shard)
{
    hz_window w = win("{\"hypothesis\":\"data_accounting\",\"slack_steps\":100}", "d");
    cr_assert(w.shard);
    cr_assert_str_eq(w.key, "steps");
    int64_t steps[4] = {1180, 1100, 1150, 822};
    hz_progress p = {.start_ms = 1000, .now_ms = 30000, .m = 4, .steps = steps, .steps_target = 1000,
                     .tokens = 70000, .min_tokens = 64000};
    char why[256];
    cr_assert_eq(horizon_done(&w, 1, &p, why, sizeof why), 0, "learner 3 is short of its shard");
    cr_assert(strstr(why, "learner 3 at step 822 of 900"), "%s", why);
    char msg[256];
    cr_assert_eq(horizon_unobserved(&w, &p, msg, sizeof msg), 1);
    cr_assert(strstr(msg, "before every learner trained its shard: learner 3"), "%s", msg);
    hz_estimate e;
    horizon_estimate(&w, 1, &p, &e);
    cr_assert(strstr(e.waiting, "learner 3's shard"), "%s", e.waiting);
    steps[3] = 900; /* within slack_steps */
    cr_assert_eq(horizon_done(&w, 1, &p, why, sizeof why), 1, "%s", why);
    cr_assert_eq(horizon_unobserved(&w, &p, msg, sizeof msg), 0);
    /* its own steps override the run's; no target known: nothing to wait for */
    w = win("{\"hypothesis\":\"data_accounting\",\"steps\":2000}", "d");
    cr_assert_eq(horizon_done(&w, 1, &p, why, sizeof why), 0);
    p.steps_target = 0;
    w.steps = 0;
    cr_assert_eq(horizon_done(&w, 1, &p, why, sizeof why), 1, "%s", why);
}
