/* proxy.h - a Toxiproxy-compatible TCP proxy with toxics, in-process.
 *
 * One proxy = one listening socket (127.0.0.1 by default; any IPv4 or
 * IPv6 address, "[::]" takes both families) relaying every accepted
 * connection to one upstream "host:port", driven by its own thread (an
 * epoll loop). The upstream's name is resolved for each new connection
 * (on a helper thread, proxy_resolve.c), so it may not exist yet when the
 * proxy is made, and may move. Each accepted client and its upstream connection form a
 * "link"; each link has two directions, upstream (client -> upstream
 * server, i.e. learner -> syncer) and downstream (server -> client). A
 * direction without toxics is forwarded zero-copy (splice through a pipe);
 * a direction with toxics queues timestamped chunks in a capped queue and
 * runs them through its toxic chain in the order the toxics were added.
 *
 * Toxics speak Toxiproxy's JSON (README "Toxics", CREATING_TOXICS.md):
 *
 *   {"name": "latency_downstream", "type": "latency",
 *    "stream": "upstream"|"downstream", "toxicity": 0..1,
 *    "attributes": {"latency": 100, "jitter": 10}}
 *
 *   type        attributes (units)                    effect
 *   latency     latency ms, jitter ms                 each chunk leaves at stamp+latency±jitter
 *                                                     (stacked latencies add up, as Toxiproxy)
 *   bandwidth   rate KB/s (> 0)                       paced, no burst (leaky bucket); 1 KB = 1000 bytes
 *   slow_close  delay ms                              FIN/EOF is forwarded delay ms late
 *   timeout     timeout ms                            data dropped; link closed after timeout
 *                                                     (0 = never closed: a blackhole)
 *   reset_peer  timeout ms                            the first input arms it (and is swallowed,
 *                                                     like all after it); RST both ways timeout ms later
 *   slicer      average_size, size_variation bytes,   chunks cut into average_size±variation
 *               delay us                              pieces, delay us apart
 *   limit_data  bytes                                 link closed (FIN) once bytes have passed
 *   corrupt     probability (0..1, per bit)           chaosloco extension: flips seeded bits
 *   noop        (none)                                passes everything (Toxiproxy's noop)
 *
 * Omitted fields default as in Toxiproxy: stream "downstream", toxicity 1,
 * name "<type>_<stream>", every attribute 0 (except where 0 is invalid:
 * bandwidth.rate, slicer.average_size). Unknown keys and out-of-range
 * values are CX_EINVAL with a message naming the field.
 *
 * toxicity: for every (link, toxic) pair one seeded draw decides whether the
 * toxic applies to that link for the link's whole life (0 = never, 1 =
 * always), as in Toxiproxy.
 *
 * Adding, updating or removing a toxic on live links never loses,
 * duplicates or reorders bytes already in flight: a removed toxic's queued
 * chunks are delivered in order (without the removed toxic's delay) before
 * the direction returns to the fast path.
 *
 * Not here: the HTTP endpoints (agent/toxiproxy.c), fault lifetimes and
 * revert bookkeeping (agent registry, injectors/net.c).
 *
 * Thread safety: every function may be called from any thread while the
 * loop runs. Calls take a short lock and wake the loop through an eventfd;
 * none blocks on I/O. proxy_free must not race with other calls on the
 * same proxy.
 */
#ifndef INJ_PROXY_H
#define INJ_PROXY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct proxy proxy;

/* Totals since proxy_new. Bytes count what was written to the far side. */
typedef struct proxy_stats {
    uint64_t bytes_up;        /* bytes delivered client -> upstream server */
    uint64_t bytes_down;      /* bytes delivered upstream server -> client */
    uint64_t conns_accepted;  /* links opened (client accepted and upstream connected) */
    uint64_t conns_open;      /* links open now */
    uint64_t conns_refused;   /* clients accepted then closed because the upstream connect failed
                                 (refusals while disabled/partitioned happen in the kernel) */
    uint64_t conns_dropped;   /* links (open or connecting) cut by a partition or by disabling */
    uint64_t conns_reset;     /* links closed with RST by a toxic (reset_peer) */
    uint64_t upstream_errors; /* failed connects to the upstream */
} proxy_stats;

/* Per-toxic counters since the toxic was added (kept across updates). */
typedef struct proxy_toxic_stats {
    uint64_t links_applied; /* links the toxicity draw applied this toxic to */
    uint64_t links_skipped; /* links the draw spared */
    uint64_t bytes;         /* bytes that went through this toxic on applied links */
    uint64_t chunks;        /* chunks that went through it (after slicing, for slicer) */
    uint64_t delayed_ms;    /* sum of delays it imposed (latency, bandwidth, slicer), ms */
    uint64_t bytes_dropped; /* bytes it discarded (timeout/blackhole, limit_data tail) */
    uint64_t bits_flipped;  /* bits flipped (corrupt) */
    uint64_t closes;        /* links it closed (timeout, limit_data, reset_peer, slow_close) */
} proxy_toxic_stats;

/* ---- lifecycle ---- */

/* Bind listen ("HOST:PORT" or "[IPv6]:PORT", port 0 = ephemeral) now and
 * start the loop thread. upstream is "HOST:PORT" or "[IPv6]:PORT", only
 * checked here (a well-formed name that does not resolve is no error):
 * each new link resolves it (an answer up to 1 s old is reused), tries
 * its addresses in order, non-blocking, and is refused (the client gets a
 * FIN, conns_refused counts it, a rate-limited warning names the
 * upstream) when none answers or the name does not resolve. name is
 * copied (Toxiproxy's proxy name: [A-Za-z0-9_.-], 1..64). NULL + err on
 * failure (CX_EINVAL bad name/address, CX_ESYS bind). */
