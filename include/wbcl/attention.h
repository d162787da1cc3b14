/* wbcl — softmax multi-head attention (ViT / GPT) and CRATE's multi-head
 * subspace self-attention (MSSA), non-causal and causal, with incremental
 * decoding (SPEC §1.1, §1.2).
 *
 * Two levels:
 *   1. Per-head kernels on projected tensors (B, K, N, p): the fused
 *      online-softmax attention, which never materializes the N x N scores.
 *      A strided form addresses q, k, v and o inside larger tensors (e.g.
 *      straight in the (B, N, 3d) output of a qkv projection), so that
 *      projections can be fused or replaced.
 *   2. Modules holding the reference PyTorch weights (SPEC §6.2), loadable
 *      from safetensors: `wbcl_mha` (timm ViT `Attention`; with causal = 1 the
 *      GPT baseline) and `wbcl_mssa` (CRATE `Attention`), with forward on
 *      x (B, N, d) and, for MSSA, a decode cache.
 *
 * Numerics: scores are s = scale * q.k; the kernels fold scale*log2(e) into q
 * and use exp2, keep a running maximum m and sum l per query and rescale the
 * output accumulator when m grows. Causal masking is explicit comparisons
 * (masked keys are skipped or their weights set to exactly 0), never -inf
 * arithmetic, so results are finite for any finite input (logits of 1e4
 * included) and the build needs no finite-math flags, nor is harmed by them.
 *
 * Causal alignment. With n_q queries and n_k >= n_q keys, query i is the
 * token at position i + (n_k - n_q) and sees keys j <= i + (n_k - n_q) (the
 * queries are the LAST n_q tokens). n_q == n_k is the usual lower-triangular
 * mask; n_q == 1 is one decode step. The diagonal is always visible, so no
 * row is empty.
 *
 * Kernel variants (wbcl_context_set_variant): CPU-shaped (several queries per
 * work-item, K packed into 16-key panels, keys streamed in blocks of 32,
 * output accumulators in registers) and GPU-shaped (one query per work-item,
 * K/V tiles in local memory). Both run everywhere and agree to rounding. */
#ifndef WBCL_ATTENTION_H
#define WBCL_ATTENTION_H

#include <stddef.h>
#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"
#include "wbcl/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- per-head kernels ------------------------------------------------------------------ */
/* Storage: q, k, v (or w) and o may each be WBCL_F32 or WBCL_F16 (tensor.h), in any mix; all
 * arithmetic is float32 and a half o is rounded once to nearest even. Accuracy against the
 * float32 result on the same (half-rounded) inputs: the float32 error plus 2^-11 |o| for a half
 * o. The modules (level 2) take float32 x only. */

/* o = softmax(q kᵀ * scale + M) v per (batch, head), M the causal mask if causal != 0.
 * q and o: (B, K, n_q, p); k and v: (B, K, n_k, p); n_q == n_k unless causal (n_q <= n_k,
 * see "Causal alignment" above) or not (any n_q). scale must be finite.
 * o must be a different tensor from q, k and v. */
wbcl_status wbcl_attention_softmax_heads(wbcl_context *ctx, const wbcl_tensor *q, const wbcl_tensor *k,
                                         const wbcl_tensor *v, float scale, int causal, wbcl_tensor *o);

/* MSSA per head: Q = K = V = w, o = softmax(w wᵀ * scale + M) w. w and o: (B, K, N, p).
 * CRATE uses scale = p^-1/2. o must not be w. */
wbcl_status wbcl_attention_mssa_heads(wbcl_context *ctx, const wbcl_tensor *w, float scale, int causal,
                                      wbcl_tensor *o);

/* Strided form: element (b, h, i, c) of X (X = q, k, v, o) is
 *   X[off_X + b*sb_X + h*sh_X + i*sn_X + c]      (elements, row-major, c < p unit stride)
 * e.g. q of a (B, N, 3d) qkv tensor: off 0, sb N*3d, sh p, sn 3d; k: off d; v: off 2d.
 * Every access is bounds-checked against the tensors' sizes before anything runs.
 * q, k and v may be the same tensor (MSSA); o must be a different tensor from all three. The
 * strides are not required to keep rows apart, but o rows that share storage give an
 * unspecified result. The CPU variant packs K and V into context scratch buffers first, so
 * k and v may be any views; decode steps use this form on a token cache with capacity.
 * One query per (batch, head) with float32 q, k, v and o (a decode step; p <= 256 on the CPU
 * variant, <= 64 on the GPU variant) reads k and v in place instead, split over the keys in
 * chunks whose partial softmax sums are then combined: the same result to rounding. */
typedef struct wbcl_attention_desc {
    size_t batch, heads; /* B, K                        */
    size_t n_q, n_k, p;  /* queries, keys, head dim     */
    float scale;         /* finite                      */
    int causal;          /* 0 or 1                      */
    size_t off_q, sb_q, sh_q, sn_q;
    size_t off_k, sb_k, sh_k, sn_k;
    size_t off_v, sb_v, sh_v, sn_v;
    size_t off_o, sb_o, sh_o, sn_o;
} wbcl_attention_desc;

wbcl_status wbcl_attention_softmax_strided(wbcl_context *ctx, const wbcl_attention_desc *desc,
                                           const wbcl_tensor *q, const wbcl_tensor *k, const wbcl_tensor *v,
                                           wbcl_tensor *o);

