/* Cholesky: wbcl_cholesky vs OpenBLAS's LAPACK spotrf_, interleaved call by
 * call in one process; medians, GFLOP/s (n^3/3 flops), ratios.
 *
 *   bench_linalg [--reps N] [--threads T] [--peak GFLOPS] [--large n,n,...] [--small n,n,...]
 *                [--batch B] [--redunet] [--profile]
 *
 * (0) the yardsticks, measured in the same run (interleaved, medians):
 *     - FMA peak: an OpenCL probe kernel on the wbcl device (64 work-items,
 *       each 12 independent FMA chains of the CPU's native float vector, or
 *       float16 (AVX-512, other devices), no memory traffic), i.e. what
 *       PoCL's compiled code can issue on all cores;
 *     - OpenBLAS SGEMM at n = 2048 on T threads (the practical ceiling);
 *     - wbcl_gemm at m = n = k = 1024 and 2048, per CPU-second only (the
 *       ceiling of any factorization whose flops run in wbcl's GEMM).
 *     "% of peak" below is relative to the probe's best repetition (the
 *     capability; on a loaded machine medians swing) unless --peak P gives a
 *     figure (then P is used and the probe is still reported). Table (1)
 *     gives wbcl's median and best against it, and the median against the
 *     SGEMM median. Also per CPU-second (CLOCK_PROCESS_CPUTIME_ID around each
 *     call): flops per CPU-second of wbcl / flops per CPU-second of the probe,
 *     which the share of the cores that other jobs take does not change
 *     (spinning or idle-waiting worker threads count against wbcl). The last
 *     two columns of (1) take the probe again after each repetition and give
 *     the median of the per-repetition ratios ("probe beside"): the host can
 *     change the work a CPU-second does within one run.
 * (1) one large matrix, n = 256 512 1024 2048 by default: wbcl (CPU-shaped
 *     kernels, blocked with the packed GEMM) vs spotrf_("U") on the same
 *     row-major data (its upper triangle in column-major order is our lower
 *     triangle, and U = L^T), OpenBLAS on T threads (default 2); also the
 *     fraction of the FP32 FMA peak measured in (0), for both also per CPU-second
 *     (spotrf_'s: process CPU time around the call, OpenBLAS's threads included).
 * (2) B = 1000 small matrices, n = 3 10 20 64: one batched wbcl_cholesky call
 *     vs a loop of B spotrf_ calls (single-threaded loop: OpenBLAS does not
 *     parallelize across calls; our batch runs on every core).
 * (3) --redunet: ReduNet's per-layer work, 11 matrices of d = 784 (MNIST, 10
 *     classes + the whole set): wbcl_spd_inverse vs spotrf_ + spotri_ per matrix.
 * --profile: instead of the tables, the device time per kernel of one
 *     wbcl_cholesky and of one wbcl_spd_inverse call at each --large n, and
 *     with --small (given) one batched wbcl_cholesky of B matrices at each of
 *     those n, with --redunet one wbcl_spd_inverse of 11 matrices of d = 784
 *     (kernel_profile.h).
 * The input copies the peer needs (LAPACK works in place) are made outside its
 * timed region. Recommended environment (perf/RESULTS.md): POCL_AFFINITY=1
 * OPENBLAS_THREAD_TIMEOUT=1, warm POCL_CACHE_DIR. "ratio" = peer time / wbcl
 * time (> 1: wbcl is faster). */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h" /* the context's OpenCL handles, for the FMA probe */
#include "wbcl/linalg.h"
#include "wbcl/wbcl.h"
#include "bench_util.h"
#include "kernel_profile.h"

/* LAPACK as shipped inside libopenblas (Fortran calling convention). */
extern void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info);
extern void spotri_(const char *uplo, const int *n, float *a, const int *lda, int *info);

/* CPU time of the whole process (all threads): on a machine shared with other
 * jobs, wall time includes the time the scheduler gave to them; CPU time is
 * what our threads ran (PoCL's and OpenBLAS's idle spinning included). */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void check(wbcl_status st, wbcl_context *ctx, const char *what)
{
    if (st) {
        fprintf(stderr, "%s failed: %s: %s\n", what, wbcl_status_name(st), wbcl_context_last_error(ctx));
        exit(1);
    }
}

