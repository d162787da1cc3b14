/* Vector ReduNet (include/wbcl/redunet.h, SPEC.md §4.1): construction
 * (Algorithm 5.1), application (Algorithm 5.2), objective, models in memory.
 * Kernels: cl/redunet.cl (family "redunet"). Save/load: host/model/redunet_io.c.
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
#include "internal.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/gemm.h"
#include "wbcl/linalg.h"
#include "wbcl/redunet.h"

#define FAMILY "redunet"
#define FUSED_REPORT_EVERY 64
#define MAX_CLASSES 1024 /* the kernels keep K floats per row in private memory */
#define MAX_DIM 65536

struct wbcl_redunet {
    wbcl_context *ctx;
    int L, d, K;
    wbcl_redunet_params params; /* params.layers == L */
    wbcl_tensor **W;            /* L buffers of (K+1) d^2 + K floats: E, C_0..C_{K-1}, gamma */
    double *hist;               /* (L, 3): dR, R, Rc; NULL if unknown */
};

/* ---- small helpers ----------------------------------------------------------------------------- */

static size_t ceil_div(size_t a, size_t b) { return a / b + (a % b != 0); }

static size_t layer_floats(size_t d, size_t K) { return (K + 1) * d * d + K; }

static int use_fused(size_t d, size_t K, wbcl_redunet_impl impl)
{
    if (impl == WBCL_REDUNET_IMPL_GEMM) return 0;
    if (impl == WBCL_REDUNET_IMPL_FUSED) return 1;
    return d <= WBCL_REDUNET_FUSED_MAX_DIM && K <= WBCL_REDUNET_FUSED_MAX_CLASSES;
}

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

static wbcl_status read_buf(wbcl_context *ctx, cl_mem mem, size_t off, size_t bytes, void *dst, const char *what)
{
    cl_int e = clEnqueueReadBuffer(ctx->queue, mem, CL_TRUE, off, bytes, dst, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "reading %s", what);
}

static wbcl_status write_buf(wbcl_context *ctx, cl_mem mem, size_t bytes, const void *src, const char *what)
{
    cl_int e = clEnqueueWriteBuffer(ctx->queue, mem, CL_TRUE, 0, bytes, src, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "writing %s", what);
}

static wbcl_status zero_buf(wbcl_context *ctx, cl_mem mem, size_t bytes, const char *what)
{
    const cl_uint zero = 0;
    cl_int e = clEnqueueFillBuffer(ctx->queue, mem, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "clearing %s", what);
}

static void release(cl_mem *m)
{
    if (*m) clReleaseMemObject(*m);
    *m = NULL;
}

static wbcl_status check_params(wbcl_context *ctx, const char *op, const wbcl_redunet_params *p, int need_layers)
{
    if (!p) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params is NULL", op);
    if (need_layers && p->layers < 1)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params.layers = %d, must be at least 1", op, p->layers);
    if (!(p->eta > 0.0f) || !isfinite(p->eta))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params.eta = %g, must be positive and finite", op,
                          (double)p->eta);
    if (!(p->eps2 > 0.0f) || !isfinite(p->eps2))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params.eps2 = %g, must be positive and finite", op,
                          (double)p->eps2);
    if (!(p->lambda >= 0.0f) || !isfinite(p->lambda))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params.lambda = %g, must be >= 0 and finite", op,
                          (double)p->lambda);
    if (p->impl != WBCL_REDUNET_IMPL_AUTO && p->impl != WBCL_REDUNET_IMPL_FUSED && p->impl != WBCL_REDUNET_IMPL_GEMM)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params.impl = %d is not a wbcl_redunet_impl", op,
                          (int)p->impl);
    if (p->report_every < 0)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params.report_every = %d, must be >= 0", op,
                          p->report_every);
    return WBCL_SUCCESS;
}

static wbcl_status check_impl(wbcl_context *ctx, const char *op, wbcl_redunet_impl impl, size_t d, size_t K)
{
    if (impl == WBCL_REDUNET_IMPL_FUSED && (d > WBCL_REDUNET_FUSED_MAX_DIM || K > WBCL_REDUNET_FUSED_MAX_CLASSES))
        return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED,
                          "%s: the fused implementation handles d <= %d and K <= %d, got d = %zu, K = %zu", op,
                          WBCL_REDUNET_FUSED_MAX_DIM, WBCL_REDUNET_FUSED_MAX_CLASSES, d, K);
    return WBCL_SUCCESS;
}

/* X must be a 2-D (m, d) tensor of ctx with m, d within limits. */
static wbcl_status check_rows(wbcl_context *ctx, const char *op, const char *name, const wbcl_tensor *X)
{
    wbcl_status st = wbcl__check_tensor(ctx, X, op, name);
    if (st) return st;
    char s[96];
    if (X->ndim != 2)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %s must be 2-D (m, d), has shape %s", op, name,
                          wbcl__shape_str(s, sizeof s, X->ndim, X->shape));
    if (X->shape[0] > (size_t)INT_MAX || X->shape[1] > MAX_DIM)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %s has shape %s; at most %d rows and %d columns", op, name,
                          wbcl__shape_str(s, sizeof s, X->ndim, X->shape), INT_MAX, MAX_DIM);
    return WBCL_SUCCESS;
}

