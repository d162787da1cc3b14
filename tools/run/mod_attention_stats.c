/* wbcl-run — the statistics-based attention modules: attn.tssa (ToST AttentionTSSA),
 * attn.tssa_causal (ToST-LM CausalSelfAttention_TSSA, with --param decode=1 for the recurrent
 * decode), attn.xca (XCiT XCA) and attn.energy (Yang-Huang-Wipf energy-descent attention),
 * SPEC §6.2. Weights are the reference state_dict keys, optionally under a prefix
 * (--param prefix=blocks.0.attn.); d is the last dimension of the input.
 *
 * Verification tolerances (--verify), normwise relative to the output's magnitude:
 *   TSSA    scale = max|w| max_j sum_c |Wo[j,c]| + max|bo| (|y| <= |w| since Pi <= 1 and
 *           1/(1 + dots) <= 1), w bounded by |x||W|^T + |b|;
 *           tol = (4d + 4(N/64 + 81) + 8p + 64)(1 + L) 2^-24 with L = max|temp| p (1 + max|bias|)
 *           the largest logit: the projections (length-d dots), the blocked sums over tokens
 *           (<= N/64 + 81 terms per float sum), the p-term logits whose absolute error moves Pi;
 *   XCA     scale = max|v| max_j sum_c |Wp[j,c]| + max|bp|;
 *           tol = (4d + 2N + 4p + 64)(1 + max|temperature|) 2^-24 (normalized Gram in [-1, 1]
 *           summed over N tokens, times the temperature);
 *   energy  scale = max|reference|; tol = steps (N d / 2 + 4d + 4N + 64)(1 + |W_f^s|) 2^-24:
 *           a weight exp(-z) moves by z e^{-z} (d u) <= 0.37 d u whatever the logit, summed over N
 *           tokens; for rho = log the relative weight error is <= d u.
 * A wrong axis, epsilon or index gives errors of order 1 in units of scale. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "wbcl/energy.h"
#include "wbcl/tssa.h"
#include "wbcl/xca.h"

#define U WBCL_RUN_U32

static int load_key(wbcl_run *r, const char *prefix, const char *name, int required, int ndim, const size_t *shape,
                    wbcl_run_array *host)
{
    char key[512];
    snprintf(key, sizeof key, "%s%s", prefix ? prefix : "", name);
    return wbcl_run_weight(r, key, required, ndim, shape, host, NULL);
}

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

static int check_heads(wbcl_run *r, long heads, size_t d)
{
    if (d % (size_t)heads) return wbcl_run_fail(r, "heads = %ld does not divide d = %zu (the last dimension of x)", heads, d);
    return 0;
}

/* max over tokens and output rows [row0, row0 + n) of |x||W|^T + |b| */
static double max_proj(const float *x, size_t rows, size_t d, const float *W, size_t row0, size_t n, const float *b)
{
    double best = 0.0;
    for (size_t t = 0; t < rows; t++)
        for (size_t j = row0; j < row0 + n; j++) {
            double acc = b ? fabs((double)b[j]) : 0.0;
            for (size_t e = 0; e < d; e++) acc += fabs((double)x[t * d + e]) * fabs((double)W[j * d + e]);
            if (acc > best) best = acc;
        }
    return best;
}

static double out_scale(const float *Wo, size_t d, const float *bo, double vmax)
{
    double s = 0.0, bmax = 0.0;
    for (size_t j = 0; j < d; j++) {
        double row = 0.0;
        for (size_t c = 0; c < d; c++) row += fabs((double)Wo[j * d + c]);
        if (row > s) s = row;
        if (bo && fabs((double)bo[j]) > bmax) bmax = fabs((double)bo[j]);
    }
    return vmax * s + bmax;
}

static double maxabs_f(const float *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fabs((double)x[i]) > m ? fabs((double)x[i]) : m;
    return m;
}

static double *to64(wbcl_run *r, const wbcl_run_array *a) { return a->data ? wbcl_run_to_f64(r, a->data, a->numel) : NULL; }

/* ---- attn.tssa / attn.tssa_causal ----------------------------------------------------------------- */

