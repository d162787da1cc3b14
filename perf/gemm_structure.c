/* The packed GEMM's tile order (host/ops/gemm.c, cl/gemm.cl) in plain C with AVX-512 intrinsics
 * and OpenMP on 2 threads: the 12 x 32 register tile of perf/gemm_ukernel.c run over a whole
 * square C = A B on already packed panels (packing not timed), with the same visiting orders as
 * the OpenCL kernel, so that the memory side of the order can be told from PoCL's code generation.
 * Not part of the CMake build (needs AVX-512 and OpenMP):
 *
 *   gcc -O3 -march=native -fopenmp -o gemm_structure perf/gemm_structure.c
 *   ./gemm_structure N MODE [ARG...]
 *
 * MODE (median of 9 passes, GFLOP/s over both threads and per core):
 *   blocks MCB [VARIANT]  blocks of MCB row panels, column panel by column panel, dynamic chunks of
 *                         16 tiles (the kernel's cb == 0 order); VARIANT: real (default), same-a
 *                         (every tile reads row panel 0), same-b (column panel 0), same-ab (both),
 *                         no-c (stores to a per-thread scratch tile), same-ab-no-c, stream (C
 *                         written with non-temporal stores)
 *   units RB CB           units of RB x CB tiles, one thread each, going down a column of C (the
 *                         kernel's cb > 0 order)
 *   kblocks MCB KC        blocks as above, k in chunks of KC with a pass over all tiles per chunk
 *                         (C reloaded and accumulated: the BLIS-style k blocking, tried and dropped)
 *
 * perf/RESULTS.md (eighth session) has the figures. */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MR 12
#define NR 32
#define PASSES 9

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* C tile (MR x NR, row stride ldc) = (accumulate ? C : 0) + A panel (k x MR) . B panel (k x NR) */
static void tile(const float *a, const float *b, float *c, int k, int ldc, int stream, int accumulate)
{
    __m512 acc[MR][2];
    for (int r = 0; r < MR; r++)
        if (accumulate) {
            acc[r][0] = _mm512_loadu_ps(c + (size_t)r * ldc);
            acc[r][1] = _mm512_loadu_ps(c + (size_t)r * ldc + 16);
        } else
            acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int p = 0; p < k; p++) {
        const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            const __m512 ar = _mm512_set1_ps(a[r]);
            acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
        }
        a += MR;
        b += NR;
    }
    for (int r = 0; r < MR; r++)
        if (stream) {
            _mm512_stream_ps(c + (size_t)r * ldc, acc[r][0]);
            _mm512_stream_ps(c + (size_t)r * ldc + 16, acc[r][1]);
        } else {
            _mm512_storeu_ps(c + (size_t)r * ldc, acc[r][0]);
            _mm512_storeu_ps(c + (size_t)r * ldc + 16, acc[r][1]);
        }
}

static int cmp(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s N blocks MCB [real|same-a|same-b|same-ab|no-c|same-ab-no-c|stream]\n"
                        "       %s N units RB CB\n       %s N kblocks MCB KC\n", argv[0], argv[0], argv[0]);
        return 2;
    }
    const int n = atoi(argv[1]), m = n, k = n, x = atoi(argv[3]), y = argc > 4 ? atoi(argv[4]) : 0;
    const char *mode = argv[2], *variant = argc > 4 && !strcmp(mode, "blocks") ? argv[4] : "real";
    if (n < NR || n % NR || x < 1 || (strcmp(mode, "blocks") && y < 1)) {
        fprintf(stderr, "N must be a multiple of %d; MCB, RB, CB and KC positive\n", NR);
        return 2;
    }
    const int same_a = strstr(variant, "same-a") != NULL, same_b = !strcmp(variant, "same-b") || strstr(variant, "ab"),
              no_c = strstr(variant, "no-c") != NULL, stream = !strcmp(variant, "stream");
    const int pa = (m + MR - 1) / MR, pb = n / NR;
    float *Ap = aligned_alloc(64, (size_t)pa * MR * k * 4), *Bp = aligned_alloc(64, (size_t)pb * NR * k * 4);
    float *C = aligned_alloc(64, (size_t)pa * MR * n * 4), *scratch = aligned_alloc(64, (size_t)2 * MR * n * 4);
    if (!Ap || !Bp || !C || !scratch) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < (size_t)pa * MR * k; i++) Ap[i] = 1e-3f * (float)(i % 7);
    for (size_t i = 0; i < (size_t)pb * NR * k; i++) Bp[i] = 1e-3f * (float)(i % 5);
    memset(C, 0, (size_t)pa * MR * n * 4);
    double t[PASSES];
    for (int pass = 0; pass < PASSES; pass++) {
        const double t0 = now_s();
        if (!strcmp(mode, "units")) {
            const int rb = x, cb = y, nrb = (pa + rb - 1) / rb, ncb = (pb + cb - 1) / cb;
#pragma omp parallel for schedule(dynamic, 1) num_threads(2)
            for (int u = 0; u < nrb * ncb; u++) {
                const int cu = u / nrb, ru = u - cu * nrb;
                for (int jp = cu * cb; jp < pb && jp < cu * cb + cb; jp++)
                    for (int ip = ru * rb; ip < pa && ip < ru * rb + rb; ip++)
                        tile(Ap + (size_t)ip * k * MR, Bp + (size_t)jp * k * NR, C + (size_t)ip * MR * n + jp * NR, k,
                             n, 0, 0);
            }
        } else {
            const int mcb = x, kc = !strcmp(mode, "kblocks") ? y : k, tiles = pa * pb;
            for (int k0 = 0; k0 < k; k0 += kc) {
                const int kn = k - k0 < kc ? k - k0 : kc;
#pragma omp parallel for schedule(dynamic, 16) num_threads(2)
                for (int t_ = 0; t_ < tiles; t_++) {
                    const int blk = t_ / (mcb * pb), rem = t_ - blk * mcb * pb;
                    const int rows = mcb < pa - blk * mcb ? mcb : pa - blk * mcb;
                    const int jp = rem / rows, ip = blk * mcb + rem - jp * rows;
                    float *c = no_c ? scratch + (size_t)omp_get_thread_num() * MR * n : C + (size_t)ip * MR * n + jp * NR;
                    tile(Ap + ((size_t)(same_a ? 0 : ip) * k + k0) * MR, Bp + ((size_t)(same_b ? 0 : jp) * k + k0) * NR,
                         c, kn, n, stream, k0 > 0);
                }
            }
        }
        t[pass] = now_s() - t0;
    }
    qsort(t, PASSES, sizeof t[0], cmp);
    const double flop = 2.0 * pa * MR * (double)n * k;
    printf("n=%d %s %d %s: median %.1f GFLOP/s (%.1f per core)\n", n, mode, x, argc > 4 ? argv[4] : "", flop / t[PASSES / 2] * 1e-9,
           flop / t[PASSES / 2] * 0.5e-9);
    free(Ap);
    free(Bp);
    free(C);
    free(scratch);
    return 0;
}
