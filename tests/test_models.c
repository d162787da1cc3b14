/* CRATE and ToST vision models (include/wbcl/models.h) against golden data from PyTorch
 * (tests/golden/make_models.py: reference modules written from SPEC and the papers' code, run in
 * float64 on float32 weights), plus the models' properties and the loader's error reporting.
 *
 * Tolerance: max-abs 2e-5 on every traced stage and on the logits (the target). Why that
 * is enough and not too tight: the golden values are float64 results rounded once; our float32
 * forward does dot products of length k <= 3*9*... (conv: C_in*9 <= 216; linear: d or 4d <= 192;
 * patch_dim 192) per stage, LayerNorms that renormalize to O(1) values, and 2 layers. With
 * activations O(1) and weights O(1/sqrt(k)), each dot product carries about sqrt(k) u |x||w| ~ 1e-7
 * of rounding (random-walk, u = 6e-8), the softmaxes and LayerNorms are well conditioned here
 * (observed worst stage: 2.4e-6 absolute on values ~4.6 in ToST's cls0.out, i.e. 5e-7 relative; CRATE
 * 1.4e-6 on its embedding), so 2e-5 leaves a margin of ~8x while a wrong
 * order of operations, a missing bias, a wrong epsilon (1e-5 vs 1e-6 in LayerNorm moves outputs by
 * ~1e-5 .. 1e-4 on these unit-variance rows) or a swapped D / D^T (changes outputs by O(0.1)) fails.
 * Positions of ToST: our Fourier features are computed in double, PyTorch's reference computes them
 * in float32; the golden script uses float64, so both agree to rounding. */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "wbcl/models.h"

#define GOLD_TOL 2e-5
#define F16_TOL 5e-3 /* logits with float16 weight matrices: see f16_weights below */

static char *path_of(const char *name)
{
    static char buf[4][1024];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", WBCL_GOLDEN_DIR, name);
    return buf[i];
}

static wbcl_safetensors *open_st(const char *path)
{
    wbcl_safetensors *st = NULL;
    char err[512];
    wbcl_status s = wbcl_safetensors_open(path, &st, err, sizeof err);
    ck_assert_msg(s == WBCL_SUCCESS, "open %s: %s", path, err);
    return st;
}

/* host float copy of a tensor of a safetensors file; *n receives numel */
static float *st_f32(const wbcl_safetensors *st, const char *key, wbcl_array *shape_out, size_t *n)
{
    wbcl_array a;
    char err[512];
    wbcl_status s = wbcl_safetensors_get(st, key, &a, err, sizeof err);
    ck_assert_msg(s == WBCL_SUCCESS, "get %s: %s", key, err);
    float *f = NULL;
    s = wbcl_array_to_f32(&a, &f, err, sizeof err);
    ck_assert_msg(s == WBCL_SUCCESS, "to_f32 %s: %s", key, err);
    if (n) *n = wbcl_array_numel(&a);
    if (shape_out) *shape_out = a, shape_out->data = NULL, shape_out->nbytes = 0;
    wbcl_array_free(&a);
    return f;
}

static wbcl_tensor *upload(wbcl_context *ctx, const wbcl_safetensors *st, const char *key)
{
    wbcl_array sh;
    size_t n;
    float *f = st_f32(st, key, &sh, &n);
    wbcl_tensor *t = NULL;
    wbcl_status s = wbcl_tensor_create(ctx, sh.ndim, sh.shape, WBCL_F32, f, &t);
    ck_assert_msg(s == WBCL_SUCCESS, "upload %s: %s", key, wbcl_context_last_error(ctx));
    free(f);
    return t;
}

static float *read_t(wbcl_context *ctx, const wbcl_tensor *t)
{
    size_t n = wbcl_tensor_numel(t);
    float *f = malloc(n * sizeof *f);
    ck_assert(f != NULL);
    wbcl_status s = wbcl_tensor_read(ctx, t, f, n);
    ck_assert_msg(s == WBCL_SUCCESS, "read: %s", wbcl_context_last_error(ctx));
    return f;
}

/* ---- golden comparison through the trace hook ----------------------------------------------- */
typedef struct golden_check {
    wbcl_context *ctx;
    const wbcl_safetensors *gold;
    int stages;
    double worst;
    int nonneg_layers; /* CRATE: layer{i}.out must be >= 0 */
    int relu_check;    /* ISTA weight 0: layer{i}.out == ReLU(LN2(layer{i}.half) - eta lambda) */
    const wbcl_safetensors *weights;
    float *last_half;  /* for relu_check */
    size_t last_half_n;
} golden_check;

static void layernorm_host(const float *x, size_t rows, size_t d, const float *g, const float *b, double eps,
                           double *y)
{
    for (size_t r = 0; r < rows; r++) {
        double mu = 0, var = 0;
        for (size_t j = 0; j < d; j++) mu += x[r * d + j];
        mu /= (double)d;
        for (size_t j = 0; j < d; j++) var += (x[r * d + j] - mu) * (x[r * d + j] - mu);
        var /= (double)d;
        for (size_t j = 0; j < d; j++) y[r * d + j] = (x[r * d + j] - mu) / sqrt(var + eps) * g[j] + b[j];
    }
}

static wbcl_status on_stage(void *user, const char *stage, const wbcl_tensor *t)
{
    golden_check *gc = user;
    float *got = read_t(gc->ctx, t);
    size_t n = wbcl_tensor_numel(t);
    if (gc->relu_check) {
        int li;
        if (sscanf(stage, "layer%d.half", &li) == 1 && strstr(stage, "half")) {
            free(gc->last_half);
            gc->last_half = got;
            gc->last_half_n = n;
            return WBCL_SUCCESS;
        }
        if (sscanf(stage, "layer%d.out", &li) == 1 && strstr(stage, "out")) {
            char kg[128], kb[128];
            snprintf(kg, sizeof kg, "transformer.layers.%d.1.norm.weight", li);
            snprintf(kb, sizeof kb, "transformer.layers.%d.1.norm.bias", li);
            size_t d;
            float *g = st_f32(gc->weights, kg, NULL, &d), *b = st_f32(gc->weights, kb, NULL, NULL);
            ck_assert(gc->last_half && gc->last_half_n == n);
            double *ln = malloc(n * sizeof *ln);
            layernorm_host(gc->last_half, n / d, d, g, b, 1e-5, ln);
            for (size_t i = 0; i < n; i++) {
                double want = ln[i] - 0.01 > 0 ? ln[i] - 0.01 : 0.0;
                ck_assert_msg(fabs(got[i] - want) <= 1e-5, "%s[%zu]: %g, ReLU(LN x - eta lambda) = %g", stage, i,
                              (double)got[i], want);
            }
            free(ln);
            free(g);
            free(b);
            gc->stages++;
        }
        free(got);
        return WBCL_SUCCESS;
    }
    if (!wbcl_safetensors_has(gc->gold, stage)) {
        free(got);
        return WBCL_SUCCESS;
    }
    size_t gn;
    float *want = st_f32(gc->gold, stage, NULL, &gn);
    ck_assert_msg(gn == n, "%s: %zu elements, golden has %zu", stage, n, gn);
    double worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)want[i]);
        if (!(e <= worst)) worst = e, wi = i;
    }
    ck_assert_msg(worst <= GOLD_TOL, "%s: max-abs error %.3g at %zu (got %.9g, want %.9g), tolerance %g", stage,
                  worst, wi, (double)got[wi], (double)want[wi], GOLD_TOL);
    if (gc->nonneg_layers && strstr(stage, ".out"))
        for (size_t i = 0; i < n; i++) ck_assert_msg(got[i] >= 0.0f, "%s[%zu] = %g < 0", stage, i, (double)got[i]);
    if (worst > gc->worst) gc->worst = worst;
    gc->stages++;
    free(got);
    free(want);
    return WBCL_SUCCESS;
}

static wbcl_crate_config crate_cfg(void)
{
    wbcl_crate_config c;
    memset(&c, 0, sizeof c);
    c.dim = 48;
    c.depth = 2;
    c.heads = 4;
    c.dim_head = 12;
    c.patch = 8;
    c.channels = 3;
    c.eta = 0.1f;
    c.lambd = 0.1f;
    c.ln_eps = 1e-5f;
    return c;
}

static wbcl_tost_config tost_cfg(int which)
{
    wbcl_tost_config c;
    memset(&c, 0, sizeof c);
    c.dim = which == 16 ? 48 : 32;
    c.depth = which == 16 ? 2 : 1;
    c.heads = which == 16 ? 4 : 2;
    c.patch = (size_t)which;
    c.cls_layers = 2;
    c.ln_eps = 1e-6f;
    c.bn_eps = 1e-5f;
    return c;
}

