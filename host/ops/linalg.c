/* Dense SPD linear algebra: Cholesky, logdet, inverse, solve (cl/linalg.cl).
 *
 * Cholesky, CPU-shaped variant:
 *  - n <= 192 (NSMALL_CPU): one kernel. Batches of >= 32 matrices: 16
 *    matrices per work-item, one per float16 lane (wbcl_chol_soa); smaller
 *    batches: one matrix per work-item (wbcl_chol_cm).
 *  - larger n, one matrix: left-looking blocked, nb = 128, with L kept
 *    packed (chol_packed, below: the update is a register-tile GEMM on
 *    packed panels that the factor kernel and the fused update + panel
 *    kernel write as they go).
 *  - larger n, batches: left-looking blocked, block size nb = 128: for each block
 *    column j (kb = min(nb, n - j) columns)
 *      1. T = -L[j:n, 0:j] L[j:j+kb, 0:j]^T     one wbcl_gemm_strided call, exactly
 *                                             the lower-triangle flops (the product
 *                                             goes to scratch: the GEMM forbids C
 *                                             sharing A's buffer)
 *      2. L[j:j+kb, j:j+kb] = chol(A + T)      wbcl_chol_cm, which also inverts
 *                                             the block: V = L_jj^-T
 *      3. L[j+kb:n, j:j+kb] = (A + T) V        wbcl_chol_panel: a GEMM-like kernel
 *                                             with a triangular right factor
 * Cholesky, GPU-shaped variant (chol_gpu; the kernels' layout in cl/linalg.cl):
 *  - n <= 64 (GPU_SMALL), any batch: one launch, one work-group of 32 (n <= 32)
 *    or 64 work-items per matrix, a row per work-item in registers, one
 *    barrier per column, the matrix in and L out through a local tile by
 *    whole rows (wbcl_chol_s32_g / wbcl_chol_s64_g: chol_small_g); they
 *    write every matrix's pivot status, so the status is not cleared first.
 *  - n <= 128 (LA_GNB), any batch: one launch, one work-group of 16 x 16 per
 *    matrix, the lower triangle packed in local memory, right-looking by
 *    strips of 16 columns (wbcl_chol_blk_g).
 *  - larger n, by default: right-looking blocked, nb = 128, the lookahead form
 *    (chol_gpu_ahead): L = tril(A) once, the first diagonal block
 *    (wbcl_chol_r128_g: a row per work-item, one barrier per column) and the
 *    panel below it (wbcl_chol_trsm_g); then per block column three launches:
 *    the trailing update's tiles in the next block column, the next diagonal
 *    block, and the next panel's solve in the same launch as the rest of the
 *    update (wbcl_chol_upd_g modes 0 and 1, wbcl_chol_r128_g), so that the
 *    solve overlaps the bulk of the update; that bulk goes by 128 x 128 tiles
 *    (wbcl_chol_upd128_g) where it has at least GPU_UPD128_MIN rows; with
 *    WBCL_LA_PANEL_INV=1 the solve is a product by the next diagonal block's
 *    inverse (wbcl_chol_inv128_g; see chol_gpu_ahead).
 *  - the syrk_g form (WBCL_LA_LOOKAHEAD=0, or where the GEMM rounds below are
 *    on): L = tril(A) once, the first
 *    diagonal block (wbcl_chol_blk_g, one work-group per matrix), then per
 *    block column the panel below it (wbcl_chol_trsm_g, 16 rows per
 *    work-group) and the whole trailing lower triangle in one launch
 *    (wbcl_chol_syrk_g, 64 x 64 tiles), whose first work-group also factors
 *    the next diagonal block once it has updated it, while the other
 *    work-groups update the rest (look-ahead of one block: the one serial
 *    step of a round hides behind the round's largest launch):
 *    n / 128 rounds of two launches, batched over matrices.
 *    Rounds with at least GPU_GEMM_MIN trailing rows (WBCL_LA_GEMM_MIN overrides)
 *    instead copy the panel to scratch (wbcl_gemm_strided forbids C sharing A's
 *    buffer), update the whole trailing square through the context's GEMM
 *    (twice syrk_g's flops at the GEMM's rate), factor the next diagonal block
 *    in a launch of its own (wbcl_chol_blk_g), and the strict upper triangle
 *    is zeroed once at the end (wbcl_la_zero_upper_g); smaller rounds keep
 *    wbcl_chol_syrk_g (lower triangle only, in place, the factor overlapped).
 * Batches go through the same steps.
 * Inverse, GPU-shaped variant (inverse_gpu): A^-1 = W^T W with W = L^-1 built
 * by blocks of the factorization's nb: the diagonal blocks' inverses in one
 * launch, two GEMMs per block row, then W^T W in one launch of lower tiles
 * written with their mirrors; no per-column launches, 4 n^3 / 3 flops.
 * Solve (and, on CPUs, inverse = solve with B = I): L into scratch, then forward and
 * backward substitution by block rows, each a GEMM with the finished rows plus
 * the diagonal block (multiplication by V on CPUs, wbcl_trsm_inv; substitution
 * on GPUs). For the inverse the forward pass is right-looking and touches only
 * the nonzeros of L^-1, the backward pass only the lower triangle, which is
 * then mirrored: n^3 flops in all, like LAPACK's potrf + potri, and an exactly
 * symmetric result.
 * Non-SPD input: the factor kernels record the first bad pivot per matrix;
 * every call reads that status back (one blocking read at its end).
 * Block sizes and crossovers were measured: perf/RESULTS.md, "Cholesky" and
 * "Dense SPD linear algebra (issue 5)". */
#ifdef WBCL_LA_TRACE
#define _POSIX_C_SOURCE 200809L /* clock_gettime for the development trace */
#endif
#include "internal.h"
#include "wbcl/gemm.h"
#include "wbcl/linalg.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef WBCL_LA_TRACE
#include <time.h>
#endif

/* Scratch slots (0 and 1 belong to the packed GEMM). */
#define SLOT_S 4    /* L for logdet / inverse / solve: batch * n * n floats       */
#define SLOT_INFO 5 /* pivot status: 2 ints per matrix                            */
#define SLOT_W 6    /* wbcl_chol_cm's U = L^T rows and V blocks; wbcl_chol_soa's lanes */
#define SLOT_T 7    /* GEMM products of the blocked steps                         */

/* Measured on PoCL (perf/RESULTS.md, "Cholesky"):
 * SOA_MIN_BATCH: smallest batch for wbcl_chol_soa (16 matrices per work-item;
 *   from 32 on it was as fast or faster than one matrix per work-item).
 * NSMALL_CPU: largest n factored by one unblocked kernel (fewer launches beat
 *   blocking up to about 200 for small batches); at most LA_NBMAX (256).
 * NB_CPU: block size of the blocked path (64 ... 256 within 15%, 128 best).
 * NB_GPU: must equal LA_WG_NB of cl/linalg.cl (local memory of 64 x 65 floats). */
#define SOA_MIN_BATCH 32
#define NSMALL_CPU 192
#define NB_CPU 128
#define NB_GPU 64
#define GPU_WG 64
/* GPU Cholesky: largest block of one work-group (LA_GNB of cl/linalg.cl: its
 * packed lower triangle fills 33 KB of local memory, within the 48 KB NVIDIA's
 * OpenCL gives a work-group), which is also the block size of the blocked path,
 * and the work-group shape (LA_GT x LA_GT) and update tile (LA_ST) of its kernels. */
#define GPU_NB 128
#define GPU_T 16
#define GPU_ST 64
/* GPU Cholesky: largest n of the one-row-per-work-item kernels (wbcl_chol_s32_g,
 * wbcl_chol_s64_g: a work-group of 32 or 64 per matrix). */
#define GPU_SMALL 64
/* GPU Cholesky, lookahead form with WBCL_LA_PANEL_INV=1: floats of scratch per matrix for the
 * diagonal block's inverse W (GPU_NB^2) and its doubling products (4096; cl/linalg.cl,
 * wbcl_chol_inv128_g). */
#define GPU_INV_FLOATS (GPU_NB * GPU_NB + 4096)
/* GPU Cholesky: rounds whose trailing block has at least GPU_GEMM_MIN rows do
 * the trailing update through the context's GEMM (CLBlast or the tiled
 * kernel: 24-33 TFLOP/s on an H200 at 2048-4096) on the whole square, then
 * factor the next diagonal block in a launch of its own; smaller ones keep
 * wbcl_chol_syrk_g (lower triangle only, the next diagonal block factored by
 * its first work-group). Off by default: measured on an NVIDIA H200 (perf/RESULTS.md,
 * 2026-11-27, second device call), one 4096 Cholesky took 8.05 ms with 1024,
 * 8.01 ms with 0 (every round) and 6.57 ms with none (syrk_g overlaps the next
 * factor; the GEMM rounds serialize it). The environment variable
 * WBCL_LA_GEMM_MIN sets it (0: every round through the GEMM). */
#define GPU_GEMM_MIN ((size_t)-1)
/* GPU Cholesky, lookahead form: the rest of a round's trailing update goes by 128 x 128 tiles
 * (wbcl_chol_upd128_g: 8 x 8 outputs per work-item) where it has at least GPU_UPD128_MIN
 * rows (from 2048 rows on there are at least 136 such tiles, one per compute unit of the
 * largest GPUs), else by 64 x 64 tiles (mode 1: four times as many work-groups for the
 * smaller blocks). The environment variable WBCL_LA_UPD128_MIN sets it (0: always the
 * 128 tiles; a huge value: never), for A/B measurements. Measured on an NVIDIA H200
 * (perf/RESULTS.md, seventh session): n = 4096 took 4.37-4.46 ms at every threshold. The
 * update is not on the factorization's chain: each round waits for the next diagonal block's
 * factor and the next panel's solve, 128 barrier steps each. */
#define GPU_UPD128_MIN ((size_t)2048)
/* Panel height of the packed L and block of wbcl_chol_upd (LA_UC of
 * cl/linalg.cl). */
