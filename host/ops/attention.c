/* Fused online-softmax attention (include/wbcl/attention.h): validate, pick
 * the kernel variant, enqueue. Kernels in cl/attention.cl (family "attention").
 *
 * Variants (ctx->variant):
 *   CPU  pack K into 16-key panels (scratch slot 4) and V into rows padded to
 *        the accumulator vector width (slot 5), then wbcl_attn_fused_cpu: one
 *        work-item per ATT_G groups of ATT_QB queries of one (batch, head),
 *        scores and output accumulators in vector registers
 *        (../shared/PERF-NOTES.md, "fused softmax attention").
 *   GPU  wbcl_attn_fused_gpu: one query per work-item, K/V tiles in local
 *        memory; reads q, k, v in place (no packing). With attention.tiled = 1
 *        and p = 32, 64, 96 or 128: wbcl_attn_tiled_gpu, 64 queries per
 *        work-group of 128 in register tiles (p = 32, 64: 32-key tiles; p = 96,
 *        128: 16-key tiles, Q swizzled in local memory, within 48 KiB). On by
 *        default for p = 64 (measured faster) and 128 (not yet measured; it
 *        replaces a kernel measured at 0.25x SDPA): wbcl__attention_params.
 *        With attention.tiled = 2 and p = 32 or 64: wbcl_attn_tiled2_gpu, the
 *        second form (64 queries x 64-key tiles per work-group of 128, 4 x 8
 *        score tiles, statistics kept per work-item; 34 / 48 KiB), for A/B
 *        measurement (issue 17); at p = 96 and 128, 2 means the first form.
 * Kernel parameters are compile-time (-D): the head dimension p and the
 * tile shapes derived from it, so each distinct p builds one program.
 * One query per (batch, head) in float32 (a decode step) takes neither: host/ops/attn_decode.c
 * splits the keys into chunks (cl/attn_decode.cl), reading K and V in place.
 * float16 storage of q, k, v and/or o (any mix, fp32 compute): -DWBCL_ATT_HALF,
 * a bit mask (1 q, 2 k, 4 v, 8 o), added only when some tensor is half so the
 * float32 programs keep their options. The packed K/V scratch stays float32. */
#include "internal.h"
#include "attn_decode.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "wbcl/attention.h"

#define FAMILY "attention"
/* Context scratch slots for the packed K and V. Slots are shared in turn by ops that do not nest
 * (linalg and others use 4-7 too): the queue is in order, every use is within one call, and a
 * slot that grows releases its old buffer only after the queued work that uses it. */
#define SCRATCH_KP 4 /* packed K panels */
#define SCRATCH_VP 5 /* padded V rows   */
#define KP 16        /* keys per K panel: cl/attention.cl KP */
#define KB 32        /* keys per block:   cl/attention.cl KB */
#define P_MAX WBCL_ATT_P_MAX /* head dimensions beyond this are refused (private arrays) */
/* Sizes the kernels index with 32-bit (signed, for the mask vectors) integers. */
#define N_MAX WBCL_ATT_N_MAX /* INT_MAX - 2 KB */
#if KB != 32
#error "WBCL_ATT_N_MAX (host/core/internal.h) assumes 32-key blocks"
#endif

/* ---- kernel parameters ---------------------------------------------------------- */
typedef struct att_params {
    size_t p, pp;   /* head dim, padded to vw */
    int vw, qb, g;  /* CPU */
    int vc;         /* CPU: accumulator vectors of a row per O += P V pass (divides pp / vw) */
    int sp;         /* CPU: 16-key score panels per pass over p (1 or 2) */
    int bq, bk;     /* GPU */
    int tiled;      /* GPU, p = 32, 64, 96 or 128: the register-tiled kernel (2: its second form, p = 32, 64) */
    int maxrreg;    /* GPU-shaped programs on NVIDIA's OpenCL: -cl-nv-maxrregcount (0: none) */
} att_params;

const char *const wbcl__att_keys[WBCL_ATT_NPARAMS] = {
    "attention.qb", "attention.g",  "attention.vw", "attention.bq",     "attention.bk",
    "attention.tiled", "attention.vc", "attention.sp", "attention.maxrreg"};

