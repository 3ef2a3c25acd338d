/* tls_it.h - what the HTTPS tests share: the skip when this machine cannot
 * run them, and a test CA with a server certificate made by openssl at
 * test time (dir/ca.pem; dir/srv.pem with its key dir/srv.key, 0600). */
#ifndef TLS_IT_H
#define TLS_IT_H

#include <criterion/criterion.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/file.h"
#include "support.h"

/* Skip the test, saying why, when libmicrohttpd lacks TLS or openssl is missing. */
static inline void tls_skip_unless_possible(void)
{
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        cr_skip_test("libmicrohttpd was built without TLS");
    if (access("/usr/bin/openssl", X_OK) != 0)
        cr_skip_test("openssl is not installed (scripts/install-deps --test)");
}

/* Run openssl with argv in dir; 0 when it exited 0 (else its log is shown). */
static inline int tls_openssl(const char *dir, const char *name, const char *const *argv)
{
    pid_t p = it_start_prog(dir, name, argv, NULL);
    int st = it_wait_exit(p, 30000);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        it_dump_log(dir, name);
        return -1;
    }
    return 0;
}

/* A CA (dir/ca.pem) and a server certificate signed by it (dir/srv.pem,
 * key dir/srv.key, mode 0600) for subject CN cn with subjectAltName san
 * ("IP:127.0.0.1", "DNS:localhost,IP:127.0.0.1"). P-256 keys, 1 day. */
static inline void tls_make_ca_and_cert(const char *dir, const char *cn, const char *san)
{
    char ca_key[600], ca[600], key[600], csr[600], cert[600], ext[600], subj[200], text[300];
    snprintf(ca_key, sizeof ca_key, "%s/ca.key", dir);
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(key, sizeof key, "%s/srv.key", dir);
    snprintf(csr, sizeof csr, "%s/srv.csr", dir);
    snprintf(cert, sizeof cert, "%s/srv.pem", dir);
    snprintf(ext, sizeof ext, "%s/ext.cnf", dir);
    snprintf(subj, sizeof subj, "/CN=%s", cn);
    snprintf(text, sizeof text, "subjectAltName=%s\nbasicConstraints=CA:FALSE\n", san);
    cr_assert_eq(cx_file_write_atomic(ext, text, strlen(text), NULL, 0), 0, "write %s", ext);
    const char *a1[] = {"openssl", "req",     "-x509", "-newkey", "ec",    "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes",  "-keyout", ca_key,  "-out",    ca,      "-days",    "1",
                        "-subj",   "/CN=chaosloco test CA",      NULL};
    const char *a2[] = {"openssl", "req", "-newkey", "ec",  "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key,   "-out",    csr,   "-subj",    subj,                      NULL};
    const char *a3[] = {"openssl",         "x509", "-req", "-in",   csr, "-CA",      ca,  "-CAkey", ca_key,
                        "-CAcreateserial", "-out", cert,   "-days", "1", "-extfile", ext, NULL};
    cr_assert_eq(tls_openssl(dir, "openssl-ca", a1), 0, "make the CA");
    cr_assert_eq(tls_openssl(dir, "openssl-csr", a2), 0, "make the server key");
    cr_assert_eq(tls_openssl(dir, "openssl-sign", a3), 0, "sign the server certificate");
    cr_assert_eq(chmod(key, 0600), 0, "the key is the owner's only (else it is refused)");
}

#endif
