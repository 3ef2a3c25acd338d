/* corpus.h - the named corpora read at run time from Debian packages
 * (`--data fortunes`, `--data pydoc`). Each is a list of entries (a fortune;
 * a reST document), shuffled from the seed and split by whole entries: the
 * first entries up to 90 % of the bytes train, the rest is held out, less
 * every held-out entry whose text is also a training entry's (a held-out
 * byte the model trained on is not held out, issue 27).
 *
 * A corpus kind is one file (corpus_fortunes.c, corpus_pydoc.c): its name,
 * its fingerprint tag, and how to read its entries from the installed
 * package. The table in corpus.c is the only list of kinds.
 *
 * Not here: shards, cursors and eval windows (data.c), which read the split
 * bytes this module produces. No text is shipped: the package is read when
 * the source is built, and a missing package is an error naming it.
 */
#ifndef CX_CORPUS_H
#define CX_CORPUS_H

#include <stddef.h>
#include <stdint.h>

/* One entry: a range of corpus_entries.text. */
typedef struct corpus_entry {
    size_t off; /* bytes from the start of text */
    size_t len; /* bytes */
} corpus_entry;

/* The entries as read, concatenated in reading order. Zero-initialise; the
 * kind's reader appends with corpus_entries_add; corpus_load frees. */
typedef struct corpus_entries {
    char *text;         /* [len] every entry's bytes */
    size_t len;         /* bytes used */
    size_t cap;         /* bytes allocated */
    corpus_entry *ents; /* [n] */
    size_t n;           /* entries */
    size_t ncap;        /* entries allocated */
} corpus_entries;

/* Append p[0..len) then suffix (NULL: none) as one entry. CX_OK or
 * CX_ENOMEM. */
int corpus_entries_add(corpus_entries *e, const char *p, size_t len, const char *suffix);

/* A corpus kind (one file each). */
typedef struct corpus_kind {
    const char *name;       /* the --data value */
    const char *package;    /* the Debian package it reads */
    const char *fp_tag;     /* fingerprint tag; a new version when the bytes change */
    uint64_t shuffle_tag;   /* cx_seed_derive tag of the entry shuffle */
    const char *entry_noun; /* "entries", "documents": data_source_describe() */
    /* Append every entry in a fixed order (sorted names). 0, or a negative
     * CX_ code with a message in err that names the package and how to
     * install it when it is missing. */
    int (*read)(corpus_entries *e, char *err, size_t errlen);
} corpus_kind;

/* The kinds (corpus_fortunes.c, corpus_pydoc.c). */
extern const corpus_kind corpus_fortunes; /* --data fortunes */
extern const corpus_kind corpus_pydoc;    /* --data pydoc */

/* Where the kinds read their package from. */
#define CORPUS_FORTUNES_DIR "/usr/share/games/fortunes"
#define CORPUS_PYDOC_DIR "/usr/share/doc/python3.11/html/_sources"

/* The kind called name, or NULL when name is no corpus (a file path). */
const corpus_kind *corpus_find(const char *name);

/* A loaded corpus: training entries, then held-out entries. */
typedef struct corpus_text {
    uint8_t *bytes;       /* [len] owned by the caller (free()) */
    size_t len;           /* bytes, repeats left out */
    size_t train_len;     /* the first train_len bytes train; the rest is held out */
    uint64_t fingerprint; /* FNV-1a of (fp_tag, seed, bytes) */
    size_t entries;       /* entries kept */
    char describe[256];   /* e.g. "pydoc(documents=497 bytes=... train=... ...)" */
} corpus_text;

/* Read, shuffle from seed and split kind's corpus into *out. 0, or a
 * negative CX_ code with the reason in err (out holds nothing). */
int corpus_load(const corpus_kind *kind, uint64_t seed, corpus_text *out, char *err, size_t errlen);

#define CORPUS_MIN_BYTES 1024 /* as DATA_FILE_MIN_BYTES */

#endif
