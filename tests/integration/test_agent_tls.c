/* test_agent_tls.c - the agent API fit to cross hosts (issue 26), run as an
 * operator would across an untrusted network, on 127.0.0.1 with a CA made
 * at test time by openssl:
 *
 *   - the syncer and an agent serve HTTPS (--tls-cert/--tls-key) with a
 *     certificate for localhost; the agent has a token of its own, which
 *     every call but GET /v1/health needs, reads included;
 *   - the agent's learner reaches the syncer through the agent's proxy
 *     (--syncer-via {proxy.syncer}) while checking the certificate against
 *     the syncer's name (--syncer https://localhost:PORT --ca-file), and a
 *     learner told a name the certificate does not carry is refused;
 *   - `chaosloco run` in attach mode names the CA (topology.attach.ca_file)
 *     and the agent's own token file (agents[0].token_file), injects,
 *     reverts and reaches a passing verdict.
 *
 * Skipped, saying why, when libmicrohttpd lacks TLS or openssl is missing. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_it.h"
#include "common/clock.h"
#include "common/http_client.h"
#include "harness_it.h"
#include "tls_it.h"

static void fini(void)
{
    it_cleanup();
}

TestSuite(agent_tls, .fini = fini, .timeout = 240);

#define TLS_TOKEN "tls-agent-0-token-5e1f27"

/* GET base+path with the given bearer and CA (either may be NULL): the
 * status, 0 when no answer came (a refused certificate). */
static int get_status(const char *base, const char *path, const char *bearer, const char *ca, json_t **out)
{
    cx_http_opts o = {.bearer = bearer, .ca_file = ca, .timeout_ms = 10000};
    cx_http_client *c = cx_http_client_new(base, &o);
    cr_assert_not_null(c);
    cx_http_result r;
    cx_http_result_init(&r);
    int st = cx_http_do(c, "GET", path, NULL, NULL, 0, NULL, 0, &r, NULL, 0) == 0 ? r.status : 0;
    if (out)
        *out = st ? json_loadb(r.body.data ? r.body.data : "", r.body.len, 0, NULL) : NULL;
    cx_http_result_cleanup(&r);
    cx_http_client_free(c);
    return st;
}

/* The port of "HOST:PORT". */
static int port_of(const char *addr)
{
    const char *c = strrchr(addr, ':');
    cr_assert_not_null(c, "%s", addr);
    return atoi(c + 1);
}

