/* wbcl — fused online-softmax attention (softmax MHA and MSSA), never
 * materializing the n_q x n_k scores. Driven by host/ops/attention.c.
 *
 * Per (batch b, head h), query i, with qs = q * scale * log2(e):
 *     m_i = max_j s_ij,  l_i = sum_j 2^(s_ij - m_i),  o_i = sum_j 2^(s_ij - m_i) v_j / l_i,
 * s_ij = qs_i . k_j, computed over key blocks with a running maximum and sum
 * (the accumulators are rescaled by 2^(m_old - m_new) when the maximum grows).
 *
 * Causal masking: query i (0-based) sees keys j <= i + (n_k - n_q). Key blocks
 * wholly beyond a query group's limit are skipped; inside a block that
 * straddles the limit (or the end of the keys) masked lanes get the finite
 * score -FLT_MAX for the maximum and an explicit weight of 0 (select), so no
 * -inf or NaN arithmetic is ever relied on. Key 0 is visible to every query,
 * so after the first block every running maximum is finite; 2^(m_old - m_new)
 * is evaluated on max(m_old - m_new, -160), which is 0 in float anyway.
 *
 * Addressing: element (b, h, i, c) of q / o is X[off + b*sb + h*sh + i*sn + c].
 *
 * Compile-time parameters (host: -D...):
 *   WBCL_ATT_P    head dimension p
 *   WBCL_ATT_PP   p rounded up to a multiple of WBCL_ATT_VW (padded V rows)
 *   WBCL_ATT_VW   vector width of the output accumulators (4, 8 or 16)
 *   WBCL_ATT_QB   CPU: queries per register group
 *   WBCL_ATT_G    CPU: register groups per work-item (K/V reuse from L1)
 *   WBCL_ATT_VC   CPU: accumulator vectors of a row per O += P V pass (a divisor of PP / VW; default
 *                 the whole row)
 *   WBCL_ATT_SP   CPU: 16-key panels per pass of the score loop over p: 2 (default) both panels of a
 *                 32-key block, 2 * QB score vectors of 16 live; 1 one panel after the other, QB live,
 *                 so that twice the queries fit the same registers (each score's sum over p is the
 *                 same either way: the results are bit for bit the same)
 *   WBCL_ATT_BQ   GPU: work-group size = queries per work-group
 *   WBCL_ATT_BK   GPU: keys per local-memory tile
 *   WBCL_ATT_HALF float16 storage, a bit mask (default 0): 1 q, 2 k, 4 v, 8 o. Those tensors are
 *                 read with vload_half and o written with vstore_half_rte (core OpenCL C 1.2,
 *                 no cl_khr_fp16); all arithmetic and the packed K/V panels stay float32.
 * OpenCL C 1.2. */

#define P WBCL_ATT_P
#define PP WBCL_ATT_PP
#define VW WBCL_ATT_VW
#define QB WBCL_ATT_QB
#define G WBCL_ATT_G
#define BQ WBCL_ATT_BQ
#define BK WBCL_ATT_BK

#ifndef WBCL_ATT_NO_TILED
#define WBCL_ATT_NO_TILED 0 /* 1: leave the register-tiled kernels out (host/ops/attention.c) */
#endif
#ifndef WBCL_ATT_NO_TILED2
#define WBCL_ATT_NO_TILED2 0 /* 1: leave the second register-tiled form (p = 32, 64) out */
#endif
#ifndef WBCL_ATT_NO_CPU
#define WBCL_ATT_NO_CPU 0 /* 1: leave the CPU-shaped kernels (packing, wbcl_attn_fused_cpu) out */
#endif
#ifndef WBCL_ATT_NO_GPU
#define WBCL_ATT_NO_GPU 0 /* 1: leave every GPU-shaped kernel out (the CPU variant's programs) */
#endif
#ifndef WBCL_ATT_NO_FUSED
#define WBCL_ATT_NO_FUSED 0 /* 1: leave the one-query GPU kernel out (the register-tiled kernels' programs) */
#endif
#ifndef WBCL_ATT_HALF
#define WBCL_ATT_HALF 0
#endif
/* storage type of each tensor and its scalar load / store as float */
#define WBCL_LDF(i, p) ((p)[i])
#define WBCL_LDH(i, p) vload_half((i), (p))
#if WBCL_ATT_HALF & 1
#define Q_T half
#define LD_Q WBCL_LDH
#else
#define Q_T float
#define LD_Q WBCL_LDF
#endif
#if WBCL_ATT_HALF & 2
#define K_T half
#define LD_K WBCL_LDH
#else
#define K_T float
#define LD_K WBCL_LDF
#endif
#if WBCL_ATT_HALF & 4
#define V_T half
#define LD_V WBCL_LDH
#else
#define V_T float
#define LD_V WBCL_LDF
#endif
#if WBCL_ATT_HALF & 8
#define O_T half
#define ST_O(x, i, p) vstore_half_rte((x), (i), (p))
#else
#define O_T float
#define ST_O(x, i, p) ((p)[i] = (x))
#endif

#define KP 16 /* keys per packed K panel (one float16 of scores) */
#define KB 32 /* keys per block: two panels                      */
#define NV (PP / VW)
#ifndef WBCL_ATT_VC
#define WBCL_ATT_VC NV /* CPU: accumulator vectors of a row per O += P V pass (a divisor of NV) */
#endif
#define VC WBCL_ATT_VC
#if NV % VC != 0
#error "WBCL_ATT_VC must divide WBCL_ATT_PP / WBCL_ATT_VW"
#endif
#ifndef WBCL_ATT_SP
#define WBCL_ATT_SP 2
#endif
#if WBCL_ATT_SP != 1 && WBCL_ATT_SP != 2
#error "WBCL_ATT_SP must be 1 or 2"
#endif
#define NEG_BIG (-FLT_MAX)
#define EXP2_FLOOR (-160.0f)

#if VW == 16
#define floatV float16
#define vloadV vload16
#define vstoreV vstore16
#elif VW == 8
#define floatV float8
#define vloadV vload8
#define vstoreV vstore8
#elif VW == 4
#define floatV float4
#define vloadV vload4
#define vstoreV vstore4
#else
#error "WBCL_ATT_VW must be 4, 8 or 16"
#endif

#if PP % VW != 0 || PP < P
#error "WBCL_ATT_PP must be a multiple of WBCL_ATT_VW, at least WBCL_ATT_P"
#endif

/* The register-tiled forms (p = 96 / 128, and the second form for p = 32 / 64): row x of an
 * unpadded P-float tile in local memory keeps its float4 at channel ch at SWZ(x, ch), the 16-byte
 * groups XOR-swizzled by the row so that a warp's reads of 8 rows fall in distinct banks; L4 is a
 * float4 of local memory at a float offset that is a multiple of 4 (the arrays are 16-byte aligned):
 * one 128-bit access (vload4 only assumes 4-byte alignment: four scalar loads). */
#define SWZ(x, ch) ((x) * P + ((ch) ^ (((x) & 7) << 2)))
#define L4(p) (*(__local float4 *)(p))

inline float wbcl_hmax16(float16 v)
{
    /* max (not fmax): no NaN handling needed, one instruction per step */
    float8 a = max(v.lo, v.hi);
    float4 b = max(a.lo, a.hi);
    float2 c = max(b.lo, b.hi);
    return max(c.x, c.y);
}

