/* ToST vision model (include/wbcl/models.h): conv patch embedding as im2col + GEMM with the
 * BatchNorm folded in, Fourier positions (host, double, cached per grid), TSSA blocks,
 * class-attention blocks through the strided softmax attention (one CLS query per head). */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/attention.h"
#include "wbcl/models.h"
#include "wbcl/ops.h"
#include "wbcl/tssa.h"
#include "wbcl/weights.h"

#define TOST_MAX_CONV 4
#define TOST_FOURIER 32 /* hidden_dim of PositionalEncodingFourier: 2 x 32 features */

typedef struct tost_conv {
    size_t cin, cout;
    wbcl_tensor *W, *b; /* (cout, cin*9), columns (c, ky, kx) for conv 0, (ky, kx, c) after; (cout); BN folded */
} tost_conv;

typedef struct tost_mlp {
    wbcl_tensor *W1, *b1, *W2, *b2;
} tost_mlp;

typedef struct tost_block {
    wbcl_tensor *ln1_g, *ln1_b, *ln2_g, *ln2_b, *g1, *g2;
    wbcl_tssa_layer *attn;
    tost_mlp mlp;
} tost_block;

typedef struct tost_cab {
    wbcl_tensor *ln1_g, *ln1_b, *ln2_g, *ln2_b, *g1, *g2;
    wbcl_tensor *qkv_W, *qkv_b, *proj_W, *proj_b;
    tost_mlp mlp;
} tost_cab;

struct wbcl_tost {
    wbcl_tost_config cfg;
    size_t nconv;
    tost_conv conv[TOST_MAX_CONV];
    float *pos_W, *pos_b; /* token_projection (d, 64), (d) on the host */
    wbcl_tensor *cls;
    tost_block *blocks;
    tost_cab *cabs;
    wbcl_tensor *norm_g, *norm_b, *head_W, *head_b;
    /* work */
    size_t pos_Hp, pos_Wp;
    wbcl_tensor *pos;           /* (N, d) for pos_Hp x pos_Wp */
    wbcl_tensor *col, *act[2];  /* conv im2col and ping-pong activations */
    wbcl_tensor *X, *T, *A, *Hd; /* (B, N, d) x3, (B, N, hidden) */
    wbcl_tensor *Y, *T1, *QKV;  /* (B, N+1, d) x2, (B, N+1, 3d) */
    wbcl_tensor *O, *Cc, *R, *M1, *M2; /* (B, d), (B, d), (B, d), (B, hidden), (B, d) */
};

wbcl_status wbcl_tost_config_preset(const char *name, wbcl_tost_config *cfg)
{
    if (!name || !cfg) return WBCL_ERROR_INVALID_ARGUMENT;
    static const struct { const char *name; size_t d, L, K; } presets[] = {
        {"tiny", 192, 12, 4}, {"small", 384, 12, 8}, {"medium", 512, 24, 8}};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(name, presets[i].name)) {
            memset(cfg, 0, sizeof *cfg);
            cfg->dim = presets[i].d;
            cfg->depth = presets[i].L;
            cfg->heads = presets[i].K;
            cfg->mlp_hidden = 4 * presets[i].d;
            cfg->patch = 16;
            cfg->cls_layers = 2;
            cfg->ln_eps = 1e-6f;
            cfg->bn_eps = 1e-5f;
            return WBCL_SUCCESS;
        }
    return WBCL_ERROR_INVALID_ARGUMENT;
}

const wbcl_tost_config *wbcl_tost_get_config(const wbcl_tost *m) { return m ? &m->cfg : NULL; }

static void mlp_free(tost_mlp *p)
{
    wbcl_tensor_destroy(p->W1);
    wbcl_tensor_destroy(p->b1);
    wbcl_tensor_destroy(p->W2);
    wbcl_tensor_destroy(p->b2);
}

void wbcl_tost_destroy(wbcl_tost *m)
{
    if (!m) return;
    for (size_t i = 0; i < TOST_MAX_CONV; i++) {
        wbcl_tensor_destroy(m->conv[i].W);
        wbcl_tensor_destroy(m->conv[i].b);
    }
    free(m->pos_W);
    free(m->pos_b);
    if (m->blocks)
        for (size_t i = 0; i < m->cfg.depth; i++) {
            tost_block *b = &m->blocks[i];
            wbcl_tensor *ts[] = {b->ln1_g, b->ln1_b, b->ln2_g, b->ln2_b, b->g1, b->g2};
            for (size_t j = 0; j < 6; j++) wbcl_tensor_destroy(ts[j]);
            wbcl_tssa_layer_destroy(b->attn);
            mlp_free(&b->mlp);
        }
    if (m->cabs)
        for (size_t i = 0; i < m->cfg.cls_layers; i++) {
            tost_cab *b = &m->cabs[i];
            wbcl_tensor *ts[] = {b->ln1_g, b->ln1_b, b->ln2_g, b->ln2_b, b->g1,
                                 b->g2,    b->qkv_W, b->qkv_b, b->proj_W, b->proj_b};
            for (size_t j = 0; j < 10; j++) wbcl_tensor_destroy(ts[j]);
            mlp_free(&b->mlp);
        }
    free(m->blocks);
    free(m->cabs);
    wbcl_tensor *ts[] = {m->cls, m->norm_g, m->norm_b, m->head_W, m->head_b, m->pos, m->col, m->act[0], m->act[1],
                         m->X,   m->T,      m->A,      m->Hd,     m->Y,      m->T1,  m->QKV, m->O,      m->Cc,
                         m->R,   m->M1,     m->M2};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) wbcl_tensor_destroy(ts[i]);
    free(m);
}

