/* wbcl — energy-descent attention (Yang, Huang, Wipf; seed 002 §3, App. B, §7),
 * SPEC 1.7. Family "energy"; host side in host/ops/energy.c.
 * Views as in cl/tssa.cl: element (b, h, n, c) at off + b*sb + h*sh + n*sn + c.
 * rho: 0 = -exp(-z) (gamma = exp(-z)), 1 = log(z + c) (gamma = 1 / (z + c)).
 * Half squared distances are sums of squared differences (no |a|^2 + |b|^2 - 2 a.b
 * cancellation); with rho = -exp(-z) the weight of v = u is exactly 1, the largest. */

#if WBCL_HAS_FP64
typedef double wbcl_eacc; /* E1 accumulators */
#else
typedef float wbcl_eacc;
#endif

inline float wbcl_energy_hd2(__global const float *a, __global const float *b, const uint p)
{
    float8 s8 = 0.0f;
    float s = 0.0f;
    uint c = 0;
    for (; c + 8 <= p; c += 8) {
        const float8 e = vload8(0, a + c) - vload8(0, b + c);
        s8 = fma(e, e, s8);
    }
    for (; c < p; c++) {
        const float e = a[c] - b[c];
        s = fma(e, e, s);
    }
    return 0.5f * (s + ((s8.s0 + s8.s1) + (s8.s2 + s8.s3)) + ((s8.s4 + s8.s5) + (s8.s6 + s8.s7)));
}

/* out_u = (1 - alpha) v_u + alpha sum_w gamma_uw v_w / sum_w gamma_uw, gamma from y.
 * One work-item per (b, h, u); out must not alias y or v. */
__kernel void wbcl_energy_attend(__global const float *y, const ulong yoff, const ulong ysb, const ulong ysh,
                                 const ulong ysn, __global const float *v, const ulong voff, const ulong vsb,
                                 const ulong vsh, const ulong vsn, __global float *o, const ulong ooff,
                                 const ulong osb, const ulong osh, const ulong osn, const uint B, const uint K,
                                 const uint N, const uint p, const uint pv, const int rho, const float cc,
                                 const float alpha)
{
    const size_t r = get_global_id(0);
    if (r >= (size_t)B * K * N) return;
    const uint u = r % N;
    const size_t bh = r / N;
    const uint h = bh % K, b = bh / K;
    __global const float *yb = y + yoff + b * ysb + h * ysh;
    __global const float *vb = v + voff + b * vsb + h * vsh;
    __global const float *yu = yb + u * ysn;
    __global float *ou = o + ooff + b * osb + h * osh + u * osn;
    for (uint c = 0; c < pv; c++) ou[c] = 0.0f;
    float den = 0.0f;
    for (uint w = 0; w < N; w++) {
        const float z = wbcl_energy_hd2(yu, yb + w * ysn, p);
        const float g = rho == 0 ? exp(-z) : 1.0f / (z + cc);
        if (g == 0.0f) continue;
        den += g;
        __global const float *vw = vb + w * vsn;
        uint c = 0;
        for (; c + 8 <= pv; c += 8) vstore8(fma((float8)g, vload8(0, vw + c), vload8(0, ou + c)), 0, ou + c);
        for (; c < pv; c++) ou[c] = fma(g, vw[c], ou[c]);
    }
    const float a = alpha / den, a1 = 1.0f - alpha;
    __global const float *vu = vb + u * vsn;
    for (uint c = 0; c < pv; c++) ou[c] = a1 * vu[c] + a * ou[c];
}

/* ---- CPU-shaped, register-tiled (ctx->variant == CPU; host/ops/energy.c attend_cpu) -------------------
 * The same step as wbcl_energy_attend, blocked for a CPU's vector registers as the fused attention kernel
 * is (cl/attention.cl): the tokens w packed into panels of EC_KP = 16 (Yp[bh][panel][c][j] = y(b, h, 16
 * panel + j, c), 0 past N), and each work-item owns EC_QB = 4 tokens u of one (b, h). Per panel: the 4 x 16
 * half squared distances as sums of squared differences in 4 float16 registers (one panel row loaded, 4
 * broadcasts: 8 AVX2 accumulators), gamma (tokens past N get 0), the running sum of gamma, then
 * o_u += sum_j gamma_uj v_j for the 4 rows, 16 columns of v at a time held in registers across the 16
 * tokens (each v_j row read once for the 4 rows), so that o is read and written once per panel instead of
 * once per token. Then o_u = (1 - alpha) v_u + alpha o_u / den_u. o must not alias y or v. */
