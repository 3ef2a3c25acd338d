/* test_corpus.c - the named corpora (numerics/corpus.h), through the data
 * source that serves them: `--data pydoc` (Debian's python3.11-doc) is split
 * by whole documents, deterministically by seed, every document in exactly
 * one part, both parts nonempty and about 90/10. Skipped without the package
 * (scripts/install-deps --test installs it).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/file.h"
#include "numerics/corpus.h"
#include "numerics/data.h"

/* One document as the corpus keeps it: the file, plus "\n" if it lacks one. */
typedef struct doc {
    char *p;  /* owned */
    size_t n; /* bytes */
    int used; /* times a part held it */
} doc;

/* Read every document file listed by `find` (sorted paths) into docs. */
static size_t read_docs(doc *docs, size_t cap)
{
    FILE *f = popen("find " CORPUS_PYDOC_DIR " -type f -name '*.rst.txt' | LC_ALL=C sort", "r");
    cr_assert_not_null(f);
    char line[2048];
    size_t n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *buf = NULL;
        size_t len = 0;
        char err[CX_ERRLEN];
        cr_assert_eq(cx_file_read(line, 1u << 24, &buf, &len, err, sizeof err), 0, "%s", err);
        if (len == 0) {
            free(buf);
            continue;
        }
        if (buf[len - 1] != '\n') {
            char *t = realloc(buf, len + 1);
            cr_assert_not_null(t);
            buf = t;
            buf[len++] = '\n';
        }
        docs[n++] = (doc){buf, len, 0};
    }
    pclose(f);
    return n;
}

/* Cut part[0..len) into whole documents, longest match first at each
 * boundary, marking each one used; returns how many, or 0 if some bytes are
 * no document. */
static size_t walk_docs(const uint8_t *part, size_t len, doc *docs, size_t nd)
{
    size_t p = 0, count = 0;
    while (p < len) {
        size_t best = nd;
        for (size_t i = 0; i < nd; i++)
            if (docs[i].n <= len - p && (best == nd || docs[i].n > docs[best].n) &&
                memcmp(part + p, docs[i].p, docs[i].n) == 0)
                best = i;
        if (best == nd)
            return 0;
        docs[best].used++;
        p += docs[best].n;
        count++;
    }
    return count;
}

static data_source *pydoc(uint64_t seed)
{
    char err[CX_ERRLEN];
    data_config cfg;
    data_config_default(&cfg);
    cfg.path = "pydoc";
    cfg.seed = seed;
    data_source *s = data_source_new(&cfg, err, sizeof err);
    cr_assert_not_null(s, "%s", err);
    return s;
}

Test(corpus, kinds_by_name)
{
    cr_assert_eq(corpus_find("fortunes"), &corpus_fortunes);
    cr_assert_eq(corpus_find("pydoc"), &corpus_pydoc);
    cr_assert_null(corpus_find("pydoc.txt"), "any other name is a file path");
    cr_assert_null(corpus_find(NULL));
    cr_assert_str_neq(corpus_fortunes.fp_tag, corpus_pydoc.fp_tag);
    cr_assert_neq(corpus_fortunes.shuffle_tag, corpus_pydoc.shuffle_tag);
}

Test(corpus, pydoc_split_by_whole_documents_deterministic_and_disjoint)
{
    if (access(CORPUS_PYDOC_DIR, R_OK) != 0)
        cr_skip_test("no python3.11-doc package");
    enum { CAP = 4096 };
    doc *docs = calloc(CAP, sizeof *docs);
    cr_assert_not_null(docs);
    size_t nd = read_docs(docs, CAP);
    cr_assert(nd > 300, "%zu documents", nd);

    data_source *a = pydoc(7), *b = pydoc(7), *c = pydoc(8);
    const uint8_t *tr, *ho, *tr2, *ho2, *tr3, *ho3;
    size_t trn, hon, trn2, hon2, trn3, hon3;
    cr_assert_eq(data_source_split(a, &tr, &trn, &ho, &hon), 0);
    cr_assert_eq(data_source_split(b, &tr2, &trn2, &ho2, &hon2), 0);
    cr_assert_eq(data_source_split(c, &tr3, &trn3, &ho3, &hon3), 0);

    /* deterministic by seed; another seed is another split of the same text */
    cr_assert_eq(data_source_fingerprint(a), data_source_fingerprint(b));
    cr_assert(trn == trn2 && hon == hon2 && memcmp(tr, tr2, trn) == 0 && memcmp(ho, ho2, hon) == 0);
    cr_assert_neq(data_source_fingerprint(a), data_source_fingerprint(c));
    cr_assert(trn != trn3 || memcmp(tr, tr3, trn) != 0, "seed 8 splits as seed 7 does");
    cr_assert_eq(trn + hon, trn3 + hon3, "no document of either split repeats another");

    /* the size: about 11 MB, about 10 % held out, both parts nonempty */
    size_t total = 0;
    for (size_t i = 0; i < nd; i++)
        total += docs[i].n;
    cr_assert_eq(trn + hon, total, "every document once: %zu bytes of %zu", trn + hon, total);
    cr_assert(total > 8000000 && total < 16000000, "%zu bytes", total);
    cr_assert(hon > total / 20 && hon < total / 6, "held out %zu of %zu bytes, about 10 %%", hon, total);

    /* disjoint by whole documents: each part is a sequence of whole
     * documents and every document is in exactly one part */
    size_t nt = walk_docs(tr, trn, docs, nd), nh = walk_docs(ho, hon, docs, nd);
    cr_assert(nt > 0 && nh > 0, "%zu training and %zu held-out documents (0: bytes that are no document)", nt,
              nh);
    cr_assert_eq(nt + nh, nd);
    for (size_t i = 0; i < nd; i++)
        cr_assert_eq(docs[i].used, 1, "document %zu is in %d parts", i, docs[i].used);
    char want[64];
    snprintf(want, sizeof want, "pydoc(documents=%zu ", nd);
    cr_assert(strstr(data_source_describe(a), want), "%s", data_source_describe(a));

    data_source_free(a);
    data_source_free(b);
    data_source_free(c);
    for (size_t i = 0; i < nd; i++)
        free(docs[i].p);
    free(docs);
}
