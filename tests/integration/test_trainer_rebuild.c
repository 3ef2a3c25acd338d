/* test_trainer_rebuild.c - no silent reset of the global model (issue 13):
 * a decoupled syncer SIGKILLed and restarted with its state dir deleted, or
 * with its checkpoints corrupted, rebuilds the global state from the
 * learners' copies (eval loss stays near the one before, versions go above
 * everything published, a `rebuild` event, merges go on); learners that
 * hold nothing (versions 0) change nothing; the join/upload protocol, its
 * input checks and --on-lost-state refuse, driven over HTTP. */
#include <fcntl.h>
#include <sys/stat.h>

#include "common/crc32c.h"
#include "trainer/protocol.h"
#include "trainer/seal.h"
#include "trainer_it.h"

#define N_LEARNERS 3
#define FRAGS 4

/* Overwrite the middle of a file with garbage (its CRC no longer matches). */
static int corrupt_file(const char *path)
{
    int fd = open(path, O_RDWR);
    if (fd < 0)
        return -1;
    off_t size = lseek(fd, 0, SEEK_END);
    static const char junk[64] = "this checkpoint was damaged on purpose by test_trainer_rebuild";
    ssize_t w = pwrite(fd, junk, sizeof junk, size / 2);
    close(fd);
    return w == (ssize_t)sizeof junk ? 0 : -1;
}

/* The first event of `type` in evs (borrowed) or NULL. */
static json_t *first_of(json_t *evs, const char *type)
{
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e) if (strcmp(tr_type(e), type) == 0) return e;
    return NULL;
}

/* The loss of the first eval event after seq `after`, waiting up to
 * timeout_ms for one; NAN if none came. */
static double eval_after(tr_run *r, json_int_t after, long timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    while (cx_mono_ms() < end) {
        json_t *evs = tr_events(r, after);
        size_t i;
        json_t *e;
        double l = NAN;
        json_array_foreach(evs, i, e) if (isnan(l) && strcmp(tr_type(e), "eval") == 0 &&
                                          json_is_number(json_object_get(e, "loss"))) l =
            json_number_value(json_object_get(e, "loss"));
        json_decref(evs);
        if (!isnan(l))
            return l;
        cx_sleep_ms(200);
    }
    return NAN;
}

static json_t *wait_event(tr_run *r, const char *type, long timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    while (cx_mono_ms() < end) {
        json_t *evs = tr_events(r, 0), *e = first_of(evs, type);
        if (e) {
            json_incref(e);
            json_decref(evs);
            return e;
        }
        json_decref(evs);
        cx_sleep_ms(200);
    }
    return NULL;
}

enum { LOSE_DIR = 0, LOSE_CORRUPT, LOSE_NOTHING };

/* The merges of the checkpoint the restarted syncer restored: its start
 * event, the first event after seq `after`. The checkpoint on disk may be
 * newer than the log's last "checkpoint" event (a kill between the write
 * and its event), so this, not the log, says whether it is current. */
static json_int_t restored_merges(tr_run *r, json_int_t after)
{
    json_t *evs = tr_events(r, after), *start = first_of(evs, "start");
    cr_assert(start, "a start event from the restarted syncer");
    json_int_t m = tr_int(start, "merges");
    json_decref(evs);
    return m;
}

/* 1 when a learner, rejoining the restarted syncer, reported holding a
 * fragment version above what the restored checkpoint held (the start
 * event's ckpt_versions): then the syncer must rebuild that fragment. */
static int held_newer(tr_run *r)
{
    json_t *all = tr_events(r, 0), *start = NULL, *e;
    size_t i;
    int newer = 0;
    json_array_foreach(all, i, e) if (strcmp(tr_type(e), "start") == 0) start = e; /* the restart's */
    json_t *ck = start ? json_object_get(start, "ckpt_versions") : NULL;
    cr_assert(json_is_array(ck), "the start event names the checkpoint's versions");
    json_array_foreach(all, i, e)
    {
        json_t *held = json_object_get(e, "held_versions");
        if (tr_int(e, "seq") <= tr_int(start, "seq") || strcmp(tr_type(e), "join") != 0 ||
            !json_is_array(held))
            continue;
        for (size_t p = 0; p < json_array_size(held) && p < json_array_size(ck); p++)
            if (json_integer_value(json_array_get(held, p)) > json_integer_value(json_array_get(ck, p))) {
                cr_log_info("learner %lld held fragment %zu version %lld above the checkpoint's %lld",
                            (long long)tr_int(e, "learner"), p,
                            (long long)json_integer_value(json_array_get(held, p)),
                            (long long)json_integer_value(json_array_get(ck, p)));
                newer = 1;
            }
    }
    json_decref(all);
    return newer;
}

