/* XCA, XCiT's cross-covariance attention (include/wbcl/xca.h, SPEC 1.6).
 * CPU variant, per head: channel norms of q and k over tokens (TSSA's row-block kernels),
 * G = q^T k (p x p, a GEMM with k = N), the scaled softmax in place
 * (cl/xca.cl), o = v A^T (a GEMM). GPU variant: three GPU-shaped kernels
 * (xca_run_gpu below). q, k, v and o are strided views, so the
 * layer reads q, k, v straight out of the (B, N, 3d) projection (no split
 * copies); o is written per head and merged (one copy of N*d). */
#include "attn_stats.h"
#include "buffers.h"
#include "checks.h"
#include "launch.h"
#include "model/model_internal.h"
#include "views.h"

#include <stdlib.h>

#include "wbcl/gemm.h"
#include "wbcl/heads.h"
#include "wbcl/xca.h"
#include "wbcl/weights.h"

#define TRY(x)                     \
    do {                           \
        if ((st = (x))) goto done; \
    } while (0)

/* A view into a tensor (for the GEMM calls, which address tensors). */
typedef struct xview {
    const wbcl_tensor *t;
    wbcl__hview v;
} xview;

/* Batched strided GEMMs over the (b, h) heads: one call with batch B*K when
 * the batch stride is K head strides for all three operands, else one call per b. */
static wbcl_status gemm_heads(wbcl_context *ctx, wbcl_gemm_desc d, const wbcl__hdims *dm, const wbcl_tensor *A,
                              size_t sbA, const wbcl_tensor *Bm, size_t sbB, wbcl_tensor *C, size_t sbC)
{
    if (sbA == dm->K * d.stride_a && sbB == dm->K * d.stride_b && sbC == dm->K * d.stride_c) {
        d.batch = dm->B * dm->K;
        return wbcl_gemm_strided(ctx, &d, A, Bm, C);
    }
    d.batch = dm->K;
    size_t oa = d.off_a, ob = d.off_b, oc = d.off_c;
    for (size_t b = 0; b < dm->B; b++) {
        d.off_a = oa + b * sbA;
        d.off_b = ob + b * sbB;
        d.off_c = oc + b * sbC;
        wbcl_status st = wbcl_gemm_strided(ctx, &d, A, Bm, C);
        if (st) return st;
    }
    return WBCL_SUCCESS;
}

/* ---- GPU-shaped path (cl/xca.cl, "GPU-shaped XCA") ------------------------------------------
 * wbcl_xca_g_gram over (b, h, token slice, channel tile pair) work-groups, wbcl_xca_g_softmax per
 * row of A, wbcl_xca_g_apply over (b, h, 64-token tile, channel tile): three launches, q, k and v
 * each read once. N is cut into S equal slices (whole tiles of WBCL_XCA_TT tokens) so that there
 * are about 8 work-groups of the Gram kernel per compute unit; the S partial Grams and squared
 * norms are summed by the softmax kernel. Work buffers: the context's grow-only scratch slots 2
 * (partials) and 3 (A); XCA calls no other op while it uses them. */
#define XCA_T 64  /* WBCL_XCA_T in cl/xca.cl  */
#define XCA_TT 32 /* WBCL_XCA_TT in cl/xca.cl */

/* Tokens per slice L (a multiple of XCA_TT) and slice count S for BK heads of nbc^2 tiles. */
static void xca_slices(const wbcl_context *ctx, size_t BK, size_t nbc, size_t N, size_t *L, size_t *S)
{
    const size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
    const size_t per = BK * nbc * nbc, want = 8 * cu;
    size_t s = per >= want ? 1 : (want + per - 1) / per;
    size_t l = (N + s - 1) / s;
    l = (l + XCA_TT - 1) / XCA_TT * XCA_TT;
    *L = l;
    *S = (N + l - 1) / l;
}

