/* sup_log.c - the unit's output: the writer thread that appends the
 * capture pipe to unit.log and rotates it to unit.log.1 past
 * log_max_bytes, and the tail of both for GET /v1/logs. Part of the
 * supervisor (supervisor.h, sup_internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/sup_internal.h"
#include "common/log.h"

/* ---- supervisor: log capture ---- */

static void log_rotate(sup *s)
{
    if (s->log_fd >= 0)
        close(s->log_fd);
    if (rename(s->log_path, s->log_path1) != 0 && errno != ENOENT)
        cx_warn("unit log: rename %s: %s", s->log_path, strerror(errno));
    s->log_fd = open(s->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    s->log_size = 0;
    if (s->log_fd < 0)
        cx_warn("unit log: open %s: %s", s->log_path, strerror(errno));
}

static void log_write(sup *s, const char *p, size_t n)
{
    while (n > 0) {
        int64_t room = s->log_max_bytes - s->log_size;
        if (room <= 0) {
            log_rotate(s);
            room = s->log_max_bytes;
        }
        size_t chunk = n < (size_t)room ? n : (size_t)room;
        if (s->log_fd >= 0) {
            ssize_t w = write(s->log_fd, p, chunk);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                /* Disk trouble must not stall the unit: drop this chunk. */
                w = (ssize_t)chunk;
            }
            chunk = (size_t)w;
        }
        s->log_size += (int64_t)chunk;
        __atomic_add_fetch(&s->log_total, (int64_t)chunk, __ATOMIC_RELAXED);
        p += chunk;
        n -= chunk;
    }
}

void *sup_log_thread_main(void *arg)
{
    sup *s = arg;
    char buf[16384];
    for (;;) {
        struct pollfd pfd = {.fd = s->log_rd, .events = POLLIN};
        int r = poll(&pfd, 1, 100);
        if (r > 0) {
            ssize_t n = read(s->log_rd, buf, sizeof buf);
            if (n > 0) {
                log_write(s, buf, (size_t)n);
                continue;
            }
        }
        if (__atomic_load_n(&s->log_stop, __ATOMIC_ACQUIRE))
            break;
    }
    /* Drain what is left without blocking. */
    for (;;) {
        ssize_t n = read(s->log_rd, buf, sizeof buf);
        if (n <= 0)
            break;
        log_write(s, buf, (size_t)n);
    }
    return NULL;
}

/* ---- supervisor: log tail ---- */

/* Append the last max bytes of path to out (malloc'd growing). */
static void read_tail(const char *path, size_t max, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        close(fd);
        return;
    }
    size_t want = (size_t)st.st_size < max ? (size_t)st.st_size : max;
    char *n = realloc(*out, *len + want + 1);
    if (!n) {
        close(fd);
        return;
    }
    *out = n;
    ssize_t r = pread(fd, *out + *len, want, st.st_size - (off_t)want);
    if (r > 0)
        *len += (size_t)r;
    (*out)[*len] = '\0';
    close(fd);
}

char *sup_log_tail(sup *s, int lines, size_t max_bytes)
{
    char *buf = NULL;
    size_t len = 0;
    /* Rotated file first (older), then the current one; the caller only
     * sees the last max_bytes of the concatenation. */
    read_tail(s->log_path1, max_bytes, &buf, &len);
    read_tail(s->log_path, max_bytes, &buf, &len);
    if (!buf)
        return strdup("");
    size_t start = len > max_bytes ? len - max_bytes : 0;
    /* Walk back `lines` newlines (ignoring a trailing one). */
    size_t i = len;
    if (i > start && buf[i - 1] == '\n')
        i--;
    int seen = 0;
    while (i > start) {
        if (buf[i - 1] == '\n' && ++seen == lines)
            break;
        i--;
    }
    char *out = strdup(buf + i);
    free(buf);
    return out;
}
