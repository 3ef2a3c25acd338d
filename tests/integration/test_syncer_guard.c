/* test_syncer_guard.c - issue 28 against a real syncer on 127.0.0.1: one
 * learner holding its own valid credential cannot destroy, replace or
 * stall the global model (trainer/syncer/guard.h). The test poses as the
 * learners with the credentials the syncer made (credentials/learner-N.cred)
 * and sends: a contribution of 3e38 per element; one 1000x the honest
 * norm (both clipped, never refused); an honest catch-up of many steps
 * (accepted, clipped only past 4H steps' worth); a heartbeat and contribution claiming steps_total 1e8 and batch
 * 65536; a ddp gradient above the run's clip; a join claiming fragment
 * versions above the published ones. Each
 * case failed on the code before the guard (noted at each). A last case
 * runs a real learner beside those attacks and compares its eval loss with
 * an honest run's. */
#include "trainer_it.h"

#include <stdint.h>

#include "common/crc32c.h"
#include "trainer/protocol.h"
#include "trainer/seal.h"
#include "trainer/syncer/guard.h"

#define FRAGS 4

/* ---- helpers ---- */

/* Start a decoupled syncer for 2 learners over FRAGS fragments with the
 * extra flags (NULL-terminated, may be NULL). */
/* A 6000-step run: room for the numbered contributions (X-Chaosloco-Step,
 * below) a test sends, up to about 40 periods per learner. */
