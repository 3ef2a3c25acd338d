/* main.c - `chaosloco syncer`: parse flags, run the syncer until
 * SIGTERM/SIGINT, then checkpoint and exit. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/commands.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/flags.h"
#include "common/http_server.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/stop_signals.h"
#include "trainer/config.h"
#include "trainer/syncer.h"

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

/* What the command line asked for. */
typedef struct syncer_cli {
    syncer_opts o;            /* what the syncer gets: every flag but --config and --check */
    const char *config_path;  /* --config FILE.json, or NULL */
    int check;                /* --check: validate only */
    int pass;                 /* 0: check the training flags; 1: set them */
    const char *mode, *model; /* --mode, --model as given (pass 0), or NULL */
} syncer_cli;

/* Pass 1's start: the mode's and model's defaults (each from the file, then
 * its flag), then the file itself, so that flags override the file, which
 * overrides the kind's defaults. 0, or an exit code. */
static int cli_load_config(syncer_cli *c)
{
    char err[CX_ERRLEN];
    config probe;
    config_defaults(&probe);
    /* --check: a --config mounted only at run time is skipped */
    if (c->check && c->config_path && access(c->config_path, R_OK) != 0)
        c->config_path = NULL;
    if (c->config_path && config_load_file(&probe, c->config_path, err, sizeof err) != 0) {
        fprintf(stderr, "chaosloco syncer: %s\n", err);
        return CX_EXIT_USAGE;
    }
    int64_t mode = probe.mode != c->o.cfg.mode ? probe.mode : c->o.cfg.mode;
    int64_t model = probe.model != c->o.cfg.model ? probe.model : c->o.cfg.model;
    if (c->mode)
        config_parse_mode(c->mode, &mode); /* pass 0 has checked both values */
    if (c->model)
        config_parse_model(c->model, &model);
    config_kind_defaults(&c->o.cfg, mode, model);
    if (c->config_path && config_load_file(&c->o.cfg, c->config_path, err, sizeof err) != 0) {
        fprintf(stderr, "chaosloco syncer: %s\n", err);
        return CX_EXIT_USAGE;
    }
    return 0;
}

/* --on-lost-state rebuild|refuse. */
static int parse_lost_state(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    if (strcmp(v, "rebuild") == 0)
        *(int *)dst = SYNCER_LOST_REBUILD;
    else if (strcmp(v, "refuse") == 0)
        *(int *)dst = SYNCER_LOST_REFUSE;
    else
        return cx_fail(err, errlen, CX_EINVAL, "%s '%s': expected rebuild or refuse", name, v);
    return 0;
}

/* Every other --flag: a training key. Pass 0 checks it on a copy (and
 * notes --mode and --model, whose defaults come before the file); pass 1
 * sets it over the config file. */
static int parse_training(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    syncer_cli *c = dst;
    config tmp = c->o.cfg;
    if (config_set_flag(c->pass == 1 ? &c->o.cfg : &tmp, name, v, err, errlen) != 0)
        return CX_EINVAL;
    if (c->pass == 0 && strcmp(name, "--mode") == 0)
        c->mode = v;
    if (c->pass == 0 && strcmp(name, "--model") == 0)
        c->model = v;
    return 0;
}

/* Pass 0: our own flags, --config, mode and model; pass 1: the config
 * (cli_load_config), then the training flags. 0, or an exit code (--help:
 * CX_EXIT_OK with *done set). */
