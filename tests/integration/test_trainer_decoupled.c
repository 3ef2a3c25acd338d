/* test_trainer_decoupled.c - decoupled mode with 4 learners and K=1: the
 * loss comes within 10 % of an equal-token ddp run; a SIGSTOPped
 * learner does not stop the merges and catches up after SIGCONT; a
 * SIGKILLed one rejoins, pulls everything and contributes again; a learner
 * with --slowdown 2 still contributes, with lower total weight. Learners
 * adopt merged values that hold their own contribution and every trained
 * token is merged, and with 8 learners the default staleness bound (scaled
 * with M) refuses almost no contribution. */
#include "trainer_it.h"

static double run4(const char *mode, const char *tag, json_int_t *tokens)
{
    tr_run r = {0};
    const char *args[] = {"--mode", mode, "--learners",  "4", "--quorum",        "1",   "--steps", "240",
                          "--H",    "24", "--fragments", "4", "--eval-every-ms", "300", TR_MODEL,  NULL};
    tr_syncer_start(&r, tag, args);
    pid_t p[4];
    for (int i = 0; i < 4; i++)
        p[i] = tr_learner_start(&r, i, NULL, NULL);
    for (int i = 0; i < 4; i++)
        tr_expect_exit0(&r, p[i], i, 100000);
    double l = tr_final_eval(&r);
    json_t *st = tr_get(&r, "/v1/status");
    *tokens = tr_int(st, "tokens_merged");
    json_decref(st);
    tr_done(&r);
    return l;
}

Test(trainer_decoupled, k1_comes_close_to_ddp_at_equal_tokens, .timeout = 200)
{
    json_int_t tok_dec, tok_ddp;
    double dec = run4("decoupled", "dec", &tok_dec);
    double ddp = run4("ddp", "dec-ref", &tok_ddp);
    cr_log_info("eval loss, 4 learners x 240 steps: decoupled K=1 %.4f (merged %lld tokens), ddp %.4f", dec,
                (long long)tok_dec, ddp);
    cr_assert(dec < log(256.0) - 1.0, "decoupled eval loss %f did not fall clearly below ln 256", dec);
    /* Learners rebase on merged values and send their last progress, so
     * every trained token is merged (test_trainer_rebase.c checks it step
     * by step). The bound guards against a broken merge; the equal-token
     * quality claim is measured with seeds by bench/claims
     * (docs/results.md). */
    cr_assert(dec < ddp * 1.10, "decoupled %f is not within 10%% of ddp %f", dec, ddp);
    cr_assert_eq(tok_ddp, 4 * 240 * 16);
    cr_assert_eq(tok_dec, 4 * 240 * 16, "every trained token merged");
}

static double weight_of(json_t *evs, int id, int *count, json_int_t after_seq)
{
    double w = 0;
    size_t i, j;
    json_t *e, *p;
    *count = 0;
    json_array_foreach(evs, i, e)
    {
        if (strcmp(tr_type(e), "merge") != 0 || tr_int(e, "seq") <= after_seq)
            continue;
        json_array_foreach(json_object_get(e, "participants"), j, p) if (tr_int(p, "learner") == id)
        {
            w += json_number_value(json_object_get(p, "weight"));
            (*count)++;
        }
    }
    return w;
}

