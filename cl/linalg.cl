/* wbcl — dense SPD linear algebra: Cholesky building blocks, driven by host/ops/linalg.c.
 *
 * Matrices are row-major; a kernel sees matrix b of a batch at
 * M + off + b*stride with row stride ld (so the same kernels serve whole
 * small matrices and the diagonal blocks / panels of the blocked
 * factorization of large ones). Only the lower triangle of an input is read.
 *
 * Kernels (CPU-shaped: one matrix, or 16 rows / 16 columns, per work-item,
 * no local memory, inner loops over contiguous rows as float16 FMAs;
 * GPU-shaped: one matrix or one block per work-group, local memory, barriers):
 *   wbcl_chol_cm / wbcl_chol_blk_g       factor a kb x kb (diagonal) block
 *   wbcl_chol_panel / wbcl_chol_trsm_g   rows below it: X <- X L11^-T
 *   wbcl_chol_syrk_g                     GPU: right-looking trailing update (lower triangle)
 *   wbcl_chol_r128_g, wbcl_chol_upd_g    GPU, lookahead form: diagonal block (a row per
 *   (wbcl_chol_upd128_g)                 work-item); update tiles split by the next block
 *                                        column, the next panel's solve beside the rest
 *                                        (by 128 x 128 tiles for large trailing blocks)
 *   wbcl_chol_inv128_g                   GPU, lookahead form with WBCL_LA_PANEL_INV=1: the
 *                                        diagonal block's inverse, so that the panel is a
 *                                        product (wbcl_chol_upd_g mode 2)
 *   wbcl_chol_s32_g / wbcl_chol_s64_g    GPU: batches of n <= 32 / 64, a row per work-item
 *                                        (they write every matrix's status: no clearing)
 *   wbcl_trsm_inv / wbcl_trsm_cols_wg    X <- L11^-1 X or L11^-T X (solves)
 *   wbcl_la_trinv_g, wbcl_la_ltl_g       GPU inverse: L_II^-1 of the diagonal blocks, W^T W
 *   wbcl_chol_upd                        CPU: left-looking update from L kept packed
 *   wbcl_chol_upd_panel                  CPU: the update and the panel below the diagonal block
 *   wbcl_la_logdet, wbcl_la_identity, wbcl_la_mirror, wbcl_la_zero_right,
 *   wbcl_la_tril_g                       small helpers
 *
 * Non-SPD input: a pivot d = A_ii - sum_p L_ip^2 that is not > 0 or is
 * infinite (NaN fails "> 0") is recorded once per batch entry in info:
 * info[2b] = pivot index (+ pivot_base), info[2b+1] = the pivot's float bits;
 * the host initializes info[2b] to -1 and only the first failure is kept.
 * A NaN or Inf anywhere in the lower triangle reaches some pivot (every
 * L_ij enters the pivot of row i), so non-finite input is reported the same way.
 *
 * Complex Hermitian reuse: the arithmetic goes through the LA_* macros below
 * (c + a * conj(b), |a|^2, division by a real pivot). A complex variant
 * (-DLA_COMPLEX=1) would define la_t as float2 and these macros with the
 * conjugate; the loop structure, the info protocol and the host driver stay.
 * The float16 strips of the CPU kernels would become (re, im) pairs of strips.
 * OpenCL C 1.2. */

#ifndef LA_COMPLEX
#define LA_COMPLEX 0
#endif
#if LA_COMPLEX
#error "the complex Hermitian variant of the linalg kernels is not implemented yet"
#endif

typedef float la_t;
typedef float16 la_v;                          /* a CPU strip: 16 elements        */
#define LA_VW 16
#define LA_FMA_C(a, b, c) fma((a), (b), (c))   /* c + a * conj(b)                 */
#define LA_FMS_C(a, b, c) fma(-(a), (b), (c))  /* c - a * conj(b)                 */
#define LA_ABS2(a) ((a) * (a))                 /* |a|^2 (real)                    */
#define LA_DIVR(a, r) ((a) / (r))              /* a / r, r real                   */
#define LA_RE(a) (a)                           /* real part (pivots are real)     */

/* Largest block size the private arrays of the CPU kernels hold. */
#ifndef LA_NBMAX
#define LA_NBMAX 256
#endif
/* Largest block the GPU-shaped kernels keep in local memory. */
#ifndef LA_WG_NB
#define LA_WG_NB 64
#endif
#define LA_WG_LD (LA_WG_NB + 1)

static inline __attribute__((always_inline)) int la_bad_pivot(float d) { return !(d > 0.0f) || isinf(d); }

static inline __attribute__((always_inline)) void la_record(__global int *info, uint b, uint pivot, float d)
{
    if (info[2 * b] < 0) {
        info[2 * b] = (int)pivot;
        info[2 * b + 1] = as_int(d);
    }
}

/* Input element (i, j) of the operand: X[i][j] (+ U[i][j] when has_u; U is
 * the GEMM product -L21 L11^T etc. of the blocked algorithms). */
#define LA_IN(x, ldx, u, ldu, i, j) \
    (has_u ? (x)[(ulong)(i) * (ldx) + (j)] + (u)[(ulong)(i) * (ldu) + (j)] : (x)[(ulong)(i) * (ldx) + (j)])

/* Each variant's program holds only its own kernels (and the helpers). */
#if WBCL_VARIANT_CPU

/* The packed copy of L for the blocked path (see wbcl_chol_upd): row panels
 * of LA_UC rows, each n long and contiguous over the column index:
 *   P[(row / LA_UC) * n * LA_UC + col * LA_UC + row % LA_UC] = L[row][col]
 * Rows >= n of the last panel are written as 0 (la_pack_pad). LA_UR x LA_UH:
 * wbcl_chol_upd's register tile, LA_UR rows x LA_UH float16 accumulators
 * (LA_UH = 2: the panel's 32 columns at once, 1: 16 of them): 8 x 2 where a
 * float16 is one register (AVX-512: 16 of 32 zmm), 6 x 1 where it takes two
 * (AVX2: 12 of 16 ymm, the 32 rows as 6 + 6 + 6 + 6 + 4 + 4; on a Zen 3 at
 * n = 2048, 8 x 2 spilled, 2 x 2 ran 1.5x faster than it, 4 x 1 1.2x faster
 * again, 6 x 1 a median 6.6% less CPU time than 4 x 1: eight FMA chains
 * are just the FMA latency times two pipes, twelve leave slack;
 * perf/RESULTS.md).
 * WBCL_SIMD: the device's native float vector width. */
#if WBCL_SIMD >= 16
#define LA_UR 8
#define LA_UH 2
#else
#define LA_UR 6
#define LA_UH 1
#endif
#define LA_UC 32
static inline __attribute__((always_inline)) void la_pack_pad(__global float *P, uint n, uint col0, uint ncols)
{
    const uint e = (n + LA_UC - 1) / LA_UC * LA_UC;
    for (uint row = n; row < e; row++)
        for (uint c = col0; c < col0 + ncols; c++) P[(ulong)(row / LA_UC) * n * LA_UC + (ulong)c * LA_UC + row % LA_UC] = 0.0f;
}

/* ---- masked strips of 16 ---------------------------------------------------- */
/* 16 elements p[0], p[s], ..., p[15 s]; lanes >= cnt read as 0. */
static inline __attribute__((always_inline)) la_v la_gather(const __global float *p, ulong s, uint cnt)
{
    float t[LA_VW];
    if (cnt >= LA_VW) {
#pragma unroll
        for (uint l = 0; l < LA_VW; l++) t[l] = p[l * s];
    } else {
#pragma unroll
        for (uint l = 0; l < LA_VW; l++) t[l] = l < cnt ? p[l * s] : 0.0f;
    }
    return vload16(0, t);
}

static inline __attribute__((always_inline)) void la_scatter(la_v v, __global float *p, ulong s, uint cnt)
{
    float t[LA_VW];
    vstore16(v, 0, t);
    if (cnt >= LA_VW) {
#pragma unroll
        for (uint l = 0; l < LA_VW; l++) p[l * s] = t[l];
    } else {
        for (uint l = 0; l < cnt; l++) p[l * s] = t[l];
    }
}

/* A row of 16 contiguous elements, the first cnt of them (the rest read as 0). */
static inline __attribute__((always_inline)) la_v la_load_row(const __global float *p, uint cnt)
{
    return cnt >= LA_VW ? vload16(0, p) : la_gather(p, 1, cnt);
}

static inline __attribute__((always_inline)) void la_store_row(la_v v, __global float *p, uint cnt)
{
    if (cnt >= LA_VW) vstore16(v, 0, p);
    else la_scatter(v, p, 1, cnt);
}

/* ============================================================================
 * CPU: factor one kb x kb block per work-item.
 *
 * Left-looking on U = L^T kept row-major in the scratch W (row j of U is
 * column j of L, contiguous): for each j,
 *     U[j][j:kb] = A[j:kb][j] - sum_{p<j} U[p][j] * U[p][j:kb]
 *     U[j][j] = sqrt(pivot), U[j][j+1:kb] /= U[j][j]
 * The sums run over strips of up to 64 columns held in four float16
 * accumulators (one broadcast and four vector loads per four FMAs). W rows
 * have ldw >= roundup(kb, 32) + 64 floats so that a strip may run past the
 * end into padding whose (garbage) results are never used.
 * want_inv: also V = U^-1 = L^-T (upper, zeros below the diagonal and in the
 * padding columns up to roundup(kb, 32); ldv >= roundup(kb, 32) + 32), by rows
 * from the bottom: V[i][i:] = (e_i - sum_{p>i} U[i][p] V[p][i:]) / U[i][i]
 * (the panel and solve kernels multiply by it).
 * Reads A (+ U) (lower triangle of the block, column by column), writes L
 * (lower block plus zeros in the strict upper part of the block's rows up to
 * column kb + zcols). A may equal L (in place).
 * pk: also write the block (rows and columns from pivot_base, zeros above the
 * diagonal) into the packed copy of L at P (see wbcl_chol_upd; np = n of
 * the whole matrix). global: (batch). */
#define LA_CM_STRIP(NV, ROW, P0, P1, COEF, PROW)                                       \
    {                                                                                  \
        la_v s0 = vload16(0, ROW + c0), s1 = 0, s2 = 0, s3 = 0;                        \
        if (NV > 1) s1 = vload16(0, ROW + c0 + 16);                                    \
        if (NV > 2) { s2 = vload16(0, ROW + c0 + 32); s3 = vload16(0, ROW + c0 + 48); }\
        for (uint p = P0; p < P1; p++) {                                               \
            const la_t cf = COEF;                                                      \
            const __global float *pr = PROW;                                           \
            s0 = LA_FMS_C(cf, vload16(0, pr + c0), s0);                                \
            if (NV > 1) s1 = LA_FMS_C(cf, vload16(0, pr + c0 + 16), s1);               \
            if (NV > 2) {                                                              \
                s2 = LA_FMS_C(cf, vload16(0, pr + c0 + 32), s2);                       \
                s3 = LA_FMS_C(cf, vload16(0, pr + c0 + 48), s3);                       \
            }                                                                          \
        }                                                                              \
        vstore16(s0, 0, ROW + c0);                                                     \
        if (NV > 1) vstore16(s1, 0, ROW + c0 + 16);                                    \
        if (NV > 2) { vstore16(s2, 0, ROW + c0 + 32); vstore16(s3, 0, ROW + c0 + 48); }\
        c0 += 16 * NV;                                                                 \
    }
/* row ROW[c0..end) -= sum_{p in [P0, P1)} COEF * PROW[c0..end), strips of 64/32/16 */
#define LA_CM_ROW(ROW, START, END, P0, P1, COEF, PROW)                                 \
    for (uint c0 = START; c0 < END;) {                                                 \
        const uint rem = END - c0;                                                     \
        if (rem > 32) LA_CM_STRIP(4, ROW, P0, P1, COEF, PROW)                          \
        else if (rem > 16) LA_CM_STRIP(2, ROW, P0, P1, COEF, PROW)                     \
        else LA_CM_STRIP(1, ROW, P0, P1, COEF, PROW)                                   \
    }

__kernel void wbcl_chol_cm(__global const float *A, const ulong off_a, const ulong stride_a, const uint lda,
                           __global const float *U, const ulong off_u, const ulong stride_u, const uint ldu,
                           const uint has_u, __global float *L, const ulong off_l, const ulong stride_l,
                           const uint ldl, __global float *W, const uint ldw, const uint kb, const uint batch,
                           const uint zcols, __global int *info, const uint pivot_base, const uint want_inv,
                           __global float *V, const ulong off_v, const ulong stride_v, const uint ldv,
                           __global float *P, const ulong stride_p, const uint np, const uint pk)
{
    const uint b = get_global_id(0);
    if (b >= batch) return;
    const __global float *a = A + off_a + (ulong)b * stride_a;
    const __global float *u = U + off_u + (ulong)b * stride_u;
    __global float *l = L + off_l + (ulong)b * stride_l;
    __global float *w = W + (ulong)b * kb * ldw;
    int fail = -1;
    float fval = 0.0f;
    /* the padding the strips run into is zeroed: uninitialised, it made the
     * factor of a 128 block up to 7x slower in some processes and not in
     * others (likely stale denormals: FMAs on them take microcode assists,
     * though their results are unused); perf/RESULTS.md, issue 5 */
    for (uint i = 0; i < kb; i++)
        for (uint c = kb; c < kb + 64; c++) w[(ulong)i * ldw + c] = 0.0f;
    /* (Reading the block by rows in 16 x 16 tiles transposed in registers
     * instead of this column gather made the factor kernel 9-18% faster but
     * PoCL's compile of the program 27 s longer: perf/RESULTS.md.) */
    for (uint j = 0; j < kb; j++) {
        __global float *wj = w + (ulong)j * ldw;
        if (has_u)
            for (uint i = j; i < kb; i++) wj[i] = a[(ulong)i * lda + j] + u[(ulong)i * ldu + j];
        else
            for (uint i = j; i < kb; i++) wj[i] = a[(ulong)i * lda + j];
        LA_CM_ROW(wj, j, kb, 0, j, w[(ulong)p * ldw + j], w + (ulong)p * ldw)
        const float d = LA_RE(wj[j]);
        if (fail < 0 && la_bad_pivot(d)) {
            fail = (int)j;
            fval = d;
        }
        const float ujj = sqrt(d);
        wj[j] = ujj;
        for (uint i = j + 1; i < kb; i++) wj[i] = LA_DIVR(wj[i], ujj);
    }
    /* L row by row: L[i][c] = U[c][i], zeros right of the diagonal */
    const uint wid = kb + zcols;
    for (uint i = 0; i < kb; i++) {
        __global float *li = l + (ulong)i * ldl;
        for (uint c = 0; c <= i; c++) li[c] = w[(ulong)c * ldw + i];
        for (uint c = i + 1; c < wid; c++) li[c] = 0.0f;
    }
    if (pk) {
        /* the whole block, zeros above the diagonal included: column c of the
         * block, rows i0..i0+15, is W[c][i0..i0+15] (U = L^T), kept where
         * i >= c; pivot_base is a multiple of 32, so 16-row runs stay inside
         * one panel */
        __global float *pp = P + (ulong)b * stride_p;
        const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        for (uint i0 = 0; i0 < kb; i0 += 16) {
            const uint row = pivot_base + i0, nr = min(16u, kb - i0);
            __global float *pb = pp + (ulong)(row / LA_UC) * np * LA_UC + row % LA_UC;
            for (uint c = 0; c < kb; c++) {
                const la_v v = select((la_v)0.0f, vload16(0, w + (ulong)c * ldw + i0),
                                      lane + (int)i0 >= (int)c & lane < (int)nr);
                la_store_row(v, pb + (ulong)(pivot_base + c) * LA_UC, nr);
            }
        }
    }
    if (fail >= 0) la_record(info, b, pivot_base + (uint)fail, fval);
    if (want_inv) {
        __global float *v = V + off_v + (ulong)b * stride_v;
        const uint kbp = (kb + 31) / 32 * 32;
        for (uint i = kb; i-- > 0;) {
            __global float *vi = v + (ulong)i * ldv, *wi = w + (ulong)i * ldw;
            for (uint c = 0; c < kbp + 64; c++) vi[c] = c == i ? 1.0f : 0.0f; /* + padding, as above */
            LA_CM_ROW(vi, i, kbp, i + 1, kb, wi[p], v + (ulong)p * ldv)
            const float uii = wi[i];
            for (uint c = i; c < kbp; c++) vi[c] = LA_DIVR(vi[c], uii);
        }
    }
}

