/* wbcl — double-precision CPU references, written straight from the
 * equations (no blocking, no tricks). Tests compare the device kernels with
 * them; tools use them for --verify. Row-major, same conventions as the ops. */
#ifndef WBCL_REF_H
#define WBCL_REF_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C = alpha op(A) op(B) + beta C; ta/tb nonzero = transposed; lda etc. are row strides of the stored matrices. */
void wbcl_ref_gemm(int ta, int tb, size_t m, size_t n, size_t k, double alpha, const double *A, size_t lda,
                   const double *B, size_t ldb, double beta, double *C, size_t ldc);
/* gamma/beta may be NULL. */
void wbcl_ref_layernorm(size_t rows, size_t d, const double *x, const double *gamma, const double *beta, double eps,
                        double *y);
void wbcl_ref_gelu(size_t n, const double *x, double *y);
void wbcl_ref_softmax(size_t rows, size_t d, const double *x, double *y);
/* op: 0 sum, 1 mean, 2 max, 3 sum of squares (as wbcl_reduce_op). */
void wbcl_ref_reduce_rows(int op, size_t rows, size_t cols, const double *x, double *y);
void wbcl_ref_reduce_cols(int op, size_t rows, size_t cols, const double *x, double *y);

/* Dense SPD linear algebra in double (n x n row-major). Return 0 on success,
 * or 1 + the index of the first non-positive pivot. */
int wbcl_ref_cholesky(size_t n, const double *A, double *L);
int wbcl_ref_logdet_spd(size_t n, const double *A, double *logdet);
int wbcl_ref_spd_inverse(size_t n, const double *A, double *Ainv);
int wbcl_ref_spd_solve(size_t n, size_t r, const double *A, const double *B, double *X);

/* ReduNet */
/* Vector ReduNet (SPEC.md §4.1), rows are samples. Rows of Z (m, d) divided by max(|z|, 1e-8), in place. */
void wbcl_ref_redunet_normalize(size_t m, size_t d, double *Z);
/* One layer from Z (m, d) and labels y in [0, K): E (d, d), C (K, d, d), gamma (K) (may be NULL).
 * Returns 0, 1 + j for an empty class j, or -1 for a failed factorization. */
int wbcl_ref_redunet_construct(size_t m, size_t d, size_t K, const double *Z, const int *y, double eps2, double *E,
                               double *C, double *gamma);
/* Applies one layer to every row of Z in place; yhat (may be NULL) gets argmax pi (ties: lowest class). */
void wbcl_ref_redunet_apply(size_t m, size_t d, size_t K, const double *E, const double *C, const double *gamma,
                            double eta, double lambda, double *Z, int *yhat);
/* out = (dR, R, Rc) of Z grouped by labels in [0, K) (empty groups skipped). Returns 0 or -1. */
int wbcl_ref_redunet_objective(size_t m, size_t d, size_t K, const double *Z, const int *labels, double eps2,
                               double out[3]);
/* Algorithm 5.1: Z (m, d) holds X on entry, the features after L layers on return. E_all (L, d, d),
 * C_all (L, K, d, d), gamma (K) and hist (L, 3) rows (dR, R, Rc) may be NULL. Returns as construct. */
int wbcl_ref_redunet_fit(size_t m, size_t d, size_t K, size_t L, const int *y, double eta, double eps2, double lambda,
                         double *Z, double *E_all, double *C_all, double *gamma, double *hist);
/* end ReduNet */

/* softmax attention, MSSA ------------------------------------------------------------------------
 * Straight from SPEC 1.1/1.2: scores row by row, max-subtracted softmax in double, masked keys
 * left out of the sums (the -inf of the mask, without -inf arithmetic). */
/* Per head: q, o (B, K, nq, p); k, v (B, K, nk, p); o = softmax(q kT scale + M) v. causal: query i
 * sees keys j <= i + (nk - nq) (nq <= nk). */
void wbcl_ref_attention_heads(size_t B, size_t K, size_t nq, size_t nk, size_t p, const double *q, const double *k,
                              const double *v, double scale, int causal, double *o);
/* timm ViT Attention: x, y (B, N, d); Wqkv (3d, d); bqkv (3d) or NULL; Wo (d, d); bo (d); p = d / heads,
 * scale p^-1/2. */
void wbcl_ref_mha(size_t B, size_t N, size_t d, size_t heads, int causal, const double *x, const double *Wqkv,
                  const double *bqkv, const double *Wo, const double *bo, double *y);
