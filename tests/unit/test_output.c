/* test_output.c - the runner's judging and outputs (harness/run/output.h)
 * without a process: summary.json's figures from hand-made coordinator
 * events and status, the verdicts printed on stdout from a hand-filled
 * journal, and the run directory's files, on a runner built by hand from
 * an experiment. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "harness/run/runner.h"
#include "runner_fixture.h"
#include "tmpdir.h"

static runner r;
static run_opts opts;
static char dir[256], unused[512];

static void teardown(void)
{
    output_cleanup(&r);
    collect_cleanup(&r);
    jr_events_close(r.ev);
    journal_free(r.j);
    rfx_free(&r);
    if (dir[0])
        tmpdir_remove(dir);
    dir[0] = 0;
}

TestSuite(output, .fini = teardown);

/* A learner's loss is judged before (steady state) and after (verify). */
static const char *judged =
    "{\"title\": \"judged\", \"topology\": {\"learners\": 2},"
    " \"steady_state\": [{\"hypothesis\": \"loss_target\", \"name\": \"training under way\","
    " \"max\": 5.2}],"
    " \"verify\": [{\"hypothesis\": \"loss_target\", \"name\": \"loss low\", \"max\": 3.8}]}";

/* r with the experiment in text, an empty collection and a journal. */
static void load(const char *text)
{
    rfx_load(&r, text);
    memset(&opts, 0, sizeof opts);
    r.o = &opts;
    r.setup.seed = 7;
    rfx_schedule(&r);
    cr_assert_eq(collect_init(&r), 0);
    /* agent views without a client (their fault lists are filled by hand) */
    r.col.av = calloc((size_t)r.setup.m, sizeof *r.col.av);
    cr_assert_not_null(r.col.av);
    r.j = journal_new(r.setup.e);
    cr_assert_not_null(r.j);
}

/* A coordinator event as collected (the syncer's own clock: without a
 * sample the runner takes its times as they are). */
static void collected(const char *json)
{
    json_t *ev = json_loads(json, 0, NULL);
    cr_assert_not_null(ev, "%s", json);
    json_array_append_new(r.col.sev, ev);
}

Test(output, the_summary_is_measured_on_what_was_collected)
{
    load(judged);
    r.start_mono = 10000;
    r.end_mono = 25000;
    r.col.merges = 4;
    collected("{\"seq\": 1, \"t_mono_ms\": 12000, \"type\": \"eval\", \"loss\": 2.0}");
    collected("{\"seq\": 2, \"t_mono_ms\": 13000, \"type\": \"merge\"}");
    collected("{\"seq\": 3, \"t_mono_ms\": 14500, \"type\": \"eval\", \"loss\": 1.5}");
    r.col.status = json_pack("{s:I,s:[{s:i,s:i},{s:i,s:i}],s:f,s:I}", "merges", (json_int_t)4, "learners",
                             "id", 0, "tokens", 300, "id", 1, "tokens", 200, "merge_efficiency", 0.75,
                             "tokens_trained", (json_int_t)500);
    json_t *o = output_summary_json(&r);
    cr_assert_not_null(o);
    cr_assert_eq(json_integer_value(json_object_get(o, "learners")), 2);
    cr_assert_eq(json_integer_value(json_object_get(o, "seed")), 7);
    cr_assert_eq(json_integer_value(json_object_get(o, "tokens")), 500,
                 "the learners' reported tokens, summed");
    cr_assert_eq(json_integer_value(json_object_get(o, "merges")), 4);
    cr_assert_float_eq(json_number_value(json_object_get(o, "merge_efficiency")), 0.75, 1e-12);
    cr_assert_eq(json_integer_value(json_object_get(o, "tokens_trained")), 500);
    cr_assert_float_eq(json_number_value(json_object_get(o, "duration_s")), 15.0, 1e-9);
    /* the eval curve: s since the run start, and the last loss */
    json_t *curve = json_object_get(o, "eval_curve");
    cr_assert_eq(json_array_size(curve), 2);
    cr_assert_float_eq(json_number_value(json_array_get(json_array_get(curve, 0), 0)), 2.0, 1e-9);
    cr_assert_float_eq(json_number_value(json_array_get(json_array_get(curve, 0), 1)), 2.0, 1e-12);
    cr_assert_float_eq(json_number_value(json_array_get(json_array_get(curve, 1), 0)), 4.5, 1e-9);
    cr_assert_float_eq(json_number_value(json_object_get(o, "final_loss")), 1.5, 1e-12);
    cr_assert_float_eq(json_number_value(json_object_get(o, "final_bpb")), 1.5 / M_LN2, 1e-12);
    cr_assert(json_is_array(json_object_get(o, "clocks")));
    json_decref(o);
}

