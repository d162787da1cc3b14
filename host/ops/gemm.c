/* GEMM: C = alpha op(A) op(B) + beta C, row-major float32, batched/strided.
 *
 * Validation is complete before anything is enqueued. Then one of three
 * backends (ctx->gemm_backend, resolved at context creation):
 *   WBCL_GEMM_PACKED   cl/gemm.cl: pack op(A) into MR-row panels (scratch slot
 *                      0) and op(B) into NR-column panels (scratch slot 1),
 *                      then one work-item per MR x NR register tile of C.
 *                      The CPU fast path (../shared/PERF-NOTES.md).
 *   WBCL_GEMM_CLBLAST  CLBlast's SGEMM (host/core/blas.c).
 *   WBCL_GEMM_TILED    cl/gemm_tiled.cl: 16 x 16 work-items per 128 x 128
 *                      (or 64 x 64: wbcl__gemm_tiled_tile) tile of C through
 *                      local memory, the GPU default; operands read in
 *                      place (any transpose, stride, offset, half storage;
 *                      one program per tile size, transposes and C dtype):
 *                      one launch, no scratch. GPU-shaped, ours, selectable
 *                      against CLBlast by measurement (perf/run_device.sh).
 * wbcl_gemm is wbcl_gemm_strided on whole tensors. wbcl__gemm_linear (the
 * linear layers of the models) adds an epilogue to the packed kernel: bias,
 * GELU, and A read in place instead of packed (cl/gemm.cl; a float32 A only);
 * up to WBCL_GEMV_ROWS rows it takes the GEMV instead (host/ops/gemv.c).
 *
 * float16 storage (any of A, B, C; compute and accumulation in float32):
 *   packed   the pack kernels of a half operand are built with
 *            -DWBCL_GEMM_SRC_HALF=1 (panels are float: no extra memory), the
 *            main kernel with -DWBCL_GEMM_C_HALF=1 when C is half.
 *   CLBlast  CLBlast's HGEMM would compute in half and needs cl_khr_fp16, so
 *            it is not used: each half operand's touched span is widened into
 *            a temporary float32 buffer (cl/convert.cl), SGEMM runs on those,
 *            and a half C span is narrowed back with round-to-nearest-even.
 *            Extra device memory: 4 bytes per element of each half operand's
 *            span (released when the queue is done with it); C's span is
 *            widened first so that beta and the gaps between rows survive. */
#include "internal.h"
#include "blas.h"
#include "wbcl/gemm.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define SCRATCH_A 0
#define SCRATCH_B 1
/* Local sizes are fixed (not derived from the shape) so that PoCL compiles
 * each kernel's work-group function once, whatever the problem size. */
#define PACK_LOCAL 64
/* k-block of A's packed panels (cl/gemm.cl) */
#define KBLK ((size_t)16)
#define TILE_LOCAL 16
/* The main kernel visits C's tiles in blocks of mcb row panels (see
 * cl/gemm.cl); mcb is chosen so that a block's packed A panels take about
 * this many bytes: they then stay in a core's L2 cache while every column
 * panel of B streams past them (n = 2048 on Zen 4: mcb = 16, 1.0-1.15x faster
 * than whole columns; perf/RESULTS.md). The size is ctx->params.gemm_a_block_kib KiB:
 * 1024 by default, a tuned value from the device's parameter table (wbcl/tuning.h).
 * A block has at least MIN_BLOCK_PANELS row panels, however long k: the first tile
 * that meets a column panel of B reads it from memory, at about half the speed of
 * the tiles that find it in cache, so with few panels per block (k = 2048: the
 * 1 MiB rule gives 10) those cold passes cost 6-21 % at n = 1536-4096 on the
 * Xeon (perf/RESULTS.md, 2026-11-27); blocks past ~100 panels lose A's reuse. */
#define MIN_BLOCK_PANELS 40
/* Largest dimension the kernels index with 32-bit integers. */
#define DIM_MAX ((size_t)INT_MAX)

static const char *tname(wbcl_transpose t) { return t == WBCL_TRANS ? "T" : "N"; }

/* ---- validation helpers ---------------------------------------------------- */
/* a*b + c without overflow; 0 on overflow. */
static int muladd_ok(size_t a, size_t b, size_t c, size_t *out)
{
    size_t p;
    if (!wbcl__mul_ok(a, b, &p) || p > SIZE_MAX - c) return 0;
    *out = p + c;
    return 1;
}

/* The last element a strided operand touches must lie inside the tensor:
 * off + (batch-1)*stride + (rows-1)*ld + (cols-1) < numel, and ld >= cols. */
static wbcl_status check_operand(wbcl_context *ctx, const char *op, const char *name, const wbcl_tensor *t,
                                 size_t off, size_t ld, size_t stride, size_t rows, size_t cols, size_t batch)
{
    char s[96];
    if (ld < cols)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: ld%s = %zu is smaller than the %zu columns of %s as stored (%zu x %zu)", op, name, ld,
                          cols, name, rows, cols);
    size_t last = 0;
    if (!muladd_ok(batch - 1, stride, off, &last) || !muladd_ok(rows - 1, ld, last, &last) ||
        !muladd_ok(1, cols - 1, last, &last))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: operand %s: offset %zu + (batch %zu - 1) * stride %zu + (%zu - 1) * ld %zu + %zu "
                          "overflows size_t",
                          op, name, off, batch, stride, rows, ld, cols);
    if (last >= t->numel)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: operand %s is out of bounds: element %zu is touched (off %zu, ld %zu, stride %zu, "
                          "%zu x %zu as stored, batch %zu) but tensor %s %s has %zu elements",
                          op, name, last, off, ld, stride, rows, cols, batch, name,
                          wbcl__shape_str(s, sizeof s, t->ndim, t->shape), t->numel);
    return WBCL_SUCCESS;
}

