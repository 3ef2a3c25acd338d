/* corrupt.c - the `corrupt` toxic (chaosloco's own): every bit of the
 * stream flips independently with the given probability, seeded, and the
 * same whatever the chunking (the gaps between flips are geometric). */
#include <math.h>

#include "injectors/proxy/toxic.h"

enum { A_PROBABILITY };

typedef struct corrupt_state {
    uint64_t bit_pos;   /* bits seen so far on this direction */
    uint64_t next_flip; /* absolute bit index of the next flip */
} corrupt_state;
TOXIC_STATE_FITS(corrupt_state);

/* Bits to skip before the next flip: geometric with success probability p,
 * so that flips are independent per bit whatever the chunking. */
static uint64_t corrupt_gap(toxic_inst *ti, double p)
{
    if (p <= 0.0)
        return UINT64_MAX / 2;
    if (p >= 1.0)
        return 0;
    double u = 1.0 - toxic_rng_unit(ti); /* (0, 1] */
    double g = floor(log(u) / log1p(-p));
    if (!(g < 1e18))
        return UINT64_MAX / 2;
    return (uint64_t)g;
}

static void corrupt_start(toxic_inst *ti, const toxic_spec *old, int64_t now_ns)
{
    (void)now_ns;
    corrupt_state *st = TOXIC_STATE(ti, corrupt_state);
    double p = ti->spec.a.v[A_PROBABILITY];
    if (!old)
        st->next_flip = corrupt_gap(ti, p);
    else if (old->a.v[A_PROBABILITY] != p)
        st->next_flip = st->bit_pos + corrupt_gap(ti, p);
}

static bool corrupt_run(toxic_inst *ti, chunk *c, chunk_list *out, int64_t now_ns)
{
    (void)now_ns;
    if (c->kind == CHUNK_DATA) {
        corrupt_state *st = TOXIC_STATE(ti, corrupt_state);
        uint64_t nbits = (uint64_t)(c->len - c->off) * 8;
        while (st->next_flip < st->bit_pos + nbits) {
            uint64_t b = st->next_flip - st->bit_pos;
            c->data[c->off + b / 8] ^= (unsigned char)(1u << (b % 8));
            TOXIC_CTR_ADD(ti, bits_flipped, 1);
            st->next_flip += corrupt_gap(ti, ti->spec.a.v[A_PROBABILITY]) + 1;
        }
        st->bit_pos += nbits;
    }
    toxic_pass(ti, c, out);
    return true;
}

const toxic_kind toxic_corrupt = {
    .name = "corrupt",
    .attrs = {[A_PROBABILITY] = {"probability", true, 0.0, 1.0}},
    .start = corrupt_start,
    .run = corrupt_run,
};