/* A = G G^T / n + I (well conditioned), G uniform in [-1.7, 1.7] (variance ~1),
 * via OpenBLAS ssyrk (setup only). */
static void make_spd(int n, float *A)
{
    float *G = malloc((size_t)n * n * sizeof *G);
    if (!G) exit(1);
    for (size_t i = 0; i < (size_t)n * n; i++) G[i] = (float)(3.4 * urand() - 1.7);
    cblas_ssyrk(CblasRowMajor, CblasLower, CblasNoTrans, n, n, 1.0f / (float)n, G, n, 0.0f, A, n);
    for (int i = 0; i < n; i++) {
        A[(size_t)i * n + i] += 1.0f;
        for (int j = 0; j < i; j++) A[(size_t)j * n + i] = A[(size_t)i * n + j];
    }
    free(G);
}

/* max |L - L_peer| / max |L_peer| over the lower triangle of b matrices. */
static double rel_diff(int n, int b, const float *L, const float *P)
{
    double e = 0, m = 0;
    for (size_t k = 0; k < (size_t)b; k++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j <= i; j++) {
                size_t at = k * n * n + (size_t)i * n + j;
                double d = fabs((double)L[at] - P[at]);
                if (!(d <= e)) e = d;
                if (fabs(P[at]) > m) m = fabs(P[at]);
            }
    return m > 0 ? e / m : e;
}

static int parse_list(const char *s, int *out, int max)
{
    int k = 0;
    while (*s && k < max) {
        out[k++] = atoi(s);
        while (*s && *s != ',') s++;
        if (*s == ',') s++;
    }
    return k;
}

static double time_wbcl_chol(wbcl_context *ctx, wbcl_tensor *A, wbcl_tensor *L)
{
    double t0 = now_s();
    check(wbcl_cholesky(ctx, A, L), ctx, "wbcl_cholesky"); /* waits: reads the pivot status */
    return now_s() - t0;
}

/* spotrf_ on b matrices (a loop), from a fresh copy of src (copy not timed); wall seconds, and
 * the process CPU seconds over the same interval in *cpu (OpenBLAS's threads included). */
static double time_spotrf(int n, int b, const float *src, float *work, double *cpu)
{
    memcpy(work, src, (size_t)b * n * n * sizeof *work);
    double t0 = now_s(), c0 = cpu_s();
    for (int k = 0; k < b; k++) {
        int info = 0;
        spotrf_("U", &n, work + (size_t)k * n * n, &n, &info);
        if (info) {
            fprintf(stderr, "spotrf_ info %d\n", info);
            exit(1);
        }
    }
    const double t = now_s() - t0;
    if (cpu) *cpu = cpu_s() - c0;
    return t;
}

static double time_spotri(int n, int b, const float *src, float *work, double *cpu)
{
    memcpy(work, src, (size_t)b * n * n * sizeof *work);
    double t0 = now_s(), c0 = cpu_s();
    for (int k = 0; k < b; k++) {
        int info = 0;
        spotrf_("U", &n, work + (size_t)k * n * n, &n, &info);
        if (!info) spotri_("U", &n, work + (size_t)k * n * n, &n, &info);
        if (info) {
            fprintf(stderr, "spotrf_/spotri_ info %d\n", info);
            exit(1);
        }
    }
    const double t = now_s() - t0;
    if (cpu) *cpu = cpu_s() - c0;
    return t;
}


/* ---- (0) yardsticks ------------------------------------------------------------ */
#define PROBE_CPU_ITEMS 64
#define PROBE_CHAINS 12
/* PW: the vector width, the device's native float width on a CPU (16 with
 * AVX-512, 8 with AVX2: 12 chains then fill 12 of its 16 ymm registers; 12
 * float16 chains there would need 24 and spill, which halved the probe on a
 * Zen 3), 4 elsewhere (a GPU runs each work-item's lanes as scalars: 48 live
 * registers leave room for full occupancy).
 * Work-items: 64 on a CPU (PoCL runs one work-group of 1 per core at a time);
 * on other devices 2048 per compute unit (an H200's 132 SMs run 2048 threads
 * each), so every core is full: 64 work-items measured 0.4% of an H200. */
