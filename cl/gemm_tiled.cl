/* wbcl — local-memory tiled SGEMM, the GPU-shaped GEMM (backend WBCL_GEMM_TILED,
 * host/ops/gemm.c run_tiled; the GEMM of GPU contexts by default). On an NVIDIA
 * H200 (perf/RESULTS.md, 2026-11-27): 33 TFLOP/s at 4096^3, 0.71x cuBLAS
 * (CLBlast 0.60x); 1024^3 0.85x with the 64 tile (perf/run_device.sh, gemm_peer).
 *
 *   C = alpha * op(A) * op(B) + beta * C      (row-major, batched, strided)
 *
 * One work-group of 16 x 16 work-items computes a TM x TN tile of C. Over k it
 * steps TK at a time: the TM x TK slice of op(A) and the TK x TN slice of op(B)
 * are copied into local memory (As[kk][i], Bs[kk][j], rows padded by 4 floats),
 * then every work-item multiplies its (TM/16) x (TN/16) register block out of
 * them: per kk, TM/64 + TN/64 float4 local reads feed (TM/16)(TN/16) FMAs
 * (8 x 8 = 64 FMAs for 4 float4 reads at the default 128 x 128).
 *
 * Work-item (tx, ty) owns rows g*64 + 4*ty + r and columns h*64 + 4*tx + c
 * (g < TM/64, h < TN/64, r, c < 4): its float4 reads of Bs are 16 consecutive
 * float4 across tx (no bank conflict), those of As are shared by the 16
 * work-items of a row (broadcast).
 *
 * The next k slice is loaded from global memory into registers while the
 * current one is multiplied (two barriers per slice). The copy into local
 * memory reads global memory along its contiguous direction, which depends on
 * the transposes: consecutive work-items read consecutive addresses of A and
 * B as stored. Every load is guarded (0 outside op(A) / op(B)), so any m, n, k
 * works; stores are guarded.
 *
 * Build options (host/ops/gemm.c; the host validates them):
 *   WBCL_GT_TM, WBCL_GT_TN  64 or 128 (gemm.tiled.tile)     WBCL_GT_TK  8, 16 or 32 (gemm.tiled.tk)
 *   WBCL_GT_TA, WBCL_GT_TB  0 / 1: op(A) = A^T (A stored (k, m)), op(B) = B^T
 *                           (B stored (n, k)); compile-time, so that the load
 *                           addresses stay simple (runtime flags cost ~100
 *                           registers on sm_90)
 *   WBCL_GT_C_HALF          1: C is stored as half (vload_half, vstore_half_rte,
 *                           once after alpha and beta)
 * The storage of A and B (float, or half through vload_half) is the argument
 * `flags`, a uniform branch in the loads (on PoCL each program is a cold
 * compile of about 3 s).
 * Core OpenCL C 1.2 functions only; compute and accumulation stay float32.
 * Local memory: 4 TK (TM + TN + 8) bytes (8.25 KiB at the default 128 x 128 x 8).
 * Registers (tools/gpu-check.sh, ptxas sm_90, no spill or stack): 125 at 128 x 128 x 8
 * (two work-groups per SM), 150 at x 16, 197 at x 32, 57 at 64 x 64 x 8.
 * OpenCL C 1.2. */

/* defaults: the host's (128 x 128 x 8, no transpose), so that the family builds without options */
#ifndef WBCL_GT_TM
#define WBCL_GT_TM 128
#endif
#ifndef WBCL_GT_TN
#define WBCL_GT_TN WBCL_GT_TM
#endif
#ifndef WBCL_GT_TK
#define WBCL_GT_TK 8
#endif
#ifndef WBCL_GT_TA
#define WBCL_GT_TA 0
#endif
#ifndef WBCL_GT_TB
#define WBCL_GT_TB 0
#endif
#define TM WBCL_GT_TM
#define TN WBCL_GT_TN
#define TK WBCL_GT_TK
#define GT_NT 256          /* work-items per work-group: 16 x 16 */
#define GM (TM / 64)       /* float4 row groups per work-item */
#define GN (TN / 64)       /* float4 column groups per work-item */
#define LDA_S (TM + 4)     /* padded local rows */
#define LDB_S (TN + 4)
#define A_PER (TM * TK / GT_NT) /* elements of the A slice each work-item copies */
#define B_PER (TN * TK / GT_NT)

