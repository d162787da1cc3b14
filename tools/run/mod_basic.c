/* wbcl-run — basic modules: layernorm, gelu, softmax, gemm, and `check` (every basic op and both
 * GEMM backends on the selected device against the double-precision references).
 *
 * Verification tolerances are bounds on float32 rounding, in units of u = 2^-24, measured
 * against the magnitude the rounding error is proportional to (so they hold for any data):
 *   gemm        |C - ref| <= (2k + 8) u * (|alpha| |A||B| + |beta| |C0|)   (gamma_k of a length-k dot
 *               product, doubled for safety, plus alpha/beta roundings), normwise over C;
 *   layernorm   per row, relative to max_i |gamma_i| (|x_i| + |mean|) / sigma + |beta_i|: the mean
 *               and variance are length-d sums ((2d + 32) u);
 *   softmax     per row, relative to the row's largest output: a length-d sum of exps, each a few
 *               ulps ((2d + 32) u);
 *   gelu        per element, relative to |x|: 0.5 x (1 + erf(x/sqrt 2)) with erf within 16 ulps (64 u);
 *   add         one rounding (2 u) of |a| + |b|; reductions (2n + 8) u of the sum of |x| (max: exact).
 * A wrong element, a missed term or a wrong index gives errors orders of magnitude above these. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "registry.h"

#define U WBCL_RUN_U32

static double tol_rowsum(size_t d) { return (2.0 * (double)d + 32.0) * U; }
static double tol_gemm(size_t k) { return (2.0 * (double)k + 8.0) * U; }
#define TOL_GELU (64.0 * U)
#define TOL_ADD (2.0 * U)
static double tol_reduce(int op, size_t n) { return op == WBCL_REDUCE_MAX ? 2.0 * U : (2.0 * (double)n + 8.0) * U; }

/* Rows of a tensor viewed as (R, d), d the last dimension. */
static size_t last_dim(const wbcl_run_array *a) { return a->shape[a->ndim - 1]; }

/* ---- reference scales ------------------------------------------------------------------------- */

/* Per-row layernorm scale (see the header comment); g/b may be NULL. */
static void layernorm_scale(size_t rows, size_t d, const float *x, const float *g, const float *b, double eps,
                            double *scale)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        double mu = 0.0, var = 0.0, s = 0.0;
        for (size_t i = 0; i < d; i++) mu += xr[i];
        mu /= (double)d;
        for (size_t i = 0; i < d; i++) var += (xr[i] - mu) * (xr[i] - mu);
        var /= (double)d;
        double sigma = sqrt(var + eps);
        for (size_t i = 0; i < d; i++) {
            double v = (g ? fabs(g[i]) : 1.0) * (fabs(xr[i]) + fabs(mu)) / sigma + (b ? fabs(b[i]) : 0.0);
            if (v > s) s = v;
        }
        scale[r] = s;
    }
}

/* ---- layernorm -------------------------------------------------------------------------------- */

static int run_layernorm(wbcl_run *r)
{
    float eps;
    if (wbcl_run_param_pos(r, "eps", 1e-5, &eps)) return 1;
    wbcl_run_array xh = {0}, gh = {0}, bh = {0}, yh = {0};
    wbcl_tensor *x = NULL, *g = NULL, *b = NULL, *y = NULL;
    double *xd = NULL, *gd = NULL, *bd = NULL, *want = NULL, *scale = NULL;
    int rc = 1;
    if (wbcl_run_input(r, 0, "x", &xh, &x)) goto done;
    size_t d = last_dim(&xh), rows = xh.numel / d;
    /* nn.LayerNorm's state_dict: 'weight' whenever it is affine, 'bias' unless bias=False */
    if (wbcl_run_weight(r, "weight", r->weights_path ? 1 : 0, 1, &d, &gh, &g)) goto done;
    if (wbcl_run_weight(r, "bias", 0, 1, &d, &bh, &b)) goto done;
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, xh.ndim, xh.shape, WBCL_F32, NULL, &y))) goto done;
    if (wbcl_run_check(r, wbcl_layernorm(r->ctx, x, g, b, eps, y))) goto done;
    if (wbcl_run_download(r, y, &yh)) goto done;
    if (r->verify) {
        if (!(xd = wbcl_run_to_f64(r, xh.data, xh.numel))) goto done;
        if (gh.data && !(gd = wbcl_run_to_f64(r, gh.data, d))) goto done;
        if (bh.data && !(bd = wbcl_run_to_f64(r, bh.data, d))) goto done;
        want = malloc(xh.numel * sizeof *want);
        scale = malloc(rows * sizeof *scale);
        if (!want || !scale) {
            wbcl_run_fail(r, "out of memory");
            goto done;
        }
        wbcl_ref_layernorm(rows, d, xd, gd, bd, (double)eps, want);
        layernorm_scale(rows, d, xh.data, gh.data, bh.data, (double)eps, scale);
        wbcl_run_err e = wbcl_run_compare_rows(yh.data, want, rows, d, scale);
        if (wbcl_run_verify_err(r, &e, yh.data, want, tol_rowsum(d))) goto done;
    }
    rc = wbcl_run_write_output(r, &yh);