static wbcl_status check_common(wbcl_context *ctx, const char *op, wbcl_transpose ta, wbcl_transpose tb,
                                const wbcl_tensor *A, const wbcl_tensor *B, const wbcl_tensor *C)
{
    wbcl_status st = wbcl__check_tensor_any(ctx, A, op, "A");
    if (!st) st = wbcl__check_tensor_any(ctx, B, op, "B");
    if (!st) st = wbcl__check_tensor_any(ctx, C, op, "C");
    if (st) return st;
    if ((ta != WBCL_NO_TRANS && ta != WBCL_TRANS) || (tb != WBCL_NO_TRANS && tb != WBCL_TRANS))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                          "%s: transpose flags must be WBCL_NO_TRANS or WBCL_TRANS (got ta=%d, tb=%d)", op, (int)ta,
                          (int)tb);
    if (C == A || C == B || C->mem == A->mem || C->mem == B->mem)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: C must not be the same tensor as %s (in-place GEMM)",
                          op, (C == A || C->mem == A->mem) ? "A" : "B");
    return WBCL_SUCCESS;
}

/* ---- packed backend --------------------------------------------------------- */
/* kern: the _x kernel (sx == 1) or the _p kernel (sp == 1); either runs a work-item per
 * block of 16 k values of a panel (cl/gemm.cl). */
static wbcl_status pack(wbcl_context *ctx, wbcl_kern *kern, cl_mem src, size_t off, size_t stride,
                        size_t sx, size_t sp, size_t rows, size_t k, size_t panels, size_t batch, cl_mem dst)
{
    cl_ulong off_ = off, stride_ = stride, sx_ = sx, sp_ = sp;
    cl_uint rows_ = (cl_uint)rows, k_ = (cl_uint)k, panels_ = (cl_uint)panels;
    WBCL_ARG(ctx, kern, 0, src);
    WBCL_ARG(ctx, kern, 1, off_);
    WBCL_ARG(ctx, kern, 2, stride_);
    WBCL_ARG(ctx, kern, 3, sx_);
    WBCL_ARG(ctx, kern, 4, sp_);
    WBCL_ARG(ctx, kern, 5, rows_);
    WBCL_ARG(ctx, kern, 6, k_);
    WBCL_ARG(ctx, kern, 7, panels_);
    WBCL_ARG(ctx, kern, 8, dst);
    size_t global[2] = {(k + 15) / 16 * panels, batch}, local[2] = {PACK_LOCAL, 1};
    return wbcl__launch(ctx, kern, 2, global, local);
}

/* Optional epilogue of the packed kernel (wbcl__gemm_linear): C = act(alpha op(A) op(B) +
 * beta C + bias); a_rows: A read in place (not transposed, batch 1), no packed copy. */
typedef struct gemm_epilogue {
    const wbcl_tensor *bias; /* NULL: none */
    int gelu, a_rows;
} gemm_epilogue;

