/* wbcl — shift-invariant ReduNet kernels (SPEC.md §4.2; host side in host/ops/circulant.c).
 *
 * Build option CI_C = the channel count C (compile-time: private C-vectors, unrollable loops).
 * Complex numbers are float2 (re, im). Spectra V are (m, C, P) as clFFT writes them, P = H (W/2+1)
 * stored bins of the real FFT (bin p = ph*Wh + pw); the per-frequency kernels use a copy in the lane
 * layout Vt (P, C, re/im, mp) described below (circ_to_lanes / circ_from_lanes). A full-spectrum sum weights bin p by ci_weight (1 for pw = 0 and
 * pw = W/2, else 2: the bin and its conjugate twin). A layer's operators are the (K+1) P matrices
 * t = j P + p (j < K: C_{j,p}, j = K: E_p), full C x C Hermitian, in batch lanes like the Gram matrices
 * (CI_MW matrices per block, see circ_shifted_inverse and ci_op): the factorization stores them with
 * contiguous 16-lane vectors; the host converts to and from (K+1, P, C, C) row-major (model files, read_layer).
 *
 * CPU-shaped (PERF-NOTES.md): every work-item owns a register tile (the application: 4 matrix
 * rows x 16 samples in float16 lanes; the Gram: 1 x 4 entries x 8 lanes; the Cholesky: 16 matrices in
 * float16 lanes), no local memory, no barriers, no atomics on data; sums in a fixed order (deterministic
 * results). GPU-shaped contexts use the kernels at the end: a work-group per matrix for the per-frequency
 * Cholesky and per bin for the Gram matrices (_wg, _g), one sample lane per work-item for the application
 * (_g), partial sums for the normalizations, the same layouts; the lifting has its own pair. Both variants
 * are tested on PoCL; the one-item-per-matrix GPU kernels (circulant.wg = 0) also on an NVIDIA H200.
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

/* Y[b,o,h,w] = ReLU(sum_{i,u,v} Wt[o,i,u,v] X[b,i,(h+u)%H,(w+v)%W]); one output per work-item (GPU variant;
 * CPU devices: circ_lift_pad + circ_lift_rows below). */
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

/* CPU-shaped lifting (PERF-NOTES.md): the inner loop is a contiguous vector load and CI_LO broadcast FMAs, no
 * wrap test. circ_lift_pad copies every row of X into rows of Wp = nv 16 + kw - 1 floats, Xp[.., x] =
 * X[.., x mod W] (the right wrap written out once); circ_lift_rows lets a work-item (sample b, block of CI_LO
 * output channels, row h) run over the row 16 columns at a time, accumulating CI_LO x 16 outputs over the input
 * channels and the taps, each tap one vload16 of the padded row shared by the CI_LO channels (a whole row per
 * work-item measured ~20% faster than one vector of 16 per work-item). Columns past W (T not a
 * multiple of 16) are computed from the padding and not stored; channels past Cout (Cout not a multiple of
 * CI_LO) use channel Cout - 1's weights and are not stored. Same sum order as circ_lift (i, u, v), so both
 * variants round alike up to FMA contraction. */
#define CI_LO 4
__kernel void circ_lift_pad(__global const float *X, __global float *Xp, const uint rows, const uint W,
                            const uint Wp)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)rows * Wp) return;
    const size_t r = gid / Wp;
    const uint x = (uint)(gid % Wp);
    Xp[gid] = X[r * W + x % W];
}

__kernel void circ_lift_rows(__global const float *Xp, __global const float *Wt, __global float *Y, const uint m,
                             const uint Cin, const uint Cout, const uint H, const uint W, const uint kh,
                             const uint kw, const uint Wp, const uint nv)
{
    const size_t gid = get_global_id(0);
    const uint nob = (Cout + CI_LO - 1) / CI_LO;
    if (gid >= (size_t)m * nob * H) return;
    const uint h = (uint)(gid % H), ob = (uint)((gid / H) % nob);
    const size_t b = gid / ((size_t)H * nob);
    const uint o0 = ob * CI_LO, taps = kh * kw;
    const __global float *wt[CI_LO];
    for (uint q = 0; q < CI_LO; q++) wt[q] = Wt + (size_t)min(o0 + q, Cout - 1) * Cin * taps;
    for (uint vec = 0; vec < nv; vec++) {
        float16 a0 = (float16)(0.0f), a1 = a0, a2 = a0, a3 = a0;
        for (uint i = 0; i < Cin; i++)
            for (uint u = 0; u < kh; u++) {
                uint hh = h + u;
                if (hh >= H) hh -= H; /* kh <= H */
                const __global float *xr = Xp + ((b * Cin + i) * H + hh) * Wp + (size_t)vec * 16;
                const uint t0 = i * taps + u * kw;
                for (uint v = 0; v < kw; v++) {
                    const float16 x = vload16(0, xr + v);
                    a0 = fma((float16)(wt[0][t0 + v]), x, a0);
                    a1 = fma((float16)(wt[1][t0 + v]), x, a1);
                    a2 = fma((float16)(wt[2][t0 + v]), x, a2);
                    a3 = fma((float16)(wt[3][t0 + v]), x, a3);
                }
            }
        const uint w0 = vec * 16, nw = min(16u, W - w0);
        float16 acc[CI_LO] = {a0, a1, a2, a3};
        for (uint q = 0; q < CI_LO && o0 + q < Cout; q++) {
            /* ReLU; a non-finite value must reach the entry check, not vanish */
            const float16 r = select(acc[q], fmax(acc[q], (float16)(0.0f)), isfinite(acc[q]));
            __global float *y = Y + ((b * Cout + o0 + q) * H + h) * W + w0;
            if (nw == 16) {
                vstore16(r, 0, y);
            } else {
                float t[16];
                vstore16(r, 0, t);
                for (uint k = 0; k < nw; k++) y[k] = t[k];
            }
        }
    }
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

/* GPU variant of the two normalizations above: a sample's norm from nchs partial sums, one work-item per
 * (sample b, part q) taking the elements q, q + nchs, q + 2 nchs, ... (neighbouring work-items read
 * neighbouring elements), then a second launch whose work-item (b, q) adds the sample's nchs partial sums
 * in order and scales the same elements. Deterministic; the order of the sum differs from the one-pass
 * kernels (rounding). part: m nchs floats. */
__kernel void circ_spec_partial_g(__global const float2 *V, __global float *part, const uint m, const uint P,
                                  const uint W, const uint Wh, const uint nchs)
{
    const size_t gid = get_global_id(0);
    const uint b = (uint)(gid / nchs), q = (uint)(gid % nchs);
    if (b >= m) return;
    const __global float2 *v = V + (size_t)b * CI_C * P;
    float s = 0.0f;
    for (uint e = q; e < CI_C * P; e += nchs) s += ci_weight(e % P, W, Wh) * CABS2(v[e]);
    part[gid] = s;
}

__kernel void circ_spec_scale_g(__global float2 *V, __global const float *part, const uint m, const uint P,
                                const uint nchs, __global int *flag)
{
    const size_t gid = get_global_id(0);
    const uint b = (uint)(gid / nchs), q = (uint)(gid % nchs);
    if (b >= m) return;
    float s = 0.0f;
    for (uint i = 0; i < nchs; i++) s += part[(size_t)b * nchs + i];
    if (q == 0 && !isfinite(s)) flag[0] = 1;
    const float inv = 1.0f / fmax(sqrt(s), 1e-8f);
    __global float2 *v = V + (size_t)b * CI_C * P;
    for (uint e = q; e < CI_C * P; e += nchs) v[e] *= inv;
}

__kernel void circ_real_partial_g(__global const float *Z, __global float *part, const uint m, const uint n,
                                  const uint nchs)
{
    const size_t gid = get_global_id(0);
    const uint b = (uint)(gid / nchs), q = (uint)(gid % nchs);
    if (b >= m) return;
    const __global float *z = Z + (size_t)b * n;
    float s = 0.0f;
    for (uint i = q; i < n; i += nchs) s = fma(z[i], z[i], s);
    part[gid] = s;
}

__kernel void circ_real_scale_g(__global float *Z, __global const float *part, const uint m, const uint n,
                                const uint nchs)
{
    const size_t gid = get_global_id(0);
    const uint b = (uint)(gid / nchs), q = (uint)(gid % nchs);
    if (b >= m) return;
    float s = 0.0f;
    for (uint i = 0; i < nchs; i++) s += part[(size_t)b * nchs + i];
    const float inv = 1.0f / fmax(sqrt(s), 1e-8f);
    __global float *z = Z + (size_t)b * n;
    for (uint i = q; i < n; i += nchs) z[i] *= inv;
}

/* ---- sample lanes ------------------------------------------------------------------------------
 * The per-frequency kernels read the spectra in a lane layout Vt (P, C, 2, mp): for every bin p and
 * channel c a plane of the mp real parts, then one of the mp imaginary parts. Sample b sits in lane
 * lane_of[b]; the host sorts the training samples by class, so a class's Gram matrix reads only the
 * blocks of 8 lanes it touches (the mask zeroes the other classes' lanes there), and pads at the end
 * to a multiple of 16 lanes (the application's float16 vectors). Padding lanes are zero (and stay zero
 * through the layers). Eight lanes are one float8 load (Gram). */
typedef float8 ci_v;
#define CI_VW 8

static inline float ci_hsum(const ci_v a)
{
    const float4 h = a.lo + a.hi;
    return (h.x + h.y) + (h.z + h.w);
}

/* V (m, C, P) float2 -> Vt, every lane (padding lanes, sample_of[l] < 0, get 0); work-item (p, c), p fastest:
 * it writes its two planes of mp contiguous floats and gathers the samples' values, which the work-items of
 * the neighbouring bins read from the same cache lines (one element per work-item scattered its stores
 * over a plane stride: 2.4x slower in 2-D, 2x in 1-D, in one A/B under load). */
__kernel void circ_to_lanes(__global const float2 *V, __global float *Vt, __global const int *sample_of,
                            const uint P, const uint mp)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)CI_C * P) return;
    const uint p = (uint)(gid % P), c = (uint)(gid / P);
    __global float *o = Vt + ((size_t)p * CI_C + c) * 2 * mp;
    for (uint l = 0; l < mp; l++) {
        const int b = sample_of[l];
        const float2 v = b >= 0 ? V[((size_t)b * CI_C + c) * P + p] : (float2)(0.0f);
        o[l] = v.x;
        o[mp + l] = v.y;
    }
}

