/* fuzz_http_request.c - libFuzzer target: our HTTP layer (common/
 * http_server.c over libmicrohttpd, the guard of common/http_guard.c) fed
 * raw bytes over a real socket.
 *
 * One in-process cx_http_server listens on 127.0.0.1 (ephemeral port) from
 * the first input to the end of the process; its route table touches every
 * part of the layer: two {} params, query and header lookups, a strict JSON
 * body, Bearer and Basic checks, a streamed answer, a reserved route, and a
 * gate (Host, Content-Type, auth) with a refused hook. A 4 KiB body cap
 * puts the 413 path within reach; every request passes the guard (small
 * limits, loopback counted as a client), the reserved route its reserve.
 * Each input is the whole request (request line, headers, body; several
 * pipelined requests if it holds them): written on a fresh connection, the
 * write side shut, the answer read for at most about a second.
 * Oracles beyond the sanitizers (which see the server's threads too, same
 * process): whatever comes back starts "HTTP/1.x NNN"; a handler or the gate
 * never sees a param that is empty or holds a '/', a path that is not valid
 * UTF-8, a body over the cap or not NUL-terminated, a peer that is not
 * loopback; the refused hook only ever sees an error status and no body.
 * A violation is abort(), in whichever thread it is found.
 * What it is not: a test of libmicrohttpd's own parsing (it is not built
 * with coverage, only its answers are checked) nor of concurrent floods (one
 * connection at a time: the guard's eviction and 503 caps need several).
 * Input: raw request bytes. Seeds: generated (gen_seeds http_request),
 * seeds/http_request/. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/http_server.h"
#include "common/parse.h"
#include "fuzz_log.h"

#define FZ_BODY_MAX 4096           /* bytes: the server's body cap */
#define FZ_TOKEN "fuzz-token-0123" /* the Bearer token and the Basic password */
#define FZ_WAIT_MS 1000            /* ms: longest exchange of one input */

static cx_http_server *server;

/* A violated oracle: say which, then abort() so libFuzzer keeps the input. */
#define FZ_CHECK(cond)                                                                                       \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "fuzz_http_request: oracle failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);    \
            abort();                                                                                         \
        }                                                                                                    \
    } while (0)

/* ---- server: what every handler may rely on ---- */

/* The router's promises to a handler (and to the gate, body aside). */
static void check_req(const cx_http_req *req, int with_body)
{
    FZ_CHECK(req->path && req->path[0] == '/');
    FZ_CHECK(cx_utf8_valid(req->path, strlen(req->path)));
    FZ_CHECK(req->nparams >= 0 && req->nparams <= CX_HTTP_MAX_PARAMS);
    for (int i = 0; i < req->nparams; i++) {
        /* a C string cannot hold a NUL, so a %00 that reached here would
         * show as a param cut short: the router refuses those first */
        FZ_CHECK(req->params[i] && req->params[i][0] != '\0');
        FZ_CHECK(strchr(req->params[i], '/') == NULL);
        FZ_CHECK(strstr(req->path, req->params[i]) != NULL);
    }
    FZ_CHECK(req->body);
    FZ_CHECK(req->body_len <= FZ_BODY_MAX);
    FZ_CHECK(req->body[req->body_len] == '\0');
    if (!with_body)
        FZ_CHECK(req->body_len == 0);
    FZ_CHECK(cx_http_peer_is_loopback(req) == 1);
    FZ_CHECK(cx_http_peer_key(req) == 0x7f000001u);
}

/* GET /v1/items/{}/parts/{}: the two params echoed. */
static int h_item_part(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    check_req(req, 1);
    FZ_CHECK(req->nparams == 2);
    cx_http_reply_json(resp, 200, json_pack("{s:s,s:s}", "item", req->params[0], "part", req->params[1]));
    return 0;
}

/* GET /v1/search?q=&limit=: query arguments and headers read back. */
static int h_search(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    check_req(req, 1);
    FZ_CHECK(req->nparams == 0);
    const char *q = cx_http_query(req, "q"), *limit = cx_http_query(req, "limit");
    const char *trace = cx_http_header(req, "X-Trace"), *ua = cx_http_header(req, "User-Agent");
    int64_t n = 10;
    char why[256];
    if (limit && cx_parse_i64(limit, "limit", 1, 1000, &n, why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "%s", why);
        return CX_EINVAL;
    }
    json_t *o = json_object();
    json_object_set_new(o, "q", q ? json_stringn(q, strlen(q)) : json_null());
    json_object_set_new(o, "limit", json_integer(n));
    json_object_set_new(o, "trace", trace ? json_stringn(trace, strlen(trace)) : json_null());
    json_object_set_new(o, "ua_len", json_integer(ua ? (json_int_t)strlen(ua) : -1));
    cx_http_add_header(resp, "X-Echo-Trace", "%s",
                       trace && cx_utf8_valid(trace, strlen(trace)) ? "yes" : "no");
    cx_http_reply_json(resp, 200, o);
    return 0;
}

