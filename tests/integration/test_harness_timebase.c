/* test_harness_timebase.c - one time base, checked for real: the syncer and
 * each agent run on a CLOCK_MONOTONIC of their own (a time namespace each,
 * `unshare --time --monotonic`: the syncer +2 h, agent 0 +5 min, agent 1
 * +1 day, as if each were a host booted at another time), and `chaosloco
 * run` attached to them kills learner 1 (the +1 day clock) and has its
 * agent restart it. The verdicts that compare the agent's fault window with
 * the syncer's events (reintegration, fault_effective, rejoin_time,
 * loss_continuity, goodput's down time) must equal those of the same run on
 * one clock; the journal's offsets must hold the true ones within their
 * bounds; the fault's mapped start must lie between the harness's own
 * invoke and ok; and the same run without the restart must deviate. Skips
 * (with the reason) without root or time namespaces. Two short cases check
 * the contract's side: a file-form coordinator on another clock, and one
 * whose HTTP answers carry no stamp, each fail the run naming why.
 *
 * The harness ends the run itself at the horizon (POST /v1/end with the
 * admin credential, once every verify window has closed after the heal),
 * so nothing races a fixed amount of training against a window. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_it.h"
#include "harness_it.h"

static void fini(void)
{
    ag_prefix = NULL;
    ag_cleanup_all();
    it_cleanup();
}

TestSuite(harness_timebase, .fini = fini, .timeout = 420);

#define OFF_SYNCER "7200"  /* s: +2 h */
#define OFF_AGENT0 "300"   /* s: +5 min */
#define OFF_AGENT1 "86400" /* s: +1 day (the learner that is killed) */

/* Why time namespaces cannot be used here, or NULL when they can. */
static const char *no_time_ns(const char *dir)
{
    if (geteuid() != 0)
        return "needs root for time namespaces (unshare --time)";
    const char *argv[] = {"unshare", "--time", "--monotonic", "1", "--fork", "true", NULL};
    int rc = hx_exit_code(it_start_prog(dir, "probe-unshare", argv, NULL), 10000);
    return rc == 0 ? NULL
                   : "unshare --time --monotonic fails here (no time namespaces: Linux >= 5.6, util-linux >= "
                     "2.36)";
}

typedef struct tb_run {
    char *dir;        /* scratch */
    char sstate[600]; /* the syncer's state dir */
    char saddr[128];  /* its HOST:PORT */
    char admin[700];  /* the admin credential */
    ag agents[2];
} tb_run;

/* The syncer and two agents with their learners, each on its own clock
 * when skew (offsets OFF_*), else all on this one. */
