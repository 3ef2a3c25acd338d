/* cgroup.c - per-unit cgroups on v1 and v2 hierarchies. */
#include "injectors/cgroup.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/err.h"
#include "common/file.h"
#include "injectors/unit_proc.h"

#define CG_PATH 512

typedef struct cg_hier {
    int version;        /* 1, 2; 0 = unavailable */
    char base[CG_PATH]; /* parent of chaosloco/ (the agent's own cgroup) */
    char dir[CG_PATH];  /* base/chaosloco/<unit> */
    char rel[CG_PATH];  /* dir below the hierarchy's mount, as /proc/PID/cgroup names it */
    char why[256];      /* reason when unavailable, else "" */
} cg_hier;

struct cg_set {
    char root[CG_PATH];  /* hierarchy root used */
    char unit_id[65];    /* validated unit id */
    cg_hier h[CG_NCTRL]; /* one per controller */
};

static const char *const cg_v1_names[CG_NCTRL] = {"freezer", "cpu", "memory"};
static const char *const cg_v2_names[CG_NCTRL] = {NULL, "cpu", "memory"}; /* freeze is core */
static const char *const cg_v1_files[CG_NCTRL] = {"freezer.state", "cpu.cfs_quota_us",
                                                  "memory.limit_in_bytes"};
static const char *const cg_v2_files[CG_NCTRL] = {"cgroup.freeze", "cpu.max", "memory.max"};

/* ---- cgroup: small file helpers ---- */

/* Write value to dir/file in one write(2), as `echo value > file` does. */
static int cg_write(const char *dir, const char *file, const char *value, char *err, size_t errlen)
{
    char path[CG_PATH + 64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return cx_fail(err, errlen, CX_ESYS, "open %s: %s", path, strerror(e));
    }
    size_t len = strlen(value);
    ssize_t n = write(fd, value, len);
    int e = errno;
    close(fd);
    if (n != (ssize_t)len)
        return cx_fail(err, errlen, e == EBUSY ? CX_EBUSY : CX_ESYS, "write '%s' to %s: %s", value, path,
                       n < 0 ? strerror(e) : "short write");
    return 0;
}

/* Read dir/file (first len-1 bytes), trailing whitespace trimmed. */
static int cg_read(const char *dir, const char *file, char *out, size_t len, char *err, size_t errlen)
{
    char path[CG_PATH + 64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return cx_fail(err, errlen, CX_ESYS, "open %s: %s", path, strerror(e));
    }
    ssize_t n = read(fd, out, len - 1);
    int e = errno;
    close(fd);
    if (n < 0)
        return cx_fail(err, errlen, CX_ESYS, "read %s: %s", path, strerror(e));
    out[n] = '\0';
    while (n > 0 && isspace((unsigned char)out[n - 1]))
        out[--n] = '\0';
    return 0;
}

static int cg_isdir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The calling process's cgroup path in the v1 hierarchy carrying ctrl
 * (ctrl NULL: the v2 "0::" line), from /proc/self/cgroup. "" if none. */
static void cg_self_path(const char *ctrl, char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1;
        const char *path = c2 + 1;
        int match = 0;
        if (!ctrl) {
            match = strncmp(line, "0", 2) == 0 && ctrls[0] == '\0';
        } else {
            char list[256];
            snprintf(list, sizeof list, "%s", ctrls);
            char *save = NULL;
            for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
                if (strcmp(tok, ctrl) == 0)
                    match = 1;
        }
        if (match) {
            snprintf(out, len, "%s", strcmp(path, "/") == 0 ? "" : path);
            break;
        }
    }
    fclose(f);
}

/* 1 if the whitespace-separated word list in dir/file contains word. */
static int cg_has_word(const char *dir, const char *file, const char *word)
{
    char buf[512];
    if (cg_read(dir, file, buf, sizeof buf, NULL, 0) != 0)
        return 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
        if (strcmp(tok, word) == 0)
            return 1;
    return 0;
}

/* ---- cgroup: open ---- */

static int cg_valid_unit(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > 64 || strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && id[i] != '.' && id[i] != '_' && id[i] != '-')
            return 0;
    return 1;
}

