/* netns.c - regions on one machine (see netns.h for the shape, the names,
 * the regions rule and the cleanup guarantees).
 *
 * A run's network, as this file sees it:
 *
 *   (none) --netns_create(): record written under the lock--> reserved
 *   reserved --build_hub(), build_place() x (M+1)--> built
 *   reserved|built --netns_destroy() / a failed build--> removed
 *   reserved|built --owner SIGKILLed, then netns_sweep() elsewhere--> removed
 *
 * "reserved" holds a record in NETNS_STATE_DIR (its slot is taken) and
 * maybe some namespaces; "built" holds every namespace and link of the
 * shape; "removed" holds nothing named <prefix>-... and no record.
 * remove_prefix() works from the names on the host, not from a list kept
 * in memory, so the same function cleans up a half-built run, a finished
 * one and a dead harness's. assert_built() checks "built" in debug builds.
 *
 * Everything here runs on the harness's main thread (find_tool's cache is
 * not locked).
 */
#include "harness/netns.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/file.h"
#include "common/log.h"
#include "common/proc.h"
#include "injectors/unit_proc.h"

#define NETNS_RUN_DIR "/run/netns" /* where `ip netns add` binds names */
#define NETNS_SYS_NET "/sys/class/net"
#define NETNS_SLOTS 128        /* /22 slots in 198.18.0.0/15 */
#define NETNS_BASE 0xC6120000u /* 198.18.0.0 */
#define NETNS_SLOT_SIZE 1024u  /* addresses per slot (/22) */
#define NETNS_PLEN "/22"
#define NETNS_TOOL_MS 20000      /* bound on one ip/tc call */
#define NETNS_LOCK_MS 30000      /* bound on waiting for the state lock */
#define NETNS_TBF_LATENCY_MS 100 /* tbf queue: what 100 ms at the rate holds, plus the burst */
#define NETNS_TBF_MIN_BURST 6056 /* 4 full Ethernet frames: tbf splits larger GSO packets */
#define NETNS_NAME 64

struct netns {
    netns_spec spec;          /* what was asked for */
    int m;                    /* learners */
    char prefix[16];          /* "cl<pid>" */
    int slot;                 /* 0..NETNS_SLOTS-1 */
    char record[128];         /* NETNS_STATE_DIR/<prefix>.json */
    char run_dir[1024];       /* RUN (network.json) */
    char (*path)[NETNS_NAME]; /* [m+1] namespace paths: [0] syncer, [1+i] learner i */
    char (*addr)[20];         /* [m+1] addresses, same order */
};

/* ---- netns: regions ---- */

int netns_region(const netns_spec *s, int learner)
{
    if (s->regions < 1 || learner == NETNS_SYNCER)
        return 0;
    return (learner + 1) % s->regions;
}

int netns_shaped(const netns_spec *s, int learner)
{
    if (s->kind != NETNS_REGIONS || learner == NETNS_SYNCER)
        return 0;
    if (s->rate_mbit <= 0 && s->delay_ms <= 0 && s->jitter_ms <= 0)
        return 0;
    return netns_region(s, learner) != netns_region(s, NETNS_SYNCER);
}

long netns_owner_of(const char *name)
{
    if (strncmp(name, "cl", 2) != 0)
        return -1;
    const char *p = name + 2;
    long pid = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 10) {
        pid = pid * 10 + (*p - '0');
        p++;
        digits++;
    }
    if (!digits || *p != '-' || pid <= 0)
        return -1;
    return pid;
}

/* ---- netns: running ip and tc ---- */

