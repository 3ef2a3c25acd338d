/* proxy.c - the TCP proxy's lifecycle and switches: proxy_new binds the
 * listener and starts the loop thread, proxy_free stops and frees it; the
 * addresses, enabled, upstream, re-listen, partition and reset calls
 * change the configuration under p->mu and hand it to the loop with
 * proxy_commit_locked (proxy_loop.c). The toxic API and the counters are
 * in proxy_toxics.c, the links in proxy_link.c; proxy_internal.h says
 * how the four fit.
 */
#include "injectors/proxy/proxy_internal.h"

#include "common/err.h"
#include "common/log.h"
#include "common/netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* ---- proxy: addresses ---- */

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

static uint16_t sa_port(const struct sockaddr_storage *ss)
{
    return ntohs(ss->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)(const void *)ss)->sin6_port
                                           : ((const struct sockaddr_in *)(const void *)ss)->sin_port);
}

/* Bind with an explicit port (so that shutdown + listen keeps it): for
 * port 0, learn an ephemeral port first, then bind it explicitly. An IPv6
 * wildcard ("[::]:PORT") takes IPv4 clients too (IPV6_V6ONLY off); any
 * other IPv6 address only its own. */
static int bind_listener(struct sockaddr_storage *sa, socklen_t len, char *err, size_t errlen)
{
    int family = sa->ss_family;
    int v6only = !(family == AF_INET6 &&
                   IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr));
    for (int attempt = 0; attempt < 8; attempt++) {
        struct sockaddr_storage want = *sa;
        if (sa_port(&want) == 0) {
            int t = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (t < 0)
                return cx_fail(err, errlen, CX_ESYS, "socket: %s", strerror(errno));
            if (family == AF_INET6)
                (void)setsockopt(t, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
            socklen_t l = sizeof want;
            if (bind(t, (struct sockaddr *)&want, len) != 0 ||
                getsockname(t, (struct sockaddr *)&want, &l) != 0) {
                int e = errno;
                close(t);
                return cx_fail(err, errlen, CX_ESYS, "bind: %s", strerror(e));
            }
            close(t);
        }
        int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return cx_fail(err, errlen, CX_ESYS, "socket: %s", strerror(errno));
        int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (family == AF_INET6)
            (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
        if (bind(fd, (struct sockaddr *)&want, len) == 0 && listen(fd, 128) == 0) {
            *sa = want;
            return fd;
        }
        int e = errno;
        close(fd);
        if (sa_port(sa) != 0 || e != EADDRINUSE) {
            char a[64];
            cx_addr_format((struct sockaddr *)&want, a, sizeof a);
            return cx_fail(err, errlen, CX_ESYS, "bind %s: %s", a, strerror(e));
        }
        /* another socket took the ephemeral port in between: try again */
    }
    return cx_fail(err, errlen, CX_ESYS, "bind: no free ephemeral port");
}

/* ---- proxy: lifecycle ---- */

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
    pthread_cond_init(&p->cv, NULL); /* timed waits: cx_cond_wait_until_ms (monotonic) */
    p->enabled = true;
    p->seen_enabled = true;
    p->next_toxic_id = 1;

    socklen_t lsl;
    if (cx_addr_resolve(listen_s ? listen_s : "", "listen", &p->listen_sa, &lsl, err, errlen) != 0)
        goto fail;
    /* the upstream is only checked here: it is resolved for each new link
     * (proxy_resolve.c), so a name that does not exist yet is no error */
    if (cx_hostport_check(upstream, "upstream", NULL, 0, NULL, err, errlen) != 0)
        goto fail;
    snprintf(p->upstream, sizeof p->upstream, "%s", upstream);

    int lfd = bind_listener(&p->listen_sa, lsl, err, errlen);
    if (lfd < 0)
        goto fail;
    p->lend = (link_end){.kind = END_LISTEN, .fd = lfd};
    cx_addr_format((struct sockaddr *)&p->listen_sa, p->listen_addr, sizeof p->listen_addr);
    p->listening = true;

    p->epfd = epoll_create1(EPOLL_CLOEXEC);
    p->evend = (link_end){.kind = END_EVENT, .fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
    p->tend =
        (link_end){.kind = END_TIMER, .fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)};
    if (p->epfd < 0 || p->evend.fd < 0 || p->tend.fd < 0) {
        cx_fail(err, errlen, CX_ESYS, "proxy %s: epoll/eventfd/timerfd: %s", name, strerror(errno));
        goto fail;
    }
    proxy_end_watch(p, &p->lend, EPOLLIN);
    proxy_end_watch(p, &p->evend, EPOLLIN);
    proxy_end_watch(p, &p->tend, EPOLLIN);
    p->res = proxy_resolver_new(p->name, p->upstream, p->evend.fd, err, errlen);
    if (!p->res)
        goto fail;
    if (pthread_create(&p->thread, NULL, proxy_loop_main, p) != 0) {
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
    proxy_resolver_free(p->res); /* a lookup in flight finishes on its own */
    while (p->links)
        proxy_link_close(p, p->links, false);
    for (int i = 0; i < p->nsnap; i++)
        shared_toxic_unref(p->snap[i]);
    for (int i = 0; i < p->ntoxics; i++)
        shared_toxic_unref(p->toxics[i]);
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
    struct sockaddr_storage sa = {0};
    socklen_t sl = 0;
    int rc = cx_addr_resolve(listen_s ? listen_s : "", "listen", &sa, &sl, err, errlen);
    if (rc != 0)
        return rc;
    int fd = bind_listener(&sa, sl, err, errlen);
    if (fd < 0)
        return fd;
    pthread_mutex_lock(&p->mu);
    if (p->pending_lfd >= 0)
        close(p->pending_lfd);
    p->pending_lfd = fd;
    p->pending_sa = sa;
    cx_addr_format((struct sockaddr *)&sa, p->listen_addr, sizeof p->listen_addr);
    p->listen_echo[0] = '\0';
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
    if (enabled)
        p->listen_echo[0] = '\0';
    if (p->enabled != enabled) {
        p->enabled = enabled;
        cx_info("proxy %s: %s", p->name, enabled ? "enabled" : "disabled");
        proxy_commit_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
    return CX_OK;
}

void proxy_set_listen_echo(proxy *p, const char *given)
{
    pthread_mutex_lock(&p->mu);
    if (!p->enabled)
        snprintf(p->listen_echo, sizeof p->listen_echo, "%s", given ? given : "");
    pthread_mutex_unlock(&p->mu);
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
    if (!upstream || strlen(upstream) >= sizeof p->upstream)
        return cx_fail(err, errlen, CX_EINVAL, "upstream: missing or too long");
    int rc = cx_hostport_check(upstream, "upstream", NULL, 0, NULL, err, errlen);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&p->mu);
    snprintf(p->upstream, sizeof p->upstream, "%s", upstream);
    proxy_resolver_set(p->res, upstream);
    proxy_commit_locked(p); /* the loop drops its cached answer (proxy_resolve_sync) */
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
        shared_toxic_unref(p->toxics[i]);
    p->ntoxics = 0;
    p->enabled = true;
    p->listen_echo[0] = '\0';
    proxy_commit_locked(p);
    pthread_mutex_unlock(&p->mu);
}
