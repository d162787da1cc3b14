/* The tuner (wbcl_tune_run, include/wbcl/tuning.h; the engine of tools/wbcl-tune.c): per family, a list of parameter candidates (the default
 * first), each checked against the double reference on a small shape, then timed (median of
 * reps wall-clock calls, each followed by a finish) on the shapes of the CRATE/ToST models; the
 * best (geometric mean of its speed-ups over the default, measured interleaved with the default
 * call by call; ahead by at least 2%, or by what the default gains against itself if that is
 * more: the noise floor) is compared once more against the default and kept only if it is
 * still ahead by half that margin; the winners are written to the device's parameter table. */
#define _POSIX_C_SOURCE 200809L
#include "wbcl/wbcl.h"
#include "blas.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_KEYS (WBCL_CLBLAST_XGEMM_N) /* the largest family: CLBlast's Xgemm set */
#define MAX_CANDS 24
#define MAX_SHAPES 4
#define WIN_MARGIN 1.02 /* a candidate must beat the current best by 2%, or by the noise floor if larger */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void logf_(FILE *log, const char *fmt, ...)
{
    if (!log) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(log, fmt, ap);
    va_end(ap);
    fflush(log);
}
#define LOG(...) logf_(tlog, __VA_ARGS__)

/* deterministic data in [-1, 1) */
static void fill(float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
    }
}

/* normwise relative error max|x - r| / max|r| */
static double rel_err(const float *x, const double *r, size_t n)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)x[i] - r[i]);
        if (!(e <= d)) d = e; /* NaN propagates as a huge error */
        if (fabs(r[i]) > m) m = fabs(r[i]);
    }
    return m > 0 ? d / m : d;
}

static wbcl_status make(wbcl_context *ctx, int nd, const size_t *shape, uint64_t seed, wbcl_tensor **t)
{
    size_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    float *h = malloc(n * sizeof *h);
    if (!h) return WBCL_ERROR_OUT_OF_MEMORY;
    fill(h, n, seed);
    wbcl_status st = wbcl_tensor_create(ctx, nd, shape, WBCL_F32, h, t);
    free(h);
    return st;
}

/* ---- the families ------------------------------------------------------------------- */
typedef struct shape {
    size_t a, b, c;  /* gemm: m, n, k; attention: B*K heads, N, p */
    char label[64];
    wbcl_tensor *t[4];
} shape;

typedef struct family {
    const char *name;
    const char *keys[MAX_KEYS];
    int nkeys;
    long cand[MAX_CANDS][MAX_KEYS];
    int ncand;
    shape shapes[MAX_SHAPES];
    int nshapes;
    double tol;
    wbcl_gemm_backend backend; /* GEMM families: the backend they tune (AUTO for the others) */
    size_t p;                  /* attention families: the head dimension their keys are scoped to */
    char scoped[MAX_KEYS][32]; /* attention families: the storage of their keys, "attention.pP.NAME" */
    wbcl_status (*check)(wbcl_context *ctx, size_t p, double *err); /* p: the family's p (attention) */
    wbcl_status (*run)(wbcl_context *ctx, shape *s);
} family;

/* GEMM: C (m, n) = A (m, k) op(B), NN and NT (the linear layers' X Wᵀ) on 53 x 70 x 67.
 * Tolerance 1e-4 (normwise): float32 sums of 67 products of O(1) values are off by ~1e-6 of
 * the largest entry; a wrong tile, index or padding gives O(1). */
static wbcl_status gemm_check(wbcl_context *ctx, size_t p, double *err)
{
    (void)p;
    const size_t m = 53, n = 70, k = 67;
    const size_t sa[2] = {m, k}, sbn[2] = {k, n}, sbt[2] = {n, k}, sc[2] = {m, n};
    wbcl_tensor *A = NULL, *B = NULL, *Bt = NULL, *C = NULL;
    float *h = malloc(sizeof(float) * (m * k + 2 * k * n + m * n));
    double *ad = malloc(sizeof(double) * (m * k + 2 * k * n + m * n));
    wbcl_status st = h && ad ? WBCL_SUCCESS : WBCL_ERROR_OUT_OF_MEMORY;
    if (!st) st = make(ctx, 2, sa, 11, &A);
    if (!st) st = make(ctx, 2, sbn, 12, &B);
    if (!st) st = make(ctx, 2, sbt, 13, &Bt);
    if (!st) st = wbcl_tensor_create(ctx, 2, sc, WBCL_F32, NULL, &C);
    *err = 0;
    for (int tb = 0; tb < 2 && !st; tb++) {
        float *ha = h, *hb = h + m * k, *hc = hb + k * n;
        double *da = ad, *db = ad + m * k, *dc = db + k * n;
        fill(ha, m * k, 11);
        fill(hb, k * n, tb ? 13 : 12);
        for (size_t i = 0; i < m * k; i++) da[i] = ha[i];
        for (size_t i = 0; i < k * n; i++) db[i] = hb[i];
        st = wbcl_gemm(ctx, WBCL_NO_TRANS, tb ? WBCL_TRANS : WBCL_NO_TRANS, 1.0f, A, tb ? Bt : B, 0.0f, C);
        if (!st) st = wbcl_tensor_read(ctx, C, hc, m * n);
        if (st) break;
        wbcl_ref_gemm(0, tb, m, n, k, 1.0, da, k, db, tb ? k : n, 0.0, dc, n);
        const double e = rel_err(hc, dc, m * n);
        if (!(e <= *err)) *err = e;
    }
    wbcl_tensor_destroy(A);
    wbcl_tensor_destroy(B);
    wbcl_tensor_destroy(Bt);
    wbcl_tensor_destroy(C);
    free(h);
    free(ad);
    return st;
}

static wbcl_status gemm_run(wbcl_context *ctx, shape *s)
{
    if (!s->t[0]) {
        const size_t sa[2] = {s->a, s->c}, sb[2] = {s->b, s->c}, sc[2] = {s->a, s->b};
        wbcl_status st = make(ctx, 2, sa, 21, &s->t[0]);
        if (!st) st = make(ctx, 2, sb, 22, &s->t[1]);
        if (!st) st = wbcl_tensor_create(ctx, 2, sc, WBCL_F32, NULL, &s->t[2]);
        if (st) return st;
    }
    return wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_TRANS, 1.0f, s->t[0], s->t[1], 0.0f, s->t[2]);
}

