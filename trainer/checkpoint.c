/* checkpoint.c - syncer and learner checkpoints (checkpoint.h).
 *
 * Record layout (all little-endian, no padding):
 *   u32 magic ("CXSY" syncer / "CXLR" learner), u32 format version,
 *   then the fields in the order of the struct, arrays as u64 count + data.
 */
#include "trainer/checkpoint.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/file.h"
#include "common/log.h"

#define MAGIC_SYNCER 0x59535843u  /* "CXSY" */
#define MAGIC_LEARNER 0x524c5843u /* "CXLR" */
#define FORMAT_VERSION                                                                                       \
    2u /* 2: the learner's rebase state (base, sent, send counters), the syncer's tokens_trained */
#define CKPT_MAX_BYTES ((size_t)4 << 30)
#define CKPT_WRITER_NICE 10 /* the background writer's nice value (the inner loop runs at 0) */

/* ---- checkpoint: writer ---- */

static int put(cx_buf *b, const void *p, size_t n)
{
    return cx_buf_append(b, p, n);
}
static int put_u32(cx_buf *b, uint32_t v)
{
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    return put(b, x, 4);
}
static int put_u64(cx_buf *b, uint64_t v)
{
    int rc = put_u32(b, (uint32_t)v);
    return rc ? rc : put_u32(b, (uint32_t)(v >> 32));
}
static int put_i64(cx_buf *b, int64_t v)
{
    return put_u64(b, (uint64_t)v);
}
/* count, then floats (bit patterns, little-endian). A NULL array is count 0. */
static int put_floats(cx_buf *b, const float *v, uint64_t n)
{
    int rc = put_u64(b, v ? n : 0);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* the record is little-endian f32: on such a host one append (a
     * learner saves several times a second in the background) */
    if (rc == 0 && v && n > 0)
        rc = n > SIZE_MAX / 4 ? CX_ENOMEM : put(b, v, (size_t)n * 4);
    return rc;
#endif
    for (uint64_t i = 0; rc == 0 && v && i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        rc = put_u32(b, u);
    }
    return rc;
}
/* count, then values; like put_floats, a NULL array is count 0 */
static int put_i64s(cx_buf *b, const int64_t *v, uint64_t n)
{
    int rc = put_u64(b, v ? n : 0);
    for (uint64_t i = 0; rc == 0 && v && i < n; i++)
        rc = put_i64(b, v[i]);
    return rc;
}

/* ---- checkpoint: reader ---- */

typedef struct rd {
    const unsigned char *p; /* cursor */
    size_t left;            /* bytes left */
    int bad;                /* 1 after a read past the end */
} rd;

static void get(rd *r, void *out, size_t n)
{
    if (r->bad || r->left < n) {
        r->bad = 1;
        memset(out, 0, n);
        return;
    }
    memcpy(out, r->p, n);
    r->p += n;
    r->left -= n;
}
static uint32_t get_u32(rd *r)
{
    unsigned char x[4];
    get(r, x, 4);
    return (uint32_t)x[0] | (uint32_t)x[1] << 8 | (uint32_t)x[2] << 16 | (uint32_t)x[3] << 24;
}
static uint64_t get_u64(rd *r)
{
    uint64_t lo = get_u32(r);
    return lo | (uint64_t)get_u32(r) << 32;
}
static int64_t get_i64(rd *r)
{
    return (int64_t)get_u64(r);
}
/* A float array whose count must be `want` (or 0 when may_be_empty). */
static float *get_floats(rd *r, uint64_t want, int may_be_empty)
{
    uint64_t n = get_u64(r);
    if (r->bad || (n != want && !(may_be_empty && n == 0)) || n > r->left / 4) {
        r->bad = 1;
        return NULL;
    }
    if (n == 0)
        return NULL;
    float *v = malloc(n * sizeof *v);
    if (!v) {
        r->bad = 1;
        return NULL;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint32_t u = get_u32(r);
        memcpy(&v[i], &u, 4);
    }
    return v;
}
static int64_t *get_i64s(rd *r, uint64_t want)
{
    uint64_t n = get_u64(r);
    if (r->bad || n != want || n > r->left / 8) {
        r->bad = 1;
        return NULL;
    }
    int64_t *v = calloc(n ? n : 1, sizeof *v);
    if (!v) {
        r->bad = 1;
        return NULL;
    }
    for (uint64_t i = 0; i < n; i++)
        v[i] = get_i64(r);
    return v;
}

/* ---- checkpoint: slots ---- */

