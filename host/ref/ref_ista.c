/* Double-precision references for ISTA and LASSO (SPEC.md §2), straight from
 * the equations: tokens as rows, the dictionary stored as W = D (d, m), so
 * D z is z W^T and D^T r is r W. No blocking, no tricks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/ref.h"

static double theta(double v, double t, int soft)
{
    if (soft) {
        double u = fabs(v) - t;
        return u > 0.0 ? (v < 0.0 ? -u : u) : (isnan(u) ? u : 0.0);
    }
    double u = v - t;
    return u < 0.0 ? 0.0 : u;
}

/* (rows, d) = (rows, m) W^T */
static void times_wt(size_t rows, size_t d, size_t m, const double *Z, const double *W, double *P)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < d; i++) {
            double s = 0.0;
            for (size_t j = 0; j < m; j++) s += Z[r * m + j] * W[i * m + j];
            P[r * d + i] = s;
        }
}

/* (rows, m) = (rows, d) W */
static void times_w(size_t rows, size_t d, size_t m, const double *P, const double *W, double *G)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < m; j++) {
            double s = 0.0;
            for (size_t i = 0; i < d; i++) s += P[r * d + i] * W[i * m + j];
            G[r * m + j] = s;
        }
}

void wbcl_ref_ista(size_t rows, size_t d, size_t m, const double *x, const double *z, const double *W, double eta,
                   double lambd, int soft, double *y)
{
    if (!z) z = x;
    double *P = malloc((rows * d > 0 ? rows * d : 1) * sizeof *P), *G = malloc((rows * m > 0 ? rows * m : 1) * sizeof *G);
    if (!P || !G) {
        free(P);
        free(G);
        for (size_t i = 0; i < rows * m; i++) y[i] = NAN;
        return;
    }
    times_wt(rows, d, m, z, W, P);
    for (size_t i = 0; i < rows * d; i++) P[i] -= x[i];
    times_w(rows, d, m, P, W, G);
    for (size_t i = 0; i < rows * m; i++) y[i] = theta(z[i] - eta * G[i], eta * lambd, soft);
    free(P);
    free(G);
}

void wbcl_ref_crate_ista(size_t rows, size_t d, const double *x, const double *W, double eta, double lambd, double *y)
{
    /* x1 = linear(x, W) = x W^T; grad_1 = linear(x1, W^T) = x1 W; grad_2 = linear(x, W^T) = x W;
     * out = relu(x + (eta (grad_2 - grad_1) - eta lambd)) */
    double *x1 = malloc(rows * d * sizeof *x1), *g1 = malloc(rows * d * sizeof *g1), *g2 = malloc(rows * d * sizeof *g2);
    if (!x1 || !g1 || !g2) {
        for (size_t i = 0; i < rows * d; i++) y[i] = NAN;
    } else {
        times_wt(rows, d, d, x, W, x1);
        times_w(rows, d, d, x1, W, g1);
        times_w(rows, d, d, x, W, g2);
        for (size_t i = 0; i < rows * d; i++) {
            double v = x[i] + (eta * (g2[i] - g1[i]) - eta * lambd);
            y[i] = v < 0.0 ? 0.0 : v;
        }
    }
    free(x1);
    free(g1);
    free(g2);
}

double wbcl_ref_lasso_objective(size_t rows, size_t d, size_t m, const double *X, const double *W, const double *Z,
                                double lambd)
{
    double l1 = 0.0, sq = 0.0;
    for (size_t i = 0; i < rows * m; i++) l1 += fabs(Z[i]);
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < d; i++) {
            double s = 0.0;
            for (size_t j = 0; j < m; j++) s += Z[r * m + j] * W[i * m + j];
            double e = X[r * d + i] - s;
            sq += e * e;
        }
    return lambd * l1 + 0.5 * sq;
}