/* Train, SIGKILL the syncer, lose its state (delete the dir, corrupt both
 * checkpoint slots, or keep it: then only the merges after its last
 * checkpoint are missing), restart it: the state comes back from the
 * learners. */
static void kill_and_lose(int how)
{
    int corrupt = how == LOSE_CORRUPT;
    static const char *const expect_start[] = {"fresh", "corrupt", "restored"};
    tr_run r = {0};
    const char *args[] = {
        "--mode",          "decoupled", "--learners",         "3",  TR_K1_H24, TR_STEPS_LONG,
        "--eval-every-ms", "300",       "--checkpoint-every", "10", TR_MODEL,  NULL};
    static const char *const tags[] = {"rebuild-lost", "rebuild-corrupt", "rebuild-kept"};
    tr_syncer_start(&r, tags[how], args);
    pid_t p[N_LEARNERS];
    tr_learners_start(&r, N_LEARNERS, p);
    cr_assert_geq(tr_wait_merges(&r, 60, 90000), 60, "merges before the crash");
    json_t *evs = tr_events(&r, 0);
    double initial = NAN;
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e) if (isnan(initial) && strcmp(tr_type(e), "eval") == 0) initial =
        json_number_value(json_object_get(e, "loss"));
    json_decref(evs);
    /* versions a second before the kill (every learner has seen them) and,
     * read from the log after the kill, the last published ones: no learner
     * saw some of those, and the rebuild must still go above them */
    json_int_t seen_v[FRAGS], log_v[FRAGS];
    json_t *st0 = tr_get(&r, "/v1/status");
    json_array_foreach(json_object_get(st0, "fragments"), i, e) if (i < FRAGS) seen_v[i] =
        tr_int(e, "version");
    json_decref(st0);
    cx_sleep_ms(1000);
    double before = tr_eval_loss(&r, NULL);
    it_signal(r.syncer, SIGKILL, 1);
    it_wait_exit(r.syncer, 5000);
    /* merges published after our look and before the kill: read the log */
    char path[800];
    snprintf(path, sizeof path, "%s/events.jsonl", r.state);
    FILE *f = fopen(path, "r");
    cr_assert(f, "events.jsonl exists before the loss");
    char line[65536];
    json_int_t n_merges = 0, ckpt_merges = 0, last_seq = 0;
    for (int q = 0; q < FRAGS; q++)
        log_v[q] = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *ev = json_loads(line, 0, NULL);
        json_int_t fr = ev ? tr_int(ev, "fragment") : -1;
        if (ev && tr_int(ev, "seq") > last_seq)
            last_seq = tr_int(ev, "seq");
        n_merges += ev && strcmp(tr_type(ev), "merge") == 0;
        if (ev && strcmp(tr_type(ev), "checkpoint") == 0 && tr_int(ev, "merges") > ckpt_merges)
            ckpt_merges = tr_int(ev, "merges");
        if (ev && strcmp(tr_type(ev), "merge") == 0 && fr >= 0 && fr < FRAGS &&
            tr_int(ev, "version") > log_v[fr])
            log_v[fr] = tr_int(ev, "version");
        json_decref(ev);
    }
    fclose(f);
    if (corrupt) {
        int n = 0;
        for (int s = 0; s < 2; s++) {
            snprintf(path, sizeof path, "%s/syncer.ckpt.%c", r.state, s ? 'b' : 'a');
            n += corrupt_file(path) == 0;
        }
        cr_assert_geq(n, 1, "a checkpoint slot to corrupt");
    } else if (how == LOSE_DIR) {
        tr_lose_state_dir(&r);
    }
    cr_log_info(
        "before the crash: eval loss %.4f (initial %.4f), versions seen %lld %lld %lld %lld, in the log "
        "%lld %lld %lld %lld",
        before, initial, (long long)seen_v[0], (long long)seen_v[1], (long long)seen_v[2],
        (long long)seen_v[3], (long long)log_v[0], (long long)log_v[1], (long long)log_v[2],
        (long long)log_v[3]);
    tr_syncer_start(&r, NULL, NULL);
    json_int_t restored = how == LOSE_NOTHING ? restored_merges(&r, last_seq) : 0;
    if (restored > ckpt_merges)
        ckpt_merges = restored;
    if (how == LOSE_NOTHING && n_merges <= ckpt_merges) {
        /* the kill came right after a checkpoint: nothing to rebuild */
        cr_log_info("no merge after the last checkpoint (%lld): the checkpoint is the state",
                    (long long)ckpt_merges);
        cr_assert_null(wait_event(&r, "rebuild", 8000), "no rebuild when the checkpoint is current");
        tr_done(&r);
        return;
    }
    json_t *rb = wait_event(&r, "rebuild", 60000);
    if (!rb && how == LOSE_NOTHING && !held_newer(&r)) {
        /* the kill came before any learner took a version published after
         * the checkpoint: every copy is at most the checkpoint's, which is
         * the state (the syncer went on above the published versions) */
        cr_log_info("no learner held a fragment newer than the checkpoint: nothing to rebuild");
        json_int_t m = tr_merges(&r);
        cr_assert_geq(tr_wait_merges(&r, m + 20, 60000), m + 20, "merges go on");
        json_t *s2 = tr_get(&r, "/v1/status");
        json_array_foreach(json_object_get(s2, "fragments"), i, e) cr_assert_gt(
            tr_int(e, "version"), log_v[i], "status: fragment %zu version above the published", i);
        json_decref(s2);
        tr_done(&r);
        return;
    }
    if (!rb) {
        it_dump_log(r.dir, "syncer1");
        cr_assert_fail("no rebuild event after the restart, though a learner held a newer fragment");
    }
    json_t *all = tr_events(&r, 0), *start = NULL;
    json_array_foreach(all, i, e) if (strcmp(tr_type(e), "start") == 0) start = e; /* the restart's */
    cr_assert(start, "a start event");
    cr_assert_str_eq(json_string_value(json_object_get(start, "start_state")), expect_start[how]);
    cr_assert_str_eq(json_string_value(json_object_get(rb, "start_state")), expect_start[how]);
    cr_assert(json_is_true(json_object_get(rb, "momentum_reset")));
    json_t *frs = json_object_get(rb, "fragments");
    cr_assert_eq(json_array_size(frs), FRAGS);
    int from_learners = 0;
    json_array_foreach(frs, i, e)
    {
        /* with the checkpoint kept, a fragment not merged since it stays */
        if (how == LOSE_NOTHING && strcmp(json_string_value(json_object_get(e, "from")), "syncer") == 0) {
            /* the checkpoint's own version (the same content) or above */
            cr_assert_geq(tr_int(e, "version"), log_v[i], "kept fragment %zu not below the published", i);
            continue;
        }
        from_learners++;
        cr_assert_str_eq(json_string_value(json_object_get(e, "from")), "learner",
                         "fragment %zu from a learner", i);
        json_int_t lid = tr_int(e, "learner");
        cr_assert(lid >= 0 && lid < N_LEARNERS);
        cr_assert_gt(tr_int(e, "held_version"), 0);
        cr_assert_gt(tr_int(e, "version"), log_v[i], "fragment %zu: version %lld above the published %lld", i,
                     (long long)tr_int(e, "version"), (long long)log_v[i]);
        cr_log_info("fragment %zu: from learner %lld (its version %lld), now %lld; the log had %lld", i,
                    (long long)lid, (long long)tr_int(e, "held_version"), (long long)tr_int(e, "version"),
                    (long long)log_v[i]);
    }
    cr_assert_geq(from_learners, 1, "at least one fragment from the learners");
    /* the eval after the rebuild is near the one before, not the initial */
    double after = eval_after(&r, tr_int(rb, "seq"), 30000);
    cr_log_info("after the rebuild: eval loss %.4f (before %.4f, initial %.4f)", after, before, initial);
    cr_assert(isfinite(after), "an eval after the rebuild");
    cr_assert_lt(after, initial - 0.5 * (initial - before), "eval %.4f went back toward the initial %.4f",
                 after, initial);
    cr_assert_lt(after, before + 0.3, "eval %.4f is not close to the %.4f before the crash", after, before);
    /* checkpoint written by the rebuild, before serving */
    json_t *ck = NULL;
    json_array_foreach(all, i, e) if (!ck && strcmp(tr_type(e), "checkpoint") == 0 &&
                                      tr_int(e, "seq") > tr_int(start, "seq") &&
                                      tr_int(e, "seq") < tr_int(rb, "seq")) ck = e;
    cr_assert(ck, "a checkpoint between the restart and the rebuild event");
    json_decref(all);
    json_decref(rb);
    /* learners keep training, merges go on, versions keep rising */
    json_int_t m = tr_merges(&r);
    cr_assert_geq(tr_wait_merges(&r, m + 20, 60000), m + 20, "merges go on after the rebuild");
    json_t *s2 = tr_get(&r, "/v1/status");
    json_array_foreach(json_object_get(s2, "fragments"), i, e) cr_assert(
        tr_int(e, "version") > log_v[i] || (how == LOSE_NOTHING && tr_int(e, "version") >= log_v[i]),
        "status: fragment %zu version above the published", i);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(s2, "rebuild"), "state")), "none");
    json_decref(s2);
    for (int k = 0; k < N_LEARNERS; k++) {
        int st2 = 0;
        cr_assert_eq(waitpid(p[k], &st2, WNOHANG), 0, "learner %d still runs", k);
    }
    tr_done(&r);
}

