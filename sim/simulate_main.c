/* simulate_main.c - `chaosloco simulate`: option parsing and wiring only;
 * the model is sim/sim.c, the printing sim/report.c. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/commands.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/log.h"
#include "common/parse.h"
#include "sim/report.h"
#include "sim/sim.h"

static void usage(FILE *f)
{
    sim_params d;
    sim_params_init(&d);
    fprintf(
        f,
        "usage: chaosloco simulate [FLAGS]\n\n"
        "Discrete-event goodput simulator of a failure-prone cluster: data-parallel,\n"
        "elastic data-parallel and Decoupled DiLoCo with M learners, printed like the\n"
        "paper's Table 1 with the paper's figures beside ours. Model, assumptions and\n"
        "calibration: docs/simulate.md.\n\n"
        "grid:\n"
        "  --chips LIST            chip counts, comma separated (default "
        "150000,300000,600000,1200000,2400000)\n"
        "  --modes LIST            rows: dp,elastic,decoupled (default all three)\n"
        "  --learners LIST         M values for decoupled rows, each 1..4096 (default 2,4,8,16)\n"
        "  --quorum K              learners that must compute for the global model to advance (default %d)\n"
        "  --learner-recovery R    elastic: a learner re-shards around a lost domain; restart: it\n"
        "                          stops and restarts like a DP job of its chips (default elastic)\n"
        "failures and recovery (the unknowns; defaults are the calibrated values):\n"
        "  --mtbf-years Y          per-chip mean time between interruptions, years, or inf (default %g)\n"
        "  --restart-s S           mean restart of a stopped job: detect, swap in a spare, reload (default "
        "%g)\n"
        "  --recovery-s S          mean time a failed domain stays out of service (default %g)\n"
        "  --recovery-dist D       shape of restart and recovery times: fixed, exp, lognormal (default %s)\n"
        "  --recovery-sigma X      lognormal shape, 0..5 (default %g)\n"
        "  --rescale-s S           elastic re-shard pause, on each loss and each rejoin (default %g)\n"
        "  --checkpoint-s S|auto   compute between checkpoints of restart jobs; auto = Daly's optimum "
        "(default auto)\n"
        "  --checkpoint-cost-s S   blocking checkpoint write (default %g)\n"
        "  --domain-chips N        chips per failure domain (slice) (default %lld)\n"
        "  --stop-failures P       chips of a stopped job (restarting, re-sharding): none = not\n"
        "                          interrupted (failure clock runs while computing only); fold = fail,\n"
        "                          handled by the stop in progress; extend = fail, the stop starts\n"
        "                          over (default %s)\n"
        "run:\n"
        "  --horizon-days D        simulated wall time per trial (default %g)\n"
        "  --trials N              trials per cell; prints mean and 95%% CI (default 5)\n"
        "  --seed N                base seed (default 1)\n"
        "  --format F              table, csv or json (default table)\n"
        "  --sweep                 sensitivity: rerun the grid with each unknown halved and doubled,\n"
        "                          the other distributions, the other stop and learner policies\n"
        "  --help                  this text\n\n"
        "exit status: 0 ok, 1 simulation failure, 64 usage error\n",
        d.quorum, d.mtbf_years, d.restart_s, d.recovery_s, sim_dist_name(d.dist), d.lognormal_sigma,
        d.rescale_s, d.checkpoint_cost_s, (long long)d.domain_chips, sim_stop_policy_name(d.stop_policy),
        d.horizon_days);
}

/* ---- simulate: list flags ---- */

/* Split a comma list into at most max items with parse(item, i). */
static int parse_list(const char *flag, const char *s, int max,
                      int (*parse)(const char *, int, void *, char *, size_t), void *ctx, int *count,
                      char *err, size_t errlen)
{
    char buf[512];
    if (strlen(s) >= sizeof buf)
        return cx_fail(err, errlen, CX_EINVAL, "%s: list too long", flag);
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n >= max)
            return cx_fail(err, errlen, CX_EINVAL, "%s: more than %d values", flag, max);
        int rc = parse(tok, n++, ctx, err, errlen);
        if (rc)
            return rc;
    }
    if (n == 0)
        return cx_fail(err, errlen, CX_EINVAL, "%s: empty list", flag);
    *count = n;
    return 0;
}

static int parse_chip(const char *s, int i, void *ctx, char *err, size_t errlen)
{
    return cx_parse_i64(s, "--chips", 1, (int64_t)1 << 40, &((sim_grid *)ctx)->chips[i], err, errlen);
}

static int parse_learner(const char *s, int i, void *ctx, char *err, size_t errlen)
{
    return cx_parse_int(s, "--learners", 1, 4096, &((sim_grid *)ctx)->learners[i], err, errlen);
}

static int parse_mode(const char *s, int i, void *ctx, char *err, size_t errlen)
{
    (void)i;
    sim_mode m;
    char inner[CX_ERRLEN];
    if (sim_mode_parse(s, &m, inner, sizeof inner))
        return cx_fail(err, errlen, CX_EINVAL, "--modes: %s", inner);
    ((sim_grid *)ctx)->mode_on[m] = 1;
    return 0;
}

