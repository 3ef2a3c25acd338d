/* test_trainer_ddp_sync.c - ddp learners stay bit-identical with the syncer
 * (the ddp source of truth) across faults: a learner that restarts from a
 * stale local checkpoint, or misses steps while stopped, takes the
 * syncer's parameters and AdamW state (GET /v1/optimizer) and ends the run
 * with the same parameters (CRC32C) as the syncer. Without that transfer
 * its own, stale AdamW moments make its parameters drift for good. */
#include "trainer_it.h"

#include <fcntl.h>

#include "common/crc32c.h"

/* 1 when <dir>/<name>.log contains needle. */
static int log_has(tr_run *r, const char *name, const char *needle)
{
    char path[700], line[4096];
    snprintf(path, sizeof path, "%s/%s.log", r->dir, name);
    FILE *f = fopen(path, "r");
    int has = 0;
    if (!f)
        return 0;
    while (!has && fgets(line, sizeof line, f))
        has = strstr(line, needle) != NULL;
    fclose(f);
    return has;
}

/* Both learners exited 0: the syncer's params_crc32c equals each learner's
 * final one, and the syncer took every step. */
static void assert_bit_identical(tr_run *r, json_int_t steps)
{
    json_t *st = tr_get(r, "/v1/status");
    cr_assert(st, "status answers");
    const char *scrc = json_string_value(json_object_get(st, "params_crc32c"));
    cr_assert(scrc && strlen(scrc) == 8, "status has params_crc32c as 8 hex digits");
    cr_assert_eq(tr_int(st, "ddp_step"), steps, "the syncer took every step");
    for (int id = 0; id < 2; id++) {
        char name[16], crc[9];
        snprintf(name, sizeof name, "learner%d", id);
        cr_assert_eq(tr_log_crc(r, name, crc), 0, "learner %d logs its final params_crc32c", id);
        if (strcmp(crc, scrc) != 0) {
            it_dump_log(r->dir, name);
            cr_assert_fail("learner %d ends with params_crc32c %s, the syncer with %s", id, crc, scrc);
        }
    }
    json_decref(st);
}

/* Start a syncer for a run of 2 learners in `mode` that ends after `steps`
 * steps, with the extra flags (NULL-terminated), then both learners; their
 * pids into p. */
