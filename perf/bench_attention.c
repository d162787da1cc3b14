/* One attention layer including its projections — the ToST paper's App. D.2 comparison
 * (Fig. 6 left): K = 8 heads, d = 384, batch 1, n tokens — for every variant available, with
 * OpenBLAS GEMM + C softmax as the in-process peer, interleaved call by call. Also the fused
 * per-head kernel alone against the OpenBLAS SGEMM FLOP rate, measured in the same run.
 *
 *   bench_attention [--n LIST] [--reps R] [--d D] [--heads K] [--batch B] [--threads T]
 *                   [--only LIST] [--csv FILE] [--no-memory] [--max-quadratic-mb MB]
 *   bench_attention --memory-child IMPL VARIANT N [--d D] [--heads K] [--batch B]
 *
 * LIST is comma-separated (n: 256,512,...,16384 by default; --only: names such as
 * wbcl.softmax,openblas.mssa). Each row: median wall time of R calls (after one warm-up call
 * that also checks the result against the OpenBLAS peer of the same math where there is one),
 * GFLOP/s of the nominal FLOP count, and the peak memory of one call measured in a fresh child
 * process (this program with --memory-child): the rise of the resident set (VmHWM after
 * clearing it through /proc/self/clear_refs, minus VmRSS before) while the layer's weights,
 * input, output and work buffers exist and one forward runs. On a CPU OpenCL device the
 * device buffers are host memory, so this is the same measure for wbcl, OpenBLAS and PyTorch
 * (perf/peers/attention_torch.py); glibc's mmap threshold is pinned so that freed buffers
 * leave the resident set.
 *
 * ADDING A VARIANT: write one function `static int layer_NAME(bench_env *e, int op, layer_state *s)`
 * handling OP_SETUP (allocate weights/input/output for s->n tokens), OP_RUN (one forward,
 * synchronous) and OP_FREE, plus a FLOP count, and add a line to the `layers` table.
 *
 * Recommended environment: POCL_AFFINITY=1 OPENBLAS_THREAD_TIMEOUT=1, warm POCL_CACHE_DIR.
 * Speed ratios "x / y" are time(y) / time(x): > 1 means x is faster. */
#define _GNU_SOURCE
#include <cblas.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wbcl/wbcl.h"
#include "bench_util.h"
#include "wbcl/attention.h"
#if defined(__has_include)
#if __has_include("wbcl/tssa.h")
#include "wbcl/tssa.h"
#define HAVE_TSSA_H 1
#endif
#if __has_include("wbcl/xca.h")
#include "wbcl/xca.h"
#define HAVE_XCA_H 1
#endif
#endif

/* The TSSA / XCA layers come from another part of the library: referenced weakly, so this
 * benchmark builds and runs (without those rows) while they are absent from libwbcl. */
#if defined(HAVE_TSSA_H) && defined(__GNUC__)
#pragma weak wbcl_tssa_layer_create
#pragma weak wbcl_tssa_layer_forward
#pragma weak wbcl_tssa_layer_destroy
#endif
#if defined(HAVE_XCA_H) && defined(__GNUC__)
#pragma weak wbcl_xca_layer_create
#pragma weak wbcl_xca_layer_forward
#pragma weak wbcl_xca_layer_destroy
#endif

/* ---- utilities ------------------------------------------------------------------------------ */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void) /* uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *rand_buf(size_t n, float scale)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory (%zu floats)\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = scale * frand();
    return p;
}

static void die_wbcl(wbcl_status st, wbcl_context *ctx, const char *what)
{
    if (st) {
        fprintf(stderr, "%s failed: %s: %s\n", what, wbcl_status_name(st), wbcl_context_last_error(ctx));
        exit(1);
    }
}

/* kB from a line of /proc/self/status */
static long proc_status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = atol(line + kl + 1);
            break;
        }
    fclose(f);
    return v;
}

