/* Host arrays and safetensors weights to device tensors. */
#include "model_internal.h"
#include "wbcl/weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

wbcl_status wbcl_tensor_from_array(wbcl_context *ctx, const wbcl_array *a, const char *what, wbcl_tensor **out)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!a || !out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_tensor_from_array: NULL argument");
    *out = NULL;
    if (!what) what = "array";
    if (a->ndim < 1 || a->ndim > WBCL_MAX_DIMS) {
        char s[160];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: shape %s has %d dimensions; tensors have 1 to %d", what,
                          wbcl__shape_str(s, sizeof s, a->ndim, a->shape), a->ndim, WBCL_MAX_DIMS);
    }
    char err[512];
    float *f = NULL;
    wbcl_status st = wbcl_array_to_f32(a, &f, err, sizeof err);
    if (st) return wbcl__fail(ctx, st, "%s: %s", what, err);
    st = wbcl_tensor_create(ctx, a->ndim, a->shape, WBCL_F32, f, out);
    free(f);
    if (st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", wbcl_context_last_error(ctx));
        return wbcl__fail(ctx, st, "%s: %s", what, msg);
    }
    return WBCL_SUCCESS;
}

wbcl_status wbcl_weight_load(wbcl_context *ctx, const wbcl_safetensors *stf, const char *file, const char *prefix,
                             const char *name, int ndim, const size_t *shape, int required, wbcl_tensor **out)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!stf || !name || !out || (ndim > 0 && !shape))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_weight_load: NULL argument");
    *out = NULL;
    if (!file) file = "weights";
    char key[512];
    snprintf(key, sizeof key, "%s%s", prefix ? prefix : "", name);
    if (!wbcl_safetensors_has(stf, key)) {
        if (!required) return WBCL_SUCCESS;
        return wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: missing tensor '%s'", file, key);
    }
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
    if (st) {
        wbcl_array_free(&a);
        return wbcl__fail(ctx, st, "%s: '%s': %s", file, key, err);
    }
    size_t n = wbcl_array_numel(&a);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(f[i])) {
            st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: '%s' has a non-finite value (%g) at flat index %zu", file,
                            key, (double)f[i], i);
            free(f);
            wbcl_array_free(&a);
            return st;
        }
    if (ndim == 0) { /* a scalar becomes a (1) tensor */
        size_t one = 1;
        st = wbcl_tensor_create(ctx, 1, &one, WBCL_F32, f, out);
    } else {
        st = wbcl_tensor_create(ctx, ndim, a.shape, WBCL_F32, f, out);
    }
    free(f);
    wbcl_array_free(&a);
    return st;
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
