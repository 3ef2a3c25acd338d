/* http_server.h - a thin routing layer over libmicrohttpd.
 *
 * What it is: a route table ("METHOD /path/{}/more" patterns), body
 * collection with a hard cap, strict JSON body decoding, and one writer for
 * JSON errors {"error": "...", "status": N}. Each connection gets its own
 * thread (MHD thread-per-connection), so a handler MAY block (long polls,
 * the ddp barrier) as long as it bounds its wait; handlers of one server run
 * concurrently, so the ctx they share needs its own lock.
 * Before any body byte is read, the router refuses a path with a NUL byte
 * (%00) or invalid UTF-8 (400), an unknown route (404) or method (405), and
 * runs the server's gate (auth, Host/Origin checks: see cx_http_gate), so
 * nothing is buffered for a request that will be refused.
 * Connections pass through a cx_http_guard (common/http_guard.h): held and
 * slow connections are evicted near the limits, requests beyond the caps
 * get 503 before their body is read, and the routes named reserved (halt,
 * lease, status) always get through.
 * A handler may answer with a stream instead of a body (cx_http_stream:
 * server-sent events): its read callback runs in the connection's thread
 * and produces the body piece by piece until it says the stream ended, the
 * client goes away or the server stops; the connection stays under the
 * guard's caps for as long as it is open.
 * What it is not: a framework. No middleware. TLS only as libmicrohttpd
 * does it (cx_http_server_opts.tls_*).
 */
#ifndef CX_HTTP_SERVER_H
#define CX_HTTP_SERVER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/http_guard.h"

#define CX_HTTP_MAX_PARAMS 4

typedef struct cx_http_req {
    const char *method;                     /* "GET", "POST", ... */
    const char *path;                       /* without the query string */
    const char *params[CX_HTTP_MAX_PARAMS]; /* the {} segments, in order */
    int nparams;
    const char *body; /* NUL-terminated; "" if none */
    size_t body_len;  /* bytes */
    void *mhd_conn;   /* struct MHD_Connection * */
    const char *auth; /* static string a gate left for the handler (how the call was authorized), or NULL */
} cx_http_req;

/* What a stream's read callback returns besides a byte count (> 0). */
#define CX_HTTP_STREAM_END (-1)   /* the body is complete: close cleanly */
#define CX_HTTP_STREAM_ERROR (-2) /* abort the connection */

/* A streamed response body. read fills at most max bytes of buf and returns
 * how many (> 0), or CX_HTTP_STREAM_END / CX_HTTP_STREAM_ERROR. It may block
 * waiting for data, but only for a bounded time (about a second): the
 * server asks again, and between calls it notices a stop, so a reader that
 * blocks forever would hold up cx_http_server_free. done is called once
 * when the connection is over (or the response could not be queued); it
 * frees ctx. Both run in the connection's thread. */
typedef struct cx_http_stream {
    long (*read)(void *ctx, char *buf, size_t max); /* NULL: not a stream */
    void (*done)(void *ctx);                        /* may be NULL */
    void *ctx;                                      /* owned by the stream from the handler's return */
} cx_http_stream;

typedef struct cx_http_resp {
    int status;               /* HTTP status, 200 by default */
    const char *content_type; /* static string; "application/json" default */
    cx_buf body;              /* response body (ignored when stream.read is set) */
    char headers[512];        /* extra "Name: value\n" lines */
    cx_http_stream stream;    /* set by cx_http_reply_stream; zero for a plain body */
} cx_http_resp;

/* A handler fills resp (status, body). Its return value is ignored unless
 * it is negative and resp->body is empty: then the error code's status and
 * string are sent as a JSON error. */
typedef int (*cx_http_handler)(void *ctx, const cx_http_req *req, cx_http_resp *resp);

typedef struct cx_http_route {
    const char *method;  /* "GET"; "*" matches any */
    const char *pattern; /* "/v1/fragments/{}/contributions"; "{}" = one segment */
    cx_http_handler fn;
} cx_http_route;

