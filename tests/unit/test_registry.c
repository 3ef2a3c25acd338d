/* test_registry.c - the agent's fault registry: validation changes nothing,
 * persistence before apply, expiry, revert reasons, and the crash sweep
 * round trip (a registry dropped without reverting is swept by the next). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/registry.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/file.h"

/* ---- a fake fault kind that records what was done to it ---- */

static int n_apply, n_revert, n_sweep, n_tick;
static int persisted_at_apply; /* faults.json held the fault when apply ran */
static char sweep_marker[64];  /* undo record seen by sweep */
static char g_dir[256];

typedef struct fake_ctx {
    int fail_apply;
    int64_t marker;
} fake_ctx;

static int fake_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    (void)seed;
    int fail = 0;
    json_int_t marker = 0;
    json_error_t je;
    if (json_unpack_ex(params, &je, JSON_STRICT, "{s?:b,s?:I}", "fail_apply", &fail, "marker", &marker) < 0)
        return cx_fail(err, errlen, CX_EINVAL, "params: %s", je.text);
    if (marker < 0)
        return cx_fail(err, errlen, CX_EINVAL, "params.marker: must be >= 0");
    fake_ctx *c = calloc(1, sizeof *c);
    c->fail_apply = fail;
    c->marker = marker;
    *ctx = c;
    return 0;
}

static int fake_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    fake_ctx *c = ctx;
    (void)t;
    char path[300];
    snprintf(path, sizeof path, "%s/faults.json", g_dir);
    char *data = NULL;
    size_t len = 0;
    if (cx_file_read(path, 1 << 20, &data, &len, NULL, 0) == 0) {
        char needle[64];
        snprintf(needle, sizeof needle, "\"marker-%lld\"", (long long)c->marker);
        if (strstr(data, needle))
            persisted_at_apply++;
        free(data);
    }
    if (c->fail_apply)
        return cx_fail(err, errlen, CX_ENOTSUP, "fake: asked to fail");
    n_apply++;
    json_object_set_new(evidence, "applied", json_true());
    return 0;
}

static void fake_tick(void *ctx, inj_target *t, int64_t now)
{
    (void)ctx;
    (void)t;
    (void)now;
    n_tick++;
}

static int fake_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    (void)ctx;
    (void)t;
    (void)err;
    (void)errlen;
    n_revert++;
    return 0;
}

static json_t *fake_undo(void *ctx)
{
    fake_ctx *c = ctx;
    char m[64];
    snprintf(m, sizeof m, "marker-%lld", (long long)c->marker);
    return json_pack("{s:s}", "marker", m);
}

static int fake_sweep(json_t *record, inj_target *t, char *err, size_t errlen)
{
    (void)t;
    const char *m = json_string_value(json_object_get(record, "marker"));
    if (!m)
        return cx_fail(err, errlen, CX_EINVAL, "no marker");
    snprintf(sweep_marker, sizeof sweep_marker, "%s", m);
    n_sweep++;
    return 0;
}

static void fake_free(void *ctx)
{
    free(ctx);
}

static const injector fake_inj = {
    .type = "fake",
    .summary = "test double",
    .prepare = fake_prepare,
    .apply = fake_apply,
    .tick = fake_tick,
    .revert = fake_revert,
    .undo_record = fake_undo,
    .sweep = fake_sweep,
    .free = fake_free,
};

/* ---- fakes with the traits of the kinds the stop rule acts on ----
 *
 * "pause", "straggle", "cpu", "kill", "preempt": nothing is signalled; each
 * call is appended to g_log ("apply:pause revert:pause ...") so a test can
 * check the order. cpu's evidence.method is its params.method, and "auto"
 * falls back to "duty" unless g_cpu_cgroup is set; preempt's evidence
 * carries grace_ms like the real one. */

static char g_log[512];
static int g_cpu_cgroup; /* 1: cpu "auto"/"cgroup" find a writable cgroup */
static pid_t g_pid;      /* pid the fake target lends (0: no unit) */

