/* The HTTP server wrapper and client together on 127.0.0.1. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/http_client.h"
#include "common/http_server.h"
#include "common/json.h"

static int h_echo(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    json_t *body;
    if (cx_http_body_json(req, resp, 0, &body) != 0)
        return CX_EINVAL;
    const char *name = NULL;
    char err[256];
    if (cx_json_unpack(body, "body", err, sizeof err, "{s:s}", "name", &name) != 0) {
        json_decref(body);
        cx_http_reply_error(resp, 400, "%s", err);
        return CX_EINVAL;
    }
    const char *q = cx_http_query(req, "x");
    cx_http_reply_json(resp, 200, json_pack("{s:s,s:s,s:s?}", "name", name, "param", req->params[0], "x", q));
    json_decref(body);
    return 0;
}

static int h_secret(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    if (cx_http_check_bearer(req, "s3cret") != 0)
        return CX_EAUTH;
    cx_http_add_header(resp, "X-Version", "%d", 7);
    cx_http_reply_text(resp, 200, "text/plain", "ok");
    return 0;
}

/* ---- streamed responses ---- */

static atomic_int streams_done; /* done() calls so far */

typedef struct test_stream {
    int sent;  /* chunks so far */
    int count; /* chunks before the end; < 0: never ends */
} test_stream;

/* "chunk N\n" count times, then the end; a stream that never ends sends a
 * chunk every 50 ms. */
static long ts_read(void *ctx, char *buf, size_t max)
{
    test_stream *t = ctx;
    if (t->count >= 0 && t->sent >= t->count)
        return CX_HTTP_STREAM_END;
    if (t->count < 0)
        cx_sleep_ms(50);
    int n = snprintf(buf, max, "chunk %d\n", t->sent++);
    return n > 0 && (size_t)n < max ? n : CX_HTTP_STREAM_ERROR;
}

static void ts_done(void *ctx)
{
    free(ctx);
    atomic_fetch_add(&streams_done, 1);
}

/* GET /stream/{count}: count chunks, or endless for "forever". */
static int h_stream(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    test_stream *t = calloc(1, sizeof *t);
    if (!t)
        return CX_ENOMEM;
    t->count = strcmp(req->params[0], "forever") == 0 ? -1 : atoi(req->params[0]);
    cx_http_reply_stream(resp, 200, "text/event-stream",
                         (cx_http_stream){.read = ts_read, .done = ts_done, .ctx = t});
    cx_http_add_header(resp, "X-Stream", "yes");
    return 0;
}

static const cx_http_route routes[] = {
    {"POST", "/v1/things/{}/echo", h_echo},
    {"GET", "/secret", h_secret},
    {"GET", "/stream/{}", h_stream},
};

static cx_http_server *srv;
static char base[64];

static void setup(void)
{
    char err[256];
    srv = cx_http_server_new("127.0.0.1:0", routes, sizeof routes / sizeof *routes, NULL, 1024, err,
                             sizeof err);
    cr_assert_not_null(srv, "%s", err);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", cx_http_server_port(srv));
}

static void teardown(void)
{
    cx_http_server_free(srv);
}

TestSuite(http, .init = setup, .fini = teardown, .timeout = 30);

/* method path through c, with body (len bytes, JSON) when body is not
 * NULL: an answer must come back; its status (body and headers in *r). */
static int request(cx_http_client *c, const char *method, const char *path, const char *body, size_t len,
                   cx_http_result *r)
{
    cr_assert_eq(
        cx_http_do(c, method, path, NULL, body, len, body ? "application/json" : NULL, 0, r, NULL, 0), 0,
        "%s %s: no answer", method, path);
    return r->status;
}