Test(trainer_decoupled, stop_kill_and_slow_learners, .timeout = 200)
{
    tr_run r = {0};
    const char *args[] = {"--mode", "decoupled", "--learners", "4", TR_K1_H24, TR_FAULT_RUN, TR_MODEL, NULL};
    const char *slow[] = {"--slowdown", "2", NULL};
    tr_syncer_start(&r, "decchaos", args);
    pid_t p[4];
    tr_learners_start(&r, 3, p);
    p[3] = tr_learner_start(&r, 3, slow, NULL);
    cr_assert_geq(tr_wait_merges(&r, 30, 60000), 30, "training started");

    /* SIGSTOP learner 1 for many rounds: merges continue */
    it_signal(p[1], SIGSTOP, 1);
    json_int_t m1 = tr_merges(&r);
    cx_sleep_ms(4000);
    json_int_t m2 = tr_merges(&r);
    cr_assert_geq(m2, m1 + 12, "merges continue while a learner is stopped (%lld -> %lld)", (long long)m1,
                  (long long)m2);
    json_int_t cont_seq = tr_last_seq(&r);
    it_signal(p[1], SIGCONT, 1);
    /* it catches up: contributions of incarnation 1 merged again */
    int n1 = 0;
    json_t *evs = NULL;
    int64_t end = cx_mono_ms() + 40000;
    while (cx_mono_ms() < end && n1 < 3) {
        cx_sleep_ms(500);
        json_decref(evs);
        evs = tr_events(&r, 0);
        weight_of(evs, 1, &n1, cont_seq);
    }
    cr_assert_geq(n1, 3, "the stopped learner's contributions are merged again after SIGCONT");
    int absent = 0;
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e) if (strcmp(tr_type(e), "drop") == 0 && tr_int(e, "learner") == 1 &&
                                      tr_int(e, "seq") <= cont_seq + 20) absent++;
    cr_assert_gt(absent, 0, "the stopped learner was marked absent");
    json_decref(evs);

    /* SIGKILL learner 2 and restart it */
    tr_kill(p[2]);
    json_int_t m3 = tr_merges(&r);
    cr_assert_geq(tr_wait_merges(&r, m3 + 8, 30000), m3 + 8, "merges continue without the killed learner");
    tr_learner_start(&r, 2, NULL, NULL);
    tr_rejoin w = tr_wait_rejoin(&r, 2, 1, 4, 0);
    cr_assert_eq(w.inc, 2, "rejoined with a new incarnation");
    cr_assert_geq(w.first, 0, "contributed again after pulling every fragment");

    /* the slow learner still contributes, with lower total weight */
    int n0, n3;
    double w0 = weight_of(w.evs, 0, &n0, 0), w3 = weight_of(w.evs, 3, &n3, 0);
    cr_log_info("merged contributions: fast learner 0 %d (weight %.0f), slow learner 3 %d (weight %.0f)", n0,
                w0, n3, w3);
    cr_assert_gt(n3, 0, "the slow learner's contributions are merged");
    cr_assert_lt(w3, w0, "with lower total weight than a full-speed learner");
    json_decref(w.evs);
    tr_done(&r);
}

/* Runs M learners to the end of their steps and returns the syncer's status
 * (the caller frees it). */
static json_t *rounds_run(const char *tag, const char *const *args, int M)
{
    tr_run r = {0};
    tr_syncer_start(&r, tag, args);
    pid_t p[8];
    for (int i = 0; i < M; i++)
        p[i] = tr_learner_start(&r, i, NULL, NULL);
    for (int i = 0; i < M; i++)
        tr_expect_exit0(&r, p[i], i, 250000);
    json_t *st = tr_get(&r, "/v1/status");
    tr_done(&r);
    return st;
}

static double rounds_num(json_t *st, const char *key)
{
    json_t *v = json_object_get(json_object_get(st, "rounds"), key);
    cr_assert(json_is_number(v), "status rounds.%s is a number", key);
    return json_number_value(v);
}

/* The share of contributions refused as stale. A fault-free run refuses
 * one only when the shared CPU left a learner far behind the others (its
 * base more than max_staleness rounds old): on a loaded 2-core machine
 * with ASan that happens to 1-2 of a few hundred, and their work is not
 * lost (every trained token is still merged); a bound that did not suit M
 * refused a large share. */
static double stale_share(json_t *st)
{
    double stale = rounds_num(st, "stale_rejected");
    return stale / (stale + rounds_num(st, "contributions_merged"));
}

#define STALE_SHARE_MAX 0.05

/* Fault-free, 4 learners, K=1, default grace window and tau: each learner
 * takes the merged value of the round that holds its contribution (and
 * rebases on it), and every token trained reaches a merge. The small GPT:
 * its steps (tens of ms under ASan) are long next to a pull, as in the
 * paper's setting; bounded by steps. Rounds are numbered by the syncer and
 * nothing waits for a learner that runs behind, so a round gathers the
 * contributions that arrive within its grace window (1.1-1.3 per round
 * here: the learners drift apart on a shared CPU; docs/training.md). */
Test(trainer_decoupled, k1_learners_adopt_their_own_and_every_token_is_merged, .timeout = 300)
{
    const char *args[] = {"--mode",          "decoupled", "--learners", "4",   "--quorum",      "1",
                          "--steps",         "200",       "--model",    "gpt", "--context",     "32",
                          "--embed",         "32",        "--hidden",   "128", "--layers",      "2",
                          "--heads",         "2",         "--batch",    "8",   "--eval-tokens", "256",
                          "--eval-every-ms", "1000",      NULL};
    json_t *st = rounds_run("decrounds", args, 4);
    double pm = rounds_num(st, "participants_mean"), merged = rounds_num(st, "merged");
    cr_log_info("4 learners, K=1: %.0f rounds merged, %.2f contributions per round, %.0f lagged, %.0f stale, "
                "%lld tokens merged",
                merged, pm, rounds_num(st, "lagged"), rounds_num(st, "stale_rejected"),
                (long long)tr_int(st, "tokens_merged"));
    cr_assert_gt(merged, 10, "rounds were merged");
    cr_assert_eq(tr_int(st, "tokens_merged"), 4 * 200 * 8, "every trained token was merged");
    cr_assert_leq(stale_share(st), STALE_SHARE_MAX, "%.0f contributions refused as stale",
                  rounds_num(st, "stale_rejected"));
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(st, "learners"), i, l)
    {
        json_t *a = json_object_get(l, "adopted_with_own");
        cr_assert(json_is_number(a), "learner %lld adopted merged values", (long long)tr_int(l, "id"));
        cr_assert_geq(json_number_value(a), 0.95,
                      "learner %lld: only %.2f of its adopted values held its own work",
                      (long long)tr_int(l, "id"), json_number_value(a));
        cr_assert_gt(tr_int(l, "adopted"), 5);
    }
    json_decref(st);
}