/* circ_to_lanes, one element of Vt per work-item (the GPU variant's: lanes fastest, so the stores are
 * contiguous; the loads gather the lane's sample): the same values. */
__kernel void circ_to_lanes_g(__global const float2 *V, __global float *Vt, __global const int *sample_of,
                              const uint P, const uint mp)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)CI_C * P * mp) return;
    const uint l = (uint)(gid % mp);
    const size_t pc = gid / mp; /* p C + c */
    const uint p = (uint)(pc / CI_C), c = (uint)(pc % CI_C);
    const int b = sample_of[l];
    const float2 v = b >= 0 ? V[((size_t)b * CI_C + c) * P + p] : (float2)(0.0f);
    __global float *o = Vt + pc * 2 * mp;
    o[l] = v.x;
    o[mp + l] = v.y;
}

/* Vt -> V (m, C, P) float2; one element per work-item (p fastest: contiguous stores). */
__kernel void circ_from_lanes(__global const float *Vt, __global float2 *V, __global const int *lane_of,
                              const uint m, const uint P, const uint mp)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)m * CI_C * P) return;
    const uint p = (uint)(gid % P), c = (uint)((gid / P) % CI_C), b = (uint)(gid / ((size_t)P * CI_C));
    const size_t pc = (size_t)p * CI_C + c, l = (size_t)lane_of[b];
    V[gid] = (float2)(Vt[pc * 2 * mp + l], Vt[(pc * 2 + 1) * mp + l]);
}

/* Per-frequency matrices in batch lanes: S holds the (K+1) P matrices of C x C in blocks of 16 (batch entry
 * t = j P + p in block t / 16, lane t % 16): element (i, k) of block q at S + ((q C + i) C + k) 2 16, 16 real
 * parts then 16 imaginary parts (a float16 each). The factorization below works on 16 matrices at once. */
#define CI_MW 16
typedef float16 ci_w;

/* S[j,p] lower triangle, row c of every group per work-item (p, c): S[j,p][c][d] = sum_b mask[j][b] v_b[c,p]
 * conj(v_b[d,p]), d <= c, mask (K+1, mp) of 0/1 over lanes (padding lanes 0), summed only over the blocks of
 * 8 lanes listed for the group: blocks[boff[j] .. boff[j+1]) (block index = first lane / 8). The groups
 * j < K partition the samples (every valid lane is in exactly one), so group K (every sample) is their sum
 * S[K,p] = sum_j S[j,p], added in class order: its own pass over all lanes would be ~40% of the work. */
__kernel void circ_gram(__global const float *Vt, __global const float *mask, __global const int *boff,
                        __global const int *blocks, __global float *S, const uint mp, const uint P, const uint K,
                        __global const int *skip, const uint skip_off)
{
    if (skip[skip_off]) return; /* the fit's objective when the predicted groups are the true ones */
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)P * CI_C) return;
    /* c fastest, then the bin p: the K groups of a bin run back to back and share its spectra in cache */
    const uint c = (uint)(gid % CI_C), p = (uint)(gid / CI_C);
    const __global float *base = Vt + (size_t)p * CI_C * 2 * mp;
    const __global float *xr = base + (size_t)c * 2 * mp, *xi = xr + mp;
    float tr[CI_C], ti[CI_C]; /* row c of the sum over the classes */
    for (uint d = 0; d <= c; d++) tr[d] = ti[d] = 0.0f;
    for (uint j = 0; j < K; j++) {
        const __global float *mk = mask + (size_t)j * mp;
        const size_t t = (size_t)j * P + p; /* batch entry: block t / 16, lane t % 16 */
        __global float *s = S + ((t / CI_MW) * CI_C * CI_C + (size_t)c * CI_C) * 2 * CI_MW + t % CI_MW;
        /* four columns d at a time: the masked row c (pr, pi) is loaded once per block for the four */
        for (uint d0 = 0; d0 <= c; d0 += 4) {
            const uint d1 = min(d0 + 1, c), d2 = min(d0 + 2, c), d3 = min(d0 + 3, c);
            const __global float *y0 = base + (size_t)d0 * 2 * mp, *y1 = base + (size_t)d1 * 2 * mp,
                                 *y2 = base + (size_t)d2 * 2 * mp, *y3 = base + (size_t)d3 * 2 * mp;
            ci_v a0r = (ci_v)(0.0f), a0i = a0r, a1r = a0r, a1i = a0r, a2r = a0r, a2i = a0r, a3r = a0r, a3i = a0r;
            for (int q = boff[j]; q < boff[j + 1]; q++) {
                const uint b = (uint)blocks[q] * CI_VW;
                const ci_v w = vload8(0, mk + b), pr = w * vload8(0, xr + b), pi_ = w * vload8(0, xi + b);
                ci_v qr, qi;
#define CI_GACC(ar, ai, y)                                                                       \
    qr = vload8(0, (y) + b);                                                                     \
    qi = vload8(0, (y) + mp + b);                                                                \
    ar = fma(pr, qr, fma(pi_, qi, ar)); /* x conj(y) */                                          \
    ai = fma(pi_, qr, fma(-pr, qi, ai));
                CI_GACC(a0r, a0i, y0)
                CI_GACC(a1r, a1i, y1)
                CI_GACC(a2r, a2i, y2)
                CI_GACC(a3r, a3i, y3)
#undef CI_GACC
            }
            const float e0r = ci_hsum(a0r), e0i = ci_hsum(a0i), e1r = ci_hsum(a1r), e1i = ci_hsum(a1i),
                        e2r = ci_hsum(a2r), e2i = ci_hsum(a2i), e3r = ci_hsum(a3r), e3i = ci_hsum(a3i);
            s[(size_t)d0 * 2 * CI_MW] = e0r;
            s[(size_t)d0 * 2 * CI_MW + CI_MW] = e0i;
            tr[d0] += e0r;
            ti[d0] += e0i;
            if (d0 + 1 <= c) {
                s[(size_t)(d0 + 1) * 2 * CI_MW] = e1r;
                s[(size_t)(d0 + 1) * 2 * CI_MW + CI_MW] = e1i;
                tr[d0 + 1] += e1r;
                ti[d0 + 1] += e1i;
            }
            if (d0 + 2 <= c) {
                s[(size_t)(d0 + 2) * 2 * CI_MW] = e2r;
                s[(size_t)(d0 + 2) * 2 * CI_MW + CI_MW] = e2i;
                tr[d0 + 2] += e2r;
                ti[d0 + 2] += e2i;
            }
            if (d0 + 3 <= c) {
                s[(size_t)(d0 + 3) * 2 * CI_MW] = e3r;
                s[(size_t)(d0 + 3) * 2 * CI_MW + CI_MW] = e3i;
                tr[d0 + 3] += e3r;
                ti[d0 + 3] += e3i;
            }
        }
    }
    const size_t t = (size_t)K * P + p;
    __global float *s = S + ((t / CI_MW) * CI_C * CI_C + (size_t)c * CI_C) * 2 * CI_MW + t % CI_MW;
    for (uint d = 0; d <= c; d++) {
        s[(size_t)d * 2 * CI_MW] = tr[d];
        s[(size_t)d * 2 * CI_MW + CI_MW] = ti[d];
    }
}

/* Groups by predicted class on the device (fit's logged objective, no read-back): from the lane-indexed
 * yhat and lane validity valid[l] (sample index or -1 for padding) the Gram kernel's mask (K+1, mp),
 * boff (K+2) and blocks (the blocks of 8 lanes holding a member, per group), the class counts cnt[j]
 * (j < K, at cnt_off) and alpha_j = C / (cnt_j eps2) (0 for an empty class), alpha_K = C / (m eps2);
 * same[same_off] = 1 when every sample's prediction is its true label (label[l], lane-indexed), else 0;
 * then alpha = alpha_true (the construction's).
 * One work-item. */
__kernel void circ_groups(__global const int *yhat, __global const int *valid, __global float *mask,
                          __global int *boff, __global int *blocks, __global int *cnt, __global float *alpha,
                          const uint m, const uint mp, const uint K, const float eps2, const uint cnt_off,
                          __global const int *label, __global int *same, const uint same_off,
                          __global const float *alpha_true)
{
    if (get_global_id(0) != 0) return;
    cnt += cnt_off;
    int eq = 1;
    for (uint l = 0; l < mp; l++)
        if (valid[l] >= 0 && yhat[l] != label[l]) eq = 0;
    same[same_off] = eq;
    for (uint l = 0; l < mp; l++) { /* the mask: stores only */
        const int ok = valid[l] >= 0;
        const uint y = ok ? (uint)yhat[l] : K;
        for (uint j = 0; j < K; j++) mask[(size_t)j * mp + l] = (ok && y == j) ? 1.0f : 0.0f;
        mask[(size_t)K * mp + l] = ok ? 1.0f : 0.0f;
    }
    /* the counts, block lists and alphas from yhat and valid, not read back from what this work-item just
     * stored (on a GPU every such load waits for its store to reach the cache) */
    uint nq = 0;
    for (uint j = 0; j <= K; j++) {
        boff[j] = (int)nq;
        uint n = 0;
        for (uint q = 0; q < mp / CI_VW; q++) {
            uint any = 0;
            for (uint l = q * CI_VW; l < (q + 1) * CI_VW; l++)
                any += valid[l] >= 0 && (j == K || (uint)yhat[l] == j);
            n += any;
            if (any) blocks[nq++] = (int)q;
        }
        if (j < K) {
            cnt[j] = (int)n;
            alpha[j] = n ? (float)CI_C / ((float)n * eps2) : 0.0f;
        }
    }
    boff[K + 1] = (int)nq;
    alpha[K] = (float)CI_C / ((float)m * eps2);
    if (eq) /* the true groups: the construction's alphas (host-rounded), so both give the same matrices */
        for (uint j = 0; j <= K; j++) alpha[j] = alpha_true[j];
}

