/* Attention modules with reference PyTorch weights (include/wbcl/attention.h):
 * wbcl_mha (timm ViT `Attention` / GPT), wbcl_mssa (CRATE `Attention`) and the
 * MSSA decode cache. Each forward is: projection GEMM (+ bias), the fused
 * attention reading q/k/v straight out of the projection's (B, N, ·) output
 * through the strided API (no split/merge copies), output GEMM + bias. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/attention.h"
#include "wbcl/gemm.h"
#include "wbcl/ops.h"
#include "wbcl/weights.h"

/* x: (N, d) or (B, N, d) with last dimension d. */
static wbcl_status token_dims(wbcl_context *ctx, const char *op, const char *what, const wbcl_tensor *x, size_t d,
                              size_t *B, size_t *N)
{
    char s[96];
    if ((x->ndim != 2 && x->ndim != 3) || x->shape[x->ndim - 1] != d)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' must be (N, %zu) or (B, N, %zu), got %s", op, what, d, d,
                          wbcl__shape_str(s, sizeof s, x->ndim, x->shape));
    *B = x->ndim == 3 ? x->shape[0] : 1;
    *N = x->shape[x->ndim - 2];
    return WBCL_SUCCESS;
}

static wbcl_status check_xy(wbcl_context *ctx, const char *op, const wbcl_tensor *x, const wbcl_tensor *y, size_t d,
                            size_t *B, size_t *N)
{
    wbcl_status st = wbcl__check_tensor(ctx, x, op, "x");
    if (!st) st = wbcl__check_tensor(ctx, y, op, "y");
    if (st) return st;
    if (x == y || x->mem == y->mem)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'y' must not be 'x' (in place)", op);
    if ((st = token_dims(ctx, op, "x", x, d, B, N))) return st;
    return wbcl__check_same_shape(ctx, x, y, op, "x", "y");
}

/* C (rows, n) = A (rows, k) Wᵀ (+ bias (n)), W (n, k); all row-major, contiguous from offset 0. The
 * linear-layer GEMM (host/ops/gemm.c): the bias in its epilogue, A read in place, a few rows (a decode
 * step) through the GEMV. */
static wbcl_status linear(wbcl_context *ctx, const wbcl_tensor *A, size_t rows, size_t k, const wbcl_tensor *W,
                          size_t n, const wbcl_tensor *bias, wbcl_tensor *C)
{
    return wbcl__gemm_linear(ctx, A, rows, k, W, n, bias, 0, C);
}

/* (Re)creates *t with the given shape unless it already has it. */
static wbcl_status workspace(wbcl_context *ctx, wbcl_tensor **t, int ndim, const size_t *shape)
{
    if (*t) {
        int same = wbcl_tensor_ndim(*t) == ndim;
        for (int i = 0; same && i < ndim; i++) same = wbcl_tensor_dim(*t, i) == shape[i];
        if (same) return WBCL_SUCCESS;
        wbcl_tensor_destroy(*t);
        *t = NULL;
    }
    return wbcl_tensor_create(ctx, ndim, shape, WBCL_F32, NULL, t);
}

static wbcl_status upload(wbcl_context *ctx, const char *op, const char *what, const float *data, int ndim,
                          const size_t *shape, wbcl_tensor **out)
{
    if (!data) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: '%s' is NULL", op, what);
    return wbcl_tensor_create(ctx, ndim, shape, WBCL_F32, data, out);
}

/* ======================================================================================== */
/* softmax MHA                                                                               */
/* ======================================================================================== */
struct wbcl_mha {
    wbcl_context *ctx;
    size_t d, heads, p;
    int causal;
    wbcl_tensor *Wqkv, *bqkv, *Wo, *bo; /* bqkv may be NULL */
    wbcl_tensor *qkv, *o;               /* workspace (B, N, 3d), (B, N, d) */
};

void wbcl_mha_destroy(wbcl_mha *m)
{
    if (!m) return;
    wbcl_tensor_destroy(m->Wqkv);
    wbcl_tensor_destroy(m->bqkv);
    wbcl_tensor_destroy(m->Wo);
    wbcl_tensor_destroy(m->bo);
    wbcl_tensor_destroy(m->qkv);
    wbcl_tensor_destroy(m->o);
    free(m);
}