static wbcl_status check_out(wbcl_context *ctx, const char *op, const char *name, const wbcl_tensor *Z, size_t m,
                             size_t d)
{
    wbcl_status st = wbcl__check_tensor(ctx, Z, op, name);
    if (st) return st;
    if (Z->ndim != 2 || Z->shape[0] != m || Z->shape[1] != d) {
        char s[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %s has shape %s, expected (%zu, %zu)", op, name,
                          wbcl__shape_str(s, sizeof s, Z->ndim, Z->shape), m, d);
    }
    return WBCL_SUCCESS;
}

/* labels in [0, K); counts[j] = m_j; with require_all every class must occur. */
static wbcl_status check_labels(wbcl_context *ctx, const char *op, const int *labels, size_t m, int classes,
                                int require_all, size_t *counts)
{
    if (!labels) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: labels is NULL", op);
    if (classes < 1 || classes > MAX_CLASSES)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: classes = %d, must be in 1..%d", op, classes,
                          MAX_CLASSES);
    memset(counts, 0, (size_t)classes * sizeof *counts);
    for (size_t i = 0; i < m; i++) {
        if (labels[i] < 0 || labels[i] >= classes)
            return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: labels[%zu] = %d is outside 0..%d", op, i,
                              labels[i], classes - 1);
        counts[labels[i]]++;
    }
    if (require_all)
        for (int j = 0; j < classes; j++)
            if (!counts[j])
                return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                                  "%s: class %d has no samples (empty classes are an error; labels must cover "
                                  "0..%d)",
                                  op, j, classes - 1);
    return WBCL_SUCCESS;
}

/* ---- model ------------------------------------------------------------------------------------- */

wbcl_redunet_params wbcl_redunet_default_params(void)
{
    wbcl_redunet_params p;
    p.layers = 2000;
    p.eta = 0.5f;
    p.eps2 = 0.1f;
    p.lambda = 500.0f;
    p.impl = WBCL_REDUNET_IMPL_AUTO;
    p.report_every = 0;
    return p;
}

void wbcl_redunet_destroy(wbcl_redunet *net)
{
    if (!net) return;
    if (net->W)
        for (int l = 0; l < net->L; l++) wbcl_tensor_destroy(net->W[l]);
    free(net->W);
    free(net->hist);
    free(net);
}

/* A model with L zero-filled layer buffers (hist allocated if with_hist). */
static wbcl_status model_new(wbcl_context *ctx, const char *op, int L, size_t d, size_t K,
                             const wbcl_redunet_params *p, int with_hist, wbcl_redunet **out)
{
    *out = NULL;
    size_t n;
    if (!wbcl__mul_ok(K + 1, d * d, &n) || n > SIZE_MAX - K)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: a layer of d = %zu, K = %zu is too large", op, d, K);
    wbcl_redunet *net = calloc(1, sizeof *net);
    if (!net) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    net->ctx = ctx;
    net->L = L;
    net->d = (int)d;
    net->K = (int)K;
    net->params = *p;
    net->params.layers = L;
    net->W = calloc((size_t)L, sizeof *net->W);
    if (with_hist) net->hist = calloc((size_t)L * 3, sizeof *net->hist);
    if (!net->W || (with_hist && !net->hist)) {
        wbcl_redunet_destroy(net);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %d layers", op, L);
    }
    size_t shape[1] = {layer_floats(d, K)};
    for (int l = 0; l < L; l++) {
        wbcl_status st = wbcl_tensor_create(ctx, 1, shape, WBCL_F32, NULL, &net->W[l]);
        if (st) {
            wbcl_redunet_destroy(net);
            return st;
        }
    }
    *out = net;
    return WBCL_SUCCESS;
}

int wbcl_redunet_layers(const wbcl_redunet *net) { return net ? net->L : 0; }
int wbcl_redunet_dim(const wbcl_redunet *net) { return net ? net->d : 0; }
int wbcl_redunet_classes(const wbcl_redunet *net) { return net ? net->K : 0; }

wbcl_redunet_params wbcl_redunet_get_params(const wbcl_redunet *net)
{
    if (net) return net->params;
    wbcl_redunet_params p;
    memset(&p, 0, sizeof p);
    return p;
}