void wbcl__attention_params(const wbcl_context *ctx, size_t p, int tuned, int v[WBCL_ATT_NPARAMS])
{
    const int vw = p <= 4 ? 4 : p <= 8 ? 8 : 16;
    v[2] = vw;
    if (tuned) {
        long t;
        if (wbcl__tuned_value(ctx, "attention.vw", p, &t, NULL)) v[2] = (int)t;
    }
    /* output accumulators QB * PP/VW vectors, plus 2*QB score vectors: stay within the
     * 32 vector registers of AVX-512 for p <= 64 */
    const size_t pp = (p + (size_t)v[2] - 1) / (size_t)v[2] * (size_t)v[2], nv = pp / (size_t)v[2];
    v[0] = nv <= 4 ? 4 : nv <= 8 ? 2 : 1;
    /* four register groups per work-item: each 32-key block of K and V (16 KB at p = 64) is used four
     * times from L1, with the groups' queries and accumulators (1 KB each at p = 64) beside it.
     * Measured against G = 2 at B1 K8 N4096 p64 (perf/RESULTS.md): 1.16x in wbcl-tune on the earlier
     * Xeon (32 KB L1, the shipped table), 1.10x on the 48 KB-L1 Xeon of 2026-11-27, where G = 8 and 16
     * ran faster still (1.14x, 1.18x): those go in per-device tables, G = 4 keeps the working set
     * within a 32 KB L1 */
    v[1] = 4;
    /* Devices whose native float vector is narrower than 16 (AVX2: 16 registers of 8 floats; NEON: 32
     * of 4) hold a quarter of AVX-512's 2 KB of vector registers: at most 2 queries per group; where
     * that halves QB (p <= 64), twice the groups keep 16 queries per work-item (work-items and K/V
     * reuse unchanged). On 2 cores of an AMD EPYC (Zen 3, PoCL pthread-haswell) against PyTorch's SDPA
     * in the same process (perf/RESULTS.md, tenth session), softmax / causal / MSSA:
     *   B1 K8 N4096 p64   QB 4, G 4: 0.51 / 0.56 / 0.45   QB 2, G 8: 0.85 / 0.92 / 0.85
     *   B1 K8 N4096 p32   QB 4, G 4: 0.67 / 0.75 / 0.66   QB 2, G 8: 1.15 / 1.04 / 1.07
     *   B1 K8 N2048 p128  QB 2, G 4: 0.68 / 0.82 / 0.64   (kept; QB 1, G 8: 0.51 / 0.68 / 0.55) */
    const int narrow_cpu = ctx->variant == WBCL_VARIANT_CPU && ctx->info.native_vector_width_float < 16;
    if (narrow_cpu && v[0] > 2) {
        v[0] = 2;
        v[1] = 8;
    }
    /* O += P V in passes of VC accumulator vectors per row (QB * VC registers live): on those devices
     * 32 floats a pass (QB 2: 8 AVX2 registers of accumulators, where the whole row at p = 64 / 128
     * needed 16 / 32 and spilled); elsewhere the whole row in one pass. Zen 3, against SDPA as above
     * (QB 2, G 8 at p = 64, QB 2, G 4 at p = 128), softmax / causal / MSSA:
     *   p64   whole row 0.86 / 0.94 / 0.84   32 floats 0.94 / 1.03 / 0.92   16 floats 0.73 / 0.86 / 0.78
     *   p128  whole row 0.66 / 0.79 / 0.64   32 floats 0.84 / 0.97 / 0.88   16 floats 0.64 / 0.79 / 0.67 */
    v[6] = (int)nv;
    if (narrow_cpu && pp > 48) {
        /* rows up to 48 floats (12 AVX2 accumulators at QB 2) in one pass; longer ones in passes of
         * the largest divisor of NV vectors within 32 floats */
        v[6] = 1;
        for (int c = 2; c <= (int)nv && c * v[2] <= 32; c++)
            if (nv % (size_t)c == 0) v[6] = c;
    }
    /* Better still on such CPU devices (a GPU run with the CPU variant keeps the above), up to p = 128:
     * the score loop one 16-key panel at a time (SP 1, below), which leaves room for 6 queries per group:
     * 6 x 16 scores and 6 x 16 floats of O a pass (VC 1) are 12 AVX2 accumulators each, the register tile
     * of the classic AVX2 SGEMM kernels, against 8 with QB 2 (Zen 3 has two FMA pipes of latency 4: 8
     * chains keep them busy only if nothing else waits). Same process, interleaved, time of QB 2, G 8
     * (p = 128: G 4), VC 32 floats, SP 2 over that of QB 6, G 3, VC 1, SP 1 (the results are the same bit
     * for bit), softmax, Zen 3 (perf/RESULTS.md, twelfth session): p64 N4096 1.14, p32 N4096 1.16, p128
     * N2048 1.14; G 2, 4, 6 and QB 4, 5 slower or level. */
    if (narrow_cpu && ctx->info.type == WBCL_DEVICE_CPU && nv <= 8) {
        v[0] = 6;
        v[1] = 3;
        v[6] = 1;
    }
    /* CPU devices with AVX-512's 32 registers of 16 floats, rows longer than 4 vectors (p > 64): the
     * register tile of p = 64 (QB 4, 4 vectors of O per query) instead of fewer queries with whole rows
     * (QB 2 up to 8 vectors, QB 1 beyond, which left half the registers idle): 4 queries, O += P V in
     * passes of the largest divisor of NV up to 5 vectors (at most 20 accumulators beside the 8 score
     * vectors). Measured on 2 cores of a Zen 5 EPYC (PoCL skylake-avx512), one process, interleaved, time
     * of the earlier default over this one (perf/RESULTS.md, fourteenth session), B1 K8 N2048 softmax /
     * causal / MSSA: p128 (VC 4) 1.43 / 1.30 / 1.41; p96 (VC 3) 1.38 / - / 1.37; p80 (whole row of 5)
     * 1.41 / 1.30 / -; B1 K4 N2048 p256 (VC 4) 2.69. QB 5 does better still there (1.03-1.09x QB 4 at
     * p = 64...256): a device's table, as wbcl-tune finds it. */
    const int wide_cpu = ctx->variant == WBCL_VARIANT_CPU && ctx->info.type == WBCL_DEVICE_CPU &&
                         ctx->info.native_vector_width_float >= 16;
    if (wide_cpu && nv > 4) {
        v[0] = 4;
        v[6] = 1;
        for (int c = 2; c <= (int)nv && c <= 5; c++)
            if (nv % (size_t)c == 0) v[6] = c;
    }
    /* GPU: 64 queries per work-group (or the device's maximum), K and V tiles of BK keys
     * within half the local memory */
    size_t bq = 64;
    while (bq > 1 && bq > ctx->info.max_work_group_size) bq /= 2;
    v[3] = (int)bq;
    v[4] = 32;
    /* the register-tiled GPU kernel (wbcl_attn_tiled_gpu; p = 32, 64, 96, 128): the default on GPU-variant
     * contexts for p = 64 and 128. Measured on an NVIDIA H200 (NVIDIA OpenCL, float32) against PyTorch CUDA
     * SDPA, ratio torch time / wbcl time, softmax / causal / MSSA (issue 17):
     *   B4 K12 N4096 p64   one-query 0.61 / 0.47 / 0.63   tiled 0.70 / 0.69 / 0.70
     *   B8 K6  N1024 p64   one-query 0.51 / 0.53 / 0.54   tiled 0.70 / 0.74 / 0.72
     *   B4 K12 N4096 p32   one-query 1.07 / 0.92 / 1.09   tiled 1.02 / 0.97 / 1.03  (one-query kept)
     *   B4 K12 N4096 p128  one-query 0.25 / 0.23 / 0.28   (37.2 ms against 9.4 ms; the p = 96/128 form of the
     *                      tiled kernel is not yet measured, but its 64-query tiles with 64 accumulators per
     *                      work-item replace a kernel whose private q and accumulator rows do not fit registers)
     * p = 96 shares the p = 128 code but has no measurement of either kernel: off. The CPU variant never
     * takes it. attention.tiled = 0 / 1 / 2 (context, table or WBCL_TUNING) overrides this default; 2, the
     * second form for p = 32 and 64 (wbcl_attn_tiled2_gpu), is not yet measured: not a default. */
    v[5] = ctx->variant == WBCL_VARIANT_GPU && (p == 64 || p == 128);
    /* no register cap unless tuned (attention.maxrreg: NVIDIA's compiler only, the GPU-shaped programs) */
    v[8] = 0;
    if (tuned) {
        for (int i = 0; i < WBCL_ATT_NPARAMS; i++) {
            long t;
            if (i == 2 || i == 7) continue; /* vw was applied above (the row's length depends on it), sp below */
            if (wbcl__tuned_value(ctx, wbcl__att_keys[i], p, &t, NULL)) v[i] = (int)t;
        }
        /* a tuned VC (validated 1..16 without knowing p) that does not divide this p's NV: the largest
         * divisor below it */
        if (v[6] > (int)nv) v[6] = (int)nv;
        while (nv % (size_t)v[6]) v[6]--;
    }
    /* SP, unless tuned itself: from the QB in use (a table written before the key existed keeps the
     * form it was measured with): both panels at once while their 2 * QB score vectors of 16 floats
     * take at most 3/4 of the vector registers (the 512 bytes of AVX2's 16 or NEON's 32 registers where
     * the native float vector is narrower than 16, else AVX-512's 2 KB): QB <= 3 there, <= 12 here */
    const long regs = narrow_cpu ? 512 : 2048;
    v[7] = 2L * v[0] * 16 * (long)sizeof(float) > regs * 3 / 4 ? 1 : 2;
    long sp;
    if (tuned && wbcl__tuned_value(ctx, "attention.sp", p, &sp, NULL)) v[7] = (int)sp;
    /* BK: the K and V tiles (2 * BK * p floats) within half the local memory (a tuned BK too:
     * an unscoped key is validated without knowing p) */
    uint64_t lm = ctx->info.local_mem_size ? ctx->info.local_mem_size : 16384;
    while (v[4] > 1 && (uint64_t)v[4] * p * 2 * sizeof(float) > lm / 2) v[4] /= 2;
}