done:
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(g);
    wbcl_tensor_destroy(b);
    wbcl_tensor_destroy(y);
    wbcl_run_array_free(&xh);
    wbcl_run_array_free(&gh);
    wbcl_run_array_free(&bh);
    wbcl_run_array_free(&yh);
    free(xd);
    free(gd);
    free(bd);
    free(want);
    free(scale);
    return rc;
}

static const char *const layernorm_params[] = {"eps", NULL};
const wbcl_run_module wbcl_mod_layernorm = {
    "layernorm",
    "layer normalization over the last dimension (PyTorch nn.LayerNorm)",
    "  --input X.npy          x, shape (..., d)\n"
    "  --weights W            optional nn.LayerNorm state_dict: 'weight' (d) and, unless bias=False,\n"
    "                         'bias' (d); without --weights gamma = 1, beta = 0\n"
    "  --param eps=E          added to the variance (default 1e-5, > 0)\n"
    "  --output Y.npy         y, shape of x: (x - mean) / sqrt(var + eps) * weight + bias\n"
    "  --verify               per row, relative to max |weight| (|x| + |mean|) / sigma + |bias|;\n"
    "                         tolerance (2d + 32) 2^-24\n",
    layernorm_params, NULL, 1, 1, WBCL_RUN_OPTIONAL, WBCL_RUN_OPTIONAL, 1, run_layernorm};

/* ---- gelu and softmax ------------------------------------------------------------------------- */

static int run_unary(wbcl_run *r, int softmax)
{
    wbcl_run_array xh = {0}, yh = {0};
    wbcl_tensor *x = NULL, *y = NULL;
    double *xd = NULL, *want = NULL, *scale = NULL;
    int rc = 1;
    if (wbcl_run_input(r, 0, "x", &xh, &x)) goto done;
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, xh.ndim, xh.shape, WBCL_F32, NULL, &y))) goto done;
    if (wbcl_run_check(r, softmax ? wbcl_softmax(r->ctx, x, y) : wbcl_gelu(r->ctx, x, y))) goto done;
    if (wbcl_run_download(r, y, &yh)) goto done;
    if (r->verify) {
        size_t d = last_dim(&xh), rows = xh.numel / d;
        if (!(xd = wbcl_run_to_f64(r, xh.data, xh.numel))) goto done;
        want = malloc(xh.numel * sizeof *want);
        scale = malloc(xh.numel * sizeof *scale);
        if (!want || !scale) {
            wbcl_run_fail(r, "out of memory");
            goto done;
        }
        wbcl_run_err e;
        double tol;
        if (softmax) {
            wbcl_ref_softmax(rows, d, xd, want);
            e = wbcl_run_compare_rows(yh.data, want, rows, d, NULL);
            tol = tol_rowsum(d);
        } else {
            wbcl_ref_gelu(xh.numel, xd, want);
            for (size_t i = 0; i < xh.numel; i++) scale[i] = fabs(xd[i]);
            e = wbcl_run_compare_rows(yh.data, want, xh.numel, 1, scale);
            tol = TOL_GELU;
        }
        if (wbcl_run_verify_err(r, &e, yh.data, want, tol)) goto done;
    }
    rc = wbcl_run_write_output(r, &yh);
done:
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(y);
    wbcl_run_array_free(&xh);
    wbcl_run_array_free(&yh);
    free(xd);
    free(want);
    free(scale);
    return rc;
}

static int run_gelu(wbcl_run *r) { return run_unary(r, 0); }
static int run_softmax(wbcl_run *r) { return run_unary(r, 1); }

