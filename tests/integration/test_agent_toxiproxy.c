/* test_agent_toxiproxy.c - the whole Toxiproxy 2.x API on a real agent
 * (--toxiproxy-compat on 127.0.0.1, an echo server upstream), checked as a
 * Toxiproxy client sees it (status codes, bodies) and from outside (bytes
 * through the proxies), and every change as a registered fault that halt,
 * lease lapse, /reset and DELETE undo. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent_it.h"

static ag_echo g_echo;
static ag g_ag;
static char g_upstream[64]; /* the echo server, "127.0.0.1:PORT" */

static void start(const char *tag)
{
    ag_echo_start(&g_echo);
    snprintf(g_upstream, sizeof g_upstream, "127.0.0.1:%d", g_echo.port);
    static char proxy[128];
    snprintf(proxy, sizeof proxy, "up=127.0.0.1:0->%s", g_upstream);
    const char *flags[] = {"--proxy", proxy, "--toxiproxy-compat", "--max-duration-ms", "60000", NULL};
    ag_start(&g_ag, tag, flags, NULL, NULL);
    ag_wait_running(&g_ag, 5000);
}

static void stop(void)
{
    ag_stop(&g_ag);
    ag_echo_stop(&g_echo);
}

static void fini(void)
{
    ag_cleanup_all();
}

TestSuite(agent_toxiproxy, .fini = fini, .timeout = 120);

/* A Toxiproxy call with the token (every mutating call needs it, compat
 * mode included; reads go with it too, which they ignore). */
static json_t *tp(const char *method, const char *path, const char *body, int want)
{
    int st = 0;
    json_t *r = ag_call(&g_ag, method, path, body, 1, &st);
    if (st != want) {
        char *t = r ? json_dumps(r, 0) : NULL;
        cr_assert_fail("%s %s %s -> %d (want %d): %s", method, path, body ? body : "", st, want, t ? t : "");
    }
    return r;
}

static int port_of(json_t *proxy)
{
    const char *l = strrchr(js(proxy, "listen"), ':');
    return l ? atoi(l + 1) : 0;
}

/* An error body in Toxiproxy's shape, with the status repeated. */
static void expect_error(json_t *r, int status, const char *needle)
{
    cr_assert_eq(json_integer_value(json_object_get(r, "status")), status);
    cr_assert(strstr(js(r, "error"), needle), "error '%s' names '%s'", js(r, "error"), needle);
}

/* The agent's record of the active fault behind a type/target, or NULL. */
static json_t *active_fault(const char *type, const char *target)
{
    int st = 0;
    json_t *l = ag_call(&g_ag, "GET", "/v1/faults", NULL, 1, &st);
    size_t i;
    json_t *f, *hit = NULL;
    json_array_foreach(json_object_get(l, "faults"), i, f)
    {
        if (!hit && strcmp(js(f, "type"), type) == 0 && strcmp(js(f, "target"), target) == 0 &&
            strcmp(js(f, "state"), "active") == 0)
            hit = json_incref(f);
    }
    json_decref(l);
    return hit;
}

