/* White-box measures (include/wbcl/measures.h): coding rate R, compression
 * Rc against subspaces, rate reduction, ToST's Rvar, sparsity.
 * Kernels in cl/measures.cl (family "measures"); products through
 * wbcl_gemm_strided; log-determinants through wbcl_logdet_spd (batched
 * Cholesky, host/ops/linalg.c).
 *
 * R:  one batched GEMM G[b] = a Z_b^T Z_b (or a Z_b Z_b^T when N < d), +I on
 *     the diagonals, one batched logdet, R[b] = logdet[b] / 2.
 * Rc: W = Z U (one GEMM over all batch entries' rows, scratch slot 2), then per
 *     batch entry one strided GEMM batched over the K heads (the head's p
 *     columns of W, lda = K p) into G (slot 3), +I, and one logdet call for
 *     all batch * K matrices.
 * Rvar: W = Z U, then one kernel for the Pi-weighted column sums of W^2 and
 *     the group sizes N_k; the logs and the sum in double on the host.
 * Sparsity: per-row counts on the device, summed on the host.
 * Scratch slots 2 and 3 are shared with host/ops/ista.c (never live across
 * calls); slots 0-1 (GEMM) and 4-7 (linalg) belong to the ops called here. */
#include "internal.h"
#include "wbcl/gemm.h"
#include "wbcl/linalg.h"
#include "wbcl/measures.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAMILY "measures"
#define SLOT_W 2 /* Z U: (batch * N, K p)       */
#define SLOT_G 3 /* Grams: (count, q, q)         */

typedef struct meas_shape {
    size_t batch, N, d; /* Z (..., N, d) */
    size_t K, p;        /* subspaces     */
} meas_shape;

static wbcl_tensor view(wbcl_context *ctx, cl_mem mem, int ndim, size_t s0, size_t s1, size_t s2)
{
    wbcl_tensor t;
    memset(&t, 0, sizeof t);
    t.ctx = ctx;
    t.mem = mem;
    t.ndim = ndim;
    t.shape[0] = s0;
    t.shape[1] = s1;
    t.shape[2] = s2;
    t.numel = s0 * (ndim > 1 ? s1 : 1) * (ndim > 2 ? s2 : 1);
    t.dtype = WBCL_F32;
    return t;
}

static wbcl_status prefix_fail(wbcl_context *ctx, wbcl_status st, const char *op, const char *what)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", wbcl_context_last_error(ctx));
    return wbcl__fail(ctx, st, "%s: %s: %s", op, what, msg);
}

/* ---- validation ------------------------------------------------------------------------------ */

static wbcl_status check_Z(wbcl_context *ctx, const char *op, const wbcl_tensor *Z, meas_shape *s)
{
    wbcl_status st = wbcl__check_tensor(ctx, Z, op, "Z");
    if (st) return st;
    if (Z->ndim < 2) {
        char b[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: Z must be (N, d) or (..., N, d) (tokens as rows), has shape %s",
                          op, wbcl__shape_str(b, sizeof b, Z->ndim, Z->shape));
    }
    memset(s, 0, sizeof *s);
    s->N = Z->shape[Z->ndim - 2];
    s->d = Z->shape[Z->ndim - 1];
    s->batch = Z->numel / (s->N * s->d);
    if (s->N > UINT32_MAX || s->d > UINT32_MAX || s->batch > UINT32_MAX) {
        char b[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: Z of shape %s is too large for 32-bit kernel indices", op,
                          wbcl__shape_str(b, sizeof b, Z->ndim, Z->shape));
    }
    return WBCL_SUCCESS;
}

static wbcl_status check_eps2(wbcl_context *ctx, const char *op, double eps2)
{
    if (!(eps2 > 0.0) || !isfinite(eps2))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: eps2 must be > 0 and finite, got %g", op, eps2);
    return WBCL_SUCCESS;
}

static wbcl_status check_out(wbcl_context *ctx, const char *op, const void *p, const char *name)
{
    if (!p) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: output '%s' is NULL", op, name);
    return WBCL_SUCCESS;
}

