/* Energy-descent attention (include/wbcl/energy.h, SPEC 1.7): the unrolled
 * step, the feed-forward half of the heterogeneous layer, the energy E1 and
 * the attn.energy layer. Kernels in cl/energy.cl (family "energy"); the
 * products Z W_a and U W_f^s are GEMMs. */
#include "buffers.h"
#include "checks.h"
#include "launch.h"
#include "model/model_internal.h"
#include "panels.h"
#include "views.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/energy.h"
#include "wbcl/gemm.h"
#include "wbcl/ops.h"
#include "wbcl/weights.h"

#define FAMILY "energy"

#define TRY(x)                     \
    do {                           \
        if ((st = (x))) goto done; \
    } while (0)

static wbcl_status check_rho(wbcl_context *ctx, const char *op, wbcl_energy_rho rho, float c)
{
    if (rho != WBCL_RHO_EXP && rho != WBCL_RHO_LOG)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: unknown rho %d (0 = exp, 1 = log)", op, (int)rho);
    if (rho == WBCL_RHO_LOG && !(c > 0.0f && isfinite(c)))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: c must be positive and finite for rho = log (got %g)",
                          op, (double)c);
    return WBCL_SUCCESS;
}

static wbcl_status check_alpha(wbcl_context *ctx, const char *op, float alpha)
{
    if (!(alpha > 0.0f && alpha <= 1.0f))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: alpha must lie in (0, 1] (got %g)", op, (double)alpha);
    return WBCL_SUCCESS;
}

/* W (d, d) */
static wbcl_status check_square(wbcl_context *ctx, const char *op, const char *what, const wbcl_tensor *W, size_t d)
{
    size_t want[2] = {d, d};
    return wbcl__check_shape(ctx, W, op, what, 2, want);
}

/* ---- GPU-shaped kernels (ctx->variant == GPU) -----------------------------------------------------
 * cl/energy.cl *_g: work-groups of EG_WG work-items, EG_BQ tokens each, the other tokens streamed in
 * __local tiles; the column count (p, pv or d) at most the capacity -DWBCL_ENERGY_PC (16, 32, 64 or 128,
 * the smallest that holds it). gpu_kernel gives NULL (the caller runs the CPU-shaped kernel, same
 * results to rounding) where the shape or the device does not suit it: more than 128 columns, the
 * compiled kernel refusing EG_WG work-items or needing more __local memory than the device has. */
#define EG_WG 256 /* cl/energy.cl EG_WG */
#define EG_PC_MAX 128

static size_t col_capacity(size_t p)
{
    size_t pc = 16;
    while (pc < p) pc *= 2;
    return pc;
}

static wbcl_status gpu_kernel(wbcl_context *ctx, size_t cols, const char *name, wbcl_kern **out, size_t *bq)
{
    *out = NULL;
    if (ctx->variant != WBCL_VARIANT_GPU || cols > EG_PC_MAX) return WBCL_SUCCESS;
    const size_t pc = col_capacity(cols);
    char opts[64];
    snprintf(opts, sizeof opts, "-DWBCL_ENERGY_PC=%zu", pc);
    wbcl_kern *k;
    size_t limit = 0;
    cl_ulong lmem = 0;
    wbcl_status st = wbcl__kernel(ctx, FAMILY, opts, name, &k);
    if (!st) st = wbcl__kernel_wg_limit(ctx, k, &limit);
    if (st) return st;
    cl_int e = clGetKernelWorkGroupInfo(k->kernel, ctx->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
    if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "querying the local memory of kernel '%s'", name);
    if (limit < EG_WG || (ctx->info.local_mem_size && lmem > ctx->info.local_mem_size)) return WBCL_SUCCESS;
    *out = k;
    *bq = pc > 64 ? 32 : 64;
    return WBCL_SUCCESS;
}

