/* Status names, error recording and argument checks. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *wbcl_status_name(wbcl_status s)
{
    switch (s) {
    case WBCL_SUCCESS: return "WBCL_SUCCESS";
    case WBCL_ERROR_INVALID_ARGUMENT: return "WBCL_ERROR_INVALID_ARGUMENT";
    case WBCL_ERROR_SHAPE: return "WBCL_ERROR_SHAPE";
    case WBCL_ERROR_DTYPE: return "WBCL_ERROR_DTYPE";
    case WBCL_ERROR_NO_DEVICE: return "WBCL_ERROR_NO_DEVICE";
    case WBCL_ERROR_DEVICE_LIMIT: return "WBCL_ERROR_DEVICE_LIMIT";
    case WBCL_ERROR_OUT_OF_MEMORY: return "WBCL_ERROR_OUT_OF_MEMORY";
    case WBCL_ERROR_OPENCL: return "WBCL_ERROR_OPENCL";
    case WBCL_ERROR_BUILD: return "WBCL_ERROR_BUILD";
    case WBCL_ERROR_IO: return "WBCL_ERROR_IO";
    case WBCL_ERROR_FORMAT: return "WBCL_ERROR_FORMAT";
    case WBCL_ERROR_UNSUPPORTED: return "WBCL_ERROR_UNSUPPORTED";
    case WBCL_ERROR_NUMERIC: return "WBCL_ERROR_NUMERIC";
    case WBCL_ERROR_CONTEXT_MISMATCH: return "WBCL_ERROR_CONTEXT_MISMATCH";
    case WBCL_ERROR_PEER: return "WBCL_ERROR_PEER";
    }
    return "WBCL_ERROR_UNKNOWN";
}

const char *wbcl__cl_error_name(cl_int e)
{
    switch (e) {
#define N(x) case x: return #x;
    N(CL_SUCCESS) N(CL_DEVICE_NOT_FOUND) N(CL_DEVICE_NOT_AVAILABLE) N(CL_COMPILER_NOT_AVAILABLE)
    N(CL_MEM_OBJECT_ALLOCATION_FAILURE) N(CL_OUT_OF_RESOURCES) N(CL_OUT_OF_HOST_MEMORY)
    N(CL_PROFILING_INFO_NOT_AVAILABLE) N(CL_MEM_COPY_OVERLAP) N(CL_IMAGE_FORMAT_MISMATCH)
    N(CL_IMAGE_FORMAT_NOT_SUPPORTED) N(CL_BUILD_PROGRAM_FAILURE) N(CL_MAP_FAILURE)
    N(CL_MISALIGNED_SUB_BUFFER_OFFSET) N(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    N(CL_COMPILE_PROGRAM_FAILURE) N(CL_LINKER_NOT_AVAILABLE) N(CL_LINK_PROGRAM_FAILURE)
    N(CL_DEVICE_PARTITION_FAILED) N(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    N(CL_INVALID_VALUE) N(CL_INVALID_DEVICE_TYPE) N(CL_INVALID_PLATFORM) N(CL_INVALID_DEVICE)
    N(CL_INVALID_CONTEXT) N(CL_INVALID_QUEUE_PROPERTIES) N(CL_INVALID_COMMAND_QUEUE)
    N(CL_INVALID_HOST_PTR) N(CL_INVALID_MEM_OBJECT) N(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    N(CL_INVALID_IMAGE_SIZE) N(CL_INVALID_SAMPLER) N(CL_INVALID_BINARY) N(CL_INVALID_BUILD_OPTIONS)
    N(CL_INVALID_PROGRAM) N(CL_INVALID_PROGRAM_EXECUTABLE) N(CL_INVALID_KERNEL_NAME)
    N(CL_INVALID_KERNEL_DEFINITION) N(CL_INVALID_KERNEL) N(CL_INVALID_ARG_INDEX)
    N(CL_INVALID_ARG_VALUE) N(CL_INVALID_ARG_SIZE) N(CL_INVALID_KERNEL_ARGS)
    N(CL_INVALID_WORK_DIMENSION) N(CL_INVALID_WORK_GROUP_SIZE) N(CL_INVALID_WORK_ITEM_SIZE)
    N(CL_INVALID_GLOBAL_OFFSET) N(CL_INVALID_EVENT_WAIT_LIST) N(CL_INVALID_EVENT)
    N(CL_INVALID_OPERATION) N(CL_INVALID_GL_OBJECT) N(CL_INVALID_BUFFER_SIZE)
    N(CL_INVALID_MIP_LEVEL) N(CL_INVALID_GLOBAL_WORK_SIZE) N(CL_INVALID_PROPERTY)
    N(CL_INVALID_IMAGE_DESCRIPTOR) N(CL_INVALID_COMPILER_OPTIONS) N(CL_INVALID_LINKER_OPTIONS)
    N(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef N
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "CL_UNKNOWN_ERROR";
    }
}

static void set_message(wbcl_context *ctx, const char *fmt, va_list ap)
{
    if (!ctx) return;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) n = 0;
    size_t need = (size_t)n + 1;
    if (need > ctx->last_error_cap) {
        char *p = realloc(ctx->last_error, need);
        if (!p) { /* keep the old buffer; truncate */
            if (ctx->last_error_cap) vsnprintf(ctx->last_error, ctx->last_error_cap, fmt, ap);
            return;
        }
        ctx->last_error = p;
        ctx->last_error_cap = need;
    }
    vsnprintf(ctx->last_error, ctx->last_error_cap, fmt, ap);
}

