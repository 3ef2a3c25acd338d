/* test_agent_net.c - the network fault kinds on a real agent's TCP proxy,
 * checked from outside with an echo server behind the proxy (round trip,
 * throughput, integrity, refusals), each reverted by expiry or DELETE; and
 * the Toxiproxy-compatible API: toxics become registered faults, the token
 * rule (compat mode included), /reset. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent_it.h"

static ag_echo g_echo;
static ag g_ag;
static int g_port;

static void start(const char *tag, int compat)
{
    ag_echo_start(&g_echo);
    static char proxy[128];
    snprintf(proxy, sizeof proxy, "up=127.0.0.1:0->127.0.0.1:%d", g_echo.port);
    const char *plain[] = {"--proxy", proxy, NULL};
    const char *tp[] = {"--proxy", proxy, "--toxiproxy-compat", "--max-duration-ms", "20000", NULL};
    ag_start(&g_ag, tag, compat ? tp : plain, NULL, NULL);
    ag_wait_running(&g_ag, 5000);
    g_port = ag_proxy_port(&g_ag, "up");
}

static void fini(void)
{
    ag_cleanup_all();
}

TestSuite(agent_net, .fini = fini, .timeout = 60);

/* Apply body, run check while active, then revert (DELETE or expiry) and
 * require a clean echo afterwards. */
static char g_id[32];

static void apply(const char *body)
{
    json_t *f = ag_fault(&g_ag, body);
    snprintf(g_id, sizeof g_id, "%s", js(f, "id"));
    cr_assert_str_eq(js(f, "state"), "active");
    cr_assert_gt(json_object_size(json_object_get(f, "evidence")), 0, "evidence for %s", body);
    json_decref(f);
}

static void healed(void)
{
    long rtt = ag_echo_rtt(g_port, 1000, 2000);
    cr_assert_geq(rtt, 0, "echo intact after revert");
    cr_assert_lt(rtt, 500, "no delay left after revert (%ld ms)", rtt);
}

