/* latency.c - the `latency` toxic: every data chunk leaves latency +-
 * jitter ms after its arrival (each chunk drawn on its own; the chain never
 * reorders, so a short delay after a long one waits for it). */
#include "injectors/proxy/toxic.h"

enum { A_LATENCY, A_JITTER };

static bool latency_run(toxic_inst *ti, chunk *c, chunk_list *out, int64_t now_ns)
{
    (void)now_ns;
    if (c->kind == CHUNK_DATA) {
        int64_t d_ms = (int64_t)ti->spec.a.v[A_LATENCY] + toxic_rng_pm(ti, (int64_t)ti->spec.a.v[A_JITTER]);
        toxic_delay_to(ti, c, c->arrival_ns + (d_ms > 0 ? d_ms : 0) * 1000000);
    }
    toxic_pass(ti, c, out);
    return true;
}

const toxic_kind toxic_latency = {
    .name = "latency",
    .attrs =
        {[A_LATENCY] = {"latency", false, 0, TOXIC_MS_MAX}, [A_JITTER] = {"jitter", false, 0, TOXIC_MS_MAX}},
    .run = latency_run,
};
