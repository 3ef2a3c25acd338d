/* core.c - the syncer's core: start-up, the ticker and worker threads,
 * shutdown (syncer.h; its state is core.h).
 *
 * What it is: syncer_new (build the global state, restore, open the log,
 * listen, start the threads), syncer_core_new (the same without listening
 * nor threads: unit tests drive the components through it), syncer_run,
 * syncer_free (final eval and checkpoint), the ticker that closes deadlines and marks silent learners
 * absent, and the worker that runs eval and checkpoints. What it is not:
 * the HTTP API (api.c, metrics.c and the route handler of each component
 * in its file) nor the merge logic (rounds.c, ddp.c). The components and
 * their files are listed in core.h.
 *
 * ---- NOTES ON THE DESIGN OF THE SYNCER ----
 *
 * One mutex (s->mu) guards everything below the "shared state" line of
 * struct syncer. Handlers block on condition variables with bounded waits:
 *   s->frag_cv  broadcast when any fragment version changes (long polls,
 *               diloco/decoupled learners waiting for the merged fragment);
 *   s->step_cv  broadcast when a ddp step completes;
 *   s->tick_cv  wakes the ticker early (a round reached its quorum, ...).
 * Timed waits are cx_cond_wait_until_ms: the deadlines are monotonic, so a
 * skewed realtime clock cannot stretch or cut a wait. The ticker thread
 * closes deadlines (ddp-elastic steps, diloco elastic rounds, decoupled
 * grace windows), marks silent learners absent, and runs
 * eval and checkpoints on snapshots taken under the lock and used outside it.
 * The state machines are drawn next to their code: the per-fragment round
 * in rounds.c, the rebuild in rebuild.c; the ddp step in
 * ddp.c, the downstream deltas in deltas.c.
 */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/file.h"
#include "common/http_server.h"
#include "common/log.h"
#include "common/parse.h"
#include "numerics/data.h"
#include "trainer/events.h"
#include "numerics/fragment.h"
#include "numerics/merge.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "trainer/syncer/core.h"

