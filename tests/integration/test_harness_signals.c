/* test_harness_signals.c - the harness's safety: SIGINT mid-run reverts
 * every fault, stops every process, journals "interrupted" and exits 2;
 * SIGKILL mid-run leaves the agents to their lease: within the lease ttl
 * (10 s) each reverts what the harness injected (revert_reason "lease"),
 * and within ttl + orphan exit (20 s) every process of the run is gone,
 * each learner having written its SIGTERM checkpoint. The test then kills
 * what the dead harness left behind itself. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness_it.h"
#include "trainer/checkpoint.h"

static void fini(void)
{
    it_cleanup();
}

TestSuite(harness_signals, .fini = fini, .timeout = 120);

/* The token in RUN/rel ("token": the operator's, "tokens/agent-N": agent
 * N's own), checked owner-only. */
static char *token_of(const char *run, const char *rel)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", run, rel);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0, "%s", p);
    cr_assert_eq(st.st_mode & 077, 0, "the run's token is readable by its owner only (mode %o)",
                 (unsigned)(st.st_mode & 0777));
    char *t = hx_read(p);
    cr_assert_not_null(t);
    char *nl = strchr(t, '\n');
    if (nl)
        *nl = '\0';
    return t;
}

/* Start `chaosloco run` on a long run with a long pause fault on learner 1
 * at 1 s (s->exp), and wait until the fault is injected; its pid. */
static pid_t start_long_run(const hx_scratch *s)
{
    hx_write(s->exp, "{\"title\": \"long pause\", \"seed\": 5,"
                     " \"topology\": {\"learners\": 2, \"training\": " HX_TRAIN(
                         "decoupled", 1000000) "},"
                                               " \"method\": [{\"name\": \"pause-1\", \"fault\": \"pause\", "
                                               "\"targets\": {\"ids\": [1]},"
                                               " \"at_s\": 1, \"duration_ms\": 120000}],"
                                               " \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}");
    const char *args[] = {"run", s->exp, "--out", s->out, NULL};
    pid_t pid = it_start(s->dir, "run", args, NULL);
    char ev[1200];
    snprintf(ev, sizeof ev, "%s/events.jsonl", s->out);
    int ok = hx_wait_contains(ev, "\"phase\":\"ok\"", 60000);
    if (!ok)
        it_dump_log(s->dir, "run");
    cr_assert(ok, "the pause fault was injected");
    return pid;
}

/* The run's journal (new reference): valid, and "interrupted". */
static json_t *interrupted_journal(const hx_scratch *s)
{
    json_t *j = hx_journal(s->dir, s->out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "status")), "interrupted",
                     "Chaos Toolkit's status for a run stopped from outside or by a guard");
    return j;
}

/* Wait until every pid of all is gone, or bound_ms after since; how many
 * are still alive. */
static int wait_all_gone(json_t *all, int64_t since, long bound_ms)
{
    int left = 1;
    while (left && cx_mono_ms() - since < bound_ms) {
        left = 0;
        size_t i;
        json_t *p;
        json_array_foreach(all, i, p) left += hx_alive((pid_t)json_integer_value(p));
        if (left)
            cx_sleep_ms(100);
    }
    return left;
}

Test(harness_signals, sigint_reverts_everything_and_exits_2)
{
    hx_scratch s;
    hx_scratch_init(&s, "hsig", "long.json");
    pid_t pid = start_long_run(&s);
    it_signal(pid, SIGINT, 0);
    int rc = hx_wait_rc(s.dir, "run", pid, 60000, 2);
    cr_assert_eq(rc, 2, "SIGINT exits 2 (got %d)", rc);
    json_decref(interrupted_journal(&s));

    /* every fault the agents held ended reverted (the harness's last look,
     * after its revert) and the agent's own persisted registry agrees */
    json_t *fl = hx_load_in(s.out, "faults.json");
    cr_assert(json_array_size(fl) >= 1, "faults.json lists the pause");
    size_t i;
    json_t *f;
    json_array_foreach(fl, i, f)
    {
        json_t *rec = json_object_get(f, "record");
        cr_expect_str_eq(json_string_value(json_object_get(rec, "state")), "reverted", "fault %s reverted",
                         json_string_value(json_object_get(rec, "id")));
    }
    json_decref(fl);
    /* every process from the run is gone */
    hx_expect_all_gone(s.out, 3, "the syncer and both agents");
    free(s.dir);
}

