/* wbcl — packed register-tile SGEMM, the CPU-shaped GEMM (see ../shared/PERF-NOTES.md).
 *
 *   C = alpha * op(A) * op(B) + beta * C      (row-major, batched, strided)
 *
 * Two steps, all driven by host/ops/gemm.c:
 *   1. wbcl_gemm_pack_{a,b}_{x,p} copy op(A) into MR-row panels and op(B)
 *      into NR-column panels, each panel contiguous over k, A's in k-blocks of 16:
 *         Ap[b][ip][p/16][r][p%16] = op(A)_b[ip*MR + r][p]   (0 where ip*MR + r >= m;
 *                                    a panel holds k rounded up to 16, the pad unread)
 *         Bp[b][jp][p][c] = op(B)_b[p][jp*NR + c]            (0 where jp*NR + c >= n)
 *      Transposes, leading dimensions, offsets and batch strides are resolved
 *      here, so the main kernel sees only unit-stride streams and full tiles.
 *   2. wbcl_gemm_packed: each work-item owns one MR x NR tile of C in
 *      registers (MR rows x NR/VW vectors of VW floats: 12 x 2 float16 = 24
 *      zmm accumulators for the CPU default 12 x 32), streams its A and B panels
 *      over k with FMAs, then writes alpha*acc + beta*C with edge masking. No
 *      local memory, no barriers: PoCL turns each work-item into a straight
 *      loop that LLVM keeps in registers.
 *
 * WBCL_GEMM_MR (1..16) and WBCL_GEMM_NR (4, 8, 16, 32 or 64) come from the
 * per-device parameter table; the host validates them before building.
 *
 * float16 storage (compute stays float32), two independent specializations:
 *   -DWBCL_GEMM_SRC_HALF=1  the pack kernels read a half source (vload_half*);
 *                           the packed panels are float, so the main kernel is
 *                           the same for any mix of A and B dtypes.
 *   -DWBCL_GEMM_C_HALF=1    wbcl_gemm_packed reads (beta != 0) and writes C as
 *                           half (vload_half*, vstore_half*_rte: round to
 *                           nearest even, once, after alpha and beta).
 * Core OpenCL C 1.2 functions: no cl_khr_fp16 needed.
 *
 * Two optional build options of wbcl_gemm_packed (host/ops/gemm.c,
 * wbcl__gemm_linear; both default to 0, which is the plain GEMM above):
 *   WBCL_GEMM_EPILOGUE  1: C = alpha*acc + beta*C + bias[j] (extra argument
 *                       `bias`, n floats); 2: the same, then the exact GELU
 *                       x Phi(x) (wbcl_gelu16 etc. in common.cl). Saves the
 *                       separate pass over C that adding a bias (and GELU)
 *                       after the product would take.
 *   WBCL_GEMM_A_ROWS    1: op(A) is read in place as row-major (m, k) rows
 *                       (extra arguments off_a, lda; argument Ap is A itself)
 *                       instead of from packed panels: no packing pass over A.
 *                       The MR rows of a tile are MR unit-stride streams; rows
 *                       past m reread row m - 1 (their results are not stored).
 * OpenCL C 1.2. */

#ifndef WBCL_GEMM_EPILOGUE
#define WBCL_GEMM_EPILOGUE 0
#endif
#ifndef WBCL_GEMM_A_ROWS
#define WBCL_GEMM_A_ROWS 0
#endif

#define MR WBCL_GEMM_MR
#define NR WBCL_GEMM_NR

#if MR < 1 || MR > 16
#error "WBCL_GEMM_MR must be in 1..16"
#endif

#if NR == 64
#define VW 16
#define NV 4
#elif NR == 32
#define VW 16
#define NV 2
#elif NR == 16
#define VW 16
#define NV 1
#elif NR == 8
#define VW 8
#define NV 1
#elif NR == 4
#define VW 4
#define NV 1
#else
#error "WBCL_GEMM_NR must be 4, 8, 16, 32 or 64"
#endif

#define WBCL_CAT_(a, b) a##b
#define WBCL_CAT(a, b) WBCL_CAT_(a, b)
#define floatV WBCL_CAT(float, VW)
#define vloadV WBCL_CAT(vload, VW)
#define vstoreV WBCL_CAT(vstore, VW)

#ifndef WBCL_GEMM_SRC_HALF
#define WBCL_GEMM_SRC_HALF 0
#endif
#ifndef WBCL_GEMM_C_HALF
#define WBCL_GEMM_C_HALF 0
#endif

