/* Vector ReduNet (include/wbcl/redunet.h, SPEC.md §4.1): the model object (models in memory:
 * create, accessors, layer read-back), the argument checks of the ops, and synthetic data. What the
 * family's other files hold: host/ops/redunet_internal.h. Save/load: host/model/redunet_io.c. */
#include "redunet_internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buffers.h"

#define MAX_DIM 65536

/* ---- argument checks ---------------------------------------------------------------------------- */

wbcl_status wbcl__redunet_check_params(wbcl_context *ctx, const char *op, const wbcl_redunet_params *p,
                                       int need_layers)
{
    if (!p) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params is NULL", op);
    if (need_layers && p->layers < 1)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params.layers = %d, must be at least 1", op, p->layers);
    if (!(p->eta > 0.0f) || !isfinite(p->eta))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params.eta = %g, must be positive and finite", op,
                          (double)p->eta);
    if (!(p->eps2 > 0.0f) || !isfinite(p->eps2))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params.eps2 = %g, must be positive and finite", op,
                          (double)p->eps2);
    if (!(p->lambda >= 0.0f) || !isfinite(p->lambda))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params.lambda = %g, must be >= 0 and finite", op,
                          (double)p->lambda);
    if (p->impl != WBCL_REDUNET_IMPL_AUTO && p->impl != WBCL_REDUNET_IMPL_FUSED && p->impl != WBCL_REDUNET_IMPL_GEMM)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params.impl = %d is not a wbcl_redunet_impl", op,
                          (int)p->impl);
    if (p->report_every < 0)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params.report_every = %d, must be >= 0", op,
                          p->report_every);
    return WBCL_SUCCESS;
}

wbcl_status wbcl__redunet_check_impl(wbcl_context *ctx, const char *op, wbcl_redunet_impl impl, size_t d, size_t K)
{
    if (impl == WBCL_REDUNET_IMPL_FUSED && (d > WBCL_REDUNET_FUSED_MAX_DIM || K > WBCL_REDUNET_FUSED_MAX_CLASSES))
        return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED,
                          "%s: the fused implementation handles d <= %d and K <= %d, got d = %zu, K = %zu", op,
                          WBCL_REDUNET_FUSED_MAX_DIM, WBCL_REDUNET_FUSED_MAX_CLASSES, d, K);
    return WBCL_SUCCESS;
}

/* X must be a 2-D (m, d) tensor of ctx with m, d within limits. */
wbcl_status wbcl__redunet_check_rows(wbcl_context *ctx, const char *op, const char *name, const wbcl_tensor *X)
{
    wbcl_status st = wbcl__check_tensor(ctx, X, op, name);
    if (st) return st;
    char s[96];
    if (X->ndim != 2)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %s must be 2-D (m, d), has shape %s", op, name,
                          wbcl__shape_str(s, sizeof s, X->ndim, X->shape));
    if (X->shape[0] > (size_t)INT_MAX || X->shape[1] > MAX_DIM)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %s has shape %s; at most %d rows and %d columns", op, name,
                          wbcl__shape_str(s, sizeof s, X->ndim, X->shape), INT_MAX, MAX_DIM);
    return WBCL_SUCCESS;
}

wbcl_status wbcl__redunet_check_out(wbcl_context *ctx, const char *op, const char *name, const wbcl_tensor *Z,
                                    size_t m, size_t d)
{
    wbcl_status st = wbcl__check_tensor(ctx, Z, op, name);
    if (st) return st;
    if (Z->ndim != 2 || Z->shape[0] != m || Z->shape[1] != d) {
        char s[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %s has shape %s, expected (%zu, %zu)", op, name,
                          wbcl__shape_str(s, sizeof s, Z->ndim, Z->shape), m, d);
    }
    return WBCL_SUCCESS;
}

/* labels in [0, K); counts[j] = m_j; with require_all every class must occur. */
wbcl_status wbcl__redunet_check_labels(wbcl_context *ctx, const char *op, const int *labels, size_t m, int classes,
                                       int require_all, size_t *counts)
{
    if (!labels) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: labels is NULL", op);
    if (classes < 1 || classes > MAX_CLASSES)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: classes = %d, must be in 1..%d", op, classes,
                          MAX_CLASSES);
    memset(counts, 0, (size_t)classes * sizeof *counts);
    for (size_t i = 0; i < m; i++) {
        if (labels[i] < 0 || labels[i] >= classes)
            return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: labels[%zu] = %d is outside 0..%d", op, i,
                              labels[i], classes - 1);
        counts[labels[i]]++;
    }
    if (require_all)
        for (int j = 0; j < classes; j++)
            if (!counts[j])
                return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                                  "%s: class %d has no samples (empty classes are an error; labels must cover "
                                  "0..%d)",
                                  op, j, classes - 1);
    return WBCL_SUCCESS;
}

wbcl_status wbcl__redunet_check_classes(wbcl_context *ctx, const char *op, const int *labels, size_t m, int classes,
                                        int require_all)
{
    if (classes < 1 || classes > MAX_CLASSES)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: classes = %d, must be in 1..%d", op, classes,
                          MAX_CLASSES);
    size_t *counts = malloc((size_t)classes * sizeof *counts);
    if (!counts) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    wbcl_status st = wbcl__redunet_check_labels(ctx, op, labels, m, classes, require_all, counts);
    free(counts);
    return st;
}