static const char *find_tool(const char *name)
{
    static char found[2][64];
    static const char *const dirs[] = {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/", NULL};
    int k = strcmp(name, "ip") == 0 ? 0 : 1;
    if (found[k][0])
        return found[k];
    for (int i = 0; dirs[i]; i++) {
        char p[64];
        snprintf(p, sizeof p, "%s%s", dirs[i], name);
        if (access(p, X_OK) == 0) {
            snprintf(found[k], sizeof found[k], "%s", p);
            return found[k];
        }
    }
    return NULL;
}

/* Run argv (argv[0] "ip" or "tc", looked up by find_tool) with cx_run,
 * bounded by NETNS_TOOL_MS: 0 on exit status 0, else the error naming the
 * command and its output. With out, its stdout and stderr are copied there. */
static int run_tool_out(const char *const *argv, char *out_text, size_t outlen, char *err, size_t errlen)
{
    const char *exe = find_tool(argv[0]);
    if (!exe)
        return cx_fail(err, errlen, CX_ENOTSUP,
                       "%s: %s not found in /usr/sbin, /sbin, /usr/bin, /bin (iproute2)", NETNS_UNAVAILABLE,
                       argv[0]);
    const char *av[40];
    size_t n = 0;
    av[n++] = exe;
    for (size_t i = 1; argv[i] && n + 1 < sizeof av / sizeof av[0]; i++)
        av[n++] = argv[i];
    av[n] = NULL;
    return cx_run(av, argv[0], NETNS_TOOL_MS, out_text, outlen, err, errlen);
}

static int run_tool(const char *const *argv, char *err, size_t errlen)
{
    return run_tool_out(argv, NULL, 0, err, errlen);
}

#define TOOL(err, errlen, ...) run_tool((const char *const[]){__VA_ARGS__, NULL}, err, errlen)
#define TOOL_OUT(out, outlen, err, errlen, ...)                                                              \
    run_tool_out((const char *const[]){__VA_ARGS__, NULL}, out, outlen, err, errlen)

int netns_available(char *why, size_t len)
{
    if (geteuid() != 0)
        return cx_fail(why, len, CX_ENOTSUP,
                       "not root (euid %d): kind netns needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN)",
                       (int)geteuid());
    if (access("/proc/self/ns/net", F_OK) != 0)
        return cx_fail(why, len, CX_ENOTSUP, "this kernel has no network namespaces (/proc/self/ns/net)");
    if (!find_tool("ip"))
        return cx_fail(why, len, CX_ENOTSUP, "`ip` (iproute2) not found in /usr/sbin, /sbin, /usr/bin, /bin");
    if (!find_tool("tc"))
        return cx_fail(why, len, CX_ENOTSUP, "`tc` (iproute2) not found in /usr/sbin, /sbin, /usr/bin, /bin");
    return 0;
}

/* ---- netns: owners and records ---- */

/* The start time of pid (clock ticks since boot, injectors/unit_proc);
 * 0 when it does not exist or is a zombie (dead, not yet reaped). */
static unsigned long long proc_start(long pid)
{
    char st = uproc_state((pid_t)pid);
    return st && st != 'Z' && st != 'X' ? uproc_starttime((pid_t)pid) : 0;
}

static void record_path(char *out, size_t len, long pid)
{
    snprintf(out, len, "%s/cl%ld.json", NETNS_STATE_DIR, pid);
}

/* The record of owner pid: its start time and slot (-1, 0 when none). */
static void record_read(long pid, unsigned long long *start, int *slot)
{
    char path[128];
    record_path(path, sizeof path, pid);
    *start = 0;
    *slot = -1;
    json_t *o = json_load_file(path, 0, NULL);
    if (!o)
        return;
    json_t *s = json_object_get(o, "start"), *k = json_object_get(o, "slot");
    if (json_is_integer(s) && json_integer_value(s) > 0)
        *start = (unsigned long long)json_integer_value(s);
    if (json_is_integer(k) && json_integer_value(k) >= 0 && json_integer_value(k) < NETNS_SLOTS)
        *slot = (int)json_integer_value(k);
    json_decref(o);
}

/* 1 while pid is the harness that made the record (or, without a record,
 * while any live process has that pid). */
static int owner_alive(long pid)
{
    if (pid == (long)getpid())
        return 1;
    unsigned long long now = proc_start(pid), rec;
    int slot;
    if (!now)
        return 0;
    record_read(pid, &rec, &slot);
    return !rec || rec == now;
}

/* Take NETNS_STATE_DIR's lock (bounded): its fd, or a negative cx_err. */
static int state_lock(char *err, size_t errlen)
{
    int rc = cx_mkdir_p(NETNS_STATE_DIR, err, errlen);
    if (rc < 0)
        return rc;
    int fd = open(NETNS_STATE_DIR "/lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return cx_fail(err, errlen, CX_ESYS, "open %s/lock: %s", NETNS_STATE_DIR, strerror(errno));
    int64_t end = cx_mono_ms() + NETNS_LOCK_MS;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
            int e = errno;
            close(fd);
            return cx_fail(err, errlen, CX_ESYS, "lock %s/lock: %s", NETNS_STATE_DIR, strerror(e));
        }
        if (cx_mono_ms() >= end) {
            close(fd);
            return cx_fail(err, errlen, CX_ETIMEDOUT, "%s/lock held for more than %d ms", NETNS_STATE_DIR,
                           NETNS_LOCK_MS);
        }
        cx_sleep_ms(50);
    }
    return fd;
}

