/* corpus_pydoc.c - `--data pydoc`, the second corpus for quality claims
 * (issue 27): the reST sources of the Python 3.11 documentation in Debian's
 * `python3.11-doc` package (every *.rst.txt under CORPUS_PYDOC_DIR, path
 * order), one entry per whole document, kept byte for byte (a final newline
 * added where a file lacks one). About 500 documents, 11 MB of English prose
 * and code. Splitting by whole documents keeps a held-out document's text,
 * and the names it repeats, out of training.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/file.h"
#include "numerics/corpus.h"

#define PYDOC_FILE_MAX_BYTES (16u << 20) /* one document; the largest is about 0.2 MB */
#define PYDOC_MAX_FILES 4096             /* 497 in 3.11.2 */
#define PYDOC_MAX_DEPTH 4                /* _sources/library/x.rst.txt is depth 1 */
#define PYDOC_SUFFIX ".rst.txt"

/* Paths relative to CORPUS_PYDOC_DIR. */
typedef struct pydoc_names {
    char *v[PYDOC_MAX_FILES]; /* owned */
    int n;                    /* used */
} pydoc_names;

static int pydoc_has_suffix(const char *s)
{
    size_t n = strlen(s), m = strlen(PYDOC_SUFFIX);
    return n > m && strcmp(s + n - m, PYDOC_SUFFIX) == 0;
}

/* Collect the documents under CORPUS_PYDOC_DIR/rel (rel "" is the top). */
static int pydoc_walk(const char *rel, int depth, pydoc_names *nm, char *err, size_t errlen)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s%s%s", CORPUS_PYDOC_DIR, rel[0] ? "/" : "", rel);
    DIR *d = opendir(dir);
    if (!d)
        return cx_fail(err, errlen, CX_EIO,
                       "data: --data pydoc needs Debian's python3.11-doc package (%s: %s); install it with "
                       "`apt-get install python3.11-doc` or scripts/install-deps",
                       dir, strerror(errno));
    int rc = CX_OK;
    struct dirent *de;
    while (rc == CX_OK && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char sub[1024];
        int w = snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        if (w < 0 || (size_t)w >= sizeof sub)
            continue; /* no document of the package has so long a path */
        if (de->d_type == DT_DIR && depth < PYDOC_MAX_DEPTH) {
            rc = pydoc_walk(sub, depth + 1, nm, err, errlen);
        } else if (de->d_type == DT_REG && pydoc_has_suffix(de->d_name)) {
            if (nm->n == PYDOC_MAX_FILES)
                rc = cx_fail(err, errlen, CX_EINVAL, "data: more than %d documents in %s", PYDOC_MAX_FILES,
                             CORPUS_PYDOC_DIR);
            else if (!(nm->v[nm->n++] = strdup(sub)))
                rc = cx_fail(err, errlen, CX_ENOMEM, "data: out of memory");
        }
    }
    closedir(d);
    return rc;
}

static int pydoc_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int pydoc_read(corpus_entries *e, char *err, size_t errlen)
{
    pydoc_names *nm = calloc(1, sizeof *nm);
    if (!nm)
        return cx_fail(err, errlen, CX_ENOMEM, "data: out of memory");
    int rc = pydoc_walk("", 0, nm, err, errlen);
    if (rc == CX_OK && nm->n == 0)
        rc = cx_fail(err, errlen, CX_EIO,
                     "data: --data pydoc found no *%s document in %s; reinstall Debian's python3.11-doc "
                     "(`apt-get install --reinstall python3.11-doc`)",
                     PYDOC_SUFFIX, CORPUS_PYDOC_DIR);
    qsort(nm->v, (size_t)nm->n, sizeof nm->v[0], pydoc_name_cmp);
    for (int i = 0; i < nm->n && rc == CX_OK; i++) {
        char path[2048], cerr[CX_ERRLEN] = "";
        char *buf = NULL;
        size_t len = 0;
        snprintf(path, sizeof path, "%s/%s", CORPUS_PYDOC_DIR, nm->v[i]);
        rc = cx_file_read(path, PYDOC_FILE_MAX_BYTES, &buf, &len, cerr, sizeof cerr);
        if (rc != CX_OK) {
            rc = cx_fail(err, errlen, CX_EIO, "data: cannot read %s: %s", path,
                         cerr[0] ? cerr : cx_strerror(rc));
        } else if (len > 0) { /* an empty document is no entry */
            rc = corpus_entries_add(e, buf, len, buf[len - 1] == '\n' ? NULL : "\n");
            if (rc != CX_OK)
                rc = cx_fail(err, errlen, rc, "data: out of memory");
        }
        free(buf);
    }
    for (int i = 0; i < nm->n; i++)
        free(nm->v[i]);
    free(nm);
    return rc;
}

const corpus_kind corpus_pydoc = {
    "pydoc",          /* name */
    "python3.11-doc", /* package */
    "pydoc-v1",       /* fp_tag */
    0x7079646F63ull,  /* shuffle_tag: "pydoc" */
    "documents",      /* entry_noun */
    pydoc_read,       /* read */
};