/* 2^x for x <= 0 (the online-softmax weights), in about 13 simple vector instructions instead
 * of a general exp2 (PoCL's exp2 and rint expand to long sequences): x is clamped below at -126
 * (2^-126 ~ 1e-38 instead of a smaller value or 0: negligible next to the row sum l >= 1, and
 * masked lanes are zeroed by select anyway); n = round-to-nearest(x) by adding and subtracting
 * 1.5 * 2^23 (exact for |x| < 2^22; plain IEEE arithmetic, which this build never relaxes),
 * f = x - n in [-1/2, 1/2], 2^f by the degree-6 polynomial of Cephes exp2f (relative error
 * ~2e-7), scaled by 2^n through the exponent bits. The result is finite and normal for every
 * finite input; for x > 0 (never passed here) it would be 2^x only up to x < 128. */
#define WBCL_ROUND_MAGIC 12582912.0f /* 1.5 * 2^23 */
inline float16 wbcl_exp2_neg16(float16 x)
{
    x = max(x, (float16)(-126.0f));
    const float16 t = x + (float16)(WBCL_ROUND_MAGIC);
    const int16 n = as_int16(t) - (int16)(0x4B400000);
    const float16 f = x - (t - (float16)(WBCL_ROUND_MAGIC));
    float16 r = (float16)(1.535336188319500e-4f);
    r = fma(r, f, (float16)(1.339887440266574e-3f));
    r = fma(r, f, (float16)(9.618437357674640e-3f));
    r = fma(r, f, (float16)(5.550332471162809e-2f));
    r = fma(r, f, (float16)(2.402264791363012e-1f));
    r = fma(r, f, (float16)(6.931472028550421e-1f));
    r = fma(r, f, (float16)(1.0f));
    return as_float16(as_int16(r) + (n << 23));
}

/* A program holds the kernels of one path (host/ops/attention.c options()): the CPU-shaped kernels
 * (-DWBCL_ATT_NO_GPU=1: the CPU variant, and the GPU variant's fallback), the register-tiled GPU kernels
 * (-DWBCL_ATT_NO_CPU=1 -DWBCL_ATT_NO_FUSED=1), or the one-query GPU kernel (-DWBCL_ATT_NO_CPU=1
 * -DWBCL_ATT_NO_TILED=1). Compiling a kernel that its context never launches costs time on a GPU driver:
 * clang-15's AMD back end spends about 50 s on wbcl_attn_fused_gpu (its fully unrolled key steps) at p = 64
 * and 85 s at p = 128, under a second on the register-tiled kernels' program, and 4-6 s on the CPU-shaped
 * one. */
#if !WBCL_ATT_NO_CPU
/* ---- CPU-shaped: packing -------------------------------------------------------------------
 * K panels: Kp[bh][panel][c][r] = k(b, h, panel*16 + r, c), zero for keys >= n_k; npan is even
 *           (whole 32-key blocks).
 * V rows:   Vp[bh][j][c] = v(b, h, j, c) for c < p, zero for c >= p or j >= n_k;
 *           npan*16 rows of PP.
 * global (npan*16, B*K): one work-item per (key, batch-head). */
__kernel void wbcl_attn_pack_k(__global const K_T *restrict k, const ulong off, const ulong sb, const ulong sh,
                               const ulong sn, const uint H, const uint BH, const uint Nk, const uint npan,
                               __global float *restrict kp)
{
    const uint j = get_global_id(0), bh = get_global_id(1);
    if (j >= npan * KP || bh >= BH) return;
    const uint b = bh / H, h = bh % H;
    __global float *d = kp + ((ulong)bh * npan + j / KP) * (P * KP) + (j % KP);
    if (j < Nk) {
        const __global K_T *s = k + off + b * sb + h * sh + (ulong)j * sn;
        for (uint c = 0; c < P; c++) d[c * KP] = LD_K(c, s);
    } else {
        for (uint c = 0; c < P; c++) d[c * KP] = 0.0f;
    }
}

__kernel void wbcl_attn_pack_v(__global const V_T *restrict v, const ulong off, const ulong sb, const ulong sh,
                               const ulong sn, const uint H, const uint BH, const uint Nk, const uint npan,
                               __global float *restrict vp)
{
    const uint j = get_global_id(0), bh = get_global_id(1);
    if (j >= npan * KP || bh >= BH) return;
    const uint b = bh / H, h = bh % H;
    __global float *d = vp + ((ulong)bh * npan * KP + j) * PP;
    if (j < Nk) {
        const __global V_T *s = v + off + b * sb + h * sh + (ulong)j * sn;
        for (uint c = 0; c < P; c++) d[c] = LD_V(c, s);
        for (uint c = P; c < PP; c++) d[c] = 0.0f;
    } else {
        for (uint c = 0; c < PP; c++) d[c] = 0.0f;
    }
}

/* ---- CPU-shaped: the fused kernel -------------------------------------------------------------
 * global (ceil(n_q / (QB*G)), B*K). A work-item owns G groups of QB consecutive queries of one
 * (b, h). For each 32-key block it visits its groups in turn: scores for QB queries x 32 keys
 * in 2*QB float16 registers (K panel rows broadcast against scalar q; SP = 1: QB registers, one
 * panel after the other), the online-softmax update, then O += P V with O in QB*VC vector
 * registers a pass (saved to / restored from a private array between passes and groups: L1
 * traffic, small next to the 2*QB*32*p FMAs per visit). The 32-key
 * block of K and V (32*p*8 bytes) stays in L1 across the G visits. No local memory, no
 * barriers: PoCL runs each work-item as one straight loop nest. */
