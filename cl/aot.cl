/* wbcl — AoT denoising attention (book 5.3.2, Theorem 5.1) and the SNR
 * measure (5.3.3), SPEC 1.3. Family "aot"; host side in host/ops/aot.c.
 * Views as in cl/tssa.cl: element (b, h, n, c) at off + b*sb + h*sh + n*sn + c. */

inline float wbcl_aot_dot(__global const float *a, __global const float *b, const uint p)
{
    float8 s8 = 0.0f;
    float s = 0.0f;
    uint c = 0;
    for (; c + 8 <= p; c += 8) s8 = fma(vload8(0, a + c), vload8(0, b + c), s8);
    for (; c < p; c++) s = fma(a[c], b[c], s);
    return s + ((s8.s0 + s8.s1) + (s8.s2 + s8.s3)) + ((s8.s4 + s8.s5) + (s8.s6 + s8.s7));
}

/* o_i = sum_j phi_ij w_j, phi_i = softmax_j(w_i . w_j) (row i of the symmetric Gram; the
 * book's column softmax), thresholded to tau where > tau and 0 elsewhere if thresh != 0.
 * One work-item per (b, h, i): an online max/sum pass, then the weighted sum. */
__kernel void wbcl_aot_attend(__global const float *w, const ulong off, const ulong sb, const ulong sh,
                              const ulong sn, __global float *o, const ulong ooff, const ulong osb, const ulong osh,
                              const ulong osn, const uint B, const uint K, const uint N, const uint p,
                              const int thresh, const float tau)
{
    const size_t r = get_global_id(0);
    if (r >= (size_t)B * K * N) return;
    const uint i = r % N;
    const size_t bh = r / N;
    const uint h = bh % K, b = bh / K;
    __global const float *wb = w + off + b * sb + h * sh;
    __global const float *wi = wb + i * sn;
    __global float *oi = o + ooff + b * osb + h * osh + i * osn;
    float m = -INFINITY, z = 0.0f;
    for (uint j = 0; j < N; j++) {
        const float g = wbcl_aot_dot(wi, wb + j * sn, p);
        if (g > m) {
            z = z * exp(m - g) + 1.0f;
            m = g;
        } else {
            z += exp(g - m);
        }
    }
    const float iz = 1.0f / z;
    for (uint c = 0; c < p; c++) oi[c] = 0.0f;
    for (uint j = 0; j < N; j++) {
        __global const float *wj = wb + j * sn;
        float a = exp(wbcl_aot_dot(wi, wj, p) - m) * iz;
        if (thresh) a = a > tau ? tau : 0.0f;
        if (a == 0.0f) continue;
        uint c = 0;
        for (; c + 8 <= p; c += 8) vstore8(fma((float8)a, vload8(0, wj + c), vload8(0, oi + c)), 0, oi + c);
        for (; c < p; c++) oi[c] = fma(a, wj[c], oi[c]);
    }
}

/* ---- CPU-shaped thresholded step (ctx->variant == CPU; host/ops/aot.c threshold_cpu) ----------------
 * Theorem 5.1's phi: weight a_ij = exp(g_ij - m_i) / l_i (g = w w^T, m_i the row maximum, l_i the row's
 * sum of exp(g_ij - m_i)) set to tau where > tau, else 0. As tau > 1/2 and a row's weights sum to 1, only
 * a row's strict maximum can pass, with weight exactly 1 / l_i: o_i = tau w_j* where 1 / l_i > tau (j* the
 * argmax), else 0 (a tie for the maximum gives 1 / l_i <= 1/2: 0, as wbcl_aot_attend finds too). So one
 * pass over the keys (no weighted sum) keeps m, l and j*. Register-tiled as the fused attention kernel:
 * the keys w_j packed into panels of 16 (Wp[bh][panel][c][j], cl/energy.cl wbcl_energy_pack), AT_QB = 6
 * queries per work-item: 6 x 16 scores in 6 float16 registers (12 AVX2 accumulators) per panel. */
#define AT_KP 16
#define AT_QB 6