/* ---- CPU-shaped, register-tiled (ctx->variant == CPU) ----------------------------------------------
 * cl/energy.cl wbcl_energy_pack (the tokens y into panels of 16: wbcl__pack_panels, host/ops/panels.h)
 * and wbcl_energy_attend_cpu (4 tokens u per work-item against a panel at a time; o accumulated per panel).
 * Replaces wbcl_energy_attend there, which takes one token pair at a time and reads and writes o_u for
 * every token w (~10x slower at N 1024, p 64; perf/RESULTS.md, twelfth session). */
#define EC_QB 4 /* cl/energy.cl EC_QB */
#define ARG(k, i, var) WBCL_ARG_OR(st, done, ctx, k, i, var)

wbcl_status wbcl__pack_panels(wbcl_context *ctx, const char *what, const wbcl__hview *y, const wbcl__hdims *dm,
                              cl_mem *out)
{
    *out = NULL;
    const size_t BK = dm->B * dm->K, npan = wbcl__panel_count(dm->N);
    size_t n;
    if (!wbcl__mul_ok(BK, npan * WBCL_PANEL_ROWS, &n) || !wbcl__mul_ok(n, dm->p, &n) || n > SIZE_MAX / sizeof(float))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %zu x %zu rows of p %zu in panels overflow size_t", what, BK,
                          dm->N, dm->p);
    wbcl_kern *k;
    wbcl_status st = wbcl__kernel(ctx, FAMILY, NULL, "wbcl_energy_pack", &k);
    if (st || (st = wbcl__tmp(ctx, n, what, out))) return st;
    const cl_uint K = (cl_uint)dm->K, BK_ = (cl_uint)BK, N = (cl_uint)dm->N, p = (cl_uint)dm->p, np = (cl_uint)npan;
    if ((st = wbcl__set_view(ctx, k, 0, y))) goto done;
    ARG(k, 5, K);
    ARG(k, 6, BK_);
    ARG(k, 7, N);
    ARG(k, 8, p);
    ARG(k, 9, np);
    ARG(k, 10, *out);
    {
        const size_t g[2] = {npan * WBCL_PANEL_ROWS, BK}, l[2] = {WBCL_PANEL_ROWS, 1};
        st = wbcl__launch(ctx, k, 2, g, l);
    }
done:
    if (st) wbcl__tmp_release(out);
    return st;
}

static wbcl_status attend_cpu(wbcl_context *ctx, const wbcl__hview *y, const wbcl__hview *v, const wbcl__hview *o,
                              const wbcl__hdims *dm, size_t pv, wbcl_energy_rho rho, float c, float alpha)
{
    wbcl_kern *ka;
    wbcl_status st = wbcl__kernel(ctx, FAMILY, NULL, "wbcl_energy_attend_cpu", &ka);
    if (st) return st;
    cl_mem yp = NULL;
    if ((st = wbcl__pack_panels(ctx, "energy attention: packed tokens", y, dm, &yp))) return st;
    const size_t BK = dm->B * dm->K;
    const cl_uint K = (cl_uint)dm->K, BK_ = (cl_uint)BK, N = (cl_uint)dm->N, p = (cl_uint)dm->p, upv = (cl_uint)pv,
                  np = (cl_uint)wbcl__panel_count(dm->N);
    const cl_int r = (cl_int)rho;
    if ((st = wbcl__set_view(ctx, ka, 0, y))) goto done;
    ARG(ka, 5, yp);
    if ((st = wbcl__set_view(ctx, ka, 6, v)) || (st = wbcl__set_view(ctx, ka, 11, o))) goto done;
    ARG(ka, 16, K);
    ARG(ka, 17, BK_);
    ARG(ka, 18, N);
    ARG(ka, 19, p);
    ARG(ka, 20, upv);
    ARG(ka, 21, np);
    ARG(ka, 22, r);
    ARG(ka, 23, c);
    ARG(ka, 24, alpha);
    {
        const size_t g[2] = {(dm->N + EC_QB - 1) / EC_QB, BK}, l[2] = {1, 1};
        st = wbcl__launch(ctx, ka, 2, g, l);
    }
done:
    wbcl__tmp_release(&yp); /* OpenCL keeps it until the enqueued kernels have run */
    return st;
}
#undef ARG

