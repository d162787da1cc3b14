/* Linear layers on the GEMM: wbcl__gemm_linear, Y = act(X Wᵀ + bias), whose packed path puts
 * the bias and the GELU into the GEMM kernel's epilogue and reads X in place
 * (WBCL_GEMM_EPILOGUE, WBCL_GEMM_A_ROWS in cl/gemm.cl), against the double-precision reference,
 * in its three modes (0 fused, 1 epilogue with X packed, 2 unfused: GEMM then a bias/GELU pass)
 * and on CLBlast (unfused); plus the GELU's accuracy and bad input.
 *
 * Tolerances. The pre-activation z = sum_p x_ip w_jp + b_j evaluated in fp32 in any order is
 * within (k + 2) u (sum_p |x_ip||w_jp| + |b_j|) of the exact value (u = 2^-24; k - 1 additions
 * and one product per term, plus the bias addition [Higham 3.1]); we accept twice that,
 * tol_z = 2 (k + 3) u S_j. GELU has |GELU'| <= 1.13, and wbcl_gelu* (cl/common.cl) is within
 * 2.5e-7 max(1, |z|) of GELU in exact arithmetic (measured on a dense grid, gelu_accuracy
 * below, which asserts 3e-7); so after GELU: tol = 1.13 tol_z + 3e-7 max(1, |z|). A missing or
 * doubled bias (|b| ~ 0.5 here), a wrong column of W or a GELU applied twice or not at all
 * exceed these by orders of magnitude. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "testutil.h"

#define GELU_ABS 3e-7 /* GELU approximation error, relative to max(1, |z|) */

static wbcl_tensor *tensor(wbcl_context *ctx, size_t r, size_t c, const float *data)
{
    size_t sh[2] = {r, c};
    wbcl_tensor *t = NULL;
    ck_assert_int_eq(wbcl_tensor_create(ctx, c ? 2 : 1, c ? sh : &r, WBCL_F32, data, &t), WBCL_SUCCESS);
    return t;
}

/* Y (read back) against the double reference act(x wᵀ + b) with the tolerance above; b NULL: no bias. */
static void check_y(wbcl_context *ctx, const wbcl_tensor *Y, const float *x, const float *w, const float *b,
                    size_t m, size_t n, size_t k, int gelu, const char *what)
{
    float *got = tu_guarded_alloc(m * n);
    ck_assert_int_eq(wbcl_tensor_read(ctx, Y, got, m * n), WBCL_SUCCESS);
    ck_assert_msg(tu_canary_ok(got, m * n), "%s: canary overwritten", what);
    const double u = ldexp(1.0, -24);
    double worst = 0.0;
    size_t wi = 0;
    double wz = 0.0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double z = b ? b[j] : 0.0, s = b ? fabs(b[j]) : 0.0;
            for (size_t p = 0; p < k; p++) {
                z += (double)x[i * k + p] * w[j * k + p];
                s += fabs((double)x[i * k + p] * w[j * k + p]);
            }
            double want = z, tol = 2.0 * (double)(k + 3) * u * s + 1e-30;
            if (gelu) {
                wbcl_ref_gelu(1, &z, &want);
                tol = 1.13 * tol + GELU_ABS * fmax(1.0, fabs(z));
            }
            const double g = got[i * n + j], e = isfinite(g) ? fabs(g - want) / tol : INFINITY;
            if (!(e <= worst)) {
                worst = e;
                wi = i * n + j;
                wz = want;
            }
        }
    ck_assert_msg(worst <= 1.0, "%s: element (%zu, %zu) got %.9g want %.9g (error %.3g x tolerance)", what, wi / n,
                  wi % n, (double)got[wi], wz, worst);
    tu_guarded_free(got);
}