/* 8 learners, K=1, the default max_staleness (in rounds of the fragment,
 * scaled with M): a fault-free run refuses almost no contribution as stale
 * (stale_share). */
Test(trainer_decoupled, eight_learners_almost_no_contribution_refused_as_stale, .timeout = 300)
{
    const char *args[] = {"--mode",          "decoupled", "--learners", "8",  "--quorum",    "1",
                          "--steps",         "240",       "--H",        "24", "--fragments", "4",
                          "--eval-every-ms", "1000",      TR_MODEL,     NULL};
    json_t *st = rounds_run("decstale8", args, 8);
    double stale = rounds_num(st, "stale_rejected"), pm = rounds_num(st, "participants_mean");
    cr_log_info("8 learners, K=1: %.2f contributions per round, %.0f stale", pm, stale);
    cr_assert_leq(stale_share(st), STALE_SHARE_MAX, "%.0f contributions refused as stale", stale);
    cr_assert_eq(
        tr_int(json_object_get(json_object_get(st, "contributions"), "rejected_by_reason"), "stale_version"),
        stale, "the two counts of stale refusals agree");
    cr_assert_geq(rounds_num(st, "merged"), 20, "rounds were merged");
    json_decref(st);
}

/* The last "step=N" a learner logged (every 50 steps), or -1. */
static long long logged_step(tr_run *r, int id)
{
    char path[700], line[512];
    snprintf(path, sizeof path, "%s/learner%d.log", r->dir, id);
    FILE *f = fopen(path, "r");
    long long last = -1;
    while (f && fgets(line, sizeof line, f)) {
        const char *s = strstr(line, " step=");
        if (s)
            last = atoll(s + 6);
    }
    if (f)
        fclose(f);
    return last;
}

/* Wait (bounded by timeout_ms) until learner id has logged a step >= want;
 * its last logged step. */
static long long wait_logged_step(tr_run *r, int id, long long want, long timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    long long got = logged_step(r, id);
    while (got < want && cx_mono_ms() < end) {
        cx_sleep_ms(100);
        got = logged_step(r, id);
    }
    return got;
}

/* tau steps of overlap: a learner that does not have a merged value at
 * s + tau waits for it only a bounded time, so a frozen syncer does not
 * stall the inner loop (each learner keeps stepping while it is frozen).
 * Counted in steps, not in time: each learner must get 100 steps further
 * with the syncer still frozen, within 30 s (a loaded ASan learner needs a
 * few); one that waited on the frozen syncer would sit out an HTTP timeout
 * (15 s) every few steps and manage about a dozen. */
Test(trainer_decoupled, a_frozen_syncer_does_not_stall_the_inner_loop, .timeout = 200)
{
    tr_run r = {0};
    const char *args[] = {"--mode", "decoupled", "--learners", "2",           "--quorum", "1",      "--steps",
                          "100000", "--H",       "24",         "--fragments", "4",        TR_MODEL, NULL};
    tr_syncer_start(&r, "decfreeze", args);
    for (int i = 0; i < 2; i++)
        tr_learner_start(&r, i, NULL, NULL);
    cr_assert_geq(tr_wait_merges(&r, 20, 60000), 20, "training started");
    for (int i = 0; i < 2; i++)
        cr_assert_geq(wait_logged_step(&r, i, 50, 60000), 50, "learner %d logs its steps", i);
    it_signal(r.syncer, SIGSTOP, 1);
    cx_sleep_ms(500); /* every contribution in flight now waits for a frozen syncer */
    long long a[2], b[2];
    for (int i = 0; i < 2; i++)
        a[i] = logged_step(&r, i);
    for (int i = 0; i < 2; i++)
        b[i] = wait_logged_step(&r, i, a[i] + 100, 30000);
    it_signal(r.syncer, SIGCONT, 1);
    cr_log_info("steps while the syncer was frozen: learner 0 %lld -> %lld, learner 1 %lld -> %lld", a[0],
                b[0], a[1], b[1]);
    for (int i = 0; i < 2; i++)
        cr_assert_geq(b[i], a[i] + 100, "learner %d stalled while the syncer was frozen (%lld -> %lld)", i,
                      a[i], b[i]);
    tr_done(&r);
}
