/* wbcl — dense symmetric positive definite (SPD) linear algebra on the device.
 *
 * CLBlast has no factorizations, so wbcl has its own batched Cholesky:
 * one-matrix-per-work-item / per-work-group kernels for many small matrices,
 * and a blocked right-looking factorization whose trailing updates go through
 * the GEMM paths for large ones. Matrices are row-major (n, n) or batched
 * (batch, n, n); only the lower triangle of the input is read.
 *
 * A matrix that is not positive definite (a pivot <= 0 or not finite) is
 * reported as WBCL_ERROR_NUMERIC naming the batch entry and the pivot index;
 * the calls never return NaN silently. These calls wait for the device to
 * learn the pivot status. */
#ifndef WBCL_LINALG_H
#define WBCL_LINALG_H

#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* L L^T = A; L lower triangular with the strict upper triangle set to 0.
 * L may be A (in place). */
wbcl_status wbcl_cholesky(wbcl_context *ctx, const wbcl_tensor *A, wbcl_tensor *L);

/* logdet[b] = log det A_b = 2 sum_i log L_b[i,i]; logdet has `batch` elements. */
wbcl_status wbcl_logdet_spd(wbcl_context *ctx, const wbcl_tensor *A, wbcl_tensor *logdet);

/* Ainv = A^-1 via Cholesky (symmetric result). Ainv must not be A. */
wbcl_status wbcl_spd_inverse(wbcl_context *ctx, const wbcl_tensor *A, wbcl_tensor *Ainv);

/* X = A^-1 B for B of shape (n, r) or (batch, n, r). X may be B. */
wbcl_status wbcl_spd_solve(wbcl_context *ctx, const wbcl_tensor *A, const wbcl_tensor *B, wbcl_tensor *X);

#ifdef __cplusplus
}
#endif
#endif
