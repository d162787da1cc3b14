/* Packed-GEMM micro-kernel experiment (issue 5): wbcl_gemm per CPU-second for
 * several register-tile shapes MR x NR (set in the context's parameter table
 * between calls: each shape is its own program) and (m, n, k) shapes,
 * interleaved call by call in one process; medians.
 *
 *   bench_gemm_tile [--reps N] [--tiles 12x32,6x64,...] m,n,k [m,n,k ...]
 *
 * Per shape and tile: the whole wbcl_gemm (packing A and B + the main
 * kernel) per CPU-second and per wall second, and the main kernel
 * wbcl_gemm_packed alone (relaunched on the panels the previous call packed)
 * per CPU-second. Small k (panels in L1/L2) against large k, and shapes where
 * one operand streams from memory (m or n small), separate the in-core rate
 * of the kernel from its memory behaviour and from the packing cost
 * (perf/RESULTS.md, issue 5; perf/gemm_ukernel.c is the same register tile in
 * plain C with intrinsics, the in-core ceiling). CPU time is the whole
 * process's (CLOCK_PROCESS_CPUTIME_ID), which other jobs' share of the cores
 * does not change; run with POCL_AFFINITY=1. */
#define _POSIX_C_SOURCE 200809L
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

static void check(wbcl_status st, wbcl_context *ctx, const char *what)
{
    if (st) {
        fprintf(stderr, "%s failed: %s: %s\n", what, wbcl_status_name(st), wbcl_context_last_error(ctx));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    int reps = 7, nt = 0, mr[16], nr[16], nshape = 0, shp[16][3];
    const char *tiles = "12x32";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tiles") && i + 1 < argc) tiles = argv[++i];
        else if (nshape < 16 && sscanf(argv[i], "%d,%d,%d", &shp[nshape][0], &shp[nshape][1], &shp[nshape][2]) == 3)
            nshape++;
        else {
            fprintf(stderr, "usage: %s [--reps N] [--tiles MRxNR,...] m,n,k ...\n", argv[0]);
            return 2;
        }
    }
    for (const char *s = tiles; *s && nt < 16;) {
        if (sscanf(s, "%dx%d", &mr[nt], &nr[nt]) == 2) nt++;
        while (*s && *s != ',') s++;
        if (*s == ',') s++;
    }
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    if (!nt || !nshape) {
        fprintf(stderr, "no MRxNR tile or no m,n,k given\n");
        return 2;
    }
    wbcl_context *ctx;
    char err[256];
    if (wbcl_context_create(NULL, &ctx, err, sizeof err)) {
        fprintf(stderr, "context: %s\n", err);
        return 1;
    }
    const wbcl_params base = ctx->params;
    printf("tile  m,n,k : GFLOP per CPU-s (median of %d), GFLOP/s wall (median)\n", reps);
    for (int s = 0; s < nshape; s++) {
        const size_t m = shp[s][0], n = shp[s][1], k = shp[s][2];
        float *h = malloc((m * k + k * n) * sizeof *h);
        if (!h) {
            fprintf(stderr, "out of host memory\n");
            return 1;
        }
        for (size_t i = 0; i < m * k + k * n; i++) h[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
        size_t sa[2] = {m, k}, sb[2] = {k, n}, sc[2] = {m, n};
        wbcl_tensor *A, *B, *C;
        check(wbcl_tensor_create(ctx, 2, sa, WBCL_F32, h, &A), ctx, "A");
        check(wbcl_tensor_create(ctx, 2, sb, WBCL_F32, h + m * k, &B), ctx, "B");
        check(wbcl_tensor_create(ctx, 2, sc, WBCL_F32, NULL, &C), ctx, "C");
        double tc[16][64], tw[16][64], kc[16][64];
        /* enough calls per timing that one lasts >= ~20 ms */
        const double fl = 2.0 * m * n * (double)k;
        int calls = (int)(4e9 / fl);
        if (calls < 1) calls = 1;
        for (int r = -1; r < reps; r++)
            for (int t0 = 0; t0 < nt; t0++) {
                const int t = (r + t0 + 1) % nt; /* rotate the order */
                ctx->params.gemm_mr = mr[t];
                ctx->params.gemm_nr = nr[t];
                check(wbcl_context_finish(ctx), ctx, "finish");
                double w0 = now_s(), c0 = cpu_s();
                for (int c = 0; c < calls; c++)
                    check(wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, A, B, 0.0f, C), ctx, "wbcl_gemm");
                check(wbcl_context_finish(ctx), ctx, "finish");
                if (r >= 0) {
                    tc[t][r] = calls * fl / (cpu_s() - c0) * 1e-9;
                    tw[t][r] = calls * fl / (now_s() - w0) * 1e-9;
                }
                /* the main kernel alone, on the panels the last call packed (its arguments are still set) */
                wbcl_kern *km;
                check(wbcl__kernel(ctx, "gemm", NULL, "wbcl_gemm_packed", &km), ctx, "kernel");
                size_t pa = (m + mr[t] - 1) / mr[t], pb = (n + nr[t] - 1) / nr[t];
                size_t global[2] = {pa * pb, 1}, local[2] = {16, 1};
                c0 = cpu_s();
                for (int c = 0; c < calls; c++) check(wbcl__launch(ctx, km, 2, global, local), ctx, "launch");
                check(wbcl_context_finish(ctx), ctx, "finish");
                if (r >= 0) kc[t][r] = calls * fl / (cpu_s() - c0) * 1e-9;
            }
        for (int t = 0; t < nt; t++)
            printf("%2dx%-2d %zu,%zu,%zu : %.1f per CPU-s, %.1f GFLOP/s; main kernel alone %.1f per CPU-s (%d calls "
                   "per timing)\n", mr[t], nr[t], m, n, k, median(tc[t], reps), median(tw[t], reps),
                   median(kc[t], reps), calls);
        wbcl_tensor_destroy(A);
        wbcl_tensor_destroy(B);
        wbcl_tensor_destroy(C);
        free(h);
    }
    ctx->params = base;
    wbcl_context_destroy(ctx);
    return 0;
}
