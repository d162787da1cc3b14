/* Strided views of per-head tensors: one (B, K, N, p) tensor, or head block `chunk` of a token tensor
 * (B, N, D), addressed alike by the kernels (base, offset and three strides), and the geometry of a
 * per-head problem. Used by the TSSA, XCA, AoT and energy ops. Not installed, not public API. */
#ifndef WBCL_VIEWS_H
#define WBCL_VIEWS_H

#include "internal.h"

/* Element (b, h, n, c) of a projected tensor is mem[off + b*sb + h*sh + n*sn + c]. */
typedef struct wbcl__hview {
    cl_mem mem;
    size_t off, sb, sh, sn;
} wbcl__hview;

/* Geometry of a per-head problem. */
typedef struct wbcl__hdims {
    size_t B, K, N, p;
} wbcl__hdims;

/* View of a (B, K, N, p) tensor. */
wbcl__hview wbcl__hview_heads(const wbcl_tensor *t);
/* View of head block `chunk` of a token tensor (B, N, chunks*K*p) (or (N, ...)). */
wbcl__hview wbcl__hview_tokens(const wbcl_tensor *t, size_t K, size_t p, size_t chunk, size_t chunks);
/* 1 if every (b, h, n) row of the view starts on a multiple of 8 floats and p % 8 == 0: the
 * kernels may then use aligned float8 accesses (-DWBCL_TSSA_ALIGNED=1, host/ops/attn_stats.h). */
int wbcl__hview_aligned(const wbcl__hview *v, size_t p);
/* Sets the five kernel arguments (mem, off, sb, sh, sn) of a view from index i. */
wbcl_status wbcl__set_view(wbcl_context *ctx, wbcl_kern *k, cl_uint i, const wbcl__hview *v);

#endif
