/* Development profile of wbcl_cholesky / wbcl_spd_inverse per phase, with
 * same-process A/B switches. Needs the library built with -DWBCL_LA_TRACE
 * (host/ops/linalg.c then exports the counters and switches used below); not
 * part of the normal build:
 *
 *   cmake -S . -B build-trace -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-DWBCL_LA_TRACE
 *   cmake --build build-trace -j2 --target wbcl
 *   gcc -O2 -Iinclude perf/la_trace.c -Lbuild-trace -lwbcl -lopenblas -Wl,-rpath,$PWD/build-trace -o la_trace
 *   POCL_AFFINITY=1 OPENBLAS_NUM_THREADS=1 ./la_trace N REPS [NB_A NB_B]
 *
 * Alternates two variants call by call and prints medians per phase: wall
 * time, OpenCL profiling-event time (K:) and process CPU time (C:), in ms.
 * Variants: by default the packed-L path ("new") against the path through
 * the packed GEMM ("old"); with NB_A NB_B two block sizes of the packed path.
 * INV=1 in the environment: wbcl_spd_inverse on 11 matrices (ReduNet's
 * layer) instead of wbcl_cholesky on one. KDIR_A=dir KDIR_B=dir: instead,
 * the packed path with two kernel sets (two contexts, each created with
 * WBCL_KERNEL_DIR set to one of them; "-" for the embedded kernels), for
 * A/B trials of a kernel edit in one process. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wbcl/linalg.h"
#include "wbcl/wbcl.h"

extern double wbcl__la_trace_acc[5], wbcl__la_trace_kns[5], wbcl__la_trace_cpu[5];
extern int wbcl__la_old;
extern size_t wbcl__la_nb;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 2048, reps = argc > 2 ? atoi(argv[2]) : 7;
    const int nba = argc > 4 ? atoi(argv[3]) : 0, nbb = argc > 4 ? atoi(argv[4]) : 0;
    const int inv = getenv("INV") != NULL, B = inv ? 11 : 1;
    if (n < 1 || reps < 1 || reps > 64) return 2;
    char err[512];
    const char *kdir[2] = {getenv("KDIR_A"), getenv("KDIR_B")};
    const int kab = kdir[0] && kdir[1];
    wbcl_context *cx[2] = {NULL, NULL};
    for (int c = 0; c < 1 + kab; c++) {
        if (kab && strcmp(kdir[c], "-")) setenv("WBCL_KERNEL_DIR", kdir[c], 1);
        else if (kab) unsetenv("WBCL_KERNEL_DIR");
        if (wbcl_context_create(NULL, &cx[c], err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        wbcl_context_set_timing(cx[c], 1);
    }
    /* A = G G^T / n + I, G uniform in [-1.7, 1.7], as perf/bench_linalg.c */
    float *A = malloc((size_t)B * n * n * sizeof *A), *G = malloc((size_t)n * n * sizeof *G);
    if (!A || !G) return 1;
    unsigned long long x = 88172645463325252ull;
    for (size_t i = 0; i < (size_t)n * n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        G[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 3.4 - 1.7);
    }
    cblas_ssyrk(CblasRowMajor, CblasLower, CblasNoTrans, n, n, 1.0f / (float)n, G, n, 0.0f, A, n);
    for (int i = 0; i < n; i++) {
        A[(size_t)i * n + i] += 1.0f;
        for (int j = 0; j < i; j++) A[(size_t)j * n + i] = A[(size_t)i * n + j];
    }
    for (int b = 1; b < B; b++) memcpy(A + (size_t)b * n * n, A, (size_t)n * n * sizeof *A);
    size_t s[3] = {(size_t)B, (size_t)n, (size_t)n};
    wbcl_tensor *tAs[2] = {NULL, NULL}, *tLs[2] = {NULL, NULL};
    for (int c = 0; c < 1 + kab; c++)
        if (wbcl_tensor_create(cx[c], 3, s, WBCL_F32, A, &tAs[c]) ||
            wbcl_tensor_create(cx[c], 3, s, WBCL_F32, NULL, &tLs[c]))
            return 1;
    static double T[2][64][17];
    for (int it = -2; it < reps; it++)
        for (int h = 0; h < 2; h++) {
            const int v = it < 0 ? h : (it + h) % 2;
            wbcl_context *ctx = cx[kab ? v : 0];
            wbcl_tensor *tA = tAs[kab ? v : 0], *tL = tLs[kab ? v : 0];
            if (kab) {
                wbcl__la_old = 0;
            } else if (nba) {
                wbcl__la_old = 0;
                wbcl__la_nb = (size_t)(v ? nbb : nba);
            } else {
                wbcl__la_old = v;
            }
            for (int k = 0; k < 5; k++) wbcl__la_trace_acc[k] = wbcl__la_trace_kns[k] = wbcl__la_trace_cpu[k] = 0;
            double t0 = now(), c0 = cpu_ms();
            wbcl_status st = inv ? wbcl_spd_inverse(ctx, tA, tL) : wbcl_cholesky(ctx, tA, tL);
            double t = now() - t0, c = cpu_ms() - c0;
            if (st) {
                fprintf(stderr, "%s\n", wbcl_context_last_error(ctx));
                return 1;
            }
            if (it < 0) continue;
            T[v][it][0] = t * 1e3;
            T[v][it][16] = c;
            for (int k = 0; k < 5; k++) {
                T[v][it][1 + k] = wbcl__la_trace_acc[k];
                T[v][it][6 + k] = wbcl__la_trace_kns[k];
                T[v][it][11 + k] = wbcl__la_trace_cpu[k];
            }
        }
    /* phases: 0 factor, 1 panel, 2 update / GEMM (wall only through the GEMM), 3 solve */
    static const char *nm[17] = {"total", "factor", "panel", "update", "solve", "-", "K:factor", "K:panel",
                                 "K:update", "K:solve", "-", "C:factor", "C:panel", "C:update", "C:solve", "-", "C:total"};
    for (int v = 0; v < 2; v++) {
        printf("n=%d %s:", n,
               kab ? (v ? "kernels B" : "kernels A")
                   : nba ? (v ? "nb B" : "nb A") : (v ? "old (GEMM path)" : "new (packed L)"));
        for (int k = 0; k < 17; k++) {
            if (nm[k][0] == '-') continue;
            double col[64];
            for (int r = 0; r < reps; r++) col[r] = T[v][r][k];
            qsort(col, (size_t)reps, sizeof *col, cmpd);
            printf(" %s %.2f", nm[k], col[reps / 2]);
        }
        printf("\n");
    }
    for (int c = 0; c < 1 + kab; c++) {
        wbcl_tensor_destroy(tAs[c]);
        wbcl_tensor_destroy(tLs[c]);
        wbcl_context_destroy(cx[c]);
    }
    free(A);
    free(G);
    return 0;
}
