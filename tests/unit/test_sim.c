/* Unit tests of the goodput simulator against cases with closed-form
 * answers, identities between modes, and monotonicity. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <string.h>

#include "common/err.h"
#include "sim/sim.h"

int simulate_main(int argc, char **argv);

#define YEAR_S (365.25 * 86400.0)

static sim_params base(double horizon_days)
{
    sim_params p;
    sim_params_init(&p);
    p.horizon_days = horizon_days;
    return p;
}

static sim_result run1(const sim_params *p, sim_mode mode, int64_t chips, int learners, uint64_t seed)
{
    char err[CX_ERRLEN] = "";
    sim_result r;
    int rc = sim_run(p, mode, chips, learners, seed, &r, err, sizeof err);
    cr_assert_eq(rc, 0, "sim_run: %s", err);
    cr_assert(r.goodput >= 0 && r.goodput <= 1 + 1e-12, "goodput %g", r.goodput);
    cr_assert(r.uptime >= 0 && r.uptime <= 1 + 1e-12, "uptime %g", r.uptime);
    return r;
}

static sim_stats runN(const sim_params *p, sim_mode mode, int64_t chips, int learners, int trials)
{
    char err[CX_ERRLEN] = "";
    sim_stats s;
    int rc = sim_run_trials(p, mode, chips, learners, 42, trials, &s, err, sizeof err);
    cr_assert_eq(rc, 0, "sim_run_trials: %s", err);
    return s;
}

Test(sim, no_failures_is_full_goodput_and_uptime)
{
    sim_params p = base(5);
    p.mtbf_years = 0; /* never fails */
    cr_assert_eq(sim_checkpoint_interval_s(&p, 2400000), 0);
    const sim_mode modes[] = {SIM_DP, SIM_ELASTIC, SIM_DECOUPLED};
    for (int i = 0; i < 3; i++) {
        sim_result r = run1(&p, modes[i], 2400000, 8, 1);
        cr_assert_float_eq(r.goodput, 1.0, 1e-12, "%s goodput %g", sim_mode_name(modes[i]), r.goodput);
        cr_assert_float_eq(r.uptime, 1.0, 1e-12, "%s uptime %g", sim_mode_name(modes[i]), r.uptime);
        cr_assert_eq(r.failures, 0);
        cr_assert_eq(r.stops, 0);
    }
}

Test(sim, no_failures_fixed_checkpoints_cost_their_share)
{
    /* Checkpoint every 100 s of compute, each costing 10 s: 100/110. */
    sim_params p = base(5);
    p.mtbf_years = 0;
    p.checkpoint_s = 100;
    p.checkpoint_cost_s = 10;
    sim_result r = run1(&p, SIM_DP, 150000, 1, 1);
    cr_assert_float_eq(r.goodput, 100.0 / 110.0, 1e-3, "goodput %g", r.goodput);
    cr_assert_float_eq(r.uptime, 100.0 / 110.0, 1e-3, "uptime %g", r.uptime);
}

Test(sim, dp_matches_the_renewal_formula)
{
    /* Failures only while busy, fixed restart R, fixed interval tau, cost
     * C: each committed tau costs (M + R)(exp((tau + C)/M) - 1) expected
     * wall time, M = MTBF/chips. */
    sim_params p = base(10);
    p.dist = SIM_DIST_FIXED;
    p.restart_s = 60;
    p.checkpoint_s = 60;
    p.checkpoint_cost_s = 5;
    int64_t chips = 300000;
    double m = YEAR_S / (double)chips, tau = 60, c = 5, r = 60;
    double expect = tau / ((m + r) * (exp((tau + c) / m) - 1));
    sim_stats s = runN(&p, SIM_DP, chips, 1, 4);
    cr_assert_float_eq(s.goodput_mean, expect, 0.01, "goodput %g, formula %g", s.goodput_mean, expect);
    cr_assert(s.goodput_ci95 < 0.01, "ci %g", s.goodput_ci95);
}

Test(sim, elastic_matches_one_pause_per_failure)
{
    /* A domain that recovers within the re-shard it caused costs exactly
     * one pause D and no capacity: goodput = 1 / (1 + lambda D). */
    sim_params p = base(10);
    p.dist = SIM_DIST_FIXED;
    p.recovery_s = 1e-3;
    p.rescale_s = 20;
    int64_t chips = 600000;
    double lambda = (double)chips / YEAR_S;
    double expect = 1.0 / (1.0 + lambda * p.rescale_s);
    sim_stats s = runN(&p, SIM_ELASTIC, chips, 1, 4);
    cr_assert_float_eq(s.goodput_mean, expect, 0.01, "goodput %g, formula %g", s.goodput_mean, expect);
    cr_assert_float_eq(s.uptime_mean, expect, 0.01, "uptime %g, formula %g", s.uptime_mean, expect);
}