/* POST /v1/things: a strict JSON object body. */
static int h_things(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    check_req(req, 1);
    json_t *body;
    if (cx_http_body_json(req, resp, 0, &body) != 0) {
        FZ_CHECK(resp->status == 400 && resp->body.len > 0);
        return CX_EINVAL;
    }
    FZ_CHECK(json_is_object(body));
    cx_http_reply_json(resp, 201, json_pack("{s:I}", "keys", (json_int_t)json_object_size(body)));
    json_decref(body);
    return 0;
}

/* GET /v1/secret: Bearer only; the gate said what it saw. */
static int h_secret(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    check_req(req, 1);
    int ok = cx_http_check_bearer(req, FZ_TOKEN) == 0;
    FZ_CHECK(ok == (req->auth && strcmp(req->auth, "bearer") == 0));
    if (!ok)
        return CX_EAUTH;
    cx_http_reply_text(resp, 200, "text/plain", "secret\n");
    return 0;
}

/* GET /v1/basic: the token as a Basic password. */
static int h_basic(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    check_req(req, 1);
    if (cx_http_check_basic_password(req, FZ_TOKEN) != 0) {
        cx_http_add_header(resp, "WWW-Authenticate", "Basic realm=\"fuzz\"");
        return CX_EAUTH;
    }
    FZ_CHECK(cx_http_check_bearer(req, FZ_TOKEN) != 0); /* one Authorization header, two schemes */
    cx_http_reply_text(resp, 200, "text/plain", "basic\n");
    return 0;
}

/* The stream of GET /v1/events: three events, then the end. */
typedef struct fz_stream {
    int sent; /* events so far */
} fz_stream;

static long events_read(void *ctx, char *buf, size_t max)
{
    fz_stream *st = ctx;
    FZ_CHECK(max > 0);
    if (st->sent >= 3)
        return CX_HTTP_STREAM_END;
    int n = snprintf(buf, max, "data: {\"n\":%d}\n\n", st->sent++);
    return n > 0 ? (long)((size_t)n < max ? (size_t)n : max) : CX_HTTP_STREAM_ERROR;
}

static void events_done(void *ctx)
{
    free(ctx);
}

static int h_events(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    check_req(req, 1);
    fz_stream *st = calloc(1, sizeof *st);
    if (!st)
        return CX_ENOMEM;
    cx_http_reply_stream(resp, 200, "text/event-stream",
                         (cx_http_stream){.read = events_read, .done = events_done, .ctx = st});
    return 0;
}

/* POST /v1/halt: the reserved route, quick and small. */
static int h_halt(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    check_req(req, 1);
    cx_http_reply_json(resp, 200, json_pack("{s:b}", "halted", 1));
    return 0;
}

/* * /v1/any/{}: every method. */
static int h_any(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    check_req(req, 1);
    FZ_CHECK(req->nparams == 1);
    cx_http_reply_json(resp, 200,
                       json_pack("{s:s,s:I}", "method", req->method, "len", (json_int_t)req->body_len));
    return 0;
}

static const cx_http_route routes[] = {
    {"GET", "/v1/items/{}/parts/{}", h_item_part},
    {"GET", "/v1/search", h_search},
    {"POST", "/v1/things", h_things},
    {"GET", "/v1/secret", h_secret},
    {"GET", "/v1/basic", h_basic},
    {"GET", "/v1/events", h_events},
    {"POST", "/v1/halt", h_halt},
    {"*", "/v1/any/{}", h_any},
};

static const char *const reserved[] = {"POST /v1/halt", NULL};

/* The gate, as the agent's and the dashboard's: a loopback Host (when one
 * is sent), "X-Deny" refused, a body only as application/json, and the
 * Bearer token noted for the handler. */
static int gate_check(void *ctx, cx_http_req *req, const cx_http_route *route, cx_http_resp *resp)
{
    (void)ctx;
    check_req(req, 0);
    FZ_CHECK(route >= routes && route < routes + sizeof routes / sizeof routes[0]);
    req->auth = cx_http_check_bearer(req, FZ_TOKEN) == 0 ? "bearer" : NULL;
    const char *host = cx_http_header(req, "Host");
    if (host && !cx_http_host_is_loopback(host)) {
        cx_http_reply_error(resp, 403, "Host: not a loopback name");
        return CX_EAUTH;
    }
    if (cx_http_header(req, "X-Deny")) {
        resp->status = 200; /* the router turns a gate's non-error status into 403 */
        return CX_EAUTH;
    }
    const char *cl = cx_http_header(req, "Content-Length"), *te = cx_http_header(req, "Transfer-Encoding");
    const char *ct = cx_http_header(req, "Content-Type");
    if (((te && te[0]) || (cl && strtoll(cl, NULL, 10) != 0)) &&
        (!ct || strncmp(ct, "application/json", 16) != 0)) {
        cx_http_reply_error(resp, 415, "request bodies must be application/json");
        return CX_EINVAL;
    }
    return 0;
}