/* One case: X (m, k), W (n, k), bias (n) or none, gelu 0/1, all modes given. */
static void run_linear(wbcl_context *ctx, size_t m, size_t n, size_t k, int has_bias, int gelu, int mode,
                       uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    float *x = tu_random_f32(&r, m * k, -1, 1), *w = tu_random_f32(&r, n * k, -1, 1);
    float *b = tu_random_f32(&r, n, -0.5, 0.5);
    for (size_t i = 0; i < m * k; i++) x[i] *= 3.0f; /* pre-activations over GELU's curved range */
    wbcl_tensor *X = tensor(ctx, m, k, x), *W = tensor(ctx, n, k, w), *Bt = tensor(ctx, n, 0, b);
    wbcl_tensor *Y = tensor(ctx, m, n, NULL);
    ck_assert_int_eq(wbcl_tensor_fill(ctx, Y, NAN), WBCL_SUCCESS); /* every element must be written */
    char what[160];
    snprintf(what, sizeof what, "linear m=%zu n=%zu k=%zu bias=%d gelu=%d mode=%d %s", m, n, k, has_bias, gelu,
             mode, wbcl_context_gemm_backend(ctx) == WBCL_GEMM_CLBLAST ? "CLBlast"
                   : wbcl_context_gemm_backend(ctx) == WBCL_GEMM_TILED  ? "tiled"
                                                                         : "packed");
    ck_assert_int_eq(wbcl__gemm_set_linear_mode(ctx, mode), WBCL_SUCCESS);
    wbcl_status st = wbcl__gemm_linear(ctx, X, m, k, W, n, has_bias ? Bt : NULL, gelu, Y);
    ck_assert_msg(st == WBCL_SUCCESS, "%s: %s: %s", what, wbcl_status_name(st), wbcl_context_last_error(ctx));
    check_y(ctx, Y, x, w, has_bias ? b : NULL, m, n, k, gelu, what);
    free(x);
    free(w);
    free(b);
    wbcl_tensor_destroy(X);
    wbcl_tensor_destroy(W);
    wbcl_tensor_destroy(Bt);
    wbcl_tensor_destroy(Y);
}

/* The models' shapes in small: rows 197 (16 full panels of MR = 12 and one of 5 rows) and
 * exact multiples; columns 24 and 48 (narrower than / not a multiple of NR = 32: edge tiles
 * only / a full and an edge tile), 200 (6 full tiles and an 8-column edge), 64; k = 27 (the
 * first convolution's im2col), 192, 1. Every mode meets every case. */
START_TEST(shapes)
{
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_PACKED), WBCL_SUCCESS);
    const size_t sh[][3] = {{197, 200, 27}, {197, 24, 192}, {36, 48, 64}, {24, 64, 192}, {5, 7, 1}, {1, 33, 19}};
    for (int mode = 0; mode < 3; mode++)
        for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
            for (int v = 0; v < 3; v++) /* no bias; bias; bias + GELU */
                run_linear(ctx, sh[i][0], sh[i][1], sh[i][2], v > 0, v == 2, mode, 10 * i + v);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Other register tiles: the epilogue and the in-place A on MR x NR = 5 x 16 and 3 x 8
 * (vector widths 16 and 8, the AVX2/SSE table entries) and 6 x 64 (four float16 vectors
 * per row; n = 150: two full column panels and an edge), each a new program. */
START_TEST(tile_sizes)
{
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_PACKED), WBCL_SUCCESS);
    const int tiles[][2] = {{5, 16}, {3, 8}, {6, 64}};
    for (size_t t = 0; t < 3; t++) {
        ctx->params.gemm_mr = tiles[t][0];
        ctx->params.gemm_nr = tiles[t][1];
        run_linear(ctx, 23, tiles[t][1] == 64 ? 150 : 37, 29, 1, 1, 0, 300 + t);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* Up to WBCL_GEMV_ROWS = 8 rows, mode 0 takes the GEMV (host/ops/gemv.c, cl/gemv.cl) on either
 * backend: its CPU kernel (4 rows of W per item, k in 16-float pieces then a scalar tail, the rows
 * past n clamped) and its GPU kernel (a work-group per row), each checked against the double
 * reference with the tolerance above: m = 1, 2, 3, 8; n = 1, 5 (a partial group of 4), 130;
 * k = 1, 19 (tail only / one piece + tail), 64, 200; bias and GELU on and off. m = 9 is the
 * packed GEMM again. */
START_TEST(gemv_rows)
{
    wbcl_context *ctx = tu_context();
    const size_t sh[][3] = {{1, 130, 200}, {3, 5, 19}, {8, 37, 64}, {2, 1, 1}, {9, 6, 20}};
    for (int vi = 0; vi < 2; vi++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, vi ? WBCL_VARIANT_GPU : WBCL_VARIANT_CPU), WBCL_SUCCESS);
        for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
            for (int v = 0; v < 3; v++) run_linear(ctx, sh[i][0], sh[i][1], sh[i][2], v > 0, v == 2, 0, 500 + 10 * i + v);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* CLBlast backend: the GEMM, then the bias/GELU pass (the fused epilogue is packed-only). */
START_TEST(clblast)
{
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_CLBLAST), WBCL_SUCCESS);
    run_linear(ctx, 37, 41, 43, 1, 1, 0, 400);
    run_linear(ctx, 37, 40, 43, 1, 0, 0, 401);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Tiled backend (the GPU default): bias and GELU in the tiled kernel's store (WBCL_GT_EPI,
 * cl/gemm_tiled.cl) in mode 0, the separate pass in mode 2, both against the double reference
 * on full and edge tiles of both tile sizes (m, n not multiples of 64 or 128; k = 1 and 200);
 * and mode 0 bit for bit equal to mode 2: the epilogue adds the bias to the same float the
 * unfused GEMM stores and applies the same GELU function to it. */
