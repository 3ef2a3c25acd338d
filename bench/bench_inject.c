/* bench_inject.c - injection latency of the agent: from sending
 * POST /v1/faults to the effect being observable from outside, for
 *   kill  (SIGKILL, restart_after_ms 0): the unit's /proc entry is gone
 *         (the agent reaped it),
 *   pause (method signal): /proc/PID/stat shows T,
 *   pause (method freezer, when the cgroup freezer is usable): the unit's
 *         freezer.state reads FROZEN,
 * beside raw references measured in the same run with the same observer:
 * kill(2) → waitpid() of a child, SIGSTOP of a child → T, and a v1 freezer
 * cgroup written directly → FROZEN; and the registry's durable write alone
 * (atomic rewrite of a faults.json-sized file, file + dir fsync, same dir),
 * one sample of it before each agent trial, so that it sees the same disk
 * and the same load as the agent rows (other work on the machine comes and
 * goes within a run).
 * Prints p50/p99/p99.9/max and, per agent row, its p99 excess over raw p99 +
 * durable p99.
 *
 * Every timed sample, reference or agent, starts after the same idle gap
 * (GAP_MS of sleep): on a VM an fsync issued right after another one costs
 * ~0.35 ms, one issued after a few ms of idle ~1.1 ms (the host's halt
 * polling and the disk's power state), so a back-to-back reference would
 * make every agent row whose trials follow a wait look ~0.8 ms slower than
 * it is. That was the "unexplained" kill gap of docs/benchmarks.md.
 *
 *   bench_inject [--trials N] [--chaosloco PATH]
 *
 * A poller thread (pidfd wait, then /proc or the freezer file every ~0.1 ms,
 * so that it does not take a core from the agent) watches while the main thread
 * does the HTTP call, so the figure includes the HTTP round trip, the strict
 * decoding, the registry's persist-before-apply fsync and the injector.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <pthread.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/exitcode.h"
#include "common/file.h"
#include "common/http_client.h"
#include "common/proc.h"

#define TOKEN "bench-inject-token-42"

/* ---- bench: helpers ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct(int64_t *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    int i = (int)(p * (n - 1) + 0.5);
    return (double)v[i] / 1000.0; /* ns → us */
}

/* The first len - 1 bytes of path into buf, NUL-terminated (one read:
 * the poller's cheap look); 1 when something was read, else 0. */
static int read_head(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return 1;
}

static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (!read_head(path, buf, sizeof buf))
        return 0;
    char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' ? rp[2] : 0;
}

static int file_has(const char *path, const char *word)
{
    char buf[64];
    return read_head(path, buf, sizeof buf) && strncmp(buf, word, strlen(word)) == 0;
}

/* ---- bench: the poller ---- */

typedef enum { WAIT_GONE, WAIT_STOPPED, WAIT_FROZEN } wait_kind;

typedef struct poller {
    wait_kind kind;
    pid_t pid;
    const char *file; /* freezer.state for WAIT_FROZEN */
    volatile int go;  /* set by main: start spinning */
    int64_t seen_ns;  /* when the effect was first observed */
} poller;

/* The poller must not take a core from the agent (2-core machines): a kill
 * is awaited on a pidfd (no CPU until the unit dies), then /proc is checked
 * until the agent reaped it; stop and freeze have no event to wait on. The
 * checks run every POLL_NS with a 1 ns timer slack (resolution ~0.1 ms). */
#define POLL_NS 20000

/* Idle before every timed sample (see the top of the file). */
#define GAP_MS 5

static int effect_seen(const poller *p)
{
    switch (p->kind) {
    case WAIT_GONE:
        return proc_state(p->pid) == 0;
    case WAIT_STOPPED:
        return proc_state(p->pid) == 'T';
    case WAIT_FROZEN:
        return file_has(p->file, "FROZEN");
    }
    return 0;
}

