/* wbcl — shift-invariant ReduNet kernels (SPEC.md §4.2; host side in host/ops/circulant.c).
 *
 * Build option CI_C = the channel count C (compile-time: private C-vectors, unrollable loops).
 * Complex numbers are float2 (re, im). Spectra V are (m, C, P) with P = H (W/2+1) stored bins of the
 * real FFT (bin p = ph*Wh + pw); a full-spectrum sum weights bin p by ci_weight (1 for pw = 0 and
 * pw = W/2, else 2: the bin and its conjugate twin). Per-frequency matrices are (batch, C, C)
 * row-major; a layer's operators are (K+1, P, C, C): entries 0..K-1 = C_{j,p}, entry K = E_p.
 *
 * CPU-shaped throughout (PERF-NOTES.md): every work-item owns whole rows, vectors or matrices, no
 * local memory, no barriers, no atomics on data; sums in a fixed order (deterministic results).
 * The Cholesky follows the real kernel of cl/linalg.cl (Crout by columns, the first bad pivot
 * recorded once per batch entry as info[2b] = pivot index, info[2b+1] = its float bits) with the
 * complex operations c - a conj(b), |a|^2 and division by the real pivot. OpenCL C 1.2. */

#ifndef CI_C
#define CI_C 1
#endif

#define CMUL(a, b) ((float2)((a).x * (b).x - (a).y * (b).y, (a).x * (b).y + (a).y * (b).x))
/* a * conj(b) */
#define CMULC(a, b) ((float2)((a).x * (b).x + (a).y * (b).y, (a).y * (b).x - (a).x * (b).y))
#define CABS2(a) ((a).x * (a).x + (a).y * (a).y)

static inline float ci_weight(const uint p, const uint W, const uint Wh)
{
    const uint q = p % Wh;
    return (q == 0 || 2 * q == W) ? 1.0f : 2.0f;
}

/* Y[b,o,h,w] = ReLU(sum_{i,u,v} Wt[o,i,u,v] X[b,i,(h+u)%H,(w+v)%W]); one output per work-item. */
__kernel void circ_lift(__global const float *X, __global const float *Wt, __global float *Y, const uint m,
                        const uint Cin, const uint Cout, const uint H, const uint W, const uint kh, const uint kw)
{
    const size_t gid = get_global_id(0);
    const size_t N = (size_t)H * W;
    if (gid >= (size_t)m * Cout * N) return;
    const uint w = (uint)(gid % W), h = (uint)((gid / W) % H), o = (uint)((gid / N) % Cout);
    const size_t b = gid / (N * Cout);
    float s = 0.0f;
    for (uint i = 0; i < Cin; i++) {
        const __global float *x = X + (b * Cin + i) * N;
        const __global float *wt = Wt + ((size_t)o * Cin + i) * kh * kw;
        for (uint u = 0; u < kh; u++) {
            uint hh = h + u;
            if (hh >= H) hh -= H;
            const __global float *xr = x + (size_t)hh * W;
            uint ww = w;
            for (uint v = 0; v < kw; v++) {
                s = fma(wt[u * kw + v], xr[ww], s);
                if (++ww == W) ww = 0;
            }
        }
    }
    Y[gid] = isfinite(s) ? fmax(s, 0.0f) : s; /* a non-finite input must reach the entry check, not vanish */
}

/* Per sample: v <- v / max(|v|, 1e-8), |v| over the whole spectrum; flag[0] = 1 on a non-finite norm. */
__kernel void circ_spec_normalize(__global float2 *V, const uint m, const uint P, const uint W, const uint Wh,
                                  __global int *flag)
{
    const uint b = get_global_id(0);
    if (b >= m) return;
    __global float2 *v = V + (size_t)b * CI_C * P;
    float s = 0.0f;
    for (uint c = 0; c < CI_C; c++)
        for (uint p = 0; p < P; p++) s += ci_weight(p, W, Wh) * CABS2(v[c * P + p]);
    if (!isfinite(s)) flag[0] = 1;
    const float inv = 1.0f / fmax(sqrt(s), 1e-8f);
    for (uint i = 0; i < CI_C * P; i++) v[i] *= inv;
}

/* Per real sample of n values: z <- z / max(|z|, 1e-8). */
__kernel void circ_real_normalize(__global float *Z, const uint m, const uint n)
{
    const uint b = get_global_id(0);
    if (b >= m) return;
    __global float *z = Z + (size_t)b * n;
    float s = 0.0f;
    for (uint i = 0; i < n; i++) s = fma(z[i], z[i], s);
    const float inv = 1.0f / fmax(sqrt(s), 1e-8f);
    for (uint i = 0; i < n; i++) z[i] *= inv;
}

