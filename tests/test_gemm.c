/* GEMM: wbcl_gemm and wbcl_gemm_strided on the three backends (packed kernel,
 * CLBlast, tiled kernel) against the double-precision reference, plus bad input.
 *
 * Every numeric case runs three times through tcase_add_loop_test: _i = 0 with
 * WBCL_GEMM_PACKED, _i = 1 with WBCL_GEMM_CLBLAST, _i = 2 with WBCL_GEMM_TILED
 * (its GPU-shaped kernel runs on PoCL too: the CI checks it there, and on the
 * GPU variant's contexts alike). Where CLBlast cannot run
 * (no compiler, unsupported device) the CLBlast half fails with CLBlast's
 * status name; it is never skipped. CLBlast compiles its kernels on first use
 * in each process (Check forks one per test), so its shapes stay small.
 *
 * Tolerance. Inputs are exact floats, the reference sums in double. Any fp32
 * evaluation of alpha*sum_p a_ip b_pj + beta*c (any summation order, with or
 * without FMA) satisfies
 *     |got - exact| <= (k + 3) u (|alpha| sum_p |a_ip||b_pj| + |beta||c|),
 * u = 2^-24 (k-1 additions + one product per term [gamma_k, Higham 3.1] and at
 * most 3 roundings for the alpha/beta update). We accept twice that bound:
 *     tol_ij = 2 (k + 4) u (|alpha| (|A||B|)_ij + |beta||c_ij|) + 1e-30,
 * computed exactly by running the reference on absolute values. It is a
 * worst-case bound, so it never fails on a correct kernel, yet a single
 * missing, doubled or misplaced product (size ~|a||b|) exceeds it by orders
 * of magnitude for the k used here (k <= 301: tol <= 3.6e-5 * sum). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "testutil.h"

static const wbcl_gemm_backend backends[3] = {WBCL_GEMM_PACKED, WBCL_GEMM_CLBLAST, WBCL_GEMM_TILED};
#define N_BACKENDS 3

static const char *backend_name(const wbcl_context *ctx)
{
    switch (wbcl_context_gemm_backend(ctx)) {
    case WBCL_GEMM_PACKED: return "packed";
    case WBCL_GEMM_CLBLAST: return "CLBlast";
    case WBCL_GEMM_TILED: return "tiled";
    default: return "?";
    }
}

static wbcl_context *ctx_for(int bi)
{
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, backends[bi]), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_gemm_backend(ctx), backends[bi]);
    return ctx;
}

static void gemm_ok(wbcl_context *ctx, wbcl_status st, const char *what)
{
    ck_assert_msg(st == WBCL_SUCCESS, "%s (%s backend): %s: %s", what,
                  backend_name(ctx), wbcl_status_name(st),
                  wbcl_context_last_error(ctx));
}

/* Element-wise comparison with the bound from the file comment. */
static void expect_close(const float *got, const double *want, const double *absbound, size_t count, size_t k,
                         const char *what)
{
    const double u = ldexp(1.0, -24);
    double worst = 0.0;
    size_t wi = 0;
    for (size_t i = 0; i < count; i++) {
        double tol = 2.0 * (double)(k + 4) * u * absbound[i] + 1e-30;
        double r = isfinite(got[i]) ? fabs((double)got[i] - want[i]) / tol : INFINITY;
        if (!(r <= worst)) {
            worst = r;
            wi = i;
        }
    }
    ck_assert_msg(worst <= 1.0, "%s: element %zu got %.9g want %.9g (error %.3g x tolerance)", what, wi,
                  (double)got[wi], want[wi], worst);
}

static double *dabs(const float *x, size_t n)
{
    double *d = tu_to_f64(x, n);
    for (size_t i = 0; i < n; i++) d[i] = fabs(d[i]);
    return d;
}

/* ---- dense cases through wbcl_gemm ----------------------------------------------- */
typedef struct {
    wbcl_transpose ta, tb;
    size_t m, n, k;
    float alpha, beta;
    int nda, ndb, ndc; /* 2 (no batch) or ndc */
    size_t bd[2];      /* C's leading (batch) dimensions */
    int nan_c;         /* fill C with NaN before (needs beta == 0) */
    cl_ulong max_alloc; /* nonzero: pretend the device allows no larger allocation during the call */
} gspec;

