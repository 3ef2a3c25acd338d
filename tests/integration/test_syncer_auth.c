/* test_syncer_auth.c - the syncer's access table with real processes on
 * 127.0.0.1 (docs/security.md): unauthenticated learner and admin calls get
 * 401 and change nothing; one learner's credential cannot act for another
 * (403); a text/plain POST gets 415; loopback reads need no credential
 * unless the Host header is not a loopback name; credential files others
 * can read are refused by the learner and the syncer; --insecure-no-auth is
 * refused on a non-loopback address. */
#include <sys/stat.h>

#include "common/crc32c.h"
#include "trainer/protocol.h"
#include "trainer_it.h"

static void fini(void)
{
    it_cleanup();
}

TestSuite(syncer_auth, .fini = fini, .timeout = 90);

/* One raw call: status, the answer's "reason" into reason (may be NULL). */
static int call(tr_run *r, const char *method, const char *path, const char *const *hdrs, const char *ctype,
                const void *body, size_t len, char *reason, size_t rlen)
{
    cx_http_client *c = cx_http_client_new(r->url, NULL);
    cx_http_result res;
    char err[256];
    cr_assert(c);
    cx_http_result_init(&res);
    int rc = cx_http_do(c, method, path, hdrs, body, len, ctype, 10000, &res, err, sizeof err);
    cr_assert_eq(rc, 0, "%s %s: %s", method, path, err);
    if (reason) {
        json_t *j = res.body.data ? json_loadb(res.body.data, res.body.len, 0, NULL) : NULL;
        const char *why = json_string_value(json_object_get(j, "reason"));
        snprintf(reason, rlen, "%s", why ? why : "");
        json_decref(j);
    }
    int st = res.status;
    if (st >= 400)
        cr_log_info("%s %s: HTTP %d %s", method, path, st, res.body.data ? res.body.data : "");
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    return st;
}

static int post_json(tr_run *r, const char *path, const char *auth, const char *json, char *reason,
                     size_t rlen)
{
    const char *h[] = {auth, NULL};
    return call(r, "POST", path, auth ? h : NULL, "application/json", json, strlen(json), reason, rlen);
}

static json_int_t auth_rejects(tr_run *r)
{
    json_t *st = tr_get(r, "/v1/status");
    cr_assert_not_null(st);
    json_int_t n =
        tr_int(json_object_get(json_object_get(st, "contributions"), "rejected_by_reason"), "auth");
    json_decref(st);
    return n;
}

