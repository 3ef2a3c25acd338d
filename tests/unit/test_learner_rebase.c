/* test_learner_rebase.c - the learner's mode-independent contribution
 * bookkeeping (trainer/learner/rebase.h), without a process or a syncer:
 * adopting a global fragment, a send, the rebase on a merged value after an
 * accepted or a refused contribution, the unsent steps, and dropping the
 * progress. Every trained step is in exactly one accepted contribution.
 * The values are small binary fractions, so the float sums are exact.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "numerics/fragment.h"
#include "numerics/model.h"
#include "trainer/learner/core.h"
#include "trainer/learner/rebase.h"

#define NFRAG 4

static learner *L;

/* A learner with the mlp model split into P fragments, Θ_base = θ = 1 and
 * every fragment adopted at version 1, step 0 (what a fresh join leaves). */
static void setup(void)
{
    char err[CX_ERRLEN];
    L = calloc(1, sizeof *L);
    cr_assert_not_null(L);
    L->m = model_new("mlp", NULL, 1, err, sizeof err);
    cr_assert_not_null(L->m, "%s", err);
    L->n = model_num_params(L->m);
    L->P = NFRAG;
    L->ft = fragment_table_new(model_tensors(L->m), model_num_tensors(L->m), NFRAG, err, sizeof err);
    cr_assert_not_null(L->ft, "%s", err);
    L->base = malloc(L->n * sizeof(float));
    cr_assert_eq(learner_rebase_init(L), 0);
    float *ones = malloc(L->n * sizeof(float));
    for (size_t i = 0; i < L->n; i++)
        ones[i] = 1.0f;
    for (int p = 0; p < NFRAG; p++) {
        float *frag = malloc(fragment_length(L->ft, p) * sizeof(float));
        fragment_gather(L->ft, p, ones, frag);
        learner_rebase_adopt(L, p, frag, 1);
        free(frag);
    }
    free(ones);
}

static void teardown(void)
{
    model_free(L->m);
    fragment_table_free(L->ft);
    free(L->base);
    learner_rebase_cleanup(L);
    free(L);
}

/* Train `steps` steps of `batch` tokens in which every parameter moves by d. */
static void train(int64_t steps, int64_t batch, float d)
{
    float *th = model_params(L->m);
    for (size_t i = 0; i < L->n; i++)
        th[i] += d;
    L->step += steps;
    learner_rebase_count_steps(L, steps, steps * batch);
}

/* Fragment p's global value G = v everywhere (a merged fragment). */
static float *global_value(int p, float v)
{
    size_t len = fragment_length(L->ft, p);
    float *g = malloc(len * sizeof *g);
    for (size_t i = 0; i < len; i++)
        g[i] = v;
    return g;
}

/* Every element of fragment p in x equals v. */
static void assert_fragment(const float *x, int p, float v, const char *what)
{
    size_t len = fragment_length(L->ft, p);
    float *got = malloc(len * sizeof *got);
    fragment_gather(L->ft, p, x, got);
    for (size_t i = 0; i < len; i++)
        cr_assert_eq(got[i], v, "%s of fragment %d [%zu]: %g, want %g", what, p, i, got[i], v);
    free(got);
}

/* Hand fragment p's contribution of everything since origin to the syncer. */
static void send(int p)
{
    frag_msg m = {p, L->rb.base_version[p], L->rb.frag_tokens[p], L->rb.frag_steps[p], NULL, 0, 0, L->step};
    learner_rebase_note_send(L, &m);
}

TestSuite(learner_rebase, .init = setup, .fini = teardown);

Test(learner_rebase, adopt_takes_the_global_value_and_restarts_the_counters)
{
    train(7, 2, 0.5f);
    float *g = global_value(1, 3.0f);
    learner_rebase_adopt(L, 1, g, 5);
    free(g);
    assert_fragment(model_params(L->m), 1, 3.0f, "θ");
    assert_fragment(L->base, 1, 3.0f, "Θ_base");
    cr_assert_eq(L->rb.base_version[1], 5);
    cr_assert_eq(L->rb.frag_steps[1], 0);
    cr_assert_eq(L->rb.frag_tokens[1], 0);
    cr_assert_eq(L->rb.origin_step[1], 7);
    cr_assert_eq(L->rb.send_step[1], -1);
    /* the other fragments keep their progress */
    assert_fragment(model_params(L->m), 0, 1.5f, "θ");
    assert_fragment(L->base, 0, 1.0f, "Θ_base");
    cr_assert_eq(L->rb.frag_steps[0], 7);
}

