/* ddp.c - the syncer's ddp component (ddp.h), the barrier: POST /v1/steps/{t}/gradients,
 * step completion and deadline, GET /v1/optimizer (ddp modes).
 *
 * ddp steps: step t collects one gradient per learner; it completes when
 * every expected learner has sent one (ddp: all M; ddp-elastic: every live
 * learner, or at the deadline after the first arrival with whoever came:
 * elastic_deadline_ms, or when that is 0 twice the median of the recent
 * compute times, each the gap between a step's completion and the first
 * gradient of the next — so the deadline follows the machine's speed and
 * a dead learner's missed steps do not inflate it). Completion averages, applies AdamW to the global
 * parameters (the source of truth for eval and rejoin) and wakes the waiting handlers, which answer the mean;
 * each learner applies the same AdamW step.
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
#include "trainer/events.h"
#include "numerics/fragment.h"
#include "numerics/merge.h"
#include "numerics/optim.h"
#include "trainer/protocol.h"
#include "trainer/syncer/core.h"

/* ---- syncer: ddp steps ---- */

/* The seal of the ddp state at the current version (mu held): each
 * fragment's CRC32C over its params | AdamW m | v, gathered as a learner
 * gathers its copy (trainer/learner/link.c state_gather), under one seal
 * (seal_make_state). "" without a key or memory. */
static void ddp_seal_state(const syncer *s, char out[SEAL_HEX + 1])
{
    out[0] = 0;
    if (!s->access.seal.set)
        return;
    size_t maxlen = 0;
    for (int p = 0; p < s->P; p++)
        maxlen = fragment_length(s->ft, p) > maxlen ? fragment_length(s->ft, p) : maxlen;
    float *tmp = malloc(3 * maxlen * sizeof *tmp);
    uint32_t *crc = malloc((size_t)s->P * sizeof *crc);
    for (int p = 0; tmp && crc && p < s->P; p++) {
        size_t len = fragment_length(s->ft, p);
        fragment_gather(s->ft, p, s->theta, tmp);
        fragment_gather(s->ft, p, adamw_m(s->opt), tmp + len);
        fragment_gather(s->ft, p, adamw_v(s->opt), tmp + 2 * len);
        crc[p] = proto_f32_crc(tmp, 3 * len);
    }
    if (tmp && crc)
        (void)seal_make_state(&s->access.seal, fragment_table_digest(s->ft), s->versions[0], crc, s->P, out);
    free(tmp);
    free(crc);
}

/* What holds of s->ddp between calls (mu held): the step being collected
 * follows the last completed one (or none since the start, a restore or a
 * rebuild); gradients in the sum only while a step is open, with its first
 * arrival's time; buffers exactly in ddp modes. */
static void assert_ddp_state(const syncer *s)
{
#ifndef NDEBUG
    const syncer_ddp *d = &s->ddp;
    assert(d->step >= 0 && (d->mean_step == -1 || d->mean_step == d->step - 1));
    assert(d->count >= 0 && d->count <= MAX_LEARNERS);
    assert((d->count == 0) == (d->first_ms == 0));
    assert(d->ncompute >= 0);
    assert(syncer_is_ddp(s) ? d->sum && d->mean && d->mean_wire : !d->sum && !d->mean && d->count == 0);
#else
    (void)s;
#endif
}