START_TEST(tiled)
{
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU), WBCL_SUCCESS);
    if (wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_TILED) != WBCL_SUCCESS) {
        printf("tiled: the device cannot take the tiled GEMM (%s): not run\n", wbcl_context_last_error(ctx));
        wbcl_context_destroy(ctx);
        return;
    }
    const size_t sh[][3] = {{197, 200, 27}, {130, 257, 200}, {9, 64, 1}};
    for (int mode = 0; mode < 3; mode += 2)
        for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
            for (int v = 0; v < 3; v++) run_linear(ctx, sh[i][0], sh[i][1], sh[i][2], v > 0, v == 2, mode, 700 + 10 * i + v);
    /* fused == unfused, bit for bit, at 300 x 160 x 96 (128 tiles by the shape rule or 64) */
    const size_t m = 300, n = 160, k = 96;
    tu_rng r;
    tu_rng_seed(&r, 77);
    float *x = tu_random_f32(&r, m * k, -3, 3), *w = tu_random_f32(&r, n * k, -1, 1), *b = tu_random_f32(&r, n, -1, 1);
    wbcl_tensor *X = tensor(ctx, m, k, x), *W = tensor(ctx, n, k, w), *Bt = tensor(ctx, n, 0, b);
    wbcl_tensor *Y = tensor(ctx, m, n, NULL);
    float *y[2] = {malloc(m * n * sizeof(float)), malloc(m * n * sizeof(float))};
    ck_assert_int_eq(wbcl_context_set_timing(ctx, 1), WBCL_SUCCESS); /* counts launches */
    for (int g = 0; g < 2; g++)
        for (int mode = 0; mode < 2; mode++) {
            ck_assert_int_eq(wbcl__gemm_set_linear_mode(ctx, mode ? 2 : 0), WBCL_SUCCESS);
            const uint64_t passes = tu_launches(ctx, "wbcl_gemm_bias_act8");
            ck_assert_int_eq(wbcl__gemm_linear(ctx, X, m, k, W, n, Bt, g, Y), WBCL_SUCCESS);
            /* mode 0: no separate pass (the epilogue is in the GEMM); mode 2: one */
            ck_assert_uint_eq(tu_launches(ctx, "wbcl_gemm_bias_act8"), passes + (uint64_t)mode);
            ck_assert_int_eq(wbcl_tensor_read(ctx, Y, y[mode], m * n), WBCL_SUCCESS);
            if (mode)
                ck_assert_msg(memcmp(y[0], y[1], m * n * sizeof(float)) == 0,
                              "tiled linear gelu=%d: the fused epilogue differs from the GEMM + bias/GELU pass", g);
        }
    free(y[0]);
    free(y[1]);
    free(x);
    free(w);
    free(b);
    wbcl_tensor *ts[] = {X, W, Bt, Y};
    for (int i = 0; i < 4; i++) wbcl_tensor_destroy(ts[i]);
    wbcl_context_destroy(ctx);
}
END_TEST

/* The GELU itself on z in [-12, 12] step 2^-10 (24577 points, z exact in float): X = z (k = 1),
 * W = 1, bias 0, so the epilogue sees z exactly. Against double: |got - GELU(z)| <=
 * 3e-7 max(1, |z|) (measured 2.5e-7); beyond |z| = 4 sqrt 2 the erf clamp gives z or 0. Both
 * the vector epilogue (columns 0..31 of a full tile) and the scalar edge path are covered by
 * spreading z over a 32-column full tile and a 1-column edge. */
