/* credential.h - the bearer credentials of a training run: who may call the
 * syncer.
 *
 * What it is: credentials of the form "<principal>.<64 lowercase hex>" with
 * the principals "learner-<i>" (one per learner id), "admin" (the harness
 * or an operator: end of run, control) and "read" (read-only: dashboards,
 * scrapers). The 64 hex digits are 32 bytes from getrandom(2). A credential
 * lives in a file "<principal>.cred" (the credential, one newline) that is
 * created 0600 with O_CREAT|O_EXCL, never written wider and chmod'ed later;
 * a credential file is read under common/secret.h's rule (a regular file
 * of this uid or root that group and others may not read or write, checked
 * with fstat on the opened descriptor; symlinks, as a Kubernetes Secret
 * volume makes them, are followed). Comparison is constant time.
 * A credentials directory (0700) holds the files of one run: the syncer
 * loads it (cred_store_load), the harness creates it (cred_dir_create).
 * The same rule guards the syncer's TLS private key (--tls-key) and the
 * agents' token: cx_secret_read. What it is not: TLS itself, or an access policy
 * (the syncer's access table decides who may call which route;
 * docs/security.md).
 */
#ifndef TRN_CREDENTIAL_H
#define TRN_CREDENTIAL_H

#include <stddef.h>
#include <stdint.h>

#define CRED_HEX 64       /* hex digits of the secret part */
#define CRED_MAX 96       /* bytes of a credential, NUL included */
#define CRED_PRINCIPAL 32 /* bytes of a principal name, NUL included */

typedef enum cred_kind {
    CRED_LEARNER = 0, /* "learner-<i>" */
    CRED_ADMIN,       /* "admin" */
    CRED_READ,        /* "read" */
} cred_kind;

/* Split and check a credential: principal, kind, learner id (-1 unless
 * CRED_LEARNER). CX_EINVAL with what is wrong in err. */
int cred_parse(const char *cred, cred_kind *kind, int64_t *learner, char *err, size_t errlen);

/* A new random credential for principal into out[CRED_MAX]. CX_ESYS when
 * getrandom fails, CX_EINVAL for a bad principal. */
int cred_generate(const char *principal, char out[CRED_MAX], char *err, size_t errlen);

/* Create path with the credential (mode 0600, O_CREAT|O_EXCL: an existing
 * file is CX_ECONFLICT, never overwritten), fsync'ed. */
int cred_write_file(const char *path, const char *cred, char *err, size_t errlen);

/* Read and check a credential file into out[CRED_MAX]: opened and checked
 * by cx_secret_open (common/secret.h: symlinks followed, a regular file of
 * this uid or root, mode 0600/0400), refused with CX_EINVAL and a message
 * naming the file; CX_EINVAL for a malformed credential. */
int cred_read_file(const char *path, char out[CRED_MAX], char *err, size_t errlen);

/* Constant-time equality of two NUL-terminated strings (the time depends on
 * the length of b only, the stored one). 1 equal, 0 not. */
int cred_equal(const char *a, const char *b);

/* Make dir (0700; an existing dir must not be group/other accessible) and
 * every credential file missing in it: admin.cred, read.cred and
 * learner-<i>.cred for i in [0, learners). Existing files are kept (a
 * restart keeps its credentials). */
int cred_dir_create(const char *dir, int64_t learners, char *err, size_t errlen);

/* The credentials a syncer accepts, loaded from a directory. */
typedef struct cred_store cred_store;

/* Load every "learner-<i>.cred", "admin.cred" and "read.cred" in dir (each
 * checked as cred_read_file does; a bad file fails the load). NULL with
 * err on failure; a directory without admin.cred is an error. */
cred_store *cred_store_load(const char *dir, char *err, size_t errlen);
void cred_store_free(cred_store *s);
/* Number of learner credentials loaded. */
int cred_store_learners(const cred_store *s);
/* The admin credential loaded (the syncer derives its seal key from it:
 * trainer/seal.h), or NULL when there is none. */
const char *cred_store_admin(const cred_store *s);

/* Check a presented credential: 0 when it is one of the store's, with its
 * kind and learner id (-1 unless a learner); CX_EAUTH otherwise, why in
 * err (never echoing the secret). */
int cred_store_check(const cred_store *s, const char *presented, cred_kind *kind, int64_t *learner, char *err,
                     size_t errlen);

#endif
