/* corpus_fortunes.c - `--data fortunes`, the default corpus: every entry of
 * Debian's `fortunes` package (plain files of CORPUS_FORTUNES_DIR, name
 * order; an entry ends at a "%" line), each kept as its text plus "%\n".
 * About 15 k entries, 2.6 MB.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/file.h"
#include "numerics/corpus.h"

#define FORTUNES_FILE_MAX_BYTES (64u << 20) /* one fortune file; the largest is under 1 MB */
#define FORTUNES_MAX_FILES 256

/* Append every entry of one fortune file (entries end at a "%" line), each
 * followed by "%\n". */
static int fortunes_file(const char *path, corpus_entries *e)
{
    char *buf = NULL;
    size_t blen = 0;
    if (cx_file_read(path, FORTUNES_FILE_MAX_BYTES, &buf, &blen, NULL, 0) != CX_OK)
        return CX_EIO;
    size_t start = 0;
    int rc = CX_OK;
    for (size_t i = 0; i <= blen && rc == CX_OK; i++) {
        int end = i == blen ||
                  (buf[i] == '%' && (i == 0 || buf[i - 1] == '\n') && (i + 1 == blen || buf[i + 1] == '\n'));
        if (!end)
            continue;
        size_t elen = i - start;
        if (elen > 1) /* skip empty entries */
            rc = corpus_entries_add(e, buf + start, elen, "%\n");
        start = i + 2;
    }
    free(buf);
    return rc;
}

static int fortunes_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every fortune file (plain files without a '.', so not the .dat indexes
 * and .u8 links), in name order. */
static int fortunes_read(corpus_entries *e, char *err, size_t errlen)
{
    DIR *d = opendir(CORPUS_FORTUNES_DIR);
    if (!d)
        return cx_fail(err, errlen, CX_EIO,
                       "data: --data fortunes needs Debian's fortunes package (%s: %s); install it with "
                       "`apt-get install fortunes` or scripts/install-deps",
                       CORPUS_FORTUNES_DIR, strerror(errno));
    char *names[FORTUNES_MAX_FILES];
    int nn = 0, rc = CX_OK;
    struct dirent *de;
    while ((de = readdir(d)) && nn < FORTUNES_MAX_FILES)
        if (de->d_name[0] != '.' && !strchr(de->d_name, '.') && de->d_type == DT_REG)
            names[nn++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)nn, sizeof(names[0]), fortunes_name_cmp);
    for (int i = 0; i < nn; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", CORPUS_FORTUNES_DIR, names[i] ? names[i] : "");
        if (rc == CX_OK)
            rc = names[i] ? fortunes_file(path, e) : CX_ENOMEM;
        free(names[i]);
    }
    if (rc != CX_OK)
        return cx_fail(err, errlen, rc, "data: cannot read the fortune files in %s", CORPUS_FORTUNES_DIR);
    return CX_OK;
}

const corpus_kind corpus_fortunes = {
    "fortunes",          /* name */
    "fortunes",          /* package */
    "fortunes-v2",       /* fp_tag; 2: held-out entries that repeat a training entry are left out */
    0x666F7274756E65ull, /* shuffle_tag: "fortune" */
    "entries",           /* entry_noun */
    fortunes_read,       /* read */
};