__kernel void wbcl_attn_fused_cpu(__global const Q_T *restrict q, const ulong q_off, const ulong q_sb,
                                  const ulong q_sh, const ulong q_sn, __global const float *restrict kp,
                                  __global const float *restrict vp, __global O_T *restrict o, const ulong o_off,
                                  const ulong o_sb, const ulong o_sh, const ulong o_sn, const uint H, const uint BH,
                                  const uint Nq, const uint Nk, const uint npan, const uint causal,
                                  const float qscale)
{
    const uint qb = get_global_id(0), bh = get_global_id(1);
    const uint i0 = qb * (QB * G);
    if (i0 >= Nq || bh >= BH) return;
    const uint b = bh / H, h = bh % H;
    const uint shift = Nk - Nq; /* causal: query i sees keys j <= i + shift (host: Nq <= Nk) */
    const uint ilast = min(i0 + QB * G, Nq) - 1;
    const uint kend = causal ? min(Nk, ilast + shift + 1) : Nk;
    const uint nblk = (kend + KB - 1) / KB;
    const int16 iota = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);

    /* scaled queries; rows past n_q are zero (their results are never written) */
    float qs[G][QB][P];
    const __global Q_T *qbase = q + q_off + b * q_sb + h * q_sh;
    for (uint g = 0; g < G; g++)
        for (uint r = 0; r < QB; r++) {
            const uint i = i0 + g * QB + r;
            const __global Q_T *row = qbase + (ulong)i * q_sn;
            if (i < Nq)
                for (uint c = 0; c < P; c++) qs[g][r][c] = LD_Q(c, row) * qscale;
            else
                for (uint c = 0; c < P; c++) qs[g][r][c] = 0.0f;
        }

    floatV Os[G][QB][NV];
    float16 ls[G][QB];
    float ms[G][QB];
    for (uint g = 0; g < G; g++)
        for (uint r = 0; r < QB; r++) {
            for (uint v = 0; v < NV; v++) Os[g][r][v] = (floatV)(0.0f);
            ls[g][r] = (float16)(0.0f);
            ms[g][r] = NEG_BIG;
        }

    const __global float *kpb = kp + (ulong)bh * npan * (KP * P);
    const __global float *vpb = vp + (ulong)bh * npan * (KP * PP);
    float Pa[QB][KB];

    for (uint kb = 0; kb < nblk; kb++) {
        const uint j0 = kb * KB;
        const __global float *k0 = kpb + (ulong)(2 * kb) * (KP * P);
        const __global float *k1 = k0 + KP * P;
        const __global float *vb = vpb + (ulong)j0 * PP;
        for (uint g = 0; g < G; g++) {
            const uint gi0 = i0 + g * QB;
            if (gi0 >= Nq) break;
            const uint glast = min(gi0 + QB, Nq) - 1;
            if (causal && j0 > glast + shift) continue; /* the whole block is in this group's future */
            const int need_mask = (j0 + KB > Nk) || (causal && j0 + KB - 1 > gi0 + shift);

            float16 S0[QB], S1[QB];
#pragma unroll
            for (int r = 0; r < QB; r++) S0[r] = S1[r] = (float16)(0.0f);
#if WBCL_ATT_SP == 2
            for (uint c = 0; c < P; c++) {
                const float16 ka = vload16(0, k0 + c * KP), kb16 = vload16(0, k1 + c * KP);
#pragma unroll
                for (int r = 0; r < QB; r++) {
                    const float16 qv = (float16)(qs[g][r][c]);
                    S0[r] = fma(qv, ka, S0[r]);
                    S1[r] = fma(qv, kb16, S1[r]);
                }
            }
#else
            /* one panel at a time: QB x 16 scores live (AVX2, QB 6: 12 accumulators of 8 floats, the 6 x 16
             * register tile of the classic AVX2 SGEMM kernels, where both panels allowed QB 2: 8) */
            for (uint c = 0; c < P; c++) {
                const float16 ka = vload16(0, k0 + c * KP);
#pragma unroll
                for (int r = 0; r < QB; r++) S0[r] = fma((float16)(qs[g][r][c]), ka, S0[r]);
            }
            for (uint c = 0; c < P; c++) {
                const float16 kb16 = vload16(0, k1 + c * KP);
#pragma unroll
                for (int r = 0; r < QB; r++) S1[r] = fma((float16)(qs[g][r][c]), kb16, S1[r]);
            }
#endif

#if VC == NV
            floatV O[QB][NV];
#pragma unroll
            for (int r = 0; r < QB; r++)
#pragma unroll
                for (int v = 0; v < NV; v++) O[r][v] = Os[g][r][v];
#endif

#pragma unroll
            for (int r = 0; r < QB; r++) {
                float16 s0 = S0[r], s1 = S1[r];
                int16 ok0 = (int16)(-1), ok1 = (int16)(-1);
                if (need_mask) {
                    const int lim = causal ? min((int)Nk - 1, (int)(gi0 + r + shift)) : (int)Nk - 1;
                    const int16 jv = (int16)((int)j0) + iota;
                    ok0 = jv <= (int16)(lim);
                    ok1 = (jv + (int16)(KP)) <= (int16)(lim);
                    s0 = select((float16)(NEG_BIG), s0, ok0);
                    s1 = select((float16)(NEG_BIG), s1, ok1);
                }
                const float mold = ms[g][r];
                const float mnew = max(mold, wbcl_hmax16(max(s0, s1)));
                float16 p0 = wbcl_exp2_neg16(s0 - (float16)(mnew)), p1 = wbcl_exp2_neg16(s1 - (float16)(mnew));
                if (need_mask) {
                    p0 = select((float16)(0.0f), p0, ok0);
                    p1 = select((float16)(0.0f), p1, ok1);
                }
                if (mnew > mold) { /* rescale only when the maximum grows (rare after the first blocks) */
                    const float alpha = exp2(max(mold - mnew, EXP2_FLOOR));
                    ls[g][r] *= alpha;
#if VC == NV
#pragma unroll
                    for (int v = 0; v < NV; v++) O[r][v] *= alpha;
#else
                    for (int v = 0; v < NV; v++) Os[g][r][v] *= alpha;
#endif
                    ms[g][r] = mnew;
                }
                ls[g][r] += p0 + p1;
                vstore16(p0, 0, &Pa[r][0]);
                vstore16(p1, 0, &Pa[r][KP]);
            }

            /* O += P V a pass of VC vectors of each row at a time: QB * VC accumulators in registers (a
             * device with fewer vector registers than QB * NV takes the row in turns; the stashed
             * accumulators, P and the V rows' slices come from L1). VC == NV: one pass, with O loaded
             * before the softmax step above, as it rescales them in registers. */
            for (uint v0 = 0; v0 < NV; v0 += VC) {
#if VC != NV
                floatV O[QB][VC];
#pragma unroll
                for (int r = 0; r < QB; r++)
#pragma unroll
                    for (int v = 0; v < VC; v++) O[r][v] = Os[g][r][v0 + v];
#endif
                for (uint jj = 0; jj < KB; jj++) {
                    const __global float *vr = vb + jj * PP + v0 * VW;
#pragma unroll
                    for (int v = 0; v < VC; v++) {
                        const floatV vv = vloadV(v, vr);
#pragma unroll
                        for (int r = 0; r < QB; r++) O[r][v] = fma((floatV)(Pa[r][jj]), vv, O[r][v]);
                    }
                }
#pragma unroll
                for (int r = 0; r < QB; r++)
#pragma unroll
                    for (int v = 0; v < VC; v++) Os[g][r][v0 + v] = O[r][v];
            }
        }
    }

    __global O_T *obase = o + o_off + b * o_sb + h * o_sh;
    for (uint g = 0; g < G; g++)
        for (uint r = 0; r < QB; r++) {
            const uint i = i0 + g * QB + r;
            if (i >= Nq) continue;
            const float inv = 1.0f / wbcl_hsum16(ls[g][r]);
            float row[PP];
            for (uint v = 0; v < NV; v++) vstoreV(Os[g][r][v] * inv, v, row);
            __global O_T *dst = obase + (ulong)i * o_sn;
            for (uint c = 0; c < P; c++) ST_O(row[c], c, dst);
        }
}
#endif /* !WBCL_ATT_NO_CPU */

#if !WBCL_ATT_NO_GPU
#if !WBCL_ATT_NO_FUSED
/* ---- GPU-shaped ---------------------------------------------------------------------------------
 * global (ceil(n_q / BQ) * BQ, B*K), local (BQ, 1): one query per work-item, the work-group's
 * BQ queries share BK-key tiles of K and V loaded cooperatively (coalesced) into local memory.
 * Per tile: BK scores in registers (unrolled), one online-softmax update, O += P V.
 * Work-items past n_q take part in the loads and barriers but write nothing. */
