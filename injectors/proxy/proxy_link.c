/* proxy_link.c - the proxy's links: accept, upstream connect, the data
 * path of both directions, close. Loop thread only (proxy_internal.h).
 *
 * A link is one accepted client plus its upstream connection:
 *
 *          accept (proxy_on_accept)
 *              │ no fresh answer for the upstream's name (proxy_resolve_link)
 *              ▼
 *         RESOLVING ── the name did not resolve ──────────────┐
 *              │ its lookup answered (proxy_link_pump)        │
 *              │ (or a fresh answer at accept)                │
 *              │ link_dial: connect(next address) non-blocking│
 *              ▼                                              ▼
 *       ┌─ CONNECTING ── no address left (link_refused) ───► REFUSED: client got a FIN
 *       │      │ connected (link_on_connected; one that       │ (as Toxiproxy), its input is
 *       │      │ failed dials the next address: link_dial)    │
 *       │      │ toxic chains built                           │ discarded (conns_refused)
 *       │      │                       client EOF or error, or PROXY_REFUSED_LINGER_MS
 *       │      │                       (link_refused_pump) ──► CLOSED
 *       │      ▼
 *       │    OPEN  each direction independently:
 *       │      │     FAST ──(chain gets an applied toxic: dir_sync)──► QUEUED
 *       │      │      ▲  (pipe contents moved to the queue first)         │
 *       │      │      └──(no applied toxic, queue empty: dir_pump_queued)┘
 *       │      │     src EOF → EOF delivered → shutdown(dst, SHUT_WR): dir done
 *       │      │ both directions done (proxy_link_pump)
 *       │      ▼
 *       └──► CLOSED  also from OPEN on: I/O error (RST both), toxic close
 *                    (timeout/limit_data: FIN), reset_peer (RST), partition
 *                    (RST), disable (FIN), proxy_free (proxy_link_close)
 *
 * Invariants (assert_link_state): RESOLVING and CONNECTING links have no
 * chains and move no data; a RESOLVING link has no upstream socket; a FAST direction has an empty queue; a QUEUED direction has an
 * empty pipe; a done direction never writes again.
 */
#include "injectors/proxy/proxy_internal.h"

#include "common/log.h"
#include "common/netaddr.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

typedef enum pump_result { PUMP_OK, PUMP_CLOSE, PUMP_RESET } pump_result;

/* ---- link: socket options ---- */

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

/* ---- link: state checks ---- */

