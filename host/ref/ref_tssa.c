/* Double-precision references for TSSA and causal TSSA (SPEC 1.4, 1.5),
 * written in the order of the ToST PyTorch code (Algorithms 1 and 2 of the
 * ToST paper, with the epsilons of SPEC): no blocking, no tricks except the
 * max subtraction in the softmax over heads. */
#include "wbcl/ref.h"

#include <math.h>
#include <stdlib.h>

void wbcl_ref_linear(size_t rows, size_t in, size_t out, const double *x, const double *W, const double *b,
                     double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < out; o++) {
            double s = b ? b[o] : 0.0;
            for (size_t i = 0; i < in; i++) s += x[r * in + i] * W[o * in + i];
            y[r * out + o] = s;
        }
}

/* softmax over the K values l[0..K-1] into pi (max-subtracted) */
static void softmax_heads(size_t K, const double *l, double *pi)
{
    double m = l[0], s = 0.0;
    for (size_t h = 1; h < K; h++) m = l[h] > m ? l[h] : m;
    for (size_t h = 0; h < K; h++) s += pi[h] = exp(l[h] - m);
    for (size_t h = 0; h < K; h++) pi[h] /= s;
}

void wbcl_ref_tssa(size_t B, size_t K, size_t N, size_t p, const double *w, const double *temp, double *y,
                   double *Pi)
{
    double *nrm = malloc(K * p * sizeof *nrm), *pi = malloc(K * N * sizeof *pi), *l = malloc(K * sizeof *l),
           *col = malloc(K * sizeof *col);
    if (!nrm || !pi || !l || !col) goto done;
    for (size_t b = 0; b < B; b++) {
        const double *wb = w + b * K * N * p;
        double *yb = y + b * K * N * p;
        /* w_normed = F.normalize(w, dim=-2): L2 over tokens, eps 1e-12 */
        for (size_t h = 0; h < K; h++)
            for (size_t c = 0; c < p; c++) {
                double s = 0.0;
                for (size_t n = 0; n < N; n++) s += wb[(h * N + n) * p + c] * wb[(h * N + n) * p + c];
                s = sqrt(s);
                nrm[h * p + c] = s > 1e-12 ? s : 1e-12;
            }
        /* Pi = softmax over heads of temp * sum_c w_normed^2 */
        for (size_t n = 0; n < N; n++) {
            for (size_t h = 0; h < K; h++) {
                double s = 0.0;
                for (size_t c = 0; c < p; c++) {
                    double u = wb[(h * N + n) * p + c] / nrm[h * p + c];
                    s += u * u;
                }
                l[h] = s * temp[h];
            }
            softmax_heads(K, l, col);
            for (size_t h = 0; h < K; h++) pi[h * N + n] = col[h];
        }
        for (size_t h = 0; h < K; h++) {
            double s = 1e-8;
            for (size_t n = 0; n < N; n++) s += pi[h * N + n];
            for (size_t c = 0; c < p; c++) {
                /* dots = (Pi / (Pi.sum + 1e-8)) @ w**2 ; attn = 1 / (1 + dots) */
                double dots = 0.0;
                for (size_t n = 0; n < N; n++)
                    dots += pi[h * N + n] / s * wb[(h * N + n) * p + c] * wb[(h * N + n) * p + c];
                double attn = 1.0 / (1.0 + dots);
                for (size_t n = 0; n < N; n++)
                    yb[(h * N + n) * p + c] = -wb[(h * N + n) * p + c] * pi[h * N + n] * attn;
            }
        }
        if (Pi)
            for (size_t i = 0; i < K * N; i++) Pi[b * K * N + i] = pi[i];
    }
done:
    free(nrm);
    free(pi);
    free(l);
    free(col);
}

