/* wbcl — TSSA (ToST token statistics self-attention), non-causal and causal
 * (SPEC 1.4, 1.5). Family "tssa"; host side in host/ops/tssa.c.
 *
 * Addressing. Element (b, h, n, c) of a projected tensor X is
 *   X[off + b*sb + h*sh + n*sn + c]        (c < p has unit stride)
 * so the same kernels read the per-head layout (B, K, N, p) and the token
 * layout (B, N, K*p) of a projection's output (sh = p, sn = K*p).
 * Pi is always (B, K, N). Channel index j = h*p + c ("KP" = K*p columns).
 *
 * Shape (CPU, PERF-NOTES): reductions over tokens are row-block partials.
 * Work-item g = b*nblk + blk streams the rows n in [blk*rb, blk*rb + rb) of
 * batch entry b, all heads, and accumulates into its own partial row of KP
 * floats in global memory (a few KB: stays in L1), vectorized explicitly
 * with float8 along c. Small "finish" kernels combine the <= 64 partial rows.
 * Causal prefix sums are blocked scans: block sums (the same row kernel), an
 * exclusive scan of the block sums per column (wbcl_tssa_scan), then local
 * scans inside each block that start from the block's carry.
 * TSSA in GPU-variant contexts uses the GPU-shaped kernels at the end of this file: the non-causal
 * g_* kernels, and the causal gc_* kernels in a program of their own (-DWBCL_TSSA_CAUSAL=1). */

/* The host builds this family with -DWBCL_TSSA_P=p (the head dimension): the loops over a head's
 * channels then have a compile-time trip count and unroll (measured ~1.5x faster on PoCL/CPU
 * for the membership pass). Without it, p is the kernel argument. */
#ifdef WBCL_TSSA_P
#define WBCL_P WBCL_TSSA_P
#else
#define WBCL_P p
#endif

/* -DWBCL_TSSA_ALIGNED=1 when every row and head offset is a multiple of 8 floats (p, d and the
 * view offsets multiples of 8; buffers are at least 64-byte aligned): float8 accesses are then
 * plain vector loads. PoCL 3.1 lowers vload8 on __global float* to pairs of 64-bit loads and
 * inserts (seen in the generated code), 2-3x slower in the L1-bound loops. */
#if WBCL_TSSA_ALIGNED
#define WBCL_LD8(i, ptr) (((__global const float8 *)(ptr))[i])
#define WBCL_ST8(v, i, ptr) (((__global float8 *)(ptr))[i] = (v))
#else
#define WBCL_LD8(i, ptr) vload8(i, ptr)
#define WBCL_ST8(v, i, ptr) vstore8(v, i, ptr)
#endif

/* -DWBCL_TSSA_K=K (K <= 64) keeps each token's K logits in registers instead of in Pi. */
#ifdef WBCL_TSSA_K
#define WBCL_TSSA_PRIVATE_LOGITS 1
#else
#define WBCL_TSSA_PRIVATE_LOGITS 0
#define WBCL_TSSA_K 1
#endif

#define WBCL_TSSA_EPS_NORM 1e-12f  /* F.normalize eps (non-causal), max(S, eps) (causal) */
#define WBCL_TSSA_EPS_PI 1e-8f     /* Pi.sum + 1e-8                                      */

/* -DWBCL_TSSA_CAUSAL=1 (with the GPU set below): a program holding only the GPU-shaped causal
 * kernels, so that the non-causal programs do not compile them (PoCL: several CPU-seconds per
 * program). */
#ifndef WBCL_TSSA_CAUSAL
#define WBCL_TSSA_CAUSAL 0
#endif

#if !WBCL_TSSA_CAUSAL
/* acc[c] += x[c]^2 for c < p */
inline void wbcl_tssa_acc_sq(__global float *acc, __global const float *x, const uint p)
{
    uint c = 0;
    for (; c + 8 <= p; c += 8) {
        const float8 v = WBCL_LD8(0, x + c);
        WBCL_ST8(fma(v, v, WBCL_LD8(0, acc + c)), 0, acc + c);
    }
    for (; c < p; c++) acc[c] = fma(x[c], x[c], acc[c]);
}

/* acc[c] += s * x[c]^2 for c < p */
inline void wbcl_tssa_acc_wsq(__global float *acc, __global const float *x, const float s, const uint p)
{
    uint c = 0;
    for (; c + 8 <= p; c += 8) {
        const float8 v = WBCL_LD8(0, x + c);
        WBCL_ST8(fma((float8)s * v, v, WBCL_LD8(0, acc + c)), 0, acc + c);
    }
    for (; c < p; c++) acc[c] = fma(s * x[c], x[c], acc[c]);
}

inline void wbcl_tssa_zero(__global float *a, const uint n)
{
    for (uint i = 0; i < n; i++) a[i] = 0.0f;
}

inline float wbcl_tssa_hsum(const float8 a)
{
    return ((a.s0 + a.s1) + (a.s2 + a.s3)) + ((a.s4 + a.s5) + (a.s6 + a.s7));
}

/* sum_c (x[c] iv[c])^2, with four independent float8 accumulators: one FMA chain of p/8
 * dependent steps per head is latency-bound (measured: the membership pass 1.5x slower). */
inline float wbcl_tssa_dotsq(__global const float *x, __global const float *iv, const uint p)
{
    float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    uint c = 0;
    for (; c + 32 <= p; c += 32) {
        const float8 u0 = WBCL_LD8(0, x + c) * WBCL_LD8(0, iv + c), u1 = WBCL_LD8(1, x + c) * WBCL_LD8(1, iv + c),
                     u2 = WBCL_LD8(2, x + c) * WBCL_LD8(2, iv + c), u3 = WBCL_LD8(3, x + c) * WBCL_LD8(3, iv + c);
        a0 = fma(u0, u0, a0);
        a1 = fma(u1, u1, a1);
        a2 = fma(u2, u2, a2);
        a3 = fma(u3, u3, a3);
    }
    for (; c + 8 <= p; c += 8) {
        const float8 u = WBCL_LD8(0, x + c) * WBCL_LD8(0, iv + c);
        a0 = fma(u, u, a0);
    }
    float s = 0.0f;
    for (; c < p; c++) {
        const float u = x[c] * iv[c];
        s = fma(u, u, s);
    }
    return s + wbcl_tssa_hsum((a0 + a1) + (a2 + a3));
}

/* S[c] += x[c]^2 (the running prefix sum), returns sum_c x[c]^2 / max(S[c], eps); four
 * independent accumulators as above. */
inline float wbcl_tssa_scan_ratio(__global float *S, __global const float *x, const uint p)
{
    float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    const float8 eps = (float8)WBCL_TSSA_EPS_NORM;
    uint c = 0;
    for (; c + 32 <= p; c += 32) {
        const float8 v0 = WBCL_LD8(0, x + c), v1 = WBCL_LD8(1, x + c), v2 = WBCL_LD8(2, x + c), v3 = WBCL_LD8(3, x + c);
        const float8 q0 = v0 * v0, q1 = v1 * v1, q2 = v2 * v2, q3 = v3 * v3;
        const float8 S0 = WBCL_LD8(0, S + c) + q0, S1 = WBCL_LD8(1, S + c) + q1, S2 = WBCL_LD8(2, S + c) + q2,
                     S3 = WBCL_LD8(3, S + c) + q3;
        WBCL_ST8(S0, 0, S + c);
        WBCL_ST8(S1, 1, S + c);
        WBCL_ST8(S2, 2, S + c);
        WBCL_ST8(S3, 3, S + c);
        a0 += q0 / fmax(S0, eps);
        a1 += q1 / fmax(S1, eps);
        a2 += q2 / fmax(S2, eps);
        a3 += q3 / fmax(S3, eps);
    }
    for (; c + 8 <= p; c += 8) {
        const float8 v = WBCL_LD8(0, x + c), q = v * v, Sn = WBCL_LD8(0, S + c) + q;
        WBCL_ST8(Sn, 0, S + c);
        a0 += q / fmax(Sn, eps);
    }
    float s = 0.0f;
    for (; c < p; c++) {
        const float q = x[c] * x[c], Sn = S[c] + q;
        S[c] = Sn;
        s += q / fmax(Sn, WBCL_TSSA_EPS_NORM);
    }
    return s + wbcl_tssa_hsum((a0 + a1) + (a2 + a3));
}