static void start_processes(tb_run *t, const char *tag, int skew)
{
    t->dir = it_mkdtemp(tag);
    snprintf(t->sstate, sizeof t->sstate, "%s/syncer", t->dir);
    /* clang-format off */
    const char *sargs[] = {"unshare", "--time", "--monotonic", OFF_SYNCER, "--fork", "--kill-child=KILL",
                           CHAOSLOCO_BIN, "syncer", "--listen", "127.0.0.1:0", "--state-dir", t->sstate, IT_MLP,
                           "--mode", "decoupled", "--learners", "2", "--fragments", "2", "--quorum", "1",
                           "--H", "8", "--hidden", "32", "--batch", "4", "--steps", "100000000",
                           "--eval-every-ms", "200", "--eval-tokens", "1024", NULL};
    /* clang-format on */
    it_start_prog(t->dir, "syncer", skew ? sargs : sargs + 6, NULL);
    cr_assert_eq(it_wait_addr(t->sstate, t->saddr, sizeof t->saddr, 30000), 0, "syncer listen.addr");
    snprintf(t->admin, sizeof t->admin, "%s/credentials/admin.cred", t->sstate);
    static const char *const steps[] = {"--steps", "100000000", NULL};
    static const char *const p0[] = {"unshare",           "--time", "--monotonic", OFF_AGENT0, "--fork",
                                     "--kill-child=KILL", NULL};
    static const char *const p1[] = {"unshare",           "--time", "--monotonic", OFF_AGENT1, "--fork",
                                     "--kill-child=KILL", NULL};
    for (int i = 0; i < 2; i++) {
        ag_prefix = skew ? (i == 0 ? p0 : p1) : NULL;
        ag_start_learner(&t->agents[i], tag, t->dir, t->sstate, t->saddr, "syncer", i, steps);
    }
    ag_prefix = NULL;
    /* both learners training before the harness starts: the kill fires at
     * outer step 6, which learner 0 alone reaches in a few hundred ms; a
     * learner 1 still starting (ASan, a loaded box) was killed before its
     * first join, and its only join was then incarnation 1 */
    char url[200];
    snprintf(url, sizeof url, "http://%s/v1/status", t->saddr);
    int joined = 0;
    for (int k = 0; k < 600 && joined < 2; k++) {
        int status = 0;
        json_t *st = it_http_json("GET", url, NULL, NULL, &status);
        joined = 0;
        size_t i;
        json_t *l;
        json_array_foreach(json_object_get(st, "learners"), i, l) joined +=
            json_integer_value(json_object_get(l, "incarnation")) >= 1;
        json_decref(st);
        if (joined < 2)
            usleep(100 * 1000);
    }
    cr_assert_eq(joined, 2, "both learners joined the syncer within 60 s");
}

/* Run the harness attached to t with a kill of learner 1 (restarted after
 * 1 s when restart) and return its exit code once it ended the run at the
 * horizon; its run directory is t->dir/run. The limits are generous (a
 * learner under ASan on a loaded machine took 11 s from its restart to its
 * join): an unmapped clock is off by minutes to a day, and the verdicts
 * must not depend on the machine's load. */
static int run_kill(tb_run *t, int restart)
{
    char path[1100], out[1100], tok[1100], doc[4096];
    snprintf(path, sizeof path, "%s/exp.json", t->dir);
    snprintf(out, sizeof out, "%s/run", t->dir);
    snprintf(tok, sizeof tok, "%s/token", t->agents[0].dir);
    snprintf(doc, sizeof doc,
             "{\"title\": \"one time base\", \"seed\": 3,"
             " \"topology\": {\"learners\": 2, \"attach\": {\"syncer\": \"http://%s\","
             " \"agents\": [\"%s\", \"%s\"], \"token_file\": \"%s\"}},"
             " \"method\": [{\"name\": \"kill-1\", \"fault\": \"kill\", \"targets\": {\"ids\": [1]},"
             " \"at_outer_step\": 6, \"params\": {\"signal\": \"KILL\"%s}, \"duration_ms\": 1000}],"
             " \"verify\": ["
             "  {\"hypothesis\": \"reintegration\", \"learner\": 1, \"join_s\": 30, \"merged\": 1,"
             "   \"merged_s\": 10, \"tol\": 1.0},"
             "  {\"hypothesis\": \"fault_effective\"},"
             "  {\"hypothesis\": \"rejoin_time\", \"max_s\": 45},"
             "  {\"hypothesis\": \"loss_continuity\", \"max_jump_rel\": 1.0, \"recover_s\": 10},"
             "  {\"hypothesis\": \"goodput\", \"basis\": \"time\", \"min\": 0.05}]}",
             t->saddr, t->agents[0].url, t->agents[1].url, tok,
             restart ? ", \"restart_after_ms\": 1000" : "");
    hx_write(path, doc);
    const char *args[] = {"run",    path, "--out", out, "--time-limit", "240", "--syncer-credential-file",
                          t->admin, NULL};
    pid_t h = it_start(t->dir, "run", args, NULL);
    int rc = hx_exit_code(h, 300000);
    if (rc != (restart ? 0 : 1))
        it_dump_log(t->dir, "run");
    return rc;
}

