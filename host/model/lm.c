/* Causal language models (include/wbcl/lm.h): gpt2, tost_lm, crate_lm — loading, the forward
 * pass on token ids, and the decode state (prefill, step). Composed from the ops: the GEMM with
 * bias / GELU epilogue, LayerNorm, the fused strided softmax attention (gpt2's causal heads and
 * crate_lm's causal MSSA, reading q / k / v straight from the projection output or the token
 * cache), the causal TSSA layer with its recurrent state, the ISTA layer. The token embedding is
 * a row gather done with buffer copies (one per token), the positions one copy per call. */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/attention.h"
#include "wbcl/ista.h"
#include "wbcl/lm.h"
#include "wbcl/ops.h"
#include "wbcl/tssa.h"
#include "wbcl/weights.h"

#define LM_LN_EPS 1e-5f
#define LM_ISTA_ETA 0.1f
#define LM_ISTA_LAMBDA 0.1f
#define LM_CACHE_MIN 64

typedef struct lm_block {
    wbcl_tensor *ln1_g, *ln1_b, *ln2_g, *ln2_b;
    wbcl_tensor *Wa, *ba, *Wo, *bo;  /* gpt2: c_attn (3d, d), c_proj; crate: c_attn (Kp, d), c_proj (d, Kp) */
    wbcl_tensor *Wfc, *bfc, *Wpr, *bpr; /* MLP (gpt2, tost_lm) */
    wbcl_tensor *g1, *g2;           /* tost_lm: ToST's layer scales gamma1, gamma2 (d) when the file has them */
    wbcl_tssa_causal_layer *tssa;   /* tost_lm */
    wbcl_ista_layer *ista;          /* crate_lm */
} lm_block;

struct wbcl_lm {
    wbcl_context *ctx;
    wbcl_lm_info info;
    size_t inner; /* gpt2: 3d (qkv width); crate: K p; tost: d */
    wbcl_tensor *wte, *wpe, *lnf_g, *lnf_b, *head; /* head == wte when tied */
    lm_block *blocks;
    /* work buffers for the current (B, n) */
    wbcl_tensor *X, *H, *A, *QKV, *O, *F, *P, *L;
};

struct wbcl_lm_state {
    wbcl_context *ctx;
    wbcl_lm *m;
    size_t B, pos, cap;
    wbcl_tensor **cache;     /* per layer (B, J, cap, p): gpt2 K key + K value heads, crate K heads of w */
    wbcl_tssa_state **tssa;  /* per layer (tost_lm) */
};

/* ============================================================================== names, info */
static const char *const kind_names[] = {"gpt2", "tost_lm", "crate_lm"};

wbcl_status wbcl_lm_kind_from_name(const char *name, wbcl_lm_kind *out)
{
    if (!name || !out) return WBCL_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, kind_names[i])) {
            *out = (wbcl_lm_kind)i;
            return WBCL_SUCCESS;
        }
    return WBCL_ERROR_INVALID_ARGUMENT;
}

const char *wbcl_lm_kind_name(wbcl_lm_kind kind)
{
    return (int)kind >= 0 && (int)kind < 3 ? kind_names[kind] : "?";
}

const wbcl_lm_info *wbcl_lm_get_info(const wbcl_lm *m) { return m ? &m->info : NULL; }

void wbcl_lm_destroy(wbcl_lm *m)
{
    if (!m) return;
    if (m->head != m->wte) wbcl_tensor_destroy(m->head);
    wbcl_tensor *ts[] = {m->wte, m->wpe, m->lnf_g, m->lnf_b, m->X, m->H, m->A, m->QKV, m->O, m->F, m->P, m->L};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) wbcl_tensor_destroy(ts[i]);
    if (m->blocks)
        for (size_t i = 0; i < m->info.depth; i++) {
            lm_block *b = &m->blocks[i];
            wbcl_tensor *bt[] = {b->ln1_g, b->ln1_b, b->ln2_g, b->ln2_b, b->Wa,  b->ba,
                                 b->Wo,    b->bo,    b->Wfc,   b->bfc,   b->Wpr, b->bpr, b->g1, b->g2};
            for (size_t j = 0; j < sizeof bt / sizeof bt[0]; j++) wbcl_tensor_destroy(bt[j]);
            wbcl_tssa_causal_layer_destroy(b->tssa);
            wbcl_ista_layer_destroy(b->ista);
        }
    free(m->blocks);
    free(m);
}

/* ============================================================================== loading */
static wbcl_status load_w(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *pre,
                          const char *name, size_t r0, size_t r1, int required, wbcl_tensor **out)
{
    size_t s[2] = {r0, r1};
    return wbcl_weight_load(ctx, st, file, pre, name, r1 ? 2 : 1, s, required, out);
}

