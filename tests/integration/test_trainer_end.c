/* test_trainer_end.c - POST /v1/end ends a run gracefully in every mode:
 * learners with a huge --steps budget finish their step, send what they
 * have, leave and exit 0; the syncer records the end (event, status) and
 * keeps serving. A learner exits promptly on SIGTERM mid-run. Bad bodies
 * get a 400 naming the problem. */
#include "trainer_it.h"

static json_t *post_end(tr_run *r, const char *body_text, int *status)
{
    char url[160];
    snprintf(url, sizeof url, "%s/v1/end", r->url);
    json_t *body = body_text ? json_loads(body_text, 0, NULL) : NULL;
    json_t *ans = it_http_json("POST", url, body, tr_cred(r, "admin"), status);
    json_decref(body);
    return ans;
}

static void end_mode(const char *mode, const char *tag)
{
    tr_run r = {0};
    const char *args[] = {"--mode",
                          mode,
                          "--learners",
                          "2",
                          "--steps",
                          "100000000",
                          "--H",
                          "8",
                          "--fragments",
                          "2",
                          "--eval-every-ms",
                          "300",
                          "--elastic-deadline-ms",
                          strcmp(mode, "ddp-elastic") == 0 ? "2000" : "0",
                          TR_MODEL,
                          NULL};
    tr_syncer_start(&r, tag, args);
    pid_t a = tr_learner_start(&r, 0, NULL, NULL), b = tr_learner_start(&r, 1, NULL, NULL);
    cr_assert_geq(tr_wait_merges(&r, 3, 60000), 3, "%s: merges before the end", mode);
    int st = 0;
    json_t *ans = post_end(&r, "{\"reason\": \"test horizon\"}", &st);
    cr_assert_eq(st, 200, "%s: POST /v1/end answered %d", mode, st);
    cr_assert(json_is_false(json_object_get(ans, "already")));
    json_decref(ans);
    tr_expect_exit0(&r, a, 0, 30000);
    tr_expect_exit0(&r, b, 1, 30000);
    ans = post_end(&r, "{}", &st); /* no reason: the first one's is kept */
    cr_assert_eq(st, 200);
    cr_assert(json_is_true(json_object_get(ans, "already")), "a second end is idempotent");
    cr_assert_str_eq(json_string_value(json_object_get(ans, "reason")), "test horizon");
    json_decref(ans);
    json_t *s = tr_get(&r, "/v1/status");
    cr_assert_not_null(s, "the syncer keeps serving after the end");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(s, "end"), "reason")), "test horizon");
    json_t *ls = json_object_get(s, "learners");
    size_t i;
    json_t *l;
    json_array_foreach(ls, i, l) cr_assert_str_eq(json_string_value(json_object_get(l, "state")), "left",
                                                  "%s: learner %zu left after the end", mode, i);
    json_decref(s);
    json_t *evs = tr_events(&r, 0);
    int ends = 0;
    json_t *e;
    json_array_foreach(evs, i, e) ends += strcmp(tr_type(e), "end") == 0;
    json_decref(evs);
    cr_assert_eq(ends, 1, "%s: one end event", mode);
    tr_done(&r);
}

Test(trainer_end, decoupled, .timeout = 120)
{
    end_mode("decoupled", "end-dec");
}
Test(trainer_end, diloco, .timeout = 120)
{
    end_mode("diloco", "end-dil");
}
Test(trainer_end, ddp, .timeout = 120)
{
    end_mode("ddp", "end-ddp");
}
Test(trainer_end, ddp_elastic, .timeout = 120)
{
    end_mode("ddp-elastic", "end-ela");
}

Test(trainer_end, bad_bodies_are_refused, .timeout = 60)
{
    tr_run r = {0};
    const char *args[] = {"--mode", "decoupled", "--learners", "1", TR_MODEL, NULL};
    tr_syncer_start(&r, "end-bad", args);
    int st = 0;
    json_t *ans = post_end(&r, "{\"reason\": 7}", &st);
    cr_assert_eq(st, 400);
    cr_assert(strstr(json_string_value(json_object_get(ans, "error")), "reason"), "error names the key");
    json_decref(ans);
    ans = post_end(&r, "{\"why\": \"x\"}", &st);
    cr_assert_eq(st, 400, "unknown keys are refused");
    json_decref(ans);
    json_t *s = tr_get(&r, "/v1/status");
    cr_assert(json_is_null(json_object_get(s, "end")), "a refused end does not end the run");
    json_decref(s);
    tr_done(&r);
}

Test(trainer_end, sigterm_is_prompt, .timeout = 90)
{
    tr_run r = {0};
    const char *args[] = {"--mode", "decoupled", "--learners", "1", "--steps", "100000000", TR_MODEL, NULL};
    tr_syncer_start(&r, "end-term", args);
    const char *slow[] = {"--slowdown", "3", NULL};
    pid_t a = tr_learner_start(&r, 0, slow, NULL);
    cr_assert_geq(tr_wait_merges(&r, 2, 60000), 2);
    int64_t t0 = cx_mono_ms();
    it_signal(a, SIGTERM, 0);
    tr_expect_exit0(&r, a, 0, 15000);
    cr_log_info("learner exited %lld ms after SIGTERM", (long long)(cx_mono_ms() - t0));
    tr_done(&r);
}

/* The syncer names a corpus, never a path: a learner whose only source for
 * a data file is the syncer's config refuses to join, naming the file; the
 * same learner given the file by its own --data trains. */
Test(trainer_end, a_data_file_only_by_the_learners_own_flag, .timeout = 120)
{
    tr_run r = {0};
    char *dir = it_mkdtemp("end-data");
    char path[700];
    snprintf(path, sizeof path, "%s/corpus.txt", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 400; i++)
        fprintf(f, "line %d of a small corpus for this test\n", i);
    fclose(f);
    const char *args[] = {"--mode", "decoupled", "--learners", "1", "--steps", "40", TR_MODEL, "--data", path, NULL};
    tr_syncer_start(&r, "end-data", args);
    pid_t a = tr_learner_start(&r, 0, NULL, NULL);
    int st = it_wait_exit(a, 60000);
    cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0, "refused to join (status %d)", st);
    char log[800], line[1024];
    snprintf(log, sizeof log, "%s/learner0.log", r.dir);
    FILE *lf = fopen(log, "r");
    cr_assert_not_null(lf);
    int named = 0;
    while (fgets(line, sizeof line, lf))
        named |= strstr(line, "the syncer's config names the data file") && strstr(line, path);
    fclose(lf);
    cr_assert(named, "the learner's log names the file");
    const char *own[] = {"--data", path, NULL};
    pid_t b = tr_learner_start(&r, 0, own, NULL);
    tr_expect_exit0(&r, b, 0, 90000);
    tr_done(&r);
    it_rm_tree(dir);
    free(dir);
}