typedef struct cx_http_gate cx_http_gate; /* below */

/* Optional settings of a server. */
typedef struct cx_http_server_opts {
    const cx_http_limits *limits; /* NULL: cx_http_limits_default() */
    /* Control calls that must get through a connection flood: admitted over
     * the request caps (see http_guard.h). "METHOD PATTERN" exactly as in
     * the route table ("POST /v1/halt"), NULL-terminated; each must name a
     * route. Keep their handlers quick and their answers small. */
    const char *const *reserved;
    const cx_http_gate *gate; /* checks before any body byte (copied); NULL: none */
    /* HTTPS (libmicrohttpd with GnuTLS): the PEM certificate chain and
     * private key, both or neither (NULL: plain HTTP). CX_ENOTSUP when the
     * library was built without TLS. Copied. */
    const char *tls_cert_pem;
    const char *tls_key_pem;
    const char *name; /* log prefix of the connection guard; NULL: "http" */
} cx_http_server_opts;

typedef struct cx_http_server cx_http_server;

/* The PEM files of an HTTPS server's --tls-cert and --tls-key, both or
 * neither (both NULL: *cert_pem and *key_pem stay NULL, plain HTTP). The
 * key is a secret and is read as one (common/secret.h: owner-only, no
 * other user's symlink); flag names the pair in errors ("--tls-cert").
 * 0, or a negative cx_err with err naming the flag and the file. The
 * caller frees both, wiping the key first. */
int cx_http_tls_read(const char *cert_file, const char *key_file, char **cert_pem, char **key_pem, char *err,
                     size_t errlen);

/* Checks a server runs before it reads any body byte, and a hook for the
 * answers it gives without a handler. Both get the server's ctx. */
struct cx_http_gate {
    /* Called once per request when its line and headers are in and a route
     * matched (req has method, path, params, no body yet; it may set
     * req->auth, which the handler then sees). 0 lets the request go on
     * (the body is read, the handler runs); anything else answers with
     * resp as the gate filled it, and the body is never read. */
    int (*check)(void *ctx, cx_http_req *req, const cx_http_route *route, cx_http_resp *resp);
    /* Called after every answer the router gives itself instead of a
     * handler: a path with a NUL byte (%00) or invalid UTF-8 (400), too
     * long (414), unknown (404), wrong method (405), a body over the cap
     * (413), a gate refusal. For audit logs; may be NULL. route is NULL
     * when none matched; req->body is empty. */
    void (*refused)(void *ctx, const cx_http_req *req, const cx_http_route *route, const cx_http_resp *resp);
};

/* Start serving on listen ("127.0.0.1:8080", "127.0.0.1:0" = ephemeral,
 * "0.0.0.0:80"). routes must outlive the server. Bodies over body_max bytes
 * get 413. A path with no route gets 404, a known path with the wrong method
 * 405. Connection limits are cx_http_limits_default()'s. Returns NULL and
 * fills err on failure. */
cx_http_server *cx_http_server_new(const char *listen, const cx_http_route *routes, size_t nroutes, void *ctx,
                                   size_t body_max, char *err, size_t errlen);
/* The same with options (gate, reserved routes, limits); opts may be NULL.
 * Without a gate the router still refuses NUL/invalid UTF-8 paths, unknown
 * routes and wrong methods before it reads a body. A reserved entry that
 * names no route is an error (CX_EINVAL). */
cx_http_server *cx_http_server_new_opts(const char *listen, const cx_http_route *routes, size_t nroutes,
                                        void *ctx, size_t body_max, const cx_http_server_opts *opts,
                                        char *err, size_t errlen);
/* The server's connection guard (stats; borrowed). */
cx_http_guard *cx_http_server_guard(cx_http_server *s);
/* The bound port (useful after ":0"). */
int cx_http_server_port(const cx_http_server *s);
/* The address the listening socket is bound to, "HOST:PORT" as the kernel
 * reports it ("0.0.0.0:7070" for the wildcard, never rewritten to a
 * reachable address): what a log line names. Borrowed. */