/* LayerNorm: weight required, bias optional (nanoGPT's bias flag) */
static wbcl_status load_ln(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, const char *pre,
                           size_t d, wbcl_tensor **g, wbcl_tensor **b)
{
    wbcl_status r = load_w(ctx, st, file, pre, "weight", d, 0, 1, g);
    if (!r) r = load_w(ctx, st, file, pre, "bias", d, 0, 0, b);
    return r;
}

static wbcl_status load_block(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, wbcl_lm *m, size_t i)
{
    const wbcl_lm_info *in = &m->info;
    const size_t d = in->dim;
    lm_block *b = &m->blocks[i];
    char pre[128];
    wbcl_status r;
    const int crate = in->kind == WBCL_LM_CRATE;
    snprintf(pre, sizeof pre, "transformer.h.%zu.%s", i, crate ? "prenorm_1." : "ln_1.");
    if ((r = load_ln(ctx, st, file, pre, d, &b->ln1_g, &b->ln1_b))) return r;
    snprintf(pre, sizeof pre, "transformer.h.%zu.%s", i, crate ? "prenorm_2." : "ln_2.");
    if ((r = load_ln(ctx, st, file, pre, d, &b->ln2_g, &b->ln2_b))) return r;
    snprintf(pre, sizeof pre, "transformer.h.%zu.attn.", i);
    switch (in->kind) {
    case WBCL_LM_GPT2:
        if ((r = load_w(ctx, st, file, pre, "c_attn.weight", 3 * d, d, 1, &b->Wa))) return r;
        if ((r = load_w(ctx, st, file, pre, "c_attn.bias", 3 * d, 0, 0, &b->ba))) return r;
        if ((r = load_w(ctx, st, file, pre, "c_proj.weight", d, d, 1, &b->Wo))) return r;
        if ((r = load_w(ctx, st, file, pre, "c_proj.bias", d, 0, 0, &b->bo))) return r;
        break;
    case WBCL_LM_TOST:
        if ((r = wbcl_tssa_causal_layer_load(ctx, st, file, pre, d, in->heads, &b->tssa))) return r;
        wbcl__tssa_causal_layer_transient(b->tssa); /* no kept panels in an LM (host/core/internal.h) */
        if (wbcl_tssa_causal_layer_tmax(b->tssa) != in->block_size)
            return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                              "%s: '%sdenom_bias' covers %zu positions but 'transformer.wpe.weight' has block_size %zu",
                              file, pre, wbcl_tssa_causal_layer_tmax(b->tssa), in->block_size);
        /* ToST's language Block scales both branches: x + gamma1 * attn(ln_1 x), x + gamma2 * mlp(ln_2 x)
         * (tost_lang/model_TSSA.py; gamma initialized to 1e-5, so a checkpoint that has them must use them) */
        snprintf(pre, sizeof pre, "transformer.h.%zu.", i);
        if ((r = load_w(ctx, st, file, pre, "gamma1", d, 0, 0, &b->g1))) return r;
        if ((r = load_w(ctx, st, file, pre, "gamma2", d, 0, 0, &b->g2))) return r;
        break;
    case WBCL_LM_CRATE:
        if ((r = load_w(ctx, st, file, pre, "c_attn.weight", m->inner, d, 1, &b->Wa))) return r;
        if ((r = load_w(ctx, st, file, pre, "c_proj.weight", d, m->inner, 1, &b->Wo))) return r;
        if ((r = load_w(ctx, st, file, pre, "c_proj.bias", d, 0, 0, &b->bo))) return r;
        break;
    }
    if (crate) {
        wbcl_tensor *W = NULL;
        snprintf(pre, sizeof pre, "transformer.h.%zu.ista.", i);
        if ((r = load_w(ctx, st, file, pre, "weight", d, d, 1, &W))) return r;
        r = wbcl_ista_layer_create(ctx, W, LM_ISTA_ETA, LM_ISTA_LAMBDA, WBCL_THRESHOLD_RELU, WBCL_ISTA_AUTO, &b->ista);
        wbcl_tensor_destroy(W);
        if (!r) wbcl__ista_layer_transient(b->ista); /* no kept panels in an LM (host/core/internal.h) */
        return r;
    }
    snprintf(pre, sizeof pre, "transformer.h.%zu.mlp.", i);
    if ((r = load_w(ctx, st, file, pre, "c_fc.weight", in->mlp_hidden, d, 1, &b->Wfc))) return r;
    if ((r = load_w(ctx, st, file, pre, "c_fc.bias", in->mlp_hidden, 0, 0, &b->bfc))) return r;
    if ((r = load_w(ctx, st, file, pre, "c_proj.weight", d, in->mlp_hidden, 1, &b->Wpr))) return r;
    return load_w(ctx, st, file, pre, "c_proj.bias", d, 0, 0, &b->bpr);
}

