/* test_agent_hostile.c - the agent's findings of the security and crash
 * review (issue 13, "Agent — medium"), each replayed against a real agent
 * on 127.0.0.1 as the attacker made it, with raw HTTP where a client
 * library would not send such a request:
 *   - a web page (foreign Host through DNS rebinding, foreign Origin,
 *     Sec-Fetch-Site, text/plain bodies) cannot change anything on the
 *     Toxiproxy API in compat mode (refused before the token is checked);
 *   - %00 and invalid UTF-8 in a path get a 400, logged and audited, and
 *     act on nothing;
 *   - the token is checked before a body is read;
 *   - a token file others can read is refused;
 *   - the crash sweep touches only what the agent owns (forged records in
 *     faults.json: files outside the state dir, a symlink, "..", a foreign
 *     cgroup root, a foreign process).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_it.h"

static ag_echo g_echo;
static ag g_ag;

static void fini(void)
{
    ag_cleanup_all();
}

TestSuite(agent_hostile, .fini = fini, .timeout = 120);

static void start(const char *tag, int compat)
{
    ag_echo_start(&g_echo);
    static char proxy[128];
    snprintf(proxy, sizeof proxy, "up=127.0.0.1:0->127.0.0.1:%d", g_echo.port);
    const char *tp[] = {"--proxy", proxy, "--toxiproxy-compat", "--max-duration-ms", "20000", NULL};
    const char *plain[] = {"--proxy", proxy, "--max-duration-ms", "20000", NULL};
    ag_start(&g_ag, tag, compat ? tp : plain, NULL, NULL);
    ag_wait_running(&g_ag, 5000);
}

static void stop(void)
{
    ag_stop(&g_ag);
    ag_echo_stop(&g_echo);
}

static const char *hostport(void)
{
    return g_ag.url + strlen("http://");
}

/* The proxy "up" has no toxic and is enabled: nothing was changed. */
static void unchanged(void)
{
    int st = 0;
    json_t *p = ag_call(&g_ag, "GET", "/proxies/up", NULL, 1, &st);
    cr_assert_eq(st, 200);
    cr_assert(json_is_true(json_object_get(p, "enabled")), "proxy still enabled");
    cr_assert_eq(json_array_size(json_object_get(p, "toxics")), 0, "no toxic");
    json_decref(p);
    json_t *s = ag_status(&g_ag);
    cr_assert_eq(json_integer_value(json_object_get(s, "faults_active")), 0, "no fault");
    json_decref(s);
}

/* A raw POST with a JSON body and the given extra header lines. */
static int post(const char *path, const char *headers, const char *body, char *out, size_t outlen)
{
    char head[2048];
    snprintf(head, sizeof head, "POST %s HTTP/1.1\r\n%s%sContent-Length: %zu\r\nConnection: close", path,
             headers, headers[0] ? "\r\n" : "", strlen(body));
    return ag_raw(&g_ag, head, body, out, outlen, 5000);
}

/* The last audit line, or NULL. */
static json_t *last_audit(void)
{
    json_t *a = ag_audit(&g_ag);
    json_t *l = json_array_size(a) ? json_incref(json_array_get(a, json_array_size(a) - 1)) : NULL;
    json_decref(a);
    return l;
}

static void expect_audited(const char *method, int status, const char *path_part)
{
    json_t *l = last_audit();
    cr_assert_not_null(l, "an audit line");
    cr_assert_str_eq(js(l, "method"), method);
    cr_assert_eq(json_integer_value(json_object_get(l, "status")), status, "audited status");
    cr_assert(strstr(js(l, "path"), path_part), "audited path '%s' has '%s'", js(l, "path"), path_part);
    json_decref(l);
}