static int cli_parse(syncer_cli *c, int argc, char **argv, int *done)
{
    const cx_flag flags[] = {
        {.name = "--check", .kind = CX_FLAG_BOOL, .dst = &c->check},
        {.name = "--insecure-no-auth", .kind = CX_FLAG_BOOL, .dst = &c->o.insecure_no_auth},
        {.name = "--listen", .kind = CX_FLAG_STRING, .dst = &c->o.listen},
        {.name = "--state-dir", .kind = CX_FLAG_STRING, .dst = &c->o.state_dir},
        {.name = "--config", .kind = CX_FLAG_STRING, .dst = &c->config_path},
        {.name = "--credentials-dir", .kind = CX_FLAG_STRING, .dst = &c->o.credentials_dir},
        {.name = "--tls-cert", .kind = CX_FLAG_STRING, .dst = &c->o.tls_cert},
        {.name = "--tls-key", .kind = CX_FLAG_STRING, .dst = &c->o.tls_key},
        {.name = "--on-lost-state",
         .kind = CX_FLAG_FUNC,
         .dst = &c->o.on_lost_state,
         .parse = parse_lost_state},
        {.name = CX_FLAGS_OTHER, .kind = CX_FLAG_FUNC, .dst = c, .parse = parse_training},
        {0}};
    int npos = 0;
    for (c->pass = 0; c->pass < 2; c->pass++) {
        int rc;
        if (c->pass == 1 && (rc = cli_load_config(c)) != 0)
            return rc;
        rc = cx_flags_parse("chaosloco syncer", argc, argv, flags, NULL, NULL, 0, &npos, usage);
        if (rc == CX_EXIT_OK) /* --help */
            *done = 1;
        if (rc != CX_FLAGS_OK)
            return rc;
    }
    return 0;
}

/* The combinations cli_parse cannot see one flag at a time. 0, or an exit code. */
static int cli_check(syncer_cli *c)
{
    char err[CX_ERRLEN], host[256];
    int port;
    if (!c->o.state_dir) {
        fprintf(stderr, "chaosloco syncer: --state-dir is required (see --help)\n");
        return CX_EXIT_USAGE;
    }
    if (cx_parse_hostport(c->o.listen, "--listen", host, sizeof host, &port, err, sizeof err) != 0) {
        fprintf(stderr, "chaosloco syncer: %s\n", err);
        return CX_EXIT_USAGE;
    }
    if (c->o.insecure_no_auth && !cx_http_host_is_loopback(host)) {
        fprintf(stderr,
                "chaosloco syncer: --insecure-no-auth with --listen %s: refused, the syncer would take "
                "unauthenticated calls from the network; listen on 127.0.0.1 or use credentials "
                "(docs/security.md)\n",
                c->o.listen);
        return CX_EXIT_USAGE;
    }
    if (c->o.insecure_no_auth && c->o.credentials_dir) {
        fprintf(stderr, "chaosloco syncer: --insecure-no-auth and --credentials-dir exclude each other\n");
        return CX_EXIT_USAGE;
    }
    if (!c->o.tls_cert != !c->o.tls_key) {
        fprintf(stderr, "chaosloco syncer: --tls-cert and --tls-key go together\n");
        return CX_EXIT_USAGE;
    }
    if (config_validate(&c->o.cfg, err, sizeof err) != 0) {
        fprintf(stderr, "chaosloco syncer: %s\n", err);
        return CX_EXIT_USAGE;
    }
    return 0;
}

int syncer_main(int argc, char **argv)
{
    syncer_cli c = {.o = {.listen = "127.0.0.1:7070", .on_lost_state = SYNCER_LOST_REBUILD}};
    config_defaults(&c.o.cfg);
    int done = 0, rc = cli_parse(&c, argc, argv, &done);
    if (rc || done)
        return rc;
    if ((rc = cli_check(&c)) != 0)
        return rc;
    if (c.check) {
        printf("chaosloco syncer: command line ok\n");
        return CX_EXIT_OK;
    }
    cx_log_init("syncer", CX_LOG_INFO);
    char line[4096], err[CX_ERRLEN];
    config_format(&c.o.cfg, line, sizeof line);
    cx_info("config listen=%s state_dir=%s %s", c.o.listen, c.o.state_dir, line);

    volatile sig_atomic_t *stop = cx_stop_on_signals();
    syncer *s = syncer_new(&c.o, err, sizeof err);
    if (!s) {
        cx_error("cannot start: %s", err);
        return CX_EXIT_FAILURE;
    }
    syncer_run(s, stop);
    cx_info("signal %d: shutting down", (int)*stop);
    syncer_free(s);
    return CX_EXIT_OK;
}