Test(harness_signals, sigkill_leaves_the_revert_to_the_lease)
{
    hx_scratch s;
    hx_scratch_init(&s, "hsig", "long.json");
    pid_t pid = start_long_run(&s);
    int64_t killed_at = cx_mono_ms();
    it_signal(pid, SIGKILL, 0);
    hx_exit_code(pid, 10000);

    /* agent 1's address and the run's token, as the harness left them */
    char la[1200], addr[128], url[200];
    snprintf(la, sizeof la, "%s/agents/1", s.out);
    cr_assert_eq(it_wait_addr(la, addr, sizeof addr, 1000), 0);
    snprintf(url, sizeof url, "http://%s/v1/faults", addr);
    char *token = token_of(s.out, "tokens/agent-1");
    /* each agent has a token of its own: agent 0's and the operator's open no other agent */
    char *other = token_of(s.out, "tokens/agent-0"), *oper = token_of(s.out, "token");
    int st0 = 0;
    json_decref(it_http_json("GET", url, NULL, other, &st0));
    cr_expect_eq(st0, 401, "agent 1 refuses agent 0's token (got %d)", st0);
    json_decref(it_http_json("GET", url, NULL, oper, &st0));
    cr_expect_eq(st0, 401, "agent 1 refuses the operator's token (got %d)", st0);
    free(other);
    free(oper);
    int reverted = 0;
    const char *reason = "";
    json_t *ans = NULL;
    while (cx_mono_ms() - killed_at < 25000 && !reverted) {
        int st = 0;
        json_decref(ans);
        ans = it_http_json("GET", url, NULL, token, &st);
        json_t *rec = json_array_get(json_object_get(ans, "faults"), 0);
        if (rec && strcmp(json_string_value(json_object_get(rec, "state")), "active") != 0) {
            reverted = 1;
            reason = json_string_value(json_object_get(rec, "revert_reason"));
        } else {
            cx_sleep_ms(200);
        }
    }
    double after_s = (double)(cx_mono_ms() - killed_at) / 1000.0;
    cr_assert(reverted, "the agent reverted the pause after the harness died (waited %.1f s)", after_s);
    cr_expect_str_eq(reason ? reason : "", "lease", "revert_reason lease");
    /* ttl 10 s, renewed every 3.3 s: it lapses 6.7..10 s after the kill; 5 s of tolerance for a loaded box */
    cr_expect_leq(after_s, 15.0, "reverted within the lease ttl (+tolerance): %.1f s", after_s);
    json_decref(ans);
    free(token);
    /* Nothing stays behind: the syncer died with the harness (parent-death
     * signal) and each agent, 5 s after its lease lapsed with no new
     * lease, stopped its learner and exited (--orphan-exit-ms). */
    json_t *all = hx_pids(s.out);
    int left = wait_all_gone(all, killed_at, 40000);
    double gone_s = (double)(cx_mono_ms() - killed_at) / 1000.0;
    hx_kill_leftovers(s.out); /* whatever the assertion below finds, leave nothing running */
    cr_expect_eq(left, 0, "%d process(es) of the dead harness still alive %.1f s after it died", left,
                 gone_s);
    json_decref(all);
    free(s.dir);
}

