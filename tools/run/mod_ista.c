/* wbcl-run — sparse coding modules: `ista` (CRATE's FeedForward / ISTA block, SPEC §2, §6.2)
 * and `lasso` (T steps of ISTA or FISTA on min lambda |Z|_1 + 1/2 |X - Z D^T|^2, rows).
 *
 * Verification tolerances (--verify), bounds on float32 rounding in units of u = 2^-24:
 *   ista   per element, relative to |z| + eta ((|z||W^T| + |x|)|W|) + eta lambda (the magnitude
 *          the two products' rounding scales with): (m + 2d + 8) u (length-m and length-d dot
 *          products; the folded path's W - W^T W adds another length-d product);
 *   lasso  normwise: |Z - Zref|_F <= 8 sqrt(T (m + d)) u (|Zref|_F + t |D|_2 |X|_F) (the ISTA map
 *          with t <= 1/L is nonexpansive; the step roundings add up like a random walk), and
 *          each objective within (8 sqrt(m + d) u + that bound) of the reference's; the reference
 *          runs in double with the same step t. tests/test_ista.c justifies both.
 * A swapped W and W^T, a wrong eta lambda or a missing momentum fails by orders of magnitude. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "wbcl/ista.h"

#define U WBCL_RUN_U32

static size_t last_dim(const wbcl_run_array *a) { return a->shape[a->ndim - 1]; }

/* ---- ista ------------------------------------------------------------------------------------- */

