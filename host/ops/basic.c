/* Basic operators (include/wbcl/ops.h): validate, pick the kernel variant,
 * enqueue. Kernels are in cl/ops.cl (family "ops").
 *
 * Variants (ctx->variant):
 *   CPU  elementwise: one element per work-item, local size WBCL_WG (>= 64);
 *        row ops: one work-item per row streaming it (float16 vectors);
 *        column reductions: a work-item owns a block of WBCL_REDUCE_ROWS rows
 *        and either a 64-column chunk in float16 registers (C < 128) or a long
 *        row segment / the whole row with an L1-resident partial row (C >= 128),
 *        streaming its rows; the same kernel then combines the partial rows
 *        level by level (no finish kernel striding down columns).
 *   GPU  elementwise: one float4 per work-item (*_g kernels), local size WBCL_WG;
 *        row ops (rows <= 4096 floats; reduce_rows any length): (LX, RY) work-groups
 *        of 256, RY rows of LX lanes, the row in registers (x read once), two
 *        barriers per reduction (wbcl_layernorm_g, wbcl_softmax_g,
 *        wbcl_reduce_rows_g_*); longer rows: one work-group per row, tree reduction;
 *        column reductions: float4 columns x row lanes (wbcl_reduce_cols_g_*),
 *        rows cut into enough blocks to fill the device, then the same
 *        level-by-level combine. Devices with fewer than 256 work-items per
 *        group keep the first-generation *_gpu row and column kernels.
 * Both variants run on every device (the tests run both on PoCL). */
#include "internal.h"
#include "launch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/ops.h"

#define FAMILY "ops"
#define CPU_CW 64           /* columns per work-item, WBCL_CW in cl/ops.cl */
#define GPU_COLS_ITEMS 32   /* rows each work-item combines per level in the GPU column kernel */

/* ---- small helpers --------------------------------------------------------- */

static size_t pow2_floor(size_t v)
{
    size_t p = 1;
    while (p <= v / 2) p *= 2;
    return p;
}

static size_t pow2_ceil(size_t v)
{
    size_t p = 1;
    while (p < v) p *= 2;
    return p;
}

static size_t ceil_div(size_t a, size_t b) { return a / b + (a % b != 0); }

static size_t last_dim(const wbcl_tensor *t) { return t->shape[t->ndim - 1]; }

