/* test_trainer_ddp.c - syncer + 2 learners in ddp mode: training works, a
 * dead learner stalls the run until it is back and rejoins (new incarnation,
 * pulls every fragment first), and a SIGKILLed syncer resumes from its
 * checkpoint with versions that never go backwards. */
#include "trainer_it.h"

Test(trainer_ddp, trains_below_uniform_loss, .timeout = 120)
{
    tr_run r = {0};
    const char *args[] = {"--mode",          "ddp", "--learners", "2", "--steps", "300",
                          "--eval-every-ms", "300", TR_MODEL,     NULL};
    tr_syncer_start(&r, "ddp", args);
    double l0 = tr_eval_loss(&r, NULL);
    cr_assert(fabs(l0 - log(256.0)) < 0.2, "an untrained model is near ln 256, got %f", l0);
    pid_t p[2];
    tr_learners_start(&r, 2, p);
    tr_expect_exit0(&r, p[0], 0, 90000);
    tr_expect_exit0(&r, p[1], 1, 30000);
    double l = tr_final_eval(&r);
    cr_assert(l < log(256.0) - 1.0, "eval loss %f did not fall clearly below ln 256", l);
    json_t *st = tr_get(&r, "/v1/status");
    cr_assert_eq(json_integer_value(json_object_get(st, "merges")), 300, "one merge per ddp step");
    json_t *ls = json_object_get(st, "learners");
    cr_assert_eq(json_array_size(ls), 2);
    size_t i;
    json_t *l1;
    json_array_foreach(ls, i, l1)
    {
        cr_assert_eq(tr_int(json_object_get(l1, "contributions"), "accepted"), 300);
        cr_assert_eq(tr_int(json_object_get(l1, "contributions"), "rejected"), 0);
    }
    json_t *bytes = json_object_get(st, "bytes");
    json_int_t n = tr_int(st, "n_params");
    cr_assert_eq(tr_int(bytes, "in"), 2 * 300 * 4 * n, "every gradient is n f32 values");
    json_decref(st);
    json_t *evs = tr_events(&r, 0);
    tr_assert_pulled_first(evs, 0, 1, 4);
    tr_assert_pulled_first(evs, 1, 1, 4);
    json_decref(evs);
    tr_done(&r);
}

Test(trainer_ddp, dead_learner_stalls_then_rejoins, .timeout = 120)
{
    tr_run r = {0};
    const char *args[] = {"--mode", "ddp", "--learners", "2", TR_FAULT_RUN, TR_MODEL, NULL};
    tr_syncer_start(&r, "ddpkill", args);
    pid_t p[2];
    tr_learners_start(&r, 2, p);
    cr_assert_geq(tr_wait_merges(&r, 30, 60000), 30, "training started");
    tr_kill(p[1]);
    cx_sleep_ms(1000);
    json_int_t m1 = tr_merges(&r);
    cx_sleep_ms(2500);
    json_int_t m2 = tr_merges(&r);
    cr_assert_eq(m1, m2, "ddp must stall while a learner is dead (%lld -> %lld)", (long long)m1,
                 (long long)m2);
    /* back: it rejoins with a new incarnation and the run continues */
    tr_learner_start(&r, 1, NULL, NULL);
    json_int_t m3 = tr_wait_merges(&r, m2 + 20, 60000);
    cr_assert_geq(m3, m2 + 20, "training continues after the rejoin");
    json_t *evs = tr_events(&r, 0);
    json_int_t inc = 0;
    cr_assert_geq(tr_find_join(evs, 1, 1, &inc), 0, "learner 1 rejoined");
    cr_assert_eq(inc, 2, "with a new incarnation");
    cr_assert_geq(tr_assert_pulled_first(evs, 1, inc, 4), 0, "and took part in a merge after pulling");
    json_decref(evs);
    tr_done(&r);
}

Test(trainer_ddp, syncer_restart_resumes_with_monotonic_versions, .timeout = 120)
{
    tr_run r = {0};
    const char *args[] = {
        "--mode", "ddp",    "--learners", "2", TR_STEPS_LONG, "--eval-every-ms", "1000", "--checkpoint-every",
        "25",     TR_MODEL, NULL};
    tr_syncer_start(&r, "ddpsyncer", args);
    tr_learners_start(&r, 2, NULL);
    cr_assert_geq(tr_wait_merges(&r, 60, 60000), 60);
    json_t *before = tr_events(&r, 0);
    tr_kill(r.syncer);
    /* the last version published before the crash */
    json_int_t last_v = -1, last_seq = 0;
    size_t i;
    json_t *e;
    json_array_foreach(before, i, e)
    {
        if (strcmp(tr_type(e), "merge") == 0 && tr_int(e, "version") > last_v)
            last_v = tr_int(e, "version");
        last_seq = tr_int(e, "seq");
    }
    json_decref(before);
    cx_sleep_ms(1500); /* learners keep retrying */
    tr_syncer_start(&r, NULL, NULL);
    json_t *after = tr_events(&r, last_seq);
    json_t *start = NULL;
    json_array_foreach(after, i, e) if (!start && strcmp(tr_type(e), "start") == 0) start = e;
    cr_assert(start, "a start event after the restart");
    cr_assert(json_is_true(json_object_get(start, "restored")), "restored from the checkpoint");
    cr_assert_geq(tr_int(start, "merges"), 25, "the checkpoint had merges");
    json_t *vs = json_object_get(start, "versions");
    json_array_foreach(vs, i, e) cr_assert_gt(json_integer_value(e), last_v, "versions never go backwards");
    cr_assert_gt(tr_int(start, "seq"), last_seq, "event seq continues");
    json_decref(after);
    json_int_t m = tr_merges(&r);
    cr_assert_geq(tr_wait_merges(&r, m + 20, 60000), m + 20, "learners resync and training continues");
    tr_done(&r);
}
