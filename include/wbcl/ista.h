/* wbcl — ISTA sparse coding (the CRATE "FeedForward" block) and LASSO by
 * unrolled ISTA / FISTA. SPEC.md §2; book eqs. 5.2.18-21; CRATE eq. 17, App. B.
 *
 * Convention (tokens are rows). The dictionary is stored as CRATE stores its
 * `weight`: W = D, row-major (d, m) (m = d in CRATE, m > d overcomplete). A
 * signal row x has d entries, a code row z has m. In the book's column form
 * D z becomes z W^T and D^T r becomes r W, so the LASSO objective on rows is
 *     F(Z) = lambda ||Z||_1 + 1/2 ||X - Z W^T||_F^2
 * and one proximal-gradient (ISTA) step with step size eta is
 *     Z+ = theta_{eta lambda}( Z - eta (Z W^T - X) W ).
 * With Z = X (square W) this is CRATE's block (the reference's order):
 *     y = ReLU(x + eta (x W - x W^T W) - eta lambda)
 * Swapping W and W^T gives a different operator for a non-symmetric W (the
 * tests check that it is told apart). There is no residual around the block:
 * with the ReLU threshold every output is >= 0.
 *
 * Thresholds (CRATE App. B.5):
 *     WBCL_THRESHOLD_RELU   theta(v) = max(v - eta lambda, 0)   (non-negative sparse coding, CRATE)
 *     WBCL_THRESHOLD_SOFT   theta(v) = sign(v) max(|v| - eta lambda, 0)   (plain LASSO)
 * NaN propagates through both.
 *
 * Computation. The step is (Z W^T - X) W: two GEMMs on scratch (never W^T W),
 * then one fused elementwise kernel (threshold included). For a square W the
 * "folded" form precomputes M = W - W^T W once per weight, after which
 *     y = theta(x + eta x M)
 * is one GEMM plus the elementwise kernel: half the flops per call (the
 * choice and its measurement: perf/RESULTS.md, section ISTA). Both forms are
 * tested against the double reference. The ISTA layer object below holds the
 * weight in whichever form it chose.
 *
 * Shapes: x (..., d) with 1 to 4 dimensions, all leading dimensions are rows
 * sharing W; z and y (..., m) with the same leading dimensions as x.
 * Every argument is validated before anything is enqueued: on failure the
 * outputs are untouched and wbcl_context_last_error names the op, the
 * argument and the shapes. */
#ifndef WBCL_ISTA_H
#define WBCL_ISTA_H

#include <stddef.h>
#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wbcl_threshold {
    WBCL_THRESHOLD_RELU = 0, /* max(v - t, 0): non-negative sparse coding (CRATE's default) */
    WBCL_THRESHOLD_SOFT = 1  /* sign(v) max(|v| - t, 0): soft threshold (CRATE App. B.5)  */
} wbcl_threshold;

/* One ISTA step y = theta_{eta lambd}(z - eta (z W^T - x) W).
 * x (..., d); W (d, m); z (..., m) or NULL, meaning z = x (needs m == d: the
 * CRATE block); y (..., m). y may be x or z (in place); y must not be W.
 * eta > 0 and lambd >= 0, both finite (CRATE: 0.1 and 0.1). */
wbcl_status wbcl_ista(wbcl_context *ctx, const wbcl_tensor *x, const wbcl_tensor *z, const wbcl_tensor *W, float eta,
                      float lambd, wbcl_threshold threshold, wbcl_tensor *y);

/* M = W - W^T W for a square W (d, d); M (d, d) must not be W. */
wbcl_status wbcl_ista_fold(wbcl_context *ctx, const wbcl_tensor *W, wbcl_tensor *M);

/* The CRATE block from a folded weight: y = theta_{eta lambd}(x + eta x M),
 * M from wbcl_ista_fold. x, y (..., d); y may be x. */
wbcl_status wbcl_ista_folded(wbcl_context *ctx, const wbcl_tensor *x, const wbcl_tensor *M, float eta, float lambd,
                             wbcl_threshold threshold, wbcl_tensor *y);

/* ---- an ISTA layer: the weight kept in the form chosen for it ------------------------------- */
typedef enum wbcl_ista_path {
    WBCL_ISTA_AUTO = 0,     /* folded for a square W (measured faster, perf/RESULTS.md), else two GEMMs */
    WBCL_ISTA_TWO_GEMM = 1, /* (x W^T - x) W every call                                                 */
    WBCL_ISTA_FOLDED = 2    /* x (W - W^T W), M precomputed at creation; square W only                  */
} wbcl_ista_path;

