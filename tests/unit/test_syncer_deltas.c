/* test_syncer_deltas.c - the syncer's deltas component
 * (trainer/syncer/deltas.h) without HTTP: a learner holding a kept version
 * gets the chain of encoded deltas that reproduces the current fragment
 * bit for bit; older versions, resyncs and f32 runs get the full fragment
 * with their reason; a gap in versions clears the history; reads are
 * counted and a learner's adoption of its own contribution noted. */
#include <criterion/criterion.h>
#include <math.h>

#include "common/clock.h"
#include "common/err.h"
#include "numerics/encoding.h"
#include "numerics/fragment.h"
#include "syncer_fixture.h"

static sfx f;
static int64_t inc[2]; /* incarnation of learners 0 and 1 */

static void join_both(void)
{
    for (int id = 0; id < 2; id++) {
        members_join_res r;
        cr_assert_eq(sfx_join(&f, id, 0, 0, &r), MEMBERS_JOIN_OK);
        inc[id] = r.incarnation;
    }
}

/* diloco, 2 learners, 2 fragments, int8 contributions (and so downstream
 * deltas); both joined */
static void setup_int8(void)
{
    sfx_start_ex(&f, CONFIG_MODE_DILOCO, 2, 2, CONFIG_ENC_INT8, SYNCER_LOST_REBUILD);
    join_both();
}

/* the same with f32 contributions: no deltas (a test's own .init runs
 * after the suite's: it replaces that syncer) */
static void setup_f32(void)
{
    sfx_stop(&f);
    sfx_start(&f, CONFIG_MODE_DILOCO, 2, 2);
    join_both();
}

static void teardown(void)
{
    sfx_stop(&f);
}

TestSuite(syncer_deltas, .init = setup_int8, .fini = teardown);

/* One merge of fragment p: both learners contribute `value` against its
 * current version and the round closes at its barrier. */
static void merge(int p, float value)
{
    int64_t v = f.s->versions[p], H = f.s->cfg.H;
    rounds_contribution c;
    for (int id = 0; id < 2; id++)
        cr_assert_eq(sfx_contribute(&f, id, inc[id], p, v, (v + 1) * H, value, &c), PROTO_OK, "%s", c.why);
    pthread_mutex_lock(&f.s->mu);
    rounds_check(f.s, p, cx_mono_ms());
    pthread_mutex_unlock(&f.s->mu);
    cr_assert_eq(f.s->versions[p], v + 1, "the round merged");
}

/* deltas_read of fragment p by learner id (-1: anonymous) holding newer
 * (mu taken here); vals gets the fragment. */
static void read_frag(int p, int64_t id, int64_t newer, int want_delta, int resync, float *vals,
                      deltas_answer *a)
{
    proto_hdr h = {.learner = id, .incarnation = id >= 0 ? inc[id] : -1};
    pthread_mutex_lock(&f.s->mu);
    deltas_read(f.s, p, &h, newer, want_delta, resync, vals, a);
    pthread_mutex_unlock(&f.s->mu);
}

static float *frag_alloc(int p)
{
    float *v = calloc(fragment_length(f.s->ft, p), sizeof *v);
    cr_assert_not_null(v);
    return v;
}

Test(syncer_deltas, a_kept_version_gets_the_chain_that_makes_the_current_fragment_bit_for_bit)
{
    int p = 0;
    size_t len = fragment_length(f.s->ft, p);
    float *held = frag_alloc(p), *cur = frag_alloc(p), *d = frag_alloc(p);
    deltas_answer a;
    merge(p, 1e-3f);
    read_frag(p, -1, -1, 0, 0, held, &a); /* a learner pulls version 1 in full */
    cr_assert_eq(a.version, 1);
    cr_assert_null(a.chain);
    cr_assert_eq(a.reason, FULL_PULL);
    merge(p, -2e-3f);
    merge(p, 5e-4f);

    read_frag(p, -1, 1, 1, 0, cur, &a);
    cr_assert(a.newer);
    cr_assert_eq(a.version, 3);
    cr_assert_not_null(a.chain, "versions 2 and 3 are kept: a chain, not reason %s",
                       deltas_full_reason_names[a.reason]);
    cr_assert_eq(a.chain_n, 2);
    cr_assert_lt(a.chain_len, len * 4, "smaller than the f32 fragment");
    cr_assert_eq(f.s->deltas.answers_delta, 1);
    cr_assert_eq(f.s->deltas.answers_delta_versions, 2);
    cr_assert_eq(f.s->deltas.bytes_out_delta, (int64_t)a.chain_len);
    cr_assert_eq(f.s->deltas.answers_full[FULL_PULL], 1, "the first read");

    /* the learner's f32 adds of the decoded deltas land on the syncer's canonical value */
    size_t off = 0, plen;
    const uint8_t *payload;
    int64_t version, want = 2;
    char err[CX_ERRLEN];
    int rc;
    while ((rc = proto_delta_next(a.chain, a.chain_len, &off, &version, &payload, &plen, err, sizeof err)) ==
           1) {
        cr_assert_eq(version, want++, "versions in order, no gap");
        cr_assert_eq(encoding_decode(ENCODING_INT8, payload, plen, d, len, err, sizeof err), 0, "%s", err);
        for (size_t i = 0; i < len; i++)
            held[i] += d[i];
    }
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_eq(want, 4);
    cr_assert_eq(memcmp(held, cur, len * sizeof *held), 0, "Θ_1 + d^_2 + d^_3 == Θ_3 exactly");
    free(a.chain);
    free(held), free(cur), free(d);
}

