/* test_harness_cli.c - `chaosloco run|halt|report|compare` at the edges:
 * bad flags exit 64 naming the flag, --dry-run prints the timeline and
 * launches nothing, the built-in default equals
 * experiments/kill-one-reintegrate.json, every experiments/ file validates
 * (base and ci), halt reports an unreachable agent, report refuses a
 * directory without a journal; --check on run, syncer, learner and agent. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/experiment.h"
#include "harness/run.h"
#include "harness_it.h"

static void fini(void)
{
    it_cleanup();
}

TestSuite(harness_cli, .fini = fini, .timeout = 60);

static int run_args(const char *dir, const char *name, const char *const *args)
{
    pid_t pid = it_start(dir, name, args, NULL);
    return hx_exit_code(pid, 30000);
}

static int log_has(const char *dir, const char *name, const char *needle)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.log", dir, name);
    char *d = hx_read(path);
    int found = d && strstr(d, needle);
    free(d);
    return found;
}

Test(harness_cli, bad_flags_exit_64_naming_the_flag)
{
    char *dir = it_mkdtemp("hcli");
    struct {
        const char *args[6];
        const char *needle;
    } cases[] = {
        {{"run", "--bogus", NULL}, "--bogus"},
        {{"run", "--seed", "abc", NULL}, "--seed"},
        {{"run", "--mode", "ring", NULL}, "--mode"},
        {{"run", "--time-limit", "0", NULL}, "--time-limit"},
        {{"run", "--dashboard", "nohost", NULL}, "--dashboard"},
        {{"run", "a.json", "b.json", NULL}, "one EXPERIMENT"},
        {{"run", "--out", NULL}, "--out"},
        {{"run", "/nonexistent/x.json", NULL}, "x.json"},
        {{"halt", NULL}, "--agents"},
        {{"halt", "--agents", "ftp://x", NULL}, "ftp://x"},
        {{"report", NULL}, "RUN_DIR"},
        {{"compare", "x.json", "--modes", "ddp,warp", NULL}, "warp"},
        {{"compare", NULL}, "EXPERIMENT"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad%zu", i);
        int rc = run_args(dir, name, cases[i].args);
        cr_expect_eq(rc, 64, "case %zu (%s %s): exit %d, want 64", i, cases[i].args[0],
                     cases[i].args[1] ? cases[i].args[1] : "", rc);
        cr_expect(log_has(dir, name, cases[i].needle), "case %zu: the message names '%s'", i,
                  cases[i].needle);
    }
    /* --help exits 0 for every subcommand */
    const char *subs[] = {"run", "halt", "report", "compare"};
    for (size_t i = 0; i < 4; i++) {
        const char *args[] = {subs[i], "--help", NULL};
        char name[32];
        snprintf(name, sizeof name, "help%zu", i);
        cr_expect_eq(run_args(dir, name, args), 0, "%s --help", subs[i]);
        cr_expect(log_has(dir, name, "usage: chaosloco"), "%s --help prints usage", subs[i]);
    }
    free(dir);
}

Test(harness_cli, bad_experiment_exits_64_with_every_error)
{
    char *dir = it_mkdtemp("hcli");
    char path[1024];
    snprintf(path, sizeof path, "%s/bad.json", dir);
    hx_write(path, "{\"title\": \"bad\", \"topology\": {\"learners\": 2},"
                   " \"method\": [{\"name\": \"k\", \"fault\": \"meteor\", \"targets\": {\"ids\": [7]},"
                   " \"at_s\": 1, \"duration_ms\": 100}]}");
    const char *args[] = {"run", path, "--out", dir, NULL};
    cr_assert_eq(run_args(dir, "run", args), 64);
    cr_expect(log_has(dir, "run", "meteor"), "names the bad fault type");
    cr_expect(log_has(dir, "run", "$.method[0].targets.ids[0]"), "names the bad target with its path");
    free(dir);
}

