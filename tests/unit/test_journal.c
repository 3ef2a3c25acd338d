/* test_journal.c - journal.json, junit.xml and events.jsonl writers. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "harness/journal.h"
#include "harness/schedule.h"

static experiment *parse(const char *text)
{
    experiment *e = NULL;
    char err[CX_ERRLEN];
    cr_assert_eq(exp_load_string(text, 0, &e, NULL, err, sizeof(err)), 0, "%s", err);
    return e;
}

static const char *exp_text =
    "{\"title\": \"kill <2> & \\\"restart\\\"\", \"topology\": {\"learners\": 2},"
    " \"steady_state\": [{\"hypothesis\": \"loss_target\", \"max\": 5}],"
    " \"method\": [{\"name\": \"k\", \"fault\": \"kill\", \"targets\": {\"ids\": [1]}, \"at_s\": 1,"
    "   \"duration_ms\": 100}],"
    " \"verify\": [{\"hypothesis\": \"versions_monotonic\", \"name\": \"versions <ok>\"},"
    "   {\"hypothesis\": \"goodput\", \"min\": 0.5}]}";

static hyp_verdict mk(hyp_status st, double m, double t, const char *why)
{
    hyp_verdict v;
    memset(&v, 0, sizeof(v));
    v.status = st;
    v.measured = m;
    v.threshold = t;
    snprintf(v.cmp, sizeof(v.cmp), "<=");
    snprintf(v.unit, sizeof(v.unit), "s");
    snprintf(v.explanation, sizeof(v.explanation), "%s", why);
    return v;
}

static char *tmpdir(void)
{
    char tmpl[] = "/tmp/test_journal_XXXXXX";
    char *d = mkdtemp(tmpl);
    cr_assert_not_null(d);
    return strdup(d);
}

Test(journal, chaos_toolkit_shape_and_status)
{
    experiment *e = parse(exp_text);
    journal *j = journal_new(e);
    cr_assert_not_null(j);
    int64_t t0 = 1000000000000000000LL;
    journal_set_start(j, t0);
    hyp_verdict pass = mk(HYP_PASS, 1.0, 5.0, "fine");
    hyp_verdict fail = mk(HYP_FAIL, NAN, 0.5, "bad & <worse>");
    cr_assert_eq(journal_add_hypothesis(j, JR_BEFORE, e->steady_state[0], &pass, t0, t0 + 1000000), 0);
    json_t *out = json_pack("{s:s}", "fault_id", "f1");
    cr_assert_eq(
        journal_add_action(j, 0, "k", "kill", 1, "succeeded", out, t0 + 2000000000LL, t0 + 2100000000LL), 0);
    cr_assert_eq(journal_add_action(j, 1, "revert_faults", "", 1, "succeeded", NULL, t0 + 5e9, t0 + 5e9), 0);
    cr_assert_eq(journal_add_hypothesis(j, JR_AFTER, e->verify[0], &pass, t0 + 6e9, t0 + 6e9), 0);
    cr_assert(!journal_deviated(j));
    cr_assert_eq(journal_add_hypothesis(j, JR_AFTER, e->verify[1], &fail, t0 + 6e9, t0 + 7e9), 0);
    cr_assert(journal_deviated(j), "a failed verify hypothesis deviates");
    journal_set_end(j, t0 + 10000000000LL, JR_COMPLETED);

    json_t *doc = journal_json(j);
    cr_assert_not_null(doc);
    const char *keys[] = {"chaoslib-version", "platform", "node",     "experiment",    "start", "end",
                          "duration",         "status",   "deviated", "steady_states", "run",   "rollbacks"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        cr_assert_not_null(json_object_get(doc, keys[i]), "missing %s", keys[i]);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "status")), "completed");
    cr_assert(json_is_true(json_object_get(doc, "deviated")));
    cr_assert_float_eq(json_real_value(json_object_get(doc, "duration")), 10.0, 1e-9);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "start")), "2001-09-09T01:46:40.000Z");
    json_t *ss = json_object_get(doc, "steady_states");
    cr_assert(json_is_true(json_object_get(json_object_get(ss, "before"), "steady_state_met")));
    json_t *after = json_object_get(ss, "after");
    cr_assert(json_is_false(json_object_get(after, "steady_state_met")));
    json_t *probe = json_array_get(json_object_get(after, "probes"), 1);
    json_t *pout = json_object_get(probe, "output");
    cr_assert_str_eq(json_string_value(json_object_get(pout, "verdict")), "fail");
    cr_assert(json_is_null(json_object_get(pout, "measured")), "NaN is written as null");
    cr_assert_float_eq(json_real_value(json_object_get(pout, "threshold")), 0.5, 1e-12);
    cr_assert(json_is_false(json_object_get(probe, "tolerance_met")));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(probe, "activity"), "name")),
                     "goodput");
    json_t *run = json_object_get(doc, "run");
    cr_assert_eq(json_array_size(run), 1);
    json_t *r0 = json_array_get(run, 0);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r0, "activity"), "name")), "k");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r0, "output"), "fault_id")), "f1");
    cr_assert_float_eq(json_real_value(json_object_get(r0, "duration")), 0.1, 1e-9);
    cr_assert_eq(json_array_size(json_object_get(doc, "rollbacks")), 1);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "experiment"), "title")),
                     e->title);
    json_t *cl = json_object_get(doc, "chaosloco");
    cr_assert(json_is_null(json_object_get(cl, "final_bpb")), "no eval loss: final_bpb is null, not 0");
    cr_assert(json_is_null(json_object_get(cl, "final_loss")));
    cr_assert_null(json_object_get(pout, "measured_bpb"), "a figure in seconds has no bits per byte");
    json_decref(doc);

    /* A final eval loss and a probe measured in nats: bits per byte beside them. */
    journal_set_final_loss(j, 2.0);
    hyp_verdict nats = mk(HYP_PASS, 1.5, 3.0, "loss");
    snprintf(nats.unit, sizeof(nats.unit), "nats");
    cr_assert_eq(journal_add_hypothesis(j, JR_AFTER, e->verify[0], &nats, t0 + 7e9, t0 + 7e9), 0);
    doc = journal_json(j);
    cl = json_object_get(doc, "chaosloco");
    cr_assert_float_eq(json_real_value(json_object_get(cl, "final_loss")), 2.0, 1e-12);
    cr_assert_float_eq(json_real_value(json_object_get(cl, "final_bpb")), 2.0 / M_LN2, 1e-12);
    json_t *np = json_array_get(
        json_object_get(json_object_get(json_object_get(doc, "steady_states"), "after"), "probes"), 2);
    json_t *nout = json_object_get(np, "output");
    cr_assert_str_eq(json_string_value(json_object_get(nout, "unit")), "nats");
    cr_assert_float_eq(json_real_value(json_object_get(nout, "measured_bpb")), 1.5 / M_LN2, 1e-12);
    cr_assert_float_eq(json_real_value(json_object_get(nout, "threshold_bpb")), 3.0 / M_LN2, 1e-12);
    json_decref(doc);

    /* A steady state that did not hold before the method: status failed. */
    journal *j2 = journal_new(e);
    cr_assert_eq(journal_add_hypothesis(j2, JR_BEFORE, e->steady_state[0], &fail, t0, t0), 0);
    journal_set_end(j2, t0, JR_COMPLETED);
    cr_assert_eq(journal_status(j2), JR_FAILED);
    journal_set_end(j2, t0, JR_ABORTED);
    cr_assert_eq(journal_status(j2), JR_ABORTED, "aborted wins");
    cr_assert_str_eq(jr_status_name(JR_INTERRUPTED), "interrupted");
    journal_free(j2);

    char *dir = tmpdir();
    char path[512];
    char err[CX_ERRLEN];
    snprintf(path, sizeof(path), "%s/journal.json", dir);
    cr_assert_eq(journal_write(j, path, err, sizeof(err)), 0, "%s", err);
    json_t *back = json_load_file(path, 0, NULL);
    cr_assert_not_null(back, "journal.json is valid JSON");
    cr_assert_str_eq(json_string_value(json_object_get(back, "status")), "completed");
    json_decref(back);
    unlink(path);
    rmdir(dir);
    free(dir);
    json_decref(out);
    journal_free(j);
    exp_free(e);
}

