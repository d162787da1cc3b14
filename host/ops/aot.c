/* AoT denoising step and per-subspace SNR (include/wbcl/aot.h, SPEC 1.3).
 * Kernels in cl/aot.cl (family "aot"); the projections Z U and O U^T are GEMMs. */
#include "buffers.h"
#include "checks.h"
#include "launch.h"
#include "panels.h"
#include "views.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/aot.h"
#include "wbcl/attention.h"
#include "wbcl/gemm.h"

#define TRY(x)                     \
    do {                           \
        if ((st = (x))) goto done; \
    } while (0)

static wbcl_status check_phi(wbcl_context *ctx, const char *op, wbcl_aot_phi phi, float tau)
{
    if (phi != WBCL_AOT_SOFTMAX && phi != WBCL_AOT_THRESHOLD)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: unknown phi %d", op, (int)phi);
    if (phi == WBCL_AOT_THRESHOLD && !(tau > 0.5f && tau <= 1.0f))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: tau must lie in (1/2, 1] (got %g)", op, (double)tau);
    return WBCL_SUCCESS;
}

/* GPU-shaped step (cl/aot.cl wbcl_aot_attend_g): work-groups of AG_WG work-items, each owning AG_BQ
 * queries of one (b, h); p at most the column capacity -DWBCL_AOT_PC (16, 32, 64 or 128, the smallest
 * that holds p). Returns with *done 0 (nothing enqueued) where the shape or the device does not suit it
 * (p > 128, the compiled kernel refusing 256 work-items or needing more __local memory than the device
 * has): the CPU-shaped kernel runs instead, with the same results to rounding. */
#define AG_WG 256 /* cl/aot.cl AG_WG */
#define AG_PC_MAX 128

static size_t col_capacity(size_t p)
{
    size_t pc = 16;
    while (pc < p) pc *= 2;
    return pc;
}

static wbcl_status attend_gpu(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hview *o, const wbcl__hdims *dm,
                              int th, float tau, int *done)
{
    *done = 0;
    if (dm->p > AG_PC_MAX) return WBCL_SUCCESS;
    const size_t pc = col_capacity(dm->p), bq = pc > 64 ? 32 : 64;
    char opts[64];
    snprintf(opts, sizeof opts, "-DWBCL_AOT_PC=%zu", pc);
    wbcl_kern *k;
    size_t limit = 0;
    cl_ulong lmem = 0;
    wbcl_status st = wbcl__kernel(ctx, "aot", opts, "wbcl_aot_attend_g", &k);
    if (!st) st = wbcl__kernel_wg_limit(ctx, k, &limit);
    if (st) return st;
    cl_int e = clGetKernelWorkGroupInfo(k->kernel, ctx->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
    if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "querying the local memory of kernel 'wbcl_aot_attend_g'");
    if (limit < AG_WG || (ctx->info.local_mem_size && lmem > ctx->info.local_mem_size)) return WBCL_SUCCESS;
    cl_uint K = (cl_uint)dm->K, N = (cl_uint)dm->N, p = (cl_uint)dm->p;
    if ((st = wbcl__set_view(ctx, k, 0, w)) || (st = wbcl__set_view(ctx, k, 5, o))) return st;
    WBCL_ARG(ctx, k, 10, K);
    WBCL_ARG(ctx, k, 11, N);
    WBCL_ARG(ctx, k, 12, p);
    WBCL_ARG(ctx, k, 13, th);
    WBCL_ARG(ctx, k, 14, tau);
    const size_t g[2] = {(dm->N + bq - 1) / bq * AG_WG, dm->B * dm->K}, l[2] = {AG_WG, 1};
    *done = 1;
    return wbcl__launch(ctx, k, 2, g, l);
}

/* The softmax step is softmax attention with q = k = v = w and scale 1 (no 1/sqrt(p)): on the CPU
 * variant it runs the fused attention kernel (host/ops/attention.c: K/V packed into panels, scores and
 * outputs in register tiles, one pass over the keys with a running maximum) instead of
 * wbcl_aot_attend, which takes every dot product twice and is not register-blocked (~10x slower at
 * N 1024, p 64; perf/RESULTS.md, twelfth session). wt, ot: the tensors w and o view. */