static wbcl_status attend(wbcl_context *ctx, const wbcl__hview *y, const wbcl__hview *v, const wbcl__hview *o,
                          const wbcl__hdims *dm, size_t pv, wbcl_energy_rho rho, float c, float alpha)
{
    wbcl_kern *k;
    size_t bq = 0;
    if (ctx->variant == WBCL_VARIANT_CPU) return attend_cpu(ctx, y, v, o, dm, pv, rho, c, alpha);
    wbcl_status st = gpu_kernel(ctx, dm->p > pv ? dm->p : pv, "wbcl_energy_attend_g", &k, &bq);
    if (st) return st;
    if (k) {
        cl_uint K = (cl_uint)dm->K, N = (cl_uint)dm->N, p = (cl_uint)dm->p, upv = (cl_uint)pv;
        cl_int r = (cl_int)rho;
        if ((st = wbcl__set_view(ctx, k, 0, y)) || (st = wbcl__set_view(ctx, k, 5, v)) ||
            (st = wbcl__set_view(ctx, k, 10, o)))
            return st;
        WBCL_ARG(ctx, k, 15, K);
        WBCL_ARG(ctx, k, 16, N);
        WBCL_ARG(ctx, k, 17, p);
        WBCL_ARG(ctx, k, 18, upv);
        WBCL_ARG(ctx, k, 19, r);
        WBCL_ARG(ctx, k, 20, c);
        WBCL_ARG(ctx, k, 21, alpha);
        const size_t g[2] = {(dm->N + bq - 1) / bq * EG_WG, dm->B * dm->K}, l[2] = {EG_WG, 1};
        return wbcl__launch(ctx, k, 2, g, l);
    }
    st = wbcl__kernel(ctx, FAMILY, NULL, "wbcl_energy_attend", &k);
    if (st) return st;
    cl_uint B = (cl_uint)dm->B, K = (cl_uint)dm->K, N = (cl_uint)dm->N, p = (cl_uint)dm->p, upv = (cl_uint)pv;
    cl_int r = (cl_int)rho;
    if ((st = wbcl__set_view(ctx, k, 0, y)) || (st = wbcl__set_view(ctx, k, 5, v)) ||
        (st = wbcl__set_view(ctx, k, 10, o)))
        return st;
    WBCL_ARG(ctx, k, 15, B);
    WBCL_ARG(ctx, k, 16, K);
    WBCL_ARG(ctx, k, 17, N);
    WBCL_ARG(ctx, k, 18, p);
    WBCL_ARG(ctx, k, 19, upv);
    WBCL_ARG(ctx, k, 20, r);
    WBCL_ARG(ctx, k, 21, c);
    WBCL_ARG(ctx, k, 22, alpha);
    return wbcl__launch_items(ctx, k, dm->B * dm->K * dm->N);
}

