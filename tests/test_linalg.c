/* Dense SPD linear algebra: wbcl_cholesky, wbcl_logdet_spd, wbcl_spd_inverse,
 * wbcl_spd_solve against the double references of host/ref, both kernel
 * variants (CPU-shaped: blocks of 128 above n = 192; GPU-shaped: the Cholesky
 * in blocks of 128 above n = 128, the solves in blocks of 64; so n = 65, 127,
 * 150, 200, 257, 1024 run a blocked path of at least one variant).
 *
 * Tolerances (u = 2^-24, the float unit roundoff):
 *  - Cholesky is backward stable: L^ L^T = A + dA with |dA| <= gamma_{n+1} |L^||L^T|
 *    (Higham, Thm 10.3), and || |L||L^T| ||_F <= ||L||_F^2 = trace(A) <= sqrt(n) ||A||_F,
 *    so ||L L^T - A||_F / ||A||_F <= (n+1) u sqrt(n) in the worst case. The
 *    rounding errors of the length-n dot products add up like a random walk, so
 *    in practice the residual is about sqrt(n) u (trace(A)/||A||_F ~ sqrt(n) for our
 *    matrices gives ~ n u at most). We require RES_C * (n + 1) * u with RES_C = 1:
 *    observed residuals are 5-30x below it (e.g. 2e-6 at n = 1024 vs 6.1e-5),
 *    while a wrong update (a dropped block, a stale panel) gives O(1).
 *    Plus SQRT_TERM = 12 u: the analysis assumes a correctly rounded sqrt, but OpenCL 1.2
 *    (section 7.4) allows 3 ulp in single precision, i.e. a relative error of up to 6 u in a
 *    pivot L_jj and 12 u in L_jj^2. At n = 1 the residual is exactly that error: NVIDIA's
 *    driver gave 2.5 u on an H200, above the (n + 1) u = 2 u a correctly rounded sqrt meets.
 *  - logdet: d logdet = tr(A^-1 dA); with the backward error above,
 *    |d logdet| <= n ||A^-1||_2 ||dA||_2 ~ n cond(A) (n u) ||A||... is far too
 *    pessimistic; per pivot the relative error of L_ii^2 is about cond(A) n u
 *    in the worst case and about n u typically, and the n log terms are summed
 *    with compensation. We require |got - ref| <= LD_C * n * u * cond(A) * max(1, |ref|/n)
 *    with LD_C = 1 (the last factor: logdet is a sum of n terms of size |ref|/n).
 *  - inverse: ||A X - I||_F / sqrt(n) <= INV_C * n * u * cond(A), INV_C = 1 (the
 *    forward error of a backward-stable inverse is cond(A) times the backward
 *    error, ~ n u); X must be exactly symmetric.
 *  - solve: backward error ||A X - B||_F / (||A||_F ||X||_F) <= SOL_C (3n+1) u, SOL_C = 1
 *    (Higham Thm 10.4: |dA| <= gamma_{3n+1} |L||L^T| worst case; errors add up like a
 *    random walk in practice), and the forward error vs the reference <= SOL_C n u cond(A).
 * Non-SPD input must give WBCL_ERROR_NUMERIC naming the matrix and the pivot. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "testutil.h"
#include "wbcl/linalg.h"
#include "wbcl/ref.h"

#define U32 (1.0 / 16777216.0)
#define RES_C 1.0
#define SQRT_TERM (12.0 * U32)
#define RES_BOUND(n) (RES_C * (double)((n) + 1) * U32 + SQRT_TERM)
#define LD_C 1.0
#define INV_C 1.0
#define SOL_C 1.0

static const wbcl_variant variants[2] = {WBCL_VARIANT_CPU, WBCL_VARIANT_GPU};
static const char *vname(wbcl_variant v) { return v == WBCL_VARIANT_CPU ? "cpu" : "gpu"; }

/* ---- matrix generators (float storage, exactly symmetric) ------------------------ */
/* A = G G^T / n + delta I, G standard normal: eigenvalues in about
 * [delta, delta + 4], so cond(A) <= 1 + 4/delta. */
static void gen_gram(tu_rng *r, size_t n, double delta, float *A)
{
    double *G = malloc(n * n * sizeof *G), *S = calloc(n * n, sizeof *S);
    ck_assert(G && S);
    for (size_t i = 0; i < n * n; i++) G[i] = tu_normal(r);
    for (size_t i = 0; i < n; i++)
        for (size_t p = 0; p < n; p++) {
            const double g = G[i * n + p];
            const double *gj = G;
            for (size_t j = 0; j <= i; j++) S[i * n + j] += g * gj[j * n + p];
        }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++) {
            float v = (float)(S[i * n + j] / (double)n + (i == j ? delta : 0.0));
            A[i * n + j] = A[j * n + i] = v;
        }
    free(G);
    free(S);
}

/* A = Q diag(lambda) Q^T with lambda log-spaced from 1 down to 1/cond and Q a
 * product of three random Householder reflectors (dense, O(n^2) to build). */
static void gen_cond(tu_rng *r, size_t n, double cond, float *A)
{
    double *M = calloc(n * n, sizeof *M), *v = malloc(n * sizeof *v), *w = malloc(n * sizeof *w);
    ck_assert(M && v && w);
    for (size_t i = 0; i < n; i++) M[i * n + i] = n > 1 ? pow(cond, -(double)i / (double)(n - 1)) : 1.0;
    /* shuffle the eigenvalues so the small ones are not all at the end */
    for (size_t i = n; i-- > 1;) {
        size_t j = (size_t)tu_uniform(r, 0, (double)(i + 1));
        double t = M[i * n + i];
        M[i * n + i] = M[j * n + j];
        M[j * n + j] = t;
    }
    for (int h = 0; h < 3 && n > 1; h++) {
        double nv = 0;
        for (size_t i = 0; i < n; i++) { v[i] = tu_normal(r); nv += v[i] * v[i]; }
        nv = sqrt(nv);
        for (size_t i = 0; i < n; i++) v[i] /= nv;
        /* M <- H M H, H = I - 2 v v^T: w = M v, c = v^T w, M -= 2 v w^T + 2 w v^T - 4 c v v^T */
        double c = 0;
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            for (size_t j = 0; j < n; j++) s += M[i * n + j] * v[j];
            w[i] = s;
            c += v[i] * s;
        }
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) M[i * n + j] += -2 * v[i] * w[j] - 2 * w[i] * v[j] + 4 * c * v[i] * v[j];
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++) A[i * n + j] = A[j * n + i] = (float)M[i * n + j];
    free(M);
    free(v);
    free(w);
}

/* ReduNet's I + a Z^T Z, Z (m x d) with unit-norm rows, a = d / (m eps2):
 * eigenvalues in [1, 1 + d/eps2]. Returns that bound on cond. */
static double gen_redunet(tu_rng *r, size_t d, size_t m, float *A)
{
    const double eps2 = 0.1, a = (double)d / ((double)m * eps2);
    double *Z = malloc(m * d * sizeof *Z), *S = calloc(d * d, sizeof *S);
    ck_assert(Z && S);
    for (size_t i = 0; i < m; i++) {
        double nz = 0;
        for (size_t j = 0; j < d; j++) { Z[i * d + j] = tu_normal(r) + (j == i % d ? 2.0 : 0.0); nz += Z[i * d + j] * Z[i * d + j]; }
        nz = sqrt(nz);
        for (size_t j = 0; j < d; j++) Z[i * d + j] /= nz;
    }
    for (size_t s = 0; s < m; s++)
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j <= i; j++) S[i * d + j] += Z[s * d + i] * Z[s * d + j];
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j <= i; j++) A[i * d + j] = A[j * d + i] = (float)((i == j) + a * S[i * d + j]);
    free(Z);
    free(S);
    return 1.0 + (double)d / eps2;
}

