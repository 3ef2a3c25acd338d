/* agent_it.h - helpers shared by the tests/integration/test_agent_*.c
 * files and the other tests that start agents (flood, metrics, the
 * harness's attach mode): start a real `chaosloco agent` on 127.0.0.1
 * (ephemeral port, temp state dir, a unique unit id so parallel runs never
 * share a cgroup), talk to it, and look at the unit from outside (/proc,
 * cgroup files). Header-only (static inline) because support_*.c files are
 * linked into every integration test, and these belong to the tests that
 * start agents only.
 */
#ifndef IT_AGENT_IT_H
#define IT_AGENT_IT_H

#include <arpa/inet.h>
#include <dirent.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <glob.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file.h"
#include "injectors/unit_proc.h"
#include "support.h"

#define AG_TOKEN "it-token-7f3a9c2e51"

/* Unit ids of every agent started by this test process, for
 * ag_cleanup_all(). */
static char ag_ids[64][64];
static int ag_nids;

typedef struct ag {
    char *dir;       /* temp dir (logs, token) */
    char state[512]; /* agent state dir */
    char id[64];     /* unit id */
    char url[200];   /* http://127.0.0.1:PORT */
    char name[64];   /* log name under dir */
    pid_t pid;       /* agent pid */
} ag;

/* Write AG_TOKEN into dir/token, its owner's only (the agent refuses a
 * token others can read); the file's path into out. */
static inline void ag_write_token(const char *dir, char *out, size_t len)
{
    snprintf(out, len, "%s/token", dir);
    FILE *f = fopen(out, "w");
    cr_assert_not_null(f, "write %s", out);
    fprintf(f, "%s\n", AG_TOKEN);
    fclose(f);
    chmod(out, 0600);
}

/* A command the next agents are started under, NULL-terminated (e.g.
 * "unshare", "--time", "--monotonic", "86400", "--fork": an agent on a
 * clock of its own, test_harness_timebase), or NULL: started directly. */
static const char *const *ag_prefix;

/* Start an agent. extra: NULL-terminated flags before "--" (or NULL);
 * unit: NULL-terminated command (NULL = sleep 1000). state_from: reuse
 * another agent's state dir and id (restart after a crash), or NULL. */
static inline void ag_start(ag *a, const char *tag, const char *const *extra, const char *const *unit,
                            const ag *state_from)
{
    static int seq;
    if (!state_from) {
        memset(a, 0, sizeof *a);
        a->dir = it_mkdtemp(tag);
        snprintf(a->state, sizeof a->state, "%s/state", a->dir);
        snprintf(a->id, sizeof a->id, "it-%s-%d-%d", tag, (int)getpid(), ++seq);
        if (ag_nids < 64)
            snprintf(ag_ids[ag_nids++], sizeof ag_ids[0], "%s", a->id);
    } else if (a != state_from) {
        *a = *state_from;
        a->dir = strdup(state_from->dir);
    }
    snprintf(a->name, sizeof a->name, "agent%d", ++seq);
    char tok[600];
    ag_write_token(a->dir, tok, sizeof tok);
    /* A stale listen.addr from a previous agent must not be mistaken. */
    char la[600];
    snprintf(la, sizeof la, "%s/listen.addr", a->state);
    unlink(la);
    const char *args[64];
    int n = 0;
    args[n++] = "agent";
    args[n++] = "--listen";
    args[n++] = "127.0.0.1:0";
    args[n++] = "--id";
    args[n++] = a->id;
    args[n++] = "--state-dir";
    args[n++] = a->state;
    args[n++] = "--token-file";
    args[n++] = tok;
    for (int i = 0; extra && extra[i] && n < 40; i++)
        args[n++] = extra[i];
    args[n++] = "--";
    static const char *const sleeper[] = {"sleep", "1000", NULL};
    if (!unit)
        unit = sleeper;
    for (int i = 0; unit[i] && n < 62; i++)
        args[n++] = unit[i];
    args[n] = NULL;
    if (ag_prefix) {
        const char *argv[80];
        int k = 0;
        for (int i = 0; ag_prefix[i] && k < 12; i++)
            argv[k++] = ag_prefix[i];
        argv[k++] = CHAOSLOCO_BIN;
        for (int i = 0; args[i] && k < 79; i++)
            argv[k++] = args[i];
        argv[k] = NULL;
        a->pid = it_start_prog(a->dir, a->name, argv, NULL);
    } else {
        a->pid = it_start(a->dir, a->name, args, NULL);
    }
    char addr[128];
    if (it_wait_addr(a->state, addr, sizeof addr, 15000) != 0) {
        it_dump_log(a->dir, a->name);
        cr_assert_fail("agent did not write listen.addr");
    }
    snprintf(a->url, sizeof a->url, "http://%s", addr);
}

