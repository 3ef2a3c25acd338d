/* test_trainer_gpt.c - the byte-level GPT trains on the fortunes corpus:
 * 2 learners in ddp and 4 in decoupled reach a held-out bits/byte below the
 * corpus's order-1 entropy (3.74 bits/byte for the whole corpus) within a
 * run bounded by steps. The model is small (T=32, d=32, 2 layers, 34,688
 * parameters) so that the cases stay at about half a minute (ddp) and one
 * (decoupled) under ASan; the
 * bar is what a model that uses more than the previous byte must beat.
 * Needs Debian's fortunes.
 *
 * Decoupled DiLoCo is less data-efficient than ddp (each learner's pseudo-
 * gradient is averaged into the global model every H/P steps, not every
 * step), so the decoupled case gets 2000 steps per learner. It was disabled
 * while rounds were event-driven (under ASan 3.88-3.96 bits/byte in 2 of 3
 * runs); with slot-aligned rounds it passed 3 of 3 runs under ASan on the
 * shared machine at load 10-15 (2026-12-04), so it runs again. A last
 * case runs bench/claims' gpt in ddp to the step where a 20-step warm-up
 * spiked it (issue 27 item 5). See docs/training.md. */
#include "trainer_it.h"

#define GPT_SMALL                                                                                            \
    "--model", "gpt", "--data", "fortunes", "--context", "32", "--embed", "32", "--hidden", "128",           \
        "--layers", "2", "--heads", "2", "--batch", "8", "--eval-tokens", "1024", "--eval-every-ms", "1000", \
        "--inner-lr", "0.008"

static double gpt_run(const char *tag, const char *const *args, int learners)
{
    tr_run r = {0};
    tr_syncer_start(&r, tag, args);
    json_t *st = tr_get(&r, "/v1/status");
    json_t *e = json_object_get(st, "eval");
    cr_assert(json_is_number(json_object_get(e, "bpb")), "status has eval.bpb");
    double b0 = json_number_value(json_object_get(e, "bpb"));
    cr_assert(fabs(b0 - 8.0) < 0.3, "an untrained gpt is near 8 bits/byte, got %f", b0);
    json_decref(st);
    pid_t p[4];
    for (int i = 0; i < learners; i++)
        p[i] = tr_learner_start(&r, i, NULL, NULL);
    for (int i = 0; i < learners; i++)
        tr_expect_exit0(&r, p[i], i, 350000);
    double bpb = tr_final_eval(&r) / M_LN2;
    cr_log_info("%s: %d learners, held-out %.3f bits/byte", tag, learners, bpb);
    tr_done(&r);
    return bpb;
}

Test(trainer_gpt, ddp_two_learners_beat_order1_entropy, .timeout = 150)
{
    const char *args[] = {"--mode", "ddp", "--learners", "2", "--steps", "1000", GPT_SMALL, NULL};
    double bpb = gpt_run("gptddp", args, 2);
    cr_assert(bpb < 3.74, "ddp gpt: held-out %.3f bits/byte, not below order-1 entropy 3.74", bpb);
}

/* The same with --threads 2: the real learner and syncer run the gpt on the
 * model's pool (config -> model_config.threads -> pool, AdamW on it) and
 * train as well; bounded by steps, never by time. */
Test(trainer_gpt, ddp_two_learners_with_two_threads_each_beat_order1_entropy, .timeout = 200)
{
    const char *args[] = {"--mode", "ddp",       "--learners", "2",       "--steps",
                          "1000",   "--threads", "2",          GPT_SMALL, NULL};
    double bpb = gpt_run("gptddpth", args, 2);
    cr_assert(bpb < 3.74, "ddp gpt, 2 threads: held-out %.3f bits/byte, not below order-1 entropy 3.74", bpb);
}

Test(trainer_gpt, decoupled_four_learners_beat_order1_entropy, .timeout = 400)
{
    const char *args[] = {"--mode", "decoupled", "--learners", "4", "--steps", "2000", GPT_SMALL, NULL};
    double bpb = gpt_run("gptdec", args, 4);
    cr_assert(bpb < 3.74, "decoupled gpt: held-out %.3f bits/byte, not below order-1 entropy 3.74", bpb);
}

/* bench/claims' gpt: T=64, d=64, 2 layers, 4 heads, 8 sequences per step. */
#define GPT_CLAIMS                                                                                           \
    "--model", "gpt", "--data", "fortunes", "--context", "64", "--embed", "64", "--hidden", "256",           \
        "--layers", "2", "--heads", "4", "--batch", "8", "--eval-every-ms", "1000"

/* ddp over 4 learners of GPT_CLAIMS (seed 12) with the schedule of a long
 * run (--steps 100000 on the syncer: the peak rate holds after the
 * warm-up); the learners stop after `steps`. The held-out loss of the
 * global model at that step (the eval that covers every merge). */
static double claims_ddp_loss_at(const char *tag, int steps)
{
    const char *args[] = {"--mode", "ddp",    "--learners", "4",        "--steps",
                          "100000", "--seed", "12",         GPT_CLAIMS, NULL};
    tr_run r = {0};
    tr_syncer_start(&r, tag, args);
    char n[16];
    snprintf(n, sizeof n, "%d", steps);
    const char *extra[] = {"--steps", n, NULL};
    pid_t p[4];
    for (int i = 0; i < 4; i++)
        p[i] = tr_learner_start(&r, i, extra, NULL);
    for (int i = 0; i < 4; i++)
        tr_expect_exit0(&r, p[i], i, 200000);
    cr_assert_eq(tr_merges(&r), steps, "one ddp step per merge");
    double loss = tr_final_eval(&r);
    cr_log_info("%s: held-out loss %.4f nats at step %d", tag, loss, steps);
    tr_done(&r);
    return loss;
}

/* Issue 27 item 5: a one-step loss spike of the optimiser at its peak rate.
 * With a 20-step warm-up to 0.003 this run's global model read 3.37 nats
 * at step 24 and 8.94 (worse than uniform, ln 256 = 5.55) at step 25, back
 * to 3.39 by step 28 - deterministic, the same 8.94 in the claims run, a
 * harness run and by hand on this machine, with no fault; bench/claims'
 * one-eval stop condition made it an abort, the likeliest reading of the
 * "divergence after a rejoin" of 2026-12-04. The gpt's default warm-up is
 * now 60 steps (docs/training.md, "Warm-up"): the same run reads 4.03 at
 * step 25. (With --warmup 20 this test fails here; whether another CPU's
 * kernels reproduce that exact spike is not asserted.) */
Test(trainer_gpt, ddp_claims_model_has_no_loss_spike_after_warmup, .timeout = 300)
{
    double loss = claims_ddp_loss_at("gptspike", 25);
    cr_assert(isfinite(loss) && loss < 5.0,
              "held-out loss %.4f nats at step 25 (untrained 5.54, the spike 8.94)", loss);
}
