/* ISTA (CRATE's sparse-coding block) and LASSO by unrolled ISTA / FISTA
 * (include/wbcl/ista.h) against the double references of host/ref/ref_ista.c,
 * in both kernel variants, plus the properties of SPEC.md §2.
 *
 * Tolerances (u = 2^-24, float32 unit roundoff):
 *  - One ISTA step y = theta(z - eta (z W^T - x) W): the two products are dot
 *    products of lengths m and d, so |S - S_ref| <= (m + d + 2) u ((|z||W^T| + |x|)|W|)
 *    elementwise (gamma_k bound, Higham §3.5), one more rounding each for
 *    eta S, the subtraction of eta lambda and the addition of z; theta is
 *    1-Lipschitz. We require |y - y_ref| <= ISTA_C (m + d + 8) u scale with
 *    scale = |z| + eta ((|z||W^T| + |x|)|W|) + eta lambda, ISTA_C = 1. The
 *    folded form computes M = W - W^T W first (length-d products) and then
 *    x M: the same bound with |M| <= |W| + |W^T||W|, so the same scale works
 *    with (2d + 8).
 *  - LASSO: the ISTA map with t <= 1/L is nonexpansive (prox and I - t W^T W
 *    both are), so rounding errors do not grow along the steps; each step adds
 *    the rounding of two length-(m, d) products. Worst case that is linear in
 *    T (m + d) u; the errors of independent steps and terms add up like a
 *    random walk in practice, so we require
 *      ||Z_T - Zref_T||_F <= LASSO_C sqrt(T (m + d)) u (||Zref||_F + t ||W||_2 ||X||_F),
 *    LASSO_C = 8 (observed 2e-7..9e-7 relative against tolerances ~3e-5). FISTA
 *    is not nonexpansive (momentum up to ~1), but over the 25 steps compared it
 *    stayed within the same bound (observed 9e-7). A FISTA without momentum
 *    (i.e. ISTA) is off by ~1e-2 and fails.
 *  - Objective values: per-row float sums of m + d terms (16-lane partials),
 *    then a double sum over rows: random-walk error ~ sqrt(m + d) u, so
 *    |F - F_ref| <= (OBJ_C sqrt(m + d) u + the iterate tolerance above) F_ref,
 *    OBJ_C = 8 (observed 1e-7 relative; a 1e-4 error in the squared term fails).
 *    "Non-increasing" is checked as F_{k+1} <= F_k + OBJ_C sqrt(m + d) u F_k; a
 *    divergent step (t = 2.5/L) violates it (the check can fail).
 *  - L = ||W||_2^2 by power iteration on the float Gram: within (m + 8) u (Gram
 *    rounding) + 1e-6 (stopping rule, observed convergence) of the Jacobi value. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "testutil.h"
#include "wbcl/ista.h"
#include "wbcl/ref.h"

#define U32 (1.0 / 16777216.0)
#define ISTA_C 1.0
#define LASSO_C 8.0
#define OBJ_C 8.0

static const wbcl_variant variants[2] = {WBCL_VARIANT_CPU, WBCL_VARIANT_GPU};
static const char *vname(wbcl_variant v) { return v == WBCL_VARIANT_CPU ? "cpu" : "gpu"; }

static wbcl_tensor *mk(wbcl_context *ctx, int nd, const size_t *shape, const float *data)
{
    wbcl_tensor *t = NULL;
    wbcl_status st = wbcl_tensor_create(ctx, nd, shape, WBCL_F32, data, &t);
    ck_assert_msg(st == WBCL_SUCCESS, "tensor_create: %s", wbcl_context_last_error(ctx));
    return t;
}

static float *rd(wbcl_context *ctx, const wbcl_tensor *t)
{
    size_t n = wbcl_tensor_numel(t);
    float *p = tu_guarded_alloc(n);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t, p, n), WBCL_SUCCESS);
    ck_assert(tu_canary_ok(p, n));
    return p;
}

/* Per-element error scale of one ISTA step: |z| + eta ((|z||W^T| + |x|)|W|) + eta lambda. */
static double *ista_scale(size_t rows, size_t d, size_t m, const double *x, const double *z, const double *W,
                          double eta, double lambd)
{
    if (!z) z = x;
    double *P = malloc(rows * d * sizeof *P), *S = malloc(rows * m * sizeof *S);
    ck_assert(P && S);
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < d; i++) {
            double s = fabs(x[r * d + i]);
            for (size_t j = 0; j < m; j++) s += fabs(z[r * m + j]) * fabs(W[i * m + j]);
            P[r * d + i] = s;
        }
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < m; j++) {
            double s = 0.0;
            for (size_t i = 0; i < d; i++) s += P[r * d + i] * fabs(W[i * m + j]);
            S[r * m + j] = fabs(z[r * m + j]) + eta * s + eta * lambd;
        }
    free(P);
    return S;
}

/* max_i |got - want| / (tol scale_i) */
static double scaled_err(const float *got, const double *want, const double *scale, size_t n, double tol, size_t *worst)
{
    double w = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = isfinite(got[i]) ? fabs(got[i] - want[i]) / (tol * scale[i]) : INFINITY;
        if (e > w || isnan(e)) {
            w = isnan(e) ? INFINITY : e;
            if (worst) *worst = i;
        }
    }
    return w;
}

