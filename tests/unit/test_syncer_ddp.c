/* test_syncer_ddp.c - the syncer's ddp component (trainer/syncer/ddp.h)
 * without HTTP: a step completes once every learner's gradient is in, with
 * their mean, one AdamW step of the global parameters and a new version; a
 * retry adds nothing and gets the mean again; a gradient for a step other
 * than the open one is refused as behind or ahead; ddp-elastic closes a
 * step at its deadline without the late learner. */
#include <criterion/criterion.h>
#include <math.h>

#include "common/clock.h"
#include "numerics/optim.h"
#include "syncer_fixture.h"

static sfx f;
static int64_t inc[2]; /* incarnation of learners 0 and 1 */
static int slot[2];    /* their slots */

static void join_both(void)
{
    for (int id = 0; id < 2; id++) {
        members_join_res r;
        cr_assert_eq(sfx_join(&f, id, 0, 0, &r), MEMBERS_JOIN_OK);
        inc[id] = r.incarnation;
        slot[id] = r.slot;
    }
}

/* ddp, 2 learners, both joined */
static void setup(void)
{
    sfx_start(&f, CONFIG_MODE_DDP, 2, 1);
    join_both();
}

/* ddp-elastic, the same (a test's own .init runs after the suite's: it
 * replaces that syncer) */
static void setup_elastic(void)
{
    sfx_stop(&f);
    sfx_start(&f, CONFIG_MODE_DDP_ELASTIC, 2, 1);
    join_both();
}

static void teardown(void)
{
    sfx_stop(&f);
}

TestSuite(syncer_ddp, .init = setup, .fini = teardown);

/* Learner id's gradient of step t, every value `value`, unscaled (mu taken
 * here). */
static ddp_gradient_verdict grad(int id, int64_t t, float value)
{
    float *g = malloc(f.s->n * sizeof *g);
    cr_assert_not_null(g);
    for (size_t i = 0; i < f.s->n; i++)
        g[i] = value;
    proto_hdr h = {.learner = id, .incarnation = inc[id], .step = t};
    pthread_mutex_lock(&f.s->mu);
    ddp_gradient_verdict v = ddp_gradient(f.s, slot[id], &h, t, g, 1.0, 0.0);
    pthread_mutex_unlock(&f.s->mu);
    free(g);
    return v;
}

/* ddp_outcome of step t for learner id naming incarnation in (mu taken here). */
static ddp_gradient_verdict outcome(int id, int64_t t, int64_t in)
{
    pthread_mutex_lock(&f.s->mu);
    ddp_gradient_verdict v = ddp_outcome(f.s, slot[id], t, in);
    pthread_mutex_unlock(&f.s->mu);
    return v;
}

Test(syncer_ddp, a_step_completes_with_the_mean_once_every_gradient_is_in)
{
    float *before = malloc(f.s->n * sizeof *before);
    cr_assert_not_null(before);
    memcpy(before, f.s->theta, f.s->n * sizeof *before);

    cr_assert_eq(grad(0, 0, 1.0f), DDP_GRAD_ADDED);
    cr_assert_eq(outcome(0, 0, inc[0]), DDP_GRAD_ADDED, "one of two: the step is still open");
    cr_assert_eq(f.s->ddp.count, 1);
    cr_assert_eq(f.s->ddp.step, 0);
    cr_assert_eq(f.s->versions[0], 0);
    cr_assert_eq(adamw_steps(f.s->opt), 0);
    cr_assert_eq(memcmp(before, f.s->theta, f.s->n * sizeof *before), 0, "nothing applied yet");

    cr_assert_eq(grad(1, 0, 3.0f), DDP_GRAD_ADDED);
    cr_assert_eq(f.s->ddp.step, 1, "the barrier completed step 0");
    cr_assert_eq(f.s->ddp.mean_step, 0);
    cr_assert_eq(f.s->ddp.count, 0);
    cr_assert_eq(f.s->versions[0], 1);
    cr_assert_eq(f.s->merges, 1);
    cr_assert_eq(f.s->accepted_total, 2);
    for (int id = 0; id < 2; id++)
        cr_assert_eq(outcome(id, 0, inc[id]), DDP_GRAD_MEAN);
    cr_assert_eq(outcome(0, 0, inc[0] + 1), DDP_GRAD_BEHIND, "another incarnation's gradient made it");

    /* the mean, as computed and as sent; one AdamW step on it */
    float wire[1];
    for (size_t i = 0; i < f.s->n; i++) {
        cr_assert_float_eq(f.s->ddp.mean[i], 2.0f, 1e-6f);
        proto_f32_decode(f.s->ddp.mean_wire + 4 * i, 1, wire);
        cr_assert_eq(wire[0], f.s->ddp.mean[i]);
    }
    cr_assert_eq(adamw_steps(f.s->opt), 1);
    const config *c = &f.s->cfg;
    float lr = optim_lr_at(0, c->warmup, c->steps, (float)c->inner_lr, (float)(c->inner_lr * 0.1));
    cr_assert_gt(lr, 0.0f);
    for (size_t i = 0; i < f.s->n; i++) {
        /* m = (1 - beta1) g from zero; the first step moves each parameter by lr against the sign of
         * its gradient (bias-corrected m / sqrt(v) = 1), plus at most the decay lr * wd * |theta| */
        cr_assert_float_eq(adamw_m(f.s->opt)[i], 0.1f * 2.0f, 1e-6f);
        double moved = (double)before[i] - (double)f.s->theta[i];
        cr_assert_leq(fabs(moved - lr), lr * (c->weight_decay * fabs(before[i]) + 1e-3), "param %zu moved %g",
                      i, moved);
    }
    free(before);
}