wbcl_status wbcl_lm_load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file, wbcl_lm_kind kind,
                         size_t heads, wbcl_lm **out)
{
    static const char *op = "wbcl_lm_load";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!st || !out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL argument", op);
    *out = NULL;
    if (!file) file = "weights";
    if ((int)kind < 0 || (int)kind > 2)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: unknown model kind %d", op, (int)kind);
    if (heads == 0 || heads > 65536)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: heads = %zu (need 1 .. 65536)", op, heads);
    wbcl_lm *m = calloc(1, sizeof *m);
    if (!m) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of memory", op);
    m->ctx = ctx;
    wbcl_lm_info *in = &m->info;
    in->kind = kind;
    in->heads = heads;
    const int crate = kind == WBCL_LM_CRATE;
    size_t shp[2];
    char s[96], key[128];
    wbcl_status r = wbcl__model_key_shape(ctx, st, file, "transformer.wte.weight", 2, shp);
    if (!r && (!shp[0] || !shp[1]))
        r = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'transformer.wte.weight' has shape %s, expected (V > 0, d > 0)",
                       file, wbcl__shape_str(s, sizeof s, 2, shp));
    if (!r) {
        in->vocab = shp[0];
        in->dim = shp[1];
        r = wbcl__model_key_shape(ctx, st, file, "transformer.wpe.weight", 2, shp);
    }
    if (!r && (!shp[0] || shp[1] != in->dim))
        r = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'transformer.wpe.weight' has shape %s, expected (block_size, %zu)",
                       file, wbcl__shape_str(s, sizeof s, 2, shp), in->dim);
    if (!r) in->block_size = shp[0];
    /* depth: the blocks present (block 0 required) */
    while (!r) {
        snprintf(key, sizeof key, "transformer.h.%zu.%s.weight", in->depth, crate ? "prenorm_1" : "ln_1");
        if (!wbcl_safetensors_has(st, key)) break;
        in->depth++;
    }
    if (!r && !in->depth)
        r = wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: missing tensor 'transformer.h.0.%s.weight' (no blocks)", file,
                       crate ? "prenorm_1" : "ln_1");
    /* the attention width: 3d (gpt2), d (tost_lm), K p from c_attn (crate_lm) */
    if (!r && crate) {
        r = wbcl__model_key_shape(ctx, st, file, "transformer.h.0.attn.c_attn.weight", 2, shp);
        if (!r && (shp[1] != in->dim || !shp[0]))
            r = wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                           "%s: 'transformer.h.0.attn.c_attn.weight' has shape %s, expected (K p, %zu)", file,
                           wbcl__shape_str(s, sizeof s, 2, shp), in->dim);
        if (!r) m->inner = shp[0];
    } else if (!r) {
        m->inner = kind == WBCL_LM_GPT2 ? 3 * in->dim : in->dim;
        r = wbcl__model_key_shape(ctx, st, file, "transformer.h.0.mlp.c_fc.weight", 2, shp);
        if (!r && (shp[1] != in->dim || !shp[0]))
            r = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'transformer.h.0.mlp.c_fc.weight' has shape %s, expected (4d, %zu)",
                           file, wbcl__shape_str(s, sizeof s, 2, shp), in->dim);
        if (!r) in->mlp_hidden = shp[0];
    }
    if (!r) {
        const size_t width = crate ? m->inner : in->dim;
        if (width % heads)
            r = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: heads = %zu does not divide the attention width %s = %zu", op,
                           heads, crate ? "K p" : "d", width);
        else
            in->dim_head = width / heads;
    }
    if (!r) {
        snprintf(key, sizeof key, "transformer.h.0.%s.bias", crate ? "prenorm_1" : "ln_1");
        in->bias = wbcl_safetensors_has(st, key);
        r = wbcl__model_check32(ctx, op, in->vocab, in->dim, in->block_size);
    }
    if (!r) {
        m->blocks = calloc(in->depth, sizeof *m->blocks);
        if (!m->blocks) r = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of memory", op);
    }
    if (!r) r = load_w(ctx, st, file, "transformer.", "wte.weight", in->vocab, in->dim, 1, &m->wte);
    if (!r) r = load_w(ctx, st, file, "transformer.", "wpe.weight", in->block_size, in->dim, 1, &m->wpe);
    for (size_t i = 0; i < in->depth && !r; i++) r = load_block(ctx, st, file, m, i);
    if (!r && !crate) r = load_ln(ctx, st, file, "transformer.ln_f.", in->dim, &m->lnf_g, &m->lnf_b);
    if (!r) r = load_w(ctx, st, file, NULL, "lm_head.weight", in->vocab, in->dim, 0, &m->head);
    if (!r && !m->head) {
        m->head = m->wte;
        in->tied = 1;
    }
    if (r) {
        wbcl_lm_destroy(m);
        return r;
    }
    *out = m;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_lm_load_file(wbcl_context *ctx, const char *path, wbcl_lm_kind kind, size_t heads, wbcl_lm **out)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!path || !out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_lm_load_file: NULL argument");
    *out = NULL;
    wbcl_safetensors *st = NULL;
    char err[512];
    wbcl_status r = wbcl_safetensors_open(path, &st, err, sizeof err);
    if (r) return wbcl__fail(ctx, r, "%s", err);
    r = wbcl_lm_load(ctx, st, path, kind, heads, out);
    wbcl_safetensors_close(st);
    return r;
}

