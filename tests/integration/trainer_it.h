/* trainer_it.h - helpers shared by tests/integration/test_trainer_*.c: start
 * a real syncer and learners on 127.0.0.1 (ephemeral port, temp dirs), read
 * the syncer's status and events, wait for conditions with bounds.
 * Header-only (static inline): support_*.c files are linked into every
 * integration test, and these belong to the trainer's tests only.
 */
#ifndef IT_TRAINER_IT_H
#define IT_TRAINER_IT_H

#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/http_client.h"
#include "support.h"
#include "trainer/config.h"

/* A small, fast model for tests under ASan on a shared 2-core box. */
#define TR_MODEL "--hidden", "64", "--batch", "16", "--eval-tokens", "2048"

/* Fault tests: the syncer marks a killed or stopped learner absent 1.5 s
 * after its last heartbeat (the default, 5 s, is longer than they wait). */
#define TR_HEARTBEAT_FAST "--heartbeat-timeout-ms", "1500"

/* More steps than a test lasts: the test ends the run (tr_done). */
#define TR_STEPS_LONG "--steps", "100000"

/* A fault test's run: TR_STEPS_LONG, a fast heartbeat timeout and an eval
 * of the global model every second. */
#define TR_FAULT_RUN TR_STEPS_LONG, TR_HEARTBEAT_FAST, "--eval-every-ms", "1000"

/* Decoupled with K=1 (a fragment merges at its first contribution), rounds
 * of H = 24 inner steps over 4 fragments. */
#define TR_K1_H24 "--quorum", "1", "--H", "24", "--fragments", "4"

typedef struct tr_run {
    char *dir;            /* temp dir: logs, state dirs */
    char state[600];      /* syncer state dir */
    char addr[64];        /* "127.0.0.1:PORT" */
    char url[96];         /* "http://127.0.0.1:PORT" */
    pid_t syncer;         /* syncer pid */
    const char *args[64]; /* syncer args, kept for restarts */
    int nargs;
    int starts; /* syncer starts (log names) */
} tr_run;

/* Make the run's temp dir and syncer args without starting anything: the
 * state dir is <dir>/syncer (not created), args the NULL-terminated training
 * flags list (mode, learners, ...), after IT_MLP. For a test that prepares
 * the state dir before the first tr_syncer_start(r, NULL, NULL). */
static inline void tr_run_init(tr_run *r, const char *tag, const char *const *args)
{
    r->dir = it_mkdtemp(tag);
    snprintf(r->state, sizeof r->state, "%s/syncer", r->dir);
    r->nargs = 0;
    r->args[r->nargs++] = "syncer";
    r->args[r->nargs++] = "--listen";
    r->args[r->nargs++] = "127.0.0.1:0";
    r->args[r->nargs++] = "--state-dir";
    r->args[r->nargs++] = r->state;
    static const char *const mlp[] = {IT_MLP};
    for (size_t i = 0; i < sizeof mlp / sizeof mlp[0]; i++)
        r->args[r->nargs++] = mlp[i];
    for (int i = 0; args && args[i] && r->nargs < 62; i++)
        r->args[r->nargs++] = args[i];
    r->args[r->nargs] = NULL;
}

/* Start (or restart, same state dir and args) the syncer; the first start
 * of a run makes it with tr_run_init(r, tag, args). */
static inline void tr_syncer_start(tr_run *r, const char *tag, const char *const *args)
{
    char name[32];
    if (!r->dir) {
        tr_run_init(r, tag, args);
    } else if (r->addr[0]) {
        /* a restart listens on the same port: the learners know that URL */
        static char same[64];
        snprintf(same, sizeof same, "%s", r->addr);
        r->args[2] = same;
    }
    char addrfile[700];
    snprintf(addrfile, sizeof addrfile, "%s/listen.addr", r->state);
    unlink(addrfile);
    snprintf(name, sizeof name, "syncer%d", r->starts++);
    r->syncer = it_start(r->dir, name, r->args, NULL);
    if (it_wait_addr(r->state, r->addr, sizeof r->addr, 30000) != 0) {
        it_dump_log(r->dir, name);
        cr_assert_fail("syncer did not write listen.addr");
    }
    snprintf(r->url, sizeof r->url, "http://%s", r->addr);
}

/* Path of a credential file the syncer made in its state dir at its first
 * start (<state>/credentials/<principal>.cred; principal "learner-0",
 * "admin", "read"). Static buffer, one of 8 in rotation. */
static inline const char *tr_cred_path(tr_run *r, const char *principal)
{
    static char bufs[8][700];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, 700, "%s/credentials/%s.cred", r->state, principal);
    return b;
}

