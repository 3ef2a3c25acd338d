/* test_trainer_diloco.c - syncer + 2 learners in diloco mode: training works
 * and reaches a loss comparable to ddp at equal tokens; with an elastic
 * deadline a SIGKILLed learner does not stop the merges, and on restart it
 * rejoins (new incarnation), pulls every fragment first and contributes. */
#include "trainer_it.h"

static double run_mode(const char *mode, const char *tag)
{
    tr_run r = {0};
    const char *args[] = {"--mode",      mode, "--learners",      "2",   "--steps", "240", "--H", "24",
                          "--fragments", "4",  "--eval-every-ms", "300", TR_MODEL,  NULL};
    tr_syncer_start(&r, tag, args);
    pid_t p[2];
    tr_learners_start(&r, 2, p);
    tr_expect_exit0(&r, p[0], 0, 90000);
    tr_expect_exit0(&r, p[1], 1, 30000);
    double l = tr_final_eval(&r);
    json_t *st = tr_get(&r, "/v1/status");
    if (strcmp(mode, "diloco") == 0) {
        /* 240 steps / H=24 = 10 rounds of 4 fragments, 2 contributions each */
        cr_assert_eq(tr_int(st, "merges"), 40);
        cr_assert_eq(tr_int(json_object_get(st, "contributions"), "accepted"), 80);
        json_t *evs = tr_events(&r, 0);
        tr_assert_pulled_first(evs, 0, 1, 4);
        tr_assert_pulled_first(evs, 1, 1, 4);
        size_t i;
        json_t *e;
        json_array_foreach(evs, i, e) if (strcmp(tr_type(e), "merge") == 0) cr_assert_eq(
            json_array_size(json_object_get(e, "participants")), 2, "a diloco barrier merges everyone");
        json_decref(evs);
    }
    json_decref(st);
    tr_done(&r);
    return l;
}

Test(trainer_diloco, trains_and_matches_ddp_at_equal_tokens, .timeout = 150)
{
    double diloco = run_mode("diloco", "diloco");
    double ddp = run_mode("ddp", "diloco-ref");
    cr_log_info("eval loss at equal tokens: diloco %.4f ddp %.4f", diloco, ddp);
    cr_assert(diloco < log(256.0) - 1.0, "diloco eval loss %f did not fall clearly below ln 256", diloco);
    cr_assert(ddp < log(256.0) - 1.0, "ddp eval loss %f", ddp);
    cr_assert(fabs(diloco - ddp) < 0.15 * ddp, "diloco %f vs ddp %f at equal tokens differ by more than 15%%",
              diloco, ddp);
}

Test(trainer_diloco, deadline_keeps_merging_without_a_dead_learner, .timeout = 120)
{
    tr_run r = {0};
    const char *args[] = {
        "--mode", "diloco",     "--learners", "2", "--H", "12", "--fragments", "4", "--elastic-deadline-ms",
        "400",    TR_FAULT_RUN, TR_MODEL,     NULL};
    tr_syncer_start(&r, "dilocokill", args);
    pid_t p[2];
    tr_learners_start(&r, 2, p);
    cr_assert_geq(tr_wait_merges(&r, 8, 60000), 8, "training started");
    /* learner 0 alone can reach 8 merges: kill learner 1 only once it joined */
    cr_assert_eq(tr_wait_joined(&r, 1, 0, 60000), 1, "learner 1 joined before the kill");
    tr_kill(p[1]);
    json_int_t m1 = tr_merges(&r);
    cr_assert_geq(tr_wait_merges(&r, m1 + 12, 30000), m1 + 12, "merges continue without the dead learner");
    tr_learner_start(&r, 1, NULL, NULL);
    /* it rejoins, pulls every fragment, and its contributions are merged again */
    tr_rejoin w = tr_wait_rejoin(&r, 1, 1, 4, 4);
    cr_assert_eq(w.inc, 2, "rejoined with a new incarnation");
    cr_assert_geq(w.first, 0, "contributed after the rejoin");
    cr_assert_geq(w.merged, 4, "its contributions are merged again");
    int drops = 0;
    size_t i;
    json_t *e;
    json_array_foreach(w.evs, i, e) drops += strcmp(tr_type(e), "drop") == 0 && tr_int(e, "learner") == 1;
    cr_assert_gt(drops, 0, "the dead learner was dropped from rounds");
    json_decref(w.evs);
    tr_done(&r);
}
