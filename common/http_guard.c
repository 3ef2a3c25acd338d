/* http_guard.c - connection admission for libmicrohttpd daemons (see
 * http_guard.h for the policy and the phase diagram). */
#include "common/http_guard.h"

#include <arpa/inet.h>
#include <assert.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/netaddr.h"

enum guard_phase {
    G_HELD,       /* open, no request in progress */
    G_IN_REQUEST, /* headers in, body uploading */
    G_ACTIVE,     /* handler running or response being sent */
    G_EVICTED,    /* shut down by us, waiting for libmicrohttpd to close it */
};

typedef struct guard_client {
    uint32_t addr;   /* client key (cx_addr_client_key): IPv4, host order */
    int capped;      /* per-client caps apply (not loopback, or loopback_is_client) */
    unsigned refs;   /* connections pointing here, evicted ones included */
    unsigned conns;  /* open connections, evicted ones excluded */
    unsigned in_req; /* non-reserved requests in progress */
} guard_client;

typedef struct guard_conn {
    struct MHD_Connection *mc;      /* libmicrohttpd's connection */
    int fd;                         /* its socket (owned by libmicrohttpd) */
    guard_client *client;           /* its client slot */
    enum guard_phase phase;         /* see the diagram in http_guard.h */
    int counted;                    /* the current request counts in the in_req caps */
    int64_t since_ms;               /* mono ms: entered the current phase */
    struct guard_conn *prev, *next; /* open connections, oldest first */
} guard_conn;

struct cx_http_guard {
    pthread_mutex_t mu;
    cx_http_limits lim;
    char name[32];           /* log prefix */
    guard_conn *head, *tail; /* every connection not yet CLOSED */
    guard_client *clients;   /* [lim.conn_max] slots; refs == 0 is free */
    unsigned open;           /* connections open, evicted excluded */
    unsigned in_req;         /* non-reserved requests in progress */
    cx_http_guard_stats st;  /* totals */
    int64_t log_ms;          /* mono ms of the last summary line */
    uint64_t log_evicted;    /* st.evicted at that line */
    uint64_t log_refused;    /* st.refused at that line */
};

#ifndef NDEBUG
/* Debug builds: the counters agree with the list. Caller holds g->mu. */
static void assert_guard_state(const cx_http_guard *g)
{
    unsigned open = 0, in_req = 0;
    for (const guard_conn *c = g->head; c; c = c->next) {
        open += c->phase != G_EVICTED;
        in_req += (unsigned)c->counted;
        assert(!c->counted || c->phase != G_HELD); /* only a request in progress counts */
    }
    assert(open == g->open && in_req == g->in_req);
}
#else
#define assert_guard_state(g) ((void)0)
#endif

void cx_http_limits_default(cx_http_limits *l)
{
    *l = (cx_http_limits){
        .conn_max = 512,
        .conn_soft = 448,
        .active_max = 384,
        .client_conn_max = 64,
        .client_active_max = 32,
        .idle_timeout_s = 30,
        .held_max_ms = 30000,
        .loopback_is_client = 0,
    };
}

cx_http_guard *cx_http_guard_new(const cx_http_limits *l, const char *name)
{
    cx_http_guard *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->lim = *l;
    if (g->lim.conn_max < 2)
        g->lim.conn_max = 2;
    if (g->lim.conn_soft == 0 || g->lim.conn_soft >= g->lim.conn_max)
        g->lim.conn_soft = g->lim.conn_max - 1;
    g->clients = calloc(g->lim.conn_max, sizeof *g->clients);
    if (!g->clients) {
        free(g);
        return NULL;
    }
    snprintf(g->name, sizeof g->name, "%s", name ? name : "http");
    pthread_mutex_init(&g->mu, NULL);
    return g;
}

