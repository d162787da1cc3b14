/* Shift-invariant ReduNet (include/wbcl/circulant.h, SPEC.md §4.2-4.3): the
 * double reference against the golden 1-D case and against the dense
 * block-circulant oracle; the device path against the reference; the
 * shift-equivariance properties of book §5.1.2; sinusoid data (SPEC §5);
 * model files; bad input. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fft.h" /* the FFT wrapper is tested directly (fft_paths) */
#include "testutil.h"
#include "wbcl/circulant.h"
#include "wbcl/io.h"
#include "wbcl/ref.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

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

/* |got - want| <= rtol * max|want| for every element. */
static void assert_normwise_d(const double *got, const double *want, size_t n, double rtol, const char *what)
{
    double scale = max_abs(want, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= rtol * scale, "%s[%zu]: got %.15g want %.15g", what, i, got[i],
                      want[i]);
}

/* The golden 1-D case: T = 8, m = 4, Cin = 1, Cout = 3, k = 3, K = 2, eps2 0.1, eta 0.5, lambda 500, L = 2. */
typedef struct {
    double X[32], W[9], lifted[96], E1re[72], E1im[72], Zfinal[96], hist[6];
    int y[4];
} golden1d;

static void load_golden1d(golden1d *g)
{
    cJSON *j = golden();
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "conv1d");
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(field(c, "X", g->X, 32), 32);
    ck_assert_uint_eq(field(c, "W", g->W, 9), 9);
    ck_assert_uint_eq(field(c, "lifted", g->lifted, 96), 96);
    ck_assert_uint_eq(field(c, "E1_re", g->E1re, 72), 72);
    ck_assert_uint_eq(field(c, "E1_im", g->E1im, 72), 72);
    ck_assert_uint_eq(field(c, "Zfinal", g->Zfinal, 96), 96);
    ck_assert_uint_eq(field(c, "hist", g->hist, 6), 6);
    double y[4];
    ck_assert_uint_eq(field(c, "y", y, 4), 4);
    for (int i = 0; i < 4; i++) g->y[i] = (int)y[i];
    cJSON_Delete(j);
}

/* ---- data ------------------------------------------------------------------------------------ */

/* SPEC §5 sinusoids: per sample x0 ~ U(0, 10 pi), t = linspace(x0, x0 + 2 pi, T) (endpoint included);
 * mode 1: {sin t, sin 3t}; mode 7: {sin t + N(0, .1^2), sign(sin t) + N(0, .1^2)}. X (2 n, 1, T), class by class. */
static void sinusoids(tu_rng *r, int mode, size_t n, size_t T, double *X, int *y)
{
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < n; i++) {
            size_t b = k * n + i;
            double x0 = tu_uniform(r, 0.0, 10.0 * M_PI);
            for (size_t t = 0; t < T; t++) {
                double tt = x0 + 2.0 * M_PI * (double)t / (double)(T - 1), v;
                if (mode == 1) v = k == 0 ? sin(tt) : sin(3.0 * tt);
                else v = (k == 0 ? sin(tt) : (sin(tt) > 0 ? 1.0 : (sin(tt) < 0 ? -1.0 : 0.0))) + 0.1 * tu_normal(r);
                X[b * T + t] = v;
            }
            if (y) y[b] = (int)k;
        }
}

/* roll along the last two axes of rows arrays (H, W) by (sh, sw): out[h][w] = in[(h - sh) mod H][(w - sw) mod W]. */
static void roll2(size_t rows, size_t H, size_t W, size_t sh, size_t sw, const double *in, double *out)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t h = 0; h < H; h++)
            for (size_t w = 0; w < W; w++)
                out[(r * H + (h + sh) % H) * W + (w + sw) % W] = in[(r * H + h) * W + w];
}

/* ---- reference ------------------------------------------------------------------------------ */

/* The reference reproduces the golden 1-D case (values from an independent NumPy implementation of
 * SPEC §4.2, float64): 1e-10 relative leaves room only for summation-order rounding (~1e-15 here). */
START_TEST(ref_golden_1d)
{
    golden1d g;
    load_golden1d(&g);
    double L[96], hist[6], Z[96], E1[144], mi = 1.0;
    const size_t nops = 2 * 3 * 8 * 9; /* (K+1) N C C complex */
    int yhat[4];
    wbcl_ref_circ_lift(4, 1, 3, 1, 8, 1, 3, g.X, g.W, L);
    assert_normwise_d(L, g.lifted, 96, 1e-12, "lifted");
    memcpy(Z, L, sizeof Z);
    double *ops_all = malloc(2 * nops * sizeof(double));
    ck_assert_ptr_nonnull(ops_all);
    ck_assert_int_eq(wbcl_ref_circ_fit(4, 3, 1, 8, 2, 2, g.y, 0.5, 0.1, 500.0, Z, ops_all, NULL, hist, yhat, &mi), 0);
    assert_normwise_d(hist, g.hist, 6, 1e-10, "(dR, R, Rc) per layer");
    assert_normwise_d(Z, g.Zfinal, 96, 1e-10, "final features");
    ck_assert_msg(mi < 1e-12, "imaginary part of the output %g", mi);
    /* E^1 for every frequency p = 0..7: entry K = 2 of layer 1's ops (K+1, N, C, C) */
    for (size_t p = 0; p < 8; p++)
        for (size_t i = 0; i < 9; i++) {
            E1[p * 9 + i] = ops_all[2 * ((2 * 8 + p) * 9 + i)];
            E1[72 + p * 9 + i] = ops_all[2 * ((2 * 8 + p) * 9 + i) + 1];
        }
    assert_normwise_d(E1, g.E1re, 72, 1e-10, "Re E1_p");
    assert_normwise_d(E1 + 72, g.E1im, 72, 1e-10, "Im E1_p");
    free(ops_all);
}
END_TEST

/* Symmetry of the spectrum operators of real input: E_{N-p} = conj(E_p), and E_p Hermitian. */
static void check_hermitian_pairs(size_t C, size_t H, size_t W, const double complex *Ep, double tol)
{
    size_t N = H * W;
    for (size_t ph = 0; ph < H; ph++)
        for (size_t pw = 0; pw < W; pw++) {
            size_t p = ph * W + pw, q = ((H - ph) % H) * W + (W - pw) % W;
            for (size_t i = 0; i < C; i++)
                for (size_t k = 0; k < C; k++) {
                    double complex a = Ep[(p * C + i) * C + k];
                    ck_assert_msg(cabs(a - conj(Ep[(q * C + i) * C + k])) <= tol, "E_{-p} != conj E_p at p %zu", p);
                    ck_assert_msg(cabs(a - conj(Ep[(p * C + k) * C + i])) <= tol, "E_p not Hermitian at p %zu", p);
                }
        }
    (void)N;
}

/* Dense block-circulant oracle vs the FFT form. Operator: Ebar[(c,s),(d,t)] = (1/N) sum_p E_p[c,d] e^{2 pi i p (s-t)/N}
 * (the inverse unitary DFT of the per-frequency blocks, 2-D as well). One layer: the FFT path (DFT, construct, apply,
 * inverse DFT) equals the dense time-domain layer. Both in double: 1e-9 relative covers the conditioning of
 * I + a S (cond <= 1 + a max|S| ~ 1e3 here) times double rounding. Cases: odd and even lengths, 1-D and 2-D. */
static const size_t dense_cases[][5] = {/* m, C, H, W, K */ {6, 3, 1, 7, 2}, {5, 2, 1, 8, 2}, {6, 2, 3, 4, 3},
                                        {4, 3, 2, 3, 2}};

START_TEST(ref_fft_equals_dense)
{
    const size_t *cs = dense_cases[_i];
    size_t m = cs[0], C = cs[1], H = cs[2], W = cs[3], K = cs[4], N = H * W, n = C * N;
    tu_rng r;
    tu_rng_seed(&r, 100 + (uint64_t)_i);
    double *Z = malloc(m * n * sizeof *Z), *Z2 = malloc(m * n * sizeof *Z2);
    double complex *V = malloc(m * n * sizeof *V), *tmp = malloc(m * n * sizeof *tmp);
    double complex *ops = malloc((K + 1) * N * C * C * sizeof *ops);
    double *Ed = malloc(n * n * sizeof *Ed), *Ef = malloc(n * n * sizeof *Ef), gamma[8];
    int *y = malloc(m * sizeof *y), yh1[16], yh2[16];
    ck_assert(Z && Z2 && V && tmp && ops && Ed && Ef && y);
    for (size_t i = 0; i < m * n; i++) Z[i] = tu_normal(&r);
    for (size_t b = 0; b < m; b++) y[b] = (int)(b % K);
    wbcl_ref_redunet_normalize(m, n, Z);
    for (size_t i = 0; i < m * n; i++) tmp[i] = Z[i];
    wbcl_ref_circ_dft(m * C, H, W, 0, (const double *)tmp, (double *)V);
    ck_assert_int_eq(wbcl_ref_circ_construct(m, C, N, K, (const double *)V, y, 0.1, (double *)ops, gamma), 0);
    check_hermitian_pairs(C, H, W, ops + K * N * C * C, 1e-12);
    /* operator: E and, for class 1, C_1 */
    for (int which = 0; which < 2; which++) {
        const double complex *Ep = ops + (which == 0 ? K : 1) * N * C * C;
        ck_assert_int_eq(wbcl_ref_circ_dense_operator(m, C, H, W, Z, which == 0 ? NULL : y, 1, 0.1, Ed), 0);
        double imax = 0.0;
        for (size_t c = 0; c < C; c++)
            for (size_t s = 0; s < N; s++)
                for (size_t d = 0; d < C; d++)
                    for (size_t t = 0; t < N; t++) {
                        size_t sh = s / W, sw = s % W, th = t / W, tw = t % W;
                        double complex acc = 0.0;
                        for (size_t ph = 0; ph < H; ph++)
                            for (size_t pw = 0; pw < W; pw++) {
                                double a = 2.0 * M_PI *
                                           ((double)(ph * ((sh + H - th) % H) % H) / (double)H +
                                            (double)(pw * ((sw + W - tw) % W) % W) / (double)W);
                                acc += Ep[((ph * W + pw) * C + c) * C + d] * (cos(a) + I * sin(a));
                            }
                        acc /= (double)N;
                        Ef[(c * N + s) * n + d * N + t] = creal(acc);
                        imax = fmax(imax, fabs(cimag(acc)));
                    }
        ck_assert_msg(imax < 1e-12, "FFT-built operator has an imaginary part %g", imax);
        assert_normwise_d(Ef, Ed, n * n, 1e-9, which == 0 ? "E from FFT vs dense" : "C_1 from FFT vs dense");
    }
    /* one layer */
    wbcl_ref_circ_apply(m, C, N, K, (const double *)ops, gamma, 0.5, 50.0, (double *)V, yh1, NULL);
    wbcl_ref_circ_dft(m * C, H, W, 1, (const double *)V, (double *)tmp);
    for (size_t i = 0; i < m * n; i++) {
        ck_assert_msg(fabs(cimag(tmp[i])) < 1e-12, "layer output imaginary part %g", cimag(tmp[i]));
        Z2[i] = creal(tmp[i]);
    }
    ck_assert_int_eq(wbcl_ref_circ_dense_layer(m, C, H, W, K, y, 0.5, 0.1, 50.0, Z, yh2), 0);
    assert_normwise_d(Z2, Z, m * n, 1e-9, "one layer FFT vs dense");
    for (size_t b = 0; b < m; b++) ck_assert_int_eq(yh1[b], yh2[b]);
    free(Z);
    free(Z2);
    free(V);
    free(tmp);
    free(ops);
    free(Ed);
    free(Ef);
    free(y);
}
END_TEST

/* Equivariance of the reference itself (1-D and 2-D): fit on x, apply the fitted network to roll(x): equals
 * roll(f(x)) to 1e-10 (double rounding). */