static wbcl_status load_ln(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *prefix,
                           const char *which, size_t d, wbcl_tensor **g, wbcl_tensor **b)
{
    char pre[256];
    snprintf(pre, sizeof pre, "%s%s.", prefix, which);
    size_t s[1] = {d};
    wbcl_status r = wbcl_weight_load(ctx, st, file, pre, "weight", 1, s, 1, g);
    if (!r) r = wbcl_weight_load(ctx, st, file, pre, "bias", 1, s, 1, b);
    return r;
}

static wbcl_status load_vec(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *prefix,
                            const char *name, size_t d, wbcl_tensor **t)
{
    size_t s[1] = {d};
    return wbcl_weight_load(ctx, st, file, prefix, name, 1, s, 1, t);
}

static wbcl_status load_mlp(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *prefix,
                            size_t d, size_t hid, tost_mlp *p)
{
    size_t s1[2] = {hid, d}, s2[2] = {d, hid};
    wbcl_status r = wbcl_weight_load(ctx, st, file, prefix, "mlp.fc1.weight", 2, s1, 1, &p->W1);
    if (!r) r = load_vec(ctx, st, file, prefix, "mlp.fc1.bias", hid, &p->b1);
    if (!r) r = wbcl_weight_load(ctx, st, file, prefix, "mlp.fc2.weight", 2, s2, 1, &p->W2);
    if (!r) r = load_vec(ctx, st, file, prefix, "mlp.fc2.bias", d, &p->b2);
    return r;
}

/* conv j (Sequential index 2j): weight (cout, cin, 3, 3), BatchNorm (cout) folded:
 * W' = W s, b' = beta - mean s, s = gamma / sqrt(var + eps), in double. */
static wbcl_status load_conv(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, size_t j, size_t cin,
                             size_t cout, float eps, tost_conv *cv)
{
    char pre[128];
    snprintf(pre, sizeof pre, "patch_embed.proj.%zu.", 2 * j);
    size_t sw[4] = {cout, cin, 3, 3}, sv[1] = {cout};
    float *W = NULL, *g = NULL, *be = NULL, *mu = NULL, *var = NULL;
    char p0[160], p1[160];
    snprintf(p0, sizeof p0, "%s0.", pre);
    snprintf(p1, sizeof p1, "%s1.", pre);
    wbcl_status r = wbcl__model_host_weight(ctx, st, file, p0, "weight", 4, sw, &W);
    if (!r) r = wbcl__model_host_weight(ctx, st, file, p1, "weight", 1, sv, &g);
    if (!r) r = wbcl__model_host_weight(ctx, st, file, p1, "bias", 1, sv, &be);
    if (!r) r = wbcl__model_host_weight(ctx, st, file, p1, "running_mean", 1, sv, &mu);
    if (!r) r = wbcl__model_host_weight(ctx, st, file, p1, "running_var", 1, sv, &var);
    for (size_t o = 0; !r && o < cout; o++)
        if (!(var[o] >= 0.0f))
            r = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: '%s1.running_var' has a negative value (%g) at index %zu",
                           file ? file : "weights", pre, (double)var[o], o);
    if (!r) {
        float *bf = malloc(cout * sizeof *bf);
        if (!bf) r = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "wbcl_tost_load: out of memory");
        /* j >= 1 reads NHWC activations through wbcl_model_im2col3_nhwc, whose columns are in
         * (ky, kx, c) order: the folded weights are stored in that order, W'[o][t*cin + c] */
        float *Wp = !r && j ? malloc(cout * cin * 9 * sizeof *Wp) : NULL;
        if (!r && j && !Wp) r = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "wbcl_tost_load: out of memory");
        for (size_t o = 0; !r && o < cout; o++) {
            double s = (double)g[o] / sqrt((double)var[o] + (double)eps);
            for (size_t i = 0; i < cin * 9; i++) W[o * cin * 9 + i] = (float)((double)W[o * cin * 9 + i] * s);
            if (j)
                for (size_t c = 0; c < cin; c++)
                    for (size_t t = 0; t < 9; t++) Wp[o * cin * 9 + t * cin + c] = W[o * cin * 9 + c * 9 + t];
            bf[o] = (float)((double)be[o] - (double)mu[o] * s);
        }
        if (Wp) {
            free(W);
            W = Wp;
        }
        size_t s2[2] = {cout, cin * 9};
        if (!r) r = wbcl_tensor_create(ctx, 2, s2, WBCL_F32, W, &cv->W);
        if (!r) r = wbcl_tensor_create(ctx, 1, sv, WBCL_F32, bf, &cv->b);
        free(bf);
    }
    cv->cin = cin;
    cv->cout = cout;
    free(W);
    free(g);
    free(be);
    free(mu);
    free(var);
    return r;
}