void cx_http_guard_free(cx_http_guard *g)
{
    if (!g)
        return;
    for (guard_conn *c = g->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    pthread_mutex_destroy(&g->mu);
    free(g->clients);
    free(g);
}

const cx_http_limits *cx_http_guard_limits(const cx_http_guard *g)
{
    return &g->lim;
}

/* ---- guard: clients ---- */

/* The slot of conn's client address, taken if new. Caller holds g->mu. */
static guard_client *client_get(cx_http_guard *g, struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    uint32_t addr = ci && ci->client_addr ? cx_addr_client_key(ci->client_addr) : 0;
    guard_client *free_slot = NULL;
    for (unsigned i = 0; i < g->lim.conn_max; i++) {
        guard_client *c = &g->clients[i];
        if (c->refs && c->addr == addr)
            return c;
        if (!c->refs && !free_slot)
            free_slot = c;
    }
    if (!free_slot) /* more clients than connections: cannot happen, libmicrohttpd caps them */
        return NULL;
    *free_slot = (guard_client){.addr = addr, .capped = (addr >> 24) != 127 || g->lim.loopback_is_client};
    return free_slot;
}

/* ---- guard: eviction ---- */

/* Shut c down; libmicrohttpd sees the peer gone and closes it. The socket
 * stays valid until CLOSED (which needs g->mu), so this cannot hit a reused
 * fd. Caller holds g->mu. */
static void evict(cx_http_guard *g, guard_conn *c)
{
    shutdown(c->fd, SHUT_RDWR);
    c->phase = G_EVICTED;
    g->open--;
    c->client->conns--;
    g->st.evicted++;
}

static int evictable(const guard_conn *c, const guard_conn *except)
{
    return c != except && (c->phase == G_HELD || c->phase == G_IN_REQUEST);
}

/* 1 when a is the better victim than b: the client with more connections,
 * then held before uploading, then the older. */
static int worse(const guard_conn *a, const guard_conn *b)
{
    if (!b)
        return 1;
    if (a->client->conns != b->client->conns)
        return a->client->conns > b->client->conns;
    if (a->phase != b->phase)
        return a->phase == G_HELD;
    return a->since_ms < b->since_ms;
}

/* Evict the best victim among connections of only (or of anyone when NULL),
 * never except. Returns 1 when one was evicted. Caller holds g->mu. */
static int evict_one(cx_http_guard *g, const guard_client *only, const guard_conn *except)
{
    guard_conn *victim = NULL;
    for (guard_conn *c = g->head; c; c = c->next)
        if (evictable(c, except) && (!only || c->client == only) && worse(c, victim))
            victim = c;
    if (victim)
        evict(g, victim);
    return victim != NULL;
}

/* A new connection n arrived: apply the policy of http_guard.h. */
static void on_arrival(cx_http_guard *g, guard_conn *n)
{
    int64_t now = n->since_ms;
    for (guard_conn *c = g->head; c; c = c->next)
        if (c != n && c->phase == G_HELD && now - c->since_ms > (int64_t)g->lim.held_max_ms)
            evict(g, c);
    if (n->client->capped && n->client->conns > g->lim.client_conn_max)
        evict_one(g, n->client, n);
    if (g->open > g->lim.conn_soft)
        evict_one(g, NULL, n);
}

/* One summary line at most every 10 s while the guard acts. */
static void maybe_log(cx_http_guard *g, int64_t now)
{
    if (g->st.evicted == g->log_evicted && g->st.refused == g->log_refused)
        return;
    if (g->log_ms && now - g->log_ms < 10000)
        return;
    cx_warn("%s: connection limits: %llu held connections evicted, %llu requests refused (503) since the "
            "last report; %u open, %u requests in progress",
            g->name, (unsigned long long)(g->st.evicted - g->log_evicted),
            (unsigned long long)(g->st.refused - g->log_refused), g->open, g->in_req);
    g->log_ms = now;
    g->log_evicted = g->st.evicted;
    g->log_refused = g->st.refused;
}

/* ---- guard: libmicrohttpd callbacks ---- */

void cx_http_guard_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    cx_http_guard *g = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fi = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        guard_conn *c = calloc(1, sizeof *c);
        pthread_mutex_lock(&g->mu);
        guard_client *cl = c && fi ? client_get(g, mc) : NULL;
        if (!cl) { /* out of memory: the connection goes unguarded, never wrongly refused */
            pthread_mutex_unlock(&g->mu);
            free(c);
            *socket_context = NULL;
            return;
        }
        *c = (guard_conn){
            .mc = mc, .fd = fi->connect_fd, .client = cl, .phase = G_HELD, .since_ms = cx_mono_ms()};
        cl->refs++;
        cl->conns++;
        g->open++;
        c->prev = g->tail;
        if (g->tail)
            g->tail->next = c;
        else
            g->head = c;
        g->tail = c;
        *socket_context = c;
        on_arrival(g, c);
        maybe_log(g, c->since_ms);
        assert_guard_state(g);
        pthread_mutex_unlock(&g->mu);
        return;
    }
    guard_conn *c = *socket_context;
    if (!c)
        return;
    pthread_mutex_lock(&g->mu);
    if (c->counted) {
        g->in_req--;
        c->client->in_req--;
    }
    if (c->phase != G_EVICTED) {
        g->open--;
        c->client->conns--;
    }
    c->client->refs--;
    if (c->prev)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        g->tail = c->prev;
    assert_guard_state(g);
    pthread_mutex_unlock(&g->mu);
    free(c);
    *socket_context = NULL;
}