static double frob_diff(const float *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (a[i] - b[i]) * (a[i] - b[i]);
    return sqrt(s);
}

static double frob(const double *a, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * a[i];
    return sqrt(s);
}

/* ---- one step against the reference -------------------------------------------------------- */

/* shape of x: nd dims ending in d; W (d, m); with_z: an explicit code z. */
static void check_step(wbcl_context *ctx, tu_rng *r, int nd, const size_t *xs, size_t m, int with_z, int soft,
                       float eta, float lambd)
{
    const size_t d = xs[nd - 1];
    size_t rows = 1;
    for (int i = 0; i < nd - 1; i++) rows *= xs[i];
    size_t zs[4];
    memcpy(zs, xs, (size_t)nd * sizeof *xs);
    zs[nd - 1] = m;
    size_t ws[2] = {d, m};
    float *x = tu_random_f32(r, rows * d, -1, 1), *z = tu_random_f32(r, rows * m, -1, 1),
          *W = tu_random_f32(r, d * m, -1.0 / sqrt((double)d), 1.0 / sqrt((double)d));
    double *x64 = tu_to_f64(x, rows * d), *z64 = tu_to_f64(z, rows * m), *W64 = tu_to_f64(W, d * m);
    double *want = malloc(rows * m * sizeof *want);
    ck_assert_ptr_nonnull(want);
    /* no code given: z = x for a square W, z = 0 (an explicit zero tensor) for an overcomplete one */
    double *zero64 = calloc(rows * m, sizeof *zero64);
    ck_assert_ptr_nonnull(zero64);
    const double *zr = with_z ? z64 : m == d ? NULL : zero64;
    wbcl_ref_ista(rows, d, m, x64, zr, W64, eta, lambd, soft, want);
    double *scale = ista_scale(rows, d, m, x64, zr, W64, eta, lambd);
    wbcl_tensor *tx = mk(ctx, nd, xs, x), *tw = mk(ctx, 2, ws, W), *ty = mk(ctx, nd, zs, NULL);
    wbcl_tensor *tz = with_z ? mk(ctx, nd, zs, z) : m == d ? NULL : mk(ctx, nd, zs, NULL);
    wbcl_threshold th = soft ? WBCL_THRESHOLD_SOFT : WBCL_THRESHOLD_RELU;
    ck_assert_msg(wbcl_ista(ctx, tx, tz, tw, eta, lambd, th, ty) == WBCL_SUCCESS, "%s", wbcl_context_last_error(ctx));
    float *y = rd(ctx, ty);
    size_t worst = 0;
    double e = scaled_err(y, want, scale, rows * m, ISTA_C * (double)(m + d + 8) * U32, &worst);
    ck_assert_msg(e <= 1.0, "ista %s rows %zu d %zu m %zu z %d soft %d: element %zu got %.9g want %.9g (%.3g x tol)",
                  vname(wbcl_context_variant(ctx)), rows, d, m, with_z, soft, worst, (double)y[worst], want[worst], e);
    tu_guarded_free(y);
    /* the layer (no code): square W -> folded with z = x; overcomplete W -> two GEMMs from z = 0 */
    if (!with_z) {
        wbcl_ista_layer *L = NULL;
        ck_assert_int_eq(wbcl_ista_layer_create(ctx, tw, eta, lambd, th, WBCL_ISTA_AUTO, &L), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_ista_layer_path(L), m == d ? WBCL_ISTA_FOLDED : WBCL_ISTA_TWO_GEMM);
        wbcl_tensor_fill(ctx, ty, NAN);
        ck_assert_msg(wbcl_ista_layer_forward(ctx, L, tx, ty) == WBCL_SUCCESS, "%s", wbcl_context_last_error(ctx));
        y = rd(ctx, ty);
        e = scaled_err(y, want, scale, rows * m, ISTA_C * (double)(m + 2 * d + 8) * U32, &worst);
        ck_assert_msg(e <= 1.0, "ista layer %s d %zu m %zu: element %zu got %.9g want %.9g (%.3g x tol)",
                      vname(wbcl_context_variant(ctx)), d, m, worst, (double)y[worst], want[worst], e);
        tu_guarded_free(y);
        wbcl_ista_layer_destroy(L);
    }
    free(zero64);
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(tz);
    wbcl_tensor_destroy(tw);
    wbcl_tensor_destroy(ty);
    free(x);
    free(z);
    free(W);
    free(x64);
    free(z64);
    free(W64);
    free(want);
    free(scale);
}