static int reset_hwm(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* ---- the layer interface ------------------------------------------------------------------------ */
typedef struct bench_env {
    wbcl_context *ctx;
    size_t d, K, B;
    int threads;
} bench_env;

enum { OP_SETUP, OP_RUN, OP_FREE };

typedef struct layer_state {
    size_t n;
    float *host[8];        /* host buffers (OpenBLAS peers; inputs)   */
    wbcl_tensor *t[4];     /* device tensors (wbcl layers)            */
    void *mod;             /* the wbcl module / layer                 */
    double check;          /* a checksum of the output (for the check) */
} layer_state;

typedef struct layer_def {
    const char *impl, *variant;
    int (*fn)(bench_env *e, int op, layer_state *s); /* 0 ok, 1 unavailable, exits on error */
    double (*flops)(const bench_env *e, size_t n);
    const char *what;
} layer_def;

/* Deterministic weights shared by every implementation of the same math (same seed per n). */
static void seed_for(size_t n, int which) { rng_state = 0x9E3779B97F4A7C15ull ^ (n * 1000003u + (size_t)which); }

static double sum_abs(const float *y, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += fabs((double)y[i]);
    return s;
}

/* ---- wbcl layers --------------------------------------------------------------------------------- */
static wbcl_tensor *dev(bench_env *e, int ndim, const size_t *shape, const float *data)
{
    wbcl_tensor *t = NULL;
    die_wbcl(wbcl_tensor_create(e->ctx, ndim, shape, WBCL_F32, data, &t), e->ctx, "tensor_create");
    return t;
}

static void wbcl_io_setup(bench_env *e, layer_state *s)
{
    size_t shape[3] = {e->B, s->n, e->d};
    seed_for(s->n, 0);
    float *x = rand_buf(e->B * s->n * e->d, 1.0f);
    s->t[0] = dev(e, 3, shape, x);
    s->t[1] = dev(e, 3, shape, NULL);
    free(x);
}

static void wbcl_io_free(layer_state *s)
{
    for (int i = 0; i < 4; i++) wbcl_tensor_destroy(s->t[i]);
}

static void wbcl_finish_check(bench_env *e, layer_state *s)
{
    size_t n = wbcl_tensor_numel(s->t[1]);
    float *y = malloc(n * sizeof *y);
    die_wbcl(wbcl_tensor_read(e->ctx, s->t[1], y, n), e->ctx, "read");
    s->check = sum_abs(y, n);
    free(y);
}

static int layer_wbcl_softmax(bench_env *e, int op, layer_state *s)
{
    const size_t d = e->d;
    if (op == OP_SETUP) {
        wbcl_io_setup(e, s);
        seed_for(s->n, 1);
        float *W = rand_buf(3 * d * d, 1.0f / sqrtf((float)d)), *b = rand_buf(3 * d, 0.1f),
              *Wo = rand_buf(d * d, 1.0f / sqrtf((float)d)), *bo = rand_buf(d, 0.1f);
        wbcl_mha *m = NULL;
        die_wbcl(wbcl_mha_create(e->ctx, d, e->K, 0, W, b, Wo, bo, &m), e->ctx, "wbcl_mha_create");
        s->mod = m;
        free(W); free(b); free(Wo); free(bo);
    } else if (op == OP_RUN) {
        die_wbcl(wbcl_mha_forward(e->ctx, s->mod, s->t[0], s->t[1]), e->ctx, "wbcl_mha_forward");
        die_wbcl(wbcl_context_finish(e->ctx), e->ctx, "finish");
    } else {
        wbcl_mha_destroy(s->mod);
        wbcl_io_free(s);
    }
    return 0;
}

static int layer_wbcl_mssa(bench_env *e, int op, layer_state *s)
{
    const size_t d = e->d, p = d / e->K;
    if (op == OP_SETUP) {
        wbcl_io_setup(e, s);
        seed_for(s->n, 2);
        float *U = rand_buf(d * d, 1.0f / sqrtf((float)d)), *Wo = rand_buf(d * d, 1.0f / sqrtf((float)d)),
              *bo = rand_buf(d, 0.1f);
        wbcl_mssa *m = NULL;
        die_wbcl(wbcl_mssa_create(e->ctx, d, e->K, p, 0, U, Wo, bo, &m), e->ctx, "wbcl_mssa_create");
        s->mod = m;
        free(U); free(Wo); free(bo);
    } else if (op == OP_RUN) {
        die_wbcl(wbcl_mssa_forward(e->ctx, s->mod, s->t[0], s->t[1]), e->ctx, "wbcl_mssa_forward");
        die_wbcl(wbcl_context_finish(e->ctx), e->ctx, "finish");
    } else {
        wbcl_mssa_destroy(s->mod);
        wbcl_io_free(s);
    }
    return 0;
}

/* The fused per-head kernel alone on (B, K, n, p) tensors: the FLOP-rate comparison. */
static int layer_wbcl_softmax_kernel(bench_env *e, int op, layer_state *s)
{
    const size_t p = e->d / e->K;
    if (op == OP_SETUP) {
        size_t shape[4] = {e->B, e->K, s->n, p};
        size_t n = e->B * e->K * s->n * p;
        seed_for(s->n, 3);
        for (int i = 0; i < 3; i++) {
            float *h = rand_buf(n, 1.0f);
            s->t[i] = dev(e, 4, shape, h);
            free(h);
        }
        s->t[3] = dev(e, 4, shape, NULL);
    } else if (op == OP_RUN) {
        die_wbcl(wbcl_attention_softmax_heads(e->ctx, s->t[0], s->t[1], s->t[2], 1.0f / sqrtf((float)p), 0, s->t[3]),
                 e->ctx, "wbcl_attention_softmax_heads");
        die_wbcl(wbcl_context_finish(e->ctx), e->ctx, "finish");
    } else {
        wbcl_io_free(s);
    }
    return 0;
}

#if defined(HAVE_TSSA_H)
static int layer_wbcl_tssa(bench_env *e, int op, layer_state *s)
{
    if (!wbcl_tssa_layer_create || !wbcl_tssa_layer_forward || !wbcl_tssa_layer_destroy) return 1;
    const size_t d = e->d;
    if (op == OP_SETUP) {
        wbcl_io_setup(e, s);
        seed_for(s->n, 4);
        float *W = rand_buf(d * d, 1.0f / sqrtf((float)d)), *b = rand_buf(d, 0.1f), *temp = rand_buf(e->K, 1.0f),
              *Wo = rand_buf(d * d, 1.0f / sqrtf((float)d)), *bo = rand_buf(d, 0.1f);
        wbcl_tssa_layer *l = NULL;
        die_wbcl(wbcl_tssa_layer_create(e->ctx, d, e->K, W, b, temp, Wo, bo, &l), e->ctx, "wbcl_tssa_layer_create");
        s->mod = l;
        free(W); free(b); free(temp); free(Wo); free(bo);
    } else if (op == OP_RUN) {
        die_wbcl(wbcl_tssa_layer_forward(e->ctx, s->mod, s->t[0], s->t[1]), e->ctx, "wbcl_tssa_layer_forward");
        die_wbcl(wbcl_context_finish(e->ctx), e->ctx, "finish");
    } else {
        wbcl_tssa_layer_destroy(s->mod);
        wbcl_io_free(s);
    }
    return 0;
}
#endif

#if defined(HAVE_XCA_H)
static int layer_wbcl_xca(bench_env *e, int op, layer_state *s)
{
    if (!wbcl_xca_layer_create || !wbcl_xca_layer_forward || !wbcl_xca_layer_destroy) return 1;
    const size_t d = e->d;
    if (op == OP_SETUP) {
        wbcl_io_setup(e, s);
        seed_for(s->n, 5);
        float *W = rand_buf(3 * d * d, 1.0f / sqrtf((float)d)), *b = rand_buf(3 * d, 0.1f),
              *temp = rand_buf(e->K, 1.0f), *Wo = rand_buf(d * d, 1.0f / sqrtf((float)d)), *bo = rand_buf(d, 0.1f);
        wbcl_xca_layer *l = NULL;
        die_wbcl(wbcl_xca_layer_create(e->ctx, d, e->K, W, b, temp, Wo, bo, &l), e->ctx, "wbcl_xca_layer_create");
        s->mod = l;
        free(W); free(b); free(temp); free(Wo); free(bo);
    } else if (op == OP_RUN) {
        die_wbcl(wbcl_xca_layer_forward(e->ctx, s->mod, s->t[0], s->t[1]), e->ctx, "wbcl_xca_layer_forward");
        die_wbcl(wbcl_context_finish(e->ctx), e->ctx, "finish");
    } else {
        wbcl_xca_layer_destroy(s->mod);
        wbcl_io_free(s);
    }
    return 0;
}
#endif

/* ---- OpenBLAS GEMM + C softmax ------------------------------------------------------------------
 * Projections and the two products per head (S = q kᵀ·scale, O = S v) are cblas_sgemm on
 * strided views; the row softmax of the n x n scores is plain C (max-subtracted, expf from
 * glibc), split over `threads` pthreads like OpenBLAS. One head's scores exist at a time:
 * n² floats, the quadratic memory of this path. */
typedef struct softmax_job {
    float *S;
    size_t r0, r1, n;
} softmax_job;

static void *softmax_rows(void *arg)
{
    softmax_job *j = arg;
    for (size_t r = j->r0; r < j->r1; r++) {
        float *row = j->S + r * j->n;
        float m = row[0];
        for (size_t c = 1; c < j->n; c++) m = row[c] > m ? row[c] : m;
        float sum = 0.0f;
        for (size_t c = 0; c < j->n; c++) {
            row[c] = expf(row[c] - m);
            sum += row[c];
        }
        const float inv = 1.0f / sum;
        for (size_t c = 0; c < j->n; c++) row[c] *= inv;
    }
    return NULL;
}

static void softmax_mt(float *S, size_t n, int threads)
{
    if (threads < 1) threads = 1;
    if (threads > 16) threads = 16;
    pthread_t th[16];
    softmax_job jobs[16];
    for (int t = 0; t < threads; t++) {
        jobs[t].S = S;
        jobs[t].n = n;
        jobs[t].r0 = n * (size_t)t / (size_t)threads;
        jobs[t].r1 = n * (size_t)(t + 1) / (size_t)threads;
    }
    int started = 0;
    for (int t = 1; t < threads; t++)
        if (pthread_create(&th[t], NULL, softmax_rows, &jobs[t]) == 0) started |= 1 << t;
        else softmax_rows(&jobs[t]);
    softmax_rows(&jobs[0]);
    for (int t = 1; t < threads; t++)
        if (started & (1 << t)) pthread_join(th[t], NULL);
}

/* y (rows, out) = x Wᵀ + b */
static void blas_linear(const float *x, size_t rows, size_t in, const float *W, size_t out, const float *b, float *y)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)out, (int)in, 1.0f, x, (int)in, W, (int)in,
                0.0f, y, (int)out);
    if (b)
        for (size_t r = 0; r < rows; r++)
            for (size_t o = 0; o < out; o++) y[r * out + o] += b[o];
}

