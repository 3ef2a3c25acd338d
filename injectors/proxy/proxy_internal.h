/* proxy_internal.h - the TCP proxy's shared state, private to
 * injectors/proxy/: the interface is proxy.h. The proxy is four files:
 *
 *   proxy.c         lifecycle (proxy_new/free), addresses, the switches
 *                   (enabled, upstream, listen, partition, reset)
 *   proxy_toxics.c  the toxic API (add/update/remove, JSON, Toxiproxy's
 *                   lenient decoding) and the counters
 *   proxy_loop.c    the loop thread: epoll, timers, applying API changes
 *                   (proxy_sync) and the API side of that hand-over
 *                   (proxy_commit_locked)
 *   proxy_link.c    links: accept, connect, the data path of both
 *                   directions (splice fast path, toxic queue), close;
 *                   the link state machine is drawn at its top
 *   proxy_resolve.c the upstream's name: a helper thread resolves it
 *                   for new links (getaddrinfo blocks, the loop must not)
 *
 * Threads and ownership. One loop thread per proxy owns the sockets and
 * every link: the functions of proxy_link.c and those marked "loop thread"
 * below run on it only. API calls (agent HTTP threads) change the fields
 * marked "under mu", then proxy_commit_locked() bumps p->gen, wakes the
 * loop through the eventfd and waits (bounded) until the loop has applied
 * that generation, so that when an API call returns its effect is in
 * place. Counters are relaxed atomics written by the loop and read by
 * anyone. A shared_toxic is reference-counted: one reference for the
 * proxy's list, one for each loop snapshot holding it.
 */
#ifndef INJ_PROXY_INTERNAL_H
#define INJ_PROXY_INTERNAL_H

#include "injectors/proxy/proxy.h"
#include "injectors/proxy/toxic.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define PROXY_MAX_TOXICS 32          /* per proxy */
#define PROXY_QUEUE_CAP (1u << 20)   /* bytes queued per direction before reading stops */
#define PROXY_READ_MAX 65536         /* bytes per read / splice */
#define PROXY_PIPE_SIZE (1 << 16)    /* splice pipe capacity, bytes (1 MiB showed no gain on loopback) */
#define PROXY_SYNC_WAIT_MS 2000      /* API wait for the loop to apply a change */
#define PROXY_PUMP_ROUNDS 64         /* I/O rounds per direction per wakeup (fairness) */
#define PROXY_REFUSED_LINGER_MS 1000 /* a refused link's wait for the client to close */
#define PROXY_ADDRS_MAX 8            /* upstream addresses tried per link, in getaddrinfo's order */
#define PROXY_RESOLVE_TTL_MS 1000    /* a lookup this young serves new links without a new one */
#define PROXY_RESOLVE_WARN_MS 10000  /* at most one "does not resolve" warning per this long */

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

/* LINK_RESOLVING: accepted, waiting for a lookup of the upstream's name
 * (no upstream socket yet, the client is not read).
 * LINK_REFUSED: the upstream refused (or its name did not resolve); the client got a FIN and what it
 * still sends is read and discarded until it closes (or for at most
 * PROXY_REFUSED_LINGER_MS), so that it sees an EOF rather than a reset. */
typedef enum link_state { LINK_RESOLVING, LINK_CONNECTING, LINK_OPEN, LINK_REFUSED, LINK_CLOSED } link_state;

/* The upstream's addresses from one lookup, in the order to try them. */
typedef struct proxy_addrs {
    struct sockaddr_storage sa[PROXY_ADDRS_MAX];
    socklen_t len[PROXY_ADDRS_MAX];
    int n; /* 0: the name did not resolve */
} proxy_addrs;

typedef struct proxy_resolver proxy_resolver; /* proxy_resolve.c */

typedef struct plink {
    struct plink *next, *prev;
    uint64_t id; /* 1, 2, ... per proxy; keys toxicity draws */
    link_state state;
    link_end client, upstream; /* upstream.fd -1 while RESOLVING */
    uint64_t res_seq;          /* RESOLVING: the lookup request it waits for */
    proxy_addrs addrs;         /* CONNECTING: the upstream's addresses */
    int next_addr;             /* CONNECTING: index of the next one to try */
    dir d[2];                  /* indexed by toxic_stream */
    int64_t deadline_ns;       /* next toxic time (chunk due, timer), 0 = none */
    bool in_ready_list;        /* queued for pumping this round */
    struct plink *ready_next;
} plink;