/* One call; body is JSON text or NULL; returns the answer (new ref or NULL). */
static inline json_t *ag_call(const ag *a, const char *method, const char *path, const char *body,
                              int with_token, int *status)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", a->url, path);
    json_t *jb = NULL;
    if (body) {
        jb = json_loads(body, 0, NULL);
        cr_assert_not_null(jb, "test bug: bad JSON %s", body);
    }
    json_t *out = it_http_json(method, url, jb, with_token ? AG_TOKEN : NULL, status);
    json_decref(jb);
    return out;
}

/* POST a fault expecting 201; returns the record (new ref). */
static inline json_t *ag_fault(const ag *a, const char *body)
{
    int st = 0;
    json_t *r = ag_call(a, "POST", "/v1/faults", body, 1, &st);
    if (st != 201) {
        char *t = r ? json_dumps(r, 0) : NULL;
        it_dump_log(a->dir, a->name);
        cr_assert_fail("POST /v1/faults %s -> %d %s", body, st, t ? t : "");
    }
    return r;
}

static inline const char *js(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* POST a fault expecting 201 (ag_fault); only its id, into id. */
static inline void ag_fault_id(const ag *a, const char *body, char *id, size_t len)
{
    json_t *r = ag_fault(a, body);
    snprintf(id, len, "%s", js(r, "id"));
    json_decref(r);
}

static inline json_t *ag_status(const ag *a)
{
    int st = 0;
    json_t *s = ag_call(a, "GET", "/v1/status", NULL, 1, &st);
    cr_assert_eq(st, 200);
    return s;
}

/* Unit pid (0 when none). */
static inline pid_t ag_unit_pid(const ag *a)
{
    json_t *s = ag_status(a);
    pid_t p = (pid_t)json_integer_value(json_object_get(json_object_get(s, "unit"), "pid"));
    json_decref(s);
    return p;
}

static inline long long ag_incarnation(const ag *a)
{
    json_t *s = ag_status(a);
    long long v = json_integer_value(json_object_get(json_object_get(s, "unit"), "incarnation"));
    json_decref(s);
    return v;
}

/* Wait until the unit is alive past startup ("running"); its pid. */
static inline pid_t ag_wait_running(const ag *a, long timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    while (cx_mono_ms() < end) {
        json_t *s = ag_status(a);
        json_t *u = json_object_get(s, "unit");
        int ok = strcmp(js(u, "state"), "running") == 0;
        pid_t p = (pid_t)json_integer_value(json_object_get(u, "pid"));
        json_decref(s);
        if (ok && p > 0)
            return p;
        cx_sleep_ms(20);
    }
    it_dump_log(a->dir, a->name);
    cr_assert_fail("unit not running after %ld ms", timeout_ms);
    return 0;
}

/* Fault state by id ("active", "expired", ...) into out. */
static inline void ag_fault_state(const ag *a, const char *id, char *out, size_t len, char *reason,
                                  size_t rlen)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/faults/%s", id);
    int st = 0;
    json_t *r = ag_call(a, "GET", path, NULL, 1, &st);
    cr_assert_eq(st, 200, "GET %s -> %d", path, st);
    snprintf(out, len, "%s", js(r, "state"));
    if (reason)
        snprintf(reason, rlen, "%s",
                 json_is_string(json_object_get(r, "revert_reason")) ? js(r, "revert_reason") : "");
    json_decref(r);
}