/* ============================================================================== token ids */
static int64_t id_at(const wbcl_array *a, size_t i)
{
    return a->elem == WBCL_ELEM_I32 ? (int64_t)((const int32_t *)a->data)[i] : ((const int64_t *)a->data)[i];
}

wbcl_status wbcl_lm_check_ids(wbcl_context *ctx, const wbcl_lm *m, const wbcl_array *ids, size_t *B, size_t *T)
{
    static const char *op = "wbcl_lm";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!m || !ids || !ids->data || !B || !T) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL argument", op);
    char s[96];
    if (ids->elem != WBCL_ELEM_I32 && ids->elem != WBCL_ELEM_I64)
        return wbcl__fail(ctx, WBCL_ERROR_DTYPE, "%s: token ids must be int32 or int64, got %s", op,
                          wbcl_elem_name(ids->elem));
    if ((ids->ndim != 1 && ids->ndim != 2) || !ids->shape[0] || (ids->ndim == 2 && !ids->shape[1]))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: token ids must be (B, T) or (T), non-empty; got %s", op,
                          wbcl__shape_str(s, sizeof s, ids->ndim, ids->shape));
    *B = ids->ndim == 2 ? ids->shape[0] : 1;
    *T = ids->shape[ids->ndim - 1];
    const size_t n = *B * *T, V = m->info.vocab;
    for (size_t i = 0; i < n; i++) {
        int64_t v = id_at(ids, i);
        if (v < 0 || (uint64_t)v >= V)
            return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                              "%s: token id %lld (sequence %zu, position %zu) is out of range: the vocabulary has V = %zu",
                              op, (long long)v, i / *T, i % *T, V);
    }
    return WBCL_SUCCESS;
}

/* ============================================================================== running */
/* X (B, n, d) = wte[ids] + wpe[t0 .. t0+n) */
static wbcl_status embed(wbcl_context *ctx, wbcl_lm *m, const int64_t *ids, size_t B, size_t n, size_t t0)
{
    const size_t d = m->info.dim, row = d * sizeof(float);
    for (size_t i = 0; i < B * n; i++) {
        cl_int e = clEnqueueCopyBuffer(ctx->queue, m->wte->mem, m->X->mem, (size_t)ids[i] * row, i * row, row, 0,
                                       NULL, NULL);
        if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "wbcl_lm: gathering the embedding of token %zu", i);
    }
    cl_int e = clEnqueueCopyBuffer(ctx->queue, m->wpe->mem, m->P->mem, t0 * row, 0, n * row, 0, NULL, NULL);
    if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "wbcl_lm: copying positions %zu..%zu", t0, t0 + n - 1);
    return wbcl_add(ctx, m->X, m->P, m->X);
}

/* y = act(x W^T + b) over rows; GELU without a bias as a separate pass. A decode step's few
 * rows take the GEMV inside wbcl__gemm_linear (one pass over W), longer inputs the packed GEMM. */
static wbcl_status lin(wbcl_context *ctx, const wbcl_tensor *x, size_t rows, size_t k, const wbcl_tensor *W, size_t n,
                       const wbcl_tensor *b, int gelu, wbcl_tensor *y)
{
    if (gelu && !b) {
        wbcl_status r = wbcl__model_linear(ctx, x, rows, k, W, n, NULL, 0, y);
        return r ? r : wbcl_gelu(ctx, y, y);
    }
    return wbcl__model_linear(ctx, x, rows, k, W, n, b, gelu, y);
}

/* heads a layer's cache holds: gpt2 K keys + K values, crate_lm the K heads of w (q = k = v) */
static size_t cache_heads(const wbcl_lm *m) { return (m->info.kind == WBCL_LM_GPT2 ? 2 : 1) * m->info.heads; }