static wbcl_status run_packed(wbcl_context *ctx, const char *op, const wbcl_gemm_desc *d, const wbcl_tensor *A,
                              const wbcl_tensor *B, wbcl_tensor *C, const gemm_epilogue *epi)
{
    const size_t MR = (size_t)ctx->params.gemm_mr, NR = (size_t)ctx->params.gemm_nr;
    if (MR < 1 || MR > 16 || (NR != 4 && NR != 8 && NR != 16 && NR != 32 && NR != 64))
        return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED,
                          "%s: packed GEMM needs MR in 1..16 and NR in {4, 8, 16, 32, 64}; the parameter table of '%s' "
                          "gives MR=%zu NR=%zu",
                          op, ctx->info.name, MR, NR);
    const size_t m = d->m, n = d->n, k = d->k, batch = d->batch;
    const size_t pa = (m + MR - 1) / MR, pb = (n + NR - 1) / NR;
    const int a_batched = batch > 1 && d->stride_a != 0, b_batched = batch > 1 && d->stride_b != 0;

    /* floats per packed batch entry; pa*MR <= m + 15 etc., k <= DIM_MAX. A's panels are
     * stored in k-blocks of KBLK (cl/gemm.cl): kpad floats per row. */
    const size_t kpad = (k + KBLK - 1) / KBLK * KBLK;
    size_t ea, eb;
    if (!wbcl__mul_ok(pa * MR, kpad, &ea) || !wbcl__mul_ok(pb * NR, k, &eb) || ea > SIZE_MAX / 4 || eb > SIZE_MAX / 4)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: packed panels of m=%zu n=%zu k=%zu overflow size_t", op, m, n,
                          k);
    /* Every scratch buffer must fit the device's maximum allocation. A
     * problem whose packed panels do not is split into sub-GEMMs on offsets
     * of the same storage: along k (later parts accumulate with beta = 1),
     * then along m, then along n; batched operands are packed a chunk of
     * batch entries at a time (below). */
    const size_t limit = (size_t)(ctx->info.max_alloc_size / sizeof(float));
    const int ta = d->ta == WBCL_TRANS, tb = d->tb == WBCL_TRANS;
    /* the longest k one panel of A (whole k-blocks) and one of B can hold */
    const size_t kmax_a = limit / MR / KBLK * KBLK, kmax_b = limit / NR, kmax = kmax_a < kmax_b ? kmax_a : kmax_b;
    if (kmax == 0)
        return wbcl__fail(ctx, WBCL_ERROR_DEVICE_LIMIT,
                          "%s: the maximum allocation of %llu bytes on '%s' cannot hold one packed step of %zu floats",
                          op, (unsigned long long)ctx->info.max_alloc_size, ctx->info.name,
                          KBLK * MR > NR ? KBLK * MR : NR);
    if (k > kmax || ea > limit || eb > limit) {
        if (epi) /* wbcl__gemm_linear checks this before; a split would need the epilogue per part */
            return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED, "%s: the fused epilogue needs one packed launch", op);
        wbcl_gemm_desc s = *d;
        const int along_k = k > kmax, along_m = !along_k && ea > limit;
        const size_t total = along_k ? k : along_m ? m : n;
        /* each step >= MR (NR): kpad <= kmax_a <= limit / MR, k <= kmax_b <= limit / NR */
        const size_t step = along_k ? kmax : along_m ? limit / kpad / MR * MR : limit / k / NR * NR;
        for (size_t x0 = 0; x0 < total; x0 += step) {
            const size_t len = total - x0 < step ? total - x0 : step;
            if (along_k) {
                s.k = len;
                s.off_a = d->off_a + x0 * (ta ? d->lda : 1);
                s.off_b = d->off_b + x0 * (tb ? 1 : d->ldb);
                s.beta = x0 ? 1.0f : d->beta;
            } else if (along_m) {
                s.m = len;
                s.off_a = d->off_a + x0 * (ta ? 1 : d->lda);
                s.off_c = d->off_c + x0 * d->ldc;
            } else {
                s.n = len;
                s.off_b = d->off_b + x0 * (tb ? d->ldb : 1);
                s.off_c = d->off_c + x0;
            }
            wbcl_status st = run_packed(ctx, op, &s, A, B, C, NULL);
            if (st) return st;
        }
        return WBCL_SUCCESS;
    }
    if (pa > (UINT32_MAX - TILE_LOCAL) / pb)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: m=%zu n=%zu give %zu x %zu register tiles, more than 2^32", op, m,
                          n, pa, pb);
    const size_t block_bytes = (size_t)(ctx->params.gemm_a_block_kib > 0 ? ctx->params.gemm_a_block_kib : 1024) * 1024;
    size_t mcb_ = block_bytes / (MR * k * sizeof(float));
    if (mcb_ < MIN_BLOCK_PANELS) mcb_ = MIN_BLOCK_PANELS;
    cl_uint mcb = (cl_uint)(mcb_ > pa ? pa : mcb_), unit_cb = 0;
    /* Long k: units of TILE_LOCAL tiles (cl/gemm.cl) when a block of MIN_BLOCK_PANELS A panels
     * exceeds twice the block size, with the most column panels (4 or 2) whose unit's A and B
     * panels fit in twice the block size (k = 2048: 4 x 4, 3072: 8 x 2, 4096: blocks again;
     * 1.05x at 2048^3, 1.01-1.02x at 3072^3 on the Xeon, perf/RESULTS.md). Units whose grid
     * (part-empty units at the edges included) would not fit the kernel's 32-bit index stay blocks. */
    const size_t unit_bytes = 2 * block_bytes;
    if (MIN_BLOCK_PANELS * MR * k * sizeof(float) > unit_bytes)
        for (size_t cb = 4; cb >= 2 && !unit_cb; cb /= 2)
            if ((TILE_LOCAL / cb * MR + cb * NR) * k * sizeof(float) <= unit_bytes &&
                (pa + TILE_LOCAL / cb - 1) / (TILE_LOCAL / cb) * ((pb + cb - 1) / cb) <=
                    (UINT32_MAX - TILE_LOCAL) / TILE_LOCAL) {
                unit_cb = (cl_uint)cb;
                mcb = (cl_uint)(TILE_LOCAL / cb);
            }
    size_t chunk = batch;
    if (a_batched && chunk > limit / ea) chunk = limit / ea;
    if (b_batched && chunk > limit / eb) chunk = limit / eb;
    if (chunk < 1) chunk = 1;

    /* op(A)(x, p) = A[x*lda + p] (N) or A[p*lda + x] (T); op(B)(p, x) likewise. */
    const size_t a_sx = ta ? 1 : d->lda, a_sp = ta ? d->lda : 1;
    const size_t b_sx = tb ? d->ldb : 1, b_sp = tb ? 1 : d->ldb;

    static const char src_half[] = "-DWBCL_GEMM_SRC_HALF=1";
    const char *xa = A->dtype == WBCL_F16 ? src_half : NULL, *xb = B->dtype == WBCL_F16 ? src_half : NULL;
    const int epilogue = epi ? (epi->gelu ? 2 : epi->bias ? 1 : 0) : 0;
    /* A read in place: float32 rows only (the in-place loads are float) */
    const int a_rows = epi && epi->a_rows && !ta && batch == 1 && A->dtype == WBCL_F32;
    char opts[128] = "";
    if (epilogue || a_rows)
        snprintf(opts, sizeof opts, "-DWBCL_GEMM_EPILOGUE=%d -DWBCL_GEMM_A_ROWS=%d", epilogue, a_rows);
    if (C->dtype == WBCL_F16) {
        size_t used = strlen(opts);
        snprintf(opts + used, sizeof opts - used, "%s-DWBCL_GEMM_C_HALF=1", used ? " " : "");
    }
    wbcl_kern *kpa, *kpb, *kmm;
    wbcl_status st = wbcl__kernel(ctx, "gemm", xa, ta ? "wbcl_gemm_pack_a_x" : "wbcl_gemm_pack_a_p", &kpa);
    if (!st) st = wbcl__kernel(ctx, "gemm", xb, tb ? "wbcl_gemm_pack_b_p" : "wbcl_gemm_pack_b_x", &kpb);
    if (!st) st = wbcl__kernel(ctx, "gemm", opts[0] ? opts : NULL, "wbcl_gemm_packed", &kmm);
    if (st) return st;
    cl_mem ap = NULL, bp = NULL;
    /* a constant B (a module's weight) keeps its panels between calls (host/core/packed.c); the
     * cache changes B's bookkeeping only, never its data */
    wbcl__packed_key key = {tb, d->off_b, d->ldb, n, k, NR};
    wbcl_tensor *Bk = (wbcl_tensor *)B;
    const int b_kept = !b_batched && wbcl__packed_get(ctx, Bk, &key, eb * sizeof(float), &bp);
    const int b_keep = !b_batched && !b_kept && bp; /* pack into the kept buffer this time */
    if (!a_rows) st = wbcl__scratch(ctx, SCRATCH_A, ea * (a_batched ? chunk : 1) * sizeof(float), &ap);
    if (!st && !bp) st = wbcl__scratch(ctx, SCRATCH_B, eb * (b_batched ? chunk : 1) * sizeof(float), &bp);
    if (st) {
        if (b_keep) wbcl__packed_done(Bk, &key, 0);
        return st;
    }

    if (a_rows) {
        cl_ulong off_a = d->off_a, lda = d->lda;
        ap = A->mem; /* the kernel's Ap argument is A itself */
        WBCL_ARG(ctx, kmm, 15, off_a);
        WBCL_ARG(ctx, kmm, 16, lda);
    }
    if (epilogue) {
        if (!epi->bias)
            return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: the GELU epilogue needs a bias", op);
        WBCL_ARG(ctx, kmm, a_rows ? 17 : 15, epi->bias->mem);
    }
    if (!a_batched && !a_rows) st = pack(ctx, kpa, A->mem, d->off_a, 0, a_sx, a_sp, m, k, pa, 1, ap);
    if (!st && !b_batched && !b_kept) {
        st = pack(ctx, kpb, B->mem, d->off_b, 0, b_sx, b_sp, n, k, pb, 1, bp);
        if (b_keep) wbcl__packed_done(Bk, &key, !st);
    }
    for (size_t b0 = 0; !st && b0 < batch; b0 += chunk) {
        const size_t nb = batch - b0 < chunk ? batch - b0 : chunk;
        if (a_batched) st = pack(ctx, kpa, A->mem, d->off_a + b0 * d->stride_a, d->stride_a, a_sx, a_sp, m, k, pa, nb, ap);
        if (!st && b_batched)
            st = pack(ctx, kpb, B->mem, d->off_b + b0 * d->stride_b, d->stride_b, b_sx, b_sp, n, k, pb, nb, bp);
        if (st) break;
        cl_ulong off_c = d->off_c + b0 * d->stride_c, ldc = d->ldc, stride_c = d->stride_c;
        cl_uint m_ = (cl_uint)m, n_ = (cl_uint)n, k_ = (cl_uint)k, abat = (cl_uint)a_batched,
                bbat = (cl_uint)b_batched;
        float alpha = d->alpha, beta = d->beta;
        WBCL_ARG(ctx, kmm, 0, ap);
        WBCL_ARG(ctx, kmm, 1, bp);
        WBCL_ARG(ctx, kmm, 2, C->mem);
        WBCL_ARG(ctx, kmm, 3, off_c);
        WBCL_ARG(ctx, kmm, 4, ldc);
        WBCL_ARG(ctx, kmm, 5, stride_c);
        WBCL_ARG(ctx, kmm, 6, m_);
        WBCL_ARG(ctx, kmm, 7, n_);
        WBCL_ARG(ctx, kmm, 8, k_);
        WBCL_ARG(ctx, kmm, 9, abat);
        WBCL_ARG(ctx, kmm, 10, bbat);
        WBCL_ARG(ctx, kmm, 11, alpha);
        WBCL_ARG(ctx, kmm, 12, beta);
        WBCL_ARG(ctx, kmm, 13, mcb);
        WBCL_ARG(ctx, kmm, 14, unit_cb);
        size_t global[2] = {unit_cb ? (pa + mcb - 1) / mcb * ((pb + unit_cb - 1) / unit_cb) * TILE_LOCAL : pa * pb, nb},
               local[2] = {TILE_LOCAL, 1};
        st = wbcl__launch(ctx, kmm, 2, global, local);
    }
    return st;
}

