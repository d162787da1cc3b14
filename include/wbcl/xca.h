/* wbcl — XCA: cross-covariance attention (XCiT), the linear-time baseline
 * the ToST paper compares with (SPEC.md §1.6).
 *
 * Per head, with q, k, v viewed as (p, N) (channels by tokens):
 *   q^ = q / max(||q||_2 over tokens, 1e-12), k^ likewise (per channel)
 *   A  = softmax over the last index of (q^ k^T * temperature[h])   (p, p)
 *   o  = A v                                                         (p, N)
 * Time O(N p^2) per head, memory O(p^2) per head beyond q, k, v. CPU-variant contexts
 * take the p x p Gram matrices through the GEMM paths (include/wbcl/gemm.h); GPU-variant
 * contexts run three GPU-shaped kernels (token-sliced Gram partials, softmax, o = A v). */
#ifndef WBCL_XCA_H
#define WBCL_XCA_H

#include <stddef.h>
#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"
#include "wbcl/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* q, k, v, o: (B, K, N, p); temperature has K elements ((K), (K, 1) or
 * (K, 1, 1)). o must not be q, k or v. */
wbcl_status wbcl_xca_heads(wbcl_context *ctx, const wbcl_tensor *q, const wbcl_tensor *k, const wbcl_tensor *v,
                           const wbcl_tensor *temperature, wbcl_tensor *o);

/* attn.xca (XCiT XCA): q, k, v = split(x Wqkv^T + bqkv) as [q | k | v], each head-major;
 * out = merge(XCA(q, k, v)) Wp^T + bp. Keys: qkv.weight (3d, d), qkv.bias (3d)
 * [optional], temperature (K, 1, 1), proj.weight (d, d), proj.bias (d).
 * Loading, messages and work buffers as for wbcl_tssa_layer (include/wbcl/tssa.h). */
typedef struct wbcl_xca_layer wbcl_xca_layer;

/* From host arrays (copied): Wqkv (3d, d), bqkv (3d) or NULL, temperature (heads), Wp (d, d), bp (d) or NULL. */
wbcl_status wbcl_xca_layer_create(wbcl_context *ctx, size_t d, size_t heads, const float *Wqkv, const float *bqkv,
                                  const float *temperature, const float *Wp, const float *bp, wbcl_xca_layer **out);
wbcl_status wbcl_xca_layer_load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *prefix,
                                size_t d, size_t heads, wbcl_xca_layer **out);
/* x (B, N, d) or (N, d); out has x's shape and must not be x. */
wbcl_status wbcl_xca_layer_forward(wbcl_context *ctx, wbcl_xca_layer *layer, const wbcl_tensor *x, wbcl_tensor *out);
void wbcl_xca_layer_destroy(wbcl_xca_layer *layer); /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
#endif