#define EC_KP 16
#define EC_QB 4

/* global (npan * 16, B * K): one work-item per (token slot, batch-head) */
__kernel void wbcl_energy_pack(__global const float *y, const ulong off, const ulong sb, const ulong sh,
                               const ulong sn, const uint K, const uint BK, const uint N, const uint p,
                               const uint npan, __global float *yp)
{
    const uint j = get_global_id(0), bh = get_global_id(1);
    if (j >= npan * EC_KP || bh >= BK) return;
    const uint b = bh / K, h = bh % K;
    __global float *d = yp + ((ulong)bh * npan + j / EC_KP) * ((ulong)p * EC_KP) + (j % EC_KP);
    __global const float *src = y + off + b * sb + h * sh + (ulong)j * sn;
    for (uint c = 0; c < p; c++) d[c * EC_KP] = j < N ? src[c] : 0.0f;
}

/* global (ceil(N / EC_QB), B * K) */
__kernel void wbcl_energy_attend_cpu(__global const float *restrict y, const ulong yoff, const ulong ysb,
                                     const ulong ysh, const ulong ysn, __global const float *restrict yp,
                                     __global const float *restrict v, const ulong voff, const ulong vsb,
                                     const ulong vsh, const ulong vsn, __global float *restrict o, const ulong ooff,
                                     const ulong osb, const ulong osh, const ulong osn, const uint K, const uint BK,
                                     const uint N, const uint p, const uint pv, const uint npan, const int rho,
                                     const float cc, const float alpha)
{
    const uint u0 = get_global_id(0) * EC_QB, bh = get_global_id(1);
    if (u0 >= N || bh >= BK) return;
    const uint b = bh / K, h = bh % K;
    const uint nu = min((uint)EC_QB, N - u0);
    __global const float *yb = y + yoff + b * ysb + h * ysh;
    __global const float *vb = v + voff + b * vsb + h * vsh;
    __global float *ob = o + ooff + b * osb + h * osh;
    __global const float *ypb = yp + (ulong)bh * npan * ((ulong)p * EC_KP);
    /* rows past N repeat the last token (their results are never written) */
    __global const float *yu[EC_QB];
    __global float *ou[EC_QB];
    for (uint r = 0; r < EC_QB; r++) {
        const uint u = u0 + min(r, nu - 1);
        yu[r] = yb + (ulong)u * ysn;
        ou[r] = ob + (ulong)u * osn;
    }
    for (uint r = 0; r < nu; r++)
        for (uint c = 0; c < pv; c++) ou[r][c] = 0.0f;
    const int16 iota = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    float16 den[EC_QB];
    for (uint r = 0; r < EC_QB; r++) den[r] = (float16)(0.0f);
    for (uint pn = 0; pn < npan; pn++) { /* npan = ceil(N / 16) */
        __global const float *kp = ypb + (ulong)pn * ((ulong)p * EC_KP);
        float16 z[EC_QB];
#pragma unroll
        for (int r = 0; r < EC_QB; r++) z[r] = (float16)(0.0f);
        for (uint c = 0; c < p; c++) {
            const float16 kv = vload16(0, kp + c * EC_KP);
#pragma unroll
            for (int r = 0; r < EC_QB; r++) {
                const float16 e = (float16)(yu[r][c]) - kv;
                z[r] = fma(e, e, z[r]);
            }
        }
        const int16 ok = ((int16)((int)(pn * EC_KP)) + iota) < (int16)((int)N);
        float g[EC_QB][EC_KP];
#pragma unroll
        for (int r = 0; r < EC_QB; r++) {
            const float16 hz = 0.5f * z[r];
            float16 gr = rho == 0 ? exp(-hz) : 1.0f / (hz + (float16)(cc));
            gr = select((float16)(0.0f), gr, ok);
            den[r] += gr;
            vstore16(gr, 0, &g[r][0]);
        }
        const uint jn = min((uint)EC_KP, N - pn * EC_KP);
        __global const float *vp = vb + (ulong)(pn * EC_KP) * vsn;
        uint c = 0;
        for (; c + 16 <= pv; c += 16) {
            float16 acc[EC_QB];
#pragma unroll
            for (int r = 0; r < EC_QB; r++) acc[r] = vload16(0, ou[r] + c);
            for (uint j = 0; j < jn; j++) {
                const float16 vv = vload16(0, vp + (ulong)j * vsn + c);
#pragma unroll
                for (int r = 0; r < EC_QB; r++) acc[r] = fma((float16)(g[r][j]), vv, acc[r]);
            }
#pragma unroll
            for (int r = 0; r < EC_QB; r++) vstore16(acc[r], 0, ou[r] + c);
        }
        for (; c < pv; c++) {
            float acc[EC_QB];
            for (int r = 0; r < EC_QB; r++) acc[r] = ou[r][c];
            for (uint j = 0; j < jn; j++) {
                const float vv = vp[(ulong)j * vsn + c];
                for (int r = 0; r < EC_QB; r++) acc[r] = fma(g[r][j], vv, acc[r]);
            }
            for (int r = 0; r < EC_QB; r++) ou[r][c] = acc[r];
        }
    }
    const float a1 = 1.0f - alpha;
    for (uint r = 0; r < nu; r++) {
        const float16 d = den[r];
        const float dsum = ((((d.s0 + d.s1) + (d.s2 + d.s3)) + ((d.s4 + d.s5) + (d.s6 + d.s7))) +
                            (((d.s8 + d.s9) + (d.sa + d.sb)) + ((d.sc + d.sd) + (d.se + d.sf))));
        const float a = alpha / dsum;
        __global const float *vu = vb + (ulong)(u0 + r) * vsn;
        for (uint c = 0; c < pv; c++) ou[r][c] = a1 * vu[c] + a * ou[r][c];
    }
}

