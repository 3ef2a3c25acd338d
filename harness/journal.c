/* journal.c - journal.json, junit.xml and events.jsonl (see journal.h). */
#include "harness/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/file.h"
#include "harness/ctk.h"

#define JR_MAX_LINE (1 << 20)  /* bytes per events.jsonl line */
#define JR_MAX_DOC (64u << 20) /* bytes of a journal or junit document */

/* ---- events.jsonl ---- */

struct jr_events {
    int fd; /* O_APPEND */
};

int jr_events_open(const char *path, jr_events **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        return cx_fail(err, errlen, CX_EIO, "open %s: %s", path, strerror(e));
    }
    jr_events *ev = calloc(1, sizeof(*ev));
    if (!ev) {
        close(fd);
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    ev->fd = fd;
    *out = ev;
    return 0;
}

void jr_events_close(jr_events *ev)
{
    if (!ev)
        return;
    close(ev->fd);
    free(ev);
}

static json_t *iso_json(int64_t real_ns)
{
    char t[40];
    cx_iso_time(t, sizeof(t), real_ns);
    return json_string(t);
}

int jr_events_append(jr_events *ev, json_t *obj, char *err, size_t errlen)
{
    if (!json_is_object(obj))
        return cx_fail(err, errlen, CX_EINVAL, "event: expected an object");
    if (!json_object_get(obj, "t_real"))
        json_object_set_new(obj, "t_real", iso_json(cx_real_ns()));
    if (!json_object_get(obj, "t_mono_ms"))
        json_object_set_new(obj, "t_mono_ms", json_integer(cx_mono_ms()));
    char *line = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
    if (!line)
        return cx_fail(err, errlen, CX_ENOMEM, "event: cannot encode");
    size_t n = strlen(line);
    if (n + 1 > JR_MAX_LINE) {
        free(line);
        return cx_fail(err, errlen, CX_ETOOBIG, "event: %zu bytes over the %d cap", n, JR_MAX_LINE);
    }
    line[n] = '\n'; /* replaces the NUL: one write(2) per line */
    size_t off = 0;
    int rc = 0;
    while (off < n + 1) {
        ssize_t w = write(ev->fd, line + off, n + 1 - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            int e = errno;
            rc = cx_fail(err, errlen, CX_EIO, "events.jsonl: %s", strerror(e));
            break;
        }
        off += (size_t)w;
    }
    free(line);
    return rc;
}

json_t *jr_action_event(const char *phase, const char *action, const char *fault, int learner,
                        const char *fault_id, const char *error)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:i}", "kind", "action", "phase", phase, "action",
                          action ? action : "", "fault", fault ? fault : "", "learner", learner);
    if (o && fault_id)
        json_object_set_new(o, "fault_id", json_string(fault_id));
    if (o && error)
        json_object_set_new(o, "error", json_string(error));
    return o;
}

/* ---- journal ---- */

typedef struct jr_probe {
    jr_phase phase;
    char *label;  /* the spec's label */
    char *kind;   /* hypothesis name */
    json_t *spec; /* the entry as written */
    hyp_verdict v;
    int64_t start_ns, end_ns;
} jr_probe;

typedef struct jr_act {
    int rollback;
    json_t *rec; /* the finished run[] / rollbacks[] entry */
} jr_act;

struct journal {
    json_t *experiment; /* copy of the validated document (journal "chaosloco".experiment) */
    json_t *ctk;        /* its Chaos Toolkit translation (journal "experiment"), ctk.h */
    json_t *used;       /* ctk activities already matched to run records (borrowed refs) */
    char *title;
    int64_t start_ns, end_ns;
    jr_status status;
    double final_loss; /* nats, NAN: none (journal_set_final_loss) */
    json_t *clocks;    /* each process's clock (journal_set_clocks), an array */
    jr_probe *probes;
    int nprobes, capprobes;
    jr_act *acts;
    int nacts, capacts;
};

journal *journal_new(const experiment *e)
{
    journal *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->experiment = json_deep_copy(e->doc);
    j->ctk = ctk_experiment(e, NULL);
    j->used = json_array();
    j->clocks = json_array();
    j->title = strdup(e->title ? e->title : "experiment");
    if (!j->experiment || !j->ctk || !j->used || !j->clocks || !j->title) {
        journal_free(j);
        return NULL;
    }
    j->status = JR_COMPLETED;
    j->final_loss = NAN;
    return j;
}

