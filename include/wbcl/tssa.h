/* wbcl — TSSA: token statistics self-attention (ToST), non-causal and causal,
 * with a recurrent decode state (SPEC.md §1.4, §1.5).
 *
 * Two levels:
 *   - kernels on projected tensors `w`, either per-head (B, K, N, p) or in
 *     the token layout (B, N, d) / (N, d) that a projection produces
 *     (channel j = h*p + c belongs to head h): no split copy is needed;
 *   - layers holding the reference PyTorch weights (SPEC.md §6.2), loaded
 *     from safetensors or built from host arrays, with forward on x (B, N, d).
 *
 * Cost: time O(N*d); scratch beyond the projections O(B*K*(N + p)): the
 * membership Pi (B, K, N) and per-block partial statistics (at most 64
 * token blocks per batch entry), never an N x N or N x p x p buffer.
 * Reductions over tokens are blocked (row-block partials combined by a
 * second kernel), so float sums over N tokens carry an error of about
 * (N/blocks + blocks) ulps at worst, not N. */
#ifndef WBCL_TSSA_H
#define WBCL_TSSA_H

#include <stddef.h>
#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"
#include "wbcl/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- non-causal TSSA (SPEC §1.4) ----------------------------------------------------------
 *   nrm[b,h,c]   = max(sqrt(sum_n w[b,h,n,c]^2), 1e-12)
 *   logit[b,h,n] = temp[h] * sum_c (w[b,h,n,c] / nrm[b,h,c])^2
 *   Pi[b,:,n]    = softmax over heads (max-subtracted)
 *   s[b,h]       = sum_n Pi[b,h,n] + 1e-8
 *   dots[b,h,c]  = sum_n Pi[b,h,n] w[b,h,n,c]^2 / s[b,h]
 *   y[b,h,n,c]   = -w[b,h,n,c] Pi[b,h,n] / (1 + dots[b,h,c])
 * temp has K elements ((K) or (K, 1), as checkpoints store it). y has w's
 * shape and must not be w. Pi, if not NULL, receives the membership (B, K, N). */
wbcl_status wbcl_tssa_heads(wbcl_context *ctx, const wbcl_tensor *w, const wbcl_tensor *temp, wbcl_tensor *y,
                            wbcl_tensor *Pi);

/* The same on the token layout: w is (B, N, d) or (N, d) with d = heads * p
 * (heads must divide d; temp has `heads` elements); y has w's shape. */
wbcl_status wbcl_tssa_tokens(wbcl_context *ctx, const wbcl_tensor *w, size_t heads, const wbcl_tensor *temp,
                             wbcl_tensor *y, wbcl_tensor *Pi);

/* ---- causal TSSA and its recurrent state (SPEC §1.5) --------------------------------------
 * For the tokens t = t0 .. t0+N-1 of a sequence (t0 = 0 without a state):
 *   S[b,h,t,c]   = sum_{s<=t} w[b,h,s,c]^2
 *   logit[b,h,t] = temp[h] * sum_c (w[b,h,t,c]^2 / max(S[b,h,t,c], 1e-12) + denom_bias[h,t])
 *   Pi[b,:,t]    = softmax over heads
 *   Q[b,h,t,c]   = sum_{s<=t} Pi[b,h,s] w[b,h,s,c]^2 ;  P[b,h,t] = sum_{s<=t} Pi[b,h,s]
 *   y[b,h,t,c]   = -w[b,h,t,c] Pi[b,h,t] / (1 + Q[b,h,t,c] / (P[b,h,t] + 1e-8))
 * denom_bias is (K, Tmax) or (K, Tmax, 1); positions t >= Tmax are an error
 * (WBCL_ERROR_SHAPE naming N, t0 and Tmax). Prefix sums are blocked scans
 * (block sums, a scan of the block sums, local scans).
 *
 * The state keeps, per batch entry and head, S (p), Q (p), P and the
 * position t: constant memory per token. Passing a state continues the
 * sequence from its position and advances it by N (decode: N = 1, one call
 * per token; prefill: any N); the result equals the batch form on the whole
 * sequence token by token. Sums in the state are compensated (Kahan), so
 * decoding a long sequence accumulates no more error than the batch form. */
typedef struct wbcl_tssa_state wbcl_tssa_state;