Test(syncer_auth, unauthenticated_and_forged_calls_change_nothing)
{
    tr_run r = {0};
    const char *args[] = {"--mode", "diloco", "--learners", "2", "--fragments", "4", TR_MODEL, NULL};
    tr_syncer_start(&r, "auth", args);
    struct stat st;
    cr_assert_eq(stat(tr_cred_path(&r, "admin"), &st), 0, "credentials generated at the first start");
    cr_assert_eq(st.st_mode & 0777, 0600);
    char dpath[700];
    snprintf(dpath, sizeof dpath, "%s/credentials", r.state);
    cr_assert_eq(stat(dpath, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700);
    json_t *s0 = tr_get(&r, "/v1/status");
    cr_assert_not_null(s0, "a loopback read needs no credential");
    json_int_t v0 = tr_int(json_array_get(json_object_get(s0, "fragments"), 0), "version");
    json_decref(s0);
    char reason[64];

    /* no credential: 401 on every learner and admin call */
    const char *join0 = "{\"learner\": 0, \"incarnation\": 0}";
    cr_assert_eq(post_json(&r, "/v1/join", NULL, join0, reason, sizeof reason), 401);
    cr_assert_str_eq(reason, "auth");
    cr_assert_eq(
        post_json(&r, "/v1/heartbeat", NULL,
                  "{\"learner\": 0, \"incarnation\": 1, \"step\": 1, \"train_loss\": 1.0, \"tokens\": 1,"
                  " \"step_ms\": 1.0, \"t_real_ms\": 1}",
                  NULL, 0),
        401);
    cr_assert_eq(post_json(&r, "/v1/leave", NULL, "{\"learner\": 0, \"incarnation\": 1}", NULL, 0), 401);
    cr_assert_eq(post_json(&r, "/v1/end", NULL, "{\"reason\": \"forged\"}", NULL, 0), 401);
    float d[8] = {1e30f, 1e30f, 1e30f, 1e30f, 1e30f, 1e30f, 1e30f, 1e30f};
    char crc[64];
    snprintf(crc, sizeof crc, "%s: %08x", PROTO_H_CRC32C, (unsigned)cx_crc32c(0, d, sizeof d));
    const char *th[] = {PROTO_H_LEARNER ": 0",
                        PROTO_H_INCARNATION ": 1",
                        PROTO_H_FRAGMENT ": 0",
                        PROTO_H_BASE_VERSION ": 0",
                        PROTO_H_TOKENS ": 16",
                        PROTO_H_STEPS ": 1",
                        PROTO_H_ENCODING ": f32",
                        crc,
                        NULL,
                        NULL};
    cr_assert_eq(call(&r, "POST", "/v1/fragments/0/contributions", th, "application/octet-stream", d,
                      sizeof d, NULL, 0),
                 401);
    cr_assert_eq(call(&r, "GET", "/v1/fragments/0", NULL, NULL, NULL, 0, NULL, 0), 401,
                 "the model is the learners'");
    /* a wrong credential is refused even on a read */
    char forged[160];
    snprintf(forged, sizeof forged, "Authorization: Bearer admin.%064d", 7);
    const char *fh[] = {forged, NULL};
    cr_assert_eq(call(&r, "GET", "/v1/status", fh, NULL, NULL, 0, NULL, 0), 401);

    /* learner 1's credential posing as learner 0: 403, in the body and in the headers */
    const char *a1 = tr_auth(&r, "learner-1");
    cr_assert_eq(post_json(&r, "/v1/join", a1, join0, reason, sizeof reason), 403);
    cr_assert_str_eq(reason, "auth");
    th[8] = a1;
    cr_assert_eq(call(&r, "POST", "/v1/fragments/0/contributions", th, "application/octet-stream", d,
                      sizeof d, reason, sizeof reason),
                 403);
    cr_assert_str_eq(reason, "auth");
    /* a learner or read credential is not the admin's; admin is not a learner */
    cr_assert_eq(post_json(&r, "/v1/end", a1, "{}", NULL, 0), 403);
    cr_assert_eq(post_json(&r, "/v1/end", tr_auth(&r, "read"), "{}", NULL, 0), 403);
    cr_assert_eq(post_json(&r, "/v1/join", tr_auth(&r, "admin"), join0, NULL, 0), 403);

    /* a cross-origin form post can only be text/plain (or a form type): 415 */
    const char *a0 = tr_auth(&r, "learner-0");
    const char *h0[] = {a0, NULL};
    cr_assert_eq(call(&r, "POST", "/v1/join", h0, "text/plain", join0, strlen(join0), NULL, 0), 415);
    cr_assert_eq(call(&r, "POST", "/v1/end", NULL, "text/plain", "{}", 2, NULL, 0), 415);

    /* nothing changed: no seat taken, no merge, no end, versions as before */
    json_t *s1 = tr_get(&r, "/v1/status");
    cr_assert_eq(json_array_size(json_object_get(s1, "learners")), 0, "no seat taken");
    cr_assert_eq(tr_int(s1, "merges"), 0);
    cr_assert_eq(tr_int(json_array_get(json_object_get(s1, "fragments"), 0), "version"), v0);
    cr_assert(json_is_null(json_object_get(s1, "end")), "the run was not ended");
    cr_assert_eq(tr_int(json_object_get(s1, "contributions"), "accepted"), 0);
    json_decref(s1);
    json_int_t n = auth_rejects(&r);
    cr_assert_geq(n, 12, "every refusal is counted as reason auth (%lld)", (long long)n);

    /* reads: loopback without a credential, but not with a foreign Host */
    const char *evil[] = {"Host: attacker.example:80", NULL};
    cr_assert_eq(call(&r, "GET", "/v1/status", evil, NULL, NULL, 0, NULL, 0), 401, "DNS rebinding");
    cr_assert_eq(call(&r, "GET", "/metrics", evil, NULL, NULL, 0, NULL, 0), 401);
    cr_assert_eq(call(&r, "GET", "/v1/events", NULL, NULL, NULL, 0, NULL, 0), 200);
    const char *rh[] = {tr_auth(&r, "read"), "Host: attacker.example:80", NULL};
    cr_assert_eq(call(&r, "GET", "/v1/status", rh, NULL, NULL, 0, NULL, 0), 200,
                 "a read credential works anywhere");

    /* the real thing still works: learner 0 joins with its credential, admin ends */
    cr_assert_eq(post_json(&r, "/v1/join", a0, join0, NULL, 0), 200);
    cr_assert_eq(post_json(&r, "/v1/end", tr_auth(&r, "admin"), "{\"reason\": \"done\"}", NULL, 0), 200);
    /* the refusals are aggregated into reject events of reason auth */
    cx_sleep_ms(1200);
    json_t *evs = tr_events(&r, 0);
    size_t i;
    json_t *e;
    json_int_t counted = 0;
    json_array_foreach(evs, i, e) if (strcmp(tr_type(e), "reject") == 0 &&
                                      strcmp(json_string_value(json_object_get(e, "reason")), "auth") == 0)
        counted += tr_int(e, "count");
    json_decref(evs);
    cr_assert_gt(counted, 0, "reject events of reason auth");
    cr_assert_lt(counted, auth_rejects(&r) + 1);

    /* a restart keeps the credentials */
    char keep[128];
    snprintf(keep, sizeof keep, "%s", tr_cred(&r, "learner-0"));
    it_signal(r.syncer, SIGTERM, 0);
    cr_assert_neq(it_wait_exit(r.syncer, 20000), -1);
    tr_syncer_start(&r, "auth", NULL);
    cr_assert_str_eq(tr_cred(&r, "learner-0"), keep);
    cr_assert_eq(post_json(&r, "/v1/join", tr_auth(&r, "learner-0"), join0, NULL, 0), 200);
    tr_done(&r);
}

Test(syncer_auth, a_real_learner_trains_with_its_credential)
{
    tr_run r = {0};
    const char *args[] = {"--mode",  "diloco", "--learners", "1", "--fragments", "2",
                          "--steps", "48",     "--H",        "8", TR_MODEL,      NULL};
    tr_syncer_start(&r, "auth-learner", args);
    pid_t l = tr_learner_start(&r, 0, NULL, NULL);
    tr_expect_exit0(&r, l, 0, 60000);
    cr_assert_gt(tr_merges(&r), 0, "its contributions were merged");
    cr_assert_eq(auth_rejects(&r), 0, "no refusal on the way");
    tr_done(&r);
}

/* Exit status of a process expected to refuse to start; asserts its log
 * names what. */
static void expect_refused(const char *dir, const char *name, pid_t pid, const char *what)
{
    int st = it_wait_exit(pid, 20000);
    cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0, "%s refuses to start (status %d)", name, st);
    char path[700];
    snprintf(path, sizeof path, "%s/%s.log", dir, name);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cr_assert(strstr(buf, what), "%s says '%s': %s", name, what, buf);
}