/* ---- tiled backend (GPU-shaped) ------------------------------------------------ */
#define TILED_WG 16 /* work-groups of 16 x 16 (cl/gemm_tiled.cl) */
/* CUDA-based OpenCL drivers cap the 2nd and 3rd grid dimensions at 65535 work-groups:
 * the m tiles and the batch are launched in chunks of at most this many. */
#define TILED_GROUPS_MAX 32768

wbcl_status wbcl__gemm_tiled_limits(const wbcl_device_info *dev, int tile, int tk, int db, char *why, size_t n)
{
    if (tile == 0) tile = 64; /* by the shape: at least the 64 tile runs */
    if ((tile != 64 && tile != 128) || (tk != 8 && tk != 16 && tk != 32) || (db != 0 && db != 1)) {
        wbcl__msg(why, n,
                  "tiled GEMM needs gemm.tiled.tile 64 or 128, gemm.tiled.tk 8, 16 or 32 and gemm.tiled.db 0 or 1 "
                  "(have %d, %d, %d)",
                  tile, tk, db);
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    const uint64_t lmem = 4ull * (uint64_t)tk * (2ull * (uint64_t)tile + 8) * (db ? 2u : 1u);
    if (dev->max_work_group_size < (size_t)TILED_WG * TILED_WG) {
        wbcl__msg(why, n, "tiled GEMM needs work-groups of %d work-items; '%s' allows %zu", TILED_WG * TILED_WG,
                  dev->name, dev->max_work_group_size);
        return WBCL_ERROR_DEVICE_LIMIT;
    }
    if (lmem > dev->local_mem_size) {
        wbcl__msg(why, n,
                  "tiled GEMM with gemm.tiled.tile %d, gemm.tiled.tk %d and gemm.tiled.db %d needs %llu bytes of local "
                  "memory; '%s' has %llu",
                  tile, tk, db, (unsigned long long)lmem, dev->name, (unsigned long long)dev->local_mem_size);
        return WBCL_ERROR_DEVICE_LIMIT;
    }
    return WBCL_SUCCESS;
}

wbcl_status wbcl__gemm_tiled_fits(wbcl_context *ctx, const char *op)
{
    char why[384];
    wbcl_status st =
        wbcl__gemm_tiled_limits(&ctx->info, ctx->params.gemm_tiled, ctx->params.gemm_tiled_k, ctx->params.gemm_tiled_db,
                                why, sizeof why);
    return st ? wbcl__fail(ctx, st, "%s: %s", op, why) : WBCL_SUCCESS;
}

/* The tile by the shape (gemm.tiled.tile = 0, the default): 128 x 128 tiles reuse each loaded
 * element twice as often as 64 x 64 ones, but a C whose 128-tiles leave compute units idle, or a
 * last wave of tiles part full, or edge tiles mostly empty (n = 192: 1.5 tiles of 128), can do
 * better with 64. The rule compares the estimated times: a compute unit's share, waves =
 * ceil(tiles / units), times a tile's work, T^2 / e(T), where e(128) = 1 and e(64) = 0.76, the
 * 64 tile's rate relative to the 128 tile's on a full device (4096^3 on an NVIDIA H200:
 * 0.54x cuBLAS at 64 against 0.71x at 128). So 64 where waves64 * 4096 / 0.76 <= waves128 *
 * 16384, i.e. 100 waves64 <= 304 waves128. On the H200 (132 units; perf/RESULTS.md) it picks
 * the faster tile at every shape measured: 1024^3 64 (0.85x against 0.77x), 2048^3 and
 * 4096^3 128, and ToST-T / CRATE-T linears at batch 64 and 8 (fifth session: (B N) x k x n =
 * 12608 x 192 x 192 64 (0.94 / 0.89), 12608 x 768 x 192 64 (0.80 / 0.77), 12608 x 384 x 384 64
 * (0.85 / 0.81), 12608 x 384 x 1536 128 (0.86 / 0.73), 1576 x 768 x 192 64 (0.89 / 0.67),
 * 1576 x 192 x 768 64 (1.00 / 0.93); 12608 x 192 x 768 128 (0.88 / 0.86)). The former rule (64
 * only where the 128-tiles were fewer than the units) took 128 at the first four. */
int wbcl__gemm_tiled_tile(const wbcl_context *ctx, size_t m, size_t n, size_t batch)
{
    if (ctx->params.gemm_tiled) return ctx->params.gemm_tiled;
    char why[8];
    if (wbcl__gemm_tiled_limits(&ctx->info, 128, ctx->params.gemm_tiled_k, ctx->params.gemm_tiled_db, why, sizeof why))
        return 64;
    const double units = ctx->info.compute_units ? (double)ctx->info.compute_units : 1.0;
    const double t128 = (double)((m + 127) / 128) * (double)((n + 127) / 128) * (double)batch,
                 t64 = (double)((m + 63) / 64) * (double)((n + 63) / 64) * (double)batch;
    return 100.0 * ceil(t64 / units) <= 304.0 * ceil(t128 / units) ? 64 : 128;
}

/* One launch per chunk of at most TILED_GROUPS_MAX row tiles and batch entries; the
 * operands' offsets move to the chunk's first row (A, C) and batch entry (A, B, C). */
/* epi: NULL or the linear layers' bias (+ GELU), applied in the store (cl/gemm_tiled.cl WBCL_GT_EPI) */
static wbcl_status run_tiled(wbcl_context *ctx, const char *op, const wbcl_gemm_desc *d, const wbcl_tensor *A,
                             const wbcl_tensor *B, wbcl_tensor *C, const gemm_epilogue *epi)
{
    wbcl_status st = wbcl__gemm_tiled_fits(ctx, op);
    if (st) return st;
    const size_t tile = (size_t)wbcl__gemm_tiled_tile(ctx, d->m, d->n, d->batch), tk = (size_t)ctx->params.gemm_tiled_k;
    const int db = ctx->params.gemm_tiled_db;
    /* gemm.tiled.v4 = 1 reads A and B as float4 where each stored row is whole float4s at
     * 16-byte-aligned addresses: float32 storage, ld, offset and batch stride multiples of 4, the
     * row length (k or m for A, n or k for B) too, and four elements per work-item of each slice */
    const int v4 = ctx->params.gemm_tiled_v4;
    const int ta = d->ta == WBCL_TRANS, tb = d->tb == WBCL_TRANS;
    const int va = v4 && A->dtype == WBCL_F32 && tile * tk / 256 % 4 == 0 && d->lda % 4 == 0 && d->off_a % 4 == 0 &&
                   (d->batch == 1 || d->stride_a % 4 == 0) && (ta ? d->m : d->k) % 4 == 0;
    const int vb = v4 && B->dtype == WBCL_F32 && tile * tk / 256 % 4 == 0 && d->ldb % 4 == 0 && d->off_b % 4 == 0 &&
                   (d->batch == 1 || d->stride_b % 4 == 0) && (tb ? d->k : d->n) % 4 == 0;
    const int ep = epi && epi->bias ? 1 + (epi->gelu != 0) : 0;
    char opts[256];
    snprintf(opts, sizeof opts, "-DWBCL_GT_TM=%zu -DWBCL_GT_TN=%zu -DWBCL_GT_TK=%zu -DWBCL_GT_TA=%d -DWBCL_GT_TB=%d "
             "-DWBCL_GT_C_HALF=%d -DWBCL_GT_DB=%d -DWBCL_GT_VA=%d -DWBCL_GT_VB=%d%s", tile, tile, tk, ta, tb,
             C->dtype == WBCL_F16, db, va, vb, ep == 2 ? " -DWBCL_GT_EPI=2" : ep ? " -DWBCL_GT_EPI=1" : "");
    wbcl__append_regcap(ctx, ctx->params.gemm_tiled_maxrreg, opts, sizeof opts);
    /* cl/gemm_tiled.cl GT_A_HALF, GT_B_HALF */
    cl_uint flags = (A->dtype == WBCL_F16 ? 1u : 0u) | (B->dtype == WBCL_F16 ? 2u : 0u);
    wbcl_kern *kt;
    st = wbcl__kernel(ctx, "gemm_tiled", opts, "wbcl_gemm_tiled", &kt);
    if (st) return st;
    const size_t mt = (d->m + tile - 1) / tile, nt = (d->n + tile - 1) / tile;
    cl_ulong lda = d->lda, ldb = d->ldb, ldc = d->ldc, sa = d->stride_a, sb = d->stride_b, sc = d->stride_c;
    cl_uint n_ = (cl_uint)d->n, k_ = (cl_uint)d->k;
    float alpha = d->alpha, beta = d->beta;
    WBCL_ARG(ctx, kt, 0, A->mem);
    WBCL_ARG(ctx, kt, 2, lda);
    WBCL_ARG(ctx, kt, 3, sa);
    WBCL_ARG(ctx, kt, 4, B->mem);
    WBCL_ARG(ctx, kt, 6, ldb);
    WBCL_ARG(ctx, kt, 7, sb);
    WBCL_ARG(ctx, kt, 8, C->mem);
    WBCL_ARG(ctx, kt, 10, ldc);
    WBCL_ARG(ctx, kt, 11, sc);
    WBCL_ARG(ctx, kt, 13, n_);
    WBCL_ARG(ctx, kt, 14, k_);
    WBCL_ARG(ctx, kt, 15, alpha);
    WBCL_ARG(ctx, kt, 16, beta);
    WBCL_ARG(ctx, kt, 17, flags);
    cl_mem bias_mem = ep ? epi->bias->mem : C->mem; /* read only with an epilogue */
    WBCL_ARG(ctx, kt, 18, bias_mem);
    /* op(A)'s row i starts at element i*lda (N) or i (T) */
    const size_t a_row = d->ta == WBCL_TRANS ? 1 : d->lda;
    for (size_t b0 = 0; !st && b0 < d->batch; b0 += TILED_GROUPS_MAX) {
        const size_t nb = d->batch - b0 < TILED_GROUPS_MAX ? d->batch - b0 : TILED_GROUPS_MAX;
        for (size_t t0 = 0; !st && t0 < mt; t0 += TILED_GROUPS_MAX) {
            const size_t ntiles = mt - t0 < TILED_GROUPS_MAX ? mt - t0 : TILED_GROUPS_MAX;
            const size_t i0 = t0 * tile, rows = d->m - i0 < ntiles * tile ? d->m - i0 : ntiles * tile;
            cl_ulong off_a = d->off_a + b0 * d->stride_a + i0 * a_row, off_b = d->off_b + b0 * d->stride_b,
                     off_c = d->off_c + b0 * d->stride_c + i0 * d->ldc;
            cl_uint m_ = (cl_uint)rows;
            WBCL_ARG(ctx, kt, 1, off_a);
            WBCL_ARG(ctx, kt, 5, off_b);
            WBCL_ARG(ctx, kt, 9, off_c);
            WBCL_ARG(ctx, kt, 12, m_);
            size_t global[3] = {nt * TILED_WG, ntiles * TILED_WG, nb}, local[3] = {TILED_WG, TILED_WG, 1};
            st = wbcl__launch(ctx, kt, 3, global, local);
        }
    }
    return st;
}

/* ---- CLBlast backend ------------------------------------------------------------ */
/* Elements from an operand's offset to one past the last element it touches (validated). */
static size_t span(size_t ld, size_t stride, size_t rows, size_t cols, size_t batch)
{
    return (batch - 1) * stride + (rows - 1) * ld + cols;
}

/* A float32 view of [off, off + n) of t: t itself, or a new buffer holding the widened span
 * (then *off_out = 0 and *tmp is the buffer to release). */
static wbcl_status widen(wbcl_context *ctx, const char *op, const char *name, const wbcl_tensor *t, size_t off,
                         size_t n, cl_mem *mem, size_t *off_out, cl_mem *tmp)
{
    *tmp = NULL;
    if (t->dtype == WBCL_F32) {
        *mem = t->mem;
        *off_out = off;
        return WBCL_SUCCESS;
    }
    char what[96];
    snprintf(what, sizeof what, "%s: float32 copy of float16 operand %s for CLBlast", op, name);
    wbcl_status st = wbcl__buffer(ctx, n * sizeof(float), what, tmp);
    if (!st) st = wbcl__convert(ctx, op, t->mem, WBCL_F16, off, *tmp, WBCL_F32, 0, n);
    if (st) {
        if (*tmp) clReleaseMemObject(*tmp);
        *tmp = NULL;
        return st;
    }
    *mem = *tmp;
    *off_out = 0;
    return WBCL_SUCCESS;
}

static wbcl_status run_clblast(wbcl_context *ctx, const char *op, const wbcl_gemm_desc *d, const wbcl_tensor *A,
                               const wbcl_tensor *B, wbcl_tensor *C)
{
    const int ta = d->ta == WBCL_TRANS, tb = d->tb == WBCL_TRANS;
    if (A->dtype == WBCL_F32 && B->dtype == WBCL_F32 && C->dtype == WBCL_F32)
        return wbcl__blas_sgemm(ctx, op, ta, tb, d->m, d->n, d->k, d->alpha, A->mem, d->off_a, d->lda, d->stride_a,
                                B->mem, d->off_b, d->ldb, d->stride_b, d->beta, C->mem, d->off_c, d->ldc, d->stride_c,
                                d->batch);
    const size_t na = span(d->lda, d->stride_a, ta ? d->k : d->m, ta ? d->m : d->k, d->batch);
    const size_t nb = span(d->ldb, d->stride_b, tb ? d->n : d->k, tb ? d->k : d->n, d->batch);
    const size_t nc = span(d->ldc, d->stride_c, d->m, d->n, d->batch);
    cl_mem a, b, c, ta_ = NULL, tb_ = NULL, tc_ = NULL;
    size_t oa, ob, oc;
    wbcl_status st = widen(ctx, op, "A", A, d->off_a, na, &a, &oa, &ta_);
    if (!st) st = widen(ctx, op, "B", B, d->off_b, nb, &b, &ob, &tb_);
    if (!st) st = widen(ctx, op, "C", C, d->off_c, nc, &c, &oc, &tc_);
    if (!st)
        st = wbcl__blas_sgemm(ctx, op, ta, tb, d->m, d->n, d->k, d->alpha, a, oa, d->lda, d->stride_a, b, ob, d->ldb,
                              d->stride_b, d->beta, c, oc, d->ldc, d->stride_c, d->batch);
    if (!st && tc_) st = wbcl__convert(ctx, op, tc_, WBCL_F32, 0, C->mem, WBCL_F16, d->off_c, nc);
    /* released once the queued commands that use them are done (OpenCL 1.2, clReleaseMemObject) */
    if (ta_) clReleaseMemObject(ta_);
    if (tb_) clReleaseMemObject(tb_);
    if (tc_) clReleaseMemObject(tc_);
    return st;
}

/* ---- common path ------------------------------------------------------------- */
/* d is fully validated; dispatches on the backend. */
static wbcl_status run(wbcl_context *ctx, const char *op, const wbcl_gemm_desc *desc, const wbcl_tensor *A,
                       const wbcl_tensor *B, wbcl_tensor *C)
{
    /* A batch of row blocks sharing one B, whose A and C entries follow each
     * other row after row (x W^T for a (batch, n, d) x, say), is one GEMM with
     * batch*m rows: fewer edge tiles, one launch, no batch bookkeeping. */
    wbcl_gemm_desc merged = *desc;
    const wbcl_gemm_desc *d = desc;
    if (d->batch > 1 && d->stride_b == 0 && d->ta == WBCL_NO_TRANS && d->stride_a == d->m * d->lda &&
        d->stride_c == d->m * d->ldc && d->m * d->batch <= DIM_MAX) {
        merged.m = d->m * d->batch;
        merged.batch = 1;
        merged.stride_a = merged.stride_c = 0;
        d = &merged;
    }
    if (ctx->gemm_backend == WBCL_GEMM_CLBLAST) return run_clblast(ctx, op, d, A, B, C);
    if (ctx->gemm_backend == WBCL_GEMM_PACKED) return run_packed(ctx, op, d, A, B, C, NULL);
    if (ctx->gemm_backend == WBCL_GEMM_TILED) return run_tiled(ctx, op, d, A, B, C, NULL);
    return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: unknown GEMM backend %d", op, (int)ctx->gemm_backend);
}

wbcl_status wbcl_gemm_strided(wbcl_context *ctx, const wbcl_gemm_desc *desc, const wbcl_tensor *A,
                              const wbcl_tensor *B, wbcl_tensor *C)
{
    static const char op[] = "wbcl_gemm_strided";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!desc) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", op);
    const wbcl_gemm_desc *d = desc;
    wbcl_status st = check_common(ctx, op, d->ta, d->tb, A, B, C);
    if (st) return st;
    if (!d->m || !d->n || !d->k || !d->batch)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: m, n, k and batch must be positive (m=%zu n=%zu k=%zu batch=%zu)",
                          op, d->m, d->n, d->k, d->batch);
    if (d->m > DIM_MAX || d->n > DIM_MAX || d->k > DIM_MAX || d->batch > DIM_MAX)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: m=%zu n=%zu k=%zu batch=%zu: each must be at most %zu", op, d->m,
                          d->n, d->k, d->batch, DIM_MAX);
    const int ta = d->ta == WBCL_TRANS, tb = d->tb == WBCL_TRANS;
    st = check_operand(ctx, op, "A", A, d->off_a, d->lda, d->stride_a, ta ? d->k : d->m, ta ? d->m : d->k, d->batch);
    if (!st)
        st = check_operand(ctx, op, "B", B, d->off_b, d->ldb, d->stride_b, tb ? d->n : d->k, tb ? d->k : d->n,
                           d->batch);
    if (!st) st = check_operand(ctx, op, "C", C, d->off_c, d->ldc, d->stride_c, d->m, d->n, d->batch);
    if (st) return st;
    /* distinct batch entries of C must not overlap (writes would race) */
    if (d->batch > 1 && d->stride_c < (d->m - 1) * d->ldc + d->n) /* no overflow: checked above */
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                          "%s: stride_c = %zu makes the %zu batch entries of C (%zu x %zu, ldc %zu) overlap; it must "
                          "be at least %zu",
                          op, d->stride_c, d->batch, d->m, d->n, d->ldc, (d->m - 1) * d->ldc + d->n);
    return run(ctx, op, d, A, B, C);
}

