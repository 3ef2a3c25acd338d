/* secret.c - see secret.h. */
#include "common/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"

/* " (-> TARGET)" into out when path is a symlink (a kubelet's
 * NAME -> ..data/NAME), "" otherwise: a refusal then also names the file
 * that was actually looked at, the one fd is open on. */
static void target_note(int fd, const char *path, char *out, size_t outlen)
{
    char proc[64], target[1024];
    struct stat lst;
    out[0] = '\0';
    if (lstat(path, &lst) != 0 || !S_ISLNK(lst.st_mode))
        return;
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, target, sizeof target - 1);
    if (n <= 0)
        return;
    target[n] = '\0';
    snprintf(out, outlen, " (-> %s)", target);
}

int cx_secret_open(const char *path, const char *what, int *fd, char *err, size_t errlen)
{
    *fd = -1;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused
     * below. It changes nothing for the regular file that is accepted. */
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (f < 0) {
        int e = errno;
        return cx_fail(err, errlen, CX_EINVAL, "%s %s: %s", what, path, strerror(e));
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return cx_fail(err, errlen, CX_EIO, "%s %s: fstat: %s", what, path, strerror(e));
    }
    char note[1100];
    target_note(f, path, note, sizeof note);
    uid_t me = geteuid();
    int rc = 0;
    if (!S_ISREG(st.st_mode)) {
        const char *kind = S_ISDIR(st.st_mode)    ? "a directory"
                           : S_ISFIFO(st.st_mode) ? "a FIFO"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                                                  : "not a regular file";
        rc = cx_fail(err, errlen, CX_EINVAL, "%s %s%s: is %s; a secret must be a regular file", what, path,
                     note, kind);
    } else if (st.st_uid != me && st.st_uid != 0) {
        rc = cx_fail(err, errlen, CX_EINVAL,
                     "%s %s%s: owned by uid %u, neither this process's uid %u nor root; whoever owns it "
                     "can change the secret",
                     what, path, note, (unsigned)st.st_uid, (unsigned)me);
    } else if (st.st_mode & 077) {
        rc = cx_fail(err, errlen, CX_EINVAL,
                     "%s %s%s: mode %04o lets group or others read or write it; it must be 0600 or 0400 "
                     "(chmod 600; a Kubernetes Secret volume: defaultMode 0400 and no fsGroup, or copy it "
                     "with an init container)",
                     what, path, note, (unsigned)(st.st_mode & 07777));
    }
    if (rc != 0) {
        close(f);
        return rc;
    }
    *fd = f;
    return 0;
}

int cx_secret_read(const char *path, const char *what, size_t max, char **out, size_t *len, char *err,
                   size_t errlen)
{
    int fd;
    *out = NULL;
    *len = 0;
    int rc = cx_secret_open(path, what, &fd, err, errlen);
    if (rc != 0)
        return rc;
    char *buf = malloc(max + 1);
    size_t n = 0;
    if (!buf) {
        close(fd);
        return cx_fail(err, errlen, CX_ENOMEM, "%s %s: out of memory", what, path);
    }
    for (;;) {
        ssize_t r = read(fd, buf + n, max + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            rc = cx_fail(err, errlen, CX_EIO, "%s %s: read: %s", what, path, strerror(e));
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max) {
            rc = cx_fail(err, errlen, CX_EINVAL, "%s %s: larger than %zu bytes", what, path, max);
            break;
        }
    }
    close(fd);
    if (rc != 0) {
        memset(buf, 0, n);
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int cx_secret_read_line(const char *path, const char *what, char *out, size_t outlen, char *err, size_t errlen)
{
    char *data = NULL;
    size_t len = 0;
    int rc = cx_secret_read(path, what, 4096, &data, &len, err, errlen);
    if (rc < 0)
        return rc;
    size_t n = strcspn(data, "\r\n");
    while (n > 0 && (data[n - 1] == ' ' || data[n - 1] == '\t'))
        n--;
    if (n >= outlen) {
        rc = cx_fail(err, errlen, CX_EINVAL, "%s %s: the first line is longer than %zu characters", what, path,
                     outlen - 1);
    } else {
        memcpy(out, data, n);
        out[n] = '\0';
        rc = (int)n;
    }
    memset(data, 0, len);
    free(data);
    return rc;
}
