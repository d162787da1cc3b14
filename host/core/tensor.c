/* Device tensors: creation with checked sizes, transfers, fill, copy, reshape.
 * float16 tensors are stored as IEEE binary16 (2 bytes per element); the host API stays float:
 * create/write round each value to nearest-even (wbcl_f32_to_f16), read widens exactly, fill
 * rounds the value once, copy between dtypes converts on the device (host/core/convert.c). */
#include "internal.h"
#include "wbcl/io.h"

#include <stdlib.h>
#include <string.h>

/* malloc'd halves of src[0..n), NULL when out of memory */
static uint16_t *to_halves(const float *src, size_t n)
{
    uint16_t *h = malloc(n ? n * sizeof *h : 1);
    if (h)
        for (size_t i = 0; i < n; i++) h[i] = wbcl_f32_to_f16(src[i]);
    return h;
}

static wbcl_status check_shape(wbcl_context *ctx, const char *op, int ndim, const size_t *shape, size_t *numel)
{
    if (ndim < 1 || ndim > WBCL_MAX_DIMS)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: ndim %d is outside 1..%d", op, ndim, WBCL_MAX_DIMS);
    if (!shape) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: shape is NULL", op);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) {
            char s[128];
            return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: dimension %d of shape %s is zero", op, i,
                              wbcl__shape_str(s, sizeof s, ndim, shape));
        }
        if (!wbcl__mul_ok(n, shape[i], &n) || n > SIZE_MAX / sizeof(float)) {
            char s[128];
            return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: shape %s overflows the address space", op,
                              wbcl__shape_str(s, sizeof s, ndim, shape));
        }
    }
    *numel = n;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_tensor_create(wbcl_context *ctx, int ndim, const size_t *shape, wbcl_dtype dtype, const float *data,
                               wbcl_tensor **out)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_tensor_create: output pointer is NULL");
    *out = NULL;
    if (dtype != WBCL_F32 && dtype != WBCL_F16)
        return wbcl__fail(ctx, WBCL_ERROR_DTYPE,
                          "wbcl_tensor_create: dtype %d is neither WBCL_F32 (0) nor WBCL_F16 (1)", (int)dtype);
    size_t numel;
    wbcl_status st = check_shape(ctx, "wbcl_tensor_create", ndim, shape, &numel);
    if (st) return st;
    const size_t es = wbcl__dtype_size(dtype);
    size_t bytes = numel * es; /* check_shape bounds numel by SIZE_MAX / 4 */
    if (bytes > ctx->info.max_alloc_size) {
        char s[128];
        return wbcl__fail(ctx, WBCL_ERROR_DEVICE_LIMIT,
                          "wbcl_tensor_create: shape %s needs %zu bytes, more than the device's maximum "
                          "allocation of %llu bytes on '%s'",
                          wbcl__shape_str(s, sizeof s, ndim, shape), bytes,
                          (unsigned long long)ctx->info.max_alloc_size, ctx->info.name);
    }
    uint16_t *halves = NULL;
    if (data && dtype == WBCL_F16 && !(halves = to_halves(data, numel)))
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "wbcl_tensor_create: out of host memory");
    wbcl_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        free(halves);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "wbcl_tensor_create: out of host memory");
    }
    cl_int e;
    cl_mem_flags flags = CL_MEM_READ_WRITE | (data ? CL_MEM_COPY_HOST_PTR : 0);
    void *init = halves ? (void *)halves : (void *)data;
    t->mem = clCreateBuffer(ctx->cl, flags, bytes, init, &e);
    free(halves);
    if (e != CL_SUCCESS) {
        free(t);
        char s[128];
        return wbcl__cl_fail(ctx, e, "wbcl_tensor_create: allocating %zu bytes for shape %s", bytes,
                             wbcl__shape_str(s, sizeof s, ndim, shape));
    }
    t->ctx = ctx;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof(size_t));
    t->numel = numel;
    t->dtype = dtype;
    if (!data) {
        const uint32_t zero = 0; /* +0 in either dtype; the pattern is one element */
        e = clEnqueueFillBuffer(ctx->queue, t->mem, &zero, es, 0, bytes, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            clReleaseMemObject(t->mem);
            free(t);
            return wbcl__cl_fail(ctx, e, "wbcl_tensor_create: zero-filling");
        }
    }
    *out = t;
    return WBCL_SUCCESS;
}

void wbcl_tensor_destroy(wbcl_tensor *t)
{
    if (!t) return;
    wbcl__tensor_drop_packed(t);
    if (t->mem) clReleaseMemObject(t->mem);
    free(t);
}

static wbcl_status transfer_check(wbcl_context *ctx, const wbcl_tensor *t, const void *p, size_t count, const char *op)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor_any(ctx, t, op, "t");
    if (st) return st;
    if (!p) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: host pointer is NULL", op);
    if (count != t->numel)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: count %zu differs from the tensor's %zu elements", op, count,
                          t->numel);
    return WBCL_SUCCESS;
}