static void state_unlock(int fd)
{
    if (fd >= 0) {
        flock(fd, LOCK_UN);
        close(fd);
    }
}

/* ---- netns: removal by name ---- */

/* Every owner pid named in dir's entries (cl<pid>-...; with suffix, only
 * names ending in it) into pids (deduplicated, up to cap). */
static int collect_owners(const char *dir, const char *suffix, long *pids, int n, int cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return n;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap) {
        long pid = netns_owner_of(de->d_name);
        if (pid < 0)
            continue;
        if (suffix) {
            size_t nl = strlen(de->d_name), sl = strlen(suffix);
            if (nl < sl || strcmp(de->d_name + nl - sl, suffix) != 0)
                continue;
        }
        int seen = 0;
        for (int i = 0; i < n; i++)
            seen |= pids[i] == pid;
        if (!seen)
            pids[n++] = pid;
    }
    closedir(d);
    return n;
}

/* Remove the root link and every namespace of prefix; 0 or the first error
 * (everything is still tried). */
static int remove_prefix(const char *prefix, char *err, size_t errlen)
{
    int rc = 0;
    char link[32], path[128], e2[CX_ERRLEN];
    snprintf(link, sizeof link, "%s-h", prefix);
    snprintf(path, sizeof path, "%s/%s", NETNS_SYS_NET, link);
    if (access(path, F_OK) == 0 && TOOL(e2, sizeof e2, "ip", "link", "del", link) < 0 &&
        access(path, F_OK) == 0)
        rc = cx_fail(err, errlen, CX_ESYS, "%s", e2);
    char want[24];
    snprintf(want, sizeof want, "%s-", prefix);
    DIR *d = opendir(NETNS_RUN_DIR);
    if (!d)
        return rc;
    char names[300][NETNS_NAME];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 300)
        if (strncmp(de->d_name, want, strlen(want)) == 0 && strlen(de->d_name) < NETNS_NAME)
            snprintf(names[n++], NETNS_NAME, "%s", de->d_name);
    closedir(d);
    for (int i = 0; i < n; i++) {
        if (TOOL(e2, sizeof e2, "ip", "netns", "del", names[i]) < 0) {
            snprintf(path, sizeof path, "%s/%s", NETNS_RUN_DIR, names[i]);
            if (access(path, F_OK) == 0 && rc == 0) /* gone meanwhile (a concurrent sweep) is fine */
                rc = cx_fail(err, errlen, CX_ESYS, "%s", e2);
        }
    }
    return rc;
}

/* The sweep, with the state lock held (or, not root, without it: then it
 * can only report). Returns owners swept or the first error. */
