/* rebase.c - every trained step reaches the global model: how a
 * learner takes a global fragment without throwing away what it trained.
 *
 * What it is: adoption (learner_rebase_adopt: nothing to keep), the
 * decoupled rebase (learner_rebase_apply: the merged value plus the progress not yet in
 * it), the start of a restarted learner (learner_rebase_start: the
 * progress its checkpoint holds that the syncer never accepted), and the
 * bookkeeping of a send. What it is not: when fragments are sent or
 * received (decoupled.c) nor the checkpoint itself (ckpt.c). Main thread
 * only.
 *
 * Per fragment p, in step coordinates:
 *
 *   origin_step              send_step                      step
 *        |---- sent, in flight ---|---- trained since the send ---|
 *        Θ_base_p                 sent_p                          θ_p
 *
 * θ_p − Θ_base_p is the progress since origin_step (frag_steps steps,
 * frag_tokens tokens). A send hands Θ_base_p − θ_p to the syncer and
 * remembers θ_p in sent_p. When the merged value G that holds it comes, θ_p
 * becomes G + (θ_p − sent_p) and the counters keep the steps since the
 * send: the next contribution carries exactly those. When the send was
 * refused (or never answered before a rejoin), G + (θ_p − Θ_base_p) keeps
 * everything since origin_step. So every step is in exactly one accepted
 * contribution, which tests/integration/test_trainer_rebase.c checks from
 * the events (each contribution names its step and steps).
 */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "numerics/fragment.h"
#include "numerics/model.h"
#include "trainer/learner/core.h"
#include "trainer/learner/rebase.h"

/* ---- rebase: the state ---- */

int learner_rebase_init(learner *L)
{
    learner_rebase_state *R = &L->rb;
    size_t P = (size_t)L->P;
    R->base_version = calloc(P, sizeof(int64_t));
    R->frag_steps = calloc(P, sizeof(int64_t));
    R->frag_tokens = calloc(P, sizeof(int64_t));
    R->sent = malloc(L->n * sizeof(float));
    R->origin_step = calloc(P, sizeof(int64_t));
    R->send_step = malloc(P * sizeof(int64_t));
    R->send_steps = calloc(P, sizeof(int64_t));
    R->send_tokens = calloc(P, sizeof(int64_t));
    R->lost_frag_steps = 0;
    if (!R->base_version || !R->frag_steps || !R->frag_tokens || !R->sent || !R->origin_step ||
        !R->send_step || !R->send_steps || !R->send_tokens)
        return CX_ENOMEM;
    for (int p = 0; p < L->P; p++)
        R->send_step[p] = -1;
    return 0;
}

void learner_rebase_cleanup(learner *L)
{
    learner_rebase_state *R = &L->rb;
    free(R->base_version), free(R->frag_steps), free(R->frag_tokens), free(R->sent);
    free(R->origin_step), free(R->send_step), free(R->send_steps), free(R->send_tokens);
    memset(R, 0, sizeof *R);
}

void learner_rebase_restore(learner *L, const ckpt_learner *c)
{
    learner_rebase_state *R = &L->rb;
    memcpy(R->sent, c->sent, L->n * sizeof(float));
    for (int p = 0; p < L->P; p++) {
        R->base_version[p] = c->base_version[p];
        R->frag_steps[p] = c->frag_steps[p];
        R->frag_tokens[p] = c->frag_tokens[p];
        R->origin_step[p] = c->origin_step[p];
        R->send_step[p] = c->send_step[p];
        R->send_steps[p] = c->send_steps[p];
        R->send_tokens[p] = c->send_tokens[p];
    }
}

void learner_rebase_count_steps(learner *L, int64_t steps, int64_t tokens)
{
    for (int p = 0; p < L->P; p++) {
        L->rb.frag_steps[p] += steps;
        L->rb.frag_tokens[p] += tokens;
    }
}

/* ---- rebase: taking a global value ---- */

/* θ_p ← payload + (θ_p − ref_p), Θ_base_p ← payload, over p's ranges
 * (ref may be L->base: each element is read before it is overwritten). */
static void carry_onto(learner *L, int p, const float *payload, const float *ref)
{
    const fragment_range *r = fragment_ranges(L->ft, p);
    int nr = fragment_num_ranges(L->ft, p);
    float *th = model_params(L->m);
    size_t k = 0;
    for (int j = 0; j < nr; j++)
        for (size_t i = 0; i < r[j].length; i++, k++) {
            size_t o = r[j].offset + i;
            th[o] = payload[k] + (th[o] - ref[o]);
            L->base[o] = payload[k];
        }
}

