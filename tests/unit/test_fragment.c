/* test_fragment.c - fragment tables cover every parameter exactly once, are
 * balanced, keep ranges inside tensors, agree across builds; gather/scatter
 * are inverse; the stagger schedule sends each fragment once per H steps.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "numerics/fragment.h"
#include "numerics/model.h"

static model *default_model(void)
{
    char err[CX_ERRLEN];
    model *m = model_new("mlp", NULL, 1, err, sizeof(err));
    cr_assert_not_null(m, "%s", err);
    return m;
}

/* Coverage, range sanity and balance of one table. */
static void check_table(const model_tensor *T, int nt, int P)
{
    char err[CX_ERRLEN];
    fragment_table *t = fragment_table_new(T, nt, P, err, sizeof(err));
    cr_assert_not_null(t, "P=%d: %s", P, err);
    size_t N = T[nt - 1].offset + T[nt - 1].length;
    cr_assert_eq(fragment_count(t), P);
    cr_assert_eq(fragment_total(t), N);
    unsigned char *hit = calloc(N, 1);
    size_t minlen = (size_t)-1, maxlen = 0, sum = 0;
    int split_ranges = 0;
    for (int p = 0; p < P; p++) {
        const fragment_range *r = fragment_ranges(t, p);
        size_t len = 0;
        for (int j = 0; j < fragment_num_ranges(t, p); j++) {
            cr_assert(r[j].length > 0);
            cr_assert(r[j].tensor >= 0 && r[j].tensor < nt);
            const model_tensor *x = &T[r[j].tensor];
            cr_assert(r[j].offset >= x->offset && r[j].offset + r[j].length <= x->offset + x->length,
                      "P=%d frag %d range %d leaves its tensor", P, p, j);
            if (j > 0)
                cr_assert(r[j].offset > r[j - 1].offset, "ranges sorted by offset");
            cr_assert_eq(fragment_range_is_embedding(t, p, j), x->is_embedding);
            if (r[j].length != x->length)
                split_ranges++;
            for (size_t i = r[j].offset; i < r[j].offset + r[j].length; i++) {
                cr_assert_eq(hit[i], 0, "P=%d: parameter %zu in two fragments", P, i);
                hit[i] = 1;
            }
            len += r[j].length;
        }
        cr_assert_eq(len, fragment_length(t, p));
        minlen = len < minlen ? len : minlen;
        maxlen = len > maxlen ? len : maxlen;
        sum += len;
    }
    cr_assert_eq(sum, N);
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(hit[i], 1, "P=%d: parameter %zu in no fragment", P, i);
    /* balanced: sizes differ by at most one float */
    cr_assert(maxlen - minlen <= 1, "P=%d: fragment sizes %zu..%zu", P, minlen, maxlen);
    /* tensors are split only where needed: each of the <= P-1 spills adds
     * one piece, so pieces of split tensors number <= 2(P-1) */
    cr_assert(split_ranges <= 2 * P, "P=%d: %d split ranges", P, split_ranges);
    free(hit);
    fragment_table_free(t);
}

Test(fragment, covers_every_parameter_once_and_is_balanced)
{
    model *m = default_model();
    const int Ps[] = {1, 2, 3, 4, 5, 7, 8, 16, 24, 64, 257, 1000, 4096};
    for (size_t i = 0; i < sizeof(Ps) / sizeof(Ps[0]); i++)
        check_table(model_tensors(m), model_num_tensors(m), Ps[i]);
    model_free(m);
    /* a table where P equals N: one float per fragment */
    model_tensor tiny[3] = {{"a", 0, 3, 1, 3, 1, 1}, {"b", 3, 1, 1, 1, 0, 0}, {"c", 4, 2, 1, 2, 0, 1}};
    for (int P = 1; P <= 6; P++)
        check_table(tiny, 3, P);
}

Test(fragment, small_tensors_stay_whole)
{
    /* default model, P=8: fragment size 12864; wte (4096), b1 and b2 (256)
     * fit whole and must not be split */
    model *m = default_model();
    char err[CX_ERRLEN];
    fragment_table *t = fragment_table_new(model_tensors(m), model_num_tensors(m), 8, err, sizeof(err));
    cr_assert_not_null(t, "%s", err);
    int whole[5] = {0};
    for (int p = 0; p < 8; p++)
        for (int j = 0; j < fragment_num_ranges(t, p); j++) {
            const fragment_range *r = &fragment_ranges(t, p)[j];
            if (r->length == model_tensor_get(m, r->tensor)->length)
                whole[r->tensor]++;
        }
    cr_assert(whole[0] == 1 && whole[2] == 1 && whole[4] == 1, "wte %d b1 %d b2 %d", whole[0], whole[2],
              whole[4]);
    fragment_table_free(t);
    model_free(m);
}

Test(fragment, gather_scatter_are_inverse)
{
    model *m = default_model();
    char err[CX_ERRLEN];
    size_t N = model_num_params(m);
    for (int P = 1; P <= 16; P *= 4) {
        fragment_table *t = fragment_table_new(model_tensors(m), model_num_tensors(m), P, err, sizeof(err));
        float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
        for (size_t i = 0; i < N; i++)
            x[i] = (float)i;
        /* gather then scatter into a blank vector, fragment by fragment: x */
        memset(y, 0, N * sizeof(float));
        for (int p = 0; p < P; p++) {
            float *pl = malloc(fragment_length(t, p) * sizeof(float));
            fragment_gather(t, p, x, pl);
            /* payload order = ranges in order */
            const fragment_range *r = fragment_ranges(t, p);
            cr_assert_eq(pl[0], (float)r[0].offset);
            fragment_scatter(t, p, pl, y);
            /* scatter then gather returns the payload */
            for (size_t i = 0; i < fragment_length(t, p); i++)
                pl[i] = -1.0f - (float)i;
            fragment_scatter(t, p, pl, x);
            float *back = malloc(fragment_length(t, p) * sizeof(float));
            fragment_gather(t, p, x, back);
            cr_assert(memcmp(back, pl, fragment_length(t, p) * sizeof(float)) == 0);
            fragment_gather(t, p, y, pl); /* restore x's fragment p from y */
            fragment_scatter(t, p, pl, x);
            free(back);
            free(pl);
        }
        for (size_t i = 0; i < N; i++)
            cr_assert_eq(y[i], (float)i, "P=%d: element %zu", P, i);
        free(x);
        free(y);
        fragment_table_free(t);
    }
    model_free(m);
}

