/* float16 storage: host conversion, F16 tensors, GEMM with any mix of F16/F32 operands on the three
 * backends, and the refusal of F16 by ops that compute on float32 storage only.
 *
 * Independent reference for the conversions: the compiler's _Float16 (GCC/Clang on x86-64: the
 * soft-float __extendhfsf2 / __truncsfhf2 routines, round to nearest even in the default
 * rounding mode), not wbcl's own bit manipulation.
 *
 * GEMM tolerance (the same argument as tests/test_gemm.c). The reference runs in double on the
 * inputs *as stored*, i.e. already rounded to half for F16 operands, so the only differences left
 * are float32 accumulation and, for an F16 C, the one final rounding to half:
 *     |got - want| <= 2 (k + 4) u S (1 + 2^-11) + [C is F16] (2^-11 |want| + 2^-25),
 * u = 2^-24, S = |alpha| (|A||B|)_ij + |beta| |c_ij| (computed by the reference on absolute
 * values): the float32 bound of test_gemm.c with its factor 2 of slack, plus half's unit
 * roundoff 2^-11 relative (2^-25 absolute in the subnormal range) for the store of C. A missing or
 * doubled product (size ~|a||b|, >= 1e-3 S here) is far outside it.
 * Accuracy against the *unrounded* float32 inputs (the documented figure): every F16 operand
 * rounds each input by at most 2^-11 relative, so per element
 *     |got - exact| <= (n16 2^-11 + 2^-22 + 2 (k + 4) u) S + [C F16] (2^-11 |exact| + 2^-25)
 * with n16 the number of F16 operands among A, B (and C's old value when beta != 0); the test
 * asserts that bound and, with k = 1 (outer products, where nothing averages out), that the
 * largest relative error is above 2^-13: the half rounding is really there. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "testutil.h"

static const wbcl_gemm_backend backends[3] = {WBCL_GEMM_PACKED, WBCL_GEMM_CLBLAST, WBCL_GEMM_TILED};
static const char *backend_names[3] = {"packed", "CLBlast", "tiled"};
#define N_BACKENDS 3

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float ref_h2f(uint16_t h)
{
    _Float16 x;
    memcpy(&x, &h, sizeof x);
    return (float)x;
}

static uint16_t ref_f2h(float f)
{
    _Float16 x = (_Float16)f;
    uint16_t h;
    memcpy(&h, &x, sizeof h);
    return h;
}

/* same value, NaN matching NaN (payloads are not specified by vstore_half) */
static int same_value(float a, float b) { return (isnan(a) && isnan(b)) || fbits(a) == fbits(b); }

static float round_half(float x) { return wbcl_f16_to_f32(wbcl_f32_to_f16(x)); }

/* ---- host conversion ------------------------------------------------------------ */
START_TEST(host_all_halves)
{
    /* every one of the 65536 bit patterns widens like _Float16 and narrows back to itself */
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = wbcl_f16_to_f32((uint16_t)h), r = ref_h2f((uint16_t)h);
        ck_assert_msg(same_value(f, r), "0x%04x widens to %a, _Float16 gives %a", h, (double)f, (double)r);
        const uint16_t back = wbcl_f32_to_f16(f);
        if (isnan(f))
            ck_assert_msg((back & 0x7c00u) == 0x7c00u && (back & 0x3ffu) && (back >> 15) == (h >> 15),
                          "NaN 0x%04x narrows to 0x%04x", h, back);
        else
            ck_assert_msg(back == h, "0x%04x -> %a -> 0x%04x", h, (double)f, back);
    }
}
END_TEST