#define PK_UC 32
_Static_assert(NB_CPU % PK_UC == 0, "the packed path needs block columns starting on panel boundaries");
/* Widest block column wbcl_chol_upd_panel holds (LA_FNB of cl/linalg.cl). */
#define PK_FNB 128
_Static_assert(NB_CPU <= PK_FNB, "wbcl_chol_upd_panel holds block columns of up to 128");

typedef struct la_mat { cl_mem mem; size_t off, stride, ld; } la_mat;

/* Row stride of wbcl_chol_cm's scratch rows and of V (strips run up to 31 past roundup(kb, 32)). */
static size_t ldw_for(size_t kb) { return (kb + 31) / 32 * 32 + 64; }

static la_mat mat(cl_mem mem, size_t off, size_t stride, size_t ld)
{
    la_mat m = {mem, off, stride, ld};
    return m;
}

/* A tensor header for a raw buffer (scratch), so it can be a GEMM operand. */
static wbcl_tensor view(wbcl_context *ctx, cl_mem mem, size_t numel)
{
    wbcl_tensor t;
    memset(&t, 0, sizeof t);
    t.ctx = ctx;
    t.mem = mem;
    t.ndim = 1;
    t.shape[0] = numel;
    t.numel = numel;
    t.dtype = WBCL_F32;
    return t;
}

typedef struct la_run {
    wbcl_context *ctx;
    const char *op;
    int gpu;
    size_t n, batch, nb; /* nb: the CPU block size; on GPUs the block size of the solves */
    size_t nbf;          /* GPU: block size of the factorization (GPU_NB) */
    cl_mem info;
    /* CPU: scratch of wbcl_chol_cm: per matrix kb rows of U = L^T (ldw), then
     * the inverses V = L_JJ^-T of the diagonal blocks: one block (the panel
     * needs it right away) or, with keep_v, every block (for the solves). */
    cl_mem W;
    size_t ldw, nvblk;
    int keep_v;
    /* Wait for each command before enqueueing the next (CPU devices): on PoCL
     * a queue of dependent commands ran 1.2-4x slower than the same commands
     * issued one at a time whenever the machine had other load (the worker
     * threads' wake-ups between commands), and never faster when idle;
     * perf/RESULTS.md, section Cholesky. */
    int sync_each;
    /* CPU blocked path: the packed copy of L that wbcl_chol_cm and
     * wbcl_chol_panel also write (pack != 0); see chol_packed */
    cl_mem P;
    size_t stride_p;
    int pack;
    /* GPU: smallest rest of a trailing update done by 128 x 128 tiles (GPU_UPD128_MIN) */
    size_t upd128_min;
    /* GPU: smallest trailing block updated through the GEMM (GPU_GEMM_MIN) */
    size_t gemm_min;
    /* GPU: the lookahead form of the blocked factorization (chol_gpu_ahead); 0: the
     * syrk_g form (environment WBCL_LA_LOOKAHEAD=0, for A/B measurements) */
    int ahead;
    /* GPU, lookahead form: each round's panel as X W^T with W = L11^-1 (wbcl_chol_inv128_g,
     * then wbcl_chol_upd_g mode 2) instead of the solve (environment WBCL_LA_PANEL_INV=1) */
    int panel_inv;
} la_run;

#ifdef WBCL_LA_TRACE /* development: A/B switches and time per phase (factor, panel, update, solve, -) */
double wbcl__la_trace_acc[5]; /* wall time, ms */
double wbcl__la_trace_kns[5]; /* kernel time, ms (with wbcl_context_set_timing) */
int wbcl__la_old;             /* 1: the CPU path through the packed GEMM */
size_t wbcl__la_nb;           /* nonzero: the CPU block size */
double wbcl__la_trace_cpu[5]; /* process CPU time, ms */
static double la_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + 1e-6 * (double)ts.tv_nsec;
}
#endif

/* Offset and batch stride of V for the diagonal block starting at row j. */
static la_mat vblock(const la_run *r, size_t j)
{
    const size_t per = r->nb * r->ldw, ublock = r->batch * r->nb * r->ldw;
    const size_t t = r->keep_v ? j / r->nb : 0;
    return mat(r->W, ublock + t * per, r->nvblk * per, r->ldw);
}

/* Allocates the CPU scratch for blocks of up to nb rows. */
static wbcl_status alloc_w(la_run *r)
{
    if (r->gpu) return WBCL_SUCCESS;
    r->ldw = ldw_for(r->nb);
    r->nvblk = r->keep_v ? (r->n + r->nb - 1) / r->nb : 1;
    size_t floats = r->batch * r->nb * r->ldw * (1 + r->nvblk);
    return wbcl__scratch(r->ctx, SLOT_W, floats * sizeof(float), &r->W);
}

static wbcl_status set_mat(la_run *r, wbcl_kern *k, cl_uint idx, la_mat m)
{
    cl_ulong off = m.off, stride = m.stride;
    cl_uint ld = (cl_uint)m.ld;
    WBCL_ARG(r->ctx, k, idx, m.mem);
    WBCL_ARG(r->ctx, k, idx + 1, off);
    WBCL_ARG(r->ctx, k, idx + 2, stride);
    WBCL_ARG(r->ctx, k, idx + 3, ld);
    return WBCL_SUCCESS;
}

static wbcl_status set_u(la_run *r, wbcl_kern *k, cl_uint idx, la_mat x, const la_mat *u, size_t ucols)
{
    cl_uint has = u ? (cl_uint)ucols : 0;
    wbcl_status st = set_mat(r, k, idx, u ? *u : x);
    if (st) return st;
    WBCL_ARG(r->ctx, k, idx + 4, has);
    return WBCL_SUCCESS;
}

/* P, stride_p, n, pack: the packed-L arguments of wbcl_chol_cm. */
static wbcl_status set_pack(la_run *r, wbcl_kern *k, cl_uint idx)
{
    cl_mem P = r->pack ? r->P : r->info; /* any valid buffer when not packing */
    cl_ulong sp = r->stride_p;
    cl_uint n_ = (cl_uint)r->n, pk = (cl_uint)r->pack;
    WBCL_ARG(r->ctx, k, idx, P);
    WBCL_ARG(r->ctx, k, idx + 1, sp);
    WBCL_ARG(r->ctx, k, idx + 2, n_);
    WBCL_ARG(r->ctx, k, idx + 3, pk);
    return WBCL_SUCCESS;
}

static wbcl_status kernel(la_run *r, const char *name, wbcl_kern **k)
{
    return wbcl__kernel(r->ctx, "linalg", NULL, name, k);
}

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/* Enqueues a kernel; on CPU devices then waits for it (see sync_each). */
static wbcl_status la_launch(la_run *r, int phase, wbcl_kern *k, cl_uint dims, const size_t *g, const size_t *l)
{
#ifdef WBCL_LA_TRACE
    clFinish(r->ctx->queue);
    uint64_t t0 = wbcl__now_ns(), k0 = r->ctx->kernel_ns;
    double c0 = la_cpu_ms();
#endif
    wbcl_status st = wbcl__launch(r->ctx, k, dims, g, l);
    if (!st && r->sync_each) clFinish(r->ctx->queue);
#ifdef WBCL_LA_TRACE
    clFinish(r->ctx->queue);
    wbcl__la_trace_acc[phase] += (double)(wbcl__now_ns() - t0) * 1e-6;
    wbcl__la_trace_kns[phase] += (double)(r->ctx->kernel_ns - k0) * 1e-6;
    wbcl__la_trace_cpu[phase] += la_cpu_ms() - c0;
#else
    (void)phase;
#endif
    return st;
}


static wbcl_status prefix_fail(la_run *r, wbcl_status st, const char *what)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", wbcl_context_last_error(r->ctx));
    return wbcl__fail(r->ctx, st, "%s: %s: %s", r->op, what, msg);
}

/* ---- kernel launches ---------------------------------------------------------- */
/* Factor the kb x kb blocks at in (+ u) into out; zero the strict upper part
 * of their rows up to column kb + zcols. */
static wbcl_status factor_block(la_run *r, la_mat in, const la_mat *u, la_mat out, size_t kb, size_t zcols,
                                size_t pivot_base, int want_inv)
{
    wbcl_kern *k;
    wbcl_status st = kernel(r, "wbcl_chol_cm", &k);
    if (st) return st;
    cl_uint kb_ = (cl_uint)kb, batch_ = (cl_uint)r->batch, zc = (cl_uint)zcols, pb = (cl_uint)pivot_base;
    if ((st = set_mat(r, k, 0, in)) || (st = set_u(r, k, 4, in, u, 1)) || (st = set_mat(r, k, 9, out))) return st;
    cl_uint ldw_ = (cl_uint)r->ldw, inv = (cl_uint)want_inv;
    WBCL_ARG(r->ctx, k, 13, r->W);
    WBCL_ARG(r->ctx, k, 14, ldw_);
    WBCL_ARG(r->ctx, k, 15, kb_);
    WBCL_ARG(r->ctx, k, 16, batch_);
    WBCL_ARG(r->ctx, k, 17, zc);
    WBCL_ARG(r->ctx, k, 18, r->info);
    WBCL_ARG(r->ctx, k, 19, pb);
    WBCL_ARG(r->ctx, k, 20, inv);
    if ((st = set_mat(r, k, 21, vblock(r, pivot_base)))) return st;
    if ((st = set_pack(r, k, 25))) return st;
    /* work-groups of one item: a handful of matrices still spreads over all
     * cores, and PoCL compiles the kernel for one local size only */
    size_t global = r->batch, local = 1;
    return la_launch(r, 0, k, 1, &global, &local);
}

/* Panel below a factored block (wbcl_chol_panel, CPU only) or triangular
 * solve of a block row (wbcl_trsm_inv / wbcl_trsm_cols_wg): same argument
 * layout. `cols` is the panel's row count or the number of right-hand-side
 * columns. */
