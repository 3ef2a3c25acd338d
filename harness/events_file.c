/* events_file.c - follow a coordinator's JSON-lines event file (see
 * events_file.h).
 *
 * A tailer's file, as seen from here:
 *
 *   (no file) --evf_poll(): the path exists, open()--> following
 *   following --evf_poll(): size < done (truncated)--> following, from 0, rewound
 *   following --evf_poll(): another inode at the path (replaced): read the old
 *             one to its end, open the new one--> following, from 0, rewound
 *   any --a bad line, a read error--> failed (sticky)
 *
 * following: fd is open, done = the bytes of the complete lines consumed,
 * line = how many. rewound: events with seq <= last_seq are skipped (the
 * history already read) until a newer one is taken.
 */
#include "harness/events_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"

struct evf {
    char *path;       /* the followed path (owned) */
    int fd;           /* -1 until the file exists */
    dev_t dev;        /* the open file's device and inode (replacement check) */
    ino_t ino;        /* ... */
    off_t done;       /* bytes of complete lines consumed from fd */
    int64_t line;     /* complete lines consumed from fd */
    int64_t last_seq; /* seq of the last event taken, 0 none */
    int rewound;      /* 1: skip seq <= last_seq (a truncated or replaced file read again) */
    size_t line_max;  /* longest line accepted, bytes without the '\n' */
    char *buf;        /* line_max + 1 bytes, allocated at the first read */
    int failed;       /* the sticky error code, 0 none */
    char msg[CX_ERRLEN];
};

evf *evf_new(const char *path, size_t line_max)
{
    evf *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    if (!(t->path = strdup(path))) {
        free(t);
        return NULL;
    }
    t->fd = -1;
    t->line_max = line_max ? line_max : EVF_LINE_MAX;
    if (t->line_max >= EVF_POLL_BYTES) /* one call must be able to read the longest line */
        t->line_max = EVF_POLL_BYTES - 1;
    return t;
}

void evf_free(evf *t)
{
    if (!t)
        return;
    if (t->fd >= 0)
        close(t->fd);
    free(t->buf);
    free(t->path);
    free(t);
}

int64_t evf_last_seq(const evf *t)
{
    return t->last_seq;
}

/* Record the sticky error "events file PATH, line N: ..." (line <= 0: no
 * line) and return code. */
