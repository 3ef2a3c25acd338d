/* dashboard_main.c - `chaosloco dashboard`: watch a live run without an
 * experiment. Parses options, builds a dash_server (server.h), prints its
 * URL and waits for SIGTERM/SIGINT. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/commands.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/secret.h"
#include "dashboards/server.h"
#include "trainer/credential.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: chaosloco dashboard [--syncer URL] [--agents [ID=]URL,...] [--listen HOST:PORT]\n"
               "                           [--token-file FILE] [--agent-token-files FILE,...] [--ca-file FILE]\n"
               "                           [--syncer-credential-file FILE] [--state-dir DIR] [--poll-ms N]\n"
               "                           [--title TEXT]\n"
               "\n"
               "Serve the operator dashboard of a live run: polls the syncer and every agent about\n"
               "every --poll-ms, shows learner units, the eval loss with fault windows, merges/s,\n"
               "bytes/s and the event log, and forwards fault injection, heal and HALT ALL to the\n"
               "agents. Prints the page's URL on stdout.\n"
               "\n"
               "  --syncer URL          the syncer's base URL, http://HOST:PORT (optional)\n"
               "  --agents LIST         comma-separated agent base URLs; an entry may be ID=URL to\n"
               "                        say which learner id the agent supervises (default: the\n"
               "                        trailing number of the agent's id, else its position)\n"
               "  --listen HOST:PORT    where to serve (default 127.0.0.1:0 = an ephemeral port)\n"
               "  --syncer-credential-file FILE  the credential presented to the syncer (read.cred or\n"
               "                        admin.cred; without it only a loopback syncer can be read)\n"
               "  --token-file FILE     the token the page's controls need (first line of FILE), and\n"
               "                        the agents' when --agent-token-files is not given. Without it\n"
               "                        the controls are off.\n"
               "  --agent-token-files FILES\n"
               "                        comma-separated, one per --agents entry in order: each agent's\n"
               "                        own token (chaosloco run: RUN/tokens/agent-N)\n"
               "  --ca-file FILE        https syncer and agents: the PEM CA that signed their certificates\n"
               "  --state-dir DIR       write DIR/listen.addr (\"127.0.0.1:PORT\") once listening\n"
               "  --poll-ms N           poll period in ms, 100..60000 (default 500)\n"
               "  --title TEXT          a title for the page\n"
               "  --help                this text\n"
               "\n"
               "Exit status: 0 after SIGTERM/SIGINT, 1 on a runtime failure, 64 on a usage error.\n");
}

/* Read the token (a secret file, common/secret.h): first line, trailing
 * whitespace removed. */
static int read_token(const char *path, char **out, char *err, size_t errlen)
{
    char line[4096];
    int n = cx_secret_read_line(path, "--token-file", line, sizeof line, err, errlen);
    if (n == 0)
        n = cx_fail(err, errlen, CX_EINVAL, "--token-file %s: the file is empty", path);
    if (n > 0 && !(*out = strdup(line)))
        n = cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    memset(line, 0, sizeof line);
    return n < 0 ? n : 0;
}

/* Split "[ID=]URL,..." in place into urls[] and learners[]. */
static int parse_agents(char *list, const char **urls, int *learners, int *n, char *err, size_t errlen)
{
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n >= DASH_MAX_AGENTS)
            return cx_fail(err, errlen, CX_EINVAL, "--agents: more than %d agents", DASH_MAX_AGENTS);
        learners[*n] = -1;
        char *eq = strchr(tok, '=');
        if (eq && strncmp(tok, "http://", 7) != 0) {
            *eq = '\0';
            if (cx_parse_int(tok, "--agents learner id", 0, 255, &learners[*n], err, errlen) != 0)
                return CX_EINVAL;
            tok = eq + 1;
        }
        if (strncmp(tok, "http://", 7) != 0 || !tok[7])
            return cx_fail(err, errlen, CX_EINVAL, "--agents: '%s' is not an http://HOST:PORT URL", tok);
        urls[(*n)++] = tok;
    }
    if (*n == 0)
        return cx_fail(err, errlen, CX_EINVAL, "--agents: empty list");
    return 0;
}

/* Serve cfg until SIGTERM or SIGINT: 0, or 1 when the dashboard cannot
 * start (the reason is logged). */
static int serve(const dash_config *cfg)
{
    /* SIGTERM/SIGINT end the wait below; block them in every thread */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[CX_ERRLEN];
    dash_server *s = dash_server_new(cfg, err, sizeof err);
    if (!s) {
        cx_error("%s", err);
        return CX_EXIT_FAILURE;
    }
    cx_info("serving %s", dash_server_url(s));
    printf("dashboard: %s\n", dash_server_url(s));
    fflush(stdout);

    int sig = 0;
    sigwait(&set, &sig);
    cx_info("signal %d: stopping", sig);
    dash_server_free(s);
    return CX_EXIT_OK;
}