static wbcl_status tri_kernel(la_run *r, int solve, la_mat d, la_mat x, const la_mat *u, size_t ucols, la_mat y,
                              size_t kb, size_t cols, int upper, size_t row0, size_t col0)
{
    const char *name = solve ? (r->gpu ? "wbcl_trsm_cols_wg" : "wbcl_trsm_inv")
                             : "wbcl_chol_panel";
    wbcl_kern *k;
    wbcl_status st = kernel(r, name, &k);
    if (st) return st;
    if ((st = set_mat(r, k, 0, d)) || (st = set_mat(r, k, 4, x)) || (st = set_u(r, k, 8, x, u, ucols)) ||
        (st = set_mat(r, k, 13, y)))
        return st;
    cl_uint kb_ = (cl_uint)kb, cols_ = (cl_uint)cols, batch_ = (cl_uint)r->batch, up = (cl_uint)upper;
    WBCL_ARG(r->ctx, k, 17, kb_);
    WBCL_ARG(r->ctx, k, 18, cols_);
    WBCL_ARG(r->ctx, k, 19, batch_);
    if (solve) WBCL_ARG(r->ctx, k, 20, up);
    if (!solve && !r->gpu) {
        /* the CPU panel also writes its rows (at row0, col0 of L) into the packed copy */
        cl_mem P = r->pack ? r->P : r->info;
        cl_ulong sp = r->stride_p;
        cl_uint n_ = (cl_uint)r->n, r0 = (cl_uint)row0, c0 = (cl_uint)col0, pk = (cl_uint)r->pack;
        WBCL_ARG(r->ctx, k, 20, P);
        WBCL_ARG(r->ctx, k, 21, sp);
        WBCL_ARG(r->ctx, k, 22, n_);
        WBCL_ARG(r->ctx, k, 23, r0);
        WBCL_ARG(r->ctx, k, 24, c0);
        WBCL_ARG(r->ctx, k, 25, pk);
    }
    if (r->gpu) {
        size_t local[2] = {GPU_WG, 1}, global[2] = {cols, r->batch};
        return la_launch(r, 1 + 2 * solve, k, 2, global, local);
    }
    size_t chunks = ceil_div(cols, solve ? 32 : 8);
    size_t local[2] = {1, 1}, global[2] = {chunks, r->batch};
    return la_launch(r, 1 + 2 * solve, k, 2, global, local);
}

/* C = alpha op(A) op(B) + beta C through wbcl_gemm_strided, batched over r->batch. */
static wbcl_status gemm_ab(la_run *r, float alpha, int ta, size_t m, size_t n, size_t k, const wbcl_tensor *A,
                           size_t off_a, size_t lda, size_t sa, int tb, const wbcl_tensor *B, size_t off_b,
                           size_t ldb, size_t sb, float beta, wbcl_tensor *C, size_t off_c, size_t ldc, size_t sc)
{
    wbcl_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.ta = ta ? WBCL_TRANS : WBCL_NO_TRANS;
    d.tb = tb ? WBCL_TRANS : WBCL_NO_TRANS;
    d.m = m;
    d.n = n;
    d.k = k;
    d.batch = r->batch;
    d.alpha = alpha;
    d.beta = beta;
    d.off_a = off_a;
    d.lda = lda;
    d.stride_a = sa;
    d.off_b = off_b;
    d.ldb = ldb;
    d.stride_b = sb;
    d.off_c = off_c;
    d.ldc = ldc;
    d.stride_c = sc;
#ifdef WBCL_LA_TRACE
    clFinish(r->ctx->queue);
    uint64_t t0 = wbcl__now_ns();
#endif
    wbcl_status st = wbcl_gemm_strided(r->ctx, &d, A, B, C);
    if (!st && r->sync_each) clFinish(r->ctx->queue);
#ifdef WBCL_LA_TRACE
    clFinish(r->ctx->queue);
    wbcl__la_trace_acc[2] += (double)(wbcl__now_ns() - t0) * 1e-6;
#endif
    return st ? prefix_fail(r, st, "blocked update (GEMM)") : WBCL_SUCCESS;
}

/* C = -op(A) op(B) + beta C */
static wbcl_status gemm_b(la_run *r, int ta, size_t m, size_t n, size_t k, const wbcl_tensor *A, size_t off_a,
                          size_t lda, size_t sa, int tb, const wbcl_tensor *B, size_t off_b, size_t ldb, size_t sb,
                          float beta, wbcl_tensor *C, size_t off_c, size_t ldc, size_t sc)
{
    return gemm_ab(r, -1.0f, ta, m, n, k, A, off_a, lda, sa, tb, B, off_b, ldb, sb, beta, C, off_c, ldc, sc);
}

static wbcl_status gemm(la_run *r, int ta, size_t m, size_t n, size_t k, const wbcl_tensor *A, size_t off_a,
                        size_t lda, size_t sa, int tb, const wbcl_tensor *B, size_t off_b, size_t ldb, size_t sb,
                        wbcl_tensor *C, size_t off_c, size_t ldc, size_t sc)
{
    return gemm_b(r, ta, m, n, k, A, off_a, lda, sa, tb, B, off_b, ldb, sb, 0.0f, C, off_c, ldc, sc);
}

/* Floats per matrix of the packed copy of L (cl/linalg.cl, la_pack_pad):
 * PK_UC-row panels, each n long. */
static size_t packed_floats(size_t n) { return ceil_div(n, PK_UC) * PK_UC * n; }

/* ---- scratch ------------------------------------------------------------------- */
static int use_soa(const la_run *r)
{
    return !r->gpu && r->n <= r->nb && !r->keep_v && r->batch >= SOA_MIN_BATCH;
}

/* GPU inverse: floats per matrix of the diagonal blocks' inverses (nb x nb each). */
static size_t inv_d_floats(const la_run *r) { return ceil_div(r->n, r->nbf) * r->nbf * r->nbf; }

/* GPU: the factorization runs the lookahead form with the panels through the diagonal
 * blocks' inverses (chol_gpu_ahead; the condition chol_gpu uses, and WBCL_LA_PANEL_INV=1). */
static int ahead_inv(const la_run *r)
{
    return r->gpu && r->panel_inv && r->ahead && r->gemm_min == GPU_GEMM_MIN && r->n > r->nbf;
}

/* Grows every scratch buffer the call will use (the Cholesky, and the solve
 * with rc right-hand sides when rc > 0) before anything is enqueued, so that
 * an allocation failure leaves the outputs untouched. */
static wbcl_status reserve(la_run *r, size_t rc, int inverse)
{
    const size_t n = r->n, nb = r->nb;
    cl_mem m;
    wbcl_status st = WBCL_SUCCESS;
    if (use_soa(r))
        st = wbcl__scratch(r->ctx, SLOT_W, ceil_div(r->batch, 16) * 16 * (n * (n + 1) / 2 + 16) * sizeof(float), &m);
    else
        st = alloc_w(r);
    size_t t = n > nb && !r->gpu ? (r->batch == 1 ? packed_floats(n) : n * nb) : 0;
    if (r->gpu && n > r->nbf && n - r->nbf >= r->gemm_min) t = (n - r->nbf) * r->nbf; /* the GEMM's panel copy */
    if (rc && n > nb) {
        const size_t ts = inverse ? n * n : nb * rc;
        if (ts > t) t = ts;
    }
    if (r->gpu && inverse) { /* inverse_gpu: W = L^-1 in SLOT_T, the diagonal blocks' inverses in SLOT_W */
        if (n * n > t) t = n * n;
        if (!st) st = wbcl__scratch(r->ctx, SLOT_W, r->batch * inv_d_floats(r) * sizeof(float), &m);
    }
    if (!st && t) st = wbcl__scratch(r->ctx, SLOT_T, r->batch * t * sizeof(float), &m);
    if (!st && ahead_inv(r)) st = wbcl__scratch(r->ctx, SLOT_W, r->batch * GPU_INV_FLOATS * sizeof(float), &m);
    /* the GEMM the GPU path calls part-way (update rounds, the blocked inverse): the tiled backend's
     * device limits are checked now, so that a refusal leaves the outputs untouched */
    if (!st && r->gpu && n > r->nbf && (inverse || n - r->nbf >= r->gemm_min) &&
        r->ctx->gemm_backend == WBCL_GEMM_TILED)
        st = wbcl__gemm_tiled_fits(r->ctx, r->op);
    return st;
}

/* ---- the algorithms ------------------------------------------------------------ */
/* Many small matrices (CPU): 16 per work-item. */
static wbcl_status chol_soa(la_run *r, cl_mem A, cl_mem L)
{
    const size_t n = r->n, groups = ceil_div(r->batch, 16);
    wbcl_kern *k;
    cl_mem W;
    wbcl_status st = kernel(r, "wbcl_chol_soa", &k);
    if (!st) st = wbcl__scratch(r->ctx, SLOT_W, groups * 16 * (n * (n + 1) / 2 + 16) * sizeof(float), &W); /* reserved */
    if (st) return st;
    cl_uint n_ = (cl_uint)n, b_ = (cl_uint)r->batch;
    if ((st = set_mat(r, k, 0, mat(A, 0, n * n, n))) || (st = set_mat(r, k, 4, mat(L, 0, n * n, n)))) return st;
    WBCL_ARG(r->ctx, k, 8, W);
    WBCL_ARG(r->ctx, k, 9, n_);
    WBCL_ARG(r->ctx, k, 10, b_);
    WBCL_ARG(r->ctx, k, 11, r->info);
    size_t global = groups, local = 1;
    return la_launch(r, 0, k, 1, &global, &local);
}

/* CPU, n > nb: left-looking blocked with L kept packed. Once: the zeros
 * right of the diagonal blocks (wbcl_la_zero_right). For each block column j
 * (kb columns):
 *   1. S11 = A[j:j+kb, j:j+kb] - L[j:j+kb, 0:j] L[j:j+kb, 0:j]^T   wbcl_chol_upd
 *   2. L[j:j+kb, j:j+kb] = chol(S11), V = L11^-T                    wbcl_chol_cm
 *   3. L[j+kb:n, j:j+kb] = (A[j+kb:n, j:j+kb]
 *                           - L[j+kb:n, 0:j] L[j:j+kb, 0:j]^T) V    wbcl_chol_upd_panel
 * (step 3 is the update and the panel of those rows in one pass: S21 stays
 * in private memory). Steps 2 and 3 also write their results into the packed
 * copy of L (a separate packing pass read L back at a stride of n floats and
 * cost 10-15% of the time at n = 2048). The packed GEMM would repack
 * L[j:n, 0:j] at every step (n^3/(6 nb) floats in all); here every element
 * of L is packed once. */
