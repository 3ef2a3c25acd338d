/* test_experiment.c - experiment loading and strict validation. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "harness/experiment.h"
#include "injectors/injector.h"

/* ---- helpers ---- */

/* Load text; returns rc, leaves the diag in *d (caller frees). */
static int load(const char *text, unsigned flags, experiment **e, jv_diag **d)
{
    *d = jv_diag_new();
    cr_assert_not_null(*d);
    char err[CX_ERRLEN] = "";
    int rc = exp_load_string(text, flags, e, *d, err, sizeof(err));
    if (rc < 0)
        cr_assert(strlen(err) > 0, "a failed load says why");
    return rc;
}

/* Some message equals want exactly, or (prefix != 0) starts with it. */
static int has_msg(const jv_diag *d, const char *want, int prefix)
{
    for (size_t i = 0; i < jv_diag_count(d); i++) {
        const char *m = jv_diag_get(d, i);
        if (prefix ? strncmp(m, want, strlen(want)) == 0 : strcmp(m, want) == 0)
            return 1;
    }
    return 0;
}

static void dump(const jv_diag *d)
{
    for (size_t i = 0; i < jv_diag_count(d); i++)
        fprintf(stderr, "  diag: %s\n", jv_diag_get(d, i));
}

/* Load text (flags) that must be valid; its diagnostics are printed when
 * it is not. The experiment is the caller's (exp_free). */
static experiment *load_ok(const char *text, unsigned flags)
{
    experiment *e = NULL;
    jv_diag *d;
    int rc = load(text, flags, &e, &d);
    if (rc != 0)
        dump(d);
    cr_assert_eq(rc, 0, "expected valid: %s", text);
    jv_diag_free(d);
    return e;
}

/* Expect invalid with a message starting with want. */
static void expect_error(const char *text, const char *want)
{
    experiment *e = NULL;
    jv_diag *d;
    int rc = load(text, 0, &e, &d);
    if (rc != CX_EINVAL || !has_msg(d, want, 1))
        dump(d);
    cr_assert_eq(rc, CX_EINVAL, "expected invalid: %s", want);
    cr_assert_null(e);
    cr_assert(has_msg(d, want, 1), "no message starting with: %s", want);
    jv_diag_free(d);
}

/* The DESIGN §5 sketch. */
static const char *good_sketch =
    "{\"title\": \"Kill one learner; the loss stays continuous and it is reintegrated\", \"seed\": 7,"
    " \"topology\": {\"learners\": 4, \"training\": {\"mode\": \"decoupled\", \"quorum\": 1, \"fragments\": "
    "8,"
    "   \"H\": 24, \"steps\": 3000}},"
    " \"steady_state\": [{\"hypothesis\": \"loss_target\", \"max\": 5.0, \"by_s\": 20}],"
    " \"method\": [{\"name\": \"kill-2\", \"fault\": \"kill\", \"targets\": {\"ids\": [2]}, "
    "\"at_outer_step\": 30,"
    "   \"params\": {\"signal\": \"KILL\", \"restart_after_ms\": 10000}, \"duration_ms\": 10000}],"
    " \"stop_conditions\": [{\"eval_loss_above\": 8.0}, {\"no_merge_for_s\": 30}],"
    " \"verify\": [{\"hypothesis\": \"loss_continuity\", \"max_jump_rel\": 0.10, \"recover_s\": 30},"
    "   {\"hypothesis\": \"reintegration\", \"learner\": 2, \"join_s\": 20, \"merged\": 3, \"merged_s\": 60},"
    "   {\"hypothesis\": \"no_global_downtime\", \"max_gap_s\": 5}]}";

/* Chaos, random/percent targets, `after`, rollbacks, every stop condition, a ci block. */
static const char *good_full =
    "{\"title\": \"chaos\", \"description\": \"d\", \"tags\": [\"ci\", \"poisson\"], \"seed\": 11,"
    " \"topology\": {\"learners\": 4, \"training\": {\"mode\": \"ddp-elastic\", \"steps\": 2000, "
    "\"encoding\": \"int4\","
    "   \"lr\": 0.001}},"
    " \"method\": ["
    "   {\"name\": \"pause-some\", \"fault\": \"pause\", \"targets\": {\"random\": 2}, \"at_s\": 5.5, "
    "\"duration_ms\": 3000},"
    "   {\"name\": \"nan-all\", \"fault\": \"nan\", \"targets\": {\"percent\": 50}, \"after\": "
    "\"pause-some\","
    "    \"duration_ms\": 1000, \"params\": {\"count\": 2}, \"toxicity\": 0.5, \"seed\": 99}],"
    " \"chaos\": {\"mtbf_s\": 60, \"recovery\": {\"dist\": \"uniform\", \"min_s\": 2, \"max_s\": 8},"
    "   \"faults\": [{\"type\": \"kill\", \"weight\": 3, \"params\": {\"signal\": \"KILL\", "
    "\"restart_after_ms\": 1000}},"
    "               {\"type\": \"pause\"}], \"min_live\": 3, \"start_s\": 10, \"end_s\": 100},"
    " \"stop_conditions\": [{\"eval_loss_above\": 8}, {\"nan\": true}, {\"no_merge_for_s\": 30},"
    "   {\"agent_unreachable_s\": 10}],"
    " \"rollbacks\": [{\"action\": \"revert_faults\"}, {\"name\": \"resume-0\", \"action\": \"resume\","
    "   \"targets\": {\"ids\": [0]}}],"
    " \"verify\": [{\"hypothesis\": \"fault_effective\", \"name\": \"faults-took\"},"
    "   {\"hypothesis\": \"versions_monotonic\"}, {\"hypothesis\": \"goodput\", \"min\": 0.5},"
    "   {\"hypothesis\": \"bandwidth\", \"max\": 4.0}, {\"hypothesis\": \"data_accounting\", "
    "\"slack_steps\": 5}],"
    " \"ci\": {\"topology\": {\"training\": {\"steps\": 200}}, \"chaos\": {\"end_s\": 20}}}";

/* ---- good files ---- */

