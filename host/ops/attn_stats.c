/* Helpers shared by the TSSA, XCA, AoT and energy ops (host/ops/attn_stats.h). */
#include "attn_stats.h"

#include <stdio.h>
#include <string.h>

#include "wbcl/gemm.h"
#include "wbcl/ops.h"
#include "wbcl/weights.h"

wbcl__hview wbcl__hview_heads(const wbcl_tensor *t)
{
    wbcl__hview v;
    size_t K = t->shape[1], N = t->shape[2], p = t->shape[3];
    v.mem = t->mem;
    v.off = 0;
    v.sn = p;
    v.sh = N * p;
    v.sb = K * N * p;
    return v;
}

wbcl__hview wbcl__hview_tokens(const wbcl_tensor *t, size_t K, size_t p, size_t chunk, size_t chunks)
{
    wbcl__hview v;
    size_t D = t->shape[t->ndim - 1], N = t->ndim == 3 ? t->shape[1] : t->shape[0];
    v.mem = t->mem;
    v.off = chunk * K * p;
    v.sn = D;
    v.sh = p;
    v.sb = N * D;
    (void)chunks;
    return v;
}

wbcl_status wbcl__check_heads(wbcl_context *ctx, const wbcl_tensor *t, const char *op, const char *what,
                              wbcl__hdims *dims)
{
    wbcl_status st = wbcl__check_tensor(ctx, t, op, what);
    if (st) return st;
    if (t->ndim != 4) {
        char s[128];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' must be (B, K, N, p), got %s", op, what,
                          wbcl__shape_str(s, sizeof s, t->ndim, t->shape));
    }
    dims->B = t->shape[0];
    dims->K = t->shape[1];
    dims->N = t->shape[2];
    dims->p = t->shape[3];
    return WBCL_SUCCESS;
}

wbcl_status wbcl__check_tokens(wbcl_context *ctx, const wbcl_tensor *t, const char *op, const char *what, size_t *B,
                               size_t *N, size_t *D)
{
    wbcl_status st = wbcl__check_tensor(ctx, t, op, what);
    if (st) return st;
    if (t->ndim == 2) {
        *B = 1;
        *N = t->shape[0];
        *D = t->shape[1];
        return WBCL_SUCCESS;
    }
    if (t->ndim == 3) {
        *B = t->shape[0];
        *N = t->shape[1];
        *D = t->shape[2];
        return WBCL_SUCCESS;
    }
    char s[128];
    return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' must be (N, d) or (B, N, d), got %s", op, what,
                      wbcl__shape_str(s, sizeof s, t->ndim, t->shape));
}

wbcl_status wbcl__check_heads_divide(wbcl_context *ctx, const char *op, size_t D, size_t heads)
{
    if (heads == 0 || D % heads)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %zu heads do not divide the dimension d = %zu", op, heads, D);
    return WBCL_SUCCESS;
}

wbcl_status wbcl__check_numel(wbcl_context *ctx, const wbcl_tensor *t, const char *op, const char *what, size_t n,
                              const char *expect)
{
    wbcl_status st = wbcl__check_tensor(ctx, t, op, what);
    if (st) return st;
    if (t->numel != n) {
        char s[128];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' has shape %s, expected %s (%zu elements)", op, what,
                          wbcl__shape_str(s, sizeof s, t->ndim, t->shape), expect, n);
    }
    return WBCL_SUCCESS;
}

wbcl_status wbcl__check_shape(wbcl_context *ctx, const wbcl_tensor *t, const char *op, const char *what, int ndim,
                              const size_t *want)
{
    wbcl_status st = wbcl__check_tensor(ctx, t, op, what);
    if (st) return st;
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == want[i];
    if (!same) {
        char s1[128], s2[128];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' has shape %s, expected %s", op, what,
                          wbcl__shape_str(s1, sizeof s1, t->ndim, t->shape),
                          wbcl__shape_str(s2, sizeof s2, ndim, want));
    }
    return WBCL_SUCCESS;
}

wbcl_status wbcl__check_u32(wbcl_context *ctx, const char *op, size_t n, const size_t *v)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] > 0xFFFFFFFFu)
            return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: size %zu exceeds the kernels' 32-bit index range", op, v[i]);
    return WBCL_SUCCESS;
}

wbcl_status wbcl__check_distinct(wbcl_context *ctx, const char *op, const wbcl_tensor *a, const char *an,
                                 const wbcl_tensor *b, const char *bn)
{
    if (a && b && a->mem == b->mem)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: '%s' must not be '%s' (no in-place operation)", op,
                          an, bn);
    return WBCL_SUCCESS;
}

size_t wbcl__loop_local(const wbcl_context *ctx, size_t items)
{
    size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
    size_t lw = items >= 256 * cu ? 64 : items >= 16 * cu ? 8 : 1;
    while (lw > 1 && lw > ctx->info.max_work_group_size) lw /= 2;
    return lw;
}

wbcl_status wbcl__launch_items(wbcl_context *ctx, wbcl_kern *k, size_t items)
{
    size_t g[1] = {items}, l[1] = {wbcl__loop_local(ctx, items)};
    return wbcl__launch(ctx, k, 1, g, l);
}

void wbcl__row_blocks(size_t N, size_t *rb, size_t *nblk)
{
    size_t r = (N + 63) / 64;
    if (r < 16) r = 16;
    *rb = r;
    *nblk = (N + r - 1) / r;
    if (*nblk == 0) *nblk = 1;
}