/* The cache of a layer is head-major, (B, J, cap, p) with J = cache_heads (gpt2: K key heads then K
 * value heads; crate_lm: the K heads of w), so that a decode step reads each head's keys as one
 * contiguous run (cl/attn_decode.cl). Columns src_col .. src_col + J p of the n rows of each
 * sequence in src (B, n, src_w) -> rows t0 .. t0+n-1 (wbcl_lm_cache_put, cl/models.cl). */
static wbcl_status cache_put(wbcl_context *ctx, const wbcl_tensor *src, size_t src_col, size_t src_w,
                             wbcl_tensor *cache, size_t cap, size_t J, size_t p, size_t B, size_t n, size_t t0)
{
    wbcl_kern *k;
    wbcl_status r = wbcl__model_kernel(ctx, "wbcl_lm_cache_put", &k);
    if (r) return r;
    cl_uint sc = (cl_uint)src_col, sw = (cl_uint)src_w, ucap = (cl_uint)cap, uJ = (cl_uint)J, un = (cl_uint)n,
            ut0 = (cl_uint)t0, up = (cl_uint)p;
    WBCL_ARG(ctx, k, 0, src->mem);
    WBCL_ARG(ctx, k, 1, sc);
    WBCL_ARG(ctx, k, 2, sw);
    WBCL_ARG(ctx, k, 3, cache->mem);
    WBCL_ARG(ctx, k, 4, ucap);
    WBCL_ARG(ctx, k, 5, uJ);
    WBCL_ARG(ctx, k, 6, un);
    WBCL_ARG(ctx, k, 7, ut0);
    WBCL_ARG(ctx, k, 8, up);
    return wbcl__model_launch(ctx, k, p, J * n, B);
}

static wbcl_status ensure_work(wbcl_context *ctx, wbcl_lm *m, size_t B, size_t n)
{
    const wbcl_lm_info *in = &m->info;
    const size_t d = in->dim;
    size_t sx[3] = {B, n, d}, sq[3] = {B, n, m->inner}, sf[3] = {B, n, in->mlp_hidden ? in->mlp_hidden : 1},
           sp[2] = {n, d}, sl[2] = {B, d};
    size_t so[3] = {B, n, in->kind == WBCL_LM_CRATE ? m->inner : d};
    wbcl_status r;
    if ((r = wbcl__model_ensure(ctx, &m->X, 3, sx)) || (r = wbcl__model_ensure(ctx, &m->H, 3, sx)) ||
        (r = wbcl__model_ensure(ctx, &m->A, 3, sx)) || (r = wbcl__model_ensure(ctx, &m->P, 2, sp)) ||
        (r = wbcl__model_ensure(ctx, &m->L, 2, sl)))
        return r;
    if (in->kind != WBCL_LM_TOST &&
        ((r = wbcl__model_ensure(ctx, &m->QKV, 3, sq)) || (r = wbcl__model_ensure(ctx, &m->O, 3, so))))
        return r;
    if (in->kind != WBCL_LM_CRATE && (r = wbcl__model_ensure(ctx, &m->F, 3, sf))) return r;
    return wbcl__model_check32(ctx, "wbcl_lm", B * n, m->inner > in->vocab ? m->inner : in->vocab, 1);
}

/* The attention of block i on H (B, n, ·) -> A (B, n, d). cache NULL: whole sequences from 0;
 * else the cache of layer i holds positions < t0 and receives t0 .. t0+n-1. */
static wbcl_status attention(wbcl_context *ctx, wbcl_lm *m, size_t i, size_t B, size_t n, size_t t0,
                             wbcl_lm_state *s)
{
    const wbcl_lm_info *in = &m->info;
    lm_block *b = &m->blocks[i];
    const size_t d = in->dim, p = in->dim_head, rows = B * n;
    wbcl_status r;
    if (in->kind == WBCL_LM_TOST)
        return wbcl_tssa_causal_layer_forward(ctx, b->tssa, m->H, s ? s->tssa[i] : NULL, m->A);
    const int gpt = in->kind == WBCL_LM_GPT2;
    const size_t qw = m->inner;               /* width of a QKV row: 3d or K p */
    const size_t ow = gpt ? d : m->inner;     /* width of an O row */
    const size_t J = cache_heads(m);          /* heads in the cache: (B, J, cap, p) */
    if ((r = lin(ctx, m->H, rows, d, b->Wa, qw, b->ba, 0, m->QKV))) return r;
    wbcl_attention_desc a;
    memset(&a, 0, sizeof a);
    a.batch = B;
    a.heads = in->heads;
    a.n_q = n;
    a.p = p;
    a.scale = (float)(1.0 / sqrt((double)p));
    a.causal = 1;
    a.sb_q = n * qw;
    a.sh_q = a.sh_k = a.sh_v = a.sh_o = p;
    a.sn_q = qw;
    a.sb_o = n * ow;
    a.sn_o = ow;
    const wbcl_tensor *kt;
    if (s) {
        if ((r = cache_put(ctx, m->QKV, gpt ? d : 0, qw, s->cache[i], s->cap, J, p, B, n, t0))) return r;
        kt = s->cache[i];
        a.n_k = t0 + n;
        a.off_k = 0;
        a.off_v = gpt ? in->heads * s->cap * p : 0; /* the value heads follow the key heads */
        a.sb_k = a.sb_v = J * s->cap * p;
        a.sh_k = a.sh_v = s->cap * p;
        a.sn_k = a.sn_v = p;
    } else {
        kt = m->QKV;
        a.n_k = n;
        a.off_k = gpt ? d : 0;
        a.off_v = gpt ? 2 * d : 0;
        a.sb_k = a.sb_v = n * qw;
        a.sn_k = a.sn_v = qw;
    }
    if ((r = wbcl_attention_softmax_strided(ctx, &a, m->QKV, kt, kt, m->O))) return r;
    return lin(ctx, m->O, rows, ow, b->Wo, d, b->bo, 0, m->A);
}

