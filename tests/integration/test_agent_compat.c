/* test_agent_compat.c - `chaosloco agent --toxiproxy-compat` without holes
 * (issue 28, item 4): the attacks a local process made on main's code,
 * each replayed against a real agent on 127.0.0.1:
 *   - without the token, re-point a learner's syncer link at itself and
 *     receive `Authorization: Bearer learner-0...` (a real syncer and
 *     learner here); with the token, the same upstream change is refused
 *     too: that link carries the learner's credential;
 *   - without the token, relay to any upstream, and re-bind, delete,
 *     replace, poison or reset proxies made with the token;
 *   - make the (root) agent listen on 127.0.0.1:80, or on the network;
 * and how a Toxiproxy client passes the token: a Bearer header, or the
 * password of Basic auth (what Go's net/http and Python's requests send
 * for http://toxiproxy:TOKEN@HOST:PORT), the latter in compat mode only.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent_it.h"

/* base64("toxiproxy:" AG_TOKEN) and the same with the token's last
 * character changed */
#define BASIC_OK "dG94aXByb3h5Oml0LXRva2VuLTdmM2E5YzJlNTE="
#define BASIC_WRONG "dG94aXByb3h5Oml0LXRva2VuLTdmM2E5YzJlNTI="

static ag_echo g_echo;
static ag g_ag;
static char g_upstream[64]; /* the echo server, "127.0.0.1:PORT" */

static void fini(void)
{
    ag_cleanup_all();
}

TestSuite(agent_compat, .fini = fini, .timeout = 180);

/* An agent in compat mode (plus more flags, NULL-terminated, or NULL)
 * whose --proxy "up" leads to an echo server. */
static void start(const char *tag, const char *const *more)
{
    ag_echo_start(&g_echo);
    snprintf(g_upstream, sizeof g_upstream, "127.0.0.1:%d", g_echo.port);
    static char proxy[128];
    snprintf(proxy, sizeof proxy, "up=127.0.0.1:0->%s", g_upstream);
    const char *flags[16] = {"--proxy", proxy, "--toxiproxy-compat", "--max-duration-ms", "60000"};
    for (int i = 0, n = 5; more && more[i] && n < 15; i++)
        flags[n++] = more[i];
    ag_start(&g_ag, tag, flags, NULL, NULL);
    ag_wait_running(&g_ag, 5000);
}

static void stop(void)
{
    ag_stop(&g_ag);
    ag_echo_stop(&g_echo);
}

/* One call: status, the answer into *out (new reference, or NULL). */
static int call(const char *method, const char *path, const char *body, int with_token, json_t **out)
{
    int st = 0;
    json_t *r = ag_call(&g_ag, method, path, body, with_token, &st);
    if (out)
        *out = r;
    else
        json_decref(r);
    return st;
}

static int port_of(json_t *proxy)
{
    const char *l = strrchr(js(proxy, "listen"), ':');
    return l ? atoi(l + 1) : 0;
}

static void expect_error(json_t *r, const char *needle)
{
    cr_assert(strstr(js(r, "error"), needle), "error '%s' names '%s'", js(r, "error"), needle);
}

/* ---- a stranger's listener: what reaches it ---- */

/* A listening socket on 127.0.0.1, non-blocking; its port into *port. */
static int stranger_listen(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(fd, 64), 0);
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* Accept whatever connected to lfd so far and read what each sent (up to
 * 500 ms each): the number of connections; *cred set when one of them
 * carried a learner's bearer credential. */
