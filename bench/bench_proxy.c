/* bench_proxy.c - the TCP proxy against references measured in the same run.
 *
 *   1. pass-through throughput, no toxics: one connection pushes N MB into a
 *      sink, directly (loopback TCP), through our proxy, and through socat
 *      (if installed) -> MB/s and ratios to direct;
 *   2. bandwidth toxic accuracy at three rates: achieved / configured;
 *   3. latency toxic accuracy: round trips through an echo with a latency
 *      toxic on the way back, minus the median round trip without it,
 *      minus the configured latency -> p50 / p99 error in ms.
 *
 * Usage: bench_proxy [--mb N] [--pings N] [--latency-ms N]
 * Prints a Markdown table (docs/benchmarks.md, "Proxy").
 */
#include "common/err.h"
#include "common/exitcode.h"
#include "injectors/proxy/proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- bench: sockets ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0)
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

static int connect_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int port_of(const char *addr)
{
    const char *c = strrchr(addr, ':');
    return c ? atoi(c + 1) : -1;
}

/* A server that either discards (sink) or echoes, one connection at a time. */
typedef struct server {
    int lfd;
    int port;
    int echo;
    pthread_t th;
    volatile unsigned long long received; /* sink: bytes of the last connection */
} server;

static void *server_main(void *arg)
{
    server *s = arg;
    static unsigned char buf[1 << 16];
    for (;;) {
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            break;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        unsigned long long got = 0;
        for (;;) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n <= 0)
                break;
            got += (unsigned long long)n;
            if (s->echo) {
                ssize_t off = 0;
                while (off < n) {
                    ssize_t w = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
                    if (w <= 0)
                        break;
                    off += w;
                }
            }
        }
        s->received = got;
        close(fd);
    }
    return NULL;
}

static int server_start(server *s, int echo)
{
    memset(s, 0, sizeof *s);
    s->echo = echo;
    s->lfd = listen_any(&s->port);
    return s->lfd >= 0 && pthread_create(&s->th, NULL, server_main, s) == 0 ? 0 : -1;
}

static void server_stop(server *s)
{
    shutdown(s->lfd, SHUT_RDWR);
    pthread_join(s->th, NULL);
    close(s->lfd);
}

