/* diskfault.c - libchaosloco_diskfault.so, the LD_PRELOAD half of the
 * `disk` fault.
 *
 * Interposes write, pwrite(64), fsync, fdatasync, rename, renameat and
 * renameat2. When CHAOSLOCO_DISKFAULT_FILE names a control file holding
 *
 *   errno=EIO|ENOSPC ops=write,fsync,rename path=<glob> probability=<p> seed=<n>
 *
 * a call of a listed op on a matching path fails with that errno, with
 * probability p, without touching the file. Anything else (no variable, no
 * file, "off", a line that does not parse) passes every call through.
 * "write" covers write/pwrite, "fsync" covers fsync/fdatasync, "rename"
 * covers rename/renameat/renameat2. The path of an fd is its
 * /proc/self/fd/N link; a rename matches when either path does (relative
 * paths are made absolute against the cwd or dirfd). fnmatch() without
 * flags, so '*' also matches '/'. fds 0-2 are never failed.
 *
 * The control file is reread at most every 50 ms (CLOCK_MONOTONIC). The
 * random stream is xorshift64* seeded from seed, restarted whenever the
 * line changes, so a given line and call sequence fail the same calls.
 * Buffered stdio goes through libc's internal write and is not seen; the
 * trainer writes checkpoints with write(2).
 *
 * This library is preloaded into arbitrary processes: no sanitizers, no
 * allocation on the hot path, never calls an interposed function itself.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define DF_RELOAD_MS 50
#define DF_LINE 1200
#define DF_PATH 4096

enum { DF_OP_WRITE = 1, DF_OP_FSYNC = 2, DF_OP_RENAME = 4 };

typedef struct df_state {
    pthread_mutex_t lock; /* guards everything below */
    int64_t next_load_ms; /* monotonic time of the next reread */
    char line[DF_LINE];   /* last line read ("" = none) */
    int active;           /* 1 if the line parsed and is not "off" */
    int err_no;           /* EIO or ENOSPC */
    unsigned ops;         /* DF_OP_* mask */
    char glob[DF_LINE];   /* path pattern */
    double probability;   /* 0..1 */
    uint64_t rng;         /* xorshift64* state, never 0 */
    int warned;           /* 1 once a bad line was reported */
} df_state;

static df_state df = {.lock = PTHREAD_MUTEX_INITIALIZER};

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_renameat2)(int, const char *, int, const char *, unsigned int);

/* ---- diskfault: symbol resolution ---- */

#define DF_RESOLVE(name)                                                                                     \
    do {                                                                                                     \
        if (!real_##name)                                                                                    \
            *(void **)&real_##name = dlsym(RTLD_NEXT, #name);                                                \
    } while (0)

__attribute__((constructor)) static void df_init(void)
{
    DF_RESOLVE(write);
    DF_RESOLVE(pwrite);
    DF_RESOLVE(pwrite64);
    DF_RESOLVE(fsync);
    DF_RESOLVE(fdatasync);
    DF_RESOLVE(rename);
    DF_RESOLVE(renameat);
    DF_RESOLVE(renameat2);
}

/* ---- diskfault: control file ---- */

static int64_t df_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void df_warn(const char *msg)
{
    if (df.warned || !real_write)
        return;
    df.warned = 1;
    static const char pre[] = "chaosloco diskfault: ignoring control line: ";
    (void)!real_write(2, pre, sizeof pre - 1);
    (void)!real_write(2, msg, strlen(msg));
    (void)!real_write(2, "\n", 1);
}

/* Parse df.line into the fields; 0 = ok (active or off), -1 = bad. */
static int df_parse(void)
{
    char buf[DF_LINE];
    snprintf(buf, sizeof buf, "%s", df.line);
    buf[strcspn(buf, "\r\n")] = '\0';
    df.active = 0;
    if (buf[0] == '\0' || strcmp(buf, "off") == 0)
        return 0;
    int have = 0;
    unsigned long long seed = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return -1;
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        if (strcmp(k, "errno") == 0) {
            if (strcmp(v, "EIO") == 0)
                df.err_no = EIO;
            else if (strcmp(v, "ENOSPC") == 0)
                df.err_no = ENOSPC;
            else
                return -1;
            have |= 1;
        } else if (strcmp(k, "ops") == 0) {
            char ops[64];
            snprintf(ops, sizeof ops, "%s", v);
            df.ops = 0;
            char *s2 = NULL;
            for (char *op = strtok_r(ops, ",", &s2); op; op = strtok_r(NULL, ",", &s2)) {
                if (strcmp(op, "write") == 0)
                    df.ops |= DF_OP_WRITE;
                else if (strcmp(op, "fsync") == 0)
                    df.ops |= DF_OP_FSYNC;
                else if (strcmp(op, "rename") == 0)
                    df.ops |= DF_OP_RENAME;
                else
                    return -1;
            }
            have |= 2;
        } else if (strcmp(k, "path") == 0) {
            if (!*v)
                return -1;
            snprintf(df.glob, sizeof df.glob, "%s", v);
            have |= 4;
        } else if (strcmp(k, "probability") == 0) {
            char *end = NULL;
            double p = strtod(v, &end);
            if (end == v || *end || !(p >= 0 && p <= 1))
                return -1;
            df.probability = p;
            have |= 8;
        } else if (strcmp(k, "seed") == 0) {
            char *end = NULL;
            seed = strtoull(v, &end, 10);
            if (end == v || *end)
                return -1;
            have |= 16;
        } else {
            return -1;
        }
    }
    if (have != 31)
        return -1;
    df.rng = seed ? seed : 0x9E3779B97F4A7C15ULL;
    df.active = 1;
    return 0;
}