typedef struct stop_ctx {
    char type[16];
    char method[16];
    int64_t grace_ms;
} stop_ctx;

static void log_call(const char *what, const char *type)
{
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "%s%s:%s", n ? " " : "", what, type);
}

static int stop_prepare_as(const char *type, json_t *params, void **ctx, char *err, size_t errlen)
{
    const char *method = "auto";
    json_int_t grace = 5000;
    json_error_t je;
    if (json_unpack_ex(params, &je, JSON_STRICT, "{s?:s,s?:I}", "method", &method, "grace_ms", &grace) < 0)
        return cx_fail(err, errlen, CX_EINVAL, "params: %s", je.text);
    stop_ctx *c = calloc(1, sizeof *c);
    snprintf(c->type, sizeof c->type, "%s", type);
    snprintf(c->method, sizeof c->method, "%s", method);
    c->grace_ms = grace;
    *ctx = c;
    return 0;
}

#define STOP_PREPARE(name)                                                                                   \
    static int prepare_##name(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)           \
    {                                                                                                        \
        (void)seed;                                                                                          \
        return stop_prepare_as(#name, params, ctx, err, errlen);                                             \
    }
STOP_PREPARE(pause)
STOP_PREPARE(straggle)
STOP_PREPARE(cpu)
STOP_PREPARE(kill)
STOP_PREPARE(preempt)

static int stop_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    stop_ctx *c = ctx;
    if (t->pid <= 0)
        return cx_fail(err, errlen, CX_ENOUNIT, "unit is not running");
    if (strcmp(c->type, "cpu") == 0) {
        const char *m = c->method;
        if (strcmp(m, "cgroup") == 0 && !g_cpu_cgroup)
            return cx_fail(err, errlen, CX_ENOTSUP, "no writable cpu cgroup: fake");
        if (strcmp(m, "auto") == 0)
            m = g_cpu_cgroup ? "cgroup" : "duty";
        json_object_set_new(evidence, "method", json_string(m));
    }
    if (strcmp(c->type, "preempt") == 0)
        json_object_set_new(evidence, "grace_ms", json_integer(c->grace_ms));
    log_call("apply", c->type);
    return 0;
}

static int stop_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    (void)t, (void)err, (void)errlen;
    log_call("revert", ((stop_ctx *)ctx)->type);
    return 0;
}

static json_t *stop_undo(void *ctx)
{
    (void)ctx;
    return NULL;
}

/* Each fake declares the traits of the kind it is named after: the stop
 * rule goes by traits, not names. */
#define STOP_INJ(name, traits_, nonstop_)                                                                    \
    static const injector stop_##name = {.type = #name,                                                      \
                                         .summary = "test double",                                           \
                                         .traits = traits_,                                                  \
                                         .nonstop_method = nonstop_,                                         \
                                         .prepare = prepare_##name,                                          \
                                         .apply = stop_apply,                                                \
                                         .revert = stop_revert,                                              \
                                         .undo_record = stop_undo,                                           \
                                         .free = fake_free};
STOP_INJ(pause, INJ_TRAIT_STOPS_UNIT, NULL)
STOP_INJ(straggle, INJ_TRAIT_STOPS_UNIT, NULL)
STOP_INJ(cpu, INJ_TRAIT_STOPS_UNIT, "cgroup")
STOP_INJ(kill, INJ_TRAIT_TERMINATES, NULL)
STOP_INJ(preempt, INJ_TRAIT_TERMINATES, NULL)

static const injector *fake_find(const char *type)
{
    static const injector *const all[] = {&fake_inj,     &stop_pause, &stop_straggle, &stop_cpu, &stop_kill,
                                          &stop_preempt, NULL};
    for (const injector *const *p = all; *p; p++)
        if (strcmp(type, (*p)->type) == 0)
            return *p;
    return NULL;
}