Test(trainer_rebuild, state_dir_deleted, .timeout = 240)
{
    kill_and_lose(LOSE_DIR);
}

Test(trainer_rebuild, checkpoints_corrupted, .timeout = 240)
{
    kill_and_lose(LOSE_CORRUPT);
}

/* The state dir survives, but the merges after the last checkpoint are
 * only in the learners' copies: the rebuild takes them per fragment. */
Test(trainer_rebuild, merges_after_the_checkpoint, .timeout = 240)
{
    kill_and_lose(LOSE_NOTHING);
}

/* ddp: the global state is the model plus its AdamW state (m, v, step
 * counter), and every ddp learner holds a bit-identical copy of it at the
 * last step it received. A ddp syncer SIGKILLed and restarted with its
 * state dir deleted, or with its state dir kept but steps logged after its
 * checkpoint, takes that copy back: eval near the one before (not the
 * initial model's or the checkpoint's), the learners go on to the end of
 * the schedule and end with the syncer's parameters bit for bit
 * (params_crc32c), having taken every step. Before the ddp rebuild the
 * restarted syncer handed the learners its initial model at step 0 (or its
 * checkpoint's older state). */
#define DDP_STEPS 3000
#define DDP_STEPS_S "3000"
static void ddp_kill_and_lose(int how)
{
    tr_run r = {0};
    /* a checkpoint at step 40 (the first is not held back), then at most
     * one per 2 s (checkpoint_min_ms): the kill comes after steps that only
     * the learners hold */
    const char *args[] = {
        "--mode",          "ddp", "--learners",         "2",  "--steps", DDP_STEPS_S, "--fragments", "2",
        "--eval-every-ms", "300", "--checkpoint-every", "40", TR_MODEL,  NULL};
    tr_syncer_start(&r, how == LOSE_DIR ? "rebuild-ddp" : "rebuild-ddp-kept", args);
    pid_t p[2];
    for (int i = 0; i < 2; i++)
        p[i] = tr_learner_start(&r, i, NULL, NULL);
    cr_assert_geq(tr_wait_merges(&r, 250, 120000), 250, "ddp steps before the crash");
    json_t *evs = tr_events(&r, 0);
    json_t *first_eval = first_of(evs, "eval");
    cr_assert(first_eval, "an eval before the crash");
    double initial = json_number_value(json_object_get(first_eval, "loss"));
    json_decref(evs);
    cx_sleep_ms(600); /* an eval of the state at the kill, or close to it */
    double before = tr_eval_loss(&r, NULL);
    json_t *st = tr_get(&r, "/v1/status");
    json_int_t step_seen = tr_int(st, "ddp_step");
    json_decref(st);
    it_signal(r.syncer, SIGKILL, 1);
    it_wait_exit(r.syncer, 5000);
    /* the steps the log has after the last checkpoint */
    char path[800], line[65536];
    snprintf(path, sizeof path, "%s/events.jsonl", r.state);
    FILE *f = fopen(path, "r");
    cr_assert(f, "events.jsonl exists before the loss");
    json_int_t n_merges = 0, ckpt_merges = 0, last_seq = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *ev = json_loads(line, 0, NULL);
        if (ev && tr_int(ev, "seq") > last_seq)
            last_seq = tr_int(ev, "seq");
        n_merges += ev && strcmp(tr_type(ev), "merge") == 0;
        if (ev && strcmp(tr_type(ev), "checkpoint") == 0 && tr_int(ev, "merges") > ckpt_merges)
            ckpt_merges = tr_int(ev, "merges");
        json_decref(ev);
    }
    fclose(f);
    if (how == LOSE_DIR)
        tr_lose_state_dir(&r);
    cr_log_info("ddp before the crash: eval loss %.4f (initial %.4f), step >= %lld, checkpoint at %lld",
                before, initial, (long long)step_seen, (long long)ckpt_merges);
    tr_syncer_start(&r, NULL, NULL);
    json_int_t restored = how == LOSE_NOTHING ? restored_merges(&r, last_seq) : 0;
    if (restored > ckpt_merges)
        ckpt_merges = restored;
    if (how == LOSE_NOTHING && n_merges <= ckpt_merges) {
        cr_log_info("no step after the last checkpoint (%lld): the checkpoint is the state",
                    (long long)ckpt_merges);
        cr_assert_null(wait_event(&r, "rebuild", 8000), "no rebuild when the checkpoint is current");
        tr_done(&r);
        return;
    }
    json_t *rb = wait_event(&r, "rebuild", 60000);
    if (!rb) {
        it_dump_log(r.dir, "syncer1");
        it_dump_log(r.dir, "learner0");
        cr_assert_fail("no rebuild event after the restart");
    }
    cr_assert_str_eq(json_string_value(json_object_get(rb, "start_state")),
                     how == LOSE_DIR ? "fresh" : "restored");
    cr_assert(json_is_false(json_object_get(rb, "momentum_reset")), "ddp keeps the AdamW moments");
    /* status's ddp_step is the next open step: a kill after the syncer closed
     * step t (ddp_step t + 1) and before its mean reached the learners leaves
     * them at t, and they send step t's gradients again (docs/training.md:
     * a ddp crash costs at most one step) */
    cr_assert_geq(tr_int(rb, "ddp_step"), step_seen - 1,
                  "the rebuilt state is at the step of the crash (%lld), or one before (%lld)",
                  (long long)step_seen, (long long)tr_int(rb, "ddp_step"));
    cr_assert_eq(tr_int(rb, "adam_steps"), tr_int(rb, "ddp_step"), "one AdamW step per ddp step");
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(rb, "fragments"), i, e)
    {
        cr_assert_str_eq(json_string_value(json_object_get(e, "from")), "learner", "fragment %zu", i);
        cr_assert_gt(tr_int(e, "version"), tr_int(e, "held_version"), "versions go above the held one");
    }
    cr_assert_eq(json_array_size(json_object_get(rb, "fragments")), 2);
    double after = eval_after(&r, tr_int(rb, "seq"), 30000);
    cr_log_info("ddp after the rebuild: eval loss %.4f (before %.4f, initial %.4f), at step %lld", after,
                before, initial, (long long)tr_int(rb, "ddp_step"));
    cr_assert(isfinite(after), "an eval after the rebuild");
    cr_assert_lt(after, initial - 0.5 * (initial - before), "eval %.4f went back toward the initial %.4f",
                 after, initial);
    cr_assert_lt(after, before + 0.3, "eval %.4f is not close to the %.4f before the crash", after, before);
    json_decref(rb);
    /* the learners finish the schedule, bit-identical with the syncer */
    tr_expect_exit0(&r, p[0], 0, 200000);
    tr_expect_exit0(&r, p[1], 1, 30000);
    st = tr_get(&r, "/v1/status");
    cr_assert(st, "status answers");
    cr_assert_eq(tr_int(st, "ddp_step"), DDP_STEPS, "the syncer took every step");
    const char *scrc = json_string_value(json_object_get(st, "params_crc32c"));
    for (int id = 0; id < 2; id++) {
        char name[16], crc[9];
        snprintf(name, sizeof name, "learner%d", id);
        cr_assert_eq(tr_log_crc(&r, name, crc), 0, "learner %d logs its final params_crc32c", id);
        cr_assert_str_eq(crc, scrc, "learner %d ends with params_crc32c %s, the syncer with %s", id, crc,
                         scrc);
    }
    json_decref(st);
    tr_done(&r);
}