/* ============================================================================
 * CPU: many small matrices, 16 per work-item, one per lane (lane l is matrix
 * 16g + l; lanes past the batch repeat the last matrix and are not stored).
 * The lower triangle lives interleaved in the scratch W: element (i, p) of
 * the 16 matrices is the float16 at W[g][i(i+1)/2 + p] (per work-item
 * n(n+1)/2 + 16 float16, the 16 absorbing the overhang of the last row).
 * A's rows come in and L's rows go out as 16 x 16 blocks transposed in
 * registers (la_transpose16), so the moves between the two layouts cost
 * well under one instruction per element.
 * Left-looking by columns (Crout): for each j the pivot, then the rows below
 * it in blocks of 8 (per p: 9 vector loads, 8 FMAs):
 *     L[j][j] = sqrt(A[j][j] - sum_{p<j} L[j][p]^2)
 *     L[i][j] = (A[i][j] - sum_{p<j} L[i][p] L[j][p]) / L[j][j]
 * Every lane does the same work, so all 16 lanes of every FMA are useful
 * whatever n is. global: (ceil(batch/16)). */
#define LA_SOA_ROWS 8

/* v[c][l] <-> v[l][c]: four butterfly stages of 16 two-source shuffles. */
#define LA_T_STAGE(S, MLO, MHI)                                                        \
    _Pragma("unroll") for (uint i = 0; i < 16; i++)                                    \
        if (!(i & S)) {                                                                \
            const la_v lo = shuffle2(v[i], v[i + S], MLO), hi = shuffle2(v[i], v[i + S], MHI); \
            v[i] = lo;                                                                 \
            v[i + S] = hi;                                                             \
        }
static inline __attribute__((always_inline)) void la_transpose16(la_v *v)
{
    LA_T_STAGE(1, ((uint16)(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30)),
               ((uint16)(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31)))
    LA_T_STAGE(2, ((uint16)(0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29)),
               ((uint16)(2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31)))
    LA_T_STAGE(4, ((uint16)(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27)),
               ((uint16)(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31)))
    LA_T_STAGE(8, ((uint16)(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23)),
               ((uint16)(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31)))
}

__kernel void wbcl_chol_soa(__global const float *A, const ulong off_a, const ulong stride_a, const uint lda,
                            __global float *L, const ulong off_l, const ulong stride_l, const uint ldl,
                            __global float *W, const uint n, const uint batch, __global int *info)
{
    const uint g = get_global_id(0), b0 = g * LA_VW;
    if (b0 >= batch) return;
    const uint nl = min((uint)LA_VW, batch - b0);
    const ulong tri = (ulong)n * (n + 1) / 2;
    __global la_v *w = (__global la_v *)W + (ulong)g * (tri + LA_VW);
    /* A's lower triangle into W: row i, columns c0..c0+15 of the 16 matrices */
    for (uint i = 0; i < n; i++) {
        __global la_v *wi = w + (ulong)i * (i + 1) / 2;
        for (uint c0 = 0; c0 <= i; c0 += LA_VW) {
            la_v v[LA_VW];
            const uint cnt = min((uint)LA_VW, n - c0);
#pragma unroll
            for (uint l = 0; l < LA_VW; l++)
                v[l] = la_load_row(A + off_a + (ulong)(b0 + min(l, nl - 1)) * stride_a + (ulong)i * lda + c0, cnt);
            la_transpose16(v);
#pragma unroll
            for (uint c = 0; c < LA_VW; c++) wi[c0 + c] = v[c]; /* past i: overhang, rewritten by row i+1 */
        }
    }
    int16 fidx = -1;
    la_v fval = 0.0f;
    for (uint j = 0; j < n; j++) {
        __global la_v *wj = w + (ulong)j * (j + 1) / 2;
        la_v d0 = wj[j], d1 = 0.0f;
        uint p = 0;
        for (; p + 2 <= j; p += 2) {
            d0 = LA_FMS_C(wj[p], wj[p], d0);
            d1 = LA_FMS_C(wj[p + 1], wj[p + 1], d1);
        }
        if (p < j) d0 = LA_FMS_C(wj[p], wj[p], d0);
        const la_v d = d0 + d1;
        const int16 bad = (fidx < 0) & ((isgreater(d, (la_v)0.0f) == 0) | isinf(d));
        fidx = select(fidx, (int16)(int)j, bad);
        fval = select(fval, d, bad);
        const la_v ljj = sqrt(d);
        wj[j] = ljj;
        for (uint i0 = j + 1; i0 < n; i0 += LA_SOA_ROWS) {
            __global la_v *wi[LA_SOA_ROWS];
            la_v acc[LA_SOA_ROWS];
#pragma unroll
            for (uint q = 0; q < LA_SOA_ROWS; q++) {
                const uint i = min(i0 + q, n - 1);
                wi[q] = w + (ulong)i * (i + 1) / 2;
                acc[q] = wi[q][j];
            }
            for (uint p = 0; p < j; p++) {
                const la_v ljp = wj[p];
#pragma unroll
                for (uint q = 0; q < LA_SOA_ROWS; q++) acc[q] = LA_FMS_C(wi[q][p], ljp, acc[q]);
            }
#pragma unroll
            for (uint q = 0; q < LA_SOA_ROWS; q++)
                if (i0 + q < n) wi[q][j] = LA_DIVR(acc[q], ljj);
        }
    }
    /* L out, rows contiguous, zeros above the diagonal */
    for (uint i = 0; i < n; i++) {
        const __global la_v *wi = w + (ulong)i * (i + 1) / 2;
        for (uint c0 = 0; c0 < n; c0 += LA_VW) {
            const uint cnt = min((uint)LA_VW, n - c0);
            __global float *row = L + off_l + (ulong)b0 * stride_l + (ulong)i * ldl + c0;
            if (c0 > i) {
                for (uint l = 0; l < nl; l++) la_store_row(0.0f, row + (ulong)l * stride_l, cnt);
                continue;
            }
            la_v v[LA_VW];
#pragma unroll
            for (uint c = 0; c < LA_VW; c++) v[c] = c0 + c <= i ? wi[c0 + c] : 0.0f;
            la_transpose16(v);
            for (uint l = 0; l < nl; l++) la_store_row(v[l], row + (ulong)l * stride_l, cnt);
        }
    }
    int fi[LA_VW];
    float fv[LA_VW];
    vstore16(fidx, 0, fi);
    vstore16(fval, 0, fv);
    for (uint l = 0; l < nl; l++)
        if (fi[l] >= 0) la_record(info, b0 + l, (uint)fi[l], fv[l]);
}


/* ============================================================================
 * CPU: the panel below a factored diagonal block: Y <- (X + U) L11^-T.
 * V = L11^-T (upper, row-major, zero below the diagonal and in the padding
 * columns up to roundup(kb, 32); wbcl_chol_cm's want_inv output), so this is
 * a small GEMM with a triangular right factor: a work-item owns 8 full rows
 * (copied to private memory first, so Y may be X) and produces them in tiles
 * of LA_PG rows x 16 LA_PH columns:
 *     Y[r][C:C+w] = sum_{p < C+w} x[r][p] V[p][C:C+w]
 * (AVX-512: 8 x 32 in 16 float16 accumulators, per p 2 vector loads, 8
 * broadcasts, 16 FMAs; the zeros of V below the diagonal are skipped except
 * inside the tile's columns).
 * pk: also write the rows (at row0, col0 of the whole n x n matrix) into the
 * packed copy of L at P; the last work-item writes the zero rows past n
 * (see wbcl_chol_upd). global: (ceil(rows/8), batch).
 * LA_PG x LA_PH: the tile, 8 x 2 float16 where a float16 is one register,
 * 4 x 1 where it takes two (AVX2: 8 ymm accumulators, 8 x 2 spills; the
 * GEMM's tile shape, no measurable change against 2 x 32 in the panel,
 * perf/RESULTS.md). LA_TG: rows of wbcl_trsm_inv's 32-column tile (8 and 2). */
#define LA_PR 8
#if WBCL_SIMD >= 16
#define LA_PG 8
#define LA_PH 2
#define LA_TG 8
#else
#define LA_PG 4
#define LA_PH 1
#define LA_TG 2
#endif

/* One 32-column strip of X V for V upper triangular (row-major, row stride
 * ldv; zeros below the diagonal up to roundup(kb, 32)): acc[r][h] = columns
 * c0 + 16 h ... of row r of X V, for the rows rows of X (private, row
 * stride ldx), in LA_PG x 16 LA_PH register tiles. */
static inline __attribute__((always_inline)) void la_tri_strip(la_v (*acc)[2], const float *x, const uint ldx,
                                                               const uint rows, const __global float *v,
                                                               const uint ldv, const uint c0, const uint kb)
{
    for (uint h0 = 0; h0 < 2; h0 += LA_PH) {
        /* V is upper triangular: rows past the tile's last column are zero */
        const uint pend = min(kb, c0 + 16 * (h0 + LA_PH));
        for (uint rg = 0; rg < rows; rg += LA_PG) {
            la_v ag[LA_PG][LA_PH];
#pragma unroll
            for (uint r = 0; r < LA_PG; r++)
#pragma unroll
                for (uint u = 0; u < LA_PH; u++) ag[r][u] = 0.0f;
            const __global float *vp = v + c0 + 16 * h0;
            const float *xr = x + rg * ldx;
            for (uint p = 0; p < pend; p++, vp += ldv) {
                la_v bv[LA_PH];
#pragma unroll
                for (uint u = 0; u < LA_PH; u++) bv[u] = vload16(u, vp);
#pragma unroll
                for (uint r = 0; r < LA_PG; r++)
#pragma unroll
                    for (uint u = 0; u < LA_PH; u++) ag[r][u] = LA_FMA_C(xr[r * ldx + p], bv[u], ag[r][u]);
            }
#pragma unroll
            for (uint r = 0; r < LA_PG; r++)
#pragma unroll
                for (uint u = 0; u < LA_PH; u++) acc[rg + r][h0 + u] = ag[r][u];
        }
    }
}
__kernel void wbcl_chol_panel(__global const float *V, const ulong off_v, const ulong stride_v, const uint ldv,
                              __global const float *X, const ulong off_x, const ulong stride_x, const uint ldx,
                              __global const float *U, const ulong off_u, const ulong stride_u, const uint ldu,
                              const uint has_u, __global float *Y, const ulong off_y, const ulong stride_y,
                              const uint ldy, const uint kb, const uint rows, const uint batch,
                              __global float *P, const ulong stride_p, const uint np,
                              const uint row0, const uint col0, const uint pk)
{
    const uint g = get_global_id(0), b = get_global_id(1);
    const uint r0 = g * LA_PR;
    if (r0 >= rows || b >= batch) return;
    const uint nr = min((uint)LA_PR, rows - r0);
    const __global float *v = V + off_v + (ulong)b * stride_v;
    float xr[LA_PR][LA_NBMAX];
#pragma unroll
    for (uint r = 0; r < LA_PR; r++) {
        const uint rr = r0 + min(r, nr - 1); /* missing rows repeat the last one */
        const __global float *x = X + off_x + (ulong)b * stride_x + (ulong)rr * ldx;
        const __global float *u = U + off_u + (ulong)b * stride_u + (ulong)rr * ldu;
        uint p = 0;
        if (has_u) {
            for (; p + LA_VW <= kb; p += LA_VW) vstore16(vload16(0, x + p) + vload16(0, u + p), 0, &xr[r][p]);
            for (; p < kb; p++) xr[r][p] = x[p] + u[p];
        } else {
            for (; p + LA_VW <= kb; p += LA_VW) vstore16(vload16(0, x + p), 0, &xr[r][p]);
            for (; p < kb; p++) xr[r][p] = x[p];
        }
    }
    __global float *y = Y + off_y + (ulong)b * stride_y + (ulong)r0 * ldy;
    for (uint c0 = 0; c0 < kb; c0 += 32) {
        la_v acc[LA_PR][2];
        la_tri_strip(acc, &xr[0][0], LA_NBMAX, LA_PR, v, ldv, c0, kb);
        const uint nc = kb - c0;
#pragma unroll
        for (uint r = 0; r < LA_PR; r++) {
            if (r < nr) {
                __global float *yr = y + (ulong)r * ldy + c0;
                if (nc >= 32) {
                    vstore16(acc[r][0], 0, yr);
                    vstore16(acc[r][1], 0, yr + 16);
                } else {
                    la_store_row(acc[r][0], yr, nc);
                    if (nc > 16) la_store_row(acc[r][1], yr + 16, nc - 16);
                }
            }
        }
        if (pk) {
            /* the 8 x 32 tile transposed in registers: lanes 0-7 of t[c] are
             * column c0 + c, lanes 8-15 column c0 + 16 + c (rows r0..r0+7);
             * row0 + r0 is a multiple of 8, so each column's 8 rows are one
             * run in the packed copy */
            la_v t[LA_VW];
#pragma unroll
            for (uint r = 0; r < LA_PR; r++) {
                t[r] = acc[r][0];
                t[r + LA_PR] = acc[r][1];
            }
            la_transpose16(t);
            const uint row = row0 + r0;
            __global float *pb = P + (ulong)b * stride_p + (ulong)(row / LA_UC) * np * LA_UC + row % LA_UC +
                                 (ulong)(col0 + c0) * LA_UC;
            if (nr == LA_PR && nc >= 32) { /* always but at the matrix's last rows: kb = nb when packing */
#pragma unroll
                for (uint c = 0; c < 16; c++) {
                    vstore8(t[c].lo, 0, pb + c * LA_UC);
                    vstore8(t[c].hi, 0, pb + (16 + c) * LA_UC);
                }
            } else { /* the rest of the run is padding, written by la_pack_pad */
                float f[32 * LA_PR];
#pragma unroll
                for (uint c = 0; c < 16; c++) {
                    vstore8(t[c].lo, c, f);
                    vstore8(t[c].hi, 16 + c, f);
                }
                for (uint c = 0; c < min(nc, 32u); c++)
                    for (uint r = 0; r < nr; r++) pb[c * LA_UC + r] = f[c * 8 + r];
            }
        }
    }
    if (pk && r0 + nr == rows) la_pack_pad(P + (ulong)b * stride_p, np, col0, kb);
}