static void choose_params(const wbcl_context *ctx, size_t p, att_params *a)
{
    int v[WBCL_ATT_NPARAMS];
    wbcl__attention_params(ctx, p, 1, v);
    a->p = p;
    a->vc = v[6];
    a->vw = v[2];
    a->pp = (p + (size_t)a->vw - 1) / (size_t)a->vw * (size_t)a->vw;
    a->qb = v[0];
    a->g = v[1];
    a->bq = v[3];
    a->bk = v[4];
    a->tiled = v[5];
    a->sp = v[7];
    a->maxrreg = v[8];
}

#define TILED_WG 128 /* the register-tiled kernel: work-items per work-group */
#define TILED_Q 64   /* and queries per work-group */
/* Local memory of the register-tiled kernel's form for head dimension p, as cl/attention.cl lays it
 * out; 0: no such form. p = 32, 64: Qs 64 (p+4), Ks 32 (p+4), Vs 32 p, Ps 32 * 68, statistics
 * 8 * 64 + 3 * 64 floats (28.8 / 44.8 KiB); p = 96, 128: Qs 64 p, KX max(16 p, 16 * 68 + 8 * 64 + 64),
 * Vs 16 p floats (36.5 / 48 KiB). */
static uint64_t tiled_lmem(size_t p)
{
    if (p == 32 || p == 64) return 4u * (64u * (p + 4) + 32u * (p + 4) + 32u * p + 32u * 68u + 8u * 64u + 3u * 64u);
    if (p == 96 || p == 128) {
        const uint64_t kx = 16u * p > 16u * 68u + 8u * 64u + 64u ? 16u * p : 16u * 68u + 8u * 64u + 64u;
        return 4u * (64u * p + kx + 16u * p);
    }
    return 0;
}