static wbcl_status chol_packed(la_run *r, cl_mem A, cl_mem L)
{
    const size_t n = r->n, nn = n * n, nb = r->nb;
    const size_t per = packed_floats(n);
    cl_mem P;
    wbcl_kern *kup, *kz, *kup_panel;
    wbcl_status st = wbcl__scratch(r->ctx, SLOT_T, r->batch * per * sizeof(float), &P);
    if (!st) st = kernel(r, "wbcl_chol_upd", &kup);
    if (!st) st = kernel(r, "wbcl_la_zero_right", &kz);
    if (!st) st = kernel(r, "wbcl_chol_upd_panel", &kup_panel);
    if (st) return st;
    if (nb > PK_FNB || nb % PK_UC) /* only a development override (la_trace) can get here */
        return wbcl__fail(r->ctx, WBCL_ERROR_INVALID_ARGUMENT,
                          "%s: block size %zu (the packed path takes multiples of %d up to %d)", r->op, nb, PK_UC,
                          PK_FNB);
    r->P = P;
    r->stride_p = per;
    const cl_ulong stride_p = per, snn = nn;
    const cl_uint n_ = (cl_uint)n, nb_ = (cl_uint)nb, batch_ = (cl_uint)r->batch;
    /* L's zeros right of the diagonal blocks, all at once on every core (the
     * factor kernel, one work-item, writes those of its own block only).
     * L may be A: nothing reads A's upper triangle there. */
    WBCL_ARG(r->ctx, kz, 0, L);
    WBCL_ARG(r->ctx, kz, 1, n_);
    WBCL_ARG(r->ctx, kz, 2, nb_);
    WBCL_ARG(r->ctx, kz, 3, batch_);
    {
        size_t g[2] = {n, r->batch}, l[2] = {1, 1};
        if ((st = la_launch(r, 4, kz, 2, g, l))) return st;
    }
    for (size_t j = 0; j < n && !st; j += nb) {
        const size_t kb = n - j < nb ? n - j : nb, rows = n - j - kb;
        const cl_uint j_ = (cl_uint)j, kb_ = (cl_uint)kb;
        const cl_mem in = j ? L : A; /* after the update, S lies in L */
        /* the update here covers the block's own rows only (its ncb (ncb + 1)
         * / 2 blocks on and below the diagonal); the rows below get theirs
         * in wbcl_chol_upd_panel, after the factor */
        const size_t ncb = ceil_div(kb, PK_UC);
        if (j > 0) {
            WBCL_ARG(r->ctx, kup, 0, P);
            WBCL_ARG(r->ctx, kup, 1, stride_p);
            WBCL_ARG(r->ctx, kup, 2, A);
            WBCL_ARG(r->ctx, kup, 3, snn);
            WBCL_ARG(r->ctx, kup, 4, L);
            WBCL_ARG(r->ctx, kup, 5, snn);
            WBCL_ARG(r->ctx, kup, 6, n_);
            WBCL_ARG(r->ctx, kup, 7, j_);
            WBCL_ARG(r->ctx, kup, 8, kb_);
            WBCL_ARG(r->ctx, kup, 9, batch_);
            size_t g[2] = {ncb * (ncb + 1) / 2, r->batch}, l[2] = {1, 1};
            st = la_launch(r, 2, kup, 2, g, l);
        }
        r->pack = rows > 0; /* the last block column is never read back */
        if (!st)
            st = factor_block(r, mat(in, j * n + j, nn, n), NULL, mat(L, j * n + j, nn, n), kb, 0, j,
                              rows > 0 || r->keep_v);
        if (!st && rows) {
            const la_mat v = vblock(r, j);
            const cl_ulong off_v = v.off, stride_v = v.stride;
            const cl_uint ldv = (cl_uint)v.ld;
            WBCL_ARG(r->ctx, kup_panel, 0, P);
            WBCL_ARG(r->ctx, kup_panel, 1, stride_p);
            WBCL_ARG(r->ctx, kup_panel, 2, A);
            WBCL_ARG(r->ctx, kup_panel, 3, snn);
            WBCL_ARG(r->ctx, kup_panel, 4, L);
            WBCL_ARG(r->ctx, kup_panel, 5, snn);
            WBCL_ARG(r->ctx, kup_panel, 6, n_);
            WBCL_ARG(r->ctx, kup_panel, 7, j_);
            WBCL_ARG(r->ctx, kup_panel, 8, kb_);
            WBCL_ARG(r->ctx, kup_panel, 9, batch_);
            WBCL_ARG(r->ctx, kup_panel, 10, v.mem);
            WBCL_ARG(r->ctx, kup_panel, 11, off_v);
            WBCL_ARG(r->ctx, kup_panel, 12, stride_v);
            WBCL_ARG(r->ctx, kup_panel, 13, ldv);
            size_t g[2] = {ceil_div(rows, PK_UC), r->batch}, l[2] = {1, 1};
            st = la_launch(r, 1, kup_panel, 2, g, l);
        }
    }
    r->pack = 0;
    return st;
}

/* GPU: block size of the factorization: GPU_NB, or the largest multiple of 16
 * below it whose local memory fits in the device's, less 1 KB for what the
 * compiler adds: wbcl_chol_syrk_g (the packed triangle of the next diagonal
 * block, two column slots, two 16 x 68 tiles; the larger user) and
 * wbcl_chol_trsm_g (the packed triangle plus 16 rows). NVIDIA: 48 KB, 42.8 KB
 * used at 128; the 32 KB OpenCL 1.2 promises: 96. */
static size_t gpu_nb(const wbcl_context *ctx)
{
    const uint64_t have = ctx->info.local_mem_size;
    size_t nb = GPU_NB;
    for (; nb > 16; nb -= 16) {
        const size_t tri = nb * (nb + 1) / 2, trsm = tri + GPU_T * (nb + 1),
                     syrk = tri + 2 * GPU_NB + 2 * 16 * (GPU_ST + 4) + 2; /* + its column slots and tiles */
        if ((trsm > syrk ? trsm : syrk) * sizeof(float) + 1024 <= have) break;
    }
    return nb;
}

/* GPU: the GPU-shaped Cholesky (see the top of this file). */
static wbcl_status blk_g(la_run *r, wbcl_kern *k, cl_mem A, size_t off_a, cl_mem L, size_t off_l, size_t kb,
                         size_t zcols, size_t pivot_base)
{
    const size_t nn = r->n * r->n;
    cl_uint kb_ = (cl_uint)kb, zc = (cl_uint)zcols, pb = (cl_uint)pivot_base;
    wbcl_status st;
    if ((st = set_mat(r, k, 0, mat(A, off_a, nn, r->n))) || (st = set_mat(r, k, 4, mat(L, off_l, nn, r->n))))
        return st;
    WBCL_ARG(r->ctx, k, 8, kb_);
    WBCL_ARG(r->ctx, k, 9, zc);
    WBCL_ARG(r->ctx, k, 10, r->info);
    WBCL_ARG(r->ctx, k, 11, pb);
    if ((st = wbcl__set_arg(r->ctx, k, 12, kb * (kb + 1) / 2 * sizeof(float), NULL))) return st;
    size_t g[2] = {GPU_T * r->batch, GPU_T}, l[2] = {GPU_T, GPU_T};
    return la_launch(r, 0, k, 2, g, l);
}

/* GPU, n <= GPU_SMALL, any batch: one work-group of 32 or 64 work-items per
 * matrix, a row per work-item in registers (wbcl_chol_s32_g / _s64_g). */
static wbcl_status chol_small_g(la_run *r, cl_mem A, cl_mem L)
{
    const size_t n = r->n, nn = n * n, w = n <= 32 ? 32 : 64;
    wbcl_kern *k;
    wbcl_status st = kernel(r, w == 32 ? "wbcl_chol_s32_g" : "wbcl_chol_s64_g", &k);
    if (st) return st;
    if ((st = set_mat(r, k, 0, mat(A, 0, nn, n))) || (st = set_mat(r, k, 4, mat(L, 0, nn, n)))) return st;
    const cl_uint n_ = (cl_uint)n, pb = 0;
    WBCL_ARG(r->ctx, k, 8, n_);
    WBCL_ARG(r->ctx, k, 9, r->info);
    WBCL_ARG(r->ctx, k, 10, pb);
    size_t g = w * r->batch, l = w;
    return la_launch(r, 0, k, 1, &g, &l);
}

/* GPU, n > nb: the panel L[j+kb:n, j:j+kb] <- itself L11^-T (wbcl_chol_trsm_g, 16 rows a work-group). */
static wbcl_status trsm_g(la_run *r, wbcl_kern *k, cl_mem L, size_t j, size_t kb, size_t m)
{
    const size_t n = r->n;
    const cl_ulong off_d = j * n + j, off_x = (j + kb) * n + j, snn = n * n;
    const cl_uint n_ = (cl_uint)n, kb_ = (cl_uint)kb, m_ = (cl_uint)m;
    WBCL_ARG(r->ctx, k, 0, L);
    WBCL_ARG(r->ctx, k, 1, off_d);
    WBCL_ARG(r->ctx, k, 2, snn);
    WBCL_ARG(r->ctx, k, 3, n_);
    WBCL_ARG(r->ctx, k, 4, L);
    WBCL_ARG(r->ctx, k, 5, off_x);
    WBCL_ARG(r->ctx, k, 6, snn);
    WBCL_ARG(r->ctx, k, 7, n_);
    WBCL_ARG(r->ctx, k, 8, kb_);
    WBCL_ARG(r->ctx, k, 9, m_);
    wbcl_status st;
    if ((st = wbcl__set_arg(r->ctx, k, 10, kb * (kb + 1) / 2 * sizeof(float), NULL)) ||
        (st = wbcl__set_arg(r->ctx, k, 11, GPU_T * (kb + 1) * sizeof(float), NULL)))
        return st;
    size_t g[2] = {GPU_T * ceil_div(m, GPU_T), GPU_T * r->batch}, l[2] = {GPU_T, GPU_T};
    return la_launch(r, 1, k, 2, g, l);
}

