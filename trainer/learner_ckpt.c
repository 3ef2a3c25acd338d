/* learner_ckpt.c - the learner's NaN hook and local checkpoints.
 *
 * What it is: the NaN hook (docs/faults.md, "nan"), the periodic checkpoint (a copy
 * into the background writer's buffers, the write on its thread) and the
 * final synchronous one. What it is not: the checkpoint format and writer
 * thread (trainer/checkpoint.c) nor the restore at start (learner_join.c).
 * Main thread only.
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

/* ---- learner: hooks and checkpoints ---- */

/* The NaN hook (docs/faults.md, "nan"): 1 when this contribution must carry NaN. */
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
    c->base_version = L->base_version;
    c->frag_steps = L->frag_steps;
    c->frag_tokens = L->frag_tokens;
    c->base = L->base;
    c->sent = L->sent;
    c->origin_step = L->origin_step;
    c->send_step = L->send_step;
    c->send_steps = L->send_steps;
    c->send_tokens = L->send_tokens;
    /* the comm thread sets accepted; ours is a copy under the lock */
    pthread_mutex_lock(&L->mu);
    for (int p = 0; p < L->P; p++)
        L->ckpt_accepted[p] = L->inflight[p] && L->accepted[p];
    pthread_mutex_unlock(&L->mu);
    c->send_accepted = L->ckpt_accepted;
    c->cursor_len = sizeof *cur;
    c->cursor = cur;
}

/* The periodic checkpoint, from the inner loop: a memcpy into the writer's
 * buffers, the write on its thread (checkpoint.h). Skipped (and counted)
 * when the previous write still runs. The writer and its buffers are made
 * once, at the first checkpoint; if that fails this falls back to a
 * synchronous save, as before. */
void learner_checkpoint_periodic(learner *L)
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
void learner_save_checkpoint(learner *L)
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
