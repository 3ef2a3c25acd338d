/* http_client.c - libcurl easy handle per client, retries with backoff. */
#include "common/http_client.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/clock.h"
#include "common/err.h"

struct cx_http_client {
    CURL *curl;
    char *base;    /* "http://127.0.0.1:8080", no trailing slash */
    char *bearer;  /* or NULL */
    char *ca_file; /* or NULL */
    struct curl_slist *connect_to; /* "::HOST:PORT" (any URL host and port), or NULL */
    cx_http_opts opts;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

cx_http_client *cx_http_client_new(const char *base_url, const cx_http_opts *opts)
{
    pthread_once(&curl_once, curl_init_once);
    cx_http_client *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->opts = (cx_http_opts){.connect_timeout_ms = 1000,
                             .timeout_ms = 10000,
                             .retries = 0,
                             .backoff_ms = 100,
                             .backoff_max_ms = 2000,
                             .max_body = (size_t)256 << 20};
    if (opts) {
        if (opts->connect_timeout_ms > 0)
            c->opts.connect_timeout_ms = opts->connect_timeout_ms;
        if (opts->timeout_ms > 0)
            c->opts.timeout_ms = opts->timeout_ms;
        c->opts.retries = opts->retries > 0 ? opts->retries : 0;
        if (opts->backoff_ms > 0)
            c->opts.backoff_ms = opts->backoff_ms;
        if (opts->backoff_max_ms > 0)
            c->opts.backoff_max_ms = opts->backoff_max_ms;
        if (opts->max_body > 0)
            c->opts.max_body = opts->max_body;
        c->opts.observe = opts->observe;
        c->opts.observe_ctx = opts->observe_ctx;
    }
    const char *b = base_url;
    size_t n = strlen(b);
    while (n && b[n - 1] == '/')
        n--;
    c->base = strndup(b, n);
    c->bearer = opts && opts->bearer ? strdup(opts->bearer) : NULL;
    c->opts.bearer = NULL;
    c->ca_file = opts && opts->ca_file ? strdup(opts->ca_file) : NULL;
    c->opts.ca_file = NULL;
    c->opts.connect_to = NULL;
    int via_ok = 1;
    if (opts && opts->connect_to) {
        /* curl's CONNECT_TO entry: empty source host and port match any */
        char entry[300];
        int n2 = snprintf(entry, sizeof entry, "::%s", opts->connect_to);
        via_ok = n2 > 0 && (size_t)n2 < sizeof entry && (c->connect_to = curl_slist_append(NULL, entry)) != NULL;
    }
    c->curl = curl_easy_init();
    if (!c->base || !c->curl || (opts && opts->bearer && !c->bearer) ||
        (opts && opts->ca_file && !c->ca_file) || !via_ok) {
        cx_http_client_free(c);
        return NULL;
    }
    return c;
}

void cx_http_client_free(cx_http_client *c)
{
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->base);
    free(c->bearer);
    curl_slist_free_all(c->connect_to);
    free(c->ca_file);
    free(c);
}

const char *cx_http_client_base(const cx_http_client *c)
{
    return c->base;
}

void cx_http_result_init(cx_http_result *r)
{
    r->status = 0;
    r->t_send_ms = r->t_recv_ms = 0;
    cx_buf_init(&r->body, (size_t)256 << 20);
    cx_buf_init(&r->headers, 64 * 1024);
}

void cx_http_result_cleanup(cx_http_result *r)
{
    cx_buf_cleanup(&r->body);
    cx_buf_cleanup(&r->headers);
}

int cx_http_result_header(const cx_http_result *r, const char *name, char *out, size_t outlen)
{
    if (!r->headers.data)
        return CX_ENOTFOUND;
    size_t nl = strlen(name);
    const char *p = r->headers.data;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t vl = (size_t)(p + len - v);
            while (vl && (v[vl - 1] == '\r' || v[vl - 1] == ' '))
                vl--;
            if (vl >= outlen)
                vl = outlen - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return 0;
        }
        if (!eol)
            break;
        p = eol + 1;
    }
    return CX_ENOTFOUND;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    cx_buf *b = userdata;
    return cx_buf_append(b, ptr, size * nmemb) == 0 ? size * nmemb : 0;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    cx_http_result *r = userdata;
    size_t n = size * nmemb;
    /* a new status line (redirect/100-continue) starts a new header set;
     * its arrival bounds the answerer's clock stamp (timebase.h) */
    if (n > 5 && strncmp(ptr, "HTTP/", 5) == 0) {
        r->t_recv_ms = (double)cx_mono_ns() / 1e6;
        cx_buf_reset(&r->headers);
    }
    return cx_buf_append(&r->headers, ptr, n) == 0 ? n : 0;
}

