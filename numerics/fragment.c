/* fragment.c - cutting the flat parameter vector into balanced fragments,
 * gather/scatter of fragment payloads, and the stagger schedule.
 *
 * Packing. Fragment p has a capacity cap_p = floor(N/P) (+1 for the first
 * N mod P fragments), so the capacities sum to exactly N. Tensors are taken
 * largest first (ties: lower offset); each goes whole into the fragment with
 * the most room left (ties: lower index) when it fits, otherwise it fills
 * that fragment's room and the rest continues into the next roomiest one.
 * Because the capacities sum to N, every fragment ends exactly full: sizes
 * differ by at most one float, tensors are split only where they must be,
 * and every float lands in exactly one fragment. (This refines the "split
 * tensors larger than the target, then bin-pack" idea: a plain bin-packing
 * of target-sized pieces can leave one fragment with two pieces.)
 */
#include "numerics/fragment.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/err.h"

typedef struct fragment {
    fragment_range *ranges; /* sorted by offset, adjacent pieces coalesced */
    int num_ranges;         /* entries in ranges */
    size_t length;          /* floats: sum of range lengths */
} fragment;

struct fragment_table {
    int P;                  /* fragments */
    size_t total;           /* N floats */
    fragment *frags;        /* [P] */
    fragment_range *pool;   /* every range, one allocation */
    uint8_t *tensor_is_emb; /* [n_tensors] copy of model_tensor.is_embedding */
    int n_tensors;          /* tensors in the source table */
    uint32_t digest;        /* fragment_table_digest() */
};

/* ---- construction ---- */

typedef struct frag_item {
    size_t offset; /* tensor offset */
    size_t length; /* tensor length */
    int tensor;    /* index */
} frag_item;