/* Accepted: the merged value holds the sent steps; only the steps trained
 * since the send are carried, and counted from the send. */
Test(learner_rebase, an_accepted_send_carries_only_the_steps_after_it)
{
    train(10, 2, 0.5f); /* θ = 1.5 */
    send(2);
    cr_assert_eq(L->rb.send_step[2], 10);
    cr_assert_eq(learner_rebase_unsent_steps(L, 2, 1), 0, "everything is in the accepted send");
    cr_assert_eq(learner_rebase_unsent_steps(L, 2, 0), 10, "not accepted (yet): all of it is unsent");
    train(4, 2, 0.25f); /* θ = 1.75: 0.25 since the send */
    cr_assert_eq(learner_rebase_unsent_steps(L, 2, 1), 4);
    float *g = global_value(2, 4.0f);
    learner_rebase_apply(L, 2, g, 2, 1);
    free(g);
    assert_fragment(model_params(L->m), 2, 4.25f, "θ");
    assert_fragment(L->base, 2, 4.0f, "Θ_base");
    cr_assert_eq(L->rb.base_version[2], 2);
    cr_assert_eq(L->rb.frag_steps[2], 4);
    cr_assert_eq(L->rb.frag_tokens[2], 8);
    cr_assert_eq(L->rb.origin_step[2], 10);
    cr_assert_eq(L->rb.send_step[2], -1);
    cr_assert_eq(learner_rebase_unsent_steps(L, 2, 1), 4, "no send in flight any more");
}

/* Refused (or dropped before it was sent): the merged value holds none of
 * it, so everything since origin is carried and counted. */
Test(learner_rebase, a_refused_send_carries_everything_since_origin)
{
    train(10, 2, 0.5f);
    send(3);
    train(4, 2, 0.25f); /* θ − Θ_base = 0.75 */
    float *g = global_value(3, 4.0f);
    learner_rebase_apply(L, 3, g, 2, 0);
    free(g);
    assert_fragment(model_params(L->m), 3, 4.75f, "θ");
    assert_fragment(L->base, 3, 4.0f, "Θ_base");
    cr_assert_eq(L->rb.frag_steps[3], 14);
    cr_assert_eq(L->rb.frag_tokens[3], 28);
    cr_assert_eq(L->rb.origin_step[3], 0);
    cr_assert_eq(L->rb.send_step[3], -1);
}

/* Accepted but no send noted (a value that came without one of ours):
 * nothing is subtracted. */
Test(learner_rebase, accepted_without_a_send_keeps_the_counters)
{
    train(6, 1, 0.5f);
    float *g = global_value(0, 2.0f);
    learner_rebase_apply(L, 0, g, 3, 1);
    free(g);
    assert_fragment(model_params(L->m), 0, 2.5f, "θ");
    cr_assert_eq(L->rb.frag_steps[0], 6);
    cr_assert_eq(L->rb.origin_step[0], 0);
}

/* Non-finite parameters: θ is reset to Θ_base by the caller; every step not
 * in a send is lost and counted once. */
Test(learner_rebase, dropping_the_progress_counts_what_is_lost)
{
    train(10, 2, 0.5f);
    send(1);
    train(3, 2, 0.5f);
    memcpy(model_params(L->m), L->base, L->n * sizeof(float));
    learner_rebase_drop_progress(L);
    /* fragment 1 had 13 steps of which its send carried 10; the others 13 */
    cr_assert_eq(L->rb.lost_frag_steps, 3 + 3 * 13);
    for (int p = 0; p < NFRAG; p++) {
        cr_assert_eq(L->rb.frag_steps[p], 0);
        cr_assert_eq(L->rb.frag_tokens[p], 0);
        cr_assert_eq(L->rb.send_step[p], -1);
        cr_assert_eq(L->rb.origin_step[p], 13);
        assert_fragment(L->rb.sent, p, 1.0f, "sent");
        cr_assert_eq(learner_rebase_unsent_steps(L, p, 1), 0);
    }
    /* the next value carries nothing */
    float *g = global_value(1, 2.0f);
    learner_rebase_apply(L, 1, g, 4, 1);
    free(g);
    assert_fragment(model_params(L->m), 1, 2.0f, "θ");
}
