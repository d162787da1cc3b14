/* wbcl-run — attention modules: attn.softmax (timm ViT `Attention`, causal = GPT) and attn.mssa
 * (CRATE `Attention`), SPEC §6.2. Weights are the reference state_dict keys, optionally under a
 * prefix (--param prefix=blocks.0.attn.); d is the last dimension of the input.
 *
 * Verification tolerance (--verify), relative to the output's magnitude
 *   scale = max|v| · max_j Σ_c |Wo[j,c]| + max|bo|
 * (every output is Wo·o + bo with o a convex combination of value rows, |o_c| <= max|v|):
 *   tol = (4d + 2n + 4(p + 8)(1 + S) + 64) · 2^-24,   S = p^-1/2 · max_i ‖q̃_i‖ · max_j ‖k̃_j‖,
 * where q̃, k̃ are |x||W| + |b| (bounds of q, k and of their rounding errors' scale). The terms:
 * the two projections (length-d dot products), the length-n weighted sums, and the score errors
 * (a length-p dot product, magnified by the size S of the scores) that move the softmax weights.
 * S is what makes logits of 1e4 legitimately less accurate; a wrong mask, scale or index gives
 * errors of order 1 in units of scale. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "wbcl/attention.h"

#define U WBCL_RUN_U32

/* Loads prefix+name (shape checked) into host. */
static int load_key(wbcl_run *r, const char *prefix, const char *name, int required, int ndim, const size_t *shape,
                    wbcl_run_array *host)
{
    char key[512];
    snprintf(key, sizeof key, "%s%s", prefix ? prefix : "", name);
    return wbcl_run_weight(r, key, required, ndim, shape, host, NULL);
}

/* x as (B, N, d): 2-D (N, d) or 3-D (B, N, d) inputs. */
static int token_shape(wbcl_run *r, const wbcl_run_array *x, size_t *B, size_t *N, size_t *d)
{
    if (x->ndim == 2) {
        *B = 1;
        *N = x->shape[0];
        *d = x->shape[1];
    } else if (x->ndim == 3) {
        *B = x->shape[0];
        *N = x->shape[1];
        *d = x->shape[2];
    } else {
        char s[96];
        return wbcl_run_fail(r, "input x must be (N, d) or (B, N, d), got %s",
                             wbcl_run_shape_str(s, sizeof s, x->ndim, x->shape));
    }
    return 0;
}

/* max over heads, tokens of the L2 norm over a head's p channels of |x||W|ᵀ + |b|, for the
 * rows [row0, row0 + K*p) of W (rows x d). */
static double max_head_norm(const float *x, size_t rows, size_t d, const float *W, size_t row0, const float *b,
                            size_t K, size_t p)
{
    double best = 0.0;
    for (size_t t = 0; t < rows; t++)
        for (size_t h = 0; h < K; h++) {
            double s2 = 0.0;
            for (size_t c = 0; c < p; c++) {
                const float *w = W + (row0 + h * p + c) * d;
                double acc = b ? fabs(b[row0 + h * p + c]) : 0.0;
                for (size_t e = 0; e < d; e++) acc += fabs((double)x[t * d + e]) * fabs((double)w[e]);
                s2 += acc * acc;
            }
            if (s2 > best) best = s2;
        }
    return sqrt(best);
}

static double out_scale(const float *Wo, size_t d, size_t inner, const float *bo, double vmax)
{
    double s = 0.0, bmax = 0.0;
    for (size_t j = 0; j < d; j++) {
        double row = 0.0;
        for (size_t c = 0; c < inner; c++) row += fabs((double)Wo[j * inner + c]);
        if (row > s) s = row;
        if (bo && fabs((double)bo[j]) > bmax) bmax = fabs((double)bo[j]);
    }
    return vmax * s + bmax;
}

static double tolerance(size_t d, size_t n, size_t p, double S)
{
    return (4.0 * (double)d + 2.0 * (double)n + 4.0 * ((double)p + 8.0) * (1.0 + S) + 64.0) * U;
}