START_TEST(ref_equivariance)
{
    size_t m = 6, Cin = 1, C = 3, H = _i == 0 ? 1 : 4, W = _i == 0 ? 10 : 5, kh = _i == 0 ? 1 : 2, kw = 3, K = 2,
           Lyr = 2, N = H * W, sh = _i == 0 ? 0 : 1, sw = 3;
    tu_rng r;
    tu_rng_seed(&r, 7 + (uint64_t)_i);
    double *X = malloc(m * Cin * N * sizeof *X), *Xs = malloc(m * Cin * N * sizeof *Xs), Wt[3 * 2 * 3];
    double *Z = malloc(m * C * N * sizeof *Z), *Zs = malloc(m * C * N * sizeof *Zs), *R = malloc(m * C * N * sizeof *R);
    size_t nops = (K + 1) * N * C * C * 2;
    double *ops = malloc(Lyr * nops * sizeof *ops), gam[4], pi1[12], pi2[12];
    int y[6] = {0, 1, 0, 1, 0, 1}, yh1[6], yh2[6];
    for (size_t i = 0; i < m * Cin * N; i++) X[i] = tu_normal(&r);
    for (size_t i = 0; i < C * Cin * kh * kw; i++) Wt[i] = tu_normal(&r);
    wbcl_ref_circ_lift(m, Cin, C, H, W, kh, kw, X, Wt, Z);
    ck_assert_int_eq(wbcl_ref_circ_fit(m, C, H, W, K, Lyr, y, 0.5, 0.1, 50.0, Z, ops, gam, NULL, NULL, NULL), 0);
    wbcl_ref_circ_lift(m, Cin, C, H, W, kh, kw, X, Wt, R);
    ck_assert_int_eq(wbcl_ref_circ_forward(m, C, H, W, K, Lyr, ops, gam, 0.5, 50.0, R, yh1, pi1), 0);
    assert_normwise_d(R, Z, m * C * N, 1e-12, "apply replays fit");
    roll2(m * Cin, H, W, sh, sw, X, Xs);
    wbcl_ref_circ_lift(m, Cin, C, H, W, kh, kw, Xs, Wt, Zs);
    ck_assert_int_eq(wbcl_ref_circ_forward(m, C, H, W, K, Lyr, ops, gam, 0.5, 50.0, Zs, yh2, pi2), 0);
    roll2(m * C, H, W, sh, sw, Z, R);
    assert_normwise_d(Zs, R, m * C * N, 1e-10, "f(roll x) vs roll f(x)");
    assert_normwise_d(pi2, pi1, m * K, 1e-10, "pi under shift");
    for (size_t b = 0; b < m; b++) ck_assert_int_eq(yh1[b], yh2[b]);
    free(X);
    free(Xs);
    free(Z);
    free(Zs);
    free(R);
    free(ops);
}
END_TEST

/* ---- device ---------------------------------------------------------------------------------- */

static wbcl_tensor *upload_d(wbcl_context *ctx, int ndim, const size_t *shape, const double *x)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    float *f = malloc((n ? n : 1) * sizeof *f);
    ck_assert_ptr_nonnull(f);
    for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
    wbcl_tensor *t = NULL;
    ck_assert_int_eq(wbcl_tensor_create(ctx, ndim, shape, WBCL_F32, f, &t), WBCL_SUCCESS);
    free(f);
    return t;
}

static wbcl_tensor *empty_t(wbcl_context *ctx, int ndim, const size_t *shape)
{
    wbcl_tensor *t = NULL;
    ck_assert_int_eq(wbcl_tensor_create(ctx, ndim, shape, WBCL_F32, NULL, &t), WBCL_SUCCESS);
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

/* |got - want| <= rtol * max|want| for every element (float result vs double reference). */
static void assert_normwise(const float *got, const double *want, size_t n, double rtol, const char *what)
{
    tu_assert_close(got, want, n, rtol * max_abs(want, n), 0.0, what);
}

static wbcl_circulant_params cparams(int layers, float lambda)
{
    wbcl_circulant_params p = wbcl_circulant_default_params();
    p.layers = layers;
    p.lambda = lambda;
    return p;
}

static wbcl_circulant *dfit(wbcl_context *ctx, const wbcl_tensor *X, const wbcl_tensor *Wt, const int *y, int K,
                            const wbcl_circulant_params *p, wbcl_tensor *Z)
{
    wbcl_circulant *net = NULL;
    wbcl_status st = wbcl_circulant_fit(ctx, X, Wt, y, K, p, NULL, NULL, Z, &net);
    ck_assert_msg(st == WBCL_SUCCESS, "fit: %s: %s", wbcl_status_name(st), wbcl_context_last_error(ctx));
    ck_assert_ptr_nonnull(net);
    return net;
}

typedef struct {
    int calls;
    double h[3 * 8];
} prog_log;

static void prog_cb(int layer, double dR, double R, double Rc, void *user)
{
    prog_log *pl = user;
    ck_assert_int_eq(layer, pl->calls + 1);
    ck_assert_int_lt(pl->calls, 8);
    pl->h[3 * pl->calls] = dR;
    pl->h[3 * pl->calls + 1] = R;
    pl->h[3 * pl->calls + 2] = Rc;
    pl->calls++;
}

/* The device tests that exercise the application run in both kernel variants (wbcl_context_set_variant):
 * CPU-shaped (16 lanes per work-item) and GPU-shaped (one lane per work-item, the _g kernels); the variant
 * of loop index i is i % 2 (the test case is i / 2). */
static wbcl_context *variant_context(int v)
{
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_variant(ctx, v ? WBCL_VARIANT_GPU : WBCL_VARIANT_CPU), WBCL_SUCCESS);
    return ctx;
}

/* Golden 1-D case on the device (fp32): lifted values and the objective to 1e-5 relative, E^1_p for the
 * stored bins p = 0..4 and the final features to 1e-5 of their largest entry. The float32 error of these
 * well-conditioned 3 x 3 problems (cond(I + a S_p) <= 1 + a |S_p| ~ 10) is a few 1e-7; 1e-5 is the SPEC's
 * stated engine tolerance, with room for the softmax (lambda = 500 amplifies |c_j| errors 500-fold into pi,
 * but pi is saturated at 0/1 here). */
START_TEST(device_golden_1d)
{
    golden1d g;
    load_golden1d(&g);
    wbcl_context *ctx = variant_context(_i);
    const size_t sx[3] = {4, 1, 8}, sw[3] = {3, 1, 3}, sz[3] = {4, 3, 8};
    wbcl_tensor *X = upload_d(ctx, 3, sx, g.X), *Wt = upload_d(ctx, 3, sw, g.W), *Y = empty_t(ctx, 3, sz),
                *Z = empty_t(ctx, 3, sz);
    ck_assert_int_eq(wbcl_circulant_lift(ctx, X, Wt, Y), WBCL_SUCCESS);
    float *Yh = download(ctx, Y);
    assert_normwise(Yh, g.lifted, 96, 1e-6, "lifted");
    wbcl_circulant_params p = cparams(2, 500.0f);
    wbcl_circulant *net = dfit(ctx, X, Wt, g.y, 2, &p, Z);
    ck_assert_int_eq(wbcl_circulant_dims(net), 1);
    ck_assert_int_eq(wbcl_circulant_has_lift(net), 1);
    double h[6];
    for (int l = 0; l < 2; l++)
        ck_assert_int_eq(wbcl_circulant_history(net, l, &h[3 * l], &h[3 * l + 1], &h[3 * l + 2]), WBCL_SUCCESS);
    assert_normwise_d(h, g.hist, 3, 1e-5, "(dR, R, Rc) layer 1");
    assert_normwise_d(h + 3, g.hist + 3, 3, 1e-5, "(dR, R, Rc) layer 2");
    for (int i = 0; i < 6; i++)
        ck_assert_msg(fabs(h[i] - g.hist[i]) <= 1e-5 * fabs(g.hist[i]), "objective %d: %.9g vs %.9g", i, h[i],
                      g.hist[i]);
    /* with a progress callback the objective is read layer by layer (otherwise once at the end): same values */
    prog_log pl = {0, {0}};
    wbcl_circulant *net2 = NULL;
    wbcl_tensor *Zp = empty_t(ctx, 3, sz);
    ck_assert_int_eq(wbcl_circulant_fit(ctx, X, Wt, g.y, 2, &p, prog_cb, &pl, Zp, &net2), WBCL_SUCCESS);
    ck_assert_int_eq(pl.calls, 2);
    for (int i = 0; i < 6; i++) ck_assert_msg(pl.h[i] == h[i], "progress objective %d: %.9g vs %.9g", i, pl.h[i], h[i]);
    wbcl_circulant_destroy(net2);
    wbcl_tensor_destroy(Zp);
    float E[5 * 9 * 2];
    double Ere[45], Eim[45];
    float Er[45], Ei[45];
    ck_assert_int_eq(wbcl_circulant_read_layer(ctx, net, 0, E, NULL, NULL), WBCL_SUCCESS);
    for (int i = 0; i < 45; i++) {
        Er[i] = E[2 * i];
        Ei[i] = E[2 * i + 1];
        Ere[i] = g.E1re[i];
        Eim[i] = g.E1im[i];
    }
    assert_normwise(Er, Ere, 45, 1e-5, "Re E1_p (p = 0..4)");
    tu_assert_close(Ei, Eim, 45, 1e-5 * max_abs(Ere, 45), 0.0, "Im E1_p (p = 0..4)");
    float *Zh = download(ctx, Z);
    assert_normwise(Zh, g.Zfinal, 96, 1e-5, "final features");
    /* apply replays fit on the training samples */
    float pi[8];
    int yhat[4];
    wbcl_tensor *Z2 = empty_t(ctx, 3, sz);
    ck_assert_int_eq(wbcl_circulant_apply(ctx, net, X, Z2, yhat, pi), WBCL_SUCCESS);
    float *Z2h = download(ctx, Z2);
    for (int i = 0; i < 96; i++) ck_assert_float_eq(Z2h[i], Zh[i]);
    for (int b = 0; b < 4; b++) ck_assert_int_eq(yhat[b], g.y[b]);
    tu_guarded_free(Yh);
    tu_guarded_free(Zh);
    tu_guarded_free(Z2h);
    wbcl_circulant_destroy(net);
    wbcl_tensor_destroy(X);
    wbcl_tensor_destroy(Wt);
    wbcl_tensor_destroy(Y);
    wbcl_tensor_destroy(Z);
    wbcl_tensor_destroy(Z2);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Device vs the double reference on random small cases, 1-D and 2-D, odd and even lengths (the Nyquist bin
 * weighting), several layers, both kernel variants: objective per layer to 1e-4 relative, features to 1e-4
 * of their largest entry, operators E_p of the last layer to 1e-4. fp32 error: ~1e-6 per layer in V (C x C solves with
 * cond <= 1 + a|S| ~ 1e2-1e3 here, lambda = 50 keeps pi away from saturation so its sensitivity
 * 50 |dn| stays ~1e-5); 1e-4 bounds the accumulation over 3 layers with a factor 10 of margin. */
static const size_t dev_cases[][8] = {
    /* m, Cin, C, H, W, kh, kw, K */
    {9, 1, 4, 1, 7, 1, 3, 3}, {8, 2, 5, 1, 12, 1, 4, 2}, {6, 1, 3, 1, 5, 1, 2, 2},
    {7, 1, 4, 5, 6, 2, 3, 2}, {6, 2, 3, 4, 4, 3, 3, 3},
    /* the application's tiles (4 rows x 16 lanes, bins in chunks): C = 6, 7, 9 (a partial row tile), K = 1,
     * m = 37 (3 blocks of 16 lanes, 1 bin per chunk), odd lengths */
    {5, 1, 6, 1, 9, 1, 2, 1}, {37, 1, 7, 1, 11, 1, 3, 3}, {20, 1, 9, 3, 5, 2, 2, 2},
    /* the GPU variant's chunks of several bins (it takes one bin per chunk while P <= 16384 / mp): mp = 48,
     * P = 28 x 15 = 420 bins, so circ_update_g takes 2 bins per chunk and circ_norms_q_g 2 */
    {37, 1, 2, 28, 28, 2, 2, 3},
};
/* Which variant runs which case ({case, variant}, variant_context's 0 = CPU, 1 = GPU): the first five in
 * both; the CPU application's row tiles (C = 6, 7, 9) in the CPU variant, the GPU variant's multi-bin
 * chunks in the GPU variant. Each channel count is its own program per variant (CI_C), a cold compile
 * of about 6 s on PoCL, so a case runs where the code it targets is. */
static const unsigned char dev_runs[][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}, {3, 0},
                                            {3, 1}, {4, 0}, {4, 1}, {5, 0}, {6, 0}, {7, 0}, {8, 1}};

/* Lifting alone on the device against wbcl_ref_circ_lift, in both kernel variants (CPU: padded rows, 4 output
 * channels x a row per work-item, 16 columns at a time; GPU: one output per work-item), on sizes that hit the CPU variant's
 * edges: T and W not multiples of 16 (partial last vector), T < 16, k = T and kh = H (the largest kernels the
 * API allows: the padded row wraps all the way round), Cout not a multiple of 4 (a partial channel block),
 * Cin > 1, k = 1, and prime lengths 17 and 19 (lifting needs no FFT, so it takes lengths clFFT cannot do).
 * Tolerance per element, the fp32 dot-product bound: n = Cin kh kw products, each input
 * rounded to fp32 once (2u) and n roundings in the sum, so |y - y_ref| <= gamma_{n+2} sum |w x| with
 * gamma_k = k u / (1 - k u), u = 2^-24 (ReLU is 1-Lipschitz). A kernel larger than the signal is rejected. */
