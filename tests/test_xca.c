/* XCA (XCiT cross-covariance attention, include/wbcl/xca.h) against the
 * double reference of host/ref/ref_xca.c; token-permutation equivariance;
 * large logits and a zero channel; the layer with safetensors weights; bad input.
 *
 * Tolerances. The Gram q^T k sums N products of mixed sign: float error
 * <= N u ||q_c|| ||k_e|| at worst (sqrt(N) u typically); after the
 * normalization the logits are temperature * (a number in [-1, 1]) with an
 * absolute error <= temperature * N u (<= 6e-5 for N <= 1000, temperature <= 1);
 * the softmax turns that into a relative error of the weights of the same size,
 * and o = A v adds p u. rtol 2e-4 with atol 1e-5 * max|o| covers this; wrong
 * axes, a missing normalization or the wrong softmax direction are off by O(1). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "wbcl/xca.h"

#define RTOL 2e-4
#define ATOL_REL 1e-5

#define OK(ctx, call)                                                                                 \
    do {                                                                                              \
        wbcl_status s_ = (call);                                                                      \
        ck_assert_msg(s_ == WBCL_SUCCESS, "%s: %s: %s", #call, wbcl_status_name(s_),                 \
                      wbcl_context_last_error(ctx));                                                  \
    } while (0)

static wbcl_tensor *mk(wbcl_context *ctx, int ndim, const size_t *shape, const float *data)
{
    wbcl_tensor *t = NULL;
    wbcl_status st = wbcl_tensor_create(ctx, ndim, shape, WBCL_F32, data, &t);
    ck_assert_msg(st == WBCL_SUCCESS, "tensor_create: %s", wbcl_context_last_error(ctx));
    return t;
}

static float *rd(wbcl_context *ctx, const wbcl_tensor *t)
{
    size_t n = wbcl_tensor_numel(t);
    float *h = tu_guarded_alloc(n);
    wbcl_status st = wbcl_tensor_read(ctx, t, h, n);
    ck_assert_msg(st == WBCL_SUCCESS, "tensor_read: %s", wbcl_context_last_error(ctx));
    ck_assert(tu_canary_ok(h, n));
    return h;
}

static double maxabs(const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

static void close_to(const float *got, const double *want, size_t n, double rtol, const char *what)
{
    double scale = maxabs(want, n);
    tu_assert_close(got, want, n, ATOL_REL * (scale > 0 ? scale : 1.0), rtol, what);
}

typedef struct { size_t B, K, N, p; } shape4;
static const shape4 shapes[] = {
    {1, 1, 1, 1}, {2, 3, 7, 5}, {1, 12, 13, 8}, {2, 4, 257, 17}, {1, 2, 1000, 3}, {1, 12, 31, 64}, {3, 1, 97, 9},
};

static void run_heads(wbcl_context *ctx, const shape4 *s, const float *temp_in, double scale, int zero_channel,
                      double rtol, uint64_t seed)
{
    size_t B = s->B, K = s->K, N = s->N, p = s->p, n = B * K * N * p;
    tu_rng r;
    tu_rng_seed(&r, seed);
    float *q = tu_random_f32(&r, n, -scale, scale), *k = tu_random_f32(&r, n, -scale, scale),
          *v = tu_random_f32(&r, n, -1.0, 1.0), *temp = tu_random_f32(&r, K, 0.3, 1.0);
    if (temp_in)
        for (size_t h = 0; h < K; h++) temp[h] = temp_in[h % 4];
    if (zero_channel)
        for (size_t i = 0; i < B * K * N; i++) q[i * p] = k[i * p + p - 1] = 0.0f;
    double *q64 = tu_to_f64(q, n), *k64 = tu_to_f64(k, n), *v64 = tu_to_f64(v, n), *t64 = tu_to_f64(temp, K),
           *o64 = malloc(n * sizeof *o64);
    wbcl_ref_xca(B, K, N, p, q64, k64, v64, t64, o64);
    size_t sh[4] = {B, K, N, p}, st3[3] = {K, 1, 1};
    wbcl_tensor *tq = mk(ctx, 4, sh, q), *tk = mk(ctx, 4, sh, k), *tv = mk(ctx, 4, sh, v), *to = mk(ctx, 4, sh, NULL),
                *tt = mk(ctx, 3, st3, temp);
    wbcl_status st = wbcl_xca_heads(ctx, tq, tk, tv, tt, to);
    ck_assert_msg(st == WBCL_SUCCESS, "xca: %s", wbcl_context_last_error(ctx));
    float *o = rd(ctx, to);
    for (size_t i = 0; i < n; i++) ck_assert_msg(isfinite(o[i]), "o[%zu] = %g", i, o[i]);
    char what[128];
    snprintf(what, sizeof what, "XCA o (B %zu K %zu N %zu p %zu, temperature %s%s)", B, K, N, p,
             temp_in ? "large" : "~1", zero_channel ? ", zero channels" : "");
    close_to(o, o64, n, rtol, what);
    wbcl_tensor_destroy(tq);
    wbcl_tensor_destroy(tk);
    wbcl_tensor_destroy(tv);
    wbcl_tensor_destroy(to);
    wbcl_tensor_destroy(tt);
    free(q);
    free(k);
    free(v);
    free(temp);
    free(q64);
    free(k64);
    free(v64);
    free(t64);
    free(o64);
    tu_guarded_free(o);
}

START_TEST(xca_matches_reference)
{
    wbcl_context *ctx = tu_context();
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) run_heads(ctx, &shapes[i], NULL, 1.0, 0, RTOL, 10 + i);
    wbcl_context_destroy(ctx);
}
END_TEST

/* temperature up to 1e4 (logits up to 1e4), and channels that are zero on every token
 * (norm clamped to 1e-12: that row of logits is 0, a uniform softmax). The logits'
 * absolute error grows to ~1e4 * N u ~ 1e-2 for N = 13: an absolute tolerance on o. */