/* Softmax over K logits in a private array, in place (max-subtracted). */
inline void wbcl_tssa_softmax_priv(float *l, const uint K)
{
    float m = l[0];
    for (uint h = 1; h < K; h++) m = fmax(m, l[h]);
    float z = 0.0f;
    for (uint h = 0; h < K; h++) {
        l[h] = exp(l[h] - m);
        z += l[h];
    }
    const float iz = 1.0f / z;
    for (uint h = 0; h < K; h++) l[h] *= iz;
}

/* Softmax over the K heads of token n, in place in Pi (logits on entry).
 * Max-subtracted: finite for any finite logits. */
inline void wbcl_tssa_softmax_heads(__global float *pi, const ulong N, const uint K)
{
    float m = pi[0];
    for (uint h = 1; h < K; h++) m = fmax(m, pi[h * N]);
    float z = 0.0f;
    for (uint h = 0; h < K; h++) {
        const float e = exp(pi[h * N] - m);
        pi[h * N] = e;
        z += e;
    }
    const float iz = 1.0f / z;
    for (uint h = 0; h < K; h++) pi[h * N] *= iz;
}

/* ---- block sums of w^2: part[(b*nblk + blk)*KP + j] = sum over the block of w^2 ---------- */
__kernel void wbcl_tssa_rowsq(__global const float *w, const ulong off, const ulong sb, const ulong sh,
                              const ulong sn, const uint B, const uint N, const uint K, const uint p, const uint rb,
                              const uint nblk, __global float *part)
{
    const size_t g = get_global_id(0);
    if (g >= (size_t)B * nblk) return;
    const uint b = g / nblk, blk = g % nblk;
    const uint n0 = blk * rb, n1 = min(N, n0 + rb);
    __global float *acc = part + g * (size_t)K * p;
    wbcl_tssa_zero(acc, K * p);
    for (uint n = n0; n < n1; n++)
        for (uint h = 0; h < K; h++) wbcl_tssa_acc_sq(acc + h * p, w + off + b * sb + h * sh + n * sn, WBCL_P);
}

/* inv[b*KP + j] = 1 / max(sqrt(sum_blk part), 1e-12): the F.normalize divisor over tokens */
__kernel void wbcl_tssa_norm_finish(__global const float *part, const uint B, const uint nblk, const uint KP,
                                    __global float *inv)
{
    const size_t g = get_global_id(0);
    if (g >= (size_t)B * KP) return;
    const uint b = g / KP, j = g % KP;
    float s = 0.0f;
    for (uint blk = 0; blk < nblk; blk++) s += part[((size_t)b * nblk + blk) * KP + j];
    inv[g] = 1.0f / fmax(sqrt(s), WBCL_TSSA_EPS_NORM);
}

/* ---- non-causal membership and second-moment partials ---------------------------------------
 * For each token: logit_h = temp_h * sum_c (w * inv)^2, Pi = softmax over heads (stored),
 * then part2 += Pi_h w^2 (per channel), partP += Pi_h (per head). */
__kernel void wbcl_tssa_member(__global const float *w, const ulong off, const ulong sb, const ulong sh,
                               const ulong sn, const uint B, const uint N, const uint K, const uint p, const uint rb,
                               const uint nblk, __global const float *inv, __global const float *temp,
                               __global float *Pi, __global float *part2, __global float *partP)
{
    const size_t g = get_global_id(0);
    if (g >= (size_t)B * nblk) return;
    const uint b = g / nblk, blk = g % nblk;
    const uint n0 = blk * rb, n1 = min(N, n0 + rb);
    const uint KP = K * p;
    __global float *acc = part2 + g * KP;
    __global float *accP = partP + g * K;
    __global const float *ib = inv + (size_t)b * KP;
    wbcl_tssa_zero(acc, KP);
    wbcl_tssa_zero(accP, K);
    for (uint n = n0; n < n1; n++) {
        __global float *pi = Pi + (size_t)b * K * N + n;
        __global const float *row = w + off + b * sb + n * sn;
#if WBCL_TSSA_PRIVATE_LOGITS
        float lg[WBCL_TSSA_K];
        for (uint h = 0; h < K; h++) lg[h] = temp[h] * wbcl_tssa_dotsq(row + h * sh, ib + h * p, WBCL_P);
        wbcl_tssa_softmax_priv(lg, K);
        for (uint h = 0; h < K; h++) pi[(size_t)h * N] = lg[h];
#define WBCL_PI(h) lg[h]
#else
        for (uint h = 0; h < K; h++) pi[(size_t)h * N] = temp[h] * wbcl_tssa_dotsq(row + h * sh, ib + h * p, WBCL_P);
        wbcl_tssa_softmax_heads(pi, N, K);
#define WBCL_PI(h) pi[(size_t)(h) * N]
#endif
        for (uint h = 0; h < K; h++) {
            const float ph = WBCL_PI(h);
            accP[h] += ph;
            wbcl_tssa_acc_wsq(acc + h * p, row + h * sh, ph, WBCL_P);
        }
#undef WBCL_PI
    }
}

/* a[b*KP + j] = 1 / (1 + dots), dots = sum_blk part2 / (sum_blk partP + 1e-8) */
__kernel void wbcl_tssa_dots_finish(__global const float *part2, __global const float *partP, const uint B,
                                    const uint nblk, const uint K, const uint p, __global float *a)
{
    const size_t g = get_global_id(0);
    const uint KP = K * p;
    if (g >= (size_t)B * KP) return;
    const uint b = g / KP, j = g % KP, h = j / p;
    float s = 0.0f, q = 0.0f;
    for (uint blk = 0; blk < nblk; blk++) {
        s += partP[((size_t)b * nblk + blk) * K + h];
        q += part2[((size_t)b * nblk + blk) * KP + j];
    }
    a[g] = 1.0f / (1.0f + q / (s + WBCL_TSSA_EPS_PI));
}

/* y = -w * Pi * a; one work-item per token row (b, n), all heads */
__kernel void wbcl_tssa_output(__global const float *w, const ulong off, const ulong sb, const ulong sh,
                               const ulong sn, __global float *y, const ulong yoff, const ulong ysb, const ulong ysh,
                               const ulong ysn, const uint B, const uint N, const uint K, const uint p,
                               __global const float *Pi, __global const float *a)
{
    const size_t r = get_global_id(0);
    if (r >= (size_t)B * N) return;
    const uint b = r / N, n = r % N;
    for (uint h = 0; h < K; h++) {
        __global const float *x = w + off + b * sb + h * sh + n * sn;
        __global float *o = y + yoff + b * ysb + h * ysh + n * ysn;
        __global const float *ah = a + ((size_t)b * K + h) * p;
        const float mp = -Pi[((size_t)b * K + h) * N + n];
        uint c = 0;
        for (; c + 8 <= WBCL_P; c += 8) WBCL_ST8(WBCL_LD8(0, x + c) * mp * WBCL_LD8(0, ah + c), 0, o + c);
        for (; c < WBCL_P; c++) o[c] = x[c] * mp * ah[c];
    }
}

/* ---- causal: scans ---------------------------------------------------------------------------
 * Exclusive scan over the blocks, per (b, column): part[b, blk, j] <- carry before block blk.
 * With a state (has_state = 1) the carry starts at st[b, j] - cst[b, j] (Kahan sum and
 * compensation) and the total is written back to st (cst <- 0). */
