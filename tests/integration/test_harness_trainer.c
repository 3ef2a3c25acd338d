/* test_harness_trainer.c - topology.trainer: `chaosloco run` launches a
 * trainer from command templates instead of its own syncer and learners.
 * Here the "foreign" trainer is chaosloco's own binary started through the
 * templates (no PyTorch needed; experiments/pytorch-diloco-kill.json runs a
 * real foreign one): the placeholders must reach it expanded, the learners
 * must run under their agents behind the proxies (a kill is judged by
 * reintegration), the coordinator's files go where docs/experiments.md says,
 * and everything started is gone afterwards. A coordinator that dies at
 * start fails the run with its log named. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness_it.h"

static void fini(void)
{
    it_cleanup();
}

TestSuite(harness_trainer, .fini = fini, .timeout = 200);

Test(harness_trainer, templates_launch_a_trainer_under_the_agents)
{
    hx_scratch s;
    hx_scratch_init(&s, "htrn", "trainer.json");
    const char *out = s.out;
    char doc[8192];
    const char *bin = CHAOSLOCO_BIN;
    snprintf(
        doc, sizeof doc,
        "{\"title\": \"templates\", \"seed\": 3,"
        " \"topology\": {\"learners\": 2, \"training\": " HX_TRAIN(
            "decoupled",
            4000) ","
                  "  \"trainer\": {\"cwd\": \".\","
                  "   \"coordinator\": [\"%s\", \"syncer\", \"--listen\", \"{listen}\", \"--state-dir\", "
                  "\"{state_dir}\","
                  "                   \"--config\", \"{config}\", \"--credentials-dir\", "
                  "\"{credentials_dir}\"],"
                  "   \"learner\": [\"%s\", \"learner\", \"--syncer\", \"http://{proxy}\", \"--id\", "
                  "\"{id}\","
                  "               \"--state-dir\", \"{state_dir}\", \"--credential-file\", "
                  "\"{credential_file}\","
                  "               \"--steps\", \"{steps}\"]}},"
                  " \"horizon\": {\"min_merges\": 30},"
                  " \"method\": [{\"name\": \"kill-1\", \"fault\": \"kill\", \"targets\": {\"ids\": [1]},"
                  "  \"at_outer_step\": 10, \"params\": {\"signal\": \"KILL\", \"restart_after_ms\": 1000},"
                  "  \"duration_ms\": 1000}],"
                  " \"verify\": [{\"hypothesis\": \"reintegration\", \"learner\": 1, \"join_s\": 20, "
                  "\"merged\": 1,"
                  "  \"merged_s\": 20, \"tol\": 1.0},"
                  "  {\"hypothesis\": \"fault_effective\"}, {\"hypothesis\": \"versions_monotonic\"}]}",
        bin, bin);
    hx_write(s.exp, doc);
    const char *args[] = {"run", s.exp, "--out", out, "--time-limit", "150", NULL};
    int rc = hx_run(s.dir, "run", args, 180000);
    cr_assert_eq(rc, 0, "the run passes (exit %d)", rc);

    char f[1300];
    struct stat st;
    snprintf(f, sizeof f, "%s/coordinator/listen.addr", out);
    cr_expect_eq(stat(f, &st), 0, "the coordinator wrote listen.addr in {state_dir} = RUN/coordinator");
    snprintf(f, sizeof f, "%s/syncer", out);
    cr_expect_neq(stat(f, &st), 0, "no RUN/syncer: the syncer of the harness was not started");
    char *log = hx_read_in(out, "logs/coordinator.log");
    cr_expect(log && strlen(log) > 0, "the coordinator's output is in RUN/logs/coordinator.log");
    free(log);
    /* {proxy} reached the learner as the agent's proxy address, not the
     * coordinator's: the learner's traffic goes through its agent */
    char *addr = hx_read_in(out, "coordinator/listen.addr");
    cr_assert_not_null(addr);
    addr[strcspn(addr, "\n")] = '\0';
    char *unit = hx_read_in(out, "agents/1/unit.log");
    cr_assert_not_null(unit, "learner 1's output is in its agent's unit.log");
    char *cfg = strstr(unit, "config learner=1 syncer=http://");
    cr_assert_not_null(cfg, "the learner logged its config line");
    char coord[300];
    snprintf(coord, sizeof coord, "syncer=http://%s ", addr);
    cr_expect(strncmp(cfg + strlen("config learner=1 "), coord, strlen(coord)) != 0,
              "{proxy} is the agent's proxy, not the coordinator's address %s", addr);
    char sd[1300];
    snprintf(sd, sizeof sd, "state_dir=%s/learners/1", out[0] == '/' ? out : "");
    cr_expect(strstr(cfg, sd) != NULL, "{state_dir} is RUN/learners/1, absolute");
    free(unit);
    char *ev = hx_read_in(out, "events.jsonl");
    cr_assert_not_null(ev);
    cr_expect(strstr(ev, "\"type\":\"join\"") != NULL, "the coordinator's events were collected");
    free(ev);
    free(addr);

    hx_expect_all_gone(out, 3, "the coordinator and both agents");
    free(s.dir);
}