static int sweep_locked(char *err, size_t errlen)
{
    long pids[1024];
    int n = 0;
    n = collect_owners(NETNS_RUN_DIR, NULL, pids, n, 1024);
    n = collect_owners(NETNS_SYS_NET, "-h", pids, n, 1024);
    DIR *d = opendir(NETNS_STATE_DIR);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) && n < 1024) {
            long pid = netns_owner_of(de->d_name);
            size_t nl = strlen(de->d_name);
            if (pid < 0 && strncmp(de->d_name, "cl", 2) == 0 && nl > 7 &&
                strcmp(de->d_name + nl - 5, ".json") == 0) {
                char num[16];
                snprintf(num, sizeof num, "cl%.*s-", (int)(nl - 7), de->d_name + 2);
                pid = netns_owner_of(num);
            }
            int seen = 0;
            for (int i = 0; i < n && pid > 0; i++)
                seen |= pids[i] == pid;
            if (pid > 0 && !seen)
                pids[n++] = pid;
        }
        closedir(d);
    }
    int swept = 0, rc = 0;
    for (int i = 0; i < n; i++) {
        if (owner_alive(pids[i]))
            continue;
        char prefix[24], e2[CX_ERRLEN] = "", rec[128];
        snprintf(prefix, sizeof prefix, "cl%ld", pids[i]);
        if (geteuid() != 0) {
            if (rc == 0)
                rc = cx_fail(err, errlen, CX_ENOTSUP, "not root: cannot remove %s-* (left by a dead harness)",
                             prefix);
            continue;
        }
        int r = remove_prefix(prefix, e2, sizeof e2);
        if (r < 0) {
            if (rc == 0)
                rc = cx_fail(err, errlen, r, "%s", e2);
            continue;
        }
        record_path(rec, sizeof rec, pids[i]);
        unlink(rec);
        cx_info("netns sweep: removed the namespaces and links of dead harness pid %ld (%s-*)", pids[i],
                prefix);
        swept++;
    }
    return rc < 0 ? rc : swept;
}

int netns_sweep(char *err, size_t errlen)
{
    long pids[4];
    int n = collect_owners(NETNS_RUN_DIR, NULL, pids, 0, 4);
    n = collect_owners(NETNS_SYS_NET, "-h", pids, n, 4);
    struct stat sb;
    if (n == 0 && stat(NETNS_STATE_DIR, &sb) != 0)
        return 0; /* nothing on this host: no lock needed (and none possible when not root) */
    int fd = geteuid() == 0 ? state_lock(err, errlen) : -1;
    if (geteuid() == 0 && fd < 0)
        return fd;
    int rc = sweep_locked(err, errlen);
    state_unlock(fd);
    return rc;
}

/* ---- netns: build ---- */

static void fmt_addr(char *out, size_t len, int slot, unsigned host)
{
    uint32_t a = NETNS_BASE + (uint32_t)slot * NETNS_SLOT_SIZE + host;
    snprintf(out, len, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255u, (a >> 8) & 255u, a & 255u);
}

/* The place's short name: "s" for the syncer (index 0), "u<i>" for learner i. */
static void place_name(char *out, size_t len, int idx)
{
    if (idx == 0)
        snprintf(out, len, "s");
    else
        snprintf(out, len, "u%d", idx - 1);
}

/* Reserve a slot: sweep the dead, take the lowest slot no live record
 * holds, write our record. */
static int reserve(netns *n, const char *run_dir, char *err, size_t errlen)
{
    int fd = state_lock(err, errlen);
    if (fd < 0)
        return fd;
    char e2[CX_ERRLEN] = "";
    if (sweep_locked(e2, sizeof e2) < 0)
        cx_warn("netns sweep: %s", e2);
    int used[NETNS_SLOTS] = {0};
    DIR *d = opendir(NETNS_STATE_DIR);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        long pid = -1;
        size_t nl = strlen(de->d_name);
        if (strncmp(de->d_name, "cl", 2) == 0 && nl > 7 && strcmp(de->d_name + nl - 5, ".json") == 0) {
            char num[16];
            snprintf(num, sizeof num, "cl%.*s-", (int)(nl - 7), de->d_name + 2);
            pid = netns_owner_of(num);
        }
        unsigned long long start;
        int slot;
        if (pid <= 0)
            continue;
        record_read(pid, &start, &slot);
        if (slot >= 0)
            used[slot] = 1;
    }
    if (d)
        closedir(d);
    n->slot = -1;
    for (int k = 0; k < NETNS_SLOTS && n->slot < 0; k++)
        if (!used[k])
            n->slot = k;
    int rc = 0;
    if (n->slot < 0) {
        rc = cx_fail(err, errlen, CX_EBUSY, "all %d address slots of 198.18.0.0/15 are taken by live runs",
                     NETNS_SLOTS);
    } else {
        json_t *o = json_pack("{s:I, s:I, s:i, s:s, s:s}", "pid", (json_int_t)getpid(), "start",
                              (json_int_t)proc_start(getpid()), "slot", n->slot, "prefix", n->prefix,
                              "run_dir", run_dir);
        char *s = o ? json_dumps(o, JSON_SORT_KEYS) : NULL;
        json_decref(o);
        rc = s ? cx_file_write_atomic(n->record, s, strlen(s), err, errlen)
               : cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        free(s);
    }
    state_unlock(fd);
    return rc;
}