Test(agent_toxiproxy, dynamic_proxies_create_update_populate_delete)
{
    start("tpdyn");
    char body[512];

    /* create: 201 with the bound port; duplicates and missing fields as Toxiproxy */
    snprintf(body, sizeof body, "{\"name\":\"dyn\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"%s\"}",
             g_upstream);
    json_t *p = tp("POST", "/proxies", body, 201);
    int port = port_of(p);
    cr_assert_gt(port, 0);
    cr_assert(json_is_true(json_object_get(p, "enabled")));
    cr_assert_eq(json_array_size(json_object_get(p, "toxics")), 0);
    json_decref(p);
    cr_assert_geq(ag_echo_rtt(port, 100, 2000), 0, "bytes flow through the new proxy");
    json_t *r = tp("POST", "/proxies", body, 409);
    expect_error(r, 409, "proxy already exists");
    json_decref(r);
    r = tp("POST", "/proxies", "{\"name\":\"x\"}", 400);
    expect_error(r, 400, "missing required field: upstream");
    json_decref(r);
    snprintf(body, sizeof body, "{\"upstream\":\"%s\"}", g_upstream);
    r = tp("POST", "/proxies", body, 400);
    expect_error(r, 400, "missing required field: name");
    json_decref(r);
    json_t *f = active_fault("proxy", "unit");
    cr_assert_not_null(f, "the new proxy is a registered fault");
    cr_assert_str_eq(js(f, "origin"), "toxiproxy");
    char proxy_fault[32];
    snprintf(proxy_fault, sizeof proxy_fault, "%s", js(f, "id"));
    json_decref(f);

    /* a toxic with keys Toxiproxy would ignore: accepted, the keys dropped */
    json_t *t = tp("POST", "/proxies/dyn/toxics",
                   "{\"name\":\"lag\",\"type\":\"latency\",\"note\":\"ignored\","
                   "\"attributes\":{\"latency\":300,\"bogus\":7}}",
                   200);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(t, "attributes"), "latency")), 300);
    cr_assert_null(json_object_get(json_object_get(t, "attributes"), "bogus"));
    cr_assert_null(json_object_get(t, "note"));
    json_decref(t);
    cr_assert_geq(ag_echo_rtt(port, 100, 3000), 280, "the toxic delays");
    /* PATCH, as the Go client's UpdateToxic sends it; unknown attributes ignored */
    t = tp("PATCH", "/proxies/dyn/toxics/lag", "{\"attributes\":{\"latency\":20,\"nope\":1},\"toxicity\":1}",
           200);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(t, "attributes"), "latency")), 20);
    json_decref(t);
    r = tp("PATCH", "/proxies/dyn/toxics/nope", "{\"toxicity\":1}", 404);
    expect_error(r, 404, "toxic not found");
    json_decref(r);
    r = tp("POST", "/proxies/dyn/toxics", "{\"type\":\"latency\",\"attributes\":{\"latency\":-5}}", 400);
    expect_error(r, 400, "latency");
    json_decref(r);
    r = tp("POST", "/proxies/dyn/toxics", "{\"type\":\"meteor\"}", 400);
    expect_error(r, 400, "meteor");
    json_decref(r);

    /* re-listen (PATCH): a new port, the old one refused, toxics kept */
    p = tp("PATCH", "/proxies/dyn", "{\"listen\":\"127.0.0.1:0\"}", 200);
    int port2 = port_of(p);
    cr_assert_gt(port2, 0);
    cr_assert_neq(port2, port, "re-bound");
    cr_assert_eq(json_array_size(json_object_get(p, "toxics")), 1, "toxics survive a re-listen");
    json_decref(p);
    cr_assert_geq(ag_echo_rtt(port2, 100, 2000), 0, "the new address relays");
    cr_assert_lt(ag_echo_rtt(port, 10, 300), 0, "the old address is closed");
    /* upstream of a dynamic proxy: its own config, changed in place */
    p = tp("POST", "/proxies/dyn", "{\"upstream\":\"127.0.0.1:1\"}", 200);
    cr_assert_str_eq(js(p, "upstream"), "127.0.0.1:1");
    json_decref(p);
    cr_assert_lt(ag_echo_rtt(port2, 10, 500), 0, "nothing listens on port 1");
    snprintf(body, sizeof body, "{\"upstream\":\"%s\"}", g_upstream);
    json_decref(tp("POST", "/proxies/dyn", body, 200));
    cr_assert_geq(ag_echo_rtt(port2, 10, 2000), 0);

    /* delete: its toxic's fault and its own fault reverted, 404 afterwards */
    json_t *tf = active_fault("latency", "dyn");
    cr_assert_not_null(tf);
    char toxic_fault[32];
    snprintf(toxic_fault, sizeof toxic_fault, "%s", js(tf, "id"));
    json_decref(tf);
    json_decref(tp("DELETE", "/proxies/dyn", NULL, 204));
    char state[32], reason[32];
    ag_fault_state(&g_ag, toxic_fault, state, sizeof state, reason, sizeof reason);
    cr_assert_str_eq(state, "reverted");
    ag_fault_state(&g_ag, proxy_fault, state, sizeof state, reason, sizeof reason);
    cr_assert_str_eq(state, "reverted");
    cr_assert_str_eq(reason, "delete");
    r = tp("GET", "/proxies/dyn", NULL, 404);
    expect_error(r, 404, "proxy not found");
    json_decref(r);
    json_decref(tp("DELETE", "/proxies/dyn", NULL, 404));
    cr_assert_lt(ag_echo_rtt(port2, 10, 300), 0, "a deleted proxy listens no more");

    /* populate: 201 {"proxies": [...]}; consistent entries untouched, others replaced */
    snprintf(body, sizeof body,
             "[{\"name\":\"p1\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"%s\"},"
             "{\"name\":\"p2\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"%s\",\"enabled\":false}]",
             g_upstream, g_upstream);
    r = tp("POST", "/populate", body, 201);
    json_t *arr = json_object_get(r, "proxies");
    cr_assert_eq(json_array_size(arr), 2);
    int p1 = port_of(json_array_get(arr, 0));
    cr_assert(json_is_false(json_object_get(json_array_get(arr, 1), "enabled")), "enabled:false honoured");
    json_decref(r);
    cr_assert_geq(ag_echo_rtt(p1, 10, 2000), 0);
    snprintf(body, sizeof body,
             "[{\"name\":\"p1\",\"listen\":\"localhost:%d\",\"upstream\":\"%s\"},"
             "{\"name\":\"p2\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"%s\"}]",
             p1, g_upstream, g_upstream);
    r = tp("POST", "/populate", body, 201);
    arr = json_object_get(r, "proxies");
    cr_assert_eq(port_of(json_array_get(arr, 0)), p1, "same listen (by name resolution) and upstream: kept");
    cr_assert(json_is_true(json_object_get(json_array_get(arr, 1), "enabled")), "p2 replaced (listen :0)");
    json_decref(r);
    /* a --proxy proxy may be listed only as it is */
    p = tp("GET", "/proxies/up", NULL, 200);
    snprintf(body, sizeof body,
             "[{\"name\":\"p3\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"%s\"},"
             "{\"name\":\"up\",\"listen\":\"%s\",\"upstream\":\"127.0.0.1:1\"}]",
             g_upstream, js(p, "listen"));
    json_decref(p);
    r = tp("POST", "/populate", body, 409);
    expect_error(r, 409, "--proxy");
    cr_assert_eq(json_array_size(json_object_get(r, "proxies")), 1, "the entries done before the error");
    json_decref(r);
    r = tp("POST", "/populate", "[{\"name\":\"p9\"}]", 400);
    expect_error(r, 400, "missing required field: upstream at proxy 1");
    cr_assert(json_is_null(json_object_get(r, "proxies")));
    json_decref(r);
    json_decref(tp("GET", "/proxies/p9", NULL, 404));
    r = tp("GET", "/proxies", NULL, 200);
    cr_assert_eq(json_object_size(r), 4, "up, p1, p2, p3");
    json_decref(r);

    /* halt deletes every dynamic proxy and refuses new ones until resume */
    int st = 0;
    json_decref(ag_call(&g_ag, "POST", "/v1/halt", NULL, 1, &st));
    cr_assert_eq(st, 200);
    r = tp("GET", "/proxies", NULL, 200);
    cr_assert_eq(json_object_size(r), 1, "only the --proxy proxy is left");
    json_decref(r);
    cr_assert_lt(ag_echo_rtt(p1, 10, 300), 0);
    snprintf(body, sizeof body, "{\"name\":\"late\",\"upstream\":\"%s\"}", g_upstream);
    json_decref(tp("POST", "/proxies", body, 503));
    json_decref(ag_call(&g_ag, "POST", "/v1/resume", NULL, 1, &st));

    /* a lease that lapses takes the proxies made under it along */
    json_decref(ag_call(&g_ag, "POST", "/v1/lease", "{\"ttl_ms\":1500}", 1, &st));
    cr_assert_eq(st, 200);
    p = tp("POST", "/proxies", body, 201);
    int lport = port_of(p);
    json_decref(p);
    int64_t end = cx_mono_ms() + 10000;
    int gone = 0;
    while (!gone && cx_mono_ms() < end) {
        cx_sleep_ms(100);
        json_t *g = ag_call(&g_ag, "GET", "/proxies/late", NULL, 1, &st);
        json_decref(g);
        gone = st == 404;
    }
    cr_assert(gone, "lease lapse deleted the proxy");
    cr_assert_lt(ag_echo_rtt(lport, 10, 300), 0);

    /* the --proxy proxy is the unit's link: not deletable, not re-bindable */
    r = tp("DELETE", "/proxies/up", NULL, 409);
    expect_error(r, 409, "--proxy");
    json_decref(r);
    r = tp("POST", "/proxies/up", "{\"listen\":\"127.0.0.1:1\"}", 409);
    expect_error(r, 409, "cannot be re-bound");
    json_decref(r);
    /* not even the token opens a proxy to the network without --toxiproxy-listen-allow */
    snprintf(body, sizeof body, "{\"name\":\"wide\",\"listen\":\"0.0.0.0:0\",\"upstream\":\"%s\"}",
             g_upstream);
    r = tp("POST", "/proxies", body, 403);
    expect_error(r, 403, "--toxiproxy-listen-allow");
    json_decref(r);

    /* /version: a SemVer string, as Toxiproxy clients parse it */
    r = tp("GET", "/version", NULL, 200);
    unsigned maj = 0, min = 0, pat = 0;
    char tail = 0;
    cr_assert_eq(sscanf(js(r, "version"), "%u.%u.%u%c", &maj, &min, &pat, &tail), 3, "'%s' is x.y.z",
                 js(r, "version"));
    cr_assert_eq(maj, 2);
    json_decref(r);
    stop();
}

