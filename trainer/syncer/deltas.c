/* deltas.c - the syncer's deltas component (deltas.h): downstream deltas and fragment reads:
 * GET /v1/fragments/{p} and GET /v1/versions.
 *
 * Downstream deltas (diloco/decoupled, encoding != f32): each merge of
 * fragment p quantizes its update with error feedback (deltas_encode):
 * d' = Θ_new − Θ_V + r_p, d^ = decode(encode(d')), r_p = d' − d^, and the
 * canonical Θ_{V+1} = Θ_V + d^ (the f32 add learners repeat bit for bit).
 * The encoded d^ of the last DELTA_HISTORY versions are kept; a learner
 * holding V gets the chain V+1..current (delta_chain) or, when it is not
 * kept or not smaller, the full f32 fragment. Residuals and history live in
 * memory; theta (canonical) is what is checkpointed.
 * What it is not: the merge that produces a version (rounds.c calls
 * deltas_encode from round_merge).
 */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/err.h"
#include "common/http_server.h"
#include "common/log.h"
#include "common/parse.h"
#include "numerics/encoding.h"
#include "trainer/events.h"
#include "numerics/fragment.h"
#include "trainer/protocol.h"
#include "trainer/syncer/core.h"

const char *const deltas_full_reason_names[FULL_R_COUNT] = {"pull", "history", "mismatch", "size", "f32"};

/* ---- syncer: downstream deltas with error feedback ---- */

static void hist_drop_oldest(frag_hist *h)
{
    if (h->n == 0)
        return;
    h->bytes -= h->d[0].len;
    free(h->d[0].bytes);
    memmove(&h->d[0], &h->d[1], (size_t)(h->n - 1) * sizeof h->d[0]);
    h->n--;
}

void deltas_hist_clear(frag_hist *h)
{
    while (h->n > 0)
        hist_drop_oldest(h);
}

/* What holds of fragment p's history between calls (mu held): at most
 * DELTA_HISTORY deltas, versions contiguous, bytes their sum; kept only
 * with a residual (an encoded run). */
static void assert_deltas_state(const syncer *s, int p)
{
#ifndef NDEBUG
    const frag_hist *h = &s->deltas.hist[p];
    size_t bytes = 0;
    assert(h->n >= 0 && h->n <= DELTA_HISTORY);
    assert(h->n == 0 || h->resid);
    for (int i = 0; i < h->n; i++) {
        assert(i == 0 || h->d[i].version == h->d[i - 1].version + 1);
        bytes += h->d[i].len;
    }
    assert(bytes == h->bytes);
#else
    (void)s, (void)p;
#endif
}

int deltas_init(syncer *s, char *err, size_t errlen)
{
    s->deltas.hist = calloc((size_t)s->P, sizeof *s->deltas.hist);
    if (!s->deltas.hist) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        return -1;
    }
    /* error-feedback residuals of the downstream deltas: in memory only (a
     * restart resets them; the canonical theta is what is checkpointed) */
    if (!syncer_is_ddp(s) && (encoding_kind)s->cfg.encoding != ENCODING_F32)
        for (int p = 0; p < s->P; p++)
            if (!(s->deltas.hist[p].resid = calloc(fragment_length(s->ft, p), sizeof(float)))) {
                cx_fail(err, errlen, CX_ENOMEM, "out of memory");
                return -1;
            }
    return 0;
}

void deltas_cleanup(syncer *s)
{
    for (int p = 0; s->deltas.hist && p < s->P; p++) {
        deltas_hist_clear(&s->deltas.hist[p]);
        free(s->deltas.hist[p].resid);
    }
    free(s->deltas.hist);
    s->deltas.hist = NULL;
}

void deltas_forget(syncer *s, int p)
{
    frag_hist *h = &s->deltas.hist[p];
    deltas_hist_clear(h);
    if (h->resid)
        memset(h->resid, 0, fragment_length(s->ft, p) * sizeof *h->resid);
    assert_deltas_state(s, p);
}

/* Whether deltas_encode does anything for fragment p (and so needs Θ_V). */
int deltas_encodes(const syncer *s, int p)
{
    return (encoding_kind)s->cfg.encoding != ENCODING_F32 && s->deltas.hist[p].resid;
}

/* Quantize the update of fragment p (mu held). old = Θ_V, th = the exact
 * Θ_new on entry; on return th = Θ_{V+1} = Θ_V + d^, the canonical value
 * every learner reproduces by the same f32 add, where d^ = decode(encode(
 * Θ_new − Θ_V + r)) and the residual r keeps what the encoding lost. The
 * encoded d^ is kept (DELTA_HISTORY deltas, at most DELTA_HISTORY_F32X f32
 * fragments of bytes). f32 runs and ddp modes: nothing to do. */
