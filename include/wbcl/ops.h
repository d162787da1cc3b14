/* wbcl — basic operators every model needs.
 *
 * Elementwise ops accept y == x (in place). Row ops work on the last
 * dimension: a tensor of shape (..., d) is viewed as R = numel/d rows of d.
 * Each op has a CPU-shaped and a GPU-shaped kernel variant where it matters,
 * chosen by wbcl_context_set_variant (AUTO: by device type). */
#ifndef WBCL_OPS_H
#define WBCL_OPS_H

#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = (x - mean) / sqrt(var + eps) * gamma + beta over the last dimension d,
 * var the biased variance (PyTorch LayerNorm). gamma and beta are (d) tensors
 * or NULL (gamma = 1, beta = 0). eps > 0 and finite. y has x's shape. */
wbcl_status wbcl_layernorm(wbcl_context *ctx, const wbcl_tensor *x, const wbcl_tensor *gamma,
                           const wbcl_tensor *beta, float eps, wbcl_tensor *y);

/* y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) (exact GELU, PyTorch's default). */
wbcl_status wbcl_gelu(wbcl_context *ctx, const wbcl_tensor *x, wbcl_tensor *y);

/* Softmax over the last dimension, max-subtracted: finite for any finite input. */
wbcl_status wbcl_softmax(wbcl_context *ctx, const wbcl_tensor *x, wbcl_tensor *y);

/* y = a + b. b has a's shape, or the shape of a's trailing dimensions
 * (broadcast over the leading ones, e.g. a bias of shape (d)). */
wbcl_status wbcl_add(wbcl_context *ctx, const wbcl_tensor *a, const wbcl_tensor *b, wbcl_tensor *y);
/* y = alpha * x. */
wbcl_status wbcl_scale(wbcl_context *ctx, const wbcl_tensor *x, float alpha, wbcl_tensor *y);
/* y = max(x, 0). */
wbcl_status wbcl_relu(wbcl_context *ctx, const wbcl_tensor *x, wbcl_tensor *y);
/* y = alpha * x + beta * y (same shapes). */
wbcl_status wbcl_axpby(wbcl_context *ctx, float alpha, const wbcl_tensor *x, float beta, wbcl_tensor *y);

typedef enum wbcl_reduce_op {
    WBCL_REDUCE_SUM = 0,
    WBCL_REDUCE_MEAN = 1,
    WBCL_REDUCE_MAX = 2,
    WBCL_REDUCE_SUMSQ = 3 /* sum of squares */
} wbcl_reduce_op;

/* x viewed as (R, C), C = last dimension. reduce_rows: y[r] = op_c x[r, c],
 * y has R elements (any shape). reduce_cols: y[c] = op_r x[r, c], y has C
 * elements. Sums accumulate in float32 with row-block partials (CPU) or
 * work-group trees (GPU): error grows like log2(R) ulps, not R. */
wbcl_status wbcl_reduce_rows(wbcl_context *ctx, wbcl_reduce_op op, const wbcl_tensor *x, wbcl_tensor *y);
wbcl_status wbcl_reduce_cols(wbcl_context *ctx, wbcl_reduce_op op, const wbcl_tensor *x, wbcl_tensor *y);

#ifdef __cplusplus
}
#endif
#endif