/* Fused attention, p = 64 (the models' head dimension), 128 and 32 (the tuned keys are scoped to
 * each): B 1, K 2 heads, N 45, softmax and causal, against wbcl_ref_attention_heads. Tolerance 1e-4
 * (normwise): the online softmax in float32 with its 2^x polynomial (relative error ~2e-7)
 * over 45 keys stays near 1e-6; a wrong block, mask or rescale gives O(1e-2) or more. */
static wbcl_status att_check(wbcl_context *ctx, size_t p, double *err)
{
    const size_t B = 1, K = 2, N = 45, n = B * K * N * p;
    const size_t sh[4] = {B, K, N, p};
    wbcl_tensor *q = NULL, *k = NULL, *v = NULL, *o = NULL;
    float *h = malloc(sizeof(float) * 4 * n);
    double *d = malloc(sizeof(double) * 4 * n);
    wbcl_status st = h && d ? WBCL_SUCCESS : WBCL_ERROR_OUT_OF_MEMORY;
    if (!st) st = make(ctx, 4, sh, 31, &q);
    if (!st) st = make(ctx, 4, sh, 32, &k);
    if (!st) st = make(ctx, 4, sh, 33, &v);
    if (!st) st = wbcl_tensor_create(ctx, 4, sh, WBCL_F32, NULL, &o);
    *err = 0;
    if (!st) {
        for (int i = 0; i < 3; i++) {
            fill(h + i * n, n, 31 + (uint64_t)i);
            for (size_t j = 0; j < n; j++) d[i * n + j] = h[i * n + j];
        }
    }
    for (int causal = 0; causal < 2 && !st; causal++) {
        const double scale = 1.0 / sqrt((double)p);
        st = wbcl_attention_softmax_heads(ctx, q, k, v, (float)scale, causal, o);
        if (!st) st = wbcl_tensor_read(ctx, o, h + 3 * n, n);
        if (st) break;
        wbcl_ref_attention_heads(B, K, N, N, p, d, d + n, d + 2 * n, scale, causal, d + 3 * n);
        const double e = rel_err(h + 3 * n, d + 3 * n, n);
        if (!(e <= *err)) *err = e;
    }
    wbcl_tensor_destroy(q);
    wbcl_tensor_destroy(k);
    wbcl_tensor_destroy(v);
    wbcl_tensor_destroy(o);
    free(h);
    free(d);
    return st;
}

static wbcl_status att_run(wbcl_context *ctx, shape *s)
{
    if (!s->t[0]) {
        const size_t sh[4] = {1, s->a, s->b, s->c};
        wbcl_status st = WBCL_SUCCESS;
        for (int i = 0; i < 3 && !st; i++) st = make(ctx, 4, sh, 41 + (uint64_t)i, &s->t[i]);
        if (!st) st = wbcl_tensor_create(ctx, 4, sh, WBCL_F32, NULL, &s->t[3]);
        if (st) return st;
    }
    return wbcl_attention_softmax_heads(ctx, s->t[0], s->t[1], s->t[2], 0.125f, 0, s->t[3]);
}

static void add_shape(family *f, size_t a, size_t b, size_t c, const char *label)
{
    shape *s = &f->shapes[f->nshapes++];
    memset(s, 0, sizeof *s);
    s->a = a, s->b = b, s->c = c;
    snprintf(s->label, sizeof s->label, "%s", label);
}

static void add_cand_v(family *f, const long *v)
{
    for (int i = 0; i < f->ncand; i++)
        if (!memcmp(f->cand[i], v, sizeof(long) * (size_t)f->nkeys)) return; /* the default again */
    if (f->ncand < MAX_CANDS) memcpy(f->cand[f->ncand++], v, sizeof(long) * (size_t)f->nkeys);
}

/* The first three keys' values; a fourth key (a register cap) 0: none */
static void add_cand(family *f, long a, long b, long c)
{
    const long v[MAX_KEYS] = {a, b, c};
    add_cand_v(f, v);
}

/* CLBlast Xgemm sets to try (CLBlast's names and order, wbcl__clblast_xgemm_names): entries of
 * CLBlast's own tuning database for other GPUs (the device each was tuned on in the comment;
 * CLBlast picks one by device name and architecture, so a GPU newer than its database gets a
 * vendor default), then larger tiles of 8 x 8 results per work-item. Sets this device cannot
 * run (work-group size, local memory) are left out before the sweep. */
static const long clblast_sets[][WBCL_CLBLAST_XGEMM_N] = {
    {0, 1, 32, 2, 16, 16, 64, 16, 16, 64, 1, 1, 0, 0, 4, 4},    /* NVIDIA default of CLBlast 1.5  */
    {0, 1, 32, 2, 8, 8, 32, 16, 16, 64, 1, 1, 0, 0, 4, 4},      /* A100 (SM 8.0)                  */
    {0, 1, 32, 2, 32, 32, 128, 8, 8, 64, 0, 1, 1, 1, 4, 4},     /* RTX 4090 (SM 8.9)              */
    {0, 1, 32, 2, 32, 16, 128, 8, 8, 64, 0, 0, 0, 0, 4, 8},     /* RTX 4060 Ti                    */
    {0, 1, 16, 2, 8, 8, 32, 8, 16, 128, 1, 0, 1, 1, 4, 8},      /* RTX 4070 Ti, 4080              */
    {0, 1, 32, 2, 16, 16, 64, 8, 8, 64, 1, 1, 0, 0, 4, 4},      /* RTX 3090                       */
    {0, 1, 32, 2, 16, 16, 64, 8, 8, 32, 1, 1, 0, 0, 4, 4},      /* V100 (SM 7.0)                  */
    {0, 1, 32, 2, 8, 8, 64, 32, 16, 128, 1, 1, 1, 1, 2, 2},     /* RTX 4050 Laptop                */
    {1, 8, 1, 1, 8, 8, 64, 8, 8, 64, 0, 0, 0, 0, 4, 8},         /* SM 8.9 default (GEMMK 1)       */
    {0, 1, 32, 2, 16, 16, 64, 16, 16, 64, 1, 1, 0, 0, 2, 4},    /* Radeon RX Vega                 */
    {0, 1, 32, 2, 8, 8, 128, 16, 32, 128, 1, 1, 1, 1, 4, 2},    /* Radeon RX Vega 10              */
    {1, 8, 1, 1, 32, 32, 64, 8, 8, 128, 0, 0, 0, 0, 2, 4},      /* Apple M1                       */
    {1, 16, 1, 1, 16, 16, 64, 8, 8, 64, 0, 0, 0, 0, 2, 8},      /* Intel Arc A750                 */
    {0, 1, 16, 2, 16, 16, 128, 16, 16, 128, 1, 1, 1, 1, 4, 4},  /* 128 x 128 tiles, 8 x 8 each    */
    {0, 1, 32, 2, 16, 16, 128, 16, 16, 128, 1, 1, 1, 1, 4, 4},  /*   the same with KWG 32         */
    {0, 1, 16, 2, 16, 16, 128, 16, 16, 128, 1, 1, 0, 0, 4, 4},  /*   contiguous per work-item     */
};

