/* scope.c - what the crash sweep may touch (agent_sweep_check, the
 * registry's sweep_check hook). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/err.h"
#include "injectors/cgroup.h"

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

/* 1 when env (n bytes of NUL-separated entries) holds exactly "key=value". */
static int environ_has(const char *env, size_t n, const char *key, const char *value)
{
    size_t kl = strlen(key), vl = strlen(value);
    for (size_t i = 0; i < n;) {
        size_t l = strnlen(env + i, n - i);
        if (l == kl + 1 + vl && memcmp(env + i, key, kl) == 0 && env[i + kl] == '=' &&
            memcmp(env + i + kl + 1, value, vl) == 0)
            return 1;
        i += l + 1;
    }
    return 0;
}

static int sweep_pid_ok(const agent *a, json_int_t pid, char *err, size_t errlen)
{
    if (pid == 0)
        return 0;
    if (pid < 0 || pid > INT32_MAX)
        return cx_fail(err, errlen, CX_EINVAL, "pid %lld is not a process id", (long long)pid);
    char path[64];
    snprintf(path, sizeof path, "/proc/%lld/environ", (long long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ESRCH)
            return 0; /* gone: the injector's sweep finds nothing to do */
        return cx_fail(err, errlen, CX_EINVAL, "pid %lld is not this agent's unit (%s: %s)", (long long)pid,
                       path, strerror(errno));
    }
    size_t cap = 256 * 1024, n = 0;
    char *env = malloc(cap);
    ssize_t r = 0;
    while (env && n < cap && (r = read(fd, env + n, cap - n)) > 0)
        n += (size_t)r;
    close(fd);
    int ours = env && environ_has(env, n, "CHAOSLOCO_AGENT_ID", a->o.id) &&
               environ_has(env, n, "CHAOSLOCO_HOOK_DIR", a->hook_dir);
    free(env);
    if (!ours && n == 0 && r == 0)
        return 0; /* a zombie or kernel thread: its environment is empty, nothing to signal */
    return ours ? 0
                : cx_fail(err, errlen, CX_EINVAL,
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