/* Fills batch matrices: kind 0 = gram (cond <= 5), 1 = cond 1e4. Returns the cond bound. */
static double gen_batch(tu_rng *r, int kind, size_t n, size_t batch, float *A)
{
    for (size_t b = 0; b < batch; b++) {
        if (kind == 0) gen_gram(r, n, 1.0, A + b * n * n);
        else gen_cond(r, n, 1e4, A + b * n * n);
    }
    return kind == 0 ? 5.0 : 1e4;
}

static wbcl_tensor *make(wbcl_context *ctx, size_t batch, size_t rows, size_t cols, const float *data)
{
    wbcl_tensor *t = NULL;
    size_t s3[3] = {batch, rows, cols};
    wbcl_status st = batch ? wbcl_tensor_create(ctx, 3, s3, WBCL_F32, data, &t)
                           : wbcl_tensor_create(ctx, 2, s3 + 1, WBCL_F32, data, &t);
    ck_assert_msg(st == WBCL_SUCCESS, "tensor create: %s", wbcl_context_last_error(ctx));
    return t;
}

/* ---- checks ------------------------------------------------------------------------ */
/* ||L L^T - A||_F / ||A||_F for one matrix; also asserts the strict upper triangle is 0. */
static double chol_residual(size_t n, const float *L, const float *A)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) ck_assert_msg(L[i * n + j] == 0.0f, "L[%zu][%zu] = %g above the diagonal", i, j, (double)L[i * n + j]);
        for (size_t j = 0; j <= i; j++) {
            double s = 0;
            for (size_t p = 0; p <= j; p++) s += (double)L[i * n + p] * (double)L[j * n + p];
            double d = s - (double)A[i * n + j], w = i == j ? 1.0 : 2.0;
            num += w * d * d;
            den += w * (double)A[i * n + j] * (double)A[i * n + j];
        }
    }
    return sqrt(num / den);
}

static void check_cholesky(wbcl_context *ctx, size_t n, size_t batch, int batched, const float *A, const char *what)
{
    size_t total = batch * n * n;
    wbcl_tensor *tA = make(ctx, batched ? batch : 0, n, n, A), *tL = make(ctx, batched ? batch : 0, n, n, NULL);
    wbcl_status st = wbcl_cholesky(ctx, tA, tL);
    ck_assert_msg(st == WBCL_SUCCESS, "%s: %s", what, wbcl_context_last_error(ctx));
    float *L = tu_guarded_alloc(total);
    ck_assert_int_eq(wbcl_tensor_read(ctx, tL, L, total), WBCL_SUCCESS);
    ck_assert(tu_canary_ok(L, total));
    double worst = 0;
    for (size_t b = 0; b < batch; b++) {
        double res = chol_residual(n, L + b * n * n, A + b * n * n);
        if (!(res <= worst)) worst = res;
        ck_assert_msg(res <= RES_BOUND(n), "%s: matrix %zu: ||LL^T - A||/||A|| = %.3g > %.3g", what, b, res,
                      RES_BOUND(n));
    }
    /* the input is untouched */
    float *A2 = tu_guarded_alloc(total);
    ck_assert_int_eq(wbcl_tensor_read(ctx, tA, A2, total), WBCL_SUCCESS);
    ck_assert(memcmp(A, A2, total * sizeof(float)) == 0);
    if (getenv("WBCL_TEST_VERBOSE")) printf("%s: residual %.3g (bound %.3g)\n", what, worst, RES_BOUND(n));
    tu_guarded_free(A2);
    tu_guarded_free(L);
    wbcl_tensor_destroy(tA);
    wbcl_tensor_destroy(tL);
}

START_TEST(cholesky_sizes)
{
    static const size_t sizes[] = {1, 2, 3, 7, 16, 31, 64, 65, 127, 150, 200, 257};
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 11);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            for (int kind = 0; kind < 2; kind++) {
                size_t n = sizes[s], batch = n <= 31 ? 5 : 2;
                float *A = malloc(batch * n * n * sizeof *A);
                gen_batch(&r, kind, n, batch, A);
                char what[96];
                snprintf(what, sizeof what, "%s n=%zu batch=%zu kind=%d", vname(variants[v]), n, batch, kind);
                check_cholesky(ctx, n, batch, 1, A, what);
                check_cholesky(ctx, n, 1, 0, A, what); /* 2-D */
                free(A);
            }
        }
    }
    wbcl_context_destroy(ctx);
}
END_TEST


/* ---- logdet ------------------------------------------------------------------------ */
static void check_logdet(wbcl_context *ctx, size_t n, size_t batch, const float *A, double cond, const char *what)
{
    wbcl_tensor *tA = make(ctx, batch, n, n, A), *tD = NULL;
    size_t s1[1] = {batch};
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s1, WBCL_F32, NULL, &tD), WBCL_SUCCESS);
    wbcl_status st = wbcl_logdet_spd(ctx, tA, tD);
    ck_assert_msg(st == WBCL_SUCCESS, "%s: %s", what, wbcl_context_last_error(ctx));
    float *got = tu_guarded_alloc(batch);
    ck_assert_int_eq(wbcl_tensor_read(ctx, tD, got, batch), WBCL_SUCCESS);
    ck_assert(tu_canary_ok(got, batch));
    double *Ad = tu_to_f64(A, batch * n * n), worst = 0;
    for (size_t b = 0; b < batch; b++) {
        double ref;
        ck_assert_int_eq(wbcl_ref_logdet_spd(n, Ad + b * n * n, &ref), 0);
        double tol = LD_C * n * U32 * cond * fmax(1.0, fabs(ref) / n), err = fabs(got[b] - ref);
        ck_assert_msg(err <= tol, "%s: matrix %zu: logdet %.9g, reference %.9g (error %.3g > %.3g)", what, b,
                      (double)got[b], ref, err, tol);
        if (err / tol > worst) worst = err / tol;
    }
    if (getenv("WBCL_TEST_VERBOSE")) printf("%s: logdet error / tolerance %.3g\n", what, worst);
    free(Ad);
    tu_guarded_free(got);
    wbcl_tensor_destroy(tA);
    wbcl_tensor_destroy(tD);
}

START_TEST(logdet_sizes)
{
    static const size_t sizes[] = {1, 3, 7, 31, 65, 127, 200, 257};
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 12);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (int kind = 0; kind < 2; kind++) {
                size_t n = sizes[s], batch = n <= 31 ? 5 : 2;
                float *A = malloc(batch * n * n * sizeof *A);
                double cond = gen_batch(&r, kind, n, batch, A);
                char what[96];
                snprintf(what, sizeof what, "%s n=%zu kind=%d", vname(variants[v]), n, kind);
                check_logdet(ctx, n, batch, A, cond, what);
                free(A);
            }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- inverse ------------------------------------------------------------------------ */
/* ||A X - I||_F / sqrt(n), X exactly symmetric. */
static double inverse_residual(size_t n, const float *A, const float *X)
{
    double num = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            ck_assert_msg(X[i * n + j] == X[j * n + i], "inverse not symmetric at (%zu, %zu)", i, j);
            double s = 0;
            for (size_t p = 0; p < n; p++) s += (double)A[i * n + p] * (double)X[p * n + j];
            s -= i == j;
            num += s * s;
        }
    return sqrt(num / (double)n);
}