/* S[j,p] lower triangle, row c per work-item: S[j,p][c][d] = sum_{b in group j} v_b[c,p] conj(v_b[d,p]),
 * d <= c; group K is every sample. Work-item (j, p, c) = gid. */
__kernel void circ_gram(__global const float2 *V, __global const int *labels, __global float2 *S, const uint m,
                        const uint P, const uint K)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)(K + 1) * P * CI_C) return;
    const uint c = (uint)(gid % CI_C), p = (uint)((gid / CI_C) % P), j = (uint)(gid / ((size_t)CI_C * P));
    float2 acc[CI_C];
    for (uint d = 0; d < CI_C; d++) acc[d] = (float2)(0.0f, 0.0f);
    for (uint b = 0; b < m; b++) {
        if (j < K && labels[b] != (int)j) continue;
        const __global float2 *v = V + (size_t)b * CI_C * P + p;
        const float2 vc = v[(size_t)c * P];
        for (uint d = 0; d <= c; d++) acc[d] += CMULC(vc, v[(size_t)d * P]);
    }
    __global float2 *s = S + gid * CI_C;
    for (uint d = 0; d <= c; d++) s[d] = acc[d];
}

/* One matrix per work-item, batch entry t = j P + p: A = I + alpha_j S (lower triangle of S read), factor
 * A = L L^H in place (L in S's lower triangle), logdet[t] = log det A; if want_inv,
 * M[t] = alpha_j A^-1 (full, exactly Hermitian) through X = L^-1 in place: A^-1 = X^H X. */
__kernel void circ_shifted_inverse(__global float2 *S, __global const float *alpha, const uint P, const uint nb,
                                   __global float *logdet, __global int *info, const uint want_inv,
                                   __global float2 *M)
{
    const uint t = get_global_id(0);
    if (t >= nb) return;
    const float a = alpha[t / P];
    __global float2 *A = S + (size_t)t * CI_C * CI_C;
    for (uint i = 0; i < CI_C; i++) {
        for (uint k = 0; k < i; k++) A[i * CI_C + k] *= a;
        A[i * CI_C + i] = (float2)(1.0f + a * A[i * CI_C + i].x, 0.0f);
    }
    int fail = -1;
    float fval = 0.0f, ld = 0.0f;
    for (uint j = 0; j < CI_C; j++) { /* Crout, column j */
        float d = A[j * CI_C + j].x;
        for (uint k = 0; k < j; k++) d -= CABS2(A[j * CI_C + k]);
        if (fail < 0 && (!(d > 0.0f) || isinf(d))) {
            fail = (int)j;
            fval = d;
        }
        const float ljj = sqrt(d);
        A[j * CI_C + j] = (float2)(ljj, 0.0f);
        ld += log(ljj);
        const float inv = 1.0f / ljj;
        for (uint i = j + 1; i < CI_C; i++) {
            float2 s = A[i * CI_C + j];
            for (uint k = 0; k < j; k++) s -= CMULC(A[i * CI_C + k], A[j * CI_C + k]);
            A[i * CI_C + j] = s * inv;
        }
    }
    logdet[t] = 2.0f * ld;
    if (fail >= 0 && info[2 * t] < 0) {
        info[2 * t] = fail;
        info[2 * t + 1] = as_int(fval);
    }
    if (!want_inv) return;
    /* X = L^-1 row by row, in place: X[i][i] = 1/L[i][i], X[i][j] = -X[i][i] sum_{k=j}^{i-1} L[i][k] X[k][j]
     * (ascending j: L[i][j] is last needed for X[i][j]) */
    for (uint i = 0; i < CI_C; i++) {
        const float xii = 1.0f / A[i * CI_C + i].x;
        for (uint j = 0; j < i; j++) {
            float2 s = (float2)(0.0f, 0.0f);
            for (uint k = j; k < i; k++) s += CMUL(A[i * CI_C + k], A[k * CI_C + j]);
            A[i * CI_C + j] = -xii * s;
        }
        A[i * CI_C + i] = (float2)(xii, 0.0f);
    }
    /* M[r][c] = a sum_{k >= max(r,c)} conj(X[k][r]) X[k][c]; the lower entry is computed, the upper its conj */
    __global float2 *Mt = M + (size_t)t * CI_C * CI_C;
    for (uint r = 0; r < CI_C; r++)
        for (uint c = 0; c <= r; c++) {
            float2 s = (float2)(0.0f, 0.0f);
            for (uint k = r; k < CI_C; k++) s += CMULC(A[k * CI_C + c], A[k * CI_C + r]);
            s *= a;
            Mt[r * CI_C + c] = c == r ? (float2)(s.x, 0.0f) : s;
            Mt[c * CI_C + r] = (float2)(s.x, -s.y);
        }
}

