/* test_agent_learner.c - a real `chaosloco learner` supervised by a real
 * agent, talking to a real syncer through the agent's proxy: a kill with
 * restart makes it rejoin with a new incarnation, the nan fault makes the
 * syncer reject a non-finite contribution, the clock fault shows up as the
 * learner's clock skew in its heartbeats, and a partition stops its traffic
 * until reverted. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_it.h"
#include "common/http_client.h"

static void fini(void)
{
    ag_cleanup_all();
}

TestSuite(agent_learner, .fini = fini, .timeout = 120);

/* The syncer's learner entry for id 0 (new ref) or NULL. */
static json_t *syncer_learner(const char *surl)
{
    char url[300];
    snprintf(url, sizeof url, "%s/v1/status", surl);
    int st = 0;
    json_t *s = it_http_json("GET", url, NULL, NULL, &st);
    if (!s)
        return NULL;
    json_t *found = NULL;
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(s, "learners"), i, l)
    {
        if (json_integer_value(json_object_get(l, "id")) == 0)
            found = json_incref(l);
    }
    json_decref(s);
    return found;
}

/* Scan the syncer's events for one of type with key == want (string) or,
 * when want is NULL, any; returns 1 when found. For numbers, *num gets the
 * value of numkey of the last match. */
static int syncer_event(const char *surl, const char *type, const char *key, const char *want,
                        const char *numkey, double *num)
{
    cx_http_client *c = cx_http_client_new(surl, NULL);
    cx_http_result r;
    cx_http_result_init(&r);
    int found = 0;
    if (cx_http_do(c, "GET", "/v1/events?since=0", NULL, NULL, 0, NULL, 0, &r, NULL, 0) == 0 &&
        r.status == 200 && r.body.data) {
        char *save = NULL;
        for (char *line = strtok_r(r.body.data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            json_t *e = json_loads(line, 0, NULL);
            if (e && strcmp(js(e, "type"), type) == 0 && (!key || strcmp(js(e, key), want) == 0)) {
                found = 1;
                if (numkey && num)
                    *num = json_number_value(json_object_get(e, numkey));
            }
            json_decref(e);
        }
    }
    cx_http_result_cleanup(&r);
    cx_http_client_free(c);
    return found;
}

Test(agent_learner, learner_under_agent_kill_nan_clock_partition)
{
    char *dir = it_mkdtemp("learner");
    char surl[200];
    ag a;
    ag_start_learner_unit(&a, dir, "learner", surl, sizeof surl, 10000);

    /* Joined and heartbeating through the proxy. */
    json_t *l = NULL;
    int64_t end = cx_mono_ms() + 30000;
    while (cx_mono_ms() < end) {
        json_decref(l);
        l = syncer_learner(surl);
        if (l && json_integer_value(json_object_get(l, "step")) > 8)
            break;
        cx_sleep_ms(100);
    }
    cr_assert_not_null(l, "learner never joined");
    long long inc1 = json_integer_value(json_object_get(l, "incarnation"));
    json_decref(l);
    cr_assert_gt(inc1, 0);

    /* nan: the next contribution is non-finite; the syncer rejects it. */
    json_decref(ag_fault(&a, "{\"type\":\"nan\",\"duration_ms\":30000,\"params\":{\"count\":1}}"));
    int rejected = 0;
    end = cx_mono_ms() + 30000;
    while (cx_mono_ms() < end && !rejected) {
        rejected = syncer_event(surl, "reject", "reason", "nonfinite", NULL, NULL);
        cx_sleep_ms(200);
    }
    cr_assert(rejected, "the syncer rejected the NaN contribution");

    /* clock: +1 h realtime skew, visible as clock_skew_ms in heartbeats. */
    json_t *s = ag_status(&a);
    int have_faketime = json_is_string(json_object_get(json_object_get(s, "hooks"), "faketime_file"));
    json_decref(s);
    if (have_faketime) {
        json_decref(
            ag_fault(&a, "{\"type\":\"clock\",\"duration_ms\":30000,\"params\":{\"offset_s\":3600}}"));
        double skew = 0;
        end = cx_mono_ms() + 20000;
        while (cx_mono_ms() < end) {
            syncer_event(surl, "heartbeat", NULL, NULL, "clock_skew_ms", &skew);
            if (skew > 3000000)
                break;
            cx_sleep_ms(200);
        }
        cr_assert_gt(skew, 3000000, "heartbeat clock_skew_ms shows the +1 h skew (%.0f)", skew);
    }

    /* partition: no bytes through the proxy while it holds. */
    json_t *p = ag_fault(&a, "{\"type\":\"partition\",\"duration_ms\":1500,\"target\":\"sy\"}");
    char pid_[32];
    snprintf(pid_, sizeof pid_, "%s", js(p, "id"));
    json_decref(p);
    s = ag_status(&a);
    json_t *pst = json_object_get(json_array_get(json_object_get(s, "proxies"), 0), "stats");
    long long up0 = json_integer_value(json_object_get(pst, "bytes_up"));
    json_decref(s);
    cx_sleep_ms(800);
    s = ag_status(&a);
    pst = json_object_get(json_array_get(json_object_get(s, "proxies"), 0), "stats");
    long long up1 = json_integer_value(json_object_get(pst, "bytes_up"));
    json_decref(s);
    cr_assert_eq(up1, up0, "no bytes upstream while partitioned (%lld -> %lld)", up0, up1);
    cr_assert(ag_wait_fault(&a, pid_, "expired", 5000));
    end = cx_mono_ms() + 20000;
    long long up2 = up1;
    while (cx_mono_ms() < end && up2 == up1) {
        cx_sleep_ms(200);
        s = ag_status(&a);
        pst = json_object_get(json_array_get(json_object_get(s, "proxies"), 0), "stats");
        up2 = json_integer_value(json_object_get(pst, "bytes_up"));
        json_decref(s);
    }
    cr_assert_gt(up2, up1, "traffic resumes after the partition");

    /* kill + restart: the learner rejoins with a new incarnation. */
    json_decref(ag_fault(&a, "{\"type\":\"kill\",\"duration_ms\":5000,\"params\":{\"signal\":\"KILL\","
                             "\"restart_after_ms\":200}}"));
    long long inc2 = inc1;
    end = cx_mono_ms() + 40000;
    while (cx_mono_ms() < end && inc2 <= inc1) {
        cx_sleep_ms(200);
        l = syncer_learner(surl);
        if (l)
            inc2 = json_integer_value(json_object_get(l, "incarnation"));
        json_decref(l);
    }
    cr_assert_gt(inc2, inc1, "learner rejoined with a new incarnation (%lld -> %lld)", inc1, inc2);
    cr_assert_eq(ag_incarnation(&a), 2);
    ag_stop(&a);
    free(dir);
}
