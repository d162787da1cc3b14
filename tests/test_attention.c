/* Softmax attention and MSSA: per-head kernels (both variants) and modules against the
 * double references of host/ref/ref_attention.c; causal prefix property; decode equals batch;
 * large logits; the one-key causal row; safetensors loading; bad input.
 *
 * Tolerances. Inputs are O(1) (uniform in [-1, 1]; weights scaled by d^-1/2 so projections stay
 * O(1)). An output row is a convex combination of value rows, so its error is
 *   |δo| <= max|v| · (max_j |δs_ij| + a few ulps from exp2 and the division)  + the rounding of the
 * length-n_k weighted sum (~ log2(n_k)·u with blocked sums, n_k·u worst case),
 * where δs = scale·δ(q·k) <= scale·p·u·max|q||k| (fp32 dot product of length p). For p <= 64,
 * n_k <= 128: δs <= 8·6e-8·... ~ 4e-6, so ATOL = 4e-5 (relative to max|v| = 1) leaves a margin of
 * ~10 while a wrong mask, a missing rescale or a wrong scale gives errors of 1e-2 or more.
 * Modules add two GEMMs of length d <= 48: another sqrt(d)·u·O(1) each; MOD_ATOL = 6e-5. */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h" /* the device limits a test lowers */
#include "testutil.h"
#include "wbcl/attention.h"

#define ATOL 4e-5
#define RTOL 1e-5
#define MOD_ATOL 6e-5

static int mkdir_p_simple(const char *p) { return mkdir(p, 0700) == 0 || access(p, W_OK) == 0 ? 0 : -1; }

static const wbcl_variant variants[2] = {WBCL_VARIANT_CPU, WBCL_VARIANT_GPU};
static const char *vname(wbcl_variant v) { return v == WBCL_VARIANT_CPU ? "cpu" : "gpu"; }

static wbcl_tensor *mk(wbcl_context *ctx, int ndim, const size_t *shape, const float *data)
{
    wbcl_tensor *t = NULL;
    wbcl_status st = wbcl_tensor_create(ctx, ndim, shape, WBCL_F32, data, &t);
    ck_assert_msg(st == WBCL_SUCCESS, "tensor_create: %s", wbcl_context_last_error(ctx));
    return t;
}

static size_t numel(int ndim, const size_t *s)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= s[i];
    return n;
}

/* reads t into a canary-guarded buffer (caller frees with tu_guarded_free) */
static float *rd(wbcl_context *ctx, const wbcl_tensor *t)
{
    size_t n = wbcl_tensor_numel(t);
    float *h = tu_guarded_alloc(n);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t, h, n), WBCL_SUCCESS);
    ck_assert(tu_canary_ok(h, n));
    return h;
}

static int all_finite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* ---- per-head kernels -------------------------------------------------------------------------- */
typedef struct { size_t B, K, nq, nk, p; } heads_case;

static void check_heads_case(wbcl_context *ctx, const heads_case *hc, int causal, int mssa, tu_rng *rng,
                             double qk_range)
{
    size_t sq[4] = {hc->B, hc->K, hc->nq, hc->p}, sk[4] = {hc->B, hc->K, hc->nk, hc->p};
    size_t nq = numel(4, sq), nk = numel(4, sk);
    float *q = tu_random_f32(rng, nq, -qk_range, qk_range), *k = tu_random_f32(rng, nk, -qk_range, qk_range),
          *v = tu_random_f32(rng, nk, -1, 1);
    if (mssa) memcpy(k, q, nq * sizeof *q), memcpy(v, q, nq * sizeof *q);
    double *qd = tu_to_f64(q, nq), *kd = tu_to_f64(k, nk), *vd = tu_to_f64(v, nk), *want = malloc(nq * sizeof *want);
    const double scale = 1.0 / sqrt((double)hc->p);
    wbcl_ref_attention_heads(hc->B, hc->K, hc->nq, hc->nk, hc->p, qd, kd, vd, scale, causal, want);
    wbcl_tensor *tq = mk(ctx, 4, sq, q), *tk = mk(ctx, 4, sk, k), *tv = mk(ctx, 4, sk, v), *to = mk(ctx, 4, sq, NULL);
    wbcl_status st = mssa ? wbcl_attention_mssa_heads(ctx, tq, (float)scale, causal, to)
                          : wbcl_attention_softmax_heads(ctx, tq, tk, tv, (float)scale, causal, to);
    ck_assert_msg(st == WBCL_SUCCESS, "%s", wbcl_context_last_error(ctx));
    float *got = rd(ctx, to);
    char what[160];
    snprintf(what, sizeof what, "%s %s B=%zu K=%zu nq=%zu nk=%zu p=%zu causal=%d (%s)", mssa ? "mssa" : "softmax",
             vname(wbcl_context_variant(ctx)), hc->B, hc->K, hc->nq, hc->nk, hc->p, causal, "heads");
    /* max|v| is the scale of every output (convex combinations); MSSA's v = w in [-range, range] */
    double vmax = mssa ? qk_range : 1.0;
    tu_assert_close(got, want, nq, ATOL * vmax, RTOL, what);
    wbcl_tensor_destroy(tq);
    wbcl_tensor_destroy(tk);
    wbcl_tensor_destroy(tv);
    wbcl_tensor_destroy(to);
    free(q); free(k); free(v); free(qd); free(kd); free(vd); free(want);
    tu_guarded_free(got);
}

START_TEST(heads_softmax_vs_ref)
{
    wbcl_context *ctx = tu_context();
    tu_rng rng;
    tu_rng_seed(&rng, 11);
    /* N = 1, primes, non-multiples of 4 (queries per group), 16 (panel), 32 (block), 64 (GPU group);
     * p = 2, 5 (vector widths 4/8, padded), 16, 48 (3 x float16), 64, 67 (padded, 2 queries per group);
     * heads 1 and 12. (Each distinct p builds a program: the set is kept small for cold caches.) */
    const heads_case cases[] = {
        {1, 1, 1, 1, 2},    {2, 3, 7, 7, 5},    {1, 12, 13, 13, 2}, {1, 2, 37, 37, 16},
        {1, 1, 67, 67, 48}, {2, 2, 33, 33, 64}, {1, 1, 29, 29, 67}, {1, 3, 97, 97, 5},
    };
    for (int vi = 0; vi < 2; vi++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[vi]), WBCL_SUCCESS);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &cases[i], causal, 0, &rng, 1.0);
        /* fewer queries than keys: non-causal any n_q; causal = the last n_q tokens */
        const heads_case rect[] = {{1, 2, 5, 37, 16}, {2, 1, 1, 40, 5}, {1, 12, 3, 3, 2}, {1, 1, 40, 9, 16}};
        for (size_t i = 0; i < 4; i++) check_heads_case(ctx, &rect[i], 0, 0, &rng, 1.0);
        for (size_t i = 0; i < 3; i++) check_heads_case(ctx, &rect[i], 1, 0, &rng, 1.0);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(heads_mssa_vs_ref)
{
    wbcl_context *ctx = tu_context();
    tu_rng rng;
    tu_rng_seed(&rng, 12);
    const heads_case cases[] = {{1, 1, 1, 1, 2}, {2, 12, 11, 11, 2}, {1, 1, 71, 71, 48}, {1, 3, 45, 45, 64}};
    for (int vi = 0; vi < 2; vi++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[vi]), WBCL_SUCCESS);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &cases[i], causal, 1, &rng, 1.0);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* The CPU kernel's O += P V in passes of attention.vc accumulator vectors and its score loop one
 * 16-key panel at a time (attention.sp = 1), the defaults on devices whose native float vector is
 * narrower than 16; set here so that every host runs them: p = 64 (4 vectors of 16) in passes of 1
 * and 2, with 2, 3, 5 and 6 queries per group (3, 5, 6: group counts that do not divide the rows),
 * both score-loop forms, and p = 67 (5 vectors: vc = 2 is lowered to 1, the largest divisor), causal and
 * not, fewer queries than keys, and logits up to ~100 (qk range 4) so that the running maximum grows
 * after the first block and the stashed accumulators are rescaled between passes. */
/* A context on the CPU variant with no table: a shipped table's scoped attention.pP.* keys would
 * outrank the unscoped ones the tests set, and its tuned values would hide the defaults' rules */
static wbcl_context *cpu_context_untuned(void)
{
    wbcl_context *ctx = tu_context();
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_CPU), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_reset_params(ctx), WBCL_SUCCESS);
    return ctx;
}

