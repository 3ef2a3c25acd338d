/* report.c - grids of simulations printed as the paper's Table 1, CSV or
 * JSON, and the sensitivity sweep (see report.h). */
#include "sim/report.h"

#include <jansson.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

/* ---- report: rows and the grid of results ---- */

typedef struct rep_row {
    sim_mode mode; /* dp, elastic or decoupled */
    int learners;  /* M for decoupled, 1 otherwise */
} rep_row;

typedef struct rep_grid {
    rep_row rows[SIM_GRID_MAX + 2];                 /* in print order */
    int nrows;                                      /* count */
    sim_stats cell[SIM_GRID_MAX + 2][SIM_GRID_MAX]; /* [row][chips column] */
} rep_grid;

static void rep_rows(const sim_grid *g, rep_grid *out)
{
    out->nrows = 0;
    if (g->mode_on[SIM_DP])
        out->rows[out->nrows++] = (rep_row){SIM_DP, 1};
    if (g->mode_on[SIM_ELASTIC])
        out->rows[out->nrows++] = (rep_row){SIM_ELASTIC, 1};
    if (g->mode_on[SIM_DECOUPLED])
        for (int i = 0; i < g->nlearners; i++)
            out->rows[out->nrows++] = (rep_row){SIM_DECOUPLED, g->learners[i]};
}

static int rep_run(const sim_params *p, const sim_grid *g, rep_grid *out, const char *what, char *err,
                   size_t errlen)
{
    rep_rows(g, out);
    int total = out->nrows * g->nchips, done = 0;
    for (int r = 0; r < out->nrows; r++)
        for (int c = 0; c < g->nchips; c++) {
            if (g->progress) {
                fprintf(stderr, "\r%s: %d/%d cells ", what, ++done, total);
                fflush(stderr);
            }
            int rc = sim_run_trials(p, out->rows[r].mode, g->chips[c], out->rows[r].learners, g->seed,
                                    g->trials, &out->cell[r][c], err, errlen);
            if (rc)
                return rc;
        }
    if (g->progress)
        fprintf(stderr, "\r%*s\r", 40, "");
    return 0;
}

void sim_chips_label(char *buf, size_t len, int64_t chips)
{
    if (chips >= 1000000 && chips % 10000 == 0)
        snprintf(buf, len, "%gM", (double)chips / 1e6);
    else if (chips >= 1000 && chips % 100 == 0)
        snprintf(buf, len, "%gk", (double)chips / 1e3);
    else
        snprintf(buf, len, "%lld", (long long)chips);
}

static void row_label(char *buf, size_t len, const rep_row *r)
{
    if (r->mode == SIM_DP)
        snprintf(buf, len, "data-parallel");
    else if (r->mode == SIM_ELASTIC)
        snprintf(buf, len, "elastic data-parallel");
    else
        snprintf(buf, len, "decoupled M=%d", r->learners);
}

/* ---- report: the text table ---- */

static void table_header(FILE *f, const sim_grid *g, const char *title, int width)
{
    fprintf(f, "%-*s", width, title);
    for (int c = 0; c < g->nchips; c++) {
        char lab[16];
        sim_chips_label(lab, sizeof lab, g->chips[c]);
        fprintf(f, " %17s", lab);
    }
    fprintf(f, "\n");
}

static void table_section(FILE *f, const sim_params *p, const sim_grid *g, const rep_grid *rg, int uptime)
{
    table_header(f, g, uptime ? "uptime %" : "goodput %", 24);
    for (int r = 0; r < rg->nrows; r++) {
        char lab[40];
        row_label(lab, sizeof lab, &rg->rows[r]);
        fprintf(f, "%-24s", lab);
        for (int c = 0; c < g->nchips; c++) {
            const sim_stats *s = &rg->cell[r][c];
            double m = 100 * (uptime ? s->uptime_mean : s->goodput_mean);
            double ci = 100 * (uptime ? s->uptime_ci95 : s->goodput_ci95);
            double paper = sim_paper_goodput_pct(rg->rows[r].mode, rg->rows[r].learners, g->chips[c]);
            char cell[40], pap[12] = "";
            if (!uptime && paper >= 0)
                snprintf(pap, sizeof pap, " [%.0f]", paper);
            else if (uptime && rg->rows[r].mode == SIM_DECOUPLED && rg->rows[r].learners >= 4 &&
                     p->quorum == 1)
                snprintf(pap, sizeof pap, " [~100]");
            snprintf(cell, sizeof cell, "%.1f±%.1f%s", m, ci, pap);
            /* "±" is two bytes but one column: pad by hand. */
            int pad = 17 - (int)(strlen(cell) - 1);
            fprintf(f, " %*s%s", pad > 0 ? pad : 0, "", cell);
        }
        fprintf(f, "\n");
    }
}

