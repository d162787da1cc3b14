/* Raw device buffers in op implementations (host/core/buffers.h). */
#include "buffers.h"

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

wbcl_status wbcl__fill_int(wbcl_context *ctx, cl_mem mem, int value, size_t count, const char *what)
{
    cl_int e = clEnqueueFillBuffer(ctx->queue, mem, &value, sizeof value, 0, count * sizeof value, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "clearing %s", what);
}

wbcl_status wbcl__read_buf(wbcl_context *ctx, cl_mem mem, size_t off, size_t bytes, void *dst, const char *what)
{
    cl_int e = clEnqueueReadBuffer(ctx->queue, mem, CL_TRUE, off, bytes, dst, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "reading %s", what);
}

wbcl_status wbcl__write_buf(wbcl_context *ctx, cl_mem mem, size_t bytes, const void *src, const char *what)
{
    cl_int e = clEnqueueWriteBuffer(ctx->queue, mem, CL_TRUE, 0, bytes, src, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "writing %s", what);
}

wbcl_status wbcl__copy_buf(wbcl_context *ctx, cl_mem src, cl_mem dst, size_t bytes, const char *what)
{
    cl_int e = clEnqueueCopyBuffer(ctx->queue, src, dst, 0, 0, bytes, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "copying %s", what);
}

wbcl_status wbcl__finish(wbcl_context *ctx, const char *op)
{
    cl_int e = clFinish(ctx->queue);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "%s: clFinish", op);
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
