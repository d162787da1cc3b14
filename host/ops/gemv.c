/* Linear layers of a few rows: Y (m, n) = act(X (m, k) Wᵀ + bias) for m <= WBCL_GEMV_ROWS, one
 * pass over W (cl/gemv.cl). wbcl__gemm_linear (host/ops/gemm.c) routes here after validating;
 * internal.h documents the contract. */
#include "internal.h"
#include "launch.h"

#define GEMV_R 4   /* rows of W per work-item of wbcl_gemv_cpu (cl/gemv.cl) */
#define GEMV_WG 64 /* work-group of wbcl_gemv_gpu (cl/gemv.cl): one per row of W */

wbcl_status wbcl__gemv_linear(wbcl_context *ctx, const wbcl_tensor *X, size_t m, size_t k, const wbcl_tensor *W,
                              size_t n, const wbcl_tensor *bias, int gelu, wbcl_tensor *Y)
{
    const int gpu = ctx->variant == WBCL_VARIANT_GPU;
    wbcl_kern *kn;
    wbcl_status r = wbcl__kernel(ctx, "gemv", NULL, gpu ? "wbcl_gemv_gpu" : "wbcl_gemv_cpu", &kn);
    if (r) return r;
    cl_int hb = bias != NULL, act = gelu != 0;
    cl_uint um = (cl_uint)m, un = (cl_uint)n, uk = (cl_uint)k;
    cl_mem bm = bias ? bias->mem : W->mem; /* no bias: any buffer, not read */
    WBCL_ARG(ctx, kn, 0, X->mem);
    WBCL_ARG(ctx, kn, 1, W->mem);
    WBCL_ARG(ctx, kn, 2, bm);
    WBCL_ARG(ctx, kn, 3, hb);
    WBCL_ARG(ctx, kn, 4, act);
    WBCL_ARG(ctx, kn, 5, Y->mem);
    WBCL_ARG(ctx, kn, 6, um);
    WBCL_ARG(ctx, kn, 7, un);
    WBCL_ARG(ctx, kn, 8, uk);
    if (gpu) {
        size_t g = n * GEMV_WG, l = GEMV_WG;
        return wbcl__launch(ctx, kn, 1, &g, &l);
    }
    return wbcl__launch_items(ctx, kn, (n + GEMV_R - 1) / GEMV_R);
}