/* element type of the packed source; SRC_LOADn(i, p): n values from p + i*n, as floats */
#if WBCL_GEMM_SRC_HALF
#define SRC_T half
#define SRC_LOAD(i, p) vload_half((i), (p))
#define SRC_LOAD4(i, p) vload_half4((i), (p))
#define SRC_LOAD8(i, p) vload_half8((i), (p))
#define SRC_LOAD16(i, p) vload_half16((i), (p))
#else
#define SRC_T float
#define SRC_LOAD(i, p) ((p)[i])
#define SRC_LOAD4(i, p) vload4((i), (p))
#define SRC_LOAD8(i, p) vload8((i), (p))
#define SRC_LOAD16(i, p) vload16((i), (p))
#endif

/* element type of C; C_LOADV / C_STOREV move VW floats, C_LOAD / C_STORE one */
#if WBCL_GEMM_C_HALF
#define C_T half
#define C_LOADV(i, p) WBCL_CAT(vload_half, VW)((i), (p))
#define C_STOREV(x, i, p) WBCL_CAT(WBCL_CAT(vstore_half, VW), _rte)((x), (i), (p))
#define C_LOAD(i, p) vload_half((i), (p))
#define C_STORE(x, i, p) vstore_half_rte((x), (i), (p))
#else
#define C_T float
#define C_LOADV(i, p) vloadV((i), (p))
#define C_STOREV(x, i, p) vstoreV((x), (i), (p))
#define C_LOAD(i, p) ((p)[i])
#define C_STORE(x, i, p) ((p)[i] = (x))
#endif

/* Packing. Element (x, p) of the matrix being packed (x: row of op(A) or
 * column of op(B), p: the k index) is src[off + b*stride + x*sx + p*sp];
 * panel q holds x in [q*W, q*W + W), W = MR for A and NR for B, zero-padded.
 * Two kernels per operand, by which stride is 1 (the host picks); every one
 * runs over global (panels * ceil(k/16), batch), a work-item per block of 16
 * k values of one panel:
 *   _x  (sx == 1: a panel's W values of one p are contiguous in src; B as
 *        stored, A transposed).
 *   _p  (sp == 1: src rows run along k; A as stored, B transposed).
 * A as stored is the common case (activations times weights), and A's
 * k-blocked layout makes its packing a plain copy of row segments; B as
 * stored is a copy of runs of NR floats. The transposed cases transpose. */
#define WBCL_GEMM_PACK_P(W)                                                                   \
    const uint i = get_global_id(0), b = get_global_id(1), nblk = (k + 15) / 16;              \
    if (i >= nblk * panels) return;                                                           \
    const uint panel = i / nblk, p0 = (i - panel * nblk) * 16;                                \
    const uint x0 = panel * (W);                                                              \
    const __global SRC_T *s = src + off + (ulong)b * stride + (ulong)x0 * sx + p0;            \
    __global float *d = dst + (((ulong)b * panels + panel) * k + p0) * (W);                   \
    if (x0 + (W) <= rows && p0 + 16 <= k) {                                                   \
        float t[W][16];                                                                       \
        _Pragma("unroll") for (uint r = 0; r < (W); r++)                                      \
            vstore16(SRC_LOAD16(0, s + (ulong)r * sx), 0, t[r]);                              \
        _Pragma("unroll") for (uint q = 0; q < 16; q++)                                       \
            _Pragma("unroll") for (uint r = 0; r < (W); r++) d[q * (W) + r] = t[r][q];        \
    } else {                                                                                  \
        const uint np = min(16u, k - p0);                                                     \
        for (uint q = 0; q < np; q++)                                                         \
            for (uint r = 0; r < (W); r++)                                                    \
                d[q * (W) + r] = x0 + r < rows ? SRC_LOAD((ulong)r * sx + q, s) : 0.0f;        \
    }

#define WBCL_GEMM_PACK_ARGS                                                                   \
    __global const SRC_T *restrict src, const ulong off, const ulong stride, const ulong sx,  \
        const ulong sp, const uint rows, const uint k, const uint panels,                     \
        __global float *restrict dst

/* A's panels are stored in k-blocks of 16: Ap[b][ip][p / 16][r][p % 16] (panel stride
 * kpad * MR, kpad = k rounded up to 16; the pad of the last block is never read). As stored
 * (sp == 1), packing A is then a copy of MR row segments of 16 floats per block, no transpose.
 * Global (panels * nblk, batch), work-item panel * nblk + j packs block j of one panel. */