static wbcl_status attend_as_attention(wbcl_context *ctx, const char *op, const wbcl_tensor *wt, const wbcl__hview *w,
                                       wbcl_tensor *ot, const wbcl__hview *o, const wbcl__hdims *dm)
{
    wbcl_attention_desc a;
    memset(&a, 0, sizeof a);
    a.batch = dm->B;
    a.heads = dm->K;
    a.n_q = a.n_k = dm->N;
    a.p = dm->p;
    a.scale = 1.0f;
    a.causal = 0;
    a.off_q = a.off_k = a.off_v = w->off;
    a.sb_q = a.sb_k = a.sb_v = w->sb;
    a.sh_q = a.sh_k = a.sh_v = w->sh;
    a.sn_q = a.sn_k = a.sn_v = w->sn;
    a.off_o = o->off;
    a.sb_o = o->sb;
    a.sh_o = o->sh;
    a.sn_o = o->sn;
    return wbcl__attention(ctx, op, &a, wt, wt, wt, ot);
}

/* The thresholded step (Theorem 5.1) on the CPU variant: cl/aot.cl wbcl_aot_threshold_cpu, one pass over
 * the keys keeping each row's maximum, normalizer and argmax (only the strict maximum can pass tau > 1/2),
 * the keys packed into panels of 16 (wbcl__pack_panels, host/ops/panels.h). */
#define AT_QB 6 /* cl/aot.cl AT_QB */

static wbcl_status threshold_cpu(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hview *o,
                                 const wbcl__hdims *dm, float tau)
{
    wbcl_kern *kt;
    wbcl_status st = wbcl__kernel(ctx, "aot", NULL, "wbcl_aot_threshold_cpu", &kt);
    if (st) return st;
    cl_mem wp = NULL;
    if ((st = wbcl__pack_panels(ctx, "AoT: packed keys", w, dm, &wp))) return st;
    const size_t BK = dm->B * dm->K;
    const cl_uint K = (cl_uint)dm->K, BK_ = (cl_uint)BK, N = (cl_uint)dm->N, p = (cl_uint)dm->p,
                  np = (cl_uint)wbcl__panel_count(dm->N);
#define ARG(k, i, var) WBCL_ARG_OR(st, done, ctx, k, i, var)
    if ((st = wbcl__set_view(ctx, kt, 0, w))) goto done;
    ARG(kt, 5, wp);
    if ((st = wbcl__set_view(ctx, kt, 6, o))) goto done;
    ARG(kt, 11, K);
    ARG(kt, 12, BK_);
    ARG(kt, 13, N);
    ARG(kt, 14, p);
    ARG(kt, 15, np);
    ARG(kt, 16, tau);
#undef ARG
    {
        const size_t g[2] = {(dm->N + AT_QB - 1) / AT_QB, BK}, l[2] = {1, 1};
        st = wbcl__launch(ctx, kt, 2, g, l);
    }
done:
    wbcl__tmp_release(&wp); /* OpenCL keeps it until the enqueued kernels have run */
    return st;
}

static wbcl_status attend(wbcl_context *ctx, const char *op, const wbcl_tensor *wt, const wbcl__hview *w,
                          wbcl_tensor *ot, const wbcl__hview *o, const wbcl__hdims *dm, wbcl_aot_phi phi, float tau)
{
    wbcl_kern *k;
    wbcl_status st;
    if (ctx->variant == WBCL_VARIANT_CPU && phi == WBCL_AOT_THRESHOLD) return threshold_cpu(ctx, w, o, dm, tau);
    /* (beyond the attention kernels' head dimension or token count: wbcl_aot_attend below) */
    if (ctx->variant == WBCL_VARIANT_CPU && dm->p <= WBCL_ATT_P_MAX && dm->N <= WBCL_ATT_N_MAX)
        return attend_as_attention(ctx, op, wt, w, ot, o, dm);
    if (ctx->variant == WBCL_VARIANT_GPU) {
        int done = 0;
        if ((st = attend_gpu(ctx, w, o, dm, phi == WBCL_AOT_THRESHOLD, tau, &done)) || done) return st;
    }
    st = wbcl__kernel(ctx, "aot", NULL, "wbcl_aot_attend", &k);
    if (st) return st;
    cl_uint B = (cl_uint)dm->B, K = (cl_uint)dm->K, N = (cl_uint)dm->N, p = (cl_uint)dm->p;
    cl_int th = phi == WBCL_AOT_THRESHOLD;
    if ((st = wbcl__set_view(ctx, k, 0, w)) || (st = wbcl__set_view(ctx, k, 5, o))) return st;
    WBCL_ARG(ctx, k, 10, B);
    WBCL_ARG(ctx, k, 11, K);
    WBCL_ARG(ctx, k, 12, N);
    WBCL_ARG(ctx, k, 13, p);
    WBCL_ARG(ctx, k, 14, th);
    WBCL_ARG(ctx, k, 15, tau);
    return wbcl__launch_items(ctx, k, dm->B * dm->K * dm->N);
}

