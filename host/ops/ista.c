/* ISTA sparse coding and LASSO by unrolled ISTA / FISTA (include/wbcl/ista.h).
 * Kernels in cl/ista.cl (family "ista"); products through wbcl_gemm.
 *
 * One ISTA step, two-GEMM form (z defaults to x):
 *   P = x;  P = z W^T - P      GEMM with beta = -1 on a copy of x  (rows x d, scratch slot 2)
 *   S = P W                    GEMM                                (rows x m, scratch slot 3)
 *   y = theta(z + (-eta S - eta lambda))                           one elementwise kernel
 * Folded form (square W): M = W - W^T W once (copy + one GEMM), then
 *   T = x M (slot 2);  y = theta(x + (eta T - eta lambda)).
 * The copies are clEnqueueCopyBuffer: x is never written unless y is x,
 * and then only by the final elementwise kernel (same index read and written).
 *
 * LASSO: per-call buffers (wbcl__buffer) for the gradient G (rows x m), the
 * products P (rows x d) and, for FISTA, Y (rows x m) and P_prev (rows x d);
 * Z itself holds the iterate Z_k (ISTA: also the gradient point). Step k:
 *   G = R W (GEMM; R = Y_k W^T - X lives in P)
 *   prox kernel: Z_k = theta(Y_k - t G); FISTA also Y_{k+1} = Z_k + beta_k (Z_k - Z_{k-1})
 *   P = Z_k W^T (GEMM)
 *   objective kernel (if asked): per-row lambda |Z_k|_1 + 1/2 |P - X|^2 into a (T+1, rows) buffer
 *   resid kernel: R = P - X, FISTA: R = P + beta_k (P - P_prev) - X, P_prev = P (in place over P)
 * The per-row objective partials are read back once at the end and summed in double. */
#include "internal.h"
#include "wbcl/gemm.h"
#include "wbcl/ista.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAMILY "ista"
#define SLOT_P 2 /* rows x d: z W^T - x, or x M                   */
#define SLOT_S 3 /* rows x m: (z W^T - x) W                       */

/* ---- helpers ------------------------------------------------------------------------------- */

/* A 2-D header (rows, cols) over a buffer (a tensor's or scratch). */
static wbcl_tensor view2(wbcl_context *ctx, cl_mem mem, size_t rows, size_t cols)
{
    wbcl_tensor t;
    memset(&t, 0, sizeof t);
    t.ctx = ctx;
    t.mem = mem;
    t.ndim = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.numel = rows * cols;
    t.dtype = WBCL_F32;
    return t;
}

static size_t last_dim(const wbcl_tensor *t) { return t->shape[t->ndim - 1]; }

static wbcl_status prefix_fail(wbcl_context *ctx, wbcl_status st, const char *op, const char *what)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", wbcl_context_last_error(ctx));
    return wbcl__fail(ctx, st, "%s: %s: %s", op, what, msg);
}

static wbcl_status check_threshold(wbcl_context *ctx, const char *op, wbcl_threshold thr)
{
    if (thr != WBCL_THRESHOLD_RELU && thr != WBCL_THRESHOLD_SOFT)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                          "%s: unknown threshold %d (WBCL_THRESHOLD_RELU or WBCL_THRESHOLD_SOFT)", op, (int)thr);
    return WBCL_SUCCESS;
}

static wbcl_status check_params(wbcl_context *ctx, const char *op, float eta, float lambd, wbcl_threshold thr)
{
    if (!(eta > 0.0f) || !isfinite(eta))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: eta must be > 0 and finite, got %g", op,
                          (double)eta);
    if (!(lambd >= 0.0f) || !isfinite(lambd))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: lambd must be >= 0 and finite, got %g", op,
                          (double)lambd);
    return check_threshold(ctx, op, thr);
}

/* W must be 2-D (d, m); square if `square`. */
static wbcl_status check_dict(wbcl_context *ctx, const char *op, const char *name, const wbcl_tensor *W, int square)
{
    wbcl_status st = wbcl__check_tensor(ctx, W, op, name);
    if (st) return st;
    char s[96];
    if (W->ndim != 2)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' must be a matrix (d, m), has shape %s", op, name,
                          wbcl__shape_str(s, sizeof s, W->ndim, W->shape));
    if (square && W->shape[0] != W->shape[1])
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' must be square (d, d), has shape %s", op, name,
                          wbcl__shape_str(s, sizeof s, W->ndim, W->shape));
    return WBCL_SUCCESS;
}