START_TEST(cpu_pv_passes_vs_ref)
{
    wbcl_context *ctx = cpu_context_untuned();
    tu_rng rng;
    tu_rng_seed(&rng, 17);
    const long sets[][4] = {{2, 8, 2, 2}, {2, 8, 1, 2}, {3, 5, 2, 2}, {6, 3, 1, 1}, {5, 2, 2, 1}};
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
        ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.qb", sets[si][0]), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.g", sets[si][1]), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.vc", sets[si][2]), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.sp", sets[si][3]), WBCL_SUCCESS);
        long vc = 0, sp = 0;
        ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p64.vc", &vc, NULL), WBCL_SUCCESS);
        ck_assert_int_eq(vc, sets[si][2]);
        ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p64.sp", &sp, NULL), WBCL_SUCCESS);
        ck_assert_int_eq(sp, sets[si][3]);
        const heads_case cases[] = {{1, 2, 71, 71, 64}, {2, 1, 37, 100, 64}};
        for (size_t i = 0; i < 2; i++)
            for (int causal = 0; causal < 2; causal++) {
                check_heads_case(ctx, &cases[i], causal, 0, &rng, 1.0);
                check_heads_case(ctx, &cases[i], causal, 0, &rng, 4.0);
            }
        check_heads_case(ctx, &cases[0], 1, 1, &rng, 1.0);
    }
    /* p = 67: five vectors of 16; vc = 2 does not divide 5, so 1 is used (and shown) */
    ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.vc", 2), WBCL_SUCCESS);
    long vc = 0;
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p67.vc", &vc, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(vc, 1);
    const heads_case odd = {1, 1, 45, 45, 67};
    for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &odd, causal, 0, &rng, 4.0);
    wbcl_context_destroy(ctx);
}
END_TEST

/* The CPU kernel's default for rows longer than 4 vectors on CPUs with AVX-512's 16-float vectors
 * (host/ops/attention.c): 4 queries per group and O += P V in passes of the largest divisor of the
 * row's vectors up to 5 (p 80: the whole row of 5, p 96: 3, p 128 and 256: 4), where it used to be
 * fewer queries with whole rows. The device's vector width is set here, so that every host builds
 * this form: the rule, then p = 128 (two passes) and 96 (two passes of 3) against the double reference,
 * causal and not, fewer queries than keys, logits up to ~100 (the stash rescaled between passes) and
 * MSSA. Devices with narrower vectors keep their own rule (QB 6, one vector a pass). */
START_TEST(cpu_wide_rows_vs_ref)
{
    wbcl_context *ctx = cpu_context_untuned();
    tu_rng rng;
    tu_rng_seed(&rng, 19);
    if (ctx->info.type != WBCL_DEVICE_CPU) {
        wbcl_context_destroy(ctx);
        return; /* the rule is for CPU devices; a GPU running the CPU variant keeps the general one */
    }
    const unsigned width = ctx->info.native_vector_width_float;
    ctx->info.native_vector_width_float = 16;
    const struct { const char *key; long want; } rule[] = {
        {"attention.p64.qb", 4},  {"attention.p64.vc", 4},  {"attention.p80.qb", 4},  {"attention.p80.vc", 5},
        {"attention.p96.qb", 4},  {"attention.p96.vc", 3},  {"attention.p128.qb", 4}, {"attention.p128.vc", 4},
        {"attention.p256.qb", 4}, {"attention.p256.vc", 4}, {"attention.p128.sp", 2},
    };
    for (size_t i = 0; i < sizeof rule / sizeof rule[0]; i++) {
        long v = 0;
        ck_assert_int_eq(wbcl_context_param_get(ctx, rule[i].key, &v, NULL), WBCL_SUCCESS);
        ck_assert_msg(v == rule[i].want, "%s = %ld, want %ld", rule[i].key, v, rule[i].want);
    }
    const heads_case cases[] = {{1, 2, 71, 71, 128}, {2, 1, 37, 100, 128}, {1, 1, 45, 45, 96}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int causal = 0; causal < 2; causal++) {
            check_heads_case(ctx, &cases[i], causal, 0, &rng, 1.0);
            check_heads_case(ctx, &cases[i], causal, 0, &rng, 4.0);
        }
    check_heads_case(ctx, &cases[0], 1, 1, &rng, 1.0);
    /* narrower vectors: their own rule */
    ctx->info.native_vector_width_float = 8;
    long qb = 0, vc = 0;
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p128.qb", &qb, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p128.vc", &vc, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(qb, 6);
    ck_assert_int_eq(vc, 1);
    ctx->info.native_vector_width_float = width;
    wbcl_context_destroy(ctx);
}
END_TEST

/* The register-tiled GPU kernel (attention.tiled = 1, p = 32 and 64) on PoCL with the GPU
 * variant, against the double reference: one query, primes and non-multiples of its 64-query
 * and 32-key tiles, several tiles each way, fewer queries than keys (causal: the last n_q),
 * MSSA, and logits of 1e3 (the running maximum changes between tiles). The per-kernel profile
 * shows that the tiled kernel, not the one-query kernel, ran. */
#define launches_of tu_launches

START_TEST(tiled_gpu_vs_ref)
{
    wbcl_context *ctx = tu_context();
    tu_rng rng;
    tu_rng_seed(&rng, 14);
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.tiled", 1), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_timing(ctx, 1), WBCL_SUCCESS);
    const heads_case cases[] = {{1, 1, 1, 1, 64},    {2, 3, 45, 45, 64}, {1, 2, 64, 64, 32},
                                {1, 1, 131, 131, 64}, {2, 1, 97, 97, 32}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &cases[i], causal, 0, &rng, 1.0);
    const heads_case rect[] = {{1, 2, 5, 37, 64}, {1, 1, 40, 97, 32}, {1, 1, 70, 70, 64}};
    for (size_t i = 0; i < 3; i++)
        for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &rect[i], causal, 0, &rng, 1.0);
    const heads_case ms = {1, 3, 71, 71, 64};
    for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &ms, causal, 1, &rng, 1.0);
    /* |q.k| up to 64 * 16 * 8 = 8192 at scale 1/8: logits ~1e3, weights far from uniform */
    const heads_case big = {1, 2, 100, 100, 64};
    for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &big, causal, 0, &rng, 16.0);
    ck_assert_uint_gt(launches_of(ctx, "wbcl_attn_tiled_gpu"), 0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_fused_gpu"), 0);
    /* p = 48: not a tiled shape, the one-query kernel runs */
    const heads_case other = {1, 1, 20, 20, 48};
    check_heads_case(ctx, &other, 0, 0, &rng, 1.0);
    ck_assert_uint_gt(launches_of(ctx, "wbcl_attn_fused_gpu"), 0);
    wbcl_context_destroy(ctx);
}
END_TEST

/* The register-tiled kernel's p = 96 / 128 form (16-key tiles, Q swizzled in local memory) on PoCL
 * with the GPU variant, against the double reference: one query, non-multiples of the 64-query and
 * 16-key tiles (37, 130), fewer queries than keys (causal: the last n_q), MSSA, logits of ~1e3. p = 128
 * takes it by default on a GPU-variant context, p = 96 through the scoped key attention.p96.tiled.
 * Then the defaults of attention.tiled: 1 for p = 64 and 128, 0 for p = 32 (and p = 96); an explicit
 * 0 gives the one-query kernel back; the CPU variant never takes it. */
static void reset_launches(wbcl_context *ctx) { wbcl_context_reset_kernel_ns(ctx); }

START_TEST(tiled_gpu_p128_vs_ref)
{
    wbcl_context *ctx = tu_context();
    tu_rng rng;
    tu_rng_seed(&rng, 15);
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_timing(ctx, 1), WBCL_SUCCESS);
    long t;
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p128.tiled", &t, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(t, 1);
    reset_launches(ctx);
    const heads_case cases[] = {{1, 1, 1, 1, 128}, {1, 2, 37, 37, 128}, {2, 1, 130, 130, 128}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &cases[i], causal, 0, &rng, 1.0);
    const heads_case rect = {1, 2, 37, 130, 128};
    for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &rect, causal, 0, &rng, 1.0);
    const heads_case ms = {1, 2, 70, 70, 128};
    for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &ms, causal, 1, &rng, 1.0);
    /* |q.k| up to 128 * 8 * 8 = 8192 at scale 1/11.3: logits ~1e3, weights far from uniform */
    const heads_case big = {1, 1, 100, 100, 128};
    for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &big, causal, 0, &rng, 8.0);
    ck_assert_uint_gt(launches_of(ctx, "wbcl_attn_tiled_gpu"), 0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_fused_gpu"), 0);

    /* p = 96: off by default, on through the scoped key */
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p96.tiled", &t, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(t, 0);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.p96.tiled", 1), WBCL_SUCCESS);
    reset_launches(ctx);
    const heads_case c96[] = {{1, 1, 37, 37, 96}, {1, 1, 130, 130, 96}};
    for (size_t i = 0; i < 2; i++)
        for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &c96[i], causal, 0, &rng, 1.0);
    const heads_case r96 = {1, 1, 20, 53, 96}, m96 = {1, 1, 45, 45, 96};
    for (int causal = 0; causal < 2; causal++) {
        check_heads_case(ctx, &r96, causal, 0, &rng, 1.0);
        check_heads_case(ctx, &m96, causal, 1, &rng, 1.0);
    }
    ck_assert_uint_gt(launches_of(ctx, "wbcl_attn_tiled_gpu"), 0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_fused_gpu"), 0);

    /* the defaults on a GPU-variant context: p = 64 tiled, p = 32 one query */
    ck_assert_int_eq(wbcl_context_reset_params(ctx), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p64.tiled", &t, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(t, 1);
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p32.tiled", &t, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(t, 0);
    const heads_case c64 = {1, 1, 45, 45, 64}, c32 = {1, 1, 45, 45, 32};
    reset_launches(ctx);
    check_heads_case(ctx, &c64, 1, 0, &rng, 1.0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_tiled_gpu"), 1);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_fused_gpu"), 0);
    reset_launches(ctx);
    check_heads_case(ctx, &c32, 1, 0, &rng, 1.0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_tiled_gpu"), 0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_fused_gpu"), 1);
    /* an explicit 0: the one-query kernel at p = 64 and 128 */
    ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.tiled", 0), WBCL_SUCCESS);
    reset_launches(ctx);
    check_heads_case(ctx, &c64, 0, 0, &rng, 1.0);
    check_heads_case(ctx, &cases[1], 1, 0, &rng, 1.0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_tiled_gpu"), 0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_fused_gpu"), 2);
    /* the CPU variant never takes a GPU kernel, whatever the key says */
    ck_assert_int_eq(wbcl_context_reset_params(ctx), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_CPU), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p128.tiled", &t, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(t, 0);
    reset_launches(ctx);
    check_heads_case(ctx, &cases[1], 1, 0, &rng, 1.0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_tiled_gpu"), 0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_fused_cpu"), 1);
    /* a GPU with 32 KiB of local memory (less than the tiled kernel's 44.8 / 48 KiB): the program is
     * built without that kernel (-DWBCL_ATT_NO_TILED=1) and the one-query kernel runs */
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU), WBCL_SUCCESS);
    const uint64_t lmem = ctx->info.local_mem_size;
    ctx->info.local_mem_size = 32768;
    reset_launches(ctx);
    check_heads_case(ctx, &c64, 1, 0, &rng, 1.0);
    check_heads_case(ctx, &cases[1], 0, 0, &rng, 1.0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_tiled_gpu"), 0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_fused_gpu"), 2);
    ctx->info.local_mem_size = lmem;
    wbcl_context_destroy(ctx);
}
END_TEST