/* rows[b*N + u] = sum_w rho(1/2 |y_u - y_w|^2) + 1/2 |y_u|^2, accumulated in double where the
 * device has fp64 (differences of float inputs are exact in double), else in Kahan float. */
__kernel void wbcl_energy_e1_rows(__global const float *y, const ulong off, const ulong sb, const ulong sn,
                                  const uint B, const uint N, const uint d, const int rho, const float cc,
                                  __global wbcl_eacc *rows)
{
    const size_t r = get_global_id(0);
    if (r >= (size_t)B * N) return;
    const uint u = r % N, b = r / N;
    __global const float *yb = y + off + b * sb;
    __global const float *yu = yb + u * sn;
    wbcl_eacc e = 0, comp = 0, n2 = 0;
    for (uint w = 0; w < N; w++) {
        __global const float *yw = yb + w * sn;
        wbcl_eacc s = 0;
        for (uint c = 0; c < d; c++) {
            const wbcl_eacc t = (wbcl_eacc)yu[c] - (wbcl_eacc)yw[c];
            s += t * t;
        }
        const wbcl_eacc z = (wbcl_eacc)0.5 * s;
        const wbcl_eacc term = rho == 0 ? -exp(-z) : log(z + (wbcl_eacc)cc);
        const wbcl_eacc yk = term - comp; /* Kahan */
        const wbcl_eacc tk = e + yk;
        comp = (tk - e) - yk;
        e = tk;
    }
    for (uint c = 0; c < d; c++) n2 += (wbcl_eacc)yu[c] * (wbcl_eacc)yu[c];
    rows[r] = e + (wbcl_eacc)0.5 * n2;
}

/* E[b] = sum_u rows[b*N + u] (Kahan), rounded to float */
__kernel void wbcl_energy_e1_sum(__global const wbcl_eacc *rows, const uint B, const uint N, __global float *E)
{
    const size_t b = get_global_id(0);
    if (b >= B) return;
    wbcl_eacc e = 0, comp = 0;
    for (uint u = 0; u < N; u++) {
        const wbcl_eacc yk = rows[b * N + u] - comp;
        const wbcl_eacc tk = e + yk;
        comp = (tk - e) - yk;
        e = tk;
    }
    E[b] = (float)e;
}

/* Ws = (1 - alpha2) I - alpha2 (Wf + Wf^T) / 2, (d, d) */
__kernel void wbcl_energy_sym(__global const float *Wf, const uint d, const float alpha2, __global float *Ws)
{
    const size_t g = get_global_id(0);
    if (g >= (size_t)d * d) return;
    const uint i = g / d, j = g % d;
    Ws[g] = (i == j ? 1.0f - alpha2 : 0.0f) - alpha2 * 0.5f * (Wf[(size_t)i * d + j] + Wf[(size_t)j * d + i]);
}

