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
 * Like injectors/tools/kinds_docs.c (the fault kinds' blocks), of which
 * it repeats the file handling.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/file.h"
#include "harness/hypothesis.h"
#include "harness/param.h"

#define MAX_FILE (4 << 20)
#define MAX_KINDS 64

/* ---- experiments.md: the params blocks ---- */

/* s with '|' escaped for a table cell. */
static void cell(cx_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            cx_buf_append(b, "\\|", 2);
        else
            cx_buf_append(b, s, 1);
    }
}

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
        cell(b, text);
        cx_buf_printf(b, " | ");
        cell(b, p->doc ? p->doc : "");
        cx_buf_printf(b, " |\n");
    }
    if (k->rules)
        cx_buf_printf(b, "\n**Rules:** %s.\n", k->rules);
}

/* Rewrite every block of in into out; 0, or 1 with the problems on stderr. */
static int render_md(const char *path, const char *in, cx_buf *out, int *changed)
{
    int bad = 0, seen[MAX_KINDS] = {0};
    const char *s = in;
    *changed = 0;
    for (;;) {
        const char *open = strstr(s, "\n<!-- params: ");
        if (open)
            open++; /* a marker starts a line; one quoted in the text is text */
        if (!open) {
            cx_buf_append(out, s, strlen(s));
            break;
        }
        const char *name = open + strlen("<!-- params: "), *close = strstr(name, " -->");
        if (!close) {
            fprintf(stderr, "%s: an unclosed <!-- params: marker\n", path);
            return 1;
        }
        char kind[64];
        snprintf(kind, sizeof kind, "%.*s", (int)(close - name), name);
        const char *body = close + 4;
        if (*body == '\n')
            body++;
        char endm[96];
        snprintf(endm, sizeof endm, "<!-- /params: %s -->", kind);
        const char *end = strstr(body, endm);
        if (!end) {
            fprintf(stderr, "%s: <!-- params: %s --> has no %s\n", path, kind, endm);
            return 1;
        }
        cx_buf_append(out, s, (size_t)(body - s));
        int idx = -1;
        for (int i = 0; hyp_table[i]; i++)
            if (strcmp(hyp_table[i]->name, kind) == 0)
                idx = i;
        if (idx < 0) {
            fprintf(stderr, "%s: a block for '%s', which is no hypothesis of hyp_table\n", path, kind);
            bad = 1;
            cx_buf_append(out, body, (size_t)(end - body));
        } else {
            size_t at = out->len;
            block(out, hyp_table[idx]);
            size_t n = out->len - at;
            if (n != (size_t)(end - body) || memcmp(out->data + at, body, n) != 0) {
                fprintf(stderr, "%s: the params of '%s' differ from harness/hypotheses/%s.c\n", path, kind,
                        kind);
                *changed = 1;
            }
            if (idx < MAX_KINDS)
                seen[idx]++;
        }
        s = end;
        cx_buf_append(out, s, strlen(endm));
        s += strlen(endm);
    }
    for (int i = 0; hyp_table[i] && i < MAX_KINDS; i++)
        if (seen[i] != 1) {
            fprintf(stderr,
                    "%s: %s params block for hypothesis '%s' (add the lines <!-- params: %s --> and "
                    "<!-- /params: %s --> in its section, then build the params-docs target)\n",
                    path, seen[i] ? "more than one" : "no", hyp_table[i]->name, hyp_table[i]->name,
                    hyp_table[i]->name);
            bad = 1;
        }
    return bad;
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

/* Render one file; write it back (or, with check, only compare). */
static int one_file(const char *path, int check,
                    int (*fn)(const char *path, const char *in, cx_buf *out, int *changed))
{
    char err[CX_ERRLEN];
    char *in = NULL;
    size_t len = 0;
    if (cx_file_read(path, MAX_FILE, &in, &len, err, sizeof err) != 0) {
        fprintf(stderr, "chaosloco_params_docs: %s\n", err);
        return 1;
    }
    cx_buf out;
    cx_buf_init(&out, MAX_FILE * 2);
    int changed = 0;
    int rc = fn(path, in, &out, &changed);
    if (rc == 0 && changed && !check) {
        if (cx_file_write_atomic(path, out.data, out.len, err, sizeof err) != 0) {
            fprintf(stderr, "chaosloco_params_docs: %s\n", err);
            rc = 1;
        } else {
            fprintf(stderr, "%s: rewritten from the hypotheses' params\n", path);
        }
    } else if (rc == 0 && changed) {
        fprintf(stderr,
                "%s drifted from the hypotheses' params: build the params-docs target to regenerate it\n",
                path);
        rc = 1;
    }
    cx_buf_cleanup(&out);
    free(in);
    return rc;
}

int main(int argc, char **argv)
{
    int check = argc == 4 && strcmp(argv[1], "--check") == 0;
    if (argc != 3 + check || argv[argc - 1][0] == '-' || argv[argc - 2][0] == '-') {
        fprintf(stderr,
                "usage: chaosloco_params_docs [--check] docs/experiments.md docs/experiment.schema.json\n");
        return CX_EXIT_USAGE;
    }
    int rc = one_file(argv[argc - 2], check, render_md);
    return one_file(argv[argc - 1], check, render_schema) || rc;
}