wbcl_status wbcl_redunet_set_impl(wbcl_redunet *net, wbcl_redunet_impl impl)
{
    static const char op[] = "wbcl_redunet_set_impl";
    if (!net) return WBCL_ERROR_INVALID_ARGUMENT;
    if (impl != WBCL_REDUNET_IMPL_AUTO && impl != WBCL_REDUNET_IMPL_FUSED && impl != WBCL_REDUNET_IMPL_GEMM)
        return wbcl__fail(net->ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: impl = %d is not a wbcl_redunet_impl", op,
                          (int)impl);
    wbcl_status st = check_impl(net->ctx, op, impl, (size_t)net->d, (size_t)net->K);
    if (st) return st;
    net->params.impl = impl;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_redunet_history(const wbcl_redunet *net, int layer, double *dR, double *R, double *Rc)
{
    static const char op[] = "wbcl_redunet_history";
    if (!net) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!net->hist)
        return wbcl__fail(net->ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: this model has no objective history", op);
    if (layer < 0 || layer >= net->L)
        return wbcl__fail(net->ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: layer %d is outside 0..%d", op, layer,
                          net->L - 1);
    const double *h = net->hist + 3 * (size_t)layer;
    if (dR) *dR = h[0];
    if (R) *R = h[1];
    if (Rc) *Rc = h[2];
    return WBCL_SUCCESS;
}

static wbcl_status check_net(wbcl_context *ctx, const char *op, const wbcl_redunet *net)
{
    if (!net) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: net is NULL", op);
    if (net->ctx != ctx)
        return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: net belongs to a different context", op);
    return WBCL_SUCCESS;
}

wbcl_status wbcl_redunet_read_layer(wbcl_context *ctx, const wbcl_redunet *net, int layer, float *E, float *C,
                                    float *gamma)
{
    static const char op[] = "wbcl_redunet_read_layer";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_net(ctx, op, net);
    if (st) return st;
    if (layer < 0 || layer >= net->L)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: layer %d is outside 0..%d", op, layer, net->L - 1);
    const size_t dd = (size_t)net->d * net->d, K = (size_t)net->K;
    cl_mem mem = net->W[layer]->mem;
    if (E && (st = read_buf(ctx, mem, 0, dd * sizeof(float), E, "a ReduNet layer"))) return st;
    if (C && (st = read_buf(ctx, mem, dd * sizeof(float), K * dd * sizeof(float), C, "a ReduNet layer"))) return st;
    if (gamma && (st = read_buf(ctx, mem, (K + 1) * dd * sizeof(float), K * sizeof(float), gamma, "a ReduNet layer")))
        return st;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_redunet_create(wbcl_context *ctx, int layers, int dim, int classes,
                                const wbcl_redunet_params *params, const float *E, const float *C,
                                const float *gamma, const double *objective, wbcl_redunet **out)
{
    static const char op[] = "wbcl_redunet_create";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    *out = NULL;
    if (layers < 1 || dim < 1 || dim > MAX_DIM || classes < 1 || classes > MAX_CLASSES)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: layers = %d, dim = %d, classes = %d; need layers >= 1, 1 <= dim <= %d, 1 <= classes "
                          "<= %d",
                          op, layers, dim, classes, MAX_DIM, MAX_CLASSES);
    wbcl_status st = check_params(ctx, op, params, 0);
    if (st) return st;
    if (!E || !C || !gamma)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", op, !E ? "E" : !C ? "C" : "gamma");
    const size_t d = (size_t)dim, K = (size_t)classes, dd = d * d, L = (size_t)layers;
    size_t nE, nC;
    if (!wbcl__mul_ok(L, dd, &nE) || !wbcl__mul_ok(nE, K, &nC) || nC > SIZE_MAX / sizeof(float))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: layers = %d, dim = %d, classes = %d overflow the sizes", op, layers,
                          dim, classes);
    if ((st = check_impl(ctx, op, params->impl, d, K))) return st;
    const struct { const float *p; size_t n; const char *name; } arrs[3] = {
        {E, L * dd, "E"}, {C, L * K * dd, "C"}, {gamma, L * K, "gamma"}};
    for (int a = 0; a < 3; a++)
        for (size_t i = 0; i < arrs[a].n; i++)
            if (!isfinite(arrs[a].p[i]))
                return wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: %s[%zu] = %g is not finite", op, arrs[a].name, i,
                                  (double)arrs[a].p[i]);
    wbcl_redunet *net;
    if ((st = model_new(ctx, op, layers, d, K, params, objective != NULL, &net))) return st;
    if (objective) memcpy(net->hist, objective, 3 * L * sizeof *net->hist);
    float *buf = malloc(layer_floats(d, K) * sizeof *buf);
    if (!buf) {
        wbcl_redunet_destroy(net);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    }
    for (size_t l = 0; l < L && !st; l++) {
        memcpy(buf, E + l * dd, dd * sizeof *buf);
        memcpy(buf + dd, C + l * K * dd, K * dd * sizeof *buf);
        memcpy(buf + (K + 1) * dd, gamma + l * K, K * sizeof *buf);
        st = wbcl_tensor_write(ctx, net->W[l], buf, layer_floats(d, K));
    }
    free(buf);
    if (st) {
        wbcl_redunet_destroy(net);
        return st;
    }
    *out = net;
    return WBCL_SUCCESS;
}

/* ---- working state shared by fit, apply and objective ------------------------------------------- */

