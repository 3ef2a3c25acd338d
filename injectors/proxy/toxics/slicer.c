/* slicer.c - the `slicer` toxic: data is cut into pieces of average_size
 * +- size_variation bytes sent delay us apart. */
#include <stdio.h>

#include "common/err.h"
#include "injectors/proxy/toxic.h"

enum { A_AVERAGE, A_VARIATION, A_DELAY };

static int slicer_check(const toxic_attrs *a, char *err, size_t errlen)
{
    if (a->v[A_VARIATION] >= a->v[A_AVERAGE])
        return cx_fail(err, errlen, CX_EINVAL,
                       "toxic.attributes.size_variation: must be < average_size (%lld) (got %lld)",
                       (long long)a->v[A_AVERAGE], (long long)a->v[A_VARIATION]);
    return CX_OK;
}

static size_t slicer_piece(toxic_inst *ti)
{
    int64_t sz = (int64_t)ti->spec.a.v[A_AVERAGE] + toxic_rng_pm(ti, (int64_t)ti->spec.a.v[A_VARIATION]);
    return sz < 1 ? 1 : (size_t)sz;
}

static int64_t slicer_ready(toxic_inst *ti, chunk *p, int64_t i, int64_t base)
{
    (void)p;
    return base + i * (int64_t)ti->spec.a.v[A_DELAY] * 1000;
}

static bool slicer_run(toxic_inst *ti, chunk *c, chunk_list *out, int64_t now_ns)
{
    (void)now_ns;
    if (c->kind != CHUNK_DATA) {
        toxic_pass(ti, c, out);
        return true;
    }
    if (toxic_split(ti, c, out, slicer_piece, slicer_ready))
        return true;
    chunk_list_push(out, c);
    return false;
}

const toxic_kind toxic_slicer = {
    .name = "slicer",
    .attrs = {[A_AVERAGE] = {"average_size", false, 1, 1 << 20},
              [A_VARIATION] = {"size_variation", false, 0, 1 << 20},
              [A_DELAY] = {"delay", false, 0, 1000000000.0}},
    .check = slicer_check,
    .run = slicer_run,
};