#if (TM != 64 && TM != 128) || (TN != 64 && TN != 128) || (TK != 8 && TK != 16 && TK != 32)
#error "WBCL_GT_TM and WBCL_GT_TN must be 64 or 128, WBCL_GT_TK 8, 16 or 32"
#endif

/* flags (a kernel argument: one program serves every storage of A and B) */
#define GT_A_HALF 1u /* A stored as half */
#define GT_B_HALF 2u /* B stored as half */
#define TA WBCL_GT_TA
#define TB WBCL_GT_TB

#ifndef WBCL_GT_C_HALF
#define WBCL_GT_C_HALF 0
#endif

/* Element l of this work-item's share of a slice: its place (i: row of op(A) or column of
 * op(B), kk) in the slice. Consecutive work-items take consecutive addresses of the operand
 * as stored: along k when the stored rows run along k, along i otherwise. */
inline uint2 gt_place(const uint l, const uint along_i, const uint w)
{
    return (uint2)(along_i ? l % w : l / TK, along_i ? l / w : l % TK);
}

/* global (16 * ceil(n / TN), 16 * ceil(m / TM), batch), local (16, 16, 1).
 * The operands' offsets already include the first batch entry of the launch. */
__kernel __attribute__((reqd_work_group_size(16, 16, 1))) void wbcl_gemm_tiled(
    __global const float *restrict A, const ulong off_a, const ulong lda, const ulong stride_a,
    __global const float *restrict B, const ulong off_b, const ulong ldb, const ulong stride_b,
    __global float *restrict C, const ulong off_c, const ulong ldc, const ulong stride_c, const uint m, const uint n,
    const uint k, const float alpha, const float beta, const uint flags)
{
    const uint a_half = flags & GT_A_HALF, b_half = flags & GT_B_HALF;
    __global const half *Ah = (__global const half *)A, *Bh = (__global const half *)B;
#if WBCL_GT_C_HALF
    __global half *Ch = (__global half *)C;
#endif
    __local float4 As4[TK * LDA_S / 4], Bs4[TK * LDB_S / 4];
    __local float *As = (__local float *)As4, *Bs = (__local float *)Bs4;
    const uint tx = get_local_id(0), ty = get_local_id(1), lid = ty * 16 + tx;
    const uint n0 = get_group_id(0) * TN, m0 = get_group_id(1) * TM, b = get_global_id(2);
    const ulong a0 = off_a + (ulong)b * stride_a, b0 = off_b + (ulong)b * stride_b;

    float ra[A_PER], rb[B_PER];
    /* Element (i, p) of op(A) is A[i*lda + p] (N) or A[p*lda + i] (T); (p, j) of op(B) is
     * B[p*ldb + j] (N) or B[j*ldb + p] (T). The loads run along A's and B's stored rows. */
    const ulong a_si = TA ? 1 : lda, a_sp = TA ? lda : 1, b_sj = TB ? ldb : 1, b_sp = TB ? 1 : ldb;
#define LOAD_SLICE(k0)                                                                        \
    do {                                                                                      \
        _Pragma("unroll") for (uint s = 0; s < A_PER; s++) {                                  \
            const uint2 q = gt_place(lid + s * GT_NT, TA, TM);                                \
            const uint i = m0 + q.x, p = (k0) + q.y;                                          \
            const ulong at = a0 + i * a_si + p * a_sp;                                        \
            float x = 0.0f;                                                                   \
            if (i < m && p < k) x = a_half ? vload_half(at, Ah) : A[at];                      \
            ra[s] = x;                                                                        \
        }                                                                                     \
        _Pragma("unroll") for (uint s = 0; s < B_PER; s++) {                                  \
            const uint2 q = gt_place(lid + s * GT_NT, !TB, TN);                               \
            const uint j = n0 + q.x, p = (k0) + q.y;                                          \
            const ulong at = b0 + j * b_sj + p * b_sp;                                        \
            float x = 0.0f;                                                                   \
            if (j < n && p < k) x = b_half ? vload_half(at, Bh) : B[at];                      \
            rb[s] = x;                                                                        \
        }                                                                                     \
    } while (0)

    float acc[4 * GM][4 * GN];
/* acc[r][c0 .. c0 + 3] += a * b (b a float4) */
#define GT_FMA_ROW(r, c0, a, b)                                                               \
    do {                                                                                      \
        acc[r][(c0) + 0] = fma((a), (b).s0, acc[r][(c0) + 0]);                                \
        acc[r][(c0) + 1] = fma((a), (b).s1, acc[r][(c0) + 1]);                                \
        acc[r][(c0) + 2] = fma((a), (b).s2, acc[r][(c0) + 2]);                                \
        acc[r][(c0) + 3] = fma((a), (b).s3, acc[r][(c0) + 3]);                                \
    } while (0)
#pragma unroll
    for (int r = 0; r < 4 * GM; r++)
#pragma unroll
        for (int c = 0; c < 4 * GN; c++) acc[r][c] = 0.0f;

    LOAD_SLICE(0u);
    for (uint k0 = 0; k0 < k; k0 += TK) {
#pragma unroll
        for (uint s = 0; s < A_PER; s++) {
            const uint2 q = gt_place(lid + s * GT_NT, TA, TM);
            As[q.y * LDA_S + q.x] = ra[s];
        }
#pragma unroll
        for (uint s = 0; s < B_PER; s++) {
            const uint2 q = gt_place(lid + s * GT_NT, !TB, TN);
            Bs[q.y * LDB_S + q.x] = rb[s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (k0 + TK < k) LOAD_SLICE(k0 + TK); /* in flight while this slice is multiplied */
#pragma unroll 4 /* full unrolling hoists the local reads: 157 registers at 128 x 8 instead of 125 */
        for (uint kk = 0; kk < TK; kk++) {
            float4 av[GM], bv[GN];
#pragma unroll
            for (int g = 0; g < GM; g++) av[g] = As4[(kk * LDA_S + g * 64) / 4 + ty];
#pragma unroll
            for (int h = 0; h < GN; h++) bv[h] = Bs4[(kk * LDB_S + h * 64) / 4 + tx];
#pragma unroll
            for (int g = 0; g < GM; g++)
#pragma unroll
                for (int h = 0; h < GN; h++) {
                    GT_FMA_ROW(4 * g + 0, 4 * h, av[g].s0, bv[h]);
                    GT_FMA_ROW(4 * g + 1, 4 * h, av[g].s1, bv[h]);
                    GT_FMA_ROW(4 * g + 2, 4 * h, av[g].s2, bv[h]);
                    GT_FMA_ROW(4 * g + 3, 4 * h, av[g].s3, bv[h]);
                }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#undef LOAD_SLICE
#undef GT_FMA_ROW

    const ulong cb = off_c + (ulong)b * stride_c;
#pragma unroll
    for (int r = 0; r < 4 * GM; r++) {
        const uint i = m0 + (uint)(r / 4) * 64 + 4 * ty + (uint)(r % 4);
        if (i >= m) continue;
#if WBCL_GT_C_HALF
        /* the row through a small array: one vstore_half_rte per row instead of one per element
         * (each is a long inline sequence: 64 of them took PoCL ~20 s to compile, 8 about 3 s) */
        float x[4 * GN];
#pragma unroll
        for (int c = 0; c < 4 * GN; c++) x[c] = alpha * acc[r][c];
        for (int c = 0; c < 4 * GN; c++) {
            const uint j = n0 + (uint)(c / 4) * 64 + 4 * tx + (uint)(c % 4);
            if (j >= n) continue;
            const ulong at = cb + (ulong)i * ldc + j;
            float y = x[c];
            if (beta != 0.0f) y += beta * vload_half(at, Ch);
            vstore_half_rte(y, at, Ch);
        }
#else
#pragma unroll
        for (int c = 0; c < 4 * GN; c++) {
            const uint j = n0 + (uint)(c / 4) * 64 + 4 * tx + (uint)(c % 4);
            if (j >= n) continue;
            const ulong at = cb + (ulong)i * ldc + j;
            float x = alpha * acc[r][c];
            if (beta != 0.0f) x += beta * C[at];
            C[at] = x;
        }
#endif
    }
}
