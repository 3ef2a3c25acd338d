/* gen_docs.h - what the docs generators (kinds_docs.c, params_docs.c)
 * share: the generated blocks of a markdown file, a table cell, and
 * checking or rewriting one file.
 *
 * A generated block sits between two marker lines that name its entry,
 *
 *   <!-- MARKER: NAME -->
 *   ...generated...
 *   <!-- /MARKER: NAME -->
 *
 * and text outside the blocks is the file's own. Every entry of the
 * table must have exactly one block and every block must name an entry.
 */
#ifndef HARNESS_TOOLS_GEN_DOCS_H
#define HARNESS_TOOLS_GEN_DOCS_H

#include <stddef.h>

#include "common/buf.h"

/* The blocks of one file, over a table of n entries. */
typedef struct gd_blocks {
    const char *marker;                 /* "kind": <!-- kind: NAME --> */
    int at_line_start;                  /* 1: a marker counts only at a line's start (quoted ones are text) */
    size_t n;                           /* entries */
    const char *(*name)(size_t i);      /* entry i's name */
    void (*block)(cx_buf *b, size_t i); /* writes entry i's block */
    const char *source;                 /* where an entry is declared, printf with its name */
    const char *where;                  /* where a missing block goes (for the message) */
} gd_blocks;

/* Rewrite every block of in (read from path) into out; *changed is 1 when
 * a block differs from its entry. 0, or 1 with the problems on stderr
 * (a block naming no entry, an entry without exactly one block, an
 * unclosed marker). */
int gd_render_blocks(const gd_blocks *g, const char *path, const char *in, cx_buf *out, int *changed);

/* s with '|' escaped, for a markdown table cell. */
void gd_cell(cx_buf *b, const char *s);

/* How one file is rendered: in (read from path) into out, *changed = 1
 * when they differ; 0, or 1 with the problems on stderr. */
typedef int (*gd_render)(const char *path, const char *in, cx_buf *out, int *changed);

/* A generator's main: `tool [--check] FILE1 FILE2`, FILE1 rendered by
 * first, FILE2 by second. Without --check a file that differs is
 * rewritten in place; with it nothing is written. from names the source
 * in messages ("injector_table"), target the build target that rewrites
 * the files. Exit 0 ok, 1 drift or error, 64 usage. */
int gd_main(int argc, char **argv, const char *tool, const char *files, const char *from, const char *target,
            gd_render first, gd_render second);

#endif