Test(harness_cli, dry_run_prints_the_timeline_and_launches_nothing)
{
    char *dir = it_mkdtemp("hcli");
    char path[1024], out[1100];
    snprintf(path, sizeof path, "%s/exp.json", dir);
    snprintf(out, sizeof out, "%s/run-out", dir);
    hx_write(path, "{\"title\": \"dry\", \"seed\": 3, \"topology\": {\"learners\": 3},"
                   " \"method\": [{\"name\": \"kill-1\", \"fault\": \"kill\", \"targets\": {\"ids\": [1]},"
                   " \"at_s\": 4, \"duration_ms\": 2000},"
                   " {\"name\": \"pause-any\", \"fault\": \"pause\", \"targets\": {\"random\": 2},"
                   " \"after\": \"kill-1\", \"duration_ms\": 1000}],"
                   " \"chaos\": {\"mtbf_s\": 5, \"recovery\": {\"dist\": \"fixed\", \"mean_s\": 1},"
                   " \"faults\": [{\"type\": \"pause\"}], \"min_live\": 1, \"end_s\": 20},"
                   " \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}");
    const char *args[] = {"run", path, "--dry-run", "--out", out, NULL};
    cr_assert_eq(run_args(dir, "dry", args), 0);
    cr_expect(log_has(dir, "dry", "kill-1"), "the method action is listed");
    cr_expect(log_has(dir, "dry", "after kill-1"), "the after-action is listed with its dependency");
    cr_expect(log_has(dir, "dry", "chaos-"), "chaos draws are listed");
    cr_expect(log_has(dir, "dry", "\"seed\":3"), "the timeline JSON carries the seed");
    struct stat sb;
    cr_expect_neq(stat(out, &sb), 0, "a dry run creates no run directory");
    /* the same seed gives the same timeline; --seed changes it */
    cr_assert_eq(run_args(dir, "dry2", args), 0);
    char p1[1100], p2[1100];
    snprintf(p1, sizeof p1, "%s/dry.log", dir);
    snprintf(p2, sizeof p2, "%s/dry2.log", dir);
    char *a = hx_read(p1), *b = hx_read(p2);
    cr_assert(a && b);
    cr_expect_str_eq(a, b, "same file + seed = same timeline");
    free(a);
    free(b);
    free(dir);
}

/* --check (syncer, learner, agent, run): validates as a start would, exits
 * 0 with one line or 64 naming the bad flag, and creates nothing; files the
 * flags name need not exist (deploy/README.md). */
Test(harness_cli, check_validates_and_creates_nothing)
{
    char *dir = it_mkdtemp("hcli");
    char exp[1024], bad[1024], st[1100], out[1100], missing[1100];
    snprintf(exp, sizeof exp, "%s/exp.json", dir);
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    snprintf(st, sizeof st, "%s/state", dir);
    snprintf(out, sizeof out, "%s/run-out", dir);
    snprintf(missing, sizeof missing, "%s/not-mounted-yet", dir);
    hx_write(exp, "{\"title\": \"chk\", \"topology\": {\"learners\": 2},"
                  " \"method\": [{\"name\": \"k\", \"fault\": \"kill\", \"targets\": {\"ids\": [1]},"
                  " \"at_s\": 1, \"duration_ms\": 100}]}");
    hx_write(bad, "{\"title\": \"bad\", \"topology\": {\"learners\": 2},"
                  " \"method\": [{\"name\": \"k\", \"fault\": \"meteor\", \"targets\": {\"ids\": [1]},"
                  " \"at_s\": 1, \"duration_ms\": 100}]}");
    struct {
        const char *args[16];
        int rc;
        const char *needle;
    } cases[] = {
        {{"run", "--check", exp, "--out", out, NULL}, 0, "chaosloco run: command line ok"},
        {{"run", "--check", missing, "--syncer-credential-file", missing, NULL}, 0, "command line ok"},
        {{"run", "--check", bad, NULL}, 64, "meteor"},
        {{"run", "--check", "--seed", "x", NULL}, 64, "--seed"},
        {{"syncer", "--check", "--state-dir", st, "--learners", "3", NULL},
         0,
         "chaosloco syncer: command line ok"},
        {{"syncer", "--check", "--state-dir", st, "--config", missing, NULL}, 0, "command line ok"},
        {{"syncer", "--check", "--state-dir", st, "--learners", "0", NULL}, 64, "learners"},
        {{"syncer", "--check", "--learners", "3", NULL}, 64, "--state-dir"},
        {{"learner", "--check", "--syncer", "http://h:1", "--id", "2", "--state-dir", st, "--credential-file",
          missing, NULL},
         0,
         "chaosloco learner: command line ok"},
        {{"learner", "--check", "--syncer", "h:1", "--id", "2", "--state-dir", st, NULL}, 64, "--syncer"},
        {{"agent", "--check", "--id", "a", "--state-dir", st, "--token-file", missing, "--", "true", NULL},
         0,
         "chaosloco agent: command line ok"},
        {{"agent", "--check", "--id", "a", "--state-dir", st, "--token-file", missing, "--restart", "often",
          "--", "true", NULL},
         64,
         "--restart"},
        {{"agent", "--check", "--id", "a", "--state-dir", st, "--token-file", missing, NULL},
         64,
         "unit command"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "check%zu", i);
        int rc = run_args(dir, name, cases[i].args);
        cr_expect_eq(rc, cases[i].rc, "case %zu (%s): exit %d, want %d", i, cases[i].args[0], rc,
                     cases[i].rc);
        cr_expect(log_has(dir, name, cases[i].needle), "case %zu: the output has '%s'", i, cases[i].needle);
    }
    struct stat sb;
    cr_expect_neq(stat(st, &sb), 0, "--check creates no state directory");
    cr_expect_neq(stat(out, &sb), 0, "--check creates no run directory");
    free(dir);
}

