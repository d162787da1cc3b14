/* Benchmark of the shift-invariant ReduNet (wbcl_circulant_fit: per layer the per-frequency construction,
 * the application and the logged objective) on synthetic multichannel signals, and of the dense
 * block-circulant construction it replaces. perf/run_circulant.sh runs it interleaved with the NumPy peer
 * (perf/peers/circulant_numpy.py) on the same data.
 *
 *   bench_circulant --write-data DIR        writes DIR/{1d,2d}_{x,y}.npy (features, labels) and exits
 *   bench_circulant --case 1d|2d [--layers L] [--reps N]
 *                                           after one untimed warm-up fit (kernel builds, FFT plans),
 *                                           one line per repetition: "wbcl SECONDS_PER_LAYER FINAL_DR",
 *                                           then "construct SECONDS": the best 1-layer fit minus the best
 *                                           1-layer apply (max(N, 5) runs each): the per-frequency
 *                                           construction + the logged objective
 *                                           --every-layer: a (no-op) progress callback, so that the fit
 *                                           computes the logged objective of every layer as the NumPy peer
 *                                           does (without it, a layer whose predictions are all right takes
 *                                           the objective from the next layer's construction) and reads it
 *                                           back layer by layer
 *                                           --profile: then N more fits with every kernel
 *                                           timed (wbcl_context_set_timing: each launch waited for),
 *                                           "profile KERNEL MS LAUNCHES" per layer, largest first
 *                                           (FFTs are clFFT's, not listed), and exits
 *                                           --param KEY=VALUE: a kernel parameter for the context
 *                                           (wbcl_context_set_param), e.g. circulant.wg=0 on a GPU
 *   bench_circulant --size C T [--layers L] [--reps N]
 *                                           as --case for a 1-D problem of C channels and length T
 *                                           (same m, K; the curve of the plot)
 *   bench_circulant --dense C T [--reps N]  the dense construction of one layer at T·C = n with K = 10
 *                                           classes, m = 100: circ(Z) (n x mT) built from all shifts,
 *                                           the K+1 Gram matrices by ssyrk, the K+1 inverses
 *                                           a (I + (a/T) G)^-1 by spotrf + spotri (OpenBLAS, float32);
 *                                           prints "dense n SECONDS" (median of N)
 *   bench_circulant --device-info           one line: device, platform, driver
 * Cases: 1d  m = 100 (K = 10 x 10), C = 20, T = 200 (book Example 5.2's polar-MNIST size);
 *        2d  m = 100 (K = 10 x 10), C = 16, 28 x 28.
 * Data: class k, channel c: sin(2 pi f_{k,c} t / T + phase_b) (2-D: a plane wave) + 0.3 N(0, 1). */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wbcl/circulant.h"
#include "wbcl/io.h"
#include "wbcl/wbcl.h"

#include "kernel_profile.h"