/* ============================================================================
 * CPU: triangular solves on a kb-row block of right-hand sides, by
 * multiplication with the inverse V = L11^-T that wbcl_chol_cm left (upper,
 * zeros below the diagonal and in the padding up to roundup(kb, 32)):
 *   upper == 0:  Y <- L11^-1 (X + U),  Y[i] = sum_{p <= i} V[p][i] x_p   (forward)
 *   upper != 0:  Y <- L11^-T (X + U),  Y[i] = sum_{p >= i} V[i][p] x_p   (backward)
 * on the first ncols columns (Y may be X; U is added on its first ucols
 * columns only, 0: none). A work-item owns 32 columns of all
 * kb rows (copied to private memory first) and produces LA_TG x 32 tiles in
 * 2 LA_TG float16 accumulators (8 x 32 with AVX-512: per p 2 vector loads, 8
 * broadcasts, 16 FMAs; 2 x 32 with AVX2, see wbcl_chol_panel).
 * global: (ceil(ncols/32), batch). */
__kernel void wbcl_trsm_inv(__global const float *V, const ulong off_v, const ulong stride_v, const uint ldv,
                            __global const float *X, const ulong off_x, const ulong stride_x, const uint ldx,
                            __global const float *U, const ulong off_u, const ulong stride_u, const uint ldu,
                            const uint ucols, __global float *Y, const ulong off_y, const ulong stride_y,
                            const uint ldy, const uint kb, const uint ncols, const uint batch, const uint upper)
{
    const uint g = get_global_id(0), b = get_global_id(1);
    const uint c0 = g * 32;
    if (c0 >= ncols || b >= batch) return;
    const uint nc = min(32u, ncols - c0), n0 = min(16u, nc), n1 = nc > 16 ? nc - 16 : 0;
    const uint nu = ucols > c0 ? min(nc, ucols - c0) : 0, nu0 = min(16u, nu), nu1 = nu > 16 ? nu - 16 : 0;
    const __global float *v = V + off_v + (ulong)b * stride_v;
    const __global float *x = X + off_x + (ulong)b * stride_x + c0;
    const __global float *u = U + off_u + (ulong)b * stride_u + c0;
    __global float *y = Y + off_y + (ulong)b * stride_y + c0;
    la_v xs[LA_NBMAX][2];
    for (uint p = 0; p < kb; p++) {
        xs[p][0] = la_load_row(x + (ulong)p * ldx, n0);
        xs[p][1] = la_load_row(x + (ulong)p * ldx + 16, n1);
        if (nu0) xs[p][0] += la_load_row(u + (ulong)p * ldu, nu0);
        if (nu1) xs[p][1] += la_load_row(u + (ulong)p * ldu + 16, nu1);
    }
    for (uint i0 = 0; i0 < kb; i0 += LA_TG) {
        la_v acc[LA_TG][2];
#pragma unroll
        for (uint r = 0; r < LA_TG; r++) acc[r][0] = acc[r][1] = 0.0f;
        if (!upper) {
            const uint pend = min(kb, i0 + LA_TG);
            const __global float *vp = v + i0;
            for (uint p = 0; p < pend; p++, vp += ldv) {
#pragma unroll
                for (uint r = 0; r < LA_TG; r++) {
                    acc[r][0] = LA_FMA_C(vp[r], xs[p][0], acc[r][0]);
                    acc[r][1] = LA_FMA_C(vp[r], xs[p][1], acc[r][1]);
                }
            }
        } else {
            const __global float *vr[LA_TG];
#pragma unroll
            for (uint r = 0; r < LA_TG; r++) vr[r] = v + (ulong)min(i0 + r, kb - 1) * ldv;
            for (uint p = i0; p < kb; p++) {
#pragma unroll
                for (uint r = 0; r < LA_TG; r++) {
                    acc[r][0] = LA_FMA_C(vr[r][p], xs[p][0], acc[r][0]);
                    acc[r][1] = LA_FMA_C(vr[r][p], xs[p][1], acc[r][1]);
                }
            }
        }
#pragma unroll
        for (uint r = 0; r < LA_TG; r++) {
            if (i0 + r < kb) {
                la_store_row(acc[r][0], y + (ulong)(i0 + r) * ldy, n0);
                if (n1) la_store_row(acc[r][1], y + (ulong)(i0 + r) * ldy + 16, n1);
            }
        }
    }
}

/* ============================================================================
 * CPU: the blocked Cholesky's update step on L kept packed (left-looking).
 *
 * When block column J (columns J..J+kb) of L is final, wbcl_chol_cm (the
 * diagonal block, zeros above its diagonal included) and wbcl_chol_panel
 * (the rows below) have also written it into the packed copy P of L (32-row
 * panels contiguous over the column index, see la_pack_pad; rows >= n as 0).
 * Every column is packed once, so the update of block column j,
 *     S = A[j:n, j:j+kb] - L[j:n, 0:j] L[j:j+kb, 0:j]^T
 * is a GEMM whose operands are already packed: both are prefixes 0:j of the
 * same panels. A work-item of wbcl_chol_upd owns a 32 x 32 block of S (one
 * row panel, one column panel) as register tiles of LA_UR x 16 LA_UH (with
 * AVX-512 four of 8 x 32: 8 rows x 2 float16 accumulators, per p 2 vector
 * loads, 8 broadcasts, 16 FMAs; with AVX2 twelve of 6 or 4 rows x 16, per
 * p 2 vector loads, up to 6 broadcasts, up to 12 FMAs) and
 * walks k in chunks of LA_KC: per chunk, the tiles in turn (their
 * accumulators parked in private memory between chunks), so the chunk's
 * 32 x LA_KC pieces of both panels (16 KiB each at LA_KC = 128) are read
 * from L1 four or more times instead of from L2 (one 8-row tile over the whole k read 12 bytes
 * of L2 per FMA and ran at about half the probe's rate per CPU-second).
 * This kernel updates the diagonal block's own rows, S11 = A[j:j+kb, j:j+kb]
 * - L[j:j+kb, 0:j] L[j:j+kb, 0:j]^T, the 32 x 32 blocks on and below its
 * diagonal (those above are never read: wbcl_chol_cm reads the lower
 * triangle and writes the zeros), one per work-item, t -> (ia, cb <= ia)
 * row by row; the rows below get theirs in wbcl_chol_upd_panel. S is
 * written over L (L may be A). j must be a multiple of LA_UC, so the row
 * panels start at row j. global: (ncb (ncb + 1) / 2, batch), ncb =
 * ceil(kb/32). */
/* LA_KC: 128 with AVX-512 (L1 of 48 KiB on the Xeon measured: 64 was 2%
 * slower), 64 with AVX2. The two panels lie n * 128 bytes apart, a multiple
 * of 4 KiB, so their chunks fall into the same L1 sets: at 128 they fill all
 * 8 ways of a 32 KiB L1 (Zen 3, Haswell), at 64 half of them (update kernel
 * 9% faster on a Zen 3, perf/RESULTS.md; with the 6-row tiles 32 and 96
 * measured the same as 64). */
#if WBCL_SIMD >= 16
#define LA_KC 128
#else
#define LA_KC 64
#endif
/* One register tile of la_upd_block for the chunk k0..k1: rows row0 ..
 * row0 + nr - 1 (nr <= LA_UR, a constant at every call) of the block,
 * columns 16 h0 ... 16 (h0 + LA_UH) - 1, its accumulators taken from and
 * put back into park; diag: skipped when strictly above the diagonal. */
static inline __attribute__((always_inline)) void la_upd_tile(la_v (*park)[2], const __global float *a0,
                                                              const __global float *b00, const uint k0,
                                                              const uint k1, const uint row0, const uint nr,
                                                              const uint h0, const uint diag)
{
    if (diag && row0 + nr <= 16 * h0) return;
    la_v acc[LA_UR][LA_UH];
#pragma unroll
    for (uint r = 0; r < LA_UR; r++)
#pragma unroll
        for (uint u = 0; u < LA_UH; u++)
            if (r < nr) acc[r][u] = park[row0 + r][h0 + u];
    const __global float *a = a0 + (ulong)k0 * LA_UC + row0;
    const __global float *bp = b00 + (ulong)k0 * LA_UC + 16 * h0;
    for (uint p = k0; p < k1; p++) {
        la_v bv[LA_UH];
#pragma unroll
        for (uint u = 0; u < LA_UH; u++) bv[u] = vload16(u, bp);
#pragma unroll
        for (uint r = 0; r < LA_UR; r++)
            if (r < nr) {
                const la_v ar = (la_v)(a[r]);
#pragma unroll
                for (uint u = 0; u < LA_UH; u++) acc[r][u] = LA_FMA_C(ar, bv[u], acc[r][u]);
            }
        a += LA_UC;
        bp += LA_UC;
    }
#pragma unroll
    for (uint r = 0; r < LA_UR; r++)
#pragma unroll
        for (uint u = 0; u < LA_UH; u++)
            if (r < nr) park[row0 + r][h0 + u] = acc[r][u];
}

/* The 32 x 32 block of L[rows of panel a0, 0:j] L[rows of panel b00, 0:j]^T
 * into park (row r, columns 16 h .. 16 h + 15 in park[r][h]), walking k in
 * chunks of LA_KC as described above; diag: the block is on the diagonal,
 * its tiles strictly above it are skipped (left at 0). */
static inline __attribute__((always_inline)) void la_upd_block(la_v (*park)[2], const __global float *a0,
                                                               const __global float *b00, const uint j,
                                                               const uint diag)
{
    for (uint r = 0; r < LA_UC; r++) park[r][0] = park[r][1] = 0.0f;
    for (uint k0 = 0; k0 < j; k0 += LA_KC) {
        const uint k1 = min(j, k0 + LA_KC);
#if LA_UH == 2
        for (uint row0 = 0; row0 < LA_UC; row0 += LA_UR) la_upd_tile(park, a0, b00, k0, k1, row0, LA_UR, 0, diag);
#else
        /* LA_UC = 32 rows as four tiles of LA_UR = 6 and two of 4 */
        for (uint h0 = 0; h0 < 2; h0++) {
            for (uint row0 = 0; row0 < LA_UC - 8; row0 += LA_UR)
                la_upd_tile(park, a0, b00, k0, k1, row0, LA_UR, h0, diag);
            la_upd_tile(park, a0, b00, k0, k1, LA_UC - 8, 4, h0, diag);
            la_upd_tile(park, a0, b00, k0, k1, LA_UC - 4, 4, h0, diag);
        }
#endif
    }
}

__kernel void wbcl_chol_upd(__global const float *restrict P, const ulong stride_p, __global const float *A,
                            const ulong stride_a, __global float *L, const ulong stride_l, const uint n, const uint j,
                            const uint kb, const uint batch)
{
    const uint t = get_global_id(0), b = get_global_id(1);
    const uint ncb = (kb + LA_UC - 1) / LA_UC, q0 = j / LA_UC;
    if (t >= ncb * (ncb + 1) / 2 || b >= batch) return;
    uint ia = 0;
    while ((ia + 1) * (ia + 2) / 2 <= t) ia++;
    const uint cb = t - ia * (ia + 1) / 2, i0 = (q0 + ia) * LA_UC;
    la_v park[LA_UC][2];
    la_upd_block(park, P + (ulong)b * stride_p + (ulong)(q0 + ia) * n * LA_UC,
                 P + (ulong)b * stride_p + (ulong)(q0 + cb) * n * LA_UC, j, cb == ia);
    const uint c0 = j + cb * LA_UC, nc = min((uint)LA_UC, kb - cb * LA_UC);
    const __global float *ab = A + (ulong)b * stride_a + c0;
    __global float *lb = L + (ulong)b * stride_l + c0;
    for (uint r = 0; r < LA_UC; r++) {
        const uint i = i0 + r;
        if (i < n) {
            const __global float *ar = ab + (ulong)i * n;
            __global float *lr = lb + (ulong)i * n;
            if (nc == LA_UC) {
                vstore16(vload16(0, ar) - park[r][0], 0, lr);
                vstore16(vload16(1, ar) - park[r][1], 1, lr);
            } else {
                la_store_row(la_load_row(ar, min(nc, 16u)) - park[r][0], lr, min(nc, 16u));
                if (nc > 16) la_store_row(la_load_row(ar + 16, nc - 16) - park[r][1], lr + 16, nc - 16);
            }
        }
    }
}

