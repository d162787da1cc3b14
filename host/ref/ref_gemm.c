/* Reference GEMM in double precision, straight from the definition:
 *   C[i][j] = alpha * sum_p op(A)[i][p] * op(B)[p][j] + beta * C[i][j]
 * with op(A)[i][p] = ta ? A[p*lda + i] : A[i*lda + p] and likewise for B.
 * beta == 0 ignores C's old contents (NaN included), as BLAS does. */
#include "wbcl/ref.h"

void wbcl_ref_gemm(int ta, int tb, size_t m, size_t n, size_t k, double alpha, const double *A, size_t lda,
                   const double *B, size_t ldb, double beta, double *C, size_t ldc)
{
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (size_t p = 0; p < k; p++) {
                double a = ta ? A[p * lda + i] : A[i * lda + p];
                double b = tb ? B[j * ldb + p] : B[p * ldb + j];
                s += a * b;
            }
            double *c = &C[i * ldc + j];
            *c = beta == 0.0 ? alpha * s : alpha * s + beta * *c;
        }
    }
}
