/* link.c - the learner's link to the syncer (link.h): calls with give-up,
 * building the model from the joined config, join and rejoin, pulls, and
 * the reason of a refusal.
 *
 * What it is: learner_link_call/learner_link_call_json (retried until an
 * answer or give_up_s of silence), the HTTP client, build (model,
 * optimizer, data shard, fragment table from the config the join returns),
 * the restore of a local checkpoint, the "holds" report and the upload a
 * rebuilding syncer asks for, POST /v1/join, fragment pulls (full or delta
 * chains, checked by CRC32C), and learner_link_reason. What it is not: the
 * heartbeat (learner.c) nor the decoupled comm thread that uses these calls
 * (decoupled.c). Whoever talks to the syncer owns gcopy/gver (core.h).
 */
#include <assert.h>
#include <cblas.h> /* openblas_set_num_threads */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/err.h"
#include "common/http_client.h"
#include "common/json.h"
#include "common/log.h"
#include "common/parse.h"
#include "numerics/corpus.h"
#include "numerics/data.h"
#include "numerics/encoding.h"
#include "numerics/fragment.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/learner/link.h"
#include "trainer/learner/rebase.h"
#include "trainer/protocol.h"
#include "trainer/seal.h"

/* ---- link: syncer calls with give-up ---- */

int learner_link_gave_up(learner *L)
{
    pthread_mutex_lock(&L->mu);
    int64_t idle = cx_mono_ms() - L->last_ok_ms;
    int f = L->fatal || idle > (int64_t)(L->o->give_up_s * 1000);
    if (f)
        L->fatal = 1;
    pthread_mutex_unlock(&L->mu);
    return f;
}

void learner_link_mark_ok(learner *L)
{
    pthread_mutex_lock(&L->mu);
    L->last_ok_ms = cx_mono_ms();
    pthread_mutex_unlock(&L->mu);
}

/* One request, retried (with the client's backoff) until an HTTP answer
 * comes or the syncer has been silent for give_up_s. 0 = answered. */
int learner_link_call(learner *L, cx_http_client *c, const char *method, const char *path,
                      const char *const *hdrs, const void *body, size_t len, const char *ctype,
                      long timeout_ms, cx_http_result *r)
{
    char why[CX_ERRLEN];
    for (;;) {
        int rc = cx_http_do(c, method, path, hdrs, body, len, ctype, timeout_ms, r, why, sizeof why);
        if (rc == 0) {
            learner_link_mark_ok(L);
            return 0;
        }
        if (learner_link_gave_up(L))
            return CX_EUNAVAIL;
        if (*L->stop)
            return CX_EUNAVAIL;
        cx_warn("syncer unreachable (%s %s: %s); retrying", method, path, why);
        cx_sleep_ms(200);
    }
}

json_t *learner_link_call_json(learner *L, cx_http_client *c, const char *method, const char *path,
                               json_t *body, int *status)
{
    cx_http_result r;
    json_t *out = NULL;
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    cx_http_result_init(&r);
    *status = 0;
    if (learner_link_call(L, c, method, path, NULL, text, text ? strlen(text) : 0, "application/json",
                          HTTP_TIMEOUT_MS, &r) == 0) {
        *status = r.status;
        out = json_loadb(r.body.data ? r.body.data : "", r.body.len, 0, NULL);
    }
    free(text);
    cx_http_result_cleanup(&r);
    return out;
}

cx_http_client *learner_link_new_client(const learner *L)
{
    cx_http_opts ho;
    memset(&ho, 0, sizeof ho);
    ho.connect_timeout_ms = 1000;
    ho.timeout_ms = HTTP_TIMEOUT_MS;
    ho.retries = 2;
    ho.backoff_ms = 100;
    ho.backoff_max_ms = 1000;
    ho.bearer = L->o->credential;
    ho.ca_file = L->o->ca_file;
    ho.connect_to = L->o->syncer_via;
    return cx_http_client_new(L->o->syncer_url, &ho);
}

/* ---- link: the reason of a refusal ---- */

