/* proxy.c - the TCP proxy: listener, links, epoll loop, API.
 *
 * Threads. One loop thread per proxy owns the sockets and every link. API
 * calls (agent HTTP threads) change the shared config under p->mu, bump
 * p->gen, write the eventfd and wait (bounded) until the loop has applied
 * that generation, so that when a call returns its effect is in place.
 * Counters are relaxed atomics written by the loop and read by anyone.
 *
 * A link is one accepted client plus its upstream connection:
 *
 *          accept (proxy_on_accept)
 *              │ connect(upstream) non-blocking
 *              ▼
 *       ┌─ CONNECTING ── connect failed (link_on_connected) ──► CLOSED (client RST,
 *       │      │ connected (link_on_connected): toxic chains built        conns_refused)
 *       │      ▼
 *       │    OPEN  each direction independently:
 *       │      │     FAST ──(chain gets an applied toxic: dir_sync)──► QUEUED
 *       │      │      ▲  (pipe contents moved to the queue first)         │
 *       │      │      └──(no applied toxic, queue empty: dir_pump_queued)┘
 *       │      │     src EOF → EOF delivered → shutdown(dst, SHUT_WR): dir done
 *       │      │ both directions done (link_pump)
 *       │      ▼
 *       └──► CLOSED  also from OPEN on: I/O error (RST both), toxic close
 *                    (timeout/limit_data: FIN), reset_peer (RST), partition
 *                    (RST), disable (FIN), proxy_free (link_close)
 *
 * Invariants (assert_link_state): CONNECTING links have no chains and move
 * no data; a FAST direction has an empty queue; a QUEUED direction has an
 * empty pipe; a done direction never writes again.
 */
#include "injectors/proxy/proxy.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/parse.h"
#include "injectors/proxy/toxic.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define PROXY_MAX_TOXICS 32        /* per proxy */
#define PROXY_QUEUE_CAP (1u << 20) /* bytes queued per direction before reading stops */
#define PROXY_READ_MAX 65536       /* bytes per read / splice */
#define PROXY_PIPE_SIZE (1 << 16)  /* splice pipe capacity, bytes (1 MiB showed no gain on loopback) */
#define PROXY_SYNC_WAIT_MS 2000    /* API wait for the loop to apply a change */
#define PROXY_PUMP_ROUNDS 64       /* I/O rounds per direction per wakeup (fairness) */

#define ATOMIC_ADD(x, v) __atomic_fetch_add(&(x), (uint64_t)(v), __ATOMIC_RELAXED)
#define ATOMIC_SUB(x, v) __atomic_fetch_sub(&(x), (uint64_t)(v), __ATOMIC_RELAXED)
#define ATOMIC_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* ---- proxy: types ---- */

typedef struct shared_toxic {
    uint64_t id;        /* unique per proxy, never reused */
    toxic_spec spec;    /* current spec (under p->mu) */
    uint64_t seed;      /* toxicity draws, jitter, corruption */
    toxic_counters ctr; /* atomics */
    int refs;           /* list + loop snapshot; atomic */
} shared_toxic;

typedef enum end_kind { END_LISTEN, END_EVENT, END_TIMER, END_CLIENT, END_UPSTREAM } end_kind;

struct plink;

typedef struct link_end {
    end_kind kind;
    struct plink *l; /* NULL for the proxy's own fds */
    int fd;
    uint32_t events; /* registered epoll events; 0 = not registered */
} link_end;

typedef enum dir_mode { DIR_FAST, DIR_QUEUED } dir_mode;

typedef struct dir {
    toxic_stream stream; /* UPSTREAM: client -> server */
    link_end *src, *dst; /* borrowed from the plink */
    dir_mode mode;
    int pipe_r, pipe_w;                /* FAST: splice pipe, -1 until first use */
    size_t pipe_bytes;                 /* bytes sitting in the pipe */
    size_t pipe_cap;                   /* pipe capacity, bytes */
    chunk_list q;                      /* QUEUED: chunks in order, ready times non-decreasing */
    int64_t last_ready_ns;             /* ready time of the last queued chunk */
    bool src_eof;                      /* read side returned EOF */
    bool done;                         /* EOF delivered (dst shut for writing) */
    toxic_inst inst[PROXY_MAX_TOXICS]; /* chain, in the proxy's toxic order */
    int ninst;
    uint64_t *bytes_ctr; /* proxy counter of delivered bytes */
} dir;

typedef enum link_state { LINK_CONNECTING, LINK_OPEN, LINK_CLOSED } link_state;

typedef struct plink {
    struct plink *next, *prev;
    uint64_t id; /* 1, 2, ... per proxy; keys toxicity draws */
    link_state state;
    link_end client, upstream;
    dir d[2];            /* indexed by toxic_stream */
    int64_t deadline_ns; /* next toxic time (chunk due, timer), 0 = none */
    bool in_ready_list;  /* queued for pumping this round */
    struct plink *ready_next;
} plink;

typedef enum pump_result { PUMP_OK, PUMP_CLOSE, PUMP_RESET } pump_result;

struct proxy {
    char name[TOXIC_NAME_MAX + 1];
    char listen_addr[64];         /* "127.0.0.1:PORT", bound; written under mu (proxy_set_listen) */
    struct sockaddr_in listen_sa; /* loop thread (and proxy_new) */
    pthread_t thread;
    bool thread_started;
    int epfd;
    link_end lend, evend, tend; /* listener, eventfd, timerfd */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* ---- under mu ---- */
    char upstream[256]; /* as given */
    struct sockaddr_storage up_sa;
    socklen_t up_len;
    bool enabled;
    int partition;            /* hold count */
    uint64_t partition_epoch; /* bumped on each 0 -> 1 */
    shared_toxic *toxics[PROXY_MAX_TOXICS];
    int ntoxics;
    uint64_t next_toxic_id;
    uint64_t gen;         /* bumped by every change */
    uint64_t applied_gen; /* last gen the loop applied */
    bool stop;
    bool loop_dead;                /* loop thread exited */
    int pending_lfd;               /* proxy_set_listen: new listener for the loop to take, or -1 */
    struct sockaddr_in pending_sa; /* its address */

    /* ---- loop thread only ---- */
    plink *links;
    uint64_t next_link_id;
    bool listening;
    bool seen_enabled;
    uint64_t seen_partition_epoch;
    uint64_t seen_gen;
    shared_toxic *snap[PROXY_MAX_TOXICS]; /* refs held */
    toxic_spec snap_spec[PROXY_MAX_TOXICS];
    int nsnap;
    struct sockaddr_storage snap_up_sa;
    socklen_t snap_up_len;
    int64_t timer_armed_ns; /* current timerfd deadline, 0 = disarmed */
    unsigned char rbuf[PROXY_READ_MAX];

