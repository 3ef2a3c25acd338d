/* test_collect.c - the runner's collection (harness/run/collect.h) without
 * a process: the file form of the coordinator's telemetry (an events file
 * written by the test) read into the events, the derived status and the
 * stop conditions; the end of training from hand-made agent views; the
 * history's counters; on a runner built by hand from an experiment. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "harness/run/runner.h"
#include "runner_fixture.h"
#include "tmpdir.h"

static runner r;
static char dir[256], path[512];

static void teardown(void)
{
    collect_cleanup(&r);
    timeline_cleanup(&r);
    evf_free(r.setup.evf);
    rfx_free(&r);
    if (dir[0])
        tmpdir_remove(dir);
    dir[0] = 0;
}

TestSuite(collect, .fini = teardown);

/* r with the experiment in text (learners, stop conditions), an empty
 * collection, the timeline's state and, in a new directory, the file form's
 * events file (not written yet). */
static void load(const char *text)
{
    rfx_load(&r, text);
    rfx_schedule(&r);
    cr_assert_eq(timeline_init(&r), 0);
    cr_assert_eq(collect_init(&r), 0);
    tmpdir_with_file(dir, sizeof dir, "/tmp/cx_collect_XXXXXX", path, sizeof path, "events.jsonl");
    r.setup.evf = evf_new(path, 0);
    cr_assert_not_null(r.setup.evf);
}

/* Append lines (each a JSON object ending in '\n') to the events file. */
static void append(const char *lines)
{
    FILE *f = fopen(path, "a");
    cr_assert_not_null(f);
    fputs(lines, f);
    fclose(f);
}

/* One event line: seq, t_mono_ms now - ago_ms (the file form's times are
 * the harness's clock and not after they are read), type and the rest. */
static void event(char *out, size_t len, int seq, int64_t ago_ms, const char *type, const char *rest)
{
    snprintf(out, len, "{\"seq\": %d, \"t_mono_ms\": %lld, \"type\": \"%s\"%s%s}\n", seq,
             (long long)(cx_mono_ms() - ago_ms), type, rest[0] ? ", " : "", rest);
}