/* Sixteen matrices per work-item (the batch lanes of S), batch entries t = 16 q + l < nb, q = the work-item:
 * A = I + alpha_j S (lower triangle of S read, j = t / P), factor A = L L^H in place (L in S's lower
 * triangle), logdet[ld_off + t] = log det A; the first bad pivot per matrix into info (from info_off) as
 * info[2t] = pivot index, info[2t+1] = its float bits, kept if already set and not recorded for alpha = 0
 * (an empty group, A = I). If want_inv, M[t] = alpha_j A^-1 (full, exactly Hermitian, in S's batch-lane
 * layout: whole 16-lane blocks, lanes past nb get 0) through X = L^-1 in place: A^-1 = X^H X. Crout by columns with c - a conj(b), |a|^2 and division by the
 * real pivot, every operation on 16 lanes (float16). Lanes past nb hold zeros (A = I) and are not written. */
#define CI_RE(i, k) (A + ((size_t)(i) * CI_C + (k)) * 2 * CI_MW)
#define CI_IM(i, k) (A + ((size_t)(i) * CI_C + (k)) * 2 * CI_MW + CI_MW)
#define CI_MRE(i, k) (Mq + ((size_t)(i) * CI_C + (k)) * 2 * CI_MW)
#define CI_MIM(i, k) (Mq + ((size_t)(i) * CI_C + (k)) * 2 * CI_MW + CI_MW)
__kernel void circ_shifted_inverse(__global float *S, __global const float *alpha, const uint P, const uint nb,
                                   __global float *logdet, __global int *info, const uint want_inv,
                                   __global float *M, const uint ld_off, const uint info_off,
                                   __global const int *skip, const uint skip_off)
{
    if (skip[skip_off]) return; /* as circ_gram */
    const uint q = get_global_id(0);
    if ((size_t)q * CI_MW >= nb) return;
    logdet += ld_off;
    info += info_off;
    const uint t0 = q * CI_MW;
    float al[CI_MW];
    for (uint l = 0; l < CI_MW; l++) al[l] = t0 + l < nb ? alpha[(t0 + l) / P] : 0.0f;
    const ci_w a = vload16(0, al);
    __global float *A = S + (size_t)q * CI_C * CI_C * 2 * CI_MW;
    __global float *Mq = M + (size_t)q * CI_C * CI_C * 2 * CI_MW;
    for (uint i = 0; i < CI_C; i++) {
        for (uint k = 0; k < i; k++) {
            vstore16(a * vload16(0, CI_RE(i, k)), 0, CI_RE(i, k));
            vstore16(a * vload16(0, CI_IM(i, k)), 0, CI_IM(i, k));
        }
        vstore16(fma(a, vload16(0, CI_RE(i, i)), (ci_w)(1.0f)), 0, CI_RE(i, i));
        vstore16((ci_w)(0.0f), 0, CI_IM(i, i));
    }
    int16 fail = (int16)(-1);
    ci_w fval = (ci_w)(0.0f), ld = (ci_w)(0.0f);
    for (uint j = 0; j < CI_C; j++) { /* Crout, column j */
        ci_w d = vload16(0, CI_RE(j, j));
        for (uint k = 0; k < j; k++) {
            const ci_w xr = vload16(0, CI_RE(j, k)), xi = vload16(0, CI_IM(j, k));
            d = fma(-xr, xr, fma(-xi, xi, d));
        }
        const int16 first = ((isgreater(d, (ci_w)(0.0f)) == (int16)(0)) | isinf(d)) & (fail < (int16)(0));
        fail = select(fail, (int16)((int)j), first);
        fval = select(fval, d, first);
        const ci_w ljj = sqrt(d), inv = (ci_w)(1.0f) / ljj;
        vstore16(ljj, 0, CI_RE(j, j));
        ld += log(ljj);
        for (uint i = j + 1; i < CI_C; i++) { /* A[i][j] = (A[i][j] - sum_k A[i][k] conj(A[j][k])) / ljj */
            ci_w sr = vload16(0, CI_RE(i, j)), si = vload16(0, CI_IM(i, j));
            for (uint k = 0; k < j; k++) {
                const ci_w ar = vload16(0, CI_RE(i, k)), ai = vload16(0, CI_IM(i, k)), br = vload16(0, CI_RE(j, k)),
                           bi = vload16(0, CI_IM(j, k));
                sr = fma(-ar, br, fma(-ai, bi, sr));
                si = fma(-ai, br, fma(ar, bi, si));
            }
            vstore16(sr * inv, 0, CI_RE(i, j));
            vstore16(si * inv, 0, CI_IM(i, j));
        }
    }
    {
        float ldv[CI_MW], fv[CI_MW];
        int fl[CI_MW];
        vstore16(2.0f * ld, 0, ldv);
        vstore16(fval, 0, fv);
        vstore16(fail, 0, fl);
        for (uint l = 0; l < CI_MW && t0 + l < nb; l++) {
            const uint t = t0 + l;
            logdet[t] = ldv[l];
            if (fl[l] >= 0 && al[l] > 0.0f && info[2 * t] < 0) {
                info[2 * t] = fl[l];
                info[2 * t + 1] = as_int(fv[l]);
            }
        }
    }
    if (!want_inv) return;
    /* X = L^-1 row by row, in place: X[i][i] = 1/L[i][i], X[i][j] = -X[i][i] sum_{k=j}^{i-1} L[i][k] X[k][j]
     * (ascending j: L[i][j] is last needed for X[i][j]) */
    for (uint i = 0; i < CI_C; i++) {
        const ci_w xii = (ci_w)(1.0f) / vload16(0, CI_RE(i, i));
        for (uint j = 0; j < i; j++) {
            ci_w sr = (ci_w)(0.0f), si = (ci_w)(0.0f);
            for (uint k = j; k < i; k++) {
                const ci_w ar = vload16(0, CI_RE(i, k)), ai = vload16(0, CI_IM(i, k)), br = vload16(0, CI_RE(k, j)),
                           bi = vload16(0, CI_IM(k, j));
                sr = fma(ar, br, fma(-ai, bi, sr));
                si = fma(ar, bi, fma(ai, br, si));
            }
            vstore16(-xii * sr, 0, CI_RE(i, j));
            vstore16(-xii * si, 0, CI_IM(i, j));
        }
        vstore16(xii, 0, CI_RE(i, i));
    }
    /* M[r][c] = a sum_{k >= max(r,c)} conj(X[k][r]) X[k][c]; the lower entry is computed, the upper its conj */
    for (uint r = 0; r < CI_C; r++)
        for (uint c = 0; c <= r; c++) {
            ci_w sr = (ci_w)(0.0f), si = (ci_w)(0.0f);
            for (uint k = r; k < CI_C; k++) { /* X[k][c] conj(X[k][r]) */
                const ci_w ar = vload16(0, CI_RE(k, c)), ai = vload16(0, CI_IM(k, c)), br = vload16(0, CI_RE(k, r)),
                           bi = vload16(0, CI_IM(k, r));
                sr = fma(ar, br, fma(ai, bi, sr));
                si = fma(ai, br, fma(-ar, bi, si));
            }
            const ci_w mr = a * sr, mi = c == r ? (ci_w)(0.0f) : a * si;
            vstore16(mr, 0, CI_MRE(r, c));
            vstore16(mi, 0, CI_MIM(r, c));
            if (c != r) {
                vstore16(mr, 0, CI_MRE(c, r));
                vstore16(-mi, 0, CI_MIM(c, r));
            }
        }
}
#undef CI_RE
#undef CI_IM
#undef CI_MRE
#undef CI_MIM

/* ---- application: 16 samples per vector (float16 lanes of Vt, one zmm) ---------------------------
 * Per frequency bin the application is a small complex GEMM: rows of a C x C matrix times the C-vectors
 * of 16 samples. A work-item owns a register tile of 4 matrix rows x 16 samples (8 float16 accumulators,
 * re/im), streams the samples' C-vectors from the lane layout (two contiguous float16 loads per k, L1
 * resident) and broadcasts the matrix entries (contiguous rows). The matrices are Hermitian, so
 * M^H v = M v is taken row by row. mp is a multiple of 16 (the host pads).
 * circ_update's tiles are 4 rows where a float16 is one register (WBCL_SIMD >= 16: its two tiles take 16 of
 * 32 zmm) and 2 rows elsewhere (AVX2: 4-row tiles need 32 of 16 ymm and spill; 2 rows measured faster on a
 * Zen 3, perf/RESULTS.md). */
#define CI_WW 16
/* Operators in batch lanes (as circ_shifted_inverse writes them): matrix t = j P + p in block t / 16,
 * lane t % 16; entry (r, k) real part at CI_OS (r C + k) from the matrix's base, imaginary part CI_MW later */
#define CI_OS (2 * CI_MW)
#define CI_OP(m, e) ((float2)((m)[(size_t)(e) * CI_OS], (m)[(size_t)(e) * CI_OS + CI_MW]))
static inline const __global float *ci_op(const __global float *ops, const size_t t)
{
    return ops + (t / CI_MW) * CI_C * CI_C * CI_OS + t % CI_MW;
}