static int frag_item_cmp(const void *a, const void *b)
{
    const frag_item *x = a, *y = b;
    if (x->length != y->length)
        return x->length > y->length ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int frag_range_cmp(const void *a, const void *b)
{
    const fragment_range *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void frag_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

fragment_table *fragment_table_new(const model_tensor *tensors, int n_tensors, int P, char *err,
                                   size_t errlen)
{
    if (n_tensors < 1) {
        cx_fail(err, errlen, CX_EINVAL, "fragments: empty tensor table");
        return NULL;
    }
    size_t N = 0;
    for (int i = 0; i < n_tensors; i++) {
        if (tensors[i].offset != N || tensors[i].length == 0) {
            cx_fail(err, errlen, CX_EINVAL,
                    "fragments: tensor %d ('%s') at offset %zu length %zu leaves a gap or overlap "
                    "(expected offset %zu, length > 0)",
                    i, tensors[i].name ? tensors[i].name : "?", tensors[i].offset, tensors[i].length, N);
            return NULL;
        }
        N += tensors[i].length;
    }
    if (P < 1 || P > FRAGMENT_MAX || (size_t)P > N) {
        cx_fail(err, errlen, CX_EINVAL, "fragments: P=%d out of range 1..%zu", P,
                N < FRAGMENT_MAX ? N : (size_t)FRAGMENT_MAX);
        return NULL;
    }

    fragment_table *t = calloc(1, sizeof(*t));
    frag_item *items = calloc((size_t)n_tensors, sizeof(*items));
    size_t *room = calloc((size_t)P, sizeof(*room));
    /* Each tensor adds at most one range per fragment it spills into; a
     * spill happens at most P-1 times overall (a fragment fills up at most
     * once), so n_tensors + P ranges suffice. */
    size_t max_ranges = (size_t)n_tensors + (size_t)P;
    if (!t || !items || !room)
        goto nomem;
    t->P = P;
    t->total = N;
    t->n_tensors = n_tensors;
    t->frags = calloc((size_t)P, sizeof(*t->frags));
    t->pool = calloc(max_ranges, sizeof(*t->pool));
    t->tensor_is_emb = calloc((size_t)n_tensors, 1);
    if (!t->frags || !t->pool || !t->tensor_is_emb)
        goto nomem;
    for (int i = 0; i < n_tensors; i++) {
        items[i] = (frag_item){tensors[i].offset, tensors[i].length, i};
        t->tensor_is_emb[i] = tensors[i].is_embedding != 0;
    }
    qsort(items, (size_t)n_tensors, sizeof(*items), frag_item_cmp);
    for (int p = 0; p < P; p++)
        room[p] = N / (size_t)P + ((size_t)p < N % (size_t)P);

    /* Assign: first pass records (fragment, range) pairs in a temporary
     * list, then ranges are grouped per fragment. */
    fragment_range *tmp = calloc(max_ranges, sizeof(*tmp));
    int *owner = calloc(max_ranges, sizeof(*owner));
    if (!tmp || !owner) {
        free(tmp);
        free(owner);
        goto nomem;
    }
    size_t nr = 0;
    for (int i = 0; i < n_tensors; i++) {
        size_t off = items[i].offset, left = items[i].length;
        while (left > 0) {
            int best = 0;
            for (int p = 1; p < P; p++)
                if (room[p] > room[best])
                    best = p;
            size_t take = left < room[best] ? left : room[best];
            tmp[nr] = (fragment_range){off, take, items[i].tensor};
            owner[nr] = best;
            nr++;
            room[best] -= take;
            off += take;
            left -= take;
        }
    }
    /* Group per fragment, sort by offset, coalesce adjacent same-tensor pieces. */
    size_t used = 0;
    for (int p = 0; p < P; p++) {
        fragment *f = &t->frags[p];
        f->ranges = t->pool + used;
        for (size_t r = 0; r < nr; r++)
            if (owner[r] == p)
                f->ranges[f->num_ranges++] = tmp[r];
        qsort(f->ranges, (size_t)f->num_ranges, sizeof(*f->ranges), frag_range_cmp);
        int w = 0;
        for (int r = 0; r < f->num_ranges; r++) {
            if (w > 0 && f->ranges[w - 1].tensor == f->ranges[r].tensor &&
                f->ranges[w - 1].offset + f->ranges[w - 1].length == f->ranges[r].offset)
                f->ranges[w - 1].length += f->ranges[r].length;
            else
                f->ranges[w++] = f->ranges[r];
        }
        f->num_ranges = w;
        f->length = 0;
        for (int r = 0; r < w; r++)
            f->length += f->ranges[r].length;
        used += (size_t)w;
    }
    free(tmp);
    free(owner);
    free(items);
    free(room);

    uint8_t buf[24];
    uint32_t crc = 0;
    frag_put_u64(buf, (uint64_t)P);
    crc = cx_crc32c(crc, buf, 8);
    for (int p = 0; p < P; p++) {
        const fragment *f = &t->frags[p];
        frag_put_u64(buf, (uint64_t)f->num_ranges);
        crc = cx_crc32c(crc, buf, 8);
        for (int r = 0; r < f->num_ranges; r++) {
            frag_put_u64(buf, f->ranges[r].offset);
            frag_put_u64(buf + 8, f->ranges[r].length);
            frag_put_u64(buf + 16, (uint64_t)f->ranges[r].tensor);
            crc = cx_crc32c(crc, buf, 24);
        }
    }
    t->digest = crc;
    return t;
nomem:
    cx_fail(err, errlen, CX_ENOMEM, "fragments: out of memory");
    free(items);
    free(room);
    fragment_table_free(t);
    return NULL;
}

void fragment_table_free(fragment_table *t)
{
    if (!t)
        return;
    free(t->frags);
    free(t->pool);
    free(t->tensor_is_emb);
    free(t);
}

/* ---- accessors ---- */

/* p out of range is a programmer error (callers validate ids from the wire). */
static const fragment *frag_get(const fragment_table *t, int p)
{
    assert(p >= 0 && p < t->P);
    return &t->frags[p];
}

int fragment_count(const fragment_table *t)
{
    return t->P;
}
size_t fragment_total(const fragment_table *t)
{
    return t->total;
}
size_t fragment_length(const fragment_table *t, int p)
{
    return frag_get(t, p)->length;
}
int fragment_num_ranges(const fragment_table *t, int p)
{
    return frag_get(t, p)->num_ranges;
}
const fragment_range *fragment_ranges(const fragment_table *t, int p)
{
    return frag_get(t, p)->ranges;
}
uint32_t fragment_table_digest(const fragment_table *t)
{
    return t->digest;
}

int fragment_range_is_embedding(const fragment_table *t, int p, int j)
{
    const fragment *f = frag_get(t, p);
    assert(j >= 0 && j < f->num_ranges);
    return t->tensor_is_emb[f->ranges[j].tensor];
}

/* ---- payloads ---- */

void fragment_gather(const fragment_table *t, int p, const float *params, float *payload)
{
    const fragment *f = frag_get(t, p);
    for (int r = 0; r < f->num_ranges; r++) {
        memcpy(payload, params + f->ranges[r].offset, f->ranges[r].length * sizeof(float));
        payload += f->ranges[r].length;
    }
}

void fragment_scatter(const fragment_table *t, int p, const float *payload, float *params)
{
    const fragment *f = frag_get(t, p);
    for (int r = 0; r < f->num_ranges; r++) {
        memcpy(params + f->ranges[r].offset, payload, f->ranges[r].length * sizeof(float));
        payload += f->ranges[r].length;
    }
}

/* ---- stagger schedule ---- */

int fragment_stagger_offset(int p, int H, int P)
{
    return (int)(((int64_t)p * H) / P);
}

int fragment_due(int64_t step, int H, int P, int *out, int cap)
{
    if (step < 1 || H < 1 || P < 1)
        return 0;
    int phase = (int)(step % H), n = 0;
    for (int p = 0; p < P; p++)
        if (fragment_stagger_offset(p, H, P) == phase) {
            if (n < cap)
                out[n] = p;
            n++;
        }
    return n;
}

int64_t fragment_round(int64_t step, int p, int H, int P)
{
    if (step < 1 || H < 1 || P < 1)
        return 0;
    int o = fragment_stagger_offset(p, H, P);
    if (step < o)
        return 0;
    /* due steps o + kH in [1, step]: k from (o == 0 ? 1 : 0) to (step - o) / H */
    return (step - o) / H + (o > 0);
}

int64_t fragment_round_step(int64_t r, int p, int H, int P)
{
    if (r < 1 || H < 1 || P < 1)
        return -1;
    int o = fragment_stagger_offset(p, H, P);
    return o + (r - (o > 0)) * H;
}