proto_reason learner_link_reason(const char *body, size_t len)
{
    proto_reason r = PROTO_R_COUNT;
    json_t *j = body && len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
    if (proto_reason_value(json_string_value(json_object_get(j, "reason")), &r) != 0)
        r = PROTO_R_COUNT; /* no reason, or one this learner does not know */
    json_decref(j);
    return r;
}

/* ---- link: join, build, pull ---- */

static int build(learner *L, char *err, size_t errlen)
{
    model_config mc;
    config_model_config(&L->cfg, L->cfg.batch, &mc);
    openblas_set_num_threads((int)L->cfg.threads);
    L->m = model_new(config_model_name(L->cfg.model), &mc, (uint64_t)L->cfg.seed, err, errlen);
    if (!L->m)
        return CX_EINVAL;
    L->n = model_num_params(L->m);
    L->P = (int)L->cfg.fragments;
    L->ft = fragment_table_new(model_tensors(L->m), model_num_tensors(L->m), L->P, err, errlen);
    if (!L->ft)
        return CX_EINVAL;
    adamw_config ac;
    adamw_config_default(&ac);
    ac.weight_decay = (float)L->cfg.weight_decay;
    L->opt = adamw_new(L->n, &ac, err, errlen);
    if (!L->opt)
        return CX_EINVAL;
    adamw_set_pool(L->opt, model_pool(L->m));
    for (int i = 0; i < model_num_tensors(L->m); i++) {
        const model_tensor *t = model_tensor_get(L->m, i);
        adamw_set_decay(L->opt, t->offset, t->length, t->weight_decay, NULL, 0);
    }
    data_config dc;
    data_config_default(&dc);
    dc.path = L->cfg.data[0] ? L->cfg.data : NULL;
    dc.seed = (uint64_t)L->cfg.seed;
    L->src = data_source_new(&dc, err, errlen);
    if (!L->src)
        return CX_EINVAL;
    int shards = (int)L->cfg.learners;
    L->shard = data_shard_new(L->src, (int)(L->o->id % shards), shards, (int)L->cfg.context, err, errlen);
    if (!L->shard)
        return CX_EINVAL;
    L->base = malloc(L->n * sizeof(float));
    L->gcopy = malloc(L->n * sizeof(float));
    L->gver = malloc((size_t)L->P * sizeof(int64_t));
    L->gseal = calloc((size_t)L->P, sizeof *L->gseal);
    L->seen_ver = calloc((size_t)L->P, sizeof(int64_t));
    for (int p = 0; L->gver && p < L->P; p++)
        L->gver[p] = -1;
    L->scratch = malloc(2 * L->n * sizeof(float)); /* delta + base of one fragment */
    L->wire = malloc(L->n * 4 + 64);
    L->join_accepted = malloc((size_t)L->P * sizeof(int64_t));
    L->ckpt_accepted = calloc((size_t)L->P, sizeof(int64_t));
    for (int p = 0; L->join_accepted && p < L->P; p++)
        L->join_accepted[p] = -1;
    L->in = malloc((size_t)L->cfg.batch * (size_t)L->cfg.context);
    L->tg = malloc((size_t)L->cfg.batch);
    if (!L->base || !L->gcopy || !L->gver || !L->gseal || !L->seen_ver || !L->scratch || !L->wire || !L->in ||
        !L->tg || !L->join_accepted || !L->ckpt_accepted || learner_rebase_init(L) < 0)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    return 0;
}