/* (cXr, cXi), X = 0..3 = rows r..r+3 of M times the 16 samples at pb (lane layout, row stride 2 mp). */
#define CI_TILE4(c0r, c0i, c1r, c1i, c2r, c2i, c3r, c3i, Mp, r, pb, mp)                  \
    {                                                                                    \
        c0r = c0i = c1r = c1i = c2r = c2i = c3r = c3i = (ci_w)(0.0f);                    \
        const __global float *m0_ = (Mp) + (r) * CI_C * CI_OS;                           \
        for (uint k_ = 0; k_ < CI_C; k_++) {                                             \
            const ci_w xr_ = vload16(0, (pb) + (size_t)k_ * 2 * (mp)),                   \
                       xi_ = vload16(0, (pb) + ((size_t)k_ * 2 + 1) * (mp));             \
            const float2 a0_ = CI_OP(m0_, k_), a1_ = CI_OP(m0_, CI_C + k_),               \
                         a2_ = CI_OP(m0_, 2 * CI_C + k_), a3_ = CI_OP(m0_, 3 * CI_C + k_); \
            c0r = fma((ci_w)(a0_.x), xr_, fma((ci_w)(-a0_.y), xi_, c0r));                \
            c0i = fma((ci_w)(a0_.x), xi_, fma((ci_w)(a0_.y), xr_, c0i));                 \
            c1r = fma((ci_w)(a1_.x), xr_, fma((ci_w)(-a1_.y), xi_, c1r));                \
            c1i = fma((ci_w)(a1_.x), xi_, fma((ci_w)(a1_.y), xr_, c1i));                 \
            c2r = fma((ci_w)(a2_.x), xr_, fma((ci_w)(-a2_.y), xi_, c2r));                \
            c2i = fma((ci_w)(a2_.x), xi_, fma((ci_w)(a2_.y), xr_, c2i));                 \
            c3r = fma((ci_w)(a3_.x), xr_, fma((ci_w)(-a3_.y), xi_, c3r));                \
            c3i = fma((ci_w)(a3_.x), xi_, fma((ci_w)(a3_.y), xr_, c3i));                 \
        }                                                                                \
    }

/* (cXr, cXi), X = 0..1 = rows r, r+1 of M times the 16 samples at pb (the update's tile where a float16
 * takes two registers: see circ_update) */
#define CI_TILE2(c0r, c0i, c1r, c1i, Mp, r, pb, mp)                                      \
    {                                                                                    \
        c0r = c0i = c1r = c1i = (ci_w)(0.0f);                                            \
        const __global float *m0_ = (Mp) + (r) * CI_C * CI_OS;                           \
        for (uint k_ = 0; k_ < CI_C; k_++) {                                             \
            const ci_w xr_ = vload16(0, (pb) + (size_t)k_ * 2 * (mp)),                   \
                       xi_ = vload16(0, (pb) + ((size_t)k_ * 2 + 1) * (mp));             \
            const float2 a0_ = CI_OP(m0_, k_), a1_ = CI_OP(m0_, CI_C + k_);              \
            c0r = fma((ci_w)(a0_.x), xr_, fma((ci_w)(-a0_.y), xi_, c0r));                \
            c0i = fma((ci_w)(a0_.x), xi_, fma((ci_w)(a0_.y), xr_, c0i));                 \
            c1r = fma((ci_w)(a1_.x), xr_, fma((ci_w)(-a1_.y), xi_, c1r));                \
            c1i = fma((ci_w)(a1_.x), xi_, fma((ci_w)(a1_.y), xr_, c1i));                 \
        }                                                                                \
    }

/* (cr, ci) = row r of M times the 16 samples at pb (the rows left over after the tiles of 4) */
#define CI_TILE1(cr, ci, Mp, r, pb, mp)                                                  \
    {                                                                                    \
        cr = ci = (ci_w)(0.0f);                                                          \
        const __global float *m0_ = (Mp) + (r) * CI_C * CI_OS;                           \
        for (uint k_ = 0; k_ < CI_C; k_++) {                                             \
            const ci_w xr_ = vload16(0, (pb) + (size_t)k_ * 2 * (mp)),                   \
                       xi_ = vload16(0, (pb) + ((size_t)k_ * 2 + 1) * (mp));             \
            const float2 a_ = CI_OP(m0_, k_);                                            \
            cr = fma((ci_w)(a_.x), xr_, fma((ci_w)(-a_.y), xi_, cr));                    \
            ci = fma((ci_w)(a_.x), xi_, fma((ci_w)(a_.y), xr_, ci));                     \
        }                                                                                \
    }

/* ---- class norms as quadratic forms --------------------------------------------------------------
 * n_j^2 = sum_p w_p |C_{j,p} v(p)|^2 = sum_p w_p v(p)^H Q_{j,p} v(p) with Q = C^H C = C^2 (C Hermitian):
 * = sum_p sum_i Q'_ii |v_i|^2 + sum_{i>k} Re(Q'_ik conj(v_i) v_k), Q' = w_p Q on the diagonal and 2 w_p Q
 * below it. The sample features conj(v_i) v_k (4 FMAs per pair and 16 lanes) are shared by a group of five
 * classes (2 FMAs per pair, class and 16 lanes): < 3 FMAs per class and pair against 8 for the product C v.
 * Rounding: |Q| ~ alpha^2 where |C v| may be much smaller (a sample in its class's strong directions), so a
 * quadratic form can cancel; tests/test_circulant.c (device_norms_cancellation) checks the memberships in
 * that regime against the double reference, and perf/RESULTS.md has the study. */

/* Q'_t (lower triangle incl. the real diagonal; the same 16-lane layout as the operators) for the class
 * operators t = j P + p < nc = K P; work-item = block of 16 matrices. Q[r][c] = sum_k C[r][k] C[k][c]. */
__kernel void circ_op_square(__global const float *ops, __global float *sq, const uint nc, const uint P,
                             const uint W, const uint Wh)
{
    const uint q = get_global_id(0);
    if ((size_t)q * CI_MW >= nc) return;
    const __global float *A = ops + (size_t)q * CI_C * CI_C * CI_OS;
    __global float *Q = sq + (size_t)q * CI_C * CI_C * CI_OS;
    float wl[CI_MW];
    for (uint l = 0; l < CI_MW; l++) wl[l] = ci_weight((q * CI_MW + l) % P, W, Wh);
    const ci_w wp = vload16(0, wl);
#define CI_AR(i, k) vload16(0, A + ((size_t)(i) * CI_C + (k)) * CI_OS)
#define CI_AI(i, k) vload16(0, A + ((size_t)(i) * CI_C + (k)) * CI_OS + CI_MW)
#define CI_SQACC(sr, si, c)                                                                      \
    br = CI_AR(k, c);                                                                            \
    bi = CI_AI(k, c);                                                                            \
    sr = fma(ar, br, fma(-ai, bi, sr));                                                          \
    si = fma(ar, bi, fma(ai, br, si));
#define CI_SQOUT(sr, si, c)                                                                      \
    {                                                                                            \
        const ci_w f_ = (c) == r ? wp : 2.0f * wp;                                               \
        vstore16(f_ * (sr), 0, Q + ((size_t)r * CI_C + (c)) * CI_OS);                            \
        vstore16((c) == r ? (ci_w)(0.0f) : f_ * (si), 0, Q + ((size_t)r * CI_C + (c)) * CI_OS + CI_MW); \
    }
#if WBCL_SIMD >= 16
    for (uint r = 0; r < CI_C; r++)
        for (uint c0 = 0; c0 <= r; c0 += 4) { /* four columns per pass: row r's entries loaded once for four */
            const uint c1 = min(c0 + 1, r), c2 = min(c0 + 2, r), c3 = min(c0 + 3, r);
            ci_w s0r = (ci_w)(0.0f), s0i = s0r, s1r = s0r, s1i = s0r, s2r = s0r, s2i = s0r, s3r = s0r, s3i = s0r;
            for (uint k = 0; k < CI_C; k++) {
                const ci_w ar = CI_AR(r, k), ai = CI_AI(r, k);
                ci_w br, bi;
                CI_SQACC(s0r, s0i, c0)
                CI_SQACC(s1r, s1i, c1)
                CI_SQACC(s2r, s2i, c2)
                CI_SQACC(s3r, s3i, c3)
            }
            CI_SQOUT(s0r, s0i, c0)
            if (c0 + 1 <= r) CI_SQOUT(s1r, s1i, c0 + 1)
            if (c0 + 2 <= r) CI_SQOUT(s2r, s2i, c0 + 2)
            if (c0 + 3 <= r) CI_SQOUT(s3r, s3i, c0 + 3)
        }
#else /* AVX2 and others: two columns per pass (four need 16 accumulator registers of 16 ymm; two measured
       * 1.1-1.3x faster on a Zen 3) */
    for (uint r = 0; r < CI_C; r++)
        for (uint c0 = 0; c0 <= r; c0 += 2) {
            const uint c1 = min(c0 + 1, r);
            ci_w s0r = (ci_w)(0.0f), s0i = s0r, s1r = s0r, s1i = s0r;
            for (uint k = 0; k < CI_C; k++) {
                const ci_w ar = CI_AR(r, k), ai = CI_AI(r, k);
                ci_w br, bi;
                CI_SQACC(s0r, s0i, c0)
                CI_SQACC(s1r, s1i, c1)
            }
            CI_SQOUT(s0r, s0i, c0)
            if (c0 + 1 <= r) CI_SQOUT(s1r, s1i, c0 + 1)
        }
#endif
#undef CI_SQACC
#undef CI_SQOUT
#undef CI_AR
#undef CI_AI
}

/* Partial norms: part[(ch K + j) mp + l] = sum over the bins p of chunk ch of v_l(p)^H Q'_{j,p} v_l(p);
 * work-item (group of CI_NG classes g, chunk of bins ch), looping over all blocks of 16 lanes (the chunk's Q'
 * are read from memory once and reused from cache). Two accumulators per class (the Re Q Re f and Im Q Im f
 * products) keep the FMA chains independent. circ_softmax adds the chunks. */