const wbcl_run_module wbcl_mod_gelu = {
    "gelu",
    "exact GELU, x * Phi(x) (PyTorch's default nn.GELU)",
    "  --input X.npy          x, any shape\n"
    "  --output Y.npy         y = 0.5 x (1 + erf(x / sqrt 2)), shape of x\n"
    "  --verify               per element, relative to |x|; tolerance 64 2^-24\n",
    NULL, NULL, 1, 1, WBCL_RUN_NONE, WBCL_RUN_OPTIONAL, 1, run_gelu};

const wbcl_run_module wbcl_mod_softmax = {
    "softmax",
    "softmax over the last dimension (max-subtracted)",
    "  --input X.npy          x, shape (..., d)\n"
    "  --output Y.npy         y, shape of x, each row sums to 1\n"
    "  --verify               per row, relative to the row's largest value; tolerance (2d + 32) 2^-24\n",
    NULL, NULL, 1, 1, WBCL_RUN_NONE, WBCL_RUN_OPTIONAL, 1, run_softmax};

/* ---- gemm ------------------------------------------------------------------------------------- */

/* max over the batch of (|A||B|)_ij, the magnitude a dot product's rounding error scales with. */
static double gemm_abs_scale(int ta, int tb, size_t batch, size_t m, size_t n, size_t k, const double *A,
                             size_t stride_a, const double *B, size_t stride_b, double *tmp)
{
    double s = 0.0;
    size_t lda = ta ? m : k, ldb = tb ? k : n;
    size_t na = stride_a ? batch * stride_a : m * k, nb = stride_b ? batch * stride_b : k * n;
    double *Aa = malloc(na * sizeof *Aa), *Ba = malloc(nb * sizeof *Ba);
    if (!Aa || !Ba) {
        free(Aa);
        free(Ba);
        return -1.0;
    }
    for (size_t i = 0; i < na; i++) Aa[i] = fabs(A[i]);
    for (size_t i = 0; i < nb; i++) Ba[i] = fabs(B[i]);
    for (size_t b = 0; b < batch; b++) {
        wbcl_ref_gemm(ta, tb, m, n, k, 1.0, Aa + b * stride_a, lda, Ba + b * stride_b, ldb, 0.0, tmp, n);
        for (size_t i = 0; i < m * n; i++)
            if (tmp[i] > s) s = tmp[i];
    }
    free(Aa);
    free(Ba);
    return s;
}