/* Local memory of the second form (wbcl_attn_tiled2_gpu, p = 32 and 64); 0: no such form. Qs 64 p,
 * KX max(64 p, 64 * 64 + 8 * 64 at p = 32 / 64 * 64 at p = 64), Vs 64 p floats (34 / 48 KiB). */
static uint64_t tiled2_lmem(size_t p)
{
    if (p == 32) return 4u * (64u * 32u + (64u * 64u + 8u * 64u) + 64u * 32u);
    if (p == 64) return 4u * (3u * 64u * 64u);
    return 0;
}

/* The programs (cl/attention.cl): each holds the kernels of one path, so that a kernel its context never
 * launches is not compiled (the one-query GPU kernel alone takes an AMD back end 50-90 s):
 *   ATT_CPU    the packing kernels and wbcl_attn_fused_cpu (-DWBCL_ATT_NO_GPU=1): the CPU variant, and the
 *              GPU variant's fallback (gpu_kernel);
 *   ATT_TILED  the register-tiled GPU kernels (-DWBCL_ATT_NO_CPU=1 -DWBCL_ATT_NO_FUSED=1), built only where
 *              the device has their local memory and work-group size (tiled_kernel); one with the first
 *              form's but not the second form's local memory (p = 32: 28.8 against 34 KiB; p = 64: 44.8
 *              against 48 KiB) gets -DWBCL_ATT_NO_TILED2=1 (the second form's local arrays, which the
 *              device could not build, left out);
 *   ATT_FUSED  wbcl_attn_fused_gpu, the one-query GPU kernel (-DWBCL_ATT_NO_CPU=1 -DWBCL_ATT_NO_TILED=1). */
enum { ATT_CPU, ATT_TILED, ATT_FUSED };
static void options(const wbcl_context *ctx, const att_params *a, int half, int program, char *buf, size_t len)
{
    int n = snprintf(buf, len,
                     "-DWBCL_ATT_P=%zu -DWBCL_ATT_PP=%zu -DWBCL_ATT_VW=%d -DWBCL_ATT_QB=%d -DWBCL_ATT_G=%d "
                     "-DWBCL_ATT_BQ=%d -DWBCL_ATT_BK=%d -DWBCL_ATT_VC=%d",
                     a->p, a->pp, a->vw, a->qb, a->g, a->bq, a->bk, a->vc);
    /* the score loop's panels (CPU-shaped kernel only; the kernel's default is 2) */
    if (program == ATT_CPU && a->sp == 1 && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " -DWBCL_ATT_SP=1");
    if (half && n > 0 && (size_t)n < len) n += snprintf(buf + n, len - (size_t)n, " -DWBCL_ATT_HALF=%d", half);
    if (n <= 0 || (size_t)n >= len) return;
    n += snprintf(buf + n, len - (size_t)n, "%s",
                  program == ATT_CPU     ? " -DWBCL_ATT_NO_GPU=1"
                  : program == ATT_FUSED ? " -DWBCL_ATT_NO_CPU=1 -DWBCL_ATT_NO_TILED=1"
                                         : " -DWBCL_ATT_NO_CPU=1 -DWBCL_ATT_NO_FUSED=1");
    const uint64_t lmem2 = tiled2_lmem(a->p);
    if (program == ATT_TILED && lmem2 && ctx->info.local_mem_size < lmem2 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " -DWBCL_ATT_NO_TILED2=1");
    /* a register cap for the GPU-shaped kernels (the CPU-shaped ones are built without it) */
    if (program != ATT_CPU) wbcl__append_regcap(ctx, a->maxrreg, buf, len);
}

/* ---- validation ------------------------------------------------------------------- */
static int muladd_ok(size_t a, size_t b, size_t c, size_t *out)
{
    size_t p;
    if (!wbcl__mul_ok(a, b, &p) || p > SIZE_MAX - c) return 0;
    *out = p + c;
    return 1;
}

/* The last element operand X touches must lie inside its tensor. */
static wbcl_status check_operand(wbcl_context *ctx, const char *op, const char *name, const wbcl_tensor *t,
                                 size_t off, size_t sb, size_t sh, size_t sn, size_t B, size_t K, size_t N,
                                 size_t p)
{
    char s[96];
    size_t last = off;
    if (!muladd_ok(B - 1, sb, last, &last) || !muladd_ok(K - 1, sh, last, &last) ||
        !muladd_ok(N - 1, sn, last, &last) || !muladd_ok(1, p - 1, last, &last))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: the addressing of '%s' overflows size_t", op, name);
    if (last >= t->numel)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: '%s' is out of bounds: element %zu is touched (off %zu, strides b %zu h %zu n %zu, "
                          "B %zu K %zu N %zu p %zu) but tensor %s has %zu elements",
                          op, name, last, off, sb, sh, sn, B, K, N, p,
                          wbcl__shape_str(s, sizeof s, t->ndim, t->shape), t->numel);
    return WBCL_SUCCESS;
}

