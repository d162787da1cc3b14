/* wbcl — vector ReduNet kernels (SPEC.md §4.1; host side in host/ops/redunet.c).
 *
 * Build options: RD_K = number of classes K (always); RD_D = feature dimension d
 * for the fused implementation (compile-time, loops fully unrolled), 0 for the
 * GEMM implementation (d is a kernel argument); RD_VW = rows per work-item of
 * the fused kernels (16 on CPUs, 1 on GPUs); RD_LS = work-items per row of
 * rdn_update (1 on CPUs: one row per work-item, no local memory; a power of two
 * on GPUs: one work-group per row, local-memory reductions).
 *
 * A layer's parameters live in one buffer W of (K+1) d^2 + K floats:
 * W[0 .. d^2) = E, W[(1+j) d^2 ..) = C_j (row-major, symmetric), then gamma.
 * Gram partial sums are upper triangles, T = d(d+1)/2 entries, row by row.
 * All sums are in a fixed order (no atomics on data): results are
 * deterministic for a given input and launch geometry. */

#ifndef RD_K
#define RD_K 1
#endif
#ifndef RD_D
#define RD_D 0
#endif
#ifndef RD_LS
#define RD_LS 1
#endif

#define RD_TINY 1e-8f

/* ---- shared: entering the network ------------------------------------------------------------ */

/* Z[i] = X[i] / max(|X[i]|, 1e-8) (normalize != 0) or X[i], one work-item per
 * row; the norm is taken after scaling by max|x| so that finite rows never
 * overflow. A non-finite entry sets *flag = 1 (every writer writes the same
 * value). X may be Z. */
__kernel void rdn_normalize(__global const float *X, __global float *Z, const uint m, const uint d,
                            __global int *flag, const int normalize)
{
    const uint i = get_global_id(0);
    if (i >= m) return;
    __global const float *x = X + (size_t)i * d;
    __global float *z = Z + (size_t)i * d;
    float mx = 0.0f;
    int bad = 0;
    for (uint c = 0; c < d; c++) {
        float v = x[c];
        bad |= !isfinite(v);
        mx = fmax(mx, fabs(v));
    }
    if (bad) {
        *flag = 1;
        return;
    }
    if (!normalize) {
        for (uint c = 0; c < d; c++) z[c] = x[c];
        return;
    }
    float s = 0.0f;
    if (mx > 0.0f) {
        float inv = 1.0f / mx;
        for (uint c = 0; c < d; c++) {
            float v = x[c] * inv;
            s += v * v;
        }
    }
    float nrm = fmax(mx * sqrt(s), RD_TINY);
    for (uint c = 0; c < d; c++) z[c] = x[c] / nrm;
}

/* ---- fused implementation (RD_D > 0) --------------------------------------------------------- */
#if RD_D > 0

#define RD_DD (RD_D * RD_D)
#define RD_T (RD_D * (RD_D + 1) / 2)

/* The fused kernels keep the features transposed, Zt (d, mp) with mp = m
 * rounded up to RD_VW, and every work-item handles RD_VW consecutive rows as
 * one floatN vector per feature (RD_VW = 16 on CPUs: PoCL does not vectorize
 * these kernels across work-items, explicit vectors reach the SIMD units;
 * RD_VW = 1 on GPUs: one row per work-item). Padding rows are zero, labelled
 * -1 and never counted. */
#ifndef RD_VW
#define RD_VW 1
#endif
#define RD_CAT_(a, b) a##b
#define RD_CAT(a, b) RD_CAT_(a, b)
#if RD_VW == 1
#define vf float
#define vi int
#define VLOADF(p) (*(p))
#define VLOADI(p) (*(p))
#define VSTOREF(v, p) (*(p) = (v))
#define VSTOREI(v, p) (*(p) = (v))
#define RD_IOTA 0
#else
#define vf RD_CAT(float, RD_VW)
#define vi RD_CAT(int, RD_VW)
#define VLOADF(p) RD_CAT(vload, RD_VW)(0, p)
#define VLOADI(p) RD_CAT(vload, RD_VW)(0, p)
#define VSTOREF(v, p) RD_CAT(vstore, RD_VW)(v, 0, p)
#define VSTOREI(v, p) RD_CAT(vstore, RD_VW)(v, 0, p)
#if RD_VW == 4
#define RD_IOTA ((int4)(0, 1, 2, 3))
#elif RD_VW == 8
#define RD_IOTA ((int8)(0, 1, 2, 3, 4, 5, 6, 7))
#elif RD_VW == 16
#define RD_IOTA ((int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#else
#error "RD_VW must be 1, 4, 8 or 16"
#endif
#endif

