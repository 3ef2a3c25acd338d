/* inj_test.h - shared helpers of the injector unit tests (test_inj_*.c,
 * test_cgroup.c): a `sleep 1000` child in its own process group, a fake
 * inj_target, prepare() assertions, and one fault applied to one unit
 * (injt_run), fake and real cgroup hierarchies. Header-only (static) so that it is
 * compiled into the injector tests only, not into every unit test as a
 * support_*.c would be.
 */
#ifndef INJ_TEST_H
#define INJ_TEST_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/proc.h"
#include "injectors/cgroup.h"
#include "injectors/injector.h"
#include "injectors/unit_proc.h"

/* A child `sleep 1000` leading its own process group; *pidfd may be -1.
 * ignore_term: the child ignores SIGTERM (inherited across execve). */
static inline pid_t injt_child(int *pidfd, int ignore_term)
{
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a crashed test */
        setpgid(0, 0);
        signal(SIGTERM, ignore_term ? SIG_IGN : SIG_DFL);
        int fd = open("/dev/null", O_RDWR);
        if (fd >= 0) {
            dup2(fd, 0);
            dup2(fd, 1);
        }
        char *const argv[] = {"sleep", "1000", NULL};
        execvp("sleep", argv);
        _exit(127);
    }
    setpgid(pid, pid); /* no race with the child's own setpgid */
    *pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    /* wait until it runs sleep (state S) so signals hit the real program */
    for (int i = 0; i < 2000 && uproc_state(pid) != 'S'; i++)
        usleep(1000);
    return pid;
}

/* SIGKILL the child's group and reap it; returns its wait status. */
static inline int injt_reap(pid_t pid, int pidfd)
{
    int status = 0;
    kill(-pid, SIGKILL);
    kill(-pid, SIGCONT);
    waitpid(pid, &status, 0);
    if (pidfd >= 0)
        close(pidfd);
    return status;
}

/* Wait up to ms for the child to exit; its wait status or -1. */
static inline int injt_wait_exit(pid_t pid, int ms)
{
    for (int i = 0; i < ms; i++) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return status;
        usleep(1000);
    }
    return -1;
}

/* Wait up to ms for /proc state == want (0 = gone/zombie); last state. */
static inline char injt_wait_state(pid_t pid, char want, int ms)
{
    char s = uproc_state(pid);
    for (int i = 0; i < ms; i++) {
        int gone = s == 0 || s == 'Z';
        if (want == 0 ? gone : s == want)
            break;
        usleep(1000);
        s = uproc_state(pid);
    }
    return s;
}

typedef struct injt_expect {
    int calls;          /* expect_exit calls */
    int64_t restart_ms; /* last restart_after_ms */
} injt_expect;

static inline void injt_expect_exit(inj_target *t, int64_t restart_after_ms)
{
    injt_expect *e = t->agent;
    e->calls++;
    e->restart_ms = restart_after_ms;
}

static inline inj_target injt_target(const char *unit_id, pid_t pid, int pidfd, const char *state_dir,
                                     injt_expect *e)
{
    return (inj_target){.unit_id = unit_id,
                        .pid = pid,
                        .pidfd = pidfd,
                        .state_dir = state_dir,
                        .expect_exit = injt_expect_exit,
                        .agent = e};
}

/* prepare(json) must fail with CX_EINVAL and name key in its message. */
static inline void injt_bad(const injector *inj, const char *json, const char *key)
{
    json_error_t je;
    json_t *p = json_loads(json, JSON_DECODE_ANY, &je);
    cr_assert(p, "test json %s: %s", json, je.text);
    void *ctx = NULL;
    char err[CX_ERRLEN] = "";
    int rc = inj->prepare(p, 1, &ctx, err, sizeof err);
    json_decref(p);
    cr_assert_eq(rc, CX_EINVAL, "%s: prepare(%s) = %d, want CX_EINVAL", inj->type, json, rc);
    cr_assert_null(ctx, "%s: ctx set on failure", inj->type);
    cr_assert(strstr(err, key), "%s: prepare(%s) error '%s' does not name '%s'", inj->type, json, err, key);
}

/* prepare(json) must succeed; returns the ctx. */
static inline void *injt_ok(const injector *inj, const char *json, uint64_t seed)
{
    json_error_t je;
    json_t *p = json_loads(json, JSON_DECODE_ANY, &je);
    cr_assert(p, "test json %s: %s", json, je.text);
    void *ctx = NULL;
    char err[CX_ERRLEN] = "";
    int rc = inj->prepare(p, seed, &ctx, err, sizeof err);
    json_decref(p);
    cr_assert_eq(rc, 0, "%s: prepare(%s) failed: %s", inj->type, json, err);
    cr_assert_not_null(ctx);
    return ctx;
}

