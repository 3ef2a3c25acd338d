/* learner_main.c - `chaosloco learner`: parse flags, run one learner unit
 * until its steps are done (exit 0), SIGTERM/SIGINT (checkpoint, exit 0), or
 * the syncer is gone longer than --give-up-s (exit 1). */
#include <stdio.h>
#include <string.h>

#include "common/commands.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "trainer/config.h"
#include "trainer/credential.h"
#include "trainer/learner/learner.h"

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
        "  --syncer-via HOST:PORT             connect to the syncer through HOST:PORT (the agent's proxy:\n"
        "                                     --syncer-via {proxy.syncer}) while --syncer keeps its name,\n"
        "                                     so an https certificate is checked against that name\n"
        "  --check                            validate the command line, print \"chaosloco learner: command\n"
        "                                     line ok\", exit 0; starts nothing, writes nothing; the state\n"
        "                                     dir and credential file need not exist (mounted at run time)\n"
        "  --help                             this text\n\nper-learner overrides:\n");
    config_print_help(f, 1);
    fprintf(f, "\nenvironment: CHAOSLOCO_HOOK_DIR=DIR enables the NaN hook (DIR/nan holds a count, see "
               "docs/training.md)\n");
}

/* --syncer: an http:// or https:// URL. */
static int parse_url(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
        return cx_fail(err, errlen, CX_EINVAL, "%s: '%s' is not an http:// or https:// URL", name, v);
    *(const char **)dst = v;
    return 0;
}

typedef struct overrides {
    learner_opts *o;
    config probe; /* the values are checked on it; the join applies them to the syncer's config */
} overrides;

/* Every other --flag: a training key the learner may set for itself. */
static int parse_override(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    overrides *ov = dst;
    const char *key = config_learner_override(name);
    if (!key)
        return cx_fail(err, errlen, CX_EINVAL,
                       "unknown option '%s' (the training config comes from the syncer; see --help)", name);
    if (config_set_flag(&ov->probe, key, v, err, errlen) != 0)
        return CX_EINVAL;
    if (ov->o->n_overrides >= LEARNER_MAX_OVERRIDES)
        return cx_fail(err, errlen, CX_EINVAL, "%s: too many overrides", name);
    ov->o->override_name[ov->o->n_overrides] = key;
    ov->o->override_value[ov->o->n_overrides++] = v;
    return 0;
}

int learner_main(int argc, char **argv)
{
    learner_opts o = {0};
    char err[CX_ERRLEN];
    int64_t id = -1;
    int check = 0, npos = 0;
    double give_up = 60;
    const char *cred_file = NULL;
    char cred[CRED_MAX];
    overrides ov = {.o = &o};
    config_defaults(&ov.probe);
    const cx_flag flags[] = {
        {.name = "--check", .kind = CX_FLAG_BOOL, .dst = &check},
        {.name = "--syncer", .kind = CX_FLAG_FUNC, .dst = &o.syncer_url, .parse = parse_url},
        {.name = "--id", .kind = CX_FLAG_I64, .dst = &id, .min = 0, .max = 1000000},
        {.name = "--state-dir", .kind = CX_FLAG_STRING, .dst = &o.state_dir},
        {.name = "--credential-file", .kind = CX_FLAG_STRING, .dst = &cred_file},
        {.name = "--ca-file", .kind = CX_FLAG_STRING, .dst = &o.ca_file},
        {.name = "--syncer-via", .kind = CX_FLAG_HOSTPORT, .dst = &o.syncer_via},
        {.name = "--give-up-s", .kind = CX_FLAG_DOUBLE, .dst = &give_up, .min = 1, .max = 86400},
        {.name = CX_FLAGS_OTHER, .kind = CX_FLAG_FUNC, .dst = &ov, .parse = parse_override},
        {0}};
    int rc = cx_flags_parse("chaosloco learner", argc, argv, flags, NULL, NULL, 0, &npos, usage);
    if (rc != CX_FLAGS_OK)
        return rc;
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
    rc = learner_run(&o, stop, err, sizeof err);
    if (rc != 0) {
        cx_error("%s", err);
        return CX_EXIT_FAILURE;
    }
    if (*stop)
        cx_info("signal %d: checkpointed, exiting", (int)*stop);
    return CX_EXIT_OK;
}
