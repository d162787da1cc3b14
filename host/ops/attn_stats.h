/* Internals of the "statistics" attention variants: the kernel of family "tssa" specialized for
 * the head size and head count (host/ops/tssa.c, and this file), and the per-channel token
 * statistics that TSSA and XCA share (row-block sums of squares, inverse norms). The strided
 * views they read are host/core/views.h. Not installed, not public API. */
#ifndef WBCL_ATTN_STATS_H
#define WBCL_ATTN_STATS_H

#include "internal.h"
#include "views.h"

/* A kernel of family "tssa" built for head dimension p (-DWBCL_TSSA_P=p: unrolled channel loops)
 * when p <= WBCL_TSSA_P_MAX, and for K heads (-DWBCL_TSSA_K=K: logits in registers) when
 * K <= WBCL_TSSA_K_MAX; otherwise the generic code for that parameter. aligned: -DWBCL_TSSA_ALIGNED=1
 * (wbcl__hview_aligned). */
#define WBCL_TSSA_P_MAX 1024
#define WBCL_TSSA_K_MAX 64
wbcl_status wbcl__tssa_kernel(wbcl_context *ctx, size_t p, size_t K, int aligned, const char *name, wbcl_kern **out);
/* Lanes per token row of the GPU-shaped non-causal TSSA kernels (cl/tssa.cl, -DWBCL_TSSA_GLX) for
 * this context and shape, or 0 when they do not apply (a CPU-variant context, p or K beyond the
 * specialized range, more than 8 channels per work-item, or too little local memory). In a
 * GPU-variant context wbcl__tssa_kernel builds every kernel of the family with this option, so
 * TSSA, causal TSSA and XCA share one program. WBCL_TSSA_GLX=32|64|128|256 in the environment
 * overrides the choice where it is valid (a tuning knob for benchmarks). */
size_t wbcl__tssa_glx(const wbcl_context *ctx, size_t p, size_t K);
/* Block sums of w^2 over tokens into part (B, nblk, K*p) (cl/tssa.cl wbcl_tssa_rowsq). */
wbcl_status wbcl__rowsq(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hdims *dm, int aligned, size_t rb,
                        size_t nblk, cl_mem part);
/* inv[b, h, c] = 1 / max(||w[b, h, :, c]||_2, 1e-12) over tokens, inv (B, K*p) floats;
 * part is scratch of B * nblk * K*p floats (wbcl__row_blocks(N), host/core/launch.h). aligned: as
 * for wbcl__tssa_kernel (the caller's choice, so that one op uses one program build). */
wbcl_status wbcl__inv_norms(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hdims *dm, int aligned, cl_mem part,
                            cl_mem inv);

#endif
