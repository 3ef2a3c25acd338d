/* learner.c - one learner unit (learner.h).
 *
 * Threads:
 *   main       the inner loop; in ddp and diloco it also does the (blocking)
 *              exchange with the syncer, because those modes are synchronous.
 *   heartbeat  POST /v1/heartbeat once per second with its own HTTP client.
 *   comm       decoupled only: sends queued contributions, long-polls the
 *              merged fragments it waits for, rejoins when the syncer says
 *              its incarnation is stale. Hands fragments to the main thread
 *              through an inbox the inner loop drains between two steps.
 * L->mu guards the fields marked "shared"; everything else is main-thread
 * only, except gcopy/gver (the global fragments as the syncer sent them,
 * full or rebuilt from delta chains), which belong to whichever thread
 * talks to the syncer (the comm thread once it runs).
 *
 * A decoupled fragment's life on the learner:
 *
 *        due (fragment_due) and < tau in flight: enqueue Δ_p
 *   TRAINING ─────────────────────────────────────────────► QUEUED
 *     (due while tau contributions are queued/sending: PENDING until a
 *      slot frees, then QUEUED with the delta of that moment)
 *     ▲                                                      │ comm: POST
 *     │  main: apply_inbox() overwrites θ_p and Θ_base_p,     ▼
 *     │  resets steps/tokens since received         AWAITING (long-poll
 *     └───────────────────────────────────────────── newer-than=base)
 *   A rejected (400) contribution goes back to TRAINING at once; a 409 stale
 *   version still waits for the newer fragment.
 */
#include "trainer/learner.h"

#include <errno.h>
#include <math.h>
#include <cblas.h> /* openblas_set_num_threads */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/err.h"
#include "common/file.h"
#include "common/http_client.h"
#include "common/json.h"
#include "common/log.h"
#include "common/parse.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/data.h"
#include "trainer/encoding.h"
#include "trainer/fragment.h"
#include "trainer/model.h"
#include "trainer/optim.h"
#include "trainer/protocol.h"

#define HTTP_TIMEOUT_MS 15000
#define POLL_WAIT_MS 10000
/* Queue capacity: a full pull hands the main thread one message per
 * fragment, so the inbox must hold P of them. */
#define MAX_QUEUE CONFIG_FRAGMENTS_MAX
#define OVERLAP_WAIT_MAX_MS 250 /* decoupled: longest wait at s + tau for a merged value that is late */

typedef struct frag_msg {
    int p;              /* fragment */
    int64_t version;    /* its version (inbox) / base version (outbox) */
    int64_t tokens;     /* outbox: tokens since received */
    int64_t steps;      /* outbox: steps since received */
    unsigned char *buf; /* inbox: f32 values; outbox: encoded payload */
    size_t len;         /* bytes in buf */
    uint32_t crc;       /* outbox: CRC32C of buf */
    int64_t round;      /* outbox: the schedule round it was due in (fragment_round) */
} frag_msg;

typedef struct learner {
    const learner_opts *o;
    volatile sig_atomic_t *stop;
    config cfg;             /* from the syncer at join, plus overrides */
    int64_t sched_steps;    /* the syncer's --steps: the lr schedule horizon (same on every learner) */
    cx_http_client *http;   /* main thread */
    model *m;               /* the local model */
    adamw *opt;             /* inner optimizer */
    data_source *src;       /* corpus */
    data_shard *shard;      /* this learner's shard */
    fragment_table *ft;     /* fragments (must match the syncer's digest) */
    size_t n;               /* parameters */
    int P;                  /* fragments */
    float *base;            /* [n] Θ_base: global params as last received */
    int64_t *base_version;  /* [P] version of Θ_base per fragment */
    int64_t *frag_steps;    /* [P] inner steps since the fragment was received */
    int64_t *frag_tokens;   /* [P] tokens since the fragment was received */
    uint8_t *in, *tg;       /* [B, C] and [B] batch buffers */
    float *scratch;         /* [n] deltas and decoded payloads */
    unsigned char *wire;    /* [4n] encoded payloads */
    float train_loss;       /* nats, last step */
    double step_ms_ema;     /* ms per inner step (compute + slowdown) */
    double pull_ms_ema;     /* ms per fragment pull round trip (comm thread; read under mu) */
    int64_t ckpt_step;      /* step of the last checkpoint */
    ckpt_learner *restored; /* local checkpoint read at start, or NULL */
    ckpt_writer *ckw;       /* background checkpoint writer (created at the first periodic one), or NULL */
    int ckw_broken;         /* 1: no writer could be made; periodic checkpoints are synchronous */
    int ckw_skip_logged;    /* 1 once a skipped checkpoint was logged */
    char hook_path[1024];   /* CHAOSLOCO_HOOK_DIR/nan, "" if unset */
    /* The copy of the global fragments exactly as the syncer sent them
     * (full pulls and applied delta chains), owned by the thread that
     * talks to the syncer: main before the decoupled comm thread starts
     * and in ddp/diloco, the comm thread in decoupled mode. */
    float *gcopy;         /* [n] */
    int64_t *gver;        /* [P] version of gcopy per fragment (-1 none) */
    int64_t n_delta;      /* fragments received as delta chains */
    int64_t n_delta_vers; /* deltas applied */
    int64_t n_full;       /* fragments received in full */
    int64_t n_mismatch;   /* delta results that failed the CRC check (then pulled in full) */
    int64_t *seen_ver; /* [P] newest version of each fragment GET /v1/versions showed (same owner as gcopy) */
    int64_t ddp_version; /* ddp: the syncer's version of the state this learner holds (its params and
                            AdamW state equal the syncer's at that version); -1 unknown. Main thread */
    /* Upstream error feedback (main thread only; memory only, never
     * checkpointed): what the encoding lost of each fragment's last
     * contribution, added to the next one. NULL until the first contribution
     * of a run with upstream_ef on and an encoding other than f32. */
    float *ef;              /* [n] residual, fragment p at ef_off[p] */
    float *ef_next;         /* [n] residual of the contribution just built (ef_commit keeps it) */
    size_t *ef_off;         /* [P] offsets into ef */
    int64_t ef_incarnation; /* the residual belongs to this incarnation; a rejoin resets it */
    int ef_broken;          /* 1: out of memory for the residual; contributions go without it */

    /* ---- shared (under mu) ---- */
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* outbox / inbox changes */
    int64_t incarnation; /* current incarnation */
    int64_t step;        /* inner steps done */
    int64_t sched_off;   /* decoupled: schedule step = step + sched_off (set at each join) */
    int64_t tokens;      /* tokens trained */
    int64_t last_ok_ms;  /* mono ms of the last answer from the syncer */
    int64_t last_hb_ms;  /* mono ms the last heartbeat POST returned (0 none) */
    int fatal;           /* comm/heartbeat: give up (syncer gone) */
    int need_rejoin;     /* heartbeat/comm: the syncer no longer knows us */
    int comm_stop;       /* main -> comm: exit */
    int end_seen;        /* heartbeat -> main: the syncer said "end" (POST /v1/end) */
    int pull_all;        /* main -> comm: re-pull every fragment (non-finite params) */
    frag_msg outbox[MAX_QUEUE];
    int n_out; /* queued contributions */
    frag_msg inbox[MAX_QUEUE];
    int n_in;       /* received fragments not yet applied */
    int reset_all;  /* comm -> main: a rejoin happened; inbox holds every fragment */
    int *inflight;  /* [P] 1 from enqueue until the merged fragment is applied */
    int *pending;   /* [P] main only: due, waiting for a free slot (tau) */
    int64_t *apply_at; /* [P] main only: step at which the merged value of p's contribution in flight is
                          applied (its send step + tau; -1 none): an earlier arrival waits in the inbox */
    int *wait_done;    /* [P] main only: 1 once the overlap wait for p's contribution in flight happened */
    int *late_round;   /* [P] comm -> main: the 202 said the contribution was late (its round waits for the
                          slot's on-time ones): no overlap wait for it */
    int overlap_off;   /* main: 1 after an overlap wait timed out, until a merged value is on time again */
    int64_t n_overlap_waits;    /* main: waits at s + tau */
    int64_t n_overlap_timeouts; /* ... that ended without the value */
    double overlap_wait_ms;     /* ... ms spent waiting */
    int n_inflight; /* sum of inflight */
    int sending;    /* comm is posting a contribution */
    int comm_done;  /* comm -> main: the comm thread left its loop (nothing more will be sent) */
} learner;