static void *poll_main(void *arg)
{
    poller *p = arg;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    int pfd = p->kind == WAIT_GONE ? (int)syscall(SYS_pidfd_open, p->pid, 0) : -1;
    while (!p->go)
        sched_yield();
    int64_t end = cx_mono_ns() + 5000000000LL;
    if (pfd >= 0) {
        struct pollfd q = {.fd = pfd, .events = POLLIN};
        (void)poll(&q, 1, 5000);
        close(pfd);
    }
    while (cx_mono_ns() < end) {
        if (effect_seen(p)) {
            p->seen_ns = cx_mono_ns();
            return NULL;
        }
        nanosleep(&(struct timespec){0, POLL_NS}, NULL);
    }
    p->seen_ns = -1;
    return NULL;
}

/* ---- bench: agent calls ---- */

static json_t *call(cx_http_client *c, const char *method, const char *path, const char *body, int *status)
{
    json_t *in = body ? json_loads(body, 0, NULL) : NULL;
    json_t *out = NULL;
    int st = 0;
    char err[256] = "";
    if (cx_http_json(c, method, path, in, &st, &out, err, sizeof err) < 0)
        fprintf(stderr, "bench: %s %s: %s\n", method, path, err);
    json_decref(in);
    if (status)
        *status = st;
    return out;
}

/* Wait until the unit is running with a pid other than old; its pid. */
static pid_t wait_running(cx_http_client *c, pid_t old)
{
    int64_t end = cx_mono_ms() + 10000;
    while (cx_mono_ms() < end) {
        json_t *s = call(c, "GET", "/v1/status", NULL, NULL);
        json_t *u = json_object_get(s, "unit");
        pid_t pid = (pid_t)json_integer_value(json_object_get(u, "pid"));
        int running = json_string_value(json_object_get(u, "state")) &&
                      strcmp(json_string_value(json_object_get(u, "state")), "running") == 0;
        json_decref(s);
        if (running && pid > 0 && pid != old)
            return pid;
        cx_sleep_ms(2);
    }
    return 0;
}

/* The durable write alone, sampled before each agent trial. */
static struct durable {
    char path[400]; /* a faults.json-sized file in the agent's state dir */
    int64_t *v;     /* ns samples */
    int n, cap;
} dur;

static void durable_sample(void)
{
    char blob[600];
    memset(blob, 'x', sizeof blob);
    cx_sleep_ms(GAP_MS);
    int64_t t0 = cx_mono_ns();
    int rc = cx_file_write_atomic(dur.path, blob, sizeof blob, NULL, 0);
    int64_t d = cx_mono_ns() - t0;
    if (rc == 0 && dur.n < dur.cap)
        dur.v[dur.n++] = d;
}

/* Idle GAP_MS, start the poller, act(ctx), wait for the poller: ns from
 * the act to the effect first seen, or -1 (act failed: < 0; never seen). */
static int64_t effect_latency(poller *p, int (*act)(void *ctx), void *ctx)
{
    cx_sleep_ms(GAP_MS); /* idle first, then the poller (it spins until go) */
    pthread_t th;
    pthread_create(&th, NULL, poll_main, p);
    int64_t t0 = cx_mono_ns();
    p->go = 1;
    int rc = act(ctx);
    pthread_join(th, NULL);
    return rc < 0 || p->seen_ns < 0 ? -1 : p->seen_ns - t0;
}

typedef struct post_job {
    cx_http_client *c;
    const char *body;
    int status;
    json_t *reply;
} post_job;

static int act_post(void *ctx)
{
    post_job *j = ctx;
    j->reply = call(j->c, "POST", "/v1/faults", j->body, &j->status);
    return 0;
}

/* One timed injection, after one durable-write sample: returns effect
 * latency in ns (-1 on failure); *id gets the fault id. */
static int64_t timed(cx_http_client *c, const char *body, wait_kind kind, pid_t pid, const char *file,
                     char *id, size_t idlen)
{
    durable_sample();
    poller p = {.kind = kind, .pid = pid, .file = file};
    post_job j = {.c = c, .body = body};
    int64_t ns = effect_latency(&p, act_post, &j);
    json_t *r = j.reply;
    int st = j.status;
    if (id && r)
        snprintf(id, idlen, "%s",
                 json_string_value(json_object_get(r, "id")) ? json_string_value(json_object_get(r, "id"))
                                                             : "");
    json_decref(r);
    if (st != 201 || ns < 0) {
        fprintf(stderr, "bench: injection failed (status %d)\n", st);
        return -1;
    }
    return ns;
}