static void check_inverse(wbcl_context *ctx, size_t n, size_t batch, const float *A, double cond, const char *what)
{
    size_t total = batch * n * n;
    wbcl_tensor *tA = make(ctx, batch, n, n, A), *tX = make(ctx, batch, n, n, NULL);
    wbcl_status st = wbcl_spd_inverse(ctx, tA, tX);
    ck_assert_msg(st == WBCL_SUCCESS, "%s: %s", what, wbcl_context_last_error(ctx));
    float *X = tu_guarded_alloc(total);
    ck_assert_int_eq(wbcl_tensor_read(ctx, tX, X, total), WBCL_SUCCESS);
    ck_assert(tu_canary_ok(X, total));
    double worst = 0, tol = INV_C * n * U32 * cond;
    for (size_t b = 0; b < batch; b++) {
        double res = inverse_residual(n, A + b * n * n, X + b * n * n);
        ck_assert_msg(res <= tol, "%s: matrix %zu: ||A X - I||_F/sqrt(n) = %.3g > %.3g", what, b, res, tol);
        if (res / tol > worst) worst = res / tol;
    }
    if (getenv("WBCL_TEST_VERBOSE")) printf("%s: inverse residual / tolerance %.3g\n", what, worst);
    tu_guarded_free(X);
    wbcl_tensor_destroy(tA);
    wbcl_tensor_destroy(tX);
}

START_TEST(inverse_sizes)
{
    static const size_t sizes[] = {1, 2, 7, 16, 31, 64, 65, 127, 200, 257};
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 13);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (int kind = 0; kind < 2; kind++) {
                size_t n = sizes[s], batch = n <= 31 ? 5 : (n <= 127 ? 2 : 1);
                float *A = malloc(batch * n * n * sizeof *A);
                double cond = gen_batch(&r, kind, n, batch, A);
                char what[96];
                snprintf(what, sizeof what, "%s n=%zu kind=%d", vname(variants[v]), n, kind);
                check_inverse(ctx, n, batch, A, cond, what);
                free(A);
            }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- solve ---------------------------------------------------------------------------- */
/* batch 0: 2-D A and B (one matrix) */
static void check_solve(wbcl_context *ctx, size_t n, size_t r, size_t batch, int inplace, const float *A,
                        const float *B, double cond, const char *what)
{
    const size_t tb = batch;
    if (!batch) batch = 1;
    size_t nx = batch * n * r;
    wbcl_tensor *tA = make(ctx, tb, n, n, A), *tB = make(ctx, tb, n, r, B);
    wbcl_tensor *tX = inplace ? tB : make(ctx, tb, n, r, NULL);
    wbcl_status st = wbcl_spd_solve(ctx, tA, tB, tX);
    ck_assert_msg(st == WBCL_SUCCESS, "%s: %s", what, wbcl_context_last_error(ctx));
    float *X = tu_guarded_alloc(nx);
    ck_assert_int_eq(wbcl_tensor_read(ctx, tX, X, nx), WBCL_SUCCESS);
    ck_assert(tu_canary_ok(X, nx));
    double *Ad = tu_to_f64(A, batch * n * n), *Bd = tu_to_f64(B, nx), *Xr = malloc(nx * sizeof *Xr);
    double worst_b = 0, worst_f = 0;
    for (size_t b = 0; b < batch; b++) {
        const float *Ab = A + b * n * n, *Xb = X + b * n * r;
        ck_assert_int_eq(wbcl_ref_spd_solve(n, r, Ad + b * n * n, Bd + b * n * r, Xr + b * n * r), 0);
        double res = 0, na = 0, nxx = 0, fe = 0, nr = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t c = 0; c < r; c++) {
                double s = -(double)B[b * n * r + i * r + c];
                for (size_t p = 0; p < n; p++) s += (double)Ab[i * n + p] * (double)Xb[p * r + c];
                res += s * s;
                double d = Xb[i * r + c] - Xr[b * n * r + i * r + c];
                fe += d * d;
                nr += Xr[b * n * r + i * r + c] * Xr[b * n * r + i * r + c];
                nxx += (double)Xb[i * r + c] * Xb[i * r + c];
            }
        for (size_t i = 0; i < n * n; i++) na += (double)Ab[i] * Ab[i];
        double back = sqrt(res) / (sqrt(na) * sqrt(nxx)), fwd = sqrt(fe / nr);
        double tb = SOL_C * (3 * n + 1) * U32, tf = SOL_C * n * U32 * cond;
        ck_assert_msg(back <= tb, "%s: matrix %zu: backward error %.3g > %.3g", what, b, back, tb);
        ck_assert_msg(fwd <= tf, "%s: matrix %zu: forward error %.3g > %.3g", what, b, fwd, tf);
        if (back / tb > worst_b) worst_b = back / tb;
        if (fwd / tf > worst_f) worst_f = fwd / tf;
    }
    if (getenv("WBCL_TEST_VERBOSE"))
        printf("%s: solve backward / tol %.3g, forward / tol %.3g\n", what, worst_b, worst_f);
    free(Ad);
    free(Bd);
    free(Xr);
    tu_guarded_free(X);
    wbcl_tensor_destroy(tA);
    wbcl_tensor_destroy(tB);
    if (!inplace) wbcl_tensor_destroy(tX);
}

START_TEST(solve_sizes)
{
    static const size_t sizes[] = {1, 3, 16, 31, 65, 127, 200, 257};
    static const size_t rhs[] = {1, 3, 17, 40};
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 14);
    int k = 0;
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (int kind = 0; kind < 2; kind++, k++) {
                size_t n = sizes[s], batch = n <= 31 ? 5 : 2, rc = rhs[k % 4];
                float *A = malloc(batch * n * n * sizeof *A);
                float *B = tu_random_f32(&r, batch * n * rc, -1, 1);
                double cond = gen_batch(&r, kind, n, batch, A);
                char what[96];
                snprintf(what, sizeof what, "%s n=%zu r=%zu kind=%d%s", vname(variants[v]), n, rc, kind,
                         k % 3 == 0 ? " in place" : "");
                check_solve(ctx, n, rc, batch, k % 3 == 0, A, B, cond, what);
                if (k % 5 == 1) check_solve(ctx, n, rc, 0, 0, A, B, cond, what); /* 2-D */
                free(A);
                free(B);
            }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- large and batched ------------------------------------------------------------- */
START_TEST(cholesky_1024)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 15);
    const size_t n = 1024;
    float *A = malloc(n * n * sizeof *A);
    gen_gram(&r, n, 1.0, A);
    /* CPU-shaped variant only: the GPU-shaped blocked path is covered by n = 129 ... 263
     * (cholesky_gpu_blocks) and runs slowly on PoCL */
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_CPU), WBCL_SUCCESS);
    check_cholesky(ctx, n, 1, 0, A, "cpu n=1024");
    check_logdet(ctx, n, 1, A, 5.0, "cpu n=1024");
    free(A);
    wbcl_context_destroy(ctx);
}
END_TEST

/* The blocked factorization of one variant at the given sizes (batched and single, generators alternating),
 * then in place at n_in_place (none if 0): the same L as out of place, bit for bit. Residual bound as in cholesky_sizes. */
