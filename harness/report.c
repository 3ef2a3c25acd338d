/* report.c - report.html from a run directory (see report.h). */
#include "harness/report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/file.h"
#include "common/json.h"

#define REPORT_MAX_DOC (32u << 20)     /* bytes of report.html */
#define REPORT_MAX_EVENTS (256u << 20) /* bytes of events.jsonl read */
#define SVG_W 900
#define SVG_H 320
#define PAD_L 60
#define PAD_R 20
#define PAD_T 20
#define PAD_B 40

typedef struct window {
    double t0, t1;     /* s since the first stamp */
    char label[96];    /* "kill learner 2" */
    const char *color; /* fill */
} window;

/* ---- report: helpers ---- */

static const char *jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static void esc(cx_buf *b, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            cx_buf_append(b, "&lt;", 4);
            break;
        case '>':
            cx_buf_append(b, "&gt;", 4);
            break;
        case '&':
            cx_buf_append(b, "&amp;", 5);
            break;
        case '"':
            cx_buf_append(b, "&quot;", 6);
            break;
        case '\'':
            cx_buf_append(b, "&#39;", 5);
            break;
        default:
            if ((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t')
                cx_buf_append(b, "?", 1);
            else
                cx_buf_append(b, s, 1);
        }
    }
}

static const char *fault_color(const char *type)
{
    static const struct {
        const char *type, *color;
    } map[] = {{"kill", "#e45756"},
               {"preempt", "#f58518"},
               {"pause", "#72b7b2"},
               {"straggle", "#54a24b"},
               {"partition", "#b279a2"},
               {"blackhole", "#9d755d"},
               {"clock", "#4c78a8"},
               {"disk", "#bab0ac"},
               {"nan", "#eeca3b"},
               {"corrupt", "#ff9da6"},
               {"bandwidth", "#88d27a"},
               {"syncer_restart", "#222222"},
               {NULL, NULL}};
    for (int i = 0; map[i].type; i++)
        if (strcmp(map[i].type, type) == 0)
            return map[i].color;
    return "#999999";
}

/* ---- report: the chart ---- */

static void chart(cx_buf *b, const double *t, const double *loss, size_t n, const window *w, size_t nw,
                  double tmax)
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(loss[i])) {
            lo = loss[i] < lo ? loss[i] : lo;
            hi = loss[i] > hi ? loss[i] : hi;
        }
    if (!isfinite(lo)) {
        cx_buf_printf(b, "<p>No eval loss was recorded.</p>\n");
        lo = 0;
        hi = 1;
    }
    if (hi - lo < 1e-6)
        hi = lo + 1e-6;
    double pad = (hi - lo) * 0.05;
    lo -= pad;
    hi += pad;
    if (tmax <= 0)
        tmax = 1;
    const double pw = SVG_W - PAD_L - PAD_R, ph = SVG_H - PAD_T - PAD_B;
#define X(v) (PAD_L + (v) / tmax * pw)
#define Y(v) (PAD_T + (1.0 - ((v)-lo) / (hi - lo)) * ph)
    cx_buf_printf(
        b,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
        "role=\"img\" aria-label=\"eval loss over time\">\n",
        SVG_W, SVG_H, SVG_W, SVG_H);
    cx_buf_printf(b,
                  "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"#fff\" stroke=\"#ccc\"/>\n",
                  PAD_L, PAD_T, pw, ph);
    for (size_t i = 0; i < nw; i++) {
        double a = w[i].t0 < 0 ? 0 : w[i].t0, z = w[i].t1 > tmax ? tmax : w[i].t1;
        if (z <= a)
            z = a + tmax * 0.002;
        cx_buf_printf(b,
                      "<rect class=\"fault\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\" "
                      "fill-opacity=\"0.25\"><title>",
                      X(a), PAD_T, X(z) - X(a), ph, w[i].color);
        esc(b, w[i].label);
        cx_buf_printf(b, " (%.1f-%.1f s)</title></rect>\n", w[i].t0, w[i].t1);
    }
    for (int k = 0; k <= 4; k++) {
        double v = lo + (hi - lo) * k / 4.0;
        cx_buf_printf(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.3f</text>\n",
                      PAD_L - 4, Y(v) + 4, v);
        double tv = tmax * k / 4.0;
        cx_buf_printf(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%.0f s</text>\n",
                      X(tv), SVG_H - PAD_B + 16, tv);
    }
    cx_buf_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"12\">eval loss (nats)</text>\n", PAD_L, PAD_T - 6);
    cx_buf_printf(b, "<polyline fill=\"none\" stroke=\"#1f5fbf\" stroke-width=\"1.5\" points=\"");
    for (size_t i = 0; i < n; i++)
        if (isfinite(loss[i]))
            cx_buf_printf(b, "%.1f,%.1f ", X(t[i]), Y(loss[i]));
    cx_buf_printf(b, "\"/>\n");
    for (size_t i = 0; i < n; i++)
        if (!isfinite(loss[i]))
            cx_buf_printf(b,
                          "<circle cx=\"%.1f\" cy=\"%d\" r=\"3\" fill=\"red\"><title>non-finite eval loss"
                          "</title></circle>\n",
                          X(t[i]), PAD_T + 4);
    cx_buf_printf(b, "</svg>\n");
