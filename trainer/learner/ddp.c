/* ddp.c - the learner's ddp and ddp-elastic mode (ddp.h).
 *
 * What it is: every step POSTs its gradient to the syncer's barrier and
 * applies the mean it answers with the same AdamW step as the syncer; a
 * learner that lost step with it (rejoin, a missed step, non-finite
 * parameters) takes the syncer's params and AdamW state (GET
 * /v1/optimizer). What it is not: the inner step itself (learner.c).
 * Main thread only.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/err.h"
#include "common/http_client.h"
#include "common/log.h"
#include "common/parse.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "trainer/config.h"
#include "trainer/learner/ddp.h"
#include "trainer/learner/link.h"
#include "trainer/protocol.h"
#include "trainer/seal.h"

/* ---- ddp: the syncer's state ---- */

/* ddp's own state: what this learner holds of the syncer's. It lives on
 * learner_ddp_loop's stack (main thread only); a rejoin hands it to the
 * link as an argument (learner_link_held). */
typedef struct ddp_state {
    int64_t version;         /* the syncer's version of the state this learner holds (its params and AdamW
                                state equal the syncer's at that version); -1 unknown */
    char seal[SEAL_HEX + 1]; /* the syncer's seal on that state (trainer/seal.h), "" none */
} ddp_state;

/* POST /v1/join again, reporting what D says this learner holds. */
static int ddp_rejoin(learner *L, const ddp_state *D, char *err, size_t errlen)
{
    learner_link_held held = {.version = D->version, .seal = D->seal};
    return learner_link_join(L, L->http, 0, &held, err, errlen);
}

/* X-Chaosloco-Version of an answer (the syncer's version of the state it
 * describes), -1 when absent or malformed. */
static int64_t result_version(const cx_http_result *r)
{
    char vbuf[32];
    int64_t v = -1;
    if (cx_http_result_header(r, PROTO_H_VERSION, vbuf, sizeof vbuf) != 0 ||
        cx_parse_i64(vbuf, PROTO_H_VERSION, 0, INT64_MAX / 2, &v, NULL, 0) != 0)
        return -1;
    return v;
}

/* The learner now holds the state an answer describes: its version and the
 * syncer's seal on it ("" when the answer has none). */
static void took_state(ddp_state *D, const cx_http_result *r)
{
    char seal[SEAL_HEX + 2];
    D->version = result_version(r);
    if (cx_http_result_header(r, PROTO_H_SEAL, seal, sizeof seal) != 0 || !seal_well_formed(seal))
        seal[0] = 0;
    snprintf(D->seal, sizeof D->seal, "%s", seal);
}

/* Take the ddp source of truth (GET /v1/optimizer): the syncer's
 * parameters, AdamW moments and step counter, and the step it collects
 * next. A ddp learner applies the same mean gradient with the same AdamW
 * as the syncer, so from here on it stays bit-identical with it, however
 * stale its own moments were (a restart from a local checkpoint, a rejoin,
 * a step it missed, non-finite parameters). why: for the log. 0, or
 * CX_EUNAVAIL when the syncer stayed unreachable past --give-up-s or a
 * signal came; a malformed answer is retried. */
