/* test_proxy.c - the TCP proxy and its toxics, on loopback, in-process.
 * Timing tolerances are stated next to each assertion; they are generous
 * because this runs under ASan on a shared 2-core box.
 */
#include "injectors/proxy/proxy.h"

#include "common/err.h"
#include "support_proxy_net.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdatomic.h>

static echo_srv srv;
static proxy *px;
static char errbuf[CX_ERRLEN];

static void setup(void)
{
    cr_assert_eq(echo_start(&srv), 0);
    px = proxy_new("test", "127.0.0.1:0", srv.addr, errbuf, sizeof errbuf);
    cr_assert_not_null(px, "proxy_new: %s", errbuf);
}

static void teardown(void)
{
    proxy_free(px);
    px = NULL;
    echo_stop(&srv);
}

static void add_toxic(const char *json, uint64_t seed)
{
    json_error_t je;
    json_t *j = json_loads(json, 0, &je);
    cr_assert_not_null(j, "bad test JSON: %s", je.text);
    int rc = proxy_toxic_add(px, j, seed, NULL, errbuf, sizeof errbuf);
    json_decref(j);
    cr_assert_eq(rc, 0, "toxic_add(%s): %s", json, errbuf);
}

static int try_add(const char *json, char *err, size_t errlen)
{
    json_t *j = json_loads(json, 0, NULL);
    cr_assert_not_null(j);
    int rc = proxy_toxic_add(px, j, 1, NULL, err, errlen);
    json_decref(j);
    return rc;
}

/* One request/response round trip of n bytes; returns ms. */
static double ping(int fd, size_t n)
{
    unsigned char buf[4096] = {0}, back[4096];
    cr_assert(n <= sizeof buf);
    double t0 = tp_now_ms();
    cr_assert_eq(tp_send_all(fd, buf, n), 0);
    cr_assert_eq(tp_recv_n(fd, back, n), n);
    return tp_now_ms() - t0;
}

/* ---- byte-exact delivery ---- */

TestSuite(proxy, .init = setup, .fini = teardown, .timeout = 60);

/* n bytes (pattern seed) sent through the proxy come back from the echo
 * server complete and unchanged. */
static void expect_exact_echo(size_t n, uint64_t seed)
{
    int same = 0;
    cr_assert_eq(tp_echo_transfer(proxy_listen_addr(px), n, seed, &same), n, "%zu bytes", n);
    cr_assert(same, "bytes differ");
}

Test(proxy, passthrough_exact_no_toxics)
{
    size_t n = 4u << 20;
    expect_exact_echo(n, 1);
    proxy_stats s;
    for (int i = 0; i < 200; i++) { /* counters settle once the loop closed the link */
        proxy_stats_get(px, &s);
        if (s.conns_open == 0)
            break;
        usleep(5000);
    }
    cr_assert_eq(s.bytes_up, n);
    cr_assert_eq(s.bytes_down, n);
    cr_assert_eq(s.conns_accepted, 1);
    cr_assert_eq(s.conns_open, 0);
}

Test(proxy, passthrough_exact_latency)
{
    add_toxic("{\"type\":\"latency\",\"stream\":\"upstream\",\"attributes\":{\"latency\":5,\"jitter\":3}}",
              7);
    add_toxic("{\"type\":\"latency\",\"attributes\":{\"latency\":5}}", 7);
    size_t n = 2u << 20;
    expect_exact_echo(n, 2);
    proxy_toxic_stats ts;
    cr_assert_eq(proxy_toxic_stats_get(px, "latency_downstream", &ts), 0);
    cr_assert_eq(ts.bytes, n);
    cr_assert_eq(ts.links_applied, 1);
}

Test(proxy, passthrough_exact_bandwidth)
{
    add_toxic("{\"type\":\"bandwidth\",\"stream\":\"downstream\",\"attributes\":{\"rate\":20000}}", 7);
    expect_exact_echo(2u << 20, 3);
}

Test(proxy, passthrough_exact_slicer)
{
    add_toxic("{\"type\":\"slicer\",\"stream\":\"upstream\",\"attributes\":"
              "{\"average_size\":700,\"size_variation\":300,\"delay\":0}}",
              7);
    size_t n = 1u << 20;
    expect_exact_echo(n, 4);
    proxy_toxic_stats ts;
    cr_assert_eq(proxy_toxic_stats_get(px, "slicer_upstream", &ts), 0);
    /* 1 MiB in pieces of 400..1000 bytes */
    cr_assert(ts.chunks >= n / 1000 && ts.chunks <= n / 400 + 64, "chunks %llu",
              (unsigned long long)ts.chunks);
}