static wbcl_status tost_load_body(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, wbcl_tost *m)
{
    const wbcl_tost_config *c = &m->cfg;
    const size_t d = c->dim, hid = c->mlp_hidden;
    wbcl_status r = WBCL_SUCCESS;
    /* conv stack: 3 -> d/8 -> d/4 -> d/2 -> d (patch 16) or 3 -> d/4 -> d/2 -> d (patch 8) */
    size_t cin = 3;
    for (size_t j = 0; j < m->nconv && !r; j++) {
        size_t cout = d >> (m->nconv - 1 - j);
        r = load_conv(ctx, st, file, j, cin, cout, c->bn_eps, &m->conv[j]);
        cin = cout;
    }
    size_t sp[4] = {d, 2 * TOST_FOURIER, 1, 1}, sd[1] = {d}, sc[3] = {1, 1, d};
    if (!r) r = wbcl__model_host_weight(ctx, st, file, "pos_embeder.token_projection.", "weight", 4, sp, &m->pos_W);
    if (!r) r = wbcl__model_host_weight(ctx, st, file, "pos_embeder.token_projection.", "bias", 1, sd, &m->pos_b);
    if (!r) r = wbcl_weight_load(ctx, st, file, NULL, "cls_token", 3, sc, 1, &m->cls);
    char pre[128];
    for (size_t i = 0; i < c->depth && !r; i++) {
        tost_block *b = &m->blocks[i];
        snprintf(pre, sizeof pre, "blocks.%zu.", i);
        r = load_ln(ctx, st, file, pre, "norm1", d, &b->ln1_g, &b->ln1_b);
        if (!r) r = load_ln(ctx, st, file, pre, "norm2", d, &b->ln2_g, &b->ln2_b);
        if (!r) r = load_vec(ctx, st, file, pre, "gamma1", d, &b->g1);
        if (!r) r = load_vec(ctx, st, file, pre, "gamma2", d, &b->g2);
        char pa[160];
        snprintf(pa, sizeof pa, "%sattn.", pre);
        if (!r) r = wbcl_tssa_layer_load(ctx, st, file, pa, d, c->heads, &b->attn);
        if (!r) r = load_mlp(ctx, st, file, pre, d, hid, &b->mlp);
    }
    for (size_t i = 0; i < c->cls_layers && !r; i++) {
        tost_cab *b = &m->cabs[i];
        snprintf(pre, sizeof pre, "cls_attn_blocks.%zu.", i);
        size_t sq[2] = {3 * d, d}, so[2] = {d, d};
        r = load_ln(ctx, st, file, pre, "norm1", d, &b->ln1_g, &b->ln1_b);
        if (!r) r = load_ln(ctx, st, file, pre, "norm2", d, &b->ln2_g, &b->ln2_b);
        if (!r) r = load_vec(ctx, st, file, pre, "gamma1", d, &b->g1);
        if (!r) r = load_vec(ctx, st, file, pre, "gamma2", d, &b->g2);
        if (!r) r = wbcl_weight_load(ctx, st, file, pre, "attn.qkv.weight", 2, sq, 1, &b->qkv_W);
        size_t s3[1] = {3 * d};
        if (!r) r = wbcl_weight_load(ctx, st, file, pre, "attn.qkv.bias", 1, s3, 0, &b->qkv_b);
        if (!r && !b->qkv_b) r = wbcl_tensor_create(ctx, 1, s3, WBCL_F32, NULL, &b->qkv_b); /* qkv_bias=False */
        if (!r) r = wbcl_weight_load(ctx, st, file, pre, "attn.proj.weight", 2, so, 1, &b->proj_W);
        if (!r) r = load_vec(ctx, st, file, pre, "attn.proj.bias", d, &b->proj_b);
        if (!r) r = load_mlp(ctx, st, file, pre, d, hid, &b->mlp);
    }
    if (!r) r = load_ln(ctx, st, file, "", "norm", d, &m->norm_g, &m->norm_b);
    size_t sh[2] = {c->num_classes, d};
    if (!r) r = wbcl_weight_load(ctx, st, file, "head.", "weight", 2, sh, 1, &m->head_W);
    if (!r) r = load_vec(ctx, st, file, "head.", "bias", c->num_classes, &m->head_b);
    if (!r) {
        char key[128];
        snprintf(key, sizeof key, "blocks.%zu.gamma1", c->depth);
        if (wbcl_safetensors_has(st, key))
            r = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: has '%s' but the config says depth %zu", file, key, c->depth);
        snprintf(key, sizeof key, "patch_embed.proj.%zu.0.weight", 2 * m->nconv);
        if (!r && wbcl_safetensors_has(st, key))
            r = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: has '%s': more convolutions than patch %zu has", file, key,
                           c->patch);
    }
    return r;
}

/* Fills the sizes the weights fix into c (0: from the weights; non-zero: checked against them):
 * dim (cls_token), depth (blocks.*), heads (blocks.0.attn.temp rows), mlp_hidden
 * (blocks.0.mlp.fc1.weight rows), patch (4 convs in patch_embed.proj: 16, 3: 8), cls_layers
 * (cls_attn_blocks.*), num_classes (head.weight). */