/* The default candidate (current values after a reset), then the sweep's list for this device. */
static void setup_family(wbcl_context *ctx, family *f, int quick)
{
    long d[MAX_KEYS] = {0};
    for (int i = 0; i < f->nkeys; i++) wbcl_context_param_get(ctx, f->keys[i], &d[i], NULL);
    f->ncand = 0;
    add_cand_v(f, d);
    const wbcl_device_info *dev = wbcl_context_device(ctx);
    const int gpu = wbcl_context_variant(ctx) == WBCL_VARIANT_GPU;
    if (!strcmp(f->name, "clblast")) {
        for (size_t i = 0; i < sizeof clblast_sets / sizeof clblast_sets[0]; i++)
            if (!wbcl__clblast_xgemm_check(dev, clblast_sets[i], NULL, 0) && (!quick || f->ncand < 2))
                add_cand_v(f, clblast_sets[i]);
    } else if (!strcmp(f->name, "clblast indirect")) {
        /* m*n*k from this size cubed up: the Xgemm kernel (with its padding copies) instead of the direct one */
        static const long t[] = {1, 256, 512, 768, 1024, 2048};
        for (size_t i = 0; i < sizeof t / sizeof t[0] && (!quick || f->ncand < 2); i++) add_cand(f, t[i], 0, 0);
    } else if (!strcmp(f->name, "gemm backend")) {
        /* the other backends, with the earlier families' winners (gemm.backend: wbcl_gemm_backend) */
        const long order[3] = {WBCL_GEMM_CLBLAST, WBCL_GEMM_TILED, WBCL_GEMM_PACKED};
        char why[8];
        for (int i = 0; i < 3; i++)
            if (order[i] != d[0] && (order[i] != WBCL_GEMM_TILED || !wbcl__gemm_tiled_limits(dev, ctx->params.gemm_tiled, ctx->params.gemm_tiled_k, ctx->params.gemm_tiled_db, why, sizeof why)) &&
                (!quick || f->ncand < 2))
                add_cand(f, order[i], 0, 0);
    } else if (!strcmp(f->name, "gemm tiled")) {
        /* tile of C per work-group x k per local-memory slice x double buffering x float4 loads
         * (cl/gemm_tiled.cl); the two last apart as well as together, so that a table tells which helps
         * (rows of 5: the fifth key, a register cap where there is one, 0: none) */
        static const long t[][5] = {{0, 8, 1, 1},   {128, 8, 0, 0},  {128, 8, 1, 1},  {128, 8, 0, 1},
                                    {128, 8, 1, 0},  {128, 16, 0, 0}, {128, 16, 1, 1}, {128, 16, 0, 1},
                                    {64, 8, 0, 0},   {64, 16, 0, 0},  {64, 16, 1, 1},  {64, 32, 0, 0},
                                    {128, 32, 0, 0}};
        for (size_t i = 0; i < sizeof t / sizeof t[0] && (!quick || f->ncand < 2); i++) add_cand_v(f, t[i]);
        /* NVIDIA's compiler (gemm.tiled.maxrreg, the fifth key where the device takes it): the 128-tiles
         * within 128 registers, two work-groups of 256 per 64 K-register SM (ptxas here: 125 at tk 8, 150
         * at tk 16, so one work-group unless capped) */
        static const long r[][5] = {{128, 16, 0, 0, 128}, {128, 8, 0, 0, 128}, {128, 16, 1, 1, 128}};
        for (size_t i = 0; f->nkeys > 4 && i < sizeof r / sizeof r[0] && !quick; i++) add_cand_v(f, r[i]);
    } else if (!strcmp(f->name, "gemm L2 block")) {
        /* KiB of packed A panels per block (no new program: the same kernel, another launch grid order) */
        static const long t[] = {256, 512, 2048, 4096};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) add_cand(f, t[i], 0, 0);
    } else if (!strcmp(f->name, "gemm")) {
        /* register tiles MR x NR: about 3/4 of the vector registers as accumulators */
        if (dev->native_vector_width_float >= 16 || gpu) {
            static const long t[][2] = {{12, 32}, {8, 32}, {14, 32}, {10, 32}, {6, 64}, {4, 64}, {16, 16}, {6, 32}};
            for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) add_cand(f, t[i][0], t[i][1], 0);
        } else {
            static const long t[][2] = {{6, 16}, {4, 16}, {8, 16}, {3, 32}, {4, 32}, {8, 8}, {12, 8}};
            for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) add_cand(f, t[i][0], t[i][1], 0);
        }
    } else if (gpu) {
        /* the register-tiled kernel's two forms first (their bq, bk are unused; p = 128 has the first
         * only), then the one-query kernel's tiles */
        add_cand(f, d[0], d[1], 1);
        if (f->p != 128) add_cand(f, d[0], d[1], 2);
        /* NVIDIA's compiler (attention.maxrreg, the fourth key where the device takes it): both forms
         * within 128 registers, four work-groups of 128 per SM instead of three (ptxas here: 145 and 158;
         * p = 128: 163) */
        if (f->nkeys > 3) {
            const long r1[4] = {d[0], d[1], 1, 128}, r2[4] = {d[0], d[1], 2, 128};
            add_cand_v(f, r1);
            if (f->p != 128) add_cand_v(f, r2);
        }
        static const long t[][2] = {{64, 32}, {32, 32}, {128, 32}, {64, 16}, {128, 16}, {256, 16}, {64, 64}, {32, 64}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) add_cand(f, t[i][0], t[i][1], 0);
    } else if (dev->native_vector_width_float >= 16 && f->p == 128) {
        /* p = 128 (8 vectors of 16 a row): the default QB 4 in passes of 4 vectors, more queries in
         * shorter passes, more or fewer groups, and the earlier default (QB 2, whole rows) */
        static const long t[][5] = {{4, 4, 16, 4, 2}, {5, 4, 16, 4, 2}, {4, 8, 16, 4, 2},  {4, 2, 16, 4, 2},
                                    {5, 2, 16, 4, 2}, {5, 8, 16, 4, 2}, {3, 4, 16, 4, 2},  {4, 4, 16, 2, 2},
                                    {8, 4, 16, 2, 1}, {8, 8, 16, 2, 1}, {8, 2, 16, 2, 1},  {6, 4, 16, 4, 1},
                                    {6, 4, 16, 2, 1}, {12, 2, 16, 1, 1}, {2, 4, 16, 8, 2}, {4, 4, 8, 8, 2}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) add_cand_v(f, t[i]);
    } else if (dev->native_vector_width_float >= 16 && f->p == 32) {
        /* p = 32 (2 vectors of 16 a row): the default QB 4, more queries (QB 6 and 8: 1.06-1.14x QB 4 on
         * Zen 5 at p = 16...48, perf/RESULTS.md, fourteenth session), other group counts */
        static const long t[][5] = {{4, 4, 16, 2, 2}, {6, 4, 16, 2, 2}, {8, 4, 16, 2, 2}, {5, 4, 16, 2, 2},
                                    {7, 4, 16, 2, 2}, {6, 2, 16, 2, 2}, {6, 8, 16, 2, 2}, {8, 2, 16, 2, 2},
                                    {4, 8, 16, 2, 2}, {12, 2, 16, 2, 1}, {8, 4, 16, 2, 1}, {2, 8, 16, 2, 2}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) add_cand_v(f, t[i]);
    } else if (f->p == 32) {
        /* p = 32 where the native vector is narrower than 16 (the default QB 6, G 3, one vector a pass) */
        static const long t[][5] = {{6, 3, 16, 1, 1}, {6, 3, 16, 2, 1}, {6, 2, 16, 1, 1}, {6, 4, 16, 1, 1},
                                    {5, 3, 16, 1, 1}, {4, 4, 16, 2, 1}, {2, 8, 16, 2, 2}, {6, 3, 8, 4, 1}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) add_cand_v(f, t[i]);
    } else if (f->p == 128) {
        /* p = 128 where the native vector is narrower than 16 (the default QB 6, G 3, one vector a pass) */
        static const long t[][5] = {{6, 3, 16, 1, 1}, {6, 2, 16, 1, 1}, {6, 4, 16, 1, 1}, {5, 3, 16, 1, 1},
                                    {4, 4, 16, 1, 1}, {4, 4, 16, 2, 1}, {3, 4, 16, 2, 1}, {2, 4, 16, 2, 2},
                                    {6, 3, 8, 2, 1},  {4, 4, 8, 2, 1}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) add_cand_v(f, t[i]);
    } else if (dev->native_vector_width_float >= 16) {
        /* queries per group, groups, vector width, vectors per O += P V pass (p = 64: the whole row is
         * 4 vectors of 16 or 8 of 8), score panels per pass (1: one 16-key panel at a time, room for
         * twice the queries); AVX-512's 32 registers of 16 floats */
        static const long t[][5] = {{4, 4, 16, 4, 2},  {4, 8, 16, 4, 2}, {4, 16, 16, 4, 2}, {4, 2, 16, 4, 2},
                                    {2, 8, 16, 4, 2},  {4, 1, 16, 4, 2}, {2, 4, 16, 4, 2},  {3, 4, 16, 4, 2},
                                    {5, 4, 16, 4, 2},  {6, 2, 16, 4, 2}, {4, 4, 8, 8, 2},   {1, 8, 16, 4, 2},
                                    {4, 4, 16, 2, 2},  {8, 4, 16, 2, 1}, {8, 8, 16, 2, 1},  {8, 2, 16, 2, 1},
                                    {12, 2, 16, 2, 1}, {12, 4, 16, 1, 1}, {6, 4, 16, 4, 1}, {6, 8, 16, 2, 1}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) add_cand_v(f, t[i]);
    } else {
        /* the same where the native vector is narrower than 16 (AVX2: 16 registers of 8 floats; the
         * default 6 queries, one panel a pass, 16 floats of O a pass: 12 accumulators either way; listed
         * first, as a table may have set another default) */
        static const long t[][5] = {{6, 3, 16, 1, 1},  {6, 2, 16, 1, 1}, {6, 4, 16, 1, 1},  {6, 6, 16, 1, 1},
                                    {6, 8, 16, 1, 1},  {5, 3, 16, 1, 1}, {5, 4, 16, 1, 1},  {4, 4, 16, 1, 1},
                                    {3, 4, 16, 1, 1},  {6, 3, 8, 2, 1},  {4, 4, 8, 2, 1},   {2, 8, 16, 2, 2},
                                    {2, 4, 16, 2, 2},  {2, 16, 16, 2, 2}, {2, 8, 16, 4, 2}, {1, 16, 16, 2, 2},
                                    {2, 8, 8, 4, 2}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) add_cand_v(f, t[i]);
    }
    if (f->backend == WBCL_GEMM_CLBLAST || f->backend == WBCL_GEMM_TILED || !strcmp(f->name, "gemm backend")) {
        if (quick) add_shape(f, 40, 48, 24, "40x24->48");
        else if (gpu) {
            add_shape(f, 1576, 1536, 384, "(8*197)x384->1536");
            add_shape(f, 12608, 1536, 384, "(64*197)x384->1536");
            add_shape(f, 1024, 1024, 1024, "1024^3");
            add_shape(f, 4096, 4096, 4096, "4096^3");
        } else {
            add_shape(f, 256, 256, 256, "256^3");
            add_shape(f, 512, 512, 512, "512^3");
        }
    } else if (f->run == gemm_run) {
        if (quick) add_shape(f, 40, 48, 24, "40x24->48");
        else {
            add_shape(f, 1576, 1536, 384, "(8*197)x384->1536");
            add_shape(f, 1576, 384, 1536, "(8*197)x1536->384");
            add_shape(f, 1024, 1024, 1024, "1024^3");
        }
    } else if (f->p == 32) {
        if (quick) add_shape(f, 2, 64, 32, "BK 2 N 64 p 32");
        else {
            add_shape(f, 8, 1024, 32, "BK 8 N 1024 p 32");
            add_shape(f, 4, 4096, 32, "BK 4 N 4096 p 32");
        }
    } else if (f->p == 128) {
        if (quick) add_shape(f, 2, 64, 128, "BK 2 N 64 p 128");
        else {
            add_shape(f, 8, 1024, 128, "BK 8 N 1024 p 128");
            add_shape(f, 4, 2048, 128, "BK 4 N 2048 p 128");
        }
    } else {
        if (quick) add_shape(f, 2, 64, 64, "BK 2 N 64 p 64");
        else {
            add_shape(f, 48, 197, 64, "BK 48 N 197 p 64");
            add_shape(f, 8, 1024, 64, "BK 8 N 1024 p 64");
            add_shape(f, 4, 4096, 64, "BK 4 N 4096 p 64");
        }
    }
}

