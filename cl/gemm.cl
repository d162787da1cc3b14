/* wbcl — packed register-tile SGEMM, the CPU-shaped GEMM (see ../shared/PERF-NOTES.md).
 *
 *   C = alpha * op(A) * op(B) + beta * C      (row-major, batched, strided)
 *
 * Two steps, all driven by host/ops/gemm.c:
 *   1. wbcl_gemm_pack_{a,b}_{x,p} copy op(A) into MR-row panels and op(B)
 *      into NR-column panels, each panel contiguous over k:
 *         Ap[b][ip][p][r] = op(A)_b[ip*MR + r][p]   (0 where ip*MR + r >= m)
 *         Bp[b][jp][p][c] = op(B)_b[p][jp*NR + c]   (0 where jp*NR + c >= n)
 *      Transposes, leading dimensions, offsets and batch strides are resolved
 *      here, so the main kernel sees only unit-stride streams and full tiles.
 *   2. wbcl_gemm_packed: each work-item owns one MR x NR tile of C in
 *      registers (MR rows x NR/VW vectors of VW floats: 12 x 2 float16 = 24
 *      zmm accumulators for the CPU default 12 x 32), streams its A and B panels
 *      over k with FMAs, then writes alpha*acc + beta*C with edge masking. No
 *      local memory, no barriers: PoCL turns each work-item into a straight
 *      loop that LLVM keeps in registers.
 *
 * WBCL_GEMM_MR (1..16) and WBCL_GEMM_NR (4, 8, 16 or 32) come from the
 * per-device parameter table; the host validates them before building.
 * OpenCL C 1.2. */

#define MR WBCL_GEMM_MR
#define NR WBCL_GEMM_NR

#if MR < 1 || MR > 16
#error "WBCL_GEMM_MR must be in 1..16"
#endif

#if NR == 32
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
#error "WBCL_GEMM_NR must be 4, 8, 16 or 32"
#endif

#define WBCL_CAT_(a, b) a##b
#define WBCL_CAT(a, b) WBCL_CAT_(a, b)
#define floatV WBCL_CAT(float, VW)
#define vloadV WBCL_CAT(vload, VW)
#define vstoreV WBCL_CAT(vstore, VW)

/* Packing. Element (x, p) of the matrix being packed (x: row of op(A) or
 * column of op(B), p: the k index) is src[off + b*stride + x*sx + p*sp];
 * panel q holds x in [q*W, q*W + W), W = MR for A and NR for B, zero-padded.
 * Two kernels per operand, by which stride is 1 (the host picks):
 *   _x  (sx == 1: a panel's W values of one p are contiguous in src; B as
 *        stored, A transposed): global (k * panels, batch), work-item
 *        p*panels + q copies one contiguous run of W floats, so that
 *        neighbouring work-items read neighbouring memory.
 *   _p  (sp == 1: src rows run along k; A as stored, B transposed):
 *        global (panels * ceil(k/16), batch), work-item q*ceil(k/16) + j
 *        reads W rows of the 16 k values from 16*j and writes them
 *        transposed: 16*W contiguous floats. */
#define WBCL_GEMM_PACK_X(W)                                                                   \
    const uint i = get_global_id(0), b = get_global_id(1);                                    \
    if (i >= k * panels) return;                                                              \
    const uint p = i / panels, panel = i - p * panels;                                        \
    const uint x0 = panel * (W);                                                              \
    const __global float *s = src + off + (ulong)b * stride + (ulong)p * sp + x0;             \
    __global float *d = dst + (((ulong)b * panels + panel) * k + p) * (W);                    \
    if (x0 + (W) <= rows) { /* the widths below are compile-time: one branch remains */      \
        if ((W) % 16 == 0) {                                                                  \
            _Pragma("unroll") for (uint r = 0; r < (W) / 16; r++) vstore16(vload16(r, s), r, d); \
        } else if ((W) % 8 == 0) {                                                            \
            _Pragma("unroll") for (uint r = 0; r < (W) / 8; r++) vstore8(vload8(r, s), r, d); \
        } else if ((W) % 4 == 0) {                                                            \
            _Pragma("unroll") for (uint r = 0; r < (W) / 4; r++) vstore4(vload4(r, s), r, d); \
        } else {                                                                              \
            _Pragma("unroll") for (uint r = 0; r < (W); r++) d[r] = s[r];                     \
        }                                                                                     \
    } else {                                                                                  \
        _Pragma("unroll") for (uint r = 0; r < (W); r++) d[r] = x0 + r < rows ? s[r] : 0.0f;  \
    }