static wbcl_status mha_check_config(wbcl_context *ctx, const char *op, size_t dim, size_t heads)
{
    if (dim == 0 || heads == 0)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: dim (%zu) and heads (%zu) must be positive", op, dim, heads);
    if (dim % heads)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: heads = %zu does not divide dim = %zu", op, heads, dim);
    if (dim > SIZE_MAX / 3 / dim)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: dim = %zu too large", op, dim);
    return WBCL_SUCCESS;
}

static wbcl_status mha_new(wbcl_context *ctx, size_t dim, size_t heads, int causal, wbcl_mha **out)
{
    wbcl_mha *m = calloc(1, sizeof *m);
    if (!m) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "out of host memory");
    m->ctx = ctx;
    m->d = dim;
    m->heads = heads;
    m->p = dim / heads;
    m->causal = causal != 0;
    *out = m;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_mha_create(wbcl_context *ctx, size_t dim, size_t heads, int causal, const float *qkv_weight,
                            const float *qkv_bias, const float *proj_weight, const float *proj_bias,
                            wbcl_mha **out)
{
    static const char *op = "wbcl_mha_create";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    *out = NULL;
    wbcl_status st = mha_check_config(ctx, op, dim, heads);
    if (st) return st;
    if (!qkv_weight || !proj_weight || !proj_bias)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: '%s' is NULL", op,
                          !qkv_weight ? "qkv_weight" : !proj_weight ? "proj_weight" : "proj_bias");
    wbcl_mha *m = NULL;
    if ((st = mha_new(ctx, dim, heads, causal, &m))) return st;
    size_t sw[2] = {3 * dim, dim}, sb[1] = {3 * dim}, so[2] = {dim, dim}, sbo[1] = {dim};
    st = upload(ctx, op, "qkv_weight", qkv_weight, 2, sw, &m->Wqkv);
    if (!st && qkv_bias) st = upload(ctx, op, "qkv_bias", qkv_bias, 1, sb, &m->bqkv);
    if (!st) st = upload(ctx, op, "proj_weight", proj_weight, 2, so, &m->Wo);
    if (!st) st = upload(ctx, op, "proj_bias", proj_bias, 1, sbo, &m->bo);
    if (st) {
        wbcl_mha_destroy(m);
        return st;
    }
    wbcl__tensor_constant(m->Wqkv); /* the packed GEMM may keep their panels (host/core/packed.c) */
    wbcl__tensor_constant(m->Wo);
    *out = m;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_mha_load(wbcl_context *ctx, const wbcl_safetensors *stf, const char *file, const char *prefix,
                          size_t dim, size_t heads, int causal, wbcl_mha **out)
{
    static const char *op = "wbcl_mha_load";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out || !stf) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL argument", op);
    *out = NULL;
    wbcl_status st = mha_check_config(ctx, op, dim, heads);
    if (st) return st;
    wbcl_mha *m = NULL;
    if ((st = mha_new(ctx, dim, heads, causal, &m))) return st;
    size_t sw[2] = {3 * dim, dim}, sb[1] = {3 * dim}, so[2] = {dim, dim}, sbo[1] = {dim};
    st = wbcl_weight_load(ctx, stf, file, prefix, "qkv.weight", 2, sw, 1, &m->Wqkv);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "qkv.bias", 1, sb, 0, &m->bqkv);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "proj.weight", 2, so, 1, &m->Wo);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "proj.bias", 1, sbo, 1, &m->bo);
    if (st) {
        wbcl_mha_destroy(m);
        return st;
    }
    wbcl__tensor_constant(m->Wqkv); /* the packed GEMM may keep their panels (host/core/packed.c) */
    wbcl__tensor_constant(m->Wo);
    *out = m;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_mha_forward(wbcl_context *ctx, wbcl_mha *m, const wbcl_tensor *x, wbcl_tensor *y)
{
    static const char *op = "wbcl_mha_forward";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!m) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: module is NULL", op);
    if (m->ctx != ctx) return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: the module belongs to another context", op);
    size_t B = 0, N = 0;
    wbcl_status st = check_xy(ctx, op, x, y, m->d, &B, &N);
    if (st) return st;
    const size_t d = m->d, p = m->p, K = m->heads;
    size_t s3[3] = {B, N, 3 * d}, s1[3] = {B, N, d};
    if ((st = workspace(ctx, &m->qkv, 3, s3))) return st;
    if ((st = workspace(ctx, &m->o, 3, s1))) return st;
    if ((st = linear(ctx, x, B * N, d, m->Wqkv, 3 * d, m->bqkv, m->qkv))) return st;
    wbcl_attention_desc a;
    memset(&a, 0, sizeof a);
    a.batch = B;
    a.heads = K;
    a.n_q = a.n_k = N;
    a.p = p;
    a.scale = (float)(1.0 / sqrt((double)p));
    a.causal = m->causal;
    a.off_q = 0;
    a.off_k = d;
    a.off_v = 2 * d;
    a.sb_q = a.sb_k = a.sb_v = N * 3 * d;
    a.sh_q = a.sh_k = a.sh_v = p;
    a.sn_q = a.sn_k = a.sn_v = 3 * d;
    a.off_o = 0;
    a.sb_o = N * d;
    a.sh_o = p;
    a.sn_o = d;
    if ((st = wbcl_attention_softmax_strided(ctx, &a, m->qkv, m->qkv, m->qkv, m->o))) return st;
    return linear(ctx, m->o, B * N, d, m->Wo, d, m->bo, y);
}