__attribute__((format(printf, 6, 7))) static int fail(evf *t, char *err, size_t errlen, int code,
                                                      int64_t line, const char *fmt, ...)
{
    char what[CX_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(t->msg, sizeof t->msg, "events file %s, line %" PRId64 ": %s", t->path, line, what);
    else
        snprintf(t->msg, sizeof t->msg, "events file %s: %s", t->path, what);
    t->failed = code;
    return cx_fail(err, errlen, code, "%s", t->msg);
}

/* One complete line (without its '\n'): 1 when an event was appended to
 * out, 0 when skipped (already read before a rewind), or the error. */
static int take_line(evf *t, const char *s, size_t len, json_t *out, char *err, size_t errlen)
{
    int64_t line = t->line + 1;
    if (len == 0)
        return fail(t, err, errlen, CX_EINVAL, line, "empty line (one event per line)");
    json_error_t je;
    json_t *ev = json_loadb(s, len, JSON_REJECT_DUPLICATES, &je);
    if (!ev) {
        /* jansson's text quotes the bytes near the error ("... near
         * 'xyz'"): whatever the path names (a key file by mistake) must
         * not reach the log, so only the reason and the column */
        char *near = strstr(je.text, " near ");
        if (near)
            *near = '\0';
        return fail(t, err, errlen, CX_EINVAL, line, "not a JSON object: %s (column %d)", je.text, je.column);
    }
    json_t *seqv = json_object_get(ev, "seq");
    if (!json_is_object(ev) || !json_is_integer(seqv) || !json_is_integer(json_object_get(ev, "t_mono_ms")) ||
        !json_is_string(json_object_get(ev, "type"))) {
        json_decref(ev);
        return fail(t, err, errlen, CX_EINVAL, line,
                    "expected an event: an object with integer seq, integer t_mono_ms and string type");
    }
    int64_t seq = json_integer_value(seqv);
    if (seq < 1) {
        json_decref(ev);
        return fail(t, err, errlen, CX_EINVAL, line, "seq %" PRId64 ": expected >= 1", seq);
    }
    if (seq <= t->last_seq && t->rewound) { /* the history already read, again */
        json_decref(ev);
        return 0;
    }
    if (t->last_seq > 0 && seq != t->last_seq + 1) {
        json_decref(ev);
        return fail(t, err, errlen, CX_EINVAL, line,
                    "seq %" PRId64 " after %" PRId64 ": each event's seq is the previous one's + 1", seq,
                    t->last_seq);
    }
    t->last_seq = seq;
    t->rewound = 0;
    json_array_append_new(out, ev);
    return 1;
}

/* Read fd's complete lines from done on, until its end or *budget bytes
 * were read; the events into out, *n counted. An unterminated tail is left
 * (read again by the next call). 0 or the error. */
static int read_lines(evf *t, json_t *out, size_t *budget, int *n, char *err, size_t errlen)
{
    size_t have = 0; /* bytes in buf, from offset done */
    while (*budget > 0) {
        size_t room = t->line_max + 1 - have;
        ssize_t got = pread(t->fd, t->buf + have, room < *budget ? room : *budget, t->done + (off_t)have);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return fail(t, err, errlen, CX_EIO, 0, "read: %s", strerror(errno));
        if (got == 0)
            return 0;
        *budget -= (size_t)got;
        have += (size_t)got;
        size_t start = 0;
        char *nl;
        while ((nl = memchr(t->buf + start, '\n', have - start))) {
            size_t len = (size_t)(nl - (t->buf + start));
            int rc = take_line(t, t->buf + start, len, out, err, errlen);
            if (rc < 0)
                return rc;
            *n += rc;
            start += len + 1;
            t->done += (off_t)(len + 1);
            t->line++;
        }
        memmove(t->buf, t->buf + start, have - start);
        have -= start;
        if (have > t->line_max)
            return fail(t, err, errlen, CX_ETOOBIG, t->line + 1, "longer than %zu bytes (no newline within)",
                        t->line_max);
    }
    return 0;
}

static int open_file(evf *t, char *err, size_t errlen)
{
    /* O_NONBLOCK: a FIFO at the path must not block the runner in open();
     * it is then refused as not a regular file */
    int fd = open(t->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0; /* not there yet (or between an unlink and a rename) */
        return fail(t, err, errlen, CX_EIO, 0, "open: %s", strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(t, err, errlen, CX_EINVAL, 0, "not a regular file");
    }
    t->fd = fd;
    t->dev = st.st_dev;
    t->ino = st.st_ino;
    t->done = 0;
    t->line = 0;
    t->rewound = t->last_seq > 0;
    if (t->rewound)
        cx_info("events file %s: a new file at the path; reading it from its start (after seq %" PRId64 ")",
                t->path, t->last_seq);
    return 0;
}

int evf_poll(evf *t, json_t *out, char *err, size_t errlen)
{
    if (t->failed)
        return cx_fail(err, errlen, t->failed, "%s", t->msg);
    if (!t->buf && !(t->buf = malloc(t->line_max + 1)))
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    int n = 0, rc;
    size_t budget = EVF_POLL_BYTES;
    struct stat ps;
    int at_path = stat(t->path, &ps) == 0;
    if (t->fd >= 0 && at_path && (ps.st_dev != t->dev || ps.st_ino != t->ino)) {
        /* replaced: what the old file still holds first, then the new one */
        if ((rc = read_lines(t, out, &budget, &n, err, errlen)) < 0)
            return rc;
        if (budget == 0)
            return n; /* the old file is not read to its end yet */
        close(t->fd);
        t->fd = -1;
    }
    if (t->fd < 0) {
        if (!at_path)
            return n;
        if ((rc = open_file(t, err, errlen)) < 0)
            return rc;
        if (t->fd < 0)
            return n;
    }
    struct stat fs;
    if (fstat(t->fd, &fs) != 0)
        return fail(t, err, errlen, CX_EIO, 0, "fstat: %s", strerror(errno));
    if (fs.st_size < t->done) {
        cx_info("events file %s: truncated below what was read; reading it from its start (after seq %" PRId64
                ")",
                t->path, t->last_seq);
        t->done = 0;
        t->line = 0;
        t->rewound = t->last_seq > 0;
    }
    if ((rc = read_lines(t, out, &budget, &n, err, errlen)) < 0)
        return rc;
    return n;
}