/* Wait until fault id is in state want (bounded). */
static inline int ag_wait_fault(const ag *a, const char *id, const char *want, long timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    char st[32];
    while (cx_mono_ms() < end) {
        ag_fault_state(a, id, st, sizeof st, NULL, 0);
        if (strcmp(st, want) == 0)
            return 1;
        cx_sleep_ms(10);
    }
    return 0;
}

static inline void ag_delete(const ag *a, const char *id)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/faults/%s", id);
    int st = 0;
    json_t *r = ag_call(a, "DELETE", path, NULL, 1, &st);
    cr_assert_eq(st, 200, "DELETE %s -> %d", path, st);
    cr_assert_str_eq(js(r, "revert_reason"), "delete");
    json_decref(r);
}

/* Start agent a (tag) whose unit is `chaosloco learner` id of the syncer
 * at saddr, reached through the agent's proxy called proxy (the learner is
 * given http://{proxy.<proxy>}); its credential is the one the syncer made
 * in sstate/credentials, its state dir is dir/learner<id>. more: further
 * learner flags (NULL-terminated) or NULL. Returns once the agent listens. */
static inline void ag_start_learner(ag *a, const char *tag, const char *dir, const char *sstate,
                                    const char *saddr, const char *proxy, int id, const char *const *more)
{
    char pflag[200], purl[80], num[16], lstate[600], lcred[700];
    snprintf(pflag, sizeof pflag, "%s=127.0.0.1:0->%s", proxy, saddr);
    snprintf(purl, sizeof purl, "http://{proxy.%s}", proxy);
    snprintf(num, sizeof num, "%d", id);
    snprintf(lstate, sizeof lstate, "%s/learner%d", dir, id);
    snprintf(lcred, sizeof lcred, "%s/credentials/learner-%d.cred", sstate, id);
    const char *extra[] = {"--proxy", pflag, NULL};
    /* clang-format off */
    const char *unit[24] = {CHAOSLOCO_BIN, "learner", "--syncer", purl, "--id", num,
                            "--state-dir", lstate, "--credential-file", lcred};
    /* clang-format on */
    for (int i = 0, n = 10; more && more[i] && n < 23; i++)
        unit[n++] = more[i];
    ag_start(a, tag, extra, unit, NULL);
}

/* A decoupled syncer in dir/syncer (the MLP, 1 learner, 2 fragments, H 4,
 * quorum 1, eval every 500 ms) and an agent (tag) whose unit is learner 0
 * in dir/learner0, reaching the syncer through the agent's proxy "sy";
 * waits up to wait_ms for the learner to run. The syncer's base URL into
 * surl. */
static inline void ag_start_learner_unit(ag *a, const char *dir, const char *tag, char *surl, size_t surllen,
                                         long wait_ms)
{
    char sstate[600], saddr[128];
    snprintf(sstate, sizeof sstate, "%s/syncer", dir);
    const char *sargs[] = {"syncer",     "--listen", "127.0.0.1:0",     "--state-dir",
                           sstate,       IT_MLP,     "--mode",          "decoupled",
                           "--learners", "1",        "--fragments",     "2",
                           "--H",        "4",        "--quorum",        "1",
                           "--hidden",   "32",       "--batch",         "4",
                           "--steps",    "100000",   "--eval-every-ms", "500",
                           NULL};
    it_start(dir, "syncer", sargs, NULL);
    cr_assert_eq(it_wait_addr(sstate, saddr, sizeof saddr, 15000), 0, "syncer listen.addr");
    snprintf(surl, surllen, "http://%s", saddr);
    static const char *const steps[] = {"--steps", "100000", NULL};
    ag_start_learner(a, tag, dir, sstate, saddr, "sy", 0, steps);
    ag_wait_running(a, wait_ms);
}

