/* wbcl-run — shift-invariant ReduNet modules (include/wbcl/circulant.h, SPEC.md §4.2, §6.3):
 *   redunet1d.fit / redunet2d.fit     lift raw signals (m, Cin, T) / images (m, Cin, H, W) with --lift W.npy,
 *                                     construct the layers per frequency, save the model (with the lifting
 *                                     kernel), write the training features and the objective per layer;
 *   redunet1d.apply / redunet2d.apply replay a saved model on new signals: time-domain features out. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "registry.h"
#include "wbcl/circulant.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Labels: m integers >= 0 from a .npy (int32/int64 or integral floats). */
static int read_labels(wbcl_run *r, const char *path, size_t m, int **out, int *classes)
{
    char err[512];
    wbcl_array a;
    *out = NULL;
    if (wbcl_npy_read(path, &a, err, sizeof err)) return wbcl_run_fail(r, "%s", err);
    size_t n = wbcl_array_numel(&a);
    int rc = 1, K = 0;
    int *y = NULL;
    if (!(a.ndim == 1 || (a.ndim == 2 && a.shape[1] == 1)) || n != m) {
        char s[96];
        wbcl_run_fail(r, "%s: labels have shape %s, expected (%zu) for the %zu input samples", path,
                      wbcl_run_shape_str(s, sizeof s, a.ndim, a.shape), m, m);
        goto done;
    }
    if (!(y = malloc((n ? n : 1) * sizeof *y))) {
        wbcl_run_fail(r, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        double v = a.elem == WBCL_ELEM_I32   ? ((const int32_t *)a.data)[i]
                 : a.elem == WBCL_ELEM_I64 ? (double)((const int64_t *)a.data)[i]
                 : a.elem == WBCL_ELEM_F32 ? ((const float *)a.data)[i]
                 : a.elem == WBCL_ELEM_F64 ? ((const double *)a.data)[i]
                                           : NAN;
        if (!(v >= 0.0 && v <= 1023.0) || v != floor(v)) {
            wbcl_run_fail(r, "%s: label %zu is %g; labels must be integers in 0..1023", path, i, v);
            goto done;
        }
        y[i] = (int)v;
        if (y[i] + 1 > K) K = y[i] + 1;
    }
    *classes = K;
    *out = y;
    y = NULL;
    rc = 0;
done:
    free(y);
    wbcl_array_free(&a);
    return rc;
}

/* A float32 .npy as a device tensor (any of the input dtypes). */
static int read_tensor(wbcl_run *r, const char *path, wbcl_tensor **out, int *ndim, size_t *shape)
{
    char err[512];
    wbcl_array a;
    float *f = NULL;
    *out = NULL;
    if (wbcl_npy_read(path, &a, err, sizeof err)) return wbcl_run_fail(r, "%s", err);
    int rc = 1;
    if (a.ndim < 1 || a.ndim > WBCL_MAX_DIMS) {
        wbcl_run_fail(r, "%s: %d dimensions; 1 to %d supported", path, a.ndim, WBCL_MAX_DIMS);
        goto done;
    }
    if (wbcl_array_to_f32(&a, &f, err, sizeof err)) {
        wbcl_run_fail(r, "%s: %s", path, err);
        goto done;
    }
    *ndim = a.ndim;
    memcpy(shape, a.shape, (size_t)a.ndim * sizeof *shape);
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, a.ndim, a.shape, WBCL_F32, f, out))) goto done;
    rc = 0;
done:
    free(f);
    wbcl_array_free(&a);
    return rc;
}

/* Input 0: read_tensor, or under wbcl-run-mpi this rank's share of it (wbcl_run_input splits the first axis). */
static int read_input(wbcl_run *r, wbcl_tensor **out, int *ndim, size_t *shape)
{
    if (!r->par) return read_tensor(r, r->inputs[0], out, ndim, shape);
    wbcl_run_array h = {0};
    int rc = wbcl_run_input(r, 0, "X", &h, out);
    if (!rc) {
        *ndim = h.ndim;
        memcpy(shape, h.shape, (size_t)h.ndim * sizeof *shape);
    }
    wbcl_run_array_free(&h);
    return rc;
}

static int write_log(wbcl_run *r, const char *path, const wbcl_circulant *net)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return wbcl_run_fail(r, "%s: cannot create the file", path);
    int ok = fprintf(f, "layer,dR,R,Rc\n") > 0;
    for (int l = 0; l < wbcl_circulant_layers(net) && ok; l++) {
        double h[3];
        wbcl_circulant_history(net, l, &h[0], &h[1], &h[2]);
        ok = fprintf(f, "%d,%.9g,%.9g,%.9g\n", l + 1, h[0], h[1], h[2]) > 0;
    }
    ok = (fclose(f) == 0) && ok;
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) {
        remove(tmp);
        return wbcl_run_fail(r, "%s: cannot write the file", path);
    }
    return 0;
}

static void on_layer(int layer, double dR, double R, double Rc, void *user)
{
    wbcl_run *r = user;
    wbcl_run_info(r, "layer %4d  dR %.7f  R %.7f  Rc %.7f\n", layer, dR, R, Rc);
}

