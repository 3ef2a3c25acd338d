/* test_schedule.c - target resolution and seeded Poisson chaos draws. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "harness/schedule.h"

/* The experiment and the schedule a test builds from it; the suite's .fini
 * frees them, also after a failed assertion. */
static experiment *e;
static schedule *s;

static void teardown(void) {}

TestSuite(schedule, .fini = teardown);

static experiment *parse(const char *text)
{
    jv_diag *d = jv_diag_new();
    experiment *out = NULL;
    char err[CX_ERRLEN];
    int rc = exp_load_string(text, 0, &out, d, err, sizeof(err));
    for (size_t i = 0; rc && i < jv_diag_count(d); i++)
        fprintf(stderr, "diag: %s\n", jv_diag_get(d, i));
    jv_diag_free(d);
    cr_assert_eq(rc, 0, "%s", err);
    return out;
}

static schedule *build(const experiment *x, uint64_t seed)
{
    schedule *out = NULL;
    char err[CX_ERRLEN];
    cr_assert_eq(sched_build(x, seed, &out, err, sizeof(err)), 0, "%s", err);
    return out;
}

/* Chaos over 4 learners; min_live and mtbf substituted. */
static experiment *chaos_exp(int learners, double mtbf, const char *recovery, int min_live, double end_s,
                             const char *faults)
{
    char text[2048];
    snprintf(text, sizeof(text),
             "{\"title\": \"c\", \"seed\": 5, \"topology\": {\"learners\": %d}, \"chaos\": {\"mtbf_s\": %g, "
             "\"recovery\": %s, \"faults\": %s, \"min_live\": %d, \"end_s\": %g}}",
             learners, mtbf, recovery, faults, min_live, end_s);
    return parse(text);
}

static int same_entries(const schedule *a, const schedule *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++) {
        const sched_entry *x = &a->entries[i], *y = &b->entries[i];
        if (x->learner != y->learner || x->at_s != y->at_s || x->duration_ms != y->duration_ms ||
            strcmp(x->fault, y->fault) != 0 || x->seed != y->seed)
            return 0;
    }
    return 1;
}

Test(schedule, ids_and_times_resolve)
{
    e = parse("{\"title\": \"t\", \"topology\": {\"learners\": 4}, \"method\": ["
              "{\"name\": \"late\", \"fault\": \"pause\", \"targets\": {\"ids\": [3, 1]}, \"at_s\": 20,"
              " \"duration_ms\": 1000},"
              "{\"name\": \"early\", \"fault\": \"pause\", \"targets\": {\"ids\": [0]}, \"at_s\": 2,"
              " \"duration_ms\": 500},"
              "{\"name\": \"step\", \"fault\": \"pause\", \"targets\": {\"ids\": [2]}, \"at_outer_step\": 7,"
              " \"duration_ms\": 500},"
              "{\"name\": \"then\", \"fault\": \"pause\", \"targets\": {\"ids\": [2]}, \"after\": \"late\","
              " \"duration_ms\": 500}]}");
    s = build(e, e->seed);
    cr_assert_eq(s->n, 5);
    cr_assert_str_eq(s->entries[0].name, "early");
    cr_assert_eq(s->entries[0].learner, 0);
    cr_assert_str_eq(s->entries[1].name, "late");
    cr_assert_eq(s->entries[1].learner, 1, "same time and action: by learner id");
    cr_assert_str_eq(s->entries[2].name, "late");
    cr_assert_eq(s->entries[2].learner, 3);
    cr_assert_neq(s->entries[1].seed, s->entries[2].seed, "one seed per target");
    cr_assert_eq(s->entries[3].when, EXP_AT_OUTER_STEP);
    cr_assert_eq(s->entries[3].at_outer_step, 7);
    cr_assert_eq(s->entries[4].when, EXP_AFTER);
    cr_assert_eq(s->entries[4].after, 0);
}