Test(sim, one_learner_equals_the_matching_data_parallel_job)
{
    sim_params p = base(5);
    /* Restart learners: M = 1 is a DP job of all the chips, event for event. */
    p.learner_elastic = 0;
    sim_result dp = run1(&p, SIM_DP, 300000, 1, 7);
    sim_result one = run1(&p, SIM_DECOUPLED, 300000, 1, 7);
    cr_assert_gt(dp.failures, 100);
    cr_assert_eq(one.failures, dp.failures);
    cr_assert_float_eq(one.goodput, dp.goodput, 1e-12, "%g vs %g", one.goodput, dp.goodput);
    cr_assert_float_eq(one.uptime, dp.uptime, 1e-12, "%g vs %g", one.uptime, dp.uptime);
    /* Elastic learners: M = 1 is elastic DP. */
    p.learner_elastic = 1;
    sim_result el = run1(&p, SIM_ELASTIC, 300000, 1, 7);
    one = run1(&p, SIM_DECOUPLED, 300000, 1, 7);
    cr_assert_eq(one.failures, el.failures);
    cr_assert_float_eq(one.goodput, el.goodput, 1e-12, "%g vs %g", one.goodput, el.goodput);
    /* And the two policies differ, so the identity above is not vacuous. */
    cr_assert_gt(el.goodput, dp.goodput + 0.05, "elastic %g dp %g", el.goodput, dp.goodput);
}

Test(sim, learners_are_data_parallel_jobs_of_their_chips)
{
    /* M restart learners of N/M chips each have the goodput of one DP job
     * of N/M chips (they never wait on each other). */
    sim_params p = base(10);
    p.learner_elastic = 0;
    sim_stats dec = runN(&p, SIM_DECOUPLED, 1200000, 8, 3);
    sim_stats dp = runN(&p, SIM_DP, 150000, 1, 3);
    cr_assert_float_eq(dec.goodput_mean, dp.goodput_mean, 0.01, "%g vs %g", dec.goodput_mean,
                       dp.goodput_mean);
}

Test(sim, goodput_is_monotone_in_mtbf)
{
    const double mtbf[] = {0.25, 0.5, 1, 2, 4};
    const sim_mode modes[] = {SIM_DP, SIM_ELASTIC, SIM_DECOUPLED};
    for (int m = 0; m < 3; m++) {
        double prev = -1;
        for (int i = 0; i < 5; i++) {
            sim_params p = base(5);
            p.mtbf_years = mtbf[i];
            sim_stats s = runN(&p, modes[m], 600000, 8, 2);
            cr_assert_gt(s.goodput_mean, prev, "%s at mtbf %g: %g <= %g", sim_mode_name(modes[m]), mtbf[i],
                         s.goodput_mean, prev);
            prev = s.goodput_mean;
        }
        cr_assert_lt(prev, 1.0);
    }
}

Test(sim, decoupled_beats_elastic_beats_dp_and_quorum_matters)
{
    sim_params p = base(5);
    sim_stats dp = runN(&p, SIM_DP, 1200000, 1, 2);
    sim_stats el = runN(&p, SIM_ELASTIC, 1200000, 1, 2);
    sim_stats d8 = runN(&p, SIM_DECOUPLED, 1200000, 8, 2);
    cr_assert_gt(el.goodput_mean, dp.goodput_mean);
    cr_assert_gt(d8.goodput_mean, el.goodput_mean);
    cr_assert_gt(d8.uptime_mean, 0.999, "M=8 K=1 uptime %g", d8.uptime_mean);
    p.quorum = 8; /* every learner must compute: the global model stalls often */
    sim_stats k8 = runN(&p, SIM_DECOUPLED, 1200000, 8, 2);
    cr_assert_lt(k8.uptime_mean, d8.uptime_mean - 0.2, "K=8 uptime %g", k8.uptime_mean);
    cr_assert_float_eq(k8.goodput_mean, d8.goodput_mean, 0.01); /* quorum moves uptime, not chip-time */
}

Test(sim, failures_while_stopped_cost_more_when_they_extend_the_stop)
{
    /* Fixed restarts: an exponential restart started over is the same
     * distribution again (memoryless), so only a fixed one can tell. */
    sim_params p = base(5);
    p.dist = SIM_DIST_FIXED;
    p.stop_policy = SIM_STOP_FOLD;
    sim_stats fold = runN(&p, SIM_DP, 2400000, 1, 2);
    p.stop_policy = SIM_STOP_EXTEND;
    sim_stats ext = runN(&p, SIM_DP, 2400000, 1, 2);
    cr_assert_lt(ext.goodput_mean, fold.goodput_mean * 0.5, "extend %g fold %g", ext.goodput_mean,
                 fold.goodput_mean);
}