/* ---- bench: raw references ---- */

/* Write word into a cgroup control file; 0 or -1. */
static int write_word(const char *path, const char *word)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, word, strlen(word));
    close(fd);
    return n == (ssize_t)strlen(word) ? 0 : -1;
}

/* A child that waits for signals; 0 on failure. */
static pid_t idle_child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        for (;;)
            pause();
    }
    cx_sleep_ms(1);
    return pid > 0 ? pid : 0;
}

/* SIGKILL and reap a child of idle_child (0: none). */
static void kill_child(pid_t pid)
{
    if (pid) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

static int act_stop(void *ctx)
{
    return kill(*(pid_t *)ctx, SIGSTOP);
}

static int act_freeze(void *ctx)
{
    return write_word(ctx, "FROZEN");
}

/* Raw SIGSTOP of a child → state T seen by the same poller as the agent's
 * runs. ns, or -1. */
static int64_t raw_stop(pid_t pid)
{
    poller p = {.kind = WAIT_STOPPED, .pid = pid};
    int64_t ns = effect_latency(&p, act_stop, &pid);
    kill(pid, SIGCONT);
    while (proc_state(pid) == 'T')
        sched_yield();
    return ns;
}

/* Raw v1 freezer: write FROZEN into dir/freezer.state → FROZEN seen by
 * the poller. ns, or -1. */
static int64_t raw_freeze(const char *dir)
{
    char st[700];
    snprintf(st, sizeof st, "%s/freezer.state", dir);
    while (!file_has(st, "THAWED"))
        sched_yield();
    poller p = {.kind = WAIT_FROZEN, .file = st};
    int64_t ns = effect_latency(&p, act_freeze, st);
    (void)write_word(st, "THAWED");
    return ns;
}

/* A v1 freezer cgroup beside the agent's (same parent) holding child;
 * dir filled, 0 on success. */
static int raw_freezer_dir(const char *agent_cg, pid_t child, char *dir, size_t len)
{
    char parent[600];
    snprintf(parent, sizeof parent, "%s", agent_cg);
    char *slash = strrchr(parent, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    snprintf(dir, len, "%s/bench-inject-raw-%d", parent, (int)getpid());
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return -1;
    char procs[700], pid[32];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
    snprintf(pid, sizeof pid, "%d", (int)child);
    return write_word(procs, pid);
}

typedef struct row {
    const char *name;
    int64_t *v; /* ns samples */
    int n;
} row;

static void print_row(const row *r, double ref99)
{
    if (r->n <= 0)
        return;
    double p50 = pct(r->v, r->n, 0.5), p99 = pct(r->v, r->n, 0.99), p999 = pct(r->v, r->n, 0.999),
           max = pct(r->v, r->n, 1.0);
    if (ref99 > 0)
        printf("| %s | %d | %.1f | %.1f | %.1f | %.1f | %+.1f |\n", r->name, r->n, p50, p99, p999, max,
               p99 - ref99);
    else
        printf("| %s | %d | %.1f | %.1f | %.1f | %.1f | |\n", r->name, r->n, p50, p99, p999, max);
}

/* ---- bench: the steps of main ---- */

/* --trials and --chaosloco into *trials (at least 10) and bin (default:
 * ../chaosloco beside this program). 0, or CX_EXIT_USAGE after printing
 * the usage. */
static int parse_args(int argc, char **argv, int *trials, char *bin, size_t binlen)
{
    *trials = 200;
    bin[0] = '\0';
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--trials") == 0 && i + 1 < argc)
            *trials = atoi(argv[++i]);
        else if (strcmp(argv[i], "--chaosloco") == 0 && i + 1 < argc)
            snprintf(bin, binlen, "%s", argv[++i]);
        else {
            fprintf(stderr, "usage: bench_inject [--trials N] [--chaosloco PATH]\n");
            return CX_EXIT_USAGE;
        }
    }
    if (*trials < 10)
        *trials = 10;
    if (!bin[0]) {
        char self[4096];
        cx_self_exe(self, sizeof self);
        snprintf(bin, binlen, "%s/../chaosloco", dirname(self));
    }
    return 0;
}

/* Reference: kill(2) → waitpid() of our own child, trials samples into v. */
static void ref_kill_samples(int64_t *v, int trials)
{
    for (int i = 0; i < trials; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (;;)
                pause();
        }
        cx_sleep_ms(GAP_MS);
        int64_t t0 = cx_mono_ns();
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        v[i] = cx_mono_ns() - t0;
    }
}