static const char probe_src[] =
    "#define VT_(n) float##n\n"
    "#define VT(n) VT_(n)\n"
    "#define VST_(n) vstore##n\n"
    "#define VST(n) VST_(n)\n"
    "typedef VT(PW) pv;\n"
    "__kernel void fma_probe(__global float *out, const uint iters, const float a, const float b)\n"
    "{\n"
    "    const uint g = get_global_id(0);\n"
    "    pv x0 = (pv)(g * 1e-6f), x1 = x0 + 1.0f, x2 = x0 + 2.0f, x3 = x0 + 3.0f, x4 = x0 + 4.0f,\n"
    "       x5 = x0 + 5.0f, x6 = x0 + 6.0f, x7 = x0 + 7.0f, x8 = x0 + 8.0f, x9 = x0 + 9.0f,\n"
    "       x10 = x0 + 10.0f, x11 = x0 + 11.0f;\n"
    "    for (uint i = 0; i < iters; i++) {\n"
    "        x0 = fma(x0, a, b); x1 = fma(x1, a, b); x2 = fma(x2, a, b); x3 = fma(x3, a, b);\n"
    "        x4 = fma(x4, a, b); x5 = fma(x5, a, b); x6 = fma(x6, a, b); x7 = fma(x7, a, b);\n"
    "        x8 = fma(x8, a, b); x9 = fma(x9, a, b); x10 = fma(x10, a, b); x11 = fma(x11, a, b);\n"
    "    }\n"
    "    const pv s = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)) + ((x8 + x9) + (x10 + x11));\n"
    "    float t[PW], r = 0.0f;\n"
    "    VST(PW)(s, 0, t);\n"
    "    for (int i = 0; i < PW; i++) r += t[i];\n"
    "    out[g] = r;\n"
    "}\n";

typedef struct probe {
    cl_program prog;
    cl_kernel kern;
    cl_mem out;
    cl_uint iters;
    int width;    /* PW */
    size_t items; /* global size */
} probe;

static void cl_check(cl_int e, const char *what)
{
    if (e != CL_SUCCESS) {
        fprintf(stderr, "FMA probe: %s failed (%d)\n", what, (int)e);
        exit(1);
    }
}

static int probe_width(const wbcl_context *ctx)
{
    const unsigned vw = ctx->info.native_vector_width_float;
    if (ctx->info.type != WBCL_DEVICE_CPU) return 4;
    return vw == 4 || vw == 8 ? (int)vw : 16;
}

static size_t probe_items(const wbcl_context *ctx)
{
    const size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
    return ctx->info.type == WBCL_DEVICE_CPU ? PROBE_CPU_ITEMS : cu * 2048;
}

static void probe_init(wbcl_context *ctx, probe *p)
{
    const char *src = probe_src;
    cl_int e;
    p->prog = clCreateProgramWithSource(ctx->cl, 1, &src, NULL, &e);
    cl_check(e, "clCreateProgramWithSource");
    p->width = probe_width(ctx);
    char opts[32];
    snprintf(opts, sizeof opts, "-DPW=%d", p->width);
    cl_check(clBuildProgram(p->prog, 1, &ctx->device, opts, NULL, NULL), "clBuildProgram");
    p->kern = clCreateKernel(p->prog, "fma_probe", &e);
    cl_check(e, "clCreateKernel");
    p->items = probe_items(ctx);
    p->out = clCreateBuffer(ctx->cl, CL_MEM_WRITE_ONLY, p->items * sizeof(float), NULL, &e);
    cl_check(e, "clCreateBuffer");
    /* a GPU launch: 2^13 iterations x 12 x 4 lanes x 2048 per compute unit = 1e11 FMAs on an H200, a few
     * ms at tens of TFLOP/s, so the host-clock timing around it costs about 1% */
    p->iters = ctx->info.type == WBCL_DEVICE_CPU ? 1u << 18 : 1u << 13;
    float a = 0.999999f, b = 1e-7f;
    cl_check(clSetKernelArg(p->kern, 0, sizeof p->out, &p->out), "clSetKernelArg");
    cl_check(clSetKernelArg(p->kern, 1, sizeof p->iters, &p->iters), "clSetKernelArg");
    cl_check(clSetKernelArg(p->kern, 2, sizeof a, &a), "clSetKernelArg");
    cl_check(clSetKernelArg(p->kern, 3, sizeof b, &b), "clSetKernelArg");
}