/* The agent's live child other than its unit: the supervisor's watchdog
 * (0 when none). */
static inline pid_t ag_watchdog_of(pid_t agent, pid_t unit)
{
    DIR *d = opendir("/proc");
    cr_assert_not_null(d);
    pid_t found = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        pid_t p = (pid_t)atoi(de->d_name);
        char st = p > 0 ? uproc_state(p) : 0;
        if (p > 0 && p != unit && uproc_ppid(p) == agent && st != 0 && st != 'Z' && st != 'X')
            found = p;
    }
    closedir(d);
    return found;
}

/* First line of a file into out ("" when unreadable). */
static inline void ag_read_line(const char *path, char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (!fgets(out, (int)len, f))
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

/* A fault record's cgroup file: when its evidence says it acted through
 * method, the path of file in its cgroup (evidence.cgroup) into path, that
 * file's first line into line ("" when it has none: a cgroup v1 file on
 * v2) and 1; 0, nothing written, for any other method. */
static inline int ag_evidence_line(json_t *fault, const char *method, const char *file, char *path,
                                   size_t plen, char *line, size_t llen)
{
    json_t *ev = json_object_get(fault, "evidence");
    if (strcmp(js(ev, "method"), method) != 0)
        return 0;
    snprintf(path, plen, "%s/%s", js(ev, "cgroup"), file);
    ag_read_line(path, line, llen);
    return 1;
}

/* Wait until /proc state of pid is one of the letters in want. */
static inline int ag_wait_proc(pid_t pid, const char *want, long timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    while (cx_mono_ms() < end) {
        char s = uproc_state(pid);
        if (s && strchr(want, s))
            return 1;
        cx_sleep_ms(5);
    }
    return 0;
}

/* Wait until pid is gone (reaped); 1 when it is. */
static inline int ag_wait_gone(pid_t pid, long timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    while (cx_mono_ms() < end) {
        char s = uproc_state(pid);
        if (s == 0)
            return 1;
        cx_sleep_ms(2);
    }
    return 0;
}

/* SIGTERM the agent and wait for a clean exit (status 0). */
static inline void ag_stop(ag *a)
{
    it_signal(a->pid, SIGTERM, 0);
    int st = it_wait_exit(a->pid, 15000);
    free(a->dir);
    a->dir = NULL;
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "agent exit status %d", st);
}

/* ---- cleanup that survives a failed assertion ---- */

/* Write text into every file matching pattern (ignoring failures). */
static inline void ag_write_glob(const char *pattern, const char *text)
{
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0)
        return;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        FILE *f = fopen(g.gl_pathv[i], "w");
        if (f) {
            fputs(text, f);
            fclose(f);
        }
    }
    globfree(&g);
}

/* Suite fini for agent tests. A failed assertion can leave an agent
 * SIGKILLed (by it_cleanup) while its unit is frozen in the cgroup freezer,
 * where the unit's pending PDEATHSIG cannot act: thaw every started unit's
 * freezer first, then kill everything, then remove the units' cgroup
 * directories (the agent does that itself on a clean exit). */