static int tget(void *ctx, const char *name, inj_target *t, char *err, size_t errlen)
{
    (void)ctx;
    memset(t, 0, sizeof *t);
    if (strcmp(name, "unit") != 0)
        return cx_fail(err, errlen, CX_EINVAL, "target: unknown target '%s'", name);
    t->pidfd = -1;
    t->pid = g_pid;
    t->state_dir = g_dir;
    return 0;
}

static void tput(void *ctx, inj_target *t)
{
    (void)ctx;
    (void)t;
}

static const reg_hooks hooks = {.target_get = tget, .target_put = tput, .find = fake_find};

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/cx-test-registry-XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
    n_apply = n_revert = n_sweep = n_tick = persisted_at_apply = 0;
    sweep_marker[0] = '\0';
    g_log[0] = '\0';
    g_cpu_cgroup = 0;
    g_pid = 0;
}

static void teardown(void)
{
    char path[300];
    const char *files[] = {"faults.json", "faults.json.corrupt", NULL};
    for (int i = 0; files[i]; i++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, files[i]);
        unlink(path);
    }
    rmdir(g_dir);
}

/* Number of faults persisted in faults.json (-1 when absent). */
static int persisted_count(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/faults.json", g_dir);
    json_t *root = json_load_file(path, 0, NULL);
    if (!root)
        return -1;
    int n = (int)json_array_size(json_object_get(root, "faults"));
    json_decref(root);
    return n;
}

static reg *mk(void)
{
    char err[CX_ERRLEN];
    reg *r = reg_new(g_dir, 60000, &hooks, err, sizeof err);
    cr_assert_not_null(r, "%s", err);
    return r;
}

static int create(reg *r, const char *type, int64_t duration, json_t *params, json_t **rec, char *err)
{
    reg_spec s = {.type = type, .params = params, .duration_ms = duration, .origin = "api"};
    return reg_create(r, &s, rec, err, CX_ERRLEN);
}

TestSuite(registry, .init = setup, .fini = teardown);

Test(registry, persists_before_apply_and_sweeps_after_a_crash)
{
    reg *r = mk();
    json_t *params = json_pack("{s:I}", "marker", (json_int_t)41);
    json_t *rec = NULL;
    char err[CX_ERRLEN] = "";
    cr_assert_eq(create(r, "fake", 30000, params, &rec, err), 0, "%s", err);
    json_decref(params);
    cr_assert_eq(persisted_at_apply, 1, "faults.json must hold the fault before apply runs");
    cr_assert_str_eq(json_string_value(json_object_get(rec, "state")), "active");
    char id[32];
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(rec, "id")));
    json_decref(rec);
    cr_assert_eq(persisted_count(), 1);

    /* "Crash": drop the registry without reverting. */
    reg_free(r);
    cr_assert_eq(n_revert, 0);

    reg *r2 = mk();
    int nswept = 0;
    cr_assert_eq(reg_sweep_previous(r2, &nswept, err, sizeof err), 0, "%s", err);
    cr_assert_eq(nswept, 1);
    cr_assert_eq(n_sweep, 1);
    cr_assert_str_eq(sweep_marker, "marker-41", "sweep gets the undo record written after apply");
    cr_assert_eq(persisted_count(), 0, "the swept registry is rewritten empty");
    json_t *old = NULL;
    cr_assert_eq(reg_get(r2, id, &old), 0);
    cr_assert_str_eq(json_string_value(json_object_get(old, "state")), "reverted");
    cr_assert_str_eq(json_string_value(json_object_get(old, "revert_reason")), "agent_restart");
    json_decref(old);

    /* Ids never repeat across agent restarts. */
    cr_assert_eq(create(r2, "fake", 30000, NULL, &rec, err), 0, "%s", err);
    cr_assert_str_neq(json_string_value(json_object_get(rec, "id")), id);
    json_decref(rec);
    cr_assert_eq(reg_revert_all(r2, "halt", 0), 1);
    reg_free(r2);

    /* A third start finds nothing to sweep. */
    reg *r3 = mk();
    cr_assert_eq(reg_sweep_previous(r3, &nswept, err, sizeof err), 0);
    cr_assert_eq(nswept, 0);
    cr_assert_eq(n_sweep, 1);
    reg_free(r3);
}