/* ---- learner: syncer calls with give-up ---- */

static int gave_up(learner *L)
{
    pthread_mutex_lock(&L->mu);
    int64_t idle = cx_mono_ms() - L->last_ok_ms;
    int f = L->fatal || idle > (int64_t)(L->o->give_up_s * 1000);
    if (f)
        L->fatal = 1;
    pthread_mutex_unlock(&L->mu);
    return f;
}

static void mark_ok(learner *L)
{
    pthread_mutex_lock(&L->mu);
    L->last_ok_ms = cx_mono_ms();
    pthread_mutex_unlock(&L->mu);
}

/* One request, retried (with the client's backoff) until an HTTP answer
 * comes or the syncer has been silent for give_up_s. 0 = answered. */
static int call(learner *L, cx_http_client *c, const char *method, const char *path, const char *const *hdrs,
                const void *body, size_t len, const char *ctype, long timeout_ms, cx_http_result *r)
{
    char why[CX_ERRLEN];
    for (;;) {
        int rc = cx_http_do(c, method, path, hdrs, body, len, ctype, timeout_ms, r, why, sizeof why);
        if (rc == 0) {
            mark_ok(L);
            return 0;
        }
        if (gave_up(L))
            return CX_EUNAVAIL;
        if (*L->stop)
            return CX_EUNAVAIL;
        cx_warn("syncer unreachable (%s %s: %s); retrying", method, path, why);
        cx_sleep_ms(200);
    }
}

static json_t *call_json(learner *L, cx_http_client *c, const char *method, const char *path, json_t *body,
                         int *status)
{
    cx_http_result r;
    json_t *out = NULL;
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    cx_http_result_init(&r);
    *status = 0;
    if (call(L, c, method, path, NULL, text, text ? strlen(text) : 0, "application/json", HTTP_TIMEOUT_MS,
             &r) == 0) {
        *status = r.status;
        out = json_loadb(r.body.data ? r.body.data : "", r.body.len, 0, NULL);
    }
    free(text);
    cx_http_result_cleanup(&r);
    return out;
}

static cx_http_client *new_client(const learner *L)
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
    return cx_http_client_new(L->o->syncer_url, &ho);
}

/* ---- learner: join, build, pull ---- */

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
    L->seen_ver = calloc((size_t)L->P, sizeof(int64_t));
    L->ddp_version = -1;
    for (int p = 0; L->gver && p < L->P; p++)
        L->gver[p] = -1;
    L->scratch = malloc(2 * L->n * sizeof(float)); /* delta + base of one fragment */
    L->wire = malloc(L->n * 4 + 64);
    L->base_version = calloc((size_t)L->P, sizeof(int64_t));
    L->frag_steps = calloc((size_t)L->P, sizeof(int64_t));
    L->frag_tokens = calloc((size_t)L->P, sizeof(int64_t));
    L->inflight = calloc((size_t)L->P, sizeof(int));
    L->pending = calloc((size_t)L->P, sizeof(int));
    L->apply_at = malloc((size_t)L->P * sizeof(int64_t));
    L->wait_done = calloc((size_t)L->P, sizeof(int));
    L->late_round = calloc((size_t)L->P, sizeof(int));
    for (int p = 0; L->apply_at && p < L->P; p++)
        L->apply_at[p] = -1;
    L->in = malloc((size_t)L->cfg.batch * (size_t)L->cfg.context);
    L->tg = malloc((size_t)L->cfg.batch);
    if (!L->base || !L->gcopy || !L->gver || !L->seen_ver || !L->scratch || !L->wire || !L->base_version ||
        !L->frag_steps || !L->frag_tokens || !L->inflight || !L->pending || !L->apply_at || !L->wait_done ||
        !L->late_round || !L->in || !L->tg)
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
    cx_info("resumed from local checkpoint: step=%lld tokens=%lld", (long long)c->step, (long long)c->tokens);
}

static int is_ddp(const learner *L)
{
    return L->cfg.mode == CONFIG_MODE_DDP || L->cfg.mode == CONFIG_MODE_DDP_ELASTIC;
}

/* Floats in this learner's copy of global fragment p as a rebuild takes it
 * (the syncer's rb_state_len): the fragment, or in ddp modes its params,
 * AdamW m and v. */
static size_t state_len(const learner *L, int p)
{
    return fragment_length(L->ft, p) * (is_ddp(L) ? 3 : 1);
}

/* The version of that copy (<= 0: none or untrained). */
static int64_t state_version(const learner *L, int p)
{
    return is_ddp(L) ? L->ddp_version : L->gver[p];
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
 * {"versions": [...], "crc32c": [...], "published": [...]}, the optional
 * "holds" of a join, so that a syncer that lost its state can rebuild it
 * from the newest copies (docs/api.md). NULL before the first join
 * (nothing held yet). */
static json_t *holds_json(learner *L)
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
    json_t *v = json_array(), *c = json_array(), *pub = json_array();
    for (int p = 0; p < L->P; p++) {
        int64_t held = state_version(L, p);
        int64_t seen = !is_ddp(L) && L->seen_ver[p] > held ? L->seen_ver[p] : held;
        json_array_append_new(pub, json_integer(seen > 0 ? seen : 0));
        char crc[9] = "0";
        if (held > 0) {
            state_gather(L, p, tmp);
            proto_crc_format(proto_f32_crc(tmp, state_len(L, p)), crc);
        }
        json_array_append_new(v, json_integer(held > 0 ? held : 0));
        json_array_append_new(c, json_string(crc));
    }
    free(tmp);
    return json_pack("{s:o, s:o, s:o}", "versions", v, "crc32c", c, "published", pub);
}

/* The syncer answered a join with 503 and {"rebuild": {"incarnation",
 * "upload": [p...]}}: POST each asked fragment of this thread's copy to
 * /v1/fragments/{p}/state (ddp: with the step the join named and the AdamW
 * step counter). Failures are logged; the join is retried either way (the
 * syncer goes on with the copies it got). */
static void upload_state(learner *L, cx_http_client *c, json_t *ans)
{
    json_t *rb = json_object_get(ans, "rebuild"), *up = json_object_get(rb, "upload"), *e;
    json_int_t inc = json_integer_value(json_object_get(rb, "incarnation"));
    size_t i;
    if (!json_is_array(up) || inc <= 0)
        return;
    json_array_foreach(up, i, e)
    {
        json_int_t p = json_integer_value(e);
        if (!json_is_integer(e) || p < 0 || p >= L->P || state_version(L, (int)p) <= 0) {
            cx_warn("rebuild: the syncer asks for fragment %lld, which we do not hold", (long long)p);
            continue;
        }
        int64_t held = state_version(L, (int)p);
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
        snprintf(vline[0], sizeof vline[0], "%s: %lld", PROTO_H_VERSION, (long long)held);
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
        int rc =
            call(L, c, "POST", path, hdrs, wire, len * 4, "application/octet-stream", HTTP_TIMEOUT_MS, &r);
        if (rc == 0 && r.status == 200)
            cx_info("rebuild: uploaded fragment %lld version %lld", (long long)p, (long long)held);
        else
            cx_warn("rebuild: upload of fragment %lld refused: HTTP %d %s", (long long)p,
                    rc == 0 ? r.status : 0, r.body.data ? r.body.data : "");
        cx_http_result_cleanup(&r);
        free(vals), free(wire);
    }
}