static int stranger_harvest(int lfd, int *cred)
{
    int n = 0;
    *cred = 0;
    for (int fd; n < 64 && (fd = accept(lfd, NULL, NULL)) >= 0; n++) {
        char buf[8192];
        size_t got = 0;
        int64_t end = cx_mono_ms() + 500;
        while (got < sizeof buf - 1 && cx_mono_ms() < end) {
            struct pollfd pf = {.fd = fd, .events = POLLIN};
            if (poll(&pf, 1, 50) != 1)
                continue;
            ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        buf[got] = '\0';
        *cred |= strstr(buf, "Bearer learner-") != NULL;
        close(fd);
    }
    return n;
}

/* ---- the learner's link ---- */

static json_t *proxy_stats(const ag *a)
{
    json_t *s = ag_status(a);
    json_t *st = json_incref(json_object_get(json_array_get(json_object_get(s, "proxies"), 0), "stats"));
    json_decref(s);
    return st;
}

/* A decoupled syncer and an agent in compat mode whose unit is learner 0,
 * reaching the syncer through the agent's proxy "sy" (as
 * ag_start_learner_unit, with --toxiproxy-compat). */
static void start_learner(const char *dir, char *saddr, size_t saddrlen)
{
    char sstate[600];
    snprintf(sstate, sizeof sstate, "%s/syncer", dir);
    const char *sargs[] = {"syncer",     "--listen", "127.0.0.1:0",     "--state-dir",
                           sstate,       IT_MLP,     "--mode",          "decoupled",
                           "--learners", "1",        "--fragments",     "2",
                           "--H",        "4",        "--quorum",        "1",
                           "--hidden",   "32",       "--batch",         "4",
                           "--steps",    "100000",   "--eval-every-ms", "500",
                           NULL};
    it_start(dir, "syncer", sargs, NULL);
    cr_assert_eq(it_wait_addr(sstate, saddr, saddrlen, 15000), 0, "syncer listen.addr");
    static char pflag[200], lstate[600], lcred[700];
    snprintf(pflag, sizeof pflag, "sy=127.0.0.1:0->%s", saddr);
    snprintf(lstate, sizeof lstate, "%s/learner0", dir);
    snprintf(lcred, sizeof lcred, "%s/credentials/learner-0.cred", sstate);
    const char *extra[] = {"--proxy", pflag, "--toxiproxy-compat", NULL};
    const char *unit[] = {CHAOSLOCO_BIN, "learner",     "--syncer", "http://{proxy.sy}", "--id",
                          "0",           "--state-dir", lstate,     "--credential-file", lcred,
                          "--steps",     "100000",      NULL};
    ag_start(&g_ag, "compatl", extra, unit, NULL);
    ag_wait_running(&g_ag, 15000);
}

/* The attack of issue 28: a local process re-points the learner's syncer
 * link at itself. On main's code the unauthenticated POST was a 200 and
 * the next link the learner opened brought its bearer credential to the
 * stranger. Here it is a 401; with the token it is a 409; the learner's
 * new links (it is killed and restarted, so it surely opens some) all go
 * to the syncer, and the stranger receives nothing. */
Test(agent_compat, no_local_process_can_steal_the_learners_credential)
{
    char *dir = it_mkdtemp("compatl");
    char saddr[128];
    start_learner(dir, saddr, sizeof saddr);
    int sport = 0;
    int lfd = stranger_listen(&sport);
    char away[128];
    snprintf(away, sizeof away, "{\"upstream\":\"127.0.0.1:%d\"}", sport);

    json_t *r = NULL;
    int open_st = call("POST", "/proxies/sy", away, 0, &r);
    json_decref(r);
    int token_st = call("PATCH", "/proxies/sy", away, 1, &r);

    /* the learner opens new links: a kill and a restart */
    json_t *before = proxy_stats(&g_ag);
    json_int_t acc0 = json_integer_value(json_object_get(before, "conns_accepted"));
    json_decref(before);
    json_decref(ag_fault(&g_ag, "{\"type\":\"kill\",\"duration_ms\":20000,\"params\":{\"signal\":\"KILL\","
                                "\"restart_after_ms\":200}}"));
    int64_t end = cx_mono_ms() + 60000;
    json_int_t acc = acc0, up0 = -1, up = -1;
    while (cx_mono_ms() < end) {
        json_t *s = proxy_stats(&g_ag);
        acc = json_integer_value(json_object_get(s, "conns_accepted"));
        up = json_integer_value(json_object_get(s, "bytes_up"));
        json_decref(s);
        if (acc >= acc0 + 2 && up0 < 0)
            up0 = up;
        if (up0 >= 0 && up > up0 + 2000) /* the restarted learner is talking through the link */
            break;
        cx_sleep_ms(100);
    }
    int cred = 0;
    int conns = stranger_harvest(lfd, &cred);
    close(lfd);
    cr_assert_not(cred, "the stranger received the learner's credential (%d links)", conns);
    cr_assert_eq(conns, 0, "%d of the learner's links reached the stranger", conns);
    cr_assert_eq(open_st, 401, "an upstream change without the token -> %d", open_st);
    cr_assert_eq(token_st, 409, "an upstream change of the learner's link with the token -> %d", token_st);
    expect_error(r, "carries the unit's traffic");
    json_decref(r);
    cr_assert_geq(acc, acc0 + 2, "the restarted learner opened new links (%lld -> %lld)", (long long)acc0,
                  (long long)acc);
    cr_assert(up0 >= 0 && up > up0 + 2000, "and talked through them to the syncer");
    json_t *p = NULL;
    cr_assert_eq(call("GET", "/proxies/sy", NULL, 1, &p), 200);
    cr_assert_str_eq(js(p, "upstream"), saddr, "the link still leads to the syncer");
    json_decref(p);
    ag_stop(&g_ag);
    it_cleanup();
    free(dir);
}

/* Without the token nothing changes, whatever the call: relay to any
 * upstream, re-bind, delete, replace, poison, reset or disable. On main's
 * code every one of them succeeded in compat mode. */
Test(agent_compat, without_the_token_nothing_changes)
{
    start("compatn", NULL);
    char body[512];
    snprintf(body, sizeof body, "{\"name\":\"mine\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"%s\"}",
             g_upstream);
    json_t *p = NULL;
    cr_assert_eq(call("POST", "/proxies", body, 1, &p), 201, "with the token");
    int port = port_of(p);
    json_decref(p);

    snprintf(body, sizeof body,
             "{\"name\":\"relay\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"10.1.2.3:22\"}");
    cr_assert_eq(call("POST", "/proxies", body, 0, NULL), 401, "a relay to anywhere");
    cr_assert_eq(call("POST", "/proxies/mine", "{\"listen\":\"127.0.0.1:0\"}", 0, NULL), 401, "re-bind");
    cr_assert_eq(call("PATCH", "/proxies/mine", "{\"upstream\":\"127.0.0.1:1\"}", 0, NULL), 401, "re-point");
    cr_assert_eq(call("DELETE", "/proxies/mine", NULL, 0, NULL), 401, "delete");
    snprintf(body, sizeof body,
             "[{\"name\":\"mine\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"127.0.0.1:1\"}]");
    cr_assert_eq(call("POST", "/populate", body, 0, NULL), 401, "replace through /populate");
    cr_assert_eq(call("POST", "/proxies/mine/toxics", "{\"type\":\"timeout\",\"attributes\":{\"timeout\":1}}",
                      0, NULL),
                 401, "a toxic");
    cr_assert_eq(call("POST", "/proxies/up", "{\"enabled\":false}", 0, NULL), 401, "disable the unit's link");
    cr_assert_eq(call("POST", "/reset", NULL, 0, NULL), 401, "reset");
    /* a wrong token, as Bearer and as Basic, is no better */
    char head[1024], out[4096];
    const char *host = g_ag.url + strlen("http://");
    snprintf(head, sizeof head,
             "DELETE /proxies/mine HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer it-token-0000000000\r\n"
             "Connection: close",
             host);
    cr_assert_eq(ag_raw(&g_ag, head, NULL, out, sizeof out, 5000), 401, "%s", out);
    snprintf(head, sizeof head,
             "DELETE /proxies/mine HTTP/1.1\r\nHost: %s\r\nAuthorization: Basic " BASIC_WRONG "\r\n"
             "Connection: close",
             host);
    cr_assert_eq(ag_raw(&g_ag, head, NULL, out, sizeof out, 5000), 401, "%s", out);

    /* nothing changed: mine where it was, to where it was, no toxic, and
     * only the one fault (mine) */
    cr_assert_eq(call("GET", "/proxies", NULL, 1, &p), 200);
    cr_assert_eq(json_object_size(p), 2, "up and mine only");
    json_t *mine = json_object_get(p, "mine");
    cr_assert_eq(port_of(mine), port);
    cr_assert_str_eq(js(mine, "upstream"), g_upstream);
    cr_assert_eq(json_array_size(json_object_get(mine, "toxics")), 0);
    cr_assert(json_is_true(json_object_get(json_object_get(p, "up"), "enabled")));
    json_decref(p);
    json_t *s = ag_status(&g_ag);
    cr_assert_eq(json_integer_value(json_object_get(s, "faults_active")), 1);
    json_decref(s);
    cr_assert_geq(ag_echo_rtt(port, 10, 2000), 0, "mine still relays");
    /* and each refusal is audited as such */
    json_t *au = ag_audit(&g_ag);
    size_t i, refused = 0;
    json_t *l;
    json_array_foreach(au, i, l) refused += json_integer_value(json_object_get(l, "status")) == 401;
    json_decref(au);
    cr_assert_geq(refused, 10, "%zu refusals audited", refused);
    stop();
}

/* Where a proxy made through the Toxiproxy API may listen: loopback, or an
 * address given with --toxiproxy-listen-allow, on port 0 or 1024..65535;
 * the token does not widen it. On main's code a call with the token (and
 * in compat mode one without) bound 127.0.0.1:80 as root, or 0.0.0.0. */
Test(agent_compat, listen_addresses_are_limited)
{
    start("compatp", NULL);
    char body[512];
    json_t *r = NULL;
    const char *refused[][2] = {
        {"127.0.0.1:80", "below 1024"},
        {"localhost:1023", "below 1024"},
        {"0.0.0.0:0", "--toxiproxy-listen-allow"},
        {"0.0.0.0:18080", "--toxiproxy-listen-allow"},
        {"[::1]:80", "below 1024"},
        {"[::]:0", "--toxiproxy-listen-allow"}, /* the IPv6 wildcard is no loopback */
    };
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        snprintf(body, sizeof body, "{\"name\":\"p%zu\",\"listen\":\"%s\",\"upstream\":\"%s\"}", k,
                 refused[k][0], g_upstream);
        cr_assert_eq(call("POST", "/proxies", body, 1, &r), 403, "listen %s", refused[k][0]);
        expect_error(r, refused[k][1]);
        json_decref(r);
    }
    snprintf(body, sizeof body, "[{\"name\":\"q\",\"listen\":\"127.0.0.1:443\",\"upstream\":\"%s\"}]",
             g_upstream);
    cr_assert_eq(call("POST", "/populate", body, 1, &r), 403, "through /populate");
    json_decref(r);
    /* loopback on an unprivileged port is fine, and so is a re-bind there;
     * a re-bind to a privileged port or the network is not */
    snprintf(body, sizeof body, "{\"name\":\"ok\",\"listen\":\"127.0.0.2:0\",\"upstream\":\"%s\"}",
             g_upstream);
    cr_assert_eq(call("POST", "/proxies", body, 1, &r), 201);
    int port = port_of(r);
    json_decref(r);
    cr_assert_eq(call("POST", "/proxies/ok", "{\"listen\":\"127.0.0.1:80\"}", 1, &r), 403);
    expect_error(r, "below 1024");
    json_decref(r);
    cr_assert_eq(call("PATCH", "/proxies/ok", "{\"listen\":\"0.0.0.0:0\"}", 1, &r), 403);
    json_decref(r);
    /* IPv6 loopback is loopback */
    snprintf(body, sizeof body, "{\"name\":\"ok6\",\"listen\":\"[::1]:0\",\"upstream\":\"%s\"}", g_upstream);
    cr_assert_eq(call("POST", "/proxies", body, 1, &r), 201);
    cr_assert(strncmp(json_string_value(json_object_get(r, "listen")), "[::1]:", 6) == 0,
              "listen shown as [::1]:PORT");
    json_decref(r);
    cr_assert_eq(call("GET", "/proxies", NULL, 1, &r), 200);
    cr_assert_eq(json_object_size(r), 3, "up, ok and ok6 only");
    cr_assert_eq(port_of(json_object_get(r, "ok")), port, "ok was not moved");
    json_decref(r);
    stop();

    /* an operator who wants proxies on the network says so */
    const char *allow[] = {"--toxiproxy-listen-allow", "0.0.0.0", NULL};
    start("compatw", allow);
    snprintf(body, sizeof body, "{\"name\":\"wide\",\"listen\":\"0.0.0.0:0\",\"upstream\":\"%s\"}",
             g_upstream);
    cr_assert_eq(call("POST", "/proxies", body, 1, &r), 201);
    json_decref(r);
    snprintf(body, sizeof body, "{\"name\":\"wide80\",\"listen\":\"0.0.0.0:80\",\"upstream\":\"%s\"}",
             g_upstream);
    cr_assert_eq(call("POST", "/proxies", body, 1, &r), 403, "still no port below 1024");
    json_decref(r);
    snprintf(body, sizeof body, "{\"name\":\"wide6\",\"listen\":\"[::]:0\",\"upstream\":\"%s\"}", g_upstream);
    cr_assert_eq(call("POST", "/proxies", body, 1, &r), 403, "0.0.0.0 allows no IPv6 wildcard");
    json_decref(r);
    stop();

    const char *allow6[] = {"--toxiproxy-listen-allow", "::", NULL};
    start("compatw6", allow6);
    cr_assert_eq(call("POST", "/proxies", body, 1, &r), 201, "allowed with --toxiproxy-listen-allow ::");
    json_decref(r);
    stop();
}

