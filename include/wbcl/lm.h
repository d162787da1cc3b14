/* wbcl — causal language models on token ids: the GPT-2 baseline, ToST-LM and Causal-CRATE,
 * with a decode state per batch of sequences and generation (issue 18; SPEC §6.4).
 *
 * Models (weights by the reference code's own state_dict keys; prefixes "module." and
 * "_orig_mod." are stripped by the safetensors reader):
 *   gpt2     nanoGPT: transformer.wte.weight (V, d), transformer.wpe.weight (block_size, d),
 *            blocks transformer.h.{i}. = ln_1, attn.c_attn (3d, d) split [q | k | v] into K heads of
 *            p = d / K, causal softmax attention with scale p^-1/2, attn.c_proj (d, d), ln_2,
 *            mlp.c_fc (4d, d), exact GELU, mlp.c_proj (d, 4d):
 *              x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)); logits = lm_head(ln_f(x)).
 *   tost_lm  the same with attn = ToST's CausalSelfAttention_TSSA (SPEC §1.5): attn.c_attn (d, d),
 *            attn.temp (K, 1), attn.denom_bias (K, block_size, 1), attn.c_proj (d, d); when the file
 *            has ToST's layer scales transformer.h.{i}.gamma1 / gamma2 (d) (the ToST repository's
 *            language Block), x = x + gamma1 * attn(ln_1(x)); x = x + gamma2 * mlp(ln_2(x)).
 *   crate_lm CRATE's crate_gpt.py (book eqs. 5.3.24-25): blocks prenorm_1, attn.c_attn.weight
 *            (K p, d, no bias; q = k = v: causal MSSA with scale p^-1/2), attn.c_proj.weight (d, K p)
 *            and .bias, prenorm_2, ista.weight (d, d) (ISTA step 0.1, lambda 0.1, ReLU threshold):
 *              x = x + attn(prenorm_1(x)); x = ista(prenorm_2(x)); logits = lm_head(x) (no ln_f).
 * LayerNorm eps 1e-5; LayerNorm and Linear biases are optional (nanoGPT's `bias` flag): each is
 * used when the file has it. lm_head.weight (V, d) when present, else wte (tied; safetensors
 * stores a tied tensor once). The causal-mask buffers `attn.bias` (1, 1, block_size, block_size)
 * that the references save are accepted and ignored; other unknown keys are ignored too.
 *
 * Every size is read from the weights: V and d from wte, block_size from wpe, depth from the
 * blocks present, 4d from mlp.c_fc, K p from attn.c_attn (crate_lm), whether biases exist; only
 * the number of heads K is given. A missing key fails with WBCL_ERROR_FORMAT naming the key, a
 * wrong shape with WBCL_ERROR_SHAPE naming the key and both shapes, a NaN or infinity with
 * WBCL_ERROR_NUMERIC naming the key; heads not dividing d (K p) is WBCL_ERROR_SHAPE.
 *
 * Token ids are host arrays of int32 or int64 (wbcl_array, io.h), (B, T) or (T) (B = 1). An id
 * outside [0, V) is WBCL_ERROR_INVALID_ARGUMENT naming the id, its place and V; T (or the decode
 * position) beyond block_size is WBCL_ERROR_SHAPE. Logits are float32 device tensors.
 *
 * Decoding (wbcl_lm_state): the state of B sequences. gpt2 keeps a key/value cache per layer
 * (B, 2K, capacity, p: the K key heads, then the K value heads), crate_lm the cache of w = U x per
 * layer (B, K, capacity, p) (MSSA: keys = values = w); both grow by doubling up to block_size and
 * are read in place by the strided attention (attention.h), one query per sequence per step,
 * split over the keys. The projections of a step (B <= 8 rows) take a GEMV: one pass over the
 * weights, which bounds a decode step on most devices. tost_lm keeps the causal-TSSA
 * recurrent state per layer (wbcl_tssa_state: S, Q, P per head, constant memory in the number of
 * tokens). A step's logits equal the last row of wbcl_lm_forward on the whole sequence to float
 * rounding (tests/test_lm.c). */
#ifndef WBCL_LM_H
#define WBCL_LM_H

#include <stddef.h>
#include <stdint.h>
#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"
#include "wbcl/io.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wbcl_lm_kind { WBCL_LM_GPT2 = 0, WBCL_LM_TOST = 1, WBCL_LM_CRATE = 2 } wbcl_lm_kind;

/* "gpt2", "tost_lm", "crate_lm" <-> kind. Unknown name: WBCL_ERROR_INVALID_ARGUMENT. */
wbcl_status wbcl_lm_kind_from_name(const char *name, wbcl_lm_kind *out);
const char *wbcl_lm_kind_name(wbcl_lm_kind kind); /* "?" for a bad value */

/* What the weights fixed (filled in by the loader). */
typedef struct wbcl_lm_info {
    wbcl_lm_kind kind;
    size_t vocab, block_size, dim, depth, heads, dim_head; /* V, T_max, d, L, K, p     */
    size_t mlp_hidden;                                    /* 4d (0 for crate_lm)       */
    int bias;                                             /* Linear/LayerNorm biases present (ln_1 / prenorm_1) */
    int tied;                                             /* lm_head is wte            */
} wbcl_lm_info;