/* One probe launch: GFLOP/s (2 flops per FMA lane); *per_cpu: GFLOP per CPU-second. */
static double probe_run(wbcl_context *ctx, probe *p, double *per_cpu)
{
    size_t global = p->items, local = 1;
    double t0 = now_s(), c0 = cpu_s();
    cl_check(clEnqueueNDRangeKernel(ctx->queue, p->kern, 1, NULL, &global,
                                    ctx->info.type == WBCL_DEVICE_CPU ? &local : NULL, 0, NULL, NULL),
             "launch");
    cl_check(clFinish(ctx->queue), "clFinish");
    double t = now_s() - t0, c = cpu_s() - c0;
    double gflop = (double)p->items * p->iters * PROBE_CHAINS * p->width * 2 * 1e-9;
    *per_cpu = gflop / c;
    return gflop / t;
}

static void probe_free(probe *p)
{
    clReleaseMemObject(p->out);
    clReleaseKernel(p->kern);
    clReleaseProgram(p->prog);
}

/* OpenBLAS SGEMM, n x n x n: GFLOP/s of one call; *per_cpu: GFLOP per CPU-second. */
static double sgemm_run(int n, const float *A, const float *B, float *C, double *per_cpu)
{
    double t0 = now_s(), c0 = cpu_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A, n, B, n, 0.0f, C, n);
    double t = now_s() - t0, c = cpu_s() - c0;
    *per_cpu = 2.0 * n * n * (double)n / c * 1e-9;
    return 2.0 * n * n * (double)n / t * 1e-9;
}

/* wbcl's own SGEMM (wbcl_gemm, the packed register-tile kernel on CPU
 * devices), m x m x m: GFLOP/s of one call; *per_cpu: GFLOP per CPU-second. */
static double wgemm_run(wbcl_context *ctx, int m, const wbcl_tensor *A, const wbcl_tensor *B, wbcl_tensor *C,
                        double *per_cpu)
{
    double t0 = now_s(), c0 = cpu_s();
    check(wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, A, B, 0.0f, C), ctx, "wbcl_gemm");
    check(wbcl_context_finish(ctx), ctx, "wbcl_context_finish");
    double t = now_s() - t0, c = cpu_s() - c0;
    *per_cpu = 2.0 * m * m * (double)m / c * 1e-9;
    return 2.0 * m * m * (double)m / t * 1e-9;
}

/* Interleaved medians and bests of the probe and of SGEMM at n = 2048; and
 * the median GFLOP per CPU-second of wbcl_gemm at m = 1024 and 2048 (wg_cpu,
 * the practical ceiling of a factorization built on wbcl's GEMM). */
static void yardsticks(wbcl_context *ctx, probe *pr, int reps, double *probe_gf, double *sgemm_gf,
                       double *probe_best, double *sgemm_best, double *probe_cpu, double *sgemm_cpu, double wg_cpu[2])
{
    const int n = 2048;
    float *A = malloc((size_t)n * n * sizeof *A), *B = malloc((size_t)n * n * sizeof *B),
          *C = malloc((size_t)n * n * sizeof *C);
    double *tp = malloc((size_t)reps * sizeof *tp), *ts = malloc((size_t)reps * sizeof *ts),
           *tc = malloc((size_t)reps * sizeof *tc), *tsc = malloc((size_t)reps * sizeof *tsc), dummy;
    if (!A || !B || !C || !tp || !ts || !tc || !tsc) exit(1);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        A[i] = (float)urand() - 0.5f;
        B[i] = (float)urand() - 0.5f;
    }
    const int wm[2] = {1024, 2048};
    wbcl_tensor *wt[2][3];
    double *twc[2];
    for (int g = 0; g < 2; g++) {
        size_t s2[2] = {(size_t)wm[g], (size_t)wm[g]};
        check(wbcl_tensor_create(ctx, 2, s2, WBCL_F32, A, &wt[g][0]), ctx, "tensor");
        check(wbcl_tensor_create(ctx, 2, s2, WBCL_F32, B, &wt[g][1]), ctx, "tensor");
        check(wbcl_tensor_create(ctx, 2, s2, WBCL_F32, NULL, &wt[g][2]), ctx, "tensor");
        twc[g] = malloc((size_t)reps * sizeof *twc[g]);
        if (!twc[g]) exit(1);
    }
    probe_run(ctx, pr, &dummy); /* warm-up: first launch compiles the work-group function */
    sgemm_run(n, A, B, C, &dummy);
    for (int g = 0; g < 2; g++) wgemm_run(ctx, wm[g], wt[g][0], wt[g][1], wt[g][2], &dummy);
    for (int r = 0; r < reps; r++) {
        if (r % 2 == 0) {
            tp[r] = probe_run(ctx, pr, &tc[r]);
            ts[r] = sgemm_run(n, A, B, C, &tsc[r]);
        } else {
            ts[r] = sgemm_run(n, A, B, C, &tsc[r]);
            tp[r] = probe_run(ctx, pr, &tc[r]);
        }
        for (int g = 0; g < 2; g++) wgemm_run(ctx, wm[g], wt[g][0], wt[g][1], wt[g][2], &twc[g][r]);
    }
    for (int g = 0; g < 2; g++) {
        wg_cpu[g] = median(twc[g], reps);
        free(twc[g]);
        for (int t = 0; t < 3; t++) wbcl_tensor_destroy(wt[g][t]);
    }
    *probe_gf = median(tp, reps); /* sorts */
    *sgemm_gf = median(ts, reps);
    *probe_best = tp[reps - 1];
    *sgemm_best = ts[reps - 1];
    *probe_cpu = median(tc, reps);
    *sgemm_cpu = median(tsc, reps);
    free(A);
    free(B);
    free(C);
    free(tp);
    free(ts);
    free(tc);
    free(tsc);
}