static wbcl_status validate(wbcl_context *ctx, const char *op, const wbcl_attention_desc *d, const wbcl_tensor *q,
                            const wbcl_tensor *k, const wbcl_tensor *v, const wbcl_tensor *o)
{
    wbcl_status st = wbcl__check_tensor_any(ctx, q, op, "q");
    if (!st) st = wbcl__check_tensor_any(ctx, k, op, "k");
    if (!st) st = wbcl__check_tensor_any(ctx, v, op, "v");
    if (!st) st = wbcl__check_tensor_any(ctx, o, op, "o");
    if (st) return st;
    if (o->mem == q->mem || o->mem == k->mem || o->mem == v->mem)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'o' must not be the same tensor as '%s' (in place)",
                          op, o->mem == q->mem ? "q" : o->mem == k->mem ? "k" : "v");
    if (!d->batch || !d->heads || !d->n_q || !d->n_k || !d->p)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: empty problem (batch %zu, heads %zu, n_q %zu, n_k %zu, p %zu)",
                          op, d->batch, d->heads, d->n_q, d->n_k, d->p);
    if (d->p > P_MAX)
        return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED, "%s: head dimension p = %zu exceeds the supported %d", op,
                          d->p, P_MAX);
    size_t bh;
    if (d->n_q > N_MAX || d->n_k > N_MAX || !wbcl__mul_ok(d->batch, d->heads, &bh) || bh > (size_t)UINT_MAX)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: sizes too large for the kernels (n_q %zu, n_k %zu, B*K %zu x %zu)",
                          op, d->n_q, d->n_k, d->batch, d->heads);
    if (d->causal && d->n_q > d->n_k)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: causal attention needs n_q <= n_k (the queries are the last n_q tokens); got n_q %zu, "
                          "n_k %zu",
                          op, d->n_q, d->n_k);
    if (!isfinite(d->scale))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: scale must be finite (got %g)", op,
                          (double)d->scale);
    if ((st = check_operand(ctx, op, "q", q, d->off_q, d->sb_q, d->sh_q, d->sn_q, d->batch, d->heads, d->n_q, d->p)))
        return st;
    if ((st = check_operand(ctx, op, "k", k, d->off_k, d->sb_k, d->sh_k, d->sn_k, d->batch, d->heads, d->n_k, d->p)))
        return st;
    if ((st = check_operand(ctx, op, "v", v, d->off_v, d->sb_v, d->sh_v, d->sn_v, d->batch, d->heads, d->n_k, d->p)))
        return st;
    return check_operand(ctx, op, "o", o, d->off_o, d->sb_o, d->sh_o, d->sn_o, d->batch, d->heads, d->n_q, d->p);
}