static int same_shape(const wbcl_tensor *a, const wbcl_tensor *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

static int is_cpu(const wbcl_context *ctx) { return ctx->variant == WBCL_VARIANT_CPU; }

/* GPU variant, second-generation kernels (cl/ops.cl "GPU-shaped kernels, second generation"):
 * float4 elementwise kernels, register-resident rows in (LX, RY) work-groups of WBCL_GWG = 256,
 * column reductions over float4 columns. The row and column kernels need 256 work-items per
 * group; a device with fewer keeps the first-generation *_gpu kernels. */
#define GWG 256     /* WBCL_GWG in cl/ops.cl                               */
#define G_ROW_MAX 4096 /* 4 float4 slots x 256 lanes: longest register-resident row */
static int gpu2(const wbcl_context *ctx) { return !is_cpu(ctx); }
static int gpu2_groups(const wbcl_context *ctx) { return gpu2(ctx) && ctx->info.max_work_group_size >= GWG; }

/* Lanes per row of the rows_g kernels: the fewest (a power of two, 1..256) that hold d in 16
 * floats each; rows longer than 4096 take 256 lanes (reduce_rows streams them). */
static size_t rows_lanes(size_t d)
{
    size_t want = ceil_div(d, 16), lx = 1;
    while (lx < want && lx < GWG) lx *= 2;
    return lx;
}

static wbcl_status launch_rows_g(wbcl_context *ctx, wbcl_kern *k, size_t rows, size_t d, const char *op)
{
    size_t lx = rows_lanes(d), ry = GWG / lx, g[2] = {0, ry}, l[2] = {lx, ry};
    if (!wbcl__mul_ok(ceil_div(rows, ry), lx, &g[0]))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %zu rows overflow the global size", op, rows);
    return wbcl__launch(ctx, k, 2, g, l);
}

/* Work-group size of the GPU-shaped row kernels: a power of two, at most
 * WBCL_REDUCE_WG (the kernels' local arrays), no wider than the row needs
 * (but a warp's worth at least). */
static size_t row_group(const wbcl_context *ctx, size_t d)
{
    size_t wg = pow2_floor((size_t)(ctx->params.reduce_wg > 0 ? ctx->params.reduce_wg : 1));
    size_t want = pow2_ceil(d < 32 ? 32 : d);
    return want < wg ? want : wg;
}

static wbcl_status launch_1d(wbcl_context *ctx, wbcl_kern *k, size_t global, size_t local)
{
    size_t g[1] = {global}, l[1] = {local};
    return wbcl__launch(ctx, k, 1, g, l);
}

/* Elementwise launch: one element per work-item, local size WBCL_WG. */
static wbcl_status launch_elementwise(wbcl_context *ctx, wbcl_kern *k, size_t n)
{
    size_t wg = ctx->params.wg_size > 0 ? (size_t)ctx->params.wg_size : 64;
    return launch_1d(ctx, k, n, wg);
}

static wbcl_status check_unary(wbcl_context *ctx, const char *op, const wbcl_tensor *x, const wbcl_tensor *y)
{
    wbcl_status st = wbcl__check_tensor(ctx, x, op, "x");
    if (!st) st = wbcl__check_tensor(ctx, y, op, "y");
    if (!st) st = wbcl__check_same_shape(ctx, x, y, op, "x", "y");
    return st;
}

/* ---- elementwise ------------------------------------------------------------ */

/* per_item: elements per work-item (the kernel's own blocking) */
/* Work-items of the GPU variant's float4 elementwise kernels: one per float4, one for the tail. */
static size_t ew_g_items(size_t n) { return n / 4 + (n % 4 != 0); }

static wbcl_status unary(wbcl_context *ctx, const char *op, const char *kname, size_t per_item,
                         const wbcl_tensor *x, wbcl_tensor *y)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_unary(ctx, op, x, y);
    if (st) return st;
    wbcl_kern *k;
    char gname[64];
    if (gpu2(ctx)) snprintf(gname, sizeof gname, "%s_g", kname);
    if ((st = wbcl__kernel(ctx, FAMILY, NULL, gpu2(ctx) ? gname : kname, &k))) return st;
    cl_ulong n = x->numel;
    WBCL_ARG(ctx, k, 0, x->mem);
    WBCL_ARG(ctx, k, 1, y->mem);
    WBCL_ARG(ctx, k, 2, n);
    if (gpu2(ctx)) return launch_elementwise(ctx, k, ew_g_items(x->numel));
    return launch_elementwise(ctx, k, (x->numel + per_item - 1) / per_item);
}

wbcl_status wbcl_gelu(wbcl_context *ctx, const wbcl_tensor *x, wbcl_tensor *y)
{
    return unary(ctx, "wbcl_gelu", "wbcl_ew_gelu", 8, x, y);
}

wbcl_status wbcl_relu(wbcl_context *ctx, const wbcl_tensor *x, wbcl_tensor *y)
{
    return unary(ctx, "wbcl_relu", "wbcl_ew_relu", 1, x, y);
}

static wbcl_status scale_run(wbcl_context *ctx, const wbcl_tensor *x, float alpha, wbcl_tensor *y)
{
    wbcl_kern *k;
    wbcl_status st = wbcl__kernel(ctx, FAMILY, NULL, gpu2(ctx) ? "wbcl_ew_scale_g" : "wbcl_ew_scale", &k);
    if (st) return st;
    cl_ulong n = x->numel;
    WBCL_ARG(ctx, k, 0, x->mem);
    WBCL_ARG(ctx, k, 1, alpha);
    WBCL_ARG(ctx, k, 2, y->mem);
    WBCL_ARG(ctx, k, 3, n);
    return launch_elementwise(ctx, k, gpu2(ctx) ? ew_g_items(x->numel) : x->numel);
}

wbcl_status wbcl_scale(wbcl_context *ctx, const wbcl_tensor *x, float alpha, wbcl_tensor *y)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_unary(ctx, "wbcl_scale", x, y);
    if (st) return st;
    return scale_run(ctx, x, alpha, y);
}

