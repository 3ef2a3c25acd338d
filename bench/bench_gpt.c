/* bench_gpt.c - the "gpt" model's learner step (forward + backward + global
 * norm clip + AdamW) in tokens/s and GFLOP/s, beside raw cblas_sgemm on the
 * step's linear-layer shapes; or, with --train, a single-process quality run
 * on a corpus (held-out bits/byte against tokens) for choosing sizes.
 *
 *   bench_gpt [--threads N] [--seconds S] [shape flags]     one step figure
 *   bench_gpt --train STEPS [--data D] [--lr X] [shape flags]
 *   shape flags: --T n --C n --H n --L n --NH n --B n (sequences per step)
 *
 * --threads N is the learner's --threads: the model's pool (N > 1: OpenBLAS
 * at 1 thread inside the step) and AdamW on it.
 * Step figures are the best of 5 slices of S/5 seconds (a shared machine).
 * Inputs of the timing run are fixed pseudo-random bytes; tokens = B * T.
 * bench/gpt_vs_torch.sh runs this beside PyTorch on the identical model.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/exitcode.h"
#include "common/parse.h"
#include "numerics/data.h"
#include "numerics/model.h"
#include "numerics/optim.h"
#include "bench_util.h"

typedef struct bench_args {
    int threads, train, T, C, H, L, NH, B;
    double secs, lr;
    const char *data;
} bench_args;

static adamw *bench_opt(model *m, char *err, size_t errlen)
{
    adamw *opt = adamw_new(model_num_params(m), NULL, err, errlen);
    for (int i = 0; opt && i < model_num_tensors(m); i++) {
        const model_tensor *t = model_tensor_get(m, i);
        adamw_set_decay(opt, t->offset, t->length, t->weight_decay, err, errlen);
    }
    return opt;
}

/* One learner step, as learner.c takes it. */
static float bench_step(model *m, adamw *opt, const uint8_t *in, const uint8_t *tg, int B, float lr)
{
    float loss = model_forward_backward(m, in, tg, B);
    model_clip_grad_norm(m, 1.0);
    adamw_step(opt, model_params(m), model_grads(m), lr);
    return loss;
}

/* sgemm GFLOP/s on the linear layers of one step: per layer forward
 * out = in @ W^T, backward dinp = dout @ W and dW = dout^T @ in. */
static double bench_sgemm(const bench_args *a, double secs)
{
    int N = a->B * a->T, C = a->C;
    int shp[5][2] = {{3 * C, C}, {C, C}, {a->H, C}, {C, a->H}, {MODEL_VOCAB, C}}; /* {OC, IC} */
    /* every operand fits [N, mx] (activations) or [mx, mx] (weights): mx is
     * the widest of 3C, H and the 256-symbol head */
    int mx = 3 * C > a->H ? 3 * C : a->H;
    mx = mx > MODEL_VOCAB ? mx : MODEL_VOCAB;
    size_t big = (size_t)N * (size_t)mx, wbig = (size_t)mx * (size_t)mx;
    float *x = malloc(sizeof(float) * big), *o = malloc(sizeof(float) * big),
          *w = malloc(sizeof(float) * wbig);
    float *dw = malloc(sizeof(float) * wbig);
    bench_fill(x, big, 1);
    bench_fill(o, big, 2);
    bench_fill(w, wbig, 3);
    memset(dw, 0, sizeof(float) * wbig);
    double flops = 0, best = 0;
    for (int s = 0; s < 5; s++)
        flops += 6.0 * N * shp[s][0] * shp[s][1] * (s < 4 ? a->L : 1);
    for (int rep = 0; rep < 5; rep++) {
        int n = 0;
        double t0 = bench_now(), t;
        do {
            for (int s = 0; s < 5; s++)
                for (int l = 0; l < (s < 4 ? a->L : 1); l++) {
                    int OC = shp[s][0], IC = shp[s][1];
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC, 1, x, IC, w, IC, 0, o,
                                OC);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IC, OC, 1, o, OC, w, IC, 1, x,
                                IC);
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, N, 1, o, OC, x, IC, 1, dw,
                                IC);
                }
            n++;
            t = bench_now();
        } while (t - t0 < secs / 5);
        double rate = n * flops / (t - t0) * 1e-9;
        best = rate > best ? rate : best;
    }
    free(x), free(o), free(w), free(dw);
    return best;
}

static int bench_time(const bench_args *a, model *m, adamw *opt)
{
    size_t n = (size_t)a->B * a->T;
    uint8_t *in = malloc(n), *tg = malloc((size_t)a->B);
    for (size_t i = 0; i < n; i++)
        in[i] = (uint8_t)(i * 2654435761u >> 13);
    for (int i = 0; i < a->B; i++)
        tg[i] = (uint8_t)(i * 17 + 3);
    bench_step(m, opt, in, tg, a->B, 1e-4f); /* warm up */
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        int k = 0;
        double t0 = bench_now(), t;
        do {
            bench_step(m, opt, in, tg, a->B, 1e-4f);
            k++;
            t = bench_now();
        } while (t - t0 < a->secs / 5);
        best = k / (t - t0) > best ? k / (t - t0) : best;
    }
    double tps = best * (double)n, gf = tps * model_flops_per_token(m) * 1e-9;
    openblas_set_num_threads(a->threads); /* raw sgemm on all N threads (the model set 1) */
    double ref = bench_sgemm(a, a->secs);
    printf("chaosloco gpt L=%d C=%d NH=%d H=%d T=%d B=%d params=%zu threads=%d: %.0f tokens/s, "
           "%.2f GFLOP/s (step), %.2f GFLOP/s (sgemm, linear-layer shapes)\n",
           a->L, a->C, a->NH, a->H, a->T, a->B, model_num_params(m), a->threads, tps, gf, ref);
    free(in);
    free(tg);
    return 0;
}

