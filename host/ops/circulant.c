/* Shift-invariant ReduNet (include/wbcl/circulant.h): the model object (constructors, accessors, layer
 * read-back) and the argument checks of the ops. What the family's other files hold, and the pipeline
 * they share: host/ops/circulant_internal.h. Kernels in cl/circulant.cl. */
#include "circulant_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buffers.h"
#include "fft.h"

wbcl_circulant_params wbcl_circulant_default_params(void)
{
    wbcl_circulant_params p = {10, 0.5f, 0.1f, 500.0f};
    return p;
}

/* ---- argument checks ---------------------------------------------------------------------------- */

/* The geometry without the FFT's length restriction (lifting needs no FFT). */
wbcl_status wbcl__circulant_signal_shape(wbcl_context *ctx, const char *op, const char *what, const wbcl_tensor *t,
                                         geom *g)
{
    wbcl_status st = wbcl__check_tensor(ctx, t, op, what);
    if (st) return st;
    char sh[96];
    if (t->ndim != 3 && t->ndim != 4)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %s has shape %s; expected (m, C, T) or (m, C, H, W)", op, what,
                          wbcl__shape_str(sh, sizeof sh, t->ndim, t->shape));
    g->dims = t->ndim - 2;
    g->m = t->shape[0];
    g->C = t->shape[1];
    g->H = g->dims == 1 ? 1 : t->shape[2];
    g->W = t->shape[t->ndim - 1];
    g->N = g->H * g->W;
    g->Wh = g->W / 2 + 1;
    g->P = g->H * g->Wh;
    if (!g->m || !g->C || !g->N)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %s has a zero dimension %s", op, what,
                          wbcl__shape_str(sh, sizeof sh, t->ndim, t->shape));
    if (g->m > (1u << 24) || g->N > (1u << 24) || g->C * g->N > (1u << 26))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %s is too large %s", op, what,
                          wbcl__shape_str(sh, sizeof sh, t->ndim, t->shape));
    return WBCL_SUCCESS;
}

/* The geometry of a signal the layers transform: lengths the FFT can do (wbcl__fft_check). */
wbcl_status wbcl__circulant_signal_geom(wbcl_context *ctx, const char *op, const char *what, const wbcl_tensor *t,
                                        geom *g)
{
    wbcl_status st = wbcl__circulant_signal_shape(ctx, op, what, t, g);
    return st ? st : wbcl__fft_check(ctx, op, g->H, g->W);
}

wbcl_status wbcl__circulant_check_channels(wbcl_context *ctx, const char *op, size_t C)
{
    if (C > WBCL_CIRCULANT_MAX_CHANNELS)
        return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED, "%s: %zu channels; at most %d are supported", op, C,
                          WBCL_CIRCULANT_MAX_CHANNELS);
    return WBCL_SUCCESS;
}

/* Lifting kernel Wt against raw signals of geometry gx: fills Cout, kh, kw. */
wbcl_status wbcl__circulant_lift_geom(wbcl_context *ctx, const char *op, const wbcl_tensor *Wt, const geom *gx,
                                      size_t *Cout, size_t *kh, size_t *kw)
{
    wbcl_status st = wbcl__check_tensor(ctx, Wt, op, "lifting kernel");
    if (st) return st;
    char sh[96];
    if (Wt->ndim != gx->dims + 2 || Wt->shape[1] != gx->C || Wt->shape[0] == 0 ||
        Wt->shape[Wt->ndim - 1] == 0 || Wt->shape[Wt->ndim - 1] > gx->W ||
        (gx->dims == 2 && (Wt->shape[2] == 0 || Wt->shape[2] > gx->H)))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: lifting kernel has shape %s; expected (Cout, %zu, k) with 1 <= k <= %zu%s", op,
                          wbcl__shape_str(sh, sizeof sh, Wt->ndim, Wt->shape), gx->C, gx->W,
                          gx->dims == 2 ? " per axis, 2-D: (Cout, Cin, kh, kw)" : "");
    *Cout = Wt->shape[0];
    *kh = gx->dims == 2 ? Wt->shape[2] : 1;
    *kw = Wt->shape[Wt->ndim - 1];
    return WBCL_SUCCESS;
}