static wbcl_status xca_run_gpu(wbcl_context *ctx, const xview *q, const xview *k, const xview *v, const xview *o,
                               const wbcl__hdims *dm, cl_mem temperature)
{
    static const char *op = "wbcl_xca";
    const size_t B = dm->B, K = dm->K, N = dm->N, p = dm->p, BK = B * K, nbc = (p + XCA_T - 1) / XCA_T;
    size_t L, S;
    xca_slices(ctx, BK, nbc, N, &L, &S);
    size_t ps, np, na, gg, ga, gs;
    /* sizes: partials BK*S*(p^2 + 2p), A BK*p^2 floats; groups BK*S*nbc^2, BK*ceil(N/64)*nbc, BK*p */
    if (!wbcl__mul_ok(p, p + 2, &ps) || !wbcl__mul_ok(ps, BK * S, &np) || !wbcl__mul_ok(np, sizeof(float), &np) ||
        !wbcl__mul_ok(p * p, BK, &na) || !wbcl__mul_ok(na, sizeof(float), &na) ||
        !wbcl__mul_ok(BK * S, nbc * nbc * 256, &gg) || !wbcl__mul_ok(BK * ((N + XCA_T - 1) / XCA_T), nbc * 256, &ga) ||
        !wbcl__mul_ok(BK * p, 64, &gs))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: B*K = %zu heads of N = %zu, p = %zu overflow the work sizes", op,
                          BK, N, p);
    cl_mem part, A;
    wbcl_status st;
    if ((st = wbcl__scratch(ctx, 2, np, &part)) || (st = wbcl__scratch(ctx, 3, na, &A))) return st;
    wbcl_kern *kg, *ks, *ka;
    if ((st = wbcl__kernel(ctx, "xca", NULL, "wbcl_xca_g_gram", &kg)) ||
        (st = wbcl__kernel(ctx, "xca", NULL, "wbcl_xca_g_softmax", &ks)) ||
        (st = wbcl__kernel(ctx, "xca", NULL, "wbcl_xca_g_apply", &ka)))
        return st;
    cl_uint uK = (cl_uint)K, up = (cl_uint)p, uN = (cl_uint)N, uL = (cl_uint)L, uS = (cl_uint)S;
    if ((st = wbcl__set_view(ctx, kg, 0, &q->v)) || (st = wbcl__set_view(ctx, kg, 5, &k->v))) return st;
    WBCL_ARG(ctx, kg, 10, uK);
    WBCL_ARG(ctx, kg, 11, up);
    WBCL_ARG(ctx, kg, 12, uN);
    WBCL_ARG(ctx, kg, 13, uL);
    WBCL_ARG(ctx, kg, 14, uS);
    WBCL_ARG(ctx, kg, 15, part);
    const size_t l256[1] = {256}, l64[1] = {64}, g1[1] = {gg}, g2[1] = {gs}, g3[1] = {ga};
    if ((st = wbcl__launch(ctx, kg, 1, g1, l256))) return st;
    WBCL_ARG(ctx, ks, 0, part);
    WBCL_ARG(ctx, ks, 1, uK);
    WBCL_ARG(ctx, ks, 2, up);
    WBCL_ARG(ctx, ks, 3, uS);
    WBCL_ARG(ctx, ks, 4, temperature);
    WBCL_ARG(ctx, ks, 5, A);
    if ((st = wbcl__launch(ctx, ks, 1, g2, l64))) return st;
    if ((st = wbcl__set_view(ctx, ka, 0, &v->v)) || (st = wbcl__set_view(ctx, ka, 5, &o->v))) return st;
    WBCL_ARG(ctx, ka, 10, uK);
    WBCL_ARG(ctx, ka, 11, up);
    WBCL_ARG(ctx, ka, 12, uN);
    WBCL_ARG(ctx, ka, 13, A);
    return wbcl__launch(ctx, ka, 1, g3, l256);
}

