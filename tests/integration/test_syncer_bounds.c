/* test_syncer_bounds.c - issue 13's syncer findings as regressions, against
 * a real syncer on 127.0.0.1: forged or overflowing integers get a 400
 * naming the field and change nothing; token/step claims and contribution
 * norms are bounded; a flood of bad requests grows events.jsonl by O(1)
 * lines; a restart does not re-read the history; a decoupled learner exits
 * promptly on SIGTERM with its checkpoint written; a run with more
 * fragments than the learner's queues once held trains. */
#include "trainer_it.h"

#include <stdint.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>

#include <curl/curl.h>

#include "common/crc32c.h"
#include "trainer/protocol.h"

/* ---- helpers ---- */

typedef struct hdrs {
    char lines[10][96];
    const char *p[11];
    int n;
} hdrs;

static void add(hdrs *h, const char *name, const char *fmt, long long v)
{
    char val[48];
    snprintf(val, sizeof val, fmt, v); /* fmt takes one long long */
    snprintf(h->lines[h->n], 96, "%s: %s", name, val);
    h->p[h->n] = h->lines[h->n];
    h->n++;
    h->p[h->n] = NULL;
}

/* The learner's step its last accepted contribution named (this test's
 * process: Criterion runs each test in its own). */
static long long step_accepted;

/* POST a contribution of d[0..len) to fragment 0 as learner 0 with these
 * claims, and one more header line `extra` ("Name: value") when not NULL;
 * the HTTP status, the parsed answer into *ans (NULL when none; the caller
 * frees it). Its X-Chaosloco-Step follows the accepted ones (a claim of
 * more than a million steps names that many), unless `extra` names one. */