Test(registry, rejected_requests_change_nothing)
{
    reg *r = mk();
    char err[CX_ERRLEN];
    json_t *rec = NULL;
    struct {
        const char *type;
        int64_t duration;
        const char *params;
        const char *expect;
    } cases[] = {
        {"nope", 1000, NULL, "type"},
        {"fake", 0, NULL, "duration_ms"},
        {"fake", -5, NULL, "duration_ms"},
        {"fake", 60001, NULL, "duration_ms"},
        {"fake", 1000, "{\"unknown\": 1}", "params"},
        {"fake", 1000, "{\"marker\": -1}", "marker"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *p = cases[i].params ? json_loads(cases[i].params, 0, NULL) : NULL;
        err[0] = '\0';
        int rc = create(r, cases[i].type, cases[i].duration, p, &rec, err);
        json_decref(p);
        cr_assert_eq(rc, CX_EINVAL, "case %zu: rc %d", i, rc);
        cr_assert_null(rec, "case %zu: no record on a rejected request", i);
        cr_assert(strstr(err, cases[i].expect), "case %zu: error '%s' should name %s", i, err,
                  cases[i].expect);
    }
    reg_spec tox = {.type = "fake", .duration_ms = 1000, .has_toxicity = 1, .toxicity = 1.5};
    cr_assert_eq(reg_create(r, &tox, &rec, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "toxicity"));
    reg_spec tgt = {.type = "fake", .duration_ms = 1000, .target = "elsewhere"};
    cr_assert_eq(reg_create(r, &tgt, &rec, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "target"));

    cr_assert_eq(n_apply, 0);
    cr_assert_eq(reg_active(r, NULL), 0);
    json_t *all = reg_list(r);
    cr_assert_eq(json_array_size(all), 0);
    json_decref(all);
    cr_assert_eq(persisted_count(), -1, "nothing was ever persisted");
    json_t *c = reg_counters(r);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(c, "faults_total"), "fake|rejected")), 7);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(c, "faults_total"), "unknown|rejected")),
                 1);
    json_decref(c);
    reg_free(r);
}

Test(registry, failed_apply_leaves_nothing_active)
{
    reg *r = mk();
    char err[CX_ERRLEN] = "";
    json_t *params = json_pack("{s:b}", "fail_apply", 1);
    json_t *rec = NULL;
    int rc = create(r, "fake", 1000, params, &rec, err);
    json_decref(params);
    cr_assert_eq(rc, CX_ENOTSUP);
    cr_assert_not_null(rec);
    cr_assert_str_eq(json_string_value(json_object_get(rec, "state")), "failed");
    cr_assert(strstr(json_string_value(json_object_get(rec, "error")), "asked to fail"));
    json_decref(rec);
    cr_assert_eq(reg_active(r, NULL), 0);
    cr_assert_eq(persisted_count(), 0);
    reg_free(r);
}

