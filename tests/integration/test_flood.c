/* test_flood.c - a held-connection flood does not block the control calls.
 *
 * Before the connection guard (common/http_guard.h) the agent and the
 * syncer stopped answering at 512 held connections and the dashboard at
 * 256 (32 event streams locked out the live view): POST /v1/halt and HALT
 * ALL waited in the listen backlog. Here real processes on 127.0.0.1 get
 * more connections than that - idle, with trickled headers, with a body
 * that never comes, in long polls, as event streams - and the reserved
 * calls must still answer (within 10 s; the flood is bounded in count and
 * every socket is closed, every process killed, at the end).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_it.h"
#include "common/http_client.h"
#include "support.h"

#define FLOOD_MAX 1200

static int socks[FLOOD_MAX];
static int nsocks;

static void fini(void)
{
    for (int i = 0; i < nsocks; i++)
        close(socks[i]);
    nsocks = 0;
    ag_cleanup_all();
}

/* Enough descriptors for the flood (the soft limit may be 1024). */
static void init(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096) {
        rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

TestSuite(flood, .init = init, .fini = fini, .timeout = 120);

/* "127.0.0.1:PORT" of a URL "http://127.0.0.1:PORT". */
static int url_port(const char *url)
{
    const char *c = strrchr(url, ':');
    cr_assert_not_null(c);
    return atoi(c + 1);
}

/* Open n connections to port, each sending text (NULL: nothing). A connect
 * that does not complete within 2 s is given up (the backlog is full): the
 * flood is bounded in time too. Returns the number opened. */
static int flood(int port, int n, const char *text)
{
    int opened = 0;
    for (int i = 0; i < n && nsocks < FLOOD_MAX; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        cr_assert_geq(fd, 0, "socket: %s", strerror(errno));
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) {
            close(fd);
            break;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, 2000) != 1) {
            close(fd);
            break;
        }
        if (text)
            (void)send(fd, text, strlen(text), MSG_NOSIGNAL);
        socks[nsocks++] = fd;
        opened++;
    }
    return opened;
}

/* One call with a 10 s bound; returns the status (0: no answer) and the
 * body (new reference or NULL). */
static json_t *call10(const char *base, const char *method, const char *path, const char *body,
                      const char *token, int *status)
{
    cx_http_opts o = {.connect_timeout_ms = 10000, .timeout_ms = 10000, .bearer = token};
    cx_http_client *c = cx_http_client_new(base, &o);
    json_t *jb = body ? json_loads(body, 0, NULL) : NULL, *out = NULL;
    *status = 0;
    int64_t t0 = cx_mono_ms();
    cx_http_json(c, method, path, jb, status, &out, NULL, 0);
    cr_log_info("%s %s -> %d in %lld ms", method, path, *status, (long long)(cx_mono_ms() - t0));
    json_decref(jb);
    cx_http_client_free(c);
    return out;
}

