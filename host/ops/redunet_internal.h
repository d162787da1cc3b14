/* Internals of the vector ReduNet (include/wbcl/redunet.h, SPEC.md §4.1), shared by its files:
 *   redunet.c          the model object (create, accessors, layer read-back), the argument checks,
 *                      synthetic data;
 *   redunet_layers.c   the working state and the steps of a layer in the two implementations
 *                      (fused kernels for d <= 16, K <= 32; GEMM for any d): construction,
 *                      application, group statistics and log-determinants;
 *   redunet_fit.c      construction: wbcl_redunet_fit, and wbcl_redunet_fit_shard over several
 *                      participants;
 *   redunet_apply.c    wbcl_redunet_apply and wbcl_redunet_objective.
 * Kernels in cl/redunet.cl; save/load in host/model/redunet_io.c. Not public API. */
#ifndef WBCL_REDUNET_INTERNAL_H
#define WBCL_REDUNET_INTERNAL_H

#include "internal.h"
#include "wbcl/redunet.h"

#define MAX_CLASSES 1024 /* the kernels keep K floats per row in private memory */

/* ---- the model object and the argument checks (redunet.c) ---------------------------------------- */

struct wbcl_redunet {
    wbcl_context *ctx;
    int L, d, K;
    wbcl_redunet_params params; /* params.layers == L */
    wbcl_tensor **W;            /* L buffers of (K+1) d^2 + K floats: E, C_0..C_{K-1}, gamma */
    double *hist;               /* (L, 3): dR, R, Rc; NULL if unknown */
};

/* Floats of one layer's buffer: E, C_0..C_{K-1}, gamma. */
static inline size_t layer_floats(size_t d, size_t K) { return (K + 1) * d * d + K; }

/* The fused implementation for this d, K and choice. */
static inline int use_fused(size_t d, size_t K, wbcl_redunet_impl impl)
{
    if (impl == WBCL_REDUNET_IMPL_GEMM) return 0;
    if (impl == WBCL_REDUNET_IMPL_FUSED) return 1;
    return d <= WBCL_REDUNET_FUSED_MAX_DIM && K <= WBCL_REDUNET_FUSED_MAX_CLASSES;
}

/* A model with L zero-filled layer buffers (hist allocated if with_hist). */
wbcl_status wbcl__redunet_model_new(wbcl_context *ctx, const char *op, int L, size_t d, size_t K,
                                    const wbcl_redunet_params *p, int with_hist, wbcl_redunet **out);
/* The parameters are valid (layers >= 1 too when need_layers). */
wbcl_status wbcl__redunet_check_params(wbcl_context *ctx, const char *op, const wbcl_redunet_params *p,
                                       int need_layers);
/* The fused implementation, when asked for, handles d and K. */
wbcl_status wbcl__redunet_check_impl(wbcl_context *ctx, const char *op, wbcl_redunet_impl impl, size_t d, size_t K);
/* X must be a 2-D (m, d) tensor of ctx with m, d within limits. */
wbcl_status wbcl__redunet_check_rows(wbcl_context *ctx, const char *op, const char *name, const wbcl_tensor *X);
/* Z must be (m, d). */
wbcl_status wbcl__redunet_check_out(wbcl_context *ctx, const char *op, const char *name, const wbcl_tensor *Z,
                                    size_t m, size_t d);
/* labels in [0, K); counts[j] = m_j; with require_all every class must occur. */
wbcl_status wbcl__redunet_check_labels(wbcl_context *ctx, const char *op, const int *labels, size_t m, int classes,
                                       int require_all, size_t *counts);
/* classes in 1..MAX_CLASSES and labels as above, for a caller that needs no counts. */
wbcl_status wbcl__redunet_check_classes(wbcl_context *ctx, const char *op, const int *labels, size_t m, int classes,
                                        int require_all);
/* net is a model of ctx. */
wbcl_status wbcl__redunet_check_net(wbcl_context *ctx, const char *op, const wbcl_redunet *net);

/* ---- the working state and the steps of a layer (redunet_layers.c) -------------------------------- */

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


void wbcl__redunet_work_free(rd_work *w);
/* Allocates what the chosen implementation needs. hist_layers > 0: fused history buffers. */
wbcl_status wbcl__redunet_work_init(rd_work *w, wbcl_context *ctx, const char *op, size_t m, size_t d, size_t K,
                                    int fused, int need_gram, size_t hist_layers);
/* Zw = normalize(X) (or X as it is); WBCL_ERROR_NUMERIC if X has a non-finite entry (one read-back). */
wbcl_status wbcl__redunet_enter(rd_work *w, const wbcl_tensor *X, const char *xname, int normalize);
/* The working features into Z (may be NULL: nothing). */
wbcl_status wbcl__redunet_copy_out(rd_work *w, wbcl_tensor *Z);

/* Fused: labels (m) into buf (mp ints), padding rows labelled -1. */
wbcl_status wbcl__redunet_upload_labels(rd_work *w, cl_mem buf, const int *labels);
/* Fused: one layer on Zw (rdn_apply). */
wbcl_status wbcl__redunet_fused_apply(rd_work *w, const wbcl_tensor *W, float eta, float lambda);
/* Fused: partial Grams of groups [gfirst, gfirst + ng) (0..K-1 true, K..2K-1 estimated). */
wbcl_status wbcl__redunet_fused_gram(rd_work *w, cl_mem labels_est, size_t gfirst, size_t ng);
/* Fused: objective of the current features into history row `row` and/or the construction of Wn. */
wbcl_status wbcl__redunet_fused_finalize(rd_work *w, float eps2, int construct, wbcl_tensor *Wn, size_t row);

/* GEMM: the groups of `labels`, their Grams and A = [I + a sum_j G_j, I + a_j G_j]. */
wbcl_status wbcl__redunet_gemm_groups(rd_work *w, const int *labels, float eps2);
/* GEMM: hist row (dR, R, Rc) from the log-determinants of A (built for the groups of w->cnth). */
wbcl_status wbcl__redunet_gemm_logdets(rd_work *w, double *h);
/* GEMM: the layer buffer W = [a Ainv_0, a_j Ainv_j, gamma] from A (true classes). */
wbcl_status wbcl__redunet_gemm_construct(rd_work *w, wbcl_tensor *W, float eps2);
/* GEMM: one layer on Zw: P[g] = Zw W_g^T (g = 0..K: one batched GEMM), then rdn_update. */
wbcl_status wbcl__redunet_gemm_apply(rd_work *w, const wbcl_tensor *W, float eta, float lambda);

#endif