static inline void ag_cleanup_all(void)
{
    static const char *const roots[] = {"/sys/fs/cgroup/*/chaosloco/%s", "/sys/fs/cgroup/*/*/chaosloco/%s",
                                        "/sys/fs/cgroup/*/*/*/chaosloco/%s", "/sys/fs/cgroup/chaosloco/%s"};
    char pat[512];
    for (int i = 0; i < ag_nids; i++)
        for (size_t r = 0; r < sizeof roots / sizeof roots[0]; r++) {
            int n = snprintf(pat, sizeof pat, roots[r], ag_ids[i]);
            if (n <= 0 || (size_t)n + 20 >= sizeof pat)
                continue;
            char file[600];
            snprintf(file, sizeof file, "%s/freezer.state", pat);
            ag_write_glob(file, "THAWED");
            snprintf(file, sizeof file, "%s/cgroup.freeze", pat);
            ag_write_glob(file, "0");
        }
    it_cleanup();
    int64_t end = cx_mono_ms() + 2000;
    for (int i = 0; i < ag_nids; i++)
        for (size_t r = 0; r < sizeof roots / sizeof roots[0]; r++) {
            snprintf(pat, sizeof pat, roots[r], ag_ids[i]);
            glob_t g;
            if (glob(pat, GLOB_ONLYDIR, NULL, &g) != 0)
                continue;
            for (size_t k = 0; k < g.gl_pathc; k++)
                while (rmdir(g.gl_pathv[k]) != 0 && errno == EBUSY && cx_mono_ms() < end)
                    cx_sleep_ms(20);
            globfree(&g);
        }
    ag_nids = 0;
}

/* ---- a TCP echo server on 127.0.0.1 (the proxies' upstream) ---- */

typedef struct ag_echo {
    int lfd;  /* listening socket */
    int port; /* its port */
    pthread_t thread;
    volatile int stop;
} ag_echo;

/* Send all n bytes of buf on fd; 0, or -1 when the connection failed. */
static inline int ag_send_all(int fd, const char *buf, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t w = send(fd, buf + off, n - off, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}

/* One echo connection: everything received goes back, until EOF or error. */
static inline void *ag_echo_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[65536];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0 || ag_send_all(fd, buf, (size_t)n) != 0)
            break;
    }
    close(fd);
    return NULL;
}