static void free_shapes(family *f)
{
    for (int i = 0; i < f->nshapes; i++)
        for (int j = 0; j < 4; j++) {
            wbcl_tensor_destroy(f->shapes[i].t[j]);
            f->shapes[i].t[j] = NULL;
        }
}

static void cand_str(const family *f, const long *v, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < f->nkeys && n < len; i++) {
        const char *k = strrchr(f->keys[i], '.');
        n += (size_t)snprintf(buf + n, len - n, "%s%s=%ld", i ? " " : "", k ? k + 1 : f->keys[i], v[i]);
    }
}

/* Sets a candidate's keys; on a validation failure restores `back` and returns the status. */
static wbcl_status set_cand(wbcl_context *ctx, const family *f, const long *v, const long *back)
{
    for (int i = 0; i < f->nkeys; i++) {
        wbcl_status st = wbcl_context_set_param(ctx, f->keys[i], v[i]);
        if (st) {
            for (int j = 0; j < i; j++) wbcl_context_set_param(ctx, f->keys[j], back[j]);
            return st;
        }
    }
    if (wbcl_context_gemm_backend(ctx) == WBCL_GEMM_CLBLAST) wbcl__clblast_apply(ctx); /* not inside the timed call */
    return WBCL_SUCCESS;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_d);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* One timed call (seconds), or < 0 on failure. */
