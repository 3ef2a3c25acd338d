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
#include <string.h>

#include "common/log.h"
#include "numerics/fragment.h"
#include "numerics/model.h"
#include "trainer/learner/rebase.h"

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
    L->base_version[p] = version;
    L->frag_steps[p] = 0;
    L->frag_tokens[p] = 0;
    L->origin_step[p] = L->step;
    L->send_step[p] = -1;
    L->send_steps[p] = L->send_tokens[p] = 0;
}

void learner_rebase_apply(learner *L, int p, const float *payload, int64_t version, int accepted)
{
    int from_send = accepted && L->send_step[p] >= 0;
    carry_onto(L, p, payload, from_send ? L->sent : L->base);
    L->base_version[p] = version;
    if (from_send) {
        L->origin_step[p] = L->send_step[p];
        L->frag_steps[p] -= L->send_steps[p];
        L->frag_tokens[p] -= L->send_tokens[p];
    }
    L->send_step[p] = -1;
    L->send_steps[p] = L->send_tokens[p] = 0;
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
    int64_t a = L->join_accepted ? L->join_accepted[p] : -1, s = L->send_step[p];
    if (!L->restored_carry || !c || a >= c->step) {
        learner_rebase_adopt(L, p, payload, version);
        return;
    }
    if (s >= 0 && (a == s || (a < 0 && c->send_accepted[p]))) {
        learner_rebase_apply(L, p, payload, version, 1);
    } else if (a < 0 || a <= L->origin_step[p]) {
        learner_rebase_apply(L, p, payload, version, 0);
    } else {
        cx_warn(
            "fragment %d: the syncer accepted our step %lld, which the checkpoint (step %lld, origin %lld, "
            "send %lld) does not know; its progress is not carried",
            p, (long long)a, (long long)c->step, (long long)L->origin_step[p], (long long)s);
        learner_rebase_adopt(L, p, payload, version);
        return;
    }
    if (L->frag_steps[p] > 0)
        cx_info("fragment %d: carrying %lld steps since step %lld from the checkpoint", p,
                (long long)L->frag_steps[p], (long long)L->origin_step[p]);
}

void learner_rebase_note_send(learner *L, const frag_msg *m)
{
    const fragment_range *r = fragment_ranges(L->ft, m->p);
    int nr = fragment_num_ranges(L->ft, m->p);
    const float *th = model_params(L->m);
    for (int j = 0; j < nr; j++)
        memcpy(L->sent + r[j].offset, th + r[j].offset, r[j].length * sizeof *th);
    L->send_step[m->p] = m->step;
    L->send_steps[m->p] = m->steps;
    L->send_tokens[m->p] = m->tokens;
}

void learner_rebase_drop_progress(learner *L)
{
    memcpy(L->sent, L->base, L->n * sizeof *L->sent); /* θ = Θ_base: nothing left to carry */
    for (int p = 0; p < L->P; p++) {
        L->lost_frag_steps += L->frag_steps[p] - L->send_steps[p];
        L->frag_steps[p] = L->frag_tokens[p] = 0;
        L->send_steps[p] = L->send_tokens[p] = 0;
        L->send_step[p] = -1; /* the next value taken carries nothing, counted from here */
        L->origin_step[p] = L->step;
    }
}

int64_t learner_rebase_unsent_steps(const learner *L, int p, int sent_accepted)
{
    return L->frag_steps[p] - (sent_accepted && L->send_step[p] >= 0 ? L->send_steps[p] : 0);
}