/* Entering: Zt[:, i] = X[i] / max(|X[i]|, 1e-8) (norm after scaling by max|x|,
 * so finite rows never overflow), or X[i] as it is (normalize == 0); rows
 * m..mp-1 of Zt are zeroed. A non-finite entry sets *flag = 1. One work-item
 * per row of Zt. */
__kernel void rdn_enter_t(__global const float *X, __global float *Zt, const uint m, const uint mp,
                          __global int *flag, const int normalize)
{
    const uint i = get_global_id(0);
    if (i >= mp) return;
    if (i >= m) {
        for (int c = 0; c < RD_D; c++) Zt[(size_t)c * mp + i] = 0.0f;
        return;
    }
    __global const float *x = X + (size_t)i * RD_D;
    float mx = 0.0f;
    int bad = 0;
    for (int c = 0; c < RD_D; c++) {
        bad |= !isfinite(x[c]);
        mx = fmax(mx, fabs(x[c]));
    }
    if (bad) {
        *flag = 1;
        return;
    }
    if (!normalize) {
        for (int c = 0; c < RD_D; c++) Zt[(size_t)c * mp + i] = x[c];
        return;
    }
    float s = 0.0f;
    if (mx > 0.0f) {
        const float inv = 1.0f / mx;
        for (int c = 0; c < RD_D; c++) {
            float v = x[c] * inv;
            s += v * v;
        }
    }
    const float nrm = fmax(mx * sqrt(s), RD_TINY);
    for (int c = 0; c < RD_D; c++) Zt[(size_t)c * mp + i] = x[c] / nrm;
}

/* Leaving: Z[i] = Zt[:, i], one work-item per row. */
__kernel void rdn_leave_t(__global const float *Zt, __global float *Z, const uint m, const uint mp)
{
    const uint i = get_global_id(0);
    if (i >= m) return;
    for (int c = 0; c < RD_D; c++) Z[(size_t)i * RD_D + c] = Zt[(size_t)c * mp + i];
}

/* One layer on RD_VW rows per work-item (Algorithm 5.1 lines 14-15 / 5.2 lines 4-5):
 * c_j = C_j z, n_j = max(|c_j|, 1e-8), pi = softmax(-lambda n) (max-subtracted),
 * z <- normalize(z + eta (E z - sum_j gamma_j pi_j c_j)); yhat = argmax pi (lowest
 * on ties), -1 on padding rows. Global: mp / RD_VW. */
__kernel void rdn_apply(__global float *restrict Zt, __global int *restrict yhat, __global const float *restrict W,
                        const float eta, const float lambda, const uint m, const uint mp)
{
    const uint v = get_global_id(0);
    if ((size_t)v * RD_VW >= mp) return;
    const size_t i0 = (size_t)v * RD_VW;
    __global const float *E = W;
    __global const float *gam = W + (RD_K + 1) * RD_DD;
    vf z[RD_D], c[RD_K][RD_D], u[RD_K];
    for (int r = 0; r < RD_D; r++) z[r] = VLOADF(Zt + (size_t)r * mp + i0);
    for (int j = 0; j < RD_K; j++) {
        __global const float *Cj = W + (1 + j) * RD_DD;
        vf nn = 0.0f;
        for (int r = 0; r < RD_D; r++) {
            vf s = 0.0f;
            for (int k = 0; k < RD_D; k++) s = fma((vf)Cj[r * RD_D + k], z[k], s);
            c[j][r] = s;
            nn = fma(s, s, nn);
        }
        u[j] = -lambda * fmax(sqrt(nn), RD_TINY);
    }
    vf mx = u[0];
    for (int j = 1; j < RD_K; j++) mx = fmax(mx, u[j]);
    vf den = 0.0f;
    for (int j = 0; j < RD_K; j++) {
        u[j] = exp(u[j] - mx);
        den += u[j];
    }
    vi best = 0;
    vf pbest = -1.0f;
    for (int j = 0; j < RD_K; j++) {
        vf p = u[j] / den;
        vi gt = isgreater(p, pbest);
        best = select(best, (vi)j, gt);
        pbest = select(pbest, p, gt);
        u[j] = gam[j] * p;
    }
    vf s2 = 0.0f, zn[RD_D];
    for (int r = 0; r < RD_D; r++) {
        vf g = 0.0f;
        for (int k = 0; k < RD_D; k++) g = fma((vf)E[r * RD_D + k], z[k], g);
        for (int j = 0; j < RD_K; j++) g = fma(-u[j], c[j][r], g);
        zn[r] = fma((vf)eta, g, z[r]);
        s2 = fma(zn[r], zn[r], s2);
    }
    const vf nrm = fmax(sqrt(s2), RD_TINY);
    for (int r = 0; r < RD_D; r++) VSTOREF(zn[r] / nrm, Zt + (size_t)r * mp + i0);
    const vi valid = ((vi)(int)i0 + RD_IOTA) < (vi)(int)m;
    VSTOREI(select((vi)-1, best, valid), yhat + i0);
}