wbcl_status wbcl_energy_heads(wbcl_context *ctx, const wbcl_tensor *y, const wbcl_tensor *v, wbcl_energy_rho rho,
                              float c, float alpha, wbcl_tensor *out)
{
    static const char *op = "wbcl_energy_heads";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl__hdims dm, dv;
    wbcl_status st = wbcl__check_heads(ctx, y, op, "y", &dm);
    if (!st && v) {
        st = wbcl__check_heads(ctx, v, op, "v", &dv);
        if (!st && (dv.B != dm.B || dv.K != dm.K || dv.N != dm.N)) {
            char s1[128], s2[128];
            st = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'v' of shape %s does not match 'y' of shape %s in (B, K, N)",
                            op, wbcl__shape_str(s1, sizeof s1, v->ndim, v->shape),
                            wbcl__shape_str(s2, sizeof s2, y->ndim, y->shape));
        }
    }
    const wbcl_tensor *vv = v ? v : y;
    if (!st) st = wbcl__check_tensor(ctx, out, op, "out");
    if (!st) st = wbcl__check_same_shape(ctx, vv, out, op, v ? "v" : "y", "out");
    if (!st) st = wbcl__check_distinct(ctx, op, out, "out", y, "y");
    if (!st) st = wbcl__check_distinct(ctx, op, out, "out", v, "v");
    if (!st) st = check_rho(ctx, op, rho, c);
    if (!st) st = check_alpha(ctx, op, alpha);
    if (st) return st;
    size_t pv = vv->shape[3], sizes[3] = {dm.B * dm.K * dm.N, dm.p, pv};
    if ((st = wbcl__check_u32(ctx, op, 3, sizes))) return st;
    wbcl__hview vy = wbcl__hview_heads(y), vvv = wbcl__hview_heads(vv), vo = wbcl__hview_heads(out);
    return attend(ctx, &vy, &vvv, &vo, &dm, pv, rho, c, alpha);
}

/* Z tokens with optional Wa; fills B, N, d */
static wbcl_status check_z(wbcl_context *ctx, const char *op, const char *zn, const wbcl_tensor *Z,
                           const wbcl_tensor *Wa, const char *wn, size_t *B, size_t *N, size_t *d)
{
    wbcl_status st = wbcl__check_tokens(ctx, Z, op, zn, B, N, d);
    if (!st && Wa) st = check_square(ctx, op, wn, Wa, *d);
    if (st) return st;
    size_t sizes[2] = {*B * *N, *d};
    return wbcl__check_u32(ctx, op, 2, sizes);
}

wbcl_status wbcl_energy_step(wbcl_context *ctx, const wbcl_tensor *Z, const wbcl_tensor *Wa, wbcl_energy_rho rho,
                             float c, float alpha, wbcl_tensor *Zout)
{
    static const char *op = "wbcl_energy_step";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t B = 0, N = 0, d = 0;
    wbcl_status st = check_z(ctx, op, "Z", Z, Wa, "W_a", &B, &N, &d);
    if (!st) st = wbcl__check_tensor(ctx, Zout, op, "Zout");
    if (!st) st = wbcl__check_same_shape(ctx, Z, Zout, op, "Z", "Zout");
    if (!st) st = wbcl__check_distinct(ctx, op, Zout, "Zout", Z, "Z");
    if (!st) st = wbcl__check_distinct(ctx, op, Zout, "Zout", Wa, "W_a");
    if (!st) st = check_rho(ctx, op, rho, c);
    if (!st) st = check_alpha(ctx, op, alpha);
    if (st) return st;
    wbcl_tensor *Y = NULL;
    const wbcl_tensor *ysrc = Z;
    if (Wa) {
        TRY(wbcl__work(ctx, &Y, Z, d));
        TRY(wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, Z, Wa, 0.0f, Y));
        ysrc = Y;
    }
    {
        wbcl__hdims dm = {B, 1, N, d};
        wbcl__hview vy = wbcl__hview_tokens(ysrc, 1, d, 0, 1), vz = wbcl__hview_tokens(Z, 1, d, 0, 1),
                    vo = wbcl__hview_tokens(Zout, 1, d, 0, 1);
        TRY(attend(ctx, &vy, &vz, &vo, &dm, d, rho, c, alpha));
    }
done:
    wbcl_tensor_destroy(Y);
    return st;
}

