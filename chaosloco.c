/* chaosloco.c - the one executable: dispatches `chaosloco SUBCOMMAND ...` to
 * the subcommand's *_main() (git style). Nothing else lives here. */
#include <stdio.h>
#include <string.h>

#include "common/commands.h" /* the *_main() entry points; argv[0] is the subcommand name */
#include "common/exitcode.h"

typedef int (*subcommand_fn)(int argc, char **argv);

static const struct subcommand {
    const char *name;
    subcommand_fn fn;
    const char *summary;
} subcommands[] = {
    /* ---- subcommand table (one line per subcommand) ---- */
    {"syncer", syncer_main, "the synchronizer of a training run (global model, merges, HTTP API)"},
    {"learner", learner_main, "one learner unit: trains its shard, exchanges with the syncer"},
    {"simulate", simulate_main, "discrete-event goodput simulator at cluster scale (paper Table 1)"},
    {"dashboard", dashboard_main, "serve the operator dashboard of a live run (syncer + agents)"},
    {"validate", validate_main, "check experiment files strictly (every error with its JSON path)"},
    {"agent", agent_main, "sidecar: supervise one learner unit and inject faults into it"},
    {"run", run_main, "run a chaos experiment against a live training run (default: kill one, reintegrate)"},
    {"halt", halt_main, "revert every fault on every given agent at once (POST /v1/halt)"},
    {"report", report_main, "re-render a run directory's report.html"},
    {"secrets", secrets_main, "fresh credentials and agent token as Kubernetes Secret objects (deploy/k8s/)"},
    {"compare", compare_main, "the same experiment and fault schedule in several training modes, one table"},
    {NULL, NULL, NULL},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: chaosloco SUBCOMMAND [--help] [ARGS...]\n\n"
               "Decoupled DiLoCo training and the chaos toolkit around it.\n\nsubcommands:\n");
    for (const struct subcommand *s = subcommands; s->name; s++)
        fprintf(f, "  %-10s %s\n", s->name, s->summary);
    fprintf(f, "\n  chaosloco SUBCOMMAND --help   describes every flag of one subcommand\n"
               "  chaosloco --version\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CX_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CX_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("chaosloco %s\n", CHAOSLOCO_VERSION);
        return CX_EXIT_OK;
    }
    for (const struct subcommand *s = subcommands; s->name; s++)
        if (strcmp(argv[1], s->name) == 0)
            return s->fn(argc - 1, argv + 1);
    fprintf(stderr, "chaosloco: unknown subcommand '%s' (see chaosloco --help)\n", argv[1]);
    return CX_EXIT_USAGE;
}