static wbcl_status tost_infer(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, wbcl_tost_config *c)
{
    size_t shp[3];
    char key[128];
    wbcl_status r = wbcl__model_cls_dim(ctx, st, file, &c->dim);
    if (!r) r = wbcl__model_depth(ctx, st, file, "blocks.", ".gamma1", &c->depth);
    if (r) return r;
    if ((r = wbcl__model_key_shape(ctx, st, file, "blocks.0.attn.temp", 2, shp))) return r;
    if ((r = wbcl__model_size(ctx, file, "heads", "blocks.0.attn.temp", &c->heads, shp[0]))) return r;
    if ((r = wbcl__model_key_shape(ctx, st, file, "blocks.0.mlp.fc1.weight", 2, shp))) return r;
    if ((r = wbcl__model_size(ctx, file, "mlp_hidden", "blocks.0.mlp.fc1.weight", &c->mlp_hidden, shp[0]))) return r;
    size_t nconv = 0;
    for (;; nconv++) {
        snprintf(key, sizeof key, "patch_embed.proj.%zu.0.weight", 2 * nconv);
        if (!wbcl_safetensors_has(st, key)) break;
    }
    snprintf(key, sizeof key, "patch_embed.proj.%zu.0.weight", nconv ? 2 * (nconv - 1) : 0);
    if (nconv != 3 && nconv != 4)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: the patch embedding has %zu convolutions (last '%s'); ToST has 4 (patch 16) or 3 "
                          "(patch 8)",
                          file, nconv, key);
    if ((r = wbcl__model_size(ctx, file, "patch", key, &c->patch, nconv == 4 ? 16 : 8))) return r;
    const size_t CL = wbcl__model_count(st, "cls_attn_blocks.", ".gamma1");
    snprintf(key, sizeof key, "cls_attn_blocks.%zu.gamma1", CL ? CL - 1 : 0);
    if ((r = wbcl__model_size(ctx, file, "cls_layers", key, &c->cls_layers, CL))) return r;
    if ((r = wbcl__model_key_shape(ctx, st, file, "head.weight", 2, shp))) return r;
    return wbcl__model_size(ctx, file, "num_classes", "head.weight", &c->num_classes, shp[0]);
}

wbcl_status wbcl_tost_load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file,
                           const wbcl_tost_config *cfg, wbcl_tost **out)
{
    static const char *op = "wbcl_tost_load";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!st || !cfg || !out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL argument", op);
    *out = NULL;
    if (!file) file = "weights";
    wbcl_tost_config tc = *cfg;
    wbcl_status r = tost_infer(ctx, st, file, &tc);
    if (r) return r;
    cfg = &tc;
    if (!cfg->dim || !cfg->depth || !cfg->heads || cfg->dim % cfg->heads || (cfg->patch != 16 && cfg->patch != 8) ||
        cfg->depth > 4096 || cfg->cls_layers > 64 || cfg->dim % (cfg->patch == 16 ? 8 : 4))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                          "%s: config needs dim > 0 divisible by heads and by 8 (patch 16) or 4 (patch 8), depth > 0, "
                          "patch 8 or 16 (got dim %zu, depth %zu, heads %zu, patch %zu)",
                          op, cfg->dim, cfg->depth, cfg->heads, cfg->patch);
    if (!(cfg->ln_eps > 0.0f) || !(cfg->bn_eps > 0.0f) || !isfinite(cfg->ln_eps) || !isfinite(cfg->bn_eps))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: need ln_eps > 0 and bn_eps > 0 (finite)", op);
    if (cfg->weight_dtype != WBCL_F32 && cfg->weight_dtype != WBCL_F16)
        return wbcl__fail(ctx, WBCL_ERROR_DTYPE, "%s: weight_dtype %d is neither WBCL_F32 nor WBCL_F16", op,
                          (int)cfg->weight_dtype);
    wbcl_tost *m = calloc(1, sizeof *m);
    if (!m) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of memory", op);
    m->cfg = *cfg;
    m->nconv = cfg->patch == 16 ? 4 : 3;
    m->blocks = calloc(cfg->depth, sizeof *m->blocks);
    m->cabs = calloc(cfg->cls_layers ? cfg->cls_layers : 1, sizeof *m->cabs);
    if (!m->blocks || !m->cabs) r = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of memory", op);
    size_t shp[2];
    if (!r) r = wbcl__model_key_shape(ctx, st, file, "head.weight", 2, shp);
    if (!r && !m->cfg.num_classes) m->cfg.num_classes = shp[0];
    if (!r && !m->cfg.num_classes) r = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'head.weight' has 0 classes", file);
    if (!r && !m->cfg.mlp_hidden) {
        r = wbcl__model_key_shape(ctx, st, file, "blocks.0.mlp.fc1.weight", 2, shp);
        if (!r) m->cfg.mlp_hidden = shp[0];
        if (!r && !m->cfg.mlp_hidden)
            r = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'blocks.0.mlp.fc1.weight' has 0 rows", file);
    }
    if (!r) r = tost_load_body(ctx, st, file, m);
    if (!r) { /* the GEMM operands: the packed GEMM may keep their panels (host/core/packed.c) */
        for (size_t j = 0; j < m->nconv; j++) wbcl__tensor_constant(m->conv[j].W);
        for (size_t i = 0; i < cfg->depth; i++) {
            wbcl__tensor_constant(m->blocks[i].mlp.W1);
            wbcl__tensor_constant(m->blocks[i].mlp.W2);
        }
        for (size_t i = 0; i < cfg->cls_layers; i++) {
            tost_cab *b = &m->cabs[i];
            wbcl__tensor_constant(b->qkv_W);
            wbcl__tensor_constant(b->proj_W);
            wbcl__tensor_constant(b->mlp.W1);
            wbcl__tensor_constant(b->mlp.W2);
        }
        wbcl__tensor_constant(m->head_W);
    }
    if (!r && cfg->weight_dtype == WBCL_F16) { /* the GEMM operands (models.h) */
        for (size_t j = 0; j < m->nconv && !r; j++) r = wbcl__tensor_store_f16(ctx, &m->conv[j].W);
        for (size_t i = 0; i < cfg->depth && !r; i++) {
            tost_block *b = &m->blocks[i];
            r = wbcl__tssa_layer_store_f16(ctx, b->attn);
            if (!r) r = wbcl__tensor_store_f16(ctx, &b->mlp.W1);
            if (!r) r = wbcl__tensor_store_f16(ctx, &b->mlp.W2);
        }
        for (size_t i = 0; i < cfg->cls_layers && !r; i++) {
            tost_cab *b = &m->cabs[i];
            r = wbcl__tensor_store_f16(ctx, &b->qkv_W);
            if (!r) r = wbcl__tensor_store_f16(ctx, &b->proj_W);
            if (!r) r = wbcl__tensor_store_f16(ctx, &b->mlp.W1);
            if (!r) r = wbcl__tensor_store_f16(ctx, &b->mlp.W2);
        }
        if (!r) r = wbcl__tensor_store_f16(ctx, &m->head_W);
    }
    if (r) {
        wbcl_tost_destroy(m);
        return r;
    }
    *out = m;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_tost_load_file(wbcl_context *ctx, const char *path, const wbcl_tost_config *cfg, wbcl_tost **out)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!path || !out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_tost_load_file: NULL argument");
    *out = NULL;
    wbcl_safetensors *st = NULL;
    char err[512];
    wbcl_status r = wbcl_safetensors_open(path, &st, err, sizeof err);
    if (r) return wbcl__fail(ctx, r, "%s", err);
    r = wbcl_tost_load(ctx, st, path, cfg, out);
    wbcl_safetensors_close(st);
    return r;
}

