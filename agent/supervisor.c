/* supervisor.c - the unit's lifecycle: spawn, watch, restart, log capture.
 *
 * NOTES ON THE DESIGN OF THE SUPERVISOR
 *
 *                  sup_start()
 *                      │
 *                      ▼
 *                 ┌──────────┐  alive ≥ startup_ms: promote_running()
 *                 │ starting │──────────────────────────┐
 *                 └──────────┘                          ▼
 *                      │ exit: reap_exit()         ┌─────────┐ sup_set_paused(1) ┌────────┐
 *                      │                           │ running │──────────────────►│ paused │
 *                      │     ┌─────────────────────│         │◄──────────────────│        │
 *                      │     │ exit, not expected  └─────────┘ sup_set_paused(0) └────────┘
 *                      │     │ reap_exit()              │ exit after sup_expect_exit():     │
 *                      ▼     ▼                          │ reap_exit()                       │
 *                 ┌──────────┐                          ▼                                   │
 *                 │  exited  │                     ┌─────────┐◄──────────────────────────────┘
 *                 └──────────┘                     │ killed  │   (exit while paused: same rules)
 *                      │ policy on-failure and     └─────────┘
 *                      │ status ≠ 0: schedule_restart()  │ restart_after_ms ≥ 0: schedule_restart()
 *                      ▼                                 ▼
 *                 ┌────────────┐  delay over: respawn() (incarnation + 1)
 *                 │ restarting │──┐  alive ≥ startup_ms: promote_running() → running
 *                 └────────────┘◄─┘
 *
 * What holds in each state:
 *   starting, running, paused, restarting-after-respawn: pid > 0, pidfd ≥ 0.
 *   exited, killed, restarting-waiting: pid == 0, pidfd == -1.
 *   restart_at_ms > 0 only in restarting-waiting.
 *   draining (any alive state, drain_until_ms > 0): the leader exited and
 *   is not reaped, the rest of its group got SIGTERM; watchdog alive.
 * sup_stop() ends every state in exited (or killed) with stopped = 1, after
 * which nothing respawns.
 *
 * Cleanup hook (opts.on_cleanup): called after every reaped exit (reap_exit
 * and sup_stop) and right before every spawn (respawn), so whatever a
 * killed unit leaves behind is removed before the next incarnation runs.
 *
 * The unit is its whole process group. An exit of the leader is seen with
 * waitid(WNOWAIT) and reaped only once no other member of the group is
 * alive: the unreaped leader keeps its pid, and so the group id, from
 * being reused while the supervisor signals -pid. What outlives the leader
 * gets SIGTERM, group_grace_ms, then SIGKILL (sup_group_drained(); the state
 * stays what it was meanwhile and nothing respawns). sup_stop() does the
 * same with SIGTERM first.
 *
 * Watchdog: PR_SET_PDEATHSIG reaches the leader only. After each spawn a
 * forked child of the agent (watchdog_main: no exec, async-signal-safe
 * calls only, termination signals ignored) blocks reading a socket whose
 * other end only the agent holds. A byte means "the group is done, go";
 * end-of-file means the agent died: it SIGKILLs the group, then every
 * process in the unit's cgroup (opts.cgroup_kill: a child that left the
 * group with setsid is still there), and exits. If the watchdog dies with
 * the agent, <state>/unit.json (sup_unit_file_write()) lets the next agent's
 * crash sweep end the group (scope.c), and its cgroup sweep the rest.
 *
 * Output capture: one pipe for the unit's stdout and stderr, kept across
 * restarts; a writer thread appends to unit.log and rotates it to unit.log.1
 * when it would grow past log_max_bytes (so disk use ≤ 2 × log_max_bytes).
 *
 * Files: this one holds the lifecycle (construction, the transitions drawn
 * above, accessors); sup_group.c the unit's group (watchdog, unit.json,
 * draining what outlives the leader); sup_log.c the output capture and
 * the log tail. They share struct sup through sup_internal.h.
 */
#include "agent/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/sup_internal.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/log.h"
#include "common/proc.h"

#define SUP_BACKOFF_CAP_MS 30000
/* the wait status reap_exit() gets for a leader it could not reap itself:
 * "exited CX_EXIT_EXEC_FAILED" (0x7f00), counted as a crash */
#define SUP_STATUS_LOST (CX_EXIT_EXEC_FAILED << 8)
#define SUP_STABLE_MS 10000     /* a run this long resets the backoff */
#define SUP_GROUP_GRACE_MS 5000 /* default group_grace_ms */