/* per head h of one batch entry: q, k, v at columns h*p of row-stride ld buffers; o row-stride d */
static void blas_attention(const float *q, const float *k, const float *v, size_t ld, size_t n, size_t p,
                           size_t K, float *S, float *o, size_t ldo, int threads)
{
    const float scale = 1.0f / sqrtf((float)p);
    for (size_t h = 0; h < K; h++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)p, scale, q + h * p, (int)ld,
                    k + h * p, (int)ld, 0.0f, S, (int)n);
        softmax_mt(S, n, threads);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)p, (int)n, 1.0f, S, (int)n, v + h * p,
                    (int)ld, 0.0f, o + h * p, (int)ldo);
    }
}

static int layer_blas_softmax(bench_env *e, int op, layer_state *s)
{
    const size_t d = e->d, n = s->n, p = d / e->K;
    /* host[]: 0 x, 1 W, 2 b, 3 Wo, 4 bo, 5 qkv, 6 o, 7 y ; S is allocated per call (it is the
     * transient quadratic buffer) */
    if (op == OP_SETUP) {
        seed_for(n, 0);
        s->host[0] = rand_buf(e->B * n * d, 1.0f);
        seed_for(n, 1);
        s->host[1] = rand_buf(3 * d * d, 1.0f / sqrtf((float)d));
        s->host[2] = rand_buf(3 * d, 0.1f);
        s->host[3] = rand_buf(d * d, 1.0f / sqrtf((float)d));
        s->host[4] = rand_buf(d, 0.1f);
        s->host[5] = malloc(n * 3 * d * sizeof(float));
        s->host[6] = malloc(n * d * sizeof(float));
        s->host[7] = malloc(e->B * n * d * sizeof(float));
        if (!s->host[5] || !s->host[6] || !s->host[7]) return 1;
    } else if (op == OP_RUN) {
        float *S = malloc(n * n * sizeof *S);
        if (!S) {
            fprintf(stderr, "OpenBLAS softmax: cannot allocate %zu x %zu scores\n", n, n);
            exit(1);
        }
        for (size_t b = 0; b < e->B; b++) {
            float *qkv = s->host[5], *o = s->host[6];
            blas_linear(s->host[0] + b * n * d, n, d, s->host[1], 3 * d, s->host[2], qkv);
            blas_attention(qkv, qkv + d, qkv + 2 * d, 3 * d, n, p, e->K, S, o, d, e->threads);
            blas_linear(o, n, d, s->host[3], d, s->host[4], s->host[7] + b * n * d);
        }
        free(S);
        s->check = sum_abs(s->host[7], e->B * n * d);
    } else {
        for (int i = 0; i < 8; i++) free(s->host[i]);
    }
    return 0;
}

