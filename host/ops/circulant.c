/* Shift-invariant ReduNet (include/wbcl/circulant.h): lifting, clFFT in and
 * out, per-frequency construction (Gram matrices and batched complex
 * Hermitian Cholesky) and application, objective. Kernels in cl/circulant.cl.
 *
 * Entering: lifting (circ_lift) or a copy, clFFT forward, per-sample
 * normalization (circ_spec_normalize, with the non-finite check), then the
 * lane layout (circ_to_lanes; in fit the samples are grouped class by class,
 * padded at the end to 16 lanes). Per layer of fit: circ_gram (true labels)
 * -> circ_shifted_inverse (E_p, C_{j,p}) -> circ_op_square -> circ_norms_q -> circ_softmax -> circ_update ->
 * objective on the output grouped by yhat (circ_groups, circ_gram,
 * circ_shifted_inverse without inverse; the log-determinants are summed in
 * double on the host).
 * Leaving: circ_from_lanes, clFFT inverse, circ_real_normalize.
 * GPU-shaped contexts (ctx->variant) take the one-lane-per-work-item kernels for the per-frequency
 * Cholesky and the application (circ_shifted_inverse_g, circ_op_square_g, circ_norms_q_g, circ_update_g)
 * with more, shorter chunks of bins (ws_alloc); the layouts and the other kernels are shared.
 * The fit reads nothing back inside its layer loop (unless a progress callback wants each layer's
 * objective): the predicted groups are built on the device (circ_groups), pivot info, log-determinants
 * and class counts of all layers are read and checked once at the end, before Z is written. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fft.h"
#include "wbcl/circulant.h"
#include "circulant_internal.h"

#define FAMILY "circulant"
#define MAX_CLASSES 1024

struct wbcl_circulant {
    wbcl_context *ctx;
    int dims, K, L;
    size_t C, H, W, P;
    wbcl_circulant_params params;
    cl_mem *ops;   /* L buffers of the (K+1) P operators C x C in blocks of 16 lanes (ops_bytes) */
    cl_mem *gam;   /* L buffers of K floats            */
    float *gamma;  /* (L, K) host copy                 */
    double *hist;  /* (L, 3) or NULL                   */
    float *lift;   /* (C, Cin, kh, kw) or NULL         */
    size_t Cin, kh, kw;
};

wbcl_circulant_params wbcl_circulant_default_params(void)
{
    wbcl_circulant_params p = {10, 0.5f, 0.1f, 500.0f};
    return p;
}

/* ---- small helpers --------------------------------------------------------------------------- */

static size_t local64(const wbcl_context *ctx)
{
    size_t l = 64;
    while (l > 1 && l > ctx->info.max_work_group_size) l /= 2;
    return l;
}

static wbcl_status launch1(wbcl_context *ctx, wbcl_kern *k, size_t global)
{
    size_t g[1] = {global}, l[1] = {local64(ctx)};
    return wbcl__launch(ctx, k, 1, g, l);
}

/* The application kernels have few, heavy work-items (one per 8 samples, or per class and 8 samples):
 * small work-groups let the runtime spread them over all compute units. */
static wbcl_status launch_heavy(wbcl_context *ctx, wbcl_kern *k, size_t global)
{
    size_t g[1] = {global}, l[1] = {ctx->info.max_work_group_size >= 4 ? 4 : 1};
    return wbcl__launch(ctx, k, 1, g, l);
}

static wbcl_status kern(wbcl_context *ctx, size_t C, const char *name, wbcl_kern **k)
{
    char opt[32];
    snprintf(opt, sizeof opt, "-DCI_C=%zu", C);
    return wbcl__kernel(ctx, FAMILY, opt, name, k);
}

static wbcl_status read_buf(wbcl_context *ctx, cl_mem mem, size_t bytes, void *dst, const char *what)
{
    cl_int e = clEnqueueReadBuffer(ctx->queue, mem, CL_TRUE, 0, bytes, dst, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "reading %s", what);
}

static wbcl_status write_buf(wbcl_context *ctx, cl_mem mem, size_t bytes, const void *src, const char *what)
{
    cl_int e = clEnqueueWriteBuffer(ctx->queue, mem, CL_TRUE, 0, bytes, src, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "writing %s", what);
}

static wbcl_status fill_int(wbcl_context *ctx, cl_mem mem, int value, size_t count, const char *what)
{
    cl_int e = clEnqueueFillBuffer(ctx->queue, mem, &value, sizeof value, 0, count * sizeof value, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "clearing %s", what);
}

static wbcl_status copy_buf(wbcl_context *ctx, cl_mem src, cl_mem dst, size_t bytes, const char *what)
{
    cl_int e = clEnqueueCopyBuffer(ctx->queue, src, dst, 0, 0, bytes, 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "copying %s", what);
}

static wbcl_status finish(wbcl_context *ctx, const char *op)
{
    cl_int e = clFinish(ctx->queue);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "%s: clFinish", op);
}

static void release(cl_mem *m)
{
    if (*m) clReleaseMemObject(*m);
    *m = NULL;
}

/* Geometry of a signal tensor: (m, C, T) -> dims 1, H = 1, W = T; (m, C, H, W) -> dims 2. */
typedef struct {
    int dims;
    size_t m, C, H, W, N, P, Wh;
} geom;

/* The geometry without the FFT's length restriction (lifting needs no FFT). */
static wbcl_status signal_shape(wbcl_context *ctx, const char *op, const char *what, const wbcl_tensor *t, geom *g)
{
    wbcl_status st = wbcl__check_tensor(ctx, t, op, what);
    if (st) return st;
    char sh[96];
    if (t->ndim != 3 && t->ndim != 4)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %s has shape %s; expected (m, C, T) or (m, C, H, W)", op, what,
                          wbcl__shape_str(sh, sizeof sh, t->ndim, t->shape));
    g->dims = t->ndim - 2;
    g->m = t->shape[0];
    g->C = t->shape[1];
    g->H = g->dims == 1 ? 1 : t->shape[2];
    g->W = t->shape[t->ndim - 1];
    g->N = g->H * g->W;
    g->Wh = g->W / 2 + 1;
    g->P = g->H * g->Wh;
    if (!g->m || !g->C || !g->N)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %s has a zero dimension %s", op, what,
                          wbcl__shape_str(sh, sizeof sh, t->ndim, t->shape));
    if (g->m > (1u << 24) || g->N > (1u << 24) || g->C * g->N > (1u << 26))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %s is too large %s", op, what,
                          wbcl__shape_str(sh, sizeof sh, t->ndim, t->shape));
    return WBCL_SUCCESS;
}

/* The geometry of a signal the layers transform: lengths the FFT can do (wbcl__fft_check). */
static wbcl_status signal_geom(wbcl_context *ctx, const char *op, const char *what, const wbcl_tensor *t, geom *g)
{
    wbcl_status st = signal_shape(ctx, op, what, t, g);
    return st ? st : wbcl__fft_check(ctx, op, g->H, g->W);
}

static wbcl_status check_channels(wbcl_context *ctx, const char *op, size_t C)
{
    if (C > WBCL_CIRCULANT_MAX_CHANNELS)
        return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED, "%s: %zu channels; at most %d are supported", op, C,
                          WBCL_CIRCULANT_MAX_CHANNELS);
    return WBCL_SUCCESS;
}

/* Lifting kernel Wt against raw signals of geometry gx: fills Cout, kh, kw. */
static wbcl_status lift_geom(wbcl_context *ctx, const char *op, const wbcl_tensor *Wt, const geom *gx, size_t *Cout,
                             size_t *kh, size_t *kw)
{
    wbcl_status st = wbcl__check_tensor(ctx, Wt, op, "lifting kernel");
    if (st) return st;
    char sh[96];
    if (Wt->ndim != gx->dims + 2 || Wt->shape[1] != gx->C || Wt->shape[0] == 0 ||
        Wt->shape[Wt->ndim - 1] == 0 || Wt->shape[Wt->ndim - 1] > gx->W ||
        (gx->dims == 2 && (Wt->shape[2] == 0 || Wt->shape[2] > gx->H)))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: lifting kernel has shape %s; expected (Cout, %zu, k) with 1 <= k <= %zu%s", op,
                          wbcl__shape_str(sh, sizeof sh, Wt->ndim, Wt->shape), gx->C, gx->W,
                          gx->dims == 2 ? " per axis, 2-D: (Cout, Cin, kh, kw)" : "");
    *Cout = Wt->shape[0];
    *kh = gx->dims == 2 ? Wt->shape[2] : 1;
    *kw = Wt->shape[Wt->ndim - 1];
    return WBCL_SUCCESS;
}

static wbcl_status check_params(wbcl_context *ctx, const char *op, const wbcl_circulant_params *p)
{
    if (!p) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params is NULL", op);
    if (p->layers < 1) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: layers = %d < 1", op, p->layers);
    if (!(p->eta > 0.0f) || !isfinite(p->eta))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: eta = %g must be finite and > 0", op, (double)p->eta);
    if (!(p->eps2 > 0.0f) || !isfinite(p->eps2))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: eps2 = %g must be finite and > 0", op,
                          (double)p->eps2);
    if (!(p->lambda >= 0.0f) || !isfinite(p->lambda))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: lambda = %g must be finite and >= 0", op,
                          (double)p->lambda);
    return WBCL_SUCCESS;
}

/* Labels in range and (require_all) every class non-empty; counts[K] gets the class sizes. */
static wbcl_status check_labels(wbcl_context *ctx, const char *op, const int *labels, size_t m, int classes,
                                int require_all, size_t *counts)
{
    if (!labels) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: labels is NULL", op);
    if (classes < 1 || classes > MAX_CLASSES)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: classes = %d must be in 1..%d", op, classes,
                          MAX_CLASSES);
    memset(counts, 0, (size_t)classes * sizeof *counts);
    for (size_t b = 0; b < m; b++) {
        if (labels[b] < 0 || labels[b] >= classes)
            return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: labels[%zu] = %d is not in [0, %d)", op, b,
                              labels[b], classes);
        counts[labels[b]]++;
    }
    if (require_all)
        for (int j = 0; j < classes; j++)
            if (!counts[j])
                return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: class %d has no samples", op, j);
    return WBCL_SUCCESS;
}

/* The device keeps a layer's (K+1) P operators like the Gram matrices (cl/circulant.cl): matrix t = j P + p
 * in block t / OPS_MW, lane t % OPS_MW; entry (r, c) real part at OPS_AT(t, r, c), imaginary part OPS_MW
 * floats later. Files and wbcl_circulant_read_layer use (K+1, P, C, C) complex row-major. */
#define OPS_MW 16
#define OPS_AT(t, r, c, C) ((((t) / OPS_MW * (C) + (r)) * (C) + (c)) * 2 * OPS_MW + (t) % OPS_MW)