/* CRATE Attention: w = x Uᵀ, U (heads*dim_head, d), Q = K = V = w, scale dim_head^-1/2; y = merge(o) Woᵀ + bo
 * with Wo (d, heads*dim_head), bo (d); Wo == NULL: y = merge(o) (identity, needs heads*dim_head == d). */
void wbcl_ref_mssa(size_t B, size_t N, size_t d, size_t heads, size_t dim_head, int causal, const double *x,
                   const double *U, const double *Wo, const double *bo, double *y);
/* end softmax attention, MSSA */

/* TSSA, XCA, AoT, energy ---------------------------------------------------------------------------
 * Straight from SPEC 1.3-1.7 (host/ref/ref_tssa.c): per-head tensors (B, K, N, p), tokens (B, N, d),
 * rho 0 = -exp(-z), 1 = log(z + c). */
/* y = x Wᵀ + b: x (rows, in), W (out, in), b (out) or NULL, y (rows, out). */
void wbcl_ref_linear(size_t rows, size_t in, size_t out, const double *x, const double *W, const double *b,
                     double *y);
/* TSSA (SPEC 1.4): w, y (B, K, N, p); temp (K); Pi (B, K, N) or NULL. */
void wbcl_ref_tssa(size_t B, size_t K, size_t N, size_t p, const double *w, const double *temp, double *y,
                   double *Pi);
/* Causal TSSA (SPEC 1.5) from position 0: bias (K, tmax), N <= tmax; Pi (B, K, N) or NULL. */
void wbcl_ref_tssa_causal(size_t B, size_t K, size_t N, size_t p, const double *w, const double *temp,
                          const double *bias, size_t tmax, double *y, double *Pi);
/* Layers: x, y (B, N, d); W, Wo (d, d); b, bo (d) or NULL; temp (K); bias (K, tmax). */
void wbcl_ref_tssa_layer(size_t B, size_t N, size_t d, size_t K, const double *x, const double *W, const double *b,
                         const double *temp, const double *Wo, const double *bo, double *y);
void wbcl_ref_tssa_causal_layer(size_t B, size_t N, size_t d, size_t K, const double *x, const double *W,
                                const double *b, const double *temp, const double *bias, size_t tmax,
                                const double *Wo, const double *bo, double *y);
/* XCA (SPEC 1.6): q, k, v, o (B, K, N, p); temperature (K). */
void wbcl_ref_xca(size_t B, size_t K, size_t N, size_t p, const double *q, const double *k, const double *v,
                  const double *temperature, double *o);
/* XCiT XCA layer: Wqkv (3d, d), bqkv (3d) or NULL, Wp (d, d), bp (d) or NULL. */
void wbcl_ref_xca_layer(size_t B, size_t N, size_t d, size_t K, const double *x, const double *Wqkv,
                        const double *bqkv, const double *temperature, const double *Wp, const double *bp,
                        double *y);
/* AoT (SPEC 1.3): o = phi(w wᵀ) w per head, phi = row softmax, thresholded (h_tau) if threshold != 0. */
void wbcl_ref_aot_heads(size_t B, size_t K, size_t N, size_t p, const double *w, int threshold, double tau,
                        double *o);
/* Zout = Z + eta sum_k phi((Z U_k)(Z U_k)ᵀ) Z U_k U_kᵀ; Z, Zout (B, N, d) (may alias); U (d, K*p). */
void wbcl_ref_aot_step(size_t B, size_t N, size_t d, size_t K, size_t p, const double *Z, const double *U,
                       double eta, int threshold, double tau, double *Zout);
/* snr[k] over the rows of Z (rows, d) labelled k (labels in [0, K)). */
void wbcl_ref_aot_snr(size_t rows, size_t d, size_t K, size_t p, const double *Z, const double *U,
                      const int *labels, double *snr);
/* Energy step per head (SPEC 1.7): y (B, K, N, p) similarities, v (B, K, N, pv) values (NULL: y), out like v. */
void wbcl_ref_energy_heads(size_t B, size_t K, size_t N, size_t p, size_t pv, const double *y, const double *v,
                           int rho, double c, double alpha, double *out);
/* Token step: Z, Zout (B, N, d), similarities from Z Wa (Wa (d, d) or NULL). */
void wbcl_ref_energy_step(size_t B, size_t N, size_t d, const double *Z, const double *Wa, int rho, double c,
                          double alpha, double *Zout);
/* Y = [ReLU](U Wfs), Wfs = (1 - alpha2) I - alpha2 (Wf + Wfᵀ)/2; U, Y (rows, d). */
void wbcl_ref_energy_ffn(size_t rows, size_t d, const double *U, const double *Wf, double alpha2, int relu,
                         double *Y);
