/* Double-precision references for the white-box measures (SPEC.md §3),
 * straight from the equations: the d x d (or p x p) Gram as written, never
 * the smaller-side identity the device path uses. Tokens as rows. */
#include <math.h>
#include <stdlib.h>

#include "wbcl/ref.h"

/* 1/2 logdet(I + a A^T A) for A (N, q) with row stride lda. NAN on failure. */
static double half_logdet_gram(size_t N, size_t q, const double *A, size_t lda, double a)
{
    double *G = malloc((q * q > 0 ? q * q : 1) * sizeof *G);
    if (!G) return NAN;
    for (size_t i = 0; i < q; i++)
        for (size_t j = 0; j < q; j++) {
            double s = 0.0;
            for (size_t n = 0; n < N; n++) s += A[n * lda + i] * A[n * lda + j];
            G[i * q + j] = (i == j ? 1.0 : 0.0) + a * s;
        }
    double ld = NAN;
    if (wbcl_ref_logdet_spd(q, G, &ld) != 0) ld = NAN;
    free(G);
    return 0.5 * ld;
}

double wbcl_ref_coding_rate(size_t N, size_t d, const double *Z, double eps2)
{
    return half_logdet_gram(N, d, Z, d, (double)d / ((double)N * eps2));
}

/* W = Z U_k: (N, p) for every k, U (d, K p) */
static double *project(size_t N, size_t d, size_t kp, const double *Z, const double *U)
{
    double *W = malloc((N * kp > 0 ? N * kp : 1) * sizeof *W);
    if (!W) return NULL;
    for (size_t n = 0; n < N; n++)
        for (size_t c = 0; c < kp; c++) {
            double s = 0.0;
            for (size_t i = 0; i < d; i++) s += Z[n * d + i] * U[i * kp + c];
            W[n * kp + c] = s;
        }
    return W;
}

double wbcl_ref_coding_rate_subspaces(size_t N, size_t d, size_t K, size_t p, const double *Z, const double *U,
                                      double eps2)
{
    double *W = project(N, d, K * p, Z, U);
    if (!W) return NAN;
    double sum = 0.0;
    for (size_t k = 0; k < K; k++) sum += half_logdet_gram(N, p, W + k * p, K * p, (double)p / ((double)N * eps2));
    free(W);
    return sum;
}

double wbcl_ref_coding_rate_var(size_t N, size_t d, size_t K, size_t p, const double *Z, const double *U,
                                const double *Pi, double eps2)
{
    double *W = project(N, d, K * p, Z, U);
    if (!W) return NAN;
    double sum = 0.0;
    for (size_t k = 0; k < K; k++) {
        double nk = 0.0;
        for (size_t j = 0; j < N; j++) nk += Pi[k * N + j];
        if (!(nk > 0.0)) continue;
        double inner = 0.0;
        for (size_t i = 0; i < p; i++) {
            /* (U_k^T Z Diag(pi_k) Z^T U_k)_ii / N_k */
            double m = 0.0;
            for (size_t j = 0; j < N; j++) m += Pi[k * N + j] * W[j * K * p + k * p + i] * W[j * K * p + k * p + i];
            inner += log(1.0 + ((double)d / eps2) * (m / nk));
        }
        sum += nk / (double)N * inner;
    }
    free(W);
    return 0.5 * sum;
}

double wbcl_ref_sparsity(size_t N, size_t d, const double *Z, double threshold)
{
    double c = 0.0;
    for (size_t i = 0; i < N * d; i++) c += !(fabs(Z[i]) <= threshold);
    return c / ((double)N * (double)d);
}
