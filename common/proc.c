/* proc.c - fork/execve child processes, bounded waits, stop. */
#include "common/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/log.h"

extern char **environ;

/* The inherited environment with extra "K=V" entries added or replacing
 * the same key. Built before fork: the child may only call async-signal-safe
 * functions. */
static char **build_env(const char *const *extra)
{
    size_t n = 0, m = 0;
    while (environ[n])
        n++;
    while (extra && extra[m])
        m++;
    char **env = calloc(n + m + 1, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t kl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        int replaced = 0;
        for (size_t j = 0; j < m; j++)
            if (strncmp(extra[j], environ[i], kl) == 0 && extra[j][kl] == '=')
                replaced = 1;
        if (!replaced)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        env[k++] = (char *)extra[j];
    env[k] = NULL;
    return env;
}

int cx_spawn(const char *const *argv, const cx_spawn_opts *opts, pid_t *pid, char *err, size_t errlen)
{
    static const cx_spawn_opts defaults = {.stdout_fd = -1, .stderr_fd = -1};
    if (!opts)
        opts = &defaults;
    if (!argv || !argv[0])
        return cx_fail(err, errlen, CX_EINVAL, "spawn: empty command");
    char **env = build_env(opts->extra_env);
    if (!env)
        return cx_fail(err, errlen, CX_ENOMEM, "spawn: out of memory");
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        free(env);
        return cx_fail(err, errlen, CX_ESYS, "spawn: pipe: %s", strerror(errno));
    }
    pid_t parent = getpid();
    pid_t p = fork();
    if (p < 0) {
        int e = errno;
        close(pfd[0]);
        close(pfd[1]);
        free(env);
        return cx_fail(err, errlen, CX_ESYS, "spawn: fork: %s", strerror(e));
    }
    if (p == 0) {
        /* child: async-signal-safe calls only */
        int e = 0; /* reported as {stage, errno}: stage 1 the netns, 0 chdir/exec */
        if (opts->netns) {
            int nfd = open(opts->netns, O_RDONLY | O_CLOEXEC);
            if (nfd < 0 || setns(nfd, CLONE_NEWNET) != 0) {
                int msg[2] = {1, errno};
                ssize_t w = write(pfd[1], msg, sizeof msg);
                (void)w;
                _exit(CX_EXIT_EXEC_FAILED);
            }
            close(nfd);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        if (opts->new_pgrp)
            setpgid(0, 0);
        for (int i = 0; opts->join_cgroups && opts->join_cgroups[i]; i++) {
            int cfd = open(opts->join_cgroups[i], O_WRONLY | O_CLOEXEC);
            if (cfd >= 0) {
                ssize_t cw = write(cfd, "0", 1);
                (void)cw; /* best effort: the parent attaches the group after the spawn too */
                close(cfd);
            }
        }
        if (opts->die_with_parent) {
            prctl(PR_SET_PDEATHSIG, opts->die_with_parent);
            if (getppid() != parent)
                _exit(CX_EXIT_EXEC_FAILED);
        }
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) {
            dup2(devnull, 0);
            close(devnull);
        }
        if (opts->stdout_fd >= 0)
            dup2(opts->stdout_fd, 1);
        if (opts->stderr_fd >= 0)
            dup2(opts->stderr_fd, 2);
        if (opts->cwd && chdir(opts->cwd) != 0)
            e = errno;
        if (!e) {
            execvpe(argv[0], (char *const *)argv, env);
            e = errno;
        }
        int msg[2] = {0, e};
        ssize_t w = write(pfd[1], msg, sizeof msg);
        (void)w;
        _exit(CX_EXIT_EXEC_FAILED);
    }
    close(pfd[1]);
    free(env);
    int msg[2] = {0, 0}; /* {stage, errno} from a child that failed before exec */
    ssize_t r;
    do {
        r = read(pfd[0], msg, sizeof msg);
    } while (r < 0 && errno == EINTR);
    close(pfd[0]);
    if (r == (ssize_t)sizeof msg) {
        waitpid(p, NULL, 0);
        if (msg[0] == 1)
            return cx_fail(err, errlen, CX_ESYS, "cannot run '%s' in network namespace %s: %s", argv[0],
                           opts->netns, strerror(msg[1]));
        return cx_fail(err, errlen, CX_EINVAL, "cannot run '%s': %s", argv[0], strerror(msg[1]));
    }
    if (opts->new_pgrp)
        setpgid(p, p); /* also from the parent: no race with an early signal */
    *pid = p;
    return 0;
}

int cx_wait_timeout(pid_t pid, long timeout_ms, int *status)
{
    int64_t deadline = cx_mono_ms() + timeout_ms;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (status)
                *status = st;
            return 0;
        }
        if (r < 0 && errno != EINTR)
            return CX_ENOTFOUND;
        if (cx_mono_ms() >= deadline)
            return CX_ETIMEDOUT;
        cx_sleep_ms(5);
    }
}

int cx_stop(pid_t pid, int to_group, long grace_ms)
{
    pid_t target = to_group ? -pid : pid;
    kill(target, SIGCONT); /* a stopped process cannot handle TERM */
    kill(target, SIGTERM);
    if (cx_wait_timeout(pid, grace_ms, NULL) == 0)
        return 0;
    kill(target, SIGKILL);
    return cx_wait_timeout(pid, 5000, NULL);
}

int cx_self_exe(char *out, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    if (n < 0)
        return CX_ESYS;
    out[n] = '\0';
    return 0;
}

int cx_run(const char *const *argv, const char *name, long timeout_ms, char *out, size_t outlen, char *err,
           size_t errlen)
{
    char cmd[200];
    size_t cl = 0;
    cmd[0] = '\0';
    for (size_t i = 0; argv[i] && cl + 2 < sizeof cmd; i++)
        cl += (size_t)snprintf(cmd + cl, sizeof cmd - cl, "%s%s", i ? " " : "", i || !name ? argv[i] : name);
    int fd = memfd_create("cx-run", MFD_CLOEXEC);
    if (fd < 0)
        return cx_fail(err, errlen, CX_ESYS, "memfd_create: %s", strerror(errno));
    cx_spawn_opts o = {.stdout_fd = fd, .stderr_fd = fd};
    pid_t pid = 0;
    int rc = cx_spawn(argv, &o, &pid, err, errlen);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    int st = 0;
    int timed_out = cx_wait_timeout(pid, timeout_ms, &st) < 0;
    if (timed_out) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    char text[160] = "";
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    if (out && outlen > 0) {
        ssize_t all = pread(fd, out, outlen - 1, 0);
        out[all > 0 ? all : 0] = '\0';
    }
    close(fd);
    if (timed_out)
        return cx_fail(err, errlen, CX_ETIMEDOUT, "%s: no answer within %ld ms", cmd, timeout_ms);
    if (got > 0) {
        text[got] = '\0';
        for (char *p = text; *p; p++) /* one line: newlines become spaces, a last one goes */
            if (*p == '\n' || *p == '\r')
                *p = *(p + 1) ? ' ' : '\0';
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    cx_debug("%s failed: %s", cmd, text);
    return cx_fail(err, errlen, CX_ESYS, "%s: %s", cmd,
                   text[0]           ? text
                   : WIFSIGNALED(st) ? "killed by a signal"
                                     : "failed");
}