static int run_gemm(wbcl_run *r)
{
    int ta, tb;
    float alpha;
    if (wbcl_run_param_bool(r, "ta", 0, &ta) || wbcl_run_param_bool(r, "tb", 0, &tb) ||
        wbcl_run_param_float(r, "alpha", 1.0, -HUGE_VAL, HUGE_VAL, &alpha))
        return 1;
    wbcl_run_array ah = {0}, bh = {0}, ch = {0};
    wbcl_tensor *A = NULL, *B = NULL, *C = NULL;
    double *ad = NULL, *bd = NULL, *want = NULL, *tmp = NULL;
    int rc = 1;
    char shp[160];
    if (wbcl_run_input(r, 0, "A", &ah, &A)) goto done;
    if (wbcl_run_input(r, 1, "B", &bh, &B)) goto done;
    if (ah.ndim < 2 || bh.ndim < 2) {
        const wbcl_run_array *v = ah.ndim < 2 ? &ah : &bh;
        wbcl_run_fail(r, "gemm: %s (%s) has shape %s; A and B must be matrices (2-D) or batches of them (3-D, 4-D)",
                      ah.ndim < 2 ? "A" : "B", r->inputs[ah.ndim < 2 ? 0 : 1],
                      wbcl_run_shape_str(shp, sizeof shp, v->ndim, v->shape));
        goto done;
    }
    size_t m = ah.shape[ah.ndim - (ta ? 1 : 2)], k = ah.shape[ah.ndim - (ta ? 2 : 1)];
    size_t n = bh.shape[bh.ndim - (tb ? 2 : 1)];
    /* C = batch dimensions (of A if it has them, else of B) + (m, n); the library checks the rest */
    const wbcl_run_array *bat = ah.ndim > 2 ? &ah : &bh;
    size_t cshape[WBCL_MAX_DIMS];
    int cnd = bat->ndim;
    for (int i = 0; i < cnd - 2; i++) cshape[i] = bat->shape[i];
    cshape[cnd - 2] = m;
    cshape[cnd - 1] = n;
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, cnd, cshape, WBCL_F32, NULL, &C))) goto done;
    if (wbcl_run_check(r, wbcl_gemm(r->ctx, ta ? WBCL_TRANS : WBCL_NO_TRANS, tb ? WBCL_TRANS : WBCL_NO_TRANS, alpha,
                                    A, B, 0.0f, C)))
        goto done;
    if (wbcl_run_download(r, C, &ch)) goto done;
    if (r->verify) {
        size_t batch = ch.numel / (m * n);
        size_t sa = ah.ndim > 2 ? m * k : 0, sb = bh.ndim > 2 ? k * n : 0;
        if (!(ad = wbcl_run_to_f64(r, ah.data, ah.numel)) || !(bd = wbcl_run_to_f64(r, bh.data, bh.numel))) goto done;
        want = malloc(ch.numel * sizeof *want);
        tmp = malloc(m * n * sizeof *tmp);
        if (!want || !tmp) {
            wbcl_run_fail(r, "out of memory");
            goto done;
        }
        for (size_t b = 0; b < batch; b++)
            wbcl_ref_gemm(ta, tb, m, n, k, alpha, ad + b * sa, ta ? m : k, bd + b * sb, tb ? k : n, 0.0,
                          want + b * m * n, n);
        double scale = gemm_abs_scale(ta, tb, batch, m, n, k, ad, sa, bd, sb, tmp);
        if (scale < 0.0) {
            wbcl_run_fail(r, "out of memory");
            goto done;
        }
        scale *= fabs((double)alpha); /* 0 (a zero product): any difference is an error */
        wbcl_run_err e = wbcl_run_compare(ch.data, want, ch.numel, scale > 0 ? scale : 1e-300);
        if (wbcl_run_verify_err(r, &e, ch.data, want, tol_gemm(k))) goto done;
    }
    rc = wbcl_run_write_output(r, &ch);
done:
    wbcl_tensor_destroy(A);
    wbcl_tensor_destroy(B);
    wbcl_tensor_destroy(C);
    wbcl_run_array_free(&ah);
    wbcl_run_array_free(&bh);
    wbcl_run_array_free(&ch);
    free(ad);
    free(bd);
    free(want);
    free(tmp);
    return rc;
}

static const char *const gemm_params[] = {"ta", "tb", "alpha", NULL};
const wbcl_run_module wbcl_mod_gemm = {
    "gemm",
    "matrix product C = alpha op(A) op(B), batched over leading dimensions",
    "  --input A.npy          A, stored (m, k), or (k, m) with ta=1; leading batch dimensions allowed\n"
    "  --input B.npy          B, stored (k, n), or (n, k) with tb=1; a B without batch dimensions is\n"
    "                         shared by every batch entry of A (a weight matrix)\n"
    "  --param ta=0|1         transpose A (default 0)\n"
    "  --param tb=0|1         transpose B (default 0)\n"
    "  --param alpha=X        scale (default 1)\n"
    "  --output C.npy         C, shape (batch..., m, n)\n"
    "  --verify               relative to max |alpha| (|A||B|)_ij; tolerance (2k + 8) 2^-24\n"
    "The backend (wbcl's packed kernel or CLBlast) is the device's default (see wbcl-info).\n",
    gemm_params, NULL, 2, 2, WBCL_RUN_NONE, WBCL_RUN_OPTIONAL, 1, run_gemm};

/* ---- check ------------------------------------------------------------------------------------ */

typedef struct ck_rng {
    uint64_t s;
} ck_rng;

static double ck_uniform(ck_rng *g, double lo, double hi)
{
    g->s ^= g->s >> 12;
    g->s ^= g->s << 25;
    g->s ^= g->s >> 27;
    uint64_t v = g->s * 0x2545F4914F6CDD1DULL;
    return lo + (hi - lo) * ((double)(v >> 11) * (1.0 / 9007199254740992.0));
}

static float *ck_random(ck_rng *g, size_t n, double lo, double hi)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (p)
        for (size_t i = 0; i < n; i++) p[i] = (float)ck_uniform(g, lo, hi);
    return p;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

typedef struct ck_state {
    wbcl_run *r;
    ck_rng rng;
    int cases, failed;
} ck_state;

