/* bench_merge.c - syncer-side merge throughput: k contributions of n floats
 * averaged (rule mean or rda, token weights), scaled by k/M and applied to
 * the global parameters with the outer Nesterov step, in GB/s of
 * contribution bytes; beside memcpy of the same number of bytes, measured
 * in the same run. The fragment is one tensor of n floats (P = 1).
 *
 *   old    round_merge before merge_apply: four mallocs, merge_fragment,
 *          the scale pass, merge_l2norm, gather Θ and momentum, copy Θ_V,
 *          nesterov_step, scatter both, four frees
 *   syncer round_merge now for a one-range fragment in a run with an
 *          encoded downstream: copy Θ_V into the workspace, merge_apply in
 *          place (no allocation; a fragment of several ranges adds a gather
 *          and a scatter of Θ and momentum, an f32 run drops the copy)
 *   apply  merge_apply alone, in place on Θ and momentum
 *
 * deltas_encode (trainer/syncer/deltas.c) is left out of both (the same work either way).
 *
 *   bench_merge [--seconds S] [--cpu-time]
 *
 * Prints a Markdown table; each figure is the best of 5 slices of S/5 s,
 * timed by the monotonic clock, or with --cpu-time by the thread's CPU time
 * (for a machine other processes load: memcpy and the merge both on it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/exitcode.h"
#include "common/parse.h"
#include "numerics/fragment.h"
#include "numerics/merge.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "bench_util.h"

/* The clock every figure is timed by: bench_now, or bench_thread_cpu
 * (--cpu-time). */
static double (*bench_clock)(void) = bench_now;

/* Best GB/s over 5 repetitions of secs/5 each: `bytes` per call of one(ctx),
 * which returns nonzero on error (then -1). */
static double best_rate(size_t bytes, double secs, int (*one)(void *ctx), void *ctx)
{
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        int n = 0;
        double t0 = bench_clock(), t;
        do {
            if (one(ctx))
                return -1;
            n++;
            t = bench_clock();
        } while (t - t0 < secs / 5);
        double r = (double)bytes * n / (t - t0) * 1e-9;
        best = r > best ? r : best;
    }
    return best;
}

typedef struct copy_job {
    const void *src;
    void *dst;
    size_t bytes;
} copy_job;

static int one_memcpy(void *ctx)
{
    copy_job *c = ctx;
    memcpy(c->dst, c->src, c->bytes);
    /* keep the copy observable so it is not optimised away */
    __asm__ volatile("" : : "r"(c->dst) : "memory");
    return 0;
}

/* memcpy GB/s for `bytes` bytes. */
static double bench_memcpy(const void *src, void *dst, size_t bytes, double secs)
{
    copy_job c = {.src = src, .dst = dst, .bytes = bytes};
    return best_rate(bytes, secs, one_memcpy, &c);
}

enum { KMAX = 8, M_LIVE = 8 };

typedef struct bench_case {
    const fragment_table *ft;
    merge_ws *ws;
    merge_contrib c[KMAX];
    int k;
    merge_rule rule;
    size_t n;
    float *theta, *mom; /* the global parameters (n floats, P = 1) */
} bench_case;

static int path_old(bench_case *b)
{
    char err[CX_ERRLEN];
    size_t len = b->n;
    double w[KMAX];
    float *out = malloc(len * sizeof *out), *th = malloc(len * sizeof *th), *mo = malloc(len * sizeof *mo);
    float *old = malloc(len * sizeof *old);
    if (!out || !th || !mo || !old) {
        free(out), free(th), free(mo), free(old);
        return fprintf(stderr, "bench_merge: out of memory\n"), 1;
    }
    int rc = merge_fragment(out, b->ft, 0, b->c, b->k, b->rule, MERGE_WEIGHTS_TOKEN, w, err, sizeof err);
    if (rc == CX_OK) {
        double scale = (double)b->k / M_LIVE;
        for (size_t i = 0; i < len; i++)
            out[i] = (float)(out[i] * scale);
        volatile double norm = merge_l2norm(out, len);
        (void)norm;
        fragment_gather(b->ft, 0, b->theta, th);
        fragment_gather(b->ft, 0, b->mom, mo);
        memcpy(old, th, len * sizeof *old);
        nesterov_step(th, mo, out, len, NESTEROV_DEFAULT_LR, NESTEROV_DEFAULT_MOMENTUM);
        fragment_scatter(b->ft, 0, th, b->theta);
        fragment_scatter(b->ft, 0, mo, b->mom);
    } else {
        fprintf(stderr, "bench_merge: %s\n", err);
    }
    free(out), free(th), free(mo), free(old);
    return rc != CX_OK;
}

static int path_apply(bench_case *b, float *th, float *mo)
{
    char err[CX_ERRLEN];
    double w[KMAX];
    volatile double norm = 0.0;
    double nv = 0.0;
    int rc =
        merge_apply(b->ws, th, mo, b->ft, 0, b->c, b->k, b->rule, MERGE_WEIGHTS_TOKEN, (double)b->k / M_LIVE,
                    NESTEROV_DEFAULT_LR, NESTEROV_DEFAULT_MOMENTUM, w, &nv, err, sizeof err);
    norm = nv;
    (void)norm;
    if (rc != CX_OK)
        fprintf(stderr, "bench_merge: %s\n", err);
    return rc != CX_OK;
}

