/* compare_main.c - `chaosloco compare EXPERIMENT.json --modes a,b,...`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/commands.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/parse.h"
#include "harness/compare.h"
#include "harness/run.h"
#include "harness/run_flags.h"
#include "trainer/config.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: chaosloco compare EXPERIMENT.json [--modes ddp,ddp-elastic,diloco,decoupled] [--ci]\n"
            "                         [--out DIR] [--seed N] [--time-limit S]\n\n"
            "Run the same experiment, seed and fault schedule once per training mode and print one table:\n"
            "goodput, time to target loss (the worst final loss over the modes), bytes per token, final\n"
            "loss, longest merge gap. Also written as OUT/compare.csv and OUT/compare.json; each run's\n"
            "directory is OUT/<mode>/.\n\n"
            "  --modes LIST       comma-separated modes (default ddp,ddp-elastic,diloco,decoupled)\n"
            "  --ci               use the experiment's \"ci\" variant\n"
            "  --out DIR          output directory (default out/compare-<experiment>-<UTC time>)\n"
            "  --seed N           run seed for every mode (default: the file's)\n"
            "  --time-limit S     per-run bound on the training phase, s\n"
            "  --help             this text\n\n"
            "exit: 0 every mode ran (its hypotheses may deviate: that is a result), 2 interrupted,\n"
            "      3 a run hit a harness error, 64 usage error\n");
}

int compare_main(int argc, char **argv)
{
    cx_log_init("compare", CX_LOG_INFO);
    compare_opts o = {0};
    char modes_buf[256] = "ddp,ddp-elastic,diloco,decoupled";
    char err[CX_ERRLEN];
    const char *modes = NULL;
    int64_t seed = 0;
    const cx_flag flags[] = {
        {.name = "--modes", .kind = CX_FLAG_STRING, .dst = &modes},
        RUN_SHARED_FLAGS(&o, &seed),
        {0},
    };
    int npos = 0;
    int rc0 =
        cx_flags_parse("chaosloco compare", argc, argv, flags, "EXPERIMENT", &o.experiment, 1, &npos, usage);
    if (rc0 != CX_FLAGS_OK)
        return rc0;
    o.seed = (uint64_t)seed;
    if (modes)
        snprintf(modes_buf, sizeof modes_buf, "%s", modes);
    if (!o.experiment) {
        fprintf(stderr, "chaosloco compare: EXPERIMENT.json is required (see --help)\n");
        return CX_EXIT_USAGE;
    }
    char *save = NULL;
    for (char *m = strtok_r(modes_buf, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        int64_t mode;
        if (cx_enum_value(config_mode_names, m, &mode) != CX_OK) {
            char list[128];
            fprintf(stderr, "chaosloco compare: --modes: '%s' is not %s\n", m,
                    cx_enum_list(config_mode_names, "|", list, sizeof list));
            return CX_EXIT_USAGE;
        }
        for (int k = 0; k < o.nmodes; k++)
            if (strcmp(o.modes[k], m) == 0) {
                fprintf(stderr, "chaosloco compare: --modes: '%s' given twice\n", m);
                return CX_EXIT_USAGE;
            }
        if (o.nmodes == COMPARE_MAX_MODES) {
            fprintf(stderr, "chaosloco compare: --modes: at most %d\n", COMPARE_MAX_MODES);
            return CX_EXIT_USAGE;
        }
        o.modes[o.nmodes++] = m;
    }
    if (o.nmodes == 0) {
        fprintf(stderr, "chaosloco compare: --modes: empty list\n");
        return CX_EXIT_USAGE;
    }
    run_install_signals();
    int code = 0;
    if (compare_run(&o, &code, err, sizeof err) < 0) {
        fprintf(stderr, "chaosloco compare: %s\n", err);
        return CX_EXIT_USAGE;
    }
    return code;
}