static void run_dense(wbcl_context *ctx, const gspec *s, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    const size_t m = s->m, n = s->n, k = s->k;
    size_t batch = 1;
    for (int i = 0; i < s->ndc - 2; i++) batch *= s->bd[i];
    const size_t ar = s->ta ? k : m, ac = s->ta ? m : k, br = s->tb ? n : k, bc = s->tb ? k : n;
    const size_t na = (s->nda > 2 ? batch : 1) * m * k, nb = (s->ndb > 2 ? batch : 1) * k * n, nc = batch * m * n;
    size_t sha[4], shb[4], shc[4];
    for (int i = 0; i < s->ndc - 2; i++) sha[i] = shb[i] = shc[i] = s->bd[i];
    int da = s->nda, db = s->ndb, dc = s->ndc;
    sha[da - 2] = ar; sha[da - 1] = ac;
    shb[db - 2] = br; shb[db - 1] = bc;
    shc[dc - 2] = m; shc[dc - 1] = n;

    float *a = tu_random_f32(&r, na, -1, 1), *b = tu_random_f32(&r, nb, -1, 1), *c0 = tu_random_f32(&r, nc, -1, 1);
    if (s->nan_c)
        for (size_t i = 0; i < nc; i++) c0[i] = NAN;
    wbcl_tensor *A, *B, *C;
    ck_assert_int_eq(wbcl_tensor_create(ctx, da, sha, WBCL_F32, a, &A), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, db, shb, WBCL_F32, b, &B), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, dc, shc, WBCL_F32, c0, &C), WBCL_SUCCESS);
    char what[160];
    snprintf(what, sizeof what, "gemm %s%s m=%zu n=%zu k=%zu batch=%zu (A %dD, B %dD) alpha=%g beta=%g %s",
             s->ta ? "T" : "N", s->tb ? "T" : "N", m, n, k, batch, da, db, (double)s->alpha, (double)s->beta,
             backend_name(ctx));
    const cl_ulong saved = ctx->info.max_alloc_size;
    if (s->max_alloc) ctx->info.max_alloc_size = s->max_alloc;
    wbcl_status st = wbcl_gemm(ctx, s->ta, s->tb, s->alpha, A, B, s->beta, C);
    ctx->info.max_alloc_size = saved;
    gemm_ok(ctx, st, what);
    float *got = tu_guarded_alloc(nc);
    ck_assert_int_eq(wbcl_tensor_read(ctx, C, got, nc), WBCL_SUCCESS);
    ck_assert_msg(tu_canary_ok(got, nc), "%s: canary overwritten", what);

    double *da64 = tu_to_f64(a, na), *db64 = tu_to_f64(b, nb), *want = tu_to_f64(c0, nc);
    double *aa = dabs(a, na), *ab = dabs(b, nb), *bound = dabs(c0, nc);
    for (size_t q = 0; q < batch; q++) {
        size_t oa = s->nda > 2 ? q * m * k : 0, ob = s->ndb > 2 ? q * k * n : 0, oc = q * m * n;
        wbcl_ref_gemm(s->ta, s->tb, m, n, k, s->alpha, da64 + oa, ac, db64 + ob, bc, s->beta, want + oc, n);
        wbcl_ref_gemm(s->ta, s->tb, m, n, k, fabs(s->alpha), aa + oa, ac, ab + ob, bc, fabs(s->beta), bound + oc, n);
    }
    expect_close(got, want, bound, nc, k, what);
    free(a); free(b); free(c0); free(da64); free(db64); free(want); free(aa); free(ab); free(bound);
    tu_guarded_free(got);
    wbcl_tensor_destroy(A);
    wbcl_tensor_destroy(B);
    wbcl_tensor_destroy(C);
}

static gspec plain(size_t m, size_t n, size_t k)
{
    gspec s;
    memset(&s, 0, sizeof s);
    s.m = m; s.n = n; s.k = k;
    s.alpha = 1.0f;
    s.nda = s.ndb = s.ndc = 2;
    return s;
}