Test(syncer_deltas, a_version_older_than_the_kept_history_or_a_chain_too_big_gets_the_full_fragment)
{
    int p = 1;
    float *vals = frag_alloc(p);
    deltas_answer a;
    for (int k = 0; k < DELTA_HISTORY + 2; k++)
        merge(p, k % 2 ? 1e-3f : -1e-3f);
    const frag_hist *h = &f.s->deltas.hist[p];
    cr_assert_leq(h->n, DELTA_HISTORY);
    cr_assert_gt(h->n, 1);
    int64_t oldest = h->d[0].version; /* the first version whose delta is kept */
    cr_assert_gt(oldest, 2, "older deltas were dropped");
    read_frag(p, -1, oldest - 2, 1, 0, vals, &a);
    cr_assert_null(a.chain, "the delta to oldest - 1 is gone");
    cr_assert_eq(a.reason, FULL_HISTORY);
    cr_assert_eq(f.s->deltas.answers_full[FULL_HISTORY], 1);
    /* every kept delta: int8 deltas take about 1.06 bytes a value, and more than 4 are kept (the
     * byte cap is DELTA_HISTORY_F32X f32 fragments): bigger than the f32 fragment */
    cr_assert_gt(h->n, 4);
    read_frag(p, -1, oldest - 1, 1, 0, vals, &a);
    cr_assert_null(a.chain);
    cr_assert_eq(a.reason, FULL_SIZE);
    cr_assert_eq(f.s->deltas.answers_full[FULL_SIZE], 1);
    read_frag(p, -1, a.version - 2, 1, 0, vals, &a);
    cr_assert_not_null(a.chain, "the last two: %s", deltas_full_reason_names[a.reason]);
    cr_assert_eq(a.chain_n, 2);
    free(a.chain);
    /* without history (a rebuild, an encoding failure): full, reason history */
    pthread_mutex_lock(&f.s->mu);
    deltas_hist_clear(&f.s->deltas.hist[p]);
    pthread_mutex_unlock(&f.s->mu);
    cr_assert_eq(f.s->deltas.hist[p].n, 0);
    cr_assert_eq(f.s->deltas.hist[p].bytes, 0);
    read_frag(p, -1, a.version - 1, 1, 0, vals, &a);
    cr_assert_null(a.chain, "even the last version");
    cr_assert_eq(a.reason, FULL_HISTORY);
    cr_assert_eq(f.s->deltas.answers_full[FULL_HISTORY], 2);
    free(vals);
}

Test(syncer_deltas, a_resync_or_a_plain_pull_gets_the_full_fragment_with_its_reason)
{
    float *vals = frag_alloc(0);
    deltas_answer a;
    merge(0, 1e-3f);
    merge(0, 1e-3f);
    read_frag(0, -1, 1, 1, 1, vals, &a);
    cr_assert_null(a.chain, "resync: the delta result failed the learner's check");
    cr_assert_eq(a.reason, FULL_MISMATCH);
    read_frag(0, -1, 1, 0, 0, vals, &a);
    cr_assert_null(a.chain, "no delta=1");
    cr_assert_eq(a.reason, FULL_PULL);
    cr_assert_eq(f.s->deltas.answers_full[FULL_MISMATCH], 1);
    cr_assert_eq(f.s->deltas.answers_full[FULL_PULL], 1);
    cr_assert_eq(f.s->deltas.answers_delta, 0);
    size_t len = fragment_length(f.s->ft, 0);
    cr_assert_eq(f.s->deltas.bytes_out_full, (int64_t)(2 * len * 4));
    /* the values are the fragment's current ones */
    float *want = frag_alloc(0);
    fragment_gather(f.s->ft, 0, f.s->theta, want);
    cr_assert_eq(memcmp(vals, want, len * sizeof *vals), 0);
    free(vals), free(want);
}