typedef struct churn_arg {
    atomic_int stop;
    int rounds;
} churn_arg;

static void *churn_main(void *arg)
{
    churn_arg *c = arg;
    static const char *const toxics[] = {
        "{\"name\":\"l\",\"type\":\"latency\",\"stream\":\"upstream\",\"attributes\":{\"latency\":2,"
        "\"jitter\":2}}",
        "{\"name\":\"s\",\"type\":\"slicer\",\"stream\":\"downstream\",\"attributes\":{\"average_size\":500,"
        "\"size_variation\":100,\"delay\":50}}",
        "{\"name\":\"b\",\"type\":\"bandwidth\",\"stream\":\"upstream\",\"attributes\":{\"rate\":30000}}",
        "{\"name\":\"n\",\"type\":\"noop\",\"stream\":\"downstream\",\"toxicity\":0.5}",
    };
    char err[CX_ERRLEN];
    while (!atomic_load(&c->stop) && c->rounds < 400) {
        int k = c->rounds % 4;
        json_t *j = json_loads(toxics[k], 0, NULL);
        proxy_toxic_add(px, j, (uint64_t)c->rounds, NULL, err, sizeof err);
        json_decref(j);
        usleep(200 + (unsigned)(c->rounds % 5) * 150);
        if (c->rounds % 3 != 0)
            proxy_toxic_remove(px, (const char *[]){"l", "s", "b", "n"}[k], err, sizeof err);
        if (c->rounds % 7 == 0) { /* all of them go, back to the fast path */
            for (int i = 0; i < 4; i++)
                proxy_toxic_remove(px, (const char *[]){"l", "s", "b", "n"}[i], err, sizeof err);
        }
        c->rounds++;
    }
    return NULL;
}

Test(proxy, exact_while_toxics_added_and_removed)
{
    churn_arg c = {.rounds = 0};
    pthread_t th;
    pthread_create(&th, NULL, churn_main, &c);
    size_t total = 0;
    double t0 = tp_now_ms();
    /* several links so that changes hit every phase; bounded: 60 transfers, 20 s */
    for (int i = 0; i < 60 && (i < 4 || (c.rounds < 200 && tp_now_ms() - t0 < 20000.0)); i++) {
        int same = 0;
        size_t n = (1u << 20) + (size_t)i * 12345;
        cr_assert_eq(tp_echo_transfer(proxy_listen_addr(px), n, 10 + (uint64_t)i, &same), n, "transfer %d",
                     i);
        cr_assert(same, "transfer %d: bytes differ", i);
        total += n;
    }
    atomic_store(&c.stop, 1);
    pthread_join(th, NULL);
    cr_assert(c.rounds >= 50, "churn made only %d rounds", c.rounds);
    cr_log_info("churn rounds: %d over %zu bytes", c.rounds, total);
}

/* ---- latency ---- */

Test(proxy, latency_added_delay_within_tolerance)
{
    int fd = tp_connect(proxy_listen_addr(px));
    cr_assert(fd >= 0);
    double base = 1e9;
    for (int i = 0; i < 5; i++) {
        double t = ping(fd, 64);
        base = t < base ? t : base;
    }
    add_toxic("{\"type\":\"latency\",\"stream\":\"downstream\",\"attributes\":{\"latency\":60}}", 1);
    double added[9];
    for (int i = 0; i < 9; i++) {
        added[i] = ping(fd, 64) - base;
        /* never early: tolerance -2 ms (timer and clock granularity) */
        cr_assert(added[i] >= 58.0, "added %.2f ms, configured 60", added[i]);
        /* a single late sample may be the loop waiting for a core: +100 ms */
        cr_assert(added[i] <= 160.0, "added %.2f ms, configured 60", added[i]);
    }
    close(fd);
    for (int i = 0; i < 9; i++) /* sort for the median */
        for (int j = i + 1; j < 9; j++)
            if (added[j] < added[i]) {
                double t = added[i];
                added[i] = added[j];
                added[j] = t;
            }
    /* the median within +15 ms of the configured latency */
    cr_assert(added[4] <= 75.0, "median added %.2f ms, configured 60", added[4]);
}

