/* wbcl — XCA (XCiT cross-covariance attention), SPEC 1.6. Family "xca";
 * host side in host/ops/xca.c. The channel norms over tokens come from the
 * TSSA row-block kernels (wbcl_tssa_rowsq, wbcl_tssa_norm_finish) and the two
 * p x p products per head from the GEMM paths; this file has the softmax. */

/* In place on G (B*K, p, p), one work-item per row (b, h, c):
 *   A[c, e] = softmax_e(G[c, e] * invq[b, h, c] * invk[b, h, e] * temperature[h])
 * with invq = 1 / max(||q_c||, 1e-12) over tokens (likewise invk), so
 * G * invq * invk = q^ k^T of normalized q and k. Max-subtracted. */
__kernel void wbcl_xca_softmax(__global float *G, const uint B, const uint K, const uint p,
                               __global const float *invq, __global const float *invk,
                               __global const float *temperature)
{
    const size_t r = get_global_id(0);
    if (r >= (size_t)B * K * p) return;
    const uint c = r % p;
    const size_t bh = r / p;
    const uint h = bh % K;
    __global float *row = G + r * p;
    const float qi = invq[bh * p + c] * temperature[h];
    __global const float *ik = invk + bh * p;
    float m = -INFINITY;
    for (uint e = 0; e < p; e++) {
        const float l = row[e] * qi * ik[e];
        row[e] = l;
        m = fmax(m, l);
    }
    float z = 0.0f;
    for (uint e = 0; e < p; e++) {
        const float x = exp(row[e] - m);
        row[e] = x;
        z += x;
    }
    const float iz = 1.0f / z;
    for (uint e = 0; e < p; e++) row[e] *= iz;
}

/* ---- GPU-shaped XCA (ctx->variant == WBCL_VARIANT_GPU; host/ops/xca.c xca_run_gpu) ------------
 * Three launches per call, no GEMM, no CPU-shaped row loops:
 *   wbcl_xca_g_gram     work-group (b, h, token slice s, 64x64 channel tile): partial Gram
 *                       G_s = q_s^T k_s and partial sums of q^2 and k^2 over the slice's tokens
 *                       (work-groups enough to fill the device: the host cuts N into S slices)
 *   wbcl_xca_g_softmax  work-group per row (b, h, c): sums the S partials (the second, small
 *                       reduction pass), normalizes, scales by the temperature, softmax over e
 *   wbcl_xca_g_apply    work-group (b, h, 64-token tile, 64-channel tile): o = v A^T
 * Work-groups of 256 work-items as 16 x 16 (tx, ty); in the two product kernels work-item (tx, ty)
 * owns the 4 x 4 outputs (ty + 16 i, tx + 16 j): its local-memory reads are broadcasts or
 * consecutive words (no bank conflicts), its global loads are whole token rows (coalesced along
 * the channels). q, k, v, o are strided views (mem, off, sb, sh, sn: element (b, h, n, c) at
 * off + b sb + h sh + n sn + c, host/core/views.h). Partials per (b, h, s): p*p Gram entries,
 * then p sums of q^2, then p sums of k^2 (PS = p*p + 2p floats). */
#if WBCL_VARIANT_GPU
#define WBCL_XCA_T 64   /* channel tile (rows and columns of a Gram tile, columns of an o tile) */
#define WBCL_XCA_TT 32  /* tokens per local-memory tile in the Gram kernel                   */
#define WBCL_XCA_TE 32  /* columns e of A (and of v) per local-memory chunk in the apply kernel */
#define WBCL_XCA_TN 64  /* tokens per o tile                                                  */
#if WBCL_XCA_TN != WBCL_XCA_T
#error "wbcl_xca_g_apply loads A rows and v rows in one loop: WBCL_XCA_TN must equal WBCL_XCA_T"
#endif

