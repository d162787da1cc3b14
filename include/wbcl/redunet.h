/* wbcl — the vector ReduNet: a network constructed forward, layer by layer, by
 * gradient ascent on the rate reduction ΔR (book §5.1.1, Algorithms 5.1/5.2;
 * exact conventions in SPEC.md §4.1).
 *
 * Samples are rows: X is (m, d), labels y[i] in 0..K-1. `eps2` is ε² (the
 * reference code's `eps`). Entering the network every row is normalized
 * (z / max(|z|, 1e-8)). Layer l is constructed from the current training
 * features Z and the true labels:
 *     gamma_j = m_j/m,  a = d/(m eps2),  a_j = d/(m_j eps2),
 *     E   = a   (I + a   Z^T Z)^-1,      C_j = a_j (I + a_j Z_j^T Z_j)^-1,
 * and applied to every row z:
 *     c_j = C_j z,  pi = softmax_j(-lambda |c_j|)  (max-subtracted),
 *     z  <- normalize(z + eta (E z - sum_j gamma_j pi_j c_j)),
 * the training rows included (the construction uses the estimated pi, not
 * the labels). The objective logged per layer is taken on the layer's output
 * grouped by the estimated class yhat = argmax pi:
 *     R = 1/2 logdet(I + a Z^T Z),
 *     Rc = sum_j (mh_j/m) 1/2 logdet(I + ah_j Zh_j^T Zh_j), ah_j = d/(mh_j eps2)
 *     (empty groups skipped),   dR = R - Rc.
 *
 * A model (wbcl_redunet) keeps per layer E (d, d), C (K, d, d) and gamma (K)
 * on the device of the context it was made in, plus the hyperparameters and,
 * when it was fitted, the objective per layer. Two implementations give the
 * same results to float rounding: a fused one (vectors of rows per
 * work-item, every small d x d solve inside a kernel: three launches per
 * layer, the fast path for small d) and a GEMM one (Gram matrices and the
 * application as GEMMs, inverses through the batched Cholesky of
 * wbcl/linalg.h, all K+1 matrices of a layer in one batch). AUTO picks
 * fused for d <= WBCL_REDUNET_FUSED_MAX_DIM and K <= WBCL_REDUNET_FUSED_MAX_CLASSES.
 *
 * Results are deterministic for a given input, device and implementation.
 * Every call validates all of its arguments before it enqueues anything;
 * outputs are untouched when a call fails. */
#ifndef WBCL_REDUNET_H
#define WBCL_REDUNET_H

#include <stddef.h>
#include <stdint.h>

#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wbcl_redunet wbcl_redunet;

/* Limits of the fused implementation (AUTO uses GEMM beyond them). */
#define WBCL_REDUNET_FUSED_MAX_DIM 16
#define WBCL_REDUNET_FUSED_MAX_CLASSES 32

typedef enum wbcl_redunet_impl {
    WBCL_REDUNET_IMPL_AUTO = 0,  /* fused within the limits above, else GEMM */
    WBCL_REDUNET_IMPL_FUSED = 1, /* fails with WBCL_ERROR_UNSUPPORTED beyond the limits */
    WBCL_REDUNET_IMPL_GEMM = 2
} wbcl_redunet_impl;

typedef struct wbcl_redunet_params {
    int layers;             /* L >= 1                                              */
    float eta;              /* step size, > 0                                      */
    float eps2;             /* epsilon squared, > 0                                */
    float lambda;           /* softmax inverse temperature, >= 0                   */
    wbcl_redunet_impl impl; /* execution choice only: not saved with the model     */
    int report_every;       /* fit reads the objective back (and calls `progress`)
                               every this many layers; 0: automatic (the fused
                               implementation batches ~64 layers per read-back)    */
} wbcl_redunet_params;

/* The published settings of book Example 5.1: L = 2000, eta = 0.5, eps2 = 0.1,
 * lambda = 500, impl AUTO, report_every 0. */
wbcl_redunet_params wbcl_redunet_default_params(void);

/* Progress of wbcl_redunet_fit: called once per layer, in order, with the
 * 1-based layer number and the objective of that layer's output. Calls come
 * in batches of `report_every` layers, right after each read-back. */
typedef void (*wbcl_redunet_progress_fn)(int layer, double dR, double R, double Rc, void *user);