Test(proxy, latency_does_not_accumulate)
{
    add_toxic("{\"type\":\"latency\",\"stream\":\"downstream\",\"attributes\":{\"latency\":80}}", 1);
    int fd = tp_connect(proxy_listen_addr(px));
    cr_assert(fd >= 0);
    /* 50 small messages back to back: each is delayed 80 ms from its own
     * arrival, so all arrive ~80 ms after sending, not 50 x 80 ms. */
    unsigned char msg[100] = {0}, back[100 * 50];
    double t_last = 0;
    for (int i = 0; i < 50; i++) {
        t_last = tp_now_ms();
        cr_assert_eq(tp_send_all(fd, msg, sizeof msg), 0);
        usleep(1000);
    }
    cr_assert_eq(tp_recv_n(fd, back, sizeof back), sizeof back);
    double tail = tp_now_ms() - t_last;
    /* the last message arrives 80 ms after it was sent (tolerance -2/+100
     * ms); accumulated delays would make it 50 x 80 ms = 4 s */
    cr_assert(tail >= 78.0 && tail <= 180.0, "last message after %.1f ms", tail);
    close(fd);
}

/* ---- bandwidth ---- */

Test(proxy, bandwidth_rate_within_25_percent)
{
    add_toxic("{\"type\":\"bandwidth\",\"stream\":\"downstream\",\"attributes\":{\"rate\":1000}}", 1);
    int same = 0;
    size_t n = 1500000; /* 1.5 s at 1000 KB/s */
    double t0 = tp_now_ms();
    cr_assert_eq(tp_echo_transfer(proxy_listen_addr(px), n, 5, &same), n);
    double secs = (tp_now_ms() - t0) / 1e3;
    cr_assert(same);
    double rate_kbps = (double)n / 1000.0 / secs;
    cr_assert(rate_kbps >= 750.0 && rate_kbps <= 1250.0, "achieved %.1f KB/s, configured 1000", rate_kbps);
}

/* ---- blackhole, timeout, limit_data, reset_peer, slow_close ---- */

Test(proxy, blackhole_drops_and_keeps_link)
{
    add_toxic(
        "{\"name\":\"bh\",\"type\":\"timeout\",\"stream\":\"downstream\",\"attributes\":{\"timeout\":0}}", 1);
    int fd = tp_connect(proxy_listen_addr(px));
    cr_assert(fd >= 0);
    cr_assert_eq(tp_send_all(fd, "hello", 5), 0);
    cr_assert_eq(tp_wait_readable(fd, 300), 0, "blackhole let data (or EOF) through");
    proxy_toxic_stats ts;
    for (int i = 0; i < 100 && (proxy_toxic_stats_get(px, "bh", &ts), ts.bytes_dropped < 5); i++)
        usleep(5000);
    cr_assert_eq(ts.bytes_dropped, 5);
    /* removed: the link still works (dropped bytes stay dropped) */
    cr_assert_eq(proxy_toxic_remove(px, "bh", errbuf, sizeof errbuf), 0);
    cr_assert(ping(fd, 32) < 5000);
    close(fd);
}

Test(proxy, timeout_closes_link)
{
    add_toxic("{\"type\":\"timeout\",\"stream\":\"downstream\",\"attributes\":{\"timeout\":150}}", 1);
    int fd = tp_connect(proxy_listen_addr(px));
    cr_assert(fd >= 0);
    double t0 = tp_now_ms();
    char c;
    ssize_t r = recv(fd, &c, 1, 0);
    double dt = tp_now_ms() - t0;
    cr_assert_eq(r, 0, "expected EOF, got %zd (%s)", r, strerror(errno));
    cr_assert(dt >= 140.0 && dt <= 2000.0, "closed after %.1f ms, configured 150", dt);
    close(fd);
}

Test(proxy, limit_data_closes_after_bytes)
{
    add_toxic("{\"type\":\"limit_data\",\"stream\":\"downstream\",\"attributes\":{\"bytes\":1000}}", 1);
    int fd = tp_connect(proxy_listen_addr(px));
    cr_assert(fd >= 0);
    unsigned char out[4000] = {1}, back[4001];
    cr_assert_eq(tp_send_all(fd, out, sizeof out), 0);
    size_t got = tp_recv_n(fd, back, sizeof back); /* stops at EOF */
    cr_assert_eq(got, 1000);
    close(fd);
}