    /* ---- counters (atomics) ---- */
    proxy_stats st;
};

/* ---- proxy: small helpers ---- */

static void toxic_unref(shared_toxic *t)
{
    if (t && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(t);
}

static int resolve_hostport(const char *s, const char *what, struct sockaddr_storage *sa, socklen_t *len,
                            char *err, size_t errlen)
{
    char host[256];
    int port = 0;
    int rc = cx_parse_hostport(s, what, host, sizeof host, &port, err, errlen);
    if (rc != 0)
        return rc;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int g = getaddrinfo(host, NULL, &hints, &ai);
    if (g != 0 || !ai)
        return cx_fail(err, errlen, CX_EINVAL, "%s: cannot resolve '%s': %s", what, host, gai_strerror(g));
    struct sockaddr_in sin;
    memcpy(&sin, ai->ai_addr, sizeof sin);
    freeaddrinfo(ai);
    sin.sin_port = htons((uint16_t)port);
    memset(sa, 0, sizeof *sa);
    memcpy(sa, &sin, sizeof sin);
    *len = sizeof sin;
    return CX_OK;
}

static void set_rst(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
}

static void set_nodelay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int64_t now_ns(void)
{
    return cx_mono_ns();
}

/* Register, modify or remove an fd so that epoll watches exactly `want`.
 * A watched-for-nothing fd is removed, since epoll reports HUP/ERR even
 * for an empty mask and level-triggered HUP would spin. */
static void end_watch(proxy *p, link_end *e, uint32_t want)
{
    if (e->fd < 0 || want == e->events)
        return;
    struct epoll_event ev = {.events = want, .data.ptr = e};
    if (want == 0)
        (void)epoll_ctl(p->epfd, EPOLL_CTL_DEL, e->fd, NULL);
    else if (e->events == 0)
        (void)epoll_ctl(p->epfd, EPOLL_CTL_ADD, e->fd, &ev);
    else
        (void)epoll_ctl(p->epfd, EPOLL_CTL_MOD, e->fd, &ev);
    e->events = want;
}

/* ---- link: state checks ---- */

static void assert_link_state(const plink *l)
{
#ifndef NDEBUG
    for (int i = 0; i < 2; i++) {
        const dir *d = &l->d[i];
        if (l->state == LINK_CONNECTING)
            assert(d->ninst == 0 && d->q.head == NULL && d->pipe_bytes == 0);
        if (d->mode == DIR_FAST)
            assert(d->q.head == NULL);
        else
            assert(d->pipe_bytes == 0);
    }
#else
    (void)l;
#endif
}

/* ---- link: lifecycle ---- */

static void dir_cleanup(dir *d)
{
    chunk_list_clear(&d->q);
    if (d->pipe_r >= 0)
        close(d->pipe_r);
    if (d->pipe_w >= 0)
        close(d->pipe_w);
    d->pipe_r = d->pipe_w = -1;
    d->pipe_bytes = 0;
}

/* Close both sockets (with RST when rst) and free the link. */
static void link_close(proxy *p, plink *l, bool rst)
{
    if (l->state == LINK_CLOSED)
        return;
    bool was_open = l->state == LINK_OPEN;
    end_watch(p, &l->client, 0);
    end_watch(p, &l->upstream, 0);
    if (rst) {
        set_rst(l->client.fd);
        if (l->upstream.fd >= 0)
            set_rst(l->upstream.fd);
    }
    close(l->client.fd);
    if (l->upstream.fd >= 0)
        close(l->upstream.fd);
    l->client.fd = l->upstream.fd = -1;
    dir_cleanup(&l->d[0]);
    dir_cleanup(&l->d[1]);
    l->state = LINK_CLOSED;
    if (l->prev)
        l->prev->next = l->next;
    else
        p->links = l->next;
    if (l->next)
        l->next->prev = l->prev;
    if (was_open)
        ATOMIC_SUB(p->st.conns_open, 1);
    if (!l->in_ready_list)
        free(l);
    /* else freed by the loop once it leaves the ready list */
}

static bool dir_has_applied(const dir *d)
{
    for (int i = 0; i < d->ninst; i++)
        if (d->inst[i].applied)
            return true;
    return false;
}

/* Move what sits in the splice pipe into the queue (ready now, outside the
 * chain: those bytes were in flight before the toxic arrived). */
static bool dir_pipe_to_queue(proxy *p, dir *d, int64_t now)
{
    while (d->pipe_bytes > 0) {
        size_t want = d->pipe_bytes < sizeof p->rbuf ? d->pipe_bytes : sizeof p->rbuf;
        ssize_t n = read(d->pipe_r, p->rbuf, want);
        if (n <= 0)
            return false;
        chunk *c = chunk_new(CHUNK_DATA, p->rbuf, (size_t)n, now, now);
        if (!c)
            return false;
        chunk_list_push(&d->q, c);
        d->pipe_bytes -= (size_t)n;
    }
    if (d->src_eof && !d->done) {
        chunk *c = chunk_new(CHUNK_EOF, NULL, 0, now, now);
        if (!c)
            return false;
        chunk_list_push(&d->q, c);
    }
    d->last_ready_ns = now;
    return true;
}

/* Rebuild d's chain from the loop's toxic snapshot, keeping the state of
 * instances that stay. A removed applied toxic releases the queue (its
 * delays no longer hold; Toxiproxy flushes on interrupt). */
static pump_result dir_sync(proxy *p, plink *l, dir *d, int64_t now)
{
    toxic_inst next[PROXY_MAX_TOXICS];
    int n = 0;
    for (int i = 0; i < p->nsnap; i++) {
        const toxic_spec *s = &p->snap_spec[i];
        if (s->stream != d->stream)
            continue;
        int found = -1;
        for (int j = 0; j < d->ninst; j++)
            if (d->inst[j].id == p->snap[i]->id)
                found = j;
        if (found >= 0) {
            next[n] = d->inst[found];
            if (memcmp(&next[n].spec.a, &s->a, sizeof s->a) != 0 || next[n].spec.toxicity != s->toxicity)
                toxic_inst_update(&next[n], s, now);
        } else {
            toxic_inst_init(&next[n], p->snap[i]->id, s, p->snap[i]->seed, l->id, now, &p->snap[i]->ctr);
        }
        n++;
    }
    bool removed_applied = false;
    for (int j = 0; j < d->ninst; j++) {
        bool kept = false;
        for (int i = 0; i < n; i++)
            kept = kept || next[i].id == d->inst[j].id;
        removed_applied = removed_applied || (!kept && d->inst[j].applied);
    }
    memcpy(d->inst, next, sizeof next[0] * (size_t)n);
    d->ninst = n;
    if (removed_applied) {
        for (chunk *c = d->q.head; c; c = c->next)
            if (c->ready_ns > now)
                c->ready_ns = now;
        if (d->last_ready_ns > now)
            d->last_ready_ns = now;
    }
    if (d->mode == DIR_FAST && dir_has_applied(d)) {
        if (!dir_pipe_to_queue(p, d, now))
            return PUMP_RESET;
        d->mode = DIR_QUEUED;
    }
    return PUMP_OK;
}

/* Push a freshly read chunk through the chain into the queue. */
static bool dir_ingest(dir *d, chunk *c, int64_t now)
{
    chunk_list a = {0}, b = {0};
    chunk_list_push(&a, c);
    bool ok = true;
    for (int i = 0; i < d->ninst; i++) {
        if (!d->inst[i].applied)
            continue;
        ok = toxic_inst_run(&d->inst[i], &a, &b, now) && ok;
        a = b;
        memset(&b, 0, sizeof b);
    }
    for (chunk *x; (x = chunk_list_pop(&a));) {
        if (x->ready_ns < d->last_ready_ns) /* never overtake: FIFO with monotone times */
            x->ready_ns = d->last_ready_ns;
        d->last_ready_ns = x->ready_ns;
        chunk_list_push(&d->q, x);
    }
    return ok;
}

static bool io_fatal(int e)
{
    return !(e == EAGAIN || e == EWOULDBLOCK || e == EINTR);
}

/* ---- link: data path ---- */

/* Zero-copy relay: src -> pipe -> dst with splice. Reading goes on while
 * the pipe has room, so that both sockets stay busy (pipelined); the pipe
 * (PROXY_PIPE_SIZE) bounds what is in flight. */
static pump_result dir_pump_fast(dir *d)
{
    if (d->pipe_r < 0) {
        int pfd[2];
        if (pipe2(pfd, O_NONBLOCK | O_CLOEXEC) != 0)
            return PUMP_RESET;
        d->pipe_r = pfd[0];
        d->pipe_w = pfd[1];
        /* a bigger pipe means fewer splice calls per MB; may fail above
         * /proc/sys/fs/pipe-max-size, then the default stays */
        int sz = fcntl(d->pipe_w, F_SETPIPE_SZ, PROXY_PIPE_SIZE);
        d->pipe_cap = sz > 0 ? (size_t)sz : PROXY_READ_MAX;
    }
    for (int round = 0; round < PROXY_PUMP_ROUNDS; round++) {
        bool progress = false;
        if (!d->src_eof && d->pipe_bytes < d->pipe_cap) {
            ssize_t n = splice(d->src->fd, NULL, d->pipe_w, NULL, d->pipe_cap - d->pipe_bytes,
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                d->pipe_bytes += (size_t)n;
                progress = true;
            } else if (n == 0) {
                d->src_eof = true;
                progress = true;
            } else if (io_fatal(errno)) {
                return PUMP_RESET;
            }
        }
        if (d->pipe_bytes > 0) {
            ssize_t n =
                splice(d->pipe_r, NULL, d->dst->fd, NULL, d->pipe_bytes, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                d->pipe_bytes -= (size_t)n;
                ATOMIC_ADD(*d->bytes_ctr, n);
                progress = true;
            } else if (n < 0 && io_fatal(errno)) {
                return PUMP_RESET;
            }
        }
        if (d->pipe_bytes == 0 && d->src_eof && !d->done) {
            (void)shutdown(d->dst->fd, SHUT_WR);
            d->done = true;
            break;
        }
        if (!progress)
            break;
    }
    return PUMP_OK;
}

static pump_result dir_pump_queued(proxy *p, dir *d, int64_t now)
{
    for (int round = 0; round < PROXY_PUMP_ROUNDS; round++) {
        bool progress = false;
        /* write what is due, in order */
        chunk *c;
        while ((c = d->q.head) && c->ready_ns <= now) {
            if (c->kind == CHUNK_CLOSE)
                return PUMP_CLOSE;
            if (c->kind == CHUNK_EOF) {
                if (!d->done)
                    (void)shutdown(d->dst->fd, SHUT_WR);
                d->done = true;
                free(chunk_list_pop(&d->q));
                progress = true;
                continue;
            }
            if (d->done) { /* nothing may follow EOF; drop defensively */
                free(chunk_list_pop(&d->q));
                continue;
            }
            ssize_t n = send(d->dst->fd, c->data + c->off, c->len - c->off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0) {
                if (io_fatal(errno))
                    return PUMP_RESET;
                break;
            }
            c->off += (size_t)n;
            d->q.bytes -= (size_t)n;
            ATOMIC_ADD(*d->bytes_ctr, n);
            progress = true;
            if (c->off < c->len)
                break;
            free(chunk_list_pop(&d->q));
        }
        /* read while there is room */
        if (!d->src_eof && d->q.bytes < PROXY_QUEUE_CAP) {
            ssize_t n = recv(d->src->fd, p->rbuf, sizeof p->rbuf, MSG_DONTWAIT);
            if (n > 0 || n == 0) {
                chunk *x = chunk_new(n > 0 ? CHUNK_DATA : CHUNK_EOF, p->rbuf, (size_t)n, now, now);
                if (!x)
                    return PUMP_RESET;
                if (n == 0)
                    d->src_eof = true;
                dir_ingest(d, x, now);
                progress = true;
            } else if (io_fatal(errno)) {
                return PUMP_RESET;
            }
        }
        if (!progress)
            break;
    }
    /* back to the fast path once nothing toxic is left and all is delivered */
    if (!dir_has_applied(d) && d->q.head == NULL)
        d->mode = DIR_FAST;
    return PUMP_OK;
}

/* Fire the toxic timers (timeout close, reset_peer) that are due. */
static pump_result dir_timers(dir *d, int64_t now)
{
    for (int i = 0; i < d->ninst; i++) {
        toxic_inst *ti = &d->inst[i];
        if (ti->timer != TOXIC_TIMER_NONE && ti->timer_ns <= now) {
            __atomic_fetch_add(&ti->ctr->closes, 1, __ATOMIC_RELAXED);
            ti->timer = TOXIC_TIMER_NONE;
            return ti->spec.kind->resets ? PUMP_RESET : PUMP_CLOSE;
        }
    }
    return PUMP_OK;
}

/* Fold the pending toxic timers of d into *next. */
static void dir_timers_next(const dir *d, int64_t *next)
{
    for (int i = 0; i < d->ninst; i++) {
        const toxic_inst *ti = &d->inst[i];
        if (ti->timer != TOXIC_TIMER_NONE && (*next == 0 || ti->timer_ns < *next))
            *next = ti->timer_ns;
    }
}

static bool link_on_connected(proxy *p, plink *l, int64_t now);

/* Do all the I/O a link can do now; update its epoll interest; fold its
 * next deadline into *next. The link may be freed: do not touch l after a
 * true return. */
static bool link_pump(proxy *p, plink *l, int64_t now, int64_t *next)
{
    if (l->state == LINK_CLOSED)
        return true;
    if (l->state == LINK_CONNECTING) {
        if (link_on_connected(p, l, now))
            return true;
        if (l->state != LINK_OPEN)
            return false;
    }
    int64_t link_next = 0;
    pump_result r = PUMP_OK;
    for (int i = 0; i < 2 && r == PUMP_OK; i++) {
        dir *d = &l->d[i];
        r = dir_timers(d, now);
        if (r == PUMP_OK && !d->done)
            r = d->mode == DIR_FAST ? dir_pump_fast(d) : dir_pump_queued(p, d, now);
    }
    if (r == PUMP_RESET) {
        ATOMIC_ADD(p->st.conns_reset, 1);
        link_close(p, l, true);
        return true;
    }
    if (r == PUMP_CLOSE || (l->d[0].done && l->d[1].done)) {
        link_close(p, l, false);
        return true;
    }
    assert_link_state(l);
    uint32_t want_c = 0, want_u = 0;
    for (int i = 0; i < 2; i++) {
        dir *d = &l->d[i];
        bool rd = false, wr = false;
        dir_timers_next(d, &link_next);
        if (!d->done) {
            if (d->mode == DIR_FAST) {
                rd = !d->src_eof && (d->pipe_r < 0 || d->pipe_bytes < d->pipe_cap);
                wr = d->pipe_bytes > 0; /* left over: dst was full */
            } else {
                rd = !d->src_eof && d->q.bytes < PROXY_QUEUE_CAP;
                if (d->q.head && d->q.head->ready_ns <= now)
                    wr = true; /* due but the socket was full */
                else if (d->q.head && (link_next == 0 || d->q.head->ready_ns < link_next))
                    link_next = d->q.head->ready_ns;
            }
        }
        if (d->src == &l->client) {
            want_c |= rd ? EPOLLIN : 0;
            want_u |= wr ? EPOLLOUT : 0;
        } else {
            want_u |= rd ? EPOLLIN : 0;
            want_c |= wr ? EPOLLOUT : 0;
        }
    }
    end_watch(p, &l->client, want_c);
    end_watch(p, &l->upstream, want_u);
    l->deadline_ns = link_next;
    if (link_next && (*next == 0 || link_next < *next))
        *next = link_next;
    return false;
}

static void dir_init(proxy *p, dir *d, toxic_stream s, link_end *src, link_end *dst)
{
    memset(d, 0, sizeof *d);
    d->stream = s;
    d->src = src;
    d->dst = dst;
    d->mode = DIR_FAST;
    d->pipe_r = d->pipe_w = -1;
    d->bytes_ctr = s == TOXIC_UPSTREAM ? &p->st.bytes_up : &p->st.bytes_down;
}

/* CONNECTING -> OPEN or CLOSED, once the non-blocking connect settled.
 * Returns true when the link was closed (and maybe freed). */
static bool link_on_connected(proxy *p, plink *l, int64_t now)
{
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (getsockopt(l->upstream.fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
        soerr = errno;
    if (soerr == EINPROGRESS || soerr == EALREADY)
        return false;
    if (soerr == 0) {
        /* writable means connected; a refused connect reports its error here */
        struct sockaddr_storage peer;
        socklen_t pl = sizeof peer;
        if (getpeername(l->upstream.fd, (struct sockaddr *)&peer, &pl) != 0) {
            if (errno == ENOTCONN)
                return false; /* still in progress */
            soerr = errno;
        }
    }
    if (soerr != 0) {
        cx_debug("proxy %s: upstream connect failed: %s", p->name, strerror(soerr));
        ATOMIC_ADD(p->st.upstream_errors, 1);
        ATOMIC_ADD(p->st.conns_refused, 1);
        link_close(p, l, true);
        return true;
    }
    set_nodelay(l->upstream.fd);
    l->state = LINK_OPEN;
    ATOMIC_ADD(p->st.conns_accepted, 1);
    ATOMIC_ADD(p->st.conns_open, 1);
    for (int i = 0; i < 2; i++)
        if (dir_sync(p, l, &l->d[i], now) != PUMP_OK) {
            link_close(p, l, true);
            return true;
        }
    return false;
}

/* ---- proxy: accept path ---- */

static void proxy_on_accept(proxy *p, int64_t now, int64_t *next)
{
    for (int k = 0; k < 64; k++) {
        int fd = accept4(p->lend.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE)
                cx_warn("proxy %s: accept: %s", p->name, strerror(errno));
            return;
        }
        set_nodelay(fd);
        plink *l = calloc(1, sizeof *l);
        int ufd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (!l || ufd < 0) {
            set_rst(fd);
            close(fd);
            if (ufd >= 0)
                close(ufd);
            free(l);
            ATOMIC_ADD(p->st.conns_refused, 1);
            continue;
        }
        l->id = ++p->next_link_id;
        l->state = LINK_CONNECTING;
        l->client = (link_end){.kind = END_CLIENT, .l = l, .fd = fd};
        l->upstream = (link_end){.kind = END_UPSTREAM, .l = l, .fd = ufd};
        dir_init(p, &l->d[TOXIC_UPSTREAM], TOXIC_UPSTREAM, &l->client, &l->upstream);
        dir_init(p, &l->d[TOXIC_DOWNSTREAM], TOXIC_DOWNSTREAM, &l->upstream, &l->client);
        l->next = p->links;
        if (p->links)
            p->links->prev = l;
        p->links = l;
        int rc = connect(ufd, (struct sockaddr *)&p->snap_up_sa, p->snap_up_len);
        if (rc != 0 && errno != EINPROGRESS) {
            int e = errno;
            cx_debug("proxy %s: upstream connect failed: %s", p->name, strerror(e));
            ATOMIC_ADD(p->st.upstream_errors, 1);
            ATOMIC_ADD(p->st.conns_refused, 1);
            link_close(p, l, true);
            continue;
        }
        if (rc == 0) {
            link_pump(p, l, now, next);
        } else {
            end_watch(p, &l->upstream, EPOLLOUT);
        }
    }
}

static void proxy_listen_set(proxy *p, bool on)
{
    if (on == p->listening)
        return;
    if (on) {
        if (listen(p->lend.fd, 128) != 0) {
            char ip[INET_ADDRSTRLEN] = "?";
            inet_ntop(AF_INET, &p->listen_sa.sin_addr, ip, sizeof ip);
            cx_warn("proxy %s: listen again on %s:%d failed: %s", p->name, ip, ntohs(p->listen_sa.sin_port),
                    strerror(errno));
            return;
        }
        end_watch(p, &p->lend, EPOLLIN);
    } else {
        end_watch(p, &p->lend, 0);
        /* Linux: shutdown of a listening socket stops listening (pending and
         * new connects are refused) but keeps the explicit port binding, so
         * listen() can resume on the same port. */
        (void)shutdown(p->lend.fd, SHUT_RD);
    }
    p->listening = on;
}

static void close_all_links(proxy *p, bool rst)
{
    uint64_t n = 0;
    while (p->links) {
        n++;
        link_close(p, p->links, rst);
    }
    ATOMIC_ADD(p->st.conns_dropped, n);
}

/* ---- proxy: applying API changes in the loop ---- */

static void proxy_sync(proxy *p, int64_t now)
{
    shared_toxic *old[PROXY_MAX_TOXICS];
    int nold = p->nsnap;
    memcpy(old, p->snap, sizeof old[0] * (size_t)nold);

    pthread_mutex_lock(&p->mu);
    uint64_t gen = p->gen;
    bool stop = p->stop;
    bool enabled = p->enabled;
    bool partitioned = p->partition > 0;
    uint64_t epoch = p->partition_epoch;
    p->nsnap = p->ntoxics;
    for (int i = 0; i < p->ntoxics; i++) {
        p->snap[i] = p->toxics[i];
        p->snap_spec[i] = p->toxics[i]->spec;
        __atomic_add_fetch(&p->toxics[i]->refs, 1, __ATOMIC_ACQ_REL);
    }
    p->snap_up_sa = p->up_sa;
    p->snap_up_len = p->up_len;
    int new_lfd = p->pending_lfd;
    struct sockaddr_in new_sa = p->pending_sa;
    p->pending_lfd = -1;
    pthread_mutex_unlock(&p->mu);

    if (new_lfd >= 0 && stop) {
        close(new_lfd);
    } else if (new_lfd >= 0) {
        /* Re-listen (Toxiproxy: a changed listen restarts the proxy and
         * drops its connections). The new socket already listens. */
        end_watch(p, &p->lend, 0);
        close(p->lend.fd);
        close_all_links(p, false);
        p->lend.fd = new_lfd;
        p->lend.events = 0;
        p->listen_sa = new_sa;
        p->listening = true;
        end_watch(p, &p->lend, EPOLLIN);
    }
    if (!stop) {
        if (epoch != p->seen_partition_epoch && partitioned) {
            cx_info("proxy %s: partition: dropping all links", p->name);
            close_all_links(p, true);
        }
        if (!enabled && p->seen_enabled)
            close_all_links(p, false);
        p->seen_partition_epoch = epoch;
        p->seen_enabled = enabled;
        proxy_listen_set(p, enabled && !partitioned);
        if (gen != p->seen_gen) {
            for (plink *l = p->links, *nx; l; l = nx) {
                nx = l->next;
                if (l->state != LINK_OPEN)
                    continue;
                for (int i = 0; i < 2 && l->state == LINK_OPEN; i++)
                    if (dir_sync(p, l, &l->d[i], now) != PUMP_OK)
                        link_close(p, l, true);
            }
        }
        p->seen_gen = gen;
    }
    for (int i = 0; i < nold; i++)
        toxic_unref(old[i]);

    pthread_mutex_lock(&p->mu);
    p->applied_gen = gen;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* ---- proxy: the loop ---- */

static void timer_arm(proxy *p, int64_t at_ns)
{
    if (at_ns == p->timer_armed_ns)
        return;
    struct itimerspec its = {0};
    if (at_ns > 0) {
        its.it_value.tv_sec = at_ns / 1000000000;
        its.it_value.tv_nsec = at_ns % 1000000000;
    }
    (void)timerfd_settime(p->tend.fd, TFD_TIMER_ABSTIME, &its, NULL);
    p->timer_armed_ns = at_ns;
}

static void *proxy_loop(void *arg)
{
    proxy *p = arg;
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGPIPE); /* splice to a dead peer raises it on this thread */
    pthread_sigmask(SIG_BLOCK, &ss, NULL);

    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(p->epfd, evs, 64, -1);
        if (n < 0 && errno != EINTR) {
            cx_error("proxy %s: epoll_wait: %s", p->name, strerror(errno));
            break;
        }
        int64_t now = now_ns();
        int64_t next = 0;
        bool synced = false, accept_ready = false;
        plink *ready = NULL;
        for (int i = 0; i < n; i++) {
            link_end *e = evs[i].data.ptr;
            if (e->kind == END_EVENT || e->kind == END_TIMER) {
                uint64_t v;
                (void)!read(e->fd, &v, sizeof v);
                synced = synced || e->kind == END_EVENT;
            } else if (e->kind == END_LISTEN) {
                accept_ready = true;
            } else if (!e->l->in_ready_list) {
                e->l->in_ready_list = true;
                e->l->ready_next = ready;
                ready = e->l;
            }
        }
        bool stop = false;
        if (synced) {
            proxy_sync(p, now);
            pthread_mutex_lock(&p->mu);
            stop = p->stop;
            pthread_mutex_unlock(&p->mu);
        }
        if (accept_ready && p->listening && !stop)
            proxy_on_accept(p, now, &next);
        /* pump the links that had events; free those closed meanwhile */
        for (plink *l = ready, *nx; l; l = nx) {
            nx = l->ready_next;
            l->in_ready_list = false;
            if (l->state == LINK_CLOSED)
                free(l);
            else if (!stop)
                link_pump(p, l, now, &next);
        }
        if (stop)
            break; /* open links are closed by proxy_free */
        /* links whose toxic time came, or all after a config change */
        for (plink *l = p->links, *nx; l; l = nx) {
            nx = l->next;
            if (synced || (l->deadline_ns && l->deadline_ns <= now))
                link_pump(p, l, now, &next);
        }
        next = 0;
        for (plink *l = p->links; l; l = l->next)
            if (l->deadline_ns && (next == 0 || l->deadline_ns < next))
                next = l->deadline_ns;
        timer_arm(p, next);
    }
    pthread_mutex_lock(&p->mu);
    p->loop_dead = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Bump the generation, wake the loop, and wait until it applied it.
 * Called with p->mu held; returns with it held. */
static void proxy_commit_locked(proxy *p)
{
    uint64_t my = ++p->gen;
    uint64_t one = 1;
    (void)!write(p->evend.fd, &one, sizeof one);
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += PROXY_SYNC_WAIT_MS / 1000;
    while (p->applied_gen < my && !p->loop_dead) {
        if (pthread_cond_timedwait(&p->cv, &p->mu, &dl) == ETIMEDOUT) {
            cx_warn("proxy %s: loop did not apply a change within %d ms", p->name, PROXY_SYNC_WAIT_MS);
            break;
        }
    }
}

/* ---- proxy: lifecycle ---- */

static int name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > TOXIC_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

/* Bind with an explicit port (so that shutdown + listen keeps it): for
 * port 0, learn an ephemeral port first, then bind it explicitly. */
static int bind_listener(struct sockaddr_in *sa, char *err, size_t errlen)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        struct sockaddr_in want = *sa;
        if (want.sin_port == 0) {
            int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (t < 0)
                return cx_fail(err, errlen, CX_ESYS, "socket: %s", strerror(errno));
            socklen_t l = sizeof want;
            if (bind(t, (struct sockaddr *)&want, sizeof want) != 0 ||
                getsockname(t, (struct sockaddr *)&want, &l) != 0) {
                int e = errno;
                close(t);
                return cx_fail(err, errlen, CX_ESYS, "bind: %s", strerror(e));
            }
            close(t);
        }
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return cx_fail(err, errlen, CX_ESYS, "socket: %s", strerror(errno));
        int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&want, sizeof want) == 0 && listen(fd, 128) == 0) {
            *sa = want;
            return fd;
        }
        int e = errno;
        close(fd);
        if (sa->sin_port != 0 || e != EADDRINUSE)
            return cx_fail(err, errlen, CX_ESYS, "bind %s:%d: %s", inet_ntoa(want.sin_addr),
                           ntohs(want.sin_port), strerror(e));
        /* another socket took the ephemeral port in between: try again */
    }
    return cx_fail(err, errlen, CX_ESYS, "bind: no free ephemeral port");
}

