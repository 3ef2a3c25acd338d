/* fragment.h - the parameter vector cut into P fragments, and the stagger
 * schedule that says when each fragment is sent.
 *
 * A fragment is an ordered list of ranges of the flat parameter vector; each
 * range lies inside one model tensor (so merge rules can treat it as a
 * tensor segment). Every parameter belongs to exactly one fragment. The
 * table is a pure function of (tensor table, P): syncer and learners build it
 * independently and compare fragment_table_digest() to prove they agree.
 *
 * Balancing: target = ceil(N / P) floats per fragment. Tensors longer than
 * the target are first split into ceil(len / target) near-equal pieces; then
 * all pieces are bin-packed greedily (largest first, into the currently
 * smallest fragment; ties broken by lower index, so deterministic). Ranges
 * within a fragment are sorted by offset. Result: max/min fragment size is
 * close to 1 (the unit tests bound it).
 *
 * Payload order: a fragment's contiguous payload is the concatenation of its
 * ranges in order (fragment_gather / fragment_scatter).
 *
 * Stagger schedule (decoupled mode): with H inner steps per outer round and
 * P fragments, fragment p has offset o_p = floor(p * H / P) and is sent
 * after inner step s (s = 1, 2, ... counts completed steps) when
 * s >= 1 and (s - o_p) mod H == 0. Every fragment goes exactly once in any H
 * consecutive steps; with P <= H at most one fragment per step, one every
 * H/P steps. With P > H several fragments can be due at one step.
 */
#ifndef CX_FRAGMENT_H
#define CX_FRAGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "numerics/model.h"

typedef struct fragment_table fragment_table; /* opaque, immutable after _new */

typedef struct fragment_range {
    size_t offset; /* floats from the start of the flat parameter vector */
    size_t length; /* floats, >= 1 */
    int tensor;    /* index into the tensor table the fragment table was built from */
} fragment_range;

#define FRAGMENT_MAX 4096 /* upper bound on P */

/* Cut the n_tensors tensors (contiguous, covering [0, N) in order, as
 * model_tensors() returns them) into P fragments, 1 <= P <= min(N,
 * FRAGMENT_MAX). CX_EINVAL on bad P or a tensor table with gaps/overlaps.
 * The table copies what it needs (tensors may be freed after). NULL on failure. */
fragment_table *fragment_table_new(const model_tensor *tensors, int n_tensors, int P, char *err,
                                   size_t errlen);
void fragment_table_free(fragment_table *t); /* NULL is a no-op */

/* Accessors taking p require 0 <= p < P (asserted: ids from the wire must be
 * validated by the caller first). */
int fragment_count(const fragment_table *t);            /* P */
size_t fragment_total(const fragment_table *t);         /* N, all parameters */
size_t fragment_length(const fragment_table *t, int p); /* floats in fragment p (payload length) */
int fragment_num_ranges(const fragment_table *t, int p);
const fragment_range *fragment_ranges(const fragment_table *t, int p); /* borrowed array */
/* 1 if the range's tensor is an embedding (plain average in merges). */
int fragment_range_is_embedding(const fragment_table *t, int p, int j);

/* CRC32C over (P, and every fragment's ranges), equal on both ends iff the
 * tables are the same. */
uint32_t fragment_table_digest(const fragment_table *t);

/* payload [fragment_length(p)] <- params at fragment p's ranges. */
void fragment_gather(const fragment_table *t, int p, const float *params, float *payload);
/* params at fragment p's ranges <- payload [fragment_length(p)]. */
void fragment_scatter(const fragment_table *t, int p, const float *payload, float *params);

/* ---- stagger schedule ---- */

/* o_p = floor(p * H / P), 0 <= o_p < H. */
int fragment_stagger_offset(int p, int H, int P);

/* Fragments due after completed inner step `step` (>= 1): written to
 * out[0..cap) in increasing order; returns how many are due (may exceed cap:
 * only cap are written). 0 for step < 1, H < 1 or P < 1. */
int fragment_due(int64_t step, int H, int P, int *out, int cap);

/* Round of fragment p at step: how many times p was due in steps [1, step]
 * (so its r-th due step is round r, r >= 1; 0 before the first). The
 * stagger schedule's own count: rounds on the wire are numbered by the
 * syncer, and a contribution naming one is refused (trainer/syncer/rounds.c). */
int64_t fragment_round(int64_t step, int p, int H, int P);

/* The step at which fragment p is due for the r-th time (r >= 1), the
 * inverse of fragment_round on due steps; -1 for r < 1 or bad H/P. */
int64_t fragment_round_step(int64_t r, int p, int H, int P);

#endif