/* tbf (and netem first when there is a delay) on dev's egress in ns. */
static int shape(const netns_spec *s, const char *ns, const char *dev, char *err, size_t errlen)
{
    int rc;
    const char *parent[2] = {"root", NULL};
    if (s->delay_ms > 0 || s->jitter_ms > 0) {
        char delay[32], jitter[32];
        snprintf(delay, sizeof delay, "%.3fms", s->delay_ms);
        snprintf(jitter, sizeof jitter, "%.3fms", s->jitter_ms);
        rc = s->jitter_ms > 0 ? TOOL(err, errlen, "tc", "-n", ns, "qdisc", "add", "dev", dev, "root",
                                     "handle", "1:", "netem", "delay", delay, jitter)
                              : TOOL(err, errlen, "tc", "-n", ns, "qdisc", "add", "dev", dev, "root",
                                     "handle", "1:", "netem", "delay", delay);
        if (rc < 0) {
            size_t l = strlen(err);
            if (strstr(err, "unknown") && l + 1 < errlen)
                snprintf(err + l, errlen - l,
                         " (this kernel has no sch_netem: delay_ms and jitter_ms need it; set them to 0)");
            return rc;
        }
        parent[0] = "parent";
        parent[1] = "1:1";
    }
    if (s->rate_mbit <= 0)
        return 0;
    double bps = s->rate_mbit * 1e6;
    double burst = bps / 8 * 0.005; /* 5 ms at the rate */
    if (burst < NETNS_TBF_MIN_BURST)
        burst = NETNS_TBF_MIN_BURST;
    char rate[32], bur[32], lat[32];
    snprintf(rate, sizeof rate, "%.0fbit", bps);
    snprintf(bur, sizeof bur, "%.0f", burst);
    snprintf(lat, sizeof lat, "%dms", NETNS_TBF_LATENCY_MS);
    if (parent[1])
        return TOOL(err, errlen, "tc", "-n", ns, "qdisc", "add", "dev", dev, parent[0], parent[1], "handle",
                    "10:", "tbf", "rate", rate, "burst", bur, "latency", lat);
    return TOOL(err, errlen, "tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "10:", "tbf",
                "rate", rate, "burst", bur, "latency", lat);
}

/* One place (index idx: 0 syncer, 1+i learner i): its namespace, its veth
 * to the hub's bridge, its address, its shaping. */
static int build_place(netns *n, int idx, const char *hub, char *err, size_t errlen)
{
    int rc;
    char pn[8], ns[NETNS_NAME], cidr[32];
    place_name(pn, sizeof pn, idx);
    snprintf(ns, sizeof ns, "%s-%s", n->prefix, pn);
    fmt_addr(n->addr[idx], sizeof n->addr[idx], n->slot, 2u + (unsigned)idx);
    snprintf(n->path[idx], sizeof n->path[idx], "%s/%s", NETNS_RUN_DIR, ns);
    snprintf(cidr, sizeof cidr, "%s%s", n->addr[idx], NETNS_PLEN);
    if ((rc = TOOL(err, errlen, "ip", "netns", "add", ns)) < 0 ||
        (rc = TOOL(err, errlen, "ip", "-n", ns, "link", "set", "lo", "up")) < 0 ||
        (rc = TOOL(err, errlen, "ip", "-n", hub, "link", "add", pn, "type", "veth", "peer", "name", "eth0",
                   "netns", ns)) < 0 ||
        (rc = TOOL(err, errlen, "ip", "-n", hub, "link", "set", pn, "master", "br0")) < 0 ||
        (rc = TOOL(err, errlen, "ip", "-n", hub, "link", "set", pn, "up")) < 0 ||
        (rc = TOOL(err, errlen, "ip", "-n", ns, "addr", "add", cidr, "dev", "eth0")) < 0 ||
        (rc = TOOL(err, errlen, "ip", "-n", ns, "link", "set", "eth0", "up")) < 0)
        return rc;
    int learner = idx == 0 ? NETNS_SYNCER : idx - 1;
    if (!netns_shaped(&n->spec, learner))
        return 0;
    /* upstream: the unit's own egress; downstream: its hub port's egress */
    if ((rc = shape(&n->spec, ns, "eth0", err, errlen)) < 0 ||
        (rc = shape(&n->spec, hub, pn, err, errlen)) < 0)
        return rc;
    return 0;
}