static int ddp_resync(learner *L, ddp_state *D, const char *why)
{
    size_t n = L->n;
    for (int attempt = 0;; attempt++) {
        cx_http_result r;
        char crcbuf[16], sbuf[32], abuf[32];
        uint32_t crc;
        int64_t step = -1, adam_steps = -1;
        /* who asks: a syncer restarted since our join refuses us (403/409)
         * until we rejoin and report what we hold, instead of handing us its
         * initial state over ours */
        proto_hdr h;
        char lines[PROTO_MAX_LINES][PROTO_LINE];
        const char *hdrs[PROTO_MAX_LINES + 1];
        memset(&h, 0xff, sizeof h);
        h.learner = L->o->id;
        pthread_mutex_lock(&L->mu);
        h.incarnation = L->incarnation;
        pthread_mutex_unlock(&L->mu);
        proto_hdr_format(&h, lines, hdrs);
        cx_http_result_init(&r);
        if (learner_link_call(L, L->http, "GET", "/v1/optimizer", hdrs, NULL, 0, NULL, HTTP_TIMEOUT_MS, &r) !=
            0) {
            cx_http_result_cleanup(&r);
            return CX_EUNAVAIL;
        }
        if (r.status == 403 || r.status == 409) {
            char jerr[CX_ERRLEN];
            cx_warn("GET /v1/optimizer (%s): HTTP %d %s; rejoining first", why, r.status,
                    r.body.data ? r.body.data : "");
            cx_http_result_cleanup(&r);
            int rc = ddp_rejoin(L, D, jerr, sizeof jerr);
            if (rc != 0) {
                cx_error("%s", jerr);
                return rc;
            }
            continue;
        }
        if (r.status == 200 && cx_http_result_header(&r, PROTO_H_CRC32C, crcbuf, sizeof crcbuf) == 0 &&
            proto_crc_parse(crcbuf, &crc) == 0 &&
            cx_http_result_header(&r, PROTO_H_STEP, sbuf, sizeof sbuf) == 0 &&
            cx_parse_i64(sbuf, PROTO_H_STEP, 0, INT64_MAX / 2, &step, NULL, 0) == 0 &&
            cx_http_result_header(&r, PROTO_H_ADAM_STEPS, abuf, sizeof abuf) == 0 &&
            cx_parse_i64(abuf, PROTO_H_ADAM_STEPS, 0, INT64_MAX / 2, &adam_steps, NULL, 0) == 0 &&
            proto_check_body(r.body.data, r.body.len, n * 12, crc, NULL, 0) == PROTO_OK) {
            const unsigned char *b = (const unsigned char *)r.body.data;
            proto_f32_decode(b, n, model_params(L->m));
            proto_f32_decode(b + n * 4, n, adamw_m(L->opt));
            proto_f32_decode(b + n * 8, n, adamw_v(L->opt));
            adamw_set_steps(L->opt, (uint64_t)adam_steps);
            took_state(D, &r);
            cx_http_result_cleanup(&r);
            /* Θ_base is "the global params as last received"; gcopy/gver
             * (delta chains) are left as they are, a consistent pair */
            memcpy(L->base, model_params(L->m), n * sizeof(float));
            pthread_mutex_lock(&L->mu);
            int64_t was = L->step;
            L->step = step;
            pthread_mutex_unlock(&L->mu);
            cx_info("ddp: took the syncer's parameters and optimizer state (%s): step %lld -> %lld, adam "
                    "steps %lld",
                    why, (long long)was, (long long)step, (long long)adam_steps);
            return 0;
        }
        cx_warn("bad answer to GET /v1/optimizer (%s): HTTP %d, %zu bytes; retrying", why, r.status,
                r.body.len);
        cx_http_result_cleanup(&r);
        if (*L->stop || learner_link_gave_up(L))
            return CX_EUNAVAIL;
        cx_sleep_ms(attempt < 10 ? 200 : 1000);
    }
}

/* 1 when the mean in r is for step t (X-Chaosloco-Step); a mean for any
 * other step means the syncer and this learner disagree on the step. */
static int ddp_answer_is_step(const cx_http_result *r, int64_t t)
{
    char sbuf[32];
    int64_t s = -1;
    return cx_http_result_header(r, PROTO_H_STEP, sbuf, sizeof sbuf) == 0 &&
           cx_parse_i64(sbuf, PROTO_H_STEP, 0, INT64_MAX / 2, &s, NULL, 0) == 0 && s == t;
}

/* 1 (and *step, the step the syncer collects now) when a 409 answer to a
 * gradient is the barrier's "step closed without you" ({"step": ...}), not
 * a refusal of this incarnation (reason stale_incarnation: rejoin). */
static int ddp_missed_step(const cx_http_result *r, json_int_t *step)
{
    if (learner_link_reason(r->body.data, r->body.len) == PROTO_R_STALE_INCARNATION)
        return 0;
    json_t *j = r->body.data ? json_loadb(r->body.data, r->body.len, 0, NULL) : NULL;
    json_t *s = json_object_get(j, "step");
    int missed = s != NULL;
    *step = json_integer_value(s);
    json_decref(j);
    return missed;
}

/* ---- ddp: the loop ---- */

