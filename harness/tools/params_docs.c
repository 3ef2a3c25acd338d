/* params_docs.c - writes (or checks) what the docs say about the
 * hypotheses' params from their declarations (hyp_table, param.h): the
 * params block of each hypothesis in docs/experiments.md and the
 * $defs.hypothesis entry of docs/experiment.schema.json, so that neither
 * drifts from what the code checks.
 *
 *   chaosloco_params_docs [--check] docs/experiments.md docs/experiment.schema.json
 *
 * Each hypothesis has one block in experiments.md, in its section (each
 * marker at the start of a line):
 *
 *   <!-- params: NAME -->
 *   ...generated: params table, rules across params...
 *   <!-- /params: NAME -->
 *
 * Text outside the blocks is the file's own. In the schema the whole
 * "hypothesis" member of "$defs" is generated: one oneOf entry per
 * hypothesis with its keys (additionalProperties false), their types and
 * ranges as published (param.h: PARAM_CAP, PARAM_ABOVE_ZERO) and its
 * schema_rules. Without --check both files are rewritten in place where
 * they differ; with --check nothing is written and the exit status says
 * whether they match (the ctest docs/params). A hypothesis without a
 * block, or a block naming none, is an error either way: add the two
 * marker lines in its section, then build the `params-docs` target.
 * Exit 0 ok, 1 drift or error, 64 usage.
 *
 * Like kinds_docs.c (the fault kinds' blocks); both render through
 * gen_docs.h.
 */
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "harness/hypothesis.h"
#include "harness/param.h"
#include "harness/tools/gen_docs.h"

/* ---- experiments.md: the params blocks ---- */

static void block(cx_buf *b, const hypothesis *k)
{
    if (!k->params || !k->params->name) {
        cx_buf_printf(b, "**Params:** none.\n");
        return;
    }
    cx_buf_printf(b, "**Params:**\n\n| param | type, range, default | meaning |\n|---|---|---|\n");
    for (const param_def *p = k->params; p->name; p++) {
        char text[512];
        param_text(p, text, sizeof text);
        cx_buf_printf(b, "| `%s` | ", p->name);
        gd_cell(b, text);
        cx_buf_printf(b, " | ");
        gd_cell(b, p->doc ? p->doc : "");
        cx_buf_printf(b, " |\n");
    }
    if (k->rules)
        cx_buf_printf(b, "\n**Rules:** %s.\n", k->rules);
}

static const char *hyp_name(size_t i)
{
    return hyp_table[i]->name;
}

static void hyp_block(cx_buf *b, size_t i)
{
    block(b, hyp_table[i]);
}

/* docs/experiments.md: one params block per hypothesis of hyp_table. */
static int render_md(const char *path, const char *in, cx_buf *out, int *changed)
{
    size_t n = 0;
    while (hyp_table[n])
        n++;
    gd_blocks g = {.marker = "params",
                   .at_line_start = 1,
                   .n = n,
                   .name = hyp_name,
                   .block = hyp_block,
                   .source = "hyp_table (harness/hypotheses/)",
                   .where = "in its section, then build the params-docs target"};
    return gd_render_blocks(&g, path, in, out, changed);
}

/* ---- experiment.schema.json: $defs.hypothesis ---- */

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

static void schema_def(cx_buf *b)
{
    cx_buf_printf(b, "\"hypothesis\": {\n"
                     "      \"type\": \"object\",\n"
                     "      \"required\": [\"hypothesis\"],\n"
                     "      \"properties\": {\"hypothesis\": {\"type\": \"string\"}, \"name\": {\"type\": "
                     "\"string\", \"minLength\": 1}},\n"
                     "      \"oneOf\": [\n");
    for (const hypothesis *const *k = hyp_table; *k; k++)
        schema_entry(b, *k, k[1] == NULL);
    cx_buf_printf(b, "      ]\n    }");
}

/* The end of the JSON value that starts at s ('{'), past its '}'; NULL if
 * it does not close. Strings are skipped, so braces in them do not count. */
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
        } else if (*s == '{') {
            depth++;
        } else if (*s == '}' && --depth == 0) {
            return s + 1;
        }
    }
    return NULL;
}

/* Rewrite $defs.hypothesis of in into out. */
static int render_schema(const char *path, const char *in, cx_buf *out, int *changed)
{
    *changed = 0;
    const char *defs = strstr(in, "\"$defs\": {");
    const char *h = defs ? strstr(defs, "\n    \"hypothesis\": {") : NULL;
    const char *val = h ? strchr(h, '{') : NULL;
    const char *end = val ? value_end(val) : NULL;
    if (!end) {
        fprintf(stderr, "%s: no \"$defs\": {... \"hypothesis\": {...}} (at an indent of 4)\n", path);
        return 1;
    }
    h += 5; /* the newline and the indent stay the file's */
    cx_buf_append(out, in, (size_t)(h - in));
    size_t at = out->len;
    schema_def(out);
    size_t n = out->len - at;
    if (n != (size_t)(end - h) || memcmp(out->data + at, h, n) != 0) {
        fprintf(stderr, "%s: $defs.hypothesis differs from the hypotheses' params\n", path);
        *changed = 1;
    }
    cx_buf_append(out, end, strlen(end));
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
    return gd_main(argc, argv, "chaosloco_params_docs", "docs/experiments.md docs/experiment.schema.json",
                   "the hypotheses' params", "params-docs", render_md, render_schema);
}