proxy *proxy_new(const char *name, const char *listen_s, const char *upstream, char *err, size_t errlen)
{
    if (!name_ok(name)) {
        cx_fail(err, errlen, CX_EINVAL, "proxy name '%s': must be 1..%d characters of [A-Za-z0-9_.-]",
                name ? name : "", TOXIC_NAME_MAX);
        return NULL;
    }
    if (!upstream || strlen(upstream) >= 256) {
        cx_fail(err, errlen, CX_EINVAL, "proxy %s: upstream: missing or too long", name);
        return NULL;
    }
    proxy *p = calloc(1, sizeof *p);
    if (!p) {
        cx_fail(err, errlen, CX_ENOMEM, "proxy: out of memory");
        return NULL;
    }
    snprintf(p->name, sizeof p->name, "%s", name);
    p->epfd = p->lend.fd = p->evend.fd = p->tend.fd = -1;
    p->pending_lfd = -1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    p->enabled = true;
    p->seen_enabled = true;
    p->next_toxic_id = 1;

    struct sockaddr_storage lss;
    socklen_t lsl;
    if (resolve_hostport(listen_s ? listen_s : "", "listen", &lss, &lsl, err, errlen) != 0)
        goto fail;
    if (resolve_hostport(upstream, "upstream", &p->up_sa, &p->up_len, err, errlen) != 0)
        goto fail;
    snprintf(p->upstream, sizeof p->upstream, "%s", upstream);
    p->snap_up_sa = p->up_sa;
    p->snap_up_len = p->up_len;
    memcpy(&p->listen_sa, &lss, sizeof p->listen_sa);

    int lfd = bind_listener(&p->listen_sa, err, errlen);
    if (lfd < 0)
        goto fail;
    p->lend = (link_end){.kind = END_LISTEN, .fd = lfd};
    snprintf(p->listen_addr, sizeof p->listen_addr, "%s:%d", inet_ntoa(p->listen_sa.sin_addr),
             ntohs(p->listen_sa.sin_port));
    p->listening = true;

    p->epfd = epoll_create1(EPOLL_CLOEXEC);
    p->evend = (link_end){.kind = END_EVENT, .fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
    p->tend =
        (link_end){.kind = END_TIMER, .fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)};
    if (p->epfd < 0 || p->evend.fd < 0 || p->tend.fd < 0) {
        cx_fail(err, errlen, CX_ESYS, "proxy %s: epoll/eventfd/timerfd: %s", name, strerror(errno));
        goto fail;
    }
    end_watch(p, &p->lend, EPOLLIN);
    end_watch(p, &p->evend, EPOLLIN);
    end_watch(p, &p->tend, EPOLLIN);
    if (pthread_create(&p->thread, NULL, proxy_loop, p) != 0) {
        cx_fail(err, errlen, CX_ESYS, "proxy %s: pthread_create failed", name);
        goto fail;
    }
    p->thread_started = true;
    cx_info("proxy %s: listening on %s -> %s", p->name, p->listen_addr, p->upstream);
    return p;
fail:
    proxy_free(p);
    return NULL;
}

