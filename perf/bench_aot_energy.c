/* AoT denoising attention and energy-descent attention, per-head cores (wbcl_aot_heads,
 * wbcl_energy_heads on w : (B, K, N, p)), in both kernel variants, for the PyTorch CUDA peer
 * perf/peers/aot_energy_torch_cuda.py on the same shapes (issue 16).
 *
 *   bench_aot_energy [--shapes "B,K,N,p;..."] [--variants cpu,gpu] [--ops aot,aot_th,energy,energy_log]
 *                    [--reps R] [--peak GFLOPS]
 *
 * Ops: aot = softmax AoT (phi = softmax of w_i . w_j, scale 1: SDPA on q = k = v = w with scale 1),
 * aot_th = Theorem 5.1's thresholded softmax (tau 0.75),
 * energy = rho -exp(-z), energy_log = rho log(z + 1), both alpha 0.5, v = y = w (the peer's formula).
 * Per op and variant: the wall time of one call (call + clFinish, median of R after 2 warm-ups) and the
 * device time (the summed OpenCL profiling times of the call's kernels, median of R). GFLOP/s count
 * the useful work 4 B K N^2 p (two N x N x p products; the peer counts SDPA the same way), 6 B K N^2 p
 * for aot_th (as the peer counts it: the scores twice, then the weights times w; wbcl's kernels now take
 * one pass of scores and no product, 2 B K N^2 p: compare times); "% peak" = that rate over --peak (the
 * device's FP32 FMA peak in GFLOP/s, e.g. 66900 for an H200 SXM; omitted: no column).
 * Check: 8 query rows of the first and the last (b, h) against a double-precision evaluation from the
 * equations (O(N p) per row); max relative error over those rows (normwise per row), must be <= 1e-4
 * (aot_th: rows whose weights come within 1e-5 of tau are skipped, the threshold being discontinuous).
 * Default shapes: "4,12,4096,64;1,8,1024,64" (the H200 runs of perf/RESULTS.md; on 2 PoCL cores the CPU
 * variant takes about 2 s a call at the first). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "wbcl/wbcl.h"
#include "wbcl/aot.h"
#include "wbcl/energy.h"

enum { OP_AOT, OP_AOT_TH, OP_ENERGY, OP_ENERGY_LOG, OP_COUNT };
static const char *op_names[OP_COUNT] = {"aot", "aot_th", "energy", "energy_log"};
#define TAU 0.75f
#define ALPHA 0.5f
#define CC 1.0f

static void check(wbcl_status st, wbcl_context *ctx, const char *what)
{
    if (st) {
        fprintf(stderr, "%s failed: %s: %s\n", what, wbcl_status_name(st), ctx ? wbcl_context_last_error(ctx) : "");
        exit(1);
    }
}

static wbcl_status call(wbcl_context *ctx, int op, const wbcl_tensor *w, wbcl_tensor *o)
{
    switch (op) {
    case OP_AOT: return wbcl_aot_heads(ctx, w, WBCL_AOT_SOFTMAX, TAU, o);
    case OP_AOT_TH: return wbcl_aot_heads(ctx, w, WBCL_AOT_THRESHOLD, TAU, o);
    case OP_ENERGY: return wbcl_energy_heads(ctx, w, NULL, WBCL_RHO_EXP, CC, ALPHA, o);
    default: return wbcl_energy_heads(ctx, w, NULL, WBCL_RHO_LOG, CC, ALPHA, o);
    }
}

/* row i of head wb (N x p) in double: want[c]; returns 0 if the row is skipped (aot_th near tau) */
static int reference_row(int op, const float *wb, size_t N, size_t p, size_t i, double *g, double *want)
{
    const float *wi = wb + i * p;
    double m = -INFINITY, z = 0.0;
    for (size_t j = 0; j < N; j++) {
        const float *wj = wb + j * p;
        double s = 0.0;
        for (size_t c = 0; c < p; c++) {
            if (op == OP_AOT || op == OP_AOT_TH) s += (double)wi[c] * wj[c];
            else s += ((double)wi[c] - wj[c]) * ((double)wi[c] - wj[c]);
        }
        if (op == OP_ENERGY) s = exp(-0.5 * s);
        else if (op == OP_ENERGY_LOG) s = 1.0 / (0.5 * s + CC);
        g[j] = s;
        m = s > m ? s : m;
    }
    if (op == OP_AOT || op == OP_AOT_TH) {
        for (size_t j = 0; j < N; j++) z += exp(g[j] - m);
        for (size_t j = 0; j < N; j++) {
            g[j] = exp(g[j] - m) / z;
            if (op == OP_AOT_TH) {
                if (fabs(g[j] - TAU) < 1e-5) return 0;
                g[j] = g[j] > TAU ? TAU : 0.0;
            }
        }
    } else {
        for (size_t j = 0; j < N; j++) z += g[j];
        for (size_t j = 0; j < N; j++) g[j] /= z;
    }
    for (size_t c = 0; c < p; c++) want[c] = 0.0;
    for (size_t j = 0; j < N; j++)
        if (g[j] != 0.0)
            for (size_t c = 0; c < p; c++) want[c] += g[j] * wb[j * p + c];
    if (op == OP_ENERGY || op == OP_ENERGY_LOG)
        for (size_t c = 0; c < p; c++) want[c] = (1.0 - ALPHA) * wi[c] + ALPHA * want[c];
    return 1;
}

