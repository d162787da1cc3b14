/* wbcl — white-box vision models with reference PyTorch weights: CRATE and ToST.
 *
 * CRATE (Yu et al. 2023, Ma-Lab-Berkeley/CRATE model/crate.py; SPEC §1.2, §2, §6.2):
 *   img (B, C, H, W) -> patches 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)' -> LayerNorm -> Linear
 *   -> LayerNorm; z0 = [cls; patches] + pos_embedding[:N+1]; per layer
 *   z½ = z + MSSA(LN z), z = ISTA(LN z½) (eta, lambda = 0.1, ReLU, no residual);
 *   logits = Linear(LayerNorm(z[:, 0])). LayerNorm eps 1e-5.
 * ToST (Wu et al. 2025, RobinWu218/ToST tost_cab.py on XCiT without LPI; SPEC §1.4, §6.2):
 *   conv patch embedding (3x3 stride-2 convs with BatchNorm in eval mode, GELU between them;
 *   4 convs for patch 16, 3 for patch 8), + Fourier positional encoding (64 features, 1x1
 *   conv); blocks x += g1 * TSSA(LN1 x), x += g2 * MLP(LN2 x) (GELU MLP); a CLS token and two
 *   class-attention blocks with tokens_norm (softmax attention of the CLS query over all
 *   tokens); final LayerNorm on CLS; Linear head. LayerNorm eps 1e-6, BatchNorm eps 1e-5.
 *   Class-attention quirk kept as the reference has it: the patch tokens after a
 *   class-attention block are 2 * LN2(x + g1 * LN1(x)) (ClassAttention passes its input
 *   through for them, and the block's residual adds them to themselves).
 *
 * Weights come from safetensors files with the reference state_dict key names (prefixes
 * "module." and "_orig_mod." stripped; tools/convert_pth.py converts .pth checkpoints).
 * Loading checks every tensor it needs: a missing key fails with WBCL_ERROR_FORMAT naming the
 * key, a wrong shape with WBCL_ERROR_SHAPE naming the key and both shapes, a NaN or infinity
 * with WBCL_ERROR_NUMERIC naming the key; messages are in wbcl_context_last_error. Keys the
 * model does not use (BatchNorm num_batches_tracked, optimizer leftovers) are ignored.
 * BatchNorm is folded into the preceding convolution at load (in double, rounded once).
 *
 * Sizes from the weights: a size field of the config that is 0 is read from the weights; a
 * non-zero one is checked against them, and a contradiction fails with WBCL_ERROR_SHAPE naming
 * the field, the key and both values ("config dim = 384 contradicts the weights: 'cls_token'
 * gives dim = 48"). So a zeroed config with the float fields set loads any checkpoint, and a
 * preset is a checked shorthand. The sizes used are in wbcl_crate_get_config /
 * wbcl_tost_get_config after loading.
 *   CRATE: dim (cls_token), depth (transformer.layers.*), heads * dim_head (qkv.weight rows; the
 *     weights do not fix the split: give heads or dim_head, the other follows; neither is
 *     WBCL_ERROR_INVALID_ARGUMENT), channels * patch^2 (to_patch_embedding.2.weight columns: give
 *     either, the other follows; neither: channels 3), num_classes (mlp_head.1.weight). The
 *     number of positions (max tokens, i.e. the largest image) is pos_embedding's rows.
 *   ToST: all sizes — dim (cls_token), depth (blocks.*), heads (blocks.0.attn.temp rows),
 *     mlp_hidden (blocks.0.mlp.fc1.weight rows), patch (4 patch_embed convs: 16, 3: 8),
 *     cls_layers (cls_attn_blocks.*), num_classes (head.weight). */
#ifndef WBCL_MODELS_H
#define WBCL_MODELS_H

#include <stddef.h>
#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"
#include "wbcl/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- configurations ---------------------------------------------------------------------- */
typedef struct wbcl_crate_config {
    size_t dim, depth, heads, dim_head; /* d, L, K, p (published: p = d / K); 0: weights   */
    size_t patch, channels;             /* patch edge P, input channels C (3); 0: weights  */
    size_t num_classes;                 /* 0: read from mlp_head.1.weight                  */
    float eta, lambd;                   /* ISTA step and threshold (0.1, 0.1)              */
    float ln_eps;                       /* 1e-5                                            */
    wbcl_dtype weight_dtype;            /* WBCL_F32 (0, default) or WBCL_F16: see below    */
} wbcl_crate_config;

/* Published CRATE configurations (CRATE paper Table 1, crate.py): "tiny" (d 384, L 12, K 6),
 * "small" (576, 12, 12), "base" (768, 12, 12), "large" (1024, 24, 16); patch 16, 3 channels,
 * p = d / K, eta = lambd = 0.1. num_classes 0 (from the weights). Unknown name:
 * WBCL_ERROR_INVALID_ARGUMENT. */
wbcl_status wbcl_crate_config_preset(const char *name, wbcl_crate_config *cfg);

typedef struct wbcl_tost_config {
    size_t dim, depth, heads; /* d, L, K (p = d / K); each 0: read from the weights          */
    size_t mlp_hidden;        /* hidden width of the MLPs; 0: read from the weights (4 d)     */
    size_t patch;             /* 16 (4 convs) or 8 (3 convs); 0: from the weights             */
    size_t cls_layers;        /* class-attention blocks (2); 0: from the weights              */
    size_t num_classes;       /* 0: read from head.weight                                     */
    float ln_eps, bn_eps;     /* 1e-6, 1e-5                                                  */
    wbcl_dtype weight_dtype;  /* WBCL_F32 (0, default) or WBCL_F16: see below                */
} wbcl_tost_config;