/* U (d, K p) or, transposed, (K p, d); fills s->K, s->p. */
static wbcl_status check_U(wbcl_context *ctx, const char *op, const wbcl_tensor *U, wbcl_transpose tu, size_t K,
                           meas_shape *s)
{
    wbcl_status st = wbcl__check_tensor(ctx, U, op, "U");
    if (st) return st;
    char b[96];
    if (tu != WBCL_NO_TRANS && tu != WBCL_TRANS)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: tu must be WBCL_NO_TRANS or WBCL_TRANS, got %d", op,
                          (int)tu);
    if (K < 1) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: K (the number of subspaces) must be >= 1", op);
    if (U->ndim != 2)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: U must be a matrix, has shape %s", op,
                          wbcl__shape_str(b, sizeof b, U->ndim, U->shape));
    const size_t dd = tu == WBCL_TRANS ? U->shape[1] : U->shape[0], kp = tu == WBCL_TRANS ? U->shape[0] : U->shape[1];
    if (dd != s->d || kp % K != 0)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: U has shape %s; with tu = %s and K = %zu it must be %s with d = %zu (Z's last "
                          "dimension) and K p columns",
                          op, wbcl__shape_str(b, sizeof b, U->ndim, U->shape), tu == WBCL_TRANS ? "T" : "N", K,
                          tu == WBCL_TRANS ? "(K p, d)" : "(d, K p)", s->d);
    s->K = K;
    s->p = kp / K;
    if (kp > UINT32_MAX) return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: K p = %zu is too large", op, kp);
    return WBCL_SUCCESS;
}

/* ---- pieces ---------------------------------------------------------------------------------------- */

/* logdet of the `count` q x q matrices I + G[i] (G in a buffer), into out (doubles). */
static wbcl_status logdets(wbcl_context *ctx, const char *op, cl_mem G, size_t count, size_t q, double *out)
{
    wbcl_kern *k;
    wbcl_status st = wbcl__kernel(ctx, FAMILY, NULL, "wbcl_meas_add_diag", &k);
    if (st) return st;
    cl_uint q_ = (cl_uint)q, c_ = (cl_uint)count;
    float one = 1.0f;
    WBCL_ARG(ctx, k, 0, G);
    WBCL_ARG(ctx, k, 1, q_);
    WBCL_ARG(ctx, k, 2, c_);
    WBCL_ARG(ctx, k, 3, one);
    size_t g[2] = {q, count};
    if ((st = wbcl__launch(ctx, k, 2, g, NULL))) return st;
    cl_mem ldm;
    if ((st = wbcl__buffer(ctx, count * sizeof(float), "measures: log-determinants", &ldm))) return st;
    float *ld = malloc(count * sizeof *ld);
    if (!ld) {
        clReleaseMemObject(ldm);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    }
    wbcl_tensor A = view(ctx, G, 3, count, q, q), LD = view(ctx, ldm, 1, count, 0, 0);
    st = wbcl_logdet_spd(ctx, &A, &LD);
    if (st) st = prefix_fail(ctx, st, op, "logdet(I + a Gram)");
    if (!st) {
        cl_int e = clEnqueueReadBuffer(ctx->queue, ldm, CL_TRUE, 0, count * sizeof(float), ld, 0, NULL, NULL);
        if (e != CL_SUCCESS) st = wbcl__cl_fail(ctx, e, "%s: reading the log-determinants", op);
    }
    if (!st)
        for (size_t i = 0; i < count; i++) out[i] = ld[i];
    free(ld);
    clReleaseMemObject(ldm);
    return st;
}

static wbcl_gemm_desc gram_desc(int small_side_tokens, size_t N, size_t cols, size_t batch, float alpha, size_t ld,
                                size_t stride, size_t off)
{
    wbcl_gemm_desc g;
    memset(&g, 0, sizeof g);
    const size_t q = small_side_tokens ? N : cols;
    /* cols <= N: G = A^T A (q = cols, inner N); else G = A A^T (q = N, inner cols) */
    g.ta = small_side_tokens ? WBCL_NO_TRANS : WBCL_TRANS;
    g.tb = small_side_tokens ? WBCL_TRANS : WBCL_NO_TRANS;
    g.m = g.n = q;
    g.k = small_side_tokens ? cols : N;
    g.batch = batch;
    g.alpha = alpha;
    g.beta = 0.0f;
    g.off_a = g.off_b = off;
    g.lda = g.ldb = ld;
    g.stride_a = g.stride_b = stride;
    g.off_c = 0;
    g.ldc = q;
    g.stride_c = q * q;
    return g;
}

