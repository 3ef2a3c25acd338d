/* rounds_route.c - POST /v1/fragments/{p}/contributions (rounds.h): the
 * route of the rounds component.
 *
 * What it is: the request's path, headers and body checked and decoded,
 * rounds_contribute and rounds_check under s->mu, the answer and the
 * contribution events. What it is not: a writer of s->rounds; the
 * admission, the round's state machine and the merge are rounds.c's.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/http_server.h"
#include "common/log.h"
#include "numerics/encoding.h"
#include "numerics/fragment.h"
#include "trainer/events.h"
#include "trainer/protocol.h"
#include "trainer/syncer/core.h"

/* rounds_route_contribution, step 1: the fragment the path names (*pp), the headers
 * (*h) and the body checked and decoded into a malloc'd *delta of the
 * fragment's length (the caller owns it). 0, or -1 when resp already holds
 * the refusal (counted as a reject where it is one). Takes no lock. */
static int contribution_decode(syncer *s, const cx_http_req *req, cx_http_resp *resp, int64_t *pp,
                               proto_hdr *h, float **delta_out)
{
    char why[CX_ERRLEN];
    if (syncer_api_path_int(req->params[0], s->P - 1, pp) != 0) {
        cx_http_reply_error(resp, 404, "no fragment '%s' (fragments are 0..%d)", req->params[0], s->P - 1);
        return -1;
    }
    if (syncer_is_ddp(s)) {
        cx_http_reply_error(resp, 409,
                            "mode %s takes gradients at /v1/steps/{t}/gradients, not contributions",
                            syncer_mode_name(s));
        return -1;
    }
    if (proto_hdr_parse(h, syncer_api_req_header, req, PROTO_NEED_CONTRIBUTION, why, sizeof why) != 0) {
        members_reject(s, resp, PROTO_R_BAD_HEADER, h->learner, h->incarnation, *pp, why, 0);
        return -1;
    }
    if (h->fragment != *pp) {
        snprintf(why, sizeof why, "header %s is %lld but the path names fragment %lld", PROTO_H_FRAGMENT,
                 (long long)h->fragment, (long long)*pp);
        members_reject(s, resp, PROTO_R_BAD_HEADER, h->learner, h->incarnation, *pp, why, 0);
        return -1;
    }
    /* the syncer numbers the rounds: a learner that names one is not ours
     * (an older learner, or one trying to steer the rounds) */
    if (h->round >= 0) {
        snprintf(
            why, sizeof why,
            "header %s: rounds are numbered by the syncer, a contribution names none (the 202 answer says "
            "which round it joined)",
            PROTO_H_ROUND);
        members_reject(s, resp, PROTO_R_BAD_HEADER, h->learner, h->incarnation, *pp, why, 0);
        return -1;
    }
    size_t len = fragment_length(s->ft, (int)*pp);
    size_t want = encoding_size((encoding_kind)h->encoding, len);
    proto_reason r = proto_check_body(req->body, req->body_len, want, h->crc32c, why, sizeof why);
    if (r != PROTO_OK) {
        members_reject(s, resp, r, h->learner, h->incarnation, *pp, why, 0);
        return -1;
    }
    float *delta = malloc(len * sizeof *delta);
    if (!delta) {
        cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
        return -1;
    }
    if (encoding_decode((encoding_kind)h->encoding, (const uint8_t *)req->body, req->body_len, delta, len,
                        why, sizeof why) != 0 ||
        proto_first_nonfinite(delta, len) >= 0) {
        free(delta);
        members_reject(s, resp, PROTO_R_NONFINITE, h->learner, h->incarnation, *pp,
                       why[0] ? why : "non-finite value", 0);
        return -1;
    }
    *delta_out = delta;
    return 0;
}

int rounds_route_contribution(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t p;
    proto_hdr h;
    float *delta;
    if (contribution_decode(s, req, resp, &p, &h, &delta) != 0)
        return 0;
    pthread_mutex_lock(&s->mu);
    if (rebuild_gate(s, resp)) {
        pthread_mutex_unlock(&s->mu);
        free(delta);
        return 0;
    }
    rounds_contribution c;
    proto_reason r = rounds_contribute(s, (int)p, &h, delta, req->body_len, &c);
    if (r != PROTO_OK) {
        members_reject(s, resp, r, h.learner, h.incarnation, p, c.why, 1);
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    pthread_mutex_unlock(&s->mu);
    /* the events go out before a merge they may trigger, so the log reads in order */
    if (c.factor < 1.0)
        events_emit(s->ev, "contribution_clipped",
                    json_pack("{s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:s}", "learner", (json_int_t)h.learner,
                              "incarnation", (json_int_t)h.incarnation, "fragment", (json_int_t)p, "steps",
                              (json_int_t)h.steps, "norm", c.norm_in, "bound", c.limit, "factor", c.factor,
                              "why", c.bound_why));
    events_emit(s->ev, "contribution",
                json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:I, s:I}",
                          "learner", (json_int_t)h.learner, "incarnation", (json_int_t)h.incarnation,
                          "fragment", (json_int_t)p, "base_version", (json_int_t)h.base_version, "tokens",
                          (json_int_t)h.tokens, "steps", (json_int_t)h.steps, "encoding",
                          config_encoding_name(h.encoding), "bytes", (json_int_t)req->body_len, "round",
                          (json_int_t)c.round, "lag", (json_int_t)c.lag, "step", (json_int_t)h.step,
                          "update_norm", c.norm, "norm_in", c.norm_in, "weight_tokens",
                          (json_int_t)c.w_tokens, "weight_steps", (json_int_t)c.w_steps));
    pthread_mutex_lock(&s->mu);
    rounds_check(s, (int)p, cx_mono_ms());
    pthread_mutex_unlock(&s->mu);
    /* one round of p is open at a time and each merge is one version: the
     * round joined merges into version + 1 (round_merge; a rebuild that
     * drops held contributions moves versions and makes the learner rejoin) */
    cx_http_reply_json(resp, 202,
                       json_pack("{s:I, s:I, s:I, s:I}", "round", (json_int_t)c.round, "fragment",
                                 (json_int_t)p, "version", (json_int_t)c.version, "merges_into",
                                 (json_int_t)(c.version + 1)));
    return 0;
}