Test(registry, expiry_delete_and_lease_reasons)
{
    reg *r = mk();
    char err[CX_ERRLEN] = "";
    json_t *rec = NULL;
    reg_spec a = {.type = "fake", .duration_ms = 50};
    reg_spec b = {.type = "fake", .duration_ms = 30000, .lease = 1};
    reg_spec c = {.type = "fake", .duration_ms = 30000};
    reg_spec d = {.type = "fake", .duration_ms = 30000};
    char ida[32], idb[32], idc[32], idd[32];
    cr_assert_eq(reg_create(r, &a, &rec, err, sizeof err), 0);
    snprintf(ida, sizeof ida, "%s", json_string_value(json_object_get(rec, "id")));
    json_decref(rec);
    cr_assert_eq(reg_create(r, &b, &rec, err, sizeof err), 0);
    snprintf(idb, sizeof idb, "%s", json_string_value(json_object_get(rec, "id")));
    json_decref(rec);
    cr_assert_eq(reg_create(r, &c, &rec, err, sizeof err), 0);
    snprintf(idc, sizeof idc, "%s", json_string_value(json_object_get(rec, "id")));
    json_decref(rec);
    cr_assert_eq(reg_create(r, &d, &rec, err, sizeof err), 0);
    snprintf(idd, sizeof idd, "%s", json_string_value(json_object_get(rec, "id")));
    json_decref(rec);
    cr_assert_eq(reg_active(r, NULL), 4);
    cr_assert_eq(persisted_count(), 4);

    /* Ticks reach the injector; the 50 ms fault expires, the others do not. */
    reg_tick(r, cx_mono_ms());
    cr_assert_geq(n_tick, 3);
    reg_tick(r, cx_mono_ms() + 100);
    cr_assert_eq(reg_active(r, NULL), 3);
    cr_assert_eq(reg_get(r, ida, &rec), 0);
    cr_assert_str_eq(json_string_value(json_object_get(rec, "state")), "expired");
    cr_assert_str_eq(json_string_value(json_object_get(rec, "revert_reason")), "expiry");
    cr_assert(json_is_integer(json_object_get(rec, "ended_mono_ms")));
    json_decref(rec);

    /* Lease lapse reverts only what was created under the lease. */
    cr_assert_eq(reg_revert_all(r, "lease", 1), 1);
    cr_assert_eq(reg_get(r, idb, &rec), 0);
    cr_assert_str_eq(json_string_value(json_object_get(rec, "revert_reason")), "lease");
    json_decref(rec);

    /* DELETE, then DELETE again: conflict with the ended record. */
    cr_assert_eq(reg_revert(r, idc, "delete", &rec, err, sizeof err), 0);
    cr_assert_str_eq(json_string_value(json_object_get(rec, "state")), "reverted");
    cr_assert_str_eq(json_string_value(json_object_get(rec, "revert_reason")), "delete");
    json_decref(rec);
    rec = NULL;
    cr_assert_eq(reg_revert(r, idc, "delete", &rec, err, sizeof err), CX_ECONFLICT);
    json_decref(rec);
    cr_assert_eq(reg_revert(r, "f-999999", "delete", NULL, err, sizeof err), CX_ENOTFOUND);

    cr_assert_eq(reg_revert_all(r, "halt", 0), 1);
    cr_assert_eq(reg_get(r, idd, &rec), 0);
    cr_assert_str_eq(json_string_value(json_object_get(rec, "revert_reason")), "halt");
    json_decref(rec);
    cr_assert_eq(n_revert, 4);
    cr_assert_eq(persisted_count(), 0);
    reg_free(r);
}

Test(registry, corrupt_file_is_moved_aside)
{
    char path[300];
    snprintf(path, sizeof path, "%s/faults.json", g_dir);
    cr_assert_eq(cx_file_write_atomic(path, "{not json", 9, NULL, 0), 0);
    reg *r = mk();
    int n = -1;
    char err[CX_ERRLEN] = "";
    cr_assert_eq(reg_sweep_previous(r, &n, err, sizeof err), CX_ECORRUPT);
    cr_assert(strstr(err, "faults.json"), "%s", err);
    snprintf(path, sizeof path, "%s/faults.json.corrupt", g_dir);
    cr_assert_eq(access(path, F_OK), 0);
    reg_free(r);
}

/* ---- the stop rule (registry.c "faults that stop the unit") ---- */

/* Create type with params (JSON text or NULL); returns rc, id into id. */
static int create_json(reg *r, const char *type, const char *params, char *id, char *err)
{
    json_t *p = params ? json_loads(params, 0, NULL) : NULL;
    json_t *rec = NULL;
    err[0] = '\0';
    int rc = create(r, type, 30000, p, &rec, err);
    json_decref(p);
    if (id)
        snprintf(id, 32, "%s", rec ? json_string_value(json_object_get(rec, "id")) : "");
    json_decref(rec);
    return rc;
}