static size_t ops_floats(size_t nb, size_t C) { return (nb + OPS_MW - 1) / OPS_MW * OPS_MW * C * C * 2; }

/* ---- workspace ------------------------------------------------------------------------------- */

typedef struct {
    geom g;
    size_t K;
    cl_mem Zr;     /* real (m, C, N)            */
    cl_mem V;      /* float2 (m, C, P)          */
    cl_mem Vt;     /* lane layout (P, C, 2, mp) floats, mp a multiple of 16  */
    cl_mem Vt2;    /* the same: circ_update's output, swapped with Vt         */
    cl_mem coef;   /* (K, mp) floats: gamma_j pi_j per lane                   */
    cl_mem part;   /* (nch, mp) floats: per chunk of bins, |u|^2 per lane     */
    size_t pchunk, nch; /* circ_update / circ_scale: bins per chunk, chunks  */
    cl_mem npart;  /* (nchn, K, mp) floats: circ_norms_q's partial sums per chunk of bins */
    cl_mem sq;     /* the K P matrices Q'_{j,p} = w_p C_{j,p}^2 (circ_op_square), operator layout */
    size_t pchn, nchn;  /* circ_norms_q: bins per chunk, chunks             */
    cl_mem mask;   /* (K+1, mp) floats: group membership over lanes (Gram kernel) */
    cl_mem lane;   /* m ints: the lane of each sample                          */
    cl_mem boff;   /* K+2 ints: per group, offsets into blocks                 */
    cl_mem blocks; /* (K+1) mp/8 ints: the blocks of 8 lanes holding a group   */
    cl_mem S;      /* (K+1) P matrices C x C in blocks of 16 lanes (cl/circulant.cl) */
    cl_mem ld;     /* (K+1) P floats            */
    cl_mem info;   /* 2 (K+1) P ints            */
    cl_mem alpha;  /* K+1 floats                */
    cl_mem yhat;   /* m ints                    */
    cl_mem nrm;    /* m K floats                */
    cl_mem pi;     /* m K floats                */
    cl_mem flag;   /* 1 int                     */
    cl_mem valid;  /* mp ints: sample in lane l, -1: padding                   */
    cl_mem mask2, boff2, blocks2, alpha2; /* groups by predicted class (fit's objective, built on the device) */
    cl_mem label;  /* mp ints: true label per lane (fit; -1 elsewhere)         */
    cl_mem zero;   /* 1 int = 0: "do not skip" for circ_gram / circ_shifted_inverse */
    int *info_h;
    float *ld_h;
    int *yhat_h;
    float *mask_h;
    int *lane_h;    /* m: lane of sample b            */
    int *sample_h;  /* mp: sample in lane l, -1: pad  */
    int *boff_h, *blocks_h;
    size_t mp;
} ws;

static void ws_free(ws *w)
{
    cl_mem *all[] = {&w->Zr, &w->V, &w->Vt, &w->mask, &w->lane, &w->boff, &w->blocks, &w->S, &w->ld, &w->info, &w->alpha, &w->yhat, &w->nrm, &w->pi, &w->flag, &w->Vt2, &w->coef, &w->part, &w->npart, &w->valid, &w->mask2, &w->boff2, &w->blocks2, &w->alpha2, &w->label, &w->zero, &w->sq};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
    free(w->info_h);
    free(w->ld_h);
    free(w->yhat_h);
    free(w->mask_h);
    free(w->lane_h);
    free(w->sample_h);
    free(w->boff_h);
    free(w->blocks_h);
    memset(w, 0, sizeof *w);
}

/* Lane layout: with labels, samples sorted by class (a class's Gram matrix reads only the blocks of 8
 * lanes it touches: about n_j / 8 + 1 of them); without, lane = sample; padded at the end to a multiple of
 * 16 lanes (the application's vectors). No per-class padding: the application's work is per lane. */
static wbcl_status ws_alloc(wbcl_context *ctx, ws *w, const geom *g, size_t K, const int *labels)
{
    memset(w, 0, sizeof *w);
    w->g = *g;
    w->K = K;
    const size_t mp = (g->m + 15) / 16 * 16;
    w->mp = mp;
    w->lane_h = malloc(g->m * sizeof *w->lane_h);
    w->sample_h = malloc(mp * sizeof *w->sample_h);
    w->boff_h = malloc((K + 2) * sizeof *w->boff_h);
    w->blocks_h = malloc((K + 1) * (mp / 8) * sizeof *w->blocks_h);
    if (!w->lane_h || !w->sample_h || !w->boff_h || !w->blocks_h) {
        ws_free(w);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "shift-invariant ReduNet: out of host memory");
    }
    for (size_t l = 0; l < mp; l++) w->sample_h[l] = -1;
    if (labels) {
        size_t l = 0;
        for (size_t j = 0; j < K; j++)
            for (size_t b = 0; b < g->m; b++)
                if (labels[b] == (int)j) w->lane_h[b] = (int)l, w->sample_h[l++] = (int)b;
    } else {
        for (size_t b = 0; b < g->m; b++) w->lane_h[b] = (int)b, w->sample_h[b] = (int)b;
    }
    const size_t nb = (K + 1) * g->P, CC = g->C * g->C;
    /* chunks of bins. CPU-shaped: circ_update about 32 work-items (one per chunk), circ_norms_q about 48
     * (5 classes x chunk). GPU-shaped (one lane per work-item, the _g kernels): about 16384 work-items for
     * circ_update (lane, chunk) and 32768 for circ_norms_q (lane, class, chunk), at most one chunk per bin. */
    const int gpu = ctx->variant == WBCL_VARIANT_GPU;
    w->nch = gpu ? (16384 + mp - 1) / mp : 32;
    if (w->nch > g->P) w->nch = g->P;
    w->pchunk = (g->P + w->nch - 1) / w->nch;
    w->nch = (g->P + w->pchunk - 1) / w->pchunk;
    w->nchn = gpu ? (32768 + mp * K - 1) / (mp * K)
                  : (48 + (K + 4) / 5 - 1) / ((K + 4) / 5); /* circ_norms_q: about 48 work-items (chunk, 5 classes) */
    if (w->nchn > g->P) w->nchn = g->P;
    w->pchn = (g->P + w->nchn - 1) / w->nchn;
    w->nchn = (g->P + w->pchn - 1) / w->pchn;
    wbcl_status st;
    if ((st = wbcl__buffer(ctx, g->m * g->C * g->N * sizeof(float), "features", &w->Zr)) ||
        (st = wbcl__buffer(ctx, g->m * g->C * g->P * 2 * sizeof(float), "spectra", &w->V)) ||
        (st = wbcl__buffer(ctx, w->mp * g->C * g->P * 2 * sizeof(float), "spectra (lanes)", &w->Vt)) ||
        (st = wbcl__buffer(ctx, w->mp * g->C * g->P * 2 * sizeof(float), "spectra (lanes)", &w->Vt2)) ||
        (st = wbcl__buffer(ctx, K * mp * sizeof(float), "update coefficients", &w->coef)) ||
        (st = wbcl__buffer(ctx, w->nch * mp * sizeof(float), "partial norms", &w->part)) ||
        (st = wbcl__buffer(ctx, w->nchn * K * mp * sizeof(float), "partial class norms", &w->npart)) ||
        (st = wbcl__buffer(ctx, ops_floats(K * g->P, g->C) * sizeof(float), "squared class operators", &w->sq)) ||
        (st = wbcl__buffer(ctx, (K + 1) * w->mp * sizeof(float), "group masks", &w->mask)) ||
        (st = wbcl__buffer(ctx, g->m * sizeof(int), "lanes", &w->lane)) ||
        (st = wbcl__buffer(ctx, (K + 2) * sizeof(int), "group block offsets", &w->boff)) ||
        (st = wbcl__buffer(ctx, (K + 1) * (mp / 8) * sizeof(int), "group blocks", &w->blocks)) ||
        (st = wbcl__buffer(ctx, (nb + 15) / 16 * 16 * CC * 2 * sizeof(float), "per-frequency matrices", &w->S)) ||
        (st = wbcl__buffer(ctx, nb * sizeof(float), "log-determinants", &w->ld)) ||
        (st = wbcl__buffer(ctx, 2 * nb * sizeof(int), "pivot info", &w->info)) ||
        (st = wbcl__buffer(ctx, (K + 1) * sizeof(float), "alpha", &w->alpha)) ||
        (st = wbcl__buffer(ctx, mp * sizeof(int), "yhat", &w->yhat)) ||
        (st = wbcl__buffer(ctx, mp * K * sizeof(float), "norms", &w->nrm)) ||
        (st = wbcl__buffer(ctx, mp * K * sizeof(float), "memberships", &w->pi)) ||
        (st = wbcl__buffer(ctx, sizeof(int), "flag", &w->flag)) ||
        (st = wbcl__buffer(ctx, mp * sizeof(int), "lane samples", &w->valid)) ||
        (st = wbcl__buffer(ctx, (K + 1) * w->mp * sizeof(float), "group masks", &w->mask2)) ||
        (st = wbcl__buffer(ctx, (K + 2) * sizeof(int), "group block offsets", &w->boff2)) ||
        (st = wbcl__buffer(ctx, (K + 1) * (mp / 8) * sizeof(int), "group blocks", &w->blocks2)) ||
        (st = wbcl__buffer(ctx, (K + 1) * sizeof(float), "alpha", &w->alpha2)) ||
        (st = wbcl__buffer(ctx, mp * sizeof(int), "lane labels", &w->label)) ||
        (st = wbcl__buffer(ctx, sizeof(int), "zero", &w->zero))) {
        ws_free(w);
        return st;
    }
    w->info_h = malloc(2 * nb * sizeof *w->info_h);
    w->ld_h = malloc(nb * sizeof *w->ld_h);
    w->yhat_h = malloc(mp * sizeof *w->yhat_h);
    w->mask_h = malloc((K + 1) * w->mp * sizeof *w->mask_h);
    if (!w->info_h || !w->ld_h || !w->yhat_h || !w->mask_h) {
        ws_free(w);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "shift-invariant ReduNet: out of host memory");
    }
    int *lab = malloc(mp * sizeof *lab);
    if (!lab) {
        ws_free(w);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "shift-invariant ReduNet: out of host memory");
    }
    for (size_t l = 0; l < mp; l++) lab[l] = labels && w->sample_h[l] >= 0 ? labels[w->sample_h[l]] : -1;
    st = write_buf(ctx, w->label, mp * sizeof(int), lab, "lane labels");
    free(lab);
    if (st) {
        ws_free(w);
        return st;
    }
    if ((st = fill_int(ctx, w->S, 0, (nb + 15) / 16 * 16 * CC * 2, "per-frequency matrices")) || /* lanes past nb */
        (st = fill_int(ctx, w->zero, 0, 1, "zero")) ||
        (st = write_buf(ctx, w->lane, g->m * sizeof(int), w->lane_h, "lanes")) ||
        (st = write_buf(ctx, w->valid, mp * sizeof(int), w->sample_h, "lane samples"))) {
        ws_free(w);
        return st;
    }
    return WBCL_SUCCESS;
}