__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void
wbcl_xca_g_gram(__global const float *qm, const ulong qoff, const ulong qsb, const ulong qsh, const ulong qsn,
                __global const float *km, const ulong koff, const ulong ksb, const ulong ksh, const ulong ksn,
                const uint K, const uint p, const uint N, const uint L, const uint S, __global float *part)
{
    __local float qs[WBCL_XCA_TT][WBCL_XCA_T], ks[WBCL_XCA_TT][WBCL_XCA_T];
    const uint lid = get_local_id(0), tx = lid % 16, ty = lid / 16;
    const uint lc = lid % WBCL_XCA_T, lr = lid / WBCL_XCA_T; /* loader: channel, first token row */
    const uint nbc = (p + WBCL_XCA_T - 1) / WBCL_XCA_T;
    size_t g = get_group_id(0);
    const uint cj = g % nbc;
    g /= nbc;
    const uint ci = g % nbc;
    g /= nbc;
    const uint s = g % S;
    const size_t bh = g / S;
    const size_t b = bh / K, h = bh % K;
    const uint c0 = ci * WBCL_XCA_T, e0 = cj * WBCL_XCA_T;
    const uint n0 = s * L, n1 = min(N, n0 + L);
    __global const float *qb = qm + qoff + b * qsb + h * qsh + c0 + lc;
    __global const float *kb = km + koff + b * ksb + h * ksh + e0 + lc;
    const int qin = c0 + lc < p, kin = e0 + lc < p;
    float acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    float sq = 0.0f, sk = 0.0f;
    for (uint n = n0; n < n1; n += WBCL_XCA_TT) {
        for (uint t = lr; t < WBCL_XCA_TT; t += 256 / WBCL_XCA_T) {
            const uint nn = n + t;
            const float a = qin && nn < n1 ? qb[(size_t)nn * qsn] : 0.0f;
            const float c = kin && nn < n1 ? kb[(size_t)nn * ksn] : 0.0f;
            qs[t][lc] = a;
            ks[t][lc] = c;
            sq = fma(a, a, sq);
            sk = fma(c, c, sk);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint t = 0; t < WBCL_XCA_TT; t++) {
            float a[4], c[4];
            for (int i = 0; i < 4; i++) a[i] = qs[t][ty + 16 * i];
            for (int j = 0; j < 4; j++) c[j] = ks[t][tx + 16 * j];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) acc[i][j] = fma(a[i], c[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const size_t PS = (size_t)p * p + 2 * (size_t)p;
    __global float *out = part + (bh * S + s) * PS;
    for (int i = 0; i < 4; i++) {
        const uint c = c0 + ty + 16 * i;
        for (int j = 0; j < 4; j++) {
            const uint e = e0 + tx + 16 * j;
            if (c < p && e < p) out[(size_t)c * p + e] = acc[i][j];
        }
    }
    /* sums of squares: the 256 / 64 = 4 loader rows of each channel, through local memory */
    qs[lr][lc] = sq;
    ks[lr][lc] = sk;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lr == 0) {
        if (cj == 0 && qin) out[(size_t)p * p + c0 + lc] = (qs[0][lc] + qs[1][lc]) + (qs[2][lc] + qs[3][lc]);
        if (ci == 0 && kin) out[(size_t)p * p + p + e0 + lc] = (ks[0][lc] + ks[1][lc]) + (ks[2][lc] + ks[3][lc]);
    }
}

/* Sum over a work-group of 64 (tree in local memory); every work-item gets the result. */
inline float wbcl_xca_wg64(float v, __local float *sh, const int is_max)
{
    const uint l = get_local_id(0);
    sh[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint w = 32; w > 0; w >>= 1) {
        if (l < w) sh[l] = is_max ? fmax(sh[l], sh[l + w]) : sh[l] + sh[l + w];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = sh[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* One work-group of 64 per row (b, h, c) of A (B*K*p groups): sums the S slice partials,
 *   A[c, e] = softmax_e(G[c, e] * temperature[h] / max(||q_c||, 1e-12) / max(||k_e||, 1e-12)),
 * the same operations in the same order as wbcl_xca_softmax after the CPU path's norms. */
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void
wbcl_xca_g_softmax(__global const float *part, const uint K, const uint p, const uint S,
                   __global const float *temperature, __global float *A)
{
    __local float sh[64];
    const uint l = get_local_id(0);
    const size_t r = get_group_id(0), bh = r / p;
    const uint c = r % p, h = bh % K;
    const size_t PS = (size_t)p * p + 2 * (size_t)p;
    __global const float *pb = part + bh * S * PS;
    float qq = 0.0f;
    for (uint s = 0; s < S; s++) qq += pb[s * PS + (size_t)p * p + c];
    const float qi = (1.0f / fmax(sqrt(qq), 1e-12f)) * temperature[h];
    __global float *row = A + r * p;
    float m = -INFINITY;
    for (uint e = l; e < p; e += 64) {
        float gs = 0.0f, kk = 0.0f;
        for (uint s = 0; s < S; s++) {
            gs += pb[s * PS + (size_t)c * p + e];
            kk += pb[s * PS + (size_t)p * p + p + e];
        }
        const float lg = gs * qi * (1.0f / fmax(sqrt(kk), 1e-12f));
        row[e] = lg;
        m = fmax(m, lg);
    }
    m = wbcl_xca_wg64(m, sh, 1);
    float z = 0.0f;
    for (uint e = l; e < p; e += 64) {
        const float x = exp(row[e] - m);
        row[e] = x;
        z += x;
    }
    const float iz = 1.0f / wbcl_xca_wg64(z, sh, 0);
    for (uint e = l; e < p; e += 64) row[e] *= iz;
}

/* o[b, h, n, c] = sum_e A[b, h, c, e] v[b, h, n, e]: work-group (b, h, token tile, channel tile),
 * groups ordered channel tile fastest, then token tile, then head. Chunks of WBCL_XCA_TE columns e
 * of A and v in local memory (rows padded by one word: conflict-free column reads). */
__kernel __attribute__((reqd_work_group_size(256, 1, 1))) void
wbcl_xca_g_apply(__global const float *vm, const ulong voff, const ulong vsb, const ulong vsh, const ulong vsn,
                 __global float *om, const ulong ooff, const ulong osb, const ulong osh, const ulong osn,
                 const uint K, const uint p, const uint N, __global const float *A)
{
    __local float As[WBCL_XCA_T][WBCL_XCA_TE + 1], Vs[WBCL_XCA_TN][WBCL_XCA_TE + 1];
    const uint lid = get_local_id(0), tx = lid % 16, ty = lid / 16;
    const uint le = lid % WBCL_XCA_TE, lr = lid / WBCL_XCA_TE; /* loader: column, first row */
    const uint nbc = (p + WBCL_XCA_T - 1) / WBCL_XCA_T, nbn = (N + WBCL_XCA_TN - 1) / WBCL_XCA_TN;
    size_t g = get_group_id(0);
    const uint ci = g % nbc;
    g /= nbc;
    const uint ni = g % nbn;
    const size_t bh = g / nbn;
    const size_t b = bh / K, h = bh % K;
    const uint c0 = ci * WBCL_XCA_T, n0 = ni * WBCL_XCA_TN;
    __global const float *vb = vm + voff + b * vsb + h * vsh;
    __global const float *Ab = A + bh * p * p;
    float acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    for (uint e0 = 0; e0 < p; e0 += WBCL_XCA_TE) {
        const uint e = e0 + le;
        for (uint rr = lr; rr < WBCL_XCA_T; rr += 256 / WBCL_XCA_TE) {
            const uint c = c0 + rr, n = n0 + rr;
            As[rr][le] = c < p && e < p ? Ab[(size_t)c * p + e] : 0.0f;
            Vs[rr][le] = n < N && e < p ? vb[(size_t)n * vsn + e] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint ee = 0; ee < WBCL_XCA_TE; ee++) {
            float a[4], w[4];
            for (int i = 0; i < 4; i++) w[i] = Vs[ty + 16 * i][ee];
            for (int j = 0; j < 4; j++) a[j] = As[tx + 16 * j][ee];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) acc[i][j] = fma(w[i], a[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    __global float *ob = om + ooff + b * osb + h * osh;
    for (int i = 0; i < 4; i++) {
        const uint n = n0 + ty + 16 * i;
        for (int j = 0; j < 4; j++) {
            const uint c = c0 + tx + 16 * j;
            if (n < N && c < p) ob[(size_t)n * osn + c] = acc[i][j];
        }
    }
}
#endif