Test(experiment, sketch_parses)
{
    experiment *e = NULL;
    jv_diag *d;
    int rc = load(good_sketch, 0, &e, &d);
    if (rc)
        dump(d);
    cr_assert_eq(rc, 0);
    cr_assert_eq(jv_diag_count(d), 0);
    cr_assert_eq(e->learners, 4);
    cr_assert_str_eq(e->mode, "decoupled");
    cr_assert_eq(e->quorum, 1);
    cr_assert_eq(e->steps, 3000);
    cr_assert_eq(e->seed, 7);
    cr_assert_eq(e->nmethod, 1);
    cr_assert_str_eq(e->method[0].name, "kill-2");
    cr_assert_str_eq(e->method[0].fault, "kill");
    cr_assert_eq(e->method[0].when, EXP_AT_OUTER_STEP);
    cr_assert_eq(e->method[0].at_outer_step, 30);
    cr_assert_eq(e->method[0].targets.kind, EXP_TARGET_IDS);
    cr_assert_eq(e->method[0].targets.nids, 1);
    cr_assert_eq(e->method[0].targets.ids[0], 2);
    cr_assert_eq(e->method[0].duration_ms, 10000);
    cr_assert_eq(json_integer_value(json_object_get(e->method[0].params, "restart_after_ms")), 10000);
    cr_assert_eq(e->nsteady, 1);
    cr_assert_eq(e->nverify, 3);
    cr_assert_str_eq(hyp_spec_label(e->verify[1]), "reintegration");
    cr_assert(e->stop.has_eval_loss_above && e->stop.eval_loss_above == 8.0);
    cr_assert(e->stop.has_no_merge_for_s && e->stop.no_merge_for_s == 30.0);
    cr_assert(!e->stop.nan);
    cr_assert(!e->chaos.enabled);
    cr_assert_eq(json_integer_value(json_object_get(e->training, "fragments")), 8);
    exp_free(e);
    jv_diag_free(d);
}

Test(experiment, full_parses_and_ci_variant_patches)
{
    experiment *e = load_ok(good_full, 0);
    cr_assert_eq(e->ntags, 2);
    cr_assert_str_eq(e->mode, "ddp-elastic");
    cr_assert_eq(e->steps, 2000);
    cr_assert_eq(e->method[0].targets.kind, EXP_TARGET_RANDOM);
    cr_assert_eq(e->method[0].targets.random_n, 2);
    cr_assert_eq(e->method[0].when, EXP_AT_S);
    cr_assert_float_eq(e->method[0].at_s, 5.5, 1e-12);
    cr_assert_eq(e->method[1].targets.kind, EXP_TARGET_PERCENT);
    cr_assert_eq(e->method[1].when, EXP_AFTER);
    cr_assert_eq(e->method[1].after, 0);
    cr_assert(e->method[1].has_seed && e->method[1].seed == 99);
    cr_assert(e->method[1].has_toxicity && e->method[1].toxicity == 0.5);
    cr_assert(!e->method[0].has_seed);
    cr_assert_eq(e->method[0].seed, exp_action_seed(11, 0), "derived seed is reproducible");
    cr_assert(e->chaos.enabled);
    cr_assert_eq(e->chaos.recovery, EXP_DIST_UNIFORM);
    cr_assert_eq(e->chaos.nfaults, 2);
    cr_assert_float_eq(e->chaos.faults[0].weight, 3.0, 1e-12);
    cr_assert_float_eq(e->chaos.faults[1].weight, 1.0, 1e-12);
    cr_assert_eq(e->chaos.min_live, 3);
    cr_assert_float_eq(e->chaos.end_s, 100.0, 1e-12);
    cr_assert(e->stop.nan && e->stop.has_agent_unreachable_s);
    cr_assert_eq(e->nrollbacks, 2);
    cr_assert_eq(e->rollbacks[0].kind, EXP_RB_REVERT_FAULTS);
    cr_assert_eq(e->rollbacks[0].targets.nids, 4, "default rollback targets: every learner");
    cr_assert_str_eq(e->rollbacks[1].name, "resume-0");
    cr_assert_eq(e->rollbacks[1].targets.nids, 1);
    cr_assert_str_eq(hyp_spec_label(e->verify[0]), "faults-took");
    cr_assert_eq(e->nverify, 5);
    exp_free(e);

    e = load_ok(good_full, EXP_CI);
    cr_assert_eq(e->steps, 200, "ci patch applied");
    cr_assert_float_eq(e->chaos.end_s, 20.0, 1e-12);
    cr_assert_float_eq(e->chaos.mtbf_s, 60.0, 1e-12, "untouched keys kept");
    cr_assert_null(json_object_get(e->doc, "ci"), "the ci variant has no ci block");
    exp_free(e);
}

Test(experiment, loads_from_file)
{
    char path[] = "/tmp/test_experiment_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, good_sketch, strlen(good_sketch)), (ssize_t)strlen(good_sketch));
    close(fd);
    experiment *e = NULL;
    char err[CX_ERRLEN];
    cr_assert_eq(exp_load(path, 0, &e, NULL, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(e->learners, 4);
    exp_free(e);
    unlink(path);
    jv_diag *d = jv_diag_new();
    cr_assert_eq(exp_load(path, 0, &e, d, err, sizeof(err)), CX_EINVAL);
    cr_assert(strstr(jv_diag_get(d, 0), path) != NULL, "missing file named: %s", jv_diag_get(d, 0));
    jv_diag_free(d);
}

/* ---- bad files ---- */

Test(experiment, syntax_error_has_line_and_column)
{
    experiment *e = NULL;
    jv_diag *d;
    int rc = load("{\"title\": \"x\",\n  \"seed\": 1,\n  \"topology\": {\"learners\": 4,}\n}", 0, &e, &d);
    cr_assert_eq(rc, CX_EINVAL);
    cr_assert_eq(jv_diag_count(d), 1);
    cr_assert(strncmp(jv_diag_get(d, 0), "<string>:3:", 11) == 0, "got: %s", jv_diag_get(d, 0));
    jv_diag_free(d);
    /* Duplicate keys are a syntax error too. */
    rc = load("{\"title\": \"x\", \"title\": \"y\"}", 0, &e, &d);
    cr_assert_eq(rc, CX_EINVAL);
    cr_assert(strstr(jv_diag_get(d, 0), "duplicate") != NULL, "got: %s", jv_diag_get(d, 0));
    jv_diag_free(d);
}

Test(experiment, unknown_keys_are_named)
{
    expect_error("{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"verify\": [{\"hypothesis\": "
                 "\"versions_monotonic\"}], \"bogus\": 1}",
                 "$.bogus: unknown key");
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": [{\"name\": \"a\", \"fault\": "
        "\"pause\", \"targets\": {\"ids\": [0]}, \"at_s\": 1, \"duration_ms\": 5, \"colour\": \"red\"}]}",
        "$.method[0].colour: unknown key");
    expect_error("{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"verify\": [{\"hypothesis\": "
                 "\"goodput\", \"min\": 0.5, \"mni\": 1}]}",
                 "$.verify[0].mni: unknown key");
}

Test(experiment, wrong_types_are_named)
{
    expect_error("{\"title\": \"t\", \"topology\": {\"learners\": \"four\"}, \"verify\": [{\"hypothesis\": "
                 "\"versions_monotonic\"}]}",
                 "$.topology.learners: expected a learner count in 1..256, got \"four\"");
    expect_error("{\"title\": 5, \"topology\": {\"learners\": 2}, \"verify\": []}",
                 "$.title: expected a string, got 5");
    expect_error("{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": {}}",
                 "$.method: expected an array, got an object");
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": [{\"name\": \"a\", \"fault\": "
        "\"pause\", \"targets\": {\"ids\": [0]}, \"at_s\": 1, \"duration_ms\": 2.5}]}",
        "$.method[0].duration_ms: expected a duration in ms in 1..");
}

