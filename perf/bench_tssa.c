/* TSSA benchmarks (ToST): the core against the memory-bandwidth bound, the TSSA layer against
 * the softmax attention layer, and the memory of every statistics-attention variant against n.
 *
 *   bench_tssa [--reps R] [--d D] [--heads K] [--n LIST] [--skip-softmax] [--skip-memory]
 *   bench_tssa --memory-child VARIANT N D K
 *   bench_tssa --heads-core "B,K,N,p;B,K,N,p" [--variants cpu,gpu] [--reps R] [--causal]   (heads_core below)
 *
 * 1. Core: wbcl_tssa_tokens on a projected (1, n, d) tensor (the op after the projections),
 *    interleaved call by call with a STREAM triad a = b + s c on 2 threads over 3 x 64 MB (the
 *    machine's bandwidth measured in the same run). The core must read w three times (channel
 *    norms, membership + second moments, output) and write y once: bytes = 4 n d 4 plus Pi
 *    (written once, read twice: 3 n K 4). "bw ratio" = (bytes / core time) / triad bandwidth
 *    (triad bytes = 3 x 64 MB per call, STREAM's convention; neither counts write-allocate).
 *    Causal TSSA (prefix scans) is timed the same way, for information.
 * 2. Layers with projections: wbcl_tssa_layer_forward vs wbcl_mha_forward (timm ViT Attention,
 *    non-causal, fused online softmax; include/wbcl/attention.h) and, for information, XCA,
 *    K = 8, d = 384 (the ToST paper's Fig. 6), interleaved, medians of R calls after a warm-up.
 *    "speedup" = softmax time / TSSA time.
 * 3. Memory: for each variant (the layers above, causal TSSA, the energy layer and the AoT step)
 *    and n, a fresh child process (this program with --memory-child)
 *    builds the layer and its input/output, runs one forward at n = 64 first (kernels compiled,
 *    work buffers of the small size), clears VmHWM (/proc/self/clear_refs) and reports the rise
 *    of the resident set over one call at n (VmHWM - VmRSS before the tensors of size n exist).
 *    On a CPU OpenCL device buffers are host memory, so this is the device memory of the call.
 *    Linear growth: the ratio between consecutive n (x2) must stay near 2, never near 4.
 * Medians of wall time (call + clFinish). Recommended: POCL_AFFINITY=1, warm POCL_CACHE_DIR. */
#define _GNU_SOURCE
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wbcl/wbcl.h"
#include "bench_util.h"
#include "wbcl/aot.h"
#include "wbcl/attention.h"
#include "wbcl/energy.h"
#include "wbcl/tssa.h"
#include "wbcl/xca.h"

static void check(wbcl_status st, wbcl_context *ctx, const char *what)
{
    if (st) {
        fprintf(stderr, "%s failed: %s: %s\n", what, wbcl_status_name(st), ctx ? wbcl_context_last_error(ctx) : "");
        exit(1);
    }
}

static float *rnd(size_t n, double lo, double hi, unsigned seed)
{
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    unsigned s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(lo + (hi - lo) * ((s >> 8) / 16777216.0));
    }
    return x;
}

/* ---- STREAM triad on 2 threads -------------------------------------------------------------- */
#define TRIAD_N (16u << 20) /* floats per array: 64 MB */
typedef struct {
    float *a, *b, *c;
    size_t lo, hi;
} triad_job;

static void *triad_worker(void *p)
{
    triad_job *j = p;
    const float s = 1.0001f;
    for (size_t i = j->lo; i < j->hi; i++) j->a[i] = j->b[i] + s * j->c[i];
    return NULL;
}

static double triad(float *a, float *b, float *c, int threads)
{
    pthread_t th[16];
    triad_job jobs[16];
    double t0 = now_s();
    for (int i = 0; i < threads; i++) {
        jobs[i].a = a;
        jobs[i].b = b;
        jobs[i].c = c;
        jobs[i].lo = (size_t)TRIAD_N * i / threads;
        jobs[i].hi = (size_t)TRIAD_N * (i + 1) / threads;
        pthread_create(&th[i], NULL, triad_worker, &jobs[i]);
    }
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    return now_s() - t0;
}