/* The register-tiled kernel's second form (attention.tiled = 2, p = 32 and 64: 64 queries x 64-key
 * tiles, wbcl_attn_tiled2_gpu) on PoCL with the GPU variant, against the double reference: one
 * query, primes and non-multiples of its 64-query and 64-key tiles, exact multiples (every tile
 * unmasked), several tiles each way, fewer queries than keys (causal: the last n_q, unmasked and
 * masked tiles both), MSSA, and logits of ~1e3 (the running maximum changes between tiles). The
 * profile shows that the second form, not the first or the one-query kernel, ran. Then: at p = 128
 * the value 2 takes the first form; a GPU with the first form's local memory but not the second's
 * (46 KiB at p = 64, 32 KiB at p = 32) builds the program without it (-DWBCL_ATT_NO_TILED2=1) and runs
 * the first form; with less than either (32 KiB at p = 64) the one-query kernel. */
START_TEST(tiled2_gpu_vs_ref)
{
    wbcl_context *ctx = tu_context();
    tu_rng rng;
    tu_rng_seed(&rng, 16);
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.tiled", 2), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_timing(ctx, 1), WBCL_SUCCESS);
    long t;
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p64.tiled", &t, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(t, 2);
    reset_launches(ctx);
    const heads_case cases[] = {{1, 1, 1, 1, 64},     {1, 1, 1, 1, 32},     {2, 3, 45, 45, 64},
                                {1, 2, 131, 131, 32}, {1, 1, 131, 131, 64}, {2, 1, 97, 97, 32},
                                {1, 1, 128, 128, 64}, {1, 1, 192, 192, 32}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &cases[i], causal, 0, &rng, 1.0);
    const heads_case rect[] = {{1, 2, 5, 37, 64}, {1, 1, 40, 97, 32}, {1, 1, 70, 150, 64}, {2, 1, 64, 200, 32}};
    for (size_t i = 0; i < sizeof rect / sizeof rect[0]; i++)
        for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &rect[i], causal, 0, &rng, 1.0);
    const heads_case ms[] = {{1, 3, 71, 71, 64}, {1, 1, 67, 67, 32}};
    for (size_t i = 0; i < 2; i++)
        for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &ms[i], causal, 1, &rng, 1.0);
    /* |q.k| up to p * 16 * 16 at scale p^-1/2: logits ~1e3 (p = 32: 1.4e3, p = 64: 2e3) */
    const heads_case big[] = {{1, 2, 100, 100, 64}, {1, 1, 130, 130, 32}};
    for (size_t i = 0; i < 2; i++)
        for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &big[i], causal, 0, &rng, 16.0);
    ck_assert_uint_gt(launches_of(ctx, "wbcl_attn_tiled2_gpu"), 0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_tiled_gpu"), 0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_fused_gpu"), 0);

    /* p = 128: no second form, 2 takes the first */
    reset_launches(ctx);
    const heads_case c128 = {1, 1, 37, 37, 128};
    check_heads_case(ctx, &c128, 1, 0, &rng, 1.0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_tiled_gpu"), 1);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_tiled2_gpu"), 0);

    /* local memory for the first form only: the program leaves the second out, the first runs */
    const heads_case c64 = {1, 1, 70, 70, 64}, c32 = {1, 1, 70, 70, 32};
    const uint64_t lmem = ctx->info.local_mem_size;
    ctx->info.local_mem_size = 46 * 1024;
    reset_launches(ctx);
    check_heads_case(ctx, &c64, 1, 0, &rng, 1.0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_tiled_gpu"), 1);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_tiled2_gpu"), 0);
    ctx->info.local_mem_size = 32 * 1024;
    reset_launches(ctx);
    check_heads_case(ctx, &c32, 0, 0, &rng, 1.0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_tiled_gpu"), 1);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_tiled2_gpu"), 0);
    /* and less than either: the one-query kernel */
    reset_launches(ctx);
    check_heads_case(ctx, &c64, 0, 0, &rng, 1.0);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_fused_gpu"), 1);
    ck_assert_uint_eq(launches_of(ctx, "wbcl_attn_tiled_gpu") + launches_of(ctx, "wbcl_attn_tiled2_gpu"), 0);
    ctx->info.local_mem_size = lmem;
    wbcl_context_destroy(ctx);
}
END_TEST

/* Logits of order 1e4 (scale 1, |q.k| up to 1e4): a naive exp overflows; the online softmax must
 * stay finite. Entries are +-25, so q.k is a multiple of 1250 up to 16*625 = 1e4.
 * (a) q = k with distinct sign patterns per token: query i's own key scores 1e4, every other key
 *     at most 1e4 - 1250, so the weights are one-hot (e^-1250 = 0) and o_i = v_i to a few ulps, in
 *     both causal and non-causal modes, with either sign of the other scores.
 * (b) random patterns with ties at the top: fp32 scores carry an absolute error of about
 *     p·u·1e4·log2(e) ~ 1.4e-2, which perturbs tied weights by ~1%: compare with 0.05·max|v|
 *     (an error in the max-subtraction or the rescaling gives O(1) errors or non-finite values). */
static float pattern(size_t j, size_t c) { return ((j * 2654435761u) >> c) & 1u ? 25.0f : -25.0f; }

