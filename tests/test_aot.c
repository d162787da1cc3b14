/* AoT denoising step (book 5.3.2, Theorem 5.1) and the per-subspace SNR
 * (5.3.3): include/wbcl/aot.h against host/ref/ref_aot.c, and the book's
 * claim on data drawn from the mixture of low-rank Gaussians (5.3.1): the SNR
 * grows layer by layer, by exactly (1 + eta tau) per layer with the
 * thresholded softmax of Theorem 5.1.
 *
 * Tolerances. Logits are p-term dot products (error ~ p u |w_i||w_j|, relative
 * to logits of size |w|^2 up to ~40 here: absolute <= 1e-4); softmax weights
 * move relatively by that much, and the outputs are weighted sums over N
 * tokens of w (another N u). We compare with rtol 5e-4 and atol 1e-5 * max|o|.
 * The thresholded softmax is discontinuous at tau: the data here keep every
 * weight at least 1e-3 away from tau (checked in double by the test itself). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "wbcl/aot.h"

#define OK(ctx, call)                                                                                 \
    do {                                                                                              \
        wbcl_status s_ = (call);                                                                      \
        ck_assert_msg(s_ == WBCL_SUCCESS, "%s: %s: %s", #call, wbcl_status_name(s_),                 \
                      wbcl_context_last_error(ctx));                                                  \
    } while (0)

#define RTOL 5e-4
#define ATOL_REL 1e-5

static wbcl_tensor *mk(wbcl_context *ctx, int ndim, const size_t *shape, const float *data)
{
    wbcl_tensor *t = NULL;
    OK(ctx, wbcl_tensor_create(ctx, ndim, shape, WBCL_F32, data, &t));
    return t;
}

static float *rd(wbcl_context *ctx, const wbcl_tensor *t)
{
    size_t n = wbcl_tensor_numel(t);
    float *h = tu_guarded_alloc(n);
    OK(ctx, wbcl_tensor_read(ctx, t, h, n));
    ck_assert(tu_canary_ok(h, n));
    return h;
}

static double maxabs(const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

static void close_to(const float *got, const double *want, size_t n, const char *what)
{
    double scale = maxabs(want, n);
    tu_assert_close(got, want, n, ATOL_REL * (scale > 0 ? scale : 1.0), RTOL, what);
}

/* d x kp with orthonormal columns (Gram-Schmidt on Gaussian columns, twice) */
static double *orthonormal(tu_rng *r, size_t d, size_t kp)
{
    double *U = malloc(d * kp * sizeof *U);
    for (size_t i = 0; i < d * kp; i++) U[i] = tu_normal(r);
    for (size_t j = 0; j < kp; j++)
        for (int pass = 0; pass < 2; pass++) {
            for (size_t q = 0; q < j; q++) {
                double dot = 0.0;
                for (size_t i = 0; i < d; i++) dot += U[i * kp + j] * U[i * kp + q];
                for (size_t i = 0; i < d; i++) U[i * kp + j] -= dot * U[i * kp + q];
            }
            double nrm = 0.0;
            for (size_t i = 0; i < d; i++) nrm += U[i * kp + j] * U[i * kp + j];
            nrm = sqrt(nrm);
            for (size_t i = 0; i < d; i++) U[i * kp + j] /= nrm;
        }
    return U;
}

/* Minimal distance of any softmax weight of phi(w w^T) to tau, per head (double). */
static double min_gap_to_tau(size_t B, size_t K, size_t N, size_t p, const double *w, double tau)
{
    double gap = INFINITY, *g = malloc(N * sizeof *g);
    for (size_t bh = 0; bh < B * K; bh++)
        for (size_t i = 0; i < N; i++) {
            const double *wb = w + bh * N * p;
            double m = -INFINITY, z = 0.0;
            for (size_t j = 0; j < N; j++) {
                double s = 0.0;
                for (size_t c = 0; c < p; c++) s += wb[i * p + c] * wb[j * p + c];
                g[j] = s;
                m = s > m ? s : m;
            }
            for (size_t j = 0; j < N; j++) z += exp(g[j] - m);
            for (size_t j = 0; j < N; j++) gap = fmin(gap, fabs(exp(g[j] - m) / z - tau));
        }
    free(g);
    return gap;
}

typedef struct { size_t B, K, N, p; } shape4;

/* A context running the CPU-shaped (gpu 0) or the GPU-shaped (gpu 1) kernels, on PoCL alike. */
static wbcl_context *variant_context(int gpu)
{
    wbcl_context *ctx = tu_context();
    OK(ctx, wbcl_context_set_variant(ctx, gpu ? WBCL_VARIANT_GPU : WBCL_VARIANT_CPU));
    return ctx;
}