static json_t *record(reg *r, const char *id)
{
    json_t *rec = NULL;
    cr_assert_eq(reg_get(r, id, &rec), 0, "no record %s", id);
    return rec;
}

Test(registry, second_stopping_fault_is_a_conflict_naming_the_active_one)
{
    g_pid = getpid();
    reg *r = mk();
    char err[CX_ERRLEN], pause_id[32], id[32];
    cr_assert_eq(create_json(r, "pause", NULL, pause_id, err), 0, "%s", err);
    int before = persisted_count();

    const char *refused[][2] = {{"straggle", NULL}, {"pause", NULL}, {"cpu", "{\"method\":\"duty\"}"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        int rc = create_json(r, refused[i][0], refused[i][1], id, err);
        cr_assert_eq(rc, CX_ECONFLICT, "%s while a pause is active: rc %d (%s)", refused[i][0], rc, err);
        cr_assert(strstr(err, pause_id), "the 409 names the active fault %s: %s", pause_id, err);
        cr_assert_str_eq(id, "", "no record for a refused request");
    }
    /* Bad params are still a 400, whatever is active. */
    cr_assert_eq(create_json(r, "straggle", "{\"bogus\":1}", NULL, err), CX_EINVAL);
    cr_assert_eq(reg_active(r, NULL), 1);
    cr_assert_eq(persisted_count(), before, "nothing persisted for refused requests");
    cr_assert_str_eq(g_log, "apply:pause", "no injector ran for refused requests: %s", g_log);
    json_t *c = reg_counters(r);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(c, "faults_total"), "straggle|rejected")),
                 2);
    json_decref(c);

    /* Once the pause is gone the straggle is welcome. */
    cr_assert_eq(reg_revert(r, pause_id, "delete", NULL, err, sizeof err), 0);
    cr_assert_eq(create_json(r, "straggle", NULL, id, err), 0, "%s", err);
    cr_assert_eq(create_json(r, "pause", NULL, NULL, err), CX_ECONFLICT);
    cr_assert(strstr(err, id), "now the straggle %s is named: %s", id, err);
    reg_revert_all(r, "halt", 0);
    reg_free(r);
}

Test(registry, cpu_counts_as_stopping_only_in_its_duty_cycle)
{
    g_pid = getpid();
    reg *r = mk();
    char err[CX_ERRLEN], cpu_id[32], id[32];

    /* auto without a cgroup falls back to the duty cycle: stopping. */
    cr_assert_eq(create_json(r, "cpu", NULL, cpu_id, err), 0, "%s", err);
    cr_assert_eq(create_json(r, "pause", NULL, NULL, err), CX_ECONFLICT);
    cr_assert(strstr(err, cpu_id), "%s", err);
    cr_assert_eq(reg_revert(r, cpu_id, "delete", NULL, err, sizeof err), 0);

    /* A cgroup quota stops nothing: a pause and a quota coexist. */
    g_cpu_cgroup = 1;
    cr_assert_eq(create_json(r, "cpu", "{\"method\":\"cgroup\"}", cpu_id, err), 0, "%s", err);
    cr_assert_eq(create_json(r, "pause", NULL, id, err), 0, "%s", err);

    /* auto while the pause is active is steered to the cgroup... */
    char id2[32];
    cr_assert_eq(create_json(r, "cpu", "{\"method\":\"auto\"}", id2, err), 0, "%s", err);
    json_t *rec = record(r, id2);
    json_t *ev = json_object_get(rec, "evidence");
    cr_assert_str_eq(json_string_value(json_object_get(ev, "method")), "cgroup");
    cr_assert_str_eq(json_string_value(json_object_get(ev, "auto_method_steered_by")), id);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(rec, "params"), "method")), "auto",
                     "the record keeps the params as requested");
    json_decref(rec);

    /* ...and refused with 409 (not 501) when there is no cgroup to steer to. */
    g_cpu_cgroup = 0;
    rec = NULL;
    json_t *p = json_pack("{s:s}", "method", "auto");
    int rc = create(r, "cpu", 30000, p, &rec, err);
    json_decref(p);
    cr_assert_eq(rc, CX_ECONFLICT, "rc %d: %s", rc, err);
    cr_assert(strstr(err, id) && strstr(err, "duty cycle"), "%s", err);
    cr_assert_str_eq(json_string_value(json_object_get(rec, "state")), "failed");
    json_decref(rec);
    cr_assert_eq(reg_active(r, "pause"), 1, "the pause is untouched");
    reg_revert_all(r, "halt", 0);
    reg_free(r);
}