Test(experiment, out_of_range_learner_id)
{
    expect_error("{\"title\": \"t\", \"topology\": {\"learners\": 4}, \"method\": ["
                 "{\"name\": \"a\", \"fault\": \"pause\", \"targets\": {\"ids\": [1]}, \"at_s\": 1, "
                 "\"duration_ms\": 5},"
                 "{\"name\": \"b\", \"fault\": \"pause\", \"targets\": {\"ids\": [7]}, \"at_s\": 1, "
                 "\"duration_ms\": 5}]}",
                 "$.method[1].targets.ids[0]: expected a learner id in 0..3, got 7");
    expect_error("{\"title\": \"t\", \"topology\": {\"learners\": 4}, \"method\": ["
                 "{\"name\": \"a\", \"fault\": \"pause\", \"targets\": {\"random\": 5}, \"at_s\": 1, "
                 "\"duration_ms\": 5}]}",
                 "$.method[0].targets.random: expected a number of learners in 1..4, got 5");
    expect_error("{\"title\": \"t\", \"topology\": {\"learners\": 4}, \"method\": ["
                 "{\"name\": \"a\", \"fault\": \"pause\", \"targets\": {\"percent\": 0}, \"at_s\": 1, "
                 "\"duration_ms\": 5}]}",
                 "$.method[0].targets.percent: expected a percentage in (0, 100], got 0");
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 4, \"training\": {\"quorum\": 5}}, \"verify\": "
        "[{\"hypothesis\": \"versions_monotonic\"}]}",
        "$.topology.training.quorum: expected a quorum (learners) in 1..4, got 5");
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 4, \"training\": {\"checkpoint_min_ms\": -1}}, "
        "\"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}",
        "$.topology.training.checkpoint_min_ms: expected ms between syncer checkpoints in 0..86400000, got "
        "-1");
    expect_error("{\"title\": \"t\", \"topology\": {\"learners\": 4, \"training\": {\"learners\": 4}}, "
                 "\"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}",
                 "$.topology.training.learners: unexpected key: the learner count is topology.learners");
}

Test(experiment, unknown_fault_type)
{
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": [{\"name\": \"a\", \"fault\": "
        "\"meteor\", \"targets\": {\"ids\": [0]}, \"at_s\": 1, \"duration_ms\": 5}]}",
        "$.method[0].fault: expected a fault type (");
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"chaos\": {\"mtbf_s\": 5, \"recovery\": "
        "{\"dist\": \"fixed\", \"mean_s\": 1}, \"faults\": [{\"type\": \"meteor\"}], \"end_s\": 10}}",
        "$.chaos.faults[0].type: expected a fault type (");
    /* The known kinds are exactly injector_table's, in its order. */
    const char *const *t = exp_fault_types();
    size_t n = 0;
    for (const injector *const *p = injector_table; *p; p++, n++)
        cr_assert(t[n] && strcmp(t[n], (*p)->type) == 0, "kind %zu: %s, table has %s", n,
                  t[n] ? t[n] : "(end)", (*p)->type);
    cr_assert_null(t[n], "exp_fault_types lists more kinds than injector_table");
    cr_assert(n >= 17, "the table has its kinds");
    cr_assert(exp_fault_known("kill") && exp_fault_known("pause") && exp_fault_known("nan"));
    cr_assert(!exp_fault_known("meteor") && !exp_fault_known(""));
}

Test(experiment, unknown_hypothesis)
{
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"verify\": [{\"hypothesis\": \"vibes\"}]}",
        "$.verify[0].hypothesis: expected a hypothesis (loss_continuity|");
    expect_error("{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"steady_state\": [{\"max\": 3}]}",
                 "$.steady_state[0].hypothesis: missing required key");
}

Test(experiment, after_must_name_an_action)
{
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": [{\"name\": \"a\", \"fault\": "
        "\"pause\", \"targets\": {\"ids\": [0]}, \"at_s\": 1, \"duration_ms\": 5}, {\"name\": \"b\", "
        "\"fault\": \"pause\", \"targets\": {\"ids\": [1]}, \"after\": \"nope\", \"duration_ms\": 5}]}",
        "$.method[1].after: expected the name of another action in $.method, got \"nope\" (no such action)");
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": [{\"name\": \"a\", \"fault\": "
        "\"pause\", \"targets\": {\"ids\": [0]}, \"after\": \"b\", \"duration_ms\": 5}, {\"name\": \"b\", "
        "\"fault\": \"pause\", \"targets\": {\"ids\": [1]}, \"after\": \"a\", \"duration_ms\": 5}]}",
        "$.method[0].after: expected an action that eventually starts at a time or step, got a cycle");
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": [{\"name\": \"a\", \"fault\": "
        "\"pause\", \"targets\": {\"ids\": [0]}, \"at_s\": 1, \"duration_ms\": 5}, {\"name\": \"a\", "
        "\"fault\": \"pause\", \"targets\": {\"ids\": [1]}, \"at_s\": 2, \"duration_ms\": 5}]}",
        "$.method[1].name: expected a unique action name");
}

