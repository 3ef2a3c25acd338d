/* test_harness_deviate.c - an experiment built to fail: synchronous ddp
 * with one learner killed and restarted 4 s later, judged by a strict
 * no_global_downtime. The barrier waits for the dead learner, so merges
 * stop: `chaosloco run` exits 1 and junit.xml carries the failing
 * hypothesis with its measured figure; everything it started is gone. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness_it.h"

static void fini(void)
{
    it_cleanup();
}

TestSuite(harness_deviate, .fini = fini, .timeout = 120);

Test(harness_deviate, ddp_with_a_kill_deviates_with_the_figure_in_junit)
{
    hx_scratch s;
    hx_scratch_init(&s, "hdev", "fail.json");
    char junit[1100];
    snprintf(junit, sizeof junit, "%s/custom-junit.xml", s.dir);
    hx_write(s.exp,
             "{\"title\": \"ddp stalls when a learner dies\", \"seed\": 2,"
             " \"topology\": {\"learners\": 2, \"training\": " HX_TRAIN(
                 "ddp",
                 400) "},"
                      " \"method\": [{\"name\": \"kill-1\", \"fault\": \"kill\", \"targets\": {\"ids\": [1]},"
                      " \"at_s\": 2, \"params\": {\"signal\": \"KILL\", \"restart_after_ms\": 4000},"
                      " \"duration_ms\": 4000}],"
                      " \"verify\": [{\"hypothesis\": \"no_global_downtime\", \"name\": \"strict downtime\","
                      " \"max_gap_s\": 1},"
                      " {\"hypothesis\": \"versions_monotonic\"}]}");
    const char *args[] = {"run", s.exp, "--out", s.out, "--junit", junit, "--time-limit", "90", NULL};
    int rc = hx_run_rc(s.dir, "run", args, 110000, 1);
    cr_assert_eq(rc, 1, "a deviated hypothesis exits 1 (got %d)", rc);

    char *x = hx_read(junit);
    cr_assert_not_null(x, "--junit FILE was written");
    cr_expect(strstr(x, "name=\"strict downtime\"") != NULL, "the failing hypothesis is a testcase");
    char *fail = strstr(x, "<failure");
    cr_assert_not_null(fail, "it has a <failure>");
    cr_expect(strstr(fail, "measured ") != NULL && strstr(fail, "threshold") != NULL,
              "the failure message carries the figure and threshold");
    free(x);

    json_t *j = hx_journal(s.dir, s.out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "status")), "completed");
    cr_expect(json_is_true(json_object_get(j, "deviated")));
    json_t *probes = json_object_get(json_object_get(json_object_get(j, "steady_states"), "after"), "probes");
    int found = 0;
    size_t i;
    json_t *p;
    json_array_foreach(probes, i, p)
    {
        json_t *o = json_object_get(p, "output");
        if (strcmp(json_string_value(json_object_get(o, "verdict")), "fail") == 0) {
            found = 1;
            cr_expect_gt(json_number_value(json_object_get(o, "measured")), 1.0,
                         "the measured gap is above the 1 s limit");
        }
    }
    cr_expect(found, "one verify probe failed");
    json_decref(j);

    /* outputs and cleanup */
    const char *files[] = {"events.jsonl", "report.html", "faults.json", "summary.json", "logs/syncer.log"};
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char *d = hx_read_in(s.out, files[k]);
        cr_expect_not_null(d, "%s written", files[k]);
        if (d && strcmp(files[k], "report.html") == 0) {
            cr_expect(strstr(d, "ChaoslocoCharts.renderRun") && strstr(d, "id=\"run-data\"") &&
                          strstr(d, "\"start_mono_ms\":"),
                      "report: the dashboard's charts over the run data, with a fault window");
            cr_expect(strstr(d, "strict downtime") != NULL, "report: hypotheses table");
            cr_expect(strstr(d, "http://") == NULL, "report: no external requests");
        }
        free(d);
    }
    hx_expect_all_gone(s.out, 3, "the syncer and both agents");
    free(s.dir);
}
