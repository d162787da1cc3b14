/* Internals shared by the models (host/model/crate.c, tost.c) and by the layers with weights that
 * stand beside their ops (the TSSA, XCA and energy layers in host/ops/tssa.c, xca.c, energy.c):
 * projections, launches, work tensors, weights. Not installed. */
#ifndef WBCL_MODEL_INTERNAL_H
#define WBCL_MODEL_INTERNAL_H

#include "internal.h"
#include "wbcl/io.h"

/* Y (rows, n) = X (rows, k) Wᵀ (+ bias (n)), act 0 = none, 1 = GELU (needs the bias); W (n, k)
 * row-major. X and Y are read/written from offset 0, contiguous. wbcl__gemm_linear. */
wbcl_status wbcl__model_linear(wbcl_context *ctx, const wbcl_tensor *X, size_t rows, size_t k, const wbcl_tensor *W,
                               size_t n, const wbcl_tensor *bias, int act, wbcl_tensor *Y);
/* y = x W^T (+ b): x (B, N, in) or (N, in), W (out, in), b (out) or NULL, y (.., out); shapes checked
 * again (a mismatch would read out of bounds). wbcl__gemm_linear. */
wbcl_status wbcl__linear(wbcl_context *ctx, const wbcl_tensor *x, const wbcl_tensor *W, const wbcl_tensor *b,
                         wbcl_tensor *y);
/* Launches a models.cl kernel on the range (g0, g1, g2) (g2 = 1: 2-D), local size left to the runtime. */
wbcl_status wbcl__model_launch(wbcl_context *ctx, wbcl_kern *k, size_t g0, size_t g1, size_t g2);
/* WBCL_ERROR_SHAPE unless a, b, c and a*b fit in 32 bits (the kernels' index type). */
wbcl_status wbcl__model_check32(wbcl_context *ctx, const char *op, size_t a, size_t b, size_t c);
/* Gets a models.cl kernel. */
wbcl_status wbcl__model_kernel(wbcl_context *ctx, const char *name, wbcl_kern **k);
/* (Re)creates *t with the given shape unless it already has it (contents undefined after). */
wbcl_status wbcl__model_ensure(wbcl_context *ctx, wbcl_tensor **t, int ndim, const size_t *shape);
/* Makes *t a 1-D tensor of at least n elements (grow-only; contents undefined after growing). */
wbcl_status wbcl__model_ensure_cap(wbcl_context *ctx, wbcl_tensor **t, size_t n);
/* Reads prefix+name as float32 host data of exactly the given shape, non-finite values
 * rejected (messages as wbcl_weight_load). *out malloc'd; caller frees. */
wbcl_status wbcl__model_host_weight(wbcl_context *ctx, const wbcl_safetensors *st, const char *file,
                                    const char *prefix, const char *name, int ndim, const size_t *shape,
                                    float **out);
/* A device tensor from host floats with the given shape (NULL data: *out = NULL, success); a failure
 * names the op and the argument. (host/model/weights.c) */
wbcl_status wbcl__from_host(wbcl_context *ctx, const float *data, int ndim, const size_t *shape, const char *op,
                            const char *what, wbcl_tensor **out);
/* Checks that out has exactly the shape wanted; names the op. */
wbcl_status wbcl__model_check_out(wbcl_context *ctx, const char *op, const wbcl_tensor *out, int ndim,
                                  const size_t *shape);



/* Reads the shape of tensor `key` (whose data are read and dropped). Missing: WBCL_ERROR_FORMAT
 * naming the key; ndim other than `ndim`: WBCL_ERROR_SHAPE. */
wbcl_status wbcl__model_key_shape(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *key,
                                  int ndim, size_t *shape);
/* A size the weights fix: *cfg_value 0 takes weights_value; a different non-zero value fails with
 * WBCL_ERROR_SHAPE naming the config field, the key and both values. */
wbcl_status wbcl__model_size(wbcl_context *ctx, const char *file, const char *field, const char *key, size_t *cfg_value,
                             size_t weights_value);
/* The number n of consecutive keys prefix{0..n-1}suffix present in the file. */
size_t wbcl__model_count(const wbcl_safetensors *stf, const char *prefix, const char *suffix);
/* The vision models' width d from 'cls_token' (1, 1, d), into *dim as wbcl__model_size does. */
wbcl_status wbcl__model_cls_dim(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, size_t *dim);
/* The depth: the number of blocks prefix{i}suffix (at least one, else WBCL_ERROR_FORMAT naming
 * prefix0suffix), into *depth as wbcl__model_size does. */
wbcl_status wbcl__model_depth(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *prefix,
                              const char *suffix, size_t *depth);
#endif
