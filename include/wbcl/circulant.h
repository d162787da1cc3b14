/* wbcl — the shift-invariant ReduNet (book §5.1.2, Prop. 5.1-5.2, Remark 5.2;
 * exact conventions in SPEC.md §4.2): multichannel signals (m, C, T) or
 * images (m, C, H, W) whose ReduNet operators are block-circulant, built and
 * applied one C x C problem per frequency.
 *
 * Lifting: Y[b,o,h,w] = ReLU( sum_{i,u,v} Wt[o,i,u,v] X[b,i,(h+u) mod H,(w+v) mod W] )
 * (circular cross-correlation, wrap on the right/bottom; 1-D: Wt (Cout, Cin, k)).
 * Entering a network: each sample is normalized over (C, H, W) and taken to
 * the frequency domain by the unitary real FFT (clFFT, scaled N^-1/2 each
 * way, N = H W). Only the bins of the real FFT are stored, P = H (W/2 + 1);
 * full-spectrum sums weight bin (ph, pw) by 1 (pw = 0 or pw = W/2) or 2.
 * Layer l is constructed from the training spectra V and the true labels:
 *     S_p = sum_b v_b(p) v_b(p)^H,  a = C/(m eps2),  a_j = C/(m_j eps2),  gamma_j = m_j/m,
 *     E_p = a (I + a S_p)^-1,  C_{j,p} = a_j (I + a_j S_{j,p})^-1
 * (batched complex Hermitian Cholesky), and applied to every sample:
 *     e(p) = E_p^H v(p),  c_j(p) = C_{j,p}^H v(p),  n_j = max(|c_j|, 1e-8) over the whole spectrum,
 *     pi = softmax(-lambda n),  v <- normalize(v + eta (e - sum_j gamma_j pi_j c_j)).
 * Leaving: Z = real(normalize(IFFT(V))). The objective of each layer's output
 * grouped by yhat = argmax pi: R = (1/2N) sum_p logdet(I + a S_p), Rc likewise
 * per group weighted by mh_j/m, dR = R - Rc (empty groups skipped).
 * f(roll(x)) = roll(f(x)) for every cyclic shift, and pi is shift-invariant.
 *
 * FFT lengths must have no prime factor above 13 (clFFT's radices 2, 3, 5,
 * 7, 11, 13): others are WBCL_ERROR_UNSUPPORTED naming the length. Channels
 * C <= WBCL_CIRCULANT_MAX_CHANNELS. Every call validates all of its arguments
 * before it enqueues anything; outputs are untouched when a call fails with
 * an argument error. A non-finite input is WBCL_ERROR_NUMERIC; a per-frequency
 * matrix that is not positive definite is WBCL_ERROR_NUMERIC naming the layer,
 * the operator and the frequency. */
#ifndef WBCL_CIRCULANT_H
#define WBCL_CIRCULANT_H

#include <stddef.h>

#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"
#include "wbcl/redunet.h" /* wbcl_redunet_comm */