Test(syncer_auth, wide_credential_files_and_insecure_off_loopback_are_refused)
{
    tr_run r = {0};
    const char *args[] = {"--mode", "diloco", "--learners", "1", "--fragments", "2", TR_MODEL, NULL};
    tr_syncer_start(&r, "auth-files", args);
    /* the learner refuses a 0644 credential file */
    chmod(tr_cred_path(&r, "learner-0"), 0644);
    pid_t l = tr_learner_start(&r, 0, NULL, NULL);
    expect_refused(r.dir, "learner0", l, "group or others");
    /* and the syncer refuses a credentials dir with one */
    it_signal(r.syncer, SIGTERM, 0);
    cr_assert_neq(it_wait_exit(r.syncer, 20000), -1);
    char cdir[700], s2[700];
    snprintf(cdir, sizeof cdir, "%s/credentials", r.state);
    snprintf(s2, sizeof s2, "%s/s2", r.dir);
    const char *sa[] = {"syncer", "--listen", "127.0.0.1:0", "--state-dir", s2, "--credentials-dir",
                        cdir,     IT_MLP,     NULL};
    expect_refused(r.dir, "syncer-wide", it_start(r.dir, "syncer-wide", sa, NULL), "learner-0.cred");
    chmod(tr_cred_path(&r, "learner-0"), 0600);
    /* --insecure-no-auth off loopback */
    const char *si[] = {"syncer", "--listen",           "0.0.0.0:0", "--state-dir",
                        s2,       "--insecure-no-auth", IT_MLP,      NULL};
    expect_refused(r.dir, "syncer-insecure", it_start(r.dir, "syncer-insecure", si, NULL),
                   "--insecure-no-auth");
    /* on loopback it starts and takes an unauthenticated join */
    tr_run q = {0};
    const char *qa[] = {"--insecure-no-auth", "--learners", "1", TR_MODEL, NULL};
    tr_syncer_start(&q, "auth-insecure", qa);
    cr_assert_eq(post_json(&q, "/v1/join", NULL, "{\"learner\": 0, \"incarnation\": 0}", NULL, 0), 200);
    cr_assert_eq(call(&q, "POST", "/v1/end", NULL, "text/plain", "{}", 2, NULL, 0), 415,
                 "the Content-Type check stays on");
    free(q.dir);
    tr_done(&r);
}