int dashboard_main(int argc, char **argv)
{
    dash_config cfg = {.listen = "127.0.0.1:0"};
    const char *urls[DASH_MAX_AGENTS];
    int learners[DASH_MAX_AGENTS];
    const char *agents_flag = NULL, *token_file = NULL, *syncer_cred_file = NULL, *agent_token_files = NULL;
    char *agents_arg = NULL, *token = NULL, *files_arg = NULL;
    char *agent_tokens[DASH_MAX_AGENTS] = {0};
    char syncer_cred[CRED_MAX];
    char err[CX_ERRLEN];
    int64_t poll_ms = 500;
    int rc = CX_EXIT_USAGE;

    const cx_flag flags[] = {
        {.name = "--syncer", .kind = CX_FLAG_STRING, .dst = &cfg.syncer_url},
        {.name = "--agents", .kind = CX_FLAG_STRING, .dst = &agents_flag},
        {.name = "--listen", .kind = CX_FLAG_HOSTPORT, .dst = &cfg.listen},
        {.name = "--token-file", .kind = CX_FLAG_STRING, .dst = &token_file},
        {.name = "--agent-token-files", .kind = CX_FLAG_STRING, .dst = &agent_token_files},
        {.name = "--ca-file", .kind = CX_FLAG_STRING, .dst = &cfg.ca_file},
        {.name = "--syncer-credential-file", .kind = CX_FLAG_STRING, .dst = &syncer_cred_file},
        {.name = "--state-dir", .kind = CX_FLAG_STRING, .dst = &cfg.state_dir},
        {.name = "--poll-ms", .kind = CX_FLAG_I64, .dst = &poll_ms, .min = 100, .max = 60000},
        {.name = "--title", .kind = CX_FLAG_STRING, .dst = &cfg.title},
        {0}};
    int npos = 0, prc = cx_flags_parse("chaosloco dashboard", argc, argv, flags, NULL, NULL, 0, &npos, usage);
    if (prc != CX_FLAGS_OK) {
        rc = prc;
        goto out;
    }
    cfg.poll_ms = poll_ms;
    cfg.agent_urls = urls;
    cfg.agent_learners = learners;
    if (agents_flag) {
        agents_arg = strdup(agents_flag);
        if (!agents_arg || parse_agents(agents_arg, urls, learners, &cfg.nagents, err, sizeof err) != 0) {
            fprintf(stderr, "chaosloco dashboard: %s\n", agents_arg ? err : "out of memory");
            goto out;
        }
    }
    const char *syncer = cfg.syncer_url;
    if (syncer && !((strncmp(syncer, "http://", 7) == 0 && syncer[7]) ||
                    (strncmp(syncer, "https://", 8) == 0 && syncer[8]))) {
        fprintf(stderr, "chaosloco dashboard: --syncer: '%s' is not an http(s)://HOST:PORT URL\n", syncer);
        goto out;
    }
    if (!syncer && cfg.nagents == 0) {
        fprintf(stderr, "chaosloco dashboard: give --syncer, --agents or both (see --help)\n");
        goto out;
    }

    cx_log_init("dashboard", CX_LOG_INFO);
    rc = CX_EXIT_FAILURE;
    if (token_file && read_token(token_file, &token, err, sizeof err) != 0) {
        cx_error("%s", err);
        goto out;
    }
    cfg.token = token;
    if (agent_token_files) {
        /* one per agent, in the order of --agents */
        int k = 0;
        char *save = NULL;
        files_arg = strdup(agent_token_files);
        for (char *f = files_arg ? strtok_r(files_arg, ",", &save) : NULL; f; f = strtok_r(NULL, ",", &save), k++)
            if (k < cfg.nagents && read_token(f, &agent_tokens[k], err, sizeof err) != 0) {
                cx_error("--agent-token-files: %s", err);
                goto out;
            }
        if (!files_arg || k != cfg.nagents) {
            cx_error("--agent-token-files: %d files for %d agents (one per --agents entry)", k, cfg.nagents);
            rc = CX_EXIT_USAGE;
            goto out;
        }
        cfg.agent_tokens = (const char *const *)agent_tokens;
    }
    if (syncer_cred_file) {
        if (cred_read_file(syncer_cred_file, syncer_cred, err, sizeof err) != 0) {
            cx_error("--syncer-credential-file: %s", err);
            goto out;
        }
        cfg.syncer_credential = syncer_cred;
    }
    cx_info("config listen=%s syncer=%s agents=%d poll_ms=%ld token=%s state_dir=%s title=%s", cfg.listen,
            syncer ? syncer : "-", cfg.nagents, cfg.poll_ms, token ? "yes" : "no (controls off)",
            cfg.state_dir ? cfg.state_dir : "-", cfg.title ? cfg.title : "-");
    rc = serve(&cfg);
out:
    free(agents_arg);
    free(files_arg);
    free(token);
    for (int i = 0; i < DASH_MAX_AGENTS; i++)
        free(agent_tokens[i]);
    return rc;
}