const char *cx_http_server_bound(const cx_http_server *s);
/* Stop accepting, wait for handler threads, free. NULL is a no-op. */
void cx_http_server_free(cx_http_server *s);

/* Request accessors: NULL when absent. */
const char *cx_http_header(const cx_http_req *req, const char *name);
const char *cx_http_query(const cx_http_req *req, const char *name);
/* Bearer token check, constant time. 0 when `Authorization: Bearer <token>`
 * matches, CX_EAUTH otherwise. */
int cx_http_check_bearer(const cx_http_req *req, const char *token);
/* The same token as the password of `Authorization: Basic
 * base64(<any user>:<token>)` (RFC 7617), constant time: what HTTP clients
 * send for a URL with credentials, http://USER:TOKEN@HOST:PORT (Go's
 * net/http, Python's requests). 0 when it matches, CX_EAUTH otherwise. */
int cx_http_check_basic_password(const cx_http_req *req, const char *token);

/* 1 when the request's peer is a loopback address (127.0.0.0/8, ::1 or
 * ::ffff:127.x), 0 otherwise or when unknown. */
int cx_http_peer_is_loopback(const cx_http_req *req);
/* 1 when a Host header value names a loopback host: "localhost",
 * 127.x.y.z or [::1] (or [::ffff:127.x.y.z]), with an optional port; a
 * bare IPv6 literal ("::1", a --listen host) too. 0 for anything else or a
 * malformed value (a web page reaching us through DNS rebinding sends its
 * own name). */
int cx_http_host_is_loopback(const char *host);

/* Parse the body as one JSON object. On failure writes a 400 JSON error into
 * resp naming what was wrong and returns CX_EINVAL; *out is a new reference
 * on success. An empty body is "{}" when allow_empty. */
int cx_http_body_json(const cx_http_req *req, cx_http_resp *resp, int allow_empty, json_t **out);

/* Response writers. reply_json steals the reference. */
void cx_http_reply_json(cx_http_resp *resp, int status, json_t *obj);
/* The one error writer of the project: every error answer of every server
 * (agent, syncer, dashboard, the server's own refusals) is the JSON object
 * {"error": the message, "status": status, "reason": reason (only when
 * reason is not NULL), then extra's members (extra may be NULL; its
 * reference is stolen)}. The reason is the caller's machine name for the
 * refusal (the agent's agc_reason, the syncer's proto_reason); the message
 * is for people. */
void cx_http_reply_problem(cx_http_resp *resp, int status, const char *reason, json_t *extra, const char *fmt,
                           ...) __attribute__((format(printf, 5, 6)));
/* cx_http_reply_problem without a reason or extra members. */
void cx_http_reply_error(cx_http_resp *resp, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Error from a cx_err code and detail (status from cx_err_http_status). */
void cx_http_reply_err(cx_http_resp *resp, int code, const char *detail);
void cx_http_reply_bytes(cx_http_resp *resp, int status, const char *content_type, const void *data,
                         size_t len);
void cx_http_reply_text(cx_http_resp *resp, int status, const char *content_type, const char *text);
/* Answer with a stream (status, content type, then read() until it ends;
 * see cx_http_stream). From here on the server owns ctx: done(ctx) is
 * called exactly once, even when the response cannot be sent. */
void cx_http_reply_stream(cx_http_resp *resp, int status, const char *content_type, cx_http_stream stream);
/* The peer's key for per-client caps (cx_addr_client_key, netaddr.h): its
 * IPv4 address in host byte order, 127.0.0.1 for an IPv6 loopback peer, a
 * hash outside 127.0.0.0/8 for other IPv6 peers; 0 when unknown. */
uint32_t cx_http_peer_key(const cx_http_req *req);
/* Add a response header line; silently truncated past 512 bytes total. */
void cx_http_add_header(cx_http_resp *resp, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