/* Both kernel variants against the reference. The GPU-shaped kernel (cl/aot.cl wbcl_aot_attend_g: 64
 * queries per work-group, keys in tiles of 32, p up to the column capacity 16 / 32 / 64 / 128) meets
 * N = 1, primes, N = 97 (two query blocks, a last key tile of one key), p = 1, p not a multiple of 8
 * or of 16. Each capacity is a program of its own (3-4 CPU-s of PoCL compile, more than this suite
 * has to spare): the GPU variant runs the shapes of capacity 16 only; the others (p = 17, 64, 100, 128:
 * 2 and 4 columns per work-item, and the 32-query geometry of capacity 128) are checked against
 * double precision by perf/bench_aot_energy (8 rows per head, both variants). The CPU variant's softmax
 * step is the fused attention kernel up to p = 4096 (WBCL_ATT_P_MAX) and wbcl_aot_attend beyond it:
 * p = 4100 takes the latter. */
START_TEST(aot_heads_match_reference)
{
    static const shape4 shapes[] = {{1, 1, 1, 1}, {2, 3, 7, 5}, {1, 12, 13, 8}, {2, 2, 61, 17}, {1, 1, 97, 9},
                                    {1, 2, 29, 100}, {1, 1, 5, 4100}};
    for (int gpu = 0; gpu < 2; gpu++) {
        wbcl_context *ctx = variant_context(gpu);
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int th = 0; th < 2; th++) {
                const shape4 *s = &shapes[si];
                if (gpu && s->p > 16) continue;
                size_t n = s->B * s->K * s->N * s->p;
                tu_rng r;
                tu_rng_seed(&r, 10 + si);
                /* scale so that logits are O(1..10): a mix of spread and peaked softmax rows */
                double sc = 2.0 / sqrt((double)s->p);
                float *w = tu_random_f32(&r, n, -sc * 2, sc * 2);
                double *w64 = tu_to_f64(w, n), *o64 = malloc(n * sizeof *o64);
                if (th) ck_assert_msg(min_gap_to_tau(s->B, s->K, s->N, s->p, w64, 0.75) > 1e-3, "data too close to tau");
                wbcl_ref_aot_heads(s->B, s->K, s->N, s->p, w64, th, 0.75, o64);
                size_t sh[4] = {s->B, s->K, s->N, s->p};
                wbcl_tensor *tw = mk(ctx, 4, sh, w), *to = mk(ctx, 4, sh, NULL);
                OK(ctx, wbcl_aot_heads(ctx, tw, th ? WBCL_AOT_THRESHOLD : WBCL_AOT_SOFTMAX, 0.75f, to));
                float *o = rd(ctx, to);
                char what[96];
                snprintf(what, sizeof what, "AoT heads %s, %s variant (B %zu K %zu N %zu p %zu)",
                         th ? "threshold" : "softmax", gpu ? "GPU" : "CPU", s->B, s->K, s->N, s->p);
                close_to(o, o64, n, what);
                wbcl_tensor_destroy(tw);
                wbcl_tensor_destroy(to);
                free(w);
                free(w64);
                free(o64);
                tu_guarded_free(o);
            }
        wbcl_context_destroy(ctx);
    }
}
END_TEST