static const size_t lift_cases[][7] = {
    /* m, Cin, Cout, H, W, kh, kw */
    {3, 1, 20, 1, 200, 1, 5}, {2, 1, 5, 1, 7, 1, 7},   {3, 2, 3, 1, 15, 1, 14}, {1, 3, 9, 1, 33, 1, 33},
    {2, 1, 1, 1, 1, 1, 1},    {2, 1, 16, 28, 28, 3, 3}, {2, 2, 5, 5, 21, 5, 21}, {1, 3, 6, 3, 16, 2, 1},
    {2, 1, 4, 7, 3, 7, 3},    {2, 1, 3, 1, 17, 1, 4},   {1, 2, 5, 17, 19, 3, 2},
};

START_TEST(device_lift_vs_reference)
{
    const size_t *cs = lift_cases[_i];
    const size_t m = cs[0], Cin = cs[1], C = cs[2], H = cs[3], W = cs[4], kh = cs[5], kw = cs[6], N = H * W;
    const int dims = H == 1 ? 1 : 2;
    tu_rng r;
    tu_rng_seed(&r, 3000 + (uint64_t)_i);
    double *X = malloc(m * Cin * N * sizeof *X), *Wt = malloc(C * Cin * kh * kw * sizeof *Wt);
    double *Z = malloc(m * C * N * sizeof *Z), *A = malloc(m * C * N * sizeof *A);
    double *Xa = malloc(m * Cin * N * sizeof *Xa), *Wa = malloc(C * Cin * kh * kw * sizeof *Wa);
    for (size_t i = 0; i < m * Cin * N; i++) X[i] = tu_normal(&r), Xa[i] = fabs(X[i]);
    for (size_t i = 0; i < C * Cin * kh * kw; i++) Wt[i] = tu_normal(&r) + 0.2, Wa[i] = fabs(Wt[i]);
    wbcl_ref_circ_lift(m, Cin, C, H, W, kh, kw, X, Wt, Z);
    wbcl_ref_circ_lift(m, Cin, C, H, W, kh, kw, Xa, Wa, A); /* sum |w x| per output (all terms >= 0) */
    const double u = ldexp(1.0, -24), k = (double)(Cin * kh * kw + 2), gam = k * u / (1.0 - k * u);
    size_t sx[4] = {m, Cin, H, W}, sw[4] = {C, Cin, kh, kw}, sz[4] = {m, C, H, W};
    if (dims == 1) {
        sx[2] = W;
        sw[2] = kw;
        sz[2] = W;
    }
    size_t positive = 0;
    for (size_t i = 0; i < m * C * N; i++) positive += Z[i] > 0.0;
    ck_assert_msg(positive > 0, "case %d: every lifted value is 0: the test would not see the sums", _i);
    const wbcl_variant variants[2] = {WBCL_VARIANT_CPU, WBCL_VARIANT_GPU};
    for (int v = 0; v < 2; v++) {
        wbcl_context *ctx = tu_context();
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        wbcl_tensor *Xd = upload_d(ctx, dims + 2, sx, X), *Wd = upload_d(ctx, dims + 2, sw, Wt),
                    *Yd = empty_t(ctx, dims + 2, sz);
        ck_assert_int_eq(wbcl_circulant_lift(ctx, Xd, Wd, Yd), WBCL_SUCCESS);
        float *Y = download(ctx, Yd);
        for (size_t i = 0; i < m * C * N; i++)
            ck_assert_msg(fabs((double)Y[i] - Z[i]) <= gam * A[i] + 1e-30, "case %d variant %d element %zu: %.9g vs %.9g",
                          _i, (int)variants[v], i, (double)Y[i], Z[i]);
        tu_guarded_free(Y);
        /* a kernel one tap wider than the signal is rejected with a message, Y untouched */
        size_t sw2[4] = {C, Cin, kh, kw};
        sw2[dims + 1] = W + 1;
        if (dims == 2) sw2[2] = kh;
        wbcl_tensor *W2 = empty_t(ctx, dims + 2, sw2);
        ck_assert_int_eq(wbcl_circulant_lift(ctx, Xd, W2, Yd), WBCL_ERROR_SHAPE);
        ck_assert_ptr_nonnull(strstr(wbcl_context_last_error(ctx), "lifting kernel has shape"));
        wbcl_tensor_destroy(W2);
        wbcl_tensor_destroy(Xd);
        wbcl_tensor_destroy(Wd);
        wbcl_tensor_destroy(Yd);
        wbcl_context_destroy(ctx);
    }
    free(X);
    free(Wt);
    free(Z);
    free(A);
    free(Xa);
    free(Wa);
}
END_TEST

START_TEST(device_vs_reference)
{
    const size_t *cs = dev_cases[dev_runs[_i][0]];
    size_t m = cs[0], Cin = cs[1], C = cs[2], H = cs[3], W = cs[4], kh = cs[5], kw = cs[6], K = cs[7], N = H * W;
    int dims = H == 1 ? 1 : 2, L = 3;
    tu_rng r;
    tu_rng_seed(&r, 1000 + (uint64_t)dev_runs[_i][0]);
    double *X = malloc(m * Cin * N * sizeof *X), *Wt = malloc(C * Cin * kh * kw * sizeof *Wt);
    double *Z = malloc(m * C * N * sizeof *Z), hist[9];
    size_t nops = (K + 1) * N * C * C * 2;
    double *ops = malloc(L * nops * sizeof *ops), *gam = malloc(L * K * sizeof *gam);
    int *y = malloc(m * sizeof *y);
    for (size_t i = 0; i < m * Cin * N; i++) X[i] = tu_normal(&r);
    for (size_t i = 0; i < C * Cin * kh * kw; i++) Wt[i] = tu_normal(&r) + 0.3; /* positive bias: few dead ReLUs */
    for (size_t b = 0; b < m; b++) y[b] = (int)(b % K);
    wbcl_ref_circ_lift(m, Cin, C, H, W, kh, kw, X, Wt, Z);
    ck_assert_int_eq(wbcl_ref_circ_fit(m, C, H, W, K, L, y, 0.5, 0.1, 50.0, Z, ops, gam, hist, NULL, NULL), 0);

    wbcl_context *ctx = variant_context(dev_runs[_i][1]);
    size_t sx[4] = {m, Cin, H, W}, sw[4] = {C, Cin, kh, kw}, sz[4] = {m, C, H, W};
    if (dims == 1) {
        sx[2] = W;
        sw[2] = kw;
        sz[2] = W;
    }
    wbcl_tensor *Xd = upload_d(ctx, dims + 2, sx, X), *Wd = upload_d(ctx, dims + 2, sw, Wt),
                *Zd = empty_t(ctx, dims + 2, sz);
    wbcl_circulant_params p = cparams(L, 50.0f);
    wbcl_circulant *net = dfit(ctx, Xd, Wd, y, (int)K, &p, Zd);
    float *Zh = download(ctx, Zd);
    assert_normwise(Zh, Z, m * C * N, 1e-4, "features");
    for (int l = 0; l < L; l++) {
        double h[3];
        ck_assert_int_eq(wbcl_circulant_history(net, l, &h[0], &h[1], &h[2]), WBCL_SUCCESS);
        for (int i = 0; i < 3; i++)
            ck_assert_msg(fabs(h[i] - hist[3 * l + i]) <= 1e-4 * fabs(hist[3 * l + 1]),
                          "layer %d objective %d: %.9g vs %.9g", l + 1, i, h[i], hist[3 * l + i]);
    }
    /* E_p of the last layer on the stored bins (ph, pw <= W/2) */
    size_t Wh = W / 2 + 1, P = H * Wh;
    float *E = malloc(P * C * C * 2 * sizeof *E), *Ef = malloc(P * C * C * 2 * sizeof *Ef);
    double *Er = malloc(P * C * C * 2 * sizeof *Er);
    ck_assert_int_eq(wbcl_circulant_read_layer(ctx, net, L - 1, E, NULL, NULL), WBCL_SUCCESS);
    for (size_t ph = 0; ph < H; ph++)
        for (size_t pw = 0; pw < Wh; pw++)
            for (size_t i = 0; i < C * C * 2; i++) {
                Ef[(ph * Wh + pw) * C * C * 2 + i] = E[(ph * Wh + pw) * C * C * 2 + i];
                Er[(ph * Wh + pw) * C * C * 2 + i] = ops[(L - 1) * nops + ((K * N + ph * W + pw) * C * C) * 2 + i];
            }
    assert_normwise(Ef, Er, P * C * C * 2, 1e-4, "E_p of the last layer");
    /* C_{j,p} of the last layer, every class (the device keeps the operators in 16-lane blocks that span
     * classes; read_layer converts to (K, P, C, C)): same tolerance and reasoning as E_p */
    float *Cd = malloc(K * P * C * C * 2 * sizeof *Cd);
    double *Cr = malloc(K * P * C * C * 2 * sizeof *Cr);
    ck_assert_int_eq(wbcl_circulant_read_layer(ctx, net, L - 1, NULL, Cd, NULL), WBCL_SUCCESS);
    for (size_t j = 0; j < K; j++)
        for (size_t ph = 0; ph < H; ph++)
            for (size_t pw = 0; pw < Wh; pw++)
                for (size_t i = 0; i < C * C * 2; i++)
                    Cr[((j * P + ph * Wh + pw) * C * C) * 2 + i] =
                        ops[(L - 1) * nops + ((j * N + ph * W + pw) * C * C) * 2 + i];
    assert_normwise(Cd, Cr, K * P * C * C * 2, 1e-4, "C_{j,p} of the last layer");
    free(Cd);
    free(Cr);
    tu_guarded_free(Zh);
    free(E);
    free(Ef);
    free(Er);
    wbcl_circulant_destroy(net);
    wbcl_tensor_destroy(Xd);
    wbcl_tensor_destroy(Wd);
    wbcl_tensor_destroy(Zd);
    wbcl_context_destroy(ctx);
    free(X);
    free(Wt);
    free(Z);
    free(ops);
    free(gam);
    free(y);
}
END_TEST

/* The GPU variant's work-group kernels (circ_shifted_inverse_wg: a work-group per matrix; circ_gram_g: per
 * bin) against its one-matrix-per-work-item kernels (circulant.wg = 0): the same operations in the same
 * order per entry, so the fit's features, objective and operators must agree bit for bit. Cases: C = 20
 * (the 1-D case of perf/RESULTS.md's channel count; 45 matrices, so the last block of 16 has padding
 * lanes), and C = 7, 2-D. The work-group path is also checked against the double reference (1e-4 of the
 * largest feature, as device_vs_reference) so that agreeing with the other path is not the only check. */
