/* durability.c - the syncer's durability component (durability.h): eval of the global
 * model, checkpoints, and the restore at start-up.
 *
 * What it is: dur_run_eval and dur_write_checkpoint (snapshot under
 * s->mu, work outside it; the worker thread in core.c calls them),
 * restore of the newest valid checkpoint, the version bump above merges
 * logged after it, and the start log line that says what the state dir
 * held. What it is
 * not: the checkpoint format (trainer/checkpoint.c) nor the rebuild from the
 * learners (rebuild.c).
 */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/file.h"
#include "common/log.h"
#include "trainer/checkpoint.h"
#include "trainer/events.h"
#include "numerics/fragment.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "trainer/syncer/core.h"

const char *const dur_start_kind_names[] = {"fresh", "lost", "corrupt", "restored"};

/* What holds of s->dur between calls (mu held): an eval or a checkpoint
 * took merges as they were, and merges never go back; times and the
 * restored event seq are 0 (none) or set. */
static void assert_dur_state(const syncer *s)
{
#ifndef NDEBUG
    const syncer_dur *d = &s->dur;
    assert(d->eval_pending == 0 || d->eval_pending == 1);
    assert(d->eval_merges >= 0 && d->eval_merges <= s->merges);
    assert(d->last_ckpt_merges >= 0 && d->last_ckpt_merges <= s->merges);
    assert(d->last_eval_ms >= 0 && d->last_ckpt_ms >= 0 && d->ckpt_event_seq >= 0);
#else
    (void)s;
#endif
}

void dur_init(syncer *s)
{
    s->dur.eval_loss = NAN;
    assert_dur_state(s);
}

void dur_note_merge(syncer *s)
{
    s->dur.eval_pending = 1;
    assert_dur_state(s);
}

void dur_eval_soon(syncer *s)
{
    s->dur.eval_pending = 1;
    s->dur.last_eval_ms = 0;
    assert_dur_state(s);
}

/* ---- syncer: eval and checkpoints (ticker thread, outside the lock) ---- */

void dur_run_eval(syncer *s)
{
    pthread_mutex_lock(&s->mu);
    memcpy(model_params(s->eval_model), s->theta, s->n * sizeof(float));
    int64_t merges = s->merges, tokens = s->tokens_merged;
    s->dur.eval_pending = 0;
    pthread_mutex_unlock(&s->mu);
    double loss = model_loss(s->eval_model, s->eval_in, s->eval_tg, s->eval_n);
    pthread_mutex_lock(&s->mu);
    s->dur.eval_loss = loss;
    s->dur.eval_merges = merges;
    s->dur.eval_tokens = tokens;
    s->dur.last_eval_ms = cx_mono_ms();
    assert_dur_state(s);
    pthread_mutex_unlock(&s->mu);
    events_emit(s->ev, "eval",
                json_pack("{s:o, s:o, s:I, s:I}", "loss", isfinite(loss) ? json_real(loss) : json_null(),
                          "bpb", isfinite(loss) ? json_real(loss / M_LN2) : json_null(), "merges",
                          (json_int_t)merges, "tokens", (json_int_t)tokens));
    cx_info("eval loss=%.4f bpb=%.4f merges=%lld tokens=%lld", loss, loss / M_LN2, (long long)merges,
            (long long)tokens);
}

/* ---- syncer: the guard's norm statistic across restarts ----
 *
 * The per-fragment ring of accepted contribution norms (guard.h)
 * is kept beside the checkpoint in <state-dir>/guard.json, written
 * atomically after each checkpoint: {"fragments": [ring, ...]} with one
 * guard_norms_json ring per fragment. It is advisory: a missing or damaged
 * file (or one of another fragment count) starts the rings empty, which
 * only means the warm-up bound applies again until the learners have sent
 * GUARD_NORM_WARMUP contributions per fragment. */

/* Write norms[P] (a snapshot) to guard.json. 0, or a negative cx_err. */
static int guard_save(const syncer *s, const guard_norms *norms, char *err, size_t errlen)
{
    char path[1100];
    json_t *fr = json_array();
    for (int p = 0; p < s->P; p++)
        json_array_append_new(fr, guard_norms_json(&norms[p]));
    json_t *o = json_pack("{s:o}", "fragments", fr);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text)
        return cx_fail(err, errlen, CX_ENOMEM, "guard.json: out of memory");
    snprintf(path, sizeof path, "%s/guard.json", s->state_dir);
    int rc = cx_file_write_atomic(path, text, strlen(text), err, errlen);
    free(text);
    return rc;
}

/* Load guard.json into the rounds' rings (start-up, before serving); a
 * missing or damaged file leaves them empty (logged). */