#define WBCL_GEMM_PACK_P(W)                                                                   \
    const uint i = get_global_id(0), b = get_global_id(1), nblk = (k + 15) / 16;              \
    if (i >= nblk * panels) return;                                                           \
    const uint panel = i / nblk, p0 = (i - panel * nblk) * 16;                                \
    const uint x0 = panel * (W);                                                              \
    const __global float *s = src + off + (ulong)b * stride + (ulong)x0 * sx + p0;            \
    __global float *d = dst + (((ulong)b * panels + panel) * k + p0) * (W);                   \
    if (x0 + (W) <= rows && p0 + 16 <= k) {                                                   \
        float t[W][16];                                                                       \
        _Pragma("unroll") for (uint r = 0; r < (W); r++)                                      \
            vstore16(vload16(0, s + (ulong)r * sx), 0, t[r]);                                 \
        _Pragma("unroll") for (uint q = 0; q < 16; q++)                                       \
            _Pragma("unroll") for (uint r = 0; r < (W); r++) d[q * (W) + r] = t[r][q];        \
    } else {                                                                                  \
        const uint np = min(16u, k - p0);                                                     \
        for (uint q = 0; q < np; q++)                                                         \
            for (uint r = 0; r < (W); r++)                                                    \
                d[q * (W) + r] = x0 + r < rows ? s[(ulong)r * sx + q] : 0.0f;                 \
    }

#define WBCL_GEMM_PACK_ARGS                                                                   \
    __global const float *restrict src, const ulong off, const ulong stride, const ulong sx,  \
        const ulong sp, const uint rows, const uint k, const uint panels,                     \
        __global float *restrict dst

__kernel void wbcl_gemm_pack_a_x(WBCL_GEMM_PACK_ARGS) { (void)sx; WBCL_GEMM_PACK_X(MR) }
__kernel void wbcl_gemm_pack_a_p(WBCL_GEMM_PACK_ARGS) { (void)sp; WBCL_GEMM_PACK_P(MR) }
__kernel void wbcl_gemm_pack_b_x(WBCL_GEMM_PACK_ARGS) { (void)sx; WBCL_GEMM_PACK_X(NR) }
__kernel void wbcl_gemm_pack_b_p(WBCL_GEMM_PACK_ARGS) { (void)sp; WBCL_GEMM_PACK_P(NR) }

/* global (tiles, batch), tiles = pa * pb. Tile t is mapped to (row panel ip,
 * column panel jp) in blocks of `mcb` row panels: the tiles of one block of
 * mcb*MR rows of C are visited column panel by column panel, then the next
 * block. Consecutive work-items (and work-groups, which PoCL hands out to its
 * threads in order) thus reuse one packed B panel mcb times and keep the mcb
 * A panels of a block hot in cache across all the column panels.
 * a_batched/b_batched: 0 when one packed A (B) serves every batch entry.
 * beta == 0 never reads C. */
__kernel void wbcl_gemm_packed(__global const float *restrict Ap, __global const float *restrict Bp,
                               __global float *restrict C, const ulong off_c, const ulong ldc, const ulong stride_c,
                               const uint m, const uint n, const uint k, const uint a_batched, const uint b_batched,
                               const float alpha, const float beta, const uint mcb)
{
    const uint t = get_global_id(0), b = get_global_id(1);
    const uint pa = (m + MR - 1) / MR, pb = (n + NR - 1) / NR;
    if (t >= pa * pb) return;
    const uint blk = t / (mcb * pb), rem = t - blk * (mcb * pb);
    const uint rows_blk = min(mcb, pa - blk * mcb);
    const uint jp = rem / rows_blk, ip = blk * mcb + (rem - jp * rows_blk);

    const __global float *a = Ap + ((ulong)(a_batched ? b : 0) * pa + ip) * k * MR;
    const __global float *bp = Bp + ((ulong)(b_batched ? b : 0) * pb + jp) * k * NR;

    floatV acc[MR][NV];
#pragma unroll
    for (int r = 0; r < MR; r++)
#pragma unroll
        for (int v = 0; v < NV; v++) acc[r][v] = (floatV)(0.0f);

    for (uint p = 0; p < k; p++) {
        floatV bv[NV];
#pragma unroll
        for (int v = 0; v < NV; v++) bv[v] = vloadV(v, bp);
#pragma unroll
        for (int r = 0; r < MR; r++) {
            const floatV ar = (floatV)(a[r]);
#pragma unroll
            for (int v = 0; v < NV; v++) acc[r][v] = fma(ar, bv[v], acc[r][v]);
        }
        a += MR;
        bp += NR;
    }

    const uint i0 = ip * MR, j0 = jp * NR;
    __global float *c = C + off_c + (ulong)b * stride_c + (ulong)i0 * ldc + j0;
    if (i0 + MR <= m && j0 + NR <= n) {
#pragma unroll
        for (int r = 0; r < MR; r++)
#pragma unroll
            for (int v = 0; v < NV; v++) {
                floatV x = alpha * acc[r][v];
                if (beta != 0.0f) x += beta * vloadV(v, c + (ulong)r * ldc);
                vstoreV(x, v, c + (ulong)r * ldc);
            }
    } else {
        /* edge tile: r stays a compile-time index (unrolled) so acc is never
         * indexed dynamically and stays in registers */
        const uint mr = min((uint)MR, m - i0), nr = min((uint)NR, n - j0);
#pragma unroll
        for (int r = 0; r < MR; r++) {
            if ((uint)r < mr) {
                float row[NR];
#pragma unroll
                for (int v = 0; v < NV; v++) vstoreV(alpha * acc[r][v], v, row);
                __global float *cr = c + (ulong)r * ldc;
                if (beta != 0.0f)
                    for (uint j = 0; j < nr; j++) cr[j] = row[j] + beta * cr[j];
                else
                    for (uint j = 0; j < nr; j++) cr[j] = row[j];
            }
        }
    }
}
