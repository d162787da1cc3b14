/* wbcl — double-precision CPU references, written straight from the
 * equations (no blocking, no tricks). Tests compare the device kernels with
 * them; tools use them for --verify. Row-major, same conventions as the ops. */
#ifndef WBCL_REF_H
#define WBCL_REF_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C = alpha op(A) op(B) + beta C; ta/tb nonzero = transposed; lda etc. are row strides of the stored matrices. */
void wbcl_ref_gemm(int ta, int tb, size_t m, size_t n, size_t k, double alpha, const double *A, size_t lda,
                   const double *B, size_t ldb, double beta, double *C, size_t ldc);
/* gamma/beta may be NULL. */
void wbcl_ref_layernorm(size_t rows, size_t d, const double *x, const double *gamma, const double *beta, double eps,
                        double *y);
void wbcl_ref_gelu(size_t n, const double *x, double *y);
void wbcl_ref_softmax(size_t rows, size_t d, const double *x, double *y);
/* op: 0 sum, 1 mean, 2 max, 3 sum of squares (as wbcl_reduce_op). */
void wbcl_ref_reduce_rows(int op, size_t rows, size_t cols, const double *x, double *y);
void wbcl_ref_reduce_cols(int op, size_t rows, size_t cols, const double *x, double *y);

/* Dense SPD linear algebra in double (n x n row-major). Return 0 on success,
 * or 1 + the index of the first non-positive pivot. */
int wbcl_ref_cholesky(size_t n, const double *A, double *L);
int wbcl_ref_logdet_spd(size_t n, const double *A, double *logdet);
int wbcl_ref_spd_inverse(size_t n, const double *A, double *Ainv);
int wbcl_ref_spd_solve(size_t n, size_t r, const double *A, const double *B, double *X);

#ifdef __cplusplus
}
#endif
#endif