/* One row of a table: interleaved repetitions of wbcl (which = 0: cholesky,
 * 1: inverse) and the peer. Returns wbcl and peer medians. */
/* --profile: device time per kernel of one call on b matrices of order n (every launch waited for: the
 * sum has no overlap and no host gaps), the mean over reps calls; ops: 1 wbcl_cholesky, 2
 * wbcl_spd_inverse, 3 both. */
static void profile_case(wbcl_context *ctx, int n, int b, int ops, int reps)
{
    const size_t nn = (size_t)n * n;
    float *A = malloc(nn * (size_t)b * sizeof *A);
    if (!A) exit(1);
    for (int i = 0; i < b; i++) make_spd(n, A + nn * (size_t)i);
    size_t s3[3] = {(size_t)b, (size_t)n, (size_t)n};
    wbcl_tensor *tA, *tL;
    check(wbcl_tensor_create(ctx, 3, s3, WBCL_F32, A, &tA), ctx, "tensor A");
    check(wbcl_tensor_create(ctx, 3, s3, WBCL_F32, NULL, &tL), ctx, "tensor L");
    for (int op = 0; op < 2; op++) {
        if (!(ops & (1 << op))) continue;
        const char *name = op ? "wbcl_spd_inverse" : "wbcl_cholesky";
        for (int r = -1; r < reps; r++) { /* r = -1: warm-up (builds), untimed */
            if (r == 0) {
                check(wbcl_context_set_timing(ctx, 1), ctx, "timing");
                wbcl_context_reset_kernel_ns(ctx);
            }
            check(op ? wbcl_spd_inverse(ctx, tA, tL) : wbcl_cholesky(ctx, tA, tL), ctx, name);
        }
        check(wbcl_context_set_timing(ctx, 0), ctx, "timing");
        if (b == 1) printf("n = %d: %s, device time per kernel and call (mean of %d calls)\n", n, name, reps);
        else printf("%d x n = %d: %s, device time per kernel and call (mean of %d calls)\n", b, n, name, reps);
        print_kernel_profile(ctx, stdout, (double)reps);
        /* wall time per call the way the PyTorch peer times it (perf/peers/linalg_torch_cuda.py):
         * 20 calls back to back (each waits for its pivot status, as torch.linalg.cholesky
         * does for its info), the median of 5 such batches */
        double per[5];
        for (int t = 0; t < 5; t++) {
            double t0 = now_s();
            for (int c = 0; c < 20; c++)
                check(op ? wbcl_spd_inverse(ctx, tA, tL) : wbcl_cholesky(ctx, tA, tL), ctx, name);
            per[t] = (now_s() - t0) / 20;
        }
        printf("  wall per call, 20 calls back to back (median of 5 batches, the peer's protocol): %.4f ms\n",
               1e3 * median(per, 5));
    }
    wbcl_tensor_destroy(tA);
    wbcl_tensor_destroy(tL);
    free(A);
}