void learner_rebase_adopt(learner *L, int p, const float *payload, int64_t version)
{
    fragment_scatter(L->ft, p, payload, model_params(L->m));
    fragment_scatter(L->ft, p, payload, L->base);
    L->rb.base_version[p] = version;
    L->rb.frag_steps[p] = 0;
    L->rb.frag_tokens[p] = 0;
    L->rb.origin_step[p] = L->step;
    L->rb.send_step[p] = -1;
    L->rb.send_steps[p] = L->rb.send_tokens[p] = 0;
}

void learner_rebase_apply(learner *L, int p, const float *payload, int64_t version, int accepted)
{
    int from_send = accepted && L->rb.send_step[p] >= 0;
    carry_onto(L, p, payload, from_send ? L->rb.sent : L->base);
    L->rb.base_version[p] = version;
    if (from_send) {
        L->rb.origin_step[p] = L->rb.send_step[p];
        L->rb.frag_steps[p] -= L->rb.send_steps[p];
        L->rb.frag_tokens[p] -= L->rb.send_tokens[p];
    }
    L->rb.send_step[p] = -1;
    L->rb.send_steps[p] = L->rb.send_tokens[p] = 0;
}

/* The restored checkpoint's rebase state (base, sent, counters) is in L
 * (link.c, apply_restored) and θ is the checkpoint's. a = the step
 * of our last contribution to p the syncer accepted (any incarnation; -1
 * when it does not know, e.g. it restarted too):
 *   a >= the checkpoint's step   everything the checkpoint holds was sent:
 *                                 take the global value, count from there;
 *   a = the send in flight       carry what came after it (accepted);
 *       (or unknown and that send had its 202 before the checkpoint)
 *   a <= origin (or unknown)     the send in flight never arrived: carry
 *                                 everything since origin;
 *   otherwise                    inconsistent (a send the checkpoint does
 *                                 not know): take the global value.
 * The steps the previous incarnation trained after its checkpoint and did
 * not send are lost; the syncer counts them at the join (`lost` event). */
void learner_rebase_start(learner *L, int p, const float *payload, int64_t version)
{
    const ckpt_learner *c = L->restored;
    int64_t a = L->join_accepted ? L->join_accepted[p] : -1, s = L->rb.send_step[p];
    if (!L->restored_carry || !c || a >= c->step) {
        learner_rebase_adopt(L, p, payload, version);
        return;
    }
    if (s >= 0 && (a == s || (a < 0 && c->send_accepted[p]))) {
        learner_rebase_apply(L, p, payload, version, 1);
    } else if (a < 0 || a <= L->rb.origin_step[p]) {
        learner_rebase_apply(L, p, payload, version, 0);
    } else {
        cx_warn(
            "fragment %d: the syncer accepted our step %lld, which the checkpoint (step %lld, origin %lld, "
            "send %lld) does not know; its progress is not carried",
            p, (long long)a, (long long)c->step, (long long)L->rb.origin_step[p], (long long)s);
        learner_rebase_adopt(L, p, payload, version);
        return;
    }
    if (L->rb.frag_steps[p] > 0)
        cx_info("fragment %d: carrying %lld steps since step %lld from the checkpoint", p,
                (long long)L->rb.frag_steps[p], (long long)L->rb.origin_step[p]);
}

void learner_rebase_note_send(learner *L, const frag_msg *m)
{
    const fragment_range *r = fragment_ranges(L->ft, m->p);
    int nr = fragment_num_ranges(L->ft, m->p);
    const float *th = model_params(L->m);
    for (int j = 0; j < nr; j++)
        memcpy(L->rb.sent + r[j].offset, th + r[j].offset, r[j].length * sizeof *th);
    L->rb.send_step[m->p] = m->step;
    L->rb.send_steps[m->p] = m->steps;
    L->rb.send_tokens[m->p] = m->tokens;
}

void learner_rebase_drop_progress(learner *L)
{
    memcpy(L->rb.sent, L->base, L->n * sizeof *L->rb.sent); /* θ = Θ_base: nothing left to carry */
    for (int p = 0; p < L->P; p++) {
        L->rb.lost_frag_steps += L->rb.frag_steps[p] - L->rb.send_steps[p];
        L->rb.frag_steps[p] = L->rb.frag_tokens[p] = 0;
        L->rb.send_steps[p] = L->rb.send_tokens[p] = 0;
        L->rb.send_step[p] = -1; /* the next value taken carries nothing, counted from here */
        L->rb.origin_step[p] = L->step;
    }
}

int64_t learner_rebase_unsent_steps(const learner *L, int p, int sent_accepted)
{
    return L->rb.frag_steps[p] - (sent_accepted && L->rb.send_step[p] >= 0 ? L->rb.send_steps[p] : 0);
}
