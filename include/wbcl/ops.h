/* wbcl — basic operators every model needs.
 *
 * Elementwise ops and row ops accept y == x (in place). Row ops work on the
 * last dimension: a tensor of shape (..., d) is viewed as R = numel/d rows of d.
 * Each op has a CPU-shaped and a GPU-shaped kernel variant where it matters,
 * chosen by wbcl_context_set_variant (AUTO: by device type).
 * Every argument is validated before anything is enqueued: on failure the
 * outputs are untouched and wbcl_context_last_error names the op, the
 * argument and the shapes involved. Kernels index with 64-bit sizes. */
#ifndef WBCL_OPS_H
#define WBCL_OPS_H

#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = (x - mean) / sqrt(var + eps) * gamma + beta over the last dimension d,
 * var the biased variance (PyTorch LayerNorm), from the deviations about the
 * mean (corrected two-pass; never E[x^2] - E[x]^2): a constant row gives
 * exactly beta. gamma and beta are tensors of d elements (any shape) or NULL
 * (gamma = 1, beta = 0). eps > 0 and finite (else WBCL_ERROR_INVALID_ARGUMENT).
 * y has x's shape; y == x allowed. */
wbcl_status wbcl_layernorm(wbcl_context *ctx, const wbcl_tensor *x, const wbcl_tensor *gamma,
                           const wbcl_tensor *beta, float eps, wbcl_tensor *y);

/* y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) (exact GELU, PyTorch's default),
 * evaluated as 0.5 x erfc(-x / sqrt 2), which keeps full relative accuracy
 * for x << 0 (where 1 + erf cancels). */
wbcl_status wbcl_gelu(wbcl_context *ctx, const wbcl_tensor *x, wbcl_tensor *y);

/* Softmax over the last dimension, max-subtracted: finite for any finite input
 * (e.g. rows with +-1e30); -INFINITY entries give 0 as long as the row has a
 * finite entry (a row of only -INFINITY, or any +INFINITY/NaN, gives NaN). */
wbcl_status wbcl_softmax(wbcl_context *ctx, const wbcl_tensor *x, wbcl_tensor *y);

/* y = a + b. b has a's shape, or the shape of a's trailing dimensions
 * (broadcast over the leading ones, e.g. a bias of shape (d) or (N, d) on
 * (B, N, d)); leading dimensions of size 1 in b are ignored ((1, d) works
 * like (d)). y has a's shape; y == a is allowed, y == b only when b is not
 * broadcast (else WBCL_ERROR_INVALID_ARGUMENT). */
wbcl_status wbcl_add(wbcl_context *ctx, const wbcl_tensor *a, const wbcl_tensor *b, wbcl_tensor *y);
/* y = alpha * x. */
wbcl_status wbcl_scale(wbcl_context *ctx, const wbcl_tensor *x, float alpha, wbcl_tensor *y);
/* y = max(x, 0). */
wbcl_status wbcl_relu(wbcl_context *ctx, const wbcl_tensor *x, wbcl_tensor *y);
/* y = alpha * x + beta * y (same shapes; y == x allowed). As in BLAS, beta == 0
 * means y is not read (NaN in y does not propagate). */
wbcl_status wbcl_axpby(wbcl_context *ctx, float alpha, const wbcl_tensor *x, float beta, wbcl_tensor *y);

typedef enum wbcl_reduce_op {
    WBCL_REDUCE_SUM = 0,
    WBCL_REDUCE_MEAN = 1,
    WBCL_REDUCE_MAX = 2,
    WBCL_REDUCE_SUMSQ = 3 /* sum of squares */
} wbcl_reduce_op;

/* x viewed as (R, C), C = last dimension. reduce_rows: y[r] = op_c x[r, c],
 * y has R elements (any shape). reduce_cols: y[c] = op_r x[r, c], y has C
 * elements. y must not alias x. Sums accumulate in float32 in blocks: rows
 * in vector blocks of 256 with a compensated total (CPU) or strided partials
 * and a work-group tree (GPU); columns in row blocks of <= 64, the partial
 * rows combined level by level (log_64 R levels). The rounding error grows
 * with the block length times the number of levels, not with R. MAX uses
 * fmax: NaN entries are ignored unless all are NaN. */
wbcl_status wbcl_reduce_rows(wbcl_context *ctx, wbcl_reduce_op op, const wbcl_tensor *x, wbcl_tensor *y);
wbcl_status wbcl_reduce_cols(wbcl_context *ctx, wbcl_reduce_op op, const wbcl_tensor *x, wbcl_tensor *y);

#ifdef __cplusplus
}
#endif
#endif