static void start_syncer(tr_run *r, const char *tag, const char *const *extra)
{
    const char *args[40] = {"--mode", "decoupled", "--learners", "2",   "--fragments", "4",
                            TR_MODEL, "--steps",   "6000",       "--H", "24"};
    int n = 0;
    while (args[n])
        n++;
    for (int i = 0; extra && extra[i] && n < 38; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    tr_syncer_start(r, tag, args);
}

/* Join as learner id (its own credential) with holds (stolen, may be
 * NULL); the HTTP status, the answer into *ans (caller frees; may be NULL). */
static int join_as(tr_run *r, int id, json_t *holds, json_t **ans)
{
    char url[160];
    int status = 0;
    snprintf(url, sizeof url, "%s/v1/join", r->url);
    json_t *b = json_pack("{s:i, s:i}", "learner", id, "incarnation", 0);
    if (holds)
        json_object_set_new(b, "holds", holds);
    json_t *a = it_http_json("POST", url, b, tr_learner_cred(r, id), &status);
    json_decref(b);
    if (ans)
        *ans = a;
    else
        json_decref(a);
    return status;
}

/* Join as learner id; its incarnation (asserts 200). */
static json_int_t join(tr_run *r, int id)
{
    json_t *a = NULL;
    int st = join_as(r, id, NULL, &a);
    cr_assert_eq(st, 200, "join learner %d: HTTP %d", id, st);
    json_int_t inc = tr_int(a, "incarnation");
    json_decref(a);
    return inc;
}

/* Fragment p's length (from the status). */
static size_t frag_len(tr_run *r, int p)
{
    json_t *st = tr_get(r, "/v1/status");
    size_t n = (size_t)tr_int(json_array_get(json_object_get(st, "fragments"), (size_t)p), "length");
    json_decref(st);
    return n;
}

static json_int_t version(tr_run *r, int p)
{
    json_t *st = tr_get(r, "/v1/status");
    json_int_t v = tr_int(json_array_get(json_object_get(st, "fragments"), (size_t)p), "version");
    json_decref(st);
    return v;
}

static json_int_t status_int(tr_run *r, const char *k1, const char *k2)
{
    json_t *st = tr_get(r, "/v1/status");
    json_t *o = json_object_get(st, k1);
    json_int_t v = k2 ? tr_int(o, k2) : json_integer_value(o);
    json_decref(st);
    return v;
}

static json_int_t rejected(tr_run *r, const char *reason)
{
    json_t *st = tr_get(r, "/v1/status");
    json_int_t n =
        tr_int(json_object_get(json_object_get(st, "contributions"), "rejected_by_reason"), reason);
    json_decref(st);
    return n;
}

/* The step each learner's last accepted contribution to each fragment
 * named (this test's process: Criterion runs each test in its own). */
static long long step_accepted[8][8];

/* POST d[0..len) to fragment p as learner id (< 8, p < 8) with these
 * claims, numbered after its accepted ones (X-Chaosloco-Step); the HTTP
 * status, the answer's "reason" and "error" into why (may be NULL). */
static int contribute(tr_run *r, int id, json_int_t inc, int p, long long tokens, long long steps,
                      const float *d, size_t len, char *why, size_t wlen)
{
    char h[9][96];
    const char *hp[10];
    cr_assert(id >= 0 && id < 8 && p >= 0 && p < 8);
    long long step = step_accepted[id][p] + steps;
    snprintf(h[0], 96, "%s: %d", PROTO_H_LEARNER, id);
    snprintf(h[1], 96, "%s: %lld", PROTO_H_INCARNATION, (long long)inc);
    snprintf(h[2], 96, "%s: %d", PROTO_H_FRAGMENT, p);
    snprintf(h[3], 96, "%s: %lld", PROTO_H_BASE_VERSION, (long long)version(r, p));
    snprintf(h[4], 96, "%s: %lld", PROTO_H_TOKENS, tokens);
    snprintf(h[5], 96, "%s: %lld", PROTO_H_STEPS, steps);
    snprintf(h[6], 96, "%s: %08x", PROTO_H_CRC32C, cx_crc32c(0, d, len * 4));
    snprintf(h[7], 96, "%s: f32", PROTO_H_ENCODING);
    snprintf(h[8], 96, "%s: %lld", PROTO_H_STEP, step);
    for (int i = 0; i < 9; i++)
        hp[i] = h[i];
    hp[9] = NULL;
    cx_http_opts o = {.bearer = tr_learner_cred(r, id)};
    cx_http_client *c = cx_http_client_new(r->url, &o);
    cx_http_result res;
    char err[256], path[64];
    snprintf(path, sizeof path, "/v1/fragments/%d/contributions", p);
    cx_http_result_init(&res);
    int rc =
        cx_http_do(c, "POST", path, hp, d, len * 4, "application/octet-stream", 10000, &res, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    int st = res.status;
    if (st == 202)
        step_accepted[id][p] = step;
    if (why) {
        json_t *a = res.body.data ? json_loadb(res.body.data, res.body.len, 0, NULL) : NULL;
        const char *rs = json_string_value(json_object_get(a, "reason"));
        const char *e = json_string_value(json_object_get(a, "error"));
        snprintf(why, wlen, "%s: %s", rs ? rs : "", e ? e : "");
        json_decref(a);
    }
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    return st;
}

/* Fragment p as served (full f32) into v[len]; the HTTP status. */
static int fetch(tr_run *r, int p, float *v, size_t len)
{
    cx_http_client *c = cx_http_client_new(r->url, NULL);
    cx_http_result res;
    char path[64], err[256];
    snprintf(path, sizeof path, "/v1/fragments/%d", p);
    const char *auth[] = {tr_auth(r, "learner-0"), NULL};
    cx_http_result_init(&res);
    cr_assert_eq(cx_http_do(c, "GET", path, auth, NULL, 0, NULL, 10000, &res, err, sizeof err), 0, "%s", err);
    int st = res.status;
    if (st == 200) {
        cr_assert_eq(res.body.len, len * 4, "a full f32 fragment");
        proto_f32_decode(res.body.data, len, v);
    }
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    return st;
}

/* Fragment p as served (asserts it is; caller frees), its length in *len. */
static float *served(tr_run *r, int p, size_t *len)
{
    *len = frag_len(r, p);
    float *v = malloc(*len * sizeof *v);
    cr_assert_not_null(v);
    cr_assert_eq(fetch(r, p, v, *len), 200);
    return v;
}

/* 1 when every value of fragment p as served is finite. */
static int fragment_finite(tr_run *r, int p)
{
    size_t len;
    float *v = served(r, p, &len);
    int ok = proto_first_nonfinite(v, len) < 0;
    free(v);
    return ok;
}

/* The L2 norm of fragment p as served. */
static double frag_l2(tr_run *r, int p)
{
    size_t len;
    float *v = served(r, p, &len);
    double l2 = guard_l2(v, len);
    free(v);
    return l2;
}

/* An honest-looking update of len floats, scaled. */
static float *update(size_t len, float scale)
{
    float *d = malloc(len * sizeof *d);
    cr_assert_not_null(d);
    for (size_t i = 0; i < len; i++)
        d[i] = scale * 1e-3f * (float)((int)(i % 7) - 3);
    return d;
}

/* The first event of type with seq > since (new reference), or NULL. */
static json_t *find_event(tr_run *r, const char *type, long long since)
{
    json_t *evs = tr_events(r, since), *e, *found = NULL;
    size_t i;
    json_array_foreach(evs, i, e) if (!found && tr_type(e) && strcmp(tr_type(e), type) == 0) found =
        json_incref(e);
    json_decref(evs);
    return found;
}

/* ---- 1a: weights come from the syncer's config ---- */

/* Old code: the heartbeat's batch and steps_total raised the claim bounds,
 * and the merge weighed the claim: learner 1 got weight ~4e17 against
 * learner 0's 6144. Now at most 2 x an honest H-step contribution. */
Test(syncer_guard, heartbeat_claims_do_not_buy_merge_weight, .timeout = 90)
{
    tr_run r = {0};
    const char *extra[] = {"--quorum", "2", NULL};
    start_syncer(&r, "guard-weight", extra);
    json_int_t inc0 = join(&r, 0), inc1 = join(&r, 1);
    char err[256];
    json_t *hb = json_pack("{s:i, s:I, s:i, s:f, s:I, s:f, s:I, s:i, s:I, s:I}", "learner", 1, "incarnation",
                           inc1, "step", 0, "train_loss", 2.0, "tokens", (json_int_t)0, "step_ms", 5.0,
                           "t_real_ms", (json_int_t)(cx_real_ns() / 1000000), "cursor", 0, "batch",
                           (json_int_t)65536, "steps_total", (json_int_t)100000000);
    char url[160];
    int st = 0;
    snprintf(url, sizeof url, "%s/v1/heartbeat", r.url);
    json_t *a = it_http_json("POST", url, hb, tr_learner_cred(&r, 1), &st);
    json_decref(a);
    json_decref(hb);
    cr_assert_eq(st, 200, "the heartbeat itself is in range");
    size_t len = frag_len(&r, 0);
    float *d = update(len, 1.0f);
    long long seq = (long long)tr_last_seq(&r);
    cr_assert_eq(contribute(&r, 0, inc0, 0, 24 * 16, 24, d, len, err, sizeof err), 202, "%s", err);
    /* the same update, claiming 1e8 steps at batch 65536 */
    cr_assert_eq(contribute(&r, 1, inc1, 0, 100000000LL * 65536, 100000000LL, d, len, err, sizeof err), 202,
                 "%s", err);
    json_t *m = NULL;
    for (int i = 0; i < 100 && !m; i++) {
        m = find_event(&r, "merge", seq);
        if (!m)
            cx_sleep_ms(50);
    }
    cr_assert_not_null(m, "the round of both merged");
    json_t *parts = json_object_get(m, "participants"), *pj;
    double w[2] = {-1, -1};
    size_t i;
    json_array_foreach(parts, i, pj)
    {
        json_int_t id = tr_int(pj, "learner");
        if (id == 0 || id == 1)
            w[id] = json_number_value(json_object_get(pj, "weight"));
    }
    cr_assert(w[0] > 0 && w[1] > 0, "both weighed: %g %g", w[0], w[1]);
    cr_assert_leq(w[1] / w[0], 2.0 + 1e-9, "learner 1 weighs %g, learner 0 %g: at most 2x", w[1], w[0]);
    json_decref(m);
    cr_assert(fragment_finite(&r, 0));
    free(d);
    tr_done(&r);
}

/* ---- 1b: a contribution's size is clipped to the others' ---- */

/* The contribution_clipped events since seq (new reference: an array). */
static json_t *clips(tr_run *r, long long since)
{
    json_t *evs = tr_events(r, since), *out = json_array(), *e;
    size_t i;
    json_array_foreach(evs, i, e) if (tr_type(e) && strcmp(tr_type(e), "contribution_clipped") == 0)
        json_array_append(out, e);
    json_decref(evs);
    return out;
}

/* Contributions clipped, as status counts them. */
static json_int_t clipped(tr_run *r)
{
    return status_int(r, "contributions", "clipped");
}

static double l2_of(const float *d, size_t len)
{
    return guard_l2(d, len);
}

/* Old code (main): no bound before 4 accepted contributions to a fragment
 * (a 1000x one was merged whole), and afterwards a 1000x one was refused
 * with 400 'norm' (which a learner retries forever). Now it is accepted
 * and scaled down: in the warm-up to the fragment's own norm, then to 10x
 * the OTHER learners' median, which the sender cannot raise by filling
 * the ring itself. */
Test(syncer_guard, a_1000x_contribution_is_clipped_to_the_others_norm, .timeout = 120)
{
    tr_run r = {0};
    start_syncer(&r, "guard-norm", NULL);
    json_int_t inc0 = join(&r, 0), inc1 = join(&r, 1);
    size_t len = frag_len(&r, 0);
    /* "honest": 5 % of the fragment's own norm, within the warm-up limit */
    double fl2 = frag_l2(&r, 0);
    float *one = update(len, 1.0f);
    float s = (float)(0.05 * fl2 / l2_of(one, len));
    float *d = update(len, s), *big = update(len, 1000.0f * s), *nine = update(len, 9.0f * s),
          *fifty = update(len, 50.0f * s);
    free(one);
    double nd = l2_of(d, len);
    char why[512];
    /* warm-up: nothing from the others yet; clipped to the fragment's own norm */
    long long seq = (long long)tr_last_seq(&r);
    int st = contribute(&r, 1, inc1, 0, 24 * 16, 24, big, len, why, sizeof why);
    cr_assert_eq(st, 202, "1000x in the warm-up is accepted: HTTP %d %s", st, why);
    json_t *c = clips(&r, seq);
    cr_assert_eq(json_array_size(c), 1, "one contribution_clipped event");
    json_t *e = json_array_get(c, 0);
    cr_assert_eq(tr_int(e, "learner"), 1);
    cr_assert_eq(tr_int(e, "fragment"), 0);
    cr_assert(strstr(json_string_value(json_object_get(e, "why")), "warm-up"), "names the bound");
    double bound = json_number_value(json_object_get(e, "bound"));
    cr_assert_float_eq(bound, GUARD_WARMUP_REL * fl2, 1e-3 * fl2, "bound %g, fragment %g", bound, fl2);
    cr_assert_float_eq(json_number_value(json_object_get(e, "norm")), 1000 * nd, nd, "norm");
    cr_assert_float_eq(json_number_value(json_object_get(e, "factor")), bound / (1000 * nd), 1e-6);
    json_decref(c);
    cr_assert_eq(clipped(&r), 1);
    /* learner 0's honest ones fill the statistic, unclipped */
    for (int k = 0; k < 4; k++)
        cr_assert_eq(contribute(&r, 0, inc0, 0, 24 * 16, 24, d, len, why, sizeof why), 202, "%s", why);
    cr_assert_eq(clipped(&r), 1, "honest contributions are not clipped");
    seq = (long long)tr_last_seq(&r);
    st = contribute(&r, 1, inc1, 0, 24 * 16, 24, big, len, why, sizeof why);
    cr_assert_eq(st, 202, "1000x: HTTP %d %s", st, why);
    c = clips(&r, seq);
    cr_assert_eq(json_array_size(c), 1);
    e = json_array_get(c, 0);
    cr_assert(strstr(json_string_value(json_object_get(e, "why")), "other learners"), "names the bound");
    cr_assert_float_eq(json_number_value(json_object_get(e, "bound")), 10 * nd, 1e-3 * nd,
                       "10 x learner 0's norm");
    json_decref(c);
    /* learner 1 fills the ring with 9x ones (each within 10x of learner 0's: unclipped)... */
    for (int k = 0; k < 24; k++)
        cr_assert_eq(contribute(&r, 1, inc1, 0, 24 * 16, 24, nine, len, why, sizeof why), 202, "%d: %s", k,
                     why);
    cr_assert_eq(clipped(&r), 2);
    /* ...which does not raise its own bound: 50x is still clipped to 10x learner 0's */
    seq = (long long)tr_last_seq(&r);
    cr_assert_eq(contribute(&r, 1, inc1, 0, 24 * 16, 24, fifty, len, why, sizeof why), 202, "%s", why);
    c = clips(&r, seq);
    cr_assert_eq(json_array_size(c), 1);
    cr_assert_float_eq(json_number_value(json_object_get(json_array_get(c, 0), "bound")), 10 * nd, 1e-3 * nd);
    json_decref(c);
    cr_assert_eq(clipped(&r), 3);
    cr_assert_eq(rejected(&r, "norm"), 0, "a size is never refused");
    for (int p = 0; p < FRAGS; p++)
        cr_assert(fragment_finite(&r, p), "fragment %d finite", p);
    double loss = tr_final_eval(&r);
    cr_assert(isfinite(loss), "%g", loss);
    free(d), free(big), free(nine), free(fifty);
    tr_done(&r);
}

/* A learner back from a partition or a restart sends many steps'
 * progress at once. The first guard (f2ebb9e, reverted in 728af76)
 * refused it with 422 'norm' (its norm per min(steps, 2H) above 10x the
 * median: the 96-step one below is 0.83 against 0.42) and the learner
 * retried it for the rest of the run. Main divides by the claimed steps,
 * unbounded: it accepts these, and it fails here only because it clips
 * nothing (an attacker claiming 600 steps gets 25x the bound). Now its
 * limit grows with its steps up to 4H: an honest delta whose norm grows
 * linearly with its steps (the fastest an honest one grows) is merged
 * unclipped up to 4H steps' worth, and past that it is scaled down only by
 * what it exceeds. */
Test(syncer_guard, a_catch_up_of_many_steps_is_accepted, .timeout = 120)
{
    tr_run r = {0};
    start_syncer(&r, "guard-catchup", NULL);
    json_int_t inc0 = join(&r, 0), inc1 = join(&r, 1);
    size_t len = frag_len(&r, 0);
    float *one = update(len, 1.0f);
    float s = (float)(0.01 * frag_l2(&r, 0) / l2_of(one, len));
    free(one);
    float *d = update(len, s), *x4 = update(len, 40.0f * s), *x20 = update(len, 20.0f * s),
          *x80 = update(len, 80.0f * s);
    double nd = l2_of(d, len);
    char why[512];
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(contribute(&r, 0, inc0, 0, 24 * 16, 24, d, len, why, sizeof why), 202, "%s", why);
        cr_assert_eq(contribute(&r, 1, inc1, 0, 24 * 16, 24, d, len, why, sizeof why), 202, "%s", why);
    }
    cr_assert_eq(clipped(&r), 0);
    /* 4H steps moving 4x as far as one period (linear: every step in the same direction) */
    cr_assert_eq(contribute(&r, 1, inc1, 0, 96 * 16, 96, x4, len, why, sizeof why), 202, "%s", why);
    /* 20 periods (480 steps) after a partition, 20x one period's norm (linear again) */
    cr_assert_eq(contribute(&r, 1, inc1, 0, 480 * 16, 480, x20, len, why, sizeof why), 202, "%s", why);
    cr_assert_eq(clipped(&r), 0, "up to 40x an H-step norm: unclipped");
    /* 80x: scaled down to the 4H limit (10 x the median per step x 96 steps = 40x), accepted */
    long long seq = (long long)tr_last_seq(&r);
    cr_assert_eq(contribute(&r, 1, inc1, 0, 480 * 16, 480, x80, len, why, sizeof why), 202, "%s", why);
    json_t *c = clips(&r, seq);
    cr_assert_eq(json_array_size(c), 1);
    json_t *e = json_array_get(c, 0);
    cr_assert_float_eq(json_number_value(json_object_get(e, "bound")), 40 * nd, 1e-3 * nd);
    cr_assert_float_eq(json_number_value(json_object_get(e, "factor")), 0.5, 1e-3);
    json_decref(c);
    cr_assert_eq(rejected(&r, "norm"), 0);
    cr_assert_eq(status_int(&r, "contributions", "rejected"), 0, "nothing refused");
    for (int p = 0; p < FRAGS; p++)
        cr_assert(fragment_finite(&r, p), "fragment %d finite", p);
    free(d), free(x4), free(x20), free(x80);
    tr_done(&r);
}

/* ---- 1b, 1c: 3e38 per element ---- */

/* Old code: the first contributions of a fragment were bounded only by
 * finiteness; 3e38 per element was merged and the fragment became
 * non-finite for good. Now it is clipped to the warm-up bound (the
 * fragment's own norm) and the model stays finite; with the norm bound
 * off (--norm-bound 0) the merge's result is refused. */
Test(syncer_guard, a_3e38_contribution_never_reaches_the_model, .timeout = 90)
{
    tr_run r = {0};
    start_syncer(&r, "guard-3e38", NULL);
    json_int_t inc1 = join(&r, 1);
    size_t len = frag_len(&r, 0);
    float *big = malloc(len * sizeof *big);
    cr_assert_not_null(big);
    for (size_t i = 0; i < len; i++)
        big[i] = 3e38f;
    char why[512];
    double fl2 = frag_l2(&r, 0);
    int st = contribute(&r, 1, inc1, 0, 24 * 16, 24, big, len, why, sizeof why);
    cr_assert_eq(st, 202, "HTTP %d %s", st, why);
    cr_assert_eq(clipped(&r), 1);
    for (int i = 0; i < 100 && version(&r, 0) == 0; i++)
        cx_sleep_ms(50);
    cr_assert_eq(version(&r, 0), 1, "merged, clipped");
    cr_assert(fragment_finite(&r, 0));
    double after = frag_l2(&r, 0);
    cr_assert_leq(after, 1.5 * fl2, "moved by at most about a tenth of its norm: %g before, %g after", fl2,
                  after);
    double loss = tr_final_eval(&r);
    cr_assert(isfinite(loss), "%g", loss);
    tr_done(&r);

    /* the norm bound off: the contribution is accepted, its merge is not applied */
    tr_run r2 = {0};
    const char *off[] = {"--norm-bound", "0", NULL};
    start_syncer(&r2, "guard-3e38-off", off);
    inc1 = join(&r2, 1);
    long long seq = (long long)tr_last_seq(&r2);
    st = contribute(&r2, 1, inc1, 0, 24 * 16, 24, big, len, why, sizeof why);
    cr_assert_eq(st, 202, "HTTP %d %s", st, why);
    json_t *e = NULL;
    for (int i = 0; i < 100 && !e; i++) {
        e = find_event(&r2, "merge_refused", seq);
        if (!e)
            cx_sleep_ms(50);
    }
    cr_assert_not_null(e, "a merge_refused event");
    cr_assert_eq(tr_int(e, "fragment"), 0);
    cr_assert(strstr(json_string_value(json_object_get(e, "reason")), "not finite"), "%s",
              json_string_value(json_object_get(e, "reason")));
    json_decref(e);
    cr_assert_eq(status_int(&r2, "merges_refused", NULL), 1);
    cr_assert_eq(rejected(&r2, "merge"), 1, "the contribution is rejected with reason merge");
    cr_assert_eq(version(&r2, 0), 0, "no version was published");
    cr_assert(fragment_finite(&r2, 0));
    loss = tr_final_eval(&r2);
    cr_assert(isfinite(loss), "%g", loss);
    /* the fragment still merges honest contributions */
    float *d = update(len, 1.0f);
    cr_assert_eq(contribute(&r2, 1, inc1, 0, 24 * 16, 24, d, len, why, sizeof why), 202, "%s", why);
    for (int i = 0; i < 100 && version(&r2, 0) == 0; i++)
        cx_sleep_ms(50);
    cr_assert_eq(version(&r2, 0), 1);
    free(d);
    free(big);
    tr_done(&r2);
}

/* POST g[0..n) as learner 0's gradient for ddp step t; the HTTP status. */
static int post_gradient(tr_run *r, json_int_t inc, long long t, const float *g, size_t n)
{
    char h[3][96], path[64], err[256];
    snprintf(h[0], 96, "%s: 0", PROTO_H_LEARNER);
    snprintf(h[1], 96, "%s: %lld", PROTO_H_INCARNATION, (long long)inc);
    snprintf(h[2], 96, "%s: %08x", PROTO_H_CRC32C, cx_crc32c(0, g, n * 4));
    const char *hp[] = {h[0], h[1], h[2], NULL};
    snprintf(path, sizeof path, "/v1/steps/%lld/gradients", t);
    cx_http_opts o = {.bearer = tr_learner_cred(r, 0)};
    cx_http_client *c = cx_http_client_new(r->url, &o);
    cx_http_result res;
    cx_http_result_init(&res);
    cr_assert_eq(
        cx_http_do(c, "POST", path, hp, g, n * 4, "application/octet-stream", 10000, &res, err, sizeof err),
        0, "%s", err);
    int st = res.status;
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    return st;
}

/* The largest |AdamW first moment| of the syncer's ddp state
 * (GET /v1/optimizer: params | m | v). */
static double adam_m_max(tr_run *r, size_t n)
{
    cx_http_client *c = cx_http_client_new(r->url, NULL);
    cx_http_result res;
    char err[256];
    const char *auth[] = {tr_auth(r, "learner-0"), NULL};
    cx_http_result_init(&res);
    cr_assert_eq(cx_http_do(c, "GET", "/v1/optimizer", auth, NULL, 0, NULL, 10000, &res, err, sizeof err), 0,
                 "%s", err);
    cr_assert_eq(res.status, 200);
    cr_assert_eq(res.body.len, 3 * n * 4, "params | m | v");
    float *m = malloc(n * sizeof *m);
    cr_assert_not_null(m);
    proto_f32_decode(res.body.data + n * 4, n, m);
    double top = 0;
    for (size_t i = 0; i < n; i++)
        top = fmax(top, fabs((double)m[i]));
    free(m);
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    return top;
}

/* ddp: a learner clips its gradient to --grad-clip (1 on the GPT, 20 on
 * the MLP) before it sends it. Old code took any finite gradient into the
 * mean (on the MLP always; on the GPT before the bound came): one of 1e20
 * per element put ~1e19 into AdamW's first moment (and 1e39 into the
 * second, which then stalls every later step). Now it is scaled down to
 * the clip: the moment stays within the clip, a `gradient_clipped` event
 * names it, and an honest-size gradient is taken as it is. args: the
 * syncer's flags (ddp, one learner); clip: the run's --grad-clip. */
static void ddp_gradient_is_clipped(const char *tag, const char *const *args, double clip)
{
    tr_run r = {0};
    tr_syncer_start(&r, tag, args);
    json_int_t inc = join(&r, 0);
    size_t n = (size_t)status_int(&r, "n_params", NULL);
    float *g = malloc(n * sizeof *g);
    cr_assert_not_null(g);
    for (size_t i = 0; i < n; i++)
        g[i] = i % 2 ? 1e20f : -1e20f;
    long long seq = (long long)tr_last_seq(&r);
    cr_assert_eq(post_gradient(&r, inc, 0, g, n), 200, "the one learner's step closes");
    json_t *e = find_event(&r, "gradient_clipped", seq);
    cr_assert_not_null(e, "a gradient_clipped event");
    cr_assert_eq(tr_int(e, "learner"), 0);
    cr_assert_float_eq(json_number_value(json_object_get(e, "bound")), clip * GUARD_GRAD_SLACK, 1e-9);
    json_decref(e);
    cr_assert_eq(status_int(&r, "contributions", "clipped"), 1);
    double m = adam_m_max(&r, n);
    cr_assert_leq(m, clip * GUARD_GRAD_SLACK, "AdamW's first moment within the clip: %g", m);
    /* an honest one (L2 half the clip): not clipped */
    double scale = 0.5 * clip / (1e20 * sqrt((double)n));
    for (size_t i = 0; i < n; i++)
        g[i] = (float)(g[i] * scale);
    cr_assert_eq(post_gradient(&r, inc, 1, g, n), 200);
    cr_assert_eq(status_int(&r, "contributions", "clipped"), 1, "an honest gradient is taken as it is");
    free(g);
    tr_done(&r);
}

Test(syncer_guard, a_ddp_gradient_above_the_clip_is_scaled_to_it, .timeout = 90)
{
    const char *args[] = {"--mode",  "ddp", "--learners",  "1",  "--model",  "gpt", "--context", "16",
                          "--embed", "16",  "--hidden",    "32", "--layers", "1",   "--heads",   "2",
                          "--steps", "100", "--grad-clip", "1",  NULL};
    ddp_gradient_is_clipped("guard-ddp", args, 1.0);
}

/* The MLP too, at its default clip (20). */
Test(syncer_guard, an_mlp_ddp_gradient_above_the_clip_is_scaled_to_it, .timeout = 90)
{
    const char *args[] = {"--mode", "ddp",    "--learners", "1",   "--model",
                          "mlp",    TR_MODEL, "--steps",    "100", NULL};
    ddp_gradient_is_clipped("guard-ddp-mlp", args, 20.0);
}

/* ---- 2: rebuild only from what the syncer published ---- */

static json_t *holds(json_int_t above)
{
    json_t *jv = json_array(), *jc = json_array();
    for (int p = 0; p < FRAGS; p++) {
        json_array_append_new(jv, json_integer(above));
        json_array_append_new(jc, json_string("deadbeef"));
    }
    return json_pack("{s:o, s:o}", "versions", jv, "crc32c", jc);
}

/* Old code: a join holding versions above the syncer's opened a rebuild:
 * the join, every fragment GET and every contribution answered 503
 * "rebuilding" until the window ran out, and the claimed copy replaced
 * the model. */
Test(syncer_guard, a_join_claiming_unpublished_versions_is_ignored, .timeout = 120)
{
    tr_run r = {0};
    start_syncer(&r, "guard-claim", NULL);
    json_int_t inc0 = join(&r, 0);
    size_t len = frag_len(&r, 0);
    float *d = update(len, 1.0f);
    char why[512];
    for (int k = 0; k < 3; k++)
        cr_assert_eq(contribute(&r, 0, inc0, 0, 24 * 16, 24, d, len, why, sizeof why), 202, "%s", why);
    for (int i = 0; i < 100 && version(&r, 0) < 3; i++)
        cx_sleep_ms(50);
    cr_assert_eq(version(&r, 0), 3);
    long long seq = (long long)tr_last_seq(&r);
    json_t *a = NULL;
    int st = join_as(&r, 1, holds(1000), &a);
    cr_assert_eq(st, 200, "the join goes on as a plain join: HTTP %d", st);
    json_decref(a);
    json_t *e = find_event(&r, "rebuild_claim_refused", seq);
    cr_assert_not_null(e, "a rebuild_claim_refused event");
    cr_assert_eq(tr_int(e, "learner"), 1);
    cr_assert_eq(tr_int(e, "version"), 1000);
    json_decref(e);
    cr_assert(fragment_finite(&r, 0), "fragments are served (no 503)");
    cr_assert_eq(contribute(&r, 0, inc0, 0, 24 * 16, 24, d, len, why, sizeof why), 202, "%s", why);

    /* a restarted syncer holding its checkpoint: the same, and the norm
     * statistic came back with it (the median bound, not the warm-up) */
    it_signal(r.syncer, SIGTERM, 0);
    cr_assert_neq(it_wait_exit(r.syncer, 20000), -1, "the syncer stops");
    tr_syncer_start(&r, NULL, NULL);
    json_int_t v = version(&r, 0);
    seq = (long long)tr_last_seq(&r);
    st = join_as(&r, 1, holds(v + 5), &a);
    cr_assert_eq(st, 200, "HTTP %d", st);
    json_int_t inc1 = tr_int(a, "incarnation");
    json_decref(a);
    e = find_event(&r, "rebuild_claim_refused", seq);
    cr_assert_not_null(e, "refused after the restart too");
    json_decref(e);
    cr_assert_eq(version(&r, 0), v, "nothing rebuilt");
    float *big = update(len, 1000.0f);
    seq = (long long)tr_last_seq(&r);
    st = contribute(&r, 1, inc1, 0, 24 * 16, 24, big, len, why, sizeof why);
    cr_assert_eq(st, 202, "HTTP %d %s", st, why);
    json_t *c = clips(&r, seq);
    cr_assert_eq(json_array_size(c), 1, "clipped");
    cr_assert(strstr(json_string_value(json_object_get(json_array_get(c, 0), "why")), "other learners"),
              "the statistic survived the restart: %s",
              json_string_value(json_object_get(json_array_get(c, 0), "why")));
    json_decref(c);
    free(big);
    free(d);
    tr_done(&r);
}

/* Fragment p as served into a malloc'd *v[len] (asserts 200), its CRC32C
 * and the syncer's seal on it (X-Chaosloco-Seal). */
static float *fetch_sealed(tr_run *r, int p, size_t len, uint32_t *crc, char seal[SEAL_HEX + 2])
{
    cx_http_client *c = cx_http_client_new(r->url, NULL);
    cx_http_result res;
    char path[64], err[256], fc[16];
    snprintf(path, sizeof path, "/v1/fragments/%d", p);
    const char *auth[] = {tr_auth(r, "learner-0"), NULL};
    cx_http_result_init(&res);
    cr_assert_eq(cx_http_do(c, "GET", path, auth, NULL, 0, NULL, 10000, &res, err, sizeof err), 0, "%s", err);
    cr_assert_eq(res.status, 200);
    cr_assert_eq(res.body.len, len * 4);
    cr_assert_eq(cx_http_result_header(&res, PROTO_H_FRAGMENT_CRC32C, fc, sizeof fc), 0);
    cr_assert_eq(proto_crc_parse(fc, crc), 0);
    cr_assert_eq(cx_http_result_header(&res, PROTO_H_SEAL, seal, SEAL_HEX + 2), 0, "a sealed fragment");
    float *v = malloc(len * sizeof *v);
    cr_assert_not_null(v);
    proto_f32_decode(res.body.data, len, v);
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    return v;
}

/* holds with fragment 0 at version v0 (crc0, seal0) and the others at 0. */
static json_t *holds0(json_int_t v0, uint32_t crc0, const char *seal0)
{
    json_t *jv = json_array(), *jc = json_array(), *js = json_array();
    for (int p = 0; p < FRAGS; p++) {
        char b[9];
        proto_crc_format(p == 0 ? crc0 : 0, b);
        json_array_append_new(jv, json_integer(p == 0 ? v0 : 0));
        json_array_append_new(jc, json_string(b));
        json_array_append_new(js, json_string(p == 0 ? seal0 : ""));
    }
    return json_pack("{s:o, s:o, s:o}", "versions", jv, "crc32c", jc, "seal", js);
}

/* Old code: a syncer that lost its state dir (no checkpoint, no event log:
 * it cannot tell a wiped dir from a new run) took the newest copy any one
 * learner reported, so one learner's credential replaced the model (a
 * claim of version 1000 with values of its choosing). Now a report counts
 * only with the seal the syncer put on the fragment when it served it
 * (keyed by the admin credential, which survives the state dir): the
 * liar's claims, unsealed or with a seal lifted from another version, are
 * ignored, and the rebuild takes the honest learner's sealed copy. */
Test(syncer_guard, a_wiped_state_dir_rebuilds_only_from_sealed_copies, .timeout = 120)
{
    tr_run r = {0};
    start_syncer(&r, "guard-wiped", NULL);
    json_int_t inc0 = join(&r, 0);
    size_t len = frag_len(&r, 0);
    float *d = update(len, 1.0f);
    char why[512], seal[SEAL_HEX + 2];
    for (int k = 0; k < 3; k++)
        cr_assert_eq(contribute(&r, 0, inc0, 0, 24 * 16, 24, d, len, why, sizeof why), 202, "%s", why);
    for (int i = 0; i < 100 && version(&r, 0) < 3; i++)
        cx_sleep_ms(50);
    json_int_t v = version(&r, 0);
    cr_assert_geq(v, 1);
    uint32_t crc;
    float *copy = fetch_sealed(&r, 0, len, &crc, seal); /* what learner 0 holds */

    it_signal(r.syncer, SIGTERM, 0);
    cr_assert_neq(it_wait_exit(r.syncer, 20000), -1, "the syncer stops");
    tr_lose_state_dir(&r);
    tr_syncer_start(&r, NULL, NULL);
    cr_assert_eq(version(&r, 0), 0, "a wiped dir starts from the initial model");

    /* the liar (learner 1's own credential): a claim without a seal, and
     * one with learner 0's seal on another version */
    long long seq = (long long)tr_last_seq(&r);
    cr_assert_eq(join_as(&r, 1, holds0(1000, 0xdeadbeef, ""), NULL), 200,
                 "an unsealed claim opens no rebuild");
    cr_assert_eq(join_as(&r, 1, holds0(1000, crc, seal), NULL), 200, "a lifted seal opens no rebuild");
    json_t *e = find_event(&r, "rebuild_claim_refused", seq);
    cr_assert_not_null(e, "a rebuild_claim_refused event");
    cr_assert_eq(tr_int(e, "learner"), 1);
    cr_assert_str_eq(json_string_value(json_object_get(e, "reason")), "unsealed");
    json_decref(e);
    cr_assert(fragment_finite(&r, 0), "fragments are served (no 503)");

    /* the honest learner's sealed copy: asked for, uploaded, rebuilt */
    json_t *a = NULL;
    cr_assert_eq(join_as(&r, 0, holds0(v, crc, seal), &a), 503, "a sealed copy opens the rebuild");
    json_t *rb = json_object_get(a, "rebuild");
    json_int_t inc = tr_int(rb, "incarnation");
    cr_assert_eq(json_array_size(json_object_get(rb, "upload")), 1, "fragment 0 is asked for");
    json_decref(a);
    unsigned char *wire = malloc(len * 4);
    cr_assert_not_null(wire);
    proto_f32_encode(copy, len, wire);
    char h[5][96], err[256];
    snprintf(h[0], 96, "%s: 0", PROTO_H_LEARNER);
    snprintf(h[1], 96, "%s: %lld", PROTO_H_INCARNATION, (long long)inc);
    snprintf(h[2], 96, "%s: 0", PROTO_H_FRAGMENT);
    snprintf(h[3], 96, "%s: %lld", PROTO_H_VERSION, (long long)v);
    snprintf(h[4], 96, "%s: %08x", PROTO_H_CRC32C, cx_crc32c(0, wire, len * 4));
    const char *hdrs[] = {h[0], h[1], h[2], h[3], h[4], tr_auth(&r, "learner-0"), NULL};
    cx_http_client *c = cx_http_client_new(r.url, NULL);
    cx_http_result res;
    cx_http_result_init(&res);
    cr_assert_eq(cx_http_do(c, "POST", "/v1/fragments/0/state", hdrs, wire, len * 4,
                            "application/octet-stream", 10000, &res, err, sizeof err),
                 0, "%s", err);
    cr_assert_eq(res.status, 200, "the upload is taken: HTTP %d", res.status);
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    free(wire);
    /* the window: 20 s at most. The rebuilt version shows in the status
     * while the checkpoint is written, before fragments are served again
     * (503 until the state reads "none"): wait for both. */
    json_int_t now = 0;
    int serving = 0;
    for (int i = 0; i < 200; i++) {
        json_t *st = tr_get(&r, "/v1/status");
        now = tr_int(json_array_get(json_object_get(st, "fragments"), 0), "version");
        const char *rs = json_string_value(json_object_get(json_object_get(st, "rebuild"), "state"));
        serving = rs && strcmp(rs, "none") == 0;
        json_decref(st);
        if (now > v && serving)
            break;
        cx_sleep_ms(100);
    }
    cr_assert(serving, "the rebuild ends within its window");
    cr_assert_gt(now, v, "rebuilt above the honest copy's version");
    cr_assert_lt(now, 1000, "not at the liar's");
    uint32_t got;
    char seal2[SEAL_HEX + 2];
    float *after = fetch_sealed(&r, 0, len, &got, seal2);
    cr_assert_eq(got, crc, "fragment 0 is learner 0's copy");
    free(after);
    free(copy);
    free(d);
    tr_done(&r);
}

/* ddp: a syncer with no record of what it published (a new run, or a
 * wiped state dir: it cannot tell them apart) used to take one learner's
 * claimed state, parameters and AdamW moments, as the model. A ddp copy
 * counts only with the syncer's seal on the whole state of its step (a
 * real ddp learner's: test_trainer_rebuild ddp_state_dir_deleted). */
Test(syncer_guard, a_wiped_ddp_syncer_ignores_an_unsealed_claim, .timeout = 60)
{
    tr_run r = {0};
    const char *args[] = {"--mode",  "ddp", "--learners", "2",       "--fragments", "4",
                          "--model", "mlp", TR_MODEL,     "--steps", "100",         NULL};
    tr_syncer_start(&r, "guard-ddp-claim", args);
    long long seq = (long long)tr_last_seq(&r);
    json_t *a = NULL;
    cr_assert_eq(join_as(&r, 1, holds(1000), &a), 200, "an unsealed claim opens no rebuild");
    json_decref(a);
    json_t *e = find_event(&r, "rebuild_claim_refused", seq);
    cr_assert_not_null(e, "a rebuild_claim_refused event");
    cr_assert_eq(tr_int(e, "learner"), 1);
    cr_assert_str_eq(json_string_value(json_object_get(e, "reason")), "unsealed");
    json_decref(e);
    json_t *st = tr_get(&r, "/v1/status");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "rebuild"), "state")), "none");
    json_decref(st);
    tr_done(&r);
}