__kernel __attribute__((reqd_work_group_size(BQ, 1, 1))) void wbcl_attn_fused_gpu(
    __global const Q_T *restrict q, const ulong q_off, const ulong q_sb, const ulong q_sh, const ulong q_sn,
    __global const K_T *restrict k, const ulong k_off, const ulong k_sb, const ulong k_sh, const ulong k_sn,
    __global const V_T *restrict v, const ulong v_off, const ulong v_sb, const ulong v_sh, const ulong v_sn,
    __global O_T *restrict o, const ulong o_off, const ulong o_sb, const ulong o_sh, const ulong o_sn,
    const uint H, const uint BH, const uint Nq, const uint Nk, const uint causal, const float qscale)
{
    __local float Ks[BK * P];
    __local float Vs[BK * P];
    const uint lid = get_local_id(0), grp = get_group_id(0), bh = get_global_id(1);
    if (bh >= BH) return; /* uniform over the work-group (local size 1 in dimension 1) */
    const uint b = bh / H, h = bh % H;
    const uint i = grp * BQ + lid;
    const uint shift = Nk - Nq;
    const uint glast = min(grp * BQ + BQ, Nq) - 1;
    const uint kend = causal ? min(Nk, glast + shift + 1) : Nk; /* uniform over the work-group */
    const uint lim = causal ? min(Nk - 1, i + shift) : Nk - 1;
    const int active = i < Nq;

    float qv[P], acc[P];
    const __global Q_T *qrow = q + q_off + b * q_sb + h * q_sh + (ulong)(active ? i : 0) * q_sn;
    for (uint c = 0; c < P; c++) {
        qv[c] = active ? LD_Q(c, qrow) * qscale : 0.0f;
        acc[c] = 0.0f;
    }
    float m = NEG_BIG, l = 0.0f;
    const __global K_T *kb = k + k_off + b * k_sb + h * k_sh;
    const __global V_T *vb = v + v_off + b * v_sb + h * v_sh;

    for (uint j0 = 0; j0 < kend; j0 += BK) {
        const uint nk = min((uint)BK, kend - j0);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint e = lid; e < BK * P; e += BQ) {
            const uint jj = e / P, c = e % P;
            const int in = jj < nk;
            Ks[e] = in ? LD_K((ulong)(j0 + jj) * k_sn + c, kb) : 0.0f;
            Vs[e] = in ? LD_V((ulong)(j0 + jj) * v_sn + c, vb) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        float s[BK];
        float mx = NEG_BIG;
#pragma unroll
        for (int jj = 0; jj < BK; jj++) {
            float d = 0.0f;
            for (uint c = 0; c < P; c++) d = fma(qv[c], Ks[jj * P + c], d);
            const int ok = (uint)jj < nk && j0 + jj <= lim;
            s[jj] = ok ? d : NEG_BIG;
            mx = fmax(mx, s[jj]);
        }
        const float mnew = fmax(m, mx);
        const float alpha = exp2(fmax(m - mnew, EXP2_FLOOR));
        l *= alpha;
        for (uint c = 0; c < P; c++) acc[c] *= alpha;
#pragma unroll
        for (int jj = 0; jj < BK; jj++) {
            const int ok = (uint)jj < nk && j0 + jj <= lim;
            const float pj = ok ? exp2(s[jj] - mnew) : 0.0f;
            l += pj;
            for (uint c = 0; c < P; c++) acc[c] = fma(pj, Vs[jj * P + c], acc[c]);
        }
        m = mnew;
    }
    if (active) {
        const float inv = 1.0f / l;
        __global O_T *orow = o + o_off + b * o_sb + h * o_sh + (ulong)i * o_sn;
        for (uint c = 0; c < P; c++) ST_O(acc[c] * inv, c, orow);
    }
}
#endif /* !WBCL_ATT_NO_FUSED */

/* ---- GPU-shaped, register-tiled (P = 32 or 64) ------------------------------------------------
 * wbcl_attn_fused_gpu above gives each work-item one query, so every score and every output
 * update reads one local-memory value per FMA. Here a work-group of 128 work-items takes TQ = 64
 * queries and visits the keys in tiles of TK = 32, and each work-item computes small register
 * tiles of the two products, reading each local value once for several FMAs:
 *   S = Q Kᵀ   work-item (r, c) of a 16 x 8 grid: queries r + 16 i and keys c + 8 j (i, j < 4),
 *              4 channels at a time: 4 + 4 float4 loads for 64 FMAs;
 *   O += P V   queries 4 r .. 4 r + 3 and channels 4 c + 32 u (u < P / 32): per key one float4 of
 *              P and P / 32 float4 of V for 4 * P / 8 FMAs.
 * The row statistics go through local memory: each work-item's per-query maximum (then sum) over
 * its 4 keys into part[c][q]; work-items q < 64 fold the 8 partials of row q into the running
 * maximum m[q], the rescale factor alpha[q] = 2^(m_old - m_new) and the running sum l[q].
 * Rows of Qs and Ks are P + 4 floats long and rows of Ps 68, so that the float4 reads of 32
 * consecutive work-items (r of 4 values, c of 8) fall in distinct banks or broadcast. Local
 * memory: 4 (64 (P+4) + 32 (P+4) + 32 P + 32 * 68 + 8 * 64 + 3 * 64) bytes, 44.8 KiB at P = 64,
 * 28.8 KiB at P = 32. Masking as in the kernels above: masked scores get -FLT_MAX for the
 * maximum and a weight of exactly 0. Rows past n_q compute on zero queries and are not written.
 * Chosen by host/ops/attention.c for GPU-variant contexts when the parameter attention.tiled is 1
 * (the default at p = 64), or 2 where the second form does not fit, and the device has the
 * work-group size and local memory. */
#if WBCL_ATT_NO_TILED
/* left out: the device lacks the local memory or work-group size (host/ops/attention.c options) */
#elif WBCL_ATT_P == 32 || WBCL_ATT_P == 64
#define TQ 64
#define TK 32
#define TPS (P + 4)  /* row stride of Qs and Ks     */
#define TPP (TQ + 4) /* row stride of Ps: [key][q]  */
#define TU (P / 32)  /* float4 channel groups per work-item in O */