/* weight_dtype WBCL_F16: the weight matrices that the forward pass only multiplies with (GEMM
 * operands) are converted to float16 at load (rounded to nearest even), halving their device
 * memory; the GEMMs read them through the float16 path (tensor.h, gemm.h) and everything else
 * stays float32: activations, biases, norms, embeddings, CRATE's subspaces for Rc.
 * CRATE: patch embedding, MSSA U and output projection, ISTA dictionary (or its folded matrix),
 * head. ToST: conv stack (BN folded first), TSSA and class-attention projections, MLPs, head.
 * Measured effect on the logits of the committed golden models: perf/RESULTS.md (issue 7). */

/* Published ToST configurations (ToST paper Table 5): "tiny" (d 192, L 12, K 4), "small"
 * (384, 12, 8), "medium" (512, 24, 8); patch 16, MLP ratio 4, two class-attention blocks. */
wbcl_status wbcl_tost_config_preset(const char *name, wbcl_tost_config *cfg);

/* ---- running options ----------------------------------------------------------------------- */
/* Called after each stage with the stage's activations (device tensor owned by the model,
 * valid during the call). Stage names (the golden files use the same):
 *   CRATE: "embed" (B, N+1, d), "layer{i}.half", "layer{i}.out", "logits"
 *   ToST:  "patch" (B, N, d), "embed", "block{i}.out", "cls{j}.in", "cls{j}.out" (B, N+1, d),
 *          "feature" (B, d), "logits"
 * A non-zero return stops the forward pass, which returns that status. */
typedef wbcl_status (*wbcl_model_trace_fn)(void *user, const char *stage, const wbcl_tensor *t);

typedef struct wbcl_model_opts {
    wbcl_model_trace_fn trace; /* NULL: none                                                     */
    void *user;
    /* CRATE white-box diagnostics (CRATE Fig. 3), each NULL or depth * B doubles, [layer][batch]:
     *   Rc:       Rc(z½ | U_[K]) of the MSSA output against the layer's own subspaces
     *             (U = qkv.weight), with eps2 (0: 1.0) — wbcl_coding_rate_subspaces;
     *   sparsity: fraction of |z| > sparsity_threshold in the ISTA output — wbcl_sparsity. */
    double *Rc;
    double *sparsity;
    double eps2;
    float sparsity_threshold;
} wbcl_model_opts;

/* What the forward pass writes. */
typedef enum wbcl_model_output {
    WBCL_MODEL_LOGITS = 0,  /* (B, num_classes)                                              */
    WBCL_MODEL_FEATURES = 1 /* CRATE: final tokens z_L (B, N+1, d); ToST: normed CLS (B, d)    */
} wbcl_model_output;

/* ---- CRATE -------------------------------------------------------------------------------- */
typedef struct wbcl_crate wbcl_crate;

/* Reads a model from an open safetensors file; `file` names it in messages. cfg's size fields
 * are 0 (from the weights) or checked against them (above); every tensor's shape is checked. */
wbcl_status wbcl_crate_load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file,
                            const wbcl_crate_config *cfg, wbcl_crate **out);
/* The same from a path (opens and closes the file). */
wbcl_status wbcl_crate_load_file(wbcl_context *ctx, const char *path, const wbcl_crate_config *cfg,
                                 wbcl_crate **out);

/* images (B, C, H, W) with H and W multiples of the patch and (H/P)(W/P) + 1 <= the rows of
 * pos_embedding; out (B, num_classes) for LOGITS, (B, N+1, d) for FEATURES. opts may be NULL.
 * Work buffers are kept in the model and reused while (B, H, W) stay the same. */
wbcl_status wbcl_crate_forward(wbcl_context *ctx, wbcl_crate *m, const wbcl_tensor *images, wbcl_model_output what,
                               wbcl_tensor *out, const wbcl_model_opts *opts);
const wbcl_crate_config *wbcl_crate_get_config(const wbcl_crate *m); /* num_classes filled in */
size_t wbcl_crate_max_tokens(const wbcl_crate *m);                   /* rows of pos_embedding */
void wbcl_crate_destroy(wbcl_crate *m);                              /* NULL is a no-op       */

/* ---- ToST --------------------------------------------------------------------------------- */
typedef struct wbcl_tost wbcl_tost;

wbcl_status wbcl_tost_load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file,
                           const wbcl_tost_config *cfg, wbcl_tost **out);
wbcl_status wbcl_tost_load_file(wbcl_context *ctx, const char *path, const wbcl_tost_config *cfg, wbcl_tost **out);

/* images (B, 3, H, W), any H, W >= 1 (each stride-2 conv maps n to ceil(n/2)); out (B, classes)
 * for LOGITS, (B, d) for FEATURES. opts may be NULL (Rc and sparsity are CRATE's: ignored). */
wbcl_status wbcl_tost_forward(wbcl_context *ctx, wbcl_tost *m, const wbcl_tensor *images, wbcl_model_output what,
                              wbcl_tensor *out, const wbcl_model_opts *opts);
const wbcl_tost_config *wbcl_tost_get_config(const wbcl_tost *m);
void wbcl_tost_destroy(wbcl_tost *m); /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
#endif
