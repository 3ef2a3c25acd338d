/* proxy_loop.c - the proxy's loop thread: one epoll set (listener,
 * eventfd, timerfd, every link's sockets), the timer at the earliest link
 * deadline, and the hand-over of API changes: proxy_commit_locked (API
 * side) bumps the generation and waits; proxy_sync (loop side) snapshots
 * the configuration under the lock and applies it (re-listen, partition,
 * enabled, new toxic chains). See proxy_internal.h for who owns what.
 */
#include "injectors/proxy/proxy_internal.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* ---- loop: epoll interest and the listener ---- */

static int64_t now_ns(void)
{
    return cx_mono_ns();
}

/* Register, modify or remove an fd so that epoll watches exactly `want`.
 * A watched-for-nothing fd is removed, since epoll reports HUP/ERR even
 * for an empty mask and level-triggered HUP would spin. */
void proxy_end_watch(proxy *p, link_end *e, uint32_t want)
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

/* Listen or stop listening (refusing new clients), keeping the port. */
static void proxy_listen_set(proxy *p, bool on)
{
    if (on == p->listening)
        return;
    if (on) {
        if (listen(p->lend.fd, 128) != 0) {
            char a[64];
            cx_addr_format((struct sockaddr *)&p->listen_sa, a, sizeof a);
            cx_warn("proxy %s: listen again on %s failed: %s", p->name, a, strerror(errno));
            return;
        }
        proxy_end_watch(p, &p->lend, EPOLLIN);
    } else {
        proxy_end_watch(p, &p->lend, 0);
        /* Linux: shutdown of a listening socket stops listening (pending and
         * new connects are refused) but keeps the explicit port binding, so
         * listen() can resume on the same port. */
        (void)shutdown(p->lend.fd, SHUT_RD);
    }
    p->listening = on;
}

/* ---- loop: applying API changes ---- */

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
    int new_lfd = p->pending_lfd;
    struct sockaddr_storage new_sa = p->pending_sa;
    p->pending_lfd = -1;
    pthread_mutex_unlock(&p->mu);
    proxy_resolve_sync(p); /* a lookup answered, or the upstream changed */

    if (new_lfd >= 0 && stop) {
        close(new_lfd);
    } else if (new_lfd >= 0) {
        /* Re-listen (Toxiproxy: a changed listen restarts the proxy and
         * drops its connections). The new socket already listens. */
        proxy_end_watch(p, &p->lend, 0);
        close(p->lend.fd);
        proxy_close_all_links(p, false);
        p->lend.fd = new_lfd;
        p->lend.events = 0;
        p->listen_sa = new_sa;
        p->listening = true;
        proxy_end_watch(p, &p->lend, EPOLLIN);
    }
    if (!stop) {
        if (epoch != p->seen_partition_epoch && partitioned) {
            cx_info("proxy %s: partition: dropping all links", p->name);
            proxy_close_all_links(p, true);
        }
        if (!enabled && p->seen_enabled)
            proxy_close_all_links(p, false);
        p->seen_partition_epoch = epoch;
        p->seen_enabled = enabled;
        proxy_listen_set(p, enabled && !partitioned);
        if (gen != p->seen_gen)
            proxy_links_resync(p, now);
        p->seen_gen = gen;
    }
    for (int i = 0; i < nold; i++)
        shared_toxic_unref(old[i]);

    pthread_mutex_lock(&p->mu);
    p->applied_gen = gen;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* ---- loop: the thread ---- */

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

void *proxy_loop_main(void *arg)
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
                proxy_link_pump(p, l, now, &next);
        }
        if (stop)
            break; /* open links are closed by proxy_free */
        /* links whose toxic time came, or all after a config change */
        for (plink *l = p->links, *nx; l; l = nx) {
            nx = l->next;
            if (synced || (l->deadline_ns && l->deadline_ns <= now))
                proxy_link_pump(p, l, now, &next);
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

/* ---- loop: the API side of a change ---- */

void proxy_commit_locked(proxy *p)
{
    uint64_t my = ++p->gen;
    uint64_t one = 1;
    (void)!write(p->evend.fd, &one, sizeof one);
    int64_t deadline_ms = cx_mono_ms() + PROXY_SYNC_WAIT_MS;
    while (p->applied_gen < my && !p->loop_dead) {
        if (cx_cond_wait_until_ms(&p->cv, &p->mu, deadline_ms) == CX_ETIMEDOUT) {
            cx_warn("proxy %s: loop did not apply a change within %d ms", p->name, PROXY_SYNC_WAIT_MS);
            break;
        }
    }
}