Test(registry, kill_and_preempt_end_stopping_faults_before_their_signal)
{
    g_pid = getpid();
    reg *r = mk();
    char err[CX_ERRLEN], pause_id[32], kill_id[32], cpu_id[32];
    g_cpu_cgroup = 1;
    cr_assert_eq(create_json(r, "cpu", "{\"method\":\"cgroup\"}", cpu_id, err), 0, "%s", err);
    cr_assert_eq(create_json(r, "pause", NULL, pause_id, err), 0, "%s", err);
    g_log[0] = '\0';
    cr_assert_eq(create_json(r, "kill", NULL, kill_id, err), 0, "%s", err);
    cr_assert_str_eq(g_log, "revert:pause apply:kill", "the pause is reverted before the kill: %s", g_log);
    json_t *rec = record(r, pause_id);
    cr_assert_str_eq(json_string_value(json_object_get(rec, "state")), "reverted");
    cr_assert_str_eq(json_string_value(json_object_get(rec, "revert_reason")), "unit_exit");
    json_decref(rec);
    rec = record(r, kill_id);
    json_t *ended = json_object_get(json_object_get(rec, "evidence"), "ended_first");
    cr_assert_eq(json_array_size(ended), 1);
    cr_assert_str_eq(json_string_value(json_array_get(ended, 0)), pause_id);
    json_decref(rec);
    cr_assert_eq(reg_active(r, "cpu"), 1, "a cgroup quota does not stop the unit: kept");

    /* preempt does the same with a straggle; then its grace period holds
     * off any stopping fault. */
    char str_id[32], pre_id[32];
    cr_assert_eq(create_json(r, "straggle", NULL, str_id, err), 0, "%s", err);
    g_log[0] = '\0';
    cr_assert_eq(create_json(r, "preempt", "{\"grace_ms\":300}", pre_id, err), 0, "%s", err);
    cr_assert_str_eq(g_log, "revert:straggle apply:preempt", "%s", g_log);
    int64_t t0 = cx_mono_ms();
    cr_assert_eq(create_json(r, "pause", NULL, NULL, err), CX_ECONFLICT);
    cr_assert(strstr(err, pre_id) && strstr(err, "grace"), "%s", err);
    while (cx_mono_ms() - t0 < 320)
        cx_sleep_ms(10);
    cr_assert_eq(create_json(r, "pause", NULL, NULL, err), 0, "after the grace period: %s", err);
    reg_revert_all(r, "halt", 0);
    reg_free(r);
}

Test(registry, kill_without_a_unit_leaves_the_pause_alone)
{
    g_pid = getpid();
    reg *r = mk();
    char err[CX_ERRLEN], pause_id[32];
    cr_assert_eq(create_json(r, "pause", NULL, pause_id, err), 0, "%s", err);
    g_pid = 0; /* the unit is gone (restart pending) */
    json_t *rec = NULL;
    cr_assert_eq(create(r, "kill", 30000, NULL, &rec, err), CX_ENOUNIT);
    json_decref(rec);
    cr_assert_eq(reg_active(r, "pause"), 1, "a refused kill changes nothing");
    reg_revert_all(r, "halt", 0);
    reg_free(r);
}

