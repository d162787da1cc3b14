/* wbcl — moving host arrays and safetensors weights onto the device.
 * Bridges wbcl/io.h (host files) and wbcl/tensor.h (device tensors). */
#ifndef WBCL_WEIGHTS_H
#define WBCL_WEIGHTS_H

#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"
#include "wbcl/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a float32 device tensor from a host array of any element type
 * (converted as wbcl_array_to_f32 does). The array must have 1..4 dimensions,
 * none zero. `what` names it in messages (e.g. the file). */
wbcl_status wbcl_tensor_from_array(wbcl_context *ctx, const wbcl_array *a, const char *what, wbcl_tensor **out);

/* Reads the tensor named prefix+name (prefix may be NULL) from a safetensors
 * file as a float32 device tensor whose shape must be exactly shape[0..ndim-1].
 *   - missing and required  -> WBCL_ERROR_FORMAT "FILE: missing tensor 'KEY'"
 *   - missing and optional  -> WBCL_SUCCESS with *out = NULL
 *   - other shape           -> WBCL_ERROR_SHAPE "FILE: 'KEY' has shape (a, b), expected (c)"
 *   - NaN or infinity       -> WBCL_ERROR_NUMERIC naming the key and the first bad index
 * `file` names the source in messages. */
wbcl_status wbcl_weight_load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *prefix,
                             const char *name, int ndim, const size_t *shape, int required, wbcl_tensor **out);

#ifdef __cplusplus
}
#endif
#endif