wbcl_status wbcl_axpby(wbcl_context *ctx, float alpha, const wbcl_tensor *x, float beta, wbcl_tensor *y)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_unary(ctx, "wbcl_axpby", x, y);
    if (st) return st;
    /* BLAS convention: beta == 0 means y is not read (NaN/Inf in y do not leak) */
    if (beta == 0.0f) return scale_run(ctx, x, alpha, y);
    wbcl_kern *k;
    if ((st = wbcl__kernel(ctx, FAMILY, NULL, gpu2(ctx) ? "wbcl_ew_axpby_g" : "wbcl_ew_axpby", &k))) return st;
    cl_ulong n = x->numel;
    WBCL_ARG(ctx, k, 0, alpha);
    WBCL_ARG(ctx, k, 1, x->mem);
    WBCL_ARG(ctx, k, 2, beta);
    WBCL_ARG(ctx, k, 3, y->mem);
    WBCL_ARG(ctx, k, 4, n);
    return launch_elementwise(ctx, k, gpu2(ctx) ? ew_g_items(x->numel) : x->numel);
}

/* b broadcasts onto a when b's shape, without leading dimensions of size 1,
 * equals a's trailing dimensions. */
static int broadcasts(const wbcl_tensor *a, const wbcl_tensor *b)
{
    int k = 0;
    while (k < b->ndim - 1 && b->shape[k] == 1) k++;
    int m = b->ndim - k;
    if (m > a->ndim) return 0;
    for (int i = 0; i < m; i++)
        if (b->shape[k + i] != a->shape[a->ndim - m + i]) return 0;
    return 1;
}

wbcl_status wbcl_add(wbcl_context *ctx, const wbcl_tensor *a, const wbcl_tensor *b, wbcl_tensor *y)
{
    static const char *op = "wbcl_add";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__check_tensor(ctx, a, op, "a");
    if (!st) st = wbcl__check_tensor(ctx, b, op, "b");
    if (!st) st = wbcl__check_tensor(ctx, y, op, "y");
    if (st) return st;
    char sa[96], sb[96];
    if (!same_shape(a, b) && !broadcasts(a, b))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: 'b' of shape %s neither has the shape of 'a' %s nor that of its trailing dimensions",
                          op, wbcl__shape_str(sb, sizeof sb, b->ndim, b->shape),
                          wbcl__shape_str(sa, sizeof sa, a->ndim, a->shape));
    if (y->mem == b->mem && b->numel != a->numel)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                          "%s: 'y' aliases 'b' of shape %s, which is broadcast over 'a' %s: not possible in place",
                          op, wbcl__shape_str(sb, sizeof sb, b->ndim, b->shape),
                          wbcl__shape_str(sa, sizeof sa, a->ndim, a->shape));
    if ((st = wbcl__check_same_shape(ctx, a, y, op, "a", "y"))) return st;
    wbcl_kern *k;
    cl_ulong n = a->numel, nb = b->numel;
    if (nb == n) {
        if ((st = wbcl__kernel(ctx, FAMILY, NULL, gpu2(ctx) ? "wbcl_ew_add_g" : "wbcl_ew_add", &k))) return st;
        WBCL_ARG(ctx, k, 0, a->mem);
        WBCL_ARG(ctx, k, 1, b->mem);
        WBCL_ARG(ctx, k, 2, y->mem);
        WBCL_ARG(ctx, k, 3, n);
        return launch_elementwise(ctx, k, gpu2(ctx) ? ew_g_items(a->numel) : a->numel);
    }
    if (gpu2(ctx) && nb % 4 == 0) {
        /* float4 columns of b over the rows */
        if ((st = wbcl__kernel(ctx, FAMILY, NULL, "wbcl_ew_add_bcast_g", &k))) return st;
        cl_ulong nb4 = nb / 4, rows = n / nb;
        WBCL_ARG(ctx, k, 0, a->mem);
        WBCL_ARG(ctx, k, 1, b->mem);
        WBCL_ARG(ctx, k, 2, y->mem);
        WBCL_ARG(ctx, k, 3, nb4);
        WBCL_ARG(ctx, k, 4, rows);
        size_t wg = ctx->params.wg_size > 0 ? (size_t)ctx->params.wg_size : 64;
        size_t lx = nb4 >= wg ? wg : pow2_ceil((size_t)nb4), ly = wg / lx ? wg / lx : 1;
        if (ly > (size_t)rows) ly = pow2_ceil((size_t)rows);
        size_t g[2] = {(size_t)nb4, (size_t)rows}, l[2] = {lx, ly};
        return wbcl__launch(ctx, k, 2, g, l);
    }
    if ((st = wbcl__kernel(ctx, FAMILY, NULL, "wbcl_ew_add_bcast", &k))) return st;
    cl_ulong rows = n / nb;
    WBCL_ARG(ctx, k, 0, a->mem);
    WBCL_ARG(ctx, k, 1, b->mem);
    WBCL_ARG(ctx, k, 2, y->mem);
    WBCL_ARG(ctx, k, 3, nb);
    WBCL_ARG(ctx, k, 4, rows);
    /* dimension 0 over b's elements (contiguous); a work-group spans WBCL_WG
     * of them, or fewer when b is short (then several rows per group) */
    size_t wg = ctx->params.wg_size > 0 ? (size_t)ctx->params.wg_size : 64;
    size_t lx = b->numel >= wg ? wg : pow2_ceil(b->numel);
    size_t ly = wg / lx ? wg / lx : 1;
    if (ly > (size_t)rows) ly = pow2_ceil((size_t)rows);
    size_t g[2] = {(size_t)nb, (size_t)rows}, l[2] = {lx, ly};
    return wbcl__launch(ctx, k, 2, g, l);
}