static wbcl_status xca_run(wbcl_context *ctx, const xview *q, const xview *k, const xview *v, const xview *o,
                           const wbcl__hdims *dm, cl_mem temperature)
{
    if (ctx->variant == WBCL_VARIANT_GPU) return xca_run_gpu(ctx, q, k, v, o, dm, temperature);
    size_t B = dm->B, K = dm->K, N = dm->N, p = dm->p, KP = K * p, rb, nblk;
    const int al = wbcl__hview_aligned(&q->v, p) && wbcl__hview_aligned(&k->v, p);
    wbcl__row_blocks(N, &rb, &nblk);
    cl_mem part = NULL, invq = NULL, invk = NULL;
    wbcl_tensor *G = NULL;
    wbcl_status st;
    TRY(wbcl__tmp(ctx, B * nblk * KP, "wbcl_xca: block partials", &part));
    TRY(wbcl__tmp(ctx, B * KP, "wbcl_xca: 1/||q||", &invq));
    TRY(wbcl__tmp(ctx, B * KP, "wbcl_xca: 1/||k||", &invk));
    {
        size_t gs[1] = {B * K * p * p};
        TRY(wbcl_tensor_create(ctx, 1, gs, WBCL_F32, NULL, &G));
    }
    TRY(wbcl__inv_norms(ctx, &q->v, dm, al, part, invq));
    TRY(wbcl__inv_norms(ctx, &k->v, dm, al, part, invk));
    /* G[b,h] = q^T k: q, k stored (N, p) with row stride sn */
    {
        wbcl_gemm_desc d = {0};
        d.ta = WBCL_TRANS;
        d.tb = WBCL_NO_TRANS;
        d.m = p;
        d.n = p;
        d.k = N;
        d.alpha = 1.0f;
        d.beta = 0.0f;
        d.off_a = q->v.off;
        d.lda = q->v.sn;
        d.stride_a = q->v.sh;
        d.off_b = k->v.off;
        d.ldb = k->v.sn;
        d.stride_b = k->v.sh;
        d.off_c = 0;
        d.ldc = p;
        d.stride_c = p * p;
        TRY(gemm_heads(ctx, d, dm, q->t, q->v.sb, k->t, k->v.sb, G, K * p * p));
    }
    {
        wbcl_kern *kk;
        TRY(wbcl__kernel(ctx, "xca", NULL, "wbcl_xca_softmax", &kk));
        cl_uint uB = (cl_uint)B, uK = (cl_uint)K, up = (cl_uint)p;
        WBCL_ARG(ctx, kk, 0, G->mem);
        WBCL_ARG(ctx, kk, 1, uB);
        WBCL_ARG(ctx, kk, 2, uK);
        WBCL_ARG(ctx, kk, 3, up);
        WBCL_ARG(ctx, kk, 4, invq);
        WBCL_ARG(ctx, kk, 5, invk);
        WBCL_ARG(ctx, kk, 6, temperature);
        TRY(wbcl__launch_items(ctx, kk, B * K * p));
    }
    /* o = A v in (p, N) terms, i.e. o (N, p) = v (N, p) A^T */
    {
        wbcl_gemm_desc d = {0};
        d.ta = WBCL_NO_TRANS;
        d.tb = WBCL_TRANS;
        d.m = N;
        d.n = p;
        d.k = p;
        d.alpha = 1.0f;
        d.beta = 0.0f;
        d.off_a = v->v.off;
        d.lda = v->v.sn;
        d.stride_a = v->v.sh;
        d.off_b = 0;
        d.ldb = p;
        d.stride_b = p * p;
        d.off_c = o->v.off;
        d.ldc = o->v.sn;
        d.stride_c = o->v.sh;
        TRY(gemm_heads(ctx, d, dm, v->t, v->v.sb, G, K * p * p, (wbcl_tensor *)o->t, o->v.sb));
    }
done:
    wbcl__tmp_release(&part);
    wbcl__tmp_release(&invq);
    wbcl__tmp_release(&invk);
    wbcl_tensor_destroy(G);
    return st;
}

