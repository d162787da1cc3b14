/* Linear layers of the vision models, Y = act(X Wᵀ + b) (wbcl__gemm_linear, host/ops/gemm.c),
 * in its three modes interleaved call by call in one process, against OpenBLAS SGEMM + a C bias
 * (+ GELU) loop on the same shapes:
 *   fused     mode 0: one packed GEMM launch (after packing W) with bias/GELU in the epilogue
 *             and X read in place (WBCL_GEMM_EPILOGUE, WBCL_GEMM_A_ROWS in cl/gemm.cl)
 *   epilogue  mode 1: the same epilogue, X packed first as wbcl_gemm does
 *   unfused   mode 2: wbcl_gemm (pack X, pack W, GEMM), then a bias/GELU pass
 * Shapes (ToST-T at 224 x 224, batch B, 196 patch tokens; CRATE-T's are alike): the MLP's
 * fc1 (+GELU) and fc2, the TSSA projections (d x d), the class-attention qkv on 197 tokens,
 * and the four convolutions of the patch embedding as im2col GEMMs (GELU after the first three).
 *
 *   bench_linear [--reps R] [--batch B]
 *
 * Reported per shape and path: median wall time (call + clFinish) of R calls after a warm-up,
 * GFLOP/s = 2 m n k / time, median CPU time of the process over the call (all threads;
 * CLOCK_PROCESS_CPUTIME_ID), which the share other jobs take of the machine does not change,
 * and the ratios fused/unfused. Recommended: POCL_AFFINITY=1, OPENBLAS_THREAD_TIMEOUT=1, warm
 * POCL_CACHE_DIR. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "wbcl/wbcl.h"
#include "bench_util.h"

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(wbcl_context *ctx, wbcl_status st, const char *what)
{
    if (!st) return;
    fprintf(stderr, "%s: %s: %s\n", what, wbcl_status_name(st), ctx ? wbcl_context_last_error(ctx) : "");
    exit(1);
}

static float gelu_ref(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678f)); }

/* OpenBLAS peer: Y = X Wᵀ, then bias (+ GELU) in one C loop */
static void peer(const float *x, const float *w, const float *b, float *y, int m, int n, int k, int gelu)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float v = y[(size_t)i * n + j] + b[j];
            y[(size_t)i * n + j] = gelu ? gelu_ref(v) : v;
        }
}