Test(agent_hostile, web_pages_cannot_reach_the_toxiproxy_api)
{
    start("hweb", 1);
    char out[4096], h[512];
    const char *toxic = "{\"type\":\"latency\",\"attributes\":{\"latency\":500}}";

    /* DNS rebinding: the page's own name in Host */
    snprintf(h, sizeof h, "Host: evil.example:%s\r\nContent-Type: application/json",
             strrchr(hostport(), ':') + 1);
    cr_assert_eq(post("/proxies/up/toxics", h, toxic, out, sizeof out), 403, "%s", out);
    cr_assert(strstr(out, "Host"), "the answer names the header: %s", out);
    expect_audited("POST", 403, "/proxies/up/toxics");
    unchanged();
    /* a foreign Origin, even with the right Host */
    snprintf(h, sizeof h, "Host: %s\r\nOrigin: http://evil.example\r\nContent-Type: application/json",
             hostport());
    cr_assert_eq(post("/proxies/up", h, "{\"enabled\":false}", out, sizeof out), 403, "%s", out);
    cr_assert(strstr(out, "Origin"));
    unchanged();
    snprintf(h, sizeof h, "Host: %s\r\nOrigin: null\r\nContent-Type: application/json", hostport());
    cr_assert_eq(post("/proxies/up", h, "{\"enabled\":false}", out, sizeof out), 403);
    snprintf(h, sizeof h, "Host: %s\r\nSec-Fetch-Site: cross-site\r\nContent-Type: application/json",
             hostport());
    cr_assert_eq(post("/proxies/up/toxics", h, toxic, out, sizeof out), 403);
    unchanged();
    /* the no-preflight content types a page can send */
    const char *types[] = {"text/plain", "application/x-www-form-urlencoded",
                           "multipart/form-data; boundary=x"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        snprintf(h, sizeof h, "Host: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s", hostport(),
                 AG_TOKEN, types[i]);
        cr_assert_eq(post("/proxies/up/toxics", h, toxic, out, sizeof out), 415, "%s: %s", types[i], out);
        cr_assert_eq(post("/proxies/up", h, "{\"enabled\":false}", out, sizeof out), 415);
        cr_assert_eq(post("/proxies/up", h, "{\"upstream\":\"127.0.0.1:1\"}", out, sizeof out), 415);
    }
    snprintf(h, sizeof h, "Host: %s\r\nAuthorization: Bearer %s", hostport(), AG_TOKEN);
    cr_assert_eq(post("/proxies/up/toxics", h, toxic, out, sizeof out), 415, "no Content-Type at all");
    expect_audited("POST", 415, "/proxies/up/toxics");
    unchanged();
    /* the v1 API too, even with the token */
    snprintf(h, sizeof h,
             "Host: %s\r\nOrigin: http://evil.example\r\nAuthorization: Bearer %s\r\nContent-Type: "
             "application/json",
             hostport(), AG_TOKEN);
    cr_assert_eq(post("/v1/halt", h, "{}", out, sizeof out), 403);
    snprintf(h, sizeof h, "Host: %s\r\nAuthorization: Bearer %s\r\nContent-Type: text/plain", hostport(),
             AG_TOKEN);
    cr_assert_eq(post("/v1/faults", h, "{\"type\":\"pause\",\"duration_ms\":1000}", out, sizeof out), 415);
    json_t *s = ag_status(&g_ag);
    cr_assert(json_is_false(json_object_get(s, "halted")));
    json_decref(s);
    unchanged();

    /* what a Toxiproxy client sends (with the token) still works: loopback Host, JSON, no Origin */
    snprintf(
        h, sizeof h,
        "Host: localhost:%s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json; charset=utf-8",
        strrchr(hostport(), ':') + 1, AG_TOKEN);
    cr_assert_eq(post("/proxies/up/toxics", h, toxic, out, sizeof out), 200, "%s", out);
    snprintf(h, sizeof h,
             "Host: %s\r\nOrigin: http://%s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json",
             hostport(), hostport(), AG_TOKEN);
    cr_assert_eq(post("/reset", h, "{}", out, sizeof out), 204, "same-origin: allowed");
    unchanged();
    stop();
}

/* Every mutating route of agent/api.c's table, the Toxiproxy subset
 * included: a foreign Origin (with the token) is 403, a bare-name Host is
 * 403, a non-JSON body (with the token) is 415, and none changes anything. */