typedef struct rd_work {
    wbcl_context *ctx;
    const char *op;
    size_t m, d, K;
    size_t mt;             /* rows of all participants (fit_shard); m otherwise */
    const wbcl_redunet_comm *comm; /* fit_shard: statistics summed through it; NULL otherwise */
    int known;             /* a collective call reported a failure: make no further calls */
    size_t diff;           /* fit_shard: rows here whose yhat differs from the label (summed too) */
    double diff_total;     /* ... over all participants, after the sum */
    int fused;
    wbcl_tensor *Zw;       /* working features: (m, d); fused: transposed, (d, mp) */
    cl_mem flag;           /* non-finite input flag                   */
    cl_mem y, yhat;        /* (mp) ints: labels, estimated classes     */
    /* fused */
    size_t vw, mp;         /* rows per work-item, m rounded up to vw  */
    size_t rb, nblk;
    cl_mem part, cnt;      /* (nblk, 2K, T) floats, (nblk, 2K) uints   */
    cl_mem ld, hc;         /* per layer: K+1 floats, K+1 ints          */
    /* GEMM */
    wbcl_tensor *P;        /* (K+1, m, d): E z, C_j z for every row            */
    wbcl_tensor *Zs;       /* (m, d): the rows gathered group by group         */
    wbcl_tensor *Gb;       /* (K, d, d): group Grams Z_j^T Z_j                 */
    wbcl_tensor *A, *Ainv; /* (K+1, d, d): I + a Z^T Z, I + a_j Z_j^T Z_j; inverses */
    wbcl_tensor *LD;       /* (K+1): their log-determinants                    */
    cl_mem perm, n;        /* (m) gather indices, (K) group sizes              */
    int *yh;               /* host copy of yhat                                */
    int *permh;            /* host gather indices                              */
    size_t *start, *cnth;  /* (K+1) group offsets, (K) group sizes             */
} rd_work;

static void work_free(rd_work *w)
{
    wbcl_tensor_destroy(w->Zw);
    wbcl_tensor *ts[] = {w->Zs, w->Gb, w->A, w->Ainv, w->LD, w->P};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) wbcl_tensor_destroy(ts[i]);
    release(&w->flag);
    release(&w->y);
    release(&w->yhat);
    release(&w->part);
    release(&w->cnt);
    release(&w->ld);
    release(&w->hc);
    release(&w->perm);
    release(&w->n);
    free(w->yh);
    free(w->permh);
    free(w->start);
    free(w->cnth);
    memset(w, 0, sizeof *w);
}

/* Allocates what the chosen implementation needs. hist_layers > 0: fused history buffers. */
static wbcl_status work_init(rd_work *w, wbcl_context *ctx, const char *op, size_t m, size_t d, size_t K, int fused,
                             int need_gram, size_t hist_layers)
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
static wbcl_status enter(rd_work *w, const wbcl_tensor *X, const char *xname, int normalize)
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
    if ((st = read_buf(ctx, w->flag, 0, sizeof flag, &flag, "the ReduNet input check"))) return st;
    if (flag) return wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: %s has a non-finite entry (NaN or Inf)", w->op, xname);
    return WBCL_SUCCESS;
}

/* ---- fused implementation ------------------------------------------------------------------------ */

/* labels (m) into buf (mp ints), padding rows labelled -1. */
static wbcl_status upload_labels(rd_work *w, cl_mem buf, const int *labels)
{
    if (w->mp == w->m) return write_buf(w->ctx, buf, w->m * sizeof(cl_int), labels, "the ReduNet labels");
    cl_int *p = malloc(w->mp * sizeof *p);
    if (!p) return wbcl__fail(w->ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", w->op);
    memcpy(p, labels, w->m * sizeof *p);
    for (size_t i = w->m; i < w->mp; i++) p[i] = -1;
    wbcl_status st = write_buf(w->ctx, buf, w->mp * sizeof *p, p, "the ReduNet labels");
    free(p);
    return st;
}

static wbcl_status fused_apply(rd_work *w, const wbcl_tensor *W, float eta, float lambda)
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
static wbcl_status fused_gram(rd_work *w, cl_mem labels_est, size_t gfirst, size_t ng)
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
static wbcl_status fused_finalize(rd_work *w, float eps2, int construct, wbcl_tensor *Wn, size_t row)
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
    st = write_buf(ctx, w->n, K * sizeof(cl_uint), n32, "the ReduNet group sizes");
done:
    free(g);
    free(buf);
    free(n32);
    return st;
}

/* Groups of `labels` (sizes, offsets, gather indices), the rows of Zw gathered group by group
 * into Zs, the group Grams G_j = Z_j^T Z_j (one batched GEMM when the groups have equal sizes)
 * and A = [I + a sum_j G_j, I + a_j G_j] (rdn_prep; an empty group gives I). */
static wbcl_status gemm_groups(rd_work *w, const int *labels, float eps2)
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
    st = write_buf(ctx, w->perm, m * sizeof(cl_int), w->permh, "the ReduNet gather indices");
    if (!st) st = write_buf(ctx, w->n, K * sizeof(cl_uint), n32, "the ReduNet group sizes");
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
static wbcl_status gemm_logdets(rd_work *w, double *h)
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
static wbcl_status gemm_construct(rd_work *w, wbcl_tensor *W, float eps2)
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
static wbcl_status gemm_apply(rd_work *w, const wbcl_tensor *W, float eta, float lambda)
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

/* ---- fit ------------------------------------------------------------------------------------------ */

static wbcl_status copy_out(rd_work *w, wbcl_tensor *Z)
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