/* Compensated (Kahan) accumulation: s + c carries the sum to about one rounding. */
#define RD_KAHAN(s, c, v)                  \
    do {                                   \
        float y_ = (v) - (c);              \
        float t_ = (s) + y_;               \
        (c) = (t_ - (s)) - y_;             \
        (s) = t_;                          \
    } while (0)
#define RD_VKAHAN(s, c, v)                 \
    do {                                   \
        vf y_ = (v) - (c);                 \
        vf t_ = (s) + y_;                  \
        (c) = (t_ - (s)) - y_;             \
        (s) = t_;                          \
    } while (0)

/* Partial Gram matrices: work-item q handles row block b = q % nblk (rb rows,
 * a multiple of RD_VW) and group g = gfirst + q / nblk of 2K groups: g < K the
 * rows with y == g (true classes), g >= K those with yhat == g - K (estimated).
 * Lane sums are compensated, then combined lane by lane in a fixed order.
 * part: (nblk, 2K, T) upper triangles; cnt: (nblk, 2K) row counts. */
__kernel void rdn_gram(__global const float *restrict Zt, __global const int *restrict y,
                       __global const int *restrict yhat, const uint mp, const uint rb, const uint nblk,
                       const uint gfirst, const uint ng, __global float *restrict part, __global uint *restrict cnt)
{
    const uint q = get_global_id(0);
    if (q >= nblk * ng) return;
    const uint b = q % nblk, g = gfirst + q / nblk;
    __global const int *lab = g < RD_K ? y : yhat;
    const vi want = g < RD_K ? (int)g : (int)g - RD_K;
    vf s[RD_T], c[RD_T];
    for (int t = 0; t < RD_T; t++) s[t] = c[t] = 0.0f;
    vi n = 0;
    const size_t i1 = min((size_t)mp, (size_t)b * rb + rb);
    for (size_t i = (size_t)b * rb; i < i1; i += RD_VW) {
        const vi mask = VLOADI(lab + i) == want;
        vf z[RD_D];
        for (int r = 0; r < RD_D; r++) z[r] = select((vf)0.0f, VLOADF(Zt + (size_t)r * mp + i), mask);
        int t = 0;
        for (int r = 0; r < RD_D; r++)
            for (int k = r; k < RD_D; k++, t++) RD_VKAHAN(s[t], c[t], z[r] * z[k]);
#if RD_VW == 1
        n += mask; /* a scalar comparison gives 1 */
#else
        n -= mask; /* a vector comparison gives -1 per true lane */
#endif
    }
    __global float *o = part + ((size_t)b * 2 * RD_K + g) * RD_T;
#if RD_VW == 1
    for (int t = 0; t < RD_T; t++) o[t] = s[t];
    cnt[(size_t)b * 2 * RD_K + g] = (uint)n;
#else
    for (int t = 0; t < RD_T; t++) {
        float lanes[RD_VW], cs = 0.0f, ss = 0.0f;
        VSTOREF(s[t], lanes);
        for (int l = 0; l < RD_VW; l++) RD_KAHAN(ss, cs, lanes[l]);
        o[t] = ss;
    }
    int nl[RD_VW];
    VSTOREI(n, nl);
    uint tot = 0;
    for (int l = 0; l < RD_VW; l++) tot += (uint)nl[l];
    cnt[(size_t)b * 2 * RD_K + g] = tot;
#endif
}

/* A = I + alpha G from an upper triangle; Cholesky A = L L^T in place (lower
 * triangle of L). Returns 0, or 1 if a pivot is not positive and finite. */
