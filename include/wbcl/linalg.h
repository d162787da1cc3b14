/* wbcl — dense symmetric positive definite (SPD) linear algebra on the device.
 *
 * CLBlast has no factorizations, so wbcl has its own batched Cholesky:
 * one-matrix-per-work-item / per-work-group kernels for many small matrices,
 * and a blocked factorization for large ones (CPU-shaped: left-looking,
 * updates through the GEMM paths; GPU-shaped: right-looking, n / 128 rounds
 * of three launches, each round's panel solve overlapping its trailing update). Matrices are row-major (n, n) or batched
 * (batch, n, n); only the lower triangle of the input is read (the strict
 * upper triangle may hold anything, NaN included).
 *
 * A matrix that is not positive definite (a pivot <= 0 or not finite) is
 * reported as WBCL_ERROR_NUMERIC naming the batch entry and the pivot index;
 * the calls never return NaN silently. These calls wait for the device to
 * learn the pivot status.
 *
 * Details common to the four calls:
 *  - Non-SPD input: the message reads "<op>: matrix 2 of 5 is not positive
 *    definite (pivot 7 is -0.03)" (0-based matrix and pivot indices; the
 *    first failing matrix, with the count when several fail). The pivot is
 *    A_ii - sum_{p<i} L_ip^2 before its square root. A NaN or Inf anywhere in
 *    the lower triangle, or an overflow, reaches some pivot and is reported
 *    the same way ("pivot 5 is nan: non-finite input or overflow"). The
 *    outputs (L, logdet, Ainv, X) are then unspecified, possibly NaN, for
 *    every matrix of the batch; the input is unchanged unless it is also the
 *    output (wbcl_cholesky in place, wbcl_spd_solve with X == B).
 *  - Argument errors (NULL, shapes, another context, forbidden aliasing)
 *    return before anything is enqueued and leave the outputs untouched.
 *  - Accuracy: float32 throughout; the factorization is backward stable
 *    (||L L^T - A|| / ||A|| of order n * 2^-24), inverse and solve errors grow
 *    with the condition number of A.
 *  - Kernel variant (wbcl_context_set_variant): CPU-shaped or GPU-shaped
 *    kernels, same results to rounding. Large matrices go through the GEMM
 *    backend of the context (wbcl_gemm_strided), except the GPU-shaped
 *    Cholesky, whose trailing updates are its own lower-triangle kernel. */
#ifndef WBCL_LINALG_H
#define WBCL_LINALG_H

#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* L L^T = A; L lower triangular with the strict upper triangle set to 0.
 * L has A's shape. L may be A (in place). */
wbcl_status wbcl_cholesky(wbcl_context *ctx, const wbcl_tensor *A, wbcl_tensor *L);

/* logdet[b] = log det A_b = 2 sum_i log L_b[i,i]; logdet has `batch` elements
 * (any shape: (batch), (batch, 1), ...; 1 element for a 2-D A). */
wbcl_status wbcl_logdet_spd(wbcl_context *ctx, const wbcl_tensor *A, wbcl_tensor *logdet);

/* Ainv = A^-1 via Cholesky (exactly symmetric result), Ainv of A's shape.
 * Ainv must not be A. */
wbcl_status wbcl_spd_inverse(wbcl_context *ctx, const wbcl_tensor *A, wbcl_tensor *Ainv);

/* X = A^-1 B for B of shape (n, r) or (batch, n, r); B's batch must equal A's
 * (a 2-D A or B counts as batch 1). X has B's shape. X may be B, not A. */
wbcl_status wbcl_spd_solve(wbcl_context *ctx, const wbcl_tensor *A, const wbcl_tensor *B, wbcl_tensor *X);

#ifdef __cplusplus
}
#endif
#endif
