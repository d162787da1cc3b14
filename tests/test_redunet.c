/* Vector ReduNet (include/wbcl/redunet.h): the double reference against the
 * golden values of SPEC.md §4.3, both device implementations (fused, GEMM; each
 * in the CPU- and GPU-shaped kernel variants) against the golden values and the
 * reference, the properties of the book's Example 5.1, model files, bad input. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "wbcl/io.h"
#include "wbcl/redunet.h"

static char tmpdir[256];

static const wbcl_redunet_impl impls[2] = {WBCL_REDUNET_IMPL_FUSED, WBCL_REDUNET_IMPL_GEMM};
static const char *impl_name(wbcl_redunet_impl i) { return i == WBCL_REDUNET_IMPL_FUSED ? "fused" : "gemm"; }
static const wbcl_variant variants[2] = {WBCL_VARIANT_CPU, WBCL_VARIANT_GPU};

/* ---- golden data ---------------------------------------------------------------------------- */

static cJSON *golden(void)
{
    FILE *f = fopen(WBCL_GOLDEN_DIR "/redunet.json", "rb");
    ck_assert_msg(f != NULL, "cannot open %s", WBCL_GOLDEN_DIR "/redunet.json");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    ck_assert_msg(j != NULL, "golden/redunet.json does not parse");
    return j;
}

/* Flattens a nested numeric array into out (returns the count). */
static size_t flatten(const cJSON *a, double *out, size_t cap)
{
    if (cJSON_IsNumber(a)) {
        ck_assert_uint_ge(cap, 1);
        out[0] = a->valuedouble;
        return 1;
    }
    ck_assert_msg(cJSON_IsArray(a), "golden: expected an array");
    size_t n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) n += flatten(e, out + n, cap - n);
    return n;
}

static size_t field(const cJSON *obj, const char *key, double *out, size_t cap)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);
    ck_assert_msg(a != NULL, "golden: missing '%s'", key);
    return flatten(a, out, cap);
}

static double max_abs(const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* Normwise-relative comparison of a float result with a double one:
 * |got - want| <= rtol * max|want| for every element. */
static void assert_normwise(const float *got, const double *want, size_t n, double rtol, const char *what)
{
    tu_assert_close(got, want, n, rtol * max_abs(want, n), 0.0, what);
}

static void assert_normwise_d(const double *got, const double *want, size_t n, double rtol, const char *what)
{
    double scale = max_abs(want, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= rtol * scale, "%s[%zu]: got %.15g want %.15g", what, i, got[i],
                      want[i]);
}

/* ---- small host helpers ------------------------------------------------------------------------- */

static wbcl_tensor *upload(wbcl_context *ctx, size_t m, size_t d, const float *x)
{
    size_t s[2] = {m, d};
    wbcl_tensor *t = NULL;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, s, WBCL_F32, x, &t), WBCL_SUCCESS);
    return t;
}

static float *download(wbcl_context *ctx, const wbcl_tensor *t)
{
    size_t n = wbcl_tensor_numel(t);
    float *p = tu_guarded_alloc(n);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t, p, n), WBCL_SUCCESS);
    ck_assert(tu_canary_ok(p, n));
    return p;
}

static wbcl_redunet_params params(int layers, float lambda, wbcl_redunet_impl impl)
{
    wbcl_redunet_params p = wbcl_redunet_default_params();
    p.layers = layers;
    p.lambda = lambda;
    p.impl = impl;
    return p;
}

static wbcl_redunet *fit(wbcl_context *ctx, const wbcl_tensor *X, const int *y, int K, const wbcl_redunet_params *p,
                         wbcl_tensor *Z)
{
    wbcl_redunet *net = NULL;
    wbcl_status st = wbcl_redunet_fit(ctx, X, y, K, p, NULL, NULL, Z, &net);
    ck_assert_msg(st == WBCL_SUCCESS, "fit: %s: %s", wbcl_status_name(st), wbcl_context_last_error(ctx));
    ck_assert_ptr_nonnull(net);
    return net;
}

/* 1 if the symmetric part of s*A + t*I (d x d, float A) is positive definite (Cholesky in double). */
static int pd_shifted(size_t d, const float *A, double s, double t)
{
    double *L = calloc(d * d, sizeof *L);
    ck_assert_ptr_nonnull(L);
    int ok = 1;
    for (size_t j = 0; j < d && ok; j++)
        for (size_t i = j; i < d && ok; i++) {
            double v = s * 0.5 * ((double)A[i * d + j] + (double)A[j * d + i]) + (i == j ? t : 0.0);
            for (size_t k = 0; k < j; k++) v -= L[i * d + k] * L[j * d + k];
            if (i == j) {
                if (!(v > 0.0)) ok = 0;
                else L[j * d + j] = sqrt(v);
            } else {
                L[i * d + j] = v / L[j * d + j];
            }
        }
    free(L);
    return ok;
}

/* Random features: class j rows near a random centre (so classes are separable but noisy). */
static void random_data(tu_rng *r, size_t m, size_t d, int K, float *X, int *y)
{
    double *mu = malloc((size_t)K * d * sizeof *mu);
    ck_assert_ptr_nonnull(mu);
    for (size_t i = 0; i < (size_t)K * d; i++) mu[i] = tu_normal(r);
    for (size_t i = 0; i < m; i++) {
        y[i] = (int)(i % (size_t)K); /* interleaved: the implementations must not assume sorted labels */
        for (size_t c = 0; c < d; c++) X[i * d + c] = (float)(mu[(size_t)y[i] * d + c] + 0.5 * tu_normal(r));
    }
    free(mu);
}

/* ---- the reference against the golden values ---------------------------------------------------- */

START_TEST(ref_golden)
{
    cJSON *g = golden();
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(g, "vector");
    double X[18], y[6], E1[9], C1[18], Zf[18], hist[9], Z[18], E[27], C[54], h[9];
    ck_assert_uint_eq(field(v, "X", X, 18), 18);
    ck_assert_uint_eq(field(v, "y", y, 6), 6);
    ck_assert_uint_eq(field(v, "E1", E1, 9), 9);
    ck_assert_uint_eq(field(v, "C1", C1, 18), 18);
    ck_assert_uint_eq(field(v, "Zfinal", Zf, 18), 18);
    ck_assert_uint_eq(field(v, "hist", hist, 9), 9);
    int yi[6];
    for (int i = 0; i < 6; i++) yi[i] = (int)y[i];
    memcpy(Z, X, sizeof Z);
    ck_assert_int_eq(wbcl_ref_redunet_fit(6, 3, 2, 3, yi, 0.5, 0.1, 500.0, Z, E, C, NULL, h), 0);
    /* same algorithm in double, different summation order: agreement to ~1e-13; 1e-10 as specified */
    assert_normwise_d(E, E1, 9, 1e-10, "ref E1");
    assert_normwise_d(C, C1, 18, 1e-10, "ref C1");
    assert_normwise_d(h, hist, 9, 1e-10, "ref hist");
    assert_normwise_d(Z, Zf, 18, 1e-10, "ref Zfinal");
    /* lambda = 0.5, one layer */
    const cJSON *v2 = cJSON_GetObjectItemCaseSensitive(g, "vector_lam0p5");
    double Z2[18], h2[3];
    ck_assert_uint_eq(field(v2, "Z", Z2, 18), 18);
    ck_assert_uint_eq(field(v2, "hist", h2, 3), 3);
    memcpy(Z, X, sizeof Z);
    ck_assert_int_eq(wbcl_ref_redunet_fit(6, 3, 2, 1, yi, 0.5, 0.1, 0.5, Z, NULL, NULL, NULL, h), 0);
    assert_normwise_d(h, h2, 3, 1e-10, "ref hist (lambda 0.5)");
    assert_normwise_d(Z, Z2, 18, 1e-10, "ref Z (lambda 0.5)");
    /* an empty class is reported */
    int y0[6] = {0, 0, 0, 0, 0, 0};
    ck_assert_int_eq(wbcl_ref_redunet_construct(6, 3, 2, X, y0, 0.1, E, C, NULL), 2);
    cJSON_Delete(g);
}
END_TEST

/* ---- the device against the golden values --------------------------------------------------------- */