/* global (ceil(N / AT_QB), B * K) */
__kernel void wbcl_aot_threshold_cpu(__global const float *restrict w, const ulong off, const ulong sb,
                                     const ulong sh, const ulong sn, __global const float *restrict wp,
                                     __global float *restrict o, const ulong ooff, const ulong osb, const ulong osh,
                                     const ulong osn, const uint K, const uint BK, const uint N, const uint p,
                                     const uint npan, const float tau)
{
    const uint i0 = get_global_id(0) * AT_QB, bh = get_global_id(1);
    if (i0 >= N || bh >= BK) return;
    const uint b = bh / K, h = bh % K;
    const uint ni = min((uint)AT_QB, N - i0);
    __global const float *wb = w + off + b * sb + h * sh;
    __global const float *wpb = wp + (ulong)bh * npan * ((ulong)p * AT_KP);
    __global const float *wi[AT_QB];
    for (uint r = 0; r < AT_QB; r++) wi[r] = wb + (ulong)(i0 + min(r, ni - 1)) * sn; /* past N: repeats */
    const int16 iota = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    float m[AT_QB], l[AT_QB];
    uint js[AT_QB];
    for (uint r = 0; r < AT_QB; r++) {
        m[r] = -FLT_MAX;
        l[r] = 0.0f;
        js[r] = 0;
    }
    for (uint pn = 0; pn < npan; pn++) { /* npan = ceil(N / 16) */
        __global const float *kp = wpb + (ulong)pn * ((ulong)p * AT_KP);
        float16 s[AT_QB];
#pragma unroll
        for (int r = 0; r < AT_QB; r++) s[r] = (float16)(0.0f);
        for (uint c = 0; c < p; c++) {
            const float16 kv = vload16(0, kp + c * AT_KP);
#pragma unroll
            for (int r = 0; r < AT_QB; r++) s[r] = fma((float16)(wi[r][c]), kv, s[r]);
        }
        const int16 ok = ((int16)((int)(pn * AT_KP)) + iota) < (int16)((int)N);
        for (uint r = 0; r < AT_QB; r++) {
            const float16 sr = select((float16)(-FLT_MAX), s[r], ok);
            const float8 a8 = fmax(sr.lo, sr.hi);
            const float4 a4 = fmax(a8.lo, a8.hi);
            const float2 a2 = fmax(a4.lo, a4.hi);
            const float bm = fmax(a2.x, a2.y);
            if (bm > m[r]) { /* a new strict maximum: its first lane, the sum rescaled */
                float sv[AT_KP];
                vstore16(sr, 0, sv);
                uint j = 0;
                while (sv[j] != bm) j++;
                js[r] = pn * AT_KP + j;
                l[r] *= exp(m[r] - bm);
                m[r] = bm;
            }
            const float16 e = select((float16)(0.0f), exp(sr - (float16)(m[r])), ok);
            const float8 e8 = e.lo + e.hi;
            const float4 e4 = e8.lo + e8.hi;
            l[r] += (e4.x + e4.y) + (e4.z + e4.w);
        }
    }
    for (uint r = 0; r < ni; r++) {
        __global float *oi = o + ooff + b * osb + h * osh + (ulong)(i0 + r) * osn;
        const float iz = 1.0f / l[r];
        __global const float *wj = wb + (ulong)js[r] * sn;
        if (iz > tau)
            for (uint c = 0; c < p; c++) oi[c] = tau * wj[c];
        else
            for (uint c = 0; c < p; c++) oi[c] = 0.0f;
    }
}

/* Per token r with label k: s = U_k (U_k^T z_r) formed explicitly from W = Z U,
 * out[2r] = ||s||^2, out[2r + 1] = ||z_r - s||^2. U is (d, KP). */
__kernel void wbcl_aot_snr_rows(__global const float *Z, __global const float *U, __global const float *W,
                                __global const int *labels, const uint rows, const uint d, const uint KP,
                                const uint p, __global float *out)
{
    const size_t r = get_global_id(0);
    if (r >= rows) return;
    const uint k = (uint)labels[r];
    __global const float *wr = W + r * KP + k * p;
    __global const float *z = Z + r * d;
    float sig = 0.0f, noi = 0.0f;
    for (uint i = 0; i < d; i++) {
        const float s = wbcl_aot_dot(wr, U + (size_t)i * KP + k * p, p);
        const float e = z[i] - s;
        sig = fma(s, s, sig);
        noi = fma(e, e, noi);
    }
    out[2 * r] = sig;
    out[2 * r + 1] = noi;
}