#undef X
#undef Y
}

/* ---- report: the page ---- */

static void probes_table(cx_buf *b, const json_t *journal)
{
    cx_buf_printf(b, "<table><tr><th>phase</th><th>hypothesis</th><th>verdict</th><th>measured</th>"
                     "<th>threshold</th><th>explanation</th></tr>\n");
    const char *phases[] = {"before", "after"};
    const json_t *ss = json_object_get(journal, "steady_states");
    for (int p = 0; p < 2; p++) {
        size_t i;
        json_t *pr;
        json_array_foreach(json_object_get(json_object_get(ss, phases[p]), "probes"), i, pr)
        {
            json_t *out = json_object_get(pr, "output");
            const char *verdict = jstr(out, "verdict");
            cx_buf_printf(b, "<tr class=\"%s\"><td>%s</td><td>",
                          strcmp(verdict, "pass") == 0 ? "pass" : "fail", p == 0 ? "steady state" : "verify");
            esc(b, jstr(json_object_get(pr, "activity"), "name"));
            cx_buf_printf(b, "</td><td>");
            esc(b, verdict);
            cx_buf_printf(b, "</td><td>");
            json_t *m = json_object_get(out, "measured"), *th = json_object_get(out, "threshold");
            if (json_is_number(m))
                cx_buf_printf(b, "%.4g ", json_number_value(m));
            else
                cx_buf_printf(b, "- ");
            esc(b, jstr(out, "unit"));
            cx_buf_printf(b, "</td><td>");
            esc(b, jstr(out, "cmp"));
            if (json_is_number(th))
                cx_buf_printf(b, " %.4g ", json_number_value(th));
            esc(b, jstr(out, "unit"));
            cx_buf_printf(b, "</td><td>");
            esc(b, jstr(out, "explanation"));
            cx_buf_printf(b, "</td></tr>\n");
        }
    }
    cx_buf_printf(b, "</table>\n");
}

static void actions_table(cx_buf *b, const json_t *journal)
{
    cx_buf_printf(b, "<table><tr><th>action</th><th>fault</th><th>learner</th><th>status</th><th>start</th>"
                     "<th>fault id</th></tr>\n");
    const char *lists[] = {"run", "rollbacks"};
    for (int k = 0; k < 2; k++) {
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(journal, lists[k]), i, a)
        {
            json_t *act = json_object_get(a, "activity");
            json_t *prov = json_object_get(act, "provider");
            cx_buf_printf(b, "<tr><td>");
            esc(b, jstr(act, "name"));
            cx_buf_printf(b, "%s</td><td>", k ? " (rollback)" : "");
            esc(b, jstr(prov, "fault"));
            cx_buf_printf(b, "</td><td>%lld</td><td>",
                          (long long)json_integer_value(json_object_get(prov, "learner")));
            esc(b, jstr(a, "status"));
            cx_buf_printf(b, "</td><td>");
            esc(b, jstr(a, "start"));
            cx_buf_printf(b, "</td><td>");
            esc(b, jstr(json_object_get(a, "output"), "id"));
            cx_buf_printf(b, "</td></tr>\n");
        }
    }
    cx_buf_printf(b, "</table>\n");
}

