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
 *   WBCL_GT_DB              1: two local-memory slices (gemm.tiled.db): the next
 *                           slice is stored into the other buffer after this one
 *                           is multiplied, so one barrier per slice instead of two
 *   WBCL_GT_VA, WBCL_GT_VB  1: A (B) is read as float4 groups of 4 consecutive
 *                           stored elements, each work-item taking whole groups
 *                           (the host sets them with gemm.tiled.v4 = 1 where the
 *                           operand is float32, its ld, offset, batch stride and
 *                           row length are multiples of 4; not 64 x 64 x 8)
 *   WBCL_GT_EPI             the linear layers' epilogue (wbcl__gemm_linear): 0 none,
 *                           1: C[i][j] += bias[j], 2: then GELU (wbcl_gelu1), applied
 *                           after alpha and beta, before the store: the same float as
 *                           the separate pass wbcl_gemm_bias_act computes on the
 *                           stored C, one read and write of C less. `bias` (the last
 *                           argument) is read only when WBCL_GT_EPI > 0.
 * The storage of A and B (float, or half through vload_half) is the argument
 * `flags`, a uniform branch in the loads (on PoCL each program is a cold
 * compile of about 3 s).
 * Core OpenCL C 1.2 functions only; compute and accumulation stay float32.
 * Local memory: 4 TK (TM + TN + 8) bytes (8.25 KiB at 128 x 128 x 8), twice that with
 * WBCL_GT_DB.
 * Registers (tools/gpu-check.sh, ptxas sm_90, no spill or stack): 125 at 128 x 128 x 8
 * (two work-groups per SM), 150 at x 16, 197 at x 32, 57 at 64 x 64 x 8; with DB, VA and VB 118 at
 * 128 x 128 x 8, with VA and VB alone 133 there, with DB alone 56 at 64 x 64 x 8.
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
#ifndef WBCL_GT_DB
#define WBCL_GT_DB 0
#endif
#ifndef WBCL_GT_VA
#define WBCL_GT_VA 0
#endif
#ifndef WBCL_GT_VB
#define WBCL_GT_VB 0
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

#define NBUF (1 + WBCL_GT_DB) /* local-memory slices: one, or two (double buffering) */
#define VA WBCL_GT_VA
#define VB WBCL_GT_VB
#define A_PER4 (A_PER / 4) /* float4 groups of A (VA) or B (VB) each work-item copies */
#define B_PER4 (B_PER / 4)

#if (TM != 64 && TM != 128) || (TN != 64 && TN != 128) || (TK != 8 && TK != 16 && TK != 32)
#error "WBCL_GT_TM and WBCL_GT_TN must be 64 or 128, WBCL_GT_TK 8, 16 or 32"
#endif
#if (VA && A_PER % 4) || (VB && B_PER % 4)
#error "WBCL_GT_VA / WBCL_GT_VB need whole float4 groups per work-item (not 64 x 64 x 8)"
#endif

/* flags (a kernel argument: one program serves every storage of A and B) */
#define GT_A_HALF 1u /* A stored as half */
#define GT_B_HALF 2u /* B stored as half */
#define TA WBCL_GT_TA
#define TB WBCL_GT_TB

