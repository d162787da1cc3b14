/* Shift-invariant ReduNet (include/wbcl/circulant.h): the device pipeline that construction,
 * application and the objective share, and the two ops that are the pipeline alone
 * (wbcl_circulant_lift, wbcl_circulant_apply): the workspace and lane layout, lifting, clFFT in
 * and out, per-frequency Gram matrices and batched complex Hermitian Cholesky, one layer's
 * application. Kernels in cl/circulant.cl; the family's other files: circulant_internal.h.
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
 * GPU-shaped contexts (ctx->variant) take a work-group per matrix for the per-frequency Cholesky
 * (circ_shifted_inverse_wg) and per bin for the Gram matrices (circ_gram_g) where the device allows it (else
 * circ_shifted_inverse_g, one matrix per work-item, and circ_gram), and the one-lane-per-work-item kernels for
 * the application (circ_op_square_g, circ_norms_q_g, circ_update_g, circ_scale_g) with more, shorter chunks
 * of bins (wbcl__circulant_ws_alloc); the parameter circulant.wg = 0 keeps circ_shifted_inverse_g, circ_gram
 * and circ_scale (the same results bit for bit). The layouts and the other kernels are shared. */
#include "circulant_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffers.h"
#include "fft.h"

#define FAMILY "circulant"

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

/* groups work-groups of wg work-items each (the GPU variant's work-group kernels). */
static wbcl_status launch_groups(wbcl_context *ctx, wbcl_kern *k, size_t groups, size_t wg)
{
    size_t g[1] = {groups * wg}, l[1] = {wg};
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

/* The GPU variant's work-group kernels (cl/circulant.cl): circ_shifted_inverse_wg takes exactly SHINV_WG
 * work-items (reqd_work_group_size) and C^2 complex floats of local memory; circ_gram_g any size up to
 * GRAM_WG (halved to the kernel's limit). */
#define SHINV_WG 64
#define GRAM_WG 128

/* *k = kernel name and *wg = the work-group size to launch it with: want if exact, else the largest power of
 * two <= want that the kernel allows, at least 32; *wg = 0 where the device cannot run it that way (local
 * memory, work-group size): the caller takes its one-item-per-matrix kernel instead. */
static wbcl_status wg_kernel(wbcl_context *ctx, size_t C, const char *name, size_t want, int exact, wbcl_kern **k,
                             int *wg)
{
    *wg = 0;
    if (!ctx->params.circulant_wg) return WBCL_SUCCESS;
    size_t limit = 0;
    cl_ulong lmem = 0;
    wbcl_status st = kern(ctx, C, name, k);
    if (!st) st = wbcl__kernel_wg_limit(ctx, *k, &limit);
    if (st) return st;
    cl_int e = clGetKernelWorkGroupInfo((*k)->kernel, ctx->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
    if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "querying the local memory of kernel '%s'", name);
    if (ctx->info.local_mem_size && lmem > ctx->info.local_mem_size) return WBCL_SUCCESS;
    size_t w = want;
    if (!exact)
        while (w > 32 && w > limit) w /= 2;
    if (w > limit) return WBCL_SUCCESS;
    *wg = (int)w;
    return WBCL_SUCCESS;
}

/* GPU variant: partial sums per sample of the two normalizations (circ_spec_partial_g, circ_real_partial_g),
 * kept in w->part (nch mp floats; m <= mp, so up to nch per sample fit), at most 64. */
static cl_uint norm_parts(const ws *w)
{
    size_t n = w->nch < 64 ? w->nch : 64;
    return (cl_uint)(n ? n : 1);
}

/* ---- workspace ------------------------------------------------------------------------------- */

void wbcl__circulant_ws_free(ws *w)
{
    cl_mem *all[] = {&w->Zr, &w->V, &w->Vt, &w->mask, &w->lane, &w->boff, &w->blocks, &w->S, &w->ld, &w->info, &w->alpha, &w->yhat, &w->nrm, &w->pi, &w->flag, &w->Vt2, &w->coef, &w->part, &w->npart, &w->valid, &w->mask2, &w->boff2, &w->blocks2, &w->alpha2, &w->label, &w->zero, &w->sq};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wbcl__tmp_release(all[i]);
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
wbcl_status wbcl__circulant_ws_alloc(wbcl_context *ctx, ws *w, const geom *g, size_t K, const int *labels)
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
        wbcl__circulant_ws_free(w);
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
     * (5 classes x chunk). GPU-shaped (one lane per work-item, the _g kernels): about 65536 work-items for
     * circ_update (lane, tile of 4 rows, chunk) and 131072 for circ_norms_q (lane, class, chunk), at most
     * one chunk per bin (an H200 has 132 SMs: a quarter of that left them under 8 warps each, bound by the
     * loads' latency). */
    const int gpu = ctx->variant == WBCL_VARIANT_GPU;
    w->nrt = gpu ? (g->C + 3) / 4 : 1;
    w->nch = gpu ? (65536 + mp * w->nrt - 1) / (mp * w->nrt) : 32;
    if (w->nch > g->P) w->nch = g->P;
    w->pchunk = (g->P + w->nch - 1) / w->nch;
    w->nch = (g->P + w->pchunk - 1) / w->pchunk;
    w->nchn = gpu ? (131072 + mp * K - 1) / (mp * K)
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
        (st = wbcl__buffer(ctx, w->nch * w->nrt * mp * sizeof(float), "partial norms", &w->part)) ||
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
        wbcl__circulant_ws_free(w);
        return st;
    }
    w->info_h = malloc(2 * nb * sizeof *w->info_h);
    w->ld_h = malloc(nb * sizeof *w->ld_h);
    w->yhat_h = malloc(mp * sizeof *w->yhat_h);
    w->mask_h = malloc((K + 1) * w->mp * sizeof *w->mask_h);
    if (!w->info_h || !w->ld_h || !w->yhat_h || !w->mask_h) {
        wbcl__circulant_ws_free(w);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "shift-invariant ReduNet: out of host memory");
    }
    int *lab = malloc(mp * sizeof *lab);
    if (!lab) {
        wbcl__circulant_ws_free(w);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "shift-invariant ReduNet: out of host memory");
    }
    for (size_t l = 0; l < mp; l++) lab[l] = labels && w->sample_h[l] >= 0 ? labels[w->sample_h[l]] : -1;
    st = wbcl__write_buf(ctx, w->label, mp * sizeof(int), lab, "lane labels");
    free(lab);
    if (st) {
        wbcl__circulant_ws_free(w);
        return st;
    }
    if ((st = wbcl__fill_int(ctx, w->S, 0, (nb + 15) / 16 * 16 * CC * 2,
                             "per-frequency matrices")) || /* lanes past nb */
        (st = wbcl__fill_int(ctx, w->zero, 0, 1, "zero")) ||
        (st = wbcl__write_buf(ctx, w->lane, g->m * sizeof(int), w->lane_h, "lanes")) ||
        (st = wbcl__write_buf(ctx, w->valid, mp * sizeof(int), w->sample_h, "lane samples"))) {
        wbcl__circulant_ws_free(w);
        return st;
    }
    return WBCL_SUCCESS;
}

