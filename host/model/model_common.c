/* Helpers shared by the CRATE and ToST models (host/model/model_internal.h). */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


wbcl_status wbcl__model_kernel(wbcl_context *ctx, const char *name, wbcl_kern **k)
{
    return wbcl__kernel(ctx, "models", NULL, name, k);
}

wbcl_status wbcl__model_launch(wbcl_context *ctx, wbcl_kern *k, size_t g0, size_t g1, size_t g2)
{
    /* Work-groups of up to 256 items, the contiguous dimension first: PoCL's own choice for 2-D
     * ranges was one row per group (e.g. 24 items), whose per-group overhead made a bias + GELU
     * over 12544 x 24 elements take 36 ms instead of well under 1 ms. */
    size_t cap = ctx->info.max_work_group_size ? ctx->info.max_work_group_size : 256;
    if (cap > 256) cap = 256;
    size_t l0 = g0 < 64 ? g0 : 64;
    if (l0 > cap) l0 = cap;
    if (!l0) l0 = 1;
    size_t l1 = cap / l0;
    if (l1 > g1) l1 = g1;
    if (!l1) l1 = 1;
    size_t global[3] = {g0, g1, g2}, local[3] = {l0, l1, 1};
    return wbcl__launch(ctx, k, g2 > 1 ? 3 : 2, global, local);
}

wbcl_status wbcl__model_check32(wbcl_context *ctx, const char *op, size_t a, size_t b, size_t c)
{
    const size_t lim = (size_t)UINT32_MAX;
    if (a > lim || b > lim || c > lim || (b && a > lim / b))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: extents (%zu, %zu, %zu) exceed the 32-bit index range", op,
                          a, b, c);
    return WBCL_SUCCESS;
}

wbcl_status wbcl__model_linear(wbcl_context *ctx, const wbcl_tensor *X, size_t rows, size_t k, const wbcl_tensor *W,
                               size_t n, const wbcl_tensor *bias, int act, wbcl_tensor *Y)
{
    /* bias and GELU in the GEMM's epilogue, X read in place (host/ops/gemm.c) */
    return wbcl__gemm_linear(ctx, X, rows, k, W, n, bias, act == 1, Y);
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

wbcl_status wbcl__model_ensure(wbcl_context *ctx, wbcl_tensor **t, int ndim, const size_t *shape)
{
    if (*t && (*t)->ndim == ndim) {
        int same = 1;
        for (int i = 0; i < ndim; i++) same &= (*t)->shape[i] == shape[i];
        if (same) return WBCL_SUCCESS;
    }
    wbcl_tensor_destroy(*t);
    *t = NULL;
    return wbcl_tensor_create(ctx, ndim, shape, WBCL_F32, NULL, t);
}

wbcl_status wbcl__model_ensure_cap(wbcl_context *ctx, wbcl_tensor **t, size_t n)
{
    if (*t && (*t)->numel >= n) return WBCL_SUCCESS;
    wbcl_tensor_destroy(*t);
    *t = NULL;
    return wbcl_tensor_create(ctx, 1, &n, WBCL_F32, NULL, t);
}

wbcl_status wbcl__model_host_weight(wbcl_context *ctx, const wbcl_safetensors *stf, const char *file,
                                    const char *prefix, const char *name, int ndim, const size_t *shape,
                                    float **out)
{
    *out = NULL;
    if (!file) file = "weights";
    char key[512];
    snprintf(key, sizeof key, "%s%s", prefix ? prefix : "", name);
    if (!wbcl_safetensors_has(stf, key)) return wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: missing tensor '%s'", file, key);
    wbcl_array a;
    char err[512];
    wbcl_status st = wbcl_safetensors_get(stf, key, &a, err, sizeof err);
    if (st) return wbcl__fail(ctx, st, "%s", err);
    int same = a.ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = a.shape[i] == shape[i];
    if (!same) {
        char sa[160], se[160];
        st = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' has shape %s, expected %s", file, key,
                        wbcl__shape_str(sa, sizeof sa, a.ndim, a.shape), wbcl__shape_str(se, sizeof se, ndim, shape));
        wbcl_array_free(&a);
        return st;
    }
    float *f = NULL;
    st = wbcl_array_to_f32(&a, &f, err, sizeof err);
    size_t n = wbcl_array_numel(&a);
    wbcl_array_free(&a);
    if (st) return wbcl__fail(ctx, st, "%s: '%s': %s", file, key, err);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(f[i])) {
            st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: '%s' has a non-finite value (%g) at flat index %zu", file,
                            key, (double)f[i], i);
            free(f);
            return st;
        }
    *out = f;
    return WBCL_SUCCESS;
}