/* ties and their neighbours, overflow, subnormals, random floats: wbcl_f32_to_f16 == _Float16 */
START_TEST(host_rne)
{
    size_t n = 0;
    for (uint32_t h = 0; h < 0x7c00u; h++) { /* positive finite halves and the step to the next one */
        const float lo = wbcl_f16_to_f32((uint16_t)h), hi = wbcl_f16_to_f32((uint16_t)(h + 1));
        const float mid = (float)(((double)lo + (double)hi) / 2); /* exact: 12 significant bits */
        const float xs[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (int j = 0; j < 3; j++)
            for (int s = 0; s < 2; s++) {
                const float x = s ? -xs[j] : xs[j];
                ck_assert_msg(wbcl_f32_to_f16(x) == ref_f2h(x), "%a: 0x%04x, _Float16 0x%04x", (double)x,
                              wbcl_f32_to_f16(x), ref_f2h(x));
                n++;
            }
        /* a tie goes to the even neighbour */
        ck_assert_uint_eq(wbcl_f32_to_f16(mid) & 1u, 0u);
    }
    ck_assert_uint_eq(n, 6u * 0x7c00u);
    /* 65504 is the largest half; 65520 (the midpoint to 2^16) and beyond round to inf */
    ck_assert_uint_eq(wbcl_f32_to_f16(65504.0f), 0x7bffu);
    ck_assert_uint_eq(wbcl_f32_to_f16(nextafterf(65520.0f, 0.0f)), 0x7bffu);
    ck_assert_uint_eq(wbcl_f32_to_f16(65520.0f), 0x7c00u);
    ck_assert_uint_eq(wbcl_f32_to_f16(-1e30f), 0xfc00u);
    ck_assert_uint_eq(wbcl_f32_to_f16(INFINITY), 0x7c00u);
    ck_assert_uint_eq(wbcl_f32_to_f16(-INFINITY), 0xfc00u);
    ck_assert_uint_eq(wbcl_f32_to_f16(NAN) & 0x7e00u, 0x7e00u); /* quiet NaN */
    /* subnormals: 2^-24 is the smallest, 2^-25 a tie to 0, just above it rounds up; float subnormals -> 0 */
    ck_assert_uint_eq(wbcl_f32_to_f16(ldexpf(1, -24)), 1u);
    ck_assert_uint_eq(wbcl_f32_to_f16(ldexpf(1, -25)), 0u);
    ck_assert_uint_eq(wbcl_f32_to_f16(nextafterf(ldexpf(1, -25), 1.0f)), 1u);
    ck_assert_uint_eq(wbcl_f32_to_f16(ldexpf(3, -25)), 2u); /* 1.5 * 2^-24: tie to even 2 */
    ck_assert_uint_eq(wbcl_f32_to_f16(-1e-40f), 0x8000u);
    ck_assert_uint_eq(wbcl_f32_to_f16(ldexpf(1023, -24) + ldexpf(1, -25)), 0x0400u); /* to the smallest normal */
    tu_rng r;
    tu_rng_seed(&r, 16);
    for (int i = 0; i < 200000; i++) { /* random bit patterns: every exponent, NaNs included */
        const uint32_t u = (uint32_t)(tu_uniform(&r, 0, 4294967296.0));
        float x;
        memcpy(&x, &u, sizeof x);
        const uint16_t got = wbcl_f32_to_f16(x), want = ref_f2h(x);
        if (isnan(x))
            ck_assert_msg((got & 0x7c00u) == 0x7c00u && (got & 0x3ffu), "NaN %08x -> 0x%04x", u, got);
        else
            ck_assert_msg(got == want, "%a (0x%08x): 0x%04x, _Float16 0x%04x", (double)x, u, got, want);
    }
}
END_TEST

/* ---- tensors ------------------------------------------------------------------------ */
START_TEST(tensor_round_trip)
{
    wbcl_context *ctx = tu_context();
    const size_t n = 65536;
    float *all = malloc(n * sizeof *all), *got = tu_guarded_alloc(n);
    for (size_t h = 0; h < n; h++) all[h] = ref_h2f((uint16_t)h);
    wbcl_tensor *t16, *t32, *u16;
    size_t sh[2] = {256, 256};
    /* host -> F16 tensor -> host: every half value comes back exactly */
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sh, WBCL_F16, all, &t16), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_dtype(t16), WBCL_F16);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t16, got, n), WBCL_SUCCESS);
    ck_assert(tu_canary_ok(got, n));
    for (size_t h = 0; h < n; h++) ck_assert_msg(same_value(got[h], all[h]), "read 0x%04zx", h);
    /* F16 -> F32 on the device (vload_half): exact */
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sh, WBCL_F32, NULL, &t32), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_copy(ctx, t16, t32), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t32, got, n), WBCL_SUCCESS);
    for (size_t h = 0; h < n; h++) ck_assert_msg(same_value(got[h], all[h]), "widen 0x%04zx: %a", h, (double)got[h]);
    /* F32 -> F16 on the device (vstore_half_rte) of exact halves: exact */
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, &n, WBCL_F16, NULL, &u16), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_copy(ctx, t32, u16), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, u16, got, n), WBCL_SUCCESS);
    for (size_t h = 0; h < n; h++) ck_assert_msg(same_value(got[h], all[h]), "narrow 0x%04zx: %a", h, (double)got[h]);
    /* F16 -> F16 copy */
    ck_assert_int_eq(wbcl_tensor_fill(ctx, u16, 0.0f), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_copy(ctx, t16, u16), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, u16, got, n), WBCL_SUCCESS);
    for (size_t h = 0; h < n; h++) ck_assert_msg(same_value(got[h], all[h]), "copy 0x%04zx", h);
    free(all);
    tu_guarded_free(got);
    wbcl_tensor_destroy(t16);
    wbcl_tensor_destroy(t32);
    wbcl_tensor_destroy(u16);
    wbcl_context_destroy(ctx);
}
END_TEST