wbcl_status wbcl_xca_heads(wbcl_context *ctx, const wbcl_tensor *q, const wbcl_tensor *k, const wbcl_tensor *v,
                           const wbcl_tensor *temperature, wbcl_tensor *o)
{
    static const char *op = "wbcl_xca_heads";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl__hdims dm;
    wbcl_status st = wbcl__check_heads(ctx, q, op, "q", &dm);
    if (!st) st = wbcl__check_tensor(ctx, k, op, "k");
    if (!st) st = wbcl__check_tensor(ctx, v, op, "v");
    if (!st) st = wbcl__check_tensor(ctx, o, op, "o");
    if (!st) st = wbcl__check_same_shape(ctx, q, k, op, "q", "k");
    if (!st) st = wbcl__check_same_shape(ctx, q, v, op, "q", "v");
    if (!st) st = wbcl__check_same_shape(ctx, q, o, op, "q", "o");
    if (!st) st = wbcl__check_distinct(ctx, op, o, "o", q, "q");
    if (!st) st = wbcl__check_distinct(ctx, op, o, "o", k, "k");
    if (!st) st = wbcl__check_distinct(ctx, op, o, "o", v, "v");
    if (!st) st = wbcl__check_numel(ctx, temperature, op, "temperature", dm.K, "(K), (K, 1) or (K, 1, 1)");
    if (st) return st;
    size_t sizes[3] = {dm.B * dm.K * dm.p, dm.N, dm.K * dm.p};
    if ((st = wbcl__check_u32(ctx, op, 3, sizes))) return st;
    xview vq = {q, wbcl__hview_heads(q)}, vk = {k, wbcl__hview_heads(k)}, vv = {v, wbcl__hview_heads(v)},
          vo = {o, wbcl__hview_heads(o)};
    return xca_run(ctx, &vq, &vk, &vv, &vo, &dm, temperature->mem);
}

/* ---- the layer ----------------------------------------------------------------------------- */

struct wbcl_xca_layer {
    wbcl_context *ctx;
    size_t d, K;
    wbcl_tensor *Wqkv, *bqkv, *temp, *Wp, *bp;
    wbcl_tensor *qkv, *oh, *o; /* work buffers: projection, o per head, o merged */
};

void wbcl_xca_layer_destroy(wbcl_xca_layer *L)
{
    if (!L) return;
    wbcl_tensor_destroy(L->Wqkv);
    wbcl_tensor_destroy(L->bqkv);
    wbcl_tensor_destroy(L->temp);
    wbcl_tensor_destroy(L->Wp);
    wbcl_tensor_destroy(L->bp);
    wbcl_tensor_destroy(L->qkv);
    wbcl_tensor_destroy(L->oh);
    wbcl_tensor_destroy(L->o);
    free(L);
}

static wbcl_status layer_args(wbcl_context *ctx, const char *op, size_t d, size_t heads, void *out)
{
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'out' is NULL", op);
    if (d == 0) return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: dimension d must be >= 1", op);
    return wbcl__check_heads_divide(ctx, op, d, heads);
}