static void cg_unavailable(cg_hier *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cg_unavailable(cg_hier *h, const char *fmt, ...)
{
    h->version = 0;
    h->dir[0] = '\0';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->why, sizeof h->why, fmt, ap); /* a truncated reason is fine */
    va_end(ap);
}

/* Fill h for controller c: find its hierarchy, create the unit dir, check
 * the control file. */
static void cg_open_one(cg_set *s, cg_ctrl c, int v2, int system_root)
{
    cg_hier *h = &s->h[c];
    char self[CG_PATH] = "";
    char mount[CG_PATH];
    if (v2) {
        snprintf(mount, sizeof mount, "%s", s->root);
        if (system_root)
            cg_self_path(NULL, self, sizeof self);
    } else {
        int k = snprintf(mount, sizeof mount, "%s/%s", s->root, cg_v1_names[c]);
        if (k < 0 || (size_t)k >= sizeof mount || !cg_isdir(mount)) {
            cg_unavailable(h, "no v1 %s hierarchy at %s", cg_v1_names[c], mount);
            return;
        }
        if (system_root)
            cg_self_path(cg_v1_names[c], self, sizeof self);
    }
    int n = snprintf(h->base, sizeof h->base, "%s%s", mount, self);
    char dir[CG_PATH]; /* built apart: h->dir and s->unit_id share *s (-Wrestrict) */
    int m = snprintf(dir, sizeof dir, "%s/chaosloco/%s", h->base, s->unit_id);
    memcpy(h->dir, dir, sizeof h->dir);
    snprintf(h->rel, sizeof h->rel, "%s/chaosloco/%s", self, s->unit_id);
    if (n < 0 || (size_t)n >= sizeof h->base || m < 0 || (size_t)m >= sizeof h->dir) {
        cg_unavailable(h, "cgroup path too long under %s", mount);
        return;
    }
    if (v2 && c != CG_FREEZER && !cg_has_word(h->base, "cgroup.controllers", cg_v2_names[c])) {
        cg_unavailable(h, "controller %s not enabled in %s/cgroup.controllers", cg_v2_names[c], h->base);
        return;
    }
    char e[CX_ERRLEN];
    int made = -1;
    /* Retried: another unit's cg_set_remove may rmdir chaosloco/ between
     * our mkdir of it and of the unit directory. */
    for (int i = 0; i < 3 && made != 0; i++)
        made = cx_mkdir_p(h->dir, e, sizeof e);
    if (made != 0) {
        cg_unavailable(h, "cannot create: %s", e);
        return;
    }
    if (v2 && c != CG_FREEZER) {
        /* Delegate the controller down to the unit; best effort, the file
         * check below decides. */
        char plus[32], mid[CG_PATH + 16];
        snprintf(plus, sizeof plus, "+%s", cg_v2_names[c]);
        snprintf(mid, sizeof mid, "%s/chaosloco", h->base);
        (void)cg_write(h->base, "cgroup.subtree_control", plus, NULL, 0);
        (void)cg_write(mid, "cgroup.subtree_control", plus, NULL, 0);
    }
    const char *file = v2 ? cg_v2_files[c] : cg_v1_files[c];
    char path[CG_PATH + 64];
    snprintf(path, sizeof path, "%s/%s", h->dir, file);
    if (access(path, W_OK) != 0) {
        int err = errno;
        cg_unavailable(h, "%s not writable: %s", path, strerror(err));
        return;
    }
    h->version = v2 ? 2 : 1;
    h->why[0] = '\0';
}

int cg_set_open(const char *root, const char *unit_id, cg_set **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cg_valid_unit(unit_id))
        return cx_fail(err, errlen, CX_EINVAL, "unit id '%s' is not 1..64 characters of [A-Za-z0-9._-]",
                       unit_id ? unit_id : "");
    if (!root)
        root = getenv("CHAOSLOCO_CGROUP_ROOT");
    if (!root || !*root)
        root = CG_DEFAULT_ROOT;
    cg_set *s = calloc(1, sizeof *s);
    if (!s)
        return cx_fail(err, errlen, CX_ENOMEM, "cgroup set");
    snprintf(s->root, sizeof s->root, "%s", root);
    snprintf(s->unit_id, sizeof s->unit_id, "%s", unit_id);
    int system_root = strcmp(s->root, CG_DEFAULT_ROOT) == 0;
    char probe[CG_PATH + 32];
    snprintf(probe, sizeof probe, "%s/cgroup.controllers", s->root);
    int v2 = access(probe, F_OK) == 0;
    for (int c = 0; c < CG_NCTRL; c++)
        cg_open_one(s, (cg_ctrl)c, v2, system_root);
    *out = s;
    return 0;
}