/* ---- memory of one call in a child ---------------------------------------------------------- */
static long proc_status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') v = atol(line + kl + 1);
    if (f) fclose(f);
    return v;
}

static void clear_hwm(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

typedef struct {
    const char *name;
    wbcl_tssa_layer *tssa;
    wbcl_tssa_causal_layer *causal;
    wbcl_xca_layer *xca;
    wbcl_energy_layer *energy;
    wbcl_mha *mha;
    wbcl_tensor *aotU; /* AoT step: U (d, d), K heads of d/K */
    size_t K;
} layers;

static void make_layers(wbcl_context *ctx, const char *v, size_t d, size_t K, size_t tmax, layers *L)
{
    memset(L, 0, sizeof *L);
    L->name = v;
    float *W = rnd(3 * d * d, -0.05, 0.05, 1), *b = rnd(3 * d, -0.1, 0.1, 2), *t = rnd(K, 0.5, 1.5, 3),
          *bias = rnd(K * tmax, -0.1, 0.1, 4);
    if (!strcmp(v, "tssa")) check(wbcl_tssa_layer_create(ctx, d, K, W, b, t, W + d * d, b + d, &L->tssa), ctx, "tssa");
    else if (!strcmp(v, "tssa_causal"))
        check(wbcl_tssa_causal_layer_create(ctx, d, K, tmax, W, b, t, bias, W + d * d, b + d, &L->causal), ctx, "causal");
    else if (!strcmp(v, "xca")) check(wbcl_xca_layer_create(ctx, d, K, W, b, t, W + d * d, b, &L->xca), ctx, "xca");
    else if (!strcmp(v, "energy")) check(wbcl_energy_layer_create(ctx, d, W, W + d * d, &L->energy), ctx, "energy");
    else if (!strcmp(v, "softmax")) check(wbcl_mha_create(ctx, d, K, 0, W, b, W, b, &L->mha), ctx, "mha");
    else if (!strcmp(v, "aot")) {
        size_t su[2] = {d, d};
        check(wbcl_tensor_create(ctx, 2, su, WBCL_F32, W, &L->aotU), ctx, "aot U");
        L->K = K;
    }
    else {
        fprintf(stderr, "unknown variant %s\n", v);
        exit(2);
    }
    free(W);
    free(b);
    free(t);
    free(bias);
}

static void forward(wbcl_context *ctx, layers *L, const wbcl_tensor *x, wbcl_tensor *y)
{
    if (L->tssa) check(wbcl_tssa_layer_forward(ctx, L->tssa, x, y), ctx, "tssa forward");
    if (L->causal) check(wbcl_tssa_causal_layer_forward(ctx, L->causal, x, NULL, y), ctx, "causal forward");
    if (L->xca) check(wbcl_xca_layer_forward(ctx, L->xca, x, y), ctx, "xca forward");
    if (L->mha) check(wbcl_mha_forward(ctx, L->mha, x, y), ctx, "mha forward");
    if (L->aotU) check(wbcl_aot_step(ctx, x, L->aotU, L->K, 0.1f, WBCL_AOT_SOFTMAX, 0.75f, y), ctx, "aot step");
    if (L->energy) {
        wbcl_energy_params P = wbcl_energy_params_default();
        check(wbcl_energy_layer_forward(ctx, L->energy, &P, x, y), ctx, "energy forward");
    }
    check(wbcl_context_finish(ctx), ctx, "finish");
}

static void free_layers(layers *L)
{
    wbcl_tssa_layer_destroy(L->tssa);
    wbcl_tssa_causal_layer_destroy(L->causal);
    wbcl_xca_layer_destroy(L->xca);
    wbcl_energy_layer_destroy(L->energy);
    wbcl_mha_destroy(L->mha);
    wbcl_tensor_destroy(L->aotU);
}

static int memory_child(const char *variant, size_t n, size_t d, size_t K)
{
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    char err[512];
    wbcl_context *ctx = NULL;
    check(wbcl_context_create(NULL, &ctx, err, sizeof err), NULL, err);
    layers L;
    make_layers(ctx, variant, d, K, n > 64 ? n : 64, &L);
    /* warm-up at n = 64: kernels built, small work buffers */
    size_t s0[3] = {1, 64, d};
    wbcl_tensor *x0, *y0;
    float *h0 = rnd(64 * d, -1, 1, 5);
    check(wbcl_tensor_create(ctx, 3, s0, WBCL_F32, h0, &x0), ctx, "x0");
    check(wbcl_tensor_create(ctx, 3, s0, WBCL_F32, NULL, &y0), ctx, "y0");
    forward(ctx, &L, x0, y0);
    wbcl_tensor_destroy(x0);
    wbcl_tensor_destroy(y0);
    free(h0);
    float *h = rnd(n * d, -1, 1, 6);
    long before = proc_status_kb("VmRSS") - (long)(n * d * sizeof(float) / 1024); /* the host input is not counted */
    clear_hwm();
    size_t s[3] = {1, n, d};
    wbcl_tensor *x, *y;
    check(wbcl_tensor_create(ctx, 3, s, WBCL_F32, h, &x), ctx, "x");
    check(wbcl_tensor_create(ctx, 3, s, WBCL_F32, NULL, &y), ctx, "y");
    forward(ctx, &L, x, y);
    long peak = proc_status_kb("VmHWM");
    printf("%ld\n", peak - before);
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(y);
    free(h);
    free_layers(&L);
    wbcl_context_destroy(ctx);
    return 0;
}

static long run_memory_child(const char *self, const char *variant, size_t n, size_t d, size_t K)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --memory-child %s %zu %zu %zu", self, variant, n, d, K);
    FILE *p = popen(cmd, "r");
    long kb = -1;
    if (p) {
        if (fscanf(p, "%ld", &kb) != 1) kb = -1;
        pclose(p);
    }
    return kb;
}