/* Fourier positional encoding for an Hp x Wp grid (XCiT PositionalEncodingFourier) followed by
 * the 1x1 token projection, in double on the host; (N, d) on the device, cached per grid. */
static wbcl_status tost_positions(wbcl_context *ctx, wbcl_tost *m, size_t Hp, size_t Wp)
{
    if (m->pos && m->pos_Hp == Hp && m->pos_Wp == Wp) return WBCL_SUCCESS;
    const size_t d = m->cfg.dim, N = Hp * Wp, F = 2 * TOST_FOURIER;
    float *pos = malloc(N * d * sizeof *pos);
    double *feat = malloc(F * sizeof *feat);
    if (!pos || !feat) {
        free(pos);
        free(feat);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "wbcl_tost_forward: out of memory");
    }
    const double two_pi = 2.0 * 3.14159265358979323846, eps = 1e-6;
    for (size_t i = 0; i < Hp; i++)
        for (size_t j = 0; j < Wp; j++) {
            const double ye = (double)(i + 1) / ((double)Hp + eps) * two_pi;
            const double xe = (double)(j + 1) / ((double)Wp + eps) * two_pi;
            for (size_t k = 0; k < TOST_FOURIER; k++) {
                const double dim_t = pow(10000.0, 2.0 * (double)(k / 2) / (double)TOST_FOURIER);
                feat[k] = (k % 2 == 0) ? sin(ye / dim_t) : cos(ye / dim_t);
                feat[TOST_FOURIER + k] = (k % 2 == 0) ? sin(xe / dim_t) : cos(xe / dim_t);
            }
            for (size_t o = 0; o < d; o++) {
                double s = m->pos_b[o];
                for (size_t f = 0; f < F; f++) s += (double)m->pos_W[o * F + f] * feat[f];
                pos[(i * Wp + j) * d + o] = (float)s;
            }
        }
    free(feat);
    wbcl_tensor_destroy(m->pos);
    m->pos = NULL;
    size_t sp[2] = {N, d};
    wbcl_status r = wbcl_tensor_create(ctx, 2, sp, WBCL_F32, pos, &m->pos);
    free(pos);
    if (!r) {
        m->pos_Hp = Hp;
        m->pos_Wp = Wp;
    }
    return r;
}

static wbcl_status trace(const wbcl_model_opts *o, const char *name, const wbcl_tensor *t)
{
    return o && o->trace ? o->trace(o->user, name, t) : WBCL_SUCCESS;
}

static wbcl_status take_row0(wbcl_context *ctx, const wbcl_tensor *x, wbcl_tensor *out, size_t B, size_t N1,
                             size_t d)
{
    wbcl_kern *k;
    wbcl_status r = wbcl__model_kernel(ctx, "wbcl_model_take_row", &k);
    if (r) return r;
    cl_uint uN = (cl_uint)N1, ud = (cl_uint)d, row = 0, uB = (cl_uint)B;
    WBCL_ARG(ctx, k, 0, x->mem);
    WBCL_ARG(ctx, k, 1, out->mem);
    WBCL_ARG(ctx, k, 2, uN);
    WBCL_ARG(ctx, k, 3, ud);
    WBCL_ARG(ctx, k, 4, row);
    WBCL_ARG(ctx, k, 5, uB);
    return wbcl__model_launch(ctx, k, d, B, 1);
}

static wbcl_status residual(wbcl_context *ctx, wbcl_tensor *x, const wbcl_tensor *g, const wbcl_tensor *a,
                            const wbcl_tensor *b, size_t n, size_t d)
{
    wbcl_kern *k;
    wbcl_status r = wbcl__model_kernel(ctx, "wbcl_model_residual_scaled", &k);
    if (r) return r;
    cl_int has_b = b != NULL;
    cl_uint ud = (cl_uint)d, rows = (cl_uint)(n / d);
    cl_mem bm = b ? b->mem : g->mem;
    WBCL_ARG(ctx, k, 0, x->mem);
    WBCL_ARG(ctx, k, 1, g->mem);
    WBCL_ARG(ctx, k, 2, a->mem);
    WBCL_ARG(ctx, k, 3, bm);
    WBCL_ARG(ctx, k, 4, has_b);
    WBCL_ARG(ctx, k, 5, ud);
    WBCL_ARG(ctx, k, 6, rows);
    return wbcl__model_launch(ctx, k, d, n / d, 1);
}