static void check_blocked(wbcl_variant variant, const char *tag, const size_t *sizes, size_t nsizes, uint64_t seed,
                          size_t n_in_place)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, seed);
    ck_assert_int_eq(wbcl_context_set_variant(ctx, variant), WBCL_SUCCESS);
    for (size_t s = 0; s < nsizes; s++) {
        const size_t n = sizes[s], batch = 2;
        float *A = malloc(batch * n * n * sizeof *A);
        gen_batch(&r, s % 2, n, batch, A);
        char what[96];
        snprintf(what, sizeof what, "%s blocked n=%zu batch=%zu", tag, n, batch);
        check_cholesky(ctx, n, batch, 1, A, what);
        snprintf(what, sizeof what, "%s blocked n=%zu single", tag, n);
        check_cholesky(ctx, n, 1, 0, A + n * n, what);
        free(A);
    }
    if (!n_in_place) { /* no in-place check */
        wbcl_context_destroy(ctx);
        return;
    }
    const size_t n = n_in_place;
    float *A = malloc(n * n * sizeof *A), *L1 = malloc(n * n * sizeof *L1), *L2 = malloc(n * n * sizeof *L2);
    gen_gram(&r, n, 1.0, A);
    wbcl_tensor *tA = make(ctx, 0, n, n, A), *tL = make(ctx, 0, n, n, NULL);
    ck_assert_int_eq(wbcl_cholesky(ctx, tA, tL), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_cholesky(ctx, tA, tA), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, tL, L1, n * n), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, tA, L2, n * n), WBCL_SUCCESS);
    ck_assert_msg(memcmp(L1, L2, n * n * sizeof *L1) == 0, "%s: in-place L differs from out-of-place L", tag);
    ck_assert(chol_residual(n, L2, A) <= RES_BOUND(n));
    wbcl_tensor_destroy(tA);
    wbcl_tensor_destroy(tL);
    free(A);
    free(L1);
    free(L2);
    wbcl_context_destroy(ctx);
}

/* The CPU-shaped blocked path (n > 192: blocks of nb = 128, left-looking with
 * L kept packed in 32-row panels): sizes around the block and panel
 * boundaries (2nb-1, 2nb, 2nb+1, a multiple of 32 that is not one of 128, 3nb+1,
 * one that is not a multiple of 8 in its last block), single and batched, and
 * in place (L = A). Residual bound as above: ||LL^T - A||_F/||A||_F <= (n+1) u. */
START_TEST(cholesky_block_boundaries)
{
    static const size_t sizes[] = {255, 256, 257, 288, 385, 449};
    check_blocked(WBCL_VARIANT_CPU, "cpu", sizes, sizeof sizes / sizeof *sizes, 21, 385);
}
END_TEST

/* The GPU-shaped path (host/ops/linalg.c, chol_gpu): one work-group per matrix
 * up to n = 128, right-looking blocks of nb = 128 above, in both forms:
 * the lookahead form (the default, chol_gpu_ahead: diagonal blocks by
 * wbcl_chol_r128_g, each round's update split into the next block column's
 * tiles, then the next factor, then the next panel's solve together with
 * the rest of the update, wbcl_chol_upd_g) and the syrk_g form
 * (WBCL_LA_LOOKAHEAD=0: panel of 16-row work-groups, then the trailing update
 * whose first work-group factors the next diagonal block). Sizes at the
 * single-block limit (nb, nb + 1), primes (partial panels and update tiles, a
 * last block of 7 columns), 2 nb, 300 (blocks 128, 128, 44: a round with both
 * a solve and rest tiles, then one with neither) and 385 (a last block of 1);
 * cholesky_sizes adds 150, 200, 257 and non_spd_rejected failures in later
 * blocks; batched and single; in place bit for bit. Residual bound as in
 * cholesky_sizes. Then the launches of one lookahead factorization at n = 300:
 * 3 diagonal blocks, 1 first panel solve, 3 update launches (round 0: both
 * modes; round 1: mode 0 only), no syrk_g or blk_g. */
START_TEST(cholesky_gpu_blocks)
{
    static const size_t sizes[] = {128, 129, 131, 256, 263, 300, 385};
    check_blocked(WBCL_VARIANT_GPU, "gpu", sizes, sizeof sizes / sizeof *sizes, 23, 263);
    ck_assert_int_eq(setenv("WBCL_LA_LOOKAHEAD", "0", 1), 0);
    check_blocked(WBCL_VARIANT_GPU, "gpu syrk_g form", sizes, sizeof sizes / sizeof *sizes, 24, 300);
    unsetenv("WBCL_LA_LOOKAHEAD");
    /* the rest of each update by 128 x 128 tiles (wbcl_chol_upd128_g, by default from 2048
     * rows): in every round (threshold 0: partial tiles at 131, 263, 300, 385), then at n = 700
     * with threshold 300, rounds of both kinds in one factorization (rests of 444 and 316 rows by
     * 128 tiles, 188 and 60 by 64 tiles) */
    ck_assert_int_eq(setenv("WBCL_LA_UPD128_MIN", "0", 1), 0);
    check_blocked(WBCL_VARIANT_GPU, "gpu 128 tiles", sizes, sizeof sizes / sizeof *sizes, 26, 385);
    ck_assert_int_eq(setenv("WBCL_LA_UPD128_MIN", "300", 1), 0);
    static const size_t mixed[] = {700};
    check_blocked(WBCL_VARIANT_GPU, "gpu 128 tiles from 300 rows", mixed, 1, 27, 700);
    unsetenv("WBCL_LA_UPD128_MIN");
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU), WBCL_SUCCESS);
    tu_rng r;
    tu_rng_seed(&r, 25);
    const size_t n = 300;
    float *A = malloc(n * n * sizeof *A);
    gen_gram(&r, n, 1.0, A);
    wbcl_tensor *tA = make(ctx, 0, n, n, A), *tL = make(ctx, 0, n, n, NULL);
    ck_assert_int_eq(wbcl_context_set_timing(ctx, 1), WBCL_SUCCESS); /* counts launches */
    ck_assert_int_eq(wbcl_cholesky(ctx, tA, tL), WBCL_SUCCESS);
    ck_assert_uint_eq(tu_launches(ctx, "wbcl_chol_r128_g"), 3);
    ck_assert_uint_eq(tu_launches(ctx, "wbcl_chol_trsm_g"), 1);
    ck_assert_uint_eq(tu_launches(ctx, "wbcl_chol_upd_g"), 3);
    ck_assert_uint_eq(tu_launches(ctx, "wbcl_chol_syrk_g") + tu_launches(ctx, "wbcl_chol_blk_g"), 0);
    wbcl_tensor_destroy(tA);
    wbcl_tensor_destroy(tL);
    free(A);
    wbcl_context_destroy(ctx);
}
END_TEST

/* The GPU-shaped path's rounds through the GEMM (host/ops/linalg.c, GPU_GEMM_MIN;
 * WBCL_LA_GEMM_MIN lowers the threshold so PoCL-sized problems take it): the
 * trailing update L22 -= L21 L21^T computed on the whole square by the context's
 * GEMM from a scratch copy of L21, the next diagonal block factored on its own,
 * the upper junk zeroed at the end (chol_residual asserts exact zeros there).
 * n = 600 at threshold 256: rounds with 472 and 344 trailing rows through the
 * GEMM, 216 and 88 through wbcl_chol_syrk_g (both kinds of round, in order);
 * n = 1031 at threshold 0: every round through the GEMM, a last block of 7
 * columns (1031 = 8 * 128 + 7); in place bit for bit at 600. Residual bound
 * as in cholesky_sizes, (n + 1) u + 12 u: the bound (Higham Thm 10.3) holds
 * for any order of the inner products' terms, so the GEMM's order changes
 * nothing in it; observed residuals stay far below it. logdet too at both
 * sizes (same tolerance as logdet_sizes). */
