/* Reference SPD linear algebra in double precision, straight from the
 * equations (row-major n x n, only the lower triangle of A is read):
 *   L[i][j] = (A[i][j] - sum_{p<j} L[i][p] L[j][p]) / L[j][j]     (j < i)
 *   L[i][i] = sqrt(A[i][i] - sum_{p<i} L[i][p]^2)
 * A pivot A[i][i] - sum L[i][p]^2 that is not > 0 (or not finite) stops the
 * factorization: the functions return 1 + its index (the outputs are then
 * unspecified). logdet A = 2 sum_i log L[i][i]; A^-1 and A^-1 B by forward
 * substitution with L and back substitution with L^T. */
#include "wbcl/ref.h"

#include <math.h>
#include <stdlib.h>

int wbcl_ref_cholesky(size_t n, const double *A, double *L)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) L[i * n + j] = 0.0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j <= i; j++) {
            double s = A[i * n + j];
            for (size_t p = 0; p < j; p++) s -= L[i * n + p] * L[j * n + p];
            if (j < i) {
                L[i * n + j] = s / L[j * n + j];
            } else {
                if (!(s > 0.0) || isinf(s)) return (int)i + 1;
                L[i * n + i] = sqrt(s);
            }
        }
    }
    return 0;
}

int wbcl_ref_logdet_spd(size_t n, const double *A, double *logdet)
{
    double *L = malloc((n ? n * n : 1) * sizeof *L);
    if (!L) return -1;
    int rc = wbcl_ref_cholesky(n, A, L);
    double s = 0.0;
    for (size_t i = 0; i < n && !rc; i++) s += 2.0 * log(L[i * n + i]);
    *logdet = rc ? NAN : s;
    free(L);
    return rc;
}

/* L y = b, then L^T x = y, for one right-hand side column of stride `ld`. */
static void solve_column(size_t n, const double *L, const double *b, size_t ldb, double *x, size_t ldx, double *y)
{
    for (size_t i = 0; i < n; i++) {
        double s = b[i * ldb];
        for (size_t p = 0; p < i; p++) s -= L[i * n + p] * y[p];
        y[i] = s / L[i * n + i];
    }
    for (size_t i = n; i-- > 0;) {
        double s = y[i];
        for (size_t p = i + 1; p < n; p++) s -= L[p * n + i] * x[p * ldx];
        x[i * ldx] = s / L[i * n + i];
    }
}

int wbcl_ref_spd_solve(size_t n, size_t r, const double *A, const double *B, double *X)
{
    double *L = malloc((n ? n * n : 1) * sizeof *L);
    double *y = malloc((n ? n : 1) * sizeof *y);
    if (!L || !y) { free(L); free(y); return -1; }
    int rc = wbcl_ref_cholesky(n, A, L);
    for (size_t c = 0; c < r && !rc; c++) solve_column(n, L, B + c, r, X + c, r, y);
    free(L);
    free(y);
    return rc;
}

int wbcl_ref_spd_inverse(size_t n, const double *A, double *Ainv)
{
    double *I = calloc(n ? n * n : 1, sizeof *I);
    if (!I) return -1;
    for (size_t i = 0; i < n; i++) I[i * n + i] = 1.0;
    int rc = wbcl_ref_spd_solve(n, n, A, I, Ainv);
    free(I);
    /* symmetric by construction up to rounding; make it exactly symmetric */
    for (size_t i = 0; i < n && !rc; i++)
        for (size_t j = 0; j < i; j++) {
            double v = 0.5 * (Ainv[i * n + j] + Ainv[j * n + i]);
            Ainv[i * n + j] = Ainv[j * n + i] = v;
        }
    return rc;
}