Test(trainer_rebuild, ddp_state_dir_deleted, .timeout = 300)
{
    ddp_kill_and_lose(LOSE_DIR);
}

Test(trainer_rebuild, ddp_steps_after_the_checkpoint, .timeout = 300)
{
    ddp_kill_and_lose(LOSE_NOTHING);
}

/* ---- the protocol over HTTP ---- */

static json_t *post(tr_run *r, const char *path, json_t *body, int *status)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", r->url, path);
    json_t *j = it_http_json("POST", url, body, tr_cred(r, "learner-0"), status);
    json_decref(body);
    return j;
}

/* A join's holds: versions and CRCs, and seals made with key (NULL: none;
 * the seal of a fragment at version 0 is ""). */
static json_t *holds_sealed(const json_int_t *v, const uint32_t *crc, const seal_key *key, uint32_t digest)
{
    json_t *jv = json_array(), *jc = json_array(), *js = json_array();
    for (int p = 0; p < FRAGS; p++) {
        char b[9], seal[SEAL_HEX + 1] = "";
        proto_crc_format(crc[p], b);
        json_array_append_new(jv, json_integer(v[p]));
        json_array_append_new(jc, json_string(b));
        if (key && v[p] > 0)
            cr_assert_eq(seal_make(key, digest, p, v[p], crc[p], seal), 0);
        json_array_append_new(js, json_string(seal));
    }
    if (!key)
        return json_decref(js), json_pack("{s:o, s:o}", "versions", jv, "crc32c", jc);
    return json_pack("{s:o, s:o, s:o}", "versions", jv, "crc32c", jc, "seal", js);
}