static const char *ctk_text =
    "{\"title\": \"two faults\", \"tags\": [\"ci\", \"kill\"], \"topology\": {\"learners\": 3},"
    " \"steady_state\": [{\"hypothesis\": \"loss_target\", \"max\": 5}],"
    " \"method\": [{\"name\": \"k\", \"fault\": \"kill\", \"targets\": {\"ids\": [1, 2]}, \"at_s\": 2,"
    "   \"duration_ms\": 100, \"params\": {\"signal\": \"KILL\"}},"
    "  {\"name\": \"s\", \"fault\": \"syncer_restart\", \"targets\": {\"ids\": [0, 1]}, \"after\": \"k\","
    "   \"duration_ms\": 100}],"
    " \"rollbacks\": [{\"name\": \"undo\", \"action\": \"revert_faults\"}],"
    " \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}";

static json_t *find_named(json_t *arr, const char *name)
{
    size_t i;
    json_t *a;
    json_array_foreach(arr, i,
                       a) if (strcmp(json_string_value(json_object_get(a, "name")), name) == 0) return a;
    return NULL;
}

Test(journal, embeds_a_chaos_toolkit_experiment_and_keeps_ours)
{
    experiment *e = parse(ctk_text);
    schedule *s = NULL;
    char err[CX_ERRLEN];
    cr_assert_eq(sched_build(e, 7, &s, err, sizeof err), 0, "%s", err);
    journal *j = journal_new(e);
    cr_assert_eq(journal_set_plan(j, e, s), 0);
    const char *urls[] = {"http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"};
    journal_set_endpoints(j, "http://127.0.0.1:9", urls, 3);
    int64_t t0 = 1000000000000000000LL;
    journal_set_start(j, t0);
    json_t *out = json_pack("{s:s}", "id", "f-1");
    cr_assert_eq(journal_add_action(j, 0, "k", "kill", 2, "succeeded", out, t0, t0), 0);
    cr_assert_eq(journal_add_action(j, 1, "undo", "revert_faults", 0, "succeeded", NULL, t0, t0), 0);
    cr_assert_eq(journal_add_action(j, 1, "halt-on-abort", "halt", 1, "succeeded", NULL, t0, t0), 0);
    journal_set_end(j, t0 + 1000000000LL, JR_INTERRUPTED);
    json_t *doc = journal_json(j);

    /* SemVer versions, ours beside chaoslib's; our file under its own key */
    cr_assert_str_eq(json_string_value(json_object_get(doc, "chaoslib-version")), JR_CHAOSLIB_VERSION);
    json_t *cl = json_object_get(doc, "chaosloco");
    cr_assert_str_eq(json_string_value(json_object_get(cl, "version")), CHAOSLOCO_VERSION);
    cr_assert(json_equal(json_object_get(cl, "experiment"), e->doc));
    cr_assert_str_eq(json_string_value(json_object_get(doc, "status")), "interrupted");

    /* the experiment: what chaoslib's validation requires */
    json_t *x = json_object_get(doc, "experiment");
    cr_assert_str_eq(json_string_value(json_object_get(x, "title")), "two faults");
    cr_assert_str_eq(json_string_value(json_object_get(x, "description")), "two faults", "title stands in");
    cr_assert_eq(json_array_size(json_object_get(x, "tags")), 2);
    json_t *conf = json_object_get(x, "configuration");
    cr_assert_str_eq(json_string_value(json_object_get(conf, "chaosloco_agent_2")), "http://127.0.0.1:3");
    cr_assert_str_eq(json_string_value(json_object_get(conf, "chaosloco_syncer")), "http://127.0.0.1:9");
    /* each agent its own token, read from the environment, never written */
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(conf, "chaosloco_token_2"), "key")),
                     "CHAOSLOCO_TOKEN_2");
    cr_assert_null(json_object_get(conf, "chaosloco_token"));
    json_t *ssh = json_object_get(x, "steady-state-hypothesis");
    cr_assert_not_null(json_object_get(ssh, "title"));
    json_t *probes = json_object_get(ssh, "probes");
    cr_assert_eq(json_array_size(probes), 2, "steady_state and verify hypotheses");
    json_t *p0 = json_array_get(probes, 0);
    cr_assert_str_eq(json_string_value(json_object_get(p0, "type")), "probe");
    cr_assert_eq(json_integer_value(json_object_get(p0, "tolerance")), 200);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(p0, "provider"), "type")), "http");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(p0, "chaosloco"), "phase")),
                     "steady_state");

    json_t *method = json_object_get(x, "method");
    cr_assert_eq(json_array_size(method), 3, "kill on 2 learners, one syncer restart");
    json_t *k2 = find_named(method, "k (learner 2)");
    cr_assert_not_null(k2);
    cr_assert_str_eq(json_string_value(json_object_get(k2, "type")), "action");
    json_t *prov = json_object_get(k2, "provider");
    cr_assert_str_eq(json_string_value(json_object_get(prov, "type")), "http");
    cr_assert_str_eq(json_string_value(json_object_get(prov, "method")), "POST");
    cr_assert_str_eq(json_string_value(json_object_get(prov, "url")), "${chaosloco_agent_2}/v1/faults");
    json_t *args = json_object_get(prov, "arguments");
    cr_assert_str_eq(json_string_value(json_object_get(args, "type")), "kill");
    cr_assert_eq(json_integer_value(json_object_get(args, "duration_ms")), 100);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(args, "params"), "signal")), "KILL");
    cr_assert(json_is_integer(json_object_get(args, "seed")));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(prov, "headers"), "Content-Type")),
                     "application/json");
    /* the timeline's waits: 2 s before the first kill, none between the two */
    json_t *k1 = find_named(method, "k (learner 1)");
    cr_assert_not_null(k1);
    cr_assert(json_equal(json_array_get(method, 0), k1), "timeline order");
    cr_assert_float_eq(json_number_value(json_object_get(json_object_get(k1, "pauses"), "before")), 2.0,
                       1e-9);
    cr_assert_null(json_object_get(k2, "pauses"));
    json_t *sr = find_named(method, "s");
    cr_assert_not_null(sr, "one syncer restart whatever its targets");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(sr, "provider"), "type")), "process");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(sr, "chaosloco"), "after")), "k");
    json_t *rbs = json_object_get(x, "rollbacks");
    cr_assert_eq(json_array_size(rbs), 3, "revert_faults on every learner");
    json_t *u1 = find_named(rbs, "undo (learner 1)");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(u1, "provider"), "method")), "DELETE");

    /* run records carry the experiment's activity and ours */
    json_t *r0 = json_array_get(json_object_get(doc, "run"), 0);
    cr_assert(json_equal(json_object_get(r0, "activity"), k2), "the run record's activity is the method's");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r0, "chaosloco"), "learner")), 2);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r0, "chaosloco"), "fault")), "kill");
    json_t *rb = json_object_get(doc, "rollbacks");
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(json_array_get(rb, 0), "activity"), "name")),
        "undo (learner 0)");
    json_t *halt = json_object_get(json_array_get(rb, 1), "activity");
    cr_assert_str_eq(json_string_value(json_object_get(halt, "type")), "action",
                     "an undeclared call gets one");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(halt, "provider"), "url")),
                     "${chaosloco_agent_1}/v1/halt");
    json_t *during = json_object_get(json_object_get(doc, "steady_states"), "during");
    cr_assert(json_is_array(during) && json_array_size(during) == 0);
    json_decref(doc);
    json_decref(out);
    journal_free(j);
    sched_free(s);
    exp_free(e);
}