void deltas_encode(syncer *s, int p, const float *old, float *th, int64_t version)
{
    frag_hist *h = &s->deltas.hist[p];
    encoding_kind enc = (encoding_kind)s->cfg.encoding;
    if (!deltas_encodes(s, p))
        return;
    size_t len = fragment_length(s->ft, p), bytes = encoding_size(enc, len);
    float *d = malloc(len * sizeof *d), *dh = malloc(len * sizeof *dh);
    uint8_t *wire = malloc(bytes);
    char why[CX_ERRLEN];
    int ok = d && dh && wire;
    if (ok) {
        for (size_t i = 0; i < len; i++)
            d[i] = (th[i] - old[i]) + h->resid[i];
        ok = encoding_encode(enc, d, len, wire, bytes, why, sizeof why) == 0 &&
             encoding_decode(enc, wire, bytes, dh, len, why, sizeof why) == 0;
        if (!ok)
            cx_warn("fragment %d version %lld: update not encodable (%s); sending it in f32", p,
                    (long long)version, why);
    } else {
        cx_warn("fragment %d version %lld: out of memory encoding the update; sending it in f32", p,
                (long long)version);
    }
    if (!ok) {
        /* th stays exact; learners take the full fragment (reason history) */
        deltas_hist_clear(h);
        memset(h->resid, 0, len * sizeof *h->resid);
        free(d), free(dh), free(wire);
        assert_deltas_state(s, p);
        return;
    }
    for (size_t i = 0; i < len; i++) {
        h->resid[i] = d[i] - dh[i];
        th[i] = old[i] + dh[i];
    }
    free(d), free(dh);
    if (h->n > 0 && h->d[h->n - 1].version != version - 1)
        deltas_hist_clear(h); /* never a gap in the chain */
    if (h->n == DELTA_HISTORY)
        hist_drop_oldest(h);
    while (h->n > 0 && h->bytes + bytes > (size_t)DELTA_HISTORY_F32X * len * 4)
        hist_drop_oldest(h);
    h->d[h->n++] = (delta_rec){version, wire, bytes};
    h->bytes += bytes;
    assert_deltas_state(s, p);
}

/* ---- syncer: GET /v1/fragments/{p} ---- */

/* 0/1 query flag: absent = 0. */
static int query_flag(const cx_http_req *req, const char *name, int64_t *out, char *why, size_t whylen)
{
    const char *q = cx_http_query(req, name);
    *out = 0;
    return q ? cx_parse_i64(q, name, 0, 1, out, why, whylen) : 0;
}

/* The chain of kept deltas V+1..cur of fragment p as one body (mu held).
 * NULL (and *reason) when it cannot or should not be sent. */
static uint8_t *delta_chain(syncer *s, int p, int64_t from, int64_t cur, size_t *blen, int *count,
                            full_reason *reason)
{
    frag_hist *h = &s->deltas.hist[p];
    size_t len = fragment_length(s->ft, p), total = 0;
    if ((encoding_kind)s->cfg.encoding == ENCODING_F32 || !h->resid) {
        *reason = FULL_UNENCODED;
        return NULL;
    }
    if (h->n == 0 || h->d[h->n - 1].version != cur || h->d[0].version > from + 1) {
        *reason = FULL_HISTORY;
        return NULL;
    }
    int first = h->n - (int)(cur - from);
    for (int i = first; i < h->n; i++)
        total += PROTO_DELTA_REC_HDR + h->d[i].len;
    if (total >= len * 4) {
        *reason = FULL_SIZE;
        return NULL;
    }
    uint8_t *body = malloc(total), *o = body;
    if (!body) {
        *reason = FULL_SIZE;
        return NULL;
    }
    for (int i = first; i < h->n; i++) {
        proto_delta_put_hdr(o, h->d[i].version, (uint32_t)h->d[i].len);
        memcpy(o + PROTO_DELTA_REC_HDR, h->d[i].bytes, h->d[i].len);
        o += PROTO_DELTA_REC_HDR + h->d[i].len;
    }
    *blen = total;
    *count = h->n - first;
    return body;
}

/* deltas_route_fragment_get, step 1: the query ?newer-than=V&wait-ms=T&delta=0|1&resync=0|1
 * into the out parameters (left as they are when absent). 0, or -1 with a
 * 400 in resp. */
