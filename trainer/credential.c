/* credential.c - see credential.h. */
#include "trainer/credential.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/file.h"
#include "common/secret.h"
#include "trainer/protocol.h"

/* ---- credential: format ---- */

static int principal_check(const char *p, size_t n, cred_kind *kind, int64_t *learner)
{
    *learner = -1;
    if (n == 5 && memcmp(p, "admin", 5) == 0) {
        *kind = CRED_ADMIN;
        return 0;
    }
    if (n == 4 && memcmp(p, "read", 4) == 0) {
        *kind = CRED_READ;
        return 0;
    }
    if (n > 8 && n < 16 && memcmp(p, "learner-", 8) == 0) {
        int64_t v = 0;
        for (size_t i = 8; i < n; i++) {
            if (p[i] < '0' || p[i] > '9' || (i == 8 && p[i] == '0' && n > 9))
                return CX_EINVAL;
            v = v * 10 + (p[i] - '0');
        }
        if (v > PROTO_MAX_LEARNER_ID)
            return CX_EINVAL;
        *kind = CRED_LEARNER;
        *learner = v;
        return 0;
    }
    return CX_EINVAL;
}

int cred_parse(const char *cred, cred_kind *kind, int64_t *learner, char *err, size_t errlen)
{
    cred_kind k;
    int64_t id;
    const char *dot = strchr(cred, '.');
    if (!dot)
        return cx_fail(err, errlen, CX_EINVAL, "credential: expected <principal>.<64 hex digits>, no '.'");
    if (principal_check(cred, (size_t)(dot - cred), &k, &id) != 0)
        return cx_fail(err, errlen, CX_EINVAL,
                       "credential: the principal must be learner-<id>, admin or read");
    const char *h = dot + 1;
    size_t n = strlen(h);
    if (n != CRED_HEX)
        return cx_fail(err, errlen, CX_EINVAL, "credential: %zu hex digits after the principal, expected %d",
                       n, CRED_HEX);
    for (size_t i = 0; i < n; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
            return cx_fail(err, errlen, CX_EINVAL, "credential: the secret must be lowercase hex digits");
    if (kind)
        *kind = k;
    if (learner)
        *learner = id;
    return 0;
}

int cred_generate(const char *principal, char out[CRED_MAX], char *err, size_t errlen)
{
    cred_kind k;
    int64_t id;
    if (strlen(principal) >= CRED_PRINCIPAL || principal_check(principal, strlen(principal), &k, &id) != 0)
        return cx_fail(err, errlen, CX_EINVAL, "credential: bad principal '%s'", principal);
    unsigned char raw[CRED_HEX / 2];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t r = getrandom(raw + got, sizeof raw - got, 0);
        if (r < 0) {
            int e = errno;
            if (e == EINTR)
                continue;
            return cx_fail(err, errlen, CX_ESYS, "getrandom: %s", strerror(e));
        }
        got += (size_t)r;
    }
    static const char hex[] = "0123456789abcdef";
    size_t n = strlen(principal);
    memcpy(out, principal, n);
    out[n++] = '.';
    for (size_t i = 0; i < sizeof raw; i++) {
        out[n++] = hex[raw[i] >> 4];
        out[n++] = hex[raw[i] & 15];
    }
    out[n] = '\0';
    memset(raw, 0, sizeof raw);
    return 0;
}

/* ---- credential: files ---- */

int cred_write_file(const char *path, const char *cred, char *err, size_t errlen)
{
    char line[CRED_MAX + 2];
    int n = snprintf(line, sizeof line, "%s\n", cred);
    if (n < 0 || (size_t)n >= sizeof line)
        return cx_fail(err, errlen, CX_EINVAL, "credential file %s: credential too long", path);
    int rc = cx_file_write_new("credential file", path, line, (size_t)n, 0600, err, errlen);
    memset(line, 0, sizeof line);
    return rc;
}

int cred_read_file(const char *path, char out[CRED_MAX], char *err, size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    /* CRED_MAX + 1: room for the credential, its newline (or CRLF) */
    int rc = cx_secret_read(path, "credential file", CRED_MAX + 1, &buf, &len, err, errlen);
    if (rc != 0)
        return rc;
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        buf[--len] = '\0';
    char why[CX_ERRLEN];
    if (len >= CRED_MAX || strlen(buf) != len || cred_parse(buf, NULL, NULL, why, sizeof why) != 0)
        rc = cx_fail(err, errlen, CX_EINVAL, "credential file %s: %s", path,
                     len >= CRED_MAX      ? "longer than a credential"
                     : strlen(buf) != len ? "holds a NUL byte"
                                          : why);
    else
        memcpy(out, buf, len + 1);
    memset(buf, 0, len);
    free(buf);
    return rc;
}

int cred_equal(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    unsigned char d = na != nb;
    for (size_t i = 0; i < nb; i++)
        d |= (unsigned char)(b[i] ^ (i < na ? a[i] : 0));
    return d == 0;
}