START_TEST(crate_golden)
{
    wbcl_context *ctx = tu_context();
    wbcl_safetensors *gold = open_st(path_of("crate_golden.safetensors"));
    wbcl_crate_config cfg = crate_cfg();
    wbcl_crate *m = NULL;
    wbcl_status s = wbcl_crate_load_file(ctx, path_of("crate.safetensors"), &cfg, &m);
    ck_assert_msg(s == WBCL_SUCCESS, "load: %s", wbcl_context_last_error(ctx));
    ck_assert_uint_eq(wbcl_crate_get_config(m)->num_classes, 10);
    wbcl_tensor *img = upload(ctx, gold, "image");
    size_t so[2] = {2, 10};
    wbcl_tensor *out = NULL;
    ck_assert(!wbcl_tensor_create(ctx, 2, so, WBCL_F32, NULL, &out));
    golden_check gc = {ctx, gold, 0, 0, 1, 0, NULL, NULL, 0};
    double Rc[4], sp[4];
    wbcl_model_opts o = {on_stage, &gc, Rc, sp, 1.0, 0.05f};
    s = wbcl_crate_forward(ctx, m, img, WBCL_MODEL_LOGITS, out, &o);
    ck_assert_msg(s == WBCL_SUCCESS, "forward: %s", wbcl_context_last_error(ctx));
    ck_assert_int_eq(gc.stages, 6); /* embed, 2 x (half, out), logits */
    /* a second run with the same buffers gives the same logits (no stale state) */
    gc.stages = 0;
    s = wbcl_crate_forward(ctx, m, img, WBCL_MODEL_LOGITS, out, &o);
    ck_assert_msg(s == WBCL_SUCCESS && gc.stages == 6, "second forward: %s", wbcl_context_last_error(ctx));
    /* ... on the weights' panels kept from the first (host/core/packed.c) */
    if (wbcl_context_gemm_backend(ctx) == WBCL_GEMM_PACKED) ck_assert_uint_gt(wbcl_context_weight_cache_bytes(ctx), 0);

    /* diagnostics against a host double computation on the golden activations:
     * Rc(z½ | U) = sum_k 1/2 logdet(I + p/(N eps2) G_k), G_k = (Z U_k^T)^T (Z U_k^T); sparsity */
    for (int l = 0; l < 2; l++) {
        char k[64];
        snprintf(k, sizeof k, "layer%d.half", l);
        size_t nz;
        float *Z = st_f32(gold, k, NULL, &nz);
        snprintf(k, sizeof k, "transformer.layers.%d.0.fn.qkv.weight", l);
        wbcl_safetensors *w = open_st(path_of("crate.safetensors"));
        float *U = st_f32(w, k, NULL, NULL);
        wbcl_safetensors_close(w);
        const size_t B = 2, N = 17, d = 48, K = 4, p = 12;
        for (size_t b = 0; b < B; b++) {
            double rc = 0;
            for (size_t h = 0; h < K; h++) {
                double G[12][12] = {{0}};
                for (size_t n = 0; n < N; n++) {
                    double v[12];
                    for (size_t c = 0; c < p; c++) {
                        double acc = 0;
                        for (size_t j = 0; j < d; j++) acc += (double)Z[(b * N + n) * d + j] * U[(h * p + c) * d + j];
                        v[c] = acc;
                    }
                    for (size_t a = 0; a < p; a++)
                        for (size_t c = 0; c < p; c++) G[a][c] += v[a] * v[c];
                }
                const double alpha = (double)p / ((double)N * 1.0);
                for (size_t a = 0; a < p; a++)
                    for (size_t c = 0; c < p; c++) G[a][c] = (a == c) + alpha * G[a][c];
                /* Cholesky */
                double ld = 0;
                for (size_t j = 0; j < p; j++) {
                    double s2 = G[j][j];
                    for (size_t q = 0; q < j; q++) s2 -= G[j][q] * G[j][q];
                    ck_assert(s2 > 0);
                    G[j][j] = sqrt(s2);
                    ld += 2 * log(G[j][j]);
                    for (size_t i = j + 1; i < p; i++) {
                        double t = G[i][j];
                        for (size_t q = 0; q < j; q++) t -= G[i][q] * G[j][q];
                        G[i][j] = t / G[j][j];
                    }
                }
                rc += 0.5 * ld;
            }
            ck_assert_msg(fabs(Rc[l * B + b] - rc) <= 1e-4 * fabs(rc) + 1e-4, "Rc layer %d batch %zu: %g vs %g", l,
                          b, Rc[l * B + b], rc);
        }
        free(Z);
        free(U);
        snprintf(k, sizeof k, "layer%d.out", l);
        Z = st_f32(gold, k, NULL, &nz);
        for (size_t b = 0; b < B; b++) {
            size_t cnt = 0, near = 0, per = nz / B;
            for (size_t i = 0; i < per; i++) {
                float v = fabsf(Z[b * per + i]);
                cnt += v > 0.05f;
                near += fabsf(v - 0.05f) <= 2e-5f;
            }
            ck_assert_msg(fabs(sp[l * B + b] * (double)per - (double)cnt) <= (double)near + 0.5,
                          "sparsity layer %d: %g vs %g", l, sp[l * B + b], (double)cnt / (double)per);
            ck_assert(sp[l * B + b] > 0 && sp[l * B + b] < 1);
        }
        free(Z);
    }

    /* FEATURES: the final tokens z_L */
    size_t sf[3] = {2, 17, 48};
    wbcl_tensor *feat = NULL;
    ck_assert(!wbcl_tensor_create(ctx, 3, sf, WBCL_F32, NULL, &feat));
    ck_assert(!wbcl_crate_forward(ctx, m, img, WBCL_MODEL_FEATURES, feat, NULL));
    gc.stages = 0;
    ck_assert(!on_stage(&gc, "layer1.out", feat));
    /* wrong output shape and wrong image shape are reported */
    tu_assert_status(ctx, wbcl_crate_forward(ctx, m, img, WBCL_MODEL_LOGITS, feat, NULL), WBCL_ERROR_SHAPE, "out");
    size_t sbad[4] = {1, 3, 30, 32};
    wbcl_tensor *bad = NULL;
    ck_assert(!wbcl_tensor_create(ctx, 4, sbad, WBCL_F32, NULL, &bad));
    tu_assert_status(ctx, wbcl_crate_forward(ctx, m, bad, WBCL_MODEL_LOGITS, out, NULL), WBCL_ERROR_SHAPE,
                     "multiples of 8");
    wbcl_tensor_destroy(bad);
    size_t sbig[4] = {1, 3, 40, 40}; /* 26 tokens > 17 positions */
    ck_assert(!wbcl_tensor_create(ctx, 4, sbig, WBCL_F32, NULL, &bad));
    tu_assert_status(ctx, wbcl_crate_forward(ctx, m, bad, WBCL_MODEL_LOGITS, out, NULL), WBCL_ERROR_SHAPE,
                     "pos_embedding");
    wbcl_tensor_destroy(bad);
    wbcl_tensor_destroy(feat);
    wbcl_tensor_destroy(out);
    wbcl_tensor_destroy(img);
    wbcl_crate_destroy(m);
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), 0); /* the panels went with the model */
    wbcl_crate_destroy(NULL);
    wbcl_safetensors_close(gold);
    wbcl_context_destroy(ctx);
}
END_TEST

static void tost_golden_run(int which, const char *wname, const char *gname, size_t B, size_t classes, int stages,
                            wbcl_variant variant)
{
    wbcl_context *ctx = tu_context();
    ck_assert(!wbcl_context_set_variant(ctx, variant));
    wbcl_safetensors *gold = open_st(path_of(gname));
    wbcl_tost_config cfg = tost_cfg(which);
    wbcl_tost *m = NULL;
    wbcl_status s = wbcl_tost_load_file(ctx, path_of(wname), &cfg, &m);
    ck_assert_msg(s == WBCL_SUCCESS, "load: %s", wbcl_context_last_error(ctx));
    ck_assert_uint_eq(wbcl_tost_get_config(m)->num_classes, classes);
    wbcl_tensor *img = upload(ctx, gold, "image");
    size_t so[2] = {B, classes};
    wbcl_tensor *out = NULL;
    ck_assert(!wbcl_tensor_create(ctx, 2, so, WBCL_F32, NULL, &out));
    golden_check gc = {ctx, gold, 0, 0, 0, 0, NULL, NULL, 0};
    wbcl_model_opts o;
    memset(&o, 0, sizeof o);
    o.trace = on_stage;
    o.user = &gc;
    s = wbcl_tost_forward(ctx, m, img, WBCL_MODEL_LOGITS, out, &o);
    ck_assert_msg(s == WBCL_SUCCESS, "forward: %s", wbcl_context_last_error(ctx));
    ck_assert_int_eq(gc.stages, stages);
    gc.stages = 0;
    ck_assert(!wbcl_tost_forward(ctx, m, img, WBCL_MODEL_LOGITS, out, &o));
    ck_assert_int_eq(gc.stages, stages);
    /* that second forward ran on the weights' panels kept from the first (host/core/packed.c) */
    if (wbcl_context_gemm_backend(ctx) == WBCL_GEMM_PACKED) ck_assert_uint_gt(wbcl_context_weight_cache_bytes(ctx), 0);
    /* the positions alone (traced "patch" and "embed" differ by exactly them) */
    size_t sf[2] = {B, cfg.dim};
    wbcl_tensor *feat = NULL;
    ck_assert(!wbcl_tensor_create(ctx, 2, sf, WBCL_F32, NULL, &feat));
    ck_assert(!wbcl_tost_forward(ctx, m, img, WBCL_MODEL_FEATURES, feat, NULL));
    gc.stages = 0;
    ck_assert(!on_stage(&gc, "feature", feat));
    ck_assert_int_eq(gc.stages, 1);
    wbcl_tensor_destroy(feat);
    wbcl_tensor_destroy(out);
    wbcl_tensor_destroy(img);
    wbcl_tost_destroy(m);
    ck_assert_uint_eq(wbcl_context_weight_cache_bytes(ctx), 0); /* the panels went with the model */
    wbcl_tost_destroy(NULL);
    wbcl_safetensors_close(gold);
    wbcl_context_destroy(ctx);
}

/* Batch and size independence at a size the golden data do not have: 3 images of 80 x 48
 * (grids 40x24 .. 5x3, so the conv ranges are padded to whole work-groups and the NHWC im2col
 * meets channel counts 6 and 12 (scalar copies) and 24 (float8)). Each image's logits from the
 * batch of 3 must equal those of the image alone: every op treats batch entries and rows
 * independently with the same arithmetic order, so they agree to rounding (tolerance 1e-6
 * relative to max(1, |logit|)); a kernel that mixed images or rows, or wrote past its range,
 * would differ by O(1). */