/* ---- GPU-shaped kernels (ctx->variant == GPU; host/ops/energy.c) ----------------------------------
 * The tiling of cl/aot.cl wbcl_aot_attend_g: a work-group of EG_WG = 256 work-items owns EG_BQ tokens u
 * of one (b, h) and streams the tokens w through __local memory in tiles of EG_BK (coalesced loads by
 * all work-items). Work-item (ty, tx) = (t / 16, t % 16) forms the TM x TN block of
 * half squared distances (rows ty*TM.., tokens tx*TN..) as sums of squared differences in registers
 * (no |a|^2 + |b|^2 - 2 a.b cancellation, as above), turns them into gamma (no running max is needed:
 * gamma <= 1 for rho = -exp(-z), <= 1/c for rho = log) and stores them in Pt; then it accumulates its
 * TM x TC register tile of sum gamma v and its rows' sum gamma from Pt (broadcast) and Vs. p and pv
 * (runtime) are at most WBCL_ENERGY_PC (16/32/64/128, host: the smallest holding max(p, pv)); every
 * private array has compile-time size and indices, so it stays in registers. */
#ifdef WBCL_ENERGY_PC
#define EG_PC WBCL_ENERGY_PC
#if EG_PC > 64
#define EG_BQ 32 /* 48 KiB of __local memory */
#define EG_BK 16
#else
#define EG_BQ 64
#define EG_BK 32
#endif
#define EG_WG 256
#define EG_TM (EG_BQ / 16)
#define EG_TN (EG_BK / 16)
#define EG_TC (EG_PC / 16)
#define EG_SQ (EG_BQ + 4)
#define EG_SK (EG_BK + 2) /* even: aligned pairs; the transposed stores 2-way bank conflicts, not 8 */

/* Yt[c*SQ + r] = row (r0 + r) of a (., p) view for c < p, r0 + r < N; 0 elsewhere */
inline void wbcl_energy_tile_t(__local float *Yt, const uint S, const uint R, __global const float *yb,
                               const ulong sn, const uint r0, const uint N, const uint p)
{
    for (uint e = get_local_id(0); e < R * EG_PC; e += EG_WG) {
        const uint r = e / EG_PC, c = e % EG_PC;
        Yt[c * S + r] = r0 + r < N && c < p ? yb[(ulong)(r0 + r) * sn + c] : 0.0f;
    }
}

