/* ISTA (CRATE's sparse-coding block) and LASSO: wbcl vs OpenBLAS GEMMs + C elementwise loops,
 * interleaved call by call in one process, medians of wall time (call + finish).
 *
 *   bench_ista [--reps N] [--threads T] [--batch B] [--tokens N] [--dim d] [--over k] [--steps T]
 *
 * Defaults: CRATE-Base-like sizes, x (8, 197, 384), W (384, 384), eta = lambda = 0.1, ReLU;
 * LASSO on the same tokens with an overcomplete dictionary (384, 4 * 384), 10 steps of ISTA and
 * FISTA with the objective of every step. Cases:
 *   ista.two_gemm   y = relu(x - eta ((x W^T - x) W) - eta lambda): wbcl_ista | cblas (copy, 2 sgemm) + C loop
 *   ista.folded     y = relu(x + eta x M - eta lambda), M = W - W^T W: wbcl_ista_folded | 1 sgemm + C loop
 *   ista.fold       the one-time M = W - W^T W: wbcl_ista_fold | copy + 1 sgemm
 *   lasso.ista/fista  wbcl_lasso (L given) | the same algorithm with cblas_sgemm + C loops
 * The C loops run on the same number of threads as OpenBLAS (pthreads, contiguous halves), written
 * to vectorize at -O3. "ratio" = peer time / wbcl time (> 1: wbcl faster). "err" = max |wbcl - peer|
 * / max |peer| (a sanity check that both compute the same thing). Recommended environment:
 * POCL_AFFINITY=1 OPENBLAS_THREAD_TIMEOUT=1, a warm POCL_CACHE_DIR. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wbcl/wbcl.h"
#include "bench_util.h"
#include "wbcl/ista.h"

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

static double rel_err(const float *a, const float *b, size_t n)
{
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > e || isnan(d)) e = isnan(d) ? INFINITY : d;
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    return m > 0 ? e / m : e;
}

/* ---- the C peer's elementwise loops on T threads ----------------------------------------------- */

enum { EW_ISTA, EW_PROX_ISTA, EW_PROX_FISTA, EW_RESID_ISTA, EW_RESID_FISTA, EW_OBJ };

typedef struct ew_job {
    int kind;
    size_t lo, hi;            /* elements, or rows for EW_OBJ */
    const float *a, *b, *c;   /* inputs                       */
    float *y, *w;             /* outputs                      */
    float s1, s2, s3;         /* scalars                      */
    size_t m, d;              /* EW_OBJ row lengths           */
    double obj;               /* EW_OBJ partial               */
} ew_job;

static void ew_run(ew_job *J)
{
    const float *a = J->a, *b = J->b, *c = J->c;
    float *y = J->y, *w = J->w;
    const float s1 = J->s1, s2 = J->s2, s3 = J->s3;
    switch (J->kind) {
    case EW_ISTA: /* y = relu(a + (s1 b - s2)) */
        for (size_t i = J->lo; i < J->hi; i++) {
            float v = a[i] + (s1 * b[i] - s2);
            y[i] = v < 0.0f ? 0.0f : v;
        }
        break;
    case EW_PROX_ISTA: /* y = soft(y - s1 g, s2), g = b */
        for (size_t i = J->lo; i < J->hi; i++) {
            float u = fabsf(y[i] - s1 * b[i]) - s2;
            y[i] = copysignf(u < 0.0f ? 0.0f : u, y[i] - s1 * b[i]);
        }
        break;
    case EW_PROX_FISTA: /* z = soft(y - s1 g, s2); y = z + s3 (z - zprev); zprev = z (w = zprev) */
        for (size_t i = J->lo; i < J->hi; i++) {
            float v = y[i] - s1 * b[i], u = fabsf(v) - s2, z = copysignf(u < 0.0f ? 0.0f : u, v), zp = w[i];
            w[i] = z;
            y[i] = z + s3 * (z - zp);
        }
        break;
    case EW_RESID_ISTA: /* y (= p) = p - x, x = a */
        for (size_t i = J->lo; i < J->hi; i++) y[i] -= a[i];
        break;
    case EW_RESID_FISTA: /* r = p + s3 (p - pprev) - x; pprev = p (w = pprev) */
        for (size_t i = J->lo; i < J->hi; i++) {
            float v = y[i], vp = w[i];
            w[i] = v;
            y[i] = v + s3 * (v - vp) - a[i];
        }
        break;
    case EW_OBJ: { /* rows lo..hi: lambda |z|_1 + 1/2 |p - x|^2, z = a (m), p = b, x = c (d) */
        double tot = 0.0;
        for (size_t r = J->lo; r < J->hi; r++) {
            float s1r = 0.0f, s2r = 0.0f;
            for (size_t j = 0; j < J->m; j++) s1r += fabsf(a[r * J->m + j]);
            for (size_t i = 0; i < J->d; i++) {
                float e = b[r * J->d + i] - c[r * J->d + i];
                s2r += e * e;
            }
            tot += (double)(s1 * s1r + 0.5f * s2r);
        }
        J->obj = tot;
        break;
    }
    }
}