void journal_free(journal *j)
{
    if (!j)
        return;
    json_decref(j->experiment);
    json_decref(j->ctk);
    json_decref(j->used);
    json_decref(j->clocks);
    free(j->title);
    for (int i = 0; i < j->nprobes; i++) {
        free(j->probes[i].label);
        free(j->probes[i].kind);
        json_decref(j->probes[i].spec);
    }
    free(j->probes);
    for (int i = 0; i < j->nacts; i++)
        json_decref(j->acts[i].rec);
    free(j->acts);
    free(j);
}

int journal_set_plan(journal *j, const experiment *e, const schedule *s)
{
    json_t *x = ctk_experiment(e, s);
    if (!x)
        return CX_ENOMEM;
    json_decref(j->ctk);
    j->ctk = x;
    json_array_clear(j->used);
    return 0;
}

void journal_set_endpoints(journal *j, const char *syncer_url, const char *const *agent_urls, int n)
{
    ctk_set_endpoints(j->ctk, syncer_url, agent_urls, n);
}

void journal_set_start(journal *j, int64_t real_ns)
{
    j->start_ns = real_ns;
}

void journal_set_end(journal *j, int64_t real_ns, jr_status status)
{
    j->end_ns = real_ns;
    j->status = status;
}

void journal_set_final_loss(journal *j, double nats)
{
    j->final_loss = nats;
}

void journal_set_clocks(journal *j, const json_t *clocks)
{
    json_t *c = json_is_array(clocks) ? json_deep_copy(clocks) : NULL;
    if (!c)
        return;
    json_decref(j->clocks);
    j->clocks = c;
}

int journal_add_hypothesis(journal *j, jr_phase phase, const hyp_spec *s, const hyp_verdict *v,
                           int64_t start_ns, int64_t end_ns)
{
    if (j->nprobes == j->capprobes) {
        int ncap = j->capprobes ? j->capprobes * 2 : 16;
        jr_probe *p = realloc(j->probes, (size_t)ncap * sizeof(*p));
        if (!p)
            return CX_ENOMEM;
        j->probes = p;
        j->capprobes = ncap;
    }
    jr_probe *p = &j->probes[j->nprobes];
    memset(p, 0, sizeof(*p));
    p->phase = phase;
    p->label = strdup(hyp_spec_label(s));
    p->kind = strdup(hyp_spec_kind(s)->name);
    p->spec = json_deep_copy(hyp_spec_json(s));
    p->v = *v;
    p->start_ns = start_ns;
    p->end_ns = end_ns;
    if (!p->label || !p->kind || !p->spec) {
        free(p->label);
        free(p->kind);
        json_decref(p->spec);
        return CX_ENOMEM;
    }
    j->nprobes++;
    return 0;
}