int learner_ddp_loop(learner *L, char *err, size_t errlen)
{
    ddp_state st = {.version = -1}, *D = &st; /* nothing held yet */
    /* at start (and so after a restart from a local checkpoint) */
    if (ddp_resync(L, D, "join") != 0)
        return cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable while taking its optimizer state");
    while (learner_keep_training(L)) {
        int64_t t0 = cx_mono_ns();
        learner_compute_grads(L);
        int64_t compute_ns = cx_mono_ns() - t0;
        float *g = model_grads(L->m);
        if (learner_nan_hook(L))
            g[0] = NAN;
        proto_f32_encode(g, L->n, L->wire);
        proto_hdr h;
        char lines[PROTO_MAX_LINES][PROTO_LINE], path[96];
        const char *hdrs[PROTO_MAX_LINES + 1];
        memset(&h, 0xff, sizeof h);
        h.learner = L->o->id;
        pthread_mutex_lock(&L->mu);
        h.incarnation = L->incarnation;
        int64_t t = L->step;
        pthread_mutex_unlock(&L->mu);
        h.encoding = CONFIG_ENC_F32;
        h.crc32c = cx_crc32c(0, L->wire, L->n * 4);
        proto_hdr_format(&h, lines, hdrs);
        snprintf(path, sizeof path, "/v1/steps/%lld/gradients", (long long)t);
        int done = 0;
        while (!done && !*L->stop) {
            json_int_t s;
            cx_http_result r;
            cx_http_result_init(&r);
            if (learner_link_call(L, L->http, "POST", path, hdrs, L->wire, L->n * 4,
                                  "application/octet-stream", HTTP_TIMEOUT_MS, &r) != 0) {
                cx_http_result_cleanup(&r);
                return cx_fail(err, errlen, CX_EUNAVAIL, "syncer %s unreachable for more than %.0f s",
                               L->o->syncer_url, L->o->give_up_s);
            }
            char crcbuf[16];
            uint32_t crc;
            if (r.status == 200 && cx_http_result_header(&r, PROTO_H_CRC32C, crcbuf, sizeof crcbuf) == 0 &&
                proto_crc_parse(crcbuf, &crc) == 0 &&
                proto_check_body(r.body.data, r.body.len, L->n * 4, crc, NULL, 0) == PROTO_OK &&
                !ddp_answer_is_step(&r, t)) {
                cx_warn("ddp: the mean answered for step %lld is for another step; resyncing", (long long)t);
                cx_http_result_cleanup(&r);
                if (ddp_resync(L, D, "step mismatch") != 0)
                    return cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable while resyncing");
                done = 1;
                continue;
            } else if (r.status == 200 &&
                       cx_http_result_header(&r, PROTO_H_CRC32C, crcbuf, sizeof crcbuf) == 0 &&
                       proto_crc_parse(crcbuf, &crc) == 0 &&
                       proto_check_body(r.body.data, r.body.len, L->n * 4, crc, NULL, 0) == PROTO_OK) {
                proto_f32_decode(r.body.data, L->n, L->scratch);
                int64_t t1 = cx_mono_ns();
                adamw_step(L->opt, model_params(L->m), L->scratch, learner_lr_now(L, t));
                took_state(D, &r); /* now equal to the syncer's state at its version */
                done = 1;
                learner_after_step(L, compute_ns + (cx_mono_ns() - t1));
            } else if (r.status == 503) {
                /* the barrier is still waiting for someone: send again */
            } else if (r.status == 409 && ddp_missed_step(&r, &s)) {
                cx_warn("ddp step %lld closed without us; resyncing to step %lld", (long long)t,
                        (long long)s);
                if (ddp_resync(L, D, "missed step") != 0) {
                    cx_http_result_cleanup(&r);
                    return cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable while resyncing");
                }
                done = 1;
            } else if (r.status == 409 || r.status == 403) {
                cx_warn("syncer does not know incarnation %lld any more; rejoining",
                        (long long)h.incarnation);
                int rc = ddp_rejoin(L, D, err, errlen);
                if (rc == 0 && ddp_resync(L, D, "rejoin") != 0)
                    rc = cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable while resyncing");
                cx_http_result_cleanup(&r);
                if (rc)
                    return rc;
                done = 1;
                continue;
            } else {
                cx_warn("gradient for step %lld refused: HTTP %d %s", (long long)t, r.status,
                        r.body.data ? r.body.data : "");
                done = 1; /* skip this batch */
            }
            cx_http_result_cleanup(&r);
        }
        if (!learner_params_finite(L)) {
            cx_warn("own parameters are not finite; discarding them and taking the syncer's state");
            if (ddp_resync(L, D, "non-finite parameters") != 0)
                return cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable");
        }
        if (learner_rejoin_asked(L)) {
            int rc = ddp_rejoin(L, D, err, errlen);
            if (rc == 0 && ddp_resync(L, D, "rejoin") != 0)
                rc = cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable while resyncing");
            if (rc)
                return rc;
        }
    }
    return 0;
}