START_TEST(ista_matches_reference)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 11);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        for (int soft = 0; soft < 2; soft++) {
            size_t s1[2] = {1, 1}, s2[2] = {7, 13}, s3[3] = {2, 5, 37}, s4[4] = {2, 1, 3, 11}, s5[2] = {197, 64};
            check_step(ctx, &r, 2, s1, 1, 0, soft, 0.1f, 0.1f);
            check_step(ctx, &r, 2, s2, 13, 0, soft, 0.1f, 0.1f);
            check_step(ctx, &r, 3, s3, 37, 1, soft, 0.5f, 0.02f);
            check_step(ctx, &r, 4, s4, 29, 1, soft, 0.1f, 0.1f);  /* overcomplete (11, 29) with a code */
            check_step(ctx, &r, 2, s2, 41, 0, soft, 0.3f, 0.05f); /* overcomplete, the layer from z = 0 */
            check_step(ctx, &r, 2, s5, 64, 0, soft, 0.1f, 0.1f);
        }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* CRATE's FeedForward, in the reference's order of operations, against the two-GEMM and the
 * folded paths; and the same with W^T in place of W must fail that comparison. */
START_TEST(ista_crate_reference_and_transpose)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 12);
    const size_t B = 2, N = 9, d = 24, rows = B * N;
    size_t xs[3] = {B, N, d}, ws[2] = {d, d};
    float *x = tu_random_f32(&r, rows * d, -1, 1), *W = tu_random_f32(&r, d * d, -0.4, 0.4), *Wt = malloc(d * d * 4);
    ck_assert_ptr_nonnull(Wt);
    /* a strongly non-symmetric W: add a skew part so that W != W^T everywhere */
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < i; j++) {
            float s = (float)tu_uniform(&r, 0.2, 0.5);
            W[i * d + j] += s;
            W[j * d + i] -= s;
        }
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++) Wt[i * d + j] = W[j * d + i];
    double *x64 = tu_to_f64(x, rows * d), *W64 = tu_to_f64(W, d * d), *want = malloc(rows * d * sizeof *want),
           *swapped = malloc(rows * d * sizeof *swapped);
    ck_assert(want && swapped);
    wbcl_ref_crate_ista(rows, d, x64, W64, 0.1, 0.1, want);
    double *scale = ista_scale(rows, d, d, x64, NULL, W64, 0.1, 0.1);
    const double tol = ISTA_C * (double)(3 * d + 8) * U32;
    /* the general reference agrees with the CRATE-order one */
    wbcl_ref_ista(rows, d, d, x64, NULL, W64, 0.1, 0.1, 0, swapped);
    for (size_t i = 0; i < rows * d; i++) ck_assert(fabs(swapped[i] - want[i]) <= 1e-12 * scale[i]);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        wbcl_tensor *tx = mk(ctx, 3, xs, x), *tw = mk(ctx, 2, ws, W), *twt = mk(ctx, 2, ws, Wt),
                    *ty = mk(ctx, 3, xs, NULL), *tm = mk(ctx, 2, ws, NULL);
        for (int path = 0; path < 2; path++) {
            if (path == 0) ck_assert_int_eq(wbcl_ista(ctx, tx, NULL, tw, 0.1f, 0.1f, WBCL_THRESHOLD_RELU, ty), WBCL_SUCCESS);
            else {
                ck_assert_int_eq(wbcl_ista_fold(ctx, tw, tm), WBCL_SUCCESS);
                ck_assert_int_eq(wbcl_ista_folded(ctx, tx, tm, 0.1f, 0.1f, WBCL_THRESHOLD_RELU, ty), WBCL_SUCCESS);
            }
            float *y = rd(ctx, ty);
            size_t worst = 0;
            double e = scaled_err(y, want, scale, rows * d, tol, &worst);
            ck_assert_msg(e <= 1.0, "crate ista %s path %d: element %zu got %.9g want %.9g (%.3g x tol)",
                          vname(variants[v]), path, worst, (double)y[worst], want[worst], e);
            tu_guarded_free(y);
            /* W^T instead of W: the comparison must fail, by far */
            if (path == 0) ck_assert_int_eq(wbcl_ista(ctx, tx, NULL, twt, 0.1f, 0.1f, WBCL_THRESHOLD_RELU, ty), WBCL_SUCCESS);
            else {
                ck_assert_int_eq(wbcl_ista_fold(ctx, twt, tm), WBCL_SUCCESS);
                ck_assert_int_eq(wbcl_ista_folded(ctx, tx, tm, 0.1f, 0.1f, WBCL_THRESHOLD_RELU, ty), WBCL_SUCCESS);
            }
            y = rd(ctx, ty);
            e = scaled_err(y, want, scale, rows * d, tol, NULL);
            ck_assert_msg(e > 100.0, "W^T passes the comparison for W (%s path %d: %.3g x tol)", vname(variants[v]),
                          path, e);
            tu_guarded_free(y);
        }
        wbcl_tensor_destroy(tx);
        wbcl_tensor_destroy(tw);
        wbcl_tensor_destroy(twt);
        wbcl_tensor_destroy(ty);
        wbcl_tensor_destroy(tm);
    }
    free(x);
    free(W);
    free(Wt);
    free(x64);
    free(W64);
    free(want);
    free(swapped);
    free(scale);
    wbcl_context_destroy(ctx);
}
END_TEST

