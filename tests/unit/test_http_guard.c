/* test_http_guard.c - connection limits of cx_http_server on 127.0.0.1:
 * held connections are evicted near the limits, requests over the caps get
 * 503 before their body is read, reserved routes always get through, and a
 * request whose headers trickle in is cut. Every loop is bounded in count
 * and time; every socket is closed and the server freed by each test. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/http_client.h"
#include "common/http_guard.h"
#include "common/http_server.h"

/* ---- a server whose /slow handler blocks until released ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int inside;   /* /slow handlers running */
static int released; /* 1: /slow handlers return */

static int h_slow(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    pthread_mutex_lock(&mu);
    inside++;
    pthread_cond_broadcast(&cond);
    int64_t end = cx_mono_ms() + 10000; /* bounded even if a test forgets */
    while (!released && cx_mono_ms() < end) {
        pthread_mutex_unlock(&mu);
        cx_sleep_ms(5);
        pthread_mutex_lock(&mu);
    }
    inside--;
    pthread_mutex_unlock(&mu);
    cx_http_reply_text(resp, 200, "text/plain", "slow");
    return 0;
}

static int h_fast(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    cx_http_reply_text(resp, 200, "text/plain", "fast");
    return 0;
}

static const cx_http_route routes[] = {
    {"GET", "/slow", h_slow},
    {"*", "/fast", h_fast}, /* any method: a non-reserved upload target */
    {"POST", "/halt", h_fast},
};
static const char *const reserved[] = {"POST /halt", NULL};

static cx_http_server *srv;
static int port;
static char base[64];
static int socks[256];
static int nsocks;

static void start(const cx_http_limits *lim)
{
    char err[256];
    cx_http_server_opts o = {.limits = lim, .reserved = reserved};
    srv = cx_http_server_new_opts("127.0.0.1:0", routes, 3, NULL, 1024, &o, err, sizeof err);
    cr_assert_not_null(srv, "%s", err);
    port = cx_http_server_port(srv);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    released = 0;
    inside = 0;
}

static void teardown(void)
{
    pthread_mutex_lock(&mu);
    released = 1;
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < nsocks; i++)
        close(socks[i]);
    nsocks = 0;
    cx_http_server_free(srv);
    srv = NULL;
}

TestSuite(http_guard, .fini = teardown, .timeout = 60);

static void limits(cx_http_limits *l)
{
    cx_http_limits_default(l);
    l->conn_max = 32;
    l->conn_soft = 24;
    l->active_max = 16;
}

/* ---- raw sockets ---- */

/* Connect to the server and send text (may be NULL or partial). */
static int raw(const char *text)
{
    cr_assert_lt(nsocks, 256);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    if (text)
        cr_assert_eq(send(fd, text, strlen(text), MSG_NOSIGNAL), (ssize_t)strlen(text));
    socks[nsocks++] = fd;
    return fd;
}

/* 1 when the server closed fd (EOF or reset) within ms; data is skipped. */
static int closed_within(int fd, long ms)
{
    int64_t end = cx_mono_ms() + ms;
    char buf[4096];
    while (cx_mono_ms() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN))
            return 1;
    }
    return 0;
}

/* Wait until n /slow handlers run. */
static void wait_inside(int n)
{
    int64_t end = cx_mono_ms() + 5000;
    pthread_mutex_lock(&mu);
    while (inside != n && cx_mono_ms() < end) {
        pthread_mutex_unlock(&mu);
        cx_sleep_ms(5);
        pthread_mutex_lock(&mu);
    }
    int got = inside;
    pthread_mutex_unlock(&mu);
    cr_assert_eq(got, n, "%d /slow handlers running, want %d", got, n);
}

/* One request through libcurl; returns the status (0 = no answer in 5 s). */
static int call(const char *method, const char *path, char *body, size_t blen)
{
    cx_http_opts o = {.connect_timeout_ms = 5000, .timeout_ms = 5000};
    cx_http_client *c = cx_http_client_new(base, &o);
    cx_http_result r;
    cx_http_result_init(&r);
    int rc = cx_http_do(c, method, path, NULL, NULL, 0, NULL, 0, &r, NULL, 0);
    int st = rc == 0 ? r.status : 0;
    if (body)
        snprintf(body, blen, "%s", r.body.data ? r.body.data : "");
    cx_http_result_cleanup(&r);
    cx_http_client_free(c);
    return st;
}

/* ---- tests ---- */