static int rdn_chol(float *A)
{
    for (int j = 0; j < RD_D; j++) {
        float s = A[j * RD_D + j];
        for (int k = 0; k < j; k++) s = fma(-A[j * RD_D + k], A[j * RD_D + k], s);
        if (!(s > 0.0f) || !isfinite(s)) return 1;
        float ljj = sqrt(s);
        A[j * RD_D + j] = ljj;
        for (int i = j + 1; i < RD_D; i++) {
            float t = A[i * RD_D + j];
            for (int k = 0; k < j; k++) t = fma(-A[i * RD_D + k], A[j * RD_D + k], t);
            A[i * RD_D + j] = t / ljj;
        }
    }
    return 0;
}

/* Finalize one matrix per work-item q in [0, 1 + 2K):
 *   q = 0      the total Gram (summed over the true groups when constructing,
 *              over the estimated ones otherwise): logdet(I + a G) -> ld[0]
 *              (objective), E = a (I + a G)^-1 -> Wn (construct);
 *   q = 1..K   class j = q-1: C_j = a_j (I + a_j G_j)^-1 and gamma_j -> Wn (construct);
 *   q = K+1..2K  estimated group j = q-K-1: logdet(I + ah_j Gh_j) -> ld[1+j] (0 if empty),
 *              its size -> hc[j] (objective).
 * ld and hc are row `hrow` of the (layers, K+1) history buffers; hc[K] receives
 * the max over failures of (q + 1) (0 = all factorizations succeeded). */
__kernel void rdn_finalize(__global const float *restrict part, __global const uint *restrict cnt, const uint nblk,
                           const uint m, const float eps2, const int construct, const int objective,
                           __global float *restrict Wn, __global float *restrict ldall, __global int *restrict hcall,
                           const uint hrow)
{
    const uint q = get_global_id(0);
    if (q >= 1 + 2 * RD_K) return;
    __global float *ld = ldall + (size_t)hrow * (RD_K + 1);
    __global int *hc = hcall + (size_t)hrow * (RD_K + 1);
    int g0, g1;         /* groups summed */
    if (q == 0) {
        if (!construct && !objective) return;
        g0 = construct ? 0 : RD_K;
        g1 = g0 + RD_K;
    } else if (q <= RD_K) {
        if (!construct) return;
        g0 = (int)q - 1;
        g1 = g0 + 1;
    } else {
        if (!objective) return;
        g0 = (int)q - 1;
        g1 = g0 + 1;
    }
    float s[RD_T], c[RD_T];
    for (int t = 0; t < RD_T; t++) s[t] = c[t] = 0.0f;
    uint n = 0;
    for (uint b = 0; b < nblk; b++)
        for (int g = g0; g < g1; g++) {
            __global const float *p = part + ((size_t)b * 2 * RD_K + g) * RD_T;
            for (int t = 0; t < RD_T; t++) RD_KAHAN(s[t], c[t], p[t]);
            n += cnt[(size_t)b * 2 * RD_K + g];
        }
    if (q > RD_K) hc[q - RD_K - 1] = (int)n;
    if (n == 0) {        /* an empty estimated group: skipped (true classes are never empty) */
        if (q > RD_K) ld[q - RD_K] = 0.0f;
        return;
    }
    const float alpha = (float)RD_D / ((float)(q == 0 ? m : n) * eps2);
    float A[RD_DD];
    int t = 0;
    for (int r = 0; r < RD_D; r++)
        for (int k = r; k < RD_D; k++, t++) {
            float v = alpha * s[t];
            A[r * RD_D + k] = v;
            A[k * RD_D + r] = v;
        }
    for (int r = 0; r < RD_D; r++) A[r * RD_D + r] += 1.0f;
    if (rdn_chol(A)) {
        atomic_max(&hc[RD_K], (int)q + 1);
        return;
    }
    if ((q == 0 && objective) || q > RD_K) {
        float sl = 0.0f;
        for (int r = 0; r < RD_D; r++) sl += log(A[r * RD_D + r]);
        ld[q > RD_K ? q - RD_K : 0] = 2.0f * sl;
    }
    if (q > RD_K || !construct) return;
    /* inverse: L^-1 (lower, in the upper part's stead kept in Li), then alpha L^-T L^-1 */
    float Li[RD_DD];
    for (int j = 0; j < RD_D; j++)
        for (int i = 0; i < RD_D; i++) {
            if (i < j) {
                Li[i * RD_D + j] = 0.0f;
                continue;
            }
            float v = i == j ? 1.0f : 0.0f;
            for (int k = j; k < i; k++) v = fma(-A[i * RD_D + k], Li[k * RD_D + j], v);
            Li[i * RD_D + j] = v / A[i * RD_D + i];
        }
    __global float *out = Wn + q * RD_DD;
    for (int r = 0; r < RD_D; r++)
        for (int k = 0; k <= r; k++) {
            float v = 0.0f;
            for (int p = r; p < RD_D; p++) v = fma(Li[p * RD_D + r], Li[p * RD_D + k], v);
            v *= alpha;
            out[r * RD_D + k] = v;
            out[k * RD_D + r] = v;
        }
    if (q > 0) Wn[(RD_K + 1) * RD_DD + q - 1] = (float)n / (float)m;
}