/* W = 0: y = ReLU(x - eta lambda) (every path); soft: sign(x) (|x| - eta lambda)+. */
START_TEST(ista_zero_weight)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 13);
    const size_t rows = 33, d = 19;
    size_t xs[2] = {rows, d}, ws[2] = {d, d};
    float *x = tu_random_f32(&r, rows * d, -0.05, 0.05);
    const float eta = 0.1f, lambd = 0.1f;
    const double el = (double)eta * (double)lambd;
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        wbcl_tensor *tx = mk(ctx, 2, xs, x), *tw = mk(ctx, 2, ws, NULL), *ty = mk(ctx, 2, xs, NULL),
                    *tm = mk(ctx, 2, ws, NULL);
        for (int soft = 0; soft < 2; soft++)
            for (int path = 0; path < 2; path++) {
                wbcl_threshold th = soft ? WBCL_THRESHOLD_SOFT : WBCL_THRESHOLD_RELU;
                if (path == 0) ck_assert_int_eq(wbcl_ista(ctx, tx, NULL, tw, eta, lambd, th, ty), WBCL_SUCCESS);
                else {
                    ck_assert_int_eq(wbcl_ista_fold(ctx, tw, tm), WBCL_SUCCESS);
                    ck_assert_int_eq(wbcl_ista_folded(ctx, tx, tm, eta, lambd, th, ty), WBCL_SUCCESS);
                }
                float *y = rd(ctx, ty);
                int pos = 0, zero = 0;
                for (size_t i = 0; i < rows * d; i++) {
                    double xv = x[i], want = soft ? (fabs(xv) > el ? (xv > 0 ? xv - el : xv + el) : 0.0)
                                                  : (xv > el ? xv - el : 0.0);
                    /* one rounding of x - eta lambda, and eta lambda itself rounded to float */
                    ck_assert_msg(fabs(y[i] - want) <= 2 * U32 * (fabs(xv) + el), "%s soft %d path %d: x %.9g y %.9g want %.9g",
                                  vname(variants[v]), soft, path, xv, (double)y[i], want);
                    pos += y[i] > 0;
                    zero += y[i] == 0;
                }
                ck_assert(pos > 0 && zero > 0);
                tu_guarded_free(y);
            }
        wbcl_tensor_destroy(tx);
        wbcl_tensor_destroy(tw);
        wbcl_tensor_destroy(ty);
        wbcl_tensor_destroy(tm);
    }
    free(x);
    wbcl_context_destroy(ctx);
}
END_TEST

/* CRATE has no residual around ISTA: with the ReLU threshold every output is >= 0, even when
 * most inputs are negative; the soft threshold does give negative outputs (the check bites). */
START_TEST(ista_crate_nonnegative_and_in_place)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 14);
    const size_t rows = 50, d = 32;
    size_t xs[2] = {rows, d}, ws[2] = {d, d};
    float *x = tu_random_f32(&r, rows * d, -2, 1), *W = tu_random_f32(&r, d * d, -0.3, 0.3);
    double *x64 = tu_to_f64(x, rows * d), *W64 = tu_to_f64(W, d * d), *want = malloc(rows * d * sizeof *want);
    ck_assert_ptr_nonnull(want);
    double *scale = ista_scale(rows, d, d, x64, NULL, W64, 0.1, 0.1);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        wbcl_tensor *tx = mk(ctx, 2, xs, x), *tw = mk(ctx, 2, ws, W), *ty = mk(ctx, 2, xs, NULL);
        for (int soft = 0; soft < 2; soft++) {
            wbcl_threshold th = soft ? WBCL_THRESHOLD_SOFT : WBCL_THRESHOLD_RELU;
            ck_assert_int_eq(wbcl_ista(ctx, tx, NULL, tw, 0.1f, 0.1f, th, ty), WBCL_SUCCESS);
            float *y = rd(ctx, ty);
            int neg = 0, pos = 0;
            for (size_t i = 0; i < rows * d; i++) neg += y[i] < 0, pos += y[i] > 0;
            if (soft) ck_assert_msg(neg > 0, "soft threshold gave no negative output");
            else ck_assert_msg(neg == 0 && pos > 0, "%s: %d negative outputs", vname(variants[v]), neg);
            tu_guarded_free(y);
        }
        /* in place: y == x (two-GEMM and layer), y == z */
        wbcl_ref_ista(rows, d, d, x64, NULL, W64, 0.1, 0.1, 0, want);
        for (int k = 0; k < 3; k++) {
            ck_assert_int_eq(wbcl_tensor_write(ctx, tx, x, rows * d), WBCL_SUCCESS);
            if (k == 0) ck_assert_int_eq(wbcl_ista(ctx, tx, NULL, tw, 0.1f, 0.1f, WBCL_THRESHOLD_RELU, tx), WBCL_SUCCESS);
            if (k == 1) ck_assert_int_eq(wbcl_ista(ctx, tx, tx, tw, 0.1f, 0.1f, WBCL_THRESHOLD_RELU, tx), WBCL_SUCCESS);
            if (k == 2) {
                wbcl_ista_layer *L = NULL;
                ck_assert_int_eq(wbcl_ista_layer_create(ctx, tw, 0.1f, 0.1f, WBCL_THRESHOLD_RELU, WBCL_ISTA_TWO_GEMM, &L),
                                 WBCL_SUCCESS);
                ck_assert_int_eq(wbcl_ista_layer_forward(ctx, L, tx, tx), WBCL_SUCCESS);
                wbcl_ista_layer_destroy(L);
            }
            float *y = rd(ctx, tx);
            double e = scaled_err(y, want, scale, rows * d, ISTA_C * (double)(2 * d + 8) * U32, NULL);
            ck_assert_msg(e <= 1.0, "in place %d (%s): %.3g x tol", k, vname(variants[v]), e);
            tu_guarded_free(y);
        }
        wbcl_tensor_destroy(tx);
        wbcl_tensor_destroy(tw);
        wbcl_tensor_destroy(ty);
    }
    wbcl_ista_layer_destroy(NULL);
    free(x);
    free(W);
    free(x64);
    free(W64);
    free(want);
    free(scale);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- LASSO --------------------------------------------------------------------------------------- */

