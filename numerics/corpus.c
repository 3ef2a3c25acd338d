/* corpus.c - the named corpora's shared part: the table of kinds, the entry
 * list, the seeded shuffle, the split by whole entries and the removal of
 * held-out entries that repeat a training entry. See corpus.h.
 */
#include "numerics/corpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/hash.h"
#include "common/rng.h"

/* The only list of corpus kinds (one file each). */
static const corpus_kind *const corpus_kinds[] = {&corpus_fortunes, &corpus_pydoc};

const corpus_kind *corpus_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof corpus_kinds / sizeof corpus_kinds[0]; i++)
        if (strcmp(name, corpus_kinds[i]->name) == 0)
            return corpus_kinds[i];
    return NULL;
}

int corpus_entries_add(corpus_entries *e, const char *p, size_t len, const char *suffix)
{
    size_t slen = suffix ? strlen(suffix) : 0;
    if (e->len + len + slen > e->cap || e->n == e->ncap) {
        size_t cap = (e->cap + len + slen) * 2, ncap = e->ncap * 2 + 64;
        char *t = realloc(e->text, cap);
        if (!t)
            return CX_ENOMEM;
        e->text = t;
        e->cap = cap;
        corpus_entry *n = realloc(e->ents, ncap * sizeof *n);
        if (!n)
            return CX_ENOMEM;
        e->ents = n;
        e->ncap = ncap;
    }
    memcpy(e->text + e->len, p, len);
    if (slen)
        memcpy(e->text + e->len + len, suffix, slen);
    e->ents[e->n++] = (corpus_entry){e->len, len + slen};
    e->len += len + slen;
    return CX_OK;
}

/* An entry's text hash with its index (corpus_held_out_dups). */
typedef struct corpus_ehash {
    uint64_t h; /* FNV-1a of the entry's text */
    size_t i;   /* entry index */
} corpus_ehash;

static int corpus_ehash_cmp(const void *a, const void *b)
{
    uint64_t x = ((const corpus_ehash *)a)->h, y = ((const corpus_ehash *)b)->h;
    return x < y ? -1 : x > y;
}

/* Mark in dup[i] (i >= k) the held-out entries whose text is that of a
 * training entry (ents[0..k)): the fortune files repeat some entries (1.3-1.9
 * % of the held-out bytes before, issue 27). CX_OK or CX_ENOMEM. */
static int corpus_held_out_dups(const char *text, const corpus_entry *ents, size_t n, size_t k, uint8_t *dup)
{
    corpus_ehash *t = malloc((k ? k : 1) * sizeof *t);
    if (!t)
        return CX_ENOMEM;
    for (size_t i = 0; i < k; i++)
        t[i] = (corpus_ehash){cx_fnv1a64(CX_FNV1A64_INIT, text + ents[i].off, ents[i].len), i};
    qsort(t, k, sizeof *t, corpus_ehash_cmp);
    for (size_t i = k; i < n; i++) {
        corpus_ehash key = {cx_fnv1a64(CX_FNV1A64_INIT, text + ents[i].off, ents[i].len), 0};
        corpus_ehash *f = k ? bsearch(&key, t, k, sizeof *t, corpus_ehash_cmp) : NULL;
        while (f && f > t && f[-1].h == key.h) /* the first of equal hashes */
            f--;
        for (; f && f < t + k && f->h == key.h && !dup[i]; f++)
            dup[i] = ents[f->i].len == ents[i].len &&
                     memcmp(text + ents[f->i].off, text + ents[i].off, ents[i].len) == 0;
    }
    free(t);
    return CX_OK;
}

int corpus_load(const corpus_kind *kind, uint64_t seed, corpus_text *out, char *err, size_t errlen)
{
    corpus_entries e = {NULL, 0, 0, NULL, 0, 0};
    uint8_t *dup = NULL;
    memset(out, 0, sizeof *out);
    int rc = kind->read(&e, err, errlen);
    if (rc != CX_OK)
        goto out;
    if (e.len < CORPUS_MIN_BYTES) {
        rc = cx_fail(err, errlen, CX_EINVAL, "data: the %s corpus (Debian's %s) holds only %zu bytes",
                     kind->name, kind->package, e.len);
        goto out;
    }
    out->bytes = malloc(e.len);
    dup = calloc(e.n, 1);
    if (!out->bytes || !dup) {
        rc = cx_fail(err, errlen, CX_ENOMEM, "data: out of memory");
        goto out;
    }
    cx_rng r;
    cx_rng_seed(&r, cx_seed_derive(seed, kind->shuffle_tag));
    for (size_t i = e.n; i > 1; i--) { /* Fisher-Yates */
        size_t j = (size_t)cx_rng_below(&r, i);
        corpus_entry t = e.ents[i - 1];
        e.ents[i - 1] = e.ents[j];
        e.ents[j] = t;
    }
    size_t off = 0, target = e.len / 10 * 9, k = e.n, ndup = 0, dup_bytes = 0;
    for (size_t i = 0; i < e.n && k == e.n; i++) {
        off += e.ents[i].len;
        if (off >= target)
            k = i + 1; /* the held-out part starts at an entry */
    }
    if (corpus_held_out_dups(e.text, e.ents, e.n, k, dup) != CX_OK) {
        rc = cx_fail(err, errlen, CX_ENOMEM, "data: out of memory");
        goto out;
    }
    off = 0;
    for (size_t i = 0; i < e.n; i++) {
        if (dup[i]) {
            ndup++;
            dup_bytes += e.ents[i].len;
            continue;
        }
        memcpy(out->bytes + off, e.text + e.ents[i].off, e.ents[i].len);
        off += e.ents[i].len;
        if (i + 1 == k)
            out->train_len = off;
    }
    out->len = off;
    out->entries = e.n - ndup;
    uint64_t fp = cx_fnv1a64(CX_FNV1A64_INIT, kind->fp_tag, strlen(kind->fp_tag) + 1);
    fp = cx_fnv1a64(fp, &seed, sizeof seed);
    out->fingerprint = cx_fnv1a64(fp, out->bytes, out->len);
    snprintf(out->describe, sizeof out->describe,
             "%s(%s=%zu bytes=%zu train=%zu held_out_repeats_left_out=%zu %s, %zu bytes)", kind->name,
             kind->entry_noun, out->entries, out->len, out->train_len, ndup, kind->entry_noun, dup_bytes);
out:
    if (rc != CX_OK) {
        free(out->bytes);
        memset(out, 0, sizeof *out);
    }
    free(dup);
    free(e.text);
    free(e.ents);
    return rc;
}