void wbcl_ref_tssa_causal(size_t B, size_t K, size_t N, size_t p, const double *w, const double *temp,
                          const double *bias, size_t tmax, double *y, double *Pi)
{
    (void)tmax; /* the caller guarantees N <= tmax */
    double *S = malloc(K * p * sizeof *S), *Q = malloc(K * p * sizeof *Q), *P = malloc(K * sizeof *P),
           *l = malloc(K * sizeof *l), *pi = malloc(K * sizeof *pi);
    if (!S || !Q || !P || !l || !pi) goto done;
    for (size_t b = 0; b < B; b++) {
        const double *wb = w + b * K * N * p;
        double *yb = y + b * K * N * p;
        for (size_t i = 0; i < K * p; i++) S[i] = Q[i] = 0.0;
        for (size_t h = 0; h < K; h++) P[h] = 0.0;
        for (size_t t = 0; t < N; t++) {
            /* w_sq_normed = w_sq / cumsum(w_sq) + bias[:, t]; Pi = softmax_h(temp * sum_c) */
            for (size_t h = 0; h < K; h++) {
                double s = 0.0;
                for (size_t c = 0; c < p; c++) {
                    double w2 = wb[(h * N + t) * p + c] * wb[(h * N + t) * p + c];
                    S[h * p + c] += w2;
                    double den = S[h * p + c] > 1e-12 ? S[h * p + c] : 1e-12;
                    s += w2 / den + bias[h * tmax + t];
                }
                l[h] = temp[h] * s;
            }
            softmax_heads(K, l, pi);
            for (size_t h = 0; h < K; h++) {
                P[h] += pi[h];
                if (Pi) Pi[(b * K + h) * N + t] = pi[h];
                for (size_t c = 0; c < p; c++) {
                    double wv = wb[(h * N + t) * p + c];
                    Q[h * p + c] += pi[h] * wv * wv;
                    yb[(h * N + t) * p + c] = -wv * pi[h] / (1.0 + Q[h * p + c] / (P[h] + 1e-8));
                }
            }
        }
    }
done:
    free(S);
    free(Q);
    free(P);
    free(l);
    free(pi);
}

/* (B, N, K*p) -> (B, K, N, p) and back */
static void split(size_t B, size_t N, size_t K, size_t p, const double *x, double *w)
{
    for (size_t b = 0; b < B; b++)
        for (size_t n = 0; n < N; n++)
            for (size_t h = 0; h < K; h++)
                for (size_t c = 0; c < p; c++)
                    w[((b * K + h) * N + n) * p + c] = x[(b * N + n) * K * p + h * p + c];
}

static void merge(size_t B, size_t N, size_t K, size_t p, const double *w, double *x)
{
    for (size_t b = 0; b < B; b++)
        for (size_t n = 0; n < N; n++)
            for (size_t h = 0; h < K; h++)
                for (size_t c = 0; c < p; c++)
                    x[(b * N + n) * K * p + h * p + c] = w[((b * K + h) * N + n) * p + c];
}

static void tssa_layer(size_t B, size_t N, size_t d, size_t K, const double *x, const double *W, const double *b,
                       const double *temp, const double *bias, size_t tmax, int causal, const double *Wo,
                       const double *bo, double *y)
{
    size_t p = d / K, n = B * N * d;
    double *t0 = malloc(n * sizeof *t0), *t1 = malloc(n * sizeof *t1), *t2 = malloc(n * sizeof *t2);
    if (t0 && t1 && t2) {
        wbcl_ref_linear(B * N, d, d, x, W, b, t0);
        split(B, N, K, p, t0, t1);
        if (causal)
            wbcl_ref_tssa_causal(B, K, N, p, t1, temp, bias, tmax, t2, NULL);
        else
            wbcl_ref_tssa(B, K, N, p, t1, temp, t2, NULL);
        merge(B, N, K, p, t2, t0);
        wbcl_ref_linear(B * N, d, d, t0, Wo, bo, y);
    }
    free(t0);
    free(t1);
    free(t2);
}

void wbcl_ref_tssa_layer(size_t B, size_t N, size_t d, size_t K, const double *x, const double *W, const double *b,
                         const double *temp, const double *Wo, const double *bo, double *y)
{
    tssa_layer(B, N, d, K, x, W, b, temp, NULL, 0, 0, Wo, bo, y);
}

void wbcl_ref_tssa_causal_layer(size_t B, size_t N, size_t d, size_t K, const double *x, const double *W,
                                const double *b, const double *temp, const double *bias, size_t tmax,
                                const double *Wo, const double *bo, double *y)
{
    tssa_layer(B, N, d, K, x, W, b, temp, bias, tmax, 1, Wo, bo, y);
}