extern void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info);
extern void spotri_(const char *uplo, const int *n, float *a, const int *lda, int *info);

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng_state = 2024;
static double urand(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}
static double nrand(void)
{
    double u = urand(), v = urand();
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* X (m, C, H, W) with m = K per: class k = b / per. */
static void make_data(size_t K, size_t per, size_t C, size_t H, size_t W, float *X, int *y)
{
    rng_state = 2024;
    for (size_t b = 0; b < K * per; b++) {
        size_t k = b / per;
        double ph = 6.283185307179586 * urand();
        for (size_t c = 0; c < C; c++) {
            double fw = (double)(1 + (k * 7 + c * 3) % (W / 4)), fh = H > 1 ? (double)((k + c) % (H / 4 + 1)) : 0.0;
            for (size_t h = 0; h < H; h++)
                for (size_t w = 0; w < W; w++)
                    X[((b * C + c) * H + h) * W + w] =
                        (float)(sin(6.283185307179586 * (fw * (double)w / (double)W + fh * (double)h / (double)H) + ph) +
                                0.3 * nrand());
        }
        if (y) y[b] = (int)k;
    }
}

typedef struct {
    const char *name;
    size_t C, H, W;
} bcase;
static const bcase cases[] = {{"1d", 20, 1, 200}, {"2d", 16, 28, 28}};
#define K_CLASSES 10
#define PER 10

static int write_data(const char *dir)
{
    char err[512], path[4096];
    for (size_t i = 0; i < 2; i++) {
        const bcase *c = &cases[i];
        size_t m = K_CLASSES * PER, n = m * c->C * c->H * c->W;
        float *X = malloc(n * sizeof *X), *yf = malloc(m * sizeof *yf);
        int *y = malloc(m * sizeof *y);
        if (!X || !y || !yf) return 1;
        make_data(K_CLASSES, PER, c->C, c->H, c->W, X, y);
        for (size_t b = 0; b < m; b++) yf[b] = (float)y[b];
        size_t s1[4] = {m, c->C, c->H, c->W}, s0[3] = {m, c->C, c->W}, sy[1] = {m};
        snprintf(path, sizeof path, "%s/%s_x.npy", dir, c->name);
        if (wbcl_npy_write_f32(path, c->H > 1 ? 4 : 3, c->H > 1 ? s1 : s0, X, err, sizeof err)) return 1;
        snprintf(path, sizeof path, "%s/%s_y.npy", dir, c->name);
        if (wbcl_npy_write_f32(path, 1, sy, yf, err, sizeof err)) return 1;
        free(X);
        free(y);
        free(yf);
    }
    return 0;
}

static void progress_noop(int layer, double dR, double R, double Rc, void *user)
{
    (void)layer, (void)dR, (void)R, (void)Rc, (void)user;
}
static int every_layer; /* --every-layer */
static int profile;     /* --profile */
static const char *param_key; /* --param KEY=VALUE (one kernel parameter, wbcl_context_set_param) */
static long param_value;

static int run_case(const bcase *c, int layers, int reps)
{
    wbcl_context *ctx;
    char err[1024];
    if (wbcl_context_create(NULL, &ctx, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (param_key && wbcl_context_set_param(ctx, param_key, param_value)) {
        fprintf(stderr, "bench_circulant: --param %s=%ld: %s\n", param_key, param_value, wbcl_context_last_error(ctx));
        wbcl_context_destroy(ctx);
        return 1;
    }
    size_t m = K_CLASSES * PER, n = m * c->C * c->H * c->W;
    float *X = malloc(n * sizeof *X);
    int *y = malloc(m * sizeof *y), rc = 1;
    make_data(K_CLASSES, PER, c->C, c->H, c->W, X, y);
    size_t s[4] = {m, c->C, c->H, c->W};
    if (c->H == 1) s[2] = c->W;
    wbcl_tensor *tX = NULL, *tZ = NULL;
    wbcl_circulant *net = NULL;
    if (wbcl_tensor_create(ctx, c->H > 1 ? 4 : 3, s, WBCL_F32, X, &tX)) goto fail;
    if (wbcl_tensor_create(ctx, c->H > 1 ? 4 : 3, s, WBCL_F32, NULL, &tZ)) goto fail;
    wbcl_circulant_params p = wbcl_circulant_default_params();
    p.layers = 1;
    /* warm-up: every kernel, both FFT plans */
    if (wbcl_circulant_fit(ctx, tX, NULL, y, K_CLASSES, &p, NULL, NULL, tZ, &net) ||
        wbcl_circulant_apply(ctx, net, tX, tZ, NULL, NULL))
        goto fail;
    wbcl_circulant_destroy(net);
    net = NULL;
    p.layers = layers;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        if (wbcl_circulant_fit(ctx, tX, NULL, y, K_CLASSES, &p, every_layer ? progress_noop : NULL, NULL, NULL,
                               &net))
            goto fail;
        double t = now_s() - t0, dR;
        wbcl_circulant_history(net, layers - 1, &dR, NULL, NULL);
        printf("wbcl %.6f %.6f\n", t / layers, dR);
        fflush(stdout);
        wbcl_circulant_destroy(net);
        net = NULL;
    }
    if (profile) {
        if (wbcl_context_set_timing(ctx, 1)) goto fail;
        wbcl_context_reset_kernel_ns(ctx);
        for (int r = 0; r < reps; r++) {
            if (wbcl_circulant_fit(ctx, tX, NULL, y, K_CLASSES, &p, every_layer ? progress_noop : NULL, NULL,
                                   NULL, &net))
                goto fail;
            wbcl_circulant_destroy(net);
            net = NULL;
        }
        print_kernel_profile(ctx, stdout, (double)reps * layers);
        rc = 0;
        goto fail;
    }
    if (every_layer) { /* the construction figure below is taken without the callback */
        rc = 0;
        goto fail;
    }
    /* the construction alone (per-frequency Gram matrices, Cholesky, E_p and C_{j,p}, plus the logged
     * objective): the best 1-layer fit minus the best 1-layer apply of the same network (apply = enter,
     * application, leave), each the minimum of max(N, 5) runs (minima: the least disturbed runs) */
    {
        p.layers = 1;
        double bf = 1e300, ba = 1e300;
        const int nr = reps < 5 ? 5 : reps;
        for (int r = 0; r < nr; r++) {
            double t0 = now_s();
            if (wbcl_circulant_fit(ctx, tX, NULL, y, K_CLASSES, &p, NULL, NULL, tZ, &net)) goto fail;
            double t1 = now_s();
            if (t1 - t0 < bf) bf = t1 - t0;
            wbcl_circulant_destroy(net);
            net = NULL;
        }
        if (wbcl_circulant_fit(ctx, tX, NULL, y, K_CLASSES, &p, NULL, NULL, NULL, &net)) goto fail;
        for (int r = 0; r < nr; r++) {
            double t0 = now_s();
            if (wbcl_circulant_apply(ctx, net, tX, tZ, NULL, NULL)) goto fail;
            double t1 = now_s();
            if (t1 - t0 < ba) ba = t1 - t0;
        }
        wbcl_circulant_destroy(net);
        net = NULL;
        printf("construct %.6f\n", bf - ba);
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "bench_circulant: %s\n", wbcl_context_last_error(ctx));
    wbcl_circulant_destroy(net);
    wbcl_tensor_destroy(tX);
    wbcl_tensor_destroy(tZ);
    wbcl_context_destroy(ctx);
    free(X);
    free(y);
    return rc;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, z = *(const double *)b;
    return (x > z) - (x < z);
}

/* The dense construction of one layer at n = C T (1-D), see the header comment. */
static int run_dense(size_t C, size_t T, int reps)
{
    const size_t m = K_CLASSES * PER, n = C * T, cols = m * T;
    float *Z = malloc(m * C * T * sizeof *Z), *circ = malloc(n * cols * sizeof *circ),
          *G = malloc(n * n * sizeof *G);
    int *y = malloc(m * sizeof *y);
    double *times = malloc((size_t)reps * sizeof *times);
    if (!Z || !circ || !G || !y || !times) return 1;
    make_data(K_CLASSES, PER, C, 1, T, Z, y);
    const float eps2 = 0.1f;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        /* circ(Z): column (b, s) is sample b cyclically shifted by s, channel-stacked */
        for (size_t b = 0; b < m; b++)
            for (size_t s = 0; s < T; s++)
                for (size_t c = 0; c < C; c++)
                    for (size_t t = 0; t < T; t++) circ[(c * T + t) * cols + b * T + s] = Z[(b * C + c) * T + (t + s) % T];
        for (int j = -1; j < K_CLASSES; j++) { /* j = -1: all samples (E), else class j (C_j) */
            size_t b0 = j < 0 ? 0 : (size_t)j * PER, mb = j < 0 ? m : PER;
            float a = (float)C / ((float)mb * eps2);
            memset(G, 0, n * n * sizeof *G);
            for (size_t i = 0; i < n; i++) G[i * n + i] = 1.0f;
            /* G = I + (a/T) circ_j circ_j^T (upper triangle) */
            cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)n, (int)(mb * T), a / (float)T,
                        circ + b0 * T, (int)cols, 1.0f, G, (int)n);
            int nn = (int)n, info = 0;
            spotrf_("L", &nn, G, &nn, &info); /* column-major "L" = row-major upper */
            if (!info) spotri_("L", &nn, G, &nn, &info);
            if (info) {
                fprintf(stderr, "dense: factorization info %d\n", info);
                return 1;
            }
            for (size_t i = 0; i < n * n; i++) G[i] *= a;
        }
        times[r] = now_s() - t0;
    }
    qsort(times, (size_t)reps, sizeof *times, cmp_d);
    printf("dense %zu %.6f\n", n, times[reps / 2]);
    free(Z);
    free(circ);
    free(G);
    free(y);
    free(times);
    return 0;
}