/* GPU, a diagonal block of kb <= 128 rows at element offset off of every matrix, in
 * place (wbcl_chol_r128_g: a row per work-item), pivots numbered from pivot_base. */
static wbcl_status diag_r128(la_run *r, wbcl_kern *k, cl_mem L, size_t off, size_t kb, size_t pivot_base)
{
    const size_t n = r->n, nn = n * n;
    const cl_uint kb_ = (cl_uint)kb, pb = (cl_uint)pivot_base;
    wbcl_status st;
    if ((st = set_mat(r, k, 0, mat(L, off, nn, n))) || (st = set_mat(r, k, 4, mat(L, off, nn, n)))) return st;
    WBCL_ARG(r->ctx, k, 8, kb_);
    WBCL_ARG(r->ctx, k, 9, r->info);
    WBCL_ARG(r->ctx, k, 10, pb);
    size_t g = 128 * r->batch, l = 128;
    return la_launch(r, 0, k, 1, &g, &l);
}

/* GPU, lookahead form: the arguments of one round of wbcl_chol_upd_g / wbcl_chol_upd128_g (the
 * same list; mode, argument 8, is set per launch): P at off_p, C (m x m) at off_c, kb2 rows of the
 * next block, ntr work-groups for the next panel, W = its block's inverse (WBCL_LA_PANEL_INV) or L. */
static wbcl_status upd_args(la_run *r, wbcl_kern *k, cl_mem L, cl_ulong off_p, cl_ulong off_c, size_t m, size_t kb,
                            size_t kb2, size_t ntr, cl_mem Winv, cl_ulong stride_w)
{
    const size_t n = r->n;
    const cl_ulong snn = n * n;
    const cl_uint n_ = (cl_uint)n, m_ = (cl_uint)m, kb_ = (cl_uint)kb, kb2_ = (cl_uint)kb2, ntr_ = (cl_uint)ntr;
    /* local memory: the next panel's triangle and rows, or the update's two tiles */
    const size_t tri = kb2 * (kb2 + 1) / 2 + GPU_T * (kb2 + 1), tiles = 2 * 16 * (GPU_ST + 4);
    WBCL_ARG(r->ctx, k, 0, L);
    WBCL_ARG(r->ctx, k, 1, off_p);
    WBCL_ARG(r->ctx, k, 2, off_c);
    WBCL_ARG(r->ctx, k, 3, snn);
    WBCL_ARG(r->ctx, k, 4, n_);
    WBCL_ARG(r->ctx, k, 5, m_);
    WBCL_ARG(r->ctx, k, 6, kb_);
    WBCL_ARG(r->ctx, k, 7, kb2_);
    WBCL_ARG(r->ctx, k, 9, ntr_);
    wbcl_status st = wbcl__set_arg(r->ctx, k, 10, (tri > tiles ? tri : tiles) * sizeof(float), NULL);
    if (st) return st;
    WBCL_ARG(r->ctx, k, 11, Winv);
    WBCL_ARG(r->ctx, k, 12, stride_w);
    return WBCL_SUCCESS;
}

/* GPU, lookahead form with WBCL_LA_PANEL_INV: W = the inverse of the kb x kb diagonal block at
 * element offset off of every matrix (wbcl_chol_inv128_g; its other arguments set once). */
static wbcl_status inv_block(la_run *r, wbcl_kern *k, cl_ulong off, size_t kb)
{
    const cl_uint kb_ = (cl_uint)kb;
    WBCL_ARG(r->ctx, k, 1, off);
    WBCL_ARG(r->ctx, k, 4, kb_);
    size_t g = 256 * r->batch, l = 256;
    return la_launch(r, 1, k, 1, &g, &l);
}

/* GPU, n > nb: the lookahead form (the default). L = tril(A), the first diagonal
 * block factored (wbcl_chol_r128_g) and the panel below it solved
 * (wbcl_chol_trsm_g); then per block column j, with P the panel just solved and
 * m rows below the block:
 *   1. the trailing update's tiles in the next block column (kb2 columns: the
 *      next diagonal block and the panel below it)     wbcl_chol_upd_g mode 0
 *   2. the next diagonal block factored                 wbcl_chol_r128_g
 *   3. the panel below it solved, and in the same launch the rest of the
 *      trailing update by P                             wbcl_chol_upd_g mode 1
 *                           (wbcl_chol_upd128_g: the rest by 128 x 128 tiles)
 * so that a round's serial steps (the factor, 128 barrier steps; the solve,
 * 128 more) take two of its three launches and the solve overlaps the bulk of
 * the update, where the syrk_g form ran solve, then update (factoring in its
 * first work-group) one after the other.
 * With WBCL_LA_PANEL_INV=1 (r->panel_inv; off by default until a GPU run measures it) step 3's
 * solve becomes a product: after step 2, W = L11^-1 (wbcl_chol_inv128_g, one work-group per
 * matrix: 16 substitution steps, then three doubling levels), and step 3's first work-groups
 * compute the panel as X W^T (mode 2), each column independent, without the solve's chain of
 * 128 barrier steps. On an H200 the rounds were bound by that chain (perf/RESULTS.md, seventh
 * session: factor 53 us + solve ~50 us a round of ~137 us); expected: the solve's ~50 us
 * replaced by the inverse's launch on the chain and a product beside the update. The first
 * panel goes the same way (the inverse, then mode 2 with the panel's work-groups only). */
static wbcl_status chol_gpu_ahead(la_run *r, cl_mem L)
{
    const size_t n = r->n, nb = r->nbf;
    wbcl_kern *kr, *ktrsm, *kupd, *kupd128, *kinv = NULL;
    wbcl_status st;
    if ((st = kernel(r, "wbcl_chol_r128_g", &kr)) || (st = kernel(r, "wbcl_chol_trsm_g", &ktrsm)) ||
        (st = kernel(r, "wbcl_chol_upd_g", &kupd)) || (st = kernel(r, "wbcl_chol_upd128_g", &kupd128)) ||
        (r->panel_inv && (st = kernel(r, "wbcl_chol_inv128_g", &kinv))))
        return st;
    /* the panels through the inverses: W = L11^-1 per matrix in SLOT_W (reserved); else the
     * kernels' W argument is L, never read */
    cl_mem Winv = L;
    cl_ulong stride_w = 0;
    if (kinv) {
        if ((st = wbcl__scratch(r->ctx, SLOT_W, r->batch * GPU_INV_FLOATS * sizeof(float), &Winv))) return st;
        stride_w = GPU_INV_FLOATS;
        WBCL_ARG(r->ctx, kinv, 0, L);
        const cl_ulong snn_ = n * n;
        const cl_uint ld_ = (cl_uint)n;
        WBCL_ARG(r->ctx, kinv, 2, snn_);
        WBCL_ARG(r->ctx, kinv, 3, ld_);
        WBCL_ARG(r->ctx, kinv, 5, Winv);
        WBCL_ARG(r->ctx, kinv, 6, stride_w);
    }
    if ((st = diag_r128(r, kr, L, 0, nb, 0))) return st;
    if (kinv) { /* the first panel through the first block's inverse: wbcl_chol_upd_g mode 2 with the
                 * panel's work-groups only (C at 0, m = n, kb2 = nb) */
        const size_t ntr0 = ceil_div(n - nb, GPU_T);
        const cl_uint mode2 = 2;
        if ((st = inv_block(r, kinv, 0, nb)) || (st = upd_args(r, kupd, L, 0, 0, n, nb, nb, ntr0, Winv, stride_w)))
            return st;
        WBCL_ARG(r->ctx, kupd, 8, mode2);
        size_t g[2] = {GPU_T * ntr0, GPU_T * r->batch}, l[2] = {GPU_T, GPU_T};
        if ((st = la_launch(r, 1, kupd, 2, g, l))) return st;
    } else if ((st = trsm_g(r, ktrsm, L, 0, nb, n - nb))) {
        return st;
    }
    for (size_t j = 0; j < n; j += nb) {
        const size_t kb = n - j < nb ? n - j : nb, m = n - j - kb;
        if (!m) break;
        const size_t kb2 = m < nb ? m : nb, c2 = ceil_div(kb2, GPU_ST), nt = ceil_div(m, GPU_ST);
        const size_t m2 = m - kb2, ntr = ceil_div(m2, GPU_T), rest = m > c2 * GPU_ST ? m - c2 * GPU_ST : 0;
        /* the rest (rows and columns >= 64 c2) by 128 tiles (wbcl_chol_upd128_g) or 64 tiles (mode 1) */
        const int by128 = rest && rest >= r->upd128_min;
        const size_t ntr2 = ceil_div(rest, 2 * GPU_ST),
                     nrest = by128 ? ntr2 * (ntr2 + 1) / 2 : (nt - c2) * (nt - c2 + 1) / 2;
        size_t first = 0; /* tiles in tile columns < c2 */
        for (size_t tj = 0; tj < c2; tj++) first += nt - tj;
        const cl_ulong off_p = (j + kb) * n + j, off_c = (j + kb) * n + j + kb;
        /* the round's arguments, on each kernel it launches (wbcl_chol_upd128_g takes the same list) */
        if ((st = upd_args(r, kupd, L, off_p, off_c, m, kb, kb2, ntr, Winv, stride_w)) ||
            (by128 && (st = upd_args(r, kupd128, L, off_p, off_c, m, kb, kb2, ntr, Winv, stride_w))))
            return st;
        for (cl_uint mode = 0; mode < 2; mode++) {
            const size_t groups = mode ? ntr + nrest : first;
            if (!groups) continue;
            wbcl_kern *k = mode && by128 ? kupd128 : kupd;
            /* mode 2: mode 1 with the panel as X W^T (la_pmul_rows), W from wbcl_chol_inv128_g */
            const cl_uint kmode = mode && kinv && ntr ? 2u : mode;
            WBCL_ARG(r->ctx, k, 8, kmode);
            size_t g[2] = {GPU_T * groups, GPU_T * r->batch}, l[2] = {GPU_T, GPU_T};
            if ((st = la_launch(r, 2, k, 2, g, l))) return st;
            if (!mode && (st = diag_r128(r, kr, L, off_c, kb2, j + kb))) return st;
            /* W = the block's inverse, for the panel below it */
            if (!mode && kinv && ntr && (st = inv_block(r, kinv, off_c, kb2))) return st;
        }
    }
    return WBCL_SUCCESS;
}