/* t's last dimension must be `cols`. */
static wbcl_status check_last(wbcl_context *ctx, const char *op, const char *name, const wbcl_tensor *t, size_t cols,
                              const char *why)
{
    if (last_dim(t) != cols) {
        char s[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' has shape %s, its last dimension must be %zu (%s)", op,
                          name, wbcl__shape_str(s, sizeof s, t->ndim, t->shape), cols, why);
    }
    return WBCL_SUCCESS;
}

/* b must have a's leading dimensions (all but the last). */
static wbcl_status check_leading(wbcl_context *ctx, const char *op, const wbcl_tensor *a, const char *an,
                                 const wbcl_tensor *b, const char *bn)
{
    int ok = a->ndim == b->ndim;
    for (int i = 0; ok && i < a->ndim - 1; i++) ok = a->shape[i] == b->shape[i];
    if (!ok) {
        char sa[96], sb[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' %s and '%s' %s must have the same leading dimensions", op,
                          an, wbcl__shape_str(sa, sizeof sa, a->ndim, a->shape), bn,
                          wbcl__shape_str(sb, sizeof sb, b->ndim, b->shape));
    }
    return WBCL_SUCCESS;
}

static wbcl_status launch_ew(wbcl_context *ctx, wbcl_kern *k, size_t n)
{
    size_t g = n, l = ctx->params.wg_size > 0 ? (size_t)ctx->params.wg_size : 64;
    return wbcl__launch(ctx, k, 1, &g, &l);
}

static wbcl_status copy_buf(wbcl_context *ctx, const char *op, cl_mem src, cl_mem dst, size_t count)
{
    cl_int e = clEnqueueCopyBuffer(ctx->queue, src, dst, 0, 0, count * sizeof(float), 0, NULL, NULL);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "%s: clEnqueueCopyBuffer of %zu floats", op, count);
}

/* The final elementwise kernel: y = theta(has_z ? z + (a s - b) : (a s - b)) for the ReLU
 * threshold, theta_b(z + a s) for the soft one (no z: a s). */
static wbcl_status threshold_kernel(wbcl_context *ctx, wbcl_threshold thr, wbcl_kern **k)
{
    return wbcl__kernel(ctx, FAMILY, NULL, thr == WBCL_THRESHOLD_RELU ? "wbcl_ista_relu" : "wbcl_ista_soft", k);
}

static wbcl_status run_threshold(wbcl_context *ctx, wbcl_kern *k, cl_mem z, cl_mem s, float a, float b, cl_mem y,
                                 size_t n)
{
    cl_ulong n_ = n;
    WBCL_ARG(ctx, k, 0, z);
    WBCL_ARG(ctx, k, 1, s);
    WBCL_ARG(ctx, k, 2, a);
    WBCL_ARG(ctx, k, 3, b);
    WBCL_ARG(ctx, k, 4, y);
    WBCL_ARG(ctx, k, 5, n_);
    return launch_ew(ctx, k, n);
}

static float eta_lambda(float eta, float lambd) { return (float)((double)eta * (double)lambd); }

/* ---- one ISTA step ---------------------------------------------------------------------------- */

/* y = theta(z - eta (z W^T - x) W); zmem NULL: the code is zero (y = theta(eta x W)). Validated. */
static wbcl_status ista_two_gemm(wbcl_context *ctx, const char *op, const wbcl_tensor *x, cl_mem zmem,
                                 const wbcl_tensor *W, float eta, float lambd, wbcl_threshold thr, cl_mem ymem)
{
    const size_t d = W->shape[0], m = W->shape[1], rows = x->numel / d;
    wbcl_kern *k;
    cl_mem P, S;
    wbcl_status st = threshold_kernel(ctx, thr, &k);
    if (!st) st = wbcl__scratch(ctx, SLOT_P, rows * d * sizeof(float), &P);
    if (!st) st = wbcl__scratch(ctx, SLOT_S, rows * m * sizeof(float), &S);
    if (st) return st;
    wbcl_tensor x2 = view2(ctx, x->mem, rows, d), P2 = view2(ctx, P, rows, d), S2 = view2(ctx, S, rows, m);
    const float b = eta_lambda(eta, lambd);
    if (zmem) {
        wbcl_tensor z2 = view2(ctx, zmem, rows, m);
        if ((st = copy_buf(ctx, op, x->mem, P, rows * d))) return st;
        if ((st = wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_TRANS, 1.0f, &z2, W, -1.0f, &P2)))
            return prefix_fail(ctx, st, op, "z W^T - x");
        if ((st = wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, &P2, W, 0.0f, &S2)))
            return prefix_fail(ctx, st, op, "(z W^T - x) W");
        return run_threshold(ctx, k, zmem, S, -eta, b, ymem, rows * m);
    }
    /* zero code: y = theta(0 - eta (0 - x) W) = theta(eta x W). S = eta x W goes in as the
     * kernel's z with a = 0: z + (0 s - b) = S - b exactly for finite S. */
    if ((st = wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, eta, &x2, W, 0.0f, &S2)))
        return prefix_fail(ctx, st, op, "eta x W");
    return run_threshold(ctx, k, S, S, 0.0f, b, ymem, rows * m);
}