/* A --proxy proxy carries the unit's traffic (a learner's credential with
 * it): its upstream can be asked for as it is (200, nothing changes; by
 * name too), never changed, not even with the token. */
Test(agent_toxiproxy, upstream_of_a_fixed_proxy_cannot_change)
{
    start("tpup");
    int port = ag_proxy_port(&g_ag, "up");
    cr_assert_geq(ag_echo_rtt(port, 10, 2000), 0);
    json_t *r = tp("POST", "/proxies/up", "{\"upstream\":\"127.0.0.1:1\"}", 409);
    expect_error(r, 409, "--proxy");
    json_decref(r);
    r = tp("PATCH", "/proxies/up", "{\"upstream\":\"localhost:1\",\"enabled\":false}", 409);
    expect_error(r, 409, "cannot be pointed at");
    json_decref(r);
    char body[128];
    snprintf(body, sizeof body, "{\"upstream\":\"%s\"}", g_upstream);
    json_t *p = tp("POST", "/proxies/up", body, 200);
    cr_assert_str_eq(js(p, "upstream"), g_upstream);
    json_decref(p);
    snprintf(body, sizeof body, "{\"upstream\":\"localhost:%d\"}", g_echo.port);
    p = tp("PATCH", "/proxies/up", body, 200);
    cr_assert_str_eq(js(p, "upstream"), g_upstream, "the same upstream by name: nothing changes");
    cr_assert(json_is_true(json_object_get(p, "enabled")), "a refused call changed nothing");
    json_decref(p);
    json_t *s = ag_status(&g_ag);
    cr_assert_eq(json_integer_value(json_object_get(s, "faults_active")), 0, "no fault was made");
    json_decref(s);
    cr_assert_geq(ag_echo_rtt(port, 10, 2000), 0, "the link still reaches its upstream");
    stop();
}