#define WBCL_GEMM_PACK_A_BLOCK                                                                \
    const uint i = get_global_id(0), b = get_global_id(1), nblk = (k + 15) / 16;              \
    if (i >= nblk * panels) return;                                                           \
    const uint panel = i / nblk, j = i - panel * nblk, p0 = j * 16, x0 = panel * MR;          \
    __global float *d = dst + (((ulong)b * panels + panel) * nblk + j) * (16 * MR);

__kernel void wbcl_gemm_pack_a_p(WBCL_GEMM_PACK_ARGS)
{
    (void)sp;
    WBCL_GEMM_PACK_A_BLOCK
    const __global SRC_T *s = src + off + (ulong)b * stride + (ulong)x0 * sx + p0;
    if (p0 + 16 <= k) {
#pragma unroll
        for (uint r = 0; r < MR; r++)
            vstore16(x0 + r < rows ? SRC_LOAD16(0, s + (ulong)r * sx) : (float16)(0.0f), r, d);
    } else {
        const uint np = k - p0;
        for (uint r = 0; r < MR; r++)
            for (uint q = 0; q < np; q++) d[r * 16 + q] = x0 + r < rows ? SRC_LOAD((ulong)r * sx + q, s) : 0.0f;
    }
}

/* A transposed (sx == 1: the MR values of one p are contiguous): the same blocks, transposed. */
__kernel void wbcl_gemm_pack_a_x(WBCL_GEMM_PACK_ARGS)
{
    (void)sx;
    WBCL_GEMM_PACK_A_BLOCK
    const __global SRC_T *s = src + off + (ulong)b * stride + (ulong)p0 * sp + x0;
    const uint np = min(16u, k - p0);
    for (uint q = 0; q < np; q++)
#pragma unroll
        for (uint r = 0; r < MR; r++) d[r * 16 + q] = x0 + r < rows ? SRC_LOAD((ulong)q * sp + r, s) : 0.0f;
}

/* B (layout above, unchanged). _x: B as stored (sx == 1): work-item j * panels + panel copies
 * 16 runs of NR floats (rows p0..p0+15 of one panel), so that neighbouring work-items read
 * neighbouring memory. Global (panels * nblk, batch). */
__kernel void wbcl_gemm_pack_b_x(WBCL_GEMM_PACK_ARGS)
{
    (void)sx;
    const uint i = get_global_id(0), b = get_global_id(1), nblk = (k + 15) / 16;
    if (i >= nblk * panels) return;
    const uint j = i / panels, panel = i - j * panels, p0 = j * 16, x0 = panel * NR;
    const uint np = min(16u, k - p0);
    const __global SRC_T *s = src + off + (ulong)b * stride + (ulong)p0 * sp + x0;
    __global float *d = dst + (((ulong)b * panels + panel) * k + p0) * NR;
    if (x0 + NR <= rows) {
        for (uint q = 0; q < np; q++) {
#if NR % 16 == 0
#pragma unroll
            for (uint v = 0; v < NR / 16; v++) vstore16(SRC_LOAD16(v, s + (ulong)q * sp), v, d + q * NR);
#elif NR == 8
            vstore8(SRC_LOAD8(0, s + (ulong)q * sp), 0, d + q * NR);
#else
            vstore4(SRC_LOAD4(0, s + (ulong)q * sp), 0, d + q * NR);
#endif
        }
    } else {
        for (uint q = 0; q < np; q++)
            for (uint c = 0; c < NR; c++) d[q * NR + c] = x0 + c < rows ? SRC_LOAD((ulong)q * sp + c, s) : 0.0f;
    }
}
__kernel void wbcl_gemm_pack_b_p(WBCL_GEMM_PACK_ARGS) { (void)sp; WBCL_GEMM_PACK_P(NR) }

/* global (tiles, batch). With cb == 0, tiles = pa * pb and tile t is mapped to
 * (row panel ip, column panel jp) in blocks of `mcb` row panels: the tiles of
 * one block of mcb*MR rows of C are visited column panel by column panel, then
 * the next block. Consecutive work-items (and work-groups, which PoCL hands out
 * to its threads in order) thus reuse one packed B panel mcb times and keep the
 * mcb A panels of a block hot in cache across all the column panels.
 * With cb > 0 (long k, where mcb A panels no longer fit a core's cache), a
 * work-group of mcb * cb work-items is a unit of mcb row panels x cb column
 * panels, run by one thread; units go down a column of C (ceil(pa / mcb) units),
 * then to the next cb column panels, so consecutive units share their B panels
 * and each unit's A panels serve cb tiles (global: units * mcb * cb).
 * a_batched/b_batched: 0 when one packed A (B) serves every batch entry.
 * beta == 0 never reads C. */