#define CI_NG 5
__kernel void circ_norms_q(__global const float *Vt, __global const float *sq, __global float *part, const uint mp,
                           const uint P, const uint K, const uint pchunk)
{
    const uint ng = (K + CI_NG - 1) / CI_NG, gid = get_global_id(0), g = gid % ng, ch = gid / ng, p0 = ch * pchunk;
    if (p0 >= P) return;
    const uint p1 = min(P, p0 + pchunk), j0 = CI_NG * g;
    const uint ja = j0, jb = min(j0 + 1, K - 1), jc = min(j0 + 2, K - 1), jd = min(j0 + 3, K - 1),
               je = min(j0 + 4, K - 1);
    for (uint b0 = 0; b0 < mp; b0 += CI_WW) {
        ci_w a0 = (ci_w)(0.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, b0_ = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0;
        for (uint p = p0; p < p1; p++) {
            const __global float *pb = Vt + (size_t)p * CI_C * 2 * mp + b0;
            const __global float *Q0 = ci_op(sq, (size_t)ja * P + p), *Q1 = ci_op(sq, (size_t)jb * P + p),
                                 *Q2 = ci_op(sq, (size_t)jc * P + p), *Q3 = ci_op(sq, (size_t)jd * P + p),
                                 *Q4 = ci_op(sq, (size_t)je * P + p);
            for (uint i = 0; i < CI_C; i++) {
                const ci_w xr = vload16(0, pb + (size_t)i * 2 * mp), xi = vload16(0, pb + ((size_t)i * 2 + 1) * mp);
                const size_t ri = (size_t)i * CI_C * CI_OS;
                for (uint k = 0; k < i; k++) {
                    const ci_w yr = vload16(0, pb + (size_t)k * 2 * mp), yi = vload16(0, pb + ((size_t)k * 2 + 1) * mp);
                    const ci_w fr = fma(xr, yr, xi * yi), fi = fma(xr, yi, -(xi * yr)); /* conj(v_i) v_k */
                    const size_t e = ri + (size_t)k * CI_OS;
                    a0 = fma((ci_w)(Q0[e]), fr, a0);
                    b0_ = fma((ci_w)(Q0[e + CI_MW]), fi, b0_);
                    a1 = fma((ci_w)(Q1[e]), fr, a1);
                    b1 = fma((ci_w)(Q1[e + CI_MW]), fi, b1);
                    a2 = fma((ci_w)(Q2[e]), fr, a2);
                    b2 = fma((ci_w)(Q2[e + CI_MW]), fi, b2);
                    a3 = fma((ci_w)(Q3[e]), fr, a3);
                    b3 = fma((ci_w)(Q3[e + CI_MW]), fi, b3);
                    a4 = fma((ci_w)(Q4[e]), fr, a4);
                    b4 = fma((ci_w)(Q4[e + CI_MW]), fi, b4);
                }
                const ci_w d = fma(xr, xr, xi * xi);
                const size_t e = ri + (size_t)i * CI_OS;
                a0 = fma((ci_w)(Q0[e]), d, a0);
                a1 = fma((ci_w)(Q1[e]), d, a1);
                a2 = fma((ci_w)(Q2[e]), d, a2);
                a3 = fma((ci_w)(Q3[e]), d, a3);
                a4 = fma((ci_w)(Q4[e]), d, a4);
            }
        }
        __global float *o = part + ((size_t)ch * K + j0) * mp + b0; /* Re(Q f) = Re Q Re f - Im Q Im f */
        vstore16(a0 - b0_, 0, o);
        if (j0 + 1 < K) vstore16(a1 - b1, 0, o + mp);
        if (j0 + 2 < K) vstore16(a2 - b2, 0, o + 2 * (size_t)mp);
        if (j0 + 3 < K) vstore16(a3 - b3, 0, o + 3 * (size_t)mp);
        if (j0 + 4 < K) vstore16(a4 - b4, 0, o + 4 * (size_t)mp);
    }
}
#undef CI_NG

/* Per lane: n_j = max(|c_j|, 1e-8) from the nch chunks of circ_norms_q (added in chunk order) into
 * nrm (mp, K), pi = softmax(-lambda n) (max-subtracted; argmax ties to the lowest class) into pi (mp, K)
 * and yhat, and the update's coefficients coef (K, mp) = gamma_j pi_j (0 on padding lanes, valid[b] < 0). */
__kernel void circ_softmax(__global const float *part, __global float *nrm, __global const float *gamma,
                           __global float *pi, __global int *yhat, __global float *coef, __global const int *valid,
                           const float lambda, const uint mp, const uint K, const uint nch)
{
    const uint b = get_global_id(0);
    if (b >= mp) return;
    __global float *n = nrm + (size_t)b * K;
    for (uint j = 0; j < K; j++) {
        float t = 0.0f;
        for (uint c = 0; c < nch; c++) t += part[((size_t)c * K + j) * mp + b];
        n[j] = fmax(sqrt(fmax(t, 0.0f)), 1e-8f); /* a quadratic form may round below 0 */
    }
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
    /* padding lanes (v = 0, uniform pi) get 0: a block's inactive classes stay skippable */
    const int ok = valid[b] >= 0;
    for (uint j = 0; j < K; j++) coef[(size_t)j * mp + b] = ok ? gamma[j] * pb[j] : 0.0f;
}

/* Work-item (chunk of bins [p0, p0 + pchunk), all blocks of 16 lanes: a bin's matrices are read from
 * memory once and reused from cache by every block): per bin u = v + eta (E^H v - sum_j coef_j C_j^H v)
 * from Vt into Vo (a second buffer: the tile's rows need all of v), and the chunk's weighted |u|^2 per
 * lane into part (nch, mp). Classes whose coefficient is 0 in all 16 lanes of a block (exp underflow)
 * contribute exactly 0 and are skipped. */
__kernel void circ_update(__global const float *Vt, __global float *Vo, __global const float *ops,
                          __global const float *coef, __global float *part, const float eta, const uint mp,
                          const uint P, const uint W, const uint Wh, const uint K, const uint pchunk)
{
    const uint ch = get_global_id(0), p0 = ch * pchunk;
    if (p0 >= P) return;
    const uint p1 = min(P, p0 + pchunk);
    const ci_w e = (ci_w)(eta);
    for (uint b0 = 0; b0 < mp; b0 += CI_WW) vstore16((ci_w)(0.0f), 0, part + (size_t)ch * mp + b0);
    for (uint p = p0; p < p1; p++)
        for (uint b0 = 0; b0 < mp; b0 += CI_WW) {
            const size_t off = (size_t)p * CI_C * 2 * mp + b0;
            const __global float *pb = Vt + off;
            __global float *ob = Vo + off;
            const __global float *Ep = ci_op(ops, (size_t)K * P + p);
            ci_w s = (ci_w)(0.0f);
            uint r = 0;
#define CI_OUT(gr, gi, rr)                                                                       \
    {                                                                                            \
        const ci_w ur_ = fma(e, gr, vload16(0, pb + (size_t)(rr) * 2 * mp)),                     \
                   ui_ = fma(e, gi, vload16(0, pb + ((size_t)(rr) * 2 + 1) * mp));               \
        s = fma(ur_, ur_, fma(ui_, ui_, s));                                                     \
        vstore16(ur_, 0, ob + (size_t)(rr) * 2 * mp);                                            \
        vstore16(ui_, 0, ob + ((size_t)(rr) * 2 + 1) * mp);                                      \
    }
#if WBCL_SIMD >= 16
            for (; r + 4 <= CI_C; r += 4) {
                ci_w g0r, g0i, g1r, g1i, g2r, g2i, g3r, g3i;
                CI_TILE4(g0r, g0i, g1r, g1i, g2r, g2i, g3r, g3i, Ep, r, pb, mp)
                for (uint j = 0; j < K; j++) {
                    const ci_w cf = vload16(0, coef + (size_t)j * mp + b0);
                    if (all(cf == (ci_w)(0.0f))) continue;
                    const __global float *Cp = ci_op(ops, (size_t)j * P + p);
                    ci_w c0r, c0i, c1r, c1i, c2r, c2i, c3r, c3i;
                    CI_TILE4(c0r, c0i, c1r, c1i, c2r, c2i, c3r, c3i, Cp, r, pb, mp)
                    g0r = fma(-cf, c0r, g0r);
                    g0i = fma(-cf, c0i, g0i);
                    g1r = fma(-cf, c1r, g1r);
                    g1i = fma(-cf, c1i, g1i);
                    g2r = fma(-cf, c2r, g2r);
                    g2i = fma(-cf, c2i, g2i);
                    g3r = fma(-cf, c3r, g3r);
                    g3i = fma(-cf, c3i, g3i);
                }
                CI_OUT(g0r, g0i, r)
                CI_OUT(g1r, g1i, r + 1)
                CI_OUT(g2r, g2i, r + 2)
                CI_OUT(g3r, g3i, r + 3)
            }
#endif
            for (; r + 2 <= CI_C; r += 2) { /* the rows left, or all with AVX2 (tiles of 4 spill there) */
                ci_w g0r, g0i, g1r, g1i;
                CI_TILE2(g0r, g0i, g1r, g1i, Ep, r, pb, mp)
                for (uint j = 0; j < K; j++) {
                    const ci_w cf = vload16(0, coef + (size_t)j * mp + b0);
                    if (all(cf == (ci_w)(0.0f))) continue;
                    const __global float *Cp = ci_op(ops, (size_t)j * P + p);
                    ci_w c0r, c0i, c1r, c1i;
                    CI_TILE2(c0r, c0i, c1r, c1i, Cp, r, pb, mp)
                    g0r = fma(-cf, c0r, g0r);
                    g0i = fma(-cf, c0i, g0i);
                    g1r = fma(-cf, c1r, g1r);
                    g1i = fma(-cf, c1i, g1i);
                }
                CI_OUT(g0r, g0i, r)
                CI_OUT(g1r, g1i, r + 1)
            }
            for (; r < CI_C; r++) {
                ci_w gr, gi;
                CI_TILE1(gr, gi, Ep, r, pb, mp)
                for (uint j = 0; j < K; j++) {
                    const ci_w cf = vload16(0, coef + (size_t)j * mp + b0);
                    if (all(cf == (ci_w)(0.0f))) continue;
                    const __global float *Cp = ci_op(ops, (size_t)j * P + p);
                    ci_w cr, ci;
                    CI_TILE1(cr, ci, Cp, r, pb, mp)
                    gr = fma(-cf, cr, gr);
                    gi = fma(-cf, ci, gi);
                }
                CI_OUT(gr, gi, r)
            }
#undef CI_OUT
            __global float *pp = part + (size_t)ch * mp + b0;
            vstore16(fma((ci_w)(ci_weight(p, W, Wh)), s, vload16(0, pp)), 0, pp);
        }
}

/* Work-item (block of 16 lanes, chunk of bins): v <- v / max(|v|, 1e-8), |v|^2 = the sum of the nch
 * partial sums in part (in their order: every chunk scales by the same factor); nch counts the partials,
 * which are circ_update's chunks or, after circ_update_g, its (chunk, tile of rows) pairs. */
__kernel void circ_scale(__global float *Vo, __global const float *part, const uint mp, const uint P,
                         const uint pchunk, const uint nch)
{
    const uint nblk = mp / CI_WW;
    const uint gid = get_global_id(0);
    const uint ch = gid / nblk, b0 = (gid % nblk) * CI_WW, p0 = ch * pchunk;
    if (p0 >= P) return;
    const uint p1 = min(P, p0 + pchunk);
    ci_w t = (ci_w)(0.0f); /* circ_scale keeps work-items (chunk, block): it has no matrices to share */
    for (uint c = 0; c < nch; c++) t += vload16(0, part + (size_t)c * mp + b0);
    const ci_w inv = (ci_w)(1.0f) / fmax(sqrt(t), (ci_w)(1e-8f));
    for (uint p = p0; p < p1; p++) {
        __global float *pb = Vo + (size_t)p * CI_C * 2 * mp + b0;
        for (uint i = 0; i < 2 * CI_C; i++) vstore16(inv * vload16(0, pb + (size_t)i * mp), 0, pb + (size_t)i * mp);
    }
}

/* ---- GPU-shaped application: one sample lane per work-item ----------------------------------------
 * The kernels above give each work-item 16 lanes and a long loop (a few dozen work-items per launch: the
 * cores of a CPU). A GPU wants tens of thousands of work-items, each a short scalar loop: the variants
 * below keep the layouts (Vt, the operators in batch lanes, part, npart), so circ_softmax and circ_scale
 * are shared; the host picks them on GPU-shaped contexts and sizes the chunks of bins for them
 * (host/ops/circulant.c, ws_alloc). Work-items with consecutive lanes read consecutive floats of Vt
 * (coalesced) and the same matrix entry (one broadcast load). Measured on an H200 (perf/RESULTS.md). */

/* circ_op_square, one (matrix t < nc, row r) per work-item: Q'_t[r][c] for c <= r, the same values and
 * layout (w_p on the diagonal, 2 w_p below it, a real diagonal); entries in pairs of columns. */
__kernel void circ_op_square_g(__global const float *ops, __global float *sq, const uint nc, const uint P,
                               const uint W, const uint Wh)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)nc * CI_C) return;
    const uint t = (uint)(gid % nc), r = (uint)(gid / nc);
    const __global float *A = ci_op(ops, t);
    __global float *Q = sq + (ci_op(sq, t) - sq);
    const float w = ci_weight(t % P, W, Wh);
    uint c = 0;
    for (; c < r; c += 2) { /* entries c and c + 1 (<= r) together: four chains, each a[k] loaded once */
        const uint c1 = c + 1;
        float sr = 0.0f, si = 0.0f, ur = 0.0f, ui = 0.0f;
        for (uint k = 0; k < CI_C; k++) {
            const float2 a = CI_OP(A, r * CI_C + k), b = CI_OP(A, k * CI_C + c), d = CI_OP(A, k * CI_C + c1);
            sr = fma(a.x, b.x, fma(-a.y, b.y, sr));
            si = fma(a.x, b.y, fma(a.y, b.x, si));
            ur = fma(a.x, d.x, fma(-a.y, d.y, ur));
            ui = fma(a.x, d.y, fma(a.y, d.x, ui));
        }
        Q[(size_t)(r * CI_C + c) * CI_OS] = 2.0f * w * sr;
        Q[(size_t)(r * CI_C + c) * CI_OS + CI_MW] = 2.0f * w * si;
        const float f = c1 == r ? w : 2.0f * w;
        Q[(size_t)(r * CI_C + c1) * CI_OS] = f * ur;
        Q[(size_t)(r * CI_C + c1) * CI_OS + CI_MW] = c1 == r ? 0.0f : f * ui;
    }
    if (c == r) { /* the diagonal, where r is even */
        float sr = 0.0f;
        for (uint k = 0; k < CI_C; k++) {
            const float2 a = CI_OP(A, r * CI_C + k), b = CI_OP(A, k * CI_C + c);
            sr = fma(a.x, b.x, fma(-a.y, b.y, sr));
        }
        Q[(size_t)(r * CI_C + c) * CI_OS] = w * sr;
        Q[(size_t)(r * CI_C + c) * CI_OS + CI_MW] = 0.0f;
    }
}