__kernel __attribute__((reqd_work_group_size(128, 1, 1))) void wbcl_attn_tiled_gpu(
    __global const Q_T *restrict q, const ulong q_off, const ulong q_sb, const ulong q_sh, const ulong q_sn,
    __global const K_T *restrict k, const ulong k_off, const ulong k_sb, const ulong k_sh, const ulong k_sn,
    __global const V_T *restrict v, const ulong v_off, const ulong v_sb, const ulong v_sh, const ulong v_sn,
    __global O_T *restrict o, const ulong o_off, const ulong o_sb, const ulong o_sh, const ulong o_sn,
    const uint H, const uint BH, const uint Nq, const uint Nk, const uint causal, const float qscale)
{
    __local float Qs[TQ * TPS], Ks[TK * TPS], Vs[TK * P], Ps[TK * TPP];
    __local float part[8 * TQ], mrow[TQ], arow[TQ], lrow[TQ];
    const uint lid = get_local_id(0), bh = get_global_id(1);
    if (bh >= BH) return; /* uniform over the work-group */
    const uint b = bh / H, h = bh % H;
    const uint q0 = get_group_id(0) * TQ, shift = Nk - Nq;
    const uint glast = min(q0 + TQ, Nq) - 1;
    const uint kend = causal ? min(Nk, glast + shift + 1) : Nk; /* uniform */
    const uint r = lid / 8, c = lid % 8;

    const __global Q_T *qb = q + q_off + b * q_sb + h * q_sh;
    const __global K_T *kb = k + k_off + b * k_sb + h * k_sh;
    const __global V_T *vb = v + v_off + b * v_sb + h * v_sh;
    for (uint e = lid; e < TQ * P; e += 128) { /* coalesced along the channels */
        const uint qq = e / P, ch = e % P;
        Qs[qq * TPS + ch] = q0 + qq < Nq ? LD_Q((ulong)(q0 + qq) * q_sn + ch, qb) * qscale : 0.0f;
    }
    if (lid < TQ) {
        mrow[lid] = NEG_BIG;
        lrow[lid] = 0.0f;
    }
    float4 O[4][TU];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int u = 0; u < TU; u++) O[i][u] = (float4)(0.0f);
    /* the visibility limits of the S-tile's 4 queries (causal), and past n_k */
    int lim[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint qi = q0 + r + 16 * i;
        lim[i] = causal ? (int)min(Nk - 1, qi + shift) : (int)Nk - 1;
    }

    for (uint j0 = 0; j0 < kend; j0 += TK) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's readers of Ks, Vs, Ps are done */
        for (uint e = lid; e < TK * P; e += 128) {
            const uint jj = e / P, ch = e % P;
            const int in = j0 + jj < Nk;
            Ks[jj * TPS + ch] = in ? LD_K((ulong)(j0 + jj) * k_sn + ch, kb) : 0.0f;
            Vs[jj * P + ch] = in ? LD_V((ulong)(j0 + jj) * v_sn + ch, vb) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* S: queries r + 16 i, keys c + 8 j */
        float s[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) s[i][j] = 0.0f;
        for (uint ch = 0; ch < P; ch += 4) {
            float4 qv[4], kv[4];
#pragma unroll
            for (int i = 0; i < 4; i++) qv[i] = vload4(0, Qs + (r + 16 * i) * TPS + ch);
#pragma unroll
            for (int j = 0; j < 4; j++) kv[j] = vload4(0, Ks + (c + 8 * j) * TPS + ch);
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    s[i][j] = fma(qv[i].x, kv[j].x, s[i][j]);
                    s[i][j] = fma(qv[i].y, kv[j].y, s[i][j]);
                    s[i][j] = fma(qv[i].z, kv[j].z, s[i][j]);
                    s[i][j] = fma(qv[i].w, kv[j].w, s[i][j]);
                }
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float mx = NEG_BIG;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int key = (int)(j0 + c + 8 * j);
                if (key > lim[i]) s[i][j] = NEG_BIG;
                mx = fmax(mx, s[i][j]);
            }
            part[c * TQ + r + 16 * i] = mx;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < TQ) { /* row lid: the new running maximum and the rescale factor */
            float mx = mrow[lid];
#pragma unroll
            for (int cc = 0; cc < 8; cc++) mx = fmax(mx, part[cc * TQ + lid]);
            arow[lid] = exp2(fmax(mrow[lid] - mx, EXP2_FLOOR));
            mrow[lid] = mx;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint qq = r + 16 * i;
            const float mq = mrow[qq];
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int key = (int)(j0 + c + 8 * j);
                const float p = key <= lim[i] ? exp2(s[i][j] - mq) : 0.0f;
                Ps[(c + 8 * j) * TPP + qq] = p;
                sum += p;
            }
            part[c * TQ + qq] = sum;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < TQ) {
            float sum = 0.0f;
#pragma unroll
            for (int cc = 0; cc < 8; cc++) sum += part[cc * TQ + lid];
            lrow[lid] = lrow[lid] * arow[lid] + sum;
        }
        /* O: queries 4 r .. 4 r + 3, channels 4 c + 32 u */
        const float4 al = vload4(0, arow + 4 * r);
#pragma unroll
        for (int u = 0; u < TU; u++) {
            O[0][u] *= al.x;
            O[1][u] *= al.y;
            O[2][u] *= al.z;
            O[3][u] *= al.w;
        }
        const uint nk = min((uint)TK, kend - j0);
        for (uint jj = 0; jj < nk; jj++) {
            const float4 pv = vload4(0, Ps + jj * TPP + 4 * r);
#pragma unroll
            for (int u = 0; u < TU; u++) {
                const float4 vv = vload4(0, Vs + jj * P + 4 * c + 32 * u);
                O[0][u] = fma((float4)(pv.x), vv, O[0][u]);
                O[1][u] = fma((float4)(pv.y), vv, O[1][u]);
                O[2][u] = fma((float4)(pv.z), vv, O[2][u]);
                O[3][u] = fma((float4)(pv.w), vv, O[3][u]);
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE); /* the last tile's l */
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint qi = q0 + 4 * r + i;
        if (qi >= Nq) continue;
        const float inv = 1.0f / lrow[4 * r + i];
        __global O_T *orow = o + o_off + b * o_sb + h * o_sh + (ulong)qi * o_sn;
#pragma unroll
        for (int u = 0; u < TU; u++) {
            const float4 x = O[i][u] * inv;
            const uint ch = 4 * c + 32 * u;
            ST_O(x.x, ch, orow);
            ST_O(x.y, ch + 1, orow);
            ST_O(x.z, ch + 2, orow);
            ST_O(x.w, ch + 3, orow);
        }
    }
}
#undef TQ
#undef TK
#undef TPS
#undef TPP
#undef TU

/* ---- GPU-shaped, register-tiled (P = 96 or 128) -----------------------------------------------
 * The same idea as above, fitted to 48 KiB of local memory (NVIDIA's limit per work-group): at
 * P = 128 the layout above would need ~77 KiB. A work-group of 128 work-items takes TQ = 64
 * queries (Q stays in local memory for the whole key loop, 32 KiB at P = 128) and visits the keys
 * in tiles of TK = 16. Register tiles per work-item:
 *   S = Q Kᵀ   work-item (r, c) of a 16 x 8 grid: queries r + 16 i (i < 4) and keys c + 8 j (j < 2),
 *              4 channels at a time: 4 + 2 float4 loads for 32 FMAs;
 *   O += P V   P = 128: queries 8 a .. 8 a + 7 and channels 4 b + 64 u (u < 2), a 8 x 16 grid: per
 *              key 2 float4 of P and 2 float4 of V for 64 FMAs (the P = 64 kernel: 3 for 32);
 *              P = 96: queries 4 a .. 4 a + 3 and channels 4 b + 32 u (u < 3), 16 x 8: 1 + 3 for 48.
 *              64 (48) accumulators per work-item.
 * Rows of Qs and Ks are P floats, unpadded: the float4 at channel ch of row x is stored at
 * x P + (ch ^ 4 (x & 7)) (XOR swizzle of the 16-byte groups), so that the 4 query rows and the 8
 * key rows a warp reads at once lie in distinct banks (P is a multiple of 32). Vs is row-major.
 * Local memory: Qs 64 P + KX max(16 P, 1664) + Vs 16 P floats: 48 KiB at P = 128 (exactly the
 * limit), 36.5 KiB at P = 96. KX holds the K tile while S is computed, then (after a barrier) the
 * tile's weights Ps[key][q] (row stride 68: conflict-free writes), the partial row maxima [q][c]
 * and the rescale factors alpha[q]: 1088 + 512 + 64 = 1664 floats.
 * Row statistics: every work-item keeps the running maximum m of its 4 S-queries in registers
 * (the 8 work-items sharing a query compute the same value from the same partial maxima, so no
 * second exchange is needed) and a partial running sum over its own keys only, rescaled by the
 * same alpha; the 8 partial sums are added through local memory once, at the end. Per tile: 5
 * barriers (tile free, tile loaded, K read, maxima written, weights written). Masking as above
 * (-FLT_MAX scores, weights exactly 0); keys at or past the work-group's last visible key are
 * loaded as 0. Rows past n_q compute on zero queries and are not written. */