typedef struct wbcl_ista_layer wbcl_ista_layer;

/* Copies W (d, m) (or folds it) into a layer owned by ctx's device. With m != d the
 * layer's input is the signal x (..., d) and the code starts from z = 0, so that
 * forward gives y = theta(eta x W) (..., m); with m == d z = x (the CRATE block). */
wbcl_status wbcl_ista_layer_create(wbcl_context *ctx, const wbcl_tensor *W, float eta, float lambd,
                                   wbcl_threshold threshold, wbcl_ista_path path, wbcl_ista_layer **out);
void wbcl_ista_layer_destroy(wbcl_ista_layer *layer); /* NULL is a no-op */
/* y = the layer applied to x; y (..., m) may be x when m == d. */
wbcl_status wbcl_ista_layer_forward(wbcl_context *ctx, const wbcl_ista_layer *layer, const wbcl_tensor *x,
                                    wbcl_tensor *y);
/* The path the layer uses (never AUTO). */
wbcl_ista_path wbcl_ista_layer_path(const wbcl_ista_layer *layer);

/* ---- LASSO by unrolled ISTA / FISTA ---------------------------------------------------------
 *   min_Z F(Z) = lambd ||Z||_1 + 1/2 ||X - Z W^T||_F^2      (rows independent)
 * ISTA:  Z_k = theta_{t lambd}(Z_{k-1} - t (Z_{k-1} W^T - X) W)
 * FISTA (Beck & Teboulle 2009): Y_1 = Z_0, s_1 = 1,
 *        Z_k = theta_{t lambd}(Y_k - t (Y_k W^T - X) W),
 *        s_{k+1} = (1 + sqrt(1 + 4 s_k^2)) / 2,  Y_{k+1} = Z_k + ((s_k - 1) / s_{k+1}) (Z_k - Z_{k-1}).
 * Step t = 1/L with L = ||W||_2^2 (power iteration, wbcl_lasso_lipschitz) unless given.
 * Two GEMMs per step for both methods (FISTA's Y W^T is combined from Z_k W^T
 * and Z_{k-1} W^T, which are computed anyway), plus elementwise kernels.
 * For ISTA with t <= 1/L, F never increases (it is non-increasing for any
 * t < 2/L: F(Z+) <= F(Z) - (1/t - L/2) ||Z+ - Z||^2; a power-iteration
 * estimate of L from below is therefore safe). */
typedef enum wbcl_lasso_method { WBCL_LASSO_ISTA = 0, WBCL_LASSO_FISTA = 1 } wbcl_lasso_method;

typedef struct wbcl_lasso_opts {
    size_t steps;               /* T >= 1                                                   */
    float lambd;                /* lambda >= 0, finite                                      */
    wbcl_lasso_method method;   /* ISTA or FISTA                                            */
    wbcl_threshold threshold;   /* SOFT: the LASSO; RELU: the non-negative LASSO (5.2.19)    */
    double L;                   /* ||W||_2^2 if known; <= 0: computed by power iteration     */
    double step;                /* step size t; <= 0: 1/L (1 when W = 0)                     */
} wbcl_lasso_opts;

/* Defaults: steps 100, lambd 0.1, ISTA, soft threshold, L and step computed. */
wbcl_lasso_opts wbcl_lasso_defaults(void);

/* X (..., d); W (d, m); Z (..., m) holds the starting point Z_0 on entry (a new
 * tensor is zero) and Z_T on return; Z must not be X or W. objective (may be
 * NULL) receives steps + 1 doubles: F(Z_0), F(Z_1), ..., F(Z_T), summed over
 * all rows (rows' partial sums in float, the total in double). */
wbcl_status wbcl_lasso(wbcl_context *ctx, const wbcl_tensor *X, const wbcl_tensor *W, const wbcl_lasso_opts *opts,
                       wbcl_tensor *Z, double *objective);

/* L = ||W||_2^2 = largest eigenvalue of W W^T (or W^T W, whichever is smaller):
 * the Gram by one GEMM on the device, then power iteration in double on the
 * host until the Rayleigh quotient changes by < 1e-9 relative (at most 1000
 * iterations). The estimate approaches L from below. W = 0 gives 0. */
wbcl_status wbcl_lasso_lipschitz(wbcl_context *ctx, const wbcl_tensor *W, double *L);

#ifdef __cplusplus
}
#endif
#endif