/* ---- simulate: main ---- */

enum {
    OPT_CHIPS = 256,
    OPT_MODES,
    OPT_LEARNERS,
    OPT_QUORUM,
    OPT_LEARNER_RECOVERY,
    OPT_MTBF,
    OPT_RESTART,
    OPT_RECOVERY,
    OPT_DIST,
    OPT_SIGMA,
    OPT_RESCALE,
    OPT_CKPT,
    OPT_CKPT_COST,
    OPT_DOMAIN,
    OPT_STOP,
    OPT_HORIZON,
    OPT_TRIALS,
    OPT_SEED,
    OPT_FORMAT,
    OPT_SWEEP,
    OPT_HELP,
};

static int apply_flag(int opt, const char *name, const char *v, sim_params *p, sim_grid *g, sim_format *fmt,
                      int *sweep, char *err, size_t errlen)
{
    int n;
    int64_t i64;
    switch (opt) {
    case OPT_CHIPS:
        return parse_list(name, v, SIM_GRID_MAX, parse_chip, g, &g->nchips, err, errlen);
    case OPT_MODES:
        memset(g->mode_on, 0, sizeof g->mode_on);
        return parse_list(name, v, 3, parse_mode, g, &n, err, errlen);
    case OPT_LEARNERS:
        return parse_list(name, v, SIM_GRID_MAX, parse_learner, g, &g->nlearners, err, errlen);
    case OPT_QUORUM:
        return cx_parse_int(v, name, 1, 4096, &p->quorum, err, errlen);
    case OPT_LEARNER_RECOVERY:
        if (strcmp(v, "elastic") == 0 || strcmp(v, "restart") == 0) {
            p->learner_elastic = strcmp(v, "elastic") == 0;
            return 0;
        }
        return cx_fail(err, errlen, CX_EINVAL, "%s: '%s' is not elastic or restart", name, v);
    case OPT_MTBF:
        if (strcmp(v, "inf") == 0) {
            p->mtbf_years = 0; /* never fails */
            return 0;
        }
        return cx_parse_double(v, name, 1e-9, 1e6, &p->mtbf_years, err, errlen);
    case OPT_RESTART:
        return cx_parse_double(v, name, 0, 1e7, &p->restart_s, err, errlen);
    case OPT_RECOVERY:
        return cx_parse_double(v, name, 0, 1e8, &p->recovery_s, err, errlen);
    case OPT_DIST: {
        char inner[CX_ERRLEN];
        if (sim_dist_parse(v, &p->dist, inner, sizeof inner))
            return cx_fail(err, errlen, CX_EINVAL, "%s: %s", name, inner);
        return 0;
    }
    case OPT_SIGMA:
        return cx_parse_double(v, name, 0, 5, &p->lognormal_sigma, err, errlen);
    case OPT_RESCALE:
        return cx_parse_double(v, name, 0, 1e7, &p->rescale_s, err, errlen);
    case OPT_CKPT:
        if (strcmp(v, "auto") == 0) {
            p->checkpoint_s = 0;
            return 0;
        }
        return cx_parse_double(v, name, 1e-3, 1e8, &p->checkpoint_s, err, errlen);
    case OPT_CKPT_COST:
        return cx_parse_double(v, name, 0, 1e7, &p->checkpoint_cost_s, err, errlen);
    case OPT_DOMAIN:
        return cx_parse_i64(v, name, 1, 100000000, &p->domain_chips, err, errlen);
    case OPT_STOP: {
        char inner[CX_ERRLEN];
        if (sim_stop_policy_parse(v, &p->stop_policy, inner, sizeof inner))
            return cx_fail(err, errlen, CX_EINVAL, "%s: %s", name, inner);
        return 0;
    }
    case OPT_HORIZON:
        return cx_parse_double(v, name, 1e-3, 3650, &p->horizon_days, err, errlen);
    case OPT_TRIALS:
        return cx_parse_int(v, name, 1, 10000, &g->trials, err, errlen);
    case OPT_SEED:
        if (cx_parse_i64(v, name, 0, INT64_MAX, &i64, err, errlen))
            return CX_EINVAL;
        g->seed = (uint64_t)i64;
        return 0;
    case OPT_FORMAT:
        if (strcmp(v, "table") == 0)
            *fmt = SIM_FMT_TABLE;
        else if (strcmp(v, "csv") == 0)
            *fmt = SIM_FMT_CSV;
        else if (strcmp(v, "json") == 0)
            *fmt = SIM_FMT_JSON;
        else
            return cx_fail(err, errlen, CX_EINVAL, "%s: '%s' is not table, csv or json", name, v);
        return 0;
    case OPT_SWEEP:
        *sweep = 1;
        return 0;
    }
    return cx_fail(err, errlen, CX_EINVAL, "%s: unhandled flag", name);
}