/* x += a, or x += g * a with a layer scale g (d) (ToST-LM's gamma1 / gamma2). */
static wbcl_status residual(wbcl_context *ctx, wbcl_tensor *x, const wbcl_tensor *a, const wbcl_tensor *g, size_t rows,
                            size_t d)
{
    if (!g) return wbcl_add(ctx, x, a, x);
    wbcl_kern *k;
    wbcl_status r = wbcl__model_kernel(ctx, "wbcl_model_residual_scaled", &k);
    if (r) return r;
    cl_int has_b = 0;
    cl_uint ud = (cl_uint)d, ur = (cl_uint)rows;
    WBCL_ARG(ctx, k, 0, x->mem);
    WBCL_ARG(ctx, k, 1, g->mem);
    WBCL_ARG(ctx, k, 2, a->mem);
    WBCL_ARG(ctx, k, 3, g->mem); /* no bias: any buffer */
    WBCL_ARG(ctx, k, 4, has_b);
    WBCL_ARG(ctx, k, 5, ud);
    WBCL_ARG(ctx, k, 6, ur);
    return wbcl__model_launch(ctx, k, d, rows, 1);
}

/* The blocks and the final norm on X (B, n, d) from position t0; the normed (gpt2, tost) or raw
 * (crate) final activations end in X (crate) / H (others). Returns the tensor holding them. */
static wbcl_status run_blocks(wbcl_context *ctx, wbcl_lm *m, size_t B, size_t n, size_t t0, wbcl_lm_state *s,
                              wbcl_tensor **final)
{
    const wbcl_lm_info *in = &m->info;
    const size_t d = in->dim, rows = B * n;
    wbcl_status r;
    for (size_t i = 0; i < in->depth; i++) {
        lm_block *b = &m->blocks[i];
        if ((r = wbcl_layernorm(ctx, m->X, b->ln1_g, b->ln1_b, LM_LN_EPS, m->H))) return r;
        if ((r = attention(ctx, m, i, B, n, t0, s))) return r;
        if ((r = residual(ctx, m->X, m->A, b->g1, rows, d))) return r;
        if ((r = wbcl_layernorm(ctx, m->X, b->ln2_g, b->ln2_b, LM_LN_EPS, m->H))) return r;
        if (in->kind == WBCL_LM_CRATE) {
            if ((r = wbcl_ista_layer_forward(ctx, b->ista, m->H, m->X))) return r;
        } else {
            if ((r = lin(ctx, m->H, rows, d, b->Wfc, in->mlp_hidden, b->bfc, 1, m->F))) return r;
            if ((r = lin(ctx, m->F, rows, in->mlp_hidden, b->Wpr, d, b->bpr, 0, m->A))) return r;
            if ((r = residual(ctx, m->X, m->A, b->g2, rows, d))) return r;
        }
    }
    if (in->kind == WBCL_LM_CRATE) {
        *final = m->X;
        return WBCL_SUCCESS;
    }
    *final = m->H;
    return wbcl_layernorm(ctx, m->X, m->lnf_g, m->lnf_b, LM_LN_EPS, m->H);
}

static wbcl_status check_logits(wbcl_context *ctx, const char *op, const wbcl_tensor *t, size_t n, const char *want)
{
    wbcl_status r = wbcl__check_tensor(ctx, t, op, "logits");
    if (r) return r;
    if (t->numel != n) {
        char s[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'logits' has shape %s (%zu elements), expected %s = %zu elements",
                          op, wbcl__shape_str(s, sizeof s, t->ndim, t->shape), t->numel, want, n);
    }
    return WBCL_SUCCESS;
}

