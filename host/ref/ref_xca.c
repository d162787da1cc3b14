/* Double-precision reference for XCiT's cross-covariance attention (SPEC 1.6),
 * in the order of the XCiT PyTorch code: normalize q and k over tokens
 * (F.normalize, eps 1e-12), attn = softmax((q^ @ k^T) * temperature) over the
 * last index, o = attn @ v, with q, k, v as (p, N) per head. */
#include "wbcl/ref.h"

#include <math.h>
#include <stdlib.h>

void wbcl_ref_xca(size_t B, size_t K, size_t N, size_t p, const double *q, const double *k, const double *v,
                  const double *temperature, double *o)
{
    double *nq = malloc(p * sizeof *nq), *nk = malloc(p * sizeof *nk), *A = malloc(p * p * sizeof *A);
    if (!nq || !nk || !A) goto done;
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < K; h++) {
            size_t base = (b * K + h) * N * p;
            for (size_t c = 0; c < p; c++) {
                double sq = 0.0, sk = 0.0;
                for (size_t n = 0; n < N; n++) {
                    sq += q[base + n * p + c] * q[base + n * p + c];
                    sk += k[base + n * p + c] * k[base + n * p + c];
                }
                sq = sqrt(sq);
                sk = sqrt(sk);
                nq[c] = sq > 1e-12 ? sq : 1e-12;
                nk[c] = sk > 1e-12 ? sk : 1e-12;
            }
            for (size_t c = 0; c < p; c++) {
                double m = -INFINITY;
                for (size_t e = 0; e < p; e++) {
                    double s = 0.0;
                    for (size_t n = 0; n < N; n++)
                        s += (q[base + n * p + c] / nq[c]) * (k[base + n * p + e] / nk[e]);
                    A[c * p + e] = s * temperature[h];
                    m = A[c * p + e] > m ? A[c * p + e] : m;
                }
                double z = 0.0;
                for (size_t e = 0; e < p; e++) z += A[c * p + e] = exp(A[c * p + e] - m);
                for (size_t e = 0; e < p; e++) A[c * p + e] /= z;
            }
            for (size_t n = 0; n < N; n++)
                for (size_t c = 0; c < p; c++) {
                    double s = 0.0;
                    for (size_t e = 0; e < p; e++) s += A[c * p + e] * v[base + n * p + e];
                    o[base + n * p + c] = s;
                }
        }
done:
    free(nq);
    free(nk);
    free(A);
}

void wbcl_ref_xca_layer(size_t B, size_t N, size_t d, size_t K, const double *x, const double *Wqkv,
                        const double *bqkv, const double *temperature, const double *Wp, const double *bp,
                        double *y)
{
    size_t p = d / K, n = B * N * d;
    double *qkv = malloc(3 * n * sizeof *qkv), *hq = malloc(n * sizeof *hq), *hk = malloc(n * sizeof *hk),
           *hv = malloc(n * sizeof *hv), *ho = malloc(n * sizeof *ho), *m = malloc(n * sizeof *m);
    if (qkv && hq && hk && hv && ho && m) {
        wbcl_ref_linear(B * N, d, 3 * d, x, Wqkv, bqkv, qkv);
        for (size_t b = 0; b < B; b++)
            for (size_t t = 0; t < N; t++)
                for (size_t h = 0; h < K; h++)
                    for (size_t c = 0; c < p; c++) {
                        size_t src = (b * N + t) * 3 * d + h * p + c, dst = ((b * K + h) * N + t) * p + c;
                        hq[dst] = qkv[src];
                        hk[dst] = qkv[src + d];
                        hv[dst] = qkv[src + 2 * d];
                    }
        wbcl_ref_xca(B, K, N, p, hq, hk, hv, temperature, ho);
        for (size_t b = 0; b < B; b++)
            for (size_t t = 0; t < N; t++)
                for (size_t h = 0; h < K; h++)
                    for (size_t c = 0; c < p; c++) m[(b * N + t) * d + h * p + c] = ho[((b * K + h) * N + t) * p + c];
        wbcl_ref_linear(B * N, d, d, m, Wp, bp, y);
    }
    free(qkv);
    free(hq);
    free(hk);
    free(hv);
    free(ho);
    free(m);
}