Test(agent_hostile, every_mutating_route_checks_host_origin_and_body_type)
{
    start("hall", 1);
    static const char *const routes[][2] = {
        {"POST", "/v1/faults"},
        {"DELETE", "/v1/faults"},
        {"DELETE", "/v1/faults/f1"},
        {"POST", "/v1/halt"},
        {"POST", "/v1/resume"},
        {"POST", "/v1/lease"},
        {"POST", "/proxies"},
        {"POST", "/populate"},
        {"POST", "/proxies/up"},
        {"PATCH", "/proxies/up"},
        {"DELETE", "/proxies/up"},
        {"POST", "/proxies/up/toxics"},
        {"POST", "/proxies/up/toxics/t1"},
        {"PATCH", "/proxies/up/toxics/t1"},
        {"DELETE", "/proxies/up/toxics/t1"},
        {"POST", "/reset"},
    };
    const char *body = "{\"enabled\":false}";
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const char *m = routes[i][0], *path = routes[i][1];
        char head[1024], out[4096];
        snprintf(head, sizeof head,
                 "%s %s HTTP/1.1\r\nHost: %s\r\nOrigin: http://evil.example\r\nAuthorization: Bearer %s\r\n"
                 "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close",
                 m, path, hostport(), AG_TOKEN, strlen(body));
        cr_assert_eq(ag_raw(&g_ag, head, body, out, sizeof out, 5000), 403, "%s %s, foreign Origin: %s", m,
                     path, out);
        snprintf(head, sizeof head,
                 "%s %s HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer %s\r\n"
                 "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close",
                 m, path, AG_TOKEN, strlen(body));
        cr_assert_eq(ag_raw(&g_ag, head, body, out, sizeof out, 5000), 403, "%s %s, foreign Host: %s", m,
                     path, out);
        snprintf(head, sizeof head,
                 "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
                 "Content-Type: text/plain\r\nContent-Length: %zu\r\nConnection: close",
                 m, path, hostport(), AG_TOKEN, strlen(body));
        cr_assert_eq(ag_raw(&g_ag, head, body, out, sizeof out, 5000), 415, "%s %s, text/plain: %s", m, path,
                     out);
        unchanged();
        json_t *st = ag_status(&g_ag);
        cr_assert(json_is_false(json_object_get(st, "halted")), "%s %s did not halt the agent", m, path);
        cr_assert(json_is_null(json_object_get(st, "lease")), "%s %s took no lease", m, path);
        json_decref(st);
    }
    stop();
}

/* Reads too: a page that rebinds its own name to 127.0.0.1 must not read
 * the logs, status or proxies (403 on a foreign Host); the same read with a
 * loopback Host is answered. */
