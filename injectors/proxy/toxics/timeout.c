/* timeout.c - the `timeout` toxic: data is swallowed and, after timeout ms
 * (0 = never), the link is closed (the agent's blackhole is timeout 0).
 * The clock starts when the link starts and again on every update, as
 * Toxiproxy restarts a toxic. */
#include "injectors/proxy/toxic.h"

enum { A_TIMEOUT };

static void timeout_start(toxic_inst *ti, const toxic_spec *old, int64_t now_ns)
{
    (void)old;
    int64_t ms = (int64_t)ti->spec.a.v[A_TIMEOUT];
    ti->timer = ms > 0 ? TOXIC_TIMER_CLOSE : TOXIC_TIMER_NONE;
    ti->timer_ns = now_ns + ms * 1000000;
}

static bool timeout_run(toxic_inst *ti, chunk *c, chunk_list *out, int64_t now_ns)
{
    (void)now_ns;
    if (c->kind == CHUNK_DATA)
        toxic_drop(ti, c);
    else
        toxic_pass(ti, c, out);
    return true;
}

const toxic_kind toxic_timeout = {
    .name = "timeout",
    .attrs = {[A_TIMEOUT] = {"timeout", false, 0, TOXIC_MS_MAX}},
    .start = timeout_start,
    .run = timeout_run,
};
