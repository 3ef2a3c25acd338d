/* file.c - atomic writes, checksummed blobs, mkdir -p. */
#include "common/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/err.h"
#include "common/log.h"

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static int fsync_dir_of(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    int dfd = open(dirname(tmp), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    int rc = fsync(dfd);
    close(dfd);
    return rc;
}

int cx_file_write_new(const char *what, const char *path, const void *data, size_t len, unsigned mode, char *err,
                      size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, (mode_t)mode);
    if (fd < 0) {
        int e = errno;
        return cx_fail(err, errlen, e == EEXIST ? CX_ECONFLICT : CX_EIO, "%s %s: %s", what, path, strerror(e));
    }
    int rc = 0;
    if (write_all(fd, data, len) != 0)
        rc = cx_fail(err, errlen, CX_EIO, "%s %s: write: %s", what, path, strerror(errno));
    else if (fsync(fd) != 0)
        rc = cx_fail(err, errlen, CX_EIO, "%s %s: fsync: %s", what, path, strerror(errno));
    close(fd);
    if (rc != 0)
        unlink(path);
    return rc;
}

int cx_file_write_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
    return cx_file_write_atomic_mode(path, data, len, 0644, err, errlen);
}

int cx_file_write_atomic_mode(const char *path, const void *data, size_t len, unsigned mode, char *err,
                              size_t errlen)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof tmp)
        return cx_fail(err, errlen, CX_EINVAL, "%s: path too long", path);
    /* A fresh file (a stale temp file would keep its old mode). */
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        return cx_fail(err, errlen, CX_EIO, "%s: open: %s", tmp, strerror(errno));
    if (write_all(fd, data, len) != 0 || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return cx_fail(err, errlen, CX_EIO, "%s: write: %s", tmp, strerror(e));
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return cx_fail(err, errlen, CX_EIO, "%s: close: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return cx_fail(err, errlen, CX_EIO, "%s: rename: %s", path, strerror(e));
    }
    if (fsync_dir_of(path) != 0)
        return cx_fail(err, errlen, CX_EIO, "%s: fsync dir: %s", path, strerror(errno));
    return 0;
}

/* PID of a "<base>.tmp.<PID>" entry name, or 0 when it is not one. */
static pid_t tmp_owner(const char *entry, const char *base)
{
    size_t bl = strlen(base);
    if (strncmp(entry, base, bl) != 0 || strncmp(entry + bl, ".tmp.", 5) != 0)
        return 0;
    const char *d = entry + bl + 5;
    long long pid = 0;
    if (!*d)
        return 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9' || pid > 4194304) /* above any pid_max */
            return 0;
        pid = pid * 10 + (*d - '0');
    }
    return (pid_t)pid;
}

int cx_file_remove_stale_tmp(const char *path, char *err, size_t errlen)
{
    char dir[4096], base[4096];
    if ((size_t)snprintf(dir, sizeof dir, "%s", path) >= sizeof dir)
        return cx_fail(err, errlen, CX_EINVAL, "%s: path too long", path);
    snprintf(base, sizeof base, "%s", path);
    const char *dn = dirname(dir), *bn = basename(base);
    DIR *dp = opendir(dn);
    if (!dp)
        return cx_fail(err, errlen, errno == ENOENT ? CX_ENOTFOUND : CX_EIO, "%s: %s", dn, strerror(errno));
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        pid_t pid = tmp_owner(de->d_name, bn);
        if (pid <= 0)
            continue;
        if (pid != getpid() && (kill(pid, 0) == 0 || errno != ESRCH))
            continue; /* a live writer (or one we may not signal): not ours to judge */
        char full[8192];
        snprintf(full, sizeof full, "%s/%s", dn, de->d_name);
        if (unlink(full) == 0) {
            removed++;
            cx_info("removed %s, a partial write left by a crash of pid %d", full, (int)pid);
        } else if (errno != ENOENT) {
            cx_warn("cannot remove the partial write %s: %s", full, strerror(errno));
        }
    }
    closedir(dp);
    return removed;
}