void cg_set_free(cg_set *s)
{
    free(s);
}

int cg_set_available(const cg_set *s, cg_ctrl c)
{
    return s && c >= 0 && c < CG_NCTRL && s->h[c].version != 0;
}

const char *cg_set_why(const cg_set *s, cg_ctrl c)
{
    return s && c >= 0 && c < CG_NCTRL ? s->h[c].why : "no cgroup set";
}

const char *cg_set_dir(const cg_set *s, cg_ctrl c)
{
    return cg_set_available(s, c) ? s->h[c].dir : "";
}

int cg_set_version(const cg_set *s, cg_ctrl c)
{
    return cg_set_available(s, c) ? s->h[c].version : 0;
}

const char *cg_set_root(const cg_set *s)
{
    return s ? s->root : "";
}

/* ---- cgroup: attach ---- */

static int cg_need(const cg_set *s, cg_ctrl c, char *err, size_t errlen)
{
    if (!cg_set_available(s, c))
        return cx_fail(err, errlen, CX_ENOTSUP, "%s cgroup unavailable: %s", cg_v1_names[c],
                       s ? s->h[c].why : "no set");
    return 0;
}

int cg_set_attach_group(cg_set *s, cg_ctrl c, pid_t pgid, char *err, size_t errlen)
{
    int rc = cg_need(s, c, err, errlen);
    if (rc)
        return rc;
    if (pgid <= 0)
        return cx_fail(err, errlen, CX_ENOTFOUND, "unit is not running");
    if (c == CG_MEMORY && s->h[c].version == 1)
        (void)cg_write(s->h[c].dir, "memory.move_charge_at_immigrate", "3", NULL, 0);
    /* The leader first, with one write: a unit just spawned is usually all
     * of its group, and the scan below (every /proc entry) takes ~1 ms. A
     * failure here is judged by the scan, which visits the leader again. */
    char lv[32];
    snprintf(lv, sizeof lv, "%d", (int)pgid);
    (void)cg_write(s->h[c].dir, "cgroup.procs", lv, NULL, 0);
    DIR *d = opendir("/proc");
    if (!d) {
        int e = errno;
        return cx_fail(err, errlen, CX_ESYS, "opendir /proc: %s", strerror(e));
    }
    int moved = 0;
    rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);
        if (uproc_pgrp(pid) != pgid)
            continue;
        char v[32];
        snprintf(v, sizeof v, "%d", (int)pid);
        char e[CX_ERRLEN];
        int r = cg_write(s->h[c].dir, "cgroup.procs", v, e, sizeof e);
        if (r == 0) {
            moved++;
        } else if (uproc_state(pid) != 0 && rc == 0) {
            rc = cx_fail(err, errlen, r, "%s", e); /* ignore processes that just exited */
        }
    }
    closedir(d);
    if (rc)
        return rc;
    if (moved == 0)
        return cx_fail(err, errlen, CX_ENOTFOUND, "no process in group %d", (int)pgid);
    return 0;
}

/* ---- cgroup: freezer ---- */

int cg_set_freeze(cg_set *s, int frozen, char *err, size_t errlen)
{
    int rc = cg_need(s, CG_FREEZER, err, errlen);
    if (rc)
        return rc;
    if (s->h[CG_FREEZER].version == 2)
        return cg_write(s->h[CG_FREEZER].dir, "cgroup.freeze", frozen ? "1" : "0", err, errlen);
    return cg_write(s->h[CG_FREEZER].dir, "freezer.state", frozen ? "FROZEN" : "THAWED", err, errlen);
}