Test(journal, junit_one_testcase_per_hypothesis_escaped)
{
    experiment *e = parse(exp_text);
    journal *j = journal_new(e);
    journal_set_start(j, 0);
    hyp_verdict pass = mk(HYP_PASS, 1.0, 5.0, "fine");
    hyp_verdict fail = mk(HYP_FAIL, 8.5, 5.0, "gap <8.5s> & \"long\" 'x'\x01");
    hyp_verdict err = mk(HYP_ERROR, NAN, 5.0, "no data");
    journal_add_hypothesis(j, JR_BEFORE, e->steady_state[0], &pass, 0, 0);
    journal_add_hypothesis(j, JR_AFTER, e->verify[0], &fail, 0, 0);
    journal_add_hypothesis(j, JR_AFTER, e->verify[1], &err, 0, 0);
    journal_set_end(j, 2000000000LL, JR_COMPLETED);
    char *xml = journal_junit(j);
    cr_assert_not_null(xml);
    cr_assert(strstr(xml, "tests=\"3\" failures=\"1\" errors=\"1\"") != NULL, "%s", xml);
    cr_assert(strstr(xml, "<testsuite name=\"kill &lt;2&gt; &amp; &quot;restart&quot;\"") != NULL, "%s", xml);
    cr_assert(strstr(xml, "name=\"versions &lt;ok&gt;\"") != NULL);
    cr_assert(strstr(xml, "classname=\"steady_state.loss_target\"") != NULL);
    cr_assert(
        strstr(xml, "<failure type=\"versions_monotonic\" message=\"measured 8.5 s, threshold &lt;= 5 s: gap "
                    "&lt;8.5s&gt; &amp; &quot;long&quot; &apos;x&apos;?\">") != NULL,
        "%s", xml);
    cr_assert(strstr(xml, "<error type=\"goodput\" message=\"measured n/a s") != NULL, "%s", xml);
    cr_assert_null(strchr(xml, '\x01'), "control characters never reach the XML");
    /* Every testcase opened is closed; exactly one per hypothesis. */
    int open = 0, close = 0;
    for (const char *p = xml; (p = strstr(p, "<testcase ")); p++)
        open++;
    for (const char *p = xml; (p = strstr(p, "</testcase>")); p++)
        close++;
    cr_assert_eq(open, 3);
    cr_assert_eq(close, 3);
    free(xml);
    char *dir = tmpdir();
    char path[512], errb[CX_ERRLEN];
    snprintf(path, sizeof(path), "%s/junit.xml", dir);
    cr_assert_eq(journal_write_junit(j, path, errb, sizeof(errb)), 0, "%s", errb);
    cr_assert_eq(access(path, R_OK), 0);
    unlink(path);
    rmdir(dir);
    free(dir);
    journal_free(j);
    exp_free(e);
}