__kernel void wbcl_tssa_scan(__global float *part, const uint B, const uint nblk, const uint cols,
                             const int has_state, __global float *st, __global float *cst)
{
    const size_t g = get_global_id(0);
    if (g >= (size_t)B * cols) return;
    const uint b = g / cols, j = g % cols;
    float run = has_state ? st[g] - cst[g] : 0.0f;
    for (uint blk = 0; blk < nblk; blk++) {
        __global float *q = part + ((size_t)b * nblk + blk) * cols + j;
        const float t = *q;
        *q = run;
        run += t;
    }
    if (has_state) {
        st[g] = run;
        cst[g] = 0.0f;
    }
}

/* ---- causal membership: local scan of S from the block's carry, logits, Pi, and the
 * block sums of Pi w^2 (part2) and Pi (partP) for the second scan.
 * carryS: (B, nblk, KP), the exclusive scan of the block sums of w^2; updated in place as the
 * running S (each work-item owns its row). */
__kernel void wbcl_tssa_causal_member(__global const float *w, const ulong off, const ulong sb, const ulong sh,
                                      const ulong sn, const uint B, const uint N, const uint K, const uint p,
                                      const uint rb, const uint nblk, const uint t0, __global float *carryS,
                                      __global const float *temp, __global const float *bias, const uint tmax,
                                      __global float *Pi, __global float *part2, __global float *partP)
{
    const size_t g = get_global_id(0);
    if (g >= (size_t)B * nblk) return;
    const uint b = g / nblk, blk = g % nblk;
    const uint n0 = blk * rb, n1 = min(N, n0 + rb);
    const uint KP = K * p;
    __global float *S = carryS + g * KP;
    __global float *acc = part2 + g * KP;
    __global float *accP = partP + g * K;
    wbcl_tssa_zero(acc, KP);
    wbcl_tssa_zero(accP, K);
    for (uint n = n0; n < n1; n++) {
        __global float *pi = Pi + (size_t)b * K * N + n;
        __global const float *row = w + off + b * sb + n * sn;
        const uint t = t0 + n;
#if WBCL_TSSA_PRIVATE_LOGITS
        float lg[WBCL_TSSA_K];
#define WBCL_PI(h) lg[h]
#else
#define WBCL_PI(h) pi[(size_t)(h) * N]
#endif
        for (uint h = 0; h < K; h++)
            WBCL_PI(h) = temp[h] * (wbcl_tssa_scan_ratio(S + h * p, row + h * sh, WBCL_P) +
                                    (float)p * bias[(size_t)h * tmax + t]);
#if WBCL_TSSA_PRIVATE_LOGITS
        wbcl_tssa_softmax_priv(lg, K);
        for (uint h = 0; h < K; h++) pi[(size_t)h * N] = lg[h];
#else
        wbcl_tssa_softmax_heads(pi, N, K);
#endif
        for (uint h = 0; h < K; h++) {
            const float ph = WBCL_PI(h);
            accP[h] += ph;
            wbcl_tssa_acc_wsq(acc + h * p, row + h * sh, ph, WBCL_P);
        }
#undef WBCL_PI
    }
}

/* ---- causal output: local scans of Q and P from the block's carries, then
 * y = -w Pi / (1 + Q / (P + 1e-8)). carryQ (B, nblk, KP), carryP (B, nblk, K) updated in place. */
__kernel void wbcl_tssa_causal_output(__global const float *w, const ulong off, const ulong sb, const ulong sh,
                                      const ulong sn, __global float *y, const ulong yoff, const ulong ysb,
                                      const ulong ysh, const ulong ysn, const uint B, const uint N, const uint K,
                                      const uint p, const uint rb, const uint nblk, __global const float *Pi,
                                      __global float *carryQ, __global float *carryP)
{
    const size_t g = get_global_id(0);
    if (g >= (size_t)B * nblk) return;
    const uint b = g / nblk, blk = g % nblk;
    const uint n0 = blk * rb, n1 = min(N, n0 + rb);
    const uint KP = K * p;
    __global float *Q = carryQ + g * KP;
    __global float *P = carryP + g * K;
    for (uint n = n0; n < n1; n++)
        for (uint h = 0; h < K; h++) {
            __global const float *x = w + off + b * sb + h * sh + n * sn;
            __global float *o = y + yoff + b * ysb + h * ysh + n * ysn;
            __global float *Qh = Q + h * p;
            const float ph = Pi[((size_t)b * K + h) * N + n];
            const float Ph = P[h] + ph;
            P[h] = Ph;
            const float iden = 1.0f / (Ph + WBCL_TSSA_EPS_PI);
            uint c = 0;
            for (; c + 8 <= WBCL_P; c += 8) {
                const float8 v = WBCL_LD8(0, x + c);
                const float8 Qn = fma((float8)ph * v, v, WBCL_LD8(0, Qh + c));
                WBCL_ST8(Qn, 0, Qh + c);
                WBCL_ST8(-v * ph / fma(Qn, (float8)iden, (float8)1.0f), 0, o + c);
            }
            for (; c < WBCL_P; c++) {
                const float v = x[c];
                const float Qn = fma(ph * v, v, Qh[c]);
                Qh[c] = Qn;
                o[c] = -v * ph / fma(Qn, iden, 1.0f);
            }
        }
}

/* ---- causal, sequential (decode and short inputs): one work-item per batch entry walks the
 * N tokens in order, continuing the state (S, Q, P with Kahan compensations cS, cQ, cP:
 * true sum = s - c). The state arrays are (B, KP) and (B, K). */
inline float wbcl_tssa_kahan(__global float *s, __global float *comp, const float x)
{
    const float yv = x - *comp;
    const float t = *s + yv;
    *comp = (t - *s) - yv;
    *s = t;
    return t;
}

__kernel void wbcl_tssa_causal_seq(__global const float *w, const ulong off, const ulong sb, const ulong sh,
                                   const ulong sn, __global float *y, const ulong yoff, const ulong ysb,
                                   const ulong ysh, const ulong ysn, const uint B, const uint N, const uint K,
                                   const uint p, const uint t0, __global const float *temp,
                                   __global const float *bias, const uint tmax, __global float *Pi,
                                   __global float *S, __global float *cS, __global float *Q, __global float *cQ,
                                   __global float *P, __global float *cP)
{
    const size_t b = get_global_id(0);
    if (b >= B) return;
    const uint KP = K * p;
    __global float *Sb = S + b * KP, *cSb = cS + b * KP, *Qb = Q + b * KP, *cQb = cQ + b * KP;
    __global float *Pb = P + b * K, *cPb = cP + b * K;
    for (uint n = 0; n < N; n++) {
        __global float *pi = Pi + b * K * N + n;
        const uint t = t0 + n;
        for (uint h = 0; h < K; h++) {
            __global const float *x = w + off + b * sb + h * sh + n * sn;
            float s = 0.0f;
            for (uint c = 0; c < WBCL_P; c++) {
                const float v2 = x[c] * x[c];
                const float Sn = wbcl_tssa_kahan(Sb + h * p + c, cSb + h * p + c, v2);
                s += v2 / fmax(Sn, WBCL_TSSA_EPS_NORM);
            }
            pi[(size_t)h * N] = temp[h] * (s + (float)p * bias[(size_t)h * tmax + t]);
        }
        wbcl_tssa_softmax_heads(pi, N, K);
        for (uint h = 0; h < K; h++) {
            __global const float *x = w + off + b * sb + h * sh + n * sn;
            __global float *o = y + yoff + b * ysb + h * ysh + n * ysn;
            const float ph = pi[(size_t)h * N];
            const float Ph = wbcl_tssa_kahan(Pb + h, cPb + h, ph);
            const float iden = 1.0f / (Ph + WBCL_TSSA_EPS_PI);
            for (uint c = 0; c < WBCL_P; c++) {
                const float v = x[c];
                const float Qn = wbcl_tssa_kahan(Qb + h * p + c, cQb + h * p + c, ph * v * v);
                o[c] = -v * ph / fma(Qn, iden, 1.0f);
            }
        }
    }
}