#endif /* RD_D > 0 */

/* ---- GEMM implementation (RD_D == 0: d is an argument) ---------------------------------------- */
#if RD_D == 0

/* Zs[i] = Z[perm[i]], one work-item per element (global m*d). */
__kernel void rdn_gather(__global const float *restrict Z, __global const int *restrict perm,
                         __global float *restrict Zs, const uint m, const uint d)
{
    const size_t e = get_global_id(0);
    if (e >= (size_t)m * d) return;
    const size_t i = e / d, c = e % d;
    Zs[e] = Z[(size_t)perm[i] * d + c];
}

/* From the group Grams G (K, d, d) and group sizes n (K): A (K+1, d, d) with
 * A[0] = I + a sum_j G_j (a = d/(m eps2), over the non-empty groups, in order) and
 * A[1+j] = I + a_j G_j (a_j = d/(n_j eps2)); an empty group gives A[1+j] = I.
 * Global (d*d). */
__kernel void rdn_prep(__global const float *restrict G, __global const uint *restrict n, __global float *restrict A,
                       const uint m, const uint d, const float eps2)
{
    const uint e = get_global_id(0);
    if (e >= d * d) return;
    const size_t dd = (size_t)d * d;
    const float one = (e / d == e % d) ? 1.0f : 0.0f;
    float tot = 0.0f;
    for (int j = 0; j < RD_K; j++) {
        float v = 0.0f;
        if (n[j]) {
            v = G[j * dd + e];
            tot += v;
            v *= (float)d / ((float)n[j] * eps2);
        }
        A[(1 + j) * dd + e] = one + v;
    }
    A[e] = one + (float)d / ((float)m * eps2) * tot;
}

/* The layer buffer W from the inverses Ainv (K+1, d, d): W[0] = a Ainv[0],
 * W[1+j] = a_j Ainv[1+j], then gamma_j = n_j/m. Global (d*d, K+1). */
__kernel void rdn_scale(__global const float *restrict Ainv, __global const uint *restrict n,
                        __global float *restrict W, const uint m, const uint d, const float eps2)
{
    const uint e = get_global_id(0), g = get_global_id(1);
    if (e >= d * d || g > RD_K) return;
    const size_t dd = (size_t)d * d;
    const uint ng = g ? n[g - 1] : m;
    W[g * dd + e] = (float)d / ((float)ng * eps2) * Ainv[g * dd + e];
    if (g && e == 0) W[(RD_K + 1) * dd + g - 1] = (float)ng / (float)m;
}

/* Sums of squares and the update of one row over its d entries in chunks of
 * RD_CH floats (private vector partial sums, combined lane by lane at the end:
 * the loops have no loop-carried scalar chain, so they run at load speed). */
#define RD_CH 16
#define RD_VCH float16
#define RD_VLOAD(p) vload16(0, p)

static float rdn_hsum(RD_VCH v)
{
    float8 a = v.lo + v.hi;
    float4 b = a.lo + a.hi;
    float2 c = b.lo + b.hi;
    return c.x + c.y;
}

/* One layer's nonlinearity and update on one row, given P (K+1, m, d) with
 * P[0][i] = E z_i and P[1+j][i] = C_j z_i: same formulas as rdn_apply.
 * RD_LS == 1: one row per work-item, float16 chunks. RD_LS > 1: one work-group
 * of RD_LS items per row (global m*RD_LS, local RD_LS), local-memory tree sums. */