static inline void *ag_echo_main(void *arg)
{
    ag_echo *e = arg;
    while (!e->stop) {
        struct pollfd p = {.fd = e->lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(e->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        pthread_t t;
        if (pthread_create(&t, NULL, ag_echo_conn, (void *)(intptr_t)fd) == 0)
            pthread_detach(t);
        else
            close(fd);
    }
    return NULL;
}

static inline void ag_echo_start(ag_echo *e)
{
    memset(e, 0, sizeof *e);
    e->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(e->lfd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(e->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(e->lfd, 64), 0);
    socklen_t sl = sizeof sa;
    getsockname(e->lfd, (struct sockaddr *)&sa, &sl);
    e->port = ntohs(sa.sin_port);
    cr_assert_eq(pthread_create(&e->thread, NULL, ag_echo_main, e), 0);
}

static inline void ag_echo_stop(ag_echo *e)
{
    e->stop = 1;
    pthread_join(e->thread, NULL);
    close(e->lfd);
}

/* Connect to 127.0.0.1:port; fd or -1 (errno kept). */
static inline int ag_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Receive exactly n bytes within timeout_ms; returns bytes received
 * (< n on timeout, EOF or error). */
static inline size_t ag_recv_n(int fd, char *buf, size_t n, long timeout_ms)
{
    size_t got = 0;
    int64_t end = cx_mono_ms() + timeout_ms;
    while (got < n) {
        int64_t left = end - cx_mono_ms();
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

/* Echo n bytes of a pattern through a fresh connection to port; returns
 * the round-trip ms, or -1 when the bytes did not all come back intact
 * within timeout_ms. */
static inline long ag_echo_rtt(int port, size_t n, long timeout_ms)
{
    int fd = ag_connect(port);
    if (fd < 0)
        return -1;
    char *out = malloc(n), *in = malloc(n);
    for (size_t i = 0; i < n; i++)
        out[i] = (char)('a' + i % 26);
    int64_t t0 = cx_mono_ms();
    long rtt = -1;
    if (ag_send_all(fd, out, n) == 0 && ag_recv_n(fd, in, n, timeout_ms) == n && memcmp(in, out, n) == 0)
        rtt = (long)(cx_mono_ms() - t0);
    free(out);
    free(in);
    close(fd);
    return rtt;
}

/* Listen port of the agent's proxy called name (from /v1/status). */
static inline int ag_proxy_port(const ag *a, const char *name)
{
    json_t *s = ag_status(a);
    size_t i;
    json_t *p;
    int port = 0;
    json_array_foreach(json_object_get(s, "proxies"), i, p)
    {
        if (strcmp(js(p, "name"), name) == 0) {
            const char *l = strrchr(js(p, "listen"), ':');
            port = l ? atoi(l + 1) : 0;
        }
    }
    json_decref(s);
    cr_assert_gt(port, 0, "no proxy %s", name);
    return port;
}

/* One raw HTTP/1.1 request to the agent, for what a client library would
 * not send (a %00 or invalid UTF-8 in the path, a foreign Host or Origin,
 * a body announced but never sent). head: the request line and headers
 * without the final blank line, e.g. "POST /x HTTP/1.1\r\nHost: h". body
 * (may be NULL) is sent after the blank line. Waits up to timeout_ms for
 * the whole answer (connection close or Content-Length). Returns the
 * status (0 when none came); the whole answer, headers and body, goes into
 * out (ag_raw: the body only). */
static inline int ag_raw_full(const ag *a, const char *head, const char *body, char *out, size_t outlen,
                              long timeout_ms)
{
    const char *colon = strrchr(a->url, ':');
    int fd = ag_connect(colon ? atoi(colon + 1) : 0);
    cr_assert_geq(fd, 0, "connect to the agent");
    char req[8192];
    int n = snprintf(req, sizeof req, "%s\r\n\r\n%s", head, body ? body : "");
    cr_assert(n > 0 && (size_t)n < sizeof req);
    cr_assert_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    char buf[16384];
    size_t got = 0;
    int64_t end = cx_mono_ms() + timeout_ms;
    for (;;) {
        int64_t left = end - cx_mono_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
        buf[got] = '\0';
        const char *hdr_end = strstr(buf, "\r\n\r\n");
        const char *cl = hdr_end ? strcasestr(buf, "\r\nContent-Length:") : NULL;
        if (hdr_end && cl && cl < hdr_end && got >= (size_t)(hdr_end + 4 - buf) + (size_t)atol(cl + 17))
            break;
        if (got >= sizeof buf - 1)
            break;
    }
    close(fd);
    buf[got] = '\0';
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        status = 0;
    if (out && outlen)
        snprintf(out, outlen, "%s", buf);
    return status;
}

static inline int ag_raw(const ag *a, const char *head, const char *body, char *out, size_t outlen,
                         long timeout_ms)
{
    char all[16384];
    int status = ag_raw_full(a, head, body, all, sizeof all, timeout_ms);
    const char *b = strstr(all, "\r\n\r\n");
    if (out && outlen)
        snprintf(out, outlen, "%s", b ? b + 4 : "");
    return status;
}

/* Every line of the agent's audit.jsonl (new reference: an array). */
static inline json_t *ag_audit(const ag *a)
{
    char path[700];
    snprintf(path, sizeof path, "%s/audit.jsonl", a->state);
    json_t *arr = json_array();
    FILE *f = fopen(path, "r");
    char line[8192];
    while (f && fgets(line, sizeof line, f)) {
        json_t *o = json_loads(line, 0, NULL);
        cr_assert_not_null(o, "audit.jsonl line is JSON: %s", line);
        json_array_append_new(arr, o);
    }
    if (f)
        fclose(f);
    return arr;
}

/* 1 when the agent offers fault type t (GET /v1/version). */
static inline int ag_has_type(const ag *a, const char *t)
{
    int st = 0;
    json_t *v = ag_call(a, "GET", "/v1/version", NULL, 1, &st);
    size_t i;
    json_t *x;
    int found = 0;
    json_array_foreach(json_object_get(v, "fault_types"), i, x) found |= strcmp(json_string_value(x), t) == 0;
    json_decref(v);
    return found;
}

#endif
