/* rounds_pace.c - how fast the learners go, as the rounds see it
 * (rounds.h): the grace window of a round reaching its quorum and the
 * stagger schedule's position for a joining learner.
 *
 * What it is: estimates from the learners' measured pace (their wall time
 * per inner step between contributions, members_note_pace; their reported
 * step_ms and pull round trips) and the round's timing EMAs. What it is
 * not: a writer; it reads s->members and s->rounds (mu held), and rounds.c
 * applies what it returns.
 */
#include <math.h>

#include "numerics/merge.h"
#include "trainer/syncer/core.h"

/* The grace window of round p reaching its quorum now (mu held):
 * clamp(γ·(τ·t_step − (t_quorum + t_sync)), 0, cap) with, all EMAs,
 *   t_step   the active learners' mean wall time per inner step, measured
 *            here between each learner's contributions (schedule steps
 *            between two rounds it named / ms between their arrivals);
 *            their heartbeat step_ms until there is a sample;
 *   t_quorum ms from the first to the K-th arrival of p's rounds;
 *   t_sync   ms of p's merges plus the active learners' mean reported pull
 *            round trip (what it takes the merged value to reach them).
 * τ·t_step is the time between a learner sending p and needing its merged
 * value (τ steps of overlap); γ < 1 takes only part of what is left. */
static void learner_timings(const syncer *s, double *t_step, double *t_pull)
{
    double step = 0, pull = 0;
    int ns = 0, np = 0;
    for (int i = 0; i < MAX_LEARNERS; i++) {
        const learner_rec *l = &s->members.learners[i];
        if (l->id < 0 || l->state != LS_ACTIVE)
            continue;
        double t = merge_ema_get(&l->step_wall, l->step_ms);
        if (t > 0) {
            step += t;
            ns++;
        }
        if (l->pull_ms > 0) {
            pull += l->pull_ms;
            np++;
        }
    }
    *t_step = ns ? step / ns : 0;
    *t_pull = np ? pull / np : 0;
}

double rounds_grace_ms(const syncer *s, int p)
{
    const frag_round *r = &s->rounds.frag[p];
    double t_step, t_pull;
    learner_timings(s, &t_step, &t_pull);
    return merge_grace_ms(s->cfg.grace_gamma, (int)s->cfg.tau, t_step, merge_ema_get(&r->t_quorum, 0),
                          merge_ema_get(&r->t_sync, 0) + t_pull, (double)s->cfg.grace_cap_ms);
}

/* Where the stagger schedule is now (mu held): the mean over the active
 * learners other than slot `except` that named a round since they joined
 * of their schedule step then plus the steps they have run since at their
 * measured pace; 0 when no learner gives an estimate. A joining learner
 * takes it as its schedule position, so that its round r of fragment p
 * comes due when everyone else's does (a learner that started or
 * restarted later would otherwise be late for every round of the run). */
int64_t rounds_schedule_step_now(const syncer *s, int except, int64_t now)
{
    double sum = 0;
    int n = 0;
    for (int i = 0; i < MAX_LEARNERS; i++) {
        const learner_rec *l = &s->members.learners[i];
        double t = merge_ema_get(&l->step_wall, 0);
        if (i == except || l->id < 0 || l->state != LS_ACTIVE || l->c_ms == 0 || !(t > 0))
            continue;
        /* a live learner names a round at least every H steps: extrapolate no further */
        double ahead = (double)(now - l->c_ms) / t;
        sum += (double)l->c_step + (ahead < (double)s->cfg.H ? ahead : (double)s->cfg.H);
        n++;
    }
    return n ? (int64_t)llround(sum / n) : 0;
}
