/* scope.c - what the crash sweep may touch (agent_sweep_check, the
 * registry's sweep_check hook). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "injectors/cgroup.h"
#include "injectors/unit_proc.h"

/* ---- agent: what the crash sweep may touch ----
 *
 * faults.json lives in the state dir, and anyone who can write there can
 * forge a record; the sweep runs before anything else, as the agent's
 * user. So every value of an undo record is checked against what this
 * agent owns before its injector's sweep() sees it:
 *
 *   file         a path inside the state dir, no "." / ".." / symlink on
 *                the way, a regular file (or absent)
 *   cgroup_root  "" or the root this agent's cgroups use
 *                ($CHAOSLOCO_CGROUP_ROOT, else /sys/fs/cgroup)
 *   unit_id      "" or this agent's --id (the cgroup is chaosloco/<id>)
 *   pid          0, a pid that is gone, or a process started by an agent
 *                with this id and this state dir (its environment carries
 *                CHAOSLOCO_AGENT_ID and CHAOSLOCO_HOOK_DIR): the unit
 *   starttime    an integer (injectors compare it with the pid's)
 *   method       a string
 *
 * Any other key is refused: an injector that records a new key must be
 * added here (the sweep then fails safe, logged, rather than acting on a
 * value nobody checked).
 */

static int sweep_path_ok(const agent *a, const char *path, char *err, size_t errlen)
{
    size_t root = strlen(a->state_dir);
    if (strncmp(path, a->state_dir, root) != 0 || path[root] != '/')
        return cx_fail(err, errlen, CX_EINVAL, "file '%s' is outside the state dir %s", path, a->state_dir);
    char buf[4096];
    if (strlen(path) >= sizeof buf)
        return cx_fail(err, errlen, CX_EINVAL, "file: path too long");
    snprintf(buf, sizeof buf, "%s", path);
    for (char *c = buf + root + 1;;) {
        char *slash = strchr(c, '/');
        size_t n = slash ? (size_t)(slash - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return cx_fail(err, errlen, CX_EINVAL, "file '%s': empty, '.' or '..' component", path);
        if (slash)
            *slash = '\0';
        struct stat st;
        if (lstat(buf, &st) != 0) {
            if (errno == ENOENT)
                return 0; /* nothing there to touch */
            return cx_fail(err, errlen, CX_EINVAL, "file '%s': %s", buf, strerror(errno));
        }
        if (S_ISLNK(st.st_mode))
            return cx_fail(err, errlen, CX_EINVAL, "file '%s': '%s' is a symbolic link", path, buf);
        if (!slash)
            return S_ISREG(st.st_mode)
                       ? 0
                       : cx_fail(err, errlen, CX_EINVAL, "file '%s' is not a regular file", path);
        if (!S_ISDIR(st.st_mode))
            return cx_fail(err, errlen, CX_EINVAL, "file '%s': '%s' is not a directory", path, buf);
        *slash = '/';
        c = slash + 1;
    }
}

/* The environment marks of this agent's unit ("KEY=VALUE" each): every
 * process the unit starts inherits them. */
static void unit_marks(const agent *a, char *id, size_t idlen, char *hook, size_t hooklen)
{
    snprintf(id, idlen, "CHAOSLOCO_AGENT_ID=%s", a->o.id);
    snprintf(hook, hooklen, "CHAOSLOCO_HOOK_DIR=%s", a->hook_dir);
}

/* 1 when pid carries this agent's marks, 0 when it does not, CX_ENOTFOUND
 * when it is gone, another error when its environment cannot be read. */
static int has_marks(const agent *a, pid_t pid, int *empty, char *err, size_t errlen)
{
    char id[256], hook[sizeof a->hook_dir + 32];
    unit_marks(a, id, sizeof id, hook, sizeof hook);
    const char *const marks[] = {id, hook, NULL};
    return uproc_env_has(pid, marks, empty, err, errlen);
}

static int sweep_pid_ok(const agent *a, json_int_t pid, char *err, size_t errlen)
{
    if (pid == 0)
        return 0;
    if (pid < 0 || pid > INT32_MAX)
        return cx_fail(err, errlen, CX_EINVAL, "pid %lld is not a process id", (long long)pid);
    int empty = 0;
    char why[CX_ERRLEN] = "";
    int rc = has_marks(a, (pid_t)pid, &empty, why, sizeof why);
    if (rc == 1 || rc == CX_ENOTFOUND || (rc == 0 && empty))
        return 0; /* ours, gone, or a zombie / kernel thread (nothing to signal) */
    if (rc < 0)
        return cx_fail(err, errlen, CX_EINVAL, "pid %lld is not this agent's unit (%s)", (long long)pid, why);
    return cx_fail(err, errlen, CX_EINVAL,
                   "pid %lld is not this agent's unit (no CHAOSLOCO_AGENT_ID=%s with this state dir "
                   "in its environment)",
                   (long long)pid, a->o.id);
}

int agent_sweep_check(void *ctx, const char *type, const json_t *undo, char *err, size_t errlen)
{
    agent *a = ctx;
    (void)type;
    if (!json_is_object(undo))
        return cx_fail(err, errlen, CX_EINVAL, "undo record is not an object");
    const char *root = getenv("CHAOSLOCO_CGROUP_ROOT");
    if (!root || !root[0])
        root = CG_DEFAULT_ROOT;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)undo, key, v)
    {
        const char *str = json_string_value(v);
        int rc = 0;
        if (strcmp(key, "file") == 0) {
            if (!str)
                rc = cx_fail(err, errlen, CX_EINVAL, "file: not a string");
            else if (str[0])
                rc = sweep_path_ok(a, str, err, errlen);
        } else if (strcmp(key, "cgroup_root") == 0) {
            if (!str || (str[0] && strcmp(str, root) != 0))
                rc = cx_fail(err, errlen, CX_EINVAL, "cgroup_root '%s' is not this agent's (%s)",
                             str ? str : "?", root);
        } else if (strcmp(key, "unit_id") == 0) {
            if (!str || (str[0] && strcmp(str, a->o.id) != 0))
                rc = cx_fail(err, errlen, CX_EINVAL, "unit_id '%s' is not this agent's (%s)", str ? str : "?",
                             a->o.id);
        } else if (strcmp(key, "pid") == 0) {
            rc = json_is_integer(v) ? sweep_pid_ok(a, json_integer_value(v), err, errlen)
                                    : cx_fail(err, errlen, CX_EINVAL, "pid: not an integer");
        } else if (strcmp(key, "starttime") == 0) {
            if (!json_is_integer(v))
                rc = cx_fail(err, errlen, CX_EINVAL, "starttime: not an integer");
        } else if (strcmp(key, "method") == 0) {
            if (!str)
                rc = cx_fail(err, errlen, CX_EINVAL, "method: not a string");
        } else {
            rc =
                cx_fail(err, errlen, CX_EINVAL, "undo record key '%s' is not one the sweep can confine", key);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- agent: the unit a crashed agent left behind ----
 *
 * The supervisor writes <state>/unit.json (pgid, leader pid, the leader's
 * /proc start time) after each spawn and removes it once the whole group
 * is gone. A file still there at start-up means the previous agent died
 * with its unit alive; its watchdog should have killed the group, but may
 * have died with it. The sweep ends what is left, and only processes that
 *   - are in that process group,
 *   - started no earlier than the recorded leader (the leader itself: at
 *     exactly its start time): a pgid names one group only while it lives,
 *   - carry this agent's environment marks (id and state dir).
 * Everything else in the group is logged and left alone. Each signal goes
 * through a pidfd after a fresh start-time check (uproc_signal_same).
 */

#define SWEEP_GROUP_MAX 256 /* members looked at per scan */

typedef struct unit_rec {
    pid_t pgid;         /* the unit's process group */
    pid_t pid;          /* its leader */
    uint64_t starttime; /* the leader's start time, clock ticks since boot */
} unit_rec;

static int read_unit_rec(const char *path, unit_rec *u, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return CX_ENOTFOUND;
        return cx_fail(err, errlen, CX_EIO, "%s: %s", path, strerror(e));
    }
    struct stat st;
    char buf[4096];
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (off_t)sizeof buf)
        n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0)
        return cx_fail(err, errlen, CX_EINVAL, "%s: not a regular file of at most %zu bytes", path,
                       sizeof buf - 1);
    json_error_t je;
    json_t *o = json_loadb(buf, (size_t)n, 0, &je);
    json_int_t pgid = 0, pid = 0, t0 = 0;
    int rc =
        o ? json_unpack_ex(o, &je, JSON_STRICT, "{s:I,s:I,s:I}", "pgid", &pgid, "pid", &pid, "starttime", &t0)
          : -1;
    json_decref(o);
    if (rc != 0)
        return cx_fail(err, errlen, CX_EINVAL, "%s: %s (want {\"pgid\", \"pid\", \"starttime\"} integers)",
                       path, je.text);
    if (pgid <= 1 || pgid > INT32_MAX || pid <= 1 || pid > INT32_MAX || t0 <= 0)
        return cx_fail(err, errlen, CX_EINVAL, "%s: pgid %lld, pid %lld or starttime %lld out of range", path,
                       (long long)pgid, (long long)pid, (long long)t0);
    u->pgid = (pid_t)pgid;
    u->pid = (pid_t)pid;
    u->starttime = (uint64_t)t0;
    return 0;
}

