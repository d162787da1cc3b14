/* wbcl-run — helpers handed to modules: params, inputs, weights, outputs, verification. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "registry.h"

/* ---- reporting -------------------------------------------------------------------------------- */

int wbcl_run_fail(wbcl_run *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return 1;
}

int wbcl_run_check(wbcl_run *r, wbcl_status st)
{
    if (st == WBCL_SUCCESS) return 0;
    const char *msg = r->ctx ? wbcl_context_last_error(r->ctx) : "";
    if (msg && msg[0]) return wbcl_run_fail(r, "%s", msg);
    return wbcl_run_fail(r, "%s failed (%s)", r->mod ? r->mod->name : "wbcl", wbcl_status_name(st));
}

void wbcl_run_info(const wbcl_run *r, const char *fmt, ...)
{
    if (r->quiet) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

const char *wbcl_run_shape_str(char *buf, size_t len, int ndim, const size_t *shape)
{
    size_t n = 0;
    if (len == 0) return buf;
    buf[0] = '\0';
    n += (size_t)snprintf(buf + n, len - n, "(");
    for (int i = 0; i < ndim && n < len; i++) {
        n += (size_t)snprintf(buf + n, len - n, "%s%zu", i ? ", " : "", shape[i]);
    }
    if (n < len) snprintf(buf + n, len - n, ")");
    return buf;
}

/* As wbcl_run_shape_str, WBCL_RUN_ANY printed as '*'. */
static const char *expected_str(char *buf, size_t len, int ndim, const size_t *shape)
{
    size_t n = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < ndim && n < len; i++) {
        if (shape[i] == WBCL_RUN_ANY) n += (size_t)snprintf(buf + n, len - n, "%s*", i ? ", " : "");
        else n += (size_t)snprintf(buf + n, len - n, "%s%zu", i ? ", " : "", shape[i]);
    }
    if (n < len) snprintf(buf + n, len - n, ")");
    return buf;
}

/* ---- params ----------------------------------------------------------------------------------- */

const char *wbcl_run_param_str(const wbcl_run *r, const char *name)
{
    for (int i = 0; i < r->n_params; i++)
        if (!strcmp(r->params[i].name, name)) return r->params[i].value;
    return NULL;
}

const char *wbcl_run_option(const wbcl_run *r, const char *name)
{
    for (int i = 0; i < r->n_options; i++)
        if (!strcmp(r->options[i].name, name)) return r->options[i].value;
    return NULL;
}

/* Parses a finite double that fills the whole string. */
static int parse_double(wbcl_run *r, const char *name, const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (!s[0] || end == s || *end != '\0') return wbcl_run_fail(r, "--param %s=%s: not a number", name, s);
    if (!isfinite(v)) return wbcl_run_fail(r, "--param %s=%s: must be finite", name, s);
    if (errno == ERANGE && fabs(v) > 1.0) return wbcl_run_fail(r, "--param %s=%s: out of range", name, s);
    *out = v;
    return 0;
}

int wbcl_run_param_float(wbcl_run *r, const char *name, double def, double lo, double hi, float *out)
{
    const char *s = wbcl_run_param_str(r, name);
    double v = def;
    if (s) {
        if (parse_double(r, name, s, &v)) return 1;
        if (fabs(v) > FLT_MAX) return wbcl_run_fail(r, "--param %s=%s: out of float range", name, s);
        if (v < lo || v > hi) {
            if (lo == -HUGE_VAL) return wbcl_run_fail(r, "--param %s=%s: must be <= %g", name, s, hi);
            if (hi == HUGE_VAL) return wbcl_run_fail(r, "--param %s=%s: must be >= %g", name, s, lo);
            return wbcl_run_fail(r, "--param %s=%s: must be in [%g, %g]", name, s, lo, hi);
        }
    }
    *out = (float)v;
    return 0;
}

int wbcl_run_param_pos(wbcl_run *r, const char *name, double def, float *out)
{
    const char *s = wbcl_run_param_str(r, name);
    double v = def;
    if (s) {
        if (parse_double(r, name, s, &v)) return 1;
        if (fabs(v) > FLT_MAX) return wbcl_run_fail(r, "--param %s=%s: out of float range", name, s);
        if (!(v > 0.0) || (float)v == 0.0f) return wbcl_run_fail(r, "--param %s=%s: must be > 0", name, s);
    }
    *out = (float)v;
    return 0;
}

