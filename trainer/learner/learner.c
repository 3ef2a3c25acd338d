/* learner.c - the learner's core (learner.h, core.h): its lifecycle, the
 * inner step, the NaN hook and the heartbeat thread.
 *
 * What it is: learner_run (join, pick the mode's loop, final checkpoint,
 * leave), one inner AdamW step and its bookkeeping, the end-of-training
 * rule, and the heartbeat thread. What it is not: the link to the syncer
 * (link.c), contributions (contrib.c), the rebase (rebase.c), checkpoints
 * (ckpt.c), nor the modes' loops (diloco.c, ddp.c, decoupled.c); core.h
 * lists the components and what each owns.
 *
 * Threads:
 *   main       the inner loop; in ddp and diloco it also does the (blocking)
 *              exchange with the syncer, because those modes are synchronous.
 *   heartbeat  POST /v1/heartbeat once per second with its own HTTP client.
 *   comm       decoupled only (decoupled.c): sends queued contributions,
 *              long-polls the merged fragments it waits for, rejoins when
 *              the syncer says its incarnation is stale. Hands fragments to
 *              the main thread through an inbox the inner loop drains
 *              between two steps.
 * L->mu guards the fields core.h marks "shared" (and decoupled's shared
 * state); everything else is main-thread only, except gcopy/gver (the
 * global fragments as the syncer sent them, full or rebuilt from delta
 * chains), which belong to whichever thread talks to the syncer (the comm
 * thread once it runs).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/file.h"
#include "common/http_client.h"
#include "common/log.h"
#include "common/parse.h"
#include "numerics/data.h"
#include "numerics/fragment.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/learner/ckpt.h"
#include "trainer/learner/core.h"
#include "trainer/learner/ddp.h"
#include "trainer/learner/decoupled.h"
#include "trainer/learner/diloco.h"
#include "trainer/learner/link.h"
#include "trainer/learner/rebase.h"
#include "trainer/protocol.h"

/* ---- learner: one inner step ---- */

int learner_params_finite(learner *L)
{
    return isfinite(L->train_loss) && proto_first_nonfinite(model_params(L->m), L->n) < 0;
}

float learner_lr_now(learner *L, int64_t step)
{
    /* the syncer's horizon, so that ddp learners and the syncer apply the
     * same step even when a learner runs more or fewer --steps */
    return optim_lr_at(step, L->cfg.warmup, L->sched_steps, (float)L->cfg.inner_lr,
                       (float)(L->cfg.inner_lr * 0.1));
}

/* Forward/backward on the next batch; grads in model_grads(). */
void learner_compute_grads(learner *L)
{
    data_shard_next_batch(L->shard, (int)L->cfg.batch, L->in, L->tg);
    float loss = model_forward_backward(L->m, L->in, L->tg, (int)L->cfg.batch);
    model_clip_grad_norm(L->m, L->cfg.grad_clip);
    pthread_mutex_lock(&L->mu); /* the heartbeat thread reads it (ThreadSanitizer) */
    L->train_loss = loss;
    pthread_mutex_unlock(&L->mu);
}

/* compute_ns: the step's own compute time (forward, backward, AdamW),
 * without any wait for the syncer; --slowdown pads that. */
void learner_after_step(learner *L, int64_t compute_ns)
{
    double ms = (double)compute_ns / 1e6;
    if (L->cfg.slowdown > 1.0) {
        int64_t pad = (int64_t)((L->cfg.slowdown - 1.0) * ms);
        if (pad > 0)
            cx_sleep_ms(pad);
        ms *= L->cfg.slowdown;
    }
    pthread_mutex_lock(&L->mu);
    L->step_ms_ema = L->step_ms_ema > 0 ? 0.9 * L->step_ms_ema + 0.1 * ms : ms;
    L->step++;
    L->tokens += L->cfg.batch;
    int64_t step = L->step;
    pthread_mutex_unlock(&L->mu);
    learner_rebase_count_steps(L, 1, L->cfg.batch);
    if (step % 50 == 0)
        cx_info("step=%lld loss=%.4f step_ms=%.1f", (long long)step, L->train_loss, L->step_ms_ema);
    if (L->cfg.learner_checkpoint_every > 0 && step - L->ckpt_step >= L->cfg.learner_checkpoint_every)
        learner_ckpt_periodic(L);
}