/* POST /v1/join; on the first join also build everything. */
static int join(learner *L, cx_http_client *c, int first, char *err, size_t errlen)
{
    int status;
    json_t *holds = first ? NULL : holds_json(L);
    pthread_mutex_lock(&L->mu);
    json_t *body = json_pack("{s:I, s:I, s:I}", "learner", (json_int_t)L->o->id, "incarnation",
                             (json_int_t)L->incarnation, "step", (json_int_t)L->step);
    pthread_mutex_unlock(&L->mu);
    if (holds)
        json_object_set_new(body, "holds", holds);
    json_t *ans = NULL;
    for (;;) {
        ans = call_json(L, c, "POST", "/v1/join", body, &status);
        if (status == 200 && ans)
            break;
        char said[CX_ERRLEN];
        const char *e = json_string_value(json_object_get(ans, "error"));
        snprintf(said, sizeof said, "%s", e ? e : "");
        if (status == 503 && ans && !first && json_object_get(ans, "rebuild"))
            upload_state(L, c, ans); /* then join again */
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
        if (gave_up(L) || *L->stop) {
            json_decref(body);
            return cx_fail(err, errlen, CX_EUNAVAIL, "cannot join %s", L->o->syncer_url);
        }
    }
    json_decref(body);
    json_int_t inc = 0, n_params = 0, ddp_step = 0, merges = 0, who = 0, sched = 0;
    int digest = 0;
    json_t *cfgj = NULL, *frags = NULL;
    const char *mode = NULL;
    char why[CX_ERRLEN];
    if (cx_json_unpack(ans, "join answer", why, sizeof why,
                       "{s:I, s:I, s:o, s:o, s:I, s:i, s:I, s:s, s:I, s?I}", "learner", &who, "incarnation",
                       &inc, "config", &cfgj, "fragments", &frags, "n_params", &n_params, "table_digest",
                       &digest, "step", &ddp_step, "mode", &mode, "merges", &merges, "schedule_step",
                       &sched) != 0) {
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
    int rc = call(L, c, "GET", path, hdrs, NULL, 0, NULL, HTTP_TIMEOUT_MS + wait_ms, &r);
    if (rc) {
        cx_http_result_cleanup(&r);
        return rc;
    }
    if (r.status == 204) {
        cx_http_result_cleanup(&r);
        return 0;
    }
    size_t len = fragment_length(L->ft, p);
    char vbuf[32], fbuf[32], ebuf[16], fcbuf[16];
    uint32_t crc, fcrc = 0;
    int64_t v = -1, from = -1, enc = -1;
    int is_delta = cx_http_result_header(&r, PROTO_H_DELTA_FROM, fbuf, sizeof fbuf) == 0;
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
    *version = v;
    return 1;
}

/* GET fragment p (newer than `newer`, or the current one when < 0) into
 * out. When this thread's copy of the fragment is at `newer`, the syncer
 * may answer with a chain of encoded deltas; the result is checked against
 * the CRC of the canonical fragment, and on a mismatch the fragment is
 * pulled in full. Returns 1 with out and *version set, 0 when nothing newer
 * came in the wait, negative on failure. */
static int pull_one(learner *L, cx_http_client *c, int p, int64_t newer, long wait_ms, float *out,
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

/* Take fragment p from payload: θ_p = Θ_base_p = payload; counters reset. */
static void adopt(learner *L, int p, const float *payload, int64_t version)
{
    fragment_scatter(L->ft, p, payload, model_params(L->m));
    fragment_scatter(L->ft, p, payload, L->base);
    L->base_version[p] = version;
    L->frag_steps[p] = 0;
    L->frag_tokens[p] = 0;
}

/* Main thread: pull every fragment at its current version. */
static int pull_all(learner *L)
{
    for (int p = 0; p < L->P; p++) {
        int64_t v;
        int rc;
        while ((rc = pull_one(L, L->http, p, -1, 0, L->scratch, &v)) != 1) {
            if (rc == CX_EUNAVAIL)
                return rc;
            cx_sleep_ms(200);
        }
        adopt(L, p, L->scratch, v);
    }
    return 0;
}

/* ---- learner: hooks and checkpoints ---- */

/* The NaN hook (contracts.md): 1 when this contribution must carry NaN. */
static int nan_hook(learner *L)
{
    char *data = NULL, why[CX_ERRLEN];
    size_t len;
    int64_t n = 0;
    if (!L->hook_path[0])
        return 0;
    if (cx_file_read(L->hook_path, 64, &data, &len, why, sizeof why) != 0)
        return 0;
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == ' '))
        data[--len] = 0;
    if (cx_parse_i64(data, "nan hook", 0, INT64_MAX, &n, why, sizeof why) != 0 || n <= 0) {
        free(data);
        return 0;
    }
    free(data);
    char next[32];
    snprintf(next, sizeof next, "%lld\n", (long long)(n - 1));
    if (cx_file_write_atomic(L->hook_path, next, strlen(next), why, sizeof why) != 0)
        cx_warn("nan hook: cannot rewrite %s: %s", L->hook_path, why);
    cx_warn("nan hook: poisoning this contribution (%lld left)", (long long)(n - 1));
    return 1;
}

/* Fill c with borrowed pointers to the live state (cur receives the cursor). */
static void checkpoint_view(learner *L, ckpt_learner *c, data_cursor *cur)
{
    memset(c, 0, sizeof *c);
    data_shard_get_cursor(L->shard, cur);
    pthread_mutex_lock(&L->mu);
    c->incarnation = L->incarnation;
    c->step = L->step;
    c->tokens = L->tokens;
    pthread_mutex_unlock(&L->mu);
    c->learner = L->o->id;
    c->n = L->n;
    c->P = L->P;
    c->table_digest = fragment_table_digest(L->ft);
    c->params = model_params(L->m);
    c->adam_steps = (int64_t)adamw_steps(L->opt);
    c->adam_m = adamw_m(L->opt);
    c->adam_v = adamw_v(L->opt);
    c->base_version = L->base_version;
    c->frag_steps = L->frag_steps;
    c->frag_tokens = L->frag_tokens;
    c->cursor_len = sizeof *cur;
    c->cursor = cur;
}

/* The periodic checkpoint, from the inner loop: a memcpy into the writer's
 * buffers, the write on its thread (checkpoint.h). Skipped (and counted)
 * when the previous write still runs. The writer and its buffers are made
 * once, at the first checkpoint; if that fails this falls back to a
 * synchronous save, as before. */
static void checkpoint_periodic(learner *L)
{
    ckpt_learner c;
    data_cursor cur;
    char why[CX_ERRLEN];
    checkpoint_view(L, &c, &cur);
    L->ckpt_step = c.step;
    if (!L->ckw && !L->ckw_broken) {
        L->ckw = ckpt_writer_new(L->o->state_dir, L->n, L->P, sizeof cur, NULL, NULL);
        if (!L->ckw) {
            L->ckw_broken = 1;
            cx_warn("no background checkpoint writer (out of memory?); checkpointing synchronously");
        }
    }
    if (L->ckw) {
        /* the first skip is logged, the rest counted (logged at exit) */
        if (ckpt_writer_submit(L->ckw, &c) == 0 && !L->ckw_skip_logged) {
            L->ckw_skip_logged = 1;
            cx_info("checkpoint at step %lld skipped: the previous one is still being written (further "
                    "skips are only counted)",
                    (long long)c.step);
        }
        return;
    }
    if (ckpt_learner_save(L->o->state_dir, &c, why, sizeof why) != 0)
        cx_warn("checkpoint at step %lld failed, keeping the previous one and training on: %s",
                (long long)c.step, why);
}

/* The final checkpoint (SIGTERM or the end of training): synchronous and
 * complete before the process goes on; the background write in progress,
 * if any, finishes first (one writer at a time per state dir). */