static wbcl_status ids_to_i64(wbcl_context *ctx, const wbcl_array *ids, size_t n, int64_t **out)
{
    int64_t *v = malloc(n * sizeof *v);
    if (!v) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "wbcl_lm: out of memory");
    for (size_t i = 0; i < n; i++) v[i] = id_at(ids, i);
    *out = v;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_lm_forward(wbcl_context *ctx, wbcl_lm *m, const wbcl_array *ids, wbcl_tensor *logits)
{
    static const char *op = "wbcl_lm_forward";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!m) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL model", op);
    size_t B, T;
    wbcl_status r = wbcl_lm_check_ids(ctx, m, ids, &B, &T);
    if (r) return r;
    if (T > m->info.block_size)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: T = %zu tokens exceed the model's block_size %zu", op, T,
                          m->info.block_size);
    if ((r = check_logits(ctx, op, logits, B * T * m->info.vocab, "(B, T, V)"))) return r;
    if ((r = ensure_work(ctx, m, B, T))) return r;
    int64_t *v = NULL;
    if ((r = ids_to_i64(ctx, ids, B * T, &v))) return r;
    r = embed(ctx, m, v, B, T, 0);
    free(v);
    wbcl_tensor *fin = NULL;
    if (!r) r = run_blocks(ctx, m, B, T, 0, NULL, &fin);
    if (!r) r = lin(ctx, fin, B * T, m->info.dim, m->head, m->info.vocab, NULL, 0, logits);
    return r;
}

/* ============================================================================== decoding */
void wbcl_lm_state_destroy(wbcl_lm_state *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->m->info.depth; i++) {
        if (s->cache) wbcl_tensor_destroy(s->cache[i]);
        if (s->tssa) wbcl_tssa_state_destroy(s->tssa[i]);
    }
    free(s->cache);
    free(s->tssa);
    free(s);
}

wbcl_status wbcl_lm_state_create(wbcl_context *ctx, wbcl_lm *m, size_t batch, wbcl_lm_state **out)
{
    static const char *op = "wbcl_lm_state_create";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!m || !out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL argument", op);
    *out = NULL;
    if (m->ctx != ctx) return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: the model belongs to another context", op);
    if (!batch || batch > (1u << 20)) return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: batch = %zu", op, batch);
    wbcl_lm_state *s = calloc(1, sizeof *s);
    if (!s) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of memory", op);
    s->ctx = ctx;
    s->m = m;
    s->B = batch;
    const size_t L = m->info.depth;
    wbcl_status r = WBCL_SUCCESS;
    if (m->info.kind == WBCL_LM_TOST) {
        s->tssa = calloc(L, sizeof *s->tssa);
        if (!s->tssa) r = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of memory", op);
        for (size_t i = 0; i < L && !r; i++)
            r = wbcl_tssa_state_create(ctx, batch, m->info.heads, m->info.dim_head, &s->tssa[i]);
    } else {
        s->cache = calloc(L, sizeof *s->cache);
        if (!s->cache) r = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of memory", op);
        s->cap = m->info.block_size < LM_CACHE_MIN ? m->info.block_size : LM_CACHE_MIN;
        size_t sh[4] = {batch, cache_heads(m), s->cap, m->info.dim_head};
        for (size_t i = 0; i < L && !r; i++) r = wbcl_tensor_create(ctx, 4, sh, WBCL_F32, NULL, &s->cache[i]);
    }
    if (r) {
        wbcl_lm_state_destroy(s);
        return r;
    }
    *out = s;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_lm_state_reset(wbcl_context *ctx, wbcl_lm_state *s)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!s) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_lm_state_reset: NULL state");
    s->pos = 0;
    if (s->tssa)
        for (size_t i = 0; i < s->m->info.depth; i++) {
            wbcl_status r = wbcl_tssa_state_reset(ctx, s->tssa[i]);
            if (r) return r;
        }
    return WBCL_SUCCESS;
}

size_t wbcl_lm_state_position(const wbcl_lm_state *s) { return s ? s->pos : 0; }

size_t wbcl_lm_state_bytes(const wbcl_lm_state *s)
{
    if (!s) return 0;
    const wbcl_lm_info *in = &s->m->info;
    if (s->tssa) /* S, Q (B K p each) with their Kahan compensations, P (B K) with its own, position */
        return in->depth * s->B * in->heads * (4 * in->dim_head + 2) * sizeof(float);
    return in->depth * s->B * cache_heads(s->m) * s->cap * in->dim_head * sizeof(float);
}