static int post_contribution(tr_run *r, json_int_t inc, json_int_t base, long long tokens, long long steps,
                             const char *extra, const float *d, size_t len, json_t **ans)
{
    hdrs h = {.n = 0};
    long long step = steps > 1000000 ? steps : step_accepted + steps;
    if (extra && strncasecmp(extra, PROTO_H_STEP ":", strlen(PROTO_H_STEP) + 1) == 0)
        step = atoll(extra + strlen(PROTO_H_STEP) + 1);
    else
        add(&h, PROTO_H_STEP, "%lld", step);
    add(&h, PROTO_H_LEARNER, "%lld", 0);
    add(&h, PROTO_H_INCARNATION, "%lld", (long long)inc);
    add(&h, PROTO_H_FRAGMENT, "%lld", 0);
    add(&h, PROTO_H_BASE_VERSION, "%lld", (long long)base);
    add(&h, PROTO_H_TOKENS, "%lld", tokens);
    add(&h, PROTO_H_STEPS, "%lld", steps);
    add(&h, PROTO_H_CRC32C, "%08llx", (long long)cx_crc32c(0, d, len * 4));
    snprintf(h.lines[h.n], 96, "%s: f32", PROTO_H_ENCODING);
    h.p[h.n] = h.lines[h.n];
    h.p[++h.n] = NULL;
    if (extra) {
        snprintf(h.lines[h.n], 96, "%s", extra);
        h.p[h.n] = h.lines[h.n];
        h.p[++h.n] = NULL;
    }
    cx_http_opts o = {.bearer = tr_cred(r, "learner-0")};
    cx_http_client *c = cx_http_client_new(r->url, &o);
    cx_http_result res;
    char err[256];
    cx_http_result_init(&res);
    int rc = cx_http_do(c, "POST", "/v1/fragments/0/contributions", h.p, d, len * 4,
                        "application/octet-stream", 10000, &res, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    *ans = res.body.data ? json_loadb(res.body.data, res.body.len, 0, NULL) : NULL;
    int st = res.status;
    if (st >= 400)
        cr_log_info("contribution: HTTP %d %s", st, res.body.data ? res.body.data : "");
    else if (st == 202 && step > step_accepted)
        step_accepted = step;
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    return st;
}

/* post_contribution without a round header; the answer's "reason" (or "")
 * into reason. */
static int contribute(tr_run *r, json_int_t inc, json_int_t base, long long tokens, long long steps,
                      const float *d, size_t len, char *reason, size_t rlen)
{
    json_t *ans;
    int st = post_contribution(r, inc, base, tokens, steps, NULL, d, len, &ans);
    const char *why = json_string_value(json_object_get(ans, "reason"));
    snprintf(reason, rlen, "%s", why ? why : "");
    json_decref(ans);
    return st;
}

/* POST body (stolen) to path as the learner it names (with its
 * credential); the HTTP status, the error text into err. */
static int post_json(tr_run *r, const char *path, json_t *body, char *err, size_t elen)
{
    char url[160];
    int status = 0;
    snprintf(url, sizeof url, "%s%s", r->url, path);
    json_t *jl = json_object_get(body, "learner");
    const char *cred = json_is_integer(jl) ? tr_learner_cred(r, (long long)json_integer_value(jl)) : NULL;
    json_t *ans = it_http_json("POST", url, body, cred, &status);
    const char *e = json_string_value(json_object_get(ans, "error"));
    snprintf(err, elen, "%s", e ? e : "");
    json_decref(ans);
    json_decref(body);
    return status;
}

static json_int_t join0(tr_run *r, json_int_t inc, size_t *len)
{
    char url[160];
    int status = 0;
    snprintf(url, sizeof url, "%s/v1/join", r->url);
    json_t *b = json_pack("{s:i, s:I}", "learner", 0, "incarnation", inc);
    json_t *ans = it_http_json("POST", url, b, tr_cred(r, "learner-0"), &status);
    json_decref(b);
    cr_assert_eq(status, 200);
    json_int_t got = tr_int(ans, "incarnation");
    if (len)
        *len = (size_t)tr_int(json_array_get(json_object_get(ans, "fragments"), 0), "length");
    json_decref(ans);
    return got;
}

/* Learner 0's seat in a run: what start_joined made. */
typedef struct seat {
    json_int_t inc; /* its incarnation */
    size_t len;     /* fragment 0's length in floats */
    float *d;       /* a contribution of len floats for fragment 0 (free it) */
} seat;

/* Start a syncer in `mode` with one learner and 4 fragments (and --steps
 * steps unless steps is NULL) and join as learner 0 with incarnation 0.
 * Its contribution is a small honest update when honest, else zeros. */
static seat start_joined(tr_run *r, const char *tag, const char *mode, const char *steps, int honest)
{
    /* without steps the list ends before "--steps" */
    const char *args[] = {"--mode",      mode, "--learners", "1",
                          "--fragments", "4",  TR_MODEL,     steps ? "--steps" : NULL,
                          steps,         NULL};
    tr_syncer_start(r, tag, args);
    seat s = {.inc = 0, .len = 0, .d = NULL};
    s.inc = join0(r, 0, &s.len);
    s.d = calloc(s.len, sizeof(float));
    cr_assert_not_null(s.d);
    for (size_t i = 0; honest && i < s.len; i++)
        s.d[i] = 1e-3f * (float)((int)(i % 7) - 3);
    return s;
}

static json_int_t rejected(tr_run *r, const char *reason)
{
    json_t *st = tr_get(r, "/v1/status");
    json_int_t n =
        tr_int(json_object_get(json_object_get(st, "contributions"), "rejected_by_reason"), reason);
    json_decref(st);
    return n;
}

/* Contributions clipped to the norm limit, as status counts them. */
static json_int_t status_clipped(tr_run *r)
{
    json_t *st = tr_get(r, "/v1/status");
    json_int_t n = tr_int(json_object_get(st, "contributions"), "clipped");
    json_decref(st);
    return n;
}

static json_int_t learner0_incarnation(tr_run *r)
{
    json_t *st = tr_get(r, "/v1/status");
    json_int_t inc = tr_int(json_array_get(json_object_get(st, "learners"), 0), "incarnation");
    json_decref(st);
    return inc;
}

static json_int_t version0(tr_run *r)
{
    json_t *st = tr_get(r, "/v1/status");
    json_int_t v = tr_int(json_array_get(json_object_get(st, "fragments"), 0), "version");
    json_decref(st);
    return v;
}

static long file_lines(const char *path, long *bytes)
{
    FILE *f = fopen(path, "r");
    long n = 0, b = 0;
    int c;
    cr_assert(f, "%s", path);
    while ((c = fgetc(f)) != EOF) {
        n += c == '\n';
        b++;
    }
    fclose(f);
    if (bytes)
        *bytes = b;
    return n;
}

/* ---- checked integers at join and heartbeat ---- */

Test(syncer_bounds, forged_integers_get_a_400_naming_the_field, .timeout = 60)
{
    tr_run r = {0};
    const char *args[] = {"--mode", "diloco", "--learners", "2", "--fragments", "4", TR_MODEL, NULL};
    tr_syncer_start(&r, "bounds-int", args);
    char err[512];
    struct {
        json_int_t inc, step;
        const char *field;
    } joins[] = {
        {INT64_MAX, 0, "incarnation"},                 /* once an ASan abort (signed overflow) */
        {((json_int_t)1 << 62) - 1, 0, "incarnation"}, /* once locked the id out for good */
        {1001, 0, "incarnation"},                      /* more than INCARNATION_MAX_STEP above 0 */
        {0, -1, "step"},
        {0, INT64_MAX, "step"},
    };
    for (size_t k = 0; k < sizeof joins / sizeof joins[0]; k++) {
        int st = post_json(
            &r, "/v1/join",
            json_pack("{s:i, s:I, s:I}", "learner", 1, "incarnation", joins[k].inc, "step", joins[k].step),
            err, sizeof err);
        cr_assert_eq(st, 400, "join %zu: HTTP %d %s", k, st, err);
        cr_assert(strstr(err, joins[k].field), "join %zu names '%s': %s", k, joins[k].field, err);
    }
    /* none of them took a seat: both learners still join */
    json_t *st0 = tr_get(&r, "/v1/status");
    cr_assert_eq(json_array_size(json_object_get(st0, "learners")), 0, "no seat taken by a refused join");
    json_decref(st0);
    json_int_t inc = join0(&r, 1000, NULL); /* the bound itself is accepted */
    cr_assert_eq(inc, 1001);
    cr_assert_eq(
        post_json(&r, "/v1/join", json_pack("{s:i, s:i}", "learner", 1, "incarnation", 0), err, sizeof err),
        200, "%s", err);

    /* heartbeats: every field range-checked before the skew arithmetic */
    struct {
        const char *field;
        json_int_t v;
    } hb[] = {
        {"t_real_ms", -INT64_MAX}, /* once an ASan abort */
        {"t_real_ms", INT64_MAX},  {"step", -1},   {"tokens", -5},
        {"tokens", INT64_MAX},     {"cursor", -1}, {"batch", 0},
        {"steps_total", -3},
    };
    for (size_t k = 0; k < sizeof hb / sizeof hb[0]; k++) {
        json_t *b = json_pack("{s:i, s:I, s:i, s:f, s:i, s:f, s:I, s:i}", "learner", 0, "incarnation", inc,
                              "step", 3, "train_loss", 2.0, "tokens", 48, "step_ms", 5.0, "t_real_ms",
                              (json_int_t)(cx_real_ns() / 1000000), "cursor", 48);
        json_object_set_new(b, hb[k].field, json_integer(hb[k].v));
        int st = post_json(&r, "/v1/heartbeat", b, err, sizeof err);
        cr_assert_eq(st, 400, "heartbeat %s=%lld: HTTP %d %s", hb[k].field, (long long)hb[k].v, st, err);
        cr_assert(strstr(err, hb[k].field), "names '%s': %s", hb[k].field, err);
    }
    json_t *b = json_pack("{s:i, s:I, s:i, s:f, s:i, s:f, s:I, s:i}", "learner", 0, "incarnation", inc,
                          "step", 0, "train_loss", -1.0, "tokens", 0, "step_ms", 5.0, "t_real_ms",
                          (json_int_t)(cx_real_ns() / 1000000), "cursor", 0);
    cr_assert_eq(post_json(&r, "/v1/heartbeat", b, err, sizeof err), 400, "negative loss");
    cr_assert(strstr(err, "train_loss"), "%s", err);
    /* nothing changed: the learner's record is as the join left it */
    json_t *st = tr_get(&r, "/v1/status");
    json_t *l0 = json_array_get(json_object_get(st, "learners"), 0);
    cr_assert_eq(tr_int(l0, "incarnation"), inc);
    cr_assert_eq(tr_int(l0, "step"), 0);
    cr_assert_eq(tr_int(l0, "tokens"), 0);
    json_decref(st);
    tr_done(&r);
}

/* ---- claims and norms of contributions ---- */

Test(syncer_bounds, token_claims_are_refused_and_huge_updates_clipped, .timeout = 90)
{
    tr_run r = {0};
    /* one learner in diloco: every accepted contribution merges at once */
    seat s = start_joined(&r, "bounds-claims", "diloco", "600", 1);
    char why[64];
    json_int_t v = version0(&r);
    /* the finding: weight 8.9e35 from one header; and sums that wrapped */
    cr_assert_eq(contribute(&r, s.inc, v, 4611686018427387903LL, 24, s.d, s.len, why, sizeof why), 400);
    cr_assert_str_eq(why, "claim");
    cr_assert_eq(contribute(&r, s.inc, v, 384, 4611686018427387903LL, s.d, s.len, why, sizeof why), 400);
    cr_assert_str_eq(why, "claim");
    /* steps beyond the run's 600 (+H) since the pull */
    cr_assert_eq(contribute(&r, s.inc, v, 16 * 700, 700, s.d, s.len, why, sizeof why), 400);
    cr_assert_str_eq(why, "claim");
    /* more tokens than batch (16) x steps */
    cr_assert_eq(contribute(&r, s.inc, v, 24 * 16 + 1, 24, s.d, s.len, why, sizeof why), 400);
    cr_assert_str_eq(why, "claim");
    cr_assert_eq(rejected(&r, "claim"), 4);
    cr_assert_eq(learner0_incarnation(&r), s.inc, "the learner keeps its seat and incarnation");
    cr_assert_eq(version0(&r), v, "no merge from a refused claim");

    /* warm-up: GUARD_NORM_WARMUP honest contributions, each merged; small enough to pass the
     * warm-up limit (0.1 x the fragment's norm) unclipped, so that they make the median */
    for (size_t i = 0; i < s.len; i++)
        s.d[i] *= 0.1f;
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(contribute(&r, s.inc, version0(&r), 384, 24, s.d, s.len, why, sizeof why), 202, "%s",
                     why);
        cr_assert_eq(version0(&r), v + k + 1, "merged");
    }
    cr_assert_eq(status_clipped(&r), 0, "the warm-up ones are not clipped");
    v = version0(&r);
    double loss = tr_final_eval(&r); /* the eval covers every warm-up merge */
    /* one finite 3e38 per element once made the fragment non-finite for good; it is clipped to
     * the norm limit (10 x the median per step x 24 steps = 10 x the honest norm) and merged */
    float *big = malloc(s.len * sizeof(float));
    cr_assert_not_null(big);
    for (size_t i = 0; i < s.len; i++)
        big[i] = 3e38f;
    long long seq = (long long)tr_last_seq(&r);
    cr_assert_eq(contribute(&r, s.inc, v, 384, 24, big, s.len, why, sizeof why), 202, "%s", why);
    cr_assert_eq(version0(&r), v + 1, "merged, clipped");
    json_t *st = tr_get(&r, "/v1/status");
    cr_assert_eq(tr_int(json_object_get(st, "contributions"), "clipped"), 1);
    cr_assert_eq(tr_int(json_object_get(json_array_get(json_object_get(st, "learners"), 0), "contributions"),
                        "clipped"),
                 1);
    json_decref(st);
    json_t *evs = tr_events(&r, seq), *e, *clip = NULL;
    size_t ei;
    json_array_foreach(evs, ei, e) if (!clip && tr_type(e) && strcmp(tr_type(e), "contribution_clipped") == 0)
        clip = e;
    cr_assert_not_null(clip, "a contribution_clipped event");
    double honest = 0;
    for (size_t i = 0; i < s.len; i++)
        honest += (double)s.d[i] * s.d[i];
    honest = sqrt(honest);
    double bound = json_number_value(json_object_get(clip, "bound"));
    cr_assert_float_eq(bound, 10 * honest, 1e-3 * honest, "bound %g, honest %g", bound, honest);
    cr_assert_lt(json_number_value(json_object_get(clip, "factor")), 1e-30);
    cr_assert_eq(tr_int(clip, "learner"), 0);
    cr_assert_eq(tr_int(clip, "fragment"), 0);
    json_decref(evs);
    double l2 = tr_final_eval(&r);
    cr_assert(isfinite(l2) && isfinite(loss), "the model stayed finite: %f (before %f)", l2, loss);
    v = version0(&r);
    /* an honest one (a bit larger, well within 10x) goes through unclipped */
    for (size_t i = 0; i < s.len; i++)
        big[i] = 3 * s.d[i];
    cr_assert_eq(contribute(&r, s.inc, v, 384, 24, big, s.len, why, sizeof why), 202, "%s", why);
    cr_assert_eq(version0(&r), v + 1);
    cr_assert_eq(status_clipped(&r), 1, "not clipped");
    cr_assert_eq(rejected(&r, "norm"), 0, "a size is never refused");
    /* counted in /metrics too */
    cx_http_client *c = cx_http_client_new(r.url, NULL);
    cx_http_result res;
    char err[256];
    cx_http_result_init(&res);
    cr_assert_eq(cx_http_do(c, "GET", "/metrics", NULL, NULL, 0, NULL, 5000, &res, err, sizeof err), 0);
    cr_assert(strstr(res.body.data,
                     "chaosloco_syncer_contributions_total{result=\"rejected\",reason=\"claim\"} 4"));
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    free(big);
    free(s.d);
    tr_done(&r);
}