static json_t *holds(const json_int_t *v, const uint32_t *crc)
{
    return holds_sealed(v, crc, NULL, 0);
}

/* POST fragment p's values to /v1/fragments/{p}/state; the HTTP status. */
static int upload(tr_run *r, json_int_t inc, int p, json_int_t version, const float *vals, size_t len)
{
    cx_http_client *c = cx_http_client_new(r->url, NULL);
    unsigned char *wire = malloc(len * 4);
    proto_f32_encode(vals, len, wire);
    char h[5][96], path[64], err[256];
    snprintf(h[0], sizeof h[0], "%s: 0", PROTO_H_LEARNER);
    snprintf(h[1], sizeof h[1], "%s: %lld", PROTO_H_INCARNATION, (long long)inc);
    snprintf(h[2], sizeof h[2], "%s: %d", PROTO_H_FRAGMENT, p);
    snprintf(h[3], sizeof h[3], "%s: %lld", PROTO_H_VERSION, (long long)version);
    snprintf(h[4], sizeof h[4], "%s: %08x", PROTO_H_CRC32C, cx_crc32c(0, wire, len * 4));
    const char *hdrs[] = {h[0], h[1], h[2], h[3], h[4], tr_auth(r, "learner-0"), NULL};
    snprintf(path, sizeof path, "/v1/fragments/%d/state", p);
    cx_http_result res;
    cx_http_result_init(&res);
    int st = -1;
    if (cx_http_do(c, "POST", path, hdrs, wire, len * 4, "application/octet-stream", 10000, &res, err,
                   sizeof err) == 0)
        st = res.status;
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    free(wire);
    return st;
}