wbcl_status wbcl_aot_heads(wbcl_context *ctx, const wbcl_tensor *w, wbcl_aot_phi phi, float tau, wbcl_tensor *o)
{
    static const char *op = "wbcl_aot_heads";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl__hdims dm;
    wbcl_status st = wbcl__check_heads(ctx, w, op, "w", &dm);
    if (!st) st = wbcl__check_tensor(ctx, o, op, "o");
    if (!st) st = wbcl__check_same_shape(ctx, w, o, op, "w", "o");
    if (!st) st = wbcl__check_distinct(ctx, op, o, "o", w, "w");
    if (!st) st = check_phi(ctx, op, phi, tau);
    if (st) return st;
    size_t sizes[2] = {dm.B * dm.K * dm.N, dm.p};
    if ((st = wbcl__check_u32(ctx, op, 2, sizes))) return st;
    wbcl__hview vw = wbcl__hview_heads(w), vo = wbcl__hview_heads(o);
    return attend(ctx, op, w, &vw, o, &vo, &dm, phi, tau);
}

/* Z tokens (B, N, d), U (d, heads * p): fills B, N, d, p */
static wbcl_status check_zu(wbcl_context *ctx, const char *op, const wbcl_tensor *Z, const wbcl_tensor *U,
                            size_t heads, size_t *B, size_t *N, size_t *d, size_t *p)
{
    wbcl_status st = wbcl__check_tokens(ctx, Z, op, "Z", B, N, d);
    if (!st) st = wbcl__check_tensor(ctx, U, op, "U");
    if (st) return st;
    if (U->ndim != 2 || U->shape[0] != *d || heads == 0 || U->shape[1] % heads) {
        char s[128];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'U' has shape %s, expected (%zu, heads * p) with %zu heads", op,
                          wbcl__shape_str(s, sizeof s, U->ndim, U->shape), *d, heads);
    }
    *p = U->shape[1] / heads;
    size_t sizes[3] = {*B * *N * heads, *d, U->shape[1]};
    return wbcl__check_u32(ctx, op, 3, sizes);
}

wbcl_status wbcl_aot_step(wbcl_context *ctx, const wbcl_tensor *Z, const wbcl_tensor *U, size_t heads, float eta,
                          wbcl_aot_phi phi, float tau, wbcl_tensor *Zout)
{
    static const char *op = "wbcl_aot_step";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t B = 0, N = 0, d = 0, p = 0;
    wbcl_status st = check_zu(ctx, op, Z, U, heads, &B, &N, &d, &p);
    if (!st) st = wbcl__check_tensor(ctx, Zout, op, "Zout");
    if (!st) st = wbcl__check_same_shape(ctx, Z, Zout, op, "Z", "Zout");
    if (!st) st = wbcl__check_distinct(ctx, op, Zout, "Zout", U, "U");
    if (!st) st = check_phi(ctx, op, phi, tau);
    if (st) return st;
    if (!isfinite(eta)) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: eta must be finite (got %g)", op, (double)eta);
    wbcl_tensor *W = NULL, *O = NULL;
    TRY(wbcl__work(ctx, &W, Z, heads * p));
    TRY(wbcl__work(ctx, &O, Z, heads * p));
    TRY(wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, Z, U, 0.0f, W));
    {
        wbcl__hdims dm = {B, heads, N, p};
        wbcl__hview vw = wbcl__hview_tokens(W, heads, p, 0, 1), vo = wbcl__hview_tokens(O, heads, p, 0, 1);
        TRY(attend(ctx, op, W, &vw, O, &vo, &dm, phi, tau));
    }
    if (Zout->mem != Z->mem) TRY(wbcl_tensor_copy(ctx, Z, Zout));
    TRY(wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_TRANS, eta, O, U, 1.0f, Zout));
