/* test_syncer_guard.c - the bounds of trainer/syncer/guard.h: merge weights
 * from the syncer's H and batch, the norm limit from the other learners'
 * median (and its warm-up), the clip factor, the ring's JSON round trip,
 * and the check of a merge's result. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "trainer/syncer/guard.h"

Test(syncer_guard, weights_are_capped_by_2h_and_the_syncers_batch)
{
    cr_assert_eq(guard_weight_steps(24, 24), 24, "an honest H-step claim is kept");
    cr_assert_eq(guard_weight_steps(100000000, 24), 48, "1e8 steps weigh 2H");
    cr_assert_eq(guard_weight_steps(-5, 24), 0);
    cr_assert_eq(guard_weight_steps(7, 0), 2, "H < 1 counts as 1");
    cr_assert_eq(guard_weight_tokens(24 * 16, 24, 16), 24 * 16, "an honest claim is kept");
    cr_assert_eq(guard_weight_tokens(100000000LL * 65536, 48, 16), 48 * 16, "the syncer's batch");
    cr_assert_eq(guard_weight_tokens(10, 48, 16), 10, "a smaller claim is kept");
    /* token weighting w = tokens^2 / steps: at most 2 x an honest H-step one */
    int64_t s = guard_weight_steps(100000000, 24), t = guard_weight_tokens(INT64_MAX / 2, s, 16);
    double w = (double)t * (double)t / (double)s, honest = 384.0 * 384.0 / 24.0;
    cr_assert_leq(w / honest, 2.0);
}

Test(syncer_guard, the_limit_grows_with_steps_from_h_to_4h)
{
    cr_assert_eq(guard_norm_steps(24, 24), 24);
    cr_assert_eq(guard_norm_steps(1, 24), 24, "a short contribution may be as large as an H-step one");
    cr_assert_eq(guard_norm_steps(60, 24), 60);
    cr_assert_eq(guard_norm_steps(100000000, 24), 4 * 24, "a claim of 1e8 steps counts 4H");
    cr_assert_eq(guard_norm_steps(-5, 24), 24);
    cr_assert_eq(guard_norm_steps(7, 0), 4, "H < 1 counts as 1");
}

Test(syncer_guard, the_median_is_over_the_other_learners)
{
    guard_norms g;
    char why[256];
    memset(&g, 0, sizeof g);
    /* warm-up: GUARD_WARMUP_REL x the fragment's own norm, floored (GUARD_WARMUP_FLOOR x sqrt(400)) */
    cr_assert_float_eq(guard_norm_limit(&g, 1, 0, 24, 5.0, 400, 10, why, sizeof why), GUARD_WARMUP_REL * 5.0,
                       1e-12);
    cr_assert(strstr(why, "warm-up"), "%s", why);
    cr_assert_float_eq(guard_norm_limit(&g, 1, 0, 24, 0.0, 400, 10, why, sizeof why),
                       GUARD_WARMUP_REL * GUARD_WARMUP_FLOOR * 20.0, 1e-12, "the floor");
    cr_assert(isinf(guard_norm_limit(&g, 1, 0, 24, 5.0, 400, 0, why, sizeof why)), "bound 0 is off");
    /* zero updates from the others bound nothing: the warm-up limit stays */
    for (int i = 0; i < 4; i++)
        guard_norm_add(&g, 0, 0.0);
    cr_assert_float_eq(guard_norm_limit(&g, 1, 0, 24, 5.0, 400, 10, why, sizeof why), GUARD_WARMUP_REL * 5.0,
                       1e-12);
    memset(&g, 0, sizeof g);
    /* learner 0 sends 4 of norm 1 per step; learner 1 fills the ring with 9s */
    for (int i = 0; i < 4; i++)
        guard_norm_add(&g, 0, 1.0);
    for (int i = 0; i < 28; i++)
        guard_norm_add(&g, 1, 9.0);
    cr_assert_float_eq(guard_norm_limit(&g, 1, 0, 24, 5.0, 400, 10, why, sizeof why), 10 * 1.0 * 24, 1e-9,
                       "its own samples do not raise its limit");
    cr_assert(strstr(why, "other learners"), "%s", why);
    cr_assert_float_eq(guard_norm_limit(&g, 1, 0, 96, 5.0, 400, 10, why, sizeof why), 10 * 1.0 * 96, 1e-9,
                       "linear in the steps it may count");
    cr_assert_float_eq(guard_norm_limit(&g, 0, 0, 24, 5.0, 400, 10, why, sizeof why), 10 * 9.0 * 24, 1e-9,
                       "learner 0 is bounded by learner 1's (median 9)");
    cr_assert_float_eq(guard_norm_limit(&g, 1, 1, 24, 5.0, 400, 10, why, sizeof why), 10 * 9.0 * 24, 1e-9,
                       "a one-learner run counts its own");
    /* the ring drops the oldest: 4 more from learner 1 push learner 0 out */
    for (int i = 0; i < 4; i++)
        guard_norm_add(&g, 1, 9.0);
    cr_assert_float_eq(guard_norm_limit(&g, 1, 0, 24, 5.0, 400, 10, why, sizeof why), GUARD_WARMUP_REL * 5.0,
                       1e-12, "no sample of another learner left: the warm-up limit");
}