START_TEST(cholesky_gpu_gemm)
{
    static const struct { size_t n; const char *min; } cases[] = {{600, "256"}, {1031, "0"}};
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(setenv("WBCL_LA_GEMM_MIN", cases[i].min, 1), 0);
        const size_t sz[1] = {cases[i].n};
        check_blocked(WBCL_VARIANT_GPU, cases[i].min[0] == '0' ? "gpu gemm all" : "gpu gemm 256", sz, 1, 31 + i,
                      cases[i].n == 600 ? 600 : 0);
        wbcl_context *ctx = tu_context();
        tu_rng r;
        tu_rng_seed(&r, 41 + i);
        ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU), WBCL_SUCCESS);
        const size_t n = cases[i].n;
        float *A = malloc(n * n * sizeof *A);
        gen_gram(&r, n, 1.0, A);
        check_logdet(ctx, n, 1, A, 5.0, cases[i].min[0] == '0' ? "gpu gemm all" : "gpu gemm 256");
        free(A);
        wbcl_context_destroy(ctx);
    }
    /* the tiled GEMM backend (the one an NVIDIA table may pick) at n = 600, threshold 256 */
    ck_assert_int_eq(setenv("WBCL_LA_GEMM_MIN", "256", 1), 0);
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 45);
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_TILED), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_timing(ctx, 1), WBCL_SUCCESS);
    const size_t n = 600;
    float *A = malloc(n * n * sizeof *A);
    gen_batch(&r, 1, n, 1, A);
    check_cholesky(ctx, n, 1, 0, A, "gpu gemm 256 tiled n=600");
    /* per factorization: trailing blocks of 472 and 344 rows through the GEMM (>= 256), 216 and 88
     * through syrk_g, the upper triangle zeroed once */
    const uint64_t calls = tu_launches(ctx, "wbcl_la_zero_upper_g");
    ck_assert_uint_ge(calls, 1);
    ck_assert_uint_eq(tu_launches(ctx, "wbcl_gemm_tiled"), 2 * calls);
    ck_assert_uint_eq(tu_launches(ctx, "wbcl_chol_syrk_g"), 2 * calls);
    free(A);
    wbcl_context_destroy(ctx);
    unsetenv("WBCL_LA_GEMM_MIN");
}
END_TEST

START_TEST(batches_of_small_matrices)
{
    static const size_t sizes[] = {3, 16, 33};
    static const size_t batches[] = {1, 5, 300};
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 16);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        for (size_t s = 0; s < 3; s++)
            for (size_t bi = 0; bi < 3; bi++) {
                size_t n = sizes[s], batch = batches[bi];
                float *A = malloc(batch * n * n * sizeof *A);
                float *B = tu_random_f32(&r, batch * n * 2, -1, 1);
                double cond = gen_batch(&r, (int)(bi & 1), n, batch, A);
                char what[96];
                snprintf(what, sizeof what, "%s n=%zu batch=%zu", vname(variants[v]), n, batch);
                check_cholesky(ctx, n, batch, 1, A, what);
                check_logdet(ctx, n, batch, A, cond, what);
                check_inverse(ctx, n, batch, A, cond, what);
                check_solve(ctx, n, 2, batch, 0, A, B, cond, what);
                free(A);
                free(B);
            }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* The GPU-shaped inverse (host/ops/linalg.c, inverse_gpu): W = L^-1 by blocks of
 * nb = 128 (the diagonal blocks' inverses in one launch, then two GEMMs per
 * block row), A^-1 = W^T W in 64 x 64 tiles written with their mirrors.
 * Sizes: one block (128), a block plus one row (129), primes and odd sizes
 * with partial last blocks and tiles (131, 257, 385), 200, and ReduNet's
 * d = 784 (6 blocks + 16 rows) batched 3; gram (cond <= 5) and cond 1e4
 * matrices alternating, and one ReduNet matrix (I + a Z^T Z, m = 1000) at
 * d = 784. Tolerance as in inverse_sizes (n u cond, exact symmetry). */
START_TEST(inverse_gpu_blocked)
{
    static const struct { size_t n, batch; int kind; } cases[] = {
        {128, 2, 0}, {129, 1, 1}, {131, 2, 0}, {200, 1, 1}, {257, 1, 0}, {385, 1, 1}, {784, 3, 0}};
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 51);
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU), WBCL_SUCCESS);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const size_t n = cases[c].n, batch = cases[c].batch;
        float *A = malloc(batch * n * n * sizeof *A);
        double cond = gen_batch(&r, cases[c].kind, n, batch, A);
        char what[96];
        snprintf(what, sizeof what, "gpu inverse n=%zu batch=%zu kind=%d", n, batch, cases[c].kind);
        check_inverse(ctx, n, batch, A, cond, what);
        free(A);
    }
    {
        const size_t d = 784;
        float *A = malloc(d * d * sizeof *A);
        double cond = gen_redunet(&r, d, 1000, A);
        check_inverse(ctx, d, 1, A, cond, "gpu inverse redunet d=784 m=1000");
        free(A);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* Batches of small matrices in the GPU-shaped variant: n <= 32 and n <= 64 take
 * one work-group of 32 / 64 work-items per matrix with a row per work-item
 * (wbcl_chol_s32_g / wbcl_chol_s64_g), 64 < n <= 128 one 16 x 16 work-group
 * (wbcl_chol_blk_g). n = 1, 3, 17 (s32), 64 (s64, full), 100, 128 (blk_g), each
 * at batches 1, 5 and 1024 (generators alternating); then in place at n = 64
 * and 17 (L = A, the same L bit for bit), and the CPU variant at the same
 * shapes for batch 5. Residual bound as in cholesky_sizes. */
START_TEST(cholesky_gpu_small_batches)
{
    static const size_t sizes[] = {1, 3, 17, 64, 100, 128};
    static const size_t batches[] = {1, 5, 1024};
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 52);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (size_t bi = 0; bi < 3; bi++) {
                const size_t n = sizes[s], batch = batches[bi];
                if (variants[v] == WBCL_VARIANT_CPU && batch != 5) continue;
                float *A = malloc(batch * n * n * sizeof *A);
                gen_batch(&r, (int)((s + bi) & 1), n, batch, A);
                char what[96];
                snprintf(what, sizeof what, "%s small n=%zu batch=%zu", vname(variants[v]), n, batch);
                check_cholesky(ctx, n, batch, 1, A, what);
                free(A);
            }
    }
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU), WBCL_SUCCESS);
    static const size_t inplace[] = {64, 17};
    for (size_t s = 0; s < 2; s++) {
        const size_t n = inplace[s], batch = 5, total = batch * n * n;
        float *A = malloc(total * sizeof *A), *L1 = malloc(total * sizeof *L1), *L2 = malloc(total * sizeof *L2);
        gen_batch(&r, (int)s, n, batch, A);
        wbcl_tensor *tA = make(ctx, batch, n, n, A), *tL = make(ctx, batch, n, n, NULL);
        ck_assert_int_eq(wbcl_cholesky(ctx, tA, tL), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_cholesky(ctx, tA, tA), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_tensor_read(ctx, tL, L1, total), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_tensor_read(ctx, tA, L2, total), WBCL_SUCCESS);
        ck_assert_msg(memcmp(L1, L2, total * sizeof *L1) == 0, "gpu small n=%zu: in-place L differs", n);
        wbcl_tensor_destroy(tA);
        wbcl_tensor_destroy(tL);
        free(A);
        free(L1);
        free(L2);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* ReduNet's E = a (I + a Z^T Z)^-1 for K + 1 = 4 matrices of d = 3, 30, 150 (vector
 * ReduNet on 3-D Gaussians ... MNIST-like widths), and their logdets. */