static void *ticker_main(void *arg)
{
    syncer *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        (void)cx_cond_wait_until_ms(&s->tick_cv, &s->mu, cx_mono_ms() + TICK_MS);
        if (s->stopping)
            break;
        int64_t now = cx_mono_ms();
        members_check_absent(s, now); /* silent learners become absent */
        members_reject_flush_due(s, now, 0);
        if (syncer_is_ddp(s))
            ddp_check(s, now);
        else
            for (int p = 0; p < s->P; p++)
                rounds_check(s, p, now);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* The worker thread: eval and checkpoints, so that a slow eval never delays
 * a deadline or a grace window the ticker must close. */
static void *worker_main(void *arg)
{
    syncer *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        (void)cx_cond_wait_until_ms(&s->work_cv, &s->mu, cx_mono_ms() + 50);
        if (s->stopping)
            break;
        rebuild_tick(s);
        int64_t now = cx_mono_ms();
        int do_eval = s->dur.eval_pending && now - s->dur.last_eval_ms >= s->cfg.eval_every_ms;
        /* every checkpoint_every merges, but not more often than
         * checkpoint_min_ms: a merge count alone wrote thousands of
         * checkpoints a minute (the final one in syncer_free is not gated) */
        int do_ckpt = s->cfg.checkpoint_every > 0 &&
                      s->merges - s->dur.last_ckpt_merges >= s->cfg.checkpoint_every &&
                      (s->dur.last_ckpt_ms == 0 || now - s->dur.last_ckpt_ms >= s->cfg.checkpoint_min_ms);
        if (do_eval || do_ckpt) {
            pthread_mutex_unlock(&s->mu);
            if (do_eval)
                dur_run_eval(s);
            if (do_ckpt) {
                char err[CX_ERRLEN];
                if (dur_write_checkpoint(s, err, sizeof err) != 0)
                    cx_error("checkpoint failed: %s", err);
            }
            pthread_mutex_lock(&s->mu);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- syncer: start-up steps (syncer_new) ----
 * Each fills its part of s and returns 0, or -1 with err filled; on -1
 * syncer_new frees the partial syncer (syncer_free copes with any prefix). */

/* The eval model (whose init params are the initial theta), the fragment
 * table, the merge workspace, the data source. */
static int new_model(syncer *s, char *err, size_t errlen)
{
    model_config mc;
    config_model_config(&s->cfg, INT64_MAX, &mc); /* the eval set: chunks of the cap */
    s->eval_model = model_new(config_model_name(s->cfg.model), &mc, (uint64_t)s->cfg.seed, err, errlen);
    if (!s->eval_model)
        return -1;
    s->n = model_num_params(s->eval_model);
    s->P = (int)s->cfg.fragments;
    s->ft =
        fragment_table_new(model_tensors(s->eval_model), model_num_tensors(s->eval_model), s->P, err, errlen);
    if (!s->ft)
        return -1;
    size_t max_frag = 1;
    for (int p = 0; p < s->P; p++)
        if (fragment_length(s->ft, p) > max_frag)
            max_frag = fragment_length(s->ft, p);
    s->mws = merge_ws_new(max_frag, MAX_LEARNERS, err, errlen);
    if (!s->mws)
        return -1;

    data_config dc;
    data_config_default(&dc);
    dc.path = s->cfg.data[0] ? s->cfg.data : NULL;
    dc.seed = (uint64_t)s->cfg.seed;
    s->data = data_source_new(&dc, err, errlen);
    if (!s->data)
        return -1;
    s->entropy_floor = data_entropy_rate(s->data);
    return 0;
}

/* The eval set and the global state's buffers: theta (the model's init),
 * momentum, versions, rounds, delta history, per-learner tables, rebuild
 * records; in ddp modes the AdamW state and the step buffers. */
static int new_state(syncer *s, char *err, size_t errlen)
{
    size_t cap = data_eval_capacity(s->data, (int)s->cfg.context);
    s->eval_n = (int)((size_t)s->cfg.eval_tokens < cap ? (size_t)s->cfg.eval_tokens : cap);
    s->eval_in = malloc((size_t)s->eval_n * (size_t)s->cfg.context);
    s->eval_tg = malloc((size_t)s->eval_n);
    s->theta = malloc(s->n * sizeof(float));
    s->momentum = calloc(s->n, sizeof(float));
    s->versions = calloc((size_t)s->P, sizeof(int64_t));
    if (!s->eval_in || !s->eval_tg || !s->theta || !s->momentum || !s->versions) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        return -1;
    }
    if (data_eval_examples(s->data, (int)s->cfg.context, (size_t)s->eval_n, s->eval_in, s->eval_tg, err,
                           errlen))
        return -1;
    memcpy(s->theta, model_params(s->eval_model), s->n * sizeof(float));
    if (rounds_init(s, err, errlen) != 0 || deltas_init(s, err, errlen) != 0)
        return -1;
    if (syncer_is_ddp(s)) {
        adamw_config ac;
        adamw_config_default(&ac);
        ac.weight_decay = (float)s->cfg.weight_decay;
        s->opt = adamw_new(s->n, &ac, err, errlen);
        if (!s->opt)
            return -1;
        for (int i = 0; i < model_num_tensors(s->eval_model); i++) {
            const model_tensor *t = model_tensor_get(s->eval_model, i);
            adamw_set_decay(s->opt, t->offset, t->length, t->weight_decay, NULL, 0);
        }
    }
    return ddp_init(s, err, errlen);
}

/* Open the event log, restore the newest valid checkpoint, bump the
 * versions above merges logged after it, log the start; eval once (a
 * fresh start), or leave the first eval to the worker (a restart: after
 * new_serve listens). */
static int new_restore(syncer *s, const char *state_dir, char *err, size_t errlen)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/events.jsonl", state_dir);
    s->ev = events_new(path, 65536, err, errlen);
    if (!s->ev)
        return -1;
    int restored = dur_restore(s, err, errlen);
    if (restored < 0)
        return -1;
    rebuild_note_restored(s);
    int64_t before_bump = 0;
    for (int p = 0; p < s->P; p++)
        before_bump += s->versions[p];
    dur_bump_versions(s);
    dur_start_log(s, before_bump);

    json_t *vers = json_array(), *ckpt_vers = json_array();
    for (int p = 0; p < s->P; p++) {
        json_array_append_new(vers, json_integer(s->versions[p]));
        json_array_append_new(ckpt_vers, json_integer(s->rebuild.frag[p].ckpt_version));
    }
    /* ckpt_versions: what the checkpoint held; a learner reporting a copy
     * above it at join makes the syncer rebuild that fragment */
    events_emit(s->ev, "start",
                json_pack("{s:s, s:b, s:s, s:I, s:o, s:o, s:I, s:I, s:I}", "mode", syncer_mode_name(s),
                          "restored", restored, "start_state", dur_start_kind_names[s->start], "merges",
                          (json_int_t)s->merges, "versions", vers, "ckpt_versions", ckpt_vers, "learners",
                          (json_int_t)s->cfg.learners, "n_params", (json_int_t)s->n, "log_bytes_read",
                          (json_int_t)events_read_bytes(s->ev)));
    double h0, h1;
    data_order_entropies(s->data, &h0, &h1);
    cx_info("model %s params=%zu fragments=%d data=%s loss_floor=%.4f nats order0=%.3f order1=%.3f bits/byte",
            model_kind(s->eval_model), s->n, s->P, data_source_describe(s->data), s->entropy_floor, h0, h1);
    /* a restart leaves its first eval to the worker, as soon as it runs
     * (worker_main): it listens first and answers its learners at once (the
     * default GPT's eval took 8.7-9.9 s before it listened, issue 27). A
     * fresh start evaluates the untrained model here: status has its loss
     * from the first answer, before any learner joins. */
    if (restored > 0) {
        dur_eval_soon(s);
    } else {
        dur_run_eval(s);
    }
    return 0;
}

/* Listen, write listen.addr, start the ticker and worker threads. */
static int new_serve(syncer *s, const syncer_opts *o, char *err, size_t errlen)
{
    char path[1200];
    if (syncer_api_listen(s, o, err, errlen) != 0)
        return -1;
    /* the address it bound (a namespace's own with topology.network netns);
     * the wildcard and "localhost" are reached at 127.0.0.1 */
    char host[48] = "127.0.0.1", addr[64];
    int lport = 0;
    if (cx_parse_hostport(o->listen, "--listen", host, sizeof host, &lport, NULL, 0) < 0 ||
        strcmp(host, "0.0.0.0") == 0 || strcmp(host, "localhost") == 0 || host[0] == '\0')
        snprintf(host, sizeof host, "127.0.0.1");
    snprintf(addr, sizeof addr, "%s:%d", host, cx_http_server_port(s->http));
    snprintf(path, sizeof path, "%s/listen.addr", o->state_dir);
    if (cx_file_write_atomic(path, addr, strlen(addr), err, errlen) != 0)
        return -1;
    if (pthread_create(&s->ticker, NULL, ticker_main, s) != 0) {
        cx_fail(err, errlen, CX_ESYS, "cannot start the ticker thread");
        return -1;
    }
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        pthread_mutex_lock(&s->mu);
        s->stopping = 1;
        pthread_cond_broadcast(&s->tick_cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->ticker, NULL);
        cx_fail(err, errlen, CX_ESYS, "cannot start the worker thread");
        return -1;
    }
    s->ticker_started = 1;
    /* the socket's own address (0.0.0.0:PORT for the wildcard); listen.addr
     * holds where this host reaches it */
    const char *bound = cx_http_server_bound(s->http);
    cx_info("listening on %s%s%s%s (mode %s, %lld learners expected)", bound,
            strcmp(bound, addr) ? " (listen.addr " : "", strcmp(bound, addr) ? addr : "",
            strcmp(bound, addr) ? ")" : "", syncer_mode_name(s), (long long)s->cfg.learners);
    return 0;
}