Test(agent_hostile, reads_under_a_foreign_host_are_refused)
{
    start("hread", 1);
    static const char *const paths[] = {"/v1/status", "/v1/logs", "/v1/faults", "/proxies", "/version", "/metrics"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char head[512], out[8192];
        snprintf(head, sizeof head, "GET %s HTTP/1.1\r\nHost: evil.example:%s\r\nConnection: close", paths[i],
                 strrchr(hostport(), ':') + 1);
        cr_assert_eq(ag_raw(&g_ag, head, NULL, out, sizeof out, 5000), 403, "GET %s, foreign Host: %s", paths[i],
                     out);
        snprintf(head, sizeof head, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close", paths[i], hostport());
        int st = ag_raw(&g_ag, head, NULL, out, sizeof out, 5000);
        cr_assert(st != 403 && st > 0, "GET %s, loopback Host: %d %s", paths[i], st, out);
    }
    stop();
}

Test(agent_hostile, nul_and_invalid_utf8_paths_are_refused_and_audited)
{
    start("hpath", 1);
    char out[4096], h[512];
    snprintf(h, sizeof h, "Host: %s\r\nContent-Type: application/json", hostport());
    /* %00 used to cut the path: POST /proxies/up%00/toxics acted on /proxies/up */
    cr_assert_eq(post("/proxies/up%00/toxics", h, "{\"enabled\":false}", out, sizeof out), 400, "%s", out);
    cr_assert(strstr(out, "NUL"), "%s", out);
    expect_audited("POST", 400, "/proxies/up");
    unchanged();
    cr_assert_eq(post("/proxies/up%00", h, "{\"enabled\":false}", out, sizeof out), 400);
    unchanged();
    char head[512];
    snprintf(head, sizeof head, "GET /proxies/up%%00 HTTP/1.1\r\nHost: %s\r\nConnection: close", hostport());
    cr_assert_eq(ag_raw(&g_ag, head, NULL, out, sizeof out, 5000), 400, "reads too");
    /* invalid UTF-8: refused, and the audit line is kept with the bytes escaped */
    cr_assert_eq(post("/proxies/%FF%FEup/toxics", h, "{\"type\":\"latency\"}", out, sizeof out), 400, "%s",
                 out);
    cr_assert(strstr(out, "UTF-8"), "%s", out);
    json_t *l = last_audit();
    cr_assert_not_null(l);
    cr_assert_eq(json_integer_value(json_object_get(l, "status")), 400);
    cr_assert(strstr(js(l, "path"), "\\xFF\\xFEup"), "escaped in the audit: %s", js(l, "path"));
    json_decref(l);
    /* a raw invalid byte (not percent-encoded) in the request line as well */
    snprintf(head, sizeof head,
             "POST /proxies/\xC3\x28/toxics HTTP/1.1\r\n%s\r\nContent-Length: 2\r\nConnection: close", h);
    int st = ag_raw(&g_ag, head, "{}", out, sizeof out, 5000);
    cr_assert(st == 400, "raw invalid UTF-8 -> %d", st);
    unchanged();
    /* the human log says so too */
    char log[700], line[65536];
    snprintf(log, sizeof log, "%s/%s.log", g_ag.dir, g_ag.name);
    FILE *f = fopen(log, "r");
    int logged = 0;
    while (f && fgets(line, sizeof line, f))
        logged |= strstr(line, "refused POST") && strstr(line, "-> 400");
    if (f)
        fclose(f);
    cr_assert(logged, "a log line for the refused path");
    stop();
}

Test(agent_hostile, the_token_is_checked_before_the_body_is_read)
{
    start("hauth", 0);
    char out[4096], head[1024];
    /* headers announce 60 KB that never come: the 401 must not wait for them */
    snprintf(head, sizeof head,
             "POST /v1/faults HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: "
             "60000\r\nConnection: close",
             hostport());
    int64_t t0 = cx_mono_ms();
    cr_assert_eq(ag_raw(&g_ag, head, NULL, out, sizeof out, 10000), 401, "%s", out);
    int64_t waited = cx_mono_ms() - t0;
    cr_assert_lt(waited, 8000, "answered without the body (%lld ms)", (long long)waited);
    /* a wrong token, and a body far over the cap: still 401, not 413 */
    snprintf(head, sizeof head,
             "POST /proxies/up/toxics HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer wrong-token-0000\r\n"
             "Content-Type: application/json\r\nContent-Length: 100000000\r\nConnection: close",
             hostport());
    cr_assert_eq(ag_raw(&g_ag, head, NULL, out, sizeof out, 10000), 401, "%s", out);
    expect_audited("POST", 401, "/proxies/up/toxics");
    /* an unknown route is answered before its body as well */
    snprintf(head, sizeof head,
             "POST /v1/nothing HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000000\r\nConnection: close",
             hostport());
    cr_assert_eq(ag_raw(&g_ag, head, NULL, out, sizeof out, 10000), 404, "%s", out);
    unchanged();
    /* with the token the same request goes through (the body is read then) */
    int st = 0;
    json_t *r = ag_call(&g_ag, "POST", "/proxies/up/toxics", "{\"type\":\"latency\"}", 1, &st);
    cr_assert_eq(st, 200);
    json_decref(r);
    stop();
}

Test(agent_hostile, a_token_file_others_can_read_is_refused)
{
    char *dir = it_mkdtemp("htok");
    char tok[600], st[600];
    ag_write_token(dir, tok, sizeof tok);
    snprintf(st, sizeof st, "%s/state", dir);
    const mode_t modes[] = {0644, 0640, 0604, 0666, 0602, 0620}; /* readable or writable by others */
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        chmod(tok, modes[i]);
        const char *args[] = {"agent", "--id", "htok",  "--state-dir", st,  "--token-file",
                              tok,     "--",   "sleep", "1",           NULL};
        char name[32], path[700], line[4096];
        snprintf(name, sizeof name, "mode%zu", i);
        pid_t pid = it_start(dir, name, args, NULL);
        int ws = it_wait_exit(pid, 10000);
        cr_assert(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 64, "mode %o: exit 64 (got %d)", modes[i],
                  ws);
        snprintf(path, sizeof path, "%s/%s.log", dir, name);
        FILE *lf = fopen(path, "r");
        cr_assert_not_null(lf);
        int named = 0;
        while (fgets(line, sizeof line, lf))
            named |= strstr(line, "--token-file") && strstr(line, "chmod 600");
        fclose(lf);
        cr_assert(named, "mode %o: the message names the flag and the fix", modes[i]);
    }
    free(dir);
}

