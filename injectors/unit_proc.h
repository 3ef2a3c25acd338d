/* unit_proc.h - signals and /proc reads on a supervised unit's process group.
 *
 * The process-level injectors (kill, preempt, pause, straggle, cpu) all act
 * on the unit's process group, whose leader is inj_target.pid. This module
 * is the one place that sends those signals and reads /proc/PID/stat. It is
 * not a supervisor: it never waits for or reaps anything.
 *
 * Identity: a pid can be reused once its process is reaped, so persisted
 * records carry (pid, starttime) and uproc_same() checks both before a sweep
 * signals anything.
 */
#ifndef INJ_UNIT_PROC_H
#define INJ_UNIT_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* Signal number for a name without the SIG prefix: KILL, TERM, INT, SEGV,
 * ABRT, HUP, QUIT, USR1, USR2, STOP, CONT. 0 for anything else. */
int uproc_signal_from_name(const char *name);

/* Send sig to the process group led by pid. When pidfd >= 0 the leader is
 * first checked through pidfd_send_signal(pidfd, 0) so that a recycled pid
 * is never signalled; then kill(-pid, sig) reaches the whole group; if the
 * group is gone but the leader is not (it left its group), the leader alone
 * gets sig through the pidfd. *via (optional) gets "pidfd+pgrp", "pgrp" or
 * "pidfd". Returns 0, CX_ENOTFOUND when nothing is left to signal, or
 * CX_ESYS. */
int uproc_signal_group(pid_t pid, int pidfd, int sig, const char **via, char *err, size_t errlen);

/* State letter of /proc/PID/stat ('R', 'S', 'D', 'T', 't', 'Z', ...), or 0
 * when the process does not exist. */
char uproc_state(pid_t pid);

/* 0 when pid (the unit's main process) exists and is not a zombie;
 * otherwise CX_ENOUNIT + "unit is not running" in err: the check every
 * fault that needs a running unit makes before it applies. */
int uproc_need_running(pid_t pid, char *err, size_t errlen);

/* Field 22 of /proc/PID/stat (start time in clock ticks since boot), or 0
 * when the process does not exist. */
uint64_t uproc_starttime(pid_t pid);

/* 1 if pid still names the process that had starttime (and is not a
 * zombie), else 0. */
int uproc_same(pid_t pid, uint64_t starttime);

/* Process group of pid (field 5), or -1. */
pid_t uproc_pgrp(pid_t pid);

/* Parent of pid (field 4), or -1. */
pid_t uproc_ppid(pid_t pid);

/* Poll uproc_state(pid) every 0.5 ms for up to max_ms until it equals want
 * (want 0 = gone or zombie). Returns the last state read. Bounded so that
 * injectors stay within their few-ms budget. */
char uproc_wait_state(pid_t pid, char want, int max_ms);

/* ---- environment marks and process-group members ----
 *
 * The agent marks its unit through the environment (CHAOSLOCO_AGENT_ID,
 * CHAOSLOCO_HOOK_DIR) and every process the unit forks inherits them. A
 * crash sweep signals only processes that carry the marks: these two are
 * the one place that reads /proc/PID/environ and scans a process group.
 */

/* 1 when /proc/PID/environ holds every "KEY=VALUE" entry of marks
 * (NULL-terminated, each matched exactly), 0 when it lacks one. An empty
 * environment (a zombie, a kernel thread, a process that cleared it) is 0
 * with *empty = 1 (empty may be NULL). CX_ENOTFOUND when pid is gone,
 * CX_ESYS + err when it cannot be read (another user's process). */
int uproc_env_has(pid_t pid, const char *const *marks, int *empty, char *err, size_t errlen);

/* Live (not zombie) processes whose process group is pgid, from a scan of
 * /proc: up to max of their pids into out (may be NULL when max is 0).
 * Returns how many there are (may exceed max), or CX_ESYS when /proc
 * cannot be listed. */
int uproc_group_members(pid_t pgid, pid_t *out, int max);

/* Send sig to the one process pid, only if it still has starttime: the
 * check and the signal go through one pidfd, so a pid recycled in between
 * is never signalled. 0, CX_ENOTFOUND (gone, a zombie, or another process
 * now), or CX_ESYS. */
int uproc_signal_same(pid_t pid, uint64_t starttime, int sig);

/* Online CPUs (>= 1). */
int uproc_ncpus(void);

/* ---- duty cycle (straggle, cpu fallback) ----
 *
 * Stops the unit's group for stopped_ms of every period_ms with
 * SIGSTOP/SIGCONT, driven by the agent's ~10 ms tick (so phases have about
 * 10 ms of granularity). With jitter j each cycle's stopped time is scaled by
 * a uniform factor in [1-j, 1+j] from a seeded xorshift64*, capped below the
 * period. A restarted unit (new pid) is picked up at its first tick.
 *
 *   start ──► STOPPED ──(stop_until reached: SIGCONT)──► RUNNING
 *                ▲                                         │
 *                └──────(next cycle start: SIGSTOP)────────┘
 *   stop(): SIGCONT if STOPPED, then idle.
 */
typedef struct uproc_duty {
    int64_t period_ms;      /* cycle length, ms */
    int64_t stopped_ms;     /* nominal stopped part of each cycle, ms */
    double jitter;          /* relative jitter of stopped_ms, 0..0.5 */
    uint64_t rng;           /* xorshift64* state, never 0 */
    pid_t pid;              /* group leader being cycled, 0 = none */
    uint64_t starttime;     /* its /proc start time (pid reuse guard) */
    int stopped;            /* 1 while SIGSTOPped by us */
    int64_t cycle_start_ms; /* monotonic start of the current cycle */
    int64_t stop_until_ms;  /* monotonic end of the current stopped phase */
    uint64_t cycles;        /* cycles started */
} uproc_duty;

void uproc_duty_init(uproc_duty *d, int64_t period_ms, int64_t stopped_ms, double jitter, uint64_t seed);
/* Begin a cycle now with a stopped phase. CX_ENOTFOUND if pid is gone. */
int uproc_duty_start(uproc_duty *d, pid_t pid, int pidfd, int64_t now_ms, char *err, size_t errlen);
/* Advance the cycle; pid/pidfd are the unit's current ones (0/-1 if none). */
void uproc_duty_tick(uproc_duty *d, pid_t pid, int pidfd, int64_t now_ms);
/* SIGCONT if stopped; idempotent; 0 when the unit is gone. */
int uproc_duty_stop(uproc_duty *d, pid_t pid, int pidfd, char *err, size_t errlen);
/* The crash sweep of a duty cycle a dead agent left (its undo record's pid
 * and start time): SIGCONT that process group if the pid is still the same
 * process; 0 when it is gone. */
int uproc_duty_sweep(pid_t pid, uint64_t starttime, char *err, size_t errlen);

#endif
