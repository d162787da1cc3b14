/* Basic ops on ~64 MB inputs: wbcl vs plain C loops (1 thread and 2 pthreads),
 * interleaved call by call in one process, medians of wall time (op + finish).
 *
 *   bench_ops [--reps N] [--variant cpu|gpu] [--mb M]
 *
 * Cases: axpby (y = a x + b y: 2 reads + 1 write, the shape of relu(x - a b)),
 * relu, reduce_cols SUM on (R, C) for C = 1024, 64, 4, reduce_rows SUM,
 * layernorm and softmax on (R, 1024). The C peers are written to vectorize
 * (-O3: independent per-lane partial sums, no reassociation needed); the
 * softmax peer calls scalar expf (glibc vectorizes it only under fast-math).
 * "x1"/"x2" = peer time / wbcl time against the 1- and 2-thread peer:
 * > 1 means wbcl is faster. Recommended: POCL_AFFINITY=1, warm POCL_CACHE_DIR. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wbcl/wbcl.h"
#include "bench_util.h"

static void check(wbcl_status st, wbcl_context *ctx, const char *what)
{
    if (st) {
        fprintf(stderr, "%s failed: %s: %s\n", what, wbcl_status_name(st), wbcl_context_last_error(ctx));
        exit(1);
    }
}

/* ---- C peers: work on [lo, hi) of an index range ---------------------------- */
typedef struct job {
    int kind;
    size_t lo, hi;       /* elements (elementwise) or rows */
    size_t C;
    const float *x;
    float *y;
    float *acc;          /* reduce_cols: per-thread column sums */
} job;

enum { K_AXPBY, K_RELU, K_RCOLS, K_RROWS, K_LN, K_SOFTMAX };

static float sum16(const float *p, size_t d)
{
    float a[16] = {0};
    size_t i = 0;
    for (; i + 16 <= d; i += 16)
        for (int j = 0; j < 16; j++) a[j] += p[i + j];
    float s = 0;
    for (; i < d; i++) s += p[i];
    for (int j = 0; j < 16; j++) s += a[j];
    return s;
}

static void run_job(job *J)
{
    const float *x = J->x;
    float *y = J->y;
    size_t C = J->C;
    switch (J->kind) {
    case K_AXPBY:
        for (size_t i = J->lo; i < J->hi; i++) y[i] = 1.5f * x[i] - 0.5f * y[i];
        break;
    case K_RELU:
        for (size_t i = J->lo; i < J->hi; i++) y[i] = x[i] < 0 ? 0 : x[i];
        break;
    case K_RCOLS:
        memset(J->acc, 0, C * sizeof(float));
        for (size_t r = J->lo; r < J->hi; r++)
            for (size_t c = 0; c < C; c++) J->acc[c] += x[r * C + c];
        break;
    case K_RROWS:
        for (size_t r = J->lo; r < J->hi; r++) y[r] = sum16(x + r * C, C);
        break;
    case K_LN:
        for (size_t r = J->lo; r < J->hi; r++) {
            const float *p = x + r * C;
            float *q = y + r * C;
            float mean = sum16(p, C) / (float)C;
            float a[16] = {0};
            size_t i = 0;
            for (; i + 16 <= C; i += 16)
                for (int j = 0; j < 16; j++) a[j] += (p[i + j] - mean) * (p[i + j] - mean);
            float var = 0;
            for (; i < C; i++) var += (p[i] - mean) * (p[i] - mean);
            for (int j = 0; j < 16; j++) var += a[j];
            float rstd = 1.0f / sqrtf(var / (float)C + 1e-5f);
            for (i = 0; i < C; i++) q[i] = (p[i] - mean) * rstd;
        }
        break;
    case K_SOFTMAX:
        for (size_t r = J->lo; r < J->hi; r++) {
            const float *p = x + r * C;
            float *q = y + r * C;
            float m = -INFINITY;
            for (size_t i = 0; i < C; i++) m = p[i] > m ? p[i] : m;
            for (size_t i = 0; i < C; i++) q[i] = expf(p[i] - m);
            float inv = 1.0f / sum16(q, C);
            for (size_t i = 0; i < C; i++) q[i] *= inv;
        }
        break;
    }
}

static void *thread_main(void *p)
{
    run_job(p);
    return NULL;
}

/* Runs kind over [0, n) split across T threads (the caller is thread 0). */
static void peer(int kind, int T, size_t n, size_t C, const float *x, float *y, float **acc)
{
    job J[2];
    pthread_t th;
    for (int t = 0; t < T; t++) {
        J[t] = (job){kind, n * (size_t)t / (size_t)T, n * (size_t)(t + 1) / (size_t)T, C, x, y, acc ? acc[t] : NULL};
    }
    if (T > 1) pthread_create(&th, NULL, thread_main, &J[1]);
    run_job(&J[0]);
    if (T > 1) pthread_join(th, NULL);
    if (kind == K_RCOLS) {
        for (size_t c = 0; c < C; c++) y[c] = acc[0][c];
        for (int t = 1; t < T; t++)
            for (size_t c = 0; c < C; c++) y[c] += acc[t][c];
    }
}

/* ---- the benchmark --------------------------------------------------------- */
typedef struct bcase {
    const char *name;
    int kind;
    size_t R, C;     /* rows, columns (elementwise: R = n, C = 1) */
    double bytes;    /* bytes moved per call (compulsory traffic) */
} bcase;

