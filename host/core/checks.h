/* Argument checks of op implementations beyond those of internal.h (wbcl__check_tensor,
 * wbcl__check_same_shape): token and per-head shapes, head counts, element counts, exact shapes,
 * the kernels' 32-bit index range, no aliasing. Each sets the context's message (naming the op and
 * the argument) and returns the status to propagate. Not installed, not public API. */
#ifndef WBCL_CHECKS_H
#define WBCL_CHECKS_H

#include "internal.h"
#include "views.h"

/* t must be (B, K, N, p) (4-D); fills dims. `what` names it. */
wbcl_status wbcl__check_heads(wbcl_context *ctx, const wbcl_tensor *t, const char *op, const char *what,
                              wbcl__hdims *dims);
/* t must be (N, D) or (B, N, D); fills B, N, D. */
wbcl_status wbcl__check_tokens(wbcl_context *ctx, const wbcl_tensor *t, const char *op, const char *what, size_t *B,
                               size_t *N, size_t *D);
/* heads >= 1 must divide D (the message names both). */
wbcl_status wbcl__check_heads_divide(wbcl_context *ctx, const char *op, size_t D, size_t heads);
/* t must have exactly `n` elements (any shape), e.g. temp (K) or (K, 1). */
wbcl_status wbcl__check_numel(wbcl_context *ctx, const wbcl_tensor *t, const char *op, const char *what, size_t n,
                              const char *expect);
/* t must have the shape want[0..ndim-1]. */
wbcl_status wbcl__check_shape(wbcl_context *ctx, const wbcl_tensor *t, const char *op, const char *what, int ndim,
                              const size_t *want);
/* Sizes the kernels index with uint must fit: every one of n values < 2^32. */
wbcl_status wbcl__check_u32(wbcl_context *ctx, const char *op, size_t n, const size_t *v);
/* a and b must be different buffers. */
wbcl_status wbcl__check_distinct(wbcl_context *ctx, const char *op, const wbcl_tensor *a, const char *an,
                                 const wbcl_tensor *b, const char *bn);

#endif