Test(http, routes_params_query_strict_json)
{
    cx_http_client *c = cx_http_client_new(base, NULL);
    json_t *in = json_pack("{s:s}", "name", "ada"), *out = NULL;
    int status;
    cr_assert_eq(cx_http_json(c, "POST", "/v1/things/42/echo?x=y", in, &status, &out, NULL, 0), 0);
    cr_assert_eq(status, 200);
    cr_assert_str_eq(json_string_value(json_object_get(out, "param")), "42");
    cr_assert_str_eq(json_string_value(json_object_get(out, "x")), "y");
    json_decref(out);
    json_decref(in);

    in = json_pack("{s:s,s:i}", "name", "ada", "bogus", 1);
    cr_assert_eq(cx_http_json(c, "POST", "/v1/things/42/echo", in, &status, &out, NULL, 0), 0);
    cr_assert_eq(status, 400);
    cr_assert(strstr(json_string_value(json_object_get(out, "error")), "bogus"), "unknown key named");
    cr_assert_eq(json_integer_value(json_object_get(out, "status")), 400);
    json_decref(out);
    json_decref(in);

    cx_http_result r;
    cx_http_result_init(&r);
    cr_assert_eq(request(c, "POST", "/v1/things/1/echo", "{not json", 9, &r), 400);
    cr_assert(strstr(r.body.data, "invalid JSON"));
    cr_assert_eq(request(c, "GET", "/v1/things/1/echo", NULL, 0, &r), 405);
    cr_assert_eq(request(c, "GET", "/nope", NULL, 0, &r), 404);
    char big[2000];
    memset(big, ' ', sizeof big);
    cr_assert_eq(request(c, "POST", "/v1/things/1/echo", big, sizeof big, &r), 413);
    cx_http_result_cleanup(&r);
    cx_http_client_free(c);
}

Test(http, bearer_and_headers)
{
    cx_http_client *anon = cx_http_client_new(base, NULL);
    cx_http_opts o = {.bearer = "s3cret"};
    cx_http_client *auth = cx_http_client_new(base, &o);
    o.bearer = "s3creX";
    cx_http_client *wrong = cx_http_client_new(base, &o);
    cx_http_result r;
    cx_http_result_init(&r);
    cr_assert_eq(request(anon, "GET", "/secret", NULL, 0, &r), 401);
    cr_assert_eq(request(wrong, "GET", "/secret", NULL, 0, &r), 401);
    cr_assert_eq(request(auth, "GET", "/secret", NULL, 0, &r), 200);
    cr_assert_str_eq(r.body.data, "ok");
    char v[32];
    cr_assert_eq(cx_http_result_header(&r, "x-version", v, sizeof v), 0);
    cr_assert_str_eq(v, "7");
    /* every answer forbids framing by another origin */
    char csp[64];
    cr_assert_eq(cx_http_result_header(&r, "Content-Security-Policy", csp, sizeof csp), 0);
    cr_assert_str_eq(csp, "frame-ancestors 'none'");
    cr_assert_eq(cx_http_result_header(&r, "X-Frame-Options", v, sizeof v), 0);
    cr_assert_str_eq(v, "DENY");
    cx_http_result_cleanup(&r);
    cx_http_client_free(anon);
    cx_http_client_free(auth);
    cx_http_client_free(wrong);
}

Test(http, client_retries_then_reports_unreachable)
{
    /* a port nobody listens on: bind the server, note the port, free it */
    cx_http_opts o = {.retries = 2, .backoff_ms = 20, .connect_timeout_ms = 200};
    cx_http_client *c = cx_http_client_new("http://127.0.0.1:1", &o);
    cx_http_result r;
    cx_http_result_init(&r);
    char err[256];
    int64_t t0 = cx_mono_ms();
    int rc = cx_http_do(c, "GET", "/", NULL, NULL, 0, NULL, 0, &r, err, sizeof err);
    int64_t dt = cx_mono_ms() - t0;
    cr_assert_eq(rc, CX_EUNAVAIL, "%s", err);
    cr_assert(dt >= 60 - 5, "backoff 20+40 ms waited (took %lld ms)", (long long)dt);
    cx_http_result_cleanup(&r);
    cx_http_client_free(c);
}