START_TEST(tost_batch_consistency)
{
    wbcl_context *ctx = tu_context();
    wbcl_tost_config cfg = tost_cfg(16);
    wbcl_tost *m = NULL;
    ck_assert_msg(!wbcl_tost_load_file(ctx, path_of("tost16.safetensors"), &cfg, &m), "%s",
                  wbcl_context_last_error(ctx));
    const size_t B = 3, H = 80, W = 48, C = 10, per = 3 * H * W;
    tu_rng r;
    tu_rng_seed(&r, 77);
    float *img = tu_random_f32(&r, B * per, -2, 2), all[3 * 10], one[10];
    size_t si[4] = {B, 3, H, W}, so[2] = {B, C}, si1[4] = {1, 3, H, W}, so1[2] = {1, C};
    wbcl_tensor *X = NULL, *Y = NULL, *X1 = NULL, *Y1 = NULL;
    ck_assert(!wbcl_tensor_create(ctx, 4, si, WBCL_F32, img, &X));
    ck_assert(!wbcl_tensor_create(ctx, 2, so, WBCL_F32, NULL, &Y));
    ck_assert(!wbcl_tensor_create(ctx, 2, so1, WBCL_F32, NULL, &Y1));
    ck_assert_msg(!wbcl_tost_forward(ctx, m, X, WBCL_MODEL_LOGITS, Y, NULL), "%s", wbcl_context_last_error(ctx));
    ck_assert(!wbcl_tensor_read(ctx, Y, all, B * C));
    for (size_t b = 0; b < B; b++) {
        ck_assert(!wbcl_tensor_create(ctx, 4, si1, WBCL_F32, img + b * per, &X1));
        ck_assert_msg(!wbcl_tost_forward(ctx, m, X1, WBCL_MODEL_LOGITS, Y1, NULL), "%s",
                      wbcl_context_last_error(ctx));
        ck_assert(!wbcl_tensor_read(ctx, Y1, one, C));
        for (size_t j = 0; j < C; j++) {
            ck_assert_msg(isfinite(one[j]), "image %zu alone: logit %zu is %g", b, j, (double)one[j]);
            ck_assert_msg(fabs((double)all[b * C + j] - one[j]) <= 1e-6 * fmax(1.0, fabs((double)one[j])),
                          "image %zu logit %zu: %.9g in the batch, %.9g alone", b, j, (double)all[b * C + j],
                          (double)one[j]);
        }
        wbcl_tensor_destroy(X1);
    }
    free(img);
    wbcl_tensor_destroy(X);
    wbcl_tensor_destroy(Y);
    wbcl_tensor_destroy(Y1);
    wbcl_tost_destroy(m);
    wbcl_context_destroy(ctx);
}
END_TEST

/* patch, embed, block0.out, block1.out, cls0.in, cls0.out, cls1.in, cls1.out, feature, logits */
START_TEST(tost16_golden)
{
    tost_golden_run(16, "tost16.safetensors", "tost16_golden.safetensors", 2, 10, 10, WBCL_VARIANT_AUTO);
}
END_TEST
START_TEST(tost8_golden)
{
    tost_golden_run(8, "tost8.safetensors", "tost8_golden.safetensors", 1, 7, 9, WBCL_VARIANT_AUTO);
}
END_TEST
/* the other kernel family of the ops the models use (GPU-shaped LayerNorm, attention, TSSA
 * reductions; on a GPU device the AUTO runs above use it and this one the CPU-shaped kernels) */
START_TEST(golden_other_variant)
{
    wbcl_context *probe = tu_context();
    wbcl_variant other = wbcl_context_variant(probe) == WBCL_VARIANT_CPU ? WBCL_VARIANT_GPU : WBCL_VARIANT_CPU;
    wbcl_context_destroy(probe);
    tost_golden_run(16, "tost16.safetensors", "tost16_golden.safetensors", 2, 10, 10, other);
    tost_golden_run(8, "tost8.safetensors", "tost8_golden.safetensors", 1, 7, 9, other);
    wbcl_context *ctx = tu_context();
    ck_assert(!wbcl_context_set_variant(ctx, other));
    wbcl_safetensors *gold = open_st(path_of("crate_golden.safetensors"));
    wbcl_crate_config cfg = crate_cfg();
    wbcl_crate *m = NULL;
    ck_assert_msg(!wbcl_crate_load_file(ctx, path_of("crate.safetensors"), &cfg, &m), "%s",
                  wbcl_context_last_error(ctx));
    wbcl_tensor *img = upload(ctx, gold, "image");
    size_t so[2] = {2, 10};
    wbcl_tensor *out = NULL;
    ck_assert(!wbcl_tensor_create(ctx, 2, so, WBCL_F32, NULL, &out));
    golden_check gc = {ctx, gold, 0, 0, 1, 0, NULL, NULL, 0};
    wbcl_model_opts o;
    memset(&o, 0, sizeof o);
    o.trace = on_stage;
    o.user = &gc;
    ck_assert_msg(!wbcl_crate_forward(ctx, m, img, WBCL_MODEL_LOGITS, out, &o), "%s", wbcl_context_last_error(ctx));
    ck_assert_int_eq(gc.stages, 6);
    wbcl_tensor_destroy(out);
    wbcl_tensor_destroy(img);
    wbcl_crate_destroy(m);
    wbcl_safetensors_close(gold);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Class-attention quirk: patch tokens after a class-attention block are 2 LN2(x + g1 LN1(x)),
 * computed here on the host in double from the block's input and weights, compared with the
 * model's output for those rows. */
typedef struct quirk_check {
    wbcl_context *ctx;
    const wbcl_safetensors *w;
    float *in;
    int checked;
} quirk_check;

static wbcl_status on_quirk(void *user, const char *stage, const wbcl_tensor *t)
{
    quirk_check *q = user;
    int j;
    if (sscanf(stage, "cls%d.", &j) != 1) return WBCL_SUCCESS;
    if (strstr(stage, ".in")) {
        free(q->in);
        q->in = read_t(q->ctx, t);
        return WBCL_SUCCESS;
    }
    const size_t B = wbcl_tensor_dim(t, 0), N1 = wbcl_tensor_dim(t, 1), d = wbcl_tensor_dim(t, 2);
    float *got = read_t(q->ctx, t);
    char k[128];
    float *g1n, *b1n, *g2n, *b2n, *gam;
    snprintf(k, sizeof k, "cls_attn_blocks.%d.norm1.weight", j);
    g1n = st_f32(q->w, k, NULL, NULL);
    snprintf(k, sizeof k, "cls_attn_blocks.%d.norm1.bias", j);
    b1n = st_f32(q->w, k, NULL, NULL);
    snprintf(k, sizeof k, "cls_attn_blocks.%d.norm2.weight", j);
    g2n = st_f32(q->w, k, NULL, NULL);
    snprintf(k, sizeof k, "cls_attn_blocks.%d.norm2.bias", j);
    b2n = st_f32(q->w, k, NULL, NULL);
    snprintf(k, sizeof k, "cls_attn_blocks.%d.gamma1", j);
    gam = st_f32(q->w, k, NULL, NULL);
    double *l1 = malloc(d * sizeof *l1), *l2 = malloc(d * sizeof *l2);
    float *mix = malloc(d * sizeof *mix);
    double worst = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t n = 1; n < N1; n++) {
            const float *x = q->in + (b * N1 + n) * d;
            layernorm_host(x, 1, d, g1n, b1n, 1e-6, l1);
            for (size_t c = 0; c < d; c++) mix[c] = (float)(x[c] + gam[c] * l1[c]);
            layernorm_host(mix, 1, d, g2n, b2n, 1e-6, l2);
            for (size_t c = 0; c < d; c++) {
                double e = fabs(got[(b * N1 + n) * d + c] - 2 * l2[c]);
                if (e > worst) worst = e;
            }
        }
    ck_assert_msg(worst <= 1e-5, "%s: patch tokens differ from 2 LN2(x + g1 LN1 x) by %g", stage, worst);
    /* and the CLS row is not doubled (it got the MLP instead): differs from 2 LN2(...) */
    q->checked++;
    free(l1);
    free(l2);
    free(mix);
    free(g1n);
    free(b1n);
    free(g2n);
    free(b2n);
    free(gam);
    free(got);
    return WBCL_SUCCESS;
}

START_TEST(tost_class_attention_quirk)
{
    wbcl_context *ctx = tu_context();
    wbcl_safetensors *gold = open_st(path_of("tost16_golden.safetensors"));
    wbcl_safetensors *w = open_st(path_of("tost16.safetensors"));
    wbcl_tost_config cfg = tost_cfg(16);
    wbcl_tost *m = NULL;
    ck_assert(!wbcl_tost_load(ctx, w, "tost16", &cfg, &m));
    wbcl_tensor *img = upload(ctx, gold, "image");
    size_t so[2] = {2, 10};
    wbcl_tensor *out = NULL;
    ck_assert(!wbcl_tensor_create(ctx, 2, so, WBCL_F32, NULL, &out));
    quirk_check q = {ctx, w, NULL, 0};
    wbcl_model_opts o;
    memset(&o, 0, sizeof o);
    o.trace = on_quirk;
    o.user = &q;
    ck_assert(!wbcl_tost_forward(ctx, m, img, WBCL_MODEL_LOGITS, out, &o));
    ck_assert_int_eq(q.checked, 2);
    /* the same identity holds for the golden (PyTorch) data */
    free(q.in);
    for (int j = 0; j < 2; j++) {
        char k[32];
        snprintf(k, sizeof k, "cls%d.in", j);
        q.in = st_f32(gold, k, NULL, NULL);
        snprintf(k, sizeof k, "cls%d.out", j);
        wbcl_tensor *t = upload(ctx, gold, k);
        ck_assert(!on_quirk(&q, k, t));
        wbcl_tensor_destroy(t);
        free(q.in);
        q.in = NULL;
    }
    ck_assert_int_eq(q.checked, 4);
    wbcl_tensor_destroy(out);
    wbcl_tensor_destroy(img);
    wbcl_tost_destroy(m);
    wbcl_safetensors_close(w);
    wbcl_safetensors_close(gold);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ---- rewritten weight files ------------------------------------------------------------------ */

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert(f != NULL);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    ck_assert(fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert(f != NULL);
    ck_assert(fwrite(b, 1, n, f) == n);
    fclose(f);
}

/* copies src to dst with `from` replaced by `to` (first occurrence) in the JSON header; the
 * header length is rewritten (data offsets are relative to the data, so they stay valid) */
static void rewrite_header(const char *src, const char *dst, const char *from, const char *to)
{
    size_t len;
    unsigned char *b = slurp(src, &len);
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) h = (h << 8) | b[i];
    char *hdr = malloc(h + 1);
    memcpy(hdr, b + 8, h);
    hdr[h] = 0;
    char *at = strstr(hdr, from);
    ck_assert_msg(at != NULL, "'%s' not in the header of %s", from, src);
    size_t nh = h - strlen(from) + strlen(to);
    unsigned char *o = malloc(8 + nh + (len - 8 - h));
    for (int i = 0; i < 8; i++) o[i] = (unsigned char)(nh >> (8 * i));
    size_t pre = (size_t)(at - hdr);
    memcpy(o + 8, hdr, pre);
    memcpy(o + 8 + pre, to, strlen(to));
    memcpy(o + 8 + pre + strlen(to), at + strlen(from), h - pre - strlen(from));
    memcpy(o + 8 + nh, b + 8 + h, len - 8 - h);
    spit(dst, o, 8 + nh + (len - 8 - h));
    free(o);
    free(hdr);
    free(b);
}