/* ---- row ops ------------------------------------------------------------------ */

/* Launches a row kernel: CPU shape one work-item per row, GPU shape one
 * work-group per row. */
static wbcl_status launch_rows(wbcl_context *ctx, wbcl_kern *k, size_t rows, size_t d, const char *op)
{
    if (is_cpu(ctx)) return wbcl__launch_items(ctx, k, rows);
    size_t lw = row_group(ctx, d), g;
    if (!wbcl__mul_ok(rows, lw, &g))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %zu rows x %zu work-items overflow the global size", op, rows,
                          lw);
    return launch_1d(ctx, k, g, lw);
}

static wbcl_status check_vec(wbcl_context *ctx, const char *op, const char *name, const wbcl_tensor *v,
                             const wbcl_tensor *x)
{
    wbcl_status st = wbcl__check_tensor(ctx, v, op, name);
    if (st) return st;
    if (v->numel != last_dim(x)) {
        char sv[96], sx[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: '%s' has shape %s (%zu elements) but the last dimension of 'x' %s is %zu", op, name,
                          wbcl__shape_str(sv, sizeof sv, v->ndim, v->shape), v->numel,
                          wbcl__shape_str(sx, sizeof sx, x->ndim, x->shape), last_dim(x));
    }
    return WBCL_SUCCESS;
}

wbcl_status wbcl_layernorm(wbcl_context *ctx, const wbcl_tensor *x, const wbcl_tensor *gamma,
                           const wbcl_tensor *beta, float eps, wbcl_tensor *y)
{
    static const char *op = "wbcl_layernorm";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_unary(ctx, op, x, y);
    if (st) return st;
    if (gamma && (st = check_vec(ctx, op, "gamma", gamma, x))) return st;
    if (beta && (st = check_vec(ctx, op, "beta", beta, x))) return st;
    if (!(eps > 0.0f) || !isfinite(eps))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: eps must be positive and finite (got %g)", op,
                          (double)eps);
    wbcl_kern *k;
    size_t d = last_dim(x), rows = x->numel / d;
    const int g2 = gpu2_groups(ctx) && d <= G_ROW_MAX;
    if ((st = wbcl__kernel(ctx, FAMILY, NULL,
                           is_cpu(ctx) ? "wbcl_layernorm_cpu" : g2 ? "wbcl_layernorm_g" : "wbcl_layernorm_gpu", &k)))
        return st;
    cl_int has_g = gamma != NULL, has_b = beta != NULL;
    cl_ulong R = rows, D = d;
    /* an unused gamma/beta is bound to x (never read) */
    WBCL_ARG(ctx, k, 0, x->mem);
    cl_mem gm = gamma ? gamma->mem : x->mem, bm = beta ? beta->mem : x->mem;
    WBCL_ARG(ctx, k, 1, gm);
    WBCL_ARG(ctx, k, 2, bm);
    WBCL_ARG(ctx, k, 3, has_g);
    WBCL_ARG(ctx, k, 4, has_b);
    WBCL_ARG(ctx, k, 5, eps);
    WBCL_ARG(ctx, k, 6, y->mem);
    WBCL_ARG(ctx, k, 7, R);
    WBCL_ARG(ctx, k, 8, D);
    return g2 ? launch_rows_g(ctx, k, rows, d, op) : launch_rows(ctx, k, rows, d, op);
}

