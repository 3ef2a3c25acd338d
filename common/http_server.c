/* http_server.c - routing, capped bodies, JSON errors and streamed bodies
 * over libmicrohttpd (thread-per-connection mode, see http_server.h). */
#include "common/http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/file.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/parse.h"
#include "common/secret.h"
#include "common/timebase.h"

#define HTTP_PATH_MAX 1024
#define HTTP_SEGS_MAX 16

struct cx_http_server {
    struct MHD_Daemon *daemon;
    const cx_http_route *routes;
    size_t nroutes;
    void *ctx;
    size_t body_max; /* bytes */
    int port;
    char bound[64];           /* "HOST:PORT" of the listening socket (getsockname) */
    cx_http_gate gate;        /* hooks, zeroed when none */
    cx_http_guard *guard;     /* connection admission */
    unsigned char *reserved;  /* [nroutes] 1: a reserved route */
    char *tls_cert, *tls_key; /* PEM, NULL for plain HTTP (libmicrohttpd keeps pointers) */
    atomic_int stopping;      /* 1 once cx_http_server_free began: streams end */
    atomic_int nstreams;      /* streamed responses not yet done */
};

/* A streamed response on its way: the handler's stream and the server
 * whose stop ends it (NULL: none). Freed by stream_done. */
typedef struct http_stream {
    cx_http_server *s;
    cx_http_stream st;
} http_stream;

/* Per-request state kept between libmicrohttpd's calls of the handler;
 * created once the request passed the checks of the first call. */
typedef struct http_conn {
    cx_buf body;
    int too_big;      /* body went over body_max: answer 413 */
    const char *auth; /* what the gate left in req->auth */
} http_conn;

/* The URI log callback's verdict on the raw URI (before libmicrohttpd
 * unescapes it, which would cut the path at a %00): the address of this
 * static marker when it holds a NUL byte. Never freed. */
static char uri_has_nul;

/* ---- routing ---- */

/* Match path against pattern; fill req->params with copies into storage. */
static int route_match(const char *pattern, const char *path, cx_http_req *req, char *storage, size_t slen)
{
    const char *p = pattern, *u = path;
    size_t used = 0;
    int np = 0;
    while (*p && *u) {
        if (p[0] == '{' && p[1] == '}') {
            const char *end = strchr(u, '/');
            size_t n = end ? (size_t)(end - u) : strlen(u);
            if (n == 0 || np >= CX_HTTP_MAX_PARAMS || used + n + 1 > slen)
                return 0;
            memcpy(storage + used, u, n);
            storage[used + n] = '\0';
            req->params[np++] = storage + used;
            used += n + 1;
            u += n;
            p += 2;
            continue;
        }
        if (*p != *u)
            return 0;
        p++;
        u++;
    }
    if (*p || *u)
        return 0;
    req->nparams = np;
    return 1;
}

/* The first route whose pattern and method match; *path_known when some
 * pattern matched the path. */
static const cx_http_route *route_find(const cx_http_server *s, const char *url, const char *method,
                                       cx_http_req *req, char *storage, size_t slen, int *path_known)
{
    *path_known = 0;
    for (size_t i = 0; i < s->nroutes; i++) {
        if (!route_match(s->routes[i].pattern, url, req, storage, slen))
            continue;
        *path_known = 1;
        if (strcmp(s->routes[i].method, "*") == 0 || strcmp(s->routes[i].method, method) == 0)
            return &s->routes[i];
    }
    return NULL;
}

/* ---- responses ---- */