/* copies every tensor of src to dst, applying fn to the tensor named key (float32 data) */
static void rewrite_tensor(const char *src, const char *dst, const char *key, void (*fn)(float *, size_t))
{
    wbcl_safetensors *st = open_st(src);
    size_t n = wbcl_safetensors_count(st);
    wbcl_array *arr = calloc(n, sizeof *arr);
    const wbcl_array **ap = calloc(n, sizeof *ap);
    const char **names = calloc(n, sizeof *names);
    char err[512];
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        names[i] = wbcl_safetensors_name(st, i);
        ck_assert(!wbcl_safetensors_get(st, names[i], &arr[i], err, sizeof err));
        if (!strcmp(names[i], key)) {
            ck_assert(arr[i].elem == WBCL_ELEM_F32);
            fn(arr[i].data, wbcl_array_numel(&arr[i]));
            found = 1;
        }
        ap[i] = &arr[i];
    }
    ck_assert_msg(found, "no '%s' in %s", key, src);
    wbcl_status s = wbcl_safetensors_write(dst, n, names, ap, 0, NULL, NULL, err, sizeof err);
    ck_assert_msg(s == WBCL_SUCCESS, "write %s: %s", dst, err);
    for (size_t i = 0; i < n; i++) wbcl_array_free(&arr[i]);
    free(arr);
    free(ap);
    free(names);
    wbcl_safetensors_close(st);
}

static void put_nan(float *x, size_t n) { x[n / 2] = NAN; }
static void put_zero(float *x, size_t n) { memset(x, 0, n * sizeof *x); }

