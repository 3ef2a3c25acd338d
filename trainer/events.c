/* events.c - event log: ring + append-only JSON lines file (events.h).
 *
 * Lines are written as {"seq":N,"t_real":...,"t_mono_ms":...,"type":...,...}
 * with seq first (JSON_PRESERVE_ORDER), so a reader of the file can find a
 * line's seq from its prefix without parsing the whole object. Seqs grow
 * down the file, so the first line after a seq is found by bisection on
 * byte offsets (find_after): neither a restart nor a reader of old events
 * reads the history before what it needs.
 */
#include "trainer/events.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

typedef struct ev_line {
    int64_t seq; /* 0 = empty slot */
    char *text;  /* the JSON line without its newline (malloc'd) */
} ev_line;

struct events {
    pthread_mutex_t mu;
    char *path;         /* events.jsonl */
    int fd;             /* O_APPEND, -1 if the file could not be opened later */
    ev_line *ring;      /* [cap] */
    size_t cap;         /* slots */
    size_t head;        /* next slot to write */
    int64_t seq;        /* last seq handed out */
    int64_t oldest;     /* smallest seq still in the ring (0 = ring empty) */
    int warned;         /* 1 after the first write failure was logged */
    int64_t read_bytes; /* bytes read by recovery and events_foreach_file (restart cost) */
};

#define RECOVER_TAIL_BYTES (256 * 1024) /* recovery reads this much of the end first */
#define BISECT_MIN_BYTES 4096           /* bisection stops below this; a scan does the rest */

/* seq of a line written by us ({"seq":N,...}), or -1. */
static int64_t line_seq(const char *s)
{
    const char *p = strstr(s, "\"seq\":");
    if (!p || p - s > 4)
        return -1;
    p += 6;
    while (*p == ' ')
        p++;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 1)
        return -1;
    return (int64_t)v;
}

static void ring_put(events *ev, int64_t seq, char *text)
{
    ev_line *slot = &ev->ring[ev->head];
    free(slot->text);
    slot->seq = seq;
    slot->text = text;
    ev->head = (ev->head + 1) % ev->cap;
    /* the oldest is now the slot after head (if filled) */
    ev_line *next = &ev->ring[ev->head];
    ev->oldest = next->seq ? next->seq : ev->ring[0].seq;
    if (!ev->oldest)
        ev->oldest = seq;
}

/* ---- events: recovery ---- */

/* seq of the first readable line at or after the current position of f
 * (which is at a line start), with *end set past it; -1 at EOF. */
static int64_t next_seq(FILE *f, char **line, size_t *cap, off_t *end)
{
    ssize_t n;
    while ((n = getline(line, cap, f)) > 0) {
        if ((*line)[n - 1] != '\n')
            return -1; /* torn */
        int64_t s = line_seq(*line);
        if (s >= 0) {
            *end = ftello(f);
            return s;
        }
    }
    return -1;
}

/* Byte offset, at a line start, from which a forward scan finds every line
 * with seq > since (those before it all have seq <= since): bisection on
 * the file's sizes, O(log size) short reads. */
static off_t find_after(FILE *f, off_t size, int64_t since, char **line, size_t *cap)
{
    off_t lo = 0, hi = size;
    while (since > 0 && hi - lo > BISECT_MIN_BYTES) {
        off_t mid = lo + (hi - lo) / 2, end = 0;
        if (fseeko(f, mid - 1, SEEK_SET) != 0 || getline(line, cap, f) < 0)
            break; /* mid-1 so that a line starting exactly at mid is not skipped */
        int64_t s = next_seq(f, line, cap, &end);
        if (s >= 0 && s <= since)
            lo = end;
        else
            hi = mid;
    }
    fseeko(f, lo, SEEK_SET);
    return lo;
}

/* Read the lines from byte from to the end into the ring: the last seq and
 * the end of the last complete line (*good). */
