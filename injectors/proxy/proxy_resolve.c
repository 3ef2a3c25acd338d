/* proxy_resolve.c - the upstream's name, resolved for new links.
 *
 * The proxy keeps its upstream as "HOST:PORT" text and resolves it for
 * every new link (AF_UNSPEC; each address is tried in getaddrinfo's
 * order), so that a proxy made before its upstream's name exists (a
 * Kubernetes Service not created yet) starts and refuses clients until it
 * does, and one whose name moves follows it.
 *
 * getaddrinfo blocks (DNS: seconds when a server does not answer), and the
 * loop thread must not: it carries every open link. So one helper thread
 * per proxy does the lookups:
 *
 *   loop (proxy_resolve_link)             resolver thread (resolver_main)
 *   a new link, no answer younger than    waits for want > done
 *   PROXY_RESOLVE_TTL_MS: the link is     seq = want; getaddrinfo(upstream)
 *   RESOLVING with res_seq = ++want  ───► done = seq, addrs = the answer
 *                                         (dropped when the upstream changed
 *   proxy_resolve_sync (eventfd wakeup) ◄─ meanwhile: gen); eventfd written
 *   RESOLVING links with res_seq <= done
 *   connect, or are refused (n == 0)
 *
 * Every link is served by a lookup that started after it was accepted or
 * at most PROXY_RESOLVE_TTL_MS before it; clients that arrive together
 * share one lookup, and there is at most one in flight. An answer that
 * failed is never reused: the next client asks again.
 *
 * The state is shared by the proxy and the thread and freed by whichever
 * lets go last (refs), so that proxy_free never waits for a lookup in
 * flight; the thread writes to a dup of the loop's eventfd, which stays
 * valid while it holds it.
 */
#include "injectors/proxy/proxy_internal.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/parse.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct proxy_resolver {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* want changed, or stop */
    char name[TOXIC_NAME_MAX + 1];
    int evfd; /* dup of the loop's eventfd */
    /* ---- under mu ---- */
    int refs;           /* the proxy + the thread */
    bool stop;          /* the proxy let go */
    char upstream[256]; /* "HOST:PORT" */
    uint64_t gen;       /* bumped by proxy_resolver_set */
    uint64_t want;      /* requests: last sequence number asked for */
    uint64_t done;      /* the request the latest answer covers */
    uint64_t running;   /* the request of the lookup in flight, 0 = none */
    proxy_addrs addrs;  /* the latest answer */
    int64_t at_ns;      /* when the lookup behind it started (monotonic) */
    /* ---- resolver thread only ---- */
    int64_t warned_ns; /* last "does not resolve" warning, 0 = none */
    bool failing;      /* the last lookup failed */
    char first[64];    /* the first address of the last answer, for the logs */
};

static void resolver_unref_locked(proxy_resolver *r)
{
    bool last = --r->refs == 0;
    pthread_mutex_unlock(&r->mu);
    if (!last)
        return;
    close(r->evfd);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* One lookup of upstream into *out (n = 0 when it fails; the reason in
 * why). */
static void resolve_once(const char *upstream, proxy_addrs *out, char *why, size_t whylen)
{
    char host[256], ps[16];
    int port = 0;
    memset(out, 0, sizeof *out);
    if (cx_parse_hostport(upstream, "upstream", host, sizeof host, &port, why, whylen) != 0)
        return;
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int g = getaddrinfo(host, ps, &hints, &ai);
    if (g != 0) {
        snprintf(why, whylen, "%s", g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
        return;
    }
    for (struct addrinfo *a = ai; a && out->n < PROXY_ADDRS_MAX; a = a->ai_next) {
        if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) || a->ai_addrlen > sizeof out->sa[0])
            continue;
        memcpy(&out->sa[out->n], a->ai_addr, a->ai_addrlen);
        out->len[out->n++] = a->ai_addrlen;
    }
    freeaddrinfo(ai);
    if (out->n == 0)
        snprintf(why, whylen, "no IPv4 or IPv6 address");
}

/* Log what changed: a name that stopped or started resolving, or moved.
 * The warning for a name that does not resolve is rate-limited. */