/* Lane-indexed yhat / pi (device) -> sample-indexed host arrays (either may be NULL). */
static wbcl_status read_memberships(wbcl_context *ctx, ws *w, int *yhat, float *pi)
{
    const size_t m = w->g.m, K = w->K, mp = w->mp;
    wbcl_status st;
    if (yhat) {
        if ((st = read_buf(ctx, w->yhat, mp * sizeof(int), w->yhat_h, "yhat"))) return st;
        for (size_t b = 0; b < m; b++) yhat[b] = w->yhat_h[w->lane_h[b]];
    }
    if (pi) {
        float *t = malloc(mp * K * sizeof *t);
        if (!t) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "shift-invariant ReduNet: out of host memory");
        if ((st = read_buf(ctx, w->pi, mp * K * sizeof(float), t, "memberships"))) {
            free(t);
            return st;
        }
        for (size_t b = 0; b < m; b++) memcpy(pi + b * K, t + (size_t)w->lane_h[b] * K, K * sizeof *t);
        free(t);
    }
    return WBCL_SUCCESS;
}

/* ---- steps ----------------------------------------------------------------------------------- */

/* CPU variant of the lifting (cl/circulant.cl circ_lift_pad + circ_lift_rows): rows of X padded with their
 * right wrap into a scratch buffer, then a row of CI_LO output channels per work-item, 16 columns at a time. */
#define LIFT_LO 4       /* CI_LO in cl/circulant.cl */
#define SLOT_LIFT_PAD 7 /* padded rows of X, used within one lifting call */

static wbcl_status enq_lift_rows(wbcl_context *ctx, cl_mem X, cl_mem Wt, cl_mem Y, size_t m, size_t Cin,
                                 size_t Cout, size_t H, size_t W, size_t kh, size_t kw)
{
    const size_t nv = (W + 15) / 16, Wp = nv * 16 + kw - 1, rows = m * Cin * H;
    cl_mem Xp;
    wbcl_kern *kp, *kr;
    wbcl_status st;
    if ((st = wbcl__scratch(ctx, SLOT_LIFT_PAD, rows * Wp * sizeof(float), &Xp)) ||
        (st = wbcl__kernel(ctx, FAMILY, NULL, "circ_lift_pad", &kp)) ||
        (st = wbcl__kernel(ctx, FAMILY, NULL, "circ_lift_rows", &kr)))
        return st;
    cl_uint urows = (cl_uint)rows, uw = (cl_uint)W, uwp = (cl_uint)Wp;
    WBCL_ARG(ctx, kp, 0, X);
    WBCL_ARG(ctx, kp, 1, Xp);
    WBCL_ARG(ctx, kp, 2, urows);
    WBCL_ARG(ctx, kp, 3, uw);
    WBCL_ARG(ctx, kp, 4, uwp);
    if ((st = launch1(ctx, kp, rows * Wp))) return st;
    cl_uint um = (cl_uint)m, ui = (cl_uint)Cin, uo = (cl_uint)Cout, uh = (cl_uint)H, ukh = (cl_uint)kh,
            ukw = (cl_uint)kw, unv = (cl_uint)nv;
    WBCL_ARG(ctx, kr, 0, Xp);
    WBCL_ARG(ctx, kr, 1, Wt);
    WBCL_ARG(ctx, kr, 2, Y);
    WBCL_ARG(ctx, kr, 3, um);
    WBCL_ARG(ctx, kr, 4, ui);
    WBCL_ARG(ctx, kr, 5, uo);
    WBCL_ARG(ctx, kr, 6, uh);
    WBCL_ARG(ctx, kr, 7, uw);
    WBCL_ARG(ctx, kr, 8, ukh);
    WBCL_ARG(ctx, kr, 9, ukw);
    WBCL_ARG(ctx, kr, 10, uwp);
    WBCL_ARG(ctx, kr, 11, unv);
    return launch_heavy(ctx, kr, m * ((Cout + LIFT_LO - 1) / LIFT_LO) * H);
}

/* Lifting: the CPU variant above on CPU-shaped contexts, else one output per work-item (circ_lift). */
static wbcl_status enq_lift(wbcl_context *ctx, cl_mem X, cl_mem Wt, cl_mem Y, size_t m, size_t Cin, size_t Cout,
                            size_t H, size_t W, size_t kh, size_t kw)
{
    if (ctx->variant == WBCL_VARIANT_CPU) return enq_lift_rows(ctx, X, Wt, Y, m, Cin, Cout, H, W, kh, kw);
    wbcl_kern *k;
    wbcl_status st = wbcl__kernel(ctx, FAMILY, NULL, "circ_lift", &k);
    if (st) return st;
    cl_uint um = (cl_uint)m, ui = (cl_uint)Cin, uo = (cl_uint)Cout, uh = (cl_uint)H, uw = (cl_uint)W,
            ukh = (cl_uint)kh, ukw = (cl_uint)kw;
    WBCL_ARG(ctx, k, 0, X);
    WBCL_ARG(ctx, k, 1, Wt);
    WBCL_ARG(ctx, k, 2, Y);
    WBCL_ARG(ctx, k, 3, um);
    WBCL_ARG(ctx, k, 4, ui);
    WBCL_ARG(ctx, k, 5, uo);
    WBCL_ARG(ctx, k, 6, uh);
    WBCL_ARG(ctx, k, 7, uw);
    WBCL_ARG(ctx, k, 8, ukh);
    WBCL_ARG(ctx, k, 9, ukw);
    return launch1(ctx, k, m * Cout * H * W);
}

/* Zr -> V = FFT(Zr); normalize per sample when `normalize`; non-finite input -> NUMERIC. */
static wbcl_status enter(wbcl_context *ctx, const char *op, ws *w, int normalize)
{
    const geom *g = &w->g;
    wbcl_status st = wbcl__fft_forward(ctx, g->m * g->C, g->H, g->W, w->Zr, w->V);
    if (st) return st;
    if ((st = fill_int(ctx, w->flag, 0, 1, "flag"))) return st;
    wbcl_kern *k;
    if ((st = kern(ctx, g->C, "circ_spec_normalize", &k))) return st;
    cl_uint um = (cl_uint)g->m, uP = (cl_uint)g->P, uW = (cl_uint)g->W, uWh = (cl_uint)g->Wh;
    WBCL_ARG(ctx, k, 0, w->V);
    WBCL_ARG(ctx, k, 1, um);
    WBCL_ARG(ctx, k, 2, uP);
    WBCL_ARG(ctx, k, 3, uW);
    WBCL_ARG(ctx, k, 4, uWh);
    WBCL_ARG(ctx, k, 5, w->flag);
    if (normalize && (st = launch1(ctx, k, g->m))) return st;
    int flag = 0;
    if (normalize && (st = read_buf(ctx, w->flag, sizeof flag, &flag, "flag"))) return st;
    if (flag) return wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: non-finite input (NaN or Inf in the signals or features, or an overflow)", op);
    wbcl_kern *kt;
    if ((st = kern(ctx, g->C, "circ_to_lanes", &kt))) return st;
    cl_uint ump = (cl_uint)w->mp;
    WBCL_ARG(ctx, kt, 0, w->V);
    WBCL_ARG(ctx, kt, 1, w->Vt);
    WBCL_ARG(ctx, kt, 2, w->valid); /* sample of each lane, -1: padding (written as 0) */
    WBCL_ARG(ctx, kt, 3, uP);
    WBCL_ARG(ctx, kt, 4, ump);
    return launch1(ctx, kt, g->C * g->P);
}

/* V -> Z = real(normalize(IFFT(V))) into dst (V is overwritten). */
static wbcl_status leave(wbcl_context *ctx, ws *w, cl_mem dst)
{
    const geom *g = &w->g;
    wbcl_kern *kf;
    wbcl_status st = kern(ctx, g->C, "circ_from_lanes", &kf);
    if (st) return st;
    cl_uint um0 = (cl_uint)g->m, uP0 = (cl_uint)g->P, ump = (cl_uint)w->mp;
    WBCL_ARG(ctx, kf, 0, w->Vt);
    WBCL_ARG(ctx, kf, 1, w->V);
    WBCL_ARG(ctx, kf, 2, w->lane);
    WBCL_ARG(ctx, kf, 3, um0);
    WBCL_ARG(ctx, kf, 4, uP0);
    WBCL_ARG(ctx, kf, 5, ump);
    if ((st = launch1(ctx, kf, g->m * g->C * g->P))) return st;
    if ((st = wbcl__fft_inverse(ctx, g->m * g->C, g->H, g->W, w->V, dst))) return st;
    wbcl_kern *k;
    if ((st = kern(ctx, g->C, "circ_real_normalize", &k))) return st;
    cl_uint um = (cl_uint)g->m, un = (cl_uint)(g->C * g->N);
    WBCL_ARG(ctx, k, 0, dst);
    WBCL_ARG(ctx, k, 1, um);
    WBCL_ARG(ctx, k, 2, un);
    return launch1(ctx, k, g->m);
}

/* Per-group Gram matrices S of the spectra for the groups (mask, boff, blocks) j < K, which must partition
 * the samples: group K (every sample) is computed as their sum. */
static wbcl_status enq_gram(wbcl_context *ctx, ws *w, cl_mem mask, cl_mem boff, cl_mem blocks, cl_mem skip,
                            size_t skip_off)
{
    const geom *g = &w->g;
    wbcl_kern *k;
    wbcl_status st;
    if ((st = kern(ctx, g->C, "circ_gram", &k))) return st;
    cl_uint ump = (cl_uint)w->mp, uP = (cl_uint)g->P, uK = (cl_uint)w->K;
    WBCL_ARG(ctx, k, 0, w->Vt);
    WBCL_ARG(ctx, k, 1, mask);
    WBCL_ARG(ctx, k, 2, boff);
    WBCL_ARG(ctx, k, 3, blocks);
    WBCL_ARG(ctx, k, 4, w->S);
    WBCL_ARG(ctx, k, 5, ump);
    WBCL_ARG(ctx, k, 6, uP);
    WBCL_ARG(ctx, k, 7, uK);
    cl_uint uso = (cl_uint)skip_off;
    WBCL_ARG(ctx, k, 8, skip);
    WBCL_ARG(ctx, k, 9, uso);
    return launch1(ctx, k, g->P * g->C); /* (bin, row): all K classes, then group K as their sum */
}

