/* netns.h - regions on one machine: the syncer and each learner unit in its
 * own Linux network namespace, joined by veth pairs to one bridge, with
 * kernel rate limits (tc tbf; tc netem for delay where the kernel has it)
 * on the links that cross regions (topology.network, docs/experiments.md).
 *
 * What it is: the builder and remover of those namespaces and links, and
 * the sweep of what a dead harness left. What it is not: a process
 * launcher (topology.c starts each process inside its namespace with
 * cx_spawn_opts.netns) or a fault injector (the agents' proxies still sit
 * on every unit's path, so per-unit faults work as on loopback).
 *
 * Shape, for a run whose prefix P is "cl<harness pid>" (every name below
 * carries it, so runs never collide and the sweep knows the owner):
 *
 *   root ns (the harness)                 P-hub (no process)
 *   P-h 198.18.S.1/22 ---- veth ---- root ─┐
 *                                          br0 (bridge)
 *   P-s   eth0 198.18.S.2 ---- veth ---- s ┤      the syncer
 *   P-u0  eth0 198.18.S.3 ---- veth ---- u0┤      agent 0 + learner 0
 *   P-u<i> eth0 198.18.S.(3+i) --- veth -- u<i>┘  agent i + learner i
 *
 * Why a bridge in a hub namespace: one subnet reaches everything, so the
 * harness (root ns) needs one link and one address; the bridge is not in the
 * root namespace, so the host's firewall (br_netfilter with a FORWARD DROP
 * policy, e.g. Docker's) never sees the units' traffic; each unit's link is
 * its own veth, so shaping it shapes exactly that unit's traffic (both
 * directions: tbf on the unit's eth0 egress = upstream, on its hub port u<i>
 * egress = downstream). Traffic is only learner <-> syncer (and harness <->
 * everything), so a unit's link is shaped iff its region is not the
 * syncer's; the harness's own calls to a shaped unit share that link.
 *
 * Regions: the syncer is in region 0 and learner i in region (i+1) mod N,
 * i.e. the M+1 places are dealt round-robin starting with the syncer: N = M+1
 * puts every place in its own region, N = 1 puts all in one (namespaces
 * but no shaping).
 *
 * Subnets: each run takes one /22 "slot" of 198.18.0.0/15 (RFC 2544's
 * benchmarking range, not routed on the Internet): 128 slots, so 128 runs
 * at once on one host. Slots are handed out under a lock in
 * NETNS_STATE_DIR, where each run keeps a record (owner pid and its start
 * time, slot, run dir) for as long as its namespaces exist.
 *
 * Cleanup: netns_destroy removes the root link and every namespace of the
 * prefix (deleting the hub's namespace takes every veth with it) and the
 * record; topology.c calls it after every process stopped, on every path
 * (end, error, SIGINT/SIGTERM). After a SIGKILL of the harness, the next
 * harness start runs netns_sweep: every namespace or root link named
 * cl<pid>-... whose owner is dead (no such pid, a zombie, or a different
 * process start time than its record says) is removed, and its record.
 *
 * Everything runs `ip` and `tc` (iproute2) with fork/execve and an argv,
 * never a shell; their stderr becomes the error message.
 */
#ifndef HARNESS_NETNS_H
#define HARNESS_NETNS_H

#include <stddef.h>

#define NETNS_STATE_DIR "/run/chaosloco/netns" /* lock + one record per live run */
#define NETNS_SYNCER (-1)                      /* the syncer's place, where a learner id goes */
#define NETNS_RATE_MAX_MBIT 100000.0           /* 100 Gbit/s */
#define NETNS_DELAY_MAX_MS 60000.0
#define NETNS_UNAVAILABLE "network namespaces unavailable" /* prefix of every can't-do-it-here error */

typedef enum netns_kind {
    NETNS_LOOPBACK = 0, /* today's topology: everything on 127.0.0.1 (the default) */
    NETNS_REGIONS = 1,  /* "netns": one namespace per place, regions, shaped links */
} netns_kind;

/* topology.network as validated by the experiment loader. */
typedef struct netns_spec {
    netns_kind kind;
    int regions;      /* N, 1..M+1 (NETNS_REGIONS) */
    double rate_mbit; /* Mbit/s (1e6 bit/s) per direction of a cross-region link; 0 = no rate limit */
    double delay_ms;  /* ms of one-way delay per direction of a cross-region link (netem); 0 none */
    double jitter_ms; /* ms of netem jitter, 0..delay_ms */
} netns_spec;

/* The region of a place: learner id 0..M-1, or NETNS_SYNCER (region 0). */
int netns_region(const netns_spec *s, int learner);
/* 1 when learner's link to the syncer is shaped: another region than the
 * syncer's, and a rate or a delay to apply. */
int netns_shaped(const netns_spec *s, int learner);
/* The owner pid of a name "cl<pid>-...", or -1 when it is not one. */
long netns_owner_of(const char *name);

/* 0 when this process can build namespaces (effective uid 0, `ip` and `tc`
 * found, a kernel with network namespaces); else CX_ENOTSUP and why
 * ("not root (euid 1000)", ...). */
int netns_available(char *why, size_t len);

typedef struct netns netns;

/* Build the namespaces, links and shaping of spec for m learners under
 * prefix ("cl<pid>", at most 9 characters after "cl") and record them in
 * RUN/network.json and NETNS_STATE_DIR. On failure everything made so far
 * is removed; an error that means "not on this host" starts with
 * NETNS_UNAVAILABLE. 0 or a negative cx_err with err filled. */
int netns_create(const netns_spec *spec, int m, const char *prefix, const char *run_dir, netns **out,
                 char *err, size_t errlen);
/* Path of learner's (or NETNS_SYNCER's) namespace, for setns(2):
 * "/run/netns/<prefix>-u<i>". Borrowed. */
const char *netns_path(const netns *n, int learner);
/* Its address ("198.18.S.H"), where its processes listen. Borrowed. */
const char *netns_addr(const netns *n, int learner);
/* Remove everything netns_create made and free n (NULL is a no-op).
 * Failures are logged; the next netns_sweep retries them. */
void netns_destroy(netns *n);

/* Remove the namespaces and root links of every dead owner (see above).
 * Returns how many owners were swept (>= 0), or a negative cx_err when
 * something could not be removed (err says what; the rest was still
 * tried). A no-op (0) when nothing named cl<pid>-... exists. */
int netns_sweep(char *err, size_t errlen);

#endif
