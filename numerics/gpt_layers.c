/* gpt_layers.c - the layer kernels of the "gpt" model kind (gpt.h): each a
 * _forward/_backward pair with a plain reference where a fast kernel exists;
 * backward passes accumulate. The model and its threaded step are in gpt.c;
 * the per-range pieces the step splits layers into are declared in
 * gpt_impl.h. Kernels follow llm.c's train_gpt2.c (read, not copied).
 */
#include "numerics/gpt.h"
#include "numerics/gpt_impl.h"
#include "numerics/vecmath.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* ---- layer: embedding (token + position) ---- */

void gpt_embed_forward(float *out, const uint8_t *inp, const float *wte, const float *wpe, int B, int T,
                       int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *we = wte + (size_t)inp[b * T + t] * C, *pe = wpe + (size_t)t * C;
            for (int i = 0; i < C; i++)
                o[i] = we[i] + pe[i];
        }
}

/* Columns [c0, c1) of the embedding backward: the scatter adds in position
 * order, so a column split gives the same sums as the whole. */
void gpt_embed_backward_cols(float *dwte, float *dwpe, const float *dout, const uint8_t *inp, int B, int T,
                             int C, int c0, int c1)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            float *dwt = dwte + (size_t)inp[b * T + t] * C, *dwp = dwpe + (size_t)t * C;
            for (int i = c0; i < c1; i++) {
                dwt[i] += d[i];
                dwp[i] += d[i];
            }
        }
}

void gpt_embed_backward(float *dwte, float *dwpe, const float *dout, const uint8_t *inp, int B, int T, int C)
{
    gpt_embed_backward_cols(dwte, dwpe, dout, inp, B, T, C, 0, C);
}

/* ---- layer: layernorm ---- */

void gpt_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                           const float *bias, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float m = 0.0f, v = 0.0f;
        for (int i = 0; i < C; i++)
            m += x[i];
        m /= (float)C;
        for (int i = 0; i < C; i++)
            v += (x[i] - m) * (x[i] - m);
        float s = 1.0f / sqrtf(v / (float)C + 1e-5f);
        float *o = out + (size_t)n * C;
        for (int i = 0; i < C; i++)
            o[i] = (x[i] - m) * s * w[i] + bias[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

/* Rows [n0, n1) of dinp. Each row reads only its own mean/rstd. */
void gpt_layernorm_backward_rows(float *dinp, const float *dout, const float *inp, const float *w,
                                 const float *mean, const float *rstd, int C, int n0, int n1)
{
    for (int n = n0; n < n1; n++) {
        const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        float *di = dinp + (size_t)n * C;
        float m = mean[n], s = rstd[n], dnorm_mean = 0.0f, dnorm_norm = 0.0f;
        for (int i = 0; i < C; i++) {
            float dnorm = w[i] * d[i];
            dnorm_mean += dnorm;
            dnorm_norm += dnorm * (x[i] - m) * s;
        }
        dnorm_mean /= (float)C;
        dnorm_norm /= (float)C;
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - m) * s;
            di[i] += (w[i] * d[i] - dnorm_mean - norm * dnorm_norm) * s;
        }
    }
}

/* Columns [c0, c1) of dw and dbias: sums over rows in row order, so a column
 * split gives the same bits as the whole. */
void gpt_layernorm_backward_cols(float *dw, float *dbias, const float *dout, const float *inp,
                                 const float *mean, const float *rstd, int N, int C, int c0, int c1)
{
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        for (int i = c0; i < c1; i++) {
            dbias[i] += d[i];
            dw[i] += (x[i] - m) * s * d[i];
        }
    }
}

void gpt_layernorm_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                            const float *w, const float *mean, const float *rstd, int N, int C)
{
    gpt_layernorm_backward_rows(dinp, dout, inp, w, mean, rstd, C, 0, N);
    gpt_layernorm_backward_cols(dw, dbias, dout, inp, mean, rstd, N, C, 0, C);
}

/* ---- layer: causal multi-head attention ----
 * inp = qkv [B, T, 3C] (q | k | v, head h at columns h*hs..), att [B, NH, T, T]
 * holds the softmax (zero above the diagonal), out [B, T, C]. */

/* Causal softmax of row t of scores (in place), entries t2 > t set to 0. */
static void gpt_causal_softmax_row(float *row, int t, int T)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int t2 = 0; t2 <= t; t2++)
        mx = row[t2] > mx ? row[t2] : mx;
    for (int t2 = 0; t2 <= t; t2++) {
        row[t2] = expf(row[t2] - mx);
        sum += row[t2];
    }
    float inv = 1.0f / sum;
    for (int t2 = 0; t2 <= t; t2++)
        row[t2] *= inv;
    for (int t2 = t + 1; t2 < T; t2++)
        row[t2] = 0.0f;
}

/* ---- fast row kernels: vectorisable max, sum, dot and exp ----
 * A single running sum or max is a dependency chain that the vectoriser may
 * not reorder (no -ffast-math here), so these keep 8 interleaved partials,
 * which it maps onto vector lanes. The sums therefore differ from the plain
 * loops' by reassociation only. */