static int run_tssa_common(wbcl_run *r, int causal)
{
    long heads;
    int decode = 0;
    const char *prefix = wbcl_run_param_str(r, "prefix");
    if (wbcl_run_param_int(r, "heads", 8, 1, 1L << 20, &heads)) return 1;
    if (causal && wbcl_run_param_bool(r, "decode", 0, &decode)) return 1;
    wbcl_run_array xh = {0}, W = {0}, b = {0}, temp = {0}, bias = {0}, Wo = {0}, bo = {0}, yh = {0};
    wbcl_tensor *x = NULL, *y = NULL, *xt = NULL, *yt = NULL;
    wbcl_tssa_layer *L = NULL;
    wbcl_tssa_causal_layer *LC = NULL;
    wbcl_tssa_state *state = NULL;
    double *dx = NULL, *dW = NULL, *db = NULL, *dt = NULL, *dbias = NULL, *dWo = NULL, *dbo = NULL, *want = NULL;
    float *hx = NULL, *hy = NULL;
    int rc = 1;
    size_t B = 0, N = 0, d = 0;
    if (wbcl_run_input(r, 0, "x", &xh, &x)) goto done;
    if (token_shape(r, &xh, &B, &N, &d) || check_heads(r, heads, d)) goto done;
    const size_t K = (size_t)heads, p = d / K;
    size_t sW[2] = {d, d}, sb[1] = {d}, sk[2] = {K, 1}, sbias[3] = {K, WBCL_RUN_ANY, 1};
    if (load_key(r, prefix, causal ? "c_attn.weight" : "qkv.weight", 1, 2, sW, &W)) goto done;
    if (load_key(r, prefix, causal ? "c_attn.bias" : "qkv.bias", 0, 1, sb, &b)) goto done;
    if (load_key(r, prefix, "temp", 1, 2, sk, &temp)) goto done;
    if (causal && load_key(r, prefix, "denom_bias", 1, 3, sbias, &bias)) goto done;
    if (load_key(r, prefix, causal ? "c_proj.weight" : "to_out.0.weight", 1, 2, sW, &Wo)) goto done;
    if (load_key(r, prefix, causal ? "c_proj.bias" : "to_out.0.bias", !causal, 1, sb, &bo)) goto done;
    const size_t tmax = causal ? bias.shape[1] : 0;
    if (causal && N > tmax) {
        wbcl_run_fail(r, "x has N = %zu tokens but denom_bias holds Tmax = %zu positions", N, tmax);
        goto done;
    }
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, xh.ndim, xh.shape, WBCL_F32, NULL, &y))) goto done;
    if (!causal) {
        if (wbcl_run_check(r, wbcl_tssa_layer_create(r->ctx, d, K, W.data, b.data, temp.data, Wo.data, bo.data, &L)))
            goto done;
        if (wbcl_run_check(r, wbcl_tssa_layer_forward(r->ctx, L, x, y))) goto done;
        if (wbcl_run_download(r, y, &yh)) goto done;
    } else {
        if (wbcl_run_check(r, wbcl_tssa_causal_layer_create(r->ctx, d, K, tmax, W.data, b.data, temp.data, bias.data,
                                                            Wo.data, bo.data, &LC)))
            goto done;
        if (!decode) {
            if (wbcl_run_check(r, wbcl_tssa_causal_layer_forward(r->ctx, LC, x, NULL, y))) goto done;
            if (wbcl_run_download(r, y, &yh)) goto done;
        } else {
            /* the recurrent decode: one token of every sequence per call, state S, Q, P per layer */
            size_t s1[3] = {B, 1, d};
            if (wbcl_run_array_alloc(r, &yh, xh.ndim, xh.shape)) goto done;
            hx = malloc(B * d * sizeof *hx);
            hy = malloc(B * d * sizeof *hy);
            if (!hx || !hy) {
                wbcl_run_fail(r, "out of memory");
                goto done;
            }
            if (wbcl_run_check(r, wbcl_tssa_state_create(r->ctx, B, K, p, &state)) ||
                wbcl_run_check(r, wbcl_tensor_create(r->ctx, 3, s1, WBCL_F32, NULL, &xt)) ||
                wbcl_run_check(r, wbcl_tensor_create(r->ctx, 3, s1, WBCL_F32, NULL, &yt)))
                goto done;
            for (size_t t = 0; t < N; t++) {
                for (size_t bb = 0; bb < B; bb++) memcpy(hx + bb * d, xh.data + (bb * N + t) * d, d * sizeof *hx);
                if (wbcl_run_check(r, wbcl_tensor_write(r->ctx, xt, hx, B * d)) ||
                    wbcl_run_check(r, wbcl_tssa_causal_layer_forward(r->ctx, LC, xt, state, yt)) ||
                    wbcl_run_check(r, wbcl_tensor_read(r->ctx, yt, hy, B * d)))
                    goto done;
                for (size_t bb = 0; bb < B; bb++) memcpy(yh.data + (bb * N + t) * d, hy + bb * d, d * sizeof *hy);
            }
        }
    }
    if (r->verify) {
        if (!(dx = to64(r, &xh)) || !(dW = to64(r, &W)) || (b.data && !(db = to64(r, &b))) || !(dt = to64(r, &temp)) ||
            (causal && !(dbias = to64(r, &bias))) || !(dWo = to64(r, &Wo)) || (bo.data && !(dbo = to64(r, &bo))))
            goto done;
        if (!(want = malloc(xh.numel * sizeof *want))) {
            wbcl_run_fail(r, "out of memory");
            goto done;
        }
        if (causal)
            wbcl_ref_tssa_causal_layer(B, N, d, K, dx, dW, db, dt, dbias, tmax, dWo, dbo, want);
        else
            wbcl_ref_tssa_layer(B, N, d, K, dx, dW, db, dt, dWo, dbo, want);
        double wmax = max_proj(xh.data, B * N, d, W.data, 0, d, b.data);
        double Lg = maxabs_f(temp.data, K) * (double)p * (1.0 + (causal ? maxabs_f(bias.data, bias.numel) : 0.0));
        double tol = (4.0 * d + 4.0 * ((double)N / 64.0 + 81.0) + 8.0 * p + 64.0) * (1.0 + Lg) * U;
        if (wbcl_run_verify(r, yh.data, want, yh.numel, out_scale(Wo.data, d, bo.data, wmax), tol)) goto done;
    }
    rc = wbcl_run_write_output(r, &yh);