Test(harness_signals, stop_condition_aborts_halts_and_exits_2)
{
    hx_scratch s;
    hx_scratch_init(&s, "hsig", "stop.json");
    /* an eval loss above 0.5 nats is certain (the loss starts near ln 256) */
    hx_write(s.exp, "{\"title\": \"stop at once\", \"seed\": 5,"
                    " \"topology\": {\"learners\": 2, \"training\": " HX_TRAIN(
                        "decoupled", 1000000) "},"
                                              " \"method\": [{\"name\": \"pause-0\", \"fault\": \"pause\", "
                                              "\"targets\": {\"ids\": [0]},"
                                              " \"at_s\": 0, \"duration_ms\": 120000}],"
                                              " \"stop_conditions\": [{\"eval_loss_above\": 0.5}],"
                                              " \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}");
    const char *args[] = {"run", s.exp, "--out", s.out, NULL};
    int rc = hx_run_rc(s.dir, "run", args, 60000, 2);
    cr_assert_eq(rc, 2, "a stop condition exits 2 (got %d)", rc);
    json_t *j = interrupted_journal(&s);
    /* the abort halted every agent (recorded as rollbacks) */
    int halts = 0;
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(j, "rollbacks"), i, a)
    {
        const char *f = json_string_value(json_object_get(json_object_get(a, "chaosloco"), "fault"));
        if (f && strcmp(f, "halt") == 0 &&
            strcmp(json_string_value(json_object_get(a, "status")), "succeeded") == 0)
            halts++;
    }
    cr_expect_eq(halts, 2, "POST /v1/halt on both agents");
    json_decref(j);
    char *ev = hx_read_in(s.out, "events.jsonl");
    cr_assert_not_null(ev);
    cr_expect(strstr(ev, "stop condition eval_loss_above") != NULL, "the reason is recorded");
    free(ev);
    hx_expect_all_gone(s.out, 0, NULL);
    free(s.dir);
}

/* Every line of path that contains "step=" (the learner's progress log,
 * every 50 steps): the last such step, -1 if none. */
static long long last_logged_step(const char *path)
{
    char *d = hx_read(path);
    long long last = -1;
    for (const char *p = d; p && (p = strstr(p, " step=")) != NULL; p += 6)
        last = strtoll(p + 6, NULL, 10);
    free(d);
    return last;
}

#define SK_LEARNERS 4
/* docs/experiments.md: the lease lapses <= 10 s (ttl) after the kill, each
 * agent leaves 5 s later (--orphan-exit-ms) after stopping its learner
 * (SIGTERM; ~1 s, at most its 5 s grace): the grace is the tolerance */
#define SK_BOUND_S 20.0

/* A SIGKILLed harness (decoupled, 4 learners, MLP) leaves nothing running
 * within the documented bound, and every learner is stopped the clean way:
 * SIGTERM from its agent, its checkpoint written before it exits.
 *
 * How a SIGTERM checkpoint is told from a periodic one: the run sets
 * learner_checkpoint_every 0 (no periodic checkpoint) and 10^6 steps (no
 * end of training), and the test checks that no learner.ckpt.* exists when
 * the harness is killed. The only path left that writes one is the
 * learner's exit on a signal (learner_run: save_checkpoint after the loop
 * ends on *stop; a give-up exits 1 without one). So after the kill a valid
 * checkpoint (ckpt_learner_load checks its CRC) of this learner id with a
 * step >= the last step its log showed before the kill is its SIGTERM
 * checkpoint; the log line "signal 15: checkpointed, exiting" is checked as
 * well when the agent's unit.log has it. */