/* A raw POST /proxies with the given Authorization header line. */
static int create_with(const char *auth, const char *name, char *out, size_t outlen)
{
    char body[256], head[1024];
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"%s\"}", name,
             g_upstream);
    snprintf(head, sizeof head,
             "POST /proxies HTTP/1.1\r\nHost: %s\r\n%s\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\nConnection: close",
             g_ag.url + strlen("http://"), auth, strlen(body));
    return ag_raw(&g_ag, head, body, out, outlen, 5000);
}

/* How a Toxiproxy client passes the token: Bearer always; in compat mode
 * also as the password of Basic auth (any user name). */
Test(agent_compat, the_token_as_bearer_or_basic_password)
{
    char out[4096];
    start("compatb", NULL);
    cr_assert_eq(create_with("Authorization: Bearer " AG_TOKEN, "b1", out, sizeof out), 201, "%s", out);
    cr_assert_eq(create_with("Authorization: Basic " BASIC_OK, "b2", out, sizeof out), 201, "%s", out);
    cr_assert_eq(create_with("Authorization: basic " BASIC_OK, "b3", out, sizeof out), 201,
                 "scheme any case");
    cr_assert_eq(create_with("Authorization: Basic " BASIC_WRONG, "b4", out, sizeof out), 401, "%s", out);
    cr_assert_eq(create_with("Authorization: Basic aXQtdG9rZW4tN2YzYTljMmU1MQ==", "b5", out, sizeof out), 401,
                 "the token without a user and colon");
    cr_assert_eq(
        create_with("Authorization: Basic dG94aXByb3h5Oml0LXRva2VuLTdmM2E5YzJlNTE", "b6", out, sizeof out),
        401, "unpadded");
    cr_assert_eq(
        create_with("Authorization: Basic dG94aXByb3h5Oml0LXRva2VuLTdmM2E5YzJlNTE=x", "b7", out, sizeof out),
        401, "trailing garbage");
    /* the v1 API keeps to Bearer */
    char head[1024];
    snprintf(head, sizeof head,
             "POST /v1/halt HTTP/1.1\r\nHost: %s\r\nAuthorization: Basic " BASIC_OK
             "\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close",
             g_ag.url + strlen("http://"));
    cr_assert_eq(ag_raw(&g_ag, head, "{}", out, sizeof out, 5000), 401, "%s", out);
    json_t *r = NULL;
    cr_assert_eq(call("GET", "/proxies", NULL, 1, &r), 200);
    cr_assert_eq(json_object_size(r), 4, "up, b1, b2 and b3");
    json_decref(r);
    stop();

    /* without --toxiproxy-compat: Bearer only */
    ag_echo_start(&g_echo);
    snprintf(g_upstream, sizeof g_upstream, "127.0.0.1:%d", g_echo.port);
    ag_start(&g_ag, "compatnb", NULL, NULL, NULL);
    cr_assert_eq(create_with("Authorization: Basic " BASIC_OK, "c1", out, sizeof out), 401, "%s", out);
    cr_assert_eq(create_with("Authorization: Bearer " AG_TOKEN, "c2", out, sizeof out), 201, "%s", out);
    stop();
}