wbcl_status wbcl__tmp(wbcl_context *ctx, size_t floats, const char *what, cl_mem *out)
{
    size_t bytes;
    if (!wbcl__mul_ok(floats, sizeof(float), &bytes))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %zu floats overflow the address space", what, floats);
    return wbcl__buffer(ctx, bytes, what, out);
}

void wbcl__tmp_release(cl_mem *m)
{
    if (*m) clReleaseMemObject(*m);
    *m = NULL;
}

wbcl_status wbcl__zero(wbcl_context *ctx, cl_mem m, size_t floats)
{
    const float zero = 0.0f;
    cl_int e = clEnqueueFillBuffer(ctx->queue, m, &zero, sizeof zero, 0, floats * sizeof(float), 0, NULL, NULL);
    if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "zero-filling a work buffer of %zu floats", floats);
    return WBCL_SUCCESS;
}

wbcl_status wbcl__linear(wbcl_context *ctx, const wbcl_tensor *x, const wbcl_tensor *W, const wbcl_tensor *b,
                         wbcl_tensor *y)
{
    /* one GEMM with the bias in its epilogue (host/ops/gemm.c); the layers pass shapes they
     * have validated, checked again here because a mismatch would read out of bounds */
    wbcl_status st = wbcl__check_tensor(ctx, x, "linear layer", "x");
    if (!st) st = wbcl__check_tensor_any(ctx, W, "linear layer", "W"); /* float16 weights: models.h weight_dtype */
    if (!st) st = wbcl__check_tensor(ctx, y, "linear layer", "y");
    if (st) return st;
    const size_t in = x->shape[x->ndim - 1], out = W->ndim == 2 ? W->shape[0] : 0;
    if (W->ndim != 2 || !out || W->shape[1] != in || y->shape[y->ndim - 1] != out || y->numel / out != x->numel / in)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "linear layer: x (.., %zu), W (%zu, %zu) and y (.., %zu) do not match",
                          in, W->ndim == 2 ? W->shape[0] : 0, W->ndim == 2 ? W->shape[1] : 0,
                          y->shape[y->ndim - 1]);
    return wbcl__gemm_linear(ctx, x, x->numel / in, in, W, out, b, 0, y);
}

wbcl_status wbcl__work(wbcl_context *ctx, wbcl_tensor **t, const wbcl_tensor *x, size_t cols)
{
    size_t shape[WBCL_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = cols;
    if (*t) {
        int same = (*t)->ndim == x->ndim;
        for (int i = 0; same && i < x->ndim; i++) same = (*t)->shape[i] == shape[i];
        if (same) return WBCL_SUCCESS;
        wbcl_tensor_destroy(*t);
        *t = NULL;
    }
    return wbcl_tensor_create(ctx, x->ndim, shape, WBCL_F32, NULL, t);
}

wbcl_status wbcl__load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *prefix,
                       const char *name, int ndim, const size_t *shape, int required, wbcl_tensor **out)
{
    return wbcl_weight_load(ctx, st, file, prefix, name, ndim, shape, required, out);
}

wbcl_status wbcl__from_host(wbcl_context *ctx, const float *data, int ndim, const size_t *shape, const char *op,
                            const char *what, wbcl_tensor **out)
{
    *out = NULL;
    if (!data) return WBCL_SUCCESS;
    wbcl_status st = wbcl_tensor_create(ctx, ndim, shape, WBCL_F32, data, out);
    if (st) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", wbcl_context_last_error(ctx));
        return wbcl__fail(ctx, st, "%s: '%s': %s", op, what, msg);
    }
    return WBCL_SUCCESS;
}

int wbcl__hview_aligned(const wbcl__hview *v, size_t p)
{
    return p % 8 == 0 && v->off % 8 == 0 && v->sb % 8 == 0 && v->sh % 8 == 0 && v->sn % 8 == 0;
}

wbcl_status wbcl__tssa_kernel(wbcl_context *ctx, size_t p, size_t K, int aligned, const char *name, wbcl_kern **out)
{
    char opt[128] = "";
    size_t n = 0;
    if (p <= WBCL_TSSA_P_MAX) n += (size_t)snprintf(opt + n, sizeof opt - n, "-DWBCL_TSSA_P=%zu ", p);
    if (K <= WBCL_TSSA_K_MAX) n += (size_t)snprintf(opt + n, sizeof opt - n, "-DWBCL_TSSA_K=%zu ", K);
    if (aligned) n += (size_t)snprintf(opt + n, sizeof opt - n, "-DWBCL_TSSA_ALIGNED=1 ");
    if (n) opt[n - 1] = '\0';
    return wbcl__kernel(ctx, "tssa", n ? opt : NULL, name, out);
}

wbcl_status wbcl__set_view(wbcl_context *ctx, wbcl_kern *k, cl_uint i, const wbcl__hview *v)
{
    cl_ulong off = v->off, sb = v->sb, sh = v->sh, sn = v->sn;
    WBCL_ARG(ctx, k, i, v->mem);
    WBCL_ARG(ctx, k, i + 1, off);
    WBCL_ARG(ctx, k, i + 2, sb);
    WBCL_ARG(ctx, k, i + 3, sh);
    WBCL_ARG(ctx, k, i + 4, sn);
    return WBCL_SUCCESS;
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