/* capacity for `need` tokens: doubling, at most block_size; the rows < pos are kept */
static wbcl_status cache_reserve(wbcl_context *ctx, wbcl_lm_state *s, size_t need)
{
    if (!s->cache || need <= s->cap) return WBCL_SUCCESS;
    size_t cap = s->cap;
    while (cap < need) cap *= 2;
    if (cap > s->m->info.block_size) cap = s->m->info.block_size;
    const size_t J = cache_heads(s->m), p = s->m->info.dim_head, f = sizeof(float);
    size_t sh[4] = {s->B, J, cap, p};
    for (size_t i = 0; i < s->m->info.depth; i++) {
        wbcl_tensor *nc = NULL;
        wbcl_status r = wbcl_tensor_create(ctx, 4, sh, WBCL_F32, NULL, &nc);
        if (r) return r;
        if (s->pos) { /* each of the B J heads: its first pos rows of p floats */
            size_t o[3] = {0, 0, 0}, region[3] = {s->pos * p * f, s->B * J, 1};
            cl_int e = clEnqueueCopyBufferRect(ctx->queue, s->cache[i]->mem, nc->mem, o, o, region, s->cap * p * f, 0,
                                               cap * p * f, 0, 0, NULL, NULL);
            if (e != CL_SUCCESS) {
                wbcl_tensor_destroy(nc);
                return wbcl__cl_fail(ctx, e, "wbcl_lm: growing the cache to %zu tokens", cap);
            }
        }
        wbcl_tensor_destroy(s->cache[i]);
        s->cache[i] = nc;
    }
    s->cap = cap; /* all layers grown (a failure above leaves some grown: the caller resets) */
    return WBCL_SUCCESS;
}

/* n tokens per sequence (v: B*n) from the state's position; logits of the last token */
static wbcl_status advance(wbcl_context *ctx, wbcl_lm_state *s, const int64_t *v, size_t n, wbcl_tensor *logits,
                           const char *op)
{
    wbcl_lm *m = s->m;
    const wbcl_lm_info *in = &m->info;
    const size_t B = s->B, t0 = s->pos, d = in->dim;
    if (t0 + n > in->block_size)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: positions %zu..%zu exceed the model's block_size %zu (the state has %zu tokens)", op, t0,
                          t0 + n - 1, in->block_size, t0);
    wbcl_status r;
    if (logits && (r = check_logits(ctx, op, logits, B * in->vocab, "(B, V)"))) return r;
    if ((r = ensure_work(ctx, m, B, n))) return r;
    if ((r = cache_reserve(ctx, s, t0 + n))) return r;
    if ((r = embed(ctx, m, v, B, n, t0))) return r;
    wbcl_tensor *fin = NULL;
    if ((r = run_blocks(ctx, m, B, n, t0, s, &fin))) return r;
    s->pos = t0 + n;
    if (!logits) return WBCL_SUCCESS;
    const wbcl_tensor *last = fin;
    if (n > 1) { /* the last row of each sequence -> L (B, d) */
        const size_t row = d * sizeof(float);
        for (size_t b = 0; b < B; b++) {
            cl_int e = clEnqueueCopyBuffer(ctx->queue, fin->mem, m->L->mem, (b * n + n - 1) * row, b * row, row, 0, NULL,
                                           NULL);
            if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "%s: taking the last rows", op);
        }
        last = m->L;
    }
    return lin(ctx, last, B, d, m->head, in->vocab, NULL, 0, logits);
}

wbcl_status wbcl_lm_prefill(wbcl_context *ctx, wbcl_lm_state *s, const wbcl_array *ids, wbcl_tensor *last_logits)
{
    static const char *op = "wbcl_lm_prefill";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!s) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL state", op);
    size_t B, T;
    wbcl_status r = wbcl_lm_check_ids(ctx, s->m, ids, &B, &T);
    if (r) return r;
    if (B != s->B)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: ids have %zu sequences, the state %zu", op, B, s->B);
    int64_t *v = NULL;
    if ((r = ids_to_i64(ctx, ids, B * T, &v))) return r;
    r = advance(ctx, s, v, T, last_logits, op);
    free(v);
    return r;
}

wbcl_status wbcl_lm_step(wbcl_context *ctx, wbcl_lm_state *s, const int64_t *tokens, wbcl_tensor *logits)
{
    static const char *op = "wbcl_lm_step";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!s || !tokens) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL argument", op);
    const size_t V = s->m->info.vocab;
    for (size_t b = 0; b < s->B; b++)
        if (tokens[b] < 0 || (uint64_t)tokens[b] >= V)
            return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                              "%s: token id %lld (sequence %zu) is out of range: the vocabulary has V = %zu", op,
                              (long long)tokens[b], b, V);
    return advance(ctx, s, tokens, 1, logits, op);
}
