/* Device tensors: creation with checked sizes, transfers, fill, copy, reshape. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

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
    if (dtype != WBCL_F32)
        return wbcl__fail(ctx, WBCL_ERROR_DTYPE, "wbcl_tensor_create: only WBCL_F32 tensors are supported (got %d)",
                          (int)dtype);
    size_t numel;
    wbcl_status st = check_shape(ctx, "wbcl_tensor_create", ndim, shape, &numel);
    if (st) return st;
    size_t bytes = numel * sizeof(float);
    if (bytes > ctx->info.max_alloc_size) {
        char s[128];
        return wbcl__fail(ctx, WBCL_ERROR_DEVICE_LIMIT,
                          "wbcl_tensor_create: shape %s needs %zu bytes, more than the device's maximum "
                          "allocation of %llu bytes on '%s'",
                          wbcl__shape_str(s, sizeof s, ndim, shape), bytes,
                          (unsigned long long)ctx->info.max_alloc_size, ctx->info.name);
    }
    wbcl_tensor *t = calloc(1, sizeof *t);
    if (!t) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "wbcl_tensor_create: out of host memory");
    cl_int e;
    cl_mem_flags flags = CL_MEM_READ_WRITE | (data ? CL_MEM_COPY_HOST_PTR : 0);
    t->mem = clCreateBuffer(ctx->cl, flags, bytes, data ? (void *)data : NULL, &e);
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
        float zero = 0.0f;
        e = clEnqueueFillBuffer(ctx->queue, t->mem, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
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
    if (t->mem) clReleaseMemObject(t->mem);
    free(t);
}

static wbcl_status transfer_check(wbcl_context *ctx, const wbcl_tensor *t, const void *p, size_t count, const char *op)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor(ctx, t, op, "t");
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
    cl_int e = clEnqueueReadBuffer(ctx->queue, t->mem, CL_TRUE, 0, count * sizeof(float), dst, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "wbcl_tensor_read");
}

wbcl_status wbcl_tensor_write(wbcl_context *ctx, wbcl_tensor *t, const float *src, size_t count)
{
    wbcl_status st = transfer_check(ctx, t, src, count, "wbcl_tensor_write");
    if (st) return st;
    cl_int e = clEnqueueWriteBuffer(ctx->queue, t->mem, CL_TRUE, 0, count * sizeof(float), src, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "wbcl_tensor_write");
}

wbcl_status wbcl_tensor_fill(wbcl_context *ctx, wbcl_tensor *t, float value)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor(ctx, t, "wbcl_tensor_fill", "t");
    if (st) return st;
    cl_int e = clEnqueueFillBuffer(ctx->queue, t->mem, &value, sizeof value, 0, t->numel * sizeof(float), 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "wbcl_tensor_fill");
}

wbcl_status wbcl_tensor_copy(wbcl_context *ctx, const wbcl_tensor *src, wbcl_tensor *dst)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor(ctx, src, "wbcl_tensor_copy", "src");
    if (!st) st = wbcl__check_tensor(ctx, dst, "wbcl_tensor_copy", "dst");
    if (st) return st;
    if (src->numel != dst->numel)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "wbcl_tensor_copy: src has %zu elements, dst %zu", src->numel,
                          dst->numel);
    if (src == dst) return WBCL_SUCCESS;
    cl_int e = clEnqueueCopyBuffer(ctx->queue, src->mem, dst->mem, 0, 0, src->numel * sizeof(float), 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "wbcl_tensor_copy");
}

wbcl_status wbcl_tensor_reshape(wbcl_context *ctx, wbcl_tensor *t, int ndim, const size_t *shape)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor(ctx, t, "wbcl_tensor_reshape", "t");
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