static wbcl_status fit_fused(rd_work *w, wbcl_redunet *net, const wbcl_redunet_params *p,
                             wbcl_redunet_progress_fn progress, void *user)
{
    wbcl_context *ctx = w->ctx;
    const size_t K = w->K, L = (size_t)net->L, K1 = K + 1;
    const size_t every = p->report_every > 0 ? (size_t)p->report_every : FUSED_REPORT_EVERY;
    float *ld = malloc(every * K1 * sizeof *ld);
    cl_int *hc = malloc(every * K1 * sizeof *hc);
    wbcl_status st = WBCL_SUCCESS;
    if (!ld || !hc) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", w->op);
        goto done;
    }
    /* layer 1 from the normalized input */
    if ((st = fused_gram(w, w->yhat, 0, K))) goto done;
    if ((st = fused_finalize(w, p->eps2, 1, net->W[0], (size_t)-1))) goto done;
    size_t done_upto = 0;
    for (size_t l = 0; l < L; l++) {
        const int last = l + 1 == L;
        if ((st = fused_apply(w, net->W[l], p->eta, p->lambda))) goto done;
        if ((st = fused_gram(w, w->yhat, last ? K : 0, last ? K : 2 * K))) goto done;
        if ((st = fused_finalize(w, p->eps2, !last, last ? NULL : net->W[l + 1], l))) goto done;
        if (l + 1 - done_upto < every && !last) continue;
        /* read back layers [done_upto, l] */
        const size_t n = l + 1 - done_upto;
        if ((st = read_buf(ctx, w->ld, done_upto * K1 * sizeof(float), n * K1 * sizeof(float), ld,
                           "the ReduNet objective")))
            goto done;
        if ((st = read_buf(ctx, w->hc, done_upto * K1 * sizeof(cl_int), n * K1 * sizeof(cl_int), hc,
                           "the ReduNet objective")))
            goto done;
        for (size_t r = 0; r < n; r++) {
            const size_t layer = done_upto + r;
            const float *lr = ld + r * K1;
            const cl_int *hr = hc + r * K1;
            if (hr[K]) {
                const int q = hr[K] - 1;
                st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC,
                                "%s: layer %zu: the Cholesky factorization of %s%d failed (not positive definite or "
                                "not finite)",
                                w->op, layer + 1,
                                q == 0 ? "I + a Z^T Z (E, objective R)" : q <= (int)K ? "I + a_j Z_j^T Z_j, class j = "
                                                                                     : "the objective's group ",
                                q == 0 ? 0 : q <= (int)K ? q - 1 : q - (int)K - 1);
                goto done;
            }
            double R = 0.5 * lr[0], Rc = 0.0;
            for (size_t j = 0; j < K; j++)
                if (hr[j]) Rc += ((double)hr[j] / (double)w->m) * 0.5 * lr[1 + j];
            double *h = net->hist + 3 * layer;
            h[0] = R - Rc;
            h[1] = R;
            h[2] = Rc;
            if (!isfinite(h[0])) {
                st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: layer %zu: the objective is not finite", w->op,
                                layer + 1);
                goto done;
            }
            if (progress) progress((int)layer + 1, h[0], h[1], h[2], user);
        }
        done_upto = l + 1;
    }
done:
    free(ld);
    free(hc);
    return st;
}

static wbcl_status fit_gemm(rd_work *w, wbcl_redunet *net, const int *labels, const wbcl_redunet_params *p,
                            wbcl_redunet_progress_fn progress, void *user)
{
    wbcl_context *ctx = w->ctx;
    const size_t L = (size_t)net->L, m = w->m;
    wbcl_status st;
    if ((st = gemm_groups(w, labels, p->eps2))) return st;
    if ((st = gemm_construct(w, net->W[0], p->eps2))) return st;
    for (size_t l = 0; l < L; l++) {
        const int last = l + 1 == L;
        double *h = net->hist + 3 * l;
        if ((st = gemm_apply(w, net->W[l], p->eta, p->lambda))) return st;
        if ((st = read_buf(ctx, w->yhat, 0, m * sizeof(cl_int), w->yh, "the ReduNet estimated classes"))) return st;
        /* when yhat == labels the next construction's matrices are the objective's */
        const int same = !memcmp(w->yh, labels, m * sizeof(int));
        if (!same || last) {
            if ((st = gemm_groups(w, w->yh, p->eps2))) return st;
            if ((st = gemm_logdets(w, h))) return st;
        }
        if (!last) {
            if ((st = gemm_groups(w, labels, p->eps2))) return st;
            if (same && (st = gemm_logdets(w, h))) return st;
            if ((st = gemm_construct(w, net->W[l + 1], p->eps2))) return st;
        }
        if (!isfinite(h[0]))
            return wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: layer %zu: the objective is not finite", w->op, l + 1);
        if (progress) progress((int)l + 1, h[0], h[1], h[2], user);
    }
    return WBCL_SUCCESS;
}

