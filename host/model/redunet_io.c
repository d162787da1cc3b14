/* ReduNet model files (include/wbcl/redunet.h): safetensors with tensors
 * "E" (L, d, d), "C" (L, K, d, d), "gamma" (L, K) as F32, an optional
 * "objective" (L, 3) F64, and the hyperparameters in __metadata__. Built on
 * the public model API (wbcl_redunet_read_layer / wbcl_redunet_create) and
 * the safetensors reader/writer of include/wbcl/io.h. */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/io.h"
#include "wbcl/redunet.h"

#define FORMAT_NAME "wbcl.redunet"
#define FORMAT_VERSION "1"

wbcl_status wbcl_redunet_save(wbcl_context *ctx, const wbcl_redunet *net, const char *path)
{
    static const char op[] = "wbcl_redunet_save";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!net) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: net is NULL", op);
    if (!path) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: path is NULL", op);
    const size_t L = (size_t)wbcl_redunet_layers(net), d = (size_t)wbcl_redunet_dim(net),
                 K = (size_t)wbcl_redunet_classes(net), dd = d * d;
    const wbcl_redunet_params p = wbcl_redunet_get_params(net);
    char err[512];
    wbcl_array E, C, g, obj;
    memset(&E, 0, sizeof E);
    memset(&C, 0, sizeof C);
    memset(&g, 0, sizeof g);
    memset(&obj, 0, sizeof obj);
    const size_t sE[3] = {L, d, d}, sC[4] = {L, K, d, d}, sg[2] = {L, K}, so[2] = {L, 3};
    const int has_hist = wbcl_redunet_history(net, 0, NULL, NULL, NULL) == WBCL_SUCCESS;
    wbcl_status st = wbcl_array_alloc(&E, WBCL_ELEM_F32, 3, sE, err, sizeof err);
    if (!st) st = wbcl_array_alloc(&C, WBCL_ELEM_F32, 4, sC, err, sizeof err);
    if (!st) st = wbcl_array_alloc(&g, WBCL_ELEM_F32, 2, sg, err, sizeof err);
    if (!st && has_hist) st = wbcl_array_alloc(&obj, WBCL_ELEM_F64, 2, so, err, sizeof err);
    if (st) {
        st = wbcl__fail(ctx, st, "%s: %s", op, err);
        goto done;
    }
    for (size_t l = 0; l < L; l++) {
        if ((st = wbcl_redunet_read_layer(ctx, net, (int)l, (float *)E.data + l * dd, (float *)C.data + l * K * dd,
                                          (float *)g.data + l * K)))
            goto done;
        if (has_hist) {
            double *h = (double *)obj.data + 3 * l;
            wbcl_redunet_history(net, (int)l, &h[0], &h[1], &h[2]);
        }
    }
    char v_layers[32], v_dim[32], v_classes[32], v_eta[48], v_eps2[48], v_lambda[48];
    snprintf(v_layers, sizeof v_layers, "%zu", L);
    snprintf(v_dim, sizeof v_dim, "%zu", d);
    snprintf(v_classes, sizeof v_classes, "%zu", K);
    snprintf(v_eta, sizeof v_eta, "%.9g", (double)p.eta);
    snprintf(v_eps2, sizeof v_eps2, "%.9g", (double)p.eps2);
    snprintf(v_lambda, sizeof v_lambda, "%.9g", (double)p.lambda);
    const char *keys[] = {"format", "version", "layers", "dim", "classes", "eta", "eps2", "lambda"};
    const char *vals[] = {FORMAT_NAME, FORMAT_VERSION, v_layers, v_dim, v_classes, v_eta, v_eps2, v_lambda};
    const char *names[] = {"E", "C", "gamma", "objective"};
    const wbcl_array *arrs[] = {&E, &C, &g, &obj};
    st = wbcl_safetensors_write(path, has_hist ? 4 : 3, names, arrs, 8, keys, vals, err, sizeof err);
    if (st) st = wbcl__fail(ctx, st, "%s: %s", op, err);
