/* Argument checks of op implementations: shapes, head counts, index range, aliasing (host/core/checks.h). */
#include "checks.h"

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
