/* api.c - the syncer's api component (api.h): helpers, GET /v1/status,
 * GET /v1/events, the route table and its access rules, listening.
 *
 * What it is: request helpers shared by every handler (headers, path and
 * field checks), the read-only status and event routes, the ONE route
 * table and the ONE access table (drawn below) with the server's gate, and
 * syncer_api_listen. What it is not: the handlers of the other routes
 * (each in the file of its component) nor GET /metrics (metrics.c).
 */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/http_server.h"
#include "common/log.h"
#include "common/parse.h"
#include "trainer/credential.h"
#include "trainer/events.h"
#include "numerics/fragment.h"
#include "numerics/merge.h"
#include "trainer/protocol.h"
#include "trainer/syncer/core.h"

/* ---- syncer: HTTP helpers ---- */

const char *syncer_api_req_header(const void *ctx, const char *name)
{
    return cx_http_header((const cx_http_req *)ctx, name);
}

int syncer_api_path_int(const char *s, int64_t max, int64_t *out)
{
    char *end;
    if (!s || !*s || *s == '-' || *s == '+')
        return CX_EINVAL;
    long long v = strtoll(s, &end, 10);
    if (*end || v < 0 || v > max)
        return CX_EINVAL;
    *out = v;
    return 0;
}

json_t *syncer_api_fragments_json(syncer *s)
{
    json_t *a = json_array();
    for (int p = 0; p < s->P; p++) {
        const fragment_range *rg = fragment_ranges(s->ft, p);
        json_array_append_new(
            a, json_pack("{s:i, s:I, s:I, s:I}", "id", p, "offset", (json_int_t)rg[0].offset, "length",
                         (json_int_t)fragment_length(s->ft, p), "version", (json_int_t)s->versions[p]));
    }
    return a;
}

/* 0 when lo <= v <= hi, else a 400 naming the call and the field. */
int syncer_api_check_field(cx_http_resp *resp, const char *call, const char *field, int64_t v, int64_t lo,
                           int64_t hi)
{
    if (v >= lo && v <= hi)
        return 0;
    cx_http_reply_error(resp, 400, "%s: field '%s' is %lld, expected %lld..%lld", call, field, (long long)v,
                        (long long)lo, (long long)hi);
    return -1;
}

int syncer_api_check_real(cx_http_resp *resp, const char *call, const char *field, double v, double lo,
                          double hi)
{
    if (isfinite(v) && v >= lo && v <= hi)
        return 0;
    cx_http_reply_error(resp, 400, "%s: field '%s' is %g, expected %g..%g", call, field, v, lo, hi);
    return -1;
}

/* ---- syncer: GET /v1/status ---- */

