/* gen_docs.c - the docs generators' shared parts (gen_docs.h). */
#include "harness/tools/gen_docs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/exitcode.h"
#include "common/file.h"

#define MAX_FILE (4 << 20)
#define MAX_ENTRIES 64

void gd_cell(cx_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            cx_buf_append(b, "\\|", 2);
        else
            cx_buf_append(b, s, 1);
    }
}

/* The next opening marker ("<!-- MARKER: ") of in at or after s, at a
 * line's start when the blocks want it; NULL when none is left. */
static const char *next_open(const gd_blocks *g, const char *in, const char *s, const char *open)
{
    for (const char *p = strstr(s, open); p; p = strstr(p + 1, open))
        if (!g->at_line_start || p == in || p[-1] == '\n')
            return p;
    return NULL;
}

int gd_render_blocks(const gd_blocks *g, const char *path, const char *in, cx_buf *out, int *changed)
{
    char open[64];
    snprintf(open, sizeof open, "<!-- %s: ", g->marker);
    int bad = 0, seen[MAX_ENTRIES] = {0};
    const char *s = in;
    *changed = 0;
    for (;;) {
        const char *at = next_open(g, in, s, open);
        if (!at) {
            cx_buf_append(out, s, strlen(s));
            break;
        }
        const char *name = at + strlen(open), *close = strstr(name, " -->");
        if (!close) {
            fprintf(stderr, "%s: an unclosed %s marker\n", path, open);
            return 1;
        }
        char entry[64];
        snprintf(entry, sizeof entry, "%.*s", (int)(close - name), name);
        const char *body = close + 4;
        if (*body == '\n')
            body++;
        char endm[128];
        snprintf(endm, sizeof endm, "<!-- /%s: %s -->", g->marker, entry);
        const char *end = strstr(body, endm);
        if (!end) {
            fprintf(stderr, "%s: %s%s --> has no %s\n", path, open, entry, endm);
            return 1;
        }
        cx_buf_append(out, s, (size_t)(body - s));
        size_t idx = g->n;
        for (size_t i = 0; i < g->n; i++)
            if (strcmp(g->name(i), entry) == 0)
                idx = i;
        if (idx == g->n) {
            fprintf(stderr, "%s: a %s block for '%s', which %s does not declare\n", path, g->marker, entry,
                    g->source);
            bad = 1;
            cx_buf_append(out, body, (size_t)(end - body));
        } else {
            size_t from = out->len;
            g->block(out, idx);
            size_t n = out->len - from;
            if (n != (size_t)(end - body) || memcmp(out->data + from, body, n) != 0) {
                fprintf(stderr, "%s: the %s block of '%s' differs from %s\n", path, g->marker, entry,
                        g->source);
                *changed = 1;
            }
            if (idx < MAX_ENTRIES)
                seen[idx]++;
        }
        s = end + strlen(endm);
        cx_buf_append(out, end, strlen(endm));
    }
    for (size_t i = 0; i < g->n && i < MAX_ENTRIES; i++)
        if (seen[i] != 1) {
            fprintf(stderr,
                    "%s: %s %s block for '%s' (add the lines <!-- %s: %s --> and <!-- /%s: %s --> %s)\n",
                    path, seen[i] ? "more than one" : "no", g->marker, g->name(i), g->marker, g->name(i),
                    g->marker, g->name(i), g->where);
            bad = 1;
        }
    return bad;
}

/* Render one file; write it back (or, with check, only compare). */
static int one_file(const char *tool, const char *from, const char *target, const char *path, int check,
                    gd_render fn)
{
    char err[CX_ERRLEN];
    char *in = NULL;
    size_t len = 0;
    if (cx_file_read(path, MAX_FILE, &in, &len, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", tool, err);
        return 1;
    }
    cx_buf out;
    cx_buf_init(&out, MAX_FILE * 2);
    int changed = 0;
    int rc = fn(path, in, &out, &changed);
    if (rc == 0 && changed && !check) {
        if (cx_file_write_atomic(path, out.data, out.len, err, sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", tool, err);
            rc = 1;
        } else {
            fprintf(stderr, "%s: rewritten from %s\n", path, from);
        }
    } else if (rc == 0 && changed) {
        fprintf(stderr, "%s drifted from %s: build the %s target to regenerate it\n", path, from, target);
        rc = 1;
    }
    cx_buf_cleanup(&out);
    free(in);
    return rc;
}

int gd_main(int argc, char **argv, const char *tool, const char *files, const char *from, const char *target,
            gd_render first, gd_render second)
{
    int check = argc == 4 && strcmp(argv[1], "--check") == 0;
    if (argc != 3 + check || argv[argc - 1][0] == '-' || argv[argc - 2][0] == '-') {
        fprintf(stderr, "usage: %s [--check] %s\n", tool, files);
        return CX_EXIT_USAGE;
    }
    int rc = one_file(tool, from, target, argv[argc - 2], check, first);
    return one_file(tool, from, target, argv[argc - 1], check, second) || rc;
}