/* E1(Y Wa) of one sequence Y (N, d) (Wa NULL: E1(Y)); pair (may be NULL) gets the pair term alone. */
double wbcl_ref_energy_e1(size_t N, size_t d, const double *Y, const double *Wa, int rho, double c, double *pair);
/* end TSSA, XCA, AoT, energy */

/* ISTA, LASSO, measures ----------------------------------------------------------------------------
 * Straight from SPEC §2-§3 (host/ref/ref_ista.c, ref_measures.c): tokens as rows, the dictionary
 * stored as W = D (d, m), so D z is z Wᵀ and Dᵀ r is r W; soft != 0: soft threshold, else ReLU. */
/* y = theta_{eta lambd}(z - eta (z Wᵀ - x) W); x (rows, d), z (rows, m) or NULL (z = x, m == d),
 * y (rows, m) (may alias x or z). */
void wbcl_ref_ista(size_t rows, size_t d, size_t m, const double *x, const double *z, const double *W, double eta,
                   double lambd, int soft, double *y);
/* CRATE FeedForward in the reference's order: relu(x + (eta (x W - (x Wᵀ) W) - eta lambd)), W (d, d). */
void wbcl_ref_crate_ista(size_t rows, size_t d, const double *x, const double *W, double eta, double lambd, double *y);
/* F(Z) = lambd |Z|_1 + 1/2 |X - Z Wᵀ|_F^2; X (rows, d), Z (rows, m). */
double wbcl_ref_lasso_objective(size_t rows, size_t d, size_t m, const double *X, const double *W, const double *Z,
                                double lambd);
/* `steps` ISTA (fista = 0) or FISTA steps of size t from Z (in place); obj (steps + 1) or NULL gets F(Z_k). */
void wbcl_ref_lasso(size_t rows, size_t d, size_t m, const double *X, const double *W, double lambd, int soft,
                    int fista, double t, size_t steps, double *Z, double *obj);
/* |W|_2^2: the largest eigenvalue of W Wᵀ (or Wᵀ W), by Jacobi rotations. */
double wbcl_ref_spectral_norm_sq(size_t d, size_t m, const double *W);
/* One sample Z (N, d); U (d, K p) = [U_1 .. U_K]; Pi (K, N); eps2 = epsilon^2; natural logs. */
double wbcl_ref_coding_rate(size_t N, size_t d, const double *Z, double eps2);
double wbcl_ref_coding_rate_subspaces(size_t N, size_t d, size_t K, size_t p, const double *Z, const double *U,
                                      double eps2);
double wbcl_ref_coding_rate_var(size_t N, size_t d, size_t K, size_t p, const double *Z, const double *U,
                                const double *Pi, double eps2);
/* #{|Z_ij| > threshold} / (N d) (NaN counts as nonzero). */
double wbcl_ref_sparsity(size_t N, size_t d, const double *Z, double threshold);
/* end ISTA, LASSO, measures */

/* Shift-invariant ReduNet (SPEC §4.2; host/ref/ref_circulant.c) ----------------------------------
 * 1-D is H = 1. Signals (m, C, H, W) row-major, N = H W. Spectra (m, C, N) and per-frequency operators are
 * complex, stored as interleaved (re, im) doubles; the whole spectrum p = 0..N-1 (p = ph W + pw). ops holds one
 * layer as (K+1, N, C, C): entries 0..K-1 = C_{j,p}, entry K = E_p. Entering normalizes each sample over
 * (C, H, W) and takes the unitary DFT; leaving is real(normalize(IDFT)). */
/* Lf (m, Cout, H, W) = ReLU(circular cross-correlation of X (m, Cin, H, W) with Wt (Cout, Cin, kh, kw)). */
void wbcl_ref_circ_lift(size_t m, size_t Cin, size_t Cout, size_t H, size_t W, size_t kh, size_t kw,
                        const double *X, const double *Wt, double *Lf);
/* Unitary 2-D DFT over the last two axes of rows complex (H, W) arrays (inverse: + sign). */
void wbcl_ref_circ_dft(size_t rows, size_t H, size_t W, int inverse, const double *in, double *out);
/* One layer's ops and gamma (K) from spectra V and labels y. Returns 0, 1 + j for an empty class j, -1. */
int wbcl_ref_circ_construct(size_t m, size_t C, size_t N, size_t K, const double *V, const int *y, double eps2,
                            double *ops, double *gamma);