void learner_local_step(learner *L)
{
    int64_t t0 = cx_mono_ns();
    learner_compute_grads(L);
    adamw_step(L->opt, model_params(L->m), model_grads(L->m), learner_lr_now(L, L->step));
    learner_after_step(L, cx_mono_ns() - t0);
}

/* ---- learner: the end of training ---- */

/* 1 while the inner loop should go on: no signal, the --steps budget not
 * spent, and the syncer has not ended the run (heartbeat answer "end"). */
int learner_keep_training(learner *L)
{
    if (*L->stop || L->step >= L->cfg.steps)
        return 0;
    pthread_mutex_lock(&L->mu);
    int end = L->end_seen;
    pthread_mutex_unlock(&L->mu);
    return !end;
}

int learner_rejoin_asked(learner *L)
{
    pthread_mutex_lock(&L->mu);
    int rj = L->need_rejoin;
    pthread_mutex_unlock(&L->mu);
    return rj;
}

/* ---- learner: the NaN hook ---- */

/* CHAOSLOCO_HOOK_DIR/nan holds a count: while it is positive, each call
 * takes one and says "poison this one" (docs/faults.md, "nan"). */
int learner_nan_hook(learner *L)
{
    char *data = NULL, why[CX_ERRLEN];
    size_t len;
    int64_t n = 0;
    if (!L->hook_path[0])
        return 0;
    if (cx_file_read(L->hook_path, 64, &data, &len, why, sizeof why) != 0)
        return 0;
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == ' '))
        data[--len] = 0;
    if (cx_parse_i64(data, "nan hook", 0, INT64_MAX, &n, why, sizeof why) != 0 || n <= 0) {
        free(data);
        return 0;
    }
    free(data);
    char next[32];
    snprintf(next, sizeof next, "%lld\n", (long long)(n - 1));
    if (cx_file_write_atomic(L->hook_path, next, strlen(next), why, sizeof why) != 0)
        cx_warn("nan hook: cannot rewrite %s: %s", L->hook_path, why);
    cx_warn("nan hook: poisoning this contribution (%lld left)", (long long)(n - 1));
    return 1;
}

/* ---- learner: heartbeat thread ---- */

static void *heartbeat_main(void *arg)
{
    learner *L = arg;
    cx_http_opts ho;
    memset(&ho, 0, sizeof ho);
    ho.connect_timeout_ms = 1000;
    ho.timeout_ms = 2000;
    ho.bearer = L->o->credential;
    ho.ca_file = L->o->ca_file;
    ho.connect_to = L->o->syncer_via;
    cx_http_client *c = cx_http_client_new(L->o->syncer_url, &ho);
    while (c && !*L->stop) {
        pthread_mutex_lock(&L->mu);
        int done = L->threads_stop;
        /* batch and steps_total: what the syncer bounds our token/step claims by */
        json_t *b = json_pack(
            "{s:I, s:I, s:I, s:f, s:I, s:f, s:I, s:I, s:I, s:I, s:f}", "learner", (json_int_t)L->o->id,
            "incarnation", (json_int_t)L->incarnation, "step", (json_int_t)L->step, "train_loss",
            isfinite(L->train_loss) ? (double)L->train_loss : 0.0, "tokens", (json_int_t)L->tokens, "step_ms",
            L->step_ms_ema, "t_real_ms", (json_int_t)(cx_real_ns() / 1000000), "cursor",
            (json_int_t)L->tokens, "batch", (json_int_t)L->cfg.batch, "steps_total", (json_int_t)L->cfg.steps,
            "pull_ms", L->pull_ms_ema);
        pthread_mutex_unlock(&L->mu);
        if (done) {
            json_decref(b);
            break;
        }
        int status = 0;
        json_t *ans = NULL;
        char why[CX_ERRLEN];
        if (cx_http_json(c, "POST", "/v1/heartbeat", b, &status, &ans, why, sizeof why) == 0) {
            learner_link_mark_ok(L);
            pthread_mutex_lock(&L->mu);
            L->last_hb_ms = cx_mono_ms();
            if (status == 200 && json_is_true(json_object_get(ans, "end")) && !L->end_seen) {
                L->end_seen = 1;
                cx_info("the syncer ended the run: finishing this step and leaving");
            }
            pthread_mutex_unlock(&L->mu);
            if (status == 409 || status == 403) {
                pthread_mutex_lock(&L->mu);
                L->need_rejoin = 1;
                pthread_mutex_unlock(&L->mu);
            }
        }
        json_decref(ans);
        json_decref(b);
        for (int i = 0; i < 10 && !*L->stop; i++) {
            pthread_mutex_lock(&L->mu);
            done = L->threads_stop;
            pthread_mutex_unlock(&L->mu);
            if (done)
                break;
            cx_sleep_ms(100);
        }
    }
    cx_http_client_free(c);
    return NULL;
}