/* Run the experiment in s (60 s time limit), which must fail at start
 * with a harness error saying why (hx_expect_harness_error); its log
 * (malloc'd). */
static char *run_failing(const hx_scratch *s, const char *why)
{
    const char *args[] = {"run", s->exp, "--out", s->out, "--time-limit", "60", NULL};
    char *log = hx_expect_harness_error(s->dir, it_start(s->dir, "run", args, NULL), 90000, why);
    cr_assert_not_null(log);
    return log;
}

Test(harness_trainer, a_coordinator_that_dies_at_start_fails_the_run)
{
    hx_scratch s;
    hx_scratch_init(&s, "htrd", "dies.json");
    hx_write(s.exp, "{\"title\": \"dies\", \"topology\": {\"learners\": 1, \"trainer\": {"
                    "\"coordinator\": [\"/bin/false\", \"{listen}\", \"{state_dir}\"],"
                    "\"learner\": [\"/bin/true\", \"{proxy}\"]}}, \"horizon\": {\"min_merges\": 1},"
                    " \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}");
    char *log = run_failing(&s, "coordinator exited during start-up");
    cr_expect(strstr(log, "logs/coordinator.log") != NULL, "and its log");
    free(log);
    hx_kill_leftovers(s.out);
    free(s.dir);
}

/* The file form of the telemetry contract (topology.trainer.telemetry)
 * in s: the coordinator is /bin/sh running body ($1 = {state_dir}, where
 * it writes events.jsonl and listen.addr), the one learner sleeps; extra
 * (JSON members, each with a trailing comma, or "") goes into the
 * experiment after its horizon. */
static void file_form_write(const hx_scratch *s, const char *body, const char *extra)
{
    char script[1100], doc[4096];
    snprintf(script, sizeof script, "%s/coord.sh", s->dir);
    hx_write(script, body);
    snprintf(doc, sizeof doc,
             "{\"title\": \"file form\", \"topology\": {\"learners\": 1, \"trainer\": {"
             "\"coordinator\": [\"/bin/sh\", \"%s\", \"{state_dir}\", \"{listen}\"],"
             "\"learner\": [\"/bin/sh\", \"-c\", \"exec sleep 100\", \"sh\", \"{proxy}\"],"
             "\"telemetry\": {\"events_file\": \"{state_dir}/events.jsonl\"}}},"
             " \"horizon\": {\"min_merges\": 1},%s \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}",
             script, extra);
    hx_write(s->exp, doc);
}

/* The file form of the telemetry contract (topology.trainer.telemetry): a
 * coordinator that writes a malformed second line to its events file fails
 * the run with a harness error naming the file and the line, and serves no
 * HTTP at all (listen.addr names a port nothing listens on: the harness
 * must not need it for telemetry). */
Test(harness_trainer, a_malformed_events_file_line_fails_the_run)
{
    hx_scratch s;
    hx_scratch_init(&s, "htrf", "file.json");
    file_form_write(&s,
             "d=$1\n"
             "printf '%s\\n' '{\"seq\":1,\"t_mono_ms\":1,\"type\":\"start\",\"versions\":[0]}' "
             "'{\"seq\":2,\"t_mono_ms\":2,\"type\":\"merge\"' > \"$d/events.jsonl\"\n"
             "echo 127.0.0.1:9 > \"$d/listen.addr.tmp\" && mv \"$d/listen.addr.tmp\" \"$d/listen.addr\"\n"
             "exec sleep 100\n",
                    "");
    char *log = run_failing(&s, "coordinator/events.jsonl, line 2: not a JSON object");
    free(log);
    hx_kill_leftovers(s.out);
    free(s.dir);
}

/* A heartbeat of a learner the topology does not have (a file of another
 * run, or ids without bound) fails the run naming the learner and the
 * event, before any per-learner table grows for it. */