__kernel void rdn_update(__global float *restrict Z, __global int *restrict yhat, __global const float *restrict P,
                         __global const float *restrict W, const float eta, const float lambda, const uint m,
                         const uint d)
{
    const size_t md = (size_t)m * d;
    __global const float *gam = W + (size_t)(RD_K + 1) * d * d;
    float u[RD_K];
#if RD_LS == 1
    const uint i = get_global_id(0);
    if (i >= m) return;
    const size_t row = (size_t)i * d;
    const uint dv = d / RD_CH * RD_CH;
    for (int j = 0; j < RD_K; j++) {
        __global const float *c = P + (1 + j) * md + row;
        RD_VCH acc = 0.0f;
        for (uint k = 0; k < dv; k += RD_CH) {
            RD_VCH v = RD_VLOAD(c + k);
            acc = fma(v, v, acc);
        }
        float nn = rdn_hsum(acc);
        for (uint k = dv; k < d; k++) nn = fma(c[k], c[k], nn);
        u[j] = nn;
    }
#else
    const uint i = get_group_id(0);
    const uint lane = get_local_id(0);
    __local float red[RD_K * RD_LS];
    const size_t row = (size_t)i * d;
    for (int j = 0; j < RD_K; j++) {
        __global const float *c = P + (1 + j) * md + row;
        float nn = 0.0f;
        for (uint k = lane; k < d; k += RD_LS) nn = fma(c[k], c[k], nn);
        red[j * RD_LS + lane] = nn;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = RD_LS / 2; h > 0; h >>= 1) {
        if (lane < h)
            for (int j = 0; j < RD_K; j++) red[j * RD_LS + lane] += red[j * RD_LS + lane + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int j = 0; j < RD_K; j++) u[j] = red[j * RD_LS];
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    for (int j = 0; j < RD_K; j++) u[j] = -lambda * fmax(sqrt(u[j]), RD_TINY);
    float mx = u[0];
    for (int j = 1; j < RD_K; j++) mx = fmax(mx, u[j]);
    float den = 0.0f;
    for (int j = 0; j < RD_K; j++) {
        u[j] = exp(u[j] - mx);
        den += u[j];
    }
    int best = 0;
    float pbest = -1.0f;
    for (int j = 0; j < RD_K; j++) {
        float p = u[j] / den;
        if (p > pbest) {
            pbest = p;
            best = j;
        }
        u[j] = gam[j] * p;
    }
#if RD_LS == 1
    RD_VCH acc = 0.0f;
    for (uint k = 0; k < dv; k += RD_CH) {
        RD_VCH g = RD_VLOAD(P + row + k), z = RD_VLOAD(Z + row + k);
        for (int j = 0; j < RD_K; j++) g = fma((RD_VCH)(-u[j]), RD_VLOAD(P + (1 + j) * md + row + k), g);
        RD_VCH zn = fma((RD_VCH)eta, g, z);
        vstore16(zn, 0, Z + row + k);
        acc = fma(zn, zn, acc);
    }
    float s2 = rdn_hsum(acc);
    for (uint k = dv; k < d; k++) {
        float g = P[row + k], z = Z[row + k];
        for (int j = 0; j < RD_K; j++) g = fma(-u[j], P[(1 + j) * md + row + k], g);
        float zn = fma(eta, g, z);
        Z[row + k] = zn;
        s2 = fma(zn, zn, s2);
    }
    const float nrm = fmax(sqrt(s2), RD_TINY);
    for (uint k = 0; k < d; k++) Z[row + k] = Z[row + k] / nrm;
    yhat[i] = best;
#else
    float s2 = 0.0f;
    for (uint k = lane; k < d; k += RD_LS) {
        float g = P[row + k], z = Z[row + k];
        for (int j = 0; j < RD_K; j++) g = fma(-u[j], P[(1 + j) * md + row + k], g);
        float zn = fma(eta, g, z);
        Z[row + k] = zn;
        s2 = fma(zn, zn, s2);
    }
    red[lane] = s2;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = RD_LS / 2; h > 0; h >>= 1) {
        if (lane < h) red[lane] += red[lane + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float nrm = fmax(sqrt(red[0]), RD_TINY);
    for (uint k = lane; k < d; k += RD_LS) Z[row + k] = Z[row + k] / nrm;
    if (lane == 0) yhat[i] = best;
#endif
}

#endif /* RD_D == 0 */