wbcl_status wbcl_redunet_fit(wbcl_context *ctx, const wbcl_tensor *X, const int *labels, int classes,
                             const wbcl_redunet_params *params, wbcl_redunet_progress_fn progress, void *user,
                             wbcl_tensor *Z, wbcl_redunet **out)
{
    static const char op[] = "wbcl_redunet_fit";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    *out = NULL;
    wbcl_status st = check_rows(ctx, op, "X", X);
    if (st) return st;
    const size_t m = X->shape[0], d = X->shape[1];
    if ((st = check_params(ctx, op, params, 1))) return st;
    if (Z && (st = check_out(ctx, op, "Z", Z, m, d))) return st;
    if (classes < 1 || classes > MAX_CLASSES)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: classes = %d, must be in 1..%d", op, classes,
                          MAX_CLASSES);
    const size_t K = (size_t)classes;
    size_t *counts = malloc(K * sizeof *counts);
    if (!counts) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    st = check_labels(ctx, op, labels, m, classes, 1, counts);
    free(counts);
    if (st) return st;
    if ((st = check_impl(ctx, op, params->impl, d, K))) return st;
    const int fused = use_fused(d, K, params->impl);

    wbcl_redunet *net = NULL;
    rd_work w;
    memset(&w, 0, sizeof w);
    if ((st = model_new(ctx, op, params->layers, d, K, params, 1, &net))) return st;
    if ((st = work_init(&w, ctx, op, m, d, K, fused, 1, fused ? (size_t)params->layers : 0))) goto fail;
    if ((st = upload_labels(&w, w.y, labels))) goto fail;
    if ((st = enter(&w, X, "X", 1))) goto fail;
    st = fused ? fit_fused(&w, net, params, progress, user) : fit_gemm(&w, net, labels, params, progress, user);
    if (st) goto fail;
    if ((st = copy_out(&w, Z))) goto fail;
    if ((st = wbcl_context_finish(ctx))) goto fail;
    work_free(&w);
    *out = net;
    return WBCL_SUCCESS;
fail:
    work_free(&w);
    wbcl_redunet_destroy(net);
    return st;
}

/* ---- fit on a shard (statistics summed through a wbcl_redunet_comm) -------------------------------- */

static wbcl_status peer_failed(rd_work *w)
{
    w->known = 1;
    return wbcl__fail(w->ctx, WBCL_ERROR_PEER, "%s: another participant failed (or the transport did)", w->op);
}

/* broadcast mode: the layer buffer W and the history row h from the root to everyone. */
static wbcl_status comm_share_layer(rd_work *w, wbcl_tensor *W, double *h)
{
    const wbcl_redunet_comm *c = w->comm;
    const size_t nf = layer_floats(w->d, w->K);
    float *buf = malloc(nf * sizeof *buf);
    if (!buf) return wbcl__fail(w->ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", w->op);
    wbcl_status st = WBCL_SUCCESS;
    if (W && c->root && (st = wbcl_tensor_read(w->ctx, W, buf, nf))) goto done;
    if (W && c->broadcast(buf, nf * sizeof *buf, 0, c->user)) {
        st = peer_failed(w);
        goto done;
    }
    if (W && !c->root && (st = wbcl_tensor_write(w->ctx, W, buf, nf))) goto done;
    if (h && c->broadcast(h, 3 * sizeof *h, 0, c->user)) st = peer_failed(w);
done:
    free(buf);
    return st;
}

/* The layer loop of fit_gemm with the statistics of both groupings summed every layer. */
static wbcl_status fit_comm(rd_work *w, wbcl_redunet *net, const int *labels, const wbcl_redunet_params *p,
                            wbcl_redunet_progress_fn progress, void *user)
{
    wbcl_context *ctx = w->ctx;
    const size_t L = (size_t)net->L, m = w->m;
    const int builds = !w->comm->broadcast || w->comm->root;
    wbcl_status st;
    if ((st = gemm_groups(w, labels, p->eps2))) return st;
    for (size_t j = 0; j < w->K; j++) /* the totals are the same everywhere: every participant fails alike */
        if (!w->cnth[j]) {
            w->known = 1;
            return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                              "%s: class %zu has no samples on any participant (empty classes are an error; labels "
                              "must cover 0..%zu)",
                              w->op, j, w->K - 1);
        }
    if (builds && (st = gemm_construct(w, net->W[0], p->eps2))) return st;
    if (w->comm->broadcast && (st = comm_share_layer(w, net->W[0], NULL))) return st;
    for (size_t l = 0; l < L; l++) {
        const int last = l + 1 == L;
        double *h = net->hist + 3 * l;
        if ((st = gemm_apply(w, net->W[l], p->eta, p->lambda))) return st;
        if ((st = read_buf(ctx, w->yhat, 0, m * sizeof(cl_int), w->yh, "the ReduNet estimated classes"))) return st;
        w->diff = 0;
        for (size_t i = 0; i < m; i++) w->diff += w->yh[i] != labels[i];
        if ((st = gemm_groups(w, w->yh, p->eps2))) return st;
        w->diff = 0;
        if (builds && (st = gemm_logdets(w, h))) return st;
        if (!last) {
            /* as in fit_gemm: when yhat equals the labels on every participant, the objective's
               summed statistics are the next construction's (one sum per layer instead of two) */
            if (w->diff_total != 0.0 && (st = gemm_groups(w, labels, p->eps2))) return st;
            if (builds && (st = gemm_construct(w, net->W[l + 1], p->eps2))) return st;
        }
        if (w->comm->broadcast && (st = comm_share_layer(w, last ? NULL : net->W[l + 1], h))) return st;
        if (!isfinite(h[0])) { /* the same history everywhere: every participant fails alike */
            w->known = 1;
            return wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: layer %zu: the objective is not finite", w->op, l + 1);
        }
        if (progress) progress((int)l + 1, h[0], h[1], h[2], user);
    }
    return WBCL_SUCCESS;
}

