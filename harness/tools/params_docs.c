/* params_docs.c - writes (or checks) what the docs say about the
 * declared params (param.h) from their declarations: the hypotheses'
 * (hyp_table) and the experiment file's keys (exp_file_params, with the
 * keys of its OBJECT members that have fields, such as horizon, and
 * exp_topology_attach). In
 * docs/experiments.md the params block of each; in
 * docs/experiment.schema.json the document's "required" and "properties"
 * and $defs.hypothesis, so that neither drifts from what the code checks.
 *
 *   chaosloco_params_docs [--check] docs/experiments.md docs/experiment.schema.json
 *
 * Each hypothesis, and each declared object of the experiment file by its
 * JSON path ("$", "$.horizon", "$.topology.attach"), has one block in experiments.md, in its
 * section (each marker at the start of a line):
 *
 *   <!-- params: NAME -->
 *   ...generated: params table, rules across params...
 *   <!-- /params: NAME -->
 *
 * Text outside the blocks is the file's own. In the schema the generated
 * values are the document's "required" (its required keys) and
 * "properties" (one line per key: param_schema; an object with fields
 * inline, the others their hand-written schema text, whose $defs stay the
 * file's own), $defs.topology.properties.attach (exp_topology_attach) and
 * the whole "hypothesis" member of "$defs": one oneOf
 * entry per hypothesis with its keys (additionalProperties false), their
 * types and ranges as published (param.h: PARAM_CAP, PARAM_ABOVE_ZERO)
 * and its schema_rules. Everything else in the schema is the file's own.
 * Without --check both files are rewritten in place where they differ;
 * with --check nothing is written and the exit status says whether they
 * match (the ctest docs/params). An entry without a block, or a block
 * naming none, is an error either way: add the two marker lines in its
 * section, then build the `params-docs` target.
 * Exit 0 ok, 1 drift or error, 64 usage.
 *
 * Like kinds_docs.c (the fault kinds' blocks); both render through
 * gen_docs.h.
 */
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "harness/experiment.h"
#include "harness/hypothesis.h"
#include "harness/param.h"
#include "harness/tools/gen_docs.h"

/* ---- the tables: the hypotheses', then the experiment file's ---- */

/* An experiment-file object whose keys are declared: the document ("$")
 * and each OBJECT member with fields, by its JSON path ("$.horizon"). */
#define MAX_EXP_OBJECTS 16
static struct {
    char path[64];
    const param_def *t;
} exp_objects[MAX_EXP_OBJECTS];
static size_t nexp_objects;

static void collect(const char *path, const param_def *t)
{
    if (nexp_objects == MAX_EXP_OBJECTS) {
        fprintf(stderr, "params_docs: more than %d declared objects (raise MAX_EXP_OBJECTS)\n",
                MAX_EXP_OBJECTS);
        return;
    }
    snprintf(exp_objects[nexp_objects].path, sizeof exp_objects[0].path, "%s", path);
    exp_objects[nexp_objects++].t = t;
    for (const param_def *p = t; p->name; p++)
        if (p->type == PARAM_OBJECT && p->fields) {
            char sub[64];
            snprintf(sub, sizeof sub, "%s.%s", path, p->name);
            collect(sub, p->fields);
        }
}

static size_t nhyps(void)
{
    size_t n = 0;
    while (hyp_table[n])
        n++;
    return n;
}

/* ---- experiments.md: the params blocks ---- */

static void table(cx_buf *b, const param_def *t, const char *col)
{
    cx_buf_printf(b, "| %s | type, range, default | meaning |\n|---|---|---|\n", col);
    for (const param_def *p = t; p->name; p++) {
        char text[512];
        param_text(p, text, sizeof text);
        cx_buf_printf(b, "| `%s` | ", p->name);
        gd_cell(b, text);
        cx_buf_printf(b, " | ");
        gd_cell(b, p->doc ? p->doc : "");
        cx_buf_printf(b, " |\n");
    }
}

static void block(cx_buf *b, const hypothesis *k)
{
    if (!k->params || !k->params->name) {
        cx_buf_printf(b, "**Params:** none.\n");
        return;
    }
    cx_buf_printf(b, "**Params:**\n\n");
    table(b, k->params, "param");
    if (k->rules)
        cx_buf_printf(b, "\n**Rules:** %s.\n", k->rules);
}

/* Entries 0..nhyps()-1 are hyp_table's, then exp_objects'. */
static const char *entry_name(size_t i)
{
    size_t nh = nhyps();
    return i < nh ? hyp_table[i]->name : exp_objects[i - nh].path;
}