wbcl_status wbcl_softmax(wbcl_context *ctx, const wbcl_tensor *x, wbcl_tensor *y)
{
    static const char *op = "wbcl_softmax";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = check_unary(ctx, op, x, y);
    if (st) return st;
    wbcl_kern *k;
    size_t d = last_dim(x), rows = x->numel / d;
    const int g2 = gpu2_groups(ctx) && d <= G_ROW_MAX;
    if ((st = wbcl__kernel(ctx, FAMILY, NULL,
                           is_cpu(ctx) ? "wbcl_softmax_cpu" : g2 ? "wbcl_softmax_g" : "wbcl_softmax_gpu", &k)))
        return st;
    cl_ulong R = rows, D = d;
    WBCL_ARG(ctx, k, 0, x->mem);
    WBCL_ARG(ctx, k, 1, y->mem);
    WBCL_ARG(ctx, k, 2, R);
    WBCL_ARG(ctx, k, 3, D);
    return g2 ? launch_rows_g(ctx, k, rows, d, op) : launch_rows(ctx, k, rows, d, op);
}

/* ---- reductions ---------------------------------------------------------------- */

/* Kernel name suffix of the first pass of op, and of the passes combining partials. */
static const char *first_suffix(wbcl_reduce_op op)
{
    return op == WBCL_REDUCE_MAX ? "max" : op == WBCL_REDUCE_SUMSQ ? "sumsq" : "sum";
}
static const char *combine_suffix(wbcl_reduce_op op) { return op == WBCL_REDUCE_MAX ? "max" : "sum"; }

