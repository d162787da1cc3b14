/* CRATE vision model (include/wbcl/models.h): composed from the ops — patch rearrange
 * (models.cl), LayerNorm, GEMM, MSSA module, ISTA layer, measures for the diagnostics. */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/attention.h"
#include "wbcl/ista.h"
#include "wbcl/measures.h"
#include "wbcl/models.h"
#include "wbcl/ops.h"
#include "wbcl/weights.h"

typedef struct crate_layer {
    wbcl_tensor *ln1_g, *ln1_b, *ln2_g, *ln2_b;
    wbcl_tensor *U; /* qkv.weight (K p, d): the subspaces, for Rc */
    wbcl_mssa *attn;
    wbcl_ista_layer *ista;
} crate_layer;

struct wbcl_crate {
    wbcl_crate_config cfg;
    size_t patch_dim, max_tokens;
    wbcl_tensor *pe_ln1_g, *pe_ln1_b, *pe_W, *pe_b, *pe_ln2_g, *pe_ln2_b;
    wbcl_tensor *cls, *pos;
    crate_layer *layers;
    wbcl_tensor *head_ln_g, *head_ln_b, *head_W, *head_b;
    /* work buffers for the current (B, H, W) */
    wbcl_tensor *P, *E, *Z, *T, *A, *C;
};

wbcl_status wbcl_crate_config_preset(const char *name, wbcl_crate_config *cfg)
{
    if (!name || !cfg) return WBCL_ERROR_INVALID_ARGUMENT;
    static const struct { const char *name; size_t d, L, K; } presets[] = {
        {"tiny", 384, 12, 6}, {"small", 576, 12, 12}, {"base", 768, 12, 12}, {"large", 1024, 24, 16}};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(name, presets[i].name)) {
            memset(cfg, 0, sizeof *cfg);
            cfg->dim = presets[i].d;
            cfg->depth = presets[i].L;
            cfg->heads = presets[i].K;
            cfg->dim_head = presets[i].d / presets[i].K;
            cfg->patch = 16;
            cfg->channels = 3;
            cfg->eta = 0.1f;
            cfg->lambd = 0.1f;
            cfg->ln_eps = 1e-5f;
            return WBCL_SUCCESS;
        }
    return WBCL_ERROR_INVALID_ARGUMENT;
}

void wbcl_crate_destroy(wbcl_crate *m)
{
    if (!m) return;
    wbcl_tensor *ts[] = {m->pe_ln1_g, m->pe_ln1_b, m->pe_W,      m->pe_b,      m->pe_ln2_g, m->pe_ln2_b,
                         m->cls,      m->pos,      m->head_ln_g, m->head_ln_b, m->head_W,   m->head_b,
                         m->P,        m->E,        m->Z,         m->T,         m->A,        m->C};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) wbcl_tensor_destroy(ts[i]);
    if (m->layers)
        for (size_t i = 0; i < m->cfg.depth; i++) {
            crate_layer *l = &m->layers[i];
            wbcl_tensor_destroy(l->ln1_g);
            wbcl_tensor_destroy(l->ln1_b);
            wbcl_tensor_destroy(l->ln2_g);
            wbcl_tensor_destroy(l->ln2_b);
            wbcl_tensor_destroy(l->U);
            wbcl_mssa_destroy(l->attn);
            wbcl_ista_layer_destroy(l->ista);
        }
    free(m->layers);
    free(m);
}

const wbcl_crate_config *wbcl_crate_get_config(const wbcl_crate *m) { return m ? &m->cfg : NULL; }
size_t wbcl_crate_max_tokens(const wbcl_crate *m) { return m ? m->max_tokens : 0; }

static wbcl_status load_ln(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *prefix,
                           size_t d, wbcl_tensor **g, wbcl_tensor **b)
{
    size_t s[1] = {d};
    wbcl_status r = wbcl_weight_load(ctx, st, file, prefix, "weight", 1, s, 1, g);
    if (!r) r = wbcl_weight_load(ctx, st, file, prefix, "bias", 1, s, 1, b);
    return r;
}