/* name -> verdict of every verify probe (new object). */
static json_t *verdicts(json_t *journal)
{
    json_t *o = json_object();
    size_t i;
    json_t *pr;
    json_array_foreach(
        json_object_get(json_object_get(json_object_get(journal, "steady_states"), "after"), "probes"), i, pr)
    {
        const char *name = json_string_value(json_object_get(json_object_get(pr, "activity"), "name"));
        json_object_set(o, name ? name : "?", json_object_get(json_object_get(pr, "output"), "verdict"));
    }
    return o;
}

/* The journal's clock entry of process (borrowed) or NULL. */
static json_t *clock_of(json_t *journal, const char *process)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(journal, "chaosloco"), "clocks"), i, c)
    {
        const char *p = json_string_value(json_object_get(c, "process"));
        if (p && strcmp(p, process) == 0)
            return c;
    }
    return NULL;
}

/* Its offset holds the true one (seconds) within its bound (+1 ms of rounding). */
static void expect_offset(json_t *journal, const char *process, double true_s)
{
    json_t *c = clock_of(journal, process);
    cr_assert_not_null(c, "the journal has %s's clock", process);
    double off = json_number_value(json_object_get(c, "offset_ms"));
    double err = json_number_value(json_object_get(c, "error_ms"));
    cr_expect_leq(fabs(off - true_s * 1000.0), err + 1.0, "%s: offset %.3f ms +- %.3f, truly %.0f ms",
                  process, off, err, true_s * 1000.0);
    cr_expect_lt(err, 1000.0, "%s: a bound of a round trip, not of seconds (%.3f ms)", process, err);
}

/* events.jsonl (the harness's own clock throughout): learner 1's kill
 * started between the harness's invoke and ok, and its rejoin came
 * restart_after_ms after it (goodput's down time is that span). */
static void expect_mapped_window(const char *out)
{
    char *text = hx_read_in(out, "events.jsonl");
    cr_assert_not_null(text);
    int64_t invoke = -1, ok = -1, start = -1, err = -1, join = -1;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *e = json_loads(line, 0, NULL);
        const char *kind = json_string_value(json_object_get(e, "kind"));
        const char *phase = json_string_value(json_object_get(e, "phase"));
        int64_t t = json_integer_value(json_object_get(e, "t_mono_ms"));
        if (kind && strcmp(kind, "action") == 0 && phase && strcmp(phase, "invoke") == 0)
            invoke = t;
        if (kind && strcmp(kind, "action") == 0 && phase && strcmp(phase, "ok") == 0)
            ok = t;
        if (kind && strcmp(kind, "fault") == 0 && json_integer_value(json_object_get(e, "learner")) == 1) {
            json_t *r = json_object_get(e, "record");
            start = json_integer_value(json_object_get(r, "started_mono_ms"));
            err = json_integer_value(json_object_get(r, "mono_err_ms"));
            cr_expect(json_is_integer(json_object_get(r, "src_started_mono_ms")),
                      "the agent's own time is kept");
        }
        const char *type = json_string_value(json_object_get(e, "type"));
        if (kind && strcmp(kind, "training") == 0 && type && strcmp(type, "join") == 0 &&
            json_integer_value(json_object_get(e, "learner")) == 1 &&
            json_integer_value(json_object_get(e, "incarnation")) >= 2 && join < 0)
            join = t;
        json_decref(e);
    }
    free(text);
    cr_assert(invoke > 0 && ok > 0 && start > 0 && err >= 0, "invoke %lld ok %lld start %lld err %lld",
              (long long)invoke, (long long)ok, (long long)start, (long long)err);
    cr_expect(start + err >= invoke && start - err <= ok,
              "the agent's start (%lld +- %lld) lies between the harness's invoke (%lld) and ok (%lld)",
              (long long)start, (long long)err, (long long)invoke, (long long)ok);
    cr_assert_gt(join, 0, "learner 1's rejoin is in events.jsonl");
    cr_expect(join - start >= 1000 - err && join - start <= 60000,
              "down from the kill to the rejoin: %lld ms (restart after 1000 ms)", (long long)(join - start));
}