/* ---- the two variants ------------------------------------------------------------- */
static wbcl_status run_cpu(wbcl_context *ctx, const char *op, const wbcl_attention_desc *d, const att_params *a,
                           const char *opts, const wbcl_tensor *q, const wbcl_tensor *k, const wbcl_tensor *v,
                           wbcl_tensor *o)
{
    const size_t BH = d->batch * d->heads;
    const size_t npan = 2 * ((d->n_k + KB - 1) / KB);
    size_t ekp, evp;
    if (!wbcl__mul_ok(BH, npan * KP, &ekp) || !wbcl__mul_ok(ekp, a->p, &ekp) ||
        !wbcl__mul_ok(BH, npan * KP, &evp) || !wbcl__mul_ok(evp, a->pp, &evp) || ekp > SIZE_MAX / 4 ||
        evp > SIZE_MAX / 4)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: packed K/V of %zu x %zu keys x p %zu overflow size_t", op, BH,
                          d->n_k, d->p);
    wbcl_kern *kpk, *kpv, *kf;
    wbcl_status st = wbcl__kernel(ctx, FAMILY, opts, "wbcl_attn_pack_k", &kpk);
    if (!st) st = wbcl__kernel(ctx, FAMILY, opts, "wbcl_attn_pack_v", &kpv);
    if (!st) st = wbcl__kernel(ctx, FAMILY, opts, "wbcl_attn_fused_cpu", &kf);
    if (st) return st;
    cl_mem kp, vp;
    if ((st = wbcl__scratch(ctx, SCRATCH_KP, ekp * sizeof(float), &kp))) return st;
    if ((st = wbcl__scratch(ctx, SCRATCH_VP, evp * sizeof(float), &vp))) return st;

    const cl_uint H = (cl_uint)d->heads, BH_ = (cl_uint)BH, Nq = (cl_uint)d->n_q, Nk = (cl_uint)d->n_k,
                  np = (cl_uint)npan, causal = d->causal ? 1u : 0u;
    const size_t pg[2] = {npan * KP, BH}, pl[2] = {16, 1};
    {
        cl_ulong off = d->off_k, sb = d->sb_k, sh = d->sh_k, sn = d->sn_k;
        WBCL_ARG(ctx, kpk, 0, k->mem);
        WBCL_ARG(ctx, kpk, 1, off);
        WBCL_ARG(ctx, kpk, 2, sb);
        WBCL_ARG(ctx, kpk, 3, sh);
        WBCL_ARG(ctx, kpk, 4, sn);
        WBCL_ARG(ctx, kpk, 5, H);
        WBCL_ARG(ctx, kpk, 6, BH_);
        WBCL_ARG(ctx, kpk, 7, Nk);
        WBCL_ARG(ctx, kpk, 8, np);
        WBCL_ARG(ctx, kpk, 9, kp);
        if ((st = wbcl__launch(ctx, kpk, 2, pg, pl))) return st;
    }
    {
        cl_ulong off = d->off_v, sb = d->sb_v, sh = d->sh_v, sn = d->sn_v;
        WBCL_ARG(ctx, kpv, 0, v->mem);
        WBCL_ARG(ctx, kpv, 1, off);
        WBCL_ARG(ctx, kpv, 2, sb);
        WBCL_ARG(ctx, kpv, 3, sh);
        WBCL_ARG(ctx, kpv, 4, sn);
        WBCL_ARG(ctx, kpv, 5, H);
        WBCL_ARG(ctx, kpv, 6, BH_);
        WBCL_ARG(ctx, kpv, 7, Nk);
        WBCL_ARG(ctx, kpv, 8, np);
        WBCL_ARG(ctx, kpv, 9, vp);
        if ((st = wbcl__launch(ctx, kpv, 2, pg, pl))) return st;
    }
    const float qscale = d->scale * 1.44269504088896340736f; /* scale * log2(e) */
    cl_ulong qo = d->off_q, qsb = d->sb_q, qsh = d->sh_q, qsn = d->sn_q;
    cl_ulong oo = d->off_o, osb = d->sb_o, osh = d->sh_o, osn = d->sn_o;
    WBCL_ARG(ctx, kf, 0, q->mem);
    WBCL_ARG(ctx, kf, 1, qo);
    WBCL_ARG(ctx, kf, 2, qsb);
    WBCL_ARG(ctx, kf, 3, qsh);
    WBCL_ARG(ctx, kf, 4, qsn);
    WBCL_ARG(ctx, kf, 5, kp);
    WBCL_ARG(ctx, kf, 6, vp);
    WBCL_ARG(ctx, kf, 7, o->mem);
    WBCL_ARG(ctx, kf, 8, oo);
    WBCL_ARG(ctx, kf, 9, osb);
    WBCL_ARG(ctx, kf, 10, osh);
    WBCL_ARG(ctx, kf, 11, osn);
    WBCL_ARG(ctx, kf, 12, H);
    WBCL_ARG(ctx, kf, 13, BH_);
    WBCL_ARG(ctx, kf, 14, Nq);
    WBCL_ARG(ctx, kf, 15, Nk);
    WBCL_ARG(ctx, kf, 16, np);
    WBCL_ARG(ctx, kf, 17, causal);
    WBCL_ARG(ctx, kf, 18, qscale);
    const size_t per = (size_t)a->qb * (size_t)a->g;
    const size_t fg[2] = {(d->n_q + per - 1) / per, BH}, fl[2] = {1, 1};
    return wbcl__launch(ctx, kf, 2, fg, fl);
}

/* The GPU kernel has reqd_work_group_size(BQ, 1, 1). BQ is chosen from the device's maximum work-group size, but
 * the compiled kernel may accept fewer work-items (CL_KERNEL_WORK_GROUP_SIZE: registers, local memory): then
 * it is rebuilt for the largest power of two the kernel accepts, and if none fits (or the rebuilt kernel
 * still refuses it) the CPU-shaped kernel, which launches work-groups of one work-item, runs instead. */
static wbcl_status gpu_kernel(wbcl_context *ctx, att_params *a, int half, char *opts, size_t optlen, wbcl_kern **kf)
{
    *kf = NULL;
    for (int tries = 0; tries < 2; tries++) {
        wbcl_kern *k;
        size_t limit;
        wbcl_status st = wbcl__kernel(ctx, FAMILY, opts, "wbcl_attn_fused_gpu", &k);
        if (!st) st = wbcl__kernel_wg_limit(ctx, k, &limit);
        if (st) return st;
        size_t bq = wbcl__wg_fit((size_t)a->bq, limit);
        if (bq == (size_t)a->bq) {
            *kf = k;
            return WBCL_SUCCESS;
        }
        if (!bq) break;
        a->bq = (int)bq;
        options(ctx, a, half, ATT_FUSED, opts, optlen);
    }
    return WBCL_SUCCESS; /* no fitting work-group size: *kf NULL, the caller takes the CPU-shaped path */
}

/* The register-tiled kernel where attention.tiled asks for it, p is 32, 64, 96 or 128, and the device
 * and the compiled kernel take the work-group and its local memory (tiled_lmem); else *kf NULL.
 * attention.tiled = 2 at p = 32, 64: the second form (wbcl_attn_tiled2_gpu, tiled2_lmem) where it
 * fits, else the first (wbcl_attn_tiled_gpu); both launch 128 work-items per 64 queries. */