Test(proxy, reset_peer_sends_rst)
{
    add_toxic("{\"type\":\"reset_peer\",\"stream\":\"upstream\",\"attributes\":{\"timeout\":50}}", 1);
    int fd = tp_connect(proxy_listen_addr(px));
    cr_assert(fd >= 0);
    cr_assert_eq(tp_send_all(fd, "x", 1), 0);
    char c;
    ssize_t r = recv(fd, &c, 1, 0);
    cr_assert(r < 0 && errno == ECONNRESET, "expected ECONNRESET, got %zd (%s)", r, strerror(errno));
    proxy_stats s;
    proxy_stats_get(px, &s);
    cr_assert_eq(s.conns_reset, 1);
    close(fd);
}

Test(proxy, slow_close_delays_eof)
{
    add_toxic("{\"type\":\"slow_close\",\"stream\":\"downstream\",\"attributes\":{\"delay\":300}}", 1);
    int fd = tp_connect(proxy_listen_addr(px));
    cr_assert(fd >= 0);
    cr_assert_eq(ping(fd, 10) < 1000, 1);
    double t0 = tp_now_ms();
    shutdown(fd, SHUT_WR);
    char c;
    cr_assert_eq(recv(fd, &c, 1, 0), 0);
    double dt = tp_now_ms() - t0;
    cr_assert(dt >= 290.0 && dt <= 2000.0, "EOF after %.1f ms, configured 300", dt);
    close(fd);
}

/* ---- partition, enabled, upstream ---- */

Test(proxy, partition_refuses_and_drops)
{
    int fd = tp_connect(proxy_listen_addr(px));
    cr_assert(fd >= 0);
    ping(fd, 16);
    proxy_partition_hold(px);
    cr_assert(proxy_partitioned(px));
    char c;
    ssize_t r = recv(fd, &c, 1, 0);
    cr_assert(r < 0 && errno == ECONNRESET, "open link: expected RST, got %zd (%s)", r, strerror(errno));
    close(fd);
    cr_assert_eq(tp_connect(proxy_listen_addr(px)), -1);
    cr_assert_eq(errno, ECONNREFUSED);
    proxy_partition_hold(px); /* overlapping second partition */
    proxy_partition_release(px);
    cr_assert_eq(tp_connect(proxy_listen_addr(px)), -1, "still partitioned by the other hold");
    proxy_partition_release(px);
    proxy_partition_release(px); /* extra release is harmless */
    cr_assert_not(proxy_partitioned(px));
    fd = tp_connect(proxy_listen_addr(px)); /* same address again */
    cr_assert(fd >= 0, "connect after partition: %s", strerror(errno));
    cr_assert(ping(fd, 16) < 5000);
    close(fd);
    proxy_stats s;
    proxy_stats_get(px, &s);
    cr_assert_eq(s.conns_dropped, 1);
}

Test(proxy, disabled_refuses)
{
    cr_assert_eq(proxy_set_enabled(px, false, errbuf, sizeof errbuf), 0);
    cr_assert_eq(tp_connect(proxy_listen_addr(px)), -1);
    cr_assert_eq(errno, ECONNREFUSED);
    json_t *j = proxy_json(px);
    cr_assert(json_is_false(json_object_get(j, "enabled")));
    json_decref(j);
    proxy_reset(px);
    int fd = tp_connect(proxy_listen_addr(px));
    cr_assert(fd >= 0);
    close(fd);
}

/* Toxiproxy closes a client whose upstream refused with a FIN: the client
 * reads EOF, never a reset, even when it sent bytes first. */
Test(proxy, upstream_refused_closes_with_fin)
{
    echo_stop(&srv); /* nothing listens upstream now */
    for (int i = 0; i < 20; i++) {
        int fd = tp_connect(proxy_listen_addr(px));
        cr_assert(fd >= 0);
        cr_assert_eq(tp_send_all(fd, "hello", 5), 0);
        char c;
        ssize_t r = recv(fd, &c, 1, 0);
        cr_assert_eq(r, 0, "probe %d: expected EOF, got %zd (%s)", i, r, r < 0 ? strerror(errno) : "data");
        close(fd);
    }
    proxy_stats s;
    for (int i = 0; i < 200 && (proxy_stats_get(px, &s), s.conns_refused < 20); i++)
        usleep(5000);
    cr_assert_eq(s.conns_refused, 20);
    cr_assert_eq(s.upstream_errors, 20);
    cr_assert_eq(echo_start(&srv), 0); /* for teardown; new port */
    cr_assert_eq(proxy_set_upstream(px, srv.addr, errbuf, sizeof errbuf), 0);
    int fd = tp_connect(proxy_listen_addr(px));
    cr_assert(fd >= 0);
    cr_assert(ping(fd, 8) < 5000);
    close(fd);
}