/* The hub (bridge) and the harness's link into it. */
static int build_hub(netns *n, const char *hub, char *err, size_t errlen)
{
    int rc;
    char link[32], cidr[32], a[20];
    snprintf(link, sizeof link, "%s-h", n->prefix);
    fmt_addr(a, sizeof a, n->slot, 1);
    snprintf(cidr, sizeof cidr, "%s%s", a, NETNS_PLEN);
    if ((rc = TOOL(err, errlen, "ip", "netns", "add", hub)) < 0) {
        char e2[CX_ERRLEN];
        snprintf(e2, sizeof e2, "%s", err ? err : "");
        return cx_fail(err, errlen, CX_ENOTSUP, "%s: %s", NETNS_UNAVAILABLE, e2);
    }
    if ((rc = TOOL(err, errlen, "ip", "-n", hub, "link", "add", "br0", "type", "bridge")) < 0 ||
        (rc = TOOL(err, errlen, "ip", "-n", hub, "link", "set", "br0", "up")) < 0 ||
        (rc = TOOL(err, errlen, "ip", "link", "add", link, "type", "veth", "peer", "name", "root", "netns",
                   hub)) < 0 ||
        (rc = TOOL(err, errlen, "ip", "-n", hub, "link", "set", "root", "master", "br0")) < 0 ||
        (rc = TOOL(err, errlen, "ip", "-n", hub, "link", "set", "root", "up")) < 0 ||
        (rc = TOOL(err, errlen, "ip", "addr", "add", cidr, "dev", link)) < 0 ||
        (rc = TOOL(err, errlen, "ip", "link", "set", link, "up")) < 0)
        return rc;
    return 0;
}

/* RUN/network.json: what was made, for the operator and for tests. */
static void write_run_record(const netns *n, const char *run_dir)
{
    json_t *o = json_object();
    char a[20], subnet[32];
    fmt_addr(a, sizeof a, n->slot, 0);
    snprintf(subnet, sizeof subnet, "%s%s", a, NETNS_PLEN);
    fmt_addr(a, sizeof a, n->slot, 1);
    json_object_set_new(o, "kind", json_string("netns"));
    json_object_set_new(o, "prefix", json_string(n->prefix));
    json_object_set_new(o, "owner_pid", json_integer(getpid()));
    json_object_set_new(o, "subnet", json_string(subnet));
    json_object_set_new(o, "harness_addr", json_string(a));
    char buf[NETNS_NAME];
    snprintf(buf, sizeof buf, "%s-h", n->prefix);
    json_object_set_new(o, "root_link", json_string(buf));
    snprintf(buf, sizeof buf, "%s-hub", n->prefix);
    json_object_set_new(o, "hub_netns", json_string(buf));
    json_object_set_new(o, "regions", json_integer(n->spec.regions));
    json_object_set_new(o, "rate_mbit", json_real(n->spec.rate_mbit));
    json_object_set_new(o, "delay_ms", json_real(n->spec.delay_ms));
    json_object_set_new(o, "jitter_ms", json_real(n->spec.jitter_ms));
    json_t *places = json_array();
    for (int idx = 0; idx <= n->m; idx++) {
        int learner = idx == 0 ? NETNS_SYNCER : idx - 1;
        const char *base = strrchr(n->path[idx], '/');
        json_t *p =
            json_pack("{s:s, s:s, s:i, s:b}", "netns", base ? base + 1 : n->path[idx], "addr", n->addr[idx],
                      "region", netns_region(&n->spec, learner), "shaped", netns_shaped(&n->spec, learner));
        if (idx == 0)
            json_object_set_new(p, "role", json_string("syncer"));
        else
            json_object_set_new(p, "learner", json_integer(idx - 1));
        json_array_append_new(places, p);
    }
    json_object_set_new(o, "places", places);
    char path[1100];
    snprintf(path, sizeof path, "%s/network.json", run_dir);
    char *s = json_dumps(o, JSON_INDENT(1) | JSON_SORT_KEYS);
    json_decref(o);
    char e2[CX_ERRLEN];
    if (!s || cx_file_write_atomic(path, s, strlen(s), e2, sizeof e2) < 0)
        cx_warn("netns: cannot write %s", path);
    free(s);
}

