/* wbcl — the small glue kernels of the CRATE and ToST vision models
 * (host/model/crate.c, host/model/tost.c). Everything heavy (projections,
 * convolutions as im2col + GEMM, attention, ISTA, LayerNorm) goes through the
 * ops; these kernels only move and combine elements, one element (or one
 * 3x3 window) per work-item on 2-D/3-D ranges whose first dimension is the contiguous one, so that
 * no 64-bit division or modulo is done per element (those cost ~40 cycles each on x86 and made
 * a 1-D im2col 100x slower than its memory traffic). The host checks that every extent fits in
 * 32 bits; offsets are computed in size_t. */

/* CRATE patch rearrange 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)':
 * img (B, C, H, W) -> out (B, Hp*Wp, P*P*C), feature index (p1*P + p2)*C + c.
 * Range (P*P, Hp*Wp, B): one work-item per pixel (p1, p2) of a patch writes its C channels
 * (one element per work-item, with three divisions each, took 1.45 ms for one 224 x 224
 * image on PoCL, about 30x its memory traffic; perf/RESULTS.md). */
__kernel void wbcl_model_patchify(__global const float *img, __global float *out, const uint C, const uint H,
                                  const uint W, const uint P)
{
    const uint q = get_global_id(0), t = get_global_id(1), b = get_global_id(2);
    const uint Wp = W / P;
    if (q >= P * P || t >= (H / P) * Wp) return;
    const uint p1 = q / P, p2 = q - p1 * P, ty = t / Wp, tx = t - ty * Wp;
    const size_t plane = (size_t)H * W;
    __global const float *src = img + (size_t)b * C * plane + (size_t)(ty * P + p1) * W + tx * P + p2;
    __global float *dst = out + ((size_t)b * (H / P) * Wp + t) * (size_t)(P * P * C) + (size_t)q * C;
    for (uint c = 0; c < C; c++) dst[c] = src[c * plane];
}

/* 3x3 convolution, padding 1, stride S, as im2col: the input element (b, c, y, x) is
 * in[b*sb + c*sc + y*sy + x*sx] (NCHW images and NHWC activations alike);
 * col (B*Ho*Wo, C*9) row-major with column c*9 + ky*3 + kx (PyTorch's weight order
 * (Cout, Cin, 3, 3) flattened), zero outside the image. Range (C, Wo, B*Ho): one work-item
 * writes the 9 taps of one channel of one output pixel; neighbouring work-items write
 * neighbouring 9-float groups of the same col row (and read neighbouring NHWC channels). */
__kernel void wbcl_model_im2col3(__global const float *in, __global float *col, const uint C, const uint H,
                                 const uint W, const uint Ho, const uint Wo, const uint S, const ulong sb,
                                 const ulong sc, const ulong sy, const ulong sx)
{
    const uint c = get_global_id(0), ox = get_global_id(1), z = get_global_id(2);
    if (c >= C || ox >= Wo) return;
    const uint b = z / Ho, oy = z % Ho;
    __global const float *src = in + b * sb + c * sc;
    __global float *dst = col + ((size_t)z * Wo + ox) * (size_t)(C * 9) + c * 9;
    for (int ky = 0; ky < 3; ky++) {
        const int y = (int)(oy * S) + ky - 1;
        for (int kx = 0; kx < 3; kx++) {
            const int x = (int)(ox * S) + kx - 1;
            float v = 0.0f;
            if (y >= 0 && x >= 0 && y < (int)H && x < (int)W) v = src[(size_t)y * sy + (size_t)x * sx];
            dst[ky * 3 + kx] = v;
        }
    }
}

/* The same for NHWC activations (the second and later convolutions: in[((b*H + y)*W + x)*C + c]),
 * with the columns in (ky, kx, c) order: col (B*Ho*Wo, 9*C), column (ky*3 + kx)*C + c; the host
 * permutes the weights to match (host/model/tost.c, load_conv). Each tap is then one contiguous
 * run of C floats in both in and col: one work-item per output pixel copies the 9 runs with
 * float8 loads and stores (C % 8 == 0; scalar otherwise). The (c, ky, kx) order of the kernel
 * above made every store a stride-9 scatter. Range (Wo, Z = B*Ho). */
