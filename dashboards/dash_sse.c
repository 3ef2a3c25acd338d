/* dash_sse.c - the dashboard's event streams: GET /api/events
 * (dash_internal.h).
 *
 * A stream is a cx_http_stream (common/http_server.h) served from its own
 * connection thread: sse_read() blocks on s->cond (at most 1 s at a time,
 * so a stop is noticed) and copies the ring's messages (dash_state.c) out
 * after its cursor; a stream that fell more than the ring behind gets a
 * fresh `snapshot`. The first message is `retry: 2000` and a snapshot built
 * under the lock that fixes the cursor, so nothing is missed or sent twice.
 *
 * Caps: at most DASH_SSE_PER_CLIENT streams per client address (loopback:
 * one pool) and DASH_SSE_MAX in all; a new stream over a cap ends the
 * oldest stream of the client with the most (its EventSource reconnects),
 * so a new viewer always gets a live view. The connection guard of the
 * server (common/http_guard.h) counts every open stream as a connection.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "dashboards/dash_internal.h"

typedef struct sse_conn {
    dash_server *s;
    uint64_t cursor;              /* last message seq sent */
    cx_buf pending;               /* bytes not yet handed to the server */
    size_t off;                   /* bytes of pending already handed */
    int64_t last_write_ms;        /* mono ms of the last bytes written */
    uint32_t client;              /* client key (cx_http_peer_key): IPv4 address, host order */
    int evicted;                  /* ended to make room for a newer stream */
    struct sse_conn *prev, *next; /* s->streams, oldest first */
} sse_conn;

/* Build the `snapshot` message into b. Caller holds s->mu. */
static int sse_snapshot(dash_server *s, cx_buf *b)
{
    json_t *snap = dash_snapshot_locked(s);
    char *js = json_dumps(snap, JSON_COMPACT);
    json_decref(snap);
    if (!js)
        return CX_ENOMEM;
    int rc = cx_buf_printf(b, "event: snapshot\nid: %llu\ndata: ", (unsigned long long)s->msg_seq);
    if (rc == 0)
        rc = cx_buf_append(b, js, strlen(js));
    if (rc == 0)
        rc = cx_buf_append(b, "\n\n", 2);
    free(js);
    return rc;
}

/* cx_http_stream.read: hand out pending bytes; when there are none, wait
 * (at most 1 s, so that stopping and keep-alives are noticed) for new ring
 * messages. */
static long sse_read(void *cls, char *buf, size_t max)
{
    sse_conn *c = cls;
    dash_server *s = c->s;
    for (;;) {
        if (c->off < c->pending.len) {
            size_t n = c->pending.len - c->off;
            if (n > max)
                n = max;
            memcpy(buf, c->pending.data + c->off, n);
            c->off += n;
            c->last_write_ms = cx_mono_ms();
            return (long)n;
        }
        cx_buf_reset(&c->pending);
        c->off = 0;
        pthread_mutex_lock(&s->mu);
        if (!s->stopping && s->msg_seq == c->cursor) {
            /* wait at most 1 s so that stopping and keep-alives are noticed */
            (void)cx_cond_wait_until_ms(&s->cond, &s->mu, cx_mono_ms() + 1000);
        }
        if (s->stopping || c->evicted) {
            pthread_mutex_unlock(&s->mu);
            return CX_HTTP_STREAM_END;
        }
        int rc = 0;
        if (s->msg_seq > c->cursor) {
            if (s->msg_seq - c->cursor >= DASH_MSGS_MAX) {
                /* fell behind the ring: start over from a snapshot */
                rc = sse_snapshot(s, &c->pending);
            } else {
                for (uint64_t q = c->cursor + 1; q <= s->msg_seq && rc == 0; q++) {
                    const dash_msg *m = &s->msgs[q % DASH_MSGS_MAX];
                    if (m->seq == q && m->text)
                        rc = cx_buf_append(&c->pending, m->text, strlen(m->text));
                }
            }
            c->cursor = s->msg_seq;
        }
        pthread_mutex_unlock(&s->mu);
        if (rc != 0)
            return CX_HTTP_STREAM_ERROR;
        if (c->pending.len == 0 && cx_mono_ms() - c->last_write_ms >= s->sse_hb_ms)
            cx_buf_printf(&c->pending, ": keep-alive\n\n");
    }
}

/* cx_http_stream.done: unlink the stream and free it. */
static void sse_free(void *cls)
{
    sse_conn *c = cls;
    pthread_mutex_lock(&c->s->mu);
    if (c->prev)
        c->prev->next = c->next;
    else if (c->s->streams == c)
        c->s->streams = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&c->s->mu);
    cx_buf_cleanup(&c->pending);
    free(c);
}
/* The oldest live stream of the client with the most live streams (of
 * client only, when only_client). Caller holds s->mu. */
static sse_conn *sse_victim(dash_server *s, int only_client, uint32_t client)
{
    sse_conn *victim = NULL;
    int victim_n = 0;
    for (sse_conn *c = s->streams; c; c = c->next) {
        if (c->evicted || (only_client && c->client != client))
            continue;
        int n = 0;
        for (sse_conn *d = s->streams; d; d = d->next)
            n += !d->evicted && d->client == c->client;
        if (n > victim_n) { /* oldest first: ties keep the earlier one */
            victim = c;
            victim_n = n;
        }
    }
    return victim;
}

/* Make room for a new stream from client: end the oldest stream of that
 * client when it has its share, else the oldest of the heaviest client
 * when all DASH_SSE_MAX are taken. Caller holds s->mu. */
static void sse_make_room(dash_server *s, uint32_t client)
{
    int live = 0, mine = 0;
    for (sse_conn *c = s->streams; c; c = c->next)
        if (!c->evicted) {
            live++;
            mine += c->client == client;
        }
    sse_conn *v = NULL;
    if ((client >> 24) != 127 && mine >= DASH_SSE_PER_CLIENT)
        v = sse_victim(s, 1, client);
    else if (live >= DASH_SSE_MAX)
        v = sse_victim(s, 0, 0);
    if (v) {
        v->evicted = 1;
        pthread_cond_broadcast(&s->cond);
        cx_debug("dashboard: ended an event stream to make room for a newer one");
    }
}

int dash_h_events(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    dash_server *s = ctx;
    sse_conn *c = calloc(1, sizeof *c);
    if (!c)
        return CX_ENOMEM;
    c->s = s;
    cx_buf_init(&c->pending, DASH_RESP_MAX);
    c->last_write_ms = cx_mono_ms();
    c->client = cx_http_peer_key(req);
    pthread_mutex_lock(&s->mu);
    sse_make_room(s, c->client);
    sse_conn **tail = &s->streams; /* append: the list stays oldest first */
    while (*tail) {
        c->prev = *tail;
        tail = &(*tail)->next;
    }
    *tail = c;
    /* the client's EventSource reconnects itself after 2 s */
    int rc = cx_buf_printf(&c->pending, "retry: 2000\n\n");
    if (rc == 0)
        rc = sse_snapshot(s, &c->pending);
    c->cursor = s->msg_seq;
    pthread_mutex_unlock(&s->mu);
    if (rc != 0) {
        sse_free(c);
        return rc;
    }
    cx_http_reply_stream(resp, 200, "text/event-stream",
                         (cx_http_stream){.read = sse_read, .done = sse_free, .ctx = c});
    cx_http_add_header(resp, "X-Accel-Buffering", "no");
    return 0;
}