/* Apply the local checkpoint read at start (moments, cursor, step). */
static void apply_restored(learner *L)
{
    ckpt_learner *c = L->restored;
    char why[CX_ERRLEN];
    if (!c)
        return;
    if (c->n != L->n || c->P != L->P || c->table_digest != fragment_table_digest(L->ft) ||
        c->cursor_len != sizeof(data_cursor)) {
        cx_warn("local checkpoint is for another model; starting this learner fresh");
        return;
    }
    if (data_shard_set_cursor(L->shard, (const data_cursor *)c->cursor, why, sizeof why) != 0) {
        cx_warn("local checkpoint: data cursor refused (%s); starting the shard over", why);
    }
    memcpy(adamw_m(L->opt), c->adam_m, L->n * sizeof(float));
    memcpy(adamw_v(L->opt), c->adam_v, L->n * sizeof(float));
    adamw_set_steps(L->opt, (uint64_t)c->adam_steps);
    memcpy(model_params(L->m), c->params, L->n * sizeof(float));
    L->step = c->step;
    L->tokens = c->tokens;
    L->ckpt_step = c->step;
    /* decoupled: what the start pull needs to carry the unsent progress
     * (learner_rebase_start) */
    memcpy(L->base, c->base, L->n * sizeof(float));
    learner_rebase_restore(L, c);
    L->restored_carry = L->cfg.mode == CONFIG_MODE_DECOUPLED;
    cx_info("resumed from local checkpoint: step=%lld tokens=%lld", (long long)c->step, (long long)c->tokens);
}

/* Floats in this learner's copy of global fragment p as a rebuild takes it
 * (the syncer's rb_state_len): the fragment, or in ddp modes its params,
 * AdamW m and v. */
static size_t state_len(const learner *L, int p)
{
    return fragment_length(L->ft, p) * (is_ddp(L) ? 3 : 1);
}

/* The version of that copy (<= 0: none or untrained): in ddp modes the
 * one the caller of the join says it holds. */
static int64_t state_version(const learner *L, const learner_link_held *held, int p)
{
    return held ? held->version : L->gver[p];
}

/* That copy into out[state_len]: the global fragment as the syncer sent it
 * (gcopy), or in ddp modes the fragment of the params and AdamW moments
 * (bit-identical with the syncer's at ddp_version). */
static void state_gather(learner *L, int p, float *out)
{
    size_t len = fragment_length(L->ft, p);
    if (!is_ddp(L)) {
        fragment_gather(L->ft, p, L->gcopy, out);
        return;
    }
    fragment_gather(L->ft, p, model_params(L->m), out);
    fragment_gather(L->ft, p, adamw_m(L->opt), out + len);
    fragment_gather(L->ft, p, adamw_v(L->opt), out + 2 * len);
}

/* What this thread's copy of the global state is (gcopy/gver, owned by
 * the caller of join; ddp: the model and its AdamW state, main thread):
 * {"versions": [...], "crc32c": [...], "published": [...], "seal": [...]},
 * the optional
 * "holds" of a join, so that a syncer that lost its state can rebuild it
 * from the newest copies (docs/api.md). NULL before the first join
 * (nothing held yet). */
static json_t *holds_json(learner *L, const learner_link_held *held)
{
    if (!L->gver)
        return NULL;
    size_t maxlen = 0;
    for (int p = 0; p < L->P; p++)
        if (state_len(L, p) > maxlen)
            maxlen = state_len(L, p);
    float *tmp = malloc(maxlen * sizeof *tmp);
    if (!tmp)
        return NULL;
    json_t *v = json_array(), *c = json_array(), *pub = json_array(), *sl = json_array();
    for (int p = 0; p < L->P; p++) {
        int64_t ver = state_version(L, held, p);
        int64_t seen = !is_ddp(L) && L->seen_ver[p] > ver ? L->seen_ver[p] : ver;
        json_array_append_new(pub, json_integer(seen > 0 ? seen : 0));
        char crc[9] = "0";
        if (ver > 0) {
            state_gather(L, p, tmp);
            proto_crc_format(proto_f32_crc(tmp, state_len(L, p)), crc);
        }
        json_array_append_new(v, json_integer(ver > 0 ? ver : 0));
        json_array_append_new(c, json_string(crc));
        json_array_append_new(sl, json_string(ver <= 0 ? "" : held ? held->seal : L->gseal[p]));
    }
    free(tmp);
    return json_pack("{s:o, s:o, s:o, s:o}", "versions", v, "crc32c", c, "published", pub, "seal", sl);
}

