/* reset_peer.c - the `reset_peer` toxic: the first input (data or EOF)
 * arms a reset (TCP RST) timeout ms later; everything from then on is
 * swallowed, as in Toxiproxy. */
#include "injectors/proxy/toxic.h"

enum { A_TIMEOUT };

typedef struct reset_peer_state {
    bool tripped; /* the reset is armed */
} reset_peer_state;
TOXIC_STATE_FITS(reset_peer_state);

static bool reset_peer_run(toxic_inst *ti, chunk *c, chunk_list *out, int64_t now_ns)
{
    if (c->kind == CHUNK_CLOSE) {
        toxic_pass(ti, c, out);
        return true;
    }
    reset_peer_state *st = TOXIC_STATE(ti, reset_peer_state);
    if (!st->tripped) {
        st->tripped = true;
        ti->timer = TOXIC_TIMER_RESET;
        ti->timer_ns = now_ns + (int64_t)ti->spec.a.v[A_TIMEOUT] * 1000000;
    }
    toxic_drop(ti, c);
    return true;
}

const toxic_kind toxic_reset_peer = {
    .name = "reset_peer",
    .attrs = {[A_TIMEOUT] = {"timeout", false, 0, TOXIC_MS_MAX}},
    .run = reset_peer_run,
    .resets = true,
};