Test(experiment, exactly_one_time)
{
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": [{\"name\": \"a\", \"fault\": "
        "\"pause\", \"targets\": {\"ids\": [0]}, \"at_s\": 1, \"at_outer_step\": 3, \"duration_ms\": 5}]}",
        "$.method[0]: expected exactly one of at_s, at_outer_step, after, got 2");
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": [{\"name\": \"a\", \"fault\": "
        "\"pause\", \"targets\": {\"ids\": [0]}, \"duration_ms\": 5}]}",
        "$.method[0]: expected exactly one of at_s, at_outer_step, after, got 0");
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": [{\"name\": \"a\", \"fault\": "
        "\"pause\", \"targets\": {\"ids\": [0], \"random\": 1}, \"at_s\": 1, \"duration_ms\": 5}]}",
        "$.method[0].targets: expected exactly one of ids, random, percent, got 2");
}

/* One action "a" on learner 0, its object left open for more keys. */
#define ACTION_A_HEAD                                                                                        \
    "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": [{\"name\": \"a\", \"fault\": "         \
    "\"pause\", "                                                                                            \
    "\"targets\": {\"ids\": [0]}, \"at_s\": 1, \"duration_ms\": 5"

/* An action's unit that is not running: wait (default 30 s, or wait_s) or skip. */
Test(experiment, if_not_running_wait_or_skip)
{
    const char *head = ACTION_A_HEAD;
    char text[512];
    snprintf(text, sizeof text,
             "%s}, {\"name\": \"b\", \"fault\": \"pause\", \"targets\": {\"ids\": [1]}, "
             "\"at_s\": 1, \"duration_ms\": 5, \"if_not_running\": \"skip\"}, {\"name\": \"c\", \"fault\": "
             "\"pause\", \"targets\": {\"ids\": [1]}, \"at_s\": 1, \"duration_ms\": 5, \"wait_s\": 2.5}]}",
             head);
    experiment *e = load_ok(text, 0);
    cr_assert(!e->method[0].skip_if_not_running && e->method[0].wait_ms == 30000, "default: wait 30 s");
    cr_assert(e->method[1].skip_if_not_running);
    cr_assert(!e->method[2].skip_if_not_running && e->method[2].wait_ms == 2500);
    exp_free(e);
    snprintf(text, sizeof text, "%s, \"if_not_running\": \"retry\"}]}", head);
    expect_error(text, "$.method[0].if_not_running: expected one of");
    snprintf(text, sizeof text, "%s, \"if_not_running\": \"skip\", \"wait_s\": 3}]}", head);
    expect_error(text, "$.method[0]: wait_s is only meaningful with if_not_running \"wait\"");
    snprintf(text, sizeof text, "%s, \"wait_s\": -1}]}", head);
    expect_error(text, "$.method[0].wait_s: expected seconds");
}

/* until_end: a boolean; the fault lasts until the run ends. */
Test(experiment, until_end_is_a_boolean)
{
    const char *head = ACTION_A_HEAD;
    char text[512];
    snprintf(text, sizeof text,
             "%s, \"until_end\": true}, {\"name\": \"b\", \"fault\": \"pause\", "
             "\"targets\": {\"ids\": [1]}, \"at_s\": 1, \"duration_ms\": 5}]}",
             head);
    experiment *e = load_ok(text, 0);
    cr_assert(e->method[0].until_end && !e->method[1].until_end);
    exp_free(e);
    snprintf(text, sizeof text, "%s, \"until_end\": 1}]}", head);
    expect_error(text, "$.method[0].until_end: expected");
}

/* horizon: minimum tokens and merges. */
Test(experiment, horizon_minimums)
{
    const char *head = ACTION_A_HEAD;
    char text[512];
    snprintf(text, sizeof text, "%s}], \"horizon\": {\"min_tokens\": 500, \"min_merges\": 40}}", head);
    experiment *e = load_ok(text, 0);
    cr_assert(e->min_tokens == 500 && e->min_merges == 40);
    exp_free(e);
    snprintf(text, sizeof text, "%s}], \"horizon\": {\"min_merges\": 0}}", head);
    expect_error(text, "$.horizon.min_merges: expected a number of merges");
    snprintf(text, sizeof text, "%s}], \"horizon\": {\"min_steps\": 3}}", head);
    expect_error(text, "$.horizon.min_steps: unknown key");
}

/* eval_loss_above: a number (one eval above aborts) or {"nats", "evals"}
 * (that many consecutive evals above); every malformed form is named. */
Test(experiment, eval_loss_above_takes_a_count_of_evals)
{
    static const char *head = "{\"title\": \"t\", \"topology\": {\"learners\": 1}, \"stop_conditions\": [";
    static const char *tail = "], \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}";
    char doc[512];
    snprintf(doc, sizeof doc, "%s{\"eval_loss_above\": 8}%s", head, tail);
    experiment *e = load_ok(doc, 0);
    cr_assert(e->stop.has_eval_loss_above && e->stop.eval_loss_above == 8.0 && e->stop.eval_loss_evals == 1);
    exp_free(e);
    snprintf(doc, sizeof doc, "%s{\"eval_loss_above\": {\"nats\": 7.5, \"evals\": 3}}%s", head, tail);
    e = load_ok(doc, 0);
    cr_assert(e->stop.has_eval_loss_above && e->stop.eval_loss_above == 7.5 && e->stop.eval_loss_evals == 3);
    exp_free(e);
    snprintf(doc, sizeof doc, "%s{\"eval_loss_above\": {\"nats\": 7.5}}%s", head, tail);
    e = load_ok(doc, 0);
    cr_assert_eq(e->stop.eval_loss_evals, 1, "evals defaults to 1");
    exp_free(e);
    static const char *const bad[][2] = {
        {"{\"eval_loss_above\": \"8\"}", "$.stop_conditions[0].eval_loss_above: expected a loss in nats or "
                                         "{\"nats\": X, \"evals\": N}, got \"8\""},
        {"{\"eval_loss_above\": -1}",
         "$.stop_conditions[0].eval_loss_above: expected a loss in nats >= 0, got -1"},
        {"{\"eval_loss_above\": {\"evals\": 3}}",
         "$.stop_conditions[0].eval_loss_above.nats: missing required key"},
        {"{\"eval_loss_above\": {\"nats\": 8, \"evals\": 0}}",
         "$.stop_conditions[0].eval_loss_above.evals: expected consecutive evals in 1..1000, got 0"},
        {"{\"eval_loss_above\": {\"nats\": 8, \"evals\": 2.5}}",
         "$.stop_conditions[0].eval_loss_above.evals: expected consecutive evals in 1..1000, got 2.5"},
        {"{\"eval_loss_above\": {\"nats\": 8, \"for_s\": 2}}",
         "$.stop_conditions[0].eval_loss_above.for_s: unknown key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(doc, sizeof doc, "%s%s%s", head, bad[i][0], tail);
        expect_error(doc, bad[i][1]);
    }
}

Test(experiment, every_error_is_collected)
{
    experiment *e = NULL;
    jv_diag *d;
    const char *text = "{\"title\": \"\", \"topology\": {\"learners\": 4}, \"method\": ["
                       "{\"name\": \"a\", \"fault\": \"meteor\", \"targets\": {\"ids\": [9]}, \"at_s\": -1,"
                       " \"duration_ms\": 0}],"
                       " \"stop_conditions\": [{\"nan\": false}, {\"no_merge_for_s\": 1, \"nan\": true}],"
                       " \"verify\": [{\"hypothesis\": \"loss_continuity\", \"max_jump_rel\": -1}]}";
    int rc = load(text, 0, &e, &d);
    cr_assert_eq(rc, CX_EINVAL);
    const char *want[] = {
        "$.title: expected a non-empty string, got \"\"",
        "$.method[0].fault: expected a fault type (",
        "$.method[0].targets.ids[0]: expected a learner id in 0..3, got 9",
        "$.method[0].at_s: expected seconds >= 0, got -1",
        "$.method[0].duration_ms: expected a duration in ms in 1..",
        "$.stop_conditions[0].nan: expected true",
        "$.stop_conditions[1]: expected exactly one condition per entry, got 2 keys",
        "$.verify[0].max_jump_rel: expected a relative jump in [0, 1e+06], got -1",
        "$.verify[0].recover_s: missing required key",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        cr_expect(has_msg(d, want[i], 1), "missing: %s", want[i]);
    cr_assert_eq(jv_diag_count(d), sizeof(want) / sizeof(want[0]), "exactly these errors");
    jv_diag_free(d);
}

Test(experiment, chaos_block_checked)
{
    expect_error("{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"chaos\": {\"mtbf_s\": 5, \"faults\": "
                 "[{\"type\": \"kill\"}], \"end_s\": 10}}",
                 "$.chaos.recovery: missing required key");
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"chaos\": {\"mtbf_s\": 5, \"recovery\": "
        "{\"dist\": \"gamma\", \"mean_s\": 1}, \"faults\": [{\"type\": \"pause\"}], \"end_s\": 10}}",
        "$.chaos.recovery.dist: expected one of fixed|exponential|uniform, got \"gamma\"");
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"chaos\": {\"mtbf_s\": 5, \"recovery\": "
        "{\"dist\": \"uniform\", \"min_s\": 4, \"max_s\": 2}, \"faults\": [{\"type\": \"pause\"}], "
        "\"end_s\": 10}}",
        "$.chaos.recovery.max_s: expected max_s >= min_s (4), got 2");
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"chaos\": {\"mtbf_s\": 5, \"recovery\": "
        "{\"dist\": \"fixed\", \"mean_s\": 1}, \"faults\": [{\"type\": \"pause\"}], \"min_live\": 3, "
        "\"end_s\": 10}}",
        "$.chaos.min_live: expected a number of live learners in 0..2, got 3");
    expect_error(
        "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"chaos\": {\"mtbf_s\": 5, \"recovery\": "
        "{\"dist\": \"fixed\", \"mean_s\": 1}, \"faults\": [{\"type\": \"pause\", \"weight\": 0}], "
        "\"end_s\": 10}}",
        "$.chaos.faults[0]: expected a weight > 0, got 0");
}

Test(experiment, ci_variant_errors_are_marked)
{
    const char *text = "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"verify\": [{\"hypothesis\": "
                       "\"versions_monotonic\"}], \"ci\": {\"topology\": {\"learners\": 0}}}";
    experiment *e = NULL;
    jv_diag *d;
    e = load_ok(text, 0); /* the base variant is fine */
    exp_free(e);
    cr_assert_eq(load(text, EXP_CI, &e, &d), CX_EINVAL);
    cr_assert(has_msg(d, "[ci] $.topology.learners: expected a learner count in 1..256, got 0", 0));
    jv_diag_free(d);
}

Test(experiment, attach_mode)
{
    const char *ok =
        "{\"title\": \"t\", \"topology\": {\"learners\": 2, \"attach\": {\"syncer\": "
        "\"http://127.0.0.1:7070\", \"agents\": [\"http://127.0.0.1:7101\", \"http://127.0.0.1:7102\"],"
        " \"token_file\": \"/tmp/tok\"}}, \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}";
    experiment *e = load_ok(ok, 0);
    cr_assert_str_eq(e->attach_syncer, "http://127.0.0.1:7070");
    cr_assert_eq(e->nattach_agents, 2);
    cr_assert_str_eq(e->attach_agents[1], "http://127.0.0.1:7102");
    exp_free(e);
    expect_error("{\"title\": \"t\", \"topology\": {\"learners\": 2, \"attach\": {\"syncer\": \"ftp://x\", "
                 "\"agents\": [\"http://a\"]}}, \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}",
                 "$.topology.attach.syncer: expected an http:// or https:// URL, got \"ftp://x\"");
    expect_error("{\"title\": \"t\", \"topology\": {\"learners\": 2, \"attach\": {\"syncer\": \"http://x\", "
                 "\"agents\": [\"http://a\"]}}, \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}",
                 "$.topology.attach.agents: expected 2 agent URLs (one per learner), got 1");
}

/* A topology.trainer document around the given trainer object and horizon. */
static char *trainer_doc(const char *trainer, const char *horizon)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"title\": \"t\", \"topology\": {\"learners\": 2, \"trainer\": %s}%s%s, "
             "\"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}",
             trainer, horizon ? ", \"horizon\": " : "", horizon ? horizon : "");
    return buf;
}