/* The syncer answered a join with 503 and {"rebuild": {"incarnation",
 * "upload": [p...]}}: POST each asked fragment of this thread's copy to
 * /v1/fragments/{p}/state (ddp: with the step the join named and the AdamW
 * step counter). Failures are logged; the join is retried either way (the
 * syncer goes on with the copies it got). */
static void upload_state(learner *L, cx_http_client *c, const learner_link_held *held, json_t *ans)
{
    json_t *rb = json_object_get(ans, "rebuild"), *up = json_object_get(rb, "upload"), *e;
    json_int_t inc = json_integer_value(json_object_get(rb, "incarnation"));
    size_t i;
    if (!json_is_array(up) || inc <= 0)
        return;
    json_array_foreach(up, i, e)
    {
        json_int_t p = json_integer_value(e);
        if (!json_is_integer(e) || p < 0 || p >= L->P || state_version(L, held, (int)p) <= 0) {
            cx_warn("rebuild: the syncer asks for fragment %lld, which we do not hold", (long long)p);
            continue;
        }
        int64_t ver = state_version(L, held, (int)p);
        size_t len = state_len(L, (int)p);
        float *vals = malloc(len * sizeof *vals);
        unsigned char *wire = malloc(len * 4);
        if (!vals || !wire) {
            free(vals), free(wire);
            return;
        }
        state_gather(L, (int)p, vals);
        proto_f32_encode(vals, len, wire);
        proto_hdr h;
        memset(&h, 0xff, sizeof h);
        h.learner = L->o->id;
        h.incarnation = inc;
        h.fragment = p;
        h.crc32c = cx_crc32c(0, wire, len * 4);
        char lines[PROTO_MAX_LINES][PROTO_LINE], vline[3][PROTO_LINE], path[96];
        const char *hdrs[PROTO_MAX_LINES + 4];
        proto_hdr_format(&h, lines, hdrs);
        int k = 0;
        while (hdrs[k])
            k++;
        snprintf(vline[0], sizeof vline[0], "%s: %lld", PROTO_H_VERSION, (long long)ver);
        hdrs[k++] = vline[0];
        if (is_ddp(L)) { /* the state is at the step the join named (main thread: only it moves L->step) */
            pthread_mutex_lock(&L->mu);
            int64_t step = L->step;
            pthread_mutex_unlock(&L->mu);
            snprintf(vline[1], sizeof vline[1], "%s: %lld", PROTO_H_STEP, (long long)step);
            snprintf(vline[2], sizeof vline[2], "%s: %llu", PROTO_H_ADAM_STEPS,
                     (unsigned long long)adamw_steps(L->opt));
            hdrs[k++] = vline[1];
            hdrs[k++] = vline[2];
        }
        hdrs[k] = NULL;
        snprintf(path, sizeof path, "/v1/fragments/%lld/state", (long long)p);
        cx_http_result r;
        cx_http_result_init(&r);
        int rc = learner_link_call(L, c, "POST", path, hdrs, wire, len * 4, "application/octet-stream",
                                   HTTP_TIMEOUT_MS, &r);
        if (rc == 0 && r.status == 200)
            cx_info("rebuild: uploaded fragment %lld version %lld", (long long)p, (long long)ver);
        else
            cx_warn("rebuild: upload of fragment %lld refused: HTTP %d %s", (long long)p,
                    rc == 0 ? r.status : 0, r.body.data ? r.body.data : "");
        cx_http_result_cleanup(&r);
        free(vals), free(wire);
    }
}