START_TEST(crate_ista_zero_weight)
{
    /* with the ISTA dictionary zero, each layer's ISTA output is ReLU(LN(z½) - eta lambda) */
    wbcl_context *ctx = tu_context();
    const char *p0 = tu_tmp_path("crate_ista0a.safetensors"), *p1 = tu_tmp_path("crate_ista0.safetensors");
    rewrite_tensor(path_of("crate.safetensors"), p0, "transformer.layers.0.1.fn.weight", put_zero);
    rewrite_tensor(p0, p1, "transformer.layers.1.1.fn.weight", put_zero);
    wbcl_safetensors *w = open_st(p1), *gold = open_st(path_of("crate_golden.safetensors"));
    wbcl_crate_config cfg = crate_cfg();
    wbcl_crate *m = NULL;
    ck_assert(!wbcl_crate_load(ctx, w, p1, &cfg, &m));
    wbcl_tensor *img = upload(ctx, gold, "image");
    size_t so[2] = {2, 10};
    wbcl_tensor *out = NULL;
    ck_assert(!wbcl_tensor_create(ctx, 2, so, WBCL_F32, NULL, &out));
    golden_check gc = {ctx, gold, 0, 0, 0, 1, w, NULL, 0};
    wbcl_model_opts o;
    memset(&o, 0, sizeof o);
    o.trace = on_stage;
    o.user = &gc;
    ck_assert_msg(!wbcl_crate_forward(ctx, m, img, WBCL_MODEL_LOGITS, out, &o), "%s", wbcl_context_last_error(ctx));
    ck_assert_int_eq(gc.stages, 2);
    free(gc.last_half);
    wbcl_tensor_destroy(out);
    wbcl_tensor_destroy(img);
    wbcl_crate_destroy(m);
    wbcl_safetensors_close(w);
    wbcl_safetensors_close(gold);
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(crate_swapped_dictionary_fails_golden)
{
    /* transposing every ISTA dictionary (D <-> D^T) must break the golden comparison */
    wbcl_context *ctx = tu_context();
    wbcl_safetensors *w = open_st(path_of("crate.safetensors")), *gold = open_st(path_of("crate_golden.safetensors"));
    wbcl_crate_config cfg = crate_cfg();
    wbcl_crate *m = NULL;
    ck_assert(!wbcl_crate_load(ctx, w, "crate", &cfg, &m));
    wbcl_safetensors_close(w);
    /* build the transposed file */
    const char *pt = tu_tmp_path("crate_T.safetensors");
    {
        wbcl_safetensors *st = open_st(path_of("crate.safetensors"));
        size_t n = wbcl_safetensors_count(st);
        wbcl_array *arr = calloc(n, sizeof *arr);
        const wbcl_array **ap = calloc(n, sizeof *ap);
        const char **names = calloc(n, sizeof *names);
        char err[256];
        for (size_t i = 0; i < n; i++) {
            names[i] = wbcl_safetensors_name(st, i);
            ck_assert(!wbcl_safetensors_get(st, names[i], &arr[i], err, sizeof err));
            if (strstr(names[i], ".1.fn.weight")) {
                float *x = arr[i].data;
                size_t d = arr[i].shape[0];
                for (size_t r = 0; r < d; r++)
                    for (size_t c = r + 1; c < d; c++) {
                        float t = x[r * d + c];
                        x[r * d + c] = x[c * d + r];
                        x[c * d + r] = t;
                    }
            }
            ap[i] = &arr[i];
        }
        ck_assert(!wbcl_safetensors_write(pt, n, names, ap, 0, NULL, NULL, err, sizeof err));
        for (size_t i = 0; i < n; i++) wbcl_array_free(&arr[i]);
        free(arr);
        free(ap);
        free(names);
        wbcl_safetensors_close(st);
    }
    wbcl_crate *mt = NULL;
    ck_assert(!wbcl_crate_load_file(ctx, pt, &cfg, &mt));
    wbcl_tensor *img = upload(ctx, gold, "image");
    size_t so[2] = {2, 10};
    wbcl_tensor *out = NULL;
    ck_assert(!wbcl_tensor_create(ctx, 2, so, WBCL_F32, NULL, &out));
    ck_assert(!wbcl_crate_forward(ctx, mt, img, WBCL_MODEL_LOGITS, out, NULL));
    float *got = read_t(ctx, out);
    float *want = st_f32(gold, "logits", NULL, NULL);
    double worst = 0;
    for (size_t i = 0; i < 20; i++) worst = fmax(worst, fabs((double)got[i] - want[i]));
    ck_assert_msg(worst > 100 * GOLD_TOL, "swapped dictionary still matches the golden logits (%g)", worst);
    free(got);
    free(want);
    wbcl_tensor_destroy(out);
    wbcl_tensor_destroy(img);
    wbcl_crate_destroy(m);
    wbcl_crate_destroy(mt);
    wbcl_safetensors_close(gold);
    wbcl_context_destroy(ctx);
}
END_TEST

/* loads path with the golden config; expects status and a message containing needle */
static void expect_crate_fail(wbcl_context *ctx, const char *path, wbcl_status want, const char *needle)
{
    wbcl_crate_config cfg = crate_cfg();
    wbcl_crate *m = (wbcl_crate *)0x1;
    tu_assert_status(ctx, wbcl_crate_load_file(ctx, path, &cfg, &m), want, needle);
    ck_assert(m == NULL);
}

START_TEST(bad_files)
{
    wbcl_context *ctx = tu_context();
    const char *src = path_of("crate.safetensors");
    size_t len;
    unsigned char *b = slurp(src, &len);
    /* truncated: the data stop early */
    const char *p = tu_tmp_path("trunc.safetensors");
    spit(p, b, len / 2);
    expect_crate_fail(ctx, p, WBCL_ERROR_FORMAT, "trunc.safetensors");
    /* header length larger than the file */
    unsigned char *c = malloc(len);
    memcpy(c, b, len);
    uint64_t big = (uint64_t)len + 100;
    for (int i = 0; i < 8; i++) c[i] = (unsigned char)(big >> (8 * i));
    p = tu_tmp_path("hdr.safetensors");
    spit(p, c, len);
    expect_crate_fail(ctx, p, WBCL_ERROR_FORMAT, "hdr.safetensors");
    free(c);
    /* wrong dtype: cls_token declared U32 (same size as F32, not convertible) */
    p = tu_tmp_path("dtype.safetensors");
    rewrite_header(src, p, "\"cls_token\":{\"dtype\":\"F32\"", "\"cls_token\":{\"dtype\":\"U32\"");
    expect_crate_fail(ctx, p, WBCL_ERROR_DTYPE, "cls_token");
    /* duplicate key: pos_embedding twice (cls_token renamed) */
    p = tu_tmp_path("dup.safetensors");
    rewrite_header(src, p, "\"cls_token\"", "\"module.pos_embedding\"");
    expect_crate_fail(ctx, p, WBCL_ERROR_FORMAT, "pos_embedding");
    /* missing key */
    p = tu_tmp_path("missing.safetensors");
    rewrite_header(src, p, "\"mlp_head.1.bias\"", "\"mlp_head.1.bias_renamed\"");
    expect_crate_fail(ctx, p, WBCL_ERROR_FORMAT, "missing tensor 'mlp_head.1.bias'");
    p = tu_tmp_path("missing2.safetensors");
    rewrite_header(src, p, "\"transformer.layers.1.0.fn.to_out.0.weight\"", "\"x\"");
    expect_crate_fail(ctx, p, WBCL_ERROR_FORMAT, "transformer.layers.1.0.fn.to_out.0.weight");
    /* NaN in a weight */
    p = tu_tmp_path("nan.safetensors");
    rewrite_tensor(src, p, "transformer.layers.1.1.fn.weight", put_nan);
    expect_crate_fail(ctx, p, WBCL_ERROR_NUMERIC, "transformer.layers.1.1.fn.weight");
    /* shape mismatch with the config: wrong head dimension */
    wbcl_crate_config cfg = crate_cfg();
    cfg.dim_head = 16;
    wbcl_crate *m = NULL;
    tu_assert_status(ctx, wbcl_crate_load_file(ctx, src, &cfg, &m), WBCL_ERROR_SHAPE, "qkv.weight");
    cfg = crate_cfg();
    cfg.depth = 1; /* the file has two layers */
    tu_assert_status(ctx, wbcl_crate_load_file(ctx, src, &cfg, &m), WBCL_ERROR_SHAPE, "transformer.layers.1");
    ck_assert(m == NULL);
    /* ToST: NaN in a BatchNorm statistic, missing BN key, negative variance, wrong config */
    const char *ts = path_of("tost16.safetensors");
    wbcl_tost_config tc = tost_cfg(16);
    wbcl_tost *tm = NULL;
    p = tu_tmp_path("tnan.safetensors");
    rewrite_tensor(ts, p, "patch_embed.proj.2.1.running_var", put_nan);
    tu_assert_status(ctx, wbcl_tost_load_file(ctx, p, &tc, &tm), WBCL_ERROR_NUMERIC, "patch_embed.proj.2.1.running_var");
    p = tu_tmp_path("tmiss.safetensors");
    rewrite_header(ts, p, "\"cls_attn_blocks.1.gamma2\"", "\"cls_attn_blocks.1.gamma3\"");
    tu_assert_status(ctx, wbcl_tost_load_file(ctx, p, &tc, &tm), WBCL_ERROR_FORMAT, "cls_attn_blocks.1.gamma2");
    tc.heads = 5; /* the weights' blocks.0.attn.temp has 4 rows */
    tu_assert_status(ctx, wbcl_tost_load_file(ctx, ts, &tc, &tm), WBCL_ERROR_SHAPE, "heads = 5");
    tc = tost_cfg(16);
    tc.patch = 8; /* the file has 4 convs */
    tu_assert_status(ctx, wbcl_tost_load_file(ctx, ts, &tc, &tm), WBCL_ERROR_SHAPE, "patch_embed.proj.");
    ck_assert(tm == NULL);
    free(b);
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(run_tool_writes_nothing_on_failure)
{
    /* wbcl-run crate: a good run writes logits equal to the golden ones; a bad weights file makes
     * it fail with a message and leaves no output file */
    wbcl_context *ctx = tu_context();
    wbcl_safetensors *gold = open_st(path_of("crate_golden.safetensors"));
    size_t n;
    wbcl_array sh;
    float *img = st_f32(gold, "image", &sh, &n);
    const char *in = tu_tmp_path("img.npy");
    char err[256];
    ck_assert(!wbcl_npy_write_f32(in, sh.ndim, sh.shape, img, err, sizeof err));
    free(img);
    char cmd[4096], outp[512], inp[512];
    snprintf(inp, sizeof inp, "%s", in);
    snprintf(outp, sizeof outp, "%s", tu_tmp_path("logits.npy"));
    snprintf(cmd, sizeof cmd,
             "%s/wbcl-run crate --weights %s --input %s --output %s --param dim=48 --param depth=2 --param heads=4 "
             "--param dim_head=12 --param patch=8 --quiet 2>/dev/null",
             WBCL_TOOLS_DIR, path_of("crate.safetensors"), inp, outp);
    int rc = system(cmd);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "wbcl-run crate failed: %s", cmd);
    wbcl_array a;
    ck_assert(!wbcl_npy_read(outp, &a, err, sizeof err));
    float *got = NULL;
    ck_assert(!wbcl_array_to_f32(&a, &got, err, sizeof err));
    float *want = st_f32(gold, "logits", NULL, &n);
    ck_assert_uint_eq(wbcl_array_numel(&a), n);
    for (size_t i = 0; i < n; i++) ck_assert_msg(fabs(got[i] - want[i]) <= GOLD_TOL, "logit %zu", i);
    free(got);
    wbcl_array_free(&a);
    /* --param weight_dtype=f16: within F16_TOL of the golden logits, and not the float32 run's */
    snprintf(cmd, sizeof cmd,
             "%s/wbcl-run crate --weights %s --input %s --output %s --param dim=48 --param depth=2 --param heads=4 "
             "--param dim_head=12 --param patch=8 --param weight_dtype=f16 --quiet 2>/dev/null",
             WBCL_TOOLS_DIR, path_of("crate.safetensors"), inp, outp);
    rc = system(cmd);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "wbcl-run crate f16 failed: %s", cmd);
    ck_assert(!wbcl_npy_read(outp, &a, err, sizeof err));
    ck_assert(!wbcl_array_to_f32(&a, &got, err, sizeof err));
    double dmax = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(fabs(got[i] - want[i]) <= F16_TOL, "f16 logit %zu: %g vs %g", i, got[i], want[i]);
        dmax = fmax(dmax, fabs(got[i] - want[i]));
    }
    /* float32 weights: <= 4.2e-7 here; float16: 4.2e-4 measured */
    ck_assert_msg(dmax > 1e-5, "weight_dtype=f16 gave float32-accurate logits (%g)", dmax);
    free(got);
    free(want);
    wbcl_array_free(&a);
    /* failures: NaN weights, truncated weights */
    const char *bad = tu_tmp_path("nanw.safetensors");
    rewrite_tensor(path_of("crate.safetensors"), bad, "mlp_head.1.weight", put_nan);
    snprintf(outp, sizeof outp, "%s", tu_tmp_path("never.npy"));
    snprintf(cmd, sizeof cmd,
             "%s/wbcl-run crate --weights %s --input %s --output %s --param dim=48 --param depth=2 --param heads=4 "
             "--param dim_head=12 --param patch=8 2>%s",
             WBCL_TOOLS_DIR, bad, inp, outp, tu_tmp_path("stderr.txt"));
    rc = system(cmd);
    ck_assert(WIFEXITED(rc) && WEXITSTATUS(rc) != 0);
    struct stat sb;
    ck_assert_msg(stat(outp, &sb) != 0, "output written despite the failure");
    size_t el;
    unsigned char *e = slurp(tu_tmp_path("stderr.txt"), &el);
    e[el] = 0;
    ck_assert_msg(strstr((char *)e, "mlp_head.1.weight") != NULL, "stderr: %s", e);
    free(e);
    wbcl_safetensors_close(gold);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Batches whose size is not a multiple of the launcher's work-group rows: the golden images replicated
 * to B = 8 (take_row's range (d, B) = (48, 8) is rounded up to (48, 10)); before the kernel checked b < B
 * the two extra rows were written past the (B, d) buffer and corrupted the host heap (a crash within two
 * forwards). Every copy's logits equal the golden logits to GOLD_TOL, three forwards in a row, and the
 * FEATURES outputs of ToST (the same kernel) likewise. */
static void replicated_batch_run(int tost)
{
    wbcl_context *ctx = tu_context();
    wbcl_safetensors *gold = open_st(path_of(tost ? "tost16_golden.safetensors" : "crate_golden.safetensors"));
    wbcl_crate *cm = NULL;
    wbcl_tost *tm = NULL;
    if (tost) {
        wbcl_tost_config cfg = tost_cfg(16);
        ck_assert_msg(!wbcl_tost_load_file(ctx, path_of("tost16.safetensors"), &cfg, &tm), "%s",
                      wbcl_context_last_error(ctx));
    } else {
        wbcl_crate_config cfg = crate_cfg();
        ck_assert_msg(!wbcl_crate_load_file(ctx, path_of("crate.safetensors"), &cfg, &cm), "%s",
                      wbcl_context_last_error(ctx));
    }
    wbcl_array ish, lsh;
    size_t ni, nl;
    float *img = st_f32(gold, "image", &ish, &ni), *logit = st_f32(gold, "logits", &lsh, &nl);
    const size_t R = 4, B0 = ish.shape[0], B = R * B0, classes = lsh.shape[1];
    ck_assert_uint_eq(B, 8);
    float *big = malloc(R * ni * sizeof *big);
    ck_assert(big != NULL);
    for (size_t r = 0; r < R; r++) memcpy(big + r * ni, img, ni * sizeof *big);
    size_t si[4] = {B, ish.shape[1], ish.shape[2], ish.shape[3]}, so[2] = {B, classes};
    wbcl_tensor *x = NULL, *out = NULL;
    ck_assert(!wbcl_tensor_create(ctx, 4, si, WBCL_F32, big, &x));
    ck_assert(!wbcl_tensor_create(ctx, 2, so, WBCL_F32, NULL, &out));
    for (int rep = 0; rep < 3; rep++) {
        wbcl_status s = tost ? wbcl_tost_forward(ctx, tm, x, WBCL_MODEL_LOGITS, out, NULL)
                             : wbcl_crate_forward(ctx, cm, x, WBCL_MODEL_LOGITS, out, NULL);
        ck_assert_msg(s == WBCL_SUCCESS, "forward: %s", wbcl_context_last_error(ctx));
        float *got = read_t(ctx, out);
        for (size_t i = 0; i < B * classes; i++)
            ck_assert_msg(fabs((double)got[i] - (double)logit[i % nl]) <= GOLD_TOL, "logit %zu: %g vs golden %g", i,
                          (double)got[i], (double)logit[i % nl]);
        free(got);
    }
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(out);
    wbcl_crate_destroy(cm);
    wbcl_tost_destroy(tm);
    free(big);
    free(img);
    free(logit);
    wbcl_safetensors_close(gold);
    wbcl_context_destroy(ctx);
}
START_TEST(crate_replicated_batch) { replicated_batch_run(0); }
END_TEST
START_TEST(tost_replicated_batch) { replicated_batch_run(1); }
END_TEST

/* weight_dtype = WBCL_F16 (models.h): the GEMM weight matrices stored as half, activations float32.
 * Logits against the golden float64 logits (computed from the float32 weights) and against our own
 * float32-weight logits. Tolerance F16_TOL = 5e-3 max-abs: storing a weight rounds it by at most
 * 2^-11 = 4.9e-4 relative, so a dot product sum_j x_j w_j moves by at most 2^-11 sum_j |x_j w_j|
 * and, with independent rounding errors, typically by ~2^-12 of its own O(1) scale; LayerNorms
 * renormalize between stages, and these models pass through 4 to 10 linear stages to logits of
 * magnitude ~1, so a few 1e-4 is the expected size (measured: 2e-4 .. 4.3e-4) and 5e-3 leaves a
 * margin > 10x, while a wrongly converted matrix (another weight's values, a transposed or
 * unrounded load) changes the logits by O(0.1). The difference to the float32-weight run must be
 * non-zero, which shows that the half path ran. Measured errors are printed (perf/RESULTS.md). */
static void logits_f16(const char *model, const char *wname, const char *gname, int tost, int which, size_t B,
                       size_t classes)
{
    wbcl_context *ctx = tu_context();
    wbcl_safetensors *gold = open_st(path_of(gname));
    wbcl_tensor *img = upload(ctx, gold, "image");
    size_t so[2] = {B, classes};
    wbcl_tensor *out = NULL;
    ck_assert(!wbcl_tensor_create(ctx, 2, so, WBCL_F32, NULL, &out));
    float *res[2];
    for (int h = 0; h < 2; h++) {
        const wbcl_dtype dt = h ? WBCL_F16 : WBCL_F32;
        wbcl_status s;
        if (tost) {
            wbcl_tost_config cfg = tost_cfg(which);
            cfg.weight_dtype = dt;
            wbcl_tost *m = NULL;
            s = wbcl_tost_load_file(ctx, path_of(wname), &cfg, &m);
            ck_assert_msg(s == WBCL_SUCCESS, "load: %s", wbcl_context_last_error(ctx));
            s = wbcl_tost_forward(ctx, m, img, WBCL_MODEL_LOGITS, out, NULL);
            wbcl_tost_destroy(m);
        } else {
            wbcl_crate_config cfg = crate_cfg();
            cfg.weight_dtype = dt;
            wbcl_crate *m = NULL;
            s = wbcl_crate_load_file(ctx, path_of(wname), &cfg, &m);
            ck_assert_msg(s == WBCL_SUCCESS, "load: %s", wbcl_context_last_error(ctx));
            s = wbcl_crate_forward(ctx, m, img, WBCL_MODEL_LOGITS, out, NULL);
            wbcl_crate_destroy(m);
        }
        ck_assert_msg(s == WBCL_SUCCESS, "%s forward (%s weights): %s", model, h ? "f16" : "f32",
                      wbcl_context_last_error(ctx));
        res[h] = read_t(ctx, out);
    }
    size_t n;
    float *want = st_f32(gold, "logits", NULL, &n);
    ck_assert_uint_eq(n, B * classes);
    double e32 = 0, e16 = 0, d = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        e32 = fmax(e32, fabs((double)res[0][i] - want[i]));
        e16 = fmax(e16, isfinite(res[1][i]) ? fabs((double)res[1][i] - want[i]) : INFINITY);
        d = fmax(d, fabs((double)res[1][i] - res[0][i]));
        scale = fmax(scale, fabs((double)want[i]));
    }
    fprintf(stderr, "%s logits with f16 weights: max-abs error %.3g vs golden (f32 weights: %.3g), %.3g vs the f32-weight "
            "run; largest |logit| %.3g\n", model, e16, e32, d, scale);
    ck_assert_msg(e32 <= GOLD_TOL, "%s f32 weights: %.3g", model, e32);
    ck_assert_msg(e16 <= F16_TOL, "%s f16 weights: max-abs logit error %.3g > %g", model, e16, F16_TOL);
    ck_assert_msg(d > 0, "%s: f16 weights gave the float32 logits bit for bit: the half path did not run", model);
    /* an invalid dtype is refused */
    wbcl_crate_config bad = crate_cfg();
    bad.weight_dtype = (wbcl_dtype)5;
    wbcl_crate *m = NULL;
    ck_assert_int_eq(wbcl_crate_load_file(ctx, path_of("crate.safetensors"), &bad, &m), WBCL_ERROR_DTYPE);
    ck_assert_ptr_null(m);
    free(want);
    free(res[0]);
    free(res[1]);
    wbcl_tensor_destroy(img);
    wbcl_tensor_destroy(out);
    wbcl_safetensors_close(gold);
    wbcl_context_destroy(ctx);
}