Test(sim, seeded_and_reproducible)
{
    sim_params p = base(2);
    sim_result a = run1(&p, SIM_ELASTIC, 600000, 1, 3);
    sim_result b = run1(&p, SIM_ELASTIC, 600000, 1, 3);
    sim_result c = run1(&p, SIM_ELASTIC, 600000, 1, 4);
    cr_assert_eq(a.goodput, b.goodput);
    cr_assert_eq(a.failures, b.failures);
    cr_assert_neq(a.failures, c.failures);
    sim_stats one = runN(&p, SIM_DP, 600000, 1, 1);
    cr_assert_eq(one.goodput_ci95, 0);
    sim_stats five = runN(&p, SIM_DP, 600000, 1, 5);
    cr_assert_gt(five.goodput_ci95, 0);
    cr_assert_lt(five.goodput_ci95, 0.05);
}

Test(sim, daly_interval)
{
    sim_params p = base(1);
    p.checkpoint_cost_s = 2;
    double m = YEAR_S / 1000;
    double young = sqrt(2 * 2 * m);
    double t = sim_checkpoint_interval_s(&p, 1000);
    cr_assert(t > young * 0.99 && t < young * 1.02, "daly %g young %g", t, young);
    p.checkpoint_cost_s = 3 * YEAR_S; /* cost beyond 2M: interval = M */
    cr_assert_float_eq(sim_checkpoint_interval_s(&p, 1), YEAR_S, 1e-6);
    p.checkpoint_s = 123;
    cr_assert_float_eq(sim_checkpoint_interval_s(&p, 1000), 123, 1e-12);
}

Test(sim, bad_input_is_named)
{
    char err[CX_ERRLEN];
    sim_params p = base(1);
    sim_result r;
    cr_assert_eq(sim_run(&p, SIM_DP, 0, 1, 1, &r, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "chips"), "%s", err);
    cr_assert_eq(sim_run(&p, SIM_DECOUPLED, 1000, 0, 1, &r, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "learners"), "%s", err);
    p.quorum = 5;
    cr_assert_eq(sim_run(&p, SIM_DECOUPLED, 1000, 4, 1, &r, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "quorum"), "%s", err);
    p = base(1);
    p.rescale_s = -1;
    cr_assert_eq(sim_run(&p, SIM_ELASTIC, 1000, 1, 1, &r, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "rescale_s"), "%s", err);
    p = base(1);
    p.recovery_s = NAN;
    cr_assert_eq(sim_params_check(&p, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "recovery_s"), "%s", err);
    sim_mode m;
    cr_assert_eq(sim_mode_parse("ddp", &m, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "ddp"), "%s", err);
    cr_assert_eq(sim_mode_parse("elastic", &m, err, sizeof err), 0);
    cr_assert_eq(m, SIM_ELASTIC);
}

Test(sim, paper_figures)
{
    cr_assert_float_eq(sim_paper_goodput_pct(SIM_DP, 1, 1200000), 27, 1e-12);
    cr_assert_float_eq(sim_paper_goodput_pct(SIM_ELASTIC, 1, 1200000), 58, 1e-12);
    cr_assert_float_eq(sim_paper_goodput_pct(SIM_DECOUPLED, 8, 1200000), 88, 1e-12);
    cr_assert_lt(sim_paper_goodput_pct(SIM_DECOUPLED, 4, 1200000), 0);
    cr_assert_lt(sim_paper_goodput_pct(SIM_DP, 1, 1000000), 0);
}

Test(sim, command_line_exit_codes, .init = cr_redirect_stdout)
{
    char *help[] = {"simulate", "--help", NULL};
    cr_assert_eq(simulate_main(2, help), 0);
    char *bad_flag[] = {"simulate", "--chipz", "5", NULL};
    cr_assert_eq(simulate_main(3, bad_flag), 64);
    char *bad_value[] = {"simulate", "--chips", "150000,abc", NULL};
    cr_assert_eq(simulate_main(3, bad_value), 64);
    char *bad_mode[] = {"simulate", "--modes", "dp,ddp", NULL};
    cr_assert_eq(simulate_main(3, bad_mode), 64);
    char *bad_quorum[] = {"simulate", "--learners", "2", "--quorum", "3", NULL};
    cr_assert_eq(simulate_main(5, bad_quorum), 64);
    char *ok[] = {"simulate",       "--chips", "1000",     "--modes", "dp,decoupled", "--learners", "2",
                  "--horizon-days", "1",       "--trials", "2",       "--format",     "csv",        NULL};
    cr_assert_eq(simulate_main(13, ok), 0);
    fflush(stdout);
    FILE *out = cr_get_redirected_stdout();
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, out);
    text[n] = 0;
    cr_assert(strstr(text, "--learner-recovery"), "help names every flag");
    cr_assert(
        strstr(text,
               "\nmode,learners,chips,goodput,goodput_ci95,uptime,uptime_ci95,failures_per_trial,trials,"
               "paper_goodput\ndp,1,1000,"),
        "csv: %s", text);
    cr_assert(strstr(text, "\ndecoupled,2,1000,"), "csv: %s", text);
}