static double time_call(wbcl_context *ctx, const family *f, shape *s, wbcl_status *st)
{
    const double t0 = now_s();
    *st = f->run(ctx, s);
    if (!*st) *st = wbcl_context_finish(ctx);
    return *st ? -1.0 : now_s() - t0;
}

/* Candidate `v` against the default `d`, interleaved call by call so that both see the same
 * load: per shape a warm-up call of each (builds, first-launch compiles), then reps pairs.
 * Medians in seconds into med_v, med_d. Leaves the default set. */
static wbcl_status time_paired(wbcl_context *ctx, family *f, const long *v, const long *d, int reps, double *med_v,
                               double *med_d)
{
    double tv[64], td[64];
    wbcl_status st = WBCL_SUCCESS;
    for (int s = 0; s < f->nshapes && !st; s++) {
        shape *sh = &f->shapes[s];
        if ((st = set_cand(ctx, f, v, d)) || time_call(ctx, f, sh, &st) < 0) break;
        if ((st = set_cand(ctx, f, d, d)) || time_call(ctx, f, sh, &st) < 0) break;
        for (int k = 0; k < reps && !st; k++) {
            if ((st = set_cand(ctx, f, v, d)) || (tv[k] = time_call(ctx, f, sh, &st)) < 0) break;
            if ((st = set_cand(ctx, f, d, d)) || (td[k] = time_call(ctx, f, sh, &st)) < 0) break;
        }
        if (!st) {
            med_v[s] = median(tv, reps);
            med_d[s] = median(td, reps);
        }
    }
    set_cand(ctx, f, d, d);
    return st;
}

/* Geometric mean over the shapes of default time / candidate time (> 1: the candidate is faster). */
static double score_of(const family *f, const double *tv, const double *td)
{
    double lg = 0;
    for (int s = 0; s < f->nshapes; s++) lg += log(td[s] / tv[s]);
    return exp(lg / f->nshapes);
}

/* ---- the sweep of one family ---------------------------------------------------------- */
typedef struct result {
    long best[MAX_KEYS];
    double def_ms[MAX_SHAPES], best_ms[MAX_SHAPES];
    int tried, rejected, wrong, untried, kept_default;
} result;

/* The run's state: the context (replaced when a candidate leaves it unusable), the families and
 * their results so far. */
typedef struct session {
    wbcl_context *ctx;
    const wbcl_tune_opts *o;
    family *fams;
    result *res;
    int cur;                        /* the family being swept */
    wbcl_gemm_backend own_backend;  /* the device's GEMM backend by default */
    int revived;                    /* contexts replaced */
    int lost;                       /* no working context could be made: the sweep stops */
} session;

/* The GEMM backend a family is measured on: its own (GEMM families), the table's choice (the
 * backend family), else the device's. */
static wbcl_gemm_backend family_backend(const family *f, wbcl_gemm_backend own)
{
    return !strcmp(f->name, "gemm backend") ? WBCL_GEMM_AUTO : f->backend ? f->backend : own;
}

/* After a candidate failed: does the context still work (the default's check, then a finish)?
 * A candidate can leave it unusable: a kernel built with it that faults (an access out of
 * bounds at a shape the check did not use) makes NVIDIA's driver fail every later call of the
 * context with CL_INVALID_COMMAND_QUEUE, and every later build. Then a new context on the same
 * device replaces it, with the built-in defaults and the earlier families' winners set again,
 * and the sweep goes on (the old context's CLBlast programs stay in CLBlast's cache until the
 * process ends). 0 if the context works or was replaced by one that does. NVIDIA's driver
 * (580, H200) refuses a new context in the process after such a fault (CL_UNKNOWN_ERROR): then
 * ss->lost is set and ss->ctx stays one that can still write the table (host-side only). */
