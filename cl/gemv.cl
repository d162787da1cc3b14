/* wbcl — matrix-vector products: the linear layers of a few rows (wbcl__gemm_linear with m <= 8,
 * host/ops/gemv.c), i.e. the projections of a language model's decode step.
 *
 * Y (m, n) = act(X (m, k) Wᵀ + bias), W (n, k) row-major, X and Y contiguous, act = GELU or none.
 * The packed GEMM packs W on every call, which for one row costs several times the product
 * itself; a decode step is one pass over the weights, so its speed is the rate at which W streams
 * from memory. Two shapes, one per variant:
 *
 * wbcl_gemv_cpu: each work-item owns GEMV_R = 4 consecutive rows of W and streams them together in
 *   float16 pieces: four independent 16-lane FMA chains (one chain would wait on the FMA latency
 *   instead of memory), the X row in cache; the m rows of X one after the other over the same four
 *   rows of W (12 KiB at k = 768, in L1). Rows past n are clamped to the last row (computed, not
 *   stored). The items loop, so PoCL runs them one after the other (no cross-item vectors).
 * wbcl_gemv_gpu: one work-group of GEMV_WG items per row of W: the items read the row coalesced
 *   (item i takes elements i, i + GEMV_WG, ...), then a tree sum in local memory.
 * Both sum in a different order from the GEMM: results agree with it to rounding, not bitwise. */

#define GEMV_R 4
#define GEMV_WG 64

inline float gemv_out(const float s, __global const float *bias, const int has_bias, const int gelu, const uint j)
{
    const float z = has_bias ? s + bias[j] : s;
    return gelu ? wbcl_gelu1(z) : z;
}

__kernel void wbcl_gemv_cpu(__global const float *X, __global const float *W, __global const float *bias,
                            const int has_bias, const int gelu, __global float *Y, const uint m, const uint n,
                            const uint k)
{
    const uint j0 = get_global_id(0) * GEMV_R;
    if (j0 >= n) return;
    const uint nr = min((uint)GEMV_R, n - j0);
    const __global float *w0 = W + (size_t)j0 * k;
    const __global float *w1 = W + (size_t)(j0 + min(1u, nr - 1)) * k;
    const __global float *w2 = W + (size_t)(j0 + min(2u, nr - 1)) * k;
    const __global float *w3 = W + (size_t)(j0 + min(3u, nr - 1)) * k;
    const uint k16 = k / 16;
    for (uint r = 0; r < m; r++) {
        const __global float *x = X + (size_t)r * k;
        float16 a0 = (float16)(0.0f), a1 = a0, a2 = a0, a3 = a0;
        for (uint i = 0; i < k16; i++) {
            const float16 xv = vload16(i, x);
            a0 = fma(vload16(i, w0), xv, a0);
            a1 = fma(vload16(i, w1), xv, a1);
            a2 = fma(vload16(i, w2), xv, a2);
            a3 = fma(vload16(i, w3), xv, a3);
        }
        float s0 = wbcl_hsum16(a0), s1 = wbcl_hsum16(a1), s2 = wbcl_hsum16(a2), s3 = wbcl_hsum16(a3);
        for (uint i = 16 * k16; i < k; i++) {
            const float xi = x[i];
            s0 = fma(w0[i], xi, s0);
            s1 = fma(w1[i], xi, s1);
            s2 = fma(w2[i], xi, s2);
            s3 = fma(w3[i], xi, s3);
        }
        __global float *y = Y + (size_t)r * n;
        y[j0] = gemv_out(s0, bias, has_bias, gelu, j0);
        if (nr > 1) y[j0 + 1] = gemv_out(s1, bias, has_bias, gelu, j0 + 1);
        if (nr > 2) y[j0 + 2] = gemv_out(s2, bias, has_bias, gelu, j0 + 2);
        if (nr > 3) y[j0 + 3] = gemv_out(s3, bias, has_bias, gelu, j0 + 3);
    }
}

__kernel __attribute__((reqd_work_group_size(GEMV_WG, 1, 1))) void
wbcl_gemv_gpu(__global const float *X, __global const float *W, __global const float *bias, const int has_bias,
              const int gelu, __global float *Y, const uint m, const uint n, const uint k)
{
    __local float part[GEMV_WG];
    const uint j = get_group_id(0), li = get_local_id(0);
    const __global float *w = W + (size_t)j * k;
    for (uint r = 0; r < m; r++) {
        const __global float *x = X + (size_t)r * k;
        float s = 0.0f;
        for (uint i = li; i < k; i += GEMV_WG) s = fma(w[i], x[i], s);
        part[li] = s;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint h = GEMV_WG / 2; h > 0; h >>= 1) {
            if (li < h) part[li] += part[li + h];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (li == 0) Y[(size_t)r * n + j] = gemv_out(part[0], bias, has_bias, gelu, j);
        barrier(CLK_LOCAL_MEM_FENCE); /* part is reused by the next row */
    }
}