/* ---- writes from several threads ----
 *
 * Reverts and the record after an apply are written after the registry
 * lock is released, so writers race; a snapshot older than the one on disk
 * must be dropped, never written over it. Several threads create and
 * revert (and tick, which expires) at once; each checks that the file
 * holds its fault once reg_create returned, and at the end the file holds
 * exactly the active faults. (The window in which an older snapshot
 * could overtake a newer one is a few microseconds wide: this checks the
 * writes under concurrency, it does not force that interleaving.) */

typedef struct churn {
    reg *r;
    int rounds;
    int failures; /* calls that did not return 0 */
    int missing;  /* own active faults faults.json did not hold */
} churn;

/* faults.json holds the fault id. */
static int persisted_has(const char *id)
{
    char path[300];
    snprintf(path, sizeof path, "%s/faults.json", g_dir);
    json_t *root = json_load_file(path, 0, NULL);
    json_t *f;
    size_t i;
    int found = 0;
    json_array_foreach(json_object_get(root, "faults"), i, f) found |=
        strcmp(json_string_value(json_object_get(f, "id")), id) == 0;
    json_decref(root);
    return found;
}

static void *churn_main(void *arg)
{
    churn *c = arg;
    char err[CX_ERRLEN];
    for (int i = 0; i < c->rounds; i++) {
        json_t *rec = NULL;
        reg_spec s = {.type = "fake", .duration_ms = i % 3 == 2 ? 1 : 60000, .origin = "api"};
        if (reg_create(c->r, &s, &rec, err, sizeof err) != 0) {
            c->failures++;
            json_decref(rec);
            continue;
        }
        char id[32];
        snprintf(id, sizeof id, "%s", json_string_value(json_object_get(rec, "id")));
        json_decref(rec);
        /* Only this thread ends its long faults: until it does, every
         * snapshot written since its create holds it. */
        if (s.duration_ms > 1 && !persisted_has(id))
            c->missing++;
        if (i % 3 == 0 && reg_revert(c->r, id, "delete", NULL, err, sizeof err) != 0)
            c->failures++;
        reg_tick(c->r, cx_mono_ms() + 10); /* expires the 1 ms ones (when not busy) */
    }
    return NULL;
}

Test(registry, concurrent_writers_leave_the_file_equal_to_the_active_list)
{
    reg *r = mk();
    enum { NT = 3 };
    pthread_t th[NT];
    churn c[NT];
    for (int i = 0; i < NT; i++) {
        c[i] = (churn){.r = r, .rounds = 60};
        cr_assert_eq(pthread_create(&th[i], NULL, churn_main, &c[i]), 0);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(c[i].failures, 0);
        cr_assert_eq(c[i].missing, 0, "an older snapshot was written over a newer one %d time(s)",
                     c[i].missing);
    }
    /* One more round trip of the file: what is active is what is persisted. */
    json_t *all = reg_list(r);
    char path[300];
    snprintf(path, sizeof path, "%s/faults.json", g_dir);
    json_t *root = json_load_file(path, 0, NULL);
    cr_assert_not_null(root);
    json_t *persisted = json_object_get(root, "faults");
    size_t nactive = 0, i, j;
    json_t *f, *p;
    json_array_foreach(all, i, f)
    {
        if (strcmp(json_string_value(json_object_get(f, "state")), "active") != 0)
            continue;
        nactive++;
        int found = 0;
        json_array_foreach(persisted, j, p) found |=
            json_equal(json_object_get(p, "id"), json_object_get(f, "id"));
        cr_assert(found, "active fault %s is missing from faults.json",
                  json_string_value(json_object_get(f, "id")));
    }
    cr_assert_eq(json_array_size(persisted), nactive, "faults.json holds %zu faults, %zu are active",
                 json_array_size(persisted), nactive);
    cr_assert_gt(nactive, 0);
    json_decref(root);
    json_decref(all);
    reg_revert_all(r, "halt", 0);
    cr_assert_eq(persisted_count(), 0);
    reg_free(r);
}