size_t wbcl_mha_dim(const wbcl_mha *m) { return m ? m->d : 0; }
size_t wbcl_mha_heads(const wbcl_mha *m) { return m ? m->heads : 0; }
int wbcl_mha_causal(const wbcl_mha *m) { return m ? m->causal : 0; }

/* ======================================================================================== */
/* MSSA                                                                                      */
/* ======================================================================================== */
struct wbcl_mssa {
    wbcl_context *ctx;
    size_t d, heads, p, inner;
    int causal;
    wbcl_tensor *U, *Wo, *bo; /* Wo, bo NULL: identity output */
    wbcl_tensor *w, *o;       /* workspace (B, N, inner) each */
};

void wbcl_mssa_destroy(wbcl_mssa *m)
{
    if (!m) return;
    wbcl_tensor_destroy(m->U);
    wbcl_tensor_destroy(m->Wo);
    wbcl_tensor_destroy(m->bo);
    wbcl_tensor_destroy(m->w);
    wbcl_tensor_destroy(m->o);
    free(m);
}

static wbcl_status mssa_check_config(wbcl_context *ctx, const char *op, size_t dim, size_t heads, size_t dim_head)
{
    if (dim == 0 || heads == 0 || dim_head == 0)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: dim (%zu), heads (%zu) and dim_head (%zu) must be positive", op,
                          dim, heads, dim_head);
    size_t inner;
    if (!wbcl__mul_ok(heads, dim_head, &inner) || inner > SIZE_MAX / 4 / (dim > inner ? dim : inner))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: heads * dim_head (%zu x %zu) too large", op, heads, dim_head);
    return WBCL_SUCCESS;
}