#elif WBCL_ATT_P == 96 || WBCL_ATT_P == 128
#define TQ 64
#define TK 16
#define TPP (TQ + 4) /* row stride of the weights Ps: [key][q] */
#if WBCL_ATT_P == 128
#define OQ 8 /* queries per work-item in O     */
#define TU 2 /* float4 channel groups in O     */
#else
#define OQ 4
#define TU 3
#endif
#define NB (2 * OQ)         /* channel groups of O: (TQ / OQ) x NB = 128 work-items */
#define XPM (TK * TPP)      /* KX: partial maxima (end: partial sums), [q][c]        */
#define XAL (XPM + 8 * TQ)  /* KX: alpha per query                                   */
#define XN (XAL + TQ)       /* KX: floats of the statistics and weights              */
#define KXN (TK * P > XN ? TK * P : XN)

__kernel __attribute__((reqd_work_group_size(128, 1, 1))) void wbcl_attn_tiled_gpu(
    __global const Q_T *restrict q, const ulong q_off, const ulong q_sb, const ulong q_sh, const ulong q_sn,
    __global const K_T *restrict k, const ulong k_off, const ulong k_sb, const ulong k_sh, const ulong k_sn,
    __global const V_T *restrict v, const ulong v_off, const ulong v_sb, const ulong v_sh, const ulong v_sn,
    __global O_T *restrict o, const ulong o_off, const ulong o_sb, const ulong o_sh, const ulong o_sn,
    const uint H, const uint BH, const uint Nq, const uint Nk, const uint causal, const float qscale)
{
    __local float Qs[TQ * P] __attribute__((aligned(16))), KX[KXN] __attribute__((aligned(16))),
        Vs[TK * P] __attribute__((aligned(16)));
    const uint lid = get_local_id(0), bh = get_global_id(1);
    if (bh >= BH) return; /* uniform over the work-group */
    const uint b = bh / H, h = bh % H;
    const uint q0 = get_group_id(0) * TQ, shift = Nk - Nq;
    const uint glast = min(q0 + TQ, Nq) - 1;
    const uint kend = causal ? min(Nk, glast + shift + 1) : Nk; /* uniform */
    const uint r = lid / 8, c = lid % 8;     /* S: queries r + 16 i, keys c + 8 j            */
    const uint a = lid / NB, bb = lid % NB;  /* O: queries OQ a + i, channels 4 bb + 4 NB u  */
    const uint xq = (r & 7) << 2, xk = c << 2; /* the swizzle of S's query rows and key rows */

    const __global Q_T *qb = q + q_off + b * q_sb + h * q_sh;
    const __global K_T *kb = k + k_off + b * k_sb + h * k_sh;
    const __global V_T *vb = v + v_off + b * v_sb + h * v_sh;
    for (uint e = lid; e < TQ * P; e += 128) { /* coalesced along the channels */
        const uint qq = e / P, ch = e % P;
        Qs[SWZ(qq, ch)] = q0 + qq < Nq ? LD_Q((ulong)(q0 + qq) * q_sn + ch, qb) * qscale : 0.0f;
    }
    float4 O[OQ][TU];
#pragma unroll
    for (int i = 0; i < OQ; i++)
#pragma unroll
        for (int u = 0; u < TU; u++) O[i][u] = (float4)(0.0f);
    float m[4], lp[4]; /* S-queries r + 16 i: running maximum, partial running sum (own keys) */
#pragma unroll
    for (int i = 0; i < 4; i++) {
        m[i] = NEG_BIG;
        lp[i] = 0.0f;
    }

    for (uint j0 = 0; j0 < kend; j0 += TK) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's readers of KX and Vs are done */
        for (uint e = lid; e < TK * P; e += 128) {
            const uint jj = e / P, ch = e % P;
            const int in = j0 + jj < kend;
            KX[SWZ(jj, ch)] = in ? LD_K((ulong)(j0 + jj) * k_sn + ch, kb) : 0.0f;
            Vs[jj * P + ch] = in ? LD_V((ulong)(j0 + jj) * v_sn + ch, vb) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        float s[4][2];
#pragma unroll
        for (int i = 0; i < 4; i++) s[i][0] = s[i][1] = 0.0f;
        for (uint ch = 0; ch < P; ch += 4) {
            float4 kv[2];
#pragma unroll
            for (int j = 0; j < 2; j++) kv[j] = L4(KX + (c + 8 * j) * P + (ch ^ xk));
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float4 qv = L4(Qs + (r + 16 * i) * P + (ch ^ xq));
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    s[i][j] = fma(qv.x, kv[j].x, s[i][j]);
                    s[i][j] = fma(qv.y, kv[j].y, s[i][j]);
                    s[i][j] = fma(qv.z, kv[j].z, s[i][j]);
                    s[i][j] = fma(qv.w, kv[j].w, s[i][j]);
                }
            }
        }
        float mx[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int lim = causal ? (int)min(Nk - 1, q0 + r + 16 * i + shift) : (int)Nk - 1;
            mx[i] = NEG_BIG;
#pragma unroll
            for (int j = 0; j < 2; j++) {
                if ((int)(j0 + c + 8 * j) > lim) s[i][j] = NEG_BIG;
                mx[i] = fmax(mx[i], s[i][j]);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* the K tile is read: KX takes the statistics */
#pragma unroll
        for (int i = 0; i < 4; i++) KX[XPM + (r + 16 * i) * 8 + c] = mx[i];
        barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint qq = r + 16 * i;
            const float4 p0 = L4(KX + XPM + qq * 8), p1 = L4(KX + XPM + qq * 8 + 4);
            const float4 p01 = fmax(p0, p1);
            const float mnew = fmax(m[i], fmax(fmax(p01.x, p01.y), fmax(p01.z, p01.w)));
            const float alpha = exp2(fmax(m[i] - mnew, EXP2_FLOOR));
            m[i] = mnew;
            const int lim = causal ? (int)min(Nk - 1, q0 + qq + shift) : (int)Nk - 1;
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const float p = (int)(j0 + c + 8 * j) <= lim ? exp2(s[i][j] - mnew) : 0.0f;
                KX[(c + 8 * j) * TPP + qq] = p;
                sum += p;
            }
            lp[i] = lp[i] * alpha + sum;
            if (c == 0) KX[XAL + qq] = alpha;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* O: queries OQ a .. OQ a + OQ - 1, channels 4 bb + 4 NB u */
#pragma unroll
        for (int i4 = 0; i4 < OQ / 4; i4++) {
            const float4 al = L4(KX + XAL + OQ * a + 4 * i4);
#pragma unroll
            for (int u = 0; u < TU; u++) {
                O[4 * i4 + 0][u] *= al.x;
                O[4 * i4 + 1][u] *= al.y;
                O[4 * i4 + 2][u] *= al.z;
                O[4 * i4 + 3][u] *= al.w;
            }
        }
#pragma unroll
        for (int jj = 0; jj < TK; jj++) {
            float4 vv[TU];
#pragma unroll
            for (int u = 0; u < TU; u++) vv[u] = L4(Vs + jj * P + 4 * bb + 4 * NB * u);
#pragma unroll
            for (int i4 = 0; i4 < OQ / 4; i4++) {
                const float4 pv = L4(KX + jj * TPP + OQ * a + 4 * i4);
#pragma unroll
                for (int u = 0; u < TU; u++) {
                    O[4 * i4 + 0][u] = fma((float4)(pv.x), vv[u], O[4 * i4 + 0][u]);
                    O[4 * i4 + 1][u] = fma((float4)(pv.y), vv[u], O[4 * i4 + 1][u]);
                    O[4 * i4 + 2][u] = fma((float4)(pv.z), vv[u], O[4 * i4 + 2][u]);
                    O[4 * i4 + 3][u] = fma((float4)(pv.w), vv[u], O[4 * i4 + 3][u]);
                }
            }
        }
    }
    /* the row sums: the 8 partial sums of each query through KX; the normalized O tile is staged in
     * Qs (no longer read) and written out coalesced along the channels */
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int i = 0; i < 4; i++) KX[XPM + (r + 16 * i) * 8 + c] = lp[i];
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int i = 0; i < OQ; i++) {
        const uint qq = OQ * a + i;
        const float4 l4 = L4(KX + XPM + qq * 8) + L4(KX + XPM + qq * 8 + 4);
        const float inv = 1.0f / ((l4.x + l4.y) + (l4.z + l4.w));
#pragma unroll
        for (int u = 0; u < TU; u++) L4(Qs + qq * P + 4 * bb + 4 * NB * u) = O[i][u] * inv;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    __global O_T *ob = o + o_off + b * o_sb + h * o_sh;
    for (uint e = lid; e < TQ * P; e += 128) {
        const uint qq = e / P, ch = e % P;
        if (q0 + qq < Nq) ST_O(Qs[e], (ulong)(q0 + qq) * o_sn + ch, ob);
    }
}
#undef TQ
#undef TK
#undef TPP
#undef OQ
#undef TU
#undef NB
#undef XPM
#undef XAL
#undef XN
#undef KXN
#endif