static inline float gpt_max8(const float *x, int n)
{
    float m[8];
    for (int k = 0; k < 8; k++)
        m[k] = -INFINITY;
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
    for (; i < n; i++)
        m[0] = x[i] > m[0] ? x[i] : m[0];
    for (int k = 1; k < 8; k++)
        m[0] = m[k] > m[0] ? m[k] : m[0];
    return m[0];
}

static inline float gpt_dot8(const float *x, const float *y, int n)
{
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += x[i + k] * y[i + k];
    for (; i < n; i++)
        s[0] += x[i] * y[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* gpt_causal_softmax_row with vecmath_expf (relative error <= 2e-7 per
 * term) and the 8-lane max and sum: the fast kernels' softmax. */
static void gpt_causal_softmax_row_fast(float *row, int t, int T)
{
    int n = t + 1;
    float mx = gpt_max8(row, n), s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            float e = vecmath_expf(row[i + k] - mx);
            row[i + k] = e;
            s[k] += e;
        }
    for (; i < n; i++) {
        row[i] = vecmath_expf(row[i] - mx);
        s[0] += row[i];
    }
    float inv = 1.0f / (((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])));
    for (i = 0; i < n; i++)
        row[i] *= inv;
    if (n < T)
        memset(row + n, 0, (size_t)(T - n) * sizeof(float));
}

/* One (b, h) pair of the reference forward. */
void gpt_attention_forward_ref_pair(float *out, float *att, const float *inp, int b, int h, int T, int C,
                                    int NH)
{
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int t = 0; t < T; t++) {
        const float *q = inp + ((size_t)b * T + t) * C3 + h * hs;
        float *row = att + (((size_t)b * NH + h) * T + t) * T;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *k = inp + ((size_t)b * T + t2) * C3 + C + h * hs;
            float dot = 0.0f;
            for (int i = 0; i < hs; i++)
                dot += q[i] * k[i];
            row[t2] = dot * scale;
        }
        gpt_causal_softmax_row(row, t, T);
        float *o = out + ((size_t)b * T + t) * C + h * hs;
        memset(o, 0, (size_t)hs * sizeof(float));
        for (int t2 = 0; t2 <= t; t2++) {
            const float *v = inp + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
            for (int i = 0; i < hs; i++)
                o[i] += row[t2] * v[i];
        }
    }
}

/* Shortest T whose fast attention splits its rows (below). Measured on one
 * core (AVX-512 host, OpenBLAS 0.3.21, CPU time, 3 interleaved runs): at
 * T = 128, hs = 32 the split cut attention forward + backward from ~52 to
 * ~45 ms per step; at T = 64 it was even or slower (four 32-row sgemms
 * cost more in call and packing overhead than the quarter they skip). */
#define GPT_ATTN_SPLIT_MIN_T 128

/* Fast path: per (b, h) sgemms over strided q/k/v views of qkv. Above the
 * diagonal att is 0, so the rows split at m = T/2: rows [0, m) only meet
 * keys [0, m), which skips the top-right quarter of both products (T^2/4 of
 * T^2 multiply-adds each). The rest of the upper triangle is computed and
 * then discarded by the causal softmax. */
static int gpt_attention_split(int T)
{
    return T >= GPT_ATTN_SPLIT_MIN_T ? T / 2 : 0;
}

void gpt_attention_forward_pair(float *out, float *att, const float *inp, int b, int h, int T, int C, int NH)
{
    int hs = C / NH, C3 = 3 * C, m = gpt_attention_split(T);
    float scale = 1.0f / sqrtf((float)hs);
    const float *q = inp + (size_t)b * T * C3 + h * hs, *k = q + C, *v = q + 2 * C;
    float *a = att + ((size_t)b * NH + h) * T * T, *o = out + (size_t)b * T * C + h * hs;
    /* a = scale q k^T: [0, m) x [0, m), then [m, T) x [0, T) */
    if (m)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, m, hs, scale, q, C3, k, C3, 0.0f, a, T);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T - m, T, hs, scale, q + (size_t)m * C3, C3, k, C3,
                0.0f, a + (size_t)m * T, T);
    for (int t = 0; t < T; t++)
        gpt_causal_softmax_row_fast(a + (size_t)t * T, t, T);
    /* out = a v, the same split */
    if (m)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, m, 1.0f, a, T, v, C3, 0.0f, o, C);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T - m, hs, T, 1.0f, a + (size_t)m * T, T, v, C3,
                0.0f, o + (size_t)m * C, C);
}

void gpt_attention_forward_ref(float *out, float *att, const float *inp, int B, int T, int C, int NH)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            gpt_attention_forward_ref_pair(out, att, inp, b, h, T, C, NH);
}

void gpt_attention_forward(float *out, float *att, const float *inp, int B, int T, int C, int NH)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            gpt_attention_forward_pair(out, att, inp, b, h, T, C, NH);
}

