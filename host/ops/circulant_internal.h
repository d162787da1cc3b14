/* Internals of the shift-invariant ReduNet (include/wbcl/circulant.h), shared by its files:
 *   circulant.c            the model object (its constructors below also serve the model files,
 *                          host/model/circulant_io.c) and the ops' argument checks;
 *   circulant_pipeline.c   the device pipeline: workspace and lane layout, lifting, clFFT in and
 *                          out, per-frequency Gram matrices and shifted inverses, one layer's
 *                          application; wbcl_circulant_lift and wbcl_circulant_apply;
 *   circulant_fit.c        construction: wbcl_circulant_fit, and wbcl_circulant_fit_shard over
 *                          several participants;
 *   circulant_objective.c  the objective (dR, R, Rc) of features: wbcl_circulant_objective.
 * Kernels in cl/circulant.cl. Not public API. */
#ifndef WBCL_CIRCULANT_INTERNAL_H
#define WBCL_CIRCULANT_INTERNAL_H

#include "internal.h"
#include "wbcl/circulant.h"

/* ---- the model object (circulant.c) ------------------------------------------------------------ */

#define MAX_CLASSES 1024 /* classes of a model (labels, per-class buffers) */

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

/* An empty model with L layers (device buffers allocated, contents undefined until set_layer). */
wbcl_status wbcl__circulant_new(wbcl_context *ctx, int dims, size_t C, size_t H, size_t W, int K, int L,
                                const wbcl_circulant_params *p, wbcl_circulant **out);
/* Layer l: ops (K+1, P, C, C) complex (re, im) floats, gamma (K). */
wbcl_status wbcl__circulant_set_layer(wbcl_context *ctx, wbcl_circulant *net, int l, const float *ops,
                                      const float *gamma);
/* History (L, 3) or NULL (none); lifting kernel (C, Cin, kh, kw) or NULL. */
wbcl_status wbcl__circulant_set_extra(wbcl_circulant *net, const double *hist, const float *lift, size_t Cin,
                                      size_t kh, size_t kw);
/* The lifting kernel (host copy) and its sizes; NULL if none. */
const float *wbcl__circulant_lift(const wbcl_circulant *net, size_t *Cin, size_t *kh, size_t *kw);

/* The device keeps a layer's (K+1) P operators like the Gram matrices (cl/circulant.cl): matrix t = j P + p
 * in block t / OPS_MW, lane t % OPS_MW; entry (r, c) real part at OPS_AT(t, r, c), imaginary part OPS_MW
 * floats later. Files and wbcl_circulant_read_layer use (K+1, P, C, C) complex row-major. */
#define OPS_MW 16
#define OPS_AT(t, r, c, C) ((((t) / OPS_MW * (C) + (r)) * (C) + (c)) * 2 * OPS_MW + (t) % OPS_MW)

static inline size_t ops_floats(size_t nb, size_t C) { return (nb + OPS_MW - 1) / OPS_MW * OPS_MW * C * C * 2; }

/* ---- argument checks (circulant.c) ---------------------------------------------------------------- */

/* Geometry of a signal tensor: (m, C, T) -> dims 1, H = 1, W = T; (m, C, H, W) -> dims 2. */
typedef struct {
    int dims;
    size_t m, C, H, W, N, P, Wh;
} geom;

/* The geometry without the FFT's length restriction (lifting needs no FFT). */
wbcl_status wbcl__circulant_signal_shape(wbcl_context *ctx, const char *op, const char *what, const wbcl_tensor *t,
                                         geom *g);
/* The geometry of a signal the layers transform: lengths the FFT can do (wbcl__fft_check). */
wbcl_status wbcl__circulant_signal_geom(wbcl_context *ctx, const char *op, const char *what, const wbcl_tensor *t,
                                        geom *g);
/* At most WBCL_CIRCULANT_MAX_CHANNELS channels. */
wbcl_status wbcl__circulant_check_channels(wbcl_context *ctx, const char *op, size_t C);
/* Lifting kernel Wt against raw signals of geometry gx: fills Cout, kh, kw. */
wbcl_status wbcl__circulant_lift_geom(wbcl_context *ctx, const char *op, const wbcl_tensor *Wt, const geom *gx,
                                      size_t *Cout, size_t *kh, size_t *kw);