/* ============================================================================
 * CPU: the update and the panel of one block column in one pass, for the rows
 * below its diagonal block (those of wbcl_chol_upd with ia >= ncb, then
 * wbcl_chol_panel on them). A work-item owns one 32-row panel of rows
 * i0 = j + kb + 32 g ... and all kb <= LA_FNB columns:
 *     S = A[i0:i0+32, j:j+kb] - L[i0:i0+32, 0:j] L[j:j+kb, 0:j]^T
 *         (la_upd_block per 32-column block, into private memory)
 *     L[i0:i0+32, j:j+kb] = S V,   V = L_jj^-T from wbcl_chol_cm
 *         (wbcl_chol_panel's tiles, 32 rows instead of 8)
 * and writes the rows into L and into the packed copy (rows >= n: S = 0, so
 * their packed rows come out as the zeros the padding needs). S never goes
 * to memory and back, and one launch replaces two (measured: perf/RESULTS.md).
 * j and kb: multiples of LA_UC (kb = nb whenever rows follow the block).
 * global: (ceil((n - j - kb) / 32), batch). */
#define LA_FNB 128
__kernel void wbcl_chol_upd_panel(__global float *restrict P, const ulong stride_p, __global const float *A,
                                  const ulong stride_a, __global float *L, const ulong stride_l, const uint n,
                                  const uint j, const uint kb, const uint batch, __global const float *V,
                                  const ulong off_v, const ulong stride_v, const uint ldv)
{
    const uint g = get_global_id(0), b = get_global_id(1);
    const uint q = (j + kb) / LA_UC + g, i0 = q * LA_UC;
    if (i0 >= n || b >= batch || kb > LA_FNB) return;
    __global float *pb = P + (ulong)b * stride_p;
    const __global float *v = V + off_v + (ulong)b * stride_v;
    float s[LA_UC][LA_FNB];
    for (uint cb = 0; cb < kb / LA_UC; cb++) {
        la_v park[LA_UC][2];
        la_upd_block(park, pb + (ulong)q * n * LA_UC, pb + (ulong)(j / LA_UC + cb) * n * LA_UC, j, 0);
        const __global float *ab = A + (ulong)b * stride_a + j + cb * LA_UC;
        for (uint rr = 0; rr < LA_UC; rr++) {
            const uint i = i0 + rr;
            la_v x0 = 0.0f, x1 = 0.0f;
            if (i < n) {
                x0 = vload16(0, ab + (ulong)i * n) - park[rr][0];
                x1 = vload16(1, ab + (ulong)i * n) - park[rr][1];
            }
            vstore16(x0, 0, &s[rr][cb * LA_UC]);
            vstore16(x1, 0, &s[rr][cb * LA_UC + 16]);
        }
    }
    __global float *lb = L + (ulong)b * stride_l + j;
    for (uint c0 = 0; c0 < kb; c0 += 32) {
        la_v acc[LA_UC][2];
        la_tri_strip(acc, &s[0][0], LA_FNB, LA_UC, v, ldv, c0, kb);
        for (uint r = 0; r < LA_UC && i0 + r < n; r++) {
            vstore16(acc[r][0], 0, lb + (ulong)(i0 + r) * n + c0);
            vstore16(acc[r][1], 0, lb + (ulong)(i0 + r) * n + c0 + 16);
        }
        /* packed: 8-row groups transposed in registers as in wbcl_chol_panel */
        for (uint r8 = 0; r8 < LA_UC; r8 += 8) {
            la_v t[LA_VW];
#pragma unroll
            for (uint r = 0; r < 8; r++) {
                t[r] = acc[r8 + r][0];
                t[r + 8] = acc[r8 + r][1];
            }
            la_transpose16(t);
            __global float *pp = pb + (ulong)q * n * LA_UC + r8 + (ulong)(j + c0) * LA_UC;
#pragma unroll
            for (uint c = 0; c < 16; c++) {
                vstore8(t[c].lo, 0, pp + c * LA_UC);
                vstore8(t[c].hi, 0, pp + (16 + c) * LA_UC);
            }
        }
    }
}

#endif /* WBCL_VARIANT_CPU */

#if WBCL_VARIANT_GPU

/* ============================================================================
 * GPU Cholesky (host/ops/linalg.c, chol_gpu): n <= 64, any batch: a work-group
 * of 32 or 64 per matrix, a row per work-item (wbcl_chol_s32_g, _s64_g, below);
 * n <= LA_GNB: one work-group of 16 x 16 per matrix (wbcl_chol_blk_g). Larger
 * n: right-looking blocked,
 * nb = LA_GNB, L first set to tril(A) (wbcl_la_tril_g) and its first diagonal
 * block factored (wbcl_chol_blk_g), then per block column j (kb <= nb
 * columns, m = n - j - kb rows below) two launches:
 *   1. L21 = L[j+kb:n, j:j+kb] L11^-T           wbcl_chol_trsm_g, 16 rows per work-group
 *   2. L22 = L[j+kb:n, j+kb:n] - L21 L21^T     wbcl_chol_syrk_g, 64 x 64 tiles of the
 *                                               lower triangle only, one launch; its
 *                                               work-group 0 updates the next diagonal
 *                                               block and factors it (as wbcl_chol_blk_g)
 *                                               while the others update the rest
 * (rounds whose trailing block has at least GPU_GEMM_MIN rows do step 2 through
 * the context's GEMM on the whole square instead, then factor the next block
 * with wbcl_chol_blk_g, and the upper junk is zeroed at the end by
 * wbcl_la_zero_upper_g), so n / 128 rounds of two launches, each sized by n (the trailing update,
 * all but about n^2 nb of the n^3 / 3 flops, is one launch of up to
 * (n/64)^2/2 work-groups), and the one serial step of a round, the diagonal
 * block, overlaps the round's largest launch.
 * Work-groups are 16 x 16 work-items. The 128 x 128 lower triangle kept packed in
 * local memory is 33 KB (row i at LA_TRI(i), or the transpose), 41 KB with the
 * rows of wbcl_chol_trsm_g and 43 KB with wbcl_chol_syrk_g's tiles, within the
 * 48 KB a work-group may have on NVIDIA's OpenCL (a 256 block would not fit); they
 * take their local memory as arguments sized by kb, and the host takes a smaller nb
 * where the device has less (OpenCL 1.2 promises 32 KB). */
#define LA_GNB 128
#define LA_GT 16
#define LA_TRI(i) ((i) * ((i) + 1u) / 2u)

/* Factor the kb x kb (kb <= LA_GNB) lower block at A + off_a + b * stride_a into
 * L (may be A: the block is read whole before anything is written), zeros in
 * the strict upper part of its rows up to column kb + zcols. One work-group
 * of 16 x 16 per matrix, the block packed in local memory (T, row i at
 * LA_TRI(i)), blocked by strips of 16 columns (k0 .. k0 + 16):
 *   1. the strip, right-looking, one barrier per column: work-item (tx, ty)
 *      holds column k0 + tx's rows ty + 16 q in registers; step k reads column
 *      k (raw, not yet divided by its pivot d_k) from a contiguous two-slot
 *      buffer, where its owner wrote it during step k - 1, updates its own
 *      column c > k, x[i] -= (T[i][k] / d_k) T[c][k], and the owner of column k
 *      finishes it (T[i][k] / sqrt(d_k), the diagonal sqrt(d_k));
 *   2. the rest of the triangle less the strip's rank-16 product, 4 x 4
 *      register tiles (one local read per 4 FMAs).
 * (Unblocked, with every column's rank-1 update read and written in local
 * memory, the 128 block took 150 us on an H200: 128 steps of up to 32
 * dependent local read-modify-writes per work-item.) Pivot failures as in
 * wbcl_chol_cm. T: local memory of kb (kb + 1) / 2 floats.
 * global: (16 batch, 16), local: (16, 16). */
/* The body of wbcl_chol_blk_g (also run by wbcl_chol_syrk_g's first work-group
 * on the next diagonal block): a (matrix b's block, read), l (written, may be a),
 * T: kb (kb + 1) / 2 floats of local memory, col: 2 LA_GNB, fail / fval: one
 * each (local memory must be declared in the kernel). Called by every
 * work-item of the work-group. */