static wbcl_status chol_gpu(la_run *r, cl_mem A, cl_mem L)
{
    const size_t n = r->n, nn = n * n, nb = r->nbf;
    wbcl_kern *kblk, *ktril, *ktrsm, *ksyrk, *kzu;
    if (r->ctx->info.max_work_group_size < GPU_T * GPU_T)
        return wbcl__fail(r->ctx, WBCL_ERROR_DEVICE_LIMIT,
                          "%s: the GPU-shaped Cholesky needs work-groups of %d work-items, the device allows %zu "
                          "(use the CPU-shaped variant)",
                          r->op, GPU_T * GPU_T, r->ctx->info.max_work_group_size);
    if (n <= GPU_SMALL) return chol_small_g(r, A, L);
    wbcl_status st = kernel(r, "wbcl_chol_blk_g", &kblk);
    if (st) return st;
    if (n <= nb) return blk_g(r, kblk, A, 0, L, 0, n, 0, 0);
    if ((st = kernel(r, "wbcl_la_tril_g", &ktril)) || (st = kernel(r, "wbcl_chol_trsm_g", &ktrsm)) ||
        (st = kernel(r, "wbcl_chol_syrk_g", &ksyrk)) || (st = kernel(r, "wbcl_la_zero_upper_g", &kzu)))
        return st;
    int any_gemm = 0;
    cl_mem P = NULL; /* the panel copy for the GEMM rounds (reserved) */
    if (n - nb >= r->gemm_min &&
        (st = wbcl__scratch(r->ctx, SLOT_T, r->batch * (n - nb) * nb * sizeof(float), &P)))
        return st;
    const cl_uint n_ = (cl_uint)n;
    const cl_ulong snn = nn;
    WBCL_ARG(r->ctx, ktril, 0, A);
    WBCL_ARG(r->ctx, ktril, 1, L);
    WBCL_ARG(r->ctx, ktril, 2, n_);
    {
        size_t g[3] = {ceil_div(n, 64) * 64, n, r->batch}, l[3] = {64, 1, 1};
        if ((st = la_launch(r, 4, ktril, 3, g, l))) return st;
    }
    if (r->ahead && r->gemm_min == GPU_GEMM_MIN) return chol_gpu_ahead(r, L);
    /* the syrk_g form: the first diagonal block; each update launch factors the next one */
    if ((st = blk_g(r, kblk, L, 0, L, 0, n < nb ? n : nb, 0, 0))) return st;
    for (size_t j = 0; j < n && !st; j += nb) {
        const size_t kb = n - j < nb ? n - j : nb, m = n - j - kb;
        if (!m) break;
        const size_t kb2 = m < nb ? m : nb;
        const cl_ulong off_x = (j + kb) * n + j, off_c = (j + kb) * n + j + kb;
        const cl_uint kb_ = (cl_uint)kb, m_ = (cl_uint)m, kb2_ = (cl_uint)kb2, pb = (cl_uint)(j + kb);
        if ((st = trsm_g(r, ktrsm, L, j, kb, m))) return st;
        if (m >= r->gemm_min) {
            /* L22 -= L21 L21^T through the GEMM, whose C may not share a buffer
             * with A or B: L21 first copied into scratch (m x kb per matrix);
             * the whole square is computed (the upper junk is zeroed at the
             * end), then the next diagonal block factored on its own */
            const size_t region[3] = {kb * sizeof(float), m, r->batch};
            const size_t so[3] = {j * sizeof(float), j + kb, 0}, dz[3] = {0, 0, 0};
            cl_int e = clEnqueueCopyBufferRect(r->ctx->queue, L, P, so, dz, region, n * sizeof(float),
                                               nn * sizeof(float), kb * sizeof(float), m * kb * sizeof(float), 0,
                                               NULL, NULL);
            if (e != CL_SUCCESS) return wbcl__cl_fail(r->ctx, e, "%s: copying the panel for the update", r->op);
            wbcl_tensor Pv = view(r->ctx, P, r->batch * m * kb), Lv = view(r->ctx, L, r->batch * nn);
            st = gemm_b(r, 0, m, m, kb, &Pv, 0, kb, m * kb, 1, &Pv, 0, kb, m * kb, 1.0f, &Lv, off_c, n, nn);
            if (!st) st = blk_g(r, kblk, L, off_c, L, off_c, kb2, 0, j + kb);
            any_gemm = 1;
            continue;
        }
        /* 64 x 64 tiles of the lower triangle; work-group 0 takes the three
         * that make up the next diagonal block (one where m <= 64) and then
         * factors it while the others update the rest */
        const size_t nt = ceil_div(m, GPU_ST), groups = nt * (nt + 1) / 2 - (m > GPU_ST ? 2 : 0);
        WBCL_ARG(r->ctx, ksyrk, 0, L);
        WBCL_ARG(r->ctx, ksyrk, 1, off_x);
        WBCL_ARG(r->ctx, ksyrk, 2, off_c);
        WBCL_ARG(r->ctx, ksyrk, 3, snn);
        WBCL_ARG(r->ctx, ksyrk, 4, n_);
        WBCL_ARG(r->ctx, ksyrk, 5, m_);
        WBCL_ARG(r->ctx, ksyrk, 6, kb_);
        WBCL_ARG(r->ctx, ksyrk, 7, kb2_);
        WBCL_ARG(r->ctx, ksyrk, 8, r->info);
        WBCL_ARG(r->ctx, ksyrk, 9, pb);
        if ((st = wbcl__set_arg(r->ctx, ksyrk, 10, kb2 * (kb2 + 1) / 2 * sizeof(float), NULL))) return st;
        {
            size_t g[2] = {GPU_T * groups, GPU_T * r->batch}, l[2] = {GPU_T, GPU_T};
            st = la_launch(r, 2, ksyrk, 2, g, l);
        }
    }
    if (!st && any_gemm) {
        WBCL_ARG(r->ctx, kzu, 0, L);
        WBCL_ARG(r->ctx, kzu, 1, n_);
        size_t g[3] = {ceil_div(n, 64) * 64, n, r->batch}, l[3] = {64, 1, 1};
        st = la_launch(r, 4, kzu, 3, g, l);
    }
    return st;
}

/* L = chol(A) for A, L with matrices at b*n*n (L may be A); Lt is L as a
 * tensor (GEMM operand). Initializes r->info. */
static wbcl_status cholesky(la_run *r, cl_mem A, const wbcl_tensor *Lt)
{
    const size_t n = r->n, nn = n * n, nb = r->nb;
    /* the GPU small-matrix kernels write every matrix's status: no clearing (one command less a call) */
    if (r->gpu && n <= GPU_SMALL) return chol_gpu(r, A, Lt->mem);
    int minus1 = -1;
    cl_int e = clEnqueueFillBuffer(r->ctx->queue, r->info, &minus1, sizeof minus1, 0, 2 * r->batch * sizeof(int), 0,
                                   NULL, NULL);
    if (e != CL_SUCCESS) return wbcl__cl_fail(r->ctx, e, "%s: clearing the pivot status", r->op);
    if (r->gpu) return chol_gpu(r, A, Lt->mem);
    if (use_soa(r)) return chol_soa(r, A, Lt->mem);
    wbcl_status st = alloc_w(r);
    if (st) return st;
    if (n <= nb) return factor_block(r, mat(A, 0, nn, n), NULL, mat(Lt->mem, 0, nn, n), n, 0, 0, r->keep_v);

    /* CPU, one matrix: L kept packed (1.1-1.25x faster than the path through
     * the packed GEMM below at n = 1024-2048, same-process A/B). Batches
     * keep the GEMM path: for ReduNet's 11 inverses of d = 784 the packed
     * path was 0-5% slower (the GEMM packs a whole batch per launch). */
    int packed = !r->gpu && r->batch == 1;
#ifdef WBCL_LA_TRACE
    if (wbcl__la_old) packed = 0;
#endif
    if (packed) return chol_packed(r, A, Lt->mem);
    /* (CPU batches; the GPU variant took chol_gpu above) */
    cl_mem T;
    st = wbcl__scratch(r->ctx, SLOT_T, r->batch * n * nb * sizeof(float), &T);
    if (st) return st;
    wbcl_tensor Tv = view(r->ctx, T, r->batch * n * nb);
    for (size_t j = 0; j < n && !st; j += nb) {
        const size_t kb = n - j < nb ? n - j : nb, rows = n - j - kb;
        const la_mat u = mat(T, 0, n * nb, nb), up = mat(T, kb * nb, n * nb, nb);
        if (j > 0)
            st = gemm(r, 0, n - j, kb, j, Lt, j * n, n, nn, 1, Lt, j * n, n, nn, &Tv, 0, nb, n * nb);
        if (!st)
            st = factor_block(r, mat(A, j * n + j, nn, n), j ? &u : NULL, mat(Lt->mem, j * n + j, nn, n), kb, rows,
                              j, rows > 0 || r->keep_v);
        /* the CPU panel kernel multiplies by L11^-T from wbcl_chol_cm's scratch */
        const la_mat d = r->gpu ? mat(Lt->mem, j * n + j, nn, n) : vblock(r, j);
        if (!st && rows)
            st = tri_kernel(r, 0, d, mat(A, (j + kb) * n + j, nn, n), j ? &up : NULL, 1,
                            mat(Lt->mem, (j + kb) * n + j, nn, n), kb, rows, 0, 0, 0);
    }
    return st;
}

/* The diagonal block at row I for the solve kernels: L_II on GPUs, V = L_II^-T on CPUs. */
static la_mat diag(const la_run *r, const wbcl_tensor *Lt, size_t I)
{
    return r->gpu ? mat(Lt->mem, I * r->n + I, r->n * r->n, r->n) : vblock(r, I);
}

