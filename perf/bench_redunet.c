/* Benchmark of the vector ReduNet (wbcl_redunet_fit: construction + application + the objective, per
 * layer) on synthetic Gaussians on the sphere (SPEC §5). perf/run_redunet.sh runs it interleaved with
 * the NumPy peer (perf/peers/redunet_numpy.py) on the same data and reports median ratios.
 *
 *   bench_redunet --write-data DIR            writes DIR/{small,mnist,example}_{x,y}.npy and exits
 *   bench_redunet --case NAME [--reps N] [--impl auto|fused|gemm]
 *                                             after one untimed warm-up fit (kernel builds), prints
 *                                             one line per repetition: "wbcl SECONDS FINAL_DR"
 *   bench_redunet --case NAME --profile       instead of the timing lines, the device time per kernel of one
 *                                             fit's layer (kernel_profile.h: every launch waited for)
 *   bench_redunet --device-info               one line: device, platform, driver
 * Cases (layers L of one timed fit):
 *   small    m = 1500 (3 x 500), d = 3,   K = 3,  sigma 0.1,  L = 100  (Example 5.1's size)
 *   mnist    m = 1000 (10 x 100), d = 784, K = 10, sigma 0.03, L = 3   (MNIST-like)
 *   example  m = 1500, d = 3, K = 3, L = 2000                          (book Example 5.1, whole)
 * The device is $WBCL_DEVICE or the default. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernel_profile.h"
#include "wbcl/io.h"
#include "wbcl/redunet.h"
#include "wbcl/wbcl.h"

typedef struct bcase {
    const char *name;
    size_t d, per;
    int K, layers;
    double sigma;
} bcase;

static const bcase cases[] = {
    {"small", 3, 500, 3, 100, 0.1},
    {"mnist", 784, 100, 10, 3, 0.03},
    {"example", 3, 500, 3, 2000, 0.1},
};
#define NCASES (sizeof cases / sizeof cases[0])

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int make_data(const bcase *c, float **X, int **y)
{
    const size_t m = c->per * (size_t)c->K;
    *X = malloc(m * c->d * sizeof **X);
    *y = malloc(m * sizeof **y);
    if (!*X || !*y) return 1;
    return wbcl_redunet_gaussians(c->d, c->K, c->per, c->sigma, NULL, 2024, *X, *y) != WBCL_SUCCESS;
}

static int write_data(const char *dir)
{
    char err[512], path[4096];
    for (size_t i = 0; i < NCASES; i++) {
        const bcase *c = &cases[i];
        float *X;
        int *y;
        if (make_data(c, &X, &y)) return fprintf(stderr, "bench_redunet: out of memory\n"), 1;
        const size_t m = c->per * (size_t)c->K, sx[2] = {m, c->d};
        snprintf(path, sizeof path, "%s/%s_x.npy", dir, c->name);
        if (wbcl_npy_write_f32(path, 2, sx, X, err, sizeof err)) return fprintf(stderr, "bench_redunet: %s\n", err), 1;
        wbcl_array a;
        if (wbcl_array_alloc(&a, WBCL_ELEM_I32, 1, &m, err, sizeof err))
            return fprintf(stderr, "bench_redunet: %s\n", err), 1;
        memcpy(a.data, y, m * sizeof *y);
        snprintf(path, sizeof path, "%s/%s_y.npy", dir, c->name);
        wbcl_status st = wbcl_npy_write(path, &a, err, sizeof err);
        wbcl_array_free(&a);
        free(X);
        free(y);
        if (st) return fprintf(stderr, "bench_redunet: %s\n", err), 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *name = NULL, *impl = "auto";
    int reps = 1, profile = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--write-data") && i + 1 < argc) return write_data(argv[i + 1]);
        if (!strcmp(argv[i], "--case") && i + 1 < argc) name = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--impl") && i + 1 < argc) impl = argv[++i];
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--device-info")) name = "";
        else {
            fprintf(stderr, "usage: bench_redunet --write-data DIR | --case small|mnist|example [--reps N] "
                            "[--impl auto|fused|gemm] [--profile] | --device-info\n");
            return 2;
        }
    }
    char err[1024];
    wbcl_context *ctx = NULL;
    if (wbcl_context_create(NULL, &ctx, err, sizeof err)) return fprintf(stderr, "bench_redunet: %s\n", err), 1;
    const wbcl_device_info *dev = wbcl_context_device(ctx);
    if (!name) return fprintf(stderr, "bench_redunet: --case is required\n"), 2;
    if (!*name) {
        printf("%s | %s %s | driver %s\n", dev->name, dev->platform_name, dev->platform_version, dev->driver_version);
        wbcl_context_destroy(ctx);
        return 0;
    }
    const bcase *c = NULL;
    for (size_t i = 0; i < NCASES; i++)
        if (!strcmp(cases[i].name, name)) c = &cases[i];
    if (!c || reps < 1) return fprintf(stderr, "bench_redunet: unknown case '%s' or bad --reps\n", name), 2;
    float *X;
    int *y;
    if (make_data(c, &X, &y)) return fprintf(stderr, "bench_redunet: out of memory\n"), 1;
    const size_t m = c->per * (size_t)c->K, shape[2] = {m, c->d};
    wbcl_tensor *tX = NULL;
    int rc = 1;
    if (wbcl_tensor_create(ctx, 2, shape, WBCL_F32, X, &tX)) goto fail;
    wbcl_redunet_params p = wbcl_redunet_default_params();
    p.impl = !strcmp(impl, "fused") ? WBCL_REDUNET_IMPL_FUSED
           : !strcmp(impl, "gemm")  ? WBCL_REDUNET_IMPL_GEMM
                                    : WBCL_REDUNET_IMPL_AUTO;
    wbcl_redunet *net = NULL;
    p.layers = c->layers < 2 ? c->layers : 2; /* warm-up: builds (or loads) every kernel */
    if (wbcl_redunet_fit(ctx, tX, y, c->K, &p, NULL, NULL, NULL, &net)) goto fail;
    wbcl_redunet_destroy(net);
    p.layers = c->layers;
    if (profile) { /* one fit, every launch timed; per layer */
        if (wbcl_context_set_timing(ctx, 1)) goto fail;
        wbcl_context_reset_kernel_ns(ctx);
        if (wbcl_redunet_fit(ctx, tX, y, c->K, &p, NULL, NULL, NULL, &net)) goto fail;
        wbcl_redunet_destroy(net);
        net = NULL;
        printf("case %s: device time per kernel and layer (one fit of %d layers)\n", c->name, c->layers);
        print_kernel_profile(ctx, stdout, (double)c->layers);
        reps = 0;
    }
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        if (wbcl_redunet_fit(ctx, tX, y, c->K, &p, NULL, NULL, NULL, &net)) goto fail;
        double t = now_s() - t0, dR;
        wbcl_redunet_history(net, c->layers - 1, &dR, NULL, NULL);
        printf("wbcl %.6f %.7f\n", t, dR);
        fflush(stdout);
        wbcl_redunet_destroy(net);
        net = NULL;
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "bench_redunet: %s\n", wbcl_context_last_error(ctx));
done:
    wbcl_tensor_destroy(tX);
    free(X);
    free(y);
    wbcl_context_destroy(ctx);
    return rc;
}
