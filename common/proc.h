/* proc.h - start and stop child processes without a shell.
 *
 * cx_spawn forks and execve()s argv[0] (searched in PATH when it has no
 * '/'), optionally in a new process group, with stdout/stderr redirected to
 * the given fds (-1 = inherit) and stdin from /dev/null. extra_env adds
 * "NAME=value" entries to the inherited environment (NULL-terminated or
 * NULL). Never uses system() or /bin/sh.
 */
#ifndef CX_PROC_H
#define CX_PROC_H

#include <stddef.h>
#include <sys/types.h>

typedef struct cx_spawn_opts {
    int new_pgrp;                    /* 1: setpgid(0,0) in the child */
    int stdout_fd;                   /* -1 inherit */
    int stderr_fd;                   /* -1 inherit */
    const char *const *extra_env;    /* NULL-terminated "K=V" list, or NULL */
    const char *cwd;                 /* chdir in the child, or NULL */
    int die_with_parent;             /* 0, or the signal the child gets when the spawning thread
                                        exits (PR_SET_PDEATHSIG): SIGKILL, SIGTERM */
    const char *const *join_cgroups; /* NULL-terminated cgroup.procs paths the child joins (writes
                                        "0") before exec, best effort; or NULL. Then it and all it
                                        starts are in them from its first instruction */
    const char *netns;               /* path of a network namespace the child enters first
                                        (setns; needs CAP_SYS_ADMIN; failing is a spawn error),
                                        or NULL: the caller's */
} cx_spawn_opts;

int cx_spawn(const char *const *argv, const cx_spawn_opts *opts, pid_t *pid, char *err, size_t errlen);

/* Wait up to timeout_ms for pid to exit (polling waitpid WNOHANG).
 * Returns 0 and *status on exit, CX_ETIMEDOUT otherwise. */
int cx_wait_timeout(pid_t pid, long timeout_ms, int *status);

/* SIGTERM, wait up to grace_ms, then SIGKILL and reap. to_group: signal the
 * process group -pid. Returns 0 once reaped. */
int cx_stop(pid_t pid, int to_group, long grace_ms);

/* Run argv to completion, bounded: cx_spawn (its output captured in a
 * memfd), then wait at most timeout_ms (then SIGKILL and reap). 0 when it
 * exited 0. Else CX_ETIMEDOUT, or CX_ESYS with "<command line>: <the first
 * 160 bytes of its output on one line>" in err (the command line names
 * argv[0] as `name` when name is non-NULL). With out, its stdout and stderr
 * (NUL-terminated, cut to outlen) are copied there either way. */
int cx_run(const char *const *argv, const char *name, long timeout_ms, char *out, size_t outlen, char *err,
           size_t errlen);

/* Path of the running executable (/proc/self/exe), for re-exec. */
int cx_self_exe(char *out, size_t len);

#endif