/* ---- a real learner beside the attacks ---- */

/* Learner 0 trains 120 steps (decoupled, K=1, partial scale off so that
 * learner 1's seat does not change its merges); with attack, the test,
 * as learner 1 with its own credential, sends every attack above once
 * learner 0 has merged, then leaves. The final eval loss. */
static double run_learner(const char *tag, int attack)
{
    tr_run r = {0};
    const char *extra[] = {"--partial-scale", "off", "--eval-every-ms", "500", NULL};
    start_syncer(&r, tag, extra);
    const char *steps[] = {"--steps", "120", NULL};
    pid_t l0 = tr_learner_start(&r, 0, steps, NULL);
    if (attack) {
        for (int i = 0; i < 600 && tr_merges(&r) < 2; i++) /* 60 s at most */
            cx_sleep_ms(100);
        json_int_t v = 0;
        for (int p = 0; p < FRAGS; p++)
            v = version(&r, p) > v ? version(&r, p) : v;
        json_t *a = NULL;
        cr_assert_eq(join_as(&r, 1, holds(v + 100), &a), 200, "the claim opens no rebuild");
        json_int_t inc1 = tr_int(a, "incarnation");
        json_decref(a);
        char why[512];
        json_t *evs = tr_events(&r, 0), *e;
        for (int p = 0; p < FRAGS; p++) {
            size_t len = frag_len(&r, p), i;
            /* 1000x the norm of learner 0's last contribution to p, or of
             * the fragment itself (floored) when that is larger: over the median
             * bound and over the warm-up one alike, however many honest
             * contributions the syncer has seen by now */
            double honest = 0;
            json_array_foreach(evs, i, e) if (strcmp(tr_type(e), "contribution") == 0 &&
                                              tr_int(e, "fragment") == p && tr_int(e, "learner") == 0)
                honest = json_number_value(json_object_get(e, "update_norm"));
            double fl2 = frag_l2(&r, p), floor = GUARD_FRAG_FLOOR * sqrt((double)len);
            honest = fl2 > honest ? fl2 : honest;
            honest = floor > honest ? floor : honest;
            float *big = update(len, 1.0f), *huge = malloc(len * sizeof *huge);
            double bn = 0;
            for (size_t k = 0; k < len; k++)
                bn += (double)big[k] * big[k];
            for (size_t k = 0; honest > 0 && k < len; k++)
                big[k] = (float)(big[k] * 1000.0 * honest / sqrt(bn));
            if (!(honest > 0))
                for (size_t k = 0; k < len; k++)
                    big[k] *= 1000.0f;
            cr_assert_not_null(huge);
            for (size_t k = 0; k < len; k++)
                huge[k] = 3e38f;
            long long seq = (long long)tr_last_seq(&r);
            int st = contribute(&r, 1, inc1, p, 24 * 16, 24, huge, len, why, sizeof why);
            cr_assert_eq(st, 202, "fragment %d, 3e38: HTTP %d %s", p, st, why);
            st = contribute(&r, 1, inc1, p, 24 * 16, 24, big, len, why, sizeof why);
            cr_assert_eq(st, 202, "fragment %d, 1000 x %g: HTTP %d %s", p, honest, st, why);
            /* learner 1's clips only: learner 0 trains on meanwhile, and
             * its own warm-up clips may land between the two posts */
            json_t *c = clips(&r, seq), *ce;
            size_t ci, mine = 0;
            json_array_foreach(c, ci, ce) mine += tr_int(ce, "learner") == 1;
            cr_assert_eq(mine, 2, "fragment %d: both clipped (%zu of learner 1's, %zu in all)", p, mine,
                         json_array_size(c));
            json_decref(c);
            free(big);
            free(huge);
        }
        json_decref(evs);
        char url[160];
        int st = 0;
        snprintf(url, sizeof url, "%s/v1/leave", r.url);
        json_t *b = json_pack("{s:i, s:I}", "learner", 1, "incarnation", inc1);
        json_decref(it_http_json("POST", url, b, tr_learner_cred(&r, 1), &st));
        json_decref(b);
        cr_assert_eq(st, 200);
    }
    tr_expect_exit0(&r, l0, 0, 100000);
    for (int p = 0; p < FRAGS; p++)
        cr_assert(fragment_finite(&r, p), "fragment %d finite", p);
    double loss = tr_final_eval(&r);
    tr_done(&r);
    return loss;
}

/* Old code: the 3e38 contribution was merged (no bound in the warm-up) and
 * the eval loss became NaN. */
Test(syncer_guard, a_learner_under_attack_trains_like_an_honest_one, .timeout = 240)
{
    double honest = run_learner("guard-honest", 0), attacked = run_learner("guard-attacked", 1);
    cr_log_info("eval loss after 120 steps: honest %.4f, beside the attacks %.4f", honest, attacked);
    cr_assert(isfinite(honest) && isfinite(attacked), "%g %g", honest, attacked);
    /* the A/A noise of this short run is wide: decoupled timing and OpenBLAS
     * gave honest runs 4.41-5.12 on one box (and 5.08 beside the attacks
     * once), so 25 %; an unbounded attack ends non-finite or far above */
    cr_assert_leq(fabs(attacked - honest), 0.25 * honest, "honest %.4f, attacked %.4f", honest, attacked);
}