__kernel __attribute__((reqd_work_group_size(EG_WG, 1, 1))) void wbcl_energy_attend_g(
    __global const float *restrict y, const ulong yoff, const ulong ysb, const ulong ysh, const ulong ysn,
    __global const float *restrict v, const ulong voff, const ulong vsb, const ulong vsh, const ulong vsn,
    __global float *restrict o, const ulong ooff, const ulong osb, const ulong osh, const ulong osn, const uint K,
    const uint N, const uint p, const uint pv, const int rho, const float cc, const float alpha)
{
    __local float Qt[EG_PC * EG_SQ] __attribute__((aligned(16))); /* Qt[c*SQ + r] = y[u0 + r, c] */
    __local float Kt[EG_PC * EG_SK] __attribute__((aligned(16))); /* Kt[c*SK + j] = y[w0 + j, c] */
    __local float Vs[EG_BK * EG_PC] __attribute__((aligned(16))); /* Vs[j*PC + c] = v[w0 + j, c] */
    __local float Pt[EG_BK * EG_SQ] __attribute__((aligned(16))); /* Pt[j*SQ + r] = gamma       */
    const uint t = get_local_id(0), ty = t / 16, tx = t % 16;
    const uint bh = get_group_id(1), b = bh / K, h = bh % K;
    const uint u0 = get_group_id(0) * EG_BQ;
    __global const float *yb = y + yoff + b * ysb + h * ysh;
    __global const float *vb = v + voff + b * vsb + h * vsh;
    wbcl_energy_tile_t(Qt, EG_SQ, EG_BQ, yb, ysn, u0, N, p);
    float acc[EG_TM][EG_TC], den[EG_TM];
#pragma unroll
    for (int i = 0; i < EG_TM; i++) {
        den[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < EG_TC; c++) acc[i][c] = 0.0f;
    }
    for (uint w0 = 0; w0 < N; w0 += EG_BK) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's readers are done */
        wbcl_energy_tile_t(Kt, EG_SK, EG_BK, yb, ysn, w0, N, p);
        for (uint e = t; e < EG_BK * EG_PC; e += EG_WG) {
            const uint j = e / EG_PC, c = e % EG_PC;
            Vs[e] = w0 + j < N && c < pv ? vb[(ulong)(w0 + j) * vsn + c] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        float s[EG_TM][EG_TN];
#pragma unroll
        for (int i = 0; i < EG_TM; i++)
#pragma unroll
            for (int k = 0; k < EG_TN; k++) s[i][k] = 0.0f;
        for (uint c = 0; c < p; c++) {
            float qv[EG_TM], kv[EG_TN];
#pragma unroll
            for (int i = 0; i < EG_TM; i++) qv[i] = Qt[c * EG_SQ + ty * EG_TM + i];
#pragma unroll
            for (int k = 0; k < EG_TN; k++) kv[k] = Kt[c * EG_SK + tx * EG_TN + k];
#pragma unroll
            for (int i = 0; i < EG_TM; i++)
#pragma unroll
                for (int k = 0; k < EG_TN; k++) {
                    const float e = qv[i] - kv[k];
                    s[i][k] = fma(e, e, s[i][k]);
                }
        }
#pragma unroll
        for (int k = 0; k < EG_TN; k++)
#pragma unroll
            for (int i = 0; i < EG_TM; i++) {
                const float z = 0.5f * s[i][k];
                const float g = rho == 0 ? exp(-z) : 1.0f / (z + cc);
                Pt[(tx * EG_TN + k) * EG_SQ + ty * EG_TM + i] = w0 + tx * EG_TN + k < N ? g : 0.0f;
            }
        barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll 8
        for (int j = 0; j < EG_BK; j++) {
            float gv[EG_TM], vv[EG_TC];
#pragma unroll
            for (int i = 0; i < EG_TM; i++) gv[i] = Pt[j * EG_SQ + ty * EG_TM + i];
#pragma unroll
            for (int c = 0; c < EG_TC; c++) vv[c] = Vs[j * EG_PC + tx * EG_TC + c];
#pragma unroll
            for (int i = 0; i < EG_TM; i++) {
                den[i] += gv[i];
#pragma unroll
                for (int c = 0; c < EG_TC; c++) acc[i][c] = fma(gv[i], vv[c], acc[i][c]);
            }
        }
    }
    const float a1 = 1.0f - alpha;
    __global float *ob = o + ooff + b * osb + h * osh;
#pragma unroll
    for (int i = 0; i < EG_TM; i++) {
        const uint u = u0 + ty * EG_TM + i;
        if (u >= N) break;
        const float a = alpha / den[i];
#pragma unroll
        for (int c = 0; c < EG_TC; c++) {
            const uint col = tx * EG_TC + c;
            if (col < pv) ob[(ulong)u * osn + col] = a1 * vb[(ulong)u * vsn + col] + a * acc[i][c];
        }
    }
}

/* rows[b*N + u] as wbcl_energy_e1_rows computes it (wbcl_eacc sums, the same pair terms), GPU-shaped:
 * EG_BQ tokens u per work-group, the tokens w in tiles through __local memory, work-item (ty, tx)
 * sums the pair terms of rows ty*TM.. over its TN tokens of each tile (Kahan, in registers); the 16
 * partial sums of a row are combined in __local memory at the end. d (runtime) <= WBCL_ENERGY_PC. */
