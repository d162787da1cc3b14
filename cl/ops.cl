/* wbcl — basic operators: elementwise (gelu, relu, scale, axpby, add with
 * broadcasting), row ops over the last dimension (layernorm, softmax,
 * reduce_rows) and column reductions (reduce_cols).
 *
 * Two shapes of every row/column kernel (host/ops/basic.c picks by variant):
 *   *_cpu  one work-item per row (or per row block x column chunk), streaming
 *          contiguous memory with explicit float16 vectors, no local memory,
 *          no barriers (PoCL vectorizes only what the kernel spells out when
 *          the kernel has loops of its own; see PERF-NOTES.md).
 *   *_gpu  one work-group per row with a local-memory tree reduction of
 *          get_local_size(0) (a power of two, at most WBCL_REDUCE_WG), and 2-D
 *          tiles for column reductions (work-items over columns: coalesced).
 * Elementwise kernels are the same for both variants (one element per
 * work-item); the host picks the local size (WBCL_WG).
 *
 * Indices are size_t / ulong throughout: tensors may exceed 2^31 elements.
 * Accumulation: float32 partials in blocks (CPU: 16 lanes x 16 vectors per
 * block, blocks combined with Kahan compensation; GPU: strided partials then
 * a log2 tree), so the rounding error grows with the block length and the
 * number of levels, not with the row length. */

#define WBCL_V 16       /* vector width of the CPU row kernels           */
#define WBCL_VBLOCK 16  /* float16 vectors summed per level-1 block     */
#define WBCL_CW 64      /* columns per work-item in the CPU column kernels */

/* ------------------------------------------------------------------------- */
/* elementwise                                                               */
/* ------------------------------------------------------------------------- */

/* erfc(z) for 8 lanes: Numerical Recipes' erfcc (a Chebyshev fit of erfc(z) exp(z^2) in
 * t = 1 / (1 + |z|/2)), fractional error < 1.2e-7 for every z, so the relative accuracy holds in
 * the tail; one exp, one division, no branch, so it vectorizes. (OpenCL's erfc is a scalar
 * library call per element on PoCL, ~40 ns: 4M elements took 170 ms.) */
inline float8 wbcl_erfc8(const float8 z)
{
    const float8 a = fabs(z);
    const float8 t = 1.0f / fma((float8)(0.5f), a, (float8)(1.0f));
    float8 p = fma(t, (float8)(0.17087277f), (float8)(-0.82215223f));
    p = fma(t, p, (float8)(1.48851587f));
    p = fma(t, p, (float8)(-1.13520398f));
    p = fma(t, p, (float8)(0.27886807f));
    p = fma(t, p, (float8)(-0.18628806f));
    p = fma(t, p, (float8)(0.09678418f));
    p = fma(t, p, (float8)(0.37409196f));
    p = fma(t, p, (float8)(1.00002368f));
    p = fma(t, p, (float8)(-1.26551223f));
    const float8 r = t * exp(p - a * a);
    return select(r, 2.0f - r, z < 0.0f); /* erfc(-a) = 2 - erfc(a) */
}

/* Exact GELU: 0.5 x (1 + erf(x / sqrt 2)), written as 0.5 x erfc(-x / sqrt 2)
 * (the same function): for x << 0, 1 + erf(.) cancels catastrophically in
 * float32 while erfc keeps its relative accuracy. 8 elements per work-item
 * (global ceil(n / 8)); in place (x == y) is fine. */
__kernel void wbcl_ew_gelu(__global const float *x, __global float *y, const ulong n)
{
    const ulong i = (ulong)get_global_id(0) * 8;
    if (i >= n) return;
    if (i + 8 <= n) {
        const float8 v = vload8(0, x + i);
        vstore8(0.5f * v * wbcl_erfc8(-v * M_SQRT1_2_F), 0, y + i);
    } else {
        for (ulong j = i; j < n; j++) {
            const float8 v = (float8)(x[j]);
            y[j] = (0.5f * v * wbcl_erfc8(-v * M_SQRT1_2_F)).s0;
        }
    }
}

/* NaN propagates (NaN < 0 is false). */
__kernel void wbcl_ew_relu(__global const float *x, __global float *y, const ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n) {
        const float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;
    }
}

__kernel void wbcl_ew_scale(__global const float *x, const float alpha, __global float *y, const ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n) y[i] = alpha * x[i];
}

__kernel void wbcl_ew_axpby(const float alpha, __global const float *x, const float beta, __global float *y,
                            const ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n) y[i] = alpha * x[i] + beta * y[i];
}

__kernel void wbcl_ew_add(__global const float *a, __global const float *b, __global float *y, const ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n) y[i] = a[i] + b[i];
}

/* y[r, c] = a[r, c] + b[c] on the (rows, nb) view: dimension 0 runs over the
 * nb columns (contiguous, vectorizable), dimension 1 over rows. */
__kernel void wbcl_ew_add_bcast(__global const float *a, __global const float *b, __global float *y, const ulong nb,
                                const ulong rows)
{
    const size_t c = get_global_id(0), r = get_global_id(1);
    if (c < nb && r < rows) {
        const size_t i = r * nb + c;
        y[i] = a[i] + b[c];
    }
}

/* ------------------------------------------------------------------------- */
/* CPU-shaped row helpers: one work-item streams one contiguous row           */
/* ------------------------------------------------------------------------- */

inline float wbcl_hmax16(const float16 v)
{
    const float8 a = fmax(v.lo, v.hi);
    const float4 b = fmax(a.lo, a.hi);
    const float2 c = fmax(b.lo, b.hi);
    return fmax(c.x, c.y);
}

/* tot += v with Kahan compensation (no finite-math flags: it stays exact). */
#define WBCL_KAHAN16(tot, comp, v)              \
    do {                                        \
        const float16 ky_ = (v) - (comp);       \
        const float16 kt_ = (tot) + ky_;        \
        (comp) = (kt_ - (tot)) - ky_;           \
        (tot) = kt_;                            \
    } while (0)