START_TEST(device_wg_same_bits)
{
    static const size_t cases[][8] = {{40, 1, 20, 1, 16, 1, 3, 4}, {12, 1, 7, 3, 5, 2, 2, 3}};
    const size_t *cs = cases[_i];
    size_t m = cs[0], Cin = cs[1], C = cs[2], H = cs[3], W = cs[4], kh = cs[5], kw = cs[6], K = cs[7], N = H * W;
    int dims = H == 1 ? 1 : 2, L = 2;
    tu_rng r;
    tu_rng_seed(&r, 7000 + (uint64_t)_i);
    double *X = malloc(m * Cin * N * sizeof *X), *Wt = malloc(C * Cin * kh * kw * sizeof *Wt);
    double *Zr = malloc(m * C * N * sizeof *Zr);
    int *y = malloc(m * sizeof *y);
    for (size_t i = 0; i < m * Cin * N; i++) X[i] = tu_normal(&r);
    for (size_t i = 0; i < C * Cin * kh * kw; i++) Wt[i] = tu_normal(&r) + 0.3;
    for (size_t b = 0; b < m; b++) y[b] = (int)((b * 7) % K);
    wbcl_ref_circ_lift(m, Cin, C, H, W, kh, kw, X, Wt, Zr);
    ck_assert_int_eq(wbcl_ref_circ_fit(m, C, H, W, K, L, y, 0.5, 0.1, 50.0, Zr, NULL, NULL, NULL, NULL, NULL), 0);
    size_t sx[4] = {m, Cin, H, W}, sw[4] = {C, Cin, kh, kw}, sz[4] = {m, C, H, W};
    if (dims == 1) {
        sx[2] = W;
        sw[2] = kw;
        sz[2] = W;
    }
    const size_t P = H * (W / 2 + 1), nz = m * C * N, nop = (K + 1) * P * C * C * 2;
    float *Zh[2], *ops[2];
    double h[2][3 * 2];
    for (int v = 0; v < 2; v++) {
        wbcl_context *ctx = variant_context(1);
        ck_assert_int_eq(wbcl_context_set_param(ctx, "circulant.wg", v), WBCL_SUCCESS);
        wbcl_tensor *Xd = upload_d(ctx, dims + 2, sx, X), *Wd = upload_d(ctx, dims + 2, sw, Wt),
                    *Zd = empty_t(ctx, dims + 2, sz);
        wbcl_circulant_params p = cparams(L, 50.0f);
        wbcl_circulant *net = dfit(ctx, Xd, Wd, y, (int)K, &p, Zd);
        Zh[v] = download(ctx, Zd);
        ops[v] = malloc(L * nop * sizeof *ops[v]);
        for (int l = 0; l < L; l++) {
            float *o = ops[v] + l * nop;
            ck_assert_int_eq(wbcl_circulant_read_layer(ctx, net, l, o, o + P * C * C * 2, NULL), WBCL_SUCCESS);
            ck_assert_int_eq(wbcl_circulant_history(net, l, &h[v][3 * l], &h[v][3 * l + 1], &h[v][3 * l + 2]),
                             WBCL_SUCCESS);
        }
        wbcl_circulant_destroy(net);
        wbcl_tensor_destroy(Xd);
        wbcl_tensor_destroy(Wd);
        wbcl_tensor_destroy(Zd);
        wbcl_context_destroy(ctx);
    }
    assert_normwise(Zh[1], Zr, nz, 1e-4, "features (work-group kernels)");
    for (size_t i = 0; i < nz; i++)
        ck_assert_msg(memcmp(&Zh[0][i], &Zh[1][i], sizeof(float)) == 0, "feature %zu: %.9g (circulant.wg 0) vs %.9g", i,
                      (double)Zh[0][i], (double)Zh[1][i]);
    for (size_t i = 0; i < L * nop; i++)
        ck_assert_msg(memcmp(&ops[0][i], &ops[1][i], sizeof(float)) == 0, "operator entry %zu: %.9g vs %.9g", i,
                      (double)ops[0][i], (double)ops[1][i]);
    for (int i = 0; i < 3 * L; i++) ck_assert_msg(h[0][i] == h[1][i], "objective %d: %.9g vs %.9g", i, h[0][i], h[1][i]);
    for (int v = 0; v < 2; v++) {
        tu_guarded_free(Zh[v]);
        free(ops[v]);
    }
    free(X);
    free(Wt);
    free(Zr);
    free(y);
}
END_TEST

/* The device path equals the dense block-circulant path: one layer on the device (features given directly,
 * no lifting) vs the dense time-domain layer of the reference (O((NC)^3) construction). Tolerance as above. */
START_TEST(device_vs_dense)
{
    const size_t *cs = dense_cases[_i / 2];
    size_t m = cs[0], C = cs[1], H = cs[2], W = cs[3], K = cs[4], N = H * W, n = C * N;
    tu_rng r;
    tu_rng_seed(&r, 300 + (uint64_t)(_i / 2));
    double *Z = malloc(m * n * sizeof *Z);
    int *y = malloc(m * sizeof *y), yh[16];
    for (size_t i = 0; i < m * n; i++) Z[i] = tu_normal(&r);
    for (size_t b = 0; b < m; b++) y[b] = (int)(b % K);
    wbcl_context *ctx = variant_context(_i % 2);
    int dims = H == 1 ? 1 : 2;
    size_t sz[4] = {m, C, H, W};
    if (dims == 1) sz[2] = W;
    wbcl_tensor *Zd = upload_d(ctx, dims + 2, sz, Z), *Zo = empty_t(ctx, dims + 2, sz);
    wbcl_circulant_params p = cparams(1, 50.0f);
    wbcl_circulant *net = dfit(ctx, Zd, NULL, y, (int)K, &p, Zo);
    wbcl_ref_redunet_normalize(m, n, Z);
    ck_assert_int_eq(wbcl_ref_circ_dense_layer(m, C, H, W, K, y, 0.5, 0.1, 50.0, Z, yh), 0);
    float *Zh = download(ctx, Zo);
    assert_normwise(Zh, Z, m * n, 1e-4, "one layer: device FFT path vs dense block-circulant");
    tu_guarded_free(Zh);
    wbcl_circulant_destroy(net);
    wbcl_tensor_destroy(Zd);
    wbcl_tensor_destroy(Zo);
    wbcl_context_destroy(ctx);
    free(Z);
    free(y);
}
END_TEST

/* Equivariance on the device, 1-D and 2-D: fit on x (with lifting), then f(roll(x, s)) = roll(f(x), s) for
 * several shifts to 1e-5 of the features' largest entry (SPEC §4.3; fp32: the two inputs go through different
 * FFT rounding, ~1e-7 per transform, amplified by the layers' Lipschitz constant ~1 + eta a ~ 10 over 3 layers).
 * Memberships: yhat identical, pi within 1e-4 (lambda = 500 multiplies |c_j| differences ~1e-7). Every output
 * sample has unit norm (1e-5). */
START_TEST(device_equivariance)
{
    const int two_d = _i;
    size_t m = 8, Cin = 2, C = 5, H = two_d ? 6 : 1, W = two_d ? 10 : 30, kh = two_d ? 3 : 1, kw = 3, K = 2,
           N = H * W;
    tu_rng r;
    tu_rng_seed(&r, 77 + (uint64_t)_i);
    double *X = malloc(m * Cin * N * sizeof *X), *Xs = malloc(m * Cin * N * sizeof *Xs),
           *Wt = malloc(C * Cin * kh * kw * sizeof *Wt), *Zr = malloc(m * C * N * sizeof *Zr),
           *Zrr = malloc(m * C * N * sizeof *Zrr);
    int y[8];
    for (size_t b = 0; b < m; b++) {
        y[b] = (int)(b % 2);
        for (size_t i = 0; i < Cin * N; i++) /* two classes: different dominant frequencies plus noise */
            X[b * Cin * N + i] = sin(2.0 * M_PI * (double)((y[b] + 1) * (i % W)) / (double)W + tu_uniform(&r, 0, 6)) +
                                 0.3 * tu_normal(&r);
    }
    for (size_t i = 0; i < C * Cin * kh * kw; i++) Wt[i] = tu_normal(&r);
    wbcl_context *ctx = tu_context();
    int nd = two_d ? 4 : 3;
    size_t sx[4] = {m, Cin, H, W}, sw[4] = {C, Cin, kh, kw}, sz[4] = {m, C, H, W};
    if (!two_d) sx[2] = W, sw[2] = kw, sz[2] = W;
    wbcl_tensor *Xd = upload_d(ctx, nd, sx, X), *Wd = upload_d(ctx, nd, sw, Wt), *Zd = empty_t(ctx, nd, sz),
                *Zs = empty_t(ctx, nd, sz);
    wbcl_circulant_params p = cparams(3, 500.0f);
    wbcl_circulant *net = dfit(ctx, Xd, Wd, y, (int)K, &p, Zd);
    float pi0[16], pi1[16];
    int yh0[8], yh1[8];
    ck_assert_int_eq(wbcl_circulant_apply(ctx, net, Xd, Zd, yh0, pi0), WBCL_SUCCESS);
    float *Z0 = download(ctx, Zd);
    for (size_t i = 0; i < m * C * N; i++) Zr[i] = Z0[i];
    for (size_t b = 0; b < m; b++) {
        double s = 0.0;
        for (size_t i = 0; i < C * N; i++) s += Zr[b * C * N + i] * Zr[b * C * N + i];
        ck_assert_msg(fabs(sqrt(s) - 1.0) < 1e-5, "sample %zu has norm %.9g", b, sqrt(s));
    }
    const size_t shifts[3][2] = {{0, 1}, {two_d ? 2 : 0, 7}, {two_d ? 5 : 0, two_d ? 9 : 29}};
    for (int s = 0; s < 3; s++) {
        roll2(m * Cin, H, W, shifts[s][0], shifts[s][1], X, Xs);
        wbcl_tensor *Xsd = upload_d(ctx, nd, sx, Xs);
        ck_assert_int_eq(wbcl_circulant_apply(ctx, net, Xsd, Zs, yh1, pi1), WBCL_SUCCESS);
        float *Z1 = download(ctx, Zs);
        roll2(m * C, H, W, shifts[s][0], shifts[s][1], Zr, Zrr);
        assert_normwise(Z1, Zrr, m * C * N, 1e-5, "f(roll x) vs roll f(x)");
        for (size_t b = 0; b < m; b++) {
            ck_assert_int_eq(yh1[b], yh0[b]);
            for (size_t j = 0; j < K; j++) ck_assert_msg(fabs(pi1[b * K + j] - pi0[b * K + j]) < 1e-4, "pi moved");
        }
        tu_guarded_free(Z1);
        wbcl_tensor_destroy(Xsd);
    }
    tu_guarded_free(Z0);
    wbcl_circulant_destroy(net);
    wbcl_tensor_destroy(Xd);
    wbcl_tensor_destroy(Wd);
    wbcl_tensor_destroy(Zd);
    wbcl_tensor_destroy(Zs);
    wbcl_context_destroy(ctx);
    free(X);
    free(Xs);
    free(Wt);
    free(Zr);
    free(Zrr);
}
END_TEST

/* Unit norms after every layer: networks of 1, 2, 3 and 4 layers (each a prefix of the next: fit is
 * deterministic and layer l only sees layers < l) all give unit-norm features (1e-5: one float normalization),
 * and the imaginary parts of the output are negligible in the reference (checked there to 1e-12); here the
 * 1- to 4-layer features agree with the reference's to 1e-4. */
START_TEST(device_unit_norm_every_layer)
{
    size_t m = 10, C = 4, T = 20, K = 2;
    tu_rng r;
    tu_rng_seed(&r, 5);
    double *X = malloc(m * C * T * sizeof *X), *Z = malloc(m * C * T * sizeof *Z);
    int y[10];
    for (size_t i = 0; i < m * C * T; i++) X[i] = tu_normal(&r);
    for (size_t b = 0; b < m; b++) y[b] = (int)(b % K);
    wbcl_context *ctx = tu_context();
    size_t sz[3] = {m, C, T};
    wbcl_tensor *Xd = upload_d(ctx, 3, sz, X), *Zd = empty_t(ctx, 3, sz);
    for (int L = 1; L <= 4; L++) {
        wbcl_circulant_params p = cparams(L, 50.0f);
        wbcl_circulant *net = dfit(ctx, Xd, NULL, y, (int)K, &p, Zd);
        float *Zh = download(ctx, Zd);
        for (size_t b = 0; b < m; b++) {
            double s = 0.0;
            for (size_t i = 0; i < C * T; i++) s += (double)Zh[b * C * T + i] * Zh[b * C * T + i];
            ck_assert_msg(fabs(sqrt(s) - 1.0) < 1e-5, "L = %d sample %zu norm %.9g", L, b, sqrt(s));
        }
        double mi = 1.0;
        memcpy(Z, X, m * C * T * sizeof *Z);
        ck_assert_int_eq(wbcl_ref_circ_fit(m, C, 1, T, K, (size_t)L, y, 0.5, 0.1, 50.0, Z, NULL, NULL, NULL, NULL, &mi),
                         0);
        ck_assert_msg(mi < 1e-12, "reference output imaginary part %g", mi);
        assert_normwise(Zh, Z, m * C * T, 1e-4, "features after L layers");
        tu_guarded_free(Zh);
        wbcl_circulant_destroy(net);
    }
    wbcl_tensor_destroy(Xd);
    wbcl_tensor_destroy(Zd);
    wbcl_context_destroy(ctx);
    free(X);
    free(Z);
}
END_TEST

/* Nearest-subspace classifier of the ReduNet papers, made shift-invariant the circulant way: class j's subspace
 * is spanned by all cyclic shifts of r principal directions, i.e. per frequency p the top-r eigenvectors U_{j,p} of
 * S_{j,p} = sum_{train b in j} v_b(p) v_b(p)^H (power iteration with deflation, double); a test sample goes to
 * the class whose subspace keeps most of its energy, sum_p |U_{j,p}^H v(p)|^2. Returns the number correct. */
