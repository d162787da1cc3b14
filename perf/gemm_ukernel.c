/* The packed GEMM's 12 x 32 register tile (cl/gemm.cl, wbcl_gemm_packed) in
 * plain C with AVX-512 intrinsics, one thread, on packed panels that stay in
 * L1 (k = 256: 12 + 32 KiB) or stream from L2 (k = 4096): the in-core ceiling
 * of that tile on this machine, against an FMA probe in the same process
 * (12 independent zmm FMA chains, no memory), per thread-CPU-second.
 * Not part of the CMake build (needs AVX-512):
 *
 *   gcc -O3 -march=native -o gemm_ukernel perf/gemm_ukernel.c && ./gemm_ukernel 256 && ./gemm_ukernel 4096
 *
 * GCC emits the same inner loop as PoCL does for the kernel (2 vector loads,
 * 12 vbroadcastss, 24 vfmadd231ps per k step; checked with objdump). */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MR 12

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* C (MR x 32) = A-panel (k x MR) times B-panel (k x 32), both packed contiguous over k. */
__attribute__((noinline)) static void tile(const float *a, const float *b, float *c, int k)
{
    __m512 acc[MR][2];
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int p = 0; p < k; p++) {
        const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            const __m512 ar = _mm512_set1_ps(a[r]);
            acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
        }
        a += MR;
        b += 32;
    }
    for (int r = 0; r < MR; r++) {
        _mm512_storeu_ps(c + 32 * r, acc[r][0]);
        _mm512_storeu_ps(c + 32 * r + 16, acc[r][1]);
    }
}

/* 12 independent FMA chains on zmm registers: the FP32 FMA peak of one core. */
__attribute__((noinline)) static void probe(float *c, long iters)
{
    __m512 x[12];
    for (int i = 0; i < 12; i++) x[i] = _mm512_set1_ps((float)i);
    const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-7f);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++) x[j] = _mm512_fmadd_ps(x[j], a, b);
    }
    for (int i = 0; i < 12; i++) _mm512_storeu_ps(c + 16 * i, x[i]);
}

int main(int argc, char **argv)
{
    const int k = argc > 1 ? atoi(argv[1]) : 256;
    if (k < 1) return 2;
    float *a = aligned_alloc(64, sizeof(float) * MR * (size_t)k), *b = aligned_alloc(64, sizeof(float) * 32 * (size_t)k);
    float c[MR * 32];
    if (!a || !b) return 1;
    for (int i = 0; i < MR * k; i++) a[i] = 1e-3f * (float)(i % 7);
    for (int i = 0; i < 32 * k; i++) b[i] = 1e-3f * (float)(i % 5);
    const long iters = 1L << 24;
    double t0 = thread_cpu_s();
    probe(c, iters);
    const double gp = (double)iters * 12 * 32 / (thread_cpu_s() - t0) * 1e-9;
    const int reps = (int)(4e9 / (2.0 * MR * 32 * k)) + 1;
    t0 = thread_cpu_s();
    for (int r = 0; r < reps; r++) tile(a, b, c, k);
    const double gk = reps * 2.0 * MR * 32 * k / (thread_cpu_s() - t0) * 1e-9;
    printf("k = %d: probe %.1f GFLOP per CPU-s, %d x 32 tile %.1f (%.0f%% of the probe) [%g]\n", k, gp, MR, gk,
           100 * gk / gp, (double)c[0]);
    free(a);
    free(b);
    return 0;
}