START_TEST(shapes)
{
    wbcl_context *ctx = ctx_for(_i);
    /* 1, row vectors, primes, exact tiles (the CPU default 12 x 32, and 8 x 32),
     * one past them, k = 1 */
    const size_t sh[][3] = {{1, 1, 1}, {1, 37, 19}, {1, 64, 300}, {37, 41, 43}, {97, 13, 101}, {12, 32, 16},
                            {13, 33, 17}, {8, 32, 16}, {9, 33, 17}, {31, 65, 1}, {40, 1, 7}};
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        gspec s = plain(sh[i][0], sh[i][1], sh[i][2]);
        run_dense(ctx, &s, 100 + i);
    }
    if (backends[_i] != WBCL_GEMM_CLBLAST) { /* CLBlast: keep compile classes few */
        gspec s = plain(256, 200, 300);
        run_dense(ctx, &s, 7);
        /* long k: the packed kernel then visits tiles in blocks of
         * mcb = 2^20 / (4 MR k) = 5 row panels (MR = 12; 7 for MR = 8), so
         * 12 row panels (the last one partial) make blocks of 5, 5 and a
         * ragged 2 (7, 7 and 3 for 17 panels of MR = 8) */
        s = plain(133, 70, 4099);
        s.beta = -1.0f;
        run_dense(ctx, &s, 8);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(transposes)
{
    wbcl_context *ctx = ctx_for(_i);
    for (int t = 0; t < 4; t++) {
        gspec s = plain(37, 41, 43);
        s.ta = (t & 1) ? WBCL_TRANS : WBCL_NO_TRANS;
        s.tb = (t & 2) ? WBCL_TRANS : WBCL_NO_TRANS;
        s.alpha = 0.75f;
        run_dense(ctx, &s, 200 + (uint64_t)t);
        s.m = 9; s.n = 70; s.k = 33;
        run_dense(ctx, &s, 210 + (uint64_t)t);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(alpha_beta)
{
    wbcl_context *ctx = ctx_for(_i);
    /* beta = 0 over a NaN-filled C must give finite, correct results */
    gspec s = plain(19, 35, 23);
    s.nan_c = 1;
    s.alpha = -1.5f;
    run_dense(ctx, &s, 300);
    s.ta = WBCL_TRANS; /* the edge-tile store path too */
    run_dense(ctx, &s, 301);
    /* beta = 1 accumulates, beta = 0.5 scales, alpha = 0 keeps beta*C */
    const float ab[][2] = {{1.0f, 1.0f}, {2.0f, 0.5f}, {0.0f, 1.0f}, {-0.25f, -3.0f}};
    for (int i = 0; i < 4; i++) {
        s = plain(19, 35, 23);
        s.alpha = ab[i][0];
        s.beta = ab[i][1];
        run_dense(ctx, &s, 310 + (uint64_t)i);
    }
    /* beta = 1 twice in a row really accumulates: C = A B + (A B + C0) */
    tu_rng r;
    tu_rng_seed(&r, 320);
    size_t sa[2] = {5, 7}, sb[2] = {7, 3}, sc[2] = {5, 3};
    float *a = tu_random_f32(&r, 35, -1, 1), *b = tu_random_f32(&r, 21, -1, 1), *c0 = tu_random_f32(&r, 15, -1, 1);
    wbcl_tensor *A, *B, *C;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sa, WBCL_F32, a, &A), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sb, WBCL_F32, b, &B), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sc, WBCL_F32, c0, &C), WBCL_SUCCESS);
    gemm_ok(ctx, wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, A, B, 1.0f, C), "accumulate 1");
    gemm_ok(ctx, wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, A, B, 1.0f, C), "accumulate 2");
    float *got = tu_guarded_alloc(15);
    ck_assert_int_eq(wbcl_tensor_read(ctx, C, got, 15), WBCL_SUCCESS);
    ck_assert(tu_canary_ok(got, 15));
    double *da = tu_to_f64(a, 35), *db = tu_to_f64(b, 21), *want = tu_to_f64(c0, 15);
    double *aa = dabs(a, 35), *abb = dabs(b, 21), *bound = dabs(c0, 15);
    wbcl_ref_gemm(0, 0, 5, 3, 7, 2.0, da, 7, db, 3, 1.0, want, 3);
    wbcl_ref_gemm(0, 0, 5, 3, 7, 2.0, aa, 7, abb, 3, 1.0, bound, 3);
    expect_close(got, want, bound, 15, 2 * 7, "beta = 1 twice");
    free(a); free(b); free(c0); free(da); free(db); free(want); free(aa); free(abb); free(bound);
    tu_guarded_free(got);
    wbcl_tensor_destroy(A); wbcl_tensor_destroy(B); wbcl_tensor_destroy(C);
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(batched)
{
    wbcl_context *ctx = ctx_for(_i);
    /* 3-D with shared (2-D) B: activations times a weight matrix */
    gspec s = plain(11, 35, 19);
    s.ndc = s.nda = 3;
    s.bd[0] = 4;
    s.tb = WBCL_TRANS; /* nn.Linear layout */
    run_dense(ctx, &s, 400);
    /* the same with A transposed: batch entries of A are then not row blocks
     * of one matrix (the packed path cannot merge the batch into m) */
    s.ta = WBCL_TRANS;
    s.beta = 2.0f;
    run_dense(ctx, &s, 405);
    /* 3-D with shared A */
    s = plain(9, 13, 40);
    s.ndc = s.ndb = 3;
    s.bd[0] = 3;
    s.beta = 0.5f;
    run_dense(ctx, &s, 401);
    /* 4-D both batched, transposed A, per-head shape */
    s = plain(17, 17, 8);
    s.ndc = s.nda = s.ndb = 4;
    s.bd[0] = 2; s.bd[1] = 3;
    s.tb = WBCL_TRANS;
    run_dense(ctx, &s, 402);
    s.ta = WBCL_TRANS;
    s.tb = WBCL_NO_TRANS;
    run_dense(ctx, &s, 403);
    /* 4-D with shared A, transposed */
    s = plain(5, 33, 9);
    s.ndc = s.ndb = 4;
    s.bd[0] = 2; s.bd[1] = 2;
    s.ta = WBCL_TRANS;
    s.nan_c = 1;
    run_dense(ctx, &s, 404);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- wbcl_gemm_strided on sub-blocks of bigger tensors ---------------------------- */
static void run_strided(wbcl_context *ctx, const wbcl_gemm_desc *d, const size_t *sha, const size_t *shb,
                        const size_t *shc, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    const size_t na = sha[0] * sha[1] * sha[2], nb = shb[0] * shb[1] * shb[2], nc = shc[0] * shc[1] * shc[2];
    float *a = tu_random_f32(&r, na, -1, 1), *b = tu_random_f32(&r, nb, -1, 1), *c0 = tu_random_f32(&r, nc, -4, 4);
    wbcl_tensor *A, *B, *C;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 3, sha, WBCL_F32, a, &A), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 3, shb, WBCL_F32, b, &B), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 3, shc, WBCL_F32, c0, &C), WBCL_SUCCESS);
    char what[200];
    snprintf(what, sizeof what, "strided %s%s m=%zu n=%zu k=%zu batch=%zu lda=%zu ldb=%zu ldc=%zu beta=%g %s",
             d->ta ? "T" : "N", d->tb ? "T" : "N", d->m, d->n, d->k, d->batch, d->lda, d->ldb, d->ldc, (double)d->beta,
             backend_name(ctx));
    gemm_ok(ctx, wbcl_gemm_strided(ctx, d, A, B, C), what);
    float *got = tu_guarded_alloc(nc);
    ck_assert_int_eq(wbcl_tensor_read(ctx, C, got, nc), WBCL_SUCCESS);
    ck_assert_msg(tu_canary_ok(got, nc), "%s: canary overwritten", what);

    /* reference on the whole storage, then compare inside the block and
     * demand bit-identical contents outside it */
    double *da = tu_to_f64(a, na), *db = tu_to_f64(b, nb), *want = tu_to_f64(c0, nc);
    double *aa = dabs(a, na), *ab = dabs(b, nb), *bound = dabs(c0, nc);
    char *inside = calloc(nc, 1);
    ck_assert_ptr_nonnull(inside);
    for (size_t q = 0; q < d->batch; q++) {
        size_t oa = d->off_a + q * d->stride_a, ob = d->off_b + q * d->stride_b, oc = d->off_c + q * d->stride_c;
        wbcl_ref_gemm(d->ta, d->tb, d->m, d->n, d->k, d->alpha, da + oa, d->lda, db + ob, d->ldb, d->beta, want + oc,
                      d->ldc);
        wbcl_ref_gemm(d->ta, d->tb, d->m, d->n, d->k, fabs(d->alpha), aa + oa, d->lda, ab + ob, d->ldb, fabs(d->beta),
                      bound + oc, d->ldc);
        for (size_t i = 0; i < d->m; i++)
            for (size_t j = 0; j < d->n; j++) inside[oc + i * d->ldc + j] = 1;
    }
    size_t touched = 0;
    for (size_t i = 0; i < nc; i++) {
        if (inside[i]) {
            touched++;
            continue;
        }
        ck_assert_msg(memcmp(&got[i], &c0[i], sizeof(float)) == 0, "%s: element %zu outside the block changed", what,
                      i);
        want[i] = got[i]; /* excluded from the comparison below */
        bound[i] = 0.0;
    }
    ck_assert_uint_eq(touched, d->batch * d->m * d->n);
    expect_close(got, want, bound, nc, d->k, what);
    free(a); free(b); free(c0); free(da); free(db); free(want); free(aa); free(ab); free(bound); free(inside);
    tu_guarded_free(got);
    wbcl_tensor_destroy(A);
    wbcl_tensor_destroy(B);
    wbcl_tensor_destroy(C);
}