static void read_tail(events *ev, FILE *f, off_t from, off_t *good, int64_t *found)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    off_t pos = from;
    *good = from;
    *found = 0;
    fseeko(f, from, SEEK_SET);
    if (from > 0 && (n = getline(&line, &cap, f)) > 0) /* from is mid-line: skip to the next start */
        pos += n;
    *good = pos;
    while ((n = getline(&line, &cap, f)) > 0) {
        pos += n;
        ev->read_bytes += n;
        if (line[n - 1] != '\n')
            break; /* torn last line */
        line[n - 1] = 0;
        *good = pos;
        int64_t s = line_seq(line);
        if (s < 0) {
            cx_warn("events: skipping unreadable line at byte %lld of %s", (long long)(pos - n), ev->path);
            continue;
        }
        *found = 1;
        if (s > ev->seq)
            ev->seq = s;
        char *copy = strdup(line);
        if (copy)
            ring_put(ev, s, copy);
    }
    free(line);
}

/* Recover the last seq and the ring from the end of the file: the last
 * RECOVER_TAIL_BYTES (doubled until a complete line is in it), never the
 * whole history. Older events stay in the file for from_file. */
static int recover(events *ev, char *err, size_t errlen)
{
    FILE *f = fopen(ev->path, "r");
    struct stat st;
    off_t good = 0;
    int64_t found = 0;
    if (!f) {
        if (errno == ENOENT)
            return 0;
        return cx_fail(err, errlen, CX_EIO, "open %s: %s", ev->path, strerror(errno));
    }
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return cx_fail(err, errlen, CX_EIO, "stat %s: %s", ev->path, strerror(errno));
    }
    for (off_t tail = RECOVER_TAIL_BYTES;; tail *= 2) {
        off_t from = st.st_size > tail ? st.st_size - tail : 0;
        read_tail(ev, f, from, &good, &found);
        if (found || from == 0)
            break;
    }
    fclose(f);
    if (st.st_size > good) {
        cx_warn("events: truncating torn tail of %s (%lld -> %lld bytes)", ev->path, (long long)st.st_size,
                (long long)good);
        if (truncate(ev->path, good) != 0)
            return cx_fail(err, errlen, CX_EIO, "truncate %s: %s", ev->path, strerror(errno));
    }
    return 0;
}

events *events_new(const char *path, size_t ring_cap, char *err, size_t errlen)
{
    events *ev = calloc(1, sizeof *ev);
    if (!ev) {
        cx_fail(err, errlen, CX_ENOMEM, "events: out of memory");
        return NULL;
    }
    pthread_mutex_init(&ev->mu, NULL);
    ev->fd = -1;
    ev->cap = ring_cap < 16 ? 16 : ring_cap;
    ev->ring = calloc(ev->cap, sizeof *ev->ring);
    ev->path = strdup(path);
    if (!ev->ring || !ev->path) {
        cx_fail(err, errlen, CX_ENOMEM, "events: out of memory");
        goto fail;
    }
    if (recover(ev, err, errlen) != 0)
        goto fail;
    ev->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (ev->fd < 0) {
        cx_fail(err, errlen, CX_EIO, "open %s: %s", path, strerror(errno));
        goto fail;
    }
    return ev;
fail:
    events_free(ev);
    return NULL;
}

void events_free(events *ev)
{
    if (!ev)
        return;
    if (ev->fd >= 0)
        close(ev->fd);
    for (size_t i = 0; ev->ring && i < ev->cap; i++)
        free(ev->ring[i].text);
    free(ev->ring);
    free(ev->path);
    pthread_mutex_destroy(&ev->mu);
    free(ev);
}

void events_set_seq_floor(events *ev, int64_t floor)
{
    pthread_mutex_lock(&ev->mu);
    if (floor > ev->seq)
        ev->seq = floor;
    pthread_mutex_unlock(&ev->mu);
}

int64_t events_last_seq(events *ev)
{
    pthread_mutex_lock(&ev->mu);
    int64_t s = ev->seq;
    pthread_mutex_unlock(&ev->mu);
    return s;
}

/* ---- events: emit ---- */