/* ---- GPU-shaped denoising step (ctx->variant == GPU; host/ops/aot.c attend_gpu) -------------------
 * Flash-attention shape: a work-group of AG_WG = 256 work-items owns a block of AG_BQ queries of one
 * (b, h) and streams the keys (= values = w) through __local memory in tiles of AG_BK, loaded by all
 * work-items together (consecutive work-items read consecutive columns of a row: coalesced). Per tile:
 *   S = Q K^T      work-item (ty, tx) = (t / 16, t % 16) forms rows ty*TM.. x keys tx*TN.. of S in
 *                  registers from the transposed tiles Qt, Kt (a warp reads 2 distinct Q words and 16
 *                  consecutive K pairs per column: broadcast + one wavefront), stores them in Pt;
 *   row stats      work-item t < BQ owns row t's running max m and sum l (registers): online softmax
 *                  over the tile, the weights written back into Pt, the rescale factor into al[t];
 *   O += P V       work-item (ty, tx) keeps the TM x TC register tile of O (rows ty*TM.., columns
 *                  tx*TC..), rescaled by al, accumulated from Pt (broadcast) and Vs (consecutive).
 * Softmax: one pass, O / l at the end. Threshold (Theorem 5.1): tau > 1/2 and a row's weights sum to 1,
 * so only the row's strict maximum can pass, with weight exactly 1 / l (see wbcl_aot_threshold_cpu): one
 * pass computes m, l and the argmax j* (no V product), then o_i = tau w_j* where 1 / l > tau, else 0
 * (two passes before: m and l, then the thresholded weights times V). p (runtime) <= WBCL_AOT_PC (compile-time column
 * capacity, 16/32/64/128: the host picks the smallest that holds p); columns beyond p are zero in
 * the tiles. No private array is indexed at run time: every per-work-item array has compile-time
 * size and compile-time indices (fully unrolled), so all of it lives in registers. */
#ifdef WBCL_AOT_PC
#define AG_PC WBCL_AOT_PC
#if AG_PC > 64
#define AG_BQ 32 /* 48 KiB of __local memory: half the queries and keys per tile at p <= 128 */
#define AG_BK 16
#else
#define AG_BQ 64
#define AG_BK 32
#endif
#define AG_WG 256
#define AG_TM (AG_BQ / 16) /* rows per work-item (S and O) */
#define AG_TN (AG_BK / 16) /* keys per work-item (S)        */
#define AG_TC (AG_PC / 16) /* columns per work-item (O)     */
#define AG_SQ (AG_BQ + 4)  /* row stride of Qt and Pt (multiple of 4: aligned vector reads) */
#define AG_SK (AG_BK + 2)  /* row stride of Kt: even (aligned pairs), transposed stores 2-way conflicts */