/* Groups from host labels into w->mask, w->boff, w->blocks. */
static wbcl_status set_groups(wbcl_context *ctx, ws *w, const int *labels)
{
    const geom *g = &w->g;
    const size_t K = w->K, mp = w->mp;
    memset(w->mask_h, 0, (K + 1) * mp * sizeof *w->mask_h);
    for (size_t b = 0; b < g->m; b++) {
        const size_t l = (size_t)w->lane_h[b];
        w->mask_h[(size_t)labels[b] * mp + l] = 1.0f;
        w->mask_h[K * mp + l] = 1.0f;
    }
    size_t nq = 0; /* blocks of 8 lanes holding at least one member, per group */
    for (size_t j = 0; j <= K; j++) {
        w->boff_h[j] = (int)nq;
        for (size_t q = 0; q < mp / 8; q++) {
            int any = 0;
            for (size_t l = 8 * q; l < 8 * q + 8; l++) any |= w->mask_h[j * mp + l] != 0.0f;
            if (any) w->blocks_h[nq++] = (int)q;
        }
    }
    w->boff_h[K + 1] = (int)nq;
    wbcl_status st;
    if ((st = write_buf(ctx, w->mask, (K + 1) * mp * sizeof(float), w->mask_h, "group masks")) ||
        (st = write_buf(ctx, w->boff, (K + 2) * sizeof(int), w->boff_h, "group block offsets")) ||
        (st = write_buf(ctx, w->blocks, (nq ? nq : 1) * sizeof(int), w->blocks_h, "group blocks")))
        return st;
    return WBCL_SUCCESS;
}

/* Groups by the lane-indexed predictions w->yhat into w->mask2, boff2, blocks2, the class counts into
 * cnt at element offset cnt_off (K ints) and the objective's alpha into w->alpha2, on the device; same at
 * same_off = 1 when every prediction is the true label (w->label), and then alpha2 = w->alpha. */
static wbcl_status enq_groups(wbcl_context *ctx, ws *w, cl_mem cnt, size_t cnt_off, float eps2, cl_mem same,
                              size_t same_off)
{
    wbcl_kern *k;
    wbcl_status st = kern(ctx, w->g.C, "circ_groups", &k);
    if (st) return st;
    cl_uint um = (cl_uint)w->g.m, ump = (cl_uint)w->mp, uK = (cl_uint)w->K, uoff = (cl_uint)cnt_off;
    WBCL_ARG(ctx, k, 0, w->yhat);
    WBCL_ARG(ctx, k, 1, w->valid);
    WBCL_ARG(ctx, k, 2, w->mask2);
    WBCL_ARG(ctx, k, 3, w->boff2);
    WBCL_ARG(ctx, k, 4, w->blocks2);
    WBCL_ARG(ctx, k, 5, cnt);
    WBCL_ARG(ctx, k, 6, w->alpha2);
    WBCL_ARG(ctx, k, 7, um);
    WBCL_ARG(ctx, k, 8, ump);
    WBCL_ARG(ctx, k, 9, uK);
    WBCL_ARG(ctx, k, 10, eps2);
    WBCL_ARG(ctx, k, 11, uoff);
    cl_uint uso = (cl_uint)same_off;
    WBCL_ARG(ctx, k, 12, w->label);
    WBCL_ARG(ctx, k, 13, same);
    WBCL_ARG(ctx, k, 14, uso);
    WBCL_ARG(ctx, k, 15, w->alpha);
    return launch1(ctx, k, 1);
}

/* S -> M = alpha (I + alpha S)^-1 (when M != NULL) and log-determinants into ld at element offset ld_off;
 * the first bad pivot per matrix into info (2 ints per matrix, from element offset info_off; filled with
 * -1 beforehand by the caller). alpha: K+1 floats on the device; no read-back here. */
static wbcl_status enq_shinv(wbcl_context *ctx, ws *w, cl_mem alpha, cl_mem M, cl_mem ld, size_t ld_off, cl_mem info,
                             size_t info_off, cl_mem skip, size_t skip_off)
{
    const geom *g = &w->g;
    const size_t nb = (w->K + 1) * g->P;
    wbcl_kern *k;
    wbcl_status st;
    const int gpu = ctx->variant == WBCL_VARIANT_GPU; /* one matrix per work-item: circ_shifted_inverse_g */
    if ((st = kern(ctx, g->C, gpu ? "circ_shifted_inverse_g" : "circ_shifted_inverse", &k))) return st;
    cl_uint uP = (cl_uint)g->P, unb = (cl_uint)nb, want = M != NULL, uld = (cl_uint)ld_off, uinfo = (cl_uint)info_off;
    cl_mem out = M ? M : w->S; /* not written when want == 0 */
    WBCL_ARG(ctx, k, 0, w->S);
    WBCL_ARG(ctx, k, 1, alpha);
    WBCL_ARG(ctx, k, 2, uP);
    WBCL_ARG(ctx, k, 3, unb);
    WBCL_ARG(ctx, k, 4, ld);
    WBCL_ARG(ctx, k, 5, info);
    WBCL_ARG(ctx, k, 6, want);
    WBCL_ARG(ctx, k, 7, out);
    WBCL_ARG(ctx, k, 8, uld);
    WBCL_ARG(ctx, k, 9, uinfo);
    cl_uint uso = (cl_uint)skip_off;
    WBCL_ARG(ctx, k, 10, skip);
    WBCL_ARG(ctx, k, 11, uso);
    return gpu ? launch1(ctx, k, (nb + 15) / 16 * 16)
               : launch_heavy(ctx, k, (nb + 15) / 16); /* 16 matrices per work-item */
}

/* Pivot info of one batch of (K+1) P matrices (host copy) -> NUMERIC naming the layer (1-based; 0: none),
 * the operator and the frequency of the first failure. */
static wbcl_status check_info(wbcl_context *ctx, const char *op, const ws *w, const int *info, int layer,
                              const char *stage)
{
    const geom *g = &w->g;
    const size_t nb = (w->K + 1) * g->P;
    size_t bad = 0, first = 0;
    for (size_t t = 0; t < nb; t++)
        if (info[2 * t] >= 0) {
            if (!bad) first = t;
            bad++;
        }
    if (!bad) return WBCL_SUCCESS;
    float d;
    memcpy(&d, &info[2 * first + 1], sizeof d);
    size_t j = first / g->P, p = first % g->P;
    char which[48], where[48] = "";
    if (j == w->K) snprintf(which, sizeof which, "I + a S_p");
    else snprintf(which, sizeof which, "I + a_%zu S_{%zu,p}", j, j);
    if (layer > 0) snprintf(where, sizeof where, "layer %d%s: ", layer, stage);
    return wbcl__fail(ctx, WBCL_ERROR_NUMERIC,
                      "%s: %s%s at frequency bin (%zu, %zu) is not positive definite (pivot %d is %g%s); "
                      "%zu of %zu matrices failed",
                      op, where, which, p / g->Wh, p % g->Wh, info[2 * first], (double)d,
                      isfinite(d) ? "" : ": non-finite input or overflow", bad, nb);
}

/* (dR, R, Rc) from the log-determinants ld ((K+1) P floats, host) and the group sizes cnt (K). */
static void objective_sum(const ws *w, const float *ld, const size_t *cnt, double out[3])
{
    const geom *g = &w->g;
    const size_t K = w->K;
    double R = 0.0, Rc = 0.0;
    for (size_t p = 0; p < g->P; p++) {
        const size_t q = p % g->Wh;
        const double wt = (q == 0 || 2 * q == g->W) ? 1.0 : 2.0;
        R += wt * ld[K * g->P + p];
        for (size_t j = 0; j < K; j++)
            if (cnt[j]) Rc += wt * ((double)cnt[j] / (double)g->m) * ld[j * g->P + p];
    }
    R /= 2.0 * (double)g->N;
    Rc /= 2.0 * (double)g->N;
    out[0] = R - Rc;
    out[1] = R;
    out[2] = Rc;
}

/* Objective of the spectra (lane layout) grouped by host labels (blocking). */
static wbcl_status objective_of(wbcl_context *ctx, const char *op, ws *w, const int *labels, float eps2, double out[3])
{
    const geom *g = &w->g;
    const size_t K = w->K, nb = (K + 1) * g->P;
    size_t *cnt = calloc(K, sizeof *cnt);
    float *alpha = malloc((K + 1) * sizeof *alpha);
    wbcl_status st = WBCL_SUCCESS;
    if (!cnt || !alpha) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
        goto done;
    }
    for (size_t b = 0; b < g->m; b++) cnt[labels[b]]++;
    for (size_t j = 0; j < K; j++) alpha[j] = cnt[j] ? (float)((double)g->C / ((double)cnt[j] * eps2)) : 0.0f;
    alpha[K] = (float)((double)g->C / ((double)g->m * eps2));
    if ((st = write_buf(ctx, w->alpha, (K + 1) * sizeof(float), alpha, "alpha")) ||
        (st = fill_int(ctx, w->info, -1, 2 * nb, "pivot info")) || (st = set_groups(ctx, w, labels)) ||
        (st = enq_gram(ctx, w, w->mask, w->boff, w->blocks, w->zero, 0)) ||
        (st = enq_shinv(ctx, w, w->alpha, NULL, w->ld, 0, w->info, 0, w->zero, 0)) ||
        (st = read_buf(ctx, w->info, 2 * nb * sizeof(int), w->info_h, "pivot info")) ||
        (st = check_info(ctx, op, w, w->info_h, 0, "")) ||
        (st = read_buf(ctx, w->ld, nb * sizeof(float), w->ld_h, "log-determinants")))
        goto done;
    objective_sum(w, w->ld_h, cnt, out);
done:
    free(cnt);
    free(alpha);
    return st;
}

/* One layer's application to the spectra w->Vt with operators ops and gamma (device): circ_op_square -> circ_norms_q ->
 * circ_softmax -> circ_update (into w->Vt2) -> circ_scale, then Vt and Vt2 trade places. */
