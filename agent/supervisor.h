/* supervisor.h - starts, watches and restarts the one learner unit an agent
 * supervises.
 *
 * What it is: the unit's lifecycle (its own process group, a pidfd, a
 * watchdog that kills the group if the agent dies, the incarnation counter, the restart policy and backoff,
 * injected exits that restart after a fault-chosen delay) and the capture of its stdout/stderr into
 * size-capped, rotated log files. What it is not: a fault injector — faults act on the pid this module lends
 * out, and tell it through sup_expect_exit() that the next exit is theirs.
 *
 * Threading: every function takes the supervisor's own lock, so it may be
 * called from HTTP threads and from the agent loop. The supervisor never
 * calls back into the registry (lock order: registry, then supervisor).
 */
#ifndef AGENT_SUPERVISOR_H
#define AGENT_SUPERVISOR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "injectors/cgroup.h"

typedef enum sup_state {
    SUP_STARTING,   /* first spawn done, inside the startup window */
    SUP_RUNNING,    /* alive past the startup window */
    SUP_PAUSED,     /* alive, a pause fault holds it */
    SUP_EXITED,     /* exited by itself (crash or normal end) */
    SUP_KILLED,     /* exited because a fault made it (expect_exit) */
    SUP_RESTARTING, /* waiting for the restart delay, or respawned inside the startup window */
} sup_state;

typedef enum sup_restart { SUP_RESTART_NEVER, SUP_RESTART_ON_FAILURE } sup_restart;

typedef struct sup_opts {
    const char *const *argv;      /* unit command; argv[0] looked up in PATH */
    const char *const *extra_env; /* NULL-terminated "K=V" list added to the unit env, or NULL */
    const char *log_path;         /* unit.log; rotated to <log_path>.1 */
    int64_t log_max_bytes;        /* bytes per log file before rotation */
    sup_restart restart;          /* policy for exits the unit did by itself */
    int64_t restart_backoff_ms;   /* first backoff, doubled per quick failure */
    int64_t startup_ms;           /* alive this long = running; 0 means 100 */
    /* Called (without the supervisor lock) after each spawn with the new
     * pid, e.g. to put the unit into its cgroups; may be NULL. */
    void (*on_spawn)(void *ctx, pid_t pid);
    void *on_spawn_ctx;
    /* Called with the supervisor lock held after every exit of the unit
     * has been reaped (dead_pid = the reaped pid; sup_stop included) and
     * right before every spawn (dead_pid 0), to remove what a killed unit
     * leaves behind (the agent: libfaketime's /dev/shm files). Must be
     * quick and must not call back into the supervisor; may be NULL. */
    void (*on_cleanup)(void *ctx, pid_t dead_pid);
    void *on_cleanup_ctx;
    /* <state>/unit.json: {pgid, pid, starttime} written atomically after
     * each spawn, removed once the whole group is gone (the next agent's
     * crash sweep reads it); NULL for none. */
    const char *unit_file;
    /* Grace for what is left of the group after its leader exited, before
     * SIGKILL; 0 means 5000. */
    int64_t group_grace_ms;
    /* The unit's cgroup (copied), or NULL: the watchdog SIGKILLs every
     * process in it too when the agent dies, so a child that left the
     * unit's process group (setsid) dies with its agent. */
    const cg_kill_spec *cgroup_kill;
    /* NULL-terminated cgroup.procs paths (copied) the unit joins in the
     * spawned child before exec (cx_spawn_opts.join_cgroups), or NULL: a
     * child it forks at once is in the unit's cgroups even if it leaves
     * the group before on_spawn could attach it. */
    const char *const *join_cgroups;
} sup_opts;

typedef struct sup sup;

/* Copies opts (strings included). Opens the log pipe and the writer thread;
 * does not start the unit. NULL + err on failure. */
sup *sup_new(const sup_opts *opts, char *err, size_t errlen);
/* Stop the unit (SIGTERM to its group, grace_ms, SIGKILL to what is left
 * of the group), stop logging, free. NULL is a no-op. */
void sup_free(sup *s, int64_t grace_ms);

/* First start: starting. CX_ESYS + err when the spawn fails. */
int sup_start(sup *s, char *err, size_t errlen);
/* Stop the unit for good (agent shutdown); no restart afterwards. The
 * group is done when its leader exited and no member is left: SIGKILL
 * after grace_ms otherwise. */
void sup_stop(sup *s, int64_t grace_ms);

/* Drive the lifecycle: reap an exit (pidfd readable), move starting/
 * restarting to running after the startup window, respawn when a restart
 * is due. Call about every 10 ms. */
void sup_poll(sup *s, int64_t now_mono_ms);
/* The pidfd to poll for the unit's exit, or -1 (also while the group
 * drains after its leader exited: poll would not block). */
int sup_pidfd(sup *s);

/* The next exit of the unit is injected: state killed, and restart after
 * restart_after_ms whatever the policy (< 0: no restart). */
void sup_expect_exit(sup *s, int64_t restart_after_ms);
/* A pause fault holds (1) or released (0) the unit: running ⇄ paused. */
void sup_set_paused(sup *s, int paused);

/* Snapshot for injectors: pid (0 when not alive) and a dup()ed pidfd the
 * caller closes (-1 when none). */
void sup_target(sup *s, pid_t *pid, int *pidfd_dup);
sup_state sup_get_state(sup *s);
const char *sup_state_name(sup_state st);
/* {state, pid, incarnation, restarts, last_exit} as in docs/api.md (GET /v1/status). */
json_t *sup_status_json(sup *s);
/* Counters for /metrics. */
void sup_counters(sup *s, int *up, int64_t *restarts, int64_t *incarnation, int64_t *log_bytes);
/* Last lines of the unit log (current and rotated file), at most max_bytes;
 * malloc'd, caller frees. */
char *sup_log_tail(sup *s, int lines, size_t max_bytes);

#endif
