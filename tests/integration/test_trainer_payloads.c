/* test_trainer_payloads.c - malformed, truncated, bad-CRC and NaN payloads
 * get a 4xx naming the reason, are counted, logged as `reject` events
 * (aggregated per reason per second, with a count), and leave the model
 * (versions, eval loss) unchanged. */
#include "trainer_it.h"

#include <sys/stat.h>

#include "common/crc32c.h"
#include "common/file.h"
#include "trainer/protocol.h"

typedef struct hdrs {
    char lines[10][96];
    const char *p[11];
    int n;
} hdrs;

static void add(hdrs *h, const char *name, const char *val)
{
    snprintf(h->lines[h->n], 96, "%s: %s", name, val);
    h->p[h->n] = h->lines[h->n];
    h->n++;
    h->p[h->n] = NULL;
}

/* POST as the learner the headers name (with its credential). */
static int post(tr_run *r, const char *path, hdrs *h, const void *body, size_t len, char *answer, size_t alen)
{
    long long who = -1;
    for (int i = 0; h && i < h->n; i++)
        if (strncmp(h->lines[i], PROTO_H_LEARNER ": ", strlen(PROTO_H_LEARNER) + 2) == 0)
            who = atoll(h->lines[i] + strlen(PROTO_H_LEARNER) + 2);
    cx_http_opts o = {.bearer = tr_learner_cred(r, who)};
    cx_http_client *c = cx_http_client_new(r->url, &o);
    cx_http_result res;
    char err[256];
    cx_http_result_init(&res);
    int rc = cx_http_do(c, "POST", path, h ? h->p : NULL, body, len, "application/octet-stream", 10000, &res,
                        err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    snprintf(answer, alen, "%s", res.body.data ? res.body.data : "");
    int st = res.status;
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    return st;
}

static void contribution_headers(hdrs *h, json_int_t inc, int frag, uint32_t crc, const char *skip)
{
    char v[32];
    h->n = 0;
    h->p[0] = NULL;
    if (!skip || strcmp(skip, "learner"))
        add(h, PROTO_H_LEARNER, "0");
    snprintf(v, sizeof v, "%lld", (long long)inc);
    if (!skip || strcmp(skip, "incarnation"))
        add(h, PROTO_H_INCARNATION, v);
    snprintf(v, sizeof v, "%d", frag);
    add(h, PROTO_H_FRAGMENT, v);
    add(h, PROTO_H_BASE_VERSION, "0");
    add(h, PROTO_H_TOKENS, "384");
    add(h, PROTO_H_STEPS, "24");
    add(h, PROTO_H_ENCODING, "f32");
    if (!skip || strcmp(skip, "step"))
        add(h, PROTO_H_STEP, "24");
    snprintf(v, sizeof v, "%08x", crc);
    if (!skip || strcmp(skip, "crc"))
        add(h, PROTO_H_CRC32C, v);
}

Test(trainer_payloads, bad_payloads_are_rejected_and_change_nothing, .timeout = 90)
{
    tr_run r = {0};
    const char *args[] = {"--mode", "diloco", "--learners", "2", "--fragments", "4", TR_MODEL, NULL};
    tr_syncer_start(&r, "payloads", args);
    char url[160], answer[1024];
    int status = 0;
    /* malformed JSON and unknown keys at join */
    snprintf(url, sizeof url, "%s/v1/join", r.url);
    json_t *bad = json_pack("{s:i, s:i, s:i}", "learner", 0, "incarnation", 0, "colour", 3);
    json_t *ans = it_http_json("POST", url, bad, tr_cred(&r, "learner-0"), &status);
    cr_assert_eq(status, 400, "unknown key at join");
    cr_assert(strstr(json_string_value(json_object_get(ans, "error")), "colour"));
    json_decref(ans);
    json_decref(bad);
    json_t *join = json_pack("{s:i, s:i}", "learner", 0, "incarnation", 0);
    ans = it_http_json("POST", url, join, tr_cred(&r, "learner-0"), &status);
    json_decref(join);
    cr_assert_eq(status, 200);
    json_int_t inc = tr_int(ans, "incarnation");
    json_t *f0 = json_array_get(json_object_get(ans, "fragments"), 0);
    size_t len = (size_t)tr_int(f0, "length");
    json_int_t v0 = tr_int(f0, "version");
    json_decref(ans);
    double loss0 = tr_eval_loss(&r, NULL);

    float *d = calloc(len, sizeof(float));
    for (size_t i = 0; i < len; i++)
        d[i] = 1e-3f * (float)(i % 7);
    uint32_t crc = cx_crc32c(0, d, len * 4);
    hdrs h;
    struct {
        const char *what, *reason;
        int status;
    } cases[] = {
        {"truncated", "length", 400},
        {"bad crc", "checksum", 400},
        {"nan", "nonfinite", 400},
        {"no crc header", "bad_header", 400},
        {"stale incarnation", "stale_incarnation", 409},
        {"unknown learner", "unknown_learner", 403},
        {"garbage header", "bad_header", 400},
        {"no step header (it numbers contributions: replays are refused)", "bad_header", 400},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int st;
        if (k == 0) {
            contribution_headers(&h, inc, 0, cx_crc32c(0, d, len * 4 - 8), NULL);
            st = post(&r, "/v1/fragments/0/contributions", &h, d, len * 4 - 8, answer, sizeof answer);
        } else if (k == 1) {
            contribution_headers(&h, inc, 0, crc ^ 1, NULL);
            st = post(&r, "/v1/fragments/0/contributions", &h, d, len * 4, answer, sizeof answer);
        } else if (k == 2) {
            float keep = d[0];
            d[0] = NAN;
            contribution_headers(&h, inc, 0, cx_crc32c(0, d, len * 4), NULL);
            st = post(&r, "/v1/fragments/0/contributions", &h, d, len * 4, answer, sizeof answer);
            d[0] = keep;
        } else if (k == 3) {
            contribution_headers(&h, inc, 0, crc, "crc");
            st = post(&r, "/v1/fragments/0/contributions", &h, d, len * 4, answer, sizeof answer);
        } else if (k == 4) {
            contribution_headers(&h, inc + 5, 0, crc, NULL);
            st = post(&r, "/v1/fragments/0/contributions", &h, d, len * 4, answer, sizeof answer);
        } else if (k == 5) {
            contribution_headers(&h, inc, 0, crc, NULL);
            /* learner 1 (its own credential) never joined */
            snprintf(h.lines[0], 96, "%s: 1", PROTO_H_LEARNER);
            st = post(&r, "/v1/fragments/0/contributions", &h, d, len * 4, answer, sizeof answer);
        } else if (k == 6) {
            contribution_headers(&h, inc, 0, crc, NULL);
            snprintf(h.lines[6], 96, "%s: int3", PROTO_H_ENCODING);
            st = post(&r, "/v1/fragments/0/contributions", &h, d, len * 4, answer, sizeof answer);
        } else {
            contribution_headers(&h, inc, 0, crc, "step");
            st = post(&r, "/v1/fragments/0/contributions", &h, d, len * 4, answer, sizeof answer);
            cr_assert(strstr(answer, PROTO_H_STEP), "the error names %s: %s", PROTO_H_STEP, answer);
        }
        cr_assert_eq(st, cases[k].status, "%s: HTTP %d %s", cases[k].what, st, answer);
        json_t *j = json_loads(answer, 0, NULL);
        cr_assert(j, "%s: a JSON error body", cases[k].what);
        cr_assert_str_eq(json_string_value(json_object_get(j, "reason")), cases[k].reason, "%s",
                         cases[k].what);
        cr_assert_eq(tr_int(j, "status"), cases[k].status);
        cr_assert(json_is_string(json_object_get(j, "error")));
        json_decref(j);
    }
    /* nothing merged, nothing changed */
    json_t *st = tr_get(&r, "/v1/status");
    cr_assert_eq(tr_int(st, "merges"), 0);
    cr_assert_eq(tr_int(json_array_get(json_object_get(st, "fragments"), 0), "version"), v0);
    json_t *rj = json_object_get(json_object_get(st, "contributions"), "rejected_by_reason");
    cr_assert_eq(tr_int(rj, "length"), 1);
    cr_assert_eq(tr_int(rj, "checksum"), 1);
    cr_assert_eq(tr_int(rj, "nonfinite"), 1);
    cr_assert_eq(tr_int(rj, "bad_header"), 3);
    cr_assert_eq(tr_int(rj, "stale_incarnation"), 1);
    cr_assert_eq(tr_int(rj, "unknown_learner"), 1);
    cr_assert_eq(tr_int(json_object_get(st, "contributions"), "accepted"), 0);
    json_decref(st);
    cx_sleep_ms(300);
    double loss1 = tr_eval_loss(&r, NULL);
    cr_assert_float_eq(loss1, loss0, 1e-9, "eval loss unchanged");
    /* reject events are aggregated per reason per second: the two
     * bad_header ones arrive as one event with count 1 and, at the end of
     * that second, one with the rest (or together); the counts add up */
    json_int_t rejects = 0;
    for (int tries = 0; tries < 50 && rejects != 8; tries++) {
        cx_sleep_ms(100);
        json_t *evs = tr_events(&r, 0);
        size_t i;
        json_t *e;
        rejects = 0;
        json_array_foreach(evs, i, e) if (strcmp(tr_type(e), "reject") == 0) rejects += tr_int(e, "count");
        json_decref(evs);
    }
    cr_assert_eq(rejects, 8, "the reject events count every refused payload");
    /* the metrics say the same */
    cx_http_client *c = cx_http_client_new(r.url, NULL);
    cx_http_result res;
    char err[256];
    cx_http_result_init(&res);
    cr_assert_eq(cx_http_do(c, "GET", "/metrics", NULL, NULL, 0, NULL, 5000, &res, err, sizeof err), 0);
    cr_assert(strstr(res.body.data,
                     "chaosloco_syncer_contributions_total{result=\"rejected\",reason=\"checksum\"} 1"),
              "%s", res.body.data);
    cr_assert(strstr(res.body.data, "# TYPE chaosloco_syncer_merges_total counter"));
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    /* a good contribution is still accepted afterwards */
    contribution_headers(&h, inc, 0, crc, NULL);
    cr_assert_eq(post(&r, "/v1/fragments/0/contributions", &h, d, len * 4, answer, sizeof answer), 202, "%s",
                 answer);
    free(d);
    tr_done(&r);
}

Test(trainer_payloads, nan_hook_is_caught_and_training_goes_on, .timeout = 90)
{
    tr_run r = {0};
    const char *args[] = {"--mode",      "diloco", "--learners",      "2",   "--steps", "96", "--H", "24",
                          "--fragments", "4",      "--eval-every-ms", "300", TR_MODEL,  NULL};
    tr_syncer_start(&r, "nanhook", args);
    char hook[700], file[760], env[800];
    snprintf(hook, sizeof hook, "%s/hook", r.dir);
    mkdir(hook, 0755);
    snprintf(file, sizeof file, "%s/nan", hook);
    FILE *f = fopen(file, "w");
    cr_assert(f);
    fputs("2\n", f);
    fclose(f);
    snprintf(env, sizeof env, "CHAOSLOCO_HOOK_DIR=%s", hook);
    const char *envs[] = {env, NULL};
    pid_t a = tr_learner_start(&r, 0, NULL, envs), b = tr_learner_start(&r, 1, NULL, NULL);
    tr_expect_exit0(&r, a, 0, 60000);
    tr_expect_exit0(&r, b, 1, 30000);
    json_t *st = tr_get(&r, "/v1/status");
    json_t *rj = json_object_get(json_object_get(st, "contributions"), "rejected_by_reason");
    cr_assert_eq(tr_int(rj, "nonfinite"), 2, "both poisoned contributions were refused");
    cr_assert_eq(tr_int(st, "merges"), 16, "every round still merged (4 rounds x 4 fragments)");
    double l = tr_final_eval(&r);
    cr_assert(isfinite(l) && l < log(256.0), "the global model stayed finite: %f", l);
    json_decref(st);
    char buf[32] = "";
    f = fopen(file, "r");
    cr_assert(f);
    cr_assert(fgets(buf, sizeof buf, f));
    fclose(f);
    cr_assert_eq(atoi(buf), 0, "the hook counted down to 0, got '%s'", buf);
    tr_done(&r);
}

Test(trainer_payloads, learner_gives_up_when_the_syncer_is_gone, .timeout = 60)
{
    tr_run r = {0};
    const char *args[] = {"--mode", "decoupled", "--learners", "1", "--steps", "100000", TR_MODEL, NULL};
    const char *give_up[] = {"--give-up-s", "2", NULL};
    tr_syncer_start(&r, "giveup", args);
    pid_t a = tr_learner_start(&r, 0, give_up, NULL);
    cr_assert_geq(tr_wait_merges(&r, 2, 30000), 2);
    it_signal(r.syncer, SIGKILL, 1);
    int64_t t0 = cx_mono_ms();
    int st = it_wait_exit(a, 20000);
    int64_t took = cx_mono_ms() - t0;
    cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit 1 after giving up (status %d)", st);
    cr_assert(took >= 1500 && took < 15000, "gave up after about 2 s, took %lld ms", (long long)took);
    char path[700], *log = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/learner0.log", r.dir);
    cr_assert_eq(cx_file_read(path, 1 << 24, &log, &len, NULL, 0), 0);
    cr_assert(strstr(log, "unreachable for more than 2 s"), "a clear message in the log");
    free(log);
    tr_done(&r);
}
