/* wbcl — white-box measures of token representations (SPEC.md §3): coding
 * rate, compression against subspaces, rate reduction, ToST's variational
 * compression, sparsity. Book eqs. 5.2.1-5.2.3, 5.3.8; CRATE §3.1, App. B.7.
 *
 * Tokens are rows: Z has shape (..., N, d); every leading index is one
 * sample (a "batch entry"), measured on its own, so each call fills one
 * double per batch entry (batch = product of the leading dimensions, 1 for a
 * 2-D Z). eps2 is epsilon^2 (as in ReduNet's code; > 0, finite).
 *
 *   R(Z)        = 1/2 logdet(I + d/(N eps2) Z^T Z)                                (5.2.2)
 *   Rc(Z | U)   = sum_k 1/2 logdet(I + p/(N eps2) (Z U_k)^T (Z U_k))               (5.2.3)
 *   dR          = R - Rc                                                           (5.2.1)
 *   Rvar(Z, Pi) = 1/2 sum_k (N_k/N) sum_{i<p} f( (1/N_k) sum_j Pi[k,j] (Z U_k)[j,i]^2 ),
 *                 N_k = sum_j Pi[k,j],  f(x) = log(1 + (d/eps2) x)                 (5.3.8)
 *   sparsity    = #{ |Z_ij| > threshold } / (N d)   (CRATE's ||Z||_0/(dN); App. B.7 plots
 *                 the complement #{|Z_ij| < threshold}/(dN), i.e. 1 minus this at a threshold
 *                 no entry equals)
 * Logs are natural. Subspaces: U holds [U_1, ..., U_K], each U_k (d, p), as a
 * (d, K p) matrix (tu = WBCL_NO_TRANS), or transposed, (K p, d), as CRATE's
 * qkv.weight and ToST's qkv.weight store it (tu = WBCL_TRANS: U_k^T z = rows
 * k p .. k p + p - 1 of the weight times z).
 *
 * Computation on the device: the Gram matrices by GEMM (of the smaller side:
 * logdet(I + a Z^T Z) = logdet(I + a Z Z^T), so an N x N Gram when N < d, and
 * likewise N x N for Rc when N < p), all K (and all batch entries') Grams in
 * batched GEMM calls, then one batched Cholesky log-determinant
 * (wbcl_logdet_spd) for all of them. Per-matrix results are read back and
 * summed in double. Every argument is validated before anything is enqueued. */
#ifndef WBCL_MEASURES_H
#define WBCL_MEASURES_H

#include <stddef.h>
#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"
#include "wbcl/gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* R[b] for each batch entry of Z (..., N, d). */
wbcl_status wbcl_coding_rate(wbcl_context *ctx, const wbcl_tensor *Z, double eps2, double *R);

/* Rc[b] against the K subspaces in U ((d, K p), or (K p, d) with tu = WBCL_TRANS). */
wbcl_status wbcl_coding_rate_subspaces(wbcl_context *ctx, const wbcl_tensor *Z, const wbcl_tensor *U,
                                       wbcl_transpose tu, size_t K, double eps2, double *Rc);

/* dR[b] = R[b] - Rc[b]; R and Rc (may be NULL) receive the two terms. */
wbcl_status wbcl_rate_reduction(wbcl_context *ctx, const wbcl_tensor *Z, const wbcl_tensor *U, wbcl_transpose tu,
                                size_t K, double eps2, double *dR, double *R, double *Rc);

/* Rvar[b] with memberships Pi (..., K, N) (the layout wbcl_tssa_* return; the
 * leading dimensions those of Z). Entries of Pi must be >= 0; a group with
 * N_k = 0 contributes 0. */
wbcl_status wbcl_coding_rate_var(wbcl_context *ctx, const wbcl_tensor *Z, const wbcl_tensor *U, wbcl_transpose tu,
                                 size_t K, const wbcl_tensor *Pi, double eps2, double *Rvar);

/* frac[b] = #{|Z_ij| > threshold} / (N d) for each batch entry; threshold >= 0
 * (0: the fraction of nonzeros). NaN entries count as nonzero. */
wbcl_status wbcl_sparsity(wbcl_context *ctx, const wbcl_tensor *Z, float threshold, double *frac);

#ifdef __cplusplus
}
#endif
#endif