static wbcl_status apply_layer(wbcl_context *ctx, ws *w, cl_mem ops, cl_mem gam, const wbcl_circulant_params *p)
{
    const geom *g = &w->g;
    wbcl_kern *ks, *ku, *kc;
    wbcl_status st;
    const int gpu = ctx->variant == WBCL_VARIANT_GPU; /* one lane per work-item: the _g kernels */
    if ((st = kern(ctx, g->C, "circ_softmax", &ks)) ||
        (st = kern(ctx, g->C, gpu ? "circ_update_g" : "circ_update", &ku)) ||
        (st = kern(ctx, g->C, "circ_scale", &kc)))
        return st;
    const size_t nblk = w->mp / 16;
    cl_uint ump = (cl_uint)w->mp, uP = (cl_uint)g->P, uW = (cl_uint)g->W, uWh = (cl_uint)g->Wh, uK = (cl_uint)w->K,
            upc = (cl_uint)w->pchunk, unch = (cl_uint)w->nch;
    float eta = p->eta, lambda = p->lambda;
    cl_uint upn = (cl_uint)w->pchn, unchn = (cl_uint)w->nchn;
    /* Q'_{j,p} = w_p C_{j,p}^2 (off-diagonal doubled), then the class norms as quadratic forms (cl/circulant.cl) */
    wbcl_kern *kq, *kn;
    if ((st = kern(ctx, g->C, gpu ? "circ_op_square_g" : "circ_op_square", &kq)) ||
        (st = kern(ctx, g->C, gpu ? "circ_norms_q_g" : "circ_norms_q", &kn)))
        return st;
    cl_uint unc = (cl_uint)(w->K * g->P);
    WBCL_ARG(ctx, kq, 0, ops);
    WBCL_ARG(ctx, kq, 1, w->sq);
    WBCL_ARG(ctx, kq, 2, unc);
    WBCL_ARG(ctx, kq, 3, uP);
    WBCL_ARG(ctx, kq, 4, uW);
    WBCL_ARG(ctx, kq, 5, uWh);
    if ((st = gpu ? launch1(ctx, kq, w->K * g->P * g->C) /* (matrix, row) */
                  : launch_heavy(ctx, kq, (w->K * g->P + 15) / 16))) /* 16 matrices per work-item */
        return st;
    WBCL_ARG(ctx, kn, 0, w->Vt);
    WBCL_ARG(ctx, kn, 1, w->sq);
    WBCL_ARG(ctx, kn, 2, w->npart);
    WBCL_ARG(ctx, kn, 3, ump);
    WBCL_ARG(ctx, kn, 4, uP);
    WBCL_ARG(ctx, kn, 5, uK);
    WBCL_ARG(ctx, kn, 6, upn);
    if ((st = gpu ? launch1(ctx, kn, w->mp * w->K * w->nchn) /* (lane, class, chunk of bins) */
                  : launch_heavy(ctx, kn, (w->K + 4) / 5 * w->nchn))) /* (chunk of bins, 5 classes) */
        return st;
    WBCL_ARG(ctx, ks, 0, w->npart);
    WBCL_ARG(ctx, ks, 1, w->nrm);
    WBCL_ARG(ctx, ks, 2, gam);
    WBCL_ARG(ctx, ks, 3, w->pi);
    WBCL_ARG(ctx, ks, 4, w->yhat);
    WBCL_ARG(ctx, ks, 5, w->coef);
    WBCL_ARG(ctx, ks, 6, w->valid);
    WBCL_ARG(ctx, ks, 7, lambda);
    WBCL_ARG(ctx, ks, 8, ump);
    WBCL_ARG(ctx, ks, 9, uK);
    WBCL_ARG(ctx, ks, 10, unchn);
    if ((st = launch1(ctx, ks, w->mp))) return st;
    WBCL_ARG(ctx, ku, 0, w->Vt);
    WBCL_ARG(ctx, ku, 1, w->Vt2);
    WBCL_ARG(ctx, ku, 2, ops);
    WBCL_ARG(ctx, ku, 3, w->coef);
    WBCL_ARG(ctx, ku, 4, w->part);
    WBCL_ARG(ctx, ku, 5, eta);
    WBCL_ARG(ctx, ku, 6, ump);
    WBCL_ARG(ctx, ku, 7, uP);
    WBCL_ARG(ctx, ku, 8, uW);
    WBCL_ARG(ctx, ku, 9, uWh);
    WBCL_ARG(ctx, ku, 10, uK);
    WBCL_ARG(ctx, ku, 11, upc);
    if ((st = gpu ? launch1(ctx, ku, w->mp * w->nch) /* (lane, chunk of bins) */
                  : launch_heavy(ctx, ku, w->nch))) /* one chunk of bins (all lanes) per work-item */
        return st;
    WBCL_ARG(ctx, kc, 0, w->Vt2);
    WBCL_ARG(ctx, kc, 1, w->part);
    WBCL_ARG(ctx, kc, 2, ump);
    WBCL_ARG(ctx, kc, 3, uP);
    WBCL_ARG(ctx, kc, 4, upc);
    WBCL_ARG(ctx, kc, 5, unch);
    if ((st = launch_heavy(ctx, kc, nblk * w->nch))) return st;
    cl_mem t = w->Vt;
    w->Vt = w->Vt2;
    w->Vt2 = t;
    return WBCL_SUCCESS;
}

/* ---- model ------------------------------------------------------------------------------------ */


/* n matrices from t0 on: row-major complex src (n, C, C) -> lane layout dst (dir > 0), or back (dir < 0) */
static void ops_convert(float *lane, float *rowmajor, size_t t0, size_t n, size_t C, int to_lanes)
{
    for (size_t i = 0; i < n; i++)
        for (size_t r = 0; r < C; r++)
            for (size_t c = 0; c < C; c++) {
                float *x = rowmajor + ((i * C + r) * C + c) * 2, *y = lane + OPS_AT(t0 + i, r, c, C);
                if (to_lanes) y[0] = x[0], y[OPS_MW] = x[1];
                else x[0] = y[0], x[1] = y[OPS_MW];
            }
}

void wbcl_circulant_destroy(wbcl_circulant *net)
{
    if (!net) return;
    for (int l = 0; l < net->L; l++) {
        if (net->ops) release(&net->ops[l]);
        if (net->gam) release(&net->gam[l]);
    }
    free(net->ops);
    free(net->gam);
    free(net->gamma);
    free(net->hist);
    free(net->lift);
    free(net);
}

/* An empty model with L layer slots (buffers allocated). */
wbcl_status wbcl__circulant_new(wbcl_context *ctx, int dims, size_t C, size_t H, size_t W, int K, int L,
                                const wbcl_circulant_params *p, wbcl_circulant **out)
{
    *out = NULL;
    wbcl_circulant *n = calloc(1, sizeof *n);
    if (!n) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "shift-invariant ReduNet: out of host memory");
    n->ctx = ctx;
    n->dims = dims;
    n->C = C;
    n->H = H;
    n->W = W;
    n->P = H * (W / 2 + 1);
    n->K = K;
    n->params = *p;
    n->params.layers = L;
    n->ops = calloc((size_t)L, sizeof *n->ops);
    n->gam = calloc((size_t)L, sizeof *n->gam);
    n->gamma = calloc((size_t)L * (size_t)K, sizeof *n->gamma);
    n->hist = calloc((size_t)L * 3, sizeof *n->hist);
    if (!n->ops || !n->gam || !n->gamma || !n->hist) {
        wbcl_circulant_destroy(n);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "shift-invariant ReduNet: out of host memory");
    }
    n->L = L;
    const size_t ob = ops_floats(((size_t)K + 1) * n->P, C) * sizeof(float);
    for (int l = 0; l < L; l++) {
        wbcl_status st;
        if ((st = wbcl__buffer(ctx, ob, "layer operators", &n->ops[l])) ||
            (st = wbcl__buffer(ctx, (size_t)K * sizeof(float), "gamma", &n->gam[l]))) {
            wbcl_circulant_destroy(n);
            return st;
        }
    }
    *out = n;
    return WBCL_SUCCESS;
}

/* Loads layer data into a model made by wbcl__circulant_new (ops: (K+1) P C C complex per layer). */
wbcl_status wbcl__circulant_set_layer(wbcl_context *ctx, wbcl_circulant *net, int l, const float *ops,
                                      const float *gamma)
{
    const size_t nb = ((size_t)net->K + 1) * net->P, nf = ops_floats(nb, net->C);
    float *lanes = calloc(nf, sizeof *lanes); /* padding lanes of the last block: 0 */
    if (!lanes) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "shift-invariant ReduNet: out of host memory");
    ops_convert(lanes, (float *)ops, 0, nb, net->C, 1);
    wbcl_status st = write_buf(ctx, net->ops[l], nf * sizeof(float), lanes, "layer operators");
    free(lanes);
    if (!st) st = write_buf(ctx, net->gam[l], (size_t)net->K * sizeof(float), gamma, "gamma");
    if (!st) memcpy(net->gamma + (size_t)l * net->K, gamma, (size_t)net->K * sizeof(float));
    return st;
}

wbcl_status wbcl__circulant_set_extra(wbcl_circulant *net, const double *hist, const float *lift, size_t Cin,
                                      size_t kh, size_t kw)
{
    if (hist) memcpy(net->hist, hist, (size_t)net->L * 3 * sizeof *hist);
    else {
        free(net->hist);
        net->hist = NULL;
    }
    if (lift) {
        size_t n = net->C * Cin * kh * kw;
        net->lift = malloc(n * sizeof *net->lift);
        if (!net->lift) return wbcl__fail(net->ctx, WBCL_ERROR_OUT_OF_MEMORY, "out of host memory");
        memcpy(net->lift, lift, n * sizeof *lift);
        net->Cin = Cin;
        net->kh = kh;
        net->kw = kw;
    }
    return WBCL_SUCCESS;
}

int wbcl_circulant_dims(const wbcl_circulant *net) { return net ? net->dims : 0; }
size_t wbcl_circulant_channels(const wbcl_circulant *net) { return net ? net->C : 0; }
size_t wbcl_circulant_height(const wbcl_circulant *net) { return net ? net->H : 0; }
size_t wbcl_circulant_width(const wbcl_circulant *net) { return net ? net->W : 0; }
int wbcl_circulant_classes(const wbcl_circulant *net) { return net ? net->K : 0; }
int wbcl_circulant_layers(const wbcl_circulant *net) { return net ? net->L : 0; }
int wbcl_circulant_has_lift(const wbcl_circulant *net) { return net && net->lift; }

wbcl_circulant_params wbcl_circulant_get_params(const wbcl_circulant *net)
{
    wbcl_circulant_params p = {0, 0.0f, 0.0f, 0.0f};
    return net ? net->params : p;
}

/* The lifting kernel (C, Cin, kh, kw) host copy and its sizes; NULL if none. */
const float *wbcl__circulant_lift(const wbcl_circulant *net, size_t *Cin, size_t *kh, size_t *kw)
{
    *Cin = net->Cin;
    *kh = net->kh;
    *kw = net->kw;
    return net->lift;
}

wbcl_status wbcl_circulant_history(const wbcl_circulant *net, int layer, double *dR, double *R, double *Rc)
{
    if (!net || layer < 0 || layer >= net->L || !net->hist) return WBCL_ERROR_INVALID_ARGUMENT;
    if (dR) *dR = net->hist[3 * layer];
    if (R) *R = net->hist[3 * layer + 1];
    if (Rc) *Rc = net->hist[3 * layer + 2];
    return WBCL_SUCCESS;
}