/* The credential of principal (see tr_cred_path) for Authorization: Bearer;
 * asserts it can be read. Static buffer, one of 8 in rotation. */
static inline const char *tr_cred(tr_run *r, const char *principal)
{
    static char bufs[8][128];
    static int k;
    char *b = bufs[k++ % 8];
    FILE *f = fopen(tr_cred_path(r, principal), "r");
    cr_assert(f, "credential %s: %s", principal, tr_cred_path(r, principal));
    if (!fgets(b, 128, f))
        b[0] = '\0';
    fclose(f);
    b[strcspn(b, "\n")] = '\0';
    return b;
}

/* The credential of learner id, or NULL when the syncer made none for it
 * (ids beyond --learners). Static buffer as tr_cred. */
static inline const char *tr_learner_cred(tr_run *r, long long id)
{
    char p[32];
    snprintf(p, sizeof p, "learner-%lld", id);
    return id >= 0 && access(tr_cred_path(r, p), F_OK) == 0 ? tr_cred(r, p) : NULL;
}

/* "Authorization: Bearer <credential of principal>" for cx_http_do's hdrs.
 * Static buffer, one of 8 in rotation. */
static inline const char *tr_auth(tr_run *r, const char *principal)
{
    static char bufs[8][160];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, 160, "Authorization: Bearer %s", tr_cred(r, principal));
    return b;
}

/* Start learner `id` (its state dir is <dir>/learner<id>, reused across
 * restarts) with the credential the syncer made for it (when it made one:
 * ids beyond --learners have none and are refused with 401). */
