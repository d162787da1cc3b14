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