__kernel void wbcl_gemm_packed(__global const float *restrict Ap, __global const float *restrict Bp,
                               __global C_T *restrict C, const ulong off_c, const ulong ldc, const ulong stride_c,
                               const uint m, const uint n, const uint k, const uint a_batched, const uint b_batched,
                               const float alpha, const float beta, const uint mcb, const uint cb
#if WBCL_GEMM_A_ROWS
                               , const ulong off_a, const ulong lda
#endif
#if WBCL_GEMM_EPILOGUE
                               , __global const float *restrict bias
#endif
                               )
{
    const uint t = get_global_id(0), b = get_global_id(1);
    const uint pa = (m + MR - 1) / MR, pb = (n + NR - 1) / NR;
    uint ip, jp;
    if (cb) { /* units: work-group g is mcb row panels x cb column panels, column panel by column panel */
        const uint nrb = (pa + mcb - 1) / mcb, g = t / (mcb * cb), l = t - g * (mcb * cb);
        const uint cbk = g / nrb, jl = l / mcb;
        jp = cbk * cb + jl;
        ip = (g - cbk * nrb) * mcb + (l - jl * mcb);
        if (ip >= pa || jp >= pb) return;
    } else { /* blocks of mcb row panels, column panel by column panel */
        if (t >= pa * pb) return;
        const uint blk = t / (mcb * pb), rem = t - blk * (mcb * pb);
        const uint rows_blk = min(mcb, pa - blk * mcb);
        jp = rem / rows_blk;
        ip = blk * mcb + (rem - jp * rows_blk);
    }

#if WBCL_GEMM_A_ROWS
    (void)a_batched; /* the host uses A_ROWS for batch 1 only */
    const __global float *arow[MR];
#pragma unroll
    for (int r = 0; r < MR; r++) arow[r] = Ap + off_a + (ulong)min(ip * MR + (uint)r, m - 1) * lda;
#else
    const uint kpad = (k + 15) & ~15u;
    const __global float *a = Ap + ((ulong)(a_batched ? b : 0) * pa + ip) * kpad * MR;
#endif
    const __global float *bp = Bp + ((ulong)(b_batched ? b : 0) * pb + jp) * k * NR;

    floatV acc[MR][NV];
#pragma unroll
    for (int r = 0; r < MR; r++)
#pragma unroll
        for (int v = 0; v < NV; v++) acc[r][v] = (floatV)(0.0f);

#if WBCL_GEMM_A_ROWS
    for (uint p = 0; p < k; p++) {
        floatV bv[NV];
#pragma unroll
        for (int v = 0; v < NV; v++) bv[v] = vloadV(v, bp);
#pragma unroll
        for (int r = 0; r < MR; r++) {
            const floatV ar = (floatV)(arow[r][p]);
#pragma unroll
            for (int v = 0; v < NV; v++) acc[r][v] = fma(ar, bv[v], acc[r][v]);
        }
        bp += NR;
    }
#else
    /* one k step: B's NV vectors, MR broadcasts of A (column q of the current k-block) */
#define WBCL_GEMM_STEP(q)                                                                     \
    {                                                                                         \
        floatV bv[NV];                                                                        \
        _Pragma("unroll") for (int v = 0; v < NV; v++) bv[v] = vloadV(v, bp);                 \
        _Pragma("unroll") for (int r = 0; r < MR; r++) {                                      \
            const floatV ar = (floatV)(a[r * 16 + (q)]);                                      \
            _Pragma("unroll") for (int v = 0; v < NV; v++) acc[r][v] = fma(ar, bv[v], acc[r][v]); \
        }                                                                                     \
        bp += NR;                                                                             \
    }
#if WBCL_VARIANT_CPU
    /* whole k-blocks unrolled: a loop of 16 trips per block ends in a mispredicted branch
     * (1.03-1.05x at n = 1024-2048 on a Xeon, perf/RESULTS.md) */
    const uint kfull = k & ~15u;
    for (uint p0 = 0; p0 < kfull; p0 += 16) {
#pragma unroll
        for (uint q = 0; q < 16; q++) WBCL_GEMM_STEP(q)
        a += 16 * MR;
    }
    for (uint q = 0; q < k - kfull; q++) WBCL_GEMM_STEP(q)
#else
    /* GPUs (reached only when chosen explicitly): unrolling 16 steps doubles the spills */
    for (uint p0 = 0; p0 < k; p0 += 16) {
        const uint np = min(16u, k - p0);
        for (uint q = 0; q < np; q++) WBCL_GEMM_STEP(q)
        a += 16 * MR;
    }
#endif
#undef WBCL_GEMM_STEP
#endif

    const uint i0 = ip * MR, j0 = jp * NR;
    __global C_T *c = C + off_c + (ulong)b * stride_c + (ulong)i0 * ldc + j0;
    if (i0 + MR <= m && j0 + NR <= n) {
#if WBCL_GEMM_EPILOGUE
        floatV bias_v[NV];
#pragma unroll
        for (int v = 0; v < NV; v++) bias_v[v] = vloadV(v, bias + j0);
#endif
#pragma unroll
        for (int r = 0; r < MR; r++)
#pragma unroll
            for (int v = 0; v < NV; v++) {
                floatV x = alpha * acc[r][v];
                if (beta != 0.0f) x += beta * C_LOADV(v, c + (ulong)r * ldc);
#if WBCL_GEMM_EPILOGUE
                x += bias_v[v];
#if WBCL_GEMM_EPILOGUE == 2
                x = WBCL_CAT(wbcl_gelu, VW)(x);
#endif
#endif
                C_STOREV(x, v, c + (ulong)r * ldc);
            }
    } else {
        /* edge tile: r stays a compile-time index (unrolled) so acc is never
         * indexed dynamically and stays in registers */
        const uint mr = min((uint)MR, m - i0), nr = min((uint)NR, n - j0);
#if WBCL_GEMM_EPILOGUE
        /* the epilogue on whole vectors (bias 0 past n), then the nr valid columns stored:
         * the GELU stays vectorized on tiles narrower than NR (n = 24, 48 in the models) */
        floatV bias_v[NV];
        {
            float bb[NR];
            for (uint j = 0; j < NR; j++) bb[j] = j < nr ? bias[j0 + j] : 0.0f;
#pragma unroll
            for (int v = 0; v < NV; v++) bias_v[v] = vloadV(v, bb);
        }
#endif
#pragma unroll
        for (int r = 0; r < MR; r++) {
            if ((uint)r < mr) {
                float row[NR];
                __global C_T *cr = c + (ulong)r * ldc;
#if WBCL_GEMM_EPILOGUE
                if (beta != 0.0f)
                    for (uint j = 0; j < NR; j++) row[j] = j < nr ? C_LOAD(j, cr) : 0.0f;
#pragma unroll
                for (int v = 0; v < NV; v++) {
                    floatV x = alpha * acc[r][v];
                    if (beta != 0.0f) x += beta * vloadV(v, row);
                    x += bias_v[v];
#if WBCL_GEMM_EPILOGUE == 2
                    x = WBCL_CAT(wbcl_gelu, VW)(x);
#endif
                    vstoreV(x, v, row);
                }
                uint j = 0;
#pragma unroll
                for (int v = 0; v < NV; v++)
                    if (j + VW <= nr) {
                        C_STOREV(vloadV(v, row), 0, cr + j);
                        j += VW;
                    }
                for (; j < nr; j++) C_STORE(row[j], j, cr);
#else
#pragma unroll
                for (int v = 0; v < NV; v++) vstoreV(alpha * acc[r][v], v, row);
                if (beta != 0.0f)
                    for (uint j = 0; j < nr; j++) C_STORE(row[j] + beta * C_LOAD(j, cr), j, cr);
                else
                    for (uint j = 0; j < nr; j++) C_STORE(row[j], j, cr);
#endif
            }
        }
    }
}