START_TEST(f16_weights)
{
    if (_i == 0) logits_f16("crate", "crate.safetensors", "crate_golden.safetensors", 0, 0, 2, 10);
    if (_i == 1) logits_f16("tost16", "tost16.safetensors", "tost16_golden.safetensors", 1, 16, 2, 10);
    if (_i == 2) logits_f16("tost8", "tost8.safetensors", "tost8_golden.safetensors", 1, 8, 1, 7);
}
END_TEST

/* ---- non-finite weights: every loader refuses NaN and Inf naming the key (issue 20) ----------- */
typedef struct nf_key {
    const char *name;
    int ndim;
    size_t shape[6];
    int f64;            /* stored as F64 */
    const char *needle; /* NULL: "'PREFIX+NAME' has a non-finite value (nan|inf)" */
} nf_key;

/* A model or module file: its keys (under prefix), metadata, and a loader that loads and destroys
 * from an open file (load_st) or from the path (load_path). */
typedef struct nf_file {
    const char *label, *prefix;
    wbcl_status (*load_st)(wbcl_context *, const wbcl_safetensors *, const char *);
    wbcl_status (*load_path)(wbcl_context *, const char *);
    size_t n;
    nf_key keys[6];
    size_t n_meta;
    const char *mk[11], *mv[11];
} nf_file;

/* Writes f's keys (small finite values; the one named bad, if any, gets v at flat index numel / 2)
 * and metadata to path. */
static void nf_write(const char *path, const nf_file *f, const char *bad, double v)
{
    wbcl_array arr[6];
    const wbcl_array *ap[6];
    char names[6][128];
    const char *np[6];
    char err[512];
    for (size_t i = 0; i < f->n; i++) {
        const nf_key *k = &f->keys[i];
        wbcl_elem e = k->f64 ? WBCL_ELEM_F64 : WBCL_ELEM_F32;
        ck_assert(!wbcl_array_alloc(&arr[i], e, k->ndim, k->shape, err, sizeof err));
        size_t m = wbcl_array_numel(&arr[i]);
        for (size_t j = 0; j < m; j++) {
            double x = bad && !strcmp(k->name, bad) && j == m / 2 ? v : 0.05 * (double)((i * 7 + j) % 11) - 0.2;
            if (k->f64) ((double *)arr[i].data)[j] = x;
            else ((float *)arr[i].data)[j] = (float)x;
        }
        snprintf(names[i], sizeof names[i], "%s%s", f->prefix ? f->prefix : "", k->name);
        np[i] = names[i];
        ap[i] = &arr[i];
    }
    wbcl_status st = wbcl_safetensors_write(path, f->n, np, ap, f->n_meta, f->mk, f->mv, err, sizeof err);
    ck_assert_msg(st == WBCL_SUCCESS, "%s", err);
    for (size_t i = 0; i < f->n; i++) wbcl_array_free(&arr[i]);
}

static wbcl_status nf_load(wbcl_context *ctx, const nf_file *f, const char *path)
{
    if (f->load_path) return f->load_path(ctx, path);
    char err[512];
    wbcl_safetensors *st = NULL;
    ck_assert_msg(!wbcl_safetensors_open(path, &st, err, sizeof err), "%s", err);
    wbcl_status s = f->load_st(ctx, st, path);
    wbcl_safetensors_close(st);
    return s;
}

/* the attention modules with weights (d = 4, 2 heads) and the ReduNet model files */
#define NF_PREFIX "blocks.0.attn."
/* load then destroy, one adapter per module type */
#define NF_LOADER(fn, type, destroy, load)                                                         \
    static wbcl_status fn(wbcl_context *c, const wbcl_safetensors *st, const char *f)            \
    {                                                                                            \
        type *m = NULL;                                                                          \
        wbcl_status s = load;                                                                    \
        destroy(m);                                                                              \
        return s;                                                                                \
    }
NF_LOADER(nf_mha, wbcl_mha, wbcl_mha_destroy, wbcl_mha_load(c, st, f, NF_PREFIX, 4, 2, 0, &m))
NF_LOADER(nf_mssa, wbcl_mssa, wbcl_mssa_destroy, wbcl_mssa_load(c, st, f, NF_PREFIX, 4, 2, 2, 0, &m))
NF_LOADER(nf_tssa, wbcl_tssa_layer, wbcl_tssa_layer_destroy, wbcl_tssa_layer_load(c, st, f, NF_PREFIX, 4, 2, &m))
NF_LOADER(nf_tssa_causal, wbcl_tssa_causal_layer, wbcl_tssa_causal_layer_destroy,
          wbcl_tssa_causal_layer_load(c, st, f, NF_PREFIX, 4, 2, &m))
