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
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/file.h"
#include "harness/fault_kinds.h"
#include "injectors/injector.h"

#define MAX_FILE (4 << 20)

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

static void block(cx_buf *b, const injector *k)
{
    cx_buf_printf(b, "%s\n\n", k->summary ? k->summary : "");
    if (k->params && k->params->name) {
        cx_buf_printf(b, "| param | type, range, default | meaning |\n|---|---|---|\n");
        for (const inj_param *p = k->params; p->name; p++) {
            char text[512];
            inj_param_text(p, text, sizeof text);
            cx_buf_printf(b, "| `%s` | ", p->name);
            cell(b, text);
            cx_buf_printf(b, " | ");
            cell(b, p->help ? p->help : "");
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

/* Rewrite every block of in into out; 0, or 1 with the problems on stderr. */
static int render(const char *path, const char *in, cx_buf *out, int *changed)
{
    int bad = 0, seen[64] = {0};
    const char *s = in;
    *changed = 0;
    for (;;) {
        const char *open = strstr(s, "<!-- kind: ");
        if (!open) {
            cx_buf_append(out, s, strlen(s));
            break;
        }
        const char *name = open + 11, *close = strstr(name, " -->");
        if (!close) {
            fprintf(stderr, "%s: an unclosed <!-- kind: marker\n", path);
            return 1;
        }
        char type[64];
        snprintf(type, sizeof type, "%.*s", (int)(close - name), name);
        const char *body = close + 4;
        if (*body == '\n')
            body++;
        char endm[96];
        snprintf(endm, sizeof endm, "<!-- /kind: %s -->", type);
        const char *end = strstr(body, endm);
        if (!end) {
            fprintf(stderr, "%s: <!-- kind: %s --> has no %s\n", path, type, endm);
            return 1;
        }
        cx_buf_append(out, s, (size_t)(body - s));
        int idx = -1;
        for (int i = 0; injector_table[i]; i++)
            if (strcmp(injector_table[i]->type, type) == 0)
                idx = i;
        if (idx < 0) {
            fprintf(stderr, "%s: a block for '%s', which is no kind of injector_table\n", path, type);
            bad = 1;
            cx_buf_append(out, body, (size_t)(end - body));
        } else {
            size_t at = out->len;
            block(out, injector_table[idx]);
            size_t n = out->len - at;
            if (n != (size_t)(end - body) || memcmp(out->data + at, body, n) != 0) {
                fprintf(stderr, "%s: the block of '%s' differs from injectors/kinds/%s.c\n", path, type,
                        type);
                *changed = 1;
            }
            if (idx < 64)
                seen[idx]++;
        }
        s = end;
        cx_buf_append(out, s, strlen(endm));
        s += strlen(endm);
    }
    for (int i = 0; injector_table[i] && i < 64; i++)
        if (seen[i] != 1) {
            fprintf(stderr,
                    "%s: %s block for kind '%s' (add \"### `%s`\" with the lines <!-- kind: %s --> and "
                    "<!-- /kind: %s --> under \"## Fault kinds\", then build the kinds-docs target)\n",
                    path, seen[i] ? "more than one" : "no", injector_table[i]->type, injector_table[i]->type,
                    injector_table[i]->type, injector_table[i]->type);
            bad = 1;
        }
    return bad;
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

/* Render one file; write it back (or, with check, only compare). */
static int one_file(const char *path, int check,
                    int (*fn)(const char *path, const char *in, cx_buf *out, int *changed))
{
    char err[CX_ERRLEN];
    char *in = NULL;
    size_t len = 0;
    if (cx_file_read(path, MAX_FILE, &in, &len, err, sizeof err) != 0) {
        fprintf(stderr, "chaosloco_kinds_docs: %s\n", err);
        return 1;
    }
    cx_buf out;
    cx_buf_init(&out, MAX_FILE * 2);
    int changed = 0;
    int rc = fn(path, in, &out, &changed);
    if (rc == 0 && changed && !check) {
        if (cx_file_write_atomic(path, out.data, out.len, err, sizeof err) != 0) {
            fprintf(stderr, "chaosloco_kinds_docs: %s\n", err);
            rc = 1;
        } else {
            fprintf(stderr, "%s: rewritten from injector_table\n", path);
        }
    } else if (rc == 0 && changed) {
        fprintf(stderr, "%s drifted from injector_table: build the kinds-docs target to regenerate it\n",
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
        fprintf(stderr, "usage: chaosloco_kinds_docs [--check] docs/faults.md docs/experiment.schema.json\n");
        return CX_EXIT_USAGE;
    }
    int rc = one_file(argv[argc - 2], check, render);
    return one_file(argv[argc - 1], check, render_schema) || rc;
}