Test(harness_trainer, an_events_file_learner_outside_the_topology_fails_the_run)
{
    hx_scratch s;
    hx_scratch_init(&s, "htrl", "file.json");
    file_form_write(&s,
             "d=$1\n"
             "t=$(python3 -c 'import time; print(int(time.monotonic() * 1000))')\n" /* the harness's clock */
             "printf '%s\\n' \"{\\\"seq\\\":1,\\\"t_mono_ms\\\":$t,\\\"type\\\":\\\"start\\\",\\\"versions\\\":[0]}\" "
             "\"{\\\"seq\\\":2,\\\"t_mono_ms\\\":$t,\\\"type\\\":\\\"heartbeat\\\",\\\"learner\\\":4711,\\\"step\\\":1}\" "
             "> \"$d/events.jsonl\"\n"
             "echo 127.0.0.1:9 > \"$d/listen.addr.tmp\" && mv \"$d/listen.addr.tmp\" \"$d/listen.addr\"\n"
             "exec sleep 100\n",
                    "");
    char *log = run_failing(&s, "event seq 2: learner 4711 is not one of the topology's 1 learners (0..0)");
    free(log);
    hx_kill_leftovers(s.out);
    free(s.dir);
}

/* Run a file-form coordinator that writes an eval stream (below) under
 * the stop condition cond (a JSON value of eval_loss_above); the harness's
 * reason (malloc'd, from RUN/events.jsonl), asserting exit 2. */
static char *run_eval_stream(const char *tag, const char *cond)
{
    hx_scratch s;
    hx_scratch_init(&s, tag, "spike.json");
    char stops[256];
    snprintf(stops, sizeof stops, " \"stop_conditions\": [{\"eval_loss_above\": %s}],", cond);
    /* seq 3: the spike (one eval above 8, then below again); seqs 6-9 a
     * loss that stays above. Times on the harness's clock. */
    file_form_write(&s,
             "d=$1\n"
             "ev() { t=$(python3 -c 'import time; print(int(time.monotonic() * 1000))'); "
             "printf '{\"seq\":%s,\"t_mono_ms\":%s,\"type\":\"%s\"%s}\\n' \"$1\" \"$t\" \"$2\" \"$3\" "
             ">> \"$d/events.jsonl\"; }\n"
             "ev 1 start ',\"versions\":[0]'\n"
             "echo 127.0.0.1:9 > \"$d/listen.addr.tmp\" && mv \"$d/listen.addr.tmp\" \"$d/listen.addr\"\n"
             "sleep 4\n"
             "seq=2\n"
             "for l in 3.73 8.94 3.39 3.30 8.50 8.60 8.70 8.80; do\n"
             "  ev $seq eval \",\\\"loss\\\":$l\"; seq=$((seq + 1)); sleep 0.4\n"
             "done\n"
             "exec sleep 100\n",
                    stops);
    const char *args[] = {"run", s.exp, "--out", s.out, "--time-limit", "60", NULL};
    int rc = hx_run_rc(s.dir, "run", args, 90000, 2);
    cr_assert_eq(rc, 2, "a stop condition ends the run with exit 2 (got %d)", rc);
    char *ev = hx_read_in(s.out, "events.jsonl");
    cr_assert_not_null(ev);
    char *why = strstr(ev, "stop condition eval_loss_above");
    cr_assert_not_null(why, "the reason is recorded");
    char *reason = strndup(why, strcspn(why, "\"\n"));
    free(ev);
    hx_expect_all_gone(s.out, 2, "the coordinator and the agent");
    free(s.dir);
    return reason;
}

/* A stop condition that fires on one eval cannot tell a transient loss
 * spike from a divergence (docs/results.md, claim 4: a ddp run read 3.73 ->
 * 8.94 -> 3.39 nats within eight steps, with no fault, and was aborted).
 * With "evals": 3 the spike (event seq 3) passes and the loss that stays
 * above aborts at its third eval (seq 8); the one-eval form still stops at
 * the spike, which shows the harness saw it. */
Test(harness_trainer, a_transient_eval_spike_is_not_a_divergence)
{
    char *once = run_eval_stream("htsp1", "8");
    cr_expect(strstr(once, "eval loss 8.9400 (event seq 3)") != NULL, "one eval: stops at the spike: %s", once);
    free(once);
    char *thrice = run_eval_stream("htsp3", "{\"nats\": 8, \"evals\": 3}");
    cr_expect(strstr(thrice, "eval loss 8.7000 (event seq 8), above it in 3 consecutive evals since seq 6") !=
                  NULL,
              "three evals: the spike passes, the lasting loss stops the run: %s", thrice);
    free(thrice);
}