wbcl_status wbcl_tensor_read(wbcl_context *ctx, const wbcl_tensor *t, float *dst, size_t count)
{
    wbcl_status st = transfer_check(ctx, t, dst, count, "wbcl_tensor_read");
    if (st) return st;
    if (t->dtype == WBCL_F16) {
        uint16_t *h = malloc(count * sizeof *h);
        if (!h) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "wbcl_tensor_read: out of host memory");
        cl_int e = clEnqueueReadBuffer(ctx->queue, t->mem, CL_TRUE, 0, count * sizeof *h, h, 0, NULL, NULL);
        if (e == CL_SUCCESS)
            for (size_t i = 0; i < count; i++) dst[i] = wbcl_f16_to_f32(h[i]);
        free(h);
        return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "wbcl_tensor_read");
    }
    cl_int e = clEnqueueReadBuffer(ctx->queue, t->mem, CL_TRUE, 0, count * sizeof(float), dst, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "wbcl_tensor_read");
}

wbcl_status wbcl_tensor_write(wbcl_context *ctx, wbcl_tensor *t, const float *src, size_t count)
{
    wbcl_status st = transfer_check(ctx, t, src, count, "wbcl_tensor_write");
    if (st) return st;
    wbcl__tensor_drop_packed(t);
    if (t->dtype == WBCL_F16) {
        uint16_t *h = to_halves(src, count);
        if (!h) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "wbcl_tensor_write: out of host memory");
        cl_int e = clEnqueueWriteBuffer(ctx->queue, t->mem, CL_TRUE, 0, count * sizeof *h, h, 0, NULL, NULL);
        free(h);
        return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "wbcl_tensor_write");
    }
    cl_int e = clEnqueueWriteBuffer(ctx->queue, t->mem, CL_TRUE, 0, count * sizeof(float), src, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "wbcl_tensor_write");
}

wbcl_status wbcl_tensor_fill(wbcl_context *ctx, wbcl_tensor *t, float value)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor_any(ctx, t, "wbcl_tensor_fill", "t");
    if (st) return st;
    wbcl__tensor_drop_packed(t);
    const uint16_t h = wbcl_f32_to_f16(value);
    const size_t es = wbcl__dtype_size(t->dtype);
    const void *pattern = t->dtype == WBCL_F16 ? (const void *)&h : (const void *)&value;
    cl_int e = clEnqueueFillBuffer(ctx->queue, t->mem, pattern, es, 0, t->numel * es, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "wbcl_tensor_fill");
}

wbcl_status wbcl_tensor_copy(wbcl_context *ctx, const wbcl_tensor *src, wbcl_tensor *dst)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor_any(ctx, src, "wbcl_tensor_copy", "src");
    if (!st) st = wbcl__check_tensor_any(ctx, dst, "wbcl_tensor_copy", "dst");
    if (st) return st;
    if (src->numel != dst->numel)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "wbcl_tensor_copy: src has %zu elements, dst %zu", src->numel,
                          dst->numel);
    if (src == dst || src->mem == dst->mem) return WBCL_SUCCESS;
    wbcl__tensor_drop_packed(dst);
    return wbcl__convert(ctx, "wbcl_tensor_copy", src->mem, src->dtype, 0, dst->mem, dst->dtype, 0, src->numel);
}

wbcl_status wbcl_tensor_reshape(wbcl_context *ctx, wbcl_tensor *t, int ndim, const size_t *shape)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor_any(ctx, t, "wbcl_tensor_reshape", "t");
    if (st) return st;
    size_t numel;
    st = check_shape(ctx, "wbcl_tensor_reshape", ndim, shape, &numel);
    if (st) return st;
    if (numel != t->numel)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "wbcl_tensor_reshape: new shape has %zu elements, the tensor %zu",
                          numel, t->numel);
    t->ndim = ndim;
    memset(t->shape, 0, sizeof t->shape);
    memcpy(t->shape, shape, (size_t)ndim * sizeof(size_t));
    return WBCL_SUCCESS;
}

int wbcl_tensor_ndim(const wbcl_tensor *t) { return t ? t->ndim : 0; }
size_t wbcl_tensor_dim(const wbcl_tensor *t, int i) { return t && i >= 0 && i < t->ndim ? t->shape[i] : 0; }
size_t wbcl_tensor_numel(const wbcl_tensor *t) { return t ? t->numel : 0; }
wbcl_dtype wbcl_tensor_dtype(const wbcl_tensor *t) { return t ? t->dtype : WBCL_F32; }

wbcl_status wbcl__tensor_store_f16(wbcl_context *ctx, wbcl_tensor **t)
{
    if (!*t || (*t)->dtype == WBCL_F16) return WBCL_SUCCESS;
    wbcl_tensor *h = NULL;
    wbcl_status st = wbcl_tensor_create(ctx, (*t)->ndim, (*t)->shape, WBCL_F16, NULL, &h);
    if (!st) st = wbcl_tensor_copy(ctx, *t, h);
    if (st) {
        wbcl_tensor_destroy(h);
        return st;
    }
    h->constant = (*t)->constant;
    wbcl_tensor_destroy(*t);
    *t = h;
    return WBCL_SUCCESS;
}