Test(harness_cli, default_is_the_kill_one_reintegrate_file)
{
    json_error_t je;
    json_t *builtin = json_loads(run_default_experiment(), 0, &je);
    cr_assert_not_null(builtin, "the built-in default parses: %s", je.text);
    json_t *file = json_load_file(CHAOSLOCO_SRC "/experiments/kill-one-reintegrate.json", 0, &je);
    cr_assert_not_null(file, "%s", je.text);
    cr_expect(json_equal(builtin, file), "run_default_experiment() == experiments/kill-one-reintegrate.json");
    json_decref(builtin);
    json_decref(file);
}

Test(harness_cli, every_experiment_file_validates)
{
    char *dir = it_mkdtemp("hcli");
    const char *names[] = {"baseline",
                           "kill-one-reintegrate",
                           "kill-half",
                           "rolling-restart",
                           "preempt-with-grace",
                           "straggler",
                           "partition-one",
                           "wan-bandwidth",
                           "clock-skew",
                           "corrupt-payload",
                           "nan-update",
                           "disk-full-checkpoint",
                           "syncer-crash-restart",
                           "poisson-storm"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, CHAOSLOCO_SRC "/experiments/%s.json", names[i]);
        for (unsigned flags = 0; flags <= EXP_CI; flags += EXP_CI) {
            experiment *e = NULL;
            char err[256] = "";
            jv_diag *d = jv_diag_new();
            int rc = exp_load(path, flags, &e, d, err, sizeof err);
            cr_expect_eq(rc, 0, "%s (%s): %s %s", names[i], flags ? "ci" : "base", err,
                         jv_diag_count(d) ? jv_diag_get(d, 0) : "");
            if (e)
                cr_expect(json_object_get(e->doc, "description") != NULL, "%s has a description", names[i]);
            exp_free(e);
            jv_diag_free(d);
        }
    }
    /* the harness's own fault is validated too */
    char path[1024];
    snprintf(path, sizeof path, "%s/bad-syncer.json", dir);
    hx_write(path,
             "{\"title\": \"x\", \"topology\": {\"learners\": 2}, \"method\": [{\"name\": \"s\", "
             "\"fault\": \"syncer_restart\", \"targets\": {\"ids\": [0]}, \"at_s\": 1, \"duration_ms\": 100, "
             "\"params\": {\"signal\": \"HUP\", \"colour\": 1}}]}");
    experiment *e = NULL;
    jv_diag *d = jv_diag_new();
    cr_expect_neq(exp_load(path, 0, &e, d, NULL, 0), 0, "bad syncer_restart params are refused");
    cr_expect_geq(jv_diag_count(d), 2, "both the bad signal and the unknown key are reported");
    exp_free(e);
    jv_diag_free(d);
    free(dir);
}

/* An 18 KB file of repeated ids once took 34 s, 3.6 GB and 1.58 GB of
 * stderr (every pair reported). Now: one error per repeat, the first
 * JV_DIAG_KEEP printed, the rest counted. Bounded on output, not time. */
Test(harness_cli, validate_output_is_capped_on_a_hostile_file)
{
    char *dir = it_mkdtemp("hcli");
    size_t n = 9000, cap = 64 + 2 * n + 256;
    char *text = malloc(cap), path[1024];
    cr_assert_not_null(text);
    size_t used =
        (size_t)snprintf(text, cap,
                         "{\"title\": \"t\", \"topology\": {\"learners\": 4}, \"method\": [{\"name\": "
                         "\"a\", \"fault\": \"pause\", \"at_s\": 1, \"duration_ms\": 5, \"targets\": "
                         "{\"ids\": [0");
    for (size_t i = 1; i < n; i++)
        used += (size_t)snprintf(text + used, cap - used, ",0");
    snprintf(text + used, cap - used, "]}}]}");
    snprintf(path, sizeof path, "%s/dups.json", dir);
    hx_write(path, text);
    free(text);
    const char *args[] = {"validate", "--variant", "base", path, NULL};
    cr_expect_eq(run_args(dir, "dups", args), 1, "an invalid file exits 1");
    char lp[1100];
    snprintf(lp, sizeof lp, "%s/dups.log", dir);
    char *out = hx_read(lp);
    cr_assert_not_null(out);
    size_t lines = 0;
    for (const char *c = out; *c; c++)
        lines += *c == '\n';
    cr_expect_leq(lines, JV_DIAG_KEEP + 2, "%zu lines of output", lines);
    cr_expect_lt(strlen(out), 16384, "%zu bytes of output", strlen(out));
    cr_expect(strstr(out, "dups.json: ... and 8949 more errors\n") != NULL, "the rest is counted:\n%s", out);
    cr_expect(strstr(out, "dups.json: INVALID, 8999 errors\n") != NULL, "the total is printed:\n%s", out);
    free(out);
    free(dir);
}

