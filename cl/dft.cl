/* wbcl — direct DFTs of short signals (family "dft"; host side in host/core/fft.c).
 * The unitary real <-> Hermitian transforms of host/core/fft.h for H W <= WBCL_DFT_DIRECT_MAX,
 * where clFFT would build a new program for every (H, W, batch, direction) it meets:
 *   forward  X[b, h, k] = s sum_{y < H, x < W} x[b, y, x] e^{-2 pi i (h y / H + k x / W)},  k < W/2 + 1
 *   inverse  x[b, y, x] = s Re sum_{h < H} sum_{k < W/2+1} c_k X[b, h, k] e^{+2 pi i (h y / H + k x / W)}
 * with s = (H W)^-1/2 and c_k = 1 for k = 0 and (W even) k = W/2, else 2 (the Hermitian twins of the
 * bins not stored). Complex values are interleaved (re, im) floats. One work-item per output value;
 * each reads its whole signal (at most WBCL_DFT_DIRECT_MAX values or bins), so the sums are short.
 * The phase h y / H + k x / W is carried as the integer (h y mod H) W + (k x mod W) H modulo H W, so
 * every twiddle is cospi / sinpi of an exact fraction (no growing angle error). */

/* e^{-2 pi i j / n} for 0 <= j < n: (cos, -sin). */
inline float2 wbcl_dft_twiddle(const uint j, const uint n)
{
    const float f = (float)(2 * j) / (float)n;
    return (float2)(cospi(f), -sinpi(f));
}

__kernel void wbcl_dft_r2c(__global const float *x, __global float *X, const uint batch, const uint H, const uint W,
                           const float scale)
{
    const uint Wh = W / 2 + 1, N = H * W;
    const size_t r = get_global_id(0);
    if (r >= (size_t)batch * H * Wh) return;
    const uint k = r % Wh;
    const size_t t = r / Wh;
    const uint h = t % H;
    __global const float *xb = x + (t / H) * N;
    float re = 0.0f, im = 0.0f;
    uint ph = 0; /* h y mod H */
    for (uint y = 0; y < H; y++) {
        uint pk = 0; /* k x mod W */
        for (uint c = 0; c < W; c++) {
            uint j = ph * W + pk * H;
            if (j >= N) j -= N;
            const float2 w = wbcl_dft_twiddle(j, N);
            const float v = xb[y * W + c];
            re = fma(v, w.x, re);
            im = fma(v, w.y, im);
            pk += k;
            if (pk >= W) pk -= W;
        }
        ph += h;
        if (ph >= H) ph -= H;
    }
    X[2 * r] = re * scale;
    X[2 * r + 1] = im * scale;
}

__kernel void wbcl_dft_c2r(__global const float *X, __global float *x, const uint batch, const uint H, const uint W,
                           const float scale)
{
    const uint Wh = W / 2 + 1, N = H * W;
    const size_t r = get_global_id(0);
    if (r >= (size_t)batch * N) return;
    const uint c = r % W;
    const size_t t = r / W;
    const uint y = t % H;
    __global const float *Xb = X + (t / H) * (size_t)(2 * H * Wh);
    float acc = 0.0f;
    uint ph = 0; /* h y mod H */
    for (uint h = 0; h < H; h++) {
        uint pk = 0; /* k x mod W */
        for (uint k = 0; k < Wh; k++) {
            uint j = ph * W + pk * H;
            if (j >= N) j -= N;
            /* Re(Z e^{+i theta}) = Re(Z) cos(theta) - Im(Z) sin(theta); the twiddle holds (cos, -sin). */
            const float2 w = wbcl_dft_twiddle(j, N);
            const float2 z = vload2(h * Wh + k, Xb);
            const float term = fma(z.x, w.x, z.y * w.y);
            acc = (k == 0 || 2 * k == W) ? acc + term : fma(2.0f, term, acc);
            pk += c;
            if (pk >= W) pk -= W;
        }
        ph += y;
        if (ph >= H) ph -= H;
    }
    x[r] = acc * scale;
}
