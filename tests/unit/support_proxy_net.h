/* support_proxy_net.h - loopback helpers for the proxy tests: an echo
 * server on 127.0.0.1:0 (or [::1]:0) (one thread per connection; EOF from the client is
 * answered with shutdown(SHUT_WR)), blocking clients with timeouts, and a
 * byte-exact transfer through an address. Header-only (static inline) so
 * that only the tests that include it carry it.
 */
#ifndef TEST_SUPPORT_PROXY_NET_H
#define TEST_SUPPORT_PROXY_NET_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct echo_srv {
    int lfd;       /* listening socket */
    int port;      /* bound port */
    char addr[64]; /* "127.0.0.1:PORT" or "[::1]:PORT" */
    pthread_t th;  /* accept thread */
} echo_srv;

static inline double tp_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline void *echo_conn_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    static __thread unsigned char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) {
            if (n == 0)
                shutdown(fd, SHUT_WR);
            break;
        }
        ssize_t off = 0;
        while (off < n) {
            ssize_t w = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
            if (w <= 0)
                goto out;
            off += w;
        }
    }
out:
    close(fd);
    return NULL;
}

static inline void *echo_accept_main(void *arg)
{
    echo_srv *s = arg;
    for (;;) {
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &at, echo_conn_main, (void *)(intptr_t)fd) != 0)
            close(fd);
        pthread_attr_destroy(&at);
    }
    return NULL;
}

/* An echo server on 127.0.0.1:0 (v6 = 0) or [::1]:0 (v6 = 1). */
static inline int echo_start_family(echo_srv *s, int v6)
{
    memset(s, 0, sizeof *s);
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *a4 = (struct sockaddr_in *)(void *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)(void *)&ss;
    if (v6) {
        a6->sin6_family = AF_INET6;
        a6->sin6_addr = in6addr_loopback;
    } else {
        a4->sin_family = AF_INET;
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    socklen_t l = v6 ? sizeof *a6 : sizeof *a4;
    s->lfd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&ss, l) != 0 || listen(s->lfd, 64) != 0 ||
        getsockname(s->lfd, (struct sockaddr *)&ss, &l) != 0)
        return -1;
    s->port = ntohs(v6 ? a6->sin6_port : a4->sin_port);
    snprintf(s->addr, sizeof s->addr, v6 ? "[::1]:%d" : "127.0.0.1:%d", s->port);
    return pthread_create(&s->th, NULL, echo_accept_main, s) == 0 ? 0 : -1;
}

static inline int echo_start(echo_srv *s)
{
    return echo_start_family(s, 0);
}

static inline void echo_stop(echo_srv *s)
{
    shutdown(s->lfd, SHUT_RDWR);
    pthread_join(s->th, NULL);
    close(s->lfd);
}

/* Blocking client to "IPV4:PORT" or "[IPV6]:PORT" with 20 s
 * send/receive timeouts; -1 and errno on failure. */
static inline int tp_connect(const char *addr)
{
    char host[64];
    int port = 0;
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof host)
        return -1;
    const char *h = addr;
    size_t hl = (size_t)(colon - addr);
    if (addr[0] == '[' && hl >= 2) {
        h++;
        hl -= 2;
    }
    memcpy(host, h, hl);
    host[hl] = 0;
    port = atoi(colon + 1);
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *a4 = (struct sockaddr_in *)(void *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)(void *)&ss;
    socklen_t sl;
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        sl = sizeof *a6;
    } else {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        inet_pton(AF_INET, host, &a4->sin_addr);
        sl = sizeof *a4;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&ss, sl) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static inline int tp_send_all(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read exactly n bytes (or until EOF/error); returns bytes read. */
static inline size_t tp_recv_n(int fd, void *p, size_t n)
{
    unsigned char *b = p;
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, b + got, n - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

/* Wait up to ms for fd readable; 1 readable, 0 timeout. */
static inline int tp_wait_readable(int fd, int ms)
{
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    return poll(&pf, 1, ms) > 0 ? 1 : 0;
}

static inline void tp_fill_random(unsigned char *b, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        b[i] = (unsigned char)(s >> 24);
    }
}

typedef struct tp_sender {
    int fd;
    const unsigned char *data;
    size_t n;
    int rc;
} tp_sender;

static inline void *tp_sender_main(void *arg)
{
    tp_sender *s = arg;
    s->rc = tp_send_all(s->fd, s->data, s->n);
    shutdown(s->fd, SHUT_WR);
    return NULL;
}

/* Send n random bytes through addr (an echo behind it) while receiving
 * the echo; half-close after sending; read until EOF. Returns bytes
 * received; *same tells whether they equal what was sent. */
static inline size_t tp_echo_transfer(const char *addr, size_t n, uint64_t seed, int *same)
{
    unsigned char *in = malloc(n), *out = malloc(n + 1);
    tp_fill_random(in, n, seed);
    *same = 0;
    int fd = tp_connect(addr);
    if (fd < 0) {
        free(in);
        free(out);
        return 0;
    }
    tp_sender snd = {.fd = fd, .data = in, .n = n};
    pthread_t th;
    pthread_create(&th, NULL, tp_sender_main, &snd);
    size_t got = 0;
    for (;;) {
        ssize_t r = recv(fd, out + got, n + 1 - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got > n)
            break;
    }
    pthread_join(th, NULL);
    close(fd);
    *same = got == n && snd.rc == 0 && memcmp(in, out, n) == 0;
    free(in);
    free(out);
    return got;
}

#endif
