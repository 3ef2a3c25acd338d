/* sup_internal.h - the supervisor's state, shared by supervisor.c (the
 * lifecycle and its state machine), sup_group.c (the unit's group, its
 * watchdog and unit.json) and sup_log.c (output capture, log tail).
 * Private to agent/: the interface is supervisor.h.
 *
 * Locking: lock guards every field but the capture fields (log_*), which
 * belong to the writer thread once it runs (log_stop is read with
 * __atomic). The group functions expect lock held, as their callers in
 * supervisor.c hold it.
 */
#ifndef AGENT_SUP_INTERNAL_H
#define AGENT_SUP_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/supervisor.h"

struct sup {
    pthread_mutex_t lock;
    char **argv;           /* owned copy, NULL-terminated */
    char **env;            /* owned copy, NULL-terminated, or NULL */
    char *log_path;        /* unit.log */
    char *log_path1;       /* unit.log.1 */
    int64_t log_max_bytes; /* bytes per file */
    sup_restart restart;   /* policy */
    int64_t backoff_ms;    /* first backoff */
    int64_t startup_ms;    /* ms alive before "running" */
    void (*on_spawn)(void *, pid_t);
    void *on_spawn_ctx;
    void (*on_cleanup)(void *, pid_t);
    void *on_cleanup_ctx;
    char *unit_file;        /* <state>/unit.json, or NULL */
    int64_t group_grace_ms; /* SIGTERM → SIGKILL for what outlives the leader */
    cg_kill_spec cg_kill;   /* the unit's cgroup, emptied by the watchdog too (procs "" = none) */
    char **join_cg;         /* cgroup.procs paths the unit joins before exec, or NULL */

    sup_state state;           /* see the diagram */
    pid_t pid;                 /* > 0 while a process exists */
    int pidfd;                 /* pidfd of pid, or -1 */
    int64_t spawned_mono_ms;   /* when pid was spawned */
    int64_t restart_at_ms;     /* mono ms when a scheduled restart is due, 0 = none */
    int expect_exit;           /* next exit is injected */
    int64_t expect_restart_ms; /* its restart delay (< 0: none) */
    int paused;                /* a pause fault holds the unit */
    int stopped;               /* sup_stop() called: never respawn */
    int64_t incarnation;       /* starts so far (first = 1) */
    int64_t restarts;          /* respawns after the first start */
    int quick_failures;        /* consecutive crashes within SUP_STABLE_MS */
    json_t *last_exit;         /* {code, signal, expected, t_real} or NULL */
    int64_t drain_until_ms; /* leader exited, rest of the group SIGTERMed: SIGKILL at this mono ms; 0 = not */
    pid_t wd_pid;           /* the current group's watchdog, 0 = none */
    int wd_fd;              /* the agent's end of its socket, -1 = none */

    int log_rd, log_wr; /* capture pipe */
    int log_fd;         /* unit.log, O_APPEND */
    int64_t log_size;   /* bytes in unit.log */
    int64_t log_total;  /* bytes captured since start */
    pthread_t log_thread;
    int log_thread_started;
    int log_stop; /* ask the writer thread to finish (__atomic: read by it) */
};

/* ---- the group (sup_group.c) ---- */

/* Fork the watchdog of group pgid (a warning, and none, on failure). */
void sup_watchdog_start(sup *s, pid_t pgid);
/* Tell the watchdog the group is done and reap it. */
void sup_watchdog_stop(sup *s);
/* <state>/unit.json for group pid (nothing without a unit file). */
void sup_unit_file_write(sup *s, pid_t pid);
/* Live members of group pgid other than a zombie leader (0 when /proc
 * cannot be read). */
int sup_group_left(pid_t pgid);
/* 1 when the leader pid has exited (not reaped), 0 when it runs, -1 when
 * it is not our child any more. */
int sup_leader_exited(pid_t pid);
/* The leader exited: 1 once no member of its group is left, 0 while they
 * get their grace. Lock held. */
int sup_group_drained(sup *s, int64_t now);
/* The group of dead_pid is done: release its watchdog and unit.json. Lock
 * held. */
void sup_group_finish(sup *s, pid_t dead_pid);

/* ---- output capture (sup_log.c) ---- */

/* The writer thread (pthread_create with s): pipe → unit.log until
 * log_stop, then drains what is left. */
void *sup_log_thread_main(void *arg);

#endif