static void slot_path(const char *dir, const char *name, int slot, char *out, size_t len)
{
    snprintf(out, len, "%s/%s.%c", dir, name, slot ? 'b' : 'a');
}

static int peek_generation(const void *payload, size_t len, uint32_t magic, int64_t *gen)
{
    rd r = {payload, len, 0};
    if (get_u32(&r) != magic || get_u32(&r) != FORMAT_VERSION)
        return CX_ECORRUPT;
    *gen = get_i64(&r);
    return r.bad ? CX_ECORRUPT : 0;
}

/* Index of the slot to write next: the older (or missing/invalid) one, and
 * the newest generation seen. */
static int next_slot(const char *dir, const char *name, uint32_t magic, int64_t *newest)
{
    int64_t gen[2] = {-1, -1};
    for (int s = 0; s < 2; s++) {
        char path[4096];
        void *p = NULL;
        size_t len = 0;
        slot_path(dir, name, s, path, sizeof path);
        if (cx_file_read_blob(path, CKPT_MAX_BYTES, &p, &len, NULL, 0) == 0)
            peek_generation(p, len, magic, &gen[s]);
        free(p);
    }
    *newest = gen[0] > gen[1] ? gen[0] : gen[1];
    if (*newest < 0)
        *newest = 0;
    return gen[0] <= gen[1] ? 0 : 1;
}

static int save_payload(const char *dir, const char *name, int slot, cx_buf *b, char *err, size_t errlen)
{
    char path[4096];
    slot_path(dir, name, slot, path, sizeof path);
    return cx_file_write_blob(path, b->data, b->len, err, errlen);
}

/* Load both slots; call decode on each valid one, keep the newest. */
typedef int (*decode_fn)(const void *payload, size_t len, void *out, char *err, size_t errlen);

static int load_newest(const char *dir, const char *name, uint32_t magic, decode_fn decode, void *out_a,
                       void *out_b, int *which, char *err, size_t errlen)
{
    int found = 0, valid[2] = {0, 0};
    int64_t gen[2] = {-1, -1};
    char why[2][CX_ERRLEN] = {"", ""};
    void *outs[2] = {out_a, out_b};
    for (int s = 0; s < 2; s++) {
        char path[4096];
        void *p = NULL;
        size_t len = 0;
        slot_path(dir, name, s, path, sizeof path);
        /* a crash mid-save leaves "<slot>.tmp.PID"; loading is the start */
        cx_file_remove_stale_tmp(path, NULL, 0);
        int rc = cx_file_read_blob(path, CKPT_MAX_BYTES, &p, &len, why[s], sizeof why[s]);
        if (rc == CX_ENOTFOUND) {
            free(p);
            continue;
        }
        found = 1;
        if (rc == 0 && peek_generation(p, len, magic, &gen[s]) == 0 &&
            decode(p, len, outs[s], why[s], sizeof why[s]) == 0)
            valid[s] = 1;
        else if (rc == 0 && !why[s][0])
            snprintf(why[s], sizeof why[s], "slot %c: bad record", s ? 'b' : 'a');
        free(p);
    }
    if (!found)
        return cx_fail(err, errlen, CX_ENOTFOUND, "no checkpoint in %s", dir);
    if (!valid[0] && !valid[1])
        return cx_fail(err, errlen, CX_ECORRUPT, "no valid checkpoint in %s (%s; %s)", dir,
                       why[0][0] ? why[0] : "slot a missing", why[1][0] ? why[1] : "slot b missing");
    *which = valid[0] && (!valid[1] || gen[0] > gen[1]) ? 0 : 1;
    return 0;
}

/* ---- checkpoint: syncer ---- */