static wbcl_status revive(session *ss, FILE *tlog)
{
    family *f = &ss->fams[ss->cur];
    double err = 0;
    wbcl_status st = set_cand(ss->ctx, f, f->cand[0], f->cand[0]);
    if (!st) st = f->check(ss->ctx, f->p, &err);
    if (!st) st = wbcl_context_finish(ss->ctx);
    if (!st) return WBCL_SUCCESS;
    LOG("  the context fails since (%s): a new one on the same device\n", wbcl_context_last_error(ss->ctx));
    free_shapes(f); /* the shapes' tensors: made again in the new context when first timed */
    char why[512] = "";
    wbcl_context *fresh = NULL;
    if ((st = wbcl_context_create(ss->o->device, &fresh, why, sizeof why))) {
        LOG("  wbcl-tune: a new context failed: %s\n", why);
        ss->lost = 1;
        return st;
    }
    wbcl_context_destroy(ss->ctx);
    ss->ctx = fresh;
    wbcl_context_reset_params(ss->ctx);
    for (int i = 0; i < ss->cur; i++) set_cand(ss->ctx, &ss->fams[i], ss->res[i].best, ss->fams[i].cand[0]);
    wbcl_context_set_gemm_backend(ss->ctx, family_backend(f, ss->own_backend));
    ss->revived++;
    if (!(st = set_cand(ss->ctx, f, f->cand[0], f->cand[0])) && !(st = f->check(ss->ctx, f->p, &err)))
        st = wbcl_context_finish(ss->ctx);
    if (st) {
        LOG("  wbcl-tune: the new context fails too: %s\n", wbcl_context_last_error(ss->ctx));
        ss->lost = 1;
    }
    return st;
}

static wbcl_status sweep(session *ss, double deadline, int reps, FILE *out, result *r)
{
    FILE *tlog = out;
    family *f = &ss->fams[ss->cur];
    wbcl_context *ctx = ss->ctx;
    memset(r, 0, sizeof *r);
    double tv[MAX_SHAPES], td[MAX_SHAPES], best_score = 1.0, margin = WIN_MARGIN;
    char cs[320];
    const long *dflt = f->cand[0];
    memcpy(r->best, dflt, sizeof r->best);
    for (int c = 0; c < f->ncand; c++) {
        if (c > 0 && now_s() > deadline) {
            r->untried = f->ncand - c;
            LOG("  budget reached: %d candidate(s) left untried\n", r->untried);
            break;
        }
        cand_str(f, f->cand[c], cs, sizeof cs);
        wbcl_status st = set_cand(ctx, f, f->cand[c], dflt);
        if (st) {
            LOG("  [%2d/%d] %-24s rejected by validation: %s\n", c + 1, f->ncand, cs, wbcl_context_last_error(ctx));
            r->rejected++;
            continue;
        }
        double err = 0;
        st = f->check(ctx, f->p, &err);
        if (st || !(err <= f->tol)) {
            if (st) LOG("  [%2d/%d] %-24s failed: %s\n", c + 1, f->ncand, cs, wbcl_context_last_error(ctx));
            else LOG("  [%2d/%d] %-24s WRONG RESULTS: error %.3g against the reference (bound %.1g): rejected\n",
                     c + 1, f->ncand, cs, err, f->tol);
            if (c == 0) return st ? st : WBCL_ERROR_NUMERIC; /* the defaults themselves: stop */
            if (st) r->rejected++;
            else r->wrong++;
            if ((st = revive(ss, tlog))) return st;
            ctx = ss->ctx;
            continue;
        }
        if (c == 0) { /* the default against itself: the noise floor of the pairing */
            st = time_paired(ctx, f, dflt, dflt, reps, tv, td);
            if (st) return st;
            r->tried++;
            LOG("  [%2d/%d] %-24s (default) check %.1e,", c + 1, f->ncand, cs, err);
            for (int s = 0; s < f->nshapes; s++) LOG(" %.3f ms", 1e3 * td[s]);
            /* the noise floor: a win must exceed what the default gains against itself */
            const double self = score_of(f, tv, td), noise = self > 1.0 ? self : 1.0 / self;
            if (noise > margin) margin = noise;
            LOG("  (against itself x%.3f: a winner must beat x%.3f)\n", self, margin);
            continue;
        }
        st = time_paired(ctx, f, f->cand[c], dflt, reps, tv, td);
        if (st) {
            LOG("  [%2d/%d] %-24s failed while timing: %s\n", c + 1, f->ncand, cs, wbcl_context_last_error(ctx));
            r->rejected++;
            if ((st = revive(ss, tlog))) return st;
            ctx = ss->ctx;
            continue;
        }
        r->tried++;
        const double score = score_of(f, tv, td);
        LOG("  [%2d/%d] %-24s check %.1e,", c + 1, f->ncand, cs, err);
        for (int s = 0; s < f->nshapes; s++) LOG(" %.3f ms (default %.3f)", 1e3 * tv[s], 1e3 * td[s]);
        LOG("  x%.3f%s\n", score, score > best_score * margin ? "  best so far" : "");
        if (score > best_score * margin) {
            best_score = score;
            memcpy(r->best, f->cand[c], sizeof r->best);
        }
    }
    /* the winner against the default once more, interleaved: it must hold its lead */
    wbcl_status st = time_paired(ctx, f, r->best, dflt, reps, tv, td);
    if (st && memcmp(r->best, dflt, sizeof r->best)) {
        cand_str(f, r->best, cs, sizeof cs);
        LOG("  %s failed when measured again (%s): the default is kept\n", cs, wbcl_context_last_error(ctx));
        if ((st = revive(ss, tlog))) return st;
        ctx = ss->ctx;
        memcpy(r->best, dflt, sizeof r->best);
        r->kept_default = 1;
        st = time_paired(ctx, f, dflt, dflt, reps, tv, td);
    }
    if (st) return st;
    if (memcmp(r->best, dflt, sizeof r->best) && !(score_of(f, tv, td) > sqrt(margin))) {
        cand_str(f, r->best, cs, sizeof cs);
        LOG("  %s did not hold its lead when measured again (x%.3f): the default is kept\n", cs, score_of(f, tv, td));
        memcpy(r->best, dflt, sizeof r->best);
        r->kept_default = 1;
        if ((st = time_paired(ctx, f, dflt, dflt, reps, tv, td))) return st;
    }
    for (int s = 0; s < f->nshapes; s++) {
        r->def_ms[s] = 1e3 * td[s];
        r->best_ms[s] = 1e3 * tv[s];
    }
    return WBCL_SUCCESS;
}