/* Common checks; *rows and *cols describe x as (R, C). */
static wbcl_status check_reduce(wbcl_context *ctx, const char *op, wbcl_reduce_op rop, const wbcl_tensor *x,
                                const wbcl_tensor *y, int by_rows, size_t *rows, size_t *cols)
{
    if (rop != WBCL_REDUCE_SUM && rop != WBCL_REDUCE_MEAN && rop != WBCL_REDUCE_MAX && rop != WBCL_REDUCE_SUMSQ)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: unknown reduce op %d", op, (int)rop);
    wbcl_status st = wbcl__check_tensor(ctx, x, op, "x");
    if (!st) st = wbcl__check_tensor(ctx, y, op, "y");
    if (st) return st;
    if (y->mem == x->mem)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'y' must not alias 'x' (no in-place reduction)", op);
    size_t C = last_dim(x), R = x->numel / C, want = by_rows ? R : C;
    if (y->numel != want) {
        char sx[96], sy[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: 'y' has shape %s (%zu elements) but 'x' of shape %s viewed as (%zu, %zu) needs "
                          "%zu elements (one per %s)",
                          op, wbcl__shape_str(sy, sizeof sy, y->ndim, y->shape), y->numel,
                          wbcl__shape_str(sx, sizeof sx, x->ndim, x->shape), R, C, want, by_rows ? "row" : "column");
    }
    *rows = R;
    *cols = C;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_reduce_rows(wbcl_context *ctx, wbcl_reduce_op rop, const wbcl_tensor *x, wbcl_tensor *y)
{
    static const char *op = "wbcl_reduce_rows";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t R = 0, C = 1;
    wbcl_status st = check_reduce(ctx, op, rop, x, y, 1, &R, &C);
    if (st) return st;
    char name[64];
    const int g2 = gpu2_groups(ctx);
    snprintf(name, sizeof name, "wbcl_reduce_rows_%s_%s", is_cpu(ctx) ? "cpu" : g2 ? "g" : "gpu", first_suffix(rop));
    wbcl_kern *k;
    if ((st = wbcl__kernel(ctx, FAMILY, NULL, name, &k))) return st;
    cl_ulong r = R, c = C;
    float scale = rop == WBCL_REDUCE_MEAN ? (float)(1.0 / (double)C) : 1.0f;
    WBCL_ARG(ctx, k, 0, x->mem);
    WBCL_ARG(ctx, k, 1, y->mem);
    WBCL_ARG(ctx, k, 2, r);
    WBCL_ARG(ctx, k, 3, c);
    WBCL_ARG(ctx, k, 4, scale);
    return g2 ? launch_rows_g(ctx, k, R, C, op) : launch_rows(ctx, k, R, C, op);
}

/* One level of the column reduction: geometry for `rows` input rows. */
typedef struct cols_level {
    size_t rpb;      /* rows combined per output row                                  */
    size_t nblocks;  /* output rows                                                   */
    size_t nparts;   /* CPU: column chunks or segments; GPU: groups along the columns */
    size_t seglen;   /* CPU wide rows: columns per segment                            */
    size_t tx, ty;   /* GPU tile                                                      */
} cols_level;

/* CPU column kernels: rows of at least this many columns are streamed in long
 * segments (wbcl_reduce_cols_cpuseg_*), narrower ones in 64-column register
 * chunks (wbcl_reduce_cols_cpu_*). See perf/RESULTS.md, "Basic ops". */
#ifndef CPU_SEG_MIN_COLS /* (overridable for measurements) */
#define CPU_SEG_MIN_COLS 128
#endif
#define CPU_SEG_MIN_LEN 256

static int cols_segmented(const wbcl_context *ctx, size_t C) { return is_cpu(ctx) && C >= CPU_SEG_MIN_COLS; }

/* GPU variant, second generation (wbcl_reduce_cols_g_*): CX lanes over float4 columns (single
 * columns when C % 4 != 0), RY = 256 / CX lanes over rows, at most 64 rows per lane per level.
 * The first level (CX <= 64) cuts the rows into enough blocks for about WBCL_OPS_COLS_WG_PER_CU
 * (environment, default 4) work-groups per compute unit; the later levels read few partial rows,
 * latency-bound, so they take CX <= 16 (more row lanes, shorter chains per lane, more groups).
 * Not yet measured on a GPU: the default is reasoned (perf/RESULTS.md, issue 16). */
static cols_level cols_geometry_g(const wbcl_context *ctx, size_t rows, size_t C, int first)
{
    cols_level L;
    memset(&L, 0, sizeof L);
    size_t ncol = C % 4 == 0 ? C / 4 : C, cw = pow2_ceil(ncol), cmax = first ? 64 : 16;
    L.tx = cw < cmax ? cw : cmax;
    L.ty = GWG / L.tx;
    L.nparts = ceil_div(ncol, L.tx);
    L.seglen = L.tx;
    size_t nb = ceil_div(rows, L.ty * 64);
    if (first) {
        const char *env = getenv("WBCL_OPS_COLS_WG_PER_CU");
        long per = env ? strtol(env, NULL, 10) : 4;
        size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
        size_t want = ceil_div((per >= 1 && per <= 64 ? (size_t)per : 4) * cu, L.nparts);
        if (want > nb) nb = want;
    }
    L.rpb = wbcl__round_up(ceil_div(rows, nb), L.ty);
    L.nblocks = ceil_div(rows, L.rpb);
    return L;
}

static cols_level cols_geometry(const wbcl_context *ctx, size_t rows, size_t C, int first)
{
    if (gpu2_groups(ctx)) return cols_geometry_g(ctx, rows, C, first);
    cols_level L;
    memset(&L, 0, sizeof L);
    if (is_cpu(ctx)) {
        L.rpb = ctx->params.reduce_rows >= 2 ? (size_t)ctx->params.reduce_rows : 64;
        L.nblocks = ceil_div(rows, L.rpb);
        if (cols_segmented(ctx, C)) {
            /* whole rows per work-item when there are enough row blocks to
             * keep every core busy, else split the rows into segments */
            size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
            size_t want = ceil_div(8 * cu, L.nblocks), most = ceil_div(C, CPU_SEG_MIN_LEN);
            size_t nseg = want < 1 ? 1 : want > most ? most : want;
            L.seglen = wbcl__round_up(ceil_div(C, nseg), 16);
            L.nparts = ceil_div(C, L.seglen);
        } else {
            L.seglen = CPU_CW;
            L.nparts = ceil_div(C, CPU_CW);
        }
        return L;
    }
    size_t wg = pow2_floor((size_t)(ctx->params.reduce_wg > 0 ? ctx->params.reduce_wg : 1));
    size_t cw = pow2_ceil(C);
    L.tx = cw < wg ? cw : wg;
    L.ty = wg / L.tx;
    L.rpb = L.ty * GPU_COLS_ITEMS;
    L.nblocks = ceil_div(rows, L.rpb);
    L.nparts = ceil_div(C, L.tx);
    L.seglen = L.tx;
    return L;
}

static wbcl_status cols_level_run(wbcl_context *ctx, wbcl_kern *k, cl_mem in, size_t rows, size_t C,
                                  const cols_level *L, cl_mem out, float scale, const char *op)
{
    cl_ulong R = rows, c = C, rpb = L->rpb, np = L->nparts, sl = L->seglen, nbl = L->nblocks;
    WBCL_ARG(ctx, k, 0, in);
    WBCL_ARG(ctx, k, 1, R);
    WBCL_ARG(ctx, k, 2, c);
    WBCL_ARG(ctx, k, 3, rpb);
    WBCL_ARG(ctx, k, 4, np);
    WBCL_ARG(ctx, k, 5, sl);
    WBCL_ARG(ctx, k, 6, nbl);
    WBCL_ARG(ctx, k, 7, out);
    WBCL_ARG(ctx, k, 8, scale);
    if (is_cpu(ctx)) {
        size_t items;
        if (!wbcl__mul_ok(L->nparts, L->nblocks, &items))
            return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: work size overflows", op);
        return wbcl__launch_items(ctx, k, items);
    }
    size_t g[2], l[2] = {L->tx, L->ty};
    if (!wbcl__mul_ok(L->nparts, L->tx, &g[0]) || !wbcl__mul_ok(L->nblocks, L->ty, &g[1]))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: work size overflows", op);
    return wbcl__launch(ctx, k, 2, g, l);
}

wbcl_status wbcl_reduce_cols(wbcl_context *ctx, wbcl_reduce_op rop, const wbcl_tensor *x, wbcl_tensor *y)
{
    static const char *op = "wbcl_reduce_cols";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t R = 0, C = 1;
    wbcl_status st = check_reduce(ctx, op, rop, x, y, 0, &R, &C);
    if (st) return st;
    const char *shape = gpu2_groups(ctx) ? "g" : !is_cpu(ctx) ? "gpu" : cols_segmented(ctx, C) ? "cpuseg" : "cpu";
    char name[64];
    wbcl_kern *kfirst, *kcomb;
    snprintf(name, sizeof name, "wbcl_reduce_cols_%s_%s", shape, first_suffix(rop));
    if ((st = wbcl__kernel(ctx, FAMILY, NULL, name, &kfirst))) return st;
    snprintf(name, sizeof name, "wbcl_reduce_cols_%s_%s", shape, combine_suffix(rop));
    if ((st = wbcl__kernel(ctx, FAMILY, NULL, name, &kcomb))) return st;

    /* Partial rows: level 0 writes n0 = ceil(R / rpb) rows, level 1 reads
     * them and writes n1 <= n0 / rpb + 1, and so on: two ping-pong buffers of
     * n0 and n1 rows, allocated before anything is enqueued. Released right
     * after enqueueing: OpenCL keeps them alive until the kernels finish. */
    cols_level L0 = cols_geometry(ctx, R, C, 1);
    cl_mem tmp[2] = {NULL, NULL};
    if (L0.nblocks > 1) {
        cols_level L1 = cols_geometry(ctx, L0.nblocks, C, 0);
        size_t rows_of[2] = {L0.nblocks, L1.nblocks > 1 ? L1.nblocks : 0};
        for (int i = 0; i < 2 && rows_of[i]; i++) {
            size_t bytes;
            if (!wbcl__mul_ok(rows_of[i], C, &bytes) || !wbcl__mul_ok(bytes, sizeof(float), &bytes)) {
                st = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: partials of (%zu, %zu) overflow", op, rows_of[i], C);
            } else {
                st = wbcl__buffer(ctx, bytes, "wbcl_reduce_cols partials", &tmp[i]);
            }
            if (st) {
                if (tmp[0]) clReleaseMemObject(tmp[0]);
                return st;
            }
        }
    }
    float mean_scale = (float)(1.0 / (double)R);
    cl_mem in = x->mem;
    size_t rows = R;
    for (int level = 0;; level++) {
        cols_level L = cols_geometry(ctx, rows, C, level == 0);
        int last = L.nblocks == 1;
        cl_mem out = last ? y->mem : tmp[level % 2];
        float scale = last && rop == WBCL_REDUCE_MEAN ? mean_scale : 1.0f;
        st = cols_level_run(ctx, level ? kcomb : kfirst, in, rows, C, &L, out, scale, op);
        if (st || last) break;
        in = out;
        rows = L.nblocks;
    }
    for (int i = 0; i < 2; i++)
        if (tmp[i]) clReleaseMemObject(tmp[i]);
    return st;
}
