/* White-box measures (include/wbcl/measures.h) against the double references of
 * host/ref/ref_measures.c (which use the d x d / p x p Grams exactly as written),
 * in both kernel variants, plus properties from the book (§5.2, §5.3.2).
 *
 * Tolerances (u = 2^-24):
 *  - R and each term of Rc are 1/2 logdet(A), A = I + a G, A >= I. A
 *    perturbation dA changes logdet by tr(A^-1 dA), and ||A^-1||_2 <= 1, so
 *    |d logdet| <= ||dA||_* (nuclear norm). Two sources: the float Gram, whose
 *    entries are length-n dot products (n = the Gram's inner dimension) with
 *    |dG| <= gamma_n |Z|^T|Z|, and the Cholesky backward error
 *    |dA| <= gamma_{q+1} |L||L^T| (Higham Thm 10.3), ||L||_F^2 = tr(A). The
 *    worst case is then (n + q + 2) sqrt(q) u tr(A) / 2 per term (sqrt(q): an
 *    entrywise bound to a nuclear norm). As in test_linalg.c we take the
 *    practical form in which the rounding errors of the dot products add up
 *    like a random walk and the entrywise errors do not align:
 *      |got - ref| <= MEAS_C sqrt(n + q) u tr(A) / 2 per term,
 *    tr(A) = q + a ||Z||_F^2 (the same from either side of the Gram), MEAS_C = 1.
 *    Observed errors are 100-10^4 times below it; a wrong scale (d vs p, N vs
 *    N - 1), a missing identity or a wrong subspace gives errors of order
 *    1e-2..1.
 *  - Rvar: Pi-weighted sums of squares over N tokens (Kahan-compensated on the
 *    device) and the K p columns of Z U (length-d products): relative error of
 *    each statistic <= (d + 8) u + 4 u, and |d log(1 + c x)| <= |dx|/x, so
 *    |got - ref| <= RVAR_C (d + 12) u (sum_k N_k/N p)/2, RVAR_C = 1.
 *  - Sparsity: exact counts (integers) divided once: equal to the double value
 *    computed from the same float data, to 1 ulp of double. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "wbcl/measures.h"
#include "wbcl/ref.h"

#define U32 (1.0 / 16777216.0)
#define MEAS_C 1.0
#define RVAR_C 1.0

static const wbcl_variant variants[2] = {WBCL_VARIANT_CPU, WBCL_VARIANT_GPU};
static const char *vname(wbcl_variant v) { return v == WBCL_VARIANT_CPU ? "cpu" : "gpu"; }

static wbcl_tensor *mk(wbcl_context *ctx, int nd, const size_t *shape, const float *data)
{
    wbcl_tensor *t = NULL;
    wbcl_status st = wbcl_tensor_create(ctx, nd, shape, WBCL_F32, data, &t);
    ck_assert_msg(st == WBCL_SUCCESS, "tensor_create: %s", wbcl_context_last_error(ctx));
    return t;
}

static double sumsq(const double *z, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += z[i] * z[i];
    return s;
}

/* Tolerance of one 1/2 logdet(I + a Gram) term, Gram q x q with inner dimension n. */
static double ld_tol(size_t n, size_t q, double a, double frob2)
{
    return MEAS_C * sqrt((double)(n + q)) * U32 * ((double)q + a * frob2) / 2.0;
}