static wbcl_status tiled_kernel(wbcl_context *ctx, const att_params *a, const char *opts, wbcl_kern **kf)
{
    *kf = NULL;
    const uint64_t lmem = tiled_lmem(a->p), lmem2 = tiled2_lmem(a->p);
    if (!a->tiled || !lmem || ctx->info.max_work_group_size < TILED_WG) return WBCL_SUCCESS;
    if (ctx->info.local_mem_size < lmem) return WBCL_SUCCESS;
    wbcl_kern *k;
    size_t limit;
    wbcl_status st;
    if (a->tiled == 2 && lmem2 && ctx->info.local_mem_size >= lmem2) {
        st = wbcl__kernel(ctx, FAMILY, opts, "wbcl_attn_tiled2_gpu", &k);
        if (!st) st = wbcl__kernel_wg_limit(ctx, k, &limit);
        if (st) return st;
        if (limit >= TILED_WG) {
            *kf = k;
            return WBCL_SUCCESS;
        }
    }
    st = wbcl__kernel(ctx, FAMILY, opts, "wbcl_attn_tiled_gpu", &k);
    if (!st) st = wbcl__kernel_wg_limit(ctx, k, &limit);
    if (st) return st;
    if (limit >= TILED_WG) *kf = k;
    return WBCL_SUCCESS;
}

/* global (g0, B*K), local (l0, 1): the one-query kernel g0 = n_q, l0 = BQ; the tiled ones
 * g0 = 128 per 64 queries, l0 = 128. */
static wbcl_status run_gpu(wbcl_context *ctx, const wbcl_attention_desc *d, size_t g0, size_t l0, wbcl_kern *kf,
                           const wbcl_tensor *q, const wbcl_tensor *k, const wbcl_tensor *v, wbcl_tensor *o)
{
    const size_t BH = d->batch * d->heads;
    const cl_uint H = (cl_uint)d->heads, BH_ = (cl_uint)BH, Nq = (cl_uint)d->n_q, Nk = (cl_uint)d->n_k,
                  causal = d->causal ? 1u : 0u;
    const float qscale = d->scale * 1.44269504088896340736f;
    cl_ulong qo = d->off_q, qsb = d->sb_q, qsh = d->sh_q, qsn = d->sn_q;
    cl_ulong ko = d->off_k, ksb = d->sb_k, ksh = d->sh_k, ksn = d->sn_k;
    cl_ulong vo = d->off_v, vsb = d->sb_v, vsh = d->sh_v, vsn = d->sn_v;
    cl_ulong oo = d->off_o, osb = d->sb_o, osh = d->sh_o, osn = d->sn_o;
    cl_uint i = 0;
    WBCL_ARG(ctx, kf, i++, q->mem);
    WBCL_ARG(ctx, kf, i++, qo);
    WBCL_ARG(ctx, kf, i++, qsb);
    WBCL_ARG(ctx, kf, i++, qsh);
    WBCL_ARG(ctx, kf, i++, qsn);
    WBCL_ARG(ctx, kf, i++, k->mem);
    WBCL_ARG(ctx, kf, i++, ko);
    WBCL_ARG(ctx, kf, i++, ksb);
    WBCL_ARG(ctx, kf, i++, ksh);
    WBCL_ARG(ctx, kf, i++, ksn);
    WBCL_ARG(ctx, kf, i++, v->mem);
    WBCL_ARG(ctx, kf, i++, vo);
    WBCL_ARG(ctx, kf, i++, vsb);
    WBCL_ARG(ctx, kf, i++, vsh);
    WBCL_ARG(ctx, kf, i++, vsn);
    WBCL_ARG(ctx, kf, i++, o->mem);
    WBCL_ARG(ctx, kf, i++, oo);
    WBCL_ARG(ctx, kf, i++, osb);
    WBCL_ARG(ctx, kf, i++, osh);
    WBCL_ARG(ctx, kf, i++, osn);
    WBCL_ARG(ctx, kf, i++, H);
    WBCL_ARG(ctx, kf, i++, BH_);
    WBCL_ARG(ctx, kf, i++, Nq);
    WBCL_ARG(ctx, kf, i++, Nk);
    WBCL_ARG(ctx, kf, i++, causal);
    WBCL_ARG(ctx, kf, i++, qscale);
    const size_t g[2] = {g0, BH}, l[2] = {l0, 1};
    return wbcl__launch(ctx, kf, 2, g, l);
}

static wbcl_status attention(wbcl_context *ctx, const char *op, const wbcl_attention_desc *d, const wbcl_tensor *q,
                             const wbcl_tensor *k, const wbcl_tensor *v, wbcl_tensor *o)
{
    wbcl_status st = validate(ctx, op, d, q, k, v, o);
    if (st) return st;
    /* one query per head (a decode step): split over the keys, K and V read in place */
    if (wbcl__attention_decode_applies(ctx, d, q, k, v, o)) return wbcl__attention_decode(ctx, d, q, k, v, o);
    att_params a;
    choose_params(ctx, d->p, &a);
    const int half = (q->dtype == WBCL_F16 ? 1 : 0) | (k->dtype == WBCL_F16 ? 2 : 0) |
                     (v->dtype == WBCL_F16 ? 4 : 0) | (o->dtype == WBCL_F16 ? 8 : 0);
    char opts[320];
    if (ctx->variant == WBCL_VARIANT_GPU) {
        wbcl_kern *kf;
        options(ctx, &a, half, ATT_TILED, opts, sizeof opts);
        if ((st = tiled_kernel(ctx, &a, opts, &kf))) return st;
        if (kf) return run_gpu(ctx, d, (d->n_q + TILED_Q - 1) / TILED_Q * TILED_WG, TILED_WG, kf, q, k, v, o);
        att_params g = a;
        options(ctx, &g, half, ATT_FUSED, opts, sizeof opts);
        st = gpu_kernel(ctx, &g, half, opts, sizeof opts, &kf);
        if (st) return st;
        if (kf) return run_gpu(ctx, d, d->n_q, (size_t)g.bq, kf, q, k, v, o);
    }
    options(ctx, &a, half, ATT_CPU, opts, sizeof opts); /* also the GPU variant's fallback */
    return run_cpu(ctx, op, d, &a, opts, q, k, v, o);
}