Test(harness_timebase, verdicts_on_four_clocks_equal_those_on_one)
{
    char *probe = it_mkdtemp("tbprobe");
    const char *why = no_time_ns(probe);
    free(probe);
    if (why)
        cr_skip_test("%s", why);
    json_t *v[2] = {NULL, NULL};
    for (int skew = 1; skew >= 0; skew--) {
        tb_run t;
        memset(&t, 0, sizeof t);
        start_processes(&t, skew ? "tbskew" : "tbone", skew);
        int rc = run_kill(&t, 1);
        if (rc != 0)
            it_dump_log(t.dir, "run");
        char out[1100];
        snprintf(out, sizeof out, "%s/run", t.dir);
        json_t *j = hx_journal(t.dir, out);
        v[skew] = verdicts(j);
        char *vs = json_dumps(v[skew], JSON_SORT_KEYS);
        cr_expect_eq(rc, 0, "%s: every hypothesis holds (exit %d): %s", skew ? "four clocks" : "one clock",
                     rc, vs);
        free(vs);
        cr_expect_eq(json_object_size(v[skew]), 5, "five verdicts");
        if (skew) {
            expect_offset(j, "syncer", atof(OFF_SYNCER));
            expect_offset(j, "agent 0", atof(OFF_AGENT0));
            expect_offset(j, "agent 1", atof(OFF_AGENT1));
            expect_mapped_window(out);
        } else {
            expect_offset(j, "agent 1", 0.0);
        }
        json_decref(j);
        json_t *sum = hx_load_in(out, "summary.json");
        cr_expect_eq(json_array_size(json_object_get(sum, "clocks")), 3, "summary.json has the three clocks");
        json_decref(sum);
        for (int i = 0; i < 2; i++)
            free(t.agents[i].dir);
        ag_cleanup_all();
        it_cleanup();
        free(t.dir);
    }
    cr_expect(json_equal(v[0], v[1]), "the same verdicts on four clocks as on one");
    json_decref(v[0]);
    json_decref(v[1]);
}

Test(harness_timebase, a_broken_rejoin_deviates_across_clocks)
{
    char *probe = it_mkdtemp("tbprobe");
    const char *why = no_time_ns(probe);
    free(probe);
    if (why)
        cr_skip_test("%s", why);
    tb_run t;
    memset(&t, 0, sizeof t);
    start_processes(&t, "tbdev", 1);
    int rc = run_kill(&t, 0); /* no restart: learner 1 never comes back */
    char out[1100];
    snprintf(out, sizeof out, "%s/run", t.dir);
    json_t *j = hx_journal(t.dir, out);
    json_t *v = verdicts(j);
    cr_expect_eq(rc, 1, "the run deviates (exit %d)", rc);
    cr_expect_str_eq(json_string_value(json_object_get(v, "reintegration")), "fail");
    cr_expect_str_eq(json_string_value(json_object_get(v, "rejoin_time")), "fail");
    char *text = hx_read_in(t.dir, "run.log");
    cr_expect(text && strstr(text, "never joined again"), "reintegration says why");
    free(text);
    json_decref(v);
    json_decref(j);
    for (int i = 0; i < 2; i++)
        free(t.agents[i].dir);
    free(t.dir);
}

/* The contract's two forms refuse a coordinator whose times cannot be put
 * on the harness's clock (docs/telemetry.md, "Time"); neither needs root. */

/* The file form: events stamped on another clock (t_mono_ms 1, far behind
 * the harness's at launch) fail the run, naming the file and the event. */
