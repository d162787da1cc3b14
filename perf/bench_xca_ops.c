/* XCA heads and the basic ops on GPU-sized shapes, both kernel variants, against the device's copy
 * rate measured the same way in the same context (issue 16). The PyTorch CUDA peer on the same
 * shapes: perf/peers/xca_ops_torch_cuda.py.
 *
 *   bench_xca_ops [--xca "B,K,N,p;..."] [--ops "R,C;..."] [--variants cpu,gpu] [--reps R]
 *
 * --xca: wbcl_xca_heads on q, k, v, o : (B, K, N, p) (SPEC 1.6, after the projection; default
 *   "8,12,4096,64;1,8,1024,64"). --ops: relu, scale, axpby, add, add.bias (b of C), gelu,
 *   layernorm (no affine), softmax, reduce_rows.sum, reduce_cols.sum on x : (R, C) (default
 *   "4096,1024;16384,4096"). Empty string: skip that part.
 * For each case: wall = one call + finish (median of R); queue = R calls back to back, one finish,
 * per call (what a stream sees; the figure to compare with PyTorch's CUDA-event time); kernel =
 * the call's kernels summed from profiling events (median of R); GB/s on the queue time counting
 * the bytes the op must move (XCA: q, k, v read, o written, 4 B K N p floats; elementwise: each
 * operand read once and y written once; reductions: x read, y written); copy = wbcl_tensor_copy of
 * the same number of bytes (half read, half written) timed the same way; "% copy" = op GB/s over
 * copy GB/s. Kernel names and times of the last timed call follow each XCA row. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wbcl/wbcl.h"
#include "wbcl/xca.h"
#include "bench_util.h"

static void check(wbcl_status st, wbcl_context *ctx, const char *what)
{
    if (st) {
        fprintf(stderr, "%s failed: %s: %s\n", what, wbcl_status_name(st), ctx ? wbcl_context_last_error(ctx) : "");
        exit(1);
    }
}

static float *rnd(size_t n, float lo, float hi, unsigned seed)
{
    float *p = malloc(n * sizeof *p);
    uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
    return p;
}

typedef wbcl_status (*op_fn)(wbcl_context *, void *);

/* wall, queue, kernel seconds of fn (median of reps / per call of reps queued). */
static void time_op(wbcl_context *ctx, op_fn fn, void *arg, int reps, double *wall, double *queue, double *kern)
{
    for (int i = 0; i < 3; i++) check(fn(ctx, arg), ctx, "warm-up");
    check(wbcl_context_finish(ctx), ctx, "finish");
    double *t = malloc(reps * sizeof *t);
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        check(fn(ctx, arg), ctx, "op");
        check(wbcl_context_finish(ctx), ctx, "finish");
        t[r] = now_s() - t0;
    }
    *wall = median(t, reps);
    double t0 = now_s();
    for (int r = 0; r < reps; r++) check(fn(ctx, arg), ctx, "op");
    check(wbcl_context_finish(ctx), ctx, "finish");
    *queue = (now_s() - t0) / reps;
    check(wbcl_context_set_timing(ctx, 1), ctx, "timing");
    for (int r = 0; r < reps; r++) {
        wbcl_context_reset_kernel_ns(ctx);
        check(fn(ctx, arg), ctx, "op");
        t[r] = wbcl_context_kernel_ns(ctx) * 1e-9;
    }
    *kern = median(t, reps);
    check(wbcl_context_set_timing(ctx, 0), ctx, "timing");
    free(t);
}

typedef struct copy_arg { wbcl_tensor *a, *b; } copy_arg;
static wbcl_status do_copy(wbcl_context *ctx, void *p)
{
    copy_arg *c = p;
    return wbcl_tensor_copy(ctx, c->a, c->b);
}

/* Copy rate (GB/s) of n floats a -> b, queue time as for the ops. */
static double copy_rate(wbcl_context *ctx, wbcl_tensor *a, wbcl_tensor *b, size_t n, int reps)
{
    copy_arg c = {a, b};
    double w, q, k;
    time_op(ctx, do_copy, &c, reps, &w, &q, &k);
    return 2.0 * n * sizeof(float) / q / 1e9;
}

/* ---- XCA ---------------------------------------------------------------------------------------- */
typedef struct xca_arg { wbcl_tensor *q, *k, *v, *t, *o; } xca_arg;
static wbcl_status do_xca(wbcl_context *ctx, void *p)
{
    xca_arg *a = p;
    return wbcl_xca_heads(ctx, a->q, a->k, a->v, a->t, a->o);
}