int cg_set_freezer_state(cg_set *s, char *state, size_t len, int *frozen, char *err, size_t errlen)
{
    *frozen = 0;
    if (len)
        state[0] = '\0';
    int rc = cg_need(s, CG_FREEZER, err, errlen);
    if (rc)
        return rc;
    const cg_hier *h = &s->h[CG_FREEZER];
    if (h->version == 1) {
        rc = cg_read(h->dir, "freezer.state", state, len, err, errlen);
        if (rc == 0)
            *frozen = strcmp(state, "FROZEN") == 0;
        return rc;
    }
    char buf[512];
    rc = cg_read(h->dir, "cgroup.events", buf, sizeof buf, err, errlen);
    if (rc)
        return rc;
    char *line = strstr(buf, "frozen ");
    if (!line)
        return cx_fail(err, errlen, CX_ESYS, "%s/cgroup.events has no 'frozen' line", h->dir);
    line[strcspn(line, "\n")] = '\0';
    snprintf(state, len, "%s", line);
    *frozen = strcmp(line, "frozen 1") == 0;
    return 0;
}

/* ---- cgroup: cpu and memory ---- */

int cg_set_cpu_quota(cg_set *s, double cpus, char *contents, size_t clen, char *err, size_t errlen)
{
    int rc = cg_need(s, CG_CPU, err, errlen);
    if (rc)
        return rc;
    const cg_hier *h = &s->h[CG_CPU];
    long long quota = -1;
    if (cpus > 0) {
        quota = (long long)(cpus * CG_PERIOD_US + 0.5);
        if (quota < 1000)
            quota = 1000; /* the kernel's minimum quota is 1 ms */
    }
    char v[64];
    if (h->version == 2) {
        if (quota < 0)
            snprintf(v, sizeof v, "max %d", CG_PERIOD_US);
        else
            snprintf(v, sizeof v, "%lld %d", quota, CG_PERIOD_US);
        rc = cg_write(h->dir, "cpu.max", v, err, errlen);
        if (rc == 0 && contents)
            rc = cg_read(h->dir, "cpu.max", contents, clen, err, errlen);
        return rc;
    }
    snprintf(v, sizeof v, "%d", CG_PERIOD_US);
    if (quota >= 0) {
        /* Quota first would be refused if it exceeded a smaller period's
         * parent limit; period first is the documented order. */
        rc = cg_write(h->dir, "cpu.cfs_period_us", v, err, errlen);
        if (rc)
            return rc;
    }
    snprintf(v, sizeof v, "%lld", quota);
    rc = cg_write(h->dir, "cpu.cfs_quota_us", v, err, errlen);
    if (rc == 0 && contents) {
        char q[32], p[32];
        rc = cg_read(h->dir, "cpu.cfs_quota_us", q, sizeof q, err, errlen);
        if (rc == 0)
            rc = cg_read(h->dir, "cpu.cfs_period_us", p, sizeof p, err, errlen);
        if (rc == 0)
            snprintf(contents, clen, "cfs_quota_us=%s cfs_period_us=%s", q, p);
    }
    return rc;
}

int cg_set_memory_limit(cg_set *s, int64_t bytes, char *contents, size_t clen, char *err, size_t errlen)
{
    int rc = cg_need(s, CG_MEMORY, err, errlen);
    if (rc)
        return rc;
    const cg_hier *h = &s->h[CG_MEMORY];
    const char *file = h->version == 2 ? "memory.max" : "memory.limit_in_bytes";
    char v[32];
    if (bytes < 0)
        snprintf(v, sizeof v, "%s", h->version == 2 ? "max" : "-1");
    else
        snprintf(v, sizeof v, "%lld", (long long)bytes);
    rc = cg_write(h->dir, file, v, err, errlen);
    if (rc == 0 && contents)
        rc = cg_read(h->dir, file, contents, clen, err, errlen);
    return rc;
}

int cg_set_memory_usage(cg_set *s, int64_t *bytes, char *err, size_t errlen)
{
    *bytes = 0;
    int rc = cg_need(s, CG_MEMORY, err, errlen);
    if (rc)
        return rc;
    const cg_hier *h = &s->h[CG_MEMORY];
    char v[64];
    rc = cg_read(h->dir, h->version == 2 ? "memory.current" : "memory.usage_in_bytes", v, sizeof v, err,
                 errlen);
    if (rc)
        return rc;
    *bytes = strtoll(v, NULL, 10);
    return 0;
}