Test(http, stream_sends_chunks_until_it_ends)
{
    int before = atomic_load(&streams_done);
    cx_http_client *c = cx_http_client_new(base, NULL);
    cx_http_result r;
    cx_http_result_init(&r);
    cr_assert_eq(request(c, "GET", "/stream/3", NULL, 0, &r), 200);
    cr_assert_str_eq(r.body.data, "chunk 0\nchunk 1\nchunk 2\n");
    char v[64];
    cr_assert_eq(cx_http_result_header(&r, "Content-Type", v, sizeof v), 0);
    cr_assert_str_eq(v, "text/event-stream");
    cr_assert_eq(cx_http_result_header(&r, "X-Stream", v, sizeof v), 0);
    cr_assert_eq(cx_http_result_header(&r, "Cache-Control", v, sizeof v), 0);
    cr_assert_str_eq(v, "no-store");
    /* done runs once the connection is over, which may trail the answer */
    for (int i = 0; i < 100 && atomic_load(&streams_done) == before; i++)
        cx_sleep_ms(10);
    cr_assert_eq(atomic_load(&streams_done), before + 1, "done ran once");
    cx_http_result_cleanup(&r);
    cx_http_client_free(c);
}

typedef struct stream_reader {
    char base[64];
    int rc; /* cx_http_do's */
    cx_http_result r;
} stream_reader;

static void *read_forever(void *arg)
{
    stream_reader *sr = arg;
    cx_http_opts o = {.timeout_ms = 20000};
    cx_http_client *c = cx_http_client_new(sr->base, &o);
    sr->rc = cx_http_do(c, "GET", "/stream/forever", NULL, NULL, 0, NULL, 0, &sr->r, NULL, 0);
    cx_http_client_free(c);
    return NULL;
}

Test(http, stream_ends_when_the_server_stops)
{
    char err[256];
    cx_http_server *s2 = cx_http_server_new("127.0.0.1:0", routes, sizeof routes / sizeof *routes, NULL, 1024,
                                            err, sizeof err);
    cr_assert_not_null(s2, "%s", err);
    stream_reader sr = {.rc = -1};
    snprintf(sr.base, sizeof sr.base, "http://127.0.0.1:%d", cx_http_server_port(s2));
    cx_http_result_init(&sr.r);
    int before = atomic_load(&streams_done);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, read_forever, &sr), 0);
    /* wait until the stream is open and has sent a few chunks */
    cx_http_guard_stats st;
    for (int i = 0; i < 200; i++) {
        cx_http_guard_get_stats(cx_http_server_guard(s2), &st);
        if (st.in_request > 0)
            break;
        cx_sleep_ms(10);
    }
    cx_sleep_ms(200);
    int64_t t0 = cx_mono_ms();
    cx_http_server_free(s2);
    int64_t took = cx_mono_ms() - t0;
    pthread_join(th, NULL);
    cr_assert_lt(took, 3000, "the stop waited %lld ms for an endless stream", (long long)took);
    cr_assert_eq(atomic_load(&streams_done), before + 1, "done ran once");
    cr_assert_eq(sr.rc, 0, "the client got an answer");
    cr_assert_eq(sr.r.status, 200);
    cr_assert(strstr(sr.r.body.data ? sr.r.body.data : "", "chunk 1\n"), "chunks arrived before the stop");
    cx_http_result_cleanup(&sr.r);
}

/* The bound address is the socket's own: the wildcard stays 0.0.0.0 (what
 * the agent's and the syncer's "listening on" lines print), a named
 * address stays itself, and the port is the one really bound. */