syncer *syncer_core_new(const syncer_opts *o, char *err, size_t errlen)
{
    syncer *s = calloc(1, sizeof *s);
    if (!s) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        return NULL;
    }
    s->cfg = o->cfg;
    s->start_ms = cx_mono_ms();
    dur_init(s);
    snprintf(s->state_dir, sizeof s->state_dir, "%s", o->state_dir);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->frag_cv, NULL);
    pthread_cond_init(&s->step_cv, NULL);
    pthread_cond_init(&s->tick_cv, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    members_init(s);
    if (cx_mkdir_p(o->state_dir, err, errlen) != 0)
        goto fail;
    if (syncer_api_access_init(s, o, err, errlen) != 0 || new_model(s, err, errlen) != 0 ||
        rebuild_init(s, o->on_lost_state, err, errlen) != 0 || new_state(s, err, errlen) != 0 ||
        new_restore(s, o->state_dir, err, errlen) != 0)
        goto fail;
    return s;
fail:
    syncer_free(s);
    return NULL;
}

syncer *syncer_new(const syncer_opts *o, char *err, size_t errlen)
{
    syncer *s = syncer_core_new(o, err, errlen);
    if (s && new_serve(s, o, err, errlen) != 0) {
        syncer_free(s);
        return NULL;
    }
    return s;
}

void syncer_run(syncer *s, volatile sig_atomic_t *stop)
{
    while (!*stop)
        cx_sleep_ms(50);
}

void syncer_free(syncer *s)
{
    if (!s)
        return;
    int was_running = s->ticker_started;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->frag_cv);
    pthread_cond_broadcast(&s->step_cv);
    pthread_cond_broadcast(&s->tick_cv);
    pthread_cond_broadcast(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->ticker_started) {
        pthread_join(s->ticker, NULL);
        pthread_join(s->worker, NULL);
    }
    cx_http_server_free(s->http);
    if (s->ev) {
        pthread_mutex_lock(&s->mu);
        members_reject_flush_due(s, cx_mono_ms(), 1);
        pthread_mutex_unlock(&s->mu);
    }
    if (was_running) {
        if (s->dur.eval_pending)
            dur_run_eval(s);
        char err[CX_ERRLEN];
        if (dur_write_checkpoint(s, err, sizeof err) != 0)
            cx_error("final checkpoint failed: %s", err);
        else
            cx_info("final checkpoint written (merges=%lld)", (long long)s->merges);
    }
    rounds_cleanup(s);
    deltas_cleanup(s);
    rebuild_cleanup(s);
    events_free(s->ev);
    syncer_api_access_cleanup(s);
    model_free(s->eval_model);
    data_source_free(s->data);
    fragment_table_free(s->ft);
    merge_ws_free(s->mws);
    adamw_free(s->opt);
    free(s->eval_in), free(s->eval_tg), free(s->theta), free(s->momentum), free(s->versions);
    ddp_cleanup(s);
    pthread_cond_destroy(&s->frag_cv);
    pthread_cond_destroy(&s->step_cv);
    pthread_cond_destroy(&s->tick_cv);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