/* ---- one fault on one unit ----
 * What every apply/revert test sets up: a prepared fault, the evidence
 * object and error buffer its calls write into, and the unit it is applied
 * to (a `sleep` child from injt_run_start, or a target with no process from
 * injt_run_init). injt_run_cleanup frees all of it and reaps the child. */
typedef struct injt_run {
    const injector *inj;
    void *ctx;           /* prepare's context */
    json_t *ev;          /* the evidence apply fills */
    char err[CX_ERRLEN]; /* the last call's message */
    pid_t pid;           /* the child, 0 if none */
    int pidfd;           /* its pidfd or -1 */
    injt_expect e;       /* t's expect_exit calls */
    inj_target t;        /* the unit */
} injt_run;

/* prepare(json) with seed must succeed (as injt_ok); the unit is t, which
 * has no process (its agent becomes &r->e). */
static inline void injt_run_init(injt_run *r, const injector *inj, const char *json, uint64_t seed,
                                 inj_target t)
{
    r->inj = inj;
    r->ctx = injt_ok(inj, json, seed);
    r->ev = json_object();
    r->err[0] = '\0';
    r->pid = 0;
    r->pidfd = -1;
    r->e = (injt_expect){0, 0};
    r->t = t;
    r->t.agent = &r->e;
}

/* As injt_run_init (seed 1), the unit a new child (injt_child) named
 * unit_id with state dir /tmp. */
static inline void injt_run_start(injt_run *r, const injector *inj, const char *json, const char *unit_id,
                                  int ignore_term)
{
    int pidfd;
    pid_t pid = injt_child(&pidfd, ignore_term);
    injt_run_init(r, inj, json, 1, injt_target(unit_id, pid, pidfd, "/tmp", NULL));
    r->pid = pid;
    r->pidfd = pidfd;
}

/* Kill and reap the child unless it was reaped already; close its pidfd. */
static inline void injt_run_stop_child(injt_run *r)
{
    int status;
    if (r->pid > 0 && waitpid(r->pid, &status, WNOHANG) == 0) /* still there */
        injt_reap(r->pid, r->pidfd);
    else if (r->pidfd >= 0)
        close(r->pidfd);
    r->pidfd = -1;
}

static inline void injt_run_cleanup(injt_run *r)
{
    r->inj->free(r->ctx);
    json_decref(r->ev);
    injt_run_stop_child(r);
}

/* Drop the context for a new one prepared from json (ev is kept). */
static inline void injt_run_reprepare(injt_run *r, const char *json, uint64_t seed)
{
    r->inj->free(r->ctx);
    r->ctx = injt_ok(r->inj, json, seed);
}

/* apply and revert on r->t: their return values, their message in r->err. */
static inline int injt_apply(injt_run *r)
{
    return r->inj->apply(r->ctx, &r->t, r->ev, r->err, sizeof r->err);
}

static inline int injt_revert(injt_run *r)
{
    return r->inj->revert(r->ctx, &r->t, r->err, sizeof r->err);
}

/* apply must succeed. */
#define injt_apply_ok(r) cr_assert_eq(injt_apply(r), 0, "%s: apply: %s", (r)->inj->type, (r)->err)

/* prepare must accept each of the params that follow (JSON texts, up to
 * a NULL). */
static inline void injt_good(const injector *inj, ...)
{
    va_list ap;
    va_start(ap, inj);
    for (const char *json = va_arg(ap, const char *); json; json = va_arg(ap, const char *))
        inj->free(injt_ok(inj, json, 1));
    va_end(ap);
}

/* A fresh temp dir (malloc'd). */
static inline char *injt_tmpdir(const char *tag)
{
    char tmpl[256];
    snprintf(tmpl, sizeof tmpl, "/tmp/cx-%s-XXXXXX", tag);
    char *d = mkdtemp(tmpl);
    cr_assert(d, "mkdtemp: %s", strerror(errno));
    return strdup(d);
}

/* Create path (and parents) as a directory. */
static inline void injt_mkdirs(const char *path)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0755);
            *p = '/';
        }
    mkdir(buf, 0755);
}

/* Write a small file (creating it). */
static inline void injt_write(const char *dir, const char *name, const char *content)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f, "fopen %s: %s", path, strerror(errno));
    fputs(content, f);
    fclose(f);
}

