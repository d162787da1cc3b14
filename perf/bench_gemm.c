/* Square SGEMM: wbcl packed kernel vs OpenBLAS cblas_sgemm, interleaved call
 * by call in one process, plus wbcl's CLBlast path (fewer repetitions: it is
 * slow on PoCL). Reports medians, GFLOP/s, ratios, max relative error.
 *
 *   bench_gemm [--reps N] [--clblast-reps N] [--no-clblast] [--threads T] [--ta] [--tb] [--f16] [n ...]
 *
 * Defaults: n = 256 512 1024 1536 2048, 9 repetitions (CLBlast 3) after a
 * warm-up, OpenBLAS on 2 threads, C = A B. --ta / --tb transpose A / B (the
 * same for both libraries; --tb is the nn.Linear case x W^T). --f16 adds the
 * same product with A, B and C stored as float16 (fp32 compute), timed
 * interleaved with the float32 packed call and OpenBLAS (and CLBlast, with its
 * float32 span copies); its error is against OpenBLAS on the unrounded inputs,
 * so it includes the half rounding (~2^-11). Recommended environment (see
 * perf/RESULTS.md): POCL_AFFINITY=1 OPENBLAS_THREAD_TIMEOUT=1, warm
 * POCL_CACHE_DIR. The ratio "wbcl / OpenBLAS" is a speed ratio (OpenBLAS
 * time / wbcl time = wbcl GFLOP/s / OpenBLAS GFLOP/s): > 1 means wbcl is faster. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wbcl/wbcl.h"
#include "bench_util.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int check(wbcl_status st, wbcl_context *ctx, const char *what)
{
    if (st) {
        fprintf(stderr, "%s failed: %s: %s\n", what, wbcl_status_name(st), wbcl_context_last_error(ctx));
        exit(1);
    }
    return 0;
}

/* max |c - ref| / max |ref| */
static double rel_err(const float *c, const float *ref, size_t len)
{
    double emax = 0, rmax = 0;
    for (size_t i = 0; i < len; i++) {
        double e = fabs((double)c[i] - (double)ref[i]);
        if (!(e <= emax)) emax = e; /* NaN propagates */
        if (fabs((double)ref[i]) > rmax) rmax = fabs((double)ref[i]);
    }
    return rmax > 0 ? emax / rmax : emax;
}

static int g_ta, g_tb, g_f16;

static double time_wbcl(wbcl_context *ctx, wbcl_tensor *A, wbcl_tensor *B, wbcl_tensor *C)
{
    double t0 = now_s();
    check(wbcl_gemm(ctx, g_ta ? WBCL_TRANS : WBCL_NO_TRANS, g_tb ? WBCL_TRANS : WBCL_NO_TRANS, 1.0f, A, B, 0.0f, C),
          ctx, "wbcl_gemm");
    check(wbcl_context_finish(ctx), ctx, "finish");
    return now_s() - t0;
}