static void resolver_log(proxy_resolver *r, const char *upstream, const proxy_addrs *a, const char *why,
                         int64_t now)
{
    if (a->n == 0) {
        if (!r->failing || r->warned_ns == 0 ||
            now - r->warned_ns >= (int64_t)PROXY_RESOLVE_WARN_MS * 1000000) {
            cx_warn("proxy %s: upstream %s does not resolve (%s): its clients are refused until it does",
                    r->name, upstream, why);
            r->warned_ns = now;
        }
        r->failing = true;
        r->first[0] = '\0';
        return;
    }
    char first[64];
    cx_addr_format((const struct sockaddr *)&a->sa[0], first, sizeof first);
    if (r->failing || (r->first[0] && strcmp(first, r->first) != 0))
        cx_info("proxy %s: upstream %s resolves to %s%s", r->name, upstream, first,
                a->n > 1 ? " (and more)" : "");
    r->failing = false;
    snprintf(r->first, sizeof r->first, "%s", first);
}

static void *resolver_main(void *arg)
{
    proxy_resolver *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && r->done >= r->want)
            pthread_cond_wait(&r->cv, &r->mu);
        if (r->stop)
            break;
        uint64_t seq = r->want, gen = r->gen;
        r->running = seq;
        char upstream[256];
        snprintf(upstream, sizeof upstream, "%s", r->upstream);
        pthread_mutex_unlock(&r->mu);

        int64_t started = cx_mono_ns();
        proxy_addrs a;
        char why[160] = "";
        resolve_once(upstream, &a, why, sizeof why);
        resolver_log(r, upstream, &a, why, started);

        pthread_mutex_lock(&r->mu);
        r->running = 0;
        if (r->stop)
            break;
        if (gen != r->gen)
            continue; /* the upstream changed meanwhile: ask again */
        r->addrs = a;
        r->done = seq;
        r->at_ns = started;
        uint64_t one = 1;
        (void)!write(r->evfd, &one, sizeof one);
    }
    resolver_unref_locked(r);
    return NULL;
}

proxy_resolver *proxy_resolver_new(const char *proxy_name, const char *upstream, int evfd, char *err,
                                   size_t errlen)
{
    proxy_resolver *r = calloc(1, sizeof *r);
    if (!r) {
        cx_fail(err, errlen, CX_ENOMEM, "proxy %s: out of memory", proxy_name);
        return NULL;
    }
    r->evfd = dup(evfd);
    if (r->evfd < 0) {
        cx_fail(err, errlen, CX_ESYS, "proxy %s: dup: %s", proxy_name, strerror(errno));
        free(r);
        return NULL;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    snprintf(r->name, sizeof r->name, "%s", proxy_name);
    snprintf(r->upstream, sizeof r->upstream, "%s", upstream);
    r->refs = 2;
    r->want = 1; /* the first lookup, before any client */
    pthread_t t;
    if (pthread_create(&t, NULL, resolver_main, r) != 0) {
        cx_fail(err, errlen, CX_ESYS, "proxy %s: pthread_create failed", proxy_name);
        close(r->evfd);
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mu);
        free(r);
        return NULL;
    }
    pthread_detach(t);
    return r;
}

void proxy_resolver_free(proxy_resolver *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_cond_signal(&r->cv);
    resolver_unref_locked(r);
}

void proxy_resolver_set(proxy_resolver *r, const char *upstream)
{
    pthread_mutex_lock(&r->mu);
    snprintf(r->upstream, sizeof r->upstream, "%s", upstream);
    r->gen++;
    r->at_ns = 0; /* no link made from now on takes the old answer */
    r->want++;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

bool proxy_resolve_link(proxy *p, plink *l, int64_t now)
{
    if (p->snap_addrs.n > 0 && p->snap_res_at_ns > 0 &&
        now - p->snap_res_at_ns < (int64_t)PROXY_RESOLVE_TTL_MS * 1000000) {
        l->addrs = p->snap_addrs;
        l->next_addr = 0;
        return true;
    }
    proxy_resolver *r = p->res;
    pthread_mutex_lock(&r->mu);
    /* one request covers every link accepted before its lookup starts; a
     * lookup already in flight started before this link came */
    if (r->want <= r->done || r->want == r->running)
        r->want++;
    l->res_seq = r->want;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return false;
}

void proxy_resolve_sync(proxy *p)
{
    proxy_resolver *r = p->res;
    pthread_mutex_lock(&r->mu);
    p->snap_addrs = r->addrs;
    p->snap_res_done = r->done;
    p->snap_res_at_ns = r->at_ns;
    pthread_mutex_unlock(&r->mu);
}