/* Reference: SIGSTOP of our own child → state T; the samples taken. */
static int ref_stop_samples(int64_t *v, int trials)
{
    int n = 0;
    pid_t sc = idle_child();
    for (int i = 0; i < trials && sc; i++) {
        int64_t d = raw_stop(sc);
        if (d >= 0)
            v[n++] = d;
    }
    kill_child(sc);
    return n;
}

/* The agent under test: its temporary dir, log and client. */
typedef struct bench_agent {
    char dir[64];      /* /tmp/chaosloco-bench-inject-XXXXXX */
    char state[256];   /* its --state-dir */
    char logp[300];    /* its stdout + stderr */
    pid_t pid;         /* the agent process */
    cx_http_client *c; /* keep-alive client with the token */
} bench_agent;

/* Start `bin agent` supervising `sleep 100000` in a fresh temporary dir
 * and connect to it; also points dur.path into its state dir. 0, or
 * CX_EXIT_FAILURE after printing why. */
static int agent_start(const char *bin, bench_agent *a)
{
    snprintf(a->dir, sizeof a->dir, "/tmp/chaosloco-bench-inject-XXXXXX");
    if (!mkdtemp(a->dir)) {
        perror("mkdtemp");
        return CX_EXIT_FAILURE;
    }
    char tok[256], addrf[300], id[64];
    snprintf(tok, sizeof tok, "%s/token", a->dir);
    snprintf(a->state, sizeof a->state, "%s/state", a->dir);
    snprintf(addrf, sizeof addrf, "%s/listen.addr", a->state);
    snprintf(id, sizeof id, "bench-inject-%d", (int)getpid());
    FILE *f = fopen(tok, "w");
    fprintf(f, "%s\n", TOKEN);
    fclose(f);
    chmod(tok, 0600); /* the agent refuses a token others can read */
    snprintf(a->logp, sizeof a->logp, "%s/agent.log", a->dir);
    int logfd = open(a->logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    const char *args[] = {bin,
                          "agent",
                          "--listen",
                          "127.0.0.1:0",
                          "--id",
                          id,
                          "--state-dir",
                          a->state,
                          "--token-file",
                          tok,
                          "--max-duration-ms",
                          "600000",
                          "--",
                          "sleep",
                          "100000",
                          NULL};
    const char *env[] = {"CHAOSLOCO_LOG=warn", NULL};
    cx_spawn_opts so = {
        .new_pgrp = 1, .stdout_fd = logfd, .stderr_fd = logfd, .extra_env = env, .die_with_parent = SIGKILL};
    char err[256];
    if (cx_spawn(args, &so, &a->pid, err, sizeof err) < 0) {
        fprintf(stderr, "bench: %s\n", err);
        return CX_EXIT_FAILURE;
    }
    char addr[128] = "";
    for (int i = 0; i < 1000 && !addr[0]; i++) {
        FILE *af = fopen(addrf, "r");
        if (af) {
            if (!fgets(addr, sizeof addr, af))
                addr[0] = '\0';
            fclose(af);
        }
        cx_sleep_ms(10);
    }
    if (!addr[0]) {
        fprintf(stderr, "bench: agent did not start (see %s)\n", a->logp);
        return CX_EXIT_FAILURE;
    }
    char base[200];
    snprintf(base, sizeof base, "http://%s", addr);
    snprintf(dur.path, sizeof dur.path, "%s/bench-persist.json", a->state);
    cx_http_opts ho = {.bearer = TOKEN, .timeout_ms = 10000};
    a->c = cx_http_client_new(base, &ho);
    return 0;
}

/* The HTTP round trip alone, on the same keep-alive connection: where an
 * agent row's time goes that is neither the write nor the effect. */
static void rtt_samples(cx_http_client *c, int64_t *v, int trials)
{
    for (int i = 0; i < trials; i++) {
        cx_sleep_ms(GAP_MS);
        int64_t t0 = cx_mono_ns();
        json_decref(call(c, "GET", "/v1/version", NULL, NULL));
        v[i] = cx_mono_ns() - t0;
    }
}

/* Agent kills (SIGKILL, restarted at once): POST → unit reaped. *pid is
 * the running unit before and after (0 when it did not come back); the
 * samples taken. */
static int agent_kill_samples(cx_http_client *c, pid_t *pid, int64_t *v, int trials)
{
    int n = 0;
    for (int i = 0; i < trials; i++) {
        int64_t d = timed(c,
                          "{\"type\":\"kill\",\"duration_ms\":20,\"params\":{\"signal\":\"KILL\","
                          "\"restart_after_ms\":0}}",
                          WAIT_GONE, *pid, NULL, NULL, 0);
        if (d >= 0)
            v[n++] = d;
        *pid = wait_running(c, *pid);
        if (!*pid)
            break;
    }
    return n;
}

/* DELETE /v1/faults/{id}. */
static void fault_delete(cx_http_client *c, const char *id)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/faults/%s", id);
    json_decref(call(c, "DELETE", path, NULL, NULL));
}

