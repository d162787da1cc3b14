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