static wbcl_status rate(wbcl_context *ctx, const char *op, const wbcl_tensor *Z, const meas_shape *s, double eps2,
                        double *R)
{
    const size_t q = s->d <= s->N ? s->d : s->N;
    size_t bytes;
    if (!wbcl__mul_ok(s->batch * q, q * sizeof(float), &bytes))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %zu Grams of %zu x %zu overflow", op, s->batch, q, q);
    double *ld = malloc(s->batch * sizeof *ld);
    if (!ld) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    cl_mem G;
    wbcl_status st = wbcl__scratch(ctx, SLOT_G, bytes, &G);
    if (!st) {
        const float a = (float)((double)s->d / ((double)s->N * eps2));
        wbcl_gemm_desc g = gram_desc(s->N < s->d, s->N, s->d, s->batch, a, s->d, s->N * s->d, 0);
        wbcl_tensor Gt = view(ctx, G, 1, s->batch * q * q, 0, 0);
        if ((st = wbcl_gemm_strided(ctx, &g, Z, Z, &Gt))) st = prefix_fail(ctx, st, op, "Gram of Z");
    }
    if (!st) st = logdets(ctx, op, G, s->batch, q, ld);
    if (!st)
        for (size_t b = 0; b < s->batch; b++) R[b] = 0.5 * ld[b];
    free(ld);
    return st;
}

/* W = Z U into slot 2: (batch * N, K p). */
static wbcl_status project(wbcl_context *ctx, const char *op, const wbcl_tensor *Z, const wbcl_tensor *U,
                           wbcl_transpose tu, const meas_shape *s, cl_mem *W)
{
    const size_t rows = s->batch * s->N, kp = s->K * s->p;
    size_t bytes;
    if (!wbcl__mul_ok(rows, kp * sizeof(float), &bytes))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: Z U of %zu x %zu overflows", op, rows, kp);
    wbcl_status st = wbcl__scratch(ctx, SLOT_W, bytes, W);
    if (st) return st;
    wbcl_tensor Z2 = view(ctx, Z->mem, 2, rows, s->d, 0), W2 = view(ctx, *W, 2, rows, kp, 0);
    st = wbcl_gemm(ctx, WBCL_NO_TRANS, tu, 1.0f, &Z2, U, 0.0f, &W2);
    return st ? prefix_fail(ctx, st, op, "Z U") : WBCL_SUCCESS;
}

static wbcl_status rate_subspaces(wbcl_context *ctx, const char *op, const wbcl_tensor *Z, const wbcl_tensor *U,
                                  wbcl_transpose tu, const meas_shape *s, double eps2, double *Rc)
{
    const size_t K = s->K, p = s->p, N = s->N, kp = K * p, q = p <= N ? p : N, count = s->batch * K;
    size_t bytes;
    if (!wbcl__mul_ok(count * q, q * sizeof(float), &bytes))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %zu Grams of %zu x %zu overflow", op, count, q, q);
    double *ld = malloc(count * sizeof *ld);
    if (!ld) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    cl_mem W, G;
    wbcl_status st = project(ctx, op, Z, U, tu, s, &W);
    if (!st) st = wbcl__scratch(ctx, SLOT_G, bytes, &G);
    if (!st) {
        const float a = (float)((double)p / ((double)N * eps2));
        wbcl_tensor Wt = view(ctx, W, 1, s->batch * N * kp, 0, 0), Gt = view(ctx, G, 1, count * q * q, 0, 0);
        for (size_t b = 0; b < s->batch && !st; b++) {
            /* head k of batch entry b: the p columns k p .. k p + p - 1 of rows b N .. b N + N - 1 */
            wbcl_gemm_desc g = gram_desc(N < p, N, p, K, a, kp, p, b * N * kp);
            g.off_c = b * K * q * q;
            if ((st = wbcl_gemm_strided(ctx, &g, &Wt, &Wt, &Gt))) st = prefix_fail(ctx, st, op, "Grams of Z U_k");
        }
    }
    if (!st) st = logdets(ctx, op, G, count, q, ld);
    if (!st)
        for (size_t b = 0; b < s->batch; b++) {
            double sum = 0.0;
            for (size_t k = 0; k < K; k++) sum += ld[b * K + k];
            Rc[b] = 0.5 * sum;
        }
    free(ld);
    return st;
}

/* ---- public API -------------------------------------------------------------------------------------- */