/* Applies one layer to V in place; yhat (m) and pi (m, K) may be NULL. */
void wbcl_ref_circ_apply(size_t m, size_t C, size_t N, size_t K, const double *ops, const double *gamma, double eta,
                         double lambda, double *V, int *yhat, double *pi);
/* out = (dR, R, Rc) of spectra V grouped by labels (sums over the whole spectrum divided by 2N). */
int wbcl_ref_circ_objective(size_t m, size_t C, size_t N, size_t K, const double *V, const int *labels, double eps2,
                            double out[3]);
/* Fit L layers: Z (m, C, H, W) lifted features in, output features out. ops_all (L, K+1, N, C, C) complex,
 * gamma_all (L, K), hist (L, 3), yhat (m) of the last layer, max_imag (max |imag| / max |real| of the normalized
 * inverse DFT) may be NULL. Returns as construct. */
int wbcl_ref_circ_fit(size_t m, size_t C, size_t H, size_t W, size_t K, size_t L, const int *y, double eta,
                      double eps2, double lambda, double *Z, double *ops_all, double *gamma_all, double *hist,
                      int *yhat, double *max_imag);
/* Apply a fitted network (ops_all, gamma_all as from fit) to Z in place; yhat, pi of the last layer or NULL. */
int wbcl_ref_circ_forward(size_t m, size_t C, size_t H, size_t W, size_t K, size_t L, const double *ops_all,
                          const double *gamma_all, double eta, double lambda, double *Z, int *yhat, double *pi);
/* Dense oracle from the time-domain definition: M (C N, C N) = a (I + (a/N) circ(Z_g) circ(Z_g)^T)^-1 with
 * a = C/(m_g eps2), Z_g the samples with labels == group (labels NULL: all), all 2-D cyclic shifts. */
int wbcl_ref_circ_dense_operator(size_t m, size_t C, size_t H, size_t W, const double *Z, const int *labels,
                                 int group, double eps2, double *M);
/* One layer built and applied densely in the time domain to Z (m, C, H, W), already normalized, in place. */
int wbcl_ref_circ_dense_layer(size_t m, size_t C, size_t H, size_t W, size_t K, const int *y, double eta, double eps2,
                              double lambda, double *Z, int *yhat);
/* end shift-invariant ReduNet */

/* Causal language models (include/wbcl/lm.h; host/ref/ref_lm.c) -----------------------------------
 * Straight from SPEC §6.4 / §1.5 / §2 in double: token + position embedding, the blocks, ln_f (not
 * crate_lm), logits = x headᵀ. Optional vectors (LayerNorm and Linear biases) may be NULL. */
typedef struct wbcl_ref_lm_block {
    const double *ln1_g, *ln1_b, *ln2_g, *ln2_b; /* (d); gpt2/tost ln_1, ln_2; crate prenorm_1, prenorm_2   */
    const double *Wa, *ba;       /* attn.c_attn: gpt2 (3d, d) + (3d); tost (d, d) + (d); crate (K p, d), ba NULL */
    const double *Wo, *bo;       /* attn.c_proj: (d, d) or (d, K p), (d)                                         */
    const double *temp, *bias;   /* tost: temp (K), denom_bias (K, block_size)                                   */
    const double *Wfc, *bfc, *Wpr, *bpr; /* gpt2/tost MLP: c_fc (hidden, d) + (hidden), c_proj (d, hidden) + (d) */
    const double *ista;          /* crate: (d, d), step 0.1, lambda 0.1, ReLU                                    */
    const double *gamma1, *gamma2; /* tost: ToST's layer scales (d) on the attention / MLP branch; NULL: none    */
} wbcl_ref_lm_block;
typedef struct wbcl_ref_lm {
    int kind; /* 0 gpt2, 1 tost_lm, 2 crate_lm (wbcl_lm_kind) */
    size_t V, block_size, d, depth, heads, dim_head, hidden;
    const double *wte, *wpe, *lnf_g, *lnf_b; /* (V, d), (block_size, d), (d) (not crate)  */
    const double *head;                      /* (V, d); NULL: wte (tied)                   */
    const wbcl_ref_lm_block *blocks;         /* depth                                      */
} wbcl_ref_lm;
/* logits (B, T, V) of the sequences ids (B, T), every id in [0, V), T <= block_size. */
void wbcl_ref_lm_forward(const wbcl_ref_lm *m, size_t B, size_t T, const long long *ids, double *logits);
/* end causal language models */

#ifdef __cplusplus
}
#endif
#endif