Test(syncer_ddp, a_retry_adds_nothing_and_after_its_step_completed_gets_the_mean_again)
{
    cr_assert_eq(grad(0, 0, 1.0f), DDP_GRAD_ADDED);
    cr_assert_eq(grad(0, 0, 1.0f), DDP_GRAD_ADDED, "a retry of the open step");
    cr_assert_eq(f.s->ddp.count, 1, "counted once");
    cr_assert_eq(f.s->accepted_total, 1);
    cr_assert_eq(f.s->ddp.step, 0, "one learner of two: not complete");
    cr_assert_eq(grad(1, 0, 1.0f), DDP_GRAD_ADDED);
    cr_assert_eq(f.s->ddp.step, 1);
    for (size_t i = 0; i < f.s->n; i++)
        cr_assert_float_eq(f.s->ddp.mean[i], 1.0f, 1e-6f, "the retry was not summed twice");

    cr_assert_eq(grad(0, 0, 5.0f), DDP_GRAD_MEAN, "a retry after the step completed");
    cr_assert_eq(f.s->ddp.step, 1);
    cr_assert_eq(f.s->ddp.count, 0, "nothing added to step 1");
    cr_assert_eq(adamw_steps(f.s->opt), 1);

    /* the next step completes in turn and the optimizer advances again */
    cr_assert_eq(grad(0, 1, -1.0f), DDP_GRAD_ADDED);
    cr_assert_eq(grad(1, 1, -1.0f), DDP_GRAD_ADDED);
    cr_assert_eq(f.s->ddp.mean_step, 1);
    cr_assert_eq(f.s->versions[0], 2);
    cr_assert_eq(adamw_steps(f.s->opt), 2);
}

Test(syncer_ddp, a_gradient_for_a_step_other_than_the_open_one_is_refused)
{
    cr_assert_eq(grad(0, 3, 1.0f), DDP_GRAD_AHEAD);
    cr_assert_eq(f.s->ddp.count, 0, "nothing added");
    cr_assert_eq(f.s->members.learners[slot[0]].ddp_arrived, -1);
    cr_assert_eq(grad(0, 0, 1.0f), DDP_GRAD_ADDED);
    cr_assert_eq(grad(1, 0, 1.0f), DDP_GRAD_ADDED);
    cr_assert_eq(f.s->ddp.step, 1);
    cr_assert_eq(grad(1, 2, 1.0f), DDP_GRAD_AHEAD);
    cr_assert_eq(f.s->ddp.count, 0);
    cr_assert_eq(f.s->accepted_total, 2);
}

Test(syncer_ddp, ddp_elastic_closes_a_step_at_its_deadline_without_the_late_learner, .init = setup_elastic)
{
    cr_assert_eq(grad(0, 0, 1.0f), DDP_GRAD_ADDED);
    pthread_mutex_lock(&f.s->mu);
    int64_t first = f.s->ddp.first_ms, deadline = ddp_deadline_ms(f.s);
    cr_assert_eq(deadline, DDP_AUTO_INITIAL_MS, "no compute times yet");
    ddp_check(f.s, first + deadline - 1);
    cr_assert_eq(f.s->ddp.step, 0, "before the deadline the step waits");
    ddp_check(f.s, first + deadline);
    pthread_mutex_unlock(&f.s->mu);
    cr_assert_eq(f.s->ddp.step, 1, "closed at the deadline");
    cr_assert_eq(f.s->members.learners[slot[1]].ddp_dropped, 0, "learner 1 dropped from step 0");
    for (size_t i = 0; i < f.s->n; i++)
        cr_assert_float_eq(f.s->ddp.mean[i], 1.0f, 1e-6f, "the mean of who came");

    cr_assert_eq(grad(1, 0, 1.0f), DDP_GRAD_BEHIND, "its step closed without it");
    cr_assert_eq(outcome(1, 0, inc[1]), DDP_GRAD_BEHIND);
    cr_assert_eq(outcome(0, 0, inc[0]), DDP_GRAD_MEAN);
    cr_assert_eq(f.s->ddp.count, 0);
    cr_assert_eq(f.s->accepted_total, 1);
}