Test(schedule, random_targets_reproducible_and_seeded)
{
    e = parse("{\"title\": \"t\", \"topology\": {\"learners\": 16}, \"method\": ["
              "{\"name\": \"r\", \"fault\": \"pause\", \"targets\": {\"random\": 5}, \"at_s\": 1,"
              " \"duration_ms\": 10},"
              "{\"name\": \"p\", \"fault\": \"pause\", \"targets\": {\"percent\": 30}, \"at_s\": 1,"
              " \"duration_ms\": 10}]}");
    int a[16], b[16];
    int n = sched_resolve_targets(e, 0, 42, a, 16);
    cr_assert_eq(n, 5);
    cr_assert_eq(sched_resolve_targets(e, 0, 42, b, 16), 5);
    cr_assert_arr_eq(a, b, 5 * sizeof(int), "same seed, same learners");
    for (int i = 0; i < n; i++) {
        cr_assert(a[i] >= 0 && a[i] < 16);
        for (int j = 0; j < i; j++)
            cr_assert_neq(a[i], a[j], "distinct");
    }
    int differs = 0;
    for (uint64_t seed = 43; seed < 53 && !differs; seed++) {
        sched_resolve_targets(e, 0, seed, b, 16);
        differs = memcmp(a, b, 5 * sizeof(int)) != 0;
    }
    cr_assert(differs, "another seed draws other learners");
    cr_assert_eq(sched_resolve_targets(e, 1, 42, a, 16), 5, "ceil(30%% of 16) = 5");
}

Test(schedule, poisson_reproducible_for_a_seed)
{
    e = chaos_exp(4, 20, "{\"dist\": \"exponential\", \"mean_s\": 4}", 0, 600,
                  "[{\"type\": \"pause\"}, {\"type\": \"kill\"}]");
    schedule *a = build(e, 5), *b = build(e, 5), *c = build(e, 6);
    cr_assert(a->chaos_drawn > 20, "drew %d", a->chaos_drawn);
    cr_assert(same_entries(a, b), "same seed, same timeline");
    cr_assert(!same_entries(a, c), "another seed, another timeline");
    for (int i = 1; i < a->n; i++)
        cr_assert(a->entries[i - 1].at_s <= a->entries[i].at_s, "sorted by time");
    for (int i = 0; i < a->n; i++)
        cr_assert(a->entries[i].at_s >= 0 && a->entries[i].at_s < 600);
    sched_free(a);
    sched_free(b);
    sched_free(c);
}

Test(schedule, poisson_rate_and_weights)
{
    /* One unit, tiny fixed recovery: arrivals are a Poisson process of
     * rate 1/mtbf; ~10000 draws give the mean within a few percent. */
    e = chaos_exp(1, 10, "{\"dist\": \"fixed\", \"mean_s\": 0.001}", 0, 100000,
                  "[{\"type\": \"pause\", \"weight\": 3}, {\"type\": \"kill\", \"weight\": 1}]");
    s = build(e, 123);
    cr_assert(s->chaos_drawn > 9000 && s->chaos_drawn < 11000, "drew %d", s->chaos_drawn);
    double mean_gap = s->entries[s->n - 1].at_s / s->n;
    cr_assert(fabs(mean_gap - 10.0) < 0.4, "mean inter-arrival %g s, want 10 +- 4%%", mean_gap);
    int pauses = 0;
    for (int i = 0; i < s->n; i++)
        pauses += strcmp(s->entries[i].fault, "pause") == 0;
    double frac = (double)pauses / s->n;
    cr_assert(fabs(frac - 0.75) < 0.03, "pause fraction %g, want 0.75 +- 0.03", frac);
}

Test(schedule, recovery_distributions_respected)
{
    e = chaos_exp(3, 5, "{\"dist\": \"uniform\", \"min_s\": 2, \"max_s\": 3}", 0, 2000,
                  "[{\"type\": \"pause\"}]");
    s = build(e, 9);
    cr_assert(s->n > 100);
    double sum = 0;
    for (int i = 0; i < s->n; i++) {
        cr_assert(s->entries[i].duration_ms >= 2000 && s->entries[i].duration_ms <= 3000);
        sum += s->entries[i].duration_ms;
    }
    cr_assert(fabs(sum / s->n - 2500) < 60, "uniform mean %g ms", sum / s->n);
    sched_free(s);
    exp_free(e);
    e = chaos_exp(3, 5, "{\"dist\": \"exponential\", \"mean_s\": 2, \"min_s\": 0.5, \"max_s\": 4}", 0, 2000,
                  "[{\"type\": \"pause\"}]");
    s = build(e, 9);
    int at_cap = 0;
    for (int i = 0; i < s->n; i++) {
        cr_assert(s->entries[i].duration_ms >= 500 && s->entries[i].duration_ms <= 4000);
        at_cap += s->entries[i].duration_ms == 4000;
    }
    cr_assert(at_cap > 0, "the cap is hit (P(x > 4) = e^-2)");
}

