/* report.c - report.html from a run directory (see report.h). */
#include "harness/report.h"
#include "harness/journal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/file.h"
#include "dashboards/assets.h"
#include "harness/fault_kinds.h"

#define REPORT_MAX_DOC (32u << 20)     /* bytes of report.html */
#define REPORT_MAX_EVENTS (256u << 20) /* bytes of events.jsonl read */
#define REPORT_MAX_RATES 2000          /* rate buckets on the charts */

/* ---- report: helpers ---- */

static const char *jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* JSON text inside <script type="application/json">: '<', '>' and '&' only
 * occur inside JSON strings, where \u escapes mean the same, so the HTML
 * parser never sees "</script" or "<!--" in it. */
static void json_in_script(cx_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            cx_buf_append(b, "\\u003c", 6);
        else if (*s == '>')
            cx_buf_append(b, "\\u003e", 6);
        else if (*s == '&')
            cx_buf_append(b, "\\u0026", 6);
        else
            cx_buf_append(b, s, 1);
    }
}

/* Case-insensitive substring test over len bytes. */
static int has_ci(const unsigned char *p, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; n <= len && i <= len - n; i++) {
        size_t k = 0;
        while (k < n && tolower(p[i + k]) == needle[k])
            k++;
        if (k == n)
            return 1;
    }
    return 0;
}

/* An embedded dashboard asset inlined in a <script> or <style> element.
 * The raw-text element ends at the first "</script"/"</style", so an asset
 * holding one (or "<!--", which changes how a script is parsed) cannot be
 * inlined as is: CX_EINVAL rather than a broken page. */
static int inline_asset(cx_buf *b, const char *name, const char *open, const char *close, char *err,
                        size_t errlen)
{
    const dash_asset *a = dash_asset_find(name);
    if (!a)
        return cx_fail(err, errlen, CX_ENOTFOUND, "embedded asset %s is missing from the build", name);
    if (has_ci(a->data, a->len, "</script") || has_ci(a->data, a->len, "</style") ||
        has_ci(a->data, a->len, "<!--"))
        return cx_fail(err, errlen, CX_EINVAL,
                       "embedded asset %s cannot be inlined (holds </script, </style "
                       "or <!--)",
                       name);
    cx_buf_printf(b, "%s", open);
    cx_buf_append(b, a->data, a->len);
    cx_buf_printf(b, "%s\n", close);
    return 0;
}

/* ---- report: the page ---- */

static void probes_table(cx_buf *b, const json_t *jn)
{
    cx_buf_printf(b, "<table><tr><th>phase</th><th>hypothesis</th><th>verdict</th><th>measured</th>"
                     "<th>threshold</th><th>explanation</th></tr>\n");
    const char *phases[] = {"before", "after"};
    const json_t *ss = json_object_get(jn, "steady_states");
    for (int p = 0; p < 2; p++) {
        size_t i;
        json_t *pr;
        json_array_foreach(json_object_get(json_object_get(ss, phases[p]), "probes"), i, pr)
        {
            json_t *out = json_object_get(pr, "output");
            const char *verdict = jstr(out, "verdict");
            cx_buf_printf(b, "<tr class=\"%s\"><td>%s</td><td>",
                          strcmp(verdict, "pass") == 0 ? "pass" : "fail", p == 0 ? "steady state" : "verify");
            jr_escape_markup(b, jstr(json_object_get(pr, "activity"), "name"));
            cx_buf_printf(b, "</td><td>");
            jr_escape_markup(b, verdict);
            cx_buf_printf(b, "</td><td>");
            json_t *m = json_object_get(out, "measured"), *th = json_object_get(out, "threshold");
            if (json_is_number(m))
                cx_buf_printf(b, "%.4g ", json_number_value(m));
            else
                cx_buf_printf(b, "- ");
            jr_escape_markup(b, jstr(out, "unit"));
            cx_buf_printf(b, "</td><td>");
            jr_escape_markup(b, jstr(out, "cmp"));
            if (json_is_number(th))
                cx_buf_printf(b, " %.4g ", json_number_value(th));
            jr_escape_markup(b, jstr(out, "unit"));
            cx_buf_printf(b, "</td><td>");
            jr_escape_markup(b, jstr(out, "explanation"));
            cx_buf_printf(b, "</td></tr>\n");
        }
    }
    cx_buf_printf(b, "</table>\n");
}