done:
    wbcl_tssa_layer_destroy(L);
    wbcl_tssa_causal_layer_destroy(LC);
    wbcl_tssa_state_destroy(state);
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(y);
    wbcl_tensor_destroy(xt);
    wbcl_tensor_destroy(yt);
    wbcl_run_array *arrs[] = {&xh, &W, &b, &temp, &bias, &Wo, &bo, &yh};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) wbcl_run_array_free(arrs[i]);
    free(dx);
    free(dW);
    free(db);
    free(dt);
    free(dbias);
    free(dWo);
    free(dbo);
    free(want);
    free(hx);
    free(hy);
    return rc;
}

static int run_tssa(wbcl_run *r) { return run_tssa_common(r, 0); }
static int run_tssa_causal(wbcl_run *r) { return run_tssa_common(r, 1); }

static const char *const tssa_params[] = {"heads", "prefix", NULL};
const wbcl_run_module wbcl_mod_attn_tssa = {
    "attn.tssa",
    "ToST token statistics self-attention (TSSA), linear in N",
    "  --input X.npy          x, shape (N, d) or (B, N, d)\n"
    "  --weights W            ToST AttentionTSSA state_dict: 'qkv.weight' (d, d), 'qkv.bias' (d, optional),\n"
    "                         'temp' (K, 1), 'to_out.0.weight' (d, d), 'to_out.0.bias' (d)\n"
    "  --param heads=K        number of heads (default 8); must divide d\n"
    "  --param prefix=P       key prefix, e.g. blocks.0.attn. (default none)\n"
    "  --output Y.npy         to_out(-w Pi / (1 + dots)), w = qkv(x) (SPEC 1.4); shape of x\n"
    "  --verify               against the double reference, relative to max|w| max_j sum|Wo_j| + max|bo|;\n"
    "                         tolerance (4d + 4(N/64 + 81) + 8p + 64)(1 + max|temp| p) 2^-24\n",
    tssa_params, NULL, 1, 1, WBCL_RUN_REQUIRED, WBCL_RUN_OPTIONAL, 1, run_tssa};