START_TEST(strided)
{
    wbcl_context *ctx = ctx_for(_i);
    /* A: batched sub-blocks of a (3, 40, 50) tensor; B: one block of (1, 30, 64)
     * shared by the batch (stride 0), stored transposed; C: blocks inside
     * (2, 20, 24) with ldc > n; beta != 0 reads C. */
    size_t sha[3] = {3, 40, 50}, shb[3] = {1, 30, 64}, shc[3] = {2, 20, 24};
    wbcl_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.ta = WBCL_NO_TRANS;
    d.tb = WBCL_TRANS;
    d.m = 13; d.n = 11; d.k = 17; d.batch = 2;
    d.alpha = 1.25f; d.beta = 0.5f;
    d.off_a = 5 * 50 + 3; d.lda = 50; d.stride_a = 40 * 50;
    d.off_b = 2 * 64 + 1; d.ldb = 64; d.stride_b = 0;
    d.off_c = 3 * 24 + 5; d.ldc = 24; d.stride_c = 20 * 24;
    run_strided(ctx, &d, sha, shb, shc, 500);
    /* transposed A, plain B with ldb > n, beta = 0, C batch entries packed as
     * tightly as allowed (stride_c = (m-1)*ldc + n) */
    d.ta = WBCL_TRANS;
    d.tb = WBCL_NO_TRANS;
    d.m = 9; d.n = 33; d.k = 21; d.batch = 3;
    d.alpha = -1.0f; d.beta = 0.0f;
    d.off_a = 7; d.lda = 50; d.stride_a = 1000;        /* (k x m) blocks; last index 7+2000+20*50+8 < 6000 */
    d.off_b = 64 + 20; d.ldb = 64; d.stride_b = 0;     /* last index 84+20*64+32 < 1920 */
    d.off_c = 1; d.ldc = 40; d.stride_c = 8 * 40 + 33; /* last index 1+2*353+8*40+32 = 1059 < 1200 */
    size_t shc2[3] = {1, 30, 40};
    run_strided(ctx, &d, sha, shb, shc2, 501);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- packed kernel with other register-tile sizes ---------------------------------- */
START_TEST(packed_tile_sizes)
{
    /* Each (MR, NR) is a new program (a cold compile on first use), so one
     * case per size; the transposes rotate so that every packing kernel
     * (A/B, along x/along k) meets widths other than the CPU default 12 x 32. */
    wbcl_context *ctx = ctx_for(0);
    /* 6 x 64 (four float16 vectors per row): n = 150 gives two full column panels and an edge */
    const int tiles[][2] = {{1, 4}, {3, 8}, {5, 16}, {16, 32}, {8, 32}, {6, 64}};
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
        ctx->params.gemm_mr = tiles[t][0];
        ctx->params.gemm_nr = tiles[t][1];
        gspec s = plain(37, tiles[t][1] == 64 ? 150 : 41, 43);
        s.ta = (t & 1) ? WBCL_TRANS : WBCL_NO_TRANS;
        s.tb = (t == 1 || t == 2) ? WBCL_TRANS : WBCL_NO_TRANS;
        s.beta = 0.5f;
        s.ndc = s.nda = 3; /* batched A: no merge, 3 x (37 x 41) */
        s.bd[0] = 3;
        run_dense(ctx, &s, 600 + t);
    }
    /* 6 x 64 with the other two packing kernels (A as stored, B transposed: both along k) */
    ctx->params.gemm_mr = 6;
    ctx->params.gemm_nr = 64;
    {
        gspec s = plain(37, 150, 43);
        s.tb = WBCL_TRANS;
        s.beta = 0.5f;
        run_dense(ctx, &s, 610);
    }
    /* parameters the kernel does not support are refused, not miscomputed */
    size_t sh[2] = {4, 4};
    wbcl_tensor *A, *B, *C;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sh, WBCL_F32, NULL, &A), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sh, WBCL_F32, NULL, &B), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sh, WBCL_F32, NULL, &C), WBCL_SUCCESS);
    ctx->params.gemm_mr = 8;
    ctx->params.gemm_nr = 12;
    tu_assert_status(ctx, wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1, A, B, 0, C), WBCL_ERROR_UNSUPPORTED, "NR=12");
    ctx->params.gemm_nr = 128;
    tu_assert_status(ctx, wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1, A, B, 0, C), WBCL_ERROR_UNSUPPORTED, "NR=128");
    ctx->params.gemm_mr = 0;
    ctx->params.gemm_nr = 32;
    tu_assert_status(ctx, wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1, A, B, 0, C), WBCL_ERROR_UNSUPPORTED, "MR=0");
    wbcl_tensor_destroy(A); wbcl_tensor_destroy(B); wbcl_tensor_destroy(C);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- tiled kernel: its parameter sets, chunked launches, device limits ---------------- */