int wbcl_run_param_int(wbcl_run *r, const char *name, long def, long lo, long hi, long *out)
{
    const char *s = wbcl_run_param_str(r, name);
    long v = def;
    if (s) {
        char *end = NULL;
        errno = 0;
        v = strtol(s, &end, 10);
        if (!s[0] || end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi)
            return wbcl_run_fail(r, "--param %s=%s: must be an integer in [%ld, %ld]", name, s, lo, hi);
    }
    *out = v;
    return 0;
}

int wbcl_run_param_bool(wbcl_run *r, const char *name, int def, int *out)
{
    const char *s = wbcl_run_param_str(r, name);
    int v = def;
    if (s) {
        if (!strcmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on")) v = 1;
        else if (!strcmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off")) v = 0;
        else return wbcl_run_fail(r, "--param %s=%s: must be 0 or 1", name, s);
    }
    *out = v;
    return 0;
}

int wbcl_run_param_choice(wbcl_run *r, const char *name, const char *def, const char *const *choices,
                          const char **out)
{
    const char *s = wbcl_run_param_str(r, name);
    if (!s) {
        *out = def;
        return 0;
    }
    char list[512] = "";
    size_t n = 0;
    for (size_t i = 0; choices && choices[i]; i++) {
        if (!strcmp(s, choices[i])) {
            *out = choices[i];
            return 0;
        }
        if (n < sizeof list) n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", choices[i]);
    }
    return wbcl_run_fail(r, "--param %s=%s: must be one of %s", name, s, list);
}

/* ---- host arrays ------------------------------------------------------------------------------ */

void wbcl_run_array_free(wbcl_run_array *a)
{
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

int wbcl_run_array_alloc(wbcl_run *r, wbcl_run_array *a, int ndim, const size_t *shape)
{
    memset(a, 0, sizeof *a);
    if (ndim < 1 || ndim > WBCL_MAX_DIMS) return wbcl_run_fail(r, "internal: %d dimensions", ndim);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] && n > SIZE_MAX / sizeof(float) / shape[i]) return wbcl_run_fail(r, "array too large");
        n *= shape[i];
        a->shape[i] = shape[i];
    }
    a->ndim = ndim;
    a->numel = n;
    a->data = calloc(n ? n : 1, sizeof(float));
    if (!a->data) {
        memset(a, 0, sizeof *a);
        return wbcl_run_fail(r, "out of memory (%zu floats)", n);
    }
    return 0;
}