__kernel void wbcl_model_im2col3_nhwc(__global const float *in, __global float *col, const uint C, const uint H,
                                      const uint W, const uint Ho, const uint Wo, const uint S, const uint Z)
{
    const uint ox = get_global_id(0), z = get_global_id(1);
    if (ox >= Wo || z >= Z) return; /* Z = B * Ho */
    const uint b = z / Ho, oy = z % Ho;
    __global const float *src = in + (size_t)b * H * W * C;
    __global float *dst = col + ((size_t)z * Wo + ox) * (size_t)(C * 9);
    for (int ky = 0; ky < 3; ky++) {
        const int y = (int)(oy * S) + ky - 1;
        for (int kx = 0; kx < 3; kx++, dst += C) {
            const int x = (int)(ox * S) + kx - 1;
            if (y >= 0 && x >= 0 && y < (int)H && x < (int)W) {
                __global const float *s = src + ((size_t)y * W + (size_t)x) * C;
                if (C % 8 == 0)
                    for (uint c = 0; c < C / 8; c++) vstore8(vload8(c, s), c, dst);
                else
                    for (uint c = 0; c < C; c++) dst[c] = s[c];
            } else {
                if (C % 8 == 0)
                    for (uint c = 0; c < C / 8; c++) vstore8((float8)(0.0f), c, dst);
                else
                    for (uint c = 0; c < C; c++) dst[c] = 0.0f;
            }
        }
    }
}

/* The same, GPU-shaped (the GPU variant; host/model/tost.c): one work-item per float4 of a col
 * row (one float when C % 4 != 0), so that a work-group's stores are consecutive addresses of
 * one col row and its loads consecutive channels of at most a few input pixels: coalesced, where
 * the kernel above gives each work-item a whole row and each store instruction of a warp a
 * different row. (C % 4 == 0: a float4 never crosses a tap's run.) Range (9 C / V, Wo, Z),
 * V = 4 or 1. */
__kernel void wbcl_model_im2col3_nhwc_g(__global const float *in, __global float *col, const uint C,
                                        const uint H, const uint W, const uint Ho, const uint Wo, const uint S,
                                        const uint Z)
{
    const uint V = C % 4u == 0u ? 4u : 1u;
    const uint q = get_global_id(0), ox = get_global_id(1), z = get_global_id(2);
    if (ox >= Wo || z >= Z || q * V >= 9u * C) return;
    const uint j = q * V, tap = j / C, c = j - tap * C, ky = tap / 3u, kx = tap - 3u * ky;
    const uint b = z / Ho, oy = z - b * Ho;
    const int y = (int)(oy * S + ky) - 1, x = (int)(ox * S + kx) - 1;
    const int inside = y >= 0 && x >= 0 && y < (int)H && x < (int)W;
    __global float *dst = col + ((size_t)z * Wo + ox) * (size_t)(9u * C) + j;
    const size_t at = inside ? (((size_t)b * H + (size_t)y) * W + (size_t)x) * C + c : 0;
    if (V == 4u)
        vstore4(inside ? vload4(0, in + at) : (float4)(0.0f), 0, dst);
    else
        *dst = inside ? in[at] : 0.0f;
}

/* Layer-scale residual on (rows, d): x += g * (a + b) (b absent: has_b = 0). Range (d, rows). */
__kernel void wbcl_model_residual_scaled(__global float *x, __global const float *g, __global const float *a,
                                         __global const float *b, const int has_b, const uint d, const uint rows)
{
    const uint j = get_global_id(0), r = get_global_id(1);
    if (j >= d || r >= rows) return;
    const size_t i = (size_t)r * d + j;
    const float v = has_b ? a[i] + b[j] : a[i];
    x[i] = x[i] + g[j] * v;
}

/* Layer-scale residual followed by the next LayerNorm (ToST blocks: x + g1 attn, then norm2;
 * x + g2 (mlp + b2), then the next block's norm1), one pass instead of two on CPU devices:
 *   x[r] += g * (a[r] (+ b)),   y[r] = (x[r] - mean) rstd gamma + beta
 * with wbcl_layernorm's corrected two-pass statistics (mean = m0 + s1/d, var = (s2 - s1^2/d)/d,
 * s1, s2 the sums of the deviations from the first-pass mean m0). One row per work-item (the
 * row stays in L1 between the passes), float16 vectors, d = 16 d16. Range (rows). */