wbcl_status wbcl_energy_ffn(wbcl_context *ctx, const wbcl_tensor *U, const wbcl_tensor *Wf, float alpha2, int relu,
                            wbcl_tensor *Y)
{
    static const char *op = "wbcl_energy_ffn";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t B = 0, N = 0, d = 0;
    wbcl_status st = check_z(ctx, op, "U", U, NULL, NULL, &B, &N, &d);
    if (!st) st = check_square(ctx, op, "W_f", Wf, d);
    if (!st) st = wbcl__check_tensor(ctx, Y, op, "Y");
    if (!st) st = wbcl__check_same_shape(ctx, U, Y, op, "U", "Y");
    if (!st) st = wbcl__check_distinct(ctx, op, Y, "Y", U, "U");
    if (!st) st = wbcl__check_distinct(ctx, op, Y, "Y", Wf, "W_f");
    if (st) return st;
    if (!isfinite(alpha2))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: alpha2 must be finite (got %g)", op, (double)alpha2);
    wbcl_tensor *Ws = NULL;
    size_t dd[2] = {d, d};
    TRY(wbcl_tensor_create(ctx, 2, dd, WBCL_F32, NULL, &Ws));
    {
        wbcl_kern *k;
        TRY(wbcl__kernel(ctx, FAMILY, NULL, "wbcl_energy_sym", &k));
        cl_uint ud = (cl_uint)d;
        WBCL_ARG(ctx, k, 0, Wf->mem);
        WBCL_ARG(ctx, k, 1, ud);
        WBCL_ARG(ctx, k, 2, alpha2);
        WBCL_ARG(ctx, k, 3, Ws->mem);
        size_t g[1] = {d * d}, l[1] = {ctx->params.wg_size > 0 ? (size_t)ctx->params.wg_size : 64};
        TRY(wbcl__launch(ctx, k, 1, g, l));
    }
    TRY(wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, U, Ws, 0.0f, Y));
    if (relu) TRY(wbcl_relu(ctx, Y, Y));
done:
    wbcl_tensor_destroy(Ws);
    return st;
}

static wbcl_status e1_gpu(wbcl_context *ctx, wbcl_kern *k, wbcl_kern *ks, cl_mem y, cl_ulong off, cl_ulong sb,
                          cl_ulong sn, cl_uint B, cl_uint N, cl_uint d, cl_int rho, float c, cl_mem rows, cl_mem E,
                          size_t bq)
{
    WBCL_ARG(ctx, k, 0, y);
    WBCL_ARG(ctx, k, 1, off);
    WBCL_ARG(ctx, k, 2, sb);
    WBCL_ARG(ctx, k, 3, sn);
    WBCL_ARG(ctx, k, 4, N);
    WBCL_ARG(ctx, k, 5, d);
    WBCL_ARG(ctx, k, 6, rho);
    WBCL_ARG(ctx, k, 7, c);
    WBCL_ARG(ctx, k, 8, rows);
    const size_t g[2] = {((size_t)N + bq - 1) / bq * EG_WG, B}, l[2] = {EG_WG, 1};
    wbcl_status st = wbcl__launch(ctx, k, 2, g, l);
    if (st) return st;
    WBCL_ARG(ctx, ks, 0, rows);
    WBCL_ARG(ctx, ks, 1, N);
    WBCL_ARG(ctx, ks, 2, E);
    const size_t gs[1] = {(size_t)B * EG_WG}, ls[1] = {EG_WG};
    return wbcl__launch(ctx, ks, 1, gs, ls);
}