static void save_checkpoint(learner *L)
{
    ckpt_learner c;
    data_cursor cur;
    char why[CX_ERRLEN];
    if (L->ckw) {
        ckpt_writer_stats st;
        ckpt_writer_wait(L->ckw);
        ckpt_writer_get_stats(L->ckw, &st);
        cx_info("background checkpoints: %lld written, %lld skipped (previous write still running), %lld "
                "failed",
                (long long)st.written, (long long)st.skipped, (long long)st.failed);
        ckpt_writer_free(L->ckw);
        L->ckw = NULL;
    }
    checkpoint_view(L, &c, &cur);
    L->ckpt_step = c.step;
    if (ckpt_learner_save(L->o->state_dir, &c, why, sizeof why) != 0)
        cx_warn("checkpoint at step %lld failed, keeping the previous one and training on: %s",
                (long long)c.step, why);
}

/* ---- learner: heartbeat thread ---- */

static void *heartbeat_main(void *arg)
{
    learner *L = arg;
    cx_http_opts ho;
    memset(&ho, 0, sizeof ho);
    ho.connect_timeout_ms = 1000;
    ho.timeout_ms = 2000;
    ho.bearer = L->o->credential;
    ho.ca_file = L->o->ca_file;
    cx_http_client *c = cx_http_client_new(L->o->syncer_url, &ho);
    while (c && !*L->stop) {
        pthread_mutex_lock(&L->mu);
        int done = L->comm_stop;
        /* batch and steps_total: what the syncer bounds our token/step claims by */
        json_t *b = json_pack(
            "{s:I, s:I, s:I, s:f, s:I, s:f, s:I, s:I, s:I, s:I, s:f}", "learner", (json_int_t)L->o->id,
            "incarnation", (json_int_t)L->incarnation, "step", (json_int_t)L->step, "train_loss",
            isfinite(L->train_loss) ? (double)L->train_loss : 0.0, "tokens", (json_int_t)L->tokens, "step_ms",
            L->step_ms_ema, "t_real_ms", (json_int_t)(cx_real_ns() / 1000000), "cursor",
            (json_int_t)L->tokens, "batch", (json_int_t)L->cfg.batch, "steps_total", (json_int_t)L->cfg.steps,
            "pull_ms", L->pull_ms_ema);
        pthread_mutex_unlock(&L->mu);
        if (done) {
            json_decref(b);
            break;
        }
        int status = 0;
        json_t *ans = NULL;
        char why[CX_ERRLEN];
        if (cx_http_json(c, "POST", "/v1/heartbeat", b, &status, &ans, why, sizeof why) == 0) {
            mark_ok(L);
            pthread_mutex_lock(&L->mu);
            L->last_hb_ms = cx_mono_ms();
            if (status == 200 && json_is_true(json_object_get(ans, "end")) && !L->end_seen) {
                L->end_seen = 1;
                cx_info("the syncer ended the run: finishing this step and leaving");
            }
            pthread_mutex_unlock(&L->mu);
            if (status == 409 || status == 403) {
                pthread_mutex_lock(&L->mu);
                L->need_rejoin = 1;
                pthread_mutex_unlock(&L->mu);
            }
        }
        json_decref(ans);
        json_decref(b);
        for (int i = 0; i < 10 && !*L->stop; i++) {
            pthread_mutex_lock(&L->mu);
            done = L->comm_stop;
            pthread_mutex_unlock(&L->mu);
            if (done)
                break;
            cx_sleep_ms(100);
        }
    }
    cx_http_client_free(c);
    return NULL;
}

/* The last heartbeat, with the final step and tokens, once the heartbeat
 * thread has stopped: sent at least 1 s after the previous one so the
 * syncer's one-event-per-second limit does not swallow it. One try. */
static void final_heartbeat(learner *L)
{
    pthread_mutex_lock(&L->mu);
    int64_t wait = L->last_hb_ms > 0 ? L->last_hb_ms + 1050 - cx_mono_ms() : 0;
    pthread_mutex_unlock(&L->mu);
    if (wait > 1050)
        wait = 1050;
    if (wait > 0)
        cx_sleep_ms(wait);
    pthread_mutex_lock(&L->mu);
    json_t *b = json_pack("{s:I, s:I, s:I, s:f, s:I, s:f, s:I, s:I}", "learner", (json_int_t)L->o->id,
                          "incarnation", (json_int_t)L->incarnation, "step", (json_int_t)L->step,
                          "train_loss", isfinite(L->train_loss) ? (double)L->train_loss : 0.0, "tokens",
                          (json_int_t)L->tokens, "step_ms", L->step_ms_ema, "t_real_ms",
                          (json_int_t)(cx_real_ns() / 1000000), "cursor", (json_int_t)L->tokens);
    pthread_mutex_unlock(&L->mu);
    int status = 0;
    json_t *ans = NULL;
    char why[CX_ERRLEN];
    if (cx_http_json(L->http, "POST", "/v1/heartbeat", b, &status, &ans, why, sizeof why) != 0)
        cx_warn("final heartbeat not delivered: %s", why);
    else if (status != 200)
        cx_warn("final heartbeat refused: HTTP %d", status);
    json_decref(ans);
    json_decref(b);
}

/* ---- learner: contributions ---- */

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
static void ef_commit(learner *L, int p)
{
    if (L->ef)
        memcpy(L->ef + L->ef_off[p], L->ef_next + L->ef_off[p], fragment_length(L->ft, p) * sizeof *L->ef);
}

/* Δ_p = Θ_base_p − θ_p into L->scratch (plus the error-feedback residual r_p
 * when on, whose successor goes to ef_next: ef_commit keeps it), encoded
 * into a malloc'd buffer. */
static unsigned char *make_contribution(learner *L, int p, size_t *len, uint32_t *crc)
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
    if (nan_hook(L))
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
 * *merges_into is the version the syncer said its round will produce
 * (-1 when the answer did not say) and *late whether the contribution was
 * late for its round (then its round waits for the slot's on-time ones). */
static int post_contribution(learner *L, cx_http_client *c, const frag_msg *m, int64_t *merges_into,
                             int *late)
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
    h.round = m->round;
    proto_hdr_format(&h, lines, hdrs);
    snprintf(path, sizeof path, "/v1/fragments/%d/contributions", m->p);
    *merges_into = -1;
    *late = 0;
    cx_http_result_init(&r);
    int status = 0;
    if (call(L, c, "POST", path, hdrs, m->buf, m->len, "application/octet-stream", HTTP_TIMEOUT_MS, &r) == 0)
        status = r.status;
    if (status == 202 && r.body.data) {
        json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
        json_t *v = json_object_get(j, "merges_into");
        if (json_is_integer(v) && json_integer_value(v) > m->version)
            *merges_into = json_integer_value(v);
        *late = json_is_true(json_object_get(j, "late"));
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
        if (status == 409 && r.body.data && strstr(r.body.data, "stale_incarnation")) {
            pthread_mutex_lock(&L->mu);
            L->need_rejoin = 1;
            pthread_mutex_unlock(&L->mu);
        }
        if (status == 403) {
            pthread_mutex_lock(&L->mu);
            L->need_rejoin = 1;
            pthread_mutex_unlock(&L->mu);
        }
    }
    cx_http_result_cleanup(&r);
    return status;
}

/* ---- learner: one inner step ---- */

static int params_finite(learner *L)
{
    return isfinite(L->train_loss) && proto_first_nonfinite(model_params(L->m), L->n) < 0;
}

static float lr_now(learner *L, int64_t step)
{
    /* the syncer's horizon, so that ddp learners and the syncer apply the
     * same step even when a learner runs more or fewer --steps */
    return optim_lr_at(step, L->cfg.warmup, L->sched_steps, (float)L->cfg.inner_lr,
                       (float)(L->cfg.inner_lr * 0.1));
}