/* Toxiproxy keeps what its API made until it is deleted: past the agent's
 * --max-duration-ms (1.5 s here) the created proxy and its toxic are still
 * there, their faults active with no duration; an agent crash ends them
 * (the next agent records the sweep). */
Test(agent_toxiproxy, created_proxies_outlive_max_duration_and_end_with_agent_crash)
{
    ag_echo_start(&g_echo);
    snprintf(g_upstream, sizeof g_upstream, "127.0.0.1:%d", g_echo.port);
    const char *flags[] = {"--toxiproxy-compat", "--max-duration-ms", "1500", NULL};
    ag_start(&g_ag, "tpexp", flags, NULL, NULL);
    char body[256];
    snprintf(body, sizeof body, "{\"name\":\"kept\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"%s\"}",
             g_upstream);
    json_t *p = tp("POST", "/proxies", body, 201);
    int port = port_of(p);
    json_decref(p);
    json_decref(
        tp("POST", "/proxies/kept/toxics", "{\"type\":\"latency\",\"attributes\":{\"latency\":10}}", 200));
    json_t *tf = active_fault("latency", "kept");
    cr_assert_not_null(tf);
    cr_assert(json_is_null(json_object_get(tf, "duration_ms")), "no duration: until deleted");
    cr_assert(json_is_null(json_object_get(tf, "expires_in_ms")));
    json_decref(tf);
    cx_sleep_ms(2500); /* past the 1.5 s cap a v1 fault could have */
    p = tp("GET", "/proxies/kept", NULL, 200);
    cr_assert_eq(json_array_size(json_object_get(p, "toxics")), 1, "the toxic is kept");
    json_decref(p);
    cr_assert_geq(ag_echo_rtt(port, 10, 2000), 10, "the proxy relays, with its latency");
    tf = active_fault("latency", "kept");
    cr_assert_not_null(tf, "the toxic's fault is still active");
    json_decref(tf);
    /* a v1 fault is still capped */
    int st = 0;
    json_decref(ag_call(&g_ag, "POST", "/v1/faults",
                        "{\"type\":\"latency\",\"params\":{\"latency\":1},"
                        "\"duration_ms\":1501}",
                        1, &st));
    cr_assert_eq(st, 400, "--max-duration-ms still caps the v1 API");

    /* a crash: the proxy dies with the agent, the next agent records it swept */
    json_t *f = active_fault("proxy", "unit");
    cr_assert_not_null(f);
    char proxy_fault[32];
    snprintf(proxy_fault, sizeof proxy_fault, "%s", js(f, "id"));
    json_decref(f);
    it_signal(g_ag.pid, SIGKILL, 0);
    it_wait_exit(g_ag.pid, 10000);
    ag_start(&g_ag, "tpexp", flags, NULL, &g_ag);
    char state[32], reason[32];
    ag_fault_state(&g_ag, proxy_fault, state, sizeof state, reason, sizeof reason);
    cr_assert_str_eq(reason, "agent_restart");
    json_decref(tp("GET", "/proxies/kept", NULL, 404));
    stop();
}