wbcl_status wbcl_coding_rate(wbcl_context *ctx, const wbcl_tensor *Z, double eps2, double *R)
{
    static const char op[] = "wbcl_coding_rate";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    meas_shape s;
    wbcl_status st = check_Z(ctx, op, Z, &s);
    if (!st) st = check_eps2(ctx, op, eps2);
    if (!st) st = check_out(ctx, op, R, "R");
    if (!st) {
        wbcl_kern *k;
        st = wbcl__kernel(ctx, FAMILY, NULL, "wbcl_meas_add_diag", &k);
    }
    return st ? st : rate(ctx, op, Z, &s, eps2, R);
}

wbcl_status wbcl_coding_rate_subspaces(wbcl_context *ctx, const wbcl_tensor *Z, const wbcl_tensor *U,
                                       wbcl_transpose tu, size_t K, double eps2, double *Rc)
{
    static const char op[] = "wbcl_coding_rate_subspaces";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    meas_shape s;
    wbcl_status st = check_Z(ctx, op, Z, &s);
    if (!st) st = check_U(ctx, op, U, tu, K, &s);
    if (!st) st = check_eps2(ctx, op, eps2);
    if (!st) st = check_out(ctx, op, Rc, "Rc");
    if (!st) {
        wbcl_kern *k;
        st = wbcl__kernel(ctx, FAMILY, NULL, "wbcl_meas_add_diag", &k);
    }
    return st ? st : rate_subspaces(ctx, op, Z, U, tu, &s, eps2, Rc);
}

wbcl_status wbcl_rate_reduction(wbcl_context *ctx, const wbcl_tensor *Z, const wbcl_tensor *U, wbcl_transpose tu,
                                size_t K, double eps2, double *dR, double *R, double *Rc)
{
    static const char op[] = "wbcl_rate_reduction";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    meas_shape s;
    wbcl_status st = check_Z(ctx, op, Z, &s);
    if (!st) st = check_U(ctx, op, U, tu, K, &s);
    if (!st) st = check_eps2(ctx, op, eps2);
    if (!st) st = check_out(ctx, op, dR, "dR");
    if (!st) {
        wbcl_kern *k;
        st = wbcl__kernel(ctx, FAMILY, NULL, "wbcl_meas_add_diag", &k);
    }
    if (st) return st;
    double *r = malloc(2 * s.batch * sizeof *r);
    if (!r) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    st = rate(ctx, op, Z, &s, eps2, r);
    if (!st) st = rate_subspaces(ctx, op, Z, U, tu, &s, eps2, r + s.batch);
    if (!st)
        for (size_t b = 0; b < s.batch; b++) {
            dR[b] = r[b] - r[s.batch + b];
            if (R) R[b] = r[b];
            if (Rc) Rc[b] = r[s.batch + b];
        }
    free(r);
    return st;
}