static void *ew_thread(void *p)
{
    ew_run(p);
    return NULL;
}

static int n_threads = 2;

/* Runs a job over [0, n) split in contiguous parts over n_threads threads; returns the EW_OBJ sum. */
static double ew(ew_job proto, size_t n)
{
    ew_job J[8];
    pthread_t th[8];
    int T = n_threads < 1 ? 1 : n_threads > 8 ? 8 : n_threads;
    for (int t = 0; t < T; t++) {
        J[t] = proto;
        J[t].lo = n * (size_t)t / (size_t)T;
        J[t].hi = n * (size_t)(t + 1) / (size_t)T;
    }
    for (int t = 1; t < T; t++) pthread_create(&th[t], NULL, ew_thread, &J[t]);
    ew_run(&J[0]);
    double s = J[0].obj;
    for (int t = 1; t < T; t++) {
        pthread_join(th[t], NULL);
        s += J[t].obj;
    }
    return s;
}

/* ---- peers -------------------------------------------------------------------------------------- */

typedef struct prob {
    size_t rows, d, m;
    float eta, lambd;
    float *x, *W, *M, *Wo, *X;   /* ISTA x (rows, d), W (d, d), M = W - W^T W; LASSO X (rows, d), Wo (d, m) */
    float *P, *S, *y;            /* peer scratch and output for ISTA                                        */
    float *G, *Pl, *Pp, *Y, *Z;  /* peer LASSO buffers                                                      */
    double *obj;
} prob;

static void peer_ista_two_gemm(prob *p)
{
    const int R = (int)p->rows, d = (int)p->d;
    memcpy(p->P, p->x, p->rows * p->d * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, d, d, 1.0f, p->x, d, p->W, d, -1.0f, p->P, d);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, d, d, 1.0f, p->P, d, p->W, d, 0.0f, p->S, d);
    ew_job j = {EW_ISTA, 0, 0, p->x, p->S, NULL, p->y, NULL, -p->eta, (float)((double)p->eta * p->lambd), 0, 0, 0, 0};
    ew(j, p->rows * p->d);
}

static void peer_ista_folded(prob *p)
{
    const int R = (int)p->rows, d = (int)p->d;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, d, d, 1.0f, p->x, d, p->M, d, 0.0f, p->S, d);
    ew_job j = {EW_ISTA, 0, 0, p->x, p->S, NULL, p->y, NULL, p->eta, (float)((double)p->eta * p->lambd), 0, 0, 0, 0};
    ew(j, p->rows * p->d);
}

static void peer_fold(prob *p, float *M)
{
    const int d = (int)p->d;
    memcpy(M, p->W, p->d * p->d * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, d, d, -1.0f, p->W, d, p->W, d, 1.0f, M, d);
}