/* ---- --heads: the per-head core (wbcl_tssa_heads) on a GPU-sized shape, both kernel variants ----
 * For each shape B,K,N,p and each variant: wall time of one call (call + finish, median of R),
 * the time per call of R calls queued back to back (one finish: what a framework's stream sees),
 * the device time of one call summed over its kernels (profiling events, per kernel too), and a
 * copy probe in the same context (wbcl_tensor_copy w -> y, R back to back). GB/s counts one read
 * of w and one write of y (2 B K N p 4 bytes), for the op and the copy alike: "% copy" is the op's
 * rate over the copy's. WBCL_TSSA_GROUP_BYTES / WBCL_TSSA_GLX (host/ops) apply if set.
 * --causal: the same for causal TSSA (wbcl_tssa_causal_heads, no state: the prefill; denom_bias
 * (K, N)), then the decode step: one token (B, K, 1, p) per call with a state, R calls queued back
 * to back (one finish; the state reset before), "step ms" per call, and its kernel time. */
static void core_call(wbcl_context *ctx, int causal, wbcl_tensor *w, wbcl_tensor *tt, wbcl_tensor *tb, wbcl_tensor *y)
{
    if (causal) check(wbcl_tssa_causal_heads(ctx, w, tt, tb, NULL, y, NULL), ctx, "causal tssa");
    else check(wbcl_tssa_heads(ctx, w, tt, y, NULL), ctx, "tssa");
}