static wbcl_status ista_folded(wbcl_context *ctx, const char *op, const wbcl_tensor *x, const wbcl_tensor *M,
                               float eta, float lambd, wbcl_threshold thr, cl_mem ymem)
{
    const size_t d = M->shape[0], rows = x->numel / d;
    wbcl_kern *k;
    cl_mem T;
    wbcl_status st = threshold_kernel(ctx, thr, &k);
    if (!st) st = wbcl__scratch(ctx, SLOT_P, rows * d * sizeof(float), &T);
    if (st) return st;
    wbcl_tensor x2 = view2(ctx, x->mem, rows, d), T2 = view2(ctx, T, rows, d);
    if ((st = wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, &x2, M, 0.0f, &T2)))
        return prefix_fail(ctx, st, op, "x M");
    return run_threshold(ctx, k, x->mem, T, eta, eta_lambda(eta, lambd), ymem, rows * d);
}

wbcl_status wbcl_ista(wbcl_context *ctx, const wbcl_tensor *x, const wbcl_tensor *z, const wbcl_tensor *W, float eta,
                      float lambd, wbcl_threshold threshold, wbcl_tensor *y)
{
    static const char op[] = "wbcl_ista";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor(ctx, x, op, "x");
    if (!st) st = check_dict(ctx, op, "W", W, 0);
    if (!st) st = wbcl__check_tensor(ctx, y, op, "y");
    if (!st && z) st = wbcl__check_tensor(ctx, z, op, "z");
    if (st) return st;
    const size_t d = W->shape[0], m = W->shape[1];
    if ((st = check_last(ctx, op, "x", x, d, "W is (d, m)"))) return st;
    if ((st = check_last(ctx, op, "y", y, m, "W is (d, m)")) || (st = check_leading(ctx, op, x, "x", y, "y")))
        return st;
    if (z) {
        if ((st = check_last(ctx, op, "z", z, m, "W is (d, m)")) || (st = check_leading(ctx, op, x, "x", z, "z")))
            return st;
    } else if (m != d) {
        char s[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: z is NULL (z = x) but W %s is not square: pass the code z (..., %zu)", op,
                          wbcl__shape_str(s, sizeof s, W->ndim, W->shape), m);
    }
    if (y->mem == W->mem || (z && z->mem == W->mem) || x->mem == W->mem)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: W must not be the same tensor as x, z or y", op);
    if ((st = check_params(ctx, op, eta, lambd, threshold))) return st;
    return ista_two_gemm(ctx, op, x, z ? z->mem : x->mem, W, eta, lambd, threshold, y->mem);
}

wbcl_status wbcl_ista_fold(wbcl_context *ctx, const wbcl_tensor *W, wbcl_tensor *M)
{
    static const char op[] = "wbcl_ista_fold";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_dict(ctx, op, "W", W, 1);
    if (!st) st = wbcl__check_tensor(ctx, M, op, "M");
    if (!st) st = wbcl__check_same_shape(ctx, W, M, op, "W", "M");
    if (st) return st;
    if (M->mem == W->mem) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: M must not be W", op);
    if ((st = copy_buf(ctx, op, W->mem, M->mem, W->numel))) return st;
    st = wbcl_gemm(ctx, WBCL_TRANS, WBCL_NO_TRANS, -1.0f, W, W, 1.0f, M);
    return st ? prefix_fail(ctx, st, op, "W - W^T W") : WBCL_SUCCESS;
}