/* The same algorithm as wbcl_lasso (host/ops/ista.c), from Z = 0. */
static void peer_lasso(prob *p, int fista, size_t T, double t)
{
    const int R = (int)p->rows, d = (int)p->d, m = (int)p->m;
    const size_t nz = p->rows * p->m, nd = p->rows * p->d;
    const float tf = (float)t, thr = (float)(t * p->lambd);
    memset(p->Z, 0, nz * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, d, m, 1.0f, p->Z, m, p->Wo, m, 0.0f, p->Pl, d);
    ew_job o = {EW_OBJ, 0, 0, p->Z, p->Pl, p->X, NULL, NULL, p->lambd, 0, 0, p->m, p->d, 0};
    p->obj[0] = ew(o, p->rows);
    if (fista) {
        memcpy(p->Pp, p->Pl, nd * sizeof(float));
        memcpy(p->Y, p->Z, nz * sizeof(float));
    }
    ew_job rj = {EW_RESID_ISTA, 0, 0, p->X, NULL, NULL, p->Pl, NULL, 0, 0, 0, 0, 0, 0};
    ew(rj, nd);
    double s = 1.0;
    for (size_t k = 1; k <= T; k++) {
        double sn = 0.5 * (1.0 + sqrt(1.0 + 4.0 * s * s));
        float beta = fista ? (float)((s - 1.0) / sn) : 0.0f;
        s = sn;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, m, d, 1.0f, p->Pl, d, p->Wo, m, 0.0f, p->G, m);
        ew_job pj = {fista ? EW_PROX_FISTA : EW_PROX_ISTA, 0, 0, NULL, p->G, NULL, fista ? p->Y : p->Z, p->Z, tf, thr,
                     beta, 0, 0, 0};
        ew(pj, nz);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, d, m, 1.0f, p->Z, m, p->Wo, m, 0.0f, p->Pl, d);
        p->obj[k] = ew(o, p->rows);
        if (k < T) {
            ew_job r2 = {fista ? EW_RESID_FISTA : EW_RESID_ISTA, 0, 0, p->X, NULL, NULL, p->Pl, p->Pp, 0, 0, beta, 0, 0, 0};
            ew(r2, nd);
        }
    }
}