wbcl_status wbcl_energy_e1(wbcl_context *ctx, const wbcl_tensor *Yin, const wbcl_tensor *Wa, wbcl_energy_rho rho,
                           float c, wbcl_tensor *E)
{
    static const char *op = "wbcl_energy_e1";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t B = 0, N = 0, d = 0;
    wbcl_status st = check_z(ctx, op, "Y", Yin, Wa, "W_a", &B, &N, &d);
    if (!st) st = wbcl__check_numel(ctx, E, op, "E", B, "(B)");
    if (!st) st = wbcl__check_distinct(ctx, op, E, "E", Yin, "Y");
    if (!st) st = check_rho(ctx, op, rho, c);
    if (st) return st;
    wbcl_tensor *Yw = NULL;
    cl_mem rows = NULL;
    const wbcl_tensor *Y = Yin;
    if (Wa) {
        TRY(wbcl__work(ctx, &Yw, Yin, d));
        TRY(wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, Yin, Wa, 0.0f, Yw));
        Y = Yw;
    }
    {
        size_t esz = ctx->info.has_fp64 ? sizeof(double) : sizeof(float);
        TRY(wbcl__buffer(ctx, B * N * esz, "wbcl_energy_e1: per-token sums", &rows));
        wbcl_kern *k;
        wbcl__hview vy = wbcl__hview_tokens(Y, 1, d, 0, 1);
        cl_ulong off = vy.off, sb = vy.sb, sn = vy.sn;
        cl_uint uB = (cl_uint)B, uN = (cl_uint)N, ud = (cl_uint)d;
        cl_int r = (cl_int)rho;
        wbcl_kern *ks = NULL;
        size_t bq = 0;
        TRY(gpu_kernel(ctx, d, "wbcl_energy_e1_rows_g", &k, &bq));
        if (k) TRY(gpu_kernel(ctx, d, "wbcl_energy_e1_sum_g", &ks, &bq));
        if (k && ks) { /* GPU-shaped: both kernels or neither */
            TRY(e1_gpu(ctx, k, ks, Y->mem, off, sb, sn, uB, uN, ud, r, c, rows, E->mem, bq));
            goto done;
        }
        TRY(wbcl__kernel(ctx, FAMILY, NULL, "wbcl_energy_e1_rows", &k));
        WBCL_ARG(ctx, k, 0, Y->mem);
        WBCL_ARG(ctx, k, 1, off);
        WBCL_ARG(ctx, k, 2, sb);
        WBCL_ARG(ctx, k, 3, sn);
        WBCL_ARG(ctx, k, 4, uB);
        WBCL_ARG(ctx, k, 5, uN);
        WBCL_ARG(ctx, k, 6, ud);
        WBCL_ARG(ctx, k, 7, r);
        WBCL_ARG(ctx, k, 8, c);
        WBCL_ARG(ctx, k, 9, rows);
        TRY(wbcl__launch_items(ctx, k, B * N));
        TRY(wbcl__kernel(ctx, FAMILY, NULL, "wbcl_energy_e1_sum", &k));
        WBCL_ARG(ctx, k, 0, rows);
        WBCL_ARG(ctx, k, 1, uB);
        WBCL_ARG(ctx, k, 2, uN);
        WBCL_ARG(ctx, k, 3, E->mem);
        TRY(wbcl__launch_items(ctx, k, B));
    }
done:
    wbcl_tensor_destroy(Yw);
    wbcl__tmp_release(&rows);
    return st;
}

/* ---- the layer ----------------------------------------------------------------------------- */

wbcl_energy_params wbcl_energy_params_default(void)
{
    wbcl_energy_params p;
    p.rho = WBCL_RHO_EXP;
    p.c = 1.0f;
    p.alpha = 1.0f;
    p.alpha2 = 0.5f;
    p.relu = 0;
    p.steps = 1;
    return p;
}

struct wbcl_energy_layer {
    wbcl_context *ctx;
    size_t d;
    wbcl_tensor *Wa, *Wf;
    wbcl_tensor *buf[2]; /* work buffers */
};

void wbcl_energy_layer_destroy(wbcl_energy_layer *L)
{
    if (!L) return;
    wbcl_tensor_destroy(L->Wa);
    wbcl_tensor_destroy(L->Wf);
    wbcl_tensor_destroy(L->buf[0]);
    wbcl_tensor_destroy(L->buf[1]);
    free(L);
}

int wbcl_energy_layer_has_ffn(const wbcl_energy_layer *L) { return L && L->Wf != NULL; }