static int run_ista(wbcl_run *r)
{
    static const char *const thresholds[] = {"relu", "soft", NULL};
    static const char *const paths[] = {"auto", "two_gemm", "folded", NULL};
    float eta, lambd;
    const char *thr, *path;
    if (wbcl_run_param_pos(r, "eta", 0.1, &eta) || wbcl_run_param_float(r, "lambd", 0.1, 0.0, HUGE_VAL, &lambd) ||
        wbcl_run_param_choice(r, "threshold", "relu", thresholds, &thr) ||
        wbcl_run_param_choice(r, "path", "auto", paths, &path))
        return 1;
    const wbcl_threshold th = !strcmp(thr, "soft") ? WBCL_THRESHOLD_SOFT : WBCL_THRESHOLD_RELU;
    const wbcl_ista_path ip = !strcmp(path, "folded") ? WBCL_ISTA_FOLDED
                            : !strcmp(path, "two_gemm") ? WBCL_ISTA_TWO_GEMM : WBCL_ISTA_AUTO;
    wbcl_run_array xh = {0}, zh = {0}, wh = {0}, yh = {0};
    wbcl_tensor *x = NULL, *z = NULL, *W = NULL, *y = NULL;
    wbcl_ista_layer *layer = NULL;
    double *xd = NULL, *zd = NULL, *wd = NULL, *want = NULL, *scale = NULL, *P = NULL;
    int rc = 1;
    char s1[96], s2[96];
    if (wbcl_run_input(r, 0, "x", &xh, &x)) goto done;
    const size_t d = last_dim(&xh), rows = xh.numel / d;
    size_t wshape[2] = {d, WBCL_RUN_ANY};
    if (wbcl_run_weight(r, "weight", 1, 2, wshape, &wh, &W)) goto done;
    const size_t m = wh.shape[1];
    if (r->n_inputs > 1) {
        if (wbcl_run_input(r, 1, "z", &zh, &z)) goto done;
        if (zh.numel / last_dim(&zh) != rows || last_dim(&zh) != m) {
            wbcl_run_fail(r, "ista: the code z (%s) has shape %s; with x %s and weight (%zu, %zu) it must be (..., %zu)",
                          r->inputs[1], wbcl_run_shape_str(s1, sizeof s1, zh.ndim, zh.shape),
                          wbcl_run_shape_str(s2, sizeof s2, xh.ndim, xh.shape), d, m, m);
            goto done;
        }
    }
    size_t yshape[WBCL_MAX_DIMS];
    memcpy(yshape, xh.shape, sizeof yshape);
    yshape[xh.ndim - 1] = m;
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, xh.ndim, yshape, WBCL_F32, NULL, &y))) goto done;
    if (z) {
        if (ip == WBCL_ISTA_FOLDED) {
            wbcl_run_fail(r, "ista: path=folded computes the CRATE block (z = x); it takes no code input z");
            goto done;
        }
        if (wbcl_run_check(r, wbcl_ista(r->ctx, x, z, W, eta, lambd, th, y))) goto done;
    } else {
        if (wbcl_run_check(r, wbcl_ista_layer_create(r->ctx, W, eta, lambd, th, ip, &layer))) goto done;
        if (wbcl_run_check(r, wbcl_ista_layer_forward(r->ctx, layer, x, y))) goto done;
        wbcl_run_info(r, "ista: x %s, weight (%zu, %zu), eta %g, lambd %g, %s threshold, path %s%s\n",
                      wbcl_run_shape_str(s1, sizeof s1, xh.ndim, xh.shape), d, m, (double)eta, (double)lambd, thr,
                      wbcl_ista_layer_path(layer) == WBCL_ISTA_FOLDED ? "folded" : "two_gemm",
                      m != d ? " (overcomplete: code from z = 0)" : "");
    }
    if (wbcl_run_download(r, y, &yh)) goto done;
    if (r->verify) {
        if (!(xd = wbcl_run_to_f64(r, xh.data, xh.numel)) || !(wd = wbcl_run_to_f64(r, wh.data, wh.numel))) goto done;
        want = malloc(rows * m * sizeof *want);
        scale = malloc(rows * m * sizeof *scale);
        P = malloc(rows * d * sizeof *P);
        zd = calloc(rows * m, sizeof *zd);
        if (!want || !scale || !P || !zd) {
            wbcl_run_fail(r, "out of memory");
            goto done;
        }
        const double *zr = xd;
        if (z) {
            for (size_t i = 0; i < rows * m; i++) zd[i] = zh.data[i];
            zr = zd;
        } else if (m != d) {
            zr = zd; /* zeros */
        }
        wbcl_ref_ista(rows, d, m, xd, zr, wd, eta, lambd, th == WBCL_THRESHOLD_SOFT, want);
        for (size_t q = 0; q < rows; q++)
            for (size_t i = 0; i < d; i++) {
                double sum = fabs(xd[q * d + i]);
                for (size_t j = 0; j < m; j++) sum += fabs(zr[q * m + j]) * fabs(wd[i * m + j]);
                P[q * d + i] = sum;
            }
        for (size_t q = 0; q < rows; q++)
            for (size_t j = 0; j < m; j++) {
                double sum = 0.0;
                for (size_t i = 0; i < d; i++) sum += P[q * d + i] * fabs(wd[i * m + j]);
                scale[q * m + j] = fabs(zr[q * m + j]) + eta * sum + (double)eta * lambd;
            }
        wbcl_run_err e = wbcl_run_compare_rows(yh.data, want, rows * m, 1, scale);
        if (wbcl_run_verify_err(r, &e, yh.data, want, (double)(m + 2 * d + 8) * U)) goto done;
    }
    rc = wbcl_run_write_output(r, &yh);
done:
    wbcl_ista_layer_destroy(layer);
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(z);
    wbcl_tensor_destroy(W);
    wbcl_tensor_destroy(y);
    wbcl_run_array_free(&xh);
    wbcl_run_array_free(&zh);
    wbcl_run_array_free(&wh);
    wbcl_run_array_free(&yh);
    free(xd);
    free(zd);
    free(wd);
    free(want);
    free(scale);
    free(P);
    return rc;
}