Test(fragment, digest_identifies_the_table)
{
    model *m = default_model();
    char err[CX_ERRLEN];
    const model_tensor *T = model_tensors(m);
    int nt = model_num_tensors(m);
    fragment_table *a = fragment_table_new(T, nt, 8, err, sizeof(err));
    fragment_table *b = fragment_table_new(T, nt, 8, err, sizeof(err));
    fragment_table *c = fragment_table_new(T, nt, 9, err, sizeof(err));
    cr_assert_eq(fragment_table_digest(a), fragment_table_digest(b));
    cr_assert_neq(fragment_table_digest(a), fragment_table_digest(c));
    fragment_table_free(a);
    fragment_table_free(b);
    fragment_table_free(c);
    fragment_table_free(NULL);
    model_free(m);
}

Test(fragment, bad_input_is_rejected)
{
    char err[CX_ERRLEN] = "";
    model_tensor gap[2] = {{"a", 0, 3, 1, 3, 0, 0}, {"b", 4, 1, 1, 1, 0, 0}};
    cr_assert_null(fragment_table_new(gap, 2, 1, err, sizeof(err)));
    cr_assert(strstr(err, "'b'") != NULL, "%s", err);
    model_tensor ok[1] = {{"a", 0, 3, 1, 3, 0, 0}};
    cr_assert_null(fragment_table_new(ok, 1, 0, err, sizeof(err)));
    cr_assert_null(fragment_table_new(ok, 1, 4, err, sizeof(err))); /* P > N */
    cr_assert(strstr(err, "P=4") != NULL, "%s", err);
    cr_assert_null(fragment_table_new(ok, 0, 1, err, sizeof(err)));
}

Test(fragment, stagger_sends_each_fragment_once_per_H_steps)
{
    const int cases[][2] = {{8, 8}, {24, 8}, {12, 5}, {30, 4}, {1, 1}, {4, 1}, {3, 7}, {10, 10}, {100, 3}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        int H = cases[c][0], P = cases[c][1];
        int due[64], *count = calloc((size_t)P, sizeof(int));
        /* any window of H consecutive steps sends every fragment exactly once */
        for (int64_t start = 1; start <= 3 * H; start++) {
            memset(count, 0, (size_t)P * sizeof(int));
            for (int64_t s = start; s < start + H; s++) {
                int n = fragment_due(s, H, P, due, 64);
                if (P <= H)
                    cr_assert(n <= 1, "H=%d P=%d step %lld: %d fragments", H, P, (long long)s, n);
                for (int i = 0; i < n; i++) {
                    cr_assert(due[i] >= 0 && due[i] < P);
                    if (i > 0)
                        cr_assert(due[i] > due[i - 1]);
                    count[due[i]]++;
                }
            }
            for (int p = 0; p < P; p++)
                cr_assert_eq(count[p], 1, "H=%d P=%d window at %lld: fragment %d sent %d times", H, P,
                             (long long)start, p, count[p]);
        }
        /* the schedule matches the documented offsets: fragment p at s = o_p mod H */
        for (int p = 0; p < P; p++) {
            int o = fragment_stagger_offset(p, H, P);
            cr_assert(o >= 0 && o < H);
            int64_t s = o == 0 ? H : o;
            int n = fragment_due(s, H, P, due, 64), found = 0;
            for (int i = 0; i < n; i++)
                found |= due[i] == p;
            cr_assert(found, "H=%d P=%d: fragment %d not due at step %lld", H, P, p, (long long)s);
        }
        free(count);
    }
    /* offsets spread by H/P: P=4, H=24 -> 0, 6, 12, 18 */
    for (int p = 0; p < 4; p++)
        cr_assert_eq(fragment_stagger_offset(p, 24, 4), 6 * p);
    int due[4];
    cr_assert_eq(fragment_due(0, 8, 8, due, 4), 0);
    cr_assert_eq(fragment_due(5, 0, 8, due, 4), 0);
    /* count beyond cap is reported, only cap written */
    due[1] = 12345;
    cr_assert_eq(fragment_due(2, 2, 8, due, 1), 4);
    cr_assert_eq(due[1], 12345);
}

Test(fragment, round_counts_the_due_steps_of_each_fragment)
{
    int H = 24, P = 4;
    for (int p = 0; p < P; p++) {
        int64_t seen = 0;
        for (int64_t s = 1; s <= 10 * H; s++) {
            int due[8], nd = fragment_due(s, H, P, due, 8), is_due = 0;
            for (int i = 0; i < nd; i++)
                is_due |= due[i] == p;
            seen += is_due;
            cr_assert_eq(fragment_round(s, p, H, P), seen, "p=%d step=%lld", p, (long long)s);
            if (is_due)
                cr_assert_eq(fragment_round_step(seen, p, H, P), s, "p=%d round %lld", p, (long long)seen);
        }
        cr_assert_eq(seen, 10, "p=%d is due once per H steps", p);
    }
    cr_assert_eq(fragment_round(0, 1, H, P), 0);
    cr_assert_eq(fragment_round_step(0, 1, H, P), -1);
}