int ckpt_syncer_save(const char *dir, ckpt_syncer *c, char *err, size_t errlen)
{
    cx_buf b;
    int64_t newest;
    int slot = next_slot(dir, "syncer.ckpt", MAGIC_SYNCER, &newest);
    int rc = 0;
    c->generation = newest + 1;
    cx_buf_init(&b, CKPT_MAX_BYTES);
    rc |= put_u32(&b, MAGIC_SYNCER);
    rc |= put_u32(&b, FORMAT_VERSION);
    rc |= put_i64(&b, c->generation);
    rc |= put_i64(&b, c->mode);
    rc |= put_u64(&b, c->n);
    rc |= put_i64(&b, c->P);
    rc |= put_u32(&b, c->table_digest);
    rc |= put_i64(&b, c->merges);
    rc |= put_i64(&b, c->tokens_merged);
    rc |= put_i64(&b, c->tokens_trained);
    rc |= put_i64(&b, c->ddp_step);
    rc |= put_i64(&b, c->event_seq);
    rc |= put_i64s(&b, c->versions, (uint64_t)c->P);
    rc |= put_floats(&b, c->params, c->n);
    rc |= put_floats(&b, c->momentum, c->n);
    rc |= put_i64(&b, c->adam_steps);
    rc |= put_floats(&b, c->adam_m, c->n);
    rc |= put_floats(&b, c->adam_v, c->n);
    rc |= put_u64(&b, (uint64_t)c->n_learners);
    for (int64_t i = 0; rc == 0 && i < c->n_learners; i++) {
        rc |= put_i64(&b, c->learners[i].learner);
        rc |= put_i64(&b, c->learners[i].incarnation);
    }
    if (rc)
        rc = cx_fail(err, errlen, CX_ENOMEM, "checkpoint: cannot build the record");
    else
        rc = save_payload(dir, "syncer.ckpt", slot, &b, err, errlen);
    cx_buf_cleanup(&b);
    return rc;
}

static int decode_syncer(const void *payload, size_t len, void *out, char *err, size_t errlen)
{
    ckpt_syncer *c = out;
    rd r = {payload, len, 0};
    memset(c, 0, sizeof *c);
    get_u32(&r);
    get_u32(&r);
    c->generation = get_i64(&r);
    c->mode = get_i64(&r);
    c->n = get_u64(&r);
    c->P = get_i64(&r);
    c->table_digest = get_u32(&r);
    c->merges = get_i64(&r);
    c->tokens_merged = get_i64(&r);
    c->tokens_trained = get_i64(&r);
    c->ddp_step = get_i64(&r);
    c->event_seq = get_i64(&r);
    if (r.bad || c->P < 1 || c->P > 1 << 20 || c->n < 1 || c->n > len) {
        ckpt_syncer_cleanup(c);
        return cx_fail(err, errlen, CX_ECORRUPT, "syncer checkpoint: bad header");
    }
    c->versions = get_i64s(&r, (uint64_t)c->P);
    c->params = get_floats(&r, c->n, 0);
    c->momentum = get_floats(&r, c->n, 0);
    c->adam_steps = get_i64(&r);
    c->adam_m = get_floats(&r, c->n, 1);
    c->adam_v = get_floats(&r, c->n, 1);
    c->n_learners = (int64_t)get_u64(&r);
    if (!r.bad && (c->n_learners < 0 || c->n_learners > CKPT_MAX_LEARNERS))
        r.bad = 1;
    if (!r.bad) {
        c->learners = calloc((size_t)c->n_learners + 1, sizeof *c->learners);
        for (int64_t i = 0; c->learners && i < c->n_learners; i++) {
            c->learners[i].learner = get_i64(&r);
            c->learners[i].incarnation = get_i64(&r);
        }
    }
    if (r.bad || r.left != 0 || !c->learners || (!c->adam_m) != (!c->adam_v)) {
        ckpt_syncer_cleanup(c);
        return cx_fail(err, errlen, CX_ECORRUPT, "syncer checkpoint: truncated or inconsistent record");
    }
    return 0;
}

int ckpt_syncer_load(const char *dir, ckpt_syncer *c, uint64_t expect_n, int64_t expect_P,
                     uint32_t expect_digest, char *err, size_t errlen)
{
    ckpt_syncer s[2];
    int which, rc;
    memset(s, 0, sizeof s);
    rc = load_newest(dir, "syncer.ckpt", MAGIC_SYNCER, decode_syncer, &s[0], &s[1], &which, err, errlen);
    if (rc)
        return rc;
    *c = s[which];
    ckpt_syncer_cleanup(&s[!which]);
    if ((expect_n && c->n != expect_n) || (expect_P && c->P != expect_P) ||
        (expect_digest && c->table_digest != expect_digest)) {
        rc = cx_fail(err, errlen, CX_EINVAL,
                     "syncer checkpoint in %s is for another model (%llu params, %lld fragments; "
                     "expected %llu, %lld)",
                     dir, (unsigned long long)c->n, (long long)c->P, (unsigned long long)expect_n,
                     (long long)expect_P);
        ckpt_syncer_cleanup(c);
    }
    return rc;
}

void ckpt_syncer_cleanup(ckpt_syncer *c)
{
    if (!c)
        return;
    free(c->versions);
    free(c->params);
    free(c->momentum);
    free(c->adam_m);
    free(c->adam_v);
    free(c->learners);
    memset(c, 0, sizeof *c);
}

