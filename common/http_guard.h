/* http_guard.h - connection admission for libmicrohttpd daemons: keep the
 * control calls reachable while someone holds connections open.
 *
 * What it is: the bookkeeping behind MHD_OPTION_NOTIFY_CONNECTION. It knows
 * every open connection of one daemon, its client address and its phase,
 * and enforces:
 *   - held connections (no request yet, or idle between requests) are
 *     evicted when the daemon is near its hard limit or a client is over
 *     its share: the client with the most connections first, the one held
 *     longest first, then connections still uploading a body; a connection
 *     waiting longer than held_max_ms for its request headers (slowloris)
 *     is evicted at the next arrival in any case. Eviction is
 *     shutdown(2) on the socket: libmicrohttpd then closes it as if the
 *     peer had gone.
 *   - requests in progress (body upload, handler, response) are capped in
 *     total and per client; over a cap the request is refused at once
 *     (503, before its body is read) - unless its route is *reserved*
 *     (the agent's halt and lease, the syncer's status, the dashboard's
 *     HALT ALL), which always gets through: its connection is admitted,
 *     and held connections make room for it.
 * On one host every process is the client 127.x: per-client caps there
 * would only cap our own learners and harness, so loopback clients share
 * the global caps (loopback_is_client = 1 makes them count, for tests);
 * the reserve is what guarantees halt on loopback.
 * What it is not: rate limiting, authentication or TLS.
 *
 * Threads: the notify callback runs on libmicrohttpd's accept thread, the
 * request calls on each connection's thread; one mutex guards everything.
 *
 * Phases of one connection (each call names the transition):
 *
 *   STARTED ─► HELD ──cx_http_guard_begin──► IN_REQUEST ──handling──► ACTIVE
 *               ▲  (admitted; refused: 503 now, │ (body upload)       │ (handler,
 *               │   then libmicrohttpd closes)  │                     │  response)
 *               └────────────cx_http_guard_end──┴─────────────────────┘
 *   HELD or IN_REQUEST ──evict (shutdown)──► EVICTED ──CLOSED──► freed
 */
#ifndef CX_HTTP_GUARD_H
#define CX_HTTP_GUARD_H

#include <microhttpd.h>
#include <stdint.h>

typedef struct cx_http_limits {
    unsigned conn_max;          /* connections: libmicrohttpd's hard limit */
    unsigned conn_soft;         /* connections: above this, held ones are evicted */
    unsigned active_max;        /* non-reserved requests in progress, all clients */
    unsigned client_conn_max;   /* connections per client (not loopback, see above) */
    unsigned client_active_max; /* non-reserved requests in progress per client */
    unsigned idle_timeout_s;    /* s: libmicrohttpd's inactivity timeout */
    unsigned held_max_ms;       /* ms: longest wait for a request's headers */
    int loopback_is_client;     /* 1: per-client caps apply to 127.x too */
} cx_http_limits;

/* Counters for tests and logs. */
typedef struct cx_http_guard_stats {
    unsigned open;          /* connections open, evicted ones excluded */
    unsigned in_request;    /* non-reserved requests in progress */
    uint64_t evicted;       /* connections evicted so far */
    uint64_t refused;       /* requests refused with 503 so far */
    uint64_t reserved_seen; /* reserved requests admitted so far */
} cx_http_guard_stats;

typedef struct cx_http_guard cx_http_guard;

/* The defaults every chaosloco server uses (docs/security.md). */
void cx_http_limits_default(cx_http_limits *l);

/* NULL on allocation failure. name prefixes log lines ("http", "dashboard"). */
cx_http_guard *cx_http_guard_new(const cx_http_limits *l, const char *name);
/* After MHD_stop_daemon. NULL is a no-op. */
void cx_http_guard_free(cx_http_guard *g);
const cx_http_limits *cx_http_guard_limits(const cx_http_guard *g);

/* Pass with the guard as cls to MHD_OPTION_NOTIFY_CONNECTION. */
void cx_http_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code);

/* A request's headers are in (the first access-handler call). reserved: its
 * route is a control route. 0 admitted; CX_EBUSY refused (answer 503 with
 * the message in why, which names the cap). */
int cx_http_guard_begin(cx_http_guard *g, struct MHD_Connection *conn, int reserved, char *why,
                        size_t whylen);
/* The body is in; the handler runs (the connection is no longer evictable). */
void cx_http_guard_handling(cx_http_guard *g, struct MHD_Connection *conn);
/* The request is over (MHD_OPTION_NOTIFY_COMPLETED). Safe without begin. */
void cx_http_guard_end(cx_http_guard *g, struct MHD_Connection *conn);

void cx_http_guard_get_stats(cx_http_guard *g, cx_http_guard_stats *out);

#endif