void wbcl_ref_lasso(size_t rows, size_t d, size_t m, const double *X, const double *W, double lambd, int soft,
                    int fista, double t, size_t steps, double *Z, double *obj)
{
    size_t nz = rows * m;
    double *Y = malloc(nz * sizeof *Y), *Zp = malloc(nz * sizeof *Zp), *P = malloc(rows * d * sizeof *P),
           *G = malloc(nz * sizeof *G);
    if (!Y || !Zp || !P || !G) {
        for (size_t i = 0; i < nz; i++) Z[i] = NAN;
        goto done;
    }
    memcpy(Y, Z, nz * sizeof *Y);
    if (obj) obj[0] = wbcl_ref_lasso_objective(rows, d, m, X, W, Z, lambd);
    double s = 1.0;
    for (size_t k = 1; k <= steps; k++) {
        /* Z_k = theta(Y_k - t (Y_k W^T - X) W) */
        times_wt(rows, d, m, Y, W, P);
        for (size_t i = 0; i < rows * d; i++) P[i] -= X[i];
        times_w(rows, d, m, P, W, G);
        memcpy(Zp, Z, nz * sizeof *Zp);
        for (size_t i = 0; i < nz; i++) Z[i] = theta(Y[i] - t * G[i], t * lambd, soft);
        double s_next = 0.5 * (1.0 + sqrt(1.0 + 4.0 * s * s)), beta = fista ? (s - 1.0) / s_next : 0.0;
        s = s_next;
        for (size_t i = 0; i < nz; i++) Y[i] = Z[i] + beta * (Z[i] - Zp[i]);
        if (obj) obj[k] = wbcl_ref_lasso_objective(rows, d, m, X, W, Z, lambd);
    }
done:
    free(Y);
    free(Zp);
    free(P);
    free(G);
}

/* Largest eigenvalue of a symmetric q x q matrix by cyclic Jacobi rotations (A destroyed). */
static double jacobi_max_eig(size_t q, double *A)
{
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0.0, tot = 0.0;
        for (size_t i = 0; i < q; i++)
            for (size_t j = 0; j < q; j++) {
                tot += A[i * q + j] * A[i * q + j];
                if (i != j) off += A[i * q + j] * A[i * q + j];
            }
        if (off <= 1e-30 * tot || off == 0.0) break;
        for (size_t p = 0; p < q; p++)
            for (size_t r = p + 1; r < q; r++) {
                double apr = A[p * q + r];
                if (apr == 0.0) continue;
                double th = (A[r * q + r] - A[p * q + p]) / (2.0 * apr);
                double t = (th >= 0 ? 1.0 : -1.0) / (fabs(th) + sqrt(th * th + 1.0));
                double c = 1.0 / sqrt(t * t + 1.0), sn = t * c;
                for (size_t k = 0; k < q; k++) { /* columns p, r */
                    double akp = A[k * q + p], akr = A[k * q + r];
                    A[k * q + p] = c * akp - sn * akr;
                    A[k * q + r] = sn * akp + c * akr;
                }
                for (size_t k = 0; k < q; k++) { /* rows p, r */
                    double apk = A[p * q + k], ark = A[r * q + k];
                    A[p * q + k] = c * apk - sn * ark;
                    A[r * q + k] = sn * apk + c * ark;
                }
            }
    }
    double mx = q ? A[0] : 0.0;
    for (size_t i = 1; i < q; i++)
        if (A[i * q + i] > mx) mx = A[i * q + i];
    return mx;
}

double wbcl_ref_spectral_norm_sq(size_t d, size_t m, const double *W)
{
    size_t q = d <= m ? d : m;
    double *G = malloc((q * q > 0 ? q * q : 1) * sizeof *G);
    if (!G) return NAN;
    for (size_t a = 0; a < q; a++)
        for (size_t b = 0; b < q; b++) {
            double s = 0.0;
            if (d <= m)
                for (size_t j = 0; j < m; j++) s += W[a * m + j] * W[b * m + j]; /* W W^T */
            else
                for (size_t i = 0; i < d; i++) s += W[i * m + a] * W[i * m + b]; /* W^T W */
            G[a * q + b] = s;
        }
    double L = jacobi_max_eig(q, G);
    free(G);
    return L;
}