static inline pid_t tr_learner_start(tr_run *r, int id, const char *const *extra, const char *const *env)
{
    static char bufs[16][4][700];
    static int k;
    char(*b)[700] = bufs[k++ % 16];
    const char *args[32];
    int n = 0;
    snprintf(b[0], 700, "%d", id);
    snprintf(b[1], 700, "%s/learner%d", r->dir, id);
    snprintf(b[2], 700, "learner%d", id);
    args[n++] = "learner";
    args[n++] = "--syncer";
    args[n++] = r->url;
    args[n++] = "--id";
    args[n++] = b[0];
    args[n++] = "--state-dir";
    args[n++] = b[1];
    snprintf(b[3], 700, "%s/credentials/learner-%d.cred", r->state, id);
    if (access(b[3], F_OK) == 0) {
        args[n++] = "--credential-file";
        args[n++] = b[3];
    }
    for (int i = 0; extra && extra[i] && n < 30; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    return it_start(r->dir, b[2], args, env);
}

/* Start learners 0..n-1 without extra flags; their pids into pids[0..n)
 * when pids is not NULL. */
static inline void tr_learners_start(tr_run *r, int n, pid_t *pids)
{
    for (int i = 0; i < n; i++) {
        pid_t p = tr_learner_start(r, i, NULL, NULL);
        if (pids)
            pids[i] = p;
    }
}

/* SIGKILL a started process (a learner, or r->syncer) and its group; reap
 * it (waits up to 5 s). */
static inline void tr_kill(pid_t pid)
{
    it_signal(pid, SIGKILL, 1);
    it_wait_exit(pid, 5000);
}

static inline json_t *tr_get(tr_run *r, const char *path)
{
    char url[256];
    int status = 0;
    snprintf(url, sizeof url, "%s%s", r->url, path);
    json_t *j = it_http_json("GET", url, NULL, NULL, &status);
    if (status != 200) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static inline json_int_t tr_merges(tr_run *r)
{
    json_t *s = tr_get(r, "/v1/status");
    json_int_t m = s ? json_integer_value(json_object_get(s, "merges")) : -1;
    json_decref(s);
    return m;
}

/* Eval loss of the global model, NAN if none. */
static inline double tr_eval_loss(tr_run *r, json_int_t *eval_merges)
{
    json_t *s = tr_get(r, "/v1/status");
    double l = NAN;
    if (s) {
        json_t *e = json_object_get(s, "eval");
        if (json_is_number(json_object_get(e, "loss")))
            l = json_number_value(json_object_get(e, "loss"));
        if (eval_merges)
            *eval_merges = json_integer_value(json_object_get(e, "merges"));
    }
    json_decref(s);
    return l;
}

/* Eval loss once the eval covers every merge (after the learners left). */
static inline double tr_final_eval(tr_run *r)
{
    for (int i = 0; i < 200; i++) {
        json_int_t em = -1, m = tr_merges(r);
        double l = tr_eval_loss(r, &em);
        if (em == m && isfinite(l))
            return l;
        cx_sleep_ms(100);
    }
    return tr_eval_loss(r, NULL);
}

/* Every event with seq > since, as a JSON array (new reference). */
static inline json_t *tr_events(tr_run *r, long long since)
{
    cx_http_client *c = cx_http_client_new(r->url, NULL);
    cx_http_result res;
    char path[96], err[256];
    json_t *out = json_array();
    snprintf(path, sizeof path, "/v1/events?since=%lld&limit=100000", since);
    cx_http_result_init(&res);
    if (c && cx_http_do(c, "GET", path, NULL, NULL, 0, NULL, 10000, &res, err, sizeof err) == 0 &&
        res.status == 200 && res.body.data) {
        char *save = NULL;
        for (char *line = strtok_r(res.body.data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            json_t *e = json_loads(line, 0, NULL);
            cr_assert(e, "event line is JSON: %s", line);
            json_array_append_new(out, e);
        }
    }
    cx_http_result_cleanup(&res);
    cx_http_client_free(c);
    return out;
}

static inline const char *tr_type(json_t *e)
{
    return json_string_value(json_object_get(e, "type"));
}
static inline json_int_t tr_int(json_t *e, const char *k)
{
    return json_integer_value(json_object_get(e, k));
}

/* Wait up to timeout_ms for the learner to exit; assert exit status 0. */
static inline void tr_expect_exit0(tr_run *r, pid_t pid, int id, long timeout_ms)
{
    int st = it_wait_exit(pid, timeout_ms);
    char name[32];
    snprintf(name, sizeof name, "learner%d", id);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        it_dump_log(r->dir, name);
        it_dump_log(r->dir, "syncer0");
        cr_assert_fail("learner %d: exit status %d (-1 = still running)", id, st);
    }
}

/* Wait until the syncer's merge count reaches at least n (bounded). */
static inline json_int_t tr_wait_merges(tr_run *r, json_int_t n, long timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    json_int_t m = -1;
    while (cx_mono_ms() < end) {
        m = tr_merges(r);
        if (m >= n)
            return m;
        cx_sleep_ms(100);
    }
    return m;
}

/* 1 when e is a merge event that lists learner `id` among its participants
 * (with incarnation inc; any incarnation when inc < 0). */
static inline int tr_merge_lists(json_t *e, int id, json_int_t inc)
{
    if (strcmp(tr_type(e), "merge") != 0)
        return 0;
    size_t j;
    json_t *p;
    json_array_foreach(json_object_get(e, "participants"), j, p)
    {
        if (tr_int(p, "learner") == id && (inc < 0 || tr_int(p, "incarnation") == inc))
            return 1;
    }
    return 0;
}

/* How many merges in evs list learner `id` (incarnation as tr_merge_lists). */
static inline int tr_merges_with(json_t *evs, int id, json_int_t inc)
{
    int n = 0;
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e) n += tr_merge_lists(e, id, inc);
    return n;
}

/* The seq of the syncer's latest event (0 when there is none). */
static inline json_int_t tr_last_seq(tr_run *r)
{
    json_t *evs = tr_events(r, 0);
    json_int_t s = tr_int(json_array_get(evs, json_array_size(evs) - 1), "seq");
    json_decref(evs);
    return s;
}

/* Find the join event of learner `id` with incarnation > min_inc; returns
 * its seq or -1. */
static inline json_int_t tr_find_join(json_t *evs, int id, json_int_t min_inc, json_int_t *inc)
{
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e)
    {
        if (strcmp(tr_type(e), "join") == 0 && tr_int(e, "learner") == id &&
            tr_int(e, "incarnation") > min_inc) {
            if (inc)
                *inc = tr_int(e, "incarnation");
            return tr_int(e, "seq");
        }
    }
    return -1;
}

/* After the join at seq `from` of (id, inc): every fragment 0..P-1 was
 * pulled by that incarnation before its first contribution (or merge
 * participation in ddp modes). Asserts; returns the seq of that first use. */
static inline json_int_t tr_assert_pulled_first(json_t *evs, int id, json_int_t inc, int P)
{
    int pulled[CONFIG_FRAGMENTS_MAX] = {0};
    cr_assert(P >= 1 && P <= CONFIG_FRAGMENTS_MAX, "P %d out of the config's range", P);
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e)
    {
        const char *t = tr_type(e);
        if (strcmp(t, "pull") == 0 && tr_int(e, "learner") == id && tr_int(e, "incarnation") == inc) {
            json_int_t f = tr_int(e, "fragment");
            if (f >= 0 && f < P)
                pulled[f] = 1;
        }
        int used = (strcmp(t, "contribution") == 0 && tr_int(e, "learner") == id &&
                    tr_int(e, "incarnation") == inc) ||
                   tr_merge_lists(e, id, inc);
        if (used) {
            for (int f = 0; f < P; f++)
                cr_assert(pulled[f],
                          "learner %d incarnation %lld used fragment state before pulling fragment %d", id,
                          (long long)inc, f);
            return tr_int(e, "seq");
        }
    }
    return -1;
}