Test(harness_cli, halt_reports_each_agent_and_report_needs_a_journal)
{
    char *dir = it_mkdtemp("hcli");
    /* port 1 on loopback: nobody listens */
    const char *args[] = {"halt", "--agents", "http://127.0.0.1:1", "--timeout-ms", "500", NULL};
    cr_expect_eq(run_args(dir, "halt", args), 1, "an unreachable agent makes halt fail");
    cr_expect(log_has(dir, "halt", "http://127.0.0.1:1: FAILED"), "the failed agent is named");
    const char *rargs[] = {"report", dir, NULL};
    cr_expect_eq(run_args(dir, "report", rargs), 1, "no journal.json: exit 1");
    cr_expect(log_has(dir, "report", "journal.json"), "the missing file is named");
    free(dir);
}

Test(harness_cli, halt_reverts_on_a_real_agent)
{
    char *dir = it_mkdtemp("hcli");
    char tok[1100], bad[1100], state[1100], id[64], addr[128], url[200];
    snprintf(tok, sizeof tok, "%s/token", dir);
    snprintf(bad, sizeof bad, "%s/bad", dir);
    snprintf(state, sizeof state, "%s/agent", dir);
    snprintf(id, sizeof id, "hcli-%d", (int)getpid());
    hx_write(tok, "halt-test-token-91ab\n");
    chmod(tok, 0600); /* agents refuse a token others can read */
    hx_write(bad, "not-the-token-0000\n");
    chmod(bad, 0600);
    const char *args[] = {"agent",        "--listen", "127.0.0.1:0", "--id", id,      "--state-dir", state,
                          "--token-file", tok,        "--no-cgroup", "--",   "sleep", "100",         NULL};
    it_start(dir, "agent", args, NULL);
    cr_assert_eq(it_wait_addr(state, addr, sizeof addr, 20000), 0);
    snprintf(url, sizeof url, "http://%s", addr);
    char furl[300];
    snprintf(furl, sizeof furl, "%s/v1/faults", url);
    json_t *body = json_pack("{s:s,s:i}", "type", "pause", "duration_ms", 60000);
    int st = 0;
    json_t *ans = NULL;
    for (int i = 0; i < 50 && st != 201; i++) { /* the unit may still be starting */
        json_decref(ans);
        ans = it_http_json("POST", furl, body, "halt-test-token-91ab", &st);
        if (st != 201)
            cx_sleep_ms(100);
    }
    json_decref(body);
    json_decref(ans);
    cr_assert_eq(st, 201, "a pause fault is active");

    const char *wrong[] = {"halt", "--agents", url, "--token-file", bad, NULL};
    cr_expect_eq(run_args(dir, "halt-bad", wrong), 1, "a wrong token fails");
    cr_expect(log_has(dir, "halt-bad", "HTTP 401"), "with the agent's answer");
    chmod(bad, 0640); /* a token file others may read is refused before any call */
    cr_expect_eq(run_args(dir, "halt-wide", wrong), 64, "a group-readable token file is a usage error");
    cr_expect(log_has(dir, "halt-wide", "mode 0640"), "the mode is named");
    /* --token-files: one per agent, in order; a count that does not match is a usage error */
    char two[2300];
    snprintf(two, sizeof two, "%s,%s", tok, tok);
    const char *miscount[] = {"halt", "--agents", url, "--token-files", two, NULL};
    cr_expect_eq(run_args(dir, "halt-miscount", miscount), 64, "two token files for one agent");
    cr_expect(log_has(dir, "halt-miscount", "2 files for 1 agents"), "the counts are named");
    const char *right[] = {"halt", "--agents", url, "--token-files", tok, NULL};
    cr_expect_eq(run_args(dir, "halt-ok", right), 0);
    cr_expect(log_has(dir, "halt-ok", "halted, 1 faults reverted"), "one fault reverted");
    ans = it_http_json("GET", furl, NULL, "halt-test-token-91ab", &st);
    json_t *rec = json_array_get(json_object_get(ans, "faults"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(rec, "state")), "reverted");
    cr_expect_str_eq(json_string_value(json_object_get(rec, "revert_reason")), "halt");
    json_decref(ans);
    free(dir);
}