/* ---- the crash sweep ---- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "write %s", path);
    fputs(text, f);
    fclose(f);
}

static void expect_file(const char *path, const char *text)
{
    char got[256];
    ag_read_line(path, got, sizeof got);
    cr_assert_str_eq(got, text, "%s untouched", path);
}

/* The swept record of fault id: its state and error. */
static void swept(const char *id, const char *want_state, const char *error_part)
{
    char state[32], reason[32];
    ag_fault_state(&g_ag, id, state, sizeof state, reason, sizeof reason);
    cr_assert_str_eq(state, want_state, "fault %s", id);
    cr_assert_str_eq(reason, "agent_restart");
    if (error_part) {
        int st = 0;
        char path[64];
        snprintf(path, sizeof path, "/v1/faults/%s", id);
        json_t *r = ag_call(&g_ag, "GET", path, NULL, 1, &st);
        cr_assert(strstr(js(r, "error"), error_part), "fault %s error '%s' has '%s'", id, js(r, "error"),
                  error_part);
        json_decref(r);
    }
}

Test(agent_hostile, the_crash_sweep_touches_only_what_the_agent_owns)
{
    ag_start(&g_ag, "hsweep", (const char *[]){"--no-cgroup", NULL}, NULL, NULL);
    ag_stop(&g_ag);
    g_ag.dir = it_mkdtemp("hsweep-victims"); /* ag_stop freed it; a fresh dir for the victims and logs */
    char victim[700], victim2[700], victim3[700], link[700], nan[700], cgroot[700], cgfile[900];
    snprintf(victim, sizeof victim, "%s/victim", g_ag.dir);
    snprintf(victim2, sizeof victim2, "%s/victim2", g_ag.dir);
    snprintf(victim3, sizeof victim3, "%s/../victim3", g_ag.state); /* next to the state dir */
    write_file(victim, "precious\n");
    write_file(victim2, "precious\n");
    write_file(victim3, "precious\n");
    snprintf(link, sizeof link, "%s/diskfault-link", g_ag.state);
    cr_assert_eq(symlink(victim2, link), 0);
    snprintf(nan, sizeof nan, "%s/hooks/nan", g_ag.state);
    write_file(nan, "3\n");
    /* a fake cgroup v2 tree whose memory.max must not be rewritten */
    snprintf(cgroot, sizeof cgroot, "%s/cg", g_ag.dir);
    snprintf(cgfile, sizeof cgfile, "%s/chaosloco/other", cgroot);
    char cmd[1000];
    snprintf(cmd, sizeof cmd, "%s/chaosloco", cgroot);
    mkdir(cgroot, 0755);
    mkdir(cmd, 0755);
    mkdir(cgfile, 0755);
    write_file(strcat(cgfile, "/memory.max"), "12345\n");
    snprintf(cmd, sizeof cmd, "%s/cgroup.controllers", cgroot);
    write_file(cmd, "memory\n");
    /* a process that is not the unit, stopped: a forged SIGCONT must not reach it */
    const char *sl[] = {"sleep", "1000", NULL};
    pid_t foreign = it_start_prog(g_ag.dir, "foreign", sl, NULL);
    cr_assert(ag_wait_proc(foreign, "S", 5000));
    kill(foreign, SIGSTOP);
    cr_assert(ag_wait_proc(foreign, "T", 5000));
    char fstart[64];
    {
        char statp[64], buf[1024];
        snprintf(statp, sizeof statp, "/proc/%d/stat", (int)foreign);
        ag_read_line(statp, buf, sizeof buf);
        char *rp = strrchr(buf, ')');
        unsigned long long start = 0;
        int field = 2;
        for (char *t = strtok(rp + 2, " "); t; t = strtok(NULL, " "))
            if (++field == 22) {
                start = strtoull(t, NULL, 10);
                break;
            }
        snprintf(fstart, sizeof fstart, "%llu", start);
    }

    char faults[8192];
    snprintf(
        faults, sizeof faults,
        "{\"version\":1,\"next_id\":20,\"faults\":["
        "{\"id\":\"f-11\",\"type\":\"clock\",\"target\":\"unit\",\"lease\":false,\"created_real\":\"x\","
        "\"undo\":{\"file\":\"%s\"}},"
        "{\"id\":\"f-12\",\"type\":\"disk\",\"target\":\"unit\",\"lease\":false,\"created_real\":\"x\","
        "\"undo\":{\"file\":\"%s\"}},"
        "{\"id\":\"f-13\",\"type\":\"nan\",\"target\":\"unit\",\"lease\":false,\"created_real\":\"x\","
        "\"undo\":{\"file\":\"%s/hooks/../../victim3\"}},"
        "{\"id\":\"f-14\",\"type\":\"memory\",\"target\":\"unit\",\"lease\":false,\"created_real\":\"x\","
        "\"undo\":{\"cgroup_root\":\"%s\",\"unit_id\":\"other\"}},"
        "{\"id\":\"f-15\",\"type\":\"pause\",\"target\":\"unit\",\"lease\":false,\"created_real\":\"x\","
        "\"undo\":{\"method\":\"signal\",\"pid\":%d,\"starttime\":%s,\"cgroup_root\":\"\",\"unit_id\":\"\"}},"
        "{\"id\":\"f-16\",\"type\":\"nan\",\"target\":\"unit\",\"lease\":false,\"created_real\":\"x\","
        "\"undo\":{\"file\":\"%s\",\"extra\":\"/etc/passwd\"}},"
        "{\"id\":\"f-17\",\"type\":\"nan\",\"target\":\"unit\",\"lease\":false,\"created_real\":\"x\","
        "\"undo\":{\"file\":\"%s\"}}]}",
        victim, link, g_ag.state, cgroot, (int)foreign, fstart, nan, nan);
    char fpath[700];
    snprintf(fpath, sizeof fpath, "%s/faults.json", g_ag.state);
    write_file(fpath, faults);

    ag_start(&g_ag, "hsweep", (const char *[]){"--no-cgroup", NULL}, NULL, &g_ag);
    expect_file(victim, "precious");
    expect_file(victim2, "precious");
    expect_file(victim3, "precious");
    expect_file(cgfile, "12345");
    cr_assert_eq(uproc_state(foreign), 'T', "the foreign process is still stopped");
    swept("f-11", "failed", "outside the state dir");
    swept("f-12", "failed", "symbolic link");
    swept("f-13", "failed", "'..'");
    swept("f-14", "failed", "cgroup_root");
    swept("f-15", "failed", "not this agent's unit");
    swept("f-16", "failed", "'extra'");
    swept("f-17", "reverted", NULL); /* a record of its own: swept */
    cr_assert_neq(access(nan, F_OK), 0, "the legitimate record was swept (hook file removed)");
    kill(foreign, SIGCONT);
    ag_stop(&g_ag);
}