static int run_fit(wbcl_run *r, int dims)
{
    const char *name = dims == 1 ? "redunet1d.fit" : "redunet2d.fit";
    wbcl_circulant_params p = wbcl_circulant_default_params();
    long layers;
    if (wbcl_run_param_int(r, "layers", p.layers, 1, 1000000, &layers) ||
        wbcl_run_param_pos(r, "eta", p.eta, &p.eta) || wbcl_run_param_pos(r, "eps2", p.eps2, &p.eps2) ||
        wbcl_run_param_float(r, "lambda", p.lambda, 0.0, HUGE_VAL, &p.lambda))
        return 1;
    p.layers = (int)layers;
    const char *labels_path = wbcl_run_option(r, "labels"), *lift_path = wbcl_run_option(r, "lift"),
               *save = wbcl_run_option(r, "save"), *log_path = wbcl_run_option(r, "log");
    if (!labels_path) return wbcl_run_fail(r, "%s needs --labels y.npy (the class of each input sample)", name);
    wbcl_tensor *X = NULL, *Wl = NULL, *Z = NULL;
    wbcl_circulant *net = NULL;
    int *y = NULL, K = 0, rc = 1, nd = 0, nw = 0;
    size_t sx[WBCL_MAX_DIMS], sw[WBCL_MAX_DIMS], sz[WBCL_MAX_DIMS];
    if (read_input(r, &X, &nd, sx)) goto done;
    if (nd != dims + 2) {
        char s[96];
        wbcl_run_fail(r, "%s: input has shape %s; %s takes %s", r->inputs[0], wbcl_run_shape_str(s, sizeof s, nd, sx),
                      name, dims == 1 ? "(m, Cin, T)" : "(m, Cin, H, W)");
        goto done;
    }
    if (lift_path && read_tensor(r, lift_path, &Wl, &nw, sw)) goto done;
    if (r->par) { /* wbcl-run-mpi: this rank's labels (its own file, or its rows of the whole file) */
        char pbuf[4200];
        const char *lp = wbcl_run_rank_path(r, labels_path, pbuf, sizeof pbuf);
        if (r->par->per_rank_files != (lp != labels_path)) {
            wbcl_run_fail(r, "give --input and --labels both as per-rank files (with %%r) or both whole");
            goto done;
        }
        if (read_labels(r, lp, r->par->per_rank_files ? sx[0] : r->par->total, &y, &K)) goto done;
        if (!r->par->per_rank_files) memmove(y, y + r->par->begin, r->par->count * sizeof *y);
        K = 0; /* agreed on by the construction: the largest label over the ranks */
        for (size_t i = 0; i < r->par->count; i++)
            if (y[i] + 1 > K) K = y[i] + 1;
    } else if (read_labels(r, labels_path, sx[0], &y, &K)) goto done;
    memcpy(sz, sx, sizeof sz);
    if (Wl) sz[1] = sw[0];
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, nd, sz, WBCL_F32, NULL, &Z))) goto done;
    wbcl_run_info(r, "%s: m = %zu%s, C = %zu, %s; K = %d; L = %d, eta %g, eps2 %g, lambda %g\n", name, sx[0],
                  r->par ? " on rank 0" : "", sz[1],
                  dims == 1 ? "1-D" : "2-D", K, p.layers, (double)p.eta, (double)p.eps2, (double)p.lambda);
    double t0 = now_s();
    if (r->par) {
        if (wbcl_run_check(r, r->par->circulant_fit(r, X, Wl, y, K, &p, on_layer, r, Z, &net))) goto done;
    } else if (wbcl_run_check(r, wbcl_circulant_fit(r->ctx, X, Wl, y, K, &p, on_layer, r, Z, &net))) goto done;
    wbcl_run_info(r, "fit took %.3f s\n", now_s() - t0);
    const int writes = !r->par || r->par->rank == 0; /* wbcl-run-mpi: rank 0 writes the model and the log */
    if (save && writes) {
        if (wbcl_run_check(r, wbcl_circulant_save(r->ctx, net, save))) goto done;
        wbcl_run_info(r, "wrote model %s\n", save);
    }
    if (log_path && writes && write_log(r, log_path, net)) goto done;
    if (wbcl_run_write_output_tensor(r, Z)) goto done;
    rc = 0;
done:
    wbcl_circulant_destroy(net);
    wbcl_tensor_destroy(X);
    wbcl_tensor_destroy(Wl);
    wbcl_tensor_destroy(Z);
    free(y);
    return rc;
}

