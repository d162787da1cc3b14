/* Reference vector ReduNet in double precision, straight from SPEC.md §4.1
 * (book §5.1.1, Algorithms 5.1/5.2). No blocking, no tricks: the Gram
 * matrices are plain sums, the inverses and log-determinants go through a
 * textbook Cholesky factorization. Self-contained (its own Cholesky), so it
 * can serve as the oracle for the device linear algebra too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/ref.h"

/* L L^T = A (n x n, lower triangle read). Returns 0 or -1 if a pivot is not positive/finite. */
static int chol(size_t n, const double *A, double *L)
{
    memset(L, 0, n * n * sizeof *L);
    for (size_t j = 0; j < n; j++) {
        double s = A[j * n + j];
        for (size_t k = 0; k < j; k++) s -= L[j * n + k] * L[j * n + k];
        if (!(s > 0.0) || !isfinite(s)) return -1;
        double ljj = sqrt(s);
        L[j * n + j] = ljj;
        for (size_t i = j + 1; i < n; i++) {
            double t = A[i * n + j];
            for (size_t k = 0; k < j; k++) t -= L[i * n + k] * L[j * n + k];
            L[i * n + j] = t / ljj;
        }
    }
    return 0;
}

/* M = scale * (I + alpha G)^-1 and, if logdet != NULL, log det(I + alpha G). */
static int shifted_inverse(size_t n, const double *G, double alpha, double scale, double *M, double *logdet)
{
    double *A = malloc(n * n * sizeof *A), *L = malloc(n * n * sizeof *L), *col = malloc(n * sizeof *col);
    int rc = -1;
    if (!A || !L || !col) goto done;
    for (size_t i = 0; i < n * n; i++) A[i] = alpha * G[i];
    for (size_t i = 0; i < n; i++) A[i * n + i] += 1.0;
    if (chol(n, A, L)) goto done;
    if (logdet) {
        double s = 0.0;
        for (size_t i = 0; i < n; i++) s += log(L[i * n + i]);
        *logdet = 2.0 * s;
    }
    if (M) {
        /* column c of A^-1: solve L w = e_c, then L^T x = w */
        for (size_t c = 0; c < n; c++) {
            for (size_t i = 0; i < n; i++) {
                double t = i == c ? 1.0 : 0.0;
                for (size_t k = 0; k < i; k++) t -= L[i * n + k] * col[k];
                col[i] = t / L[i * n + i];
            }
            for (size_t i = n; i-- > 0;) {
                double t = col[i];
                for (size_t k = i + 1; k < n; k++) t -= L[k * n + i] * col[k];
                col[i] = t / L[i * n + i];
            }
            for (size_t i = 0; i < n; i++) M[i * n + c] = scale * col[i];
        }
    }
    rc = 0;
done:
    free(A);
    free(L);
    free(col);
    return rc;
}

/* G = sum over rows i with (labels == NULL or labels[i] == group) of z_i z_i^T; returns the count. */
static size_t gram(size_t m, size_t d, const double *Z, const int *labels, int group, double *G)
{
    size_t count = 0;
    memset(G, 0, d * d * sizeof *G);
    for (size_t i = 0; i < m; i++) {
        if (labels && labels[i] != group) continue;
        count++;
        const double *z = Z + i * d;
        for (size_t a = 0; a < d; a++)
            for (size_t b = 0; b < d; b++) G[a * d + b] += z[a] * z[b];
    }
    return count;
}

void wbcl_ref_redunet_normalize(size_t m, size_t d, double *Z)
{
    for (size_t i = 0; i < m; i++) {
        double *z = Z + i * d, s = 0.0;
        for (size_t a = 0; a < d; a++) s += z[a] * z[a];
        double nrm = sqrt(s);
        if (nrm < 1e-8) nrm = 1e-8;
        for (size_t a = 0; a < d; a++) z[a] /= nrm;
    }
}

int wbcl_ref_redunet_construct(size_t m, size_t d, size_t K, const double *Z, const int *y, double eps2, double *E,
                               double *C, double *gamma)
{
    double *G = malloc(d * d * sizeof *G);
    if (!G) return -1;
    int rc = 0;
    double a = (double)d / ((double)m * eps2);
    gram(m, d, Z, NULL, 0, G);
    if (shifted_inverse(d, G, a, a, E, NULL)) rc = -1;
    for (size_t j = 0; j < K && rc == 0; j++) {
        size_t mj = gram(m, d, Z, y, (int)j, G);
        if (mj == 0) {
            rc = 1 + (int)j;
            break;
        }
        double aj = (double)d / ((double)mj * eps2);
        if (gamma) gamma[j] = (double)mj / (double)m;
        if (shifted_inverse(d, G, aj, aj, C + j * d * d, NULL)) rc = -1;
    }
    free(G);
    return rc;
}