/* Rounds are numbered by the syncer: a contribution naming one (valid or
 * not) is a 400 naming X-Chaosloco-Round; one naming none joins the open
 * round or opens the next, and the 202 names it and the version it merges
 * into; a base behind the version is merged (lagged), not refused.
 * X-Chaosloco-Step (required, test_trainer_payloads) numbers it: it covers
 * (step - steps, step], and steps already sent (a replay) are refused as a
 * claim. */
Test(syncer_bounds, rounds_are_numbered_by_the_syncer_and_steps_sent_once, .timeout = 60)
{
    tr_run r = {0};
    /* one learner, K=1: every round is complete ("all") at its first contribution */
    seat s = start_joined(&r, "bounds-rounds", "decoupled", "600", 1);
    json_int_t v = version0(&r);
    json_t *ans = NULL;
    const char *named[] = {"abc", "-1", "3"};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        char line[96];
        snprintf(line, sizeof line, "%s: %s", PROTO_H_ROUND, named[i]);
        cr_assert_eq(post_contribution(&r, s.inc, v, 384, 24, line, s.d, s.len, &ans), 400, "round '%s'",
                     named[i]);
        const char *e = json_string_value(json_object_get(ans, "error"));
        cr_assert(e && strstr(e, PROTO_H_ROUND), "round '%s': the error names the header: %s", named[i],
                  e ? e : "(none)");
        json_decref(ans);
    }
    cr_assert_eq(version0(&r), v, "nothing merged");
    char step[96];
    snprintf(step, sizeof step, "%s: 24", PROTO_H_STEP);
    cr_assert_eq(post_contribution(&r, s.inc, v, 384, 24, step, s.d, s.len, &ans), 202);
    cr_assert_eq(tr_int(ans, "round"), 0, "the first round of fragment 0");
    cr_assert_eq(tr_int(ans, "merges_into"), v + 1);
    json_decref(ans);
    cr_assert_eq(version0(&r), v + 1, "round 0 merged into the version the 202 named");
    /* the same steps again (a replay, or a learner that did not rebase): refused */
    cr_assert_eq(post_contribution(&r, s.inc, v + 1, 384, 24, step, s.d, s.len, &ans), 400);
    cr_assert_str_eq(json_string_value(json_object_get(ans, "reason")), "claim");
    json_decref(ans);
    /* the next steps against the old base: merged, counted as lagged */
    snprintf(step, sizeof step, "%s: 48", PROTO_H_STEP);
    cr_assert_eq(post_contribution(&r, s.inc, v, 384, 24, step, s.d, s.len, &ans), 202);
    cr_assert_eq(tr_int(ans, "round"), 1);
    cr_assert_eq(tr_int(ans, "merges_into"), v + 2);
    json_decref(ans);
    json_t *st = tr_get(&r, "/v1/status");
    json_t *rd = json_object_get(st, "rounds");
    cr_assert_eq(tr_int(rd, "lagged"), 1);
    cr_assert_eq(tr_int(rd, "merged"), 2);
    cr_assert_eq(tr_int(rd, "stale_rejected"), 0);
    json_t *f0 = json_array_get(json_object_get(st, "fragments"), 0);
    cr_assert_eq(tr_int(json_object_get(f0, "round"), "closed"), 1, "round 1 is the last merged");
    json_decref(st);
    free(s.d);
    tr_done(&r);
}