Test(journal, events_jsonl_appends_stamped_lines)
{
    char *dir = tmpdir();
    char path[512], err[CX_ERRLEN];
    snprintf(path, sizeof(path), "%s/events.jsonl", dir);
    jr_events *ev = NULL;
    cr_assert_eq(jr_events_open(path, &ev, err, sizeof(err)), 0, "%s", err);
    int64_t before = cx_mono_ms();
    json_t *a = jr_action_event("invoke", "kill-2", "kill", 2, NULL, NULL);
    json_t *b = jr_action_event("ok", "kill-2", "kill", 2, "f7", NULL);
    json_t *c = jr_action_event("fail", "pause-1", "pause", 1, NULL, "agent said 503\nhalted");
    cr_assert_eq(jr_events_append(ev, a, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(jr_events_append(ev, b, err, sizeof(err)), 0);
    cr_assert_eq(jr_events_append(ev, c, err, sizeof(err)), 0);
    json_t *notobj = json_integer(3);
    cr_assert_eq(jr_events_append(ev, notobj, err, sizeof(err)), CX_EINVAL);
    json_decref(notobj);
    jr_events_close(ev);
    /* Reopen: appends, never truncates. */
    cr_assert_eq(jr_events_open(path, &ev, err, sizeof(err)), 0);
    cr_assert_eq(jr_events_append(ev, a, err, sizeof(err)), 0);
    jr_events_close(ev);

    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[4096];
    int n = 0;
    const char *phases[] = {"invoke", "ok", "fail", "invoke"};
    while (fgets(line, sizeof(line), f)) {
        cr_assert_lt(n, 4);
        json_t *o = json_loads(line, 0, NULL);
        cr_assert_not_null(o, "line %d is one JSON object: %s", n, line);
        cr_assert_str_eq(json_string_value(json_object_get(o, "phase")), phases[n]);
        cr_assert_str_eq(json_string_value(json_object_get(o, "kind")), "action");
        const char *t_real = json_string_value(json_object_get(o, "t_real"));
        cr_assert(t_real && strlen(t_real) == 24 && t_real[23] == 'Z', "ISO stamp: %s", t_real ? t_real : "");
        cr_assert_geq(json_integer_value(json_object_get(o, "t_mono_ms")), before);
        if (n == 1)
            cr_assert_str_eq(json_string_value(json_object_get(o, "fault_id")), "f7");
        if (n == 2)
            cr_assert_str_eq(json_string_value(json_object_get(o, "error")), "agent said 503\nhalted");
        json_decref(o);
        n++;
    }
    fclose(f);
    cr_assert_eq(n, 4);
    /* The stamped event feeds a history as is. */
    hyp_history *h = hyp_history_new(3, 1);
    cr_assert_eq(hyp_history_add_action(h, c, err, sizeof(err)), 0, "%s", err);
    hyp_history_free(h);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    unlink(path);
    rmdir(dir);
    free(dir);
    cr_assert_eq(jr_events_open("/nonexistent-dir/x/events.jsonl", &ev, err, sizeof(err)), CX_EIO);
    cr_assert(strstr(err, "/nonexistent-dir/x/events.jsonl") != NULL);
}
