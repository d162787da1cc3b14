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
 *                             CPU variant: keys in blocks of 16 (16 independent dot products, one
 *                             rescale and one float16 exp2 per block); GPU variant: one key at a
 *                             time (no private arrays beyond q and acc: no stack frame).
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
#define AD_KB 16             /* keys per block inside a chunk (one float16 of scores) */

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
    return wbcl_hsum16(a);
#elif AD_VW == 8
    const float4 c = a.lo + a.hi;
    return (c.x + c.y) + (c.z + c.w);
#elif AD_VW == 4
    return (a.x + a.y) + (a.z + a.w);
#else
    return a;
#endif
}

/* s = q·k for one key row (q already scaled) */
inline float ad_score(const adv *qv, const __global float *kr)
{
    adv sv = qv[0] * AD_LOAD(0, kr);
#pragma unroll
    for (int i = 1; i < AD_NV; i++) sv = fma(qv[i], AD_LOAD(i, kr), sv);
    return ad_hsum(sv);
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
#pragma unroll
    for (int i = 0; i < AD_NV; i++) {
        qv[i] = AD_LOAD(i, qr) * qscale;
        acc[i] = (adv)(0.0f);
    }
    const __global float *kb = k + ko + b * ksb + h * ksh, *vb = v + vo + b * vsb + h * vsh;
    const uint t0 = c * chunk, t1 = min(Nk, t0 + chunk);
    float m = -FLT_MAX, l = 0.0f;
#if WBCL_VARIANT_GPU
    /* one key at a time (no private score block: ptxas puts a 16-float array in a stack frame) */
    for (uint t = t0; t < t1; t++) {
        const __global float *vr = vb + t * vsn;
        const float s = ad_score(qv, kb + t * ksn);
        if (s > m) { /* the first key always: l and acc are 0, the rescale keeps them 0 */
            const float corr = exp2(m - s);
            l *= corr;
#pragma unroll
            for (int i = 0; i < AD_NV; i++) acc[i] *= corr;
            m = s;
        }
        const float e = exp2(s - m);
        l += e;
#pragma unroll
        for (int i = 0; i < AD_NV; i++) acc[i] = fma((adv)(e), AD_LOAD(i, vr), acc[i]);
    }
#else
    for (uint tb = t0; tb < t1; tb += AD_KB) { /* blocks of AD_KB keys: scores first (independent dot
                                                 products), one rescale and one vector exp2 per block,
                                                 then the values */
        const uint nb = min((uint)AD_KB, t1 - tb);
        float sc[AD_KB];
        for (uint u = 0; u < AD_KB; u++) {
            const float s = ad_score(qv, kb + (tb + min(u, nb - 1)) * ksn); /* past the chunk: a repeat, masked */
            sc[u] = u < nb ? s : -FLT_MAX;
        }
        const float16 s16 = vload16(0, sc);
        const float8 m8 = fmax(s16.lo, s16.hi);
        const float4 m4 = fmax(m8.lo, m8.hi);
        const float bm = fmax(fmax(m4.x, m4.y), fmax(m4.z, m4.w));
        if (bm > m) { /* the first block always: l and acc are 0, the rescale keeps them 0 */
            const float corr = exp2(m - bm);
            l *= corr;
#pragma unroll
            for (int i = 0; i < AD_NV; i++) acc[i] *= corr;
            m = bm;
        }
        float ew[AD_KB];
        const float16 e16 = exp2(s16 - (float16)(m)); /* the masked keys: 2^(-FLT_MAX - m) = 0 */
        vstore16(e16, 0, ew);
        {
            const float8 l8 = e16.lo + e16.hi;
            const float4 l4 = l8.lo + l8.hi;
            l += (l4.x + l4.y) + (l4.z + l4.w);
        }
        for (uint u = 0; u < nb; u++) {
            const __global float *vr = vb + (tb + u) * vsn;
            const adv e = (adv)(ew[u]);
#pragma unroll
            for (int i = 0; i < AD_NV; i++) acc[i] = fma(e, AD_LOAD(i, vr), acc[i]);
        }
    }
#endif
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