struct proxy {
    char name[TOXIC_NAME_MAX + 1];
    char listen_addr[64];              /* "127.0.0.1:PORT" or "[::1]:PORT", bound; written under mu
                                          (proxy_set_listen) */
    struct sockaddr_storage listen_sa; /* loop thread (and proxy_new) */
    proxy_resolver *res;               /* the upstream's lookups; shared with its thread */
    pthread_t thread;
    bool thread_started;
    int epfd;
    link_end lend, evend, tend; /* listener, eventfd, timerfd */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* ---- under mu ---- */
    char upstream[256];    /* as given */
    char listen_echo[160]; /* listen as a client gave it, shown while the proxy has
                              not listened since (created or re-bound disabled); "" = none */
    bool enabled;
    int partition;            /* hold count */
    uint64_t partition_epoch; /* bumped on each 0 -> 1 */
    shared_toxic *toxics[PROXY_MAX_TOXICS];
    int ntoxics;
    uint64_t next_toxic_id;
    uint64_t gen;         /* bumped by every change */
    uint64_t applied_gen; /* last gen the loop applied */
    bool stop;
    bool loop_dead;                     /* loop thread exited */
    int pending_lfd;                    /* proxy_set_listen: new listener for the loop to take, or -1 */
    struct sockaddr_storage pending_sa; /* its address */

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
    proxy_addrs snap_addrs; /* the latest lookup's result (proxy_resolve_sync) */
    uint64_t snap_res_done; /* the request it answered; RESOLVING links up to it are served */
    int64_t snap_res_at_ns; /* when that lookup started (monotonic) */
    int64_t timer_armed_ns; /* current timerfd deadline, 0 = disarmed */
    unsigned char rbuf[PROXY_READ_MAX];

    /* ---- counters (atomics) ---- */
    proxy_stats st;
};

/* ---- proxy_toxics.c ---- */

/* Drop one reference; the last one frees t. NULL is a no-op. Any thread. */
void shared_toxic_unref(shared_toxic *t);

/* ---- proxy_loop.c ---- */

/* The loop thread's body (pthread_create's start routine; arg is the
 * proxy). Returns once p->stop is applied or epoll fails, after setting
 * p->loop_dead. */
void *proxy_loop_main(void *arg);
/* Bump the generation, wake the loop, and wait (at most
 * PROXY_SYNC_WAIT_MS; a warning when it passes) until it applied it.
 * Called with p->mu held; returns with it held. API threads only. */
void proxy_commit_locked(proxy *p);
/* Register, modify or remove e's fd so that epoll watches exactly want
 * (0 = removed). Loop thread, or proxy_new before the loop starts. */
void proxy_end_watch(proxy *p, link_end *e, uint32_t want);

/* ---- proxy_resolve.c ---- */

/* Start the lookup thread for upstream ("HOST:PORT", checked by the
 * caller) and ask for a first lookup, so that the first client finds a
 * fresh answer. evfd is the loop's eventfd (dup'ed: the thread may outlive
 * the proxy). NULL + err on failure. */
proxy_resolver *proxy_resolver_new(const char *proxy_name, const char *upstream, int evfd, char *err,
                                   size_t errlen);
/* Detach: the thread ends at its next wakeup (after a lookup in flight,
 * which is not waited for) and frees the shared state. NULL is a no-op.
 * Any thread. */
void proxy_resolver_free(proxy_resolver *r);
/* New upstream text: cached answers are dropped, lookups in flight for
 * the old one are discarded, and a new lookup starts. Any thread. */
void proxy_resolver_set(proxy_resolver *r, const char *upstream);
/* Loop thread: a lookup answer for l now (a fresh cached one: true, its
 * addresses copied into l->addrs), or false: l->res_seq is set and the
 * thread asked; the loop learns of the answer through the eventfd
 * (proxy_resolve_sync). */
bool proxy_resolve_link(proxy *p, plink *l, int64_t now);
/* Loop thread, on each eventfd wakeup: take the latest answer into
 * p->snap_addrs / snap_res_done. */
void proxy_resolve_sync(proxy *p);

/* ---- proxy_link.c (loop thread) ---- */

/* Accept what is pending on the listener (bounded per call); each client
 * becomes a CONNECTING link. Fold link deadlines into *next. */
void proxy_on_accept(proxy *p, int64_t now, int64_t *next);
/* Do all the I/O a link can do now; update its epoll interest; fold its
 * next deadline into *next. The link may be freed: do not touch l after a
 * true return. */
bool proxy_link_pump(proxy *p, plink *l, int64_t now, int64_t *next);
/* Close both sockets (with RST when rst), unlink l from p->links and free
 * it (or leave that to the loop while it is on the ready list). */
void proxy_link_close(proxy *p, plink *l, bool rst);
/* Close every link (RST when rst), counted in conns_dropped. */
void proxy_close_all_links(proxy *p, bool rst);
/* Rebuild the toxic chains of every open link from the loop's snapshot
 * (p->snap); a link whose switch to the queued path fails is reset. */
void proxy_links_resync(proxy *p, int64_t now);

#endif
