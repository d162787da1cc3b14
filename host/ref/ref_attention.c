/* Double-precision references for softmax attention and MSSA (include/wbcl/ref.h),
 * straight from SPEC 1.1 / 1.2: per query, all scores, max-subtracted softmax,
 * weighted sum of values. The causal mask's -inf entries are left out of the
 * max and the sum (exp(-inf) = 0), which is the same thing without infinities. */
#include "wbcl/ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void wbcl_ref_attention_heads(size_t B, size_t K, size_t nq, size_t nk, size_t p, const double *q, const double *k,
                              const double *v, double scale, int causal, double *o)
{
    double *s = malloc((nk ? nk : 1) * sizeof *s);
    if (!s) return;
    const size_t shift = nk >= nq ? nk - nq : 0;
    for (size_t bh = 0; bh < B * K; bh++) {
        const double *Q = q + bh * nq * p, *Kh = k + bh * nk * p, *V = v + bh * nk * p;
        double *O = o + bh * nq * p;
        for (size_t i = 0; i < nq; i++) {
            const size_t nvis = causal ? (i + shift + 1 < nk ? i + shift + 1 : nk) : nk; /* keys j < nvis */
            double m = -HUGE_VAL;
            for (size_t j = 0; j < nvis; j++) {
                double d = 0.0;
                for (size_t c = 0; c < p; c++) d += Q[i * p + c] * Kh[j * p + c];
                s[j] = d * scale;
                if (s[j] > m) m = s[j];
            }
            double l = 0.0;
            for (size_t j = 0; j < nvis; j++) {
                s[j] = exp(s[j] - m);
                l += s[j];
            }
            for (size_t c = 0; c < p; c++) {
                double acc = 0.0;
                for (size_t j = 0; j < nvis; j++) acc += s[j] * V[j * p + c];
                O[i * p + c] = acc / l;
            }
        }
    }
    free(s);
}

/* y (rows, out) = x (rows, in) Wᵀ + b, W (out, in), b may be NULL */
static void linear(size_t rows, size_t in, size_t out, const double *x, const double *W, const double *b, double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (size_t i = 0; i < in; i++) acc += x[r * in + i] * W[o * in + i];
            y[r * out + o] = acc;
        }
}

/* columns [col0, col0 + K*p) of t (B, N, D) -> (B, K, N, p) */
static void split(size_t B, size_t N, size_t D, size_t col0, size_t K, size_t p, const double *t, double *h)
{
    for (size_t b = 0; b < B; b++)
        for (size_t hh = 0; hh < K; hh++)
            for (size_t n = 0; n < N; n++)
                for (size_t c = 0; c < p; c++)
                    h[((b * K + hh) * N + n) * p + c] = t[(b * N + n) * D + col0 + hh * p + c];
}

/* (B, K, N, p) -> (B, N, K*p) */
static void merge(size_t B, size_t K, size_t N, size_t p, const double *h, double *t)
{
    for (size_t b = 0; b < B; b++)
        for (size_t hh = 0; hh < K; hh++)
            for (size_t n = 0; n < N; n++)
                for (size_t c = 0; c < p; c++)
                    t[(b * N + n) * K * p + hh * p + c] = h[((b * K + hh) * N + n) * p + c];
}

void wbcl_ref_mha(size_t B, size_t N, size_t d, size_t heads, int causal, const double *x, const double *Wqkv,
                  const double *bqkv, const double *Wo, const double *bo, double *y)
{
    const size_t p = d / heads, rows = B * N;
    double *qkv = malloc(rows * 3 * d * sizeof *qkv), *q = malloc(rows * d * sizeof *q),
           *k = malloc(rows * d * sizeof *k), *v = malloc(rows * d * sizeof *v), *o = malloc(rows * d * sizeof *o),
           *om = malloc(rows * d * sizeof *om);
    if (qkv && q && k && v && o && om) {
        linear(rows, d, 3 * d, x, Wqkv, bqkv, qkv);
        split(B, N, 3 * d, 0, heads, p, qkv, q);
        split(B, N, 3 * d, d, heads, p, qkv, k);
        split(B, N, 3 * d, 2 * d, heads, p, qkv, v);
        wbcl_ref_attention_heads(B, heads, N, N, p, q, k, v, 1.0 / sqrt((double)p), causal, o);
        merge(B, heads, N, p, o, om);
        linear(rows, d, d, om, Wo, bo, y);
    }
    free(qkv); free(q); free(k); free(v); free(o); free(om);
}

void wbcl_ref_mssa(size_t B, size_t N, size_t d, size_t heads, size_t dim_head, int causal, const double *x,
                   const double *U, const double *Wo, const double *bo, double *y)
{
    const size_t p = dim_head, inner = heads * dim_head, rows = B * N;
    double *wt = malloc(rows * inner * sizeof *wt), *w = malloc(rows * inner * sizeof *w),
           *o = malloc(rows * inner * sizeof *o), *om = malloc(rows * inner * sizeof *om);
    if (wt && w && o && om) {
        linear(rows, d, inner, x, U, NULL, wt);
        split(B, N, inner, 0, heads, p, wt, w);
        wbcl_ref_attention_heads(B, heads, N, N, p, w, w, w, 1.0 / sqrt((double)p), causal, o);
        merge(B, heads, N, p, o, om);
        if (Wo) linear(rows, inner, d, om, Wo, bo, y);
        else memcpy(y, om, rows * inner * sizeof *y);
    }
    free(wt); free(w); free(o); free(om);
}