/* ---- supervisor: state checks ---- */

static void assert_supervisor_state(const sup *s)
{
#ifndef NDEBUG
    switch (s->state) {
    case SUP_STARTING:
    case SUP_RUNNING:
    case SUP_PAUSED:
        if (s->pid <= 0)
            cx_error("supervisor invariant broken: state %s without a pid", sup_state_name(s->state));
        break;
    case SUP_EXITED:
    case SUP_KILLED:
        if (s->pid != 0 || s->pidfd != -1 || s->restart_at_ms != 0)
            cx_error("supervisor invariant broken: state %s with pid %d restart_at %lld",
                     sup_state_name(s->state), (int)s->pid, (long long)s->restart_at_ms);
        break;
    case SUP_RESTARTING:
        if ((s->pid > 0) == (s->restart_at_ms > 0))
            cx_error("supervisor invariant broken: restarting with pid %d and restart_at %lld", (int)s->pid,
                     (long long)s->restart_at_ms);
        break;
    }
    if (s->paused && s->state == SUP_PAUSED && s->pid <= 0)
        cx_error("supervisor invariant broken: paused without a pid");
#else
    (void)s;
#endif
}

const char *sup_state_name(sup_state st)
{
    switch (st) {
    case SUP_STARTING:
        return "starting";
    case SUP_RUNNING:
        return "running";
    case SUP_PAUSED:
        return "paused";
    case SUP_EXITED:
        return "exited";
    case SUP_KILLED:
        return "killed";
    case SUP_RESTARTING:
        return "restarting";
    }
    return "unknown";
}

/* ---- supervisor: construction ---- */

static char **strv_dup(const char *const *v)
{
    size_t n = 0;
    while (v[n])
        n++;
    char **out = calloc(n + 1, sizeof *out);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        out[i] = strdup(v[i]);
        if (!out[i]) {
            for (size_t j = 0; j < i; j++)
                free(out[j]);
            free(out);
            return NULL;
        }
    }
    return out;
}