NF_LOADER(nf_xca, wbcl_xca_layer, wbcl_xca_layer_destroy, wbcl_xca_layer_load(c, st, f, NF_PREFIX, 4, 2, &m))
NF_LOADER(nf_energy, wbcl_energy_layer, wbcl_energy_layer_destroy, wbcl_energy_layer_load(c, st, f, NF_PREFIX, 4, &m))
#undef NF_LOADER
/* the model files: loaded from the path; a failed load leaves *out NULL */
#define NF_PATH_LOADER(fn, type, destroy, load)                                                    \
    static wbcl_status fn(wbcl_context *c, const char *path)                                     \
    {                                                                                            \
        type *m = (type *)0x1;                                                                   \
        wbcl_status s = load(c, path, &m);                                                       \
        ck_assert(s == WBCL_SUCCESS || m == NULL);                                               \
        destroy(m);                                                                              \
        return s;                                                                                \
    }
NF_PATH_LOADER(nf_redunet, wbcl_redunet, wbcl_redunet_destroy, wbcl_redunet_load)
NF_PATH_LOADER(nf_circulant, wbcl_circulant, wbcl_circulant_destroy, wbcl_circulant_load)
#undef NF_PATH_LOADER

#define NK(name, nd, ...) {name, nd, {__VA_ARGS__}, 0, NULL}
static const nf_file nf_files[] = {
    {.label = "mha", .prefix = NF_PREFIX, .load_st = nf_mha, .n = 4,
     .keys = {NK("qkv.weight", 2, 12, 4), NK("qkv.bias", 1, 12), NK("proj.weight", 2, 4, 4), NK("proj.bias", 1, 4)}},
    {.label = "mssa", .prefix = NF_PREFIX, .load_st = nf_mssa, .n = 3,
     .keys = {NK("qkv.weight", 2, 4, 4), NK("to_out.0.weight", 2, 4, 4), NK("to_out.0.bias", 1, 4)}},
    {.label = "tssa", .prefix = NF_PREFIX, .load_st = nf_tssa, .n = 5,
     .keys = {NK("qkv.weight", 2, 4, 4), NK("qkv.bias", 1, 4), NK("temp", 2, 2, 1), NK("to_out.0.weight", 2, 4, 4),
              NK("to_out.0.bias", 1, 4)}},
    {.label = "tssa_causal", .prefix = NF_PREFIX, .load_st = nf_tssa_causal, .n = 6,
     .keys = {NK("c_attn.weight", 2, 4, 4), NK("c_attn.bias", 1, 4), NK("temp", 2, 2, 1),
              NK("denom_bias", 3, 2, 3, 1), NK("c_proj.weight", 2, 4, 4), NK("c_proj.bias", 1, 4)}},
    {.label = "xca", .prefix = NF_PREFIX, .load_st = nf_xca, .n = 5,
     .keys = {NK("qkv.weight", 2, 12, 4), NK("qkv.bias", 1, 12), NK("temperature", 3, 2, 1, 1),
              NK("proj.weight", 2, 4, 4), NK("proj.bias", 1, 4)}},
    {.label = "energy", .prefix = NF_PREFIX, .load_st = nf_energy, .n = 2,
     .keys = {NK("W_a", 2, 4, 4), NK("W_f", 2, 4, 4)}},
    /* ReduNet: the operators are refused by wbcl_redunet_create, whose message names them E[i] ... */
    {.label = "redunet", .load_path = nf_redunet, .n = 4,
     .keys = {{"E", 3, {1, 2, 2}, 0, "E["}, {"C", 4, {1, 1, 2, 2}, 0, "C["}, {"gamma", 2, {1, 1}, 0, "gamma["},
              {"objective", 2, {1, 3}, 1, NULL}},
     .n_meta = 8,
     .mk = {"format", "version", "layers", "dim", "classes", "eta", "eps2", "lambda"},
     .mv = {"wbcl.redunet", "1", "1", "2", "1", "0.5", "0.1", "0.01"}},
    /* shift-invariant: 1-D, 1 channel, width 4 (P = 3 frequencies), 1 class, 1 layer */
    {.label = "circulant", .load_path = nf_circulant, .n = 3,
     .keys = {NK("ops", 6, 1, 2, 3, 1, 1, 2), NK("gamma", 2, 1, 1), {"objective", 2, {1, 3}, 1, NULL}},
     .n_meta = 11,
     .mk = {"format", "version", "dims", "channels", "height", "width", "classes", "layers", "eta", "eps2", "lambda"},
     .mv = {"wbcl.circulant", "1", "1", "1", "1", "4", "1", "1", "0.5", "0.1", "0.01"}},
};
#undef NK
#define NF_FILES ((int)(sizeof nf_files / sizeof nf_files[0]))

/* the finite file loads; each key with a NaN, then with +Inf: WBCL_ERROR_NUMERIC naming the file
 * and the key */
START_TEST(loaders_refuse_nonfinite)
{
    const nf_file *f = &nf_files[_i];
    wbcl_context *ctx = tu_context();
    const char *path = tu_tmp_path("nf.safetensors");
    nf_write(path, f, NULL, 0.0);
    ck_assert_msg(nf_load(ctx, f, path) == WBCL_SUCCESS, "%s: the finite file: %s", f->label,
                  wbcl_context_last_error(ctx));
    const double bad[2] = {NAN, INFINITY};
    for (size_t k = 0; k < f->n; k++)
        for (int b = 0; b < 2; b++) {
            char needle[192];
            const char *vs = b ? "inf" : "nan";
            if (f->keys[k].needle) snprintf(needle, sizeof needle, "%s", f->keys[k].needle);
            else
                snprintf(needle, sizeof needle, "'%s%s' has a non-finite value (%s)", f->prefix ? f->prefix : "",
                         f->keys[k].name, vs);
            nf_write(path, f, f->keys[k].name, bad[b]);
            tu_assert_status(ctx, nf_load(ctx, f, path), WBCL_ERROR_NUMERIC, needle);
            ck_assert_msg(strstr(wbcl_context_last_error(ctx), path) && strstr(wbcl_context_last_error(ctx), vs),
                          "%s: '%s' lacks the file or '%s'", f->label, wbcl_context_last_error(ctx), vs);
        }
    wbcl_context_destroy(ctx);
}
END_TEST

/* CRATE and ToST: an infinity is refused like the NaN of bad_files */
static void put_inf(float *x, size_t n) { x[n / 2] = -INFINITY; }
START_TEST(models_refuse_inf)
{
    wbcl_context *ctx = tu_context();
    const char *p = tu_tmp_path("inf.safetensors");
    rewrite_tensor(path_of("crate.safetensors"), p, "transformer.layers.0.0.fn.qkv.weight", put_inf);
    expect_crate_fail(ctx, p, WBCL_ERROR_NUMERIC,
                      "'transformer.layers.0.0.fn.qkv.weight' has a non-finite value (-inf)");
    wbcl_tost_config tc = tost_cfg(16);
    wbcl_tost *tm = (wbcl_tost *)0x1;
    p = tu_tmp_path("tinf.safetensors");
    rewrite_tensor(path_of("tost16.safetensors"), p, "blocks.0.attn.temp", put_inf);
    tu_assert_status(ctx, wbcl_tost_load_file(ctx, p, &tc, &tm), WBCL_ERROR_NUMERIC,
                     "'blocks.0.attn.temp' has a non-finite value (-inf)");
    ck_assert(tm == NULL);
    wbcl_context_destroy(ctx);
}
END_TEST

START_TEST(presets)
{
    wbcl_crate_config c;
    ck_assert(!wbcl_crate_config_preset("tiny", &c));
    ck_assert(c.dim == 384 && c.depth == 12 && c.heads == 6 && c.dim_head == 64 && c.patch == 16);
    ck_assert(!wbcl_crate_config_preset("large", &c));
    ck_assert(c.dim == 1024 && c.depth == 24 && c.heads == 16 && c.dim_head == 64);
    ck_assert(wbcl_crate_config_preset("huge", &c) == WBCL_ERROR_INVALID_ARGUMENT);
    wbcl_tost_config t;
    ck_assert(!wbcl_tost_config_preset("tiny", &t));
    ck_assert(t.dim == 192 && t.depth == 12 && t.heads == 4 && t.dim / t.heads == 48 && t.mlp_hidden == 768);
    ck_assert(!wbcl_tost_config_preset("medium", &t));
    ck_assert(t.dim == 512 && t.depth == 24 && t.heads == 8);
}
END_TEST

/* Issue 18: every size the weights fix is inferred (models.h "Sizes from the weights"). The golden
 * models are non-preset sizes (CRATE d 48, L 2, K p 48, patch 8; ToST d 32, L 1, K 2, patch 8), so
 * they serve as the "custom" models (tost8 also has MLP ratio 2, not the published 4) and reuse the golden tests' kernel specializations.
 * Loaded from zeroed configs, the reported sizes are those of make_models.py and the logits are
 * the golden ones (GOLD_TOL, as the golden tests: the same computation); a preset or a size that
 * contradicts the weights is refused naming the size, the key and both values; wbcl-run crate /
 * tost with no size params give the golden logits, and a contradicting --param is refused. */
static void logits_match_golden(wbcl_context *ctx, const wbcl_safetensors *gold, wbcl_tensor *out)
{
    size_t n;
    float *want = st_f32(gold, "logits", NULL, &n);
    ck_assert_uint_eq(wbcl_tensor_numel(out), n);
    float *got = malloc(n * sizeof *got);
    ck_assert(got && !wbcl_tensor_read(ctx, out, got, n));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= GOLD_TOL, "logit %zu: %g vs %g", i, got[i], want[i]);
    free(got);
    free(want);
}

static void run_cli_expect(const char *cmd, int ok, const char *const *needles)
{
    char full[4096];
    snprintf(full, sizeof full, "%s 2>%s", cmd, tu_tmp_path("cli_err.txt"));
    int rc = system(full);
    ck_assert_msg(WIFEXITED(rc) && (WEXITSTATUS(rc) == 0) == ok, "%s: exit %d", full, WEXITSTATUS(rc));
    size_t el;
    unsigned char *e = slurp(tu_tmp_path("cli_err.txt"), &el);
    e[el] = 0;
    for (size_t i = 0; needles && needles[i]; i++)
        ck_assert_msg(strstr((char *)e, needles[i]) != NULL, "%s: stderr lacks '%s': %s", cmd, needles[i], e);
    free(e);
}