/* POST /v1/join; on the first join also build everything. */
int learner_link_join(learner *L, cx_http_client *c, int first, const learner_link_held *held, char *err,
                      size_t errlen)
{
    /* a ddp learner's holdings are its mode's (ddp.c), given to every rejoin */
    assert(first || !held == !is_ddp(L));
    int status;
    json_t *holds = first ? NULL : holds_json(L, held);
    pthread_mutex_lock(&L->mu);
    json_t *body =
        json_pack("{s:I, s:I, s:I, s:I}", "learner", (json_int_t)L->o->id, "incarnation",
                  (json_int_t)L->incarnation, "step", (json_int_t)L->step, "tokens", (json_int_t)L->tokens);
    pthread_mutex_unlock(&L->mu);
    if (holds)
        json_object_set_new(body, "holds", holds);
    json_t *ans = NULL;
    for (;;) {
        ans = learner_link_call_json(L, c, "POST", "/v1/join", body, &status);
        if (status == 200 && ans)
            break;
        char said[CX_ERRLEN];
        const char *e = json_string_value(json_object_get(ans, "error"));
        snprintf(said, sizeof said, "%s", e ? e : "");
        if (status == 503 && ans && !first && json_object_get(ans, "rebuild"))
            upload_state(L, c, held, ans); /* then join again */
        json_decref(ans);
        ans = NULL;
        if (status == 0) {
            json_decref(body);
            return cx_fail(err, errlen, CX_EUNAVAIL, "syncer %s unreachable for more than %.0f s",
                           L->o->syncer_url, L->o->give_up_s);
        }
        if (status >= 400 && status < 500) {
            json_decref(body);
            return cx_fail(err, errlen, CX_ECONFLICT, "join refused by the syncer (HTTP %d%s%s)%s", status,
                           said[0] ? ": " : "", said,
                           status == 401 || status == 403 ? "; check --credential-file (docs/security.md)"
                                                          : "");
        }
        cx_sleep_ms(500);
        if (learner_link_gave_up(L) || *L->stop) {
            json_decref(body);
            return cx_fail(err, errlen, CX_EUNAVAIL, "cannot join %s", L->o->syncer_url);
        }
    }
    json_decref(body);
    json_int_t inc = 0, n_params = 0, ddp_step = 0, merges = 0, who = 0, sched = 0;
    int digest = 0;
    json_t *cfgj = NULL, *frags = NULL, *acc = NULL;
    const char *mode = NULL;
    char why[CX_ERRLEN];
    if (cx_json_unpack(ans, "join answer", why, sizeof why,
                       "{s:I, s:I, s:o, s:o, s:I, s:i, s:I, s:s, s:I, s?I, s?o}", "learner", &who,
                       "incarnation", &inc, "config", &cfgj, "fragments", &frags, "n_params", &n_params,
                       "table_digest", &digest, "step", &ddp_step, "mode", &mode, "merges", &merges,
                       "schedule_step", &sched, "accepted_steps", &acc) != 0) {
        json_decref(ans);
        return cx_fail(err, errlen, CX_EINVAL, "bad join answer: %s", why);
    }
    if (first) {
        config_defaults(&L->cfg);
        if (config_from_json(&L->cfg, cfgj, "syncer config", why, sizeof why) != 0) {
            json_decref(ans);
            return cx_fail(err, errlen, CX_EINVAL, "%s", why);
        }
        L->sched_steps = L->cfg.steps;
        /* the syncer names a corpus, never a path: a learner reads a file
         * only when its own command line names it (issue 28: a syncer, or
         * whoever answers in its place, must not make a learner read
         * /etc/shadow into the model it sends back) */
        int own_data = 0;
        for (int i = 0; i < L->o->n_overrides; i++)
            own_data |= strcmp(L->o->override_name[i], "data") == 0;
        if (!own_data && L->cfg.data[0] && strcmp(L->cfg.data, "synthetic") != 0 &&
            !corpus_find(L->cfg.data)) {
            json_decref(ans);
            return cx_fail(
                err, errlen, CX_EINVAL,
                "the syncer's config names the data file '%s': a learner reads a file only when its "
                "own --data names it (start this learner with --data FILE)",
                L->cfg.data);
        }
        for (int i = 0; i < L->o->n_overrides; i++)
            if (config_set_flag(&L->cfg, L->o->override_name[i], L->o->override_value[i], why, sizeof why) !=
                0) {
                json_decref(ans);
                return cx_fail(err, errlen, CX_EINVAL, "%s", why);
            }
        char line[4096];
        config_format(&L->cfg, line, sizeof line);
        cx_info("config learner=%lld syncer=%s state_dir=%s %s", (long long)L->o->id, L->o->syncer_url,
                L->o->state_dir, line);
        int rc = build(L, err, errlen);
        if (rc) {
            json_decref(ans);
            return rc;
        }
        cx_info("data %s loss_floor=%.4f nats", data_source_describe(L->src), data_entropy_rate(L->src));
        if ((size_t)n_params != L->n || (uint32_t)digest != fragment_table_digest(L->ft)) {
            json_decref(ans);
            return cx_fail(err, errlen, CX_EINVAL, "the syncer's model (%lld params) differs from ours (%zu)",
                           (long long)n_params, L->n);
        }
        apply_restored(L);
    }
    /* decoupled: the step of our last contribution to each fragment the
     * syncer accepted (what a restart may carry, learner_start_fragment) */
    for (int p = 0; p < L->P; p++) {
        json_t *a = json_array_get(acc, (size_t)p);
        L->join_accepted[p] =
            json_is_integer(a) && json_array_size(acc) == (size_t)L->P ? json_integer_value(a) : -1;
    }
    pthread_mutex_lock(&L->mu);
    L->incarnation = inc;
    if (L->cfg.mode == CONFIG_MODE_DDP || L->cfg.mode == CONFIG_MODE_DDP_ELASTIC)
        L->step = ddp_step; /* ddp learners move in lockstep with the syncer's step */
    L->need_rejoin = 0;
    /* decoupled: take the run's schedule position, so that our round r of
     * fragment p comes due when the other learners' does */
    L->sched_off = sched > 0 ? sched - L->step : 0;
    int64_t sched_off = L->sched_off;
    pthread_mutex_unlock(&L->mu);
    cx_info("joined as incarnation %lld (mode %s, syncer merges %lld, step %lld, schedule offset %lld)",
            (long long)inc, mode, (long long)merges, (long long)L->step, (long long)sched_off);
    json_decref(ans);
    return 0;
}