/* pr (table (1)): also one probe launch after each repetition's pair of
 * calls; beside[0] and beside[1] are then the medians over repetitions of
 * wbcl's and the peer's flops (gflop) per CPU-second over the probe's in
 * that repetition, so that a stretch in which the host gives the process
 * less work per CPU-second (seen on a 2-vCPU VM: every yardstick at half its
 * usual rate for a while) moves both sides of the ratio alike. */
static void run_case(wbcl_context *ctx, int which, int n, int b, int reps, const float *A, double *mw, double *mp,
                     double *diff, double *bw, double *cw, double *cp, probe *pr, double gflop, double beside[2])
{
    size_t total = (size_t)b * n * n;
    size_t s3[3] = {(size_t)b, (size_t)n, (size_t)n};
    wbcl_tensor *tA, *tL;
    check(wbcl_tensor_create(ctx, 3, s3, WBCL_F32, A, &tA), ctx, "tensor A");
    check(wbcl_tensor_create(ctx, 3, s3, WBCL_F32, NULL, &tL), ctx, "tensor L");
    float *work = malloc(total * sizeof *work), *L = malloc(total * sizeof *L);
    double *tw = malloc((size_t)reps * sizeof *tw), *tp = malloc((size_t)reps * sizeof *tp),
           *tc = malloc((size_t)reps * sizeof *tc), *tpc = malloc((size_t)reps * sizeof *tpc),
           *rw = malloc((size_t)reps * sizeof *rw), *rp = malloc((size_t)reps * sizeof *rp);
    if (!work || !L || !tw || !tp || !tc || !tpc || !rw || !rp) exit(1);
    /* warm-up (builds kernels) and the comparison of results */
    for (int w = 0; w < 2; w++) {
        if (which == 0) time_wbcl_chol(ctx, tA, tL);
        else check(wbcl_spd_inverse(ctx, tA, tL), ctx, "wbcl_spd_inverse");
        if (which == 0) time_spotrf(n, b, A, work, NULL);
        else time_spotri(n, b, A, work, NULL);
    }
    check(wbcl_tensor_read(ctx, tL, L, total), ctx, "read");
    *diff = rel_diff(n, b, L, work);
    for (int r = 0; r < reps; r++) {
        for (int half = 0; half < 2; half++) {
            if ((half == 0) == (r % 2 == 0)) {
                double t0 = now_s(), c0 = cpu_s();
                if (which == 0) check(wbcl_cholesky(ctx, tA, tL), ctx, "wbcl_cholesky");
                else check(wbcl_spd_inverse(ctx, tA, tL), ctx, "wbcl_spd_inverse");
                tw[r] = now_s() - t0;
                tc[r] = cpu_s() - c0;
            } else {
                tp[r] = which == 0 ? time_spotrf(n, b, A, work, &tpc[r]) : time_spotri(n, b, A, work, &tpc[r]);
            }
        }
        if (pr) {
            double probe_c;
            probe_run(ctx, pr, &probe_c);
            rw[r] = gflop / tc[r] / probe_c;
            rp[r] = gflop / tpc[r] / probe_c;
        }
    }
    if (pr) {
        beside[0] = median(rw, reps);
        beside[1] = median(rp, reps);
    }
    *mw = median(tw, reps); /* sorts */
    *mp = median(tp, reps);
    if (bw) *bw = tw[0];
    if (cw) *cw = median(tc, reps);
    if (cp) *cp = median(tpc, reps);
    wbcl_tensor_destroy(tA);
    wbcl_tensor_destroy(tL);
    free(work);
    free(L);
    free(tw);
    free(tp);
    free(tc);
    free(tpc);
    free(rw);
    free(rp);
}