/* ---- the event log: bounded growth, restart reads the tail ---- */

Test(syncer_bounds, a_flood_of_bad_requests_adds_o1_event_lines, .timeout = 90)
{
    tr_run r = {0};
    char path[700], why[64];
    seat s = start_joined(&r, "bounds-flood", "diloco", NULL, 0);
    snprintf(path, sizeof path, "%s/events.jsonl", r.state);
    cx_sleep_ms(200);
    long before = file_lines(path, NULL);
    int64_t t0 = cx_mono_ms();
    int n = 600;
    for (int k = 0; k < n; k++) /* a stale incarnation: rejected after the body is checked */
        cr_assert_eq(contribute(&r, s.inc + 1, 0, 384, 24, s.d, s.len, why, sizeof why), 409);
    int64_t secs = (cx_mono_ms() - t0) / 1000 + 1;
    cx_sleep_ms(1500); /* the last interval's aggregate is written */
    long after = file_lines(path, NULL);
    cr_log_info("%d rejected requests in ~%lld s: events.jsonl grew by %ld lines", n, (long long)secs,
                after - before);
    /* one event per reason per second (+1 for the interval that was open) */
    cr_assert_leq(after - before, secs + 2, "%ld lines for %d rejects in %lld s", after - before, n,
                  (long long)secs);
    cr_assert_eq(rejected(&r, "stale_incarnation"), n, "every reject still counted");
    json_t *evs = tr_events(&r, 0);
    json_int_t counted = 0;
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e) if (strcmp(tr_type(e), "reject") == 0) counted += tr_int(e, "count");
    json_decref(evs);
    cr_assert_eq(counted, n, "the aggregated events' counts add up");
    free(s.d);
    tr_done(&r);
}