/* ---- softmax multi-head attention module (timm ViT `Attention`, GPT) ------------------------ */
/* q, k, v = split(x Wqkvᵀ + bqkv) with [q | k | v] column blocks, each head-major;
 * o = softmax(q kᵀ p^-1/2 (+ causal mask)) v; out = merge(o) Wprojᵀ + bproj. p = d / heads. */
typedef struct wbcl_mha wbcl_mha;

/* From host arrays (row-major float32): qkv_weight (3d, d), qkv_bias (3d) or NULL (timm's
 * default qkv_bias=False), proj_weight (d, d), proj_bias (d). heads must divide d. */
wbcl_status wbcl_mha_create(wbcl_context *ctx, size_t dim, size_t heads, int causal, const float *qkv_weight,
                            const float *qkv_bias, const float *proj_weight, const float *proj_bias,
                            wbcl_mha **out);

/* From a safetensors file: keys prefix + "qkv.weight" (3d, d), "qkv.bias" (3d, optional),
 * "proj.weight" (d, d), "proj.bias" (d). prefix may be NULL or e.g. "blocks.0.attn.".
 * Missing keys or wrong shapes fail naming the key (WBCL_ERROR_FORMAT / _SHAPE); `file`
 * names the source in messages. */
wbcl_status wbcl_mha_load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *prefix,
                          size_t dim, size_t heads, int causal, wbcl_mha **out);

/* y = attention(x); x and y: (B, N, d) or (N, d), same shape; y must not be x.
 * Intermediates are kept in the module and reused while (B, N) stays the same. */
wbcl_status wbcl_mha_forward(wbcl_context *ctx, wbcl_mha *m, const wbcl_tensor *x, wbcl_tensor *y);

size_t wbcl_mha_dim(const wbcl_mha *m);
size_t wbcl_mha_heads(const wbcl_mha *m);
int wbcl_mha_causal(const wbcl_mha *m);
void wbcl_mha_destroy(wbcl_mha *m); /* NULL is a no-op */

/* ---- MSSA module (CRATE `Attention`) --------------------------------------------------------- */
/* w = split(x Uᵀ) (U: (K*p, d), no bias); o = softmax(w wᵀ p^-1/2 (+ causal mask)) w;
 * out = merge(o) Woᵀ + bo (Wo: (d, K*p)). As in CRATE, when heads == 1 and dim_head == d the
 * output projection may be absent (identity). */
typedef struct wbcl_mssa wbcl_mssa;

/* From host arrays: qkv_weight (K*p, d); out_weight (d, K*p) and out_bias (d), both NULL only
 * when heads == 1 and dim_head == dim (identity output, CRATE's project_out = False). */
wbcl_status wbcl_mssa_create(wbcl_context *ctx, size_t dim, size_t heads, size_t dim_head, int causal,
                             const float *qkv_weight, const float *out_weight, const float *out_bias,
                             wbcl_mssa **out);

/* Keys prefix + "qkv.weight" (K*p, d), "to_out.0.weight" (d, K*p), "to_out.0.bias" (d); the two
 * to_out keys may be absent only when heads == 1 and dim_head == dim. */
wbcl_status wbcl_mssa_load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *prefix,
                           size_t dim, size_t heads, size_t dim_head, int causal, wbcl_mssa **out);

/* y = MSSA(x); x, y: (B, N, d) or (N, d), same shape; y must not be x. */
wbcl_status wbcl_mssa_forward(wbcl_context *ctx, wbcl_mssa *m, const wbcl_tensor *x, wbcl_tensor *y);

size_t wbcl_mssa_dim(const wbcl_mssa *m);
size_t wbcl_mssa_heads(const wbcl_mssa *m);
size_t wbcl_mssa_dim_head(const wbcl_mssa *m);
int wbcl_mssa_causal(const wbcl_mssa *m);
void wbcl_mssa_destroy(wbcl_mssa *m); /* NULL is a no-op */

/* Incremental (causal) decoding: the cache holds the projections w_s = U x_s of the tokens
 * decoded so far (book eq. 5.3.31, the "KV cache"; for MSSA keys = values = w), in a grow-only
 * device buffer that doubles when full. Step t appends w_t and attends one query against the
 * t + 1 cached keys, so y_t equals row t of wbcl_mssa_forward of a causal module on x_0..x_t
 * (to float rounding), whatever the module's own causal flag. */
typedef struct wbcl_mssa_cache wbcl_mssa_cache;

/* A cache for `batch` independent sequences, for module m (which must outlive it).
 * capacity_hint: initial number of tokens (0: a small default). */
wbcl_status wbcl_mssa_cache_create(wbcl_context *ctx, const wbcl_mssa *m, size_t batch, size_t capacity_hint,
                                   wbcl_mssa_cache **out);
/* x_t: (B, d) or (B, 1, d) — token t of each sequence; y_t: the same shape as x_t, not x_t. */
wbcl_status wbcl_mssa_decode_step(wbcl_context *ctx, wbcl_mssa_cache *cache, const wbcl_tensor *x_t,
                                  wbcl_tensor *y_t);
size_t wbcl_mssa_cache_length(const wbcl_mssa_cache *cache);   /* tokens decoded so far      */
size_t wbcl_mssa_cache_capacity(const wbcl_mssa_cache *cache); /* tokens the buffer holds now */
void wbcl_mssa_cache_reset(wbcl_mssa_cache *cache);            /* forget all tokens; keeps memory */
void wbcl_mssa_cache_destroy(wbcl_mssa_cache *cache);          /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
#endif
