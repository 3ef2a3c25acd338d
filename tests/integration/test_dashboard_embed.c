/* test_dashboard_embed.c - dash_server embedded in a process, the way the
 * harness runs it (`chaosloco run --dashboard ADDR`): what the harness
 * pushes (hypotheses, progress, its own events) shows in /api/state and on
 * the event stream; bad pushes are refused and change nothing; a server
 * without a token refuses controls; free() ends open event streams.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/file.h"
#include "common/json.h"
#include "dashboards/assets.h"
#include "dashboards/server.h"
#include "support.h"

TestSuite(dashboard_embed, .timeout = 60);

static json_t *get_state(dash_server *s, int *status)
{
    char url[128];
    snprintf(url, sizeof url, "%sapi/state", dash_server_url(s));
    return it_http_json("GET", url, NULL, NULL, status);
}

Test(dashboard_embed, harness_pushes_show_in_the_state)
{
    char err[CX_ERRLEN];
    char *dir = it_mkdtemp("dash-embed");
    dash_config cfg = {.listen = "127.0.0.1:0", .state_dir = dir, .title = "exp-1", .poll_ms = 100};
    dash_server *s = dash_server_new(&cfg, err, sizeof err);
    cr_assert(s, "%s", err);
    cr_assert_gt(dash_server_port(s), 0);
    /* listen.addr names the bound port */
    char path[512], want[64];
    snprintf(path, sizeof path, "%s/listen.addr", dir);
    snprintf(want, sizeof want, "127.0.0.1:%d\n", dash_server_port(s));
    char *data = NULL;
    size_t len = 0;
    cr_assert_eq(cx_file_read(path, 1024, &data, &len, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(data, want);
    free(data);

    json_t *hyps =
        json_pack("[{s:s,s:s,s:s,s:f,s:f,s:s,s:s,s:s},{s:s,s:s}]", "name", "loss_continuity", "status",
                  "pass", "phase", "verify", "measured", 0.04, "threshold", 0.1, "cmp", "<=", "unit", "rel",
                  "explanation", "max jump 4%", "name", "reintegration", "status", "running");
    cr_assert_eq(dash_server_set_hypotheses(s, hyps, err, sizeof err), 0, "%s", err);
    json_decref(hyps);
    dash_server_set_progress(s, "method", 12000, 48000);
    json_t *ev = json_pack("{s:s,s:s,s:s}", "type", "action", "phase", "invoke", "name", "kill-2");
    cr_assert_eq(dash_server_push_event(s, ev, err, sizeof err), 0, "%s", err);
    json_decref(ev);

    int status = 0;
    json_t *st = get_state(s, &status);
    cr_assert_eq(status, 200);
    cr_assert_str_eq(json_string_value(json_object_get(st, "title")), "exp-1");
    cr_assert(json_is_false(json_object_get(st, "controls")), "no token: controls off");
    json_t *h = json_object_get(st, "hypotheses");
    cr_assert_eq(json_array_size(h), 2);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(h, 0), "status")), "pass");
    cr_assert_float_eq(json_number_value(json_object_get(json_array_get(h, 0), "measured")), 0.04, 1e-12);
    json_t *p = json_object_get(st, "progress");
    cr_assert_str_eq(json_string_value(json_object_get(p, "phase")), "method");
    cr_assert_eq(json_integer_value(json_object_get(p, "remaining_ms")), 48000);
    json_t *e = json_array_get(json_object_get(st, "events"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(e, "source")), "harness");
    cr_assert_str_eq(json_string_value(json_object_get(e, "name")), "kill-2");
    cr_assert(json_is_integer(json_object_get(e, "t_mono_ms")));
    json_decref(st);

    /* the C snapshot is the same document */
    json_t *snap = dash_server_snapshot(s);
    cr_assert_eq(json_array_size(json_object_get(snap, "hypotheses")), 2);
    json_decref(snap);

    /* bad pushes: refused, nothing changes */
    json_t *bad = json_pack("[{s:s,s:s,s:i}]", "name", "x", "status", "pass", "bogus", 1);
    cr_assert_eq(dash_server_set_hypotheses(s, bad, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "bogus"), "the error names the key: %s", err);
    json_decref(bad);
    bad = json_pack("[{s:s,s:s}]", "name", "x", "status", "maybe");
    cr_assert_eq(dash_server_set_hypotheses(s, bad, err, sizeof err), CX_EINVAL);
    json_decref(bad);
    bad = json_pack("{s:i}", "no_type", 1);
    cr_assert_eq(dash_server_push_event(s, bad, err, sizeof err), CX_EINVAL);
    json_decref(bad);
    st = get_state(s, &status);
    cr_assert_eq(json_array_size(json_object_get(st, "hypotheses")), 2);
    cr_assert_eq(json_array_size(json_object_get(st, "events")), 1);
    json_decref(st);

    /* controls without a configured token: 403, not forwarded anywhere */
    char url[128];
    snprintf(url, sizeof url, "%sapi/halt", dash_server_url(s));
    json_t *out = it_http_json("POST", url, NULL, "anything", &status);
    cr_assert_eq(status, 403);
    json_decref(out);
    dash_server_free(s);
    free(dir);
}

