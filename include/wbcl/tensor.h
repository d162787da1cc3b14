/* wbcl — device tensors: up to 4-D, row-major (C order), float32 elements.
 * (The dtype field leaves room for float16 storage; only WBCL_F32 is accepted now.) */
#ifndef WBCL_TENSOR_H
#define WBCL_TENSOR_H

#include <stddef.h>
#include "wbcl/status.h"
#include "wbcl/context.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WBCL_MAX_DIMS 4

typedef enum wbcl_dtype { WBCL_F32 = 0, WBCL_F16 = 1 } wbcl_dtype;

typedef struct wbcl_tensor wbcl_tensor;

/* Creates a tensor of `ndim` (1..4) dimensions, each >= 1. If `data` is not
 * NULL it holds numel floats copied to the device; otherwise contents are
 * zero. Sizes are overflow-checked and checked against the device's max
 * allocation (WBCL_ERROR_DEVICE_LIMIT). */
wbcl_status wbcl_tensor_create(wbcl_context *ctx, int ndim, const size_t *shape, wbcl_dtype dtype,
                               const float *data, wbcl_tensor **out);
void wbcl_tensor_destroy(wbcl_tensor *t); /* NULL is a no-op */

/* Copies the whole tensor to/from host memory; `count` must equal numel. */
wbcl_status wbcl_tensor_read(wbcl_context *ctx, const wbcl_tensor *t, float *dst, size_t count);
wbcl_status wbcl_tensor_write(wbcl_context *ctx, wbcl_tensor *t, const float *src, size_t count);
wbcl_status wbcl_tensor_fill(wbcl_context *ctx, wbcl_tensor *t, float value);
/* dst <- src; both must have the same number of elements. */
wbcl_status wbcl_tensor_copy(wbcl_context *ctx, const wbcl_tensor *src, wbcl_tensor *dst);
/* Changes the shape in place, keeping numel (a view of the same memory). */
wbcl_status wbcl_tensor_reshape(wbcl_context *ctx, wbcl_tensor *t, int ndim, const size_t *shape);

int wbcl_tensor_ndim(const wbcl_tensor *t);
size_t wbcl_tensor_dim(const wbcl_tensor *t, int i); /* 0 if i is out of range */
size_t wbcl_tensor_numel(const wbcl_tensor *t);
wbcl_dtype wbcl_tensor_dtype(const wbcl_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
