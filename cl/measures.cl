/* wbcl — white-box measures (host/ops/measures.c): the small kernels around
 * the GEMMs and the batched Cholesky log-determinant.
 * Sums over tokens use Kahan compensation (the measures are logged and
 * compared layer by layer; their error should not grow with N). */

/* G[b] += alpha I for `count` q x q matrices: global (q, count). */
__kernel void wbcl_meas_add_diag(__global float *G, const uint q, const uint count, const float alpha)
{
    const size_t i = get_global_id(0), b = get_global_id(1);
    if (i < q && b < count) G[(b * q + i) * q + i] += alpha;
}

/* count[r] = #{c : !(|Z[r,c]| <= t)} (NaN counts): one work-item per row. */
__kernel void wbcl_meas_count_rows(__global const float *Z, const ulong rows, const ulong cols, const float t,
                                   __global uint *count)
{
    const size_t r = get_global_id(0);
    if (r >= rows) return;
    __global const float *zr = Z + r * cols;
    uint c0 = 0;
    for (size_t c = 0; c < cols; c++) c0 += !(fabs(zr[c]) <= t);
    count[r] = c0;
}

/* Token statistics for Rvar, batch entry b = get_global_id(1); W = Z U (batch, N, K p),
 * Pi (batch, K, N); out holds s (batch, K p) then nk (batch, K):
 *   item c < K p:       s[b, c]  = sum_j Pi[b, c / p, j] W[b, j, c]^2
 *   item c = K p + k:   nk[b, k] = sum_j Pi[b, k, j]
 * Kahan-compensated sums over the N tokens. */
__kernel void wbcl_meas_var_stats(__global const float *W, __global const float *Pi, const uint N, const uint K,
                                  const uint p, const uint batch, __global float *out)
{
    const size_t c = get_global_id(0), b = get_global_id(1);
    const size_t kp = (size_t)K * p;
    if (b >= batch || c >= kp + K) return;
    float sum = 0.0f, comp = 0.0f;
    if (c < kp) {
        __global const float *pi = Pi + (b * K + c / p) * N;
        __global const float *w = W + b * N * kp + c;
        for (size_t j = 0; j < N; j++) {
            const float v = w[j * kp];
            const float yv = pi[j] * (v * v) - comp;
            const float tv = sum + yv;
            comp = (tv - sum) - yv;
            sum = tv;
        }
        out[b * kp + c] = sum;
    } else {
        const size_t k = c - kp;
        __global const float *pi = Pi + (b * K + k) * N;
        for (size_t j = 0; j < N; j++) {
            const float yv = pi[j] - comp;
            const float tv = sum + yv;
            comp = (tv - sum) - yv;
            sum = tv;
        }
        out[batch * kp + b * K + k] = sum;
    }
}