/* Agent pauses by signal: POST → state T, each reverted before the next;
 * the samples taken. */
static int agent_stop_samples(cx_http_client *c, pid_t pid, int64_t *v, int trials)
{
    int n = 0;
    char fid[64];
    for (int i = 0; i < trials && pid; i++) {
        int64_t d = timed(c, "{\"type\":\"pause\",\"duration_ms\":60000,\"params\":{\"method\":\"signal\"}}",
                          WAIT_STOPPED, pid, NULL, fid, sizeof fid);
        if (d >= 0)
            v[n++] = d;
        fault_delete(c, fid);
        while (proc_state(pid) == 'T')
            sched_yield();
    }
    return n;
}

/* The unit's freezer.state file, from one freezer pause injected and
 * reverted; "" when the freezer is unusable or v2 (no file to watch). */
static void freezer_probe(cx_http_client *c, char *frz, size_t len)
{
    frz[0] = '\0';
    int st = 0;
    json_t *probe =
        call(c, "POST", "/v1/faults",
             "{\"type\":\"pause\",\"duration_ms\":60000,\"params\":{\"method\":\"freezer\"}}", &st);
    if (st == 201) {
        json_t *ev = json_object_get(probe, "evidence");
        snprintf(frz, len, "%s/freezer.state", json_string_value(json_object_get(ev, "cgroup")));
        fault_delete(c, json_string_value(json_object_get(probe, "id")));
        if (access(frz, R_OK) != 0)
            frz[0] = '\0'; /* v2: no freezer.state file to watch */
    }
    json_decref(probe);
}

/* Reference: a v1 freezer cgroup beside the agent's (frz is the agent's
 * freezer.state) written directly → FROZEN; the samples taken. */
static int ref_freeze_samples(const char *frz, int64_t *v, int trials)
{
    int n = 0;
    char rdir[700] = "";
    pid_t fc = frz[0] ? idle_child() : 0;
    char agent_cg[600];
    snprintf(agent_cg, sizeof agent_cg, "%.*s", (int)(strlen(frz) - strlen("/freezer.state")), frz);
    if (fc && raw_freezer_dir(agent_cg, fc, rdir, sizeof rdir) == 0) {
        for (int i = 0; i < trials; i++) {
            int64_t d = raw_freeze(rdir);
            if (d >= 0)
                v[n++] = d;
        }
    }
    kill_child(fc);
    if (rdir[0])
        rmdir(rdir);
    return n;
}

/* Agent pauses by freezer: POST → FROZEN, each reverted before the next;
 * the samples taken (none when frz is ""). */
