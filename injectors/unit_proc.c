/* unit_proc.c - process-group signals and /proc/PID/stat parsing. */
#include "injectors/unit_proc.h"

#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"

/* ---- unit_proc: signal names ---- */

static const struct {
    const char *name; /* without SIG */
    int sig;
} uproc_signals[] = {
    {"KILL", SIGKILL}, {"TERM", SIGTERM}, {"INT", SIGINT},   {"SEGV", SIGSEGV},
    {"ABRT", SIGABRT}, {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
    {"USR2", SIGUSR2}, {"STOP", SIGSTOP}, {"CONT", SIGCONT},
};

int uproc_signal_from_name(const char *name)
{
    if (!name)
        return 0;
    for (size_t i = 0; i < sizeof uproc_signals / sizeof uproc_signals[0]; i++)
        if (strcmp(uproc_signals[i].name, name) == 0)
            return uproc_signals[i].sig;
    return 0;
}

/* ---- unit_proc: signalling the group ---- */

static int uproc_pidfd_signal(int pidfd, int sig)
{
#ifdef SYS_pidfd_send_signal
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
#else
    (void)pidfd;
    (void)sig;
    errno = ENOSYS;
    return -1;
#endif
}

int uproc_signal_group(pid_t pid, int pidfd, int sig, const char **via, char *err, size_t errlen)
{
    if (via)
        *via = "pgrp";
    if (pid <= 0)
        return cx_fail(err, errlen, CX_ENOTFOUND, "unit is not running");
    int leader_alive = -1; /* unknown without a pidfd */
    if (pidfd >= 0) {
        if (uproc_pidfd_signal(pidfd, 0) == 0) {
            leader_alive = 1;
        } else if (errno == ESRCH) {
            leader_alive = 0;
        } else if (errno != ENOSYS) {
            int e = errno;
            return cx_fail(err, errlen, CX_ESYS, "pidfd_send_signal(%d): %s", (int)pid, strerror(e));
        }
    }
    if (kill(-pid, sig) == 0) {
        if (via)
            *via = leader_alive == 1 ? "pidfd+pgrp" : "pgrp";
        return 0;
    }
    int e = errno;
    if (e == ESRCH && leader_alive == 1) {
        /* The leader lives but its group is gone: it called setpgid itself. */
        if (uproc_pidfd_signal(pidfd, sig) == 0) {
            if (via)
                *via = "pidfd";
            return 0;
        }
        e = errno;
    }
    if (e == ESRCH)
        return cx_fail(err, errlen, CX_ENOTFOUND, "process group %d is gone", (int)pid);
    return cx_fail(err, errlen, CX_ESYS, "kill(-%d, %d): %s", (int)pid, sig, strerror(e));
}

/* ---- unit_proc: /proc/PID/stat ---- */

/* Read /proc/PID/stat and return a pointer just past the ")" that closes
 * the command name (which may itself contain ")" and spaces), or NULL. */
static const char *uproc_stat_fields(pid_t pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close = strrchr(buf, ')');
    if (!close || close[1] != ' ')
        return NULL;
    return close + 2; /* field 3: state */
}

char uproc_state(pid_t pid)
{
    char buf[1024];
    if (pid <= 0)
        return 0;
    const char *p = uproc_stat_fields(pid, buf, sizeof buf);
    return p ? p[0] : 0;
}

/* The n-th field (1-based as in proc(5)), n >= 3. */
static int uproc_stat_field(pid_t pid, int n, unsigned long long *out)
{
    char buf[1024];
    const char *p = uproc_stat_fields(pid, buf, sizeof buf);
    if (!p)
        return -1;
    for (int i = 3; i < n; i++) {
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno || end == p)
        return -1;
    *out = v;
    return 0;
}

uint64_t uproc_starttime(pid_t pid)
{
    unsigned long long v = 0;
    if (pid <= 0 || uproc_stat_field(pid, 22, &v) != 0)
        return 0;
    return (uint64_t)v;
}

pid_t uproc_pgrp(pid_t pid)
{
    unsigned long long v = 0;
    if (pid <= 0 || uproc_stat_field(pid, 5, &v) != 0)
        return -1;
    return (pid_t)v;
}

pid_t uproc_ppid(pid_t pid)
{
    unsigned long long v = 0;
    if (pid <= 0 || uproc_stat_field(pid, 4, &v) != 0)
        return -1;
    return (pid_t)v;
}

int uproc_same(pid_t pid, uint64_t starttime)
{
    if (pid <= 0 || starttime == 0)
        return 0;
    char s = uproc_state(pid);
    if (s == 0 || s == 'Z' || s == 'X')
        return 0;
    return uproc_starttime(pid) == starttime;
}

int uproc_need_running(pid_t pid, char *err, size_t errlen)
{
    char s = uproc_state(pid);
    if (s == 0 || s == 'Z' || s == 'X')
        return cx_fail(err, errlen, CX_ENOUNIT, "unit is not running");
    return 0;
}

char uproc_wait_state(pid_t pid, char want, int max_ms)
{
    char s = uproc_state(pid);
    for (int i = 0; i < max_ms * 2; i++) {
        int gone = s == 0 || s == 'Z' || s == 'X';
        if ((want == 0 && gone) || (want != 0 && s == want))
            break;
        struct timespec ts = {0, 500000};
        nanosleep(&ts, NULL);
        s = uproc_state(pid);
    }
    return s;
}

/* ---- unit_proc: environment marks and group members ---- */

#define UPROC_ENV_MAX (256 * 1024) /* bytes of /proc/PID/environ read at most */

int uproc_env_has(pid_t pid, const char *const *marks, int *empty, char *err, size_t errlen)
{
    if (empty)
        *empty = 0;
    if (pid <= 0)
        return cx_fail(err, errlen, CX_ENOTFOUND, "pid %d is not a process id", (int)pid);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ESRCH)
            return cx_fail(err, errlen, CX_ENOTFOUND, "pid %d is gone", (int)pid);
        return cx_fail(err, errlen, CX_ESYS, "%s: %s", path, strerror(e));
    }
    char *env = malloc(UPROC_ENV_MAX);
    size_t n = 0;
    ssize_t r = 0;
    while (env && n < UPROC_ENV_MAX && (r = read(fd, env + n, UPROC_ENV_MAX - n)) > 0)
        n += (size_t)r;
    int e = errno;
    close(fd);
    if (!env)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    if (r < 0) {
        free(env);
        if (e == ESRCH)
            return cx_fail(err, errlen, CX_ENOTFOUND, "pid %d is gone", (int)pid);
        return cx_fail(err, errlen, CX_ESYS, "%s: %s", path, strerror(e));
    }
    if (n == 0 && empty)
        *empty = 1;
    int all = 1;
    for (size_t m = 0; marks && marks[m] && all; m++) {
        size_t ml = strlen(marks[m]);
        int found = 0;
        for (size_t i = 0; i < n && !found;) {
            size_t l = strnlen(env + i, n - i);
            found = l == ml && memcmp(env + i, marks[m], ml) == 0;
            i += l + 1;
        }
        all = found;
    }
    free(env);
    return all;
}