static void actions_table(cx_buf *b, const json_t *jn)
{
    cx_buf_printf(b, "<table><tr><th>action</th><th>fault</th><th>learner</th><th>status</th><th>start</th>"
                     "<th>fault id</th></tr>\n");
    const char *lists[] = {"run", "rollbacks"};
    for (int k = 0; k < 2; k++) {
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(jn, lists[k]), i, a)
        {
            json_t *act = json_object_get(a, "activity");
            json_t *cl = json_object_get(a, "chaosloco"); /* fault and learner of the call */
            cx_buf_printf(b, "<tr><td>");
            jr_escape_markup(b, jstr(act, "name"));
            cx_buf_printf(b, "%s</td><td>", k ? " (rollback)" : "");
            jr_escape_markup(b, jstr(cl, "fault"));
            cx_buf_printf(b, "</td><td>%lld</td><td>",
                          (long long)json_integer_value(json_object_get(cl, "learner")));
            jr_escape_markup(b, jstr(a, "status"));
            cx_buf_printf(b, "</td><td>");
            jr_escape_markup(b, jstr(a, "start"));
            cx_buf_printf(b, "</td><td>");
            jr_escape_markup(b, jstr(json_object_get(a, "output"), "id"));
            cx_buf_printf(b, "</td></tr>\n");
        }
    }
    cx_buf_printf(b, "</table>\n");
}

/* ---- report: the chart blob ---- */

static void json_append_i64(json_t *row, int64_t v)
{
    json_array_append_new(row, json_integer(v));
}

/* The run as the dashboard's charts want it (docs/dashboard.md, snapshot):
 * {t0_mono_ms, now_mono_ms, series: {loss, merges, rates}, faults}, from
 * events.jsonl alone. Rates are per bucket of the syncer's events: merges/s
 * from `merge` events, bytes in/s from the `contribution` payload sizes
 * and, for ddp, the gradient bytes of each step's `merge` (the events hold
 * no outbound byte counts: that column is null). */
