/* Vector ReduNet (include/wbcl/redunet.h, SPEC.md §4.1): the working state and the steps of a
 * layer that construction (Algorithm 5.1), application (Algorithm 5.2) and the objective share, in
 * two implementations. Kernels: cl/redunet.cl (family "redunet"); the family's other files:
 * host/ops/redunet_internal.h.
 *
 * FUSED (d <= 16, K <= 32), options -DRD_D=d -DRD_K=K -DRD_VW=vw. The working
 * features are kept transposed, (d, m rounded up to vw), and each work-item
 * handles vw rows as floatN vectors (vw = 16 on CPUs: PoCL does not vectorize
 * these kernels across work-items by itself; vw = 1 on GPUs). Per layer three
 * launches and no host round trip:
 *   rdn_apply     E z, C_j z, norms, softmax, update, normalize, yhat;
 *   rdn_gram      one work-item per (row block, group): compensated partial
 *                 Gram matrices of the layer's output for the 2K groups
 *                 (true classes: the next construction; estimated: objective);
 *   rdn_finalize  one work-item per d x d matrix: sums the partials in a fixed
 *                 order, Cholesky, log-determinants (this layer's objective)
 *                 and inverses (E, C_j of the next layer, written straight into
 *                 the next layer's buffer).
 * Log-determinants and group sizes of every layer stay on the device and are
 * read back every `report_every` layers (default 64).
 *
 * GEMM (any d), options -DRD_D=0 -DRD_K=K -DRD_LS=lanes. Working features stay
 * in the caller's row order, so apply replays fit bit for bit. Per layer: the
 * rows are gathered class by class (rdn_gather), G_j = Z_j^T Z_j is one batched
 * GEMM (one GEMM per class when the sizes differ), rdn_prep forms the K+1
 * matrices I + a Z^T Z (= I + a sum_j G_j) and I + a_j G_j, wbcl_spd_inverse
 * inverts them in one batch and rdn_scale writes the layer buffer; the
 * application is one batched GEMM P_g = Z W_g^T (g = 0..K) and rdn_update (row
 * norms, softmax, update, normalization). The objective needs yhat on the host
 * (one read-back per layer) to gather the estimated groups; when yhat equals
 * the labels, the next layer's matrices are the objective's and one
 * wbcl_logdet_spd on them serves both. (A Woodbury construction from the
 * m_j x m_j matrices I + a_j Z_j Z_j^T was tried for m_j << d: several times
 * cheaper, but C_j = a_j I - low rank cancels in the class subspace, an error
 * ~ (1 + d/eps2) * 2^-24 * a_j there, and replaying the stored model drifted.)
 *
 * A layer's parameters live in one buffer of (K+1) d^2 + K floats: E, C_0..C_{K-1},
 * gamma. */
#include "redunet_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffers.h"
#include "wbcl/gemm.h"
#include "wbcl/linalg.h"

#define FAMILY "redunet"

/* ---- small helpers ----------------------------------------------------------------------------- */

static size_t ceil_div(size_t a, size_t b) { return a / b + (a % b != 0); }

static size_t update_lanes(const wbcl_context *ctx)
{
    if (ctx->variant != WBCL_VARIANT_GPU) return 1;
    size_t ls = 64;
    while (ls > 1 && ls > ctx->info.max_work_group_size) ls /= 2;
    return ls;
}

/* Rows per work-item of the fused kernels: float16 vectors on CPUs, one row on GPUs. */
static size_t fused_vw(const wbcl_context *ctx) { return ctx->variant == WBCL_VARIANT_GPU ? 1 : 16; }

static wbcl_status rd_kernel(wbcl_context *ctx, int fused, size_t d, size_t K, const char *name, wbcl_kern **k)
{
    char opt[96];
    if (fused)
        snprintf(opt, sizeof opt, "-DRD_D=%zu -DRD_K=%zu -DRD_VW=%zu", d, K, fused_vw(ctx));
    else
        snprintf(opt, sizeof opt, "-DRD_D=0 -DRD_K=%zu -DRD_LS=%zu", K, update_lanes(ctx));
    return wbcl__kernel(ctx, FAMILY, opt, name, k);
}