/* Algorithm 5.1. X: (m, d) features of the training samples (finite; a
 * non-finite entry is WBCL_ERROR_NUMERIC). labels: m host ints in
 * [0, classes), 1 <= classes <= 1024; every class must have at least one
 * sample (an empty class is WBCL_ERROR_INVALID_ARGUMENT naming it). Constructs params->layers layers
 * and returns the model in *out (NULL on failure). Z (may be NULL, may be X)
 * receives the training features after the last layer, (m, d). `progress`
 * may be NULL. */
wbcl_status wbcl_redunet_fit(wbcl_context *ctx, const wbcl_tensor *X, const int *labels, int classes,
                             const wbcl_redunet_params *params, wbcl_redunet_progress_fn progress, void *user,
                             wbcl_tensor *Z, wbcl_redunet **out);

/* ---- construction over several participants (data parallel) ----------------------------------
 *
 * The construction needs the training rows only through sufficient statistics: per layer the
 * class Gram matrices Z_j^T Z_j (K, d, d) and class sizes m_j (ZᵀZ = sum_j Z_j^T Z_j), once for
 * the estimated classes yhat (the logged objective) and once for the true labels (E, C_j of the
 * next layer) -- once only when yhat equals the labels on every participant: each sum carries
 * the count of rows where they differ. Per layer that is one or two sums of K d^2 + K + 1
 * doubles, whatever the number of rows. wbcl_redunet_fit_shard runs wbcl_redunet_fit on one shard of the rows and sums those
 * statistics over all participants through `comm` (wbcl/mpi.h gives an MPI one; the library itself
 * has no transport). Every participant then builds the same E, C_j (or, with `broadcast`, the root
 * builds them and sends them), applies the layer to its own rows and logs the same objective. The
 * result equals wbcl_redunet_fit on the union of the shards (rows in shard order) up to the order of
 * summation: with a single participant whose `sum` leaves the buffer as it is, it is bit for bit the
 * fit with impl GEMM.
 *
 * Protocol. Participants make the same sequence of calls. Each call of `sum` or `broadcast` first
 * agrees on failure: `failed` is this participant's local failure; a non-zero return means some
 * participant failed (or the transport did) and the library returns WBCL_ERROR_PEER at once,
 * without further calls. A participant that fails locally makes exactly one call with failed = 1
 * (buf NULL, n 0) and returns its own error; implementations must let such a call match the other
 * participants' next call of either kind (e.g. both begin with the same flag reduction). Every
 * participant therefore leaves fit_shard with the same outcome: a final call (failed = 0 on success)
 * agrees on it. */
typedef struct wbcl_redunet_comm {
    /* Sums buf[0..n) elementwise over all participants, in place (the same n everywhere).
       Returns 0 on success. Required. */
    int (*sum)(double *buf, size_t n, int failed, void *user);
    /* NULL: every participant builds E, C_j from the summed statistics. Otherwise only the
       participant with root != 0 builds them (and the objective) and this copies `bytes` bytes
       from the root's buf to everyone's. Returns 0 on success. */
    int (*broadcast)(void *buf, size_t bytes, int failed, void *user);
    int root;   /* non-zero on exactly one participant (used with broadcast) */
    void *user; /* passed to sum and broadcast */
} wbcl_redunet_comm;

/* wbcl_redunet_fit on a shard: X (m_local, d) with m_local >= 1 and labels (m_local) in
 * [0, classes); a class may be absent from a shard but not from every shard (that is
 * WBCL_ERROR_INVALID_ARGUMENT naming it, on every participant). Uses the GEMM implementation
 * (params->impl FUSED is WBCL_ERROR_UNSUPPORTED); the returned model, complete on every
 * participant, applies with GEMM too. Z (m_local, d) receives this shard's features. comm == NULL
 * is wbcl_redunet_fit with impl GEMM. Statistics are summed in double. */
wbcl_status wbcl_redunet_fit_shard(wbcl_context *ctx, const wbcl_tensor *X, const int *labels, int classes,
                                   const wbcl_redunet_params *params, const wbcl_redunet_comm *comm,
                                   wbcl_redunet_progress_fn progress, void *user, wbcl_tensor *Z,
                                   wbcl_redunet **out);