static json_t *num_or_null(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static double secs(int64_t a_ns, int64_t b_ns)
{
    return b_ns > a_ns ? (double)(b_ns - a_ns) / 1e9 : 0.0;
}

int journal_add_action(journal *j, int rollback, const char *name, const char *fault, int learner,
                       const char *status, const json_t *output, int64_t start_ns, int64_t end_ns)
{
    if (j->nacts == j->capacts) {
        int ncap = j->capacts ? j->capacts * 2 : 16;
        jr_act *p = realloc(j->acts, (size_t)ncap * sizeof(*p));
        if (!p)
            return CX_ENOMEM;
        j->acts = p;
        j->capacts = ncap;
    }
    json_t *activity = ctk_activity_for(j->ctk, rollback, name, fault, learner, j->used);
    json_t *rec = json_pack("{s:o, s:s, s:o, s:o, s:f, s:O, s:{s:s, s:s, s:i}}", "activity",
                            activity ? activity : json_object(), "status", status ? status : "failed",
                            "start", iso_json(start_ns), "end", iso_json(end_ns), "duration",
                            secs(start_ns, end_ns), "output", output ? output : json_null(), "chaosloco",
                            "action", name ? name : "", "fault", fault ? fault : "", "learner", learner);
    if (!rec)
        return CX_ENOMEM;
    j->acts[j->nacts].rollback = rollback;
    j->acts[j->nacts].rec = rec;
    j->nacts++;
    return 0;
}

int journal_deviated(const journal *j)
{
    for (int i = 0; i < j->nprobes; i++)
        if (j->probes[i].phase == JR_AFTER && j->probes[i].v.status != HYP_PASS)
            return 1;
    return 0;
}

jr_status journal_status(const journal *j)
{
    if (j->status == JR_COMPLETED)
        for (int i = 0; i < j->nprobes; i++)
            if (j->probes[i].phase == JR_BEFORE && j->probes[i].v.status != HYP_PASS)
                return JR_FAILED;
    return j->status;
}

const char *jr_status_name(jr_status s)
{
    switch (s) {
    case JR_COMPLETED:
        return "completed";
    case JR_FAILED:
        return "failed";
    case JR_ABORTED:
        return "aborted";
    case JR_INTERRUPTED:
        return "interrupted";
    }
    return "failed";
}

static json_t *probe_json(const jr_probe *p)
{
    const hyp_verdict *v = &p->v;
    json_t *out = json_pack("{s:s, s:o, s:o, s:s, s:s, s:s}", "verdict", hyp_status_name(v->status),
                            "measured", num_or_null(v->measured), "threshold", num_or_null(v->threshold),
                            "cmp", v->cmp, "unit", v->unit, "explanation", v->explanation);
    if (out && strcmp(v->unit, "nats") == 0) { /* the same figures in bits per byte */
        json_object_set_new(out, "measured_bpb", num_or_null(v->measured / M_LN2));
        json_object_set_new(out, "threshold_bpb", num_or_null(v->threshold / M_LN2));
    }
    json_t *activity =
        ctk_probe(p->label, p->kind, p->spec, p->phase == JR_BEFORE ? "steady_state" : "verify");
    return json_pack("{s:o, s:s, s:o, s:o, s:o, s:f, s:b}", "activity", activity ? activity : json_object(),
                     "status", v->status == HYP_ERROR ? "failed" : "succeeded", "output",
                     out ? out : json_null(), "start", iso_json(p->start_ns), "end", iso_json(p->end_ns),
                     "duration", secs(p->start_ns, p->end_ns), "tolerance_met", v->status == HYP_PASS);
}

static json_t *steady_json(const journal *j, jr_phase phase)
{
    json_t *probes = json_array();
    int met = 1, any = 0;
    for (int i = 0; probes && i < j->nprobes; i++) {
        if (j->probes[i].phase != phase)
            continue;
        any = 1;
        met &= j->probes[i].v.status == HYP_PASS;
        json_t *pj = probe_json(&j->probes[i]);
        if (pj)
            json_array_append_new(probes, pj);
    }
    if (phase == JR_DURING) { /* Chaos Toolkit: a list of steady-state checks */
        json_t *during = json_array();
        if (any)
            json_array_append_new(during, json_pack("{s:b, s:o}", "steady_state_met", met, "probes", probes));
        else
            json_decref(probes);
        return during;
    }
    if (!any) {
        json_decref(probes);
        return json_null();
    }
    return json_pack("{s:b, s:o}", "steady_state_met", met, "probes", probes ? probes : json_array());
}

static json_t *platform_json(char *node, size_t nodelen)
{
    struct utsname u;
    char buf[512];
    if (uname(&u) != 0) {
        snprintf(node, nodelen, "unknown");
        return json_string("unknown");
    }
    snprintf(node, nodelen, "%s", u.nodename);
    snprintf(buf, sizeof(buf), "%s-%s-%s", u.sysname, u.release, u.machine);
    return json_string(buf);
}

json_t *journal_json(const journal *j)
{
    char node[256];
    json_t *platform = platform_json(node, sizeof(node));
    json_t *run = json_array(), *rb = json_array();
    for (int i = 0; run && rb && i < j->nacts; i++)
        json_array_append(j->acts[i].rollback ? rb : run, j->acts[i].rec);
    json_t *steady = json_pack("{s:o, s:o, s:o}", "before", steady_json(j, JR_BEFORE), "after",
                               steady_json(j, JR_AFTER), "during", steady_json(j, JR_DURING));
    return json_pack(
        "{s:s, s:o, s:s, s:O, s:o, s:o, s:f, s:s, s:b, s:o, s:o, s:o, s:{s:s, s:O, s:o, s:o, s:O}}",
        "chaoslib-version", JR_CHAOSLIB_VERSION, "platform", platform ? platform : json_null(), "node", node,
        "experiment", j->ctk, "start", iso_json(j->start_ns), "end", iso_json(j->end_ns), "duration",
        secs(j->start_ns, j->end_ns), "status", jr_status_name(journal_status(j)), "deviated",
        journal_deviated(j), "steady_states", steady ? steady : json_null(), "run", run ? run : json_array(),
        "rollbacks", rb ? rb : json_array(), "chaosloco", "version", CHAOSLOCO_VERSION, "experiment",
        j->experiment, "final_loss", num_or_null(j->final_loss), "final_bpb",
        num_or_null(j->final_loss / M_LN2), "clocks", j->clocks);
}

int journal_write(const journal *j, const char *path, char *err, size_t errlen)
{
    json_t *doc = journal_json(j);
    if (!doc)
        return cx_fail(err, errlen, CX_ENOMEM, "journal: cannot build the document");
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(doc);
    if (!text)
        return cx_fail(err, errlen, CX_ENOMEM, "journal: cannot encode");
    int rc = cx_file_write_atomic(path, text, strlen(text), err, errlen);
    free(text);
    return rc;
}

/* ---- junit.xml ---- */

void jr_escape_markup(cx_buf *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '&':
            cx_buf_append(b, "&amp;", 5);
            break;
        case '<':
            cx_buf_append(b, "&lt;", 4);
            break;
        case '>':
            cx_buf_append(b, "&gt;", 4);
            break;
        case '"':
            cx_buf_append(b, "&quot;", 6);
            break;
        case '\'':
            cx_buf_append(b, "&apos;", 6);
            break;
        default:
            if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r')
                cx_buf_append(b, "?", 1);
            else
                cx_buf_append(b, p, 1);
        }
    }
}