Test(syncer_deltas, a_caller_holding_the_current_version_gets_nothing_and_nothing_is_counted)
{
    float *vals = frag_alloc(0);
    deltas_answer a;
    merge(0, 1e-3f);
    int64_t out = f.s->bytes_out;
    read_frag(0, 0, 1, 1, 0, vals, &a);
    cr_assert_not(a.newer);
    cr_assert_eq(a.version, 1);
    cr_assert_null(a.chain);
    cr_assert_not(a.record, "no pull happened");
    cr_assert_eq(f.s->bytes_out, out);
    cr_assert_eq(f.s->deltas.answers_delta + f.s->deltas.answers_full[FULL_PULL] +
                     f.s->deltas.answers_full[FULL_HISTORY],
                 0);
    free(vals);
}

Test(syncer_deltas, an_f32_run_answers_full_with_reason_f32, .init = setup_f32)
{
    float *vals = frag_alloc(0);
    deltas_answer a;
    merge(0, 1e-3f);
    merge(0, 1e-3f);
    cr_assert_eq(f.s->deltas.hist[0].n, 0, "nothing is encoded");
    read_frag(0, -1, 1, 1, 0, vals, &a);
    cr_assert_null(a.chain);
    cr_assert_eq(a.reason, FULL_UNENCODED);
    cr_assert_eq(f.s->deltas.answers_full[FULL_UNENCODED], 1);
    free(vals);
}

Test(syncer_deltas, a_gap_in_versions_clears_the_history)
{
    int p = 0;
    size_t len = fragment_length(f.s->ft, p);
    merge(p, 1e-3f);
    merge(p, 1e-3f);
    cr_assert_eq(f.s->deltas.hist[p].n, 2);
    cr_assert_eq(f.s->deltas.hist[p].d[1].version, 2);
    float *old = frag_alloc(p), *th = frag_alloc(p);
    for (size_t i = 0; i < len; i++)
        th[i] = 1e-2f;
    pthread_mutex_lock(&f.s->mu);
    deltas_encode(f.s, p, old, th, 5); /* version 5 after 2: 3 and 4 never kept */
    pthread_mutex_unlock(&f.s->mu);
    cr_assert_eq(f.s->deltas.hist[p].n, 1, "the chain restarts at the gap");
    cr_assert_eq(f.s->deltas.hist[p].d[0].version, 5);
    cr_assert_eq(f.s->deltas.hist[p].bytes, f.s->deltas.hist[p].d[0].len);
    /* th became the canonical Θ_V + d^: close to the exact value, not necessarily equal */
    for (size_t i = 0; i < len; i++)
        cr_assert(fabsf(th[i] - 1e-2f) < 1e-3f, "th[%zu] = %g", i, (double)th[i]);
    free(old), free(th);
}

Test(syncer_deltas, a_learners_pull_after_contributing_notes_whether_it_holds_its_own_work)
{
    float *vals = frag_alloc(0);
    deltas_answer a;
    merge(0, 1e-3f);
    int slot = -1;
    pthread_mutex_lock(&f.s->mu);
    cr_assert_eq(members_check(f.s, 0, inc[0], &slot), PROTO_OK);
    pthread_mutex_unlock(&f.s->mu);
    read_frag(0, 0, 0, 0, 0, vals, &a);
    cr_assert(a.record, "a current learner's pull: its event is due");
    cr_assert_eq(f.s->members.learners[slot].adopted, 1);
    cr_assert_eq(f.s->members.learners[slot].adopted_own, 1, "version 1 merged its contribution");
    read_frag(0, 0, 0, 0, 0, vals, &a);
    cr_assert_eq(f.s->members.learners[slot].adopted, 1, "noted once per contribution");
    read_frag(0, -1, 0, 0, 0, vals, &a);
    cr_assert_not(a.record, "an anonymous pull is not recorded");
    free(vals);
}