static void entry_block(cx_buf *b, size_t i)
{
    size_t nh = nhyps();
    if (i < nh)
        block(b, hyp_table[i]);
    else
        table(b, exp_objects[i - nh].t, "key");
}

/* docs/experiments.md: one params block per hypothesis of hyp_table and
 * per declared object of the experiment file. */
static int render_md(const char *path, const char *in, cx_buf *out, int *changed)
{
    gd_blocks g = {.marker = "params",
                   .at_line_start = 1,
                   .n = nhyps() + nexp_objects,
                   .name = entry_name,
                   .block = entry_block,
                   .source = "hyp_table (harness/hypotheses/) or exp_file_params (harness/experiment.c)",
                   .where = "in its section, then build the params-docs target"};
    return gd_render_blocks(&g, path, in, out, changed);
}

/* ---- experiment.schema.json ---- */

#define IND_ALT "        "                  /* a oneOf entry */
#define IND_MEM "         "                 /* a member of it */
#define IND_PROP "                        " /* a property of its "properties" */

static void schema_entry(cx_buf *b, const hypothesis *k, int last)
{
    cx_buf_printf(b, IND_ALT "{\"additionalProperties\": false,\n");
    int nreq = 0;
    for (const param_def *p = k->params; p && p->name; p++)
        if (p->flags & PARAM_REQUIRED)
            cx_buf_printf(b, "%s\"%s\"", nreq++ ? ", " : IND_MEM "\"required\": [", p->name);
    if (nreq)
        cx_buf_printf(b, "],\n");
    for (const char *r = k->schema_rules; r && *r;) {
        const char *nl = strchr(r, '\n');
        size_t n = nl ? (size_t)(nl - r) : strlen(r);
        cx_buf_printf(b, IND_MEM "%.*s\n", (int)n, r);
        r += n + (nl ? 1 : 0);
    }
    cx_buf_printf(b, IND_MEM "\"properties\": {\"hypothesis\": {\"const\": \"%s\"}, \"name\": true", k->name);
    for (const param_def *p = k->params; p && p->name; p++) {
        cx_buf_printf(b, ",\n" IND_PROP "\"%s\": ", p->name);
        param_schema(p, b);
    }
    cx_buf_printf(b, "}}%s\n", last ? "" : ",");
}

/* The value of $defs.hypothesis. */
static void schema_hypothesis(cx_buf *b)
{
    cx_buf_printf(b, "{\n"
                     "      \"type\": \"object\",\n"
                     "      \"required\": [\"hypothesis\"],\n"
                     "      \"properties\": {\"hypothesis\": {\"type\": \"string\"}, \"name\": {\"type\": "
                     "\"string\", \"minLength\": 1}},\n"
                     "      \"oneOf\": [\n");
    for (const hypothesis *const *k = hyp_table; *k; k++)
        schema_entry(b, *k, k[1] == NULL);
    cx_buf_printf(b, "      ]\n    }");
}

/* The value of the document's "required": its required keys. */
static void schema_file_required(cx_buf *b)
{
    int n = 0;
    cx_buf_printf(b, "[");
    for (const param_def *p = exp_file_params; p->name; p++)
        if (p->flags & PARAM_REQUIRED)
            cx_buf_printf(b, "%s\"%s\"", n++ ? ", " : "", p->name);
    cx_buf_printf(b, "]");
}

/* The value of the document's "properties": one line per key. */
static void schema_file_properties(cx_buf *b)
{
    cx_buf_printf(b, "{\n");
    for (const param_def *p = exp_file_params; p->name; p++) {
        cx_buf_printf(b, "    \"%s\": ", p->name);
        param_schema(p, b);
        cx_buf_printf(b, "%s\n", p[1].name ? "," : "");
    }
    cx_buf_printf(b, "  }");
}

/* The end of the JSON value that starts at s, or NULL if it does not end.
 * Strings are skipped, so brackets in them do not count. */
static const char *value_end(const char *s)
{
    int depth = 0;
    for (; *s; s++) {
        if (*s == '"') {
            for (s++; *s && *s != '"'; s++)
                if (*s == '\\' && s[1])
                    s++;
            if (!*s)
                return NULL;
            if (depth == 0)
                return s + 1;
        } else if (*s == '{' || *s == '[') {
            depth++;
        } else if (*s == '}' || *s == ']') {
            if (--depth == 0)
                return s + 1;
            if (depth < 0)
                return s;
        } else if (depth == 0 && (*s == ',' || *s == ' ' || *s == '\n')) {
            return s;
        }
    }
    return NULL;
}

static const char *skip_ws(const char *s)
{
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
        s++;
    return s;
}