static void decode_steps(wbcl_context *ctx, size_t B, size_t K, size_t N, size_t p, wbcl_tensor *tt, wbcl_tensor *tb,
                         int reps)
{
    size_t s1[4] = {B, K, 1, p};
    float *h = rnd(B * K * p, -1, 1, 23);
    wbcl_tensor *w1, *y1;
    wbcl_tssa_state *st;
    check(wbcl_tensor_create(ctx, 4, s1, WBCL_F32, h, &w1), ctx, "w1");
    check(wbcl_tensor_create(ctx, 4, s1, WBCL_F32, NULL, &y1), ctx, "y1");
    check(wbcl_tssa_state_create(ctx, B, K, p, &st), ctx, "state");
    int R = (size_t)reps < N ? reps : (int)N;
    for (int i = 0; i < 3 && (size_t)i < N; i++) check(wbcl_tssa_causal_heads(ctx, w1, tt, tb, st, y1, NULL), ctx, "step");
    check(wbcl_tssa_state_reset(ctx, st), ctx, "reset");
    check(wbcl_context_finish(ctx), ctx, "finish");
    double t0 = now_s();
    for (int r = 0; r < R; r++) check(wbcl_tssa_causal_heads(ctx, w1, tt, tb, st, y1, NULL), ctx, "step");
    check(wbcl_context_finish(ctx), ctx, "finish");
    double mq = (now_s() - t0) / R;
    check(wbcl_tssa_state_reset(ctx, st), ctx, "reset");
    check(wbcl_context_set_timing(ctx, 1), ctx, "timing");
    double *tk = malloc(R * sizeof *tk);
    for (int r = 0; r < R; r++) {
        wbcl_context_reset_kernel_ns(ctx);
        check(wbcl_tssa_causal_heads(ctx, w1, tt, tb, st, y1, NULL), ctx, "step");
        tk[r] = wbcl_context_kernel_ns(ctx) * 1e-9;
    }
    check(wbcl_context_set_timing(ctx, 0), ctx, "timing");
    printf("    decode step (B%zu K%zu p%zu, 1 token): %.4f ms per step queued, kernel %.4f ms\n", B, K, p, mq * 1e3,
           median(tk, R) * 1e3);
    const char *kn;
    uint64_t kns, kl;
    for (size_t i = 0; wbcl_context_kernel_profile(ctx, i, &kn, &kns, &kl); i++)
        if (kl) printf("      %-26s %9.4f ms in the last step (%llu launches)\n", kn, kns * 1e-6, (unsigned long long)kl);
    free(tk);
    free(h);
    wbcl_tssa_state_destroy(st);
    wbcl_tensor_destroy(w1);
    wbcl_tensor_destroy(y1);
}

