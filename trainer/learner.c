/* learner.c - one learner unit (learner.h): its lifecycle, the inner step,
 * the heartbeat thread and the diloco loop.
 *
 * What it is: learner_run (join, pick the mode's loop, final checkpoint,
 * leave), one inner AdamW step and its bookkeeping, the end-of-training
 * rule, the heartbeat thread, and the synchronous diloco exchange. What it
 * is not: the calls to the syncer (learner_join.c), contributions
 * (learner_contrib.c), checkpoints (learner_ckpt.c), nor the ddp and
 * decoupled loops (learner_ddp.c, learner_decoupled.c).
 *
 * The files of the learner share struct learner through learner_internal.h:
 *   learner.c            lifecycle, inner step, heartbeat thread, diloco loop
 *   learner_join.c       syncer calls with give-up, build, join, pulls
 *   learner_contrib.c    contributions: upstream error feedback, encode, POST
 *   learner_ckpt.c       the NaN hook and local checkpoints
 *   learner_ddp.c        ddp / ddp-elastic: gradient barrier, optimizer sync
 *   learner_decoupled.c  decoupled: the comm thread and the main-thread side
 *
 * Threads:
 *   main       the inner loop; in ddp and diloco it also does the (blocking)
 *              exchange with the syncer, because those modes are synchronous.
 *   heartbeat  POST /v1/heartbeat once per second with its own HTTP client.
 *   comm       decoupled only: sends queued contributions, long-polls the
 *              merged fragments it waits for, rejoins when the syncer says
 *              its incarnation is stale. Hands fragments to the main thread
 *              through an inbox the inner loop drains between two steps.
 * L->mu guards the fields marked "shared"; everything else is main-thread
 * only, except gcopy/gver (the global fragments as the syncer sent them,
 * full or rebuilt from delta chains), which belong to whichever thread
 * talks to the syncer (the comm thread once it runs).
 * The decoupled fragment's state machine is drawn in learner_decoupled.c.
 */
#include <errno.h>
#include <math.h>
#include <cblas.h> /* openblas_set_num_threads */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/err.h"
#include "common/file.h"
#include "common/http_client.h"
#include "common/json.h"
#include "common/log.h"
#include "common/parse.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "numerics/data.h"
#include "numerics/encoding.h"
#include "numerics/fragment.h"
#include "trainer/learner_internal.h"
#include "numerics/model.h"
#include "numerics/optim.h"
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
    for (int p = 0; p < L->P; p++) {
        L->frag_steps[p]++;
        L->frag_tokens[p] += L->cfg.batch;
    }
    if (step % 50 == 0)
        cx_info("step=%lld loss=%.4f step_ms=%.1f", (long long)step, L->train_loss, L->step_ms_ema);
    if (L->cfg.learner_checkpoint_every > 0 && step - L->ckpt_step >= L->cfg.learner_checkpoint_every)
        learner_checkpoint_periodic(L);
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

/* ---- learner: diloco ---- */

static int diloco_sync(learner *L, char *err, size_t errlen)
{
    for (int p = 0; p < L->P; p++) {
        frag_msg m = {p, L->base_version[p], L->frag_tokens[p], L->frag_steps[p], NULL, 0, 0, L->step};
        int64_t merges_into;
        int status = 400;
        /* a refused (400) payload is rebuilt and sent again: the barrier
         * waits for every learner, so a lost contribution would stall it */
        for (int attempt = 0; attempt < 3 && status == 400; attempt++) {
            m.buf = learner_make_contribution(L, p, &m.len, &m.crc);
            if (!m.buf)
                return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
            status = learner_post_contribution(L, L->http, &m, &merges_into);
            free(m.buf);
        }
        if (status == 202)
            ef_commit(L, p);
        if (status == 0)
            return cx_fail(err, errlen, CX_EUNAVAIL, "syncer %s unreachable for more than %.0f s",
                           L->o->syncer_url, L->o->give_up_s);
        pthread_mutex_lock(&L->mu);
        int rj = L->need_rejoin;
        pthread_mutex_unlock(&L->mu);
        if (rj) {
            int rc = learner_join(L, L->http, 0, err, errlen);
            return rc ? rc : learner_pull_all(L);
        }
    }
    /* wait for every merged fragment (the barrier) */
    for (int p = 0; p < L->P && !*L->stop; p++) {
        int64_t v;
        int rc;
        while ((rc = learner_pull_one(L, L->http, p, L->base_version[p], POLL_WAIT_MS, L->scratch, &v)) !=
               1) {
            if (rc == CX_EUNAVAIL)
                return cx_fail(err, errlen, CX_EUNAVAIL, "syncer %s unreachable for more than %.0f s",
                               L->o->syncer_url, L->o->give_up_s);
            if (*L->stop)
                return 0;
            pthread_mutex_lock(&L->mu);
            int rj = L->need_rejoin;
            pthread_mutex_unlock(&L->mu);
            if (rj) {
                int rc2 = learner_join(L, L->http, 0, err, errlen);
                return rc2 ? rc2 : learner_pull_all(L);
            }
        }
        learner_adopt(L, p, L->scratch, v);
    }
    return 0;
}