static json_t *chart_blob(const json_t *evs)
{
    int64_t t0 = INT64_MAX, tend = INT64_MIN;
    size_t i;
    json_t *ev;
    json_array_foreach(evs, i, ev)
    {
        json_t *tm = json_object_get(ev, "t_mono_ms");
        if (json_is_integer(tm) && strcmp(jstr(ev, "kind"), "fault") != 0) {
            int64_t v = json_integer_value(tm);
            t0 = v < t0 ? v : t0;
            tend = v > tend ? v : tend;
        }
    }
    if (t0 == INT64_MAX)
        t0 = tend = 0;
    int64_t span = tend - t0, bucket = 1000;
    if (span / bucket > REPORT_MAX_RATES)
        bucket = span / REPORT_MAX_RATES + 1;
    /* ceil: an event at tend on a bucket edge belongs to the bucket before
     * (a zero-length last bucket would drop its bytes) */
    size_t nb = span > 0 ? (size_t)((span + bucket - 1) / bucket) : 1;
    double *mcount = calloc(nb, sizeof *mcount), *bytes = calloc(nb, sizeof *bytes);
    json_t *loss = json_array(), *merges = json_array(), *rates = json_array(), *faults = json_array();
    int64_t syncer_down = -1;   /* ms the harness took the syncer down (-1: it is up) */
    const char *down_kind = ""; /* the kind that did (borrowed from evs) */
    json_array_foreach(evs, i, ev)
    {
        const char *kind = jstr(ev, "kind"), *type = jstr(ev, "type");
        int64_t tm = json_integer_value(json_object_get(ev, "t_mono_ms"));
        size_t k = tm >= t0 && tm <= tend ? (size_t)((tm - t0) / bucket) : nb;
        if (k == nb && tm == tend)
            k = nb - 1;
        if (strcmp(kind, "training") == 0 && strcmp(type, "eval") == 0) {
            json_t *l = json_object_get(ev, "loss");
            double v = json_is_number(l) ? json_number_value(l) : NAN;
            json_t *row = json_array();
            json_append_i64(row, tm);
            /* NaN is written as -1 by the syncer: a gap, not a point */
            json_array_append_new(row, isfinite(v) && v >= 0 ? json_real(v) : json_null());
            json_append_i64(row, json_integer_value(json_object_get(ev, "merges")));
            json_append_i64(row, json_integer_value(json_object_get(ev, "tokens")));
            json_t *bpb = json_object_get(ev, "bpb"); /* the byte-level models' unit */
            json_array_append_new(row, json_is_number(bpb) && isfinite(v) && v >= 0
                                           ? json_real(json_number_value(bpb))
                                           : json_null());
            json_array_append_new(loss, row);
        } else if (strcmp(kind, "training") == 0 && strcmp(type, "merge") == 0) {
            json_t *row = json_array();
            json_append_i64(row, tm);
            json_append_i64(row, json_integer_value(json_object_get(ev, "fragment")));
            json_append_i64(row, json_integer_value(json_object_get(ev, "version")));
            json_append_i64(row, (int64_t)json_array_size(json_object_get(ev, "participants")));
            json_array_append_new(merges, row);
            if (mcount && k < nb)
                mcount[k] += 1;
            /* a ddp step's merge carries its gradients' bytes */
            if (bytes && k < nb && json_is_integer(json_object_get(ev, "bytes")))
                bytes[k] += (double)json_integer_value(json_object_get(ev, "bytes"));
        } else if (strcmp(kind, "training") == 0 && strcmp(type, "contribution") == 0) {
            if (bytes && k < nb)
                bytes[k] += (double)json_integer_value(json_object_get(ev, "bytes"));
        } else if (strcmp(kind, "action") == 0 && hx_kind_takes_syncer_down(jstr(ev, "fault")) &&
                   strcmp(jstr(ev, "phase"), "ok") == 0) {
            syncer_down = tm;
            down_kind = jstr(ev, "fault");
        } else if (strcmp(kind, "run") == 0 && strcmp(jstr(ev, "event"), "syncer_restarted") == 0 &&
                   syncer_down >= 0) {
            json_array_append_new(faults,
                                  json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:I}", "agent", "harness", "id",
                                            "syncer", "type", down_kind, "state", "reverted", "start_mono_ms",
                                            (json_int_t)syncer_down, "end_mono_ms", (json_int_t)tm,
                                            "duration_ms", (json_int_t)(tm - syncer_down)));
            syncer_down = -1;
        } else if (strcmp(kind, "fault") == 0) {
            json_t *rec = json_object_get(ev, "record");
            json_t *st = json_object_get(rec, "started_mono_ms"), *en = json_object_get(rec, "ended_mono_ms");
            if (!json_is_integer(st))
                continue;
            char agent[48];
            snprintf(agent, sizeof agent, "learner %lld",
                     (long long)json_integer_value(json_object_get(ev, "learner")));
            json_array_append_new(
                faults,
                json_pack(
                    "{s:s,s:s,s:s,s:s,s:O,s:O,s:O,s:O,s:O}", "agent", agent, "id", jstr(rec, "id"), "type",
                    jstr(rec, "type"), "state", jstr(rec, "state"), "start_mono_ms", st, "end_mono_ms",
                    json_is_integer(en) ? en : json_null(), "duration_ms",
                    json_object_get(rec, "duration_ms") ? json_object_get(rec, "duration_ms") : json_null(),
                    "revert_reason",
                    json_object_get(rec, "revert_reason") ? json_object_get(rec, "revert_reason")
                                                          : json_null(),
                    "params", json_object_get(rec, "params") ? json_object_get(rec, "params") : json_null()));
        }
    }
    for (size_t k = 0; mcount && bytes && k < nb && span > 0; k++) {
        int64_t tk = t0 + (int64_t)(k + 1) * bucket;
        if (tk > tend)
            tk = tend; /* the last bucket is partial */
        double dt = (double)(tk - (t0 + (int64_t)k * bucket)) / 1000.0;
        if (dt <= 0)
            continue;
        json_array_append_new(rates, json_pack("[I,f,f,n]", (json_int_t)tk, mcount[k] / dt, bytes[k] / dt));
    }
    free(mcount);
    free(bytes);
    return json_pack("{s:i,s:I,s:I,s:{s:o,s:o,s:o},s:o}", "version", 1, "t0_mono_ms", (json_int_t)t0,
                     "now_mono_ms", (json_int_t)tend, "series", "loss", loss, "merges", merges, "rates",
                     rates, "faults", faults);
}

