/* learner_main.c - `chaosloco learner`: parse flags, run one learner unit
 * until its steps are done (exit 0), SIGTERM/SIGINT (checkpoint, exit 0), or
 * the syncer is gone longer than --give-up-s (exit 1). */
#include <stdio.h>
#include <string.h>

#include "common/commands.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/stop_signals.h"
#include "trainer/config.h"
#include "trainer/credential.h"
#include "trainer/learner.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: chaosloco learner --syncer http://HOST:PORT --id N --state-dir DIR [FLAGS]\n\n"
        "One learner unit: trains on its data shard and exchanges with the syncer per the run's mode.\n"
        "The training config comes from the syncer at join; a learner may override only the flags below.\n\n"
        "  --syncer URL                       the syncer's base URL (required)\n"
        "  --id N                             learner id, 0..1000000 (required; selects the data shard)\n"
        "  --state-dir DIR                    local checkpoints (required)\n"
        "  --give-up-s S                      exit 1 when the syncer has not answered for S seconds (default "
        "60)\n"
        "  --credential-file FILE             this learner's credential (learner-<id>.cred, mode 0600), "
        "sent\n"
        "                                     as Authorization: Bearer on every call (docs/security.md)\n"
        "  --ca-file FILE                     https --syncer: PEM CA that signed its certificate\n"
        "  --check                            validate the command line, print \"chaosloco learner: command\n"
        "                                     line ok\", exit 0; starts nothing, writes nothing; the state\n"
        "                                     dir and credential file need not exist (mounted at run time)\n"
        "  --help                             this text\n\nper-learner overrides:\n");
    config_print_help(f, 1);
    fprintf(f, "\nenvironment: CHAOSLOCO_HOOK_DIR=DIR enables the NaN hook (DIR/nan holds a count, see "
               "docs/training.md)\n");
}

int learner_main(int argc, char **argv)
{
    learner_opts o;
    char err[CX_ERRLEN];
    int64_t id = -1;
    int check = 0;
    double give_up = 60;
    const char *cred_file = NULL;
    char cred[CRED_MAX];
    config probe;
    memset(&o, 0, sizeof o);
    config_defaults(&probe);
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
            fprintf(stderr, "chaosloco learner: unexpected argument '%s' (see --help)\n", a);
            return CX_EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "chaosloco learner: %s needs a value\n", a);
            return CX_EXIT_USAGE;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--syncer") == 0) {
            if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) {
                fprintf(stderr, "chaosloco learner: --syncer: '%s' is not an http:// or https:// URL\n", v);
                return CX_EXIT_USAGE;
            }
            o.syncer_url = v;
        } else if (strcmp(a, "--id") == 0) {
            if (cx_parse_i64(v, "--id", 0, 1000000, &id, err, sizeof err) != 0) {
                fprintf(stderr, "chaosloco learner: %s\n", err);
                return CX_EXIT_USAGE;
            }
        } else if (strcmp(a, "--state-dir") == 0) {
            o.state_dir = v;
        } else if (strcmp(a, "--credential-file") == 0) {
            cred_file = v;
        } else if (strcmp(a, "--ca-file") == 0) {
            o.ca_file = v;
        } else if (strcmp(a, "--give-up-s") == 0) {
            if (cx_parse_double(v, "--give-up-s", 1, 86400, &give_up, err, sizeof err) != 0) {
                fprintf(stderr, "chaosloco learner: %s\n", err);
                return CX_EXIT_USAGE;
            }
        } else if (config_learner_may_override(a)) {
            if (config_set_flag(&probe, a, v, err, sizeof err) != 0) {
                fprintf(stderr, "chaosloco learner: %s\n", err);
                return CX_EXIT_USAGE;
            }
            if (o.n_overrides >= LEARNER_MAX_OVERRIDES) {
                fprintf(stderr, "chaosloco learner: too many overrides\n");
                return CX_EXIT_USAGE;
            }
            o.override_name[o.n_overrides] = a;
            o.override_value[o.n_overrides++] = v;
        } else {
            fprintf(stderr,
                    "chaosloco learner: unknown option '%s' (the training config comes from the syncer; "
                    "see --help)\n",
                    a);
            return CX_EXIT_USAGE;
        }
    }
    if (!o.syncer_url || id < 0 || !o.state_dir) {
        fprintf(stderr, "chaosloco learner: --syncer, --id and --state-dir are required (see --help)\n");
        return CX_EXIT_USAGE;
    }
    if (check) {
        printf("chaosloco learner: command line ok\n");
        return CX_EXIT_OK;
    }
    if (cred_file) {
        cred_kind kind;
        int64_t who;
        if (cred_read_file(cred_file, cred, err, sizeof err) != 0) {
            fprintf(stderr, "chaosloco learner: --credential-file: %s\n", err);
            return CX_EXIT_USAGE;
        }
        cred_parse(cred, &kind, &who, NULL, 0);
        if (kind != CRED_LEARNER || who != id) {
            fprintf(
                stderr,
                "chaosloco learner: --credential-file %s: not the credential of learner-%lld (--id %lld)\n",
                cred_file, (long long)id, (long long)id);
            return CX_EXIT_USAGE;
        }
        o.credential = cred;
    }
    o.id = id;
    o.give_up_s = give_up;
    char comp[48];
    snprintf(comp, sizeof comp, "learner-%lld", (long long)id);
    cx_log_init(comp, CX_LOG_INFO);

    volatile sig_atomic_t *stop = cx_stop_on_signals();
    int rc = learner_run(&o, stop, err, sizeof err);
    if (rc != 0) {
        cx_error("%s", err);
        return CX_EXIT_FAILURE;
    }
    if (*stop)
        cx_info("signal %d: checkpointed, exiting", (int)*stop);
    return CX_EXIT_OK;
}