/* A proxy created disabled shows the listen it was given until it
 * listens (Toxiproxy); enabling shows the bound address. */
Test(proxy, disabled_proxy_echoes_listen_as_given)
{
    cr_assert_eq(proxy_set_enabled(px, false, errbuf, sizeof errbuf), 0);
    proxy_set_listen_echo(px, "localhost:0");
    json_t *j = proxy_json(px);
    cr_assert_str_eq(json_string_value(json_object_get(j, "listen")), "localhost:0");
    json_decref(j);
    cr_assert_eq(proxy_set_enabled(px, true, errbuf, sizeof errbuf), 0);
    j = proxy_json(px);
    cr_assert_str_eq(json_string_value(json_object_get(j, "listen")), proxy_listen_addr(px));
    json_decref(j);
    proxy_set_listen_echo(px, "localhost:0"); /* enabled: no echo */
    j = proxy_json(px);
    cr_assert_str_eq(json_string_value(json_object_get(j, "listen")), proxy_listen_addr(px));
    json_decref(j);
}

/* ---- toxicity ---- */

/* Links of nlinks whose first round trip took at least min_ms. A delay is
 * a lower bound on any machine; "not delayed" is only judged against a
 * toxic far longer than a loaded machine's loopback round trip. */
static int delayed_links(int nlinks, double min_ms)
{
    int delayed = 0;
    for (int i = 0; i < nlinks; i++) {
        int fd = tp_connect(proxy_listen_addr(px));
        cr_assert(fd >= 0);
        if (ping(fd, 8) >= min_ms)
            delayed++;
        close(fd);
    }
    return delayed;
}

Test(proxy, toxicity_zero_never_one_always)
{
    /* 5 s: a skipped link answers far sooner even under load; an applied one cannot */
    add_toxic("{\"name\":\"t0\",\"type\":\"latency\",\"toxicity\":0,\"attributes\":{\"latency\":5000}}", 9);
    cr_assert_eq(delayed_links(6, 2500.0), 0);
    proxy_toxic_stats ts;
    proxy_toxic_stats_get(px, "t0", &ts);
    cr_assert_eq(ts.links_skipped, 6);
    cr_assert_eq(ts.links_applied, 0);
    cr_assert_eq(proxy_toxic_remove(px, "t0", errbuf, sizeof errbuf), 0);
    proxy_stats s; /* a new toxic applies to open links too: let the old ones close */
    for (int i = 0; i < 400 && (proxy_stats_get(px, &s), s.conns_open > 0); i++)
        usleep(5000);
    cr_assert_eq(s.conns_open, 0);
    add_toxic("{\"name\":\"t1\",\"type\":\"latency\",\"toxicity\":1,\"attributes\":{\"latency\":150}}", 9);
    cr_assert_eq(delayed_links(4, 140.0), 4);
    proxy_toxic_stats_get(px, "t1", &ts);
    cr_assert_eq(ts.links_applied, 4);
}

Test(proxy, toxicity_half_is_seeded_per_link)
{
    add_toxic("{\"name\":\"h\",\"type\":\"noop\",\"toxicity\":0.5}", 1234);
    for (int i = 0; i < 40; i++) {
        int fd = tp_connect(proxy_listen_addr(px));
        cr_assert(fd >= 0);
        ping(fd, 4);
        close(fd);
    }
    proxy_toxic_stats ts;
    proxy_toxic_stats_get(px, "h", &ts);
    cr_assert_eq(ts.links_applied + ts.links_skipped, 40);
    /* deterministic for the seed; a fair coin puts 40 draws in 8..32 with
     * probability 1 - 1e-4 */
    cr_assert(ts.links_applied >= 8 && ts.links_applied <= 32, "applied %llu of 40",
              (unsigned long long)ts.links_applied);
}

/* ---- corrupt ---- */