static void assert_link_state(const plink *l)
{
#ifndef NDEBUG
    assert(l->state != LINK_RESOLVING || l->upstream.fd < 0);
    for (int i = 0; i < 2; i++) {
        const dir *d = &l->d[i];
        if (l->state == LINK_CONNECTING || l->state == LINK_RESOLVING)
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
void proxy_link_close(proxy *p, plink *l, bool rst)
{
    if (l->state == LINK_CLOSED)
        return;
    bool was_open = l->state == LINK_OPEN;
    proxy_end_watch(p, &l->client, 0);
    proxy_end_watch(p, &l->upstream, 0);
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

/* The upstream refused (or could not be dialled, or its name did not
 * resolve): CONNECTING or RESOLVING -> REFUSED.
 * The client gets a FIN, as Toxiproxy closes the accepted connection, not
 * a reset: closing a socket while the client's bytes are unread, or
 * before the client stopped sending, would make the kernel answer RST, so
 * the link stays until the client closes (link_refused_pump). */
static void link_refused(proxy *p, plink *l, int64_t now)
{
    ATOMIC_ADD(p->st.upstream_errors, 1);
    ATOMIC_ADD(p->st.conns_refused, 1);
    if (l->upstream.fd >= 0) {
        proxy_end_watch(p, &l->upstream, 0);
        close(l->upstream.fd);
        l->upstream.fd = -1;
    }
    (void)shutdown(l->client.fd, SHUT_WR);
    l->state = LINK_REFUSED;
    l->deadline_ns = now + (int64_t)PROXY_REFUSED_LINGER_MS * 1000000;
}

/* REFUSED: discard what the client sends; CLOSED (FIN) at its EOF, an
 * error or the linger deadline. true when the link was closed. */
static bool link_refused_pump(proxy *p, plink *l, int64_t now, int64_t *next)
{
    bool end = now >= l->deadline_ns;
    for (int i = 0; i < PROXY_PUMP_ROUNDS && !end; i++) {
        ssize_t n = recv(l->client.fd, p->rbuf, sizeof p->rbuf, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n < 0 && errno == EINTR)
            continue;
        end = n <= 0;
    }
    if (end) {
        proxy_link_close(p, l, false);
        return true;
    }
    proxy_end_watch(p, &l->client, EPOLLIN);
    if (*next == 0 || l->deadline_ns < *next)
        *next = l->deadline_ns;
    return false;
}

/* RESOLVING or CONNECTING -> CONNECTING to the next of l->addrs (in
 * getaddrinfo's order), or REFUSED when none is left (none at all: the
 * name did not resolve). */
static void link_dial(proxy *p, plink *l, int64_t now)
{
    if (l->upstream.fd >= 0) { /* the previous address failed */
        proxy_end_watch(p, &l->upstream, 0);
        close(l->upstream.fd);
        l->upstream.fd = -1;
    }
    while (l->next_addr < l->addrs.n) {
        int i = l->next_addr++;
        const struct sockaddr *sa = (const struct sockaddr *)&l->addrs.sa[i];
        int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            cx_debug("proxy %s: upstream socket: %s", p->name, strerror(errno));
            continue;
        }
        if (connect(fd, sa, l->addrs.len[i]) == 0 || errno == EINPROGRESS) {
            l->upstream.fd = fd;
            l->upstream.events = 0;
            l->state = LINK_CONNECTING;
            proxy_end_watch(p, &l->upstream, EPOLLOUT); /* writable: settled (link_on_connected) */
            return;
        }
        char a[64];
        cx_addr_format(sa, a, sizeof a);
        cx_debug("proxy %s: upstream connect to %s failed: %s", p->name, a, strerror(errno));
        close(fd);
    }
    link_refused(p, l, now);
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
bool proxy_link_pump(proxy *p, plink *l, int64_t now, int64_t *next)
{
    if (l->state == LINK_CLOSED)
        return true;
    if (l->state == LINK_RESOLVING) {
        if (l->res_seq > p->snap_res_done)
            return false; /* its lookup has not answered yet */
        l->addrs = p->snap_addrs;
        l->next_addr = 0;
        link_dial(p, l, now);
    }
    if (l->state == LINK_CONNECTING && link_on_connected(p, l, now))
        return true;
    if (l->state == LINK_REFUSED)
        return link_refused_pump(p, l, now, next);
    if (l->state != LINK_OPEN)
        return false;
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
        proxy_link_close(p, l, true);
        return true;
    }
    if (r == PUMP_CLOSE || (l->d[0].done && l->d[1].done)) {
        proxy_link_close(p, l, false);
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
    proxy_end_watch(p, &l->client, want_c);
    proxy_end_watch(p, &l->upstream, want_u);
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

/* CONNECTING -> OPEN, REFUSED or CLOSED, once the non-blocking connect
 * settled. Returns true when the link was closed (and maybe freed). */
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
        char a[64];
        cx_addr_format((const struct sockaddr *)&l->addrs.sa[l->next_addr - 1], a, sizeof a);
        cx_debug("proxy %s: upstream connect to %s failed: %s", p->name, a, strerror(soerr));
        link_dial(p, l, now); /* the next address, or REFUSED */
        return false;
    }
    set_nodelay(l->upstream.fd);
    l->state = LINK_OPEN;
    ATOMIC_ADD(p->st.conns_accepted, 1);
    ATOMIC_ADD(p->st.conns_open, 1);
    for (int i = 0; i < 2; i++)
        if (dir_sync(p, l, &l->d[i], now) != PUMP_OK) {
            proxy_link_close(p, l, true);
            return true;
        }
    return false;
}

/* ---- link: accept path ---- */

void proxy_on_accept(proxy *p, int64_t now, int64_t *next)
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
        if (!l) {
            set_rst(fd);
            close(fd);
            ATOMIC_ADD(p->st.conns_refused, 1);
            continue;
        }
        l->id = ++p->next_link_id;
        l->state = LINK_RESOLVING;
        l->client = (link_end){.kind = END_CLIENT, .l = l, .fd = fd};
        l->upstream = (link_end){.kind = END_UPSTREAM, .l = l, .fd = -1};
        dir_init(p, &l->d[TOXIC_UPSTREAM], TOXIC_UPSTREAM, &l->client, &l->upstream);
        dir_init(p, &l->d[TOXIC_DOWNSTREAM], TOXIC_DOWNSTREAM, &l->upstream, &l->client);
        l->next = p->links;
        if (p->links)
            p->links->prev = l;
        p->links = l;
        if (!proxy_resolve_link(p, l, now))
            continue; /* RESOLVING until its lookup answers (proxy_link_pump) */
        link_dial(p, l, now);
        if (l->state == LINK_REFUSED)
            proxy_link_pump(p, l, now, next);
    }
}

void proxy_close_all_links(proxy *p, bool rst)
{
    uint64_t n = 0;
    while (p->links) {
        n++;
        proxy_link_close(p, p->links, rst);
    }
    ATOMIC_ADD(p->st.conns_dropped, n);
}

/* ---- link: applying a new toxic snapshot ---- */

void proxy_links_resync(proxy *p, int64_t now)
{
    for (plink *l = p->links, *nx; l; l = nx) {
        nx = l->next;
        if (l->state != LINK_OPEN)
            continue;
        for (int i = 0; i < 2 && l->state == LINK_OPEN; i++)
            if (dir_sync(p, l, &l->d[i], now) != PUMP_OK)
                proxy_link_close(p, l, true);
    }
}