static void params_line(FILE *f, const sim_params *p, const sim_grid *g)
{
    char ck[32];
    if (p->checkpoint_s > 0)
        snprintf(ck, sizeof ck, "%gs", p->checkpoint_s);
    else
        snprintf(ck, sizeof ck, "Daly");
    fprintf(f,
            "model: per-chip MTBF %g y, restart %gs, domain recovery %gs (%s%s), rescale %gs, checkpoint %s "
            "costing %gs, domain %lld chips, failures while stopped: %s, learners recover %s, quorum K=%d, "
            "horizon %g d, %d trial%s, seed %llu\n",
            p->mtbf_years, p->restart_s, p->recovery_s, sim_dist_name(p->dist),
            p->dist == SIM_DIST_LOGNORMAL ? " sigma" : "", p->rescale_s, ck, p->checkpoint_cost_s,
            (long long)p->domain_chips, sim_stop_policy_name(p->stop_policy),
            p->learner_elastic ? "elastically" : "by restart", p->quorum, p->horizon_days, g->trials,
            g->trials == 1 ? "" : "s", (unsigned long long)g->seed);
}

/* ---- report: JSON ---- */

static json_t *params_json(const sim_params *p)
{
    return json_pack("{s:f, s:f, s:f, s:s, s:f, s:f, s:f, s:f, s:I, s:f, s:s, s:s, s:i}", "mtbf_years",
                     p->mtbf_years, "restart_s", p->restart_s, "recovery_s", p->recovery_s, "recovery_dist",
                     sim_dist_name(p->dist), "lognormal_sigma", p->lognormal_sigma, "rescale_s", p->rescale_s,
                     "checkpoint_s", p->checkpoint_s, "checkpoint_cost_s", p->checkpoint_cost_s,
                     "domain_chips", (json_int_t)p->domain_chips, "horizon_days", p->horizon_days,
                     "stop_failures", sim_stop_policy_name(p->stop_policy), "learner_recovery",
                     p->learner_elastic ? "elastic" : "restart", "quorum", p->quorum);
}

static json_t *results_json(const sim_grid *g, const rep_grid *rg)
{
    json_t *arr = json_array();
    for (int r = 0; arr && r < rg->nrows; r++)
        for (int c = 0; c < g->nchips; c++) {
            const sim_stats *s = &rg->cell[r][c];
            double paper = sim_paper_goodput_pct(rg->rows[r].mode, rg->rows[r].learners, g->chips[c]);
            json_t *o = json_pack("{s:s, s:i, s:I, s:f, s:f, s:f, s:f, s:f, s:i, s:o}", "mode",
                                  sim_mode_name(rg->rows[r].mode), "learners", rg->rows[r].learners, "chips",
                                  (json_int_t)g->chips[c], "goodput", s->goodput_mean, "goodput_ci95",
                                  s->goodput_ci95, "uptime", s->uptime_mean, "uptime_ci95", s->uptime_ci95,
                                  "failures_per_trial", s->failures_mean, "trials", s->trials,
                                  "paper_goodput", paper >= 0 ? json_real(paper / 100) : json_null());
            if (!o || json_array_append_new(arr, o)) {
                json_decref(arr);
                return NULL;
            }
        }
    return arr;
}

static int json_emit(FILE *f, json_t *root, char *err, size_t errlen)
{
    if (!root)
        return cx_fail(err, errlen, CX_ENOMEM, "json: out of memory");
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    json_decref(root);
    if (!s)
        return cx_fail(err, errlen, CX_ENOMEM, "json: out of memory");
    int bad = fprintf(f, "%s\n", s) < 0;
    free(s);
    return bad ? cx_fail(err, errlen, CX_EIO, "writing output failed") : 0;
}

/* ---- report: CSV ---- */