static wbcl_status launch1(wbcl_context *ctx, wbcl_kern *k, size_t global, size_t local)
{
    size_t g[1] = {global}, l[1] = {local};
    return wbcl__launch(ctx, k, 1, g, local ? l : NULL);
}

/* Local size of the row and element kernels: one fixed size (64, or the device's maximum),
 * whatever the problem size. PoCL compiles a work-group function per kernel and local size,
 * so a size that followed m would cost a compile for every new m; 64 items per work-group
 * keeps the per-work-group overhead low (kernels bounds-check the rounded-up global size). */
static size_t row_local(const wbcl_context *ctx, size_t rows)
{
    (void)rows;
    size_t l = 64;
    while (l > 1 && l > ctx->info.max_work_group_size) l /= 2;
    return l;
}

static wbcl_status zero_buf(wbcl_context *ctx, cl_mem mem, size_t bytes, const char *what)
{
    const cl_uint zero = 0;
    cl_int e = clEnqueueFillBuffer(ctx->queue, mem, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "clearing %s", what);
}

/* ---- working state shared by fit, apply and objective ------------------------------------------- */

void wbcl__redunet_work_free(rd_work *w)
{
    wbcl_tensor_destroy(w->Zw);
    wbcl_tensor *ts[] = {w->Zs, w->Gb, w->A, w->Ainv, w->LD, w->P};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) wbcl_tensor_destroy(ts[i]);
    wbcl__tmp_release(&w->flag);
    wbcl__tmp_release(&w->y);
    wbcl__tmp_release(&w->yhat);
    wbcl__tmp_release(&w->part);
    wbcl__tmp_release(&w->cnt);
    wbcl__tmp_release(&w->ld);
    wbcl__tmp_release(&w->hc);
    wbcl__tmp_release(&w->perm);
    wbcl__tmp_release(&w->n);
    free(w->yh);
    free(w->permh);
    free(w->start);
    free(w->cnth);
    memset(w, 0, sizeof *w);
}