static int agent_freeze_samples(cx_http_client *c, pid_t pid, const char *frz, int64_t *v, int trials)
{
    int n = 0;
    char fid[64];
    for (int i = 0; i < trials && frz[0]; i++) {
        while (!file_has(frz, "THAWED"))
            sched_yield();
        int64_t d = timed(c, "{\"type\":\"pause\",\"duration_ms\":60000,\"params\":{\"method\":\"freezer\"}}",
                          WAIT_FROZEN, pid, frz, fid, sizeof fid);
        if (d >= 0)
            v[n++] = d;
        fault_delete(c, fid);
    }
    return n;
}

/* The table: the durable write and the round trip alone, then each raw
 * reference with its agent row and that row's p99 excess over raw p99 +
 * durable p99, in us. */
static void print_table(const row *rt, const row raws[3], const row agents[3])
{
    row wr = {"durable write of faults.json alone (file + dir fsync)", dur.v, dur.n};
    double w99 = dur.n > 0 ? pct(dur.v, dur.n, 0.99) : 0;
    printf("| measurement | trials | p50 (us) | p99 (us) | p99.9 (us) | max (us) | "
           "p99 − (raw p99 + durable p99) (us) |\n");
    printf("|---|---|---|---|---|---|---|\n");
    print_row(&wr, 0);
    print_row(rt, 0);
    for (int i = 0; i < 3; i++) {
        print_row(&raws[i], 0);
        double ref99 = raws[i].n > 0 ? pct(raws[i].v, raws[i].n, 0.99) + w99 : 0;
        print_row(&agents[i], ref99);
    }
}

int main(int argc, char **argv)
{
    int trials;
    char bin[4096];
    int rc = parse_args(argc, argv, &trials, bin, sizeof bin);
    if (rc != 0)
        return rc;
    int64_t *ref = calloc((size_t)trials, sizeof *ref);
    int64_t *killv = calloc((size_t)trials, sizeof *killv);
    int64_t *stopv = calloc((size_t)trials, sizeof *stopv);
    int64_t *frzv = calloc((size_t)trials, sizeof *frzv);
    int64_t *rstop = calloc((size_t)trials, sizeof *rstop);
    int64_t *rtt = calloc((size_t)trials, sizeof *rtt);
    int64_t *rfrz = calloc((size_t)trials, sizeof *rfrz);
    dur.cap = 3 * trials;
    dur.v = calloc((size_t)dur.cap, sizeof *dur.v);

    ref_kill_samples(ref, trials);
    int nrs = ref_stop_samples(rstop, trials);
    bench_agent a = {0};
    rc = agent_start(bin, &a);
    if (rc != 0)
        return rc;
    rtt_samples(a.c, rtt, trials);
    pid_t pid = wait_running(a.c, 0);
    int nk = agent_kill_samples(a.c, &pid, killv, trials);
    int ns = agent_stop_samples(a.c, pid, stopv, trials);
    char frz[600];
    freezer_probe(a.c, frz, sizeof frz);
    int nrf = ref_freeze_samples(frz, rfrz, trials);
    int nf = agent_freeze_samples(a.c, pid, frz, frzv, trials);
    cx_http_client_free(a.c);
    kill(a.pid, SIGTERM);
    cx_wait_timeout(a.pid, 10000, NULL);

    row rt = {"HTTP round trip alone (GET /v1/version)", rtt, trials};
    row raws[] = {{"raw kill(2) → waitpid", ref, trials},
                  {"raw SIGSTOP → state T", rstop, nrs},
                  {"raw freezer.state FROZEN → FROZEN", rfrz, nrf}};
    row agents[] = {{"agent kill: POST → unit reaped", killv, nk},
                    {"agent pause (signal): POST → state T", stopv, ns},
                    {"agent pause (freezer): POST → FROZEN", frzv, nf}};
    print_table(&rt, raws, agents);
    free(ref);
    free(killv);
    free(stopv);
    free(frzv);
    free(dur.v);
    free(rstop);
    free(rtt);
    free(rfrz);
    return nk == trials && ns == trials ? 0 : 1;
}