static int h_status(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t now = cx_mono_ms();
    pthread_mutex_lock(&s->mu);
    json_t *frags = json_array(), *ls = json_array(), *merges = json_array(), *rej = json_object();
    for (int p = 0; p < s->P; p++) {
        json_t *f = json_pack("{s:i, s:I, s:I}", "id", p, "version", (json_int_t)s->versions[p], "length",
                              (json_int_t)fragment_length(s->ft, p));
        if (!syncer_is_ddp(s)) {
            const frag_round *rd = &s->rounds.frag[p];
            json_object_set_new(f, "round",
                                json_pack("{s:s, s:i, s:o, s:I}", "state", rounds_state_names[rd->state],
                                          "contributions", rd->n, "id",
                                          rd->state != RS_IDLE ? json_integer(rd->id) : json_null(), "closed",
                                          (json_int_t)rd->closed_id));
        }
        json_array_append_new(frags, f);
    }
    for (int i = 0; i < MAX_LEARNERS; i++) {
        const learner_rec *l = &s->members.learners[i];
        if (l->id < 0)
            continue;
        json_array_append_new(
            ls, json_pack("{s:I, s:s, s:I, s:I, s:I, s:f, s:f, s:I, s:f, s:{s:I, s:I, s:I}}", "id",
                          (json_int_t)l->id, "state", members_state_names[l->state], "incarnation",
                          (json_int_t)l->incarnation, "step", (json_int_t)l->step, "tokens",
                          (json_int_t)l->tokens, "train_loss", isfinite(l->train_loss) ? l->train_loss : 0.0,
                          "step_ms", l->step_ms, "clock_skew_ms", (json_int_t)l->clock_skew_ms, "last_seen_s",
                          l->last_seen_ms ? (double)(now - l->last_seen_ms) / 1000.0 : -1.0, "contributions",
                          "accepted", (json_int_t)l->accepted, "rejected", (json_int_t)l->rejected, "clipped",
                          (json_int_t)l->clipped));
        json_t *lj = json_array_get(ls, json_array_size(ls) - 1);
        /* fraction of the merged fragments it pulled after contributing that held its contribution */
        json_object_set_new(lj, "adopted_with_own",
                            l->adopted ? json_real((double)l->adopted_own / (double)l->adopted)
                                       : json_null());
        json_object_set_new(lj, "adopted", json_integer(l->adopted));
        json_object_set_new(lj, "step_wall_ms", json_real(merge_ema_get(&l->step_wall, 0)));
    }
    int64_t first = s->rounds.recent_n > RECENT_MERGES ? s->rounds.recent_n - RECENT_MERGES : 0;
    for (int64_t i = first; i < s->rounds.recent_n; i++) {
        merge_note *m = &s->rounds.recent[i % RECENT_MERGES];
        json_t *parts = json_array();
        for (int j = 0; j < m->n; j++)
            json_array_append_new(parts, json_integer(m->learners[j]));
        json_array_append_new(merges, json_pack("{s:I, s:I, s:I, s:o}", "fragment", (json_int_t)m->fragment,
                                                "version", (json_int_t)m->version, "t_mono_ms",
                                                (json_int_t)m->t_mono_ms, "participants", parts));
    }
    int64_t rejected = 0;
    for (int r = 1; r < PROTO_R_COUNT; r++) {
        json_object_set_new(rej, proto_reason_name((proto_reason)r), json_integer(s->members.rejects[r]));
        rejected += s->members.rejects[r];
    }
    json_t *eval = json_pack("{s:o, s:o, s:I, s:I, s:I}", "loss",
                             isfinite(s->dur.eval_loss) ? json_real(s->dur.eval_loss) : json_null(), "bpb",
                             isfinite(s->dur.eval_loss) ? json_real(s->dur.eval_loss / M_LN2) : json_null(),
                             "step", (json_int_t)s->dur.eval_merges, "merges", (json_int_t)s->dur.eval_merges,
                             "tokens", (json_int_t)s->dur.eval_tokens);
    json_t *o = json_pack(
        "{s:s, s:o, s:I, s:I, s:o, s:o, s:o, s:{s:I, s:I}, s:{s:I, s:I, s:o}, s:I, s:I, s:I, s:i, s:o}",
        "mode", syncer_mode_name(s), "eval", eval, "merges", (json_int_t)s->merges, "tokens_merged",
        (json_int_t)s->tokens_merged, "fragments", frags, "learners", ls, "recent_merges", merges, "bytes",
        "in", (json_int_t)s->bytes_in, "out", (json_int_t)s->bytes_out, "contributions", "accepted",
        (json_int_t)s->accepted_total, "rejected", (json_int_t)rejected, "rejected_by_reason", rej,
        "ddp_step", (json_int_t)s->ddp.step, "longest_merge_gap_ms", (json_int_t)s->rounds.longest_gap_ms,
        "uptime_ms", (json_int_t)(now - s->start_ms), "learners_expected", (int)s->cfg.learners, "loss_floor",
        isfinite(s->entropy_floor) ? json_real(s->entropy_floor) : json_null());
    json_object_set_new(o, "n_params", json_integer((json_int_t)s->n));
    /* merges whose result was not finite or bounded: never applied (guard.h) */
    json_object_set_new(o, "merges_refused", json_integer((json_int_t)s->rounds.merges_refused));
    /* waits (long polls, barriers) now, and those answered at once because
     * their learner was over its share (holds.h) */
    int held = 0;
    for (int b = 0; b < HOLD_BUCKETS; b++)
        held += s->holds.held[b];
    json_object_set_new(o, "held_requests",
                        json_pack("{s:i, s:I}", "now", held, "answered_early", (json_int_t)s->holds.early));
    /* accepted contributions scaled down to the norm limit (guard.h), in contributions{} */
    json_object_set_new(json_object_get(o, "contributions"), "clipped",
                        json_integer((json_int_t)s->rounds.clipped_total));
    /* merge efficiency: merged tokens over trained tokens (not goodput,
     * which weighs useful compute under faults against allocated compute) */
    int64_t trained = members_tokens_trained(s);
    json_object_set_new(o, "tokens_trained", json_integer((json_int_t)trained));
    json_object_set_new(o, "merge_efficiency",
                        trained > 0 ? json_real((double)s->tokens_merged / (double)trained) : json_null());
    if (!syncer_is_ddp(s))
        json_object_set_new(
            o, "rounds",
            json_pack("{s:o, s:I, s:I, s:I, s:I, s:o}", "participants_mean",
                      s->rounds.merged ? json_real((double)s->rounds.parts / (double)s->rounds.merged)
                                       : json_null(),
                      "stale_rejected", (json_int_t)s->rounds.stale_rejected, "merged",
                      (json_int_t)s->rounds.merged, "contributions_merged", (json_int_t)s->rounds.parts,
                      "lagged", (json_int_t)s->rounds.lagged, "lag_mean",
                      s->accepted_total ? json_real((double)s->rounds.lag_sum / (double)s->accepted_total)
                                        : json_null()));
    if (s->cfg.mode == CONFIG_MODE_DECOUPLED) /* steps restarted learners trained and never sent */
        json_object_set_new(o, "lost",
                            json_pack("{s:I, s:I}", "fragment_steps", (json_int_t)s->members.lost_frag_steps,
                                      "tokens", (json_int_t)(s->members.lost_frag_tokens / s->P)));
    char pcrc[9];
    proto_crc_format(proto_f32_crc(s->theta, s->n), pcrc);
    json_object_set_new(o, "params_crc32c", json_string(pcrc));
    if (s->cfg.mode == CONFIG_MODE_DDP_ELASTIC)
        json_object_set_new(o, "elastic_deadline_ms", json_integer((json_int_t)ddp_deadline_ms(s)));
    json_t *fr = json_object();
    int64_t fallbacks = s->deltas.answers_full[FULL_HISTORY] + s->deltas.answers_full[FULL_MISMATCH];
    for (int r = 0; r < FULL_R_COUNT; r++)
        json_object_set_new(fr, deltas_full_reason_names[r], json_integer(s->deltas.answers_full[r]));
    json_object_set_new(
        o, "downstream",
        json_pack("{s:s, s:I, s:I, s:I, s:I, s:o, s:I}", "encoding", config_encoding_name(s->cfg.encoding),
                  "delta", (json_int_t)s->deltas.answers_delta, "delta_versions",
                  (json_int_t)s->deltas.answers_delta_versions, "delta_bytes",
                  (json_int_t)s->deltas.bytes_out_delta, "full_bytes", (json_int_t)s->deltas.bytes_out_full,
                  "full", fr, "fallbacks", (json_int_t)fallbacks));
    json_object_set_new(o, "end",
                        s->members.ended ? json_pack("{s:s, s:I}", "reason", s->members.end_reason, "ms_ago",
                                                     (json_int_t)(now - s->members.end_ms))
                                         : json_null());
    json_object_set_new(
        o, "ms_since_last_merge",
        json_integer(s->rounds.last_merge_ms ? (json_int_t)(now - s->rounds.last_merge_ms) : -1));
    json_object_set_new(o, "rebuild",
                        json_pack("{s:s, s:s, s:I}", "state", rebuild_state_names[s->rebuild.state],
                                  "start_state", dur_start_kind_names[s->start], "rebuilds",
                                  (json_int_t)s->rebuild.count));
    pthread_mutex_unlock(&s->mu);
    cx_http_reply_json(resp, 200, o);
    return 0;
}