static int dir_check(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return cx_fail(err, errlen, CX_EINVAL, "credentials dir %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return cx_fail(err, errlen, CX_EINVAL, "credentials dir %s: not a directory", dir);
    if (st.st_mode & 077)
        return cx_fail(
            err, errlen, CX_EINVAL,
            "credentials dir %s: mode %04o lets group or others in; it must be 0700 (chmod 700 %s)", dir,
            (unsigned)(st.st_mode & 07777), dir);
    return 0;
}

static int ensure_one(const char *dir, const char *principal, char *err, size_t errlen)
{
    char path[4096], cred[CRED_MAX];
    snprintf(path, sizeof path, "%s/%s.cred", dir, principal);
    if (access(path, F_OK) == 0)
        return 0;
    int rc = cred_generate(principal, cred, err, errlen);
    if (rc == 0)
        rc = cred_write_file(path, cred, err, errlen);
    memset(cred, 0, sizeof cred);
    return rc;
}

int cred_dir_create(const char *dir, int64_t learners, char *err, size_t errlen)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return cx_fail(err, errlen, CX_EIO, "credentials dir %s: mkdir: %s", dir, strerror(errno));
    int rc = dir_check(dir, err, errlen);
    if (rc == 0)
        rc = ensure_one(dir, "admin", err, errlen);
    if (rc == 0)
        rc = ensure_one(dir, "read", err, errlen);
    for (int64_t i = 0; rc == 0 && i < learners; i++) {
        char p[CRED_PRINCIPAL];
        snprintf(p, sizeof p, "learner-%" PRId64, i);
        rc = ensure_one(dir, p, err, errlen);
    }
    return rc;
}

/* ---- credential: the syncer's store ---- */

typedef struct cred_entry {
    cred_kind kind;  /* whose */
    int64_t learner; /* learner id, -1 unless CRED_LEARNER */
    char cred[CRED_MAX];
} cred_entry;

struct cred_store {
    cred_entry *e; /* [n] */
    int n;
    int learners; /* entries of kind CRED_LEARNER */
};

void cred_store_free(cred_store *s)
{
    if (!s)
        return;
    if (s->e)
        memset(s->e, 0, (size_t)s->n * sizeof *s->e);
    free(s->e);
    free(s);
}

cred_store *cred_store_load(const char *dir, char *err, size_t errlen)
{
    if (dir_check(dir, err, errlen) != 0)
        return NULL;
    DIR *d = opendir(dir);
    if (!d) {
        cx_fail(err, errlen, CX_EIO, "credentials dir %s: %s", dir, strerror(errno));
        return NULL;
    }
    cred_store *s = calloc(1, sizeof *s);
    int cap = 0, admin = 0;
    struct dirent *de;
    while (s && (de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        cred_kind k;
        int64_t id;
        if (n <= 5 || strcmp(de->d_name + n - 5, ".cred") != 0)
            continue;
        if (principal_check(de->d_name, n - 5, &k, &id) != 0) {
            cx_fail(err, errlen, CX_EINVAL,
                    "credentials dir %s: %s is not learner-<id>.cred, admin.cred or read.cred", dir,
                    de->d_name);
            goto fail;
        }
        if (s->n == cap) {
            cap = cap ? cap * 2 : 16;
            cred_entry *ne = realloc(s->e, (size_t)cap * sizeof *ne);
            if (!ne) {
                cx_fail(err, errlen, CX_ENOMEM, "out of memory");
                goto fail;
            }
            s->e = ne;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        cred_entry *e = &s->e[s->n];
        if (cred_read_file(path, e->cred, err, errlen) != 0)
            goto fail;
        cred_kind fk;
        int64_t fid;
        cred_parse(e->cred, &fk, &fid, NULL, 0);
        if (fk != k || fid != id) {
            cx_fail(err, errlen, CX_EINVAL, "credential file %s: holds the credential of another principal",
                    path);
            goto fail;
        }
        e->kind = k;
        e->learner = id;
        s->n++;
        s->learners += k == CRED_LEARNER;
        admin |= k == CRED_ADMIN;
    }
    if (!s) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        closedir(d);
        return NULL;
    }
    closedir(d);
    if (!admin) {
        cx_fail(err, errlen, CX_EINVAL, "credentials dir %s: no admin.cred", dir);
        cred_store_free(s);
        return NULL;
    }
    return s;
fail:
    closedir(d);
    cred_store_free(s);
    return NULL;
}

int cred_store_learners(const cred_store *s)
{
    return s ? s->learners : 0;
}

const char *cred_store_admin(const cred_store *s)
{
    for (int i = 0; s && i < s->n; i++)
        if (s->e[i].kind == CRED_ADMIN)
            return s->e[i].cred;
    return NULL;
}

int cred_store_check(const cred_store *s, const char *presented, cred_kind *kind, int64_t *learner, char *err,
                     size_t errlen)
{
    cred_kind k;
    int64_t id;
    char why[CX_ERRLEN];
    if (cred_parse(presented, &k, &id, why, sizeof why) != 0)
        return cx_fail(err, errlen, CX_EAUTH, "%s", why);
    /* the principal is public (it names whose secret this claims to be);
     * only the secret is compared, in constant time */
    for (int i = 0; i < s->n; i++) {
        const cred_entry *e = &s->e[i];
        if (e->kind != k || e->learner != id)
            continue;
        if (!cred_equal(presented, e->cred))
            break;
        if (kind)
            *kind = k;
        if (learner)
            *learner = id;
        return 0;
    }
    const char *dot = strchr(presented, '.');
    return cx_fail(err, errlen, CX_EAUTH, "credential of %.*s is not one this syncer knows",
                   (int)(dot - presented), presented);
}