int main(int argc, char **argv)
{
    int reps = 9, B = 8;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) B = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps R] [--batch B]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || B < 1) return 2;
    const size_t T = 196 * (size_t)B;
    struct { const char *name; size_t m, n, k; int gelu; } sh[] = {
        {"mlp.fc1+gelu", T, 768, 192, 1},      {"mlp.fc2", T, 192, 768, 0},
        {"tssa.qkv/out", T, 192, 192, 0},      {"cab.qkv", T + B, 576, 192, 0},
        {"conv1+gelu", T * 64, 24, 27, 1},     {"conv2+gelu", T * 16, 48, 216, 1},
        {"conv3+gelu", T * 4, 96, 432, 1},     {"conv4", T, 192, 864, 0},
    };
    wbcl_context *ctx = NULL;
    char err[512];
    die(NULL, wbcl_context_create(NULL, &ctx, err, sizeof err), err);
    printf("device: %s; ToST-T linears at batch %d, %d reps, medians\n", wbcl_context_device(ctx)->name, B, reps);
    printf("%-13s %6s %4s %4s | %-23s %-23s %-23s | %-14s | %s\n", "layer", "m", "n", "k",
           "fused ms GF/s cpu-ms", "epilogue ms GF/s cpu-ms", "unfused ms GF/s cpu-ms", "OpenBLAS ms", "unfused/fused wall, cpu");
    double tot[4] = {0}, totc[3] = {0};
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        const size_t m = sh[s].m, n = sh[s].n, k = sh[s].k;
        float *x = malloc(m * k * sizeof *x), *w = malloc(n * k * sizeof *w), *b = malloc(n * sizeof *b),
              *y = malloc(m * n * sizeof *y);
        srand(1 + (unsigned)s);
        for (size_t i = 0; i < m * k; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
        for (size_t i = 0; i < n * k; i++) w[i] = ((float)rand() / RAND_MAX - 0.5f) * 0.2f;
        for (size_t i = 0; i < n; i++) b[i] = (float)rand() / RAND_MAX - 0.5f;
        size_t sx[2] = {m, k}, sw[2] = {n, k}, sy[2] = {m, n};
        wbcl_tensor *X, *W, *Bt, *Y;
        die(ctx, wbcl_tensor_create(ctx, 2, sx, WBCL_F32, x, &X), "tensor");
        die(ctx, wbcl_tensor_create(ctx, 2, sw, WBCL_F32, w, &W), "tensor");
        die(ctx, wbcl_tensor_create(ctx, 1, &n, WBCL_F32, b, &Bt), "tensor");
        die(ctx, wbcl_tensor_create(ctx, 2, sy, WBCL_F32, NULL, &Y), "tensor");
        double *t[4], *c[4];
        for (int q = 0; q < 4; q++) {
            t[q] = calloc((size_t)reps, sizeof(double));
            c[q] = calloc((size_t)reps, sizeof(double));
        }
        for (int r = -1; r < reps; r++)
            for (int q = 0; q < 4; q++) {
                const double c0 = cpu_s(), t0 = now_s();
                if (q < 3) {
                    die(ctx, wbcl__gemm_set_linear_mode(ctx, q), "mode");
                    die(ctx, wbcl__gemm_linear(ctx, X, m, k, W, n, Bt, sh[s].gelu, Y), sh[s].name);
                    die(ctx, wbcl_context_finish(ctx), "finish");
                } else {
                    peer(x, w, b, y, (int)m, (int)n, (int)k, sh[s].gelu);
                }
                if (r >= 0) {
                    t[q][r] = now_s() - t0;
                    c[q][r] = cpu_s() - c0;
                }
            }
        double mt[4], mc[4];
        for (int q = 0; q < 4; q++) {
            mt[q] = median(t[q], reps);
            mc[q] = median(c[q], reps);
            tot[q] += mt[q];
            if (q < 3) totc[q] += mc[q];
        }
        const double gf = 2.0 * (double)m * (double)n * (double)k * 1e-9;
        printf("%-13s %6zu %4zu %4zu | %7.3f %5.0f %7.3f  %7.3f %5.0f %7.3f  %7.3f %5.0f %7.3f  | %7.3f %5.0f | %5.2fx %5.2fx\n",
               sh[s].name, m, n, k, mt[0] * 1e3, gf / mt[0], mc[0] * 1e3, mt[1] * 1e3, gf / mt[1], mc[1] * 1e3,
               mt[2] * 1e3, gf / mt[2], mc[2] * 1e3, mt[3] * 1e3, gf / mt[3], mt[2] / mt[0], mc[2] / mc[0]);
        for (int q = 0; q < 4; q++) {
            free(t[q]);
            free(c[q]);
        }
        wbcl_tensor_destroy(X);
        wbcl_tensor_destroy(W);
        wbcl_tensor_destroy(Bt);
        wbcl_tensor_destroy(Y);
        free(x);
        free(w);
        free(b);
        free(y);
    }
    printf("sum of medians: fused %.2f ms (cpu %.2f), epilogue %.2f (cpu %.2f), unfused %.2f (cpu %.2f), "
           "OpenBLAS %.2f ms\n",
           tot[0] * 1e3, totc[0] * 1e3, tot[1] * 1e3, totc[1] * 1e3, tot[2] * 1e3, totc[2] * 1e3, tot[3] * 1e3);
    wbcl_context_destroy(ctx);
    return 0;
}
