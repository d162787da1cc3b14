/* Double-precision references for energy-descent attention (SPEC 1.7,
 * seed 002 eq. 9, 38, 12, 16, 20): the unrolled step, the feed-forward
 * half of the heterogeneous layer and the energy E1. */
#include "wbcl/ref.h"

#include <math.h>
#include <stdlib.h>

/* 1/2 ||a - b||^2 over n entries with strides 1 */
static double half_dist2(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (a[i] - b[i]) * (a[i] - b[i]);
    return 0.5 * s;
}

/* rho'(z) up to a factor common to a row (exp: e^{-z}; log: 1/(z + c)) */
static double gamma_of(int rho, double z, double c) { return rho == 0 ? exp(-z) : 1.0 / (z + c); }

static double rho_of(int rho, double z, double c) { return rho == 0 ? -exp(-z) : log(z + c); }

void wbcl_ref_energy_heads(size_t B, size_t K, size_t N, size_t p, size_t pv, const double *y, const double *v,
                           int rho, double c, double alpha, double *out)
{
    if (!v) {
        v = y;
        pv = p;
    }
    double *acc = malloc(pv * sizeof *acc);
    if (!acc) return;
    for (size_t bh = 0; bh < B * K; bh++) {
        const double *yb = y + bh * N * p, *vb = v + bh * N * pv;
        double *ob = out + bh * N * pv;
        for (size_t u = 0; u < N; u++) {
            double den = 0.0;
            for (size_t c2 = 0; c2 < pv; c2++) acc[c2] = 0.0;
            for (size_t w = 0; w < N; w++) {
                double g = gamma_of(rho, half_dist2(yb + u * p, yb + w * p, p), c);
                den += g;
                for (size_t c2 = 0; c2 < pv; c2++) acc[c2] += g * vb[w * pv + c2];
            }
            for (size_t c2 = 0; c2 < pv; c2++) ob[u * pv + c2] = (1.0 - alpha) * vb[u * pv + c2] + alpha * acc[c2] / den;
        }
    }
    free(acc);
}

void wbcl_ref_energy_step(size_t B, size_t N, size_t d, const double *Z, const double *Wa, int rho, double c,
                          double alpha, double *Zout)
{
    if (!Wa) {
        wbcl_ref_energy_heads(B, 1, N, d, d, Z, NULL, rho, c, alpha, Zout);
        return;
    }
    double *Y = malloc(B * N * d * sizeof *Y);
    if (!Y) return;
    for (size_t r = 0; r < B * N; r++)
        for (size_t j = 0; j < d; j++) {
            double s = 0.0;
            for (size_t i = 0; i < d; i++) s += Z[r * d + i] * Wa[i * d + j];
            Y[r * d + j] = s;
        }
    wbcl_ref_energy_heads(B, 1, N, d, d, Y, Z, rho, c, alpha, Zout);
    free(Y);
}

void wbcl_ref_energy_ffn(size_t rows, size_t d, const double *U, const double *Wf, double alpha2, int relu,
                         double *Y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < d; j++) {
            double s = 0.0;
            for (size_t i = 0; i < d; i++) {
                double ws = (i == j ? 1.0 - alpha2 : 0.0) - alpha2 * 0.5 * (Wf[i * d + j] + Wf[j * d + i]);
                s += U[r * d + i] * ws;
            }
            Y[r * d + j] = relu && s < 0.0 ? 0.0 : s;
        }
}

double wbcl_ref_energy_e1(size_t N, size_t d, const double *Y, const double *Wa, int rho, double c, double *pair)
{
    const double *y = Y;
    double *tmp = NULL;
    if (Wa) {
        tmp = malloc(N * d * sizeof *tmp);
        if (!tmp) return NAN;
        for (size_t r = 0; r < N; r++)
            for (size_t j = 0; j < d; j++) {
                double s = 0.0;
                for (size_t i = 0; i < d; i++) s += Y[r * d + i] * Wa[i * d + j];
                tmp[r * d + j] = s;
            }
        y = tmp;
    }
    double ep = 0.0, er = 0.0;
    for (size_t u = 0; u < N; u++) {
        for (size_t v = 0; v < N; v++) ep += rho_of(rho, half_dist2(y + u * d, y + v * d, d), c);
        for (size_t j = 0; j < d; j++) er += 0.5 * y[u * d + j] * y[u * d + j];
    }
    free(tmp);
    if (pair) *pair = ep;
    return ep + er;
}