/* ---- syncer: GET /v1/events ---- */

static int h_events(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    syncer *s = ctx;
    int64_t since = 0, limit = 10000;
    char why[CX_ERRLEN];
    const char *q;
    if ((q = cx_http_query(req, "since")) &&
        cx_parse_i64(q, "since", 0, INT64_MAX / 2, &since, why, sizeof why)) {
        cx_http_reply_error(resp, 400, "%s", why);
        return 0;
    }
    if ((q = cx_http_query(req, "limit")) && cx_parse_i64(q, "limit", 1, 100000, &limit, why, sizeof why)) {
        cx_http_reply_error(resp, 400, "%s", why);
        return 0;
    }
    cx_buf out;
    cx_buf_init(&out, (size_t)64 << 20);
    events_since(s->ev, since, (size_t)limit, &out);
    cx_http_reply_bytes(resp, 200, "application/x-ndjson", out.data ? out.data : "", out.len);
    cx_buf_cleanup(&out);
    return 0;
}

/* ---- syncer: GET /metrics ---- */

static const cx_http_route routes[] = {
    {"POST", "/v1/join", members_route_join},
    {"POST", "/v1/leave", members_route_leave},
    {"POST", "/v1/heartbeat", members_route_heartbeat},
    {"POST", "/v1/end", members_route_end},
    {"GET", "/v1/fragments/{}", deltas_route_fragment_get},
    {"GET", "/v1/versions", deltas_route_versions},
    {"POST", "/v1/fragments/{}/contributions", rounds_route_contribution},
    {"POST", "/v1/fragments/{}/state", rebuild_route_state},
    {"POST", "/v1/steps/{}/gradients", ddp_route_gradient},
    {"GET", "/v1/optimizer", ddp_route_optimizer},
    {"GET", "/v1/status", h_status},
    {"GET", "/v1/events", h_events},
    {"GET", "/metrics", syncer_api_metrics},
};
/* Control calls that get through a connection flood (http_guard.h). */
static const char *const reserved_routes[] = {"GET /v1/status", NULL};