static void ddp_complete(syncer *s, const char *why)
{
    int64_t t = s->ddp.step;
    int count = s->ddp.count;
    float inv = 1.0f / (float)count;
    for (size_t i = 0; i < s->n; i++)
        s->ddp.mean[i] = s->ddp.sum[i] * inv;
    float lr =
        optim_lr_at(t, s->cfg.warmup, s->cfg.steps, (float)s->cfg.inner_lr, (float)(s->cfg.inner_lr * 0.1));
    adamw_step(s->opt, s->theta, s->ddp.mean, lr);
    proto_f32_encode(s->ddp.mean, s->n, s->ddp.mean_wire);
    s->ddp.mean_crc = cx_crc32c(0, s->ddp.mean_wire, s->n * 4);
    s->ddp.mean_step = t;
    s->ddp.step = t + 1;
    s->ddp.count = 0;
    s->ddp.first_ms = 0;
    s->ddp.done_ms = cx_mono_ms();
    memset(s->ddp.sum, 0, s->n * sizeof *s->ddp.sum);
    for (int p = 0; p < s->P; p++)
        s->versions[p]++;
    ddp_seal_state(s, s->ddp.seal); /* what a learner holds once it applied this mean */
    s->ddp.seal_version = s->versions[0];
    assert_ddp_state(s);

    json_t *parts = json_array();
    int64_t ids[MAX_LEARNERS];
    int k = 0;
    for (int i = 0; i < MAX_LEARNERS; i++) {
        const learner_rec *l = &s->members.learners[i];
        if (l->id < 0 || l->incarnation == 0)
            continue;
        if (l->ddp_arrived == t) {
            ids[k++] = l->id;
            json_array_append_new(parts,
                                  json_pack("{s:I, s:I, s:f, s:I, s:I}", "learner", (json_int_t)l->id,
                                            "incarnation", (json_int_t)l->incarnation, "weight", 1.0 / count,
                                            "tokens", (json_int_t)s->cfg.batch, "steps", (json_int_t)1));
        } else if (l->state != LS_LEFT) {
            members_note_ddp_dropped(s, i, t);
            events_emit(s->ev, "drop",
                        json_pack("{s:I, s:I, s:s, s:I}", "learner", (json_int_t)l->id, "incarnation",
                                  (json_int_t)l->incarnation, "reason",
                                  l->state == LS_ABSENT ? "absent" : "deadline", "step", (json_int_t)t));
        }
    }
    s->tokens_merged += (int64_t)count * s->cfg.batch;
    /* bytes: the step's gradients in (ddp has no contribution events) */
    events_emit(s->ev, "merge",
                json_pack("{s:i, s:I, s:I, s:o, s:f, s:f, s:s, s:s, s:I}", "fragment", -1, "version",
                          (json_int_t)s->versions[0], "step", (json_int_t)t, "participants", parts,
                          "grace_ms", 0.0, "update_norm", merge_l2norm(s->ddp.mean, s->n), "mode",
                          syncer_mode_name(s), "trigger", why, "bytes",
                          (json_int_t)((int64_t)count * (int64_t)s->n * 4)));
    if (t % 50 == 0)
        cx_info("ddp step=%lld participants=%d trigger=%s lr=%.3g", (long long)t, count, why, lr);
    rounds_note_merge(s, -1, s->versions[0], ids, k);
    pthread_cond_broadcast(&s->step_cv);
    pthread_cond_broadcast(&s->frag_cv);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int ddp_init(syncer *s, char *err, size_t errlen)
{
    s->ddp.mean_step = -1;
    if (!syncer_is_ddp(s))
        return 0;
    s->ddp.sum = calloc(s->n, sizeof(float));
    s->ddp.mean = calloc(s->n, sizeof(float));
    s->ddp.mean_wire = malloc(s->n * 4);
    if (!s->ddp.sum || !s->ddp.mean || !s->ddp.mean_wire) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        return -1;
    }
    return 0;
}

void ddp_cleanup(syncer *s)
{
    free(s->ddp.sum), free(s->ddp.mean), free(s->ddp.mean_wire);
}

void ddp_restart_at(syncer *s, int64_t step)
{
    s->ddp.step = step;
    if (s->ddp.sum)
        memset(s->ddp.sum, 0, s->n * sizeof *s->ddp.sum);
    s->ddp.count = 0;
    s->ddp.first_ms = s->ddp.done_ms = 0;
    s->ddp.mean_step = -1;
    assert_ddp_state(s);
}

