/* test_agent_conflict.c - the stop rule of a real `chaosloco agent`
 * (docs/faults.md, "Faults that stop the unit"): a second fault that stops
 * the unit is refused with 409 naming the active one and does not disturb
 * it, and a kill of a paused unit (frozen or SIGSTOPped) lands at once
 * because the pause is ended first. Checked from outside via /proc. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent_it.h"

static void fini(void)
{
    ag_cleanup_all();
}

TestSuite(agent_conflict, .fini = fini, .timeout = 60);

/* POST a fault expecting 409; the error text into msg. */
static void expect_conflict(const ag *a, const char *body, char *msg, size_t len)
{
    int st = 0;
    json_t *r = ag_call(a, "POST", "/v1/faults", body, 1, &st);
    snprintf(msg, len, "%s", js(r, "error"));
    cr_assert_eq(st, 409, "POST %s -> %d (%s), want 409", body, st, msg);
    cr_assert_null(json_object_get(r, "id"), "a refused fault has no record");
    json_decref(r);
}

Test(agent_conflict, second_stopping_fault_is_409_and_leaves_the_pause_alone)
{
    ag a;
    ag_start(&a, "conflict", NULL, NULL, NULL);
    pid_t pid = ag_wait_running(&a, 5000);
    json_t *f = ag_fault(&a, "{\"type\":\"pause\",\"duration_ms\":30000,\"params\":{\"method\":\"signal\"}}");
    char pause_id[32];
    snprintf(pause_id, sizeof pause_id, "%s", js(f, "id"));
    json_decref(f);
    cr_assert(ag_wait_proc(pid, "T", 1000), "paused unit shows T (state %c)", uproc_state(pid));

    char msg[512];
    expect_conflict(
        &a, "{\"type\":\"straggle\",\"duration_ms\":30000,\"params\":{\"period_ms\":60,\"stopped_ms\":20}}",
        msg, sizeof msg);
    cr_assert(strstr(msg, pause_id), "409 names the active pause %s: %s", pause_id, msg);
    expect_conflict(&a, "{\"type\":\"pause\",\"duration_ms\":1000}", msg, sizeof msg);
    cr_assert(strstr(msg, pause_id), "%s", msg);
    expect_conflict(&a,
                    "{\"type\":\"cpu\",\"duration_ms\":1000,\"params\":{\"cpus\":0.2,\"method\":\"duty\"}}",
                    msg, sizeof msg);
    cr_assert(strstr(msg, pause_id), "%s", msg);

    /* A straggle that had been applied would SIGCONT the unit within 20 ms:
     * it stays stopped the whole time. */
    for (int i = 0; i < 60; i++) {
        cr_assert_eq(uproc_state(pid), 'T', "the pause still holds (sample %d: %c)", i, uproc_state(pid));
        cx_sleep_ms(5);
    }
    json_t *s = ag_status(&a);
    cr_assert_eq(json_integer_value(json_object_get(s, "faults_active")), 1);
    cr_assert_str_eq(js(json_object_get(s, "unit"), "state"), "paused");
    json_decref(s);

    /* Once the pause is deleted, the straggle is accepted. */
    ag_delete(&a, pause_id);
    cr_assert(ag_wait_proc(pid, "RS", 1000));
    f = ag_fault(
        &a, "{\"type\":\"straggle\",\"duration_ms\":30000,\"params\":{\"period_ms\":100,\"stopped_ms\":50}}");
    char str_id[32];
    snprintf(str_id, sizeof str_id, "%s", js(f, "id"));
    json_decref(f);
    expect_conflict(&a, "{\"type\":\"pause\",\"duration_ms\":1000}", msg, sizeof msg);
    cr_assert(strstr(msg, str_id), "now the straggle %s is named: %s", str_id, msg);
    ag_delete(&a, str_id);
    ag_stop(&a);
}

/* Pause (method), then kill (signal, restart); the old unit must be gone
 * within 2 s although the pause had 30 s left. Returns the kill record. */
static json_t *kill_paused(const ag *a, pid_t pid, const char *pause_params, const char *kill_params,
                           char *pause_id, json_t **pause_rec)
{
    char body[256];
    snprintf(body, sizeof body, "{\"type\":\"pause\",\"duration_ms\":30000,\"params\":%s}", pause_params);
    json_t *p = ag_fault(a, body);
    snprintf(pause_id, 32, "%s", js(p, "id"));
    *pause_rec = p;
    json_t *ev = json_object_get(p, "evidence");
    if (strcmp(js(ev, "method"), "signal") == 0)
        cr_assert(ag_wait_proc(pid, "T", 1000), "SIGSTOPped (state %c)", uproc_state(pid));
    snprintf(body, sizeof body, "{\"type\":\"kill\",\"duration_ms\":30000,\"params\":%s}", kill_params);
    int64_t t0 = cx_mono_ms();
    json_t *k = ag_fault(a, body);
    cr_assert(ag_wait_gone(pid, 2000),
              "the killed paused unit was reaped within 2 s (state %c, pause method %s)", uproc_state(pid),
              js(ev, "method"));
    cr_log_info("pause method %s: killed unit reaped %lld ms after the kill request", js(ev, "method"),
                (long long)(cx_mono_ms() - t0));
    json_t *ended = json_object_get(json_object_get(k, "evidence"), "ended_first");
    cr_assert_eq(json_array_size(ended), 1, "kill evidence lists the pause it ended");
    cr_assert_str_eq(json_string_value(json_array_get(ended, 0)), pause_id);
    char st[32], reason[32];
    ag_fault_state(a, pause_id, st, sizeof st, reason, sizeof reason);
    cr_assert_str_eq(st, "reverted");
    cr_assert_str_eq(reason, "unit_exit");
    return k;
}

Test(agent_conflict, kill_of_a_paused_unit_is_reaped_promptly)
{
    ag a;
    ag_start(&a, "killpaused", NULL, NULL, NULL);
    pid_t pid = ag_wait_running(&a, 5000);

    /* Default method: the cgroup freezer where writable (a v1-frozen task
     * acts on SIGKILL only after thaw), else SIGSTOP. No restart. */
    char pause_id[32];
    json_t *prec = NULL;
    json_t *k = kill_paused(&a, pid, "{}", "{\"signal\":\"KILL\",\"restart_after_ms\":200}", pause_id, &prec);
    json_decref(k);
    json_decref(prec);

    /* A new incarnation runs unstopped (the pause ended with the old one). */
    pid_t pid2 = 0;
    int64_t end = cx_mono_ms() + 5000;
    while (cx_mono_ms() < end) {
        pid2 = ag_unit_pid(&a);
        if (pid2 > 0 && pid2 != pid)
            break;
        cx_sleep_ms(10);
    }
    cr_assert(pid2 > 0 && pid2 != pid, "restarted after the kill");
    pid2 = ag_wait_running(&a, 5000);
    cr_assert(ag_wait_proc(pid2, "RS", 1000), "the new unit is not frozen (state %c)", uproc_state(pid2));

    /* SIGSTOP pause and a SIGTERM, which a stopped process would only act
     * on once continued. */
    k = kill_paused(&a, pid2, "{\"method\":\"signal\"}", "{\"signal\":\"TERM\"}", pause_id, &prec);
    json_decref(k);
    json_decref(prec);
    json_t *s = ag_status(&a);
    json_t *u = json_object_get(s, "unit");
    cr_assert_str_eq(js(u, "state"), "killed", "killed for good, not paused");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(u, "last_exit"), "signal")), SIGTERM);
    json_decref(s);
    ag_stop(&a);
}