static void run_xca(const char *shapes, const char *variants, int reps)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", shapes);
    printf("## XCA heads (wbcl_xca_heads)\n%-22s %-4s %9s %9s %9s %9s %10s %7s\n", "shape", "var", "wall ms",
           "queue ms", "kern ms", "GB/s", "copy GB/s", "% copy");
    char *save = NULL;
    for (char *sh = strtok_r(buf, ";", &save); sh; sh = strtok_r(NULL, ";", &save)) {
        size_t B, K, N, p;
        if (sscanf(sh, "%zu,%zu,%zu,%zu", &B, &K, &N, &p) != 4) {
            fprintf(stderr, "--xca: bad shape '%s' (B,K,N,p)\n", sh);
            exit(2);
        }
        char vb[64];
        snprintf(vb, sizeof vb, "%s", variants);
        char *vs = NULL;
        for (char *v = strtok_r(vb, ",", &vs); v; v = strtok_r(NULL, ",", &vs)) {
            char err[512];
            wbcl_context *ctx = NULL;
            wbcl_variant var;
            check(wbcl_context_create(NULL, &ctx, err, sizeof err), NULL, err);
            check(wbcl_variant_parse(v, &var), ctx, "variant");
            check(wbcl_context_set_variant(ctx, var), ctx, "set variant");
            size_t n = B * K * N * p, s4[4] = {B, K, N, p}, sk[1] = {K};
            float *hq = rnd(n, -1, 1, 1), *hk = rnd(n, -1, 1, 2), *hv = rnd(n, -1, 1, 3), *ht = rnd(K, 0.5f, 1.5f, 4);
            xca_arg a;
            check(wbcl_tensor_create(ctx, 4, s4, WBCL_F32, hq, &a.q), ctx, "q");
            check(wbcl_tensor_create(ctx, 4, s4, WBCL_F32, hk, &a.k), ctx, "k");
            check(wbcl_tensor_create(ctx, 4, s4, WBCL_F32, hv, &a.v), ctx, "v");
            check(wbcl_tensor_create(ctx, 4, s4, WBCL_F32, NULL, &a.o), ctx, "o");
            check(wbcl_tensor_create(ctx, 1, sk, WBCL_F32, ht, &a.t), ctx, "temperature");
            double w, q, k;
            time_op(ctx, do_xca, &a, reps, &w, &q, &k);
            double cr = copy_rate(ctx, a.q, a.o, n, reps), gbs = 4.0 * n * sizeof(float) / q / 1e9;
            char shs[64];
            snprintf(shs, sizeof shs, "B%zu K%zu N%zu p%zu", B, K, N, p);
            printf("%-22s %-4s %9.4f %9.4f %9.4f %9.1f %10.1f %6.1f%%\n", shs, v, w * 1e3, q * 1e3, k * 1e3, gbs, cr,
                   100.0 * gbs / cr);
            /* per kernel, one timed call */
            check(wbcl_context_set_timing(ctx, 1), ctx, "timing");
            wbcl_context_reset_kernel_ns(ctx);
            check(do_xca(ctx, &a), ctx, "xca");
            const char *kn;
            uint64_t kns, kl;
            for (size_t i = 0; wbcl_context_kernel_profile(ctx, i, &kn, &kns, &kl); i++)
                if (kl) printf("    %-28s %9.4f ms (%llu launches)\n", kn, kns * 1e-6, (unsigned long long)kl);
            check(wbcl_context_set_timing(ctx, 0), ctx, "timing");
            fflush(stdout);
            wbcl_tensor_destroy(a.q);
            wbcl_tensor_destroy(a.k);
            wbcl_tensor_destroy(a.v);
            wbcl_tensor_destroy(a.o);
            wbcl_tensor_destroy(a.t);
            free(hq);
            free(hk);
            free(hv);
            free(ht);
            wbcl_context_destroy(ctx);
        }
    }
}

/* ---- basic ops ---------------------------------------------------------------------------------- */
enum { O_RELU, O_SCALE, O_AXPBY, O_ADD, O_BIAS, O_GELU, O_LN, O_SOFTMAX, O_RROWS, O_RCOLS, O_N };
static const char *op_names[O_N] = {"relu", "scale", "axpby", "add", "add.bias", "gelu", "layernorm", "softmax",
                                    "reduce_rows.sum", "reduce_cols.sum"};

typedef struct ops_arg { int op; wbcl_tensor *x, *x2, *y, *bias, *rr, *rc; } ops_arg;
static wbcl_status do_op(wbcl_context *ctx, void *p)
{
    ops_arg *a = p;
    switch (a->op) {
    case O_RELU: return wbcl_relu(ctx, a->x, a->y);
    case O_SCALE: return wbcl_scale(ctx, a->x, 0.5f, a->y);
    case O_AXPBY: return wbcl_axpby(ctx, 0.5f, a->x, 0.25f, a->y);
    case O_ADD: return wbcl_add(ctx, a->x, a->x2, a->y);
    case O_BIAS: return wbcl_add(ctx, a->x, a->bias, a->y);
    case O_GELU: return wbcl_gelu(ctx, a->x, a->y);
    case O_LN: return wbcl_layernorm(ctx, a->x, NULL, NULL, 1e-5f, a->y);
    case O_SOFTMAX: return wbcl_softmax(ctx, a->x, a->y);
    case O_RROWS: return wbcl_reduce_rows(ctx, WBCL_REDUCE_SUM, a->x, a->rr);
    default: return wbcl_reduce_cols(ctx, WBCL_REDUCE_SUM, a->x, a->rc);
    }
}