int main(int argc, char **argv)
{
    const char *which = NULL;
    int layers = 5, reps = 3;
    size_t dC = 0, dT = 0, sC = 0, sT = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--write-data") && i + 1 < argc) return write_data(argv[i + 1]);
        if (!strcmp(argv[i], "--device-info")) {
            wbcl_context *ctx;
            char err[512];
            if (wbcl_context_create(NULL, &ctx, err, sizeof err)) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            const wbcl_device_info *d = wbcl_context_device(ctx);
            printf("%s (%s, driver %s)\n", d->name, d->platform_name, d->driver_version);
            wbcl_context_destroy(ctx);
            return 0;
        }
        if (!strcmp(argv[i], "--case") && i + 1 < argc) which = argv[++i];
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--every-layer")) every_layer = 1;
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--param") && i + 1 < argc) {
            static char key[64];
            const char *eq = strchr(argv[++i], '=');
            char *end = NULL;
            if (eq) param_value = strtol(eq + 1, &end, 10);
            if (!eq || (size_t)(eq - argv[i]) >= sizeof key || !end || end == eq + 1 || *end) {
                fprintf(stderr, "bench_circulant: --param wants KEY=INTEGER, got '%s'\n", argv[i]);
                return 2;
            }
            memcpy(key, argv[i], (size_t)(eq - argv[i]));
            key[eq - argv[i]] = '\0';
            param_key = key;
        } else if (!strcmp(argv[i], "--dense") && i + 2 < argc) {
            dC = (size_t)atol(argv[++i]);
            dT = (size_t)atol(argv[++i]);
        } else if (!strcmp(argv[i], "--size") && i + 2 < argc) {
            sC = (size_t)atol(argv[++i]);
            sT = (size_t)atol(argv[++i]);
        } else {
            fprintf(stderr, "bench_circulant: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (layers < 1 || reps < 1) return 2;
    if (dC) return run_dense(dC, dT, reps);
    if (sC) {
        const bcase c = {"size", sC, 1, sT};
        return run_case(&c, layers, reps);
    }
    for (size_t i = 0; i < 2; i++)
        if (which && !strcmp(which, cases[i].name)) return run_case(&cases[i], layers, reps);
    fprintf(stderr, "usage: bench_circulant --case 1d|2d | --dense C T | --write-data DIR | --device-info\n");
    return 2;
}