/* Start event of the syncer's latest start (seq > since): its log_bytes_read. */
static json_int_t last_start_read(tr_run *r, long long since)
{
    json_t *evs = tr_events(r, since);
    json_int_t b = -1;
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e) if (strcmp(tr_type(e), "start") == 0) b = tr_int(e, "log_bytes_read");
    json_decref(evs);
    return b;
}

Test(syncer_bounds, a_restart_does_not_reread_the_history, .timeout = 120)
{
    tr_run r = {0};
    char path[760];
    const char *args[] = {"--mode", "diloco", "--learners", "1", "--fragments", "4", TR_MODEL, NULL};
    /* the run's state dir, before its first start: 200k lines (~30 MB) of
     * history, as a long flood once left */
    tr_run_init(&r, "bounds-restart", args);
    mkdir(r.state, 0755);
    snprintf(path, sizeof path, "%s/events.jsonl", r.state);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    int lines = 200000;
    for (int k = 1; k <= lines; k++)
        fprintf(f,
                "{\"seq\":%d,\"t_real\":\"2026-01-01T00:00:00.000Z\",\"t_mono_ms\":%d,\"type\":\"reject\","
                "\"learner\":0,\"incarnation\":7,\"fragment\":0,\"reason\":\"checksum\",\"detail\":\"crc32c "
                "mismatch: header 00000001, body 9a3b2c1d\",\"count\":1}\n",
                k, k);
    fclose(f);
    long size = 0;
    file_lines(path, &size);
    tr_syncer_start(&r, NULL, NULL);
    /* first start, no checkpoint: recovery reads only the tail (the version
     * scan, with no checkpoint to start from, reads all of it) */
    json_t *evs = tr_events(&r, (long long)lines);
    cr_assert_eq(tr_int(json_array_get(evs, 0), "seq"), lines + 1, "seq continues after the history");
    json_decref(evs);
    json_int_t first = last_start_read(&r, lines);
    cr_log_info("history %ld bytes; first start (no checkpoint) read %lld bytes", size, (long long)first);
    cr_assert_geq(first, size / 2, "the measure is real: a scan from seq 0 reads the file");
    /* a clean stop writes the final checkpoint; the restart starts after it */
    it_signal(r.syncer, SIGTERM, 0);
    int st = it_wait_exit(r.syncer, 30000);
    cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "clean stop (status %d)", st);
    tr_syncer_start(&r, NULL, NULL);
    json_int_t second = last_start_read(&r, lines);
    cr_log_info("restart read %lld bytes of %ld", (long long)second, size);
    cr_assert_geq(second, 1, "the restart read its tail");
    cr_assert_leq(second, 1 << 20, "a restart reads the tail, not the %ld bytes of history", size);
    /* old events are still served (bisection finds them) */
    json_t *old = tr_events(&r, 190000);
    cr_assert_eq(tr_int(json_array_get(old, 0), "seq"), 190001);
    json_decref(old);
    tr_done(&r);
}