Test(harness_timebase, a_file_form_coordinator_on_another_clock_fails_the_run)
{
    hx_scratch s;
    hx_scratch_init(&s, "tbfile", "file.json");
    char script[1100], doc[4096];
    snprintf(script, sizeof script, "%s/coord.sh", s.dir);
    hx_write(script,
             "d=$1\n"
             "printf '%s\\n' '{\"seq\":1,\"t_mono_ms\":1,\"type\":\"start\",\"versions\":[0]}' "
             "> \"$d/events.jsonl\"\n"
             "echo 127.0.0.1:9 > \"$d/listen.addr.tmp\" && mv \"$d/listen.addr.tmp\" \"$d/listen.addr\"\n"
             "exec sleep 100\n");
    snprintf(doc, sizeof doc,
             "{\"title\": \"file form, another clock\", \"topology\": {\"learners\": 1, \"trainer\": {"
             "\"coordinator\": [\"/bin/sh\", \"%s\", \"{state_dir}\", \"{listen}\"],"
             "\"learner\": [\"/bin/sh\", \"-c\", \"exec sleep 100\", \"sh\", \"{proxy}\"],"
             "\"telemetry\": {\"events_file\": \"{state_dir}/events.jsonl\"}}},"
             " \"horizon\": {\"min_merges\": 1}, \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}",
             script);
    hx_write(s.exp, doc);
    const char *args[] = {"run", s.exp, "--out", s.out, "--time-limit", "60", NULL};
    char *log = hx_expect_harness_error(s.dir, it_start(s.dir, "run", args, NULL), 90000,
                                        "event seq 1 has t_mono_ms 1");
    cr_expect(log && strstr(log, "the harness's own CLOCK_MONOTONIC"), "and what the form requires");
    free(log);
    hx_kill_leftovers(s.out);
    free(s.dir);
}

/* Over HTTP: a coordinator whose answers carry no X-Chaosloco-Mono-Ms
 * stamp (here a few lines of Python serving /v1/status and /v1/events)
 * fails the run at the start, naming the header. */
Test(harness_timebase, a_coordinator_that_does_not_stamp_fails_the_run)
{
    hx_scratch s;
    hx_scratch_init(&s, "tbnostamp", "nostamp.json");
    char script[1100], doc[4096];
    snprintf(script, sizeof script, "%s/coord.py", s.dir);
    hx_write(
        script,
        "import http.server, json, os, sys\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        if self.path.startswith('/v1/events'):\n"
        "            body, ctype = b'', 'application/x-ndjson'\n"
        "        else:\n"
        "            body, ctype = json.dumps({'merges': 0, 'learners': []}).encode(), 'application/json'\n"
        "        self.send_response(200)\n"
        "        self.send_header('Content-Type', ctype)\n"
        "        self.send_header('Content-Length', str(len(body)))\n"
        "        self.end_headers()\n"
        "        self.wfile.write(body)\n"
        "    def log_message(self, *a):\n"
        "        pass\n"
        "d, (host, port) = sys.argv[1], sys.argv[2].rsplit(':', 1)\n"
        "srv = http.server.HTTPServer((host, int(port)), H)\n"
        "with open(d + '/listen.addr.tmp', 'w') as f:\n"
        "    f.write('%s:%d\\n' % srv.server_address[:2])\n"
        "os.rename(d + '/listen.addr.tmp', d + '/listen.addr')\n"
        "srv.serve_forever()\n");
    snprintf(doc, sizeof doc,
             "{\"title\": \"no stamp\", \"topology\": {\"learners\": 1, \"trainer\": {"
             "\"coordinator\": [\"/usr/bin/python3\", \"%s\", \"{state_dir}\", \"{listen}\"],"
             "\"learner\": [\"/bin/sh\", \"-c\", \"exec sleep 100\", \"sh\", \"{proxy}\"]}},"
             " \"horizon\": {\"min_merges\": 1}, \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}",
             script);
    hx_write(s.exp, doc);
    const char *args[] = {"run", s.exp, "--out", s.out, "--time-limit", "60", NULL};
    char *log = hx_expect_harness_error(s.dir, it_start(s.dir, "run", args, NULL), 90000,
                                        "answers without an X-Chaosloco-Mono-Ms header");
    cr_expect(log && strstr(log, "the coordinator at http://127.0.0.1:"), "naming the coordinator");
    free(log);
    hx_kill_leftovers(s.out);
    free(s.dir);
}
