/* bench_sim.c - runtime of `chaosloco simulate`'s largest case: one trial of
 * 2.4M chips over 30 simulated days per mode, against a reference measured
 * in the same run: a bare loop drawing as many exponential variates as the
 * trial processed events (the irreducible cost of an event-driven simulator is
 * about one such draw per event). Prints a table for docs/benchmarks.md.
 *
 * usage: bench_sim [REPEATS]   (default 5; median of the repeats is shown)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "sim/sim.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Draw n exponentials (xorshift64* + log), return seconds; sink defeats
 * dead-code elimination. */
static double reference_draws(int64_t n, double *sink)
{
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    double acc = 0;
    int64_t t0 = cx_mono_ns();
    for (int64_t i = 0; i < n; i++) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        double u = ((double)((s * 0x2545F4914F6CDD1DULL) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
        acc += -log(u);
    }
    *sink += acc;
    return (double)(cx_mono_ns() - t0) / 1e9;
}

int main(int argc, char **argv)
{
    int repeats = argc > 1 ? atoi(argv[1]) : 5;
    if (repeats < 1 || repeats > 101) {
        fprintf(stderr, "bench_sim: REPEATS must be 1..101\n");
        return CX_EXIT_USAGE;
    }
    sim_params p;
    sim_params_init(&p);
    struct {
        const char *name;
        sim_mode mode;
        int learners;
    } cases[] = {
        {"data-parallel", SIM_DP, 1},
        {"elastic data-parallel", SIM_ELASTIC, 1},
        {"decoupled M=8", SIM_DECOUPLED, 8},
        {"decoupled M=16", SIM_DECOUPLED, 16},
    };
    const int64_t chips = 2400000;
    double sink = 0;
    double *t = malloc((size_t)repeats * 2 * sizeof *t);
    if (!t)
        return CX_EXIT_FAILURE;
    double *ref = t + repeats;
    printf("| case (2.4M chips, 30 days, 1 trial) | events | simulate ms | reference ms | ratio | "
           "simulated/wall |\n");
    printf("|---|---:|---:|---:|---:|---:|\n");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sim_result r = {0};
        for (int i = 0; i < repeats; i++) {
            char err[CX_ERRLEN];
            int64_t t0 = cx_mono_ns();
            if (sim_run(&p, cases[c].mode, chips, cases[c].learners, (uint64_t)i + 1, &r, err, sizeof err)) {
                fprintf(stderr, "bench_sim: %s\n", err);
                free(t);
                return CX_EXIT_FAILURE;
            }
            t[i] = (double)(cx_mono_ns() - t0) / 1e9;
            ref[i] = reference_draws(r.events, &sink);
        }
        qsort(t, (size_t)repeats, sizeof *t, cmp_double);
        qsort(ref, (size_t)repeats, sizeof *ref, cmp_double);
        double tm = t[repeats / 2], rm = ref[repeats / 2];
        printf("| %s | %lld | %.1f | %.2f | %.0fx | %.2gx |\n", cases[c].name, (long long)r.events, tm * 1e3,
               rm * 1e3, rm > 0 ? tm / rm : 0, p.horizon_days * 86400 / tm);
    }
    fprintf(stderr, "(sink %g)\n", sink);
    free(t);
    return CX_EXIT_OK;
}