/* Allocates what the chosen implementation needs. hist_layers > 0: fused history buffers. */
wbcl_status wbcl__redunet_work_init(rd_work *w, wbcl_context *ctx, const char *op, size_t m, size_t d, size_t K,
                                    int fused, int need_gram, size_t hist_layers)
{
    memset(w, 0, sizeof *w);
    w->ctx = ctx;
    w->op = op;
    w->m = m;
    w->mt = m;
    w->d = d;
    w->K = K;
    w->fused = fused;
    w->vw = fused ? fused_vw(ctx) : 1;
    w->mp = wbcl__round_up(m, w->vw);
    const size_t mp = w->mp;
    wbcl_status st;
    size_t shape[3] = {m, d, 0};
    if (fused) {
        shape[0] = d;
        shape[1] = mp;
    }
    if ((st = wbcl_tensor_create(ctx, 2, shape, WBCL_F32, NULL, &w->Zw))) return st;
    if ((st = wbcl__buffer(ctx, sizeof(cl_int), "ReduNet flag", &w->flag))) return st;
    if ((st = zero_buf(ctx, w->flag, sizeof(cl_int), "ReduNet flag"))) return st;
    if ((st = wbcl__buffer(ctx, mp * sizeof(cl_int), "ReduNet labels", &w->y))) return st;
    if ((st = wbcl__buffer(ctx, mp * sizeof(cl_int), "ReduNet estimated labels", &w->yhat))) return st;
    if (fused) {
        if (need_gram) {
            /* fixed row blocks (multiples of vw): at most 256 partials per group, >= 64 rows each */
            w->rb = wbcl__round_up(ceil_div(mp, 256), w->vw);
            if (w->rb < 64) w->rb = 64;
            w->nblk = ceil_div(mp, w->rb);
            const size_t T = d * (d + 1) / 2;
            if ((st = wbcl__buffer(ctx, w->nblk * 2 * K * T * sizeof(float), "ReduNet Gram partials", &w->part)))
                return st;
            if ((st = wbcl__buffer(ctx, w->nblk * 2 * K * sizeof(cl_uint), "ReduNet group sizes", &w->cnt)))
                return st;
        }
        if (hist_layers) {
            if ((st = wbcl__buffer(ctx, hist_layers * (K + 1) * sizeof(float), "ReduNet objective", &w->ld)))
                return st;
            if ((st = wbcl__buffer(ctx, hist_layers * (K + 1) * sizeof(cl_int), "ReduNet objective", &w->hc)))
                return st;
            if ((st = zero_buf(ctx, w->ld, hist_layers * (K + 1) * sizeof(float), "ReduNet objective"))) return st;
            if ((st = zero_buf(ctx, w->hc, hist_layers * (K + 1) * sizeof(cl_int), "ReduNet objective"))) return st;
        }
        return WBCL_SUCCESS;
    }
    size_t pshape[3] = {K + 1, m, d};
    if ((st = wbcl_tensor_create(ctx, 3, pshape, WBCL_F32, NULL, &w->P))) return st;
    w->yh = malloc(m * sizeof *w->yh);
    if (!w->yh) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    if (need_gram) {
        size_t zshape[2] = {m, d}, gshape[3] = {K, d, d}, ashape[3] = {K + 1, d, d}, lshape[1] = {K + 1};
        if ((st = wbcl_tensor_create(ctx, 2, zshape, WBCL_F32, NULL, &w->Zs))) return st;
        if ((st = wbcl_tensor_create(ctx, 3, gshape, WBCL_F32, NULL, &w->Gb))) return st;
        if ((st = wbcl_tensor_create(ctx, 3, ashape, WBCL_F32, NULL, &w->A))) return st;
        if ((st = wbcl_tensor_create(ctx, 3, ashape, WBCL_F32, NULL, &w->Ainv))) return st;
        if ((st = wbcl_tensor_create(ctx, 1, lshape, WBCL_F32, NULL, &w->LD))) return st;
        if ((st = wbcl__buffer(ctx, m * sizeof(cl_int), "ReduNet gather indices", &w->perm))) return st;
        if ((st = wbcl__buffer(ctx, K * sizeof(cl_uint), "ReduNet group sizes", &w->n))) return st;
        w->permh = malloc(m * sizeof *w->permh);
        w->start = malloc((K + 1) * sizeof *w->start);
        w->cnth = malloc(K * sizeof *w->cnth);
        if (!w->permh || !w->start || !w->cnth)
            return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    }
    return WBCL_SUCCESS;
}

/* Zw = normalize(X) (or X as it is); WBCL_ERROR_NUMERIC if X has a non-finite
 * entry (one read-back). */
wbcl_status wbcl__redunet_enter(rd_work *w, const wbcl_tensor *X, const char *xname, int normalize)
{
    wbcl_context *ctx = w->ctx;
    wbcl_kern *k;
    wbcl_status st = rd_kernel(ctx, w->fused, w->d, w->K, w->fused ? "rdn_enter_t" : "rdn_normalize", &k);
    if (st) return st;
    cl_uint m = (cl_uint)w->m, d_or_mp = (cl_uint)(w->fused ? w->mp : w->d);
    cl_int nrm = normalize;
    WBCL_ARG(ctx, k, 0, X->mem);
    WBCL_ARG(ctx, k, 1, w->Zw->mem);
    WBCL_ARG(ctx, k, 2, m);
    WBCL_ARG(ctx, k, 3, d_or_mp);
    WBCL_ARG(ctx, k, 4, w->flag);
    WBCL_ARG(ctx, k, 5, nrm);
    if ((st = launch1(ctx, k, w->mp, row_local(ctx, w->mp)))) return st;
    cl_int flag = 0;
    if ((st = wbcl__read_buf(ctx, w->flag, 0, sizeof flag, &flag, "the ReduNet input check"))) return st;
    if (flag) return wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: %s has a non-finite entry (NaN or Inf)", w->op, xname);
    return WBCL_SUCCESS;
}