#define COORD                                                                                                \
    "\"coordinator\": [\"py\", \"c.py\", \"--listen\", \"{listen}\", \"--state-dir\", \"{state_dir}\"]"
#define LEARN "\"learner\": [\"py\", \"w.py\", \"--to\", \"http://{proxy}\", \"--id\", \"{id}\"]"

Test(experiment, trainer_commands)
{
    experiment *e = load_ok(trainer_doc("{" COORD ", " LEARN ", \"cwd\": \"..\"}", "{\"min_merges\": 5}"), 0);
    cr_assert_not_null(e->trainer);
    cr_assert_eq(e->trainer->ncoordinator, 6);
    cr_assert_str_eq(e->trainer->coordinator[3], "{listen}");
    cr_assert_null(e->trainer->coordinator[6], "NULL-terminated");
    cr_assert_eq(e->trainer->nlearner, 6);
    cr_assert_str_eq(e->trainer->learner[3], "http://{proxy}");
    cr_assert_str_eq(e->trainer->cwd, "..");
    exp_free(e);
    /* without topology.trainer: chaosloco's own */
    e = load_ok("{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"verify\": [{\"hypothesis\": "
                "\"versions_monotonic\"}]}",
                0);
    cr_assert_null(e->trainer);
    exp_free(e);
}