/* ---- model ------------------------------------------------------------------------------------- */

wbcl_redunet_params wbcl_redunet_default_params(void)
{
    wbcl_redunet_params p;
    p.layers = 2000;
    p.eta = 0.5f;
    p.eps2 = 0.1f;
    p.lambda = 500.0f;
    p.impl = WBCL_REDUNET_IMPL_AUTO;
    p.report_every = 0;
    return p;
}

void wbcl_redunet_destroy(wbcl_redunet *net)
{
    if (!net) return;
    if (net->W)
        for (int l = 0; l < net->L; l++) wbcl_tensor_destroy(net->W[l]);
    free(net->W);
    free(net->hist);
    free(net);
}

/* A model with L zero-filled layer buffers (hist allocated if with_hist). */
wbcl_status wbcl__redunet_model_new(wbcl_context *ctx, const char *op, int L, size_t d, size_t K,
                                    const wbcl_redunet_params *p, int with_hist, wbcl_redunet **out)
{
    *out = NULL;
    size_t n;
    if (!wbcl__mul_ok(K + 1, d * d, &n) || n > SIZE_MAX - K)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: a layer of d = %zu, K = %zu is too large", op, d, K);
    wbcl_redunet *net = calloc(1, sizeof *net);
    if (!net) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    net->ctx = ctx;
    net->L = L;
    net->d = (int)d;
    net->K = (int)K;
    net->params = *p;
    net->params.layers = L;
    net->W = calloc((size_t)L, sizeof *net->W);
    if (with_hist) net->hist = calloc((size_t)L * 3, sizeof *net->hist);
    if (!net->W || (with_hist && !net->hist)) {
        wbcl_redunet_destroy(net);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %d layers", op, L);
    }
    size_t shape[1] = {layer_floats(d, K)};
    for (int l = 0; l < L; l++) {
        wbcl_status st = wbcl_tensor_create(ctx, 1, shape, WBCL_F32, NULL, &net->W[l]);
        if (st) {
            wbcl_redunet_destroy(net);
            return st;
        }
    }
    *out = net;
    return WBCL_SUCCESS;
}

int wbcl_redunet_layers(const wbcl_redunet *net) { return net ? net->L : 0; }
int wbcl_redunet_dim(const wbcl_redunet *net) { return net ? net->d : 0; }
int wbcl_redunet_classes(const wbcl_redunet *net) { return net ? net->K : 0; }

wbcl_redunet_params wbcl_redunet_get_params(const wbcl_redunet *net)
{
    if (net) return net->params;
    wbcl_redunet_params p;
    memset(&p, 0, sizeof p);
    return p;
}