typedef struct wbcl_lm wbcl_lm;

/* From an open safetensors file (`file` names it in messages) or a path. */
wbcl_status wbcl_lm_load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, wbcl_lm_kind kind,
                         size_t heads, wbcl_lm **out);
wbcl_status wbcl_lm_load_file(wbcl_context *ctx, const char *path, wbcl_lm_kind kind, size_t heads,
                              wbcl_lm **out);
const wbcl_lm_info *wbcl_lm_get_info(const wbcl_lm *m); /* NULL for NULL */
void wbcl_lm_destroy(wbcl_lm *m);                       /* NULL is a no-op */

/* Checks ids (int32 or int64, (B, T) or (T), 1 <= T <= block_size, every id in [0, V)) and
 * returns B and T. */
wbcl_status wbcl_lm_check_ids(wbcl_context *ctx, const wbcl_lm *m, const wbcl_array *ids, size_t *B, size_t *T);

/* Full forward of whole sequences from position 0: logits (B, T, V) (or (T, V) for 1-D ids;
 * any shape of B*T*V elements is accepted). Work buffers are kept in the model. */
wbcl_status wbcl_lm_forward(wbcl_context *ctx, wbcl_lm *m, const wbcl_array *ids, wbcl_tensor *logits);

/* ---- decoding ----------------------------------------------------------------------------- */
typedef struct wbcl_lm_state wbcl_lm_state;

/* A state for `batch` sequences at position 0. The model must outlive it. */
wbcl_status wbcl_lm_state_create(wbcl_context *ctx, wbcl_lm *m, size_t batch, wbcl_lm_state **out);
void wbcl_lm_state_destroy(wbcl_lm_state *s);                      /* NULL is a no-op          */
wbcl_status wbcl_lm_state_reset(wbcl_context *ctx, wbcl_lm_state *s); /* back to position 0    */
size_t wbcl_lm_state_position(const wbcl_lm_state *s);             /* tokens seen per sequence */
/* Device bytes the state holds now (caches or recurrent sums). */
size_t wbcl_lm_state_bytes(const wbcl_lm_state *s);

/* Runs T more tokens of each sequence (ids (B, T) or, with B = 1, (T); the state's batch must be
 * B) from the state's position t0 (t0 + T <= block_size) and advances it: the prompt once
 * (prefill) or a chunk. last_logits (B, V) (any shape of B*V elements) receives the logits of
 * the last of the T tokens; NULL skips the head. On a failure before any launch the state is
 * unchanged; after a device error, reset it. */
wbcl_status wbcl_lm_prefill(wbcl_context *ctx, wbcl_lm_state *s, const wbcl_array *ids, wbcl_tensor *last_logits);
/* One token per sequence: tokens[b] for b < batch; logits (B, V) as above. */
wbcl_status wbcl_lm_step(wbcl_context *ctx, wbcl_lm_state *s, const int64_t *tokens, wbcl_tensor *logits);

/* ---- generation --------------------------------------------------------------------------- */
/* Sampling. temperature 0: greedy (argmax, the lowest id on ties). temperature > 0: softmax of
 * logits / temperature (in double) over the top_k largest logits (top_k 0 or >= V: all; ties
 * at the k-th value are kept), one draw per sequence per step in batch order from wbcl's own
 * generator: SplitMix64 (Steele, Lea, Flood 2014) seeded with `seed`,
 *   state += 0x9E3779B97F4A7C15; z = state; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9;
 *   z = (z ^ z>>27) * 0x94D049BB133111EB; z ^= z>>31;  u = (z >> 11) * 2^-53 in [0, 1);
 * the token is the first id whose cumulative probability exceeds u. Same seed, same ids on
 * every device up to float rounding of the logits. */
typedef struct wbcl_lm_sampling {
    double temperature; /* >= 0, finite */
    size_t top_k;       /* 0: all       */
    uint64_t seed;
} wbcl_lm_sampling;

/* Called after each generated token: step (0-based), the B new ids. Non-zero stops the
 * generation, which returns that value as its status. */
typedef wbcl_status (*wbcl_lm_token_fn)(void *user, size_t step, const int64_t *ids, size_t batch);

/* prompt (B, T0) or (T0), int32/int64; prefill once, then n_new decode steps (T0 + n_new <=
 * block_size). out: B * (T0 + n_new) int64, row b = prompt row b followed by its new ids.
 * sampling NULL: greedy. on_token may be NULL. */
wbcl_status wbcl_lm_generate(wbcl_context *ctx, wbcl_lm *m, const wbcl_array *prompt, size_t n_new,
                             const wbcl_lm_sampling *sampling, wbcl_lm_token_fn on_token, void *user,
                             int64_t *out);

/* Picks the next id of one sequence from its V logits (the rule above); rng is the generator's
 * state (advanced by one draw when temperature > 0). Returns -1 only for V = 0. */
int64_t wbcl_lm_pick(const float *logits, size_t V, const wbcl_lm_sampling *sampling, uint64_t *rng);

#ifdef __cplusplus
}
#endif
#endif