/* The best of n round trips of len bytes through port, ms (-1: none came). */
static long best_rtt(int port, size_t len, int n, long timeout_ms)
{
    long best = -1;
    for (int i = 0; i < n; i++) {
        long t = ag_echo_rtt(port, len, timeout_ms);
        if (t >= 0 && (best < 0 || t < best))
            best = t;
    }
    return best;
}

/* What a Toxiproxy client can tell apart, each as Toxiproxy does it:
 * stacked toxics (latencies add up, the slower bandwidth sets the pace),
 * a refused upstream closed with FIN (EOF, not a reset), a disabled
 * proxy's listen echoed as given, X-Toxiproxy-Request-Id on answers. The
 * timing checks are lower bounds (a toxic never makes a link faster), so
 * load cannot fail them. */
Test(agent_toxiproxy, behaves_as_toxiproxy_where_a_client_can_tell)
{
    start("tpbeh");
    char body[512];
    snprintf(body, sizeof body, "{\"name\":\"st\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"%s\"}",
             g_upstream);
    json_t *p = tp("POST", "/proxies", body, 201);
    int port = port_of(p);
    json_decref(p);

    /* two latency toxics of 100 ms: 200 ms, not 100 */
    json_decref(tp("POST", "/proxies/st/toxics",
                   "{\"name\":\"l1\",\"type\":\"latency\",\"attributes\":{\"latency\":100}}", 200));
    json_decref(tp("POST", "/proxies/st/toxics",
                   "{\"name\":\"l2\",\"type\":\"latency\",\"attributes\":{\"latency\":100}}", 200));
    long two = best_rtt(port, 16, 3, 5000);
    cr_assert_geq(two, 198, "two stacked 100 ms latencies: %ld ms", two);
    json_decref(tp("DELETE", "/proxies/st/toxics/l2", NULL, 204));
    json_decref(tp("DELETE", "/proxies/st/toxics/l1", NULL, 204));

    /* bandwidth 2000 KB/s then 100 KB/s downstream: 60 KB take >= 0.6 s */
    json_decref(tp("POST", "/proxies/st/toxics",
                   "{\"name\":\"fast\",\"type\":\"bandwidth\",\"attributes\":{\"rate\":2000}}", 200));
    json_decref(tp("POST", "/proxies/st/toxics",
                   "{\"name\":\"slow\",\"type\":\"bandwidth\",\"attributes\":{\"rate\":100}}", 200));
    long bw = ag_echo_rtt(port, 60000, 20000);
    cr_assert_geq(bw, 590, "60 KB through 2000 then 100 KB/s took %ld ms (the slower rate: 600 ms)", bw);
    json_decref(tp("POST", "/reset", NULL, 204));

    /* a refused upstream: the client reads EOF (FIN), never a reset */
    snprintf(body, sizeof body,
             "{\"name\":\"dead\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"127.0.0.1:1\"}");
    p = tp("POST", "/proxies", body, 201);
    int dport = port_of(p);
    json_decref(p);
    int eof = 0, resets = 0;
    for (int i = 0; i < 30; i++) {
        int fd = ag_connect(dport);
        cr_assert_geq(fd, 0, "the proxy accepts");
        (void)send(fd, "ping", 4, MSG_NOSIGNAL);
        char c;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        cr_assert_eq(poll(&pf, 1, 5000), 1, "an answer within 5 s");
        ssize_t r = recv(fd, &c, 1, 0);
        eof += r == 0;
        resets += r < 0 && errno == ECONNRESET;
        close(fd);
    }
    cr_assert_eq(eof, 30, "30 probes of a refused upstream: %d EOF, %d reset", eof, resets);

    /* a proxy created disabled echoes its listen as given, until it listens */
    p = tp("POST", "/proxies",
           "{\"name\":\"off\",\"listen\":\"localhost:0\",\"upstream\":\"127.0.0.1:1\","
           "\"enabled\":false}",
           201);
    cr_assert_str_eq(js(p, "listen"), "localhost:0");
    cr_assert(json_is_false(json_object_get(p, "enabled")));
    json_decref(p);
    p = tp("GET", "/proxies/off", NULL, 200);
    cr_assert_str_eq(js(p, "listen"), "localhost:0");
    json_decref(p);
    p = tp("POST", "/proxies/off", "{\"enabled\":true}", 200);
    cr_assert(strncmp(js(p, "listen"), "127.0.0.1:", 10) == 0 && port_of(p) > 0,
              "resolved once listening: %s", js(p, "listen"));
    json_decref(p);

    /* X-Toxiproxy-Request-Id: on every answer of that API, a new one each */
    char ans[16384], first[32] = "";
    const char *reqs[][2] = {
        {"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer " AG_TOKEN, NULL},
        {"GET /proxies/nope HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer " AG_TOKEN, NULL},
        {"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer " AG_TOKEN, NULL},
        {"POST /proxies HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer " AG_TOKEN
         "\r\nContent-Type: application/json\r\nContent-Length: 2",
         "{}"},
    };
    const int want[] = {200, 404, 200, 400};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(ag_raw_full(&g_ag, reqs[i][0], reqs[i][1], ans, sizeof ans, 5000), want[i], "%s", ans);
        const char *h = strcasestr(ans, "\r\nX-Toxiproxy-Request-Id: ");
        cr_assert_not_null(h, "no X-Toxiproxy-Request-Id: %s", ans);
        h += strlen("\r\nX-Toxiproxy-Request-Id: ");
        size_t n = strspn(h, "0123456789abcdefghijklmnopqrstuv");
        cr_assert_eq(n, 20, "an id of 20 characters [0-9a-v]: %.30s", h);
        cr_assert(strncmp(h, first, 20) != 0, "a new id per answer");
        snprintf(first, sizeof first, "%.20s", h);
    }
    stop();
}