static wbcl_status mssa_new(wbcl_context *ctx, size_t dim, size_t heads, size_t dim_head, int causal,
                            wbcl_mssa **out)
{
    wbcl_mssa *m = calloc(1, sizeof *m);
    if (!m) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "out of host memory");
    m->ctx = ctx;
    m->d = dim;
    m->heads = heads;
    m->p = dim_head;
    m->inner = heads * dim_head;
    m->causal = causal != 0;
    *out = m;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_mssa_create(wbcl_context *ctx, size_t dim, size_t heads, size_t dim_head, int causal,
                             const float *qkv_weight, const float *out_weight, const float *out_bias,
                             wbcl_mssa **out)
{
    static const char *op = "wbcl_mssa_create";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    *out = NULL;
    wbcl_status st = mssa_check_config(ctx, op, dim, heads, dim_head);
    if (st) return st;
    const int identity_ok = heads == 1 && dim_head == dim;
    if (!qkv_weight) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'qkv_weight' is NULL", op);
    if ((!out_weight) != (!out_bias) || (!out_weight && !identity_ok))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                          "%s: '%s' is NULL (the output projection may be omitted, both weight and bias, only when "
                          "heads == 1 and dim_head == dim)",
                          op, !out_weight ? "out_weight" : "out_bias");
    wbcl_mssa *m = NULL;
    if ((st = mssa_new(ctx, dim, heads, dim_head, causal, &m))) return st;
    size_t su[2] = {m->inner, dim}, so[2] = {dim, m->inner}, sb[1] = {dim};
    st = upload(ctx, op, "qkv_weight", qkv_weight, 2, su, &m->U);
    if (!st && out_weight) st = upload(ctx, op, "out_weight", out_weight, 2, so, &m->Wo);
    if (!st && out_bias) st = upload(ctx, op, "out_bias", out_bias, 1, sb, &m->bo);
    if (st) {
        wbcl_mssa_destroy(m);
        return st;
    }
    wbcl__tensor_constant(m->U); /* the packed GEMM may keep their panels (host/core/packed.c) */
    wbcl__tensor_constant(m->Wo);
    *out = m;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_mssa_load(wbcl_context *ctx, const wbcl_safetensors *stf, const char *file, const char *prefix,
                           size_t dim, size_t heads, size_t dim_head, int causal, wbcl_mssa **out)
{
    static const char *op = "wbcl_mssa_load";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out || !stf) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL argument", op);
    *out = NULL;
    wbcl_status st = mssa_check_config(ctx, op, dim, heads, dim_head);
    if (st) return st;
    wbcl_mssa *m = NULL;
    if ((st = mssa_new(ctx, dim, heads, dim_head, causal, &m))) return st;
    /* CRATE: project_out = not (heads == 1 and dim_head == dim); then to_out is nn.Identity */
    const int identity_ok = heads == 1 && dim_head == dim;
    size_t su[2] = {m->inner, dim}, so[2] = {dim, m->inner}, sb[1] = {dim};
    st = wbcl_weight_load(ctx, stf, file, prefix, "qkv.weight", 2, su, 1, &m->U);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "to_out.0.weight", 2, so, !identity_ok, &m->Wo);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "to_out.0.bias", 1, sb, !identity_ok || m->Wo, &m->bo);
    if (!st && !m->Wo && m->bo) {
        char key[512];
        snprintf(key, sizeof key, "%sto_out.0.weight", prefix ? prefix : "");
        st = wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: missing tensor '%s' (the file has the bias)",
                        file ? file : "weights", key);
    }
    if (st) {
        wbcl_mssa_destroy(m);
        return st;
    }
    wbcl__tensor_constant(m->U); /* the packed GEMM may keep their panels (host/core/packed.c) */
    wbcl__tensor_constant(m->Wo);
    *out = m;
    return WBCL_SUCCESS;
}

/* the attention descriptor for w and o in token layout (B, rows, inner) with batch stride sb */
static void mssa_desc(const wbcl_mssa *m, size_t B, size_t nq, size_t nk, size_t sb_w, size_t off_q, size_t sb_o,
                      int causal, wbcl_attention_desc *a)
{
    memset(a, 0, sizeof *a);
    a->batch = B;
    a->heads = m->heads;
    a->n_q = nq;
    a->n_k = nk;
    a->p = m->p;
    a->scale = (float)(1.0 / sqrt((double)m->p));
    a->causal = causal;
    a->off_q = off_q;
    a->sb_q = a->sb_k = a->sb_v = sb_w;
    a->sh_q = a->sh_k = a->sh_v = m->p;
    a->sn_q = a->sn_k = a->sn_v = m->inner;
    a->sb_o = sb_o;
    a->sh_o = m->p;
    a->sn_o = m->inner;
}

