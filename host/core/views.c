/* Strided views of per-head tensors (host/core/views.h). */
#include "views.h"

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

int wbcl__hview_aligned(const wbcl__hview *v, size_t p)
{
    return p % 8 == 0 && v->off % 8 == 0 && v->sb % 8 == 0 && v->sh % 8 == 0 && v->sn % 8 == 0;
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