wbcl_status wbcl_coding_rate_var(wbcl_context *ctx, const wbcl_tensor *Z, const wbcl_tensor *U, wbcl_transpose tu,
                                 size_t K, const wbcl_tensor *Pi, double eps2, double *Rvar)
{
    static const char op[] = "wbcl_coding_rate_var";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    meas_shape s;
    wbcl_status st = check_Z(ctx, op, Z, &s);
    if (!st) st = check_U(ctx, op, U, tu, K, &s);
    if (!st) st = wbcl__check_tensor(ctx, Pi, op, "Pi");
    if (!st) st = check_eps2(ctx, op, eps2);
    if (!st) st = check_out(ctx, op, Rvar, "Rvar");
    if (st) return st;
    int ok = Pi->ndim == Z->ndim && Pi->shape[Pi->ndim - 2] == K && Pi->shape[Pi->ndim - 1] == s.N;
    for (int i = 0; ok && i < Z->ndim - 2; i++) ok = Pi->shape[i] == Z->shape[i];
    if (!ok) {
        char sp[96], sz[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: Pi has shape %s; for Z %s and K = %zu it must be (..., %zu, %zu)",
                          op, wbcl__shape_str(sp, sizeof sp, Pi->ndim, Pi->shape),
                          wbcl__shape_str(sz, sizeof sz, Z->ndim, Z->shape), K, K, s.N);
    }
    wbcl_kern *k;
    if ((st = wbcl__kernel(ctx, FAMILY, NULL, "wbcl_meas_var_stats", &k))) return st;
    const size_t kp = K * s.p, nout = s.batch * (kp + K);
    float *h = malloc(nout * sizeof *h);
    if (!h) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    cl_mem W, out = NULL;
    st = project(ctx, op, Z, U, tu, &s, &W);
    if (!st) st = wbcl__buffer(ctx, nout * sizeof(float), "wbcl_coding_rate_var: statistics", &out);
    if (!st) {
        cl_uint N_ = (cl_uint)s.N, K_ = (cl_uint)K, p_ = (cl_uint)s.p, b_ = (cl_uint)s.batch;
        if (!(st = wbcl__set_arg(ctx, k, 0, sizeof W, &W)) && !(st = wbcl__set_arg(ctx, k, 1, sizeof Pi->mem, &Pi->mem)) &&
            !(st = wbcl__set_arg(ctx, k, 2, sizeof N_, &N_)) && !(st = wbcl__set_arg(ctx, k, 3, sizeof K_, &K_)) &&
            !(st = wbcl__set_arg(ctx, k, 4, sizeof p_, &p_)) && !(st = wbcl__set_arg(ctx, k, 5, sizeof b_, &b_)) &&
            !(st = wbcl__set_arg(ctx, k, 6, sizeof out, &out))) {
            size_t g[2] = {kp + K, s.batch};
            st = wbcl__launch(ctx, k, 2, g, NULL);
        }
    }
    if (!st) {
        cl_int e = clEnqueueReadBuffer(ctx->queue, out, CL_TRUE, 0, nout * sizeof(float), h, 0, NULL, NULL);
        if (e != CL_SUCCESS) st = wbcl__cl_fail(ctx, e, "%s: reading the statistics", op);
    }
    if (!st) {
        const double c = (double)s.d / eps2;
        for (size_t b = 0; b < s.batch; b++) {
            double sum = 0.0;
            for (size_t kk = 0; kk < K; kk++) {
                const double nk = h[s.batch * kp + b * K + kk];
                if (!(nk > 0.0)) continue;
                double inner = 0.0;
                for (size_t i = 0; i < s.p; i++) inner += log1p(c * (double)h[b * kp + kk * s.p + i] / nk);
                sum += nk / (double)s.N * inner;
            }
            Rvar[b] = 0.5 * sum;
        }
    }
    if (out) clReleaseMemObject(out);
    free(h);
    return st;
}

wbcl_status wbcl_sparsity(wbcl_context *ctx, const wbcl_tensor *Z, float threshold, double *frac)
{
    static const char op[] = "wbcl_sparsity";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    meas_shape s;
    wbcl_status st = check_Z(ctx, op, Z, &s);
    if (!st) st = check_out(ctx, op, frac, "frac");
    if (st) return st;
    if (!(threshold >= 0.0f))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: threshold must be >= 0, got %g", op,
                          (double)threshold);
    wbcl_kern *k;
    if ((st = wbcl__kernel(ctx, FAMILY, NULL, "wbcl_meas_count_rows", &k))) return st;
    const size_t rows = s.batch * s.N;
    cl_uint *h = malloc(rows * sizeof *h);
    if (!h) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    cl_mem cnt = NULL;
    st = wbcl__buffer(ctx, rows * sizeof(cl_uint), "wbcl_sparsity: counts", &cnt);
    if (!st) {
        cl_ulong rows_ = rows, cols_ = s.d;
        if (!(st = wbcl__set_arg(ctx, k, 0, sizeof Z->mem, &Z->mem)) && !(st = wbcl__set_arg(ctx, k, 1, sizeof rows_, &rows_)) &&
            !(st = wbcl__set_arg(ctx, k, 2, sizeof cols_, &cols_)) &&
            !(st = wbcl__set_arg(ctx, k, 3, sizeof threshold, &threshold)) &&
            !(st = wbcl__set_arg(ctx, k, 4, sizeof cnt, &cnt))) {
            size_t g = rows;
            st = wbcl__launch(ctx, k, 1, &g, NULL);
        }
    }
    if (!st) {
        cl_int e = clEnqueueReadBuffer(ctx->queue, cnt, CL_TRUE, 0, rows * sizeof(cl_uint), h, 0, NULL, NULL);
        if (e != CL_SUCCESS) st = wbcl__cl_fail(ctx, e, "%s: reading the counts", op);
    }
    if (!st)
        for (size_t b = 0; b < s.batch; b++) {
            double c = 0.0;
            for (size_t i = 0; i < s.N; i++) c += h[b * s.N + i];
            frac[b] = c / ((double)s.N * (double)s.d);
        }
    if (cnt) clReleaseMemObject(cnt);
    free(h);
    return st;
}