/* X = A^-1 B from L (Lt, matrices at b*n*n): B, X (n x rc per matrix) may be
 * the same tensor. inverse: B is the identity (in X) and only the lower
 * triangle of X comes out right (mirror it afterwards).
 * Forward, general B (left-looking, T holds one block row):
 *     Y[I] = L_II^-1 (B[I] - L[I, 0:I] Y[0:I])
 * Forward, inverse (right-looking, T holds the whole lower part): Y = L^-1 is
 * lower triangular, so after block row I is done the later rows get
 *     T[I+kb:n, 0:I+kb] -= L[I+kb:n, I] Y[I, 0:I+kb]
 * which touches only nonzeros (n^3/3 flops in all, where the left-looking
 * product L[I, 0:I] Y[0:I, 0:I+kb] would also multiply the zeros above
 * Y's diagonal).
 * Backward (left-looking; for the inverse only the columns 0:I+kb, i.e. the
 * lower triangle):
 *     X[I] = L_II^-T (Y[I] - L[I+kb:n, I]^T X[I+kb:n]) */
static wbcl_status solve(la_run *r, const wbcl_tensor *Lt, const wbcl_tensor *B, wbcl_tensor *X, size_t rc,
                         int inverse)
{
    const size_t n = r->n, nn = n * n, nb = r->nb, nr = n * rc;
    const size_t tsize = inverse ? nn : nb * rc;
    cl_mem T = NULL;
    wbcl_tensor Tv = view(r->ctx, NULL, 0);
    wbcl_status st = WBCL_SUCCESS;
    if (n > nb) {
        st = wbcl__scratch(r->ctx, SLOT_T, r->batch * tsize * sizeof(float), &T);
        if (st) return st;
        Tv = view(r->ctx, T, r->batch * tsize);
    }
    const la_mat u = mat(T, 0, tsize, rc);
    for (size_t I = 0; I < n && !st; I += nb) {
        const size_t kb = n - I < nb ? n - I : nb;
        if (inverse) {
            const la_mat ui = mat(T, I * n, nn, n);
            st = tri_kernel(r, 1, diag(r, Lt, I), mat(X->mem, I * n, nn, n), I ? &ui : NULL, I,
                            mat(X->mem, I * n, nn, n), kb, I + kb, 0, 0, 0);
            if (!st && I + kb < n && I > 0)
                st = gemm_b(r, 0, n - I - kb, I, kb, Lt, (I + kb) * n + I, n, nn, 0, X, I * n, n, nn, 1.0f, &Tv,
                            (I + kb) * n, n, nn);
            if (!st && I + kb < n)
                st = gemm_b(r, 0, n - I - kb, kb, kb, Lt, (I + kb) * n + I, n, nn, 0, X, I * n + I, n, nn, 0.0f,
                            &Tv, (I + kb) * n + I, n, nn);
        } else {
            if (I > 0) st = gemm(r, 0, kb, rc, I, Lt, I * n, n, nn, 0, X, 0, rc, nr, &Tv, 0, rc, tsize);
            if (!st)
                st = tri_kernel(r, 1, diag(r, Lt, I), mat(B->mem, I * rc, nr, rc), I ? &u : NULL, rc,
                                mat(X->mem, I * rc, nr, rc), kb, rc, 0, 0, 0);
        }
    }
    for (size_t I = (n - 1) / nb * nb; !st; I -= nb) {
        const size_t kb = n - I < nb ? n - I : nb, cols = inverse ? I + kb : rc;
        const int upd = I + kb < n;
        if (upd)
            st = gemm(r, 1, kb, cols, n - I - kb, Lt, (I + kb) * n + I, n, nn, 0, X, (I + kb) * rc, rc, nr, &Tv, 0,
                      rc, tsize);
        if (!st)
            st = tri_kernel(r, 1, diag(r, Lt, I), mat(X->mem, I * rc, nr, rc), upd ? &u : NULL, cols,
                            mat(X->mem, I * rc, nr, rc), kb, cols, 1, 0, 0);
        if (I == 0) break;
    }
    return st;
}

/* GPU: A^-1 = W^T W with W = L^-1 (Lt holds L), blocked by nb = r->nbf:
 *   1. W_II = L_II^-1 for every diagonal block, into W and D (one launch,
 *      wbcl_la_trinv_g, which also zeros W right of the diagonal blocks)
 *   2. for block rows I = 1 .. : T = L[I, 0:I] W[0:I, 0:I] (into X, free until
 *      step 3), then W[I, 0:I] = -W_II T, both through the context's GEMM (whose
 *      C may not share a buffer with A or B: hence W_II also in D, T in X)
 *   3. X = W^T W: the lower 64 x 64 tiles, each written with its mirror
 *      (wbcl_la_ltl_g, exactly symmetric)
 * Flops: n^3 / 3 (Cholesky) + about 2 n^3 / 3 (step 2 multiplies W[0:I, 0:I]
 * as a full square) + n^3 / 3 (step 3): 4 n^3 / 3, LAPACK's potrf + potri
 * take n^3. Launches: 2 + 2 (n / nb - 1), none per column. */
static wbcl_status inverse_gpu(la_run *r, const wbcl_tensor *Lt, wbcl_tensor *X)
{
    const size_t n = r->n, nn = n * n, nb = r->nbf, nblk = ceil_div(n, nb), sd = inv_d_floats(r);
    cl_mem W, D;
    wbcl_kern *kinv, *kltl;
    wbcl_status st = wbcl__scratch(r->ctx, SLOT_T, r->batch * nn * sizeof(float), &W); /* reserved */
    if (!st) st = wbcl__scratch(r->ctx, SLOT_W, r->batch * sd * sizeof(float), &D);
    if (!st) st = kernel(r, "wbcl_la_trinv_g", &kinv);
    if (!st) st = kernel(r, "wbcl_la_ltl_g", &kltl);
    if (st) return st;
    const cl_ulong snn = nn, sd_ = sd;
    const cl_uint n_ = (cl_uint)n, nb_ = (cl_uint)nb, nblk_ = (cl_uint)nblk;
    WBCL_ARG(r->ctx, kinv, 0, Lt->mem);
    WBCL_ARG(r->ctx, kinv, 1, snn);
    WBCL_ARG(r->ctx, kinv, 2, n_);
    WBCL_ARG(r->ctx, kinv, 3, nb_);
    WBCL_ARG(r->ctx, kinv, 4, nblk_);
    WBCL_ARG(r->ctx, kinv, 5, W);
    WBCL_ARG(r->ctx, kinv, 6, snn);
    WBCL_ARG(r->ctx, kinv, 7, D);
    WBCL_ARG(r->ctx, kinv, 8, sd_);
    if ((st = wbcl__set_arg(r->ctx, kinv, 9, nb * (nb + 1) / 2 * sizeof(float), NULL)) ||
        (st = wbcl__set_arg(r->ctx, kinv, 10, 2 * GPU_T * sizeof(float), NULL)))
        return st;
    {
        size_t g[2] = {GPU_T * ceil_div(nb, GPU_T), GPU_T * nblk * r->batch}, l[2] = {GPU_T, GPU_T};
        if ((st = la_launch(r, 3, kinv, 2, g, l))) return st;
    }
    wbcl_tensor Wv = view(r->ctx, W, r->batch * nn), Dv = view(r->ctx, D, r->batch * sd);
    for (size_t I = 1; I < nblk && !st; I++) {
        const size_t j = I * nb, kb = n - j < nb ? n - j : nb;
        st = gemm_ab(r, 1.0f, 0, kb, j, j, Lt, j * n, n, nn, 0, &Wv, 0, n, nn, 0.0f, X, 0, n, nn);
        if (!st) st = gemm_ab(r, -1.0f, 0, kb, j, kb, &Dv, I * nb * nb, nb, sd, 0, X, 0, n, nn, 0.0f, &Wv, j * n, n, nn);
    }
    if (st) return st;
    WBCL_ARG(r->ctx, kltl, 0, W);
    WBCL_ARG(r->ctx, kltl, 1, snn);
    WBCL_ARG(r->ctx, kltl, 2, n_);
    WBCL_ARG(r->ctx, kltl, 3, X->mem);
    WBCL_ARG(r->ctx, kltl, 4, snn);
    const size_t nt = ceil_div(n, GPU_ST);
    size_t g[2] = {GPU_T * (nt * (nt + 1) / 2), GPU_T * r->batch}, l[2] = {GPU_T, GPU_T};
    return la_launch(r, 3, kltl, 2, g, l);
}

/* Reads the pivot status back (waits for the queue) and reports the first failure. */
static wbcl_status check_info(la_run *r)
{
    int *h = malloc(2 * r->batch * sizeof *h);
    if (!h) return wbcl__fail(r->ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", r->op);
    cl_int e = clEnqueueReadBuffer(r->ctx->queue, r->info, CL_TRUE, 0, 2 * r->batch * sizeof *h, h, 0, NULL, NULL);
    if (e != CL_SUCCESS) {
        free(h);
        return wbcl__cl_fail(r->ctx, e, "%s: reading the pivot status", r->op);
    }
    size_t first = r->batch, count = 0;
    for (size_t b = 0; b < r->batch; b++)
        if (h[2 * b] >= 0) {
            if (first == r->batch) first = b;
            count++;
        }
    wbcl_status st = WBCL_SUCCESS;
    if (count) {
        float v;
        memcpy(&v, &h[2 * first + 1], sizeof v);
        char more[64] = "";
        if (count > 1) snprintf(more, sizeof more, "; %zu matrices fail in all", count);
        st = wbcl__fail(r->ctx, WBCL_ERROR_NUMERIC,
                        "%s: matrix %zu of %zu is not positive definite (pivot %d is %g%s)%s", r->op, first, r->batch,
                        h[2 * first], (double)v, isfinite(v) ? "" : ": non-finite input or overflow", more);
    }
    free(h);
    return st;
}

/* ---- validation ------------------------------------------------------------------ */
static wbcl_status spd_shape(wbcl_context *ctx, const char *op, const wbcl_tensor *A, size_t *batch, size_t *n)
{
    wbcl_status st = wbcl__check_tensor(ctx, A, op, "A");
    if (st) return st;
    char s[128];
    if (A->ndim != 2 && A->ndim != 3)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: A must be (n, n) or (batch, n, n), has shape %s", op,
                          wbcl__shape_str(s, sizeof s, A->ndim, A->shape));
    *n = A->shape[A->ndim - 1];
    if (A->shape[A->ndim - 2] != *n)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: A must be square, has shape %s", op,
                          wbcl__shape_str(s, sizeof s, A->ndim, A->shape));
    *batch = A->ndim == 3 ? A->shape[0] : 1;
    if (*n > UINT32_MAX / 2 || *batch > UINT32_MAX)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: A of shape %s is too large for 32-bit kernel indices", op,
                          wbcl__shape_str(s, sizeof s, A->ndim, A->shape));
    return WBCL_SUCCESS;
}