/* ---- learner SIGTERM ---- */

Test(syncer_bounds, a_decoupled_learner_exits_promptly_on_sigterm_with_its_checkpoint, .timeout = 120)
{
    tr_run r = {0};
    const char *args[] = {
        "--mode", "decoupled", "--learners", "1", "--steps", "100000", "--learner-checkpoint-every",
        "0",      TR_MODEL,    NULL};
    tr_syncer_start(&r, "bounds-sigterm", args);
    pid_t a = tr_learner_start(&r, 0, NULL, NULL);
    cr_assert_geq(tr_wait_merges(&r, 8, 60000), 8, "training runs");
    char ckpt[2][760];
    snprintf(ckpt[0], sizeof ckpt[0], "%s/learner0/learner.ckpt.a", r.dir);
    snprintf(ckpt[1], sizeof ckpt[1], "%s/learner0/learner.ckpt.b", r.dir);
    struct stat sb;
    cr_assert(stat(ckpt[0], &sb) != 0 && stat(ckpt[1], &sb) != 0, "no checkpoint before the signal");
    it_signal(a, SIGTERM, 0);
    /* a liveness bound under the agent's 5 s stop grace, not a speed target */
    int st = it_wait_exit(a, 4000);
    if (st == -1)
        it_dump_log(r.dir, "learner0");
    cr_assert(st != -1, "the learner exited within 4 s of SIGTERM");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit 0 (status %d)", st);
    cr_assert(stat(ckpt[0], &sb) == 0 || stat(ckpt[1], &sb) == 0, "its SIGTERM checkpoint was written");
    tr_done(&r);
}