static int nearest_subspace(size_t C, size_t T, size_t ntr, const float *Ztr, const int *ytr, size_t nte,
                            const float *Zte, const int *yte, int K, int rank)
{
    double complex *Vtr = malloc(ntr * C * T * sizeof *Vtr), *Vte = malloc(nte * C * T * sizeof *Vte),
                   *tmp = malloc((ntr > nte ? ntr : nte) * C * T * sizeof *tmp),
                   *U = malloc((size_t)K * T * (size_t)rank * C * sizeof *U), *S = malloc(C * C * sizeof *S),
                   *u = malloc(C * sizeof *u), *w = malloc(C * sizeof *w);
    ck_assert(Vtr && Vte && tmp && U && S && u && w);
    for (size_t i = 0; i < ntr * C * T; i++) tmp[i] = Ztr[i];
    wbcl_ref_circ_dft(ntr * C, 1, T, 0, (const double *)tmp, (double *)Vtr);
    for (size_t i = 0; i < nte * C * T; i++) tmp[i] = Zte[i];
    wbcl_ref_circ_dft(nte * C, 1, T, 0, (const double *)tmp, (double *)Vte);
    for (int j = 0; j < K; j++)
        for (size_t p = 0; p < T; p++) {
            for (size_t i = 0; i < C * C; i++) S[i] = 0.0;
            for (size_t b = 0; b < ntr; b++)
                if (ytr[b] == j)
                    for (size_t c = 0; c < C; c++)
                        for (size_t d = 0; d < C; d++)
                            S[c * C + d] += Vtr[(b * C + c) * T + p] * conj(Vtr[(b * C + d) * T + p]);
            for (int k = 0; k < rank; k++) {
                double complex *uk = U + (((size_t)j * T + p) * (size_t)rank + (size_t)k) * C;
                for (size_t c = 0; c < C; c++) u[c] = 1.0 + 0.1 * (double)c + 0.01 * I * (double)(c * c);
                for (int it = 0; it < 200; it++) {
                    for (size_t c = 0; c < C; c++) { /* w = S u, deflated against earlier directions */
                        w[c] = 0.0;
                        for (size_t d = 0; d < C; d++) w[c] += S[c * C + d] * u[d];
                    }
                    for (int q = 0; q < k; q++) {
                        const double complex *uq = U + (((size_t)j * T + p) * (size_t)rank + (size_t)q) * C;
                        double complex dot = 0.0;
                        for (size_t c = 0; c < C; c++) dot += conj(uq[c]) * w[c];
                        for (size_t c = 0; c < C; c++) w[c] -= dot * uq[c];
                    }
                    double nn = 0.0;
                    for (size_t c = 0; c < C; c++) nn += creal(w[c] * conj(w[c]));
                    nn = sqrt(nn);
                    if (nn < 1e-300) break;
                    for (size_t c = 0; c < C; c++) u[c] = w[c] / nn;
                }
                memcpy(uk, u, C * sizeof *u);
            }
        }
    int correct = 0;
    for (size_t b = 0; b < nte; b++) {
        int best = 0;
        double bestv = -1.0;
        for (int j = 0; j < K; j++) {
            double e = 0.0;
            for (size_t p = 0; p < T; p++)
                for (int k = 0; k < rank; k++) {
                    const double complex *uk = U + (((size_t)j * T + p) * (size_t)rank + (size_t)k) * C;
                    double complex dot = 0.0;
                    for (size_t c = 0; c < C; c++) dot += conj(uk[c]) * Vte[(b * C + c) * T + p];
                    e += creal(dot * conj(dot));
                }
            if (e > bestv) bestv = e, best = j;
        }
        correct += best == yte[b];
    }
    free(Vtr);
    free(Vte);
    free(tmp);
    free(U);
    free(S);
    free(u);
    free(w);
    return correct;
}

/* Sinusoid data of SPEC §5 (the ReduNet paper's 1-D experiments), modes 1 and 7, the reference run's settings:
 * T = 100, Cout = 10, k = 9, 20 per class, L = 10, eta 0.5, eps2 0.1, lambda 500. dR rises at every layer;
 * held-out samples, and the same samples cyclically shifted by random amounts, are classified by nearest
 * subspace equally well (the same count: the classifier and the network are shift-invariant) and well above
 * chance (>= 80% of 40). */
START_TEST(device_sinusoids)
{
    const int mode = _i == 0 ? 1 : 7;
    const size_t n = 20, T = 100, C = 10, k = 9, m = 2 * n;
    tu_rng r;
    tu_rng_seed(&r, 2024 + (uint64_t)mode);
    double *X = malloc(m * T * sizeof *X), *Xt = malloc(m * T * sizeof *Xt), *Xs = malloc(m * T * sizeof *Xs),
           Wt[10 * 9];
    int y[40], yt[40];
    sinusoids(&r, mode, n, T, X, y);
    sinusoids(&r, mode, n, T, Xt, yt);
    for (size_t b = 0; b < m; b++) {
        size_t s = (size_t)tu_uniform(&r, 0, (double)T);
        roll2(1, 1, T, 0, s, Xt + b * T, Xs + b * T);
    }
    for (size_t i = 0; i < C * k; i++) Wt[i] = tu_normal(&r);
    wbcl_context *ctx = tu_context();
    const size_t sx[3] = {m, 1, T}, sw[3] = {C, 1, k}, sz[3] = {m, C, T};
    wbcl_tensor *Xd = upload_d(ctx, 3, sx, X), *Wd = upload_d(ctx, 3, sw, Wt), *Zd = empty_t(ctx, 3, sz),
                *Xtd = upload_d(ctx, 3, sx, Xt), *Xsd = upload_d(ctx, 3, sx, Xs), *Ztd = empty_t(ctx, 3, sz),
                *Zsd = empty_t(ctx, 3, sz);
    wbcl_circulant_params p = cparams(10, 500.0f);
    wbcl_circulant *net = dfit(ctx, Xd, Wd, y, 2, &p, Zd);
    double prev = -1e300;
    for (int l = 0; l < 10; l++) {
        double dR;
        ck_assert_int_eq(wbcl_circulant_history(net, l, &dR, NULL, NULL), WBCL_SUCCESS);
        ck_assert_msg(dR > prev, "mode %d: dR fell at layer %d: %.9g after %.9g", mode, l + 1, dR, prev);
        prev = dR;
    }
    ck_assert_int_eq(wbcl_circulant_apply(ctx, net, Xtd, Ztd, NULL, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_circulant_apply(ctx, net, Xsd, Zsd, NULL, NULL), WBCL_SUCCESS);
    float *Ztr = download(ctx, Zd), *Zte = download(ctx, Ztd), *Zsh = download(ctx, Zsd);
    int a0 = nearest_subspace(C, T, m, Ztr, y, m, Zte, yt, 2, 1);
    int a1 = nearest_subspace(C, T, m, Ztr, y, m, Zsh, yt, 2, 1);
    ck_assert_msg(a0 == a1, "mode %d: %d of 40 unshifted vs %d shifted", mode, a0, a1);
    ck_assert_msg(a0 >= 32, "mode %d: only %d of 40 test samples classified correctly", mode, a0);
    tu_guarded_free(Ztr);
    tu_guarded_free(Zte);
    tu_guarded_free(Zsh);
    wbcl_circulant_destroy(net);
    wbcl_tensor_destroy(Xd);
    wbcl_tensor_destroy(Wd);
    wbcl_tensor_destroy(Zd);
    wbcl_tensor_destroy(Xtd);
    wbcl_tensor_destroy(Xsd);
    wbcl_tensor_destroy(Ztd);
    wbcl_tensor_destroy(Zsd);
    wbcl_context_destroy(ctx);
    free(X);
    free(Xt);
    free(Xs);
}
END_TEST

/* Bad input: every error a status and a message naming the problem; outputs untouched, *out NULL. */
START_TEST(device_bad_input)
{
    wbcl_context *ctx = tu_context();
    const size_t sx[3] = {4, 1, 8}, sw[3] = {3, 1, 3}, sz[3] = {4, 3, 8};
    double X[32], Wt[9];
    tu_rng r;
    tu_rng_seed(&r, 9);
    for (int i = 0; i < 32; i++) X[i] = tu_normal(&r);
    for (int i = 0; i < 9; i++) Wt[i] = tu_normal(&r) + 1.0;
    wbcl_tensor *Xd = upload_d(ctx, 3, sx, X), *Wd = upload_d(ctx, 3, sw, Wt), *Zd = empty_t(ctx, 3, sz);
    int y[4] = {0, 0, 1, 1}, yb[4] = {0, 0, 0, 2};
    wbcl_circulant_params p = cparams(2, 500.0f);
    wbcl_circulant *net = (wbcl_circulant *)&p; /* must come back NULL */
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, Xd, Wd, yb, 3, &p, NULL, NULL, Zd, &net),
                     WBCL_ERROR_INVALID_ARGUMENT, "class 1 has no samples");
    ck_assert_ptr_null(net);
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, Xd, Wd, yb, 2, &p, NULL, NULL, Zd, &net),
                     WBCL_ERROR_INVALID_ARGUMENT, "labels[3] = 2");
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, Xd, Wd, NULL, 2, &p, NULL, NULL, Zd, &net),
                     WBCL_ERROR_INVALID_ARGUMENT, "labels is NULL");
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, Xd, Wd, y, 2, NULL, NULL, NULL, Zd, &net),
                     WBCL_ERROR_INVALID_ARGUMENT, "params is NULL");
    wbcl_circulant_params bad = p;
    bad.eps2 = -1.0f;
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, Xd, Wd, y, 2, &bad, NULL, NULL, Zd, &net),
                     WBCL_ERROR_INVALID_ARGUMENT, "eps2");
    bad = p;
    bad.layers = 0;
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, Xd, Wd, y, 2, &bad, NULL, NULL, Zd, &net),
                     WBCL_ERROR_INVALID_ARGUMENT, "layers");
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, Xd, Wd, y, 2, &p, NULL, NULL, Xd, &net), WBCL_ERROR_SHAPE,
                     "Z has shape (4, 1, 8)");
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, Xd, Zd, y, 2, &p, NULL, NULL, Zd, &net), WBCL_ERROR_SHAPE,
                     "lifting kernel has shape");
    /* FFT length with a prime factor > 13 */
    const size_t s17[3] = {4, 1, 17}, s17z[3] = {4, 3, 17};
    double X17[68] = {0};
    for (int i = 0; i < 68; i++) X17[i] = sin(0.3 * i);
    wbcl_tensor *X17d = upload_d(ctx, 3, s17, X17), *Z17 = empty_t(ctx, 3, s17z);
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, X17d, Wd, y, 2, &p, NULL, NULL, Z17, &net), WBCL_ERROR_UNSUPPORTED,
                     "FFT length 17 has the prime factor 17");
    /* too many channels */
    const size_t s65[3] = {2, 65, 4};
    wbcl_tensor *X65 = empty_t(ctx, 3, s65);
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, X65, NULL, y, 2, &p, NULL, NULL, NULL, &net), WBCL_ERROR_UNSUPPORTED,
                     "65 channels");
    /* non-finite input */
    double Xn[32];
    memcpy(Xn, X, sizeof Xn);
    Xn[13] = NAN;
    wbcl_tensor *Xnd = upload_d(ctx, 3, sx, Xn);
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, Xnd, Wd, y, 2, &p, NULL, NULL, Zd, &net), WBCL_ERROR_NUMERIC,
                     "non-finite input");
    ck_assert_ptr_null(net);
    /* not positive definite: eps2 so small that a = C/(m eps2) overflows I + a S_p */
    bad = p;
    bad.eps2 = 1e-37f;
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, Xd, Wd, y, 2, &bad, NULL, NULL, Zd, &net), WBCL_ERROR_NUMERIC,
                     "is not positive definite");
    ck_assert_ptr_null(net);
    /* the pivots are checked once at the end of the fit: still the first failing layer, and Z is left
     * untouched (no NaN features) */
    float *Zbefore = download(ctx, Zd);
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, Xd, Wd, y, 2, &bad, NULL, NULL, Zd, &net), WBCL_ERROR_NUMERIC,
                     "wbcl_circulant_fit: layer 1: I + a");
    ck_assert_ptr_null(net);
    float *Zafter = download(ctx, Zd);
    for (int i = 0; i < 96; i++) ck_assert_msg(memcmp(&Zbefore[i], &Zafter[i], sizeof(float)) == 0, "Z[%d] changed", i);
    tu_guarded_free(Zbefore);
    tu_guarded_free(Zafter);
    /* apply: wrong shapes */
    net = dfit(ctx, Xd, Wd, y, 2, &p, Zd);
    tu_assert_status(ctx, wbcl_circulant_apply(ctx, net, Zd, Zd, NULL, NULL), WBCL_ERROR_SHAPE, "the model takes");
    tu_assert_status(ctx, wbcl_circulant_apply(ctx, net, Xd, Xd, NULL, NULL), WBCL_ERROR_SHAPE, "Z has shape");
    tu_assert_status(ctx, wbcl_circulant_apply(ctx, NULL, Xd, Zd, NULL, NULL), WBCL_ERROR_INVALID_ARGUMENT,
                     "net is NULL");
    tu_assert_status(ctx, wbcl_circulant_apply(ctx, net, Xnd, Zd, NULL, NULL), WBCL_ERROR_NUMERIC,
                     "non-finite input");
    tu_assert_status(ctx, wbcl_circulant_read_layer(ctx, net, 2, NULL, NULL, NULL), WBCL_ERROR_INVALID_ARGUMENT,
                     "layer 2 not in [0, 2)");
    ck_assert_int_eq(wbcl_circulant_history(net, 2, NULL, NULL, NULL), WBCL_ERROR_INVALID_ARGUMENT);
    wbcl_circulant_destroy(NULL);
    wbcl_circulant_destroy(net);
    wbcl_tensor_destroy(Xd);
    wbcl_tensor_destroy(Wd);
    wbcl_tensor_destroy(Zd);
    wbcl_tensor_destroy(X17d);
    wbcl_tensor_destroy(Z17);
    wbcl_tensor_destroy(X65);
    wbcl_tensor_destroy(Xnd);
    wbcl_context_destroy(ctx);
    /* the GPU variant's own paths to the two numeric errors: the partial-sum normalization's non-finite flag
     * (circ_spec_scale_g) and the work-group Cholesky's pivot record (circ_shifted_inverse_wg) */
    ctx = variant_context(1);
    Xd = upload_d(ctx, 3, sx, X);
    Wd = upload_d(ctx, 3, sw, Wt);
    Zd = empty_t(ctx, 3, sz);
    Xnd = upload_d(ctx, 3, sx, Xn);
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, Xnd, Wd, y, 2, &p, NULL, NULL, Zd, &net), WBCL_ERROR_NUMERIC,
                     "non-finite input");
    ck_assert_ptr_null(net);
    tu_assert_status(ctx, wbcl_circulant_fit(ctx, Xd, Wd, y, 2, &bad, NULL, NULL, Zd, &net), WBCL_ERROR_NUMERIC,
                     "wbcl_circulant_fit: layer 1: I + a");
    ck_assert_ptr_null(net);
    wbcl_tensor_destroy(Xd);
    wbcl_tensor_destroy(Wd);
    wbcl_tensor_destroy(Zd);
    wbcl_tensor_destroy(Xnd);
    wbcl_context_destroy(ctx);
}
END_TEST