__kernel __attribute__((reqd_work_group_size(EG_WG, 1, 1))) void wbcl_energy_e1_rows_g(
    __global const float *restrict y, const ulong off, const ulong sb, const ulong sn, const uint N, const uint d,
    const int rho, const float cc, __global wbcl_eacc *restrict rows)
{
    __local float Qt[EG_PC * EG_SQ] __attribute__((aligned(16)));
    __local float Kt[EG_PC * EG_SK] __attribute__((aligned(16)));
    __local wbcl_eacc part[EG_BQ * 17]; /* part[r*17 + tx]: row r's partial sums; [r*17 + 16]: 1/2 |y_u|^2 */
    const uint t = get_local_id(0), ty = t / 16, tx = t % 16;
    const uint b = get_group_id(1), u0 = get_group_id(0) * EG_BQ;
    __global const float *yb = y + off + b * sb;
    wbcl_energy_tile_t(Qt, EG_SQ, EG_BQ, yb, sn, u0, N, d);
    wbcl_eacc e[EG_TM], comp[EG_TM];
#pragma unroll
    for (int i = 0; i < EG_TM; i++) e[i] = comp[i] = 0;
    for (uint w0 = 0; w0 < N; w0 += EG_BK) {
        barrier(CLK_LOCAL_MEM_FENCE);
        wbcl_energy_tile_t(Kt, EG_SK, EG_BK, yb, sn, w0, N, d);
        barrier(CLK_LOCAL_MEM_FENCE);
        wbcl_eacc s[EG_TM][EG_TN];
#pragma unroll
        for (int i = 0; i < EG_TM; i++)
#pragma unroll
            for (int k = 0; k < EG_TN; k++) s[i][k] = 0;
        for (uint c = 0; c < d; c++) {
            wbcl_eacc qv[EG_TM], kv[EG_TN];
#pragma unroll
            for (int i = 0; i < EG_TM; i++) qv[i] = (wbcl_eacc)Qt[c * EG_SQ + ty * EG_TM + i];
#pragma unroll
            for (int k = 0; k < EG_TN; k++) kv[k] = (wbcl_eacc)Kt[c * EG_SK + tx * EG_TN + k];
#pragma unroll
            for (int i = 0; i < EG_TM; i++)
#pragma unroll
                for (int k = 0; k < EG_TN; k++) {
                    const wbcl_eacc q = qv[i] - kv[k];
                    s[i][k] += q * q;
                }
        }
#pragma unroll
        for (int i = 0; i < EG_TM; i++)
#pragma unroll
            for (int k = 0; k < EG_TN; k++)
                if (w0 + tx * EG_TN + k < N) {
                    const wbcl_eacc z = (wbcl_eacc)0.5 * s[i][k];
                    const wbcl_eacc term = rho == 0 ? -exp(-z) : log(z + (wbcl_eacc)cc);
                    const wbcl_eacc yk = term - comp[i]; /* Kahan */
                    const wbcl_eacc tk = e[i] + yk;
                    comp[i] = (tk - e[i]) - yk;
                    e[i] = tk;
                }
    }
#pragma unroll
    for (int i = 0; i < EG_TM; i++) part[(ty * EG_TM + i) * 17 + tx] = e[i];
    if (t < EG_BQ) {
        wbcl_eacc n2 = 0;
        for (uint c = 0; c < d; c++) n2 += (wbcl_eacc)Qt[c * EG_SQ + t] * (wbcl_eacc)Qt[c * EG_SQ + t];
        part[t * 17 + 16] = (wbcl_eacc)0.5 * n2;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t < EG_BQ && u0 + t < N) {
        wbcl_eacc r = 0, rc = 0;
        for (uint k = 0; k < 17; k++) { /* Kahan */
            const wbcl_eacc yk = part[t * 17 + k] - rc;
            const wbcl_eacc tk = r + yk;
            rc = (tk - r) - yk;
            r = tk;
        }
        rows[(ulong)b * N + u0 + t] = r;
    }
}

/* E[b] = sum_u rows[b*N + u]: one work-group of EG_WG per b, strided Kahan sums per work-item, then a
 * tree over the work-group in __local memory (the pairs added in wbcl_eacc) */
__kernel __attribute__((reqd_work_group_size(EG_WG, 1, 1))) void wbcl_energy_e1_sum_g(
    __global const wbcl_eacc *restrict rows, const uint N, __global float *restrict E)
{
    __local wbcl_eacc red[EG_WG];
    const uint t = get_local_id(0), b = get_group_id(0);
    wbcl_eacc e = 0, comp = 0;
    for (uint u = t; u < N; u += EG_WG) {
        const wbcl_eacc yk = rows[(ulong)b * N + u] - comp;
        const wbcl_eacc tk = e + yk;
        comp = (tk - e) - yk;
        e = tk;
    }
    red[t] = e;
    for (uint s = EG_WG / 2; s > 0; s /= 2) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t < s) red[t] += red[t + s];
    }
    if (t == 0) E[b] = (float)red[0];
}
#endif