int cx_file_read(const char *path, size_t max, char **data, size_t *len, char *err, size_t errlen)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cx_fail(err, errlen, errno == ENOENT ? CX_ENOTFOUND : CX_EIO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return cx_fail(err, errlen, CX_EIO, "%s: stat: %s", path, strerror(errno));
    }
    if ((size_t)st.st_size > max) {
        close(fd);
        return cx_fail(err, errlen, CX_ETOOBIG, "%s: %lld bytes is over the %zu byte limit", path,
                       (long long)st.st_size, max);
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *p = malloc(cap);
    if (!p) {
        close(fd);
        return cx_fail(err, errlen, CX_ENOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (n + 1 >= cap) { /* file grew: keep reading up to max */
            if (cap > max + 1) {
                free(p);
                close(fd);
                return cx_fail(err, errlen, CX_ETOOBIG, "%s: over the %zu byte limit", path, max);
            }
            char *q = realloc(p, cap * 2);
            if (!q) {
                free(p);
                close(fd);
                return cx_fail(err, errlen, CX_ENOMEM, "%s: out of memory", path);
            }
            p = q;
            cap *= 2;
        }
        ssize_t r = read(fd, p + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(p);
            close(fd);
            return cx_fail(err, errlen, CX_EIO, "%s: read: %s", path, strerror(e));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (n > max) {
        free(p);
        return cx_fail(err, errlen, CX_ETOOBIG, "%s: over the %zu byte limit", path, max);
    }
    p[n] = '\0';
    *data = p;
    *len = n;
    return 0;
}

#define BLOB_MAGIC "CXBL"
#define BLOB_FORMAT 1u
#define BLOB_HEADER 16 /* magic 4 + format 4 + length 8 */

int cx_file_write_blob(const char *path, const void *payload, size_t len, char *err, size_t errlen)
{
    size_t total = BLOB_HEADER + len + 4;
    unsigned char *b = malloc(total);
    if (!b)
        return cx_fail(err, errlen, CX_ENOMEM, "%s: out of memory", path);
    uint32_t fmt = BLOB_FORMAT;
    uint64_t l = len;
    memcpy(b, BLOB_MAGIC, 4);
    memcpy(b + 4, &fmt, 4);
    memcpy(b + 8, &l, 8);
    if (len)
        memcpy(b + BLOB_HEADER, payload, len);
    uint32_t crc = cx_crc32c(0, payload, len);
    memcpy(b + BLOB_HEADER + len, &crc, 4);
    int rc = cx_file_write_atomic(path, b, total, err, errlen);
    free(b);
    return rc;
}

int cx_file_read_blob(const char *path, size_t max, void **payload, size_t *len, char *err, size_t errlen)
{
    char *data;
    size_t n;
    *payload = NULL;
    *len = 0;
    int rc = cx_file_read(path, max + BLOB_HEADER + 4, &data, &n, err, errlen);
    if (rc)
        return rc;
    uint32_t fmt, crc;
    uint64_t l;
    if (n < BLOB_HEADER + 4 || memcmp(data, BLOB_MAGIC, 4) != 0) {
        free(data);
        return cx_fail(err, errlen, CX_ECORRUPT, "%s: not a chaosloco blob (bad magic or too short)", path);
    }
    memcpy(&fmt, data + 4, 4);
    memcpy(&l, data + 8, 8);
    if (fmt != BLOB_FORMAT || l != n - BLOB_HEADER - 4) {
        free(data);
        return cx_fail(err, errlen, CX_ECORRUPT, "%s: bad format %u or length %llu (file has %zu bytes)",
                       path, fmt, (unsigned long long)l, n);
    }
    memcpy(&crc, data + BLOB_HEADER + l, 4);
    if (crc != cx_crc32c(0, data + BLOB_HEADER, (size_t)l)) {
        free(data);
        return cx_fail(err, errlen, CX_ECORRUPT, "%s: checksum mismatch", path);
    }
    memmove(data, data + BLOB_HEADER, (size_t)l);
    *payload = data;
    *len = (size_t)l;
    return 0;
}

int cx_mkdir_p(const char *path, char *err, size_t errlen)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s", path) >= sizeof tmp)
        return cx_fail(err, errlen, CX_EINVAL, "%s: path too long", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return cx_fail(err, errlen, CX_EIO, "%s: mkdir: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return cx_fail(err, errlen, CX_EIO, "%s: mkdir: %s", tmp, strerror(errno));
    return 0;
}