static void start_one(tr_run *r, const char *tag, const char *extra)
{
    const char *args[] = {"--mode",
                          "decoupled",
                          "--learners",
                          "1",
                          "--quorum",
                          "1",
                          "--H",
                          "24",
                          "--fragments",
                          "4",
                          TR_MODEL,
                          extra,
                          extra ? "refuse" : NULL,
                          NULL};
    tr_syncer_start(r, tag, args);
}

Test(trainer_rebuild, join_upload_protocol, .timeout = 60)
{
    tr_run r = {0};
    start_one(&r, "rebuild-proto", NULL);
    int st;
    json_t *j;
    /* a join's holds are checked: wrong length, bad CRC text */
    j = post(&r, "/v1/join",
             json_pack("{s:i, s:i, s:{s:[i], s:[s]}}", "learner", 0, "incarnation", 0, "holds", "versions", 1,
                       "crc32c", "0"),
             &st);
    cr_assert_eq(st, 400);
    cr_assert(strstr(json_string_value(json_object_get(j, "error")), "holds"), "the error names holds");
    json_decref(j);
    json_int_t zero[FRAGS] = {0, 0, 0, 0}, three[FRAGS] = {3, 3, 3, 3};
    uint32_t crc[FRAGS] = {0, 0, 0, 0};
    j = post(&r, "/v1/join",
             json_pack("{s:i, s:i, s:{s:[i,i,i,i], s:[s,s,s,s]}}", "learner", 0, "incarnation", 0, "holds",
                       "versions", 1, 1, 1, 1, "crc32c", "0", "xyz", "0", "0"),
             &st);
    cr_assert_eq(st, 400);
    json_decref(j);
    /* a learner that holds nothing trained (versions 0) joins normally */
    j = post(&r, "/v1/join",
             json_pack("{s:i, s:i, s:o}", "learner", 0, "incarnation", 0, "holds", holds(zero, crc)), &st);
    cr_assert_eq(st, 200, "versions 0 change nothing");
    json_t *frags = json_object_get(j, "fragments");
    size_t len[FRAGS];
    for (int p = 0; p < FRAGS; p++) {
        len[p] = (size_t)tr_int(json_array_get(frags, (size_t)p), "length");
        cr_assert_eq(tr_int(json_array_get(frags, (size_t)p), "version"), 0);
    }
    uint32_t digest = (uint32_t)tr_int(j, "table_digest");
    json_decref(j);
    /* what the syncer seals with: a key from the admin credential, which no
     * learner holds (here the test plays the syncer that served the copies) */
    seal_key key, wrong;
    char err[256];
    cr_assert_eq(seal_key_derive(&key, tr_cred(&r, "admin"), err, sizeof err), 0, "%s", err);
    cr_assert_eq(seal_key_derive(&wrong, tr_cred(&r, "learner-0"), err, sizeof err), 0, "%s", err);
    /* an upload with no rebuild collecting is refused */
    float *vals[FRAGS];
    for (int p = 0; p < FRAGS; p++) {
        vals[p] = malloc(len[p] * sizeof(float));
        for (size_t k = 0; k < len[p]; k++)
            vals[p][k] = 0.001f * (float)(k % 97) - 0.03f * (float)p;
        crc[p] = proto_f32_crc(vals[p], len[p]);
    }
    cr_assert_eq(upload(&r, 1, 0, 3, vals[0], len[0]), 409);
    /* a report of version 3 without the syncer's seal, or with a seal made
     * with another key, is a claim: ignored (the learner joins normally,
     * nothing is rebuilt, a rebuild_claim_refused event says why) */
    j = post(&r, "/v1/join",
             json_pack("{s:i, s:i, s:o}", "learner", 0, "incarnation", 1, "holds", holds(three, crc)), &st);
    cr_assert_eq(st, 200, "an unsealed report opens no rebuild");
    json_decref(j);
    j = post(&r, "/v1/join",
             json_pack("{s:i, s:i, s:o}", "learner", 0, "incarnation", 2, "holds",
                       holds_sealed(three, crc, &wrong, digest)),
             &st);
    cr_assert_eq(st, 200, "a report sealed with another key opens no rebuild");
    json_decref(j);
    json_t *refused = wait_event(&r, "rebuild_claim_refused", 5000);
    cr_assert(refused, "a rebuild_claim_refused event");
    cr_assert_str_eq(json_string_value(json_object_get(refused, "reason")), "unsealed");
    json_decref(refused);
    j = post(&r, "/v1/join",
             json_pack("{s:i, s:i, s:{s:[i,i,i,i], s:[s,s,s,s], s:[s,s,s,s]}}", "learner", 0, "incarnation",
                       3, "holds", "versions", 3, 3, 3, 3, "crc32c", "0", "0", "0", "0", "seal", "xyz", "",
                       "", ""),
             &st);
    cr_assert_eq(st, 400, "a malformed seal is refused");
    json_decref(j);
    /* a learner holding version 3 of every fragment, sealed: 503 + upload list */
    j = post(&r, "/v1/join",
             json_pack("{s:i, s:i, s:o}", "learner", 0, "incarnation", 3, "holds",
                       holds_sealed(three, crc, &key, digest)),
             &st);
    cr_assert_eq(st, 503, "a join during the rebuild answers 503");
    json_t *rbj = json_object_get(j, "rebuild");
    json_int_t inc = tr_int(rbj, "incarnation");
    cr_assert_eq(json_array_size(json_object_get(rbj, "upload")), FRAGS, "every fragment is asked for");
    json_decref(j);
    /* while collecting: fragment GETs and contributions answer 503 */
    char url[256];
    snprintf(url, sizeof url, "%s/v1/fragments/0", r.url);
    j = it_http_json("GET", url, NULL, tr_cred(&r, "learner-0"), &st);
    json_decref(j);
    cr_assert_eq(st, 503, "no fragment is served while rebuilding");
    json_t *s = tr_get(&r, "/v1/status");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(s, "rebuild"), "state")),
                     "collecting");
    json_decref(s);
    /* an upload that is not what was reported is refused */
    cr_assert_eq(upload(&r, inc, 0, 2, vals[0], len[0]), 409, "another version than reported");
    cr_assert_eq(upload(&r, inc + 5, 0, 3, vals[0], len[0]), 409, "stale incarnation");
    float keep = vals[1][0];
    vals[1][0] = NAN;
    cr_assert_eq(upload(&r, inc, 1, 3, vals[1], len[1]), 400, "a non-finite value");
    vals[1][0] = keep;
    for (int p = 0; p < FRAGS; p++)
        cr_assert_eq(upload(&r, inc, p, 3, vals[p], len[p]), 200, "upload of fragment %d", p);
    /* every expected learner joined and uploaded: rebuilt within ticks */
    json_t *rb = wait_event(&r, "rebuild", 10000);
    cr_assert(rb, "a rebuild event");
    json_decref(rb);
    j = post(&r, "/v1/join",
             json_pack("{s:i, s:i, s:o}", "learner", 0, "incarnation", inc, "holds",
                       holds_sealed(three, crc, &key, digest)),
             &st);
    cr_assert_eq(st, 200, "joins again after the rebuild");
    frags = json_object_get(j, "fragments");
    for (int p = 0; p < FRAGS; p++)
        cr_assert_eq(tr_int(json_array_get(frags, (size_t)p), "version"), 3 + 1 + 1 * 2,
                     "version = max reported + 1 + learners * tau");
    json_decref(j);
    /* the fragments served are the uploaded values */
    cx_http_client *c = cx_http_client_new(r.url, NULL);
    for (int p = 0; p < FRAGS; p++) {
        char path[64], fc[16], sealed[SEAL_HEX + 2];
        cx_http_result res;
        cx_http_result_init(&res);
        snprintf(path, sizeof path, "/v1/fragments/%d", p);
        const char *auth[] = {tr_auth(&r, "learner-0"), NULL};
        cr_assert_eq(cx_http_do(c, "GET", path, auth, NULL, 0, NULL, 10000, &res, err, sizeof err), 0);
        cr_assert_eq(res.status, 200);
        cr_assert_eq(cx_http_result_header(&res, PROTO_H_FRAGMENT_CRC32C, fc, sizeof fc), 0);
        uint32_t got;
        cr_assert_eq(proto_crc_parse(fc, &got), 0);
        cr_assert_eq(got, crc[p], "fragment %d is the uploaded copy", p);
        /* sealed as what it is: this fragment at version 6 with that CRC */
        cr_assert_eq(cx_http_result_header(&res, PROTO_H_SEAL, sealed, sizeof sealed), 0, "a seal is served");
        cr_assert(seal_check(&key, digest, p, 6, got, sealed), "fragment %d: the seal is the syncer's", p);
        cr_assert(!seal_check(&key, digest, p, 5, got, sealed), "and binds the version");
        cx_http_result_cleanup(&res);
    }
    cx_http_client_free(c);
    for (int p = 0; p < FRAGS; p++)
        free(vals[p]);
    tr_done(&r);
}