Test(harness_signals, sigkill_leaves_no_process_and_every_sigterm_checkpoint, .timeout = 150)
{
    hx_scratch s;
    hx_scratch_init(&s, "hsigk", "four.json");
    hx_write(s.exp,
             "{\"title\": \"four learners, no periodic checkpoint\", \"seed\": 7,"
             " \"topology\": {\"learners\": 4, \"training\": {\"model\": \"mlp\", \"data\": \"synthetic\","
             " \"mode\": \"decoupled\", \"quorum\": 1, \"fragments\": 2, \"H\": 8, \"steps\": 1000000,"
             " \"hidden\": 32, \"batch\": 4, \"eval_every_ms\": 200, \"eval_tokens\": 1024,"
             " \"learner_checkpoint_every\": 0}},"
             " \"method\": [],"
             " \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}");
    const char *args[] = {"run", s.exp, "--out", s.out, NULL};
    pid_t pid = it_start(s.dir, "run", args, NULL);
    /* every learner trained (its log shows step=50 or later) */
    char logs[SK_LEARNERS][1200], ckdir[SK_LEARNERS][1200];
    for (int i = 0; i < SK_LEARNERS; i++) {
        snprintf(logs[i], sizeof logs[i], "%s/agents/%d/unit.log", s.out, i);
        snprintf(ckdir[i], sizeof ckdir[i], "%s/learners/%d", s.out, i);
    }
    int64_t end = cx_mono_ms() + 90000;
    int trained = 0;
    while (trained < SK_LEARNERS && cx_mono_ms() < end) {
        trained = 0;
        for (int i = 0; i < SK_LEARNERS; i++)
            trained += last_logged_step(logs[i]) >= 50;
        if (trained < SK_LEARNERS)
            cx_sleep_ms(200);
    }
    if (trained < SK_LEARNERS)
        it_dump_log(s.dir, "run");
    cr_assert_eq(trained, SK_LEARNERS, "every learner trained 50 steps before the kill (%d did)", trained);
    /* pids.json lists the syncer, the agents and their learners */
    json_t *all = NULL;
    while (cx_mono_ms() < end) {
        json_decref(all);
        all = hx_pids(s.out);
        if (json_array_size(all) >= 1 + 2 * SK_LEARNERS)
            break;
        cx_sleep_ms(200);
    }
    cr_assert_geq(json_array_size(all), 1 + 2 * SK_LEARNERS, "pids.json lists syncer, agents and learners");
    long long before[SK_LEARNERS];
    for (int i = 0; i < SK_LEARNERS; i++) {
        before[i] = last_logged_step(logs[i]);
        char a[1300], b[1300];
        snprintf(a, sizeof a, "%s/learner.ckpt.a", ckdir[i]);
        snprintf(b, sizeof b, "%s/learner.ckpt.b", ckdir[i]);
        cr_assert(access(a, F_OK) != 0 && access(b, F_OK) != 0,
                  "learner %d has no checkpoint before the kill (learner_checkpoint_every 0)", i);
    }
    int64_t killed_at = cx_mono_ms();
    it_signal(pid, SIGKILL, 0);
    hx_exit_code(pid, 10000);
    /* nothing of the run is left within the bound */
    int left = wait_all_gone(all, killed_at, 45000);
    double gone_s = (double)(cx_mono_ms() - killed_at) / 1000.0;
    hx_kill_leftovers(s.out); /* whatever the assertions below find, leave nothing running */
    json_decref(all);
    cr_log_info("every process of the SIGKILLed harness gone after %.1f s", gone_s);
    cr_assert_eq(left, 0, "%d process(es) of the dead harness still alive %.1f s after it died", left,
                 gone_s);
    cr_assert_leq(gone_s, SK_BOUND_S, "gone within the documented %.0f s: %.1f s", SK_BOUND_S, gone_s);
    /* every learner wrote its SIGTERM checkpoint */
    for (int i = 0; i < SK_LEARNERS; i++) {
        ckpt_learner c;
        char why[256];
        int rc = ckpt_learner_load(ckdir[i], &c, 0, 0, 0, why, sizeof why);
        if (rc != 0) {
            char name[32];
            snprintf(name, sizeof name, "agents/%d/unit", i);
            it_dump_log(s.out, name);
        }
        cr_assert_eq(rc, 0, "learner %d: a valid checkpoint after its SIGTERM (%s)", i, why);
        cr_log_info("learner %d: SIGTERM checkpoint at step %lld (its log showed step %lld before the kill)",
                    i, (long long)c.step, before[i]);
        cr_expect_eq(c.learner, i, "learner %d's checkpoint is its own", i);
        cr_expect_geq(c.step, before[i], "learner %d: the checkpoint is of its last steps", i);
        ckpt_learner_cleanup(&c);
        char *log = hx_read(logs[i]);
        cr_expect(log && strstr(log, "signal 15: checkpointed, exiting"),
                  "learner %d logged its SIGTERM exit", i);
        free(log);
    }
    free(s.dir);
}