/* One table row. status: 0 ok, 1 FAIL (beyond tolerance), 2 ERROR (the call failed: msg). */
static void ck_row(ck_state *s, const char *op, const char *shape, const char *variant, double rel, double tol,
                   double ms, int status, const char *msg)
{
    s->cases++;
    if (status) s->failed++;
    if (s->r->quiet && !status) return;
    if (status == 2) printf("%-17s %-18s %-8s %12s %10.2g  %-5s %9s\n", op, shape, variant, "-", tol, "ERROR", "-");
    else printf("%-17s %-18s %-8s %12.3g %10.2g  %-5s %9.3f\n", op, shape, variant, rel, tol, status ? "FAIL" : "ok", ms);
    if (msg && msg[0]) printf("    %s\n", msg);
    fflush(stdout);
}

enum { CK_LAYERNORM, CK_GELU, CK_SOFTMAX, CK_ADD, CK_REDUCE_ROWS, CK_REDUCE_COLS };
static const char *const ck_reduce_names[] = {"sum", "mean", "max", "sumsq"};

static wbcl_status ck_call(wbcl_context *ctx, int op, int red, const wbcl_tensor *x, const wbcl_tensor *g,
                           const wbcl_tensor *b, wbcl_tensor *y)
{
    switch (op) {
    case CK_LAYERNORM: return wbcl_layernorm(ctx, x, g, b, 1e-5f, y);
    case CK_GELU: return wbcl_gelu(ctx, x, y);
    case CK_SOFTMAX: return wbcl_softmax(ctx, x, y);
    case CK_ADD: return wbcl_add(ctx, x, b, y);
    case CK_REDUCE_ROWS: return wbcl_reduce_rows(ctx, (wbcl_reduce_op)red, x, y);
    default: return wbcl_reduce_cols(ctx, (wbcl_reduce_op)red, x, y);
    }
}

/* Runs op on random (rows, cols) data with kernel variant var: a warm-up call (builds the
 * program), then a timed one whose result is compared with the reference. */
