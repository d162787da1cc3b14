/* Basic ops (include/wbcl/ops.h) under both kernel variants against the
 * double-precision references in host/ref.
 *
 * Tolerances (eps32 = 2^-24 ~ 6e-8, the unit roundoff of float32):
 *   relu, scale, add       one correctly rounded operation: exact, or 1 ulp.
 *   axpby                  two products and a sum (maybe fused):
 *                          |err| <= 4 eps32 (|alpha x| + |beta y|).
 *   gelu                   erfc by a Chebyshev fit of fractional error
 *                          < 1.2e-7 (cl/ops.cl), exp within 3 ulp, then two
 *                          products: 1e-5 relative (~80 ulp of slack for the
 *                          argument's own rounding, which erfc amplifies by
 *                          2 z^2 in the tail) + 1e-30 absolute; the erfc
 *                          form keeps this relative bound for x << 0.
 *   softmax                exp within 3 ulp, x - max exact or within half an
 *                          ulp of |x - max| <= 10 here, a blocked sum, one
 *                          division: 1e-5 relative + 1e-9 absolute (for the
 *                          entries that underflow).
 *   layernorm              mean and variance from blocked sums (few ulps),
 *                          (x - mean) loses at most ulp(|x| + |mean|):
 *                          1e-5 relative + 2e-6 absolute for |x| < ~4,
 *                          scaled by |x| for the offset test (see there).
 *   reductions             each output combines <= 64 values per level in a
 *                          sequence (CPU row blocks; GPU 32 per item + a tree
 *                          of 8, or (wbcl_reduce_cols_g_*) <= 64 rows per lane
 *                          in 4 interleaved chains + a tree of <= 8; GPU rows
 *                          kernels: <= 16 per lane, then <= 16-term sums of the
 *                          lane partials, twice), log_64 R levels, or (row kernels) blocks of
 *                          16 vectors with a Kahan-compensated total. Worst
 *                          case ~ 64 * levels * eps32 ~ 1e-5 relative to the
 *                          same reduction of |x|: rtol 1e-5 against that.
 *                          MAX is exact.
 * Every result is read into a canary-guarded host buffer. */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "wbcl/ops.h"
#include "wbcl/ref.h"

#define EPS32 5.960464477539063e-08

static const wbcl_variant variants[2] = {WBCL_VARIANT_CPU, WBCL_VARIANT_GPU};
static const char *vname(wbcl_variant v) { return v == WBCL_VARIANT_CPU ? "cpu" : "gpu"; }

typedef struct { int ndim; size_t s[4]; } shp;
static const shp shapes[] = {
    {1, {1}},       {2, {1, 1}},       {1, {7}},          {2, {3, 5}},       {2, {13, 97}},
    {3, {2, 3, 129}}, {2, {1000, 33}}, {2, {5, 4097}},    {4, {2, 1, 3, 16}}, {2, {4, 64}},
    /* the GPU variant's register-resident row kernels at their widths: 64 lanes x 4 float4 slots
     * (4 rows per work-group, 6 rows: a partial group), 256 lanes x 4 slots (the longest such
     * row; 4097 above takes the streaming kernels) */
    {2, {6, 1024}}, {2, {3, 4096}},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static size_t numel_of(const shp *s)
{
    size_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->s[i];
    return n;
}

static wbcl_tensor *mk(wbcl_context *ctx, int ndim, const size_t *shape, const float *data)
{
    wbcl_tensor *t = NULL;
    wbcl_status st = wbcl_tensor_create(ctx, ndim, shape, WBCL_F32, data, &t);
    ck_assert_msg(st == WBCL_SUCCESS, "tensor_create: %s", wbcl_context_last_error(ctx));
    return t;
}

static wbcl_tensor *mk1(wbcl_context *ctx, size_t n, const float *data) { return mk(ctx, 1, &n, data); }

/* Reads t into a fresh canary-guarded buffer (checks the canary). */
static float *rd(wbcl_context *ctx, const wbcl_tensor *t)
{
    size_t n = wbcl_tensor_numel(t);
    float *p = tu_guarded_alloc(n);
    wbcl_status st = wbcl_tensor_read(ctx, t, p, n);
    ck_assert_msg(st == WBCL_SUCCESS, "tensor_read: %s", wbcl_context_last_error(ctx));
    ck_assert_msg(tu_canary_ok(p, n), "canary overwritten");
    return p;
}

#define OK(ctx, call)                                                                              \
    do {                                                                                           \
        wbcl_status s_ = (call);                                                                   \
        ck_assert_msg(s_ == WBCL_SUCCESS, "%s: %s: %s", #call, wbcl_status_name(s_),               \
                      wbcl_context_last_error(ctx));                                               \
    } while (0)

/* |got - want| <= bound[i] for every i (bound computed by the caller). */
static void assert_bound(const float *got, const double *want, const double *bound, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        ck_assert_msg(isfinite(got[i]) && e <= bound[i], "%s: element %zu got %.9g want %.9g (|err| %.3g > %.3g)",
                      what, i, (double)got[i], want[i], e, bound[i]);
    }
}