static const char *const tssa_causal_params[] = {"heads", "prefix", "decode", NULL};
const wbcl_run_module wbcl_mod_attn_tssa_causal = {
    "attn.tssa_causal",
    "ToST-LM causal TSSA (prefix scans; decode=1: recurrent decode, token by token)",
    "  --input X.npy          x, shape (N, d) or (B, N, d); N <= Tmax\n"
    "  --weights W            CausalSelfAttention_TSSA state_dict: 'c_attn.weight' (d, d), 'c_attn.bias' (d,\n"
    "                         optional), 'temp' (K, 1), 'denom_bias' (K, Tmax, 1), 'c_proj.weight' (d, d),\n"
    "                         'c_proj.bias' (d, optional)\n"
    "  --param heads=K        number of heads (default 8); must divide d\n"
    "  --param decode=0|1     1: feed the tokens one at a time through the recurrent state (S, Q, P);\n"
    "                         the result equals the batch form (default 0)\n"
    "  --param prefix=P       key prefix, e.g. transformer.h.0.attn. (default none)\n"
    "  --output Y.npy         causal TSSA (SPEC 1.5), shape of x\n"
    "  --verify               as attn.tssa, the logit bound with (1 + max|denom_bias|)\n",
    tssa_causal_params, NULL, 1, 1, WBCL_RUN_REQUIRED, WBCL_RUN_OPTIONAL, 1, run_tssa_causal};

/* ---- attn.xca ---------------------------------------------------------------------------------- */

static int run_xca(wbcl_run *r)
{
    long heads;
    const char *prefix = wbcl_run_param_str(r, "prefix");
    if (wbcl_run_param_int(r, "heads", 8, 1, 1L << 20, &heads)) return 1;
    wbcl_run_array xh = {0}, W = {0}, b = {0}, temp = {0}, Wp = {0}, bp = {0}, yh = {0};
    wbcl_tensor *x = NULL, *y = NULL;
    wbcl_xca_layer *L = NULL;
    double *dx = NULL, *dW = NULL, *db = NULL, *dt = NULL, *dWp = NULL, *dbp = NULL, *want = NULL;
    int rc = 1;
    size_t B = 0, N = 0, d = 0;
    if (wbcl_run_input(r, 0, "x", &xh, &x)) goto done;
    if (token_shape(r, &xh, &B, &N, &d) || check_heads(r, heads, d)) goto done;
    const size_t K = (size_t)heads, p = d / K;
    size_t sW[2] = {3 * d, d}, sb[1] = {3 * d}, sk[3] = {K, 1, 1}, sWp[2] = {d, d}, sbp[1] = {d};
    if (load_key(r, prefix, "qkv.weight", 1, 2, sW, &W)) goto done;
    if (load_key(r, prefix, "qkv.bias", 0, 1, sb, &b)) goto done;
    if (load_key(r, prefix, "temperature", 1, 3, sk, &temp)) goto done;
    if (load_key(r, prefix, "proj.weight", 1, 2, sWp, &Wp)) goto done;
    if (load_key(r, prefix, "proj.bias", 1, 1, sbp, &bp)) goto done;
    if (wbcl_run_check(r, wbcl_xca_layer_create(r->ctx, d, K, W.data, b.data, temp.data, Wp.data, bp.data, &L))) goto done;
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, xh.ndim, xh.shape, WBCL_F32, NULL, &y))) goto done;
    if (wbcl_run_check(r, wbcl_xca_layer_forward(r->ctx, L, x, y))) goto done;
    if (wbcl_run_download(r, y, &yh)) goto done;
    if (r->verify) {
        if (!(dx = to64(r, &xh)) || !(dW = to64(r, &W)) || (b.data && !(db = to64(r, &b))) || !(dt = to64(r, &temp)) ||
            !(dWp = to64(r, &Wp)) || !(dbp = to64(r, &bp)))
            goto done;
        if (!(want = malloc(xh.numel * sizeof *want))) {
            wbcl_run_fail(r, "out of memory");
            goto done;
        }
        wbcl_ref_xca_layer(B, N, d, K, dx, dW, db, dt, dWp, dbp, want);
        double vmax = max_proj(xh.data, B * N, d, W.data, 2 * d, d, b.data);
        double tol = (4.0 * d + 2.0 * N + 4.0 * p + 64.0) * (1.0 + maxabs_f(temp.data, K)) * U;
        if (wbcl_run_verify(r, yh.data, want, yh.numel, out_scale(Wp.data, d, bp.data, vmax), tol)) goto done;
    }
    rc = wbcl_run_write_output(r, &yh);