wbcl_status wbcl_gemm(wbcl_context *ctx, wbcl_transpose ta, wbcl_transpose tb, float alpha, const wbcl_tensor *A,
                      const wbcl_tensor *B, float beta, wbcl_tensor *C)
{
    static const char op[] = "wbcl_gemm";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_common(ctx, op, ta, tb, A, B, C);
    if (st) return st;
    char sa[96], sb[96], sc[96];
    wbcl__shape_str(sa, sizeof sa, A->ndim, A->shape);
    wbcl__shape_str(sb, sizeof sb, B->ndim, B->shape);
    wbcl__shape_str(sc, sizeof sc, C->ndim, C->shape);
    const wbcl_tensor *ts[3] = {A, B, C};
    const char *names[3] = {"A", "B", "C"}, *shapes[3] = {sa, sb, sc};
    for (int i = 0; i < 3; i++)
        if (ts[i]->ndim < 2 || ts[i]->ndim > 4)
            return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %s must have 2 to 4 dimensions, has shape %s", op, names[i],
                              shapes[i]);
    const int na = A->ndim, nb = B->ndim, nc = C->ndim;
    const size_t ar = A->shape[na - 2], ac = A->shape[na - 1], br = B->shape[nb - 2], bc = B->shape[nb - 1];
    const size_t m = ta == WBCL_TRANS ? ac : ar, ka = ta == WBCL_TRANS ? ar : ac;
    const size_t kb = tb == WBCL_TRANS ? bc : br, n = tb == WBCL_TRANS ? br : bc;
    if (ka != kb)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: inner dimensions differ: A %s with ta=%s gives op(A) %zu x %zu, B %s with tb=%s gives "
                          "op(B) %zu x %zu (k = %zu vs %zu)",
                          op, sa, tname(ta), m, ka, sb, tname(tb), kb, n, ka, kb);
    if (C->shape[nc - 2] != m || C->shape[nc - 1] != n)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: C has shape %s but op(A) op(B) is %zu x %zu (A %s ta=%s, B %s tb=%s)", op, sc, m, n, sa,
                          tname(ta), sb, tname(tb));
    /* batch dimensions: A's and B's, when present, must equal C's */
    size_t batch = 1;
    for (int i = 0; i < nc - 2; i++) batch *= C->shape[i]; /* <= numel: no overflow */
    for (int t = 0; t < 2; t++) {
        const wbcl_tensor *x = ts[t];
        if (x->ndim == 2) continue;
        int same = x->ndim == nc;
        for (int i = 0; same && i < nc - 2; i++) same = x->shape[i] == C->shape[i];
        if (!same)
            return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                              "%s: batch dimensions of %s %s differ from C's %s (a batched operand must have C's "
                              "leading dimensions; a 2-D one is shared by every batch entry)",
                              op, names[t], shapes[t], sc);
    }
    wbcl_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.ta = ta;
    d.tb = tb;
    d.m = m;
    d.n = n;
    d.k = ka;
    d.batch = batch;
    d.alpha = alpha;
    d.beta = beta;
    d.lda = ac;
    d.stride_a = na > 2 ? ar * ac : 0;
    d.ldb = bc;
    d.stride_b = nb > 2 ? br * bc : 0;
    d.ldc = n;
    d.stride_c = m * n;
    if (m > DIM_MAX || n > DIM_MAX || ka > DIM_MAX || batch > DIM_MAX)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: m=%zu n=%zu k=%zu batch=%zu: each must be at most %zu", op, m, n,
                          ka, batch, DIM_MAX);
    return run(ctx, op, &d, A, B, C);
}