static void large_logits_zero_channel(wbcl_context *ctx)
{
    const float big[4] = {1e4f, 1e3f, 5e3f, 1e4f};
    const shape4 s = {2, 3, 13, 6};
    run_heads(ctx, &s, NULL, 1.0, 1, RTOL, 31);
    /* o entries are convex combinations of v in [-1, 1]: compare absolutely, 5e-2 */
    size_t B = s.B, K = s.K, N = s.N, p = s.p, n = B * K * N * p;
    tu_rng r;
    tu_rng_seed(&r, 32);
    float *q = tu_random_f32(&r, n, -1, 1), *k = tu_random_f32(&r, n, -1, 1), *v = tu_random_f32(&r, n, -1, 1),
          temp[3] = {big[0], big[1], big[2]};
    double *q64 = tu_to_f64(q, n), *k64 = tu_to_f64(k, n), *v64 = tu_to_f64(v, n), *t64 = tu_to_f64(temp, K),
           *o64 = malloc(n * sizeof *o64);
    wbcl_ref_xca(B, K, N, p, q64, k64, v64, t64, o64);
    size_t sh[4] = {B, K, N, p}, sk[1] = {K};
    wbcl_tensor *tq = mk(ctx, 4, sh, q), *tk = mk(ctx, 4, sh, k), *tv = mk(ctx, 4, sh, v), *to = mk(ctx, 4, sh, NULL),
                *tt = mk(ctx, 1, sk, temp);
    OK(ctx, wbcl_xca_heads(ctx, tq, tk, tv, tt, to));
    float *o = rd(ctx, to);
    for (size_t i = 0; i < n; i++) ck_assert_msg(isfinite(o[i]), "o[%zu] = %g", i, o[i]);
    tu_assert_close(o, o64, n, 5e-2, 0.0, "XCA with temperature 1e4");
    wbcl_tensor_destroy(tq);
    wbcl_tensor_destroy(tk);
    wbcl_tensor_destroy(tv);
    wbcl_tensor_destroy(to);
    wbcl_tensor_destroy(tt);
    free(q);
    free(k);
    free(v);
    free(q64);
    free(k64);
    free(v64);
    free(t64);
    free(o64);
    tu_guarded_free(o);
}

START_TEST(xca_large_logits_zero_channel)
{
    wbcl_context *ctx = tu_context();
    large_logits_zero_channel(ctx);
    wbcl_context_destroy(ctx);
}
END_TEST

static char *tmp_path(void)
{
    char *p = malloc(256);
    snprintf(p, 256, "/tmp/wbcl_test_xca_%d.safetensors", (int)getpid());
    return p;
}