/* Fewest units free of faults at any instant (faults are [at, at+dur)). */
static int min_live(const schedule *sc, int m)
{
    int least = m;
    for (int i = 0; i < sc->n; i++) {
        double t = sc->entries[i].at_s;
        int down = 0;
        for (int l = 0; l < m; l++) {
            int d = 0;
            for (int j = 0; j < sc->n && !d; j++) {
                const sched_entry *x = &sc->entries[j];
                d = x->learner == l && x->when == EXP_AT_S && t >= x->at_s &&
                    t < x->at_s + x->duration_ms / 1000.0;
            }
            down += d;
        }
        if (m - down < least)
            least = m - down;
    }
    return least;
}

Test(schedule, live_floor_holds_over_many_draws)
{
    /* Mean recovery (30 s) far above mtbf (10 s): without the floor most
     * units would be down most of the time. */
    e = chaos_exp(4, 10, "{\"dist\": \"exponential\", \"mean_s\": 30}", 3, 5000,
                  "[{\"type\": \"kill\"}, {\"type\": \"pause\"}]");
    for (uint64_t seed = 1; seed <= 5; seed++) {
        schedule *each = build(e, seed);
        cr_assert(each->chaos_drawn > 50, "drew %d", each->chaos_drawn);
        cr_assert(each->skipped_floor > 50, "skipped %d", each->skipped_floor);
        cr_assert_geq(min_live(each, 4), 3, "seed %llu broke the floor", (unsigned long long)seed);
        sched_free(each);
    }
    exp_free(e);
    /* The same without a floor does take more than one unit down at once:
     * the check above can fail. */
    e = chaos_exp(4, 10, "{\"dist\": \"exponential\", \"mean_s\": 30}", 0, 5000, "[{\"type\": \"kill\"}]");
    s = build(e, 1);
    cr_assert_lt(min_live(s, 4), 3);
    cr_assert_eq(s->skipped_floor, 0);
}

Test(schedule, method_faults_count_towards_the_floor)
{
    /* Learner 0 is paused by the method for [0, 1000) s; with min_live 1 of
     * 2, no chaos fault may overlap it, on either learner. */
    e = parse("{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"method\": ["
              "{\"name\": \"long\", \"fault\": \"pause\", \"targets\": {\"ids\": [0]}, \"at_s\": 0,"
              " \"duration_ms\": 1000000}],"
              " \"chaos\": {\"mtbf_s\": 5, \"recovery\": {\"dist\": \"fixed\", \"mean_s\": 1},"
              " \"faults\": [{\"type\": \"kill\"}], \"min_live\": 1, \"end_s\": 2000}}");
    s = build(e, 3);
    int after = 0;
    for (int i = 0; i < s->n; i++) {
        const sched_entry *x = &s->entries[i];
        if (x->action >= 0)
            continue;
        cr_assert(x->at_s >= 1000.0 || x->at_s + x->duration_ms / 1000.0 <= 0.0, "chaos at %g overlaps",
                  x->at_s);
        after++;
    }
    cr_assert(after > 50, "chaos resumed after the method fault (%d)", after);
    cr_assert(s->skipped_floor + s->skipped_busy > 50);
}

Test(schedule, json_shape)
{
    e = chaos_exp(2, 10, "{\"dist\": \"fixed\", \"mean_s\": 1}", 1, 100, "[{\"type\": \"pause\"}]");
    s = build(e, 5);
    json_t *j = sched_json(s);
    cr_assert_not_null(j);
    cr_assert_eq(json_integer_value(json_object_get(j, "seed")), 5);
    cr_assert_eq(json_array_size(json_object_get(j, "entries")), (size_t)s->n);
    json_t *first = json_array_get(json_object_get(j, "entries"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(first, "source")), "chaos");
    cr_assert(json_is_real(json_object_get(first, "at_s")));
    json_decref(j);
}