/* Algorithm 5.2: Z = f(X) for new rows X (m, d) with the stored layers
 * (normalize on entry, then every layer). Z has X's shape and may be X.
 * On the training rows this replays the construction: the result equals
 * fit's Z bit for bit (same kernels, same order of operations). */
wbcl_status wbcl_redunet_apply(wbcl_context *ctx, const wbcl_redunet *net, const wbcl_tensor *X, wbcl_tensor *Z);

/* The rate-reduction objective of features Z (m, d) as they are (no
 * normalization) grouped by host labels in [0, classes) (empty groups
 * skipped): *R, *Rc, *dR as above (any of them may be NULL). */
wbcl_status wbcl_redunet_objective(wbcl_context *ctx, const wbcl_tensor *Z, const int *labels, int classes,
                                   float eps2, double *dR, double *R, double *Rc);

/* A model from host arrays (e.g. converted from the reference code):
 * E (layers, d, d), C (layers, classes, d, d), gamma (layers, classes), all
 * finite; objective (layers, 3) rows (dR, R, Rc) or NULL (no history). Only
 * params->eta, eps2 and lambda (and impl) are used. */
wbcl_status wbcl_redunet_create(wbcl_context *ctx, int layers, int dim, int classes,
                                const wbcl_redunet_params *params, const float *E, const float *C,
                                const float *gamma, const double *objective, wbcl_redunet **out);

/* Copies layer `layer` (0-based) to the host: E (d*d floats), C (K*d*d),
 * gamma (K); each pointer may be NULL. */
wbcl_status wbcl_redunet_read_layer(wbcl_context *ctx, const wbcl_redunet *net, int layer, float *E, float *C,
                                    float *gamma);

int wbcl_redunet_layers(const wbcl_redunet *net);  /* 0 for NULL */
int wbcl_redunet_dim(const wbcl_redunet *net);     /* d; 0 for NULL */
int wbcl_redunet_classes(const wbcl_redunet *net); /* K; 0 for NULL */
/* The hyperparameters (layers = the model's layer count). */
wbcl_redunet_params wbcl_redunet_get_params(const wbcl_redunet *net);
/* Chooses the implementation used by later wbcl_redunet_apply calls. */
wbcl_status wbcl_redunet_set_impl(wbcl_redunet *net, wbcl_redunet_impl impl);

/* Objective of layer `layer`'s output (0-based), as logged by fit (and kept
 * by save/load). WBCL_ERROR_INVALID_ARGUMENT if out of range or if the model
 * has no history (made by wbcl_redunet_create without one). Pointers may be NULL. */
wbcl_status wbcl_redunet_history(const wbcl_redunet *net, int layer, double *dR, double *R, double *Rc);

/* Model files (safetensors): tensors "E" (L, d, d) F32, "C" (L, K, d, d)
 * F32, "gamma" (L, K) F32, optional "objective" (L, 3) F64 rows (dR, R, Rc);
 * __metadata__ "format" = "wbcl.redunet", "version" = "1", "layers", "dim",
 * "classes", "eta", "eps2", "lambda" (decimal, round-trip exact for float).
 * save writes atomically (an existing file is replaced only by a complete
 * one); load validates the file (shapes against the metadata, finiteness)
 * and names the file and the tensor in its messages. */
wbcl_status wbcl_redunet_save(wbcl_context *ctx, const wbcl_redunet *net, const char *path);
wbcl_status wbcl_redunet_load(wbcl_context *ctx, const char *path, wbcl_redunet **out);

void wbcl_redunet_destroy(wbcl_redunet *net); /* NULL is a no-op */

/* Synthetic data (SPEC §5): `classes` classes of n_per_class rows each,
 * row i of class k = normalize(mu_k + sigma * N(0, I_d)), with centres mu_k
 * the rows of `centres` (classes, d), or e_1..e_K when centres is NULL (then
 * classes <= d). Rows come class by class: X (classes*n_per_class, d), y the
 * class of each row (may be NULL). Deterministic for a seed on every platform
 * (splitmix64 and Box-Muller in double). Returns WBCL_ERROR_INVALID_ARGUMENT
 * for NULL X, zero sizes, classes > d without centres, or a non-finite sigma. */
wbcl_status wbcl_redunet_gaussians(size_t d, int classes, size_t n_per_class, double sigma, const float *centres,
                                   uint64_t seed, float *X, int *y);

#ifdef __cplusplus
}
#endif
#endif
