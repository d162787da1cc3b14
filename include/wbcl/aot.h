/* wbcl — the attention-only transformer's denoising step (AoT; book §5.3.1,
 * eq. 5.3.2, Theorem 5.1) and the per-subspace SNR (eq. 5.3.3). SPEC.md §1.3.
 *
 * Book form (tokens as columns): Z <- Z + eta sum_k U_k U_k^T Z phi(Z^T U_k U_k^T Z),
 * phi acting on each column. Here tokens are rows, Z : (N, d), and the
 * subspace bases are stacked as U = [U_1 ... U_K] : (d, K*p). With
 * w_k = Z U_k (N, p), the Gram matrix w_k w_k^T is symmetric, so the column
 * softmax of the book is the row softmax here:
 *   A_k = phi(w_k w_k^T)  (softmax over each row; no 1/sqrt(p) scale)
 *   Z  <- Z + eta sum_k A_k w_k U_k^T
 * phi is the softmax, or, for Theorem 5.1, h(softmax(.)) with h(s) = tau if
 * s > tau else 0, tau in (1/2, 1]. Time O(N^2 p) per head. */
#ifndef WBCL_AOT_H
#define WBCL_AOT_H

#include <stddef.h>
#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wbcl_aot_phi {
    WBCL_AOT_SOFTMAX = 0,   /* phi = softmax                              */
    WBCL_AOT_THRESHOLD = 1  /* phi = h_tau(softmax), Theorem 5.1          */
} wbcl_aot_phi;

/* Per-head kernel on projected tensors: o[b,h] = phi(w[b,h] w[b,h]^T) w[b,h]
 * for w, o : (B, K, N, p); tau is read only for WBCL_AOT_THRESHOLD and must
 * lie in (1/2, 1]. o must not be w. */
wbcl_status wbcl_aot_heads(wbcl_context *ctx, const wbcl_tensor *w, wbcl_aot_phi phi, float tau, wbcl_tensor *o);

/* One denoising step: Zout = Z + eta sum_k A_k (Z U_k) U_k^T.
 * Z, Zout : (B, N, d) or (N, d), same shape; Zout may be Z (in place).
 * U : (d, heads * p) (orthonormal columns in the theory; not checked).
 * eta finite. */
wbcl_status wbcl_aot_step(wbcl_context *ctx, const wbcl_tensor *Z, const wbcl_tensor *U, size_t heads, float eta,
                          wbcl_aot_phi phi, float tau, wbcl_tensor *Zout);

/* SNR(Z_k) = ||U_k U_k^T Z_k||_F / ||(I - U_k U_k^T) Z_k||_F for each subspace k,
 * Z_k the tokens (rows of Z, all batch entries) whose label is k.
 * labels: B*N host integers in [0, heads); snr: heads host doubles (receives
 * +inf for a noiseless class and NaN for a class without tokens). The
 * projections are formed explicitly (no ||z||^2 - ||U^T z||^2 cancellation);
 * per-token sums come from the device, the class sums are taken in double.
 * Waits for the device. */
wbcl_status wbcl_aot_snr(wbcl_context *ctx, const wbcl_tensor *Z, const wbcl_tensor *U, size_t heads,
                         const int *labels, double *snr);

#ifdef __cplusplus
}
#endif
#endif