/* ---- GPU-shaped, register-tiled, second form (P = 32 or 64; attention.tiled = 2) ---------------
 * wbcl_attn_tiled2_gpu, issue 17: the first form above with more FMAs per local read and fewer
 * barriers per key, using the ideas of the p = 96 / 128 form. A work-group of 128 work-items takes
 * TQ = 64 queries and visits the keys in tiles of TK = 64. Work-item (r, c) of a 16 x 8 grid
 * (r = lid / 8, c = lid % 8) owns the queries r + 16 i (i < 4) in both products:
 *   S = Q Kᵀ   keys c + 8 j (j < 8): a 4 x 8 tile, 4 channels at a time from 4 + 8 aligned float4
 *              reads for 128 FMAs (the first form: 8 for 64);
 *   O += P V   channels 4 c + 32 u (u < P / 32): per key one float4 of weights (the 4 queries) and
 *              P / 32 float4 of V for 4 P / 8 FMAs (p = 64: 3 reads for 32 FMAs).
 * Because both tiles have the same queries, each work-item keeps the running maximum m of its 4
 * queries in registers and computes the rescale factor itself: the 8 work-items of a row r compute
 * the same maximum from the same 8 partial maxima, and nothing but the partial maxima is exchanged
 * per tile. The running sum is kept per work-item over its own keys (rescaled by the same factor);
 * the 8 partial sums of a query are added once, at the end, through local memory.
 * Local memory (floats; rows unpadded, XOR swizzle of the 16-byte groups so that the float4 reads
 * of a warp fall in distinct banks or broadcast):
 *   Qs  64 x P   query row x, channel ch at x P + (ch ^ 4 (x & 7)); after the key loop it stages
 *                the normalized O tile, written out coalesced along the channels
 *   KX  the K tile (64 x P, swizzled as Qs) while S is computed, then the weights Ps: key row x
 *       (64 floats), the 4 queries r + 16 i of work-item row r as one float4 at group r ^ (x & 7);
 *       the partial maxima (at the end the partial sums) [q][c], 64 x 8 floats, at XS
 *   Vs  64 x P   row-major
 * p = 64: 3 x 4096 floats = 48 KiB, exactly NVIDIA's limit per work-group: KX is all weights, so
 * the partial maxima share its start (XS = 0) and the tile takes 6 barriers (tile free, tile loaded,
 * K read, maxima written, maxima read, weights written), 6 per 64 keys against the first form's 9-10;
 * p = 32: 2048 + 4608 + 2048 floats = 34 KiB, the maxima after the weights (XS = 4096) and 4
 * barriers per tile (no "K read": the maxima do not overlap K; no "maxima read": the weights do not
 * overlap them). Tiles whose 64 keys every query of the work-group sees skip the masking (uniform
 * test); elsewhere masking as in the kernels above (-FLT_MAX scores, weights exactly 0), keys at or
 * past the work-group's last visible key loaded as 0. Rows past n_q compute on zero queries and are
 * not written. Chosen by host/ops/attention.c for GPU-variant contexts when attention.tiled is 2 and
 * the device has the work-group size and the local memory (else -DWBCL_ATT_NO_TILED2=1 leaves it
 * out of the program). */
#if !WBCL_ATT_NO_TILED && !WBCL_ATT_NO_TILED2 && (WBCL_ATT_P == 32 || WBCL_ATT_P == 64)
#define TQ 64
#define TK 64
#define TU (P / 32) /* float4 channel groups of O per work-item */
#if P == 32
#define STATS_APART 1
#define XS (TK * TQ)
#define KXN (TK * TQ + 8 * TQ)
#else
#define STATS_APART 0
#define XS 0
#define KXN (TK * TQ)
#endif