static void start_pair(tr_run *r, const char *tag, const char *mode, const char *steps,
                       const char *const *extra, pid_t p[2])
{
    const char *args[32] = {"--mode", mode, "--learners", "2", "--steps", steps, TR_MODEL};
    size_t n = 0;
    while (args[n])
        n++;
    for (size_t i = 0; extra[i] && n < 31; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    tr_syncer_start(r, tag, args);
    tr_learners_start(r, 2, p);
}

Test(trainer_ddp_sync, killed_learner_restarts_from_a_stale_checkpoint_and_ends_identical, .timeout = 240)
{
    tr_run r = {0};
    /* a local checkpoint every 25 steps: the restart resumes AdamW moments
     * up to 25 steps old */
    const char *extra[] = {
        "--learner-checkpoint-every", "25", TR_HEARTBEAT_FAST, "--eval-every-ms", "1000", NULL};
    pid_t p[2];
    start_pair(&r, "ddpsync", "ddp", "500", extra, p);
    cr_assert_geq(tr_wait_merges(&r, 110, 90000), 110, "training started");
    tr_kill(p[1]);
    p[1] = tr_learner_start(&r, 1, NULL, NULL);
    tr_expect_exit0(&r, p[0], 0, 180000);
    tr_expect_exit0(&r, p[1], 1, 30000);
    cr_assert(log_has(&r, "learner1", "resumed from local checkpoint"),
              "the restart used its local checkpoint");
    assert_bit_identical(&r, 500);
    tr_done(&r);
}

Test(trainer_ddp_sync, stopped_elastic_learner_misses_steps_and_ends_identical, .timeout = 240)
{
    tr_run r = {0};
    const char *extra[] = {"--heartbeat-timeout-ms", "1000", "--eval-every-ms", "1000", NULL};
    pid_t p[2];
    start_pair(&r, "ddpesync", "ddp-elastic", "1000", extra, p);
    cr_assert_geq(tr_wait_merges(&r, 100, 90000), 100, "training started");
    it_signal(p[1], SIGSTOP, 1);
    /* by progress: the other learner takes 30 steps alone, past the deadline */
    json_int_t m0 = tr_merges(&r);
    cr_assert_geq(tr_wait_merges(&r, m0 + 30, 60000), m0 + 30, "the run goes on without the stopped learner");
    json_int_t since = tr_last_seq(&r);
    it_signal(p[1], SIGCONT, 1);
    tr_expect_exit0(&r, p[0], 0, 180000);
    tr_expect_exit0(&r, p[1], 1, 60000);
    /* it took part again after the resume: a merge after SIGCONT lists it */
    json_t *evs = tr_events(&r, since);
    int back = tr_merges_with(evs, 1, -1) > 0;
    json_decref(evs);
    cr_assert(back, "the stopped learner took part in a merge after SIGCONT");
    assert_bit_identical(&r, 1000);
    tr_done(&r);
}

/* GET /v1/optimizer into res (status, headers, body). */
static void get_optimizer(tr_run *r, cx_http_result *res)
{
    char err[256];
    cx_http_client *c = cx_http_client_new(r->url, NULL);
    cr_assert(c);
    cx_http_result_init(res);
    /* the model and its AdamW state: learners only (docs/security.md) */
    const char *hdrs[] = {tr_auth(r, "learner-0"), NULL};
    cr_assert_eq(cx_http_do(c, "GET", "/v1/optimizer", hdrs, NULL, 0, NULL, 10000, res, err, sizeof err), 0,
                 "%s", err);
    cx_http_client_free(c);
}

Test(trainer_ddp_sync, optimizer_route_and_checkpoint_min_ms, .timeout = 180)
{
    tr_run r = {0};
    /* a checkpoint after every merge, but at most one per 10 minutes */
    const char *extra[] = {"--checkpoint-every", "1", "--checkpoint-min-ms", "600000", NULL};
    pid_t p[2];
    start_pair(&r, "ddpopt", "ddp", "150", extra, p);
    tr_expect_exit0(&r, p[0], 0, 120000);
    tr_expect_exit0(&r, p[1], 1, 30000);
    json_t *evs = tr_events(&r, 0);
    size_t i;
    json_t *e;
    int ckpts = 0;
    json_array_foreach(evs, i, e) ckpts += strcmp(tr_type(e), "checkpoint") == 0;
    json_decref(evs);
    cr_assert_eq(ckpts, 1,
                 "150 merges with checkpoint_every 1 but checkpoint_min_ms 600000: one checkpoint, got %d",
                 ckpts);

    json_t *st = tr_get(&r, "/v1/status");
    json_int_t n = tr_int(st, "n_params");
    char scrc[9];
    snprintf(scrc, sizeof scrc, "%s", json_string_value(json_object_get(st, "params_crc32c")));
    json_decref(st);
    cx_http_result res;
    char h[32];
    get_optimizer(&r, &res);
    cr_assert_eq(res.status, 200);
    cr_assert_eq(res.body.len, (size_t)(12 * n), "params, m and v: 3 x n f32");
    cr_assert_eq(cx_http_result_header(&res, "X-Chaosloco-Crc32c", h, sizeof h), 0);
    char body_crc[9];
    snprintf(body_crc, sizeof body_crc, "%08x", cx_crc32c(0, res.body.data, res.body.len));
    cr_assert_str_eq(h, body_crc, "the header is the CRC32C of the body");
    snprintf(body_crc, sizeof body_crc, "%08x", cx_crc32c(0, res.body.data, (size_t)(4 * n)));
    cr_assert_str_eq(body_crc, scrc, "the first n values are the parameters of params_crc32c");
    cr_assert_eq(cx_http_result_header(&res, "X-Chaosloco-Step", h, sizeof h), 0);
    cr_assert_str_eq(h, "150", "the step the syncer collects next");
    cr_assert_eq(cx_http_result_header(&res, "X-Chaosloco-Adam-Steps", h, sizeof h), 0);
    cr_assert_str_eq(h, "150", "one AdamW step per ddp step");
    cx_http_result_cleanup(&res);
    tr_done(&r);

    /* not a ddp run: no global optimizer state */
    tr_run d = {0};
    const char *dargs[] = {"--mode", "decoupled", "--learners", "2", TR_MODEL, NULL};
    tr_syncer_start(&d, "ddpoptdec", dargs);
    get_optimizer(&d, &res);
    cr_assert_eq(res.status, 409, "GET /v1/optimizer in decoupled mode is a 409");
    cr_assert(res.body.data && strstr(res.body.data, "ddp modes only"), "and says why");
    cx_http_result_cleanup(&res);
    tr_done(&d);
}