static wbcl_status crate_load_layers(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, wbcl_crate *m)
{
    const wbcl_crate_config *c = &m->cfg;
    wbcl_status r = WBCL_SUCCESS;
    char pre[256];
    for (size_t i = 0; i < c->depth && !r; i++) {
        crate_layer *l = &m->layers[i];
        snprintf(pre, sizeof pre, "transformer.layers.%zu.0.norm.", i);
        if ((r = load_ln(ctx, st, file, pre, c->dim, &l->ln1_g, &l->ln1_b))) break;
        snprintf(pre, sizeof pre, "transformer.layers.%zu.0.fn.", i);
        if ((r = wbcl_mssa_load(ctx, st, file, pre, c->dim, c->heads, c->dim_head, 0, &l->attn))) break;
        size_t su[2] = {c->heads * c->dim_head, c->dim};
        if ((r = wbcl_weight_load(ctx, st, file, pre, "qkv.weight", 2, su, 1, &l->U))) break;
        snprintf(pre, sizeof pre, "transformer.layers.%zu.1.norm.", i);
        if ((r = load_ln(ctx, st, file, pre, c->dim, &l->ln2_g, &l->ln2_b))) break;
        snprintf(pre, sizeof pre, "transformer.layers.%zu.1.fn.", i);
        size_t sw[2] = {c->dim, c->dim};
        wbcl_tensor *W = NULL;
        if ((r = wbcl_weight_load(ctx, st, file, pre, "weight", 2, sw, 1, &W))) break;
        r = wbcl_ista_layer_create(ctx, W, c->eta, c->lambd, WBCL_THRESHOLD_RELU, WBCL_ISTA_AUTO, &l->ista);
        wbcl_tensor_destroy(W);
    }
    return r;
}

/* Fills the sizes the weights fix into c (0: from the weights; non-zero: checked against them):
 * dim (cls_token), depth (transformer.layers.*), heads * dim_head (qkv.weight rows: with one of
 * them given, the other follows; neither given is an error, the weights fix only the product),
 * channels * patch^2 (to_patch_embedding.2.weight columns: with one of them given, the other
 * follows; neither: channels 3), num_classes (mlp_head.1.weight). */
static wbcl_status crate_infer(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, wbcl_crate_config *c)
{
    size_t shp[3];
    wbcl_status r = wbcl__model_cls_dim(ctx, st, file, &c->dim);
    if (!r) r = wbcl__model_depth(ctx, st, file, "transformer.layers.", ".1.fn.weight", &c->depth);
    if (r) return r;
    /* heads * dim_head */
    const char *kq = "transformer.layers.0.0.fn.qkv.weight";
    if ((r = wbcl__model_key_shape(ctx, st, file, kq, 2, shp))) return r;
    const size_t Kp = shp[0];
    if (!c->heads && !c->dim_head)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                          "%s: '%s' fixes heads * dim_head = %zu but not heads: set heads or dim_head", file, kq, Kp);
    if (!c->heads && c->dim_head && Kp % c->dim_head == 0) c->heads = Kp / c->dim_head;
    if (!c->dim_head && c->heads && Kp % c->heads == 0) c->dim_head = Kp / c->heads;
    if (!c->heads || !c->dim_head || Kp % c->heads || Kp / c->heads != c->dim_head) /* no overflow */
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: config heads = %zu, dim_head = %zu contradicts the weights: '%s' gives heads * dim_head = "
                          "%zu",
                          file, c->heads, c->dim_head, kq, Kp);
    /* channels * patch^2 */
    const char *kp = "to_patch_embedding.2.weight";
    if ((r = wbcl__model_key_shape(ctx, st, file, kp, 2, shp))) return r;
    const size_t PD = shp[1];
    if (!c->channels && !c->patch) c->channels = 3;
    if (!c->patch && c->channels && PD % c->channels == 0) {
        size_t P = (size_t)llround(sqrt((double)(PD / c->channels)));
        if (P * P * c->channels == PD) c->patch = P;
    }
    if (!c->channels && c->patch && PD % (c->patch * c->patch) == 0) c->channels = PD / (c->patch * c->patch);
    if (!c->channels || !c->patch || c->patch > 65536 || PD % (c->patch * c->patch) ||
        PD / (c->patch * c->patch) != c->channels)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: config channels = %zu, patch = %zu contradicts the weights: '%s' gives channels * "
                          "patch^2 = %zu",
                          file, c->channels, c->patch, kp, PD);
    if ((r = wbcl__model_key_shape(ctx, st, file, "mlp_head.1.weight", 2, shp))) return r;
    return wbcl__model_size(ctx, file, "num_classes", "mlp_head.1.weight", &c->num_classes, shp[0]);
}

