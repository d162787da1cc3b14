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