/* Z (batch..., N, d), U (d, K p) (passed transposed when tu): R, Rc, dR against the references. */
static void check_rates(wbcl_context *ctx, tu_rng *r, int nd, const size_t *zs, size_t K, size_t p, int tu,
                        double eps2)
{
    const size_t N = zs[nd - 2], d = zs[nd - 1], kp = K * p;
    size_t batch = 1;
    for (int i = 0; i < nd - 2; i++) batch *= zs[i];
    float *Z = tu_random_f32(r, batch * N * d, -1, 1), *Uf = tu_random_f32(r, d * kp, -1, 1), *Ut = malloc(d * kp * 4);
    ck_assert_ptr_nonnull(Ut);
    for (size_t i = 0; i < d; i++)
        for (size_t c = 0; c < kp; c++) Ut[c * d + i] = Uf[i * kp + c];
    double *Z64 = tu_to_f64(Z, batch * N * d), *U64 = tu_to_f64(Uf, d * kp);
    size_t us[2] = {d, kp}, ust[2] = {kp, d};
    wbcl_tensor *tz = mk(ctx, nd, zs, Z), *tuu = tu ? mk(ctx, 2, ust, Ut) : mk(ctx, 2, us, Uf);
    double *R = malloc(batch * sizeof *R), *Rc = malloc(batch * sizeof *Rc), *dR = malloc(batch * sizeof *dR),
           *R2 = malloc(batch * sizeof *R2), *Rc2 = malloc(batch * sizeof *Rc2);
    ck_assert(R && Rc && dR && R2 && Rc2);
    const wbcl_transpose T = tu ? WBCL_TRANS : WBCL_NO_TRANS;
    ck_assert_msg(wbcl_coding_rate(ctx, tz, eps2, R) == WBCL_SUCCESS, "%s", wbcl_context_last_error(ctx));
    ck_assert_msg(wbcl_coding_rate_subspaces(ctx, tz, tuu, T, K, eps2, Rc) == WBCL_SUCCESS, "%s",
                  wbcl_context_last_error(ctx));
    ck_assert_msg(wbcl_rate_reduction(ctx, tz, tuu, T, K, eps2, dR, R2, Rc2) == WBCL_SUCCESS, "%s",
                  wbcl_context_last_error(ctx));
    double *W = malloc(N * kp * sizeof *W);
    ck_assert_ptr_nonnull(W);
    for (size_t b = 0; b < batch; b++) {
        const double *Zb = Z64 + b * N * d;
        const double Rref = wbcl_ref_coding_rate(N, d, Zb, eps2);
        const double Rcref = wbcl_ref_coding_rate_subspaces(N, d, K, p, Zb, U64, eps2);
        const size_t q = d < N ? d : N;
        const double tR = ld_tol(q == d ? N : d, q, (double)d / ((double)N * eps2), sumsq(Zb, N * d));
        /* Rc: the K terms, each with Z U_k's norm (projections: length-d products, + d to n) */
        for (size_t n = 0; n < N; n++)
            for (size_t c = 0; c < kp; c++) {
                double s = 0.0;
                for (size_t i = 0; i < d; i++) s += Zb[n * d + i] * U64[i * kp + c];
                W[n * kp + c] = s;
            }
        double tRc = 0.0;
        const size_t qp = p < N ? p : N;
        for (size_t k = 0; k < K; k++) {
            double f2 = 0.0;
            for (size_t n = 0; n < N; n++)
                for (size_t c = k * p; c < k * p + p; c++) f2 += W[n * kp + c] * W[n * kp + c];
            tRc += ld_tol((qp == p ? N : p) + d, qp, (double)p / ((double)N * eps2), f2);
        }
        ck_assert_msg(fabs(R[b] - Rref) <= tR, "%s R (batch %zu of %zu, N %zu d %zu): %.10g vs %.10g (tol %.3g)",
                      vname(wbcl_context_variant(ctx)), b, batch, N, d, R[b], Rref, tR);
        ck_assert_msg(fabs(Rc[b] - Rcref) <= tRc, "%s Rc (batch %zu, N %zu d %zu K %zu p %zu tu %d): %.10g vs %.10g (tol %.3g)",
                      vname(wbcl_context_variant(ctx)), b, N, d, K, p, tu, Rc[b], Rcref, tRc);
        /* the same computation twice: identical results, dR = R - Rc exactly */
        ck_assert(R2[b] == R[b] && Rc2[b] == Rc[b] && dR[b] == R[b] - Rc[b]);
    }
    free(W);
    wbcl_tensor_destroy(tz);
    wbcl_tensor_destroy(tuu);
    free(Z);
    free(Uf);
    free(Ut);
    free(Z64);
    free(U64);
    free(R);
    free(Rc);
    free(dR);
    free(R2);
    free(Rc2);
}

