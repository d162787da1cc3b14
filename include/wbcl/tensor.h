/* wbcl — device tensors: up to 4-D, row-major (C order), float32 or float16 elements.
 *
 * Precision policy. WBCL_F16 is *storage* only: IEEE binary16, 2 bytes per element, read and
 * written by kernels with OpenCL C 1.2's core vload_half / vstore_half_rte, which work without
 * the cl_khr_fp16 extension (OpenCL C 1.2 spec 6.1.1.1, 6.12.7); all arithmetic is float32.
 * So F16 tensors work on every OpenCL 1.2 device; cl_khr_fp16 is not needed (wbcl-info shows it
 * for information). The host API always takes and returns float: values written to an F16
 * tensor are rounded to nearest, ties to even (wbcl_f32_to_f16: magnitudes >= 65520 become inf,
 * below 2^-14 become subnormal halves or zero), reads widen exactly. Relative rounding error of
 * one store: <= 2^-11 for normal halves (|x| in [2^-14, 65504]).
 * Which ops accept F16: the tensor functions below, wbcl_gemm / wbcl_gemm_strided (any mix of
 * dtypes; see gemm.h), the per-head attention kernels wbcl_attention_softmax_heads / _strided and
 * wbcl_attention_mssa_heads (attention.h). Every other op refuses an F16 tensor with WBCL_ERROR_DTYPE and a message
 * naming the op, the argument and the dtype. */
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

/* Copies the whole tensor to/from host memory; `count` must equal numel (F16: converted, see
 * above). */
wbcl_status wbcl_tensor_read(wbcl_context *ctx, const wbcl_tensor *t, float *dst, size_t count);
wbcl_status wbcl_tensor_write(wbcl_context *ctx, wbcl_tensor *t, const float *src, size_t count);
wbcl_status wbcl_tensor_fill(wbcl_context *ctx, wbcl_tensor *t, float value); /* F16: value rounded once */
/* dst <- src; both must have the same number of elements. Across dtypes the values are
 * converted on the device (F16 -> F32 exact, F32 -> F16 round to nearest even). */
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