/* The value of member key of the object at obj ('{'), [*start, *end); 0,
 * or -1 when obj is no object or has no such member. */
static int member(const char *obj, const char *key, const char **start, const char **end)
{
    if (!obj || *obj != '{')
        return -1;
    size_t klen = strlen(key);
    const char *s = skip_ws(obj + 1);
    while (*s == '"') {
        const char *k = s + 1;
        const char *kend = value_end(s);
        if (!kend)
            return -1;
        s = skip_ws(kend);
        if (*s != ':')
            return -1;
        const char *v = skip_ws(s + 1);
        const char *vend = value_end(v);
        if (!vend)
            return -1;
        if ((size_t)(kend - 1 - k) == klen && memcmp(k, key, klen) == 0) {
            *start = v;
            *end = vend;
            return 0;
        }
        s = skip_ws(vend);
        if (*s != ',')
            return -1;
        s = skip_ws(s + 1);
    }
    return -1;
}

/* The value of $defs.topology.properties.attach, one line per key. */
static void schema_attach(cx_buf *b)
{
    const param_def *o = &exp_topology_attach;
    cx_buf_printf(b, "{\n          \"type\": \"object\",\n          \"additionalProperties\": false,\n");
    int n = 0;
    for (const param_def *p = o->fields; p->name; p++)
        if (p->flags & PARAM_REQUIRED)
            cx_buf_printf(b, "%s\"%s\"", n++ ? ", " : "          \"required\": [", p->name);
    if (n)
        cx_buf_printf(b, "],\n");
    cx_buf_printf(b, "          \"properties\": {\n");
    for (const param_def *p = o->fields; p->name; p++) {
        cx_buf_printf(b, "            \"%s\": ", p->name);
        param_schema(p, b);
        cx_buf_printf(b, "%s\n", p[1].name ? "," : "");
    }
    cx_buf_printf(b, "          }\n        }");
}

/* The generated values of the schema, each at a path of member keys from
 * the document's root, in the file's order. */
static const struct {
    const char *path[5];
    const char *what; /* for the messages */
    void (*render)(cx_buf *b);
} splices[] = {
    {{"required"}, "the document's \"required\"", schema_file_required},
    {{"properties"}, "the document's \"properties\"", schema_file_properties},
    {{"$defs", "topology", "properties", "attach"}, "$defs.topology.properties.attach", schema_attach},
    {{"$defs", "hypothesis"}, "$defs.hypothesis", schema_hypothesis},
};
#define NSPLICES (sizeof splices / sizeof splices[0])

/* Rewrite every generated value of in into out. */
static int render_schema(const char *path, const char *in, cx_buf *out, int *changed)
{
    *changed = 0;
    const char *start[NSPLICES], *end[NSPLICES];
    for (size_t i = 0; i < NSPLICES; i++) {
        const char *v = skip_ws(in), *e = NULL;
        for (size_t k = 0; k < 5 && splices[i].path[k]; k++)
            if (member(v, splices[i].path[k], &v, &e) < 0)
                e = NULL;
        if (!e) {
            fprintf(stderr, "%s: no %s to generate\n", path, splices[i].what);
            return 1;
        }
        start[i] = v;
        end[i] = e;
        for (size_t j = 0; j < i; j++)
            if (start[j] > start[i]) {
                fprintf(stderr, "%s: %s comes before %s (expected the generator's order)\n", path,
                        splices[i].what, splices[j].what);
                return 1;
            }
    }
    const char *from = in;
    for (size_t i = 0; i < NSPLICES; i++) {
        cx_buf_append(out, from, (size_t)(start[i] - from));
        size_t at = out->len;
        splices[i].render(out);
        size_t n = out->len - at;
        if (n != (size_t)(end[i] - start[i]) || memcmp(out->data + at, start[i], n) != 0) {
            fprintf(stderr, "%s: %s differs from the declarations\n", path, splices[i].what);
            *changed = 1;
        }
        from = end[i];
    }
    cx_buf_append(out, from, strlen(from));
    json_error_t je;
    json_t *doc = json_loads(out->data, 0, &je);
    if (!doc) {
        fprintf(stderr, "%s: the generated schema is not JSON: line %d: %s\n", path, je.line, je.text);
        return 1;
    }
    json_decref(doc);
    return 0;
}

/* ---- files ---- */

int main(int argc, char **argv)
{
    collect("$", exp_file_params);
    collect("$.topology.attach", exp_topology_attach.fields);
    return gd_main(argc, argv, "chaosloco_params_docs", "docs/experiments.md docs/experiment.schema.json",
                   "the declared params", "params-docs", render_md, render_schema);
}