Test(agent_net, every_network_kind_from_outside)
{
    start("net", 0);
    long base = ag_echo_rtt(g_port, 1000, 2000);
    cr_assert_geq(base, 0, "echo through the proxy");

    if (ag_has_type(&g_ag, "latency")) {
        apply("{\"type\":\"latency\",\"duration_ms\":20000,\"target\":\"up\",\"params\":{\"latency\":250,"
              "\"direction\":\"downstream\"}}");
        long rtt = ag_echo_rtt(g_port, 100, 3000);
        cr_assert_geq(rtt, 230, "latency toxic delays the echo (%ld ms)", rtt);
        ag_delete(&g_ag, g_id);
        healed();
    }
    if (ag_has_type(&g_ag, "bandwidth")) {
        /* 150 KB back at 300 KB/s takes >= ~0.5 s. */
        apply("{\"type\":\"bandwidth\",\"duration_ms\":20000,\"params\":{\"rate\":300,"
              "\"direction\":\"downstream\"}}");
        long rtt = ag_echo_rtt(g_port, 150000, 10000);
        cr_assert_geq(rtt, 400, "bandwidth toxic caps throughput (%ld ms for 150 KB)", rtt);
        ag_delete(&g_ag, g_id);
        healed();
    }
    if (ag_has_type(&g_ag, "blackhole")) {
        apply("{\"type\":\"blackhole\",\"duration_ms\":700}");
        cr_assert_lt(ag_echo_rtt(g_port, 100, 300), 0, "blackhole swallows bytes");
        cr_assert(ag_wait_fault(&g_ag, g_id, "expired", 3000));
        healed();
    }
    if (ag_has_type(&g_ag, "limit_data")) {
        apply("{\"type\":\"limit_data\",\"duration_ms\":20000,\"params\":{\"bytes\":10,"
              "\"direction\":\"downstream\"}}");
        int fd = ag_connect(g_port);
        cr_assert_geq(fd, 0);
        char buf[100] = {0};
        cr_assert_eq(send(fd, buf, sizeof buf, MSG_NOSIGNAL), (ssize_t)sizeof buf);
        size_t got = ag_recv_n(fd, buf, sizeof buf, 1000);
        close(fd);
        cr_assert_leq(got, 10, "limit_data lets at most 10 bytes through (%zu)", got);
        ag_delete(&g_ag, g_id);
        healed();
    }
    if (ag_has_type(&g_ag, "corrupt")) {
        apply("{\"type\":\"corrupt\",\"duration_ms\":20000,\"seed\":7,\"params\":{\"probability\":0.05}}");
        cr_assert_lt(ag_echo_rtt(g_port, 4000, 1000), 0, "corrupted echo does not match");
        ag_delete(&g_ag, g_id);
        healed();
    }
    if (ag_has_type(&g_ag, "reset_peer")) {
        apply("{\"type\":\"reset_peer\",\"duration_ms\":700,\"params\":{\"timeout\":0}}");
        cr_assert_lt(ag_echo_rtt(g_port, 100, 500), 0, "reset_peer cuts the connection");
        cr_assert(ag_wait_fault(&g_ag, g_id, "expired", 3000));
        healed();
    }
    if (ag_has_type(&g_ag, "slicer")) {
        apply("{\"type\":\"slicer\",\"duration_ms\":20000,\"params\":{\"average_size\":10,\"delay\":100}}");
        cr_assert_geq(ag_echo_rtt(g_port, 1000, 3000), 0, "sliced bytes arrive intact");
        ag_delete(&g_ag, g_id);
        healed();
    }
    if (ag_has_type(&g_ag, "partition")) {
        apply("{\"type\":\"partition\",\"duration_ms\":600}");
        int fd = ag_connect(g_port);
        int refused = fd < 0 && errno == ECONNREFUSED;
        if (fd >= 0)
            close(fd);
        cr_assert(refused || ag_echo_rtt(g_port, 10, 300) < 0, "partition refuses the unit's connections");
        cr_assert(ag_wait_fault(&g_ag, g_id, "expired", 3000));
        healed();
    }
    /* Byte counters moved, per direction. */
    json_t *s = ag_status(&g_ag);
    json_t *st = json_object_get(json_array_get(json_object_get(s, "proxies"), 0), "stats");
    cr_assert_gt(json_integer_value(json_object_get(st, "bytes_up")), 150000);
    cr_assert_gt(json_integer_value(json_object_get(st, "bytes_down")), 150000);
    json_decref(s);
    ag_stop(&g_ag);
    ag_echo_stop(&g_echo);
}

