/* data.h - the byte streams the models learn from: a synthetic Markov corpus
 * with a known loss floor, or a text file; per-learner shards with a
 * checkpointable cursor; a fixed held-out eval set.
 *
 * Two objects:
 *   data_source  the corpus (immutable after data_source_new; may be shared
 *                read-only between threads): the synthetic Markov chain's
 *                tables, or the file's bytes.
 *   data_shard   one learner's reader over shard i of n, whose whole
 *                position is a data_cursor (plain old data). Not thread-safe.
 *
 * Examples: an example is (C context bytes, 1 target byte). A shard is read
 * as one stream; each example consumes exactly one target byte (token), so
 * `tokens` in the cursor counts trained targets.
 *   - synthetic: shard i is an independent stream of the Markov source,
 *     seeded from (seed, i); examples are consecutive windows of it.
 *   - file: the first 90% of the file is cut into n contiguous slices; shard
 *     i reads slice i. Its windows (one per target position) are visited in a
 *     fixed pseudo-random order (a stride coprime to the window count), so a
 *     batch is spread over the slice and every window is visited exactly once
 *     per epoch; then the epoch counter increments and the order repeats.
 * Eval split: synthetic, its own stream (seeded from (seed, "eval"),
 * independent of every shard's); file, the last 10%; a corpus (fortunes,
 * pydoc: corpus.h), the last 10% of its shuffled entries less those whose
 * text is also a training entry's (held-out bytes never occur as a training
 * entry).
 *
 * Not here: tokenisation (bytes are tokens), batching policy, threads.
 */
#ifndef CX_DATA_H
#define CX_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"

#include "numerics/model.h" /* MODEL_MAX_CONTEXT */

typedef struct data_source data_source; /* opaque */
typedef struct data_shard data_shard;   /* opaque */

/* Configuration. Zero/NULL fields mean "default" (see data_config_default). */
typedef struct data_config {
    const char *path; /* text file, a corpus ("fortunes", "pydoc": corpus.h), or NULL/"synthetic" */
    uint64_t seed;    /* synthetic: the corpus (chain and shard streams) */
    int order;        /* synthetic: Markov order k, 1..4 (default 2) */
    int alphabet;     /* synthetic: symbols, 2..95 printable bytes from ' ' (default 32) */
    int branching;    /* synthetic: possible next bytes per context, 1..alphabet (default 6) */
} data_config;

/* Where a shard is in its stream. Fixed size, no pointers: memcpy it into a
 * checkpoint and back (data_shard_set_cursor validates it). */
typedef struct data_cursor {
    uint32_t magic;       /* DATA_CURSOR_MAGIC */
    uint32_t version;     /* DATA_CURSOR_VERSION */
    uint64_t fingerprint; /* data_source_fingerprint() of the source it belongs to */
    uint32_t shard;       /* shard index i */
    uint32_t shards;      /* shard count n */
    uint32_t context;     /* C the shard reads (part of the identity) */
    uint32_t reserved;    /* zero */
    uint64_t tokens;      /* targets consumed since the start (all epochs) */
    uint64_t position;    /* file: windows consumed in the current epoch; synthetic: bytes drawn */
    uint64_t epoch;       /* file: completed passes over the slice; synthetic: 0 */
    cx_rng rng;           /* synthetic: xoshiro256** state of the stream */
    uint8_t history[MODEL_MAX_CONTEXT]; /* synthetic: last MODEL_MAX_CONTEXT bytes drawn, oldest first */
} data_cursor;

#define DATA_CURSOR_MAGIC 0x43584443u /* "CDXC" */
#define DATA_CURSOR_VERSION 2u        /* 2: history grew to 128 bytes */

void data_config_default(data_config *cfg);

/* Build the corpus. Synthetic: generate the chain from cfg->seed and compute
 * its entropy rate. File: read it whole into memory (CX_EIO naming the file
 * if unreadable, CX_EINVAL if it is smaller than DATA_FILE_MIN_BYTES).
 * Returns NULL on failure with the reason in err. */
data_source *data_source_new(const data_config *cfg, char *err, size_t errlen);
void data_source_free(data_source *src); /* NULL is a no-op */

#define DATA_FILE_MIN_BYTES 1024 /* a few contexts per shard, and an eval split */
#define DATA_MIN_WINDOWS 16      /* per file shard slice and per eval split */