int64_t events_emit(events *ev, const char *type, json_t *fields)
{
    char ts[40];
    json_t *o = json_object();
    int64_t rc;
    if (!o) {
        json_decref(fields);
        return CX_ENOMEM;
    }
    pthread_mutex_lock(&ev->mu);
    int64_t seq = ++ev->seq;
    cx_iso_time(ts, sizeof ts, cx_real_ns());
    json_object_set_new(o, "seq", json_integer(seq));
    json_object_set_new(o, "t_real", json_string(ts));
    json_object_set_new(o, "t_mono_ms", json_integer(cx_mono_ms()));
    json_object_set_new(o, "type", json_string(type));
    if (fields)
        json_object_update_missing(o, fields);
    json_decref(fields);
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!text) {
        pthread_mutex_unlock(&ev->mu);
        return CX_ENOMEM;
    }
    rc = seq;
    size_t len = strlen(text);
    text[len] = '\n'; /* temporarily, for one write(2) of the line */
    ssize_t w = ev->fd >= 0 ? write(ev->fd, text, len + 1) : -1;
    text[len] = 0;
    if (w != (ssize_t)(len + 1)) {
        if (!ev->warned)
            cx_warn("events: append to %s failed: %s", ev->path, w < 0 ? strerror(errno) : "short write");
        ev->warned = 1;
        rc = CX_EIO;
    }
    ring_put(ev, seq, text);
    pthread_mutex_unlock(&ev->mu);
    return rc;
}

/* ---- events: read ---- */

/* The events file read line by line from at or before the first line with
 * a sequence number above since. */
typedef struct ev_reader {
    FILE *f;
    char *line; /* getline's buffer */
    size_t cap;
} ev_reader;

/* 0, or -1 when there is no file (nothing to close then). */
static int reader_open(events *ev, int64_t since, ev_reader *rd)
{
    *rd = (ev_reader){.f = fopen(ev->path, "r")};
    struct stat st;
    if (rd->f && fstat(fileno(rd->f), &st) == 0)
        find_after(rd->f, st.st_size, since, &rd->line, &rd->cap);
    return rd->f ? 0 : -1;
}

static void reader_close(ev_reader *rd)
{
    free(rd->line);
    fclose(rd->f);
}

/* Lines with since < seq < upto from the file (the part the ring lost). */
static int from_file(events *ev, int64_t since, int64_t upto, size_t *limit, cx_buf *out)
{
    ev_reader rd;
    if (reader_open(ev, since, &rd) != 0)
        return 0;
    ssize_t n;
    int rc = 0;
    while (*limit > 0 && (n = getline(&rd.line, &rd.cap, rd.f)) > 0) {
        if (rd.line[n - 1] != '\n')
            break;
        int64_t s = line_seq(rd.line);
        if (s <= since)
            continue;
        if (upto > 0 && s >= upto)
            break;
        if ((rc = cx_buf_append(out, rd.line, (size_t)n)) != 0)
            break;
        (*limit)--;
    }
    reader_close(&rd);
    return rc;
}

int events_since(events *ev, int64_t since, size_t limit, cx_buf *out)
{
    int rc = 0;
    pthread_mutex_lock(&ev->mu);
    if (ev->oldest > 0 && since + 1 < ev->oldest)
        rc = from_file(ev, since, ev->oldest, &limit, out);
    for (size_t i = 0; rc == 0 && limit > 0 && i < ev->cap; i++) {
        /* oldest first: the slot at head is the oldest when the ring is full */
        ev_line *l = &ev->ring[(ev->head + i) % ev->cap];
        if (!l->seq || l->seq <= since)
            continue;
        if ((rc = cx_buf_append(out, l->text, strlen(l->text))) == 0)
            rc = cx_buf_append(out, "\n", 1);
        limit--;
    }
    pthread_mutex_unlock(&ev->mu);
    return rc;
}

int events_foreach_file(events *ev, int64_t since, const char *type, int (*fn)(void *ctx, json_t *event),
                        void *ctx)
{
    char want[64];
    snprintf(want, sizeof want, "\"type\":\"%s\"", type ? type : "");
    ev_reader rd;
    if (reader_open(ev, since, &rd) != 0)
        return 0;
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = getline(&rd.line, &rd.cap, rd.f)) > 0) {
        pthread_mutex_lock(&ev->mu);
        ev->read_bytes += n;
        pthread_mutex_unlock(&ev->mu);
        if (line_seq(rd.line) <= since || (type && !strstr(rd.line, want)))
            continue; /* the cheap tests first: most lines are never parsed */
        json_t *j = json_loadb(rd.line, (size_t)n, 0, NULL);
        if (j) {
            rc = fn(ctx, j);
            json_decref(j);
        }
    }
    reader_close(&rd);
    return rc;
}

int64_t events_read_bytes(events *ev)
{
    pthread_mutex_lock(&ev->mu);
    int64_t b = ev->read_bytes;
    pthread_mutex_unlock(&ev->mu);
    return b;
}
