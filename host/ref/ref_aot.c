/* Double-precision references for the AoT denoising step (book 5.3.2 with
 * the column softmax, or h_tau(softmax) of Theorem 5.1) and the per-subspace
 * SNR (5.3.3), tokens as rows (SPEC 1.3). */
#include "wbcl/ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* o = phi(w w^T) w for one (N, p) head, phi the row softmax (thresholded). */
static void aot_head(size_t N, size_t p, const double *w, size_t ld, int threshold, double tau, double *o,
                     size_t ldo, double *g)
{
    for (size_t i = 0; i < N; i++) {
        double m = -INFINITY;
        for (size_t j = 0; j < N; j++) {
            double s = 0.0;
            for (size_t c = 0; c < p; c++) s += w[i * ld + c] * w[j * ld + c];
            g[j] = s;
            m = s > m ? s : m;
        }
        double z = 0.0;
        for (size_t j = 0; j < N; j++) z += g[j] = exp(g[j] - m);
        for (size_t j = 0; j < N; j++) {
            double a = g[j] / z;
            g[j] = threshold ? (a > tau ? tau : 0.0) : a;
        }
        for (size_t c = 0; c < p; c++) {
            double s = 0.0;
            for (size_t j = 0; j < N; j++) s += g[j] * w[j * ld + c];
            o[i * ldo + c] = s;
        }
    }
}

void wbcl_ref_aot_heads(size_t B, size_t K, size_t N, size_t p, const double *w, int threshold, double tau,
                        double *o)
{
    double *g = malloc(N * sizeof *g);
    if (!g) return;
    for (size_t bh = 0; bh < B * K; bh++) aot_head(N, p, w + bh * N * p, p, threshold, tau, o + bh * N * p, p, g);
    free(g);
}

void wbcl_ref_aot_step(size_t B, size_t N, size_t d, size_t K, size_t p, const double *Z, const double *U,
                       double eta, int threshold, double tau, double *Zout)
{
    size_t kp = K * p;
    double *W = malloc(N * kp * sizeof *W), *O = malloc(N * kp * sizeof *O), *g = malloc(N * sizeof *g),
           *R = malloc(N * d * sizeof *R);
    if (!W || !O || !g || !R) goto done;
    for (size_t b = 0; b < B; b++) {
        const double *Zb = Z + b * N * d;
        /* W = Z U : (N, K*p) */
        for (size_t n = 0; n < N; n++)
            for (size_t j = 0; j < kp; j++) {
                double s = 0.0;
                for (size_t i = 0; i < d; i++) s += Zb[n * d + i] * U[i * kp + j];
                W[n * kp + j] = s;
            }
        for (size_t h = 0; h < K; h++) aot_head(N, p, W + h * p, kp, threshold, tau, O + h * p, kp, g);
        /* Zout = Z + eta O U^T */
        for (size_t n = 0; n < N; n++)
            for (size_t i = 0; i < d; i++) {
                double s = 0.0;
                for (size_t j = 0; j < kp; j++) s += O[n * kp + j] * U[i * kp + j];
                R[n * d + i] = Zb[n * d + i] + eta * s;
            }
        memcpy(Zout + b * N * d, R, N * d * sizeof *R);
    }
done:
    free(W);
    free(O);
    free(g);
    free(R);
}

void wbcl_ref_aot_snr(size_t rows, size_t d, size_t K, size_t p, const double *Z, const double *U,
                      const int *labels, double *snr)
{
    size_t kp = K * p;
    double *sig = calloc(K, sizeof *sig), *noi = calloc(K, sizeof *noi), *a = malloc(p * sizeof *a);
    int *cnt = calloc(K, sizeof *cnt);
    if (!sig || !noi || !a || !cnt) goto done;
    for (size_t r = 0; r < rows; r++) {
        size_t k = (size_t)labels[r];
        const double *z = Z + r * d;
        /* a = U_k^T z, then the projection U_k a, explicitly */
        for (size_t c = 0; c < p; c++) {
            double s = 0.0;
            for (size_t i = 0; i < d; i++) s += U[i * kp + k * p + c] * z[i];
            a[c] = s;
        }
        for (size_t i = 0; i < d; i++) {
            double s = 0.0;
            for (size_t c = 0; c < p; c++) s += U[i * kp + k * p + c] * a[c];
            sig[k] += s * s;
            noi[k] += (z[i] - s) * (z[i] - s);
        }
        cnt[k]++;
    }
    for (size_t k = 0; k < K; k++) snr[k] = cnt[k] ? sqrt(sig[k]) / sqrt(noi[k]) : NAN;
done:
    free(sig);
    free(noi);
    free(a);
    free(cnt);
}