static void csv_rows(FILE *f, const char *variant, const sim_grid *g, const rep_grid *rg)
{
    for (int r = 0; r < rg->nrows; r++)
        for (int c = 0; c < g->nchips; c++) {
            const sim_stats *s = &rg->cell[r][c];
            double paper = sim_paper_goodput_pct(rg->rows[r].mode, rg->rows[r].learners, g->chips[c]);
            if (variant)
                fprintf(f, "%s,", variant);
            fprintf(f, "%s,%d,%lld,%.6f,%.6f,%.6f,%.6f,%.1f,%d,", sim_mode_name(rg->rows[r].mode),
                    rg->rows[r].learners, (long long)g->chips[c], s->goodput_mean, s->goodput_ci95,
                    s->uptime_mean, s->uptime_ci95, s->failures_mean, s->trials);
            if (paper >= 0)
                fprintf(f, "%.2f\n", paper / 100);
            else
                fprintf(f, "\n");
        }
}

#define CSV_COLS                                                                                             \
    "mode,learners,chips,goodput,goodput_ci95,uptime,uptime_ci95,failures_per_trial,trials,paper_goodput"

/* ---- report: the table ---- */

int sim_report_table(FILE *f, const sim_params *p, const sim_grid *g, sim_format fmt, char *err,
                     size_t errlen)
{
    rep_grid *rg = malloc(sizeof *rg);
    if (!rg)
        return cx_fail(err, errlen, CX_ENOMEM, "report: out of memory");
    int rc = rep_run(p, g, rg, "simulate", err, errlen);
    if (rc)
        goto done;
    if (fmt == SIM_FMT_JSON) {
        json_t *res = results_json(g, rg);
        json_t *root = res ? json_pack("{s:o, s:o}", "params", params_json(p), "results", res) : NULL;
        rc = json_emit(f, root, err, errlen);
        goto done;
    }
    if (fmt == SIM_FMT_CSV) {
        fprintf(f, "%s\n", CSV_COLS);
        csv_rows(f, NULL, g, rg);
    } else {
        params_line(f, p, g);
        fprintf(f, "cells: ours mean±95%% CI over trials [paper's Table 1 where it gives a figure; uptime "
                   "~100 is its\n"
                   "text: M >= 4, quorum 1]\n\n");
        table_section(f, p, g, rg, 0);
        fprintf(f, "\n");
        table_section(f, p, g, rg, 1);
    }
    if (fflush(f) != 0 || ferror(f))
        rc = cx_fail(err, errlen, CX_EIO, "writing output failed");
done:
    free(rg);
    return rc;
}

/* ---- report: the sensitivity sweep ---- */

typedef struct sweep_variant {
    char label[40]; /* "rescale-s x2" */
    sim_params p;   /* the parameters of this variant */
} sweep_variant;

#define SWEEP_MAX 24

static int sweep_variants(const sim_params *base, sweep_variant *v)
{
    int n = 0;
    v[n].p = *base;
    snprintf(v[n++].label, sizeof v[0].label, "baseline");
    static const double factors[] = {0.5, 2.0};
    for (int fi = 0; fi < 2; fi++) {
        double k = factors[fi];
        const char *ks = fi == 0 ? "x0.5" : "x2";
        struct {
            const char *name;
            size_t off;
        } knobs[] = {
            {"mtbf-years", offsetof(sim_params, mtbf_years)},
            {"restart-s", offsetof(sim_params, restart_s)},
            {"checkpoint-cost-s", offsetof(sim_params, checkpoint_cost_s)},
            {"rescale-s", offsetof(sim_params, rescale_s)},
            {"recovery-s", offsetof(sim_params, recovery_s)},
        };
        for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
            v[n].p = *base;
            double *x = (double *)((char *)&v[n].p + knobs[i].off);
            *x *= k;
            snprintf(v[n++].label, sizeof v[0].label, "%s %s", knobs[i].name, ks);
        }
        v[n].p = *base;
        v[n].p.domain_chips = fi == 0 ? (base->domain_chips + 1) / 2 : base->domain_chips * 2;
        snprintf(v[n++].label, sizeof v[0].label, "domain-chips %s", ks);
    }
    for (int d = SIM_DIST_FIXED; d <= SIM_DIST_LOGNORMAL; d++) {
        if ((sim_dist)d == base->dist)
            continue;
        v[n].p = *base;
        v[n].p.dist = (sim_dist)d;
        snprintf(v[n++].label, sizeof v[0].label, "recovery-dist %s", sim_dist_name((sim_dist)d));
    }
    for (int sp = SIM_STOP_NONE; sp <= SIM_STOP_EXTEND; sp++) {
        if ((sim_stop_policy)sp == base->stop_policy)
            continue;
        v[n].p = *base;
        v[n].p.stop_policy = (sim_stop_policy)sp;
        snprintf(v[n].label, sizeof v[0].label, "stop-failures %s",
                 sim_stop_policy_name((sim_stop_policy)sp));
        n++;
    }
    v[n].p = *base;
    v[n].p.learner_elastic = !base->learner_elastic;
    snprintf(v[n].label, sizeof v[0].label, "learner-recovery %s",
             v[n].p.learner_elastic ? "elastic" : "restart");
    n++;
    return n;
}