wbcl_status wbcl_ista_folded(wbcl_context *ctx, const wbcl_tensor *x, const wbcl_tensor *M, float eta, float lambd,
                             wbcl_threshold threshold, wbcl_tensor *y)
{
    static const char op[] = "wbcl_ista_folded";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor(ctx, x, op, "x");
    if (!st) st = check_dict(ctx, op, "M", M, 1);
    if (!st) st = wbcl__check_tensor(ctx, y, op, "y");
    if (st) return st;
    if ((st = check_last(ctx, op, "x", x, M->shape[0], "M is (d, d)")) ||
        (st = wbcl__check_same_shape(ctx, x, y, op, "x", "y")))
        return st;
    if (y->mem == M->mem || x->mem == M->mem)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: M must not be the same tensor as x or y", op);
    if ((st = check_params(ctx, op, eta, lambd, threshold))) return st;
    return ista_folded(ctx, op, x, M, eta, lambd, threshold, y->mem);
}

/* ---- the layer --------------------------------------------------------------------------------- */

struct wbcl_ista_layer {
    wbcl_context *ctx;
    wbcl_tensor *W; /* W (d, m), or M = W - W^T W (d, d) when folded */
    size_t d, m;
    float eta, lambd;
    wbcl_threshold thr;
    wbcl_ista_path path;
};

wbcl_status wbcl_ista_layer_create(wbcl_context *ctx, const wbcl_tensor *W, float eta, float lambd,
                                   wbcl_threshold threshold, wbcl_ista_path path, wbcl_ista_layer **out)
{
    static const char op[] = "wbcl_ista_layer_create";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'out' is NULL", op);
    wbcl_status st = check_dict(ctx, op, "W", W, 0);
    if (!st) st = check_params(ctx, op, eta, lambd, threshold);
    if (st) return st;
    const size_t d = W->shape[0], m = W->shape[1];
    if (path != WBCL_ISTA_AUTO && path != WBCL_ISTA_TWO_GEMM && path != WBCL_ISTA_FOLDED)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: unknown path %d", op, (int)path);
    if (path == WBCL_ISTA_FOLDED && m != d) {
        char s[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: the folded path needs a square W, got %s", op,
                          wbcl__shape_str(s, sizeof s, W->ndim, W->shape));
    }
    if (path == WBCL_ISTA_AUTO) path = m == d ? WBCL_ISTA_FOLDED : WBCL_ISTA_TWO_GEMM;
    wbcl_ista_layer *l = calloc(1, sizeof *l);
    if (!l) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    l->ctx = ctx;
    l->d = d;
    l->m = m;
    l->eta = eta;
    l->lambd = lambd;
    l->thr = threshold;
    l->path = path;
    st = wbcl_tensor_create(ctx, 2, W->shape, WBCL_F32, NULL, &l->W);
    if (!st) {
        /* build the program now, so forward cannot fail on a build later */
        wbcl_kern *k;
        st = threshold_kernel(ctx, threshold, &k);
    }
    if (!st) st = path == WBCL_ISTA_FOLDED ? wbcl_ista_fold(ctx, W, l->W) : wbcl_tensor_copy(ctx, W, l->W);
    if (st) {
        wbcl_ista_layer_destroy(l);
        return st;
    }
    wbcl__tensor_constant(l->W); /* written above only: the packed GEMM may keep its panels */
    *out = l;
    return WBCL_SUCCESS;
}

void wbcl_ista_layer_destroy(wbcl_ista_layer *layer)
{
    if (!layer) return;
    wbcl_tensor_destroy(layer->W);
    free(layer);
}

wbcl_ista_path wbcl_ista_layer_path(const wbcl_ista_layer *layer) { return layer ? layer->path : WBCL_ISTA_AUTO; }