/* ---- cgroup: removal ---- */

int cg_set_remove(cg_set *s, char *err, size_t errlen)
{
    if (!s)
        return 0;
    int first = 0;
    if (cg_set_available(s, CG_FREEZER))
        (void)cg_set_freeze(s, 0, NULL, 0);
    if (cg_set_available(s, CG_CPU))
        (void)cg_set_cpu_quota(s, 0, NULL, 0, NULL, 0);
    if (cg_set_available(s, CG_MEMORY))
        (void)cg_set_memory_limit(s, -1, NULL, 0, NULL, 0);
    for (int c = 0; c < CG_NCTRL; c++) {
        cg_hier *h = &s->h[c];
        if (!h->version)
            continue;
        char procs[4096];
        if (cg_read(h->dir, "cgroup.procs", procs, sizeof procs, NULL, 0) == 0) {
            char *save = NULL;
            for (char *tok = strtok_r(procs, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save))
                (void)cg_write(h->base, "cgroup.procs", tok, NULL, 0);
        }
        if (rmdir(h->dir) != 0 && errno != ENOENT) {
            int e = errno;
            if (!first)
                first = cx_fail(err, errlen, CX_ESYS, "rmdir %s: %s", h->dir, strerror(e));
            continue;
        }
        char mid[CG_PATH + 16];
        snprintf(mid, sizeof mid, "%s/chaosloco", h->base);
        (void)rmdir(mid); /* other units may still live there */
        h->version = 0;
        snprintf(h->why, sizeof h->why, "removed");
    }
    return first;
}

/* ---- cgroup: every process in the unit's cgroup ---- */

int cg_set_kill_spec(const cg_set *s, cg_kill_spec *k)
{
    static const cg_ctrl order[] = {CG_FREEZER, CG_CPU, CG_MEMORY};
    k->procs[0] = k->rel[0] = k->thaw[0] = k->thaw_value[0] = '\0';
    k->clk_tck = sysconf(_SC_CLK_TCK);
    if (k->clk_tck <= 0)
        k->clk_tck = 100;
    if (s && s->h[CG_FREEZER].version) {
        int v2 = s->h[CG_FREEZER].version == 2;
        snprintf(k->thaw, sizeof k->thaw, "%s/%s", s->h[CG_FREEZER].dir,
                 v2 ? "cgroup.freeze" : "freezer.state");
        snprintf(k->thaw_value, sizeof k->thaw_value, "%s", v2 ? "0" : "THAWED");
    }
    for (size_t i = 0; s && i < sizeof order / sizeof order[0]; i++) {
        const cg_hier *h = &s->h[order[i]];
        if (!h->version)
            continue;
        snprintf(k->procs, sizeof k->procs, "%s/cgroup.procs", h->dir);
        snprintf(k->rel, sizeof k->rel, "%s", h->rel);
        return 0;
    }
    return CX_ENOTSUP;
}

/* "/proc/<pid>/<file>" into out (async-signal-safe: no snprintf); file is
 * "cgroup" or "stat". */
static void cg_proc_path(pid_t pid, const char *file, char out[48])
{
    char digits[16];
    int n = 0;
    unsigned v = (unsigned)pid;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < (int)sizeof digits);
    memcpy(out, "/proc/", 6);
    int o = 6;
    while (n > 0)
        out[o++] = digits[--n];
    out[o++] = '/';
    memcpy(out + o, file, strlen(file) + 1);
}

/* Field 22 of /proc/<pid>/stat (start time, clock ticks since boot), 0 when
 * unreadable. Async-signal-safe. */
