/* test_toxic.c - toxic stages stacked on one direction, as Toxiproxy
 * chains them (each toxic's output is the next one's input, in the order
 * they were added). The stages are pure functions of arrival times, bytes
 * and the seed, so these tests feed chunks with chosen times through
 * toxic_inst_run and check the ready times exactly: no sockets, no clock.
 * test_proxy.c and the Toxiproxy client tests (tests/e2e/toxiproxy,
 * integration/test_agent_toxiproxy.c) check the same rules through real
 * links.
 */
#include "injectors/proxy/toxic.h"

#include "common/err.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define MS INT64_C(1000000)
#define T0 (INT64_C(1000) * MS) /* an arbitrary start on the monotonic clock */
#define MAX_STAGES 4

typedef struct chain {
    toxic_inst st[MAX_STAGES];
    toxic_counters ctr[MAX_STAGES];
    int n;
} chain;

/* Append a stage parsed from Toxiproxy JSON, started at now on link 1. */
static void stage(chain *c, const char *json, int64_t now)
{
    cr_assert(c->n < MAX_STAGES);
    json_error_t je;
    json_t *j = json_loads(json, 0, &je);
    cr_assert_not_null(j, "bad test JSON: %s", je.text);
    toxic_spec s;
    char err[CX_ERRLEN] = "";
    cr_assert_eq(toxic_spec_parse(j, &s, err, sizeof err), 0, "%s: %s", json, err);
    json_decref(j);
    memset(&c->ctr[c->n], 0, sizeof c->ctr[c->n]);
    toxic_inst_init(&c->st[c->n], (uint64_t)c->n + 1, &s, 7, 1, now, &c->ctr[c->n]);
    c->n++;
}

/* Run one chunk read at t through every stage in order; out gets what
 * leaves the last one. */
static void feed(chain *c, chunk_kind kind, size_t len, int64_t t, chunk_list *out)
{
    chunk_list a = {0}, b = {0};
    chunk *x = chunk_new(kind, NULL, len, t, t);
    cr_assert_not_null(x);
    if (kind == CHUNK_DATA)
        memset(x->data, 0x5a, len);
    chunk_list_push(&a, x);
    for (int i = 0; i < c->n; i++) {
        cr_assert(toxic_inst_run(&c->st[i], &a, &b, t));
        a = b;
        b = (chunk_list){0};
    }
    for (chunk *y; (y = chunk_list_pop(&a));)
        chunk_list_push(out, y);
}

static size_t list_bytes(const chunk_list *l)
{
    size_t n = 0;
    for (const chunk *c = l->head; c; c = c->next)
        n += c->kind == CHUNK_DATA ? c->len - c->off : 0;
    return n;
}

static bool list_has(const chunk_list *l, chunk_kind k)
{
    for (const chunk *c = l->head; c; c = c->next)
        if (c->kind == k)
            return true;
    return false;
}

TestSuite(toxic, .timeout = 30);

/* Toxiproxy: the latency stage sleeps its delay from the chunk's
 * timestamp and moves the timestamp on, so stacked latencies add up. */
Test(toxic, stacked_latency_adds_up)
{
    chain c = {0};
    stage(&c, "{\"name\":\"a\",\"type\":\"latency\",\"attributes\":{\"latency\":100}}", T0);
    stage(&c, "{\"name\":\"b\",\"type\":\"latency\",\"attributes\":{\"latency\":100}}", T0);
    stage(&c, "{\"name\":\"c\",\"type\":\"latency\",\"attributes\":{\"latency\":30}}", T0);
    chunk_list out = {0};
    feed(&c, CHUNK_DATA, 64, T0, &out);
    cr_assert_eq(out.head->ready_ns - T0, 230 * MS, "ready after %lld ns, expected 230 ms",
                 (long long)(out.head->ready_ns - T0));
    /* back-to-back chunks are each delayed from their own arrival: the
     * delays do not pile up behind one another */
    for (int i = 1; i <= 20; i++)
        feed(&c, CHUNK_DATA, 64, T0 + i * MS, &out);
    cr_assert_eq(out.tail->ready_ns - T0, (20 + 230) * MS);
    chunk_list_clear(&out);
}

/* Latency after bandwidth counts from the chunk's arrival (Toxiproxy's
 * bandwidth toxic keeps the timestamp): the time it already waited for the
 * wire is not added again. Bandwidth after latency paces from when the
 * latency released it. */
Test(toxic, latency_and_bandwidth_in_either_order)
{
    chain bw_then_lat = {0};
    stage(&bw_then_lat, "{\"name\":\"bw\",\"type\":\"bandwidth\",\"attributes\":{\"rate\":100}}", T0);
    stage(&bw_then_lat, "{\"name\":\"lat\",\"type\":\"latency\",\"attributes\":{\"latency\":50}}", T0);
    chunk_list out = {0};
    feed(&bw_then_lat, CHUNK_DATA, 20000, T0, &out); /* 200 ms of wire at 100 KB/s */
    cr_assert_eq(out.tail->ready_ns - T0, 200 * MS, "max(200, 50) ms, got %lld ns",
                 (long long)(out.tail->ready_ns - T0));
    chunk_list_clear(&out);

    chain lat_then_bw = {0};
    stage(&lat_then_bw, "{\"name\":\"lat\",\"type\":\"latency\",\"attributes\":{\"latency\":50}}", T0);
    stage(&lat_then_bw, "{\"name\":\"bw\",\"type\":\"bandwidth\",\"attributes\":{\"rate\":100}}", T0);
    feed(&lat_then_bw, CHUNK_DATA, 20000, T0, &out);
    cr_assert_eq(out.tail->ready_ns - T0, 250 * MS, "50 + 200 ms, got %lld ns",
                 (long long)(out.tail->ready_ns - T0));
    chunk_list_clear(&out);
}