/* ---- syncer: access ----
 *
 * Who may call which route: ONE table, checked by the server's gate before
 * any body byte is read. A route without a rule is refused (403): the table
 * fails closed, and tests/unit/test_syncer.c walks the route table.
 *   learner  a learner's credential (learner-<i>); the learner id the call
 *            names (X-Chaosloco-Learner header here, the body's "learner"
 *            in the handler) must be <i>, else 403
 *   admin    the admin credential (the harness, an operator)
 *   read     any valid credential, or none when the peer is loopback and
 *            the Host header names a loopback host (a web page reaching
 *            127.0.0.1 through DNS rebinding sends its own name)
 * A wrong credential is 401 on every route, reads included. Every POST
 * must carry Content-Type application/json or application/octet-stream
 * (415): a cross-origin form post can only send text/plain and friends.
 * Refusals are counted and logged as rejects of reason "auth", aggregated
 * like the others. --insecure-no-auth skips the credential checks (not the
 * Content-Type check) and is refused unless the syncer listens on loopback.
 */
typedef enum access_who { ACC_LEARNER, ACC_ADMIN, ACC_READ } access_who;
static const char *const access_names[] = {"learner", "admin", "read"};

typedef struct access_rule {
    const char *method;  /* as in routes[] */
    const char *pattern; /* as in routes[] */
    access_who who;      /* who may call it */
} access_rule;

static const access_rule access_rules[] = {
    {"POST", "/v1/join", ACC_LEARNER},
    {"POST", "/v1/leave", ACC_LEARNER},
    {"POST", "/v1/heartbeat", ACC_LEARNER},
    {"POST", "/v1/end", ACC_ADMIN},
    {"GET", "/v1/fragments/{}", ACC_LEARNER}, /* the model itself: learners only */
    {"GET", "/v1/optimizer", ACC_LEARNER},    /* ddp: the model and its AdamW state */
    {"GET", "/v1/versions", ACC_READ},
    {"POST", "/v1/fragments/{}/contributions", ACC_LEARNER},
    {"POST", "/v1/fragments/{}/state", ACC_LEARNER}, /* rebuild: a learner's copy of the fragment */
    {"POST", "/v1/steps/{}/gradients", ACC_LEARNER},
    {"GET", "/v1/status", ACC_READ},
    {"GET", "/v1/events", ACC_READ},
    {"GET", "/metrics", ACC_READ},
};

static const access_rule *access_find(const char *method, const char *pattern)
{
    for (size_t i = 0; i < sizeof access_rules / sizeof access_rules[0]; i++)
        if (strcmp(access_rules[i].method, method) == 0 && strcmp(access_rules[i].pattern, pattern) == 0)
            return &access_rules[i];
    return NULL;
}

size_t syncer_route_count(void)
{
    return sizeof routes / sizeof routes[0];
}

const char *syncer_route_access(size_t i, const char **method, const char **pattern)
{
    if (i >= syncer_route_count())
        return NULL;
    *method = routes[i].method;
    *pattern = routes[i].pattern;
    const access_rule *r = access_find(routes[i].method, routes[i].pattern);
    return r ? access_names[r->who] : NULL;
}

/* "application/json" or "application/octet-stream", any case, optional
 * parameters. */
static int mutating_type_ok(const char *ct)
{
    static const char *const ok[] = {"application/json", "application/octet-stream"};
    if (!ct)
        return 0;
    while (*ct == ' ')
        ct++;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t n = strlen(ok[i]);
        if (strncasecmp(ct, ok[i], n) != 0)
            continue;
        const char *t = ct + n;
        while (*t == ' ')
            t++;
        if (*t == '\0' || *t == ';')
            return 1;
    }
    return 0;
}