START_TEST(redunet_matrices)
{
    static const size_t dims[] = {3, 30, 150};
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 17);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        for (size_t di = 0; di < 3; di++) {
            const size_t d = dims[di], batch = 4, m[4] = {300, 100, 120, 80};
            float *A = malloc(batch * d * d * sizeof *A);
            double cond = 0;
            for (size_t b = 0; b < batch; b++) cond = fmax(cond, gen_redunet(&r, d, m[b], A + b * d * d));
            char what[96];
            snprintf(what, sizeof what, "%s redunet d=%zu", vname(variants[v]), d);
            check_cholesky(ctx, d, batch, 1, A, what);
            check_logdet(ctx, d, batch, A, cond, what);
            check_inverse(ctx, d, batch, A, cond, what);
            free(A);
        }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- non-SPD input ------------------------------------------------------------------ */
/* Runs all four ops on (batch, n, n) A; each must fail with WBCL_ERROR_NUMERIC and a
 * message containing `needle`. */
static void expect_numeric(wbcl_context *ctx, size_t n, size_t batch, const float *A, const char *needle,
                           const char *what)
{
    wbcl_tensor *tA = make(ctx, batch, n, n, A), *tL = make(ctx, batch, n, n, NULL), *tD = NULL;
    wbcl_tensor *tB = make(ctx, batch, n, 3, NULL);
    size_t s1[1] = {batch};
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s1, WBCL_F32, NULL, &tD), WBCL_SUCCESS);
    const char *ops[4] = {"wbcl_cholesky", "wbcl_logdet_spd", "wbcl_spd_inverse", "wbcl_spd_solve"};
    for (int o = 0; o < 4; o++) {
        wbcl_status st = o == 0   ? wbcl_cholesky(ctx, tA, tL)
                         : o == 1 ? wbcl_logdet_spd(ctx, tA, tD)
                         : o == 2 ? wbcl_spd_inverse(ctx, tA, tL)
                                  : wbcl_spd_solve(ctx, tA, tB, tB);
        const char *msg = wbcl_context_last_error(ctx);
        ck_assert_msg(st == WBCL_ERROR_NUMERIC, "%s %s: status %s (%s)", what, ops[o], wbcl_status_name(st), msg);
        ck_assert_msg(strstr(msg, needle) && strstr(msg, ops[o]), "%s: message '%s' lacks '%s'", what, msg, needle);
    }
    wbcl_tensor_destroy(tA);
    wbcl_tensor_destroy(tL);
    wbcl_tensor_destroy(tD);
    wbcl_tensor_destroy(tB);
}

START_TEST(non_spd_rejected)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 18);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        char what[96], needle[128];
        /* matrix 2 of 5 has a decoupled row/column with A_pp = -0.03: pivot p is -0.03
         * (p = 7 in the unblocked path, 150 in the third/second block of n = 200) */
        static const size_t ns[2] = {9, 200}, ps[2] = {7, 150};
        for (int c = 0; c < 2; c++) {
            size_t n = ns[c], p = ps[c], batch = 5;
            float *A = malloc(batch * n * n * sizeof *A);
            gen_batch(&r, 0, n, batch, A);
            float *A2 = A + 2 * n * n;
            for (size_t j = 0; j < n; j++) A2[p * n + j] = A2[j * n + p] = 0.0f;
            A2[p * n + p] = -0.03f;
            snprintf(what, sizeof what, "%s n=%zu negative pivot", vname(variants[v]), n);
            snprintf(needle, sizeof needle, "matrix 2 of 5 is not positive definite (pivot %zu is -0.03)", p);
            expect_numeric(ctx, n, batch, A, needle, what);
            /* a NaN in the lower triangle of matrix 4 (row 5 / row 140) */
            A2[p * n + p] = 1.0f;
            size_t q = c ? 140 : 5;
            A[4 * n * n + q * n + 2] = NAN;
            snprintf(what, sizeof what, "%s n=%zu NaN", vname(variants[v]), n);
            snprintf(needle, sizeof needle, "matrix 4 of 5 is not positive definite (pivot %zu is ", q);
            expect_numeric(ctx, n, batch, A, needle, what);
            /* +Inf off the diagonal of matrix 0: L[q][1] = inf, pivot q is -inf or NaN */
            A[4 * n * n + q * n + 2] = A[4 * n * n + 2 * n + q];
            A[q * n + 1] = INFINITY;
            snprintf(needle, sizeof needle, "matrix 0 of 5 is not positive definite (pivot %zu is ", q);
            expect_numeric(ctx, n, batch, A, needle, what);
            /* Inf on the diagonal */
            A[q * n + 1] = A[1 * n + q];
            A[3 * n * n + 4 * n + 4] = INFINITY;
            snprintf(needle, sizeof needle, "matrix 3 of 5 is not positive definite (pivot 4 is inf");
            expect_numeric(ctx, n, batch, A, needle, what);
            free(A);
        }
        /* a batch of 40 (16 matrices per work-item on CPUs): matrix 33 fails at pivot 4 */
        {
            size_t n = 9, batch = 40;
            float *A = malloc(batch * n * n * sizeof *A);
            gen_batch(&r, 0, n, batch, A);
            float *A33 = A + 33 * n * n;
            for (size_t j = 0; j < n; j++) A33[4 * n + j] = A33[j * n + 4] = 0.0f;
            A33[4 * n + 4] = -2.5f;
            A[38 * n * n + 6 * n + 3] = NAN;
            expect_numeric(ctx, n, batch, A,
                           "matrix 33 of 40 is not positive definite (pivot 4 is -2.5); 2 matrices fail in all",
                           "batch of 40");
            free(A);
        }
        /* the blocked path (n > 192), a failure in a later block: one matrix of
         * n = 700 whose pivot 600 (block 4 of 128, not the first row of its
         * block) is -0.03; a batch of 3 of n = 300 whose matrix 1 fails at
         * pivot 260 (third block) and matrix 2 at 280 (only the first is named) */
        {
            size_t n = 700, p = 600;
            float *A = malloc(n * n * sizeof *A);
            gen_gram(&r, n, 1.0, A);
            for (size_t j = 0; j < n; j++) A[p * n + j] = A[j * n + p] = 0.0f;
            A[p * n + p] = -0.03f;
            snprintf(what, sizeof what, "%s n=%zu later block", vname(variants[v]), n);
            expect_numeric(ctx, n, 1, A, "matrix 0 of 1 is not positive definite (pivot 600 is -0.03)", what);
            free(A);
            n = 300;
            A = malloc(3 * n * n * sizeof *A);
            gen_batch(&r, 0, n, 3, A);
            for (size_t b = 1; b < 3; b++) {
                float *Ab = A + b * n * n;
                p = b == 1 ? 260 : 280;
                for (size_t j = 0; j < n; j++) Ab[p * n + j] = Ab[j * n + p] = 0.0f;
                Ab[p * n + p] = -1.5f;
            }
            snprintf(what, sizeof what, "%s n=%zu batch 3 later block", vname(variants[v]), n);
            expect_numeric(ctx, n, 3, A,
                           "matrix 1 of 3 is not positive definite (pivot 260 is -1.5); 2 matrices fail in all", what);
            free(A);
        }
        /* the zero matrix fails at pivot 0 */
        float Z[16] = {0};
        expect_numeric(ctx, 4, 1, Z, "matrix 0 of 1 is not positive definite (pivot 0 is 0)", "zero matrix");
        /* a dense matrix with one negative eigenvalue: the pivot the reference finds */
        {
            size_t n = 150;
            float *A = malloc(n * n * sizeof *A);
            gen_cond(&r, n, 100.0, A);
            /* A - 0.2 I moves the eigenvalues in [0.01, 1] below zero for some */
            for (size_t i = 0; i < n; i++) A[i * n + i] -= 0.2f;
            double *Ad = tu_to_f64(A, n * n), *Ld = malloc(n * n * sizeof *Ld);
            int rc = wbcl_ref_cholesky(n, Ad, Ld);
            ck_assert_int_gt(rc, 0);
            snprintf(needle, sizeof needle, "matrix 0 of 1 is not positive definite (pivot %d is -", rc - 1);
            expect_numeric(ctx, n, 1, A, needle, "dense indefinite");
            free(Ad);
            free(Ld);
            free(A);
        }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* The GPU lookahead form with each round's panel through the next diagonal block's inverse
 * (WBCL_LA_PANEL_INV=1, host/ops/linalg.c: wbcl_chol_inv128_g builds W = L11^-1 by 16 x 16
 * substitutions and three doubling levels, then wbcl_chol_upd_g / wbcl_chol_upd128_g mode 2
 * multiply the panel by W^T instead of solving it). The sizes of cholesky_gpu_blocks (a last
 * block of 1, 3, 7 and 44 rows: W padded with the identity) batched and single, in place; the
 * rest by 128 tiles in every round (upd128_g's mode 2); launches at n = 300 (two inverses: the
 * first panel's, and the one round's with a panel below its next block; no solve); conditioning up to 1e5 at n = 300, where the
 * product's error can grow with cond(L11) = sqrt(cond(A11)) (the same residual bound holds:
 * observed 2.1e-7 against a bound of 1.9e-5); blocks of 96 (32 KB of local memory); failures in
 * later blocks reported as by the solve. */