/* The fault windows as a table (what the charts shade). */
static void faults_table(cx_buf *b, const json_t *blob)
{
    int64_t t0 = json_integer_value(json_object_get(blob, "t0_mono_ms"));
    cx_buf_printf(b,
                  "<table class=\"faults\"><tr><th></th><th>fault</th><th>target</th><th>id</th><th>from</th>"
                  "<th>to</th><th>state</th><th>reverted by</th></tr>\n");
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(blob, "faults"), i, f)
    {
        json_t *en = json_object_get(f, "end_mono_ms");
        cx_buf_printf(b, "<tr data-fault=\"");
        jr_escape_markup(b, jstr(f, "agent"));
        cx_buf_printf(b, "/");
        jr_escape_markup(b, jstr(f, "id"));
        cx_buf_printf(b, "\"><td class=\"swatch\"></td><td>");
        jr_escape_markup(b, jstr(f, "type"));
        cx_buf_printf(b, "</td><td>");
        jr_escape_markup(b, jstr(f, "agent"));
        cx_buf_printf(b, "</td><td>");
        jr_escape_markup(b, jstr(f, "id"));
        cx_buf_printf(b, "</td><td>%.1f s</td><td>",
                      (double)(json_integer_value(json_object_get(f, "start_mono_ms")) - t0) / 1000.0);
        if (json_is_integer(en))
            cx_buf_printf(b, "%.1f s", (double)(json_integer_value(en) - t0) / 1000.0);
        else
            cx_buf_printf(b, "-");
        cx_buf_printf(b, "</td><td>");
        jr_escape_markup(b, jstr(f, "state"));
        cx_buf_printf(b, "</td><td>");
        jr_escape_markup(b, jstr(f, "revert_reason"));
        cx_buf_printf(b, "</td></tr>\n");
    }
    cx_buf_printf(b, "</table>\n");
}

/* A figure cell: the number with fmt, or "-" for null/absent. */
static void num_cell(cx_buf *b, const json_t *o, const char *key, const char *fmt, double scale)
{
    json_t *v = json_object_get(o, key);
    cx_buf_printf(b, "<td>");
    if (json_is_number(v))
        cx_buf_printf(b, fmt, json_number_value(v) * scale);
    else
        cx_buf_printf(b, "-");
    cx_buf_printf(b, "</td>");
}

/* "What each fault cost": summary.json's fault_cost (fault_cost.h), the
 * same figures summary.json holds. */
