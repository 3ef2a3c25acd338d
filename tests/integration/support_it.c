/* support_it.c - see support.h. */
#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/http_client.h"
#include "common/proc.h"
#include "injectors/unit_proc.h"

#define IT_MAX_PROCS 64

static pid_t it_procs[IT_MAX_PROCS];
static int it_nprocs;
static int it_atexit_set;

char *it_mkdtemp(const char *tag)
{
    char tmpl[256];
    snprintf(tmpl, sizeof tmpl, "/tmp/chaosloco-it-%s-XXXXXX", tag ? tag : "t");
    char *d = mkdtemp(tmpl);
    if (!d) {
        fprintf(stderr, "it_mkdtemp: %s\n", strerror(errno));
        abort();
    }
    return strdup(d);
}

pid_t it_start_prog(const char *dir, const char *name, const char *const *argv, const char *const *extra_env)
{
    if (!it_atexit_set) {
        atexit(it_cleanup);
        it_atexit_set = 1;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.log", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "it_start: %s: %s\n", path, strerror(errno));
        abort();
    }
    cx_spawn_opts o = {
        .new_pgrp = 1, .stdout_fd = fd, .stderr_fd = fd, .extra_env = extra_env, .die_with_parent = SIGKILL};
    pid_t pid = 0;
    char err[256];
    if (cx_spawn(argv, &o, &pid, err, sizeof err) != 0) {
        fprintf(stderr, "it_start: %s\n", err);
        abort();
    }
    close(fd);
    if (it_nprocs < IT_MAX_PROCS)
        it_procs[it_nprocs++] = pid;
    return pid;
}

const char *it_bin(void)
{
    const char *b = getenv("CHAOSLOCO_IT_BIN");
    return b && *b ? b : CHAOSLOCO_BIN_BUILT;
}

pid_t it_start(const char *dir, const char *name, const char *const *args, const char *const *extra_env)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = CHAOSLOCO_BIN;
    for (int i = 0; args && args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return it_start_prog(dir, name, argv, extra_env);
}

int it_wait_addr(const char *state_dir, char *out, size_t len, long timeout_ms)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/listen.addr", state_dir);
    int64_t deadline = cx_mono_ms() + timeout_ms;
    while (cx_mono_ms() < deadline) {
        char *data;
        size_t n;
        if (cx_file_read(path, 256, &data, &n, NULL, 0) == 0) {
            while (n && (data[n - 1] == '\n' || data[n - 1] == ' '))
                data[--n] = '\0';
            snprintf(out, len, "%s", data);
            free(data);
            if (n)
                return 0;
        }
        cx_sleep_ms(20);
    }
    return -1;
}

json_t *it_http_json(const char *method, const char *url, json_t *body, const char *token, int *status)
{
    /* split "http://host:port/path" into base and path */
    const char *p = strstr(url, "://");
    p = p ? strchr(p + 3, '/') : NULL;
    char base[512];
    size_t bl = p ? (size_t)(p - url) : strlen(url);
    if (bl >= sizeof base)
        bl = sizeof base - 1;
    memcpy(base, url, bl);
    base[bl] = '\0';
    cx_http_opts o = {.timeout_ms = 30000, .bearer = token};
    cx_http_client *c = cx_http_client_new(base, &o);
    json_t *out = NULL;
    int st = 0;
    if (c)
        cx_http_json(c, method, p ? p : "/", body, &st, &out, NULL, 0);
    cx_http_client_free(c);
    if (status)
        *status = st;
    return out;
}

void it_signal(pid_t pid, int sig, int group)
{
    if (pid > 0)
        kill(group ? -pid : pid, sig);
}

int it_wait_exit(pid_t pid, long timeout_ms)
{
    int st;
    if (cx_wait_timeout(pid, timeout_ms, &st) != 0)
        return -1;
    for (int i = 0; i < it_nprocs; i++)
        if (it_procs[i] == pid)
            it_procs[i] = 0;
    return st;
}

void it_dump_log(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.log", dir, name);
    char *data;
    size_t n;
    if (cx_file_read(path, 64 << 20, &data, &n, NULL, 0) != 0)
        return;
    size_t from = n > 4000 ? n - 4000 : 0;
    fprintf(stderr, "---- tail of %s ----\n%s\n---- end ----\n", path, data + from);
    free(data);
}

void it_cleanup(void)
{
    for (int i = 0; i < it_nprocs; i++) {
        if (it_procs[i] <= 0)
            continue;
        kill(-it_procs[i], SIGCONT);
        kill(-it_procs[i], SIGKILL);
        kill(it_procs[i], SIGKILL);
        waitpid(it_procs[i], NULL, 0);
        it_procs[i] = 0;
    }
    it_nprocs = 0;
}

/* ---- processes seen through /proc ---- */

int it_proc_dead(pid_t pid)
{
    char s = uproc_state(pid);
    return s == 0 || s == 'Z' || s == 'X';
}

int it_wait_proc_dead(pid_t pid, long timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    while (cx_mono_ms() < end) {
        if (it_proc_dead(pid))
            return 1;
        cx_sleep_ms(5);
    }
    return it_proc_dead(pid);
}

pid_t it_wait_pid_file(const char *dir, const char *name, long timeout_ms)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int64_t end = cx_mono_ms() + timeout_ms;
    while (cx_mono_ms() < end) {
        char *data;
        size_t n;
        int pid = 0;
        if (cx_file_read(path, 64, &data, &n, NULL, 0) == 0) {
            pid = atoi(data);
            free(data);
        }
        if (pid > 0)
            return (pid_t)pid;
        cx_sleep_ms(10);
    }
    return 0;
}

/* ---- files ---- */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

void it_rm_tree(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