enum { GET_FULL = 0, GET_DELTA, GET_RESYNC };
#define GOT_MISMATCH 2 /* get_fragment: the delta result is not the canonical fragment */

/* Apply the delta chain in body (from version `from`, ending at `v`) to
 * this thread's copy of fragment p, into out. 1 when the result's CRC32C
 * is `fcrc` (the canonical fragment), GOT_MISMATCH otherwise (malformed
 * chain, undecodable delta, wrong versions or a different result). */
static int apply_chain(learner *L, int p, const uint8_t *body, size_t blen, encoding_kind enc, int64_t from,
                       int64_t v, uint32_t fcrc, float *out)
{
    size_t len = fragment_length(L->ft, p), off = 0, plen;
    const uint8_t *payload;
    int64_t rv, expect = from + 1;
    char why[CX_ERRLEN];
    int rc;
    float *d = malloc(len * sizeof *d);
    if (!d)
        return CX_ENOMEM;
    fragment_gather(L->ft, p, L->gcopy, out);
    while ((rc = proto_delta_next(body, blen, &off, &rv, &payload, &plen, why, sizeof why)) == 1) {
        if (rv != expect) {
            snprintf(why, sizeof why, "record for version %lld, expected %lld", (long long)rv,
                     (long long)expect);
            rc = CX_ECORRUPT;
            break;
        }
        if (encoding_decode(enc, payload, plen, d, len, why, sizeof why) != 0) {
            rc = CX_ECORRUPT;
            break;
        }
        for (size_t i = 0; i < len; i++)
            out[i] += d[i]; /* the syncer's canonical update: the same f32 add */
        expect++;
    }
    free(d);
    if (rc == 0 && expect - 1 != v) {
        snprintf(why, sizeof why, "chain ends at version %lld, answer says %lld", (long long)(expect - 1),
                 (long long)v);
        rc = CX_ECORRUPT;
    }
    if (rc == 0 && proto_f32_crc(out, len) != fcrc) {
        snprintf(why, sizeof why, "result CRC32C %08x, canonical fragment %08x", proto_f32_crc(out, len),
                 fcrc);
        rc = CX_ECORRUPT;
    }
    if (rc != 0) {
        cx_warn("fragment %d: delta chain %lld -> %lld not applied (%s); pulling it in full", p,
                (long long)from, (long long)v, why);
        return GOT_MISMATCH;
    }
    return 1;
}