static const char *const ista_params[] = {"eta", "lambd", "threshold", "path", NULL};
const wbcl_run_module wbcl_mod_ista = {
    "ista",
    "CRATE's ISTA block: ReLU(x + eta (x W - x W^T W) - eta lambda), or one ISTA step on a code",
    "  --input X.npy          x, tokens (..., d)\n"
    "  --input Z.npy          optional: the code z (..., m) to take one step from (default: z = x\n"
    "                         for a square weight, z = 0 for an overcomplete one)\n"
    "  --weights W            CRATE FeedForward state_dict: 'weight' (d, d), or a dictionary (d, m)\n"
    "  --param eta=E          step size (default 0.1, > 0)\n"
    "  --param lambd=L        sparsity weight (default 0.1, >= 0)\n"
    "  --param threshold=T    relu (non-negative, CRATE; default) or soft (sign(v)(|v| - eta lambd)+)\n"
    "  --param path=P         auto (folded for a square weight), two_gemm ((x W^T - x) W) or folded\n"
    "                         (x (W - W^T W), W^T W precomputed once)\n"
    "  --output Y.npy         y = theta(z - eta (z W^T - x) W), shape (..., m)\n"
    "  --verify               per element, relative to |z| + eta ((|z||W^T| + |x|)|W|) + eta lambd;\n"
    "                         tolerance (m + 2d + 8) 2^-24\n",
    ista_params, NULL, 1, 2, WBCL_RUN_REQUIRED, WBCL_RUN_OPTIONAL, 1, run_ista};

/* ---- lasso ------------------------------------------------------------------------------------ */

static double frob64(const double *a, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * a[i];
    return sqrt(s);
}

static int run_lasso(wbcl_run *r)
{
    static const char *const methods[] = {"ista", "fista", NULL};
    static const char *const thresholds[] = {"soft", "relu", NULL};
    long steps;
    float lambd, stepf;
    const char *method, *thr;
    if (wbcl_run_param_int(r, "steps", 100, 1, 1000000, &steps) ||
        wbcl_run_param_float(r, "lambd", 0.1, 0.0, HUGE_VAL, &lambd) ||
        wbcl_run_param_choice(r, "method", "ista", methods, &method) ||
        wbcl_run_param_choice(r, "threshold", "soft", thresholds, &thr) ||
        wbcl_run_param_float(r, "step", 0.0, 0.0, HUGE_VAL, &stepf))
        return 1;
    wbcl_run_array xh = {0}, dh = {0}, zh = {0};
    wbcl_tensor *X = NULL, *D = NULL, *Z = NULL;
    double *obj = NULL, *xd = NULL, *dd = NULL, *zref = NULL, *objref = NULL;
    int rc = 1;
    char s1[96], s2[96];
    if (wbcl_run_input(r, 0, "X", &xh, &X) || wbcl_run_input(r, 1, "D", &dh, &D)) goto done;
    if (dh.ndim != 2 || dh.shape[0] != last_dim(&xh)) {
        wbcl_run_fail(r, "lasso: the dictionary D (%s) has shape %s; for X %s it must be (%zu, m)", r->inputs[1],
                      wbcl_run_shape_str(s1, sizeof s1, dh.ndim, dh.shape),
                      wbcl_run_shape_str(s2, sizeof s2, xh.ndim, xh.shape), last_dim(&xh));
        goto done;
    }
    const size_t d = dh.shape[0], m = dh.shape[1], rows = xh.numel / d;
    size_t zshape[WBCL_MAX_DIMS];
    memcpy(zshape, xh.shape, sizeof zshape);
    zshape[xh.ndim - 1] = m;
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, xh.ndim, zshape, WBCL_F32, NULL, &Z))) goto done;
    wbcl_lasso_opts o = wbcl_lasso_defaults();
    o.steps = (size_t)steps;
    o.lambd = lambd;
    o.method = !strcmp(method, "fista") ? WBCL_LASSO_FISTA : WBCL_LASSO_ISTA;
    o.threshold = !strcmp(thr, "relu") ? WBCL_THRESHOLD_RELU : WBCL_THRESHOLD_SOFT;
    if (wbcl_run_check(r, wbcl_lasso_lipschitz(r->ctx, D, &o.L))) goto done;
    o.step = stepf > 0.0f ? (double)stepf : o.L > 0.0 ? 1.0 / o.L : 1.0;
    if (!(obj = malloc(((size_t)steps + 1) * sizeof *obj))) {
        wbcl_run_fail(r, "out of memory");
        goto done;
    }
    if (wbcl_run_check(r, wbcl_lasso(r->ctx, X, D, &o, Z, obj))) goto done;
    if (wbcl_run_download(r, Z, &zh)) goto done;
    if (!r->quiet) {
        printf("# lasso: X %s, D (%zu, %zu), %s, %s threshold, lambda %g, L = |D|_2^2 = %.9g, step %.9g%s\n",
               wbcl_run_shape_str(s1, sizeof s1, xh.ndim, xh.shape), d, m, method, thr, (double)lambd, o.L, o.step,
               o.step > 1.0 / o.L * (1 + 1e-12) ? " (> 1/L)" : "");
        printf("# step  objective\n");
    }
    for (long k = 0; k <= steps; k++) printf("%ld %.9g\n", k, obj[k]);
    if (r->verify) {
        if (!(xd = wbcl_run_to_f64(r, xh.data, xh.numel)) || !(dd = wbcl_run_to_f64(r, dh.data, dh.numel))) goto done;
        zref = calloc(rows * m, sizeof *zref);
        objref = malloc(((size_t)steps + 1) * sizeof *objref);
        if (!zref || !objref) {
            wbcl_run_fail(r, "out of memory");
            goto done;
        }
        wbcl_ref_lasso(rows, d, m, xd, dd, lambd, o.threshold == WBCL_THRESHOLD_SOFT, o.method == WBCL_LASSO_FISTA,
                       o.step, (size_t)steps, zref, objref);
        const double zn = frob64(zref, rows * m) + o.step * sqrt(o.L) * frob64(xd, rows * d);
        const double ztol = 8.0 * sqrt((double)steps * (double)(m + d)) * U;
        wbcl_run_err e = wbcl_run_compare(zh.data, zref, rows * m, zn > 0 ? zn : 1e-300);
        /* normwise: |Z - Zref|_F / zn */
        double fd = 0.0;
        for (size_t i = 0; i < rows * m; i++) fd += (zh.data[i] - zref[i]) * (zh.data[i] - zref[i]);
        e.max_rel = sqrt(fd) / (zn > 0 ? zn : 1e-300);
        if (wbcl_run_verify_err(r, &e, zh.data, zref, ztol)) goto done;
        const double otol = 8.0 * sqrt((double)(m + d)) * U + ztol;
        for (long k = 0; k <= steps; k++)
            if (!(fabs(obj[k] - objref[k]) <= otol * fabs(objref[k]))) {
                wbcl_run_fail(r, "verify: objective at step %ld is %.9g, the reference's %.9g (tolerance %.3g relative)",
                              k, obj[k], objref[k], otol);
                goto done;
            }
    }
    rc = wbcl_run_write_output(r, &zh);
