/* Shift-invariant ReduNet model files (include/wbcl/circulant.h): safetensors with "ops"
 * (L, K+1, P, C, C, 2), "gamma" (L, K), "objective" (L, 3) F64 and the optional lifting kernel "lift",
 * hyperparameters and shape in __metadata__. */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/circulant_internal.h"
#include "wbcl/io.h"

#define FORMAT_NAME "wbcl.circulant"
#define FORMAT_VERSION "1"

wbcl_status wbcl_circulant_save(wbcl_context *ctx, const wbcl_circulant *net, const char *path)
{
    static const char op[] = "wbcl_circulant_save";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!net) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: net is NULL", op);
    if (!path) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: path is NULL", op);
    const size_t L = (size_t)wbcl_circulant_layers(net), K = (size_t)wbcl_circulant_classes(net),
                 C = wbcl_circulant_channels(net), H = wbcl_circulant_height(net), W = wbcl_circulant_width(net),
                 P = H * (W / 2 + 1), blk = P * C * C * 2;
    const int dims = wbcl_circulant_dims(net);
    const wbcl_circulant_params p = wbcl_circulant_get_params(net);
    size_t Cin = 0, kh = 0, kw = 0;
    const float *lift = wbcl__circulant_lift(net, &Cin, &kh, &kw);
    const int has_hist = wbcl_circulant_history(net, 0, NULL, NULL, NULL) == WBCL_SUCCESS;
    char err[512];
    wbcl_array A, g, obj, lf;
    memset(&A, 0, sizeof A);
    memset(&g, 0, sizeof g);
    memset(&obj, 0, sizeof obj);
    memset(&lf, 0, sizeof lf);
    const size_t sA[6] = {L, K + 1, P, C, C, 2}, sg[2] = {L, K}, so[2] = {L, 3};
    const size_t sl[4] = {C, Cin, dims == 2 ? kh : kw, kw};
    wbcl_status st = wbcl_array_alloc(&A, WBCL_ELEM_F32, 6, sA, err, sizeof err);
    if (!st) st = wbcl_array_alloc(&g, WBCL_ELEM_F32, 2, sg, err, sizeof err);
    if (!st && has_hist) st = wbcl_array_alloc(&obj, WBCL_ELEM_F64, 2, so, err, sizeof err);
    if (!st && lift) st = wbcl_array_alloc(&lf, WBCL_ELEM_F32, dims + 2, sl, err, sizeof err);
    if (st) {
        st = wbcl__fail(ctx, st, "%s: %s", op, err);
        goto done;
    }
    for (size_t l = 0; l < L; l++) {
        float *base = (float *)A.data + l * (K + 1) * blk;
        if ((st = wbcl_circulant_read_layer(ctx, net, (int)l, base + K * blk, base, (float *)g.data + l * K)))
            goto done;
        if (has_hist) {
            double *h = (double *)obj.data + 3 * l;
            wbcl_circulant_history(net, (int)l, &h[0], &h[1], &h[2]);
        }
    }
    if (lift) memcpy(lf.data, lift, C * Cin * kh * kw * sizeof(float));
    char v[9][48];
    snprintf(v[0], 48, "%d", dims);
    snprintf(v[1], 48, "%zu", C);
    snprintf(v[2], 48, "%zu", H);
    snprintf(v[3], 48, "%zu", W);
    snprintf(v[4], 48, "%zu", K);
    snprintf(v[5], 48, "%zu", L);
    snprintf(v[6], 48, "%.9g", (double)p.eta);
    snprintf(v[7], 48, "%.9g", (double)p.eps2);
    snprintf(v[8], 48, "%.9g", (double)p.lambda);
    const char *keys[] = {"format", "version", "dims", "channels", "height", "width", "classes", "layers", "eta",
                          "eps2", "lambda"};
    const char *vals[] = {FORMAT_NAME, FORMAT_VERSION, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
    const char *names[4];
    const wbcl_array *arrs[4];
    size_t n = 0;
    names[n] = "ops", arrs[n++] = &A;
    names[n] = "gamma", arrs[n++] = &g;
    if (has_hist) names[n] = "objective", arrs[n++] = &obj;
    if (lift) names[n] = "lift", arrs[n++] = &lf;
    st = wbcl_safetensors_write(path, n, names, arrs, 11, keys, vals, err, sizeof err);
    if (st) st = wbcl__fail(ctx, st, "%s: %s", op, err);
done:
    wbcl_array_free(&A);
    wbcl_array_free(&g);
    wbcl_array_free(&obj);
    wbcl_array_free(&lf);
    return st;
}