static void guard_load(syncer *s)
{
    char path[1100], err[CX_ERRLEN];
    char *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/guard.json", s->state_dir);
    if (access(path, F_OK) != 0)
        return;
    if (cx_file_read(path, 1 << 22, &text, &len, err, sizeof err) != 0) {
        cx_warn("guard.json: %s; the norm bounds start from their warm-up", err);
        return;
    }
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    json_t *fr = json_object_get(o, "fragments");
    if (!json_is_array(fr) || json_array_size(fr) != (size_t)s->P) {
        cx_warn("guard.json: not {\"fragments\": [%d rings]}; the norm bounds start from their warm-up",
                s->P);
        json_decref(o);
        return;
    }
    for (int p = 0; p < s->P; p++)
        if (rounds_load_norms(s, p, json_array_get(fr, (size_t)p), err, sizeof err) != 0)
            cx_warn("guard.json: fragment %d: %s; its norm bound starts from the warm-up", p, err);
    json_decref(o);
}

/* Snapshot under the lock, write outside it. */
int dur_write_checkpoint(syncer *s, char *err, size_t errlen)
{
    ckpt_syncer c;
    int rc = CX_ENOMEM;
    memset(&c, 0, sizeof c);
    c.n = s->n;
    c.P = s->P;
    c.params = malloc(s->n * sizeof(float));
    c.momentum = malloc(s->n * sizeof(float));
    c.versions = malloc((size_t)s->P * sizeof(int64_t));
    c.learners = calloc(MAX_LEARNERS, sizeof *c.learners);
    if (s->opt) {
        c.adam_m = malloc(s->n * sizeof(float));
        c.adam_v = malloc(s->n * sizeof(float));
    }
    guard_norms *norms = s->rounds.frag ? malloc((size_t)s->P * sizeof *norms) : NULL;
    if (!c.params || !c.momentum || !c.versions || !c.learners || (s->opt && (!c.adam_m || !c.adam_v)) ||
        (s->rounds.frag && !norms))
        goto out;
    pthread_mutex_lock(&s->mu);
    c.mode = s->cfg.mode;
    c.table_digest = fragment_table_digest(s->ft);
    c.merges = s->merges;
    c.tokens_merged = s->tokens_merged;
    c.tokens_trained = members_tokens_trained(s);
    c.ddp_step = s->ddp.step;
    c.event_seq = events_last_seq(s->ev);
    memcpy(c.params, s->theta, s->n * sizeof(float));
    memcpy(c.momentum, s->momentum, s->n * sizeof(float));
    memcpy(c.versions, s->versions, (size_t)s->P * sizeof(int64_t));
    if (s->opt) {
        memcpy(c.adam_m, adamw_m(s->opt), s->n * sizeof(float));
        memcpy(c.adam_v, adamw_v(s->opt), s->n * sizeof(float));
        c.adam_steps = (int64_t)adamw_steps(s->opt);
    }
    for (int i = 0; i < MAX_LEARNERS; i++)
        if (s->members.learners[i].id >= 0 && s->members.learners[i].incarnation > 0)
            c.learners[c.n_learners++] =
                (ckpt_learner_inc){s->members.learners[i].id, s->members.learners[i].incarnation};
    for (int p = 0; norms && p < s->P; p++)
        norms[p] = s->rounds.frag[p].norms;
    s->dur.last_ckpt_merges = s->merges;
    s->dur.last_ckpt_ms = cx_mono_ms();
    assert_dur_state(s);
    pthread_mutex_unlock(&s->mu);
    rc = ckpt_syncer_save(s->state_dir, &c, err, errlen);
    if (rc == 0 && norms) {
        char gerr[CX_ERRLEN];
        if (guard_save(s, norms, gerr, sizeof gerr) != 0) /* advisory: the checkpoint stands */
            cx_warn("checkpoint written, guard.json not: %s", gerr);
    }
    if (rc == 0) {
        size_t bytes = s->n * 4 * (s->opt ? 4 : 2);
        events_emit(s->ev, "checkpoint",
                    json_pack("{s:I, s:I, s:I}", "merges", (json_int_t)c.merges, "bytes", (json_int_t)bytes,
                              "generation", (json_int_t)c.generation));
    }
out:
    free(norms);
    ckpt_syncer_cleanup(&c);
    return rc;
}

/* ---- syncer: start-up ---- */

typedef struct seen_versions {
    int64_t *v;  /* [P] newest version seen in merge events */
    int P;       /* fragments */
    int64_t ddp; /* newest ddp merge version */
} seen_versions;