wbcl_status wbcl_circulant_read_layer(wbcl_context *ctx, const wbcl_circulant *net, int layer, float *E, float *C,
                                      float *gamma)
{
    static const char op[] = "wbcl_circulant_read_layer";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!net) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: net is NULL", op);
    if (net->ctx != ctx) return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: model from another context", op);
    if (layer < 0 || layer >= net->L)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: layer %d not in [0, %d)", op, layer, net->L);
    const size_t K = (size_t)net->K, nb = (K + 1) * net->P, nf = ops_floats(nb, net->C);
    if (C || E) {
        float *lanes = malloc(nf * sizeof *lanes);
        if (!lanes) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
        cl_int e = clEnqueueReadBuffer(ctx->queue, net->ops[layer], CL_TRUE, 0, nf * sizeof(float), lanes, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            free(lanes);
            return wbcl__cl_fail(ctx, e, "%s: reading layer %d", op, layer);
        }
        if (C) ops_convert(lanes, C, 0, K * net->P, net->C, 0);
        if (E) ops_convert(lanes, E, K * net->P, net->P, net->C, 0);
        free(lanes);
    }
    if (gamma) memcpy(gamma, net->gamma + (size_t)layer * K, K * sizeof *gamma);
    return WBCL_SUCCESS;
}

/* ---- public ops ------------------------------------------------------------------------------- */

wbcl_status wbcl_circulant_lift(wbcl_context *ctx, const wbcl_tensor *X, const wbcl_tensor *Wt, wbcl_tensor *Y)
{
    static const char op[] = "wbcl_circulant_lift";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    geom gx = {0}, gy = {0};
    size_t Cout = 0, kh = 1, kw = 1;
    wbcl_status st;
    if ((st = signal_shape(ctx, op, "X", X, &gx)) || (st = lift_geom(ctx, op, Wt, &gx, &Cout, &kh, &kw)) ||
        (st = signal_shape(ctx, op, "Y", Y, &gy)))
        return st;
    if (Y == X) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: Y must not be X", op);
    if (gy.dims != gx.dims || gy.m != gx.m || gy.C != Cout || gy.H != gx.H || gy.W != gx.W) {
        char a[96], b[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: Y has shape %s; expected (m, Cout, ...) for X %s", op,
                          wbcl__shape_str(a, sizeof a, Y->ndim, Y->shape), wbcl__shape_str(b, sizeof b, X->ndim, X->shape));
    }
    return enq_lift(ctx, X->mem, Wt->mem, Y->mem, gx.m, gx.C, Cout, gx.H, gx.W, kh, kw);
}

/* Features of X (lifted by the kernel if any) into w->Zr. */
static wbcl_status features_in(wbcl_context *ctx, ws *w, const wbcl_tensor *X, cl_mem lift, size_t Cin, size_t kh,
                               size_t kw)
{
    const geom *g = &w->g;
    if (lift) return enq_lift(ctx, X->mem, lift, w->Zr, g->m, Cin, g->C, g->H, g->W, kh, kw);
    return copy_buf(ctx, X->mem, w->Zr, g->m * g->C * g->N * sizeof(float), "features");
}

/* Fit's deferred checks and objective: the pivot info (2 batches per layer: construction, objective),
 * log-determinants (one batch per layer) and predicted class counts (K per layer) of layers l0..l1-1 are
 * read in one go; the first failure in layer order is reported, else hist gets (dR, R, Rc) per layer. */
typedef struct {
    cl_mem info, ld, cnt, same, ldc;
    int *info_h, *cnt_h, *same_h;
    float *ld_h, *ldc_h;
    size_t *cnt_z;
    size_t L;
    int reuse; /* objective of layer l skipped when its groups are the true ones: layer l+1's construction */
} fit_log;

static wbcl_status collect(wbcl_context *ctx, const char *op, ws *w, fit_log *f, size_t l0, size_t l1, double *hist)
{
    const size_t K = w->K, nb = (K + 1) * w->g.P, n = l1 - l0;
    cl_int e = clEnqueueReadBuffer(ctx->queue, f->info, CL_FALSE, 2 * l0 * 2 * nb * sizeof(int),
                                   2 * n * 2 * nb * sizeof(int), f->info_h, 0, NULL, NULL);
    if (e == CL_SUCCESS)
        e = clEnqueueReadBuffer(ctx->queue, f->ld, CL_FALSE, l0 * nb * sizeof(float), n * nb * sizeof(float), f->ld_h,
                                0, NULL, NULL);
    if (e == CL_SUCCESS && f->reuse)
        e = clEnqueueReadBuffer(ctx->queue, f->ldc, CL_FALSE, 0, f->L * nb * sizeof(float), f->ldc_h, 0, NULL, NULL);
    if (e == CL_SUCCESS)
        e = clEnqueueReadBuffer(ctx->queue, f->same, CL_FALSE, l0 * sizeof(int), n * sizeof(int), f->same_h, 0, NULL,
                                NULL);
    if (e == CL_SUCCESS)
        e = clEnqueueReadBuffer(ctx->queue, f->cnt, CL_TRUE, l0 * K * sizeof(int), n * K * sizeof(int), f->cnt_h, 0,
                                NULL, NULL);
    if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "%s: reading the layers' pivot info and objective", op);
    wbcl_status st;
    for (size_t i = 0; i < n; i++) {
        if ((st = check_info(ctx, op, w, f->info_h + 2 * i * 2 * nb, (int)(l0 + i) + 1, "")) ||
            (st = check_info(ctx, op, w, f->info_h + (2 * i + 1) * 2 * nb, (int)(l0 + i) + 1, " (objective)")))
            return st;
        for (size_t j = 0; j < K; j++) f->cnt_z[j] = (size_t)f->cnt_h[i * K + j];
        const size_t l = l0 + i;
        const int reused = f->reuse && f->same_h[i] && l + 1 < f->L;
        objective_sum(w, reused ? f->ldc_h + (l + 1) * nb : f->ld_h + i * nb, f->cnt_z, hist + 3 * l);
    }
    return WBCL_SUCCESS;
}

wbcl_status wbcl_circulant_fit(wbcl_context *ctx, const wbcl_tensor *X, const wbcl_tensor *lift, const int *labels,
                               int classes, const wbcl_circulant_params *params, wbcl_circulant_progress_fn progress,
                               void *user, wbcl_tensor *Z, wbcl_circulant **out)
{
    static const char op[] = "wbcl_circulant_fit";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    *out = NULL;
    geom gx = {0}, g = {0};
    size_t C = 0, kh = 1, kw = 1;
    wbcl_status st;
    if ((st = signal_geom(ctx, op, "X", X, &gx)) || (st = check_params(ctx, op, params))) return st;
    if (lift) {
        if ((st = lift_geom(ctx, op, lift, &gx, &C, &kh, &kw))) return st;
    } else {
        C = gx.C;
    }
    if ((st = check_channels(ctx, op, C))) return st;
    g = gx;
    g.C = C;
    if (Z) {
        geom gz = {0};
        if ((st = signal_geom(ctx, op, "Z", Z, &gz))) return st;
        if (gz.dims != g.dims || gz.m != g.m || gz.C != C || gz.H != g.H || gz.W != g.W) {
            char a[96];
            return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: Z has shape %s; expected (%zu, %zu, %s%zu)", op,
                              wbcl__shape_str(a, sizeof a, Z->ndim, Z->shape), g.m, C,
                              g.dims == 2 ? "H, " : "", g.W);
        }
    }
    size_t *counts = malloc((size_t)(classes > 0 && classes <= MAX_CLASSES ? classes : 1) * sizeof *counts);
    if (!counts) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    if ((st = check_labels(ctx, op, labels, g.m, classes, 1, counts))) {
        free(counts);
        return st;
    }
    const size_t K = (size_t)classes;
    float *lift_h = NULL, *alpha = malloc((K + 1) * sizeof *alpha), *gamma = malloc(K * sizeof *gamma);
    wbcl_circulant *net = NULL;
    ws w;
    fit_log f;
    memset(&w, 0, sizeof w);
    memset(&f, 0, sizeof f);
    const size_t L = (size_t)params->layers, nb = (K + 1) * g.P;
    f.info_h = malloc(2 * L * 2 * nb * sizeof *f.info_h);
    f.ld_h = malloc(L * nb * sizeof *f.ld_h);
    f.cnt_h = malloc(L * K * sizeof *f.cnt_h);
    f.cnt_z = malloc(K * sizeof *f.cnt_z);
    f.same_h = malloc(L * sizeof *f.same_h);
    f.ldc_h = malloc(L * nb * sizeof *f.ldc_h);
    f.L = L;
    f.reuse = progress == NULL;
    if (!alpha || !gamma || !f.info_h || !f.ld_h || !f.cnt_h || !f.cnt_z || !f.same_h || !f.ldc_h) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
        goto done;
    }
    if (lift) {
        lift_h = malloc(lift->numel * sizeof *lift_h);
        if (!lift_h) {
            st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
            goto done;
        }
        if ((st = wbcl_tensor_read(ctx, lift, lift_h, lift->numel))) goto done;
        for (size_t i = 0; i < lift->numel; i++)
            if (!isfinite(lift_h[i])) {
                st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: lifting kernel element %zu is not finite", op, i);
                goto done;
            }
    }
    if ((st = wbcl__circulant_new(ctx, g.dims, C, g.H, g.W, classes, params->layers, params, &net))) goto done;
    if ((st = wbcl__circulant_set_extra(net, NULL, lift_h, gx.C, kh, kw))) goto done;
    net->hist = calloc((size_t)params->layers * 3, sizeof *net->hist);
    if (!net->hist) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
        goto done;
    }
    if ((st = ws_alloc(ctx, &w, &g, K, labels))) goto done;
    if ((st = features_in(ctx, &w, X, lift ? lift->mem : NULL, gx.C, kh, kw)) || (st = enter(ctx, op, &w, 1)))
        goto done;
    for (size_t j = 0; j < K; j++) {
        alpha[j] = (float)((double)C / ((double)counts[j] * params->eps2));
        gamma[j] = (float)((double)counts[j] / (double)g.m);
    }
    alpha[K] = (float)((double)C / ((double)g.m * params->eps2));
    /* No read-back inside the loop (unless progress is wanted): pivots, log-determinants and the predicted
     * groups stay on the device and are checked and summed once at the end (collect), before Z is written. */
    if ((st = wbcl__buffer(ctx, 2 * L * 2 * nb * sizeof(int), "pivot info", &f.info)) ||
        (st = wbcl__buffer(ctx, L * nb * sizeof(float), "log-determinants", &f.ld)) ||
        (st = wbcl__buffer(ctx, L * K * sizeof(int), "class counts", &f.cnt)) ||
        (st = wbcl__buffer(ctx, L * sizeof(int), "group flags", &f.same)) ||
        (st = wbcl__buffer(ctx, L * nb * sizeof(float), "log-determinants", &f.ldc)) ||
        (st = fill_int(ctx, f.info, -1, 2 * L * 2 * nb, "pivot info")) ||
        (st = write_buf(ctx, w.alpha, (K + 1) * sizeof(float), alpha, "alpha")) ||
        (st = set_groups(ctx, &w, labels)))
        goto done;
    for (size_t l = 0; l < L; l++) {
        cl_int e = clEnqueueWriteBuffer(ctx->queue, net->gam[l], CL_FALSE, 0, K * sizeof(float), gamma, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            st = wbcl__cl_fail(ctx, e, "%s: writing gamma", op);
            goto done;
        }
        /* the objective of layer l (on its output, grouped by prediction) is skipped on the device when the
         * predictions are the true labels and layer l+1 follows: its construction factors the same matrices
         * (collect takes those log-determinants) */
        const int skippable = f.reuse && l + 1 < L;
        if ((st = enq_gram(ctx, &w, w.mask, w.boff, w.blocks, w.zero, 0)) ||
            (st = enq_shinv(ctx, &w, w.alpha, net->ops[l], f.ldc, l * nb, f.info, 2 * l * 2 * nb, w.zero, 0)) ||
            (st = apply_layer(ctx, &w, net->ops[l], net->gam[l], params)) ||
            (st = enq_groups(ctx, &w, f.cnt, l * K, params->eps2, f.same, l)) ||
            (st = enq_gram(ctx, &w, w.mask2, w.boff2, w.blocks2, skippable ? f.same : w.zero, skippable ? l : 0)) ||
            (st = enq_shinv(ctx, &w, w.alpha2, NULL, f.ld, l * nb, f.info, (2 * l + 1) * 2 * nb,
                            skippable ? f.same : w.zero, skippable ? l : 0)))
            goto done;
        memcpy(net->gamma + l * K, gamma, K * sizeof *gamma);
        if (progress) {
            if ((st = collect(ctx, op, &w, &f, l, l + 1, net->hist))) goto done;
            progress((int)l + 1, net->hist[3 * l], net->hist[3 * l + 1], net->hist[3 * l + 2], user);
        }
    }
    if (!progress && (st = collect(ctx, op, &w, &f, 0, L, net->hist))) goto done;
    if (Z) {
        if ((st = leave(ctx, &w, w.Zr)) || (st = copy_buf(ctx, w.Zr, Z->mem, g.m * C * g.N * sizeof(float), "Z")))
            goto done;
    }
    if ((st = finish(ctx, op))) goto done;
    *out = net;
    net = NULL;