static void cost_table(cx_buf *b, const json_t *summary, int64_t t0)
{
    const json_t *fc = json_object_get(summary, "fault_cost");
    const json_t *rows = json_object_get(fc, "faults");
    if (!json_is_array(rows)) {
        cx_buf_printf(b, "<p id=\"cost-none\">No fault cost: this run's summary.json has none (a run from "
                         "before it was measured, or one that never started).</p>\n");
        return;
    }
    const json_t *ref = json_object_get(fc, "reference");
    json_t *rt = json_object_get(ref, "merged_tokens_per_s");
    cx_buf_printf(b,
                  "<p>Goodput is merged tokens per second, as a ratio to this run's fault-free stretch "
                  "(%.1f s without an active fault or a learner still rejoining",
                  json_number_value(json_object_get(ref, "span_s")));
    if (json_is_number(rt))
        cx_buf_printf(b, ": %.0f merged tokens/s).", json_number_value(rt));
    else
        cx_buf_printf(b, "; none: the ratios are left out).");
    cx_buf_printf(b,
                  " <i>Tokens never merged</i>: the learner's contributions from the fault's start until "
                  "it rejoined that no merge took, and what a restarted unit trained past its checkpoint; "
                  "<i>time to rejoin</i>: from the fault's end to the first merge with that learner again; "
                  "<i>merges missed</i>: merges it would have been part of at its usual share, less those it "
                  "was.</p>\n");
    cx_buf_printf(b, "<table class=\"cost\" id=\"fault-cost\"><tr><th></th><th>fault</th><th>learner</th>"
                     "<th>id</th><th>window</th><th>tokens never merged</th><th>time to rejoin</th>"
                     "<th>merges missed</th><th>goodput during</th><th>goodput after</th></tr>\n");
    size_t i;
    json_t *f;
    json_array_foreach(rows, i, f)
    {
        cx_buf_printf(b, "<tr data-fault=\"learner %lld/",
                      (long long)json_integer_value(json_object_get(f, "learner")));
        jr_escape_markup(b, jstr(f, "id"));
        cx_buf_printf(b, "\"><td class=\"swatch\"></td><td>");
        jr_escape_markup(b, jstr(f, "type"));
        cx_buf_printf(b, "</td><td>%lld</td><td>",
                      (long long)json_integer_value(json_object_get(f, "learner")));
        jr_escape_markup(b, jstr(f, "id"));
        /* on the charts' time axis (they start at the first training event) */
        json_t *a = json_object_get(f, "start_mono_ms"), *e = json_object_get(f, "end_mono_ms");
        if (json_is_integer(a) && json_is_integer(e))
            cx_buf_printf(b, "</td><td>%.1f&ndash;%.1f s</td>", (double)(json_integer_value(a) - t0) / 1000.0,
                          (double)(json_integer_value(e) - t0) / 1000.0);
        else
            cx_buf_printf(b, "</td><td>%.1f&ndash;%.1f s of the run</td>",
                          json_number_value(json_object_get(f, "start_s")),
                          json_number_value(json_object_get(f, "end_s")));
        num_cell(b, f, "tokens_never_merged", "%.0f", 1.0);
        json_t *tr = json_object_get(f, "time_to_rejoin_s");
        if (json_is_number(tr))
            cx_buf_printf(b, "<td>%.1f s</td>", json_number_value(tr));
        else
            cx_buf_printf(b, "<td>never (the run ended first)</td>");
        num_cell(b, f, "merges_missed", "%.0f", 1.0);
        num_cell(b, f, "goodput_during", "%.0f%%", 100.0);
        num_cell(b, f, "goodput_after", "%.0f%%", 100.0);
        cx_buf_printf(b, "</tr>\n");
    }
    cx_buf_printf(b, "</table>\n");
}

/* ---- report: the document ---- */

/* Renders with the dashboard's own chart code (dashboards/web/charts.js on
 * uPlot), both inlined from the embedded assets, over the run's JSON. */
/* One line of summary.json's figures (when the run wrote one): goodput
 * and merge efficiency side by side, since they answer different
 * questions (docs/experiments.md). */