Test(agent_net, toxiproxy_api_toxics_are_registered_faults)
{
    start("toxiproxy", 1);
    int st = 0;
    /* With the token, as every mutating call (compat mode too). */
    json_t *t = ag_call(&g_ag, "POST", "/proxies/up/toxics",
                        "{\"name\":\"slow\",\"type\":\"latency\",\"stream\":\"downstream\",\"toxicity\":1,"
                        "\"attributes\":{\"latency\":250,\"jitter\":0}}",
                        1, &st);
    cr_assert_eq(st, 200, "toxic create -> %d", st);
    cr_assert_str_eq(js(t, "name"), "slow");
    json_decref(t);
    long rtt = ag_echo_rtt(g_port, 100, 3000);
    cr_assert_geq(rtt, 230, "toxic delays (%ld ms)", rtt);

    json_t *fl = ag_call(&g_ag, "GET", "/v1/faults", NULL, 1, &st);
    json_t *f0 = json_array_get(json_object_get(fl, "faults"), 0);
    cr_assert_str_eq(js(f0, "origin"), "toxiproxy");
    cr_assert_str_eq(js(f0, "state"), "active");
    cr_assert(json_is_null(json_object_get(f0, "duration_ms")),
              "a Toxiproxy-made toxic lasts until deleted, not --max-duration-ms");
    char id[32];
    snprintf(id, sizeof id, "%s", js(f0, "id"));
    json_decref(fl);

    t = ag_call(&g_ag, "POST", "/proxies/up/toxics", "{\"name\":\"slow\",\"type\":\"latency\"}", 1, &st);
    cr_assert_eq(st, 409, "duplicate toxic name");
    json_decref(t);
    t = ag_call(&g_ag, "POST", "/proxies/up/toxics", "{\"type\":\"latency\",\"attributes\":{\"latency\":-1}}",
                1, &st);
    cr_assert_eq(st, 400);
    json_decref(t);
    t = ag_call(&g_ag, "POST", "/proxies/nope/toxics", "{\"type\":\"latency\"}", 1, &st);
    cr_assert_eq(st, 404);
    json_decref(t);

    t = ag_call(&g_ag, "GET", "/proxies", NULL, 1, &st);
    cr_assert_eq(st, 200);
    cr_assert_eq(json_array_size(json_object_get(json_object_get(t, "up"), "toxics")), 1);
    json_decref(t);

    /* DELETE through Toxiproxy reverts the registered fault. */
    json_decref(ag_call(&g_ag, "DELETE", "/proxies/up/toxics/slow", NULL, 1, &st));
    cr_assert_eq(st, 204);
    char state[32], reason[32];
    ag_fault_state(&g_ag, id, state, sizeof state, reason, sizeof reason);
    cr_assert_str_eq(state, "reverted");
    cr_assert_str_eq(reason, "delete");
    healed();

    /* Halt reverts toxics made through Toxiproxy too; /reset clears state. */
    json_decref(ag_call(&g_ag, "POST", "/proxies/up/toxics",
                        "{\"type\":\"latency\",\"attributes\":{\"latency\":250}}", 1, &st));
    cr_assert_eq(st, 200);
    json_decref(ag_call(&g_ag, "POST", "/v1/halt", NULL, 1, &st));
    cr_assert_eq(st, 200);
    healed();
    t = ag_call(&g_ag, "GET", "/proxies/up/toxics", NULL, 1, &st);
    cr_assert_eq(json_array_size(t), 0, "halt removed the toxic");
    json_decref(t);
    json_decref(ag_call(&g_ag, "POST", "/proxies/up/toxics", "{\"type\":\"latency\"}", 1, &st));
    cr_assert_eq(st, 503, "halted agent refuses Toxiproxy toxics too");
    json_decref(ag_call(&g_ag, "POST", "/v1/resume", NULL, 1, &st));

    /* enabled=false is a fault as well; /reset reverts it. */
    t = ag_call(&g_ag, "POST", "/proxies/up", "{\"enabled\":false}", 1, &st);
    cr_assert_eq(st, 200);
    cr_assert(json_is_false(json_object_get(t, "enabled")));
    json_decref(t);
    cr_assert_lt(ag_echo_rtt(g_port, 10, 300), 0, "disabled proxy relays nothing");
    json_decref(ag_call(&g_ag, "POST", "/reset", NULL, 1, &st));
    cr_assert_eq(st, 204);
    healed();
    json_t *s = ag_status(&g_ag);
    cr_assert_eq(json_integer_value(json_object_get(s, "faults_active")), 0);
    json_decref(s);
    ag_stop(&g_ag);
    ag_echo_stop(&g_echo);
}

/* The token on every mutating Toxiproxy call, with --toxiproxy-compat or
 * without (issue 28: a local process without it could re-point the unit's
 * link and receive the learner's credential). */
static void needs_the_token(int compat)
{
    start(compat ? "tpauthc" : "tpauth", compat);
    int st = 0;
    json_decref(ag_call(&g_ag, "POST", "/proxies/up/toxics", "{\"type\":\"latency\"}", 0, &st));
    cr_assert_eq(st, 401);
    json_decref(ag_call(&g_ag, "POST", "/reset", NULL, 0, &st));
    cr_assert_eq(st, 401);
    json_decref(ag_call(&g_ag, "POST", "/proxies/up/toxics", "{\"type\":\"latency\"}", 1, &st));
    cr_assert_eq(st, 200, "with the token it works");
    json_t *t = ag_call(&g_ag, "GET", "/proxies/up/toxics", NULL, 1, &st);
    cr_assert_eq(st, 200, "reads need no token");
    cr_assert_eq(json_array_size(t), 1);
    json_decref(t);
    ag_stop(&g_ag);
    ag_echo_stop(&g_echo);
}

Test(agent_net, toxiproxy_api_needs_the_token_without_compat)
{
    needs_the_token(0);
}

Test(agent_net, toxiproxy_api_needs_the_token_in_compat_mode)
{
    needs_the_token(1);
}