void cx_http_add_header(cx_http_resp *resp, const char *name, const char *fmt, ...)
{
    size_t used = strlen(resp->headers);
    if (used >= sizeof resp->headers - 1)
        return;
    char value[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    snprintf(resp->headers + used, sizeof resp->headers - used, "%s: %s\n", name, value);
}

void cx_http_reply_json(cx_http_resp *resp, int status, json_t *obj)
{
    resp->status = status;
    resp->content_type = "application/json";
    cx_buf_reset(&resp->body);
    char *s = obj ? json_dumps(obj, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(obj);
    if (!s) {
        resp->status = 500;
        cx_buf_printf(&resp->body, "{\"error\":\"cannot encode the response\",\"status\":500}");
        return;
    }
    if (cx_buf_append(&resp->body, s, strlen(s)) != 0 || cx_buf_append(&resp->body, "\n", 1) != 0) {
        resp->status = 500;
        cx_buf_reset(&resp->body);
        cx_buf_printf(&resp->body, "{\"error\":\"response too large\",\"status\":500}");
    }
    free(s);
}

static void reply_problem_v(cx_http_resp *resp, int status, const char *reason, json_t *extra, const char *fmt,
                            va_list ap) __attribute__((format(printf, 5, 0)));
static void reply_problem_v(cx_http_resp *resp, int status, const char *reason, json_t *extra, const char *fmt,
                            va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    json_t *o = json_pack("{s:s,s:i}", "error", msg, "status", status);
    if (o && reason)
        json_object_set_new(o, "reason", json_string(reason));
    if (o && extra)
        json_object_update(o, extra);
    json_decref(extra);
    cx_http_reply_json(resp, status, o);
}

void cx_http_reply_problem(cx_http_resp *resp, int status, const char *reason, json_t *extra, const char *fmt,
                           ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_problem_v(resp, status, reason, extra, fmt, ap);
    va_end(ap);
}

void cx_http_reply_error(cx_http_resp *resp, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_problem_v(resp, status, NULL, NULL, fmt, ap);
    va_end(ap);
}

void cx_http_reply_err(cx_http_resp *resp, int code, const char *detail)
{
    int status = cx_err_http_status(code);
    if (detail && *detail)
        cx_http_reply_error(resp, status, "%s", detail);
    else
        cx_http_reply_error(resp, status, "%s", cx_strerror(code));
}

void cx_http_reply_bytes(cx_http_resp *resp, int status, const char *content_type, const void *data,
                         size_t len)
{
    resp->status = status;
    resp->content_type = content_type;
    cx_buf_reset(&resp->body);
    if (cx_buf_append(&resp->body, data, len) != 0)
        cx_http_reply_error(resp, 500, "response too large");
}

void cx_http_reply_text(cx_http_resp *resp, int status, const char *content_type, const char *text)
{
    cx_http_reply_bytes(resp, status, content_type, text, strlen(text));
}

void cx_http_reply_stream(cx_http_resp *resp, int status, const char *content_type, cx_http_stream stream)
{
    resp->status = status;
    resp->content_type = content_type;
    cx_buf_reset(&resp->body);
    resp->stream = stream;
}

/* ---- request accessors ---- */

const char *cx_http_header(const cx_http_req *req, const char *name)
{
    return MHD_lookup_connection_value(req->mhd_conn, MHD_HEADER_KIND, name);
}

const char *cx_http_query(const cx_http_req *req, const char *name)
{
    return MHD_lookup_connection_value(req->mhd_conn, MHD_GET_ARGUMENT_KIND, name);
}

int cx_http_check_bearer(const cx_http_req *req, const char *token)
{
    const char *h = cx_http_header(req, "Authorization");
    if (!h || !token || strncmp(h, "Bearer ", 7) != 0)
        return CX_EAUTH;
    const char *given = h + 7;
    size_t gl = strlen(given), tl = strlen(token);
    /* constant time in the token's length; the length itself may leak */
    unsigned char diff = (unsigned char)(gl != tl);
    for (size_t i = 0; i < tl; i++)
        diff |= (unsigned char)(token[i] ^ (i < gl ? given[i] : 0));
    return diff ? CX_EAUTH : 0;
}

/* The value of one base64 digit (RFC 4648, standard alphabet), -1 for
 * anything else. */
static int b64_digit(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int cx_http_check_basic_password(const cx_http_req *req, const char *token)
{
    const char *h = cx_http_header(req, "Authorization");
    if (!h || !token || strncasecmp(h, "Basic ", 6) != 0)
        return CX_EAUTH;
    const char *in = h + 6;
    while (*in == ' ')
        in++;
    /* user:password decoded; anything that is not canonical base64 of at
     * most 1 KiB is refused */
    unsigned char dec[1024];
    size_t n = 0, len = strcspn(in, " ");
    if (len == 0 || len % 4 != 0 || len / 4 * 3 > sizeof dec || in[len] != '\0')
        return CX_EAUTH;
    for (size_t i = 0; i < len; i += 4) {
        int d[4];
        for (int k = 0; k < 4; k++)
            d[k] = b64_digit(in[i + k]);
        int pad = (in[i + 3] == '=') + (in[i + 2] == '=' && in[i + 3] == '=');
        if (d[0] < 0 || d[1] < 0 || (pad < 2 && d[2] < 0) || (pad < 1 && d[3] < 0) || (pad && i + 4 != len))
            return CX_EAUTH;
        uint32_t v = (uint32_t)d[0] << 18 | (uint32_t)d[1] << 12 | (uint32_t)(pad < 2 ? d[2] : 0) << 6 |
                     (uint32_t)(pad < 1 ? d[3] : 0);
        dec[n++] = (unsigned char)(v >> 16);
        if (pad < 2)
            dec[n++] = (unsigned char)(v >> 8);
        if (pad < 1)
            dec[n++] = (unsigned char)v;
    }
    const unsigned char *colon = memchr(dec, ':', n);
    if (!colon)
        return CX_EAUTH;
    const unsigned char *given = colon + 1;
    size_t gl = n - (size_t)(given - dec), tl = strlen(token);
    /* constant time in the token's length, as cx_http_check_bearer */
    unsigned char diff = (unsigned char)(gl != tl);
    for (size_t i = 0; i < tl; i++)
        diff |= (unsigned char)(token[i] ^ (i < gl ? given[i] : 0));
    memset(dec, 0, sizeof dec);
    return diff ? CX_EAUTH : 0;
}

int cx_http_peer_is_loopback(const cx_http_req *req)
{
    if (!req->mhd_conn)
        return 0;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(req->mhd_conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr)
        return 0;
    return cx_addr_is_loopback(ci->client_addr);
}

uint32_t cx_http_peer_key(const cx_http_req *req)
{
    if (!req->mhd_conn)
        return 0;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(req->mhd_conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return ci && ci->client_addr ? cx_addr_client_key(ci->client_addr) : 0;
}

int cx_http_host_is_loopback(const char *h)
{
    char host[256];
    const char *end;
    if (!h)
        return 0;
    if (h[0] == '[') {
        end = strchr(h, ']');
        if (!end || (end[1] && end[1] != ':'))
            return 0;
        h++;
    } else if (strchr(h, ':') != strrchr(h, ':')) {
        end = h + strlen(h); /* a bare IPv6 literal (a --listen host, "::1") */
    } else {
        end = strchr(h, ':');
        if (!end)
            end = h + strlen(h);
    }
    size_t n = (size_t)(end - h);
    if (n == 0 || n >= sizeof host)
        return 0;
    memcpy(host, h, n);
    host[n] = '\0';
    if (strcasecmp(host, "localhost") == 0 || (strchr(host, ':') && cx_ip_is_loopback(host)))
        return 1;
    unsigned o[4];
    char tail;
    return sscanf(host, "%3u.%3u.%3u.%3u%c", &o[0], &o[1], &o[2], &o[3], &tail) == 4 && o[0] == 127 &&
           o[1] < 256 && o[2] < 256 && o[3] < 256;
}

int cx_http_body_json(const cx_http_req *req, cx_http_resp *resp, int allow_empty, json_t **out)
{
    *out = NULL;
    if (req->body_len == 0) {
        if (allow_empty) {
            *out = json_object();
            return 0;
        }
        cx_http_reply_error(resp, 400, "request body: expected a JSON object, got an empty body");
        return CX_EINVAL;
    }
    json_error_t je;
    json_t *j = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        cx_http_reply_error(resp, 400, "request body: invalid JSON at line %d column %d: %s", je.line,
                            je.column, je.text);
        return CX_EINVAL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        cx_http_reply_error(resp, 400, "request body: expected a JSON object");
        return CX_EINVAL;
    }
    *out = j;
    return 0;
}

/* ---- libmicrohttpd glue ---- */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    http_stream *hs = cls;
    if (hs->s && atomic_load(&hs->s->stopping))
        return MHD_CONTENT_READER_END_OF_STREAM;
    long n = hs->st.read(hs->st.ctx, buf, max);
    if (n > 0)
        return (size_t)n < max ? (ssize_t)n : (ssize_t)max;
    return n == CX_HTTP_STREAM_END ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_done(void *cls)
{
    http_stream *hs = cls;
    if (hs->st.done)
        hs->st.done(hs->st.ctx);
    if (hs->s)
        atomic_fetch_sub(&hs->s->nstreams, 1);
    free(hs);
}

/* The libmicrohttpd response for resp: its buffered body (moved out), or
 * its stream (whose done runs when MHD is finished with it, or here on
 * failure). NULL when out of memory. */
static struct MHD_Response *make_response(cx_http_server *s, cx_http_resp *resp)
{
    if (resp->stream.read) {
        cx_http_stream st = resp->stream;
        resp->stream = (cx_http_stream){0};
        http_stream *hs = malloc(sizeof *hs);
        struct MHD_Response *r =
            hs ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, stream_read, hs, stream_done)
               : NULL;
        if (hs && r) {
            hs->s = s;
            hs->st = st;
            if (s)
                atomic_fetch_add(&s->nstreams, 1);
        } else {
            free(hs);
            if (st.done)
                st.done(st.ctx);
        }
        return r;
    }
    size_t len;
    char *data = cx_buf_take(&resp->body, &len);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!r)
        free(data);
    return r;
}

/* Queue resp (headers, Cache-Control: no-store, nosniff, no framing) on conn. Returns
 * MHD_YES or MHD_NO. */
static int http_send(cx_http_server *s, struct MHD_Connection *conn, cx_http_resp *resp)
{
    struct MHD_Response *r = make_response(s, resp);
    cx_buf_cleanup(&resp->body);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", resp->content_type ? resp->content_type : "application/json");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    /* no page of another origin may frame ours (the dashboard's buttons,
     * clickjacking); X-Frame-Options for browsers without CSP 2 */
    MHD_add_response_header(r, "Content-Security-Policy", "frame-ancestors 'none'");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    /* this process's clock, taken after the request arrived and before the
     * answer leaves: the caller maps our times onto its own (timebase.h) */
    char stamp[48];
    snprintf(stamp, sizeof stamp, "%.3f", (double)cx_mono_ns() / 1e6);
    MHD_add_response_header(r, CX_TB_HEADER, stamp);
    /* extra header lines "Name: value\n" */
    char *save = NULL;
    for (char *line = strtok_r(resp->headers, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        *colon = '\0';
        const char *v = colon + 1;
        while (*v == ' ')
            v++;
        MHD_add_response_header(r, line, v);
    }
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    return ret;
}

/* The raw URI, before libmicrohttpd unescapes it: a %00 would silently cut
 * the path (POST /proxies/sy%00/toxics would act on proxy "sy"). Its
 * return value is the request's first *con_cls. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    (void)conn;
    for (const char *p = uri; p && *p; p++)
        if (p[0] == '%' && p[1] == '0' && p[2] == '0')
            return &uri_has_nul;
    return NULL;
}

/* Headers are in, no body byte read yet: refuse a bad path, an unknown
 * route, or what the gate refuses, before anything is buffered. */
static enum MHD_Result on_first_call(cx_http_server *s, struct MHD_Connection *conn, const char *url,
                                     const char *method, void **con_cls)
{
    int nul = *con_cls == &uri_has_nul;
    *con_cls = NULL;
    cx_http_resp resp = {.status = 200, .content_type = "application/json"};
    cx_buf_init(&resp.body, (size_t)1 << 31);
    cx_http_req req = {.method = method, .path = url, .body = "", .mhd_conn = conn};
    char storage[HTTP_PATH_MAX], why[256];
    const cx_http_route *hit = NULL;
    size_t ulen = strlen(url);
    if (nul) {
        cx_http_reply_error(&resp, 400, "path: contains a NUL byte (%%00)");
    } else if (ulen >= HTTP_PATH_MAX) {
        cx_http_reply_error(&resp, 414, "path too long");
    } else if (!cx_utf8_valid(url, ulen)) {
        cx_http_reply_error(&resp, 400, "path: not valid UTF-8");
    } else {
        int path_known = 0;
        hit = route_find(s, url, method, &req, storage, sizeof storage, &path_known);
        if (!hit && path_known) {
            cx_http_reply_error(&resp, 405, "method %s not allowed on %s", method, url);
        } else if (!hit) {
            cx_http_reply_error(&resp, 404, "no such endpoint: %s %s", method, url);
        } else if (cx_http_guard_begin(s->guard, conn, s->reserved[hit - s->routes], why, sizeof why) != 0) {
            /* over the connection caps: refused before the gate, so a flood
             * costs no auth work; the reserved routes always get through */
            cx_http_reply_error(&resp, 503, "%s", why);
            cx_http_add_header(&resp, "Retry-After", "1");
        } else if (!s->gate.check || s->gate.check(s->ctx, &req, hit, &resp) == 0) {
            http_conn *hc = calloc(1, sizeof *hc);
            cx_buf_cleanup(&resp.body);
            if (!hc)
                return MHD_NO;
            cx_buf_init(&hc->body, s->body_max);
            hc->auth = req.auth;
            *con_cls = hc;
            return MHD_YES;
        } else if (resp.status < 400) {
            cx_http_reply_error(&resp, 403, "request refused");
        }
    }
    if (s->gate.refused)
        s->gate.refused(s->ctx, &req, hit, &resp);
    /* Queued before the body: libmicrohttpd reads none of it and closes
     * the connection after the answer. */
    return (enum MHD_Result)http_send(s, conn, &resp);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    cx_http_server *s = cls;
    http_conn *hc = *con_cls;
    if (!hc || *con_cls == &uri_has_nul)
        return on_first_call(s, conn, url, method, con_cls);
    if (*upload_data_size) {
        if (!hc->too_big && cx_buf_append(&hc->body, upload_data, *upload_data_size) != 0) {
            hc->too_big = 1;
            cx_buf_cleanup(&hc->body);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }

    cx_http_guard_handling(s->guard, conn);
    cx_http_resp resp = {.status = 200, .content_type = "application/json"};
    cx_buf_init(&resp.body, (size_t)1 << 31);
    cx_http_req req = {.method = method, .path = url, .mhd_conn = conn, .auth = hc->auth};
    req.body = hc->body.data ? hc->body.data : "";
    req.body_len = hc->body.len;
    char storage[HTTP_PATH_MAX];
    int path_known = 0;
    const cx_http_route *hit = route_find(s, url, method, &req, storage, sizeof storage, &path_known);
    if (hc->too_big || !hit) {
        if (hc->too_big)
            cx_http_reply_error(&resp, 413, "request body is over the %zu byte limit", s->body_max);
        else /* cannot happen: the first call matched it */
            cx_http_reply_error(&resp, 404, "no such endpoint: %s %s", method, url);
        req.body = "";
        req.body_len = 0;
        if (s->gate.refused)
            s->gate.refused(s->ctx, &req, hit, &resp);
        return (enum MHD_Result)http_send(s, conn, &resp);
    }
    int rc = hit->fn(s->ctx, &req, &resp);
    if (rc < 0 && resp.body.len == 0 && !resp.stream.read)
        cx_http_reply_err(&resp, rc, NULL);
    return (enum MHD_Result)http_send(s, conn, &resp);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    cx_http_server *s = cls;
    cx_http_guard_end(s->guard, conn);
    http_conn *hc = *con_cls;
    if (hc && *con_cls != &uri_has_nul) {
        cx_buf_cleanup(&hc->body);
        free(hc);
        *con_cls = NULL;
    }
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    cx_debug("http: %s", msg);
}

cx_http_server *cx_http_server_new(const char *listen, const cx_http_route *routes, size_t nroutes, void *ctx,
                                   size_t body_max, char *err, size_t errlen)
{
    return cx_http_server_new_opts(listen, routes, nroutes, ctx, body_max, NULL, err, errlen);
}

/* Mark the routes opts->reserved names; 0, or CX_EINVAL naming the entry. */
static int mark_reserved(cx_http_server *s, const cx_http_server_opts *opts, char *err, size_t errlen)
{
    for (const char *const *r = opts && opts->reserved ? opts->reserved : NULL; r && *r; r++) {
        int found = 0;
        for (size_t i = 0; i < s->nroutes; i++) {
            size_t ml = strlen(s->routes[i].method);
            if (strncmp(*r, s->routes[i].method, ml) == 0 && (*r)[ml] == ' ' &&
                strcmp(*r + ml + 1, s->routes[i].pattern) == 0) {
                s->reserved[i] = 1;
                found = 1;
            }
        }
        if (!found)
            return cx_fail(err, errlen, CX_EINVAL, "reserved route '%s' is not in the route table", *r);
    }
    return 0;
}

int cx_http_tls_read(const char *cert_file, const char *key_file, char **cert_pem, char **key_pem, char *err,
                     size_t errlen)
{
    *cert_pem = *key_pem = NULL;
    if (!cert_file && !key_file)
        return 0;
    if (!cert_file || !key_file)
        return cx_fail(err, errlen, CX_EINVAL, "--tls-cert and --tls-key go together");
    char why[CX_ERRLEN];
    size_t len;
    if (cx_file_read(cert_file, 1 << 20, cert_pem, &len, why, sizeof why) != 0)
        return cx_fail(err, errlen, CX_EINVAL, "--tls-cert %s: %s", cert_file, why);
    if (cx_secret_read(key_file, "--tls-key file", 1 << 20, key_pem, &len, why, sizeof why) != 0) {
        free(*cert_pem);
        *cert_pem = NULL;
        return cx_fail(err, errlen, CX_EINVAL, "%s", why);
    }
    if (!strstr(*cert_pem, "-----BEGIN CERTIFICATE-----")) {
        free(*cert_pem);
        memset(*key_pem, 0, len);
        free(*key_pem);
        *cert_pem = *key_pem = NULL;
        return cx_fail(err, errlen, CX_EINVAL, "--tls-cert %s: no PEM certificate (-----BEGIN CERTIFICATE-----)",
                       cert_file);
    }
    return 0;
}

cx_http_server *cx_http_server_new_opts(const char *listen, const cx_http_route *routes, size_t nroutes,
                                        void *ctx, size_t body_max, const cx_http_server_opts *opts,
                                        char *err, size_t errlen)
{
    char host[256];
    int port;
    if (cx_parse_hostport(listen, "listen address", host, sizeof host, &port, err, errlen) != 0)
        return NULL;
    /* An address literal, IPv4 or IPv6 ("[::1]:PORT"); no names (a server
     * binds what it was told, not what DNS says today) but localhost. "::"
     * binds both families (IPV6_V6ONLY off, libmicrohttpd's dual stack). */
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *sa4 = (struct sockaddr_in *)(void *)&ss;
    struct sockaddr_in6 *sa6 = (struct sockaddr_in6 *)(void *)&ss;
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    unsigned family_flags = 0;
    if (inet_pton(AF_INET, host, &sa4->sin_addr) == 1) {
        sa4->sin_family = AF_INET;
        sa4->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, host, &sa6->sin6_addr) == 1) {
        sa6->sin6_family = AF_INET6;
        sa6->sin6_port = htons((uint16_t)port);
        family_flags = IN6_IS_ADDR_UNSPECIFIED(&sa6->sin6_addr) ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
    } else {
        cx_fail(err, errlen, CX_EINVAL, "listen address: '%s' is not an IPv4 or IPv6 address", host);
        return NULL;
    }
    cx_http_server *s = calloc(1, sizeof *s);
    if (!s) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        return NULL;
    }
    s->routes = routes;
    s->nroutes = nroutes;
    s->ctx = ctx;
    s->body_max = body_max;
    if (opts && opts->gate)
        s->gate = *opts->gate;
    cx_http_limits defaults;
    cx_http_limits_default(&defaults);
    s->guard = cx_http_guard_new(opts && opts->limits ? opts->limits : &defaults,
                                 opts && opts->name ? opts->name : "http");
    s->reserved = calloc(nroutes ? nroutes : 1, 1);
    if (!s->guard || !s->reserved) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        goto fail;
    }
    if (mark_reserved(s, opts, err, errlen) != 0)
        goto fail;
    const cx_http_limits *lim = cx_http_guard_limits(s->guard); /* normalised */
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | family_flags;
    struct MHD_OptionItem tls[3] = {
        {MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}};
    if (opts && (opts->tls_cert_pem || opts->tls_key_pem)) {
        if (!opts->tls_cert_pem || !opts->tls_key_pem) {
            cx_fail(err, errlen, CX_EINVAL, "TLS needs both a certificate and a key");
            goto fail;
        }
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            cx_fail(err, errlen, CX_ENOTSUP, "this libmicrohttpd was built without TLS (GnuTLS)");
            goto fail;
        }
        s->tls_cert = strdup(opts->tls_cert_pem);
        s->tls_key = strdup(opts->tls_key_pem);
        if (!s->tls_cert || !s->tls_key) {
            cx_fail(err, errlen, CX_ENOMEM, "out of memory");
            goto fail;
        }
        flags |= MHD_USE_TLS;
        tls[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert};
        tls[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key};
    }
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, cx_http_guard_notify, s->guard, MHD_OPTION_CONNECTION_LIMIT,
        lim->conn_max, MHD_OPTION_CONNECTION_TIMEOUT, lim->idle_timeout_s, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, NULL, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_ARRAY, tls,
        MHD_OPTION_END);
    if (!s->daemon) {
        cx_fail(err, errlen, CX_EUNAVAIL, "cannot listen on %s (address in use or not local?)", listen);
        goto fail;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : port;
    /* what the socket really bound (0.0.0.0 stays 0.0.0.0, [::1] gets its
     * brackets), for the logs */
    const union MHD_DaemonInfo *lfd = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    if (lfd && getsockname(lfd->listen_fd, (struct sockaddr *)&got, &gl) == 0 &&
        (got.ss_family == AF_INET || got.ss_family == AF_INET6)) {
        cx_addr_format((struct sockaddr *)&got, s->bound, sizeof s->bound);
        s->port = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)(void *)&got)->sin_port
                                                 : ((struct sockaddr_in6 *)(void *)&got)->sin6_port);
    } else {
        cx_hostport_format(host, s->port, s->bound, sizeof s->bound);
    }
    return s;
fail:
    cx_http_guard_free(s->guard);
    free(s->reserved);
    free(s->tls_cert);
    free(s->tls_key);
    free(s);
    return NULL;
}

int cx_http_server_port(const cx_http_server *s)
{
    return s->port;
}

const char *cx_http_server_bound(const cx_http_server *s)
{
    return s->bound;
}

void cx_http_server_free(cx_http_server *s)
{
    if (!s)
        return;
    /* Every stream ends at its next read; give them that long (a reader
     * blocks about a second at most) to send their last chunk, so that
     * clients see a clean end rather than a cut connection. */
    atomic_store(&s->stopping, 1);
    int64_t until = cx_mono_ms() + 3000;
    while (atomic_load(&s->nstreams) > 0 && cx_mono_ms() < until)
        cx_sleep_ms(10);
    MHD_stop_daemon(s->daemon);
    cx_http_guard_free(s->guard);
    free(s->reserved);
    free(s->tls_cert);
    free(s->tls_key);
    free(s);
}

cx_http_guard *cx_http_server_guard(cx_http_server *s)
{
    return s->guard;
}