/* ------------------------------------------------------------------------- */
START_TEST(elementwise_vs_reference)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 11);
    for (int v = 0; v < 2; v++) {
        OK(ctx, wbcl_context_set_variant(ctx, variants[v]));
        for (size_t si = 0; si < NSHAPES; si++) {
            const shp *s = &shapes[si];
            size_t n = numel_of(s);
            char what[96];
            float *xf = tu_random_f32(&r, n, -6, 6), *yf = tu_random_f32(&r, n, -3, 3);
            double *xd = tu_to_f64(xf, n), *yd = tu_to_f64(yf, n);
            double *want = malloc(n * sizeof *want), *bound = malloc(n * sizeof *bound);
            wbcl_tensor *x = mk(ctx, s->ndim, s->s, xf), *y = mk(ctx, s->ndim, s->s, NULL);

            /* gelu */
            OK(ctx, wbcl_gelu(ctx, x, y));
            float *g = rd(ctx, y);
            wbcl_ref_gelu(n, xd, want);
            snprintf(what, sizeof what, "gelu %s shape %zu", vname(variants[v]), si);
            tu_assert_close(g, want, n, 1e-30, 1e-5, what);
            tu_guarded_free(g);

            /* relu: exact */
            OK(ctx, wbcl_relu(ctx, x, y));
            g = rd(ctx, y);
            for (size_t i = 0; i < n; i++) ck_assert(g[i] == (xf[i] > 0 ? xf[i] : 0.0f));
            tu_guarded_free(g);

            /* scale: one rounding */
            OK(ctx, wbcl_scale(ctx, x, -0.37f, y));
            g = rd(ctx, y);
            for (size_t i = 0; i < n; i++) want[i] = -0.37f * xd[i];
            snprintf(what, sizeof what, "scale %s shape %zu", vname(variants[v]), si);
            tu_assert_close(g, want, n, 0.0, EPS32, what);
            tu_guarded_free(g);

            /* axpby, y read */
            OK(ctx, wbcl_tensor_write(ctx, y, yf, n));
            OK(ctx, wbcl_axpby(ctx, 1.5f, x, -0.75f, y));
            g = rd(ctx, y);
            for (size_t i = 0; i < n; i++) {
                want[i] = 1.5 * xd[i] - 0.75 * yd[i];
                bound[i] = 4 * EPS32 * (fabs(1.5 * xd[i]) + fabs(0.75 * yd[i]));
            }
            snprintf(what, sizeof what, "axpby %s shape %zu", vname(variants[v]), si);
            assert_bound(g, want, bound, n, what);
            tu_guarded_free(g);

            /* add, same shape: one rounding */
            wbcl_tensor *b = mk(ctx, s->ndim, s->s, yf);
            OK(ctx, wbcl_add(ctx, x, b, y));
            g = rd(ctx, y);
            for (size_t i = 0; i < n; i++) want[i] = xd[i] + yd[i];
            snprintf(what, sizeof what, "add %s shape %zu", vname(variants[v]), si);
            tu_assert_close(g, want, n, 0.0, EPS32, what);
            tu_guarded_free(g);

            wbcl_tensor_destroy(b);
            wbcl_tensor_destroy(x);
            wbcl_tensor_destroy(y);
            free(xf); free(yf); free(xd); free(yd); free(want); free(bound);
        }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(elementwise_in_place_and_special)
{
    wbcl_context *ctx = tu_context();
    for (int v = 0; v < 2; v++) {
        OK(ctx, wbcl_context_set_variant(ctx, variants[v]));
        /* gelu at known points: gelu(1) = Phi(1) = 0.8413447460685429 */
        const float xs[] = {0.0f, 1.0f, -1.0f, 2.0f, -5.0f, 10.0f, -10.0f, 1e4f, -1e4f, -0.0f, 3.0f};
        const double ws[] = {0.0, 0.8413447460685429, -0.15865525393145707, 1.9544997361036416,
                             -1.4332578593959731e-06, 10.0, -7.619853024160593e-23, 1e4, 0.0, 0.0,
                             2.99595030590511};
        size_t n = sizeof xs / sizeof xs[0];
        wbcl_tensor *x = mk1(ctx, n, xs);
        OK(ctx, wbcl_gelu(ctx, x, x)); /* in place */
        float *g = rd(ctx, x);
        ck_assert(g[0] == 0.0f);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(isfinite(g[i]) && fabs(g[i] - ws[i]) <= 1e-5 * fabs(ws[i]) + 1e-30,
                          "gelu(%g) = %.9g, want %.17g (%s)", (double)xs[i], (double)g[i], ws[i], vname(variants[v]));
        tu_guarded_free(g);

        /* relu, scale, axpby in place */
        OK(ctx, wbcl_tensor_write(ctx, x, xs, n));
        OK(ctx, wbcl_relu(ctx, x, x));
        g = rd(ctx, x);
        for (size_t i = 0; i < n; i++) ck_assert(g[i] == (xs[i] > 0 ? xs[i] : 0.0f));
        tu_guarded_free(g);
        OK(ctx, wbcl_tensor_write(ctx, x, xs, n));
        OK(ctx, wbcl_scale(ctx, x, 2.0f, x));
        OK(ctx, wbcl_axpby(ctx, 0.5f, x, 0.25f, x)); /* x <- 0.5 * 2 xs + 0.25 * 2 xs = 1.5 xs */
        g = rd(ctx, x);
        for (size_t i = 0; i < n; i++) ck_assert(g[i] == 1.5f * xs[i]);
        tu_guarded_free(g);

        /* axpby with beta = 0 does not read y (NaN there does not leak) */
        float nans[11];
        for (size_t i = 0; i < n; i++) nans[i] = NAN;
        wbcl_tensor *y = mk1(ctx, n, nans);
        OK(ctx, wbcl_tensor_write(ctx, x, xs, n));
        OK(ctx, wbcl_axpby(ctx, 3.0f, x, 0.0f, y));
        g = rd(ctx, y);
        for (size_t i = 0; i < n; i++) ck_assert(g[i] == 3.0f * xs[i]);
        tu_guarded_free(g);

        /* relu propagates NaN */
        OK(ctx, wbcl_tensor_write(ctx, y, nans, n));
        OK(ctx, wbcl_relu(ctx, y, y));
        g = rd(ctx, y);
        ck_assert(isnan(g[0]));
        tu_guarded_free(g);
        wbcl_tensor_destroy(x);
        wbcl_tensor_destroy(y);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* add with b broadcast over a's leading dimensions */
static void check_add(wbcl_context *ctx, tu_rng *r, int an, const size_t *as, int bn, const size_t *bs, int inplace,
                      const char *what)
{
    wbcl_tensor *a = NULL, *b = NULL, *y = NULL;
    size_t na = 1, nb = 1;
    for (int i = 0; i < an; i++) na *= as[i];
    for (int i = 0; i < bn; i++) nb *= bs[i];
    float *af = tu_random_f32(r, na, -2, 2), *bf = tu_random_f32(r, nb, -2, 2);
    a = mk(ctx, an, as, af);
    b = mk(ctx, bn, bs, bf);
    y = inplace ? a : mk(ctx, an, as, NULL);
    OK(ctx, wbcl_add(ctx, a, b, y));
    float *g = rd(ctx, y);
    double *want = malloc(na * sizeof *want);
    for (size_t i = 0; i < na; i++) want[i] = (double)af[i] + (double)bf[i % nb];
    tu_assert_close(g, want, na, 0.0, EPS32, what);
    tu_guarded_free(g);
    free(want); free(af); free(bf);
    if (!inplace) wbcl_tensor_destroy(y);
    wbcl_tensor_destroy(a);
    wbcl_tensor_destroy(b);
}

START_TEST(add_broadcasting)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 5);
    for (int v = 0; v < 2; v++) {
        OK(ctx, wbcl_context_set_variant(ctx, variants[v]));
        size_t a3[3] = {2, 3, 129}, b1[1] = {129}, b2[2] = {3, 129}, b11[2] = {1, 129};
        size_t a2[2] = {1000, 33}, c1[1] = {33}, a31[2] = {3, 1}, one[1] = {1}, a7[2] = {7, 5}, b5[1] = {5};
        size_t a4[4] = {2, 2, 3, 4}, b4[3] = {1, 3, 4}, a37[2] = {37, 1024}, b1024[1] = {1024};
        for (int ip = 0; ip < 2; ip++) {
            check_add(ctx, &r, 3, a3, 1, b1, ip, "(2,3,129) + (129)");
            check_add(ctx, &r, 3, a3, 2, b2, ip, "(2,3,129) + (3,129)");
            check_add(ctx, &r, 3, a3, 2, b11, ip, "(2,3,129) + (1,129)");
            check_add(ctx, &r, 2, a2, 1, c1, ip, "(1000,33) + (33)");
            check_add(ctx, &r, 2, a31, 1, one, ip, "(3,1) + (1)");
            check_add(ctx, &r, 2, a7, 1, b5, ip, "(7,5) + (5)");
            check_add(ctx, &r, 4, a4, 3, b4, ip, "(2,2,3,4) + (1,3,4)");
            check_add(ctx, &r, 2, a37, 1, b1024, ip, "(37,1024) + (1024)");
            check_add(ctx, &r, 3, a3, 3, a3, ip, "(2,3,129) + (2,3,129)");
        }
        /* y == b when b has a's shape, and a == b */
        float xs[5] = {1, 2, 3, 4, 5}, ys[5] = {10, 20, 30, 40, 50};
        wbcl_tensor *a = mk1(ctx, 5, xs), *b = mk1(ctx, 5, ys);
        OK(ctx, wbcl_add(ctx, a, b, b));
        float *g = rd(ctx, b);
        for (int i = 0; i < 5; i++) ck_assert(g[i] == xs[i] + ys[i]);
        tu_guarded_free(g);
        OK(ctx, wbcl_add(ctx, a, a, a));
        g = rd(ctx, a);
        for (int i = 0; i < 5; i++) ck_assert(g[i] == 2 * xs[i]);
        tu_guarded_free(g);
        wbcl_tensor_destroy(a);
        wbcl_tensor_destroy(b);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------------------- */
static void run_layernorm(wbcl_context *ctx, tu_rng *r, const shp *s, int affine, double offset, double atol,
                          int inplace, const char *what)
{
    size_t n = numel_of(s), d = s->s[s->ndim - 1], rows = n / d;
    float *xf = tu_random_f32(r, n, offset - 1.5, offset + 1.5);
    float *gf = tu_random_f32(r, d, 0.5, 1.5), *bf = tu_random_f32(r, d, -1, 1);
    double *xd = tu_to_f64(xf, n), *gd = tu_to_f64(gf, d), *bd = tu_to_f64(bf, d);
    double *want = malloc(n * sizeof *want);
    wbcl_tensor *x = mk(ctx, s->ndim, s->s, xf), *y = inplace ? x : mk(ctx, s->ndim, s->s, NULL);
    wbcl_tensor *gt = mk1(ctx, d, gf), *bt = mk1(ctx, d, bf);
    OK(ctx, wbcl_layernorm(ctx, x, affine ? gt : NULL, affine ? bt : NULL, 1e-5f, y));
    float *g = rd(ctx, y);
    wbcl_ref_layernorm(rows, d, xd, affine ? gd : NULL, affine ? bd : NULL, (double)1e-5f, want);
    tu_assert_close(g, want, n, atol, 1e-5, what);
    tu_guarded_free(g);
    if (!inplace) wbcl_tensor_destroy(y);
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(gt);
    wbcl_tensor_destroy(bt);
    free(xf); free(gf); free(bf); free(xd); free(gd); free(bd); free(want);
}

START_TEST(layernorm_vs_reference)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 21);
    char what[96];
    for (int v = 0; v < 2; v++) {
        OK(ctx, wbcl_context_set_variant(ctx, variants[v]));
        for (size_t si = 0; si < NSHAPES; si++) {
            for (int affine = 0; affine < 2; affine++) {
                snprintf(what, sizeof what, "layernorm %s shape %zu affine %d", vname(variants[v]), si, affine);
                run_layernorm(ctx, &r, &shapes[si], affine, 0.0, 2e-6, 0, what);
            }
        }
        shp s = {3, {2, 3, 129}};
        snprintf(what, sizeof what, "layernorm %s in place", vname(variants[v]));
        run_layernorm(ctx, &r, &s, 1, 0.0, 2e-6, 1, what);
        /* rows offset by 1000 (std 0.87): the mean itself is only known to
         * ulp(1000)/2 = 3e-5 in float32, so outputs carry ~ 2 ulp(1000) * rstd
         * * |gamma| <= 2e-4 absolute error. E[x^2] - E[x]^2 would lose the
         * variance entirely (eps32 * 1e6 ~ 0.06 of 0.75) and miss this by far. */
        shp s2 = {2, {9, 301}};
        snprintf(what, sizeof what, "layernorm %s offset 1000", vname(variants[v]));
        run_layernorm(ctx, &r, &s2, 1, 1000.0, 2e-4, 0, what);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(layernorm_constant_rows_give_beta)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 3);
    const size_t dims[3] = {7, 97, 4097};
    const float consts[3] = {0.1f, -3.7f, 1234.567f};
    for (int v = 0; v < 2; v++) {
        OK(ctx, wbcl_context_set_variant(ctx, variants[v]));
        for (int k = 0; k < 3; k++) {
            size_t d = dims[k], shape[2] = {3, d};
            float *xf = malloc(3 * d * sizeof *xf);
            for (size_t i = 0; i < 3 * d; i++) xf[i] = consts[i / d];
            float *gf = tu_random_f32(&r, d, 0.5, 2), *bf = tu_random_f32(&r, d, -1, 1);
            wbcl_tensor *x = mk(ctx, 2, shape, xf), *y = mk(ctx, 2, shape, NULL);
            wbcl_tensor *gt = mk1(ctx, d, gf), *bt = mk1(ctx, d, bf);
            OK(ctx, wbcl_layernorm(ctx, x, gt, bt, 1e-5f, y));
            float *g = rd(ctx, y);
            /* var = 0: (x - mean) must be exactly 0 and the output exactly beta */
            for (size_t i = 0; i < 3 * d; i++)
                ck_assert_msg(g[i] == bf[i % d], "%s d=%zu: y[%zu] = %.9g, beta %.9g", vname(variants[v]), d, i,
                              (double)g[i], (double)bf[i % d]);
            tu_guarded_free(g);
            OK(ctx, wbcl_layernorm(ctx, x, NULL, NULL, 1e-5f, y));
            g = rd(ctx, y);
            for (size_t i = 0; i < 3 * d; i++) ck_assert(g[i] == 0.0f);
            tu_guarded_free(g);
            wbcl_tensor_destroy(x); wbcl_tensor_destroy(y); wbcl_tensor_destroy(gt); wbcl_tensor_destroy(bt);
            free(xf); free(gf); free(bf);
        }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------------------- */
START_TEST(softmax_vs_reference)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 31);
    char what[96];
    for (int v = 0; v < 2; v++) {
        OK(ctx, wbcl_context_set_variant(ctx, variants[v]));
        for (size_t si = 0; si < NSHAPES; si++) {
            const shp *s = &shapes[si];
            size_t n = numel_of(s), d = s->s[s->ndim - 1];
            for (int inplace = 0; inplace < 2; inplace++) {
                float *xf = tu_random_f32(&r, n, -5, 5);
                double *xd = tu_to_f64(xf, n), *want = malloc(n * sizeof *want);
                wbcl_tensor *x = mk(ctx, s->ndim, s->s, xf), *y = inplace ? x : mk(ctx, s->ndim, s->s, NULL);
                OK(ctx, wbcl_softmax(ctx, x, y));
                float *g = rd(ctx, y);
                wbcl_ref_softmax(n / d, d, xd, want);
                snprintf(what, sizeof what, "softmax %s shape %zu in place %d", vname(variants[v]), si, inplace);
                tu_assert_close(g, want, n, 1e-9, 1e-5, what);
                tu_guarded_free(g);
                if (!inplace) wbcl_tensor_destroy(y);
                wbcl_tensor_destroy(x);
                free(xf); free(xd); free(want);
            }
        }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(softmax_extreme_rows)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 41);
    for (int v = 0; v < 2; v++) {
        OK(ctx, wbcl_context_set_variant(ctx, variants[v]));
        for (int k = 0; k < 3; k++) {
            const size_t d = k == 0 ? 5 : k == 1 ? 37 : 300, rows = 7;
            float *xf = tu_random_f32(&r, rows * d, -4, 4);
            for (size_t i = 0; i < d; i++) {
                xf[0 * d + i] = 2.5f;                                                  /* all equal          */
                xf[1 * d + i] = (i % 2 ? 1e4f : -1e4f) - (float)(i % 3);               /* logits +-1e4       */
                xf[2 * d + i] = i % 3 == 1 ? -INFINITY : xf[2 * d + i];                /* some -inf          */
                xf[3 * d + i] = i == d / 2 ? 0.5f : -INFINITY;                         /* one finite entry   */
                xf[4 * d + i] = i % 2 ? 1e30f : -1e30f;                                /* huge               */
                xf[5 * d + i] = (float)i * 1e-3f - 3e4f;                               /* large negative     */
                xf[6 * d + i] = i == 0 ? 88.0f : -88.0f;                               /* exp(x) would overflow */
            }
            double *xd = tu_to_f64(xf, rows * d), *want = malloc(rows * d * sizeof *want);
            size_t shape[2] = {rows, d};
            wbcl_tensor *x = mk(ctx, 2, shape, xf), *y = mk(ctx, 2, shape, NULL);
            OK(ctx, wbcl_softmax(ctx, x, y));
            float *g = rd(ctx, y);
            wbcl_ref_softmax(rows, d, xd, want);
            char what[64];
            snprintf(what, sizeof what, "softmax extremes %s d=%zu", vname(variants[v]), d);
            tu_assert_close(g, want, rows * d, 1e-9, 1e-5, what);
            for (size_t i = 0; i < d; i++) ck_assert(fabs(g[i] - 1.0 / (double)d) <= 1e-6 / (double)d);
            ck_assert(g[3 * d + d / 2] == 1.0f);
            for (size_t rr = 0; rr < rows; rr++) {
                double sum = 0;
                for (size_t i = 0; i < d; i++) sum += g[rr * d + i];
                ck_assert_msg(fabs(sum - 1.0) < 1e-5, "row %zu sums to %.9g", rr, sum);
            }
            tu_guarded_free(g);
            wbcl_tensor_destroy(x); wbcl_tensor_destroy(y);
            free(xf); free(xd); free(want);
        }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* reductions: got vs want within rtol times the same reduction of |x|
 * (well-conditioned bound: independent of cancellation in the data) */
static void check_reduction(wbcl_context *ctx, tu_rng *r, int by_rows, int op, int ndim, const size_t *shape,
                            double lo, double hi, double rtol, const char *what)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    size_t C = shape[ndim - 1], R = n / C, m = by_rows ? R : C;
    float *xf = tu_random_f32(r, n, lo, hi);
    double *xd = tu_to_f64(xf, n), *want = malloc(m * sizeof *want), *absw = malloc(m * sizeof *absw);
    double *bound = malloc(m * sizeof *bound);
    (by_rows ? wbcl_ref_reduce_rows : wbcl_ref_reduce_cols)(op, R, C, xd, want);
    for (size_t i = 0; i < n; i++) xd[i] = fabs(xd[i]);
    (by_rows ? wbcl_ref_reduce_rows : wbcl_ref_reduce_cols)(op, R, C, xd, absw);
    for (size_t i = 0; i < m; i++) bound[i] = op == WBCL_REDUCE_MAX ? 0.0 : rtol * absw[i] + 1e-30;
    wbcl_tensor *x = mk(ctx, ndim, shape, xf), *y = mk1(ctx, m, NULL);
    OK(ctx, (by_rows ? wbcl_reduce_rows : wbcl_reduce_cols)(ctx, (wbcl_reduce_op)op, x, y));
    float *g = rd(ctx, y);
    assert_bound(g, want, bound, m, what);
    tu_guarded_free(g);
    wbcl_tensor_destroy(x); wbcl_tensor_destroy(y);
    free(xf); free(xd); free(want); free(absw); free(bound);
}

static const char *opn[4] = {"SUM", "MEAN", "MAX", "SUMSQ"};

START_TEST(reductions_vs_reference)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 51);
    char what[128];
    for (int v = 0; v < 2; v++) {
        OK(ctx, wbcl_context_set_variant(ctx, variants[v]));
        for (size_t si = 0; si < NSHAPES; si++)
            for (int by_rows = 0; by_rows < 2; by_rows++)
                for (int op = 0; op < 4; op++) {
                    snprintf(what, sizeof what, "reduce_%s %s %s shape %zu", by_rows ? "rows" : "cols", opn[op],
                             vname(variants[v]), si);
                    check_reduction(ctx, &r, by_rows, op, shapes[si].ndim, shapes[si].s, -1, 1, 1e-5, what);
                }
        /* more rows than one level of partials combines, for both shapes and
         * both CPU column kernels (64-column chunks below 128 columns, row
         * segments from 128 on) */
        size_t s1[2] = {5000, 70}, s2[2] = {70, 5000}, s3[2] = {5000, 300};
        for (int op = 0; op < 4; op++) {
            snprintf(what, sizeof what, "reduce_cols %s %s (5000,70)", opn[op], vname(variants[v]));
            check_reduction(ctx, &r, 0, op, 2, s1, -1, 1, 1e-5, what);
            snprintf(what, sizeof what, "reduce_cols %s %s (5000,300)", opn[op], vname(variants[v]));
            check_reduction(ctx, &r, 0, op, 2, s3, -1, 1, 1e-5, what);
            snprintf(what, sizeof what, "reduce_rows %s %s (70,5000)", opn[op], vname(variants[v]));
            check_reduction(ctx, &r, 1, op, 2, s2, -1, 1, 1e-5, what);
        }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* Long reductions of positive data (condition number 1): with partials the
 * relative error stays ~ sqrt(64 * levels) eps32 < 1e-6 typically (worst
 * case ~1e-5); a plain running float sum of R = 200000 values drifts by
 * ~ eps32 * sqrt(R) ~ 3e-5. rtol 3e-6 separates the two; the test checks
 * that a running sum would indeed fail it. */
START_TEST(long_reductions)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 61);
    const double rtol = 3e-6;
    const size_t R = 200000;
    /* the yardstick: the running sum misses rtol on this data */
    {
        tu_rng r2 = r;
        float *xf = tu_random_f32(&r2, R * 3, 0, 1);
        float run = 0.0f;
        double exact = 0.0;
        for (size_t i = 0; i < R; i++) { run += xf[i * 3]; exact += xf[i * 3]; }
        ck_assert_msg(fabs(run - exact) > rtol * exact, "running sum error %.3g does not exceed rtol",
                      fabs(run - exact) / exact);
        free(xf);
    }
    char what[128];
    size_t cols_shape[2] = {R, 3}, rows_shape[2] = {3, R};
    for (int v = 0; v < 2; v++) {
        OK(ctx, wbcl_context_set_variant(ctx, variants[v]));
        for (int op = 0; op < 4; op++) {
            tu_rng r3 = r;
            snprintf(what, sizeof what, "reduce_cols %s %s (200000,3)", opn[op], vname(variants[v]));
            check_reduction(ctx, &r3, 0, op, 2, cols_shape, 0, 1, rtol, what);
            snprintf(what, sizeof what, "reduce_rows %s %s (3,200000)", opn[op], vname(variants[v]));
            check_reduction(ctx, &r3, 1, op, 2, rows_shape, 0, 1, rtol, what);
        }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Bad input: status, message, output untouched. */
static void assert_untouched(wbcl_context *ctx, wbcl_tensor *t, float value)
{
    float *g = rd(ctx, t);
    size_t n = wbcl_tensor_numel(t);
    for (size_t i = 0; i < n; i++) ck_assert_msg(g[i] == value, "output changed at %zu after a failed call", i);
    tu_guarded_free(g);
}

START_TEST(bad_input)
{
    wbcl_context *ctx = tu_context(), *other = tu_context();
    size_t s35[2] = {3, 5}, s53[2] = {5, 3}, s5[1] = {5}, s4[1] = {4}, s15[2] = {1, 5};
    wbcl_tensor *x = mk(ctx, 2, s35, NULL), *y = mk(ctx, 2, s35, NULL), *yt = mk(ctx, 2, s53, NULL);
    wbcl_tensor *v5 = mk(ctx, 1, s5, NULL), *v4 = mk(ctx, 1, s4, NULL), *w = mk(ctx, 2, s15, NULL);
    wbcl_tensor *xo = mk(other, 2, s35, NULL);
    const float S = 7.25f;
    OK(ctx, wbcl_tensor_fill(ctx, y, S));
    OK(ctx, wbcl_tensor_fill(ctx, yt, S));
    OK(ctx, wbcl_tensor_fill(ctx, v4, S));
    OK(ctx, wbcl_tensor_fill(ctx, v5, S));
    for (int v = 0; v < 2; v++) {
        OK(ctx, wbcl_context_set_variant(ctx, variants[v]));
        /* NULL context */
        ck_assert_int_eq(wbcl_gelu(NULL, x, y), WBCL_ERROR_INVALID_ARGUMENT);
        ck_assert_int_eq(wbcl_relu(NULL, x, y), WBCL_ERROR_INVALID_ARGUMENT);
        ck_assert_int_eq(wbcl_scale(NULL, x, 1, y), WBCL_ERROR_INVALID_ARGUMENT);
        ck_assert_int_eq(wbcl_axpby(NULL, 1, x, 1, y), WBCL_ERROR_INVALID_ARGUMENT);
        ck_assert_int_eq(wbcl_add(NULL, x, x, y), WBCL_ERROR_INVALID_ARGUMENT);
        ck_assert_int_eq(wbcl_softmax(NULL, x, y), WBCL_ERROR_INVALID_ARGUMENT);
        ck_assert_int_eq(wbcl_layernorm(NULL, x, NULL, NULL, 1e-5f, y), WBCL_ERROR_INVALID_ARGUMENT);
        ck_assert_int_eq(wbcl_reduce_rows(NULL, WBCL_REDUCE_SUM, x, y), WBCL_ERROR_INVALID_ARGUMENT);
        ck_assert_int_eq(wbcl_reduce_cols(NULL, WBCL_REDUCE_SUM, x, y), WBCL_ERROR_INVALID_ARGUMENT);
        /* NULL tensors */
        tu_assert_status(ctx, wbcl_gelu(ctx, NULL, y), WBCL_ERROR_INVALID_ARGUMENT, "'x' is NULL");
        tu_assert_status(ctx, wbcl_relu(ctx, x, NULL), WBCL_ERROR_INVALID_ARGUMENT, "'y' is NULL");
        tu_assert_status(ctx, wbcl_scale(ctx, NULL, 2, y), WBCL_ERROR_INVALID_ARGUMENT, "wbcl_scale");
        tu_assert_status(ctx, wbcl_axpby(ctx, 1, x, 1, NULL), WBCL_ERROR_INVALID_ARGUMENT, "wbcl_axpby");
        tu_assert_status(ctx, wbcl_add(ctx, x, NULL, y), WBCL_ERROR_INVALID_ARGUMENT, "'b' is NULL");
        tu_assert_status(ctx, wbcl_softmax(ctx, NULL, y), WBCL_ERROR_INVALID_ARGUMENT, "wbcl_softmax");
        tu_assert_status(ctx, wbcl_layernorm(ctx, x, NULL, NULL, 1e-5f, NULL), WBCL_ERROR_INVALID_ARGUMENT,
                         "wbcl_layernorm");
        tu_assert_status(ctx, wbcl_reduce_rows(ctx, WBCL_REDUCE_SUM, NULL, v5), WBCL_ERROR_INVALID_ARGUMENT,
                         "'x' is NULL");
        tu_assert_status(ctx, wbcl_reduce_cols(ctx, WBCL_REDUCE_SUM, x, NULL), WBCL_ERROR_INVALID_ARGUMENT,
                         "'y' is NULL");
        /* tensors of another context */
        tu_assert_status(ctx, wbcl_gelu(ctx, xo, y), WBCL_ERROR_CONTEXT_MISMATCH, "another context");
        tu_assert_status(ctx, wbcl_add(ctx, x, xo, y), WBCL_ERROR_CONTEXT_MISMATCH, "another context");
        tu_assert_status(ctx, wbcl_layernorm(ctx, x, NULL, NULL, 1e-5f, xo), WBCL_ERROR_CONTEXT_MISMATCH,
                         "another context");
        tu_assert_status(ctx, wbcl_reduce_cols(ctx, WBCL_REDUCE_MAX, xo, v5), WBCL_ERROR_CONTEXT_MISMATCH,
                         "another context");
        /* shape mismatches name both shapes */
        tu_assert_status(ctx, wbcl_gelu(ctx, x, yt), WBCL_ERROR_SHAPE, "(3, 5)");
        tu_assert_status(ctx, wbcl_relu(ctx, x, yt), WBCL_ERROR_SHAPE, "(5, 3)");
        tu_assert_status(ctx, wbcl_scale(ctx, x, 2, yt), WBCL_ERROR_SHAPE, "(5, 3)");
        tu_assert_status(ctx, wbcl_axpby(ctx, 1, x, 2, yt), WBCL_ERROR_SHAPE, "(5, 3)");
        tu_assert_status(ctx, wbcl_softmax(ctx, x, yt), WBCL_ERROR_SHAPE, "(5, 3)");
        tu_assert_status(ctx, wbcl_layernorm(ctx, x, NULL, NULL, 1e-5f, yt), WBCL_ERROR_SHAPE, "(5, 3)");
        tu_assert_status(ctx, wbcl_add(ctx, x, v4, y), WBCL_ERROR_SHAPE, "(4)");
        tu_assert_status(ctx, wbcl_add(ctx, x, yt, y), WBCL_ERROR_SHAPE, "(5, 3)");
        tu_assert_status(ctx, wbcl_add(ctx, x, v5, yt), WBCL_ERROR_SHAPE, "(5, 3)");
        /* broadcast b cannot be the output */
        tu_assert_status(ctx, wbcl_add(ctx, x, v5, v5), WBCL_ERROR_INVALID_ARGUMENT, "broadcast");
        /* gamma / beta of the wrong length */
        tu_assert_status(ctx, wbcl_layernorm(ctx, x, v4, NULL, 1e-5f, y), WBCL_ERROR_SHAPE, "gamma");
        ck_assert_ptr_nonnull(strstr(wbcl_context_last_error(ctx), "is 5"));
        tu_assert_status(ctx, wbcl_layernorm(ctx, x, v5, yt, 1e-5f, y), WBCL_ERROR_SHAPE, "beta");
        /* eps */
        const float bad_eps[4] = {0.0f, -1e-5f, NAN, INFINITY};
        for (int i = 0; i < 4; i++)
            tu_assert_status(ctx, wbcl_layernorm(ctx, x, v5, v5, bad_eps[i], y), WBCL_ERROR_INVALID_ARGUMENT, "eps");
        /* reductions: output count, op, aliasing */
        tu_assert_status(ctx, wbcl_reduce_rows(ctx, WBCL_REDUCE_SUM, x, v5), WBCL_ERROR_SHAPE, "needs 3 elements");
        tu_assert_status(ctx, wbcl_reduce_cols(ctx, WBCL_REDUCE_MEAN, x, v4), WBCL_ERROR_SHAPE, "needs 5 elements");
        tu_assert_status(ctx, wbcl_reduce_cols(ctx, (wbcl_reduce_op)7, x, v5), WBCL_ERROR_INVALID_ARGUMENT,
                         "reduce op 7");
        tu_assert_status(ctx, wbcl_reduce_rows(ctx, (wbcl_reduce_op)-1, x, v5), WBCL_ERROR_INVALID_ARGUMENT,
                         "reduce op");
        tu_assert_status(ctx, wbcl_reduce_cols(ctx, WBCL_REDUCE_SUM, w, w), WBCL_ERROR_INVALID_ARGUMENT, "alias");
        /* every output above is unchanged */
        assert_untouched(ctx, y, S);
        assert_untouched(ctx, yt, S);
        assert_untouched(ctx, v4, S);
        assert_untouched(ctx, v5, S);
    }
    wbcl_tensor_destroy(x); wbcl_tensor_destroy(y); wbcl_tensor_destroy(yt); wbcl_tensor_destroy(v5);
    wbcl_tensor_destroy(v4); wbcl_tensor_destroy(w); wbcl_tensor_destroy(xo);
    wbcl_context_destroy(other);
    wbcl_context_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, elementwise_vs_reference);
    tcase_add_test(tc, elementwise_in_place_and_special);
    tcase_add_test(tc, add_broadcasting);
    tcase_add_test(tc, layernorm_vs_reference);
    tcase_add_test(tc, layernorm_constant_rows_give_beta);
    tcase_add_test(tc, softmax_vs_reference);
    tcase_add_test(tc, softmax_extreme_rows);
    tcase_add_test(tc, reductions_vs_reference);
    tcase_add_test(tc, long_reductions);
    tcase_add_test(tc, bad_input);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