static int fragment_get_query(const cx_http_req *req, cx_http_resp *resp, int64_t *newer, int64_t *wait_ms,
                              int64_t *want_delta, int64_t *resync)
{
    char why[CX_ERRLEN];
    const char *q;
    if ((q = cx_http_query(req, "newer-than")) &&
        cx_parse_i64(q, "newer-than", 0, INT64_MAX / 2, newer, why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "%s", why);
        return -1;
    }
    if ((q = cx_http_query(req, "wait-ms")) &&
        cx_parse_i64(q, "wait-ms", 0, LONG_POLL_MAX_MS, wait_ms, why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "%s", why);
        return -1;
    }
    if (query_flag(req, "delta", want_delta, why, sizeof why) != 0 ||
        query_flag(req, "resync", resync, why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "%s", why);
        return -1;
    }
    if (*want_delta && *newer < 0) {
        cx_http_reply_error(resp, 400, "delta=1 needs newer-than=V (the version the learner holds)");
        return -1;
    }
    return 0;
}

/* deltas_route_fragment_get, step 2: the long poll: wait (mu held, released while
 * waiting) until fragment p is newer than `newer`, wait_ms pass or the
 * syncer stops; not at all when the caller is over its share of waits
 * (holds_take). */
static void fragment_wait_newer(syncer *s, const cx_http_req *req, int64_t p, int64_t newer, int64_t wait_ms)
{
    int b = holds_take(s, req);
    int64_t end = cx_mono_ms() + wait_ms;
    while (b >= 0 && !s->stopping && s->versions[p] <= newer)
        if (cx_cond_wait_until_ms(&s->frag_cv, &s->mu, end) == CX_ETIMEDOUT)
            break;
    holds_drop(s, b);
}

/* deltas_route_fragment_get, step 3: a pull by a current learner (h names it) of
 * fragment p at version: whether the merged value holds its own pending
 * contribution. 1 when it was recorded (the pull event is due), 0 for an
 * anonymous or stale caller (mu held). */
static int fragment_note_pull(syncer *s, int64_t p, const proto_hdr *h, int64_t version)
{
    int record = 0;
    if (h->learner >= 0 && h->incarnation > 0) {
        int slot;
        if (members_check(s, h->learner, h->incarnation, &slot) == PROTO_OK) {
            members_touch(s, slot);
            record = 1;
            /* a merged value it takes after contributing to p: does it hold its own work? */
            int64_t own = rounds_own_take(s, slot, p);
            if (own >= 0)
                members_note_adopted(s, slot, own > 0 && own <= version);
        }
    }
    return record;
}

/* A read of fragment p (mu held); see deltas.h. */
void deltas_read(syncer *s, int p, const proto_hdr *h, int64_t newer, int want_delta, int resync, float *vals,
                 deltas_answer *out)
{
    size_t len = fragment_length(s->ft, p);
    *out = (deltas_answer){.version = s->versions[p], .reason = resync ? FULL_MISMATCH : FULL_PULL};
    if (newer >= 0 && out->version <= newer)
        return;
    out->newer = 1;
    fragment_gather(s->ft, p, s->theta, vals);
    if (want_delta && !resync)
        out->chain = delta_chain(s, p, newer, out->version, &out->chain_len, &out->chain_n, &out->reason);
    out->record = fragment_note_pull(s, p, h, out->version);
    if (out->chain) {
        s->bytes_out += (int64_t)out->chain_len;
        s->deltas.bytes_out_delta += (int64_t)out->chain_len;
        s->deltas.answers_delta++;
        s->deltas.answers_delta_versions += out->chain_n;
    } else {
        s->bytes_out += (int64_t)len * 4;
        s->deltas.bytes_out_full += (int64_t)len * 4;
        s->deltas.answers_full[out->reason]++;
    }
}

/* The current fragment p: full f32, or with ?newer-than=V&delta=1 the
 * chain of encoded deltas V+1..current when it is kept (see
 * docs/internals/syncer.md "Downstream deltas"). */