/* Sum of p[i] (sq == 0) or p[i]^2 (sq == 1), i < d. `sq` is a constant at
 * every call site, so the branch folds away. */
inline float wbcl_row_sum(__global const float *p, const ulong d, const int sq)
{
    const ulong nv = d / WBCL_V;
    float16 tot = 0.0f, comp = 0.0f;
    ulong v = 0;
    while (v < nv) {
        const ulong end = min(nv, v + WBCL_VBLOCK);
        float16 blk = 0.0f;
        for (; v < end; v++) {
            const float16 t = vload16(v, p);
            blk += sq ? t * t : t;
        }
        WBCL_KAHAN16(tot, comp, blk);
    }
    float tail = 0.0f;
    for (ulong i = nv * WBCL_V; i < d; i++) tail += sq ? p[i] * p[i] : p[i];
    return wbcl_hsum16(tot) + tail;
}

inline float wbcl_row_max(__global const float *p, const ulong d)
{
    const ulong nv = d / WBCL_V;
    float16 m = -INFINITY;
    for (ulong v = 0; v < nv; v++) m = fmax(m, vload16(v, p));
    float t = wbcl_hmax16(m);
    for (ulong i = nv * WBCL_V; i < d; i++) t = fmax(t, p[i]);
    return t;
}

/* s1 = sum (p - m), s2 = sum (p - m)^2. */
inline void wbcl_row_dev(__global const float *p, const ulong d, const float m, float *s1, float *s2)
{
    const ulong nv = d / WBCL_V;
    float16 t1 = 0.0f, c1 = 0.0f, t2 = 0.0f, c2 = 0.0f;
    ulong v = 0;
    while (v < nv) {
        const ulong end = min(nv, v + WBCL_VBLOCK);
        float16 b1 = 0.0f, b2 = 0.0f;
        for (; v < end; v++) {
            const float16 e = vload16(v, p) - m;
            b1 += e;
            b2 += e * e;
        }
        WBCL_KAHAN16(t1, c1, b1);
        WBCL_KAHAN16(t2, c2, b2);
    }
    float a1 = 0.0f, a2 = 0.0f;
    for (ulong i = nv * WBCL_V; i < d; i++) {
        const float e = p[i] - m;
        a1 += e;
        a2 += e * e;
    }
    *s1 = wbcl_hsum16(t1) + a1;
    *s2 = wbcl_hsum16(t2) + a2;
}

/* mean and 1/sqrt(var + eps) of one row from the two statistics passes:
 * m0 = first-pass mean, s1/s2 the deviations from m0 (corrected two-pass
 * algorithm: mean = m0 + s1/d, var = (s2 - s1^2/d) / d, never E[x^2]-E[x]^2). */
inline void wbcl_ln_stats(const float m0, const float s1, const float s2, const float dd, const float eps,
                          float *mean, float *rstd)
{
    const float var = fmax((s2 - s1 * (s1 / dd)) / dd, 0.0f);
    *mean = m0 + s1 / dd;
    *rstd = 1.0f / sqrt(var + eps);
}

/* ---- layernorm --------------------------------------------------------- */
__kernel void wbcl_layernorm_cpu(__global const float *x, __global const float *gamma, __global const float *beta,
                                 const int affine_g, const int affine_b, const float eps, __global float *y,
                                 const ulong rows, const ulong d)
{
    const size_t r = get_global_id(0);
    if (r >= rows) return;
    __global const float *p = x + r * d;
    __global float *q = y + r * d;
    const float dd = (float)d;
    const float m0 = wbcl_row_sum(p, d, 0) / dd;
    float s1, s2, mean, rstd;
    wbcl_row_dev(p, d, m0, &s1, &s2);
    wbcl_ln_stats(m0, s1, s2, dd, eps, &mean, &rstd);
    const ulong nv = d / WBCL_V;
    for (ulong v = 0; v < nv; v++) {
        float16 t = (vload16(v, p) - mean) * rstd;
        if (affine_g) t *= vload16(v, gamma);
        if (affine_b) t += vload16(v, beta);
        vstore16(t, v, q);
    }
    for (ulong i = nv * WBCL_V; i < d; i++) {
        float t = (p[i] - mean) * rstd;
        if (affine_g) t *= gamma[i];
        if (affine_b) t += beta[i];
        q[i] = t;
    }
}

/* ---- softmax: max, then exp(x - max) stored and summed, then scaled ------ */
__kernel void wbcl_softmax_cpu(__global const float *x, __global float *y, const ulong rows, const ulong d)
{
    const size_t r = get_global_id(0);
    if (r >= rows) return;
    __global const float *p = x + r * d;
    __global float *q = y + r * d;
    const float m = wbcl_row_max(p, d);
    const ulong nv = d / WBCL_V;
    float16 tot = 0.0f, comp = 0.0f;
    ulong v = 0;
    while (v < nv) {
        const ulong end = min(nv, v + WBCL_VBLOCK);
        float16 blk = 0.0f;
        for (; v < end; v++) {
            const float16 e = exp(vload16(v, p) - m);
            vstore16(e, v, q);
            blk += e;
        }
        WBCL_KAHAN16(tot, comp, blk);
    }
    float tail = 0.0f;
    for (ulong i = nv * WBCL_V; i < d; i++) {
        const float e = exp(p[i] - m);
        q[i] = e;
        tail += e;
    }
    const float inv = 1.0f / (wbcl_hsum16(tot) + tail);
    for (ulong w = 0; w < nv; w++) vstore16(vload16(w, q) * inv, w, q);
    for (ulong i = nv * WBCL_V; i < d; i++) q[i] *= inv;
}

/* ---- reduce_rows: y[r] = scale * op_c x[r, c] -------------------------------- */
__kernel void wbcl_reduce_rows_cpu_sum(__global const float *x, __global float *y, const ulong rows, const ulong d,
                                       const float scale)
{
    const size_t r = get_global_id(0);
    if (r < rows) y[r] = wbcl_row_sum(x + r * d, d, 0) * scale;
}