START_TEST(cholesky_gpu_panel_inverse)
{
    static const size_t sizes[] = {128, 129, 131, 256, 263, 300, 385};
    ck_assert_int_eq(setenv("WBCL_LA_PANEL_INV", "1", 1), 0);
    check_blocked(WBCL_VARIANT_GPU, "gpu panels by inverse", sizes, sizeof sizes / sizeof *sizes, 28, 385);
    ck_assert_int_eq(setenv("WBCL_LA_UPD128_MIN", "0", 1), 0);
    check_blocked(WBCL_VARIANT_GPU, "gpu panels by inverse, 128 tiles", sizes, sizeof sizes / sizeof *sizes, 29,
                  263);
    unsetenv("WBCL_LA_UPD128_MIN");
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU), WBCL_SUCCESS);
    tu_rng r;
    tu_rng_seed(&r, 30);
    size_t n = 300;
    float *A = malloc(2 * n * n * sizeof *A);
    gen_gram(&r, n, 1.0, A);
    wbcl_tensor *tA = make(ctx, 0, n, n, A), *tL = make(ctx, 0, n, n, NULL);
    ck_assert_int_eq(wbcl_context_set_timing(ctx, 1), WBCL_SUCCESS); /* counts launches */
    ck_assert_int_eq(wbcl_cholesky(ctx, tA, tL), WBCL_SUCCESS);
    ck_assert_uint_eq(tu_launches(ctx, "wbcl_chol_inv128_g"), 2); /* the first panel's, round 0's */
    ck_assert_uint_eq(tu_launches(ctx, "wbcl_chol_r128_g"), 3);
    ck_assert_uint_eq(tu_launches(ctx, "wbcl_chol_trsm_g"), 0);
    ck_assert_uint_eq(tu_launches(ctx, "wbcl_chol_upd_g"), 1 + 3);
    ck_assert_int_eq(wbcl_context_set_timing(ctx, 0), WBCL_SUCCESS);
    wbcl_tensor_destroy(tA);
    wbcl_tensor_destroy(tL);
    static const double conds[] = {1e3, 1e5};
    for (size_t c = 0; c < 2; c++) {
        gen_cond(&r, n, conds[c], A);
        gen_cond(&r, n, conds[c], A + n * n);
        char what[96];
        snprintf(what, sizeof what, "gpu panels by inverse, cond %.0e", conds[c]);
        check_cholesky(ctx, n, 2, 1, A, what);
    }
    /* a device with the 32 KB of local memory OpenCL 1.2 promises: blocks of 96 (gpu_nb), so W is
     * the inverse of 96 x 96 blocks padded with the identity (n = 300: blocks 96, 96, 96, 12) */
    const uint64_t lmem = ctx->info.local_mem_size;
    ctx->info.local_mem_size = 32768;
    gen_batch(&r, 0, n, 2, A);
    check_cholesky(ctx, n, 2, 1, A, "gpu panels by inverse, blocks of 96");
    tA = make(ctx, 0, n, n, A);
    tL = make(ctx, 0, n, n, NULL);
    ck_assert_int_eq(wbcl_context_set_timing(ctx, 1), WBCL_SUCCESS); /* the counts go on from above */
    ck_assert_int_eq(wbcl_cholesky(ctx, tA, tL), WBCL_SUCCESS);
    ck_assert_uint_eq(tu_launches(ctx, "wbcl_chol_r128_g"), 3 + 4);
    ck_assert_uint_eq(tu_launches(ctx, "wbcl_chol_inv128_g"), 2 + 3);
    ck_assert_int_eq(wbcl_context_set_timing(ctx, 0), WBCL_SUCCESS);
    wbcl_tensor_destroy(tA);
    wbcl_tensor_destroy(tL);
    ctx->info.local_mem_size = lmem;
    gen_gram(&r, n, 1.0, A);
    for (size_t j = 0; j < n; j++) A[260 * n + j] = A[j * n + 260] = 0.0f;
    A[260 * n + 260] = -1.5f;
    expect_numeric(ctx, n, 1, A, "matrix 0 of 1 is not positive definite (pivot 260 is -1.5)",
                   "gpu panels by inverse, later block");
    unsetenv("WBCL_LA_PANEL_INV");
    free(A);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Only the lower triangle is read: garbage (NaN) above the diagonal changes nothing. */
START_TEST(upper_triangle_ignored)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 19);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        static const size_t ns[2] = {20, 200};
        for (int c = 0; c < 2; c++) {
            size_t n = ns[c];
            float *A = malloc(n * n * sizeof *A), *An = malloc(n * n * sizeof *An);
            gen_gram(&r, n, 1.0, A);
            memcpy(An, A, n * n * sizeof *A);
            for (size_t i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++) An[i * n + j] = NAN;
            wbcl_tensor *t1 = make(ctx, 0, n, n, A), *t2 = make(ctx, 0, n, n, An);
            ck_assert_int_eq(wbcl_cholesky(ctx, t1, t1), WBCL_SUCCESS); /* in place */
            ck_assert_int_eq(wbcl_cholesky(ctx, t2, t2), WBCL_SUCCESS);
            float *L1 = tu_guarded_alloc(n * n), *L2 = tu_guarded_alloc(n * n);
            ck_assert_int_eq(wbcl_tensor_read(ctx, t1, L1, n * n), WBCL_SUCCESS);
            ck_assert_int_eq(wbcl_tensor_read(ctx, t2, L2, n * n), WBCL_SUCCESS);
            ck_assert(memcmp(L1, L2, n * n * sizeof *L1) == 0);
            ck_assert(tu_canary_ok(L1, n * n) && tu_canary_ok(L2, n * n));
            ck_assert(chol_residual(n, L1, A) <= RES_BOUND(n));
            tu_guarded_free(L1);
            tu_guarded_free(L2);
            wbcl_tensor_destroy(t1);
            wbcl_tensor_destroy(t2);
            free(A);
            free(An);
        }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- bad arguments ----------------------------------------------------------------------- */