/* Signal (sig > 0) or count (sig 0) the members of the recorded group the
 * sweep may end. *skipped (optional) counts members left alone. */
static int sweep_group(const agent *a, const unit_rec *u, int sig, int *skipped)
{
    pid_t m[SWEEP_GROUP_MAX];
    int n = uproc_group_members(u->pgid, m, SWEEP_GROUP_MAX);
    if (n > SWEEP_GROUP_MAX)
        n = SWEEP_GROUP_MAX;
    int hit = 0;
    for (int i = 0; i < n; i++) {
        uint64_t t = uproc_starttime(m[i]);
        int in_time = m[i] == u->pid ? t == u->starttime : t >= u->starttime;
        char why[CX_ERRLEN] = "";
        int marked = in_time ? has_marks(a, m[i], NULL, why, sizeof why) : 0;
        if (!in_time || marked != 1) {
            if (skipped) {
                (*skipped)++;
                cx_warn("crash sweep: pid %d in process group %d left alone: %s", (int)m[i], (int)u->pgid,
                        !in_time     ? "started before the recorded unit"
                        : marked < 0 ? why
                                     : "it does not carry this agent's environment marks");
            }
            continue;
        }
        if (sig == 0 || uproc_signal_same(m[i], t, sig) == 0)
            hit++;
    }
    return hit;
}