done:
    wbcl_tensor_destroy(W);
    wbcl_tensor_destroy(O);
    return st;
}

wbcl_status wbcl_aot_snr(wbcl_context *ctx, const wbcl_tensor *Z, const wbcl_tensor *U, size_t heads,
                         const int *labels, double *snr)
{
    static const char *op = "wbcl_aot_snr";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t B = 0, N = 0, d = 0, p = 0;
    wbcl_status st = check_zu(ctx, op, Z, U, heads, &B, &N, &d, &p);
    if (st) return st;
    if (!labels || !snr) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'labels' or 'snr' is NULL", op);
    size_t rows = B * N;
    for (size_t r = 0; r < rows; r++)
        if (labels[r] < 0 || (size_t)labels[r] >= heads)
            return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: labels[%zu] = %d is outside [0, %zu)", op, r,
                              labels[r], heads);
    wbcl_tensor *W = NULL;
    cl_mem lab = NULL, out = NULL;
    float *h = NULL;
    TRY(wbcl__work(ctx, &W, Z, heads * p));
    TRY(wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, Z, U, 0.0f, W));
    TRY(wbcl__buffer(ctx, rows * sizeof(cl_int), "wbcl_aot_snr: labels", &lab));
    TRY(wbcl__tmp(ctx, 2 * rows, "wbcl_aot_snr: per-token sums", &out));
    {
        cl_int e = clEnqueueWriteBuffer(ctx->queue, lab, CL_TRUE, 0, rows * sizeof(cl_int), labels, 0, NULL, NULL);
        /* blocking: no queued read of the caller's labels outlives this call, error paths included */
        if (e != CL_SUCCESS) {
            st = wbcl__cl_fail(ctx, e, "%s: writing the labels", op);
            goto done;
        }
    }
    {
        wbcl_kern *k;
        TRY(wbcl__kernel(ctx, "aot", NULL, "wbcl_aot_snr_rows", &k));
        cl_uint ur = (cl_uint)rows, ud = (cl_uint)d, ukp = (cl_uint)(heads * p), up = (cl_uint)p;
        WBCL_ARG(ctx, k, 0, Z->mem);
        WBCL_ARG(ctx, k, 1, U->mem);
        WBCL_ARG(ctx, k, 2, W->mem);
        WBCL_ARG(ctx, k, 3, lab);
        WBCL_ARG(ctx, k, 4, ur);
        WBCL_ARG(ctx, k, 5, ud);
        WBCL_ARG(ctx, k, 6, ukp);
        WBCL_ARG(ctx, k, 7, up);
        WBCL_ARG(ctx, k, 8, out);
        TRY(wbcl__launch_items(ctx, k, rows));
    }
    h = malloc(2 * rows * sizeof *h);
    if (!h) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
        goto done;
    }
    {
        cl_int e = clEnqueueReadBuffer(ctx->queue, out, CL_TRUE, 0, 2 * rows * sizeof *h, h, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            st = wbcl__cl_fail(ctx, e, "%s: reading the per-token sums", op);
            goto done;
        }
    }
    for (size_t k = 0; k < heads; k++) {
        double sig = 0.0, noi = 0.0;
        size_t cnt = 0;
        for (size_t r = 0; r < rows; r++)
            if ((size_t)labels[r] == k) {
                sig += h[2 * r];
                noi += h[2 * r + 1];
                cnt++;
            }
        snr[k] = cnt ? sqrt(sig) / sqrt(noi) : NAN;
    }
done:
    free(h);
    wbcl_tensor_destroy(W);
    wbcl__tmp_release(&lab);
    wbcl__tmp_release(&out);
    return st;
}