/* The learner id of a request's (already verified) learner credential, or
 * -1 when it carries none. */
static int64_t auth_learner_id(const cx_http_req *req)
{
    const char *h = cx_http_header(req, "Authorization");
    cred_kind k;
    int64_t id = -1;
    if (!h || strncmp(h, "Bearer ", 7) != 0 || cred_parse(h + 7, &k, &id, NULL, 0) != 0 || k != CRED_LEARNER)
        return -1;
    return id;
}

int64_t syncer_api_caller_learner(const syncer *s, const cx_http_req *req)
{
    if (!s->access.insecure)
        return auth_learner_id(req);
    const char *h = cx_http_header(req, PROTO_H_LEARNER);
    int64_t id = -1;
    if (!h || cx_parse_i64(h, PROTO_H_LEARNER, 0, INT64_MAX, &id, NULL, 0) != 0)
        return -1;
    return id;
}

/* Refuse a call (not locked): counted as reason "auth", answered with
 * status and a message; 401s say how to authenticate. */
static void auth_refuse(syncer *s, cx_http_resp *resp, int status, int64_t learner, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void auth_refuse(syncer *s, cx_http_resp *resp, int status, int64_t learner, const char *fmt, ...)
{
    char msg[CX_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&s->mu);
    members_reject_note(s, PROTO_R_AUTH, learner, -1, -1, msg);
    pthread_mutex_unlock(&s->mu);
    if (status == 401)
        cx_http_add_header(resp, "WWW-Authenticate", "Bearer realm=\"chaosloco-syncer\"");
    cx_http_reply_problem(resp, status, proto_reason_name(PROTO_R_AUTH), NULL, "%s", msg);
}

/* In a handler of a learner route: the id the body names must be the
 * credential's. 1 when it may go on; 0 when it was refused (403). */
int syncer_api_learner_is_caller(syncer *s, const cx_http_req *req, cx_http_resp *resp, int64_t id,
                                 const char *call)
{
    if (s->access.insecure)
        return 1;
    int64_t who = auth_learner_id(req);
    if (who == id)
        return 1;
    /* counted against the caller, not the learner it named */
    auth_refuse(s, resp, 403, who, "%s: the credential of learner-%lld cannot act for learner %lld", call,
                (long long)who, (long long)id);
    return 0;
}

static int syncer_gate(void *ctx, cx_http_req *req, const cx_http_route *route, cx_http_resp *resp)
{
    syncer *s = ctx;
    const access_rule *rule = access_find(route->method, route->pattern);
    if (!rule) {
        auth_refuse(s, resp, 403, -1, "%s %s: no access rule for this route (refused)", route->method,
                    route->pattern);
        return CX_EAUTH;
    }
    if (strcmp(req->method, "GET") != 0 && !mutating_type_ok(cx_http_header(req, "Content-Type"))) {
        const char *ct = cx_http_header(req, "Content-Type");
        char v[64];
        cx_utf8_sanitize(ct ? ct : "(none)", v, sizeof v);
        pthread_mutex_lock(&s->mu);
        members_reject_note(s, PROTO_R_AUTH, -1, -1, -1, "Content-Type not application/json or octet-stream");
        pthread_mutex_unlock(&s->mu);
        cx_http_reply_error(resp, 415,
                            "%s %s: Content-Type %s: must be application/json or application/octet-stream",
                            req->method, route->pattern, v);
        return CX_EINVAL;
    }
    if (s->access.insecure) {
        req->auth = "insecure";
        return 0;
    }
    const char *h = cx_http_header(req, "Authorization");
    if (!h) {
        if (rule->who == ACC_READ && cx_http_peer_is_loopback(req) &&
            cx_http_host_is_loopback(cx_http_header(req, "Host"))) {
            req->auth = "loopback";
            return 0;
        }
        auth_refuse(s, resp, 401, -1, "%s %s: needs Authorization: Bearer <credential> (%s)%s", req->method,
                    route->pattern, access_names[rule->who],
                    rule->who == ACC_READ ? "; reads without one only from loopback with a loopback Host"
                                          : "");
        return CX_EAUTH;
    }
    cred_kind kind;
    int64_t id;
    char why[CX_ERRLEN];
    if (strncmp(h, "Bearer ", 7) != 0) {
        auth_refuse(s, resp, 401, -1, "%s %s: Authorization must be 'Bearer <credential>'", req->method,
                    route->pattern);
        return CX_EAUTH;
    }
    if (cred_store_check(s->access.creds, h + 7, &kind, &id, why, sizeof why) != 0) {
        auth_refuse(s, resp, 401, -1, "%s %s: %s", req->method, route->pattern, why);
        return CX_EAUTH;
    }
    static const char *const kind_names[] = {"learner", "admin", "read"};
    if ((rule->who == ACC_LEARNER && kind != CRED_LEARNER) ||
        (rule->who == ACC_ADMIN && kind != CRED_ADMIN)) {
        auth_refuse(s, resp, 403, id, "%s %s: needs the %s credential, not a %s one", req->method,
                    route->pattern, access_names[rule->who], kind_names[kind]);
        return CX_EAUTH;
    }
    if (rule->who == ACC_LEARNER) {
        /* the learner the headers name (tensor calls, pulls) must be the caller */
        const char *lh = cx_http_header(req, PROTO_H_LEARNER);
        int64_t named;
        if (lh && (cx_parse_i64(lh, PROTO_H_LEARNER, 0, PROTO_MAX_LEARNER_ID, &named, NULL, 0) != 0 ||
                   named != id)) {
            char v[32];
            cx_utf8_sanitize(lh, v, sizeof v);
            auth_refuse(s, resp, 403, id, "%s %s: the credential of learner-%lld cannot act for learner %s",
                        req->method, route->pattern, (long long)id, v);
            return CX_EAUTH;
        }
    }
    req->auth = kind_names[kind];
    return 0;
}

static const cx_http_gate syncer_http_gate = {.check = syncer_gate, .refused = NULL};

/* The credential store of o (or --insecure-no-auth); see api.h. */
int syncer_api_access_init(syncer *s, const syncer_opts *o, char *err, size_t errlen)
{
    s->access.insecure = o->insecure_no_auth;
    if (!s->access.insecure) {
        char cdir[1200];
        if (o->credentials_dir) {
            snprintf(cdir, sizeof cdir, "%s", o->credentials_dir);
        } else {
            /* secure by default: the first start makes them, restarts keep them */
            snprintf(cdir, sizeof cdir, "%s/credentials", o->state_dir);
            if (cred_dir_create(cdir, s->cfg.learners, err, errlen) != 0)
                return -1;
        }
        s->access.creds = cred_store_load(cdir, err, errlen);
        if (!s->access.creds)
            return -1;
        cx_info("credentials: %s (%d learners, admin%s)", cdir, cred_store_learners(s->access.creds), "");
        /* the seal key comes with the credentials, not the state dir: a wiped dir still knows it */
        if (seal_key_derive(&s->access.seal, cred_store_admin(s->access.creds), err, errlen) != 0)
            return -1;
    } else {
        cx_warn("--insecure-no-auth: every caller may act as any learner or the admin");
    }
    return 0;
}

void syncer_api_access_cleanup(syncer *s)
{
    cred_store_free(s->access.creds);
    memset(&s->access.seal, 0, sizeof s->access.seal);
    free(s->access.tls_cert);
    if (s->access.tls_key)
        memset(s->access.tls_key, 0, strlen(s->access.tls_key));
    free(s->access.tls_key);
}

/* Serve the routes on o->listen (HTTPS when o->tls_cert/o->tls_key are
 * given; both or neither) with the access gate and the reserved control
 * routes: 0 with s->http set, or a negative cx_err with err (the caller
 * frees s). Start-up only, before any thread runs. */
int syncer_api_listen(syncer *s, const syncer_opts *o, char *err, size_t errlen)
{
    char why[CX_ERRLEN];
    size_t body_max = s->n * 4 + (1 << 20);
    cx_http_server_opts hopts = {.reserved = reserved_routes, .gate = &syncer_http_gate};
    if (cx_http_tls_read(o->tls_cert, o->tls_key, &s->access.tls_cert, &s->access.tls_key, why, sizeof why) !=
        0)
        return cx_fail(err, errlen, CX_EINVAL, "TLS: %s", why);
    hopts.tls_cert_pem = s->access.tls_cert;
    hopts.tls_key_pem = s->access.tls_key;
    s->http = cx_http_server_new_opts(o->listen, routes, sizeof routes / sizeof routes[0], s, body_max,
                                      &hopts, why, sizeof why);
    if (!s->http) {
        return cx_fail(err, errlen, CX_EUNAVAIL, "--listen %s: %s", o->listen, why);
    }
    return 0;
}