wbcl_status wbcl_ista_layer_forward(wbcl_context *ctx, const wbcl_ista_layer *layer, const wbcl_tensor *x,
                                    wbcl_tensor *y)
{
    static const char op[] = "wbcl_ista_layer_forward";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!layer) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'layer' is NULL", op);
    if (layer->ctx != ctx)
        return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: the layer belongs to another context", op);
    wbcl_status st = wbcl__check_tensor(ctx, x, op, "x");
    if (!st) st = wbcl__check_tensor(ctx, y, op, "y");
    if (st) return st;
    if ((st = check_last(ctx, op, "x", x, layer->d, "the layer's W is (d, m)")) ||
        (st = check_last(ctx, op, "y", y, layer->m, "the layer's W is (d, m)")) ||
        (st = check_leading(ctx, op, x, "x", y, "y")))
        return st;
    if (layer->path == WBCL_ISTA_FOLDED) return ista_folded(ctx, op, x, layer->W, layer->eta, layer->lambd, layer->thr, y->mem);
    if (layer->m != layer->d && y->mem == x->mem)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: y must not be x", op);
    return ista_two_gemm(ctx, op, x, layer->m == layer->d ? x->mem : NULL, layer->W, layer->eta, layer->lambd,
                         layer->thr, y->mem);
}

/* ---- Lipschitz constant -------------------------------------------------------------------------- */

wbcl_status wbcl_lasso_lipschitz(wbcl_context *ctx, const wbcl_tensor *W, double *L)
{
    static const char op[] = "wbcl_lasso_lipschitz";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_dict(ctx, op, "W", W, 0);
    if (st) return st;
    if (!L) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'L' is NULL", op);
    const size_t d = W->shape[0], m = W->shape[1], q = d <= m ? d : m;
    size_t qq;
    if (!wbcl__mul_ok(q, q, &qq) || qq > SIZE_MAX / sizeof(double))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: Gram of %zu x %zu overflows", op, q, q);
    float *Gf = malloc(qq * sizeof *Gf);
    double *G = malloc(qq * sizeof *G), *v = malloc(q * sizeof *v), *w = malloc(q * sizeof *w);
    cl_mem Gm[2] = {NULL, NULL};
    if (!Gf || !G || !v || !w) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a %zu x %zu Gram", op, q, q);
        goto done;
    }
    if ((st = wbcl__buffer(ctx, qq * sizeof(float), "wbcl_lasso_lipschitz: Gram", &Gm[0])) ||
        (st = wbcl__buffer(ctx, qq * sizeof(float), "wbcl_lasso_lipschitz: Gram power", &Gm[1])))
        goto done;
    wbcl_tensor G0 = view2(ctx, Gm[0], q, q), G1 = view2(ctx, Gm[1], q, q);
    st = d <= m ? wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_TRANS, 1.0f, W, W, 0.0f, &G0)
                : wbcl_gemm(ctx, WBCL_TRANS, WBCL_NO_TRANS, 1.0f, W, W, 0.0f, &G0);
    if (st) {
        st = prefix_fail(ctx, st, op, "Gram");
        goto done;
    }
    cl_int e = clEnqueueReadBuffer(ctx->queue, Gm[0], CL_TRUE, 0, qq * sizeof(float), Gf, 0, NULL, NULL);
    if (e != CL_SUCCESS) {
        st = wbcl__cl_fail(ctx, e, "%s: reading the Gram", op);
        goto done;
    }
    double f = 0.0;
    for (size_t i = 0; i < qq; i++) f += (double)Gf[i] * (double)Gf[i];
    f = sqrt(f);
    if (!isfinite(f)) {
        st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: W has non-finite entries or overflows (|W W^T|_F = %g)", op, f);
        goto done;
    }
    if (f == 0.0) {
        *L = 0.0;
        goto done;
    }
    /* Three squarings on the device: G8 = (G / f)^8 (eigenvalues lambda^8 / f^8 <= 1, so no
     * overflow; the small ones may underflow, which does not matter for the largest). Power
     * iteration on G8 needs 8x fewer steps than on G (the eigenvalue gap is raised to the 8th
     * power); each squaring's rounding is divided by 2, 4, 8 when the root is taken. */
    const int levels = 3;
    int cur = 0;
    for (int l = 0; l < levels && !st; l++) {
        const float alpha = l == 0 ? (float)(1.0 / (f * f)) : 1.0f;
        wbcl_tensor *src = cur ? &G1 : &G0, *dst = cur ? &G0 : &G1;
        st = wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, alpha, src, src, 0.0f, dst);
        if (st) st = prefix_fail(ctx, st, op, "Gram powers");
        cur = 1 - cur;
    }
    if (st) goto done;
    e = clEnqueueReadBuffer(ctx->queue, Gm[cur], CL_TRUE, 0, qq * sizeof(float), Gf, 0, NULL, NULL);
    if (e != CL_SUCCESS) {
        st = wbcl__cl_fail(ctx, e, "%s: reading the Gram power", op);
        goto done;
    }
    for (size_t i = 0; i < qq; i++) G[i] = Gf[i];
    /* symmetrize (the two triangles come from different rounding) */
    for (size_t i = 0; i < q; i++)
        for (size_t j = 0; j < i; j++) G[i * q + j] = G[j * q + i] = 0.5 * (G[i * q + j] + G[j * q + i]);
    /* start: ones plus a deterministic perturbation (not orthogonal to the top eigenvector
     * unless by a measure-zero accident) */
    double nv = 0.0;
    for (size_t i = 0; i < q; i++) {
        v[i] = 1.0 + 0.5 * sin(1.0 + 2.3 * (double)i);
        nv += v[i] * v[i];
    }
    nv = sqrt(nv);
    for (size_t i = 0; i < q; i++) v[i] /= nv;
    double lam = 0.0, prev = -1.0;
    for (int it = 0; it < 1000; it++) {
        double nw = 0.0;
        for (size_t i = 0; i < q; i++) {
            double sum = 0.0;
            const double *gi = G + i * q;
            for (size_t j = 0; j < q; j++) sum += gi[j] * v[j];
            w[i] = sum;
            nw += sum * sum;
        }
        nw = sqrt(nw);
        if (!(nw > 0.0)) break; /* everything underflowed: cannot happen for the top eigenvalue */
        /* |G8 v| with |v| = 1 lies between the Rayleigh quotient and the largest eigenvalue */
        lam = f * pow(nw, 1.0 / 8.0);
        for (size_t i = 0; i < q; i++) v[i] = w[i] / nw;
        if (fabs(lam - prev) <= 1e-10 * lam) break;
        prev = lam;
    }
    *L = lam;