/* ---- attn.softmax ------------------------------------------------------------------------------ */
static int run_softmax_attn(wbcl_run *r)
{
    long heads;
    int causal;
    const char *prefix = wbcl_run_param_str(r, "prefix");
    if (wbcl_run_param_int(r, "heads", 8, 1, 1L << 20, &heads)) return 1;
    if (wbcl_run_param_bool(r, "causal", 0, &causal)) return 1;
    wbcl_run_array xh = {0}, W = {0}, b = {0}, Wo = {0}, bo = {0}, yh = {0};
    wbcl_tensor *x = NULL, *y = NULL;
    wbcl_mha *m = NULL;
    double *dx = NULL, *dW = NULL, *db = NULL, *dWo = NULL, *dbo = NULL, *want = NULL;
    int rc = 1;
    size_t B = 0, N = 0, d = 0;
    if (wbcl_run_input(r, 0, "x", &xh, &x)) goto done;
    if (token_shape(r, &xh, &B, &N, &d)) goto done;
    if (d % (size_t)heads) {
        wbcl_run_fail(r, "heads = %ld does not divide d = %zu (the last dimension of x)", heads, d);
        goto done;
    }
    size_t sW[2] = {3 * d, d}, sb[1] = {3 * d}, sWo[2] = {d, d}, sbo[1] = {d};
    if (load_key(r, prefix, "qkv.weight", 1, 2, sW, &W)) goto done;
    if (load_key(r, prefix, "qkv.bias", 0, 1, sb, &b)) goto done;
    if (load_key(r, prefix, "proj.weight", 1, 2, sWo, &Wo)) goto done;
    if (load_key(r, prefix, "proj.bias", 1, 1, sbo, &bo)) goto done;
    if (wbcl_run_check(r, wbcl_mha_create(r->ctx, d, (size_t)heads, causal, W.data, b.data, Wo.data, bo.data, &m)))
        goto done;
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, xh.ndim, xh.shape, WBCL_F32, NULL, &y))) goto done;
    if (wbcl_run_check(r, wbcl_mha_forward(r->ctx, m, x, y))) goto done;
    if (wbcl_run_download(r, y, &yh)) goto done;
    if (r->verify) {
        const size_t p = d / (size_t)heads, rows = B * N;
        if (!(dx = wbcl_run_to_f64(r, xh.data, xh.numel)) || !(dW = wbcl_run_to_f64(r, W.data, W.numel)) ||
            (b.data && !(db = wbcl_run_to_f64(r, b.data, b.numel))) || !(dWo = wbcl_run_to_f64(r, Wo.data, Wo.numel)) ||
            !(dbo = wbcl_run_to_f64(r, bo.data, bo.numel)))
            goto done;
        if (!(want = malloc(xh.numel * sizeof *want))) {
            wbcl_run_fail(r, "out of memory");
            goto done;
        }
        wbcl_ref_mha(B, N, d, (size_t)heads, causal, dx, dW, db, dWo, dbo, want);
        double qn = max_head_norm(xh.data, rows, d, W.data, 0, b.data, (size_t)heads, p);
        double kn = max_head_norm(xh.data, rows, d, W.data, d, b.data, (size_t)heads, p);
        double vmax = 0.0;
        for (size_t t = 0; t < rows; t++)
            for (size_t c = 0; c < d; c++) {
                double acc = b.data ? fabs(b.data[2 * d + c]) : 0.0;
                for (size_t e = 0; e < d; e++) acc += fabs(xh.data[t * d + e]) * fabs(W.data[(2 * d + c) * d + e]);
                if (acc > vmax) vmax = acc;
            }
        double S = qn * kn / sqrt((double)p);
        wbcl_run_err e = wbcl_run_compare(yh.data, want, yh.numel, out_scale(Wo.data, d, d, bo.data, vmax));
        if (wbcl_run_verify_err(r, &e, yh.data, want, tolerance(d, N, p, S))) goto done;
    }
    rc = wbcl_run_write_output(r, &yh);