/* ---- checkpoint: learner ---- */

/* Save c into slot with generation newest + 1. */
static int learner_save_at(const char *dir, ckpt_learner *c, int slot, int64_t newest, char *err,
                           size_t errlen)
{
    cx_buf b;
    int rc = 0;
    c->generation = newest + 1;
    cx_buf_init(&b, CKPT_MAX_BYTES);
    rc |= put_u32(&b, MAGIC_LEARNER);
    rc |= put_u32(&b, FORMAT_VERSION);
    rc |= put_i64(&b, c->generation);
    rc |= put_i64(&b, c->learner);
    rc |= put_i64(&b, c->incarnation);
    rc |= put_i64(&b, c->step);
    rc |= put_i64(&b, c->tokens);
    rc |= put_u64(&b, c->n);
    rc |= put_i64(&b, c->P);
    rc |= put_u32(&b, c->table_digest);
    rc |= put_floats(&b, c->params, c->n);
    rc |= put_i64(&b, c->adam_steps);
    rc |= put_floats(&b, c->adam_m, c->n);
    rc |= put_floats(&b, c->adam_v, c->n);
    rc |= put_i64s(&b, c->base_version, (uint64_t)c->P);
    rc |= put_i64s(&b, c->frag_steps, (uint64_t)c->P);
    rc |= put_i64s(&b, c->frag_tokens, (uint64_t)c->P);
    rc |= put_floats(&b, c->base, c->n);
    rc |= put_floats(&b, c->sent, c->n);
    rc |= put_i64s(&b, c->origin_step, (uint64_t)c->P);
    rc |= put_i64s(&b, c->send_step, (uint64_t)c->P);
    rc |= put_i64s(&b, c->send_steps, (uint64_t)c->P);
    rc |= put_i64s(&b, c->send_tokens, (uint64_t)c->P);
    rc |= put_i64s(&b, c->send_accepted, (uint64_t)c->P);
    rc |= put_u64(&b, c->cursor_len);
    rc |= put(&b, c->cursor, c->cursor_len);
    if (rc)
        rc = cx_fail(err, errlen, CX_ENOMEM, "checkpoint: cannot build the record");
    else
        rc = save_payload(dir, "learner.ckpt", slot, &b, err, errlen);
    cx_buf_cleanup(&b);
    return rc;
}

int ckpt_learner_save(const char *dir, ckpt_learner *c, char *err, size_t errlen)
{
    int64_t newest;
    int slot = next_slot(dir, "learner.ckpt", MAGIC_LEARNER, &newest);
    return learner_save_at(dir, c, slot, newest, err, errlen);
}

static int decode_learner(const void *payload, size_t len, void *out, char *err, size_t errlen)
{
    ckpt_learner *c = out;
    rd r = {payload, len, 0};
    memset(c, 0, sizeof *c);
    get_u32(&r);
    get_u32(&r);
    c->generation = get_i64(&r);
    c->learner = get_i64(&r);
    c->incarnation = get_i64(&r);
    c->step = get_i64(&r);
    c->tokens = get_i64(&r);
    c->n = get_u64(&r);
    c->P = get_i64(&r);
    c->table_digest = get_u32(&r);
    if (r.bad || c->P < 1 || c->P > 1 << 20 || c->n < 1 || c->n > len) {
        ckpt_learner_cleanup(c);
        return cx_fail(err, errlen, CX_ECORRUPT, "learner checkpoint: bad header");
    }
    c->params = get_floats(&r, c->n, 0);
    c->adam_steps = get_i64(&r);
    c->adam_m = get_floats(&r, c->n, 0);
    c->adam_v = get_floats(&r, c->n, 0);
    c->base_version = get_i64s(&r, (uint64_t)c->P);
    c->frag_steps = get_i64s(&r, (uint64_t)c->P);
    c->frag_tokens = get_i64s(&r, (uint64_t)c->P);
    c->base = get_floats(&r, c->n, 0);
    c->sent = get_floats(&r, c->n, 0);
    c->origin_step = get_i64s(&r, (uint64_t)c->P);
    c->send_step = get_i64s(&r, (uint64_t)c->P);
    c->send_steps = get_i64s(&r, (uint64_t)c->P);
    c->send_tokens = get_i64s(&r, (uint64_t)c->P);
    c->send_accepted = get_i64s(&r, (uint64_t)c->P);
    c->cursor_len = get_u64(&r);
    if (!r.bad && c->cursor_len > r.left)
        r.bad = 1;
    if (!r.bad) {
        c->cursor = malloc(c->cursor_len ? c->cursor_len : 1);
        if (c->cursor)
            get(&r, c->cursor, c->cursor_len);
    }
    if (r.bad || r.left != 0 || !c->cursor) {
        ckpt_learner_cleanup(c);
        return cx_fail(err, errlen, CX_ECORRUPT, "learner checkpoint: truncated or inconsistent record");
    }
    return 0;
}