/* One GET of fragment p. GET_FULL: the current fragment (newer < 0) or a
 * long-poll for one newer than `newer`; GET_DELTA: the same, accepting a
 * delta chain against this thread's copy (at version `newer`); GET_RESYNC:
 * the full fragment after a failed delta check. Returns 1 with out and
 * *version set (and the copy updated), 0 when nothing newer came in the
 * wait, GOT_MISMATCH, or negative on failure. */
static int get_fragment(learner *L, cx_http_client *c, int p, int64_t newer, long wait_ms, int how,
                        float *out, int64_t *version)
{
    char path[160], lines[PROTO_MAX_LINES][PROTO_LINE], crcbuf[16];
    const char *hdrs[PROTO_MAX_LINES + 1];
    cx_http_result r;
    proto_hdr h;
    memset(&h, 0xff, sizeof h);
    pthread_mutex_lock(&L->mu);
    h.learner = L->o->id;
    h.incarnation = L->incarnation;
    pthread_mutex_unlock(&L->mu);
    h.crc32c = 0;
    proto_hdr_format(&h, lines, hdrs);
    /* no body: drop the CRC line (the last one) */
    for (int i = 0; hdrs[i]; i++)
        if (strncmp(hdrs[i], PROTO_H_CRC32C, strlen(PROTO_H_CRC32C)) == 0)
            hdrs[i] = NULL;
    if (how == GET_RESYNC)
        snprintf(path, sizeof path, "/v1/fragments/%d?resync=1", p);
    else if (newer >= 0)
        snprintf(path, sizeof path, "/v1/fragments/%d?newer-than=%lld&wait-ms=%ld%s", p, (long long)newer,
                 wait_ms, how == GET_DELTA ? "&delta=1" : "");
    else
        snprintf(path, sizeof path, "/v1/fragments/%d", p);
    cx_http_result_init(&r);
    int rc = learner_link_call(L, c, "GET", path, hdrs, NULL, 0, NULL, HTTP_TIMEOUT_MS + wait_ms, &r);
    if (rc) {
        cx_http_result_cleanup(&r);
        return rc;
    }
    if (r.status == 204) {
        cx_http_result_cleanup(&r);
        return 0;
    }
    size_t len = fragment_length(L->ft, p);
    char vbuf[32], fbuf[32], ebuf[16], fcbuf[16], seal[SEAL_HEX + 2] = "";
    uint32_t crc, fcrc = 0;
    int64_t v = -1, from = -1, enc = -1;
    int is_delta = cx_http_result_header(&r, PROTO_H_DELTA_FROM, fbuf, sizeof fbuf) == 0;
    if (cx_http_result_header(&r, PROTO_H_SEAL, seal, sizeof seal) != 0) /* none: an insecure or ddp syncer */
        seal[0] = 0;
    if (r.status != 200 || cx_http_result_header(&r, PROTO_H_CRC32C, crcbuf, sizeof crcbuf) != 0 ||
        proto_crc_parse(crcbuf, &crc) != 0 ||
        cx_http_result_header(&r, PROTO_H_VERSION, vbuf, sizeof vbuf) != 0 ||
        cx_parse_i64(vbuf, PROTO_H_VERSION, 0, INT64_MAX / 2, &v, NULL, 0) != 0 ||
        proto_check_body(r.body.data, r.body.len, is_delta ? r.body.len : len * 4, crc, NULL, 0) !=
            PROTO_OK ||
        (is_delta &&
         (how != GET_DELTA || cx_parse_i64(fbuf, PROTO_H_DELTA_FROM, 0, INT64_MAX / 2, &from, NULL, 0) != 0 ||
          cx_http_result_header(&r, PROTO_H_FRAGMENT_CRC32C, fcbuf, sizeof fcbuf) != 0 ||
          proto_crc_parse(fcbuf, &fcrc) != 0 ||
          cx_http_result_header(&r, PROTO_H_ENCODING, ebuf, sizeof ebuf) != 0 ||
          config_parse_encoding(ebuf, &enc) != 0))) {
        cx_warn("bad answer to GET %s: HTTP %d, %zu bytes", path, r.status, r.body.len);
        cx_http_result_cleanup(&r);
        return CX_ECORRUPT;
    }
    if (is_delta) {
        if (from != L->gver[p]) {
            cx_warn("fragment %d: delta chain from version %lld but we hold %lld", p, (long long)from,
                    (long long)L->gver[p]);
            rc = GOT_MISMATCH;
        } else {
            rc = apply_chain(L, p, (const uint8_t *)r.body.data, r.body.len, (encoding_kind)enc, from, v,
                             fcrc, out);
        }
        cx_http_result_cleanup(&r);
        if (rc != 1)
            return rc;
        L->n_delta++;
        L->n_delta_vers += v - from;
    } else {
        proto_f32_decode(r.body.data, len, out);
        cx_http_result_cleanup(&r);
        L->n_full++;
    }
    fragment_scatter(L->ft, p, out, L->gcopy);
    L->gver[p] = v;
    snprintf(L->gseal[p], sizeof L->gseal[p], "%s", seal_well_formed(seal) ? seal : "");
    *version = v;
    return 1;
}