static void strv_free(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

sup *sup_new(const sup_opts *o, char *err, size_t errlen)
{
    if (!o->argv || !o->argv[0]) {
        cx_fail(err, errlen, CX_EINVAL, "supervisor: no unit command");
        return NULL;
    }
    sup *s = calloc(1, sizeof *s);
    if (!s) {
        cx_fail(err, errlen, CX_ENOMEM, "supervisor: out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->pidfd = -1;
    s->wd_fd = -1;
    s->log_rd = s->log_wr = s->log_fd = -1;
    s->state = SUP_EXITED;
    s->restart = o->restart;
    s->backoff_ms = o->restart_backoff_ms > 0 ? o->restart_backoff_ms : 1000;
    s->startup_ms = o->startup_ms > 0 ? o->startup_ms : 100;
    s->log_max_bytes = o->log_max_bytes > 0 ? o->log_max_bytes : 10 * 1024 * 1024;
    s->on_spawn = o->on_spawn;
    s->on_spawn_ctx = o->on_spawn_ctx;
    s->on_cleanup = o->on_cleanup;
    s->on_cleanup_ctx = o->on_cleanup_ctx;
    if (o->cgroup_kill)
        s->cg_kill = *o->cgroup_kill;
    s->group_grace_ms = o->group_grace_ms > 0 ? o->group_grace_ms : SUP_GROUP_GRACE_MS;
    s->unit_file = o->unit_file ? strdup(o->unit_file) : NULL;
    s->argv = strv_dup(o->argv);
    s->env = o->extra_env ? strv_dup(o->extra_env) : NULL;
    s->join_cg = o->join_cgroups ? strv_dup(o->join_cgroups) : NULL;
    s->log_path = strdup(o->log_path);
    size_t l1 = strlen(o->log_path) + 3;
    s->log_path1 = malloc(l1);
    if (!s->argv || (o->extra_env && !s->env) || !s->log_path || !s->log_path1 ||
        (o->unit_file && !s->unit_file) || (o->join_cgroups && !s->join_cg)) {
        cx_fail(err, errlen, CX_ENOMEM, "supervisor: out of memory");
        goto fail;
    }
    snprintf(s->log_path1, l1, "%s.1", o->log_path);

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        int e = errno;
        cx_fail(err, errlen, CX_ESYS, "supervisor: pipe: %s", strerror(e));
        goto fail;
    }
    s->log_rd = fds[0];
    s->log_wr = fds[1];
    fcntl(s->log_rd, F_SETFL, O_NONBLOCK);
    s->log_fd = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (s->log_fd < 0) {
        int e = errno;
        cx_fail(err, errlen, CX_EIO, "supervisor: open %s: %s", s->log_path, strerror(e));
        goto fail;
    }
    struct stat st;
    if (fstat(s->log_fd, &st) == 0)
        s->log_size = st.st_size;
    if (pthread_create(&s->log_thread, NULL, sup_log_thread_main, s) != 0) {
        cx_fail(err, errlen, CX_ESYS, "supervisor: cannot start the log thread");
        goto fail;
    }
    s->log_thread_started = 1;
    return s;
fail:
    sup_free(s, 0);
    return NULL;
}

void sup_free(sup *s, int64_t grace_ms)
{
    if (!s)
        return;
    sup_stop(s, grace_ms);
    if (s->log_thread_started) {
        __atomic_store_n(&s->log_stop, 1, __ATOMIC_RELEASE);
        pthread_join(s->log_thread, NULL);
    }
    if (s->log_rd >= 0)
        close(s->log_rd);
    if (s->log_wr >= 0)
        close(s->log_wr);
    if (s->log_fd >= 0)
        close(s->log_fd);
    json_decref(s->last_exit);
    strv_free(s->argv);
    strv_free(s->env);
    strv_free(s->join_cg);
    free(s->log_path);
    free(s->log_path1);
    free(s->unit_file);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* ---- supervisor: transitions ---- */

/* The cleanup hook (lock held): after a reaped exit, before a spawn. */
static void cleanup_hook(sup *s, pid_t dead_pid)
{
    if (s->on_cleanup)
        s->on_cleanup(s->on_cleanup_ctx, dead_pid);
}

/* exited | killed | restarting(waiting) → starting | restarting(alive).
 * Called with the lock held; releases it around on_spawn. */
static int respawn(sup *s, sup_state next, char *err, size_t errlen)
{
    cx_spawn_opts so = {
        .new_pgrp = 1,
        .stdout_fd = s->log_wr,
        .stderr_fd = s->log_wr,
        .extra_env = (const char *const *)s->env,
        .cwd = NULL,
        .die_with_parent = SIGKILL,
        .join_cgroups = (const char *const *)s->join_cg,
    };
    pid_t pid = 0;
    cleanup_hook(s, 0);
    int rc = cx_spawn((const char *const *)s->argv, &so, &pid, err, errlen);
    if (rc < 0)
        return rc;
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd < 0)
        cx_warn("supervisor: pidfd_open(%d): %s (falling back to waitpid polling)", (int)pid,
                strerror(errno));
    s->pid = pid;
    s->pidfd = pfd;
    sup_watchdog_start(s, pid);
    sup_unit_file_write(s, pid);
    s->spawned_mono_ms = cx_mono_ms();
    s->restart_at_ms = 0;
    s->expect_exit = 0;
    s->incarnation++;
    s->state = next;
    cx_info("unit started pid=%d incarnation=%lld cmd=%s", (int)pid, (long long)s->incarnation, s->argv[0]);
    assert_supervisor_state(s);
    if (s->on_spawn) {
        void (*cb)(void *, pid_t) = s->on_spawn;
        void *ctx = s->on_spawn_ctx;
        pthread_mutex_unlock(&s->lock);
        cb(ctx, pid);
        pthread_mutex_lock(&s->lock);
    }
    return 0;
}

int sup_start(sup *s, char *err, size_t errlen)
{
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    if (s->pid == 0 && !s->stopped)
        rc = respawn(s, SUP_STARTING, err, errlen);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* exited | killed → restarting(waiting). */
static void schedule_restart(sup *s, int64_t now, int64_t delay_ms)
{
    s->state = SUP_RESTARTING;
    s->restart_at_ms = now + (delay_ms > 0 ? delay_ms : 0) + 1; /* > 0 marks "scheduled" */
    cx_info("unit restart scheduled in %lld ms", (long long)delay_ms);
    assert_supervisor_state(s);
}

/* starting | running | paused | restarting(alive) → exited | killed
 * (then maybe restarting). status is the waitpid status. */
static void reap_exit(sup *s, int status, int64_t now)
{
    int64_t ran_ms = now - s->spawned_mono_ms;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    int expected = s->expect_exit;
    char when[40];
    cx_iso_time(when, sizeof when, cx_real_ns());
    json_decref(s->last_exit);
    s->last_exit = json_pack("{s:i,s:i,s:b,s:s,s:I,s:I}", "code", code, "signal", sig, "expected", expected,
                             "t_real", when, "pid", (json_int_t)s->pid, "ran_ms", (json_int_t)ran_ms);
    if (s->last_exit && code < 0)
        json_object_set_new(s->last_exit, "code", json_null());
    pid_t dead = s->pid;
    if (s->pidfd >= 0)
        close(s->pidfd);
    s->pidfd = -1;
    s->pid = 0;
    s->restart_at_ms = 0;
    s->expect_exit = 0;
    s->paused = 0;
    sup_group_finish(s, dead);
    cleanup_hook(s, dead);
    if (expected) {
        s->state = SUP_KILLED;
        cx_info("unit exited (injected) code=%d signal=%d ran_ms=%lld", code, sig, (long long)ran_ms);
        assert_supervisor_state(s);
        if (!s->stopped && s->expect_restart_ms >= 0) {
            s->restarts++;
            schedule_restart(s, now, s->expect_restart_ms);
        }
        return;
    }
    s->state = SUP_EXITED;
    cx_info("unit exited code=%d signal=%d ran_ms=%lld", code, sig, (long long)ran_ms);
    assert_supervisor_state(s);
    int failed = !(WIFEXITED(status) && code == 0);
    if (s->stopped || s->restart != SUP_RESTART_ON_FAILURE || !failed)
        return;
    if (ran_ms >= SUP_STABLE_MS)
        s->quick_failures = 0;
    int64_t delay = s->backoff_ms;
    for (int i = 0; i < s->quick_failures && delay < SUP_BACKOFF_CAP_MS; i++)
        delay *= 2;
    if (delay > SUP_BACKOFF_CAP_MS)
        delay = SUP_BACKOFF_CAP_MS;
    s->quick_failures++;
    s->restarts++;
    schedule_restart(s, now, delay);
}

/* starting | restarting(alive) → running (or paused if a pause holds). */
static void promote_running(sup *s)
{
    s->state = s->paused ? SUP_PAUSED : SUP_RUNNING;
    assert_supervisor_state(s);
}

void sup_poll(sup *s, int64_t now)
{
    pthread_mutex_lock(&s->lock);
    if (s->pid > 0) {
        int status = 0;
        int exited = sup_leader_exited(s->pid);
        if (exited > 0 && sup_group_drained(s, now)) {
            if (waitpid(s->pid, &status, 0) == s->pid)
                reap_exit(s, status, now);
            else
                reap_exit(s, SUP_STATUS_LOST, now);
        } else if (exited < 0) {
            /* Someone else reaped it (should not happen): treat as a crash. */
            reap_exit(s, SUP_STATUS_LOST, now);
        } else if (exited == 0 && (s->state == SUP_STARTING || s->state == SUP_RESTARTING) &&
                   now - s->spawned_mono_ms >= s->startup_ms) {
            promote_running(s);
        }
    }
    if (s->state == SUP_RESTARTING && s->pid == 0 && s->restart_at_ms > 0 && now >= s->restart_at_ms &&
        !s->stopped) {
        char err[CX_ERRLEN] = "";
        if (respawn(s, SUP_RESTARTING, err, sizeof err) < 0) {
            cx_error("unit restart failed: %s", err);
            s->state = SUP_EXITED;
            s->restart_at_ms = 0;
            assert_supervisor_state(s);
        }
    }
    pthread_mutex_unlock(&s->lock);
}

void sup_stop(sup *s, int64_t grace_ms)
{
    pthread_mutex_lock(&s->lock);
    s->stopped = 1;
    if (s->state == SUP_RESTARTING && s->pid == 0) {
        s->restart_at_ms = 0;
        s->state = SUP_KILLED;
    }
    pid_t pid = s->pid;
    pthread_mutex_unlock(&s->lock);
    if (pid <= 0)
        return;
    /* A stopped process group does not act on SIGTERM: continue it first. */
    kill(-pid, SIGCONT);
    int status = 0;
    /* SIGCONT+SIGTERM to the group, grace, SIGKILL to what is left of it
     * (the leader too, should it have left its group); the leader is
     * reaped last, so that -pid names this group all along, and here, so
     * that last_exit tells how it ended. */
    kill(-pid, SIGTERM);
    int64_t end = cx_mono_ms() + grace_ms;
    int done = 0;
    while (!(done = sup_leader_exited(pid) != 0 && sup_group_left(pid) == 0) && cx_mono_ms() < end)
        cx_sleep_ms(5);
    if (!done) {
        cx_warn("unit group %d outlived the %lld ms stop grace: SIGKILL", (int)pid, (long long)grace_ms);
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        end = cx_mono_ms() + 5000;
        while (!(sup_leader_exited(pid) != 0 && sup_group_left(pid) == 0) && cx_mono_ms() < end)
            cx_sleep_ms(5);
    }
    if (cx_wait_timeout(pid, 100, &status) != 0)
        status = SIGKILL; /* as if killed: it could not be reaped */
    pthread_mutex_lock(&s->lock);
    if (s->pid == pid) {
        char when[40];
        cx_iso_time(when, sizeof when, cx_real_ns());
        json_decref(s->last_exit);
        s->last_exit =
            json_pack("{s:i,s:i,s:b,s:s,s:I,s:I}", "code", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                      "signal", WIFSIGNALED(status) ? WTERMSIG(status) : 0, "expected", 1, "t_real", when,
                      "pid", (json_int_t)pid, "ran_ms", (json_int_t)(cx_mono_ms() - s->spawned_mono_ms));
        if (s->last_exit && !WIFEXITED(status))
            json_object_set_new(s->last_exit, "code", json_null());
        if (s->pidfd >= 0)
            close(s->pidfd);
        s->pidfd = -1;
        s->pid = 0;
        s->paused = 0;
        s->state = SUP_KILLED;
        assert_supervisor_state(s);
        sup_group_finish(s, pid);
        cleanup_hook(s, pid);
    }
    pthread_mutex_unlock(&s->lock);
}

void sup_expect_exit(sup *s, int64_t restart_after_ms)
{
    pthread_mutex_lock(&s->lock);
    s->expect_exit = 1;
    s->expect_restart_ms = restart_after_ms;
    pthread_mutex_unlock(&s->lock);
}

void sup_set_paused(sup *s, int paused)
{
    pthread_mutex_lock(&s->lock);
    s->paused = paused ? 1 : 0;
    if (s->pid > 0) {
        if (s->paused && (s->state == SUP_RUNNING || s->state == SUP_STARTING || s->state == SUP_RESTARTING))
            s->state = SUP_PAUSED;
        else if (!s->paused && s->state == SUP_PAUSED)
            s->state = SUP_RUNNING;
    }
    assert_supervisor_state(s);
    pthread_mutex_unlock(&s->lock);
}

/* ---- supervisor: accessors ---- */

int sup_pidfd(sup *s)
{
    pthread_mutex_lock(&s->lock);
    int fd = s->drain_until_ms > 0 ? -1 : s->pidfd;
    pthread_mutex_unlock(&s->lock);
    return fd;
}

void sup_target(sup *s, pid_t *pid, int *pidfd_dup)
{
    pthread_mutex_lock(&s->lock);
    *pid = s->pid;
    *pidfd_dup = s->pidfd >= 0 ? fcntl(s->pidfd, F_DUPFD_CLOEXEC, 0) : -1;
    pthread_mutex_unlock(&s->lock);
}

sup_state sup_get_state(sup *s)
{
    pthread_mutex_lock(&s->lock);
    sup_state st = s->state;
    pthread_mutex_unlock(&s->lock);
    return st;
}

json_t *sup_status_json(sup *s)
{
    pthread_mutex_lock(&s->lock);
    /* a copy, not a shared reference: the caller serialises it on another
     * thread while reap_exit() may replace and free ours (ThreadSanitizer) */
    json_t *o =
        json_pack("{s:s,s:I,s:I,s:I,s:o?}", "state", sup_state_name(s->state), "pid", (json_int_t)s->pid,
                  "incarnation", (json_int_t)s->incarnation, "restarts", (json_int_t)s->restarts, "last_exit",
                  s->last_exit ? json_deep_copy(s->last_exit) : NULL);
    if (o && !s->last_exit)
        json_object_set_new(o, "last_exit", json_null());
    if (o && s->pid == 0)
        json_object_set_new(o, "pid", json_null());
    pthread_mutex_unlock(&s->lock);
    return o;
}

void sup_counters(sup *s, int *up, int64_t *restarts, int64_t *incarnation, int64_t *log_bytes)
{
    pthread_mutex_lock(&s->lock);
    *up = s->pid > 0 && s->state != SUP_PAUSED;
    *restarts = s->restarts;
    *incarnation = s->incarnation;
    *log_bytes = __atomic_load_n(&s->log_total, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&s->lock);
}