/* The unfused tail of wbcl__gemm_linear (CLBlast backend, or the benchmarks' unfused mode):
 * y[i, j] = act(y[i, j] + bias[j]) on (m, n) row-major, act 1 = GELU. Range (n, m). */
__kernel void wbcl_gemm_bias_act(__global float *y, __global const float *bias, const uint n, const uint m,
                                 const int gelu)
{
    const uint j = get_global_id(0), i = get_global_id(1);
    if (j >= n || i >= m) return;
    const size_t x = (size_t)i * n + j;
    float v = y[x] + bias[j];
    if (gelu) v = wbcl_gelu1(v);
    y[x] = v;
}

/* The same on float8 vectors when n % 8 == 0 (explicit vector arithmetic is several times
 * faster than the scalar kernel on PoCL, CPU). Range (n / 8, m). */
__kernel void wbcl_gemm_bias_act8(__global float *y, __global const float *bias, const uint n8, const uint m,
                                  const int gelu)
{
    const uint j = get_global_id(0), i = get_global_id(1);
    if (j >= n8 || i >= m) return;
    const size_t x = (size_t)i * n8 + j;
    float8 v = vload8(x, y) + vload8(j, bias);
    if (gelu) v = wbcl_gelu8(v);
    vstore8(v, x, y);
}