static int layer_blas_mssa(bench_env *e, int op, layer_state *s)
{
    const size_t d = e->d, n = s->n, p = d / e->K;
    /* host[]: 0 x, 1 U, 2 Wo, 3 bo, 5 w, 6 o, 7 y */
    if (op == OP_SETUP) {
        seed_for(n, 0);
        s->host[0] = rand_buf(e->B * n * d, 1.0f);
        seed_for(n, 2);
        s->host[1] = rand_buf(d * d, 1.0f / sqrtf((float)d));
        s->host[2] = rand_buf(d * d, 1.0f / sqrtf((float)d));
        s->host[3] = rand_buf(d, 0.1f);
        s->host[5] = malloc(n * d * sizeof(float));
        s->host[6] = malloc(n * d * sizeof(float));
        s->host[7] = malloc(e->B * n * d * sizeof(float));
        if (!s->host[5] || !s->host[6] || !s->host[7]) return 1;
    } else if (op == OP_RUN) {
        float *S = malloc(n * n * sizeof *S);
        if (!S) {
            fprintf(stderr, "OpenBLAS MSSA: cannot allocate %zu x %zu scores\n", n, n);
            exit(1);
        }
        for (size_t b = 0; b < e->B; b++) {
            float *w = s->host[5], *o = s->host[6];
            blas_linear(s->host[0] + b * n * d, n, d, s->host[1], d, NULL, w);
            blas_attention(w, w, w, d, n, p, e->K, S, o, d, e->threads);
            blas_linear(o, n, d, s->host[2], d, s->host[3], s->host[7] + b * n * d);
        }
        free(S);
        s->check = sum_abs(s->host[7], e->B * n * d);
    } else {
        for (int i = 0; i < 8; i++) free(s->host[i]);
    }
    return 0;
}