static int heads_core(const char *shapes, const char *variants, int reps, int causal)
{
    if (causal) printf("causal TSSA (wbcl_tssa_causal_heads): prefill without a state, then the decode step\n");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", shapes);
    printf("%-22s %-4s %9s %9s %9s %9s %10s %9s %7s\n", "shape", "var", "wall ms", "queue ms", "kern ms",
           "GB/s", "copy GB/s", "copy ms", "% copy");
    char *save = NULL;
    for (char *sh = strtok_r(buf, ";", &save); sh; sh = strtok_r(NULL, ";", &save)) {
        size_t B, K, N, p;
        if (sscanf(sh, "%zu,%zu,%zu,%zu", &B, &K, &N, &p) != 4) {
            fprintf(stderr, "--heads: bad shape '%s' (B,K,N,p)\n", sh);
            return 2;
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
            size_t n = B * K * N * p, s4[4] = {B, K, N, p}, sk[1] = {K}, sb[2] = {K, N};
            float *h = rnd(n, -1, 1, 21), *t = rnd(K, 0.5, 1.5, 22), *bh = rnd(K * N, -0.1, 0.1, 24);
            wbcl_tensor *w, *y, *tt, *tb;
            check(wbcl_tensor_create(ctx, 4, s4, WBCL_F32, h, &w), ctx, "w");
            check(wbcl_tensor_create(ctx, 4, s4, WBCL_F32, NULL, &y), ctx, "y");
            check(wbcl_tensor_create(ctx, 1, sk, WBCL_F32, t, &tt), ctx, "temp");
            check(wbcl_tensor_create(ctx, 2, sb, WBCL_F32, bh, &tb), ctx, "denom_bias");
            for (int i = 0; i < 3; i++) core_call(ctx, causal, w, tt, tb, y);
            check(wbcl_tensor_copy(ctx, w, y), ctx, "copy");
            check(wbcl_context_finish(ctx), ctx, "finish");
            double *tw = malloc(reps * sizeof *tw);
            for (int r = 0; r < reps; r++) {
                double t0 = now_s();
                core_call(ctx, causal, w, tt, tb, y);
                check(wbcl_context_finish(ctx), ctx, "finish");
                tw[r] = now_s() - t0;
            }
            double mw = median(tw, reps);
            double t0 = now_s();
            for (int r = 0; r < reps; r++) core_call(ctx, causal, w, tt, tb, y);
            check(wbcl_context_finish(ctx), ctx, "finish");
            double mq = (now_s() - t0) / reps;
            t0 = now_s();
            for (int r = 0; r < reps; r++) check(wbcl_tensor_copy(ctx, w, y), ctx, "copy");
            check(wbcl_context_finish(ctx), ctx, "finish");
            double mc = (now_s() - t0) / reps;
            /* device time: median over R timed calls of the summed kernel times */
            check(wbcl_context_set_timing(ctx, 1), ctx, "timing");
            for (int r = 0; r < reps; r++) {
                wbcl_context_reset_kernel_ns(ctx);
                core_call(ctx, causal, w, tt, tb, y);
                tw[r] = wbcl_context_kernel_ns(ctx) * 1e-9;
            }
            double mk = median(tw, reps);
            check(wbcl_context_set_timing(ctx, 0), ctx, "timing");
            double bytes = 2.0 * n * sizeof(float);
            char shs[64];
            snprintf(shs, sizeof shs, "B%zu K%zu N%zu p%zu", B, K, N, p);
            printf("%-22s %-4s %9.4f %9.4f %9.4f %9.1f %10.1f %9.4f %6.1f%%\n", shs, v, mw * 1e3, mq * 1e3, mk * 1e3,
                   bytes / mq / 1e9, bytes / mc / 1e9, mc * 1e3, 100.0 * mc / mq);
            const char *kn;
            uint64_t kns, kl;
            for (size_t i = 0; wbcl_context_kernel_profile(ctx, i, &kn, &kns, &kl); i++)
                if (kl) printf("    %-28s %9.4f ms in the last call (%llu launches)\n", kn, kns * 1e-6,
                               (unsigned long long)kl);
            if (causal) decode_steps(ctx, B, K, N, p, tt, tb, reps);
            fflush(stdout);
            free(tw);
            free(h);
            free(t);
            wbcl_tensor_destroy(w);
            wbcl_tensor_destroy(y);
            wbcl_tensor_destroy(tt);
            wbcl_tensor_destroy(tb);
            free(bh);
            wbcl_context_destroy(ctx);
        }
    }
    return 0;
}