/* ---- free() ends an open event stream ---- */

typedef struct stream_arg {
    char url[128];
    cx_buf got;
    CURLcode rc;
    int64_t ended_mono_ms;
} stream_arg;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
    stream_arg *a = ud;
    cx_buf_append(&a->got, ptr, size * nmemb);
    return size * nmemb;
}

static void *stream_main(void *arg)
{
    stream_arg *a = arg;
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, a->url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
    a->rc = curl_easy_perform(c);
    a->ended_mono_ms = cx_mono_ms();
    curl_easy_cleanup(c);
    return NULL;
}

Test(dashboard_embed, free_ends_open_streams_and_pushes_reach_them)
{
    char err[CX_ERRLEN];
    dash_config cfg = {.listen = "127.0.0.1:0", .poll_ms = 100, .sse_heartbeat_ms = 200};
    dash_server *s = dash_server_new(&cfg, err, sizeof err);
    cr_assert(s, "%s", err);
    stream_arg a = {0};
    cx_buf_init(&a.got, 8 << 20);
    snprintf(a.url, sizeof a.url, "%sapi/events", dash_server_url(s));
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stream_main, &a), 0);
    cx_sleep_ms(600);
    json_t *ev = json_pack("{s:s,s:s}", "type", "action", "name", "pushed-while-streaming");
    cr_assert_eq(dash_server_push_event(s, ev, err, sizeof err), 0);
    json_decref(ev);
    cx_sleep_ms(600);
    int64_t t = cx_mono_ms();
    dash_server_free(s);
    int64_t freed = cx_mono_ms();
    pthread_join(th, NULL);
    cr_assert_lt(freed - t, 5000, "free took %lld ms with a stream open", (long long)(freed - t));
    cr_assert_eq(a.rc, CURLE_OK, "the stream ended cleanly: %s", curl_easy_strerror(a.rc));
    cr_assert_lt(a.ended_mono_ms - t, 5000);
    cr_assert(strstr(a.got.data, "event: snapshot"));
    cr_assert(strstr(a.got.data, "pushed-while-streaming"), "the pushed event reached the stream");
    cr_assert(strstr(a.got.data, "event: update"));
    cx_buf_cleanup(&a.got);
}

Test(dashboard_embed, bad_configs_are_refused)
{
    char err[CX_ERRLEN];
    dash_config cfg = {.listen = "127.0.0.1:0", .syncer_url = "ftp://x"};
    cr_assert_null(dash_server_new(&cfg, err, sizeof err));
    cr_assert(strstr(err, "syncer"), "%s", err);
    const char *urls[] = {"127.0.0.1:9"};
    dash_config cfg2 = {.listen = "127.0.0.1:0", .agent_urls = urls, .nagents = 1};
    cr_assert_null(dash_server_new(&cfg2, err, sizeof err));
    cr_assert(strstr(err, "agent"), "%s", err);
    dash_config cfg3 = {.listen = "nohost:99999"};
    cr_assert_null(dash_server_new(&cfg3, err, sizeof err));
    /* every embedded asset has a content type and the page is there */
    cr_assert(dash_asset_find("index.html") && dash_asset_find("app.js") && dash_asset_find("charts.js"));
    cr_assert(dash_asset_find("uPlot.iife.min.js") && dash_asset_find("uPlot.min.css"));
    for (const dash_asset *x = dash_assets; x->name; x++) {
        cr_assert(x->content_type && *x->content_type);
        cr_assert_eq(x->data[x->len], 0, "%s is NUL-terminated", x->name);
    }
}