wbcl_status wbcl__circulant_check_params(wbcl_context *ctx, const char *op, const wbcl_circulant_params *p)
{
    if (!p) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params is NULL", op);
    if (p->layers < 1) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: layers = %d < 1", op, p->layers);
    if (!(p->eta > 0.0f) || !isfinite(p->eta))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: eta = %g must be finite and > 0", op, (double)p->eta);
    if (!(p->eps2 > 0.0f) || !isfinite(p->eps2))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: eps2 = %g must be finite and > 0", op,
                          (double)p->eps2);
    if (!(p->lambda >= 0.0f) || !isfinite(p->lambda))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: lambda = %g must be finite and >= 0", op,
                          (double)p->lambda);
    return WBCL_SUCCESS;
}

/* Labels in range and (require_all) every class non-empty; counts[K] gets the class sizes. */
wbcl_status wbcl__circulant_check_labels(wbcl_context *ctx, const char *op, const int *labels, size_t m,
                                         int classes, int require_all, size_t *counts)
{
    if (!labels) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: labels is NULL", op);
    if (classes < 1 || classes > MAX_CLASSES)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: classes = %d must be in 1..%d", op, classes,
                          MAX_CLASSES);
    memset(counts, 0, (size_t)classes * sizeof *counts);
    for (size_t b = 0; b < m; b++) {
        if (labels[b] < 0 || labels[b] >= classes)
            return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: labels[%zu] = %d is not in [0, %d)", op, b,
                              labels[b], classes);
        counts[labels[b]]++;
    }
    if (require_all)
        for (int j = 0; j < classes; j++)
            if (!counts[j])
                return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: class %d has no samples", op, j);
    return WBCL_SUCCESS;
}

/* ---- model ------------------------------------------------------------------------------------ */

/* n matrices from t0 on: row-major complex src (n, C, C) -> lane layout dst (dir > 0), or back (dir < 0) */
static void ops_convert(float *lane, float *rowmajor, size_t t0, size_t n, size_t C, int to_lanes)
{
    for (size_t i = 0; i < n; i++)
        for (size_t r = 0; r < C; r++)
            for (size_t c = 0; c < C; c++) {
                float *x = rowmajor + ((i * C + r) * C + c) * 2, *y = lane + OPS_AT(t0 + i, r, c, C);
                if (to_lanes) y[0] = x[0], y[OPS_MW] = x[1];
                else x[0] = y[0], x[1] = y[OPS_MW];
            }
}

void wbcl_circulant_destroy(wbcl_circulant *net)
{
    if (!net) return;
    for (int l = 0; l < net->L; l++) {
        if (net->ops) wbcl__tmp_release(&net->ops[l]);
        if (net->gam) wbcl__tmp_release(&net->gam[l]);
    }
    free(net->ops);
    free(net->gam);
    free(net->gamma);
    free(net->hist);
    free(net->lift);
    free(net);
}

/* An empty model with L layer slots (buffers allocated). */
wbcl_status wbcl__circulant_new(wbcl_context *ctx, int dims, size_t C, size_t H, size_t W, int K, int L,
                                const wbcl_circulant_params *p, wbcl_circulant **out)
{
    *out = NULL;
    wbcl_circulant *n = calloc(1, sizeof *n);
    if (!n) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "shift-invariant ReduNet: out of host memory");
    n->ctx = ctx;
    n->dims = dims;
    n->C = C;
    n->H = H;
    n->W = W;
    n->P = H * (W / 2 + 1);
    n->K = K;
    n->params = *p;
    n->params.layers = L;
    n->ops = calloc((size_t)L, sizeof *n->ops);
    n->gam = calloc((size_t)L, sizeof *n->gam);
    n->gamma = calloc((size_t)L * (size_t)K, sizeof *n->gamma);
    n->hist = calloc((size_t)L * 3, sizeof *n->hist);
    if (!n->ops || !n->gam || !n->gamma || !n->hist) {
        wbcl_circulant_destroy(n);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "shift-invariant ReduNet: out of host memory");
    }
    n->L = L;
    const size_t ob = ops_floats(((size_t)K + 1) * n->P, C) * sizeof(float);
    for (int l = 0; l < L; l++) {
        wbcl_status st;
        if ((st = wbcl__buffer(ctx, ob, "layer operators", &n->ops[l])) ||
            (st = wbcl__buffer(ctx, (size_t)K * sizeof(float), "gamma", &n->gam[l]))) {
            wbcl_circulant_destroy(n);
            return st;
        }
    }
    *out = n;
    return WBCL_SUCCESS;
}

