/* Internal model constructors of the shift-invariant ReduNet (host/ops/circulant.c), used by the model
 * files (host/model/circulant_io.c). Not public API. */
#ifndef WBCL_CIRCULANT_INTERNAL_H
#define WBCL_CIRCULANT_INTERNAL_H

#include "wbcl/circulant.h"

/* An empty model with L layers (device buffers allocated, contents undefined until set_layer). */
wbcl_status wbcl__circulant_new(wbcl_context *ctx, int dims, size_t C, size_t H, size_t W, int K, int L,
                                const wbcl_circulant_params *p, wbcl_circulant **out);
/* Layer l: ops (K+1, P, C, C) complex (re, im) floats, gamma (K). */
wbcl_status wbcl__circulant_set_layer(wbcl_context *ctx, wbcl_circulant *net, int l, const float *ops,
                                      const float *gamma);
/* History (L, 3) or NULL (none); lifting kernel (C, Cin, kh, kw) or NULL. */
wbcl_status wbcl__circulant_set_extra(wbcl_circulant *net, const double *hist, const float *lift, size_t Cin,
                                      size_t kh, size_t kw);
/* The lifting kernel (host copy) and its sizes; NULL if none. */
const float *wbcl__circulant_lift(const wbcl_circulant *net, size_t *Cin, size_t *kh, size_t *kw);

#endif
