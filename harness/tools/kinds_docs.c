/* kinds_docs.c - writes (or checks) what the docs say about the fault
 * kinds an experiment file may name: the per-kind blocks of docs/faults.md
 * (from injector_table) and the fault_type enum of
 * docs/experiment.schema.json, so that neither drifts from what the code
 * checks.
 *
 *   chaosloco_kinds_docs [--check] docs/faults.md docs/experiment.schema.json
 *
 * The schema's enum is the injector table's kinds in order, then the
 * harness's own (hx_harness_kinds, harness/fault_kinds.h).
 *
 * Each kind has one block in the file, under its hand-written heading:
 *
 *   <!-- kind: NAME -->
 *   ...generated: summary, params table, traits, sweep...
 *   <!-- /kind: NAME -->
 *
 * Text outside the blocks is the file's own. Without --check both files are
 * rewritten in place where they differ; with --check nothing is written and
 * the exit status says whether they match (the ctest docs/kinds). A kind
 * without a block, or a block naming no kind, is an error either way: add
 * the heading and the two marker lines for a new kind, then build the
 * `kinds-docs` target. Exit 0 ok, 1 drift or error, 64 usage.
 */
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "harness/fault_kinds.h"
#include "harness/tools/gen_docs.h"
#include "injectors/injector.h"

static void block(cx_buf *b, const injector *k)
{
    cx_buf_printf(b, "%s\n\n", k->summary ? k->summary : "");
    if (k->params && k->params->name) {
        cx_buf_printf(b, "| param | type, range, default | meaning |\n|---|---|---|\n");
        for (const inj_param *p = k->params; p->name; p++) {
            char text[512];
            inj_param_text(p, text, sizeof text);
            cx_buf_printf(b, "| `%s` | ", p->name);
            gd_cell(b, text);
            cx_buf_printf(b, " | ");
            gd_cell(b, p->help ? p->help : "");
            cx_buf_printf(b, " |\n");
        }
        cx_buf_printf(b, "\n");
    } else {
        cx_buf_printf(b, "**params:** none\n\n");
    }
    cx_buf_printf(b, "**traits:** ");
    int any = 0;
    for (unsigned bit = 1; bit; bit <<= 1)
        if ((k->traits & bit) && injector_trait_name(bit)) {
            cx_buf_printf(b, "%s`%s`", any ? ", " : "", injector_trait_name(bit));
            any = 1;
        }
    if (!any)
        cx_buf_printf(b, "none");
    if (k->nonstop_method)
        cx_buf_printf(b, " (not with method `%s`)", k->nonstop_method);
    cx_buf_printf(b, "; **sweep after an agent crash:** %s\n",
                  k->sweep ? "yes" : "no (nothing outlives the agent)");
}

static const char *kind_name(size_t i)
{
    return injector_table[i]->type;
}

static void kind_block(cx_buf *b, size_t i)
{
    block(b, injector_table[i]);
}

/* docs/faults.md: one block per kind of injector_table. */
static int render(const char *path, const char *in, cx_buf *out, int *changed)
{
    size_t n = 0;
    while (injector_table[n])
        n++;
    gd_blocks g = {
        .marker = "kind",
        .n = n,
        .name = kind_name,
        .block = kind_block,
        .source = "injector_table (injectors/kinds/)",
        .where = "under \"## Fault kinds\" with a \"### `NAME`\" heading, then build the kinds-docs target"};
    return gd_render_blocks(&g, path, in, out, changed);
}

/* ---- kinds_docs: the schema's enum ---- */

static void enum_item(cx_buf *b, size_t *col, size_t indent, const char *name, int last)
{
    char item[96];
    int n = snprintf(item, sizeof item, "\"%s\"%s", name, last ? "]" : ",");
    if (*col + 1 + (size_t)n > 110) {
        cx_buf_printf(b, "\n%*s", (int)indent, "");
        *col = indent;
    } else if (*col > indent) {
        cx_buf_append(b, " ", 1);
        (*col)++;
    }
    cx_buf_append(b, item, (size_t)n);
    *col += (size_t)n;
}

/* Rewrite $defs.fault_type's "enum": [...] of in into out. */
static int render_schema(const char *path, const char *in, cx_buf *out, int *changed)
{
    *changed = 0;
    const char *ft = strstr(in, "\"fault_type\": {");
    const char *en = ft ? strstr(ft, "\"enum\": [") : NULL;
    const char *end = en ? strchr(en, ']') : NULL;
    if (!end) {
        fprintf(stderr, "%s: no \"fault_type\": {... \"enum\": [...]}\n", path);
        return 1;
    }
    const char *bol = en;
    while (bol > in && bol[-1] != '\n')
        bol--;
    size_t indent = (size_t)(en - bol) + strlen("\"enum\": [");
    cx_buf_append(out, in, (size_t)(en - in));
    cx_buf_printf(out, "\"enum\": [");
    size_t at = out->len, col = indent;
    for (const injector *const *k = injector_table; *k; k++)
        enum_item(out, &col, indent, (*k)->type, 0);
    for (const hx_kind *h = hx_harness_kinds; h->name; h++)
        enum_item(out, &col, indent, h->name, !h[1].name);
    size_t n = out->len - at, old = (size_t)(end + 1 - (en + strlen("\"enum\": [")));
    if (n != old || memcmp(out->data + at, en + strlen("\"enum\": ["), n) != 0) {
        fprintf(stderr, "%s: $defs.fault_type.enum differs from injector_table\n", path);
        *changed = 1;
    }
    cx_buf_append(out, end + 1, strlen(end + 1));
    return 0;
}

int main(int argc, char **argv)
{
    return gd_main(argc, argv, "chaosloco_kinds_docs", "docs/faults.md docs/experiment.schema.json",
                   "injector_table", "kinds-docs", render, render_schema);
}