/* Forward/backward on the next batch; grads in model_grads(). */
static void compute_grads(learner *L)
{
    data_shard_next_batch(L->shard, (int)L->cfg.batch, L->in, L->tg);
    float loss = model_forward_backward(L->m, L->in, L->tg, (int)L->cfg.batch);
    if (L->cfg.model == CONFIG_MODEL_GPT)
        model_clip_grad_norm(L->m, L->cfg.grad_clip);
    pthread_mutex_lock(&L->mu); /* the heartbeat thread reads it (ThreadSanitizer) */
    L->train_loss = loss;
    pthread_mutex_unlock(&L->mu);
}

/* compute_ns: the step's own compute time (forward, backward, AdamW),
 * without any wait for the syncer; --slowdown pads that. */
static void after_step(learner *L, int64_t compute_ns)
{
    double ms = (double)compute_ns / 1e6;
    if (L->cfg.slowdown > 1.0) {
        int64_t pad = (int64_t)((L->cfg.slowdown - 1.0) * ms);
        if (pad > 0)
            cx_sleep_ms(pad);
        ms *= L->cfg.slowdown;
    }
    pthread_mutex_lock(&L->mu);
    L->step_ms_ema = L->step_ms_ema > 0 ? 0.9 * L->step_ms_ema + 0.1 * ms : ms;
    L->step++;
    L->tokens += L->cfg.batch;
    int64_t step = L->step;
    pthread_mutex_unlock(&L->mu);
    for (int p = 0; p < L->P; p++) {
        L->frag_steps[p]++;
        L->frag_tokens[p] += L->cfg.batch;
    }
    if (step % 50 == 0)
        cx_info("step=%lld loss=%.4f step_ms=%.1f", (long long)step, L->train_loss, L->step_ms_ema);
    if (L->cfg.learner_checkpoint_every > 0 && step - L->ckpt_step >= L->cfg.learner_checkpoint_every)
        checkpoint_periodic(L);
}

/* ---- learner: the end of training ---- */

/* 1 while the inner loop should go on: no signal, the --steps budget not
 * spent, and the syncer has not ended the run (heartbeat answer "end"). */
static int keep_training(learner *L)
{
    if (*L->stop || L->step >= L->cfg.steps)
        return 0;
    pthread_mutex_lock(&L->mu);
    int end = L->end_seen;
    pthread_mutex_unlock(&L->mu);
    return !end;
}

/* ---- learner: ddp ---- */

/* Take the ddp source of truth (GET /v1/optimizer): the syncer's
 * parameters, AdamW moments and step counter, and the step it collects
 * next. A ddp learner applies the same mean gradient with the same AdamW
 * as the syncer, so from here on it stays bit-identical with it, however
 * stale its own moments were (a restart from a local checkpoint, a rejoin,
 * a step it missed, non-finite parameters). why: for the log. 0, or
 * CX_EUNAVAIL when the syncer stayed unreachable past --give-up-s or a
 * signal came; a malformed answer is retried. */
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