wbcl_status wbcl__model_check_out(wbcl_context *ctx, const char *op, const wbcl_tensor *out, int ndim,
                                  const size_t *shape)
{
    wbcl_status st = wbcl__check_tensor(ctx, out, op, "out");
    if (st) return st;
    int same = out->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = out->shape[i] == shape[i];
    if (!same) {
        char sa[160], se[160];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'out' has shape %s, expected %s", op,
                          wbcl__shape_str(sa, sizeof sa, out->ndim, out->shape),
                          wbcl__shape_str(se, sizeof se, ndim, shape));
    }
    return WBCL_SUCCESS;
}

wbcl_status wbcl__model_key_shape(wbcl_context *ctx, const wbcl_safetensors *stf, const char *file, const char *key,
                                  int ndim, size_t *shape)
{
    if (!file) file = "weights";
    if (!wbcl_safetensors_has(stf, key)) return wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: missing tensor '%s'", file, key);
    wbcl_array a;
    char err[512];
    wbcl_status st = wbcl_safetensors_get(stf, key, &a, err, sizeof err);
    if (st) return wbcl__fail(ctx, st, "%s", err);
    if (a.ndim != ndim) {
        char sa[160];
        st = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' has shape %s, expected %d dimensions", file, key,
                        wbcl__shape_str(sa, sizeof sa, a.ndim, a.shape), ndim);
    } else {
        for (int i = 0; i < ndim; i++) shape[i] = a.shape[i];
    }
    wbcl_array_free(&a);
    return st;
}

wbcl_status wbcl__model_size(wbcl_context *ctx, const char *file, const char *field, const char *key, size_t *cfg_value,
                             size_t weights_value)
{
    if (!file) file = "weights";
    if (!*cfg_value) {
        *cfg_value = weights_value;
        return WBCL_SUCCESS;
    }
    if (*cfg_value == weights_value) return WBCL_SUCCESS;
    return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: config %s = %zu contradicts the weights: '%s' gives %s = %zu", file,
                      field, *cfg_value, key, field, weights_value);
}

size_t wbcl__model_count(const wbcl_safetensors *stf, const char *prefix, const char *suffix)
{
    char key[512];
    size_t n = 0;
    for (;; n++) {
        snprintf(key, sizeof key, "%s%zu%s", prefix, n, suffix);
        if (!wbcl_safetensors_has(stf, key)) return n;
    }
}

wbcl_status wbcl__model_cls_dim(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, size_t *dim)
{
    size_t shp[3];
    wbcl_status r = wbcl__model_key_shape(ctx, st, file, "cls_token", 3, shp);
    if (!r && (shp[0] != 1 || shp[1] != 1 || !shp[2])) {
        char s[96];
        r = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'cls_token' has shape %s, expected (1, 1, d)", file,
                       wbcl__shape_str(s, sizeof s, 3, shp));
    }
    return r ? r : wbcl__model_size(ctx, file, "dim", "cls_token", dim, shp[2]);
}

wbcl_status wbcl__model_depth(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *prefix,
                              const char *suffix, size_t *depth)
{
    char key[512];
    const size_t L = wbcl__model_count(st, prefix, suffix);
    snprintf(key, sizeof key, "%s%zu%s", prefix, L ? L - 1 : 0, suffix);
    if (!L) return wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: missing tensor '%s'", file, key);
    return wbcl__model_size(ctx, file, "depth", key, depth, L);
}