void wbcl_ref_redunet_apply(size_t m, size_t d, size_t K, const double *E, const double *C, const double *gamma,
                            double eta, double lambda, double *Z, int *yhat)
{
    double *c = malloc(K * d * sizeof *c), *e = malloc(d * sizeof *e), *u = malloc(K * sizeof *u);
    if (!c || !e || !u) goto done;
    for (size_t i = 0; i < m; i++) {
        double *z = Z + i * d;
        for (size_t r = 0; r < d; r++) {
            double s = 0.0;
            for (size_t k = 0; k < d; k++) s += E[r * d + k] * z[k];
            e[r] = s;
        }
        for (size_t j = 0; j < K; j++) {
            double nn = 0.0;
            for (size_t r = 0; r < d; r++) {
                double s = 0.0;
                for (size_t k = 0; k < d; k++) s += C[(j * d + r) * d + k] * z[k];
                c[j * d + r] = s;
                nn += s * s;
            }
            double nj = sqrt(nn);
            if (nj < 1e-8) nj = 1e-8;
            u[j] = -lambda * nj;
        }
        /* softmax, max-subtracted; ties of the argmax go to the lowest class */
        double mx = u[0];
        for (size_t j = 1; j < K; j++)
            if (u[j] > mx) mx = u[j];
        double den = 0.0;
        for (size_t j = 0; j < K; j++) {
            u[j] = exp(u[j] - mx);
            den += u[j];
        }
        size_t best = 0;
        for (size_t j = 0; j < K; j++) {
            u[j] /= den;
            if (u[j] > u[best]) best = j;
        }
        if (yhat) yhat[i] = (int)best;
        double s2 = 0.0;
        for (size_t r = 0; r < d; r++) {
            double g = e[r];
            for (size_t j = 0; j < K; j++) g -= gamma[j] * u[j] * c[j * d + r];
            z[r] += eta * g;
            s2 += z[r] * z[r];
        }
        double nrm = sqrt(s2);
        if (nrm < 1e-8) nrm = 1e-8;
        for (size_t r = 0; r < d; r++) z[r] /= nrm;
    }
done:
    free(c);
    free(e);
    free(u);
}

int wbcl_ref_redunet_objective(size_t m, size_t d, size_t K, const double *Z, const int *labels, double eps2,
                               double out[3])
{
    double *G = malloc(d * d * sizeof *G);
    if (!G) return -1;
    int rc = 0;
    double ld = 0.0, R, Rc = 0.0;
    gram(m, d, Z, NULL, 0, G);
    if (shifted_inverse(d, G, (double)d / ((double)m * eps2), 1.0, NULL, &ld)) rc = -1;
    R = 0.5 * ld;
    for (size_t j = 0; j < K && rc == 0; j++) {
        size_t mj = gram(m, d, Z, labels, (int)j, G);
        if (mj == 0) continue; /* empty groups are skipped */
        if (shifted_inverse(d, G, (double)d / ((double)mj * eps2), 1.0, NULL, &ld)) rc = -1;
        Rc += ((double)mj / (double)m) * 0.5 * ld;
    }
    free(G);
    out[0] = R - Rc;
    out[1] = R;
    out[2] = Rc;
    return rc;
}

int wbcl_ref_redunet_fit(size_t m, size_t d, size_t K, size_t L, const int *y, double eta, double eps2, double lambda,
                         double *Z, double *E_all, double *C_all, double *gamma, double *hist)
{
    double *E = malloc(d * d * sizeof *E), *C = malloc(K * d * d * sizeof *C), *g = malloc(K * sizeof *g);
    int *yhat = malloc((m ? m : 1) * sizeof *yhat);
    int rc = -1;
    if (!E || !C || !g || !yhat) goto done;
    wbcl_ref_redunet_normalize(m, d, Z);
    for (size_t l = 0; l < L; l++) {
        rc = wbcl_ref_redunet_construct(m, d, K, Z, y, eps2, E, C, g);
        if (rc) goto done;
        wbcl_ref_redunet_apply(m, d, K, E, C, g, eta, lambda, Z, yhat);
        if (E_all) memcpy(E_all + l * d * d, E, d * d * sizeof *E);
        if (C_all) memcpy(C_all + l * K * d * d, C, K * d * d * sizeof *C);
        if (hist && wbcl_ref_redunet_objective(m, d, K, Z, yhat, eps2, hist + 3 * l)) {
            rc = -1;
            goto done;
        }
    }
    if (gamma) memcpy(gamma, g, K * sizeof *g);
    rc = 0;
done:
    free(E);
    free(C);
    free(g);
    free(yhat);
    return rc;
}