/* ---- DNS rebinding: a foreign Host header is refused ---- */

static long get_with_host(const char *url, const char *host_header)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, host_header);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_NOBODY, 0L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    stream_arg sink = {0};
    cx_buf_init(&sink.got, 1 << 20);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    cx_buf_cleanup(&sink.got);
    return code;
}

Test(dashboard_embed, loopback_dashboard_refuses_foreign_host_headers)
{
    char err[CX_ERRLEN];
    dash_config cfg = {.listen = "127.0.0.1:0"};
    dash_server *s = dash_server_new(&cfg, err, sizeof err);
    cr_assert(s, "%s", err);
    char url[128], host[64];
    snprintf(url, sizeof url, "%sapi/state", dash_server_url(s));
    cr_assert_eq(get_with_host(url, "Host: evil.example:80"), 403);
    cr_assert_eq(get_with_host(url, "Host: 127.0.0.1.evil.example"), 403);
    snprintf(url, sizeof url, "%sapi/events", dash_server_url(s));
    cr_assert_eq(get_with_host(url, "Host: evil.example"), 403, "the event stream too");
    snprintf(url, sizeof url, "%sapi/state", dash_server_url(s));
    snprintf(host, sizeof host, "Host: localhost:%d", dash_server_port(s));
    cr_assert_eq(get_with_host(url, host), 200);
    snprintf(host, sizeof host, "Host: 127.0.0.1:%d", dash_server_port(s));
    cr_assert_eq(get_with_host(url, host), 200);
    dash_server_free(s);
}

/* ---- the Grafana dashboard only uses metric names the processes export ---- */

Test(dashboard_embed, grafana_dashboard_uses_exported_metric_names)
{
    char err[CX_ERRLEN];
    json_t *g = cx_json_load_file(CHAOSLOCO_SRC "/dashboards/grafana/chaosloco.json", err, sizeof err);
    cr_assert(g, "%s", err);
    /* the exporters' sources: each name must be printed by one of them */
    const char *srcs[] = {CHAOSLOCO_SRC "/trainer/syncer/metrics.c", CHAOSLOCO_SRC "/agent/metrics.c"};
    char *text[2] = {NULL, NULL};
    size_t len;
    for (int i = 0; i < 2; i++)
        if (cx_file_read(srcs[i], 16 << 20, &text[i], &len, err, sizeof err) != 0)
            cr_skip_test("exporter source missing (%s): cannot cross-check", err);
    int checked = 0;
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(g, "panels"), i, p)
    {
        size_t k;
        json_t *t;
        json_array_foreach(json_object_get(p, "targets"), k, t)
        {
            const char *e = json_string_value(json_object_get(t, "expr"));
            cr_assert(e, "panel %zu target %zu has no expr", i, k);
            for (const char *m = strstr(e, "chaosloco_"); m; m = strstr(m + 1, "chaosloco_")) {
                char name[128];
                size_t n = strspn(m, "abcdefghijklmnopqrstuvwxyz_");
                cr_assert_lt(n, sizeof name);
                memcpy(name, m, n);
                name[n] = '\0';
                /* the syncer prints learner families as "chaosloco_syncer_%s" of a table */
                const char *tail = strncmp(name, "chaosloco_syncer_", 17) == 0 ? name + 17 : name;
                int found =
                    strstr(text[0], name) || strstr(text[1], name) || (tail != name && strstr(text[0], tail));
                cr_assert(found, "the Grafana dashboard uses %s, which no exporter prints", name);
                checked++;
                m += n - 1;
            }
        }
    }
    cr_assert_gt(checked, 20);
    free(text[0]);
    free(text[1]);
    json_decref(g);
}