START_TEST(gelu_accuracy)
{
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_PACKED), WBCL_SUCCESS);
    const size_t npts = 24577, n = 33, m = (npts + n - 1) / n;
    /* X (m*n, 1) holding z; W (1, 1) = 1 would give one column; instead Y (m, n) = X (m, n)
     * I_n (identity W), so each row of X is n points and every column of the tile is used */
    float *x = calloc(m * n, sizeof *x), *w = calloc(n * n, sizeof *w), *b = calloc(n, sizeof *b);
    for (size_t i = 0; i < m * n; i++) x[i] = (float)(-12.0 + ldexp((double)(i < npts ? i : 0), -10));
    for (size_t j = 0; j < n; j++) w[j * n + j] = 1.0f;
    wbcl_tensor *X = tensor(ctx, m, n, x), *W = tensor(ctx, n, n, w), *Bt = tensor(ctx, n, 0, b),
                *Y = tensor(ctx, m, n, NULL);
    for (int mode = 0; mode < 3; mode++) {
        ck_assert_int_eq(wbcl__gemm_set_linear_mode(ctx, mode), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl__gemm_linear(ctx, X, m, n, W, n, Bt, 1, Y), WBCL_SUCCESS);
        float *got = malloc(m * n * sizeof *got);
        ck_assert_int_eq(wbcl_tensor_read(ctx, Y, got, m * n), WBCL_SUCCESS);
        double worst = 0.0;
        size_t wi = 0;
        for (size_t i = 0; i < npts; i++) {
            const double z = x[i];
            double want;
            wbcl_ref_gelu(1, &z, &want);
            const double e = fabs((double)got[i] - want) / fmax(1.0, fabs(z));
            if (!(e <= worst)) {
                worst = e;
                wi = i;
            }
        }
        ck_assert_msg(worst <= GELU_ABS, "mode %d: GELU(%.9g) = %.9g, error %.3g max(1, |z|) > %.1g", mode,
                      (double)x[wi], (double)got[wi], worst, GELU_ABS);
        free(got);
    }
    free(x);
    free(w);
    free(b);
    wbcl_tensor_destroy(X);
    wbcl_tensor_destroy(W);
    wbcl_tensor_destroy(Bt);
    wbcl_tensor_destroy(Y);
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(bad_input)
{
    wbcl_context *ctx = tu_context();
    wbcl_tensor *X = tensor(ctx, 4, 3, NULL), *W = tensor(ctx, 5, 3, NULL), *b = tensor(ctx, 5, 0, NULL),
                *b4 = tensor(ctx, 4, 0, NULL), *Y = tensor(ctx, 4, 5, NULL);
    ck_assert_int_eq(wbcl_tensor_fill(ctx, Y, 7.0f), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl__gemm_linear(ctx, X, 4, 3, W, 5, NULL, 1, Y), WBCL_ERROR_INVALID_ARGUMENT,
                     "GELU needs a bias");
    tu_assert_status(ctx, wbcl__gemm_linear(ctx, X, 4, 3, W, 5, b4, 0, Y), WBCL_ERROR_SHAPE, "bias has 4");
    tu_assert_status(ctx, wbcl__gemm_linear(ctx, X, 5, 3, W, 5, b, 0, Y), WBCL_ERROR_SHAPE, "out of bounds");
    tu_assert_status(ctx, wbcl__gemm_linear(ctx, X, 4, 3, W, 6, NULL, 0, Y), WBCL_ERROR_SHAPE, "out of bounds");
    tu_assert_status(ctx, wbcl__gemm_linear(ctx, X, 0, 3, W, 5, b, 0, Y), WBCL_ERROR_SHAPE, "positive");
    tu_assert_status(ctx, wbcl__gemm_linear(ctx, X, 4, 3, W, 5, b, 0, NULL), WBCL_ERROR_INVALID_ARGUMENT, "NULL");
    tu_assert_status(ctx, wbcl__gemm_linear(ctx, X, 4, 3, W, 3, NULL, 0, X), WBCL_ERROR_INVALID_ARGUMENT,
                     "in-place");
    tu_assert_status(ctx, wbcl__gemm_set_linear_mode(ctx, 3), WBCL_ERROR_INVALID_ARGUMENT, "mode 3");
    float y[20];
    ck_assert_int_eq(wbcl_tensor_read(ctx, Y, y, 20), WBCL_SUCCESS);
    for (int i = 0; i < 20; i++) ck_assert_msg(y[i] == 7.0f, "Y[%d] changed to %g by a refused call", i, y[i]);
    wbcl_tensor *ts[] = {X, W, b, b4, Y};
    for (int i = 0; i < 5; i++) wbcl_tensor_destroy(ts[i]);
    wbcl_context_destroy(ctx);
}
END_TEST

