/* wbcl — ISTA sparse coding and LASSO by unrolled ISTA / FISTA (host/ops/ista.c).
 *
 * The products (Z W^T, (Z W^T - X) W, x M) are GEMMs; these kernels are the
 * elementwise rest, one element per work-item (the shape that runs at
 * bandwidth on PoCL and on GPUs alike), and the per-row objective sums
 * (CPU: one work-item streams a row with float16 vectors; GPU: one
 * work-group per row with a local-memory tree).
 * Indices are size_t / ulong: tensors may exceed 2^31 elements.
 * NaN propagates through the thresholds (comparisons written so that a NaN
 * takes the pass-through branch). */

#define WBCL_V 16

/* theta_t(v): ReLU threshold max(v - t, 0); soft threshold sign(v) max(|v| - t, 0). */
#define ISTA_RELU(v, t) ista_relu((v), (t))
#define ISTA_SOFT(v, t) ista_soft((v), (t))

inline float ista_relu(const float v, const float t)
{
    const float u = v - t;
    return u < 0.0f ? 0.0f : u;
}

inline float ista_soft(const float v, const float t)
{
    float u = fabs(v) - t;
    u = u < 0.0f ? 0.0f : u;
    return copysign(u, v);
}

/* ReLU: y = max(z + (a s - b), 0) with b = eta lambda, a = -eta and s = (z W^T - x) W
 * (the two-GEMM form), or a = eta and s = x M (the folded form). The association
 * z + (a s - b) is CRATE's relu(x + (eta (xW - xW^T W) - eta lambda)).
 * Soft: y = soft_t(z + a s) with t = eta lambda. y may be z (same index read, then written). */
__kernel void wbcl_ista_relu(__global const float *z, __global const float *s, const float a, const float b,
                             __global float *y, const ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n) {
        const float v = z[i] + (a * s[i] - b);
        y[i] = v < 0.0f ? 0.0f : v;
    }
}

__kernel void wbcl_ista_soft(__global const float *z, __global const float *s, const float a, const float t,
                             __global float *y, const ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n) y[i] = ista_soft(z[i] + a * s[i], t);
}

/* LASSO proximal step on the code, in place:
 *   z = theta_thr(y - t g)
 *   ISTA  (fista == 0): y <- z
 *   FISTA (fista != 0): y <- z + beta (z - zprev);  zprev <- z   */
#define LASSO_PROX(NAME, THETA)                                                                            \
    __kernel void NAME(__global float *y, __global const float *g, __global float *zprev, const float t,     \
                       const float thr, const float beta, const int fista, const ulong n)                  \
    {                                                                                                      \
        const size_t i = get_global_id(0);                                                                 \
        if (i < n) {                                                                                       \
            const float z = THETA(y[i] - t * g[i], thr);                                                   \
            if (fista) {                                                                                   \
                const float zp = zprev[i];                                                                 \
                zprev[i] = z;                                                                              \
                y[i] = z + beta * (z - zp);                                                                \
            } else {                                                                                       \
                y[i] = z;                                                                                  \
            }                                                                                              \
        }                                                                                                  \
    }
LASSO_PROX(wbcl_lasso_prox_relu, ISTA_RELU)
LASSO_PROX(wbcl_lasso_prox_soft, ISTA_SOFT)

/* The residual at the next gradient point, over p = Z_k W^T (in place):
 *   ISTA:  r = p - x
 *   FISTA: r = p + beta (p - pprev) - x;  pprev <- p
 * (Y_{k+1} W^T = Z_k W^T + beta (Z_k W^T - Z_{k-1} W^T) by linearity.) */
__kernel void wbcl_lasso_resid(__global float *p, __global float *pprev, __global const float *x, const float beta,
                               const int fista, const ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n) {
        const float v = p[i];
        if (fista) {
            const float vp = pprev[i];
            pprev[i] = v;
            p[i] = v + beta * (v - vp) - x[i];
        } else {
            p[i] = v - x[i];
        }
    }
}

/* Per-row objective: out[off + r] = lambd sum_c |z[r,c]| (m columns) + 1/2 sum_c (p[r,c] - x[r,c])^2
 * (d columns). p = Z W^T. */
#if WBCL_VARIANT_CPU
__kernel void wbcl_lasso_obj(__global const float *z, __global const float *p, __global const float *x,
                             const ulong rows, const ulong m, const ulong d, const float lambd,
                             __global float *out, const ulong off)
{
    const size_t r = get_global_id(0);
    if (r >= rows) return;
    __global const float *zr = z + r * m;
    float16 a1 = (float16)(0.0f);
    size_t c = 0;
    for (; c + WBCL_V <= m; c += WBCL_V) a1 += fabs(vload16(0, zr + c));
    float s1 = 0.0f;
    for (; c < m; c++) s1 += fabs(zr[c]);
    __global const float *pr = p + r * d, *xr = x + r * d;
    float16 a2 = (float16)(0.0f);
    c = 0;
    for (; c + WBCL_V <= d; c += WBCL_V) {
        const float16 e = vload16(0, pr + c) - vload16(0, xr + c);
        a2 += e * e;
    }
    float s2 = 0.0f;
    for (; c < d; c++) {
        const float e = pr[c] - xr[c];
        s2 += e * e;
    }
    const float8 h1 = a1.lo + a1.hi, h2 = a2.lo + a2.hi;
    const float4 q1 = h1.lo + h1.hi, q2 = h2.lo + h2.hi;
    s1 += (q1.x + q1.y) + (q1.z + q1.w);
    s2 += (q2.x + q2.y) + (q2.z + q2.w);
    out[off + r] = lambd * s1 + 0.5f * s2;
}
#else
/* One work-group (a power of two <= WBCL_REDUCE_WG) per row. */
__kernel void wbcl_lasso_obj(__global const float *z, __global const float *p, __global const float *x,
                             const ulong rows, const ulong m, const ulong d, const float lambd,
                             __global float *out, const ulong off)
{
    __local float buf[WBCL_REDUCE_WG];
    const size_t r = get_group_id(0), l = get_local_id(0), L = get_local_size(0);
    float s1 = 0.0f, s2 = 0.0f;
    if (r < rows) {
        for (size_t c = l; c < m; c += L) s1 += fabs(z[r * m + c]);
        for (size_t c = l; c < d; c += L) {
            const float e = p[r * d + c] - x[r * d + c];
            s2 += e * e;
        }
    }
    buf[l] = lambd * s1 + 0.5f * s2;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t h = L / 2; h > 0; h /= 2) {
        if (l < h) buf[l] += buf[l + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0 && r < rows) out[off + r] = buf[0];
}
#endif