/* rounding of arbitrary floats: host write path and device narrowing give the _Float16 bits */
START_TEST(tensor_rne)
{
    wbcl_context *ctx = tu_context();
    /* every tie and its two neighbours of the positive halves, both signs, plus specials; an odd
     * count so that the device kernel's ragged tail (n % 8) runs */
    size_t n = 0;
    const size_t cap = 6 * 0x7c00u + 16;
    float *x = malloc(cap * sizeof *x), *got = tu_guarded_alloc(cap);
    for (uint32_t h = 0; h < 0x7c00u; h++) {
        const float mid = (float)(((double)wbcl_f16_to_f32((uint16_t)h) + wbcl_f16_to_f32((uint16_t)(h + 1))) / 2);
        const float xs[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (int j = 0; j < 3; j++) {
            x[n++] = xs[j];
            x[n++] = -xs[j];
        }
    }
    const float specials[] = {65520.0f, -65519.0f, 1e30f, INFINITY, -INFINITY, NAN, 1e-40f, -0.0f, 3.0e-8f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) x[n++] = specials[i];
    ck_assert(n % 8 != 0 && n <= cap);
    wbcl_tensor *t16, *t32, *u16;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, &n, WBCL_F16, x, &t16), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, &n, WBCL_F32, x, &t32), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, &n, WBCL_F16, NULL, &u16), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_copy(ctx, t32, u16), WBCL_SUCCESS);
    for (int pass = 0; pass < 2; pass++) {
        ck_assert_int_eq(wbcl_tensor_read(ctx, pass ? u16 : t16, got, n), WBCL_SUCCESS);
        ck_assert(tu_canary_ok(got, cap)); /* the canary sits after cap elements */
        for (size_t i = 0; i < n; i++) {
            const float want = ref_h2f(ref_f2h(x[i]));
            ck_assert_msg(same_value(got[i], want), "%s: %a rounds to %a, _Float16 %a", pass ? "device" : "host",
                          (double)x[i], (double)got[i], (double)want);
        }
    }
    /* write() rounds like create() */
    ck_assert_int_eq(wbcl_tensor_fill(ctx, t16, 7.0f), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_write(ctx, t16, x, n), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t16, got, n), WBCL_SUCCESS);
    for (size_t i = 0; i < n; i++) ck_assert(same_value(got[i], ref_h2f(ref_f2h(x[i]))));
    free(x);
    tu_guarded_free(got);
    wbcl_tensor_destroy(t16);
    wbcl_tensor_destroy(t32);
    wbcl_tensor_destroy(u16);
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(tensor_fill_reshape_limits)
{
    wbcl_context *ctx = tu_context();
    size_t sh[3] = {3, 5, 7}, n = 105;
    float got[105];
    wbcl_tensor *t;
    /* NULL data: zeros, with an odd element count (2 * 105 bytes) */
    ck_assert_int_eq(wbcl_tensor_create(ctx, 3, sh, WBCL_F16, NULL, &t), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t, got, n), WBCL_SUCCESS);
    for (size_t i = 0; i < n; i++) ck_assert(fbits(got[i]) == 0);
    /* fill rounds the value once: 0.1 -> 0x2e66 = 0.0999755859375 */
    ck_assert_int_eq(wbcl_tensor_fill(ctx, t, 0.1f), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t, got, n), WBCL_SUCCESS);
    for (size_t i = 0; i < n; i++) ck_assert_float_eq(got[i], 0.0999755859375f);
    size_t sh2[2] = {15, 7};
    ck_assert_int_eq(wbcl_tensor_reshape(ctx, t, 2, sh2), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_dtype(t), WBCL_F16);
    ck_assert_uint_eq(wbcl_tensor_dim(t, 0), 15);
    float small[3];
    tu_assert_status(ctx, wbcl_tensor_read(ctx, t, small, 3), WBCL_ERROR_SHAPE, "count 3");
    wbcl_tensor_destroy(t);
    /* allocation limits count 2 bytes per F16 element */
    const cl_ulong saved = ctx->info.max_alloc_size;
    ctx->info.max_alloc_size = 1000;
    size_t n500 = 500, n501 = 501, n251 = 251;
    wbcl_status a = wbcl_tensor_create(ctx, 1, &n500, WBCL_F16, NULL, &t);
    wbcl_tensor_destroy(t);
    wbcl_status b = wbcl_tensor_create(ctx, 1, &n501, WBCL_F16, NULL, &t);
    wbcl_status c = wbcl_tensor_create(ctx, 1, &n251, WBCL_F32, NULL, &t);
    ctx->info.max_alloc_size = saved;
    ck_assert_int_eq(a, WBCL_SUCCESS);
    ck_assert_int_eq(b, WBCL_ERROR_DEVICE_LIMIT);
    ck_assert_int_eq(c, WBCL_ERROR_DEVICE_LIMIT);
    /* dtypes outside the enum */
    tu_assert_status(ctx, wbcl_tensor_create(ctx, 1, &n500, (wbcl_dtype)7, NULL, &t), WBCL_ERROR_DTYPE, "dtype 7");
    ck_assert_ptr_null(t);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ops that compute on float32 storage only say so, naming the op, the argument and the dtype */