/* Bytes op must move on (R, C). */
static double op_bytes(int op, size_t R, size_t C)
{
    double n = (double)R * C;
    switch (op) {
    case O_AXPBY: case O_ADD: return 4.0 * 3 * n;
    case O_BIAS: return 4.0 * (2 * n + C);
    case O_RROWS: return 4.0 * (n + R);
    case O_RCOLS: return 4.0 * (n + C);
    default: return 4.0 * 2 * n;
    }
}

static void run_ops(const char *shapes, const char *variants, int reps)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", shapes);
    printf("## Basic ops\n%-14s %-16s %-4s %9s %9s %9s %9s %10s %7s\n", "shape", "op", "var", "wall ms", "queue ms",
           "kern ms", "GB/s", "copy GB/s", "% copy");
    char *save = NULL;
    for (char *sh = strtok_r(buf, ";", &save); sh; sh = strtok_r(NULL, ";", &save)) {
        size_t R, C;
        if (sscanf(sh, "%zu,%zu", &R, &C) != 2) {
            fprintf(stderr, "--ops: bad shape '%s' (R,C)\n", sh);
            exit(2);
        }
        char vb[64];
        snprintf(vb, sizeof vb, "%s", variants);
        char *vs = NULL;
        for (char *v = strtok_r(vb, ",", &vs); v; v = strtok_r(NULL, ",", &vs)) {
            char err[512];
            wbcl_context *ctx = NULL;
            wbcl_variant var;
            check(wbcl_context_create(NULL, &ctx, err, sizeof err), NULL, err);
            check(wbcl_variant_parse(v, &var), ctx, "variant");
            check(wbcl_context_set_variant(ctx, var), ctx, "set variant");
            size_t n = R * C, s2[2] = {R, C}, sr[1] = {R}, sc[1] = {C};
            float *hx = rnd(n, -3, 3, 5), *hx2 = rnd(n, -3, 3, 6), *hb = rnd(C, -1, 1, 7);
            ops_arg a;
            check(wbcl_tensor_create(ctx, 2, s2, WBCL_F32, hx, &a.x), ctx, "x");
            check(wbcl_tensor_create(ctx, 2, s2, WBCL_F32, hx2, &a.x2), ctx, "x2");
            check(wbcl_tensor_create(ctx, 2, s2, WBCL_F32, hx2, &a.y), ctx, "y");
            check(wbcl_tensor_create(ctx, 1, sc, WBCL_F32, hb, &a.bias), ctx, "bias");
            check(wbcl_tensor_create(ctx, 1, sr, WBCL_F32, NULL, &a.rr), ctx, "row sums");
            check(wbcl_tensor_create(ctx, 1, sc, WBCL_F32, NULL, &a.rc), ctx, "column sums");
            double cr = copy_rate(ctx, a.x, a.y, n, reps);
            char shs[32];
            snprintf(shs, sizeof shs, "(%zu, %zu)", R, C);
            for (int op = 0; op < O_N; op++) {
                a.op = op;
                double w, q, k;
                time_op(ctx, do_op, &a, reps, &w, &q, &k);
                double gbs = op_bytes(op, R, C) / q / 1e9;
                printf("%-14s %-16s %-4s %9.4f %9.4f %9.4f %9.1f %10.1f %6.1f%%\n", shs, op_names[op], v, w * 1e3,
                       q * 1e3, k * 1e3, gbs, cr, 100.0 * gbs / cr);
                fflush(stdout);
            }
            wbcl_tensor_destroy(a.x);
            wbcl_tensor_destroy(a.x2);
            wbcl_tensor_destroy(a.y);
            wbcl_tensor_destroy(a.bias);
            wbcl_tensor_destroy(a.rr);
            wbcl_tensor_destroy(a.rc);
            free(hx);
            free(hx2);
            free(hb);
            wbcl_context_destroy(ctx);
        }
    }
}

int main(int argc, char **argv)
{
    const char *xca = "8,12,4096,64;1,8,1024,64", *ops = "4096,1024;16384,4096", *variants = "cpu,gpu";
    int reps = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--xca") && i + 1 < argc) xca = argv[++i];
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc) ops = argv[++i];
        else if (!strcmp(argv[i], "--variants") && i + 1 < argc) variants = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--xca \"B,K,N,p;...\"] [--ops \"R,C;...\"] [--variants cpu,gpu] [--reps R]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (*xca) run_xca(xca, variants, reps);
    if (*ops) run_ops(ops, variants, reps);
    return 0;
}