int agent_sweep_unit(agent *a, int64_t grace_ms, int *nended, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/unit.json", a->state_dir);
    *nended = 0;
    unit_rec u;
    int rc = read_unit_rec(path, &u, err, errlen);
    if (rc == CX_ENOTFOUND)
        return 0;
    if (rc < 0)
        return rc;
    int skipped = 0;
    int n = sweep_group(a, &u, SIGCONT, &skipped);
    if (n > 0) {
        sweep_group(a, &u, SIGTERM, NULL);
        cx_warn(
            "crash sweep: %d process(es) of the previous unit (group %d) still run: SIGTERM, %lld ms grace",
            n, (int)u.pgid, (long long)grace_ms);
        int64_t end = cx_mono_ms() + grace_ms;
        while (sweep_group(a, &u, 0, NULL) > 0 && cx_mono_ms() < end)
            cx_sleep_ms(20);
        end = cx_mono_ms() + 2000;
        int left;
        while ((left = sweep_group(a, &u, SIGKILL, NULL)) > 0 && cx_mono_ms() < end)
            cx_sleep_ms(20);
        if (left > 0)
            return cx_fail(err, errlen, CX_ESYS,
                           "%d process(es) of the previous unit (group %d) survive SIGKILL", left,
                           (int)u.pgid);
    }
    *nended = n;
    if (unlink(path) != 0 && errno != ENOENT)
        return cx_fail(err, errlen, CX_EIO, "unlink %s: %s", path, strerror(errno));
    return 0;
}