__kernel __attribute__((reqd_work_group_size(AG_WG, 1, 1))) void wbcl_aot_attend_g(
    __global const float *restrict w, const ulong off, const ulong sb, const ulong sh, const ulong sn,
    __global float *restrict o, const ulong ooff, const ulong osb, const ulong osh, const ulong osn, const uint K,
    const uint N, const uint p, const int thresh, const float tau)
{
    __local float Qt[AG_PC * AG_SQ] __attribute__((aligned(16))); /* Qt[c*SQ + r] = w[i0 + r, c]            */
    __local float Kt[AG_PC * AG_SK] __attribute__((aligned(16))); /* Kt[c*SK + j] = w[j0 + j, c]            */
    __local float Vs[AG_BK * AG_PC] __attribute__((aligned(16))); /* Vs[j*PC + c] = w[j0 + j, c]            */
    __local float Pt[AG_BK * AG_SQ] __attribute__((aligned(16))); /* Pt[j*SQ + r]: scores, then weights     */
    __local float al[AG_BQ];         /* per row: the tile's rescale factor, at the end 1/l */
    __local uint js[AG_BQ];          /* threshold: per row, the argmax so far                   */
    const uint t = get_local_id(0), ty = t / 16, tx = t % 16;
    const uint bh = get_group_id(1), b = bh / K, h = bh % K;
    const uint i0 = get_group_id(0) * AG_BQ;
    __global const float *wb = w + off + b * sb + h * sh;
    for (uint e = t; e < AG_BQ * AG_PC; e += AG_WG) {
        const uint r = e / AG_PC, c = e % AG_PC;
        Qt[c * AG_SQ + r] = i0 + r < N && c < p ? wb[(ulong)(i0 + r) * sn + c] : 0.0f;
    }
    float m = -INFINITY, l = 0.0f, il = 0.0f; /* row t's statistics (t < BQ) */
    uint jm = 0;                              /* threshold: row t's argmax */
    float acc[AG_TM][AG_TC];
#pragma unroll
    for (int i = 0; i < AG_TM; i++)
#pragma unroll
        for (int c = 0; c < AG_TC; c++) acc[i][c] = 0.0f;
    for (uint j0 = 0; j0 < N; j0 += AG_BK) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's readers are done */
        for (uint e = t; e < AG_BK * AG_PC; e += AG_WG) {
            const uint j = e / AG_PC, c = e % AG_PC;
            const float x = j0 + j < N && c < p ? wb[(ulong)(j0 + j) * sn + c] : 0.0f;
            Kt[c * AG_SK + j] = x;
            Vs[e] = x;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        float s[AG_TM][AG_TN];
#pragma unroll
        for (int i = 0; i < AG_TM; i++)
#pragma unroll
            for (int k = 0; k < AG_TN; k++) s[i][k] = 0.0f;
        for (uint c = 0; c < p; c++) {
            float qv[AG_TM], kv[AG_TN];
#pragma unroll
            for (int i = 0; i < AG_TM; i++) qv[i] = Qt[c * AG_SQ + ty * AG_TM + i];
#pragma unroll
            for (int k = 0; k < AG_TN; k++) kv[k] = Kt[c * AG_SK + tx * AG_TN + k];
#pragma unroll
            for (int i = 0; i < AG_TM; i++)
#pragma unroll
                for (int k = 0; k < AG_TN; k++) s[i][k] = fma(qv[i], kv[k], s[i][k]);
        }
#pragma unroll
        for (int k = 0; k < AG_TN; k++)
#pragma unroll
            for (int i = 0; i < AG_TM; i++)
                Pt[(tx * AG_TN + k) * AG_SQ + ty * AG_TM + i] = j0 + tx * AG_TN + k < N ? s[i][k] : -INFINITY;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t < AG_BQ) { /* online softmax statistics; the weights too, unless thresholding */
            const uint nk = min((uint)AG_BK, N - j0);
            float mx = -INFINITY;
            uint jx = 0;
            for (uint j = 0; j < nk; j++) {
                const float x = Pt[j * AG_SQ + t];
                if (x > mx) { /* the first lane of the tile's maximum */
                    mx = x;
                    jx = j;
                }
            }
            if (mx > m) jm = j0 + jx; /* a new strict maximum of the row */
            const float mn = fmax(m, mx), a = exp(m - mn);
            float z = 0.0f;
            for (uint j = 0; j < AG_BK; j++) {
                const float e = exp(Pt[j * AG_SQ + t] - mn); /* masked keys: exp(-inf) = 0 */
                z += e;
                if (!thresh) Pt[j * AG_SQ + t] = e;
            }
            l = fma(l, a, z);
            m = mn;
            al[t] = a;
        }
        if (thresh) continue; /* uniform over the work-group: no V product */
        barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
        for (int i = 0; i < AG_TM; i++) {
            const float a = al[ty * AG_TM + i];
#pragma unroll
            for (int c = 0; c < AG_TC; c++) acc[i][c] *= a;
        }
#pragma unroll 8
        for (int j = 0; j < AG_BK; j++) {
            float pv[AG_TM], vv[AG_TC];
#pragma unroll
            for (int i = 0; i < AG_TM; i++) pv[i] = Pt[j * AG_SQ + ty * AG_TM + i];
#pragma unroll
            for (int c = 0; c < AG_TC; c++) vv[c] = Vs[j * AG_PC + tx * AG_TC + c];
#pragma unroll
            for (int i = 0; i < AG_TM; i++)
#pragma unroll
                for (int c = 0; c < AG_TC; c++) acc[i][c] = fma(pv[i], vv[c], acc[i][c]);
        }
    }
    il = 1.0f / l;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t < AG_BQ) {
        al[t] = thresh ? (il > tau ? tau : 0.0f) : il; /* threshold: the weight of w_j* */
        js[t] = jm;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    __global float *ob = o + ooff + b * osb + h * osh;
#pragma unroll
    for (int i = 0; i < AG_TM; i++) {
        const uint r = ty * AG_TM + i;
        if (i0 + r >= N) break;
        const float a = al[r];
        __global const float *wj = wb + (ulong)js[r] * sn;
#pragma unroll
        for (int c = 0; c < AG_TC; c++) {
            const uint col = tx * AG_TC + c;
            if (col < p) ob[(ulong)(i0 + r) * osn + col] = thresh ? a * wj[col] : acc[i][c] * a;
        }
    }
}
#endif