done:
    wbcl_xca_layer_destroy(L);
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(y);
    wbcl_run_array *arrs[] = {&xh, &W, &b, &temp, &Wp, &bp, &yh};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) wbcl_run_array_free(arrs[i]);
    free(dx);
    free(dW);
    free(db);
    free(dt);
    free(dWp);
    free(dbp);
    free(want);
    return rc;
}

static const char *const xca_params[] = {"heads", "prefix", NULL};
const wbcl_run_module wbcl_mod_attn_xca = {
    "attn.xca",
    "XCiT cross-covariance attention (XCA): p x p attention per head, linear in N",
    "  --input X.npy          x, shape (N, d) or (B, N, d)\n"
    "  --weights W            XCiT XCA state_dict: 'qkv.weight' (3d, d), 'qkv.bias' (3d, optional),\n"
    "                         'temperature' (K, 1, 1), 'proj.weight' (d, d), 'proj.bias' (d)\n"
    "  --param heads=K        number of heads (default 8); must divide d\n"
    "  --param prefix=P       key prefix, e.g. blocks.0.attn. (default none)\n"
    "  --output Y.npy         proj(softmax(q^ k^T temperature) v) over channels (SPEC 1.6); shape of x\n"
    "  --verify               relative to max|v| max_j sum|Wp_j| + max|bp|;\n"
    "                         tolerance (4d + 2N + 4p + 64)(1 + max|temperature|) 2^-24\n",
    xca_params, NULL, 1, 1, WBCL_RUN_REQUIRED, WBCL_RUN_OPTIONAL, 1, run_xca};

/* ---- attn.energy -------------------------------------------------------------------------------- */