__kernel void wbcl_model_residual_ln(__global float *x, __global const float *g, __global const float *a,
                                     __global const float *b, const int has_b, __global const float *gamma,
                                     __global const float *beta, const float eps, __global float *y, const uint rows,
                                     const uint d16)
{
    const uint r = get_global_id(0);
    if (r >= rows) return;
    __global float *p = x + (size_t)r * d16 * 16;
    __global const float *ar = a + (size_t)r * d16 * 16;
    __global float *q = y + (size_t)r * d16 * 16;
    float16 s = 0.0f;
    for (uint v = 0; v < d16; v++) {
        const float16 av = has_b ? vload16(v, ar) + vload16(v, b) : vload16(v, ar);
        const float16 t = vload16(v, p) + vload16(v, g) * av;
        vstore16(t, v, p);
        s += t;
    }
    const float dd = (float)(d16 * 16), m0 = wbcl_hsum16(s) / dd;
    float16 s1 = 0.0f, s2 = 0.0f;
    for (uint v = 0; v < d16; v++) {
        const float16 t = vload16(v, p) - m0;
        s1 += t;
        s2 += t * t;
    }
    const float S1 = wbcl_hsum16(s1), S2 = wbcl_hsum16(s2);
    const float var = fmax((S2 - S1 * (S1 / dd)) / dd, 0.0f), mean = m0 + S1 / dd, rstd = 1.0f / sqrt(var + eps);
    for (uint v = 0; v < d16; v++)
        vstore16((vload16(v, p) - mean) * rstd * vload16(v, gamma) + vload16(v, beta), v, q);
}

/* Prepends a token: out (B, N+1, d), row 0 = first (d), row t >= 1 = x[b, t-1]; plus
 * add[t] ((N+1, d) rows) when has_add. CRATE: first = cls_token, add = pos_embedding; ToST:
 * first = cls_token, no add. Range (d, N+1, B). */
__kernel void wbcl_model_prepend(__global const float *x, __global const float *first, __global const float *add,
                                 const int has_add, __global float *out, const uint N, const uint d)
{
    const uint j = get_global_id(0), t = get_global_id(1), b = get_global_id(2);
    if (j >= d || t > N) return;
    float v = t == 0 ? first[j] : x[((size_t)b * N + t - 1) * d + j];
    if (has_add) v += add[(size_t)t * d + j];
    out[((size_t)b * (N + 1) + t) * d + j] = v;
}

/* Copies row r of every batch entry: x (B, N, d) -> out (B, d). Range (d, B), rounded up to whole
 * work-groups by the launcher: both extents are checked. */
__kernel void wbcl_model_take_row(__global const float *x, __global float *out, const uint N, const uint d,
                                  const uint r, const uint B)
{
    const uint j = get_global_id(0), b = get_global_id(1);
    if (j >= d || b >= B) return;
    out[(size_t)b * d + j] = x[((size_t)b * N + r) * d + j];
}

/* Class-attention block, first half (XCiT ClassAttentionBlock, before norm2):
 * x (B, N1, d) += g1 * attn(LN1 x), where attn returns proj(cls attention) (c, (B, d), bias
 * already added) for row 0 and its own input LN1 x (t, (B, N1, d)) for the other rows.
 * Range (d, N1, B). */
__kernel void wbcl_model_cab_mix(__global float *x, __global const float *t, __global const float *c,
                                 __global const float *g1, const uint N1, const uint d)
{
    const uint j = get_global_id(0), r = get_global_id(1), b = get_global_id(2);
    if (j >= d || r >= N1) return;
    const size_t i = ((size_t)b * N1 + r) * d + j;
    const float a = r == 0 ? c[(size_t)b * d + j] : t[i];
    x[i] = x[i] + g1[j] * a;
}

/* Class-attention block, second half: x_res + cat(g2 * mlp(x_cls), x_patches):
 * row 0: x += g2 * (m + b2) (m = fc2 output without bias, (B, d)); rows >= 1: x = 2 x.
 * Range (d, N1, B). */
__kernel void wbcl_model_cab_finish(__global float *x, __global const float *m, __global const float *b2,
                                    __global const float *g2, const uint N1, const uint d)
{
    const uint j = get_global_id(0), r = get_global_id(1), b = get_global_id(2);
    if (j >= d || r >= N1) return;
    const size_t i = ((size_t)b * N1 + r) * d + j;
    x[i] = r == 0 ? x[i] + g2[j] * (m[(size_t)b * d + j] + b2[j]) : x[i] + x[i];
}

/* Language models' key/value cache (host/model/lm.c), head-major so that a decode step reads each
 * head's keys as one contiguous run: cache (B, J, cap, p) with J = the cached heads (gpt2: K key
 * heads then K value heads; crate_lm: the K heads of w). Rows t0 .. t0+n-1 receive the n new
 * tokens' columns src_col + j p + c of src (B, n, src_w). Range (p, J n, B). */
__kernel void wbcl_lm_cache_put(__global const float *src, const uint src_col, const uint src_w,
                                __global float *cache, const uint cap, const uint J, const uint n, const uint t0,
                                const uint p)
{
    const uint c = get_global_id(0), jt = get_global_id(1), b = get_global_id(2);
    if (c >= p || jt >= J * n) return;
    const uint j = jt / n, t = jt % n;
    cache[(((size_t)b * J + j) * cap + t0 + t) * p + c] = src[((size_t)b * n + t) * src_w + src_col + (size_t)j * p + c];
}
