/* test_syncer_tls.c - the syncer over HTTPS (--tls-cert/--tls-key,
 * libmicrohttpd with GnuTLS) and a learner that verifies it (--ca-file,
 * libcurl CURLOPT_CAINFO), on 127.0.0.1 with a CA made at test time by
 * openssl. Skipped, saying why, when libmicrohttpd lacks TLS or openssl is
 * not installed. */
#include <microhttpd.h>

#include "trainer_it.h"

static void fini(void)
{
    it_cleanup();
}

TestSuite(syncer_tls, .fini = fini, .timeout = 120);

/* Run openssl with args in dir; 0 when it exited 0. */
static int openssl(const char *dir, const char *name, const char *const *args)
{
    pid_t p = it_start_prog(dir, name, args, NULL);
    int st = it_wait_exit(p, 30000);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        it_dump_log(dir, name);
        return -1;
    }
    return 0;
}

Test(syncer_tls, a_learner_joins_and_trains_over_https)
{
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        cr_skip_test("libmicrohttpd was built without TLS");
    if (access("/usr/bin/openssl", X_OK) != 0)
        cr_skip_test("openssl is not installed (scripts/install-deps --test)");
    char *dir = it_mkdtemp("tls");
    char ca_key[600], ca[600], key[600], csr[600], cert[600], ext[600];
    snprintf(ca_key, sizeof ca_key, "%s/ca.key", dir);
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(key, sizeof key, "%s/srv.key", dir);
    snprintf(csr, sizeof csr, "%s/srv.csr", dir);
    snprintf(cert, sizeof cert, "%s/srv.pem", dir);
    snprintf(ext, sizeof ext, "%s/ext.cnf", dir);
    FILE *f = fopen(ext, "w");
    cr_assert(f);
    fputs("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n", f);
    fclose(f);
    const char *a1[] = {"openssl",
                        "req",
                        "-x509",
                        "-newkey",
                        "ec",
                        "-pkeyopt",
                        "ec_paramgen_curve:P-256",
                        "-nodes",
                        "-keyout",
                        ca_key,
                        "-out",
                        ca,
                        "-days",
                        "1",
                        "-subj",
                        "/CN=chaosloco test CA",
                        NULL};
    const char *a2[] = {"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key,   "-out",    csr,  "-subj",    "/CN=127.0.0.1",           NULL};
    const char *a3[] = {"openssl",         "x509", "-req", "-in",   csr, "-CA",      ca,  "-CAkey", ca_key,
                        "-CAcreateserial", "-out", cert,   "-days", "1", "-extfile", ext, NULL};
    cr_assert_eq(openssl(dir, "openssl-ca", a1), 0, "make the CA");
    cr_assert_eq(openssl(dir, "openssl-csr", a2), 0, "make the server key");
    cr_assert_eq(openssl(dir, "openssl-sign", a3), 0, "sign the server certificate");

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
