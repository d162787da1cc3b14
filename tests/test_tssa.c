/* TSSA (ToST), causal TSSA and its recurrent decode (include/wbcl/tssa.h)
 * against the double references of host/ref/ref_tssa.c, plus the paper's
 * properties: Pi sums to 1 over heads, sign(y) = -sign(w), permutation
 * equivariance (non-causal), the causal prefix property, the input-independent
 * t = 0 membership, decode == batch, finite results for large logits and a
 * zero channel; bad input.
 *
 * Tolerances. Every reduction over tokens is a sum of non-negative terms
 * (w^2, Pi, Pi w^2), accumulated in float as row blocks of rb <= 64 rows
 * (rb = max(16, ceil(N/64))) combined over <= 64 blocks, so its relative error
 * is at most (rb + nblk + 2) u, u = 2^-24; for the shapes here (N <= 4096:
 * rb + nblk <= 128) that is <= 8e-6. The logits are temp * sum_c of p terms in
 * [0, 1], each with relative error <= that bound plus 3u, so a logit moves by
 * at most ~|logit| * 1e-5 and Pi (a softmax) relatively by the same; y is a
 * product of w, Pi and 1/(1 + dots) and inherits ~3e-5 relative. We test with
 * rtol 1e-4 plus atol 1e-5 * max|y| (for entries that cancel to ~0); a wrong
 * formula (missing eps, wrong axis, wrong normalization) is off by O(1).
 * Decode sums are Kahan-compensated (error O(u) for any t). */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include <sys/wait.h>

#include "wbcl/energy.h"
#include "wbcl/tssa.h"

#define RTOL 1e-4
#define ATOL_REL 1e-5

#define OK(ctx, call)                                                                                 \
    do {                                                                                              \
        wbcl_status s_ = (call);                                                                      \
        ck_assert_msg(s_ == WBCL_SUCCESS, "%s: %s: %s", #call, wbcl_status_name(s_),                 \
                      wbcl_context_last_error(ctx));                                                  \
    } while (0)

static wbcl_tensor *mk(wbcl_context *ctx, int ndim, const size_t *shape, const float *data)
{
    wbcl_tensor *t = NULL;
    wbcl_status st = wbcl_tensor_create(ctx, ndim, shape, WBCL_F32, data, &t);
    ck_assert_msg(st == WBCL_SUCCESS, "tensor_create: %s", wbcl_context_last_error(ctx));
    return t;
}

static float *rd(wbcl_context *ctx, const wbcl_tensor *t)
{
    size_t n = wbcl_tensor_numel(t);
    float *h = tu_guarded_alloc(n);
    wbcl_status st = wbcl_tensor_read(ctx, t, h, n);
    ck_assert_msg(st == WBCL_SUCCESS, "tensor_read: %s", wbcl_context_last_error(ctx));
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

/* (B, N, K*p) token layout <-> (B, K, N, p) */
static void to_heads(size_t B, size_t K, size_t N, size_t p, const float *x, double *w)
{
    for (size_t b = 0; b < B; b++)
        for (size_t n = 0; n < N; n++)
            for (size_t h = 0; h < K; h++)
                for (size_t c = 0; c < p; c++)
                    w[((b * K + h) * N + n) * p + c] = x[(b * N + n) * K * p + h * p + c];
}

static void from_heads(size_t B, size_t K, size_t N, size_t p, const double *w, double *x)
{
    for (size_t b = 0; b < B; b++)
        for (size_t n = 0; n < N; n++)
            for (size_t h = 0; h < K; h++)
                for (size_t c = 0; c < p; c++)
                    x[(b * N + n) * K * p + h * p + c] = w[((b * K + h) * N + n) * p + c];
}

typedef struct { size_t B, K, N, p; } shape4;

/* odd shapes: N = 1, primes, N not a multiple of the block (16..64 rows) nor of float8; heads 1 and 12 */
static const shape4 shapes[] = {
    {1, 1, 1, 1},  {2, 3, 7, 5},   {1, 12, 13, 8}, {2, 4, 257, 17}, {1, 2, 1000, 3},
    {3, 12, 31, 64}, {1, 1, 97, 9}, {2, 5, 23, 16}, {1, 8, 4096, 4},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* ---- non-causal ----------------------------------------------------------------------------- */

static void run_tssa_case(wbcl_context *ctx, const shape4 *s, int tokens, uint64_t seed)
{
    size_t B = s->B, K = s->K, N = s->N, p = s->p, n = B * K * N * p;
    tu_rng r;
    tu_rng_seed(&r, seed);
    float *x = tu_random_f32(&r, n, -1.0, 1.0), *temp = tu_random_f32(&r, K, 0.5, 2.0);
    double *w64 = malloc(n * sizeof *w64), *y64 = malloc(n * sizeof *y64), *pi64 = malloc(B * K * N * sizeof *pi64),
           *t64 = tu_to_f64(temp, K), *yt = malloc(n * sizeof *yt);
    if (tokens)
        to_heads(B, K, N, p, x, w64);
    else
        for (size_t i = 0; i < n; i++) w64[i] = x[i];
    wbcl_ref_tssa(B, K, N, p, w64, t64, y64, pi64);
    size_t sh4[4] = {B, K, N, p}, sh3[3] = {B, N, K * p}, sp[3] = {B, K, N}, sk[1] = {K};
    wbcl_tensor *tw = tokens ? mk(ctx, 3, sh3, x) : mk(ctx, 4, sh4, x);
    wbcl_tensor *ty = tokens ? mk(ctx, 3, sh3, NULL) : mk(ctx, 4, sh4, NULL);
    wbcl_tensor *tp = mk(ctx, 3, sp, NULL), *tt = mk(ctx, 1, sk, temp);
    wbcl_status st = tokens ? wbcl_tssa_tokens(ctx, tw, K, tt, ty, tp) : wbcl_tssa_heads(ctx, tw, tt, ty, tp);
    ck_assert_msg(st == WBCL_SUCCESS, "tssa: %s", wbcl_context_last_error(ctx));
    float *y = rd(ctx, ty), *pi = rd(ctx, tp);
    char what[128];
    snprintf(what, sizeof what, "TSSA %s y (B %zu K %zu N %zu p %zu)", tokens ? "tokens" : "heads", B, K, N, p);
    if (tokens) {
        from_heads(B, K, N, p, y64, yt);
        close_to(y, yt, n, what);
    } else {
        close_to(y, y64, n, what);
    }
    snprintf(what, sizeof what, "TSSA Pi (B %zu K %zu N %zu p %zu)", B, K, N, p);
    close_to(pi, pi64, B * K * N, what);
    /* Pi rows sum to 1 over heads; y has the opposite sign of w (Pi > 0, 1/(1 + dots) > 0) */
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < N; t++) {
            double sum = 0.0;
            for (size_t h = 0; h < K; h++) sum += pi[(b * K + h) * N + t];
            ck_assert_msg(fabs(sum - 1.0) <= 4.0 * K * 6e-8, "sum_h Pi[%zu, :, %zu] = %.9g", b, t, sum);
        }
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0.0f) ck_assert_msg(y[i] * x[i] < 0.0f, "sign(y) != -sign(w) at %zu (w %g y %g)", i, x[i], y[i]);
    wbcl_tensor_destroy(tw);
    wbcl_tensor_destroy(ty);
    wbcl_tensor_destroy(tp);
    wbcl_tensor_destroy(tt);
    free(x);
    free(temp);
    free(w64);
    free(y64);
    free(pi64);
    free(t64);
    free(yt);
    tu_guarded_free(y);
    tu_guarded_free(pi);
}