START_TEST(tiled_parameters)
{
    wbcl_context *ctx = ctx_for(2);
    /* the tile by the shape (gemm.tiled.tile = 0, the default): 64 where 100 ceil(t64 / units) <=
     * 304 ceil(t128 / units) for t64, t128 the tiles of C (host/ops/gemm.c); a set tile is kept */
    ck_assert_int_eq(ctx->params.gemm_tiled, 0);
    const unsigned cu = ctx->info.compute_units;
    ctx->info.compute_units = 132;
    ck_assert_int_eq(wbcl__gemm_tiled_tile(ctx, 1024, 1024, 1), 64);   /* waves 2 / 1: 200 <= 304 */
    ck_assert_int_eq(wbcl__gemm_tiled_tile(ctx, 1024, 1024, 3), 64);   /* 6 / 2: 600 <= 608 */
    ck_assert_int_eq(wbcl__gemm_tiled_tile(ctx, 2048, 1024, 1), 128);  /* 4 / 1: 400 > 304 */
    ck_assert_int_eq(wbcl__gemm_tiled_tile(ctx, 1920, 1024, 1), 128);  /* 480 / 120 tiles: 4 / 1 */
    ck_assert_int_eq(wbcl__gemm_tiled_tile(ctx, 2048, 1100, 1), 64);   /* 576 / 144 tiles: 5 / 2 */
    ck_assert_int_eq(wbcl__gemm_tiled_tile(ctx, 4096, 4096, 1), 128);  /* 32 / 8 */
    ck_assert_int_eq(wbcl__gemm_tiled_tile(ctx, 12608, 192, 1), 64);   /* 591 / 198 tiles: 5 / 2 */
    ck_assert_int_eq(wbcl__gemm_tiled_tile(ctx, 12608, 1536, 1), 128); /* 36 / 9 */
    ctx->params.gemm_tiled = 128;
    ck_assert_int_eq(wbcl__gemm_tiled_tile(ctx, 8, 8, 1), 128);
    ctx->params.gemm_tiled = 0;
    ctx->info.compute_units = cu;
    /* the table key takes 0 (by the shape), 64 and 128 */
    ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.tiled.tile", 64), WBCL_SUCCESS);
    ck_assert_int_eq(ctx->params.gemm_tiled, 64);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.tiled.tile", 0), WBCL_SUCCESS);
    ck_assert_int_eq(ctx->params.gemm_tiled, 0);
    tu_assert_status(ctx, wbcl_context_set_param(ctx, "gemm.tiled.tile", 96), WBCL_ERROR_INVALID_ARGUMENT,
                     "96 is not one of {0, 64, 128}");
    wbcl_context_reset_params(ctx);
    /* a table's tiled backend (or a GPU's default) whose tile parameters need more local memory than the
     * device has runs on CLBlast: 4 * 32 * (2 * 128 + 8) * 2 = 67584 bytes against 48 KiB */
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_AUTO), WBCL_SUCCESS);
    const uint64_t lm0 = ctx->info.local_mem_size;
    ctx->info.local_mem_size = 49152;
    ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.backend", WBCL_GEMM_TILED), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_gemm_backend(ctx), WBCL_GEMM_TILED);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.tiled.tile", 128), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.tiled.tk", 32), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.tiled.db", 1), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_gemm_backend(ctx), WBCL_GEMM_CLBLAST);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.tiled.db", 0), WBCL_SUCCESS); /* 33792 bytes: fits */
    ck_assert_int_eq(wbcl_context_gemm_backend(ctx), WBCL_GEMM_TILED);
    ctx->info.local_mem_size = lm0;
    wbcl_context_reset_params(ctx);
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_TILED), WBCL_SUCCESS);
    /* both tiles, each slice: several row and column tiles with ragged edges, k not a multiple of
     * tk and several slices, the four transposes (the other cases run the tile by the shape: 64 x 8
     * at their sizes on a CPU's few compute units) */
    /* {tile, tk, db, v4}: with v4 = 1 the k = 80, m = 260 / 132, n = 140 cases read A and B as float4
     * (every stored row whole float4s), with db = 1 through two local slices, or one (sets 5 and 7);
     * set 6 has two slices and scalar loads; the last (k = 77, no transposes) reads A with scalar loads
     * (its rows of 77 are not whole float4s) and B as float4 (rows of n = 140) */
    const int sets[][4] = {{64, 8, 0, 0},  {64, 32, 0, 0}, {128, 16, 0, 0}, {128, 8, 0, 0}, /* a cold compile of ~7 s each on PoCL */
                           {128, 8, 1, 1}, {128, 16, 0, 1}, {64, 16, 1, 0}, {64, 32, 0, 1}, {128, 8, 1, 1}};
    for (size_t t = 0; t < sizeof sets / sizeof sets[0]; t++) {
        ctx->params.gemm_tiled = sets[t][0];
        ctx->params.gemm_tiled_k = sets[t][1];
        ctx->params.gemm_tiled_db = sets[t][2];
        ctx->params.gemm_tiled_v4 = sets[t][3];
        gspec s = plain(sets[t][0] == 64 ? 132 : 260, 140, t >= 4 && t != 8 ? 80 : 77);
        s.ta = (t & 1) ? WBCL_TRANS : WBCL_NO_TRANS;
        s.tb = (t & 2) ? WBCL_TRANS : WBCL_NO_TRANS;
        s.beta = 0.5f;
        s.alpha = -0.75f;
        run_dense(ctx, &s, 700 + t);
        if (t >= 4) { /* the keys reached the kernel's build: two slices by db, float4 loads by v4 alone */
            const int va = sets[t][3] && t != 8, vb = sets[t][3];
            char want[160];
            snprintf(want, sizeof want, "-DWBCL_GT_TM=%d -DWBCL_GT_TN=%d -DWBCL_GT_TK=%d -DWBCL_GT_TA=%d -DWBCL_GT_TB=%d "
                     "-DWBCL_GT_C_HALF=0 -DWBCL_GT_DB=%d -DWBCL_GT_VA=%d -DWBCL_GT_VB=%d", sets[t][0], sets[t][0],
                     sets[t][1], s.ta == WBCL_TRANS, s.tb == WBCL_TRANS, sets[t][2], va, vb);
            int found = 0;
            for (size_t i = 0; i < ctx->n_programs; i++)
                found |= !strcmp(ctx->programs[i]->family, "gemm_tiled") && strstr(ctx->programs[i]->options, want) != NULL;
            ck_assert_msg(found, "no gemm_tiled program built with %s", want);
        }
    }
    ctx->params.gemm_tiled = 64;
    ctx->params.gemm_tiled_k = 8;
    ctx->params.gemm_tiled_db = 0;
    ctx->params.gemm_tiled_v4 = 0;
    {
        /* more batch entries than one launch takes (32768): two launches, the second's
         * operands offset by its first entry (A transposed: no merge into one tall GEMM) */
        gspec s = plain(2, 3, 2);
        s.ta = WBCL_TRANS;
        s.nda = s.ndc = 3;
        s.bd[0] = 33000;
        s.beta = 1.0f;
        run_dense(ctx, &s, 710);
        /* more row tiles than one launch takes: 32768 * 64 + 36 rows, two launches */
        s = plain((size_t)32768 * 64 + 36, 1, 1);
        run_dense(ctx, &s, 711);
    }
    /* sets the kernel does not have, and devices too small for it, are refused with a message */
    size_t sh[2] = {4, 4};
    wbcl_tensor *A, *B, *C;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sh, WBCL_F32, NULL, &A), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sh, WBCL_F32, NULL, &B), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sh, WBCL_F32, NULL, &C), WBCL_SUCCESS);
    ctx->params.gemm_tiled = 96;
    tu_assert_status(ctx, wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1, A, B, 0, C), WBCL_ERROR_INVALID_ARGUMENT,
                     "(have 96, 8, 0)");
    ctx->params.gemm_tiled = 128;
    ctx->params.gemm_tiled_k = 32; /* 4 * 32 * (2 * 128 + 8) = 33792 bytes of local memory */
    const uint64_t lmem = ctx->info.local_mem_size;
    ctx->info.local_mem_size = 32768;
    tu_assert_status(ctx, wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1, A, B, 0, C), WBCL_ERROR_DEVICE_LIMIT,
                     "33792 bytes of local memory");
    ctx->params.gemm_tiled_k = 16; /* two slices: 4 * 16 * (2 * 128 + 8) * 2 = 33792 bytes too */
    ctx->params.gemm_tiled_db = 1;
    tu_assert_status(ctx, wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1, A, B, 0, C), WBCL_ERROR_DEVICE_LIMIT,
                     "gemm.tiled.db 1 needs 33792 bytes of local memory");
    ctx->params.gemm_tiled_k = 32;
    ctx->params.gemm_tiled_db = 0;
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_PACKED), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_TILED), WBCL_ERROR_DEVICE_LIMIT,
                     "33792 bytes of local memory");
    ck_assert_int_eq(wbcl_context_gemm_backend(ctx), WBCL_GEMM_PACKED); /* unchanged */
    ctx->info.local_mem_size = lmem;
    const size_t wg = ctx->info.max_work_group_size;
    ctx->info.max_work_group_size = 128;
    ctx->params.gemm_tiled_k = 16;
    tu_assert_status(ctx, wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_TILED), WBCL_ERROR_DEVICE_LIMIT,
                     "allows 128");
    ctx->info.max_work_group_size = wg;
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_TILED), WBCL_SUCCESS);
    wbcl_tensor_destroy(A); wbcl_tensor_destroy(B); wbcl_tensor_destroy(C);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Long k visits the tiles in units of rb x cb (host/ops/gemm.c): with gemm.a_block_kib = 16 the
 * units' budget is 32 KiB, so with the 12 x 32 tile k = 40 runs 4 x 4 units, k = 50 8 x 2 units
 * and k = 60 blocks of row panels again. m = 113 (10 row panels) and n = 167 (6 column panels)
 * leave units part empty at both edges; the batch of 2 covers the second global dimension. */