START_TEST(ops_refuse_f16)
{
    wbcl_context *ctx = tu_context();
    size_t sh[3] = {2, 4, 8};
    wbcl_tensor *x16, *y32;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 3, sh, WBCL_F16, NULL, &x16), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 3, sh, WBCL_F32, NULL, &y32), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_gelu(ctx, x16, y32), WBCL_ERROR_DTYPE, "wbcl_gelu: tensor 'x' is float16");
    tu_assert_status(ctx, wbcl_softmax(ctx, y32, x16), WBCL_ERROR_DTYPE, "float32 only");
    tu_assert_status(ctx, wbcl_scale(ctx, x16, 2.0f, y32), WBCL_ERROR_DTYPE, "wbcl_scale");
    tu_assert_status(ctx, wbcl_layernorm(ctx, y32, x16, NULL, 1e-5f, y32), WBCL_ERROR_DTYPE,
                     "wbcl_layernorm: tensor 'gamma' is float16");
    wbcl_tensor_destroy(x16);
    wbcl_tensor_destroy(y32);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- GEMM ------------------------------------------------------------------------------ */
typedef struct {
    wbcl_dtype da, db, dc;
    wbcl_transpose ta, tb;
    size_t m, n, k, batch; /* batch > 1: A and C batched (3-D), B shared */
    float alpha, beta;
} hspec;

static wbcl_context *ctx_for(int bi)
{
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, backends[bi]), WBCL_SUCCESS);
    return ctx;
}

/* Runs one case; returns the largest |got - exact| / S over elements (exact: unrounded inputs) and,
 * through *rel, the largest |got - exact| / |exact|. */