/* Loads layer data into a model made by wbcl__circulant_new (ops: (K+1) P C C complex per layer). */
wbcl_status wbcl__circulant_set_layer(wbcl_context *ctx, wbcl_circulant *net, int l, const float *ops,
                                      const float *gamma)
{
    const size_t nb = ((size_t)net->K + 1) * net->P, nf = ops_floats(nb, net->C);
    float *lanes = calloc(nf, sizeof *lanes); /* padding lanes of the last block: 0 */
    if (!lanes) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "shift-invariant ReduNet: out of host memory");
    ops_convert(lanes, (float *)ops, 0, nb, net->C, 1);
    wbcl_status st = wbcl__write_buf(ctx, net->ops[l], nf * sizeof(float), lanes, "layer operators");
    free(lanes);
    if (!st) st = wbcl__write_buf(ctx, net->gam[l], (size_t)net->K * sizeof(float), gamma, "gamma");
    if (!st) memcpy(net->gamma + (size_t)l * net->K, gamma, (size_t)net->K * sizeof(float));
    return st;
}

wbcl_status wbcl__circulant_set_extra(wbcl_circulant *net, const double *hist, const float *lift, size_t Cin,
                                      size_t kh, size_t kw)
{
    if (hist) memcpy(net->hist, hist, (size_t)net->L * 3 * sizeof *hist);
    else {
        free(net->hist);
        net->hist = NULL;
    }
    if (lift) {
        size_t n = net->C * Cin * kh * kw;
        net->lift = malloc(n * sizeof *net->lift);
        if (!net->lift) return wbcl__fail(net->ctx, WBCL_ERROR_OUT_OF_MEMORY, "out of host memory");
        memcpy(net->lift, lift, n * sizeof *lift);
        net->Cin = Cin;
        net->kh = kh;
        net->kw = kw;
    }
    return WBCL_SUCCESS;
}

int wbcl_circulant_dims(const wbcl_circulant *net) { return net ? net->dims : 0; }
size_t wbcl_circulant_channels(const wbcl_circulant *net) { return net ? net->C : 0; }
size_t wbcl_circulant_height(const wbcl_circulant *net) { return net ? net->H : 0; }
size_t wbcl_circulant_width(const wbcl_circulant *net) { return net ? net->W : 0; }
int wbcl_circulant_classes(const wbcl_circulant *net) { return net ? net->K : 0; }
int wbcl_circulant_layers(const wbcl_circulant *net) { return net ? net->L : 0; }
int wbcl_circulant_has_lift(const wbcl_circulant *net) { return net && net->lift; }

wbcl_circulant_params wbcl_circulant_get_params(const wbcl_circulant *net)
{
    wbcl_circulant_params p = {0, 0.0f, 0.0f, 0.0f};
    return net ? net->params : p;
}

/* The lifting kernel (C, Cin, kh, kw) host copy and its sizes; NULL if none. */
const float *wbcl__circulant_lift(const wbcl_circulant *net, size_t *Cin, size_t *kh, size_t *kw)
{
    *Cin = net->Cin;
    *kh = net->kh;
    *kw = net->kw;
    return net->lift;
}

wbcl_status wbcl_circulant_history(const wbcl_circulant *net, int layer, double *dR, double *R, double *Rc)
{
    if (!net || layer < 0 || layer >= net->L || !net->hist) return WBCL_ERROR_INVALID_ARGUMENT;
    if (dR) *dR = net->hist[3 * layer];
    if (R) *R = net->hist[3 * layer + 1];
    if (Rc) *Rc = net->hist[3 * layer + 2];
    return WBCL_SUCCESS;
}

wbcl_status wbcl_circulant_read_layer(wbcl_context *ctx, const wbcl_circulant *net, int layer, float *E, float *C,
                                      float *gamma)
{
    static const char op[] = "wbcl_circulant_read_layer";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!net) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: net is NULL", op);
    if (net->ctx != ctx) return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: model from another context", op);
    if (layer < 0 || layer >= net->L)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: layer %d not in [0, %d)", op, layer, net->L);
    const size_t K = (size_t)net->K, nb = (K + 1) * net->P, nf = ops_floats(nb, net->C);
    if (C || E) {
        float *lanes = malloc(nf * sizeof *lanes);
        if (!lanes) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
        cl_int e = clEnqueueReadBuffer(ctx->queue, net->ops[layer], CL_TRUE, 0, nf * sizeof(float), lanes, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            free(lanes);
            return wbcl__cl_fail(ctx, e, "%s: reading layer %d", op, layer);
        }
        if (C) ops_convert(lanes, C, 0, K * net->P, net->C, 0);
        if (E) ops_convert(lanes, E, K * net->P, net->P, net->C, 0);
        free(lanes);
    }
    if (gamma) memcpy(gamma, net->gamma + (size_t)layer * K, K * sizeof *gamma);
    return WBCL_SUCCESS;
}