wbcl_status wbcl_xca_layer_create(wbcl_context *ctx, size_t d, size_t heads, const float *Wqkv, const float *bqkv,
                                  const float *temperature, const float *Wp, const float *bp, wbcl_xca_layer **out)
{
    static const char *op = "wbcl_xca_layer_create";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = layer_args(ctx, op, d, heads, out);
    if (st) return st;
    *out = NULL;
    if (!Wqkv || !temperature || !Wp)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: Wqkv, temperature and Wp must not be NULL", op);
    wbcl_xca_layer *L = calloc(1, sizeof *L);
    if (!L) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    L->ctx = ctx;
    L->d = d;
    L->K = heads;
    size_t s3[2] = {3 * d, d}, d3 = 3 * d, dd[2] = {d, d}, kt[3] = {heads, 1, 1};
    st = wbcl__from_host(ctx, Wqkv, 2, s3, op, "Wqkv", &L->Wqkv);
    if (!st) st = wbcl__from_host(ctx, bqkv, 1, &d3, op, "bqkv", &L->bqkv);
    if (!st) st = wbcl__from_host(ctx, temperature, 3, kt, op, "temperature", &L->temp);
    if (!st) st = wbcl__from_host(ctx, Wp, 2, dd, op, "Wp", &L->Wp);
    if (!st) st = wbcl__from_host(ctx, bp, 1, &d, op, "bp", &L->bp);
    if (st) {
        wbcl_xca_layer_destroy(L);
        return st;
    }
    wbcl__tensor_constant(L->Wqkv); /* the packed GEMM may keep their panels (host/core/packed.c) */
    wbcl__tensor_constant(L->Wp);
    *out = L;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_xca_layer_load(wbcl_context *ctx, const wbcl_safetensors *stf, const char *file, const char *prefix,
                                size_t d, size_t heads, wbcl_xca_layer **out)
{
    static const char *op = "wbcl_xca_layer_load";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = layer_args(ctx, op, d, heads, out);
    if (st) return st;
    *out = NULL;
    if (!stf) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'st' (the safetensors file) is NULL", op);
    wbcl_xca_layer *L = calloc(1, sizeof *L);
    if (!L) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    L->ctx = ctx;
    L->d = d;
    L->K = heads;
    size_t s3[2] = {3 * d, d}, d3 = 3 * d, dd[2] = {d, d}, kt[3] = {heads, 1, 1};
    st = wbcl_weight_load(ctx, stf, file, prefix, "qkv.weight", 2, s3, 1, &L->Wqkv);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "qkv.bias", 1, &d3, 0, &L->bqkv);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "temperature", 3, kt, 1, &L->temp);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "proj.weight", 2, dd, 1, &L->Wp);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "proj.bias", 1, &d, 1, &L->bp);
    if (st) {
        wbcl_xca_layer_destroy(L);
        return st;
    }
    wbcl__tensor_constant(L->Wqkv); /* the packed GEMM may keep their panels (host/core/packed.c) */
    wbcl__tensor_constant(L->Wp);
    *out = L;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_xca_layer_forward(wbcl_context *ctx, wbcl_xca_layer *L, const wbcl_tensor *x, wbcl_tensor *out)
{
    static const char *op = "wbcl_xca_layer_forward";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!L) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'layer' is NULL", op);
    size_t B, N, D;
    wbcl_status st = wbcl__check_tokens(ctx, x, op, "x", &B, &N, &D);
    if (!st) st = wbcl__check_tensor(ctx, out, op, "out");
    if (st) return st;
    if (L->ctx != ctx) return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: the layer belongs to another context", op);
    if (D != L->d) {
        char s[128];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'x' has shape %s but the layer's dimension is d = %zu", op,
                          wbcl__shape_str(s, sizeof s, x->ndim, x->shape), L->d);
    }
    if ((st = wbcl__check_same_shape(ctx, x, out, op, "x", "out"))) return st;
    if ((st = wbcl__check_distinct(ctx, op, out, "out", x, "x"))) return st;
    size_t p = L->d / L->K, sizes[2] = {B * L->d, N};
    if ((st = wbcl__check_u32(ctx, op, 2, sizes))) return st;
    if ((st = wbcl__work(ctx, &L->qkv, x, 3 * L->d)) || (st = wbcl__work(ctx, &L->o, x, L->d))) return st;
    if ((st = wbcl__linear(ctx, x, L->Wqkv, L->bqkv, L->qkv))) return st;
    /* o per head (B, K, N, p), then merged: the GEMM paths do not write interleaved column
     * blocks of one matrix as batch entries, so o cannot go straight into (B, N, d) */
    size_t sho[4] = {B, L->K, N, p};
    int same = L->oh && L->oh->ndim == 4;
    for (int i = 0; same && i < 4; i++) same = L->oh->shape[i] == sho[i];
    if (!same) {
        wbcl_tensor_destroy(L->oh);
        L->oh = NULL;
        if ((st = wbcl_tensor_create(ctx, 4, sho, WBCL_F32, NULL, &L->oh))) return st;
    }
    wbcl__hdims dm = {B, L->K, N, p};
    xview vq = {L->qkv, wbcl__hview_tokens(L->qkv, L->K, p, 0, 3)}, vk = {L->qkv, wbcl__hview_tokens(L->qkv, L->K, p, 1, 3)},
          vv = {L->qkv, wbcl__hview_tokens(L->qkv, L->K, p, 2, 3)}, vo = {L->oh, wbcl__hview_heads(L->oh)};
    if ((st = xca_run(ctx, &vq, &vk, &vv, &vo, &dm, L->temp->mem))) return st;
    if ((st = wbcl_merge_heads(ctx, L->oh, L->o))) return st;
    return wbcl__linear(ctx, L->o, L->Wp, L->bp, out);
}