/* The device objective of given features equals the reference's (1e-5 relative: float log-determinants of
 * well-conditioned matrices summed in double), with an empty group skipped, 1-D and 2-D. */
START_TEST(device_objective)
{
    size_t m = 9, C = 3, H = _i ? 4 : 1, W = _i ? 6 : 10, N = H * W;
    tu_rng r;
    tu_rng_seed(&r, 31 + (uint64_t)_i);
    double *Z = malloc(m * C * N * sizeof *Z), *tmp = malloc(2 * m * C * N * sizeof *tmp),
           *V = malloc(2 * m * C * N * sizeof *V), want[3];
    int lab[9] = {0, 1, 0, 1, 0, 3, 3, 0, 1}; /* class 2 empty */
    for (size_t i = 0; i < m * C * N; i++) Z[i] = tu_normal(&r);
    for (size_t i = 0; i < m * C * N; i++) tmp[2 * i] = Z[i], tmp[2 * i + 1] = 0.0;
    wbcl_ref_circ_dft(m * C, H, W, 0, tmp, V);
    ck_assert_int_eq(wbcl_ref_circ_objective(m, C, N, 4, V, lab, 0.1, want), 0);
    wbcl_context *ctx = tu_context();
    size_t sz[4] = {m, C, H, W};
    if (!_i) sz[2] = W;
    wbcl_tensor *Zd = upload_d(ctx, _i ? 4 : 3, sz, Z);
    double got[3];
    ck_assert_int_eq(wbcl_circulant_objective(ctx, Zd, lab, 4, 0.1f, &got[0], &got[1], &got[2]), WBCL_SUCCESS);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= 1e-5 * fabs(want[1]), "objective %d: %.9g vs %.9g", i, got[i],
                      want[i]);
    wbcl_tensor_destroy(Zd);
    wbcl_context_destroy(ctx);
    free(Z);
    free(tmp);
    free(V);
}
END_TEST

/* Model files: a 2-D model with its lifting kernel and a 1-D model without one survive save/load bit for bit
 * (same operators, history, parameters; apply gives identical features); damaged files are refused with a
 * message naming the file and the problem. */
START_TEST(save_load_roundtrip)
{
    const int two_d = _i;
    size_t m = 6, Cin = 2, C = 3, H = two_d ? 4 : 1, W = 6, kh = two_d ? 2 : 1, kw = 3, N = H * W;
    tu_rng r;
    tu_rng_seed(&r, 55 + (uint64_t)_i);
    double *X = malloc(m * Cin * N * sizeof *X), Wt[3 * 2 * 2 * 3];
    int y[6] = {0, 1, 2, 0, 1, 2};
    for (size_t i = 0; i < m * Cin * N; i++) X[i] = tu_normal(&r);
    for (size_t i = 0; i < C * Cin * kh * kw; i++) Wt[i] = tu_normal(&r) + 0.5;
    wbcl_context *ctx = tu_context();
    int nd = two_d ? 4 : 3;
    size_t sx[4] = {m, Cin, H, W}, sw[4] = {C, Cin, kh, kw}, sz[4] = {m, C, H, W};
    if (!two_d) sx[2] = W, sw[2] = kw, sz[2] = W;
    wbcl_tensor *Xd = upload_d(ctx, nd, sx, X), *Wd = upload_d(ctx, nd, sw, Wt), *Z1 = empty_t(ctx, nd, sz),
                *Z2 = empty_t(ctx, nd, sz), *Lf = empty_t(ctx, nd, sz);
    wbcl_circulant_params p = cparams(3, 100.0f);
    wbcl_circulant *net;
    /* the 1-D model takes features (lifted beforehand), the 2-D one raw signals */
    if (two_d) net = dfit(ctx, Xd, Wd, y, 3, &p, NULL);
    else {
        ck_assert_int_eq(wbcl_circulant_lift(ctx, Xd, Wd, Lf), WBCL_SUCCESS);
        net = dfit(ctx, Lf, NULL, y, 3, &p, NULL);
    }
    char path[256];
    snprintf(path, sizeof path, "%s/wbcl_circ_%d_%d.safetensors", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid(), _i);
    ck_assert_int_eq(wbcl_circulant_save(ctx, net, path), WBCL_SUCCESS);
    wbcl_circulant *back = NULL;
    wbcl_status st = wbcl_circulant_load(ctx, path, &back);
    ck_assert_msg(st == WBCL_SUCCESS, "load: %s", wbcl_context_last_error(ctx));
    ck_assert_int_eq(wbcl_circulant_dims(back), two_d ? 2 : 1);
    ck_assert_int_eq(wbcl_circulant_has_lift(back), two_d);
    ck_assert_int_eq(wbcl_circulant_layers(back), 3);
    ck_assert_uint_eq(wbcl_circulant_height(back), H);
    ck_assert_float_eq(wbcl_circulant_get_params(back).lambda, 100.0f);
    for (int l = 0; l < 3; l++) {
        double a[3], b[3];
        ck_assert_int_eq(wbcl_circulant_history(net, l, &a[0], &a[1], &a[2]), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_circulant_history(back, l, &b[0], &b[1], &b[2]), WBCL_SUCCESS);
        for (int i = 0; i < 3; i++) ck_assert(a[i] == b[i]);
    }
    const wbcl_tensor *in = two_d ? Xd : Lf;
    ck_assert_int_eq(wbcl_circulant_apply(ctx, net, in, Z1, NULL, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_circulant_apply(ctx, back, in, Z2, NULL, NULL), WBCL_SUCCESS);
    float *a = download(ctx, Z1), *b = download(ctx, Z2);
    ck_assert(memcmp(a, b, m * C * N * sizeof *a) == 0);
    tu_guarded_free(a);
    tu_guarded_free(b);
    /* damaged files */
    wbcl_circulant *bad = NULL;
    tu_assert_status(ctx, wbcl_circulant_load(ctx, "/nonexistent/model.safetensors", &bad), WBCL_ERROR_IO,
                     "nonexistent");
    char err[256];
    wbcl_array arr;
    const size_t s1[2] = {2, 2};
    ck_assert_int_eq(wbcl_array_alloc(&arr, WBCL_ELEM_F32, 2, s1, err, sizeof err), WBCL_SUCCESS);
    const char *nm[1] = {"ops"};
    const wbcl_array *aa[1] = {&arr};
    const char *k1[2] = {"format", "version"}, *v1[2] = {"wbcl.redunet", "1"}, *v2[2] = {"wbcl.circulant", "1"};
    ck_assert_int_eq(wbcl_safetensors_write(path, 1, nm, aa, 2, k1, v1, err, sizeof err), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_circulant_load(ctx, path, &bad), WBCL_ERROR_FORMAT, "not 'wbcl.circulant'");
    ck_assert_int_eq(wbcl_safetensors_write(path, 1, nm, aa, 2, k1, v2, err, sizeof err), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_circulant_load(ctx, path, &bad), WBCL_ERROR_FORMAT, "metadata 'dims' is missing");
    const char *k3[11] = {"format", "version", "dims", "channels", "height", "width", "classes", "layers", "eta",
                          "eps2", "lambda"};
    const char *v3[11] = {"wbcl.circulant", "1", "1", "2", "1", "4", "2", "1", "0.5", "0.1", "500"};
    ck_assert_int_eq(wbcl_safetensors_write(path, 1, nm, aa, 11, k3, v3, err, sizeof err), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_circulant_load(ctx, path, &bad), WBCL_ERROR_SHAPE, "tensor 'ops' has shape (2, 2)");
    ck_assert_ptr_null(bad);
    wbcl_array_free(&arr);
    unlink(path);
    wbcl_circulant_destroy(net);
    wbcl_circulant_destroy(back);
    wbcl_tensor_destroy(Xd);
    wbcl_tensor_destroy(Wd);
    wbcl_tensor_destroy(Z1);
    wbcl_tensor_destroy(Z2);
    wbcl_tensor_destroy(Lf);
    wbcl_context_destroy(ctx);
    free(X);
}
END_TEST

/* wbcl-run redunet1d.fit / .apply / redunet2d.apply (SPEC §6.3) on the golden 1-D case: exit status 0, the
 * features match the golden values (1e-5 as device_golden_1d), apply replays fit exactly, a 1-D model is
 * refused by redunet2d.apply with a non-zero status. */
static int run_tool(const char *dir, const char *const *args)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = WBCL_TOOLS_DIR "/wbcl-run";
    for (; *args && n < 31; args++) argv[n++] = *args;
    argv[n] = NULL;
    char log[512];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd < 0) _exit(126);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_ne(WEXITSTATUS(status), 127);
    return WEXITSTATUS(status);
}