int ckpt_learner_load(const char *dir, ckpt_learner *c, uint64_t expect_n, int64_t expect_P,
                      uint32_t expect_digest, char *err, size_t errlen)
{
    ckpt_learner s[2];
    int which, rc;
    memset(s, 0, sizeof s);
    rc = load_newest(dir, "learner.ckpt", MAGIC_LEARNER, decode_learner, &s[0], &s[1], &which, err, errlen);
    if (rc)
        return rc;
    *c = s[which];
    ckpt_learner_cleanup(&s[!which]);
    if ((expect_n && c->n != expect_n) || (expect_P && c->P != expect_P) ||
        (expect_digest && c->table_digest != expect_digest)) {
        rc = cx_fail(err, errlen, CX_EINVAL,
                     "learner checkpoint in %s is for another model (%llu params, %lld fragments; "
                     "expected %llu, %lld)",
                     dir, (unsigned long long)c->n, (long long)c->P, (unsigned long long)expect_n,
                     (long long)expect_P);
        ckpt_learner_cleanup(c);
    }
    return rc;
}

void ckpt_learner_cleanup(ckpt_learner *c)
{
    if (!c)
        return;
    free(c->params);
    free(c->adam_m);
    free(c->adam_v);
    free(c->base_version);
    free(c->frag_steps);
    free(c->frag_tokens);
    free(c->base);
    free(c->sent);
    free(c->origin_step);
    free(c->send_step);
    free(c->send_steps);
    free(c->send_tokens);
    free(c->send_accepted);
    free(c->cursor);
    memset(c, 0, sizeof *c);
}

/* ---- checkpoint: background learner writer ---- */

struct ckpt_writer {
    char dir[1024];                  /* where the thread saves */
    pthread_t thread;                /* the writer */
    pthread_mutex_t mu;              /* guards busy, quit, stats */
    pthread_cond_t cv;               /* busy or quit changed */
    int busy;                        /* 1 from submit until the save returned */
    int quit;                        /* free -> thread: exit once idle */
    ckpt_learner snap;               /* the snapshot; its arrays point into buf */
    void *buf;                       /* one allocation: 5n floats, 8P int64, cursor */
    ckpt_writer_stats stats;         /* counters */
    int next_slot;                   /* thread: slot of the next save, -1 = read the dir */
    int64_t newest;                  /* thread: generation of the last save (valid with next_slot) */
    void (*before_write)(void *ctx); /* test hook or NULL */
    void *ctx;                       /* its argument */
};

static void *writer_main(void *arg)
{
    ckpt_writer *w = arg;
    char why[CX_ERRLEN];
    /* below the inner loop: on a loaded box the writer yields its CPU (a
     * checkpoint that falls due meanwhile is skipped, the final one is
     * synchronous anyway). Best effort: a refusal only costs priority. */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), CKPT_WRITER_NICE) != 0)
        cx_debug("checkpoint writer: cannot lower its priority: %s", strerror(errno));
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->busy && !w->quit)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->busy)
            break; /* quit and idle */
        pthread_mutex_unlock(&w->mu);
        /* the snapshot is ours until busy drops: submit never touches it then */
        if (w->before_write)
            w->before_write(w->ctx);
        /* the slots are only ours while the writer lives: after the first
         * save the next slot and generation are known without reading both
         * files again; after a failure they are read again */
        if (w->next_slot < 0)
            w->next_slot = next_slot(w->dir, "learner.ckpt", MAGIC_LEARNER, &w->newest);
        int rc = learner_save_at(w->dir, &w->snap, w->next_slot, w->newest, why, sizeof why);
        if (rc == 0) {
            w->newest = w->snap.generation;
            w->next_slot ^= 1;
        } else {
            w->next_slot = -1;
        }
        if (rc != 0)
            cx_warn("checkpoint at step %lld failed, keeping the previous one and training on: %s",
                    (long long)w->snap.step, why);
        pthread_mutex_lock(&w->mu);
        if (rc == 0)
            w->stats.written++;
        else
            w->stats.failed++;
        w->busy = 0;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