/* 1 for the synthetic corpus, 0 for a file. */
int data_source_is_synthetic(const data_source *src);

/* The loss floor in nats per byte: the exact entropy rate of the synthetic
 * Markov source (stationary distribution by power iteration to 1e-12, then
 * sum_s pi(s) H(next | s)). NAN for a file (unknown). */
double data_entropy_rate(const data_source *src);

/* Probability under the synthetic chain that byte `next` follows the bytes
 * ctx[0..len) (only the last `order` bytes matter; len >= order, bytes
 * outside the alphabet count as its first symbol). 0 for a successor the
 * chain never produces. NAN for a file source or len < order. For tests and
 * diagnostics (e.g. the empirical entropy -mean ln p of a sampled stream). */
double data_transition_prob(const data_source *src, const uint8_t *ctx, int len, uint8_t next);

/* A 64-bit digest of what the source is (synthetic parameters, or the file's
 * bytes), stored in cursors so a cursor cannot resume against other data. */
uint64_t data_source_fingerprint(const data_source *src);

/* Empirical order-0 and order-1 (previous-byte conditional) entropies of a
 * file or fortunes corpus as a whole, in bits/byte; NAN for synthetic (whose
 * exact rate is data_entropy_rate()). */
void data_order_entropies(const data_source *src, double *h0_bits, double *h1_bits);

/* Where `--data fortunes` and `--data pydoc` read their Debian packages
 * from: CORPUS_FORTUNES_DIR and CORPUS_PYDOC_DIR (numerics/corpus.h). */

/* One-line description for the config log line, e.g.
 * "synthetic(seed=1 order=2 alphabet=32 branching=6 floor=1.234 nats)" or
 * "file(path=x.txt bytes=12345)". Static per source; borrowed. */
const char *data_source_describe(const data_source *src);

/* A file source's training bytes (the shards read them) and held-out bytes
 * (the eval set's windows lie in them), borrowed while src lives: 0, or
 * CX_EINVAL for the synthetic source (no bytes). bench/bench_split writes
 * them out for the held-out-given-train compressor lines (bench/curve.sh). */
int data_source_split(const data_source *src, const uint8_t **train, size_t *train_len, const uint8_t **held,
                      size_t *held_len);

/* ---- shards ---- */

/* Reader over shard `index` of `count` (0 <= index < count <= 65536) for
 * context length C (1..MODEL_MAX_CONTEXT). File sources fail with CX_EINVAL
 * when the slice holds fewer than DATA_MIN_WINDOWS windows (C + 16 bytes).
 * The cursor starts at the beginning of the shard.
 * src must outlive the shard. Returns NULL on failure. */
data_shard *data_shard_new(const data_source *src, int index, int count, int C, char *err, size_t errlen);
void data_shard_free(data_shard *sh); /* NULL is a no-op */

/* Next B examples: inputs [B, C] (oldest byte first), targets [B]. Advances
 * the cursor by B tokens. Never fails (files wrap into the next epoch). */
void data_shard_next_batch(data_shard *sh, int B, uint8_t *inputs, uint8_t *targets);

/* Copy the cursor out (for a checkpoint). */
void data_shard_get_cursor(const data_shard *sh, data_cursor *out);

/* Restore a cursor: the stream continues exactly where it was. CX_ECORRUPT
 * on a bad magic/version, CX_EINVAL if it belongs to another source, shard,
 * shard count or context length (message names which). */
int data_shard_set_cursor(data_shard *sh, const data_cursor *cur, char *err, size_t errlen);

/* Tokens (targets) per epoch of this shard: the window count for a file,
 * UINT64_MAX for the synthetic stream. */
uint64_t data_shard_epoch_tokens(const data_shard *sh);

/* ---- held-out eval set ---- */

/* Largest n accepted by data_eval_examples for context C (SIZE_MAX for
 * synthetic; the held-out window count for a file). */
size_t data_eval_capacity(const data_source *src, int C);

/* The fixed eval set: its first n examples, inputs [n, C], targets [n].
 * Deterministic: the same (source, C, n) always gives the same examples, and
 * the first n examples of a larger set are the same as a set of n (synthetic;
 * for a file the n windows are spread evenly over the held-out 10%).
 * CX_EINVAL if n == 0 or n > data_eval_capacity(). */
int data_eval_examples(const data_source *src, int C, size_t n, uint8_t *inputs, uint8_t *targets, char *err,
                       size_t errlen);

#endif