/* Two bandwidth toxics: the slower wire sets the pace, whichever comes
 * first. */
Test(toxic, stacked_bandwidth_takes_the_minimum)
{
    const char *fast = "{\"name\":\"fast\",\"type\":\"bandwidth\",\"attributes\":{\"rate\":1000}}";
    const char *slow = "{\"name\":\"slow\",\"type\":\"bandwidth\",\"attributes\":{\"rate\":250}}";
    for (int order = 0; order < 2; order++) {
        chain c = {0};
        stage(&c, order ? slow : fast, T0);
        stage(&c, order ? fast : slow, T0);
        chunk_list out = {0};
        /* 100 KB in 10 reads: 400 ms at 250 KB/s (100 ms at 1000 KB/s) */
        for (int i = 0; i < 10; i++)
            feed(&c, CHUNK_DATA, 10000, T0, &out);
        cr_assert_eq(list_bytes(&out), 100000);
        int64_t took = out.tail->ready_ns - T0;
        /* the fast stage's last piece may leave up to one of its pieces
         * (100 ms of its wire = 10 ms of the slow one) late */
        cr_assert(took >= 400 * MS && took <= 410 * MS, "order %d: 100 KB took %lld ns, expected 400 ms",
                  order, (long long)took);
        chunk_list_clear(&out);
    }
}

/* Two limit_data toxics: the link closes at the smaller limit. */
Test(toxic, stacked_limit_data_takes_the_minimum)
{
    chain c = {0};
    stage(&c, "{\"name\":\"big\",\"type\":\"limit_data\",\"attributes\":{\"bytes\":5000}}", T0);
    stage(&c, "{\"name\":\"small\",\"type\":\"limit_data\",\"attributes\":{\"bytes\":1500}}", T0);
    chunk_list out = {0};
    for (int i = 0; i < 4; i++)
        feed(&c, CHUNK_DATA, 1000, T0 + i * MS, &out);
    cr_assert_eq(list_bytes(&out), 1500);
    cr_assert(list_has(&out, CHUNK_CLOSE));
    cr_assert_eq(c.ctr[1].closes, 1);
    chunk_list_clear(&out);
}

/* Two slow_close toxics: Toxiproxy's stage waits its delay once the close
 * reaches it, so the delays add up. */
Test(toxic, stacked_slow_close_adds_up)
{
    chain c = {0};
    stage(&c, "{\"name\":\"a\",\"type\":\"slow_close\",\"attributes\":{\"delay\":200}}", T0);
    stage(&c, "{\"name\":\"b\",\"type\":\"slow_close\",\"attributes\":{\"delay\":300}}", T0);
    chunk_list out = {0};
    feed(&c, CHUNK_DATA, 10, T0, &out);
    feed(&c, CHUNK_EOF, 0, T0 + 10 * MS, &out);
    cr_assert_eq(out.head->ready_ns, T0, "data is not held");
    cr_assert_eq(out.tail->kind, CHUNK_EOF);
    cr_assert_eq(out.tail->ready_ns - T0, 510 * MS);
    chunk_list_clear(&out);
}

/* Two timeout toxics: each starts its clock with the link; the earlier
 * one closes it. Latency then slicer: the pieces keep the latency. */
Test(toxic, stacked_timeout_earliest_and_slicer_keeps_latency)
{
    chain c = {0};
    stage(&c, "{\"name\":\"late\",\"type\":\"timeout\",\"attributes\":{\"timeout\":900}}", T0);
    stage(&c, "{\"name\":\"early\",\"type\":\"timeout\",\"attributes\":{\"timeout\":300}}", T0);
    int64_t first = INT64_MAX;
    for (int i = 0; i < c.n; i++)
        if (c.st[i].timer == TOXIC_TIMER_CLOSE && c.st[i].timer_ns < first)
            first = c.st[i].timer_ns;
    cr_assert_eq(first - T0, 300 * MS);

    chain d = {0};
    stage(&d, "{\"name\":\"lat\",\"type\":\"latency\",\"attributes\":{\"latency\":40}}", T0);
    stage(&d,
          "{\"name\":\"sl\",\"type\":\"slicer\",\"attributes\":{\"average_size\":100,\"size_variation\":0,"
          "\"delay\":1000}}",
          T0);
    chunk_list out = {0};
    feed(&d, CHUNK_DATA, 1000, T0, &out);
    int n = 0;
    for (chunk *x = out.head; x; x = x->next, n++)
        cr_assert_eq(x->ready_ns - T0, 40 * MS + n * MS, "piece %d at %lld ns", n,
                     (long long)(x->ready_ns - T0));
    cr_assert_eq(n, 10);
    chunk_list_clear(&out);
}