static double run_half(wbcl_context *ctx, const hspec *s, uint64_t seed, double *rel)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    const size_t m = s->m, n = s->n, k = s->k, bt = s->batch;
    const size_t ar = s->ta ? k : m, ac = s->ta ? m : k, br = s->tb ? n : k, bc = s->tb ? k : n;
    const size_t na = bt * m * k, nb = k * n, nc = bt * m * n;
    size_t sha[3] = {bt, ar, ac}, shb[2] = {br, bc}, shc[3] = {bt, m, n};
    float *a = tu_random_f32(&r, na, -1, 1), *b = tu_random_f32(&r, nb, -1, 1), *c0 = tu_random_f32(&r, nc, -1, 1);
    wbcl_tensor *A, *B, *C;
    ck_assert_int_eq(wbcl_tensor_create(ctx, bt > 1 ? 3 : 2, bt > 1 ? sha : sha + 1, s->da, a, &A), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, shb, s->db, b, &B), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, bt > 1 ? 3 : 2, bt > 1 ? shc : shc + 1, s->dc, c0, &C), WBCL_SUCCESS);
    char what[200];
    snprintf(what, sizeof what, "gemm %s%s m=%zu n=%zu k=%zu batch=%zu A %s B %s C %s alpha=%g beta=%g %s",
             s->ta ? "T" : "N", s->tb ? "T" : "N", m, n, k, bt, wbcl__dtype_name(s->da), wbcl__dtype_name(s->db),
             wbcl__dtype_name(s->dc), (double)s->alpha, (double)s->beta,
             backend_names[wbcl_context_gemm_backend(ctx) - 1]);
    wbcl_status st = wbcl_gemm(ctx, s->ta, s->tb, s->alpha, A, B, s->beta, C);
    ck_assert_msg(st == WBCL_SUCCESS, "%s: %s", what, wbcl_context_last_error(ctx));
    float *got = tu_guarded_alloc(nc);
    ck_assert_int_eq(wbcl_tensor_read(ctx, C, got, nc), WBCL_SUCCESS);
    ck_assert_msg(tu_canary_ok(got, nc), "%s: canary", what);

    /* stored inputs (rounded where F16) and the unrounded ones, in double */
    double *sa = malloc(na * sizeof *sa), *sb = malloc(nb * sizeof *sb), *want = malloc(nc * sizeof *want);
    double *xa = tu_to_f64(a, na), *xb = tu_to_f64(b, nb), *exact = tu_to_f64(c0, nc);
    double *aa = malloc(na * sizeof *aa), *ab = malloc(nb * sizeof *ab), *bound = malloc(nc * sizeof *bound);
    for (size_t i = 0; i < na; i++) sa[i] = s->da == WBCL_F16 ? round_half(a[i]) : a[i], aa[i] = fabs(a[i]);
    for (size_t i = 0; i < nb; i++) sb[i] = s->db == WBCL_F16 ? round_half(b[i]) : b[i], ab[i] = fabs(b[i]);
    for (size_t i = 0; i < nc; i++) {
        want[i] = s->dc == WBCL_F16 ? round_half(c0[i]) : c0[i];
        bound[i] = fabs(c0[i]);
    }
    for (size_t q = 0; q < bt; q++) {
        const size_t oa = q * m * k, oc = q * m * n;
        wbcl_ref_gemm(s->ta, s->tb, m, n, k, s->alpha, sa + oa, ac, sb, bc, s->beta, want + oc, n);
        wbcl_ref_gemm(s->ta, s->tb, m, n, k, s->alpha, xa + oa, ac, xb, bc, s->beta, exact + oc, n);
        wbcl_ref_gemm(s->ta, s->tb, m, n, k, fabs(s->alpha), aa + oa, ac, ab, bc, fabs(s->beta), bound + oc, n);
    }
    const double u = ldexp(1, -24), u16 = ldexp(1, -11), tiny = ldexp(1, -25);
    const int chalf = s->dc == WBCL_F16;
    const int n16 = (s->da == WBCL_F16) + (s->db == WBCL_F16) + (chalf && s->beta != 0.0f);
    double worst = 0, worst_acc = 0, worst_rel = 0;
    size_t wi = 0, wj = 0;
    for (size_t i = 0; i < nc; i++) {
        const double fp32 = 2.0 * (double)(k + 4) * u * bound[i];
        const double tol = fp32 * (1 + u16) + (chalf ? u16 * fabs(want[i]) + tiny : 0) + 1e-30;
        const double e = isfinite(got[i]) ? fabs(got[i] - want[i]) / tol : INFINITY;
        if (!(e <= worst)) worst = e, wi = i;
        /* documented accuracy against the unrounded inputs (file comment) */
        const double dev = fabs(got[i] - exact[i]);
        const double acc_tol = (n16 * u16 + ldexp(1, -22)) * bound[i] + fp32 * (1 + u16) +
                               (chalf ? u16 * (fabs(exact[i]) + n16 * u16 * bound[i]) + tiny : 0) + 1e-30;
        if (!(dev / acc_tol <= worst_acc)) worst_acc = dev / acc_tol, wj = i;
        if (bound[i] > 0 && dev / bound[i] > worst_rel) worst_rel = dev / bound[i];
    }
    ck_assert_msg(worst <= 1.0, "%s: element %zu got %.9g want %.9g (%.3g x tolerance)", what, wi, (double)got[wi],
                  want[wi], worst);
    ck_assert_msg(worst_acc <= 1.0, "%s: element %zu got %.9g, unrounded-input result %.9g (%.3g x bound)", what, wj,
                  (double)got[wj], exact[wj], worst_acc);
    if (rel) {
        double mr = 0;
        for (size_t i = 0; i < nc; i++)
            if (fabs(exact[i]) > 1e-3) mr = fmax(mr, fabs(got[i] - exact[i]) / fabs(exact[i]));
        *rel = mr;
    }
    free(a); free(b); free(c0); free(sa); free(sb); free(want); free(xa); free(xb); free(exact);
    free(aa); free(ab); free(bound);
    tu_guarded_free(got);
    wbcl_tensor_destroy(A);
    wbcl_tensor_destroy(B);
    wbcl_tensor_destroy(C);
    return worst_rel;
}

/* all 8 dtype mixes x 4 transposes, edge tiles, beta != 0, a batch with a shared B */
START_TEST(gemm_mixes)
{
    wbcl_context *ctx = ctx_for(_i);
    for (int mix = 0; mix < 8; mix++)
        for (int t = 0; t < 4; t++) {
            hspec s = {mix & 1 ? WBCL_F16 : WBCL_F32, mix & 2 ? WBCL_F16 : WBCL_F32, mix & 4 ? WBCL_F16 : WBCL_F32,
                       t & 1 ? WBCL_TRANS : WBCL_NO_TRANS, t & 2 ? WBCL_TRANS : WBCL_NO_TRANS,
                       37, 41, 43, 1, 0.75f, t == 3 ? 0.0f : -0.5f};
            run_half(ctx, &s, 1000 + (uint64_t)(8 * mix + t), NULL);
            if (t == 0) {
                s.batch = 3; /* merged into one (3*13) x 33 GEMM on the packed path */
                s.m = 13; s.n = 33; s.k = 64; s.beta = 1.0f;
                run_half(ctx, &s, 2000 + (uint64_t)mix, NULL);
            }
        }
    wbcl_context_destroy(ctx);
}
END_TEST

/* the packed kernel's 6 x 64 register tile (four float16 vectors per row) on half A, B and C:
 * the vload_half16/vstore_half16_rte paths at a vector index up to 3, full column panels and an
 * edge (n = 150), beta != 0 (C read as half); tolerances as in run_half */