static int scan_event(void *ctx, json_t *e)
{
    seen_versions *sv = ctx;
    json_t *type = json_object_get(e, "type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "merge") != 0)
        return 0;
    json_int_t f = json_integer_value(json_object_get(e, "fragment"));
    json_int_t v = json_integer_value(json_object_get(e, "version"));
    if (f == -1 && v > sv->ddp)
        sv->ddp = v;
    else if (f >= 0 && f < sv->P && v > sv->v[f])
        sv->v[f] = v;
    return 0;
}

int dur_restore(syncer *s, char *err, size_t errlen)
{
    ckpt_syncer c;
    char why[CX_ERRLEN];
    int rc = ckpt_syncer_load(s->state_dir, &c, s->n, s->P, fragment_table_digest(s->ft), why, sizeof why);
    s->start = START_FRESH; /* START_LOST is told from the event log later (dur_start_log) */
    if (rc == CX_ENOTFOUND)
        return 0;
    if (rc == CX_ECORRUPT) {
        cx_warn("ignoring damaged checkpoints: %s", why);
        s->start = START_CORRUPT;
        return 0;
    }
    if (rc)
        return cx_fail(err, errlen, rc, "%s", why);
    if (c.mode != s->cfg.mode) {
        ckpt_syncer_cleanup(&c);
        return cx_fail(err, errlen, CX_EINVAL, "the checkpoint in %s is of a %s run, not %s", s->state_dir,
                       config_mode_name(c.mode), syncer_mode_name(s));
    }
    memcpy(s->theta, c.params, s->n * sizeof(float));
    memcpy(s->momentum, c.momentum, s->n * sizeof(float));
    memcpy(s->versions, c.versions, (size_t)s->P * sizeof(int64_t));
    if (s->opt && c.adam_m) {
        memcpy(adamw_m(s->opt), c.adam_m, s->n * sizeof(float));
        memcpy(adamw_v(s->opt), c.adam_v, s->n * sizeof(float));
        adamw_set_steps(s->opt, (uint64_t)c.adam_steps);
    }
    s->merges = s->dur.last_ckpt_merges = c.merges;
    s->tokens_merged = c.tokens_merged;
    s->tokens_frag_raw = c.tokens_merged * s->P;
    ddp_restart_at(s, c.ddp_step);
    members_restore(s, &c);
    events_set_seq_floor(s->ev, c.event_seq);
    s->dur.ckpt_event_seq = c.event_seq;
    assert_dur_state(s);
    s->start = START_RESTORED;
    if (s->rounds.frag)
        guard_load(s);
    cx_info("restored checkpoint generation=%lld merges=%lld ddp_step=%lld", (long long)c.generation,
            (long long)c.merges, (long long)c.ddp_step);
    ckpt_syncer_cleanup(&c);
    return 1;
}

/* Versions never go backwards: merges published after the checkpoint (and
 * lost with the process) were logged; restart above them. Only the events
 * after the checkpoint's seq are read (events_foreach_file bisects to
 * them), so a restart costs the history since the last checkpoint, not the
 * run's. */
void dur_bump_versions(syncer *s)
{
    seen_versions sv = {calloc((size_t)s->P, sizeof(int64_t)), s->P, -1};
    if (!sv.v)
        return;
    for (int p = 0; p < s->P; p++)
        sv.v[p] = -1;
    events_foreach_file(s->ev, s->dur.ckpt_event_seq, "merge", scan_event, &sv);
    for (int p = 0; p < s->P; p++) {
        int64_t seen = syncer_is_ddp(s) ? sv.ddp : sv.v[p];
        if (seen >= s->versions[p]) {
            cx_warn(
                "fragment %d: version %lld was published after the checkpoint (at %lld); continuing at %lld",
                p, (long long)seen, (long long)s->versions[p], (long long)(seen + 1));
            s->versions[p] = seen + 1;
        }
    }
    free(sv.v);
}

/* Say what the state dir held (a fresh run, lost or corrupt checkpoints,
 * or a restore) and have the rebuild remember the start versions: the bar
 * above which a learner's report is newer (rebuild_note_start). */
void dur_start_log(syncer *s, int64_t before_bump)
{
    int64_t after = 0;
    for (int p = 0; p < s->P; p++)
        after += s->versions[p];
    if (s->start == START_FRESH && after > before_bump)
        s->start = START_LOST; /* merges in the log, no checkpoint: it was lost */
    rebuild_note_start(s, after > before_bump);
    switch (s->start) {
    case START_FRESH:
        cx_info("state dir %s holds no checkpoint and no merge: starting from the initial model (learners "
                "that report trained fragments at join will rebuild it, --on-lost-state %s)",
                s->state_dir, s->rebuild.on_lost_state == SYNCER_LOST_REFUSE ? "refuse" : "rebuild");
        break;
    case START_LOST:
    case START_CORRUPT:
        cx_warn("state dir %s: checkpoints %s; the global state will come from the learners' copies "
                "(--on-lost-state %s)",
                s->state_dir, s->start == START_LOST ? "lost (the event log shows merges)" : "damaged",
                s->rebuild.on_lost_state == SYNCER_LOST_REFUSE ? "refuse" : "rebuild");
        break;
    case START_RESTORED:
        /* merges (ddp: steps) were published after the checkpoint: the
         * learners hold them. Make every known learner rejoin (its calls
         * answer 409 stale_incarnation) so that it reports what it holds. */
        if (after > before_bump) {
            members_require_rejoin(s);
            cx_warn("merges were published after the restored checkpoint: learners must rejoin and report "
                    "their copies (newer ones rebuild those fragments)");
        }
        break;
    }
}