static int ddp_resync(learner *L, const char *why)
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
        if (call(L, L->http, "GET", "/v1/optimizer", hdrs, NULL, 0, NULL, HTTP_TIMEOUT_MS, &r) != 0) {
            cx_http_result_cleanup(&r);
            return CX_EUNAVAIL;
        }
        if (r.status == 403 || r.status == 409) {
            char jerr[CX_ERRLEN];
            cx_warn("GET /v1/optimizer (%s): HTTP %d %s; rejoining first", why, r.status,
                    r.body.data ? r.body.data : "");
            cx_http_result_cleanup(&r);
            int rc = join(L, L->http, 0, jerr, sizeof jerr);
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
            L->ddp_version = result_version(&r);
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
        if (*L->stop || gave_up(L))
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

static int ddp_loop(learner *L, char *err, size_t errlen)
{
    /* at start (and so after a restart from a local checkpoint) */
    if (ddp_resync(L, "join") != 0)
        return cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable while taking its optimizer state");
    while (keep_training(L)) {
        int64_t t0 = cx_mono_ns();
        compute_grads(L);
        int64_t compute_ns = cx_mono_ns() - t0;
        float *g = model_grads(L->m);
        if (nan_hook(L))
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
            cx_http_result r;
            cx_http_result_init(&r);
            if (call(L, L->http, "POST", path, hdrs, L->wire, L->n * 4, "application/octet-stream",
                     HTTP_TIMEOUT_MS, &r) != 0) {
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
                if (ddp_resync(L, "step mismatch") != 0)
                    return cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable while resyncing");
                done = 1;
                continue;
            } else if (r.status == 200 &&
                       cx_http_result_header(&r, PROTO_H_CRC32C, crcbuf, sizeof crcbuf) == 0 &&
                       proto_crc_parse(crcbuf, &crc) == 0 &&
                       proto_check_body(r.body.data, r.body.len, L->n * 4, crc, NULL, 0) == PROTO_OK) {
                proto_f32_decode(r.body.data, L->n, L->scratch);
                int64_t t1 = cx_mono_ns();
                adamw_step(L->opt, model_params(L->m), L->scratch, lr_now(L, t));
                L->ddp_version = result_version(&r); /* now equal to the syncer's state at it */
                done = 1;
                after_step(L, compute_ns + (cx_mono_ns() - t1));
            } else if (r.status == 503) {
                /* the barrier is still waiting for someone: send again */
            } else if (r.status == 409 && r.body.data && strstr(r.body.data, "\"step\"") &&
                       !strstr(r.body.data, "stale_incarnation")) {
                json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
                json_int_t s = json_integer_value(json_object_get(j, "step"));
                json_decref(j);
                cx_warn("ddp step %lld closed without us; resyncing to step %lld", (long long)t,
                        (long long)s);
                if (ddp_resync(L, "missed step") != 0) {
                    cx_http_result_cleanup(&r);
                    return cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable while resyncing");
                }
                done = 1;
            } else if (r.status == 409 || r.status == 403) {
                cx_warn("syncer does not know incarnation %lld any more; rejoining",
                        (long long)h.incarnation);
                int rc = join(L, L->http, 0, err, errlen);
                if (rc == 0 && ddp_resync(L, "rejoin") != 0)
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
        if (!params_finite(L)) {
            cx_warn("own parameters are not finite; discarding them and taking the syncer's state");
            if (ddp_resync(L, "non-finite parameters") != 0)
                return cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable");
        }
        pthread_mutex_lock(&L->mu);
        int rj = L->need_rejoin;
        pthread_mutex_unlock(&L->mu);
        if (rj) {
            int rc = join(L, L->http, 0, err, errlen);
            if (rc == 0 && ddp_resync(L, "rejoin") != 0)
                rc = cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable while resyncing");
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* ---- learner: diloco ---- */

static int diloco_sync(learner *L, char *err, size_t errlen)
{
    for (int p = 0; p < L->P; p++) {
        frag_msg m = {p, L->base_version[p], L->frag_tokens[p], L->frag_steps[p], NULL, 0, 0, -1};
        int64_t merges_into;
        int late, status = 400;
        /* a refused (400) payload is rebuilt and sent again: the barrier
         * waits for every learner, so a lost contribution would stall it */
        for (int attempt = 0; attempt < 3 && status == 400; attempt++) {
            m.buf = make_contribution(L, p, &m.len, &m.crc);
            if (!m.buf)
                return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
            status = post_contribution(L, L->http, &m, &merges_into, &late);
            free(m.buf);
        }
        if (status == 202)
            ef_commit(L, p);
        if (status == 0)
            return cx_fail(err, errlen, CX_EUNAVAIL, "syncer %s unreachable for more than %.0f s",
                           L->o->syncer_url, L->o->give_up_s);
        pthread_mutex_lock(&L->mu);
        int rj = L->need_rejoin;
        pthread_mutex_unlock(&L->mu);
        if (rj) {
            int rc = join(L, L->http, 0, err, errlen);
            return rc ? rc : pull_all(L);
        }
    }
    /* wait for every merged fragment (the barrier) */
    for (int p = 0; p < L->P && !*L->stop; p++) {
        int64_t v;
        int rc;
        while ((rc = pull_one(L, L->http, p, L->base_version[p], POLL_WAIT_MS, L->scratch, &v)) != 1) {
            if (rc == CX_EUNAVAIL)
                return cx_fail(err, errlen, CX_EUNAVAIL, "syncer %s unreachable for more than %.0f s",
                               L->o->syncer_url, L->o->give_up_s);
            if (*L->stop)
                return 0;
            pthread_mutex_lock(&L->mu);
            int rj = L->need_rejoin;
            pthread_mutex_unlock(&L->mu);
            if (rj) {
                int rc2 = join(L, L->http, 0, err, errlen);
                return rc2 ? rc2 : pull_all(L);
            }
        }
        adopt(L, p, L->scratch, v);
    }
    return 0;
}

static int diloco_loop(learner *L, char *err, size_t errlen)
{
    while (keep_training(L)) {
        int64_t t0 = cx_mono_ns();
        compute_grads(L);
        adamw_step(L->opt, model_params(L->m), model_grads(L->m), lr_now(L, L->step));
        after_step(L, cx_mono_ns() - t0);
        if (!params_finite(L)) {
            cx_warn("own parameters are not finite; discarding them and pulling the global ones");
            adamw_reset_range(L->opt, 0, L->n, NULL, 0);
            if (pull_all(L) != 0)
                return cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable");
            continue;
        }
        /* the last step (budget spent or the run ended) sends what it has */
        if (L->step % L->cfg.H == 0 || !keep_training(L)) {
            if (*L->stop)
                break;
            int rc = diloco_sync(L, err, errlen);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* ---- learner: decoupled (comm thread) ---- */

static void *comm_main(void *arg)
{
    learner *L = arg;
    cx_http_client *c = new_client(L);
    int64_t *awaiting = malloc((size_t)L->P * sizeof(int64_t)); /* base version waited on, -1 none */
    size_t maxlen = 0;
    for (int p = 0; p < L->P; p++)
        if (fragment_length(L->ft, p) > maxlen)
            maxlen = fragment_length(L->ft, p);
    float *buf = malloc(maxlen * sizeof(float));
    char err[CX_ERRLEN];
    int64_t seen_merges = 0; /* merge counter at our last look */
    if (!c || !awaiting || !buf) {
        pthread_mutex_lock(&L->mu);
        L->fatal = 1;
        pthread_mutex_unlock(&L->mu);
        goto out;
    }
    for (int p = 0; p < L->P; p++)
        awaiting[p] = -1;
    for (;;) {
        pthread_mutex_lock(&L->mu);
        if (L->comm_stop && L->n_out == 0) {
            pthread_mutex_unlock(&L->mu);
            break;
        }
        int rejoin = L->need_rejoin, pull = L->pull_all;
        frag_msg m = {0};
        int have = 0;
        if (!rejoin && !pull && L->n_out > 0) {
            m = L->outbox[0];
            memmove(&L->outbox[0], &L->outbox[1], (size_t)(L->n_out - 1) * sizeof m);
            L->n_out--;
            have = 1;
            L->sending = 1;
        }
        pthread_mutex_unlock(&L->mu);
        if (*L->stop && !L->comm_stop) {
            /* a signal: leave now, what is queued is dropped (the flush
             * does not wait for it, see comm_done) */
            if (have)
                free(m.buf);
            break;
        }

        if (rejoin || pull) {
            /* rejoin (if needed) and hand every fragment to the main thread */
            if (rejoin && join(L, c, 0, err, sizeof err) != 0) {
                cx_error("rejoin failed: %s", err);
                pthread_mutex_lock(&L->mu);
                L->fatal = 1;
                pthread_mutex_unlock(&L->mu);
                break;
            }
            int ok = 1;
            frag_msg got[MAX_QUEUE];
            int ng = 0;
            for (int p = 0; p < L->P && ok; p++) {
                int64_t v;
                size_t len = fragment_length(L->ft, p);
                int rc = pull_one(L, c, p, -1, 0, buf, &v);
                if (rc != 1) {
                    ok = 0;
                    break;
                }
                got[ng] = (frag_msg){p, v, 0, 0, malloc(len * 4), len * 4, 0, -1};
                if (got[ng].buf)
                    memcpy(got[ng].buf, buf, len * 4);
                ng++;
            }
            pthread_mutex_lock(&L->mu);
            if (ok) {
                for (int i = 0; i < L->n_in; i++)
                    free(L->inbox[i].buf);
                for (int i = 0; i < ng; i++)
                    L->inbox[i] = got[i];
                L->n_in = ng;
                L->reset_all = 1;
                pthread_cond_broadcast(&L->cv);
                L->pull_all = 0;
                for (int p = 0; p < L->P; p++)
                    awaiting[p] = -1;
            } else {
                for (int i = 0; i < ng; i++)
                    free(got[i].buf);
                L->pull_all = 1; /* e.g. 503 while the syncer rebuilds: pull again */
            }
            pthread_mutex_unlock(&L->mu);
            if (!ok && gave_up(L))
                break;
            if (!ok)
                cx_sleep_ms(200);
            continue;
        }
        if (have) {
            int64_t into;
            int late;
            int status = post_contribution(L, c, &m, &into, &late);
            free(m.buf);
            pthread_mutex_lock(&L->mu);
            L->sending = 0;
            L->late_round[m.p] = status != 202 || late || into < 0; /* no round to wait for at s + tau */
            if (status == 202 && into > m.version)
                awaiting[m.p] = into - 1; /* the version our round merges into, which holds our work */
            else if (status == 202 || status == 409)
                awaiting[m.p] = m.version; /* refused as stale, or no round said: anything newer */
            else {
                if (L->inflight[m.p]) {
                    L->inflight[m.p] = 0;
                    L->n_inflight--;
                }
            }
            pthread_mutex_unlock(&L->mu);
            if (status == 0 && gave_up(L))
                break;
            continue;
        }
        /* long-poll what we wait for: one wait on the merge counter for all
         * fragments, then fetch the ones that moved past our base */
        int n_await = 0;
        for (int p = 0; p < L->P; p++)
            n_await += awaiting[p] >= 0;
        if (n_await == 0) {
            pthread_mutex_lock(&L->mu);
            if (L->n_out == 0 && !L->comm_stop && !L->need_rejoin && !L->pull_all) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 100 * 1000000L;
                ts.tv_sec += ts.tv_nsec / 1000000000L;
                ts.tv_nsec %= 1000000000L;
                pthread_cond_timedwait(&L->cv, &L->mu, &ts);
            }
            pthread_mutex_unlock(&L->mu);
            continue;
        }
        {
            char path[96];
            cx_http_result r;
            int64_t vers[FRAGMENT_MAX < 256 ? FRAGMENT_MAX : 256];
            int nv = 0;
            snprintf(path, sizeof path, "/v1/versions?merges-above=%lld&wait-ms=50", (long long)seen_merges);
            cx_http_result_init(&r);
            if (call(L, c, "GET", path, NULL, NULL, 0, NULL, HTTP_TIMEOUT_MS, &r) == 0 && r.status == 200) {
                json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
                json_t *va = json_object_get(j, "versions");
                seen_merges = json_integer_value(json_object_get(j, "merges"));
                for (size_t i = 0; i < json_array_size(va) && nv < 256; i++)
                    vers[nv++] = json_integer_value(json_array_get(va, i));
                json_decref(j);
            }
            cx_http_result_cleanup(&r);
            for (int p = 0; p < L->P && p < nv; p++) {
                if (vers[p] > L->seen_ver[p])
                    L->seen_ver[p] = vers[p]; /* published: a rebuild goes above it */
                if (awaiting[p] < 0 || vers[p] <= awaiting[p])
                    continue;
                int64_t v = L->gver[p];
                if (vers[p] <= L->gver[p]) /* our copy is already that new (after a resync) */
                    fragment_gather(L->ft, p, L->gcopy, buf);
                else if (pull_one(L, c, p, L->gver[p], 0, buf, &v) != 1)
                    continue;
                size_t len = fragment_length(L->ft, p);
                frag_msg in = {p, v, 0, 0, malloc(len * 4), len * 4, 0, -1};
                if (in.buf)
                    memcpy(in.buf, buf, len * 4);
                pthread_mutex_lock(&L->mu);
                if (L->n_in < MAX_QUEUE && in.buf)
                    L->inbox[L->n_in++] = in;
                else
                    free(in.buf);
                pthread_cond_broadcast(&L->cv); /* an overlap wait may be for it */
                pthread_mutex_unlock(&L->mu);
                awaiting[p] = -1;
            }
        }
        if (gave_up(L))
            break;
    }
out:
    pthread_mutex_lock(&L->mu);
    L->sending = 0;
    L->comm_done = 1;
    pthread_mutex_unlock(&L->mu);
    free(awaiting);
    free(buf);
    cx_http_client_free(c);
    return NULL;
}

/* Main thread, between two steps: take what the comm thread received. The
 * merged value of a contribution sent at step s is applied at step s + tau
 * (apply_at): one that came earlier stays in the inbox until then; after a
 * (re)join or a resync everything is taken at once. */
static void apply_inbox(learner *L)
{
    pthread_mutex_lock(&L->mu);
    if (L->reset_all) {
        for (int p = 0; p < L->P; p++) {
            L->inflight[p] = 0;
            L->apply_at[p] = -1;
        }
        L->n_inflight = 0;
        L->reset_all = 0;
        cx_info("took every fragment after a (re)join or a resync");
    }
    int kept = 0;
    for (int i = 0; i < L->n_in; i++) {
        frag_msg *m = &L->inbox[i];
        if (L->apply_at[m->p] >= 0 && L->step < L->apply_at[m->p]) {
            L->inbox[kept++] = *m; /* not yet: tau steps of overlap */
            continue;
        }
        L->apply_at[m->p] = -1;
        size_t len = fragment_length(L->ft, m->p);
        proto_f32_decode(m->buf, len, L->scratch);
        adopt(L, m->p, L->scratch, m->version);
        if (L->inflight[m->p]) {
            L->inflight[m->p] = 0;
            L->n_inflight--;
        }
        L->pending[m->p] = 0; /* just received: its next turn comes on schedule */
        free(m->buf);
    }
    L->n_in = kept;
    pthread_mutex_unlock(&L->mu);
}

/* Main thread, before a step: a fragment whose merged value is due now
 * (step >= apply_at) and has not arrived is waited for, once per
 * contribution, at most min(tau x step time, OVERLAP_WAIT_MAX_MS) — unless
 * its contribution was late (its round waits for others: no wait), or the
 * last wait timed out and no value has been on time since (a syncer that is
 * gone or slow costs one bounded wait, not one per fragment). A K=1 round
 * closes without waiting for slow peers, so this waits only for the
 * syncer's merge and the transfer. */
static void overlap_wait(learner *L)
{
    for (int p = 0; p < L->P; p++) {
        if (L->apply_at[p] < 0 || L->wait_done[p] || L->step < L->apply_at[p])
            continue;
        L->wait_done[p] = 1;
        pthread_mutex_lock(&L->mu);
        int here = 0;
        for (int i = 0; i < L->n_in; i++)
            here |= L->inbox[i].p == p;
        if (here) {
            L->overlap_off = 0; /* on time */
            pthread_mutex_unlock(&L->mu);
            continue;
        }
        if (L->late_round[p] || L->overlap_off || !L->inflight[p]) {
            pthread_mutex_unlock(&L->mu);
            continue;
        }
        double w = (double)L->cfg.tau * L->step_ms_ema;
        if (w > OVERLAP_WAIT_MAX_MS)
            w = OVERLAP_WAIT_MAX_MS;
        if (w < 1)
            w = 1;
        int64_t t0 = cx_mono_ns(), end = t0 + (int64_t)(w * 1e6);
        while (!here && !*L->stop && !L->fatal && !L->need_rejoin && !L->pull_all && !L->reset_all) {
            int64_t now = cx_mono_ns();
            if (now >= end)
                break;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t ns = ts.tv_nsec + (end - now);
            ts.tv_sec += ns / 1000000000L;
            ts.tv_nsec = ns % 1000000000L;
            pthread_cond_timedwait(&L->cv, &L->mu, &ts);
            for (int i = 0; i < L->n_in; i++)
                here |= L->inbox[i].p == p;
        }
        pthread_mutex_unlock(&L->mu);
        double ms = (double)(cx_mono_ns() - t0) / 1e6;
        L->n_overlap_waits++;
        L->overlap_wait_ms += ms;
        if (!here) {
            L->overlap_off = 1;
            if (L->n_overlap_timeouts++ == 0)
                cx_info(
                    "fragment %d: its merged value was not here %lld steps after the send; waited %.1f ms "
                    "and went on (logged once; counts at exit)",
                    p, (long long)L->cfg.tau, ms);
        }
    }
}

/* Fragments due by the stagger schedule are sent at once unless tau
 * contributions are already queued or on the wire; then they wait (pending)
 * for a free slot, and go with the delta of that moment. A fragment still
 * waiting for its merged version is not sent again: its next turn comes. */
static void enqueue_due(learner *L)
{
    int due[CONFIG_FRAGMENTS_MAX];
    pthread_mutex_lock(&L->mu);
    int64_t sched = L->step + L->sched_off; /* the run's schedule position (join) */
    pthread_mutex_unlock(&L->mu);
    int nd = fragment_due(sched, (int)L->cfg.H, L->P, due, CONFIG_FRAGMENTS_MAX);
    if (nd > CONFIG_FRAGMENTS_MAX)
        nd = CONFIG_FRAGMENTS_MAX;
    for (int i = 0; i < nd; i++)
        if (!L->inflight[due[i]])
            L->pending[due[i]] = 1;
    for (int p = 0; p < L->P; p++) {
        if (!L->pending[p])
            continue;
        pthread_mutex_lock(&L->mu);
        int blocked = L->n_out + L->sending >= L->cfg.tau || L->n_out >= MAX_QUEUE || L->reset_all ||
                      L->pull_all || L->need_rejoin;
        int busy = L->inflight[p];
        pthread_mutex_unlock(&L->mu);
        if (busy) {
            L->pending[p] = 0;
            continue;
        }
        if (blocked)
            break;
        /* its round: the last time p was due (a send delayed past its due step keeps that round) */
        int64_t round = fragment_round(sched, p, (int)L->cfg.H, L->P);
        frag_msg m = {p, L->base_version[p], L->frag_tokens[p], L->frag_steps[p], NULL, 0, 0, round};
        m.buf = make_contribution(L, p, &m.len, &m.crc);
        if (!m.buf)
            continue;
        ef_commit(L, p); /* sent from here on: its fate is the comm thread's */
        L->pending[p] = 0;
        L->apply_at[p] = L->step + L->cfg.tau; /* its merged value is applied tau steps from now */
        L->wait_done[p] = 0;
        pthread_mutex_lock(&L->mu);
        L->late_round[p] = 0; /* until its 202 says otherwise */
        L->outbox[L->n_out++] = m;
        L->inflight[p] = 1;
        L->n_inflight++;
        pthread_cond_broadcast(&L->cv);
        pthread_mutex_unlock(&L->mu);
    }
}

static int decoupled_loop(learner *L, char *err, size_t errlen)
{
    pthread_t comm;
    if (pthread_create(&comm, NULL, comm_main, L) != 0)
        return cx_fail(err, errlen, CX_ESYS, "cannot start the comm thread");
    int rc = 0;
    while (keep_training(L)) {
        apply_inbox(L);
        pthread_mutex_lock(&L->mu);
        int fatal = L->fatal, resetting = L->need_rejoin || L->pull_all;
        pthread_mutex_unlock(&L->mu);
        if (fatal) {
            rc = cx_fail(err, errlen, CX_EUNAVAIL, "syncer %s unreachable for more than %.0f s",
                         L->o->syncer_url, L->o->give_up_s);
            break;
        }
        (void)resetting; /* training goes on while the comm thread rejoins */
        overlap_wait(L);
        apply_inbox(L);
        int64_t t0 = cx_mono_ns();
        compute_grads(L);
        adamw_step(L->opt, model_params(L->m), model_grads(L->m), lr_now(L, L->step));
        after_step(L, cx_mono_ns() - t0);
        if (!params_finite(L)) {
            cx_warn("own parameters are not finite; discarding them and pulling the global ones");
            adamw_reset_range(L->opt, 0, L->n, NULL, 0);
            memcpy(model_params(L->m), L->base, L->n * sizeof(float));
            pthread_mutex_lock(&L->mu);
            L->pull_all = 1;
            pthread_cond_broadcast(&L->cv);
            pthread_mutex_unlock(&L->mu);
            continue;
        }
        enqueue_due(L);
    }
    /* flush: let the comm thread send what is queued (bounded). Only while
     * it still runs: on a signal it leaves its loop at once and nobody
     * would empty the queue, so waiting would only spend the stop grace
     * (the SIGTERM checkpoint comes after this). */
    int64_t end = cx_mono_ms() + 10000;
    for (;;) {
        pthread_mutex_lock(&L->mu);
        int pending = L->n_out + L->sending, gone = L->comm_done;
        pthread_mutex_unlock(&L->mu);
        if (pending == 0 || gone || *L->stop || cx_mono_ms() > end || rc != 0)
            break;
        cx_sleep_ms(20);
    }
    apply_inbox(L);
    pthread_mutex_lock(&L->mu);
    L->comm_stop = 1;
    for (int i = 0; i < L->n_out; i++) /* anything still queued after the bound is dropped */
        free(L->outbox[i].buf);
    L->n_out = 0;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    pthread_join(comm, NULL);
    for (int i = 0; i < L->n_in; i++)
        free(L->inbox[i].buf);
    L->n_in = 0;
    cx_info("overlap: %lld waits for a merged value at s + tau (%.0f ms in all), %lld timed out",
            (long long)L->n_overlap_waits, L->overlap_wait_ms, (long long)L->n_overlap_timeouts);
    return rc;
}

/* ---- learner: run ---- */

int learner_run(const learner_opts *o, volatile sig_atomic_t *stop, char *err, size_t errlen)
{
    learner *L = calloc(1, sizeof *L);
    int rc = 0;
    pthread_t hb;
    int hb_started = 0;
    if (!L)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    L->o = o;
    L->stop = stop;
    L->train_loss = NAN;
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    L->last_ok_ms = cx_mono_ms();
    const char *hook = getenv("CHAOSLOCO_HOOK_DIR");
    if (hook && *hook)
        snprintf(L->hook_path, sizeof L->hook_path, "%s/nan", hook);
    if ((rc = cx_mkdir_p(o->state_dir, err, errlen)) != 0)
        goto out;
    L->http = new_client(L);
    if (!L->http) {
        rc = cx_fail(err, errlen, CX_ENOMEM, "cannot create an HTTP client");
        goto out;
    }
    /* the local checkpoint (if any) says which incarnation and step we were */
    L->restored = calloc(1, sizeof *L->restored);
    char why[CX_ERRLEN];
    int lrc =
        L->restored ? ckpt_learner_load(o->state_dir, L->restored, 0, 0, 0, why, sizeof why) : CX_ENOMEM;
    if (lrc != 0) {
        if (lrc != CX_ENOTFOUND)
            cx_warn("no usable local checkpoint: %s", why);
        free(L->restored);
        L->restored = NULL;
    } else {
        if (L->restored->learner != o->id) {
            cx_warn("local checkpoint belongs to learner %lld, not %lld; ignoring it",
                    (long long)L->restored->learner, (long long)o->id);
            ckpt_learner_cleanup(L->restored);
            free(L->restored);
            L->restored = NULL;
        } else {
            L->incarnation = L->restored->incarnation;
            L->step = L->restored->step;
        }
    }
    if ((rc = join(L, L->http, 1, err, errlen)) != 0)
        goto out;
    if ((rc = pull_all(L)) != 0) {
        rc = cx_fail(err, errlen, CX_EUNAVAIL, "syncer %s unreachable while pulling", o->syncer_url);
        goto out;
    }
    if (pthread_create(&hb, NULL, heartbeat_main, L) == 0)
        hb_started = 1;
    switch (L->cfg.mode) {
    case CONFIG_MODE_DDP:
    case CONFIG_MODE_DDP_ELASTIC:
        rc = ddp_loop(L, err, errlen);
        break;
    case CONFIG_MODE_DILOCO:
        rc = diloco_loop(L, err, errlen);
        break;
    default:
        rc = decoupled_loop(L, err, errlen);
        break;
    }
    if (*stop && L->m) {
        rc = 0; /* a signal is a clean shutdown, whatever was in progress */
    }
    if (rc == 0 && L->m)
        save_checkpoint(L);
    if (rc == 0 && L->m) {
        /* stop the heartbeat thread, then report the final step */
        pthread_mutex_lock(&L->mu);
        L->comm_stop = 1;
        pthread_mutex_unlock(&L->mu);
        if (hb_started)
            pthread_join(hb, NULL);
        hb_started = 0;
        final_heartbeat(L);
        cx_info("fragments received: %lld as delta chains (%lld deltas), %lld in full, %lld delta checks "
                "failed",
                (long long)L->n_delta, (long long)L->n_delta_vers, (long long)L->n_full,
                (long long)L->n_mismatch);
    }
    if (rc == 0 && !*stop) {
        int status;
        pthread_mutex_lock(&L->mu);
        json_t *b =
            json_pack("{s:I, s:I}", "learner", (json_int_t)o->id, "incarnation", (json_int_t)L->incarnation);
        pthread_mutex_unlock(&L->mu);
        json_decref(call_json(L, L->http, "POST", "/v1/leave", b, &status));
        json_decref(b);
        char pcrc[9];
        proto_crc_format(proto_f32_crc(model_params(L->m), L->n), pcrc);
        cx_info("done: %lld steps, %lld tokens, last train loss %.4f, params_crc32c=%s", (long long)L->step,
                (long long)L->tokens, L->train_loss, pcrc);
    }
out:
    pthread_mutex_lock(&L->mu);
    L->comm_stop = 1;
    pthread_mutex_unlock(&L->mu);
    if (hb_started)
        pthread_join(hb, NULL);
    ckpt_writer_free(L->ckw); /* an error path: the write in progress finishes */
    if (L->restored) {
        ckpt_learner_cleanup(L->restored);
        free(L->restored);
    }
    cx_http_client_free(L->http);
    model_free(L->m);
    adamw_free(L->opt);
    data_shard_free(L->shard);
    data_source_free(L->src);
    fragment_table_free(L->ft);
    free(L->gcopy), free(L->gver), free(L->seen_ver);
    free(L->ef), free(L->ef_next), free(L->ef_off);
    free(L->base), free(L->scratch), free(L->wire), free(L->base_version), free(L->frag_steps);
    free(L->frag_tokens), free(L->inflight), free(L->pending), free(L->in), free(L->tg);
    free(L->apply_at), free(L->wait_done), free(L->late_round);
    pthread_cond_destroy(&L->cv);
    pthread_mutex_destroy(&L->mu);
    free(L);
    return rc;
}