done:
    clFinish(ctx->queue); /* no enqueued transfer may outlive the host arrays (error paths) */
    release(&f.info);
    release(&f.ld);
    release(&f.cnt);
    release(&f.same);
    release(&f.ldc);
    free(f.same_h);
    free(f.ldc_h);
    free(f.info_h);
    free(f.ld_h);
    free(f.cnt_h);
    free(f.cnt_z);
    ws_free(&w);
    wbcl_circulant_destroy(net);
    free(counts);
    free(lift_h);
    free(alpha);
    free(gamma);
    return st;
}

wbcl_status wbcl_circulant_apply(wbcl_context *ctx, const wbcl_circulant *net, const wbcl_tensor *X, wbcl_tensor *Z,
                                 int *yhat, float *pi)
{
    static const char op[] = "wbcl_circulant_apply";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!net) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: net is NULL", op);
    if (net->ctx != ctx) return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: model from another context", op);
    geom gx = {0}, gz = {0};
    wbcl_status st;
    if ((st = signal_geom(ctx, op, "X", X, &gx)) || (st = signal_geom(ctx, op, "Z", Z, &gz))) return st;
    const size_t Cin = net->lift ? net->Cin : net->C;
    char a[96];
    if (gx.dims != net->dims || gx.C != Cin || gx.H != net->H || gx.W != net->W)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: X has shape %s; the model takes (m, %zu, %s%zu)", op,
                          wbcl__shape_str(a, sizeof a, X->ndim, X->shape), Cin, net->dims == 2 ? "H, " : "", net->W);
    if (gz.dims != net->dims || gz.m != gx.m || gz.C != net->C || gz.H != net->H || gz.W != net->W)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: Z has shape %s; expected (%zu, %zu, %s%zu)", op,
                          wbcl__shape_str(a, sizeof a, Z->ndim, Z->shape), gx.m, net->C, net->dims == 2 ? "H, " : "",
                          net->W);
    geom g = gx;
    g.C = net->C;
    ws w;
    cl_mem liftm = NULL;
    if ((st = ws_alloc(ctx, &w, &g, (size_t)net->K, NULL))) return st;
    if (net->lift) {
        size_t n = net->C * net->Cin * net->kh * net->kw;
        if ((st = wbcl__buffer(ctx, n * sizeof(float), "lifting kernel", &liftm)) ||
            (st = write_buf(ctx, liftm, n * sizeof(float), net->lift, "lifting kernel")))
            goto done;
    }
    if ((st = features_in(ctx, &w, X, liftm, net->Cin, net->kh, net->kw)) || (st = enter(ctx, op, &w, 1))) goto done;
    for (int l = 0; l < net->L; l++)
        if ((st = apply_layer(ctx, &w, net->ops[l], net->gam[l], &net->params))) goto done;
    if ((yhat || pi) && (st = read_memberships(ctx, &w, yhat, pi))) goto done;
    if ((st = leave(ctx, &w, w.Zr)) || (st = copy_buf(ctx, w.Zr, Z->mem, g.m * g.C * g.N * sizeof(float), "Z")))
        goto done;
    st = finish(ctx, op);
done:
    release(&liftm);
    ws_free(&w);
    return st;
}

wbcl_status wbcl_circulant_objective(wbcl_context *ctx, const wbcl_tensor *Z, const int *labels, int classes,
                                     float eps2, double *dR, double *R, double *Rc)
{
    static const char op[] = "wbcl_circulant_objective";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    geom g = {0};
    wbcl_status st;
    if ((st = signal_geom(ctx, op, "Z", Z, &g)) || (st = check_channels(ctx, op, g.C))) return st;
    if (!(eps2 > 0.0f) || !isfinite(eps2))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: eps2 = %g must be finite and > 0", op, (double)eps2);
    size_t *counts = malloc((size_t)(classes > 0 && classes <= MAX_CLASSES ? classes : 1) * sizeof *counts);
    if (!counts) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    st = check_labels(ctx, op, labels, g.m, classes, 0, counts);
    free(counts);
    if (st) return st;
    ws w;
    double o[3];
    if ((st = ws_alloc(ctx, &w, &g, (size_t)classes, NULL))) return st;
    if (!(st = features_in(ctx, &w, Z, NULL, 0, 0, 0)) && !(st = enter(ctx, op, &w, 0)) &&
        !(st = objective_of(ctx, op, &w, labels, eps2, o))) {
        if (dR) *dR = o[0];
        if (R) *R = o[1];
        if (Rc) *Rc = o[2];
    }
    ws_free(&w);
    return st;
}

/* ---- construction over several participants (data parallel) ----------------------------------
 *
 * The construction sees the training samples only through per-frequency statistics: per layer the
 * group Gram matrices S_{j,p} (lower triangles; group K: every sample) and the group sizes. Each
 * participant computes them on its own shard with circ_gram, they are summed in double through
 * comm->sum (C(C+1)/2 complex entries per matrix, (K+1) P matrices: O(K C^2 T), whatever m), rounded
 * back to float and written over the local ones; every participant then factors the same matrices
 * (the same E_p, C_{j,p}), applies the layer to its own samples, and sums the statistics grouped by
 * yhat for the objective the same way. Two sums per layer, plus one of the geometry at the start and
 * the final agreement. With one participant whose sum leaves the buffer as it is, this is
 * wbcl_circulant_fit bit for bit (float -> double -> float is exact). */

typedef struct {
    const wbcl_redunet_comm *comm;
    int known; /* a sum reported a failure: no further calls */
    double *buf;
    float *S_h;
} shard_comm;

static wbcl_status shard_sum(wbcl_context *ctx, const char *op, shard_comm *sc, double *buf, size_t n)
{
    if (sc->comm->sum(buf, n, 0, sc->comm->user)) {
        sc->known = 1;
        return wbcl__fail(ctx, WBCL_ERROR_PEER, "%s: another participant failed (or the transport did)", op);
    }
    return WBCL_SUCCESS;
}

/* The shard fit's two steps on host labels / host alphas, with the pivot check right away (the
 * statistics are summed over the participants between them, so nothing is deferred here):
 * the per-frequency Gram matrices of the groups given by labels (sample-indexed) into w->S, and
 * M = alpha (I + alpha S)^-1 (M may be NULL: log-determinants only) with the log-determinants in
 * w->ld_h. layer: 0-based, named in a pivot failure. */
static wbcl_status shard_gram(wbcl_context *ctx, ws *w, const int *labels)
{
    wbcl_status st = set_groups(ctx, w, labels);
    if (!st) st = enq_gram(ctx, w, w->mask, w->boff, w->blocks, w->zero, 0);
    return st;
}

static wbcl_status shard_shinv(wbcl_context *ctx, const char *op, ws *w, const float *alpha_h, cl_mem M, int layer,
                               const char *stage)
{
    const size_t nb = (w->K + 1) * w->g.P;
    wbcl_status st;
    if ((st = write_buf(ctx, w->alpha, (w->K + 1) * sizeof(float), alpha_h, "alpha")) ||
        (st = fill_int(ctx, w->info, -1, 2 * nb, "pivot info")) ||
        (st = enq_shinv(ctx, w, w->alpha, M, w->ld, 0, w->info, 0, w->zero, 0)) ||
        (st = read_buf(ctx, w->info, 2 * nb * sizeof(int), w->info_h, "pivot info")) ||
        (st = check_info(ctx, op, w, w->info_h, layer + 1, stage)) ||
        (st = read_buf(ctx, w->ld, nb * sizeof(float), w->ld_h, "log-determinants")))
        return st;
    return WBCL_SUCCESS;
}

/* w->S (local, group sizes cnt[K+1] as doubles in/out) -> the sums over all participants, in w->S and cnt. */
/* The device keeps the (K+1) P matrices in blocks of CIRC_MW lanes (cl/circulant.cl, CI_MW): the real
 * part of element (c, d) of matrix t at S_AT(t, c, d), its imaginary part CIRC_MW floats later. Only the
 * lower triangles are summed; the upper ones are never read (the factorization uses the lower). */
#define CIRC_MW 16
#define S_AT(t, c, d) ((((t) / CIRC_MW * C + (c)) * C + (d)) * 2 * CIRC_MW + (t) % CIRC_MW)

