/* slow_close.c - the `slow_close` toxic: the half-close (EOF) of a
 * direction is held back by delay ms; data passes unchanged. */
#include "injectors/proxy/toxic.h"

enum { A_DELAY };

static bool slow_close_run(toxic_inst *ti, chunk *c, chunk_list *out, int64_t now_ns)
{
    (void)now_ns;
    if (c->kind == CHUNK_EOF) {
        toxic_delay_to(ti, c, c->ready_ns + (int64_t)ti->spec.a.v[A_DELAY] * 1000000);
        TOXIC_CTR_ADD(ti, closes, 1);
    }
    toxic_pass(ti, c, out);
    return true;
}

const toxic_kind toxic_slow_close = {
    .name = "slow_close",
    .attrs = {[A_DELAY] = {"delay", false, 0, TOXIC_MS_MAX}},
    .run = slow_close_run,
};