static guard_conn *conn_of(struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

int cx_http_guard_begin(cx_http_guard *g, struct MHD_Connection *mc, int reserved, char *why, size_t whylen)
{
    guard_conn *c = conn_of(mc);
    if (!c)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&g->mu);
    if (c->phase == G_EVICTED) {
        rc = cx_fail(why, whylen, CX_EBUSY, "connection closed to make room for others");
    } else if (reserved) {
        g->st.reserved_seen++;
    } else if (g->in_req >= g->lim.active_max) {
        rc = cx_fail(why, whylen, CX_EBUSY, "server busy: %u requests in progress (max %u); retry later",
                     g->in_req, g->lim.active_max);
    } else if (c->client->capped && c->client->in_req >= g->lim.client_active_max) {
        rc = cx_fail(why, whylen, CX_EBUSY,
                     "too many requests in progress from this client: %u (max %u); retry later",
                     c->client->in_req, g->lim.client_active_max);
    } else {
        c->counted = 1;
        g->in_req++;
        c->client->in_req++;
    }
    if (rc == 0) {
        c->phase = G_IN_REQUEST;
        c->since_ms = cx_mono_ms();
    } else {
        g->st.refused++;
        maybe_log(g, cx_mono_ms());
    }
    assert_guard_state(g);
    pthread_mutex_unlock(&g->mu);
    return rc;
}

void cx_http_guard_handling(cx_http_guard *g, struct MHD_Connection *mc)
{
    guard_conn *c = conn_of(mc);
    if (!c)
        return;
    pthread_mutex_lock(&g->mu);
    if (c->phase == G_IN_REQUEST)
        c->phase = G_ACTIVE;
    pthread_mutex_unlock(&g->mu);
}

void cx_http_guard_end(cx_http_guard *g, struct MHD_Connection *mc)
{
    guard_conn *c = conn_of(mc);
    if (!c)
        return;
    pthread_mutex_lock(&g->mu);
    if (c->counted) {
        c->counted = 0;
        g->in_req--;
        c->client->in_req--;
    }
    if (c->phase == G_IN_REQUEST || c->phase == G_ACTIVE) {
        c->phase = G_HELD;
        c->since_ms = cx_mono_ms();
    }
    assert_guard_state(g);
    pthread_mutex_unlock(&g->mu);
}

void cx_http_guard_get_stats(cx_http_guard *g, cx_http_guard_stats *out)
{
    pthread_mutex_lock(&g->mu);
    *out = g->st;
    out->open = g->open;
    out->in_request = g->in_req;
    pthread_mutex_unlock(&g->mu);
}