Test(agent_tls, agents_and_syncer_over_https_with_a_named_ca)
{
    tls_skip_unless_possible();
    char *dir = it_mkdtemp("atls");
    tls_make_ca_and_cert(dir, "localhost", "DNS:localhost,IP:127.0.0.1");
    char ca[600], cert[600], key[600];
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(cert, sizeof cert, "%s/srv.pem", dir);
    snprintf(key, sizeof key, "%s/srv.key", dir);

    /* the syncer over https */
    char sstate[700], saddr[128];
    snprintf(sstate, sizeof sstate, "%s/syncer", dir);
    const char *sargs[] = {"syncer",     "--listen",   "127.0.0.1:0", "--state-dir", sstate, IT_MLP,
                           "--mode",     "decoupled",  "--learners",  "1",           "--quorum", "1",
                           "--fragments", "2",         "--H",         "4",           "--hidden", "32",
                           "--batch",    "4",          "--steps",     "100000000",   "--eval-every-ms", "300",
                           "--tls-cert", cert,         "--tls-key",   key,           NULL};
    it_start(dir, "syncer", sargs, NULL);
    cr_assert_eq(it_wait_addr(sstate, saddr, sizeof saddr, 20000), 0, "syncer listen.addr");
    char syncer_url[200];
    snprintf(syncer_url, sizeof syncer_url, "https://localhost:%d", port_of(saddr));

    /* agent 0 over https with its own token; its learner goes through the
     * proxy and checks the syncer's certificate against "localhost" */
    char tok[700], astate[700], aaddr[128], proxy[200], lstate[700], lcred[800];
    snprintf(tok, sizeof tok, "%s/agent-0.token", dir);
    hx_write(tok, TLS_TOKEN "\n");
    cr_assert_eq(chmod(tok, 0600), 0);
    snprintf(astate, sizeof astate, "%s/agent0", dir);
    snprintf(proxy, sizeof proxy, "syncer=127.0.0.1:0->%s", saddr);
    snprintf(lstate, sizeof lstate, "%s/learner0", dir);
    snprintf(lcred, sizeof lcred, "%s/credentials/learner-0.cred", sstate);
    char id[48];
    snprintf(id, sizeof id, "it-atls-%d", (int)getpid());
    const char *aargs[] = {"agent",      "--listen",  "127.0.0.1:0",  "--id",       id,
                           "--state-dir", astate,     "--token-file", tok,          "--tls-cert",
                           cert,         "--tls-key", key,            "--proxy",    proxy,
                           "--restart",  "on-failure", "--no-cgroup", "--",         CHAOSLOCO_BIN,
                           "learner",    "--syncer",  syncer_url,     "--syncer-via", "{proxy.syncer}",
                           "--ca-file",  ca,          "--id",         "0",          "--state-dir",
                           lstate,       "--credential-file", lcred,  "--steps",    "100000000",
                           NULL};
    it_start(dir, "agent0", aargs, NULL);
    cr_assert_eq(it_wait_addr(astate, aaddr, sizeof aaddr, 20000), 0, "agent listen.addr");
    char agent_url[200];
    snprintf(agent_url, sizeof agent_url, "https://localhost:%d", port_of(aaddr));

    /* the agent's API: https with the CA and its token only */
    json_t *st = NULL;
    cr_assert_eq(get_status(agent_url, "/v1/status", TLS_TOKEN, ca, &st), 200, "status with the CA and token");
    json_decref(st);
    cr_assert_eq(get_status(agent_url, "/v1/status", NULL, ca, NULL), 401, "a read without the token");
    cr_assert_eq(get_status(agent_url, "/v1/logs", "another-agents-token", ca, NULL), 401, "a wrong token");
    cr_assert_eq(get_status(agent_url, "/v1/health", NULL, ca, NULL), 200, "health needs no token");
    cr_assert_eq(get_status(agent_url, "/v1/status", TLS_TOKEN, NULL, NULL), 0, "an unknown CA is refused");
    char plain[200];
    snprintf(plain, sizeof plain, "http://%s", aaddr);
    cr_assert_neq(get_status(plain, "/v1/status", TLS_TOKEN, NULL, NULL), 200, "no plain HTTP on the TLS port");

    /* the learner trains through the proxy, over TLS to the syncer's name */
    int64_t end = cx_mono_ms() + 90000;
    long long merges = 0, relayed = 0;
    while (cx_mono_ms() < end && (merges < 2 || relayed == 0)) {
        json_t *s = NULL;
        if (get_status(syncer_url, "/v1/status", NULL, ca, &s) == 200)
            merges = json_integer_value(json_object_get(s, "merges"));
        json_decref(s);
        json_t *a = NULL;
        if (get_status(agent_url, "/v1/status", TLS_TOKEN, ca, &a) == 200) {
            json_t *px = json_array_get(json_object_get(a, "proxies"), 0);
            relayed = json_integer_value(json_object_get(json_object_get(px, "stats"), "bytes_up"));
        }
        json_decref(a);
        cx_sleep_ms(300);
    }
    if (merges < 2) {
        it_dump_log(dir, "agent0");
        it_dump_log(dir, "syncer");
    }
    cr_assert_geq(merges, 2, "the learner's contributions merged over https (merges=%lld)", merges);
    cr_assert_gt(relayed, 0, "through the agent's proxy (bytes up %lld)", relayed);

    /* a name the certificate does not carry: refused, though the address is right */
    char wrong[200], lstate2[700];
    snprintf(wrong, sizeof wrong, "https://other.test:%d", port_of(saddr));
    snprintf(lstate2, sizeof lstate2, "%s/learner-wrong", dir);
    const char *wargs[] = {"learner", "--syncer",  wrong,  "--syncer-via", saddr,     "--ca-file",
                           ca,        "--id",      "0",    "--state-dir",  lstate2,   "--credential-file",
                           lcred,     "--give-up-s", "2",  NULL};
    pid_t w = it_start(dir, "learner-wrong", wargs, NULL);
    int ws = it_wait_exit(w, 60000);
    cr_assert(ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) != 0, "a learner told another name gives up");
    char wlog[800];
    snprintf(wlog, sizeof wlog, "%s/learner-wrong.log", dir);
    char *wl = hx_read(wlog);
    cr_assert(wl && strstr(wl, "other.test"), "its error names the host the certificate lacks: %s",
              wl ? wl : "(no log)");
    free(wl);

    /* the harness in attach mode: the named CA, the agent's own token file */
    char path[700], out[700], admin[800], doc[4096];
    snprintf(path, sizeof path, "%s/attach.json", dir);
    snprintf(out, sizeof out, "%s/run", dir);
    snprintf(admin, sizeof admin, "%s/credentials/admin.cred", sstate);
    snprintf(doc, sizeof doc,
             "{\"title\": \"attach over https\", \"seed\": 4,"
             " \"topology\": {\"learners\": 1, \"attach\": {\"syncer\": \"%s\","
             " \"agents\": [{\"url\": \"%s\", \"token_file\": \"%s\"}], \"ca_file\": \"%s\","
             " \"syncer_credential_file\": \"%s\"}},"
             " \"method\": [{\"name\": \"nan-0\", \"fault\": \"nan\", \"targets\": {\"ids\": [0]},"
             " \"at_s\": 0, \"params\": {\"count\": 1}, \"duration_ms\": 3000}],"
             " \"verify\": [{\"hypothesis\": \"fault_effective\"}, {\"hypothesis\": \"versions_monotonic\"}]}",
             syncer_url, agent_url, tok, ca, admin);
    hx_write(path, doc);
    const char *rargs[] = {"run", path, "--out", out, "--time-limit", "60", NULL};
    int rc = hx_run(dir, "run", rargs, 100000);
    cr_assert_eq(rc, 0, "the attach run over https exits 0 (got %d)", rc);
    json_t *fl = NULL;
    cr_assert_eq(get_status(agent_url, "/v1/faults", TLS_TOKEN, ca, &fl), 200);
    json_t *rec = json_array_get(json_object_get(fl, "faults"), 0);
    cr_assert_not_null(rec, "the agent holds the nan fault record");
    cr_expect_str_neq(json_string_value(json_object_get(rec, "state")), "active", "no fault left active");
    json_decref(fl);
    free(dir);
}