int report_html(const char *run_dir, cx_buf *b, char *err, size_t errlen)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/journal.json", run_dir);
    json_error_t je;
    json_t *journal = json_load_file(path, 0, &je);
    if (!journal)
        return cx_fail(err, errlen, errno == ENOENT ? CX_ENOTFOUND : CX_EINVAL, "%s: %s", path, je.text);
    if (!json_is_object(journal) || !json_is_string(json_object_get(journal, "status"))) {
        json_decref(journal);
        return cx_fail(err, errlen, CX_EINVAL, "%s: not a chaosloco journal (no status)", path);
    }
    /* events: eval losses, fault records, the harness's syncer fault */
    size_t cap = 1024, n = 0, nw = 0, capw = 64;
    double *t = malloc(cap * sizeof *t), *loss = malloc(cap * sizeof *loss);
    window *w = malloc(capw * sizeof *w);
    int64_t t0 = INT64_MAX, tend = INT64_MIN;
    int64_t syncer_down = -1;
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
    json_array_foreach(evs, i, ev)
    {
        const char *kind = jstr(ev, "kind");
        double ts = (double)(json_integer_value(json_object_get(ev, "t_mono_ms")) - t0) / 1000.0;
        if (strcmp(kind, "training") == 0 && strcmp(jstr(ev, "type"), "eval") == 0 && t && loss) {
            if (n == cap) {
                cap *= 2;
                double *nt = realloc(t, cap * sizeof *t), *nl = realloc(loss, cap * sizeof *loss);
                if (nt)
                    t = nt;
                if (nl)
                    loss = nl;
                if (!nt || !nl)
                    break;
            }
            json_t *l = json_object_get(ev, "loss");
            double v = json_is_number(l) ? json_number_value(l) : NAN;
            t[n] = ts;
            loss[n++] = v >= 0 ? v : NAN;
        } else if (w && nw < capw &&
                   ((strcmp(kind, "fault") == 0) ||
                    (strcmp(kind, "action") == 0 && strcmp(jstr(ev, "fault"), "syncer_restart") == 0 &&
                     strcmp(jstr(ev, "phase"), "ok") == 0) ||
                    (strcmp(kind, "run") == 0 && strcmp(jstr(ev, "event"), "syncer_restarted") == 0))) {
            if (strcmp(kind, "action") == 0) {
                syncer_down = json_integer_value(json_object_get(ev, "t_mono_ms"));
                continue;
            }
            if (strcmp(kind, "run") == 0) {
                if (syncer_down >= 0) {
                    window *x = &w[nw++];
                    x->t0 = (double)(syncer_down - t0) / 1000.0;
                    x->t1 = ts;
                    x->color = fault_color("syncer_restart");
                    snprintf(x->label, sizeof x->label, "syncer killed and restarted");
                    syncer_down = -1;
                }
                continue;
            }
            json_t *rec = json_object_get(ev, "record");
            if (strcmp(jstr(rec, "state"), "failed") == 0)
                continue;
            int64_t s = json_integer_value(json_object_get(rec, "started_mono_ms"));
            json_t *e = json_object_get(rec, "ended_mono_ms");
            int64_t end = json_is_integer(e) ? json_integer_value(e)
                                             : s + json_integer_value(json_object_get(rec, "duration_ms"));
            window *x = &w[nw++];
            x->t0 = (double)(s - t0) / 1000.0;
            x->t1 = (double)(end - t0) / 1000.0;
            x->color = fault_color(jstr(rec, "type"));
            snprintf(x->label, sizeof x->label, "%s on learner %lld (%s)", jstr(rec, "type"),
                     (long long)json_integer_value(json_object_get(ev, "learner")), jstr(rec, "id"));
        }
    }
    double tmax = (double)(tend - t0) / 1000.0;
    json_t *exp = json_object_get(journal, "experiment");
    cx_buf_printf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>");
    esc(b, jstr(exp, "title"));
    cx_buf_printf(
        b, " - chaosloco report</title>\n<style>\n"
           "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\n"
           "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
           "text-align:left;font-size:13px}\n"
           "tr.pass td:nth-child(3){color:#1a7f37;font-weight:bold}"
           "tr.fail td:nth-child(3){color:#c62828;font-weight:bold}\n"
           ".status{font-size:18px;font-weight:bold}.legend span{display:inline-block;margin-right:1em}\n"
           ".sw{display:inline-block;width:12px;height:12px;margin-right:4px;opacity:.5}\n"
           "</style></head><body>\n<h1>");
    esc(b, jstr(exp, "title"));
    cx_buf_printf(b, "</h1>\n<p>");
    esc(b, jstr(exp, "description"));
    const char *status = jstr(journal, "status");
    int deviated = json_is_true(json_object_get(journal, "deviated"));
    cx_buf_printf(b, "</p>\n<p class=\"status\">status: ");
    esc(b, status);
    cx_buf_printf(b, "%s</p>\n<p>start ", deviated ? " (deviated)" : "");
    esc(b, jstr(journal, "start"));
    cx_buf_printf(b, ", end ");
    esc(b, jstr(journal, "end"));
    cx_buf_printf(b, ", %.1f s</p>\n", json_number_value(json_object_get(journal, "duration")));
    cx_buf_printf(b, "<h2>Global eval loss, fault windows shaded</h2>\n");
    chart(b, t ? t : (double[]){0}, loss ? loss : (double[]){0}, t && loss ? n : 0, w, w ? nw : 0, tmax);
    cx_buf_printf(b, "<p class=\"legend\">");
    const char *seen[32];
    int nseen = 0;
    for (size_t k = 0; w && k < nw && nseen < 32; k++) {
        int dup = 0;
        for (int q = 0; q < nseen; q++)
            dup |= seen[q] == w[k].color;
        if (dup)
            continue;
        seen[nseen++] = w[k].color;
        cx_buf_printf(b, "<span><i class=\"sw\" style=\"background:%s\"></i>", w[k].color);
        char type[96];
        snprintf(type, sizeof type, "%s", w[k].label);
        char *sp = strchr(type, ' ');
        if (sp && strncmp(type, "syncer killed", 13) != 0)
            *sp = '\0';
        esc(b, type);
        cx_buf_printf(b, "</span>");
    }
    cx_buf_printf(b, "</p>\n<p>%zu eval points, %zu fault windows.</p>\n", t && loss ? n : 0, w ? nw : 0);
    cx_buf_printf(b, "<h2>Hypotheses</h2>\n");
    probes_table(b, journal);
    cx_buf_printf(b, "<h2>Actions</h2>\n");
    actions_table(b, journal);
    cx_buf_printf(b,
                  "<p>Files: journal.json, junit.xml, events.jsonl, faults.json, summary.json, logs/.</p>\n"
                  "</body></html>\n");
    free(t);
    free(loss);
    free(w);
    json_decref(evs);
    json_decref(journal);
    return 0;
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