proxy *proxy_new(const char *name, const char *listen, const char *upstream, char *err, size_t errlen);
/* Close the listener and every link (plain close, queued bytes dropped),
 * join the thread, free. NULL is a no-op. */
void proxy_free(proxy *p);

/* Borrowed strings, valid until proxy_free. listen_addr is the bound
 * address "127.0.0.1:PORT" or "[::1]:PORT" (the real port when 0 was
 * asked); it is only
 * stable for a proxy nobody calls proxy_set_listen on (use proxy_listen
 * for one that may be re-bound). */
const char *proxy_name(const proxy *p);
const char *proxy_listen_addr(const proxy *p);
/* Copies of the current upstream / bound listen address into buf (both
 * can change, see below). */
void proxy_upstream(proxy *p, char *buf, size_t len);
void proxy_listen(proxy *p, char *buf, size_t len);

/* ---- switches ---- */

/* Toxiproxy "enabled". Disabling stops listening (new clients get
 * ECONNREFUSED) and closes every open link; enabling listens again on the
 * same port. */
int proxy_set_enabled(proxy *p, bool enabled, char *err, size_t errlen);
bool proxy_enabled(proxy *p);
/* Toxiproxy echoes the listen address a client gave until the proxy
 * listens on it (then the resolved one): a disabled proxy shows given in
 * proxy_json until it is enabled, reset or re-bound. No-op on an enabled
 * proxy. The proxy itself is bound all along (proxy_listen). */
void proxy_set_listen_echo(proxy *p, const char *given);
/* Toxiproxy POST /proxies/{name} {"upstream": ...}: new links go to the new
 * upstream (resolved for them); open links keep theirs. CX_EINVAL on a
 * malformed address. */
int proxy_set_upstream(proxy *p, const char *upstream, char *err, size_t errlen);
/* Toxiproxy POST /proxies/{name} {"listen": ...}: bind the new address
 * first (CX_EINVAL bad address, CX_ESYS bind failed: nothing changed),
 * then the loop swaps listeners and closes every open link, as Toxiproxy
 * restarts a proxy whose listen changed. Toxics, enabled and partition
 * state are kept. */
int proxy_set_listen(proxy *p, const char *listen, char *err, size_t errlen);

/* Network partition, counted so that overlapping partition faults compose:
 * while the count is > 0 new clients are refused (ECONNREFUSED, like
 * disabled) and, on each 0 -> 1 transition, every open link is closed both
 * ways with RST. release never goes below 0. Independent of "enabled" and
 * of proxy_reset (a partition belongs to its fault, not to Toxiproxy). */
void proxy_partition_hold(proxy *p);
void proxy_partition_release(proxy *p);
bool proxy_partitioned(proxy *p);

/* Toxiproxy POST /reset for this proxy: enabled again, every toxic
 * removed (in-flight bytes still delivered). */
void proxy_reset(proxy *p);

/* ---- toxics ---- */

/* Toxiproxy's lenient decoding, for its API only (the agent's own API
 * stays strict): a new reference to a copy of body keeping the keys
 * Toxiproxy reads, and of "attributes" only the keys of the toxic's type.
 * type NULL: a create body (name, type, stream, toxicity, attributes; the
 * type is the body's); else an update of a toxic of that type (only
 * toxicity and attributes are read, as in Toxiproxy). Dropped keys are
 * appended to ignored (an array; may be NULL) as "key" or
 * "attributes.key". An unknown type or a non-object "attributes" is kept
 * as is, for the strict check to name. */
json_t *proxy_toxic_lenient(json_t *body, const char *type, json_t *ignored);

/* Check a toxic object without a proxy (same rules as proxy_toxic_add).
 * For callers that validate before they create (fault prepare). */
int proxy_toxic_validate(json_t *toxic, char *err, size_t errlen);

/* Add a toxic from its Toxiproxy JSON (borrowed). seed drives its toxicity
 * draws, jitter and corruption (same seed, same per-link decisions and same
 * flipped bits for the same bytes). *out (optional) gets a new reference to
 * the toxic as stored, defaults filled. CX_EINVAL bad JSON (err names the
 * field), CX_ECONFLICT a toxic of that name exists. */
int proxy_toxic_add(proxy *p, json_t *toxic, uint64_t seed, json_t **out, char *err, size_t errlen);

/* Toxiproxy POST /proxies/{p}/toxics/{name}: body (borrowed) may carry
 * "attributes" (merged into the current ones; each key validated) and
 * "toxicity"; "name"/"type"/"stream" when present must equal the current
 * ones. A changed toxicity applies to links opened from now on.
 * CX_ENOTFOUND no such toxic, CX_EINVAL bad body. */
int proxy_toxic_update(proxy *p, const char *name, json_t *body, json_t **out, char *err, size_t errlen);

/* CX_ENOTFOUND when there is no such toxic. */
int proxy_toxic_remove(proxy *p, const char *name, char *err, size_t errlen);

/* New references, Toxiproxy shapes: one toxic (NULL if absent), the array
 * of toxics in chain order, and the proxy
 * {name, listen, upstream, enabled, toxics}. */
json_t *proxy_toxic_json(proxy *p, const char *name);
json_t *proxy_toxics_json(proxy *p);
json_t *proxy_json(proxy *p);

/* ---- counters ---- */

void proxy_stats_get(proxy *p, proxy_stats *s);
/* CX_ENOTFOUND when there is no such toxic. */
int proxy_toxic_stats_get(proxy *p, const char *name, proxy_toxic_stats *s);
/* New reference: proxy_stats fields plus "partitioned", "enabled" and
 * "toxics": {name: {proxy_toxic_stats fields}}. For evidence and /metrics. */
json_t *proxy_stats_json(proxy *p);

#endif