wbcl_status wbcl_redunet_set_impl(wbcl_redunet *net, wbcl_redunet_impl impl)
{
    static const char op[] = "wbcl_redunet_set_impl";
    if (!net) return WBCL_ERROR_INVALID_ARGUMENT;
    if (impl != WBCL_REDUNET_IMPL_AUTO && impl != WBCL_REDUNET_IMPL_FUSED && impl != WBCL_REDUNET_IMPL_GEMM)
        return wbcl__fail(net->ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: impl = %d is not a wbcl_redunet_impl", op,
                          (int)impl);
    wbcl_status st = wbcl__redunet_check_impl(net->ctx, op, impl, (size_t)net->d, (size_t)net->K);
    if (st) return st;
    net->params.impl = impl;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_redunet_history(const wbcl_redunet *net, int layer, double *dR, double *R, double *Rc)
{
    static const char op[] = "wbcl_redunet_history";
    if (!net) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!net->hist)
        return wbcl__fail(net->ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: this model has no objective history", op);
    if (layer < 0 || layer >= net->L)
        return wbcl__fail(net->ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: layer %d is outside 0..%d", op, layer,
                          net->L - 1);
    const double *h = net->hist + 3 * (size_t)layer;
    if (dR) *dR = h[0];
    if (R) *R = h[1];
    if (Rc) *Rc = h[2];
    return WBCL_SUCCESS;
}

wbcl_status wbcl__redunet_check_net(wbcl_context *ctx, const char *op, const wbcl_redunet *net)
{
    if (!net) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: net is NULL", op);
    if (net->ctx != ctx)
        return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: net belongs to a different context", op);
    return WBCL_SUCCESS;
}

wbcl_status wbcl_redunet_read_layer(wbcl_context *ctx, const wbcl_redunet *net, int layer, float *E, float *C,
                                    float *gamma)
{
    static const char op[] = "wbcl_redunet_read_layer";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__redunet_check_net(ctx, op, net);
    if (st) return st;
    if (layer < 0 || layer >= net->L)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: layer %d is outside 0..%d", op, layer, net->L - 1);
    const size_t dd = (size_t)net->d * net->d, K = (size_t)net->K;
    cl_mem mem = net->W[layer]->mem;
    if (E && (st = wbcl__read_buf(ctx, mem, 0, dd * sizeof(float), E, "a ReduNet layer"))) return st;
    if (C && (st = wbcl__read_buf(ctx, mem, dd * sizeof(float), K * dd * sizeof(float), C, "a ReduNet layer")))
        return st;
    if (gamma &&
        (st = wbcl__read_buf(ctx, mem, (K + 1) * dd * sizeof(float), K * sizeof(float), gamma, "a ReduNet layer")))
        return st;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_redunet_create(wbcl_context *ctx, int layers, int dim, int classes,
                                const wbcl_redunet_params *params, const float *E, const float *C,
                                const float *gamma, const double *objective, wbcl_redunet **out)
{
    static const char op[] = "wbcl_redunet_create";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    *out = NULL;
    if (layers < 1 || dim < 1 || dim > MAX_DIM || classes < 1 || classes > MAX_CLASSES)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: layers = %d, dim = %d, classes = %d; need layers >= 1, 1 <= dim <= %d, 1 <= classes "
                          "<= %d",
                          op, layers, dim, classes, MAX_DIM, MAX_CLASSES);
    wbcl_status st = wbcl__redunet_check_params(ctx, op, params, 0);
    if (st) return st;
    if (!E || !C || !gamma)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", op, !E ? "E" : !C ? "C" : "gamma");
    const size_t d = (size_t)dim, K = (size_t)classes, dd = d * d, L = (size_t)layers;
    size_t nE, nC;
    if (!wbcl__mul_ok(L, dd, &nE) || !wbcl__mul_ok(nE, K, &nC) || nC > SIZE_MAX / sizeof(float))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: layers = %d, dim = %d, classes = %d overflow the sizes", op, layers,
                          dim, classes);
    if ((st = wbcl__redunet_check_impl(ctx, op, params->impl, d, K))) return st;
    const struct { const float *p; size_t n; const char *name; } arrs[3] = {
        {E, L * dd, "E"}, {C, L * K * dd, "C"}, {gamma, L * K, "gamma"}};
    for (int a = 0; a < 3; a++)
        for (size_t i = 0; i < arrs[a].n; i++)
            if (!isfinite(arrs[a].p[i]))
                return wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: %s[%zu] = %g is not finite", op, arrs[a].name, i,
                                  (double)arrs[a].p[i]);
    wbcl_redunet *net;
    if ((st = wbcl__redunet_model_new(ctx, op, layers, d, K, params, objective != NULL, &net))) return st;
    if (objective) memcpy(net->hist, objective, 3 * L * sizeof *net->hist);
    float *buf = malloc(layer_floats(d, K) * sizeof *buf);
    if (!buf) {
        wbcl_redunet_destroy(net);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    }
    for (size_t l = 0; l < L && !st; l++) {
        memcpy(buf, E + l * dd, dd * sizeof *buf);
        memcpy(buf + dd, C + l * K * dd, K * dd * sizeof *buf);
        memcpy(buf + (K + 1) * dd, gamma + l * K, K * sizeof *buf);
        st = wbcl_tensor_write(ctx, net->W[l], buf, layer_floats(d, K));
    }
    free(buf);
    if (st) {
        wbcl_redunet_destroy(net);
        return st;
    }
    *out = net;
    return WBCL_SUCCESS;
}

/* ---- synthetic data ------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unif01(uint64_t *s) { return ((double)(splitmix64(s) >> 11) + 0.5) / 9007199254740992.0; }

wbcl_status wbcl_redunet_gaussians(size_t d, int classes, size_t n_per_class, double sigma, const float *centres,
                                   uint64_t seed, float *X, int *y)
{
    if (!X || d == 0 || classes < 1 || n_per_class == 0 || !isfinite(sigma) || (!centres && (size_t)classes > d))
        return WBCL_ERROR_INVALID_ARGUMENT;
    uint64_t s = seed;
    double *row = malloc(d * sizeof *row);
    if (!row) return WBCL_ERROR_OUT_OF_MEMORY;
    int have = 0;
    double spare = 0.0;
    size_t i = 0;
    for (int k = 0; k < classes; k++)
        for (size_t n = 0; n < n_per_class; n++, i++) {
            double ss = 0.0;
            for (size_t c = 0; c < d; c++) {
                double g;
                if (have) {
                    g = spare;
                    have = 0;
                } else { /* Box-Muller: two normals per two uniforms */
                    double u1 = unif01(&s), u2 = unif01(&s), r = sqrt(-2.0 * log(u1));
                    g = r * cos(6.283185307179586 * u2);
                    spare = r * sin(6.283185307179586 * u2);
                    have = 1;
                }
                double mu = centres ? (double)centres[(size_t)k * d + c] : (c == (size_t)k ? 1.0 : 0.0);
                row[c] = mu + sigma * g;
                ss += row[c] * row[c];
            }
            double nrm = sqrt(ss);
            if (nrm < 1e-8) nrm = 1e-8;
            for (size_t c = 0; c < d; c++) X[i * d + c] = (float)(row[c] / nrm);
            if (y) y[i] = k;
        }
    free(row);
    return WBCL_SUCCESS;
}