typedef struct lasso_problem {
    size_t B, N, d, m, rows;
    float *X, *W;
    double *X64, *W64;
} lasso_problem;

/* X = Z* W^T + noise with a sparse Z* (so the LASSO has a sparse answer), W with unit-norm-ish columns. */
static lasso_problem make_problem(tu_rng *r, size_t B, size_t N, size_t d, size_t m)
{
    lasso_problem p = {B, N, d, m, B * N, NULL, NULL, NULL, NULL};
    p.W = malloc(d * m * sizeof *p.W);
    p.X = malloc(p.rows * d * sizeof *p.X);
    ck_assert(p.W && p.X);
    for (size_t i = 0; i < d * m; i++) p.W[i] = (float)(tu_normal(r) / sqrt((double)d));
    for (size_t rr = 0; rr < p.rows; rr++)
        for (size_t i = 0; i < d; i++) {
            double s = 0.05 * tu_normal(r);
            for (size_t j = 0; j < m; j++)
                if ((j * 7 + rr * 3) % 9 == 0) s += p.W[i * m + j] * (1.0 + 0.5 * tu_normal(r));
            p.X[rr * d + i] = (float)s;
        }
    p.X64 = tu_to_f64(p.X, p.rows * d);
    p.W64 = tu_to_f64(p.W, d * m);
    return p;
}

static void free_problem(lasso_problem *p)
{
    free(p->X);
    free(p->W);
    free(p->X64);
    free(p->W64);
}

/* Runs the device LASSO from Z = 0; returns Z (guarded) and fills obj (steps + 1). */
static float *run_lasso(wbcl_context *ctx, const lasso_problem *p, const wbcl_lasso_opts *o, double *obj)
{
    size_t xs[3] = {p->B, p->N, p->d}, zs[3] = {p->B, p->N, p->m}, ws[2] = {p->d, p->m};
    wbcl_tensor *tx = mk(ctx, 3, xs, p->X), *tw = mk(ctx, 2, ws, p->W), *tz = mk(ctx, 3, zs, NULL);
    wbcl_status st = wbcl_lasso(ctx, tx, tw, o, tz, obj);
    ck_assert_msg(st == WBCL_SUCCESS, "wbcl_lasso: %s", wbcl_context_last_error(ctx));
    float *z = rd(ctx, tz);
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(tw);
    wbcl_tensor_destroy(tz);
    return z;
}

START_TEST(lasso_lipschitz)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 21);
    const size_t dims[4][2] = {{1, 1}, {16, 48}, {40, 13}, {64, 256}};
    for (int c = 0; c < 4; c++) {
        const size_t d = dims[c][0], m = dims[c][1];
        size_t ws[2] = {d, m};
        float *W = tu_random_f32(&r, d * m, -1, 1);
        double *W64 = tu_to_f64(W, d * m), L = -1.0;
        const double Lref = wbcl_ref_spectral_norm_sq(d, m, W64);
        wbcl_tensor *tw = mk(ctx, 2, ws, W);
        ck_assert_int_eq(wbcl_lasso_lipschitz(ctx, tw, &L), WBCL_SUCCESS);
        const double tol = (double)((d < m ? m : d) + 8) * U32 + 1e-6;
        ck_assert_msg(fabs(L - Lref) <= tol * Lref, "(%zu, %zu): L %.12g, Jacobi %.12g", d, m, L, Lref);
        wbcl_tensor_destroy(tw);
        free(W);
        free(W64);
    }
    /* W = 0 gives 0 */
    size_t ws[2] = {5, 7};
    wbcl_tensor *tw = mk(ctx, 2, ws, NULL);
    double L = -1.0;
    ck_assert_int_eq(wbcl_lasso_lipschitz(ctx, tw, &L), WBCL_SUCCESS);
    ck_assert(L == 0.0);
    wbcl_tensor_destroy(tw);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ISTA with t = 1/L: the objective never increases, it matches the double reference run with the
 * same step, and a divergent step (2.5/L) is caught by the same monotonicity check. */
