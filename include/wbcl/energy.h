/* wbcl — energy-descent attention (Yang, Huang, Wipf, "Transformers from an
 * Optimization Perspective"; seed 002 §3, App. B, §4, §5, §7). SPEC.md §1.7.
 *
 * Energy over the rows y_u of Y (N, d):
 *   E1(Y) = sum_{u,v} rho(1/2 ||y_u - y_v||^2) + 1/2 ||Y||_F^2     (all ordered pairs, u = v included)
 * One unrolled step (seed 002 eq. 38; Jacobi-preconditioned gradient step
 * on the majorizer of the pair term), step alpha in (0, 1]:
 *   gamma_uv = rho'(1/2 ||y_u - y_v||^2)
 *   y_u     <- (1 - alpha) y_u + alpha sum_v gamma_uv y_v / sum_v gamma_uv
 * rho(z) = -exp(-z): gamma_uv is proportional to beta_v exp(y_u^T y_v),
 *   beta_v = exp(-1/2 ||y_v||^2): the beta-reweighted softmax (eq. 10-11);
 * rho(z) = log(z + c), c > 0: gamma_uv = 1 / (1/2 ||y_u - y_v||^2 + c) (§7).
 * The kernels evaluate 1/2 ||y_u - y_v||^2 as a sum of squared differences,
 * never as |y_u|^2 + |y_v|^2 - 2 y_u.y_v: no cancellation, and with the exp
 * rho the largest weight (v = u) is exactly 1, so large logits are safe.
 *
 * Reparameterized (eq. 12): the similarities come from Y = Z W_a while the
 * step moves Z (the values): Z <- (1 - alpha) Z + alpha softmax_beta(Z W_a W_a^T Z^T) Z,
 * which is the step above on E1(Z W_a) written in Z.
 * Heterogeneous layer (eq. 15-16, 20): U = step(Y); Y+ = [ReLU](U W_f^s),
 * W_f^s = (1 - alpha2) I - alpha2 (W_f + W_f^T) / 2.
 *
 * Descent: the step never increases the pair term sum rho (for any concave
 * non-decreasing rho and alpha in (0, 1]). The full E1 (with 1/2 ||Y||^2)
 * did not increase in float64 for tokens of norm up to about 4; for widely
 * separated tokens (norms near 8) and rho = -exp(-z) it can increase by
 * ~1e-3 relative (see tests/test_energy.c). Time O(N^2 d). */
#ifndef WBCL_ENERGY_H
#define WBCL_ENERGY_H

#include <stddef.h>
#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"
#include "wbcl/io.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wbcl_energy_rho {
    WBCL_RHO_EXP = 0, /* rho(z) = -exp(-z)             */
    WBCL_RHO_LOG = 1  /* rho(z) = log(z + c), c > 0    */
} wbcl_energy_rho;

/* Per-head kernel: for each (b, h), weights from the similarity features
 * y[b,h] : (N, p) and a step on the values v[b,h] : (N, pv):
 *   out_u = (1 - alpha) v_u + alpha sum_v gamma_uv v_v / sum_v gamma_uv.
 * y : (B, K, N, p); v : (B, K, N, pv) or NULL (v = y); out has v's shape and
 * must not be y or v. alpha in (0, 1]; c > 0 (read for WBCL_RHO_LOG only). */
wbcl_status wbcl_energy_heads(wbcl_context *ctx, const wbcl_tensor *y, const wbcl_tensor *v, wbcl_energy_rho rho,
                              float c, float alpha, wbcl_tensor *out);

/* One step on tokens Z (B, N, d) or (N, d): similarities from Y = Z W_a
 * (W_a (d, d); NULL: Y = Z), values Z. Zout has Z's shape, must not be Z. */
wbcl_status wbcl_energy_step(wbcl_context *ctx, const wbcl_tensor *Z, const wbcl_tensor *Wa, wbcl_energy_rho rho,
                             float c, float alpha, wbcl_tensor *Zout);

/* The feed-forward half of the heterogeneous layer: Y = [ReLU](U W_f^s),
 * W_f^s = (1 - alpha2) I - alpha2 (W_f + W_f^T) / 2. U (B, N, d) or (N, d);
 * W_f (d, d); alpha2 finite; Y has U's shape, must not be U. */
wbcl_status wbcl_energy_ffn(wbcl_context *ctx, const wbcl_tensor *U, const wbcl_tensor *Wf, float alpha2, int relu,
                            wbcl_tensor *Y);

/* E[b] = E1(Y_b W_a) (W_a NULL: E1(Y_b)) for Y (B, N, d) or (N, d);
 * E has B elements (1 for (N, d)). Accumulated in double where the device has
 * fp64, else in compensated float; the result is rounded to float. */
wbcl_status wbcl_energy_e1(wbcl_context *ctx, const wbcl_tensor *Y, const wbcl_tensor *Wa, wbcl_energy_rho rho,
                           float c, wbcl_tensor *E);

/* attn.energy: weights W_a (d, d) [required], W_f (d, d) [optional]; forward
 * = `steps` unrolled steps, each: Z <- step(Z; W_a), then, if W_f is loaded,
 * Z <- [ReLU](Z W_f^s) (eq. 20), else, with relu, Z <- ReLU(Z) (the proximal
 * step of Algorithm 2 alone). */
typedef struct wbcl_energy_params {
    wbcl_energy_rho rho; /* default WBCL_RHO_EXP                       */
    float c;             /* rho = log: the offset c > 0 (default 1)    */
    float alpha;         /* attention step in (0, 1] (default 1)       */
    float alpha2;        /* feed-forward step (default 0.5)            */
    int relu;            /* apply ReLU at the end of a step (default 0) */
    int steps;           /* unrolled steps >= 1 (default 1)            */
} wbcl_energy_params;

/* The defaults above. */
wbcl_energy_params wbcl_energy_params_default(void);

typedef struct wbcl_energy_layer wbcl_energy_layer;

/* From host arrays (copied): Wa (d, d), Wf (d, d) or NULL. */
wbcl_status wbcl_energy_layer_create(wbcl_context *ctx, size_t d, const float *Wa, const float *Wf,
                                     wbcl_energy_layer **out);
/* Keys prefix + "W_a", prefix + "W_f" (optional). */
wbcl_status wbcl_energy_layer_load(wbcl_context *ctx, const wbcl_safetensors *st, const char *file,
                                   const char *prefix, size_t d, wbcl_energy_layer **out);
/* 1 if the layer has W_f. */
int wbcl_energy_layer_has_ffn(const wbcl_energy_layer *layer);
/* x (B, N, d) or (N, d); out as x, not x. Params are validated first. */
wbcl_status wbcl_energy_layer_forward(wbcl_context *ctx, wbcl_energy_layer *layer, const wbcl_energy_params *params,
                                      const wbcl_tensor *x, wbcl_tensor *out);
void wbcl_energy_layer_destroy(wbcl_energy_layer *layer); /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
#endif