Test(trainer_rebuild, refuse_when_asked, .timeout = 60)
{
    tr_run r = {0};
    start_one(&r, "rebuild-refuse", "--on-lost-state");
    int st;
    json_int_t five[FRAGS] = {5, 5, 5, 5};
    uint32_t crc[FRAGS] = {1, 2, 3, 4};
    /* a lie (no seal) refuses no one: the learner joins */
    json_t *j =
        post(&r, "/v1/join",
             json_pack("{s:i, s:i, s:o}", "learner", 0, "incarnation", 0, "holds", holds(five, crc)), &st);
    cr_assert_eq(st, 200, "an unsealed report is ignored, not a reason to refuse everyone");
    uint32_t digest = (uint32_t)tr_int(j, "table_digest");
    json_decref(j);
    /* a copy this syncer's key sealed proves the state was lost: refused */
    seal_key key;
    char err[256];
    cr_assert_eq(seal_key_derive(&key, tr_cred(&r, "admin"), err, sizeof err), 0, "%s", err);
    j = post(&r, "/v1/join",
             json_pack("{s:i, s:i, s:o}", "learner", 0, "incarnation", 1, "holds",
                       holds_sealed(five, crc, &key, digest)),
             &st);
    cr_assert_eq(st, 503, "refused");
    cr_assert(strstr(json_string_value(json_object_get(j, "error")), "refuse"), "the error says why");
    json_decref(j);
    json_t *s = tr_get(&r, "/v1/status");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(s, "rebuild"), "state")), "refused");
    json_decref(s);
    char url[256];
    snprintf(url, sizeof url, "%s/v1/fragments/0", r.url);
    j = it_http_json("GET", url, NULL, tr_cred(&r, "learner-0"), &st);
    json_decref(j);
    cr_assert_eq(st, 503, "the initial model is not handed out");
    json_t *ev = wait_event(&r, "lost_state", 5000);
    cr_assert(ev, "a lost_state event");
    json_decref(ev);
    tr_done(&r);
}

