/* One-query softmax attention (a decode step over a key/value cache), split over the keys
 * (host/ops/attn_decode.c, cl/attn_decode.cl). Not installed. */
#ifndef WBCL_ATTN_DECODE_H
#define WBCL_ATTN_DECODE_H

#include "internal.h"
#include "wbcl/attention.h"

/* Whether wbcl__attention_decode takes this call: n_q == 1, float32 q, k, v, o, and p at most 256
 * (CPU variant) or 64 (GPU variant: q and the accumulators, 2p floats, stay in registers, 196 of
 * them on sm_90 at p = 64; at p = 128 ptxas gives the kernel a 1 KiB stack frame,
 * tools/gpu-check.sh). Larger p takes the fused kernels of attention.c. */
int wbcl__attention_decode_applies(const wbcl_context *ctx, const wbcl_attention_desc *d, const wbcl_tensor *q,
                                   const wbcl_tensor *k, const wbcl_tensor *v, const wbcl_tensor *o);
/* o = softmax(q kᵀ scale) v for one query per (batch, head), the desc already validated
 * (wbcl_attention_softmax_strided). The causal flag changes nothing: one query is the last token. */
wbcl_status wbcl__attention_decode(wbcl_context *ctx, const wbcl_attention_desc *d, const wbcl_tensor *q,
                                   const wbcl_tensor *k, const wbcl_tensor *v, wbcl_tensor *o);

#endif