START_TEST(large_logits)
{
    wbcl_context *ctx = tu_context();
    for (int vi = 0; vi < 2; vi++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[vi]), WBCL_SUCCESS);
        const size_t B = 1, K = 2, N = 37, p = 16;
        size_t s[4] = {B, K, N, p};
        size_t n = numel(4, s);
        float *q = malloc(n * sizeof *q), *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v);
        tu_rng rng;
        tu_rng_seed(&rng, 13);
        for (size_t i = 0; i < n; i++) {
            size_t h = i / (N * p), j = (i / p) % N, c = i % p;
            k[i] = pattern(j + 100 * h, c);
            q[i] = tu_uniform(&rng, 0, 1) < 0.5 ? -25.0f : 25.0f;
            v[i] = (float)tu_uniform(&rng, -1, 1);
        }
        double *qd = tu_to_f64(q, n), *kd = tu_to_f64(k, n), *vd = tu_to_f64(v, n), *want = malloc(n * sizeof *want);
        wbcl_tensor *tq = mk(ctx, 4, s, q), *tk = mk(ctx, 4, s, k), *tv = mk(ctx, 4, s, v), *to = mk(ctx, 4, s, NULL);
        for (int causal = 0; causal < 2; causal++) {
            /* (a) one-hot: q = k */
            ck_assert_int_eq(wbcl_attention_softmax_heads(ctx, tk, tk, tv, 1.0f, causal, to), WBCL_SUCCESS);
            float *got = rd(ctx, to);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(fabsf(got[i] - v[i]) <= 4e-7f * fabsf(v[i]) + 1e-30f,
                              "one-hot logits 1e4 (%s, causal %d): o[%zu] = %.9g, want v = %.9g",
                              vname(variants[vi]), causal, i, got[i], v[i]);
            tu_guarded_free(got);
            /* (b) ties, both signs */
            for (int sign = -1; sign <= 1; sign += 2) {
                wbcl_ref_attention_heads(B, K, N, N, p, qd, kd, vd, (double)sign, causal, want);
                ck_assert_int_eq(wbcl_attention_softmax_heads(ctx, tq, tk, tv, (float)sign, causal, to),
                                 WBCL_SUCCESS);
                got = rd(ctx, to);
                ck_assert_msg(all_finite(got, n), "non-finite output with logits ~1e4 (%s)", vname(variants[vi]));
                tu_assert_close(got, want, n, 0.05, 0.0, sign > 0 ? "logits 1e4 with ties" : "logits -1e4 with ties");
                /* the causal row 0 sees only key 0: o_0 = v_0 up to the division l/l */
                if (causal)
                    for (size_t h = 0; h < B * K; h++)
                        for (size_t c = 0; c < p; c++)
                            ck_assert_msg(got[h * N * p + c] == v[h * N * p + c], "causal row 0 must equal v_0");
                tu_guarded_free(got);
            }
        }
        /* N = 1, causal, huge logit: a row with one visible key */
        size_t s1[4] = {1, 1, 1, 2};
        const float q1[2] = {1e4f, -3e3f}, v1[2] = {0.5f, -2.0f};
        wbcl_tensor *a = mk(ctx, 4, s1, q1), *bv = mk(ctx, 4, s1, v1), *o1 = mk(ctx, 4, s1, NULL);
        for (int causal = 0; causal < 2; causal++) {
            ck_assert_int_eq(wbcl_attention_softmax_heads(ctx, a, a, bv, 1.0f, causal, o1), WBCL_SUCCESS);
            float *g1 = rd(ctx, o1);
            for (int c = 0; c < 2; c++)
                ck_assert_msg(g1[c] == v1[c], "N=1 causal %d: o[%d] = %g, want %g", causal, c, g1[c], v1[c]);
            tu_guarded_free(g1);
            ck_assert_int_eq(wbcl_attention_mssa_heads(ctx, a, 1.0f, causal, o1), WBCL_SUCCESS);
            g1 = rd(ctx, o1);
            for (int c = 0; c < 2; c++) ck_assert_msg(g1[c] == q1[c], "MSSA N=1 causal %d: o[%d] = %g", causal, c, g1[c]);
            tu_guarded_free(g1);
        }
        wbcl_tensor_destroy(a);
        wbcl_tensor_destroy(bv);
        wbcl_tensor_destroy(o1);
        wbcl_tensor_destroy(tq);
        wbcl_tensor_destroy(tk);
        wbcl_tensor_destroy(tv);
        wbcl_tensor_destroy(to);
        free(q); free(k); free(v); free(qd); free(kd); free(vd); free(want);
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* One query per head (a decode step) takes the split-K kernels (host/ops/attn_decode.c): keys in
 * chunks of 32..512 (ceil(n_k B K / (8 or 32 per compute unit))), per-chunk partials combined.
 * n_k 700 with 12 heads: chunks of 512 + 188 on 2 CPU cores; 300 and 77 keys: several chunks
 * with a short last one; p = 64, 12, 8 (vector widths 16, 4, 8). Same tolerances as above.
 * Then logits ~1e4 whose maximum lies in the LAST chunk (q = the last key's ±25 pattern): the
 * combine must rescale the earlier chunks' partials to 0 weight: o = v_last to a few ulps. */
START_TEST(heads_decode_vs_ref)
{
    wbcl_context *ctx = tu_context();
    tu_rng rng;
    tu_rng_seed(&rng, 15);
    const heads_case cases[] = {{1, 12, 1, 700, 64}, {2, 3, 1, 300, 12}, {1, 2, 1, 77, 8}};
    for (int vi = 0; vi < 2; vi++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[vi]), WBCL_SUCCESS);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            for (int causal = 0; causal < 2; causal++) check_heads_case(ctx, &cases[i], causal, 0, &rng, 1.0);
        const size_t N = 700, p = 64;
        size_t sq[4] = {1, 1, 1, p}, sk[4] = {1, 1, N, p};
        float *k = malloc(N * p * sizeof *k), *v = tu_random_f32(&rng, N * p, -1, 1);
        for (size_t j = 0; j < N; j++)
            for (size_t c = 0; c < p; c++) k[j * p + c] = pattern(j, c % 32) * (c < 32 ? 1.0f : 0.0f);
        wbcl_tensor *tq = mk(ctx, 4, sq, k + (N - 1) * p), *tk = mk(ctx, 4, sk, k), *tv = mk(ctx, 4, sk, v),
                    *to = mk(ctx, 4, sq, NULL);
        ck_assert_int_eq(wbcl_attention_softmax_heads(ctx, tq, tk, tv, 1.0f, 1, to), WBCL_SUCCESS);
        float *got = rd(ctx, to);
        for (size_t c = 0; c < p; c++)
            ck_assert_msg(fabsf(got[c] - v[(N - 1) * p + c]) <= 4e-7f * fabsf(v[(N - 1) * p + c]) + 1e-30f,
                          "decode, logits 2e4 with the maximum in the last chunk (%s): o[%zu] = %.9g, want %.9g",
                          vname(variants[vi]), c, got[c], v[(N - 1) * p + c]);
        tu_guarded_free(got);
        free(k);
        free(v);
        wbcl_tensor_destroy(tq);
        wbcl_tensor_destroy(tk);
        wbcl_tensor_destroy(tv);
        wbcl_tensor_destroy(to);
    }
    wbcl_context_destroy(ctx);
}
END_TEST


/* ---- modules ------------------------------------------------------------------------------------ */
typedef struct {
    size_t d, heads, dim_head;
    float *Wqkv, *bqkv, *Wo, *bo; /* MHA: (3d, d), (3d); MSSA: U (inner, d), Wo (d, inner) */
    size_t inner;
} weights;

static void make_weights(tu_rng *rng, weights *w, size_t d, size_t heads, size_t dim_head, int mssa)
{
    w->d = d;
    w->heads = heads;
    w->dim_head = dim_head;
    w->inner = mssa ? heads * dim_head : d;
    size_t rows = mssa ? w->inner : 3 * d;
    double a = 1.0 / sqrt((double)d), ao = 1.0 / sqrt((double)w->inner);
    w->Wqkv = tu_random_f32(rng, rows * d, -a, a);
    w->bqkv = mssa ? NULL : tu_random_f32(rng, rows, -0.5, 0.5);
    w->Wo = tu_random_f32(rng, d * w->inner, -ao, ao);
    w->bo = tu_random_f32(rng, d, -0.5, 0.5);
}

static void free_weights(weights *w)
{
    free(w->Wqkv); free(w->bqkv); free(w->Wo); free(w->bo);
}

/* forward of a module (mha if !mssa) on x (B, N, d); returns the result (guarded) */
static float *module_forward(wbcl_context *ctx, const weights *w, int mssa, int causal, int identity, size_t B,
                             size_t N, const float *x, int three_d)
{
    size_t s3[3] = {B, N, w->d}, s2[2] = {N, w->d};
    wbcl_tensor *tx = three_d ? mk(ctx, 3, s3, x) : mk(ctx, 2, s2, x);
    wbcl_tensor *ty = three_d ? mk(ctx, 3, s3, NULL) : mk(ctx, 2, s2, NULL);
    wbcl_status st;
    if (mssa) {
        wbcl_mssa *m = NULL;
        st = wbcl_mssa_create(ctx, w->d, w->heads, w->dim_head, causal, w->Wqkv, identity ? NULL : w->Wo,
                              identity ? NULL : w->bo, &m);
        ck_assert_msg(st == WBCL_SUCCESS, "%s", wbcl_context_last_error(ctx));
        st = wbcl_mssa_forward(ctx, m, tx, ty);
        ck_assert_msg(st == WBCL_SUCCESS, "%s", wbcl_context_last_error(ctx));
        wbcl_mssa_destroy(m);
    } else {
        wbcl_mha *m = NULL;
        st = wbcl_mha_create(ctx, w->d, w->heads, causal, w->Wqkv, w->bqkv, w->Wo, w->bo, &m);
        ck_assert_msg(st == WBCL_SUCCESS, "%s", wbcl_context_last_error(ctx));
        st = wbcl_mha_forward(ctx, m, tx, ty);
        ck_assert_msg(st == WBCL_SUCCESS, "%s", wbcl_context_last_error(ctx));
        wbcl_mha_destroy(m);
    }
    float *y = rd(ctx, ty);
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(ty);
    return y;
}

static void check_module(wbcl_context *ctx, tu_rng *rng, int mssa, size_t d, size_t heads, size_t dim_head,
                         int identity, size_t B, size_t N, int causal)
{
    weights w;
    make_weights(rng, &w, d, heads, dim_head, mssa);
    size_t n = B * N * d;
    float *x = tu_random_f32(rng, n, -1, 1);
    double *xd = tu_to_f64(x, n), *want = malloc(n * sizeof *want);
    double *Wd = tu_to_f64(w.Wqkv, (mssa ? w.inner : 3 * d) * d), *bd = mssa ? NULL : tu_to_f64(w.bqkv, 3 * d),
           *Wod = tu_to_f64(w.Wo, d * w.inner), *bod = tu_to_f64(w.bo, d);
    if (mssa) wbcl_ref_mssa(B, N, d, heads, dim_head, causal, xd, Wd, identity ? NULL : Wod, bod, want);
    else wbcl_ref_mha(B, N, d, heads, causal, xd, Wd, bd, Wod, bod, want);
    float *y = module_forward(ctx, &w, mssa, causal, identity, B, N, x, B > 1 || N % 2);
    char what[160];
    snprintf(what, sizeof what, "%s module (%s) d=%zu heads=%zu dim_head=%zu%s B=%zu N=%zu causal=%d",
             mssa ? "mssa" : "mha", vname(wbcl_context_variant(ctx)), d, heads, dim_head, identity ? " identity" : "",
             B, N, causal);
    tu_assert_close(y, want, n, MOD_ATOL, RTOL, what);
    tu_guarded_free(y);
    free(x); free(xd); free(want); free(Wd); free(bd); free(Wod); free(bod);
    free_weights(&w);
}