done:
    wbcl_tensor_destroy(X);
    wbcl_tensor_destroy(D);
    wbcl_tensor_destroy(Z);
    wbcl_run_array_free(&xh);
    wbcl_run_array_free(&dh);
    wbcl_run_array_free(&zh);
    free(obj);
    free(xd);
    free(dd);
    free(zref);
    free(objref);
    return rc;
}

static const char *const lasso_params[] = {"steps", "lambd", "method", "threshold", "step", NULL};
const wbcl_run_module wbcl_mod_lasso = {
    "lasso",
    "sparse codes by T steps of ISTA or FISTA on lambda |Z|_1 + 1/2 |X - Z D^T|^2; prints the objective",
    "  --input X.npy          signals, rows (..., d)\n"
    "  --input D.npy          dictionary (d, m), stored as CRATE stores its weight (D z = z D^T on rows)\n"
    "  --param steps=T        number of steps (default 100)\n"
    "  --param lambd=L        sparsity weight (default 0.1, >= 0)\n"
    "  --param method=M       ista (default) or fista\n"
    "  --param threshold=T    soft (the LASSO; default) or relu (the non-negative LASSO)\n"
    "  --param step=S         step size (default 1/L, L = |D|_2^2 by power iteration)\n"
    "  --output Z.npy         the codes Z_T (..., m), from Z_0 = 0\n"
    "  --verify               against the double reference with the same step: Z normwise within\n"
    "                         8 sqrt(T (m + d)) 2^-24, each objective within 8 sqrt(m + d) 2^-24 more\n"
    "Prints `step objective` for steps 0..T (F(Z_0) first) on stdout.\n",
    lasso_params, NULL, 2, 2, WBCL_RUN_NONE, WBCL_RUN_OPTIONAL, 1, run_lasso};