START_TEST(gemm_tile_6x64_half)
{
    wbcl_context *ctx = ctx_for(0);
    ctx->params.gemm_mr = 6;
    ctx->params.gemm_nr = 64;
    for (int t = 0; t < 2; t++) {
        hspec s = {WBCL_F16, WBCL_F16, WBCL_F16, t ? WBCL_TRANS : WBCL_NO_TRANS, t ? WBCL_TRANS : WBCL_NO_TRANS,
                   29, 150, 37, 1, 0.75f, -0.5f};
        run_half(ctx, &s, 3000 + (uint64_t)t, NULL);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* wbcl_gemm_strided on F16 storage with offsets, row gaps (ld > cols) and batch strides: the
 * CLBlast path widens whole spans and writes C's back, so the gaps must come back unchanged */
START_TEST(gemm_strided_half)
{
    wbcl_context *ctx = ctx_for(_i);
    const size_t m = 9, n = 21, k = 17, bt = 2, lda = 20, ldb = 25, ldc = 30;
    const size_t off_a = 3, off_b = 5, off_c = 7, sa_ = m * lda + 4, sc_ = m * ldc + 2;
    const size_t NA = off_a + bt * sa_, NB = off_b + k * ldb, NC = off_c + bt * sc_ + 3;
    tu_rng r;
    tu_rng_seed(&r, 77);
    float *a = tu_random_f32(&r, NA, -1, 1), *b = tu_random_f32(&r, NB, -1, 1), *c0 = tu_random_f32(&r, NC, -1, 1);
    for (size_t i = 0; i < NA; i++) a[i] = round_half(a[i]);
    for (size_t i = 0; i < NB; i++) b[i] = round_half(b[i]);
    for (size_t i = 0; i < NC; i++) c0[i] = round_half(c0[i]);
    wbcl_tensor *A, *B, *C;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, &NA, WBCL_F16, a, &A), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, &NB, WBCL_F32, b, &B), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, &NC, WBCL_F16, c0, &C), WBCL_SUCCESS);
    wbcl_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.m = m; d.n = n; d.k = k; d.batch = bt; d.alpha = 1.25f; d.beta = 0.5f;
    d.off_a = off_a; d.lda = lda; d.stride_a = sa_;
    d.off_b = off_b; d.ldb = ldb; d.stride_b = 0;
    d.off_c = off_c; d.ldc = ldc; d.stride_c = sc_;
    ck_assert_msg(wbcl_gemm_strided(ctx, &d, A, B, C) == WBCL_SUCCESS, "%s", wbcl_context_last_error(ctx));
    float *got = tu_guarded_alloc(NC);
    ck_assert_int_eq(wbcl_tensor_read(ctx, C, got, NC), WBCL_SUCCESS);
    double *want = tu_to_f64(c0, NC), *bnd = malloc(NC * sizeof *bnd);
    int *touched = calloc(NC, sizeof *touched);
    for (size_t q = 0; q < bt; q++)
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                const size_t ci = off_c + q * sc_ + i * ldc + j;
                double acc = 0, abs_acc = 0;
                for (size_t p = 0; p < k; p++) {
                    const double x = a[off_a + q * sa_ + i * lda + p], y = b[off_b + p * ldb + j];
                    acc += x * y;
                    abs_acc += fabs(x * y);
                }
                want[ci] = d.alpha * acc + d.beta * (double)c0[ci];
                bnd[ci] = fabs(d.alpha) * abs_acc + fabs(d.beta) * fabs(c0[ci]);
                touched[ci] = 1;
            }
    const double u = ldexp(1, -24), u16 = ldexp(1, -11);
    for (size_t i = 0; i < NC; i++) {
        if (!touched[i]) { /* gaps and the parts outside the operand: bit-for-bit unchanged */
            ck_assert_msg(fbits(got[i]) == fbits(c0[i]), "C[%zu] outside the product changed: %a -> %a", i,
                          (double)c0[i], (double)got[i]);
            continue;
        }
        const double tol = 2.0 * (k + 4) * u * bnd[i] * (1 + u16) + u16 * fabs(want[i]) + ldexp(1, -25);
        ck_assert_msg(fabs(got[i] - want[i]) <= tol, "C[%zu] got %.9g want %.9g tol %.3g", i, (double)got[i], want[i],
                      tol);
    }
    free(a); free(b); free(c0); free(want); free(bnd); free(touched);
    tu_guarded_free(got);
    wbcl_tensor_destroy(A);
    wbcl_tensor_destroy(B);
    wbcl_tensor_destroy(C);
    wbcl_context_destroy(ctx);
}
END_TEST

/* the documented accuracy: relative to the unrounded float32 inputs, error ~2^-11 per F16 operand.
 * k = 1 (outer products): every element's relative error is its inputs' rounding, so its
 * maximum over 4096 elements must lie between 2^-13 (the rounding is there) and the bound. */