static void ck_op(ck_state *s, int op, int red, size_t rows, size_t cols, wbcl_variant var)
{
    wbcl_context *ctx = s->r->ctx;
    char opname[32], shape[48];
    const char *vname = var == WBCL_VARIANT_CPU ? "cpu" : "gpu";
    static const char *const names[] = {"layernorm", "gelu", "softmax", "add", "reduce_rows", "reduce_cols"};
    if (op >= CK_REDUCE_ROWS) snprintf(opname, sizeof opname, "%s.%s", names[op], ck_reduce_names[red]);
    else snprintf(opname, sizeof opname, "%s", names[op]);
    snprintf(shape, sizeof shape, "(%zu, %zu)", rows, cols);
    size_t n = rows * cols, ny = op == CK_REDUCE_ROWS ? rows : op == CK_REDUCE_COLS ? cols : n;
    double lo = -1.0, hi = 1.0;
    if (op == CK_LAYERNORM) lo = -2.0, hi = 3.0;
    if (op == CK_GELU) lo = -6.0, hi = 6.0;
    if (op == CK_SOFTMAX) lo = -10.0, hi = 10.0;
    float *x = ck_random(&s->rng, n, lo, hi);
    float *g = ck_random(&s->rng, cols, 0.5, 1.5), *b = ck_random(&s->rng, cols, -0.5, 0.5);
    float *got = malloc(ny * sizeof *got);
    double *xd = malloc(n * sizeof *xd), *want = malloc(ny * sizeof *want), *scale = malloc(ny * sizeof *scale);
    double *gd = malloc(cols * sizeof *gd), *bd = malloc(cols * sizeof *bd);
    wbcl_tensor *X = NULL, *G = NULL, *B = NULL, *Y = NULL;
    double tol = op == CK_LAYERNORM || op == CK_SOFTMAX ? tol_rowsum(cols)
               : op == CK_GELU ? TOL_GELU : op == CK_ADD ? TOL_ADD
               : tol_reduce(red, op == CK_REDUCE_ROWS ? cols : rows);
    if (!x || !g || !b || !got || !xd || !want || !scale || !gd || !bd) {
        ck_row(s, opname, shape, vname, 0, tol, 0, 2, "out of host memory");
        goto done;
    }
    size_t xs[2] = {rows, cols}, ys[2] = {rows, cols}, vs[1] = {cols};
    int ynd = 2;
    if (op == CK_REDUCE_ROWS || op == CK_REDUCE_COLS) ynd = 1, ys[0] = ny;
    wbcl_status st = wbcl_context_set_variant(ctx, var);
    if (!st) st = wbcl_tensor_create(ctx, 2, xs, WBCL_F32, x, &X);
    if (!st) st = wbcl_tensor_create(ctx, 1, vs, WBCL_F32, g, &G);
    if (!st) st = wbcl_tensor_create(ctx, 1, vs, WBCL_F32, b, &B);
    if (!st) st = wbcl_tensor_create(ctx, ynd, ys, WBCL_F32, NULL, &Y);
    if (!st) st = ck_call(ctx, op, red, X, G, B, Y);
    if (!st) st = wbcl_context_finish(ctx);
    double t0 = now_ms();
    if (!st) st = ck_call(ctx, op, red, X, G, B, Y);
    if (!st) st = wbcl_context_finish(ctx);
    double ms = now_ms() - t0;
    if (!st) st = wbcl_tensor_read(ctx, Y, got, ny);
    if (st) {
        ck_row(s, opname, shape, vname, 0, tol, 0, 2, wbcl_context_last_error(ctx));
        goto done;
    }
    for (size_t i = 0; i < n; i++) xd[i] = x[i];
    for (size_t i = 0; i < cols; i++) gd[i] = g[i], bd[i] = b[i];
    wbcl_run_err e;
    if (op == CK_LAYERNORM) {
        wbcl_ref_layernorm(rows, cols, xd, gd, bd, 1e-5f, want);
        layernorm_scale(rows, cols, x, g, b, 1e-5f, scale);
        e = wbcl_run_compare_rows(got, want, rows, cols, scale);
    } else if (op == CK_SOFTMAX) {
        wbcl_ref_softmax(rows, cols, xd, want);
        e = wbcl_run_compare_rows(got, want, rows, cols, NULL);
    } else if (op == CK_GELU) {
        wbcl_ref_gelu(n, xd, want);
        for (size_t i = 0; i < n; i++) scale[i] = fabs(xd[i]);
        e = wbcl_run_compare_rows(got, want, n, 1, scale);
    } else if (op == CK_ADD) {
        for (size_t i = 0; i < n; i++) want[i] = xd[i] + bd[i % cols], scale[i] = fabs(xd[i]) + fabs(bd[i % cols]);
        e = wbcl_run_compare_rows(got, want, n, 1, scale);
    } else {
        int rows_op = op == CK_REDUCE_ROWS;
        (rows_op ? wbcl_ref_reduce_rows : wbcl_ref_reduce_cols)(red, rows, cols, xd, want);
        /* scale: the same reduction of |x| (sum, mean, sumsq: the sum of the magnitudes; max: max |x|) */
        for (size_t i = 0; i < n; i++) xd[i] = fabs(xd[i]);
        (rows_op ? wbcl_ref_reduce_rows : wbcl_ref_reduce_cols)(red, rows, cols, xd, scale);
        e = wbcl_run_compare_rows(got, want, ny, 1, scale);
    }
    ck_row(s, opname, shape, vname, e.max_rel, tol, ms, e.max_rel <= tol ? 0 : 1, NULL);
done:
    wbcl_tensor_destroy(X);
    wbcl_tensor_destroy(G);
    wbcl_tensor_destroy(B);
    wbcl_tensor_destroy(Y);
    free(x);
    free(g);
    free(b);
    free(got);
    free(xd);
    free(want);
    free(scale);
    free(gd);
    free(bd);
}