int main(int argc, char **argv)
{
    int reps = 9, threads = 2, batch = 1000, redunet = 0, profile = 0, small_set = 0;
    double peak = 0.0; /* 0: the probe's median */
    int large[16] = {256, 512, 1024, 2048}, nl = 4, small[16] = {3, 10, 20, 64}, nsm = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--peak") && i + 1 < argc) peak = atof(argv[++i]);
        else if (!strcmp(argv[i], "--large") && i + 1 < argc) nl = parse_list(argv[++i], large, 16);
        else if (!strcmp(argv[i], "--small") && i + 1 < argc) nsm = parse_list(argv[++i], small, 16), small_set = 1;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--redunet")) redunet = 1;
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--reps N] [--threads T] [--peak GFLOPS] [--large n,n,...] [--small n,n,...] "
                    "[--batch B] [--redunet] [--profile]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (batch < 1) batch = 1;
    openblas_set_num_threads(threads);

    char err[1024];
    wbcl_context *ctx = NULL;
    wbcl_status st = wbcl_context_create(NULL, &ctx, err, sizeof err);
    if (st) {
        fprintf(stderr, "context: %s: %s\n", wbcl_status_name(st), err);
        return 1;
    }
    const wbcl_device_info *dev = wbcl_context_device(ctx);
    if (profile) {
        for (int i = 0; i < nl; i++) profile_case(ctx, large[i], 1, 3, reps);
        if (small_set) /* the batched small factorizations of table (2) */
            for (int i = 0; i < nsm; i++) profile_case(ctx, small[i], batch, 1, reps);
        if (redunet) profile_case(ctx, 784, 11, 2, reps); /* table (3): ReduNet's 11 inverses */
        wbcl_context_destroy(ctx);
        return 0;
    }
    const char *env_aff = getenv("POCL_AFFINITY"), *env_to = getenv("OPENBLAS_THREAD_TIMEOUT");
    printf("device: %s (%s, driver %s), variant %s; OpenBLAS %s, %d threads; POCL_AFFINITY=%s "
           "OPENBLAS_THREAD_TIMEOUT=%s\n",
           dev->name, dev->platform_name, dev->driver_version,
           wbcl_context_variant(ctx) == WBCL_VARIANT_CPU ? "CPU" : "GPU", openblas_get_config(), threads,
           env_aff ? env_aff : "(unset)", env_to ? env_to : "(unset)");
    double probe_gf, sgemm_gf, probe_best, sgemm_best, probe_cpu, sgemm_cpu, wg_cpu[2];
    probe pr;
    probe_init(ctx, &pr);
    yardsticks(ctx, &pr, reps < 5 ? 5 : reps, &probe_gf, &sgemm_gf, &probe_best, &sgemm_best, &probe_cpu,
               &sgemm_cpu, wg_cpu);
    const int peak_given = peak > 0;
    if (!peak_given) peak = probe_best;
    printf("reps: %d after warm-up, interleaved; times are medians; ratio = spotrf_ time / wbcl time (> 1: wbcl "
           "faster)\n",
           reps);
    printf("(0) measured FP32 FMA peak (OpenCL probe, %d work-items x %d float%d chains): median %.1f, best %.1f "
           "GFLOP/s; OpenBLAS SGEMM n = 2048: median %.1f, best %.1f GFLOP/s; %% of peak below uses %.1f GFLOP/s%s, "
           "%% of SGEMM the SGEMM median\n\n",
           (int)probe_items(ctx), PROBE_CHAINS, probe_width(ctx), probe_gf, probe_best, sgemm_gf, sgemm_best, peak,
           peak_given ? " (--peak)" : " (the probe's best: the capability; medians swing with the machine's load)");
    printf("    per CPU-second of this process (load-independent): probe %.1f GFLOP per CPU-s, i.e. %.1f GFLOP/s "
           "on %d cores; OpenBLAS SGEMM %.1f GFLOP per CPU-s (%.0f%% of the probe's)\n\n",
           probe_cpu, probe_cpu * (double)dev->compute_units, (int)dev->compute_units, sgemm_cpu,
           100 * sgemm_cpu / probe_cpu);
    printf("    wbcl_gemm (packed kernel) per CPU-second: m = n = k = 1024: %.1f (%.0f%% of the probe's), 2048: %.1f "
           "(%.0f%%): the ceiling of a factorization whose flops all run in wbcl's GEMM\n\n",
           wg_cpu[0], 100 * wg_cpu[0] / probe_cpu, wg_cpu[1], 100 * wg_cpu[1] / probe_cpu);
    if (dev->type != WBCL_DEVICE_CPU)
        printf("    (the device is not the CPU: per-CPU-second figures count the host's time waiting for it and "
               "are not comparable; the GEMM is the device's GEMM path, see wbcl-info)\n\n");

    if (nl) {
        printf("(1) one large matrix, n^3/3 flops\n\n");
        printf("| n | wbcl ms | wbcl GFLOP/s | wbcl %% of peak | wbcl best GFLOP/s | best %% of peak | %% of peak per "
               "CPU-s | wbcl %% of SGEMM | spotrf_ ms | spotrf_ GFLOP/s | spotrf_ %% of peak | spotrf_ %% of peak per "
               "CPU-s | ratio | max rel diff | wbcl per CPU-s, probe beside | spotrf_ per CPU-s, probe beside |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        fflush(stdout);
    }
    for (int i = 0; i < nl; i++) {
        int n = large[i];
        float *A = malloc((size_t)n * n * sizeof *A);
        if (!A) return 1;
        make_spd(n, A);
        double mw, mp, diff, flop = (double)n * n * n / 3.0;
        double bw, cw;
        double cp, beside[2];
        run_case(ctx, 0, n, 1, reps, A, &mw, &mp, &diff, &bw, &cw, &cp, &pr, flop * 1e-9, beside);
        printf("| %d | %.2f | %.1f | %.0f%% | %.1f | %.0f%% | %.0f%% | %.0f%% | %.2f | %.1f | %.0f%% | %.0f%% | %.3f | "
               "%.1e | %.0f%% | %.0f%% |\n",
               n, 1e3 * mw, flop / mw * 1e-9, 100 * flop / mw * 1e-9 / peak, flop / bw * 1e-9,
               100 * flop / bw * 1e-9 / peak, 100 * flop / cw * 1e-9 / probe_cpu, 100 * flop / mw * 1e-9 / sgemm_gf,
               1e3 * mp, flop / mp * 1e-9, 100 * flop / mp * 1e-9 / peak, 100 * flop / cp * 1e-9 / probe_cpu, mp / mw,
               diff, 100 * beside[0], 100 * beside[1]);
        fflush(stdout);
        free(A);
    }

    if (nsm) {
        printf("\n(2) %d small matrices: one batched wbcl_cholesky vs a loop of %d spotrf_ calls\n\n", batch, batch);
        printf("| n | wbcl ms | wbcl GFLOP/s | spotrf_ loop ms | spotrf_ GFLOP/s | ratio | max rel diff |\n"
               "|---|---|---|---|---|---|---|\n");
        fflush(stdout);
    }
    for (int i = 0; i < nsm; i++) {
        int n = small[i];
        size_t nn = (size_t)n * n;
        float *A = malloc((size_t)batch * nn * sizeof *A);
        if (!A) return 1;
        for (int b = 0; b < batch; b++) make_spd(n, A + b * nn);
        double mw, mp, diff, flop = (double)batch * n * n * n / 3.0;
        run_case(ctx, 0, n, batch, reps, A, &mw, &mp, &diff, NULL, NULL, NULL, NULL, 0.0, NULL);
        printf("| %d | %.3f | %.2f | %.3f | %.2f | %.3f | %.1e |\n", n, 1e3 * mw, flop / mw * 1e-9, 1e3 * mp,
               flop / mp * 1e-9, mp / mw, diff);
        fflush(stdout);
        free(A);
    }

    if (redunet) {
        const int n = 784, b = 11;
        size_t nn = (size_t)n * n;
        float *A = malloc((size_t)b * nn * sizeof *A);
        if (!A) return 1;
        for (int k = 0; k < b; k++) make_spd(n, A + k * nn);
        double mw, mp, diff, flop = (double)b * n * n * n; /* potrf n^3/3 + potri 2n^3/3 */
        run_case(ctx, 1, n, b, reps, A, &mw, &mp, &diff, NULL, NULL, NULL, NULL, 0.0, NULL);
        printf("\n(3) ReduNet layer: %d SPD inverses of d = %d (n^3 flops each)\n\n", b, n);
        printf("| wbcl_spd_inverse ms | GFLOP/s | spotrf_+spotri_ ms | GFLOP/s | ratio | max rel diff |\n"
               "|---|---|---|---|---|---|\n");
        printf("| %.2f | %.1f | %.2f | %.1f | %.3f | %.1e |\n", 1e3 * mw, flop / mw * 1e-9, 1e3 * mp,
               flop / mp * 1e-9, mp / mw, diff);
        free(A);
    }
    probe_free(&pr);
    wbcl_context_destroy(ctx);
    return 0;
}