static void figure(char *out, size_t len, double x)
{
    if (isfinite(x))
        snprintf(out, len, "%.6g", x);
    else
        snprintf(out, len, "n/a");
}

char *journal_junit(const journal *j)
{
    cx_buf b;
    cx_buf_init(&b, JR_MAX_DOC);
    int failures = 0, errors = 0;
    for (int i = 0; i < j->nprobes; i++) {
        failures += j->probes[i].v.status == HYP_FAIL;
        errors += j->probes[i].v.status == HYP_ERROR;
    }
    char ts[40];
    cx_iso_time(ts, sizeof(ts), j->start_ns);
    cx_buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"");
    jr_escape_markup(&b, j->title);
    cx_buf_printf(&b, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" time=\"%.3f\" timestamp=\"%s\">\n",
                  j->nprobes, failures, errors, secs(j->start_ns, j->end_ns), ts);
    for (int i = 0; i < j->nprobes; i++) {
        const jr_probe *p = &j->probes[i];
        const char *cls = p->phase == JR_BEFORE ? "steady_state" : p->phase == JR_AFTER ? "verify" : "during";
        char m[32], t[32];
        figure(m, sizeof(m), p->v.measured);
        figure(t, sizeof(t), p->v.threshold);
        cx_buf_printf(&b, "    <testcase classname=\"%s.%s\" name=\"", cls, p->kind);
        jr_escape_markup(&b, p->label);
        cx_buf_printf(&b, "\" time=\"%.3f\">\n", secs(p->start_ns, p->end_ns));
        if (p->v.status != HYP_PASS) {
            const char *tag = p->v.status == HYP_FAIL ? "failure" : "error";
            cx_buf_printf(&b, "      <%s type=\"%s\" message=\"", tag, p->kind);
            char msg[160];
            snprintf(msg, sizeof(msg), "measured %s %s, threshold %s %s %s: ", m, p->v.unit, p->v.cmp, t,
                     p->v.unit);
            jr_escape_markup(&b, msg);
            jr_escape_markup(&b, p->v.explanation);
            cx_buf_printf(&b, "\">");
            jr_escape_markup(&b, p->v.explanation);
            cx_buf_printf(&b, "</%s>\n", tag);
        }
        cx_buf_printf(&b, "      <system-out>");
        char line[160];
        snprintf(line, sizeof(line),
                 "%s: measured %s %s (threshold %s %s %s): ", hyp_status_name(p->v.status), m, p->v.unit,
                 p->v.cmp, t, p->v.unit);
        jr_escape_markup(&b, line);
        jr_escape_markup(&b, p->v.explanation);
        cx_buf_printf(&b, "</system-out>\n    </testcase>\n");
    }
    if (cx_buf_printf(&b, "  </testsuite>\n</testsuites>\n") < 0) {
        cx_buf_cleanup(&b);
        return NULL;
    }
    return cx_buf_take(&b, NULL);
}

int journal_write_junit(const journal *j, const char *path, char *err, size_t errlen)
{
    char *xml = journal_junit(j);
    if (!xml)
        return cx_fail(err, errlen, CX_ENOMEM, "junit: cannot build the document");
    int rc = cx_file_write_atomic(path, xml, strlen(xml), err, errlen);
    free(xml);
    return rc;
}