/* max over the checked rows of max_c |o - want| / max(max_c |want|, 1e-30) */
static double verify(int op, const float *h, const float *o, size_t B, size_t K, size_t N, size_t p)
{
    double *g = malloc(N * sizeof *g), *want = malloc(p * sizeof *want), worst = 0.0;
    if (!g || !want) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    const size_t heads[2] = {0, B * K - 1};
    for (int hi = 0; hi < 2; hi++)
        for (size_t r = 0; r < 8 && r < N; r++) {
            const size_t i = r * (N - 1) / 7 % N, base = heads[hi] * N * p;
            if (!reference_row(op, h + base, N, p, i, g, want)) continue;
            double num = 0.0, den = 1e-30;
            for (size_t c = 0; c < p; c++) {
                const double d = fabs((double)o[base + i * p + c] - want[c]);
                num = d > num || d != d ? d : num;
                den = fabs(want[c]) > den ? fabs(want[c]) : den;
            }
            worst = num / den > worst || num != num ? num / den : worst;
        }
    free(g);
    free(want);
    return worst;
}

static float *rnd(size_t n, unsigned seed)
{
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    unsigned s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(-1.0 + 2.0 * ((s >> 8) / 16777216.0));
    }
    return x;
}

int main(int argc, char **argv)
{
    const char *shapes = "4,12,4096,64;1,8,1024,64", *variants = "cpu,gpu", *ops = "aot,aot_th,energy,energy_log";
    int reps = 5;
    double peak = 0.0;
    for (int i = 1; i < argc; i++) {
        const int has = i + 1 < argc;
        if (!strcmp(argv[i], "--shapes") && has) shapes = argv[++i];
        else if (!strcmp(argv[i], "--variants") && has) variants = argv[++i];
        else if (!strcmp(argv[i], "--ops") && has) ops = argv[++i];
        else if (!strcmp(argv[i], "--reps") && has) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--peak") && has) peak = atof(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: bench_aot_energy [--shapes \"B,K,N,p;...\"] [--variants cpu,gpu] "
                    "[--ops aot,aot_th,energy,energy_log] [--reps R] [--peak GFLOPS]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    double *tw = malloc((size_t)reps * sizeof *tw), *tk = malloc((size_t)reps * sizeof *tk);
    if (!tw || !tk) return 1;
    int failed = 0, header = 0;
    char sbuf[256];
    snprintf(sbuf, sizeof sbuf, "%s", shapes);
    char *ss = NULL;
    for (char *sh = strtok_r(sbuf, ";", &ss); sh; sh = strtok_r(NULL, ";", &ss)) {
        size_t B, K, N, p;
        if (sscanf(sh, "%zu,%zu,%zu,%zu", &B, &K, &N, &p) != 4 || !B || !K || !N || !p) {
            fprintf(stderr, "--shapes: bad shape '%s' (B,K,N,p)\n", sh);
            return 2;
        }
        const size_t n = B * K * N * p, s4[4] = {B, K, N, p};
        float *h = rnd(n, 7), *out = malloc(n * sizeof *out);
        if (!out) return 1;
        char vbuf[64];
        snprintf(vbuf, sizeof vbuf, "%s", variants);
        char *vs = NULL;
        for (char *v = strtok_r(vbuf, ",", &vs); v; v = strtok_r(NULL, ",", &vs)) {
            char err[512];
            wbcl_context *ctx = NULL;
            wbcl_variant var;
            check(wbcl_context_create(NULL, &ctx, err, sizeof err), NULL, err);
            check(wbcl_variant_parse(v, &var), ctx, "--variants");
            check(wbcl_context_set_variant(ctx, var), ctx, "set variant");
            if (!header) {
                const wbcl_device_info *di = wbcl_context_device(ctx);
                printf("device: %s (%s)\n", di->name, di->driver_version);
                printf("%-22s %-10s %-4s %10s %10s %10s %8s %9s\n", "shape", "op", "var", "wall ms", "kernel ms",
                       "GFLOP/s", peak > 0 ? "% peak" : "", "rel.err");
                header = 1;
            }
            wbcl_tensor *w = NULL, *o = NULL;
            check(wbcl_tensor_create(ctx, 4, s4, WBCL_F32, h, &w), ctx, "w");
            check(wbcl_tensor_create(ctx, 4, s4, WBCL_F32, NULL, &o), ctx, "o");
            char obuf[64];
            snprintf(obuf, sizeof obuf, "%s", ops);
            char *os = NULL;
            for (char *on = strtok_r(obuf, ",", &os); on; on = strtok_r(NULL, ",", &os)) {
                int op = -1;
                for (int k = 0; k < OP_COUNT; k++)
                    if (!strcmp(on, op_names[k])) op = k;
                if (op < 0) {
                    fprintf(stderr, "--ops: unknown op '%s' (aot, aot_th, energy, energy_log)\n", on);
                    return 2;
                }
                for (int r = 0; r < 2; r++) check(call(ctx, op, w, o), ctx, op_names[op]);
                check(wbcl_context_finish(ctx), ctx, "finish");
                for (int r = 0; r < reps; r++) {
                    const double t0 = now_s();
                    check(call(ctx, op, w, o), ctx, op_names[op]);
                    check(wbcl_context_finish(ctx), ctx, "finish");
                    tw[r] = now_s() - t0;
                }
                check(wbcl_context_set_timing(ctx, 1), ctx, "timing");
                for (int r = 0; r < reps; r++) {
                    wbcl_context_reset_kernel_ns(ctx);
                    check(call(ctx, op, w, o), ctx, op_names[op]);
                    tk[r] = wbcl_context_kernel_ns(ctx) * 1e-9;
                }
                check(wbcl_context_set_timing(ctx, 0), ctx, "timing");
                check(wbcl_tensor_read(ctx, o, out, n), ctx, "read");
                const double mw = median(tw, reps), mk = median(tk, reps);
                const double flops = (op == OP_AOT_TH ? 6.0 : 4.0) * B * K * (double)N * N * p;
                const double gf = flops / (mk > 0 ? mk : mw) * 1e-9, e = verify(op, h, out, B, K, N, p);
                const int bad = !(e <= 1e-4);
                failed |= bad;
                char shs[64], pk[16] = "";
                snprintf(shs, sizeof shs, "B%zu K%zu N%zu p%zu", B, K, N, p);
                if (peak > 0) snprintf(pk, sizeof pk, "%7.1f%%", 100.0 * gf / peak);
                printf("%-22s %-10s %-4s %10.3f %10.3f %10.1f %8s %9.2e%s\n", shs, op_names[op], v, mw * 1e3, mk * 1e3,
                       gf, pk, e, bad ? "  FAIL" : "");
                fflush(stdout);
            }
            wbcl_tensor_destroy(w);
            wbcl_tensor_destroy(o);
            wbcl_context_destroy(ctx);
        }
        free(h);
        free(out);
    }
    free(tw);
    free(tk);
    return failed;
}
