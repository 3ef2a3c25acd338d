/* run_main.c - `chaosloco run [EXPERIMENT.json] [flags]`: parse the flags,
 * hand them to the runner (run.h), exit with its code. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/commands.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/flags.h"
#include "common/log.h"
#include "harness/run.h"
#include "harness/run_flags.h"
#include "trainer/config.h"

static void usage(FILE *f)
{
    fprintf(
        f, "usage: chaosloco run [EXPERIMENT.json] [--out DIR] [--seed N] [--junit FILE] [--mode MODE]\n"
           "                     [--dashboard HOST:PORT] [--dry-run] [--ci] [--keep] [--time-limit S]\n\n"
           "Run a chaos experiment against a live training run: launch a syncer and one agent per\n"
           "learner on 127.0.0.1 (ephemeral ports) -- or, with topology.network kind netns, each in its\n"
           "own network namespace with kernel-shaped links (root) -- or attach to the URLs in\n"
           "topology.attach, check the steady state, inject the method's faults and the chaos schedule,\n"
           "wait for training to end, judge the verify hypotheses, revert every fault and stop every\n"
           "process. Before launching it removes the network namespaces of dead harnesses.\n"
           "With no EXPERIMENT, runs the built-in default (4 learners, decoupled, learner 2 killed and\n"
           "restarted; = experiments/kill-one-reintegrate.json) and serves the dashboard.\n\n"
           "  --out DIR            run directory (default out/<experiment>-<UTC time>; must not hold a run)\n"
           "  --seed N             run seed, 0..2^63-1 (default: the file's \"seed\")\n"
           "  --junit FILE         write the JUnit report here instead of RUN/junit.xml\n"
           "  --mode MODE          override topology.training.mode: ddp|ddp-elastic|diloco|decoupled\n"
           "  --dashboard H:P      serve the live dashboard on H:P (port 0 = ephemeral) and print its URL\n"
           "  --syncer-credential-file FILE  attach mode: the credential to present to the syncer\n"
           "                       (admin, for the end of the run; overrides topology.attach)\n"
           "  --attach-wait S      attach mode: wait up to S s (1..86400) for the syncer and every agent\n"
           "                       to answer before taking leases (overrides topology.attach.wait_s,\n"
           "                       default 300); who is still awaited is logged every 5 s\n"
           "  --dry-run            validate and print the resolved fault timeline; launch nothing\n"
           "  --check              validate the command line (and EXPERIMENT when readable), print\n"
           "                       \"chaosloco run: command line ok\", exit 0; writes nothing, starts\n"
           "                       nothing; files named by flags need not exist (mounted at run time)\n"
           "  --ci                 use the experiment's \"ci\" variant (shorter)\n"
           "  --keep               after the run, keep the processes (and dashboard) up until Ctrl-C\n"
           "  --time-limit S       bound on the training phase in s (default 600; 300 with --ci); when it\n"
           "                       passes the harness verifies what ran\n"
           "  --help               this text\n\n"
           "outputs in the run directory: journal.json, junit.xml, events.jsonl, report.html, faults.json,\n"
           "summary.json, timeline.json, pids.json, logs/, syncer/, agents/, learners/\n\n"
           "exit: 0 every hypothesis held, 1 a hypothesis deviated (or the steady state did not hold),\n"
           "      2 interrupted (stop condition, SIGINT/SIGTERM, halt), 3 harness or injection error,\n"
           "      64 usage error (bad flag, bad experiment file)\n");
}

int run_main(int argc, char **argv)
{
    cx_log_init("run", CX_LOG_INFO);
    run_opts o = {.progress = -1};
    char err[CX_ERRLEN] = "";
    int64_t mode = -1, seed = 0;
    const cx_flag flags[] = {
        {.name = "--dry-run", .kind = CX_FLAG_BOOL, .dst = &o.dry_run},
        {.name = "--check", .kind = CX_FLAG_BOOL, .dst = &o.check},
        {.name = "--keep", .kind = CX_FLAG_BOOL, .dst = &o.keep},
        {.name = "--junit", .kind = CX_FLAG_STRING, .dst = &o.junit},
        {.name = "--syncer-credential-file", .kind = CX_FLAG_STRING, .dst = &o.syncer_credential_file},
        {.name = "--attach-wait", .kind = CX_FLAG_DOUBLE, .dst = &o.attach_wait_s, .min = 1, .max = 86400},
        {.name = "--mode", .kind = CX_FLAG_ENUM, .dst = &mode, .names = config_mode_names},
        {.name = "--dashboard", .kind = CX_FLAG_HOSTPORT, .dst = &o.dashboard},
        RUN_SHARED_FLAGS(&o, &seed),
        {0}};
    int npos = 0;
    int rc0 =
        cx_flags_parse("chaosloco run", argc, argv, flags, "EXPERIMENT", &o.experiment, 1, &npos, usage);
    if (rc0 != CX_FLAGS_OK)
        return rc0;
    if (mode >= 0)
        o.mode = config_mode_name(mode);
    o.seed = (uint64_t)seed;
    if (o.check) {
        /* an experiment mounted only at run time is not there yet */
        if (o.experiment && access(o.experiment, R_OK) != 0)
            o.experiment = NULL;
        if (o.experiment) {
            run_result res;
            int rc = run_experiment(&o, &res, err, sizeof err);
            int code = res.exit_code;
            run_result_cleanup(&res);
            if (rc < 0 || code != CX_EXIT_OK) {
                fprintf(stderr, "chaosloco run: %s\n", err[0] ? err : "invalid experiment");
                return CX_EXIT_USAGE;
            }
        }
        printf("chaosloco run: command line ok\n");
        return CX_EXIT_OK;
    }
    run_install_signals();
    run_result res;
    int rc = run_experiment(&o, &res, err, sizeof err);
    if (rc < 0 || res.exit_code == CX_EXIT_USAGE)
        fprintf(stderr, "chaosloco run: %s\n", err[0] ? err : "invalid experiment");
    int code = res.exit_code;
    run_result_cleanup(&res);
    return code;
}