/* ms a ddp-elastic step waits after its first gradient (see the top). */
int64_t ddp_deadline_ms(const syncer *s)
{
    if (s->cfg.elastic_deadline_ms > 0)
        return s->cfg.elastic_deadline_ms;
    int n = s->ddp.ncompute < DDP_COMPUTE_SAMPLES ? (int)s->ddp.ncompute : DDP_COMPUTE_SAMPLES;
    if (n < DDP_AUTO_MIN_SAMPLES)
        return DDP_AUTO_INITIAL_MS;
    int64_t v[DDP_COMPUTE_SAMPLES];
    memcpy(v, s->ddp.compute_ms, (size_t)n * sizeof v[0]);
    qsort(v, (size_t)n, sizeof v[0], cmp_i64);
    int64_t d = 2 * v[n / 2];
    return d < DDP_AUTO_FLOOR_MS ? DDP_AUTO_FLOOR_MS : d;
}

void ddp_check(syncer *s, int64_t now)
{
    if (s->ddp.count == 0)
        return;
    if (s->ddp.count >= members_barrier_need(s))
        ddp_complete(s, "barrier");
    else if (s->cfg.mode == CONFIG_MODE_DDP_ELASTIC && now - s->ddp.first_ms >= ddp_deadline_ms(s))
        ddp_complete(s, "deadline");
}

ddp_gradient_verdict ddp_gradient(syncer *s, int slot, const proto_hdr *h, int64_t t, const float *g,
                                  double factor, double l2_in)
{
    const learner_rec *l = &s->members.learners[slot];
    if (t == s->ddp.mean_step && l->ddp_arrived == t)
        return DDP_GRAD_MEAN; /* a retry after its step completed: answer the mean again */
    if (t != s->ddp.step)
        return t < s->ddp.step ? DDP_GRAD_BEHIND : DDP_GRAD_AHEAD;
    if (l->ddp_arrived != t) {
        for (size_t i = 0; i < s->n; i++)
            s->ddp.sum[i] += g[i];
        members_note_gradient(s, slot, t, factor < 1.0);
        s->accepted_total++;
        if (factor < 1.0) { /* counted and logged once per step, not per retry */
            rounds_note_clipped(s);
            events_emit(s->ev, "gradient_clipped",
                        json_pack("{s:I, s:I, s:I, s:f, s:f, s:f}", "learner", (json_int_t)h->learner,
                                  "incarnation", (json_int_t)h->incarnation, "step", (json_int_t)t, "norm",
                                  l2_in, "bound", s->cfg.grad_clip * GUARD_GRAD_SLACK, "factor", factor));
        }
        if (s->ddp.count++ == 0) {
            s->ddp.first_ms = cx_mono_ms();
            if (s->ddp.done_ms > 0)
                s->ddp.compute_ms[s->ddp.ncompute++ % DDP_COMPUTE_SAMPLES] = s->ddp.first_ms - s->ddp.done_ms;
        }
        assert_ddp_state(s);
    }
    ddp_check(s, cx_mono_ms());
    return DDP_GRAD_ADDED;
}

ddp_gradient_verdict ddp_outcome(const syncer *s, int slot, int64_t t, int64_t inc)
{
    const learner_rec *l = &s->members.learners[slot];
    if (s->ddp.mean_step == t && l->ddp_arrived == t && l->incarnation == inc)
        return DDP_GRAD_MEAN;
    return s->ddp.mean_step >= t ? DDP_GRAD_BEHIND : DDP_GRAD_ADDED;
}

/* ---- syncer: POST /v1/steps/{t}/gradients (ddp modes) ---- */

static void reply_mean(syncer *s, cx_http_resp *resp, int64_t t)
{
    char crchex[9];
    proto_crc_format(s->ddp.mean_crc, crchex);
    s->bytes_out += (int64_t)s->n * 4;
    cx_http_reply_bytes(resp, 200, "application/octet-stream", s->ddp.mean_wire, s->n * 4);
    cx_http_add_header(resp, PROTO_H_STEP, "%lld", (long long)t);
    cx_http_add_header(resp, PROTO_H_CRC32C, "%s", crchex);
    cx_http_add_header(resp, PROTO_H_VERSION, "%lld", (long long)s->versions[0]);
    if (s->ddp.seal[0] && s->ddp.seal_version == s->versions[0])
        cx_http_add_header(resp, PROTO_H_SEAL, "%s", s->ddp.seal);
}