START_TEST(aot_step_matches_reference)
{
    wbcl_context *ctx = tu_context();
    const size_t B = 2, N = 23, K = 3, p = 5, d = 17;
    tu_rng r;
    tu_rng_seed(&r, 21);
    double *U64 = orthonormal(&r, d, K * p);
    float *U = malloc(d * K * p * sizeof *U), *Z = tu_random_f32(&r, B * N * d, -1.0, 1.0);
    for (size_t i = 0; i < d * K * p; i++) U[i] = (float)U64[i];
    for (size_t i = 0; i < d * K * p; i++) U64[i] = U[i];
    double *Z64 = tu_to_f64(Z, B * N * d), *out64 = malloc(B * N * d * sizeof *out64);
    size_t sz[3] = {B, N, d}, su[2] = {d, K * p};
    wbcl_tensor *tZ = mk(ctx, 3, sz, Z), *tU = mk(ctx, 2, su, U), *tO = mk(ctx, 3, sz, NULL);
    for (int th = 0; th < 2; th++) {
        wbcl_ref_aot_step(B, N, d, K, p, Z64, U64, 0.5, th, 0.75, out64);
        OK(ctx, wbcl_aot_step(ctx, tZ, tU, K, 0.5f, th ? WBCL_AOT_THRESHOLD : WBCL_AOT_SOFTMAX, 0.75f, tO));
        float *o = rd(ctx, tO);
        close_to(o, out64, B * N * d, th ? "AoT step (threshold)" : "AoT step (softmax)");
        tu_guarded_free(o);
    }
    /* in place */
    wbcl_tensor *tZ2 = mk(ctx, 3, sz, Z);
    OK(ctx, wbcl_aot_step(ctx, tZ2, tU, K, 0.5f, WBCL_AOT_THRESHOLD, 0.75f, tZ2));
    float *o = rd(ctx, tZ2);
    close_to(o, out64, B * N * d, "AoT step in place");
    tu_guarded_free(o);
    /* SNR against the reference, random labels */
    int *lab = malloc(B * N * sizeof *lab);
    for (size_t i = 0; i < B * N; i++) lab[i] = (int)(i % K);
    double snr[3], snr64[3];
    OK(ctx, wbcl_aot_snr(ctx, tZ, tU, K, lab, snr));
    wbcl_ref_aot_snr(B * N, d, K, p, Z64, U64, lab, snr64);
    for (size_t k = 0; k < K; k++) ck_assert_msg(fabs(snr[k] - snr64[k]) <= 1e-5 * snr64[k], "SNR[%zu] %g vs %g", k, snr[k], snr64[k]);
    /* a class without tokens gives NaN */
    for (size_t i = 0; i < B * N; i++) lab[i] = (int)(i % 2);
    OK(ctx, wbcl_aot_snr(ctx, tZ, tU, K, lab, snr));
    ck_assert(isnan(snr[2]) && isfinite(snr[0]));
    /* bad input */
    lab[5] = 3;
    tu_assert_status(ctx, wbcl_aot_snr(ctx, tZ, tU, K, lab, snr), WBCL_ERROR_INVALID_ARGUMENT, "labels[5] = 3");
    tu_assert_status(ctx, wbcl_aot_step(ctx, tZ, tU, K, 0.5f, WBCL_AOT_THRESHOLD, 0.5f, tO), WBCL_ERROR_INVALID_ARGUMENT,
                     "tau must lie in (1/2, 1]");
    tu_assert_status(ctx, wbcl_aot_step(ctx, tZ, tU, K, NAN, WBCL_AOT_SOFTMAX, 0.75f, tO), WBCL_ERROR_INVALID_ARGUMENT,
                     "eta");
    tu_assert_status(ctx, wbcl_aot_step(ctx, tZ, tU, 4, 0.5f, WBCL_AOT_SOFTMAX, 0.75f, tO), WBCL_ERROR_SHAPE,
                     "expected (17, heads * p) with 4 heads");
    tu_assert_status(ctx, wbcl_aot_step(ctx, tZ, tU, K, 0.5f, (wbcl_aot_phi)7, 0.75f, tO), WBCL_ERROR_INVALID_ARGUMENT,
                     "unknown phi");
    size_t sw[4] = {1, 2, 3, 4};
    wbcl_tensor *tw = mk(ctx, 4, sw, NULL);
    tu_assert_status(ctx, wbcl_aot_heads(ctx, tw, WBCL_AOT_SOFTMAX, 0.75f, tw), WBCL_ERROR_INVALID_ARGUMENT, "must not");
    wbcl_tensor_destroy(tw);
    wbcl_tensor_destroy(tZ);
    wbcl_tensor_destroy(tZ2);
    wbcl_tensor_destroy(tU);
    wbcl_tensor_destroy(tO);
    free(U64);
    free(U);
    free(Z);
    free(Z64);
    free(out64);
    free(lab);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Tokens from (5.3.1): z_i = U_k a_i + sum_{j != k} U_j e_ij, a ~ N(0, I_p), e ~ N(0, delta^2 I_p),
 * K orthogonal subspaces of dimension p in R^d, N/K tokens per subspace. */
static void mixture(tu_rng *r, size_t K, size_t p, size_t d, size_t Nk, double delta, const double *U, float *Z,
                    int *lab)
{
    size_t kp = K * p;
    double *a = malloc(kp * sizeof *a);
    for (size_t k = 0; k < K; k++)
        for (size_t t = 0; t < Nk; t++) {
            size_t i = k * Nk + t;
            lab[i] = (int)k;
            for (size_t j = 0; j < kp; j++) a[j] = (j / p == k ? 1.0 : delta) * tu_normal(r);
            for (size_t m = 0; m < d; m++) {
                double s = 0.0;
                for (size_t j = 0; j < kp; j++) s += U[m * kp + j] * a[j];
                Z[i * d + m] = (float)s;
            }
        }
    free(a);
}

START_TEST(aot_snr_grows_layer_by_layer)
{
    wbcl_context *ctx = tu_context();
    for (int th = 0; th < 2; th++) {
        /* softmax: K 4, p 16, 64 tokens per subspace, delta 0.1, eta 0.05: the SNR grows every layer
         * (in float64 over 20 seeds: by >= 2% per layer for 5 layers). With unnormalized tokens the
         * growing signal eventually sharpens the cross-subspace softmax and the SNR falls (after ~3
         * layers for eta 0.1, p 32), in float64 too: a property of (5.3.2), not of the engine.
         * threshold (Theorem 5.1): K 4, p 32, 32 per subspace, tau 0.75 in (1/2, 1/(1 + N e^{-9p/32})]
         * = (0.5, 0.984], eta 0.5: SNR multiplied by exactly 1 + eta tau = 1.375 per layer (in float64
         * for 29 of 30 seeds over 3 layers; this seed is one of them). */
        const size_t K = 4, p = th ? 32 : 16, d = K * p + 8, Nk = th ? 32 : 64, N = K * Nk, L = th ? 3 : 5;
        const double delta = 0.1, eta = th ? 0.5 : 0.05, tau = 0.75;
        tu_rng r;
        tu_rng_seed(&r, 5301 + th);
        double *U64 = orthonormal(&r, d, K * p);
        float *U = malloc(d * K * p * sizeof *U), *Z = malloc(N * d * sizeof *Z);
        for (size_t i = 0; i < d * K * p; i++) U[i] = (float)U64[i];
        int *lab = malloc(N * sizeof *lab);
        mixture(&r, K, p, d, Nk, delta, U64, Z, lab);
        size_t sz[2] = {N, d}, su[2] = {d, K * p};
        wbcl_tensor *tU = mk(ctx, 2, su, U), *tZ = mk(ctx, 2, sz, Z);
        double prev[4], cur[4];
        OK(ctx, wbcl_aot_snr(ctx, tZ, tU, K, lab, prev));
        for (size_t l = 1; l <= L; l++) {
            OK(ctx, wbcl_aot_step(ctx, tZ, tU, K, (float)eta, th ? WBCL_AOT_THRESHOLD : WBCL_AOT_SOFTMAX, (float)tau, tZ));
            OK(ctx, wbcl_aot_snr(ctx, tZ, tU, K, lab, cur));
            for (size_t k = 0; k < K; k++) {
                double ratio = cur[k] / prev[k];
                if (th)
                    ck_assert_msg(fabs(ratio - (1.0 + eta * tau)) <= 1e-4,
                                  "layer %zu subspace %zu: SNR ratio %.7f, want %.4f", l, k, ratio, 1.0 + eta * tau);
                else
                    ck_assert_msg(ratio > 1.01, "layer %zu subspace %zu: SNR %g -> %g does not grow", l, k, prev[k],
                                  cur[k]);
                prev[k] = cur[k];
            }
        }
        wbcl_tensor_destroy(tZ);
        wbcl_tensor_destroy(tU);
        free(U64);
        free(U);
        free(Z);
        free(lab);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* logits w_i . w_j of ~1e4: finite, equal to the reference (exp saturates to 0/1 weights) */
START_TEST(aot_large_logits)
{
    for (int gpu = 0; gpu < 2; gpu++) {
        wbcl_context *ctx = variant_context(gpu);
        const size_t B = 1, K = 2, N = 19, p = 4, n = B * K * N * p;
        tu_rng r;
        tu_rng_seed(&r, 99);
        float *w = tu_random_f32(&r, n, -80.0, 80.0); /* |w|^2 up to ~2.5e4 */
        double *w64 = tu_to_f64(w, n), *o64 = malloc(n * sizeof *o64);
        wbcl_ref_aot_heads(B, K, N, p, w64, 0, 0.75, o64);
        size_t sh[4] = {B, K, N, p};
        wbcl_tensor *tw = mk(ctx, 4, sh, w), *to = mk(ctx, 4, sh, NULL);
        OK(ctx, wbcl_aot_heads(ctx, tw, WBCL_AOT_SOFTMAX, 0.75f, to));
        float *o = rd(ctx, to);
        for (size_t i = 0; i < n; i++) ck_assert_msg(isfinite(o[i]), "o[%zu] = %g", i, o[i]);
        close_to(o, o64, n, gpu ? "AoT with logits ~1e4, GPU variant" : "AoT with logits ~1e4, CPU variant");
        wbcl_tensor_destroy(tw);
        wbcl_tensor_destroy(to);
        free(w);
        free(w64);
        free(o64);
        tu_guarded_free(o);
        wbcl_context_destroy(ctx);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("aot");
    TCase *tc = tcase_create("aot");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, aot_heads_match_reference);
    tcase_add_test(tc, aot_step_matches_reference);
    tcase_add_test(tc, aot_snr_grows_layer_by_layer);
    tcase_add_test(tc, aot_large_logits);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