/* ==== GPU-shaped non-causal TSSA (contexts of variant GPU) =====================================
 * Built when the host adds -DWBCL_TSSA_GLX=LX (with WBCL_TSSA_P and WBCL_TSSA_K): work-groups of
 * 256 work-items seen as TT = 256 / LX token rows of LX lanes. Lane lx of row t owns the channels
 * j = lx + LX*i (i < JPT = ceil(K*p / LX), j = h*p + c) of token n0 + t, n0 + t + TT, ...: consecutive
 * lanes read consecutive channels (coalesced), and each work-item keeps private accumulators for its
 * JPT fixed channels. The B*N tokens, flattened, are cut into G equal ranges of L <= N tokens, one
 * per work-group (G about 4 per compute unit: every compute unit gets the same work, no tail wave);
 * a range spans at most two batch entries (segments s = 0, 1), and each segment leaves one partial
 * row: part[(2g + s)*KP + j], partP[(2g + s)*K + h]. The g_*_finish kernels sum, for batch entry b,
 * the partials of the work-groups b*N/L .. ((b+1)*N - 1)/L. Passes over w: g_colsq (sum of w^2),
 * g_member (Pi, sum of Pi w^2, sum of Pi), g_output (y): three reads, one write. */
#endif /* !WBCL_TSSA_CAUSAL */

#if WBCL_VARIANT_GPU && defined(WBCL_TSSA_GLX) && defined(WBCL_TSSA_P) && WBCL_TSSA_PRIVATE_LOGITS
#define G_WG 256
#define G_LX WBCL_TSSA_GLX
#define G_TT (G_WG / G_LX)
#define G_K WBCL_TSSA_K
#define G_KP (WBCL_TSSA_K * WBCL_TSSA_P)
#define G_JPT ((G_KP + G_LX - 1) / G_LX)
#define G_PP (WBCL_TSSA_P + 1) /* padded head row in local memory: no bank conflicts across heads */
#define GC_FC 16 /* columns per work-group of the finish and scan kernels */

#if !WBCL_TSSA_CAUSAL

/* segment s of work-group g: batch entry *b, tokens [*n0, *n1); 0 if empty */
inline int wbcl_tssa_g_segment(const uint g, const uint s, const uint B, const uint N, const uint L, uint *b,
                               uint *n0, uint *n1)
{
    const ulong T = (ulong)B * N, start = (ulong)g * L, end = min(start + L, T);
    const ulong s0 = s == 0 ? start : (start / N + 1) * N;
    if (s0 >= end) return 0;
    *b = (uint)(s0 / N);
    *n0 = (uint)(s0 - (ulong)*b * N);
    *n1 = (uint)min((ulong)N, *n0 + (end - s0));
    return 1;
}

