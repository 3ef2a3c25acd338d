/* test_timeline.c - the runner's timeline (harness/run/timeline.h) without
 * a process: what an agent's refusal means for the run, the rollbacks'
 * targets resolved once, and the counts the horizon and the progress line
 * read (pending, active), on a runner built by hand from an experiment. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "harness/run/runner.h"
#include "runner_fixture.h"

static runner r;

static void teardown(void)
{
    timeline_cleanup(&r);
    rfx_free(&r);
}

TestSuite(timeline, .fini = teardown);

/* r with the experiment in text, its schedule and the timeline's state. */
static void load(const char *text)
{
    rfx_load(&r, text);
    rfx_schedule(&r);
    cr_assert_eq(timeline_init(&r), 0);
}

Test(timeline, a_refusal_is_read_from_its_reason)
{
    /* a method action waits for a unit that was not running; a chaos draw
     * (checked before it was sent) fails the run */
    cr_assert_eq(timeline_on_refusal(1, AGC_R_UNIT_NOT_RUNNING), TL_REFUSAL_WAIT);
    cr_assert_eq(timeline_on_refusal(0, AGC_R_UNIT_NOT_RUNNING), TL_REFUSAL_ERROR);
    /* a halted agent aborts the run, whatever the entry */
    cr_assert_eq(timeline_on_refusal(1, AGC_R_HALTED), TL_REFUSAL_ABORT);
    cr_assert_eq(timeline_on_refusal(0, AGC_R_HALTED), TL_REFUSAL_ABORT);
    /* anything else is an injection error, also a plain conflict (409) and
     * an answer without a reason */
    static const agc_reason others[] = {AGC_R_NONE,     AGC_R_BAD_REQUEST,   AGC_R_CONFLICT,
                                        AGC_R_INTERNAL, AGC_R_NOT_SUPPORTED, AGC_R_UNAVAILABLE};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        cr_assert_eq(timeline_on_refusal(1, others[i]), TL_REFUSAL_ERROR, "reason %s",
                     agc_reason_name(others[i]));
        cr_assert_eq(timeline_on_refusal(0, others[i]), TL_REFUSAL_ERROR, "reason %s",
                     agc_reason_name(others[i]));
    }
}

Test(timeline, rollback_targets_are_resolved_once_at_init)
{
    load("{\"title\": \"t\", \"topology\": {\"learners\": 4}, \"method\": [{\"name\": \"p\", \"fault\": "
         "\"pause\","
         " \"targets\": {\"ids\": [1]}, \"at_s\": 1, \"duration_ms\": 500}],"
         " \"rollbacks\": [{\"action\": \"revert_faults\"},"
         " {\"name\": \"r2\", \"action\": \"resume\", \"targets\": {\"ids\": [2, 0]}},"
         " {\"name\": \"h\", \"action\": \"halt\", \"targets\": {\"percent\": 50}}]}");
    cr_assert_eq(r.setup.e->nrollbacks, 3);
    /* no targets: every learner */
    cr_assert_eq(r.tl.rb[0].n, 4);
    for (int k = 0; k < 4; k++)
        cr_assert_eq(r.tl.rb[0].ids[k], k);
    /* ids: as written */
    cr_assert_eq(r.tl.rb[1].n, 2);
    cr_assert_eq(r.tl.rb[1].ids[0], 2);
    cr_assert_eq(r.tl.rb[1].ids[1], 0);
    /* percent 50 of 4: the first two (as ctk.c's export says) */
    cr_assert_eq(r.tl.rb[2].n, 2);
    cr_assert_eq(r.tl.rb[2].ids[0], 0);
    cr_assert_eq(r.tl.rb[2].ids[1], 1);
    int ids[EXP_MAX_LEARNERS];
    cr_assert_eq(exp_rollback_targets(r.setup.e, &r.setup.e->rollbacks[1], ids), 2);
    cr_assert_str_eq(exp_rollback_kind_name(r.setup.e->rollbacks[2].kind), "halt");
}

Test(timeline, pending_and_active_follow_each_entry)
{
    load("{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": ["
         "{\"name\": \"a\", \"fault\": \"pause\", \"targets\": {\"ids\": [0]}, \"at_s\": 1, \"duration_ms\": "
         "500},"
         "{\"name\": \"b\", \"fault\": \"pause\", \"targets\": {\"ids\": [1]}, \"at_s\": 2, \"duration_ms\": "
         "500},"
         "{\"name\": \"c\", \"fault\": \"pause\", \"targets\": {\"ids\": [1]}, \"at_s\": 3,"
         " \"duration_ms\": 500, \"until_end\": true}]}");
    cr_assert_eq(r.setup.sched->n, 3);
    cr_assert_eq(timeline_pending(&r), 3, "nothing fired: every entry pending");
    cr_assert_eq(timeline_active(&r), 0);
    int ka = -1, kc = -1;
    for (int k = 0; k < r.setup.sched->n; k++) {
        if (strcmp(r.setup.sched->entries[k].name, "a") == 0)
            ka = k;
        if (strcmp(r.setup.sched->entries[k].name, "c") == 0)
            kc = k;
    }
    cr_assert(ka >= 0 && kc >= 0);
    /* a sent and not healed: still pending, and active */
    r.tl.fx[ka].fired = r.tl.fx[ka].ok = 1;
    cr_assert_eq(timeline_pending(&r), 3);
    cr_assert_eq(timeline_active(&r), 1);
    /* a healed: neither */
    r.tl.fx[ka].healed = 1;
    cr_assert_eq(timeline_pending(&r), 2);
    cr_assert_eq(timeline_active(&r), 0);
    /* an until_end fault, once sent, is active but no longer pending */
    r.tl.fx[kc].fired = r.tl.fx[kc].ok = 1;
    cr_assert_eq(timeline_pending(&r), 1);
    cr_assert_eq(timeline_active(&r), 1);
}