static inline __attribute__((always_inline)) void la_blk_factor(const __global float *a, const uint lda,
                                                                __global float *l, const uint ldl, const uint kb,
                                                                const uint zcols, __global int *info, const uint b,
                                                                const uint pivot_base, __local float *T,
                                                                __local float *col, __local int *fail,
                                                                __local float *fval)
{
    const uint tx = get_local_id(0), ty = get_local_id(1), t = ty * LA_GT + tx;
    /* coalesced: 16 neighbouring columns of one row per half-row of work-items */
    for (uint i = ty; i < kb; i += LA_GT)
        for (uint c = tx; c <= i; c += LA_GT) T[LA_TRI(i) + c] = a[(ulong)i * lda + c];
    if (t == 0) *fail = -1;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint k0 = 0; k0 < kb; k0 += LA_GT) {
        const uint w = kb - k0 < LA_GT ? kb - k0 : LA_GT, c = k0 + tx;
        const int mine = tx < w;
        /* 1. the strip: work-item (tx, ty) holds column c's rows ty + 16 q in registers */
        float x[LA_GNB / LA_GT];
#pragma unroll
        for (uint q = 0; q < LA_GNB / LA_GT; q++) {
            const uint i = ty + LA_GT * q;
            x[q] = mine && i >= c && i < kb ? T[LA_TRI(i) + c] : 0.0f;
            if (tx == 0 && i >= c && i < kb) col[i] = x[q];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint k = k0; k < k0 + w; k++) {
            __local const float *ck = col + ((k - k0) & 1u) * LA_GNB;
            __local float *cn = col + ((k - k0 + 1u) & 1u) * LA_GNB;
            const float d = ck[k];
            if (t == 0 && *fail < 0 && la_bad_pivot(d)) {
                *fail = (int)k;
                *fval = d;
            }
            const float dinv = 1.0f / d, s = sqrt(d), rs = 1.0f / s;
            if (c == k) {
#pragma unroll
                for (uint q = 0; q < LA_GNB / LA_GT; q++) x[q] = ty + LA_GT * q == k ? s : x[q] * rs;
            } else if (mine && c > k) {
                const float ckc = ck[c];
#pragma unroll
                for (uint q = 0; q < LA_GNB / LA_GT; q++) {
                    const uint i = ty + LA_GT * q;
                    if (i >= c && i < kb) {
                        x[q] = LA_FMS_C(ck[i] * dinv, ckc, x[q]);
                        if (c == k + 1) cn[i] = x[q];
                    }
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
#pragma unroll
        for (uint q = 0; q < LA_GNB / LA_GT; q++) {
            const uint i = ty + LA_GT * q;
            if (mine && i >= c && i < kb) T[LA_TRI(i) + c] = x[q];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* 2. the rest of the triangle (rows and columns from r0) less the strip's
         * rank-w product, 4 x 4 register tiles of the lower triangle */
        const uint r0 = k0 + w;
        if (r0 < kb) {
            const uint nt = (kb - r0 + 3) / 4;
            for (uint ti = ty; ti < nt; ti += LA_GT)
                for (uint tj = tx; tj <= ti; tj += LA_GT) {
                    const uint i0 = r0 + 4 * ti, j0 = r0 + 4 * tj;
                    uint ra[4], rb[4];
#pragma unroll
                    for (uint e = 0; e < 4; e++) {
                        ra[e] = LA_TRI(min(i0 + e, kb - 1u));
                        rb[e] = LA_TRI(min(j0 + e, kb - 1u));
                    }
                    float acc[4][4];
#pragma unroll
                    for (uint e = 0; e < 4; e++)
#pragma unroll
                        for (uint f = 0; f < 4; f++) acc[e][f] = 0.0f;
                    for (uint p = k0; p < r0; p++) {
                        float av[4], bv[4];
#pragma unroll
                        for (uint e = 0; e < 4; e++) {
                            av[e] = T[ra[e] + p];
                            bv[e] = T[rb[e] + p];
                        }
#pragma unroll
                        for (uint e = 0; e < 4; e++)
#pragma unroll
                            for (uint f = 0; f < 4; f++) acc[e][f] = LA_FMA_C(av[e], bv[f], acc[e][f]);
                    }
#pragma unroll
                    for (uint e = 0; e < 4; e++)
#pragma unroll
                        for (uint f = 0; f < 4; f++)
                            if (i0 + e < kb && j0 + f <= i0 + e) T[ra[e] + j0 + f] -= acc[e][f];
                }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const uint wid = kb + zcols;
    for (uint i = ty; i < kb; i += LA_GT)
        for (uint c = tx; c < wid; c += LA_GT) l[(ulong)i * ldl + c] = c <= i ? T[LA_TRI(i) + c] : 0.0f;
    if (t == 0 && *fail >= 0) la_record(info, b, pivot_base + (uint)*fail, *fval);
}

__kernel void wbcl_chol_blk_g(__global const float *A, const ulong off_a, const ulong stride_a, const uint lda,
                              __global float *L, const ulong off_l, const ulong stride_l, const uint ldl,
                              const uint kb, const uint zcols, __global int *info, const uint pivot_base,
                              __local float *T)
{
    __local float col[2 * LA_GNB]; /* column k (raw) contiguous, two slots */
    __local int fail;
    __local float fval;
    const uint b = get_group_id(0);
    la_blk_factor(A + off_a + (ulong)b * stride_a, lda, L + off_l + (ulong)b * stride_l, ldl, kb, zcols, info, b,
                  pivot_base, T, col, &fail, &fval);
}

/* Panel X <- X L11^-T in place: X (rows x kb) at X + off_x, L11 (kb x kb
 * lower, kb <= LA_GNB, factored) at D + off_d. A work-group takes 16 rows:
 * L11^T packed in local memory (row c of U = L11^T, i.e. column c of L11, is
 * contiguous from its diagonal: U[c][c2] at c kb - c (c - 1) / 2 + c2 - c), the
 * rows in local memory, and substitutes right-looking by columns, one barrier
 * per column: step c makes X[r][c] final (divided by L11[c][c]) on the fly and
 * subtracts it from the later columns, the stored column c - 1 being divided
 * during step c (as in wbcl_chol_blk_g). Work-item (tx, ty): row ty, columns
 * tx + 16 q. U: local memory of kb (kb + 1) / 2 floats, Xl of 16 (kb + 1).
 * (A form by blocks of 16 columns, two barriers a block, work-item (0, ty) substituting
 * its row through a block alone, measured slower on an H200: 78 us a launch at n = 4096
 * against 54 us; the one work-item's chain through local memory costs more than the
 * barriers it saves; perf/RESULTS.md, seventh session.)
 * (A form holding each row in registers measured slower on an H200: 72 us a launch at
 * n = 4096 against this one's 51 us; perf/RESULTS.md, second visit.)
 * global: (16 ceil(rows / 16), 16 batch), local: (16, 16). */
/* The body of wbcl_chol_trsm_g for row block rb of matrix b (also run by
 * wbcl_chol_upd_g's first work-groups). */
static inline __attribute__((always_inline)) void la_trsm_rows(const __global float *D, const ulong off_d,
                                                               const ulong stride_d, const uint ldd,
                                                               __global float *X, const ulong off_x,
                                                               const ulong stride_x, const uint ldx, const uint kb,
                                                               const uint rows, const uint rb, const uint b,
                                                               __local float *U, __local float *Xl)
{
    const uint tx = get_local_id(0), ty = get_local_id(1);
    const uint r = rb * LA_GT + ty;
    const __global float *dm = D + off_d + (ulong)b * stride_d;
    __global float *x = X + off_x + (ulong)b * stride_x + (ulong)r * ldx;
    __local float *xs = Xl + ty * (kb + 1); /* this work-item's row */
    for (uint i = ty; i < kb; i += LA_GT)
        for (uint c = tx; c <= i; c += LA_GT) U[c * kb - LA_TRI(c) + i] = dm[(ulong)i * ldd + c];
    for (uint c = tx; c < kb; c += LA_GT) xs[c] = r < rows ? x[c] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    float rprev = 0.0f;
    for (uint c = 0; c < kb; c++) {
        const uint rc = c * kb - LA_TRI(c); /* U[c][c2] = U[rc + c2] */
        const float rinv = 1.0f / U[rc + c];
        if (c > 0 && tx == 0) xs[c - 1] *= rprev;
        const float xc = xs[c] * rinv;
        for (uint c2 = c + 1 + tx; c2 < kb; c2 += LA_GT) xs[c2] = LA_FMS_C(xc, U[rc + c2], xs[c2]);
        rprev = rinv;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (tx == 0) xs[kb - 1] *= rprev;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (r < rows)
        for (uint c = tx; c < kb; c += LA_GT) x[c] = xs[c];
}

__kernel void wbcl_chol_trsm_g(__global const float *D, const ulong off_d, const ulong stride_d, const uint ldd,
                               __global float *X, const ulong off_x, const ulong stride_x, const uint ldx,
                               const uint kb, const uint rows, __local float *U, __local float *Xl)
{
    la_trsm_rows(D, off_d, stride_d, ldd, X, off_x, stride_x, ldx, kb, rows, get_group_id(0), get_group_id(1), U, Xl);
}

/* ----------------------------------------------------------------------------
 * The panel through the diagonal block's inverse (the lookahead form with
 * WBCL_LA_PANEL_INV=1, host/ops/linalg.c): X <- X L11^-T as X W^T with
 * W = L11^-1, built once per block by wbcl_chol_inv128_g. The solve of
 * wbcl_chol_trsm_g is a chain of kb barrier steps (X's column c needs the
 * columns before it: about 50 us a 128 block on an H200, on the critical
 * path of every round); the product has no chain: X[r][c] = sum_{k <= c}
 * X[r][k] W[c][k], each column independent, so a work-group runs its kb steps
 * without a barrier. W comes from a chain of its own, but a short one: 16
 * substitution steps, then three doubling levels of small products.
 * ---------------------------------------------------------------------------- */

/* W = L^-1 for the kb x kb (kb <= LA_GNB) lower-triangular block L at D + off_d + b stride_d
 * (row stride ldd), treated as the LA_GNB x LA_GNB matrix [[L, 0], [0, I]]:
 *   1. the 8 diagonal blocks of 16: work-item t < 128 substitutes column t % 16 of block t / 16
 *      (L_qq w = e_j, 16 steps, w in registers, zeros above the diagonal written too);
 *   2. doubling, h = 16, 32, 64: for each pair of diagonal blocks A (rows a0 .. a0 + h - 1) and
 *      B (the h rows after), whose inverses W_AA, W_BB are done,
 *        T = L_BA W_AA,   W_BA = -W_BB T
 *      (the inverse of [[L_AA, 0], [L_BA, L_BB]] has W_BA = -W_BB L_BA W_AA), in 4 x 4 register
 *      tiles, 4h of them a level: 64 work-items at h = 16, 256 at h = 64.
 * W (row stride LA_GNB) and T (64 h <= 4096 floats) live in Wb + b stride_w (T after W's
 * LA_GNB^2 floats): global memory, ordered within the work-group by global-memory barriers.
 * Only W's lower triangle (and the zeros above the diagonal inside the 16-blocks) is written;
 * every read stays within those (the tiles' k ranges start at their first column, rounded down
 * to 4, and end at their last row, inside one 16-block). A non-SPD block (a NaN or Inf
 * in L, after its factor recorded the failing pivot) gives NaN or Inf in W, as the solve would.
 * global: (256 batch), local: (256). */
static inline __attribute__((always_inline)) float la_inv_l(const __global float *d, const uint ldd, const uint kb,
                                                            const uint i, const uint k)
{
    return i < kb && k < kb ? d[(ulong)i * ldd + k] : (i == k ? 1.0f : 0.0f);
}

__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void
wbcl_chol_inv128_g(__global const float *D, const ulong off_d, const ulong stride_d, const uint ldd, const uint kb,
                   __global float *Wb, const ulong stride_w)
{
    const uint t = get_local_id(0), b = get_group_id(0);
    const __global float *d = D + off_d + (ulong)b * stride_d;
    __global float *w = Wb + (ulong)b * stride_w;
    __global float *tb = w + LA_GNB * LA_GNB;
    if (t < LA_GNB) {
        const uint q0 = (t / LA_GT) * LA_GT, j = t % LA_GT;
        float x[LA_GT];
#pragma unroll
        for (uint i = 0; i < LA_GT; i++) {
            float s = i == j ? 1.0f : 0.0f;
#pragma unroll
            for (uint k = 0; k < i; k++) s = LA_FMS_C(la_inv_l(d, ldd, kb, q0 + i, q0 + k), x[k], s);
            x[i] = s / la_inv_l(d, ldd, kb, q0 + i, q0 + i);
            w[(q0 + i) * LA_GNB + q0 + j] = x[i];
        }
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (uint h = LA_GT; h < LA_GNB; h *= 2u) {
        const uint th = h / 4u, active = t < 4u * h;
        const uint pr = t / (th * th), rem = t % (th * th);
        const uint i0 = 4u * (rem / th), j0 = 4u * (rem % th);
        const uint a0 = 2u * pr * h, b0 = a0 + h;
        __global float *tp = tb + pr * h * h;
        float4 acc0 = (float4)(0.0f), acc1 = (float4)(0.0f), acc2 = (float4)(0.0f), acc3 = (float4)(0.0f);
        if (active) {
            /* T = L_BA W_AA (W_AA[k][j] = 0 for k < j) */
            for (uint k = j0; k < h; k++) {
                const float4 wv = vload4(0, w + (a0 + k) * LA_GNB + a0 + j0);
                acc0 = fma((float4)la_inv_l(d, ldd, kb, b0 + i0, a0 + k), wv, acc0);
                acc1 = fma((float4)la_inv_l(d, ldd, kb, b0 + i0 + 1u, a0 + k), wv, acc1);
                acc2 = fma((float4)la_inv_l(d, ldd, kb, b0 + i0 + 2u, a0 + k), wv, acc2);
                acc3 = fma((float4)la_inv_l(d, ldd, kb, b0 + i0 + 3u, a0 + k), wv, acc3);
            }
            vstore4(acc0, 0, tp + i0 * h + j0);
            vstore4(acc1, 0, tp + (i0 + 1u) * h + j0);
            vstore4(acc2, 0, tp + (i0 + 2u) * h + j0);
            vstore4(acc3, 0, tp + (i0 + 3u) * h + j0);
        }
        barrier(CLK_GLOBAL_MEM_FENCE);
        if (active) {
            /* W_BA = -W_BB T (W_BB[i][k] = 0 for k > i) */
            acc0 = acc1 = acc2 = acc3 = (float4)(0.0f);
            const __global float *wb = w + (b0 + i0) * LA_GNB + b0;
            for (uint k = 0; k < i0 + 4u; k++) {
                const float4 tv = vload4(0, tp + k * h + j0);
                acc0 = fma((float4)wb[k], tv, acc0);
                acc1 = fma((float4)wb[LA_GNB + k], tv, acc1);
                acc2 = fma((float4)wb[2u * LA_GNB + k], tv, acc2);
                acc3 = fma((float4)wb[3u * LA_GNB + k], tv, acc3);
            }
            __global float *wo = w + (b0 + i0) * LA_GNB + a0 + j0;
            vstore4(-acc0, 0, wo);
            vstore4(-acc1, 0, wo + LA_GNB);
            vstore4(-acc2, 0, wo + 2u * LA_GNB);
            vstore4(-acc3, 0, wo + 3u * LA_GNB);
        }
        barrier(CLK_GLOBAL_MEM_FENCE);
    }
}

/* Rows rb * 16 .. of X (rows in all) <- X W^T, W = L11^-1 (kb x kb lower, row stride ldw,
 * matrix b at Wm + b stride_w): wbcl_chol_upd_g's / wbcl_chol_upd128_g's first work-groups in
 * mode 2, in place of la_trsm_rows. W packed in U as la_trsm_rows packs L11 (U[k kb - TRI(k)
 * + c] = W[c][k], c >= k), the work-group's 16 rows of X in Xl; work-item (tx, ty): row ty,
 * columns tx + 16 q, summed over k = 0 .. c in order, with no barrier in the loop. */
static inline __attribute__((always_inline)) void la_pmul_rows(const __global float *Wm, const ulong stride_w,
                                                               const uint ldw, __global float *X, const ulong off_x,
                                                               const ulong stride_x, const uint ldx, const uint kb,
                                                               const uint rows, const uint rb, const uint b,
                                                               __local float *U, __local float *Xl)
{
    const uint tx = get_local_id(0), ty = get_local_id(1);
    const uint r = rb * LA_GT + ty;
    const __global float *wm = Wm + (ulong)b * stride_w;
    __global float *x = X + off_x + (ulong)b * stride_x + (ulong)r * ldx;
    __local float *xs = Xl + ty * (kb + 1);
    for (uint i = ty; i < kb; i += LA_GT)
        for (uint c = tx; c <= i; c += LA_GT) U[c * kb - LA_TRI(c) + i] = wm[(ulong)i * ldw + c];
    for (uint c = tx; c < kb; c += LA_GT) xs[c] = r < rows ? x[c] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    float acc[LA_GNB / LA_GT];
#pragma unroll
    for (uint q = 0; q < LA_GNB / LA_GT; q++) acc[q] = 0.0f;
    for (uint k = 0; k < kb; k++) {
        const uint rk = k * kb - LA_TRI(k); /* U[rk + c] = W[c][k] */
        const float xk = xs[k];
#pragma unroll
        for (uint q = 0; q < LA_GNB / LA_GT; q++) {
            const uint c = tx + LA_GT * q;
            if (c >= k && c < kb) acc[q] = LA_FMA_C(xk, U[rk + c], acc[q]);
        }
    }
    /* out through xs, as la_trsm_rows stores: storing acc[q] to x[c] straight from the unrolled
     * loop, under the same guards, made this kernel store into freed heap memory on PoCL 3.1 in
     * its GPU variant (valgrind: 4-byte stores 64 bytes apart; crashes at context release); not
     * understood, and not seen with this form */
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (uint q = 0; q < LA_GNB / LA_GT; q++) {
        const uint c = tx + LA_GT * q;
        if (c < kb) xs[c] = acc[q];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (r < rows)
        for (uint c = tx; c < kb; c += LA_GT) x[c] = xs[c];
}

/* Trailing update of the lower triangle only: C[i][c] -= sum_p P[i][p] P[c][p]
 * for c <= i < m, P (m x kb) and C (m x m) inside one buffer (L) at off_p and
 * off_c with row stride ld (the caller's regions do not overlap). One
 * work-group per 64 x 64 tile on or below the diagonal (tile g of the
 * triangle: row tile ti, column tile tj <= ti, g = ti (ti + 1) / 2 + tj),
 * except work-group 0, which takes tiles 0, 1, 2 (where m > 64: the next
 * diagonal block of up to 128) and then factors that kb2 x kb2 block in place
 * (la_blk_factor, pivots from pivot_base; T: kb2 (kb2 + 1) / 2 floats of local
 * memory). Per tile 16 x 16 work-items of 4 x 4 outputs (rows 4 ty.., columns 4 tx..), P in chunks of 16
 * along p through local memory (stored transposed: a float4 of four rows per
 * read, one for A and one for B per 16 FMAs), the next chunk read from global
 * memory into registers during the FMAs of the current one; diagonal tiles
 * store c <= i only. global: (16 (ntiles - 2), 16 batch) where m > 64, else
 * (16, 16 batch); local: (16, 16). */
#define LA_ST 64
#define LA_SK 16
/* The 4 x 4 register tile of work-item (tx, ty), acc0 .. acc3 (rows 4 ty + 0 .. 3, columns 4 tx
 * .. 4 tx + 3), += the LA_SK-deep slice held in the work-group's As, Bs (syrk_g, ltl_g) */
#define LA_TILE_FMA()                                                                             \
    _Pragma("unroll") for (uint sk_ = 0; sk_ < LA_SK; sk_++) {                                    \
        const float4 av = vload4(0, &As[sk_][4 * ty]), bv = vload4(0, &Bs[sk_][4 * tx]);          \
        acc0 = fma((float4)av.s0, bv, acc0);                                                      \
        acc1 = fma((float4)av.s1, bv, acc1);                                                      \
        acc2 = fma((float4)av.s2, bv, acc2);                                                      \
        acc3 = fma((float4)av.s3, bv, acc3);                                                      \
    }
/* C[i][c0 .. c0+3] -= v where on or below the diagonal (c <= i < m). */
static inline __attribute__((always_inline)) void la_syrk_store(__global float *cm, uint ld, uint m, uint i, uint c0,
                                                                float4 v)
{
    if (i >= m || c0 > i) return;
    __global float *row = cm + (ulong)i * ld + c0;
    if (c0 + 3 <= i) {
        vstore4(vload4(0, row) - v, 0, row);
    } else {
        row[0] -= v.s0;
        if (c0 + 1 <= i) row[1] -= v.s1;
        if (c0 + 2 <= i) row[2] -= v.s2;
    }
}
/* One 64 x 64 tile ti, tj of the update (see wbcl_chol_syrk_g). */
static inline __attribute__((always_inline)) void la_syrk_tile(const __global float *p, __global float *cm,
                                                               const uint ld, const uint m, const uint kb,
                                                               const uint ti, const uint tj,
                                                               __local float (*As)[LA_ST + 4],
                                                               __local float (*Bs)[LA_ST + 4])
{
    const uint tx = get_local_id(0), ty = get_local_id(1), t = ty * LA_GT + tx;
    const uint i0 = ti * LA_ST, j0 = tj * LA_ST;
    float4 acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
    const uint lr = t / LA_SK, lk = t % LA_SK; /* loads: rows lr + 16 q, column lk of the chunk */
    /* the next chunk is read into registers while the current one is multiplied */
    float pa[LA_ST / LA_GT], pb[LA_ST / LA_GT];
    const __global float *ra = p + (ulong)(i0 + lr) * ld + lk, *rb = p + (ulong)(j0 + lr) * ld + lk;
    const ulong step = (ulong)LA_GT * ld;
    for (uint q = 0; q < LA_ST / LA_GT; q++) {
        const uint rr = lr + LA_GT * q;
        pa[q] = i0 + rr < m && lk < kb ? ra[q * step] : 0.0f;
        pb[q] = j0 + rr < m && lk < kb ? rb[q * step] : 0.0f;
    }
    for (uint k0 = 0; k0 < kb; k0 += LA_SK) {
        for (uint q = 0; q < LA_ST / LA_GT; q++) {
            As[lk][lr + LA_GT * q] = pa[q];
            Bs[lk][lr + LA_GT * q] = pb[q];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const uint kk = k0 + LA_SK + lk;
        if (k0 + LA_SK < kb) {
            ra += LA_SK;
            rb += LA_SK;
            for (uint q = 0; q < LA_ST / LA_GT; q++) {
                const uint rr = lr + LA_GT * q;
                pa[q] = i0 + rr < m && kk < kb ? ra[q * step] : 0.0f;
                pb[q] = j0 + rr < m && kk < kb ? rb[q * step] : 0.0f;
            }
        }
        LA_TILE_FMA();
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const uint c0 = j0 + 4 * tx;
    la_syrk_store(cm, ld, m, i0 + 4 * ty, c0, acc0);
    la_syrk_store(cm, ld, m, i0 + 4 * ty + 1, c0, acc1);
    la_syrk_store(cm, ld, m, i0 + 4 * ty + 2, c0, acc2);
    la_syrk_store(cm, ld, m, i0 + 4 * ty + 3, c0, acc3);
}

/* One 128 x 128 tile ti, tj of the same update (wbcl_chol_upd128_g): 16 x 16 work-items of
 * 8 x 8 outputs (rows 64 g + 4 ty + r, columns 64 h + 4 tx + c; g, h < 2, r, c < 4), P in
 * slices of 8 along p through local memory (transposed), the next slice read into registers
 * during the FMAs of the current one: per slice step two float4 reads of As (shared by the 16
 * work-items of a row: broadcast) and two of Bs (16 consecutive float4 across tx) feed 64 FMAs,
 * where the 64 x 64 tile's 4 x 4 blocks get 16 (the shape of wbcl_gemm_tiled at 128 x 128 x 8).
 * The slice loads: work-item t reads row t / 8 + 32 q, column t % 8 (8 work-items a row's 32
 * bytes); the transposed stores As[t % 8][t / 8 + 32 q] hit 32 distinct banks per warp. */
#define LA_ST2 128
#define LA_SK2 8
static inline __attribute__((always_inline)) void la_syrk_tile128(const __global float *p, __global float *cm,
                                                                  const uint ld, const uint m, const uint kb,
                                                                  const uint ti, const uint tj,
                                                                  __local float (*As)[LA_ST2 + 4],
                                                                  __local float (*Bs)[LA_ST2 + 4])
{
    const uint tx = get_local_id(0), ty = get_local_id(1), t = ty * LA_GT + tx;
    const uint i0 = ti * LA_ST2, j0 = tj * LA_ST2;
    float4 c00 = 0.0f, c01 = 0.0f, c02 = 0.0f, c03 = 0.0f, c10 = 0.0f, c11 = 0.0f, c12 = 0.0f, c13 = 0.0f;
    float4 d00 = 0.0f, d01 = 0.0f, d02 = 0.0f, d03 = 0.0f, d10 = 0.0f, d11 = 0.0f, d12 = 0.0f, d13 = 0.0f;
    const uint lr = t / LA_SK2, lk = t % LA_SK2;
    float pa[4], pb[4];
    const __global float *ra = p + (ulong)(i0 + lr) * ld + lk, *rb = p + (ulong)(j0 + lr) * ld + lk;
    const ulong step = (ulong)32 * ld;
#pragma unroll
    for (uint q = 0; q < 4; q++) {
        const uint rr = lr + 32 * q;
        pa[q] = i0 + rr < m && lk < kb ? ra[q * step] : 0.0f;
        pb[q] = j0 + rr < m && lk < kb ? rb[q * step] : 0.0f;
    }
    for (uint k0 = 0; k0 < kb; k0 += LA_SK2) {
#pragma unroll
        for (uint q = 0; q < 4; q++) {
            As[lk][lr + 32 * q] = pa[q];
            Bs[lk][lr + 32 * q] = pb[q];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const uint kk = k0 + LA_SK2 + lk;
        if (k0 + LA_SK2 < kb) {
            ra += LA_SK2;
            rb += LA_SK2;
#pragma unroll
            for (uint q = 0; q < 4; q++) {
                const uint rr = lr + 32 * q;
                pa[q] = i0 + rr < m && kk < kb ? ra[q * step] : 0.0f;
                pb[q] = j0 + rr < m && kk < kb ? rb[q * step] : 0.0f;
            }
        }
        /* not unrolled: full unrolling hoists the local reads (155 registers on sm_90, one
         * work-group per SM), by 2 or 4 gives 130; 125 this way (two work-groups per SM; a
         * form without the register prefetch: 123) */
#pragma unroll 1
        for (uint sk = 0; sk < LA_SK2; sk++) {
            const float4 a0 = vload4(0, &As[sk][4 * ty]), a1 = vload4(0, &As[sk][64 + 4 * ty]);
            const float4 b0 = vload4(0, &Bs[sk][4 * tx]), b1 = vload4(0, &Bs[sk][64 + 4 * tx]);
            c00 = fma((float4)a0.s0, b0, c00), c01 = fma((float4)a0.s1, b0, c01);
            c02 = fma((float4)a0.s2, b0, c02), c03 = fma((float4)a0.s3, b0, c03);
            c10 = fma((float4)a0.s0, b1, c10), c11 = fma((float4)a0.s1, b1, c11);
            c12 = fma((float4)a0.s2, b1, c12), c13 = fma((float4)a0.s3, b1, c13);
            d00 = fma((float4)a1.s0, b0, d00), d01 = fma((float4)a1.s1, b0, d01);
            d02 = fma((float4)a1.s2, b0, d02), d03 = fma((float4)a1.s3, b0, d03);
            d10 = fma((float4)a1.s0, b1, d10), d11 = fma((float4)a1.s1, b1, d11);
            d12 = fma((float4)a1.s2, b1, d12), d13 = fma((float4)a1.s3, b1, d13);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    /* c: rows i0 + 4 ty + r; d: rows i0 + 64 + 4 ty + r; c?0 / d?0 columns j0 + 4 tx, c1? / d1? + 64 */
    const uint ia = i0 + 4 * ty, ib = ia + 64, ca = j0 + 4 * tx, cb = ca + 64;
    la_syrk_store(cm, ld, m, ia, ca, c00);
    la_syrk_store(cm, ld, m, ia + 1, ca, c01);
    la_syrk_store(cm, ld, m, ia + 2, ca, c02);
    la_syrk_store(cm, ld, m, ia + 3, ca, c03);
    la_syrk_store(cm, ld, m, ia, cb, c10);
    la_syrk_store(cm, ld, m, ia + 1, cb, c11);
    la_syrk_store(cm, ld, m, ia + 2, cb, c12);
    la_syrk_store(cm, ld, m, ia + 3, cb, c13);
    la_syrk_store(cm, ld, m, ib, ca, d00);
    la_syrk_store(cm, ld, m, ib + 1, ca, d01);
    la_syrk_store(cm, ld, m, ib + 2, ca, d02);
    la_syrk_store(cm, ld, m, ib + 3, ca, d03);
    la_syrk_store(cm, ld, m, ib, cb, d10);
    la_syrk_store(cm, ld, m, ib + 1, cb, d11);
    la_syrk_store(cm, ld, m, ib + 2, cb, d12);
    la_syrk_store(cm, ld, m, ib + 3, cb, d13);
}

__kernel void wbcl_chol_syrk_g(__global float *L, const ulong off_p, const ulong off_c, const ulong stride,
                               const uint ld, const uint m, const uint kb, const uint kb2, __global int *info,
                               const uint pivot_base, __local float *T)
{
    __local float As[LA_SK][LA_ST + 4];
    __local float Bs[LA_SK][LA_ST + 4];
    __local float col[2 * LA_GNB];
    __local int fail;
    __local float fval;
    const uint b = get_group_id(1), g = get_group_id(0);
    const __global float *p = L + off_p + (ulong)b * stride;
    __global float *cm = L + off_c + (ulong)b * stride;
    /* work-group 0 takes the tiles of the next diagonal block (tiles 0, 1, 2:
     * (0, 0), (1, 0), (1, 1)), the others one tile each */
    const uint lead = m > LA_ST ? 3 : 1, first = g ? g + lead - 1 : 0, last = g ? first + 1 : lead;
    for (uint tt = first; tt < last; tt++) {
        uint ti = (uint)((sqrt(8.0f * (float)tt + 1.0f) - 1.0f) * 0.5f);
        while (ti > 0 && LA_TRI(ti) > tt) ti--;
        while (LA_TRI(ti + 1) <= tt) ti++;
        la_syrk_tile(p, cm, ld, m, kb, ti, tt - LA_TRI(ti), As, Bs);
    }
    if (g == 0 && kb2 > 0) {
        /* its own stores of the block are visible to the whole work-group after this barrier */
        barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
        la_blk_factor(cm, ld, cm, ld, kb2, 0, info, b, pivot_base, T, col, &fail, &fval);
    }
}

/* Row block g of the next panel (C's rows kb2 .. m - 1, columns 0 .. kb2 - 1, C at off_c), for
 * wbcl_chol_upd_g's and wbcl_chol_upd128_g's first work-groups: solved against the next diagonal
 * block (mode 1, la_trsm_rows) or multiplied by its inverse W^T (mode 2, la_pmul_rows). */
static inline __attribute__((always_inline)) void la_next_panel_rows(__global float *L, const ulong off_c,
                                                                     const ulong stride, const uint ld, const uint m,
                                                                     const uint kb2, const uint mode, const uint g,
                                                                     const uint b, __local float *buf,
                                                                     __global const float *Winv,
                                                                     const ulong stride_w)
{
    __local float *U = buf, *Xl = buf + kb2 * (kb2 + 1u) / 2u;
    const ulong off_x = off_c + (ulong)kb2 * ld;
    if (mode == 2u)
        la_pmul_rows(Winv, stride_w, LA_GNB, L, off_x, stride, ld, kb2, m - kb2, g, b, U, Xl);
    else
        la_trsm_rows(L, off_c, stride, ld, L, off_x, stride, ld, kb2, m - kb2, g, b, U, Xl);
}

/* One round of the lookahead form of the blocked GPU factorization
 * (host/ops/linalg.c, chol_gpu): with P (m x kb at off_p) the panel just
 * solved and C (m x m at off_c) the trailing matrix, C -= P P^T by the 64 x 64
 * tiles of its lower triangle (la_syrk_tile; nt = ceil(m / 64) tile rows),
 * split by the next block column (its kb2 columns: c2 = ceil(kb2 / 64) tile
 * columns) so that the next diagonal block can be factored between the two
 * launches while the bulk of the update waits:
 *   mode 0: the tiles of tile columns < c2 (the next diagonal block and the
 *           panel below it), column by column;
 *   mode 1: work-groups 0 .. ntr - 1 solve that panel (C's rows kb2 .. m - 1,
 *           columns 0 .. kb2 - 1; 16 rows each) against the next diagonal
 *           block, factored by then (C's first kb2 rows and columns), as
 *           wbcl_chol_trsm_g does; the others take the tiles of tile columns
 *           >= c2 (columns >= 64 c2 >= kb2: disjoint from that panel);
 *   mode 2: mode 1 with the panel as X W^T, W = the block's inverse in Winv
 *           (la_pmul_rows; wbcl_chol_inv128_g made it); Winv and stride_w
 *           are read in mode 2 only.
 * (wbcl_chol_upd128_g: modes 1 and 2 with the rest by 128 x 128 tiles.)
 * buf: local memory of max(kb2 (kb2 + 1) / 2 + 16 (kb2 + 1), 2 * 16 * 68)
 * floats, the triangle and rows of the solve or the two tiles of the update.
 * global: (16 groups, 16 batch), local: (16, 16). */
__kernel void wbcl_chol_upd_g(__global float *L, const ulong off_p, const ulong off_c, const ulong stride,
                              const uint ld, const uint m, const uint kb, const uint kb2, const uint mode,
                              const uint ntr, __local float *buf, __global const float *Winv, const ulong stride_w)
{
    const uint b = get_group_id(1), g = get_group_id(0);
    const uint c2 = (kb2 + LA_ST - 1u) / LA_ST, nt = (m + LA_ST - 1u) / LA_ST;
    if (mode != 0u && g < ntr) {
        la_next_panel_rows(L, off_c, stride, ld, m, kb2, mode, g, b, buf, Winv, stride_w);
        return;
    }
    uint ti, tj;
    if (mode == 0u) {
        uint gg = g;
        tj = 0;
        while (tj + 1u < c2 && gg >= nt - tj) {
            gg -= nt - tj;
            tj++;
        }
        ti = tj + gg;
    } else {
        const uint tt = g - ntr;
        ti = (uint)((sqrt(8.0f * (float)tt + 1.0f) - 1.0f) * 0.5f);
        while (ti > 0 && LA_TRI(ti) > tt) ti--;
        while (LA_TRI(ti + 1) <= tt) ti++;
        tj = tt - LA_TRI(ti) + c2;
        ti += c2;
    }
    __local float(*As)[LA_ST + 4] = (__local float(*)[LA_ST + 4])buf;
    la_syrk_tile(L + off_p + (ulong)b * stride, L + off_c + (ulong)b * stride, ld, m, kb, ti, tj, As,
                 As + LA_SK);
}

/* wbcl_chol_upd_g's mode 1 with the rest of the update by 128 x 128 tiles (la_syrk_tile128) of
 * the lower triangle of C's rows and columns >= 64 c2 (nt2 = ceil((m - 64 c2) / 128) tile rows):
 * the host's choice for large trailing blocks (GPU_UPD128_MIN), four times the FMAs per local
 * read. A kernel of its own, so that the 64-tile modes keep their register count (ptxas sm_90:
 * the 8 x 8 outputs per work-item take about 150 registers, one work-group per SM).
 * Work-groups 0 .. ntr - 1 solve the next panel as in mode 1; buf as wbcl_chol_upd_g's (the
 * two slices, 2 * 8 * 132 floats, fit in its 2 * 16 * 68). The arguments are wbcl_chol_upd_g's,
 * so the host sets one list on both; mode is 1 or 2 (the panel by la_trsm_rows or la_pmul_rows).
 * global: (16 (ntr + nt2 (nt2 + 1) / 2), 16 batch), local: (16, 16). */
__kernel __attribute__((reqd_work_group_size(16, 16, 1))) void wbcl_chol_upd128_g(__global float *L, const ulong off_p, const ulong off_c, const ulong stride,
                                 const uint ld, const uint m, const uint kb, const uint kb2, const uint mode,
                                 const uint ntr, __local float *buf, __global const float *Winv,
                                 const ulong stride_w)
{
    const uint b = get_group_id(1), g = get_group_id(0);
    const uint col0 = LA_ST * ((kb2 + LA_ST - 1u) / LA_ST);
    if (g < ntr) {
        la_next_panel_rows(L, off_c, stride, ld, m, kb2, mode, g, b, buf, Winv, stride_w);
        return;
    }
    const uint tt = g - ntr;
    uint ti = (uint)((sqrt(8.0f * (float)tt + 1.0f) - 1.0f) * 0.5f);
    while (ti > 0 && LA_TRI(ti) > tt) ti--;
    while (LA_TRI(ti + 1) <= tt) ti++;
    __local float(*As)[LA_ST2 + 4] = (__local float(*)[LA_ST2 + 4])buf;
    la_syrk_tile128(L + off_p + (ulong)b * stride + (ulong)col0 * ld,
                    L + off_c + (ulong)b * stride + (ulong)col0 * ld + col0, ld, m - col0, kb, ti, tt - LA_TRI(ti),
                    As, As + LA_SK2);
}

/* L = tril(A) (L may be A): the strict upper triangle zeroed once before the
 * blocked factorization (the trailing updates write lower triangles only).
 * global: (roundup(n, 64), n, batch), local: (64, 1, 1). */
__kernel void wbcl_la_tril_g(__global const float *A, __global float *L, const uint n)
{
    const uint c = get_global_id(0), i = get_global_id(1), b = get_global_id(2);
    if (c >= n) return;
    const ulong at = ((ulong)b * n + i) * n + c;
    L[at] = c <= i ? A[at] : 0.0f;
}

/* Zeros the strict upper triangle of L (after trailing updates through the GEMM,
 * which computes whole squares). global: (roundup(n, 64), n, batch), local: (64, 1, 1). */
__kernel void wbcl_la_zero_upper_g(__global float *L, const uint n)
{
    const uint c = get_global_id(0), i = get_global_id(1), b = get_global_id(2);
    if (c >= n || c <= i) return;
    L[((ulong)b * n + i) * n + c] = 0.0f;
}

/* ============================================================================
 * GPU batched small Cholesky (n <= 64, host/ops/linalg.c, chol_small_g): one
 * work-group of NMAX (32 or 64) work-items per matrix, work-item i holding row i
 * of the matrix in NMAX registers (rows n .. NMAX - 1 hold zeros and store
 * nothing). Right-looking, n steps of one barrier each: step k posts column
 * k (raw, A'_ik) into a two-slot local buffer (slots of 2 NMAX floats, row i
 * at NMAX + i - k - 1: the rows below k from the float4-aligned NMAX on), each
 * row writes its finished L_ik (c_i / sqrt(d), the diagonal sqrt(d), 0 right
 * of the diagonal), and updates its later columns x_j -= (c_i / d) c_j with
 * d = c_k. The register array shifts by one column every step (x[j] <- x[j + 1]
 * - f c[k + 1 + j]), so column k is always x[0] and every register index is
 * static: no dynamic indexing, no stack frame, no copy of the matrix in local
 * memory; NMAX - 1 FMAs and NMAX / 4 broadcast float4 local reads per
 * work-item and step. Rows above k use f = 0, so the entries right of a row's
 * diagonal stay bounded; they are never stored. With BLOCKED = 0 (these two
 * kernels; BLOCKED = 1 is wbcl_chol_r128_g's form, below) the matrix comes in and L
 * goes out through a local tile of n rows (stride NMAX + 1: row i, column k
 * is bank i + k, conflict-free both for a row per work-item and a column per
 * step), a row of the matrix per load or store instruction: coalesced, where
 * a row per work-item would touch NMAX cache lines per instruction. Each
 * work-item reads and writes only its own row of the tile between the two
 * barriers. Every matrix's pivot status is written (first failing pivot from
 * pivot_base, or -1), so the call needs no clearing of the status first.
 * L may be A (the whole matrix is in the tile before anything is stored).
 * For 64 < n <= 128: wbcl_chol_blk_g.
 * global: (NMAX batch), local: (NMAX). */
static inline __attribute__((always_inline)) void la_chol_small(const __global float *A, const ulong off_a,
                                                                const ulong stride_a, const uint lda,
                                                                __global float *L, const ulong off_l,
                                                                const ulong stride_l, const uint ldl, const uint n,
                                                                __global int *info, const uint pivot_base,
                                                                const uint NMAX, __local float4 *c,
                                                                __local float *tile, const int BLOCKED)
{
    const uint i = get_local_id(0), b = get_group_id(0), TS = NMAX + 1u;
    const uint row = min(i, n - 1u); /* rows n .. NMAX - 1: zeros (they post zeros, store nothing) */
    const __global float *a = A + off_a + (ulong)b * stride_a;
    __global float *l = L + off_l + (ulong)b * stride_l;
    /* x[j] holds column k + j of row i at step k (shifted by one every step);
     * the reads are unconditional (clamped to the row's diagonal) so that the
     * loop unrolls into straight-line code and x stays in registers */
    float x[128];
    if (BLOCKED) {
        const __global float *ar = a + (ulong)row * lda;
#pragma unroll
        for (uint j = 0; j < NMAX; j++) {
            const float v = ar[min(j, row)];
            x[j] = i < n && j <= i ? v : 0.0f;
        }
    } else {
        if (i < n)
            for (uint r = 0; r < n; r++) tile[r * TS + i] = a[(ulong)r * lda + i];
        barrier(CLK_LOCAL_MEM_FENCE);
        __local float *t = tile + row * TS;
#pragma unroll
        for (uint j = 0; j < NMAX; j++) {
            const float v = t[min(j, row)];
            x[j] = i < n && j <= i ? v : 0.0f;
        }
    }
    /* two slots of 2 NMAX floats (NMAX / 2 float4s each): at step k row i posts its
     * raw column-k value at slot[NMAX + i - k - 1], so that the later rows' values,
     * cn[j] = column k of row k + 1 + j, start at the float4-aligned slot[NMAX] and
     * are read four at a time (one local read per four FMAs, where reading them
     * one by one made the 128 block local-read-bound: 68 us on an H200); the
     * pivot is slot[NMAX - 1]. Slots start zeroed; the places no row writes at a
     * step (columns >= NMAX) keep earlier, finite values that only ever meet
     * columns >= NMAX, which are never stored. */
    c[i] = (float4)(0.0f);
    barrier(CLK_LOCAL_MEM_FENCE);
    int fail = -1;
    float fval = 0.0f;
    /* BLOCKED: row i's finished entries go out four columns at a time (one 16-byte store per work-item
     * every fourth step instead of a 4-byte store every step, 32 rows per warp either way) where row
     * starts are 16-byte aligned (buffers are; the offsets and ld are checked here, uniformly) and n is
     * a multiple of 4 (the blocked factorization's diagonal blocks when its n is); else one by one */
    const int st4 = BLOCKED && ((off_l | (ulong)ldl | stride_l | (ulong)n) & 3ul) == 0ul;
    float4 lq = (float4)(0.0f);
    for (uint k = 0; k < n; k++) {
        __local float4 *ck4 = c + (k & 1u) * (NMAX / 2u);
        __local float *ck = (__local float *)ck4;
        const float ci = x[0];
        ck[NMAX + i - k - 1u] = ci;
        barrier(CLK_LOCAL_MEM_FENCE);
        const float d = ck[NMAX - 1u];
        if (fail < 0 && la_bad_pivot(d)) {
            fail = (int)k;
            fval = d;
        }
        const float f = i > k ? ci * (1.0f / d) : 0.0f, s = sqrt(d);
        if (BLOCKED) {
            const float lv = i == k ? s : (i > k ? ci * (1.0f / s) : 0.0f);
            if (st4) {
                const uint kk = k & 3u;
                lq.s0 = kk == 0u ? lv : lq.s0;
                lq.s1 = kk == 1u ? lv : lq.s1;
                lq.s2 = kk == 2u ? lv : lq.s2;
                lq.s3 = kk == 3u ? lv : lq.s3;
                if (i < n && kk == 3u) *(__global float4 *)(l + (ulong)i * ldl + (k - 3u)) = lq;
            } else if (i < n) {
                l[(ulong)i * ldl + k] = lv;
            }
        } else if (i < n && i >= k) {
            tile[i * TS + k] = i == k ? s : ci * (1.0f / s);
        }
        __local const float4 *cn4 = ck4 + NMAX / 4u;
        /* After step k only columns k + 1 .. NMAX - 1, i.e. x[0 .. NMAX - 2 - k], are still needed:
         * the 128 form updates the first wq float4 groups of registers, wq = 32 - 8 floor(k / 32)
         * (128, 96, 64, then 32 registers: 4 wq > NMAX - 1 - k), and skips the groups that hold
         * columns past the block (they stay finite and are never read back into a needed register):
         * 80 instead of 128 FMAs and local float4 reads per step on average. wq is uniform, and the
         * skip is a branch per group inside the one unrolled loop, so x keeps static indices (four
         * unrolled copies of the loop, one per width, put 94 of its floats on the stack on sm_90). */
        const uint wq = NMAX == 128u ? 32u - 8u * (k / 32u) : NMAX / 4u;
#pragma unroll
        for (uint q = 0; q < NMAX / 4u; q++) {
            if (q < wq) {
                const float4 v = cn4[q];
                x[4 * q] = LA_FMS_C(f, v.s0, x[4 * q + 1]);
                x[4 * q + 1] = LA_FMS_C(f, v.s1, x[4 * q + 2]);
                x[4 * q + 2] = LA_FMS_C(f, v.s2, x[4 * q + 3]);
                if (4 * q + 4 < NMAX) x[4 * q + 3] = LA_FMS_C(f, v.s3, x[4 * q + 4]);
            }
        }
        x[NMAX - 1] = 0.0f;
    }
    if (BLOCKED) {
        if (i == 0 && fail >= 0) la_record(info, b, pivot_base + (uint)fail, fval);
        return;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i < n)
        for (uint r = 0; r < n; r++) l[(ulong)r * ldl + i] = i <= r ? tile[r * TS + i] : 0.0f;
    if (i == 0) {
        info[2 * b] = fail < 0 ? -1 : (int)(pivot_base + (uint)fail);
        info[2 * b + 1] = as_int(fval);
    }
}

__kernel __attribute__((reqd_work_group_size(32, 1, 1))) void
wbcl_chol_s32_g(__global const float *A, const ulong off_a, const ulong stride_a, const uint lda, __global float *L,
                const ulong off_l, const ulong stride_l, const uint ldl, const uint n, __global int *info,
                const uint pivot_base)
{
    __local float4 c[32];
    __local float tile[32 * 33];
    la_chol_small(A, off_a, stride_a, lda, L, off_l, stride_l, ldl, n, info, pivot_base, 32, c, tile, 0);
}

__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void
wbcl_chol_s64_g(__global const float *A, const ulong off_a, const ulong stride_a, const uint lda, __global float *L,
                const ulong off_l, const ulong stride_l, const uint ldl, const uint n, __global int *info,
                const uint pivot_base)
{
    __local float4 c[64];
    __local float tile[64 * 65];
    la_chol_small(A, off_a, stride_a, lda, L, off_l, stride_l, ldl, n, info, pivot_base, 64, c, tile, 0);
}

/* The diagonal blocks of the blocked GPU factorization (n > 128, chol_gpu): the
 * row-per-work-item form above on a block of kb <= 128 rows, one work-group of
 * 128 per matrix, rows read and L written in place (L may be A: each
 * work-item reads its whole row first and writes only that row), the strict
 * upper part of the block's rows zeroed; a pivot failure recorded only where
 * the matrix has none yet (pivots from pivot_base: the block's first row), so
 * the status is cleared before the factorization. One barrier per column
 * against wbcl_chol_blk_g's strips: on an H200, 52 us for a 128 block against
 * blk_g's 90 (68 us when the slots were read one float at a time). A form
 * factoring the block and the panel below it in one launch (work-groups of
 * 128 block rows and 128 panel rows, every work-group refactoring the block,
 * so no panel solve) measured 100 us a launch, slower than this kernel plus the
 * solve beside the update (perf/RESULTS.md, fifth session).
 * global: (128 batch), local: (128). */
__kernel __attribute__((reqd_work_group_size(128, 1, 1))) void
wbcl_chol_r128_g(__global const float *A, const ulong off_a, const ulong stride_a, const uint lda, __global float *L,
                 const ulong off_l, const ulong stride_l, const uint ldl, const uint n, __global int *info,
                 const uint pivot_base)
{
    __local float4 c[128];
    la_chol_small(A, off_a, stride_a, lda, L, off_l, stride_l, ldl, n, info, pivot_base, 128, c, (__local float *)c, 1);
}

/* ============================================================================
 * GPU SPD inverse (host/ops/linalg.c, inverse_gpu): A^-1 = W^T W with W = L^-1,
 * blocked by nb (the factorization's block size):
 *   1. W_II = L_II^-1 for every diagonal block     wbcl_la_trinv_g, one launch
 *   2. per block row I > 0:
 *      T = L[I, 0:I] W[0:I, 0:I]                   the context's GEMM
 *      W[I, 0:I] = -W_II T                          the context's GEMM
 *   3. A^-1 = W^T W, lower tiles, mirrored          wbcl_la_ltl_g, one launch */

/* W_II = L_II^-1 (kb <= LA_GNB) for the diagonal blocks of L (n x n, ld n,
 * matrices at stride_l), written into W (n x n, ld n, stride_w: the block and
 * zeros right of it in its rows, i.e. W's strict upper triangle in those rows)
 * and into D (nblk blocks of nb x nb per matrix, ld nb, stride_d; zeros above
 * the diagonal). As wbcl_chol_trsm_g on the identity: a work-group takes rows
 * r = 16 g .. 16 g + 15 of I and solves X L_II^T = I, whose row r is column r
 * of W_II (L_II^T packed in U, row r's columns in registers, one barrier per
 * column). U: nb (nb + 1) / 2 floats, Xl: at least 2 x 16.
 * global: (16 ceil(nb / 16), 16 nblk batch), local: (16, 16). */
__kernel void wbcl_la_trinv_g(__global const float *Lm, const ulong stride_l, const uint n, const uint nb,
                              const uint nblk, __global float *W, const ulong stride_w, __global float *D,
                              const ulong stride_d, __local float *U, __local float *Xl)
{
    const uint tx = get_local_id(0), ty = get_local_id(1), gz = get_group_id(1);
    const uint blk = gz % nblk, b = gz / nblk, j0 = blk * nb;
    const uint kb = min(nb, n - j0);
    const uint r = get_group_id(0) * LA_GT + ty;
    const __global float *dm = Lm + (ulong)b * stride_l + (ulong)j0 * n + j0;
    __local float *xs = Xl + 2 * ty;
    for (uint i = ty; i < kb; i += LA_GT)
        for (uint c = tx; c <= i; c += LA_GT) U[c * kb - LA_TRI(c) + i] = dm[(ulong)i * n + c];
    float v[LA_GNB / LA_GT];
#pragma unroll
    for (uint q = 0; q < LA_GNB / LA_GT; q++) v[q] = tx + LA_GT * q == r ? 1.0f : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tx == 0) xs[0] = v[0] * (1.0f / U[0]);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint c = 0; c < kb; c++) {
        const uint rc = c * kb - LA_TRI(c);
        const float xc = xs[c & 1u];
#pragma unroll
        for (uint q = 0; q < LA_GNB / LA_GT; q++) {
            const uint c2 = tx + LA_GT * q;
            if (c2 == c) {
                v[q] = xc;
            } else if (c2 > c && c2 < kb) {
                v[q] = LA_FMS_C(xc, U[rc + c2], v[q]);
                if (c2 == c + 1) xs[(c + 1u) & 1u] = v[q] * (1.0f / U[rc + kb]);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (r >= kb) return;
    /* v[q] = X[r][c] = W_II[c][r], c = tx + 16 q (exactly 0 for c < r) */
    __global float *w = W + (ulong)b * stride_w + (ulong)j0 * n + j0;
    __global float *dd = D + (ulong)b * stride_d + (ulong)blk * nb * nb;
#pragma unroll
    for (uint q = 0; q < LA_GNB / LA_GT; q++) {
        const uint c = tx + LA_GT * q;
        if (c < kb) {
            const float val = c >= r ? v[q] : 0.0f;
            w[(ulong)c * n + r] = val;
            dd[c * nb + r] = val;
        }
    }
    /* zeros right of the block in row r of W */
    __global float *wr = w + (ulong)r * n;
    for (uint c = kb + tx; c < n - j0; c += LA_GT) wr[c] = 0.0f;
}

/* C[row][col0 .. col0 + 3] = v, within n columns; mode 1: only col <= row,
 * mode 2: only col >= row. */
static inline __attribute__((always_inline)) void la_ltl_store(__global float *C, uint n, uint row, uint col0,
                                                               float4 v, int mode)
{
    if (row >= n) return;
    __global float *p = C + (ulong)row * n + col0;
    if (!mode && col0 + 3 < n) {
        vstore4(v, 0, p);
        return;
    }
    const float e[4] = {v.s0, v.s1, v.s2, v.s3};
#pragma unroll
    for (uint f = 0; f < 4; f++) {
        const uint col = col0 + f;
        if (col < n && (mode != 1 || col <= row) && (mode != 2 || col >= row)) p[f] = e[f];
    }
}

/* C = W^T W (n x n, ld n; W lower triangular with zeros above the diagonal,
 * at least within each 64-row band's diagonal tile): one work-group per 64 x 64
 * tile (ti, tj) of the lower triangle, g = ti (ti + 1) / 2 + tj, summing
 * C[i][j] = sum_{k >= 64 ti} W[k][i] W[k][j] (W[k][i] = 0 for k < i), 16 x 16
 * work-items of 4 x 4 outputs, W's rows in chunks of 16 through local memory
 * (the next chunk read into registers during the FMAs); each tile also writes
 * its mirror, so C comes out exactly symmetric. About n^3 / 6 FMAs (n^3 / 3 flops).
 * global: (16 ntiles, 16 batch), local: (16, 16). */
__kernel void wbcl_la_ltl_g(__global const float *W, const ulong stride_w, const uint n, __global float *C,
                            const ulong stride_c)
{
    __local float As[LA_SK][LA_ST + 4];
    __local float Bs[LA_SK][LA_ST + 4];
    const uint tx = get_local_id(0), ty = get_local_id(1), t = ty * LA_GT + tx;
    const uint g = get_group_id(0), b = get_group_id(1);
    uint ti = (uint)((sqrt(8.0f * (float)g + 1.0f) - 1.0f) * 0.5f);
    while (ti > 0 && LA_TRI(ti) > g) ti--;
    while (LA_TRI(ti + 1) <= g) ti++;
    const uint tj = g - LA_TRI(ti), i0 = ti * LA_ST, j0 = tj * LA_ST;
    const __global float *w = W + (ulong)b * stride_w;
    __global float *cm = C + (ulong)b * stride_c;
    /* loads: chunk row lk = t / 16 (+ 0), columns (t % 16) + 16 q */
    const uint lr = t / LA_GT, lc = t % LA_GT;
    float pa[LA_ST / LA_GT], pb[LA_ST / LA_GT];
    float4 acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
    uint k = i0 + lr;
#pragma unroll
    for (uint q = 0; q < LA_ST / LA_GT; q++) {
        const uint ci = i0 + lc + LA_GT * q, cj = j0 + lc + LA_GT * q;
        pa[q] = k < n && ci < n ? w[(ulong)k * n + ci] : 0.0f;
        pb[q] = k < n && cj < n ? w[(ulong)k * n + cj] : 0.0f;
    }
    for (uint k0 = i0; k0 < n; k0 += LA_SK) {
#pragma unroll
        for (uint q = 0; q < LA_ST / LA_GT; q++) {
            As[lr][lc + LA_GT * q] = pa[q];
            Bs[lr][lc + LA_GT * q] = pb[q];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        k = k0 + LA_SK + lr;
        if (k0 + LA_SK < n) {
#pragma unroll
            for (uint q = 0; q < LA_ST / LA_GT; q++) {
                const uint ci = i0 + lc + LA_GT * q, cj = j0 + lc + LA_GT * q;
                pa[q] = k < n && ci < n ? w[(ulong)k * n + ci] : 0.0f;
                pb[q] = k < n && cj < n ? w[(ulong)k * n + cj] : 0.0f;
            }
        }
        LA_TILE_FMA();
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const uint r0 = i0 + 4 * ty, c0 = j0 + 4 * tx;
    const int diag = ti == tj;
    la_ltl_store(cm, n, r0, c0, acc0, diag);
    la_ltl_store(cm, n, r0 + 1, c0, acc1, diag);
    la_ltl_store(cm, n, r0 + 2, c0, acc2, diag);
    la_ltl_store(cm, n, r0 + 3, c0, acc3, diag);
    /* the mirror: C[c0 + f][r0 .. r0 + 3] */
    la_ltl_store(cm, n, c0, r0, (float4)(acc0.s0, acc1.s0, acc2.s0, acc3.s0), diag ? 2 : 0);
    la_ltl_store(cm, n, c0 + 1, r0, (float4)(acc0.s1, acc1.s1, acc2.s1, acc3.s1), diag ? 2 : 0);
    la_ltl_store(cm, n, c0 + 2, r0, (float4)(acc0.s2, acc1.s2, acc2.s2, acc3.s2), diag ? 2 : 0);
    la_ltl_store(cm, n, c0 + 3, r0, (float4)(acc0.s3, acc1.s3, acc2.s3, acc3.s3), diag ? 2 : 0);
}

/* GPU: the load of a kb x kb lower block (kb <= LA_WG_NB) into local memory. */
static inline __attribute__((always_inline)) void la_wg_load_block(__local float *S, const __global float *d, uint ldd,
                                                                   uint kb)
{
    const uint lid = get_local_id(0), wg = get_local_size(0);
    for (uint idx = lid; idx < kb * kb; idx += wg) {
        const uint i = idx / kb, j = idx % kb;
        S[i * LA_WG_LD + j] = j <= i ? d[(ulong)i * ldd + j] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* GPU: triangular solves as wbcl_trsm_inv, by substitution with L11 in local memory, one column
 * per work-item (neighbouring work-items touch neighbouring columns).
 * global: (roundup(ncols, wg), batch), local: (wg, 1). */
__kernel void wbcl_trsm_cols_wg(__global const float *D, const ulong off_d, const ulong stride_d, const uint ldd,
                                __global const float *X, const ulong off_x, const ulong stride_x, const uint ldx,
                                __global const float *U, const ulong off_u, const ulong stride_u, const uint ldu,
                                const uint ucols, __global float *Y, const ulong off_y, const ulong stride_y,
                                const uint ldy, const uint kb, const uint ncols, const uint batch, const uint upper)
{
    __local float S[LA_WG_NB * LA_WG_LD];
    const uint c = get_global_id(0), b = get_group_id(1);
    /* exactly batch work-groups along dimension 1 */
    (void)batch;
    la_wg_load_block(S, D + off_d + (ulong)b * stride_d, ldd, kb);
    if (c < ncols) {
        const __global float *x = X + off_x + (ulong)b * stride_x + c;
        const __global float *u = U + off_u + (ulong)b * stride_u + c;
        __global float *y = Y + off_y + (ulong)b * stride_y + c;
        for (uint t = 0; t < kb; t++) {
            const uint i = upper ? kb - 1 - t : t;
            la_t s = x[(ulong)i * ldx];
            if (c < ucols) s += u[(ulong)i * ldu];
            if (!upper)
                for (uint p = 0; p < i; p++) s = LA_FMS_C(S[i * LA_WG_LD + p], y[(ulong)p * ldy], s);
            else
                for (uint p = i + 1; p < kb; p++) s = LA_FMS_C(S[p * LA_WG_LD + i], y[(ulong)p * ldy], s);
            y[(ulong)i * ldy] = LA_DIVR(s, S[i * LA_WG_LD + i]);
        }
    }
}

#endif /* WBCL_VARIANT_GPU */

/* ============================================================================
 * Helpers (both variants). */

/* logdet[b] = 2 sum_i log L_b[i][i], Kahan-compensated float sum (the terms
 * have mixed signs and n up to thousands). global: (batch). */
__kernel void wbcl_la_logdet(__global const float *L, const ulong stride, const uint n, const uint batch,
                             __global float *out)
{
    const uint b = get_global_id(0);
    if (b >= batch) return;
    const __global float *l = L + (ulong)b * stride;
    float s = 0.0f, comp = 0.0f;
    for (uint i = 0; i < n; i++) {
        const float y = log(LA_RE(l[(ulong)i * n + i])) - comp;
        const float t = s + y;
        comp = (t - s) - y;
        s = t;
    }
    out[b] = 2.0f * s;
}

/* X_b = I (n x n, ld n). global: (n, batch). */
__kernel void wbcl_la_identity(__global float *X, const uint n, const uint batch)
{
    const uint i = get_global_id(0), b = get_global_id(1);
    if (i >= n || b >= batch) return;
    __global float *x = X + ((ulong)b * n + i) * n;
    for (uint j = 0; j < n; j++) x[j] = i == j ? 1.0f : 0.0f;
}

/* Zeros row i of X from column (i / nb + 1) nb on: the part of the upper
 * triangle right of the diagonal blocks of size nb (the blocked Cholesky's
 * factor kernel zeros the rest of its block rows' upper part).
 * global: (n, batch). */
__kernel void wbcl_la_zero_right(__global float *X, const uint n, const uint nb, const uint batch)
{
    const uint i = get_global_id(0), b = get_global_id(1);
    if (i >= n || b >= batch) return;
    __global float *x = X + ((ulong)b * n + i) * n;
    uint c = (i / nb + 1) * nb;
    for (; c + 16 <= n; c += 16) vstore16((float16)0.0f, 0, x + c);
    for (; c < n; c++) x[c] = 0.0f;
}

/* Copies the strict lower triangle onto the upper one: X[j][i] = X[i][j] for
 * j < i, in 16 x 16 tiles (a work-item reads a tile row-wise and writes its
 * mirror, so both sides stream). global: (tiles along i, tiles along j, batch),
 * work-items with tile j > tile i return. */
__kernel void wbcl_la_mirror(__global float *X, const uint n, const uint batch)
{
    const uint ti = get_global_id(0), tj = get_global_id(1), b = get_global_id(2);
    const uint nt = (n + 15) / 16;
    if (ti >= nt || tj > ti || b >= batch) return;
    __global float *x = X + (ulong)b * n * n;
    const uint i0 = ti * 16, j0 = tj * 16;
    const uint i1 = min(i0 + 16, n), j1 = min(j0 + 16, n);
    for (uint j = j0; j < j1; j++)
        for (uint i = max(i0, j + 1); i < i1; i++) x[(ulong)j * n + i] = x[(ulong)i * n + j];
}