/* --toxiproxy-listen-allow takes IPv4 and IPv6 addresses only (no names:
 * what is allowed cannot change under a name; no brackets), at most 8. */
Test(agent_compat, listen_allow_flag_is_checked)
{
    char *dir = it_mkdtemp("compatf");
    const char *cases[][2] = {{"0.0.0.0", "0"},     {"10.0.0.7", "0"},   {"example.com", "64"},
                              {"10.0.0.300", "64"}, {"::", "0"},         {"fd00::7", "0"},
                              {"[::1]", "64"},      {"fd00::7::1", "64"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *args[] = {"agent",
                              "--check",
                              "--id",
                              "chk",
                              "--state-dir",
                              dir,
                              "--token-file",
                              "/nonexistent",
                              "--toxiproxy-listen-allow",
                              cases[k][0],
                              "--",
                              "sleep",
                              "1",
                              NULL};
        pid_t pid = it_start(dir, "check", args, NULL);
        int st = it_wait_exit(pid, 15000);
        cr_assert(st >= 0 && WIFEXITED(st), "--check exited");
        cr_assert_eq(WEXITSTATUS(st), atoi(cases[k][1]), "--toxiproxy-listen-allow %s", cases[k][0]);
    }
    const char *nine[32] = {"agent",       "--check", "--id",         "chk",
                            "--state-dir", dir,       "--token-file", "/nonexistent"};
    int n = 8;
    for (int i = 0; i < 9; i++) {
        nine[n++] = "--toxiproxy-listen-allow";
        nine[n++] = "10.0.0.1";
    }
    nine[n++] = "--";
    nine[n++] = "sleep";
    nine[n] = NULL;
    int st = it_wait_exit(it_start(dir, "check9", nine, NULL), 15000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 64, "a ninth address is a usage error");
    free(dir);
}