wbcl_status wbcl_mssa_forward(wbcl_context *ctx, wbcl_mssa *m, const wbcl_tensor *x, wbcl_tensor *y)
{
    static const char *op = "wbcl_mssa_forward";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!m) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: module is NULL", op);
    if (m->ctx != ctx) return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: the module belongs to another context", op);
    size_t B = 0, N = 0;
    wbcl_status st = check_xy(ctx, op, x, y, m->d, &B, &N);
    if (st) return st;
    size_t sw[3] = {B, N, m->inner};
    if ((st = workspace(ctx, &m->w, 3, sw))) return st;
    if (m->Wo && (st = workspace(ctx, &m->o, 3, sw))) return st;
    if ((st = linear(ctx, x, B * N, m->d, m->U, m->inner, NULL, m->w))) return st;
    wbcl_attention_desc a;
    mssa_desc(m, B, N, N, N * m->inner, 0, N * m->inner, m->causal, &a);
    /* identity output (heads == 1, dim_head == d): attention writes y directly */
    wbcl_tensor *o = m->Wo ? m->o : y;
    if ((st = wbcl_attention_softmax_strided(ctx, &a, m->w, m->w, m->w, o))) return st;
    if (!m->Wo) return WBCL_SUCCESS;
    return linear(ctx, m->o, B * N, m->inner, m->Wo, m->d, m->bo, y);
}

size_t wbcl_mssa_dim(const wbcl_mssa *m) { return m ? m->d : 0; }
size_t wbcl_mssa_heads(const wbcl_mssa *m) { return m ? m->heads : 0; }
size_t wbcl_mssa_dim_head(const wbcl_mssa *m) { return m ? m->p : 0; }
int wbcl_mssa_causal(const wbcl_mssa *m) { return m ? m->causal : 0; }

/* ======================================================================================== */
/* MSSA decode cache                                                                         */
/* ======================================================================================== */
struct wbcl_mssa_cache {
    wbcl_context *ctx;
    const wbcl_mssa *m;
    size_t B, len, cap;
    wbcl_tensor *w;  /* (B, cap, inner): w_s = U x_s of the tokens so far */
    wbcl_tensor *o;  /* (B, 1, inner) step workspace (absent for identity output) */
};

#define CACHE_DEFAULT_CAP 64

wbcl_status wbcl_mssa_cache_create(wbcl_context *ctx, const wbcl_mssa *m, size_t batch, size_t capacity_hint,
                                   wbcl_mssa_cache **out)
{
    static const char *op = "wbcl_mssa_cache_create";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out || !m) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL argument", op);
    *out = NULL;
    if (m->ctx != ctx) return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: the module belongs to another context", op);
    if (batch == 0) return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: batch must be positive", op);
    size_t cap = capacity_hint ? capacity_hint : CACHE_DEFAULT_CAP;
    wbcl_mssa_cache *c = calloc(1, sizeof *c);
    if (!c) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "out of host memory");
    c->ctx = ctx;
    c->m = m;
    c->B = batch;
    c->cap = cap;
    size_t sw[3] = {batch, cap, m->inner}, so[3] = {batch, 1, m->inner};
    wbcl_status st = wbcl_tensor_create(ctx, 3, sw, WBCL_F32, NULL, &c->w);
    if (!st && m->Wo) st = wbcl_tensor_create(ctx, 3, so, WBCL_F32, NULL, &c->o);
    if (st) {
        wbcl_mssa_cache_destroy(c);
        return st;
    }
    *out = c;
    return WBCL_SUCCESS;
}

void wbcl_mssa_cache_destroy(wbcl_mssa_cache *c)
{
    if (!c) return;
    wbcl_tensor_destroy(c->w);
    wbcl_tensor_destroy(c->o);
    free(c);
}

void wbcl_mssa_cache_reset(wbcl_mssa_cache *c)
{
    if (c) c->len = 0;
}

size_t wbcl_mssa_cache_length(const wbcl_mssa_cache *c) { return c ? c->len : 0; }
size_t wbcl_mssa_cache_capacity(const wbcl_mssa_cache *c) { return c ? c->cap : 0; }

