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
    fprintf(f, "usage: chaosloco halt --agents URL[,URL...] [--token-file FILE | --token-files FILE,...]\n"
               "                      [--ca-file FILE] [--timeout-ms N]\n\n"
               "POST /v1/halt on every agent in parallel: each reverts every fault it holds and refuses\n"
               "new ones until POST /v1/resume. Prints one line per agent.\n\n"
               "  --agents URLS       comma-separated agent base URLs (http://127.0.0.1:PORT), required\n"
               "  --token-file FILE   every agent's bearer token (first line); halt is a mutating call\n"
               "  --token-files FILES comma-separated, one per agent in --agents order: each agent's own\n"
               "                      token (chaosloco run: RUN/tokens/agent-N)\n"
               "  --ca-file FILE      https agents: the PEM CA that signed their certificates\n"
               "  --timeout-ms N      per-agent request timeout, 100..60000 (default 5000)\n"
               "  --help              this text\n\n"
               "exit: 0 every agent halted, 1 some agent failed or did not answer, 64 usage error\n");
}

/* The first line of a token file (a secret file: common/secret.h) into
 * out; 0, or -1 with the reason on stderr. */
static int read_token(const char *path, const char *flag, char *out, size_t outlen)
{
    char err[CX_ERRLEN];
    if (cx_secret_read_line(path, flag, out, outlen, err, sizeof err) < 0) {
        fprintf(stderr, "chaosloco halt: %s\n", err);
        return -1;
    }
    return 0;
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
    const char *agents = NULL, *token_file = NULL, *token_files = NULL, *ca_file = NULL;
    int64_t timeout_ms = 5000;
    const cx_flag flags[] = {
        {.name = "--agents", .kind = CX_FLAG_STRING, .dst = &agents},
        {.name = "--token-file", .kind = CX_FLAG_STRING, .dst = &token_file},
        {.name = "--token-files", .kind = CX_FLAG_STRING, .dst = &token_files},
        {.name = "--ca-file", .kind = CX_FLAG_STRING, .dst = &ca_file},
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
    if (token_file && token_files) {
        fprintf(stderr, "chaosloco halt: give --token-file or --token-files, not both\n");
        return CX_EXIT_USAGE;
    }
    char token[512] = "";
    if (token_file && read_token(token_file, "--token-file", token, sizeof token) < 0)
        return CX_EXIT_USAGE;
    char *list = strdup(agents);
    const char **urls = calloc(HALT_MAX_AGENTS, sizeof *urls);
    agc_fan_result *res = calloc(HALT_MAX_AGENTS, sizeof *res);
    agc_opts *opts = calloc(HALT_MAX_AGENTS, sizeof *opts);
    char(*tokens)[512] = calloc(HALT_MAX_AGENTS, sizeof *tokens);
    if (!list || !urls || !res || !opts || !tokens) {
        free(list);
        free(urls);
        free(res);
        free(opts);
        free(tokens);
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
    if (rc == CX_EXIT_OK && token_files) {
        /* one per agent, in the order of --agents */
        char *tl = strdup(token_files), *save2 = NULL;
        int k = 0;
        for (char *f = tl ? strtok_r(tl, ",", &save2) : NULL; f && rc == CX_EXIT_OK;
             f = strtok_r(NULL, ",", &save2), k++) {
            if (k < n && read_token(f, "--token-files", tokens[k], sizeof tokens[k]) < 0)
                rc = CX_EXIT_USAGE;
        }
        if (rc == CX_EXIT_OK && (!tl || k != n)) {
            fprintf(stderr, "chaosloco halt: --token-files: %d files for %d agents (one per agent)\n", k, n);
            rc = CX_EXIT_USAGE;
        }
        free(tl);
    }
    if (rc == CX_EXIT_OK) {
        for (int i = 0; i < n; i++) {
            const char *t = token_files ? tokens[i] : token;
            opts[i] = (agc_opts){.token = t[0] ? t : NULL,
                                 .ca_file = ca_file,
                                 .connect_timeout_ms = 1000,
                                 .timeout_ms = timeout_ms,
                                 .retries = 2};
        }
        agc_fanout(urls, n, opts, agc_halt, res);
        for (int i = 0; i < n; i++)
            if (report(urls[i], &res[i]) != 0)
                rc = CX_EXIT_FAILURE;
        fflush(stdout);
        agc_fanout_cleanup(res, n);
    }
    free(list);
    free(urls);
    free(opts);
    if (tokens)
        memset(tokens, 0, HALT_MAX_AGENTS * sizeof *tokens);
    free(tokens);
    free(res);
    return rc;
}
