/* halt_main.c - `chaosloco halt --agents URL,...`: POST /v1/halt on every
 * agent at once (each reverts every fault and refuses new ones until
 * POST /v1/resume; agc_fanout, common/agent_client.h), report each result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/agent_client.h"
#include "common/commands.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/secret.h"

#define HALT_MAX_AGENTS 256

static void usage(FILE *f)
{
    fprintf(f, "usage: chaosloco halt --agents URL[,URL...] [--token-file FILE] [--timeout-ms N]\n\n"
               "POST /v1/halt on every agent in parallel: each reverts every fault it holds and refuses\n"
               "new ones until POST /v1/resume. Prints one line per agent.\n\n"
               "  --agents URLS       comma-separated agent base URLs (http://127.0.0.1:PORT), required\n"
               "  --token-file FILE   the agents' bearer token (first line); halt is a mutating call\n"
               "  --timeout-ms N      per-agent request timeout, 100..60000 (default 5000)\n"
               "  --help              this text\n\n"
               "exit: 0 every agent halted, 1 some agent failed or did not answer, 64 usage error\n");
}

/* One line for one agent's answer; 0 when it halted. */
static int report(const char *url, const agc_fan_result *r)
{
    const json_t *ans = r->reply.json;
    if (r->reply.status == 200) {
        json_t *rev = json_object_get(ans, "reverted");
        printf("%s: halted, %lld faults reverted\n", url,
               json_is_integer(rev) ? (long long)json_integer_value(rev) : -1LL);
        return 0;
    }
    if (r->reply.status) {
        const char *e = json_string_value(json_object_get(ans, "error"));
        printf("%s: FAILED: HTTP %d: %s\n", url, r->reply.status, e ? e : "");
    } else {
        printf("%s: FAILED: no answer: %s\n", url, r->err[0] ? r->err : "unreachable");
    }
    return 1;
}

int halt_main(int argc, char **argv)
{
    cx_log_init("halt", CX_LOG_WARN);
    const char *agents = NULL, *token_file = NULL;
    int64_t timeout_ms = 5000;
    const cx_flag flags[] = {
        {.name = "--agents", .kind = CX_FLAG_STRING, .dst = &agents},
        {.name = "--token-file", .kind = CX_FLAG_STRING, .dst = &token_file},
        {.name = "--timeout-ms", .kind = CX_FLAG_I64, .dst = &timeout_ms, .min = 100, .max = 60000},
        {0}};
    int npos = 0;
    int rc0 = cx_flags_parse("chaosloco halt", argc, argv, flags, NULL, NULL, 0, &npos, usage);
    if (rc0 != CX_FLAGS_OK)
        return rc0;
    if (!agents || !agents[0]) {
        fprintf(stderr, "chaosloco halt: --agents is required\n");
        return CX_EXIT_USAGE;
    }
    char token[512] = "";
    if (token_file) {
        char *data = NULL;
        size_t len = 0;
        char err[CX_ERRLEN];
        if (cx_secret_read(token_file, "--token-file", 4096, &data, &len, err, sizeof err) < 0) {
            fprintf(stderr, "chaosloco halt: %s\n", err);
            return CX_EXIT_USAGE;
        }
        char *nl = strpbrk(data, "\r\n");
        if (nl)
            *nl = '\0';
        snprintf(token, sizeof token, "%s", data);
        memset(data, 0, len);
        free(data);
    }
    char *list = strdup(agents);
    const char **urls = calloc(HALT_MAX_AGENTS, sizeof *urls);
    agc_fan_result *res = calloc(HALT_MAX_AGENTS, sizeof *res);
    if (!list || !urls || !res) {
        free(list);
        free(urls);
        free(res);
        return CX_EXIT_FAILURE;
    }
    int n = 0, rc = CX_EXIT_OK;
    char *save = NULL;
    for (char *u = strtok_r(list, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
        if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
            fprintf(stderr, "chaosloco halt: --agents: '%s' is not an http(s) URL\n", u);
            rc = CX_EXIT_USAGE;
            break;
        }
        if (n == HALT_MAX_AGENTS) {
            fprintf(stderr, "chaosloco halt: --agents: more than %d URLs\n", HALT_MAX_AGENTS);
            rc = CX_EXIT_USAGE;
            break;
        }
        urls[n++] = u;
    }
    if (rc == CX_EXIT_OK) {
        agc_opts o = {.token = token[0] ? token : NULL,
                      .connect_timeout_ms = 1000,
                      .timeout_ms = timeout_ms,
                      .retries = 2};
        agc_fanout(urls, n, &o, agc_halt, res);
        for (int i = 0; i < n; i++)
            if (report(urls[i], &res[i]) != 0)
                rc = CX_EXIT_FAILURE;
        fflush(stdout);
        agc_fanout_cleanup(res, n);
    }
    free(list);
    free(urls);
    free(res);
    return rc;
}