Test(syncer_guard, clipping_scales_down_never_up_and_never_passes_a_non_finite_norm)
{
    cr_assert_float_eq(guard_clip_factor(5.0, 10.0), 1.0, 1e-15, "within: untouched");
    cr_assert_float_eq(guard_clip_factor(10.0, 10.0), 1.0, 1e-15);
    cr_assert_float_eq(guard_clip_factor(40.0, 10.0), 0.25, 1e-15);
    cr_assert_float_eq(guard_clip_factor(1e40, INFINITY), 1.0, 1e-15, "no limit");
    cr_assert_eq(guard_clip_factor(INFINITY, 10.0), 0.0);
    cr_assert_eq(guard_clip_factor(NAN, 10.0), 0.0);
    /* 3e38 per element over 1000 floats: the norm is finite in double, and clipped to the limit */
    double l2 = 3e38 * sqrt(1000.0);
    cr_assert(isfinite(l2));
    double f = guard_clip_factor(l2, 2.0);
    cr_assert(f > 0 && f < 1e-30, "%g", f);
    cr_assert_float_eq(3e38 * f * sqrt(1000.0), 2.0, 1e-9);
}

Test(syncer_guard, the_ring_round_trips_through_json)
{
    guard_norms g, back;
    char err[256];
    memset(&g, 0, sizeof g);
    for (int i = 0; i < 40; i++)
        guard_norm_add(&g, i % 3, 0.5 + i);
    json_t *j = guard_norms_json(&g);
    cr_assert_not_null(j);
    memset(&back, 0, sizeof back);
    cr_assert_eq(guard_norms_parse(&back, j, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.n, g.n);
    cr_assert_eq(memcmp(back.learner, g.learner, sizeof g.learner), 0);
    for (int i = 0; i < GUARD_NORM_SAMPLES; i++)
        cr_assert_float_eq(back.l2[i], g.l2[i], 1e-12);
    json_decref(j);
    /* damaged: a negative norm, a short array; *g untouched */
    json_t *bad = json_pack("{s:i, s:[i], s:[f]}", "n", 1, "learner", 0, "l2", -1.0);
    cr_assert_eq(guard_norms_parse(&back, bad, err, sizeof err), -1);
    json_decref(bad);
    bad = json_pack("{s:i, s:[], s:[]}", "n", 3, "learner", "l2");
    cr_assert_eq(guard_norms_parse(&back, bad, err, sizeof err), -1);
    json_decref(bad);
    cr_assert_eq(back.n, g.n, "untouched on error");
}

Test(syncer_guard, a_merge_result_must_be_finite_and_bounded)
{
    float old[4] = {1, 2, 3, 4}, th[4] = {1.1f, 2, 3, 4}, mo[4] = {0.1f, 0, 0, 0};
    char why[256];
    cr_assert_eq(guard_merge_result(old, th, mo, 4, why, sizeof why), 0);
    th[2] = INFINITY;
    cr_assert_eq(guard_merge_result(old, th, mo, 4, why, sizeof why), 1);
    cr_assert(strstr(why, "not finite"), "%s", why);
    th[2] = 3;
    mo[3] = NAN;
    cr_assert_eq(guard_merge_result(old, th, mo, 4, why, sizeof why), 1, "the momentum too");
    mo[3] = 0;
    th[0] = 3e4f; /* ||old|| = 5.48: 100x is 548 */
    cr_assert_eq(guard_merge_result(old, th, mo, 4, why, sizeof why), 1);
    cr_assert(strstr(why, "L2 norm"), "%s", why);
    /* a fragment near zero: the floor (0.1 x sqrt(4)) */
    float zero[4] = {0}, small[4] = {19.0f, 0, 0, 0};
    cr_assert_eq(guard_merge_result(zero, small, zero, 4, why, sizeof why), 0);
    small[0] = 21.0f;
    cr_assert_eq(guard_merge_result(zero, small, zero, 4, why, sizeof why), 1);
}