int simulate_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"chips", required_argument, NULL, OPT_CHIPS},
        {"modes", required_argument, NULL, OPT_MODES},
        {"learners", required_argument, NULL, OPT_LEARNERS},
        {"quorum", required_argument, NULL, OPT_QUORUM},
        {"learner-recovery", required_argument, NULL, OPT_LEARNER_RECOVERY},
        {"mtbf-years", required_argument, NULL, OPT_MTBF},
        {"restart-s", required_argument, NULL, OPT_RESTART},
        {"recovery-s", required_argument, NULL, OPT_RECOVERY},
        {"recovery-dist", required_argument, NULL, OPT_DIST},
        {"recovery-sigma", required_argument, NULL, OPT_SIGMA},
        {"rescale-s", required_argument, NULL, OPT_RESCALE},
        {"checkpoint-s", required_argument, NULL, OPT_CKPT},
        {"checkpoint-cost-s", required_argument, NULL, OPT_CKPT_COST},
        {"domain-chips", required_argument, NULL, OPT_DOMAIN},
        {"stop-failures", required_argument, NULL, OPT_STOP},
        {"horizon-days", required_argument, NULL, OPT_HORIZON},
        {"trials", required_argument, NULL, OPT_TRIALS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"sweep", no_argument, NULL, OPT_SWEEP},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    cx_log_init("simulate", CX_LOG_INFO);
    sim_params p;
    sim_params_init(&p);
    sim_grid g = {
        .chips = {150000, 300000, 600000, 1200000, 2400000},
        .nchips = 5,
        .mode_on = {1, 1, 1},
        .learners = {2, 4, 8, 16},
        .nlearners = 4,
        .trials = 5,
        .seed = 1,
    };
    sim_format fmt = SIM_FMT_TABLE;
    int sweep = 0;
    char err[CX_ERRLEN];

    optind = 0; /* glibc: full re-initialisation, so main can run twice in one process */
    opterr = 0;
    for (;;) {
        int idx = -1;
        int opt = getopt_long(argc, argv, "", opts, &idx);
        if (opt == -1)
            break;
        if (opt == OPT_HELP) {
            usage(stdout);
            return CX_EXIT_OK;
        }
        if (opt == '?' || opt == ':') {
            const char *bad = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
            fprintf(stderr, "simulate: %s: unknown flag or missing value (see --help)\n", bad);
            return CX_EXIT_USAGE;
        }
        char name[48];
        snprintf(name, sizeof name, "--%s", idx >= 0 ? opts[idx].name : "?");
        if (apply_flag(opt, name, optarg, &p, &g, &fmt, &sweep, err, sizeof err)) {
            fprintf(stderr, "simulate: %s\n", err);
            return CX_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "simulate: unexpected argument '%s' (see --help)\n", argv[optind]);
        return CX_EXIT_USAGE;
    }
    if (g.mode_on[SIM_DECOUPLED]) {
        for (int i = 0; i < g.nlearners; i++)
            if (p.quorum > g.learners[i]) {
                fprintf(stderr, "simulate: --quorum: %d is more than --learners %d\n", p.quorum,
                        g.learners[i]);
                return CX_EXIT_USAGE;
            }
        for (int i = 0; i < g.nlearners; i++)
            for (int c = 0; c < g.nchips; c++)
                if (g.learners[i] > g.chips[c]) {
                    fprintf(stderr, "simulate: --learners: %d is more than --chips %lld\n", g.learners[i],
                            (long long)g.chips[c]);
                    return CX_EXIT_USAGE;
                }
    }
    if (sim_params_check(&p, err, sizeof err)) {
        fprintf(stderr, "simulate: %s\n", err);
        return CX_EXIT_USAGE;
    }
    g.progress = isatty(STDERR_FILENO);

    char ck[32];
    snprintf(ck, sizeof ck, p.checkpoint_s > 0 ? "%g" : "auto", p.checkpoint_s);
    cx_info("config mtbf_years=%g restart_s=%g recovery_s=%g recovery_dist=%s recovery_sigma=%g rescale_s=%g "
            "checkpoint_s=%s checkpoint_cost_s=%g domain_chips=%lld stop_failures=%s learner_recovery=%s "
            "quorum=%d horizon_days=%g trials=%d seed=%llu format=%s sweep=%d",
            p.mtbf_years, p.restart_s, p.recovery_s, sim_dist_name(p.dist), p.lognormal_sigma, p.rescale_s,
            ck, p.checkpoint_cost_s, (long long)p.domain_chips, sim_stop_policy_name(p.stop_policy),
            p.learner_elastic ? "elastic" : "restart", p.quorum, p.horizon_days, g.trials,
            (unsigned long long)g.seed,
            fmt == SIM_FMT_TABLE ? "table"
            : fmt == SIM_FMT_CSV ? "csv"
                                 : "json",
            sweep);

    int64_t t0 = cx_mono_ms();
    int rc = sweep ? sim_report_sweep(stdout, &p, &g, fmt, err, sizeof err)
                   : sim_report_table(stdout, &p, &g, fmt, err, sizeof err);
    if (rc) {
        cx_error("simulate failed: %s", err);
        return CX_EXIT_FAILURE;
    }
    cx_info("done elapsed_ms=%lld", (long long)(cx_mono_ms() - t0));
    return CX_EXIT_OK;
}