static int diloco_loop(learner *L, char *err, size_t errlen)
{
    while (learner_keep_training(L)) {
        learner_local_step(L);
        if (!learner_params_finite(L)) {
            cx_warn("own parameters are not finite; discarding them and pulling the global ones");
            adamw_reset_range(L->opt, 0, L->n, NULL, 0);
            if (learner_pull_all(L) != 0)
                return cx_fail(err, errlen, CX_EUNAVAIL, "syncer unreachable");
            continue;
        }
        /* the last step (budget spent or the run ended) sends what it has */
        if (L->step % L->cfg.H == 0 || !learner_keep_training(L)) {
            if (*L->stop)
                break;
            int rc = diloco_sync(L, err, errlen);
            if (rc)
                return rc;
        }
    }
    return 0;
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
        int done = L->comm_stop;
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
            learner_mark_ok(L);
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
            done = L->comm_stop;
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
    free(L->base), free(L->scratch), free(L->wire), free(L->base_version), free(L->frag_steps);
    free(L->frag_tokens), free(L->inflight), free(L->pending), free(L->in), free(L->tg);
    free(L->apply_at), free(L->wait_done), free(L->no_wait);
    free(L->accepted), free(L->sent), free(L->origin_step), free(L->send_step), free(L->send_steps);
    free(L->send_tokens), free(L->join_accepted), free(L->ckpt_accepted);
    pthread_cond_destroy(&L->cv);
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
    pthread_cond_init(&L->cv, NULL);
    L->last_ok_ms = cx_mono_ms();
    const char *hook = getenv("CHAOSLOCO_HOOK_DIR");
    if (hook && *hook)
        snprintf(L->hook_path, sizeof L->hook_path, "%s/nan", hook);
    if ((rc = cx_mkdir_p(o->state_dir, err, errlen)) != 0)
        goto out;
    L->http = learner_new_client(L);
    if (!L->http) {
        rc = cx_fail(err, errlen, CX_ENOMEM, "cannot create an HTTP client");
        goto out;
    }
    /* the local checkpoint (if any) says which incarnation and step we were */
    load_local_checkpoint(L);
    if ((rc = learner_join(L, L->http, 1, err, errlen)) != 0)
        goto out;
    if ((rc = learner_pull_all(L)) != 0) {
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
        rc = ddp_loop(L, err, errlen);
        break;
    case CONFIG_MODE_DILOCO:
        rc = diloco_loop(L, err, errlen);
        break;
    default:
        rc = decoupled_loop(L, err, errlen);
        break;
    }
    if (*stop && L->m) {
        rc = 0; /* a signal is a clean shutdown, whatever was in progress */
    }
    if (rc == 0 && L->m)
        learner_save_checkpoint(L);
    if (rc == 0 && L->m) {
        /* stop the heartbeat thread, then report the final step */
        pthread_mutex_lock(&L->mu);
        L->comm_stop = 1;
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
                                                           ? (json_int_t)learner_unsent_steps(L, p)
                                                           : 0));
        pthread_mutex_lock(&L->mu);
        json_t *b = json_pack("{s:I, s:I, s:I, s:I, s:o}", "learner", (json_int_t)o->id, "incarnation",
                              (json_int_t)L->incarnation, "step", (json_int_t)L->step, "tokens",
                              (json_int_t)L->tokens, "unsent", unsent);
        pthread_mutex_unlock(&L->mu);
        json_decref(learner_call_json(L, L->http, "POST", "/v1/leave", b, &status));
        json_decref(b);
        char pcrc[9];
        proto_crc_format(proto_f32_crc(model_params(L->m), L->n), pcrc);
        cx_info("done: %lld steps, %lld tokens, last train loss %.4f, params_crc32c=%s", (long long)L->step,
                (long long)L->tokens, L->train_loss, pcrc);
    }
out:
    pthread_mutex_lock(&L->mu);
    L->comm_stop = 1;
    pthread_mutex_unlock(&L->mu);
    if (hb_started)
        pthread_join(hb, NULL);
    learner_free(L);
    return rc;
}