/* State and process group of pid from one read of /proc/PID/stat (no
 * stdio: this runs for every process on the machine, in a kill's path). */
static int stat_state_pgrp(pid_t pid, char *state, pid_t *pgrp)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2])
        return -1;
    p += 2; /* field 3: state, then 4: ppid, 5: pgrp */
    *state = p[0];
    for (int i = 0; i < 2; i++) {
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
    }
    char *end = NULL;
    long v = strtol(p, &end, 10);
    if (end == p)
        return -1;
    *pgrp = (pid_t)v;
    return 0;
}

int uproc_group_members(pid_t pgid, pid_t *out, int max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return CX_ESYS;
    int count = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        char *end = NULL;
        long v = strtol(de->d_name, &end, 10);
        if (*end || v <= 0 || v > INT32_MAX)
            continue;
        pid_t pid = (pid_t)v, pg;
        char st;
        if (stat_state_pgrp(pid, &st, &pg) != 0 || pg != pgid || st == 'Z' || st == 'X')
            continue;
        if (count < max && out)
            out[count] = pid;
        count++;
    }
    closedir(d);
    return count;
}

int uproc_signal_same(pid_t pid, uint64_t starttime, int sig)
{
    if (pid <= 0 || starttime == 0)
        return CX_ENOTFOUND;
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return errno == ESRCH ? CX_ENOTFOUND : CX_ESYS;
    /* The pidfd names one process for good: if it has the start time now,
     * it is the process that had it, whatever happens to the pid number. */
    int rc = CX_ENOTFOUND;
    if (uproc_same(pid, starttime))
        rc = uproc_pidfd_signal(fd, sig) == 0 ? 0 : errno == ESRCH ? CX_ENOTFOUND : CX_ESYS;
    close(fd);
    return rc;
#else
    if (!uproc_same(pid, starttime))
        return CX_ENOTFOUND;
    return kill(pid, sig) == 0 ? 0 : errno == ESRCH ? CX_ENOTFOUND : CX_ESYS;
#endif
}