static void corrupt_run(uint64_t seed, unsigned char *out, size_t n, uint64_t *flipped)
{
    echo_srv s2;
    cr_assert_eq(echo_start(&s2), 0);
    proxy *q = proxy_new("corrupt", "127.0.0.1:0", s2.addr, errbuf, sizeof errbuf);
    cr_assert_not_null(q);
    json_t *j = json_loads("{\"name\":\"c\",\"type\":\"corrupt\",\"stream\":\"upstream\","
                           "\"attributes\":{\"probability\":0.001}}",
                           0, NULL);
    cr_assert_eq(proxy_toxic_add(q, j, seed, NULL, errbuf, sizeof errbuf), 0, "%s", errbuf);
    json_decref(j);
    unsigned char *in = malloc(n);
    tp_fill_random(in, n, 99);
    int fd = tp_connect(proxy_listen_addr(q));
    cr_assert(fd >= 0);
    /* several sends of odd sizes: flips must not depend on chunking */
    for (size_t off = 0; off < n;) {
        size_t k = n - off < 7777 ? n - off : 7777;
        cr_assert_eq(tp_send_all(fd, in + off, k), 0);
        off += k;
    }
    cr_assert_eq(tp_recv_n(fd, out, n), n);
    close(fd);
    proxy_toxic_stats ts;
    proxy_toxic_stats_get(q, "c", &ts);
    *flipped = ts.bits_flipped;
    size_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff += (size_t)__builtin_popcount((unsigned)(in[i] ^ out[i]));
    cr_assert_eq(diff, *flipped, "bits differing %zu, counter %llu", diff, (unsigned long long)*flipped);
    free(in);
    proxy_free(q);
    echo_stop(&s2);
}

Test(proxy, corrupt_is_deterministic_per_seed)
{
    size_t n = 100000; /* 800000 bits at 0.001: ~800 flips */
    unsigned char *a = malloc(n), *b = malloc(n), *c = malloc(n);
    uint64_t fa, fb, fc;
    corrupt_run(42, a, n, &fa);
    corrupt_run(42, b, n, &fb);
    corrupt_run(43, c, n, &fc);
    cr_assert_eq(fa, fb);
    cr_assert(memcmp(a, b, n) == 0, "same seed, different corruption");
    cr_assert(memcmp(a, c, n) != 0, "different seeds, same corruption");
    /* binomial(800000, 0.001): mean 800, sd 28; +-25% is > 7 sd */
    cr_assert(fa >= 600 && fa <= 1000, "flipped %llu bits", (unsigned long long)fa);
    free(a);
    free(b);
    free(c);
}

/* ---- toxic JSON ---- */