/* The last heartbeat, with the final step and tokens, once the heartbeat
 * thread has stopped: sent at least 1 s after the previous one so the
 * syncer's one-event-per-second limit does not swallow it. One try. */
static void final_heartbeat(learner *L)
{
    pthread_mutex_lock(&L->mu);
    int64_t wait = L->last_hb_ms > 0 ? L->last_hb_ms + 1050 - cx_mono_ms() : 0;
    pthread_mutex_unlock(&L->mu);
    if (wait > 1050)
        wait = 1050;
    if (wait > 0)
        cx_sleep_ms(wait);
    pthread_mutex_lock(&L->mu);
    json_t *b = json_pack("{s:I, s:I, s:I, s:f, s:I, s:f, s:I, s:I}", "learner", (json_int_t)L->o->id,
                          "incarnation", (json_int_t)L->incarnation, "step", (json_int_t)L->step,
                          "train_loss", isfinite(L->train_loss) ? (double)L->train_loss : 0.0, "tokens",
                          (json_int_t)L->tokens, "step_ms", L->step_ms_ema, "t_real_ms",
                          (json_int_t)(cx_real_ns() / 1000000), "cursor", (json_int_t)L->tokens);
    pthread_mutex_unlock(&L->mu);
    int status = 0;
    json_t *ans = NULL;
    char why[CX_ERRLEN];
    if (cx_http_json(L->http, "POST", "/v1/heartbeat", b, &status, &ans, why, sizeof why) != 0)
        cx_warn("final heartbeat not delivered: %s", why);
    else if (status != 200)
        cx_warn("final heartbeat refused: HTTP %d", status);
    json_decref(ans);
    json_decref(b);
}

/* ---- learner: run ---- */

/* learner_run, step: read the local checkpoint (if any) into L->restored;
 * it says which incarnation and step this learner was. One that cannot be
 * read or belongs to another learner id is ignored (logged). */
static void load_local_checkpoint(learner *L)
{
    const learner_opts *o = L->o;
    L->restored = calloc(1, sizeof *L->restored);
    char why[CX_ERRLEN];
    int lrc =
        L->restored ? ckpt_learner_load(o->state_dir, L->restored, 0, 0, 0, why, sizeof why) : CX_ENOMEM;
    if (lrc != 0) {
        if (lrc != CX_ENOTFOUND)
            cx_warn("no usable local checkpoint: %s", why);
        free(L->restored);
        L->restored = NULL;
    } else {
        if (L->restored->learner != o->id) {
            cx_warn("local checkpoint belongs to learner %lld, not %lld; ignoring it",
                    (long long)L->restored->learner, (long long)o->id);
            ckpt_learner_cleanup(L->restored);
            free(L->restored);
            L->restored = NULL;
        } else {
            L->incarnation = L->restored->incarnation;
            L->step = L->restored->step;
        }
    }
}

/* learner_run, step: free L and everything it holds (after the threads
 * stopped; an error path lets a background checkpoint write finish). */
static void learner_free(learner *L)
{
    ckpt_writer_free(L->ckw); /* an error path: the write in progress finishes */
    if (L->restored) {
        ckpt_learner_cleanup(L->restored);
        free(L->restored);
    }
    cx_http_client_free(L->http);
    model_free(L->m);
    adamw_free(L->opt);
    data_shard_free(L->shard);
    data_source_free(L->src);
    fragment_table_free(L->ft);
    free(L->gcopy), free(L->gver), free(L->gseal), free(L->seen_ver);
    free(L->ef), free(L->ef_next), free(L->ef_off);
    free(L->base), free(L->scratch), free(L->wire), free(L->in), free(L->tg);
    free(L->join_accepted), free(L->ckpt_accepted);
    learner_rebase_cleanup(L);
    learner_decoupled_free(L->dec);
    pthread_mutex_destroy(&L->mu);
    free(L);
}