/* C (batch, m, n) = alpha op(A) op(B) + beta C0 with A (batch, ...) and a shared B, on a backend. */
static void ck_gemm(ck_state *s, wbcl_gemm_backend be, size_t batch, size_t m, size_t n, size_t k, int ta, int tb,
                    float alpha, float beta)
{
    wbcl_context *ctx = s->r->ctx;
    char shape[48], opname[32];
    const char *vname = be == WBCL_GEMM_PACKED ? "packed" : "clblast";
    snprintf(opname, sizeof opname, "gemm %c%c%s", ta ? 'T' : 'N', tb ? 'T' : 'N', beta != 0.0f ? " +C" : "");
    if (batch > 1) snprintf(shape, sizeof shape, "%zux%zux%zu b%zu", m, n, k, batch);
    else snprintf(shape, sizeof shape, "%zux%zux%zu", m, n, k);
    double tol = tol_gemm(k);
    size_t na = batch * m * k, nb = k * n, nc = batch * m * n;
    float *a = ck_random(&s->rng, na, -1, 1), *b = ck_random(&s->rng, nb, -1, 1), *c0 = ck_random(&s->rng, nc, -1, 1);
    float *got = malloc(nc * sizeof *got);
    double *ad = malloc(na * sizeof *ad), *bd = malloc(nb * sizeof *bd), *want = malloc(nc * sizeof *want);
    double *tmp = malloc(m * n * sizeof *tmp);
    wbcl_tensor *A = NULL, *B = NULL, *C = NULL;
    if (!a || !b || !c0 || !got || !ad || !bd || !want || !tmp) {
        ck_row(s, opname, shape, vname, 0, tol, 0, 2, "out of host memory");
        goto done;
    }
    size_t as[3] = {batch, ta ? k : m, ta ? m : k}, bs[2] = {tb ? n : k, tb ? k : n}, cs[3] = {batch, m, n};
    int bnd = batch > 1 ? 3 : 2;
    wbcl_transpose TA = ta ? WBCL_TRANS : WBCL_NO_TRANS, TB = tb ? WBCL_TRANS : WBCL_NO_TRANS;
    wbcl_status st = wbcl_context_set_gemm_backend(ctx, be);
    if (!st) st = wbcl_tensor_create(ctx, bnd, as + (3 - bnd), WBCL_F32, a, &A);
    if (!st) st = wbcl_tensor_create(ctx, 2, bs, WBCL_F32, b, &B);
    if (!st) st = wbcl_tensor_create(ctx, bnd, cs + (3 - bnd), WBCL_F32, c0, &C);
    if (!st) st = wbcl_gemm(ctx, TA, TB, alpha, A, B, beta, C);
    if (!st) st = wbcl_tensor_write(ctx, C, c0, nc); /* back to C0 for the timed call */
    if (!st) st = wbcl_context_finish(ctx);
    double t0 = now_ms();
    if (!st) st = wbcl_gemm(ctx, TA, TB, alpha, A, B, beta, C);
    if (!st) st = wbcl_context_finish(ctx);
    double ms = now_ms() - t0;
    if (!st) st = wbcl_tensor_read(ctx, C, got, nc);
    if (st) {
        ck_row(s, opname, shape, vname, 0, tol, 0, 2, wbcl_context_last_error(ctx));
        goto done;
    }
    for (size_t i = 0; i < na; i++) ad[i] = a[i];
    for (size_t i = 0; i < nb; i++) bd[i] = b[i];
    double c0max = 0.0;
    for (size_t i = 0; i < nc; i++) {
        want[i] = c0[i];
        if (fabs(c0[i]) > c0max) c0max = fabs(c0[i]);
    }
    for (size_t p = 0; p < batch; p++)
        wbcl_ref_gemm(ta, tb, m, n, k, alpha, ad + p * m * k, ta ? m : k, bd, tb ? k : n, beta, want + p * m * n, n);
    double scale = gemm_abs_scale(ta, tb, batch, m, n, k, ad, m * k, bd, 0, tmp);
    scale = fabs((double)alpha) * scale + fabs((double)beta) * c0max;
    wbcl_run_err e = wbcl_run_compare(got, want, nc, scale > 0 ? scale : 1e-300);
    ck_row(s, opname, shape, vname, e.max_rel, tol, ms, e.max_rel <= tol ? 0 : 1, NULL);
done:
    wbcl_tensor_destroy(A);
    wbcl_tensor_destroy(B);
    wbcl_tensor_destroy(C);
    free(a);
    free(b);
    free(c0);
    free(got);
    free(ad);
    free(bd);
    free(want);
    free(tmp);
}