static wbcl_status fit_shard_local(wbcl_context *ctx, const char *op, rd_work *w, const wbcl_tensor *X,
                                   const int *labels, int classes, const wbcl_redunet_params *params,
                                   const wbcl_redunet_comm *comm, wbcl_redunet_progress_fn progress, void *user,
                                   wbcl_tensor *Z, wbcl_redunet **net)
{
    wbcl_status st = check_rows(ctx, op, "X", X);
    if (st) return st;
    const size_t m = X->shape[0], d = X->shape[1];
    if ((st = check_params(ctx, op, params, 1))) return st;
    if (!comm->sum)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: comm->sum is NULL", op);
    if (params->impl == WBCL_REDUNET_IMPL_FUSED)
        return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED,
                          "%s: the construction over several participants uses the GEMM implementation, not FUSED",
                          op);
    if (Z && (st = check_out(ctx, op, "Z", Z, m, d))) return st;
    if (classes < 1 || classes > MAX_CLASSES)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: classes = %d, must be in 1..%d", op, classes,
                          MAX_CLASSES);
    const size_t K = (size_t)classes;
    size_t *counts = malloc(K * sizeof *counts);
    if (!counts) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    st = check_labels(ctx, op, labels, m, classes, 0, counts);
    free(counts);
    if (st) return st;
    wbcl_redunet_params p = *params;
    p.impl = WBCL_REDUNET_IMPL_GEMM;
    if ((st = model_new(ctx, op, p.layers, d, K, &p, 1, net))) return st;
    if ((st = work_init(w, ctx, op, m, d, K, 0, 1, 0))) return st;
    w->comm = comm;
    if ((st = enter(w, X, "X", 1))) return st;
    if ((st = fit_comm(w, *net, labels, &p, progress, user))) return st;
    if ((st = copy_out(w, Z))) return st;
    return wbcl_context_finish(ctx);
}

wbcl_status wbcl_redunet_fit_shard(wbcl_context *ctx, const wbcl_tensor *X, const int *labels, int classes,
                                   const wbcl_redunet_params *params, const wbcl_redunet_comm *comm,
                                   wbcl_redunet_progress_fn progress, void *user, wbcl_tensor *Z,
                                   wbcl_redunet **out)
{
    static const char op[] = "wbcl_redunet_fit_shard";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!comm) {
        if (!params) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params is NULL", op);
        wbcl_redunet_params p = *params;
        if (p.impl == WBCL_REDUNET_IMPL_FUSED)
            return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED, "%s: uses the GEMM implementation, not FUSED", op);
        p.impl = WBCL_REDUNET_IMPL_GEMM;
        return wbcl_redunet_fit(ctx, X, labels, classes, &p, progress, user, Z, out);
    }
    if (!comm->sum) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: comm->sum is NULL", op);
    if (!out) { /* cannot even report: still agree, so that no participant waits */
        comm->sum(NULL, 0, 1, comm->user);
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    }
    *out = NULL;
    wbcl_redunet *net = NULL;
    rd_work w;
    memset(&w, 0, sizeof w);
    wbcl_status st = fit_shard_local(ctx, op, &w, X, labels, classes, params, comm, progress, user, Z, &net);
    const int known = w.known;
    work_free(&w);
    /* the final agreement (or this participant's one failed call) */
    if (!known && comm->sum(NULL, 0, st != WBCL_SUCCESS, comm->user) && !st)
        st = wbcl__fail(ctx, WBCL_ERROR_PEER, "%s: another participant failed (or the transport did)", op);
    if (st) {
        wbcl_redunet_destroy(net);
        return st;
    }
    *out = net;
    return WBCL_SUCCESS;
}

/* ---- apply ---------------------------------------------------------------------------------------- */

wbcl_status wbcl_redunet_apply(wbcl_context *ctx, const wbcl_redunet *net, const wbcl_tensor *X, wbcl_tensor *Z)
{
    static const char op[] = "wbcl_redunet_apply";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_net(ctx, op, net);
    if (st) return st;
    if ((st = check_rows(ctx, op, "X", X))) return st;
    const size_t m = X->shape[0], d = X->shape[1], K = (size_t)net->K;
    if (d != (size_t)net->d) {
        char s[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: X has shape %s but the model's dimension is d = %d", op,
                          wbcl__shape_str(s, sizeof s, X->ndim, X->shape), net->d);
    }
    if (!Z) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: Z is NULL", op);
    if ((st = check_out(ctx, op, "Z", Z, m, d))) return st;
    const int fused = use_fused(d, K, net->params.impl);
    rd_work w;
    if ((st = work_init(&w, ctx, op, m, d, K, fused, 0, 0))) goto done;
    if ((st = enter(&w, X, "X", 1))) goto done;
    for (int l = 0; l < net->L && !st; l++)
        st = fused ? fused_apply(&w, net->W[l], net->params.eta, net->params.lambda)
                   : gemm_apply(&w, net->W[l], net->params.eta, net->params.lambda);
    if (!st) st = copy_out(&w, Z);
    if (!st) st = wbcl_context_finish(ctx);
done:
    work_free(&w);
    return st;
}