static int run_energy(wbcl_run *r)
{
    static const char *const rhos[] = {"exp", "log", NULL};
    const char *prefix = wbcl_run_param_str(r, "prefix"), *rho = NULL;
    wbcl_energy_params P = wbcl_energy_params_default();
    long steps;
    if (wbcl_run_param_choice(r, "rho", "exp", rhos, &rho)) return 1;
    if (wbcl_run_param_pos(r, "c", 1.0, &P.c)) return 1;
    if (wbcl_run_param_float(r, "alpha", 1.0, 1e-30, 1.0, &P.alpha)) return 1;
    if (wbcl_run_param_float(r, "alpha2", 0.5, -HUGE_VAL, HUGE_VAL, &P.alpha2)) return 1;
    if (wbcl_run_param_bool(r, "relu", 0, &P.relu)) return 1;
    if (wbcl_run_param_int(r, "steps", 1, 1, 1L << 20, &steps)) return 1;
    if (!(P.alpha > 0.0f)) return wbcl_run_fail(r, "param alpha must lie in (0, 1]");
    P.rho = !strcmp(rho, "log") ? WBCL_RHO_LOG : WBCL_RHO_EXP;
    P.steps = (int)steps;
    wbcl_run_array xh = {0}, Wa = {0}, Wf = {0}, yh = {0};
    wbcl_tensor *x = NULL, *y = NULL;
    wbcl_energy_layer *L = NULL;
    double *a = NULL, *bb = NULL, *dWa = NULL, *dWf = NULL;
    int rc = 1;
    size_t B = 0, N = 0, d = 0;
    if (wbcl_run_input(r, 0, "x", &xh, &x)) goto done;
    if (token_shape(r, &xh, &B, &N, &d)) goto done;
    size_t sW[2] = {d, d};
    if (load_key(r, prefix, "W_a", 1, 2, sW, &Wa)) goto done;
    if (load_key(r, prefix, "W_f", 0, 2, sW, &Wf)) goto done;
    if (wbcl_run_check(r, wbcl_energy_layer_create(r->ctx, d, Wa.data, Wf.data, &L))) goto done;
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, xh.ndim, xh.shape, WBCL_F32, NULL, &y))) goto done;
    if (wbcl_run_check(r, wbcl_energy_layer_forward(r->ctx, L, &P, x, y))) goto done;
    if (wbcl_run_download(r, y, &yh)) goto done;
    if (r->verify) {
        if (!(a = to64(r, &xh)) || !(dWa = to64(r, &Wa)) || (Wf.data && !(dWf = to64(r, &Wf)))) goto done;
        if (!(bb = malloc(xh.numel * sizeof *bb))) {
            wbcl_run_fail(r, "out of memory");
            goto done;
        }
        double wfs = 0.0; /* infinity norm of W_f^s */
        for (size_t i = 0; Wf.data && i < d; i++) {
            double row = 0.0;
            for (size_t j = 0; j < d; j++)
                row += fabs((i == j ? 1.0 - P.alpha2 : 0.0) - P.alpha2 * 0.5 * (Wf.data[i * d + j] + Wf.data[j * d + i]));
            wfs = row > wfs ? row : wfs;
        }
        for (long s = 0; s < steps; s++) {
            wbcl_ref_energy_step(B, N, d, a, dWa, P.rho == WBCL_RHO_LOG, P.c, P.alpha, bb);
            if (dWf)
                wbcl_ref_energy_ffn(B * N, d, bb, dWf, P.alpha2, P.relu, a);
            else
                for (size_t i = 0; i < xh.numel; i++) a[i] = P.relu && bb[i] < 0.0 ? 0.0 : bb[i];
        }
        double tol = (double)steps * ((double)N * d / 2.0 + 4.0 * d + 4.0 * N + 64.0) * (1.0 + wfs) * U;
        if (wbcl_run_verify(r, yh.data, a, yh.numel, 0.0, tol)) goto done;
    }
    rc = wbcl_run_write_output(r, &yh);
done:
    wbcl_energy_layer_destroy(L);
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(y);
    wbcl_run_array *arrs[] = {&xh, &Wa, &Wf, &yh};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) wbcl_run_array_free(arrs[i]);
    free(a);
    free(bb);
    free(dWa);
    free(dWf);
    return rc;
}

static const char *const energy_params[] = {"alpha", "rho", "c", "relu", "alpha2", "steps", "prefix", NULL};
const wbcl_run_module wbcl_mod_attn_energy = {
    "attn.energy",
    "energy-descent attention (Yang-Huang-Wipf): unrolled steps of E1, optional W_f and ReLU",
    "  --input X.npy          x, shape (N, d) or (B, N, d)\n"
    "  --weights W            'W_a' (d, d); 'W_f' (d, d) optional (the heterogeneous layer, eq. 15-16, 20)\n"
    "  --param rho=exp|log    rho(z) = -exp(-z) (beta-reweighted softmax, default) or log(z + c)\n"
    "  --param c=C            the offset of rho = log (default 1, > 0)\n"
    "  --param alpha=A        step size in (0, 1] (default 1: Z <- softmax_beta(Z W_a W_a^T Z^T) Z)\n"
    "  --param alpha2=A2      feed-forward step: W_f^s = (1 - A2) I - A2 (W_f + W_f^T)/2 (default 0.5)\n"
    "  --param relu=0|1       ReLU at the end of each step (default 0)\n"
    "  --param steps=T        unrolled steps (default 1)\n"
    "  --param prefix=P       key prefix (default none)\n"
    "  --output Y.npy         the tokens after T steps (SPEC 1.7), shape of x\n"
    "  --verify               relative to max|reference|;\n"
    "                         tolerance T (N d / 2 + 4d + 4N + 64)(1 + |W_f^s|_inf) 2^-24\n",
    energy_params, NULL, 1, 1, WBCL_RUN_REQUIRED, WBCL_RUN_OPTIONAL, 1, run_energy};