/* loop index: impl (bit 0), variant (bit 1) */
START_TEST(device_golden)
{
    const wbcl_redunet_impl impl = impls[_i & 1];
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[_i >> 1]), WBCL_SUCCESS);
    cJSON *g = golden();
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(g, "vector");
    double X[18], y[6], E1[9], C1[18], Zf[18], hist[9];
    field(v, "X", X, 18);
    field(v, "y", y, 6);
    field(v, "E1", E1, 9);
    field(v, "C1", C1, 18);
    field(v, "Zfinal", Zf, 18);
    field(v, "hist", hist, 9);
    float Xf[18];
    int yi[6];
    for (int i = 0; i < 18; i++) Xf[i] = (float)X[i];
    for (int i = 0; i < 6; i++) yi[i] = (int)y[i];
    wbcl_tensor *tX = upload(ctx, 6, 3, Xf), *tZ = upload(ctx, 6, 3, NULL);
    wbcl_redunet_params p = params(3, 500.0f, impl);
    wbcl_redunet *net = fit(ctx, tX, yi, 2, &p, tZ);
    /* Tolerance 1e-5 (SPEC §4.3): E, C solve 3x3 systems of condition <= 1 + d/eps2 = 31 in
     * float (error ~ 31 * 6e-8 = 2e-6); the features pass through 3 layers of the same. */
    float E[9], C[18], gam[2];
    ck_assert_int_eq(wbcl_redunet_read_layer(ctx, net, 0, E, C, gam), WBCL_SUCCESS);
    assert_normwise(E, E1, 9, 1e-5, "E1");
    assert_normwise(C, C1, 9, 1e-5, "C1[0]");
    assert_normwise(C + 9, C1 + 9, 9, 1e-5, "C1[1]");
    ck_assert(gam[0] == 0.5f && gam[1] == 0.5f);
    for (int l = 0; l < 3; l++) {
        double h[3];
        ck_assert_int_eq(wbcl_redunet_history(net, l, &h[0], &h[1], &h[2]), WBCL_SUCCESS);
        for (int k = 0; k < 3; k++)
            ck_assert_msg(fabs(h[k] - hist[3 * l + k]) <= 1e-5 * fabs(hist[3 * l + k]),
                          "%s: layer %d objective %d: got %.9f want %.9f", impl_name(impl), l + 1, k, h[k],
                          hist[3 * l + k]);
    }
    float *Z = download(ctx, tZ);
    for (int i = 0; i < 6; i++) assert_normwise(Z + 3 * i, Zf + 3 * i, 3, 1e-5, "Zfinal row");
    /* SPEC's named z0 to 1e-5 relative, element by element */
    tu_assert_close(Z, Zf, 3, 0.0, 1e-5, "z0");
    tu_guarded_free(Z);
    wbcl_redunet_destroy(net);

    /* lambda = 0.5, one layer */
    const cJSON *v2 = cJSON_GetObjectItemCaseSensitive(g, "vector_lam0p5");
    double Z2[18], h2[3], h[3];
    field(v2, "Z", Z2, 18);
    field(v2, "hist", h2, 3);
    p = params(1, 0.5f, impl);
    net = fit(ctx, tX, yi, 2, &p, tZ);
    ck_assert_int_eq(wbcl_redunet_history(net, 0, &h[0], &h[1], &h[2]), WBCL_SUCCESS);
    for (int k = 0; k < 3; k++) ck_assert_msg(fabs(h[k] - h2[k]) <= 1e-5 * fabs(h2[k]), "lambda 0.5 objective %d", k);
    Z = download(ctx, tZ);
    tu_assert_close(Z, Z2, 3, 0.0, 1e-5, "z0 (lambda 0.5)");
    for (int i = 0; i < 6; i++) assert_normwise(Z + 3 * i, Z2 + 3 * i, 3, 1e-5, "Z row (lambda 0.5)");
    tu_guarded_free(Z);
    wbcl_redunet_destroy(net);
    wbcl_tensor_destroy(tX);
    wbcl_tensor_destroy(tZ);
    cJSON_Delete(g);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- the device against the reference on odd shapes ------------------------------------------------ */

typedef struct { size_t m, d; int K; } shape3;
/* d = 1, primes, the fused limit 16, beyond it; unequal classes; a large prime d with classes
 * much smaller than d */
static const shape3 shapes[] = {{1, 1, 1}, {7, 3, 2}, {13, 5, 3}, {31, 16, 3}, {37, 17, 2}, {23, 19, 3}, {50, 3, 2},
                                {40, 3, 7}, {23, 263, 3}};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

/* loop index: shape * 2 + impl, CPU-shaped kernels; then NGPU_SHAPES * 2 more runs of the
 * first shapes with the GPU-shaped kernels (each (d, K, variant) is a program build: the
 * subset keeps a cold-cache run short) */
#define NGPU_SHAPES 3
START_TEST(device_vs_reference)
{
    const int gpu = _i >= NSHAPES * 2, idx = gpu ? _i - NSHAPES * 2 : _i;
    const shape3 sh = shapes[gpu ? 2 + idx / 2 : idx / 2]; /* GPU variant: (13,5,3), (31,16,3), (37,17,2) */
    const wbcl_redunet_impl impl = impls[idx & 1];
    if (impl == WBCL_REDUNET_IMPL_FUSED && sh.d > WBCL_REDUNET_FUSED_MAX_DIM) return;
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_variant(ctx, gpu ? WBCL_VARIANT_GPU : WBCL_VARIANT_CPU), WBCL_SUCCESS);
    const size_t m = sh.m, d = sh.d, K = (size_t)sh.K, L = 3;
    tu_rng r;
    tu_rng_seed(&r, 100 + (uint64_t)_i);
    (void)variants;
    float *X = malloc(m * d * sizeof *X);
    int *y = malloc(m * sizeof *y);
    ck_assert(X && y);
    random_data(&r, m, d, sh.K, X, y);
    /* lambda = 5: a smooth softmax, so float rounding cannot flip a near-tie of the
     * estimated classes (lambda = 500 is covered by the golden case and Example 5.1) */
    const double lambda = 5.0;
    double *Zr = tu_to_f64(X, m * d), *Er = malloc(L * d * d * sizeof *Er), *Cr = malloc(L * K * d * d * sizeof *Cr),
           *hr = malloc(L * 3 * sizeof *hr), *gr = malloc(K * sizeof *gr);
    ck_assert(Er && Cr && hr && gr);
    ck_assert_int_eq(wbcl_ref_redunet_fit(m, d, K, L, y, 0.5, 0.1, lambda, Zr, Er, Cr, gr, hr), 0);

    wbcl_tensor *tX = upload(ctx, m, d, X), *tZ = upload(ctx, m, d, NULL);
    wbcl_redunet_params p = params((int)L, (float)lambda, impl);
    wbcl_redunet *net = fit(ctx, tX, y, sh.K, &p, tZ);
    ck_assert_int_eq(wbcl_redunet_layers(net), (int)L);
    ck_assert_int_eq(wbcl_redunet_dim(net), (int)d);
    ck_assert_int_eq(wbcl_redunet_classes(net), sh.K);
    /* Tolerances: E and C_j are inverses of SPD matrices of condition <= 1 + d/eps2; in float
     * their normwise error is ~ cond * u at worst (191 * 6e-8 = 1.2e-5 for d <= 19; 1.6e-4 for
     * d = 263), ~ u * sqrt(d) typically; the features inherit it layer by layer
     * (|dz| ~ eta |dE| |z|). The objective sums log-determinants of the same matrices:
     * absolute error ~ d * u * log terms; 1e-4 * d is 10x the observed error. */
    const double tolW = 2e-4, tolZ = 2e-4, tolH = 1e-4 * (double)d;
    float *E = malloc(d * d * sizeof *E), *C = malloc(K * d * d * sizeof *C), *gam = malloc(K * sizeof *gam);
    ck_assert(E && C && gam);
    char what[96];
    for (size_t l = 0; l < L; l++) {
        ck_assert_int_eq(wbcl_redunet_read_layer(ctx, net, (int)l, E, C, gam), WBCL_SUCCESS);
        snprintf(what, sizeof what, "%s (%zu,%zu,%zu) layer %zu E", impl_name(impl), m, d, K, l);
        assert_normwise(E, Er + l * d * d, d * d, tolW, what);
        for (size_t j = 0; j < K; j++) {
            snprintf(what, sizeof what, "%s (%zu,%zu,%zu) layer %zu C_%zu", impl_name(impl), m, d, K, l, j);
            assert_normwise(C + j * d * d, Cr + (l * K + j) * d * d, d * d, tolW, what);
            ck_assert_msg(fabs(gam[j] - gr[j]) <= 1e-7, "gamma_%zu: %g vs %g", j, (double)gam[j], gr[j]);
        }
        double h[3];
        ck_assert_int_eq(wbcl_redunet_history(net, (int)l, &h[0], &h[1], &h[2]), WBCL_SUCCESS);
        for (int k = 0; k < 3; k++)
            ck_assert_msg(fabs(h[k] - hr[3 * l + k]) <= tolH * fmax(1.0, fabs(hr[3 * l + k])),
                          "%s (%zu,%zu,%zu) layer %zu objective %d: got %.9f want %.9f", impl_name(impl), m, d, K, l,
                          k, h[k], hr[3 * l + k]);
    }
    float *Z = download(ctx, tZ);
    snprintf(what, sizeof what, "%s (%zu,%zu,%zu) features", impl_name(impl), m, d, K);
    assert_normwise(Z, Zr, m * d, tolZ, what);
    tu_guarded_free(Z);
    free(E);
    free(C);
    free(gam);
    free(X);
    free(y);
    free(Zr);
    free(Er);
    free(Cr);
    free(hr);
    free(gr);
    wbcl_redunet_destroy(net);
    wbcl_tensor_destroy(tX);
    wbcl_tensor_destroy(tZ);
    wbcl_context_destroy(ctx);
}
END_TEST