static wbcl_status run_wbcl(wbcl_context *ctx, const bcase *b, wbcl_tensor *x, wbcl_tensor *y, wbcl_tensor *v)
{
    switch (b->kind) {
    case K_AXPBY: return wbcl_axpby(ctx, 1.5f, x, -0.5f, y);
    case K_RELU: return wbcl_relu(ctx, x, y);
    case K_RCOLS: return wbcl_reduce_cols(ctx, WBCL_REDUCE_SUM, x, v);
    case K_RROWS: return wbcl_reduce_rows(ctx, WBCL_REDUCE_SUM, x, v);
    case K_LN: return wbcl_layernorm(ctx, x, NULL, NULL, 1e-5f, y);
    case K_SOFTMAX: return wbcl_softmax(ctx, x, y);
    }
    return WBCL_ERROR_INVALID_ARGUMENT;
}

int main(int argc, char **argv)
{
    int reps = 11;
    double mb = 64;
    wbcl_variant variant = WBCL_VARIANT_CPU;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--variant") && i + 1 < argc) {
            i++;
            variant = !strcmp(argv[i], "gpu") ? WBCL_VARIANT_GPU : WBCL_VARIANT_CPU;
        } else {
            fprintf(stderr, "usage: %s [--reps N] [--variant cpu|gpu] [--mb M]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    size_t n = (size_t)(mb * 1048576.0 / 4.0);
    n -= n % 1024;
    wbcl_context *ctx = NULL;
    char err[1024];
    if (wbcl_context_create(NULL, &ctx, err, sizeof err)) {
        fprintf(stderr, "no context: %s\n", err);
        return 1;
    }
    check(wbcl_context_set_variant(ctx, variant), ctx, "set_variant");
    const wbcl_device_info *dev = wbcl_context_device(ctx);
    printf("# device: %s (%s, driver %s), variant %s, %.0f MB inputs, %d reps, medians\n", dev->name,
           dev->platform_name, dev->driver_version, variant == WBCL_VARIANT_CPU ? "cpu" : "gpu", mb, reps);

    const bcase cases[] = {
        {"axpby y=1.5x-0.5y", K_AXPBY, n, 1, 12.0 * n},
        {"relu", K_RELU, n, 1, 8.0 * n},
        {"reduce_cols C=1024", K_RCOLS, n / 1024, 1024, 4.0 * n},
        {"reduce_cols C=64", K_RCOLS, n / 64, 64, 4.0 * n},
        {"reduce_cols C=4", K_RCOLS, n / 4, 4, 4.0 * n},
        {"reduce_rows C=1024", K_RROWS, n / 1024, 1024, 4.0 * n},
        {"layernorm d=1024", K_LN, n / 1024, 1024, 8.0 * n},
        {"softmax d=1024", K_SOFTMAX, n / 1024, 1024, 8.0 * n},
    };
    float *hx = malloc(n * sizeof *hx), *hy = malloc(n * sizeof *hy);
    float *acc[2] = {malloc(1024 * sizeof(float)), malloc(1024 * sizeof(float))};
    if (!hx || !hy || !acc[0] || !acc[1]) return 1;
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        hx[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        hy[i] = 0.5f * hx[i];
    }
    printf("%-20s %10s %10s %10s %8s %8s %10s\n", "case", "wbcl ms", "C1 ms", "C2 ms", "x1", "x2", "wbcl GB/s");
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const bcase *b = &cases[ci];
        size_t shape[2] = {b->R, b->C}, vn = b->kind == K_RCOLS ? b->C : b->R;
        wbcl_tensor *x = NULL, *y = NULL, *v = NULL;
        check(wbcl_tensor_create(ctx, b->C > 1 ? 2 : 1, b->C > 1 ? shape : &b->R, WBCL_F32, hx, &x), ctx, "x");
        check(wbcl_tensor_create(ctx, b->C > 1 ? 2 : 1, b->C > 1 ? shape : &b->R, WBCL_F32, hy, &y), ctx, "y");
        check(wbcl_tensor_create(ctx, 1, &vn, WBCL_F32, NULL, &v), ctx, "v");
        double *tw = malloc((size_t)reps * sizeof *tw), *t1 = malloc((size_t)reps * sizeof *t1);
        double *t2 = malloc((size_t)reps * sizeof *t2);
        size_t range = b->R; /* elements or rows */
        for (int rep = -2; rep < reps; rep++) { /* two warm-ups */
            double t0 = now_s();
            check(run_wbcl(ctx, b, x, y, v), ctx, b->name);
            check(wbcl_context_finish(ctx), ctx, "finish");
            double a = now_s() - t0;
            t0 = now_s();
            peer(b->kind, 1, range, b->C, hx, hy, acc);
            double c1 = now_s() - t0;
            t0 = now_s();
            peer(b->kind, 2, range, b->C, hx, hy, acc);
            double c2 = now_s() - t0;
            if (rep >= 0) { tw[rep] = a; t1[rep] = c1; t2[rep] = c2; }
        }
        double mw = median(tw, reps), m1 = median(t1, reps), m2 = median(t2, reps);
        printf("%-20s %10.2f %10.2f %10.2f %8.2f %8.2f %10.1f\n", b->name, 1e3 * mw, 1e3 * m1, 1e3 * m2, m1 / mw,
               m2 / mw, b->bytes / mw * 1e-9);
        fflush(stdout);
        free(tw); free(t1); free(t2);
        wbcl_tensor_destroy(x); wbcl_tensor_destroy(y); wbcl_tensor_destroy(v);
        /* axpby's peer rewrote hy in place: keep the input bounded */
        for (size_t i = 0; i < n; i++) hy[i] = 0.5f * hx[i];
    }
    free(hx); free(hy); free(acc[0]); free(acc[1]);
    wbcl_context_destroy(ctx);
    return 0;
}