/* ---- the run ----------------------------------------------------------------------------- */
/* The next GEMM family: checked and timed through wbcl_gemm on `backend`; keys set by the caller. */
static family *gemm_family(family *fams, int *nf, const char *name, wbcl_gemm_backend backend)
{
    family *f = &fams[(*nf)++];
    f->name = name;
    f->tol = 1e-4;
    f->backend = backend;
    f->check = gemm_check;
    f->run = gemm_run;
    return f;
}

wbcl_status wbcl_tune_run(const wbcl_tune_opts *o, FILE *tlog, char *path_out, size_t path_len)
{
    if (path_out && path_len) path_out[0] = 0;
    const int all = !o->family || !strcmp(o->family, "all");
    if (!all && strcmp(o->family, "gemm") && strcmp(o->family, "attention") && strcmp(o->family, "clblast") &&
        strcmp(o->family, "gemm_tiled") && strcmp(o->family, "gemm_backend")) {
        LOG("wbcl-tune: unknown family '%s' (gemm, gemm_tiled, clblast, gemm_backend, attention or all)\n",
            o->family);
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    int reps = o->reps > 0 ? o->reps : o->quick ? 1 : 5;
    if (reps > 64) reps = 64;
    char err[1024] = "";
    wbcl_context *ctx = NULL;
    wbcl_status st = wbcl_context_create(o->device, &ctx, err, sizeof err);
    if (st) {
        LOG("wbcl-tune: %s\n", err);
        return st;
    }
    const wbcl_device_info *dev = wbcl_context_device(ctx);
    char path[4096];
    if (o->out) snprintf(path, sizeof path, "%s", o->out);
    else if ((st = wbcl_tuning_path(ctx, path, sizeof path))) {
        LOG("wbcl-tune: %s; give --out FILE\n", wbcl_context_last_error(ctx));
        wbcl_context_destroy(ctx);
        return st;
    }
    /* the sweep measures against the built-in defaults, whatever table this context loaded */
    wbcl_context_reset_params(ctx);
    const wbcl_gemm_backend own_backend = wbcl_context_gemm_backend(ctx);
    if (own_backend != WBCL_GEMM_PACKED && (all || !strcmp(o->family, "gemm")))
        LOG("note: GEMM runs on %s on this device by default; the gemm family tunes wbcl's packed kernel\n"
            "      (selected with wbcl_context_set_gemm_backend; only with --op gemm on this device), the\n"
            "      clblast family CLBlast's parameters, the gemm_tiled family wbcl's tiled kernel\n",
            own_backend == WBCL_GEMM_TILED ? "wbcl's tiled kernel" : "CLBlast");
    LOG("wbcl-tune: device '%s' (%s, driver %s), %s variant, budget %.0f s, %d timed call(s) per shape\n"
        "  (wall-clock medians; on a machine shared with other work the figures move with its load)\n",
        dev->name, dev->vendor, dev->driver_version, wbcl_variant_name(wbcl_context_variant(ctx)), o->budget_s, reps);

    family fams[10];
    memset(fams, 0, sizeof fams);
    int nf = 0;
    /* wbcl's packed kernel: where it is the device's GEMM (CPUs), or when asked for by name (the
     * whole sweep's budget is shared by its families: none goes to a kernel the device does not use) */
    if ((all && own_backend == WBCL_GEMM_PACKED) || (o->family && !strcmp(o->family, "gemm"))) {
        family *f = gemm_family(fams, &nf, "gemm", WBCL_GEMM_PACKED);
        f->keys[0] = "gemm.mr", f->keys[1] = "gemm.nr";
        f->nkeys = 2;
        /* then the L2 blocking, with the winning tile */
        f = gemm_family(fams, &nf, "gemm L2 block", WBCL_GEMM_PACKED);
        f->keys[0] = "gemm.a_block_kib";
        f->nkeys = 1;
    }
    /* CLBlast's Xgemm set, then its direct/indirect threshold with the winning set: on devices whose
     * GEMM is not the packed kernel (GPUs), or when asked for by name */
    if ((all && own_backend != WBCL_GEMM_PACKED) || (o->family && !strcmp(o->family, "clblast"))) {
        family *f = gemm_family(fams, &nf, "clblast", WBCL_GEMM_CLBLAST);
        for (int i = 0; i < WBCL_CLBLAST_XGEMM_N; i++) f->keys[i] = wbcl__clblast_keys[i];
        f->nkeys = WBCL_CLBLAST_XGEMM_N;
        f = gemm_family(fams, &nf, "clblast indirect", WBCL_GEMM_CLBLAST);
        f->keys[0] = wbcl__clblast_keys[WBCL_CLBLAST_XGEMM_N];
        f->nkeys = 1;
    }
    /* wbcl's tiled GEMM (WBCL_GEMM_TILED): on GPUs, or when asked for by name;
     * not on a device too small for it */
    if (((all && own_backend != WBCL_GEMM_PACKED) || (o->family && !strcmp(o->family, "gemm_tiled"))) &&
        wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_TILED) == WBCL_SUCCESS) {
        family *f = gemm_family(fams, &nf, "gemm tiled", WBCL_GEMM_TILED);
        f->keys[0] = "gemm.tiled.tile", f->keys[1] = "gemm.tiled.tk", f->keys[2] = "gemm.tiled.db";
        f->keys[3] = "gemm.tiled.v4", f->keys[4] = "gemm.tiled.maxrreg";
        f->nkeys = dev->has_nv_compiler_options ? 5 : 4;
    } else if (o->family && !strcmp(o->family, "gemm_tiled"))
        LOG("wbcl-tune: gemm_tiled: %s\n", wbcl_context_last_error(ctx));
    wbcl_context_set_gemm_backend(ctx, own_backend);
    /* then which backend the device's GEMM uses (gemm.backend), each with the winners above: on
     * GPUs, or when asked for by name */
    if ((all && own_backend != WBCL_GEMM_PACKED) || (o->family && !strcmp(o->family, "gemm_backend"))) {
        family *f = gemm_family(fams, &nf, "gemm backend", WBCL_GEMM_AUTO);
        f->keys[0] = "gemm.backend";
        f->nkeys = 1;
    }
    /* the fused attention at p = 64 (the models' heads), then p = 128 and 32, each with keys scoped to its p */
    for (int pi = 0; pi < 3 && (all || !strcmp(o->family, "attention")); pi++) {
        static const char *const gpu_names[4] = {"bq", "bk", "tiled", "maxrreg"};
        static const char *const cpu_names[5] = {"qb", "g", "vw", "vc", "sp"};
        static const char *const names[3] = {"attention", "attention p128", "attention p32"};
        static const size_t ps[3] = {64, 128, 32};
        family *f = &fams[nf++];
        f->name = names[pi];
        f->p = ps[pi];
        const int gpu = wbcl_context_variant(ctx) == WBCL_VARIANT_GPU;
        f->nkeys = gpu ? (dev->has_nv_compiler_options ? 4 : 3) : 5;
        for (int k = 0; k < (gpu ? 4 : 5); k++) {
            snprintf(f->scoped[k], sizeof f->scoped[k], "attention.p%zu.%s", f->p, gpu ? gpu_names[k] : cpu_names[k]);
            f->keys[k] = f->scoped[k];
        }
        f->tol = 1e-4;
        f->check = att_check;
        f->run = att_run;
    }
    const double t0 = now_s();
    result res[10];
    char summary[4096] = "";
    size_t sn = 0;
    int failed = 0, done = nf; /* done: the families finished (all, unless the device was lost) */
    session ss = {ctx, o, fams, res, 0, own_backend, 0, 0};
    for (int i = 0; i < nf && !failed && done == nf; i++) {
        family *f = &fams[i];
        /* the backend family leaves the choice to its key (AUTO: gemm.backend decides) */
        wbcl_context_set_gemm_backend(ctx, family_backend(f, own_backend));
        setup_family(ctx, f, o->quick);
        /* the budget left is shared evenly by the families still to sweep */
        const double deadline = now_s() + (o->budget_s - (now_s() - t0)) / (nf - i);
        LOG("%s: %d candidate(s) over %d shape(s); checks against the double reference first\n", f->name, f->ncand,
            f->nshapes);
        ss.cur = i;
        st = sweep(&ss, deadline, reps, tlog, &res[i]);
        ctx = ss.ctx; /* a new one if a candidate left the old one unusable */
        if (st && ss.lost) {
            /* the device is gone for this process: the table keeps the families finished before this
             * one; this one and the later ones keep their defaults (not written) */
            LOG("wbcl-tune: %s: a candidate left the device unusable for this process and no new context could\n"
                "  be made; the table gets the %d famil%s finished before it, the others keep their defaults\n"
                "  (run wbcl-tune --op FAMILY for them in a new process)\n",
                f->name, i, i == 1 ? "y" : "ies");
            done = i;
            sn += (size_t)snprintf(summary + sn, sizeof summary - sn,
                                   "cut short in family %s: a candidate left the device unusable (the later families "
                                   "keep their defaults)\n",
                                   f->name);
        } else if (st) {
            LOG("wbcl-tune: %s: the defaults fail (%s): nothing written\n", f->name,
                st == WBCL_ERROR_NUMERIC ? "wrong results" : wbcl_context_last_error(ctx));
            failed = 1;
        } else
            set_cand(ctx, f, res[i].best, f->cand[0]); /* later families measure on top of it */
        free_shapes(f);
    }
    if (!failed) {
        /* the table: every family's winner (the default when nothing beat it) */
        wbcl_context_reset_params(ctx);
        LOG("\nresult (winner against default, medians of %d interleaved call pairs, same process):\n", reps);
        for (int i = 0; i < done; i++) {
            family *f = &fams[i];
            result *r = &res[i];
            char cs[320], ds[320];
            cand_str(f, r->best, cs, sizeof cs);
            cand_str(f, f->cand[0], ds, sizeof ds);
            set_cand(ctx, f, r->best, f->cand[0]);
            LOG("  %s: %s (default %s); %d timed, %d wrong, %d rejected, %d untried\n", f->name, cs, ds, r->tried,
                r->wrong, r->rejected, r->untried);
            sn += (size_t)snprintf(summary + sn, sizeof summary - sn, "%s: %s (default %s)\n", f->name, cs, ds);
            for (int s = 0; s < f->nshapes && sn < sizeof summary; s++) {
                LOG("    %-22s default %9.3f ms  tuned %9.3f ms  ratio %.3f\n", f->shapes[s].label, r->def_ms[s],
                    r->best_ms[s], r->def_ms[s] / r->best_ms[s]);
                sn += (size_t)snprintf(summary + sn, sizeof summary - sn, "  %s: default %.3f ms, tuned %.3f ms, x%.3f\n",
                                       f->shapes[s].label, r->def_ms[s], r->best_ms[s], r->def_ms[s] / r->best_ms[s]);
            }
        }
        if (ss.revived && sn < sizeof summary) {
            LOG("  note: %d time(s) a candidate left the context unusable and a new one took its place\n", ss.revived);
            sn += (size_t)snprintf(summary + sn, sizeof summary - sn,
                                   "%d time(s) a candidate left the context unusable (a new one took its place)\n",
                                   ss.revived);
        }
        char comment[4608];
        snprintf(comment, sizeof comment, "written by wbcl-tune (budget %.0f s, %d call(s) per shape%s)\n%s", o->budget_s,
                 reps, o->quick ? ", quick test shapes" : "", summary);
        st = wbcl_context_save_params(ctx, path, comment);
        if (st) LOG("wbcl-tune: %s\n", wbcl_context_last_error(ctx));
        else {
            LOG("wrote %s (%.1f s)%s\n", path, now_s() - t0, done < nf ? ", cut short" : "");
            if (path_out && path_len) snprintf(path_out, path_len, "%s", path);
            if (done < nf) st = WBCL_ERROR_OPENCL; /* written, but the sweep is incomplete */
        }
    }
    wbcl_context_destroy(ctx);
    return st;
}