static void reply_step_conflict(syncer *s, cx_http_resp *resp, int64_t t, const char *what)
{
    cx_http_reply_problem(
        resp, 409, NULL, json_pack("{s:I, s:I}", "step", (json_int_t)s->ddp.step, "requested", (json_int_t)t),
        "%s", what);
}

/* A gradient's size (guard.h): a learner clips its gradient to the
 * run's --grad-clip before it sends it (learner_compute_grads), so one
 * above that (by more than float rounding) is not an honest gradient: g is
 * scaled down to the clip, never refused. Returns the factor applied (1:
 * none) and the norm before it in *l2. A run with --grad-clip 0 bounds
 * nothing here (docs/security.md). */
static double gradient_bound(const syncer *s, float *g, double *l2)
{
    *l2 = 0;
    if (s->cfg.grad_clip <= 0)
        return 1.0;
    *l2 = guard_l2(g, s->n);
    double factor = guard_clip_factor(*l2, s->cfg.grad_clip * GUARD_GRAD_SLACK);
    if (factor >= 1.0)
        return 1.0;
    for (size_t i = 0; i < s->n; i++)
        g[i] = (float)((double)g[i] * factor);
    return factor;
}

int ddp_route_gradient(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t t;
    proto_hdr h;
    char why[CX_ERRLEN];
    int slot;
    if (!syncer_is_ddp(s)) {
        cx_http_reply_error(resp, 409, "mode %s takes contributions, not per-step gradients",
                            syncer_mode_name(s));
        return 0;
    }
    if (syncer_api_path_int(req->params[0], INT64_MAX / 2, &t) != 0) {
        cx_http_reply_error(resp, 404, "bad step '%s'", req->params[0]);
        return 0;
    }
    if (proto_hdr_parse(&h, syncer_api_req_header, req, PROTO_NEED_GRADIENT, why, sizeof why) != 0) {
        members_reject(s, resp, PROTO_R_BAD_HEADER, h.learner, h.incarnation, -1, why, 0);
        return 0;
    }
    if (h.encoding >= 0 && h.encoding != CONFIG_ENC_F32) {
        members_reject(s, resp, PROTO_R_BAD_HEADER, h.learner, h.incarnation, -1, "ddp gradients are f32", 0);
        return 0;
    }
    proto_reason r = proto_check_body(req->body, req->body_len, s->n * 4, h.crc32c, why, sizeof why);
    if (r != PROTO_OK) {
        members_reject(s, resp, r, h.learner, h.incarnation, -1, why, 0);
        return 0;
    }
    float *g = malloc(s->n * sizeof *g);
    if (!g) {
        cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
        return 0;
    }
    proto_f32_decode(req->body, s->n, g);
    ptrdiff_t bad = proto_first_nonfinite(g, s->n);
    if (bad >= 0) {
        free(g);
        snprintf(why, sizeof why, "gradient element %td is not finite", bad);
        members_reject(s, resp, PROTO_R_NONFINITE, h.learner, h.incarnation, -1, why, 0);
        return 0;
    }
    double l2_in, factor = gradient_bound(s, g, &l2_in);
    pthread_mutex_lock(&s->mu);
    s->bytes_in += (int64_t)req->body_len;
    r = members_check(s, h.learner, h.incarnation, &slot);
    if (r != PROTO_OK) {
        free(g);
        snprintf(why, sizeof why, "%s: learner %lld incarnation %lld", proto_reason_name(r),
                 (long long)h.learner, (long long)h.incarnation);
        members_reject(s, resp, r, h.learner, h.incarnation, -1, why, 1);
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    if (rebuild_gate(s, resp)) {
        pthread_mutex_unlock(&s->mu);
        free(g);
        return 0;
    }
    members_touch(s, slot);
    ddp_gradient_verdict v = ddp_gradient(s, slot, &h, t, g, factor, l2_in);
    free(g);
    if (v == DDP_GRAD_ADDED) {
        /* over the caller's share of waits: answered at once (503 retry below) */
        int hold = holds_take(s, req);
        int64_t end = cx_mono_ms() + BARRIER_WAIT_MS;
        while (hold >= 0 && !s->stopping && s->ddp.mean_step < t)
            if (cx_cond_wait_until_ms(&s->step_cv, &s->mu, end) == CX_ETIMEDOUT)
                break;
        holds_drop(s, hold);
        v = ddp_outcome(s, slot, t, h.incarnation);
    }
    switch (v) {
    case DDP_GRAD_MEAN:
        reply_mean(s, resp, t);
        break;
    case DDP_GRAD_BEHIND:
        reply_step_conflict(s, resp, t, "step closed without this learner; resync");
        break;
    case DDP_GRAD_AHEAD:
        reply_step_conflict(s, resp, t, "step is ahead of the syncer; resync");
        break;
    case DDP_GRAD_ADDED:
        cx_http_reply_problem(resp, 503, NULL,
                              json_pack("{s:I, s:i, s:i}", "step", (json_int_t)t, "arrived", s->ddp.count,
                                        "need", members_barrier_need(s)),
                              "barrier still waiting for learners; retry");
        break;
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* ---- syncer: GET /v1/optimizer (ddp modes) ---- */

/* The ddp source of truth, for a learner that (re)joins, missed a step or
 * went non-finite: body = params[n] | AdamW m[n] | v[n], little-endian f32;
 * X-Chaosloco-Crc32c over the body, X-Chaosloco-Step the step being
 * collected (the learner's next gradient is for it), X-Chaosloco-Adam-Steps
 * the AdamW step counter. One snapshot under the lock, so the four agree.
 * Like a fragment pull: 503 while a rebuild collects, and with learner
 * headers refused to a learner that must rejoin first (rebuild_stale_pull),
 * so that it cannot take a restarted syncer's initial state over its own. */
int ddp_route_optimizer(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    proto_hdr h;
    if (proto_hdr_parse(&h, syncer_api_req_header, req, 0, NULL, 0) != 0)
        h.learner = h.incarnation = -1;
    if (!syncer_is_ddp(s)) {
        cx_http_reply_error(resp, 409, "mode %s has no global optimizer state (ddp modes only)",
                            syncer_mode_name(s));
        return 0;
    }
    size_t n = s->n;
    unsigned char *b = malloc(n * 12);
    if (!b) {
        cx_http_reply_err(resp, CX_ENOMEM, "out of memory");
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    if (rebuild_stale_pull(s, &h, resp) || rebuild_gate(s, resp)) {
        pthread_mutex_unlock(&s->mu);
        free(b);
        return 0;
    }
    proto_f32_encode(s->theta, n, b);
    proto_f32_encode(adamw_m(s->opt), n, b + n * 4);
    proto_f32_encode(adamw_v(s->opt), n, b + n * 8);
    int64_t step = s->ddp.step, adam_steps = (int64_t)adamw_steps(s->opt), version = s->versions[0];
    char seal[SEAL_HEX + 1];
    ddp_seal_state(s, seal);
    s->bytes_out += (int64_t)n * 12;
    pthread_mutex_unlock(&s->mu);
    char crchex[9];
    proto_crc_format(cx_crc32c(0, b, n * 12), crchex);
    cx_http_reply_bytes(resp, 200, "application/octet-stream", b, n * 12);
    free(b);
    cx_http_add_header(resp, PROTO_H_CRC32C, "%s", crchex);
    cx_http_add_header(resp, PROTO_H_STEP, "%lld", (long long)step);
    cx_http_add_header(resp, PROTO_H_ADAM_STEPS, "%lld", (long long)adam_steps);
    cx_http_add_header(resp, PROTO_H_VERSION, "%lld", (long long)version);
    if (seal[0])
        cx_http_add_header(resp, PROTO_H_SEAL, "%s", seal);
    return 0;
}
