/* halt_main.c - `chaosloco halt --agents URL,...`: POST /v1/halt on every
 * agent at once (each reverts every fault and refuses new ones until
 * POST /v1/resume), report each result. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/exitcode.h"
#include "common/file.h"
#include "common/http_client.h"
#include "common/log.h"

#define HALT_MAX_AGENTS 256

int halt_main(int argc, char **argv);

typedef struct halt_job {
    const char *url;     /* agent base URL (borrowed) */
    const char *token;   /* bearer or NULL */
    int status;          /* HTTP status, 0 no answer */
    long long reverted;  /* faults reverted, -1 unknown */
    char err[CX_ERRLEN]; /* why it failed */
    pthread_t tid;
} halt_job;

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

static long g_timeout_ms = 5000;

static void *halt_one(void *arg)
{
    halt_job *j = arg;
    cx_http_opts o = {
        .connect_timeout_ms = 1000, .timeout_ms = g_timeout_ms, .retries = 2, .bearer = j->token};
    cx_http_client *c = cx_http_client_new(j->url, &o);
    if (!c) {
        snprintf(j->err, sizeof j->err, "bad URL");
        return NULL;
    }
    json_t *body = json_object();
    json_t *ans = NULL;
    cx_http_json(c, "POST", "/v1/halt", body, &j->status, &ans, j->err, sizeof j->err);
    json_decref(body);
    j->reverted = json_is_integer(json_object_get(ans, "reverted"))
                      ? json_integer_value(json_object_get(ans, "reverted"))
                      : -1;
    const char *e = json_string_value(json_object_get(ans, "error"));
    if (e)
        snprintf(j->err, sizeof j->err, "%s", e);
    json_decref(ans);
    cx_http_client_free(c);
    return NULL;
}

int halt_main(int argc, char **argv)
{
    cx_log_init("halt", CX_LOG_WARN);
    const char *agents = NULL, *token_file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return CX_EXIT_OK;
        }
        if (strcmp(a, "--agents") == 0 || strcmp(a, "--token-file") == 0 || strcmp(a, "--timeout-ms") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "chaosloco halt: %s needs a value\n", a);
                return CX_EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (strcmp(a, "--agents") == 0)
                agents = v;
            else if (strcmp(a, "--token-file") == 0)
                token_file = v;
            else {
                char *end = NULL;
                long t = strtol(v, &end, 10);
                if (!end || *end || t < 100 || t > 60000) {
                    fprintf(stderr, "chaosloco halt: --timeout-ms: '%s' is not an integer in 100..60000\n",
                            v);
                    return CX_EXIT_USAGE;
                }
                g_timeout_ms = t;
            }
            continue;
        }
        fprintf(stderr, "chaosloco halt: unknown argument '%s' (see --help)\n", a);
        return CX_EXIT_USAGE;
    }
    if (!agents || !agents[0]) {
        fprintf(stderr, "chaosloco halt: --agents is required\n");
        return CX_EXIT_USAGE;
    }
    char token[512] = "";
    if (token_file) {
        char *data = NULL;
        size_t len = 0;
        char err[CX_ERRLEN];
        if (cx_file_read(token_file, 4096, &data, &len, err, sizeof err) < 0) {
            fprintf(stderr, "chaosloco halt: --token-file: %s\n", err);
            return CX_EXIT_USAGE;
        }
        char *nl = strpbrk(data, "\r\n");
        if (nl)
            *nl = '\0';
        snprintf(token, sizeof token, "%s", data);
        free(data);
    }
    char *list = strdup(agents);
    halt_job *jobs = calloc(HALT_MAX_AGENTS, sizeof *jobs);
    if (!list || !jobs) {
        free(list);
        free(jobs);
        return CX_EXIT_FAILURE;
    }
    int n = 0, rc = CX_EXIT_OK;
    char *save = NULL;
    for (char *u = strtok_r(list, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
        if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
            fprintf(stderr, "chaosloco halt: --agents: '%s' is not an http(s) URL\n", u);
            free(list);
            free(jobs);
            return CX_EXIT_USAGE;
        }
        if (n == HALT_MAX_AGENTS) {
            fprintf(stderr, "chaosloco halt: --agents: more than %d URLs\n", HALT_MAX_AGENTS);
            free(list);
            free(jobs);
            return CX_EXIT_USAGE;
        }
        jobs[n].url = u;
        jobs[n].token = token[0] ? token : NULL;
        n++;
    }
    for (int i = 0; i < n; i++)
        if (pthread_create(&jobs[i].tid, NULL, halt_one, &jobs[i]) != 0)
            halt_one(&jobs[i]), jobs[i].tid = 0;
    for (int i = 0; i < n; i++) {
        if (jobs[i].tid)
            pthread_join(jobs[i].tid, NULL);
        if (jobs[i].status == 200) {
            printf("%s: halted, %lld faults reverted\n", jobs[i].url, jobs[i].reverted);
        } else {
            rc = CX_EXIT_FAILURE;
            if (jobs[i].status)
                printf("%s: FAILED: HTTP %d: %s\n", jobs[i].url, jobs[i].status, jobs[i].err);
            else
                printf("%s: FAILED: no answer: %s\n", jobs[i].url,
                       jobs[i].err[0] ? jobs[i].err : "unreachable");
        }
    }
    fflush(stdout);
    free(list);
    free(jobs);
    return rc;
}