Test(proxy, bad_toxic_json_names_the_field)
{
    struct {
        const char *json;
        const char *field;
    } cases[] = {
        {"{\"type\":\"earthquake\"}", "toxic.type"},
        {"{\"type\":\"latency\",\"attributes\":{\"latency\":10,\"lag\":3}}", "toxic.attributes.lag"},
        {"{\"type\":\"latency\",\"attributes\":{\"latency\":-5}}", "toxic.attributes.latency"},
        {"{\"type\":\"bandwidth\",\"attributes\":{\"rate\":0}}", "toxic.attributes.rate"},
        {"{\"type\":\"bandwidth\"}", "toxic.attributes.rate"},
        {"{\"type\":\"latency\",\"toxicity\":1.5}", "toxic.toxicity"},
        {"{\"type\":\"latency\",\"toxicity\":-0.1}", "toxic.toxicity"},
        {"{\"type\":\"latency\",\"stream\":\"sideways\"}", "toxic.stream"},
        {"{\"type\":\"latency\",\"color\":\"red\"}", "color"},
        {"{\"type\":\"latency\",\"attributes\":{\"latency\":\"10\"}}", "toxic.attributes.latency"},
        {"{\"type\":\"latency\",\"attributes\":{\"latency\":1.5}}", "toxic.attributes.latency"},
        {"{\"type\":\"slicer\",\"attributes\":{\"average_size\":10,\"size_variation\":10}}",
         "toxic.attributes.size_variation"},
        {"{\"type\":\"corrupt\",\"attributes\":{\"probability\":2}}", "toxic.attributes.probability"},
        {"{\"name\":\"a b\",\"type\":\"noop\"}", "toxic.name"},
        {"[1,2]", "toxic"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[CX_ERRLEN] = "";
        cr_assert_eq(try_add(cases[i].json, err, sizeof err), CX_EINVAL, "%s accepted", cases[i].json);
        cr_assert(strstr(err, cases[i].field) != NULL, "%s: error '%s' does not name %s", cases[i].json, err,
                  cases[i].field);
        json_t *j = json_loads(cases[i].json, 0, NULL);
        cr_assert_eq(proxy_toxic_validate(j, err, sizeof err), CX_EINVAL);
        json_decref(j);
    }
    json_t *t = proxy_toxics_json(px);
    cr_assert_eq(json_array_size(t), 0, "a rejected toxic was stored");
    json_decref(t);
}

Test(proxy, toxic_json_defaults_update_remove)
{
    json_t *out = NULL;
    json_t *j = json_loads("{\"type\":\"latency\",\"attributes\":{\"latency\":100}}", 0, NULL);
    cr_assert_eq(proxy_toxic_add(px, j, 1, &out, errbuf, sizeof errbuf), 0);
    cr_assert_str_eq(json_string_value(json_object_get(out, "name")), "latency_downstream");
    cr_assert_str_eq(json_string_value(json_object_get(out, "stream")), "downstream");
    cr_assert_float_eq(json_number_value(json_object_get(out, "toxicity")), 1.0, 1e-9);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(out, "attributes"), "jitter")), 0);
    json_decref(out);
    char err[CX_ERRLEN];
    cr_assert_eq(proxy_toxic_add(px, j, 1, NULL, err, sizeof err), CX_ECONFLICT);
    json_decref(j);

    j = json_loads("{\"attributes\":{\"jitter\":7},\"toxicity\":0.25}", 0, NULL);
    cr_assert_eq(proxy_toxic_update(px, "latency_downstream", j, &out, errbuf, sizeof errbuf), 0, "%s",
                 errbuf);
    json_t *a = json_object_get(out, "attributes");
    cr_assert_eq(json_integer_value(json_object_get(a, "latency")), 100, "update must merge attributes");
    cr_assert_eq(json_integer_value(json_object_get(a, "jitter")), 7);
    cr_assert_float_eq(json_number_value(json_object_get(out, "toxicity")), 0.25, 1e-9);
    json_decref(out);
    cr_assert_eq(proxy_toxic_update(px, "nope", j, NULL, err, sizeof err), CX_ENOTFOUND);
    json_decref(j);
    j = json_loads("{\"type\":\"bandwidth\"}", 0, NULL);
    cr_assert_eq(proxy_toxic_update(px, "latency_downstream", j, NULL, err, sizeof err), CX_EINVAL);
    json_decref(j);
    j = json_loads("{\"attributes\":{\"latency\":-1}}", 0, NULL);
    cr_assert_eq(proxy_toxic_update(px, "latency_downstream", j, NULL, err, sizeof err), CX_EINVAL);
    json_decref(j);

    json_t *pj = proxy_json(px);
    cr_assert_str_eq(json_string_value(json_object_get(pj, "name")), "test");
    cr_assert_str_eq(json_string_value(json_object_get(pj, "listen")), proxy_listen_addr(px));
    cr_assert_str_eq(json_string_value(json_object_get(pj, "upstream")), srv.addr);
    cr_assert(json_is_true(json_object_get(pj, "enabled")));
    cr_assert_eq(json_array_size(json_object_get(pj, "toxics")), 1);
    json_decref(pj);

    cr_assert_eq(proxy_toxic_remove(px, "latency_downstream", err, sizeof err), 0);
    cr_assert_eq(proxy_toxic_remove(px, "latency_downstream", err, sizeof err), CX_ENOTFOUND);
    cr_assert_null(proxy_toxic_json(px, "latency_downstream"));
}

Test(proxy, new_rejects_bad_arguments)
{
    char err[CX_ERRLEN];
    cr_assert_null(proxy_new("bad name", "127.0.0.1:0", srv.addr, err, sizeof err));
    cr_assert(strstr(err, "name") != NULL);
    cr_assert_null(proxy_new("x", "127.0.0.1:99999", srv.addr, err, sizeof err));
    cr_assert_null(proxy_new("x", "127.0.0.1:0", "nohostport", err, sizeof err));
    cr_assert(strstr(err, "upstream") != NULL, "%s", err);
    /* malformed names are refused at once; only well-formed ones wait */
    cr_assert_null(proxy_new("x", "127.0.0.1:0", "bad host:80", err, sizeof err));
    cr_assert(strstr(err, "upstream") && strstr(err, "bad host"), "%s", err);
    cr_assert_null(proxy_new("x", "127.0.0.1:0", "[::1:80", err, sizeof err));
    cr_assert(strstr(err, "upstream") != NULL, "%s", err);
    cr_assert_null(proxy_new("x", "nosuch.invalid:0", srv.addr, err, sizeof err));
    cr_assert(strstr(err, "listen: cannot resolve") != NULL, "%s", err);
    cr_assert_eq(proxy_set_upstream(px, "bad host:80", err, sizeof err), CX_EINVAL);
    /* a port in use */
    char busy[64];
    snprintf(busy, sizeof busy, "%s", proxy_listen_addr(px));
    cr_assert_null(proxy_new("x", busy, srv.addr, err, sizeof err));
}