START_TEST(gemm_accuracy)
{
    wbcl_context *ctx = ctx_for(_i);
    double rel = 0;
    hspec s = {WBCL_F16, WBCL_F16, WBCL_F32, WBCL_NO_TRANS, WBCL_NO_TRANS, 64, 64, 1, 1, 1.0f, 0.0f};
    double r1 = run_half(ctx, &s, 31, &rel);
    ck_assert_msg(rel > ldexp(1, -13) && rel <= 2.01 * ldexp(1, -11), "A, B half, k = 1: max relative error %.3g", rel);
    s.dc = WBCL_F16; /* plus the rounding of C: up to 3 * 2^-11 */
    run_half(ctx, &s, 32, &rel);
    ck_assert_msg(rel > ldexp(1, -13) && rel <= 3.02 * ldexp(1, -11), "A, B, C half, k = 1: %.3g", rel);
    s.da = s.dc = WBCL_F32; /* B only: up to 2^-11 */
    run_half(ctx, &s, 33, &rel);
    ck_assert_msg(rel > ldexp(1, -14) && rel <= 1.01 * ldexp(1, -11), "B half, k = 1: %.3g", rel);
    /* k = 256: relative to S = (|A||B|)_ij the error stays below 2 * 2^-11 + the float32 term */
    s.da = s.db = WBCL_F16; s.k = 256;
    double r2 = run_half(ctx, &s, 34, NULL);
    ck_assert_msg(r2 <= 2 * ldexp(1, -11) + 2 * 260 * ldexp(1, -24), "k = 256: %.3g", r2);
    fprintf(stderr, "fp16 GEMM accuracy (%s): k=1 max |err|/S %.3g, k=256 %.3g (2^-11 = %.3g)\n",
            backend_names[_i], r1, r2, ldexp(1, -11));
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- attention ---------------------------------------------------------------------------- */
/* Per-head softmax attention with q, k, v, o stored in the dtypes of `mask` (1 q, 2 k, 4 v, 8 o),
 * against wbcl_ref_attention_heads on the inputs as stored. Tolerance: tests/test_attention.c's
 * float32 bound (ATOL 4e-5 for O(1) inputs, p <= 64, n_k <= 128: an output row is a convex
 * combination of value rows, errors come from the length-p dot products, exp2 and the weighted
 * sum) plus, for a half o, its one rounding: 2^-11 |o| + 2^-25. A wrong mask, scale or a key
 * read as the wrong element moves outputs by 1e-2 or more. */
static void run_attention(wbcl_context *ctx, int mask, size_t B, size_t K, size_t nq, size_t nk, size_t p,
                          int causal, int mssa, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    const size_t nQ = B * K * nq * p, nK = B * K * nk * p;
    float *q = tu_random_f32(&r, nQ, -1, 1), *k = tu_random_f32(&r, nK, -1, 1), *v = tu_random_f32(&r, nK, -1, 1);
    if (mssa) {
        memcpy(k, q, nQ * sizeof *q);
        memcpy(v, q, nQ * sizeof *q);
    }
    size_t sq[4] = {B, K, nq, p}, sk[4] = {B, K, nk, p};
    const wbcl_dtype dq = mask & 1 ? WBCL_F16 : WBCL_F32, dk = mask & 2 ? WBCL_F16 : WBCL_F32,
                     dv = mask & 4 ? WBCL_F16 : WBCL_F32, dout = mask & 8 ? WBCL_F16 : WBCL_F32;
    wbcl_tensor *Q, *Kt = NULL, *V = NULL, *O;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 4, sq, dq, q, &Q), WBCL_SUCCESS);
    if (!mssa) {
        ck_assert_int_eq(wbcl_tensor_create(ctx, 4, sk, dk, k, &Kt), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_tensor_create(ctx, 4, sk, dv, v, &V), WBCL_SUCCESS);
    }
    ck_assert_int_eq(wbcl_tensor_create(ctx, 4, sq, dout, NULL, &O), WBCL_SUCCESS);
    const double scale = 1.0 / sqrt((double)p);
    wbcl_status st = mssa ? wbcl_attention_mssa_heads(ctx, Q, (float)scale, causal, O)
                          : wbcl_attention_softmax_heads(ctx, Q, Kt, V, (float)scale, causal, O);
    char what[160];
    snprintf(what, sizeof what, "%s mask %d B %zu K %zu nq %zu nk %zu p %zu causal %d (%s)",
             mssa ? "mssa" : "softmax", mask, B, K, nq, nk, p, causal,
             wbcl_context_variant(ctx) == WBCL_VARIANT_GPU ? "gpu" : "cpu");
    ck_assert_msg(st == WBCL_SUCCESS, "%s: %s", what, wbcl_context_last_error(ctx));
    float *got = tu_guarded_alloc(nQ);
    ck_assert_int_eq(wbcl_tensor_read(ctx, O, got, nQ), WBCL_SUCCESS);
    ck_assert(tu_canary_ok(got, nQ));
    double *dq64 = malloc(nQ * sizeof *dq64), *dk64 = malloc(nK * sizeof *dk64), *dv64 = malloc(nK * sizeof *dv64),
           *want = malloc(nQ * sizeof *want);
    for (size_t i = 0; i < nQ; i++) dq64[i] = dq == WBCL_F16 ? round_half(q[i]) : q[i];
    for (size_t i = 0; i < nK; i++) {
        dk64[i] = mssa ? dq64[i] : dk == WBCL_F16 ? round_half(k[i]) : k[i];
        dv64[i] = mssa ? dq64[i] : dv == WBCL_F16 ? round_half(v[i]) : v[i];
    }
    wbcl_ref_attention_heads(B, K, nq, nk, p, dq64, dk64, dv64, scale, causal, want);
    double worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < nQ; i++) {
        const double tol = 4e-5 + (dout == WBCL_F16 ? ldexp(1, -11) * fabs(want[i]) + ldexp(1, -25) : 0);
        const double e = isfinite(got[i]) ? fabs(got[i] - want[i]) / tol : INFINITY;
        if (!(e <= worst)) worst = e, wi = i;
    }
    ck_assert_msg(worst <= 1.0, "%s: element %zu got %.9g want %.9g (%.3g x tolerance)", what, wi, (double)got[wi],
                  want[wi], worst);
    free(q); free(k); free(v); free(dq64); free(dk64); free(dv64); free(want);
    tu_guarded_free(got);
    wbcl_tensor_destroy(Q);
    wbcl_tensor_destroy(Kt);
    wbcl_tensor_destroy(V);
    wbcl_tensor_destroy(O);
}