int uproc_ncpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (int)n : 1;
}

/* ---- unit_proc: duty cycle ---- */

static uint64_t uproc_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

void uproc_duty_init(uproc_duty *d, int64_t period_ms, int64_t stopped_ms, double jitter, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->period_ms = period_ms;
    d->stopped_ms = stopped_ms;
    d->jitter = jitter;
    d->rng = seed ? seed : 0x9E3779B97F4A7C15ULL;
}

/* This cycle's stopped time: nominal, jittered, kept in [1, period-1]. */
static int64_t uproc_duty_stop_len(uproc_duty *d)
{
    double len = (double)d->stopped_ms;
    if (d->jitter > 0) {
        double u = (double)(uproc_rand(&d->rng) >> 11) / 9007199254740992.0; /* [0,1) */
        len *= 1.0 + d->jitter * (2.0 * u - 1.0);
    }
    int64_t ms = (int64_t)(len + 0.5);
    if (ms < 1)
        ms = 1;
    if (ms > d->period_ms - 1)
        ms = d->period_ms - 1;
    return ms;
}

static void uproc_duty_begin(uproc_duty *d, int pidfd, int64_t now_ms)
{
    d->cycle_start_ms = now_ms;
    d->stop_until_ms = now_ms + uproc_duty_stop_len(d);
    d->cycles++;
    d->stopped = uproc_signal_group(d->pid, pidfd, SIGSTOP, NULL, NULL, 0) == 0;
}

int uproc_duty_start(uproc_duty *d, pid_t pid, int pidfd, int64_t now_ms, char *err, size_t errlen)
{
    char s = uproc_state(pid);
    if (pid <= 0 || s == 0 || s == 'Z')
        return cx_fail(err, errlen, CX_ENOTFOUND, "unit is not running");
    d->pid = pid;
    d->starttime = uproc_starttime(pid);
    uproc_duty_begin(d, pidfd, now_ms);
    if (!d->stopped)
        return cx_fail(err, errlen, CX_ENOTFOUND, "could not stop process group %d", (int)pid);
    return 0;
}

/* Invariants of the diagram in unit_proc.h (debug builds only). */
static void assert_duty_state(const uproc_duty *d)
{
    assert(d->period_ms >= 2 && d->stopped_ms >= 1 && d->stopped_ms < d->period_ms);
    assert(d->rng != 0);
    assert(!d->stopped || d->pid > 0); /* STOPPED names a process */
    assert(!d->stopped || d->stop_until_ms <= d->cycle_start_ms + d->period_ms);
    (void)d;
}

void uproc_duty_tick(uproc_duty *d, pid_t pid, int pidfd, int64_t now_ms)
{
    assert_duty_state(d);
    if (pid != d->pid) {
        /* The unit restarted (or stopped): the old process is gone, its
         * SIGSTOP with it. Cycle the new one from now. */
        d->stopped = 0;
        d->pid = pid;
        d->starttime = pid > 0 ? uproc_starttime(pid) : 0;
        if (pid > 0)
            uproc_duty_begin(d, pidfd, now_ms);
        return;
    }
    if (pid <= 0)
        return;
    if (d->stopped) {
        if (now_ms >= d->stop_until_ms) {
            (void)uproc_signal_group(pid, pidfd, SIGCONT, NULL, NULL, 0);
            d->stopped = 0;
        }
        return;
    }
    int64_t next = d->cycle_start_ms + d->period_ms;
    if (now_ms >= next)
        uproc_duty_begin(d, pidfd, now_ms - next < d->period_ms ? next : now_ms);
}

int uproc_duty_stop(uproc_duty *d, pid_t pid, int pidfd, char *err, size_t errlen)
{
    int rc = 0;
    if (d->stopped && d->pid > 0) {
        int fd = pid == d->pid ? pidfd : -1;
        if (uproc_same(d->pid, d->starttime))
            rc = uproc_signal_group(d->pid, fd, SIGCONT, NULL, err, errlen);
        if (rc == CX_ENOTFOUND)
            rc = 0;
    }
    d->stopped = 0;
    return rc;
}

int uproc_duty_sweep(pid_t pid, uint64_t starttime, char *err, size_t errlen)
{
    uproc_duty d;
    uproc_duty_init(&d, 2, 1, 0, 1);
    d.pid = pid;
    d.starttime = starttime;
    d.stopped = 1;
    return uproc_duty_stop(&d, 0, -1, err, errlen);
}