/* ---- linear layers: GEMM with a bias/GELU epilogue ----------------------------- */
wbcl_status wbcl__gemm_set_linear_mode(wbcl_context *ctx, int mode)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (mode < 0 || mode > 2)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl__gemm_set_linear_mode: mode %d is not 0, 1 or 2",
                          mode);
    ctx->gemm_linear_mode = mode;
    return WBCL_SUCCESS;
}

/* The unfused tail: y = act(y + bias) over (m, n). */
static wbcl_status bias_act_pass(wbcl_context *ctx, wbcl_tensor *Y, size_t m, size_t n,
                                 const wbcl_tensor *bias, int gelu)
{
    const int vec = n % 8 == 0;
    if (vec) n /= 8;
    wbcl_kern *k;
    wbcl_status st = wbcl__kernel(ctx, "gemm", NULL, vec ? "wbcl_gemm_bias_act8" : "wbcl_gemm_bias_act", &k);
    if (st) return st;
    cl_uint un = (cl_uint)n, um = (cl_uint)m;
    cl_int g = gelu;
    WBCL_ARG(ctx, k, 0, Y->mem);
    WBCL_ARG(ctx, k, 1, bias->mem);
    WBCL_ARG(ctx, k, 2, un);
    WBCL_ARG(ctx, k, 3, um);
    WBCL_ARG(ctx, k, 4, g);
    /* groups of 256 items, the contiguous dimension first (PoCL's own choice for 2-D ranges
     * was one short row per group) */
    const size_t l0 = n < 64 ? n : 64, l1 = 256 / l0 < m ? 256 / l0 : m;
    size_t global[2] = {n, m}, local[2] = {l0, l1};
    return wbcl__launch(ctx, k, 2, global, local);
}