static double time_blas(int n, const float *a, const float *b, float *c)
{
    double t0 = now_s();
    cblas_sgemm(CblasRowMajor, g_ta ? CblasTrans : CblasNoTrans, g_tb ? CblasTrans : CblasNoTrans, n, n, n, 1.0f, a,
                n, b, n, 0.0f, c, n);
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    int reps = 9, clreps = 3, use_clblast = 1, threads = 2;
    int sizes[32], ns = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--clblast-reps") && i + 1 < argc) clreps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-clblast")) use_clblast = 0;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ta")) g_ta = 1;
        else if (!strcmp(argv[i], "--tb")) g_tb = 1;
        else if (!strcmp(argv[i], "--f16")) g_f16 = 1;
        else if (atoi(argv[i]) > 0 && ns < 32) sizes[ns++] = atoi(argv[i]);
        else {
            fprintf(stderr, "usage: %s [--reps N] [--clblast-reps N] [--no-clblast] [--threads T] [--ta] [--tb] [--f16] [n ...]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!ns) {
        const int def[] = {256, 512, 1024, 1536, 2048};
        for (int i = 0; i < 5; i++) sizes[ns++] = def[i];
    }
    if (reps < 1) reps = 1;
    if (clreps < 1) clreps = 1;
    openblas_set_num_threads(threads);

    char err[1024];
    wbcl_context *ctx = NULL;
    wbcl_status st = wbcl_context_create(NULL, &ctx, err, sizeof err);
    if (st) {
        fprintf(stderr, "context: %s: %s\n", wbcl_status_name(st), err);
        return 1;
    }
    const wbcl_device_info *dev = wbcl_context_device(ctx);
    const char *env_aff = getenv("POCL_AFFINITY"), *env_to = getenv("OPENBLAS_THREAD_TIMEOUT");
    printf("device: %s (%s, driver %s); OpenBLAS %s, %d threads; POCL_AFFINITY=%s OPENBLAS_THREAD_TIMEOUT=%s\n",
           dev->name, dev->platform_name, dev->driver_version, openblas_get_config(), threads,
           env_aff ? env_aff : "(unset)", env_to ? env_to : "(unset)");
    printf("C = op(A) op(B), ta=%s tb=%s; reps: %d (CLBlast %d) after warm-up; times are medians; ratio = speed "
           "relative to OpenBLAS (> 1: faster)\n\n",
           g_ta ? "T" : "N", g_tb ? "T" : "N", reps, clreps);
    printf("| n | packed ms | packed GFLOP/s | OpenBLAS ms | OpenBLAS GFLOP/s | packed / OpenBLAS | packed rel err |%s%s%s\n",
           g_f16 ? " f16 packed ms | f16 packed GFLOP/s | f16 / f32 packed | f16 packed rel err |" : "",
           use_clblast ? " CLBlast ms | CLBlast GFLOP/s | CLBlast / OpenBLAS | CLBlast rel err |" : "",
           use_clblast && g_f16 ? " f16 CLBlast ms | f16 / f32 CLBlast | f16 CLBlast rel err |" : "");
    printf("|---|---|---|---|---|---|---|%s%s%s\n", g_f16 ? "---|---|---|---|" : "", use_clblast ? "---|---|---|---|" : "",
           use_clblast && g_f16 ? "---|---|---|" : "");
    fflush(stdout);

    for (int si = 0; si < ns; si++) {
        const int n = sizes[si];
        const size_t nn = (size_t)n * (size_t)n;
        const double flop = 2.0 * n * (double)n * n;
        float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c),
              *ref = malloc(nn * sizeof *ref);
        double *tw = malloc((size_t)reps * sizeof *tw), *tb = malloc((size_t)reps * sizeof *tb),
               *tc = malloc((size_t)clreps * sizeof *tc), *tb2 = malloc((size_t)clreps * sizeof *tb2),
               *th = malloc((size_t)reps * sizeof *th), *tch = malloc((size_t)clreps * sizeof *tch);
        if (!a || !b || !c || !ref || !tw || !tb || !tc || !tb2 || !th || !tch) return 1;
        for (size_t i = 0; i < nn; i++) a[i] = frand();
        for (size_t i = 0; i < nn; i++) b[i] = frand();
        size_t shape[2] = {(size_t)n, (size_t)n};
        wbcl_tensor *A, *B, *C;
        check(wbcl_tensor_create(ctx, 2, shape, WBCL_F32, a, &A), ctx, "tensor A");
        check(wbcl_tensor_create(ctx, 2, shape, WBCL_F32, b, &B), ctx, "tensor B");
        check(wbcl_tensor_create(ctx, 2, shape, WBCL_F32, NULL, &C), ctx, "tensor C");
        wbcl_tensor *A16 = NULL, *B16 = NULL, *C16 = NULL;
        if (g_f16) {
            check(wbcl_tensor_create(ctx, 2, shape, WBCL_F16, a, &A16), ctx, "tensor A16");
            check(wbcl_tensor_create(ctx, 2, shape, WBCL_F16, b, &B16), ctx, "tensor B16");
            check(wbcl_tensor_create(ctx, 2, shape, WBCL_F16, NULL, &C16), ctx, "tensor C16");
        }

        /* correctness first, then warm-up, then interleaved timing */
        time_blas(n, a, b, ref);
        check(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_PACKED), ctx, "backend");
        time_wbcl(ctx, A, B, C);
        check(wbcl_tensor_read(ctx, C, c, nn), ctx, "read C");
        double err_p = rel_err(c, ref, nn), err_h = 0;
        if (g_f16) {
            time_wbcl(ctx, A16, B16, C16);
            check(wbcl_tensor_read(ctx, C16, c, nn), ctx, "read C16");
            err_h = rel_err(c, ref, nn);
        }
        time_blas(n, a, b, ref);
        time_wbcl(ctx, A, B, C);
        for (int r = 0; r < reps; r++) {
            if (r % 2 == 0) {
                tw[r] = time_wbcl(ctx, A, B, C);
                tb[r] = time_blas(n, a, b, ref);
                if (g_f16) th[r] = time_wbcl(ctx, A16, B16, C16);
            } else {
                if (g_f16) th[r] = time_wbcl(ctx, A16, B16, C16);
                tb[r] = time_blas(n, a, b, ref);
                tw[r] = time_wbcl(ctx, A, B, C);
            }
        }
        double mw = median(tw, reps), mb = median(tb, reps);
        printf("| %d | %.2f | %.1f | %.2f | %.1f | %.3f | %.1e |", n, 1e3 * mw, flop / mw * 1e-9, 1e3 * mb,
               flop / mb * 1e-9, mb / mw, err_p);
        if (g_f16) {
            double mh = median(th, reps);
            printf(" %.2f | %.1f | %.3f | %.1e |", 1e3 * mh, flop / mh * 1e-9, mw / mh, err_h);
        }
        if (use_clblast) {
            check(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_CLBLAST), ctx, "backend");
            time_wbcl(ctx, A, B, C); /* first call compiles CLBlast's kernels */
            check(wbcl_tensor_read(ctx, C, c, nn), ctx, "read C");
            double err_c = rel_err(c, ref, nn);
            for (int r = 0; r < clreps; r++) {
                tc[r] = time_wbcl(ctx, A, B, C);
                tb2[r] = time_blas(n, a, b, ref);
            }
            double mc = median(tc, clreps), mb2 = median(tb2, clreps);
            printf(" %.2f | %.1f | %.3f | %.1e |", 1e3 * mc, flop / mc * 1e-9, mb2 / mc, err_c);
            if (g_f16) {
                time_wbcl(ctx, A16, B16, C16);
                check(wbcl_tensor_read(ctx, C16, c, nn), ctx, "read C16");
                double err_ch = rel_err(c, ref, nn);
                for (int r = 0; r < clreps; r++) {
                    tch[r] = time_wbcl(ctx, A16, B16, C16);
                    tc[r] = time_wbcl(ctx, A, B, C);
                }
                double mch = median(tch, clreps), mc2 = median(tc, clreps);
                printf(" %.2f | %.3f | %.1e |", 1e3 * mch, mc2 / mch, err_ch);
            }
        }
        printf("\n");
        fflush(stdout);
        wbcl_tensor_destroy(A);
        wbcl_tensor_destroy(B);
        wbcl_tensor_destroy(C);
        wbcl_tensor_destroy(A16);
        wbcl_tensor_destroy(B16);
        wbcl_tensor_destroy(C16);
        free(a); free(b); free(c); free(ref); free(tw); free(tb); free(tc); free(tb2); free(th); free(tch);
    }
    wbcl_context_destroy(ctx);
    return 0;
}