/* Square SGEMM of size 1536 (the FLOP-rate yardstick; n is ignored). */
#define SGEMM_N 1536
static int layer_blas_sgemm(bench_env *e, int op, layer_state *s)
{
    (void)e;
    const size_t m = SGEMM_N;
    if (op == OP_SETUP) {
        seed_for(m, 6);
        s->host[0] = rand_buf(m * m, 1.0f);
        s->host[1] = rand_buf(m * m, 1.0f);
        s->host[2] = malloc(m * m * sizeof(float));
        if (!s->host[2]) return 1;
    } else if (op == OP_RUN) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)m, (int)m, 1.0f, s->host[0], (int)m,
                    s->host[1], (int)m, 0.0f, s->host[2], (int)m);
    } else {
        for (int i = 0; i < 3; i++) free(s->host[i]);
    }
    return 0;
}

/* ---- FLOP counts (nominal; the projections count 2·n·in·out) ---------------------------------- */
static double fl_softmax(const bench_env *e, size_t n)
{
    double d = (double)e->d, N = (double)n;
    return (double)e->B * (2.0 * N * d * 4.0 * d + 4.0 * N * N * d);
}
static double fl_mssa(const bench_env *e, size_t n)
{
    double d = (double)e->d, N = (double)n;
    return (double)e->B * (2.0 * N * d * 2.0 * d + 4.0 * N * N * d);
}
static double fl_kernel(const bench_env *e, size_t n) { return (double)e->B * 4.0 * (double)n * (double)n * (double)e->d; }
static double fl_xca(const bench_env *e, size_t n)
{
    double d = (double)e->d, N = (double)n, p = d / (double)e->K;
    return (double)e->B * (2.0 * N * d * 4.0 * d + 4.0 * N * p * d);
}
static double fl_tssa(const bench_env *e, size_t n)
{
    double d = (double)e->d, N = (double)n;
    return (double)e->B * (2.0 * N * d * 2.0 * d + 10.0 * N * d);
}
static double fl_sgemm(const bench_env *e, size_t n)
{
    (void)e;
    (void)n;
    return 2.0 * SGEMM_N * (double)SGEMM_N * SGEMM_N;
}