/* Lane-indexed yhat / pi (device) -> sample-indexed host arrays (either may be NULL). */
wbcl_status wbcl__circulant_read_memberships(wbcl_context *ctx, ws *w, int *yhat, float *pi)
{
    const size_t m = w->g.m, K = w->K, mp = w->mp;
    wbcl_status st;
    if (yhat) {
        if ((st = wbcl__read_buf(ctx, w->yhat, 0, mp * sizeof(int), w->yhat_h, "yhat"))) return st;
        for (size_t b = 0; b < m; b++) yhat[b] = w->yhat_h[w->lane_h[b]];
    }
    if (pi) {
        float *t = malloc(mp * K * sizeof *t);
        if (!t) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "shift-invariant ReduNet: out of host memory");
        if ((st = wbcl__read_buf(ctx, w->pi, 0, mp * K * sizeof(float), t, "memberships"))) {
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
wbcl_status wbcl__circulant_enter(wbcl_context *ctx, const char *op, ws *w, int normalize)
{
    const geom *g = &w->g;
    wbcl_status st = wbcl__fft_forward(ctx, g->m * g->C, g->H, g->W, w->Zr, w->V);
    if (st) return st;
    if ((st = wbcl__fill_int(ctx, w->flag, 0, 1, "flag"))) return st;
    const int gpu = ctx->variant == WBCL_VARIANT_GPU;
    cl_uint um = (cl_uint)g->m, uP = (cl_uint)g->P, uW = (cl_uint)g->W, uWh = (cl_uint)g->Wh, unchs = norm_parts(w);
    if (normalize && gpu) { /* nchs partial sums per sample (w->part), then the scaling */
        wbcl_kern *kp, *ks;
        if ((st = kern(ctx, g->C, "circ_spec_partial_g", &kp)) || (st = kern(ctx, g->C, "circ_spec_scale_g", &ks)))
            return st;
        WBCL_ARG(ctx, kp, 0, w->V);
        WBCL_ARG(ctx, kp, 1, w->part);
        WBCL_ARG(ctx, kp, 2, um);
        WBCL_ARG(ctx, kp, 3, uP);
        WBCL_ARG(ctx, kp, 4, uW);
        WBCL_ARG(ctx, kp, 5, uWh);
        WBCL_ARG(ctx, kp, 6, unchs);
        WBCL_ARG(ctx, ks, 0, w->V);
        WBCL_ARG(ctx, ks, 1, w->part);
        WBCL_ARG(ctx, ks, 2, um);
        WBCL_ARG(ctx, ks, 3, uP);
        WBCL_ARG(ctx, ks, 4, unchs);
        WBCL_ARG(ctx, ks, 5, w->flag);
        if ((st = launch1(ctx, kp, g->m * unchs)) || (st = launch1(ctx, ks, g->m * unchs))) return st;
    } else if (normalize) {
        wbcl_kern *k;
        if ((st = kern(ctx, g->C, "circ_spec_normalize", &k))) return st;
        WBCL_ARG(ctx, k, 0, w->V);
        WBCL_ARG(ctx, k, 1, um);
        WBCL_ARG(ctx, k, 2, uP);
        WBCL_ARG(ctx, k, 3, uW);
        WBCL_ARG(ctx, k, 4, uWh);
        WBCL_ARG(ctx, k, 5, w->flag);
        if ((st = launch1(ctx, k, g->m))) return st;
    }
    int flag = 0;
    if (normalize && (st = wbcl__read_buf(ctx, w->flag, 0, sizeof flag, &flag, "flag"))) return st;
    if (flag) return wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: non-finite input (NaN or Inf in the signals or features, or an overflow)", op);
    wbcl_kern *kt;
    if ((st = kern(ctx, g->C, gpu ? "circ_to_lanes_g" : "circ_to_lanes", &kt))) return st;
    cl_uint ump = (cl_uint)w->mp;
    WBCL_ARG(ctx, kt, 0, w->V);
    WBCL_ARG(ctx, kt, 1, w->Vt);
    WBCL_ARG(ctx, kt, 2, w->valid); /* sample of each lane, -1: padding (written as 0) */
    WBCL_ARG(ctx, kt, 3, uP);
    WBCL_ARG(ctx, kt, 4, ump);
    return launch1(ctx, kt, gpu ? g->C * g->P * w->mp /* an element per work-item */ : g->C * g->P);
}

/* V -> Z = real(normalize(IFFT(V))) into dst (V is overwritten). */
wbcl_status wbcl__circulant_leave(wbcl_context *ctx, ws *w, cl_mem dst)
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
    cl_uint um = (cl_uint)g->m, un = (cl_uint)(g->C * g->N);
    if (ctx->variant == WBCL_VARIANT_GPU) { /* partial sums per sample, then the scaling (as in enter) */
        wbcl_kern *ks;
        cl_uint unchs = norm_parts(w);
        if ((st = kern(ctx, g->C, "circ_real_partial_g", &k)) || (st = kern(ctx, g->C, "circ_real_scale_g", &ks)))
            return st;
        wbcl_kern *pass[2] = {k, ks}; /* the same arguments, one launch after the other */
        for (int i = 0; i < 2; i++) {
            WBCL_ARG(ctx, pass[i], 0, dst);
            WBCL_ARG(ctx, pass[i], 1, w->part);
            WBCL_ARG(ctx, pass[i], 2, um);
            WBCL_ARG(ctx, pass[i], 3, un);
            WBCL_ARG(ctx, pass[i], 4, unchs);
            if ((st = launch1(ctx, pass[i], g->m * unchs))) return st;
        }
        return WBCL_SUCCESS;
    }
    if ((st = kern(ctx, g->C, "circ_real_normalize", &k))) return st;
    WBCL_ARG(ctx, k, 0, dst);
    WBCL_ARG(ctx, k, 1, um);
    WBCL_ARG(ctx, k, 2, un);
    return launch1(ctx, k, g->m);
}

/* Per-group Gram matrices S of the spectra for the groups (mask, boff, blocks) j < K, which must partition
 * the samples: group K (every sample) is computed as their sum. */
wbcl_status wbcl__circulant_enq_gram(wbcl_context *ctx, ws *w, cl_mem mask, cl_mem boff, cl_mem blocks, cl_mem skip,
                                     size_t skip_off)
{
    const geom *g = &w->g;
    wbcl_kern *k;
    wbcl_status st;
    int wg = 0; /* GPU: one bin per work-group (circ_gram_g), else one (bin, row) per work-item */
    if (ctx->variant == WBCL_VARIANT_GPU && (st = wg_kernel(ctx, g->C, "circ_gram_g", GRAM_WG, 0, &k, &wg))) return st;
    if (!wg && (st = kern(ctx, g->C, "circ_gram", &k))) return st;
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
    if (wg) return launch_groups(ctx, k, g->P, (size_t)wg);
    return launch1(ctx, k, g->P * g->C); /* (bin, row): all K classes, then group K as their sum */
}

/* Groups from host labels into w->mask, w->boff, w->blocks. */
wbcl_status wbcl__circulant_set_groups(wbcl_context *ctx, ws *w, const int *labels)
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
    if ((st = wbcl__write_buf(ctx, w->mask, (K + 1) * mp * sizeof(float), w->mask_h, "group masks")) ||
        (st = wbcl__write_buf(ctx, w->boff, (K + 2) * sizeof(int), w->boff_h, "group block offsets")) ||
        (st = wbcl__write_buf(ctx, w->blocks, (nq ? nq : 1) * sizeof(int), w->blocks_h, "group blocks")))
        return st;
    return WBCL_SUCCESS;
}