START_TEST(cli_redunet1d)
{
    golden1d g;
    load_golden1d(&g);
    char dir[256], px[300], pw[300], py[300], pz[300], pz2[300], pm[300], err[256];
    snprintf(dir, sizeof dir, "%s/wbcl_circ_cli_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(px, sizeof px, "%s/X.npy", dir);
    snprintf(pw, sizeof pw, "%s/W.npy", dir);
    snprintf(py, sizeof py, "%s/y.npy", dir);
    snprintf(pz, sizeof pz, "%s/Z.npy", dir);
    snprintf(pz2, sizeof pz2, "%s/Z2.npy", dir);
    snprintf(pm, sizeof pm, "%s/m.safetensors", dir);
    float X[32], W[9], y[4];
    for (int i = 0; i < 32; i++) X[i] = (float)g.X[i];
    for (int i = 0; i < 9; i++) W[i] = (float)g.W[i];
    for (int i = 0; i < 4; i++) y[i] = (float)g.y[i];
    const size_t sx[3] = {4, 1, 8}, sw[3] = {3, 1, 3}, sy[1] = {4};
    ck_assert_int_eq(wbcl_npy_write_f32(px, 3, sx, X, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_npy_write_f32(pw, 3, sw, W, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_npy_write_f32(py, 1, sy, y, err, sizeof err), WBCL_SUCCESS);
    const char *fit[] = {"redunet1d.fit", "--input", px, "--lift", pw, "--labels", py, "--output", pz, "--save", pm,
                         "--param", "layers=2", NULL};
    ck_assert_int_eq(run_tool(dir, fit), 0);
    const char *app[] = {"redunet1d.apply", "--model", pm, "--input", px, "--output", pz2, NULL};
    ck_assert_int_eq(run_tool(dir, app), 0);
    const char *bad[] = {"redunet2d.apply", "--model", pm, "--input", px, "--output", pz2, NULL};
    ck_assert_int_ne(run_tool(dir, bad), 0);
    wbcl_array a, b;
    ck_assert_int_eq(wbcl_npy_read(pz, &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_npy_read(pz2, &b, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(a.ndim, 3);
    ck_assert_uint_eq(wbcl_array_numel(&a), 96);
    assert_normwise((const float *)a.data, g.Zfinal, 96, 1e-5, "wbcl-run redunet1d.fit features");
    ck_assert(memcmp(a.data, b.data, 96 * sizeof(float)) == 0);
    wbcl_array_free(&a);
    wbcl_array_free(&b);
    const char *files[] = {px, pw, py, pz, pz2, pm};
    for (int i = 0; i < 6; i++) unlink(files[i]);
    char log[512];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    unlink(log);
    rmdir(dir);
}
END_TEST

/* wbcl-run redunet2d.fit --lift / redunet2d.apply round trip on a tiny random 2-D case (m = 8 images of 1 x 6 x 8,
 * lifting to C = 3 channels with a 2 x 3 kernel, K = 2, 3 layers, lambda = 50): the fit's features equal the
 * double reference (ref lift + ref fit) to 1e-4 of their largest entry and every sample has unit norm (1e-5) —
 * tolerances as device_vs_reference / device_unit_norm_every_layer; the objective CSV has a header and one
 * row per layer with (dR, R, Rc) equal to the reference's to 1e-4 relative (of R) and dR = R - Rc; apply on the
 * training images replays fit bit for bit, and on the images rolled by (1, 3) gives the rolled features (1e-5:
 * equivariance through the tool). Bad inputs fail with a message and leave their output files unwritten: 1-D
 * signals given to redunet2d.fit, labels of the wrong length, the 2-D model given to redunet1d.apply. */
static int file_exists(const char *p) { return access(p, F_OK) == 0; }

START_TEST(cli_redunet2d)
{
    const size_t m = 8, Cin = 1, C = 3, H = 6, W = 8, kh = 2, kw = 3, K = 2, L = 3, N = H * W;
    tu_rng r;
    tu_rng_seed(&r, 4242);
    double X[8 * 1 * 48], Wt[3 * 1 * 2 * 3], Zr[8 * 3 * 48], hist[9];
    int y[8];
    for (size_t i = 0; i < m * Cin * N; i++) X[i] = tu_normal(&r);
    for (size_t i = 0; i < C * Cin * kh * kw; i++) Wt[i] = tu_normal(&r) + 0.3; /* few dead ReLUs */
    for (size_t b = 0; b < m; b++) y[b] = (int)(b % K);
    wbcl_ref_circ_lift(m, Cin, C, H, W, kh, kw, X, Wt, Zr);
    ck_assert_int_eq(wbcl_ref_circ_fit(m, C, H, W, K, L, y, 0.5, 0.1, 50.0, Zr, NULL, NULL, hist, NULL, NULL), 0);

    char dir[256], px[300], pxs[300], px1[300], pw[300], py[300], pyb[300], pz[300], pz2[300], pz3[300], pm[300],
        pc[300], pbad[300], err[256];
    snprintf(dir, sizeof dir, "%s/wbcl_circ_cli2_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(px, sizeof px, "%s/X.npy", dir);
    snprintf(pxs, sizeof pxs, "%s/Xs.npy", dir);
    snprintf(px1, sizeof px1, "%s/X1d.npy", dir);
    snprintf(pw, sizeof pw, "%s/W.npy", dir);
    snprintf(py, sizeof py, "%s/y.npy", dir);
    snprintf(pyb, sizeof pyb, "%s/ybad.npy", dir);
    snprintf(pz, sizeof pz, "%s/Z.npy", dir);
    snprintf(pz2, sizeof pz2, "%s/Z2.npy", dir);
    snprintf(pz3, sizeof pz3, "%s/Z3.npy", dir);
    snprintf(pm, sizeof pm, "%s/m.safetensors", dir);
    snprintf(pc, sizeof pc, "%s/objective.csv", dir);
    snprintf(pbad, sizeof pbad, "%s/never.npy", dir);
    float Xf[8 * 48], Xs[8 * 48], Wf[3 * 1 * 2 * 3], yf[8], yb[7];
    const size_t sh = 1, sw = 3; /* the roll */
    for (size_t b = 0; b < m; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t w = 0; w < W; w++) {
                Xf[(b * H + h) * W + w] = (float)X[(b * H + h) * W + w];
                Xs[(b * H + (h + sh) % H) * W + (w + sw) % W] = (float)X[(b * H + h) * W + w];
            }
    for (size_t i = 0; i < C * Cin * kh * kw; i++) Wf[i] = (float)Wt[i];
    for (size_t i = 0; i < m; i++) yf[i] = (float)y[i];
    for (size_t i = 0; i < 7; i++) yb[i] = (float)y[i];
    const size_t sx[4] = {m, Cin, H, W}, sx1[3] = {m, Cin, N}, swt[4] = {C, Cin, kh, kw}, sy[1] = {m}, syb[1] = {7};
    ck_assert_int_eq(wbcl_npy_write_f32(px, 4, sx, Xf, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_npy_write_f32(pxs, 4, sx, Xs, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_npy_write_f32(px1, 3, sx1, Xf, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_npy_write_f32(pw, 4, swt, Wf, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_npy_write_f32(py, 1, sy, yf, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_npy_write_f32(pyb, 1, syb, yb, err, sizeof err), WBCL_SUCCESS);

    const char *fit[] = {"redunet2d.fit", "--input", px, "--lift", pw, "--labels", py, "--output", pz, "--save", pm,
                         "--log", pc, "--param", "layers=3", "--param", "lambda=50", NULL};
    ck_assert_int_eq(run_tool(dir, fit), 0);
    wbcl_array a, b, c;
    ck_assert_int_eq(wbcl_npy_read(pz, &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(a.ndim, 4);
    ck_assert(a.shape[0] == m && a.shape[1] == C && a.shape[2] == H && a.shape[3] == W);
    const float *Z = (const float *)a.data;
    assert_normwise(Z, Zr, m * C * N, 1e-4, "wbcl-run redunet2d.fit features vs reference");
    for (size_t s = 0; s < m; s++) {
        double nn = 0;
        for (size_t i = 0; i < C * N; i++) nn += (double)Z[s * C * N + i] * Z[s * C * N + i];
        ck_assert_msg(fabs(sqrt(nn) - 1.0) <= 1e-5, "sample %zu has norm %.9g", s, sqrt(nn));
    }
    /* the objective log */
    FILE *f = fopen(pc, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_str_eq(line, "layer,dR,R,Rc\n");
    for (size_t l = 0; l < L; l++) {
        int layer;
        double dR, R, Rc;
        ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
        ck_assert_int_eq(sscanf(line, "%d,%lf,%lf,%lf", &layer, &dR, &R, &Rc), 4);
        ck_assert_int_eq(layer, (int)l + 1);
        ck_assert_msg(fabs(dR - (R - Rc)) <= 1e-6 * fabs(R), "layer %zu: dR %.9g != R - Rc %.9g", l + 1, dR, R - Rc);
        const double got[3] = {dR, R, Rc};
        for (int i = 0; i < 3; i++)
            ck_assert_msg(fabs(got[i] - hist[3 * l + i]) <= 1e-4 * fabs(hist[3 * l + 1]),
                          "layer %zu objective %d: %.9g vs reference %.9g", l + 1, i, got[i], hist[3 * l + i]);
    }
    ck_assert_ptr_null(fgets(line, sizeof line, f));
    fclose(f);
    /* apply: replays fit on the training images; equivariant under a 2-D roll */
    const char *app[] = {"redunet2d.apply", "--model", pm, "--input", px, "--output", pz2, NULL};
    ck_assert_int_eq(run_tool(dir, app), 0);
    const char *apps[] = {"redunet2d.apply", "--model", pm, "--input", pxs, "--output", pz3, NULL};
    ck_assert_int_eq(run_tool(dir, apps), 0);
    ck_assert_int_eq(wbcl_npy_read(pz2, &b, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_npy_read(pz3, &c, err, sizeof err), WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_array_numel(&b), m * C * N);
    ck_assert(memcmp(a.data, b.data, m * C * N * sizeof(float)) == 0);
    const float *Zs = (const float *)c.data;
    float zmax = 0;
    for (size_t i = 0; i < m * C * N; i++) zmax = fabsf(Z[i]) > zmax ? fabsf(Z[i]) : zmax;
    for (size_t q = 0; q < m * C; q++)
        for (size_t h = 0; h < H; h++)
            for (size_t w = 0; w < W; w++) {
                float want = Z[(q * H + h) * W + w], got = Zs[(q * H + (h + sh) % H) * W + (w + sw) % W];
                ck_assert_msg(fabsf(got - want) <= 1e-5f * zmax, "f(roll x) != roll f(x) at %zu,%zu,%zu: %g vs %g", q,
                              h, w, (double)got, (double)want);
            }
    wbcl_array_free(&a);
    wbcl_array_free(&b);
    wbcl_array_free(&c);
    /* bad inputs: a message in the log, a non-zero status, no output file */
    char log[512], logtxt[1 << 14];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    const char *bad1[] = {"redunet2d.fit", "--input", px1, "--lift", pw, "--labels", py, "--output", pbad, NULL};
    const char *bad2[] = {"redunet2d.fit", "--input", px, "--lift", pw, "--labels", pyb, "--output", pbad, NULL};
    const char *bad3[] = {"redunet1d.apply", "--model", pm, "--input", px, "--output", pbad, NULL};
    const char *const *bads[3] = {bad1, bad2, bad3};
    const char *want_msg[3] = {"takes (m, Cin, H, W)", "expected (8)", "use redunet2d.apply"};
    for (int i = 0; i < 3; i++) {
        unlink(log);
        ck_assert_int_ne(run_tool(dir, bads[i]), 0);
        f = fopen(log, "r");
        ck_assert_ptr_nonnull(f);
        size_t n = fread(logtxt, 1, sizeof logtxt - 1, f);
        logtxt[n] = 0;
        fclose(f);
        ck_assert_msg(strstr(logtxt, want_msg[i]) != NULL, "bad case %d: no '%s' in: %s", i, want_msg[i], logtxt);
        ck_assert_msg(!file_exists(pbad), "bad case %d wrote its output", i);
    }
    const char *files[] = {px, pxs, px1, pw, py, pyb, pz, pz2, pz3, pm, pc, log};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(files[i]);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* clFFT's process-wide setup is reference-counted: two contexts use FFTs side by side, the first is destroyed,
 * the second keeps working (and gives the same features as before), then a third context starts afresh. */
START_TEST(fft_two_contexts)
{
    golden1d g;
    load_golden1d(&g);
    const size_t sx[3] = {4, 1, 8}, sw[3] = {3, 1, 3}, sz[3] = {4, 3, 8};
    wbcl_circulant_params p = cparams(2, 500.0f);
    float *Zs[3];
    wbcl_context *c1 = tu_context(), *c2 = tu_context(), *c3 = NULL;
    wbcl_context *order[3] = {c1, c2, c2};
    for (int i = 0; i < 3; i++) {
        wbcl_context *ctx = order[i];
        if (i == 2) wbcl_context_destroy(c1); /* c2 must still have clFFT */
        wbcl_tensor *X = upload_d(ctx, 3, sx, g.X), *Wt = upload_d(ctx, 3, sw, g.W), *Z = empty_t(ctx, 3, sz);
        wbcl_circulant *net = dfit(ctx, X, Wt, g.y, 2, &p, Z);
        Zs[i] = download(ctx, Z);
        wbcl_circulant_destroy(net);
        wbcl_tensor_destroy(X);
        wbcl_tensor_destroy(Wt);
        wbcl_tensor_destroy(Z);
    }
    wbcl_context_destroy(c2);
    c3 = tu_context(); /* after the last teardown */
    wbcl_tensor *X = upload_d(c3, 3, sx, g.X), *Wt = upload_d(c3, 3, sw, g.W), *Z = empty_t(c3, 3, sz);
    wbcl_circulant *net = dfit(c3, X, Wt, g.y, 2, &p, Z);
    float *Z3 = download(c3, Z);
    for (int i = 0; i < 96; i++) {
        ck_assert_float_eq(Zs[1][i], Zs[0][i]);
        ck_assert_float_eq(Zs[2][i], Zs[0][i]);
        ck_assert_float_eq(Z3[i], Zs[0][i]);
    }
    for (int i = 0; i < 3; i++) tu_guarded_free(Zs[i]);
    tu_guarded_free(Z3);
    wbcl_circulant_destroy(net);
    wbcl_tensor_destroy(X);
    wbcl_tensor_destroy(Wt);
    wbcl_tensor_destroy(Z);
    wbcl_context_destroy(c3);
}
END_TEST

/* The FFT wrapper itself (host/core/fft.h), both of its paths: the direct DFT of cl/dft.cl for H W <= 64
 * and clFFT above, forward and inverse, 1-D and 2-D, odd and even W, W = 1, the boundary 64 / 72, against
 * a double-precision DFT written from the definition (unitary scale (H W)^-1/2 both ways). The clFFT
 * shapes and batches are those the layer tests already plan (T = 100 with 400 rows, 28 x 28 with 74), so
 * their programs are shared. Inputs uniform in [-1, 1). Tolerance 4e-6 on the largest error relative to
 * the largest reference value: a direct DFT's float sums of H W <= 64 terms err by ~ sqrt(H W) eps
 * (5e-7 here), an FFT's by ~ log2(H W) eps (1e-6); a wrong twiddle, bin or scale errs by O(1). The
 * inverse is fed the exact (double) spectrum rounded to float and must give back the signal. */
START_TEST(fft_paths)
{
    static const size_t cases[][3] = {{1, 7, 3}, {3, 5, 2}, {4, 1, 5}, {1, 1, 2}, {8, 8, 2}, {2, 6, 3},
                                      {8, 9, 2}, {1, 100, 400}, {28, 28, 74}};
    wbcl_context *ctx = tu_context();
    tu_rng rng;
    tu_rng_seed(&rng, 2611);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const size_t H = cases[c][0], W = cases[c][1], B = cases[c][2], Wh = W / 2 + 1, N = H * W;
        float *x = tu_random_f32(&rng, B * N, -1.0, 1.0);
        double *Xd = malloc(B * H * Wh * 2 * sizeof *Xd);
        float *Xf = malloc(B * H * Wh * 2 * sizeof *Xf), *got = malloc(B * N * sizeof *got);
        ck_assert(Xd && Xf && got);
        const double s = 1.0 / sqrt((double)N);
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < H; h++)
                for (size_t k = 0; k < Wh; k++) {
                    double re = 0, im = 0;
                    for (size_t y = 0; y < H; y++)
                        for (size_t u = 0; u < W; u++) {
                            const double a = -2.0 * M_PI * ((double)(h * y % H) / H + (double)(k * u % W) / W);
                            re += x[(b * H + y) * W + u] * cos(a);
                            im += x[(b * H + y) * W + u] * sin(a);
                        }
                    Xd[((b * H + h) * Wh + k) * 2] = re * s;
                    Xd[((b * H + h) * Wh + k) * 2 + 1] = im * s;
                }
        for (size_t i = 0; i < B * H * Wh * 2; i++) Xf[i] = (float)Xd[i];
        const size_t sx[3] = {B, H, W}, sX[3] = {B, H, Wh * 2};
        wbcl_tensor *tx = NULL, *tX = NULL, *ty = NULL;
        ck_assert_int_eq(wbcl_tensor_create(ctx, 3, sx, WBCL_F32, x, &tx), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_tensor_create(ctx, 3, sX, WBCL_F32, NULL, &tX), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_tensor_create(ctx, 3, sx, WBCL_F32, NULL, &ty), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl__fft_forward(ctx, B, H, W, tx->mem, tX->mem), WBCL_SUCCESS);
        float *Xg = download(ctx, tX);
        double err = 0, ref = 0;
        for (size_t i = 0; i < B * H * Wh * 2; i++) {
            err = fmax(err, fabs(Xg[i] - Xd[i]));
            ref = fmax(ref, fabs(Xd[i]));
        }
        ck_assert_msg(err <= 4e-6 * ref, "forward H %zu W %zu batch %zu: max error %.3g (max %.3g)", H, W, B, err, ref);
        ck_assert_int_eq(wbcl_tensor_write(ctx, tX, Xf, B * H * Wh * 2), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl__fft_inverse(ctx, B, H, W, tX->mem, ty->mem), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_tensor_read(ctx, ty, got, B * N), WBCL_SUCCESS);
        err = ref = 0;
        for (size_t i = 0; i < B * N; i++) {
            err = fmax(err, fabs((double)got[i] - x[i]));
            ref = fmax(ref, fabs((double)x[i]));
        }
        ck_assert_msg(err <= 4e-6 * ref, "inverse H %zu W %zu batch %zu: max error %.3g (max %.3g)", H, W, B, err, ref);
        tu_guarded_free(Xg);
        free(x);
        free(Xd);
        free(Xf);
        free(got);
        wbcl_tensor_destroy(tx);
        wbcl_tensor_destroy(tX);
        wbcl_tensor_destroy(ty);
    }
    /* A length clFFT cannot do is refused on both paths, naming it. */
    wbcl_tensor *t = NULL;
    const size_t s1[1] = {68 * 2};
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s1, WBCL_F32, NULL, &t), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl__fft_forward(ctx, 1, 1, 17, t->mem, t->mem), WBCL_ERROR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(wbcl_context_last_error(ctx), "17"));
    ck_assert_int_eq(wbcl__fft_forward(ctx, 1, 1, 68, t->mem, t->mem), WBCL_ERROR_UNSUPPORTED); /* clFFT's */
    wbcl_tensor_destroy(t);
    wbcl_context_destroy(ctx);
}
END_TEST

/* The class norms ||C_{j,p} v|| in the regime where a sample lies in its class's strong directions: every
 * class's samples are cyclic shifts of one template (per bin the class spectra are collinear, S_{j,p} of
 * rank 1) plus 1e-4 noise, the two templates differ by 3%, eps2 = 1e-3 (alpha = C / (n_j eps2) = 1000), so
 * the own-class norm is a small fraction of alpha |v| — where a quadratic form v^H C^2 v would cancel
 * (rounding ~ eps alpha^2 |v|^2 against the float32 product's ~ eps alpha |v|). lambda is set from the
 * reference norm gaps (lambda |n_0 - n_1| = 1 for the median sample), so the memberships are not
 * saturated and carry the norms' errors: d pi <= pi (1 - pi) lambda |d n_0 - d n_1|. The reference applies
 * the device's own operators in double (conjugate-symmetric completion of the stored bins), so only the
 * application's rounding is measured. Tolerance 1e-4 on pi: the float32 entering (normalization, FFT) and
 * products give |dn| ~ 1e-6 relative to the gap here; 1e-4 leaves a factor ~100, and a cancellation of
 * eps alpha^2 / n_0 would exceed it. */
static void ops_full_spectrum(const float *Ed, const float *Cd, size_t K, size_t C, size_t W, double *ops)
{
    const size_t P = W / 2 + 1, CC = C * C;
    for (size_t j = 0; j <= K; j++)
        for (size_t p = 0; p < W; p++) {
            const size_t q = p < P ? p : W - p; /* stored twin: conj */
            const float *src = j < K ? Cd + (j * P + q) * CC * 2 : Ed + q * CC * 2;
            double *dst = ops + (j * W + p) * CC * 2;
            for (size_t e = 0; e < CC; e++) {
                dst[2 * e] = src[2 * e];
                dst[2 * e + 1] = p < P ? src[2 * e + 1] : -src[2 * e + 1];
            }
        }
}

START_TEST(device_norms_cancellation)
{
    const size_t m = 8, C = 4, T = 16, K = 2, per = 4, CC = C * C, P = T / 2 + 1;
    double X[8 * 4 * 16], tpl[2][4 * 16];
    int y[8];
    tu_rng r;
    tu_rng_seed(&r, 4242);
    for (size_t k = 0; k < K; k++)
        for (size_t c = 0; c < C; c++)
            for (size_t t = 0; t < T; t++)
                tpl[k][c * T + t] = sin(6.283185307179586 * ((double)(1 + c) * (double)t / (double)T + 0.1 * (double)c)) +
                                    (k ? 0.03 * cos(6.283185307179586 * (double)(2 + c) * (double)t / (double)T) : 0.0);
    for (size_t b = 0; b < m; b++) {
        const size_t k = b / per, sh = (3 * b) % T;
        y[b] = (int)k;
        for (size_t c = 0; c < C; c++)
            for (size_t t = 0; t < T; t++) X[(b * C + c) * T + t] = tpl[k][c * T + (t + sh) % T] + 1e-4 * tu_normal(&r);
    }
    wbcl_context *ctx = variant_context(_i);
    const size_t sx[3] = {m, C, T};
    wbcl_tensor *Xd = upload_d(ctx, 3, sx, X), *Zd = empty_t(ctx, 3, sx);
    float *Ed = malloc(P * CC * 2 * sizeof *Ed), *Cd = malloc(K * P * CC * 2 * sizeof *Cd), gam[2], pid[16];
    double *ops = malloc((K + 1) * T * CC * 2 * sizeof *ops), gd[2], pir[16], Z[8 * 4 * 16];
    int yh[8];
    double lam = 1.0;
    for (int pass = 0; pass < 2; pass++) { /* pass 0: lambda = 1 to read the norm gaps; pass 1: the test */
        wbcl_circulant_params p = cparams(1, (float)lam);
        p.eps2 = 1e-3f;
        wbcl_circulant *net = dfit(ctx, Xd, NULL, y, (int)K, &p, NULL);
        ck_assert_int_eq(wbcl_circulant_read_layer(ctx, net, 0, Ed, Cd, gam), WBCL_SUCCESS);
        ops_full_spectrum(Ed, Cd, K, C, T, ops);
        gd[0] = gam[0], gd[1] = gam[1];
        memcpy(Z, X, sizeof Z);
        ck_assert_int_eq(wbcl_ref_circ_forward(m, C, 1, T, K, 1, ops, gd, p.eta, p.lambda, Z, yh, pir), 0);
        if (pass == 0) {
            double gap[8];
            for (size_t b = 0; b < m; b++) gap[b] = fabs(log(pir[2 * b] / pir[2 * b + 1])); /* |n_1 - n_0| */
            for (size_t i = 1; i < m; i++) /* insertion sort: median */
                for (size_t j = i; j > 0 && gap[j] < gap[j - 1]; j--) {
                    double t = gap[j];
                    gap[j] = gap[j - 1];
                    gap[j - 1] = t;
                }
            ck_assert_msg(gap[m / 2] > 0.0 && isfinite(gap[m / 2]), "norm gap %g", gap[m / 2]);
            lam = 1.0 / gap[m / 2];
        } else {
            ck_assert_int_eq(wbcl_circulant_apply(ctx, net, Xd, Zd, NULL, pid), WBCL_SUCCESS);
            double worst = 0.0, mid = 0.0;
            for (size_t i = 0; i < m * K; i++) {
                worst = fmax(worst, fabs(pid[i] - pir[i]));
                mid = fmax(mid, fmin(pir[i], 1.0 - pir[i]));
            }
            ck_assert_msg(mid > 0.05, "memberships saturated (max min(pi, 1 - pi) = %g): the test measures nothing", mid);
            ck_assert_msg(worst <= 1e-4, "memberships differ from the reference by %.3g (lambda %.4g)", worst, lam);
            fprintf(stderr, "norms_cancellation: lambda %.4g, max |d pi| %.3g, max min(pi, 1-pi) %.3g\n", lam, worst, mid);
        }
        wbcl_circulant_destroy(net);
    }
    free(Ed);
    free(Cd);
    free(ops);
    wbcl_tensor_destroy(Xd);
    wbcl_tensor_destroy(Zd);
    wbcl_context_destroy(ctx);
}
END_TEST

/* DEVICE_TESTS */

static Suite *circulant_suite(void)
{
    Suite *s = suite_create("circulant");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, ref_golden_1d);
    tcase_add_loop_test(tc, ref_fft_equals_dense, 0, (int)(sizeof dense_cases / sizeof dense_cases[0]));
    tcase_add_loop_test(tc, ref_equivariance, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("device");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, device_golden_1d, 0, 2);
    tcase_add_loop_test(tc, device_vs_reference, 0, (int)(sizeof dev_runs / sizeof dev_runs[0]));
    tcase_add_loop_test(tc, device_vs_dense, 0, 2 * (int)(sizeof dense_cases / sizeof dense_cases[0]));
    tcase_add_loop_test(tc, device_norms_cancellation, 0, 2);
    tcase_add_loop_test(tc, device_wg_same_bits, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("lifting");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, device_lift_vs_reference, 0, (int)(sizeof lift_cases / sizeof lift_cases[0]));
    suite_add_tcase(s, tc);
    tc = tcase_create("properties");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, device_equivariance, 0, 2);
    tcase_add_test(tc, device_unit_norm_every_layer);
    tcase_add_loop_test(tc, device_sinusoids, 0, 2);
    tcase_add_loop_test(tc, device_objective, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, device_bad_input);
    tcase_add_loop_test(tc, save_load_roundtrip, 0, 2);
    tcase_add_test(tc, cli_redunet1d);
    tcase_add_test(tc, cli_redunet2d);
    tcase_add_test(tc, fft_two_contexts);
    tcase_add_test(tc, fft_paths);
    suite_add_tcase(s, tc);
    /* DEVICE_TCASES */
    return s;
}

int main(void) { return tu_run(circulant_suite()); }