done:
    if (Gm[0]) clReleaseMemObject(Gm[0]);
    if (Gm[1]) clReleaseMemObject(Gm[1]);
    free(Gf);
    free(G);
    free(v);
    free(w);
    return st;
}

/* ---- LASSO --------------------------------------------------------------------------------------- */

wbcl_lasso_opts wbcl_lasso_defaults(void)
{
    wbcl_lasso_opts o;
    memset(&o, 0, sizeof o);
    o.steps = 100;
    o.lambd = 0.1f;
    o.method = WBCL_LASSO_ISTA;
    o.threshold = WBCL_THRESHOLD_SOFT;
    o.L = 0.0;
    o.step = 0.0;
    return o;
}

typedef struct lasso_run {
    wbcl_context *ctx;
    const char *op;
    size_t rows, d, m;
    int fista;
    wbcl_kern *kprox, *kres, *kobj;
    cl_mem G, P, Y, Pprev, obj;
} lasso_run;

static wbcl_status lasso_obj(lasso_run *r, cl_mem Z, cl_mem X, float lambd, size_t step)
{
    wbcl_context *ctx = r->ctx;
    wbcl_kern *k = r->kobj;
    cl_ulong rows = r->rows, m = r->m, d = r->d;
    cl_ulong off = (cl_ulong)step * r->rows;
    WBCL_ARG(ctx, k, 0, Z);
    WBCL_ARG(ctx, k, 1, r->P);
    WBCL_ARG(ctx, k, 2, X);
    WBCL_ARG(ctx, k, 3, rows);
    WBCL_ARG(ctx, k, 4, m);
    WBCL_ARG(ctx, k, 5, d);
    WBCL_ARG(ctx, k, 6, lambd);
    WBCL_ARG(ctx, k, 7, r->obj);
    WBCL_ARG(ctx, k, 8, off);
    if (ctx->variant == WBCL_VARIANT_CPU) {
        size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
        size_t g = r->rows, l = r->rows >= 64 * cu ? 16 : 1;
        return wbcl__launch(ctx, k, 1, &g, &l);
    }
    size_t wg = ctx->params.reduce_wg > 0 ? (size_t)ctx->params.reduce_wg : 1, p2 = 1;
    while (p2 * 2 <= wg) p2 *= 2;
    while (p2 > 32 && p2 / 2 >= r->d && p2 / 2 >= r->m) p2 /= 2;
    size_t g = r->rows * p2;
    return wbcl__launch(ctx, k, 1, &g, &p2);
}