/* two learners, one pause on learner 1 (an entry of the timeline) */
static const char *two_learners =
    "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": [{\"name\": "
    "\"p\", \"fault\": \"pause\", \"targets\": {\"ids\": [1]}, \"at_s\": 1, "
    "\"duration_ms\": 500}]";

Test(collect, the_file_form_derives_the_status_from_the_events)
{
    char text[512];
    snprintf(text, sizeof text, "%s}", two_learners);
    load(text);
    cr_assert(isnan(r.col.eval_loss), "no eval yet");
    char l[6][256];
    event(l[0], sizeof l[0], 1, 900, "heartbeat",
          "\"learner\": 0, \"step\": 3, \"tokens\": 300, \"incarnation\": 1");
    event(l[1], sizeof l[1], 2, 800, "merge", "\"round\": 1");
    event(l[2], sizeof l[2], 3, 700, "heartbeat", "\"learner\": 1, \"step\": 2, \"tokens\": 200");
    event(l[3], sizeof l[3], 4, 600, "heartbeat",
          "\"learner\": 0, \"step\": 5, \"tokens\": 500, \"train_loss\": 2.5");
    event(l[4], sizeof l[4], 5, 500, "eval", "\"loss\": 1.25, \"tokens\": 1000");
    event(l[5], sizeof l[5], 6, 400, "merge", "\"round\": 2");
    for (int i = 0; i < 6; i++)
        append(l[i]);
    collect_poll_events(&r);
    cr_assert_eq(r.error, 0, "%s", r.why);
    cr_assert_eq(r.col.last_seq, 6);
    cr_assert_eq(json_array_size(r.col.sev), 6);
    cr_assert_eq(r.col.merges, 2, "one per merge event");
    cr_assert_eq(json_integer_value(json_object_get(r.col.status, "merges")), 2);
    cr_assert_float_eq(r.col.eval_loss, 1.25, 1e-12);
    /* the last merge's time, on the harness's clock (the file form's own) */
    json_t *last = json_array_get(r.col.sev, 5);
    cr_assert_eq(r.col.last_merge_mono, json_integer_value(json_object_get(last, "t_mono_ms")));
    /* each learner's latest heartbeat, one entry per learner */
    json_t *ls = json_object_get(r.col.status, "learners");
    cr_assert_eq(json_array_size(ls), 2);
    json_t *l0 = json_array_get(ls, 0), *l1 = json_array_get(ls, 1);
    cr_assert_eq(json_integer_value(json_object_get(l0, "id")), 0);
    cr_assert_eq(json_integer_value(json_object_get(l0, "step")), 5);
    cr_assert_eq(json_integer_value(json_object_get(l0, "tokens")), 500);
    cr_assert_eq(json_integer_value(json_object_get(l0, "incarnation")), 1, "kept from the older heartbeat");
    cr_assert_float_eq(json_number_value(json_object_get(l0, "train_loss")), 2.5, 1e-12);
    cr_assert_eq(json_integer_value(json_object_get(l1, "id")), 1);
    cr_assert_eq(json_integer_value(json_object_get(l1, "tokens")), 200);
    json_t *ev = json_object_get(r.col.status, "eval");
    cr_assert_float_eq(json_number_value(json_object_get(ev, "loss")), 1.25, 1e-12);
    cr_assert_eq(json_integer_value(json_object_get(ev, "tokens")), 1000);
    /* nothing new: nothing taken twice */
    collect_poll_events(&r);
    cr_assert_eq(json_array_size(r.col.sev), 6);
    cr_assert_eq(r.col.merges, 2);
    /* file form: no status poll changes what the events said */
    collect_poll_syncer_status(&r);
    cr_assert_eq(r.col.merges, 2);
}

Test(collect, eval_loss_above_counts_consecutive_evals_in_the_method_only)
{
    char text[512];
    snprintf(text, sizeof text,
             "%s, \"stop_conditions\": [{\"eval_loss_above\": {\"nats\": 3, \"evals\": 2}}]}", two_learners);
    load(text);
    char l[4][256];
    /* above, below (the count restarts), above: no abort yet */
    event(l[0], sizeof l[0], 1, 900, "eval", "\"loss\": 4.0");
    event(l[1], sizeof l[1], 2, 800, "eval", "\"loss\": 2.0");
    event(l[2], sizeof l[2], 3, 700, "eval", "\"loss\": 5.0");
    for (int i = 0; i < 3; i++)
        append(l[i]);
    r.state = RS_METHOD;
    collect_poll_events(&r);
    cr_assert_eq(r.abort, 0, "%s", r.why);
    cr_assert_eq(r.col.evals_above, 1);
    cr_assert_eq(r.col.above_since_seq, 3);
    /* the second consecutive one aborts, naming both */
    event(l[3], sizeof l[3], 4, 600, "eval", "\"loss\": 6.0");
    append(l[3]);
    collect_poll_events(&r);
    cr_assert_eq(r.abort, 1);
    cr_assert_eq(r.error, 0);
    cr_assert(strstr(r.why, "stop condition eval_loss_above 3: eval loss 6.0000 (event seq 4), above it in 2 "
                            "consecutive evals since seq 3"),
              "%s", r.why);
}

Test(collect, no_stop_condition_acts_before_the_steady_state)
{
    char text[512];
    snprintf(text, sizeof text, "%s, \"stop_conditions\": [{\"eval_loss_above\": 3}, {\"nan\": true}]}",
             two_learners);
    load(text);
    char l[2][256];
    event(l[0], sizeof l[0], 1, 900, "eval", "\"loss\": 4.0");
    event(l[1], sizeof l[1], 2, 800, "eval", "\"loss\": -1");
    append(l[0]);
    append(l[1]);
    r.state = RS_LAUNCHED;
    collect_poll_events(&r);
    cr_assert_eq(r.abort, 0, "%s", r.why);
    cr_assert(isnan(r.col.eval_loss), "the syncer writes a non-finite loss as -1");
}

Test(collect, a_non_finite_eval_loss_stops_the_run)
{
    char text[512];
    snprintf(text, sizeof text, "%s, \"stop_conditions\": [{\"nan\": true}]}", two_learners);
    load(text);
    char l[256];
    event(l, sizeof l, 1, 900, "eval", "\"loss\": -1");
    r.state = RS_STEADY;
    append(l);
    collect_poll_events(&r);
    cr_assert_eq(r.abort, 1);
    cr_assert_str_eq(r.why, "stop condition nan: non-finite eval loss (event seq 1)");
}

Test(collect, an_event_of_a_learner_the_topology_lacks_fails_the_run)
{
    char text[512];
    snprintf(text, sizeof text, "%s}", two_learners);
    load(text);
    char l[2][256];
    event(l[0], sizeof l[0], 1, 900, "merge", "");
    event(l[1], sizeof l[1], 2, 800, "heartbeat", "\"learner\": 2, \"tokens\": 5");
    append(l[0]);
    append(l[1]);
    collect_poll_events(&r);
    cr_assert_eq(r.error, 1);
    cr_assert(strstr(r.why, "event seq 2: learner 2 is not one of the topology's 2 learners (0..1)"), "%s",
              r.why);
    cr_assert_eq(r.col.last_seq, 1, "the events before it were taken, not it");
    cr_assert_eq(r.col.merges, 1);
}

/* Hand-made agent views (no client). */
static void views(void)
{
    r.col.av = calloc((size_t)r.setup.m, sizeof *r.col.av);
    cr_assert_not_null(r.col.av);
    for (int l = 0; l < r.setup.m; l++) {
        r.col.av[l].exit_code = -1;
        snprintf(r.col.av[l].unit_state, sizeof r.col.av[l].unit_state, "running");
    }
}

static void unit(int l, const char *state, int code, int faults)
{
    snprintf(r.col.av[l].unit_state, sizeof r.col.av[l].unit_state, "%s", state);
    r.col.av[l].exit_code = code;
    r.col.av[l].faults_active = faults;
}

Test(collect, training_is_over_when_every_unit_is_done)
{
    char text[512];
    snprintf(text, sizeof text, "%s}", two_learners);
    load(text);
    views();
    collect_check_training_over(&r);
    cr_assert_eq(r.col.training_over, 0);
    /* one exited 0, one still running */
    unit(0, "exited", 0, 0);
    collect_check_training_over(&r);
    cr_assert_eq(r.col.training_over, 0);
    /* one killed with a fault still active on it: not over */
    unit(1, "killed", -1, 1);
    collect_check_training_over(&r);
    cr_assert_eq(r.col.training_over, 0);
    /* a failed exit counts as over once nothing of the timeline is
     * pending, beside one exit 0 */
    unit(1, "exited", 1, 0);
    cr_assert_eq(timeline_pending(&r), 1);
    collect_check_training_over(&r);
    cr_assert_eq(r.col.training_over, 0, "the pause is still to come");
    r.tl.fx[0].fired = r.tl.fx[0].ok = r.tl.fx[0].healed = 1;
    collect_check_training_over(&r);
    cr_assert_eq(r.col.training_over, 1);
}

Test(collect, no_unit_that_exited_zero_means_training_is_not_over)
{
    char text[512];
    snprintf(text, sizeof text, "%s}", two_learners);
    load(text);
    views();
    unit(0, "killed", -1, 0);
    unit(1, "exited", 2, 0);
    collect_check_training_over(&r);
    cr_assert_eq(r.col.training_over, 0);
    /* a unit the timeline marks not running is "restarting" until its next status */
    unit(1, "exited", 0, 0);
    collect_mark_not_running(&r, 1);
    cr_assert_str_eq(r.col.av[1].unit_state, "restarting");
    collect_check_training_over(&r);
    cr_assert_eq(r.col.training_over, 0);
}

Test(collect, the_merge_clock_only_moves_forward)
{
    char text[512];
    snprintf(text, sizeof text, "%s}", two_learners);
    load(text);
    collect_merge_clock_at_least(&r, 5000);
    cr_assert_eq(r.col.last_merge_mono, 5000);
    collect_merge_clock_at_least(&r, 4000);
    cr_assert_eq(r.col.last_merge_mono, 5000);
    collect_merge_clock_at_least(&r, 7000);
    cr_assert_eq(r.col.last_merge_mono, 7000);
}

Test(collect, the_history_counts_the_tokens_and_the_nominal_budget)
{
    char text[512];
    snprintf(text, sizeof text, "%s}", two_learners);
    load(text);
    views();
    r.start_mono = 1000;
    r.end_mono = 9000;
    r.setup.steps_target = 10;
    r.setup.batch = 64;
    char l[2][256];
    event(l[0], sizeof l[0], 1, 900, "heartbeat", "\"learner\": 0, \"step\": 4, \"tokens\": 256");
    event(l[1], sizeof l[1], 2, 800, "heartbeat", "\"learner\": 1, \"step\": 2, \"tokens\": 128");
    append(l[0]);
    append(l[1]);
    collect_poll_events(&r);
    cr_assert_eq(r.error, 0, "%s", r.why);
    hyp_history *h = collect_history(&r, 0);
    cr_assert_not_null(h);
    double x;
    cr_assert_eq(hyp_history_counter(h, HYP_C_TOKENS, &x), 1);
    cr_assert_float_eq(x, 384.0, 1e-9, "what the learners reported");
    cr_assert_eq(hyp_history_counter(h, HYP_C_START_MONO, &x), 1);
    cr_assert_float_eq(x, 1000.0, 1e-9);
    cr_assert_eq(hyp_history_counter(h, HYP_C_END_MONO, &x), 1);
    cr_assert_float_eq(x, 9000.0, 1e-9);
    cr_assert_eq(hyp_history_counter(h, HYP_C_STEPS_TARGET, &x), 1);
    cr_assert_float_eq(x, 10.0, 1e-9);
    cr_assert_eq(hyp_history_counter(h, HYP_C_BYTES_IN, &x), 0, "the file form has no bytes");
    hyp_history_free(h);
    /* every learner finished: at least m x steps x batch tokens */
    r.col.training_over = 1;
    h = collect_history(&r, 0);
    cr_assert_eq(hyp_history_counter(h, HYP_C_TOKENS, &x), 1);
    cr_assert_float_eq(x, 2.0 * 10 * 64, 1e-9);
    hyp_history_free(h);
    /* ... unless the run was ended early (the horizon) */
    r.hz.end_sent = 1;
    h = collect_history(&r, 0);
    cr_assert_eq(hyp_history_counter(h, HYP_C_TOKENS, &x), 1);
    cr_assert_float_eq(x, 384.0, 1e-9);
    hyp_history_free(h);
}