int learner_run(const learner_opts *o, volatile sig_atomic_t *stop, char *err, size_t errlen)
{
    learner *L = calloc(1, sizeof *L);
    int rc = 0;
    pthread_t hb;
    int hb_started = 0;
    if (!L)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    L->o = o;
    L->stop = stop;
    L->train_loss = NAN;
    pthread_mutex_init(&L->mu, NULL);
    L->last_ok_ms = cx_mono_ms();
    const char *hook = getenv("CHAOSLOCO_HOOK_DIR");
    if (hook && *hook)
        snprintf(L->hook_path, sizeof L->hook_path, "%s/nan", hook);
    if ((rc = cx_mkdir_p(o->state_dir, err, errlen)) != 0)
        goto out;
    L->http = learner_link_new_client(L);
    if (!L->http) {
        rc = cx_fail(err, errlen, CX_ENOMEM, "cannot create an HTTP client");
        goto out;
    }
    /* the local checkpoint (if any) says which incarnation and step we were */
    load_local_checkpoint(L);
    if ((rc = learner_link_join(L, L->http, 1, NULL, err, errlen)) != 0)
        goto out;
    if ((rc = learner_link_pull_all(L)) != 0) {
        if (*stop) { /* a signal before the first pull: nothing trained, nothing to save */
            cx_info("stopped by a signal before the first pull completed");
            rc = 0;
        } else
            rc = cx_fail(err, errlen, CX_EUNAVAIL, "syncer %s unreachable while pulling", o->syncer_url);
        goto out;
    }
    if (pthread_create(&hb, NULL, heartbeat_main, L) == 0)
        hb_started = 1;
    switch (L->cfg.mode) {
    case CONFIG_MODE_DDP:
    case CONFIG_MODE_DDP_ELASTIC:
        rc = learner_ddp_loop(L, err, errlen);
        break;
    case CONFIG_MODE_DILOCO:
        rc = learner_diloco_loop(L, err, errlen);
        break;
    default:
        rc = learner_decoupled_loop(L, err, errlen);
        break;
    }
    if (*stop && L->m) {
        rc = 0; /* a signal is a clean shutdown, whatever was in progress */
    }
    if (rc == 0 && L->m)
        learner_ckpt_save(L);
    if (rc == 0 && L->m) {
        /* stop the heartbeat thread, then report the final step */
        pthread_mutex_lock(&L->mu);
        L->threads_stop = 1;
        pthread_mutex_unlock(&L->mu);
        if (hb_started)
            pthread_join(hb, NULL);
        hb_started = 0;
        final_heartbeat(L);
        cx_info("fragments received: %lld as delta chains (%lld deltas), %lld in full, %lld delta checks "
                "failed",
                (long long)L->n_delta, (long long)L->n_delta_vers, (long long)L->n_full,
                (long long)L->n_mismatch);
    }
    if (rc == 0 && !*stop) {
        int status;
        /* the final step and tokens, and per fragment the steps that never
         * reached the syncer (decoupled: what final_send could not send) */
        json_t *unsent = json_array();
        for (int p = 0; p < L->P; p++)
            json_array_append_new(unsent, json_integer(L->cfg.mode == CONFIG_MODE_DECOUPLED
                                                           ? (json_int_t)learner_rebase_unsent_steps(
                                                                 L, p, learner_decoupled_sent_accepted(L, p))
                                                           : 0));
        pthread_mutex_lock(&L->mu);
        json_t *b = json_pack("{s:I, s:I, s:I, s:I, s:o}", "learner", (json_int_t)o->id, "incarnation",
                              (json_int_t)L->incarnation, "step", (json_int_t)L->step, "tokens",
                              (json_int_t)L->tokens, "unsent", unsent);
        pthread_mutex_unlock(&L->mu);
        json_decref(learner_link_call_json(L, L->http, "POST", "/v1/leave", b, &status));
        json_decref(b);
        char pcrc[9];
        proto_crc_format(proto_f32_crc(model_params(L->m), L->n), pcrc);
        cx_info("done: %lld steps, %lld tokens, last train loss %.4f, params_crc32c=%s", (long long)L->step,
                (long long)L->tokens, L->train_loss, pcrc);
    }
out:
    pthread_mutex_lock(&L->mu);
    L->threads_stop = 1;
    pthread_mutex_unlock(&L->mu);
    if (hb_started)
        pthread_join(hb, NULL);
    learner_free(L);
    return rc;
}