int deltas_route_fragment_get(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t p, newer = -1, wait_ms = 0, want_delta = 0, resync = 0;
    char why[CX_ERRLEN];
    proto_hdr h;
    if (syncer_api_path_int(req->params[0], s->P - 1, &p) != 0) {
        cx_http_reply_error(resp, 404, "no fragment '%s' (fragments are 0..%d)", req->params[0], s->P - 1);
        return 0;
    }
    if (fragment_get_query(req, resp, &newer, &wait_ms, &want_delta, &resync) != 0)
        return 0;
    /* Learner headers are optional here: with them the pull is recorded. */
    if (proto_hdr_parse(&h, syncer_api_req_header, req, 0, why, sizeof why) != 0)
        h.learner = h.incarnation = -1;
    size_t len = fragment_length(s->ft, p);
    float *tmp = malloc(len * sizeof *tmp);
    if (!tmp) {
        cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    if (newer >= 0 && wait_ms > 0)
        fragment_wait_newer(s, req, p, newer, wait_ms);
    if (rebuild_gate(s, resp) || rebuild_stale_pull(s, &h, resp)) {
        pthread_mutex_unlock(&s->mu);
        free(tmp);
        return 0;
    }
    deltas_answer a; /* a.chain is ours */
    deltas_read(s, (int)p, &h, newer, (int)want_delta, (int)resync, tmp, &a);
    pthread_mutex_unlock(&s->mu);
    if (!a.newer) {
        free(tmp);
        resp->status = 204;
        cx_http_add_header(resp, PROTO_H_VERSION, "%lld", (long long)a.version);
        return 0;
    }
    uint32_t frag_crc = proto_f32_crc(tmp, len);
    if (a.record)
        events_emit(s->ev, "pull",
                    json_pack("{s:I, s:I, s:I, s:I, s:s, s:I}", "learner", (json_int_t)h.learner,
                              "incarnation", (json_int_t)h.incarnation, "fragment", (json_int_t)p, "version",
                              (json_int_t)a.version, "kind",
                              a.chain ? "delta" : deltas_full_reason_names[a.reason], "delta_from",
                              (json_int_t)(a.chain ? newer : -1)));
    if (a.chain) {
        cx_http_reply_bytes(resp, 200, "application/octet-stream", a.chain, a.chain_len);
        cx_http_add_header(resp, PROTO_H_CRC32C, "%08x", cx_crc32c(0, a.chain, a.chain_len));
        cx_http_add_header(resp, PROTO_H_DELTA_FROM, "%lld", (long long)newer);
        cx_http_add_header(resp, PROTO_H_ENCODING, "%s", config_encoding_name(s->cfg.encoding));
        free(a.chain);
    } else {
        unsigned char *wire = malloc(len * 4);
        if (!wire) {
            free(tmp);
            cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
            return 0;
        }
        proto_f32_encode(tmp, len, wire);
        cx_http_reply_bytes(resp, 200, "application/octet-stream", wire, len * 4);
        cx_http_add_header(resp, PROTO_H_CRC32C, "%08x", frag_crc);
        cx_http_add_header(resp, PROTO_H_ENCODING, "f32");
        free(wire);
    }
    cx_http_add_header(resp, PROTO_H_VERSION, "%lld", (long long)a.version);
    cx_http_add_header(resp, PROTO_H_FRAGMENT, "%lld", (long long)p);
    cx_http_add_header(resp, PROTO_H_FRAGMENT_CRC32C, "%08x", frag_crc);
    char seal[SEAL_HEX + 1];
    if (s->access.seal.set && !syncer_is_ddp(s) &&
        seal_make(&s->access.seal, fragment_table_digest(s->ft), (int)p, a.version, frag_crc, seal) == 0)
        cx_http_add_header(resp, PROTO_H_SEAL, "%s", seal);
    free(tmp);
    return 0;
}

/* ---- syncer: GET /v1/versions ---- */

/* Every fragment's version and the merge counter; with
 * ?merges-above=M&wait-ms=T it long-polls until some merge happened after
 * the learner's last look (one wait for all the fragments it waits on). */
int deltas_route_versions(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t above = -1, wait_ms = 0;
    char why[CX_ERRLEN];
    const char *q;
    if ((q = cx_http_query(req, "merges-above")) &&
        cx_parse_i64(q, "merges-above", 0, INT64_MAX / 2, &above, why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "%s", why);
        return 0;
    }
    if ((q = cx_http_query(req, "wait-ms")) &&
        cx_parse_i64(q, "wait-ms", 0, LONG_POLL_MAX_MS, &wait_ms, why, sizeof why) != 0) {
        cx_http_reply_error(resp, 400, "%s", why);
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    int b = above >= 0 && wait_ms > 0 ? holds_take(s, req) : -1;
    int64_t end = cx_mono_ms() + wait_ms;
    while (b >= 0 && !s->stopping && s->merges <= above)
        if (cx_cond_wait_until_ms(&s->frag_cv, &s->mu, end) == CX_ETIMEDOUT)
            break;
    holds_drop(s, b);
    json_t *v = json_array();
    for (int p = 0; p < s->P; p++)
        json_array_append_new(v, json_integer(s->versions[p]));
    json_t *o = json_pack("{s:o, s:I}", "versions", v, "merges", (json_int_t)s->merges);
    pthread_mutex_unlock(&s->mu);
    cx_http_reply_json(resp, 200, o);
    return 0;
}