START_TEST(lasso_ista_monotone_and_reference)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 22);
    lasso_problem p = make_problem(&r, 2, 7, 16, 48);
    const size_t T = 60, nz = p.rows * p.m;
    double L = 0.0;
    {
        size_t ws[2] = {p.d, p.m};
        wbcl_tensor *tw = mk(ctx, 2, ws, p.W);
        ck_assert_int_eq(wbcl_lasso_lipschitz(ctx, tw, &L), WBCL_SUCCESS);
        wbcl_tensor_destroy(tw);
    }
    const double t = 1.0 / L, objtol = OBJ_C * sqrt((double)(p.m + p.d)) * U32;
    double *obj = malloc((T + 1) * sizeof *obj), *objref = malloc((T + 1) * sizeof *objref),
           *zref = calloc(nz, sizeof *zref);
    ck_assert(obj && objref && zref);
    for (int v = 0; v < 2; v++)
        for (int soft = 0; soft < 2; soft++) {
            ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
            wbcl_lasso_opts o = wbcl_lasso_defaults();
            o.steps = T;
            o.lambd = 0.05f;
            o.threshold = soft ? WBCL_THRESHOLD_SOFT : WBCL_THRESHOLD_RELU;
            float *z = run_lasso(ctx, &p, &o, obj); /* L by power iteration inside */
            for (size_t k = 0; k < T; k++)
                ck_assert_msg(obj[k + 1] <= obj[k] + objtol * obj[k], "%s soft %d: F rises at step %zu: %.10g -> %.10g",
                              vname(variants[v]), soft, k + 1, obj[k], obj[k + 1]);
            ck_assert_msg(obj[T] < 0.5 * obj[0], "no real descent: %.6g -> %.6g", obj[0], obj[T]);
            /* the reference with the same step */
            memset(zref, 0, nz * sizeof *zref);
            wbcl_ref_lasso(p.rows, p.d, p.m, p.X64, p.W64, 0.05, soft, 0, t, T, zref, objref);
            const double zn = frob(zref, nz) + t * sqrt(L) * frob(p.X64, p.rows * p.d);
            const double zt = LASSO_C * sqrt((double)T * (double)(p.m + p.d)) * U32;
            ck_assert_msg(frob_diff(z, zref, nz) <= zt * zn, "%s soft %d: |Z - Zref| = %.3g > %.3g", vname(variants[v]),
                          soft, frob_diff(z, zref, nz), zt * zn);
            for (size_t k = 0; k <= T; k++)
                ck_assert_msg(fabs(obj[k] - objref[k]) <= (objtol + zt) * objref[k], "step %zu: F %.10g, ref %.10g", k,
                              obj[k], objref[k]);
            if (!soft)
                for (size_t i = 0; i < nz; i++) ck_assert(z[i] >= 0.0f);
            tu_guarded_free(z);
            /* the check can fail: t = 2.5/L diverges along the top singular direction */
            o.step = 2.5 / L;
            o.steps = 40;
            z = run_lasso(ctx, &p, &o, obj);
            int rises = 0;
            for (size_t k = 0; k < 40; k++) rises += obj[k + 1] > obj[k] + objtol * obj[k];
            ck_assert_msg(rises > 0, "a divergent step size passed the monotonicity check");
            tu_guarded_free(z);
        }
    free(obj);
    free(objref);
    free(zref);
    free_problem(&p);
    wbcl_context_destroy(ctx);
}
END_TEST

/* FISTA reaches a lower objective than ISTA in the same number of steps, and follows its reference. */
START_TEST(lasso_fista_beats_ista)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 23);
    lasso_problem p = make_problem(&r, 1, 13, 24, 96);
    const size_t T = 25, nz = p.rows * p.m;
    double *oi = malloc((T + 1) * sizeof *oi), *of = malloc((T + 1) * sizeof *of),
           *objref = malloc((T + 1) * sizeof *objref), *zref = calloc(nz, sizeof *zref);
    ck_assert(oi && of && objref && zref);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        wbcl_lasso_opts o = wbcl_lasso_defaults();
        o.steps = T;
        o.lambd = 0.05f;
        float *zi = run_lasso(ctx, &p, &o, oi);
        o.method = WBCL_LASSO_FISTA;
        float *zf = run_lasso(ctx, &p, &o, of);
        ck_assert_msg(of[T] < oi[T], "%s: FISTA %.10g is not below ISTA %.10g after %zu steps", vname(variants[v]),
                      of[T], oi[T], T);
        ck_assert(of[0] == oi[0]);
        /* FISTA against its reference */
        double L = wbcl_ref_spectral_norm_sq(p.d, p.m, p.W64);
        const double t = 1.0 / L, objtol = OBJ_C * sqrt((double)(p.m + p.d)) * U32;
        memset(zref, 0, nz * sizeof *zref);
        wbcl_ref_lasso(p.rows, p.d, p.m, p.X64, p.W64, 0.05, 1, 1, t, T, zref, objref);
        /* the device used its own power-iteration L: the step differs by ~1e-9 relative */
        const double zn = frob(zref, nz) + t * sqrt(L) * frob(p.X64, p.rows * p.d);
        const double zt = LASSO_C * sqrt((double)T * (double)(p.m + p.d)) * U32;
        ck_assert_msg(frob_diff(zf, zref, nz) <= zt * zn, "%s FISTA: |Z - Zref| = %.3g > %.3g", vname(variants[v]),
                      frob_diff(zf, zref, nz), zt * zn);
        for (size_t k = 0; k <= T; k++)
            ck_assert_msg(fabs(of[k] - objref[k]) <= (objtol + zt) * objref[k], "FISTA step %zu: %.10g vs %.10g", k,
                          of[k], objref[k]);
        tu_guarded_free(zi);
        tu_guarded_free(zf);
    }
    free(oi);
    free(of);
    free(objref);
    free(zref);
    free_problem(&p);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------------------ */

