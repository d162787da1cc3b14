/* wbcl — attention head layout. Tokens are (B, N, D) (or (N, D) with B = 1);
 * per-head tensors are (B, K, N, p). "Split heads" maps channel j = h*p + c to
 * (h, c), PyTorch's `rearrange('b n (h d) -> b h n d')`. */
#ifndef WBCL_HEADS_H
#define WBCL_HEADS_H

#include <stddef.h>
#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x is viewed as `chunks` consecutive column blocks of K*p channels (e.g. the
 * [q | k | v] output of a fused qkv projection has chunks = 3); block `chunk`
 * is split into y of shape (B, heads, N, p). y must not be x. */
wbcl_status wbcl_split_heads(wbcl_context *ctx, const wbcl_tensor *x, size_t heads, size_t chunk, size_t chunks,
                             wbcl_tensor *y);

/* y (B, K, N, p) -> x (B, N, K*p) (or (N, K*p) when B = 1). x must not be y. */
wbcl_status wbcl_merge_heads(wbcl_context *ctx, const wbcl_tensor *y, wbcl_tensor *x);

#ifdef __cplusplus
}
#endif
#endif
