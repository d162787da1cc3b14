/* Internals shared by host/ops/tssa.c, xca.c, aot.c, energy.c (the
 * "statistics" attention variants): strided per-head views, shape checks,
 * launch geometry, temporary buffers, linear projections and the layer
 * work buffers. Not installed, not public API. */
#ifndef WBCL_ATTN_STATS_H
#define WBCL_ATTN_STATS_H

#include "internal.h"
#include "wbcl/io.h"

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

/* Local size for kernels that loop inside each work-item (see host/ops/basic.c). */
size_t wbcl__loop_local(const wbcl_context *ctx, size_t items);
/* 1-D launch of `items` work-items with the local size above. */
wbcl_status wbcl__launch_items(wbcl_context *ctx, wbcl_kern *k, size_t items);

/* Token blocks of the row-block reductions: rb rows per block, nblk <= 64 blocks
 * (rb >= 16 unless N is smaller). */
void wbcl__row_blocks(size_t N, size_t *rb, size_t *nblk);

/* A temporary device buffer; released right after use (OpenCL keeps it alive
 * until the enqueued kernels that use it have run). */
wbcl_status wbcl__tmp(wbcl_context *ctx, size_t floats, const char *what, cl_mem *out);
void wbcl__tmp_release(cl_mem *m);
/* Zero-fills `floats` floats of a buffer. */
wbcl_status wbcl__zero(wbcl_context *ctx, cl_mem m, size_t floats);

/* y = x W^T (+ b): x (B, N, in) or (N, in), W (out, in), b (out) or NULL, y (.., out). */
wbcl_status wbcl__linear(wbcl_context *ctx, const wbcl_tensor *x, const wbcl_tensor *W, const wbcl_tensor *b,
                         wbcl_tensor *y);

/* (Re)creates *t with x's leading dimensions and last dimension `cols`, unless it already
 * has that shape. */
wbcl_status wbcl__work(wbcl_context *ctx, wbcl_tensor **t, const wbcl_tensor *x, size_t cols);

/* Weight loading for layers: prefix + name with the given shape. */
wbcl_status wbcl__load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *prefix,
                       const char *name, int ndim, const size_t *shape, int required, wbcl_tensor **out);
/* A device tensor from n host floats with the given shape (NULL data: *out = NULL, success). */
wbcl_status wbcl__from_host(wbcl_context *ctx, const float *data, int ndim, const size_t *shape, const char *op,
                            const char *what, wbcl_tensor **out);

/* A kernel of family "tssa" built for head dimension p (-DWBCL_TSSA_P=p: unrolled channel loops)
 * when p <= WBCL_TSSA_P_MAX, and for K heads (-DWBCL_TSSA_K=K: logits in registers) when
 * K <= WBCL_TSSA_K_MAX; otherwise the generic code for that parameter. */
#define WBCL_TSSA_P_MAX 1024
#define WBCL_TSSA_K_MAX 64
wbcl_status wbcl__tssa_kernel(wbcl_context *ctx, size_t p, size_t K, int aligned, const char *name, wbcl_kern **out);
/* 1 if every (b, h, n) row of the view starts on a multiple of 8 floats and p % 8 == 0: the
 * kernels may then use aligned float8 accesses (-DWBCL_TSSA_ALIGNED=1). */
int wbcl__hview_aligned(const wbcl__hview *v, size_t p);
/* Sets the five kernel arguments (mem, off, sb, sh, sn) of a view from index i. */
wbcl_status wbcl__set_view(wbcl_context *ctx, wbcl_kern *k, cl_uint i, const wbcl__hview *v);
/* Block sums of w^2 over tokens into part (B, nblk, K*p) (cl/tssa.cl wbcl_tssa_rowsq). */
wbcl_status wbcl__rowsq(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hdims *dm, int aligned, size_t rb,
                        size_t nblk, cl_mem part);
/* inv[b, h, c] = 1 / max(||w[b, h, :, c]||_2, 1e-12) over tokens, inv (B, K*p) floats;
 * part is scratch of B * nblk * K*p floats (wbcl__row_blocks(N)). aligned: as for
 * wbcl__tssa_kernel (the caller's choice, so that one op uses one program build). */
wbcl_status wbcl__inv_norms(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hdims *dm, int aligned, cl_mem part,
                            cl_mem inv);

#endif