/* circ_norms_q, one (lane l, class j, chunk of bins ch) per work-item: part[(ch K + j) mp + l] = sum over the
 * chunk's bins of v_l(p)^H Q'_{j,p} v_l(p), as the two sums (Re Q Re f and Im Q Im f) there. Rows i go in
 * pairs (i, i + 1) that share each loaded v_k, k < i, with their own accumulators (four chains instead of
 * two); the even rows' and the odd rows' sums are added at the end, so the rounding differs from
 * circ_norms_q's row-by-row order (tests/test_circulant.c device_norms_cancellation checks the
 * memberships in the regime where the quadratic form cancels). */
__kernel void circ_norms_q_g(__global const float *Vt, __global const float *sq, __global float *part,
                             const uint mp, const uint P, const uint K, const uint pchunk)
{
    const size_t gid = get_global_id(0);
    const uint l = (uint)(gid % mp), j = (uint)((gid / mp) % K), ch = (uint)(gid / ((size_t)mp * K)),
               p0 = ch * pchunk;
    if (p0 >= P) return;
    const uint p1 = min(P, p0 + pchunk);
    float a0 = 0.0f, b0 = 0.0f, a1 = 0.0f, b1 = 0.0f;
    for (uint p = p0; p < p1; p++) {
        const __global float *pb = Vt + (size_t)p * CI_C * 2 * mp + l;
        const __global float *Q = ci_op(sq, (size_t)j * P + p);
        uint i = 0;
        for (; i + 2 <= CI_C; i += 2) {
            const float xr = pb[(size_t)i * 2 * mp], xi = pb[((size_t)i * 2 + 1) * mp];
            const float zr = pb[(size_t)(i + 1) * 2 * mp], zi = pb[((size_t)(i + 1) * 2 + 1) * mp];
            for (uint k = 0; k < i; k++) {
                const float yr = pb[(size_t)k * 2 * mp], yi = pb[((size_t)k * 2 + 1) * mp];
                const float2 q = CI_OP(Q, i * CI_C + k), u = CI_OP(Q, (i + 1) * CI_C + k);
                a0 = fma(q.x, fma(xr, yr, xi * yi), a0);  /* Re conj(v_i) v_k */
                b0 = fma(q.y, fma(xr, yi, -(xi * yr)), b0); /* Im conj(v_i) v_k */
                a1 = fma(u.x, fma(zr, yr, zi * yi), a1);
                b1 = fma(u.y, fma(zr, yi, -(zi * yr)), b1);
            }
            a0 = fma(Q[(size_t)(i * CI_C + i) * CI_OS], fma(xr, xr, xi * xi), a0);
            const float2 u = CI_OP(Q, (i + 1) * CI_C + i); /* row i + 1, k = i */
            a1 = fma(u.x, fma(zr, xr, zi * xi), a1);
            b1 = fma(u.y, fma(zr, xi, -(zi * xr)), b1);
            a1 = fma(Q[(size_t)((i + 1) * CI_C + i + 1) * CI_OS], fma(zr, zr, zi * zi), a1);
        }
        if (i < CI_C) { /* the last row of an odd C */
            const float xr = pb[(size_t)i * 2 * mp], xi = pb[((size_t)i * 2 + 1) * mp];
            for (uint k = 0; k < i; k++) {
                const float yr = pb[(size_t)k * 2 * mp], yi = pb[((size_t)k * 2 + 1) * mp];
                const float2 q = CI_OP(Q, i * CI_C + k);
                a0 = fma(q.x, fma(xr, yr, xi * yi), a0);
                b0 = fma(q.y, fma(xr, yi, -(xi * yr)), b0);
            }
            a0 = fma(Q[(size_t)(i * CI_C + i) * CI_OS], fma(xr, xr, xi * xi), a0);
        }
    }
    part[((size_t)ch * K + j) * mp + l] = (a0 + a1) - (b0 + b1);
}

/* Rows r .. r + 3 of the operator M (batch-lane layout) times one lane's C-vector at pb (stride 2 mp), into
 * g[0..3] (re, im): each row's sum in k order with the same fma nesting as a row alone, the four rows'
 * sums interleaved (eight independent chains instead of two) and each x_k loaded once for the four. */
static inline void ci_rows4_times(const __global float *M, const uint r, const __global float *pb, const uint mp,
                                  float2 *g)
{
    float g0r = 0.0f, g0i = 0.0f, g1r = 0.0f, g1i = 0.0f, g2r = 0.0f, g2i = 0.0f, g3r = 0.0f, g3i = 0.0f;
    for (uint k = 0; k < CI_C; k++) {
        const float xr = pb[(size_t)k * 2 * mp], xi = pb[((size_t)k * 2 + 1) * mp];
        const float2 a0 = CI_OP(M, r * CI_C + k), a1 = CI_OP(M, (r + 1) * CI_C + k),
                     a2 = CI_OP(M, (r + 2) * CI_C + k), a3 = CI_OP(M, (r + 3) * CI_C + k);
        g0r = fma(a0.x, xr, fma(-a0.y, xi, g0r));
        g0i = fma(a0.x, xi, fma(a0.y, xr, g0i));
        g1r = fma(a1.x, xr, fma(-a1.y, xi, g1r));
        g1i = fma(a1.x, xi, fma(a1.y, xr, g1i));
        g2r = fma(a2.x, xr, fma(-a2.y, xi, g2r));
        g2i = fma(a2.x, xi, fma(a2.y, xr, g2i));
        g3r = fma(a3.x, xr, fma(-a3.y, xi, g3r));
        g3i = fma(a3.x, xi, fma(a3.y, xr, g3i));
    }
    g[0] = (float2)(g0r, g0i);
    g[1] = (float2)(g1r, g1i);
    g[2] = (float2)(g2r, g2i);
    g[3] = (float2)(g3r, g3i);
}