wbcl_status wbcl_energy_layer_create(wbcl_context *ctx, size_t d, const float *Wa, const float *Wf,
                                     wbcl_energy_layer **out)
{
    static const char *op = "wbcl_energy_layer_create";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'out' is NULL", op);
    *out = NULL;
    if (d == 0) return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: dimension d must be >= 1", op);
    if (!Wa) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: Wa must not be NULL", op);
    wbcl_energy_layer *L = calloc(1, sizeof *L);
    if (!L) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    L->ctx = ctx;
    L->d = d;
    size_t dd[2] = {d, d};
    wbcl_status st = wbcl__from_host(ctx, Wa, 2, dd, op, "Wa", &L->Wa);
    if (!st) st = wbcl__from_host(ctx, Wf, 2, dd, op, "Wf", &L->Wf);
    if (st) {
        wbcl_energy_layer_destroy(L);
        return st;
    }
    *out = L;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_energy_layer_load(wbcl_context *ctx, const wbcl_safetensors *stf, const char *file,
                                   const char *prefix, size_t d, wbcl_energy_layer **out)
{
    static const char *op = "wbcl_energy_layer_load";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'out' is NULL", op);
    *out = NULL;
    if (d == 0) return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: dimension d must be >= 1", op);
    if (!stf) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'st' (the safetensors file) is NULL", op);
    wbcl_energy_layer *L = calloc(1, sizeof *L);
    if (!L) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    L->ctx = ctx;
    L->d = d;
    size_t dd[2] = {d, d};
    wbcl_status st = wbcl_weight_load(ctx, stf, file, prefix, "W_a", 2, dd, 1, &L->Wa);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "W_f", 2, dd, 0, &L->Wf);
    if (st) {
        wbcl_energy_layer_destroy(L);
        return st;
    }
    *out = L;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_energy_layer_forward(wbcl_context *ctx, wbcl_energy_layer *L, const wbcl_energy_params *P,
                                      const wbcl_tensor *x, wbcl_tensor *out)
{
    static const char *op = "wbcl_energy_layer_forward";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!L || !P) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'layer' or 'params' is NULL", op);
    if (L->ctx != ctx) return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: the layer belongs to another context", op);
    wbcl_status st = check_rho(ctx, op, P->rho, P->c);
    if (!st) st = check_alpha(ctx, op, P->alpha);
    if (st) return st;
    if (!isfinite(P->alpha2))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: alpha2 must be finite (got %g)", op, (double)P->alpha2);
    if (P->steps < 1) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: steps must be >= 1 (got %d)", op, P->steps);
    size_t B, N, D;
    if ((st = wbcl__check_tokens(ctx, x, op, "x", &B, &N, &D))) return st;
    if (D != L->d) {
        char s[128];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'x' has shape %s but the layer's dimension is d = %zu", op,
                          wbcl__shape_str(s, sizeof s, x->ndim, x->shape), L->d);
    }
    if ((st = wbcl__check_tensor(ctx, out, op, "out")) || (st = wbcl__check_same_shape(ctx, x, out, op, "x", "out")) ||
        (st = wbcl__check_distinct(ctx, op, out, "out", x, "x")))
        return st;
    if ((st = wbcl__work(ctx, &L->buf[0], x, L->d)) || (st = wbcl__work(ctx, &L->buf[1], x, L->d))) return st;
    const wbcl_tensor *src = x;
    int nb = 0;
    for (int s = 0; s < P->steps; s++) {
        wbcl_tensor *dst = L->buf[nb];
        nb ^= 1;
        if ((st = wbcl_energy_step(ctx, src, L->Wa, P->rho, P->c, P->alpha, dst))) return st;
        src = dst;
        if (!L->Wf && P->relu && (st = wbcl_relu(ctx, dst, dst))) return st;
        if (L->Wf) {
            dst = L->buf[nb];
            nb ^= 1;
            if ((st = wbcl_energy_ffn(ctx, src, L->Wf, P->alpha2, P->relu, dst))) return st;
            src = dst;
        }
    }
    return wbcl_tensor_copy(ctx, src, out);
}