/* x += g (a + b), then t = LayerNorm(x) (ln_g, ln_b, eps): one pass on CPU devices
 * (wbcl_model_residual_ln), else the residual kernel and wbcl_layernorm. */
static wbcl_status residual_ln(wbcl_context *ctx, wbcl_tensor *x, const wbcl_tensor *g, const wbcl_tensor *a,
                               const wbcl_tensor *b, const wbcl_tensor *ln_g, const wbcl_tensor *ln_b, float eps,
                               wbcl_tensor *t, size_t n, size_t d)
{
    if (wbcl_context_variant(ctx) != WBCL_VARIANT_CPU || d % 16) {
        wbcl_status r = residual(ctx, x, g, a, b, n, d);
        return r ? r : wbcl_layernorm(ctx, x, ln_g, ln_b, eps, t);
    }
    wbcl_kern *k;
    wbcl_status r = wbcl__model_kernel(ctx, "wbcl_model_residual_ln", &k);
    if (r) return r;
    cl_int has_b = b != NULL;
    cl_uint rows = (cl_uint)(n / d), d16 = (cl_uint)(d / 16);
    cl_mem bm = b ? b->mem : g->mem;
    WBCL_ARG(ctx, k, 0, x->mem);
    WBCL_ARG(ctx, k, 1, g->mem);
    WBCL_ARG(ctx, k, 2, a->mem);
    WBCL_ARG(ctx, k, 3, bm);
    WBCL_ARG(ctx, k, 4, has_b);
    WBCL_ARG(ctx, k, 5, ln_g->mem);
    WBCL_ARG(ctx, k, 6, ln_b->mem);
    WBCL_ARG(ctx, k, 7, eps);
    WBCL_ARG(ctx, k, 8, t->mem);
    WBCL_ARG(ctx, k, 9, rows);
    WBCL_ARG(ctx, k, 10, d16);
    size_t global[1] = {rows}, local[1] = {rows >= 512 ? 32 : 8};
    return wbcl__launch(ctx, k, 1, global, local);
}

/* the conv stack: images (B, 3, H, W) NCHW -> X (B, Hp*Wp, d) (NHWC = flatten(2).transpose(1, 2)) */
static wbcl_status tost_patch_embed(wbcl_context *ctx, wbcl_tost *m, const wbcl_tensor *img, size_t B, size_t H,
                                    size_t W, size_t *Hp, size_t *Wp)
{
    wbcl_status r;
    const wbcl_tensor *in = img;
    size_t h = H, w = W, C = 3;
    cl_ulong sb = 3 * H * W, sc = H * W, sy = W, sx = 1;
    for (size_t j = 0; j < m->nconv; j++) {
        const tost_conv *cv = &m->conv[j];
        const size_t ho = (h + 1) / 2, wo = (w + 1) / 2, K = C * 9, rows = B * ho * wo;
        if ((r = wbcl__model_ensure_cap(ctx, &m->col, rows * K))) return r;
        wbcl_tensor **dst = j + 1 == m->nconv ? &m->X : &m->act[j % 2];
        if (j + 1 == m->nconv) {
            size_t sx3[3] = {B, ho * wo, cv->cout};
            if ((r = wbcl__model_ensure(ctx, dst, 3, sx3))) return r;
        } else if ((r = wbcl__model_ensure_cap(ctx, dst, rows * cv->cout))) {
            return r;
        }
        wbcl_kern *k;
        /* the image (NCHW): columns (c, ky, kx); activations (NHWC): columns (ky, kx, c) */
        /* GPU variant: the activations' im2col by float4s of a col row (coalesced) */
        const int im_g = j && wbcl_context_variant(ctx) == WBCL_VARIANT_GPU;
        if ((r = wbcl__model_kernel(ctx, im_g ? "wbcl_model_im2col3_nhwc_g" : j ? "wbcl_model_im2col3_nhwc" : "wbcl_model_im2col3", &k)))
            return r;
        if ((r = wbcl__model_check32(ctx, "wbcl_tost_forward", h, w, B * h)) ||
            (r = wbcl__model_check32(ctx, "wbcl_tost_forward", rows, cv->cout, 1)) ||
            (r = wbcl__model_check32(ctx, "wbcl_tost_forward", B * h * w, C, 1)))
            return r;
        cl_uint uC = (cl_uint)C, uH = (cl_uint)h, uW = (cl_uint)w, uHo = (cl_uint)ho, uWo = (cl_uint)wo, S = 2;
        WBCL_ARG(ctx, k, 0, in->mem);
        WBCL_ARG(ctx, k, 1, m->col->mem);
        WBCL_ARG(ctx, k, 2, uC);
        WBCL_ARG(ctx, k, 3, uH);
        WBCL_ARG(ctx, k, 4, uW);
        WBCL_ARG(ctx, k, 5, uHo);
        WBCL_ARG(ctx, k, 6, uWo);
        WBCL_ARG(ctx, k, 7, S);
        if (j) {
            cl_uint Z = (cl_uint)(B * ho);
            WBCL_ARG(ctx, k, 8, Z);
        } else {
            WBCL_ARG(ctx, k, 8, sb);
            WBCL_ARG(ctx, k, 9, sc);
            WBCL_ARG(ctx, k, 10, sy);
            WBCL_ARG(ctx, k, 11, sx);
        }
        if ((r = im_g ? wbcl__model_launch(ctx, k, 9 * C / (C % 4 ? 1 : 4), wo, B * ho)
                 : j  ? wbcl__model_launch(ctx, k, wo, B * ho, 1)
                      : wbcl__model_launch(ctx, k, C, wo, B * ho)))
            return r;
        const int act = j + 1 == m->nconv ? 0 : 1; /* GELU between the convs */
        if ((r = wbcl__model_linear(ctx, m->col, rows, K, cv->W, cv->cout, cv->b, act, *dst))) return r;
        in = *dst;
        h = ho;
        w = wo;
        C = cv->cout;
        sb = ho * wo * C;
        sc = 1;
        sy = wo * C;
        sx = C;
    }
    *Hp = h;
    *Wp = w;
    return WBCL_SUCCESS;
}

