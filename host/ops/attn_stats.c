/* TSSA-family kernel selection and the token statistics shared by the TSSA and XCA ops
 * (host/ops/attn_stats.h). */
#include "attn_stats.h"

#include <stdio.h>
#include <stdlib.h>

#include "launch.h"

/* local memory of wbcl_tssa_g_member (the larger of the two reductions) for lx lanes */
static size_t glx_local_bytes(size_t p, size_t K, size_t lx)
{
    size_t tt = 256 / lx;
    return 4 * (tt * K * (p + 1) + K * (p + 1) + 2 * tt * K);
}

static int glx_ok(const wbcl_context *ctx, size_t p, size_t K, size_t lx)
{
    if (lx < K || (K * p + lx - 1) / lx > 8) return 0; /* <= 8 accumulators per work-item: registers */
    if (ctx->info.max_work_group_size < 256) return 0;
    return glx_local_bytes(p, K, lx) <= ctx->info.local_mem_size;
}

size_t wbcl__tssa_glx(const wbcl_context *ctx, size_t p, size_t K)
{
    if (ctx->variant != WBCL_VARIANT_GPU || p > WBCL_TSSA_P_MAX || K > WBCL_TSSA_K_MAX) return 0;
    const char *env = getenv("WBCL_TSSA_GLX");
    if (env) {
        size_t lx = (size_t)strtoul(env, NULL, 10);
        if ((lx == 32 || lx == 64 || lx == 128 || lx == 256) && glx_ok(ctx, p, K, lx)) return lx;
    }
    for (size_t lx = 32; lx <= 256; lx *= 2)
        if (glx_ok(ctx, p, K, lx)) return lx;
    return 0;
}

wbcl_status wbcl__tssa_kernel(wbcl_context *ctx, size_t p, size_t K, int aligned, const char *name, wbcl_kern **out)
{
    char opt[160] = "";
    size_t n = 0, glx = wbcl__tssa_glx(ctx, p, K);
    if (p <= WBCL_TSSA_P_MAX) n += (size_t)snprintf(opt + n, sizeof opt - n, "-DWBCL_TSSA_P=%zu ", p);
    if (K <= WBCL_TSSA_K_MAX) n += (size_t)snprintf(opt + n, sizeof opt - n, "-DWBCL_TSSA_K=%zu ", K);
    if (aligned) n += (size_t)snprintf(opt + n, sizeof opt - n, "-DWBCL_TSSA_ALIGNED=1 ");
    if (glx) n += (size_t)snprintf(opt + n, sizeof opt - n, "-DWBCL_TSSA_GLX=%zu ", glx);
    if (n) opt[n - 1] = '\0';
    return wbcl__kernel(ctx, "tssa", n ? opt : NULL, name, out);
}

wbcl_status wbcl__rowsq(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hdims *dm, int aligned, size_t rb,
                        size_t nblk, cl_mem part)
{
    wbcl_kern *k;
    wbcl_status st = wbcl__tssa_kernel(ctx, dm->p, dm->K, aligned, "wbcl_tssa_rowsq", &k);
    if (st) return st;
    cl_uint B = (cl_uint)dm->B, N = (cl_uint)dm->N, K = (cl_uint)dm->K, p = (cl_uint)dm->p, r = (cl_uint)rb,
            nb = (cl_uint)nblk;
    if ((st = wbcl__set_view(ctx, k, 0, w))) return st;
    WBCL_ARG(ctx, k, 5, B);
    WBCL_ARG(ctx, k, 6, N);
    WBCL_ARG(ctx, k, 7, K);
    WBCL_ARG(ctx, k, 8, p);
    WBCL_ARG(ctx, k, 9, r);
    WBCL_ARG(ctx, k, 10, nb);
    WBCL_ARG(ctx, k, 11, part);
    return wbcl__launch_items(ctx, k, dm->B * nblk);
}

wbcl_status wbcl__inv_norms(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hdims *dm, int aligned, cl_mem part,
                            cl_mem inv)
{
    size_t rb, nblk;
    wbcl__row_blocks(dm->N, &rb, &nblk);
    wbcl_status st = wbcl__rowsq(ctx, w, dm, aligned, rb, nblk, part);
    if (st) return st;
    wbcl_kern *k;
    if ((st = wbcl__tssa_kernel(ctx, dm->p, dm->K, aligned, "wbcl_tssa_norm_finish", &k))) return st;
    cl_uint uB = (cl_uint)dm->B, unb = (cl_uint)nblk, uKP = (cl_uint)(dm->K * dm->p);
    WBCL_ARG(ctx, k, 0, part);
    WBCL_ARG(ctx, k, 1, uB);
    WBCL_ARG(ctx, k, 2, unb);
    WBCL_ARG(ctx, k, 3, uKP);
    WBCL_ARG(ctx, k, 4, inv);
    return wbcl__launch_items(ctx, k, dm->B * dm->K * dm->p);
}