Test(http_guard, held_flood_evicts_the_oldest_and_requests_get_through)
{
    cx_http_limits l;
    limits(&l);
    start(&l);
    /* three times the hard limit, sending nothing: before the guard the
     * 33rd connection waited in the backlog for the 120 s timeout */
    for (int i = 0; i < 96; i++)
        raw(NULL);
    cr_assert_eq(call("GET", "/fast", NULL, 0), 200, "a request gets through a flood of held connections");
    cr_assert_eq(call("POST", "/halt", NULL, 0), 200);
    cr_expect(closed_within(socks[0], 3000), "the oldest held connection was closed");
    cx_http_guard_stats st;
    cx_http_guard_get_stats(cx_http_server_guard(srv), &st);
    cr_expect_geq(st.evicted, 96 - l.conn_soft, "evicted %llu", (unsigned long long)st.evicted);
    cr_expect_leq(st.open, l.conn_soft + 1, "open %u", st.open);
}

Test(http_guard, request_caps_refuse_with_503_but_reserved_routes_pass)
{
    cx_http_limits l;
    limits(&l);
    l.active_max = 4;
    start(&l);
    for (int i = 0; i < 4; i++)
        raw("GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    wait_inside(4);
    char body[512];
    cr_assert_eq(call("GET", "/fast", body, sizeof body), 503, "over the cap: %s", body);
    cr_expect(strstr(body, "server busy: 4 requests in progress (max 4)") != NULL, "%s", body);
    cr_assert_eq(call("POST", "/halt", body, sizeof body), 200, "a reserved route passes the cap: %s", body);
    /* a refused upload is answered before its body is read */
    int fd = raw("POST /fast HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\n\r\n");
    char buf[512] = "";
    struct pollfd p = {.fd = fd, .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 3000), 1, "answered without the body");
    cr_assert_gt(recv(fd, buf, sizeof buf - 1, 0), 0);
    cr_expect(strncmp(buf, "HTTP/1.1 503", 12) == 0, "%s", buf);
    cr_expect(strstr(buf, "Retry-After: 1") != NULL, "%s", buf);
    pthread_mutex_lock(&mu);
    released = 1;
    pthread_mutex_unlock(&mu);
    wait_inside(0);
    cr_assert_eq(call("GET", "/fast", NULL, 0), 200, "below the cap again");
    cx_http_guard_stats st;
    cx_http_guard_get_stats(cx_http_server_guard(srv), &st);
    cr_expect_eq(st.refused, 2);
    cr_expect_eq(st.reserved_seen, 1);
}

Test(http_guard, per_client_caps)
{
    cx_http_limits l;
    limits(&l);
    l.client_active_max = 2;
    l.client_conn_max = 6;
    l.loopback_is_client = 1; /* this test's only client is loopback */
    start(&l);
    for (int i = 0; i < 2; i++)
        raw("GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    wait_inside(2);
    char body[512];
    cr_assert_eq(call("GET", "/fast", body, sizeof body), 503);
    cr_expect(strstr(body, "too many requests in progress from this client: 2 (max 2)") != NULL, "%s", body);
    for (int i = 0; i < 12; i++)
        raw(NULL);
    cr_assert_eq(call("POST", "/halt", NULL, 0), 200);
    cx_http_guard_stats st;
    cx_http_guard_get_stats(cx_http_server_guard(srv), &st);
    cr_expect_leq(st.open, l.client_conn_max + 1, "the client keeps about its share: %u open", st.open);
    cr_expect_geq(st.evicted, 6);
    /* the running requests were never evicted */
    pthread_mutex_lock(&mu);
    released = 1;
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < 2; i++) {
        char buf[256] = "";
        struct pollfd p = {.fd = socks[i], .events = POLLIN};
        cr_assert_eq(poll(&p, 1, 5000), 1);
        cr_assert_gt(recv(socks[i], buf, sizeof buf - 1, 0), 0);
        cr_expect(strncmp(buf, "HTTP/1.1 200", 12) == 0, "%s", buf);
    }
}

Test(http_guard, trickled_headers_are_cut)
{
    cx_http_limits l;
    limits(&l);
    l.held_max_ms = 300;
    start(&l);
    int slow = raw("GET /fast HTTP/1.1\r\nHost: 127.0.0.1\r\n"); /* never finished */
    cx_sleep_ms(500);
    cr_assert_eq(call("GET", "/fast", NULL, 0), 200);
    cr_expect(closed_within(slow, 3000), "a connection past held_max_ms is closed at the next arrival");
}

Test(http_guard, reserved_names_must_be_routes)
{
    char err[256] = "";
    static const char *const bad[] = {"POST /halt", "GET /halt", NULL};
    cx_http_server_opts o = {.reserved = bad};
    srv = cx_http_server_new_opts("127.0.0.1:0", routes, 3, NULL, 1024, &o, err, sizeof err);
    cr_assert_null(srv);
    cr_expect(strstr(err, "reserved route 'GET /halt' is not in the route table") != NULL, "%s", err);
}