static void netns_free(netns *n)
{
    if (!n)
        return;
    free(n->path);
    free(n->addr);
    free(n);
}

#ifndef NDEBUG
/* "built": every namespace of the shape and the root link exist. */
static void assert_built(const netns *n)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s-h", NETNS_SYS_NET, n->prefix);
    assert(access(p, F_OK) == 0);
    snprintf(p, sizeof p, "%s/%s-hub", NETNS_RUN_DIR, n->prefix);
    assert(access(p, F_OK) == 0);
    for (int idx = 0; idx <= n->m; idx++)
        assert(access(n->path[idx], F_OK) == 0 && n->addr[idx][0]);
}
#else
#define assert_built(n) ((void)0)
#endif

int netns_create(const netns_spec *spec, int m, const char *prefix, const char *run_dir, netns **out,
                 char *err, size_t errlen)
{
    *out = NULL;
    char why[CX_ERRLEN];
    if (!spec || spec->kind != NETNS_REGIONS || m < 1 || m > 1000 || !prefix || netns_owner_of(prefix) >= 0 ||
        strlen(prefix) > 11 || !run_dir)
        return cx_fail(err, errlen, CX_EINVAL, "netns: bad arguments");
    {
        char probe[24];
        snprintf(probe, sizeof probe, "%s-", prefix);
        if (netns_owner_of(probe) != (long)getpid())
            return cx_fail(err, errlen, CX_EINVAL, "netns: prefix %s is not cl<this pid>", prefix);
    }
    if (spec->regions < 1 || spec->regions > m + 1)
        return cx_fail(err, errlen, CX_EINVAL, "netns: regions %d not in 1..%d", spec->regions, m + 1);
    if (netns_available(why, sizeof why) < 0)
        return cx_fail(err, errlen, CX_ENOTSUP, "%s: %s", NETNS_UNAVAILABLE, why);
    netns *n = calloc(1, sizeof *n);
    if (!n)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    n->spec = *spec;
    n->m = m;
    snprintf(n->prefix, sizeof n->prefix, "%s", prefix);
    snprintf(n->record, sizeof n->record, "%s/%s.json", NETNS_STATE_DIR, prefix);
    n->path = calloc((size_t)m + 1, sizeof *n->path);
    n->addr = calloc((size_t)m + 1, sizeof *n->addr);
    if (!n->path || !n->addr) {
        netns_free(n);
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    int rc = reserve(n, run_dir, err, errlen);
    if (rc < 0) {
        netns_free(n);
        return rc;
    }
    char hub[NETNS_NAME];
    snprintf(hub, sizeof hub, "%s-hub", prefix);
    int64_t t0 = cx_mono_ms();
    /* Names with our prefix that exist already belong to an earlier process
     * that had our pid: the sweep never takes them (the pid is alive: us). */
    char e2[CX_ERRLEN];
    if (remove_prefix(prefix, e2, sizeof e2) < 0)
        cx_warn("netns: leftovers of an earlier pid %d: %s", (int)getpid(), e2);
    rc = build_hub(n, hub, err, errlen);
    for (int idx = 0; rc == 0 && idx <= m; idx++)
        rc = build_place(n, idx, hub, err, errlen);
    if (rc < 0) {
        netns_destroy(n);
        return rc;
    }
    assert_built(n);
    snprintf(n->run_dir, sizeof n->run_dir, "%s", run_dir);
    write_run_record(n, run_dir);
    cx_info(
        "netns: %d namespaces under %s-* in 198.18.0.0/15 slot %d, %d regions, rate %g Mbit/s, delay %g ms "
        "(built in %lld ms)",
        m + 2, prefix, n->slot, spec->regions, spec->rate_mbit, spec->delay_ms,
        (long long)(cx_mono_ms() - t0));
    *out = n;
    return 0;
}

const char *netns_path(const netns *n, int learner)
{
    int idx = learner == NETNS_SYNCER ? 0 : learner + 1;
    return n && idx >= 0 && idx <= n->m ? n->path[idx] : NULL;
}

const char *netns_addr(const netns *n, int learner)
{
    int idx = learner == NETNS_SYNCER ? 0 : learner + 1;
    return n && idx >= 0 && idx <= n->m ? n->addr[idx] : NULL;
}

/* The shaping qdisc's counters on dev in ns (`tc -s -j qdisc show`): {kind,
 * bytes, packets, drops, overlimits} of the tbf (or netem), or NULL. */
static json_t *qdisc_stats(const char *ns, const char *dev)
{
    char text[8192], e2[CX_ERRLEN];
    if (TOOL_OUT(text, sizeof text, e2, sizeof e2, "tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", dev) <
        0)
        return NULL;
    json_t *arr = json_loads(text, 0, NULL), *q, *best = NULL;
    size_t i;
    json_array_foreach(arr, i, q)
    {
        const char *k = json_string_value(json_object_get(q, "kind"));
        if (k && (strcmp(k, "tbf") == 0 || (strcmp(k, "netem") == 0 && !best)))
            best = q;
    }
    json_t *r = NULL;
    if (best) {
        r = json_object();
        static const char *const keys[] = {"kind", "bytes", "packets", "drops", "overlimits", NULL};
        for (int k = 0; keys[k]; k++)
            if (json_object_get(best, keys[k]))
                json_object_set(r, keys[k], json_object_get(best, keys[k]));
    }
    json_decref(arr);
    return r;
}

/* Before removal: every shaped link's qdisc counters into RUN/network.json
 * ("stats"), the evidence that the kernel shaped what went through. */
static void record_stats(const netns *n)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/network.json", n->run_dir);
    json_t *o = n->run_dir[0] ? json_load_file(path, 0, NULL) : NULL;
    json_t *places = json_object_get(o, "places");
    if (!places)
        goto out;
    for (int idx = 1; idx <= n->m; idx++) {
        if (!netns_shaped(&n->spec, idx - 1))
            continue;
        char ns[NETNS_NAME], hub[NETNS_NAME], pn[8];
        place_name(pn, sizeof pn, idx);
        snprintf(ns, sizeof ns, "%s-%s", n->prefix, pn);
        snprintf(hub, sizeof hub, "%s-hub", n->prefix);
        json_t *st = json_object();
        json_t *up = qdisc_stats(ns, "eth0"), *down = qdisc_stats(hub, pn);
        if (up)
            json_object_set_new(st, "upstream", up);
        if (down)
            json_object_set_new(st, "downstream", down);
        json_object_set_new(json_array_get(places, (size_t)idx), "stats", st);
    }
    char *s = json_dumps(o, JSON_INDENT(1) | JSON_SORT_KEYS);
    if (s)
        cx_file_write_atomic(path, s, strlen(s), NULL, 0);
    free(s);
out:
    json_decref(o);
}

void netns_destroy(netns *n)
{
    if (!n)
        return;
    record_stats(n);
    char e2[CX_ERRLEN] = "";
    if (remove_prefix(n->prefix, e2, sizeof e2) < 0)
        cx_warn("netns: removing %s-*: %s (the next harness start sweeps it)", n->prefix, e2);
    else
        unlink(n->record);
    netns_free(n);
}