/* ---- objective ------------------------------------------------------------------------------------ */

wbcl_status wbcl_redunet_objective(wbcl_context *ctx, const wbcl_tensor *Z, const int *labels, int classes,
                                   float eps2, double *dR, double *R, double *Rc)
{
    static const char op[] = "wbcl_redunet_objective";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_rows(ctx, op, "Z", Z);
    if (st) return st;
    const size_t m = Z->shape[0], d = Z->shape[1];
    if (!(eps2 > 0.0f) || !isfinite(eps2))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: eps2 = %g, must be positive and finite", op,
                          (double)eps2);
    if (classes < 1 || classes > MAX_CLASSES)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: classes = %d, must be in 1..%d", op, classes,
                          MAX_CLASSES);
    const size_t K = (size_t)classes;
    size_t *counts = malloc(K * sizeof *counts);
    if (!counts) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    st = check_labels(ctx, op, labels, m, classes, 0, counts);
    free(counts);
    if (st) return st;
    const int fused = use_fused(d, K, WBCL_REDUNET_IMPL_AUTO);
    rd_work w;
    double h[3] = {0, 0, 0};
    if ((st = work_init(&w, ctx, op, m, d, K, fused, 1, fused ? 1 : 0))) goto done;
    if ((st = enter(&w, Z, "Z", 0))) goto done; /* the features as they are, checked for finiteness */
    if (fused) {
        if ((st = upload_labels(&w, w.yhat, labels))) goto done;
        if ((st = fused_gram(&w, w.yhat, K, K))) goto done;
        if ((st = fused_finalize(&w, eps2, 0, NULL, 0))) goto done;
        float ld[WBCL_REDUNET_FUSED_MAX_CLASSES + 1];
        cl_int hc[WBCL_REDUNET_FUSED_MAX_CLASSES + 1];
        if ((st = read_buf(ctx, w.ld, 0, (K + 1) * sizeof(float), ld, "the ReduNet objective"))) goto done;
        if ((st = read_buf(ctx, w.hc, 0, (K + 1) * sizeof(cl_int), hc, "the ReduNet objective"))) goto done;
        if (hc[K]) {
            st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: a Cholesky factorization failed (Z not finite?)", op);
            goto done;
        }
        h[1] = 0.5 * ld[0];
        for (size_t j = 0; j < K; j++)
            if (hc[j]) h[2] += ((double)hc[j] / (double)m) * 0.5 * ld[1 + j];
        h[0] = h[1] - h[2];
    } else {
        if ((st = gemm_groups(&w, labels, eps2))) goto done;
        if ((st = gemm_logdets(&w, h))) goto done;
    }
    if (!isfinite(h[0])) {
        st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: the objective is not finite (Z has a non-finite entry?)", op);
        goto done;
    }
    if (dR) *dR = h[0];
    if (R) *R = h[1];
    if (Rc) *Rc = h[2];
done:
    work_free(&w);
    return st;
}

/* ---- synthetic data ------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unif01(uint64_t *s) { return ((double)(splitmix64(s) >> 11) + 0.5) / 9007199254740992.0; }

wbcl_status wbcl_redunet_gaussians(size_t d, int classes, size_t n_per_class, double sigma, const float *centres,
                                   uint64_t seed, float *X, int *y)
{
    if (!X || d == 0 || classes < 1 || n_per_class == 0 || !isfinite(sigma) || (!centres && (size_t)classes > d))
        return WBCL_ERROR_INVALID_ARGUMENT;
    uint64_t s = seed;
    double *row = malloc(d * sizeof *row);
    if (!row) return WBCL_ERROR_OUT_OF_MEMORY;
    int have = 0;
    double spare = 0.0;
    size_t i = 0;
    for (int k = 0; k < classes; k++)
        for (size_t n = 0; n < n_per_class; n++, i++) {
            double ss = 0.0;
            for (size_t c = 0; c < d; c++) {
                double g;
                if (have) {
                    g = spare;
                    have = 0;
                } else { /* Box-Muller: two normals per two uniforms */
                    double u1 = unif01(&s), u2 = unif01(&s), r = sqrt(-2.0 * log(u1));
                    g = r * cos(6.283185307179586 * u2);
                    spare = r * sin(6.283185307179586 * u2);
                    have = 1;
                }
                double mu = centres ? (double)centres[(size_t)k * d + c] : (c == (size_t)k ? 1.0 : 0.0);
                row[c] = mu + sigma * g;
                ss += row[c] * row[c];
            }
            double nrm = sqrt(ss);
            if (nrm < 1e-8) nrm = 1e-8;
            for (size_t c = 0; c < d; c++) X[i * d + c] = (float)(row[c] / nrm);
            if (y) y[i] = k;
        }
    free(row);
    return WBCL_SUCCESS;
}