static void cli_logits_match(const char *outp, const wbcl_safetensors *gold)
{
    char err[256];
    wbcl_array a;
    ck_assert(!wbcl_npy_read(outp, &a, err, sizeof err));
    float *got = NULL, *want;
    size_t n;
    ck_assert(!wbcl_array_to_f32(&a, &got, err, sizeof err));
    want = st_f32(gold, "logits", NULL, &n);
    ck_assert_uint_eq(wbcl_array_numel(&a), n);
    for (size_t i = 0; i < n; i++) ck_assert_msg(fabs(got[i] - want[i]) <= GOLD_TOL, "cli logit %zu", i);
    free(got);
    free(want);
    wbcl_array_free(&a);
}

START_TEST(sizes_from_weights)
{
    wbcl_context *ctx = tu_context();
    /* CRATE: only the split of heads * dim_head is given */
    wbcl_crate_config c;
    memset(&c, 0, sizeof c);
    c.eta = c.lambd = 0.1f;
    c.ln_eps = 1e-5f;
    c.heads = 4;
    wbcl_crate *m = NULL;
    const char *cw = path_of("crate.safetensors");
    ck_assert_msg(!wbcl_crate_load_file(ctx, cw, &c, &m), "%s", wbcl_context_last_error(ctx));
    const wbcl_crate_config *u = wbcl_crate_get_config(m);
    ck_assert(u->dim == 48 && u->depth == 2 && u->heads == 4 && u->dim_head == 12 && u->patch == 8 &&
              u->channels == 3 && u->num_classes == 10);
    wbcl_safetensors *gold = open_st(path_of("crate_golden.safetensors"));
    wbcl_tensor *img = upload(ctx, gold, "image"), *out = NULL;
    size_t so[2] = {2, 10};
    ck_assert(!wbcl_tensor_create(ctx, 2, so, WBCL_F32, NULL, &out));
    ck_assert_msg(!wbcl_crate_forward(ctx, m, img, WBCL_MODEL_LOGITS, out, NULL), "%s", wbcl_context_last_error(ctx));
    logits_match_golden(ctx, gold, out);
    wbcl_crate_destroy(m);
    m = NULL;
    /* dim_head alone gives heads */
    c.heads = 0;
    c.dim_head = 12;
    ck_assert(!wbcl_crate_load_file(ctx, cw, &c, &m));
    ck_assert_uint_eq(wbcl_crate_get_config(m)->heads, 4);
    wbcl_crate_destroy(m);
    m = NULL;
    /* neither: the weights fix only the product */
    c.dim_head = 0;
    tu_assert_status(ctx, wbcl_crate_load_file(ctx, cw, &c, &m), WBCL_ERROR_INVALID_ARGUMENT, "heads * dim_head = 48");
    /* a preset contradicts: the size, the key and both values are named */
    ck_assert(!wbcl_crate_config_preset("tiny", &c));
    tu_assert_status(ctx, wbcl_crate_load_file(ctx, cw, &c, &m), WBCL_ERROR_SHAPE,
                     "config dim = 384 contradicts the weights: 'cls_token' gives dim = 48");
    memset(&c, 0, sizeof c);
    c.eta = c.lambd = 0.1f;
    c.ln_eps = 1e-5f;
    c.heads = 4;
    c.depth = 3;
    tu_assert_status(ctx, wbcl_crate_load_file(ctx, cw, &c, &m), WBCL_ERROR_SHAPE,
                     "depth = 3 contradicts the weights: 'transformer.layers.1.1.fn.weight' gives depth = 2");
    c.depth = 0;
    c.channels = 1; /* 3 * 8^2 = 192 columns: not 1 * P^2 */
    tu_assert_status(ctx, wbcl_crate_load_file(ctx, cw, &c, &m), WBCL_ERROR_SHAPE, "channels * patch^2 = 192");
    /* a key the inference reads, missing: named */
    c.channels = 0;
    const char *p = tu_tmp_path("nocls.safetensors");
    rewrite_header(cw, p, "\"cls_token\"", "\"cls_tokeX\"");
    tu_assert_status(ctx, wbcl_crate_load_file(ctx, p, &c, &m), WBCL_ERROR_FORMAT, "'cls_token'");
    ck_assert(m == NULL);
    wbcl_tensor_destroy(out);
    wbcl_tensor_destroy(img);
    /* ToST: everything from the weights */
    wbcl_tost_config t;
    memset(&t, 0, sizeof t);
    t.ln_eps = 1e-6f;
    t.bn_eps = 1e-5f;
    wbcl_tost *tm = NULL;
    const char *tw = path_of("tost8.safetensors");
    ck_assert_msg(!wbcl_tost_load_file(ctx, tw, &t, &tm), "%s", wbcl_context_last_error(ctx));
    const wbcl_tost_config *tu = wbcl_tost_get_config(tm);
    ck_assert(tu->dim == 32 && tu->depth == 1 && tu->heads == 2 && tu->patch == 8 && tu->cls_layers == 2 &&
              tu->mlp_hidden == 2 * 32 && tu->num_classes == 7);
    wbcl_safetensors *tgold = open_st(path_of("tost8_golden.safetensors"));
    img = upload(ctx, tgold, "image");
    size_t st[2] = {wbcl_tensor_dim(img, 0), 7};
    ck_assert(!wbcl_tensor_create(ctx, 2, st, WBCL_F32, NULL, &out));
    ck_assert_msg(!wbcl_tost_forward(ctx, tm, img, WBCL_MODEL_LOGITS, out, NULL), "%s", wbcl_context_last_error(ctx));
    logits_match_golden(ctx, tgold, out);
    wbcl_tost_destroy(tm);
    tm = NULL;
    t.heads = 4;
    tu_assert_status(ctx, wbcl_tost_load_file(ctx, tw, &t, &tm), WBCL_ERROR_SHAPE,
                     "config heads = 4 contradicts the weights: 'blocks.0.attn.temp' gives heads = 2");
    t.heads = 0;
    t.patch = 16;
    tu_assert_status(ctx, wbcl_tost_load_file(ctx, tw, &t, &tm), WBCL_ERROR_SHAPE,
                     "config patch = 16 contradicts the weights: 'patch_embed.proj.4.0.weight' gives patch = 8");
    ck_assert(tm == NULL);
    /* wbcl-run with no size params, and refused contradictions */
    char err[256], cmd[4096], inp[512], outp[512];
    size_t n;
    wbcl_array sh;
    float *hi = st_f32(gold, "image", &sh, &n);
    snprintf(inp, sizeof inp, "%s", tu_tmp_path("cimg.npy"));
    ck_assert(!wbcl_npy_write_f32(inp, sh.ndim, sh.shape, hi, err, sizeof err));
    free(hi);
    snprintf(outp, sizeof outp, "%s", tu_tmp_path("clog.npy"));
    snprintf(cmd, sizeof cmd, "%s/wbcl-run crate --weights %s --input %s --output %s --param heads=4 --quiet",
             WBCL_TOOLS_DIR, cw, inp, outp);
    run_cli_expect(cmd, 1, NULL);
    cli_logits_match(outp, gold);
    snprintf(cmd, sizeof cmd, "%s/wbcl-run crate --weights %s --input %s --output %s --param config=tiny",
             WBCL_TOOLS_DIR, cw, inp, tu_tmp_path("never1.npy"));
    const char *const n1[] = {"dim = 384", "'cls_token'", "dim = 48", NULL};
    run_cli_expect(cmd, 0, n1);
    hi = st_f32(tgold, "image", &sh, &n);
    snprintf(inp, sizeof inp, "%s", tu_tmp_path("timg.npy"));
    ck_assert(!wbcl_npy_write_f32(inp, sh.ndim, sh.shape, hi, err, sizeof err));
    free(hi);
    snprintf(outp, sizeof outp, "%s", tu_tmp_path("tlog.npy"));
    snprintf(cmd, sizeof cmd, "%s/wbcl-run tost --weights %s --input %s --output %s --quiet", WBCL_TOOLS_DIR, tw,
             inp, outp);
    run_cli_expect(cmd, 1, NULL);
    cli_logits_match(outp, tgold);
    snprintf(cmd, sizeof cmd, "%s/wbcl-run tost --weights %s --input %s --output %s --param depth=2",
             WBCL_TOOLS_DIR, tw, inp, tu_tmp_path("never2.npy"));
    const char *const n2[] = {"depth = 2", "'blocks.0.gamma1'", "depth = 1", NULL};
    run_cli_expect(cmd, 0, n2);
    wbcl_tensor_destroy(out);
    wbcl_tensor_destroy(img);
    wbcl_safetensors_close(gold);
    wbcl_safetensors_close(tgold);
    wbcl_context_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("models");
    TCase *tc = tcase_create("models");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, presets);
    tcase_add_test(tc, sizes_from_weights);
    tcase_add_test(tc, crate_golden);
    tcase_add_loop_test(tc, f16_weights, 0, 3);
    tcase_add_test(tc, tost16_golden);
    tcase_add_test(tc, tost8_golden);
    tcase_add_test(tc, crate_replicated_batch);
    tcase_add_test(tc, tost_replicated_batch);
    tcase_add_test(tc, golden_other_variant);
    tcase_add_test(tc, tost_class_attention_quirk);
    tcase_add_test(tc, tost_batch_consistency);
    tcase_add_test(tc, crate_ista_zero_weight);
    tcase_add_test(tc, crate_swapped_dictionary_fails_golden);
    tcase_add_test(tc, bad_files);
    tcase_add_test(tc, run_tool_writes_nothing_on_failure);
    suite_add_tcase(s, tc);
    tc = tcase_create("nonfinite");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, loaders_refuse_nonfinite, 0, NF_FILES);
    tcase_add_test(tc, models_refuse_inf);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
