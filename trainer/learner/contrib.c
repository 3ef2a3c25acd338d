/* contrib.c - the learner's contribution path (contrib.h): the upstream
 * error-feedback residual of each fragment, the contribution
 * Δ_p = Θ_base_p − θ_p encoded for the wire, and its POST. What it is not:
 * when a contribution is due (diloco.c, decoupled.c).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/log.h"
#include "numerics/encoding.h"
#include "numerics/fragment.h"
#include "numerics/model.h"
#include "trainer/config.h"
#include "trainer/learner/contrib.h"
#include "trainer/learner/link.h"
#include "trainer/protocol.h"

/* ---- contrib: upstream error feedback ---- */

/* The error-feedback residual of fragment p, or NULL when upstream_ef is
 * off, the encoding is f32 (nothing is lost) or no memory could be had.
 * Zeroed when the incarnation changed since it was last used (a rejoin:
 * the syncer's state moved on without this learner's lost remainder). */
static float *ef_residual(learner *L, int p)
{
    if (!L->cfg.upstream_ef || L->cfg.encoding == CONFIG_ENC_F32 || L->ef_broken)
        return NULL;
    pthread_mutex_lock(&L->mu);
    int64_t inc = L->incarnation;
    pthread_mutex_unlock(&L->mu);
    if (!L->ef) {
        L->ef = calloc(L->n, sizeof *L->ef);
        L->ef_next = calloc(L->n, sizeof *L->ef_next);
        L->ef_off = malloc((size_t)L->P * sizeof *L->ef_off);
        if (!L->ef || !L->ef_next || !L->ef_off) {
            free(L->ef), free(L->ef_next), free(L->ef_off);
            L->ef = L->ef_next = NULL;
            L->ef_off = NULL;
            L->ef_broken = 1;
            cx_warn("out of memory for the upstream error-feedback residual; contributions go without it");
            return NULL;
        }
        size_t off = 0;
        for (int q = 0; q < L->P; q++) {
            L->ef_off[q] = off;
            off += fragment_length(L->ft, q);
        }
        L->ef_incarnation = inc;
        cx_info(
            "upstream error feedback on: each %s contribution carries what the encoding lost of the last one",
            config_encoding_name(L->cfg.encoding));
    }
    if (inc != L->ef_incarnation) {
        memset(L->ef, 0, L->n * sizeof *L->ef);
        L->ef_incarnation = inc;
        cx_info("incarnation %lld: upstream error-feedback residuals reset", (long long)inc);
    }
    return L->ef + L->ef_off[p];
}

/* Keep the residual of the contribution of fragment p just built (sent). */
void learner_contrib_commit(learner *L, int p)
{
    if (L->ef)
        memcpy(L->ef + L->ef_off[p], L->ef_next + L->ef_off[p], fragment_length(L->ft, p) * sizeof *L->ef);
}

/* ---- contrib: build and send ---- */

/* Δ_p = Θ_base_p − θ_p into L->scratch (plus the error-feedback residual r_p
 * when on, whose successor goes to ef_next: learner_contrib_commit keeps it), encoded
 * into a malloc'd buffer. */
unsigned char *learner_contrib_make(learner *L, int p, size_t *len, uint32_t *crc)
{
    size_t n = fragment_length(L->ft, p);
    float *theta = L->scratch, *base = L->scratch + n;
    encoding_kind enc = (encoding_kind)L->cfg.encoding;
    fragment_gather(L->ft, p, model_params(L->m), theta);
    fragment_gather(L->ft, p, L->base, base);
    for (size_t i = 0; i < n; i++)
        theta[i] = base[i] - theta[i];
    float *r = ef_residual(L, p);
    for (size_t i = 0; r && i < n; i++)
        theta[i] += r[i];
    if (learner_nan_hook(L))
        theta[0] = NAN;
    *len = encoding_size(enc, n);
    unsigned char *out = malloc(*len);
    if (!out)
        return NULL;
    if (r) /* base is free now: the decode scratch; a non-finite Δ' leaves r = 0 */
        encoding_encode_residual(enc, theta, n, out, *len, L->ef_next + L->ef_off[p], base, NULL, 0);
    else
        encoding_encode(enc, theta, n, out, *len, NULL, 0);
    *crc = cx_crc32c(0, out, *len);
    return out;
}

/* POST one contribution. Returns the HTTP status (0 = no answer); on 202
 * *merges_into is the version the syncer said its round will produce (-1
 * when the answer did not say). The syncer numbers the rounds: the
 * contribution names its step, not a round. */
int learner_contrib_post(learner *L, cx_http_client *c, const frag_msg *m, int64_t *merges_into)
{
    char path[96], lines[PROTO_MAX_LINES][PROTO_LINE];
    const char *hdrs[PROTO_MAX_LINES + 1];
    proto_hdr h;
    cx_http_result r;
    pthread_mutex_lock(&L->mu);
    h.incarnation = L->incarnation;
    pthread_mutex_unlock(&L->mu);
    h.learner = L->o->id;
    h.fragment = m->p;
    h.base_version = m->version;
    h.tokens = m->tokens;
    h.steps = m->steps;
    h.encoding = L->cfg.encoding;
    h.crc32c = m->crc;
    h.round = -1;
    h.step = m->step;
    proto_hdr_format(&h, lines, hdrs);
    snprintf(path, sizeof path, "/v1/fragments/%d/contributions", m->p);
    *merges_into = -1;
    cx_http_result_init(&r);
    int status = 0;
    if (learner_link_call(L, c, "POST", path, hdrs, m->buf, m->len, "application/octet-stream",
                          HTTP_TIMEOUT_MS, &r) == 0)
        status = r.status;
    if (status == 202 && r.body.data) {
        json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
        json_t *v = json_object_get(j, "merges_into");
        if (json_is_integer(v) && json_integer_value(v) > m->version)
            *merges_into = json_integer_value(v);
        json_decref(j);
    }
    if (status != 202 && status != 0) {
        int level_warn = status != 409;
        if (level_warn)
            cx_warn("contribution fragment=%d base=%lld refused: HTTP %d %s", m->p, (long long)m->version,
                    status, r.body.data ? r.body.data : "");
        else
            cx_info("contribution fragment=%d base=%lld refused: HTTP %d %s", m->p, (long long)m->version,
                    status, r.body.data ? r.body.data : "");
        if (status == 403 ||
            (status == 409 && learner_link_reason(r.body.data, r.body.len) == PROTO_R_STALE_INCARNATION)) {
            pthread_mutex_lock(&L->mu);
            L->need_rejoin = 1;
            pthread_mutex_unlock(&L->mu);
        }
    }
    cx_http_result_cleanup(&r);
    return status;
}