START_TEST(modules_vs_ref)
{
    wbcl_context *ctx = tu_context();
    tu_rng rng;
    tu_rng_seed(&rng, 21);
    const size_t Ns[] = {1, 13, 37};
    for (int vi = 0; vi < 2; vi++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[vi]), WBCL_SUCCESS);
        for (size_t ni = 0; ni < 3; ni++)
            for (int causal = 0; causal < 2; causal++) {
                size_t N = Ns[ni], B = ni == 1 ? 2 : 1;
                check_module(ctx, &rng, 0, 24, 12, 0, 0, B, N, causal); /* heads 12, p = 2 */
                check_module(ctx, &rng, 0, 48, 1, 0, 0, B, N, causal);  /* heads 1, p = 48 */
                check_module(ctx, &rng, 1, 24, 12, 2, 0, B, N, causal); /* MSSA heads 12 */
                check_module(ctx, &rng, 1, 24, 3, 5, 0, B, N, causal);  /* inner 15 != d */
                check_module(ctx, &rng, 1, 16, 1, 16, 1, B, N, causal); /* identity output */
            }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* Causal: the output on a prefix x[:, :n] equals the first n rows of the output on x. */
START_TEST(causal_prefix)
{
    wbcl_context *ctx = tu_context();
    tu_rng rng;
    tu_rng_seed(&rng, 31);
    const size_t B = 2, N = 41, d = 20;
    const size_t prefixes[] = {1, 4, 17, 32, 33};
    for (int vi = 0; vi < 2; vi++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[vi]), WBCL_SUCCESS);
        for (int mssa = 0; mssa < 2; mssa++) {
            weights w;
            make_weights(&rng, &w, d, 4, 5, mssa);
            float *x = tu_random_f32(&rng, B * N * d, -1, 1);
            float *full = module_forward(ctx, &w, mssa, 1, 0, B, N, x, 1);
            for (size_t pi = 0; pi < sizeof prefixes / sizeof prefixes[0]; pi++) {
                size_t n = prefixes[pi];
                float *xp = malloc(B * n * d * sizeof *xp);
                for (size_t b = 0; b < B; b++) memcpy(xp + b * n * d, x + b * N * d, n * d * sizeof *xp);
                float *yp = module_forward(ctx, &w, mssa, 1, 0, B, n, xp, 1);
                double *want = malloc(B * n * d * sizeof *want);
                for (size_t b = 0; b < B; b++)
                    for (size_t i = 0; i < n * d; i++) want[b * n * d + i] = full[b * N * d + i];
                /* same arithmetic on the same rows (masked keys contribute exact zeros): 1 ulp-ish */
                char what[96];
                snprintf(what, sizeof what, "%s causal prefix n=%zu (%s)", mssa ? "mssa" : "mha", n,
                         vname(variants[vi]));
                tu_assert_close(yp, want, B * n * d, 1e-6, 1e-6, what);
                /* and a non-causal module would differ: the property can fail */
                free(xp); free(want);
                tu_guarded_free(yp);
            }
            float *nc = module_forward(ctx, &w, mssa, 0, 0, B, N, x, 1);
            double diff = 0;
            for (size_t i = 0; i < d; i++) diff = fmax(diff, fabs((double)nc[i] - full[i])); /* row 0 of batch 0 */
            ck_assert_msg(diff > 1e-3, "non-causal row 0 should differ from causal row 0 (diff %g)", diff);
            tu_guarded_free(nc);
            tu_guarded_free(full);
            free(x);
            free_weights(&w);
        }
    }
    wbcl_context_destroy(ctx);
}
END_TEST

/* Decoding token t with the cache equals row t of the causal forward; the cache grows (doubling)
 * from capacity 3; reset starts over. Also with the identity output and a non-causal module. */