/* ---- capacities ---- */

/* The learner's queues were 64 messages while the config allows P = 256: a
 * full pull on the comm thread (after a rejoin) filled a 64-entry stack
 * array once per fragment, an ASan abort at P > 64. Every capacity now
 * follows CONFIG_FRAGMENTS_MAX. The syncer loses its state dir mid-run, so
 * the learner rejoins, hands its copy back and pulls all 80 fragments on
 * its comm thread; training then goes on. */
Test(syncer_bounds, a_rejoin_pulls_more_fragments_than_any_old_queue, .timeout = 200)
{
    tr_run r = {0};
    const char *args[] = {"--mode", "decoupled", "--learners",  "1",  "--steps", "1000000",
                          "--H",    "80",        "--fragments", "80", TR_MODEL,  NULL};
    tr_syncer_start(&r, "bounds-frags", args);
    pid_t p = tr_learner_start(&r, 0, NULL, NULL);
    cr_assert_geq(tr_wait_merges(&r, 100, 90000), 100, "training runs with 80 fragments");
    it_signal(r.syncer, SIGKILL, 0);
    it_wait_exit(r.syncer, 10000);
    /* lose the state dir; keep the deployer's credentials (docs/security.md) */
    char creds[800], keep[800];
    snprintf(creds, sizeof creds, "%s/credentials", r.state);
    snprintf(keep, sizeof keep, "%s/credentials.kept", r.dir);
    cr_assert_eq(rename(creds, keep), 0);
    it_rm_tree(r.state);
    cr_assert_eq(mkdir(r.state, 0700), 0);
    cr_assert_eq(rename(keep, creds), 0);
    tr_syncer_start(&r, NULL, NULL);
    /* the learner rejoined (incarnation 2) and merges go on past the
     * rebuild, which needs every fragment pulled back */
    cr_assert_geq(tr_wait_merges(&r, 100, 90000), 100, "merges go on after the rejoin");
    json_t *evs = tr_events(&r, 0);
    json_int_t inc = 0;
    cr_assert_geq(tr_find_join(evs, 0, 0, &inc), 0, "learner 0 rejoined");
    tr_assert_pulled_first(evs, 0, inc, 80);
    json_decref(evs);
    int st = 0;
    cr_assert_eq(waitpid(p, &st, WNOHANG), 0, "the learner still runs");
    tr_done(&r);
}

/* ---- fair share of held requests ---- */

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

/* Issue 28 item 3: one learner holding hundreds of long polls (more than
 * the server's 384 request slots) must not get the other learners' calls
 * refused. Learner 0 opens 400 long polls on fragment 0 at once (one curl
 * multi, each waiting up to 20 s for a version that never comes); the
 * syncer lets it hold HOLD_PER_LEARNER (4) of them and answers the rest at
 * once (204, nothing newer). Meanwhile learner 1's pull answers 200 and its
 * own long poll waits, not answered early. */