double *wbcl_run_to_f64(wbcl_run *r, const float *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    if (!d) {
        wbcl_run_fail(r, "out of memory (%zu doubles)", n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* Converts a wbcl_array read from `file` into a 1..4-D float array. `what` describes it. */
static int from_io_array(wbcl_run *r, const wbcl_array *src, const char *file, const char *what,
                         wbcl_run_array *out)
{
    char shp[160];
    memset(out, 0, sizeof *out);
    if (src->ndim < 1 || src->ndim > WBCL_MAX_DIMS)
        return src->ndim == 0
                   ? wbcl_run_fail(r, "%s: %s is a 0-d array (a scalar); wbcl-run needs 1 to %d dimensions", file, what,
                                   WBCL_MAX_DIMS)
                   : wbcl_run_fail(r, "%s: %s has %d dimensions %s; wbcl-run needs 1 to %d", file, what, src->ndim,
                                   wbcl_run_shape_str(shp, sizeof shp, src->ndim, src->shape), WBCL_MAX_DIMS);
    if (wbcl_array_numel(src) == 0)
        return wbcl_run_fail(r, "%s: %s has shape %s, which has no elements", file, what,
                             wbcl_run_shape_str(shp, sizeof shp, src->ndim, src->shape));
    char err[1024] = "";
    float *data = NULL;
    if (wbcl_array_to_f32(src, &data, err, sizeof err)) return wbcl_run_fail(r, "%s: %s", file, err);
    out->ndim = src->ndim;
    for (int i = 0; i < src->ndim; i++) out->shape[i] = src->shape[i];
    out->numel = wbcl_array_numel(src);
    out->data = data;
    return 0;
}

int wbcl_run_upload(wbcl_run *r, const wbcl_run_array *a, wbcl_tensor **dev)
{
    *dev = NULL;
    return wbcl_run_check(r, wbcl_tensor_create(r->ctx, a->ndim, a->shape, WBCL_F32, a->data, dev));
}

int wbcl_run_download(wbcl_run *r, const wbcl_tensor *t, wbcl_run_array *out)
{
    size_t shape[WBCL_MAX_DIMS];
    int nd = wbcl_tensor_ndim(t);
    for (int i = 0; i < nd; i++) shape[i] = wbcl_tensor_dim(t, i);
    if (wbcl_run_array_alloc(r, out, nd, shape)) return 1;
    if (wbcl_run_check(r, wbcl_tensor_read(r->ctx, t, out->data, out->numel))) {
        wbcl_run_array_free(out);
        return 1;
    }
    return 0;
}

/* Hands the host array to the caller and/or uploads it. */
static int deliver(wbcl_run *r, wbcl_run_array *a, wbcl_run_array *host, wbcl_tensor **dev)
{
    if (dev && wbcl_run_upload(r, a, dev)) {
        wbcl_run_array_free(a);
        return 1;
    }
    if (host) *host = *a;
    else wbcl_run_array_free(a);
    return 0;
}

/* ---- inputs ----------------------------------------------------------------------------------- */

const char *wbcl_run_rank_path(const wbcl_run *r, const char *path, char *buf, size_t len)
{
    const char *at = r->par && path ? strstr(path, "%r") : NULL;
    if (!at) return path;
    snprintf(buf, len, "%.*s%d%s", (int)(at - path), path, r->par->rank, at + 2);
    return buf;
}

/* wbcl-run-mpi: input 0 cut to this rank's contiguous share of the first axis. */
static int take_share(wbcl_run *r, const char *path, const char *what, wbcl_run_array *a)
{
    wbcl_run_par *p = r->par;
    p->begin = 0;
    p->count = a->shape[0];
    p->total = 0;
    if (p->per_rank_files) return 0;
    p->total = a->shape[0];
    if (p->size == 1) return 0;
    char s[96];
    if (a->ndim < p->split_ndim)
        return wbcl_run_fail(r, "%s: %s has shape %s; '%s' over %d ranks splits the first axis of a %d-D input",
                             path, what, wbcl_run_shape_str(s, sizeof s, a->ndim, a->shape), r->mod->name, p->size,
                             p->split_ndim);
    if (a->shape[0] < (size_t)p->size)
        return wbcl_run_fail(r, "%s: %s has %zu rows along its first axis, fewer than the %d ranks", path, what,
                             a->shape[0], p->size);
    /* contiguous shares in rank order, the first m % size ranks one row more (wbcl_mpi_shard) */
    const size_t m = a->shape[0], q = m / (size_t)p->size, extra = m % (size_t)p->size, rk = (size_t)p->rank;
    const size_t inner = a->numel / m, count = q + (rk < extra), begin = rk * q + (rk < extra ? rk : extra);
    memmove(a->data, a->data + begin * inner, count * inner * sizeof *a->data);
    a->shape[0] = count;
    a->numel = count * inner;
    p->begin = begin;
    p->count = count;
    return 0;
}

int wbcl_run_input(wbcl_run *r, int i, const char *what, wbcl_run_array *host, wbcl_tensor **dev)
{
    if (host) memset(host, 0, sizeof *host);
    if (dev) *dev = NULL;
    if (i < 0 || i >= r->n_inputs)
        return wbcl_run_fail(r, "module '%s' needs input %d (%s): give --input FILE.npy", r->mod->name, i + 1, what);
    char pbuf[4200];
    const char *path = wbcl_run_rank_path(r, r->inputs[i], pbuf, sizeof pbuf);
    if (r->par && i == 0) r->par->per_rank_files = path != r->inputs[i];
    wbcl_array arr;
    char err[1024] = "";
    if (wbcl_npy_read(path, &arr, err, sizeof err)) {
        if (!strstr(err, path)) return wbcl_run_fail(r, "%s: %s", path, err);
        return wbcl_run_fail(r, "%s", err);
    }
    wbcl_run_array a;
    int rc = from_io_array(r, &arr, path, what, &a);
    wbcl_array_free(&arr);
    if (rc) return 1;
    if (r->par && i == 0 && take_share(r, path, what, &a)) {
        wbcl_run_array_free(&a);
        return 1;
    }
    return deliver(r, &a, host, dev);
}

/* ---- weights ---------------------------------------------------------------------------------- */

static int open_weights(wbcl_run *r)
{
    if (r->weights) return 0;
    char err[2048] = "";
    if (wbcl_safetensors_open(r->weights_path, &r->weights, err, sizeof err)) {
        r->weights = NULL;
        if (!strstr(err, r->weights_path)) return wbcl_run_fail(r, "%s: %s", r->weights_path, err);
        return wbcl_run_fail(r, "%s", err);
    }
    return 0;
}

int wbcl_run_weight(wbcl_run *r, const char *key, int required, int ndim, const size_t *expected,
                    wbcl_run_array *host, wbcl_tensor **dev)
{
    if (host) memset(host, 0, sizeof *host);
    if (dev) *dev = NULL;
    if (!r->weights_path) {
        if (!required) return 0;
        return wbcl_run_fail(r, "module '%s' needs --weights FILE.safetensors (tensor '%s')", r->mod->name, key);
    }
    if (open_weights(r)) return 1;
    if (!wbcl_safetensors_has(r->weights, key)) {
        if (!required) return 0;
        char names[1024] = "";
        size_t n = 0, count = wbcl_safetensors_count(r->weights);
        for (size_t i = 0; i < count && i < 8 && n < sizeof names; i++)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s'%s'", i ? ", " : "",
                                  wbcl_safetensors_name(r->weights, i));
        if (count > 8 && n < sizeof names) snprintf(names + n, sizeof names - n, ", ... (%zu in all)", count);
        return wbcl_run_fail(r, "%s: missing tensor '%s' (the file has %s)", r->weights_path, key,
                             count ? names : "no tensors");
    }
    wbcl_array arr;
    char err[1024] = "";
    if (wbcl_safetensors_get(r->weights, key, &arr, err, sizeof err)) {
        if (!strstr(err, r->weights_path)) return wbcl_run_fail(r, "%s: %s", r->weights_path, err);
        return wbcl_run_fail(r, "%s", err);
    }
    if (expected) {
        int ok = arr.ndim == ndim;
        for (int i = 0; ok && i < ndim; i++)
            if (expected[i] != WBCL_RUN_ANY && expected[i] != arr.shape[i]) ok = 0;
        if (!ok) {
            char got[160], want[160];
            wbcl_run_fail(r, "%s: '%s' has shape %s, expected %s", r->weights_path, key,
                          wbcl_run_shape_str(got, sizeof got, arr.ndim, arr.shape),
                          expected_str(want, sizeof want, ndim, expected));
            wbcl_array_free(&arr);
            return 1;
        }
    }
    char what[300];
    snprintf(what, sizeof what, "tensor '%s'", key);
    wbcl_run_array a;
    int rc = from_io_array(r, &arr, r->weights_path, what, &a);
    wbcl_array_free(&arr);
    if (rc) return 1;
    /* refused as the library's loaders refuse them (wbcl_weight_load), after the float32
     * conversion (a float64 value that rounds to infinity in float32 counts as inf) */
    for (size_t i = 0; i < a.numel; i++)
        if (!isfinite(a.data[i])) {
            wbcl_run_fail(r, "%s: '%s' has a non-finite value (%g) at flat index %zu", r->weights_path, key,
                          (double)a.data[i], i);
            wbcl_run_array_free(&a);
            return 1;
        }
    return deliver(r, &a, host, dev);
}

/* ---- outputs ---------------------------------------------------------------------------------- */

int wbcl_run_write_output(wbcl_run *r, const wbcl_run_array *a)
{
    if (r->par) { /* gathered in rank order; rank 0 writes */
        wbcl_run_array full = {0};
        if (r->par->gather(r, a, &full)) return 1;
        int rc = 0;
        if (r->par->rank == 0) {
            wbcl_run_par *p = r->par;
            r->par = NULL;
            rc = wbcl_run_write_output(r, &full);
            r->par = p;
        }
        wbcl_run_array_free(&full);
        return rc;
    }
    char shp[160];
    wbcl_run_shape_str(shp, sizeof shp, a->ndim, a->shape);
    if (!r->output_path) {
        wbcl_run_info(r, "%s: result %s not saved (no --output)\n", r->mod->name, shp);
        return 0;
    }
    char err[2048] = "";
    if (wbcl_npy_write_f32(r->output_path, a->ndim, a->shape, a->data, err, sizeof err)) {
        if (!strstr(err, r->output_path)) return wbcl_run_fail(r, "%s: %s", r->output_path, err);
        return wbcl_run_fail(r, "%s", err);
    }
    wbcl_run_info(r, "wrote %s %s\n", r->output_path, shp);
    return 0;
}

int wbcl_run_write_output_tensor(wbcl_run *r, const wbcl_tensor *t)
{
    wbcl_run_array a;
    if (wbcl_run_download(r, t, &a)) return 1;
    int rc = wbcl_run_write_output(r, &a);
    wbcl_run_array_free(&a);
    return rc;
}

/* ---- verification ----------------------------------------------------------------------------- */

wbcl_run_err wbcl_run_compare(const float *got, const double *want, size_t n, double scale)
{
    wbcl_run_err e = {0.0, 0.0, 0};
    double wmax = 0.0;
    for (size_t i = 0; i < n; i++) {
        double w = want[i], g = got[i], d;
        if (isfinite(w)) {
            if (fabs(w) > wmax) wmax = fabs(w);
            d = isfinite(g) ? fabs(g - w) : HUGE_VAL;
        } else {
            d = (isnan(w) ? isnan(g) : g == w) ? 0.0 : HUGE_VAL;
        }
        if (d > e.max_abs) {
            e.max_abs = d;
            e.worst = i;
        }
    }
    if (!(scale > 0.0)) scale = wmax;
    if (e.max_abs == 0.0) e.max_rel = 0.0;
    else e.max_rel = scale > 0.0 ? e.max_abs / scale : HUGE_VAL;
    return e;
}

wbcl_run_err wbcl_run_compare_rows(const float *got, const double *want, size_t rows, size_t cols,
                                   const double *row_scale)
{
    wbcl_run_err e = {0.0, 0.0, 0};
    for (size_t i = 0; i < rows; i++) {
        wbcl_run_err ei = wbcl_run_compare(got + i * cols, want + i * cols, cols, row_scale ? row_scale[i] : 0.0);
        if (ei.max_abs > e.max_abs) e.max_abs = ei.max_abs;
        if (ei.max_rel > e.max_rel || (i == 0)) {
            e.max_rel = ei.max_rel;
            e.worst = i * cols + ei.worst;
        }
    }
    return e;
}

int wbcl_run_verify_err(wbcl_run *r, const wbcl_run_err *e, const float *got, const double *want, double tol)
{
    int ok = e->max_rel <= tol;
    if (!ok || !r->quiet)
        printf("verify: max abs err %.3g, max rel err %.3g (tolerance %.3g): %s\n", e->max_abs, e->max_rel, tol,
               ok ? "ok" : "FAIL");
    if (ok) return 0;
    return wbcl_run_fail(r, "verify failed: max rel err %.3g exceeds the tolerance %.3g (element %zu: got %.9g, "
                            "reference %.9g)",
                         e->max_rel, tol, e->worst, (double)got[e->worst], want[e->worst]);
}

int wbcl_run_verify(wbcl_run *r, const float *got, const double *want, size_t n, double scale, double tol)
{
    wbcl_run_err e = wbcl_run_compare(got, want, n, scale);
    return wbcl_run_verify_err(r, &e, got, want, tol);
}