/* The working features into Z (fused: transposed back; Z may be NULL: nothing). */
wbcl_status wbcl__redunet_copy_out(rd_work *w, wbcl_tensor *Z)
{
    if (!Z) return WBCL_SUCCESS;
    if (w->fused) {
        wbcl_context *ctx = w->ctx;
        wbcl_kern *k;
        wbcl_status st = rd_kernel(ctx, 1, w->d, w->K, "rdn_leave_t", &k);
        if (st) return st;
        cl_uint m = (cl_uint)w->m, mp = (cl_uint)w->mp;
        WBCL_ARG(ctx, k, 0, w->Zw->mem);
        WBCL_ARG(ctx, k, 1, Z->mem);
        WBCL_ARG(ctx, k, 2, m);
        WBCL_ARG(ctx, k, 3, mp);
        return launch1(ctx, k, w->m, row_local(ctx, w->m));
    }
    cl_int e = clEnqueueCopyBuffer(w->ctx->queue, w->Zw->mem, Z->mem, 0, 0, w->m * w->d * sizeof(float), 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(w->ctx, e, "%s: copying the features to Z", w->op);
}

/* ---- fused implementation ------------------------------------------------------------------------ */

/* labels (m) into buf (mp ints), padding rows labelled -1. */
wbcl_status wbcl__redunet_upload_labels(rd_work *w, cl_mem buf, const int *labels)
{
    if (w->mp == w->m) return wbcl__write_buf(w->ctx, buf, w->m * sizeof(cl_int), labels, "the ReduNet labels");
    cl_int *p = malloc(w->mp * sizeof *p);
    if (!p) return wbcl__fail(w->ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", w->op);
    memcpy(p, labels, w->m * sizeof *p);
    for (size_t i = w->m; i < w->mp; i++) p[i] = -1;
    wbcl_status st = wbcl__write_buf(w->ctx, buf, w->mp * sizeof *p, p, "the ReduNet labels");
    free(p);
    return st;
}

wbcl_status wbcl__redunet_fused_apply(rd_work *w, const wbcl_tensor *W, float eta, float lambda)
{
    wbcl_context *ctx = w->ctx;
    wbcl_kern *k;
    wbcl_status st = rd_kernel(ctx, 1, w->d, w->K, "rdn_apply", &k);
    if (st) return st;
    cl_uint m = (cl_uint)w->m, mp = (cl_uint)w->mp;
    WBCL_ARG(ctx, k, 0, w->Zw->mem);
    WBCL_ARG(ctx, k, 1, w->yhat);
    WBCL_ARG(ctx, k, 2, W->mem);
    WBCL_ARG(ctx, k, 3, eta);
    WBCL_ARG(ctx, k, 4, lambda);
    WBCL_ARG(ctx, k, 5, m);
    WBCL_ARG(ctx, k, 6, mp);
    const size_t items = w->mp / w->vw;
    return launch1(ctx, k, items, row_local(ctx, items));
}

/* Partial Grams of groups [gfirst, gfirst + ng) (0..K-1 true, K..2K-1 estimated). */
wbcl_status wbcl__redunet_fused_gram(rd_work *w, cl_mem labels_est, size_t gfirst, size_t ng)
{
    wbcl_context *ctx = w->ctx;
    wbcl_kern *k;
    wbcl_status st = rd_kernel(ctx, 1, w->d, w->K, "rdn_gram", &k);
    if (st) return st;
    cl_uint mp = (cl_uint)w->mp, rb = (cl_uint)w->rb, nblk = (cl_uint)w->nblk, gf = (cl_uint)gfirst,
            n = (cl_uint)ng;
    WBCL_ARG(ctx, k, 0, w->Zw->mem);
    WBCL_ARG(ctx, k, 1, w->y);
    WBCL_ARG(ctx, k, 2, labels_est);
    WBCL_ARG(ctx, k, 3, mp);
    WBCL_ARG(ctx, k, 4, rb);
    WBCL_ARG(ctx, k, 5, nblk);
    WBCL_ARG(ctx, k, 6, gf);
    WBCL_ARG(ctx, k, 7, n);
    WBCL_ARG(ctx, k, 8, w->part);
    WBCL_ARG(ctx, k, 9, w->cnt);
    const size_t items = w->nblk * ng;
    return launch1(ctx, k, items, row_local(ctx, items));
}

/* Objective of the current features into history row `row` and/or the
 * construction of Wn from them. */
wbcl_status wbcl__redunet_fused_finalize(rd_work *w, float eps2, int construct, wbcl_tensor *Wn, size_t row)
{
    wbcl_context *ctx = w->ctx;
    wbcl_kern *k;
    wbcl_status st = rd_kernel(ctx, 1, w->d, w->K, "rdn_finalize", &k);
    if (st) return st;
    cl_uint nblk = (cl_uint)w->nblk, m = (cl_uint)w->m;
    cl_int con = construct, obj = row != (size_t)-1;
    cl_mem wn = construct ? Wn->mem : w->Zw->mem; /* not written unless constructing */
    cl_uint hrow = obj ? (cl_uint)row : 0;
    WBCL_ARG(ctx, k, 0, w->part);
    WBCL_ARG(ctx, k, 1, w->cnt);
    WBCL_ARG(ctx, k, 2, nblk);
    WBCL_ARG(ctx, k, 3, m);
    WBCL_ARG(ctx, k, 4, eps2);
    WBCL_ARG(ctx, k, 5, con);
    WBCL_ARG(ctx, k, 6, obj);
    WBCL_ARG(ctx, k, 7, wn);
    WBCL_ARG(ctx, k, 8, w->ld);
    WBCL_ARG(ctx, k, 9, w->hc);
    WBCL_ARG(ctx, k, 10, hrow);
    return launch1(ctx, k, 1 + 2 * w->K, row_local(ctx, 1 + 2 * w->K)); /* one work-group for K <= 31 */
}

/* ---- GEMM implementation ------------------------------------------------------------------------- */

static wbcl_status gemm(wbcl_context *ctx, wbcl_transpose ta, wbcl_transpose tb, size_t m, size_t n, size_t k,
                        size_t batch, const wbcl_tensor *A, size_t off_a, size_t stride_a, const wbcl_tensor *B,
                        size_t off_b, size_t stride_b, wbcl_tensor *C, size_t off_c, size_t stride_c)
{
    wbcl_gemm_desc de;
    memset(&de, 0, sizeof de);
    de.ta = ta;
    de.tb = tb;
    de.m = m;
    de.n = n;
    de.k = k;
    de.batch = batch;
    de.alpha = 1.0f;
    de.beta = 0.0f;
    /* every operand here is a stack of row-major matrices with rows of length lda = ldb = ldc */
    de.lda = ta == WBCL_TRANS ? m : k;
    de.ldb = tb == WBCL_TRANS ? k : n;
    de.ldc = n;
    de.off_a = off_a;
    de.stride_a = stride_a;
    de.off_b = off_b;
    de.stride_b = stride_b;
    de.off_c = off_c;
    de.stride_c = stride_c;
    return wbcl_gemm_strided(ctx, &de, A, B, C);
}

/* fit_shard: the group Grams Gb and sizes summed over the participants (in double; a group empty
 * here contributes zeros); afterwards w->cnth and w->n hold the total sizes. The buffer carries
 * one more number, w->diff (summed into w->diff_total). */
static wbcl_status comm_sum_groups(rd_work *w)
{
    wbcl_context *ctx = w->ctx;
    const size_t K = w->K, dd = w->d * w->d, n = K * dd + K + 1;
    float *g = malloc(K * dd * sizeof *g);
    double *buf = malloc(n * sizeof *buf);
    cl_uint *n32 = malloc(K * sizeof *n32);
    wbcl_status st = WBCL_SUCCESS;
    if (!g || !buf || !n32) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", w->op);
        goto done;
    }
    if ((st = wbcl_tensor_read(ctx, w->Gb, g, K * dd))) goto done;
    for (size_t j = 0; j < K; j++) {
        for (size_t e = 0; e < dd; e++) buf[j * dd + e] = w->cnth[j] ? (double)g[j * dd + e] : 0.0;
        buf[K * dd + j] = (double)w->cnth[j];
    }
    buf[n - 1] = (double)w->diff;
    if (w->comm->sum(buf, n, 0, w->comm->user)) {
        w->known = 1;
        st = wbcl__fail(ctx, WBCL_ERROR_PEER, "%s: another participant failed (or the transport did)", w->op);
        goto done;
    }
    size_t mt = 0;
    for (size_t j = 0; j < K; j++) {
        w->cnth[j] = (size_t)buf[K * dd + j];
        n32[j] = (cl_uint)w->cnth[j];
        mt += w->cnth[j];
    }
    w->mt = mt;
    w->diff_total = buf[n - 1];
    for (size_t e = 0; e < K * dd; e++) g[e] = (float)buf[e];
    if ((st = wbcl_tensor_write(ctx, w->Gb, g, K * dd))) goto done;
    st = wbcl__write_buf(ctx, w->n, K * sizeof(cl_uint), n32, "the ReduNet group sizes");
done:
    free(g);
    free(buf);
    free(n32);
    return st;
}

/* Groups of `labels` (sizes, offsets, gather indices), the rows of Zw gathered group by group
 * into Zs, the group Grams G_j = Z_j^T Z_j (one batched GEMM when the groups have equal sizes)
 * and A = [I + a sum_j G_j, I + a_j G_j] (rdn_prep; an empty group gives I). */
wbcl_status wbcl__redunet_gemm_groups(rd_work *w, const int *labels, float eps2)
{
    wbcl_context *ctx = w->ctx;
    const size_t K = w->K, m = w->m, d = w->d;
    wbcl_status st;
    memset(w->cnth, 0, K * sizeof *w->cnth);
    for (size_t i = 0; i < m; i++) w->cnth[labels[i]]++;
    w->start[0] = 0;
    for (size_t j = 0; j < K; j++) w->start[j + 1] = w->start[j] + w->cnth[j];
    size_t *pos = malloc(K * sizeof *pos);
    cl_uint *n32 = malloc(K * sizeof *n32);
    if (!pos || !n32) {
        free(pos);
        free(n32);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", w->op);
    }
    memcpy(pos, w->start, K * sizeof *pos);
    for (size_t i = 0; i < m; i++) w->permh[pos[labels[i]]++] = (int)i;
    for (size_t j = 0; j < K; j++) n32[j] = (cl_uint)w->cnth[j];
    st = wbcl__write_buf(ctx, w->perm, m * sizeof(cl_int), w->permh, "the ReduNet gather indices");
    if (!st) st = wbcl__write_buf(ctx, w->n, K * sizeof(cl_uint), n32, "the ReduNet group sizes");
    free(pos);
    free(n32);
    if (st) return st;

    wbcl_kern *k;
    if ((st = rd_kernel(ctx, 0, d, K, "rdn_gather", &k))) return st;
    cl_uint mm = (cl_uint)m, dd = (cl_uint)d;
    WBCL_ARG(ctx, k, 0, w->Zw->mem);
    WBCL_ARG(ctx, k, 1, w->perm);
    WBCL_ARG(ctx, k, 2, w->Zs->mem);
    WBCL_ARG(ctx, k, 3, mm);
    WBCL_ARG(ctx, k, 4, dd);
    if ((st = launch1(ctx, k, m * d, row_local(ctx, m * d)))) return st;

    int equal = 1;
    for (size_t j = 0; j < K; j++) equal &= w->cnth[j] == w->cnth[0];
    if (equal) {
        st = gemm(ctx, WBCL_TRANS, WBCL_NO_TRANS, d, d, w->cnth[0], K, w->Zs, 0, w->cnth[0] * d, w->Zs, 0,
                  w->cnth[0] * d, w->Gb, 0, d * d);
    } else {
        for (size_t j = 0; j < K && !st; j++)
            if (w->cnth[j])
                st = gemm(ctx, WBCL_TRANS, WBCL_NO_TRANS, d, d, w->cnth[j], 1, w->Zs, w->start[j] * d, 0, w->Zs,
                          w->start[j] * d, 0, w->Gb, j * d * d, 0);
    }
    if (st) return st;
    if (w->comm && (st = comm_sum_groups(w))) return st;
    cl_uint mt = (cl_uint)w->mt;
    if ((st = rd_kernel(ctx, 0, d, K, "rdn_prep", &k))) return st;
    WBCL_ARG(ctx, k, 0, w->Gb->mem);
    WBCL_ARG(ctx, k, 1, w->n);
    WBCL_ARG(ctx, k, 2, w->A->mem);
    WBCL_ARG(ctx, k, 3, mt);
    WBCL_ARG(ctx, k, 4, dd);
    WBCL_ARG(ctx, k, 5, eps2);
    return launch1(ctx, k, d * d, row_local(ctx, d * d));
}

/* hist row (dR, R, Rc) from the log-determinants of A (built for the groups of w->cnth). */
wbcl_status wbcl__redunet_gemm_logdets(rd_work *w, double *h)
{
    wbcl_context *ctx = w->ctx;
    wbcl_status st = wbcl_logdet_spd(ctx, w->A, w->LD);
    if (st) return st;
    float *ld = malloc((w->K + 1) * sizeof *ld);
    if (!ld) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", w->op);
    st = wbcl_tensor_read(ctx, w->LD, ld, w->K + 1);
    if (!st) {
        double R = 0.5 * ld[0], Rc = 0.0;
        for (size_t j = 0; j < w->K; j++)
            if (w->cnth[j]) Rc += ((double)w->cnth[j] / (double)w->mt) * 0.5 * ld[1 + j];
        h[0] = R - Rc;
        h[1] = R;
        h[2] = Rc;
    }
    free(ld);
    return st;
}

/* The layer buffer W = [a Ainv_0, a_j Ainv_j, gamma] from A (true classes). */
wbcl_status wbcl__redunet_gemm_construct(rd_work *w, wbcl_tensor *W, float eps2)
{
    wbcl_context *ctx = w->ctx;
    wbcl_status st = wbcl_spd_inverse(ctx, w->A, w->Ainv);
    if (st) return st;
    wbcl_kern *k;
    if ((st = rd_kernel(ctx, 0, w->d, w->K, "rdn_scale", &k))) return st;
    cl_uint mm = (cl_uint)w->mt, dd = (cl_uint)w->d;
    WBCL_ARG(ctx, k, 0, w->Ainv->mem);
    WBCL_ARG(ctx, k, 1, w->n);
    WBCL_ARG(ctx, k, 2, W->mem);
    WBCL_ARG(ctx, k, 3, mm);
    WBCL_ARG(ctx, k, 4, dd);
    WBCL_ARG(ctx, k, 5, eps2);
    size_t g[2] = {w->d * w->d, w->K + 1}, l[2] = {row_local(ctx, 0), 1};
    return wbcl__launch(ctx, k, 2, g, l);
}

/* One layer on Zw: P[g] = Zw W_g^T (g = 0..K: one batched GEMM), then rdn_update. */
wbcl_status wbcl__redunet_gemm_apply(rd_work *w, const wbcl_tensor *W, float eta, float lambda)
{
    wbcl_context *ctx = w->ctx;
    const size_t d = w->d, m = w->m, K = w->K;
    wbcl_status st = gemm(ctx, WBCL_NO_TRANS, WBCL_TRANS, m, d, d, K + 1, w->Zw, 0, 0, W, 0, d * d, w->P, 0, m * d);
    if (st) return st;
    wbcl_kern *k;
    if ((st = rd_kernel(ctx, 0, d, K, "rdn_update", &k))) return st;
    cl_uint mm = (cl_uint)m, dd = (cl_uint)d;
    WBCL_ARG(ctx, k, 0, w->Zw->mem);
    WBCL_ARG(ctx, k, 1, w->yhat);
    WBCL_ARG(ctx, k, 2, w->P->mem);
    WBCL_ARG(ctx, k, 3, W->mem);
    WBCL_ARG(ctx, k, 4, eta);
    WBCL_ARG(ctx, k, 5, lambda);
    WBCL_ARG(ctx, k, 6, mm);
    WBCL_ARG(ctx, k, 7, dd);
    const size_t ls = update_lanes(ctx);
    if (ls == 1) return launch1(ctx, k, m, row_local(ctx, m));
    return launch1(ctx, k, m * ls, ls);
}