/* per-range sums of w^2 */
__kernel __attribute__((reqd_work_group_size(G_WG, 1, 1))) void
wbcl_tssa_g_colsq(__global const float *w, const ulong off, const ulong sb, const ulong sh, const ulong sn,
                  const uint B, const uint N, const uint L, __global float *part)
{
    __local float red[G_TT * G_KP];
    const uint lid = get_local_id(0), lx = lid % G_LX, t = lid / G_LX, g = get_group_id(0);
    const uint ush = (uint)sh; /* the host checks (K - 1) sh + p < 2^32 */
#pragma unroll 1
    for (uint s = 0; s < 2; s++) {
        uint b, n0, n1;
        if (!wbcl_tssa_g_segment(g, s, B, N, L, &b, &n0, &n1)) break;
        float acc[G_JPT];
#pragma unroll
        for (uint i = 0; i < G_JPT; i++) acc[i] = 0.0f;
        /* two token rows per step: twice the loads in flight per work-item (a 1-row step read at
         * 2.6-2.8 TB/s on the H200 against 3.8 for the copy) */
        uint n = n0 + t;
        for (; n + G_TT < n1; n += 2 * G_TT) {
            __global const float *row = w + off + b * sb + n * sn, *row2 = row + G_TT * sn;
            float v[G_JPT], v2[G_JPT];
#pragma unroll
            for (uint i = 0; i < G_JPT; i++) {
                const uint j = lx + G_LX * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
                v[i] = j < G_KP ? row[h * ush + c] : 0.0f;
                v2[i] = j < G_KP ? row2[h * ush + c] : 0.0f;
            }
#pragma unroll
            for (uint i = 0; i < G_JPT; i++) acc[i] = fma(v2[i], v2[i], fma(v[i], v[i], acc[i]));
        }
        if (n < n1) {
            __global const float *row = w + off + b * sb + n * sn;
#pragma unroll
            for (uint i = 0; i < G_JPT; i++) {
                const uint j = lx + G_LX * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
                if (j < G_KP) {
                    const float v = row[h * ush + c];
                    acc[i] = fma(v, v, acc[i]);
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* red is free */
#pragma unroll
        for (uint i = 0; i < G_JPT; i++) {
            const uint j = lx + G_LX * i;
            if (j < G_KP) red[t * G_KP + j] = acc[i];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        __global float *out = part + (size_t)(2 * g + s) * G_KP;
        for (uint j = lid; j < G_KP; j += G_WG) {
            float sum = 0.0f;
            for (uint r = 0; r < G_TT; r++) sum += red[r * G_KP + j];
            out[j] = sum;
        }
    }
}

/* first and last work-group whose range touches batch entry b, and the segment b is in for g */
#define G_RANGES(b, N, L) const uint glo = (uint)(((ulong)(b) * (N)) / (L)), ghi = (uint)(((ulong)((b) + 1) * (N) - 1) / (L))
#define G_SEG(g, b, N, L) ((ulong)(g) * (L) >= (ulong)(b) * (N) ? 0u : 1u)

/* The finish kernels: work-groups of 256 = 16 consecutive channels x 16 slices of the partial rows
 * of batch entry b (enough work-groups to fill the device even at B = 1; each work-item sums every
 * 16th partial row, then the slices are added in local memory). Group index = b * ceil(KP / 16) + block. */
#define G_FC 16
#define G_FNB ((G_KP + G_FC - 1) / G_FC)

/* inv[b*KP + j] = 1 / max(sqrt(sum of the partials of b), 1e-12) */
__kernel __attribute__((reqd_work_group_size(G_WG, 1, 1))) void
wbcl_tssa_g_norm_finish(__global const float *part, const uint B, const uint N, const uint L, __global float *inv)
{
    __local float red[G_WG];
    const uint lid = get_local_id(0), cl = lid % G_FC, r = lid / G_FC, grp = get_group_id(0);
    const uint b = grp / G_FNB, j = (grp % G_FNB) * G_FC + cl;
    if (b >= B) return; /* whole work-group */
    G_RANGES(b, N, L);
    float s = 0.0f;
    if (j < G_KP)
        for (uint g = glo + r; g <= ghi; g += G_WG / G_FC) s += part[(size_t)(2 * g + G_SEG(g, b, N, L)) * G_KP + j];
    red[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (r == 0 && j < G_KP) {
        float t = 0.0f;
        for (uint q = 0; q < G_WG / G_FC; q++) t += red[q * G_FC + cl];
        inv[(size_t)b * G_KP + j] = 1.0f / fmax(sqrt(t), WBCL_TSSA_EPS_NORM);
    }
}

/* a[b*KP + j] = 1 / (1 + dots), dots = (sum of the partials of Pi w^2) / (sum of those of Pi + 1e-8) */
__kernel __attribute__((reqd_work_group_size(G_WG, 1, 1))) void
wbcl_tssa_g_dots_finish(__global const float *part2, __global const float *partP, const uint B, const uint N,
                        const uint L, __global float *a)
{
    __local float red[G_WG], redP[G_WG];
    const uint lid = get_local_id(0), cl = lid % G_FC, r = lid / G_FC, grp = get_group_id(0);
    const uint b = grp / G_FNB, j = (grp % G_FNB) * G_FC + cl, h = j / WBCL_TSSA_P;
    if (b >= B) return; /* whole work-group */
    G_RANGES(b, N, L);
    float q = 0.0f, P = 0.0f;
    if (j < G_KP)
        for (uint g = glo + r; g <= ghi; g += G_WG / G_FC) {
            const size_t row = 2 * g + G_SEG(g, b, N, L);
            q += part2[row * G_KP + j];
            P += partP[row * G_K + h];
        }
    red[lid] = q;
    redP[lid] = P;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (r == 0 && j < G_KP) {
        float tq = 0.0f, tP = 0.0f;
        for (uint k = 0; k < G_WG / G_FC; k++) {
            tq += red[k * G_FC + cl];
            tP += redP[k * G_FC + cl];
        }
        a[(size_t)b * G_KP + j] = 1.0f / (1.0f + tq / (tP + WBCL_TSSA_EPS_PI));
    }
}

/* Pi (written at Pi[pioff + (b*K + h)*N + n]) and the per-range sums of Pi w^2 (part2) and of Pi
 * (partP). Per tile of TT tokens: each work-item stores its w^2 in local memory; work-item (t, h)
 * (lanes lx = h < K) forms logit = temp_h sum_c w^2 inv^2 and the softmax over heads; then every
 * work-item adds Pi_h w^2 (its own entries of the local tile: no registers hold w across the
 * barriers) to its accumulators. The next tile's w is loaded before the barriers of this one.
 * Work-group i takes range G - 1 - i: GPUs start work-groups roughly in index order, so this pass
 * begins with the ranges g_colsq read last (the part of w still in the device's L2 when w is larger
 * than it) and ends with the first batch entries, where g_output, in (b, h, n, c) order, begins. */
__kernel __attribute__((reqd_work_group_size(G_WG, 1, 1))) void
wbcl_tssa_g_member(__global const float *w, const ulong off, const ulong sb, const ulong sh, const ulong sn,
                   const uint B, const uint N, const uint L, __global const float *inv,
                   __global const float *temp, __global float *Pi, const ulong pioff, __global float *part2,
                   __global float *partP)
{
    __local float lq[G_TT * G_K * G_PP]; /* w^2 of the tile, then the work-items' accumulators */
    __local float li2[G_K * G_PP];       /* inv^2 */
    __local float ll[G_TT * G_K];        /* logits */
    __local float lp[G_TT * G_K];        /* Pi, then the work-items' sums of Pi */
    const uint lid = get_local_id(0), lx = lid % G_LX, t = lid / G_LX;
    const uint g = (uint)get_num_groups(0) - 1u - (uint)get_group_id(0); /* ranges in reverse (above) */
    const uint ush = (uint)sh; /* the host checks (K - 1) sh + p < 2^32 */
    const float th = lx < G_K ? temp[lx] : 0.0f;
#pragma unroll 1
    for (uint s = 0; s < 2; s++) {
        uint b, n0, n1;
        if (!wbcl_tssa_g_segment(g, s, B, N, L, &b, &n0, &n1)) break;
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous segment's reads of lq, li2, lp are done */
        __global const float *ib = inv + (size_t)b * G_KP;
        for (uint j = lid; j < G_KP; j += G_WG) {
            const uint h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
            const float iv = ib[j];
            li2[h * G_PP + c] = iv * iv;
        }
        float accP = 0.0f;
        float acc[G_JPT], vn[G_JPT]; /* vn: the next tile's w */
#pragma unroll
        for (uint i = 0; i < G_JPT; i++) acc[i] = 0.0f;
        {
            __global const float *row = w + off + b * sb + (size_t)(n0 + t < n1 ? n0 + t : n0) * sn;
#pragma unroll
            for (uint i = 0; i < G_JPT; i++) {
                const uint j = lx + G_LX * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
                vn[i] = (n0 + t < n1 && j < G_KP) ? row[h * ush + c] : 0.0f;
            }
        }
        for (uint nt = n0; nt < n1; nt += G_TT) {
            const uint n = nt + t;
            const int valid = n < n1;
#pragma unroll
            for (uint i = 0; i < G_JPT; i++) {
                const uint j = lx + G_LX * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
                if (j < G_KP) lq[(t * G_K + h) * G_PP + c] = vn[i] * vn[i];
            }
            if (nt + G_TT < n1) {
                const uint nn = nt + G_TT + t;
                __global const float *row = w + off + b * sb + (size_t)(nn < n1 ? nn : n0) * sn;
#pragma unroll
                for (uint i = 0; i < G_JPT; i++) {
                    const uint j = lx + G_LX * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
                    vn[i] = (nn < n1 && j < G_KP) ? row[h * ush + c] : 0.0f;
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            if (lx < G_K) {
                __local const float *q = lq + (t * G_K + lx) * G_PP, *s2 = li2 + lx * G_PP;
                float s0 = 0.0f, s1 = 0.0f;
                uint c = 0;
                for (; c + 2 <= WBCL_TSSA_P; c += 2) {
                    s0 = fma(q[c], s2[c], s0);
                    s1 = fma(q[c + 1], s2[c + 1], s1);
                }
                if (c < WBCL_TSSA_P) s0 = fma(q[c], s2[c], s0);
                ll[t * G_K + lx] = th * (s0 + s1);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            if (lx < G_K) {
                __local const float *l = ll + t * G_K;
                float m = l[0];
                for (uint h = 1; h < G_K; h++) m = fmax(m, l[h]);
                float z = 0.0f;
                for (uint h = 0; h < G_K; h++) z += exp(l[h] - m);
                const float pi = valid ? exp(l[lx] - m) / z : 0.0f;
                lp[t * G_K + lx] = pi;
                accP += pi;
                if (valid) Pi[pioff + ((size_t)b * G_K + lx) * N + n] = pi;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
            for (uint i = 0; i < G_JPT; i++) {
                const uint j = lx + G_LX * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
                if (j < G_KP) acc[i] = fma(lp[t * G_K + h], lq[(t * G_K + h) * G_PP + c], acc[i]);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* lq and lp are free */
#pragma unroll
        for (uint i = 0; i < G_JPT; i++) {
            const uint j = lx + G_LX * i;
            if (j < G_KP) lq[t * G_KP + j] = acc[i];
        }
        if (lx < G_K) lp[t * G_K + lx] = accP;
        barrier(CLK_LOCAL_MEM_FENCE);
        __global float *out = part2 + (size_t)(2 * g + s) * G_KP;
        for (uint j = lid; j < G_KP; j += G_WG) {
            float sum = 0.0f;
            for (uint r = 0; r < G_TT; r++) sum += lq[r * G_KP + j];
            out[j] = sum;
        }
        if (lid < G_K) {
            float sum = 0.0f;
            for (uint r = 0; r < G_TT; r++) sum += lp[r * G_K + lid];
            partP[(size_t)(2 * g + s) * G_K + lid] = sum;
        }
    }
}

/* y = -w Pi a, one work-item per VW consecutive channels of one (b, h, n) (VW = 4 when the views
 * are aligned: float4 accesses), in (b, h, n, c) order: coalesced in the heads layout. */
#if WBCL_TSSA_ALIGNED
#define G_VW 4
#else
#define G_VW 1
#endif
#define G_PV (WBCL_TSSA_P / G_VW)
__kernel void wbcl_tssa_g_output(__global const float *w, const ulong off, const ulong sb, const ulong sh,
                                 const ulong sn, __global float *y, const ulong yoff, const ulong ysb,
                                 const ulong ysh, const ulong ysn, const uint B, const uint N,
                                 __global const float *Pi, const ulong pioff, __global const float *a)
{
    const size_t e = get_global_id(0);
    const size_t r = e / G_PV;
    const uint cv = (uint)(e - r * G_PV);
    const size_t bh = r / N;
    if (bh >= (size_t)B * G_K) return;
    const uint n = (uint)(r - bh * N), h = (uint)(bh % G_K), b = (uint)(bh / G_K);
    const float mp = -Pi[pioff + r];
    const size_t xi = off + b * sb + h * sh + (size_t)n * sn + cv * G_VW;
    const size_t yi = yoff + b * ysb + h * ysh + (size_t)n * ysn + cv * G_VW;
    __global const float *ah = a + bh * WBCL_TSSA_P + cv * G_VW;
#if G_VW == 4
    const float4 x4 = *(__global const float4 *)(w + xi);
    *(__global float4 *)(y + yi) = x4 * mp * *(__global const float4 *)ah;
#else
    y[yi] = w[xi] * mp * ah[0];
#endif
}

#else /* WBCL_TSSA_CAUSAL */

/* Sum of a head's p ratios in local memory, two accumulators (even and odd channels) added at the
 * end: the logit's sum in gc_member and in the decode step, the same order in both. */
inline float wbcl_tssa_lsum(__local const float *r)
{
    float s0 = 0.0f, s1 = 0.0f;
    uint c = 0;
    for (; c + 2 <= WBCL_TSSA_P; c += 2) {
        s0 += r[c];
        s1 += r[c + 1];
    }
    if (c < WBCL_TSSA_P) s0 += r[c];
    return s0 + s1;
}

/* ==== GPU-shaped causal TSSA (variant GPU; the -D set above, no ALIGNED, plus -DWBCL_TSSA_CAUSAL=1) ====
 * Prefill, a blocked prefix scan over tokens (host/ops/tssa.c causal_blocked_gpu): the N tokens of
 * batch entry b are cut into nblk blocks of L tokens (L a multiple of TT; about 4 work-groups per
 * compute unit over the B * nblk blocks), one work-group of 256 (TT token rows x LX lanes, lane lx
 * owning the channels j = lx + LX*i as above) per block g = b*nblk + blk:
 *   gc_blocksq  block sums of w^2                         -> part1[g*KP + j]
 *   gc_scan     exclusive scan of the block sums, per (b, column), from the state's sums if any
 *   gc_member   S = carry + local scan (tile by tile; inside a tile of TT tokens through local
 *               memory), logits, Pi (softmax over heads), block sums of Pi w^2 and of Pi
 *                                                          -> part2[g*(KP+K) + j], [.. + KP + h]
 *   gc_scan     the same scan over the KP + K columns of part2 (Q and P together)
 *   gc_output   Q, P = carry + local scan, y = -w Pi / (1 + Q / (P + 1e-8))
 * w is read three times (blocksq, member, output), y written once, Pi (B*K*N) written once and
 * read once. Every prefix sum is carry (a sum of block sums, itself summed as 16 slices) + a
 * per-column running sum over the tiles of one block + at most TT rows: O(L/TT + nblk/16 + 32)
 * roundings instead of O(N) for a serial sum.
 * Decode and short inputs: gc_step, one work-group per batch entry walks the N tokens in order
 * with the state's Kahan-compensated sums in registers (one launch for all heads and batches). */
#define GC_ROW (G_KP + G_K) /* a row of part2: the KP sums of Pi w^2, then the K sums of Pi */
#define GC_LI(t, j) (((t) * G_K + (j) / WBCL_TSSA_P) * G_PP + (j) % WBCL_TSSA_P) /* padded tile index */

/* block sums of w^2: part1[(b*nblk + blk)*KP + j] */
__kernel __attribute__((reqd_work_group_size(G_WG, 1, 1))) void
wbcl_tssa_gc_blocksq(__global const float *w, const ulong off, const ulong sb, const ulong sh, const ulong sn,
                     const uint B, const uint N, const uint L, const uint nblk, __global float *part1)
{
    __local float red[G_TT * G_KP];
    const uint lid = get_local_id(0), lx = lid % G_LX, t = lid / G_LX, g = get_group_id(0);
    const uint b = g / nblk, n0 = (g % nblk) * L, n1 = b < B ? min(N, n0 + L) : n0; /* no early return */
    const uint ush = (uint)sh; /* the host checks (K - 1) sh + p < 2^32 */
    float acc[G_JPT];
#pragma unroll
    for (uint i = 0; i < G_JPT; i++) acc[i] = 0.0f;
    for (uint n = n0 + t; n < n1; n += G_TT) {
        __global const float *row = w + off + b * sb + n * sn;
#pragma unroll
        for (uint i = 0; i < G_JPT; i++) {
            const uint j = lx + G_LX * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
            if (j < G_KP) {
                const float v = row[h * ush + c];
                acc[i] = fma(v, v, acc[i]);
            }
        }
    }
#pragma unroll
    for (uint i = 0; i < G_JPT; i++) {
        const uint j = lx + G_LX * i;
        if (j < G_KP) red[t * G_KP + j] = acc[i];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint j = lid; j < G_KP && b < B; j += G_WG) {
        float s = 0.0f;
        for (uint r = 0; r < G_TT; r++) s += red[r * G_KP + j];
        part1[(size_t)g * G_KP + j] = s;
    }
}

/* Exclusive scan over the nblk blocks of each (b, column) of part (B, nblk, cols), in place:
 * part[b, blk, j] <- the carry before block blk. Work-groups of 16 columns x 16 slices of the
 * blocks (group = b * ceil(cols / 16) + column block): each slice sums its run of blocks, the 16
 * slice sums are combined in local memory, then each slice writes its carries. With a state
 * (has_state = 1) the carry starts at st - cst (Kahan sum and compensation; columns j < split in
 * st1/cst1 (B, split), the others in st2/cst2 (B, cols - split)) and the total is written back
 * (compensation 0), as wbcl_tssa_scan does. */
__kernel __attribute__((reqd_work_group_size(G_WG, 1, 1))) void
wbcl_tssa_gc_scan(__global float *part, const uint B, const uint nblk, const uint cols, const uint split,
                  const int has_state, __global float *st1, __global float *cst1, __global float *st2,
                  __global float *cst2)
{
    __local float red[G_WG];
    const uint lid = get_local_id(0), cl = lid % GC_FC, r = lid / GC_FC, grp = get_group_id(0);
    const uint ncb = (cols + GC_FC - 1) / GC_FC, b = grp / ncb, j = (grp % ncb) * GC_FC + cl;
    /* no early return before the barrier (PoCL 3.1 then lost the loop's sums of every work-group but
     * the first): a work-group past the batch or a column past cols gets an empty run of blocks */
    const int live = b < B && j < cols;
    const uint cb = (nblk + G_WG / GC_FC - 1) / (G_WG / GC_FC), k0 = min(nblk, r * cb),
               k1 = live ? min(nblk, k0 + cb) : k0;
    __global float *col = part + (size_t)b * nblk * cols + j;
    float s = 0.0f;
    for (uint k = k0; k < k1; k++) s += col[(size_t)k * cols];
    red[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (live) {
        const size_t si = j < split ? (size_t)b * split + j : (size_t)b * (cols - split) + (j - split);
        __global float *st = j < split ? st1 : st2, *cst = j < split ? cst1 : cst2;
        float run = has_state ? st[si] - cst[si] : 0.0f;
        for (uint q = 0; q < r; q++) run += red[q * GC_FC + cl];
        for (uint k = k0; k < k1; k++) {
            const float v = col[(size_t)k * cols];
            col[(size_t)k * cols] = run;
            run += v;
        }
        if (has_state && r == G_WG / GC_FC - 1) {
            st[si] = run;
            cst[si] = 0.0f;
        }
    }
}

/* Pi[(b*K + h)*N + n] for the block's tokens and the block sums of Pi w^2 and Pi (part2).
 * carryS (part1 after gc_scan): S before the block. Per tile of TT tokens, four barriers:
 *   1. w^2 of the tile into lq;  2. S (carry + rows <= t of the tile), w^2 / max(S, eps) into lr;
 *   3. lanes lx < K of row t: logit of head lx;  4. softmax over heads (lanes lx < K), Pi into lp;
 *   then every work-item adds Pi_h w^2 (w^2 kept in registers) to its accumulators.
 * The next tile's w is loaded before the barriers of this one. */
__kernel __attribute__((reqd_work_group_size(G_WG, 1, 1))) void
wbcl_tssa_gc_member(__global const float *w, const ulong off, const ulong sb, const ulong sh, const ulong sn,
                    const uint B, const uint N, const uint L, const uint nblk, const uint t0,
                    __global const float *carryS, __global const float *temp, __global const float *bias,
                    const uint tmax, __global float *Pi, __global float *part2)
{
    __local float lq[G_TT * G_K * G_PP]; /* w^2 of the tile; at the end the rows' sums of Pi w^2 */
    __local float lr[G_TT * G_K * G_PP]; /* w^2 / max(S, eps) */
    __local float ll[G_TT * G_K];        /* logits */
    __local float lp[G_TT * G_K];        /* Pi; at the end the rows' sums of Pi */
    const uint lid = get_local_id(0), lx = lid % G_LX, t = lid / G_LX;
    /* blocks in reverse, as in g_member: this pass starts with the blocks gc_blocksq read last and
     * ends with the first ones, where gc_output begins */
    const uint g = (uint)get_num_groups(0) - 1u - (uint)get_group_id(0);
    const int live = g < B * nblk; /* no early return before a barrier: a dead work-group runs no tile */
    const uint b = live ? g / nblk : 0, n0 = (g % nblk) * L, n1 = live ? min(N, n0 + L) : n0;
    const uint ush = (uint)sh; /* the host checks (K - 1) sh + p < 2^32 */
    const float th = lx < G_K ? temp[lx] : 0.0f;
    float cS[G_JPT], acc[G_JPT], q[G_JPT], vn[G_JPT];
    float accP = 0.0f;
#pragma unroll
    for (uint i = 0; i < G_JPT; i++) {
        const uint j = lx + G_LX * i;
        cS[i] = live && j < G_KP ? carryS[(size_t)g * G_KP + j] : 0.0f;
        acc[i] = 0.0f;
    }
    {
        const uint n = n0 + t;
        __global const float *row = w + off + b * sb + (size_t)(n < n1 ? n : n0) * sn;
#pragma unroll
        for (uint i = 0; i < G_JPT; i++) {
            const uint j = lx + G_LX * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
            vn[i] = (n < n1 && j < G_KP) ? row[h * ush + c] : 0.0f;
        }
    }
    for (uint nt = n0; nt < n1; nt += G_TT) {
        const uint n = nt + t;
        const int valid = n < n1;
#pragma unroll
        for (uint i = 0; i < G_JPT; i++) {
            const uint j = lx + G_LX * i;
            q[i] = vn[i] * vn[i];
            if (j < G_KP) lq[GC_LI(t, j)] = q[i];
        }
        if (nt + G_TT < n1) {
            const uint nn = nt + G_TT + t;
            __global const float *row = w + off + b * sb + (size_t)(nn < n1 ? nn : n0) * sn;
#pragma unroll
            for (uint i = 0; i < G_JPT; i++) {
                const uint j = lx + G_LX * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
                vn[i] = (nn < n1 && j < G_KP) ? row[h * ush + c] : 0.0f;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* 1 */
#pragma unroll
        for (uint i = 0; i < G_JPT; i++) {
            const uint j = lx + G_LX * i;
            if (j < G_KP) {
                /* the running sum over the tile's rows, the same order in every work-item of the column */
                float run = cS[i], S = 0.0f;
                for (uint r = 0; r < G_TT; r++) {
                    run += lq[GC_LI(r, j)];
                    if (r == t) S = run;
                }
                cS[i] = run;
                lr[GC_LI(t, j)] = q[i] / fmax(S, WBCL_TSSA_EPS_NORM);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* 2 */
        if (lx < G_K) {
            const float bh = valid ? bias[(size_t)lx * tmax + t0 + n] : 0.0f;
            ll[t * G_K + lx] = th * (wbcl_tssa_lsum(lr + (t * G_K + lx) * G_PP) + (float)WBCL_TSSA_P * bh);
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* 3 */
        if (lx < G_K) {
            __local const float *l = ll + t * G_K;
            float m = l[0];
            for (uint h = 1; h < G_K; h++) m = fmax(m, l[h]);
            float z = 0.0f;
            for (uint h = 0; h < G_K; h++) z += exp(l[h] - m);
            const float pi = valid ? exp(l[lx] - m) / z : 0.0f;
            lp[t * G_K + lx] = pi;
            accP += pi;
            if (valid) Pi[((size_t)b * G_K + lx) * N + n] = pi;
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* 4 */
#pragma unroll
        for (uint i = 0; i < G_JPT; i++) {
            const uint j = lx + G_LX * i;
            if (j < G_KP) acc[i] = fma(lp[t * G_K + j / WBCL_TSSA_P], q[i], acc[i]);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE); /* lq, lp are free */
#pragma unroll
    for (uint i = 0; i < G_JPT; i++) {
        const uint j = lx + G_LX * i;
        if (j < G_KP) lq[t * G_KP + j] = acc[i];
    }
    if (lx < G_K) lp[t * G_K + lx] = accP;
    barrier(CLK_LOCAL_MEM_FENCE);
    __global float *out = part2 + (size_t)g * GC_ROW;
    if (!live) return; /* after the last barrier */
    for (uint j = lid; j < G_KP; j += G_WG) {
        float s = 0.0f;
        for (uint r = 0; r < G_TT; r++) s += lq[r * G_KP + j];
        out[j] = s;
    }
    if (lid < G_K) {
        float s = 0.0f;
        for (uint r = 0; r < G_TT; r++) s += lp[r * G_K + lid];
        out[G_KP + lid] = s;
    }
}

/* y = -w Pi / (1 + Q / (P + 1e-8)) for the block's tokens; carryQP (part2 after gc_scan): Q and P
 * before the block. Per tile: w^2 (lq) and Pi (lpi, lanes lx < K) into one of two local buffers
 * (alternating: one barrier per tile), then each work-item runs the tile's rows <= t. */
__kernel __attribute__((reqd_work_group_size(G_WG, 1, 1))) void
wbcl_tssa_gc_output(__global const float *w, const ulong off, const ulong sb, const ulong sh, const ulong sn,
                    __global float *y, const ulong yoff, const ulong ysb, const ulong ysh, const ulong ysn,
                    const uint B, const uint N, const uint L, const uint nblk, __global const float *Pi,
                    __global const float *carryQP)
{
    __local float lq[2][G_TT * G_K * G_PP];
    __local float lpi[2][G_TT * G_K];
    const uint lid = get_local_id(0), lx = lid % G_LX, t = lid / G_LX, g = get_group_id(0);
    const int live = g < B * nblk; /* no early return before a barrier: a dead work-group runs no tile */
    const uint b = live ? g / nblk : 0, n0 = (g % nblk) * L, n1 = live ? min(N, n0 + L) : n0;
    const uint ush = (uint)sh, uysh = (uint)ysh; /* the host checks (K - 1) sh + p < 2^32 for both */
    float cQ[G_JPT], cP[G_JPT], v[G_JPT], vn[G_JPT];
    __global const float *cr = carryQP + (size_t)g * GC_ROW;
#pragma unroll
    for (uint i = 0; i < G_JPT; i++) {
        const uint j = lx + G_LX * i;
        cQ[i] = live && j < G_KP ? cr[j] : 0.0f;
        cP[i] = live && j < G_KP ? cr[G_KP + j / WBCL_TSSA_P] : 0.0f;
    }
    {
        const uint n = n0 + t;
        __global const float *row = w + off + b * sb + (size_t)(n < n1 ? n : n0) * sn;
#pragma unroll
        for (uint i = 0; i < G_JPT; i++) {
            const uint j = lx + G_LX * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
            vn[i] = (n < n1 && j < G_KP) ? row[h * ush + c] : 0.0f;
        }
    }
    uint buf = 0;
    for (uint nt = n0; nt < n1; nt += G_TT, buf ^= 1u) {
        const uint n = nt + t;
        const int valid = n < n1;
#pragma unroll
        for (uint i = 0; i < G_JPT; i++) {
            const uint j = lx + G_LX * i;
            v[i] = vn[i];
            if (j < G_KP) lq[buf][GC_LI(t, j)] = v[i] * v[i];
        }
        if (lx < G_K) lpi[buf][t * G_K + lx] = valid ? Pi[((size_t)b * G_K + lx) * N + n] : 0.0f;
        if (nt + G_TT < n1) {
            const uint nn = nt + G_TT + t;
            __global const float *row = w + off + b * sb + (size_t)(nn < n1 ? nn : n0) * sn;
#pragma unroll
            for (uint i = 0; i < G_JPT; i++) {
                const uint j = lx + G_LX * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
                vn[i] = (nn < n1 && j < G_KP) ? row[h * ush + c] : 0.0f;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        __global float *yr = y + yoff + b * ysb + (size_t)n * ysn;
#pragma unroll
        for (uint i = 0; i < G_JPT; i++) {
            const uint j = lx + G_LX * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
            if (j < G_KP) {
                float rQ = cQ[i], rP = cP[i], Q = 0.0f, P = 0.0f, ph = 0.0f;
                for (uint r = 0; r < G_TT; r++) {
                    const float pr = lpi[buf][r * G_K + h];
                    rQ = fma(pr, lq[buf][GC_LI(r, j)], rQ);
                    rP += pr;
                    if (r == t) {
                        Q = rQ;
                        P = rP;
                        ph = pr;
                    }
                }
                cQ[i] = rQ;
                cP[i] = rP;
                const float iden = 1.0f / (P + WBCL_TSSA_EPS_PI);
                if (valid) yr[h * uysh + c] = -v[i] * ph / fma(Q, iden, 1.0f);
            }
        }
    }
}

/* Decode and short inputs: one work-group of 256 per batch entry b walks the N tokens t0 ..
 * t0 + N - 1 in order, work-item lid owning the channels j = lid + 256*i (i < GC_SJ). The state's
 * sums S, Q (B, KP) and P (B, K) with their Kahan compensations (true sum = s - c) stay in
 * registers for the call (has_state = 0: from zero, nothing written back). Per token, three
 * barriers: ratios w^2 / max(S, eps) into local memory; lanes h < K: logit of head h; lanes h < K:
 * softmax, Pi, P; then every work-item updates Q and writes y. The same arithmetic as
 * wbcl_tssa_causal_seq. */
#define GC_SJ ((G_KP + G_WG - 1) / G_WG)
__kernel __attribute__((reqd_work_group_size(G_WG, 1, 1))) void
wbcl_tssa_gc_step(__global const float *w, const ulong off, const ulong sb, const ulong sh, const ulong sn,
                  __global float *y, const ulong yoff, const ulong ysb, const ulong ysh, const ulong ysn,
                  const uint B, const uint N, const uint t0, __global const float *temp,
                  __global const float *bias, const uint tmax, __global float *Pi, const int has_state,
                  __global float *S, __global float *cS, __global float *Q, __global float *cQ,
                  __global float *P, __global float *cP)
{
    __local float lr[G_K * G_PP]; /* w^2 / max(S, eps) */
    __local float ll[G_K];        /* logits */
    __local float lp[G_K], lP[G_K]; /* Pi, P of the token */
    const uint lid = get_local_id(0), g = get_group_id(0);
    const int live = g < B; /* no early return before a barrier: a dead work-group runs no token */
    const uint b = live ? g : 0, nN = live ? N : 0;
    const uint ush = (uint)sh, uysh = (uint)ysh; /* the host checks (K - 1) sh + p < 2^32 for both */
    float rS[GC_SJ], rcS[GC_SJ], rQ[GC_SJ], rcQ[GC_SJ];
    float rP = 0.0f, rcP = 0.0f;
    const size_t sj = (size_t)b * G_KP, sk = (size_t)b * G_K;
#pragma unroll
    for (uint i = 0; i < GC_SJ; i++) {
        const uint j = lid + G_WG * i;
        const int in = live && has_state && j < G_KP;
        rS[i] = in ? S[sj + j] : 0.0f;
        rcS[i] = in ? cS[sj + j] : 0.0f;
        rQ[i] = in ? Q[sj + j] : 0.0f;
        rcQ[i] = in ? cQ[sj + j] : 0.0f;
    }
    if (live && has_state && lid < G_K) {
        rP = P[sk + lid];
        rcP = cP[sk + lid];
    }
    const float th = lid < G_K ? temp[lid] : 0.0f;
    for (uint n = 0; n < nN; n++) {
        __global const float *row = w + off + b * sb + (size_t)n * sn;
        float v[GC_SJ];
#pragma unroll
        for (uint i = 0; i < GC_SJ; i++) {
            const uint j = lid + G_WG * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
            v[i] = j < G_KP ? row[h * ush + c] : 0.0f;
            if (j < G_KP) {
                const float v2 = v[i] * v[i];
                /* Kahan: S += v2 */
                const float yk = v2 - rcS[i], tk = rS[i] + yk;
                rcS[i] = (tk - rS[i]) - yk;
                rS[i] = tk;
                lr[h * G_PP + c] = v2 / fmax(tk, WBCL_TSSA_EPS_NORM);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < G_K) {
            ll[lid] = th * (wbcl_tssa_lsum(lr + lid * G_PP) + (float)WBCL_TSSA_P * bias[(size_t)lid * tmax + t0 + n]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < G_K) {
            float m = ll[0];
            for (uint h = 1; h < G_K; h++) m = fmax(m, ll[h]);
            float z = 0.0f;
            for (uint h = 0; h < G_K; h++) z += exp(ll[h] - m);
            const float pi = exp(ll[lid] - m) / z;
            const float yk = pi - rcP, tk = rP + yk;
            rcP = (tk - rP) - yk;
            rP = tk;
            lp[lid] = pi;
            lP[lid] = tk;
            Pi[((size_t)b * G_K + lid) * N + n] = pi;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        __global float *yr = y + yoff + b * ysb + (size_t)n * ysn;
#pragma unroll
        for (uint i = 0; i < GC_SJ; i++) {
            const uint j = lid + G_WG * i, h = j / WBCL_TSSA_P, c = j - h * WBCL_TSSA_P;
            if (j < G_KP) {
                const float ph = lp[h], iden = 1.0f / (lP[h] + WBCL_TSSA_EPS_PI);
                const float yk = ph * v[i] * v[i] - rcQ[i], tk = rQ[i] + yk;
                rcQ[i] = (tk - rQ[i]) - yk;
                rQ[i] = tk;
                yr[h * uysh + c] = -v[i] * ph / fma(tk, iden, 1.0f);
            }
        }
    }
    if (!has_state || !live) return;
#pragma unroll
    for (uint i = 0; i < GC_SJ; i++) {
        const uint j = lid + G_WG * i;
        if (j < G_KP) {
            S[sj + j] = rS[i];
            cS[sj + j] = rcS[i];
            Q[sj + j] = rQ[i];
            cQ[sj + j] = rcQ[i];
        }
    }
    if (lid < G_K) {
        P[sk + lid] = rP;
        cP[sk + lid] = rcP;
    }
}
#endif /* WBCL_TSSA_CAUSAL */
#endif /* GPU-shaped TSSA */