#ifndef WBCL_GT_C_HALF
#define WBCL_GT_C_HALF 0
#endif
#ifndef WBCL_GT_EPI
#define WBCL_GT_EPI 0
#endif
#if WBCL_GT_EPI == 0
#define GT_EPI(x, j) (x)
#elif WBCL_GT_EPI == 1
#define GT_EPI(x, j) ((x) + bias[j])
#else
#define GT_EPI(x, j) wbcl_gelu1((x) + bias[j])
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
    const uint k, const float alpha, const float beta, const uint flags, __global const float *restrict bias)
{
    const uint a_half = flags & GT_A_HALF, b_half = flags & GT_B_HALF;
    __global const half *Ah = (__global const half *)A, *Bh = (__global const half *)B;
#if WBCL_GT_C_HALF
    __global half *Ch = (__global half *)C;
#endif
    __local float4 As4[NBUF * TK * LDA_S / 4], Bs4[NBUF * TK * LDB_S / 4];
    __local float *As = (__local float *)As4, *Bs = (__local float *)Bs4;
    const uint tx = get_local_id(0), ty = get_local_id(1), lid = ty * 16 + tx;
    const uint n0 = get_group_id(0) * TN, m0 = get_group_id(1) * TM, b = get_global_id(2);
    const ulong a0 = off_a + (ulong)b * stride_a, b0 = off_b + (ulong)b * stride_b;

    float ra[A_PER], rb[B_PER];
    /* Element (i, p) of op(A) is A[i*lda + p] (N) or A[p*lda + i] (T); (p, j) of op(B) is
     * B[p*ldb + j] (N) or B[j*ldb + p] (T). The loads run along A's and B's stored rows. */
    const ulong a_si = TA ? 1 : lda, a_sp = TA ? lda : 1, b_sj = TB ? ldb : 1, b_sp = TB ? 1 : ldb;
#if VA /* float4 groups along A's stored rows: 4 consecutive elements of the slice's order */
#define A_ELEM(s) (4 * (lid + ((s) / 4) * GT_NT) + (s) % 4)
#define LOAD_A(k0)                                                                            \
    _Pragma("unroll") for (uint s4 = 0; s4 < A_PER4; s4++) {                                  \
        const uint2 q = gt_place(A_ELEM(4 * s4), TA, TM);                                     \
        const uint i = m0 + q.x, p = (k0) + q.y;                                              \
        float4 x = (float4)(0.0f);                                                            \
        if (i < m && p < k) x = *(__global const float4 *)(A + a0 + i * a_si + p * a_sp);     \
        ra[4 * s4] = x.s0, ra[4 * s4 + 1] = x.s1, ra[4 * s4 + 2] = x.s2, ra[4 * s4 + 3] = x.s3; \
    }
#else
#define A_ELEM(s) (lid + (s) * GT_NT)
#define LOAD_A(k0)                                                                            \
    _Pragma("unroll") for (uint s = 0; s < A_PER; s++) {                                      \
        const uint2 q = gt_place(A_ELEM(s), TA, TM);                                          \
        const uint i = m0 + q.x, p = (k0) + q.y;                                              \
        const ulong at = a0 + i * a_si + p * a_sp;                                            \
        float x = 0.0f;                                                                       \
        if (i < m && p < k) x = a_half ? vload_half(at, Ah) : A[at];                          \
        ra[s] = x;                                                                            \
    }
#endif
#if VB
#define B_ELEM(s) (4 * (lid + ((s) / 4) * GT_NT) + (s) % 4)
#define LOAD_B(k0)                                                                            \
    _Pragma("unroll") for (uint s4 = 0; s4 < B_PER4; s4++) {                                  \
        const uint2 q = gt_place(B_ELEM(4 * s4), !TB, TN);                                    \
        const uint j = n0 + q.x, p = (k0) + q.y;                                              \
        float4 x = (float4)(0.0f);                                                            \
        if (j < n && p < k) x = *(__global const float4 *)(B + b0 + j * b_sj + p * b_sp);     \
        rb[4 * s4] = x.s0, rb[4 * s4 + 1] = x.s1, rb[4 * s4 + 2] = x.s2, rb[4 * s4 + 3] = x.s3; \
    }
#else
#define B_ELEM(s) (lid + (s) * GT_NT)
#define LOAD_B(k0)                                                                            \
    _Pragma("unroll") for (uint s = 0; s < B_PER; s++) {                                      \
        const uint2 q = gt_place(B_ELEM(s), !TB, TN);                                         \
        const uint j = n0 + q.x, p = (k0) + q.y;                                              \
        const ulong at = b0 + j * b_sj + p * b_sp;                                            \
        float x = 0.0f;                                                                       \
        if (j < n && p < k) x = b_half ? vload_half(at, Bh) : B[at];                          \
        rb[s] = x;                                                                            \
    }
#endif
#define LOAD_SLICE(k0)                                                                        \
    do {                                                                                      \
        LOAD_A(k0)                                                                            \
        LOAD_B(k0)                                                                            \
    } while (0)
/* the registers of a slice into local-memory buffer `buf` (each element at its place) */
#define STORE_SLICE(buf)                                                                      \
    do {                                                                                      \
        _Pragma("unroll") for (uint s = 0; s < A_PER; s++) {                                  \
            const uint2 q = gt_place(A_ELEM(s), TA, TM);                                      \
            As[((buf) * TK + q.y) * LDA_S + q.x] = ra[s];                                     \
        }                                                                                     \
        _Pragma("unroll") for (uint s = 0; s < B_PER; s++) {                                  \
            const uint2 q = gt_place(B_ELEM(s), !TB, TN);                                     \
            Bs[((buf) * TK + q.y) * LDB_S + q.x] = rb[s];                                     \
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

/* the register block += the slice in buffer `buf` */
#define MULTIPLY_SLICE(buf)                                                                   \
    do {                                                                                      \
        /* full unrolling hoists the local reads: 157 registers at 128 x 8 instead of 125 */  \
        _Pragma("unroll 4") for (uint kk = (buf) * TK; kk < (buf) * TK + TK; kk++) {          \
            float4 av[GM], bv[GN];                                                            \
            _Pragma("unroll") for (int g = 0; g < GM; g++) av[g] = As4[(kk * LDA_S + g * 64) / 4 + ty]; \
            _Pragma("unroll") for (int h = 0; h < GN; h++) bv[h] = Bs4[(kk * LDB_S + h * 64) / 4 + tx]; \
            _Pragma("unroll") for (int g = 0; g < GM; g++)                                    \
                _Pragma("unroll") for (int h = 0; h < GN; h++) {                              \
                    GT_FMA_ROW(4 * g + 0, 4 * h, av[g].s0, bv[h]);                            \
                    GT_FMA_ROW(4 * g + 1, 4 * h, av[g].s1, bv[h]);                            \
                    GT_FMA_ROW(4 * g + 2, 4 * h, av[g].s2, bv[h]);                            \
                    GT_FMA_ROW(4 * g + 3, 4 * h, av[g].s3, bv[h]);                            \
                }                                                                             \
        }                                                                                     \
    } while (0)

    LOAD_SLICE(0u);
#if WBCL_GT_DB
    /* two buffers: the next slice goes into the other one while this one is read, so one
     * barrier per slice (its writers and the readers of the buffer it overwrites are apart) */
    STORE_SLICE(0u);
    barrier(CLK_LOCAL_MEM_FENCE);
    uint cur = 0;
    for (uint k0 = 0; k0 < k; k0 += TK, cur ^= 1u) {
        const int more = k0 + TK < k;
        if (more) LOAD_SLICE(k0 + TK); /* in flight while this slice is multiplied */
        MULTIPLY_SLICE(cur);
        if (more) STORE_SLICE(cur ^ 1u);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#else
    for (uint k0 = 0; k0 < k; k0 += TK) {
        STORE_SLICE(0u);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (k0 + TK < k) LOAD_SLICE(k0 + TK); /* in flight while this slice is multiplied */
        MULTIPLY_SLICE(0u);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
#undef LOAD_SLICE
#undef STORE_SLICE
#undef MULTIPLY_SLICE
#undef LOAD_A
#undef LOAD_B
#undef A_ELEM
#undef B_ELEM
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
            vstore_half_rte(GT_EPI(y, j), at, Ch);
        }
#else
#pragma unroll
        for (int c = 0; c < 4 * GN; c++) {
            const uint j = n0 + (uint)(c / 4) * 64 + 4 * tx + (uint)(c % 4);
            if (j >= n) continue;
            const ulong at = cb + (ulong)i * ldc + j;
            float x = alpha * acc[r][c];
            if (beta != 0.0f) x += beta * C[at];
            C[at] = GT_EPI(x, j);
        }
#endif
    }
}