/* layers >= 1, eta and eps2 finite and > 0, lambda finite and >= 0. */
wbcl_status wbcl__circulant_check_params(wbcl_context *ctx, const char *op, const wbcl_circulant_params *p);
/* Labels in range and (require_all) every class non-empty; counts[K] gets the class sizes. */
wbcl_status wbcl__circulant_check_labels(wbcl_context *ctx, const char *op, const int *labels, size_t m,
                                         int classes, int require_all, size_t *counts);

/* ---- the workspace and the pipeline's steps (circulant_pipeline.c) -------------------------------- */

typedef struct {
    geom g;
    size_t K;
    cl_mem Zr;     /* real (m, C, N)            */
    cl_mem V;      /* float2 (m, C, P)          */
    cl_mem Vt;     /* lane layout (P, C, 2, mp) floats, mp a multiple of 16  */
    cl_mem Vt2;    /* the same: circ_update's output, swapped with Vt         */
    cl_mem coef;   /* (K, mp) floats: gamma_j pi_j per lane                   */
    cl_mem part;   /* (nch nrt, mp) floats: per chunk of bins (and tile of rows), |u|^2 per lane */
    size_t pchunk, nch; /* circ_update / circ_scale: bins per chunk, chunks  */
    size_t nrt;    /* circ_update_g's tiles of 4 rows, ceil(C / 4) (CPU-shaped: 1) */
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

void wbcl__circulant_ws_free(ws *w);
/* Lane layout: with labels, samples sorted by class; without, lane = sample; padded at the end to a
 * multiple of 16 lanes. */
wbcl_status wbcl__circulant_ws_alloc(wbcl_context *ctx, ws *w, const geom *g, size_t K, const int *labels);
/* Lane-indexed yhat / pi (device) -> sample-indexed host arrays (either may be NULL). */
wbcl_status wbcl__circulant_read_memberships(wbcl_context *ctx, ws *w, int *yhat, float *pi);
/* Features of X (lifted by the kernel if any) into w->Zr. */
wbcl_status wbcl__circulant_features_in(wbcl_context *ctx, ws *w, const wbcl_tensor *X, cl_mem lift, size_t Cin,
                                        size_t kh, size_t kw);
/* Zr -> V = FFT(Zr); normalize per sample when `normalize`; non-finite input -> NUMERIC. */
wbcl_status wbcl__circulant_enter(wbcl_context *ctx, const char *op, ws *w, int normalize);
/* V -> Z = real(normalize(IFFT(V))) into dst (V is overwritten). */
wbcl_status wbcl__circulant_leave(wbcl_context *ctx, ws *w, cl_mem dst);
/* Per-group Gram matrices S of the spectra for the groups (mask, boff, blocks). */
wbcl_status wbcl__circulant_enq_gram(wbcl_context *ctx, ws *w, cl_mem mask, cl_mem boff, cl_mem blocks, cl_mem skip,
                                     size_t skip_off);
/* Groups from host labels into w->mask, w->boff, w->blocks. */
wbcl_status wbcl__circulant_set_groups(wbcl_context *ctx, ws *w, const int *labels);
/* Groups by the lane-indexed predictions w->yhat, on the device. */
wbcl_status wbcl__circulant_enq_groups(wbcl_context *ctx, ws *w, cl_mem cnt, size_t cnt_off, float eps2, cl_mem same,
                                       size_t same_off);
/* S -> M = alpha (I + alpha S)^-1 (when M != NULL) and log-determinants; pivot info, no read-back. */
wbcl_status wbcl__circulant_enq_shinv(wbcl_context *ctx, ws *w, cl_mem alpha, cl_mem M, cl_mem ld, size_t ld_off,
                                      cl_mem info, size_t info_off, cl_mem skip, size_t skip_off);
/* Pivot info of one batch of (K+1) P matrices (host copy) -> NUMERIC naming the first failure. */
wbcl_status wbcl__circulant_check_info(wbcl_context *ctx, const char *op, const ws *w, const int *info, int layer,
                                       const char *stage);
/* One layer's application to the spectra w->Vt with operators ops and gamma (device). */
wbcl_status wbcl__circulant_apply_layer(wbcl_context *ctx, ws *w, cl_mem ops, cl_mem gam,
                                        const wbcl_circulant_params *p);

/* ---- the objective (circulant_objective.c) --------------------------------------------------------- */

/* (dR, R, Rc) from the log-determinants ld ((K+1) P floats, host) and the group sizes cnt (K). */
void wbcl__circulant_objective_sum(const ws *w, const float *ld, const size_t *cnt, double out[3]);

#endif
