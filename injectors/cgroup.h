/* cgroup.h - one unit's cgroups: freezer, CPU quota and memory limit.
 *
 * A cg_set is the unit's directory `chaosloco/<unit-id>` in each available
 * hierarchy, created on open. It works with cgroup v2 (unified hierarchy
 * mounted at the root, controllers listed in cgroup.controllers) and v1
 * (one hierarchy per controller: <root>/freezer, <root>/cpu, <root>/memory);
 * a hybrid host's extra v2 mount at <root>/unified is not used. Under the
 * system root (/sys/fs/cgroup) the unit's directory is placed below the
 * calling process's own cgroup of that hierarchy (/proc/self/cgroup), so a
 * unit never escapes the limits the agent itself runs under. An overridden
 * root (argument or CHAOSLOCO_CGROUP_ROOT, e.g. a fake tree in tests) is
 * taken literally: <root>/<ctrl>/chaosloco/<unit> (v1) or
 * <root>/chaosloco/<unit> (v2).
 *
 * Nothing here fails the agent: a hierarchy that is missing, read-only, or
 * lacks its control file is simply "unavailable" with a reason
 * (cg_set_why), and injectors fall back (pause, cpu) or answer CX_ENOTSUP
 * (memory). What this module does not do: reap, or track which fault set
 * which value (the injectors own that; see docs/internals/cgroup.md). The
 * one signal it sends is the end of every process in the unit's cgroup
 * (cg_set_kill, cg_kill_spec_signal): a process that left the unit's
 * process group (setsid) is still in its cgroup.
 */
#ifndef INJ_CGROUP_H
#define INJ_CGROUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum cg_ctrl {
    CG_FREEZER = 0, /* v1 freezer.state / v2 cgroup.freeze */
    CG_CPU = 1,     /* v1 cpu.cfs_quota_us+cfs_period_us / v2 cpu.max */
    CG_MEMORY = 2,  /* v1 memory.limit_in_bytes / v2 memory.max */
    CG_NCTRL = 3,
} cg_ctrl;

typedef struct cg_set cg_set;

#define CG_DEFAULT_ROOT "/sys/fs/cgroup"
#define CG_PERIOD_US 100000 /* CPU quota period written with every quota */

/* Open (and create) the unit's cgroups. root NULL: $CHAOSLOCO_CGROUP_ROOT,
 * else CG_DEFAULT_ROOT. Fails only on a bad unit_id (CX_EINVAL: it must be
 * 1..64 chars of [A-Za-z0-9._-], not "." or "..") or CX_ENOMEM; an
 * unusable hierarchy is reported through cg_set_available/cg_set_why. */
int cg_set_open(const char *root, const char *unit_id, cg_set **out, char *err, size_t errlen);
void cg_set_free(cg_set *s);

/* 1 if the controller's unit cgroup exists and its control file is
 * writable. */
int cg_set_available(const cg_set *s, cg_ctrl c);
/* Why a controller is unavailable ("" when available). Borrowed. */
const char *cg_set_why(const cg_set *s, cg_ctrl c);
/* The unit's directory for c ("" when unavailable), its cgroup version
 * (1, 2; 0 when unavailable) and the root the set was opened with. */
const char *cg_set_dir(const cg_set *s, cg_ctrl c);
int cg_set_version(const cg_set *s, cg_ctrl c);
const char *cg_set_root(const cg_set *s);

/* Move every process whose process group is pgid into the unit's cgroup of
 * controller c (cgroup.procs): the leader pgid first, then the others found
 * by a scan of /proc. CX_ENOTFOUND if no such process,
 * CX_ENOTSUP if c is unavailable. For v1 memory it first asks the kernel to
 * move the processes' existing charges along (memory.move_charge_at_immigrate
 * = 3, best effort: newer kernels may refuse, then only new allocations
 * count against the limit). */
int cg_set_attach_group(cg_set *s, cg_ctrl c, pid_t pgid, char *err, size_t errlen);

/* Freeze (1) or thaw (0) the unit's freezer cgroup. Returns at once; the
 * kernel may take a moment to reach the state (v1 "FREEZING"). */
int cg_set_freeze(cg_set *s, int frozen, char *err, size_t errlen);
/* Read the freezer state: v1 the contents of freezer.state ("THAWED",
 * "FREEZING", "FROZEN"), v2 the "frozen 0|1" line of cgroup.events.
 * *frozen = 1 only once fully frozen. */