/* Learners that hold nothing trained start a fresh run normally. */
Test(trainer_rebuild, fresh_learners_start_from_scratch, .timeout = 120)
{
    tr_run r = {0};
    const char *args[] = {"--mode", "decoupled", "--learners", "2",           "--quorum", "1",      "--steps",
                          "96",     "--H",       "24",         "--fragments", "4",        TR_MODEL, NULL};
    tr_syncer_start(&r, "rebuild-fresh", args);
    pid_t p0 = tr_learner_start(&r, 0, NULL, NULL), p1 = tr_learner_start(&r, 1, NULL, NULL);
    tr_expect_exit0(&r, p0, 0, 100000);
    tr_expect_exit0(&r, p1, 1, 100000);
    json_t *evs = tr_events(&r, 0);
    cr_assert_null(first_of(evs, "rebuild"), "no rebuild in a fresh run");
    cr_assert_str_eq(json_string_value(json_object_get(first_of(evs, "start"), "start_state")), "fresh");
    json_decref(evs);
    cr_assert_gt(tr_merges(&r), 0);
    tr_done(&r);
}

Test(trainer_rebuild, bad_on_lost_state_value_is_refused, .timeout = 30)
{
    char *dir = it_mkdtemp("rebuild-flag"), state[600];
    snprintf(state, sizeof state, "%s/syncer", dir);
    const char *args[] = {"syncer", "--listen",        "127.0.0.1:0", "--state-dir",
                          state,    "--on-lost-state", "maybe",       NULL};
    pid_t pid = it_start(dir, "syncer", args, NULL);
    int st = it_wait_exit(pid, 20000);
    cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 64, "exit status 64 for a bad value (got %d)",
              st);
    char path[700], text[4096] = "";
    snprintf(path, sizeof path, "%s/syncer.log", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = '\0';
        fclose(f);
    }
    cr_assert(strstr(text, "--on-lost-state 'maybe'"), "the error names the flag and value: %s", text);
    it_cleanup();
    free(dir);
}
