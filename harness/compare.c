/* compare.c - the same experiment in several modes (see compare.h). */
#include "harness/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/file.h"
#include "common/log.h"
#include "harness/run.h"

static double num(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static json_t *num_or_null(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

json_t *compare_table(const json_t *runs)
{
    double target = NAN;
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r)
    {
        double f = num(json_object_get(r, "summary"), "final_loss");
        if (isfinite(f) && (!isfinite(target) || f > target))
            target = f;
    }
    json_t *rows = json_array();
    json_array_foreach(runs, i, r)
    {
        json_t *s = json_object_get(r, "summary");
        double ttt = NAN;
        size_t k;
        json_t *pt;
        json_array_foreach(json_object_get(s, "eval_curve"), k, pt)
        {
            double t = json_number_value(json_array_get(pt, 0));
            json_t *l = json_array_get(pt, 1);
            if (isfinite(target) && json_is_number(l) && json_number_value(l) <= target) {
                ttt = t;
                break;
            }
        }
        json_t *row = json_pack("{s:s,s:I,s:s}", "mode", json_string_value(json_object_get(r, "mode")),
                                "exit_code", json_integer_value(json_object_get(r, "exit_code")), "status",
                                json_string_value(json_object_get(s, "status"))
                                    ? json_string_value(json_object_get(s, "status"))
                                    : "no-run");
        json_object_set_new(row, "goodput", num_or_null(num(s, "goodput")));
        json_object_set_new(row, "time_to_target_s", num_or_null(ttt));
        json_object_set_new(row, "bytes_per_token", num_or_null(num(s, "bytes_per_token")));
        json_object_set_new(row, "final_loss", num_or_null(num(s, "final_loss")));
        json_object_set_new(row, "longest_merge_gap_s", num_or_null(num(s, "longest_merge_gap_s")));
        json_object_set_new(row, "tokens", num_or_null(num(s, "tokens")));
        json_object_set_new(row, "duration_s", num_or_null(num(s, "duration_s")));
        json_t *rd = json_object_get(r, "run_dir");
        json_object_set_new(row, "run_dir", json_is_string(rd) ? json_incref(rd) : json_string(""));
        json_array_append_new(rows, row);
    }
    return json_pack("{s:o,s:o}", "target_loss", num_or_null(target), "rows", rows);
}

static void cell(cx_buf *b, const json_t *row, const char *key, const char *fmt)
{
    json_t *v = json_object_get(row, key);
    if (json_is_number(v))
        cx_buf_printf(b, fmt, json_number_value(v));
}

/* The numeric columns of the CSV after mode, exit_code and status, in
 * order, with their formats (an absent value is an empty cell). */
static const struct {
    const char *key, *fmt;
} csv_cells[] = {{"goodput", "%.4f"},    {"time_to_target_s", "%.2f"},    {"bytes_per_token", "%.2f"},
                 {"final_loss", "%.4f"}, {"longest_merge_gap_s", "%.3f"}, {"tokens", "%.0f"},
                 {"duration_s", "%.2f"}};

char *compare_csv(const json_t *table)
{
    cx_buf b;
    cx_buf_init(&b, 1 << 20);
    cx_buf_printf(&b, "mode,exit_code,status,goodput,time_to_target_s,bytes_per_token,final_loss,"
                      "longest_merge_gap_s,tokens,duration_s\n");
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(table, "rows"), i, row)
    {
        cx_buf_printf(&b, "%s,%lld,%s,", json_string_value(json_object_get(row, "mode")),
                      (long long)json_integer_value(json_object_get(row, "exit_code")),
                      json_string_value(json_object_get(row, "status")));
        for (size_t c = 0; c < sizeof csv_cells / sizeof csv_cells[0]; c++) {
            cell(&b, row, csv_cells[c].key, csv_cells[c].fmt);
            cx_buf_printf(&b, c + 1 < sizeof csv_cells / sizeof csv_cells[0] ? "," : "\n");
        }
    }
    return cx_buf_take(&b, NULL);
}

