/* bandwidth.c - the `bandwidth` toxic: an emulated wire of rate KB/s
 * (1 KB = 1000 bytes) per link and direction. Data is cut into pieces of
 * at most 100 ms of wire time, as Toxiproxy does, each leaving once the
 * wire is free. */
#include "injectors/proxy/toxic.h"

enum { A_RATE };

typedef struct bandwidth_state {
    int64_t next_free_ns; /* when the emulated wire is free again */
} bandwidth_state;
TOXIC_STATE_FITS(bandwidth_state);

static size_t bandwidth_piece(toxic_inst *ti)
{
    int64_t piece = (int64_t)ti->spec.a.v[A_RATE] * 100;
    return (size_t)(piece > 0 ? piece : 1);
}

static int64_t bandwidth_ready(toxic_inst *ti, chunk *p, int64_t i, int64_t base)
{
    (void)i, (void)base;
    bandwidth_state *st = TOXIC_STATE(ti, bandwidth_state);
    int64_t start = p->ready_ns > st->next_free_ns ? p->ready_ns : st->next_free_ns;
    st->next_free_ns = start + (int64_t)p->len * 1000000 / (int64_t)ti->spec.a.v[A_RATE];
    return st->next_free_ns;
}

static bool bandwidth_run(toxic_inst *ti, chunk *c, chunk_list *out, int64_t now_ns)
{
    (void)now_ns;
    if (c->kind != CHUNK_DATA) {
        toxic_pass(ti, c, out);
        return true;
    }
    if (toxic_split(ti, c, out, bandwidth_piece, bandwidth_ready))
        return true;
    chunk_list_push(out, c);
    return false;
}

const toxic_kind toxic_bandwidth = {
    .name = "bandwidth",
    .attrs = {[A_RATE] = {"rate", false, 1, 1000000000.0}},
    .run = bandwidth_run,
};