START_TEST(decode_equals_batch)
{
    wbcl_context *ctx = tu_context();
    tu_rng rng;
    tu_rng_seed(&rng, 41);
    for (int vi = 0; vi < 2; vi++) {
        ck_assert_int_eq(wbcl_context_set_variant(ctx, variants[vi]), WBCL_SUCCESS);
        for (int identity = 0; identity < 2; identity++) {
            const size_t B = 2, N = 37, d = identity ? 16 : 24, heads = identity ? 1 : 4, dh = identity ? 16 : 5;
            weights w;
            make_weights(&rng, &w, d, heads, dh, 1);
            float *x = tu_random_f32(&rng, B * N * d, -1, 1);
            float *full = module_forward(ctx, &w, 1, 1, identity, B, N, x, 1);
            for (int mod_causal = 0; mod_causal < 2; mod_causal++) {
                wbcl_mssa *m = NULL;
                ck_assert_int_eq(wbcl_mssa_create(ctx, d, heads, dh, mod_causal, w.Wqkv, identity ? NULL : w.Wo,
                                                  identity ? NULL : w.bo, &m),
                                 WBCL_SUCCESS);
                wbcl_mssa_cache *c = NULL;
                ck_assert_int_eq(wbcl_mssa_cache_create(ctx, m, B, 3, &c), WBCL_SUCCESS);
                size_t sx[2] = {B, d}, sx3[3] = {B, 1, d};
                float *xt = malloc(B * d * sizeof *xt);
                for (int pass = 0; pass < 2; pass++) {
                    size_t steps = pass ? 5 : N;
                    for (size_t t = 0; t < steps; t++) {
                        for (size_t b = 0; b < B; b++) memcpy(xt + b * d, x + (b * N + t) * d, d * sizeof *xt);
                        int three = t % 2;
                        wbcl_tensor *tx = three ? mk(ctx, 3, sx3, xt) : mk(ctx, 2, sx, xt);
                        wbcl_tensor *ty = three ? mk(ctx, 3, sx3, NULL) : mk(ctx, 2, sx, NULL);
                        wbcl_status st = wbcl_mssa_decode_step(ctx, c, tx, ty);
                        ck_assert_msg(st == WBCL_SUCCESS, "%s", wbcl_context_last_error(ctx));
                        ck_assert_uint_eq(wbcl_mssa_cache_length(c), t + 1);
                        float *yt = rd(ctx, ty);
                        double want[64];
                        for (size_t b = 0; b < B; b++) {
                            for (size_t i = 0; i < d; i++) want[i] = full[(b * N + t) * d + i];
                            char what[96];
                            snprintf(what, sizeof what, "decode t=%zu b=%zu (%s, identity %d, module causal %d)", t, b,
                                     vname(variants[vi]), identity, mod_causal);
                            tu_assert_close(yt + b * d, want, d, 1e-6, 1e-6, what);
                        }
                        tu_guarded_free(yt);
                        wbcl_tensor_destroy(tx);
                        wbcl_tensor_destroy(ty);
                    }
                    if (!pass) {
                        ck_assert_uint_ge(wbcl_mssa_cache_capacity(c), N);
                        wbcl_mssa_cache_reset(c);
                        ck_assert_uint_eq(wbcl_mssa_cache_length(c), 0);
                    }
                }
                free(xt);
                wbcl_mssa_cache_destroy(c);
                wbcl_mssa_destroy(m);
            }
            tu_guarded_free(full);
            free(x);
            free_weights(&w);
        }
    }
    wbcl_mssa_cache_destroy(NULL);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- safetensors loading -------------------------------------------------------------------------- */
static void put(const char **names, wbcl_array *arrs, const wbcl_array **ptrs, size_t *n, const char *name,
                const float *data, int ndim, size_t r, size_t c)
{
    size_t shape[2] = {r, c};
    wbcl_array *a = &arrs[*n];
    ck_assert_int_eq(wbcl_array_alloc(a, WBCL_ELEM_F32, ndim, shape, NULL, 0), WBCL_SUCCESS);
    memcpy(a->data, data, a->nbytes);
    names[*n] = name;
    ptrs[*n] = a;
    (*n)++;
}

static void write_st(const char *path, size_t n, const char **names, const wbcl_array **ptrs)
{
    char err[512];
    wbcl_status st = wbcl_safetensors_write(path, n, names, ptrs, 0, NULL, NULL, err, sizeof err);
    ck_assert_msg(st == WBCL_SUCCESS, "%s", err);
}

static wbcl_safetensors *open_st(const char *path)
{
    char err[512];
    wbcl_safetensors *st = NULL;
    ck_assert_msg(wbcl_safetensors_open(path, &st, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    return st;
}

START_TEST(load_safetensors)
{
    wbcl_context *ctx = tu_context();
    tu_rng rng;
    tu_rng_seed(&rng, 51);
    const size_t d = 24, heads = 12, B = 1, N = 9;
    char path[256];
    snprintf(path, sizeof path, "/tmp/wbcl_test_attention_%ld.safetensors", (long)getpid());
    float *x = tu_random_f32(&rng, B * N * d, -1, 1);
    size_t sx[3] = {B, N, d};
    wbcl_tensor *tx = mk(ctx, 3, sx, x), *ty = mk(ctx, 3, sx, NULL);

    /* MHA, prefix and "module." stripping, with and without qkv.bias */
    weights w;
    make_weights(&rng, &w, d, heads, 0, 0);
    wbcl_array arrs[8];
    const wbcl_array *ptrs[8];
    const char *names[8];
    size_t n = 0;
    put(names, arrs, ptrs, &n, "module.blocks.0.attn.qkv.weight", w.Wqkv, 2, 3 * d, d);
    put(names, arrs, ptrs, &n, "module.blocks.0.attn.qkv.bias", w.bqkv, 1, 3 * d, 0);
    put(names, arrs, ptrs, &n, "module.blocks.0.attn.proj.weight", w.Wo, 2, d, d);
    put(names, arrs, ptrs, &n, "module.blocks.0.attn.proj.bias", w.bo, 1, d, 0);
    put(names, arrs, ptrs, &n, "blocks.1.attn.qkv.weight", w.Wqkv, 2, 3 * d, d);            /* no qkv.bias */
    put(names, arrs, ptrs, &n, "blocks.1.attn.proj.weight", w.Wqkv, 2, 3 * d, d);           /* wrong shape */
    put(names, arrs, ptrs, &n, "blocks.2.attn.qkv.weight", w.Wqkv, 2, 3 * d, d);            /* no proj */
    write_st(path, n, names, ptrs);
    wbcl_safetensors *st = open_st(path);
    wbcl_mha *m = NULL;
    ck_assert_int_eq(wbcl_mha_load(ctx, st, path, "blocks.0.attn.", d, heads, 0, &m), WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_mha_dim(m), d);
    ck_assert_uint_eq(wbcl_mha_heads(m), heads);
    ck_assert_int_eq(wbcl_mha_forward(ctx, m, tx, ty), WBCL_SUCCESS);
    float *y = rd(ctx, ty);
    float *yh = module_forward(ctx, &w, 0, 0, 0, B, N, x, 1);
    for (size_t i = 0; i < B * N * d; i++) ck_assert(y[i] == yh[i]); /* same weights, same kernels */
    tu_guarded_free(y);
    tu_guarded_free(yh);
    wbcl_mha_destroy(m);
    m = (wbcl_mha *)1;
    tu_assert_status(ctx, wbcl_mha_load(ctx, st, path, "blocks.1.attn.", d, heads, 0, &m), WBCL_ERROR_SHAPE,
                     "'blocks.1.attn.proj.weight' has shape (72, 24), expected (24, 24)");
    ck_assert_ptr_null(m);
    tu_assert_status(ctx, wbcl_mha_load(ctx, st, path, "blocks.2.attn.", d, heads, 0, &m), WBCL_ERROR_FORMAT,
                     "missing tensor 'blocks.2.attn.proj.weight'");
    tu_assert_status(ctx, wbcl_mha_load(ctx, st, path, "blocks.3.attn.", d, heads, 0, &m), WBCL_ERROR_FORMAT,
                     "missing tensor 'blocks.3.attn.qkv.weight'");
    tu_assert_status(ctx, wbcl_mha_load(ctx, st, path, "blocks.0.attn.", d, 5, 0, &m), WBCL_ERROR_SHAPE,
                     "heads = 5 does not divide dim = 24");
    tu_assert_status(ctx, wbcl_mha_load(ctx, st, path, "blocks.0.attn.", 25, 5, 0, &m), WBCL_ERROR_SHAPE,
                     "'blocks.0.attn.qkv.weight' has shape (72, 24), expected (75, 25)");
    wbcl_safetensors_close(st);
    for (size_t i = 0; i < n; i++) wbcl_array_free(&arrs[i]);
    free_weights(&w);

    /* MSSA (CRATE keys), identity output allowed only for heads 1, dim_head d */
    make_weights(&rng, &w, d, 4, 5, 1);
    n = 0;
    put(names, arrs, ptrs, &n, "transformer.layers.0.0.fn.qkv.weight", w.Wqkv, 2, w.inner, d);
    put(names, arrs, ptrs, &n, "transformer.layers.0.0.fn.to_out.0.weight", w.Wo, 2, d, w.inner);
    put(names, arrs, ptrs, &n, "transformer.layers.0.0.fn.to_out.0.bias", w.bo, 1, d, 0);
    float *Uid = tu_random_f32(&rng, d * d, -0.2, 0.2);
    put(names, arrs, ptrs, &n, "id.qkv.weight", Uid, 2, d, d); /* heads 1, dim_head d, no to_out */
    put(names, arrs, ptrs, &n, "bad.qkv.weight", w.Wqkv, 2, w.inner, d);
    put(names, arrs, ptrs, &n, "bad.to_out.0.weight", w.Wo, 2, d, w.inner); /* bias missing */
    write_st(path, n, names, ptrs);
    st = open_st(path);
    wbcl_mssa *ms = NULL;
    ck_assert_int_eq(wbcl_mssa_load(ctx, st, path, "transformer.layers.0.0.fn.", d, 4, 5, 1, &ms), WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_mssa_dim_head(ms), 5);
    ck_assert_int_eq(wbcl_mssa_causal(ms), 1);
    ck_assert_int_eq(wbcl_mssa_forward(ctx, ms, tx, ty), WBCL_SUCCESS);
    y = rd(ctx, ty);
    yh = module_forward(ctx, &w, 1, 1, 0, B, N, x, 1);
    for (size_t i = 0; i < B * N * d; i++) ck_assert(y[i] == yh[i]);
    tu_guarded_free(y);
    tu_guarded_free(yh);
    wbcl_mssa_destroy(ms);
    ms = NULL;
    ck_assert_int_eq(wbcl_mssa_load(ctx, st, path, "id.", d, 1, d, 0, &ms), WBCL_SUCCESS);
    wbcl_mssa_destroy(ms);
    tu_assert_status(ctx, wbcl_mssa_load(ctx, st, path, "id.", d, 2, d / 2, 0, &ms), WBCL_ERROR_FORMAT,
                     "missing tensor 'id.to_out.0.weight'");
    tu_assert_status(ctx, wbcl_mssa_load(ctx, st, path, "bad.", d, 4, 5, 0, &ms), WBCL_ERROR_FORMAT,
                     "missing tensor 'bad.to_out.0.bias'");
    tu_assert_status(ctx, wbcl_mssa_load(ctx, st, path, "transformer.layers.0.0.fn.", d, 4, 6, 0, &ms),
                     WBCL_ERROR_SHAPE, "'transformer.layers.0.0.fn.qkv.weight' has shape (20, 24), expected (24, 24)");
    ck_assert_ptr_null(ms);
    wbcl_safetensors_close(st);
    for (size_t i = 0; i < n; i++) wbcl_array_free(&arrs[i]);
    free_weights(&w);
    free(Uid);
    unlink(path);
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(ty);
    free(x);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- wbcl-run attn.softmax / attn.mssa ------------------------------------------------------------ */
static int run_cmd(const char *cmd, char *outbuf, size_t len)
{
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(outbuf, 1, len - 1, f);
    outbuf[n] = 0;
    int rc = pclose(f);
    return rc;
}

START_TEST(cli_modules)
{
    char tool[512];
    snprintf(tool, sizeof tool, "%s/wbcl-run", WBCL_TOOLS_DIR);
    if (access(tool, X_OK) != 0) {
        fprintf(stderr, "cli_modules: %s not built, skipped\n", tool);
        return;
    }
    wbcl_context *ctx = tu_context();
    tu_rng rng;
    tu_rng_seed(&rng, 71);
    const size_t B = 2, N = 11, d = 20;
    char dir[128], xp[192], wp[192], yp[192], bp[192], cmd[2048], out[4096];
    snprintf(dir, sizeof dir, "/tmp/wbcl_test_attention_cli_%ld", (long)getpid());
    ck_assert_int_eq(mkdir_p_simple(dir), 0);
    snprintf(xp, sizeof xp, "%s/x.npy", dir);
    snprintf(wp, sizeof wp, "%s/w.safetensors", dir);
    snprintf(yp, sizeof yp, "%s/y.npy", dir);
    snprintf(bp, sizeof bp, "%s/bad.safetensors", dir);
    float *x = tu_random_f32(&rng, B * N * d, -1, 1);
    size_t sx[3] = {B, N, d};
    ck_assert_int_eq(wbcl_npy_write_f32(xp, 3, sx, x, NULL, 0), WBCL_SUCCESS);
    for (int mssa = 0; mssa < 2; mssa++) {
        weights w;
        make_weights(&rng, &w, d, 4, 5, mssa);
        wbcl_array arrs[4];
        const wbcl_array *ptrs[4];
        const char *names[4];
        size_t n = 0;
        if (mssa) {
            put(names, arrs, ptrs, &n, "qkv.weight", w.Wqkv, 2, w.inner, d);
            put(names, arrs, ptrs, &n, "to_out.0.weight", w.Wo, 2, d, w.inner);
            put(names, arrs, ptrs, &n, "to_out.0.bias", w.bo, 1, d, 0);
        } else {
            put(names, arrs, ptrs, &n, "qkv.weight", w.Wqkv, 2, 3 * d, d);
            put(names, arrs, ptrs, &n, "qkv.bias", w.bqkv, 1, 3 * d, 0);
            put(names, arrs, ptrs, &n, "proj.weight", w.Wo, 2, d, d);
            put(names, arrs, ptrs, &n, "proj.bias", w.bo, 1, d, 0);
        }
        write_st(wp, n, names, ptrs);
        write_st(bp, 1, names, ptrs); /* only qkv.weight */
        for (size_t i = 0; i < n; i++) wbcl_array_free(&arrs[i]);
        const char *mod = mssa ? "attn.mssa" : "attn.softmax";
        const char *params = mssa ? "heads=4 dim_head=5 causal=1" : "heads=4 causal=1";
        snprintf(cmd, sizeof cmd, "'%s' %s --weights '%s' --input '%s' --output '%s' --param %s --verify 2>&1", tool, mod,
                 wp, xp, yp, params);
        int rc = run_cmd(cmd, out, sizeof out);
        ck_assert_msg(rc == 0, "%s failed: %s", mod, out);
        ck_assert_msg(strstr(out, "verify:") && strstr(out, "ok"), "%s: no verify line: %s", mod, out);
        wbcl_array y;
        char err[256];
        ck_assert_int_eq(wbcl_npy_read(yp, &y, err, sizeof err), WBCL_SUCCESS);
        ck_assert_int_eq(y.ndim, 3);
        float *lib = module_forward(ctx, &w, mssa, 1, 0, B, N, x, 1);
        for (size_t i = 0; i < B * N * d; i++) ck_assert(((float *)y.data)[i] == lib[i]); /* same kernels */
        wbcl_array_free(&y);
        tu_guarded_free(lib);
        /* a missing key is named; heads not dividing d is refused; the output is left alone */
        unlink(yp);
        snprintf(cmd, sizeof cmd, "'%s' %s --weights '%s' --input '%s' --output '%s' --param %s 2>&1", tool, mod, bp,
                 xp, yp, params);
        rc = run_cmd(cmd, out, sizeof out);
        ck_assert_msg(rc != 0 && strstr(out, mssa ? "missing tensor 'to_out.0.weight'" : "missing tensor 'proj.weight'"),
                      "%s with missing keys: rc %d, '%s'", mod, rc, out);
        ck_assert_int_ne(access(yp, F_OK), 0);
        snprintf(cmd, sizeof cmd, "'%s' %s --weights '%s' --input '%s' --param heads=3 2>&1", tool, mod, wp, xp);
        rc = run_cmd(cmd, out, sizeof out);
        ck_assert_msg(rc != 0 && strstr(out, mssa ? "heads = 3 does not divide 20, the rows of 'qkv.weight'"
                                                  : "heads = 3 does not divide d = 20"),
                      "%s heads=3: rc %d, '%s'", mod, rc, out);
        free_weights(&w);
        if (!mssa) continue;
        /* attn.mssa without dim_head: p from the weights, qkv.weight (K p, d) with K p = 10 != d
         * (the old default p = d / K = 10 would have been refused); the same kernels as the library */
        make_weights(&rng, &w, d, 2, 5, 1);
        n = 0;
        put(names, arrs, ptrs, &n, "qkv.weight", w.Wqkv, 2, w.inner, d);
        put(names, arrs, ptrs, &n, "to_out.0.weight", w.Wo, 2, d, w.inner);
        put(names, arrs, ptrs, &n, "to_out.0.bias", w.bo, 1, d, 0);
        write_st(wp, n, names, ptrs);
        for (size_t i = 0; i < n; i++) wbcl_array_free(&arrs[i]);
        snprintf(cmd, sizeof cmd, "'%s' attn.mssa --weights '%s' --input '%s' --output '%s' --param heads=2 causal=1 2>&1",
                 tool, wp, xp, yp);
        rc = run_cmd(cmd, out, sizeof out);
        ck_assert_msg(rc == 0, "attn.mssa without dim_head failed: %s", out);
        ck_assert_int_eq(wbcl_npy_read(yp, &y, err, sizeof err), WBCL_SUCCESS);
        lib = module_forward(ctx, &w, 1, 1, 0, B, N, x, 1);
        for (size_t i = 0; i < B * N * d; i++) ck_assert(((float *)y.data)[i] == lib[i]);
        wbcl_array_free(&y);
        tu_guarded_free(lib);
        free_weights(&w);
    }
    unlink(xp); unlink(wp); unlink(bp); unlink(yp);
    rmdir(dir);
    free(x);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- bad input ----------------------------------------------------------------------------------- */
static void assert_untouched(wbcl_context *ctx, const wbcl_tensor *t, float sentinel)
{
    float *h = rd(ctx, t);
    for (size_t i = 0; i < wbcl_tensor_numel(t); i++) ck_assert_msg(h[i] == sentinel, "output was modified");
    tu_guarded_free(h);
}

START_TEST(bad_input)
{
    wbcl_context *ctx = tu_context();
    const float S = 12345.0f;
    size_t s4[4] = {1, 2, 5, 2}, s4k[4] = {1, 2, 7, 2}, s4b[4] = {1, 3, 5, 2}, s3[3] = {2, 5, 2};
    wbcl_tensor *q = mk(ctx, 4, s4, NULL), *k = mk(ctx, 4, s4k, NULL), *v = mk(ctx, 4, s4k, NULL),
                *o = mk(ctx, 4, s4, NULL), *ob = mk(ctx, 4, s4b, NULL), *t3 = mk(ctx, 3, s3, NULL);
    ck_assert_int_eq(wbcl_tensor_fill(ctx, o, S), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_attention_softmax_heads(ctx, NULL, k, v, 1.0f, 0, o), WBCL_ERROR_INVALID_ARGUMENT, "tensor 'q' is NULL");
    tu_assert_status(ctx, wbcl_attention_softmax_heads(ctx, q, k, NULL, 1.0f, 0, o), WBCL_ERROR_INVALID_ARGUMENT, "tensor 'v' is NULL");
    tu_assert_status(ctx, wbcl_attention_softmax_heads(ctx, t3, k, v, 1.0f, 0, o), WBCL_ERROR_SHAPE,
                     "'q' must be (B, K, N, p), got (2, 5, 2)");
    tu_assert_status(ctx, wbcl_attention_softmax_heads(ctx, q, k, q, 1.0f, 0, o), WBCL_ERROR_SHAPE, "'k' has shape");
    tu_assert_status(ctx, wbcl_attention_softmax_heads(ctx, q, k, v, 1.0f, 0, ob), WBCL_ERROR_SHAPE, "'o' has shape");
    tu_assert_status(ctx, wbcl_attention_softmax_heads(ctx, o, k, v, 1.0f, 0, o), WBCL_ERROR_INVALID_ARGUMENT,
                     "'o' must not be the same tensor as 'q'");
    tu_assert_status(ctx, wbcl_attention_softmax_heads(ctx, q, k, v, NAN, 0, o), WBCL_ERROR_INVALID_ARGUMENT,
                     "scale must be finite");
    tu_assert_status(ctx, wbcl_attention_softmax_heads(ctx, q, k, v, INFINITY, 1, o), WBCL_ERROR_INVALID_ARGUMENT,
                     "scale");
    /* causal with more queries than keys */
    tu_assert_status(ctx, wbcl_attention_softmax_heads(ctx, k, q, q, 1.0f, 1, v), WBCL_ERROR_SHAPE, "n_q <= n_k");
    tu_assert_status(ctx, wbcl_attention_mssa_heads(ctx, q, 1.0f, 0, q), WBCL_ERROR_INVALID_ARGUMENT, "must not");
    tu_assert_status(ctx, wbcl_attention_mssa_heads(ctx, q, 1.0f, 0, ob), WBCL_ERROR_SHAPE, "'o' has shape");
    tu_assert_status(ctx, wbcl_attention_mssa_heads(ctx, t3, 1.0f, 0, o), WBCL_ERROR_SHAPE, "'w' must be");
    assert_untouched(ctx, o, S);

    /* strided: out of bounds, NULL desc */
    wbcl_attention_desc d;
    memset(&d, 0, sizeof d);
    d.batch = 1; d.heads = 2; d.n_q = 5; d.n_k = 5; d.p = 2; d.scale = 1.0f;
    d.sb_q = d.sb_k = d.sb_v = d.sb_o = 20;
    d.sh_q = d.sh_k = d.sh_v = d.sh_o = 10;
    d.sn_q = d.sn_k = d.sn_v = d.sn_o = 2;
    ck_assert_int_eq(wbcl_attention_softmax_strided(ctx, &d, q, q, q, o), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_fill(ctx, o, S), WBCL_SUCCESS);
    d.off_v = 1;
    tu_assert_status(ctx, wbcl_attention_softmax_strided(ctx, &d, q, q, q, o), WBCL_ERROR_SHAPE,
                     "'v' is out of bounds: element 20 is touched");
    d.off_v = 0;
    d.sn_o = 3;
    tu_assert_status(ctx, wbcl_attention_softmax_strided(ctx, &d, q, q, q, o), WBCL_ERROR_SHAPE, "'o' is out of bounds");
    d.sn_o = 2;
    d.p = 0;
    tu_assert_status(ctx, wbcl_attention_softmax_strided(ctx, &d, q, q, q, o), WBCL_ERROR_SHAPE, "empty problem");
    tu_assert_status(ctx, wbcl_attention_softmax_strided(ctx, NULL, q, q, q, o), WBCL_ERROR_INVALID_ARGUMENT,
                     "desc is NULL");
    assert_untouched(ctx, o, S);

    /* tensors of another context */
    wbcl_context *ctx2 = tu_context();
    wbcl_tensor *q2 = mk(ctx2, 4, s4, NULL);
    wbcl_status st = wbcl_attention_softmax_heads(ctx, q2, k, v, 1.0f, 0, o);
    ck_assert_int_eq(st, WBCL_ERROR_CONTEXT_MISMATCH);
    ck_assert_int_eq(wbcl_attention_mssa_heads(ctx, q2, 1.0f, 0, o), WBCL_ERROR_CONTEXT_MISMATCH);
    assert_untouched(ctx, o, S);

    /* modules: config, NULLs, shapes, contexts */
    tu_rng rng;
    tu_rng_seed(&rng, 61);
    weights w;
    make_weights(&rng, &w, 24, 4, 6, 0);
    wbcl_mha *m = (wbcl_mha *)1;
    tu_assert_status(ctx, wbcl_mha_create(ctx, 24, 5, 0, w.Wqkv, w.bqkv, w.Wo, w.bo, &m), WBCL_ERROR_SHAPE,
                     "heads = 5 does not divide dim = 24");
    ck_assert_ptr_null(m);
    tu_assert_status(ctx, wbcl_mha_create(ctx, 24, 0, 0, w.Wqkv, w.bqkv, w.Wo, w.bo, &m), WBCL_ERROR_SHAPE, "heads");
    tu_assert_status(ctx, wbcl_mha_create(ctx, 24, 4, 0, w.Wqkv, w.bqkv, NULL, w.bo, &m), WBCL_ERROR_INVALID_ARGUMENT,
                     "proj_weight");
    ck_assert_int_eq(wbcl_mha_create(ctx, 24, 4, 0, w.Wqkv, NULL, w.Wo, w.bo, &m), WBCL_SUCCESS);
    size_t sx[3] = {2, 5, 24}, sxb[3] = {2, 5, 23}, sx2[2] = {5, 24};
    wbcl_tensor *x = mk(ctx, 3, sx, NULL), *y = mk(ctx, 3, sx, NULL), *xb = mk(ctx, 3, sxb, NULL),
                *y2 = mk(ctx, 2, sx2, NULL), *x2 = mk(ctx2, 3, sx, NULL);
    ck_assert_int_eq(wbcl_tensor_fill(ctx, y, S), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_mha_forward(ctx, m, xb, y), WBCL_ERROR_SHAPE, "'x' must be (N, 24) or (B, N, 24)");
    tu_assert_status(ctx, wbcl_mha_forward(ctx, m, x, y2), WBCL_ERROR_SHAPE, "'y' has shape");
    tu_assert_status(ctx, wbcl_mha_forward(ctx, m, x, x), WBCL_ERROR_INVALID_ARGUMENT, "must not");
    tu_assert_status(ctx, wbcl_mha_forward(ctx, NULL, x, y), WBCL_ERROR_INVALID_ARGUMENT, "module is NULL");
    ck_assert_int_eq(wbcl_mha_forward(ctx, m, x2, y), WBCL_ERROR_CONTEXT_MISMATCH);
    ck_assert_int_eq(wbcl_mha_forward(ctx2, m, x2, x2), WBCL_ERROR_CONTEXT_MISMATCH); /* module of ctx */
    wbcl_tensor *y3 = mk(ctx2, 3, sx, NULL);
    ck_assert_int_eq(wbcl_mha_forward(ctx2, m, x2, y3), WBCL_ERROR_CONTEXT_MISMATCH);
    assert_untouched(ctx, y, S);
    wbcl_mha_destroy(m);
    wbcl_mha_destroy(NULL);
    free_weights(&w);

    make_weights(&rng, &w, 24, 4, 6, 1);
    wbcl_mssa *ms = (wbcl_mssa *)1;
    tu_assert_status(ctx, wbcl_mssa_create(ctx, 24, 4, 0, 0, w.Wqkv, w.Wo, w.bo, &ms), WBCL_ERROR_SHAPE, "dim_head");
    ck_assert_ptr_null(ms);
    tu_assert_status(ctx, wbcl_mssa_create(ctx, 24, 4, 6, 0, w.Wqkv, NULL, NULL, &ms), WBCL_ERROR_INVALID_ARGUMENT,
                     "only when heads == 1 and dim_head == dim");
    tu_assert_status(ctx, wbcl_mssa_create(ctx, 24, 4, 6, 0, w.Wqkv, w.Wo, NULL, &ms), WBCL_ERROR_INVALID_ARGUMENT,
                     "out_bias");
    ck_assert_int_eq(wbcl_mssa_create(ctx, 24, 4, 6, 1, w.Wqkv, w.Wo, w.bo, &ms), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_mssa_forward(ctx, ms, xb, y), WBCL_ERROR_SHAPE, "'x' must be");
    tu_assert_status(ctx, wbcl_mssa_forward(ctx, ms, x, x), WBCL_ERROR_INVALID_ARGUMENT, "must not");
    wbcl_mssa_cache *c = (wbcl_mssa_cache *)1;
    tu_assert_status(ctx, wbcl_mssa_cache_create(ctx, ms, 0, 0, &c), WBCL_ERROR_SHAPE, "batch");
    ck_assert_ptr_null(c);
    ck_assert_int_eq(wbcl_mssa_cache_create(ctx2, ms, 2, 0, &c), WBCL_ERROR_CONTEXT_MISMATCH);
    ck_assert_int_eq(wbcl_mssa_cache_create(ctx, ms, 2, 0, &c), WBCL_SUCCESS);
    size_t st2[2] = {2, 24}, st3[2] = {3, 24}, st13[3] = {2, 2, 24};
    wbcl_tensor *xt = mk(ctx, 2, st2, NULL), *yt = mk(ctx, 2, st2, NULL), *xt3 = mk(ctx, 2, st3, NULL),
                *xt13 = mk(ctx, 3, st13, NULL);
    ck_assert_int_eq(wbcl_tensor_fill(ctx, yt, S), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_mssa_decode_step(ctx, c, xt3, yt), WBCL_ERROR_SHAPE,
                     "'x_t' must be (2, 24) or (2, 1, 24), got (3, 24)");
    tu_assert_status(ctx, wbcl_mssa_decode_step(ctx, c, xt13, yt), WBCL_ERROR_SHAPE, "(2, 2, 24)");
    tu_assert_status(ctx, wbcl_mssa_decode_step(ctx, c, xt, xt), WBCL_ERROR_INVALID_ARGUMENT, "must not");
    tu_assert_status(ctx, wbcl_mssa_decode_step(ctx, NULL, xt, yt), WBCL_ERROR_INVALID_ARGUMENT, "cache is NULL");
    ck_assert_uint_eq(wbcl_mssa_cache_length(c), 0); /* failed steps do not advance */
    assert_untouched(ctx, yt, S);
    wbcl_mssa_cache_destroy(c);
    wbcl_mssa_destroy(ms);
    wbcl_mssa_destroy(NULL);
    free_weights(&w);

    wbcl_tensor *all[] = {q, k, v, o, ob, t3, x, y, xb, y2, xt, yt, xt3, xt13};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wbcl_tensor_destroy(all[i]);
    wbcl_tensor_destroy(q2);
    wbcl_tensor_destroy(x2);
    wbcl_tensor_destroy(y3);
    wbcl_context_destroy(ctx2);
    wbcl_context_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("attention");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, heads_softmax_vs_ref);
    tcase_add_test(tc, heads_mssa_vs_ref);
    tcase_add_test(tc, cpu_pv_passes_vs_ref);
    tcase_add_test(tc, cpu_wide_rows_vs_ref);
    tcase_add_test(tc, tiled_gpu_vs_ref);
    tcase_add_test(tc, tiled_gpu_p128_vs_ref);
    tcase_add_test(tc, tiled2_gpu_vs_ref);
    tcase_add_test(tc, large_logits);
    tcase_add_test(tc, heads_decode_vs_ref);
    tcase_add_test(tc, modules_vs_ref);
    tcase_add_test(tc, causal_prefix);
    tcase_add_test(tc, decode_equals_batch);
    tcase_add_test(tc, load_safetensors);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, cli_modules);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