Test(output, a_non_finite_last_eval_leaves_no_final_loss)
{
    load(judged);
    collected("{\"seq\": 1, \"t_mono_ms\": 1000, \"type\": \"eval\", \"loss\": 2.0}");
    collected("{\"seq\": 2, \"t_mono_ms\": 2000, \"type\": \"eval\", \"loss\": -1}");
    /* no status (a coordinator that never answered): figures it lacks are null */
    json_t *o = output_summary_json(&r);
    cr_assert_not_null(o);
    json_t *curve = json_object_get(o, "eval_curve");
    cr_assert_eq(json_array_size(curve), 2);
    cr_assert(json_is_null(json_array_get(json_array_get(curve, 1), 1)), "the syncer's -1 is no loss");
    cr_assert(json_is_null(json_object_get(o, "final_loss")));
    cr_assert(json_is_null(json_object_get(o, "final_bpb")));
    cr_assert(json_is_null(json_object_get(o, "merge_efficiency")));
    cr_assert(json_is_null(json_object_get(o, "tokens_trained")));
    cr_assert_eq(json_integer_value(json_object_get(o, "tokens")), 0);
    json_decref(o);
}

Test(output, without_a_steady_state_it_holds)
{
    load("{\"title\": \"t\", \"topology\": {\"learners\": 1}, \"verify\": [{\"hypothesis\": \"loss_target\","
         " \"max\": 3.8}]}");
    r.out.steady_ok = 0;
    output_steady_state(&r, 100.0);
    cr_assert_eq(r.out.steady_ok, 1);
}

/* A verdict filed in the journal by hand. */
static void verdict(jr_phase phase, const hyp_spec *s, hyp_status st, const char *why)
{
    hyp_verdict v = {.status = st, .measured = 4.0, .threshold = 3.8};
    snprintf(v.cmp, sizeof v.cmp, "<=");
    snprintf(v.unit, sizeof v.unit, "nats");
    snprintf(v.explanation, sizeof v.explanation, "%s", why);
    cr_assert_eq(journal_add_hypothesis(r.j, phase, s, &v, 1, 2), 0);
}

/* What output_print_verdicts wrote on stdout. */
static void printed(char *out, size_t len, const run_result *res)
{
    output_print_verdicts(&r, res);
    FILE *f = cr_get_redirected_stdout();
    size_t n = fread(out, 1, len - 1, f);
    out[n] = 0;
}

Test(output, the_verdicts_are_printed_one_per_line, .init = cr_redirect_stdout)
{
    load(judged);
    snprintf(r.setup.run_dir, sizeof r.setup.run_dir, "/tmp/somewhere");
    verdict(JR_BEFORE, r.setup.e->steady_state[0], HYP_PASS, "loss 4.0 <= 5.2");
    verdict(JR_AFTER, r.setup.e->verify[0], HYP_FAIL, "loss 4.0 > 3.8");
    snprintf(r.why, sizeof r.why, "stop condition nan: non-finite eval loss (event seq 9)");
    r.abort = 1;
    run_result res = {.exit_code = 1};
    snprintf(res.status, sizeof res.status, "failed");
    char out[4096];
    printed(out, sizeof out, &res);
    cr_assert(strstr(out, "\njudged\n  status failed, exit 1, run dir /tmp/somewhere\n"), "%s", out);
    cr_assert(strstr(out, "  steady training under way           pass  loss 4.0 <= 5.2\n"), "%s", out);
    cr_assert(strstr(out, "  verify loss low                     fail  loss 4.0 > 3.8\n"), "%s", out);
    cr_assert(strstr(out, "  aborted: stop condition nan: non-finite eval loss (event seq 9)\n"), "%s", out);
    cr_assert(strstr(out, "steady") < strstr(out, "verify"), "before, then after");
}

Test(output, an_error_is_printed_as_one, .init = cr_redirect_stdout)
{
    load(judged);
    snprintf(r.why, sizeof r.why, "lease on agent 0: refused");
    r.error = 1;
    run_result res = {.exit_code = 3};
    char out[4096];
    printed(out, sizeof out, &res);
    cr_assert(strstr(out, "  error: lease on agent 0: refused\n"), "%s", out);
    cr_assert_null(strstr(out, "aborted"), "%s", out);
}