static const layer_def layers[] = {
    {"wbcl", "softmax", layer_wbcl_softmax, fl_softmax, "ViT attention layer (wbcl_mha, fused online softmax)"},
    {"wbcl", "mssa", layer_wbcl_mssa, fl_mssa, "CRATE MSSA layer (wbcl_mssa)"},
#if defined(HAVE_XCA_H)
    {"wbcl", "xca", layer_wbcl_xca, fl_xca, "XCiT XCA layer (wbcl_xca_layer)"},
#endif
#if defined(HAVE_TSSA_H)
    {"wbcl", "tssa", layer_wbcl_tssa, fl_tssa, "ToST TSSA layer (wbcl_tssa_layer)"},
#endif
    {"openblas", "softmax", layer_blas_softmax, fl_softmax, "ViT layer: OpenBLAS GEMMs + C softmax"},
    {"openblas", "mssa", layer_blas_mssa, fl_mssa, "CRATE MSSA: OpenBLAS GEMMs + C softmax"},
    {"wbcl", "softmax_kernel", layer_wbcl_softmax_kernel, fl_kernel, "fused per-head kernel alone (B, K, n, p)"},
    {"openblas", "sgemm1536", layer_blas_sgemm, fl_sgemm, "OpenBLAS SGEMM 1536^3: the FLOP-rate yardstick"},
};
#define N_LAYERS (sizeof layers / sizeof layers[0])

static int quadratic(const layer_def *l) { return !strcmp(l->impl, "openblas") && strcmp(l->variant, "sgemm1536"); }

/* ---- memory child ------------------------------------------------------------------------------ */
static wbcl_context *open_ctx(void)
{
    char err[1024];
    wbcl_context *ctx = NULL;
    wbcl_status st = wbcl_context_create(NULL, &ctx, err, sizeof err);
    if (st) {
        fprintf(stderr, "context: %s: %s\n", wbcl_status_name(st), err);
        exit(1);
    }
    return ctx;
}

static const layer_def *find_layer(const char *impl, const char *variant)
{
    for (size_t i = 0; i < N_LAYERS; i++)
        if (!strcmp(layers[i].impl, impl) && !strcmp(layers[i].variant, variant)) return &layers[i];
    return NULL;
}

static int memory_child(bench_env *e, const char *impl, const char *variant, size_t n)
{
    const layer_def *l = find_layer(impl, variant);
    if (!l) {
        fprintf(stderr, "unknown layer %s.%s\n", impl, variant);
        return 2;
    }
    /* warm-up at a small size: builds the kernels (the compiler's memory is not the layer's) */
    layer_state w = {0};
    w.n = 64;
    if (l->fn(e, OP_SETUP, &w)) {
        printf("unavailable\n");
        return 0;
    }
    l->fn(e, OP_RUN, &w);
    l->fn(e, OP_FREE, &w);
    if (reset_hwm()) {
        printf("nan\n");
        return 0;
    }
    long base = proc_status_kb("VmRSS");
    layer_state s = {0};
    s.n = n;
    l->fn(e, OP_SETUP, &s);
    l->fn(e, OP_RUN, &s);
    long peak = proc_status_kb("VmHWM");
    l->fn(e, OP_FREE, &s);
    printf("%.3f\n", (double)(peak - base) / 1024.0);
    return 0;
}

static double measure_memory(const char *self, const bench_env *e, const layer_def *l, size_t n)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' --memory-child %s %s %zu --d %zu --heads %zu --batch %zu --threads %d", self,
             l->impl, l->variant, n, e->d, e->K, e->B, e->threads);
    FILE *f = popen(cmd, "r");
    if (!f) return NAN;
    char line[128] = "";
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    int rc = pclose(f);
    if (rc != 0 || !strncmp(line, "unavailable", 11)) return NAN;
    return atof(line);
}

/* ---- main ------------------------------------------------------------------------------------------ */
static int parse_list(const char *s, size_t *out, int max)
{
    int k = 0;
    while (*s && k < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0) return -1;
        out[k++] = (size_t)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return k;
}