START_TEST(tssa_matches_reference)
{
    wbcl_context *ctx = tu_context();
    for (size_t i = 0; i < NSHAPES; i++) {
        run_tssa_case(ctx, &shapes[i], 0, 100 + i);
        run_tssa_case(ctx, &shapes[i], 1, 200 + i);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* Non-causal TSSA only uses sums over tokens: permuting the tokens permutes the output. */
START_TEST(tssa_permutation_equivariant)
{
    wbcl_context *ctx = tu_context();
    const size_t B = 2, K = 3, N = 101, p = 5, D = K * p, n = B * N * D; /* (K, p) of shapes[1]: one program */
    tu_rng r;
    tu_rng_seed(&r, 7);
    float *x = tu_random_f32(&r, n, -2.0, 2.0), *xp = malloc(n * sizeof *xp), *temp = tu_random_f32(&r, K, 0.5, 2.0);
    size_t perm[101];
    for (size_t i = 0; i < N; i++) perm[i] = i;
    for (size_t i = N - 1; i > 0; i--) {
        size_t j = (size_t)tu_uniform(&r, 0, (double)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < N; t++) memcpy(xp + (b * N + t) * D, x + (b * N + perm[t]) * D, D * sizeof *x);
    size_t sh[3] = {B, N, D}, sk[1] = {K};
    wbcl_tensor *tx = mk(ctx, 3, sh, x), *txp = mk(ctx, 3, sh, xp), *ty = mk(ctx, 3, sh, NULL),
                *typ = mk(ctx, 3, sh, NULL), *tt = mk(ctx, 1, sk, temp);
    OK(ctx, wbcl_tssa_tokens(ctx, tx, K, tt, ty, NULL));
    OK(ctx, wbcl_tssa_tokens(ctx, txp, K, tt, typ, NULL));
    float *y = rd(ctx, ty), *yp = rd(ctx, typ);
    double *want = malloc(n * sizeof *want);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < N; t++)
            for (size_t j = 0; j < D; j++) want[(b * N + t) * D + j] = y[(b * N + perm[t]) * D + j];
    close_to(yp, want, n, "TSSA of permuted tokens vs permuted TSSA");
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(txp);
    wbcl_tensor_destroy(ty);
    wbcl_tensor_destroy(typ);
    wbcl_tensor_destroy(tt);
    free(x);
    free(xp);
    free(temp);
    free(want);
    tu_guarded_free(y);
    tu_guarded_free(yp);
    wbcl_context_destroy(ctx);
}
END_TEST

/* temp = 1e4 makes logits up to 1e4 * p; a channel that is zero on every token has norm 0
 * (clamped to 1e-12). Results must be finite and equal the reference. K = 12, p = 8 as in shapes[2]
 * (one program for both); temperatures 1e4, 3e3, 1e4, 1 repeated over the heads. */
START_TEST(tssa_large_logits_zero_channel)
{
    wbcl_context *ctx = tu_context();
    const size_t B = 1, K = 12, N = 53, p = 8, n = B * K * N * p;
    tu_rng r;
    tu_rng_seed(&r, 11);
    float *x = tu_random_f32(&r, n, -1.0, 1.0), temp[12];
    for (size_t h = 0; h < K; h++) temp[h] = h % 4 == 3 ? 1.0f : h % 4 == 1 ? 3e3f : 1e4f;
    for (size_t h = 0; h < K; h++)
        for (size_t t = 0; t < N; t++) x[(h * N + t) * p + 2] = 0.0f; /* channel 2 of every head */
    double *w64 = tu_to_f64(x, n), *t64 = tu_to_f64(temp, K), *y64 = malloc(n * sizeof *y64),
           *pi64 = malloc(K * N * sizeof *pi64);
    wbcl_ref_tssa(B, K, N, p, w64, t64, y64, pi64);
    size_t sh[4] = {B, K, N, p}, sp[3] = {B, K, N}, sk[1] = {K};
    wbcl_tensor *tw = mk(ctx, 4, sh, x), *ty = mk(ctx, 4, sh, NULL), *tp = mk(ctx, 3, sp, NULL),
                *tt = mk(ctx, 1, sk, temp);
    OK(ctx, wbcl_tssa_heads(ctx, tw, tt, ty, tp));
    float *y = rd(ctx, ty), *pi = rd(ctx, tp);
    for (size_t i = 0; i < n; i++) ck_assert_msg(isfinite(y[i]), "y[%zu] = %g", i, y[i]);
    /* the logits are ~1e4 * (a sum of p terms): their float rounding (~1e4 * p * u ~ 5e-3) moves Pi
     * by that factor where it is not saturated; compare with an absolute tolerance on Pi and y */
    tu_assert_close(pi, pi64, K * N, 1e-2, 0.0, "Pi with logits ~1e4");
    tu_assert_close(y, y64, n, 1e-2 * maxabs(y64, n), 0.0, "y with logits ~1e4");
    for (size_t h = 0; h < K; h++)
        for (size_t t = 0; t < N; t++) ck_assert(y[(h * N + t) * p + 2] == 0.0f);
    wbcl_tensor_destroy(tw);
    wbcl_tensor_destroy(ty);
    wbcl_tensor_destroy(tp);
    wbcl_tensor_destroy(tt);
    free(x);
    free(w64);
    free(t64);
    free(y64);
    free(pi64);
    tu_guarded_free(y);
    tu_guarded_free(pi);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- causal --------------------------------------------------------------------------------- */

static float *random_bias(tu_rng *r, size_t K, size_t tmax)
{
    return tu_random_f32(r, K * tmax, -0.5, 0.5);
}

static void run_causal_case(wbcl_context *ctx, const shape4 *s, int tokens, uint64_t seed)
{
    size_t B = s->B, K = s->K, N = s->N, p = s->p, n = B * K * N * p, tmax = N + 3;
    tu_rng r;
    tu_rng_seed(&r, seed);
    float *x = tu_random_f32(&r, n, -1.0, 1.0), *temp = tu_random_f32(&r, K, 0.5, 2.0),
          *bias = random_bias(&r, K, tmax);
    double *w64 = malloc(n * sizeof *w64), *y64 = malloc(n * sizeof *y64), *pi64 = malloc(B * K * N * sizeof *pi64),
           *t64 = tu_to_f64(temp, K), *b64 = tu_to_f64(bias, K * tmax), *yt = malloc(n * sizeof *yt);
    if (tokens)
        to_heads(B, K, N, p, x, w64);
    else
        for (size_t i = 0; i < n; i++) w64[i] = x[i];
    wbcl_ref_tssa_causal(B, K, N, p, w64, t64, b64, tmax, y64, pi64);
    size_t sh4[4] = {B, K, N, p}, sh3[3] = {B, N, K * p}, sp[3] = {B, K, N}, sk[1] = {K}, sb[3] = {K, tmax, 1};
    wbcl_tensor *tw = tokens ? mk(ctx, 3, sh3, x) : mk(ctx, 4, sh4, x);
    wbcl_tensor *ty = tokens ? mk(ctx, 3, sh3, NULL) : mk(ctx, 4, sh4, NULL);
    wbcl_tensor *tp = mk(ctx, 3, sp, NULL), *tt = mk(ctx, 1, sk, temp), *tb = mk(ctx, 3, sb, bias);
    wbcl_status st = tokens ? wbcl_tssa_causal_tokens(ctx, tw, K, tt, tb, NULL, ty, tp)
                            : wbcl_tssa_causal_heads(ctx, tw, tt, tb, NULL, ty, tp);
    ck_assert_msg(st == WBCL_SUCCESS, "causal tssa: %s", wbcl_context_last_error(ctx));
    float *y = rd(ctx, ty), *pi = rd(ctx, tp);
    char what[128];
    snprintf(what, sizeof what, "causal TSSA %s y (B %zu K %zu N %zu p %zu)", tokens ? "tokens" : "heads", B, K, N,
             p);
    if (tokens) {
        from_heads(B, K, N, p, y64, yt);
        close_to(y, yt, n, what);
    } else {
        close_to(y, y64, n, what);
    }
    snprintf(what, sizeof what, "causal TSSA Pi (B %zu K %zu N %zu p %zu)", B, K, N, p);
    close_to(pi, pi64, B * K * N, what);
    /* sign(y) = -sign(w) where Pi > 0 (Pi underflows to 0 for logits ~100 below the max: y = 0 there) */
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < K; h++)
            for (size_t t = 0; t < N; t++)
                for (size_t c = 0; c < p; c++) {
                    size_t i = tokens ? (b * N + t) * K * p + h * p + c : ((b * K + h) * N + t) * p + c;
                    ck_assert_msg(y[i] * x[i] <= 0.0f, "sign(y) == sign(w) at %zu", i);
                    if (x[i] != 0.0f && pi[(b * K + h) * N + t] > 1e-30f)
                        ck_assert_msg(y[i] * x[i] < 0.0f, "sign(y) != -sign(w) at %zu", i);
                }
    wbcl_tensor_destroy(tw);
    wbcl_tensor_destroy(ty);
    wbcl_tensor_destroy(tp);
    wbcl_tensor_destroy(tt);
    wbcl_tensor_destroy(tb);
    free(x);
    free(temp);
    free(bias);
    free(w64);
    free(y64);
    free(pi64);
    free(t64);
    free(b64);
    free(yt);
    tu_guarded_free(y);
    tu_guarded_free(pi);
}

START_TEST(causal_matches_reference)
{
    wbcl_context *ctx = tu_context();
    for (size_t i = 0; i < NSHAPES; i++) {
        run_causal_case(ctx, &shapes[i], 0, 300 + i);
        run_causal_case(ctx, &shapes[i], 1, 400 + i);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* The output on a prefix equals the output on the truncated input (run on the device both
 * ways: different N means different blocking, so equality is to rounding). */
START_TEST(causal_prefix_property)
{
    wbcl_context *ctx = tu_context();
    const size_t B = 2, K = 3, N = 300, p = 5, D = K * p, tmax = 512;
    const size_t cuts[] = {1, 7, 24, 25, 31, 64, 257, 299};
    tu_rng r;
    tu_rng_seed(&r, 21);
    float *x = tu_random_f32(&r, B * N * D, -1.0, 1.0), *temp = tu_random_f32(&r, K, 0.5, 2.0),
          *bias = random_bias(&r, K, tmax);
    size_t sk[1] = {K}, sb[2] = {K, tmax}, sh[3] = {B, N, D};
    wbcl_tensor *tt = mk(ctx, 1, sk, temp), *tb = mk(ctx, 2, sb, bias), *tx = mk(ctx, 3, sh, x),
                *ty = mk(ctx, 3, sh, NULL);
    OK(ctx, wbcl_tssa_causal_tokens(ctx, tx, K, tt, tb, NULL, ty, NULL));
    float *y = rd(ctx, ty);
    for (size_t ci = 0; ci < sizeof cuts / sizeof cuts[0]; ci++) {
        size_t M = cuts[ci], sm[3] = {B, M, D};
        float *xm = malloc(B * M * D * sizeof *xm);
        double *want = malloc(B * M * D * sizeof *want);
        for (size_t b = 0; b < B; b++) {
            memcpy(xm + b * M * D, x + b * N * D, M * D * sizeof *x);
            for (size_t i = 0; i < M * D; i++) want[b * M * D + i] = y[b * N * D + i];
        }
        wbcl_tensor *txm = mk(ctx, 3, sm, xm), *tym = mk(ctx, 3, sm, NULL);
        OK(ctx, wbcl_tssa_causal_tokens(ctx, txm, K, tt, tb, NULL, tym, NULL));
        float *ym = rd(ctx, tym);
        char what[64];
        snprintf(what, sizeof what, "causal output on a prefix of %zu tokens", M);
        close_to(ym, want, B * M * D, what);
        wbcl_tensor_destroy(txm);
        wbcl_tensor_destroy(tym);
        free(xm);
        free(want);
        tu_guarded_free(ym);
    }
    wbcl_tensor_destroy(tt);
    wbcl_tensor_destroy(tb);
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(ty);
    free(x);
    free(temp);
    free(bias);
    tu_guarded_free(y);
    wbcl_context_destroy(ctx);
}
END_TEST

/* At t = 0, w_0^2 / S_0 = 1 for every non-zero channel, so Pi[:, 0] = softmax_h(temp_h p (1 + bias[h, 0]))
 * whatever the input (SPEC 1.5). Both kernels (sequential for N <= 24, blocked above). */
START_TEST(causal_first_membership_is_input_independent)
{
    wbcl_context *ctx = tu_context();
    const size_t K = 5, p = 16, tmax = 64; /* (K, p) of shapes[7]: one program */
    tu_rng r;
    tu_rng_seed(&r, 31);
    float *temp = tu_random_f32(&r, K, 0.2, 1.5), *bias = random_bias(&r, K, tmax);
    double l[5], want[5], m = -INFINITY, z = 0.0;
    for (size_t h = 0; h < K; h++) {
        l[h] = temp[h] * (double)p * (1.0 + bias[h * tmax]);
        m = l[h] > m ? l[h] : m;
    }
    for (size_t h = 0; h < K; h++) z += want[h] = exp(l[h] - m);
    for (size_t h = 0; h < K; h++) want[h] /= z;
    size_t sk[1] = {K}, sb[2] = {K, tmax};
    wbcl_tensor *tt = mk(ctx, 1, sk, temp), *tb = mk(ctx, 2, sb, bias);
    const size_t Ns[] = {1, 9, 40};
    for (size_t ni = 0; ni < 3; ni++)
        for (int trial = 0; trial < 3; trial++) {
            size_t N = Ns[ni], sh[3] = {2, N, K * p}, sp[3] = {2, K, N};
            double scale = trial == 0 ? 1e-3 : trial == 1 ? 1.0 : 50.0;
            float *x = tu_random_f32(&r, 2 * N * K * p, -scale, scale);
            for (size_t i = 0; i < 2 * N * K * p; i++)
                if (x[i] == 0.0f) x[i] = 1.0f;
            wbcl_tensor *tx = mk(ctx, 3, sh, x), *ty = mk(ctx, 3, sh, NULL), *tp = mk(ctx, 3, sp, NULL);
            OK(ctx, wbcl_tssa_causal_tokens(ctx, tx, K, tt, tb, NULL, ty, tp));
            float *pi = rd(ctx, tp);
            for (size_t b = 0; b < 2; b++)
                for (size_t h = 0; h < K; h++)
                    ck_assert_msg(fabs(pi[(b * K + h) * N] - want[h]) <= 1e-5 * want[h] + 1e-7,
                                  "Pi[%zu, %zu, 0] = %.9g, want %.9g (N %zu, input scale %g)", b, h,
                                  (double)pi[(b * K + h) * N], want[h], N, scale);
            wbcl_tensor_destroy(tx);
            wbcl_tensor_destroy(ty);
            wbcl_tensor_destroy(tp);
            free(x);
            tu_guarded_free(pi);
        }
    wbcl_tensor_destroy(tt);
    wbcl_tensor_destroy(tb);
    free(temp);
    free(bias);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Decode (one token per call, the sequential kernel with the state) equals the batch form
 * (the blocked kernels) token by token; so do chunked prefills mixing both paths. */
START_TEST(decode_equals_batch)
{
    wbcl_context *ctx = tu_context();
    const size_t B = 2, K = 12, p = 8, D = K * p, N = 203, tmax = 256; /* (K, p) of shapes[2] */
    tu_rng r;
    tu_rng_seed(&r, 41);
    float *x = tu_random_f32(&r, B * N * D, -1.0, 1.0), *temp = tu_random_f32(&r, K, 0.5, 2.0),
          *bias = random_bias(&r, K, tmax);
    size_t sk[1] = {K}, sb[3] = {K, tmax, 1}, sh[3] = {B, N, D};
    wbcl_tensor *tt = mk(ctx, 1, sk, temp), *tb = mk(ctx, 3, sb, bias), *tx = mk(ctx, 3, sh, x),
                *ty = mk(ctx, 3, sh, NULL);
    OK(ctx, wbcl_tssa_causal_tokens(ctx, tx, K, tt, tb, NULL, ty, NULL));
    float *y = rd(ctx, ty);
    /* the reference for the final sums */
    double *w64 = malloc(B * N * D * sizeof *w64);
    to_heads(B, K, N, p, x, w64);
    /* chunk schedules: all single tokens; blocked chunk, singles, short chunk, blocked chunk */
    const size_t sched_a[] = {0};
    const size_t sched_b[] = {100, 1, 1, 1, 13, 87};
    for (int sc = 0; sc < 2; sc++) {
        wbcl_tssa_state *state = NULL;
        OK(ctx, wbcl_tssa_state_create(ctx, B, K, p, &state));
        ck_assert_uint_eq(wbcl_tssa_state_position(state), 0);
        size_t t = 0, si = 0;
        double *want = malloc(B * N * D * sizeof *want);
        float *got = malloc(B * N * D * sizeof *got);
        while (t < N) {
            size_t M = sc == 0 ? 1 : (si < 6 ? sched_b[si] : N - t);
            (void)sched_a;
            si++;
            if (M > N - t) M = N - t;
            size_t sm[3] = {B, M, D};
            float *xm = malloc(B * M * D * sizeof *xm);
            for (size_t b = 0; b < B; b++) memcpy(xm + b * M * D, x + (b * N + t) * D, M * D * sizeof *x);
            wbcl_tensor *txm = mk(ctx, 3, sm, xm), *tym = mk(ctx, 3, sm, NULL);
            wbcl_status st = wbcl_tssa_causal_tokens(ctx, txm, K, tt, tb, state, tym, NULL);
            ck_assert_msg(st == WBCL_SUCCESS, "decode at t %zu: %s", t, wbcl_context_last_error(ctx));
            ck_assert_uint_eq(wbcl_tssa_state_position(state), t + M);
            float *ym = rd(ctx, tym);
            for (size_t b = 0; b < B; b++)
                for (size_t i = 0; i < M * D; i++) {
                    got[(b * N + t) * D + i] = ym[b * M * D + i];
                    want[(b * N + t) * D + i] = y[(b * N + t) * D + i];
                }
            wbcl_tensor_destroy(txm);
            wbcl_tensor_destroy(tym);
            free(xm);
            tu_guarded_free(ym);
            t += M;
        }
        close_to(got, want, B * N * D, sc == 0 ? "decode token by token vs batch" : "chunked prefill vs batch");
        /* the state holds S = sum_t w^2 and P = sum_t Pi (= N - ... : check S against the reference) */
        float *S = malloc(B * K * p * sizeof *S), *P = malloc(B * K * sizeof *P);
        OK(ctx, wbcl_tssa_state_read(ctx, state, S, NULL, P));
        for (size_t b = 0; b < B; b++) {
            double psum = 0.0;
            for (size_t h = 0; h < K; h++) {
                psum += P[b * K + h];
                for (size_t c = 0; c < p; c++) {
                    double s = 0.0;
                    for (size_t i = 0; i < N; i++) s += w64[((b * K + h) * N + i) * p + c] * w64[((b * K + h) * N + i) * p + c];
                    ck_assert_msg(fabs(S[(b * K + h) * p + c] - s) <= 1e-5 * s, "state S %g vs %g", S[(b * K + h) * p + c], s);
                }
            }
            ck_assert_msg(fabs(psum - (double)N) <= 1e-4 * N, "sum_h P = %g, want N = %zu", psum, N);
        }
        /* past Tmax: error, state unchanged */
        size_t pos = wbcl_tssa_state_position(state);
        size_t big = tmax - pos + 1, sbig[3] = {B, big, D};
        wbcl_tensor *txb = mk(ctx, 3, sbig, NULL), *tyb = mk(ctx, 3, sbig, NULL);
        tu_assert_status(ctx, wbcl_tssa_causal_tokens(ctx, txb, K, tt, tb, state, tyb, NULL), WBCL_ERROR_SHAPE, "Tmax");
        ck_assert_uint_eq(wbcl_tssa_state_position(state), pos);
        wbcl_tensor_destroy(txb);
        wbcl_tensor_destroy(tyb);
        /* reset: back to 0 */
        OK(ctx, wbcl_tssa_state_reset(ctx, state));
        ck_assert_uint_eq(wbcl_tssa_state_position(state), 0);
        OK(ctx, wbcl_tssa_state_read(ctx, state, S, NULL, NULL));
        for (size_t i = 0; i < B * K * p; i++) ck_assert(S[i] == 0.0f);
        free(S);
        free(P);
        free(want);
        free(got);
        wbcl_tssa_state_destroy(state);
    }
    wbcl_tssa_state_destroy(NULL);
    wbcl_tensor_destroy(tt);
    wbcl_tensor_destroy(tb);
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(ty);
    free(x);
    free(temp);
    free(bias);
    free(w64);
    tu_guarded_free(y);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Long sequences: decode of 1024 tokens vs the double reference (Kahan sums keep the error flat). */
START_TEST(decode_long_sequence)
{
    wbcl_context *ctx = tu_context();
    const size_t B = 1, K = 2, p = 3, D = K * p, N = 1024;
    tu_rng r;
    tu_rng_seed(&r, 51);
    float *x = tu_random_f32(&r, N * D, -1.0, 1.0), *temp = tu_random_f32(&r, K, 0.5, 2.0),
          *bias = random_bias(&r, K, N);
    double *w64 = malloc(N * D * sizeof *w64), *y64 = malloc(N * D * sizeof *y64), *yt = malloc(N * D * sizeof *yt),
           *t64 = tu_to_f64(temp, K), *b64 = tu_to_f64(bias, K * N);
    to_heads(B, K, N, p, x, w64);
    wbcl_ref_tssa_causal(B, K, N, p, w64, t64, b64, N, y64, NULL);
    from_heads(B, K, N, p, y64, yt);
    size_t sk[1] = {K}, sb[2] = {K, N}, s1[2] = {1, D};
    wbcl_tensor *tt = mk(ctx, 1, sk, temp), *tb = mk(ctx, 2, sb, bias), *tx = mk(ctx, 2, s1, NULL),
                *ty = mk(ctx, 2, s1, NULL);
    wbcl_tssa_state *state = NULL;
    OK(ctx, wbcl_tssa_state_create(ctx, B, K, p, &state));
    float *got = malloc(N * D * sizeof *got);
    for (size_t t = 0; t < N; t++) {
        OK(ctx, wbcl_tensor_write(ctx, tx, x + t * D, D));
        OK(ctx, wbcl_tssa_causal_tokens(ctx, tx, K, tt, tb, state, ty, NULL));
        OK(ctx, wbcl_tensor_read(ctx, ty, got + t * D, D));
    }
    /* compensated sums: ~4u relative per quantity, so a 2e-5 bound (rtol) holds with room */
    tu_assert_close(got, yt, N * D, 1e-6 * maxabs(yt, N * D), 2e-5, "decode of 1024 tokens vs reference");
    wbcl_tssa_state_destroy(state);
    wbcl_tensor_destroy(tt);
    wbcl_tensor_destroy(tb);
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(ty);
    free(x);
    free(temp);
    free(bias);
    free(w64);
    free(y64);
    free(yt);
    free(t64);
    free(b64);
    free(got);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- layers ----------------------------------------------------------------------------------- */

static char *tmpfile_path(const char *tag)
{
    char *p = malloc(256);
    snprintf(p, 256, "/tmp/wbcl_test_tssa_%s_%d.safetensors", tag, (int)getpid());
    return p;
}

static void write_st(const char *path, size_t n, const char *const *names, const float *const *data,
                     const int *ndims, const size_t (*shapes)[3])
{
    wbcl_array arrs[8];
    const wbcl_array *ptrs[8];
    for (size_t i = 0; i < n; i++) {
        char err[256];
        ck_assert_int_eq(wbcl_array_alloc(&arrs[i], WBCL_ELEM_F32, ndims[i], shapes[i], err, sizeof err), WBCL_SUCCESS);
        memcpy(arrs[i].data, data[i], arrs[i].nbytes);
        ptrs[i] = &arrs[i];
    }
    char err[256];
    wbcl_status st = wbcl_safetensors_write(path, n, names, ptrs, 0, NULL, NULL, err, sizeof err);
    ck_assert_msg(st == WBCL_SUCCESS, "safetensors_write: %s", err);
    for (size_t i = 0; i < n; i++) wbcl_array_free(&arrs[i]);
}

START_TEST(tssa_layer_load_and_forward)
{
    wbcl_context *ctx = tu_context();
    const size_t B = 2, N = 19, d = 15, K = 3; /* p = 5: the program of shapes[1] */
    tu_rng r;
    tu_rng_seed(&r, 61);
    double sc = 1.0 / sqrt((double)d);
    float *W = tu_random_f32(&r, d * d, -sc, sc), *b = tu_random_f32(&r, d, -0.1, 0.1),
          *temp = tu_random_f32(&r, K, 0.5, 2.0), *Wo = tu_random_f32(&r, d * d, -sc, sc),
          *bo = tu_random_f32(&r, d, -0.1, 0.1), *x = tu_random_f32(&r, B * N * d, -1.0, 1.0);
    double *W64 = tu_to_f64(W, d * d), *b64 = tu_to_f64(b, d), *t64 = tu_to_f64(temp, K), *Wo64 = tu_to_f64(Wo, d * d),
           *bo64 = tu_to_f64(bo, d), *x64 = tu_to_f64(x, B * N * d), *y64 = malloc(B * N * d * sizeof *y64);
    wbcl_ref_tssa_layer(B, N, d, K, x64, W64, b64, t64, Wo64, bo64, y64);
    /* safetensors with a prefix, as a ToST checkpoint names them */
    char *path = tmpfile_path("layer");
    const char *names[5] = {"blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias", "blocks.0.attn.temp",
                            "blocks.0.attn.to_out.0.weight", "blocks.0.attn.to_out.0.bias"};
    const float *data[5] = {W, b, temp, Wo, bo};
    const int nd[5] = {2, 1, 2, 2, 1};
    const size_t shp[5][3] = {{d, d}, {d}, {K, 1}, {d, d}, {d}};
    write_st(path, 5, names, data, nd, shp);
    wbcl_safetensors *stf = NULL;
    char err[256];
    ck_assert_int_eq(wbcl_safetensors_open(path, &stf, err, sizeof err), WBCL_SUCCESS);
    wbcl_tssa_layer *L = NULL, *L2 = NULL;
    OK(ctx, wbcl_tssa_layer_load(ctx, stf, path, "blocks.0.attn.", d, K, &L));
    OK(ctx, wbcl_tssa_layer_create(ctx, d, K, W, b, temp, Wo, bo, &L2));
    size_t sh[3] = {B, N, d};
    wbcl_tensor *tx = mk(ctx, 3, sh, x), *ty = mk(ctx, 3, sh, NULL);
    for (int i = 0; i < 2; i++) {
        OK(ctx, wbcl_tssa_layer_forward(ctx, i ? L2 : L, tx, ty));
        float *y = rd(ctx, ty);
        /* + two projections of length d: sqrt(d) u |x||W| more, far below RTOL */
        close_to(y, y64, B * N * d, i ? "TSSA layer (create)" : "TSSA layer (load)");
        tu_guarded_free(y);
    }
    /* (N, d) input works too */
    size_t s2[2] = {N, d};
    wbcl_tensor *tx2 = mk(ctx, 2, s2, x), *ty2 = mk(ctx, 2, s2, NULL);
    OK(ctx, wbcl_tssa_layer_forward(ctx, L, tx2, ty2));
    float *y2 = rd(ctx, ty2);
    close_to(y2, y64, N * d, "TSSA layer on (N, d)");
    tu_guarded_free(y2);
    /* bad input: missing key, wrong shape, heads not dividing d, wrong x, out == x; out untouched */
    wbcl_tssa_layer *bad = (wbcl_tssa_layer *)0x1;
    tu_assert_status(ctx, wbcl_tssa_layer_load(ctx, stf, path, "blocks.1.attn.", d, K, &bad), WBCL_ERROR_FORMAT,
                     "'blocks.1.attn.qkv.weight'");
    ck_assert_ptr_null(bad);
    tu_assert_status(ctx, wbcl_tssa_layer_load(ctx, stf, path, "blocks.0.attn.", d, 4, &bad), WBCL_ERROR_SHAPE,
                     "4 heads do not divide");
    tu_assert_status(ctx, wbcl_tssa_layer_load(ctx, stf, path, "blocks.0.attn.", d, 5, &bad), WBCL_ERROR_SHAPE,
                     "'blocks.0.attn.temp' has shape (3, 1), expected (5, 1)");
    tu_assert_status(ctx, wbcl_tssa_layer_load(ctx, stf, path, "blocks.0.attn.", 12, 3, &bad), WBCL_ERROR_SHAPE,
                     "'blocks.0.attn.qkv.weight' has shape (15, 15), expected (12, 12)");
    tu_assert_status(ctx, wbcl_tssa_layer_create(ctx, d, 4, W, b, temp, Wo, bo, &bad), WBCL_ERROR_SHAPE,
                     "4 heads do not divide");
    float *before = rd(ctx, ty);
    size_t sbad[3] = {B, N, d + 1};
    wbcl_tensor *txb = mk(ctx, 3, sbad, NULL);
    tu_assert_status(ctx, wbcl_tssa_layer_forward(ctx, L, txb, ty), WBCL_ERROR_SHAPE, "d = 15");
    tu_assert_status(ctx, wbcl_tssa_layer_forward(ctx, L, tx, tx), WBCL_ERROR_INVALID_ARGUMENT, "must not");
    tu_assert_status(ctx, wbcl_tssa_layer_forward(ctx, NULL, tx, ty), WBCL_ERROR_INVALID_ARGUMENT, "NULL");
    float *after = rd(ctx, ty);
    ck_assert(memcmp(before, after, B * N * d * sizeof(float)) == 0);
    tu_guarded_free(before);
    tu_guarded_free(after);
    wbcl_tensor_destroy(txb);
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(ty);
    wbcl_tensor_destroy(tx2);
    wbcl_tensor_destroy(ty2);
    wbcl_tssa_layer_destroy(L);
    wbcl_tssa_layer_destroy(L2);
    wbcl_tssa_layer_destroy(NULL);
    wbcl_safetensors_close(stf);
    unlink(path);
    free(path);
    free(W);
    free(b);
    free(temp);
    free(Wo);
    free(bo);
    free(x);
    free(W64);
    free(b64);
    free(t64);
    free(Wo64);
    free(bo64);
    free(x64);
    free(y64);
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(causal_layer_load_forward_decode)
{
    wbcl_context *ctx = tu_context();
    const size_t B = 2, N = 37, d = 12, K = 12, tmax = 40; /* 12 heads of 1 channel */
    tu_rng r;
    tu_rng_seed(&r, 71);
    double sc = 1.0 / sqrt((double)d);
    float *W = tu_random_f32(&r, d * d, -sc, sc), *temp = tu_random_f32(&r, K, 0.5, 2.0),
          *bias = random_bias(&r, K, tmax), *Wo = tu_random_f32(&r, d * d, -sc, sc),
          *x = tu_random_f32(&r, B * N * d, -1.0, 1.0);
    double *W64 = tu_to_f64(W, d * d), *t64 = tu_to_f64(temp, K), *bi64 = tu_to_f64(bias, K * tmax),
           *Wo64 = tu_to_f64(Wo, d * d), *x64 = tu_to_f64(x, B * N * d), *y64 = malloc(B * N * d * sizeof *y64);
    /* GPT-style: no biases (c_attn.bias, c_proj.bias absent) */
    wbcl_ref_tssa_causal_layer(B, N, d, K, x64, W64, NULL, t64, bi64, tmax, Wo64, NULL, y64);
    char *path = tmpfile_path("causal");
    const char *names[4] = {"c_attn.weight", "temp", "denom_bias", "c_proj.weight"};
    const float *data[4] = {W, temp, bias, Wo};
    const int nd[4] = {2, 2, 3, 2};
    const size_t shp[4][3] = {{d, d}, {K, 1}, {K, tmax, 1}, {d, d}};
    write_st(path, 4, names, data, nd, shp);
    wbcl_safetensors *stf = NULL;
    char err[256];
    ck_assert_int_eq(wbcl_safetensors_open(path, &stf, err, sizeof err), WBCL_SUCCESS);
    wbcl_tssa_causal_layer *L = NULL;
    OK(ctx, wbcl_tssa_causal_layer_load(ctx, stf, path, NULL, d, K, &L));
    ck_assert_uint_eq(wbcl_tssa_causal_layer_tmax(L), tmax);
    size_t sh[3] = {B, N, d};
    wbcl_tensor *tx = mk(ctx, 3, sh, x), *ty = mk(ctx, 3, sh, NULL);
    OK(ctx, wbcl_tssa_causal_layer_forward(ctx, L, tx, NULL, ty));
    float *y = rd(ctx, ty);
    close_to(y, y64, B * N * d, "causal TSSA layer");
    /* decode through the layer, token by token, (B, 1, d) inputs */
    wbcl_tssa_state *state = NULL;
    OK(ctx, wbcl_tssa_state_create(ctx, B, K, d / K, &state));
    size_t s1[3] = {B, 1, d};
    wbcl_tensor *tx1 = mk(ctx, 3, s1, NULL), *ty1 = mk(ctx, 3, s1, NULL);
    float *got = malloc(B * N * d * sizeof *got), *xt = malloc(B * d * sizeof *xt), *yt = malloc(B * d * sizeof *yt);
    for (size_t t = 0; t < N; t++) {
        for (size_t b = 0; b < B; b++) memcpy(xt + b * d, x + (b * N + t) * d, d * sizeof *x);
        OK(ctx, wbcl_tensor_write(ctx, tx1, xt, B * d));
        OK(ctx, wbcl_tssa_causal_layer_forward(ctx, L, tx1, state, ty1));
        OK(ctx, wbcl_tensor_read(ctx, ty1, yt, B * d));
        for (size_t b = 0; b < B; b++) memcpy(got + (b * N + t) * d, yt + b * d, d * sizeof *yt);
    }
    close_to(got, y64, B * N * d, "causal TSSA layer decode");
    /* past Tmax through the layer */
    size_t s5[3] = {B, 4, d};
    wbcl_tensor *tx5 = mk(ctx, 3, s5, NULL), *ty5 = mk(ctx, 3, s5, NULL);
    tu_assert_status(ctx, wbcl_tssa_causal_layer_forward(ctx, L, tx5, state, ty5), WBCL_ERROR_SHAPE,
                     "4 tokens from position 37 exceed the 40 positions");
    size_t slong[3] = {1, tmax + 1, d};
    wbcl_tensor *txl = mk(ctx, 3, slong, NULL), *tyl = mk(ctx, 3, slong, NULL);
    tu_assert_status(ctx, wbcl_tssa_causal_layer_forward(ctx, L, txl, NULL, tyl), WBCL_ERROR_SHAPE, "Tmax");
    /* wrong state */
    wbcl_tssa_state *st2 = NULL;
    OK(ctx, wbcl_tssa_state_create(ctx, B, K + 1, 1, &st2));
    tu_assert_status(ctx, wbcl_tssa_causal_layer_forward(ctx, L, tx1, st2, ty1), WBCL_ERROR_SHAPE, "13 heads");
    /* missing denom_bias is named */
    wbcl_tssa_causal_layer *bad = NULL;
    tu_assert_status(ctx, wbcl_tssa_causal_layer_load(ctx, stf, path, "h.", d, K, &bad), WBCL_ERROR_FORMAT,
                     "'h.denom_bias'");
    wbcl_tssa_state_destroy(state);
    wbcl_tssa_state_destroy(st2);
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(ty);
    wbcl_tensor_destroy(tx1);
    wbcl_tensor_destroy(ty1);
    wbcl_tensor_destroy(tx5);
    wbcl_tensor_destroy(ty5);
    wbcl_tensor_destroy(txl);
    wbcl_tensor_destroy(tyl);
    wbcl_tssa_causal_layer_destroy(L);
    wbcl_tssa_causal_layer_destroy(NULL);
    wbcl_safetensors_close(stf);
    unlink(path);
    free(path);
    free(W);
    free(temp);
    free(bias);
    free(Wo);
    free(x);
    free(W64);
    free(t64);
    free(bi64);
    free(Wo64);
    free(x64);
    free(y64);
    free(got);
    free(xt);
    free(yt);
    tu_guarded_free(y);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------------------ */

START_TEST(tssa_bad_input)
{
    wbcl_context *ctx = tu_context(), *other = tu_context();
    const size_t B = 2, K = 3, N = 5, p = 4;
    size_t sh[4] = {B, K, N, p}, sp[3] = {B, K, N}, sk[1] = {K}, sb[2] = {K, 8}, st3[3] = {B, N, K * p};
    float *ones = malloc(B * K * N * p * sizeof *ones);
    for (size_t i = 0; i < B * K * N * p; i++) ones[i] = 1.0f;
    wbcl_tensor *w = mk(ctx, 4, sh, ones), *y = mk(ctx, 4, sh, ones), *Pi = mk(ctx, 3, sp, ones),
                *temp = mk(ctx, 1, sk, ones), *bias = mk(ctx, 2, sb, NULL), *wt = mk(ctx, 3, st3, ones),
                *yo = mk(other, 4, sh, NULL);
    size_t s3[3] = {B, K, N}, sk4[1] = {4}, sbb[2] = {4, 8}, spb[3] = {B, K, N + 1};
    wbcl_tensor *w3 = mk(ctx, 3, s3, NULL), *t4 = mk(ctx, 1, sk4, NULL), *bb = mk(ctx, 2, sbb, NULL),
                *pib = mk(ctx, 3, spb, NULL);
    tu_assert_status(ctx, wbcl_tssa_heads(ctx, NULL, temp, y, NULL), WBCL_ERROR_INVALID_ARGUMENT, "NULL");
    tu_assert_status(ctx, wbcl_tssa_heads(ctx, w, temp, NULL, NULL), WBCL_ERROR_INVALID_ARGUMENT, "NULL");
    tu_assert_status(ctx, wbcl_tssa_heads(ctx, w3, temp, y, NULL), WBCL_ERROR_SHAPE, "(B, K, N, p)");
    tu_assert_status(ctx, wbcl_tssa_heads(ctx, w, t4, y, NULL), WBCL_ERROR_SHAPE, "'temp' has shape (4)");
    tu_assert_status(ctx, wbcl_tssa_heads(ctx, w, temp, w, NULL), WBCL_ERROR_INVALID_ARGUMENT, "must not");
    tu_assert_status(ctx, wbcl_tssa_heads(ctx, w, temp, y, pib), WBCL_ERROR_SHAPE, "'Pi' has shape (2, 3, 6)");
    tu_assert_status(ctx, wbcl_tssa_heads(ctx, w, temp, wt, NULL), WBCL_ERROR_SHAPE, "");
    tu_assert_status(ctx, wbcl_tssa_heads(ctx, w, temp, yo, NULL), WBCL_ERROR_CONTEXT_MISMATCH, "");
    tu_assert_status(ctx, wbcl_tssa_tokens(ctx, wt, 5, temp, wt, NULL), WBCL_ERROR_SHAPE, "5 heads do not divide");
    tu_assert_status(ctx, wbcl_tssa_tokens(ctx, wt, 0, temp, wt, NULL), WBCL_ERROR_SHAPE, "0 heads");
    tu_assert_status(ctx, wbcl_tssa_causal_heads(ctx, w, temp, bb, NULL, y, NULL), WBCL_ERROR_SHAPE,
                     "'denom_bias' has shape (4, 8)");
    tu_assert_status(ctx, wbcl_tssa_causal_heads(ctx, w, temp, NULL, NULL, y, NULL), WBCL_ERROR_INVALID_ARGUMENT,
                     "NULL");
    size_t sbs[2] = {K, 4};
    wbcl_tensor *bshort = mk(ctx, 2, sbs, NULL);
    tu_assert_status(ctx, wbcl_tssa_causal_heads(ctx, w, temp, bshort, NULL, y, NULL), WBCL_ERROR_SHAPE,
                     "5 tokens from position 0 exceed the 4 positions");
    wbcl_tssa_state *s_other = NULL, *s_bad = NULL;
    OK(other, wbcl_tssa_state_create(other, B, K, p, &s_other));
    OK(ctx, wbcl_tssa_state_create(ctx, B, K, p + 1, &s_bad));
    tu_assert_status(ctx, wbcl_tssa_causal_heads(ctx, w, temp, bias, s_other, y, NULL), WBCL_ERROR_CONTEXT_MISMATCH,
                     "another context");
    tu_assert_status(ctx, wbcl_tssa_causal_heads(ctx, w, temp, bias, s_bad, y, NULL), WBCL_ERROR_SHAPE, "p 5");
    wbcl_tssa_state *sz = (wbcl_tssa_state *)0x1;
    tu_assert_status(ctx, wbcl_tssa_state_create(ctx, 0, K, p, &sz), WBCL_ERROR_SHAPE, "batch 0");
    ck_assert_ptr_null(sz);
    /* outputs untouched by failed calls: y and Pi still hold ones */
    float *yh = rd(ctx, y), *ph = rd(ctx, Pi);
    for (size_t i = 0; i < B * K * N * p; i++) ck_assert(yh[i] == 1.0f);
    for (size_t i = 0; i < B * K * N; i++) ck_assert(ph[i] == 1.0f);
    ck_assert_uint_eq(wbcl_tssa_state_position(s_bad), 0);
    tu_guarded_free(yh);
    tu_guarded_free(ph);
    wbcl_tssa_state_destroy(s_other);
    wbcl_tssa_state_destroy(s_bad);
    wbcl_tensor_destroy(w);
    wbcl_tensor_destroy(y);
    wbcl_tensor_destroy(Pi);
    wbcl_tensor_destroy(temp);
    wbcl_tensor_destroy(bias);
    wbcl_tensor_destroy(wt);
    wbcl_tensor_destroy(yo);
    wbcl_tensor_destroy(w3);
    wbcl_tensor_destroy(t4);
    wbcl_tensor_destroy(bb);
    wbcl_tensor_destroy(pib);
    wbcl_tensor_destroy(bshort);
    free(ones);
    wbcl_context_destroy(ctx);
    wbcl_context_destroy(other);
}
END_TEST

/* The GPU variant: non-causal TSSA has its own GPU-shaped kernels there (work-group reductions over
 * token chunks, cl/tssa.cl); causal TSSA has its own too (causal_gpu_variant below). Shapes: N = 1 and
 * p = 1; p = 17 with N = 257 (unaligned, several heads per lane row); K = 12, p = 64 (aligned:
 * float4 output, N = 31 not a multiple of the token tile); p = 4 with N = 4096 (many chunks). The
 * K = 12 case again in batch groups of one entry (WBCL_TSSA_GROUP_BYTES: the Pi offsets). */
START_TEST(tssa_gpu_variant)
{
    wbcl_context *ctx = tu_context();
    OK(ctx, wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU));
    static const size_t which[] = {0, 3, 5, 8};
    for (size_t i = 0; i < sizeof which / sizeof which[0]; i++) {
        run_tssa_case(ctx, &shapes[which[i]], 0, 900 + i);
        run_tssa_case(ctx, &shapes[which[i]], 1, 910 + i);
    }
    setenv("WBCL_TSSA_GROUP_BYTES", "1", 1);
    run_tssa_case(ctx, &shapes[5], 0, 920);
    run_tssa_case(ctx, &shapes[5], 1, 921);
    unsetenv("WBCL_TSSA_GROUP_BYTES");
    wbcl_context_destroy(ctx);
}
END_TEST


/* The GPU variant's causal TSSA (cl/tssa.cl "GPU-shaped causal"): the blocked prefill (gc_blocksq,
 * gc_scan, gc_member, gc_output) for N > 24, the one-launch step (gc_step) for N <= 24 and decode,
 * against the double reference. These kernels are a program of their own per (K, p) (about 5
 * CPU-s of PoCL compile each): three of them, (1, 1), (4, 17), (12, 64), covering the three lane
 * layouts (TT = 8 rows of 32 lanes with 1 and 3 channels per lane, TT = 2 rows of 128 lanes with 6):
 * N = 1 (step), K = 1 and p = 1, prime N = 257 with p = 17 (not a multiple of 8, several heads per
 * lane row), N = 13 (several tokens in one step), N = 31 with K = 12, p = 64 (not a multiple of the
 * tile), N = 2048 (long sums); then blocks of one tile (WBCL_TSSA_CAUSAL_L = 1: up to 256 blocks,
 * several per slice of the block scan). Tolerances as
 * above: every prefix sum is a block carry (<= nblk/16 + 16 additions) plus a running sum over the
 * tiles of one block plus <= 8 rows, well inside the (rb + nblk + 2) u bound the header uses. */
static const shape4 gpu_causal_shapes[] = {
    {1, 1, 1, 1}, {2, 1, 50, 1}, {2, 4, 257, 17}, {2, 4, 13, 17}, {3, 12, 31, 64}, {1, 4, 2048, 17},
};

/* Decode with the state, in chunks (sched; 0 ends it, the rest in single tokens), equals the batch
 * form (no state) row by row, and both equal the reference; the state's S and P after the whole
 * sequence are the plain sums. Chunks > 24 tokens take the blocked kernels from the state, chunks
 * <= 24 the step kernel. */
static void gpu_decode_case(wbcl_context *ctx, size_t B, size_t K, size_t p, size_t N, const size_t *sched,
                            uint64_t seed)
{
    const size_t D = K * p, tmax = N + 5;
    tu_rng r;
    tu_rng_seed(&r, seed);
    float *x = tu_random_f32(&r, B * N * D, -1.0, 1.0), *temp = tu_random_f32(&r, K, 0.5, 2.0),
          *bias = random_bias(&r, K, tmax);
    double *w64 = malloc(B * N * D * sizeof *w64), *y64 = malloc(B * N * D * sizeof *y64),
           *yt = malloc(B * N * D * sizeof *yt), *t64 = tu_to_f64(temp, K), *b64 = tu_to_f64(bias, K * tmax),
           *yb = malloc(B * N * D * sizeof *yb);
    to_heads(B, K, N, p, x, w64);
    wbcl_ref_tssa_causal(B, K, N, p, w64, t64, b64, tmax, y64, NULL);
    from_heads(B, K, N, p, y64, yt);
    size_t sk[1] = {K}, sb[3] = {K, tmax, 1}, sh[3] = {B, N, D};
    wbcl_tensor *tt = mk(ctx, 1, sk, temp), *tb = mk(ctx, 3, sb, bias), *tx = mk(ctx, 3, sh, x),
                *ty = mk(ctx, 3, sh, NULL);
    OK(ctx, wbcl_tssa_causal_tokens(ctx, tx, K, tt, tb, NULL, ty, NULL));
    float *y = rd(ctx, ty);
    char what[128];
    snprintf(what, sizeof what, "GPU causal batch (B %zu K %zu N %zu p %zu) vs reference", B, K, N, p);
    close_to(y, yt, B * N * D, what);
    for (size_t i = 0; i < B * N * D; i++) yb[i] = y[i];
    wbcl_tssa_state *state = NULL;
    OK(ctx, wbcl_tssa_state_create(ctx, B, K, p, &state));
    float *got = malloc(B * N * D * sizeof *got);
    size_t t = 0, si = 0;
    while (t < N) {
        size_t M = sched[si] ? sched[si++] : 1;
        if (M > N - t) M = N - t;
        size_t sm[3] = {B, M, D};
        float *xm = malloc(B * M * D * sizeof *xm);
        for (size_t b = 0; b < B; b++) memcpy(xm + b * M * D, x + (b * N + t) * D, M * D * sizeof *x);
        wbcl_tensor *txm = mk(ctx, 3, sm, xm), *tym = mk(ctx, 3, sm, NULL);
        wbcl_status st = wbcl_tssa_causal_tokens(ctx, txm, K, tt, tb, state, tym, NULL);
        ck_assert_msg(st == WBCL_SUCCESS, "GPU decode at t %zu: %s", t, wbcl_context_last_error(ctx));
        ck_assert_uint_eq(wbcl_tssa_state_position(state), t + M);
        float *ym = rd(ctx, tym);
        for (size_t b = 0; b < B; b++) memcpy(got + (b * N + t) * D, ym + b * M * D, M * D * sizeof *got);
        wbcl_tensor_destroy(txm);
        wbcl_tensor_destroy(tym);
        free(xm);
        tu_guarded_free(ym);
        t += M;
    }
    snprintf(what, sizeof what, "GPU decode (B %zu K %zu N %zu p %zu) vs GPU batch", B, K, N, p);
    close_to(got, yb, B * N * D, what);
    snprintf(what, sizeof what, "GPU decode (B %zu K %zu N %zu p %zu) vs reference", B, K, N, p);
    close_to(got, yt, B * N * D, what);
    float *S = malloc(B * K * p * sizeof *S), *P = malloc(B * K * sizeof *P);
    OK(ctx, wbcl_tssa_state_read(ctx, state, S, NULL, P));
    for (size_t b = 0; b < B; b++) {
        double psum = 0.0;
        for (size_t h = 0; h < K; h++) {
            psum += P[b * K + h];
            for (size_t c = 0; c < p; c++) {
                double s = 0.0;
                for (size_t i = 0; i < N; i++) s += w64[((b * K + h) * N + i) * p + c] * w64[((b * K + h) * N + i) * p + c];
                ck_assert_msg(fabs(S[(b * K + h) * p + c] - s) <= 1e-5 * s, "GPU state S %g vs %g", S[(b * K + h) * p + c], s);
            }
        }
        ck_assert_msg(fabs(psum - (double)N) <= 1e-4 * N, "GPU state: sum_h P = %g, want N = %zu", psum, N);
    }
    free(S);
    free(P);
    free(got);
    wbcl_tssa_state_destroy(state);
    wbcl_tensor_destroy(tt);
    wbcl_tensor_destroy(tb);
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(ty);
    tu_guarded_free(y);
    free(x);
    free(temp);
    free(bias);
    free(w64);
    free(y64);
    free(yt);
    free(t64);
    free(b64);
    free(yb);
}

START_TEST(causal_gpu_variant)
{
    wbcl_context *ctx = tu_context();
    OK(ctx, wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU));
    const size_t ns = sizeof gpu_causal_shapes / sizeof gpu_causal_shapes[0];
    for (size_t i = 0; i < ns; i++) {
        run_causal_case(ctx, &gpu_causal_shapes[i], 0, 930 + i);
        run_causal_case(ctx, &gpu_causal_shapes[i], 1, 940 + i);
    }
    setenv("WBCL_TSSA_CAUSAL_L", "1", 1);
    run_causal_case(ctx, &gpu_causal_shapes[2], 1, 950);
    run_causal_case(ctx, &gpu_causal_shapes[4], 0, 951);
    run_causal_case(ctx, &gpu_causal_shapes[5], 1, 952);
    /* decode: blocked chunk from zero, single tokens, a short chunk (step), a blocked chunk from the
     * state, then single tokens to the end (with one-tile blocks, then the default blocks) */
    static const size_t sched_a[] = {100, 1, 1, 1, 13, 87, 0};
    static const size_t sched_b[] = {1, 30, 5, 0};
    gpu_decode_case(ctx, 2, 4, 17, 257, sched_a, 960);
    unsetenv("WBCL_TSSA_CAUSAL_L");
    gpu_decode_case(ctx, 2, 4, 17, 257, sched_a, 961);
    gpu_decode_case(ctx, 3, 12, 64, 45, sched_b, 962);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- wbcl-run modules (attn.tssa, attn.tssa_causal, attn.xca, attn.energy) ---------------------- */

#ifdef WBCL_TOOLS_DIR
#define WBCL_RUN_TOOL WBCL_TOOLS_DIR "/wbcl-run"

static char cli_dir[64];

static const char *cli_path(const char *name)
{
    static char bufs[8][160];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, 160, "%s/%s", cli_dir, name);
    return b;
}

/* runs the tool with `args`; returns the exit status, stderr in err */
static int cli(const char *args, char *err, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s > '%s' 2> '%s'", WBCL_RUN_TOOL, args, cli_path("out.txt"), cli_path("err.txt"));
    int rc = system(cmd);
    FILE *f = fopen(cli_path("err.txt"), "r");
    size_t n = f ? fread(err, 1, cap - 1, f) : 0;
    err[n] = '\0';
    if (f) fclose(f);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static float *read_npy(const char *path, size_t n)
{
    wbcl_array a;
    char err[256];
    ck_assert_msg(wbcl_npy_read(path, &a, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    ck_assert_uint_eq(wbcl_array_numel(&a), n);
    float *f = NULL;
    ck_assert_int_eq(wbcl_array_to_f32(&a, &f, err, sizeof err), WBCL_SUCCESS);
    wbcl_array_free(&a);
    return f;
}

START_TEST(cli_modules)
{
    if (access(WBCL_RUN_TOOL, X_OK) != 0) return; /* tools not built */
    snprintf(cli_dir, sizeof cli_dir, "/tmp/wbcl-test-tssa-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(cli_dir));
    const size_t B = 2, N = 17, d = 24, K = 3, tmax = 20, n = B * N * d;
    tu_rng r;
    tu_rng_seed(&r, 81);
    double sc = 1.0 / sqrt((double)d);
    float *x = tu_random_f32(&r, n, -1, 1), *W = tu_random_f32(&r, 3 * d * d, -sc, sc),
          *b = tu_random_f32(&r, 3 * d, -0.1, 0.1), *temp = tu_random_f32(&r, K, 0.5, 2.0),
          *bias = random_bias(&r, K, tmax), *Wo = tu_random_f32(&r, d * d, -sc, sc);
    size_t sx[3] = {B, N, d};
    char err[4096];
    ck_assert_int_eq(wbcl_npy_write_f32(cli_path("x.npy"), 3, sx, x, err, sizeof err), WBCL_SUCCESS);
    {
        const char *names[5] = {"blocks.1.attn.qkv.weight", "blocks.1.attn.qkv.bias", "blocks.1.attn.temp",
                                "blocks.1.attn.to_out.0.weight", "blocks.1.attn.to_out.0.bias"};
        const float *data[5] = {W, b, temp, Wo, b};
        const int nd[5] = {2, 1, 2, 2, 1};
        const size_t shp[5][3] = {{d, d}, {d}, {K, 1}, {d, d}, {d}};
        write_st(cli_path("tssa.safetensors"), 5, names, data, nd, shp);
    }
    {
        const char *names[4] = {"c_attn.weight", "temp", "denom_bias", "c_proj.weight"};
        const float *data[4] = {W, temp, bias, Wo};
        const int nd[4] = {2, 2, 3, 2};
        const size_t shp[4][3] = {{d, d}, {K, 1}, {K, tmax, 1}, {d, d}};
        write_st(cli_path("causal.safetensors"), 4, names, data, nd, shp);
    }
    {
        const char *names[5] = {"qkv.weight", "qkv.bias", "temperature", "proj.weight", "proj.bias"};
        const float *data[5] = {W, b, temp, Wo, b};
        const int nd[5] = {2, 1, 3, 2, 1};
        const size_t shp[5][3] = {{3 * d, d}, {3 * d}, {K, 1, 1}, {d, d}, {d}};
        write_st(cli_path("xca.safetensors"), 5, names, data, nd, shp);
    }
    {
        const char *names[2] = {"W_a", "W_f"};
        const float *data[2] = {W, Wo};
        const int nd[2] = {2, 2};
        const size_t shp[2][3] = {{d, d}, {d, d}};
        write_st(cli_path("energy.safetensors"), 2, names, data, nd, shp);
    }
    double *x64 = tu_to_f64(x, n), *W64 = tu_to_f64(W, 3 * d * d), *b64 = tu_to_f64(b, 3 * d), *t64 = tu_to_f64(temp, K),
           *bi64 = tu_to_f64(bias, K * tmax), *Wo64 = tu_to_f64(Wo, d * d), *want = malloc(n * sizeof *want),
           *tmp = malloc(n * sizeof *tmp);
    char args[1024];
    /* attn.tssa with a prefix */
    snprintf(args, sizeof args, "attn.tssa --weights %s --input %s --output %s --param heads=3 prefix=blocks.1.attn. --verify --quiet",
             cli_path("tssa.safetensors"), cli_path("x.npy"), cli_path("y.npy"));
    ck_assert_msg(cli(args, err, sizeof err) == 0, "attn.tssa: %s", err);
    float *y = read_npy(cli_path("y.npy"), n);
    wbcl_ref_tssa_layer(B, N, d, K, x64, W64, b64, t64, Wo64, b64, want);
    close_to(y, want, n, "wbcl-run attn.tssa");
    free(y);
    /* attn.tssa_causal, batch and decode */
    wbcl_ref_tssa_causal_layer(B, N, d, K, x64, W64, NULL, t64, bi64, tmax, Wo64, NULL, want);
    for (int dec = 0; dec < 2; dec++) {
        snprintf(args, sizeof args, "attn.tssa_causal --weights %s --input %s --output %s --param heads=3 decode=%d --verify --quiet",
                 cli_path("causal.safetensors"), cli_path("x.npy"), cli_path("y.npy"), dec);
        ck_assert_msg(cli(args, err, sizeof err) == 0, "attn.tssa_causal decode=%d: %s", dec, err);
        y = read_npy(cli_path("y.npy"), n);
        close_to(y, want, n, dec ? "wbcl-run attn.tssa_causal decode=1" : "wbcl-run attn.tssa_causal");
        free(y);
    }
    /* attn.xca */
    snprintf(args, sizeof args, "attn.xca --weights %s --input %s --output %s --param heads=3 --verify --quiet",
             cli_path("xca.safetensors"), cli_path("x.npy"), cli_path("y.npy"));
    ck_assert_msg(cli(args, err, sizeof err) == 0, "attn.xca: %s", err);
    y = read_npy(cli_path("y.npy"), n);
    wbcl_ref_xca_layer(B, N, d, K, x64, W64, b64, t64, Wo64, b64, want);
    close_to(y, want, n, "wbcl-run attn.xca");
    free(y);
    /* attn.energy: W_a, W_f, log rho, 2 steps, ReLU */
    snprintf(args, sizeof args,
             "attn.energy --weights %s --input %s --output %s --param rho=log c=2 alpha=0.5 alpha2=0.3 relu=1 steps=2 "
             "--verify --quiet",
             cli_path("energy.safetensors"), cli_path("x.npy"), cli_path("y.npy"));
    ck_assert_msg(cli(args, err, sizeof err) == 0, "attn.energy: %s", err);
    y = read_npy(cli_path("y.npy"), n);
    memcpy(want, x64, n * sizeof *want);
    for (int s = 0; s < 2; s++) {
        wbcl_ref_energy_step(B, N, d, want, W64, 1, 2.0, 0.5, tmp);
        wbcl_ref_energy_ffn(B * N, d, tmp, Wo64, 0.3, 1, want);
    }
    close_to(y, want, n, "wbcl-run attn.energy");
    free(y);
    /* errors: one line naming the problem, non-zero exit */
    snprintf(args, sizeof args, "attn.tssa --weights %s --input %s --param heads=5 prefix=blocks.1.attn.",
             cli_path("tssa.safetensors"), cli_path("x.npy"));
    ck_assert_int_ne(cli(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "heads = 5 does not divide d = 24"), "%s", err);
    snprintf(args, sizeof args, "attn.tssa --weights %s --input %s --param heads=3", cli_path("tssa.safetensors"),
             cli_path("x.npy"));
    ck_assert_int_ne(cli(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "missing tensor 'qkv.weight'"), "%s", err);
    snprintf(args, sizeof args, "attn.xca --weights %s --input %s --param heads=4", cli_path("xca.safetensors"),
             cli_path("x.npy"));
    ck_assert_int_ne(cli(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "'temperature' has shape (3, 1, 1), expected (4, 1, 1)"), "%s", err);
    snprintf(args, sizeof args, "attn.energy --weights %s --input %s --param rho=cosh", cli_path("energy.safetensors"),
             cli_path("x.npy"));
    ck_assert_int_ne(cli(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "rho"), "%s", err);
    {
        size_t sl[3] = {1, tmax + 1, d};
        float *xl = tu_random_f32(&r, (tmax + 1) * d, -1, 1);
        ck_assert_int_eq(wbcl_npy_write_f32(cli_path("xl.npy"), 3, sl, xl, err, sizeof err), WBCL_SUCCESS);
        free(xl);
        snprintf(args, sizeof args, "attn.tssa_causal --weights %s --input %s --param heads=3",
                 cli_path("causal.safetensors"), cli_path("xl.npy"));
        ck_assert_int_ne(cli(args, err, sizeof err), 0);
        ck_assert_msg(strstr(err, "Tmax = 20"), "%s", err);
    }
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf '%s'", cli_dir);
    ck_assert_int_eq(system(rm), 0);
    free(x);
    free(W);
    free(b);
    free(temp);
    free(bias);
    free(Wo);
    free(x64);
    free(W64);
    free(b64);
    free(t64);
    free(bi64);
    free(Wo64);
    free(want);
    free(tmp);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("tssa");
    TCase *tc = tcase_create("tssa");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, tssa_matches_reference);
    tcase_add_test(tc, tssa_permutation_equivariant);
    tcase_add_test(tc, tssa_large_logits_zero_channel);
    tcase_add_test(tc, causal_matches_reference);
    tcase_add_test(tc, causal_prefix_property);
    tcase_add_test(tc, causal_first_membership_is_input_independent);
    tcase_add_test(tc, decode_equals_batch);
    tcase_add_test(tc, decode_long_sequence);
    tcase_add_test(tc, tssa_layer_load_and_forward);
    tcase_add_test(tc, causal_layer_load_forward_decode);
    tcase_add_test(tc, tssa_bad_input);
    tcase_add_test(tc, tssa_gpu_variant);
#ifdef WBCL_TOOLS_DIR
    tcase_add_test(tc, cli_modules);
#endif
    suite_add_tcase(s, tc);
    /* a case of its own: CK_RUN_CASE=gpu_causal runs it alone */
    tc = tcase_create("gpu_causal");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, causal_gpu_variant);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