/* ---- main ---------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int reps = 9;
    size_t B = 8, N = 197, d = 384, over = 4, T = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) B = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) N = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--dim") && i + 1 < argc) d = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--over") && i + 1 < argc) over = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) T = (size_t)atol(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--reps N] [--threads T] [--batch B] [--tokens N] [--dim d] [--over k] [--steps T]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 8) n_threads = 8;
    openblas_set_num_threads(n_threads);
    wbcl_context *ctx = NULL;
    char err[1024];
    if (wbcl_context_create(NULL, &ctx, err, sizeof err)) {
        fprintf(stderr, "no context: %s\n", err);
        return 1;
    }
    const wbcl_device_info *dev = wbcl_context_device(ctx);
    const char *aff = getenv("POCL_AFFINITY"), *bto = getenv("OPENBLAS_THREAD_TIMEOUT");
    printf("# device: %s (%s, driver %s), variant %s, gemm %s; OpenBLAS %s, %d threads (C loops too); "
           "POCL_AFFINITY=%s OPENBLAS_THREAD_TIMEOUT=%s\n",
           dev->name, dev->platform_name, dev->driver_version,
           wbcl_context_variant(ctx) == WBCL_VARIANT_CPU ? "cpu" : "gpu",
           wbcl_context_gemm_backend(ctx) == WBCL_GEMM_PACKED ? "packed" : "clblast", openblas_get_config(), n_threads,
           aff ? aff : "(unset)", bto ? bto : "(unset)");
    printf("# x (%zu, %zu, %zu), W (%zu, %zu), LASSO D (%zu, %zu) %zu steps; %d reps after a warm-up, medians of "
           "wall time (call + finish), interleaved\n",
           B, N, d, d, d, d, over * d, T, reps);

    prob p;
    memset(&p, 0, sizeof p);
    p.rows = B * N;
    p.d = d;
    p.m = over * d;
    p.eta = 0.1f;
    p.lambd = 0.1f;
    const size_t nx = p.rows * d, nz = p.rows * p.m;
    p.x = malloc(nx * 4);
    p.W = malloc(d * d * 4);
    p.M = malloc(d * d * 4);
    p.Wo = malloc(d * p.m * 4);
    p.X = malloc(nx * 4);
    p.P = malloc(nx * 4);
    p.S = malloc(nx * 4);
    p.y = malloc(nx * 4);
    p.G = malloc(nz * 4);
    p.Pl = malloc(nx * 4);
    p.Pp = malloc(nx * 4);
    p.Y = malloc(nz * 4);
    p.Z = malloc(nz * 4);
    p.obj = malloc((T + 1) * sizeof *p.obj);
    float *got = malloc((nz > nx ? nz : nx) * 4), *M2 = malloc(d * d * 4);
    double *wobj = malloc((T + 1) * sizeof *wobj);
    if (!p.x || !p.W || !p.M || !p.Wo || !p.X || !p.P || !p.S || !p.y || !p.G || !p.Pl || !p.Pp || !p.Y || !p.Z ||
        !p.obj || !got || !M2 || !wobj) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    /* CRATE-like data: LayerNorm-scaled tokens, a kaiming-uniform-like W */
    const double wb = 1.0 / sqrt((double)d);
    for (size_t i = 0; i < nx; i++) p.x[i] = (float)(2.0 * urand() - 1.0) * 1.7f;
    for (size_t i = 0; i < d * d; i++) p.W[i] = (float)((2.0 * urand() - 1.0) * wb);
    for (size_t i = 0; i < d * p.m; i++) p.Wo[i] = (float)((2.0 * urand() - 1.0) * sqrt(3.0) * wb);
    for (size_t i = 0; i < nx; i++) p.X[i] = (float)(2.0 * urand() - 1.0);
    peer_fold(&p, p.M);

    size_t xs[3] = {B, N, d}, ws[2] = {d, d}, wos[2] = {d, p.m}, zs[3] = {B, N, p.m};
    wbcl_tensor *tx = NULL, *tw = NULL, *tm = NULL, *ty = NULL, *tX = NULL, *tWo = NULL, *tZ = NULL;
    check(wbcl_tensor_create(ctx, 3, xs, WBCL_F32, p.x, &tx), ctx, "x");
    check(wbcl_tensor_create(ctx, 2, ws, WBCL_F32, p.W, &tw), ctx, "W");
    check(wbcl_tensor_create(ctx, 2, ws, WBCL_F32, NULL, &tm), ctx, "M");
    check(wbcl_tensor_create(ctx, 3, xs, WBCL_F32, NULL, &ty), ctx, "y");
    check(wbcl_tensor_create(ctx, 3, xs, WBCL_F32, p.X, &tX), ctx, "X");
    check(wbcl_tensor_create(ctx, 2, wos, WBCL_F32, p.Wo, &tWo), ctx, "D");
    check(wbcl_tensor_create(ctx, 3, zs, WBCL_F32, NULL, &tZ), ctx, "Z");
    check(wbcl_ista_fold(ctx, tw, tm), ctx, "fold");
    check(wbcl_context_finish(ctx), ctx, "finish");

    double *tw_ = malloc((size_t)reps * sizeof(double)), *tp_ = malloc((size_t)reps * sizeof(double));
    const double fl_step = 2.0 * (double)p.rows * d * d; /* one (rows x d x d) GEMM */
    printf("%-16s %12s %12s %8s %10s %10s %10s\n", "case", "wbcl ms", "peer ms", "ratio", "wbcl GF/s", "peer GF/s",
           "err");

    /* ---- ISTA step: two GEMMs and folded --------------------------------------------------------- */
    for (int form = 0; form < 3; form++) {
        const char *name = form == 0 ? "ista.two_gemm" : form == 1 ? "ista.folded" : "ista.fold";
        const double flops = form == 0 ? 2 * fl_step : form == 1 ? fl_step : 2.0 * d * d * d;
        for (int rep = -1; rep < reps; rep++) {
            for (int side = 0; side < 2; side++) {
                const int which = (rep & 1) ? 1 - side : side; /* alternate who goes first */
                double t0 = now_s();
                if (which == 0) {
                    if (form == 0) check(wbcl_ista(ctx, tx, NULL, tw, p.eta, p.lambd, WBCL_THRESHOLD_RELU, ty), ctx, "ista");
                    else if (form == 1)
                        check(wbcl_ista_folded(ctx, tx, tm, p.eta, p.lambd, WBCL_THRESHOLD_RELU, ty), ctx, "folded");
                    else check(wbcl_ista_fold(ctx, tw, tm), ctx, "fold");
                    check(wbcl_context_finish(ctx), ctx, "finish");
                } else {
                    if (form == 0) peer_ista_two_gemm(&p);
                    else if (form == 1) peer_ista_folded(&p);
                    else peer_fold(&p, M2);
                }
                double dt = now_s() - t0;
                if (rep >= 0) (which == 0 ? tw_ : tp_)[rep] = dt;
            }
        }
        double e;
        if (form < 2) {
            check(wbcl_tensor_read(ctx, ty, got, nx), ctx, "read");
            e = rel_err(got, p.y, nx);
        } else {
            check(wbcl_tensor_read(ctx, tm, got, d * d), ctx, "read");
            e = rel_err(got, M2, d * d);
        }
        double mw = median(tw_, reps), mp = median(tp_, reps);
        printf("%-16s %12.3f %12.3f %8.2f %10.1f %10.1f %10.2g\n", name, mw * 1e3, mp * 1e3, mp / mw, flops / mw * 1e-9,
               flops / mp * 1e-9, e);
        fflush(stdout);
    }

    /* ---- LASSO: ISTA and FISTA, objective every step, L given ---------------------------------------- */
    double L = 0.0;
    {
        double t0 = now_s();
        check(wbcl_lasso_lipschitz(ctx, tWo, &L), ctx, "lipschitz");
        printf("# L = |D|_2^2 = %.6g by power iteration in %.1f ms (Gram GEMM on the device, iteration on the host)\n", L,
               (now_s() - t0) * 1e3);
    }
    const double fl_lasso = (double)T * 2.0 * (2.0 * (double)p.rows * d * p.m) + 2.0 * p.rows * d * p.m;
    for (int fista = 0; fista < 2; fista++) {
        wbcl_lasso_opts o = wbcl_lasso_defaults();
        o.steps = T;
        o.lambd = p.lambd;
        o.method = fista ? WBCL_LASSO_FISTA : WBCL_LASSO_ISTA;
        o.L = L;
        const int lreps = reps < 5 ? reps : 5;
        for (int rep = -1; rep < lreps; rep++) {
            for (int side = 0; side < 2; side++) {
                const int which = (rep & 1) ? 1 - side : side;
                double t0 = now_s();
                if (which == 0) {
                    check(wbcl_tensor_fill(ctx, tZ, 0.0f), ctx, "fill");
                    check(wbcl_lasso(ctx, tX, tWo, &o, tZ, wobj), ctx, "lasso");
                    check(wbcl_context_finish(ctx), ctx, "finish");
                } else {
                    peer_lasso(&p, fista, T, 1.0 / L);
                }
                double dt = now_s() - t0;
                if (rep >= 0) (which == 0 ? tw_ : tp_)[rep] = dt;
            }
        }
        check(wbcl_tensor_read(ctx, tZ, got, nz), ctx, "read");
        double e = rel_err(got, p.Z, nz), eo = fabs(wobj[T] - p.obj[T]) / p.obj[T];
        double mw = median(tw_, lreps), mp = median(tp_, lreps);
        printf("%-16s %12.3f %12.3f %8.2f %10.1f %10.1f %10.2g  (F_T %.6g vs %.6g, rel %.2g)\n",
               fista ? "lasso.fista" : "lasso.ista", mw * 1e3, mp * 1e3, mp / mw, fl_lasso / mw * 1e-9,
               fl_lasso / mp * 1e-9, e, wobj[T], p.obj[T], eo);
        fflush(stdout);
    }
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(tw);
    wbcl_tensor_destroy(tm);
    wbcl_tensor_destroy(ty);
    wbcl_tensor_destroy(tX);
    wbcl_tensor_destroy(tWo);
    wbcl_tensor_destroy(tZ);
    wbcl_context_destroy(ctx);
    free(p.x);
    free(p.W);
    free(p.M);
    free(p.Wo);
    free(p.X);
    free(p.P);
    free(p.S);
    free(p.y);
    free(p.G);
    free(p.Pl);
    free(p.Pp);
    free(p.Y);
    free(p.Z);
    free(p.obj);
    free(got);
    free(M2);
    free(wobj);
    free(tw_);
    free(tp_);
    return 0;
}
