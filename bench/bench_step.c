/* bench_step.c - one inner training step (model_forward_backward + AdamW) of
 * the MLP LM: tokens/s and achieved GFLOP/s, beside raw cblas_sgemm GFLOP/s
 * for exactly the same six matmul shapes, measured in the same run.
 *
 *   bench_step [--threads N] [--seconds S]
 *
 * Prints a Markdown table. Each figure is the best of 5 repetitions of about
 * S/5 seconds (best-of filters out other processes on a shared machine).
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/exitcode.h"
#include "common/parse.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "bench_util.h"

typedef struct bench_cfg {
    const char *label; /* row name */
    int C, E, Hd, B;   /* model shape and batch */
} bench_cfg;

/* Steps per second of forward+backward+AdamW. */
static double bench_steps(model *m, adamw *opt, const uint8_t *in, const uint8_t *tg, int B, double secs)
{
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        int n = 0;
        double t0 = bench_now(), t;
        do {
            model_forward_backward(m, in, tg, B);
            adamw_step(opt, model_params(m), model_grads(m), 1e-4f);
            n++;
            t = bench_now();
        } while (t - t0 < secs / 5);
        double rate = n / (t - t0);
        best = rate > best ? rate : best;
    }
    return best;
}

/* The six sgemm calls of one step, same shapes and transposes as model.c:
 * fwd x@W1^T, h@W2^T; bwd dh = dl@W2, dW2 = dl^T@h, dx = dh@W1, dW1 = dh^T@x.
 * Returns GFLOP/s. */
static double bench_sgemm(int B, int CE, int Hd, int V, double secs)
{
    float *x = malloc(sizeof(float) * B * CE), *w1 = malloc(sizeof(float) * Hd * CE);
    float *h = malloc(sizeof(float) * B * Hd), *w2 = malloc(sizeof(float) * V * Hd);
    float *lg = malloc(sizeof(float) * B * V), *dh = malloc(sizeof(float) * B * Hd);
    float *dw1 = malloc(sizeof(float) * Hd * CE), *dw2 = malloc(sizeof(float) * V * Hd);
    float *dx = malloc(sizeof(float) * B * CE);
    bench_fill(x, (size_t)B * CE, 1);
    bench_fill(w1, (size_t)Hd * CE, 2);
    bench_fill(h, (size_t)B * Hd, 3);
    bench_fill(w2, (size_t)V * Hd, 4);
    bench_fill(lg, (size_t)B * V, 5);
    memset(dw1, 0, sizeof(float) * Hd * CE);
    memset(dw2, 0, sizeof(float) * V * Hd);
    memset(dx, 0, sizeof(float) * B * CE);
    memset(dh, 0, sizeof(float) * B * Hd);
    double flops = 6.0 * B * ((double)CE * Hd + (double)Hd * V), best = 0;
    for (int rep = 0; rep < 5; rep++) {
        int n = 0;
        double t0 = bench_now(), t;
        do {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, Hd, CE, 1, x, CE, w1, CE, 0, h, Hd);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, V, Hd, 1, h, Hd, w2, Hd, 0, lg, V);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, Hd, V, 1, lg, V, w2, Hd, 1, dh, Hd);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, Hd, B, 1, lg, V, h, Hd, 1, dw2, Hd);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, CE, Hd, 1, dh, Hd, w1, CE, 1, dx, CE);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Hd, CE, B, 1, dh, Hd, x, CE, 1, dw1, CE);
            n++;
            t = bench_now();
        } while (t - t0 < secs / 5);
        double rate = n * flops / (t - t0) * 1e-9;
        best = rate > best ? rate : best;
    }
    free(x), free(w1), free(h), free(w2), free(lg), free(dh), free(dw1), free(dw2), free(dx);
    return best;
}

int main(int argc, char **argv)
{
    int threads = 1;
    double secs = 2.0;
    char err[CX_ERRLEN];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            if (cx_parse_int(argv[++i], "--threads", 1, 64, &threads, err, sizeof(err)) != CX_OK)
                return fprintf(stderr, "bench_step: %s\n", err), 64;
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            if (cx_parse_double(argv[++i], "--seconds", 0.05, 600, &secs, err, sizeof(err)) != CX_OK)
                return fprintf(stderr, "bench_step: %s\n", err), 64;
        } else {
            fprintf(stderr, "usage: bench_step [--threads N] [--seconds S]\n"
                            "  --threads N   OpenBLAS threads (default 1)\n"
                            "  --seconds S   time per measurement, best of 5 slices (default 2)\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 64;
        }
    }
    openblas_set_num_threads(threads);
    const bench_cfg cfgs[] = {
        {"default C=8 E=16 Hd=256", 8, 16, 256, 32},
        {"default, B=256", 8, 16, 256, 256},
        {"wide C=16 E=32 Hd=1024", 16, 32, 1024, 64},
    };
    printf("OpenBLAS threads: %d, %.1f s per figure (best of 5)\n\n", openblas_get_num_threads(), secs);
    printf(
        "| model | params | B | steps/s | tokens/s | step GFLOP/s | sgemm GFLOP/s (same shapes) | ratio |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++) {
        const bench_cfg *b = &cfgs[c];
        model_config mc = {.context = b->C, .embed = b->E, .hidden = b->Hd, .max_batch = b->B};
        model *m = model_new("mlp", &mc, 1, err, sizeof(err));
        if (!m)
            return fprintf(stderr, "bench_step: %s\n", err), 1;
        adamw *opt = adamw_new(model_num_params(m), NULL, err, sizeof(err));
        if (!opt)
            return fprintf(stderr, "bench_step: %s\n", err), 1;
        uint8_t *in = malloc((size_t)b->B * b->C), *tg = malloc((size_t)b->B);
        for (int i = 0; i < b->B * b->C; i++)
            in[i] = (uint8_t)(i * 31 + 7);
        for (int i = 0; i < b->B; i++)
            tg[i] = (uint8_t)(i * 17 + 3);
        double sps = bench_steps(m, opt, in, tg, b->B, secs);
        double tps = sps * b->B;
        double gf = tps * model_flops_per_token(m) * 1e-9;
        double ref = bench_sgemm(b->B, b->C * b->E, b->Hd, MODEL_VOCAB, secs);
        printf("| %s | %zu | %d | %.0f | %.0f | %.2f | %.2f | %.2f |\n", b->label, model_num_params(m), b->B,
               sps, tps, gf, ref, gf / ref);
        fflush(stdout);
        free(in);
        free(tg);
        adamw_free(opt);
        model_free(m);
    }
    return CX_EXIT_OK;
}