Test(experiment, trainer_refused)
{
    /* each trainer object (with min_tokens 100 as the horizon) and the
     * message that must start its error */
    static const char *const bad[][2] = {
        {"{" COORD ", \"learner\": [\"w\", \"{proxy}\", \"{nope}\"]}",
         "$.topology.trainer.learner[2]: unknown placeholder {nope} (known: {proxy}, "},
        /* a coordinator placeholder is not a learner's */
        {"{" COORD ", \"learner\": [\"w\", \"{proxy}\", \"{listen}\"]}",
         "$.topology.trainer.learner[2]: unknown placeholder {listen}"},
        {"{\"coordinator\": [\"c\", \"{state_dir}\"], " LEARN "}",
         "$.topology.trainer.coordinator: expected {listen} (the address it must bind"},
        {"{\"coordinator\": [\"c\"], " LEARN "}",
         "$.topology.trainer.coordinator: expected {listen} (the address it must bind: a "
         "syncer_restart keeps it) and {state_dir} (where it writes listen.addr), missing both"},
        {"{" COORD ", \"learner\": [\"w\", \"--id\", \"{id}\"]}",
         "$.topology.trainer.learner: expected {proxy}: the learner must reach the coordinator"},
        {"{" COORD ", \"learner\": []}",
         "$.topology.trainer.learner: expected a command (a non-empty array of strings), got []"},
        {"{" COORD ", \"learner\": [\"w\", \"\", \"{proxy}\"]}",
         "$.topology.trainer.learner[1]: expected a non-empty string, got \"\""},
        {"{" COORD "}", "$.topology.trainer.learner: missing required key"},
        {"{" COORD ", " LEARN ", \"env\": {}}",
         "$.topology.trainer.env: unknown key (expected one of: coordinator, learner, cwd, telemetry)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_error(trainer_doc(bad[i][0], "{\"min_tokens\": 100}"), bad[i][1]);
    expect_error(trainer_doc("{" COORD ", " LEARN "}", NULL),
                 "$.horizon: expected min_tokens or min_merges with topology.trainer");
    expect_error("{\"title\": \"t\", \"topology\": {\"learners\": 1, \"trainer\": {" COORD ", " LEARN
                 "}, \"attach\": {\"syncer\": \"http://x\", \"agents\": [\"http://a\"]}}, \"horizon\": "
                 "{\"min_merges\": 1}, \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}",
                 "$.topology: expected at most one of attach and trainer, got both");
}

/* topology.trainer.telemetry: absent = HTTP; events_file = the file form. */
Test(experiment, trainer_telemetry)
{
    const char *hz = "{\"min_merges\": 5}";
    experiment *e = load_ok(trainer_doc("{" COORD ", " LEARN "}", hz), 0);
    cr_assert_null(e->trainer->events_file, "no telemetry key: HTTP");
    exp_free(e);
    e = load_ok(trainer_doc("{" COORD ", " LEARN ", \"telemetry\": {\"events_file\": "
                            "\"{state_dir}/events.jsonl\"}}",
                            hz),
                0);
    cr_assert_str_eq(e->trainer->events_file, "{state_dir}/events.jsonl");
    exp_free(e);
    expect_error(trainer_doc("{" COORD ", " LEARN ", \"telemetry\": {}}", hz),
                 "$.topology.trainer.telemetry.events_file: missing required key");
    expect_error(
        trainer_doc("{" COORD ", " LEARN ", \"telemetry\": {\"events_file\": \"e\", \"http\": 1}}", hz),
        "$.topology.trainer.telemetry.http: unknown key (expected one of: events_file)");
    expect_error(
        trainer_doc("{" COORD ", " LEARN ", \"telemetry\": {\"events_file\": \"{listen}.jsonl\"}}", hz),
        "$.topology.trainer.telemetry.events_file: {listen} changes across a coordinator restart");
    expect_error(trainer_doc("{" COORD ", " LEARN ", \"telemetry\": {\"events_file\": \"{proxy}/e\"}}", hz),
                 "$.topology.trainer.telemetry.events_file: unknown placeholder {proxy}");
    expect_error(trainer_doc("{" COORD ", " LEARN ", \"telemetry\": {\"events_file\": \"\"}}", hz),
                 "$.topology.trainer.telemetry.events_file");
}

/* Placeholders: {name} of [a-z0-9_.] is expanded, anything else is literal. */
Test(experiment, trainer_placeholders_expand)
{
    const char *cv[] = {"127.0.0.1:0",
                        "/r/coordinator",
                        "/r/credentials",
                        "/r/credentials/admin.cred",
                        "/r/syncer-config.json",
                        "4",
                        "7",
                        "/r"};
    char *s = topo_expand(TOPO_COORDINATOR, "--listen={listen} {state_dir}/x {JSON} {a {} {learners}}", cv);
    cr_assert_str_eq(s, "--listen=127.0.0.1:0 /r/coordinator/x {JSON} {a {} 4}");
    free(s);
    const char *lv[] = {"{proxy.syncer}",      "{proxy.syncer}", "2", "4", "/r/learners/2",
                        "/r/c/learner-2.cred", "100000",         "7", "/r"};
    s = topo_expand(TOPO_LEARNER, "http://{proxy}/{id}/{steps}", lv);
    cr_assert_str_eq(s, "http://{proxy.syncer}/2/100000", "the agent expands its own {proxy.syncer}");
    free(s);
    unsigned used = 0;
    char err[256];
    cr_assert_eq(topo_check_template(TOPO_LEARNER, "{proxy.syncer}:{id}", &used, err, sizeof err), 0);
    cr_assert_eq(used, (1u << 1) | (1u << 2));
    cr_assert_eq(topo_check_template(TOPO_LEARNER, "{proxy.other}", &used, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "unknown placeholder {proxy.other}"), "%s", err);
}

Test(experiment, merge_patch_rfc7386)
{
    /* RFC 7386 appendix A cases. */
    json_t *t = json_loads("{\"a\":\"b\",\"c\":{\"d\":\"e\",\"f\":\"g\"}}", 0, NULL);
    json_t *p = json_loads("{\"a\":\"z\",\"c\":{\"f\":null}}", 0, NULL);
    json_t *want = json_loads("{\"a\":\"z\",\"c\":{\"d\":\"e\"}}", 0, NULL);
    json_t *got = exp_merge_patch(t, p);
    cr_assert(json_equal(got, want));
    json_decref(got);
    json_decref(p);
    p = json_loads("{\"a\":[1]}", 0, NULL);
    got = exp_merge_patch(t, p);
    cr_assert(json_equal(json_object_get(got, "a"), json_object_get(p, "a")), "arrays are replaced");
    cr_assert(json_equal(json_object_get(got, "c"), json_object_get(t, "c")));
    json_decref(got);
    json_decref(p);
    json_decref(want);
    json_decref(t);
}

/* ---- docs/experiments.md stays true ---- */

/* Every block marked `<!-- experiment -->` in the user guide is a complete
 * experiment and must validate with this build (fault params included). */
Test(experiment, docs_examples_validate)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/docs/experiments.md", CHAOSLOCO_SRC);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *marker = "<!-- experiment -->\n```json\n";
    int count = 0;
    for (char *p = strstr(text, marker); p; p = strstr(p, marker)) {
        char *body = p + strlen(marker);
        char *end = strstr(body, "\n```");
        cr_assert_not_null(end, "unterminated example");
        *end = '\0';
        experiment *e = NULL;
        jv_diag *d = jv_diag_new();
        char err[CX_ERRLEN];
        int rc = exp_load_string(body, 0, &e, d, err, sizeof(err));
        if (rc)
            dump(d);
        cr_expect_eq(rc, 0, "docs example %d invalid: %s\n%s", count, err, body);
        if (rc == 0 && json_is_object(json_object_get(e->doc, "ci"))) {
            exp_free(e);
            rc = exp_load_string(body, EXP_CI, &e, d, err, sizeof(err));
            cr_expect_eq(rc, 0, "docs example %d, ci variant: %s", count, err);
        }
        exp_free(e);
        jv_diag_free(d);
        count++;
        p = end + 1;
    }
    cr_assert_geq(count, 9 + 17, "one example per hypothesis and per fault kind (found %d)", count);
}