START_TEST(xca_layer)
{
    wbcl_context *ctx = tu_context();
    const size_t B = 2, N = 29, d = 24, K = 4;
    tu_rng r;
    tu_rng_seed(&r, 41);
    double sc = 1.0 / sqrt((double)d);
    float *Wqkv = tu_random_f32(&r, 3 * d * d, -sc, sc), *bqkv = tu_random_f32(&r, 3 * d, -0.1, 0.1),
          *temp = tu_random_f32(&r, K, 0.5, 1.5), *Wp = tu_random_f32(&r, d * d, -sc, sc),
          *bp = tu_random_f32(&r, d, -0.1, 0.1), *x = tu_random_f32(&r, B * N * d, -1.0, 1.0);
    double *W64 = tu_to_f64(Wqkv, 3 * d * d), *b64 = tu_to_f64(bqkv, 3 * d), *t64 = tu_to_f64(temp, K),
           *Wp64 = tu_to_f64(Wp, d * d), *bp64 = tu_to_f64(bp, d), *x64 = tu_to_f64(x, B * N * d),
           *y64 = malloc(B * N * d * sizeof *y64);
    wbcl_ref_xca_layer(B, N, d, K, x64, W64, b64, t64, Wp64, bp64, y64);
    char *path = tmp_path();
    {
        const char *names[5] = {"blocks.2.attn.qkv.weight", "blocks.2.attn.qkv.bias", "blocks.2.attn.temperature",
                                "blocks.2.attn.proj.weight", "blocks.2.attn.proj.bias"};
        const float *data[5] = {Wqkv, bqkv, temp, Wp, bp};
        const int nd[5] = {2, 1, 3, 2, 1};
        const size_t shp[5][3] = {{3 * d, d}, {3 * d}, {K, 1, 1}, {d, d}, {d}};
        wbcl_array arrs[5];
        const wbcl_array *ptrs[5];
        char err[256];
        for (int i = 0; i < 5; i++) {
            ck_assert_int_eq(wbcl_array_alloc(&arrs[i], WBCL_ELEM_F32, nd[i], shp[i], err, sizeof err), WBCL_SUCCESS);
            memcpy(arrs[i].data, data[i], arrs[i].nbytes);
            ptrs[i] = &arrs[i];
        }
        ck_assert_int_eq(wbcl_safetensors_write(path, 5, names, ptrs, 0, NULL, NULL, err, sizeof err), WBCL_SUCCESS);
        for (int i = 0; i < 5; i++) wbcl_array_free(&arrs[i]);
    }
    wbcl_safetensors *stf = NULL;
    char err[256];
    ck_assert_int_eq(wbcl_safetensors_open(path, &stf, err, sizeof err), WBCL_SUCCESS);
    wbcl_xca_layer *L = NULL, *L2 = NULL;
    OK(ctx, wbcl_xca_layer_load(ctx, stf, path, "blocks.2.attn.", d, K, &L));
    OK(ctx, wbcl_xca_layer_create(ctx, d, K, Wqkv, bqkv, temp, Wp, bp, &L2));
    size_t sh[3] = {B, N, d};
    wbcl_tensor *tx = mk(ctx, 3, sh, x), *ty = mk(ctx, 3, sh, NULL);
    for (int i = 0; i < 2; i++) {
        OK(ctx, wbcl_xca_layer_forward(ctx, i ? L2 : L, tx, ty));
        float *y = rd(ctx, ty);
        close_to(y, y64, B * N * d, RTOL, i ? "XCA layer (create)" : "XCA layer (load)");
        tu_guarded_free(y);
    }
    /* both kernel variants explicitly: the GPU-shaped kernels read q, k, v as strided views of the
     * projection (token stride 3d, head offsets) and write o per head */
    for (int vi = 0; vi < 2; vi++) {
        OK(ctx, wbcl_context_set_variant(ctx, vi ? WBCL_VARIANT_GPU : WBCL_VARIANT_CPU));
        OK(ctx, wbcl_xca_layer_forward(ctx, L2, tx, ty));
        float *y = rd(ctx, ty);
        close_to(y, y64, B * N * d, RTOL, vi ? "XCA layer (GPU variant)" : "XCA layer (CPU variant)");
        tu_guarded_free(y);
    }
    /* permutation equivariance: XCA only uses sums over tokens (the Gram) and acts token-wise */
    {
        float *xp = malloc(B * N * d * sizeof *xp);
        size_t perm[29];
        for (size_t i = 0; i < N; i++) perm[i] = (i * 7 + 3) % N;
        for (size_t b = 0; b < B; b++)
            for (size_t t = 0; t < N; t++) memcpy(xp + (b * N + t) * d, x + (b * N + perm[t]) * d, d * sizeof *x);
        double *want = malloc(B * N * d * sizeof *want);
        for (size_t b = 0; b < B; b++)
            for (size_t t = 0; t < N; t++)
                for (size_t j = 0; j < d; j++) want[(b * N + t) * d + j] = y64[(b * N + perm[t]) * d + j];
        wbcl_tensor *txp = mk(ctx, 3, sh, xp);
        OK(ctx, wbcl_xca_layer_forward(ctx, L, txp, ty));
        float *y = rd(ctx, ty);
        close_to(y, want, B * N * d, RTOL, "XCA layer on permuted tokens");
        tu_guarded_free(y);
        wbcl_tensor_destroy(txp);
        free(xp);
        free(want);
    }
    /* bad input */
    wbcl_xca_layer *bad = (wbcl_xca_layer *)0x1;
    tu_assert_status(ctx, wbcl_xca_layer_load(ctx, stf, path, "blocks.3.attn.", d, K, &bad), WBCL_ERROR_FORMAT,
                     "'blocks.3.attn.qkv.weight'");
    ck_assert_ptr_null(bad);
    tu_assert_status(ctx, wbcl_xca_layer_load(ctx, stf, path, "blocks.2.attn.", d, 5, &bad), WBCL_ERROR_SHAPE,
                     "5 heads do not divide");
    tu_assert_status(ctx, wbcl_xca_layer_load(ctx, stf, path, "blocks.2.attn.", d, 3, &bad), WBCL_ERROR_SHAPE,
                     "'blocks.2.attn.temperature' has shape (4, 1, 1), expected (3, 1, 1)");
    tu_assert_status(ctx, wbcl_xca_layer_forward(ctx, L, tx, tx), WBCL_ERROR_INVALID_ARGUMENT, "must not");
    wbcl_xca_layer_destroy(L);
    wbcl_xca_layer_destroy(L2);
    wbcl_xca_layer_destroy(NULL);
    wbcl_safetensors_close(stf);
    unlink(path);
    free(path);
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(ty);
    free(Wqkv);
    free(bqkv);
    free(temp);
    free(Wp);
    free(bp);
    free(x);
    free(W64);
    free(b64);
    free(t64);
    free(Wp64);
    free(bp64);
    free(x64);
    free(y64);
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(xca_bad_input)
{
    wbcl_context *ctx = tu_context(), *other = tu_context();
    size_t sh[4] = {2, 3, 5, 4}, sh2[4] = {2, 3, 6, 4}, sk[1] = {3}, sk2[1] = {2};
    float ones[120];
    for (int i = 0; i < 120; i++) ones[i] = 1.0f;
    wbcl_tensor *q = mk(ctx, 4, sh, ones), *k = mk(ctx, 4, sh, ones), *v = mk(ctx, 4, sh, ones),
                *o = mk(ctx, 4, sh, ones), *o2 = mk(ctx, 4, sh2, NULL), *t = mk(ctx, 1, sk, ones),
                *t2 = mk(ctx, 1, sk2, ones), *vo = mk(other, 4, sh, NULL);
    tu_assert_status(ctx, wbcl_xca_heads(ctx, NULL, k, v, t, o), WBCL_ERROR_INVALID_ARGUMENT, "NULL");
    tu_assert_status(ctx, wbcl_xca_heads(ctx, q, k, v, t, o2), WBCL_ERROR_SHAPE, "has shape (2, 3, 6, 4)");
    tu_assert_status(ctx, wbcl_xca_heads(ctx, q, k, v, t2, o), WBCL_ERROR_SHAPE, "'temperature' has shape (2)");
    tu_assert_status(ctx, wbcl_xca_heads(ctx, q, k, v, t, v), WBCL_ERROR_INVALID_ARGUMENT, "'o' must not be 'v'");
    tu_assert_status(ctx, wbcl_xca_heads(ctx, q, k, vo, t, o), WBCL_ERROR_CONTEXT_MISMATCH, "'v' belongs to another context");
    float *oh = rd(ctx, o);
    for (int i = 0; i < 120; i++) ck_assert(oh[i] == 1.0f);
    tu_guarded_free(oh);
    wbcl_tensor_destroy(q);
    wbcl_tensor_destroy(k);
    wbcl_tensor_destroy(v);
    wbcl_tensor_destroy(o);
    wbcl_tensor_destroy(o2);
    wbcl_tensor_destroy(t);
    wbcl_tensor_destroy(t2);
    wbcl_tensor_destroy(vo);
    wbcl_context_destroy(ctx);
    wbcl_context_destroy(other);
}
END_TEST

/* The GPU-shaped kernels (cl/xca.cl wbcl_xca_g_*) on every shape above (N = 1, primes, p = 1, 3,
 * 5, 9, 17: not multiples of 4 or of the 64-channel tile; N cut into 1 to 8 token slices by the
 * host), p = 80 (two channel tiles, the second one partial: 64 x 64, 64 x 16, 16 x 64 and 16 x 16
 * Gram tiles), zero channels and large logits. Same tolerances as the CPU variant: the Gram sums
 * the same N products in another order (slices of whole 32-token tiles, then S partials). */
START_TEST(xca_gpu_variant)
{
    wbcl_context *ctx = tu_context();
    OK(ctx, wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU));
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) run_heads(ctx, &shapes[i], NULL, 1.0, 0, RTOL, 77 + i);
    const shape4 wide = {1, 2, 100, 80};
    run_heads(ctx, &wide, NULL, 1.0, 0, RTOL, 90);
    large_logits_zero_channel(ctx);
    wbcl_context_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("xca");
    TCase *tc = tcase_create("xca");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, xca_matches_reference);
    tcase_add_test(tc, xca_large_logits_zero_channel);
    tcase_add_test(tc, xca_layer);
    tcase_add_test(tc, xca_bad_input);
    tcase_add_test(tc, xca_gpu_variant);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