/* Groups by the lane-indexed predictions w->yhat into w->mask2, boff2, blocks2, the class counts into
 * cnt at element offset cnt_off (K ints) and the objective's alpha into w->alpha2, on the device; same at
 * same_off = 1 when every prediction is the true label (w->label), and then alpha2 = w->alpha. */
wbcl_status wbcl__circulant_enq_groups(wbcl_context *ctx, ws *w, cl_mem cnt, size_t cnt_off, float eps2, cl_mem same,
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
wbcl_status wbcl__circulant_enq_shinv(wbcl_context *ctx, ws *w, cl_mem alpha, cl_mem M, cl_mem ld, size_t ld_off,
                                      cl_mem info, size_t info_off, cl_mem skip, size_t skip_off)
{
    const geom *g = &w->g;
    const size_t nb = (w->K + 1) * g->P;
    wbcl_kern *k;
    wbcl_status st;
    const int gpu = ctx->variant == WBCL_VARIANT_GPU;
    int wg = 0; /* GPU: one matrix per work-group where the device allows it, else one per work-item (_g) */
    if (gpu && (st = wg_kernel(ctx, g->C, "circ_shifted_inverse_wg", SHINV_WG, 1, &k, &wg))) return st;
    if (!wg && (st = kern(ctx, g->C, gpu ? "circ_shifted_inverse_g" : "circ_shifted_inverse", &k))) return st;
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
    if (wg) return launch_groups(ctx, k, (nb + 15) / 16 * 16, SHINV_WG); /* padding lanes of the last block too */
    return gpu ? launch1(ctx, k, (nb + 15) / 16 * 16)
               : launch_heavy(ctx, k, (nb + 15) / 16); /* 16 matrices per work-item */
}

/* Pivot info of one batch of (K+1) P matrices (host copy) -> NUMERIC naming the layer (1-based; 0: none),
 * the operator and the frequency of the first failure. */
wbcl_status wbcl__circulant_check_info(wbcl_context *ctx, const char *op, const ws *w, const int *info, int layer,
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

/* One layer's application to the spectra w->Vt with operators ops and gamma (device): circ_op_square -> circ_norms_q ->
 * circ_softmax -> circ_update (into w->Vt2) -> circ_scale, then Vt and Vt2 trade places. */
wbcl_status wbcl__circulant_apply_layer(wbcl_context *ctx, ws *w, cl_mem ops, cl_mem gam,
                                        const wbcl_circulant_params *p)
{
    const geom *g = &w->g;
    wbcl_kern *ks, *ku, *kc;
    wbcl_status st;
    const int gpu = ctx->variant == WBCL_VARIANT_GPU; /* one lane per work-item: the _g kernels */
    const int scale_g = gpu && ctx->params.circulant_wg; /* circulant.wg = 0: circ_scale, 16 lanes per item */
    if ((st = kern(ctx, g->C, "circ_softmax", &ks)) ||
        (st = kern(ctx, g->C, gpu ? "circ_update_g" : "circ_update", &ku)) ||
        (st = kern(ctx, g->C, scale_g ? "circ_scale_g" : "circ_scale", &kc)))
        return st;
    const size_t nblk = w->mp / 16;
    cl_uint ump = (cl_uint)w->mp, uP = (cl_uint)g->P, uW = (cl_uint)g->W, uWh = (cl_uint)g->Wh, uK = (cl_uint)w->K,
            upc = (cl_uint)w->pchunk, unparts = (cl_uint)(w->nch * w->nrt); /* circ_update's partial sums */
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
    if ((st = gpu ? launch1(ctx, ku, w->mp * w->nrt * w->nch) /* (lane, tile of rows, chunk of bins) */
                  : launch_heavy(ctx, ku, w->nch))) /* one chunk of bins (all lanes) per work-item */
        return st;
    WBCL_ARG(ctx, kc, 0, w->Vt2);
    WBCL_ARG(ctx, kc, 1, w->part);
    WBCL_ARG(ctx, kc, 2, ump);
    WBCL_ARG(ctx, kc, 3, uP);
    WBCL_ARG(ctx, kc, 4, upc);
    WBCL_ARG(ctx, kc, 5, unparts);
    if ((st = scale_g ? launch1(ctx, kc, w->mp * w->nch) /* (lane, chunk of bins) */
                                              : launch_heavy(ctx, kc, nblk * w->nch))) /* (16 lanes, chunk) */
        return st;
    cl_mem t = w->Vt;
    w->Vt = w->Vt2;
    w->Vt2 = t;
    return WBCL_SUCCESS;
}

/* Features of X (lifted by the kernel if any) into w->Zr. */
wbcl_status wbcl__circulant_features_in(wbcl_context *ctx, ws *w, const wbcl_tensor *X, cl_mem lift, size_t Cin,
                                        size_t kh, size_t kw)
{
    const geom *g = &w->g;
    if (lift) return enq_lift(ctx, X->mem, lift, w->Zr, g->m, Cin, g->C, g->H, g->W, kh, kw);
    return wbcl__copy_buf(ctx, X->mem, w->Zr, g->m * g->C * g->N * sizeof(float), "features");
}

/* ---- public ops ------------------------------------------------------------------------------- */

wbcl_status wbcl_circulant_lift(wbcl_context *ctx, const wbcl_tensor *X, const wbcl_tensor *Wt, wbcl_tensor *Y)
{
    static const char op[] = "wbcl_circulant_lift";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    geom gx = {0}, gy = {0};
    size_t Cout = 0, kh = 1, kw = 1;
    wbcl_status st;
    if ((st = wbcl__circulant_signal_shape(ctx, op, "X", X, &gx)) ||
        (st = wbcl__circulant_lift_geom(ctx, op, Wt, &gx, &Cout, &kh, &kw)) ||
        (st = wbcl__circulant_signal_shape(ctx, op, "Y", Y, &gy)))
        return st;
    if (Y == X) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: Y must not be X", op);
    if (gy.dims != gx.dims || gy.m != gx.m || gy.C != Cout || gy.H != gx.H || gy.W != gx.W) {
        char a[96], b[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: Y has shape %s; expected (m, Cout, ...) for X %s", op,
                          wbcl__shape_str(a, sizeof a, Y->ndim, Y->shape), wbcl__shape_str(b, sizeof b, X->ndim, X->shape));
    }
    return enq_lift(ctx, X->mem, Wt->mem, Y->mem, gx.m, gx.C, Cout, gx.H, gx.W, kh, kw);
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
    if ((st = wbcl__circulant_signal_geom(ctx, op, "X", X, &gx)) ||
        (st = wbcl__circulant_signal_geom(ctx, op, "Z", Z, &gz)))
        return st;
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
    if ((st = wbcl__circulant_ws_alloc(ctx, &w, &g, (size_t)net->K, NULL))) return st;
    if (net->lift) {
        size_t n = net->C * net->Cin * net->kh * net->kw;
        if ((st = wbcl__buffer(ctx, n * sizeof(float), "lifting kernel", &liftm)) ||
            (st = wbcl__write_buf(ctx, liftm, n * sizeof(float), net->lift, "lifting kernel")))
            goto done;
    }
    if ((st = wbcl__circulant_features_in(ctx, &w, X, liftm, net->Cin, net->kh, net->kw)) ||
        (st = wbcl__circulant_enter(ctx, op, &w, 1)))
        goto done;
    for (int l = 0; l < net->L; l++)
        if ((st = wbcl__circulant_apply_layer(ctx, &w, net->ops[l], net->gam[l], &net->params))) goto done;
    if ((yhat || pi) && (st = wbcl__circulant_read_memberships(ctx, &w, yhat, pi))) goto done;
    if ((st = wbcl__circulant_leave(ctx, &w, w.Zr)) ||
        (st = wbcl__copy_buf(ctx, w.Zr, Z->mem, g.m * g.C * g.N * sizeof(float), "Z")))
        goto done;
    st = wbcl__finish(ctx, op);
done:
    wbcl__tmp_release(&liftm);
    wbcl__circulant_ws_free(&w);
    return st;
}