/* Read a small file into buf ("" if missing). */
static inline const char *injt_read(const char *dir, const char *name, char *buf, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return buf;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Remove a temp tree (regular files and dirs only; paths under /tmp). */
static inline void injt_rmtree(const char *path)
{
    if (strncmp(path, "/tmp/cx-", 8) != 0)
        return;
    char *const argv[] = {"rm", "-rf", (char *)path, NULL};
    pid_t pid = fork();
    if (pid == 0) {
        execvp("rm", argv);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
}

/* The undo path of a fault that writes one file, dir/name: revert restores
 * want there and a second revert is a no-op; after a "crash" that left
 * faulted in the file, a sweep from the undo record (taken while the fault
 * was applied) restores want again. */
static inline void injt_check_undo(injt_run *r, const char *dir, const char *name, const char *faulted,
                                   const char *want)
{
    char buf[512];
    json_t *rec = r->inj->undo_record(r->ctx);
    cr_assert_not_null(rec);
    cr_assert_eq(injt_revert(r), 0, "revert: %s", r->err);
    cr_assert_str_eq(injt_read(dir, name, buf, sizeof buf), want);
    cr_assert_eq(injt_revert(r), 0, "second revert: %s", r->err);
    injt_write(dir, name, faulted);
    cr_assert_eq(r->inj->sweep(rec, &r->t, r->err, sizeof r->err), 0, "sweep: %s", r->err);
    cr_assert_str_eq(injt_read(dir, name, buf, sizeof buf), want);
    json_decref(rec);
}

/* ---- cgroups ---- */

/* Unit u1's directory in a fake hierarchy, root/<sub>chaosloco/u1 (its
 * path into dir), made with an empty cgroup.procs and the files that
 * follow as name, content pairs up to a NULL. */
static inline void injt_fake_unit(char *dir, size_t len, const char *root, const char *sub, ...)
{
    snprintf(dir, len, "%s/%schaosloco/u1", root, sub);
    injt_mkdirs(dir);
    injt_write(dir, "cgroup.procs", "");
    va_list ap;
    va_start(ap, sub);
    for (const char *name = va_arg(ap, const char *); name; name = va_arg(ap, const char *))
        injt_write(dir, name, va_arg(ap, const char *));
    va_end(ap);
}

/* A fresh temp dir (malloc'd) that CHAOSLOCO_CGROUP_ROOT names: a fake
 * hierarchy the test fills in. Undo with injt_fake_cgroup_drop. */
static inline char *injt_fake_cgroup(const char *tag)
{
    char *root = injt_tmpdir(tag);
    setenv("CHAOSLOCO_CGROUP_ROOT", root, 1);
    return root;
}

static inline void injt_fake_cgroup_drop(char *root)
{
    unsetenv("CHAOSLOCO_CGROUP_ROOT");
    injt_rmtree(root);
    free(root);
}

/* Without any cgroup hierarchy (an empty fake root), apply(json) on a
 * child answers CX_ENOTSUP with a message naming what, leaves the unit
 * running, and reverting the unapplied fault is a no-op. */
static inline void injt_check_no_cgroup(const injector *inj, const char *json, const char *what)
{
    char *root = injt_fake_cgroup("no-cgroup");
    injt_run r;
    injt_run_start(&r, inj, json, "u1", 0);
    cr_assert_eq(injt_apply(&r), CX_ENOTSUP);
    cr_assert(strstr(r.err, what), "%s", r.err);
    cr_assert_eq(uproc_state(r.pid), 'S', "a failed apply must leave the unit running");
    cr_assert_eq(injt_revert(&r), 0, "revert of an unapplied fault is a no-op");
    injt_run_cleanup(&r);
    injt_fake_cgroup_drop(root);
}

/* The real cgroup set of unit (cxtest-<tag>-<pid>, written into unit) when
 * this process is root and controller c is writable; otherwise the test is
 * skipped, naming what (e.g. "cpu cgroup"). */
static inline cg_set *injt_real_cgroup(const char *tag, cg_ctrl c, const char *what, char *unit, size_t len)
{
    snprintf(unit, len, "cxtest-%s-%d", tag, (int)getpid());
    cg_set *s = NULL;
    cr_assert_eq(cg_set_open(NULL, unit, &s, NULL, 0), 0);
    if (geteuid() != 0 || !cg_set_available(s, c)) {
        cr_log_warn("skipped: no writable %s (%s)", what, cg_set_why(s, c));
        cg_set_remove(s, NULL, 0);
        cg_set_free(s);
        cr_skip_test("no writable %s", what);
    }
    return s;
}

#endif