static wbcl_status lasso_prox(lasso_run *r, cl_mem Y, cl_mem Zprev, float t, float thr, float beta)
{
    wbcl_context *ctx = r->ctx;
    wbcl_kern *k = r->kprox;
    cl_int fista = r->fista;
    cl_ulong n = r->rows * r->m;
    WBCL_ARG(ctx, k, 0, Y);
    WBCL_ARG(ctx, k, 1, r->G);
    WBCL_ARG(ctx, k, 2, Zprev);
    WBCL_ARG(ctx, k, 3, t);
    WBCL_ARG(ctx, k, 4, thr);
    WBCL_ARG(ctx, k, 5, beta);
    WBCL_ARG(ctx, k, 6, fista);
    WBCL_ARG(ctx, k, 7, n);
    return launch_ew(ctx, k, r->rows * r->m);
}

static wbcl_status lasso_resid(lasso_run *r, cl_mem X, float beta, int fista)
{
    wbcl_context *ctx = r->ctx;
    wbcl_kern *k = r->kres;
    cl_int f = fista;
    cl_ulong n = r->rows * r->d;
    cl_mem pp = r->Pprev ? r->Pprev : r->P;
    WBCL_ARG(ctx, k, 0, r->P);
    WBCL_ARG(ctx, k, 1, pp);
    WBCL_ARG(ctx, k, 2, X);
    WBCL_ARG(ctx, k, 3, beta);
    WBCL_ARG(ctx, k, 4, f);
    WBCL_ARG(ctx, k, 5, n);
    return launch_ew(ctx, k, r->rows * r->d);
}

