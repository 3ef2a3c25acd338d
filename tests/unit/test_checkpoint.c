/* test_checkpoint.c - checkpoints: round trip, slots, corruption. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "trainer/checkpoint.h"

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/cx_test_ckpt_XXXXXX");
    cr_assert(mkdtemp(dir));
}
static void teardown(void)
{
    char p[128];
    const char *names[] = {"syncer.ckpt.a", "syncer.ckpt.b", "learner.ckpt.a", "learner.ckpt.b"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}
TestSuite(checkpoint, .init = setup, .fini = teardown);

#define NN 1000
#define NP 4

static void fill_syncer(ckpt_syncer *c, float *params, float *mom, int64_t *vers, ckpt_learner_inc *ls,
                        float seed)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < NN; i++) {
        params[i] = seed + (float)i * 0.001f;
        mom[i] = -seed * (float)i;
    }
    for (int p = 0; p < NP; p++)
        vers[p] = 10 * p + (int64_t)seed;
    ls[0] = (ckpt_learner_inc){0, 3};
    ls[1] = (ckpt_learner_inc){5, 1};
    c->mode = 3;
    c->n = NN;
    c->P = NP;
    c->table_digest = 0x1234;
    c->merges = 77;
    c->tokens_merged = 123456;
    c->ddp_step = 9;
    c->event_seq = 500;
    c->versions = vers;
    c->params = params;
    c->momentum = mom;
    c->n_learners = 2;
    c->learners = ls;
}

Test(checkpoint, syncer_round_trip)
{
    static float params[NN], mom[NN];
    int64_t vers[NP];
    ckpt_learner_inc ls[2];
    ckpt_syncer c, back;
    char err[CX_ERRLEN];
    fill_syncer(&c, params, mom, vers, ls, 1.5f);
    cr_assert_eq(ckpt_syncer_save(dir, &c, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ckpt_syncer_load(dir, &back, NN, NP, 0x1234, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.merges, 77);
    cr_assert_eq(back.tokens_merged, 123456);
    cr_assert_eq(back.event_seq, 500);
    cr_assert_eq(memcmp(back.params, params, sizeof params), 0);
    cr_assert_eq(memcmp(back.momentum, mom, sizeof mom), 0);
    cr_assert_eq(memcmp(back.versions, vers, sizeof vers), 0);
    cr_assert_null(back.adam_m);
    cr_assert_eq(back.n_learners, 2);
    cr_assert_eq(back.learners[0].incarnation, 3);
    cr_assert_eq(back.learners[1].learner, 5);
    ckpt_syncer_cleanup(&back);
}

Test(checkpoint, newest_slot_wins_and_a_damaged_one_falls_back)
{
    static float params[NN], mom[NN];
    int64_t vers[NP];
    ckpt_learner_inc ls[2];
    ckpt_syncer c, back;
    char err[CX_ERRLEN], path[128];
    fill_syncer(&c, params, mom, vers, ls, 1.0f);
    cr_assert_eq(ckpt_syncer_save(dir, &c, err, sizeof err), 0, "%s", err); /* gen 1 -> slot a */
    c.merges = 78;
    cr_assert_eq(ckpt_syncer_save(dir, &c, err, sizeof err), 0, "%s", err); /* gen 2 -> slot b */
    cr_assert_eq(ckpt_syncer_load(dir, &back, NN, NP, 0, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.merges, 78);
    cr_assert_eq(back.generation, 2);
    ckpt_syncer_cleanup(&back);
    /* flip one byte in the middle of slot b: its CRC fails, slot a is used */
    snprintf(path, sizeof path, "%s/syncer.ckpt.b", dir);
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    unsigned char byte;
    cr_assert_eq(pread(fd, &byte, 1, 2000), 1);
    byte ^= 0x40;
    cr_assert_eq(pwrite(fd, &byte, 1, 2000), 1);
    close(fd);
    cr_assert_eq(ckpt_syncer_load(dir, &back, NN, NP, 0, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.merges, 77);
    ckpt_syncer_cleanup(&back);
    /* the next save replaces the damaged slot, not the good one */
    c.merges = 79;
    cr_assert_eq(ckpt_syncer_save(dir, &c, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ckpt_syncer_load(dir, &back, NN, NP, 0, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.merges, 79);
    ckpt_syncer_cleanup(&back);
}

Test(checkpoint, corruption_and_mismatch_are_refused)
{
    static float params[NN], mom[NN];
    int64_t vers[NP];
    ckpt_learner_inc ls[2];
    ckpt_syncer c, back;
    char err[CX_ERRLEN] = "", path[128];
    cr_assert_eq(ckpt_syncer_load(dir, &back, NN, NP, 0, err, sizeof err), CX_ENOTFOUND);
    fill_syncer(&c, params, mom, vers, ls, 2.0f);
    cr_assert_eq(ckpt_syncer_save(dir, &c, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ckpt_syncer_load(dir, &back, NN + 1, NP, 0, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "another model") != NULL, "%s", err);
    cr_assert_eq(ckpt_syncer_load(dir, &back, NN, NP, 0x9999, err, sizeof err), CX_EINVAL);
    snprintf(path, sizeof path, "%s/syncer.ckpt.a", dir);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(truncate(path, st.st_size - 10), 0);
    cr_assert_eq(ckpt_syncer_load(dir, &back, NN, NP, 0, err, sizeof err), CX_ECORRUPT);
}

/* The tensors and per-fragment counters a learner checkpoint points into:
 * base versions 1..4, fragment steps 5..8, fragment tokens 80..128, and the
 * rebase state (origins 200.., one accepted send in flight on fragment 1). */
static struct {
    float params[NN], m[NN], v[NN], base[NN], sent[NN];
    int64_t bv[NP], fs[NP], ft[NP], os[NP], ss[NP], sst[NP], stk[NP], sa[NP];
} lrn = {.bv = {1, 2, 3, 4},
         .fs = {5, 6, 7, 8},
         .ft = {80, 96, 112, 128},
         .os = {200, 201, 202, 203},
         .ss = {-1, 230, -1, -1},
         .sst = {0, 3, 0, 0},
         .stk = {0, 48, 0, 0},
         .sa = {0, 1, 0, 0}};

/* A learner checkpoint of those arrays (table digest 42) and cursor_len
 * bytes of cursor; the caller sets the counters it checks. */
static ckpt_learner learner_of(unsigned char *cursor, size_t cursor_len)
{
    ckpt_learner c = {.n = NN, .P = NP, .table_digest = 42, .cursor_len = cursor_len, .cursor = cursor};
    c.params = lrn.params;
    c.adam_m = lrn.m;
    c.adam_v = lrn.v;
    c.base_version = lrn.bv;
    c.frag_steps = lrn.fs;
    c.frag_tokens = lrn.ft;
    c.base = lrn.base;
    c.sent = lrn.sent;
    c.origin_step = lrn.os;
    c.send_step = lrn.ss;
    c.send_steps = lrn.sst;
    c.send_tokens = lrn.stk;
    c.send_accepted = lrn.sa;
    return c;
}

Test(checkpoint, learner_round_trip)
{
    unsigned char cursor[100];
    ckpt_learner back;
    char err[CX_ERRLEN];
    for (int i = 0; i < NN; i++) {
        lrn.params[i] = (float)i;
        lrn.m[i] = (float)i * 2;
        lrn.v[i] = (float)i * 3;
        lrn.base[i] = (float)i * 4;
        lrn.sent[i] = (float)i * 5;
    }
    for (int i = 0; i < 100; i++)
        cursor[i] = (unsigned char)(i * 7);
    ckpt_learner c = learner_of(cursor, sizeof cursor);
    c.learner = 3;
    c.incarnation = 4;
    c.step = 240;
    c.tokens = 3840;
    c.adam_steps = 240;
    cr_assert_eq(ckpt_learner_save(dir, &c, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ckpt_learner_load(dir, &back, NN, NP, 42, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.learner, 3);
    cr_assert_eq(back.incarnation, 4);
    cr_assert_eq(back.step, 240);
    cr_assert_eq(back.adam_steps, 240);
    cr_assert_eq(memcmp(back.params, lrn.params, sizeof lrn.params), 0);
    cr_assert_eq(memcmp(back.adam_v, lrn.v, sizeof lrn.v), 0);
    cr_assert_eq(memcmp(back.frag_tokens, lrn.ft, sizeof lrn.ft), 0);
    cr_assert_eq(memcmp(back.base, lrn.base, sizeof lrn.base), 0);
    cr_assert_eq(memcmp(back.sent, lrn.sent, sizeof lrn.sent), 0);
    cr_assert_eq(memcmp(back.origin_step, lrn.os, sizeof lrn.os), 0);
    cr_assert_eq(memcmp(back.send_step, lrn.ss, sizeof lrn.ss), 0);
    cr_assert_eq(memcmp(back.send_steps, lrn.sst, sizeof lrn.sst), 0);
    cr_assert_eq(memcmp(back.send_tokens, lrn.stk, sizeof lrn.stk), 0);
    cr_assert_eq(memcmp(back.send_accepted, lrn.sa, sizeof lrn.sa), 0);
    cr_assert_eq(back.cursor_len, sizeof cursor);
    cr_assert_eq(memcmp(back.cursor, cursor, sizeof cursor), 0);
    ckpt_learner_cleanup(&back);
}

/* ---- partial saves left by a crash ---- */

static void touch(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert_geq(fd, 0, "%s", p);
    cr_assert_eq(write(fd, "partial", 7), 7);
    close(fd);
}

static int exists(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static void rm(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
}

/* A pid that has just exited (reaped), so no process has it. */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
        _exit(0);
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
    return pid;
}

Test(checkpoint, load_removes_partial_saves_of_dead_writers)
{
    char dead_a[64], dead_b[64], mine[64], live[64], learner_dead[64];
    pid_t dead = dead_pid();
    snprintf(dead_a, sizeof dead_a, "syncer.ckpt.a.tmp.%d", (int)dead);
    snprintf(dead_b, sizeof dead_b, "syncer.ckpt.b.tmp.%d", (int)dead);
    snprintf(mine, sizeof mine, "syncer.ckpt.a.tmp.%d", (int)getpid());  /* a pid reused after a restart */
    snprintf(live, sizeof live, "syncer.ckpt.b.tmp.%d", (int)getppid()); /* someone else is writing */
    snprintf(learner_dead, sizeof learner_dead, "learner.ckpt.b.tmp.%d", (int)dead);
    const char *keep[] = {live, "syncer.ckpt.a.tmp.12x", "syncer.ckpt.a.tmp.", "syncer.ckpt.c.tmp.1",
                          "notes.tmp.1"};
    touch(dead_a);
    touch(dead_b);
    touch(mine);
    touch(learner_dead);
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        touch(keep[i]);

    /* no checkpoint yet: still not found, but the debris is gone */
    ckpt_syncer c;
    char err[CX_ERRLEN];
    cr_assert_eq(ckpt_syncer_load(dir, &c, 0, 0, 0, err, sizeof err), CX_ENOTFOUND, "%s", err);
    cr_expect(!exists(dead_a) && !exists(dead_b), "a dead writer's partial saves are removed");
    cr_expect(!exists(mine), "a partial save under this process's own pid is removed");
    cr_expect(exists(learner_dead), "the syncer's load leaves the learner's files alone");
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        cr_expect(exists(keep[i]), "%s is kept", keep[i]);

    ckpt_learner l;
    cr_assert_eq(ckpt_learner_load(dir, &l, 0, 0, 0, err, sizeof err), CX_ENOTFOUND, "%s", err);
    cr_expect(!exists(learner_dead), "the learner's load removes its own partial saves");

    /* with a real checkpoint the partial one beside it goes too, the load still works */
    static float params[NN], mom[NN];
    int64_t vers[NP];
    ckpt_learner_inc ls[2];
    fill_syncer(&c, params, mom, vers, ls, 1.0f);
    cr_assert_eq(ckpt_syncer_save(dir, &c, err, sizeof err), 0, "%s", err);
    touch(dead_b);
    ckpt_syncer back;
    cr_assert_eq(ckpt_syncer_load(dir, &back, NN, NP, 0x1234, err, sizeof err), 0, "%s", err);
    cr_expect(!exists(dead_b));
    cr_expect_eq(back.merges, 77);
    ckpt_syncer_cleanup(&back);
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        rm(keep[i]);
}

/* ---- background writer ---- */

/* A before_write hook that holds the write until the test releases it. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered; /* writes that reached the hook */
    int open;    /* 1: let writes through */
} gate;

static void gate_wait(void *ctx)
{
    gate *g = ctx;
    pthread_mutex_lock(&g->mu);
    g->entered++;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

Test(checkpoint, writer_snapshots_skips_while_busy_and_writes_the_snapshot)
{
    unsigned char cursor[16] = {9};
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    ckpt_learner back;
    char err[CX_ERRLEN];
    for (int i = 0; i < NN; i++)
        lrn.params[i] = lrn.m[i] = lrn.v[i] = (float)i;
    ckpt_learner c = learner_of(cursor, sizeof cursor);
    c.learner = 1;
    c.step = 100;
    ckpt_writer *w = ckpt_writer_new(dir, NN, NP, sizeof cursor, gate_wait, &g);
    cr_assert(w);
    cr_assert_eq(ckpt_writer_submit(w, &c), 1, "an idle writer takes the snapshot");
    /* the caller's state moves on at once: the writer must have copied it */
    lrn.params[0] = -1.0f;
    c.step = 200;
    pthread_mutex_lock(&g.mu);
    while (g.entered == 0)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    cr_assert_eq(ckpt_writer_submit(w, &c), 0, "a submit while the write runs is skipped, not waited for");
    ckpt_learner bad = c;
    bad.n = NN - 1;
    cr_assert_eq(ckpt_writer_submit(w, &bad), CX_EINVAL, "a snapshot of another shape is refused");
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    ckpt_writer_wait(w);
    ckpt_writer_stats st;
    ckpt_writer_get_stats(w, &st);
    cr_assert_eq(st.written, 1);
    cr_assert_eq(st.skipped, 1);
    cr_assert_eq(st.failed, 0);
    cr_assert_eq(ckpt_learner_load(dir, &back, NN, NP, 42, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.step, 100, "the snapshot as submitted, not the state after it");
    cr_assert_float_eq(back.params[0], 0.0f, 0.0);
    cr_assert_eq(memcmp(back.frag_tokens, lrn.ft, sizeof lrn.ft), 0);
    cr_assert_eq(memcmp(back.send_step, lrn.ss, sizeof lrn.ss), 0);
    cr_assert_eq(memcmp(back.sent, lrn.sent, sizeof lrn.sent), 0);
    ckpt_learner_cleanup(&back);
    /* idle again: the next submit is taken and written */
    cr_assert_eq(ckpt_writer_submit(w, &c), 1);
    ckpt_writer_free(w); /* finishes the write in progress */
    cr_assert_eq(ckpt_learner_load(dir, &back, NN, NP, 42, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.step, 200);
    cr_assert_float_eq(back.params[0], -1.0f, 0.0);
    ckpt_learner_cleanup(&back);
    ckpt_writer_free(NULL);
}
