/* wbcl — one-query softmax attention: a decode step over a key/value cache (host/ops/attn_decode.c).
 *
 * o = softmax(q Kᵀ scale) V for ONE query per (batch, head) against n_k cached keys (the query is
 * the last token, so a causal mask hides nothing). The fused kernels of cl/attention.cl pack K and
 * V into panels first: for one query that copy is itself a full pass over the cache, and one
 * work-item per head leaves the cores idle. Here the keys of each (batch, head) are split into
 * chunks of AD_CH keys (split-K):
 *   wbcl_attn_decode_part     one work-item per (chunk, batch·head): streams its keys' rows in
 *                             place (strided, no packing), online softmax in the log2 domain
 *                             (scale·log2 e folded into q, exp2), writes (m, l, acc[p]) of its
 *                             chunk: m the running maximum, l = Σ 2^(s−m), acc = Σ 2^(s−m) v.
 *   wbcl_attn_decode_combine  one work-item per (column block, batch·head): M = max m_c,
 *                             o = Σ 2^(m_c−M) acc_c / Σ 2^(m_c−M) l_c.
 * Compile-time: AD_P the head dimension, AD_VW the vector width (16, 8, 4 or 1; divides AD_P).
 * q, k, v, o are float32, addressed as in wbcl_attention_desc (element offsets, 64-bit). */

#ifndef AD_P
#define AD_P 64
#endif
#ifndef AD_VW
#define AD_VW 16
#endif
#define AD_NV (AD_P / AD_VW)
#define AD_PART (AD_P + 2) /* floats per chunk partial: m, l, acc[p] */

#if AD_VW == 16
typedef float16 adv;
#define AD_LOAD(i, p) vload16(i, p)
#define AD_STORE(v, i, p) vstore16(v, i, p)
#elif AD_VW == 8
typedef float8 adv;
#define AD_LOAD(i, p) vload8(i, p)
#define AD_STORE(v, i, p) vstore8(v, i, p)
#elif AD_VW == 4
typedef float4 adv;
#define AD_LOAD(i, p) vload4(i, p)
#define AD_STORE(v, i, p) vstore4(v, i, p)
#else
typedef float adv;
#define AD_LOAD(i, p) ((p)[i])
#define AD_STORE(v, i, p) ((p)[i] = (v))
#endif

inline float ad_hsum(const adv a)
{
#if AD_VW == 16
    const float8 b = a.lo + a.hi;
    const float4 c = b.lo + b.hi;
    return (c.x + c.y) + (c.z + c.w);
#elif AD_VW == 8
    const float4 c = a.lo + a.hi;
    return (c.x + c.y) + (c.z + c.w);
#elif AD_VW == 4
    return (a.x + a.y) + (a.z + a.w);
#else
    return a;
#endif
}

__kernel void wbcl_attn_decode_part(__global const float *q, const ulong qo, const ulong qsb, const ulong qsh,
                                    __global const float *k, const ulong ko, const ulong ksb, const ulong ksh,
                                    const ulong ksn, __global const float *v, const ulong vo, const ulong vsb,
                                    const ulong vsh, const ulong vsn, const uint H, const uint BH, const uint Nk,
                                    const uint chunk, const float qscale, __global float *part)
{
    const uint c = get_global_id(0), bh = get_global_id(1);
    const uint nch = (Nk + chunk - 1) / chunk;
    if (c >= nch || bh >= BH) return;
    const uint b = bh / H, h = bh % H;
    const __global float *qr = q + qo + b * qsb + h * qsh;
    adv qv[AD_NV], acc[AD_NV];
    for (int i = 0; i < AD_NV; i++) {
        qv[i] = AD_LOAD(i, qr) * qscale;
        acc[i] = (adv)(0.0f);
    }
    const __global float *kb = k + ko + b * ksb + h * ksh, *vb = v + vo + b * vsb + h * vsh;
    const uint t0 = c * chunk, t1 = min(Nk, t0 + chunk);
    float m = -FLT_MAX, l = 0.0f;
    for (uint t = t0; t < t1; t++) {
        const __global float *kr = kb + t * ksn, *vr = vb + t * vsn;
        adv sv = qv[0] * AD_LOAD(0, kr);
        for (int i = 1; i < AD_NV; i++) sv = fma(qv[i], AD_LOAD(i, kr), sv);
        const float s = ad_hsum(sv);
        if (s > m) { /* the first key always: l and acc are 0, the rescale keeps them 0 */
            const float corr = exp2(m - s);
            l *= corr;
            for (int i = 0; i < AD_NV; i++) acc[i] *= corr;
            m = s;
        }
        const float e = exp2(s - m);
        l += e;
        for (int i = 0; i < AD_NV; i++) acc[i] = fma((adv)(e), AD_LOAD(i, vr), acc[i]);
    }
    __global float *pr = part + ((size_t)bh * nch + c) * AD_PART;
    pr[0] = m;
    pr[1] = l;
    for (int i = 0; i < AD_NV; i++) AD_STORE(acc[i], i, pr + 2);
}

__kernel void wbcl_attn_decode_combine(__global const float *part, const uint nch, const uint H, const uint BH,
                                       __global float *o, const ulong oo, const ulong osb, const ulong osh)
{
    const uint j = get_global_id(0), bh = get_global_id(1); /* j: one column of o */
    if (j >= AD_P || bh >= BH) return;
    const __global float *pb = part + (size_t)bh * nch * AD_PART;
    float M = -FLT_MAX;
    for (uint c = 0; c < nch; c++) M = fmax(M, pb[(size_t)c * AD_PART]);
    float num = 0.0f, den = 0.0f;
    for (uint c = 0; c < nch; c++) {
        const __global float *pr = pb + (size_t)c * AD_PART;
        const float w = exp2(pr[0] - M);
        den = fma(w, pr[1], den);
        num = fma(w, pr[2 + j], num);
    }
    const uint b = bh / H, h = bh % H;
    o[oo + b * osb + h * osh + j] = num / den;
}