done:
    wbcl_mha_destroy(m);
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(y);
    wbcl_run_array *arrs[] = {&xh, &W, &b, &Wo, &bo, &yh};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) wbcl_run_array_free(arrs[i]);
    free(dx); free(dW); free(db); free(dWo); free(dbo); free(want);
    return rc;
}

static const char *const softmax_params[] = {"heads", "causal", "prefix", NULL};
const wbcl_run_module wbcl_mod_attn_softmax = {
    "attn.softmax",
    "softmax multi-head attention layer (timm ViT Attention; causal=1: GPT), fused online softmax",
    "  --input X.npy          x, shape (N, d) or (B, N, d)\n"
    "  --weights W            timm Attention state_dict: 'qkv.weight' (3d, d), 'qkv.bias' (3d, optional),\n"
    "                         'proj.weight' (d, d), 'proj.bias' (d)\n"
    "  --param heads=K        number of heads (default 8); must divide d\n"
    "  --param causal=0|1     causal mask (default 0)\n"
    "  --param prefix=P       key prefix, e.g. blocks.0.attn. (default none)\n"
    "  --output Y.npy         proj(softmax(q k^T / sqrt(d/K) [+ mask]) v), shape of x\n"
    "  --verify               against the double reference, relative to max|v| max_j sum|Wo_j| + max|bo|;\n"
    "                         tolerance (4d + 2N + 4(p + 8)(1 + S) + 64) 2^-24, S the largest score bound\n",
    softmax_params, NULL, 1, 1, WBCL_RUN_REQUIRED, WBCL_RUN_OPTIONAL, 1, run_softmax_attn};

/* ---- attn.mssa ---------------------------------------------------------------------------------- */
static int run_mssa_attn(wbcl_run *r)
{
    long heads, dim_head;
    int causal;
    const char *prefix = wbcl_run_param_str(r, "prefix");
    if (wbcl_run_param_int(r, "heads", 8, 1, 1L << 20, &heads)) return 1;
    if (wbcl_run_param_int(r, "dim_head", 0, 0, 1L << 20, &dim_head)) return 1;
    if (wbcl_run_param_bool(r, "causal", 0, &causal)) return 1;
    wbcl_run_array xh = {0}, U_ = {0}, Wo = {0}, bo = {0}, yh = {0};
    wbcl_tensor *x = NULL, *y = NULL;
    wbcl_mssa *m = NULL;
    double *dx = NULL, *dU = NULL, *dWo = NULL, *dbo = NULL, *want = NULL;
    int rc = 1;
    size_t B = 0, N = 0, d = 0;
    if (wbcl_run_input(r, 0, "x", &xh, &x)) goto done;
    if (token_shape(r, &xh, &B, &N, &d)) goto done;
    if (dim_head == 0) { /* default: from the weights, qkv.weight (heads * dim_head, d) */
        size_t sAny[2] = {WBCL_RUN_ANY, d};
        if (load_key(r, prefix, "qkv.weight", 1, 2, sAny, &U_)) goto done;
        if (U_.shape[0] % (size_t)heads) {
            wbcl_run_fail(r, "%s: heads = %ld does not divide %zu, the rows of '%sqkv.weight' (heads * dim_head)",
                          r->weights_path, heads, U_.shape[0], prefix ? prefix : "");
            goto done;
        }
        dim_head = (long)(U_.shape[0] / (size_t)heads);
    }
    const size_t p = (size_t)dim_head, inner = (size_t)heads * p;
    const int identity_ok = heads == 1 && p == d;
    size_t sU[2] = {inner, d}, sWo[2] = {d, inner}, sbo[1] = {d};
    if (!U_.data && load_key(r, prefix, "qkv.weight", 1, 2, sU, &U_)) goto done;
    if (load_key(r, prefix, "to_out.0.weight", !identity_ok, 2, sWo, &Wo)) goto done;
    if (load_key(r, prefix, "to_out.0.bias", !identity_ok || Wo.data, 1, sbo, &bo)) goto done;
    if (!Wo.data && bo.data) {
        wbcl_run_fail(r, "%s: missing tensor '%sto_out.0.weight' (the file has the bias)", r->weights_path,
                      prefix ? prefix : "");
        goto done;
    }
    if (wbcl_run_check(r, wbcl_mssa_create(r->ctx, d, (size_t)heads, p, causal, U_.data, Wo.data, bo.data, &m)))
        goto done;
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, xh.ndim, xh.shape, WBCL_F32, NULL, &y))) goto done;
    if (wbcl_run_check(r, wbcl_mssa_forward(r->ctx, m, x, y))) goto done;
    if (wbcl_run_download(r, y, &yh)) goto done;
    if (r->verify) {
        const size_t rows = B * N;
        if (!(dx = wbcl_run_to_f64(r, xh.data, xh.numel)) || !(dU = wbcl_run_to_f64(r, U_.data, U_.numel)) ||
            (Wo.data && !(dWo = wbcl_run_to_f64(r, Wo.data, Wo.numel))) ||
            (bo.data && !(dbo = wbcl_run_to_f64(r, bo.data, bo.numel))))
            goto done;
        if (!(want = malloc(xh.numel * sizeof *want))) {
            wbcl_run_fail(r, "out of memory");
            goto done;
        }
        wbcl_ref_mssa(B, N, d, (size_t)heads, p, causal, dx, dU, dWo, dbo, want);
        double wn = max_head_norm(xh.data, rows, d, U_.data, 0, NULL, (size_t)heads, p);
        double vmax = 0.0;
        for (size_t t = 0; t < rows; t++)
            for (size_t c = 0; c < inner; c++) {
                double acc = 0.0;
                for (size_t e = 0; e < d; e++) acc += fabs(xh.data[t * d + e]) * fabs(U_.data[c * d + e]);
                if (acc > vmax) vmax = acc;
            }
        double scale = Wo.data ? out_scale(Wo.data, d, inner, bo.data, vmax) : vmax;
        wbcl_run_err e = wbcl_run_compare(yh.data, want, yh.numel, scale);
        if (wbcl_run_verify_err(r, &e, yh.data, want, tolerance(d > inner ? d : inner, N, p, wn * wn / sqrt((double)p))))
            goto done;
    }
    rc = wbcl_run_write_output(r, &yh);