/* Row r of the operator M (batch-lane layout) times one lane's C-vector at pb (stride 2 mp): (re, im). */
static inline float2 ci_row_times(const __global float *M, const uint r, const __global float *pb, const uint mp)
{
    float gr = 0.0f, gi = 0.0f;
    for (uint k = 0; k < CI_C; k++) {
        const float xr = pb[(size_t)k * 2 * mp], xi = pb[((size_t)k * 2 + 1) * mp];
        const float2 a = CI_OP(M, r * CI_C + k);
        gr = fma(a.x, xr, fma(-a.y, xi, gr));
        gi = fma(a.x, xi, fma(a.y, xr, gi));
    }
    return (float2)(gr, gi);
}

/* circ_update, one (lane l, tile of rows q, chunk of bins ch) per work-item: per bin the rows 4 q .. 4 q + 3
 * (fewer in the last tile of a C that is not a multiple of 4) of u = v + eta (E v - sum_j coef_j C_j v) (the
 * operators are Hermitian: M^H v = M v) from Vt into Vo, and the tile's weighted |u|^2 over the chunk's bins
 * into part[(ch nrt + q) mp + l] (nrt = ceil(C / 4) tiles; circ_scale sums the nch nrt partials in that
 * order). A class whose coefficient is 0 in this lane contributes exactly 0 and is skipped. A full tile
 * goes through ci_rows4_times (eight independent chains), a partial one row by row; every row's value is
 * the same as one row at a time would give. The tiles multiply the work-items by nrt (5 at C = 20): one
 * (lane, chunk) per work-item left an H200 with under 3 warps per SM, bound by the loads' latency. */
__kernel void circ_update_g(__global const float *Vt, __global float *Vo, __global const float *ops,
                            __global const float *coef, __global float *part, const float eta, const uint mp,
                            const uint P, const uint W, const uint Wh, const uint K, const uint pchunk)
{
    const uint nrt = (CI_C + 3) / 4;
    const size_t gid = get_global_id(0);
    const uint l = (uint)(gid % mp), q0 = (uint)((gid / mp) % nrt), ch = (uint)(gid / ((size_t)mp * nrt)),
               p0 = ch * pchunk;
    if (p0 >= P) return;
    const uint p1 = min(P, p0 + pchunk), r0 = 4 * q0;
    float tot = 0.0f;
    for (uint p = p0; p < p1; p++) {
        const size_t off = (size_t)p * CI_C * 2 * mp + l;
        const __global float *pb = Vt + off;
        __global float *ob = Vo + off;
        const __global float *Ep = ci_op(ops, (size_t)K * P + p);
        float s = 0.0f;
        if (r0 + 4 <= CI_C) {
            float2 g[4], c[4];
            ci_rows4_times(Ep, r0, pb, mp, g);
            for (uint j = 0; j < K; j++) {
                const float cf = coef[(size_t)j * mp + l];
                if (cf == 0.0f) continue;
                ci_rows4_times(ci_op(ops, (size_t)j * P + p), r0, pb, mp, c);
                for (uint q = 0; q < 4; q++) g[q] = fma((float2)(-cf), c[q], g[q]);
            }
            for (uint q = 0; q < 4; q++) {
                const float ur = fma(eta, g[q].x, pb[(size_t)(r0 + q) * 2 * mp]),
                            ui = fma(eta, g[q].y, pb[((size_t)(r0 + q) * 2 + 1) * mp]);
                s = fma(ur, ur, fma(ui, ui, s));
                ob[(size_t)(r0 + q) * 2 * mp] = ur;
                ob[((size_t)(r0 + q) * 2 + 1) * mp] = ui;
            }
        } else {
            for (uint r = r0; r < CI_C; r++) {
                float2 g = ci_row_times(Ep, r, pb, mp);
                for (uint j = 0; j < K; j++) {
                    const float cf = coef[(size_t)j * mp + l];
                    if (cf == 0.0f) continue;
                    g = fma((float2)(-cf), ci_row_times(ci_op(ops, (size_t)j * P + p), r, pb, mp), g);
                }
                const float ur = fma(eta, g.x, pb[(size_t)r * 2 * mp]),
                            ui = fma(eta, g.y, pb[((size_t)r * 2 + 1) * mp]);
                s = fma(ur, ur, fma(ui, ui, s));
                ob[(size_t)r * 2 * mp] = ur;
                ob[((size_t)r * 2 + 1) * mp] = ui;
            }
        }
        tot = fma(ci_weight(p, W, Wh), s, tot);
    }
    part[((size_t)ch * nrt + q0) * mp + l] = tot;
}

/* circ_scale, one (lane l, chunk of bins ch) per work-item (the GPU variant's; circ_scale gives a work-item
 * 16 lanes and a chunk): v <- v / max(|v|, 1e-8) over the chunk's bins, |v|^2 = the sum of the nch
 * partial sums in their order, as there: the same values. */
__kernel void circ_scale_g(__global float *Vo, __global const float *part, const uint mp, const uint P,
                           const uint pchunk, const uint nch)
{
    const size_t gid = get_global_id(0);
    const uint l = (uint)(gid % mp), ch = (uint)(gid / mp), p0 = ch * pchunk;
    if (p0 >= P) return;
    const uint p1 = min(P, p0 + pchunk);
    float t = 0.0f;
    for (uint c = 0; c < nch; c++) t += part[(size_t)c * mp + l];
    const float inv = 1.0f / fmax(sqrt(t), 1e-8f);
    for (uint p = p0; p < p1; p++) {
        __global float *pb = Vo + (size_t)p * CI_C * 2 * mp + l;
        for (uint i = 0; i < 2 * CI_C; i++) pb[(size_t)i * mp] *= inv;
    }
}

/* M[r][c] = a (sr + i si) and M[c][r] its conjugate (the diagonal real), M in the batch-lane layout at
 * the matrix's lane: the inverse kernels' last step. */
static inline void ci_store_m(__global float *Mq, const uint r, const uint c, const float a, const float sr,
                              const float si)
{
    const float mr = a * sr, mi = c == r ? 0.0f : a * si;
    Mq[((size_t)r * CI_C + c) * 2 * CI_MW] = mr;
    Mq[((size_t)r * CI_C + c) * 2 * CI_MW + CI_MW] = mi;
    if (c != r) {
        Mq[((size_t)c * CI_C + r) * 2 * CI_MW] = mr;
        Mq[((size_t)c * CI_C + r) * 2 * CI_MW + CI_MW] = -mi;
    }
}

/* circ_shifted_inverse, one matrix per work-item t < nb rounded up to 16 (the lanes past nb of the last
 * block get A = I and M = 0, as there): the same operations in the same order on one lane. */
#define CG_RE(X, i, k) (X)[((size_t)(i) * CI_C + (k)) * 2 * CI_MW]
#define CG_IM(X, i, k) (X)[((size_t)(i) * CI_C + (k)) * 2 * CI_MW + CI_MW]
__kernel void circ_shifted_inverse_g(__global float *S, __global const float *alpha, const uint P, const uint nb,
                                     __global float *logdet, __global int *info, const uint want_inv,
                                     __global float *M, const uint ld_off, const uint info_off,
                                     __global const int *skip, const uint skip_off)
{
    if (skip[skip_off]) return;
    const uint t = get_global_id(0);
    if (t >= (nb + CI_MW - 1) / CI_MW * CI_MW) return;
    const float a = t < nb ? alpha[t / P] : 0.0f;
    const size_t off = (size_t)(t / CI_MW) * CI_C * CI_C * 2 * CI_MW + t % CI_MW;
    __global float *A = S + off, *Mq = M + off;
    for (uint i = 0; i < CI_C; i++) {
        for (uint k = 0; k < i; k++) {
            CG_RE(A, i, k) *= a;
            CG_IM(A, i, k) *= a;
        }
        CG_RE(A, i, i) = fma(a, CG_RE(A, i, i), 1.0f);
        CG_IM(A, i, i) = 0.0f;
    }
    int fail = -1;
    float fval = 0.0f, ld = 0.0f;
    for (uint j = 0; j < CI_C; j++) {
        float d = CG_RE(A, j, j);
        for (uint k = 0; k < j; k++) {
            const float xr = CG_RE(A, j, k), xi = CG_IM(A, j, k);
            d = fma(-xr, xr, fma(-xi, xi, d));
        }
        if ((!isgreater(d, 0.0f) || isinf(d)) && fail < 0) {
            fail = (int)j;
            fval = d;
        }
        const float ljj = sqrt(d), inv = 1.0f / ljj;
        CG_RE(A, j, j) = ljj;
        ld += log(ljj);
        for (uint i = j + 1; i < CI_C; i++) {
            float sr = CG_RE(A, i, j), si = CG_IM(A, i, j);
            for (uint k = 0; k < j; k++) {
                const float ar = CG_RE(A, i, k), ai = CG_IM(A, i, k), br = CG_RE(A, j, k), bi = CG_IM(A, j, k);
                sr = fma(-ar, br, fma(-ai, bi, sr));
                si = fma(-ai, br, fma(ar, bi, si));
            }
            CG_RE(A, i, j) = sr * inv;
            CG_IM(A, i, j) = si * inv;
        }
    }
    if (t < nb) {
        logdet[ld_off + t] = 2.0f * ld;
        if (fail >= 0 && a > 0.0f && info[info_off + 2 * t] < 0) {
            info[info_off + 2 * t] = fail;
            info[info_off + 2 * t + 1] = as_int(fval);
        }
    }
    if (!want_inv) return;
    for (uint i = 0; i < CI_C; i++) { /* X = L^-1 in place, as there */
        const float xii = 1.0f / CG_RE(A, i, i);
        for (uint j = 0; j < i; j++) {
            float sr = 0.0f, si = 0.0f;
            for (uint k = j; k < i; k++) {
                const float ar = CG_RE(A, i, k), ai = CG_IM(A, i, k), br = CG_RE(A, k, j), bi = CG_IM(A, k, j);
                sr = fma(ar, br, fma(-ai, bi, sr));
                si = fma(ar, bi, fma(ai, br, si));
            }
            CG_RE(A, i, j) = -xii * sr;
            CG_IM(A, i, j) = -xii * si;
        }
        CG_RE(A, i, i) = xii;
    }
    for (uint r = 0; r < CI_C; r++) /* M = a X^H X, the lower entry computed, the upper its conjugate */
        for (uint c = 0; c <= r; c++) {
            float sr = 0.0f, si = 0.0f;
            for (uint k = r; k < CI_C; k++) {
                const float ar = CG_RE(A, k, c), ai = CG_IM(A, k, c), br = CG_RE(A, k, r), bi = CG_IM(A, k, r);
                sr = fma(ar, br, fma(ai, bi, sr));
                si = fma(ai, br, fma(-ar, bi, si));
            }
            ci_store_m(Mq, r, c, a, sr, si);
        }
}
#undef CG_RE
#undef CG_IM