/* The three kinds of held connection, a third of n each. */
static int flood_held(int port, int n, const char *post_path)
{
    char partial_body[256];
    snprintf(partial_body, sizeof partial_body,
             "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Content-Length: 100000\r\n\r\n{\"a\":",
             post_path);
    int got = flood(port, n / 3, NULL);
    got += flood(port, n / 3, "GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    got += flood(port, n - 2 * (n / 3), partial_body);
    return got;
}

Test(flood, agent_halt_and_lease_get_through)
{
    ag a;
    ag_start(&a, "flood", NULL, NULL, NULL);
    int port = url_port(a.url);
    int got = flood_held(port, 700, "/v1/faults");
    cr_log_info("agent: %d held connections", got);
    cr_assert_geq(got, 600, "the flood is over the 512 connection limit");
    int st;
    json_t *r = call10(a.url, "POST", "/v1/halt", NULL, AG_TOKEN, &st);
    cr_expect_eq(st, 200, "POST /v1/halt through the flood -> %d", st);
    json_decref(r);
    r = call10(a.url, "POST", "/v1/lease", "{\"ttl_ms\": 60000}", AG_TOKEN, &st);
    cr_expect_eq(st, 200, "POST /v1/lease through the flood -> %d", st);
    json_decref(r);
    /* more connections after the halt: still answered */
    flood_held(port, 200, "/v1/faults");
    r = call10(a.url, "POST", "/v1/halt", NULL, AG_TOKEN, &st);
    cr_expect_eq(st, 200, "a second halt -> %d", st);
    json_decref(r);
    for (int i = 0; i < nsocks; i++)
        close(socks[i]);
    nsocks = 0;
    r = call10(a.url, "GET", "/v1/status", NULL, AG_TOKEN, &st);
    cr_assert_eq(st, 200);
    cr_expect(json_is_true(json_object_get(r, "halted")), "the halt took effect");
    json_decref(r);
    ag_stop(&a);
}

Test(flood, syncer_status_gets_through_long_polls_and_held_connections)
{
    char *dir = it_mkdtemp("flood");
    char state[600], addr[64], url[96];
    snprintf(state, sizeof state, "%s/syncer", dir);
    const char *args[] = {"syncer",    "--listen",      "127.0.0.1:0", "--state-dir", state, IT_MLP, "--mode",
                          "decoupled", "--learners",    "1",           "--hidden",    "64",  "--batch",
                          "16",        "--eval-tokens", "2048",        NULL};
    it_start(dir, "syncer", args, NULL);
    if (it_wait_addr(state, addr, sizeof addr, 30000) != 0) {
        it_dump_log(dir, "syncer");
        cr_assert_fail("syncer did not write listen.addr");
    }
    snprintf(url, sizeof url, "http://%s", addr);
    int st;
    json_t *s = call10(url, "GET", "/v1/status", NULL, NULL, &st);
    cr_assert_eq(st, 200);
    long long v =
        json_integer_value(json_object_get(json_array_get(json_object_get(s, "fragments"), 0), "version"));
    json_decref(s);
    /* long polls that wait for a version nobody makes: requests in progress */
    char poll_req[256];
    snprintf(poll_req, sizeof poll_req,
             "GET /v1/fragments/0?newer-than=%lld&wait-ms=30000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", v);
    int got = flood(url_port(url), 420, poll_req);
    got += flood_held(url_port(url), 300, "/v1/heartbeat");
    cr_log_info("syncer: %d connections", got);
    cr_assert_geq(got, 600);
    s = call10(url, "GET", "/v1/status", NULL, NULL, &st);
    cr_expect_eq(st, 200, "GET /v1/status through the flood -> %d", st);
    json_decref(s);
    s = call10(url, "GET", "/v1/versions", NULL, NULL, &st);
    cr_expect(st == 503 || st == 200, "an ordinary call is answered, if only with 503: %d", st);
    json_decref(s);
    if (st != 200 && st != 503)
        it_dump_log(dir, "syncer");
    free(dir);
}

/* Read from fd until needle shows up (bounded); 1 when it did. */
static int read_until(int fd, const char *needle, long ms)
{
    char buf[65536];
    size_t n = 0;
    int64_t end = cx_mono_ms() + ms;
    while (cx_mono_ms() < end && n < sizeof buf - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) != 1)
            continue;
        ssize_t r = recv(fd, buf + n, sizeof buf - 1 - n, MSG_DONTWAIT);
        if (r <= 0)
            return 0;
        n += (size_t)r;
        buf[n] = '\0';
        if (strstr(buf, needle))
            return 1;
    }
    return 0;
}

Test(flood, dashboard_halt_all_and_live_view_get_through)
{
    ag a;
    ag_start(&a, "floodd", NULL, NULL, NULL);
    char *dir = it_mkdtemp("floodd");
    char token[600], state[600], addr[64], url[96];
    snprintf(token, sizeof token, "%s/token", dir);
    FILE *f = fopen(token, "w");
    cr_assert_not_null(f);
    fprintf(f, "%s\n", AG_TOKEN);
    fclose(f);
    cr_assert_eq(chmod(token, 0600), 0); /* a secret file: its owner's only */
    snprintf(state, sizeof state, "%s/state", dir);
    const char *args[] = {"dashboard", "--agents", a.url, "--token-file", token, "--state-dir", state, NULL};
    it_start(dir, "dashboard", args, NULL);
    if (it_wait_addr(state, addr, sizeof addr, 20000) != 0) {
        it_dump_log(dir, "dashboard");
        cr_assert_fail("the dashboard did not write listen.addr");
    }
    snprintf(url, sizeof url, "http://%s", addr);
    int port = url_port(url);
    /* 40 event streams (the old cap was 32) and 300 held connections
     * (the old limit was 256) */
    const char *sse = "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    int streams = flood(port, 40, sse);
    int held = flood_held(port, 300, "/api/faults");
    cr_log_info("dashboard: %d streams, %d held", streams, held);
    cr_assert_eq(streams, 40);
    cr_assert_geq(held, 256);
    /* a new viewer gets a live view */
    cr_assert_eq(flood(port, 1, sse), 1);
    int fd = socks[nsocks - 1];
    cr_expect(read_until(fd, "event: snapshot", 10000), "a new event stream gets its snapshot");
    int st;
    json_t *r = call10(url, "POST", "/api/halt", NULL, AG_TOKEN, &st);
    cr_expect_eq(st, 200, "HALT ALL through the flood -> %d", st);
    json_decref(r);
    r = call10(a.url, "GET", "/v1/status", NULL, AG_TOKEN, &st);
    cr_expect(json_is_true(json_object_get(r, "halted")), "HALT ALL reached the agent");
    json_decref(r);
    free(dir);
    for (int i = 0; i < nsocks; i++)
        close(socks[i]);
    nsocks = 0;
    ag_stop(&a);
}