/* A constant weight's packed panels kept between calls (host/core/packed.c): the second call reuses
 * them (the cache's byte count does not grow) and is still right; another view of the same tensor
 * (W untransposed, in wbcl_gemm) or another panel width gets panels of its own; a write through the
 * tensor API drops them (the result then follows the new values: stale panels would give the old
 * product, far outside the tolerance); a new panel width frees the other width's; the limit is obeyed, and lowering it frees panels, the newest
 * first; a tensor the caller made is never kept;
 * destroying the tensor returns the bytes, also after its context is gone (ASan, valgrind). */
static size_t panel_bytes(size_t n, size_t k, size_t nr) { return (n + nr - 1) / nr * nr * k * sizeof(float); }

START_TEST(kept_panels)
{
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_PACKED), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl__gemm_set_linear_mode(ctx, 0), WBCL_SUCCESS);
    const size_t m = 37, n = 40, k = 29, nr = (size_t)ctx->params.gemm_nr; /* m > WBCL_GEMV_ROWS: the GEMM */
    tu_rng r;
    tu_rng_seed(&r, 77);
    float *x = tu_random_f32(&r, m * k, -1, 1), *w = tu_random_f32(&r, n * k, -1, 1);
    float *w2 = tu_random_f32(&r, n * k, -1, 1), *x2 = tu_random_f32(&r, m * n, -1, 1);
    wbcl_tensor *X = tensor(ctx, m, k, x), *W = tensor(ctx, n, k, w), *Y = tensor(ctx, m, n, NULL);
    wbcl_tensor *X2 = tensor(ctx, m, n, x2), *Y2 = tensor(ctx, m, k, NULL);
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), 0);

    /* a caller's tensor: packed per call, nothing kept */
    ck_assert_int_eq(wbcl__gemm_linear(ctx, X, m, k, W, n, NULL, 0, Y), WBCL_SUCCESS);
    check_y(ctx, Y, x, w, NULL, m, n, k, 0, "caller's W");
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), 0);

    wbcl__tensor_constant(W);
    const size_t e1 = panel_bytes(n, k, nr);
    for (int call = 0; call < 2; call++) {
        ck_assert_int_eq(wbcl_tensor_fill(ctx, Y, NAN), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl__gemm_linear(ctx, X, m, k, W, n, NULL, 0, Y), WBCL_SUCCESS);
        check_y(ctx, Y, x, w, NULL, m, n, k, 0, call ? "kept panels, reused" : "kept panels, first call");
        ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), e1);
    }
    /* W as an untransposed B: Y2 (m, k) = X2 (m, n) W (n, k), i.e. x2 times (Wᵀ)ᵀ: a second view */
    float *wt = malloc(n * k * sizeof *wt);
    for (size_t j = 0; j < n; j++)
        for (size_t p = 0; p < k; p++) wt[p * n + j] = w[j * k + p];
    for (int call = 0; call < 2; call++) {
        ck_assert_int_eq(wbcl_tensor_fill(ctx, Y2, NAN), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, X2, W, 0.0f, Y2), WBCL_SUCCESS);
        check_y(ctx, Y2, x2, wt, NULL, m, k, n, 0, "second view of W");
        ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), e1 + panel_bytes(k, n, nr));
    }
    /* another panel width: panels of their own, right results; the other width's panels (both views)
     * are freed, and come back when the width does */
    const int nr0 = ctx->params.gemm_nr;
    ctx->params.gemm_nr = nr0 == 16 ? 8 : 16;
    ck_assert_int_eq(wbcl__gemm_linear(ctx, X, m, k, W, n, NULL, 0, Y), WBCL_SUCCESS);
    check_y(ctx, Y, x, w, NULL, m, n, k, 0, "kept panels, other NR");
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), panel_bytes(n, k, (size_t)ctx->params.gemm_nr));
    ctx->params.gemm_nr = nr0;
    ck_assert_int_eq(wbcl__gemm_linear(ctx, X, m, k, W, n, NULL, 0, Y), WBCL_SUCCESS);
    check_y(ctx, Y, x, w, NULL, m, n, k, 0, "kept panels, NR restored");
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), e1);
    ck_assert_int_eq(wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, X2, W, 0.0f, Y2), WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), e1 + panel_bytes(k, n, nr));

    /* a write drops every view's panels; the next call packs the new values */
    ck_assert_int_eq(wbcl_tensor_write(ctx, W, w2, n * k), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl__gemm_linear(ctx, X, m, k, W, n, NULL, 0, Y), WBCL_SUCCESS);
    check_y(ctx, Y, x, w2, NULL, m, n, k, 0, "after a write");
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), e1); /* this view again; the other went */
    ck_assert_int_eq(wbcl_tensor_fill(ctx, W, 0.0f), WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), 0);
    wbcl_tensor_destroy(W);

    /* the limit: one byte short keeps nothing, exactly enough keeps the panels */
    ck_assert_int_eq(wbcl_context_set_weight_cache(ctx, e1 - 1), WBCL_SUCCESS);
    W = tensor(ctx, n, k, w);
    wbcl__tensor_constant(W);
    ck_assert_int_eq(wbcl__gemm_linear(ctx, X, m, k, W, n, NULL, 0, Y), WBCL_SUCCESS);
    check_y(ctx, Y, x, w, NULL, m, n, k, 0, "over the limit");
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), 0);
    ck_assert_int_eq(wbcl_context_set_weight_cache(ctx, e1), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl__gemm_linear(ctx, X, m, k, W, n, NULL, 0, Y), WBCL_SUCCESS);
    check_y(ctx, Y, x, w, NULL, m, n, k, 0, "at the limit");
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), e1);
    /* lowering the limit frees panels, the newest first, until it holds; both weights stay right */
    ck_assert_int_eq(wbcl_context_set_weight_cache(ctx, SIZE_MAX), WBCL_SUCCESS);
    wbcl_tensor *W2 = tensor(ctx, n, k, w2);
    wbcl__tensor_constant(W2);
    ck_assert_int_eq(wbcl__gemm_linear(ctx, X, m, k, W2, n, NULL, 0, Y), WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), 2 * e1);
    ck_assert_int_eq(wbcl_context_set_weight_cache(ctx, e1), WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), e1);
    ck_assert_ptr_null(W2->packed); /* the newest went */
    ck_assert_ptr_nonnull(W->packed);
    ck_assert_int_eq(wbcl__gemm_linear(ctx, X, m, k, W2, n, NULL, 0, Y), WBCL_SUCCESS);
    check_y(ctx, Y, x, w2, NULL, m, n, k, 0, "after its panels were freed");
    ck_assert_int_eq(wbcl_context_set_weight_cache(ctx, 0), WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), 0);
    ck_assert_ptr_null(W->packed);
    ck_assert_int_eq(wbcl__gemm_linear(ctx, X, m, k, W, n, NULL, 0, Y), WBCL_SUCCESS);
    check_y(ctx, Y, x, w, NULL, m, n, k, 0, "limit 0");
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), 0);
    wbcl_tensor_destroy(W2);
    ck_assert_int_eq(wbcl_context_set_weight_cache(ctx, SIZE_MAX), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl__gemm_linear(ctx, X, m, k, W, n, NULL, 0, Y), WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), e1); /* kept again, to outlive the context */
    ck_assert_int_eq(wbcl_context_set_weight_cache(NULL, 1), WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(NULL), 0);

    wbcl_tensor *ts[] = {X, Y, X2, Y2};
    for (int i = 0; i < 4; i++) wbcl_tensor_destroy(ts[i]);
    wbcl_context_destroy(ctx);
    wbcl_tensor_destroy(W); /* its panels outlived the context: their bookkeeping must too */
    free(x);
    free(w);
    free(w2);
    free(x2);
    free(wt);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gemm_linear");
    TCase *tc = tcase_create("gemm_linear");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, shapes);
    tcase_add_test(tc, tile_sizes);
    tcase_add_test(tc, gemv_rows);
    tcase_add_test(tc, clblast);
    tcase_add_test(tc, tiled);
    tcase_add_test(tc, gelu_accuracy);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, kept_panels);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