#ifdef __cplusplus
extern "C" {
#endif

#define WBCL_CIRCULANT_MAX_CHANNELS 64

typedef struct wbcl_circulant wbcl_circulant; /* a fitted 1-D or 2-D shift-invariant ReduNet */

typedef struct wbcl_circulant_params {
    int layers;   /* L >= 1                     */
    float eta;    /* step size, > 0             */
    float eps2;   /* epsilon squared, > 0       */
    float lambda; /* softmax inverse temperature, >= 0 */
} wbcl_circulant_params;

/* The reference settings of SPEC §5: L = 10, eta = 0.5, eps2 = 0.1, lambda = 500. */
wbcl_circulant_params wbcl_circulant_default_params(void);

/* Progress of fit: once per layer, in order, 1-based layer number and its objective. */
typedef void (*wbcl_circulant_progress_fn)(int layer, double dR, double R, double Rc, void *user);

/* Lifting. X (m, Cin, T) with Wt (Cout, Cin, k), k <= T, or X (m, Cin, H, W) with Wt (Cout, Cin, kh, kw),
 * kh <= H, kw <= W; Y (m, Cout, T) or (m, Cout, H, W). Y must not be X. Any length is accepted here (the
 * lifting needs no FFT); fit and apply also need lengths whose prime factors are at most 13 (clFFT). */
wbcl_status wbcl_circulant_lift(wbcl_context *ctx, const wbcl_tensor *X, const wbcl_tensor *Wt, wbcl_tensor *Y);

/* Constructs params->layers layers. X: raw signals (m, Cin, T) / (m, Cin, H, W) when lift is given (lifting
 * kernel Wt as above, kept in the model), else the features (m, C, T) / (m, C, H, W) themselves (lift NULL).
 * labels: m host ints in [0, classes), every class non-empty, classes <= 1024. Z (may be NULL) receives the
 * training features after the last layer, (m, C, T) / (m, C, H, W). *out is NULL on failure. */
wbcl_status wbcl_circulant_fit(wbcl_context *ctx, const wbcl_tensor *X, const wbcl_tensor *lift, const int *labels,
                               int classes, const wbcl_circulant_params *params, wbcl_circulant_progress_fn progress,
                               void *user, wbcl_tensor *Z, wbcl_circulant **out);

/* wbcl_circulant_fit on a shard of the samples, the statistics summed over all participants through
 * comm->sum (the protocol of wbcl_redunet_comm, wbcl/redunet.h; comm->broadcast is not used: every
 * participant factors the summed matrices itself). X, labels: this participant's samples (m_local >= 1);
 * a class may be absent from a shard but not from every shard (WBCL_ERROR_INVALID_ARGUMENT on every
 * participant). Participants must agree on the geometry, classes, lifting kernel shape and params
 * (checked: WBCL_ERROR_SHAPE). Per layer two sums of (K+1) P C(C+1) + K + 1 doubles (the lower
 * triangles of S_{j,p} for the true labels, then for yhat, and the group sizes), independent of m.
 * Z (m_local, ...) receives this shard's features. Equals wbcl_circulant_fit on the union of the shards
 * up to the summation order; comm == NULL is wbcl_circulant_fit. A failure elsewhere is WBCL_ERROR_PEER. */
wbcl_status wbcl_circulant_fit_shard(wbcl_context *ctx, const wbcl_tensor *X, const wbcl_tensor *lift,
                                     const int *labels, int classes, const wbcl_circulant_params *params,
                                     const wbcl_redunet_comm *comm, wbcl_circulant_progress_fn progress, void *user,
                                     wbcl_tensor *Z, wbcl_circulant **out);

/* Z = f(X) with the stored layers (lifting first if the model has a lifting kernel). yhat (m host ints) and pi
 * (m x classes host floats) of the last layer may be NULL. On the training samples this replays fit. */
wbcl_status wbcl_circulant_apply(wbcl_context *ctx, const wbcl_circulant *net, const wbcl_tensor *X, wbcl_tensor *Z,
                                 int *yhat, float *pi);

/* Objective of features Z (m, C, T) / (m, C, H, W) as they are (no normalization) grouped by host labels in
 * [0, classes) (empty groups skipped); any output pointer may be NULL. */
wbcl_status wbcl_circulant_objective(wbcl_context *ctx, const wbcl_tensor *Z, const int *labels, int classes,
                                     float eps2, double *dR, double *R, double *Rc);

/* Layer `layer` (0-based) to the host as complex (re, im) float pairs: E (P, C, C) and C (classes, P, C, C) with
 * P = H (W/2 + 1) stored bins (bin (ph, pw) at ph (W/2+1) + pw), gamma (classes); pointers may be NULL. */
wbcl_status wbcl_circulant_read_layer(wbcl_context *ctx, const wbcl_circulant *net, int layer, float *E, float *C,
                                      float *gamma);

/* Shape: dims 1 or 2 (0 for NULL); H = 1 for 1-D; W = T. */
int wbcl_circulant_dims(const wbcl_circulant *net);
size_t wbcl_circulant_channels(const wbcl_circulant *net);
size_t wbcl_circulant_height(const wbcl_circulant *net);
size_t wbcl_circulant_width(const wbcl_circulant *net);
int wbcl_circulant_classes(const wbcl_circulant *net);
int wbcl_circulant_layers(const wbcl_circulant *net);
int wbcl_circulant_has_lift(const wbcl_circulant *net);
wbcl_circulant_params wbcl_circulant_get_params(const wbcl_circulant *net);
/* Objective of layer `layer` as logged by fit (kept by save/load); WBCL_ERROR_INVALID_ARGUMENT if out of range. */
wbcl_status wbcl_circulant_history(const wbcl_circulant *net, int layer, double *dR, double *R, double *Rc);

/* Model files (safetensors): "ops" (L, K+1, P, C, C, 2) F32 (entries 0..K-1 = C_{j,p}, entry K = E_p),
 * "gamma" (L, K) F32, "objective" (L, 3) F64, optional "lift" (Cout, Cin, k) / (Cout, Cin, kh, kw) F32;
 * __metadata__ "format" = "wbcl.circulant", "version" = "1", "dims", "channels", "height", "width",
 * "classes", "layers", "eta", "eps2", "lambda". save is atomic; load validates shapes and finiteness. */
wbcl_status wbcl_circulant_save(wbcl_context *ctx, const wbcl_circulant *net, const char *path);
wbcl_status wbcl_circulant_load(wbcl_context *ctx, const char *path, wbcl_circulant **out);

void wbcl_circulant_destroy(wbcl_circulant *net); /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
#endif