int sim_report_sweep(FILE *f, const sim_params *p, const sim_grid *g, sim_format fmt, char *err,
                     size_t errlen)
{
    sweep_variant *v = calloc(SWEEP_MAX, sizeof *v);
    rep_grid *rg = calloc(SWEEP_MAX, sizeof *rg);
    json_t *arr = NULL;
    int rc = 0;
    if (!v || !rg) {
        rc = cx_fail(err, errlen, CX_ENOMEM, "sweep: out of memory");
        goto done;
    }
    int nv = sweep_variants(p, v);
    for (int i = 0; i < nv; i++) {
        char what[96];
        snprintf(what, sizeof what, "sweep %d/%d %s", i + 1, nv, v[i].label);
        rc = rep_run(&v[i].p, g, &rg[i], what, err, errlen);
        if (rc) {
            char inner[CX_ERRLEN];
            snprintf(inner, sizeof inner, "%s", err ? err : "");
            cx_fail(err, errlen, rc, "variant '%s': %s", v[i].label, inner);
            goto done;
        }
    }
    if (fmt == SIM_FMT_JSON) {
        arr = json_array();
        for (int i = 0; arr && i < nv; i++) {
            json_t *res = results_json(g, &rg[i]);
            json_t *o = res ? json_pack("{s:s, s:o, s:o}", "variant", v[i].label, "params",
                                        params_json(&v[i].p), "results", res)
                            : NULL;
            if (!o || json_array_append_new(arr, o)) {
                json_decref(arr);
                arr = NULL;
            }
        }
        rc = json_emit(f, arr ? json_pack("{s:o}", "sweep", arr) : NULL, err, errlen);
        arr = NULL;
        goto done;
    }
    if (fmt == SIM_FMT_CSV) {
        fprintf(f, "variant,%s\n", CSV_COLS);
        for (int i = 0; i < nv; i++)
            csv_rows(f, v[i].label, g, &rg[i]);
    } else {
        fprintf(f, "sensitivity of goodput %% to each unknown (x0.5 and x2; other rows keep the baseline)\n");
        params_line(f, p, g);
        for (int r = 0; r < rg[0].nrows; r++) {
            char lab[40];
            row_label(lab, sizeof lab, &rg[0].rows[r]);
            fprintf(f, "\n");
            table_header(f, g, lab, 28);
            for (int i = 0; i < nv; i++) {
                fprintf(f, "  %-26s", v[i].label);
                for (int c = 0; c < g->nchips; c++) {
                    const sim_stats *s = &rg[i].cell[r][c];
                    fprintf(f, " %11.1f±%-5.1f", 100 * s->goodput_mean, 100 * s->goodput_ci95);
                }
                fprintf(f, "\n");
            }
            fprintf(f, "  %-26s", "paper");
            for (int c = 0; c < g->nchips; c++) {
                double paper = sim_paper_goodput_pct(rg[0].rows[r].mode, rg[0].rows[r].learners, g->chips[c]);
                if (paper >= 0)
                    fprintf(f, " %11.0f      ", paper);
                else
                    fprintf(f, " %11s      ", "-");
            }
            fprintf(f, "\n");
        }
    }
    if (fflush(f) != 0 || ferror(f))
        rc = cx_fail(err, errlen, CX_EIO, "writing output failed");
done:
    free(v);
    free(rg);
    return rc;
}
