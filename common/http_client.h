/* http_client.h - a small HTTP client over libcurl.
 *
 * One cx_http_client holds one curl easy handle (keep-alive reuse), so it
 * belongs to one thread at a time. Transport failures (connect refused,
 * timeout, reset) are retried with exponential backoff up to `retries`
 * times; an HTTP answer of any status is never retried, it is returned.
 * Every answer records when its request went out and when its status line
 * came back (this process's monotonic clock), and an optional observer sees
 * each answer: common/timebase.h estimates the answering process's clock
 * from them.
 */
#ifndef CX_HTTP_CLIENT_H
#define CX_HTTP_CLIENT_H

#include <jansson.h>
#include <stddef.h>

#include "common/buf.h"

typedef struct cx_http_result cx_http_result;

/* Called in the calling thread after every request that got an HTTP
 * answer (any status), with the result as it will be returned. */
typedef void (*cx_http_observe_fn)(void *ctx, const cx_http_result *r);

typedef struct cx_http_opts {
    long connect_timeout_ms; /* per attempt; default 1000 */
    long timeout_ms;         /* whole request per attempt; default 10000 */
    int retries;             /* extra attempts on transport failure; default 0 */
    long backoff_ms;         /* first backoff, doubled each retry; default 100 */
    long backoff_max_ms;     /* cap on one backoff; default 2000 */
    const char *bearer;      /* Authorization: Bearer token, or NULL (copied) */
    size_t max_body;         /* cap on a response body; default 256 MiB */
    const char *ca_file; /* https: PEM CA bundle to verify the server with, or NULL: the system's (copied) */
    /* "HOST:PORT" ([v6]:PORT): connect there instead of to base_url's host
     * and port, while the request (Host, and an https certificate's name)
     * is still the URL's: a TCP proxy in between (the agent's, for its
     * learner) without giving up the server's name. NULL: the URL's. Copied. */
    const char *connect_to;
    cx_http_observe_fn observe; /* sees every answer, or NULL */
    void *observe_ctx;          /* its ctx (borrowed: outlives the client) */
} cx_http_opts;

struct cx_http_result {
    int status;       /* HTTP status, 0 before an answer */
    cx_buf body;      /* response body (NUL-terminated) */
    cx_buf headers;   /* raw response header lines */
    double t_send_ms; /* ms, cx_mono_ns() / 1e6: just before the answered attempt went out */
    double t_recv_ms; /* ms, same clock: when its (last) status line arrived; 0 before an answer */
};

typedef struct cx_http_client cx_http_client;

/* base_url like "http://127.0.0.1:8080" or "https://..." (copied; an
 * https server's certificate and host name are always verified). opts may
 * be NULL. */
cx_http_client *cx_http_client_new(const char *base_url, const cx_http_opts *opts);
void cx_http_client_free(cx_http_client *c);
const char *cx_http_client_base(const cx_http_client *c);

void cx_http_result_init(cx_http_result *r);
void cx_http_result_cleanup(cx_http_result *r);
/* Value of a response header (case-insensitive) copied into out; 0 if found. */
int cx_http_result_header(const cx_http_result *r, const char *name, char *out, size_t outlen);

/* Perform METHOD base_url+path. hdrs: NULL-terminated array of
 * "Name: value" strings or NULL. body may be NULL. timeout_ms > 0 overrides
 * opts.timeout_ms for this call (long polls). Returns 0 when an HTTP answer
 * came back (any status; see r->status), CX_EUNAVAIL/CX_ETIMEDOUT when none
 * did after all retries. r must be initialized; it is reset first. */
int cx_http_do(cx_http_client *c, const char *method, const char *path, const char *const *hdrs,
               const void *body, size_t body_len, const char *content_type, long timeout_ms,
               cx_http_result *r, char *err, size_t errlen);

/* JSON convenience: send obj (borrowed, may be NULL) and parse the answer
 * into *out (new reference, or NULL when the body is not JSON). Returns as
 * cx_http_do; *status gets the HTTP status. */
int cx_http_json(cx_http_client *c, const char *method, const char *path, json_t *obj, int *status,
                 json_t **out, char *err, size_t errlen);

#endif