static int run_apply(wbcl_run *r, int dims)
{
    const char *name = dims == 1 ? "redunet1d.apply" : "redunet2d.apply";
    const char *model = wbcl_run_option(r, "model");
    if (!model) return wbcl_run_fail(r, "%s needs --model M.safetensors (from %s --save)", name,
                                     dims == 1 ? "redunet1d.fit" : "redunet2d.fit");
    wbcl_tensor *X = NULL, *Z = NULL;
    wbcl_circulant *net = NULL;
    int rc = 1, nd = 0;
    size_t sx[WBCL_MAX_DIMS], sz[WBCL_MAX_DIMS];
    if (wbcl_run_check(r, wbcl_circulant_load(r->ctx, model, &net))) goto done;
    if (wbcl_circulant_dims(net) != dims) {
        wbcl_run_fail(r, "%s: a %d-D model; use redunet%dd.apply", model, wbcl_circulant_dims(net),
                      wbcl_circulant_dims(net));
        goto done;
    }
    if (read_input(r, &X, &nd, sx)) goto done;
    memcpy(sz, sx, sizeof sz);
    sz[1] = wbcl_circulant_channels(net);
    if (nd != dims + 2) {
        char s[96];
        wbcl_run_fail(r, "%s: input has shape %s; %s takes %s", r->inputs[0], wbcl_run_shape_str(s, sizeof s, nd, sx),
                      name, dims == 1 ? "(m, Cin, T)" : "(m, Cin, H, W)");
        goto done;
    }
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, nd, sz, WBCL_F32, NULL, &Z))) goto done;
    double t0 = now_s();
    if (wbcl_run_check(r, wbcl_circulant_apply(r->ctx, net, X, Z, NULL, NULL))) goto done;
    wbcl_run_info(r, "%s: %zu samples through %d layers in %.3f s\n", name, sx[0], wbcl_circulant_layers(net),
                  now_s() - t0);
    if (wbcl_run_write_output_tensor(r, Z)) goto done;
    rc = 0;
done:
    wbcl_circulant_destroy(net);
    wbcl_tensor_destroy(X);
    wbcl_tensor_destroy(Z);
    return rc;
}

static int fit1(wbcl_run *r) { return run_fit(r, 1); }
static int fit2(wbcl_run *r) { return run_fit(r, 2); }
static int apply1(wbcl_run *r) { return run_apply(r, 1); }
static int apply2(wbcl_run *r) { return run_apply(r, 2); }

static const char *const fit_params[] = {"layers", "eta", "eps2", "lambda", NULL};
static const char *const fit_options[] = {"labels", "lift", "save", "log", NULL};
static const char *const apply_options[] = {"model", NULL};

#define FIT_USAGE(SHAPE, LIFT)                                                                          \
    "  --input X.npy            raw signals " SHAPE " (with --lift), else the features themselves\n"    \
    "  --lift W.npy             lifting kernel " LIFT ": circular cross-correlation + ReLU\n"            \
    "  --labels y.npy           the class of each sample: m integers 0..K-1, every class present\n"      \
    "  --output Z.npy           the training features after the last layer (m, C, ...)\n"                \
    "  --save M.safetensors     the model: per-frequency operators, gamma, objective, lifting kernel\n" \
    "  --log objective.csv      layer,dR,R,Rc per layer\n"                                               \
    "  --param layers=N         number of layers L (default 10)\n"                                       \
    "  --param eta=X            step size (default 0.5)\n"                                               \
    "  --param eps2=X           epsilon squared (default 0.1)\n"                                         \
    "  --param lambda=X         softmax inverse temperature of the membership (default 500)\n"

const wbcl_run_module wbcl_mod_redunet1d_fit = {
    "redunet1d.fit", "constructs a shift-invariant 1-D ReduNet (per-frequency operators, FFT)",
    FIT_USAGE("(m, Cin, T)", "(C, Cin, k)"), fit_params, fit_options, 1, 1, WBCL_RUN_NONE, WBCL_RUN_OPTIONAL, 0, fit1};
const wbcl_run_module wbcl_mod_redunet2d_fit = {
    "redunet2d.fit", "constructs a translation-invariant 2-D ReduNet (per-spatial-frequency operators)",
    FIT_USAGE("(m, Cin, H, W)", "(C, Cin, kh, kw)"), fit_params, fit_options, 1, 1, WBCL_RUN_NONE, WBCL_RUN_OPTIONAL,
    0, fit2};
const wbcl_run_module wbcl_mod_redunet1d_apply = {
    "redunet1d.apply", "maps new signals through a saved shift-invariant 1-D ReduNet",
    "  --model M.safetensors    a model written by redunet1d.fit --save\n"
    "  --input X.npy            raw signals (m, Cin, T) (features (m, C, T) for a model without lifting)\n"
    "  --output Z.npy           time-domain features (m, C, T)\n",
    NULL, apply_options, 1, 1, WBCL_RUN_NONE, WBCL_RUN_OPTIONAL, 0, apply1};
const wbcl_run_module wbcl_mod_redunet2d_apply = {
    "redunet2d.apply", "maps new images through a saved translation-invariant 2-D ReduNet",
    "  --model M.safetensors    a model written by redunet2d.fit --save\n"
    "  --input X.npy            raw images (m, Cin, H, W) (features for a model without lifting)\n"
    "  --output Z.npy           features (m, C, H, W)\n",
    NULL, apply_options, 1, 1, WBCL_RUN_NONE, WBCL_RUN_OPTIONAL, 0, apply2};
