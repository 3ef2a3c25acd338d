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
    char *dir = it_mkdtemp("htrn");
    char path[1024], out[1100], doc[8192];
    snprintf(path, sizeof path, "%s/trainer.json", dir);
    snprintf(out, sizeof out, "%s/run", dir);
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
    hx_write(path, doc);
    const char *args[] = {"run", path, "--out", out, "--time-limit", "150", NULL};
    int rc = hx_run(dir, "run", args, 180000);
    cr_assert_eq(rc, 0, "the run passes (exit %d)", rc);

    char f[1300];
    struct stat st;
    snprintf(f, sizeof f, "%s/coordinator/listen.addr", out);
    cr_expect_eq(stat(f, &st), 0, "the coordinator wrote listen.addr in {state_dir} = RUN/coordinator");
    snprintf(f, sizeof f, "%s/syncer", out);
    cr_expect_neq(stat(f, &st), 0, "no RUN/syncer: the syncer of the harness was not started");
    snprintf(f, sizeof f, "%s/logs/coordinator.log", out);
    char *log = hx_read(f);
    cr_expect(log && strlen(log) > 0, "the coordinator's output is in RUN/logs/coordinator.log");
    free(log);
    /* {proxy} reached the learner as the agent's proxy address, not the
     * coordinator's: the learner's traffic goes through its agent */
    snprintf(f, sizeof f, "%s/coordinator/listen.addr", out);
    char *addr = hx_read(f);
    cr_assert_not_null(addr);
    addr[strcspn(addr, "\n")] = '\0';
    snprintf(f, sizeof f, "%s/agents/1/unit.log", out);
    char *unit = hx_read(f);
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
    snprintf(f, sizeof f, "%s/events.jsonl", out);
    char *ev = hx_read(f);
    cr_assert_not_null(ev);
    cr_expect(strstr(ev, "\"type\":\"join\"") != NULL, "the coordinator's events were collected");
    free(ev);
    free(addr);

    json_t *all = hx_pids(out);
    size_t i;
    json_t *p;
    cr_assert_geq(json_array_size(all), 3, "pids.json lists the coordinator and both agents");
    json_array_foreach(all, i, p) cr_expect(!hx_alive((pid_t)json_integer_value(p)), "pid %lld is gone",
                                            (long long)json_integer_value(p));
    json_decref(all);
    hx_kill_leftovers(out);
    free(dir);
}

Test(harness_trainer, a_coordinator_that_dies_at_start_fails_the_run)
{
    char *dir = it_mkdtemp("htrd");
    char path[1024], out[1100];
    snprintf(path, sizeof path, "%s/dies.json", dir);
    snprintf(out, sizeof out, "%s/run", dir);
    hx_write(path, "{\"title\": \"dies\", \"topology\": {\"learners\": 1, \"trainer\": {"
                   "\"coordinator\": [\"/bin/false\", \"{listen}\", \"{state_dir}\"],"
                   "\"learner\": [\"/bin/true\", \"{proxy}\"]}}, \"horizon\": {\"min_merges\": 1},"
                   " \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}");
    const char *args[] = {"run", path, "--out", out, "--time-limit", "60", NULL};
    pid_t pid = it_start(dir, "run", args, NULL);
    int rc = hx_exit_code(pid, 90000);
    cr_expect_eq(rc, 3, "a harness error exits 3 (got %d)", rc);
    char f[1200];
    snprintf(f, sizeof f, "%s/run.log", dir);
    char *log = hx_read(f);
    cr_assert_not_null(log);
    cr_expect(strstr(log, "coordinator exited during start-up") != NULL, "the error names the coordinator");
    cr_expect(strstr(log, "logs/coordinator.log") != NULL, "and its log");
    if (rc != 3 || !strstr(log, "coordinator exited during start-up"))
        it_dump_log(dir, "run");
    free(log);
    hx_kill_leftovers(out);
    free(dir);
}

/* The file form of the telemetry contract (topology.trainer.telemetry): a
 * coordinator that writes a malformed second line to its events file fails
 * the run with a harness error naming the file and the line, and serves no
 * HTTP at all (listen.addr names a port nothing listens on: the harness
 * must not need it for telemetry). */
Test(harness_trainer, a_malformed_events_file_line_fails_the_run)
{
    char *dir = it_mkdtemp("htrf");
    char path[1024], out[1100], script[1100], doc[4096];
    snprintf(path, sizeof path, "%s/file.json", dir);
    snprintf(out, sizeof out, "%s/run", dir);
    snprintf(script, sizeof script, "%s/coord.sh", dir);
    hx_write(script,
             "d=$1\n"
             "printf '%s\\n' '{\"seq\":1,\"t_mono_ms\":1,\"type\":\"start\",\"versions\":[0]}' "
             "'{\"seq\":2,\"t_mono_ms\":2,\"type\":\"merge\"' > \"$d/events.jsonl\"\n"
             "echo 127.0.0.1:9 > \"$d/listen.addr.tmp\" && mv \"$d/listen.addr.tmp\" \"$d/listen.addr\"\n"
             "exec sleep 100\n");
    snprintf(doc, sizeof doc,
             "{\"title\": \"file form\", \"topology\": {\"learners\": 1, \"trainer\": {"
             "\"coordinator\": [\"/bin/sh\", \"%s\", \"{state_dir}\", \"{listen}\"],"
             "\"learner\": [\"/bin/sh\", \"-c\", \"exec sleep 100\", \"sh\", \"{proxy}\"],"
             "\"telemetry\": {\"events_file\": \"{state_dir}/events.jsonl\"}}},"
             " \"horizon\": {\"min_merges\": 1}, \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}",
             script);
    hx_write(path, doc);
    const char *args[] = {"run", path, "--out", out, "--time-limit", "60", NULL};
    pid_t pid = it_start(dir, "run", args, NULL);
    int rc = hx_exit_code(pid, 90000);
    cr_expect_eq(rc, 3, "a harness error exits 3 (got %d)", rc);
    char f[1200];
    snprintf(f, sizeof f, "%s/run.log", dir);
    char *log = hx_read(f);
    cr_assert_not_null(log);
    cr_expect(strstr(log, "coordinator/events.jsonl, line 2: not a JSON object") != NULL,
              "the error names the file and the line");
    if (rc != 3 || !strstr(log, "line 2: not a JSON object"))
        it_dump_log(dir, "run");
    free(log);
    hx_kill_leftovers(out);
    free(dir);
}