int cx_http_do(cx_http_client *c, const char *method, const char *path, const char *const *hdrs,
               const void *body, size_t body_len, const char *content_type, long timeout_ms,
               cx_http_result *r, char *err, size_t errlen)
{
    char url[2048];
    if ((size_t)snprintf(url, sizeof url, "%s%s", c->base, path) >= sizeof url)
        return cx_fail(err, errlen, CX_EINVAL, "URL too long");
    struct curl_slist *list = NULL;
    char line[512];
    for (int i = 0; hdrs && hdrs[i]; i++)
        list = curl_slist_append(list, hdrs[i]);
    if (content_type) {
        snprintf(line, sizeof line, "Content-Type: %s", content_type);
        list = curl_slist_append(list, line);
    }
    if (c->bearer) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", c->bearer);
        list = curl_slist_append(list, line);
    }
    list = curl_slist_append(list, "Expect:"); /* no 100-continue round trip */

    r->body.max = c->opts.max_body;
    long backoff = c->opts.backoff_ms;
    int rc = CX_EUNAVAIL;
    CURLcode cc = CURLE_OK;
    for (int attempt = 0; attempt <= c->opts.retries; attempt++) {
        if (attempt > 0) {
            cx_sleep_ms(backoff);
            backoff = backoff * 2 > c->opts.backoff_max_ms ? c->opts.backoff_max_ms : backoff * 2;
        }
        r->status = 0;
        r->t_recv_ms = 0;
        cx_buf_reset(&r->body);
        cx_buf_reset(&r->headers);
        CURL *h = c->curl;
        curl_easy_reset(h);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->opts.connect_timeout_ms);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : c->opts.timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &r->body);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        if (c->ca_file)
            curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
        if (c->connect_to)
            curl_easy_setopt(h, CURLOPT_CONNECT_TO, c->connect_to);
        if (strcmp(method, "HEAD") == 0)
            curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
        }
        r->t_send_ms = (double)cx_mono_ns() / 1e6;
        cc = curl_easy_perform(h);
        if (cc == CURLE_OK) {
            long status = 0;
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
            r->status = (int)status;
            rc = 0;
            break;
        }
        if (cc == CURLE_WRITE_ERROR) { /* over max_body: not a transport problem */
            rc = cx_fail(err, errlen, CX_ETOOBIG, "%s %s: response over %zu bytes", method, url,
                         c->opts.max_body);
            break;
        }
        rc = cc == CURLE_OPERATION_TIMEDOUT ? CX_ETIMEDOUT : CX_EUNAVAIL;
    }
    curl_slist_free_all(list);
    if (rc == 0 && c->opts.observe)
        c->opts.observe(c->opts.observe_ctx, r);
    if (rc && rc != CX_ETOOBIG)
        cx_fail(err, errlen, rc, "%s %s: %s", method, url, curl_easy_strerror(cc));
    return rc;
}

int cx_http_json(cx_http_client *c, const char *method, const char *path, json_t *obj, int *status,
                 json_t **out, char *err, size_t errlen)
{
    char *body = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    if (obj && !body)
        return cx_fail(err, errlen, CX_ENOMEM, "cannot encode JSON");
    cx_http_result r;
    cx_http_result_init(&r);
    int rc = cx_http_do(c, method, path, NULL, body, body ? strlen(body) : 0,
                        body ? "application/json" : NULL, 0, &r, err, errlen);
    free(body);
    if (status)
        *status = r.status;
    if (out) {
        *out = NULL;
        if (rc == 0 && r.body.len)
            *out = json_loadb(r.body.data, r.body.len, 0, NULL);
    }
    cx_http_result_cleanup(&r);
    return rc;
}