void proxy_free(proxy *p)
{
    if (!p)
        return;
    if (p->thread_started) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        proxy_commit_locked(p);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->thread, NULL);
    }
    while (p->links)
        link_close(p, p->links, false);
    for (int i = 0; i < p->nsnap; i++)
        toxic_unref(p->snap[i]);
    for (int i = 0; i < p->ntoxics; i++)
        toxic_unref(p->toxics[i]);
    if (p->lend.fd >= 0)
        close(p->lend.fd);
    if (p->pending_lfd >= 0)
        close(p->pending_lfd);
    if (p->evend.fd >= 0)
        close(p->evend.fd);
    if (p->tend.fd >= 0)
        close(p->tend.fd);
    if (p->epfd >= 0)
        close(p->epfd);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

const char *proxy_name(const proxy *p)
{
    return p->name;
}

const char *proxy_listen_addr(const proxy *p)
{
    return p->listen_addr;
}

void proxy_upstream(proxy *p, char *buf, size_t len)
{
    pthread_mutex_lock(&p->mu);
    snprintf(buf, len, "%s", p->upstream);
    pthread_mutex_unlock(&p->mu);
}

void proxy_listen(proxy *p, char *buf, size_t len)
{
    pthread_mutex_lock(&p->mu);
    snprintf(buf, len, "%s", p->listen_addr);
    pthread_mutex_unlock(&p->mu);
}