static int selected(const char *only, const layer_def *l)
{
    if (!only) return 1;
    char name[128];
    snprintf(name, sizeof name, "%s.%s", l->impl, l->variant);
    const char *p = only;
    size_t len = strlen(name);
    while ((p = strstr(p, name))) {
        if ((p == only || p[-1] == ',') && (p[len] == 0 || p[len] == ',')) return 1;
        p += len;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* freed buffers must leave the resident set for the memory measurement */
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    bench_env e = {NULL, 384, 8, 1, 2};
    size_t ns[32] = {256, 512, 1024, 2048, 4096, 8192, 16384};
    int nn = 7, reps = 5, memory = 1;
    double max_quad_mb = 2048;
    const char *csv = NULL, *only = NULL;
    const char *child_impl = NULL, *child_var = NULL;
    size_t child_n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--n") && more) {
            if ((nn = parse_list(argv[++i], ns, 32)) < 1) return fprintf(stderr, "bad --n\n"), 2;
        } else if (!strcmp(a, "--reps") && more) reps = atoi(argv[++i]);
        else if (!strcmp(a, "--d") && more) e.d = (size_t)atol(argv[++i]);
        else if (!strcmp(a, "--heads") && more) e.K = (size_t)atol(argv[++i]);
        else if (!strcmp(a, "--batch") && more) e.B = (size_t)atol(argv[++i]);
        else if (!strcmp(a, "--threads") && more) e.threads = atoi(argv[++i]);
        else if (!strcmp(a, "--only") && more) only = argv[++i];
        else if (!strcmp(a, "--csv") && more) csv = argv[++i];
        else if (!strcmp(a, "--no-memory")) memory = 0;
        else if (!strcmp(a, "--max-quadratic-mb") && more) max_quad_mb = atof(argv[++i]);
        else if (!strcmp(a, "--memory-child") && i + 3 < argc) {
            child_impl = argv[++i];
            child_var = argv[++i];
            child_n = (size_t)atol(argv[++i]);
        } else {
            fprintf(stderr,
                    "usage: %s [--n LIST] [--reps R] [--d D] [--heads K] [--batch B] [--threads T] [--only LIST]\n"
                    "          [--csv FILE] [--no-memory] [--max-quadratic-mb MB]\n"
                    "       %s --memory-child IMPL VARIANT N [--d D] [--heads K] [--batch B]\n",
                    argv[0], argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (!e.d || !e.K || !e.B || e.d % e.K) return fprintf(stderr, "heads must divide d\n"), 2;
    openblas_set_num_threads(e.threads);
    e.ctx = open_ctx();
    if (child_impl) {
        int rc = memory_child(&e, child_impl, child_var, child_n);
        wbcl_context_destroy(e.ctx);
        return rc;
    }

    const wbcl_device_info *di = wbcl_context_device(e.ctx);
    const char *aff = getenv("POCL_AFFINITY"), *bto = getenv("OPENBLAS_THREAD_TIMEOUT");
    printf("device: %s (%s, driver %s); OpenBLAS %s, %d threads; POCL_AFFINITY=%s OPENBLAS_THREAD_TIMEOUT=%s\n",
           di->name, di->platform_name, di->driver_version, openblas_get_config(), e.threads, aff ? aff : "(unset)",
           bto ? bto : "(unset)");
    printf("layer: d = %zu, heads = %zu, batch = %zu; %d reps after a warm-up, interleaved; medians\n", e.d, e.K, e.B,
           reps);
    for (size_t i = 0; i < N_LAYERS; i++)
        if (selected(only, &layers[i]))
            printf("  %s.%s: %s\n", layers[i].impl, layers[i].variant, layers[i].what);
    printf("\n| n | layer | median ms | GFLOP/s | peak MiB | check |\n|---|---|---|---|---|---|\n");
    fflush(stdout);

    FILE *out = NULL;
    if (csv) {
        out = fopen(csv, "w");
        if (!out) return fprintf(stderr, "cannot write %s\n", csv), 1;
        fprintf(out, "impl,variant,n,d,heads,batch,median_ms,min_ms,gflops,peak_mib,reps,device\n");
    }

    for (int ni = 0; ni < nn; ni++) {
        const size_t n = ns[ni];
        layer_state st[N_LAYERS];
        int active[N_LAYERS];
        double *t[N_LAYERS], med[N_LAYERS], gfl[N_LAYERS];
        memset(st, 0, sizeof st);
        for (size_t i = 0; i < N_LAYERS; i++) {
            const layer_def *l = &layers[i];
            active[i] = selected(only, l);
            t[i] = calloc((size_t)reps, sizeof(double));
            if (active[i] && quadratic(l) && (double)n * (double)n * 4.0 / 1048576.0 > max_quad_mb) {
                printf("| %zu | %s.%s | skipped: n x n scores exceed --max-quadratic-mb %.0f |||||\n", n, l->impl,
                       l->variant, max_quad_mb);
                active[i] = 0;
            }
            if (active[i]) {
                st[i].n = n;
                if (l->fn(&e, OP_SETUP, &st[i])) {
                    active[i] = 0; /* unavailable in this build */
                    continue;
                }
                l->fn(&e, OP_RUN, &st[i]); /* warm-up */
                if (!strcmp(l->impl, "wbcl") && strcmp(l->variant, "softmax_kernel")) wbcl_finish_check(&e, &st[i]);
            }
        }
        /* interleaved: every rep runs every layer once, in rotating order */
        for (int r = 0; r < reps; r++)
            for (size_t k = 0; k < N_LAYERS; k++) {
                size_t i = (k + (size_t)r) % N_LAYERS;
                if (!active[i]) continue;
                double t0 = now_s();
                layers[i].fn(&e, OP_RUN, &st[i]);
                t[i][r] = now_s() - t0;
            }
        for (size_t i = 0; i < N_LAYERS; i++) {
            med[i] = gfl[i] = NAN;
            if (!active[i]) {
                free(t[i]);
                continue;
            }
            const layer_def *l = &layers[i];
            layers[i].fn(&e, OP_FREE, &st[i]);
            double mn = t[i][0];
            for (int r = 1; r < reps; r++) mn = t[i][r] < mn ? t[i][r] : mn;
            med[i] = median(t[i], reps);
            const double md = med[i];
            double gf = l->flops(&e, n) / md * 1e-9;
            gfl[i] = gf;
            double mib = memory && strcmp(l->variant, "sgemm1536") ? measure_memory(argv[0], &e, l, n) : NAN;
            printf("| %zu | %s.%s | %.3f | %.1f | %.1f | %.6g |\n", n, l->impl, l->variant, 1e3 * md, gf, mib,
                   st[i].check);
            if (out)
                fprintf(out, "%s,%s,%zu,%zu,%zu,%zu,%.4f,%.4f,%.2f,%.3f,%d,\"%s\"\n", l->impl, l->variant, n, e.d, e.K,
                        e.B, 1e3 * md, 1e3 * mn, gf, mib, reps, di->name);
            free(t[i]);
        }
        /* ratios of this n (same run, interleaved): speed = time(peer) / time(wbcl) */
        const char *pairs[][4] = {{"wbcl", "softmax", "openblas", "softmax"}, {"wbcl", "mssa", "openblas", "mssa"}};
        for (int pi = 0; pi < 2; pi++) {
            const layer_def *a = find_layer(pairs[pi][0], pairs[pi][1]), *b = find_layer(pairs[pi][2], pairs[pi][3]);
            if (!a || !b) continue;
            size_t ia = (size_t)(a - layers), ib = (size_t)(b - layers);
            if (!isnan(med[ia]) && !isnan(med[ib]))
                printf("ratio n=%zu: %s.%s / %s.%s speed %.2fx; outputs sum|y| %.6g vs %.6g (rel diff %.1e)\n", n,
                       a->impl, a->variant, b->impl, b->variant, med[ib] / med[ia], st[ia].check, st[ib].check,
                       fabs(st[ia].check - st[ib].check) / fabs(st[ib].check));
        }
        const layer_def *kk = find_layer("wbcl", "softmax_kernel"), *sg = find_layer("openblas", "sgemm1536");
        if (kk && sg && !isnan(gfl[kk - layers]) && !isnan(gfl[sg - layers]))
            printf("ratio n=%zu: fused kernel %.1f GFLOP/s / OpenBLAS SGEMM %.1f GFLOP/s = %.2f\n", n, gfl[kk - layers],
                   gfl[sg - layers], gfl[kk - layers] / gfl[sg - layers]);
        fflush(stdout);
        if (out) fflush(out);
    }
    if (out) fclose(out);
    wbcl_context_destroy(e.ctx);
    return 0;
}