/* The run directory's file name, read as JSON (new). */
static json_t *read_json(const char *name)
{
    char p[PATHLEN + 32];
    run_join_path(p, sizeof p, r.setup.run_dir, name);
    json_error_t je;
    json_t *v = json_load_file(p, 0, &je);
    cr_assert_not_null(v, "%s: %s", p, je.text);
    return v;
}

Test(output, the_run_directory_gets_every_file)
{
    load(judged);
    tmpdir_with_file(dir, sizeof dir, "/tmp/cx_output_XXXXXX", unused, sizeof unused, "-");
    snprintf(r.setup.run_dir, sizeof r.setup.run_dir, "%s", dir);
    char p[PATHLEN + 32], err[CX_ERRLEN];
    run_join_path(p, sizeof p, r.setup.run_dir, "events.jsonl");
    cr_assert_eq(jr_events_open(p, &r.ev, err, sizeof err), 0, "%s", err);
    collected("{\"seq\": 1, \"t_mono_ms\": 1000, \"type\": \"merge\"}");
    /* one fault record on learner 1 */
    r.col.av[1].faults = json_pack("[{s:s,s:s}]", "id", "f-1", "kind", "pause");
    verdict(JR_AFTER, r.setup.e->verify[0], HYP_FAIL, "loss 4.0 > 3.8");
    run_result res = {.summary = json_object()};
    output_write(&r, &res);
    cr_assert_eq(r.error, 0, "%s", r.why);
    /* faults.json: each learner's records */
    json_t *fl = read_json("faults.json");
    cr_assert_eq(json_array_size(fl), 1);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(fl, 0), "learner")), 1);
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(json_array_get(fl, 0), "record"), "id")), "f-1");
    json_decref(fl);
    /* journal.json: completed (nothing stopped it), deviated (verify failed) */
    json_t *jj = read_json("journal.json");
    cr_assert_str_eq(json_string_value(json_object_get(jj, "status")), "completed");
    cr_assert(json_is_true(json_object_get(jj, "deviated")));
    json_decref(jj);
    /* summary.json: the journal's status and what each fault cost */
    json_t *s = read_json("summary.json");
    cr_assert_str_eq(json_string_value(json_object_get(s, "status")), "completed");
    cr_assert(json_is_true(json_object_get(s, "deviated")));
    cr_assert_not_null(json_object_get(s, "fault_cost"));
    json_decref(s);
    /* events.jsonl: the training events and the fault records */
    jr_events_close(r.ev);
    r.ev = NULL;
    run_join_path(p, sizeof p, r.setup.run_dir, "events.jsonl");
    FILE *f = fopen(p, "r");
    cr_assert_not_null(f);
    char line[1024];
    int training = 0, fault = 0;
    while (fgets(line, sizeof line, f)) {
        training += strstr(line, "\"kind\": \"training\"") || strstr(line, "\"kind\":\"training\"");
        fault += strstr(line, "\"kind\": \"fault\"") || strstr(line, "\"kind\":\"fault\"");
    }
    fclose(f);
    cr_assert_eq(training, 1, "the merge event");
    cr_assert_eq(fault, 1, "learner 1's record");
    run_join_path(p, sizeof p, r.setup.run_dir, "junit.xml");
    cr_assert_eq(access(p, R_OK), 0, "junit.xml written");
    json_decref(res.summary);
}

Test(output, a_stop_condition_interrupts_the_journal)
{
    load(judged);
    tmpdir_with_file(dir, sizeof dir, "/tmp/cx_output_XXXXXX", unused, sizeof unused, "-");
    snprintf(r.setup.run_dir, sizeof r.setup.run_dir, "%s", dir);
    r.abort = 1;
    snprintf(r.why, sizeof r.why, "stop condition nan");
    run_result res = {0};
    output_write(&r, &res);
    json_t *jj = read_json("journal.json");
    cr_assert_str_eq(json_string_value(json_object_get(jj, "status")), "interrupted");
    json_decref(jj);
    /* an error nobody planned for aborts it */
    r.error = 1;
    output_write(&r, &res);
    jj = read_json("journal.json");
    cr_assert_str_eq(json_string_value(json_object_get(jj, "status")), "aborted");
    json_decref(jj);
}
