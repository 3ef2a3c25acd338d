/* test_syncer_tls.c - the syncer over HTTPS (--tls-cert/--tls-key,
 * libmicrohttpd with GnuTLS) and a learner that verifies it (--ca-file,
 * libcurl CURLOPT_CAINFO), on 127.0.0.1 with a CA made at test time by
 * openssl. Skipped, saying why, when libmicrohttpd lacks TLS or openssl is
 * not installed. A --tls-key file that group or others may access is
 * refused at start, naming the file (no TLS needed for that). */
#include <sys/stat.h>

#include "common/file.h"
#include "tls_it.h"
#include "trainer_it.h"

static void fini(void)
{
    it_cleanup();
}

TestSuite(syncer_tls, .fini = fini, .timeout = 120);

/* Write text into dir/name; its path into out. */
static void write_in(const char *dir, const char *name, const char *text, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", dir, name);
    cr_assert_eq(cx_file_write_atomic(out, text, strlen(text), NULL, 0), 0, "write %s", out);
}

Test(syncer_tls, a_learner_joins_and_trains_over_https)
{
    tls_skip_unless_possible();
    char *dir = it_mkdtemp("tls");
    tls_make_ca_and_cert(dir, "127.0.0.1", "IP:127.0.0.1");
    char ca[600], key[600], cert[600];
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(key, sizeof key, "%s/srv.key", dir);
    snprintf(cert, sizeof cert, "%s/srv.pem", dir);

    tr_run r = {0};
    const char *args[] = {"--tls-cert",  cert, "--tls-key", key,  "--mode", "diloco", "--learners", "1",
                          "--fragments", "2",  "--steps",   "48", "--H",    "8",      TR_MODEL,     NULL};
    tr_syncer_start(&r, "tls-syncer", args);
    snprintf(r.url, sizeof r.url, "https://%s", r.addr);

    /* the certificate verifies against the test CA only */
    cx_http_result res;
    char err[256];
    cx_http_result_init(&res);
    cx_http_opts with_ca = {.ca_file = ca};
    cx_http_client *c = cx_http_client_new(r.url, &with_ca);
    cr_assert_eq(cx_http_do(c, "GET", "/v1/status", NULL, NULL, 0, NULL, 10000, &res, err, sizeof err), 0,
                 "%s", err);
    cr_assert_eq(res.status, 200);
    cx_http_client_free(c);
    c = cx_http_client_new(r.url, NULL);
    cr_assert_neq(cx_http_do(c, "GET", "/v1/status", NULL, NULL, 0, NULL, 10000, &res, err, sizeof err), 0,
                  "an unknown CA is refused");
    cx_http_client_free(c);
    char plain[96];
    snprintf(plain, sizeof plain, "http://%s", r.addr);
    c = cx_http_client_new(plain, NULL);
    int rc = cx_http_do(c, "GET", "/v1/status", NULL, NULL, 0, NULL, 5000, &res, err, sizeof err);
    cr_assert(rc != 0 || res.status != 200, "no plain HTTP on the TLS port");
    cx_http_client_free(c);
    cx_http_result_cleanup(&res);

    /* a learner joins, trains and leaves over https */
    const char *extra[] = {"--ca-file", ca, NULL};
    pid_t l = tr_learner_start(&r, 0, extra, NULL);
    tr_expect_exit0(&r, l, 0, 90000);
    c = cx_http_client_new(r.url, &with_ca);
    cx_http_result_init(&res);
    cr_assert_eq(cx_http_do(c, "GET", "/v1/status", NULL, NULL, 0, NULL, 10000, &res, err, sizeof err), 0,
                 "%s", err);
    json_t *st = json_loadb(res.body.data, res.body.len, 0, NULL);
    cr_assert_gt(tr_int(st, "merges"), 0, "its contributions were merged over https");
    json_decref(st);
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    free(dir);
    tr_done(&r);
}

/* Start a syncer with --tls-cert cert --tls-key key; its exit status (-1:
 * still running after 20 s) and its log (malloc'd) in *log. */
static int tls_syncer_exit(const char *dir, const char *name, const char *cert, const char *key, char **log)
{
    char state[700], path[700];
    snprintf(state, sizeof state, "%s/%s-state", dir, name);
    const char *args[] = {"syncer",     "--listen", "127.0.0.1:0", "--state-dir", state, IT_MLP,
                          "--tls-cert", cert,       "--tls-key",   key,           NULL};
    pid_t pid = it_start(dir, name, args, NULL);
    int st = it_wait_exit(pid, 20000);
    snprintf(path, sizeof path, "%s/%s.log", dir, name);
    size_t len = 0;
    *log = NULL;
    cr_assert_eq(cx_file_read(path, 1 << 20, log, &len, NULL, 0), 0, "read %s", path);
    return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

Test(syncer_tls, a_key_file_others_can_read_is_refused)
{
    char *dir = it_mkdtemp("tls-mode");
    char cert[600], key[600], link[600], want[800];
    static const char pem[] = "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n";
    write_in(dir, "srv.pem", pem, cert, sizeof cert);
    write_in(dir, "srv.key", pem, key, sizeof key);
    snprintf(link, sizeof link, "%s/link.key", dir);
    static const mode_t bad[] = {0644, 0640, 0604, 0660};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[32], *log = NULL;
        cr_assert_eq(chmod(key, bad[i]), 0);
        snprintf(name, sizeof name, "syncer-%04o", (unsigned)bad[i]);
        int rc = tls_syncer_exit(dir, name, cert, key, &log);
        cr_assert_eq(rc, 1, "mode %04o: the syncer exits 1 (got %d)", (unsigned)bad[i], rc);
        snprintf(want, sizeof want, "--tls-key file %s: mode %04o lets group or others", key,
                 (unsigned)bad[i]);
        cr_assert(strstr(log, want), "mode %04o: the error names the file and its mode: %s", (unsigned)bad[i],
                  log);
        free(log);
    }
    /* a symlink (a Kubernetes Secret volume's NAME -> ..data/NAME) is
     * followed and its target checked (common/secret.h): a wide target is
     * refused, naming the link, the target and its mode */
    cr_assert_eq(chmod(key, 0644), 0);
    cr_assert_eq(symlink(key, link), 0);
    char *log = NULL;
    cr_assert_eq(tls_syncer_exit(dir, "syncer-link", cert, link, &log), 1);
    snprintf(want, sizeof want, "--tls-key file %s (-> %s): mode 0644", link, key);
    cr_assert(strstr(log, want), "a symlinked wide key is refused, naming both: %s", log);
    free(log);
    /* 0600 and 0400 pass the mode check (this key is no PEM key: whatever
     * fails next, it is not the mode) */
    static const mode_t good[] = {0600, 0400};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char name[32];
        cr_assert_eq(chmod(key, good[i]), 0);
        snprintf(name, sizeof name, "syncer-%04o", (unsigned)good[i]);
        int rc = tls_syncer_exit(dir, name, cert, key, &log);
        cr_assert(!strstr(log, "lets group or others"), "mode %04o is accepted: %s", (unsigned)good[i], log);
        cr_assert_neq(rc, 0, "a key that is no key still fails the start");
        free(log);
    }
    it_cleanup();
    free(dir);
}