Test(syncer_bounds, one_learner_holding_long_polls_cannot_starve_the_others, .timeout = 120)
{
    enum { N = 400, HELD = 4 };
    tr_run r = {0};
    const char *args[] = {"--mode", "decoupled", "--learners", "2", "--fragments", "4", TR_MODEL, NULL};
    tr_syncer_start(&r, "bounds-holds", args);
    char url[256], auth0[600];
    snprintf(url, sizeof url, "%s/v1/fragments/0?newer-than=%lld&wait-ms=20000", r.url,
             (long long)version0(&r));
    snprintf(auth0, sizeof auth0, "Authorization: Bearer %s", tr_cred(&r, "learner-0"));
    struct curl_slist *hl = curl_slist_append(NULL, auth0);
    CURLM *m = curl_multi_init();
    CURL *e[N];
    for (int k = 0; k < N; k++) {
        e[k] = curl_easy_init();
        curl_easy_setopt(e[k], CURLOPT_URL, url);
        curl_easy_setopt(e[k], CURLOPT_HTTPHEADER, hl);
        curl_easy_setopt(e[k], CURLOPT_NOBODY, 0L);
        curl_easy_setopt(e[k], CURLOPT_WRITEFUNCTION, discard);
        curl_multi_add_handle(m, e[k]);
    }
    int running = N, done = 0, st204 = 0, other = 0;
    int64_t end = cx_mono_ms() + 30000;
    while (done < N - HELD && cx_mono_ms() < end) {
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            long code = 0;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            done++;
            if (code == 204)
                st204++;
            else
                other++;
        }
        curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    cr_log_info("%d of %d long polls answered: %d at once (204), %d otherwise", done, N, st204, other);
    cr_assert_eq(done, N - HELD, "all but learner 0's share of %d answered at once", HELD);
    json_t *st = tr_get(&r, "/v1/status");
    json_t *held = json_object_get(st, "held_requests");
    cr_assert_eq(tr_int(held, "now"), HELD, "learner 0 holds its share, no more");
    json_int_t early = tr_int(held, "answered_early");
    cr_assert_geq(early, st204, "every 204 was an early answer");
    json_decref(st);
    /* learner 1 is served: a pull, and a long poll of its own that waits */
    snprintf(url, sizeof url, "%s/v1/fragments/0", r.url);
    int status = 0;
    json_decref(it_http_json("GET", url, NULL, tr_cred(&r, "learner-1"), &status));
    cr_assert_eq(status, 200, "learner 1's pull while learner 0 holds its long polls");
    snprintf(url, sizeof url, "%s/v1/fragments/0?newer-than=%lld&wait-ms=300", r.url,
             (long long)version0(&r));
    json_decref(it_http_json("GET", url, NULL, tr_cred(&r, "learner-1"), &status));
    cr_assert_eq(status, 204);
    st = tr_get(&r, "/v1/status");
    cr_assert_eq(tr_int(json_object_get(st, "held_requests"), "answered_early"), early,
                 "learner 1's long poll waited: it was not over its share");
    json_decref(st);
    for (int k = 0; k < N; k++) {
        curl_multi_remove_handle(m, e[k]);
        curl_easy_cleanup(e[k]);
    }
    curl_multi_cleanup(m);
    curl_slist_free_all(hl);
    tr_done(&r);
}

/* A learner whose 202 was lost (a partition cut the answer) carries the
 * accepted steps again in its next contribution. Its new steps are kept
 * and merged at their share; only a contribution with no new step is a
 * replay (partition-one: refusing the overlap refused every later
 * contribution of the healed learner until the run ended). */
Test(syncer_bounds, a_contribution_overlapping_accepted_steps_keeps_its_new_ones, .timeout = 60)
{
    tr_run r = {0};
    seat s = start_joined(&r, "bounds-overlap", "decoupled", "600", 1);
    json_int_t v = version0(&r);
    json_t *ans = NULL;
    char step[96];
    snprintf(step, sizeof step, "%s: 24", PROTO_H_STEP);
    cr_assert_eq(post_contribution(&r, s.inc, v, 384, 24, step, s.d, s.len, &ans), 202);
    json_decref(ans);
    long long seq = (long long)tr_last_seq(&r);
    /* steps 13..36: 13..24 were accepted, 25..36 are new */
    snprintf(step, sizeof step, "%s: 36", PROTO_H_STEP);
    cr_assert_eq(post_contribution(&r, s.inc, v, 384, 24, step, s.d, s.len, &ans), 202,
                 "an overlap with new steps is merged, not refused");
    json_decref(ans);
    json_t *evs = tr_events(&r, seq);
    json_int_t kept = -1, tokens = -1;
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e) if (strcmp(tr_type(e), "contribution") == 0)
    {
        kept = tr_int(e, "steps");
        tokens = tr_int(e, "tokens");
    }
    json_decref(evs);
    cr_assert_eq(kept, 12, "only the 12 new steps count (got %lld)", (long long)kept);
    cr_assert_eq(tokens, 192, "and their share of the tokens (got %lld)", (long long)tokens);
    /* nothing new: a replay, refused */
    cr_assert_eq(post_contribution(&r, s.inc, v + 2, 384, 24, step, s.d, s.len, &ans), 400);
    cr_assert_str_eq(json_string_value(json_object_get(ans, "reason")), "claim");
    json_decref(ans);
    free(s.d);
    tr_done(&r);
}