wbcl_status wbcl__attention(wbcl_context *ctx, const char *op, const wbcl_attention_desc *d, const wbcl_tensor *q,
                            const wbcl_tensor *k, const wbcl_tensor *v, wbcl_tensor *o)
{
    return attention(ctx, op, d, q, k, v, o);
}

/* ---- public entry points ------------------------------------------------------------ */
wbcl_status wbcl_attention_softmax_strided(wbcl_context *ctx, const wbcl_attention_desc *desc,
                                           const wbcl_tensor *q, const wbcl_tensor *k, const wbcl_tensor *v,
                                           wbcl_tensor *o)
{
    static const char *op = "wbcl_attention_softmax_strided";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!desc) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", op);
    return attention(ctx, op, desc, q, k, v, o);
}

/* A (B, K, N, p) tensor, or a failure naming `what`. */
static wbcl_status check_heads(wbcl_context *ctx, const char *op, const char *what, const wbcl_tensor *t)
{
    wbcl_status st = wbcl__check_tensor_any(ctx, t, op, what);
    if (st) return st;
    if (t->ndim != 4) {
        char s[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' must be (B, K, N, p), got %s", op, what,
                          wbcl__shape_str(s, sizeof s, t->ndim, t->shape));
    }
    return WBCL_SUCCESS;
}

static void natural(size_t K, size_t N, size_t p, size_t *sb, size_t *sh, size_t *sn)
{
    *sn = p;
    *sh = N * p;
    *sb = K * N * p;
}

wbcl_status wbcl_attention_softmax_heads(wbcl_context *ctx, const wbcl_tensor *q, const wbcl_tensor *k,
                                         const wbcl_tensor *v, float scale, int causal, wbcl_tensor *o)
{
    static const char *op = "wbcl_attention_softmax_heads";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_heads(ctx, op, "q", q);
    if (!st) st = check_heads(ctx, op, "k", k);
    if (!st) st = check_heads(ctx, op, "v", v);
    if (!st) st = check_heads(ctx, op, "o", o);
    if (st) return st;
    char s1[96], s2[96];
    if ((st = wbcl__check_same_shape(ctx, k, v, op, "k", "v"))) return st;
    if ((st = wbcl__check_same_shape(ctx, q, o, op, "q", "o"))) return st;
    if (q->shape[0] != k->shape[0] || q->shape[1] != k->shape[1] || q->shape[3] != k->shape[3])
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: q %s and k %s differ in batch, heads or head dimension", op,
                          wbcl__shape_str(s1, sizeof s1, q->ndim, q->shape),
                          wbcl__shape_str(s2, sizeof s2, k->ndim, k->shape));
    wbcl_attention_desc d;
    memset(&d, 0, sizeof d);
    d.batch = q->shape[0];
    d.heads = q->shape[1];
    d.n_q = q->shape[2];
    d.n_k = k->shape[2];
    d.p = q->shape[3];
    d.scale = scale;
    d.causal = causal != 0;
    natural(d.heads, d.n_q, d.p, &d.sb_q, &d.sh_q, &d.sn_q);
    natural(d.heads, d.n_k, d.p, &d.sb_k, &d.sh_k, &d.sn_k);
    natural(d.heads, d.n_k, d.p, &d.sb_v, &d.sh_v, &d.sn_v);
    natural(d.heads, d.n_q, d.p, &d.sb_o, &d.sh_o, &d.sn_o);
    return attention(ctx, op, &d, q, k, v, o);
}

wbcl_status wbcl_attention_mssa_heads(wbcl_context *ctx, const wbcl_tensor *w, float scale, int causal,
                                      wbcl_tensor *o)
{
    static const char *op = "wbcl_attention_mssa_heads";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_heads(ctx, op, "w", w);
    if (!st) st = check_heads(ctx, op, "o", o);
    if (!st && (o == w || o->mem == w->mem))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'o' must not be the same tensor as 'w' (in place)",
                          op);
    if (!st) st = wbcl__check_same_shape(ctx, w, o, op, "w", "o");
    if (st) return st;
    wbcl_attention_desc d;
    memset(&d, 0, sizeof d);
    d.batch = w->shape[0];
    d.heads = w->shape[1];
    d.n_q = d.n_k = w->shape[2];
    d.p = w->shape[3];
    d.scale = scale;
    d.causal = causal != 0;
    natural(d.heads, d.n_q, d.p, &d.sb_q, &d.sh_q, &d.sn_q);
    d.sb_k = d.sb_v = d.sb_o = d.sb_q;
    d.sh_k = d.sh_v = d.sh_o = d.sh_q;
    d.sn_k = d.sn_v = d.sn_o = d.sn_q;
    return attention(ctx, op, &d, w, w, w, o);
}