/* ---- GPU-shaped, one matrix (or one bin) per work-group ------------------------------------------
 * The kernels above give a GPU one work-item per matrix: (K+1) P of them (1111 for the 1-D case of
 * perf/RESULTS.md), a few warps per compute unit, each a long chain of dependent global loads. The two
 * below spread one matrix's (one bin's) work over a work-group instead; the host takes them where the
 * device has the work-group size and local memory (host/ops/circulant_pipeline.c), the kernels above
 * otherwise. Each entry is computed by the same operations in the same order as there, so the results
 * are the same bit for bit (tests/test_circulant.c checks the variants against each other). */
#define CI_WG 64 /* work-items per matrix in circ_shifted_inverse_wg */

/* circ_shifted_inverse, one matrix t < nb rounded up to 16 per work-group of CI_WG (the lanes past nb get
 * A = I and M = 0, as there). The matrix sits in local memory, Aw[i C + k] = (re, im); work-item i owns
 * row i (C <= CI_WG: WBCL_CIRCULANT_MAX_CHANNELS = 64):
 * - Cholesky, right-looking: per column j every work-item reads the pivot d = A[j][j], the rows below it
 *   scale their entry in column j by 1 / sqrt(d), a barrier, then update their entries in the trailing
 *   lower triangle with column j, a barrier. Entry (i, k) receives the terms of columns 0, 1, ... in that
 *   order, as Crout's sum over k < j in circ_shifted_inverse_g, with the same fma nesting.
 * - X = L^-1 row by row: row i's entries X[i][j], j < i, by work-items j (one barrier per row), each the
 *   same sum as there; X[i][j] goes to the free upper triangle at (j, i) and the diagonal 1 / L[i][i] to
 *   xd[i], so L's lower triangle stays intact for the rows below.
 * - M = a X^H X: row r's lower entries by work-item r, each written with its conjugate mirror.
 * Work is given out by row, each work-item's condition enclosing its loops: PoCL 3.1 (the CPU device the
 * GPU variant is tested on) ran the guarded body of `for (e = lid; e < n; e += CI_WG)`, and of a guard
 * inside a loop of uniform trip count, in every work-item of a kernel with barriers (seen with C = 3:
 * stores past the buffer), so no loop here spreads entries over the work-items. */
#define CW(i, k) Aw[(i) * CI_C + (k)]
#define CG_RE(X, i, k) (X)[((size_t)(i) * CI_C + (k)) * 2 * CI_MW]
#define CG_IM(X, i, k) (X)[((size_t)(i) * CI_C + (k)) * 2 * CI_MW + CI_MW]
#if CI_C > CI_WG
#error "circ_shifted_inverse_wg: CI_C must be at most CI_WG (a row per work-item)"
#endif
__kernel __attribute__((reqd_work_group_size(CI_WG, 1, 1))) void
circ_shifted_inverse_wg(__global float *S, __global const float *alpha, const uint P, const uint nb,
                        __global float *logdet, __global int *info, const uint want_inv, __global float *M,
                        const uint ld_off, const uint info_off, __global const int *skip, const uint skip_off)
{
    __local float2 Aw[CI_C * CI_C];
    __local float xd[CI_C];
    if (skip[skip_off]) return; /* the whole work-group returns: no barrier is left waiting */
    const uint t = get_group_id(0), r = get_local_id(0); /* r: this work-item's row */
    const float a = t < nb ? alpha[t / P] : 0.0f;
    const size_t off = (size_t)(t / CI_MW) * CI_C * CI_C * 2 * CI_MW + t % CI_MW;
    __global float *A = S + off, *Mq = M + off;
    if (r < CI_C) { /* A = I + a S, lower triangle */
        for (uint k = 0; k < r; k++) CW(r, k) = (float2)(a * CG_RE(A, r, k), a * CG_IM(A, r, k));
        CW(r, r) = (float2)(fma(a, CG_RE(A, r, r), 1.0f), 0.0f);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    int fail = -1;
    float fval = 0.0f, ld = 0.0f;
    for (uint j = 0; j < CI_C; j++) {
        const float d = CW(j, j).x;
        const float ljj = sqrt(d), inv = 1.0f / ljj;
        if (r == 0) {
            if ((!isgreater(d, 0.0f) || isinf(d)) && fail < 0) {
                fail = (int)j;
                fval = d;
            }
            ld += log(ljj);
        }
        if (r > j && r < CI_C) CW(r, j) *= inv;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (r == j) CW(j, j).x = ljj; /* the update below reads only columns > j */
        if (r > j && r < CI_C) {
            const float2 x = CW(r, j);
            for (uint k = j + 1; k < r; k++) {
                const float2 y = CW(k, j);
                float2 s = CW(r, k);
                s.x = fma(-x.x, y.x, fma(-x.y, y.y, s.x));
                s.y = fma(-x.y, y.x, fma(x.x, y.y, s.y));
                CW(r, k) = s;
            }
            CW(r, r).x = fma(-x.x, x.x, fma(-x.y, x.y, CW(r, r).x));
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (r == 0 && t < nb) {
        logdet[ld_off + t] = 2.0f * ld;
        if (fail >= 0 && a > 0.0f && info[info_off + 2 * t] < 0) {
            info[info_off + 2 * t] = fail;
            info[info_off + 2 * t + 1] = as_int(fval);
        }
    }
    if (!want_inv) return; /* uniform */
    for (uint i = 0; i < CI_C; i++) {
        const float xii = 1.0f / CW(i, i).x;
        if (r < i) { /* X[i][r] */
            float sr = 0.0f, si = 0.0f;
            for (uint k = r; k < i; k++) {
                const float2 l = CW(i, k), x = k == r ? (float2)(xd[r], 0.0f) : CW(r, k);
                sr = fma(l.x, x.x, fma(-l.y, x.y, sr));
                si = fma(l.x, x.y, fma(l.y, x.x, si));
            }
            CW(r, i) = (float2)(-xii * sr, -xii * si);
        }
        if (r == i) xd[i] = xii;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (r < CI_C)
        for (uint c = 0; c <= r; c++) {
            float sr = 0.0f, si = 0.0f;
            for (uint k = r; k < CI_C; k++) { /* X[k][c] conj(X[k][r]) */
                const float2 x = k == c ? (float2)(xd[c], 0.0f) : CW(c, k);
                const float2 y = k == r ? (float2)(xd[r], 0.0f) : CW(r, k);
                sr = fma(x.x, y.x, fma(x.y, y.y, sr));
                si = fma(x.y, y.x, fma(-x.x, y.y, si));
            }
            ci_store_m(Mq, r, c, a, sr, si);
        }
}
#undef CW
#undef CG_RE
#undef CG_IM

/* circ_gram, one bin p per work-group (any size; the host takes 128), one lower-triangle entry (c, d) of the
 * bin's K + 1 matrices per work-item: the bin's spectra (2 C rows of mp floats) are read by the whole
 * work-group, from cache after the first. The sums are circ_gram's (blocks of 8 lanes in float8, the
 * horizontal sum, the class sums added in class order), so the entries are the same bit for bit. */
__kernel void circ_gram_g(__global const float *Vt, __global const float *mask, __global const int *boff,
                          __global const int *blocks, __global float *S, const uint mp, const uint P, const uint K,
                          __global const int *skip, const uint skip_off)
{
    if (skip[skip_off]) return;
    const uint p = get_group_id(0), lid = get_local_id(0), wg = get_local_size(0);
    if (p >= P) return;
    const __global float *base = Vt + (size_t)p * CI_C * 2 * mp;
    for (uint e = lid; e < CI_C * (CI_C + 1) / 2; e += wg) {
        uint c = (uint)((sqrt(8.0f * (float)e + 1.0f) - 1.0f) * 0.5f); /* e = c (c + 1) / 2 + d, d <= c */
        while (c * (c + 1) / 2 > e) c--;
        while ((c + 1) * (c + 2) / 2 <= e) c++;
        const uint d = e - c * (c + 1) / 2;
        const __global float *xr = base + (size_t)c * 2 * mp, *xi = xr + mp;
        const __global float *yr = base + (size_t)d * 2 * mp, *yi = yr + mp;
        float tr = 0.0f, ti = 0.0f;
        for (uint j = 0; j < K; j++) {
            const __global float *mk = mask + (size_t)j * mp;
            ci_v ar = (ci_v)(0.0f), ai = ar;
            for (int q = boff[j]; q < boff[j + 1]; q++) {
                const uint b = (uint)blocks[q] * CI_VW;
                const ci_v w = vload8(0, mk + b), pr = w * vload8(0, xr + b), pi_ = w * vload8(0, xi + b);
                const ci_v qr = vload8(0, yr + b), qi = vload8(0, yi + b);
                ar = fma(pr, qr, fma(pi_, qi, ar)); /* x conj(y) */
                ai = fma(pi_, qr, fma(-pr, qi, ai));
            }
            const float er = ci_hsum(ar), ei = ci_hsum(ai);
            const size_t t = (size_t)j * P + p;
            __global float *s = S + ((t / CI_MW) * CI_C * CI_C + (size_t)c * CI_C + d) * 2 * CI_MW + t % CI_MW;
            s[0] = er;
            s[CI_MW] = ei;
            tr += er;
            ti += ei;
        }
        const size_t t = (size_t)K * P + p;
        __global float *s = S + ((t / CI_MW) * CI_C * CI_C + (size_t)c * CI_C + d) * 2 * CI_MW + t % CI_MW;
        s[0] = tr;
        s[CI_MW] = ti;
    }
}