Test(http, bound_names_the_socket_address)
{
    char err[256], want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", cx_http_server_port(srv));
    cr_assert_str_eq(cx_http_server_bound(srv), want);
    cx_http_server *any =
        cx_http_server_new("0.0.0.0:0", routes, sizeof routes / sizeof *routes, NULL, 1024, err, sizeof err);
    cr_assert_not_null(any, "%s", err);
    cr_assert_gt(cx_http_server_port(any), 0);
    snprintf(want, sizeof want, "0.0.0.0:%d", cx_http_server_port(any));
    cr_assert_str_eq(cx_http_server_bound(any), want);
    cx_http_server_free(any);
}

/* IPv6: a server on [::1] answers over IPv6 loopback and names itself
 * with brackets; one on [::] takes IPv4 clients too (dual stack); a name
 * is refused with the family named. */
Test(http, listens_on_ipv6_and_dual_stack)
{
    char err[256], want[64], url[96];
    cx_http_server *v6 =
        cx_http_server_new("[::1]:0", routes, sizeof routes / sizeof *routes, NULL, 1024, err, sizeof err);
    cr_assert_not_null(v6, "%s", err);
    snprintf(want, sizeof want, "[::1]:%d", cx_http_server_port(v6));
    cr_assert_str_eq(cx_http_server_bound(v6), want);
    snprintf(url, sizeof url, "http://%s", want);
    cx_http_client *c = cx_http_client_new(url, NULL);
    json_t *in = json_pack("{s:s}", "name", "ada"), *out = NULL;
    int status = 0;
    cr_assert_eq(cx_http_json(c, "POST", "/v1/things/6/echo", in, &status, &out, NULL, 0), 0);
    cr_assert_eq(status, 200);
    cr_assert_str_eq(json_string_value(json_object_get(out, "param")), "6");
    json_decref(out);
    out = NULL;
    cx_http_client_free(c);
    cx_http_server_free(v6);

    cx_http_server *any =
        cx_http_server_new("[::]:0", routes, sizeof routes / sizeof *routes, NULL, 1024, err, sizeof err);
    cr_assert_not_null(any, "%s", err);
    snprintf(want, sizeof want, "[::]:%d", cx_http_server_port(any));
    cr_assert_str_eq(cx_http_server_bound(any), want);
    const char *fam[] = {"http://127.0.0.1:%d", "http://[::1]:%d"};
    for (int i = 0; i < 2; i++) {
        snprintf(url, sizeof url, fam[i], cx_http_server_port(any));
        c = cx_http_client_new(url, NULL);
        cr_assert_eq(cx_http_json(c, "POST", "/v1/things/7/echo", in, &status, &out, NULL, 0), 0, "%s", url);
        cr_assert_eq(status, 200, "%s", url);
        json_decref(out);
        out = NULL;
        cx_http_client_free(c);
    }
    cx_http_server_free(any);
    json_decref(in);

    cr_assert_null(cx_http_server_new("example.com:0", routes, 1, NULL, 1024, err, sizeof err));
    cr_assert(strstr(err, "not an IPv4 or IPv6 address"), "%s", err);
    cr_assert_null(cx_http_server_new("[::1:0", routes, 1, NULL, 1024, err, sizeof err));
    cr_assert(strstr(err, "[IPv6]:PORT"), "%s", err);
}

/* The Host-header and --listen host test: loopback names and literals of
 * both families, with or without a port; wildcards, other addresses and
 * malformed values are not loopback. */
Test(http, host_is_loopback_both_families)
{
    const char *yes[] = {"localhost", "LOCALHOST:80", "127.0.0.1", "127.3.2.1:7070",
                         "[::1]",     "[::1]:7070",   "::1",       "[::ffff:127.0.0.1]:80"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        cr_assert(cx_http_host_is_loopback(yes[i]), "%s", yes[i]);
    const char *no[] = {"0.0.0.0",  "::",   "[::]:80", "10.0.0.1:80",     "[fe80::1]:80",
                        "::1:8080", "[::1", "[::1]x",  "evil.example:80", "127.0.0.1.evil.example",
                        ""};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        cr_assert(!cx_http_host_is_loopback(no[i]), "%s", no[i]);
}