static wbcl_status shard_sum_gram(wbcl_context *ctx, const char *op, shard_comm *sc, ws *w, double *cnt)
{
    const geom *g = &w->g;
    const size_t C = g->C, nb = (w->K + 1) * g->P, tri = C * (C + 1) / 2, CC = C * C;
    const size_t n = nb * tri * 2 + w->K + 1, nbl = (nb + CIRC_MW - 1) / CIRC_MW * CIRC_MW;
    wbcl_status st;
    if ((st = read_buf(ctx, w->S, nbl * CC * 2 * sizeof(float), sc->S_h, "per-frequency matrices"))) return st;
    double *b = sc->buf;
    for (size_t t = 0; t < nb; t++)
        for (size_t c = 0; c < C; c++)
            for (size_t d = 0; d <= c; d++) {
                const float *s = sc->S_h + S_AT(t, c, d);
                *b++ = s[0];
                *b++ = s[CIRC_MW];
            }
    memcpy(b, cnt, (w->K + 1) * sizeof *cnt);
    if ((st = shard_sum(ctx, op, sc, sc->buf, n))) return st;
    b = sc->buf;
    for (size_t t = 0; t < nb; t++)
        for (size_t c = 0; c < C; c++)
            for (size_t d = 0; d <= c; d++) {
                float *s = sc->S_h + S_AT(t, c, d);
                s[0] = (float)*b++;
                s[CIRC_MW] = (float)*b++;
            }
    memcpy(cnt, b, (w->K + 1) * sizeof *cnt);
    return write_buf(ctx, w->S, nbl * CC * 2 * sizeof(float), sc->S_h, "per-frequency matrices");
}

static wbcl_status fit_shard_local(wbcl_context *ctx, const char *op, shard_comm *sc, const wbcl_tensor *X,
                                   const wbcl_tensor *lift, const int *labels, int classes,
                                   const wbcl_circulant_params *params, wbcl_circulant_progress_fn progress,
                                   void *user, wbcl_tensor *Z, wbcl_circulant **out)
{
    geom gx = {0}, g = {0};
    size_t C = 0, kh = 1, kw = 1;
    wbcl_status st;
    if ((st = signal_geom(ctx, op, "X", X, &gx)) || (st = check_params(ctx, op, params))) return st;
    if (lift) {
        if ((st = lift_geom(ctx, op, lift, &gx, &C, &kh, &kw))) return st;
    } else {
        C = gx.C;
    }
    if ((st = check_channels(ctx, op, C))) return st;
    g = gx;
    g.C = C;
    if (Z) {
        geom gz = {0};
        if ((st = signal_geom(ctx, op, "Z", Z, &gz))) return st;
        if (gz.dims != g.dims || gz.m != g.m || gz.C != C || gz.H != g.H || gz.W != g.W) {
            char a[96];
            return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: Z has shape %s; expected (%zu, %zu, %s%zu)", op,
                              wbcl__shape_str(a, sizeof a, Z->ndim, Z->shape), g.m, C,
                              g.dims == 2 ? "H, " : "", g.W);
        }
    }
    size_t *counts = malloc((size_t)(classes > 0 && classes <= MAX_CLASSES ? classes : 1) * sizeof *counts);
    if (!counts) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    if ((st = check_labels(ctx, op, labels, g.m, classes, 0, counts))) {
        free(counts);
        return st;
    }
    const size_t K = (size_t)classes, nb = (K + 1) * g.P;
    /* the geometry and the model settings must agree: sums of 1, x and x^2 over the participants */
    enum { NG = 12 };
    double geo[1 + 2 * NG];
    {
        const double v[NG] = {(double)g.dims,  (double)C,          (double)g.H,         (double)g.W,
                              (double)K,       (double)gx.C,       (double)kh,          (double)kw,
                              (double)params->layers, (double)params->eta, (double)params->eps2,
                              (double)params->lambda};
        geo[0] = 1.0;
        for (int i = 0; i < NG; i++) geo[1 + i] = v[i], geo[1 + NG + i] = v[i] * v[i];
    }
    double *cnt = malloc((K + 1) * sizeof *cnt);
    float *lift_h = NULL, *alpha = malloc((K + 1) * sizeof *alpha), *gamma = malloc(K * sizeof *gamma);
    int *yh = malloc(g.m * sizeof *yh);
    wbcl_circulant *net = NULL;
    ws w;
    memset(&w, 0, sizeof w);
    sc->S_h = malloc((nb + CIRC_MW - 1) / CIRC_MW * CIRC_MW * C * C * 2 * sizeof *sc->S_h);
    sc->buf = malloc((nb * (C * (C + 1) / 2) * 2 + K + 1) * sizeof *sc->buf);
    if (!cnt || !alpha || !gamma || !yh || !sc->S_h || !sc->buf) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
        goto done;
    }
    if ((st = shard_sum(ctx, op, sc, geo, sizeof geo / sizeof geo[0]))) goto done;
    for (int i = 0; i < NG; i++) { /* the variance over the participants is zero */
        const double mean = geo[1 + i] / geo[0];
        if (fabs(geo[1 + NG + i] / geo[0] - mean * mean) > 1e-9 * (1.0 + mean * mean)) {
            st = wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                            "%s: the participants disagree on the geometry, classes, lifting kernel or parameters",
                            op);
            goto done;
        }
    }
    if (lift) {
        lift_h = malloc(lift->numel * sizeof *lift_h);
        if (!lift_h) {
            st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
            goto done;
        }
        if ((st = wbcl_tensor_read(ctx, lift, lift_h, lift->numel))) goto done;
        for (size_t i = 0; i < lift->numel; i++)
            if (!isfinite(lift_h[i])) {
                st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: lifting kernel element %zu is not finite", op, i);
                goto done;
            }
    }
    if ((st = wbcl__circulant_new(ctx, g.dims, C, g.H, g.W, classes, params->layers, params, &net))) goto done;
    if ((st = wbcl__circulant_set_extra(net, NULL, lift_h, gx.C, kh, kw))) goto done;
    net->hist = calloc((size_t)params->layers * 3, sizeof *net->hist);
    if (!net->hist) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
        goto done;
    }
    if ((st = ws_alloc(ctx, &w, &g, K, labels))) goto done;
    if ((st = features_in(ctx, &w, X, lift ? lift->mem : NULL, gx.C, kh, kw)) || (st = enter(ctx, op, &w, 1)))
        goto done;
    double m_all = 0.0;
    for (int l = 0; l < params->layers; l++) {
        for (size_t j = 0; j < K; j++) cnt[j] = (double)counts[j];
        cnt[K] = (double)g.m;
        if ((st = shard_gram(ctx, &w, labels)) || (st = shard_sum_gram(ctx, op, sc, &w, cnt))) goto done;
        if (l == 0) {
            for (size_t j = 0; j < K; j++)
                if (!cnt[j]) {
                    st = wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: class %zu has no samples on any participant",
                                    op, j);
                    goto done;
                }
            m_all = cnt[K];
            for (size_t j = 0; j < K; j++) {
                alpha[j] = (float)((double)C / (cnt[j] * params->eps2));
                gamma[j] = (float)(cnt[j] / m_all);
            }
            alpha[K] = (float)((double)C / (m_all * params->eps2));
        }
        if ((st = shard_shinv(ctx, op, &w, alpha, net->ops[l], l, "")) ||
            (st = write_buf(ctx, net->gam[l], K * sizeof(float), gamma, "gamma")) ||
            (st = apply_layer(ctx, &w, net->ops[l], net->gam[l], params)))
            goto done;
        memcpy(net->gamma + (size_t)l * K, gamma, K * sizeof *gamma);
        /* the objective of the output grouped by yhat, from the summed statistics */
        if ((st = read_memberships(ctx, &w, yh, NULL))) goto done;
        for (size_t j = 0; j <= K; j++) cnt[j] = 0.0;
        for (size_t b = 0; b < g.m; b++) cnt[yh[b]] += 1.0;
        cnt[K] = (double)g.m;
        if ((st = shard_gram(ctx, &w, yh)) || (st = shard_sum_gram(ctx, op, sc, &w, cnt))) goto done;
        float al[MAX_CLASSES + 1];
        for (size_t j = 0; j < K; j++) al[j] = cnt[j] ? (float)((double)C / (cnt[j] * params->eps2)) : 0.0f;
        al[K] = (float)((double)C / (cnt[K] * params->eps2));
        if ((st = shard_shinv(ctx, op, &w, al, NULL, l, " (objective)"))) goto done;
        double R = 0.0, Rc = 0.0;
        for (size_t p = 0; p < g.P; p++) {
            const size_t q = p % g.Wh;
            const double wt = (q == 0 || 2 * q == g.W) ? 1.0 : 2.0;
            R += wt * w.ld_h[K * g.P + p];
            for (size_t j = 0; j < K; j++)
                if (cnt[j]) Rc += wt * (cnt[j] / cnt[K]) * w.ld_h[j * g.P + p];
        }
        R /= 2.0 * (double)g.N;
        Rc /= 2.0 * (double)g.N;
        double *h = net->hist + 3 * (size_t)l;
        h[0] = R - Rc;
        h[1] = R;
        h[2] = Rc;
        if (progress) progress(l + 1, h[0], h[1], h[2], user);
    }
    if (Z) {
        if ((st = leave(ctx, &w, w.Zr)) || (st = copy_buf(ctx, w.Zr, Z->mem, g.m * C * g.N * sizeof(float), "Z")))
            goto done;
    }
    if ((st = finish(ctx, op))) goto done;
    *out = net;
    net = NULL;
done:
    ws_free(&w);
    wbcl_circulant_destroy(net);
    free(counts);
    free(cnt);
    free(lift_h);
    free(alpha);
    free(gamma);
    free(yh);
    free(sc->S_h);
    free(sc->buf);
    sc->S_h = NULL;
    sc->buf = NULL;
    return st;
}

wbcl_status wbcl_circulant_fit_shard(wbcl_context *ctx, const wbcl_tensor *X, const wbcl_tensor *lift,
                                     const int *labels, int classes, const wbcl_circulant_params *params,
                                     const wbcl_redunet_comm *comm, wbcl_circulant_progress_fn progress, void *user,
                                     wbcl_tensor *Z, wbcl_circulant **out)
{
    static const char op[] = "wbcl_circulant_fit_shard";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!comm) return wbcl_circulant_fit(ctx, X, lift, labels, classes, params, progress, user, Z, out);
    if (!comm->sum) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: comm->sum is NULL", op);
    if (!out) { /* cannot even report: still agree, so that no participant waits */
        comm->sum(NULL, 0, 1, comm->user);
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    }
    *out = NULL;
    shard_comm sc;
    memset(&sc, 0, sizeof sc);
    sc.comm = comm;
    wbcl_circulant *net = NULL;
    wbcl_status st = fit_shard_local(ctx, op, &sc, X, lift, labels, classes, params, progress, user, Z, &net);
    /* the final agreement (or this participant's one failed call) */
    if (!sc.known && comm->sum(NULL, 0, st != WBCL_SUCCESS, comm->user) && !st)
        st = wbcl__fail(ctx, WBCL_ERROR_PEER, "%s: another participant failed (or the transport did)", op);
    if (st) {
        wbcl_circulant_destroy(net);
        return st;
    }
    *out = net;
    return WBCL_SUCCESS;
}
