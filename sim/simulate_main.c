/* simulate_main.c - `chaosloco simulate`: option parsing and wiring only;
 * the model is sim/sim.c, the printing sim/report.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/commands.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/flags.h"
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

/* ---- simulate: flags with their own syntax (cx_flags CX_FLAG_FUNC rows) ---- */

/* --chips LIST; dst: sim_grid * */
static int flag_chips(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    sim_grid *g = dst;
    return parse_list(name, v, SIM_GRID_MAX, parse_chip, g, &g->nchips, err, errlen);
}

/* --learners LIST; dst: sim_grid * */
static int flag_learners(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    sim_grid *g = dst;
    return parse_list(name, v, SIM_GRID_MAX, parse_learner, g, &g->nlearners, err, errlen);
}

/* --modes LIST: only the rows named; dst: sim_grid * */
static int flag_modes(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    sim_grid *g = dst;
    int n;
    memset(g->mode_on, 0, sizeof g->mode_on);
    return parse_list(name, v, 3, parse_mode, g, &n, err, errlen);
}

/* A number in [min, max], or the word that means 0 (*dst = 0). */
static int number_or_word(const char *name, const char *v, const char *word, double min, double max,
                          double *dst, char *err, size_t errlen)
{
    if (strcmp(v, word) == 0) {
        *dst = 0;
        return 0;
    }
    return cx_parse_double(v, name, min, max, dst, err, errlen);
}

/* --mtbf-years Y|inf (inf: never fails); dst: double * */
static int flag_mtbf(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    return number_or_word(name, v, "inf", 1e-9, 1e6, dst, err, errlen);
}

/* --checkpoint-s S|auto (auto: Daly's optimum); dst: double * */
static int flag_checkpoint(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    return number_or_word(name, v, "auto", 1e-3, 1e8, dst, err, errlen);
}

/* --recovery-dist D; dst: sim_dist * */
static int flag_dist(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    char inner[CX_ERRLEN];
    if (sim_dist_parse(v, dst, inner, sizeof inner))
        return cx_fail(err, errlen, CX_EINVAL, "%s: %s", name, inner);
    return 0;
}

/* --stop-failures P; dst: sim_stop_policy * */
static int flag_stop(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    char inner[CX_ERRLEN];
    if (sim_stop_policy_parse(v, dst, inner, sizeof inner))
        return cx_fail(err, errlen, CX_EINVAL, "%s: %s", name, inner);
    return 0;
}

/* ---- simulate: main ---- */

/* --learner-recovery's values, by sim_params.learner_elastic */
static const char *const recovery_names[] = {"restart", "elastic", NULL};
/* --format's values, by sim_format */
static const char *const format_names[] = {"table", "csv", "json", NULL};

int simulate_main(int argc, char **argv)
{
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
    int64_t quorum = p.quorum, elastic = p.learner_elastic, trials = g.trials, seed = (int64_t)g.seed;
    int64_t fmt = SIM_FMT_TABLE;
    int sweep = 0;
    char err[CX_ERRLEN];
    const cx_flag flags[] = {
        {.name = "--chips", .kind = CX_FLAG_FUNC, .dst = &g, .parse = flag_chips},
        {.name = "--modes", .kind = CX_FLAG_FUNC, .dst = &g, .parse = flag_modes},
        {.name = "--learners", .kind = CX_FLAG_FUNC, .dst = &g, .parse = flag_learners},
        {.name = "--quorum", .kind = CX_FLAG_I64, .dst = &quorum, .min = 1, .max = 4096},
        {.name = "--learner-recovery", .kind = CX_FLAG_ENUM, .dst = &elastic, .names = recovery_names},
        {.name = "--mtbf-years", .kind = CX_FLAG_FUNC, .dst = &p.mtbf_years, .parse = flag_mtbf},
        {.name = "--restart-s", .kind = CX_FLAG_DOUBLE, .dst = &p.restart_s, .max = 1e7},
        {.name = "--recovery-s", .kind = CX_FLAG_DOUBLE, .dst = &p.recovery_s, .max = 1e8},
        {.name = "--recovery-dist", .kind = CX_FLAG_FUNC, .dst = &p.dist, .parse = flag_dist},
        {.name = "--recovery-sigma", .kind = CX_FLAG_DOUBLE, .dst = &p.lognormal_sigma, .max = 5},
        {.name = "--rescale-s", .kind = CX_FLAG_DOUBLE, .dst = &p.rescale_s, .max = 1e7},
        {.name = "--checkpoint-s", .kind = CX_FLAG_FUNC, .dst = &p.checkpoint_s, .parse = flag_checkpoint},
        {.name = "--checkpoint-cost-s", .kind = CX_FLAG_DOUBLE, .dst = &p.checkpoint_cost_s, .max = 1e7},
        {.name = "--domain-chips", .kind = CX_FLAG_I64, .dst = &p.domain_chips, .min = 1, .max = 100000000},
        {.name = "--stop-failures", .kind = CX_FLAG_FUNC, .dst = &p.stop_policy, .parse = flag_stop},
        {.name = "--horizon-days", .kind = CX_FLAG_DOUBLE, .dst = &p.horizon_days, .min = 1e-3, .max = 3650},
        {.name = "--trials", .kind = CX_FLAG_I64, .dst = &trials, .min = 1, .max = 10000},
        {.name = "--seed", .kind = CX_FLAG_I64, .dst = &seed, .max = (double)INT64_MAX},
        {.name = "--format", .kind = CX_FLAG_ENUM, .dst = &fmt, .names = format_names},
        {.name = "--sweep", .kind = CX_FLAG_BOOL, .dst = &sweep},
        {0}};
    int npos = 0, prc = cx_flags_parse("simulate", argc, argv, flags, NULL, NULL, 0, &npos, usage);
    if (prc != CX_FLAGS_OK)
        return prc;
    p.quorum = (int)quorum;
    p.learner_elastic = (int)elastic;
    g.trials = (int)trials;
    g.seed = (uint64_t)seed;
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
            recovery_names[p.learner_elastic], p.quorum, p.horizon_days, g.trials, (unsigned long long)g.seed,
            format_names[fmt], sweep);

    int64_t t0 = cx_mono_ms();
    int rc = sweep ? sim_report_sweep(stdout, &p, &g, (sim_format)fmt, err, sizeof err)
                   : sim_report_table(stdout, &p, &g, (sim_format)fmt, err, sizeof err);
    if (rc) {
        cx_error("simulate failed: %s", err);
        return CX_EXIT_FAILURE;
    }
    cx_info("done elapsed_ms=%lld", (long long)(cx_mono_ms() - t0));
    return CX_EXIT_OK;
}