static void gate_refused(void *ctx, const cx_http_req *req, const cx_http_route *route,
                         const cx_http_resp *resp)
{
    (void)ctx;
    (void)route;
    FZ_CHECK(resp->status >= 400 && resp->status <= 599);
    FZ_CHECK(req->body && req->body_len == 0);
}

static const cx_http_gate gate = {.check = gate_check, .refused = gate_refused};

static void server_stop(void)
{
    cx_http_server_free(server);
    server = NULL;
}

static int server_start(void)
{
    static const cx_http_limits lim = {
        .conn_max = 8,
        .conn_soft = 6,
        .active_max = 4,
        .client_conn_max = 6,
        .client_active_max = 2,
        .idle_timeout_s = 2,
        .held_max_ms = 500,
        .loopback_is_client = 1,
    };
    cx_http_server_opts opts = {.limits = &lim, .reserved = reserved, .gate = &gate, .name = "fuzz"};
    char err[256];
    server = cx_http_server_new_opts("127.0.0.1:0", routes, sizeof routes / sizeof routes[0], NULL,
                                     FZ_BODY_MAX, &opts, err, sizeof err);
    if (!server) {
        fprintf(stderr, "fuzz_http_request: cannot start the server: %s\n", err);
        return -1;
    }
    atexit(server_stop);
    return 0;
}

/* ---- client: one exchange per input ---- */

/* Wait for ev on fd until the deadline; the poll revents, 0 on timeout. */
static short wait_fd(int fd, short ev, int64_t deadline_ms)
{
    int64_t left = deadline_ms - cx_mono_ms();
    if (left <= 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = ev};
    int r = poll(&p, 1, (int)left);
    return r > 0 ? p.revents : 0;
}

/* Send data on a fresh connection, shut the write side, and read the
 * answer until EOF, an error or the deadline. Keeps the first bytes of the
 * answer in head (NUL-terminated), *total all of them; *clean is 1 when the
 * server closed with a FIN. */
static void exchange(const uint8_t *data, size_t size, char *head, size_t headlen, size_t *total, int *clean)
{
    int64_t deadline = cx_mono_ms() + FZ_WAIT_MS;
    *total = 0;
    *clean = 0;
    head[0] = '\0';
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    FZ_CHECK(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cx_http_server_port(server))};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (errno != EINPROGRESS || !(wait_fd(fd, POLLOUT, deadline) & POLLOUT) ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
            close(fd);
            return;
        }
    }
    size_t off = 0;
    while (off < size) {
        ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!(wait_fd(fd, POLLOUT, deadline) & (POLLOUT | POLLERR | POLLHUP)))
                break;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            break; /* the server closed early (an answer before the body) */
        }
    }
    shutdown(fd, SHUT_WR);
    for (;;) {
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n > 0) {
            if (*total < headlen - 1) {
                size_t k = headlen - 1 - *total < (size_t)n ? headlen - 1 - *total : (size_t)n;
                memcpy(head + *total, buf, k);
                head[*total + k] = '\0';
            }
            *total += (size_t)n;
        } else if (n == 0) {
            *clean = 1;
            break;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            if (!wait_fd(fd, POLLIN, deadline))
                break;
        } else {
            break; /* reset: what arrived before it is all there is */
        }
    }
    close(fd);
}

/* "HTTP/1.x NNN": true when the first min(len, 12) bytes fit it. */
static int status_line_prefix_ok(const char *head, size_t len)
{
    static const char pat[] = "HTTP/1.d ddd";
    for (size_t i = 0; i < len && i < sizeof pat - 1; i++) {
        unsigned char c = (unsigned char)head[i];
        if (pat[i] == 'd' ? !(c >= '0' && c <= '9') : c != (unsigned char)pat[i])
            return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!server && server_start() != 0)
        abort();
    char head[64];
    size_t total;
    int clean;
    exchange(data, size, head, sizeof head, &total, &clean);
    if (total > 0) {
        size_t got = total < sizeof head - 1 ? total : sizeof head - 1;
        FZ_CHECK(status_line_prefix_ok(head, got));
        /* a whole status line when the server ended the answer itself */
        FZ_CHECK(!clean || total >= 12);
    }
    return 0;
}