wbcl_status wbcl__fail(wbcl_context *ctx, wbcl_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(ctx, fmt, ap);
    va_end(ap);
    return status;
}

wbcl_status wbcl__cl_fail(wbcl_context *ctx, cl_int err, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    wbcl_status st = WBCL_ERROR_OPENCL;
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_INVALID_BUFFER_SIZE || err == CL_OUT_OF_RESOURCES)
        st = WBCL_ERROR_DEVICE_LIMIT;
    if (err == CL_OUT_OF_HOST_MEMORY) st = WBCL_ERROR_OUT_OF_MEMORY;
    return wbcl__fail(ctx, st, "%s: %s (%d)", what, wbcl__cl_error_name(err), (int)err);
}

void wbcl__msg(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

const char *wbcl__shape_str(char *buf, size_t len, int ndim, const size_t *shape)
{
    size_t used = 0;
    if (!len) return buf;
    buf[0] = 0;
    used += (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, i ? ", %zu" : "%zu", shape[i]);
    if (used < len) snprintf(buf + used, len - used, ")");
    return buf;
}

size_t wbcl__dtype_size(wbcl_dtype d) { return d == WBCL_F32 ? 4 : d == WBCL_F16 ? 2 : 0; }

const char *wbcl__dtype_name(wbcl_dtype d) { return d == WBCL_F32 ? "float32" : d == WBCL_F16 ? "float16" : "invalid"; }

wbcl_status wbcl__check_tensor_any(wbcl_context *ctx, const wbcl_tensor *t, const char *op, const char *what)
{
    if (!t) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: tensor '%s' is NULL", op, what);
    if (t->ctx != ctx)
        return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: tensor '%s' belongs to another context", op, what);
    return WBCL_SUCCESS;
}

wbcl_status wbcl__check_tensor(wbcl_context *ctx, const wbcl_tensor *t, const char *op, const char *what)
{
    wbcl_status st = wbcl__check_tensor_any(ctx, t, op, what);
    if (st) return st;
    if (t->dtype != WBCL_F32)
        return wbcl__fail(ctx, WBCL_ERROR_DTYPE, "%s: tensor '%s' is %s; this operation supports float32 only", op,
                          what, wbcl__dtype_name(t->dtype));
    return WBCL_SUCCESS;
}

wbcl_status wbcl__check_same_shape(wbcl_context *ctx, const wbcl_tensor *a, const wbcl_tensor *b,
                                   const char *op, const char *an, const char *bn)
{
    int same = a->ndim == b->ndim;
    for (int i = 0; same && i < a->ndim; i++) same = a->shape[i] == b->shape[i];
    if (same) return WBCL_SUCCESS;
    char sa[96], sb[96];
    return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' has shape %s but '%s' has shape %s", op, an,
                      wbcl__shape_str(sa, sizeof sa, a->ndim, a->shape), bn,
                      wbcl__shape_str(sb, sizeof sb, b->ndim, b->shape));
}

int wbcl__mul_ok(size_t a, size_t b, size_t *out)
{
    if (a && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}