/* GET fragment p (newer than `newer`, or the current one when < 0) into
 * out. When this thread's copy of the fragment is at `newer`, the syncer
 * may answer with a chain of encoded deltas; the result is checked against
 * the CRC of the canonical fragment, and on a mismatch the fragment is
 * pulled in full. Returns 1 with out and *version set, 0 when nothing newer
 * came in the wait, negative on failure. */
int learner_link_pull_one(learner *L, cx_http_client *c, int p, int64_t newer, long wait_ms, float *out,
                          int64_t *version)
{
    int how = newer >= 0 && L->gver[p] == newer ? GET_DELTA : GET_FULL;
    int64_t t0 = cx_mono_ns();
    int rc = get_fragment(L, c, p, newer, wait_ms, how, out, version);
    if (rc == 1 && wait_ms == 0) { /* a round trip without a long-poll wait: the syncer's grace (pull_ms) */
        double ms = (double)(cx_mono_ns() - t0) / 1e6;
        pthread_mutex_lock(&L->mu);
        L->pull_ms_ema = L->pull_ms_ema > 0 ? 0.8 * L->pull_ms_ema + 0.2 * ms : ms;
        pthread_mutex_unlock(&L->mu);
    }
    if (rc == GOT_MISMATCH) {
        L->n_mismatch++;
        rc = get_fragment(L, c, p, -1, 0, GET_RESYNC, out, version);
        if (rc == GOT_MISMATCH) /* cannot happen for a full answer */
            rc = CX_ECORRUPT;
    }
    return rc;
}

/* Main thread: pull every fragment at its current version. A syncer that
 * answers but cannot serve (503 while it rebuilds) is asked again every
 * 200 ms for as long as it answers; a signal (*L->stop) ends the wait. */
int learner_link_pull_all(learner *L)
{
    for (int p = 0; p < L->P; p++) {
        int64_t v;
        int rc;
        while ((rc = learner_link_pull_one(L, L->http, p, -1, 0, L->scratch, &v)) != 1) {
            if (rc == CX_EUNAVAIL)
                return rc;
            if (*L->stop)
                return CX_EUNAVAIL;
            cx_sleep_ms(200);
        }
        if (L->restored_carry)
            learner_rebase_start(L, p, L->scratch, v);
        else
            learner_rebase_adopt(L, p, L->scratch, v);
    }
    L->restored_carry = 0; /* only the start pull carries the checkpoint */
    return 0;
}