static int path_syncer(bench_case *b)
{
    /* one range: merge_apply works on theta/momentum directly */
    memcpy(merge_ws_buf(b->ws, 2), b->theta, b->n * sizeof(float));
    return path_apply(b, b->theta, b->mom);
}

typedef struct path_job {
    bench_case *b;
    int path;
} path_job;

static int one_path(void *ctx)
{
    path_job *j = ctx;
    bench_case *b = j->b;
    return j->path == 0 ? path_old(b) : j->path == 1 ? path_syncer(b) : path_apply(b, b->theta, b->mom);
}

/* GB/s of contribution bytes for path 0 old, 1 syncer, 2 apply; -1 on error. */
static double bench_path(bench_case *b, int path, double secs)
{
    path_job j = {.b = b, .path = path};
    return best_rate((size_t)b->k * b->n * sizeof(float), secs, one_path, &j);
}

int main(int argc, char **argv)
{
    double secs = 1.0;
    char err[CX_ERRLEN];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            if (cx_parse_double(argv[++i], "--seconds", 0.05, 600, &secs, err, sizeof(err)) != CX_OK)
                return fprintf(stderr, "bench_merge: %s\n", err), 64;
        } else if (strcmp(argv[i], "--cpu-time") == 0) {
            bench_clock = bench_thread_cpu;
        } else {
            fprintf(stderr, "usage: bench_merge [--seconds S] [--cpu-time]\n"
                            "  --seconds S   time per measurement, best of 5 slices (default 1)\n"
                            "  --cpu-time    time by this thread's CPU time, not the wall clock\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 64;
        }
    }
    const size_t sizes[] = {100000, 1000000, 4000000};
    const int ks[] = {1, 4, 8};
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
    float *theta = calloc(nmax, sizeof(float)), *mom = calloc(nmax, sizeof(float));
    float *cpy_src = malloc(nmax * KMAX * sizeof(float)), *cpy_dst = malloc(nmax * KMAX * sizeof(float));
    merge_ws *ws = merge_ws_new(nmax, KMAX, err, sizeof err);
    if (!theta || !mom || !cpy_src || !cpy_dst || !ws)
        return fprintf(stderr, "bench_merge: out of memory\n"), 1;
    memset(cpy_src, 1, nmax * KMAX * sizeof(float));
    memset(cpy_dst, 0, nmax * KMAX * sizeof(float));

    printf("%.2f s %s per figure (best of 5); GB/s = contribution bytes (k * n * 4) per second,\n"
           "merge = weighted average + k/%d scale + outer Nesterov step on the parameters;\n"
           "old = round_merge before merge_apply, syncer = round_merge now, apply = merge_apply alone\n\n",
           secs, bench_clock == bench_now ? "wall clock" : "thread CPU time", M_LIVE);
    printf("| n floats | k | rule | old GB/s | syncer GB/s | apply GB/s | memcpy GB/s (same bytes) | "
           "old/memcpy | "
           "syncer/memcpy | apply/memcpy |\n");
    printf("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t si = 0; si < 3; si++) {
        size_t n = sizes[si];
        model_tensor tens = {"w", 0, n, 1, (int)n, 0, 0};
        fragment_table *ft = fragment_table_new(&tens, 1, 1, err, sizeof err);
        if (!ft)
            return fprintf(stderr, "bench_merge: %s\n", err), 1;
        for (size_t ki = 0; ki < 3; ki++) {
            int k = ks[ki];
            size_t bytes = (size_t)k * n * sizeof(float);
            double ref = bench_memcpy(cpy_src, cpy_dst, bytes, secs);
            bench_case b = {.ft = ft, .ws = ws, .k = k, .n = n, .theta = theta, .mom = mom};
            for (int j = 0; j < k; j++)
                b.c[j] = (merge_contrib){contrib[j], 1000u * (unsigned)(j + 1), 10u + (unsigned)j};
            for (int rule = 0; rule < 2; rule++) {
                b.rule = rule == 0 ? MERGE_RULE_MEAN : MERGE_RULE_RDA;
                double g[3];
                for (int path = 0; path < 3; path++)
                    if ((g[path] = bench_path(&b, path, secs)) < 0)
                        return CX_EXIT_FAILURE;
                printf("| %zu | %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", n, k,
                       rule == 0 ? "mean" : "rda", g[0], g[1], g[2], ref, g[0] / ref, g[1] / ref, g[2] / ref);
                fflush(stdout);
            }
        }
        fragment_table_free(ft);
    }
    for (int k = 0; k < KMAX; k++)
        free(contrib[k]);
    merge_ws_free(ws);
    free(theta), free(mom), free(cpy_src), free(cpy_dst);
    return CX_EXIT_OK;
}