__kernel void wbcl_reduce_rows_cpu_sumsq(__global const float *x, __global float *y, const ulong rows,
                                         const ulong d, const float scale)
{
    const size_t r = get_global_id(0);
    if (r < rows) y[r] = wbcl_row_sum(x + r * d, d, 1) * scale;
}

__kernel void wbcl_reduce_rows_cpu_max(__global const float *x, __global float *y, const ulong rows, const ulong d,
                                       const float scale)
{
    const size_t r = get_global_id(0);
    (void)scale;
    if (r < rows) y[r] = wbcl_row_max(x + r * d, d);
}

/* ------------------------------------------------------------------------- */
/* GPU-shaped row ops: one work-group per row, local tree reductions          */
/* ------------------------------------------------------------------------- */

/* Tree reduction over the work-group (local size: a power of two). Every
 * work-item must call it; returns the result to all of them.
 * The host launches exactly `rows` groups, so these kernels have no early
 * `return` before their barriers: PoCL 3.1 corrupted memory with one (a
 * group-uniform `if (r >= rows) return;` in wbcl_layernorm_gpu). */
inline float wbcl_wg_sum(float v, __local float *s)
{
    const uint l = get_local_id(0), n = get_local_size(0);
    s[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = n / 2; h > 0; h >>= 1) {
        if (l < h) s[l] += s[l + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = s[0];
    barrier(CLK_LOCAL_MEM_FENCE); /* s may be reused right away */
    return r;
}

inline float wbcl_wg_max(float v, __local float *s)
{
    const uint l = get_local_id(0), n = get_local_size(0);
    s[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = n / 2; h > 0; h >>= 1) {
        if (l < h) s[l] = fmax(s[l], s[l + h]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = s[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

__kernel void wbcl_layernorm_gpu(__global const float *x, __global const float *gamma, __global const float *beta,
                                 const int affine_g, const int affine_b, const float eps, __global float *y,
                                 const ulong rows, const ulong d)
{
    __local float s[WBCL_REDUCE_WG];
    const size_t r = get_group_id(0);
    const size_t l = get_local_id(0), n = get_local_size(0);
    __global const float *p = x + r * d;
    __global float *q = y + r * d;
    const float dd = (float)d;
    float a = 0.0f;
    for (size_t i = l; i < d; i += n) a += p[i];
    const float m0 = wbcl_wg_sum(a, s) / dd;
    float a1 = 0.0f, a2 = 0.0f;
    for (size_t i = l; i < d; i += n) {
        const float e = p[i] - m0;
        a1 += e;
        a2 += e * e;
    }
    const float s1 = wbcl_wg_sum(a1, s);
    const float s2 = wbcl_wg_sum(a2, s);
    float mean, rstd;
    wbcl_ln_stats(m0, s1, s2, dd, eps, &mean, &rstd);
    for (size_t i = l; i < d; i += n) {
        float t = (p[i] - mean) * rstd;
        if (affine_g) t *= gamma[i];
        if (affine_b) t += beta[i];
        q[i] = t;
    }
}

__kernel void wbcl_softmax_gpu(__global const float *x, __global float *y, const ulong rows, const ulong d)
{
    __local float s[WBCL_REDUCE_WG];
    const size_t r = get_group_id(0);
    const size_t l = get_local_id(0), n = get_local_size(0);
    __global const float *p = x + r * d;
    __global float *q = y + r * d;
    float m = -INFINITY;
    for (size_t i = l; i < d; i += n) m = fmax(m, p[i]);
    m = wbcl_wg_max(m, s);
    float a = 0.0f;
    for (size_t i = l; i < d; i += n) a += exp(p[i] - m);
    const float inv = 1.0f / wbcl_wg_sum(a, s);
    /* every read of x above happened before the barriers in wbcl_wg_sum:
     * in place (y == x) is safe */
    for (size_t i = l; i < d; i += n) q[i] = exp(p[i] - m) * inv;
}

#define WBCL_RROWS_GPU(NAME, INIT, F, WG_REDUCE)                                                             \
    __kernel void NAME(__global const float *x, __global float *y, const ulong rows, const ulong d,           \
                       const float scale)                                                                    \
    {                                                                                                        \
        __local float s[WBCL_REDUCE_WG];                                                                     \
        const size_t r = get_group_id(0);                                                                    \
        const size_t l = get_local_id(0), n = get_local_size(0);                                             \
        __global const float *p = x + r * d;                                                                 \
        float a = INIT;                                                                                      \
        for (size_t i = l; i < d; i += n) {                                                                  \
            const float v = p[i];                                                                            \
            a = F;                                                                                           \
        }                                                                                                    \
        a = WG_REDUCE(a, s);                                                                                 \
        if (l == 0) y[r] = a * scale;                                                                        \
    }

WBCL_RROWS_GPU(wbcl_reduce_rows_gpu_sum, 0.0f, a + v, wbcl_wg_sum)
WBCL_RROWS_GPU(wbcl_reduce_rows_gpu_sumsq, 0.0f, a + v * v, wbcl_wg_sum)
WBCL_RROWS_GPU(wbcl_reduce_rows_gpu_max, -INFINITY, fmax(a, v), wbcl_wg_max)

/* ------------------------------------------------------------------------- */
/* Column reductions: out[b, c] = scale * op over rows r of block b of in[r, c] */
/* ------------------------------------------------------------------------- */
/* The host applies these kernels level by level: R rows -> ceil(R / rpb)
 * partial rows -> ... -> 1 row (written to y, with the MEAN scale). Each
 * level combines at most rpb values per output, so the error grows like
 * rpb * log_rpb(R) ulps at worst (sqrt of that typically), not like R. */

/* CPU: work-item g owns row block b = g / nchunks (rpb contiguous rows,
 * WBCL_REDUCE_ROWS by default) and columns [WBCL_CW * j, +WBCL_CW),
 * j = g % nchunks, streamed row by row into private float16 partials.
 * Neighbouring work-items cover neighbouring column chunks of the same rows,
 * so a work-group reads whole contiguous rows. */
#define WBCL_RCOLS_CPU(NAME, INIT, COMB, F)                                                                  \
    __kernel void NAME(__global const float *x, const ulong R, const ulong C, const ulong rpb,                \
                       const ulong nchunks, const ulong seglen, const ulong nblocks, __global float *out,     \
                       const float scale)                                                                    \
    {                                                                                                        \
        (void)seglen;                                                                                        \
        const size_t g = get_global_id(0);                                                                   \
        if (g >= nchunks * nblocks) return;                                                                  \
        const size_t j = g % nchunks, b = g / nchunks;                                                       \
        const size_t r0 = b * rpb, r1 = min((size_t)R, r0 + (size_t)rpb);                                    \
        const size_t c0 = j * WBCL_CW, c1 = min((size_t)C, c0 + WBCL_CW);                                    \
        __global float *o = out + b * C;                                                                     \
        if (c1 - c0 == WBCL_CW) {                                                                            \
            float16 a0 = INIT, a1 = INIT, a2 = INIT, a3 = INIT;                                              \
            for (size_t r = r0; r < r1; r++) {                                                               \
                __global const float *p = x + r * C + c0;                                                    \
                float16 v;                                                                                   \
                v = vload16(0, p); a0 = COMB(a0, F);                                                         \
                v = vload16(1, p); a1 = COMB(a1, F);                                                         \
                v = vload16(2, p); a2 = COMB(a2, F);                                                         \
                v = vload16(3, p); a3 = COMB(a3, F);                                                         \
            }                                                                                                \
            vstore16(a0 * scale, 0, o + c0);                                                                 \
            vstore16(a1 * scale, 1, o + c0);                                                                 \
            vstore16(a2 * scale, 2, o + c0);                                                                 \
            vstore16(a3 * scale, 3, o + c0);                                                                 \
            return;                                                                                          \
        }                                                                                                    \
        /* the last, partial chunk: whole vectors first, then single columns */                              \
        size_t c = c0;                                                                                       \
        for (; c + WBCL_V <= c1; c += WBCL_V) {                                                              \
            float16 a = INIT;                                                                                \
            for (size_t r = r0; r < r1; r++) {                                                               \
                const float16 v = vload16(0, x + r * C + c);                                                 \
                a = COMB(a, F);                                                                              \
            }                                                                                                \
            vstore16(a * scale, 0, o + c);                                                                   \
        }                                                                                                    \
        for (; c < c1; c++) {                                                                                \
            float a = INIT;                                                                                  \
            for (size_t r = r0; r < r1; r++) {                                                               \
                const float v = x[r * C + c];                                                                \
                a = COMB(a, F);                                                                              \
            }                                                                                                \
            o[c] = a * scale;                                                                                \
        }                                                                                                    \
    }

#define WBCL_ADD(a, b) ((a) + (b))
#define WBCL_MAX(a, b) fmax((a), (b))

WBCL_RCOLS_CPU(wbcl_reduce_cols_cpu_sum, 0.0f, WBCL_ADD, v)
WBCL_RCOLS_CPU(wbcl_reduce_cols_cpu_sumsq, 0.0f, WBCL_ADD, v * v)
WBCL_RCOLS_CPU(wbcl_reduce_cols_cpu_max, -INFINITY, WBCL_MAX, v)

/* CPU, wide rows: work-item g owns row block b = g / nseg and the column
 * segment [seglen * j, +seglen), j = g % nseg (seglen a multiple of 16,
 * usually the whole row), and streams the block's rows through it
 * sequentially, accumulating into its own partial row out[b, segment]
 * (L1-resident). Memory is then read in long contiguous runs, which the
 * register-chunk kernel above (64 columns, row stride C) cannot offer when
 * C is large. */
#define WBCL_RCOLS_CPU_SEG(NAME, COMB, F)                                                                    \
    __kernel void NAME(__global const float *x, const ulong R, const ulong C, const ulong rpb,                \
                       const ulong nseg, const ulong seglen, const ulong nblocks, __global float *out,        \
                       const float scale)                                                                    \
    {                                                                                                        \
        const size_t g = get_global_id(0);                                                                   \
        if (g >= nseg * nblocks) return;                                                                     \
        const size_t j = g % nseg, b = g / nseg;                                                             \
        const size_t r0 = b * rpb, r1 = min((size_t)R, r0 + (size_t)rpb);                                    \
        const size_t c0 = j * seglen, c1 = min((size_t)C, c0 + (size_t)seglen);                              \
        const size_t nv = (c1 - c0) / WBCL_V;                                                                \
        __global float *o = out + b * C + c0;                                                                \
        __global const float *p = x + r0 * C + c0;                                                           \
        for (size_t w = 0; w < nv; w++) {                                                                    \
            const float16 v = vload16(w, p);                                                                 \
            vstore16(F, w, o);                                                                               \
        }                                                                                                    \
        for (size_t c = nv * WBCL_V; c < c1 - c0; c++) {                                                     \
            const float v = p[c];                                                                            \
            o[c] = F;                                                                                        \
        }                                                                                                    \
        for (size_t r = r0 + 1; r < r1; r++) {                                                               \
            p = x + r * C + c0;                                                                              \
            for (size_t w = 0; w < nv; w++) {                                                                \
                const float16 v = vload16(w, p);                                                             \
                vstore16(COMB(vload16(w, o), F), w, o);                                                      \
            }                                                                                                \
            for (size_t c = nv * WBCL_V; c < c1 - c0; c++) {                                                 \
                const float v = p[c];                                                                        \
                o[c] = COMB(o[c], F);                                                                        \
            }                                                                                                \
        }                                                                                                    \
        if (scale != 1.0f)                                                                                   \
            for (size_t c = 0; c < c1 - c0; c++) o[c] *= scale;                                              \
    }

WBCL_RCOLS_CPU_SEG(wbcl_reduce_cols_cpuseg_sum, WBCL_ADD, v)
WBCL_RCOLS_CPU_SEG(wbcl_reduce_cols_cpuseg_sumsq, WBCL_ADD, v * v)
WBCL_RCOLS_CPU_SEG(wbcl_reduce_cols_cpuseg_max, WBCL_MAX, v)

/* GPU: 2-D work-groups (TX, TY), TX * TY <= WBCL_REDUCE_WG, both powers of
 * two; work-items of a row of the tile read adjacent columns (coalesced).
 * Group (gx, gy) reduces rows [gy * rpb, +rpb) of columns gx * TX + tx:
 * each work-item strides over those rows by TY, then a tree over ty. */
#define WBCL_RCOLS_GPU(NAME, INIT, COMB, F)                                                                  \
    __kernel void NAME(__global const float *x, const ulong R, const ulong C, const ulong rpb,                \
                       const ulong nchunks, const ulong seglen, const ulong nblocks, __global float *out,     \
                       const float scale)                                                                    \
    {                                                                                                        \
        (void)seglen;                                                                                        \
        __local float s[WBCL_REDUCE_WG];                                                                     \
        const size_t c = get_global_id(0);                                                                   \
        const size_t b = get_group_id(1);                                                                    \
        const uint tx = get_local_id(0), ty = get_local_id(1);                                               \
        const uint TX = get_local_size(0), TY = get_local_size(1);                                           \
        (void)nchunks;                                                                                       \
        const size_t r0 = b * rpb, r1 = min((size_t)R, r0 + (size_t)rpb);                                    \
        float a = INIT;                                                                                      \
        if (c < C && b < nblocks)                                                                            \
            for (size_t r = r0 + ty; r < r1; r += TY) {                                                      \
                const float v = x[r * C + c];                                                                \
                a = COMB(a, F);                                                                              \
            }                                                                                                \
        s[ty * TX + tx] = a;                                                                                 \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                        \
        for (uint h = TY / 2; h > 0; h >>= 1) {                                                              \
            if (ty < h) s[ty * TX + tx] = COMB(s[ty * TX + tx], s[(ty + h) * TX + tx]);                      \
            barrier(CLK_LOCAL_MEM_FENCE);                                                                    \
        }                                                                                                    \
        if (ty == 0 && c < C && b < nblocks) out[b * C + c] = s[tx] * scale;                                 \
    }

WBCL_RCOLS_GPU(wbcl_reduce_cols_gpu_sum, 0.0f, WBCL_ADD, v)
WBCL_RCOLS_GPU(wbcl_reduce_cols_gpu_sumsq, 0.0f, WBCL_ADD, v * v)
WBCL_RCOLS_GPU(wbcl_reduce_cols_gpu_max, -INFINITY, WBCL_MAX, v)

/* ------------------------------------------------------------------------- */
/* GPU-shaped kernels, second generation (host/ops/basic.c, GPU variant)      */
/* ------------------------------------------------------------------------- */
/* Measured on an H200 (perf/RESULTS.md): the scalar elementwise kernels (one float per work-item)
 * reached 56-61 % of the copy probe (one float4 per work-item), gelu (vload8: eight scalar loads
 * 32 bytes apart per work-item) and the one-work-group-per-row kernels (x read two or three times,
 * 3 x 9 barriers per row) 33-36 %, the column reduction (scalar loads, three levels) 15 %.
 * These kernels:
 *   *_g elementwise   one float4 per work-item (aligned: tensors start on a buffer's base), the
 *                     n % 4 tail by the last work-item, as the copy probe moves memory.
 *   rows_g            a (LX, RY) work-group holds RY rows, LX lanes per row, every lane at most
 *                     WBCL_RG float4 slots of its row in registers (d <= 16 LX <= 4096): x is read
 *                     once, each reduction is two barriers (lanes -> 16 partials -> all).
 *                     Rows with d % 4 == 0 use float4 slots (lane lx owns float4 lx + LX j), the
 *                     others scalars (lane lx owns elements lx + LX (4 j + u)): coalesced both ways.
 *   reduce_cols_g     (CX, RY) work-groups: CX lanes over float4 (or scalar) columns, RY lanes over
 *                     the rows of a row block, four rows in flight per lane, a tree over RY; the
 *                     host cuts the rows into enough blocks to fill the device, then one more
 *                     level combines the partial rows (<= 64 rows per lane per level). */
#if WBCL_VARIANT_GPU
#define WBCL_RG 4     /* float4 slots per lane in the register-resident row kernels */
#define WBCL_GWG 256  /* work-items per work-group of the rows_g and reduce_cols_g kernels */

/* erfc for 4 lanes: the same fit and operations as wbcl_erfc8 above. */
inline float4 wbcl_erfc4(const float4 z)
{
    const float4 a = fabs(z);
    const float4 t = 1.0f / fma((float4)(0.5f), a, (float4)(1.0f));
    float4 p = fma(t, (float4)(0.17087277f), (float4)(-0.82215223f));
    p = fma(t, p, (float4)(1.48851587f));
    p = fma(t, p, (float4)(-1.13520398f));
    p = fma(t, p, (float4)(0.27886807f));
    p = fma(t, p, (float4)(-0.18628806f));
    p = fma(t, p, (float4)(0.09678418f));
    p = fma(t, p, (float4)(0.37409196f));
    p = fma(t, p, (float4)(1.00002368f));
    p = fma(t, p, (float4)(-1.26551223f));
    const float4 r = t * exp(p - a * a);
    return select(r, 2.0f - r, z < 0.0f);
}

inline float4 wbcl_ew_gelu4(const float4 v) { return 0.5f * v * wbcl_erfc4(-v * M_SQRT1_2_F); }

/* One float4 per work-item: item i < n/4 does elements [4i, 4i + 4), item n/4 the n % 4 tail. */
#define WBCL_EW_G(NAME, ARGS, F4, F1)                                                                       \
    __kernel void NAME ARGS                                                                                  \
    {                                                                                                        \
        const size_t i = get_global_id(0), n4 = n / 4;                                                       \
        if (i < n4) {                                                                                        \
            F4;                                                                                              \
        } else if (i == n4) {                                                                                \
            for (size_t j = 4 * n4; j < n; j++) {                                                            \
                F1;                                                                                          \
            }                                                                                                \
        }                                                                                                    \
    }

WBCL_EW_G(wbcl_ew_relu_g, (__global const float *x, __global float *y, const ulong n),
          { const float4 v = ((__global const float4 *)x)[i]; ((__global float4 *)y)[i] = select(v, (float4)(0.0f), v < 0.0f); },
          { const float v = x[j]; y[j] = v < 0.0f ? 0.0f : v; })
WBCL_EW_G(wbcl_ew_scale_g, (__global const float *x, const float alpha, __global float *y, const ulong n),
          { ((__global float4 *)y)[i] = alpha * ((__global const float4 *)x)[i]; }, { y[j] = alpha * x[j]; })
WBCL_EW_G(wbcl_ew_axpby_g,
          (const float alpha, __global const float *x, const float beta, __global float *y, const ulong n),
          { __global float4 *y4 = (__global float4 *)y; y4[i] = alpha * ((__global const float4 *)x)[i] + beta * y4[i]; },
          { y[j] = alpha * x[j] + beta * y[j]; })
WBCL_EW_G(wbcl_ew_add_g, (__global const float *a, __global const float *b, __global float *y, const ulong n),
          { ((__global float4 *)y)[i] = ((__global const float4 *)a)[i] + ((__global const float4 *)b)[i]; },
          { y[j] = a[j] + b[j]; })
WBCL_EW_G(wbcl_ew_gelu_g, (__global const float *x, __global float *y, const ulong n),
          { ((__global float4 *)y)[i] = wbcl_ew_gelu4(((__global const float4 *)x)[i]); },
          { y[j] = wbcl_ew_gelu4((float4)(x[j])).x; })

/* y[r, c] = a[r, c] + b[c] with nb % 4 == 0: dimension 0 over the nb / 4 float4 columns,
 * dimension 1 over rows. */
__kernel void wbcl_ew_add_bcast_g(__global const float4 *a, __global const float4 *b, __global float4 *y,
                                  const ulong nb4, const ulong rows)
{
    const size_t c = get_global_id(0), r = get_global_id(1);
    if (c < nb4 && r < rows) {
        const size_t i = r * nb4 + c;
        y[i] = a[i] + b[c];
    }
}

/* ---- register-resident rows -------------------------------------------------- */
/* Element u of slot j of lane lx in a row of d: index, or d when outside the row. */
inline ulong wbcl_rg_idx(const int vec, const ulong d, const uint lx, const uint LX, const uint j, const uint u)
{
    const ulong e = vec ? ((ulong)lx + (ulong)LX * j) * 4 + u : (ulong)lx + (ulong)LX * (4 * j + u);
    return e < d ? e : d;
}

inline float4 wbcl_rg_load(__global const float *p, const ulong d, const int vec, const uint lx, const uint LX,
                           const uint j, const float fill)
{
    if (vec) {
        const ulong i4 = (ulong)lx + (ulong)LX * j;
        return i4 < d / 4 ? ((__global const float4 *)p)[i4] : (float4)(fill);
    }
    float4 v;
    ulong e;
    e = wbcl_rg_idx(0, d, lx, LX, j, 0); v.x = e < d ? p[e] : fill;
    e = wbcl_rg_idx(0, d, lx, LX, j, 1); v.y = e < d ? p[e] : fill;
    e = wbcl_rg_idx(0, d, lx, LX, j, 2); v.z = e < d ? p[e] : fill;
    e = wbcl_rg_idx(0, d, lx, LX, j, 3); v.w = e < d ? p[e] : fill;
    return v;
}

inline void wbcl_rg_store(__global float *q, const float4 v, const ulong d, const int vec, const uint lx,
                          const uint LX, const uint j)
{
    if (vec) {
        const ulong i4 = (ulong)lx + (ulong)LX * j;
        if (i4 < d / 4) ((__global float4 *)q)[i4] = v;
        return;
    }
    ulong e;
    e = wbcl_rg_idx(0, d, lx, LX, j, 0); if (e < d) q[e] = v.x;
    e = wbcl_rg_idx(0, d, lx, LX, j, 1); if (e < d) q[e] = v.y;
    e = wbcl_rg_idx(0, d, lx, LX, j, 2); if (e < d) q[e] = v.z;
    e = wbcl_rg_idx(0, d, lx, LX, j, 3); if (e < d) q[e] = v.w;
}

/* Which elements of slot j lie inside the row (-1 lanes). */
inline int4 wbcl_rg_in(const ulong d, const int vec, const uint lx, const uint LX, const uint j)
{
    return (int4)(wbcl_rg_idx(vec, d, lx, LX, j, 0) < d ? -1 : 0, wbcl_rg_idx(vec, d, lx, LX, j, 1) < d ? -1 : 0,
                  wbcl_rg_idx(vec, d, lx, LX, j, 2) < d ? -1 : 0, wbcl_rg_idx(vec, d, lx, LX, j, 3) < d ? -1 : 0);
}

/* Sum (is_max 0) or max (1) of v over the LX lanes of row ry; every lane gets it. Two barriers:
 * lanes -> G = min(16, LX) strided partials -> each lane sums the G. s1, s2: WBCL_GWG floats. */
inline float2 wbcl_rg_reduce2(const float2 v, __local float2 *s1, __local float2 *s2, const uint lx, const uint ry,
                              const uint LX, const int is_max)
{
    const uint G = LX < 16 ? LX : 16;
    s1[ry * LX + lx] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lx < G) {
        float2 a = s1[ry * LX + lx];
        for (uint k = lx + G; k < LX; k += G) a = is_max ? fmax(a, s1[ry * LX + k]) : a + s1[ry * LX + k];
        s2[ry * G + lx] = a;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float2 t = s2[ry * G];
    for (uint k = 1; k < G; k++) t = is_max ? fmax(t, s2[ry * G + k]) : t + s2[ry * G + k];
    return t;
}

inline float wbcl_hsum4(const float4 v) { return (v.x + v.y) + (v.z + v.w); }

/* Layernorm: the statistics as wbcl_layernorm_cpu (mean m0, then the deviations' sums, corrected
 * two-pass), x read once. Rows r = group * RY + ry; no early return (barriers). */
__kernel void wbcl_layernorm_g(__global const float *x, __global const float *gamma, __global const float *beta,
                               const int affine_g, const int affine_b, const float eps, __global float *y,
                               const ulong rows, const ulong d)
{
    __local float2 s1[WBCL_GWG], s2[WBCL_GWG];
    const uint lx = get_local_id(0), ry = get_local_id(1), LX = get_local_size(0);
    const size_t r = get_group_id(0) * get_local_size(1) + ry;
    const int live = r < rows, vec = d % 4 == 0;
    __global const float *p = x + (live ? r : 0) * d;
    float4 v[WBCL_RG];
    float a = 0.0f;
#pragma unroll
    for (uint j = 0; j < WBCL_RG; j++) {
        v[j] = live ? wbcl_rg_load(p, d, vec, lx, LX, j, 0.0f) : (float4)(0.0f);
        a += wbcl_hsum4(v[j]);
    }
    const float dd = (float)d;
    const float m0 = wbcl_rg_reduce2((float2)(a, 0.0f), s1, s2, lx, ry, LX, 0).x / dd;
    float2 t = (float2)(0.0f);
#pragma unroll
    for (uint j = 0; j < WBCL_RG; j++) {
        const float4 e = select((float4)(0.0f), v[j] - m0, wbcl_rg_in(d, vec, lx, LX, j));
        t += (float2)(wbcl_hsum4(e), wbcl_hsum4(e * e));
    }
    t = wbcl_rg_reduce2(t, s1, s2, lx, ry, LX, 0);
    float mean, rstd;
    wbcl_ln_stats(m0, t.x, t.y, dd, eps, &mean, &rstd);
    if (live) {
        __global float *q = y + r * d;
#pragma unroll
        for (uint j = 0; j < WBCL_RG; j++) {
            float4 o = (v[j] - mean) * rstd;
            if (affine_g) o *= wbcl_rg_load(gamma, d, vec, lx, LX, j, 0.0f);
            if (affine_b) o += wbcl_rg_load(beta, d, vec, lx, LX, j, 0.0f);
            wbcl_rg_store(q, o, d, vec, lx, LX, j);
        }
    }
}

/* Softmax: max, exp(x - max) kept in registers and summed, scaled. In place is safe: every read of
 * x precedes the first barrier. */
__kernel void wbcl_softmax_g(__global const float *x, __global float *y, const ulong rows, const ulong d)
{
    __local float2 s1[WBCL_GWG], s2[WBCL_GWG];
    const uint lx = get_local_id(0), ry = get_local_id(1), LX = get_local_size(0);
    const size_t r = get_group_id(0) * get_local_size(1) + ry;
    const int live = r < rows, vec = d % 4 == 0;
    __global const float *p = x + (live ? r : 0) * d;
    float4 v[WBCL_RG];
    float m = -INFINITY;
#pragma unroll
    for (uint j = 0; j < WBCL_RG; j++) {
        v[j] = live ? wbcl_rg_load(p, d, vec, lx, LX, j, -INFINITY) : (float4)(-INFINITY);
        m = fmax(m, fmax(fmax(v[j].x, v[j].y), fmax(v[j].z, v[j].w)));
    }
    m = wbcl_rg_reduce2((float2)(m, 0.0f), s1, s2, lx, ry, LX, 1).x;
    float a = 0.0f;
#pragma unroll
    for (uint j = 0; j < WBCL_RG; j++) {
        v[j] = select((float4)(0.0f), exp(v[j] - m), wbcl_rg_in(d, vec, lx, LX, j));
        a += wbcl_hsum4(v[j]);
    }
    const float inv = 1.0f / wbcl_rg_reduce2((float2)(a, 0.0f), s1, s2, lx, ry, LX, 0).x;
    if (live)
#pragma unroll
        for (uint j = 0; j < WBCL_RG; j++) wbcl_rg_store(y + r * d, v[j] * inv, d, vec, lx, LX, j);
}

/* reduce_rows: the same lanes, any d (slots streamed, four in flight), y[r] = scale * op. */
#define WBCL_RROWS_G(NAME, FILL, COMB, F)                                                                    \
    __kernel void NAME(__global const float *x, __global float *y, const ulong rows, const ulong d,           \
                       const float scale)                                                                    \
    {                                                                                                        \
        __local float2 s1[WBCL_GWG], s2[WBCL_GWG];                                                           \
        const uint lx = get_local_id(0), ry = get_local_id(1), LX = get_local_size(0);                       \
        const size_t r = get_group_id(0) * get_local_size(1) + ry;                                           \
        const int live = r < rows, vec = d % 4 == 0;                                                         \
        __global const float *p = x + (live ? r : 0) * d;                                                    \
        const ulong nslot = live ? (d + 4 * (ulong)LX - 1) / (4 * (ulong)LX) : 0;                            \
        float4 a0 = FILL, a1 = FILL, a2 = FILL, a3 = FILL;                                                   \
        ulong j = 0;                                                                                         \
        for (; j + 4 <= nslot; j += 4) {                                                                     \
            float4 v;                                                                                        \
            v = wbcl_rg_load(p, d, vec, lx, LX, j, FILL); a0 = COMB(a0, F);                                  \
            v = wbcl_rg_load(p, d, vec, lx, LX, j + 1, FILL); a1 = COMB(a1, F);                              \
            v = wbcl_rg_load(p, d, vec, lx, LX, j + 2, FILL); a2 = COMB(a2, F);                              \
            v = wbcl_rg_load(p, d, vec, lx, LX, j + 3, FILL); a3 = COMB(a3, F);                              \
        }                                                                                                    \
        for (; j < nslot; j++) {                                                                             \
            const float4 v = wbcl_rg_load(p, d, vec, lx, LX, j, FILL);                                       \
            a0 = COMB(a0, F);                                                                                \
        }                                                                                                    \
        const float4 a = COMB(COMB(a0, a1), COMB(a2, a3));                                                   \
        const float t = wbcl_rg_reduce2((float2)(COMB(COMB(a.x, a.y), COMB(a.z, a.w)), 0.0f), s1, s2, lx, ry, \
                                        LX, FILL == 0.0f ? 0 : 1).x;                                         \
        if (live && lx == 0) y[r] = t * scale;                                                               \
    }

WBCL_RROWS_G(wbcl_reduce_rows_g_sum, 0.0f, WBCL_ADD, v)
WBCL_RROWS_G(wbcl_reduce_rows_g_sumsq, 0.0f, WBCL_ADD, v * v)
WBCL_RROWS_G(wbcl_reduce_rows_g_max, -INFINITY, WBCL_MAX, v)

/* ---- column reductions --------------------------------------------------------- */
/* Group (gx, gy): columns [CX gx, +CX) in float4 units when C % 4 == 0 (else single columns), rows
 * [rpb gy, +rpb) of x (R, C); lane (cx, ry) combines rows ry, ry + RY, ... four at a time, then a
 * tree over ry in local memory; out[gy, columns] = scale * result. Same arguments as the kernels
 * above (nchunks, seglen unused). */
#define WBCL_RCOLS_G(NAME, INIT, COMB, F)                                                                    \
    __kernel void NAME(__global const float *x, const ulong R, const ulong C, const ulong rpb,                \
                       const ulong nchunks, const ulong seglen, const ulong nblocks, __global float *out,     \
                       const float scale)                                                                    \
    {                                                                                                        \
        (void)nchunks;                                                                                       \
        (void)seglen;                                                                                        \
        __local float4 s[WBCL_GWG];                                                                          \
        const uint cx = get_local_id(0), ry = get_local_id(1);                                               \
        const uint CX = get_local_size(0), RY = get_local_size(1);                                           \
        const size_t b = get_group_id(1), c = get_global_id(0);                                              \
        const int vec = C % 4 == 0;                                                                          \
        const ulong ncol = vec ? C / 4 : C;                                                                  \
        const size_t r0 = b * rpb, r1 = min((size_t)R, r0 + (size_t)rpb);                                    \
        float4 a0 = INIT, a1 = INIT, a2 = INIT, a3 = INIT;                                                   \
        if (c < ncol && b < nblocks) {                                                                       \
            size_t r = r0 + ry;                                                                              \
            if (vec) {                                                                                       \
                __global const float4 *x4 = (__global const float4 *)x;                                      \
                for (; r + 3 * RY < r1; r += 4 * RY) {                                                       \
                    float4 v;                                                                                \
                    v = x4[r * ncol + c]; a0 = COMB(a0, F);                                                  \
                    v = x4[(r + RY) * ncol + c]; a1 = COMB(a1, F);                                           \
                    v = x4[(r + 2 * RY) * ncol + c]; a2 = COMB(a2, F);                                       \
                    v = x4[(r + 3 * RY) * ncol + c]; a3 = COMB(a3, F);                                       \
                }                                                                                            \
                for (; r < r1; r += RY) {                                                                    \
                    const float4 v = x4[r * ncol + c];                                                       \
                    a0 = COMB(a0, F);                                                                        \
                }                                                                                            \
            } else {                                                                                         \
                for (; r + 3 * RY < r1; r += 4 * RY) {                                                       \
                    /* four rows in the four lanes of v */                                                   \
                    const float4 v = (float4)(x[r * C + c], x[(r + RY) * C + c], x[(r + 2 * RY) * C + c],    \
                                              x[(r + 3 * RY) * C + c]);                                      \
                    a0 = COMB(a0, F);                                                                        \
                }                                                                                            \
                for (; r < r1; r += RY) {                                                                    \
                    const float4 v = (float4)(x[r * C + c], INIT, INIT, INIT);                               \
                    a1 = COMB(a1, F);                                                                        \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
        float4 a = COMB(COMB(a0, a1), COMB(a2, a3));                                                         \
        if (!vec) a = (float4)(COMB(COMB(a.x, a.y), COMB(a.z, a.w)));                                        \
        s[ry * CX + cx] = a;                                                                                 \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                        \
        for (uint h = RY / 2; h > 0; h >>= 1) {                                                              \
            if (ry < h) s[ry * CX + cx] = COMB(s[ry * CX + cx], s[(ry + h) * CX + cx]);                      \
            barrier(CLK_LOCAL_MEM_FENCE);                                                                    \
        }                                                                                                    \
        if (ry == 0 && c < ncol && b < nblocks) {                                                            \
            if (vec)                                                                                         \
                ((__global float4 *)out)[b * ncol + c] = s[cx] * scale;                                      \
            else                                                                                             \
                out[b * C + c] = s[cx].x * scale;                                                            \
        }                                                                                                    \
    }

WBCL_RCOLS_G(wbcl_reduce_cols_g_sum, 0.0f, WBCL_ADD, v)
WBCL_RCOLS_G(wbcl_reduce_cols_g_sumsq, 0.0f, WBCL_ADD, v * v)
WBCL_RCOLS_G(wbcl_reduce_cols_g_max, -INFINITY, WBCL_MAX, v)
#endif