int proxy_set_listen(proxy *p, const char *listen_s, char *err, size_t errlen)
{
    struct sockaddr_storage ss = {0};
    socklen_t sl = 0;
    int rc = resolve_hostport(listen_s ? listen_s : "", "listen", &ss, &sl, err, errlen);
    if (rc != 0)
        return rc;
    struct sockaddr_in sa;
    memcpy(&sa, &ss, sizeof sa);
    int fd = bind_listener(&sa, err, errlen);
    if (fd < 0)
        return fd;
    pthread_mutex_lock(&p->mu);
    if (p->pending_lfd >= 0)
        close(p->pending_lfd);
    p->pending_lfd = fd;
    p->pending_sa = sa;
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
    snprintf(p->listen_addr, sizeof p->listen_addr, "%s:%d", ip, ntohs(sa.sin_port));
    cx_info("proxy %s: listening on %s now", p->name, p->listen_addr);
    proxy_commit_locked(p);
    pthread_mutex_unlock(&p->mu);
    return CX_OK;
}

/* ---- proxy: switches ---- */

int proxy_set_enabled(proxy *p, bool enabled, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    pthread_mutex_lock(&p->mu);
    if (p->enabled != enabled) {
        p->enabled = enabled;
        cx_info("proxy %s: %s", p->name, enabled ? "enabled" : "disabled");
        proxy_commit_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
    return CX_OK;
}

bool proxy_enabled(proxy *p)
{
    pthread_mutex_lock(&p->mu);
    bool e = p->enabled;
    pthread_mutex_unlock(&p->mu);
    return e;
}

int proxy_set_upstream(proxy *p, const char *upstream, char *err, size_t errlen)
{
    struct sockaddr_storage sa;
    socklen_t sl;
    if (!upstream || strlen(upstream) >= sizeof p->upstream)
        return cx_fail(err, errlen, CX_EINVAL, "upstream: missing or too long");
    int rc = resolve_hostport(upstream, "upstream", &sa, &sl, err, errlen);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&p->mu);
    p->up_sa = sa;
    p->up_len = sl;
    snprintf(p->upstream, sizeof p->upstream, "%s", upstream);
    proxy_commit_locked(p);
    pthread_mutex_unlock(&p->mu);
    return CX_OK;
}