wbcl_status wbcl_crate_load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file,
                            const wbcl_crate_config *cfg, wbcl_crate **out)
{
    static const char *op = "wbcl_crate_load";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!st || !cfg || !out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL argument", op);
    *out = NULL;
    if (!file) file = "weights";
    wbcl_crate_config cc = *cfg;
    wbcl_status r = crate_infer(ctx, st, file, &cc);
    if (r) return r;
    cfg = &cc;
    if (!cfg->dim || !cfg->depth || !cfg->heads || !cfg->dim_head || !cfg->patch || !cfg->channels)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                          "%s: config needs dim, depth, heads, dim_head, patch and channels > 0 (got %zu, %zu, %zu, "
                          "%zu, %zu, %zu)",
                          op, cfg->dim, cfg->depth, cfg->heads, cfg->dim_head, cfg->patch, cfg->channels);
    if (!(cfg->eta > 0.0f) || !(cfg->lambd >= 0.0f) || !(cfg->ln_eps > 0.0f) || !isfinite(cfg->eta) ||
        !isfinite(cfg->lambd) || !isfinite(cfg->ln_eps))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: need eta > 0, lambd >= 0, ln_eps > 0 (finite)", op);
    if (cfg->depth > 4096 || cfg->patch > 4096 || cfg->channels > 4096)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: config out of range", op);
    if (cfg->weight_dtype != WBCL_F32 && cfg->weight_dtype != WBCL_F16)
        return wbcl__fail(ctx, WBCL_ERROR_DTYPE, "%s: weight_dtype %d is neither WBCL_F32 nor WBCL_F16", op,
                          (int)cfg->weight_dtype);
    wbcl_crate *m = calloc(1, sizeof *m);
    if (!m) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of memory", op);
    m->cfg = *cfg;
    m->layers = calloc(cfg->depth, sizeof *m->layers);
    if (!m->layers) {
        free(m);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of memory", op);
    }
    const size_t d = cfg->dim;
    m->patch_dim = cfg->channels * cfg->patch * cfg->patch;
    size_t shp[3];
    /* sizes read from the weights: positions, classes */
    r = wbcl__model_key_shape(ctx, st, file, "pos_embedding", 3, shp);
    if (!r && (shp[0] != 1 || shp[2] != d || shp[1] < 2)) {
        char s[96];
        r = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'pos_embedding' has shape %s, expected (1, N+1 >= 2, %zu)", file,
                       wbcl__shape_str(s, sizeof s, 3, shp), d);
    }
    if (!r) m->max_tokens = shp[1];
    if (!r && !m->cfg.num_classes)
        r = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'mlp_head.1.weight' has 0 classes", file);
    if (!r) {
        size_t s1[1] = {m->patch_dim}, s2[2] = {d, m->patch_dim}, sd[1] = {d};
        size_t sc[3] = {1, 1, d}, sp[3] = {1, m->max_tokens, d};
        size_t sh[2] = {m->cfg.num_classes, d}, shb[1] = {m->cfg.num_classes};
        r = wbcl_weight_load(ctx, st, file, "to_patch_embedding.1.", "weight", 1, s1, 1, &m->pe_ln1_g);
        if (!r) r = wbcl_weight_load(ctx, st, file, "to_patch_embedding.1.", "bias", 1, s1, 1, &m->pe_ln1_b);
        if (!r) r = wbcl_weight_load(ctx, st, file, "to_patch_embedding.2.", "weight", 2, s2, 1, &m->pe_W);
        if (!r) r = wbcl_weight_load(ctx, st, file, "to_patch_embedding.2.", "bias", 1, sd, 1, &m->pe_b);
        if (!r) r = load_ln(ctx, st, file, "to_patch_embedding.3.", d, &m->pe_ln2_g, &m->pe_ln2_b);
        if (!r) r = wbcl_weight_load(ctx, st, file, NULL, "cls_token", 3, sc, 1, &m->cls);
        if (!r) r = wbcl_weight_load(ctx, st, file, NULL, "pos_embedding", 3, sp, 1, &m->pos);
        if (!r) r = crate_load_layers(ctx, st, file, m);
        if (!r) r = load_ln(ctx, st, file, "mlp_head.0.", d, &m->head_ln_g, &m->head_ln_b);
        if (!r) r = wbcl_weight_load(ctx, st, file, "mlp_head.1.", "weight", 2, sh, 1, &m->head_W);
        if (!r) r = wbcl_weight_load(ctx, st, file, "mlp_head.1.", "bias", 1, shb, 1, &m->head_b);
    }
    /* a deeper checkpoint than the config says is a mismatch, not something to ignore */
    if (!r) {
        char key[128];
        snprintf(key, sizeof key, "transformer.layers.%zu.1.fn.weight", cfg->depth);
        if (wbcl_safetensors_has(st, key))
            r = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: has '%s' but the config says depth %zu", file, key, cfg->depth);
    }
    if (!r) { /* the packed GEMM may keep their panels (host/core/packed.c) */
        wbcl__tensor_constant(m->pe_W);
        wbcl__tensor_constant(m->head_W);
        for (size_t i = 0; i < cfg->depth; i++) wbcl__tensor_constant(m->layers[i].U);
    }
    if (!r && cfg->weight_dtype == WBCL_F16) { /* the GEMM operands (models.h) */
        r = wbcl__tensor_store_f16(ctx, &m->pe_W);
        if (!r) r = wbcl__tensor_store_f16(ctx, &m->head_W);
        for (size_t i = 0; i < cfg->depth && !r; i++) {
            r = wbcl__mssa_store_f16(ctx, m->layers[i].attn);
            if (!r) r = wbcl__ista_layer_store_f16(ctx, m->layers[i].ista);
        }
    }
    if (r) {
        wbcl_crate_destroy(m);
        return r;
    }
    *out = m;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_crate_load_file(wbcl_context *ctx, const char *path, const wbcl_crate_config *cfg, wbcl_crate **out)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!path || !out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_crate_load_file: NULL argument");
    *out = NULL;
    wbcl_safetensors *st = NULL;
    char err[512];
    wbcl_status r = wbcl_safetensors_open(path, &st, err, sizeof err);
    if (r) return wbcl__fail(ctx, r, "%s", err);
    r = wbcl_crate_load(ctx, st, path, cfg, out);
    wbcl_safetensors_close(st);
    return r;
}

