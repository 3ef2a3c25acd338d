/* ckpt.c - the learner's local checkpoints (ckpt.h).
 *
 * What it is: the periodic checkpoint (a copy into the background writer's
 * buffers, the write on its thread) and the final synchronous one. What it
 * is not: the checkpoint format and writer thread (trainer/checkpoint.c)
 * nor the restore at start (link.c). Main thread only.
 */
#include <pthread.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "numerics/data.h"
#include "numerics/fragment.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "trainer/checkpoint.h"
#include "trainer/learner/ckpt.h"
#include "trainer/learner/decoupled.h"

/* ---- ckpt: the view of the live state ---- */

/* Fill c with borrowed pointers to the live state (cur receives the cursor). */
static void checkpoint_view(learner *L, ckpt_learner *c, data_cursor *cur)
{
    memset(c, 0, sizeof *c);
    data_shard_get_cursor(L->shard, cur);
    pthread_mutex_lock(&L->mu);
    c->incarnation = L->incarnation;
    c->step = L->step;
    c->tokens = L->tokens;
    pthread_mutex_unlock(&L->mu);
    c->learner = L->o->id;
    c->n = L->n;
    c->P = L->P;
    c->table_digest = fragment_table_digest(L->ft);
    c->params = model_params(L->m);
    c->adam_steps = (int64_t)adamw_steps(L->opt);
    c->adam_m = adamw_m(L->opt);
    c->adam_v = adamw_v(L->opt);
    c->base_version = L->rb.base_version;
    c->frag_steps = L->rb.frag_steps;
    c->frag_tokens = L->rb.frag_tokens;
    c->base = L->base;
    c->sent = L->rb.sent;
    c->origin_step = L->rb.origin_step;
    c->send_step = L->rb.send_step;
    c->send_steps = L->rb.send_steps;
    c->send_tokens = L->rb.send_tokens;
    /* decoupled's comm thread sets "accepted"; ours is a copy under the lock */
    for (int p = 0; p < L->P; p++)
        L->ckpt_accepted[p] = learner_decoupled_sent_accepted(L, p);
    c->send_accepted = L->ckpt_accepted;
    c->cursor_len = sizeof *cur;
    c->cursor = cur;
}

/* ---- ckpt: periodic and final ---- */

/* The periodic checkpoint, from the inner loop: a memcpy into the writer's
 * buffers, the write on its thread (checkpoint.h). Skipped (and counted)
 * when the previous write still runs. The writer and its buffers are made
 * once, at the first checkpoint; if that fails this falls back to a
 * synchronous save, as before. */
void learner_ckpt_periodic(learner *L)
{
    ckpt_learner c;
    data_cursor cur;
    char why[CX_ERRLEN];
    checkpoint_view(L, &c, &cur);
    L->ckpt_step = c.step;
    if (!L->ckw && !L->ckw_broken) {
        L->ckw = ckpt_writer_new(L->o->state_dir, L->n, L->P, sizeof cur, NULL, NULL);
        if (!L->ckw) {
            L->ckw_broken = 1;
            cx_warn("no background checkpoint writer (out of memory?); checkpointing synchronously");
        }
    }
    if (L->ckw) {
        /* the first skip is logged, the rest counted (logged at exit) */
        if (ckpt_writer_submit(L->ckw, &c) == 0 && !L->ckw_skip_logged) {
            L->ckw_skip_logged = 1;
            cx_info("checkpoint at step %lld skipped: the previous one is still being written (further "
                    "skips are only counted)",
                    (long long)c.step);
        }
        return;
    }
    if (ckpt_learner_save(L->o->state_dir, &c, why, sizeof why) != 0)
        cx_warn("checkpoint at step %lld failed, keeping the previous one and training on: %s",
                (long long)c.step, why);
}

/* The final checkpoint (SIGTERM or the end of training): synchronous and
 * complete before the process goes on; the background write in progress,
 * if any, finishes first (one writer at a time per state dir). */
void learner_ckpt_save(learner *L)
{
    ckpt_learner c;
    data_cursor cur;
    char why[CX_ERRLEN];
    if (L->ckw) {
        ckpt_writer_stats st;
        ckpt_writer_wait(L->ckw);
        ckpt_writer_get_stats(L->ckw, &st);
        cx_info("background checkpoints: %lld written, %lld skipped (previous write still running), %lld "
                "failed",
                (long long)st.written, (long long)st.skipped, (long long)st.failed);
        ckpt_writer_free(L->ckw);
        L->ckw = NULL;
    }
    checkpoint_view(L, &c, &cur);
    L->ckpt_step = c.step;
    if (ckpt_learner_save(L->o->state_dir, &c, why, sizeof why) != 0)
        cx_warn("checkpoint at step %lld failed, keeping the previous one and training on: %s",
                (long long)c.step, why);
}