/* Doubles the capacity, copying the len tokens of each sequence. */
static wbcl_status cache_grow(wbcl_context *ctx, wbcl_mssa_cache *c)
{
    static const char *op = "wbcl_mssa_decode_step";
    size_t cap = c->cap * 2, row = c->m->inner * sizeof(float);
    if (cap < c->cap || cap > SIZE_MAX / row / c->B)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: the cache cannot grow beyond %zu tokens", op, c->cap);
    size_t sw[3] = {c->B, cap, c->m->inner};
    wbcl_tensor *nw;
    wbcl_status st = wbcl_tensor_create(ctx, 3, sw, WBCL_F32, NULL, &nw);
    if (st) return st;
    if (c->len) {
        /* B rectangles of len rows: (row bytes * len) at b * cap_old * row -> b * cap * row */
        size_t src_org[3] = {0, 0, 0}, dst_org[3] = {0, 0, 0}, region[3] = {c->len * row, c->B, 1};
        cl_int e = clEnqueueCopyBufferRect(ctx->queue, c->w->mem, nw->mem, src_org, dst_org, region, c->cap * row, 0,
                                           cap * row, 0, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            wbcl_tensor_destroy(nw);
            return wbcl__cl_fail(ctx, e, "%s: copying the cache into a buffer of %zu tokens", op, cap);
        }
    }
    wbcl_tensor_destroy(c->w);
    c->w = nw;
    c->cap = cap;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_mssa_decode_step(wbcl_context *ctx, wbcl_mssa_cache *c, const wbcl_tensor *x_t, wbcl_tensor *y_t)
{
    static const char *op = "wbcl_mssa_decode_step";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!c) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: cache is NULL", op);
    if (c->ctx != ctx) return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: the cache belongs to another context", op);
    const wbcl_mssa *m = c->m;
    wbcl_status st = wbcl__check_tensor(ctx, x_t, op, "x_t");
    if (!st) st = wbcl__check_tensor(ctx, y_t, op, "y_t");
    if (st) return st;
    if (x_t == y_t || x_t->mem == y_t->mem)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'y_t' must not be 'x_t' (in place)", op);
    char s[96];
    const int ok = (x_t->ndim == 2 && x_t->shape[0] == c->B && x_t->shape[1] == m->d) ||
                   (x_t->ndim == 3 && x_t->shape[0] == c->B && x_t->shape[1] == 1 && x_t->shape[2] == m->d);
    if (!ok)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'x_t' must be (%zu, %zu) or (%zu, 1, %zu), got %s", op, c->B,
                          m->d, c->B, m->d, wbcl__shape_str(s, sizeof s, x_t->ndim, x_t->shape));
    if ((st = wbcl__check_same_shape(ctx, x_t, y_t, op, "x_t", "y_t"))) return st;
    if (c->len == c->cap && (st = cache_grow(ctx, c))) return st;

    const size_t t = c->len, inner = m->inner;
    /* w_t = U x_t straight into row t of each sequence's cache */
    wbcl_gemm_desc g;
    memset(&g, 0, sizeof g);
    g.ta = WBCL_NO_TRANS;
    g.tb = WBCL_TRANS;
    g.m = 1;
    g.n = inner;
    g.k = m->d;
    g.batch = c->B;
    g.alpha = 1.0f;
    g.lda = m->d;
    g.stride_a = m->d;
    g.ldb = m->d;
    g.stride_b = 0;
    g.off_c = t * inner;
    g.ldc = inner;
    g.stride_c = c->cap * inner;
    if ((st = wbcl_gemm_strided(ctx, &g, x_t, m->U, c->w))) return st;
    /* one query (row t) against keys 0..t */
    wbcl_attention_desc a;
    mssa_desc(m, c->B, 1, t + 1, c->cap * inner, t * inner, inner, 1, &a);
    wbcl_tensor *o = m->Wo ? c->o : y_t;
    if ((st = wbcl_attention_softmax_strided(ctx, &a, c->w, c->w, c->w, o))) return st;
    if (m->Wo) {
        if ((st = linear(ctx, c->o, c->B, inner, m->Wo, m->d, m->bo, y_t))) return st;
    }
    /* the token counts only once the whole step succeeded: a failed step leaves
     * the cache's length as it was (row t is rewritten by the next attempt) */
    c->len = t + 1;
    return WBCL_SUCCESS;
}

wbcl_status wbcl__mssa_store_f16(wbcl_context *ctx, wbcl_mssa *m)
{
    /* U and Wo are GEMM operands only (forward and the decode step) */
    wbcl_status st = wbcl__tensor_store_f16(ctx, &m->U);
    return st ? st : wbcl__tensor_store_f16(ctx, &m->Wo);
}