START_TEST(ista_bad_input)
{
    wbcl_context *ctx = tu_context(), *other = tu_context();
    float ones[64];
    for (int i = 0; i < 64; i++) ones[i] = 1.0f;
    size_t sx[2] = {3, 4}, sw[2] = {4, 4}, so[2] = {4, 6}, sz[2] = {3, 6}, s3[3] = {1, 4, 4}, sbad[2] = {3, 5},
           sl[3] = {1, 3, 4};
    wbcl_tensor *x = mk(ctx, 2, sx, ones), *W = mk(ctx, 2, sw, ones), *Wo = mk(ctx, 2, so, ones),
                *y = mk(ctx, 2, sx, ones), *z = mk(ctx, 2, sz, ones), *W3 = mk(ctx, 3, s3, ones),
                *yb = mk(ctx, 2, sbad, ones), *xl = mk(ctx, 3, sl, ones), *xo = mk(other, 2, sx, ones),
                *M = mk(ctx, 2, sw, ones);
    const wbcl_threshold R = WBCL_THRESHOLD_RELU;
    tu_assert_status(ctx, wbcl_ista(ctx, NULL, NULL, W, 0.1f, 0.1f, R, y), WBCL_ERROR_INVALID_ARGUMENT, "NULL");
    ck_assert_int_eq(wbcl_ista(NULL, x, NULL, W, 0.1f, 0.1f, R, y), WBCL_ERROR_INVALID_ARGUMENT);
    tu_assert_status(ctx, wbcl_ista(ctx, x, NULL, W3, 0.1f, 0.1f, R, y), WBCL_ERROR_SHAPE, "(1, 4, 4)");
    tu_assert_status(ctx, wbcl_ista(ctx, yb, NULL, W, 0.1f, 0.1f, R, y), WBCL_ERROR_SHAPE, "'x' has shape (3, 5)");
    tu_assert_status(ctx, wbcl_ista(ctx, x, NULL, W, 0.1f, 0.1f, R, yb), WBCL_ERROR_SHAPE, "'y' has shape (3, 5)");
    tu_assert_status(ctx, wbcl_ista(ctx, x, NULL, Wo, 0.1f, 0.1f, R, z), WBCL_ERROR_SHAPE, "not square");
    tu_assert_status(ctx, wbcl_ista(ctx, x, x, Wo, 0.1f, 0.1f, R, z), WBCL_ERROR_SHAPE, "'z' has shape (3, 4)");
    tu_assert_status(ctx, wbcl_ista(ctx, xl, NULL, W, 0.1f, 0.1f, R, y), WBCL_ERROR_SHAPE, "leading dimensions");
    tu_assert_status(ctx, wbcl_ista(ctx, M, NULL, W, 0.1f, 0.1f, R, W), WBCL_ERROR_INVALID_ARGUMENT, "W must not");
    tu_assert_status(ctx, wbcl_ista(ctx, x, NULL, W, 0.0f, 0.1f, R, y), WBCL_ERROR_INVALID_ARGUMENT, "eta");
    tu_assert_status(ctx, wbcl_ista(ctx, x, NULL, W, NAN, 0.1f, R, y), WBCL_ERROR_INVALID_ARGUMENT, "eta");
    tu_assert_status(ctx, wbcl_ista(ctx, x, NULL, W, 0.1f, -1.0f, R, y), WBCL_ERROR_INVALID_ARGUMENT, "lambd");
    tu_assert_status(ctx, wbcl_ista(ctx, x, NULL, W, 0.1f, 0.1f, (wbcl_threshold)7, y), WBCL_ERROR_INVALID_ARGUMENT,
                     "unknown threshold");
    tu_assert_status(ctx, wbcl_ista(ctx, xo, NULL, W, 0.1f, 0.1f, R, y), WBCL_ERROR_CONTEXT_MISMATCH, "");
    tu_assert_status(ctx, wbcl_ista_fold(ctx, Wo, M), WBCL_ERROR_SHAPE, "square");
    tu_assert_status(ctx, wbcl_ista_fold(ctx, W, W), WBCL_ERROR_INVALID_ARGUMENT, "M must not be W");
    tu_assert_status(ctx, wbcl_ista_fold(ctx, W, y), WBCL_ERROR_SHAPE, "");
    tu_assert_status(ctx, wbcl_ista_folded(ctx, x, Wo, 0.1f, 0.1f, R, y), WBCL_ERROR_SHAPE, "square");
    tu_assert_status(ctx, wbcl_ista_folded(ctx, x, M, 0.1f, 0.1f, R, yb), WBCL_ERROR_SHAPE, "");
    tu_assert_status(ctx, wbcl_ista_folded(ctx, W, M, 0.1f, 0.1f, R, M), WBCL_ERROR_INVALID_ARGUMENT, "M must not");
    wbcl_ista_layer *L = (wbcl_ista_layer *)0x1;
    tu_assert_status(ctx, wbcl_ista_layer_create(ctx, Wo, 0.1f, 0.1f, R, WBCL_ISTA_FOLDED, &L), WBCL_ERROR_SHAPE,
                     "square W");
    tu_assert_status(ctx, wbcl_ista_layer_create(ctx, W, 0.1f, 0.1f, R, (wbcl_ista_path)9, &L),
                     WBCL_ERROR_INVALID_ARGUMENT, "unknown path");
    ck_assert_ptr_eq(L, (wbcl_ista_layer *)0x1);
    L = NULL;
    ck_assert_int_eq(wbcl_ista_layer_create(ctx, W, 0.1f, 0.1f, R, WBCL_ISTA_AUTO, &L), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_ista_layer_forward(ctx, L, x, yb), WBCL_ERROR_SHAPE, "'y' has shape (3, 5)");
    tu_assert_status(ctx, wbcl_ista_layer_forward(ctx, NULL, x, y), WBCL_ERROR_INVALID_ARGUMENT, "layer");
    tu_assert_status(other, wbcl_ista_layer_forward(other, L, xo, xo), WBCL_ERROR_CONTEXT_MISMATCH, "another context");
    wbcl_ista_layer_destroy(L);
    /* lasso */
    wbcl_lasso_opts o = wbcl_lasso_defaults();
    o.steps = 3;
    double obj[4] = {-1, -1, -1, -1}, Lc = -1.0;
    tu_assert_status(ctx, wbcl_lasso(ctx, x, Wo, NULL, z, obj), WBCL_ERROR_INVALID_ARGUMENT, "opts");
    tu_assert_status(ctx, wbcl_lasso(ctx, x, Wo, &o, y, obj), WBCL_ERROR_SHAPE, "'Z' has shape (3, 4)");
    tu_assert_status(ctx, wbcl_lasso(ctx, x, W, &o, x, obj), WBCL_ERROR_INVALID_ARGUMENT, "different tensors");
    tu_assert_status(ctx, wbcl_lasso(ctx, x, W3, &o, y, obj), WBCL_ERROR_SHAPE, "(1, 4, 4)");
    o.steps = 0;
    tu_assert_status(ctx, wbcl_lasso(ctx, x, Wo, &o, z, obj), WBCL_ERROR_INVALID_ARGUMENT, "steps");
    o.steps = 3;
    o.method = (wbcl_lasso_method)4;
    tu_assert_status(ctx, wbcl_lasso(ctx, x, Wo, &o, z, obj), WBCL_ERROR_INVALID_ARGUMENT, "unknown method");
    o.method = WBCL_LASSO_FISTA;
    o.lambd = -0.5f;
    tu_assert_status(ctx, wbcl_lasso(ctx, x, Wo, &o, z, obj), WBCL_ERROR_INVALID_ARGUMENT, "lambd");
    o.lambd = 0.1f;
    o.step = INFINITY;
    tu_assert_status(ctx, wbcl_lasso(ctx, x, Wo, &o, z, obj), WBCL_ERROR_INVALID_ARGUMENT, "finite");
    tu_assert_status(ctx, wbcl_lasso(ctx, xo, Wo, &o, z, obj), WBCL_ERROR_CONTEXT_MISMATCH, "");
    tu_assert_status(ctx, wbcl_lasso_lipschitz(ctx, W, NULL), WBCL_ERROR_INVALID_ARGUMENT, "'L' is NULL");
    tu_assert_status(ctx, wbcl_lasso_lipschitz(ctx, W3, &Lc), WBCL_ERROR_SHAPE, "");
    for (int i = 0; i < 4; i++) ck_assert(obj[i] == -1.0);
    ck_assert(Lc == -1.0);
    /* outputs untouched */
    float *yh = rd(ctx, y), *zh = rd(ctx, z), *Mh = rd(ctx, M), *Wh = rd(ctx, W);
    for (int i = 0; i < 12; i++) ck_assert(yh[i] == 1.0f);
    for (int i = 0; i < 18; i++) ck_assert(zh[i] == 1.0f);
    for (int i = 0; i < 16; i++) ck_assert(Mh[i] == 1.0f && Wh[i] == 1.0f);
    tu_guarded_free(yh);
    tu_guarded_free(zh);
    tu_guarded_free(Mh);
    tu_guarded_free(Wh);
    wbcl_tensor *ts[] = {x, W, Wo, y, z, W3, yb, xl, xo, M};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) wbcl_tensor_destroy(ts[i]);
    wbcl_context_destroy(ctx);
    wbcl_context_destroy(other);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ista");
    TCase *tc = tcase_create("ista");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, ista_matches_reference);
    tcase_add_test(tc, ista_crate_reference_and_transpose);
    tcase_add_test(tc, ista_zero_weight);
    tcase_add_test(tc, ista_crate_nonnegative_and_in_place);
    tcase_add_test(tc, lasso_lipschitz);
    tcase_add_test(tc, lasso_ista_monotone_and_reference);
    tcase_add_test(tc, lasso_fista_beats_ista);
    tcase_add_test(tc, ista_bad_input);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