static void summary_line(cx_buf *b, const char *run_dir)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/summary.json", run_dir);
    json_t *s = json_load_file(path, 0, NULL);
    if (!json_is_object(s)) {
        json_decref(s);
        return;
    }
    static const char *const keys[][2] = {
        {"goodput", "goodput (useful / allocated learner compute)"},
        {"merge_efficiency", "merge efficiency (merged tokens / trained tokens)"},
    };
    cx_buf_printf(b, "<p>");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(s, keys[i][0]);
        cx_buf_printf(b, "%s%s: ", i ? ", " : "", keys[i][1]);
        if (json_is_number(v))
            cx_buf_printf(b, "%.3f", json_number_value(v));
        else
            cx_buf_printf(b, "not measured");
    }
    json_t *t = json_object_get(s, "tokens_trained");
    if (json_is_integer(t))
        cx_buf_printf(b, "; %lld tokens trained", (long long)json_integer_value(t));
    cx_buf_printf(b, "</p>\n");
    json_decref(s);
}

static const char REPORT_BOOT[] =
    "(function () {\n"
    "  var el = document.getElementById('charts');\n"
    "  var blob = JSON.parse(document.getElementById('run-data').textContent);\n"
    "  if (typeof uPlot === 'undefined' || typeof ChaoslocoCharts === 'undefined') {\n"
    "    el.textContent = 'The chart code did not load.';\n"
    "    return;\n"
    "  }\n"
    "  var run = ChaoslocoCharts.renderRun(el, blob);\n"
    "  window.__chaoslocoReport = { blob: blob, run: run };\n"
    "  /* the tables' rows in their fault's colour, as the charts and the legend */\n"
    "  document.querySelectorAll('tr[data-fault] td.swatch').forEach(function (td) {\n"
    "    var c = run.state.colours.get(td.parentNode.getAttribute('data-fault'));\n"
    "    if (c) { td.style.background = c; td.parentNode.setAttribute('data-colour', c); }\n"
    "  });\n"
    "})();\n";