static int run_check(wbcl_run *r)
{
    long seed, size;
    if (wbcl_run_param_int(r, "seed", 1, 0, 0x7fffffffL, &seed) ||
        wbcl_run_param_int(r, "size", 256, 1, 4096, &size))
        return 1;
    ck_state s = {r, {0x9E3779B97F4A7C15ULL ^ ((uint64_t)seed * 0xD1B54A32D192ED03ULL)}, 0, 0};
    if (s.rng.s == 0) s.rng.s = 1;
    const wbcl_device_info *d = wbcl_context_device(r->ctx);
    wbcl_variant var0 = wbcl_context_variant(r->ctx);
    wbcl_gemm_backend be0 = wbcl_context_gemm_backend(r->ctx);
    if (!r->quiet) {
        printf("wbcl-run check on device %zu (%u:%u) '%s' (%s), platform '%s', driver %s, %s\n", d->index,
               d->platform_index, d->device_index, d->name, wbcl_device_type_name(d->type), d->platform_name,
               d->driver_version, d->device_version);
        printf("every op against the double-precision reference; seed %ld, big size %ld; gemm shape m x n x k\n",
               seed, size);
        printf("%-17s %-18s %-8s %12s %10s  %-5s %9s\n", "op", "shape", "variant", "max rel err", "tolerance",
               "", "ms");
        fflush(stdout);
    }
    size_t S = (size_t)size;
    /* GEMM: the packed kernel at 1, odd sizes (not multiples of the register tile), a batch with a
     * shared B, transposes with beta, and the big case; CLBlast on small cases only (its first call
     * per shape class compiles for seconds on CPU devices). */
    ck_gemm(&s, WBCL_GEMM_PACKED, 1, 1, 1, 1, 0, 0, 1.0f, 0.0f);
    ck_gemm(&s, WBCL_GEMM_PACKED, 1, 37, 41, 43, 0, 0, 1.0f, 0.0f);
    ck_gemm(&s, WBCL_GEMM_PACKED, 1, 37, 41, 43, 1, 1, 0.75f, 0.5f);
    ck_gemm(&s, WBCL_GEMM_PACKED, 3, 37, 41, 43, 0, 1, 1.0f, 0.0f);
    ck_gemm(&s, WBCL_GEMM_PACKED, 1, S, S, S, 0, 0, 1.0f, 0.0f);
    ck_gemm(&s, WBCL_GEMM_CLBLAST, 1, 37, 41, 43, 0, 0, 1.0f, 0.0f);
    ck_gemm(&s, WBCL_GEMM_CLBLAST, 1, 37, 41, 43, 1, 0, 0.75f, 0.5f);
    /* Row ops and reductions, in both kernel variants, on an odd small shape and the big one. */
    static const wbcl_variant variants[] = {WBCL_VARIANT_CPU, WBCL_VARIANT_GPU};
    for (int v = 0; v < 2; v++) {
        for (int op = CK_LAYERNORM; op <= CK_REDUCE_COLS; op++) {
            int red = WBCL_REDUCE_SUM;
            ck_op(&s, op, red, 37, 129, variants[v]);
            ck_op(&s, op, red, S, S + 1, variants[v]);
        }
        ck_op(&s, CK_REDUCE_ROWS, WBCL_REDUCE_MEAN, 37, 129, variants[v]);
        ck_op(&s, CK_REDUCE_ROWS, WBCL_REDUCE_MAX, 37, 129, variants[v]);
        ck_op(&s, CK_REDUCE_COLS, WBCL_REDUCE_SUMSQ, 37, 129, variants[v]);
        ck_op(&s, CK_REDUCE_COLS, WBCL_REDUCE_MAX, 37, 129, variants[v]);
    }
    wbcl_context_set_variant(r->ctx, var0);
    wbcl_context_set_gemm_backend(r->ctx, be0);
    if (!r->quiet) printf("%d of %d cases ok\n", s.cases - s.failed, s.cases);
    if (s.failed) return wbcl_run_fail(r, "check: %d of %d cases failed on '%s'", s.failed, s.cases, d->name);
    return 0;
}

static const char *const check_params[] = {"seed", "size", NULL};
const wbcl_run_module wbcl_mod_check = {
    "check",
    "runs every basic op and both GEMM backends against the double-precision reference",
    "  no inputs; prints a table (op, shape, variant, max rel err, tolerance, ok/FAIL, ms) headed\n"
    "  by the device and driver, and exits non-zero if any case fails.\n"
    "  --param seed=N         random data seed (default 1)\n"
    "  --param size=N         edge of the big cases: gemm N x N x N, row ops (N, N + 1) (default 256)\n"
    "Times (ms) are of a second call, after a warm-up call that builds the kernels.\n",
    check_params, NULL, 0, 0, WBCL_RUN_NONE, WBCL_RUN_NONE, 0, run_check};