wbcl_status wbcl__gemm_linear(wbcl_context *ctx, const wbcl_tensor *X, size_t m, size_t k, const wbcl_tensor *W,
                              size_t n, const wbcl_tensor *bias, int gelu, wbcl_tensor *Y)
{
    static const char op[] = "linear layer";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_common(ctx, op, WBCL_NO_TRANS, WBCL_TRANS, X, W, Y);
    if (!st && bias) st = wbcl__check_tensor(ctx, bias, op, "bias");
    if (st) return st;
    if (gelu && !bias) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: GELU needs a bias", op);
    if (!m || !n || !k || m > DIM_MAX || n > DIM_MAX || k > DIM_MAX || (size_t)UINT32_MAX / n < m)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: m=%zu n=%zu k=%zu: each must be positive, m*n < 2^32", op, m,
                          n, k);
    if (bias && bias->numel != n)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: bias has %zu elements, the output %zu columns", op,
                          bias->numel, n);
    wbcl_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.ta = WBCL_NO_TRANS;
    d.tb = WBCL_TRANS;
    d.m = m;
    d.n = n;
    d.k = k;
    d.batch = 1;
    d.alpha = 1.0f;
    d.beta = 0.0f;
    d.lda = d.ldb = k;
    d.ldc = n;
    st = check_operand(ctx, op, "X", X, 0, k, 0, m, k, 1);
    if (!st) st = check_operand(ctx, op, "W", W, 0, k, 0, n, k, 1);
    if (!st) st = check_operand(ctx, op, "Y", Y, 0, n, 0, m, n, 1);
    if (st) return st;
    /* a few rows: one pass over W, on either backend */
    if (m <= WBCL_GEMV_ROWS && ctx->gemm_linear_mode == 0 && X->dtype == WBCL_F32 && W->dtype == WBCL_F32 &&
        Y->dtype == WBCL_F32)
        return wbcl__gemv_linear(ctx, X, m, k, W, n, bias, gelu, Y);
    /* fused: the packed backend in one launch (no split of the packed panels needed) */
    const size_t MR = (size_t)ctx->params.gemm_mr, NR = (size_t)ctx->params.gemm_nr;
    const size_t limit = (size_t)(ctx->info.max_alloc_size / sizeof(float));
    const size_t pb = (n + NR - 1) / NR, pa = (m + MR - 1) / MR, kpad = (k + KBLK - 1) / KBLK * KBLK;
    /* the condition under which run_packed splits nothing */
    const int one_launch = MR >= 1 && NR >= 1 && kpad <= limit / MR && k <= limit / NR && pb * NR <= limit / k &&
                           pa * MR <= limit / kpad;
    if (ctx->gemm_backend == WBCL_GEMM_PACKED && ctx->gemm_linear_mode != 2 && one_launch) {
        gemm_epilogue e = {bias, gelu, ctx->gemm_linear_mode == 0};
        return run_packed(ctx, op, &d, X, W, Y, &e);
    }
    /* fused: the tiled backend applies bias and GELU in its store (not in the unfused mode 2) */
    if (ctx->gemm_backend == WBCL_GEMM_TILED && ctx->gemm_linear_mode != 2 && bias && bias->dtype == WBCL_F32) {
        gemm_epilogue e = {bias, gelu, 0};
        return run_tiled(ctx, op, &d, X, W, Y, &e);
    }
    st = run(ctx, op, &d, X, W, Y);
    if (!st && bias) st = bias_act_pass(ctx, Y, m, n, bias, gelu);
    return st;
}