/* Reread the control file if due. Called with df.lock held. */
static void df_reload(void)
{
    int64_t now = df_now_ms();
    if (now < df.next_load_ms)
        return;
    df.next_load_ms = now + DF_RELOAD_MS;
    const char *file = getenv("CHAOSLOCO_DISKFAULT_FILE");
    char line[DF_LINE] = "";
    if (file && *file) {
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t n = read(fd, line, sizeof line - 1);
            close(fd);
            line[n > 0 ? n : 0] = '\0';
        }
    }
    if (strcmp(line, df.line) == 0)
        return; /* unchanged: keep the random stream going */
    snprintf(df.line, sizeof df.line, "%s", line);
    df.warned = 0;
    if (df_parse() != 0) {
        df.active = 0;
        df_warn(df.line);
    }
}

/* ---- diskfault: decisions ---- */

static uint64_t df_rand(void)
{
    uint64_t x = df.rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    df.rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Absolute form of path relative to dirfd (AT_FDCWD = the cwd). */
static void df_abspath(int dirfd, const char *path, char *out, size_t len)
{
    if (path[0] == '/') {
        snprintf(out, len, "%s", path);
        return;
    }
    char base[DF_PATH] = "";
    if (dirfd == AT_FDCWD) {
        if (!getcwd(base, sizeof base))
            base[0] = '\0';
    } else {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
        ssize_t n = readlink(link, base, sizeof base - 1);
        base[n > 0 ? n : 0] = '\0';
    }
    snprintf(out, len, "%s/%s", base, path);
}

/* 0 to pass the call through, else the errno to fail it with. paths: up to
 * two absolute-or-relative paths (with dirfds), or an fd (paths NULL). */
static int df_decide(unsigned op, int fd, int dfd1, const char *p1, int dfd2, const char *p2)
{
    if (fd >= 0 && fd <= 2)
        return 0;
    if (!getenv("CHAOSLOCO_DISKFAULT_FILE"))
        return 0;
    int saved = errno;
    int fail = 0;
    pthread_mutex_lock(&df.lock);
    df_reload();
    if (df.active && (df.ops & op)) {
        char path[DF_PATH];
        int match = 0;
        if (fd >= 0) {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
            ssize_t n = readlink(link, path, sizeof path - 1);
            if (n > 0) {
                path[n] = '\0';
                match = fnmatch(df.glob, path, 0) == 0;
            }
        } else {
            if (p1) {
                df_abspath(dfd1, p1, path, sizeof path);
                match = fnmatch(df.glob, path, 0) == 0;
            }
            if (!match && p2) {
                df_abspath(dfd2, p2, path, sizeof path);
                match = fnmatch(df.glob, path, 0) == 0;
            }
        }
        if (match && df.probability > 0) {
            double u = (double)(df_rand() >> 11) / 9007199254740992.0; /* [0,1) */
            if (u < df.probability)
                fail = df.err_no;
        }
    }
    pthread_mutex_unlock(&df.lock);
    errno = saved;
    return fail;
}

/* ---- diskfault: interposed calls ---- */

ssize_t write(int fd, const void *buf, size_t count)
{
    DF_RESOLVE(write);
    int e = df_decide(DF_OP_WRITE, fd, 0, NULL, 0, NULL);
    if (e) {
        errno = e;
        return -1;
    }
    return real_write(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t off)
{
    DF_RESOLVE(pwrite);
    int e = df_decide(DF_OP_WRITE, fd, 0, NULL, 0, NULL);
    if (e) {
        errno = e;
        return -1;
    }
    return real_pwrite(fd, buf, count, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t off)
{
    DF_RESOLVE(pwrite64);
    int e = df_decide(DF_OP_WRITE, fd, 0, NULL, 0, NULL);
    if (e) {
        errno = e;
        return -1;
    }
    return real_pwrite64(fd, buf, count, off);
}

int fsync(int fd)
{
    DF_RESOLVE(fsync);
    int e = df_decide(DF_OP_FSYNC, fd, 0, NULL, 0, NULL);
    if (e) {
        errno = e;
        return -1;
    }
    return real_fsync(fd);
}

int fdatasync(int fd)
{
    DF_RESOLVE(fdatasync);
    int e = df_decide(DF_OP_FSYNC, fd, 0, NULL, 0, NULL);
    if (e) {
        errno = e;
        return -1;
    }
    return real_fdatasync(fd);
}

int rename(const char *oldpath, const char *newpath)
{
    DF_RESOLVE(rename);
    int e = df_decide(DF_OP_RENAME, -1, AT_FDCWD, oldpath, AT_FDCWD, newpath);
    if (e) {
        errno = e;
        return -1;
    }
    return real_rename(oldpath, newpath);
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    DF_RESOLVE(renameat);
    int e = df_decide(DF_OP_RENAME, -1, olddirfd, oldpath, newdirfd, newpath);
    if (e) {
        errno = e;
        return -1;
    }
    return real_renameat(olddirfd, oldpath, newdirfd, newpath);
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags)
{
    DF_RESOLVE(renameat2);
    int e = df_decide(DF_OP_RENAME, -1, olddirfd, oldpath, newdirfd, newpath);
    if (e) {
        errno = e;
        return -1;
    }
    if (!real_renameat2) {
        errno = ENOSYS;
        return -1;
    }
    return real_renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
}