/* Push bytes to port, half-close, wait for the peer's close; seconds. */
static double push(int port, size_t bytes)
{
    static unsigned char buf[1 << 16];
    int fd = connect_port(port);
    if (fd < 0)
        return -1;
    double t0 = now_s();
    size_t left = bytes;
    while (left > 0) {
        ssize_t w = send(fd, buf, left < sizeof buf ? left : sizeof buf, MSG_NOSIGNAL);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        left -= (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    char c;
    while (read(fd, &c, 1) > 0) { /* the sink closes after reading everything */
    }
    double dt = now_s() - t0;
    close(fd);
    return dt;
}

/* ---- bench: socat reference ---- */

static pid_t socat_start(int listen_port, int up_port)
{
    char a1[96], a2[96];
    snprintf(a1, sizeof a1, "TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr", listen_port);
    snprintf(a2, sizeof a2, "TCP:127.0.0.1:%d", up_port);
    pid_t pid = fork();
    if (pid == 0) {
        char *const argv[] = {"socat", "-b65536", a1, a2, NULL};
        execvp("socat", argv);
        _exit(CX_EXIT_EXEC_FAILED);
    }
    return pid;
}

static double socat_push(int sink_port, size_t bytes)
{
    int lp;
    int tmp = listen_any(&lp); /* pick a free port, then hand it to socat */
    close(tmp);
    pid_t pid = socat_start(lp, sink_port);
    if (pid < 0)
        return -1;
    /* socat serves exactly one connection: the first connect that succeeds
     * (retried until it listens) is the measured one */
    int fd = -1;
    for (int i = 0; i < 400 && fd < 0; i++) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return -1; /* not installed or failed */
        fd = connect_port(lp);
        if (fd < 0)
            usleep(5000);
    }
    double dt = -1;
    if (fd >= 0) {
        static unsigned char buf[1 << 16];
        double t0 = now_s();
        size_t left = bytes;
        while (left > 0) {
            ssize_t w = send(fd, buf, left < sizeof buf ? left : sizeof buf, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            left -= (size_t)w;
        }
        shutdown(fd, SHUT_WR);
        char c;
        while (read(fd, &c, 1) > 0) {
        }
        dt = left == 0 ? now_s() - t0 : -1;
        close(fd);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return dt;
}

/* ---- bench: measurements ---- */

static int add_toxic(proxy *p, const char *json)
{
    char err[CX_ERRLEN];
    json_t *j = json_loads(json, 0, NULL);
    int rc = proxy_toxic_add(p, j, 1, NULL, err, sizeof err);
    json_decref(j);
    if (rc)
        fprintf(stderr, "toxic: %s\n", err);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double rtt_ms(int fd)
{
    char b[64] = {0};
    double t0 = now_s();
    if (send(fd, b, sizeof b, MSG_NOSIGNAL) != (ssize_t)sizeof b)
        return -1;
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = read(fd, b + got, sizeof b - got);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return (now_s() - t0) * 1e3;
}

/* 1. pass-through throughput against direct loopback and socat (best of 3
 * each, interleaved); returns the proxy's MB/s. */
static double measure_pass_through(proxy *p, int sink_port, size_t mb)
{
    size_t bytes = mb << 20;
    double best_direct = 1e9, best_proxy = 1e9, best_socat = 1e9;
    for (int r = 0; r < 3; r++) {
        double d = push(sink_port, bytes), q = push(port_of(proxy_listen_addr(p)), bytes);
        double s = socat_push(sink_port, bytes);
        if (d > 0 && d < best_direct)
            best_direct = d;
        if (q > 0 && q < best_proxy)
            best_proxy = q;
        if (s > 0 && s < best_socat)
            best_socat = s;
    }
    double mbs_direct = (double)mb / best_direct, mbs_proxy = (double)mb / best_proxy;
    printf("| measurement | result | reference | ratio |\n|---|---|---|---|\n");
    printf("| pass-through, %zu MB, no toxics | proxy %.0f MB/s | direct loopback %.0f MB/s | %.2f |\n", mb,
           mbs_proxy, mbs_direct, mbs_proxy / mbs_direct);
    if (best_socat < 1e9) {
        double mbs_socat = (double)mb / best_socat;
        printf("| pass-through, %zu MB, no toxics | proxy %.0f MB/s | socat %.0f MB/s | %.2f |\n", mb,
               mbs_proxy, mbs_socat, mbs_proxy / mbs_socat);
    } else {
        printf("| pass-through vs socat | socat not available | | |\n");
    }
    return mbs_proxy;
}

/* 1b. the queued (toxic) path: a noop toxic both ways, same transfer. */
static int measure_toxic_path(proxy *p, size_t mb, double mbs_proxy)
{
    size_t bytes = mb << 20;
    if (add_toxic(p, "{\"name\":\"nu\",\"type\":\"noop\",\"stream\":\"upstream\"}") ||
        add_toxic(p, "{\"name\":\"nd\",\"type\":\"noop\",\"stream\":\"downstream\"}"))
        return -1;
    double best_noop = 1e9;
    for (int r = 0; r < 3; r++) {
        double q = push(port_of(proxy_listen_addr(p)), bytes);
        if (q > 0 && q < best_noop)
            best_noop = q;
    }
    proxy_toxic_remove(p, "nu", NULL, 0);
    proxy_toxic_remove(p, "nd", NULL, 0);
    printf(
        "| toxic path (noop toxic both ways), %zu MB | proxy %.0f MB/s | zero-copy path %.0f MB/s | %.2f |\n",
        mb, (double)mb / best_noop, mbs_proxy, ((double)mb / best_noop) / mbs_proxy);
    return 0;
}

/* 2. bandwidth accuracy: ~1.5 s of data at each rate. */
static int measure_bandwidth(proxy *p)
{
    const int rates[3] = {500, 5000, 50000};
    for (int i = 0; i < 3; i++) {
        char js[160];
        snprintf(
            js, sizeof js,
            "{\"name\":\"bw\",\"type\":\"bandwidth\",\"stream\":\"upstream\",\"attributes\":{\"rate\":%d}}",
            rates[i]);
        if (add_toxic(p, js))
            return -1;
        size_t n = (size_t)rates[i] * 1000 * 3 / 2;
        double dt = push(port_of(proxy_listen_addr(p)), n);
        double achieved = (double)n / 1000.0 / dt;
        printf(
            "| bandwidth toxic rate %d KB/s, %zu bytes | achieved %.1f KB/s | configured %d KB/s | %.3f |\n",
            rates[i], n, achieved, rates[i], achieved / rates[i]);
        proxy_toxic_remove(p, "bw", NULL, 0);
    }
    return 0;
}

/* 3. latency accuracy: round trips through an echo server. */
static int measure_latency(proxy *p, int echo_port, int pings, int latency_ms)
{
    char up[64];
    snprintf(up, sizeof up, "127.0.0.1:%d", echo_port);
    proxy_set_upstream(p, up, NULL, 0);
    int fd = connect_port(port_of(proxy_listen_addr(p)));
    double *base = calloc((size_t)pings, sizeof *base), *lat = calloc((size_t)pings, sizeof *lat);
    char js[160];
    snprintf(js, sizeof js,
             "{\"type\":\"latency\",\"stream\":\"downstream\",\"attributes\":{\"latency\":%d}}", latency_ms);
    if (fd < 0 || !base || !lat) {
        fprintf(stderr, "bench_proxy: cannot connect through the proxy or out of memory\n");
        goto fail;
    }
    for (int i = 0; i < pings; i++)
        base[i] = rtt_ms(fd);
    if (add_toxic(p, js))
        goto fail;
    for (int i = 0; i < pings; i++) {
        lat[i] = rtt_ms(fd);
        usleep(2000);
    }
    close(fd);
    qsort(base, (size_t)pings, sizeof *base, cmp_double);
    double b50 = base[pings / 2];
    for (int i = 0; i < pings; i++)
        lat[i] = lat[i] - b50 - latency_ms;
    qsort(lat, (size_t)pings, sizeof *lat, cmp_double);
    printf("| latency toxic %d ms, %d round trips: added - configured | p50 %+.3f ms, p99 %+.3f ms | "
           "base RTT p50 %.3f ms | |\n",
           latency_ms, pings, lat[pings / 2], lat[(pings * 99) / 100], b50);
    free(base);
    free(lat);
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    free(base);
    free(lat);
    return -1;
}

int main(int argc, char **argv)
{
    size_t mb = 256;
    int pings = 200;
    int latency_ms = 20;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc)
            mb = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--pings") == 0 && i + 1 < argc)
            pings = atoi(argv[++i]);
        else if (strcmp(argv[i], "--latency-ms") == 0 && i + 1 < argc)
            latency_ms = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_proxy [--mb N] [--pings N] [--latency-ms N]\n");
            return CX_EXIT_USAGE;
        }
    }
    if (mb < 1 || pings < 10 || latency_ms < 1) {
        fprintf(stderr, "bench_proxy: --mb >= 1, --pings >= 10, --latency-ms >= 1\n");
        return CX_EXIT_USAGE;
    }
    signal(SIGPIPE, SIG_IGN);
    server sink, echo;
    if (server_start(&sink, 0) || server_start(&echo, 1)) {
        fprintf(stderr, "bench_proxy: cannot start servers\n");
        return CX_EXIT_FAILURE;
    }
    char err[CX_ERRLEN], up[64];
    snprintf(up, sizeof up, "127.0.0.1:%d", sink.port);
    proxy *p = proxy_new("bench", "127.0.0.1:0", up, err, sizeof err);
    if (!p) {
        fprintf(stderr, "bench_proxy: %s\n", err);
        return CX_EXIT_FAILURE;
    }
    double mbs_proxy = measure_pass_through(p, sink.port, mb);
    int rc = measure_toxic_path(p, mb, mbs_proxy);
    if (rc == 0)
        rc = measure_bandwidth(p);
    if (rc == 0)
        rc = measure_latency(p, echo.port, pings, latency_ms);
    proxy_free(p);
    server_stop(&sink);
    server_stop(&echo);
    return rc == 0 ? CX_EXIT_OK : CX_EXIT_FAILURE;
}