/* The tensor still holds `value` everywhere. */
static void assert_filled(wbcl_context *ctx, const wbcl_tensor *t, float value)
{
    size_t n = wbcl_tensor_numel(t);
    float *x = tu_guarded_alloc(n);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t, x, n), WBCL_SUCCESS);
    for (size_t i = 0; i < n; i++) ck_assert_msg(x[i] == value, "output touched at %zu: %g", i, (double)x[i]);
    ck_assert(tu_canary_ok(x, n));
    tu_guarded_free(x);
}

START_TEST(bad_arguments)
{
    wbcl_context *ctx = tu_context(), *other = tu_context();
    float I4[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    wbcl_tensor *A = make(ctx, 0, 4, 4, I4), *L = make(ctx, 0, 4, 4, NULL), *A3 = make(ctx, 2, 4, 4, NULL);
    wbcl_tensor *R = make(ctx, 0, 4, 5, NULL), *B = make(ctx, 0, 4, 3, NULL), *B5 = make(ctx, 0, 5, 3, NULL);
    wbcl_tensor *X = make(ctx, 0, 4, 3, NULL), *X2 = make(ctx, 0, 4, 2, NULL), *B3 = make(ctx, 2, 4, 3, NULL);
    wbcl_tensor *Ao = make(other, 0, 4, 4, I4), *D1 = NULL, *D2 = NULL, *V = NULL, *T4 = NULL;
    size_t s1[1] = {1}, s2[1] = {2}, s4[4] = {1, 1, 4, 4};
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s1, WBCL_F32, NULL, &D1), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s2, WBCL_F32, NULL, &D2), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s4 + 2, WBCL_F32, NULL, &V), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 4, s4, WBCL_F32, NULL, &T4), WBCL_SUCCESS);
    wbcl_tensor *outs[] = {L, D1, D2, X, X2, B, R};
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) ck_assert_int_eq(wbcl_tensor_fill(ctx, outs[i], 7.0f), 0);

    /* NULL context and tensors */
    ck_assert_int_eq(wbcl_cholesky(NULL, A, L), WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_logdet_spd(NULL, A, D1), WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_spd_inverse(NULL, A, L), WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_spd_solve(NULL, A, B, X), WBCL_ERROR_INVALID_ARGUMENT);
    tu_assert_status(ctx, wbcl_cholesky(ctx, NULL, L), WBCL_ERROR_INVALID_ARGUMENT, "'A' is NULL");
    tu_assert_status(ctx, wbcl_cholesky(ctx, A, NULL), WBCL_ERROR_INVALID_ARGUMENT, "'L' is NULL");
    tu_assert_status(ctx, wbcl_logdet_spd(ctx, A, NULL), WBCL_ERROR_INVALID_ARGUMENT, "'logdet' is NULL");
    tu_assert_status(ctx, wbcl_spd_inverse(ctx, A, NULL), WBCL_ERROR_INVALID_ARGUMENT, "'Ainv' is NULL");
    tu_assert_status(ctx, wbcl_spd_solve(ctx, A, NULL, X), WBCL_ERROR_INVALID_ARGUMENT, "'B' is NULL");
    tu_assert_status(ctx, wbcl_spd_solve(ctx, A, B, NULL), WBCL_ERROR_INVALID_ARGUMENT, "'X' is NULL");
    /* another context */
    tu_assert_status(ctx, wbcl_cholesky(ctx, Ao, L), WBCL_ERROR_CONTEXT_MISMATCH, "another context");
    tu_assert_status(ctx, wbcl_spd_solve(ctx, Ao, B, X), WBCL_ERROR_CONTEXT_MISMATCH, "another context");
    tu_assert_status(ctx, wbcl_spd_inverse(ctx, A, Ao), WBCL_ERROR_CONTEXT_MISMATCH, "another context");
    /* shapes */
    tu_assert_status(ctx, wbcl_cholesky(ctx, R, L), WBCL_ERROR_SHAPE, "square, has shape (4, 5)");
    tu_assert_status(ctx, wbcl_cholesky(ctx, V, L), WBCL_ERROR_SHAPE, "(n, n) or (batch, n, n), has shape (4)");
    tu_assert_status(ctx, wbcl_cholesky(ctx, T4, L), WBCL_ERROR_SHAPE, "has shape (1, 1, 4, 4)");
    tu_assert_status(ctx, wbcl_cholesky(ctx, A3, L), WBCL_ERROR_SHAPE, "(2, 4, 4)");
    tu_assert_status(ctx, wbcl_logdet_spd(ctx, A, D2), WBCL_ERROR_SHAPE, "must have 1 elements");
    tu_assert_status(ctx, wbcl_logdet_spd(ctx, A3, D1), WBCL_ERROR_SHAPE, "must have 2 elements");
    tu_assert_status(ctx, wbcl_spd_inverse(ctx, A, R), WBCL_ERROR_SHAPE, "(4, 5)");
    tu_assert_status(ctx, wbcl_spd_inverse(ctx, A, A), WBCL_ERROR_INVALID_ARGUMENT, "Ainv must not be A");
    tu_assert_status(ctx, wbcl_spd_solve(ctx, A, B5, B5), WBCL_ERROR_SHAPE, "n = 4 rows");
    tu_assert_status(ctx, wbcl_spd_solve(ctx, A, V, X), WBCL_ERROR_SHAPE, "B must be (n, r)");
    tu_assert_status(ctx, wbcl_spd_solve(ctx, A, B3, B3), WBCL_ERROR_SHAPE, "batch 2");
    tu_assert_status(ctx, wbcl_spd_solve(ctx, A3, B, X), WBCL_ERROR_SHAPE, "batch 1");
    tu_assert_status(ctx, wbcl_spd_solve(ctx, A, B, X2), WBCL_ERROR_SHAPE, "(4, 2)");
    tu_assert_status(ctx, wbcl_spd_solve(ctx, A, A, A), WBCL_ERROR_INVALID_ARGUMENT, "X must not be A");
    /* nothing was written */
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) assert_filled(ctx, outs[i], 7.0f);
    /* and the valid calls still work */
    ck_assert_int_eq(wbcl_cholesky(ctx, A, L), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_logdet_spd(ctx, A, D1), WBCL_SUCCESS);
    assert_filled(ctx, D1, 0.0f);
    wbcl_tensor *all[] = {A, L, A3, R, B, B5, X, X2, B3, D1, D2, V, T4};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) wbcl_tensor_destroy(all[i]);
    wbcl_tensor_destroy(Ao);
    wbcl_context_destroy(other);
    wbcl_context_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("linalg");
    /* one test case each, so CK_RUN_CASE=<name> runs one of them */
    const struct { const char *name; const TTest *test; } cases[] = {
        {"cholesky_sizes", cholesky_sizes},
        {"logdet_sizes", logdet_sizes},
        {"inverse_sizes", inverse_sizes},
        {"solve_sizes", solve_sizes},
        {"cholesky_1024", cholesky_1024},
        {"cholesky_block_boundaries", cholesky_block_boundaries},
        {"cholesky_gpu_blocks", cholesky_gpu_blocks},
        {"cholesky_gpu_gemm", cholesky_gpu_gemm},
        {"batches_of_small_matrices", batches_of_small_matrices},
        {"inverse_gpu_blocked", inverse_gpu_blocked},
        {"cholesky_gpu_small_batches", cholesky_gpu_small_batches},
        {"redunet_matrices", redunet_matrices},
        {"non_spd_rejected", non_spd_rejected},
        {"cholesky_gpu_panel_inverse", cholesky_gpu_panel_inverse},
        {"upper_triangle_ignored", upper_triangle_ignored},
        {"bad_arguments", bad_arguments},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    return tu_run(s);
}