done:
    wbcl_mssa_destroy(m);
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(y);
    wbcl_run_array *arrs[] = {&xh, &U_, &Wo, &bo, &yh};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) wbcl_run_array_free(arrs[i]);
    free(dx); free(dU); free(dWo); free(dbo); free(want);
    return rc;
}

static const char *const mssa_params[] = {"heads", "dim_head", "causal", "prefix", NULL};
const wbcl_run_module wbcl_mod_attn_mssa = {
    "attn.mssa",
    "CRATE multi-head subspace self-attention (Q = K = V = x U^T), fused online softmax",
    "  --input X.npy          x, shape (N, d) or (B, N, d)\n"
    "  --weights W            CRATE Attention state_dict: 'qkv.weight' (K*p, d) (no bias),\n"
    "                         'to_out.0.weight' (d, K*p), 'to_out.0.bias' (d); the to_out pair may be\n"
    "                         absent only when heads = 1 and dim_head = d (identity output)\n"
    "  --param heads=K        number of heads (default 8)\n"
    "  --param dim_head=p     head dimension (default: the rows of qkv.weight / heads)\n"
    "  --param causal=0|1     causal mask (default 0; book eq. 5.3.34)\n"
    "  --param prefix=P       key prefix, e.g. transformer.layers.0.0.fn. (default none)\n"
    "  --output Y.npy         to_out(softmax(w w^T / sqrt(p) [+ mask]) w), w = x U^T; shape of x\n"
    "  --verify               as attn.softmax (v = w)\n",
    mssa_params, NULL, 1, 1, WBCL_RUN_REQUIRED, WBCL_RUN_OPTIONAL, 1, run_mssa_attn};