wbcl_status wbcl_lasso(wbcl_context *ctx, const wbcl_tensor *X, const wbcl_tensor *W, const wbcl_lasso_opts *opts,
                       wbcl_tensor *Z, double *objective)
{
    static const char op[] = "wbcl_lasso";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor(ctx, X, op, "X");
    if (!st) st = check_dict(ctx, op, "W", W, 0);
    if (!st) st = wbcl__check_tensor(ctx, Z, op, "Z");
    if (st) return st;
    if (!opts) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'opts' is NULL", op);
    const size_t d = W->shape[0], m = W->shape[1], rows = X->numel / d;
    if ((st = check_last(ctx, op, "X", X, d, "W is (d, m)")) || (st = check_last(ctx, op, "Z", Z, m, "W is (d, m)")) ||
        (st = check_leading(ctx, op, X, "X", Z, "Z")))
        return st;
    if (Z->mem == X->mem || Z->mem == W->mem || X->mem == W->mem)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: X, W and Z must be three different tensors", op);
    if (opts->steps < 1 || opts->steps > (size_t)INT32_MAX)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: steps must be in 1..%d, got %zu", op, INT32_MAX,
                          opts->steps);
    if (!(opts->lambd >= 0.0f) || !isfinite(opts->lambd))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: lambd must be >= 0 and finite, got %g", op,
                          (double)opts->lambd);
    if (opts->method != WBCL_LASSO_ISTA && opts->method != WBCL_LASSO_FISTA)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                          "%s: unknown method %d (WBCL_LASSO_ISTA or WBCL_LASSO_FISTA)", op, (int)opts->method);
    if ((st = check_threshold(ctx, op, opts->threshold))) return st;
    if (!isfinite(opts->L) || !isfinite(opts->step))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: L (%g) and step (%g) must be finite", op, opts->L,
                          opts->step);
    size_t objn = 0;
    if (objective && !wbcl__mul_ok(opts->steps + 1, rows, &objn))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: (steps + 1) x rows overflows", op);

    lasso_run r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.op = op;
    r.rows = rows;
    r.d = d;
    r.m = m;
    r.fista = opts->method == WBCL_LASSO_FISTA;
    float *objf = NULL;
    const int relu = opts->threshold == WBCL_THRESHOLD_RELU;
    if ((st = wbcl__kernel(ctx, FAMILY, NULL, relu ? "wbcl_lasso_prox_relu" : "wbcl_lasso_prox_soft", &r.kprox)) ||
        (st = wbcl__kernel(ctx, FAMILY, NULL, "wbcl_lasso_resid", &r.kres)) ||
        (objective && (st = wbcl__kernel(ctx, FAMILY, NULL, "wbcl_lasso_obj", &r.kobj))))
        return st;
    double L = opts->L;
    if (opts->step <= 0.0 && L <= 0.0 && (st = wbcl_lasso_lipschitz(ctx, W, &L))) return prefix_fail(ctx, st, op, "L");
    const double t = opts->step > 0.0 ? opts->step : L > 0.0 ? 1.0 / L : 1.0;
    const float tf = (float)t, thr = (float)(t * (double)opts->lambd);
    if (!(tf > 0.0f) || !isfinite(tf))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: step %g is not a positive float32", op, t);

    if (objective) {
        objf = malloc(objn * sizeof *objf);
        if (!objf) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    }
    if ((st = wbcl__buffer(ctx, rows * m * sizeof(float), "wbcl_lasso: gradient", &r.G)) ||
        (st = wbcl__buffer(ctx, rows * d * sizeof(float), "wbcl_lasso: products", &r.P)) ||
        (r.fista && (st = wbcl__buffer(ctx, rows * m * sizeof(float), "wbcl_lasso: momentum point", &r.Y))) ||
        (r.fista && (st = wbcl__buffer(ctx, rows * d * sizeof(float), "wbcl_lasso: previous products", &r.Pprev))) ||
        (objective && (st = wbcl__buffer(ctx, objn * sizeof(float), "wbcl_lasso: objective", &r.obj))))
        goto done;

    wbcl_tensor P2 = view2(ctx, r.P, rows, d), G2 = view2(ctx, r.G, rows, m), Z2 = view2(ctx, Z->mem, rows, m);
    /* Z_0 W^T, F(Z_0), the first residual (Y_1 = Z_0) */
    if ((st = wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_TRANS, 1.0f, &Z2, W, 0.0f, &P2))) {
        st = prefix_fail(ctx, st, op, "Z W^T");
        goto done;
    }
    if (objective && (st = lasso_obj(&r, Z->mem, X->mem, opts->lambd, 0))) goto done;
    if (r.fista) {
        if ((st = copy_buf(ctx, op, r.P, r.Pprev, rows * d)) || (st = copy_buf(ctx, op, Z->mem, r.Y, rows * m)))
            goto done;
    }
    if ((st = lasso_resid(&r, X->mem, 0.0f, 0))) goto done;
    double s = 1.0;
    for (size_t k = 1; k <= opts->steps; k++) {
        const double s_next = 0.5 * (1.0 + sqrt(1.0 + 4.0 * s * s));
        const float beta = r.fista ? (float)((s - 1.0) / s_next) : 0.0f;
        s = s_next;
        if ((st = wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, &P2, W, 0.0f, &G2))) {
            st = prefix_fail(ctx, st, op, "(Y W^T - X) W");
            goto done;
        }
        if ((st = lasso_prox(&r, r.fista ? r.Y : Z->mem, Z->mem, tf, thr, beta))) goto done;
        if ((st = wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_TRANS, 1.0f, &Z2, W, 0.0f, &P2))) {
            st = prefix_fail(ctx, st, op, "Z W^T");
            goto done;
        }
        if (objective && (st = lasso_obj(&r, Z->mem, X->mem, opts->lambd, k))) goto done;
        if (k < opts->steps && (st = lasso_resid(&r, X->mem, beta, r.fista))) goto done;
    }
    if (objective) {
        cl_int e = clEnqueueReadBuffer(ctx->queue, r.obj, CL_TRUE, 0, objn * sizeof(float), objf, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            st = wbcl__cl_fail(ctx, e, "%s: reading the objective", op);
            goto done;
        }
        for (size_t k = 0; k <= opts->steps; k++) {
            double sum = 0.0;
            for (size_t i = 0; i < rows; i++) sum += objf[k * rows + i];
            objective[k] = sum;
        }
    }
done:
    if (r.G) clReleaseMemObject(r.G);
    if (r.P) clReleaseMemObject(r.P);
    if (r.Y) clReleaseMemObject(r.Y);
    if (r.Pprev) clReleaseMemObject(r.Pprev);
    if (r.obj) clReleaseMemObject(r.obj);
    free(objf);
    return st;
}

void wbcl__ista_layer_transient(wbcl_ista_layer *l)
{
    if (l) wbcl__tensor_transient(l->W);
}

wbcl_status wbcl__ista_layer_store_f16(wbcl_context *ctx, wbcl_ista_layer *l)
{
    return wbcl__tensor_store_f16(ctx, &l->W); /* used only as a GEMM operand by the forward pass */
}