START_TEST(packed_units)
{
    wbcl_context *ctx = ctx_for(0);
    ctx->params.gemm_mr = 12;
    ctx->params.gemm_nr = 32;
    ctx->params.gemm_a_block_kib = 16;
    const size_t ks[] = {40, 50, 60};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        gspec s = plain(113, 167, ks[i]);
        s.beta = 0.5f;
        s.ndc = s.nda = s.ndb = 3;
        s.bd[0] = 2;
        run_dense(ctx, &s, 620 + i);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* The packed path never allocates more than the device's maximum: batched
 * operands are packed a chunk of entries at a time, and a problem whose
 * panels would not fit is split along k, m and n. Simulate small devices
 * (the tensors are created first, at the real limit). Packed sizes here:
 * A entry 24*30 floats (MR = 8), B entry 64*30 floats = 7680 bytes. */
START_TEST(packed_splits)
{
    wbcl_context *ctx = ctx_for(0);
    /* The sizes below assume an 8 x 32 register tile; the device's default
     * tile depends on its SIMD width (6 x 16 with AVX2, where 100 bytes hold
     * one packed k step and the last check would pass), so pin it. */
    ctx->params.gemm_mr = 8;
    ctx->params.gemm_nr = 32;
    gspec s = plain(20, 40, 30);
    s.ndc = s.nda = s.ndb = 3;
    s.bd[0] = 7;
    s.max_alloc = 2 * 64 * 30 * 4 + 100; /* two B entries per chunk: 4 chunks */
    run_dense(ctx, &s, 700);
    s.ndb = 2;                     /* shared B: A's batch merges into 140 rows */
    s.max_alloc = 64 * 30 * 4 + 100; /* ... which are split into row blocks of 64 */
    run_dense(ctx, &s, 701);
    s.ta = WBCL_TRANS;             /* no merge: A in chunks of 2 entries */
    s.beta = 0.5f;
    run_dense(ctx, &s, 702);
    s = plain(37, 41, 43);         /* one panel of 32 x 43 does not fit: k in parts of 15 */
    s.beta = 0.75f;
    s.tb = WBCL_TRANS;
    s.max_alloc = 32 * 15 * 4 + 8;
    run_dense(ctx, &s, 703);
    s.ta = WBCL_TRANS;             /* k split with beta = 0 over NaN */
    s.tb = WBCL_NO_TRANS;
    s.beta = 0.0f;
    s.nan_c = 1;
    run_dense(ctx, &s, 704);
    s = plain(37, 100, 20);        /* B panels split along n: 64 columns per part */
    s.max_alloc = 64 * 20 * 4 + 16;
    run_dense(ctx, &s, 705);

    /* too small for even one packed k step */
    size_t sh[2] = {4, 4};
    wbcl_tensor *A, *B, *C;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sh, WBCL_F32, NULL, &A), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sh, WBCL_F32, NULL, &B), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sh, WBCL_F32, NULL, &C), WBCL_SUCCESS);
    const cl_ulong saved = ctx->info.max_alloc_size;
    ctx->info.max_alloc_size = 100;
    tu_assert_status(ctx, wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1, A, B, 0, C), WBCL_ERROR_DEVICE_LIMIT,
                     "maximum allocation");
    ctx->info.max_alloc_size = saved;
    wbcl_tensor_destroy(A); wbcl_tensor_destroy(B); wbcl_tensor_destroy(C);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- bad input ----------------------------------------------------------------------- */