ckpt_writer *ckpt_writer_new(const char *dir, uint64_t n, int64_t P, uint64_t cursor_len,
                             void (*before_write)(void *ctx), void *ctx)
{
    if (P < 0 || n > SIZE_MAX / 16 || (uint64_t)P > SIZE_MAX / 32 ||
        strlen(dir) >= sizeof((ckpt_writer *)0)->dir)
        return NULL;
    ckpt_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    size_t fbytes = (size_t)n * sizeof(float), ibytes = (size_t)P * sizeof(int64_t);
    w->buf = malloc(5 * fbytes + 8 * ibytes + (size_t)cursor_len + 1);
    if (!w->buf) {
        free(w);
        return NULL;
    }
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    char *b = w->buf; /* int64 arrays first: they need the stricter alignment */
    w->snap.base_version = (int64_t *)(void *)b;
    w->snap.frag_steps = (int64_t *)(void *)(b + ibytes);
    w->snap.frag_tokens = (int64_t *)(void *)(b + 2 * ibytes);
    w->snap.origin_step = (int64_t *)(void *)(b + 3 * ibytes);
    w->snap.send_step = (int64_t *)(void *)(b + 4 * ibytes);
    w->snap.send_steps = (int64_t *)(void *)(b + 5 * ibytes);
    w->snap.send_tokens = (int64_t *)(void *)(b + 6 * ibytes);
    w->snap.send_accepted = (int64_t *)(void *)(b + 7 * ibytes);
    b += 8 * ibytes;
    w->snap.params = (float *)(void *)b;
    w->snap.adam_m = (float *)(void *)(b + fbytes);
    w->snap.adam_v = (float *)(void *)(b + 2 * fbytes);
    w->snap.base = (float *)(void *)(b + 3 * fbytes);
    w->snap.sent = (float *)(void *)(b + 4 * fbytes);
    w->snap.cursor = b + 5 * fbytes;
    w->snap.n = n;
    w->snap.P = P;
    w->snap.cursor_len = cursor_len;
    w->before_write = before_write;
    w->ctx = ctx;
    w->next_slot = -1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w->buf);
        free(w);
        return NULL;
    }
    return w;
}

int ckpt_writer_submit(ckpt_writer *w, const ckpt_learner *c)
{
    if (c->n != w->snap.n || c->P != w->snap.P || c->cursor_len != w->snap.cursor_len)
        return CX_EINVAL;
    pthread_mutex_lock(&w->mu);
    if (w->busy) {
        w->stats.skipped++;
        pthread_mutex_unlock(&w->mu);
        return 0;
    }
    pthread_mutex_unlock(&w->mu);
    /* idle: the thread does not read snap until busy is set below */
    ckpt_learner *s = &w->snap;
    size_t fbytes = (size_t)c->n * sizeof(float), ibytes = (size_t)c->P * sizeof(int64_t);
    s->learner = c->learner;
    s->incarnation = c->incarnation;
    s->step = c->step;
    s->tokens = c->tokens;
    s->table_digest = c->table_digest;
    s->adam_steps = c->adam_steps;
    memcpy(s->params, c->params, fbytes);
    memcpy(s->adam_m, c->adam_m, fbytes);
    memcpy(s->adam_v, c->adam_v, fbytes);
    memcpy(s->base_version, c->base_version, ibytes);
    memcpy(s->frag_steps, c->frag_steps, ibytes);
    memcpy(s->frag_tokens, c->frag_tokens, ibytes);
    memcpy(s->base, c->base, fbytes);
    memcpy(s->sent, c->sent, fbytes);
    memcpy(s->origin_step, c->origin_step, ibytes);
    memcpy(s->send_step, c->send_step, ibytes);
    memcpy(s->send_steps, c->send_steps, ibytes);
    memcpy(s->send_tokens, c->send_tokens, ibytes);
    memcpy(s->send_accepted, c->send_accepted, ibytes);
    if (c->cursor_len)
        memcpy(s->cursor, c->cursor, (size_t)c->cursor_len);
    pthread_mutex_lock(&w->mu);
    w->busy = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 1;
}

void ckpt_writer_wait(ckpt_writer *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->busy)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

void ckpt_writer_get_stats(ckpt_writer *w, ckpt_writer_stats *out)
{
    pthread_mutex_lock(&w->mu);
    *out = w->stats;
    pthread_mutex_unlock(&w->mu);
}

void ckpt_writer_free(ckpt_writer *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL); /* it finishes the write in progress first */
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->buf);
    free(w);
}