static uint64_t cg_pid_starttime(pid_t pid)
{
    char path[48], buf[1024];
    cg_proc_path(pid, "stat", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0)
        return 0;
    buf[r] = '\0';
    const char *p = strrchr(buf, ')'); /* the command may hold spaces and ')' */
    if (!p)
        return 0;
    p++;
    for (int field = 2; field < 22 && p; field++) { /* p is before field `field + 1` */
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    uint64_t v = 0;
    for (; p && *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (uint64_t)(*p - '0');
    return v;
}

/* 1 when one line of /proc/<pid>/cgroup ("ID:controllers:path") has the
 * path rel. Async-signal-safe. */
static int cg_pid_in(pid_t pid, const char *rel)
{
    char path[48], buf[4096];
    cg_proc_path(pid, "cgroup", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t have = 0;
    ssize_t r;
    while (have < sizeof buf - 1 && (r = read(fd, buf + have, sizeof buf - 1 - have)) > 0)
        have += (size_t)r;
    close(fd);
    buf[have] = '\0';
    size_t rlen = strlen(rel);
    for (char *line = buf; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char *c1 = memchr(line, ':', len);
        char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        if (c2) {
            const char *p = c2 + 1;
            size_t plen = len - (size_t)(p - line);
            if (plen == rlen && memcmp(p, rel, rlen) == 0)
                return 1;
        }
        if (!end)
            break;
        line = end + 1;
    }
    return 0;
}

/* sig to pid through a pidfd, only when it is in rel (and, when
 * started_by > 0, started no later than that). 1 signalled, 0 not. */
static int cg_kill_one(pid_t pid, const char *rel, int sig, uint64_t started_by)
{
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_send_signal)
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd < 0)
        return 0;
    /* checked after the pidfd pins the process: if pid was recycled
     * meanwhile, the check reads the new process but the signal below goes
     * to the old one, which is gone (ESRCH) */
    int done = cg_pid_in(pid, rel) && (started_by == 0 || cg_pid_starttime(pid) <= started_by) &&
               syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0) == 0;
    close(pfd);
    return done;
#else
    (void)pid, (void)rel, (void)sig, (void)started_by;
    return 0; /* no pidfd: never risk a recycled pid */
#endif
}

int cg_kill_spec_signal(const cg_kill_spec *k, int sig, uint64_t started_by)
{
    if (!k || !k->procs[0])
        return -1;
    int fd = open(k->procs, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    pid_t self = getpid();
    char buf[1024];
    ssize_t r;
    long pid = 0;
    int digits = 0, n = 0;
    while ((r = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < r; i++) {
            char c = buf[i];
            if (c >= '0' && c <= '9' && pid < 100000000) {
                pid = pid * 10 + (c - '0');
                digits++;
                continue;
            }
            if (digits && pid > 1 && pid != self)
                n += cg_kill_one((pid_t)pid, k->rel, sig, started_by);
            pid = 0;
            digits = 0;
        }
    }
    if (digits && pid > 1 && pid != self)
        n += cg_kill_one((pid_t)pid, k->rel, sig, started_by);
    close(fd);
    return n;
}

void cg_kill_spec_thaw(const cg_kill_spec *k)
{
    if (!k || !k->thaw[0])
        return;
    int fd = open(k->thaw, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t w = write(fd, k->thaw_value, strlen(k->thaw_value));
    (void)w; /* best effort: the kill is what matters */
    close(fd);
}

int cg_set_kill(cg_set *s, int *n, char *err, size_t errlen)
{
    cg_kill_spec k;
    if (n)
        *n = 0;
    if (cg_set_kill_spec(s, &k) != 0)
        return CX_ENOTSUP;
    if (cg_set_available(s, CG_FREEZER))
        (void)cg_set_freeze(s, 0, NULL, 0);
    int total = 0, left = 0;
    for (int round = 0; round < 100; round++) {
        left = cg_kill_spec_signal(&k, SIGKILL, 0);
        if (left < 0)
            return cx_fail(err, errlen, CX_ESYS, "read %s: %s", k.procs, strerror(errno));
        if (left == 0)
            break;
        if (round == 0)
            total = left;
        usleep(10000); /* SIGKILLed processes leave cgroup.procs as they exit */
    }
    if (n)
        *n = total;
    if (left > 0)
        return cx_fail(err, errlen, CX_ESYS, "%d process(es) in %s survive SIGKILL", left, k.procs);
    return 0;
}