/* Expect EOF (a refused link) on a client of addr that sent a byte. */
static void expect_refused(const char *addr, int i)
{
    int fd = tp_connect(addr);
    cr_assert(fd >= 0, "connect %s: %s", addr, strerror(errno));
    cr_assert_eq(tp_send_all(fd, "x", 1), 0);
    char c;
    ssize_t r = recv(fd, &c, 1, 0);
    cr_assert_eq(r, 0, "probe %d: expected EOF, got %zd (%s)", i, r, r < 0 ? strerror(errno) : "data");
    close(fd);
}

/* An upstream whose name does not resolve is no error at creation: the
 * proxy listens, refuses each client cleanly (EOF, counted) and keeps
 * listening; pointed at a name that resolves, it relays. */
Test(proxy, upstream_name_that_does_not_resolve_refuses_clients)
{
    char up[128];
    snprintf(up, sizeof up, "syncer.nosuch.invalid:%d", srv.port);
    proxy *late = proxy_new("late", "127.0.0.1:0", up, errbuf, sizeof errbuf);
    cr_assert_not_null(late, "proxy_new: %s", errbuf);
    for (int i = 0; i < 5; i++)
        expect_refused(proxy_listen_addr(late), i);
    proxy_stats s;
    for (int i = 0; i < 400 && (proxy_stats_get(late, &s), s.conns_refused < 5); i++)
        usleep(5000);
    cr_assert_eq(s.conns_refused, 5);
    cr_assert_eq(s.conns_accepted, 0);
    snprintf(up, sizeof up, "localhost:%d", srv.port);
    cr_assert_eq(proxy_set_upstream(late, up, errbuf, sizeof errbuf), 0, "%s", errbuf);
    int same = 0;
    cr_assert_eq(tp_echo_transfer(proxy_listen_addr(late), 4096, 3, &same), 4096);
    cr_assert(same);
    proxy_free(late);
}

/* IPv6: a proxy listening on [::1] relays to an upstream on [::1] (given
 * as a literal) byte for byte, and names its listen address with
 * brackets. */
Test(proxy, listens_and_relays_over_ipv6)
{
    echo_srv s6;
    cr_assert_eq(echo_start_family(&s6, 1), 0, "echo on [::1]: %s", strerror(errno));
    proxy *p6 = proxy_new("v6", "[::1]:0", s6.addr, errbuf, sizeof errbuf);
    cr_assert_not_null(p6, "proxy_new: %s", errbuf);
    cr_assert(strncmp(proxy_listen_addr(p6), "[::1]:", 6) == 0, "%s", proxy_listen_addr(p6));
    int same = 0;
    cr_assert_eq(tp_echo_transfer(proxy_listen_addr(p6), 100000, 5, &same), 100000);
    cr_assert(same);
    proxy_free(p6);
    echo_stop(&s6);
}

/* "[::]" listens for both families (IPV6_V6ONLY off); an IPv4 upstream
 * behind it. */
Test(proxy, ipv6_wildcard_takes_ipv4_clients)
{
    proxy *any = proxy_new("any", "[::]:0", srv.addr, errbuf, sizeof errbuf);
    cr_assert_not_null(any, "proxy_new: %s", errbuf);
    const char *bound = proxy_listen_addr(any);
    cr_assert(strncmp(bound, "[::]:", 5) == 0, "%s", bound);
    char a[64];
    const char *fam[] = {"127.0.0.1:%s", "[::1]:%s"};
    for (int i = 0; i < 2; i++) {
        snprintf(a, sizeof a, fam[i], bound + 5);
        int same = 0;
        cr_assert_eq(tp_echo_transfer(a, 1000, 7, &same), 1000, "%s", a);
        cr_assert(same, "%s", a);
    }
    proxy_free(any);
}
