/* latency.c - the `latency` toxic: every data chunk leaves latency +-
 * jitter ms after its timestamp (each chunk drawn on its own; the chain
 * never reorders, so a short delay after a long one waits for it).
 *
 * As in Toxiproxy, the timestamp is when the proxy read the chunk, moved
 * on by every latency stage it passed: two stacked 100 ms toxics delay it
 * 200 ms, while back-to-back chunks do not add up their delays, and a
 * chunk that reaches the stage late (behind a bandwidth toxic) is not
 * held again for the time it already waited. */
#include "injectors/proxy/toxic.h"

enum { A_LATENCY, A_JITTER };

static bool latency_run(toxic_inst *ti, chunk *c, chunk_list *out, int64_t now_ns)
{
    (void)now_ns;
    if (c->kind == CHUNK_DATA) {
        int64_t d_ms = (int64_t)ti->spec.a.v[A_LATENCY] + toxic_rng_pm(ti, (int64_t)ti->spec.a.v[A_JITTER]);
        c->stamp_ns += (d_ms > 0 ? d_ms : 0) * 1000000;
        toxic_delay_to(ti, c, c->stamp_ns);
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