/* ---- main ------------------------------------------------------------------------------------- */
int main(int argc, char **argv)
{
    int reps = 5, skip_softmax = 0, skip_memory = 0;
    size_t d = 384, K = 8;
    size_t ns[8] = {4096, 16384};
    int nn = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--memory-child") && i + 4 < argc)
            return memory_child(argv[i + 1], (size_t)atol(argv[i + 2]), (size_t)atol(argv[i + 3]),
                                (size_t)atol(argv[i + 4]));
        else if (!strcmp(argv[i], "--heads-core") && i + 1 < argc) {
            const char *vars = "cpu,gpu";
            for (int j = i + 2; j + 1 < argc; j++)
                if (!strcmp(argv[j], "--variants")) vars = argv[j + 1];
            int causal = 0;
            for (int j = i + 2; j + 1 < argc; j++)
                if (!strcmp(argv[j], "--reps")) reps = atoi(argv[j + 1]);
            for (int j = i + 2; j < argc; j++)
                if (!strcmp(argv[j], "--causal")) causal = 1;
            return heads_core(argv[i + 1], vars, reps < 1 ? 1 : reps, causal);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--d") && i + 1 < argc) d = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--heads") && i + 1 < argc) K = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--skip-softmax")) skip_softmax = 1;
        else if (!strcmp(argv[i], "--skip-memory")) skip_memory = 1;
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) {
            nn = 0;
            for (char *tok = strtok(argv[++i], ","); tok && nn < 8; tok = strtok(NULL, ",")) ns[nn++] = (size_t)atol(tok);
        } else {
            fprintf(stderr, "usage: %s [--reps R] [--d D] [--heads K] [--n LIST] [--skip-softmax] [--skip-memory]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    char err[512];
    wbcl_context *ctx = NULL;
    check(wbcl_context_create(NULL, &ctx, err, sizeof err), NULL, err);
    const wbcl_device_info *dev = wbcl_context_device(ctx);
    printf("device: %s (%s, driver %s), %u compute units\n", dev->name, dev->platform_version, dev->driver_version,
           dev->compute_units);
    printf("d = %zu, K = %zu heads (p = %zu), %d reps, medians of wall time\n\n", d, K, d / K, reps);

    /* 1. the core vs the triad */
    float *ta = rnd(TRIAD_N, 0, 1, 7), *tb = rnd(TRIAD_N, 0, 1, 8), *tc = rnd(TRIAD_N, 0, 1, 9);
    triad(ta, tb, tc, 2); /* first touch */
    printf("## TSSA core (after projections) vs STREAM triad (2 threads, 3 x 64 MB), interleaved\n");
    printf("%-8s %-6s %10s %10s %10s %10s %9s\n", "n", "d", "core ms", "core GB/s", "triad GB/s", "causal ms", "bw ratio");
    size_t core_ns[4] = {4096, 16384, 16384}, core_ds[4] = {d, d, 2 * d};
    for (int ci = 0; ci < 3; ci++) {
        size_t n = core_ns[ci], dd = core_ds[ci], s[3] = {1, n, dd}, sk[1] = {K}, sb[2] = {K, n};
        float *h = rnd(n * dd, -1, 1, 10), *t = rnd(K, 0.5, 1.5, 11), *bias = rnd(K * n, -0.1, 0.1, 12);
        wbcl_tensor *w, *y, *tt, *tbias;
        check(wbcl_tensor_create(ctx, 3, s, WBCL_F32, h, &w), ctx, "w");
        check(wbcl_tensor_create(ctx, 3, s, WBCL_F32, NULL, &y), ctx, "y");
        check(wbcl_tensor_create(ctx, 1, sk, WBCL_F32, t, &tt), ctx, "temp");
        check(wbcl_tensor_create(ctx, 2, sb, WBCL_F32, bias, &tbias), ctx, "bias");
        check(wbcl_tssa_tokens(ctx, w, K, tt, y, NULL), ctx, "warm-up");
        check(wbcl_tssa_causal_tokens(ctx, w, K, tt, tbias, NULL, y, NULL), ctx, "warm-up");
        check(wbcl_context_finish(ctx), ctx, "finish");
        int R = reps * 4;
        double *tcore = malloc(R * sizeof *tcore), *ttri = malloc(R * sizeof *ttri), *tcau = malloc(R * sizeof *tcau);
        for (int r = 0; r < R; r++) {
            double t0 = now_s();
            check(wbcl_tssa_tokens(ctx, w, K, tt, y, NULL), ctx, "tssa");
            check(wbcl_context_finish(ctx), ctx, "finish");
            tcore[r] = now_s() - t0;
            ttri[r] = triad(ta, tb, tc, 2);
            t0 = now_s();
            check(wbcl_tssa_causal_tokens(ctx, w, K, tt, tbias, NULL, y, NULL), ctx, "causal");
            check(wbcl_context_finish(ctx), ctx, "finish");
            tcau[r] = now_s() - t0;
        }
        double mc = median(tcore, R), mt = median(ttri, R), mca = median(tcau, R);
        double bytes = 4.0 * n * dd * 4 + 3.0 * n * K * 4, tri_bw = 3.0 * TRIAD_N * 4 / mt / 1e9, core_bw = bytes / mc / 1e9;
        printf("%-8zu %-6zu %10.2f %10.1f %10.1f %10.2f %9.2f\n", n, dd, mc * 1e3, core_bw, tri_bw, mca * 1e3,
               core_bw / tri_bw);
        fflush(stdout);
        free(tcore);
        free(ttri);
        free(tcau);
        free(h);
        free(t);
        free(bias);
        wbcl_tensor_destroy(w);
        wbcl_tensor_destroy(y);
        wbcl_tensor_destroy(tt);
        wbcl_tensor_destroy(tbias);
    }
    free(ta);
    free(tb);
    free(tc);

    /* 2. layers */
    if (!skip_softmax) {
        printf("\n## Layers with projections: TSSA vs softmax attention (wbcl_mha, fused), XCA for reference\n");
        printf("%-8s %12s %12s %12s %9s\n", "n", "TSSA ms", "softmax ms", "XCA ms", "speedup");
        layers Lt, Ls, Lx;
        make_layers(ctx, "tssa", d, K, 0, &Lt);
        make_layers(ctx, "softmax", d, K, 0, &Ls);
        make_layers(ctx, "xca", d, K, 0, &Lx);
        for (int i = 0; i < nn; i++) {
            size_t n = ns[i], s[3] = {1, n, d};
            float *h = rnd(n * d, -1, 1, 13);
            wbcl_tensor *x, *y;
            check(wbcl_tensor_create(ctx, 3, s, WBCL_F32, h, &x), ctx, "x");
            check(wbcl_tensor_create(ctx, 3, s, WBCL_F32, NULL, &y), ctx, "y");
            forward(ctx, &Lt, x, y);
            forward(ctx, &Ls, x, y);
            forward(ctx, &Lx, x, y);
            int R = n > 8192 ? (reps < 3 ? reps : 3) : reps;
            double *tt = malloc(R * sizeof *tt), *ts = malloc(R * sizeof *ts), *tx = malloc(R * sizeof *tx);
            for (int r = 0; r < R; r++) {
                double t0 = now_s();
                forward(ctx, &Lt, x, y);
                tt[r] = now_s() - t0;
                t0 = now_s();
                forward(ctx, &Ls, x, y);
                ts[r] = now_s() - t0;
                t0 = now_s();
                forward(ctx, &Lx, x, y);
                tx[r] = now_s() - t0;
            }
            double mt = median(tt, R), ms = median(ts, R), mx = median(tx, R);
            printf("%-8zu %12.2f %12.2f %12.2f %9.1f\n", n, mt * 1e3, ms * 1e3, mx * 1e3, ms / mt);
            fflush(stdout);
            free(tt);
            free(ts);
            free(tx);
            free(h);
            wbcl_tensor_destroy(x);
            wbcl_tensor_destroy(y);
        }
        free_layers(&Lt);
        free_layers(&Ls);
        free_layers(&Lx);
    }
    wbcl_context_destroy(ctx);

    /* 3. memory */
    if (!skip_memory) {
        printf("\n## Memory of one forward (MB, rise of the resident set in a fresh process), d = %zu\n", d);
        static const char *variants[] = {"tssa", "tssa_causal", "xca", "softmax", "energy", "aot"};
        const size_t mns[4] = {2048, 4096, 8192, 16384};
        printf("%-12s", "variant");
        for (int j = 0; j < 4; j++) printf(" %10zu", mns[j]);
        printf("   growth per x2\n");
        for (int v = 0; v < 6; v++) {
            long kb[4];
            int quad = !strcmp(variants[v], "energy") || !strcmp(variants[v], "aot");
            int m = quad ? 3 : 4; /* energy, AoT: O(n^2 d) time, stop at 8192 */
            printf("%-12s", variants[v]);
            for (int j = 0; j < 4; j++) {
                kb[j] = j < m ? run_memory_child(argv[0], variants[v], mns[j], d, K) : -1;
                if (kb[j] >= 0) printf(" %10.1f", kb[j] / 1024.0);
                else printf(" %10s", "-");
                fflush(stdout);
            }
            printf("  ");
            for (int j = 1; j < m; j++) printf(" %.2f", kb[j - 1] > 0 ? (double)kb[j] / kb[j - 1] : 0.0);
            printf("\n");
        }
        printf("(input x and output y of n x d floats = %.1f MB each at n = 16384)\n", 16384.0 * d * 4 / 1048576.0);
    }
    return 0;
}