/* out = M^H v = M v for a Hermitian C x C M, v strided by P. */
#define CI_MATVEC(out, Mp, vv)                                                   \
    for (uint r = 0; r < CI_C; r++) {                                            \
        float2 s_ = (float2)(0.0f, 0.0f);                                        \
        for (uint k = 0; k < CI_C; k++) s_ += CMUL((Mp)[r * CI_C + k], (vv)[k]); \
        (out)[r] = s_;                                                           \
    }

/* nrm[b K + j] = max(|c_j|, 1e-8) over the whole spectrum, c_j(p) = C_{j,p}^H v_b(p); work-item (b, j). */
__kernel void circ_norms(__global const float2 *V, __global const float2 *ops, __global float *nrm, const uint m,
                         const uint P, const uint W, const uint Wh, const uint K)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)m * K) return;
    const uint j = (uint)(gid % K);
    const size_t b = gid / K;
    const __global float2 *v = V + b * CI_C * P;
    float acc = 0.0f;
    float2 vp[CI_C], cj[CI_C];
    for (uint p = 0; p < P; p++) {
        for (uint k = 0; k < CI_C; k++) vp[k] = v[(size_t)k * P + p];
        const __global float2 *Mp = ops + ((size_t)j * P + p) * CI_C * CI_C;
        CI_MATVEC(cj, Mp, vp)
        float s = 0.0f;
        for (uint r = 0; r < CI_C; r++) s += CABS2(cj[r]);
        acc += ci_weight(p, W, Wh) * s;
    }
    nrm[gid] = fmax(sqrt(acc), 1e-8f);
}

/* Per sample b: pi = softmax(-lambda n) (max-subtracted; argmax ties to the lowest class) into pi (m, K) and
 * yhat; then v <- normalize(v + eta (E^H v - sum_j gamma_j pi_j C_j^H v)) per frequency, whole-spectrum norm.
 * Classes with pi_j gamma_j == 0 (exp underflow) contribute exactly 0 and are skipped. */
__kernel void circ_update(__global float2 *V, __global const float2 *ops, __global const float *gamma,
                          __global const float *nrm, __global float *pi, __global int *yhat, const float eta,
                          const float lambda, const uint m, const uint P, const uint W, const uint Wh, const uint K)
{
    const uint b = get_global_id(0);
    if (b >= m) return;
    const __global float *n = nrm + (size_t)b * K;
    __global float *pb = pi + (size_t)b * K;
    float mx = -lambda * n[0];
    for (uint j = 1; j < K; j++) mx = fmax(mx, -lambda * n[j]);
    float den = 0.0f;
    for (uint j = 0; j < K; j++) {
        const float e = exp(-lambda * n[j] - mx);
        pb[j] = e;
        den += e;
    }
    uint best = 0;
    for (uint j = 0; j < K; j++) {
        pb[j] /= den;
        if (pb[j] > pb[best]) best = j;
    }
    yhat[b] = (int)best;
    __global float2 *v = V + (size_t)b * CI_C * P;
    float2 vp[CI_C], g[CI_C], cj[CI_C];
    float s2 = 0.0f;
    for (uint p = 0; p < P; p++) {
        for (uint k = 0; k < CI_C; k++) vp[k] = v[(size_t)k * P + p];
        const __global float2 *Ep = ops + ((size_t)K * P + p) * CI_C * CI_C;
        CI_MATVEC(g, Ep, vp)
        for (uint j = 0; j < K; j++) {
            const float coef = gamma[j] * pb[j];
            if (coef == 0.0f) continue;
            const __global float2 *Cp = ops + ((size_t)j * P + p) * CI_C * CI_C;
            CI_MATVEC(cj, Cp, vp)
            for (uint r = 0; r < CI_C; r++) g[r] -= coef * cj[r];
        }
        float s = 0.0f;
        for (uint r = 0; r < CI_C; r++) {
            const float2 u = vp[r] + eta * g[r];
            v[(size_t)r * P + p] = u;
            s += CABS2(u);
        }
        s2 += ci_weight(p, W, Wh) * s;
    }
    const float inv = 1.0f / fmax(sqrt(s2), 1e-8f);
    for (uint i = 0; i < CI_C * P; i++) v[i] *= inv;
}