static wbcl_status tost_cab_forward(wbcl_context *ctx, wbcl_tost *m, const tost_cab *b, size_t B, size_t N1)
{
    const size_t d = m->cfg.dim, K = m->cfg.heads, p = d / K, hid = m->cfg.mlp_hidden;
    wbcl_status r;
    if ((r = wbcl_layernorm(ctx, m->Y, b->ln1_g, b->ln1_b, m->cfg.ln_eps, m->T1))) return r;
    if ((r = wbcl__model_linear(ctx, m->T1, B * N1, d, b->qkv_W, 3 * d, b->qkv_b, 0, m->QKV))) return r;
    /* the CLS query (token 0) of each head against all N1 keys: q, k, v inside QKV */
    wbcl_attention_desc a;
    memset(&a, 0, sizeof a);
    a.batch = B;
    a.heads = K;
    a.n_q = 1;
    a.n_k = N1;
    a.p = p;
    a.scale = (float)(1.0 / sqrt((double)p));
    a.causal = 0;
    a.off_q = 0;
    a.sb_q = N1 * 3 * d;
    a.sh_q = p;
    a.sn_q = 3 * d;
    a.off_k = d;
    a.sb_k = N1 * 3 * d;
    a.sh_k = p;
    a.sn_k = 3 * d;
    a.off_v = 2 * d;
    a.sb_v = N1 * 3 * d;
    a.sh_v = p;
    a.sn_v = 3 * d;
    a.off_o = 0;
    a.sb_o = d;
    a.sh_o = p;
    a.sn_o = d;
    if ((r = wbcl_attention_softmax_strided(ctx, &a, m->QKV, m->QKV, m->QKV, m->O))) return r;
    if ((r = wbcl__model_linear(ctx, m->O, B, d, b->proj_W, d, b->proj_b, 0, m->Cc))) return r;
    wbcl_kern *k;
    cl_uint uN1 = (cl_uint)N1, ud = (cl_uint)d;
    if ((r = wbcl__model_kernel(ctx, "wbcl_model_cab_mix", &k))) return r;
    WBCL_ARG(ctx, k, 0, m->Y->mem);
    WBCL_ARG(ctx, k, 1, m->T1->mem);
    WBCL_ARG(ctx, k, 2, m->Cc->mem);
    WBCL_ARG(ctx, k, 3, b->g1->mem);
    WBCL_ARG(ctx, k, 4, uN1);
    WBCL_ARG(ctx, k, 5, ud);
    if ((r = wbcl__model_launch(ctx, k, d, N1, B))) return r;
    /* tokens_norm: norm2 over all tokens */
    if ((r = wbcl_layernorm(ctx, m->Y, b->ln2_g, b->ln2_b, m->cfg.ln_eps, m->Y))) return r;
    if ((r = take_row0(ctx, m->Y, m->R, B, N1, d))) return r;
    if ((r = wbcl__model_linear(ctx, m->R, B, d, b->mlp.W1, hid, b->mlp.b1, 1, m->M1))) return r;
    if ((r = wbcl__model_linear(ctx, m->M1, B, hid, b->mlp.W2, d, NULL, 0, m->M2))) return r;
    if ((r = wbcl__model_kernel(ctx, "wbcl_model_cab_finish", &k))) return r;
    WBCL_ARG(ctx, k, 0, m->Y->mem);
    WBCL_ARG(ctx, k, 1, m->M2->mem);
    WBCL_ARG(ctx, k, 2, b->mlp.b2->mem);
    WBCL_ARG(ctx, k, 3, b->g2->mem);
    WBCL_ARG(ctx, k, 4, uN1);
    WBCL_ARG(ctx, k, 5, ud);
    return wbcl__model_launch(ctx, k, d, N1, B);
}