static wbcl_status trace(const wbcl_model_opts *o, const char *name, const wbcl_tensor *t)
{
    return o && o->trace ? o->trace(o->user, name, t) : WBCL_SUCCESS;
}

wbcl_status wbcl_crate_forward(wbcl_context *ctx, wbcl_crate *m, const wbcl_tensor *images, wbcl_model_output what,
                               wbcl_tensor *out, const wbcl_model_opts *opts)
{
    static const char *op = "wbcl_crate_forward";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!m) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL model", op);
    wbcl_status r = wbcl__check_tensor(ctx, images, op, "images");
    if (r) return r;
    const wbcl_crate_config *c = &m->cfg;
    char s[96];
    if (images->ndim != 4 || images->shape[1] != c->channels || images->shape[2] % c->patch ||
        images->shape[3] % c->patch)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: 'images' must be (B, %zu, H, W) with H and W multiples of %zu, got %s", op,
                          c->channels, c->patch, wbcl__shape_str(s, sizeof s, images->ndim, images->shape));
    const size_t B = images->shape[0], H = images->shape[2], W = images->shape[3], d = c->dim;
    const size_t N = (H / c->patch) * (W / c->patch), N1 = N + 1;
    if (N1 > m->max_tokens)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %zu x %zu images give %zu tokens; pos_embedding has %zu", op, H,
                          W, N1, m->max_tokens);
    if (what == WBCL_MODEL_LOGITS) {
        size_t so[2] = {B, c->num_classes};
        r = wbcl__model_check_out(ctx, op, out, 2, so);
    } else if (what == WBCL_MODEL_FEATURES) {
        size_t so[3] = {B, N1, d};
        r = wbcl__model_check_out(ctx, op, out, 3, so);
    } else {
        r = wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: bad output kind %d", op, (int)what);
    }
    if (r) return r;
    /* work buffers */
    size_t sP[3] = {B, N, m->patch_dim}, sE[3] = {B, N, d}, sZ[3] = {B, N1, d}, sC[2] = {B, d};
    if ((r = wbcl__model_ensure(ctx, &m->P, 3, sP)) || (r = wbcl__model_ensure(ctx, &m->E, 3, sE)) ||
        (r = wbcl__model_ensure(ctx, &m->Z, 3, sZ)) || (r = wbcl__model_ensure(ctx, &m->T, 3, sZ)) ||
        (r = wbcl__model_ensure(ctx, &m->A, 3, sZ)) || (r = wbcl__model_ensure(ctx, &m->C, 2, sC)))
        return r;
    /* patch embedding */
    if ((r = wbcl__model_check32(ctx, op, B * N1, d, 1)) || (r = wbcl__model_check32(ctx, op, B * N, m->patch_dim, 1)) ||
        (r = wbcl__model_check32(ctx, op, H, W, images->shape[1])))
        return r;
    wbcl_kern *k;
    cl_uint uC = (cl_uint)c->channels, uH = (cl_uint)H, uW = (cl_uint)W, uP = (cl_uint)c->patch, uN = (cl_uint)N,
            ud = (cl_uint)d;
    if ((r = wbcl__model_kernel(ctx, "wbcl_model_patchify", &k))) return r;
    WBCL_ARG(ctx, k, 0, images->mem);
    WBCL_ARG(ctx, k, 1, m->P->mem);
    WBCL_ARG(ctx, k, 2, uC);
    WBCL_ARG(ctx, k, 3, uH);
    WBCL_ARG(ctx, k, 4, uW);
    WBCL_ARG(ctx, k, 5, uP);
    if ((r = wbcl__model_launch(ctx, k, c->patch * c->patch, N, B))) return r;
    if ((r = wbcl_layernorm(ctx, m->P, m->pe_ln1_g, m->pe_ln1_b, c->ln_eps, m->P))) return r;
    if ((r = wbcl__model_linear(ctx, m->P, B * N, m->patch_dim, m->pe_W, d, m->pe_b, 0, m->E))) return r;
    if ((r = wbcl_layernorm(ctx, m->E, m->pe_ln2_g, m->pe_ln2_b, c->ln_eps, m->E))) return r;
    if ((r = wbcl__model_kernel(ctx, "wbcl_model_prepend", &k))) return r;
    cl_int has_add = 1;
    WBCL_ARG(ctx, k, 0, m->E->mem);
    WBCL_ARG(ctx, k, 1, m->cls->mem);
    WBCL_ARG(ctx, k, 2, m->pos->mem);
    WBCL_ARG(ctx, k, 3, has_add);
    WBCL_ARG(ctx, k, 4, m->Z->mem);
    WBCL_ARG(ctx, k, 5, uN);
    WBCL_ARG(ctx, k, 6, ud);
    if ((r = wbcl__model_launch(ctx, k, d, N1, B))) return r;
    if ((r = trace(opts, "embed", m->Z))) return r;
    /* layers: z½ = z + MSSA(LN z) (in A), z = ISTA(LN z½) (in Z) */
    const double eps2 = opts && opts->eps2 > 0 ? opts->eps2 : 1.0;
    for (size_t i = 0; i < c->depth; i++) {
        crate_layer *l = &m->layers[i];
        char name[64];
        if ((r = wbcl_layernorm(ctx, m->Z, l->ln1_g, l->ln1_b, c->ln_eps, m->T))) return r;
        if ((r = wbcl_mssa_forward(ctx, l->attn, m->T, m->A))) return r;
        if ((r = wbcl_add(ctx, m->Z, m->A, m->A))) return r;
        snprintf(name, sizeof name, "layer%zu.half", i);
        if ((r = trace(opts, name, m->A))) return r;
        if (opts && opts->Rc &&
            (r = wbcl_coding_rate_subspaces(ctx, m->A, l->U, WBCL_TRANS, c->heads, eps2, opts->Rc + i * B)))
            return r;
        if ((r = wbcl_layernorm(ctx, m->A, l->ln2_g, l->ln2_b, c->ln_eps, m->T))) return r;
        if ((r = wbcl_ista_layer_forward(ctx, l->ista, m->T, m->Z))) return r;
        snprintf(name, sizeof name, "layer%zu.out", i);
        if ((r = trace(opts, name, m->Z))) return r;
        if (opts && opts->sparsity &&
            (r = wbcl_sparsity(ctx, m->Z, opts->sparsity_threshold, opts->sparsity + i * B)))
            return r;
    }
    if (what == WBCL_MODEL_FEATURES) return wbcl_tensor_copy(ctx, m->Z, out);
    /* head on the CLS token */
    cl_uint uN1 = (cl_uint)N1, row = 0, uB = (cl_uint)B;
    if ((r = wbcl__model_kernel(ctx, "wbcl_model_take_row", &k))) return r;
    WBCL_ARG(ctx, k, 0, m->Z->mem);
    WBCL_ARG(ctx, k, 1, m->C->mem);
    WBCL_ARG(ctx, k, 2, uN1);
    WBCL_ARG(ctx, k, 3, ud);
    WBCL_ARG(ctx, k, 4, row);
    WBCL_ARG(ctx, k, 5, uB);
    if ((r = wbcl__model_launch(ctx, k, d, B, 1))) return r;
    if ((r = wbcl_layernorm(ctx, m->C, m->head_ln_g, m->head_ln_b, c->ln_eps, m->C))) return r;
    if ((r = wbcl__model_linear(ctx, m->C, B, d, m->head_W, c->num_classes, m->head_b, 0, out))) return r;
    return trace(opts, "logits", out);
}