/* What tr_wait_rejoin saw. */
typedef struct tr_rejoin {
    json_t *evs;      /* the last events read (owned: json_decref), or NULL */
    json_int_t inc;   /* incarnation of the rejoin, 0 while none was seen */
    json_int_t first; /* seq of its first use after pulling, -1 if none */
    int merged;       /* merges that list that incarnation */
} tr_rejoin;

/* Wait (up to timeout_ms, events read every 200 ms) until learner `id`
 * joined with an incarnation above min_inc; returns that incarnation, 0 when
 * it did not. Before killing a learner: another one alone may already have
 * made the merges a test waited for, while this one was still starting. */
static inline json_int_t tr_wait_joined(tr_run *r, int id, json_int_t min_inc, long timeout_ms)
{
    json_int_t inc = 0;
    for (int64_t end = cx_mono_ms() + timeout_ms; cx_mono_ms() < end; cx_sleep_ms(200)) {
        json_t *evs = tr_events(r, 0);
        json_int_t found = tr_find_join(evs, id, min_inc, &inc);
        json_decref(evs);
        if (found >= 0)
            return inc;
    }
    return 0;
}

/* After learner `id` was restarted: read the events every 500 ms (for up to
 * 60 s) until it joined with an incarnation above min_inc, pulled every
 * fragment 0..P-1 before its first use (asserted: tr_assert_pulled_first)
 * and took part in at least min_merged merges. The caller asserts on what
 * it got. */
static inline tr_rejoin tr_wait_rejoin(tr_run *r, int id, json_int_t min_inc, int P, int min_merged)
{
    tr_rejoin w = {.evs = NULL, .inc = 0, .first = -1, .merged = 0};
    int64_t end = cx_mono_ms() + 60000;
    while (cx_mono_ms() < end && (w.first < 0 || w.merged < min_merged)) {
        cx_sleep_ms(500);
        json_decref(w.evs);
        w.evs = tr_events(r, 0);
        if (tr_find_join(w.evs, id, min_inc, &w.inc) < 0)
            continue;
        w.first = tr_assert_pulled_first(w.evs, id, w.inc, P);
        w.merged = tr_merges_with(w.evs, id, w.inc);
    }
    return w;
}

/* The last "params_crc32c=XXXXXXXX" in <dir>/<name>.log (a learner's
 * "done:" line) into out[9]; 0 when found. */
static inline int tr_log_crc(tr_run *r, const char *name, char out[9])
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s.log", r->dir, name);
    FILE *f = fopen(path, "r");
    char line[4096];
    int found = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "params_crc32c=");
        if (p && strlen(p) >= 14 + 8) {
            memcpy(out, p + 14, 8);
            out[8] = 0;
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* Delete the syncer's state dir (it must not run), all but its credentials. */
static inline void tr_lose_state_dir(tr_run *r)
{
    /* The credentials are the deployer's, not the syncer's state: the
     * harness keeps them in RUN/credentials, outside the state dir
     * (docs/security.md). Losing the state dir must not take them, or
     * no learner could rejoin to hand its copy back. */
    char creds[800], keep[800];
    snprintf(creds, sizeof creds, "%s/credentials", r->state);
    snprintf(keep, sizeof keep, "%s/credentials.kept", r->dir);
    cr_assert_eq(rename(creds, keep), 0, "keep the credentials aside");
    it_rm_tree(r->state);
    cr_assert_eq(mkdir(r->state, 0700), 0);
    cr_assert_eq(rename(keep, creds), 0, "the credentials come back");
}

/* Kill everything started, remove the run's directory (logs, state dirs;
 * kept when CHAOSLOCO_KEEP_TEST_DIRS is set) and free the run. Reached only
 * when the test's assertions so far passed: a failed test keeps its
 * directory for the post-mortem (a full suite left ~1.1 GB otherwise). */
static inline void tr_done(tr_run *r)
{
    it_cleanup();
    const char *keep = getenv("CHAOSLOCO_KEEP_TEST_DIRS");
    if (r->dir && !(keep && *keep))
        it_rm_tree(r->dir);
    free(r->dir);
    r->dir = NULL;
}

#endif