wbcl_status wbcl_tost_forward(wbcl_context *ctx, wbcl_tost *m, const wbcl_tensor *images, wbcl_model_output what,
                              wbcl_tensor *out, const wbcl_model_opts *opts)
{
    static const char *op = "wbcl_tost_forward";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!m) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL model", op);
    wbcl_status r = wbcl__check_tensor(ctx, images, op, "images");
    if (r) return r;
    const wbcl_tost_config *c = &m->cfg;
    char s[96];
    if (images->ndim != 4 || images->shape[1] != 3)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'images' must be (B, 3, H, W), got %s", op,
                          wbcl__shape_str(s, sizeof s, images->ndim, images->shape));
    const size_t B = images->shape[0], H = images->shape[2], W = images->shape[3], d = c->dim, hid = c->mlp_hidden;
    if (what == WBCL_MODEL_LOGITS) {
        size_t so[2] = {B, c->num_classes};
        r = wbcl__model_check_out(ctx, op, out, 2, so);
    } else if (what == WBCL_MODEL_FEATURES) {
        size_t so[2] = {B, d};
        r = wbcl__model_check_out(ctx, op, out, 2, so);
    } else {
        r = wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: bad output kind %d", op, (int)what);
    }
    if (r) return r;
    size_t Hp, Wp;
    if ((r = tost_patch_embed(ctx, m, images, B, H, W, &Hp, &Wp))) return r;
    const size_t N = Hp * Wp, N1 = N + 1;
    size_t sX[3] = {B, N, d}, sH[3] = {B, N, hid}, sY[3] = {B, N1, d}, sQ[3] = {B, N1, 3 * d};
    size_t sBd[2] = {B, d}, sBh[2] = {B, hid};
    if ((r = wbcl__model_ensure(ctx, &m->T, 3, sX)) || (r = wbcl__model_ensure(ctx, &m->A, 3, sX)) ||
        (r = wbcl__model_ensure(ctx, &m->Hd, 3, sH)) || (r = wbcl__model_ensure(ctx, &m->Y, 3, sY)) ||
        (r = wbcl__model_ensure(ctx, &m->T1, 3, sY)) || (r = wbcl__model_ensure(ctx, &m->QKV, 3, sQ)) ||
        (r = wbcl__model_ensure(ctx, &m->O, 2, sBd)) || (r = wbcl__model_ensure(ctx, &m->Cc, 2, sBd)) ||
        (r = wbcl__model_ensure(ctx, &m->R, 2, sBd)) || (r = wbcl__model_ensure(ctx, &m->M1, 2, sBh)) ||
        (r = wbcl__model_ensure(ctx, &m->M2, 2, sBd)))
        return r;
    if ((r = trace(opts, "patch", m->X))) return r;
    if ((r = tost_positions(ctx, m, Hp, Wp))) return r;
    if ((r = wbcl_add(ctx, m->X, m->pos, m->X))) return r;
    if ((r = trace(opts, "embed", m->X))) return r;
    /* each residual is fused with the LayerNorm that follows it (the next block's norm1 after
     * the MLP); the first norm1 runs alone, the last residual too */
    if (c->depth && (r = wbcl_layernorm(ctx, m->X, m->blocks[0].ln1_g, m->blocks[0].ln1_b, c->ln_eps, m->T)))
        return r;
    for (size_t i = 0; i < c->depth; i++) {
        const tost_block *b = &m->blocks[i], *next = i + 1 < c->depth ? &m->blocks[i + 1] : NULL;
        if ((r = wbcl_tssa_layer_forward(ctx, b->attn, m->T, m->A))) return r;
        if ((r = residual_ln(ctx, m->X, b->g1, m->A, NULL, b->ln2_g, b->ln2_b, c->ln_eps, m->T, B * N * d, d)))
            return r;
        if ((r = wbcl__model_linear(ctx, m->T, B * N, d, b->mlp.W1, hid, b->mlp.b1, 1, m->Hd))) return r;
        if ((r = wbcl__model_linear(ctx, m->Hd, B * N, hid, b->mlp.W2, d, NULL, 0, m->A))) return r;
        if (next)
            r = residual_ln(ctx, m->X, b->g2, m->A, b->mlp.b2, next->ln1_g, next->ln1_b, c->ln_eps, m->T, B * N * d,
                            d);
        else
            r = residual(ctx, m->X, b->g2, m->A, b->mlp.b2, B * N * d, d);
        if (r) return r;
        char name[64];
        snprintf(name, sizeof name, "block%zu.out", i);
        if ((r = trace(opts, name, m->X))) return r;
    }
    wbcl_kern *k;
    if ((r = wbcl__model_kernel(ctx, "wbcl_model_prepend", &k))) return r;
    if ((r = wbcl__model_check32(ctx, op, B * N1, 3 * d, 1)) || (r = wbcl__model_check32(ctx, op, B * N, hid, 1)))
        return r;
    cl_int has_add = 0;
    cl_uint uN = (cl_uint)N, ud = (cl_uint)d;
    WBCL_ARG(ctx, k, 0, m->X->mem);
    WBCL_ARG(ctx, k, 1, m->cls->mem);
    WBCL_ARG(ctx, k, 2, m->cls->mem); /* unused */
    WBCL_ARG(ctx, k, 3, has_add);
    WBCL_ARG(ctx, k, 4, m->Y->mem);
    WBCL_ARG(ctx, k, 5, uN);
    WBCL_ARG(ctx, k, 6, ud);
    if ((r = wbcl__model_launch(ctx, k, d, N1, B))) return r;
    for (size_t j = 0; j < c->cls_layers; j++) {
        char name[64];
        snprintf(name, sizeof name, "cls%zu.in", j);
        if ((r = trace(opts, name, m->Y))) return r;
        if ((r = tost_cab_forward(ctx, m, &m->cabs[j], B, N1))) return r;
        snprintf(name, sizeof name, "cls%zu.out", j);
        if ((r = trace(opts, name, m->Y))) return r;
    }
    /* final norm on the CLS token only (the reference norms all tokens and keeps row 0) */
    wbcl_tensor *F = what == WBCL_MODEL_FEATURES ? out : m->R;
    if ((r = take_row0(ctx, m->Y, F, B, N1, d))) return r;
    if ((r = wbcl_layernorm(ctx, F, m->norm_g, m->norm_b, c->ln_eps, F))) return r;
    if ((r = trace(opts, "feature", F))) return r;
    if (what == WBCL_MODEL_FEATURES) return WBCL_SUCCESS;
    if ((r = wbcl__model_linear(ctx, F, B, d, m->head_W, c->num_classes, m->head_b, 0, out))) return r;
    return trace(opts, "logits", out);
}