START_TEST(measures_rates_match_reference)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 31);
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        size_t a[2] = {1, 1}, b[2] = {7, 13}, c[2] = {37, 5}, e[3] = {3, 11, 6}, f[4] = {2, 2, 9, 4}, g[3] = {2, 64, 48},
               h[2] = {197, 131};
        check_rates(ctx, &r, 2, a, 1, 1, 0, 0.5);
        check_rates(ctx, &r, 2, b, 3, 4, 0, 0.5);  /* N < d, p < N */
        check_rates(ctx, &r, 2, b, 2, 9, 1, 0.1);  /* N < p, transposed U */
        check_rates(ctx, &r, 2, c, 1, 5, 1, 0.5);  /* d < N */
        check_rates(ctx, &r, 3, e, 2, 3, 0, 0.1);
        check_rates(ctx, &r, 4, f, 4, 1, 1, 0.5);
        check_rates(ctx, &r, 3, g, 6, 8, 1, 0.5);
        check_rates(ctx, &r, 2, h, 3, 43, 0, 1.0); /* blocked Cholesky (131 > 128) on the CPU path */
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* Householder reflector H = I - 2 v v^T / v^T v applied on the left of a (n, c) matrix. */
static void reflect(size_t n, size_t c, double *A, const double *v)
{
    double vv = 0.0;
    for (size_t i = 0; i < n; i++) vv += v[i] * v[i];
    for (size_t j = 0; j < c; j++) {
        double s = 0.0;
        for (size_t i = 0; i < n; i++) s += v[i] * A[i * c + j];
        for (size_t i = 0; i < n; i++) A[i * c + j] -= 2.0 * s / vv * v[i];
    }
}

/* Random orthogonal Q (n x n): three reflectors applied to I. */
static void random_orthogonal(tu_rng *r, size_t n, double *Q)
{
    double *v = malloc(n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n * n; i++) Q[i] = (i % (n + 1)) == 0;
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < n; i++) v[i] = tu_normal(r);
        reflect(n, n, Q, v);
    }
    free(v);
}

/* Properties: (1) K = 1, U = I: Rc = R so dR = 0 (5.2.1 with one full subspace);
 * (2) Theorem 5.2: with Pi = 1 and U = the eigenvectors of Z^T Z, Rvar equals R; with any other
 * orthonormal U (here I) it is strictly larger; (3) tokens on K orthogonal coordinate subspaces
 * measured against those subspaces compress: Rc < R, dR > 0; against the basis that mixes the two
 * subspaces at 45 degrees (u_i = (e_i + e_{i+p})/sqrt 2, u_{i+p} = (e_i - e_{i+p})/sqrt 2) dR is
 * lower (by 0.13 for this data in float64 NumPy). */
