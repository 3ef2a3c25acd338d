/* limit_data.c - the `limit_data` toxic: bytes go through, then the link
 * is closed; the allowed prefix of the chunk that reaches the limit is
 * still delivered before the close. */
#include <stdlib.h>

#include "injectors/proxy/toxic.h"

enum { A_BYTES };

typedef struct limit_data_state {
    uint64_t passed; /* bytes let through */
    bool tripped;    /* the limit was reached */
} limit_data_state;
TOXIC_STATE_FITS(limit_data_state);

static bool limit_data_run(toxic_inst *ti, chunk *c, chunk_list *out, int64_t now_ns)
{
    (void)now_ns;
    limit_data_state *st = TOXIC_STATE(ti, limit_data_state);
    if (c->kind != CHUNK_DATA) {
        toxic_pass(ti, c, out);
        return true;
    }
    if (st->tripped) {
        toxic_drop(ti, c);
        return true;
    }
    uint64_t room = (uint64_t)ti->spec.a.v[A_BYTES] - st->passed;
    size_t n = c->len - c->off;
    if (n < room) {
        st->passed += n;
        toxic_pass(ti, c, out);
        return true;
    }
    /* reaching the limit: deliver the allowed prefix, then end the link */
    chunk *close = chunk_new(CHUNK_CLOSE, NULL, 0, c->stamp_ns, c->ready_ns);
    if (!close) {
        toxic_pass(ti, c, out);
        return false;
    }
    st->tripped = true;
    st->passed += room;
    TOXIC_CTR_ADD(ti, bytes_dropped, n - room);
    TOXIC_CTR_ADD(ti, closes, 1);
    c->len = c->off + (size_t)room;
    if (room > 0) {
        TOXIC_CTR_ADD(ti, chunks, 1);
        chunk_list_push(out, c);
    } else {
        free(c);
    }
    chunk_list_push(out, close);
    return true;
}

const toxic_kind toxic_limit_data = {
    .name = "limit_data",
    .attrs = {[A_BYTES] = {"bytes", false, 0, 1125899906842624.0}},
    .run = limit_data_run,
};