static void print_table(const json_t *table)
{
    double target = num(table, "target_loss");
    printf("\ntarget loss for time-to-target: %s%.4f nats (the worst final loss over the modes)\n",
           isfinite(target) ? "" : "n/a ", isfinite(target) ? target : 0.0);
    printf("%-12s %-10s %8s %12s %14s %10s %10s %10s %8s\n", "mode", "status", "goodput", "t_target_s",
           "bytes/token", "final", "max_gap_s", "tokens", "run_s");
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(table, "rows"), i, row)
    {
        /* the numeric columns, "-" where a run has no value */
        static const struct {
            const char *key, *fmt;
        } cols[] = {{"goodput", "%.3f"},    {"time_to_target_s", "%.1f"},    {"bytes_per_token", "%.1f"},
                    {"final_loss", "%.4f"}, {"longest_merge_gap_s", "%.2f"}, {"tokens", "%.0f"},
                    {"duration_s", "%.1f"}};
        char c[7][32];
        for (int k = 0; k < 7; k++) {
            double x = num(row, cols[k].key);
            if (isfinite(x))
                snprintf(c[k], sizeof c[k], cols[k].fmt, x);
            else
                snprintf(c[k], sizeof c[k], "-");
        }
        printf("%-12s %-10s %8s %12s %14s %10s %10s %10s %8s\n",
               json_string_value(json_object_get(row, "mode")),
               json_string_value(json_object_get(row, "status")), c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
    }
    fflush(stdout);
}

int compare_run(const compare_opts *o, int *exit_code, char *err, size_t errlen)
{
    *exit_code = CX_EXIT_OK;
    char out[1024];
    if (o->out_dir) {
        snprintf(out, sizeof out, "%s", o->out_dir);
    } else {
        char stamp[24];
        cx_stamp_time(stamp, sizeof stamp, cx_real_ns());
        const char *b = strrchr(o->experiment, '/');
        char base[128];
        snprintf(base, sizeof base, "%s", b ? b + 1 : o->experiment);
        char *dot = strrchr(base, '.');
        if (dot)
            *dot = '\0';
        snprintf(out, sizeof out, "out/compare-%s-%s", base, stamp);
    }
    int rc = cx_mkdir_p(out, err, errlen);
    if (rc < 0)
        return rc;
    json_t *runs = json_array();
    for (int i = 0; i < o->nmodes && !run_interrupted(); i++) {
        char dir[1100];
        snprintf(dir, sizeof dir, "%s/%s", out, o->modes[i]);
        run_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.experiment = o->experiment;
        ro.out_dir = dir;
        ro.mode = o->modes[i];
        ro.ci = o->ci;
        ro.has_seed = o->has_seed;
        ro.seed = o->seed;
        ro.time_limit_s = o->time_limit_s;
        ro.progress = -1;
        ro.quiet_summary = 1;
        run_result res;
        char e2[CX_ERRLEN] = "";
        cx_info("compare: mode %s -> %s", o->modes[i], dir);
        rc = run_experiment(&ro, &res, e2, sizeof e2);
        if (rc < 0 || res.exit_code == CX_EXIT_USAGE) {
            snprintf(err, errlen, "mode %s: %s", o->modes[i], e2);
            run_result_cleanup(&res);
            json_decref(runs);
            return CX_EINVAL;
        }
        cx_info("compare: mode %s status=%s exit=%d", o->modes[i], res.status, res.exit_code);
        if (res.exit_code == CX_EXIT_ERROR)
            *exit_code = CX_EXIT_ERROR;
        if (res.exit_code == CX_EXIT_ABORTED && run_interrupted())
            *exit_code = CX_EXIT_ABORTED;
        json_t *r = json_pack("{s:s,s:i,s:s,s:o}", "mode", o->modes[i], "exit_code", res.exit_code, "run_dir",
                              res.run_dir, "summary", res.summary ? json_incref(res.summary) : json_object());
        json_array_append_new(runs, r);
        run_result_cleanup(&res);
    }
    json_t *table = compare_table(runs);
    json_object_set_new(table, "experiment", json_string(o->experiment));
    json_object_set_new(table, "variant", json_string(o->ci ? "ci" : "base"));
    print_table(table);
    char path[1200];
    snprintf(path, sizeof path, "%s/compare.json", out);
    json_dump_file(table, path, JSON_INDENT(1) | JSON_SORT_KEYS);
    char *csv = compare_csv(table);
    snprintf(path, sizeof path, "%s/compare.csv", out);
    if (csv)
        cx_file_write_atomic(path, csv, strlen(csv), NULL, 0);
    free(csv);
    printf("written: %s/compare.csv, %s/compare.json\n", out, out);
    json_decref(table);
    json_decref(runs);
    if (run_interrupted())
        *exit_code = CX_EXIT_ABORTED;
    return 0;
}