/* ---- chaosloco validate: exit codes and messages ---- */

/* Run CHAOSLOCO_BIN validate ARGS with stdout+stderr into out; exit code. */
static int run_validate(const char *const *args, const char *out)
{
    const char *argv[16] = {CHAOSLOCO_BIN, "validate"};
    int n = 2;
    for (; args[n - 2] && n < 15; n++)
        argv[n] = args[n - 2];
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    extern char **environ;
    cr_assert_eq(posix_spawn(&pid, CHAOSLOCO_BIN, &fa, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int file_has(const char *path, const char *needle)
{
    static char buf[65536];
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

Test(experiment, validate_command)
{
    char dir[] = "/tmp/test_validate_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char good[256], bad[256], out[256];
    snprintf(good, sizeof(good), "%s/good.json", dir);
    snprintf(bad, sizeof(bad), "%s/bad.json", dir);
    snprintf(out, sizeof(out), "%s/out.txt", dir);
    FILE *f = fopen(good, "w");
    fputs(good_full, f);
    fclose(f);
    f = fopen(bad, "w");
    fputs("{\"title\": \"t\", \"topology\": {\"learners\": 4}, \"method\": [{\"name\": \"a\", \"fault\": "
          "\"pause\", \"targets\": {\"ids\": [7]}, \"at_s\": 1, \"duration_ms\": 5}]}",
          f);
    fclose(f);

    const char *a1[] = {good, NULL};
    cr_assert_eq(run_validate(a1, out), 0);
    cr_assert(file_has(out, "(ci variant): ok"), "both variants checked by default");
    const char *a2[] = {good, bad, NULL};
    cr_assert_eq(run_validate(a2, out), 1, "one invalid file makes it 1");
    cr_assert(file_has(out, "bad.json: $.method[0].targets.ids[0]: expected a learner id in 0..3, got 7"));
    const char *a3[] = {NULL};
    cr_assert_eq(run_validate(a3, out), 64);
    const char *a4[] = {"--frobnicate", good, NULL};
    cr_assert_eq(run_validate(a4, out), 64);
    cr_assert(file_has(out, "--frobnicate"), "the bad flag is named");
    const char *a5[] = {"--schedule", "--seed", "9", good, NULL};
    cr_assert_eq(run_validate(a5, out), 0);
    cr_assert(file_has(out, "\"variant\":\"ci\""));
    const char *a6[] = {"--help", NULL};
    cr_assert_eq(run_validate(a6, out), 0);
    cr_assert(file_has(out, "--variant") && file_has(out, "--list-faults"));
    unlink(good);
    unlink(bad);
    unlink(out);
    rmdir(dir);
}

/* ---- hostile sizes: validation stays linear and its output capped ---- */

/* A growable text for generated documents. */
typedef struct gen {
    char *s;
    size_t n, cap;
} gen;

static void gen_add(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void gen_add(gen *g, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int w = vsnprintf(g->s ? g->s + g->n : NULL, g->s ? g->cap - g->n : 0, fmt, ap);
        va_end(ap);
        cr_assert_geq(w, 0);
        if (g->s && g->n + (size_t)w < g->cap) {
            g->n += (size_t)w;
            return;
        }
        g->cap = (g->cap + (size_t)w + 1) * 2;
        g->s = realloc(g->s, g->cap);
        cr_assert_not_null(g->s);
    }
}

/* Load generated text expecting exactly want errors, at most JV_DIAG_KEEP
 * of them kept, the first one starting with first. */
static void expect_many(const char *text, size_t want, const char *first)
{
    experiment *e = NULL;
    jv_diag *d;
    int rc = load(text, 0, &e, &d);
    cr_assert_eq(rc, CX_EINVAL);
    cr_expect_eq(jv_diag_count(d), want, "errors counted: %zu, want %zu", jv_diag_count(d), want);
    cr_expect_eq(jv_diag_kept(d), want < JV_DIAG_KEEP ? want : JV_DIAG_KEEP, "kept: %zu", jv_diag_kept(d));
    cr_expect(strncmp(jv_diag_get(d, 0), first, strlen(first)) == 0, "first: %s", jv_diag_get(d, 0));
    jv_diag_free(d);
}

Test(experiment, repeated_ids_one_error_each_capped)
{
    /* 20000 copies of id 0 once cost 2e8 messages (every pair) */
    gen g = {0};
    gen_add(&g, "{\"title\": \"t\", \"topology\": {\"learners\": 4}, \"method\": [{\"name\": \"a\", "
                "\"fault\": \"pause\", \"at_s\": 1, \"duration_ms\": 5, \"targets\": {\"ids\": [0");
    for (int i = 1; i < 20000; i++)
        gen_add(&g, ",0");
    gen_add(&g, "]}}]}");
    expect_many(g.s, 19999, "$.method[0].targets.ids[1]: expected distinct learner ids, got 0 twice");
    free(g.s);
}

Test(experiment, repeated_names_one_error_each_capped)
{
    gen g = {0};
    gen_add(&g, "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": [");
    for (int i = 0; i < 3000; i++)
        gen_add(&g,
                "%s{\"name\": \"a\", \"fault\": \"pause\", \"targets\": {\"ids\": [0]}, \"at_s\": 1, "
                "\"duration_ms\": 5}",
                i ? "," : "");
    gen_add(&g, "]}");
    expect_many(g.s, 2999, "$.method[1].name: expected a unique action name, \"a\" is also $.method[0]");
    free(g.s);
}

Test(experiment, after_cycles_reported_once_per_action)
{
    /* a ring of 3000 actions, each after the next */
    int n = 3000;
    gen g = {0};
    gen_add(&g, "{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": [");
    for (int i = 0; i < n; i++)
        gen_add(
            &g,
            "%s{\"name\": \"a%d\", \"fault\": \"pause\", \"targets\": {\"ids\": [0]}, \"after\": \"a%d\", "
            "\"duration_ms\": 5}",
            i ? "," : "", i, (i + 1) % n);
    gen_add(&g, "]}");
    expect_many(g.s, (size_t)n, "$.method[0].after: expected an action that eventually starts");
    free(g.s);
    /* a tail leading into a cycle waits forever too: a0 -> a1 -> a2 -> a1 */
    expect_many("{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": ["
                "{\"name\": \"a2\", \"fault\": \"pause\", \"targets\": {\"ids\": [0]}, \"after\": \"a1\", "
                "\"duration_ms\": 5},"
                "{\"name\": \"a1\", \"fault\": \"pause\", \"targets\": {\"ids\": [0]}, \"after\": \"a2\", "
                "\"duration_ms\": 5},"
                "{\"name\": \"a0\", \"fault\": \"pause\", \"targets\": {\"ids\": [0]}, \"after\": \"a1\", "
                "\"duration_ms\": 5},"
                "{\"name\": \"ok\", \"fault\": \"pause\", \"targets\": {\"ids\": [0]}, \"after\": \"b\", "
                "\"duration_ms\": 5},"
                "{\"name\": \"b\", \"fault\": \"pause\", \"targets\": {\"ids\": [1]}, \"at_s\": 1, "
                "\"duration_ms\": 5}]}",
                3, "$.method[0].after: expected an action that eventually starts");
}

Test(experiment, diag_keeps_the_first_and_counts_the_rest)
{
    jv_diag *d = jv_diag_new(), *src = jv_diag_new();
    for (int i = 0; i < 70; i++)
        jv_diag_add(src, "$", "error %d", i);
    cr_assert_eq(jv_diag_count(src), 70);
    cr_assert_eq(jv_diag_kept(src), JV_DIAG_KEEP);
    jv_diag_add(d, "$.x", "before");
    jv_diag_merge(d, src, "[ci] ");
    cr_assert_eq(jv_diag_count(d), 71, "merged counts include the dropped");
    cr_assert_eq(jv_diag_kept(d), JV_DIAG_KEEP);
    cr_assert_str_eq(jv_diag_get(d, 1), "[ci] $: error 0");
    char buf[8192] = "";
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    cr_assert_not_null(f);
    jv_diag_print(f, d, "x.json: ");
    fclose(f);
    cr_assert(strstr(buf, "x.json: $.x: before\n") == buf, "got: %.80s", buf);
    cr_assert(strstr(buf, "x.json: ... and 21 more errors\n") != NULL, "got: %s", buf);
    jv_diag_free(src);
    jv_diag_free(d);
}

/* The validator takes every trainer encoding, q2 (issue 12) included, and
 * names the valid ones for a wrong one. */
Test(experiment, encoding_q2_is_accepted)
{
    experiment *e = NULL;
    jv_diag *d;
    const char *q2 =
        "{\"title\": \"t\", \"topology\": {\"learners\": 2, \"training\": {\"encoding\": \"q2\", "
        "\"upstream_ef\": \"off\"}}, \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}";
    e = load_ok(q2, 0);
    cr_assert_str_eq(json_string_value(json_object_get(e->training, "encoding")), "q2");
    exp_free(e);
    e = NULL;
    int rc = load("{\"title\": \"t\", \"topology\": {\"learners\": 2, \"training\": {\"encoding\": \"q3\"}}, "
                  "\"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}",
                  0, &e, &d);
    cr_assert_eq(rc, CX_EINVAL);
    int named = 0;
    for (size_t i = 0; i < jv_diag_count(d); i++)
        named |= strstr(jv_diag_get(d, i), "q3") != NULL && strstr(jv_diag_get(d, i), "q2") != NULL;
    if (!named)
        dump(d);
    cr_assert(named, "the message names the bad value and lists q2");
    jv_diag_free(d);
}