/* Softmax backward of one row in place: datt -> dpreatt (times scale). */
static void gpt_softmax_backward_row(float *drow, const float *row, int t, float scale)
{
    float dot = 0.0f;
    for (int t2 = 0; t2 <= t; t2++)
        dot += drow[t2] * row[t2];
    for (int t2 = 0; t2 <= t; t2++)
        drow[t2] = row[t2] * (drow[t2] - dot) * scale;
}

/* One (b, h) pair of the reference backward: it writes only head h's
 * columns of example b's dinp and its own block of datt. */
void gpt_attention_backward_ref_pair(float *dinp, float *datt, const float *dout, const float *inp,
                                     const float *att, int b, int h, int T, int C, int NH)
{
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int t = 0; t < T; t++) {
        const float *row = att + (((size_t)b * NH + h) * T + t) * T;
        float *drow = datt + (((size_t)b * NH + h) * T + t) * T;
        const float *d = dout + ((size_t)b * T + t) * C + h * hs;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *v = inp + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
            float *dv = dinp + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
            float acc = 0.0f;
            for (int i = 0; i < hs; i++) {
                acc += v[i] * d[i];
                dv[i] += row[t2] * d[i];
            }
            drow[t2] = acc;
        }
        gpt_softmax_backward_row(drow, row, t, scale);
        const float *q = inp + ((size_t)b * T + t) * C3 + h * hs;
        float *dq = dinp + ((size_t)b * T + t) * C3 + h * hs;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *k = inp + ((size_t)b * T + t2) * C3 + C + h * hs;
            float *dk = dinp + ((size_t)b * T + t2) * C3 + C + h * hs;
            for (int i = 0; i < hs; i++) {
                dq[i] += k[i] * drow[t2];
                dk[i] += q[i] * drow[t2];
            }
        }
    }
}

void gpt_attention_backward_pair(float *dinp, float *datt, const float *dout, const float *inp,
                                 const float *att, int b, int h, int T, int C, int NH)
{
    int hs = C / NH, C3 = 3 * C, m = gpt_attention_split(T), n = T - m;
    float scale = 1.0f / sqrtf((float)hs);
    const float *q = inp + (size_t)b * T * C3 + h * hs, *k = q + C, *v = q + 2 * C;
    const float *d = dout + (size_t)b * T * C + h * hs;
    float *dq = dinp + (size_t)b * T * C3 + h * hs, *dk = dq + C, *dv = dq + 2 * C;
    const float *a = att + ((size_t)b * NH + h) * T * T;
    float *da = datt + ((size_t)b * NH + h) * T * T;
    size_t mT = (size_t)m * T;
    /* da = dout v^T, the forward's split (the skipped block is zeroed below) */
    if (m)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, m, hs, 1.0f, d, C, v, C3, 0.0f, da, T);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, T, hs, 1.0f, d + (size_t)m * C, C, v, C3, 0.0f,
                da + mT, T);
    /* dv += a^T dout: dv[0, m) from all rows, dv[m, T) from rows [m, T) */
    if (m)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, hs, T, 1.0f, a, T, d, C, 1.0f, dv, C3);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, hs, n, 1.0f, a + mT + m, T, d + (size_t)m * C, C,
                1.0f, dv + (size_t)m * C3, C3);
    for (int t = 0; t < T; t++) {
        float *drow = da + (size_t)t * T;
        const float *row = a + (size_t)t * T;
        float dot = gpt_dot8(drow, row, t + 1);
        for (int t2 = 0; t2 <= t; t2++)
            drow[t2] = row[t2] * (drow[t2] - dot) * scale;
        if (t + 1 < T)
            memset(drow + t + 1, 0, (size_t)(T - t - 1) * sizeof(float));
    }
    /* dq += dpre k (the forward's split);  dk += dpre^T q (dv's split) */
    if (m) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, m, 1.0f, da, T, k, C3, 1.0f, dq, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, hs, T, 1.0f, da, T, q, C3, 1.0f, dk, C3);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, hs, T, 1.0f, da + mT, T, k, C3, 1.0f,
                dq + (size_t)m * C3, C3);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, hs, n, 1.0f, da + mT + m, T, q + (size_t)m * C3,
                C3, 1.0f, dk + (size_t)m * C3, C3);
}

/* datt [B, NH, T, T] is scratch (overwritten). dinp accumulates. */
void gpt_attention_backward_ref(float *dinp, float *datt, const float *dout, const float *inp,
                                const float *att, int B, int T, int C, int NH)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            gpt_attention_backward_ref_pair(dinp, datt, dout, inp, att, b, h, T, C, NH);
}

void gpt_attention_backward(float *dinp, float *datt, const float *dout, const float *inp, const float *att,
                            int B, int T, int C, int NH)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            gpt_attention_backward_pair(dinp, datt, dout, inp, att, b, h, T, C, NH);
}

/* ---- layer: residual ---- */

void gpt_residual_forward(float *out, const float *a, const float *b, size_t N)
{
    for (size_t i = 0; i < N; i++)
        out[i] = a[i] + b[i];
}

void gpt_residual_backward(float *da, float *db, const float *dout, size_t N)
{
    for (size_t i = 0; i < N; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}