static wbcl_tensor *mk(wbcl_context *ctx, int nd, size_t d0, size_t d1, size_t d2, size_t d3)
{
    size_t sh[4] = {d0, d1, d2, d3};
    wbcl_tensor *t = NULL;
    ck_assert_int_eq(wbcl_tensor_create(ctx, nd, sh, WBCL_F32, NULL, &t), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_fill(ctx, t, 7.0f), WBCL_SUCCESS);
    return t;
}

static void assert_untouched(wbcl_context *ctx, const wbcl_tensor *t, const char *what)
{
    size_t n = wbcl_tensor_numel(t);
    float *p = tu_guarded_alloc(n);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t, p, n), WBCL_SUCCESS);
    ck_assert(tu_canary_ok(p, n));
    for (size_t i = 0; i < n; i++) ck_assert_msg(p[i] == 7.0f, "%s: output element %zu changed to %g", what, i, p[i]);
    tu_guarded_free(p);
}

START_TEST(bad_input)
{
    wbcl_context *ctx = ctx_for(_i);
    wbcl_tensor *A = mk(ctx, 2, 3, 5, 0, 0), *B = mk(ctx, 2, 5, 4, 0, 0), *C = mk(ctx, 2, 3, 4, 0, 0);
    const wbcl_transpose N = WBCL_NO_TRANS, T = WBCL_TRANS;

    ck_assert_int_eq(wbcl_gemm(NULL, N, N, 1, A, B, 0, C), WBCL_ERROR_INVALID_ARGUMENT);
    tu_assert_status(ctx, wbcl_gemm(ctx, N, N, 1, NULL, B, 0, C), WBCL_ERROR_INVALID_ARGUMENT, "'A' is NULL");
    tu_assert_status(ctx, wbcl_gemm(ctx, N, N, 1, A, NULL, 0, C), WBCL_ERROR_INVALID_ARGUMENT, "'B' is NULL");
    tu_assert_status(ctx, wbcl_gemm(ctx, N, N, 1, A, B, 0, NULL), WBCL_ERROR_INVALID_ARGUMENT, "'C' is NULL");
    tu_assert_status(ctx, wbcl_gemm(ctx, (wbcl_transpose)5, N, 1, A, B, 0, C), WBCL_ERROR_INVALID_ARGUMENT, "ta=5");

    /* a tensor of another context */
    wbcl_context *other = tu_context();
    size_t sb[2] = {5, 4};
    wbcl_tensor *Bo = NULL;
    ck_assert_int_eq(wbcl_tensor_create(other, 2, sb, WBCL_F32, NULL, &Bo), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_gemm(ctx, N, N, 1, A, Bo, 0, C), WBCL_ERROR_CONTEXT_MISMATCH, "another context");

    /* dimensions */
    wbcl_tensor *v = mk(ctx, 1, 5, 0, 0, 0);
    tu_assert_status(ctx, wbcl_gemm(ctx, N, N, 1, A, v, 0, C), WBCL_ERROR_SHAPE, "B must have 2 to 4 dimensions");
    tu_assert_status(ctx, wbcl_gemm(ctx, N, N, 1, A, B, 0, v), WBCL_ERROR_SHAPE, "C must have 2 to 4");
    tu_assert_status(ctx, wbcl_gemm(ctx, N, T, 1, A, B, 0, C), WBCL_ERROR_SHAPE, "inner dimensions differ");
    ck_assert_ptr_nonnull(strstr(wbcl_context_last_error(ctx), "(3, 5)"));
    ck_assert_ptr_nonnull(strstr(wbcl_context_last_error(ctx), "(5, 4)"));
    ck_assert_ptr_nonnull(strstr(wbcl_context_last_error(ctx), "tb=T"));
    tu_assert_status(ctx, wbcl_gemm(ctx, T, N, 1, A, B, 0, C), WBCL_ERROR_SHAPE, "ta=T");
    wbcl_tensor *Cbad = mk(ctx, 2, 4, 3, 0, 0);
    tu_assert_status(ctx, wbcl_gemm(ctx, N, N, 1, A, B, 0, Cbad), WBCL_ERROR_SHAPE, "C has shape (4, 3)");
    /* batches: A's batch must equal C's; batched operand with 2-D C; 4-D vs 3-D */
    wbcl_tensor *A3 = mk(ctx, 3, 2, 3, 5, 0), *C3 = mk(ctx, 3, 3, 3, 4, 0), *A4 = mk(ctx, 4, 1, 3, 3, 5);
    tu_assert_status(ctx, wbcl_gemm(ctx, N, N, 1, A3, B, 0, C3), WBCL_ERROR_SHAPE, "batch dimensions of A (2, 3, 5)");
    tu_assert_status(ctx, wbcl_gemm(ctx, N, N, 1, A3, B, 0, C), WBCL_ERROR_SHAPE, "batch dimensions of A");
    tu_assert_status(ctx, wbcl_gemm(ctx, N, N, 1, A4, B, 0, C3), WBCL_ERROR_SHAPE, "(1, 3, 3, 5)");
    /* in place */
    wbcl_tensor *S = mk(ctx, 2, 4, 4, 0, 0);
    tu_assert_status(ctx, wbcl_gemm(ctx, N, N, 1, S, S, 0, S), WBCL_ERROR_INVALID_ARGUMENT, "same tensor as A");
    wbcl_tensor *S2 = mk(ctx, 2, 4, 4, 0, 0);
    tu_assert_status(ctx, wbcl_gemm(ctx, N, N, 1, S2, S, 0, S), WBCL_ERROR_INVALID_ARGUMENT, "same tensor as B");

    /* strided */
    wbcl_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.m = 3; d.n = 4; d.k = 5; d.batch = 1; d.alpha = 1;
    d.lda = 5; d.ldb = 4; d.ldc = 4;
    gemm_ok(ctx, wbcl_gemm_strided(ctx, &d, A, B, C), "valid strided call"); /* the base case is valid */
    ck_assert_int_eq(wbcl_tensor_fill(ctx, C, 7.0f), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_gemm_strided(ctx, NULL, A, B, C), WBCL_ERROR_INVALID_ARGUMENT, "desc is NULL");
    tu_assert_status(ctx, wbcl_gemm_strided(ctx, &d, A, NULL, C), WBCL_ERROR_INVALID_ARGUMENT, "'B' is NULL");
    tu_assert_status(ctx, wbcl_gemm_strided(ctx, &d, A, B, A), WBCL_ERROR_INVALID_ARGUMENT, "same tensor as A");
    wbcl_gemm_desc e = d;
    e.k = 0;
    tu_assert_status(ctx, wbcl_gemm_strided(ctx, &e, A, B, C), WBCL_ERROR_SHAPE, "k=0");
    e = d; e.batch = 0;
    tu_assert_status(ctx, wbcl_gemm_strided(ctx, &e, A, B, C), WBCL_ERROR_SHAPE, "batch=0");
    e = d; e.m = 0;
    tu_assert_status(ctx, wbcl_gemm_strided(ctx, &e, A, B, C), WBCL_ERROR_SHAPE, "m=0");
    e = d; e.off_a = 1;
    tu_assert_status(ctx, wbcl_gemm_strided(ctx, &e, A, B, C), WBCL_ERROR_SHAPE, "operand A is out of bounds");
    e = d; e.ldb = 5;
    tu_assert_status(ctx, wbcl_gemm_strided(ctx, &e, A, B, C), WBCL_ERROR_SHAPE, "operand B is out of bounds");
    e = d; e.ldc = 3;
    tu_assert_status(ctx, wbcl_gemm_strided(ctx, &e, A, B, C), WBCL_ERROR_SHAPE, "ldC = 3");
    e = d; e.batch = 2; e.stride_a = 0; e.stride_b = 0; e.stride_c = 12;
    tu_assert_status(ctx, wbcl_gemm_strided(ctx, &e, A, B, C), WBCL_ERROR_SHAPE, "operand C is out of bounds");
    e = d; e.off_b = SIZE_MAX - 3;
    tu_assert_status(ctx, wbcl_gemm_strided(ctx, &e, A, B, C), WBCL_ERROR_SHAPE, "overflows");
    e = d; e.batch = 3; e.stride_a = SIZE_MAX / 2;
    tu_assert_status(ctx, wbcl_gemm_strided(ctx, &e, A, B, C), WBCL_ERROR_SHAPE, "operand A");
    e = d; e.ta = T; e.lda = 3; /* the 15 floats of A read as a 5 x 3 matrix: valid */
    gemm_ok(ctx, wbcl_gemm_strided(ctx, &e, A, B, S), "strided transposed A into S (4 x 4 with ldc 4)");
    ck_assert_int_eq(wbcl_tensor_fill(ctx, S, 7.0f), WBCL_SUCCESS);
    e = d; e.batch = 2; e.stride_a = 0; e.stride_b = 0; e.m = 1; e.stride_c = 3; /* C rows of 4 overlap */
    tu_assert_status(ctx, wbcl_gemm_strided(ctx, &e, A, B, C), WBCL_ERROR_INVALID_ARGUMENT, "overlap");

    /* nothing was written by any failed call */
    assert_untouched(ctx, C, "C");
    assert_untouched(ctx, Cbad, "Cbad");
    assert_untouched(ctx, C3, "C3");
    assert_untouched(ctx, S, "S");
    assert_untouched(ctx, v, "v");
    assert_untouched(ctx, A, "A");

    wbcl_tensor *all[] = {A, B, C, v, Cbad, A3, C3, A4, S, S2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wbcl_tensor_destroy(all[i]);
    wbcl_tensor_destroy(Bo);
    wbcl_context_destroy(other);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Device timing counts both backends' work. */
START_TEST(timing)
{
    wbcl_context *ctx = ctx_for(_i);
    if (!wbcl_context_device(ctx)->has_profiling) {
        wbcl_context_destroy(ctx);
        return;
    }
    ck_assert_int_eq(wbcl_context_set_timing(ctx, 1), WBCL_SUCCESS);
    wbcl_context_reset_kernel_ns(ctx);
    gspec s = plain(33, 40, 20);
    run_dense(ctx, &s, 800);
    ck_assert_uint_gt(wbcl_context_kernel_ns(ctx), 0);
    wbcl_context_destroy(ctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("gemm");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, shapes, 0, N_BACKENDS);
    tcase_add_loop_test(tc, transposes, 0, N_BACKENDS);
    tcase_add_loop_test(tc, alpha_beta, 0, N_BACKENDS);
    tcase_add_loop_test(tc, batched, 0, N_BACKENDS);
    tcase_add_loop_test(tc, strided, 0, N_BACKENDS);
    tcase_add_loop_test(tc, bad_input, 0, N_BACKENDS);
    tcase_add_loop_test(tc, timing, 0, N_BACKENDS);
    tcase_add_test(tc, packed_tile_sizes);
    tcase_add_test(tc, packed_splits);
    tcase_add_test(tc, packed_units);
    tcase_add_test(tc, tiled_parameters);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