int cg_set_freezer_state(cg_set *s, char *state, size_t len, int *frozen, char *err, size_t errlen);

/* Limit the unit to cpus CPUs (quota = cpus * CG_PERIOD_US per period,
 * at least 1000 us); cpus <= 0 removes the limit. contents (optional) gets
 * what the files hold afterwards: v1 "cfs_quota_us=Q cfs_period_us=P",
 * v2 the cpu.max line. */
int cg_set_cpu_quota(cg_set *s, double cpus, char *contents, size_t clen, char *err, size_t errlen);

/* Set the memory limit in bytes; bytes < 0 removes it. contents as above
 * (the limit file read back). v1 refuses a limit below current usage with
 * EBUSY, reported as CX_EBUSY. */
int cg_set_memory_limit(cg_set *s, int64_t bytes, char *contents, size_t clen, char *err, size_t errlen);

/* Current memory usage of the unit's cgroup in bytes (v1
 * memory.usage_in_bytes, v2 memory.current). */
int cg_set_memory_usage(cg_set *s, int64_t *bytes, char *err, size_t errlen);

/* Unit cleanup: thaw, move any process left in the unit's cgroups back to
 * the parent of chaosloco/, rmdir the unit directories (and chaosloco/ when
 * empty). Idempotent; the first failure is reported, the rest still tried.
 * Call cg_set_kill first for a unit that must not outlive its agent. */
int cg_set_remove(cg_set *s, char *err, size_t errlen);

/* ---- every process in the unit's cgroup ----
 *
 * Children inherit their cgroup, and only root can move a process out of
 * it, so the unit's cgroup holds everything the unit started, including a
 * child that called setsid() and so left the process group the supervisor
 * signals. A signal goes to a pid listed in cgroup.procs only through a
 * pidfd opened before its /proc/PID/cgroup is checked to name the unit's
 * cgroup: a pid that was recycled in between is never signalled.
 */
#define CG_KILL_PATH 600

/* What cg_kill_spec_signal needs, made before a fork (the supervisor's
 * watchdog uses it in a child of a threaded process). */
typedef struct cg_kill_spec {
    char procs[CG_KILL_PATH]; /* <unit dir>/cgroup.procs ("" = none) */
    char rel[CG_KILL_PATH];   /* the unit's cgroup as /proc/PID/cgroup names it: <self>/chaosloco/<unit> */
    char thaw[CG_KILL_PATH];  /* the freezer's control file ("" = no freezer) */
    char thaw_value[8];       /* what thaws it: "THAWED" (v1), "0" (v2) */
    long clk_tck;             /* sysconf(_SC_CLK_TCK): /proc start times are in these ticks */
} cg_kill_spec;

/* Fill k from the first available controller (freezer, cpu, memory).
 * CX_ENOTSUP (k->procs "") when none is available. */
int cg_set_kill_spec(const cg_set *s, cg_kill_spec *k);

/* Send sig to every process in k's cgroup but the caller; with
 * started_by > 0 only to those that started no later (/proc/PID/stat
 * field 22, clock ticks since boot): the watchdog of a dead agent must not
 * reach the unit of the next agent of the same id, which joins the same
 * cgroup while it still loops. Async-signal-safe (open, read, close and
 * syscalls only; no allocation). Returns how many were signalled, or -1
 * when cgroup.procs cannot be read. */
int cg_kill_spec_signal(const cg_kill_spec *k, int sig, uint64_t started_by);

/* Thaw k's freezer (a frozen process acts on a SIGKILL only once thawed).
 * Async-signal-safe; nothing without a freezer. */
void cg_kill_spec_thaw(const cg_kill_spec *k);

/* End every process in the unit's cgroup: thaw it (a frozen process does
 * not act on SIGKILL), SIGKILL what cgroup.procs lists, again until it is
 * empty (bounded: ~1 s; a process forking meanwhile is caught next round).
 * *n (optional) gets how many processes were signalled. 0, CX_ENOTSUP when
 * no controller is available, CX_ESYS + err when cgroup.procs cannot be
 * read or processes are left. */
int cg_set_kill(cg_set *s, int *n, char *err, size_t errlen);

#endif