/* _i = 0: the CPU variant (packed K/V), 1: the GPU-shaped kernel (reads q, k, v in place) */
START_TEST(attention_half)
{
    wbcl_context *ctx = tu_context();
    const wbcl_variant var = _i ? WBCL_VARIANT_GPU : WBCL_VARIANT_CPU;
    ck_assert_int_eq(wbcl_context_set_variant(ctx, var), WBCL_SUCCESS);
    /* all four half, each one alone, k and v only, on two shapes: p = 16 (whole vectors, square,
     * non-causal) and p = 40 (padded vectors, 29 queries over 70 keys, causal). Each mask and head
     * dimension is its own program (a cold compile of a few seconds on PoCL), so not every mask runs on
     * both: all four half runs on both, so every tensor's half loads and stores are also checked padded
     * and causal; q alone and v alone run on the first shape, k alone, o alone and k + v on the second.
     * The GPU-shaped kernel runs all four half and k + v only (with MSSA's q, k, v half below and
     * test_attention's all float, each tensor's half and float paths in it run, in both roles); the
     * one-tensor masks check the host's dtype-to-mask mapping, which is the same for both variants. */
    const int masks[] = {15, 1, 2, 4, 8, 6};
    const int gpu = var == WBCL_VARIANT_GPU;
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        const int m = masks[i];
        if (gpu && m != 15 && m != 6) continue;
        if (m == 15 || m == 1 || m == 4) run_attention(ctx, m, 2, 3, 37, 37, 16, 0, 0, 500 + i);
        if (m == 15 || m == 2 || m == 8 || m == 6) run_attention(ctx, m, 1, 2, 29, 70, 40, 1, 0, 510 + i);
    }
    if (gpu) { /* the register-tiled kernel (attention.tiled, p = 32): all four half, and k + v half */
        ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.tiled", 1), WBCL_SUCCESS);
        run_attention(ctx, 15, 1, 2, 29, 70, 32, 1, 0, 530);
        run_attention(ctx, 6, 2, 1, 65, 65, 32, 0, 0, 531);
        ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.tiled", 0), WBCL_SUCCESS);
    }
    /* MSSA: w half with a float32 o, and both half */
    run_attention(ctx, 7, 2, 2, 45, 45, 24, 0, 1, 520);
    run_attention(ctx, 15, 1, 3, 33, 33, 16, 1, 1, 521);
    wbcl_context_destroy(ctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fp16");
    TCase *tc = tcase_create("fp16");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, host_all_halves);
    tcase_add_test(tc, host_rne);
    tcase_add_test(tc, tensor_round_trip);
    tcase_add_test(tc, tensor_rne);
    tcase_add_test(tc, tensor_fill_reshape_limits);
    tcase_add_test(tc, ops_refuse_f16);
    tcase_add_loop_test(tc, gemm_mixes, 0, N_BACKENDS);
    tcase_add_test(tc, gemm_tile_6x64_half);
    tcase_add_loop_test(tc, gemm_strided_half, 0, N_BACKENDS);
    tcase_add_loop_test(tc, gemm_accuracy, 0, N_BACKENDS);
    tcase_add_loop_test(tc, attention_half, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