void proxy_partition_hold(proxy *p)
{
    pthread_mutex_lock(&p->mu);
    if (p->partition++ == 0) {
        p->partition_epoch++;
        proxy_commit_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
}

void proxy_partition_release(proxy *p)
{
    pthread_mutex_lock(&p->mu);
    if (p->partition > 0 && --p->partition == 0) {
        cx_info("proxy %s: partition lifted", p->name);
        proxy_commit_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
}

bool proxy_partitioned(proxy *p)
{
    pthread_mutex_lock(&p->mu);
    bool on = p->partition > 0;
    pthread_mutex_unlock(&p->mu);
    return on;
}

void proxy_reset(proxy *p)
{
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->ntoxics; i++)
        toxic_unref(p->toxics[i]);
    p->ntoxics = 0;
    p->enabled = true;
    proxy_commit_locked(p);
    pthread_mutex_unlock(&p->mu);
}

/* ---- proxy: toxics ---- */

int proxy_toxic_validate(json_t *toxic, char *err, size_t errlen)
{
    toxic_spec s;
    return toxic_spec_parse(toxic, &s, err, errlen);
}

static int toxic_index_locked(proxy *p, const char *name)
{
    for (int i = 0; i < p->ntoxics; i++)
        if (strcmp(p->toxics[i]->spec.name, name) == 0)
            return i;
    return -1;
}

int proxy_toxic_add(proxy *p, json_t *toxic, uint64_t seed, json_t **out, char *err, size_t errlen)
{
    toxic_spec s;
    int rc = toxic_spec_parse(toxic, &s, err, errlen);
    if (rc != 0)
        return rc;
    shared_toxic *t = calloc(1, sizeof *t);
    if (!t)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    t->spec = s;
    t->seed = seed;
    t->refs = 1;
    pthread_mutex_lock(&p->mu);
    if (toxic_index_locked(p, s.name) >= 0) {
        pthread_mutex_unlock(&p->mu);
        free(t);
        return cx_fail(err, errlen, CX_ECONFLICT, "toxic %s already exists", s.name);
    }
    if (p->ntoxics >= PROXY_MAX_TOXICS) {
        pthread_mutex_unlock(&p->mu);
        free(t);
        return cx_fail(err, errlen, CX_ETOOBIG, "proxy %s: at most %d toxics", p->name, PROXY_MAX_TOXICS);
    }
    t->id = p->next_toxic_id++;
    p->toxics[p->ntoxics++] = t;
    cx_info("proxy %s: toxic added name=%s type=%s stream=%s toxicity=%g", p->name, s.name, s.kind->name,
            toxic_stream_name(s.stream), s.toxicity);
    proxy_commit_locked(p);
    pthread_mutex_unlock(&p->mu);
    if (out)
        *out = toxic_spec_json(&s);
    return CX_OK;
}

int proxy_toxic_update(proxy *p, const char *name, json_t *body, json_t **out, char *err, size_t errlen)
{
    pthread_mutex_lock(&p->mu);
    int i = name ? toxic_index_locked(p, name) : -1;
    if (i < 0) {
        pthread_mutex_unlock(&p->mu);
        return cx_fail(err, errlen, CX_ENOTFOUND, "toxic not found: %s", name ? name : "");
    }
    toxic_spec s = p->toxics[i]->spec;
    int rc = toxic_spec_update(&s, body, err, errlen);
    if (rc == 0) {
        p->toxics[i]->spec = s;
        proxy_commit_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
    if (rc == 0 && out)
        *out = toxic_spec_json(&s);
    return rc;
}

int proxy_toxic_remove(proxy *p, const char *name, char *err, size_t errlen)
{
    pthread_mutex_lock(&p->mu);
    int i = name ? toxic_index_locked(p, name) : -1;
    if (i < 0) {
        pthread_mutex_unlock(&p->mu);
        return cx_fail(err, errlen, CX_ENOTFOUND, "toxic not found: %s", name ? name : "");
    }
    shared_toxic *t = p->toxics[i];
    memmove(&p->toxics[i], &p->toxics[i + 1], sizeof p->toxics[0] * (size_t)(p->ntoxics - i - 1));
    p->ntoxics--;
    cx_info("proxy %s: toxic removed name=%s", p->name, name);
    proxy_commit_locked(p);
    pthread_mutex_unlock(&p->mu);
    toxic_unref(t);
    return CX_OK;
}

json_t *proxy_toxic_json(proxy *p, const char *name)
{
    json_t *j = NULL;
    pthread_mutex_lock(&p->mu);
    int i = name ? toxic_index_locked(p, name) : -1;
    if (i >= 0)
        j = toxic_spec_json(&p->toxics[i]->spec);
    pthread_mutex_unlock(&p->mu);
    return j;
}

json_t *proxy_toxics_json(proxy *p)
{
    json_t *a = json_array();
    pthread_mutex_lock(&p->mu);
    for (int i = 0; a && i < p->ntoxics; i++)
        json_array_append_new(a, toxic_spec_json(&p->toxics[i]->spec));
    pthread_mutex_unlock(&p->mu);
    return a;
}

json_t *proxy_json(proxy *p)
{
    json_t *toxics = proxy_toxics_json(p);
    char up[256], lis[64];
    proxy_upstream(p, up, sizeof up);
    proxy_listen(p, lis, sizeof lis);
    return json_pack("{s:s, s:s, s:s, s:b, s:o*}", "name", p->name, "listen", lis, "upstream", up, "enabled",
                     proxy_enabled(p), "toxics", toxics);
}

json_t *proxy_toxic_lenient(json_t *body, const char *type, json_t *ignored)
{
    if (!json_is_object(body))
        return json_incref(body);
    json_t *out = json_object();
    if (!out)
        return NULL;
    static const char *const create_keys[] = {"name", "type", "stream", "toxicity", "attributes", NULL};
    static const char *const update_keys[] = {"toxicity", "attributes", NULL};
    const char *const *keys = type ? update_keys : create_keys;
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        int known = 0;
        for (const char *const *k = keys; *k; k++)
            known |= strcmp(*k, key) == 0;
        if (known && strcmp(key, "attributes") != 0)
            json_object_set(out, key, v);
        else if (!known && ignored)
            json_array_append_new(ignored, json_string(key));
    }
    json_t *attrs = json_object_get(body, "attributes");
    const toxic_kind *t = toxic_kind_find(type ? type : json_string_value(json_object_get(body, "type")));
    if (attrs && (!t || !json_is_object(attrs))) {
        json_object_set(out, "attributes", attrs); /* the strict check names what is wrong */
    } else if (attrs) {
        json_t *kept = json_object();
        json_object_foreach(attrs, key, v)
        {
            if (toxic_attr_known(t, key)) {
                json_object_set(kept, key, v);
            } else if (ignored) {
                char path[300];
                snprintf(path, sizeof path, "attributes.%s", key);
                json_array_append_new(ignored, json_string(path));
            }
        }
        json_object_set_new(out, "attributes", kept);
    }
    return out;
}

/* ---- proxy: counters ---- */

void proxy_stats_get(proxy *p, proxy_stats *s)
{
    s->bytes_up = ATOMIC_GET(p->st.bytes_up);
    s->bytes_down = ATOMIC_GET(p->st.bytes_down);
    s->conns_accepted = ATOMIC_GET(p->st.conns_accepted);
    s->conns_open = ATOMIC_GET(p->st.conns_open);
    s->conns_refused = ATOMIC_GET(p->st.conns_refused);
    s->conns_dropped = ATOMIC_GET(p->st.conns_dropped);
    s->conns_reset = ATOMIC_GET(p->st.conns_reset);
    s->upstream_errors = ATOMIC_GET(p->st.upstream_errors);
}

static void counters_export(toxic_counters *c, proxy_toxic_stats *s)
{
    s->links_applied = ATOMIC_GET(c->links_applied);
    s->links_skipped = ATOMIC_GET(c->links_skipped);
    s->bytes = ATOMIC_GET(c->bytes);
    s->chunks = ATOMIC_GET(c->chunks);
    s->delayed_ms = ATOMIC_GET(c->delayed_ns) / 1000000;
    s->bytes_dropped = ATOMIC_GET(c->bytes_dropped);
    s->bits_flipped = ATOMIC_GET(c->bits_flipped);
    s->closes = ATOMIC_GET(c->closes);
}

int proxy_toxic_stats_get(proxy *p, const char *name, proxy_toxic_stats *s)
{
    pthread_mutex_lock(&p->mu);
    int i = name ? toxic_index_locked(p, name) : -1;
    if (i >= 0)
        counters_export(&p->toxics[i]->ctr, s);
    pthread_mutex_unlock(&p->mu);
    return i >= 0 ? CX_OK : CX_ENOTFOUND;
}

json_t *proxy_stats_json(proxy *p)
{
    proxy_stats s;
    proxy_stats_get(p, &s);
    json_t *toxics = json_object();
    pthread_mutex_lock(&p->mu);
    for (int i = 0; toxics && i < p->ntoxics; i++) {
        proxy_toxic_stats ts;
        counters_export(&p->toxics[i]->ctr, &ts);
        json_object_set_new(toxics, p->toxics[i]->spec.name,
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "links_applied",
                                      (json_int_t)ts.links_applied, "links_skipped",
                                      (json_int_t)ts.links_skipped, "bytes", (json_int_t)ts.bytes, "chunks",
                                      (json_int_t)ts.chunks, "delayed_ms", (json_int_t)ts.delayed_ms,
                                      "bytes_dropped", (json_int_t)ts.bytes_dropped, "bits_flipped",
                                      (json_int_t)ts.bits_flipped, "closes", (json_int_t)ts.closes));
    }
    bool partitioned = p->partition > 0;
    bool enabled = p->enabled;
    pthread_mutex_unlock(&p->mu);
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:b, s:o*}", "bytes_up",
                     (json_int_t)s.bytes_up, "bytes_down", (json_int_t)s.bytes_down, "conns_accepted",
                     (json_int_t)s.conns_accepted, "conns_open", (json_int_t)s.conns_open, "conns_refused",
                     (json_int_t)s.conns_refused, "conns_dropped", (json_int_t)s.conns_dropped, "conns_reset",
                     (json_int_t)s.conns_reset, "upstream_errors", (json_int_t)s.upstream_errors, "enabled",
                     enabled, "partitioned", partitioned, "toxics", toxics);
}
