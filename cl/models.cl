/* wbcl — the small glue kernels of the CRATE and ToST vision models
 * (host/model/crate.c, host/model/tost.c). Everything heavy (projections,
 * convolutions as im2col + GEMM, attention, ISTA, LayerNorm) goes through the
 * ops; these kernels only move and combine elements, one element per
 * work-item (the shape that runs at bandwidth on PoCL and GPUs alike).
 * Indices are ulong: activations may exceed 2^31 elements. */

/* CRATE patch rearrange 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)':
 * img (B, C, H, W) -> out (B, Hp*Wp, P*P*C), feature index (p1*P + p2)*C + c. */
__kernel void wbcl_model_patchify(__global const float *img, __global float *out, const ulong B, const ulong C,
                                  const ulong H, const ulong W, const ulong P)
{
    const ulong i = get_global_id(0);
    const ulong Wp = W / P, Hp = H / P, pd = P * P * C;
    const ulong n = B * Hp * Wp * pd;
    if (i >= n) return;
    const ulong f = i % pd;
    const ulong t = (i / pd) % (Hp * Wp);
    const ulong b = i / (pd * Hp * Wp);
    const ulong c = f % C, p2 = (f / C) % P, p1 = f / (C * P);
    const ulong y = (t / Wp) * P + p1, x = (t % Wp) * P + p2;
    out[i] = img[((b * C + c) * H + y) * W + x];
}

/* 3x3 convolution, padding 1, stride S, as im2col: the input element (b, c, y, x) is
 * in[b*sb + c*sc + y*sy + x*sx] (NCHW images and NHWC activations alike);
 * col (B*Ho*Wo, C*9) row-major with column c*9 + ky*3 + kx (PyTorch's weight order
 * (Cout, Cin, 3, 3) flattened), zero outside the image. */
__kernel void wbcl_model_im2col3(__global const float *in, __global float *col, const ulong B, const ulong C,
                                 const ulong H, const ulong W, const ulong Ho, const ulong Wo, const ulong S,
                                 const ulong sb, const ulong sc, const ulong sy, const ulong sx)
{
    const ulong i = get_global_id(0);
    const ulong K = C * 9;
    const ulong n = B * Ho * Wo * K;
    if (i >= n) return;
    const ulong k = i % K, r = i / K;
    const ulong c = k / 9, ky = (k % 9) / 3, kx = k % 3;
    const ulong ox = r % Wo, oy = (r / Wo) % Ho, b = r / (Wo * Ho);
    const long y = (long)(oy * S + ky) - 1, x = (long)(ox * S + kx) - 1;
    float v = 0.0f;
    if (y >= 0 && x >= 0 && y < (long)H && x < (long)W) v = in[b * sb + c * sc + (ulong)y * sy + (ulong)x * sx];
    col[i] = v;
}

/* y[i] = act(y[i] + bias[i % d]); act 0 = identity, 1 = exact GELU (as wbcl_gelu:
 * 0.5 v erfc(-v / sqrt 2)). */
__kernel void wbcl_model_bias_act(__global float *y, __global const float *bias, const ulong n, const ulong d,
                                  const int act)
{
    const ulong i = get_global_id(0);
    if (i >= n) return;
    float v = y[i] + bias[i % d];
    if (act == 1) v = 0.5f * v * erfc(-v * M_SQRT1_2_F);
    y[i] = v;
}

/* Layer-scale residual: x[i] += g[i % d] * (a[i] + b[i % d]) (b may be absent: has_b = 0). */
__kernel void wbcl_model_residual_scaled(__global float *x, __global const float *g, __global const float *a,
                                         __global const float *b, const int has_b, const ulong n, const ulong d)
{
    const ulong i = get_global_id(0);
    if (i >= n) return;
    const ulong j = i % d;
    const float v = has_b ? a[i] + b[j] : a[i];
    x[i] = x[i] + g[j] * v;
}

/* Prepends a token: out (B, N+1, d), row 0 = first (d) (+ add0 (d) when add0 given),
 * row t >= 1 = x[b, t-1] (+ add[t] (N+1, d) rows when has_add; add0 is then add[0]).
 * CRATE: first = cls_token, add = pos_embedding; ToST: first = cls_token, no add. */
__kernel void wbcl_model_prepend(__global const float *x, __global const float *first, __global const float *add,
                                 const int has_add, __global float *out, const ulong B, const ulong N, const ulong d)
{
    const ulong i = get_global_id(0);
    const ulong n = B * (N + 1) * d;
    if (i >= n) return;
    const ulong j = i % d, t = (i / d) % (N + 1), b = i / (d * (N + 1));
    float v = t == 0 ? first[j] : x[(b * N + t - 1) * d + j];
    if (has_add) v += add[t * d + j];
    out[i] = v;
}

/* Copies row r of every batch entry: x (B, N, d) -> out (B, d). */
__kernel void wbcl_model_take_row(__global const float *x, __global float *out, const ulong B, const ulong N,
                                  const ulong d, const ulong r)
{
    const ulong i = get_global_id(0);
    if (i >= B * d) return;
    const ulong j = i % d, b = i / d;
    out[i] = x[(b * N + r) * d + j];
}

/* Class-attention block, first half (XCiT ClassAttentionBlock, before norm2):
 * x (B, N1, d) += g1 * attn(LN1 x), where attn returns proj(cls attention) (c, (B, d), bias
 * already added) for row 0 and its own input LN1 x (t, (B, N1, d)) for the other rows. */
__kernel void wbcl_model_cab_mix(__global float *x, __global const float *t, __global const float *c,
                                 __global const float *g1, const ulong B, const ulong N1, const ulong d)
{
    const ulong i = get_global_id(0);
    if (i >= B * N1 * d) return;
    const ulong j = i % d, r = (i / d) % N1, b = i / (d * N1);
    const float a = r == 0 ? c[b * d + j] : t[i];
    x[i] = x[i] + g1[j] * a;
}

/* Class-attention block, second half: x_res + cat(g2 * mlp(x_cls), x_patches):
 * row 0: x += g2 * (m + b2) (m = fc2 output without bias, (B, d)); rows >= 1: x = 2 x. */
__kernel void wbcl_model_cab_finish(__global float *x, __global const float *m, __global const float *b2,
                                    __global const float *g2, const ulong B, const ulong N1, const ulong d)
{
    const ulong i = get_global_id(0);
    if (i >= B * N1 * d) return;
    const ulong j = i % d, r = (i / d) % N1, b = i / (d * N1);
    x[i] = r == 0 ? x[i] + g2[j] * (m[b * d + j] + b2[j]) : x[i] + x[i];
}