/* keep_v: the call solves with L afterwards (keep every diagonal block's inverse). */
static wbcl_status begin(la_run *r, wbcl_context *ctx, const char *op, size_t batch, size_t n, int keep_v)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->op = op;
    r->gpu = ctx->variant == WBCL_VARIANT_GPU;
    r->n = n;
    r->batch = batch;
    r->nb = r->gpu ? NB_GPU : NB_CPU;
#ifdef WBCL_LA_TRACE
    if (!r->gpu && wbcl__la_nb) r->nb = wbcl__la_nb;
#endif
    if (!r->gpu && n <= NSMALL_CPU) r->nb = n; /* one unblocked block */
    r->nbf = gpu_nb(ctx);
#ifdef WBCL_LA_TRACE
    if (r->gpu && wbcl__la_nb && wbcl__la_nb <= GPU_NB) r->nbf = wbcl__la_nb; /* development A/B only */
#endif
    r->sync_each = ctx->info.type == WBCL_DEVICE_CPU;
    r->keep_v = keep_v;
    r->gemm_min = GPU_GEMM_MIN;
    const char *la = getenv("WBCL_LA_LOOKAHEAD");
    r->ahead = !(la && !strcmp(la, "0"));
    const char *env = getenv("WBCL_LA_GEMM_MIN");
    if (env && *env) {
        char *end;
        unsigned long long v = strtoull(env, &end, 10);
        if (!*end) r->gemm_min = (size_t)v;
    }
    const char *pinv = getenv("WBCL_LA_PANEL_INV");
    r->panel_inv = pinv && !strcmp(pinv, "1");
    r->upd128_min = GPU_UPD128_MIN;
    env = getenv("WBCL_LA_UPD128_MIN");
    if (env && *env) {
        char *end;
        unsigned long long v = strtoull(env, &end, 10);
        if (!*end) r->upd128_min = (size_t)v;
    }
    return wbcl__scratch(ctx, SLOT_INFO, 2 * batch * sizeof(int), &r->info);
}

/* Builds the program now, so that a build failure leaves the outputs untouched. */
static wbcl_status warm(la_run *r)
{
    wbcl_program *p;
    return wbcl__program(r->ctx, "linalg", NULL, &p);
}

/* Scratch of batch*n*n floats holding L, as a tensor header. */
static wbcl_status scratch_L(la_run *r, wbcl_tensor *S)
{
    cl_mem m;
    size_t count = r->batch * r->n * r->n;
    wbcl_status st = wbcl__scratch(r->ctx, SLOT_S, count * sizeof(float), &m);
    if (!st) *S = view(r->ctx, m, count);
    return st;
}

/* ---- public API --------------------------------------------------------------------- */
wbcl_status wbcl_cholesky(wbcl_context *ctx, const wbcl_tensor *A, wbcl_tensor *L)
{
    static const char op[] = "wbcl_cholesky";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t batch = 0, n = 0;
    wbcl_status st = spd_shape(ctx, op, A, &batch, &n);
    if (!st) st = wbcl__check_tensor(ctx, L, op, "L");
    if (!st) st = wbcl__check_same_shape(ctx, A, L, op, "A", "L");
    if (st) return st;
    la_run r;
    if ((st = begin(&r, ctx, op, batch, n, 0)) || (st = warm(&r)) || (st = reserve(&r, 0, 0))) return st;
    st = cholesky(&r, A->mem, L);
    return st ? st : check_info(&r);
}

wbcl_status wbcl_logdet_spd(wbcl_context *ctx, const wbcl_tensor *A, wbcl_tensor *logdet)
{
    static const char op[] = "wbcl_logdet_spd";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t batch = 0, n = 0;
    wbcl_status st = spd_shape(ctx, op, A, &batch, &n);
    if (!st) st = wbcl__check_tensor(ctx, logdet, op, "logdet");
    if (st) return st;
    if (logdet->numel != batch) {
        char sa[96], sl[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: logdet %s must have %zu elements (one per matrix of A %s)", op,
                          wbcl__shape_str(sl, sizeof sl, logdet->ndim, logdet->shape), batch,
                          wbcl__shape_str(sa, sizeof sa, A->ndim, A->shape));
    }
    la_run r;
    wbcl_tensor S;
    wbcl_kern *k;
    if ((st = begin(&r, ctx, op, batch, n, 0)) || (st = warm(&r)) || (st = scratch_L(&r, &S)) ||
        (st = reserve(&r, 0, 0)) || (st = kernel(&r, "wbcl_la_logdet", &k)))
        return st;
    if ((st = cholesky(&r, A->mem, &S))) return st;
    cl_ulong stride = n * n;
    cl_uint n_ = (cl_uint)n, b_ = (cl_uint)batch;
    WBCL_ARG(ctx, k, 0, S.mem);
    WBCL_ARG(ctx, k, 1, stride);
    WBCL_ARG(ctx, k, 2, n_);
    WBCL_ARG(ctx, k, 3, b_);
    WBCL_ARG(ctx, k, 4, logdet->mem);
    size_t global = batch, one = 1;
    if ((st = la_launch(&r, 0, k, 1, &global, &one))) return st;
    return check_info(&r);
}

wbcl_status wbcl_spd_inverse(wbcl_context *ctx, const wbcl_tensor *A, wbcl_tensor *Ainv)
{
    static const char op[] = "wbcl_spd_inverse";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t batch = 0, n = 0;
    wbcl_status st = spd_shape(ctx, op, A, &batch, &n);
    if (!st) st = wbcl__check_tensor(ctx, Ainv, op, "Ainv");
    if (!st) st = wbcl__check_same_shape(ctx, A, Ainv, op, "A", "Ainv");
    if (st) return st;
    if (Ainv == A || Ainv->mem == A->mem)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: Ainv must not be A (no in-place inverse)", op);
    la_run r;
    wbcl_tensor S;
    wbcl_kern *kid, *kmir;
    if ((st = begin(&r, ctx, op, batch, n, 1)) || (st = warm(&r)) || (st = scratch_L(&r, &S)) ||
        (st = reserve(&r, n, 1)) || (st = kernel(&r, "wbcl_la_identity", &kid)) ||
        (st = kernel(&r, "wbcl_la_mirror", &kmir)))
        return st;
    if ((st = cholesky(&r, A->mem, &S))) return st;
    if (r.gpu) {
        if ((st = inverse_gpu(&r, &S, Ainv))) return st;
        return check_info(&r);
    }
    cl_uint n_ = (cl_uint)n, b_ = (cl_uint)batch;
    WBCL_ARG(ctx, kid, 0, Ainv->mem);
    WBCL_ARG(ctx, kid, 1, n_);
    WBCL_ARG(ctx, kid, 2, b_);
    size_t gid[2] = {n, batch}, lid[2] = {1, 1};
    if ((st = la_launch(&r, 0, kid, 2, gid, lid))) return st;
    if ((st = solve(&r, &S, Ainv, Ainv, n, 1))) return st;
    WBCL_ARG(ctx, kmir, 0, Ainv->mem);
    WBCL_ARG(ctx, kmir, 1, n_);
    WBCL_ARG(ctx, kmir, 2, b_);
    size_t nt = ceil_div(n, 16), gm[3] = {nt, nt, batch}, lm[3] = {1, 1, 1};
    if ((st = la_launch(&r, 0, kmir, 3, gm, lm))) return st;
    return check_info(&r);
}

wbcl_status wbcl_spd_solve(wbcl_context *ctx, const wbcl_tensor *A, const wbcl_tensor *B, wbcl_tensor *X)
{
    static const char op[] = "wbcl_spd_solve";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t batch = 0, n = 0;
    wbcl_status st = spd_shape(ctx, op, A, &batch, &n);
    if (!st) st = wbcl__check_tensor(ctx, B, op, "B");
    if (!st) st = wbcl__check_tensor(ctx, X, op, "X");
    if (st) return st;
    char sa[96], sb[96];
    wbcl__shape_str(sa, sizeof sa, A->ndim, A->shape);
    wbcl__shape_str(sb, sizeof sb, B->ndim, B->shape);
    if (B->ndim != 2 && B->ndim != 3)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: B must be (n, r) or (batch, n, r), has shape %s", op, sb);
    const size_t bb = B->ndim == 3 ? B->shape[0] : 1, rows = B->shape[B->ndim - 2], rc = B->shape[B->ndim - 1];
    if (rows != n)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: B %s must have n = %zu rows like A %s", op, sb, n, sa);
    if (bb != batch)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: B %s has batch %zu but A %s has batch %zu", op, sb, bb, sa,
                          batch);
    if (rc > UINT32_MAX / 2)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: B %s has too many columns", op, sb);
    if ((st = wbcl__check_same_shape(ctx, B, X, op, "B", "X"))) return st;
    if (X->mem == A->mem)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: X must not be A (X may be B)", op);
    la_run r;
    wbcl_tensor S;
    if ((st = begin(&r, ctx, op, batch, n, 1)) || (st = warm(&r)) || (st = scratch_L(&r, &S)) ||
        (st = reserve(&r, rc, 0)))
        return st;
    if ((st = cholesky(&r, A->mem, &S))) return st;
    if ((st = solve(&r, &S, B, X, rc, 0))) return st;
    return check_info(&r);
}
