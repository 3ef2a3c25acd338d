/* syncer_main.c - `chaosloco syncer`: parse flags, run the syncer until
 * SIGTERM/SIGINT, then checkpoint and exit. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/exitcode.h"
#include "common/http_server.h"
#include "common/log.h"
#include "common/parse.h"
#include "trainer/config.h"
#include "trainer/syncer.h"

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig)
{
    stop_flag = sig;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: chaosloco syncer --state-dir DIR [--listen HOST:PORT] [--config FILE.json] [TRAINING "
        "FLAGS]\n\n"
        "The synchronizer of a training run: holds the global model, merges what learners send,\n"
        "serves the HTTP API (docs/api.md). Flags override --config, which overrides defaults.\n\n"
        "  --listen HOST:PORT                 address to serve on; port 0 = ephemeral (default "
        "127.0.0.1:7070)\n"
        "  --state-dir DIR                    checkpoints, events.jsonl and listen.addr (required)\n"
        "  --config FILE.json                 training config (keys = flag names with '_' for '-')\n"
        "  --credentials-dir DIR              credentials learners, the harness and readers present\n"
        "                                     (learner-<i>.cred, admin.cred, read.cred; 0600 files in a\n"
        "                                     0700 dir); default: <state-dir>/credentials, created at\n"
        "                                     the first start (docs/security.md)\n"
        "  --insecure-no-auth                 no credential checks (refused unless --listen is loopback)\n"
        "  --tls-cert FILE --tls-key FILE     serve HTTPS with this PEM certificate chain and key\n"
        "  --on-lost-state rebuild|refuse     no valid checkpoint but learners hold trained fragments:\n"
        "                                     rebuild the global state from them, or refuse to serve\n"
        "                                     (default rebuild; docs/training.md)\n"
        "  --check                            validate the command line (and --config when readable),\n"
        "                                     print \"chaosloco syncer: command line ok\", exit 0; starts\n"
        "                                     nothing, writes nothing; the state dir, credentials dir,\n"
        "                                     TLS files and --config need not exist (mounted at run time)\n"
        "  --help                             this text\n\ntraining flags:\n");
    config_print_help(f, 0);
}

int syncer_main(int argc, char **argv)
{
    syncer_opts o;
    int check = 0;
    const char *listen = "127.0.0.1:7070", *state_dir = NULL, *config_path = NULL, *creds_dir = NULL;
    int insecure = 0;
    const char *tls_cert = NULL, *tls_key = NULL;
    int on_lost_state = SYNCER_LOST_REBUILD;
    char err[CX_ERRLEN], host[256];
    int port;
    config cfg;
    config_defaults(&cfg);

    /* pass 0: our own flags, --config, mode and model (file, then flag);
     * pass 1: mode and model defaults, then the file, then the training flags */
    int64_t mode = cfg.mode, model = cfg.model;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            config probe;
            config_defaults(&probe);
            /* --check: a --config mounted only at run time is skipped */
            if (check && config_path && access(config_path, R_OK) != 0)
                config_path = NULL;
            if (config_path && config_load_file(&probe, config_path, err, sizeof err) != 0) {
                fprintf(stderr, "chaosloco syncer: %s\n", err);
                return CX_EXIT_USAGE;
            }
            if (probe.mode != cfg.mode)
                mode = probe.mode;
            if (probe.model != cfg.model)
                model = probe.model;
            for (int i = 1; i + 1 < argc; i++) {
                if (strcmp(argv[i], "--mode") == 0)
                    config_parse_mode(argv[i + 1], &mode);
                if (strcmp(argv[i], "--model") == 0)
                    config_parse_model(argv[i + 1], &model);
            }
            config_kind_defaults(&cfg, mode, model);
            if (config_path && config_load_file(&cfg, config_path, err, sizeof err) != 0) {
                fprintf(stderr, "chaosloco syncer: %s\n", err);
                return CX_EXIT_USAGE;
            }
        }
        for (int i = 1; i < argc; i++) {
            const char *a = argv[i];
            if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
                usage(stdout);
                return CX_EXIT_OK;
            }
            if (strcmp(a, "--check") == 0) {
                check = 1;
                continue;
            }
            if (strncmp(a, "--", 2) != 0) {
                fprintf(stderr, "chaosloco syncer: unexpected argument '%s' (see --help)\n", a);
                return CX_EXIT_USAGE;
            }
            if (strcmp(a, "--insecure-no-auth") == 0) {
                insecure = 1;
                continue;
            }
            if (i + 1 >= argc) {
                fprintf(stderr, "chaosloco syncer: %s needs a value\n", a);
                return CX_EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (strcmp(a, "--listen") == 0)
                listen = v;
            else if (strcmp(a, "--state-dir") == 0)
                state_dir = v;
            else if (strcmp(a, "--config") == 0)
                config_path = v;
            else if (strcmp(a, "--credentials-dir") == 0)
                creds_dir = v;
            else if (strcmp(a, "--tls-cert") == 0)
                tls_cert = v;
            else if (strcmp(a, "--tls-key") == 0)
                tls_key = v;
            else if (strcmp(a, "--on-lost-state") == 0) {
                if (strcmp(v, "rebuild") == 0)
                    on_lost_state = SYNCER_LOST_REBUILD;
                else if (strcmp(v, "refuse") == 0)
                    on_lost_state = SYNCER_LOST_REFUSE;
                else {
                    fprintf(stderr, "chaosloco syncer: --on-lost-state '%s': expected rebuild or refuse\n",
                            v);
                    return CX_EXIT_USAGE;
                }
            } else if (pass == 1) {
                int rc = config_set_flag(&cfg, a, v, err, sizeof err);
                if (rc) {
                    fprintf(stderr, "chaosloco syncer: %s\n", err);
                    return CX_EXIT_USAGE;
                }
            } else {
                config tmp = cfg;
                int rc = config_set_flag(&tmp, a, v, err, sizeof err);
                if (rc) {
                    fprintf(stderr, "chaosloco syncer: %s (see --help)\n", err);
                    return CX_EXIT_USAGE;
                }
            }
        }
    }
    if (!state_dir) {
        fprintf(stderr, "chaosloco syncer: --state-dir is required (see --help)\n");
        return CX_EXIT_USAGE;
    }
    if (cx_parse_hostport(listen, "--listen", host, sizeof host, &port, err, sizeof err) != 0) {
        fprintf(stderr, "chaosloco syncer: %s\n", err);
        return CX_EXIT_USAGE;
    }
    if (insecure && !cx_http_host_is_loopback(host)) {
        fprintf(stderr,
                "chaosloco syncer: --insecure-no-auth with --listen %s: refused, the syncer would take "
                "unauthenticated calls from the network; listen on 127.0.0.1 or use credentials "
                "(docs/security.md)\n",
                listen);
        return CX_EXIT_USAGE;
    }
    if (insecure && creds_dir) {
        fprintf(stderr, "chaosloco syncer: --insecure-no-auth and --credentials-dir exclude each other\n");
        return CX_EXIT_USAGE;
    }
    if (!tls_cert != !tls_key) {
        fprintf(stderr, "chaosloco syncer: --tls-cert and --tls-key go together\n");
        return CX_EXIT_USAGE;
    }
    if (config_validate(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "chaosloco syncer: %s\n", err);
        return CX_EXIT_USAGE;
    }
    if (check) {
        printf("chaosloco syncer: command line ok\n");
        return CX_EXIT_OK;
    }
    cx_log_init("syncer", CX_LOG_INFO);
    char line[4096];
    config_format(&cfg, line, sizeof line);
    cx_info("config listen=%s state_dir=%s %s", listen, state_dir, line);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    o.cfg = cfg;
    o.listen = listen;
    o.state_dir = state_dir;
    o.credentials_dir = creds_dir;
    o.insecure_no_auth = insecure;
    o.tls_cert = tls_cert;
    o.tls_key = tls_key;
    o.on_lost_state = on_lost_state;
    syncer *s = syncer_new(&o, err, sizeof err);
    if (!s) {
        cx_error("cannot start: %s", err);
        return CX_EXIT_FAILURE;
    }
    syncer_run(s, &stop_flag);
    cx_info("signal %d: shutting down", (int)stop_flag);
    syncer_free(s);
    return CX_EXIT_OK;
}
