/* bench_merge.c - syncer-side merge throughput: k contributions of n floats
 * averaged (rule mean or rda, token weights) and applied to the global
 * parameters with the outer Nesterov step, in GB/s of contribution bytes;
 * beside memcpy of the same number of bytes, measured in the same run.
 *
 *   bench_merge [--seconds S]
 *
 * Prints a Markdown table; each figure is the best of 5 slices of S/5 s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/parse.h"
#include "trainer/merge.h"
#include "trainer/optim.h"
#include "bench_util.h"

/* memcpy GB/s for `bytes` bytes. */
static double bench_memcpy(const void *src, void *dst, size_t bytes, double secs)
{
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        int n = 0;
        double t0 = bench_now(), t;
        do {
            memcpy(dst, src, bytes);
            /* keep the copy observable so it is not optimised away */
            __asm__ volatile("" : : "r"(dst) : "memory");
            n++;
            t = bench_now();
        } while (t - t0 < secs / 5);
        double r = (double)bytes * n / (t - t0) * 1e-9;
        best = r > best ? r : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    double secs = 1.0;
    char err[CX_ERRLEN];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            if (cx_parse_double(argv[++i], "--seconds", 0.05, 600, &secs, err, sizeof(err)) != CX_OK)
                return fprintf(stderr, "bench_merge: %s\n", err), 64;
        } else {
            fprintf(stderr, "usage: bench_merge [--seconds S]\n"
                            "  --seconds S   time per measurement, best of 5 slices (default 1)\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 64;
        }
    }
    const size_t sizes[] = {100000, 1000000, 4000000};
    const int ks[] = {1, 4, 8};
    enum { KMAX = 8 };
    size_t nmax = sizes[2];
    float *contrib[KMAX];
    for (int k = 0; k < KMAX; k++) {
        contrib[k] = malloc(nmax * sizeof(float));
        if (!contrib[k])
            return fprintf(stderr, "bench_merge: out of memory\n"), 1;
        unsigned s = 1u + (unsigned)k;
        for (size_t i = 0; i < nmax; i++) {
            s = s * 1103515245u + 12345u;
            contrib[k][i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 1e-3f;
        }
    }
    float *delta = malloc(nmax * sizeof(float)), *theta = calloc(nmax, sizeof(float));
    float *mom = calloc(nmax, sizeof(float));
    float *cpy_src = malloc(nmax * KMAX * sizeof(float)), *cpy_dst = malloc(nmax * KMAX * sizeof(float));
    if (!delta || !theta || !mom || !cpy_src || !cpy_dst)
        return fprintf(stderr, "bench_merge: out of memory\n"), 1;
    memset(cpy_src, 1, nmax * KMAX * sizeof(float));
    memset(cpy_dst, 0, nmax * KMAX * sizeof(float));

    printf("%.1f s per figure (best of 5); GB/s = contribution bytes (k * n * 4) per second,\n"
           "merge = weighted average into one delta + outer Nesterov step on the parameters\n\n",
           secs);
    printf("| n floats | k | rule | merge GB/s | memcpy GB/s (same bytes) | ratio |\n");
    printf("|---:|---:|---|---:|---:|---:|\n");
    for (size_t si = 0; si < 3; si++) {
        size_t n = sizes[si];
        for (size_t ki = 0; ki < 3; ki++) {
            int k = ks[ki];
            size_t bytes = (size_t)k * n * sizeof(float);
            double ref = bench_memcpy(cpy_src, cpy_dst, bytes, secs);
            double w[KMAX];
            for (int j = 0; j < k; j++)
                w[j] = merge_token_weight(1000u * (unsigned)(j + 1), 10u + (unsigned)j);
            for (int rule = 0; rule < 2; rule++) {
                double best = 0;
                for (int rep = 0; rep < 5; rep++) {
                    int it = 0;
                    double t0 = bench_now(), t;
                    do {
                        int rc =
                            rule == 0
                                ? merge_mean(delta, (const float *const *)contrib, w, k, n, err, sizeof(err))
                                : merge_rda(delta, (const float *const *)contrib, w, k, n, err, sizeof(err));
                        if (rc != CX_OK)
                            return fprintf(stderr, "bench_merge: %s\n", err), 1;
                        nesterov_step(theta, mom, delta, n, NESTEROV_DEFAULT_LR, NESTEROV_DEFAULT_MOMENTUM);
                        it++;
                        t = bench_now();
                    } while (t - t0 < secs / 5);
                    double r = (double)bytes * it / (t - t0) * 1e-9;
                    best = r > best ? r : best;
                }
                printf("| %zu | %d | %s | %.2f | %.2f | %.2f |\n", n, k, rule == 0 ? "mean" : "rda", best,
                       ref, best / ref);
                fflush(stdout);
            }
        }
    }
    for (int k = 0; k < KMAX; k++)
        free(contrib[k]);
    free(delta), free(theta), free(mom), free(cpy_src), free(cpy_dst);
    return 0;
}