/* E and every C_j are symmetric positive definite with eigenvalues in
 * [a/(1 + d/eps2), a] (a = d/(m eps2), resp. a_j): both implementations, small and large
 * d. The bounds are checked exactly: A - (lo - tol) I and (a + tol) I - A must both be
 * positive definite. */
START_TEST(spd_and_eigenvalue_bounds)
{
    wbcl_context *ctx = tu_context();
    const shape3 cases[3] = {{60, 3, 3}, {45, 16, 3}, {30, 257, 2}};
    for (int c = 0; c < 3; c++)
        for (int ii = 0; ii < 2; ii++) {
            const wbcl_redunet_impl impl = impls[ii];
            const size_t m = cases[c].m, d = cases[c].d, K = (size_t)cases[c].K, L = 4;
            if (impl == WBCL_REDUNET_IMPL_FUSED && d > WBCL_REDUNET_FUSED_MAX_DIM) continue;
            tu_rng r;
            tu_rng_seed(&r, 7 + (uint64_t)c);
            float *X = malloc(m * d * sizeof *X), *W = malloc((K + 1) * d * d * sizeof *W);
            int *y = malloc(m * sizeof *y);
            ck_assert(X && y && W);
            random_data(&r, m, d, (int)K, X, y);
            wbcl_tensor *tX = upload(ctx, m, d, X);
            wbcl_redunet_params p = params((int)L, 500.0f, impl);
            wbcl_redunet *net = fit(ctx, tX, y, (int)K, &p, NULL);
            for (size_t l = 0; l < L; l++) {
                ck_assert_int_eq(wbcl_redunet_read_layer(ctx, net, (int)l, W, W + d * d, NULL), WBCL_SUCCESS);
                for (size_t g = 0; g <= K; g++) {
                    const float *A = W + g * d * d;
                    size_t mg = m;
                    if (g) {
                        mg = 0;
                        for (size_t i = 0; i < m; i++) mg += (size_t)y[i] == g - 1;
                    }
                    const double a = (double)d / ((double)mg * 0.1), lo = a / (1.0 + (double)d / 0.1);
                    /* symmetric to float rounding of an inverse of condition <= 1 + d/eps2 */
                    for (size_t i = 0; i < d; i++)
                        for (size_t j = 0; j < i; j++)
                            ck_assert_msg(fabs(A[i * d + j] - A[j * d + i]) <= 1e-4 * a,
                                          "%s d=%zu layer %zu matrix %zu not symmetric at (%zu,%zu)", impl_name(impl),
                                          d, l, g, i, j);
                    /* bounds up to the inverse's float error, normwise <= c cond u a with
                     * cond <= 1 + d/eps2 (31 for d = 3, 2571 for d = 257); c = 4 */
                    const double tol = 4.0 * (1.0 + (double)d / 0.1) * 5.96e-8 * a;
                    ck_assert_msg(pd_shifted(d, A, 1.0, -(lo - tol)),
                                  "%s d=%zu layer %zu matrix %zu: an eigenvalue is below %.9g", impl_name(impl), d, l,
                                  g, lo);
                    ck_assert_msg(pd_shifted(d, A, -1.0, a + tol),
                                  "%s d=%zu layer %zu matrix %zu: an eigenvalue is above %.9g", impl_name(impl), d, l,
                                  g, a);
                }
            }
            wbcl_redunet_destroy(net);
            wbcl_tensor_destroy(tX);
            free(X);
            free(y);
            free(W);
        }
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- book Example 5.1 ---------------------------------------------------------------------------------- */

/* Top eigenvector (power iteration on Z_j^T Z_j, double) of the rows of Z with label j. */
static void class_direction(size_t m, size_t d, const float *Z, const int *y, int j, double *u)
{
    double G[9] = {0};
    for (size_t i = 0; i < m; i++)
        if (y[i] == j)
            for (size_t a = 0; a < d; a++)
                for (size_t b = 0; b < d; b++) G[a * d + b] += (double)Z[i * d + a] * Z[i * d + b];
    for (size_t a = 0; a < d; a++) u[a] = 1.0 + 0.1 * (double)a;
    for (int it = 0; it < 200; it++) {
        double v[3] = {0}, n = 0.0;
        for (size_t a = 0; a < d; a++)
            for (size_t b = 0; b < d; b++) v[a] += G[a * d + b] * u[b];
        for (size_t a = 0; a < d; a++) n += v[a] * v[a];
        n = sqrt(n);
        for (size_t a = 0; a < d; a++) u[a] = v[a] / n;
    }
}

START_TEST(example_5_1)
{
    /* 3 Gaussians on S^2, 500 per class, sigma 0.1, eta 0.5, eps2 0.1, lambda 500; 600 layers
     * (the book runs 2000; the optimum is reached by about layer 500) */
    wbcl_context *ctx = tu_context();
    const size_t per = 500, m = 3 * per, d = 3, L = 600;
    const double dR_opt = 1.5 * log(1.0 + 1.0 / 0.1) - 0.5 * log(1.0 + 3.0 / 0.1); /* 1.879849 */
    ck_assert(fabs(dR_opt - 1.879849) < 1e-6);
    float *X = malloc(m * d * sizeof *X), *Xt = malloc(m * d * sizeof *Xt);
    int *y = malloc(m * sizeof *y), *yt = malloc(m * sizeof *yt);
    ck_assert(X && Xt && y && yt);
    ck_assert_int_eq(wbcl_redunet_gaussians(d, 3, per, 0.1, NULL, 1, X, y), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_redunet_gaussians(d, 3, per, 0.1, NULL, 2, Xt, yt), WBCL_SUCCESS); /* held out */
    wbcl_tensor *tX = upload(ctx, m, d, X), *tZ = upload(ctx, m, d, NULL), *tXt = upload(ctx, m, d, Xt);
    wbcl_redunet_params p = params((int)L, 500.0f, WBCL_REDUNET_IMPL_AUTO);
    wbcl_redunet *net = fit(ctx, tX, y, 3, &p, tZ);

    /* dR never decreases by more than 1e-6 (the float objective's noise is ~2e-7) */
    double prev = 0.0, dR = 0.0;
    for (size_t l = 0; l < L; l++) {
        ck_assert_int_eq(wbcl_redunet_history(net, (int)l, &dR, NULL, NULL), WBCL_SUCCESS);
        ck_assert_msg(l == 0 || dR >= prev - 1e-6, "dR decreased at layer %zu: %.9f -> %.9f", l + 1, prev, dR);
        prev = dR;
    }
    ck_assert_msg(fabs(dR - dR_opt) <= 1e-3, "final dR %.7f, optimum %.7f", dR, dR_opt);
    /* the objective of the final features by the true labels agrees */
    double dRt;
    ck_assert_int_eq(wbcl_redunet_objective(ctx, tZ, y, 3, 0.1f, &dRt, NULL, NULL), WBCL_SUCCESS);
    ck_assert_msg(fabs(dRt - dR_opt) <= 1e-3, "objective by true labels %.7f", dRt);

    /* unit norm; class directions orthogonal */
    float *Z = download(ctx, tZ);
    for (size_t i = 0; i < m; i++) {
        double n = 0.0;
        for (size_t c = 0; c < d; c++) n += (double)Z[i * d + c] * Z[i * d + c];
        ck_assert_msg(fabs(sqrt(n) - 1.0) < 1e-6, "row %zu has norm %.9f", i, sqrt(n));
    }
    double u[3][3];
    for (int j = 0; j < 3; j++) class_direction(m, d, Z, y, j, u[j]);
    for (int j = 0; j < 3; j++)
        for (int k = j + 1; k < 3; k++) {
            double c = fabs(u[j][0] * u[k][0] + u[j][1] * u[k][1] + u[j][2] * u[k][2]);
            ck_assert_msg(c < 1e-2, "|cos| between class %d and %d directions = %.3g", j, k, c);
        }

    /* evaluation on the training rows replays construction exactly (bit for bit) */
    wbcl_tensor *tR = upload(ctx, m, d, NULL);
    ck_assert_int_eq(wbcl_redunet_apply(ctx, net, tX, tR), WBCL_SUCCESS);
    float *R = download(ctx, tR);
    ck_assert_msg(memcmp(R, Z, m * d * sizeof *R) == 0, "apply on the training rows differs from fit's output");

    /* held-out samples land on their class's line: nearest subspace 100% */
    ck_assert_int_eq(wbcl_redunet_apply(ctx, net, tXt, tXt), WBCL_SUCCESS); /* in place */
    float *Zt = download(ctx, tXt);
    size_t correct = 0;
    for (size_t i = 0; i < m; i++) {
        int best = 0;
        double bc = -1.0;
        for (int j = 0; j < 3; j++) {
            double c = fabs(Zt[i * d] * u[j][0] + Zt[i * d + 1] * u[j][1] + Zt[i * d + 2] * u[j][2]);
            if (c > bc) {
                bc = c;
                best = j;
            }
        }
        correct += best == yt[i];
    }
    ck_assert_msg(correct == m, "nearest subspace: %zu of %zu held-out samples correct", correct, m);

    tu_guarded_free(Z);
    tu_guarded_free(R);
    tu_guarded_free(Zt);
    wbcl_redunet_destroy(net);
    wbcl_tensor_destroy(tX);
    wbcl_tensor_destroy(tZ);
    wbcl_tensor_destroy(tXt);
    wbcl_tensor_destroy(tR);
    free(X);
    free(Xt);
    free(y);
    free(yt);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Features have unit norm after every layer; both implementations agree along the way;
 * results are deterministic; apply replays fit bit for bit in the GEMM path too. */
START_TEST(every_layer_and_implementations_agree)
{
    wbcl_context *ctx = tu_context();
    const size_t per = 40, m = 3 * per, d = 3, L = 12;
    float *X = malloc(m * d * sizeof *X);
    int *y = malloc(m * sizeof *y);
    ck_assert(X && y);
    ck_assert_int_eq(wbcl_redunet_gaussians(d, 3, per, 0.2, NULL, 5, X, y), WBCL_SUCCESS);
    wbcl_tensor *tX = upload(ctx, m, d, X), *tZ = upload(ctx, m, d, NULL);
    float *Zimpl[2];
    for (int ii = 0; ii < 2; ii++) {
        wbcl_redunet_params p = params((int)L, 500.0f, impls[ii]);
        wbcl_redunet *net = fit(ctx, tX, y, 3, &p, tZ);
        Zimpl[ii] = download(ctx, tZ);
        /* deterministic: a second fit gives the same bits */
        wbcl_redunet *net2 = fit(ctx, tX, y, 3, &p, tZ);
        float *Z2 = download(ctx, tZ);
        ck_assert_msg(memcmp(Z2, Zimpl[ii], m * d * sizeof *Z2) == 0, "%s: two fits differ", impl_name(impls[ii]));
        tu_guarded_free(Z2);
        wbcl_redunet_destroy(net2);
        /* replay */
        ck_assert_int_eq(wbcl_redunet_apply(ctx, net, tX, tZ), WBCL_SUCCESS);
        Z2 = download(ctx, tZ);
        ck_assert_msg(memcmp(Z2, Zimpl[ii], m * d * sizeof *Z2) == 0, "%s: apply differs from fit",
                      impl_name(impls[ii]));
        tu_guarded_free(Z2);
        /* unit norm after every layer: prefix models rebuilt from the stored layers */
        float *E = malloc(L * d * d * sizeof *E), *C = malloc(L * 3 * d * d * sizeof *C),
              *g = malloc(L * 3 * sizeof *g);
        ck_assert(E && C && g);
        for (size_t l = 0; l < L; l++)
            ck_assert_int_eq(wbcl_redunet_read_layer(ctx, net, (int)l, E + l * d * d, C + l * 3 * d * d, g + l * 3),
                             WBCL_SUCCESS);
        for (size_t l = 1; l <= L; l++) {
            wbcl_redunet *pre = NULL;
            wbcl_redunet_params pp = wbcl_redunet_get_params(net);
            ck_assert_int_eq(wbcl_redunet_create(ctx, (int)l, (int)d, 3, &pp, E, C, g, NULL, &pre), WBCL_SUCCESS);
            ck_assert_int_eq(wbcl_redunet_apply(ctx, pre, tX, tZ), WBCL_SUCCESS);
            float *Zl = download(ctx, tZ);
            for (size_t i = 0; i < m; i++) {
                double n = 0.0;
                for (size_t c = 0; c < d; c++) n += (double)Zl[i * d + c] * Zl[i * d + c];
                ck_assert_msg(fabs(sqrt(n) - 1.0) < 1e-6, "%s: layer %zu row %zu norm %.9f", impl_name(impls[ii]),
                              l, i, sqrt(n));
            }
            if (l == L) ck_assert(memcmp(Zl, Zimpl[ii], m * d * sizeof *Zl) == 0);
            tu_guarded_free(Zl);
            wbcl_redunet_destroy(pre);
        }
        free(E);
        free(C);
        free(g);
        wbcl_redunet_destroy(net);
    }
    /* the two implementations differ only by float rounding (12 layers, lambda 500, classes well
     * separated: no near-ties), amplified at most ~ (1 + eta |E|)^L: 1e-4 */
    double *Zd = tu_to_f64(Zimpl[1], m * d);
    assert_normwise(Zimpl[0], Zd, m * d, 1e-4, "fused vs gemm features");
    free(Zd);
    tu_guarded_free(Zimpl[0]);
    tu_guarded_free(Zimpl[1]);
    free(X);
    free(y);
    wbcl_tensor_destroy(tX);
    wbcl_tensor_destroy(tZ);
    wbcl_context_destroy(ctx);
}
END_TEST

/* GEMM implementation at a larger d (not a multiple of any vector width) with classes much
 * smaller than d (ill-conditioned C_j, collapsing classes): the reference agrees, and apply
 * replays fit bit for bit. */
START_TEST(gemm_large_d)
{
    wbcl_context *ctx = tu_context();
    const size_t m = 30, d = 300, K = 3, L = 4; /* m_j = 10 */
    tu_rng r;
    tu_rng_seed(&r, 77);
    float *X = malloc(m * d * sizeof *X);
    int *y = malloc(m * sizeof *y);
    ck_assert(X && y);
    random_data(&r, m, d, (int)K, X, y);
    double *Zr = tu_to_f64(X, m * d);
    ck_assert_int_eq(wbcl_ref_redunet_fit(m, d, K, L, y, 0.5, 0.1, 500.0, Zr, NULL, NULL, NULL, NULL), 0);
    wbcl_tensor *tX = upload(ctx, m, d, X), *tZ = upload(ctx, m, d, NULL), *tR = upload(ctx, m, d, NULL);
    wbcl_redunet_params p = params((int)L, 500.0f, WBCL_REDUNET_IMPL_GEMM);
    wbcl_redunet *net = fit(ctx, tX, y, (int)K, &p, tZ);
    ck_assert_int_eq(wbcl_redunet_apply(ctx, net, tX, tR), WBCL_SUCCESS);
    float *Z = download(ctx, tZ), *R = download(ctx, tR);
    double *Zd = tu_to_f64(Z, m * d);
    /* C_j = a_j (I + a_j G_j)^-1 by Cholesky: error ~ u a_j per application (observed ~1e-5
     * normwise over 4 layers); 1e-4 */
    ck_assert_msg(memcmp(R, Z, m * d * sizeof *R) == 0, "apply differs from fit");
    assert_normwise(Z, Zr, m * d, 1e-4, "fit vs reference (d = 300)");
    (void)Zd;
    tu_guarded_free(Z);
    tu_guarded_free(R);
    free(Zd);
    free(Zr);
    free(X);
    free(y);
    wbcl_redunet_destroy(net);
    wbcl_tensor_destroy(tX);
    wbcl_tensor_destroy(tZ);
    wbcl_tensor_destroy(tR);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- objective, progress, generator ---------------------------------------------------------------- */

START_TEST(objective_vs_reference)
{
    wbcl_context *ctx = tu_context();
    const shape3 cases[3] = {{29, 5, 3}, {40, 20, 3}, {17, 40, 2}};
    for (int c = 0; c < 3; c++) {
        const size_t m = cases[c].m, d = cases[c].d, K = (size_t)cases[c].K;
        tu_rng r;
        tu_rng_seed(&r, 31 + (uint64_t)c);
        float *Z = tu_random_f32(&r, m * d, -1.0, 1.0);
        int *lab = malloc(m * sizeof *lab);
        ck_assert_ptr_nonnull(lab);
        for (size_t i = 0; i < m; i++) lab[i] = (int)(i % (K - 1)); /* class K-1 empty: skipped */
        double *Zd = tu_to_f64(Z, m * d), want[3], got[3];
        ck_assert_int_eq(wbcl_ref_redunet_objective(m, d, K, Zd, lab, 0.1, want), 0);
        wbcl_tensor *t = upload(ctx, m, d, Z);
        ck_assert_int_eq(wbcl_redunet_objective(ctx, t, lab, (int)K, 0.1f, &got[0], &got[1], &got[2]), WBCL_SUCCESS);
        /* log-determinants of d x d SPD matrices in float: absolute error ~ d * cond * u */
        for (int k = 0; k < 3; k++)
            ck_assert_msg(fabs(got[k] - want[k]) <= 1e-5 * (double)d * fmax(1.0, fabs(want[k])),
                          "case %d term %d: %.9f vs %.9f", c, k, got[k], want[k]);
        wbcl_tensor_destroy(t);
        free(Z);
        free(lab);
        free(Zd);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

typedef struct { int calls, last; double hist[64][3]; } progress_log;
static void on_progress(int layer, double dR, double R, double Rc, void *user)
{
    progress_log *p = user;
    ck_assert_int_eq(layer, p->last + 1);
    p->last = layer;
    p->hist[p->calls][0] = dR;
    p->hist[p->calls][1] = R;
    p->hist[p->calls][2] = Rc;
    p->calls++;
}

START_TEST(progress_callback)
{
    wbcl_context *ctx = tu_context();
    const size_t per = 20, m = 2 * per, d = 3;
    float X[120];
    int y[40];
    ck_assert_int_eq(wbcl_redunet_gaussians(d, 2, per, 0.3, NULL, 9, X, y), WBCL_SUCCESS);
    wbcl_tensor *tX = upload(ctx, m, d, X);
    for (int ii = 0; ii < 2; ii++) {
        progress_log log;
        memset(&log, 0, sizeof log);
        wbcl_redunet_params p = params(20, 500.0f, impls[ii]);
        p.report_every = 7;
        wbcl_redunet *net = NULL;
        ck_assert_int_eq(wbcl_redunet_fit(ctx, tX, y, 2, &p, on_progress, &log, NULL, &net), WBCL_SUCCESS);
        ck_assert_int_eq(log.calls, 20);
        for (int l = 0; l < 20; l++) {
            double h[3];
            ck_assert_int_eq(wbcl_redunet_history(net, l, &h[0], &h[1], &h[2]), WBCL_SUCCESS);
            ck_assert(h[0] == log.hist[l][0] && h[1] == log.hist[l][1] && h[2] == log.hist[l][2]);
            ck_assert(fabs(h[0] - (h[1] - h[2])) < 1e-12);
        }
        wbcl_redunet_destroy(net);
    }
    wbcl_tensor_destroy(tX);
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(gaussian_generator)
{
    float a[5 * 4 * 3], b[5 * 4 * 3], c[5 * 4 * 3];
    int y[20];
    ck_assert_int_eq(wbcl_redunet_gaussians(4, 3, 5, 0.1, NULL, 42, a, y), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_redunet_gaussians(4, 3, 5, 0.1, NULL, 42, b, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_redunet_gaussians(4, 3, 5, 0.1, NULL, 43, c, NULL), WBCL_SUCCESS);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    ck_assert(memcmp(a, c, sizeof a) != 0);
    for (int i = 0; i < 15; i++) {
        ck_assert_int_eq(y[i], i / 5);
        double n = 0.0;
        for (int k = 0; k < 4; k++) n += (double)a[i * 4 + k] * a[i * 4 + k];
        ck_assert(fabs(n - 1.0) < 1e-6);
        ck_assert(a[i * 4 + y[i]] > 0.5f); /* near its centre e_{y+1} */
    }
    float centres[2 * 2] = {0.f, 1.f, 1.f, 0.f}, x2[2 * 3 * 2];
    ck_assert_int_eq(wbcl_redunet_gaussians(2, 2, 3, 0.0, centres, 1, x2, NULL), WBCL_SUCCESS);
    ck_assert(x2[0] == 0.f && x2[1] == 1.f && x2[6] == 1.f && x2[7] == 0.f);
    ck_assert_int_eq(wbcl_redunet_gaussians(2, 3, 3, 0.1, NULL, 1, x2, NULL), WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_redunet_gaussians(2, 1, 3, NAN, NULL, 1, x2, NULL), WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_redunet_gaussians(2, 1, 0, 0.1, NULL, 1, x2, NULL), WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_redunet_gaussians(2, 1, 3, 0.1, NULL, 1, NULL, NULL), WBCL_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* ---- model files -------------------------------------------------------------------------------------- */

static wbcl_redunet *small_model(wbcl_context *ctx, wbcl_tensor **tX, int *y)
{
    float X[60];
    ck_assert_int_eq(wbcl_redunet_gaussians(3, 2, 10, 0.3, NULL, 11, X, y), WBCL_SUCCESS);
    *tX = upload(ctx, 20, 3, X);
    wbcl_redunet_params p = params(5, 250.0f, WBCL_REDUNET_IMPL_AUTO);
    p.eta = 0.3f;
    p.eps2 = 0.07f;
    return fit(ctx, *tX, y, 2, &p, NULL);
}

START_TEST(save_load_roundtrip)
{
    wbcl_context *ctx = tu_context();
    wbcl_tensor *tX;
    int y[20];
    wbcl_redunet *net = small_model(ctx, &tX, y);
    char path[320];
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
    ck_assert_int_eq(wbcl_redunet_save(ctx, net, path), WBCL_SUCCESS);
    wbcl_redunet *back = NULL;
    ck_assert_int_eq(wbcl_redunet_load(ctx, path, &back), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_redunet_layers(back), 5);
    ck_assert_int_eq(wbcl_redunet_dim(back), 3);
    ck_assert_int_eq(wbcl_redunet_classes(back), 2);
    wbcl_redunet_params a = wbcl_redunet_get_params(net), b = wbcl_redunet_get_params(back);
    ck_assert(a.eta == b.eta && a.eps2 == b.eps2 && a.lambda == b.lambda && b.layers == 5);
    for (int l = 0; l < 5; l++) {
        float E1[9], C1[18], g1[2], E2[9], C2[18], g2[2];
        double h1[3], h2[3];
        ck_assert_int_eq(wbcl_redunet_read_layer(ctx, net, l, E1, C1, g1), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_redunet_read_layer(ctx, back, l, E2, C2, g2), WBCL_SUCCESS);
        ck_assert(!memcmp(E1, E2, sizeof E1) && !memcmp(C1, C2, sizeof C1) && !memcmp(g1, g2, sizeof g1));
        ck_assert_int_eq(wbcl_redunet_history(net, l, &h1[0], &h1[1], &h1[2]), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_redunet_history(back, l, &h2[0], &h2[1], &h2[2]), WBCL_SUCCESS);
        ck_assert(!memcmp(h1, h2, sizeof h1));
    }
    wbcl_tensor *z1 = upload(ctx, 20, 3, NULL), *z2 = upload(ctx, 20, 3, NULL);
    ck_assert_int_eq(wbcl_redunet_apply(ctx, net, tX, z1), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_redunet_apply(ctx, back, tX, z2), WBCL_SUCCESS);
    float *p1 = download(ctx, z1), *p2 = download(ctx, z2);
    ck_assert(!memcmp(p1, p2, 60 * sizeof *p1));
    /* the file is ordinary safetensors with the documented names and metadata */
    char err[256];
    wbcl_safetensors *sf = NULL;
    ck_assert_int_eq(wbcl_safetensors_open(path, &sf, err, sizeof err), WBCL_SUCCESS);
    ck_assert_str_eq(wbcl_safetensors_metadata(sf, "format"), "wbcl.redunet");
    ck_assert_str_eq(wbcl_safetensors_metadata(sf, "layers"), "5");
    ck_assert_str_eq(wbcl_safetensors_metadata(sf, "eps2"), "0.0700000003");
    ck_assert(wbcl_safetensors_has(sf, "E") && wbcl_safetensors_has(sf, "C") && wbcl_safetensors_has(sf, "gamma") &&
              wbcl_safetensors_has(sf, "objective"));
    wbcl_safetensors_close(sf);
    /* a model without history saves without "objective" and loads without one */
    float E[5 * 9], C[5 * 18], g[5 * 2];
    for (int l = 0; l < 5; l++) wbcl_redunet_read_layer(ctx, net, l, E + 9 * l, C + 18 * l, g + 2 * l);
    wbcl_redunet *nh = NULL, *nh2 = NULL;
    ck_assert_int_eq(wbcl_redunet_create(ctx, 5, 3, 2, &a, E, C, g, NULL, &nh), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_redunet_history(nh, 0, NULL, NULL, NULL), WBCL_ERROR_INVALID_ARGUMENT, "no objective");
    ck_assert_int_eq(wbcl_redunet_save(ctx, nh, path), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_redunet_load(ctx, path, &nh2), WBCL_SUCCESS);
    ck_assert_int_ne(wbcl_redunet_history(nh2, 0, NULL, NULL, NULL), WBCL_SUCCESS);
    wbcl_redunet_destroy(nh);
    wbcl_redunet_destroy(nh2);
    tu_guarded_free(p1);
    tu_guarded_free(p2);
    wbcl_tensor_destroy(z1);
    wbcl_tensor_destroy(z2);
    wbcl_tensor_destroy(tX);
    wbcl_redunet_destroy(net);
    wbcl_redunet_destroy(back);
    unlink(path);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Writes a model file by hand: E (L,d,d), C (L,K,d,d), gamma (L,K), metadata pairs. */
static void write_model(const char *path, size_t L, size_t d, size_t K, size_t cK, float fill, int n_meta,
                        const char *const *keys, const char *const *vals, int skip)
{
    wbcl_array E, C, g;
    const size_t sE[3] = {L, d, d}, sC[4] = {L, cK, d, d}, sg[2] = {L, K};
    ck_assert_int_eq(wbcl_array_alloc(&E, WBCL_ELEM_F32, 3, sE, NULL, 0), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_array_alloc(&C, WBCL_ELEM_F32, 4, sC, NULL, 0), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_array_alloc(&g, WBCL_ELEM_F32, 2, sg, NULL, 0), WBCL_SUCCESS);
    ((float *)E.data)[0] = fill;
    const char *names[3] = {"E", "C", "gamma"};
    const wbcl_array *arrs[3] = {&E, &C, &g};
    const char *nn[3];
    const wbcl_array *aa[3];
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (i != skip) {
            nn[n] = names[i];
            aa[n++] = arrs[i];
        }
    ck_assert_int_eq(wbcl_safetensors_write(path, skip >= 0 ? 2 : 3, skip >= 0 ? nn : names, skip >= 0 ? aa : arrs,
                                            (size_t)n_meta, keys, vals, NULL, 0),
                     WBCL_SUCCESS);
    wbcl_array_free(&E);
    wbcl_array_free(&C);
    wbcl_array_free(&g);
}

START_TEST(load_rejects_bad_files)
{
    wbcl_context *ctx = tu_context();
    char path[320];
    snprintf(path, sizeof path, "%s/bad.safetensors", tmpdir);
    const char *k3[3] = {"eta", "eps2", "lambda"}, *v3[3] = {"0.5", "0.1", "500"};
    wbcl_redunet *net = (wbcl_redunet *)0x1;
    /* good baseline */
    write_model(path, 2, 3, 2, 2, 0.0f, 3, k3, v3, -1);
    ck_assert_int_eq(wbcl_redunet_load(ctx, path, &net), WBCL_SUCCESS);
    wbcl_redunet_destroy(net);
    /* missing tensor */
    write_model(path, 2, 3, 2, 2, 0.0f, 3, k3, v3, 2);
    net = (wbcl_redunet *)0x1;
    tu_assert_status(ctx, wbcl_redunet_load(ctx, path, &net), WBCL_ERROR_FORMAT, "gamma");
    ck_assert_ptr_null(net);
    /* C's class count disagrees with gamma */
    write_model(path, 2, 3, 2, 3, 0.0f, 3, k3, v3, -1);
    tu_assert_status(ctx, wbcl_redunet_load(ctx, path, &net), WBCL_ERROR_SHAPE, "'gamma'");
    /* a non-finite weight */
    write_model(path, 2, 3, 2, 2, NAN, 3, k3, v3, -1);
    tu_assert_status(ctx, wbcl_redunet_load(ctx, path, &net), WBCL_ERROR_NUMERIC, "E[0]");
    ck_assert_ptr_nonnull(strstr(wbcl_context_last_error(ctx), "bad.safetensors"));
    /* missing hyperparameter, bad hyperparameter, wrong format, metadata contradicting shapes */
    write_model(path, 2, 3, 2, 2, 0.0f, 2, k3, v3, -1);
    tu_assert_status(ctx, wbcl_redunet_load(ctx, path, &net), WBCL_ERROR_FORMAT, "lambda");
    const char *v3b[3] = {"0.5", "-1", "500"};
    write_model(path, 2, 3, 2, 2, 0.0f, 3, k3, v3b, -1);
    tu_assert_status(ctx, wbcl_redunet_load(ctx, path, &net), WBCL_ERROR_INVALID_ARGUMENT, "eps2");
    const char *k4[4] = {"eta", "eps2", "lambda", "format"}, *v4[4] = {"0.5", "0.1", "500", "other"};
    write_model(path, 2, 3, 2, 2, 0.0f, 4, k4, v4, -1);
    tu_assert_status(ctx, wbcl_redunet_load(ctx, path, &net), WBCL_ERROR_FORMAT, "format");
    const char *v4b[4] = {"0.5", "0.1", "500", "7"};
    const char *k4b[4] = {"eta", "eps2", "lambda", "layers"};
    write_model(path, 2, 3, 2, 2, 0.0f, 4, k4b, v4b, -1);
    tu_assert_status(ctx, wbcl_redunet_load(ctx, path, &net), WBCL_ERROR_SHAPE, "layers");
    /* not a file, not safetensors */
    char missing[330];
    snprintf(missing, sizeof missing, "%s/none.safetensors", tmpdir);
    tu_assert_status(ctx, wbcl_redunet_load(ctx, missing, &net), WBCL_ERROR_IO, "none.safetensors");
    FILE *f = fopen(path, "wb");
    fputs("garbage", f);
    fclose(f);
    ck_assert_int_ne(wbcl_redunet_load(ctx, path, &net), WBCL_SUCCESS);
    ck_assert_ptr_null(net);
    tu_assert_status(ctx, wbcl_redunet_load(ctx, NULL, &net), WBCL_ERROR_INVALID_ARGUMENT, "path");
    tu_assert_status(ctx, wbcl_redunet_load(ctx, path, NULL), WBCL_ERROR_INVALID_ARGUMENT, "out");
    /* save into a directory that does not exist: IO error, nothing written */
    wbcl_tensor *tX;
    int y[20];
    net = small_model(ctx, &tX, y);
    char nodir[340];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/m.safetensors", tmpdir);
    tu_assert_status(ctx, wbcl_redunet_save(ctx, net, nodir), WBCL_ERROR_IO, "no/such/dir");
    ck_assert_int_ne(access(nodir, F_OK), 0);
    tu_assert_status(ctx, wbcl_redunet_save(ctx, NULL, path), WBCL_ERROR_INVALID_ARGUMENT, "net");
    wbcl_redunet_destroy(net);
    wbcl_tensor_destroy(tX);
    unlink(path);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------------------------- */

START_TEST(fit_rejects_bad_input)
{
    wbcl_context *ctx = tu_context(), *other = tu_context();
    float X[30];
    int y[10];
    ck_assert_int_eq(wbcl_redunet_gaussians(3, 2, 5, 0.2, NULL, 3, X, y), WBCL_SUCCESS);
    float sentinel[30];
    for (int i = 0; i < 30; i++) sentinel[i] = 7.0f + (float)i;
    wbcl_tensor *tX = upload(ctx, 10, 3, X), *tZ = upload(ctx, 10, 3, sentinel), *bad3 = upload(ctx, 10, 4, NULL),
                *tO = upload(other, 10, 3, X);
    size_t s1[1] = {30}, s3[3] = {2, 5, 3};
    wbcl_tensor *t1 = NULL, *t3 = NULL;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s1, WBCL_F32, X, &t1), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 3, s3, WBCL_F32, X, &t3), WBCL_SUCCESS);
    wbcl_redunet_params p = params(3, 500.0f, WBCL_REDUNET_IMPL_AUTO);
    wbcl_redunet *net = (wbcl_redunet *)0x1;

    ck_assert_int_eq(wbcl_redunet_fit(NULL, tX, y, 2, &p, NULL, NULL, tZ, &net), WBCL_ERROR_INVALID_ARGUMENT);
    tu_assert_status(ctx, wbcl_redunet_fit(ctx, tX, y, 2, &p, NULL, NULL, tZ, NULL), WBCL_ERROR_INVALID_ARGUMENT, "out");
    tu_assert_status(ctx, wbcl_redunet_fit(ctx, NULL, y, 2, &p, NULL, NULL, tZ, &net), WBCL_ERROR_INVALID_ARGUMENT, "X");
    ck_assert_ptr_null(net);
    tu_assert_status(ctx, wbcl_redunet_fit(ctx, t1, y, 2, &p, NULL, NULL, tZ, &net), WBCL_ERROR_SHAPE, "(30)");
    tu_assert_status(ctx, wbcl_redunet_fit(ctx, t3, y, 2, &p, NULL, NULL, tZ, &net), WBCL_ERROR_SHAPE, "(2, 5, 3)");
    tu_assert_status(ctx, wbcl_redunet_fit(ctx, tX, y, 2, &p, NULL, NULL, bad3, &net), WBCL_ERROR_SHAPE, "(10, 4)");
    ck_assert_int_eq(wbcl_redunet_fit(ctx, tO, y, 2, &p, NULL, NULL, tZ, &net), WBCL_ERROR_CONTEXT_MISMATCH);
    ck_assert_int_eq(wbcl_redunet_fit(ctx, tX, y, 2, &p, NULL, NULL, tO, &net), WBCL_ERROR_CONTEXT_MISMATCH);
    tu_assert_status(ctx, wbcl_redunet_fit(ctx, tX, NULL, 2, &p, NULL, NULL, tZ, &net), WBCL_ERROR_INVALID_ARGUMENT,
                     "labels");
    tu_assert_status(ctx, wbcl_redunet_fit(ctx, tX, y, 0, &p, NULL, NULL, tZ, &net), WBCL_ERROR_INVALID_ARGUMENT,
                     "classes");
    tu_assert_status(ctx, wbcl_redunet_fit(ctx, tX, y, 2, NULL, NULL, NULL, tZ, &net), WBCL_ERROR_INVALID_ARGUMENT,
                     "params");
    /* a label out of range; an empty class */
    int ybad[10];
    memcpy(ybad, y, sizeof ybad);
    ybad[4] = 2;
    tu_assert_status(ctx, wbcl_redunet_fit(ctx, tX, ybad, 2, &p, NULL, NULL, tZ, &net), WBCL_ERROR_INVALID_ARGUMENT,
                     "labels[4] = 2");
    ybad[4] = -1;
    tu_assert_status(ctx, wbcl_redunet_fit(ctx, tX, ybad, 2, &p, NULL, NULL, tZ, &net), WBCL_ERROR_INVALID_ARGUMENT,
                     "labels[4] = -1");
    tu_assert_status(ctx, wbcl_redunet_fit(ctx, tX, y, 3, &p, NULL, NULL, tZ, &net), WBCL_ERROR_INVALID_ARGUMENT,
                     "class 2 has no samples");
    /* parameters */
    const struct { int field; float v; const char *name; } bad[] = {
        {0, 0, "layers"}, {1, 0.0f, "eta"}, {1, NAN, "eta"}, {2, 0.0f, "eps2"}, {2, INFINITY, "eps2"},
        {3, -1.0f, "lambda"}, {3, NAN, "lambda"}, {4, 9, "impl"}, {5, -1, "report_every"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wbcl_redunet_params q = p;
        switch (bad[i].field) {
        case 0: q.layers = (int)bad[i].v; break;
        case 1: q.eta = bad[i].v; break;
        case 2: q.eps2 = bad[i].v; break;
        case 3: q.lambda = bad[i].v; break;
        case 4: q.impl = (wbcl_redunet_impl)(int)bad[i].v; break;
        default: q.report_every = (int)bad[i].v; break;
        }
        tu_assert_status(ctx, wbcl_redunet_fit(ctx, tX, y, 2, &q, NULL, NULL, tZ, &net), WBCL_ERROR_INVALID_ARGUMENT,
                         bad[i].name);
    }
    /* the fused implementation's limits */
    float X17[10 * 17] = {0};
    for (int i = 0; i < 10; i++) X17[i * 17 + i % 17] = 1.0f;
    wbcl_tensor *t17 = upload(ctx, 10, 17, X17);
    wbcl_redunet_params pf = params(2, 500.0f, WBCL_REDUNET_IMPL_FUSED);
    tu_assert_status(ctx, wbcl_redunet_fit(ctx, t17, y, 2, &pf, NULL, NULL, NULL, &net), WBCL_ERROR_UNSUPPORTED,
                     "d = 17");
    /* non-finite input: an error, Z untouched */
    float Xn[30];
    memcpy(Xn, X, sizeof Xn);
    Xn[17] = NAN;
    wbcl_tensor *tN = upload(ctx, 10, 3, Xn);
    for (int ii = 0; ii < 2; ii++) {
        p.impl = impls[ii];
        tu_assert_status(ctx, wbcl_redunet_fit(ctx, tN, y, 2, &p, NULL, NULL, tZ, &net), WBCL_ERROR_NUMERIC,
                         "non-finite");
        Xn[17] = INFINITY;
        ck_assert_int_eq(wbcl_tensor_write(ctx, tN, Xn, 30), WBCL_SUCCESS);
    }
    ck_assert_ptr_null(net);
    float *Z = download(ctx, tZ);
    ck_assert_msg(memcmp(Z, sentinel, sizeof sentinel) == 0, "Z was written by a failed fit");
    tu_guarded_free(Z);
    /* NULL and a foreign context in the other entry points */
    ck_assert_int_eq(wbcl_redunet_apply(NULL, NULL, tX, tZ), WBCL_ERROR_INVALID_ARGUMENT);
    tu_assert_status(ctx, wbcl_redunet_apply(ctx, NULL, tX, tZ), WBCL_ERROR_INVALID_ARGUMENT, "net");
    tu_assert_status(ctx, wbcl_redunet_objective(ctx, tX, y, 2, 0.0f, NULL, NULL, NULL), WBCL_ERROR_INVALID_ARGUMENT,
                     "eps2");
    tu_assert_status(ctx, wbcl_redunet_objective(ctx, tX, ybad, 2, 0.1f, NULL, NULL, NULL), WBCL_ERROR_INVALID_ARGUMENT,
                     "labels[4]");
    tu_assert_status(ctx, wbcl_redunet_objective(ctx, tN, y, 2, 0.1f, NULL, NULL, NULL), WBCL_ERROR_NUMERIC,
                     "non-finite");
    ck_assert_int_eq(wbcl_redunet_layers(NULL), 0);
    ck_assert_int_eq(wbcl_redunet_set_impl(NULL, WBCL_REDUNET_IMPL_AUTO), WBCL_ERROR_INVALID_ARGUMENT);
    wbcl_redunet_destroy(NULL);
    wbcl_tensor_destroy(t1);
    wbcl_tensor_destroy(t3);
    wbcl_tensor_destroy(t17);
    wbcl_tensor_destroy(tN);
    wbcl_tensor_destroy(tX);
    wbcl_tensor_destroy(tZ);
    wbcl_tensor_destroy(bad3);
    wbcl_tensor_destroy(tO);
    wbcl_context_destroy(ctx);
    wbcl_context_destroy(other);
}
END_TEST

START_TEST(apply_and_model_reject_bad_input)
{
    wbcl_context *ctx = tu_context(), *other = tu_context();
    wbcl_tensor *tX;
    int y[20];
    wbcl_redunet *net = small_model(ctx, &tX, y);
    float sentinel[20 * 4];
    for (int i = 0; i < 80; i++) sentinel[i] = (float)i;
    wbcl_tensor *t4 = upload(ctx, 20, 4, sentinel), *tZ = upload(ctx, 20, 3, sentinel), *tZ2 = upload(ctx, 19, 3, NULL),
                *tO = upload(other, 20, 3, NULL);
    tu_assert_status(ctx, wbcl_redunet_apply(ctx, net, t4, t4), WBCL_ERROR_SHAPE, "d = 3");
    tu_assert_status(ctx, wbcl_redunet_apply(ctx, net, tX, tZ2), WBCL_ERROR_SHAPE, "(19, 3)");
    tu_assert_status(ctx, wbcl_redunet_apply(ctx, net, tX, NULL), WBCL_ERROR_INVALID_ARGUMENT, "Z");
    ck_assert_int_eq(wbcl_redunet_apply(ctx, net, tX, tO), WBCL_ERROR_CONTEXT_MISMATCH);
    tu_assert_status(other, wbcl_redunet_apply(other, net, tO, tO), WBCL_ERROR_CONTEXT_MISMATCH, "different context");
    float Xn[60] = {0};
    Xn[5] = NAN;
    wbcl_tensor *tN = upload(ctx, 20, 3, Xn);
    tu_assert_status(ctx, wbcl_redunet_apply(ctx, net, tN, tZ), WBCL_ERROR_NUMERIC, "non-finite");
    float *Z = download(ctx, tZ), *Z4 = download(ctx, t4);
    ck_assert(memcmp(Z, sentinel, 60 * sizeof *Z) == 0 && memcmp(Z4, sentinel, sizeof sentinel) == 0);
    tu_guarded_free(Z);
    tu_guarded_free(Z4);
    /* set_impl, read_layer, history, create */
    tu_assert_status(ctx, wbcl_redunet_set_impl(net, (wbcl_redunet_impl)5), WBCL_ERROR_INVALID_ARGUMENT, "impl");
    ck_assert_int_eq(wbcl_redunet_set_impl(net, WBCL_REDUNET_IMPL_GEMM), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_redunet_apply(ctx, net, tX, tZ), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_redunet_read_layer(ctx, net, 5, NULL, NULL, NULL), WBCL_ERROR_INVALID_ARGUMENT,
                     "layer 5");
    ck_assert_int_eq(wbcl_redunet_read_layer(other, net, 0, NULL, NULL, NULL), WBCL_ERROR_CONTEXT_MISMATCH);
    tu_assert_status(ctx, wbcl_redunet_history(net, -1, NULL, NULL, NULL), WBCL_ERROR_INVALID_ARGUMENT, "layer -1");
    float E[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, C[18] = {0}, g[2] = {0.5f, 0.5f};
    wbcl_redunet_params p = wbcl_redunet_default_params();
    wbcl_redunet *m = (wbcl_redunet *)0x1;
    tu_assert_status(ctx, wbcl_redunet_create(ctx, 0, 3, 2, &p, E, C, g, NULL, &m), WBCL_ERROR_SHAPE, "layers = 0");
    ck_assert_ptr_null(m);
    tu_assert_status(ctx, wbcl_redunet_create(ctx, 1, 3, 2, &p, E, NULL, g, NULL, &m), WBCL_ERROR_INVALID_ARGUMENT,
                     "C is NULL");
    C[4] = INFINITY;
    tu_assert_status(ctx, wbcl_redunet_create(ctx, 1, 3, 2, &p, E, C, g, NULL, &m), WBCL_ERROR_NUMERIC, "C[4]");
    C[4] = 0.0f;
    p.impl = WBCL_REDUNET_IMPL_FUSED;
    ck_assert_int_eq(wbcl_redunet_create(ctx, 1, 3, 2, &p, E, C, g, NULL, &m), WBCL_SUCCESS);
    float Eb[9], Cb[18], gb[2];
    ck_assert_int_eq(wbcl_redunet_read_layer(ctx, m, 0, Eb, Cb, gb), WBCL_SUCCESS);
    ck_assert(!memcmp(E, Eb, sizeof E) && !memcmp(C, Cb, sizeof C) && !memcmp(g, gb, sizeof g));
    wbcl_redunet_destroy(m);
    wbcl_redunet_destroy(net);
    wbcl_tensor_destroy(tX);
    wbcl_tensor_destroy(t4);
    wbcl_tensor_destroy(tZ);
    wbcl_tensor_destroy(tZ2);
    wbcl_tensor_destroy(tO);
    wbcl_tensor_destroy(tN);
    wbcl_context_destroy(ctx);
    wbcl_context_destroy(other);
}
END_TEST

static Suite *redunet_suite(void)
{
    Suite *s = suite_create("redunet");
    TCase *tc = tcase_create("reference");
    tcase_add_test(tc, ref_golden);
    tcase_add_test(tc, gaussian_generator);
    suite_add_tcase(s, tc);

    tc = tcase_create("device");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, device_golden, 0, 4);
    tcase_add_loop_test(tc, device_vs_reference, 0, NSHAPES * 2 + NGPU_SHAPES * 2);
    tcase_add_test(tc, spd_and_eigenvalue_bounds);
    tcase_add_test(tc, objective_vs_reference);
    tcase_add_test(tc, progress_callback);
    suite_add_tcase(s, tc);

    tc = tcase_create("properties");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, example_5_1);
    tcase_add_test(tc, every_layer_and_implementations_agree);
    tcase_add_test(tc, gemm_large_d);
    suite_add_tcase(s, tc);

    tc = tcase_create("files_and_errors");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, save_load_roundtrip);
    tcase_add_test(tc, load_rejects_bad_files);
    tcase_add_test(tc, fit_rejects_bad_input);
    tcase_add_test(tc, apply_and_model_reject_bad_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/wbcl_test_redunet_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    int rc = tu_run(redunet_suite());
    rmdir(tmpdir);
    return rc;
}