/* Held-out bits/byte over n eval windows of the source. */
static double bench_eval(model *m, const data_source *src, int T, size_t n, uint8_t *in, uint8_t *tg)
{
    char err[CX_ERRLEN];
    if (data_eval_examples(src, T, n, in, tg, err, sizeof(err)) != CX_OK)
        return NAN;
    return model_loss(m, in, tg, (int)n) / M_LN2;
}

static int bench_train(const bench_args *a, model *m, adamw *opt)
{
    char err[CX_ERRLEN];
    data_config dc;
    data_config_default(&dc);
    dc.path = a->data;
    dc.seed = 1;
    data_source *src = data_source_new(&dc, err, sizeof(err));
    data_shard *sh = src ? data_shard_new(src, 0, 1, a->T, err, sizeof(err)) : NULL;
    if (!sh)
        return fprintf(stderr, "bench_gpt: %s\n", err), data_source_free(src), 1;
    double h0, h1;
    data_order_entropies(src, &h0, &h1);
    printf("data %s order0=%.3f order1=%.3f bits/byte; params=%zu\n", data_source_describe(src), h0, h1,
           model_num_params(m));
    size_t ne = 256;
    uint8_t *in = malloc((size_t)a->B * a->T + ne * a->T), *tg = malloc((size_t)a->B + ne);
    double t0 = bench_now();
    for (int s = 0; s <= a->train; s++) {
        if (s % (a->train / 10 > 0 ? a->train / 10 : 1) == 0)
            printf("step %5d tokens %9lld  held-out %.3f bits/byte  %.1f s\n", s, (long long)s * a->B * a->T,
                   bench_eval(m, src, a->T, ne, in, tg), bench_now() - t0);
        if (s == a->train)
            break;
        data_shard_next_batch(sh, a->B, in, tg);
        bench_step(m, opt, in, tg, a->B, optim_lr_at(s, 20, a->train, (float)a->lr, (float)a->lr * 0.1f));
    }
    free(in);
    free(tg);
    data_shard_free(sh);
    data_source_free(src);
    return 0;
}

static int bench_int(const char *name, const char *v, int lo, int hi, int *out)
{
    char err[CX_ERRLEN];
    if (cx_parse_int(v, name, lo, hi, out, err, sizeof(err)) != CX_OK)
        return fprintf(stderr, "bench_gpt: %s\n", err), -1;
    return 0;
}

static int bench_parse(bench_args *a, int argc, char **argv)
{
    static const char *const names[] = {"--threads", "--train", "--T", "--C", "--H", "--L", "--NH", "--B"};
    int *fields[] = {&a->threads, &a->train, &a->T, &a->C, &a->H, &a->L, &a->NH, &a->B};
    char err[CX_ERRLEN];
    for (int i = 1; i < argc; i++) {
        int k = -1;
        for (int j = 0; j < 8; j++)
            k = strcmp(argv[i], names[j]) == 0 ? j : k;
        if (k >= 0 && i + 1 < argc) {
            if (bench_int(names[k], argv[++i], k == 1 ? 1 : 1, k == 1 ? 10000000 : 65536, fields[k]) != 0)
                return -1;
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            if (cx_parse_double(argv[++i], "--seconds", 0.05, 600, &a->secs, err, sizeof(err)) != CX_OK)
                return fprintf(stderr, "bench_gpt: %s\n", err), -1;
        } else if (strcmp(argv[i], "--lr") == 0 && i + 1 < argc) {
            if (cx_parse_double(argv[++i], "--lr", 1e-6, 1, &a->lr, err, sizeof(err)) != CX_OK)
                return fprintf(stderr, "bench_gpt: %s\n", err), -1;
        } else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
            a->data = argv[++i];
        } else {
            fprintf(stderr,
                    "usage: bench_gpt [--threads N] [--seconds S] [--train STEPS [--data D] [--lr X]]\n"
                    "                 [--T n] [--C n] [--H n] [--L n] [--NH n] [--B n]\n");
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_args a = {.threads = 1,
                    .T = 128,
                    .C = 128,
                    .H = 512,
                    .L = 4,
                    .NH = 4,
                    .B = 8,
                    .secs = 2.0,
                    .lr = 3e-3,
                    .data = "fortunes"};
    if (bench_parse(&a, argc, argv) != 0)
        return CX_EXIT_USAGE;
    openblas_set_num_threads(a.threads);
    char err[CX_ERRLEN];
    model_config mc = {.context = a.T,
                       .embed = a.C,
                       .hidden = a.H,
                       .layers = a.L,
                       .heads = a.NH,
                       .max_batch = a.B,
                       .threads = a.threads};
    model *m = model_new("gpt", &mc, 1, err, sizeof(err));
    adamw *opt = m ? bench_opt(m, err, sizeof(err)) : NULL;
    if (opt)
        adamw_set_pool(opt, model_pool(m)); /* as the learner does */
    if (!opt)
        return fprintf(stderr, "bench_gpt: %s\n", err), model_free(m), CX_EXIT_FAILURE;
    int rc = a.train ? bench_train(&a, m, opt) : bench_time(&a, m, opt);
    adamw_free(opt);
    model_free(m);
    return rc;
}