int report_html(const char *run_dir, cx_buf *b, char *err, size_t errlen)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/journal.json", run_dir);
    json_error_t je;
    json_t *jn = json_load_file(path, 0, &je);
    if (!jn)
        return cx_fail(err, errlen, errno == ENOENT ? CX_ENOTFOUND : CX_EINVAL, "%s: %s", path, je.text);
    if (!json_is_object(jn) || !json_is_string(json_object_get(jn, "status"))) {
        json_decref(jn);
        return cx_fail(err, errlen, CX_EINVAL, "%s: not a chaosloco journal (no status)", path);
    }
    json_t *evs = json_array();
    snprintf(path, sizeof path, "%s/events.jsonl", run_dir);
    char *data = NULL;
    size_t len = 0;
    if (cx_file_read(path, REPORT_MAX_EVENTS, &data, &len, NULL, 0) == 0) {
        char *save = NULL;
        for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            json_t *ev = json_loads(line, 0, NULL);
            if (json_is_object(ev))
                json_array_append(evs, ev);
            json_decref(ev);
        }
        free(data);
    }
    json_t *blob = chart_blob(evs);
    json_decref(evs);
    snprintf(path, sizeof path, "%s/summary.json", run_dir);
    json_t *summary = json_load_file(path, 0, NULL); /* NULL: no cost table */
    if (!blob) {
        json_decref(summary);
        json_decref(jn);
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    size_t npoints = json_array_size(json_object_get(json_object_get(blob, "series"), "loss"));
    size_t nwin = json_array_size(json_object_get(blob, "faults"));

    json_t *exp = json_object_get(jn, "experiment");
    cx_buf_printf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                     "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                     "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n<title>");
    jr_escape_markup(b, jstr(exp, "title"));
    cx_buf_printf(b, " - chaosloco report</title>\n");
    int rc = inline_asset(b, "uPlot.min.css", "<style>\n", "</style>", err, errlen);
    cx_buf_printf(b,
                  "<style>\n"
                  "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\n"
                  "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
                  "text-align:left;font-size:13px}\n"
                  "tr.pass td:nth-child(3){color:#1a7f37;font-weight:bold}"
                  "tr.fail td:nth-child(3){color:#c62828;font-weight:bold}\n"
                  ".status{font-size:18px;font-weight:bold}\n"
                  "#charts{max-width:1100px}.cl-chart{margin:0 0 12px}\n"
                  "td.swatch{width:12px;padding:0}\n"
                  "</style></head><body>\n<h1>");
    jr_escape_markup(b, jstr(exp, "title"));
    cx_buf_printf(b, "</h1>\n<p>");
    jr_escape_markup(b, jstr(exp, "description"));
    const char *status = jstr(jn, "status");
    int deviated = json_is_true(json_object_get(jn, "deviated"));
    cx_buf_printf(b, "</p>\n<p class=\"status\">status: ");
    jr_escape_markup(b, status);
    cx_buf_printf(b, "%s</p>\n<p>start ", deviated ? " (deviated)" : "");
    jr_escape_markup(b, jstr(jn, "start"));
    cx_buf_printf(b, ", end ");
    jr_escape_markup(b, jstr(jn, "end"));
    cx_buf_printf(b, ", %.1f s</p>\n", json_number_value(json_object_get(jn, "duration")));
    summary_line(b, run_dir);
    cx_buf_printf(b, "<h2>Training, one colour per fault</h2>\n");
    if (npoints == 0)
        cx_buf_printf(b, "<p>No eval loss was recorded.</p>\n");
    cx_buf_printf(b,
                  "<div id=\"charts\"></div>\n"
                  "<noscript><p>The charts are drawn by inline JavaScript (no network needed); the fault "
                  "windows are listed below.</p></noscript>\n"
                  "<p>%zu eval points, %zu fault windows.</p>\n",
                  npoints, nwin);
    cx_buf_printf(b, "<h2>What each fault cost</h2>\n");
    cost_table(b, summary, json_integer_value(json_object_get(blob, "t0_mono_ms")));
    cx_buf_printf(b, "<h2>Fault windows</h2>\n");
    faults_table(b, blob);
    cx_buf_printf(b, "<h2>Hypotheses</h2>\n");
    probes_table(b, jn);
    cx_buf_printf(b, "<h2>Actions</h2>\n");
    actions_table(b, jn);
    cx_buf_printf(b,
                  "<p>Files: journal.json, junit.xml, events.jsonl, faults.json, summary.json, logs/.</p>\n");
    char *text = json_dumps(blob, JSON_COMPACT | JSON_REAL_PRECISION(9));
    cx_buf_printf(b, "<script type=\"application/json\" id=\"run-data\">");
    if (text)
        json_in_script(b, text);
    else
        cx_buf_printf(b, "{}");
    cx_buf_printf(b, "</script>\n");
    free(text);
    if (rc == 0)
        rc = inline_asset(b, "uPlot.iife.min.js", "<script>\n", "</script>", err, errlen);
    if (rc == 0)
        rc = inline_asset(b, "charts.js", "<script>\n", "</script>", err, errlen);
    cx_buf_printf(b, "<script>\n%s</script>\n</body></html>\n", REPORT_BOOT);
    json_decref(blob);
    json_decref(summary);
    json_decref(jn);
    return rc;
}

int report_render(const char *run_dir, char *err, size_t errlen)
{
    cx_buf b;
    cx_buf_init(&b, REPORT_MAX_DOC);
    int rc = report_html(run_dir, &b, err, errlen);
    if (rc == 0) {
        char path[2048];
        snprintf(path, sizeof path, "%s/report.html", run_dir);
        rc = cx_file_write_atomic(path, b.data, b.len, err, errlen);
    }
    cx_buf_cleanup(&b);
    return rc;
}