static wbcl_status meta_size(wbcl_context *ctx, const wbcl_safetensors *sf, const char *path, const char *key,
                             long lo, long hi, size_t *out)
{
    const char *v = wbcl_safetensors_metadata(sf, key);
    if (!v) return wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: metadata '%s' is missing", path, key);
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: metadata '%s' = '%s' is not an integer in %ld..%ld", path, key,
                          v, lo, hi);
    *out = (size_t)x;
    return WBCL_SUCCESS;
}

static wbcl_status meta_float(wbcl_context *ctx, const wbcl_safetensors *sf, const char *path, const char *key,
                              float *out)
{
    const char *v = wbcl_safetensors_metadata(sf, key);
    if (!v) return wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: metadata '%s' is missing", path, key);
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (errno || end == v || *end || !isfinite(x))
        return wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: metadata '%s' = '%s' is not a finite number", path, key, v);
    *out = x;
    return WBCL_SUCCESS;
}

/* Tensor `name` with exactly the expected shape, as float32 (or float64), all finite. */
static wbcl_status get_tensor(wbcl_context *ctx, const wbcl_safetensors *sf, const char *path, const char *name,
                              int ndim, const size_t *shape, int want_f64, void **out)
{
    char err[512];
    wbcl_array a;
    *out = NULL;
    wbcl_status st = wbcl_safetensors_get(sf, name, &a, err, sizeof err);
    if (st) return wbcl__fail(ctx, st, "%s: %s", path, err);
    int ok = a.ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = a.shape[i] == shape[i];
    if (!ok) {
        char got[128], want[128];
        wbcl__shape_str(got, sizeof got, a.ndim, a.shape);
        wbcl__shape_str(want, sizeof want, ndim, shape);
        wbcl_array_free(&a);
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: tensor '%s' has shape %s, expected %s", path, name, got, want);
    }
    size_t n = wbcl_array_numel(&a);
    float *f = NULL;
    st = wbcl_array_to_f32(&a, &f, err, sizeof err);
    if (st) {
        wbcl_array_free(&a);
        return wbcl__fail(ctx, st, "%s: tensor '%s': %s", path, name, err);
    }
    /* refused as the other model loaders refuse weights (wbcl_weight_load): status and message;
     * float64 values read as float64 are checked as they are */
    const int keep64 = want_f64 && a.elem == WBCL_ELEM_F64;
    for (size_t i = 0; i < n; i++) {
        const double v = keep64 ? ((const double *)a.data)[i] : (double)f[i];
        if (!isfinite(v)) {
            free(f);
            wbcl_array_free(&a);
            return wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: '%s' has a non-finite value (%g) at flat index %zu", path,
                              name, v, i);
        }
    }
    if (want_f64) {
        double *o = malloc((n ? n : 1) * sizeof *o);
        if (o) {
            if (keep64) memcpy(o, a.data, n * sizeof *o);
            else
                for (size_t i = 0; i < n; i++) o[i] = f[i];
        }
        free(f);
        wbcl_array_free(&a);
        if (!o) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", path);
        *out = o;
        return WBCL_SUCCESS;
    }
    wbcl_array_free(&a);
    *out = f;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_circulant_load(wbcl_context *ctx, const char *path, wbcl_circulant **out)
{
    static const char op[] = "wbcl_circulant_load";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    *out = NULL;
    if (!path) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: path is NULL", op);
    char err[512];
    wbcl_safetensors *sf = NULL;
    wbcl_status st = wbcl_safetensors_open(path, &sf, err, sizeof err);
    if (st) return wbcl__fail(ctx, st, "%s: %s", op, err);
    float *A = NULL, *g = NULL, *lift = NULL;
    double *obj = NULL;
    wbcl_circulant *net = NULL;
    const char *fmt = wbcl_safetensors_metadata(sf, "format");
    const char *ver = wbcl_safetensors_metadata(sf, "version");
    if (!fmt || strcmp(fmt, FORMAT_NAME)) {
        st = wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: metadata 'format' is '%s', not '" FORMAT_NAME "'", path,
                        fmt ? fmt : "(missing)");
        goto done;
    }
    if (!ver || strcmp(ver, FORMAT_VERSION)) {
        st = wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: model format version '%s' is not supported (expected " FORMAT_VERSION ")",
                        path, ver ? ver : "(missing)");
        goto done;
    }
    size_t dims, C, H, W, K, L;
    if ((st = meta_size(ctx, sf, path, "dims", 1, 2, &dims)) ||
        (st = meta_size(ctx, sf, path, "channels", 1, WBCL_CIRCULANT_MAX_CHANNELS, &C)) ||
        (st = meta_size(ctx, sf, path, "height", 1, 1 << 24, &H)) ||
        (st = meta_size(ctx, sf, path, "width", 1, 1 << 24, &W)) ||
        (st = meta_size(ctx, sf, path, "classes", 1, 1024, &K)) ||
        (st = meta_size(ctx, sf, path, "layers", 1, 1 << 20, &L)))
        goto done;
    if (dims == 1 && H != 1) {
        st = wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: a 1-D model must have height 1 (has %zu)", path, H);
        goto done;
    }
    wbcl_circulant_params p = wbcl_circulant_default_params();
    if ((st = meta_float(ctx, sf, path, "eta", &p.eta)) || (st = meta_float(ctx, sf, path, "eps2", &p.eps2)) ||
        (st = meta_float(ctx, sf, path, "lambda", &p.lambda)))
        goto done;
    p.layers = (int)L;
    const size_t P = H * (W / 2 + 1), blk = P * C * C * 2;
    const size_t sA[6] = {L, K + 1, P, C, C, 2}, sg[2] = {L, K}, so[2] = {L, 3};
    if ((st = get_tensor(ctx, sf, path, "ops", 6, sA, 0, (void **)&A)) ||
        (st = get_tensor(ctx, sf, path, "gamma", 2, sg, 0, (void **)&g)))
        goto done;
    if (wbcl_safetensors_has(sf, "objective") && (st = get_tensor(ctx, sf, path, "objective", 2, so, 1, (void **)&obj)))
        goto done;
    size_t Cin = 0, kh = 1, kw = 1;
    if (wbcl_safetensors_has(sf, "lift")) {
        wbcl_array probe;
        if ((st = wbcl_safetensors_get(sf, "lift", &probe, err, sizeof err))) {
            st = wbcl__fail(ctx, st, "%s: %s", path, err);
            goto done;
        }
        int ok = probe.ndim == (int)dims + 2 && probe.shape[0] == C && probe.shape[1] >= 1;
        if (ok) {
            Cin = probe.shape[1];
            kh = dims == 2 ? probe.shape[2] : 1;
            kw = probe.shape[probe.ndim - 1];
            ok = kh >= 1 && kh <= H && kw >= 1 && kw <= W;
        }
        char got[128];
        wbcl__shape_str(got, sizeof got, probe.ndim, probe.shape);
        wbcl_array_free(&probe);
        if (!ok) {
            st = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: tensor 'lift' has shape %s; expected (%zu, Cin, %s) within (%zu, %zu)",
                            path, got, C, dims == 2 ? "kh, kw" : "k", H, W);
            goto done;
        }
        const size_t sl[4] = {C, Cin, dims == 2 ? kh : kw, kw};
        if ((st = get_tensor(ctx, sf, path, "lift", (int)dims + 2, sl, 0, (void **)&lift))) goto done;
    }
    if ((st = wbcl__circulant_new(ctx, (int)dims, C, H, W, (int)K, (int)L, &p, &net))) goto done;
    for (size_t l = 0; l < L; l++)
        if ((st = wbcl__circulant_set_layer(ctx, net, (int)l, A + l * (K + 1) * blk, g + l * K))) goto done;
    if ((st = wbcl__circulant_set_extra(net, obj, lift, Cin, kh, kw))) goto done;
    *out = net;
    net = NULL;
done:
    wbcl_circulant_destroy(net);
    free(A);
    free(g);
    free(lift);
    free(obj);
    wbcl_safetensors_close(sf);
    return st;
}