START_TEST(measures_properties)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 32);
    const size_t N = 40, d = 8;
    const double eps2 = 0.5;
    double *Q = malloc(d * d * sizeof *Q), *P = malloc(N * N * sizeof *P), *Z = calloc(N * d, sizeof *Z);
    float *Zf = malloc(N * d * sizeof *Zf), *I = calloc(d * d, sizeof *I), *Qf = malloc(d * d * sizeof *Qf),
          *ones = malloc(N * sizeof *ones);
    ck_assert(Q && P && Z && Zf && I && Qf && ones);
    random_orthogonal(&r, d, Q);
    random_orthogonal(&r, N, P);
    /* Z = P S Q^T, S (N, d) with S_ii = s_i: Z^T Z = Q diag(s^2) Q^T */
    for (size_t n = 0; n < N; n++)
        for (size_t j = 0; j < d; j++) {
            double s = 0.0;
            for (size_t i = 0; i < d; i++) s += P[n * N + i] * (0.5 + 0.3 * (double)i) * Q[j * d + i];
            Z[n * d + j] = s;
        }
    for (size_t i = 0; i < N * d; i++) Zf[i] = (float)Z[i];
    for (size_t i = 0; i < d; i++) I[i * d + i] = 1.0f;
    for (size_t i = 0; i < d * d; i++) Qf[i] = (float)Q[i];
    for (size_t i = 0; i < N; i++) ones[i] = 1.0f;
    size_t zs[2] = {N, d}, us[2] = {d, d}, ps[2] = {1, N};
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        wbcl_tensor *tz = mk(ctx, 2, zs, Zf), *ti = mk(ctx, 2, us, I), *tq = mk(ctx, 2, us, Qf), *tp = mk(ctx, 2, ps, ones);
        double R, Rc, dR, Rv_eig, Rv_id;
        ck_assert_int_eq(wbcl_rate_reduction(ctx, tz, ti, WBCL_NO_TRANS, 1, eps2, &dR, &R, &Rc), WBCL_SUCCESS);
        const double tol = 2.0 * ld_tol(N, d, (double)d / ((double)N * eps2), sumsq(Z, N * d));
        ck_assert_msg(fabs(dR) <= tol, "%s: K = 1, U = I: dR = %.3g", vname(variants[v]), dR);
        ck_assert_int_eq(wbcl_coding_rate_var(ctx, tz, tq, WBCL_NO_TRANS, 1, tp, eps2, &Rv_eig), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_coding_rate_var(ctx, tz, ti, WBCL_NO_TRANS, 1, tp, eps2, &Rv_id), WBCL_SUCCESS);
        ck_assert_msg(fabs(Rv_eig - R) <= tol + RVAR_C * (double)(d + 12) * U32 * (double)d,
                      "%s: Rvar with the eigenvectors %.10g != R %.10g", vname(variants[v]), Rv_eig, R);
        ck_assert_msg(Rv_id > R + 1e-3, "%s: Rvar with U = I %.10g not above R %.10g", vname(variants[v]), Rv_id, R);
        wbcl_tensor_destroy(tz);
        wbcl_tensor_destroy(ti);
        wbcl_tensor_destroy(tq);
        wbcl_tensor_destroy(tp);
    }
    /* (3) K = 2 coordinate subspaces of dimension 4; tokens in one or the other */
    const size_t K = 2, p = 4;
    for (size_t n = 0; n < N; n++)
        for (size_t j = 0; j < d; j++) Zf[n * d + j] = (j / p == n % K) ? (float)tu_normal(&r) : 0.0f;
    double dR_aligned, dR_rot, R, Rc;
    for (size_t i = 0; i < d * d; i++) Qf[i] = 0.0f;
    for (size_t i = 0; i < p; i++) {
        Qf[i * d + i] = Qf[(i + p) * d + i] = Qf[i * d + i + p] = (float)0.70710678118654752;
        Qf[(i + p) * d + i + p] = -(float)0.70710678118654752;
    }
    wbcl_tensor *tz = mk(ctx, 2, zs, Zf), *ti = mk(ctx, 2, us, I), *tq = mk(ctx, 2, us, Qf);
    ck_assert_int_eq(wbcl_rate_reduction(ctx, tz, ti, WBCL_NO_TRANS, K, eps2, &dR_aligned, &R, &Rc), WBCL_SUCCESS);
    ck_assert_msg(Rc < R && dR_aligned > 0.5, "aligned: R %.6g Rc %.6g", R, Rc);
    ck_assert_int_eq(wbcl_rate_reduction(ctx, tz, tq, WBCL_NO_TRANS, K, eps2, &dR_rot, NULL, NULL), WBCL_SUCCESS);
    ck_assert_msg(dR_rot < dR_aligned - 0.05, "mixed subspaces: dR %.6g, aligned %.6g", dR_rot, dR_aligned);
    wbcl_tensor_destroy(tz);
    wbcl_tensor_destroy(ti);
    wbcl_tensor_destroy(tq);
    free(Q);
    free(P);
    free(Z);
    free(Zf);
    free(I);
    free(Qf);
    free(ones);
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(measures_rvar_matches_reference)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 33);
    const struct { size_t B, N, d, K, p; int tu, empty; } cases[] = {
        {1, 1, 1, 1, 1, 0, 0}, {1, 13, 7, 3, 2, 1, 0}, {2, 29, 12, 4, 3, 0, 1}, {3, 64, 16, 2, 8, 1, 0}};
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const size_t B = cases[c].B, N = cases[c].N, d = cases[c].d, K = cases[c].K, p = cases[c].p, kp = K * p;
            float *Z = tu_random_f32(&r, B * N * d, -1, 1), *U = tu_random_f32(&r, d * kp, -1, 1),
                  *Pi = malloc(B * K * N * sizeof *Pi), *Ut = malloc(d * kp * sizeof *Ut);
            ck_assert(Pi && Ut);
            for (size_t b = 0; b < B; b++)
                for (size_t j = 0; j < N; j++) {
                    double s = 0.0, w[16];
                    for (size_t k = 0; k < K; k++) s += (w[k] = (cases[c].empty && k == 1) ? 0.0 : tu_uniform(&r, 0.1, 1.0));
                    for (size_t k = 0; k < K; k++) Pi[(b * K + k) * N + j] = (float)(w[k] / s);
                }
            for (size_t i = 0; i < d; i++)
                for (size_t q = 0; q < kp; q++) Ut[q * d + i] = U[i * kp + q];
            double *Z64 = tu_to_f64(Z, B * N * d), *U64 = tu_to_f64(U, d * kp), *Pi64 = tu_to_f64(Pi, B * K * N),
                   *got = malloc(B * sizeof *got);
            ck_assert_ptr_nonnull(got);
            size_t zs[3] = {B, N, d}, us[2] = {d, kp}, ust[2] = {kp, d}, ps[3] = {B, K, N};
            wbcl_tensor *tz = mk(ctx, 3, zs, Z), *tuu = cases[c].tu ? mk(ctx, 2, ust, Ut) : mk(ctx, 2, us, U),
                        *tp = mk(ctx, 3, ps, Pi);
            ck_assert_msg(wbcl_coding_rate_var(ctx, tz, tuu, cases[c].tu ? WBCL_TRANS : WBCL_NO_TRANS, K, tp, 0.5, got) ==
                              WBCL_SUCCESS,
                          "%s", wbcl_context_last_error(ctx));
            for (size_t b = 0; b < B; b++) {
                double want = wbcl_ref_coding_rate_var(N, d, K, p, Z64 + b * N * d, U64, Pi64 + b * K * N, 0.5);
                double tol = RVAR_C * (double)(d + 12) * U32 * (double)p / 2.0 * 1.0 + 1e-300;
                /* sum_k N_k / N = 1 (rows of Pi sum to 1), so the bound is (d + 12) u p / 2 */
                ck_assert_msg(fabs(got[b] - want) <= tol, "%s case %zu batch %zu: %.10g vs %.10g (tol %.3g)",
                              vname(variants[v]), c, b, got[b], want, tol);
            }
            wbcl_tensor_destroy(tz);
            wbcl_tensor_destroy(tuu);
            wbcl_tensor_destroy(tp);
            free(Z);
            free(U);
            free(Pi);
            free(Ut);
            free(Z64);
            free(U64);
            free(Pi64);
            free(got);
        }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(measures_sparsity)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 34);
    const size_t B = 3, N = 17, d = 23;
    float *Z = tu_random_f32(&r, B * N * d, -1, 1);
    for (size_t i = 0; i < B * N * d; i += 3) Z[i] = 0.0f;
    Z[5] = NAN;
    Z[7] = -0.0f;
    double *Z64 = tu_to_f64(Z, B * N * d), frac[3];
    size_t zs[3] = {B, N, d};
    for (int v = 0; v < 2; v++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[v]), WBCL_SUCCESS);
        wbcl_tensor *tz = mk(ctx, 3, zs, Z);
        const float th[3] = {0.0f, 0.3f, 2.0f};
        for (int t = 0; t < 3; t++) {
            ck_assert_int_eq(wbcl_sparsity(ctx, tz, th[t], frac), WBCL_SUCCESS);
            for (size_t b = 0; b < B; b++) {
                double want = wbcl_ref_sparsity(N, d, Z64 + b * N * d, th[t]);
                ck_assert_msg(frac[b] == want, "%s threshold %g batch %zu: %.10g vs %.10g", vname(variants[v]),
                              (double)th[t], b, frac[b], want);
            }
        }
        /* threshold 2 > every |z|: only the NaN counts */
        ck_assert(frac[0] == 1.0 / (double)(N * d) && frac[1] == 0.0);
        wbcl_tensor_destroy(tz);
    }
    free(Z);
    free(Z64);
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(measures_bad_input)
{
    wbcl_context *ctx = tu_context(), *other = tu_context();
    float ones[64];
    for (int i = 0; i < 64; i++) ones[i] = 1.0f;
    size_t s1[1] = {8}, sz[2] = {4, 6}, su[2] = {6, 4}, sut[2] = {4, 6}, sbad[2] = {5, 4}, sp[2] = {2, 4}, spb[2] = {2, 5};
    wbcl_tensor *z1 = mk(ctx, 1, s1, ones), *Z = mk(ctx, 2, sz, ones), *U = mk(ctx, 2, su, ones),
                *Ut = mk(ctx, 2, sut, ones), *Ub = mk(ctx, 2, sbad, ones), *Pi = mk(ctx, 2, sp, ones),
                *Pib = mk(ctx, 2, spb, ones), *Zo = mk(other, 2, sz, ones);
    double out[2] = {-7, -7}, o2[2] = {-7, -7};
    tu_assert_status(ctx, wbcl_coding_rate(ctx, NULL, 0.5, out), WBCL_ERROR_INVALID_ARGUMENT, "NULL");
    ck_assert_int_eq(wbcl_coding_rate(NULL, Z, 0.5, out), WBCL_ERROR_INVALID_ARGUMENT);
    tu_assert_status(ctx, wbcl_coding_rate(ctx, z1, 0.5, out), WBCL_ERROR_SHAPE, "(8)");
    tu_assert_status(ctx, wbcl_coding_rate(ctx, Z, 0.0, out), WBCL_ERROR_INVALID_ARGUMENT, "eps2");
    tu_assert_status(ctx, wbcl_coding_rate(ctx, Z, NAN, out), WBCL_ERROR_INVALID_ARGUMENT, "eps2");
    tu_assert_status(ctx, wbcl_coding_rate(ctx, Z, 0.5, NULL), WBCL_ERROR_INVALID_ARGUMENT, "'R' is NULL");
    tu_assert_status(ctx, wbcl_coding_rate(ctx, Zo, 0.5, out), WBCL_ERROR_CONTEXT_MISMATCH, "");
    tu_assert_status(ctx, wbcl_coding_rate_subspaces(ctx, Z, Ub, WBCL_NO_TRANS, 2, 0.5, out), WBCL_ERROR_SHAPE,
                     "U has shape (5, 4)");
    tu_assert_status(ctx, wbcl_coding_rate_subspaces(ctx, Z, U, WBCL_NO_TRANS, 3, 0.5, out), WBCL_ERROR_SHAPE, "K = 3");
    tu_assert_status(ctx, wbcl_coding_rate_subspaces(ctx, Z, U, WBCL_NO_TRANS, 0, 0.5, out),
                     WBCL_ERROR_INVALID_ARGUMENT, "K");
    tu_assert_status(ctx, wbcl_coding_rate_subspaces(ctx, Z, U, WBCL_TRANS, 2, 0.5, out), WBCL_ERROR_SHAPE, "(K p, d)");
    tu_assert_status(ctx, wbcl_coding_rate_subspaces(ctx, Z, Ut, (wbcl_transpose)3, 2, 0.5, out),
                     WBCL_ERROR_INVALID_ARGUMENT, "tu");
    tu_assert_status(ctx, wbcl_rate_reduction(ctx, Z, U, WBCL_NO_TRANS, 2, 0.5, NULL, out, o2),
                     WBCL_ERROR_INVALID_ARGUMENT, "'dR' is NULL");
    tu_assert_status(ctx, wbcl_coding_rate_var(ctx, Z, U, WBCL_NO_TRANS, 2, Pib, 0.5, out), WBCL_ERROR_SHAPE,
                     "Pi has shape (2, 5)");
    tu_assert_status(ctx, wbcl_coding_rate_var(ctx, Z, U, WBCL_NO_TRANS, 2, NULL, 0.5, out),
                     WBCL_ERROR_INVALID_ARGUMENT, "NULL");
    tu_assert_status(ctx, wbcl_sparsity(ctx, Z, -1.0f, out), WBCL_ERROR_INVALID_ARGUMENT, "threshold");
    tu_assert_status(ctx, wbcl_sparsity(ctx, Z, NAN, out), WBCL_ERROR_INVALID_ARGUMENT, "threshold");
    tu_assert_status(ctx, wbcl_sparsity(ctx, z1, 0.0f, out), WBCL_ERROR_SHAPE, "");
    ck_assert(out[0] == -7 && out[1] == -7 && o2[0] == -7 && o2[1] == -7);
    /* a valid call on the same tensors works (the failures above left nothing behind) */
    ck_assert_int_eq(wbcl_coding_rate_var(ctx, Z, Ut, WBCL_TRANS, 2, Pi, 0.5, out), WBCL_SUCCESS);
    ck_assert(isfinite(out[0]) && out[1] == -7);
    wbcl_tensor *ts[] = {z1, Z, U, Ut, Ub, Pi, Pib, Zo};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) wbcl_tensor_destroy(ts[i]);
    wbcl_context_destroy(ctx);
    wbcl_context_destroy(other);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("measures");
    TCase *tc = tcase_create("measures");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, measures_rates_match_reference);
    tcase_add_test(tc, measures_properties);
    tcase_add_test(tc, measures_rvar_matches_reference);
    tcase_add_test(tc, measures_sparsity);
    tcase_add_test(tc, measures_bad_input);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