/* A zeroed state (position 0) for `batch` sequences of `heads` heads of dimension p. */
wbcl_status wbcl_tssa_state_create(wbcl_context *ctx, size_t batch, size_t heads, size_t p, wbcl_tssa_state **out);
void wbcl_tssa_state_destroy(wbcl_tssa_state *s); /* NULL is a no-op */
/* Back to position 0 with zero sums. */
wbcl_status wbcl_tssa_state_reset(wbcl_context *ctx, wbcl_tssa_state *s);
/* The position of the next token (number of tokens seen). 0 for NULL. */
size_t wbcl_tssa_state_position(const wbcl_tssa_state *s);
/* Copies the sums to the host (each may be NULL): S and Q (batch*heads*p), P (batch*heads). */
wbcl_status wbcl_tssa_state_read(wbcl_context *ctx, const wbcl_tssa_state *s, float *S, float *Q, float *P);

/* w (B, K, N, p); state NULL (a new sequence) or made for (B, K, p); y as w, not w; Pi NULL or (B, K, N).
 * On an argument, shape or kernel-build failure the state is unchanged; a device
 * error after the first launch (out of resources) leaves it unspecified: reset it. */
wbcl_status wbcl_tssa_causal_heads(wbcl_context *ctx, const wbcl_tensor *w, const wbcl_tensor *temp,
                                   const wbcl_tensor *denom_bias, wbcl_tssa_state *state, wbcl_tensor *y,
                                   wbcl_tensor *Pi);
/* The same on the token layout (B, N, d) / (N, d), d = heads * p. */
wbcl_status wbcl_tssa_causal_tokens(wbcl_context *ctx, const wbcl_tensor *w, size_t heads, const wbcl_tensor *temp,
                                    const wbcl_tensor *denom_bias, wbcl_tssa_state *state, wbcl_tensor *y,
                                    wbcl_tensor *Pi);

/* ---- layers with weights (SPEC §6.2) --------------------------------------------------------
 * attn.tssa (ToST AttentionTSSA): out = TSSA(x W^T + b) Wo^T + bo, keys
 *   qkv.weight (d, d), qkv.bias (d) [optional], temp (K, 1), to_out.0.weight (d, d), to_out.0.bias (d).
 * attn.tssa_causal (ToST-LM CausalSelfAttention_TSSA): keys
 *   c_attn.weight (d, d), c_attn.bias (d) [optional], temp (K, 1), denom_bias (K, Tmax, 1),
 *   c_proj.weight (d, d), c_proj.bias (d) [optional].
 * Loaders read prefix + key (prefix may be NULL, e.g. "blocks.3.attn."); a
 * missing key or a wrong shape fails with a message naming the key; `file`
 * names the source in messages. heads must divide d. A layer keeps its
 * work buffers between calls (grown to the largest input seen). */
typedef struct wbcl_tssa_layer wbcl_tssa_layer;

/* From host arrays (copied): W, Wo (d, d); b, bo (d) or NULL for none; temp (heads). */
wbcl_status wbcl_tssa_layer_create(wbcl_context *ctx, size_t d, size_t heads, const float *W, const float *b,
                                   const float *temp, const float *Wo, const float *bo, wbcl_tssa_layer **out);
wbcl_status wbcl_tssa_layer_load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *prefix,
                                 size_t d, size_t heads, wbcl_tssa_layer **out);
/* x (B, N, d) or (N, d); out has x's shape and must not be x. */
wbcl_status wbcl_tssa_layer_forward(wbcl_context *ctx, wbcl_tssa_layer *layer, const wbcl_tensor *x,
                                    wbcl_tensor *out);
void wbcl_tssa_layer_destroy(wbcl_tssa_layer *layer); /* NULL is a no-op */

typedef struct wbcl_tssa_causal_layer wbcl_tssa_causal_layer;

/* From host arrays (copied): denom_bias (heads, tmax); b, bo may be NULL. */
wbcl_status wbcl_tssa_causal_layer_create(wbcl_context *ctx, size_t d, size_t heads, size_t tmax, const float *W,
                                          const float *b, const float *temp, const float *denom_bias,
                                          const float *Wo, const float *bo, wbcl_tssa_causal_layer **out);
/* Tmax is read from the shape of denom_bias. */
wbcl_status wbcl_tssa_causal_layer_load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file,
                                        const char *prefix, size_t d, size_t heads, wbcl_tssa_causal_layer **out);
/* x (B, N, d) or (N, d); state NULL (whole sequences) or a state for (B, heads, d/heads)
 * that the call continues and advances (decode: N = 1). out as x, not x. */
wbcl_status wbcl_tssa_causal_layer_forward(wbcl_context *ctx, wbcl_tssa_causal_layer *layer, const wbcl_tensor *x,
                                           wbcl_tssa_state *state, wbcl_tensor *out);
/* The longest sequence the layer accepts (Tmax); 0 for NULL. */
size_t wbcl_tssa_causal_layer_tmax(const wbcl_tssa_causal_layer *layer);
void wbcl_tssa_causal_layer_destroy(wbcl_tssa_causal_layer *layer); /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
#endif