done:
    wbcl_array_free(&E);
    wbcl_array_free(&C);
    wbcl_array_free(&g);
    wbcl_array_free(&obj);
    return st;
}

/* Metadata value parsed as a positive integer <= max (absent: *out untouched, returns 0). */
static wbcl_status meta_int(wbcl_context *ctx, const wbcl_safetensors *sf, const char *path, const char *key,
                            long max, long *out, int *present)
{
    const char *v = wbcl_safetensors_metadata(sf, key);
    *present = v != NULL;
    if (!v) return WBCL_SUCCESS;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < 1 || x > max)
        return wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: metadata '%s' = '%s' is not an integer in 1..%ld", path, key, v,
                          max);
    *out = x;
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

/* Tensor `name` as float32 (or float64 when want_f64) with exactly the expected shape. */
static wbcl_status get_tensor(wbcl_context *ctx, const wbcl_safetensors *sf, const char *path, const char *name,
                              int ndim, const size_t *shape, int want_f64, void **out)
{
    char err[512];
    wbcl_array a;
    *out = NULL;
    wbcl_status st = wbcl_safetensors_get(sf, name, &a, err, sizeof err);
    if (st) return wbcl__fail(ctx, st, "%s", err);
    int ok = a.ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = a.shape[i] == shape[i];
    if (!ok) {
        char got[128], want[128];
        wbcl__shape_str(got, sizeof got, a.ndim, a.shape);
        wbcl__shape_str(want, sizeof want, ndim, shape);
        wbcl_array_free(&a);
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: tensor '%s' has shape %s, expected %s", path, name, got, want);
    }
    if (want_f64) {
        size_t n = wbcl_array_numel(&a);
        double *o = malloc((n ? n : 1) * sizeof *o);
        float *f = NULL;
        if (!o) st = WBCL_ERROR_OUT_OF_MEMORY;
        else if (a.elem == WBCL_ELEM_F64)
            memcpy(o, a.data, n * sizeof *o);
        else if (!(st = wbcl_array_to_f32(&a, &f, err, sizeof err)))
            for (size_t i = 0; i < n; i++) o[i] = f[i];
        free(f);
        wbcl_array_free(&a);
        if (st) {
            free(o);
            return wbcl__fail(ctx, st, "%s: tensor '%s': %s", path, name,
                              st == WBCL_ERROR_OUT_OF_MEMORY ? "out of host memory" : err);
        }
        /* the float32 operators are checked by wbcl_redunet_create; the float64 history here, as
         * the other model loaders refuse weights (wbcl_weight_load) */
        for (size_t i = 0; i < n; i++)
            if (!isfinite(o[i])) {
                st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: '%s' has a non-finite value (%g) at flat index %zu", path,
                                name, o[i], i);
                free(o);
                return st;
            }
        *out = o;
        return WBCL_SUCCESS;
    }
    float *f = NULL;
    st = wbcl_array_to_f32(&a, &f, err, sizeof err);
    wbcl_array_free(&a);
    if (st) return wbcl__fail(ctx, st, "%s: tensor '%s': %s", path, name, err);
    *out = f;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_redunet_load(wbcl_context *ctx, const char *path, wbcl_redunet **out)
{
    static const char op[] = "wbcl_redunet_load";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    *out = NULL;
    if (!path) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: path is NULL", op);
    char err[512];
    wbcl_safetensors *sf = NULL;
    wbcl_status st = wbcl_safetensors_open(path, &sf, err, sizeof err);
    if (st) return wbcl__fail(ctx, st, "%s: %s", op, err);
    float *E = NULL, *C = NULL, *g = NULL;
    double *obj = NULL;
    const char *fmt = wbcl_safetensors_metadata(sf, "format");
    const char *ver = wbcl_safetensors_metadata(sf, "version");
    if (fmt && strcmp(fmt, FORMAT_NAME)) {
        st = wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: metadata 'format' is '%s', not '" FORMAT_NAME "'", path, fmt);
        goto done;
    }
    if (ver && strcmp(ver, FORMAT_VERSION)) {
        st = wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: model format version '%s' is not supported (expected " FORMAT_VERSION
                        ")", path, ver);
        goto done;
    }
    /* shapes: from the tensors, checked against the metadata when it states them */
    if (!wbcl_safetensors_has(sf, "E") || !wbcl_safetensors_has(sf, "C") || !wbcl_safetensors_has(sf, "gamma")) {
        st = wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: missing tensor '%s' (a ReduNet model has E, C and gamma)", path,
                        !wbcl_safetensors_has(sf, "E") ? "E" : !wbcl_safetensors_has(sf, "C") ? "C" : "gamma");
        goto done;
    }
    wbcl_array probe;
    if ((st = wbcl_safetensors_get(sf, "C", &probe, err, sizeof err))) {
        st = wbcl__fail(ctx, st, "%s", err);
        goto done;
    }
    const int is4 = probe.ndim == 4;
    size_t L = is4 ? probe.shape[0] : 0, K = is4 ? probe.shape[1] : 0, d = is4 ? probe.shape[2] : 0;
    if (!is4 || probe.shape[3] != d || L < 1 || K < 1 || d < 1 || L > INT32_MAX || K > 1024 ||
        d > 65536) {
        char got[128];
        wbcl__shape_str(got, sizeof got, probe.ndim, probe.shape);
        wbcl_array_free(&probe);
        st = wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                        "%s: tensor 'C' has shape %s; expected (layers, classes, d, d) with positive sizes", path, got);
        goto done;
    }
    st = wbcl_array_to_f32(&probe, &C, err, sizeof err);
    wbcl_array_free(&probe);
    if (st) {
        st = wbcl__fail(ctx, st, "%s: tensor 'C': %s", path, err);
        goto done;
    }
    const char *mk[3] = {"layers", "classes", "dim"};
    size_t *mv[3] = {&L, &K, &d};
    for (int i = 0; i < 3; i++) {
        long v = 0;
        int present;
        if ((st = meta_int(ctx, sf, path, mk[i], INT32_MAX, &v, &present))) goto done;
        if (present && (size_t)v != *mv[i]) {
            st = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: metadata '%s' = %ld but tensor 'C' has shape (%zu, %zu, %zu, %zu)",
                            path, mk[i], v, L, K, d, d);
            goto done;
        }
    }
    wbcl_redunet_params p = wbcl_redunet_default_params();
    if ((st = meta_float(ctx, sf, path, "eta", &p.eta)) || (st = meta_float(ctx, sf, path, "eps2", &p.eps2)) ||
        (st = meta_float(ctx, sf, path, "lambda", &p.lambda)))
        goto done;
    p.layers = (int)L;
    const size_t sE[3] = {L, d, d}, sg[2] = {L, K}, so[2] = {L, 3};
    if ((st = get_tensor(ctx, sf, path, "E", 3, sE, 0, (void **)&E))) goto done;
    if ((st = get_tensor(ctx, sf, path, "gamma", 2, sg, 0, (void **)&g))) goto done;
    if (wbcl_safetensors_has(sf, "objective") && (st = get_tensor(ctx, sf, path, "objective", 2, so, 1, (void **)&obj)))
        goto done;
    st = wbcl_redunet_create(ctx, (int)L, (int)d, (int)K, &p, E, C, g, obj, out);
    if (st) {
        /* prefix the file name to the validation message */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", wbcl_context_last_error(ctx));
        st = wbcl__fail(ctx, st, "%s: %s", path, msg);
    }
done:
    free(E);
    free(C);
    free(g);
    free(obj);
    wbcl_safetensors_close(sf);
    return st;
}
