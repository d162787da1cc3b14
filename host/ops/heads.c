/* Split and merge attention heads (token layout <-> per-head layout). */
#include "internal.h"
#include "wbcl/heads.h"

/* x: (N, D) or (B, N, D) -> B, N, D */
static wbcl_status token_dims(wbcl_context *ctx, const wbcl_tensor *x, const char *op, const char *what, size_t *B,
                              size_t *N, size_t *D)
{
    if (x->ndim == 2) { *B = 1; *N = x->shape[0]; *D = x->shape[1]; return WBCL_SUCCESS; }
    if (x->ndim == 3) { *B = x->shape[0]; *N = x->shape[1]; *D = x->shape[2]; return WBCL_SUCCESS; }
    char s[128];
    return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' must be (N, D) or (B, N, D), got %s", op, what,
                      wbcl__shape_str(s, sizeof s, x->ndim, x->shape));
}

wbcl_status wbcl_split_heads(wbcl_context *ctx, const wbcl_tensor *x, size_t heads, size_t chunk, size_t chunks,
                             wbcl_tensor *y)
{
    static const char *op = "wbcl_split_heads";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor(ctx, x, op, "x");
    if (!st) st = wbcl__check_tensor(ctx, y, op, "y");
    if (st) return st;
    if (x == y) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: y must not be x", op);
    size_t B = 0, N = 0, D = 0;
    if ((st = token_dims(ctx, x, op, "x", &B, &N, &D))) return st;
    if (heads == 0 || chunks == 0 || chunk >= chunks || D % chunks || (D / chunks) % heads)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: %zu columns do not split into %zu chunk(s) of %zu head(s) (chunk %zu requested)", op, D,
                          chunks, heads, chunk);
    size_t p = D / chunks / heads;
    size_t want[4] = {B, heads, N, p};
    int same = y->ndim == 4;
    for (int i = 0; same && i < 4; i++) same = y->shape[i] == want[i];
    if (!same) {
        char s1[128], s2[128];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: y has shape %s, expected %s", op,
                          wbcl__shape_str(s1, sizeof s1, y->ndim, y->shape), wbcl__shape_str(s2, sizeof s2, 4, want));
    }
    wbcl_kern *k;
    if ((st = wbcl__kernel(ctx, "heads", NULL, "wbcl_split_heads", &k))) return st;
    cl_ulong b = B, n = N, kk = heads, pp = p, rs = D, c0 = chunk * (D / chunks);
    WBCL_ARG(ctx, k, 0, x->mem);
    WBCL_ARG(ctx, k, 1, y->mem);
    WBCL_ARG(ctx, k, 2, b);
    WBCL_ARG(ctx, k, 3, n);
    WBCL_ARG(ctx, k, 4, kk);
    WBCL_ARG(ctx, k, 5, pp);
    WBCL_ARG(ctx, k, 6, rs);
    WBCL_ARG(ctx, k, 7, c0);
    size_t g = y->numel, l = (size_t)ctx->params.wg_size;
    return wbcl__launch(ctx, k, 1, &g, &l);
}

wbcl_status wbcl_merge_heads(wbcl_context *ctx, const wbcl_tensor *y, wbcl_tensor *x)
{
    static const char *op = "wbcl_merge_heads";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor(ctx, y, op, "y");
    if (!st) st = wbcl__check_tensor(ctx, x, op, "x");
    if (st) return st;
    if (x == y) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: x must not be y", op);
    if (y->ndim != 4) {
        char s[128];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: y must be (B, K, N, p), got %s", op,
                          wbcl__shape_str(s, sizeof s, y->ndim, y->shape));
    }
    size_t B = 0, N = 0, D = 0;
    if ((st = token_dims(ctx, x, op, "x", &B, &N, &D))) return st;
    if (B != y->shape[0] || N != y->shape[2] || D != y->shape[1] * y->shape[3]) {
        char s1[128], s2[128];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: x has shape %s, which does not hold y of shape %s", op,
                          wbcl__shape_str(s1, sizeof s1, x->ndim, x->shape),
                          wbcl__shape_str(s2, sizeof s2, y->ndim, y->shape));
    }
    wbcl_kern *k;
    if ((st = wbcl__kernel(ctx, "heads", NULL, "wbcl_merge_heads", &k))) return st;
    cl_ulong b = B, n = N, kk = y->shape[1], pp = y->shape[3];
    WBCL_ARG(ctx, k, 0, y->mem);
    WBCL_ARG(ctx, k, 1, x->mem);
    WBCL_ARG(ctx, k, 2, b);
    WBCL_ARG(ctx, k, 3, n);
    WBCL_ARG(ctx, k, 4, kk);
    WBCL_ARG(ctx, k, 5, pp);
    size_t g = x->numel, l = (size_t)ctx->params.wg_size;
    return wbcl__launch(ctx, k, 1, &g, &l);
}