__kernel __attribute__((reqd_work_group_size(128, 1, 1))) void wbcl_attn_tiled2_gpu(
    __global const Q_T *restrict q, const ulong q_off, const ulong q_sb, const ulong q_sh, const ulong q_sn,
    __global const K_T *restrict k, const ulong k_off, const ulong k_sb, const ulong k_sh, const ulong k_sn,
    __global const V_T *restrict v, const ulong v_off, const ulong v_sb, const ulong v_sh, const ulong v_sn,
    __global O_T *restrict o, const ulong o_off, const ulong o_sb, const ulong o_sh, const ulong o_sn,
    const uint H, const uint BH, const uint Nq, const uint Nk, const uint causal, const float qscale)
{
    __local float Qs[TQ * P] __attribute__((aligned(16))), KX[KXN] __attribute__((aligned(16))),
        Vs[TK * P] __attribute__((aligned(16)));
    const uint lid = get_local_id(0), bh = get_global_id(1);
    if (bh >= BH) return; /* uniform over the work-group */
    const uint b = bh / H, h = bh % H;
    const uint q0 = get_group_id(0) * TQ, shift = Nk - Nq;
    const uint glast = min(q0 + TQ, Nq) - 1;
    const uint kend = causal ? min(Nk, glast + shift + 1) : Nk; /* uniform */
    const uint kfull = causal ? min(Nk, q0 + shift + 1) : Nk;   /* keys below: seen by every query */
    const uint r = lid / 8, c = lid % 8;
    const uint xq = (r & 7) << 2, xk = c << 2; /* the swizzle of the query rows r + 16 i, key rows c + 8 j */

    const __global Q_T *qb = q + q_off + b * q_sb + h * q_sh;
    const __global K_T *kb = k + k_off + b * k_sb + h * k_sh;
    const __global V_T *vb = v + v_off + b * v_sb + h * v_sh;
    for (uint e = lid; e < TQ * P; e += 128) { /* coalesced along the channels */
        const uint qq = e / P, ch = e % P;
        Qs[SWZ(qq, ch)] = q0 + qq < Nq ? LD_Q((ulong)(q0 + qq) * q_sn + ch, qb) * qscale : 0.0f;
    }
    float4 O[4][TU];
    float m[4], lp[4]; /* queries r + 16 i: running maximum, partial running sum (own keys) */
    int lim[4];        /* and their last visible key */
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int u = 0; u < TU; u++) O[i][u] = (float4)(0.0f);
        m[i] = NEG_BIG;
        lp[i] = 0.0f;
        lim[i] = causal ? (int)min(Nk - 1, q0 + r + 16 * i + shift) : (int)Nk - 1;
    }

    for (uint j0 = 0; j0 < kend; j0 += TK) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's readers of KX and Vs are done */
#pragma unroll 8
        for (uint t = 0; t < TK * P / 128; t++) {
            const uint e = lid + 128 * t, jj = e / P, ch = e % P;
            const int in = j0 + jj < kend;
            KX[SWZ(jj, ch)] = in ? LD_K((ulong)(j0 + jj) * k_sn + ch, kb) : 0.0f;
            Vs[e] = in ? LD_V((ulong)(j0 + jj) * v_sn + ch, vb) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        float s[4][8];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) s[i][j] = 0.0f;
        for (uint ch = 0; ch < P; ch += 4) {
            float4 qv[4];
#pragma unroll
            for (int i = 0; i < 4; i++) qv[i] = L4(Qs + (r + 16 * i) * P + (ch ^ xq));
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float4 kv = L4(KX + (c + 8 * j) * P + (ch ^ xk));
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    s[i][j] = fma(qv[i].x, kv.x, s[i][j]);
                    s[i][j] = fma(qv[i].y, kv.y, s[i][j]);
                    s[i][j] = fma(qv[i].z, kv.z, s[i][j]);
                    s[i][j] = fma(qv[i].w, kv.w, s[i][j]);
                }
            }
        }
        const int full = j0 + TK <= kfull; /* uniform: no key of the tile is masked for any query */
        float mx[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            mx[i] = NEG_BIG;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                if (!full && (int)(j0 + c + 8 * j) > lim[i]) s[i][j] = NEG_BIG;
                mx[i] = fmax(mx[i], s[i][j]);
            }
        }
#if !STATS_APART
        barrier(CLK_LOCAL_MEM_FENCE); /* the K tile is read: KX takes the partial maxima */
#endif
#pragma unroll
        for (int i = 0; i < 4; i++) KX[XS + (r + 16 * i) * 8 + c] = mx[i];
        barrier(CLK_LOCAL_MEM_FENCE);
        float alpha[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint qq = r + 16 * i;
            const float4 p01 = fmax(L4(KX + XS + qq * 8), L4(KX + XS + qq * 8 + 4));
            const float mnew = fmax(m[i], fmax(fmax(p01.x, p01.y), fmax(p01.z, p01.w)));
            alpha[i] = exp2(fmax(m[i] - mnew, EXP2_FLOOR));
            m[i] = mnew;
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                float p = exp2(s[i][j] - mnew);
                if (!full && (int)(j0 + c + 8 * j) > lim[i]) p = 0.0f;
                s[i][j] = p;
                sum += p;
            }
            lp[i] = lp[i] * alpha[i] + sum;
        }
#if !STATS_APART
        barrier(CLK_LOCAL_MEM_FENCE); /* the partial maxima are read: KX takes the weights */
#endif
#pragma unroll
        for (int j = 0; j < 8; j++)
            L4(KX + (c + 8 * j) * TQ + ((r ^ c) << 2)) = (float4)(s[0][j], s[1][j], s[2][j], s[3][j]);
        barrier(CLK_LOCAL_MEM_FENCE);

#pragma unroll
        for (int u = 0; u < TU; u++) {
            O[0][u] *= alpha[0];
            O[1][u] *= alpha[1];
            O[2][u] *= alpha[2];
            O[3][u] *= alpha[3];
        }
#pragma unroll 8
        for (uint jj = 0; jj < TK; jj++) {
            const float4 pv = L4(KX + jj * TQ + ((r ^ (jj & 7)) << 2));
#pragma unroll
            for (int u = 0; u < TU; u++) {
                const float4 vv = L4(Vs + jj * P + 4 * c + 32 * u);
                O[0][u] = fma((float4)(pv.x), vv, O[0][u]);
                O[1][u] = fma((float4)(pv.y), vv, O[1][u]);
                O[2][u] = fma((float4)(pv.z), vv, O[2][u]);
                O[3][u] = fma((float4)(pv.w), vv, O[3][u]);
            }
        }
    }
    /* the row sums: the 8 partial sums of each query through KX; the normalized O tile is staged in
     * Qs (no longer read, row-major) and written out coalesced along the channels */
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int i = 0; i < 4; i++) KX[XS + (r + 16 * i) * 8 + c] = lp[i];
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint qq = r + 16 * i;
        const float4 l4 = L4(KX + XS + qq * 8) + L4(KX + XS + qq * 8 + 4);
        const float inv = 1.0f / ((l4.x + l4.y) + (l4.z + l4.w));
#pragma unroll
        for (int u = 0; u < TU; u++) L4(Qs + qq * P + 4 * c + 32 * u) = O[i][u] * inv;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    __global O_T *ob = o + o_off + b * o_sb + h * o_sh;
    for (uint e = lid; e < TQ * P; e += 128) {
        const uint qq = e / P, ch = e % P;
        if (q0 + qq < Nq) ST_O(Qs[e], (ulong)(q0 + qq) * o_sn + ch, ob);
    }
}
#undef TQ
#undef TK
#undef TU
#undef STATS_APART
#undef XS
#undef KXN
#endif
#endif /* !WBCL_ATT_NO_GPU */
