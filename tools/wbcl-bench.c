/* wbcl-bench: the cross-device comparison. Runs every operator the library has on every
 * selected device, verifies each result against the double-precision reference (host/ref)
 * before timing it, and reports the median kernel time (OpenCL profiling events) and wall
 * time, GFLOP/s or GB/s, and the fraction of the device's measured peak (FMA rate and copy
 * bandwidth from two small probe kernels), with the device name and driver.
 *
 * Adding an operator: write a prepare function (make the inputs, run once, compare with the
 * reference, fill in the call to time and its FLOP or byte count) and add one line to OPS[].
 *
 * Output formats: a readable table on stdout; --csv FILE and --json FILE carry the format
 * version (BENCH_FORMAT_VERSION); --plot FILE.svg draws the fraction of peak per operator,
 * one bar per device. Exit status: 0 if every supported operator verified, 1 if any result
 * was wrong or an operator failed unexpectedly, 2 for a bad command line. */
#define _POSIX_C_SOURCE 200809L
#include <CL/cl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wbcl/wbcl.h"

#define BENCH_FORMAT_VERSION 1

/* ---- options and per-run environment ------------------------------------------------------ */
typedef struct opts {
    const char *device;   /* "all" or a selector */
    const char *only;     /* substring filter on op names, or NULL */
    const char *csv, *json, *plot;
    int quick;            /* small sizes (tests, CI, valgrind) */
    int reps;
} opts;

typedef struct env {
    wbcl_context *ctx;
    int quick;
    uint64_t seed;
} env;

/* What an operator's prepare function hands back. */
typedef struct op_case {
    wbcl_status (*call)(wbcl_context *ctx, void *state); /* the timed call */
    void *state;
    void (*cleanup)(void *state);
    char shape[96];       /* e.g. "m=n=k=512" */
    double flops;         /* per call; 0 when the op is bandwidth-bound */
    double bytes;         /* per call: minimum bytes read + written */
    double err, tol;      /* normwise relative error vs the reference, and the bound */
} op_case;

/* Returns WBCL_SUCCESS, or the failing status with the library's message in why
 * (WBCL_ERROR_UNSUPPORTED / _DEVICE_LIMIT / _BUILD: an "unsupported" row). */
typedef wbcl_status (*prepare_fn)(env *e, op_case *c, char *why, size_t whylen);

typedef struct bench_op {
    const char *name;
    const char *family;
    prepare_fn prepare;
} bench_op;

/* ---- helpers ---------------------------------------------------------------------------- */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double urand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}

/* n floats uniform in [lo, hi) and their double copy */
static float *rnd(env *e, size_t n, double lo, double hi, double **d)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    double *g = malloc((n ? n : 1) * sizeof *g);
    if (!f || !g) { free(f); free(g); return NULL; }
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(lo + (hi - lo) * urand(&e->seed));
        g[i] = f[i];
    }
    if (d) *d = g;
    else free(g);
    return f;
}

/* normwise: max |got - want| / max |want| (tiny floor) */
static double relerr(const float *got, const double *want, size_t n)
{
    double num = 0, den = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d == d)) return INFINITY;
        if (d > num) num = d;
        if (fabs(want[i]) > den) den = fabs(want[i]);
    }
    return num / den;
}

#define FAIL(st_) do { st = (st_); goto done; } while (0)
#define TRY(x) do { if ((st = (x)) != WBCL_SUCCESS) goto done; } while (0)

static wbcl_tensor *tens(env *e, wbcl_status *st, int nd, size_t a, size_t b, size_t c, size_t d, const float *data)
{
    size_t s[4] = {a, b, c, d};
    wbcl_tensor *t = NULL;
    if (*st) return NULL;
    *st = wbcl_tensor_create(e->ctx, nd, s, WBCL_F32, data, &t);
    return t;
}

/* read back n floats */
static wbcl_status readback(env *e, const wbcl_tensor *t, float **out)
{
    size_t n = wbcl_tensor_numel(t);
    *out = malloc(n * sizeof **out);
    if (!*out) return WBCL_ERROR_OUT_OF_MEMORY;
    return wbcl_tensor_read(e->ctx, t, *out, n);
}

static void msg(char *why, size_t len, env *e, wbcl_status st)
{
    snprintf(why, len, "%s: %s", wbcl_status_name(st), wbcl_context_last_error(e->ctx));
}

/* ---- GEMM --------------------------------------------------------------------------------- */
typedef struct { wbcl_tensor *A, *B, *C; wbcl_gemm_backend be; } gemm_state;

static wbcl_status gemm_call(wbcl_context *ctx, void *s_)
{
    gemm_state *s = s_;
    wbcl_status st = wbcl_context_set_gemm_backend(ctx, s->be);
    if (!st) st = wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, s->A, s->B, 0.0f, s->C);
    return st;
}
static void gemm_free(void *s_)
{
    gemm_state *s = s_;
    wbcl_tensor_destroy(s->A); wbcl_tensor_destroy(s->B); wbcl_tensor_destroy(s->C);
    free(s);
}
static wbcl_status gemm_prep(env *e, op_case *c, char *why, size_t wl, wbcl_gemm_backend be)
{
    size_t n = e->quick ? 67 : 512, m = n, k = n;
    wbcl_status st = WBCL_SUCCESS;
    double *Ad = NULL, *Bd = NULL, *Cd = NULL;
    float *A = rnd(e, m * k, -1, 1, &Ad), *B = rnd(e, k * n, -1, 1, &Bd), *C = NULL;
    gemm_state *s = calloc(1, sizeof *s);
    Cd = calloc(m * n, sizeof *Cd);
    if (!A || !B || !s || !Cd) FAIL(WBCL_ERROR_OUT_OF_MEMORY);
    s->be = be;
    s->A = tens(e, &st, 2, m, k, 0, 0, A);
    s->B = tens(e, &st, 2, k, n, 0, 0, B);
    s->C = tens(e, &st, 2, m, n, 0, 0, NULL);
    if (st) goto done;
    TRY(gemm_call(e->ctx, s));
    TRY(readback(e, s->C, &C));
    wbcl_ref_gemm(0, 0, m, n, k, 1.0, Ad, k, Bd, n, 0.0, Cd, n);
    c->err = relerr(C, Cd, m * n);
    c->tol = 1e-5 * sqrt((double)k);
    c->flops = 2.0 * m * n * k;
    c->bytes = 4.0 * (m * k + k * n + m * n);
    snprintf(c->shape, sizeof c->shape, "m=n=k=%zu", n);
done:
    if (st) { msg(why, wl, e, st); if (s) gemm_free(s); s = NULL; }
    c->call = gemm_call; c->state = s; c->cleanup = gemm_free;
    free(A); free(B); free(C); free(Ad); free(Bd); free(Cd);
    return st;
}
static wbcl_status gemm_packed_prep(env *e, op_case *c, char *w, size_t l) { return gemm_prep(e, c, w, l, WBCL_GEMM_PACKED); }
static wbcl_status gemm_clblast_prep(env *e, op_case *c, char *w, size_t l) { return gemm_prep(e, c, w, l, WBCL_GEMM_CLBLAST); }

/* ---- basic ops (row-wise and elementwise) ---------------------------------------------------- */
enum { B_LAYERNORM, B_GELU, B_SOFTMAX, B_ADD, B_SCALE, B_RELU, B_AXPBY, B_REDUCE_ROWS, B_REDUCE_COLS };
typedef struct { int kind; wbcl_tensor *x, *b, *y; } basic_state;

static wbcl_status basic_call(wbcl_context *ctx, void *s_)
{
    basic_state *s = s_;
    switch (s->kind) {
    case B_LAYERNORM: return wbcl_layernorm(ctx, s->x, NULL, NULL, 1e-5f, s->y);
    case B_GELU: return wbcl_gelu(ctx, s->x, s->y);
    case B_SOFTMAX: return wbcl_softmax(ctx, s->x, s->y);
    case B_ADD: return wbcl_add(ctx, s->x, s->b, s->y);
    case B_SCALE: return wbcl_scale(ctx, s->x, 0.75f, s->y);
    case B_RELU: return wbcl_relu(ctx, s->x, s->y);
    case B_AXPBY: return wbcl_axpby(ctx, 0.5f, s->x, 0.0f, s->y); /* beta 0: y is written, not read */
    case B_REDUCE_ROWS: return wbcl_reduce_rows(ctx, WBCL_REDUCE_SUM, s->x, s->y);
    default: return wbcl_reduce_cols(ctx, WBCL_REDUCE_SUM, s->x, s->y);
    }
}
static void basic_free(void *s_)
{
    basic_state *s = s_;
    wbcl_tensor_destroy(s->x); wbcl_tensor_destroy(s->b); wbcl_tensor_destroy(s->y);
    free(s);
}
static wbcl_status basic_prep(env *e, op_case *c, char *why, size_t wl, int kind)
{
    size_t R = e->quick ? 61 : 4096, d = e->quick ? 67 : 1024;
    wbcl_status st = WBCL_SUCCESS;
    double *xd = NULL, *bd = NULL, *yd = NULL;
    float *x = rnd(e, R * d, -3, 3, &xd), *b = rnd(e, d, -1, 1, &bd), *y = NULL;
    size_t ny = kind == B_REDUCE_ROWS ? R : kind == B_REDUCE_COLS ? d : R * d;
    basic_state *s = calloc(1, sizeof *s);
    yd = calloc(ny, sizeof *yd);
    if (!x || !b || !s || !yd) FAIL(WBCL_ERROR_OUT_OF_MEMORY);
    s->kind = kind;
    s->x = tens(e, &st, 2, R, d, 0, 0, x);
    s->b = tens(e, &st, 1, d, 0, 0, 0, b);
    s->y = tens(e, &st, ny == R * d ? 2 : 1, ny == R * d ? R : ny, d, 0, 0, NULL);
    if (st) goto done;
    TRY(basic_call(e->ctx, s));
    TRY(readback(e, s->y, &y));
    switch (kind) {
    case B_LAYERNORM: wbcl_ref_layernorm(R, d, xd, NULL, NULL, 1e-5, yd); break;
    case B_GELU: wbcl_ref_gelu(R * d, xd, yd); break;
    case B_SOFTMAX: wbcl_ref_softmax(R, d, xd, yd); break;
    case B_ADD: for (size_t i = 0; i < R * d; i++) yd[i] = xd[i] + bd[i % d]; break;
    case B_SCALE: for (size_t i = 0; i < R * d; i++) yd[i] = 0.75 * xd[i]; break;
    case B_RELU: for (size_t i = 0; i < R * d; i++) yd[i] = xd[i] > 0 ? xd[i] : 0; break;
    case B_AXPBY: for (size_t i = 0; i < R * d; i++) yd[i] = 0.5 * xd[i]; break;
    case B_REDUCE_ROWS: wbcl_ref_reduce_rows(0, R, d, xd, yd); break;
    default: wbcl_ref_reduce_cols(0, R, d, xd, yd); break;
    }
    c->err = relerr(y, yd, ny);
    c->tol = kind >= B_REDUCE_ROWS ? 1e-5 * sqrt((double)(kind == B_REDUCE_ROWS ? d : R)) + 1e-5 : 1e-5;
    c->flops = 0;
    c->bytes = 4.0 * (R * d + ny + (kind == B_ADD ? d : 0));
    snprintf(c->shape, sizeof c->shape, "(%zu, %zu)", R, d);
done:
    if (st) { msg(why, wl, e, st); if (s) basic_free(s); s = NULL; }
    c->call = basic_call; c->state = s; c->cleanup = basic_free;
    free(x); free(b); free(y); free(xd); free(bd); free(yd);
    return st;
}
#define BASIC(fn, kind) static wbcl_status fn(env *e, op_case *c, char *w, size_t l) { return basic_prep(e, c, w, l, kind); }
BASIC(layernorm_prep, B_LAYERNORM)
BASIC(gelu_prep, B_GELU)
BASIC(softmax_prep, B_SOFTMAX)
BASIC(add_prep, B_ADD)
BASIC(scale_prep, B_SCALE)
BASIC(relu_prep, B_RELU)
BASIC(axpby_prep, B_AXPBY)
BASIC(reduce_rows_prep, B_REDUCE_ROWS)
BASIC(reduce_cols_prep, B_REDUCE_COLS)

/* ---- per-head attention kernels ---------------------------------------------------------------- */
enum { A_SOFTMAX, A_CAUSAL, A_MSSA, A_TSSA, A_TSSA_CAUSAL, A_XCA, A_AOT, A_ENERGY, A_SPLIT, A_MERGE };
typedef struct { int kind; wbcl_tensor *q, *k, *v, *o, *temp, *bias, *x; size_t heads; } att_state;

static wbcl_status att_call(wbcl_context *ctx, void *s_)
{
    att_state *s = s_;
    switch (s->kind) {
    case A_SOFTMAX: return wbcl_attention_softmax_heads(ctx, s->q, s->k, s->v, 0.125f, 0, s->o);
    case A_CAUSAL: return wbcl_attention_softmax_heads(ctx, s->q, s->k, s->v, 0.125f, 1, s->o);
    case A_MSSA: return wbcl_attention_mssa_heads(ctx, s->q, 0.125f, 0, s->o);
    case A_TSSA: return wbcl_tssa_heads(ctx, s->q, s->temp, s->o, NULL);
    case A_TSSA_CAUSAL: return wbcl_tssa_causal_heads(ctx, s->q, s->temp, s->bias, NULL, s->o, NULL);
    case A_XCA: return wbcl_xca_heads(ctx, s->q, s->k, s->v, s->temp, s->o);
    case A_AOT: return wbcl_aot_heads(ctx, s->q, WBCL_AOT_SOFTMAX, 0, s->o);
    case A_ENERGY: return wbcl_energy_heads(ctx, s->q, NULL, WBCL_RHO_EXP, 1.0f, 0.5f, s->o);
    case A_SPLIT: return wbcl_split_heads(ctx, s->x, s->heads, 0, 1, s->o);
    default: return wbcl_merge_heads(ctx, s->q, s->x);
    }
}
static void att_free(void *s_)
{
    att_state *s = s_;
    wbcl_tensor *t[] = {s->q, s->k, s->v, s->o, s->temp, s->bias, s->x};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) wbcl_tensor_destroy(t[i]);
    free(s);
}
static wbcl_status att_prep(env *e, op_case *c, char *why, size_t wl, int kind)
{
    size_t B = 1, K = e->quick ? 2 : 8, N = e->quick ? 45 : 1024, p = e->quick ? 16 : 64, n = B * K * N * p;
    wbcl_status st = WBCL_SUCCESS;
    double *qd = NULL, *kd = NULL, *vd = NULL, *td = NULL, *bd = NULL, *od = NULL;
    float *q = rnd(e, n, -1, 1, &qd), *k = rnd(e, n, -1, 1, &kd), *v = rnd(e, n, -1, 1, &vd), *o = NULL;
    float *tmp = rnd(e, K, 0.5, 2, &td), *bias = rnd(e, K * N, 0, 0.1, &bd);
    att_state *s = calloc(1, sizeof *s);
    size_t no = kind == A_MERGE ? n : n;
    od = calloc(no, sizeof *od);
    if (!q || !k || !v || !tmp || !bias || !s || !od) FAIL(WBCL_ERROR_OUT_OF_MEMORY);
    s->kind = kind;
    s->heads = K;
    s->q = tens(e, &st, 4, B, K, N, p, q);
    s->k = tens(e, &st, 4, B, K, N, p, k);
    s->v = tens(e, &st, 4, B, K, N, p, v);
    s->o = tens(e, &st, 4, B, K, N, p, NULL);
    s->temp = tens(e, &st, 1, K, 0, 0, 0, tmp);
    s->bias = tens(e, &st, 2, K, N, 0, 0, bias);
    s->x = tens(e, &st, 3, B, N, K * p, 0, kind == A_SPLIT ? q : NULL);
    if (st) goto done;
    TRY(att_call(e->ctx, s));
    TRY(readback(e, kind == A_MERGE ? s->x : s->o, &o));
    double nn = (double)N * N, work = 0;
    switch (kind) {
    case A_SOFTMAX: case A_CAUSAL:
        wbcl_ref_attention_heads(B, K, N, N, p, qd, kd, vd, 0.125, kind == A_CAUSAL, od);
        work = 4.0 * B * K * nn * p * (kind == A_CAUSAL ? 0.5 : 1.0);
        break;
    case A_MSSA: wbcl_ref_attention_heads(B, K, N, N, p, qd, qd, qd, 0.125, 0, od); work = 4.0 * B * K * nn * p; break;
    case A_TSSA: wbcl_ref_tssa(B, K, N, p, qd, td, od, NULL); work = 0; break;
    case A_TSSA_CAUSAL: wbcl_ref_tssa_causal(B, K, N, p, qd, td, bd, N, od, NULL); work = 0; break;
    case A_XCA: wbcl_ref_xca(B, K, N, p, qd, kd, vd, td, od); work = 4.0 * B * K * N * p * p; break;
    case A_AOT: wbcl_ref_aot_heads(B, K, N, p, qd, 0, 0, od); work = 4.0 * B * K * nn * p; break;
    case A_ENERGY: wbcl_ref_energy_heads(B, K, N, p, p, qd, NULL, 0, 1.0, 0.5, od); work = 4.0 * B * K * nn * p; break;
    case A_SPLIT: /* x (B, N, K p) -> (B, K, N, p) */
        for (size_t h = 0; h < K; h++)
            for (size_t i = 0; i < N; i++)
                for (size_t j = 0; j < p; j++) od[(h * N + i) * p + j] = qd[i * K * p + h * p + j];
        break;
    default: /* merge: q (B, K, N, p) -> (B, N, K p) */
        for (size_t h = 0; h < K; h++)
            for (size_t i = 0; i < N; i++)
                for (size_t j = 0; j < p; j++) od[i * K * p + h * p + j] = qd[(h * N + i) * p + j];
        break;
    }
    c->err = relerr(o, od, no);
    c->tol = kind == A_SPLIT || kind == A_MERGE ? 0 : 2e-5 * sqrt((double)p) + 1e-5 * log2((double)N);
    if (kind == A_TSSA_CAUSAL || kind == A_TSSA) c->tol = 1e-4;
    c->flops = work;
    c->bytes = 4.0 * n * (kind == A_SOFTMAX || kind == A_CAUSAL || kind == A_XCA ? 4 : 2);
    snprintf(c->shape, sizeof c->shape, "B=%zu K=%zu N=%zu p=%zu", B, K, N, p);
done:
    if (st) { msg(why, wl, e, st); if (s) att_free(s); s = NULL; }
    c->call = att_call; c->state = s; c->cleanup = att_free;
    free(q); free(k); free(v); free(o); free(tmp); free(bias);
    free(qd); free(kd); free(vd); free(td); free(bd); free(od);
    return st;
}
#define ATT(fn, kind) static wbcl_status fn(env *e, op_case *c, char *w, size_t l) { return att_prep(e, c, w, l, kind); }
ATT(att_softmax_prep, A_SOFTMAX)
ATT(att_causal_prep, A_CAUSAL)
ATT(att_mssa_prep, A_MSSA)
ATT(att_tssa_prep, A_TSSA)
ATT(att_tssa_causal_prep, A_TSSA_CAUSAL)
ATT(att_xca_prep, A_XCA)
ATT(att_aot_prep, A_AOT)
ATT(att_energy_prep, A_ENERGY)
ATT(split_prep, A_SPLIT)
ATT(merge_prep, A_MERGE)

/* ---- attention modules (model forwards) -------------------------------------------------------- */
typedef struct { wbcl_mha *mha; wbcl_mssa *mssa; wbcl_tensor *x, *y; } mod_state;
static wbcl_status mod_call(wbcl_context *ctx, void *s_)
{
    mod_state *s = s_;
    return s->mha ? wbcl_mha_forward(ctx, s->mha, s->x, s->y) : wbcl_mssa_forward(ctx, s->mssa, s->x, s->y);
}
static void mod_free(void *s_)
{
    mod_state *s = s_;
    wbcl_mha_destroy(s->mha); wbcl_mssa_destroy(s->mssa);
    wbcl_tensor_destroy(s->x); wbcl_tensor_destroy(s->y);
    free(s);
}
static wbcl_status mod_prep(env *e, op_case *c, char *why, size_t wl, int mssa)
{
    size_t B = 1, N = e->quick ? 33 : 512, d = e->quick ? 32 : 384, H = e->quick ? 2 : 6;
    wbcl_status st = WBCL_SUCCESS;
    double *xd = NULL, *Wd = NULL, *Pd = NULL, *bd = NULL, *yd = NULL;
    float *x = rnd(e, B * N * d, -1, 1, &xd), *W = rnd(e, 3 * d * d, -0.1, 0.1, &Wd);
    float *P = rnd(e, d * d, -0.1, 0.1, &Pd), *b = rnd(e, d, -0.1, 0.1, &bd), *y = NULL;
    mod_state *s = calloc(1, sizeof *s);
    yd = calloc(B * N * d, sizeof *yd);
    if (!x || !W || !P || !b || !s || !yd) FAIL(WBCL_ERROR_OUT_OF_MEMORY);
    if (mssa) TRY(wbcl_mssa_create(e->ctx, d, H, d / H, 0, W, P, b, &s->mssa));
    else TRY(wbcl_mha_create(e->ctx, d, H, 0, W, NULL, P, b, &s->mha));
    s->x = tens(e, &st, 3, B, N, d, 0, x);
    s->y = tens(e, &st, 3, B, N, d, 0, NULL);
    if (st) goto done;
    TRY(mod_call(e->ctx, s));
    TRY(readback(e, s->y, &y));
    if (mssa) wbcl_ref_mssa(B, N, d, H, d / H, 0, xd, Wd, Pd, bd, yd);
    else wbcl_ref_mha(B, N, d, H, 0, xd, Wd, NULL, Pd, bd, yd);
    c->err = relerr(y, yd, B * N * d);
    c->tol = 1e-4;
    double proj = 2.0 * B * N * d * d * (mssa ? 2 : 4);
    c->flops = proj + 4.0 * B * N * N * d;
    c->bytes = 4.0 * (2 * B * N * d + 4 * d * d);
    snprintf(c->shape, sizeof c->shape, "B=%zu N=%zu d=%zu heads=%zu", B, N, d, H);
done:
    if (st) { msg(why, wl, e, st); if (s) mod_free(s); s = NULL; }
    c->call = mod_call; c->state = s; c->cleanup = mod_free;
    free(x); free(W); free(P); free(b); free(y); free(xd); free(Wd); free(Pd); free(bd); free(yd);
    return st;
}
static wbcl_status mha_prep(env *e, op_case *c, char *w, size_t l) { return mod_prep(e, c, w, l, 0); }
static wbcl_status mssa_mod_prep(env *e, op_case *c, char *w, size_t l) { return mod_prep(e, c, w, l, 1); }

/* ---- ISTA, LASSO ------------------------------------------------------------------------------ */
enum { I_TWO_GEMM, I_FOLDED, I_LASSO };
typedef struct { int kind; wbcl_ista_layer *layer; wbcl_tensor *x, *W, *y; wbcl_lasso_opts lo; } ista_state;
static wbcl_status ista_call(wbcl_context *ctx, void *s_)
{
    ista_state *s = s_;
    if (s->kind == I_LASSO) {
        wbcl_status st = wbcl_tensor_fill(ctx, s->y, 0.0f);
        return st ? st : wbcl_lasso(ctx, s->x, s->W, &s->lo, s->y, NULL);
    }
    return wbcl_ista_layer_forward(ctx, s->layer, s->x, s->y);
}
static void ista_free(void *s_)
{
    ista_state *s = s_;
    wbcl_ista_layer_destroy(s->layer);
    wbcl_tensor_destroy(s->x); wbcl_tensor_destroy(s->W); wbcl_tensor_destroy(s->y);
    free(s);
}
static wbcl_status ista_prep(env *e, op_case *c, char *why, size_t wl, int kind)
{
    size_t R = e->quick ? 50 : 4096, d = e->quick ? 24 : 384, m = kind == I_LASSO ? (e->quick ? 40 : 768) : d;
    size_t T = e->quick ? 5 : 20;
    wbcl_status st = WBCL_SUCCESS;
    double *xd = NULL, *Wd = NULL, *yd = NULL;
    float *x = rnd(e, R * d, -1, 1, &xd), *W = rnd(e, d * m, -0.1, 0.1, &Wd), *y = NULL;
    ista_state *s = calloc(1, sizeof *s);
    yd = calloc(R * m, sizeof *yd);
    if (!x || !W || !s || !yd) FAIL(WBCL_ERROR_OUT_OF_MEMORY);
    s->kind = kind;
    s->x = tens(e, &st, 2, R, d, 0, 0, x);
    s->W = tens(e, &st, 2, d, m, 0, 0, W);
    s->y = tens(e, &st, 2, R, m, 0, 0, NULL);
    if (st) goto done;
    if (kind == I_LASSO) {
        s->lo = wbcl_lasso_defaults();
        s->lo.steps = T;
        s->lo.L = wbcl_ref_spectral_norm_sq(d, m, Wd);
        s->lo.step = 1.0 / s->lo.L;
    } else {
        TRY(wbcl_ista_layer_create(e->ctx, s->W, 0.1f, 0.1f, WBCL_THRESHOLD_RELU,
                                   kind == I_FOLDED ? WBCL_ISTA_FOLDED : WBCL_ISTA_TWO_GEMM, &s->layer));
    }
    TRY(ista_call(e->ctx, s));
    TRY(readback(e, s->y, &y));
    if (kind == I_LASSO) {
        wbcl_ref_lasso(R, d, m, xd, Wd, s->lo.lambd, 1, 0, (double)(float)s->lo.step, T, yd, NULL);
        c->flops = 4.0 * R * d * m * T;
    } else {
        wbcl_ref_ista(R, d, d, xd, NULL, Wd, 0.1, 0.1, 0, yd);
        c->flops = (kind == I_FOLDED ? 2.0 : 4.0) * R * d * d;
    }
    c->err = relerr(y, yd, R * m);
    c->tol = kind == I_LASSO ? 1e-4 * sqrt((double)T) : 1e-5 * sqrt((double)d);
    c->bytes = 4.0 * (R * d + R * m + d * m);
    snprintf(c->shape, sizeof c->shape, kind == I_LASSO ? "rows=%zu d=%zu m=%zu T=%zu" : "rows=%zu d=%zu", R, d, m, T);
done:
    if (st) { msg(why, wl, e, st); if (s) ista_free(s); s = NULL; }
    c->call = ista_call; c->state = s; c->cleanup = ista_free;
    free(x); free(W); free(y); free(xd); free(Wd); free(yd);
    return st;
}
static wbcl_status ista_two_prep(env *e, op_case *c, char *w, size_t l) { return ista_prep(e, c, w, l, I_TWO_GEMM); }
static wbcl_status ista_folded_prep(env *e, op_case *c, char *w, size_t l) { return ista_prep(e, c, w, l, I_FOLDED); }
static wbcl_status lasso_prep(env *e, op_case *c, char *w, size_t l) { return ista_prep(e, c, w, l, I_LASSO); }

/* ---- SPD linear algebra --------------------------------------------------------------------- */
enum { L_CHOL, L_INV, L_SOLVE, L_LOGDET };
typedef struct { int kind; wbcl_tensor *A, *B, *X; } la_state;
static wbcl_status la_call(wbcl_context *ctx, void *s_)
{
    la_state *s = s_;
    switch (s->kind) {
    case L_CHOL: return wbcl_cholesky(ctx, s->A, s->X);
    case L_INV: return wbcl_spd_inverse(ctx, s->A, s->X);
    case L_SOLVE: return wbcl_spd_solve(ctx, s->A, s->B, s->X);
    default: return wbcl_logdet_spd(ctx, s->A, s->X);
    }
}
static void la_free(void *s_)
{
    la_state *s = s_;
    wbcl_tensor_destroy(s->A); wbcl_tensor_destroy(s->B); wbcl_tensor_destroy(s->X);
    free(s);
}
static wbcl_status la_prep(env *e, op_case *c, char *why, size_t wl, int kind)
{
    size_t bt = e->quick ? 3 : 64, n = e->quick ? 17 : 128, r = 8;
    wbcl_status st = WBCL_SUCCESS;
    double *Gd = NULL, *Bd = NULL;
    float *G = rnd(e, bt * n * n, -1, 1, &Gd), *Bm = rnd(e, bt * n * r, -1, 1, &Bd), *X = NULL;
    float *A = malloc(bt * n * n * sizeof *A);
    double *Ad = malloc(bt * n * n * sizeof *Ad), *Xd = calloc(bt * n * n, sizeof *Xd);
    la_state *s = calloc(1, sizeof *s);
    if (!G || !Bm || !A || !Ad || !Xd || !s) FAIL(WBCL_ERROR_OUT_OF_MEMORY);
    for (size_t b = 0; b < bt; b++) /* A = G G^T / n + I, rounded to float first */
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double acc = i == j ? 1.0 : 0.0;
                for (size_t l = 0; l < n; l++) acc += Gd[(b * n + i) * n + l] * Gd[(b * n + j) * n + l] / (double)n;
                A[(b * n + i) * n + j] = (float)acc;
                Ad[(b * n + i) * n + j] = (float)acc;
            }
    s->kind = kind;
    s->A = tens(e, &st, 3, bt, n, n, 0, A);
    s->B = tens(e, &st, 3, bt, n, r, 0, Bm);
    if (kind == L_LOGDET) s->X = tens(e, &st, 1, bt, 0, 0, 0, NULL);
    else if (kind == L_SOLVE) s->X = tens(e, &st, 3, bt, n, r, 0, NULL);
    else s->X = tens(e, &st, 3, bt, n, n, 0, NULL);
    if (st) goto done;
    TRY(la_call(e->ctx, s));
    TRY(readback(e, s->X, &X));
    size_t per = kind == L_LOGDET ? 1 : kind == L_SOLVE ? n * r : n * n;
    for (size_t b = 0; b < bt; b++) {
        const double *Ab = Ad + b * n * n;
        double *Xb = Xd + b * per;
        if (kind == L_CHOL) wbcl_ref_cholesky(n, Ab, Xb);
        else if (kind == L_INV) wbcl_ref_spd_inverse(n, Ab, Xb);
        else if (kind == L_SOLVE) wbcl_ref_spd_solve(n, r, Ab, Bd + b * n * r, Xb);
        else wbcl_ref_logdet_spd(n, Ab, Xb);
    }
    c->err = relerr(X, Xd, bt * per);
    c->tol = 1e-5 * n;
    c->flops = bt * (kind == L_CHOL || kind == L_LOGDET ? n * n * n / 3.0 : kind == L_INV ? n * n * n : n * n * n / 3.0 + 2.0 * n * n * r);
    c->bytes = 4.0 * bt * (n * n + per);
    snprintf(c->shape, sizeof c->shape, kind == L_SOLVE ? "batch=%zu n=%zu r=%zu" : "batch=%zu n=%zu", bt, n, r);
done:
    if (st) { msg(why, wl, e, st); if (s) la_free(s); s = NULL; }
    c->call = la_call; c->state = s; c->cleanup = la_free;
    free(G); free(Bm); free(A); free(X); free(Gd); free(Bd); free(Ad); free(Xd);
    return st;
}
#define LA(fn, kind) static wbcl_status fn(env *e, op_case *c, char *w, size_t l) { return la_prep(e, c, w, l, kind); }
LA(chol_prep, L_CHOL)
LA(inv_prep, L_INV)
LA(solve_prep, L_SOLVE)
LA(logdet_prep, L_LOGDET)

/* ---- measures ------------------------------------------------------------------------------- */
enum { M_RATE, M_SPARSITY };
typedef struct { int kind; wbcl_tensor *Z; double out[64]; } meas_state;
static wbcl_status meas_call(wbcl_context *ctx, void *s_)
{
    meas_state *s = s_;
    return s->kind == M_RATE ? wbcl_coding_rate(ctx, s->Z, 0.5, s->out) : wbcl_sparsity(ctx, s->Z, 0.5f, s->out);
}
static void meas_free(void *s_) { meas_state *s = s_; wbcl_tensor_destroy(s->Z); free(s); }
static wbcl_status meas_prep(env *e, op_case *c, char *why, size_t wl, int kind)
{
    size_t bt = e->quick ? 2 : 8, N = e->quick ? 40 : 1024, d = e->quick ? 12 : 128;
    wbcl_status st = WBCL_SUCCESS;
    double *Zd = NULL, want[64], got[64];
    float *Z = rnd(e, bt * N * d, -1, 1, &Zd);
    meas_state *s = calloc(1, sizeof *s);
    if (!Z || !s) FAIL(WBCL_ERROR_OUT_OF_MEMORY);
    s->kind = kind;
    s->Z = tens(e, &st, 3, bt, N, d, 0, Z);
    if (st) goto done;
    TRY(meas_call(e->ctx, s));
    float gf[64];
    for (size_t b = 0; b < bt; b++) {
        want[b] = kind == M_RATE ? wbcl_ref_coding_rate(N, d, Zd + b * N * d, 0.5)
                                 : wbcl_ref_sparsity(N, d, Zd + b * N * d, 0.5);
        got[b] = s->out[b];
        gf[b] = (float)got[b];
    }
    c->err = relerr(gf, want, bt);
    c->tol = 1e-4;
    c->flops = kind == M_RATE ? bt * (2.0 * N * d * d + d * d * d / 3.0) : 0;
    c->bytes = 4.0 * bt * N * d;
    snprintf(c->shape, sizeof c->shape, "batch=%zu N=%zu d=%zu", bt, N, d);
done:
    if (st) { msg(why, wl, e, st); if (s) meas_free(s); s = NULL; }
    c->call = meas_call; c->state = s; c->cleanup = meas_free;
    free(Z); free(Zd);
    return st;
}
static wbcl_status rate_prep(env *e, op_case *c, char *w, size_t l) { return meas_prep(e, c, w, l, M_RATE); }
static wbcl_status sparsity_prep(env *e, op_case *c, char *w, size_t l) { return meas_prep(e, c, w, l, M_SPARSITY); }

/* ---- ReduNet: construct (fit) and apply ------------------------------------------------------- */
typedef struct { int apply; wbcl_tensor *X, *Z; int *labels; int K; wbcl_redunet_params p; wbcl_redunet *net; } rdn_state;
static wbcl_status rdn_call(wbcl_context *ctx, void *s_)
{
    rdn_state *s = s_;
    if (s->apply) return wbcl_redunet_apply(ctx, s->net, s->X, s->Z);
    wbcl_redunet *net = NULL;
    wbcl_status st = wbcl_redunet_fit(ctx, s->X, s->labels, s->K, &s->p, NULL, NULL, s->Z, &net);
    wbcl_redunet_destroy(net);
    return st;
}
static void rdn_free(void *s_)
{
    rdn_state *s = s_;
    wbcl_redunet_destroy(s->net);
    wbcl_tensor_destroy(s->X); wbcl_tensor_destroy(s->Z);
    free(s->labels);
    free(s);
}
static wbcl_status rdn_prep(env *e, op_case *c, char *why, size_t wl, int apply)
{
    size_t d = e->quick ? 6 : 16, per = e->quick ? 20 : 500;
    int K = 3, L = e->quick ? 3 : 20;
    size_t m = per * (size_t)K;
    wbcl_status st = WBCL_SUCCESS;
    float *X = malloc(m * d * sizeof *X), *Z = NULL;
    double *Zd = malloc(m * d * sizeof *Zd);
    rdn_state *s = calloc(1, sizeof *s);
    if (!X || !Zd || !s || !(s->labels = malloc(m * sizeof(int)))) FAIL(WBCL_ERROR_OUT_OF_MEMORY);
    TRY(wbcl_redunet_gaussians(d, K, per, 0.1, NULL, e->seed, X, s->labels));
    s->apply = apply;
    s->K = K;
    s->p = wbcl_redunet_default_params();
    s->p.layers = L;
    s->X = tens(e, &st, 2, m, d, 0, 0, X);
    s->Z = tens(e, &st, 2, m, d, 0, 0, NULL);
    if (st) goto done;
    if (apply) TRY(wbcl_redunet_fit(e->ctx, s->X, s->labels, K, &s->p, NULL, NULL, NULL, &s->net));
    TRY(rdn_call(e->ctx, s));
    TRY(readback(e, s->Z, &Z));
    for (size_t i = 0; i < m * d; i++) Zd[i] = X[i];
    wbcl_ref_redunet_fit(m, d, (size_t)K, (size_t)L, s->labels, s->p.eta, s->p.eps2, s->p.lambda, Zd, NULL, NULL,
                         NULL, NULL);
    c->err = relerr(Z, Zd, m * d);
    c->tol = 1e-3; /* L layers of float against double; test_redunet bounds the growth per layer */
    /* per layer: K+1 Grams (2 m d^2) and solves (d^3) to construct, (K+1) d x d products per row to apply */
    c->flops = (double)L * ((apply ? 0 : 2.0 * m * d * d + (K + 1) * d * d * d) + 2.0 * (K + 1) * m * d * d);
    c->bytes = 4.0 * (2.0 * m * d + (double)L * (K + 1) * d * d);
    snprintf(c->shape, sizeof c->shape, "m=%zu d=%zu K=%d L=%d", m, d, K, L);
done:
    if (st) { msg(why, wl, e, st); if (s) rdn_free(s); s = NULL; }
    c->call = rdn_call; c->state = s; c->cleanup = rdn_free;
    free(X); free(Z); free(Zd);
    return st;
}
static wbcl_status rdn_fit_prep(env *e, op_case *c, char *w, size_t l) { return rdn_prep(e, c, w, l, 0); }
static wbcl_status rdn_apply_prep(env *e, op_case *c, char *w, size_t l) { return rdn_prep(e, c, w, l, 1); }

/* ---- the operator table: one line per operator --------------------------------------------------- */
static const bench_op OPS[] = {
    {"gemm.packed", "gemm", gemm_packed_prep},
    {"gemm.clblast", "gemm", gemm_clblast_prep},
    {"layernorm", "ops", layernorm_prep},
    {"gelu", "ops", gelu_prep},
    {"softmax", "ops", softmax_prep},
    {"add.bias", "ops", add_prep},
    {"scale", "ops", scale_prep},
    {"relu", "ops", relu_prep},
    {"axpby", "ops", axpby_prep},
    {"reduce_rows.sum", "ops", reduce_rows_prep},
    {"reduce_cols.sum", "ops", reduce_cols_prep},
    {"heads.split", "heads", split_prep},
    {"heads.merge", "heads", merge_prep},
    {"attention.softmax", "attention", att_softmax_prep},
    {"attention.causal", "attention", att_causal_prep},
    {"attention.mssa", "attention", att_mssa_prep},
    {"attention.tssa", "tssa", att_tssa_prep},
    {"attention.tssa_causal", "tssa", att_tssa_causal_prep},
    {"attention.xca", "xca", att_xca_prep},
    {"attention.aot", "aot", att_aot_prep},
    {"attention.energy", "energy", att_energy_prep},
    {"model.mha_forward", "attention", mha_prep},
    {"model.mssa_forward", "attention", mssa_mod_prep},
    {"ista.two_gemm", "ista", ista_two_prep},
    {"ista.folded", "ista", ista_folded_prep},
    {"lasso.ista", "ista", lasso_prep},
    {"linalg.cholesky", "linalg", chol_prep},
    {"linalg.spd_inverse", "linalg", inv_prep},
    {"linalg.spd_solve", "linalg", solve_prep},
    {"linalg.logdet", "linalg", logdet_prep},
    {"measures.coding_rate", "measures", rate_prep},
    {"measures.sparsity", "measures", sparsity_prep},
    {"redunet.construct", "redunet", rdn_fit_prep},
    {"redunet.apply", "redunet", rdn_apply_prep},
};
#define N_OPS (sizeof OPS / sizeof OPS[0])

/* ---- peak probes (raw OpenCL on the same device) ----------------------------------------------- */
/* FMA probe: 8 independent chains of float16 per work-item (one 512-bit register each on an
 * AVX-512 CPU, where PoCL does not vectorize across work-items of a kernel with a loop; GPU
 * compilers split the vectors into scalar registers). 2 * 16 * 8 FLOP per iteration. */
static const char *probe_src =
    "__kernel void probe_fma(__global float *out, float a, float b, int iters) {\n"
    "  size_t g = get_global_id(0);\n"
    "  float16 base = (float16)(0.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f, 10.f, 11.f, 12.f, 13.f, 14.f, 15.f)\n"
    "                 * 1e-3f + (float)g * 1e-9f;\n"
    "  float16 x0 = base, x1 = base + 0.1f, x2 = base + 0.2f, x3 = base + 0.3f, x4 = base + 0.4f,\n"
    "          x5 = base + 0.5f, x6 = base + 0.6f, x7 = base + 0.7f;\n"
    "  for (int i = 0; i < iters; i++) {\n"
    "    x0 = fma(x0, (float16)a, (float16)b); x1 = fma(x1, (float16)a, (float16)b); x2 = fma(x2, (float16)a, (float16)b); x3 = fma(x3, (float16)a, (float16)b);\n"
    "    x4 = fma(x4, (float16)a, (float16)b); x5 = fma(x5, (float16)a, (float16)b); x6 = fma(x6, (float16)a, (float16)b); x7 = fma(x7, (float16)a, (float16)b);\n"
    "  }\n"
    "  float16 s = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;\n"
    "  out[g] = s.s0 + s.s1 + s.s2 + s.s3 + s.s4 + s.s5 + s.s6 + s.s7 + s.s8 + s.s9 + s.sa + s.sb + s.sc\n"
    "         + s.sd + s.se + s.sf;\n"
    "}\n"
    "__kernel void probe_copy(__global const float4 *in, __global float4 *out, int per) {\n"
    "  size_t g = get_global_id(0);\n"
    "  if (per == 1) { out[g] = in[g]; return; }\n"
    "  for (int i = 0; i < per; i++) out[g * per + i] = in[g * per + i];\n"
    "}\n";

typedef struct peak { double gflops, gbs; char note[160]; } peak;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static cl_device_id find_device(const wbcl_device_info *di)
{
    cl_uint np = 0;
    if (clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || di->platform_index >= np) return NULL;
    cl_platform_id *pl = malloc(np * sizeof *pl);
    cl_device_id dev = NULL;
    if (pl && clGetPlatformIDs(np, pl, NULL) == CL_SUCCESS) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(pl[di->platform_index], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) == CL_SUCCESS &&
            di->device_index < nd) {
            cl_device_id *ds = malloc(nd * sizeof *ds);
            if (ds && clGetDeviceIDs(pl[di->platform_index], CL_DEVICE_TYPE_ALL, nd, ds, NULL) == CL_SUCCESS)
                dev = ds[di->device_index];
            free(ds);
        }
    }
    free(pl);
    return dev;
}

/* Shortest profiled duration of one kernel launch over reps, in seconds: a peak is the best
 * the device does, and on a shared machine the median measures the neighbours too. */
static double time_kernel(cl_command_queue q, cl_kernel k, size_t global, size_t local, int reps)
{
    double t[16];
    if (reps > 16) reps = 16;
    for (int r = -1; r < reps; r++) {
        cl_event ev = NULL;
        if (clEnqueueNDRangeKernel(q, k, 1, NULL, &global, local ? &local : NULL, 0, NULL, &ev) != CL_SUCCESS) return -1;
        clWaitForEvents(1, &ev);
        cl_ulong a = 0, b = 0;
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL);
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
        clReleaseEvent(ev);
        if (r >= 0) t[r] = (double)(b - a) * 1e-9;
    }
    double best = t[0];
    for (int r = 1; r < reps; r++) best = t[r] < best ? t[r] : best;
    return best;
}

static void measure_peak(const wbcl_device_info *di, int quick, peak *pk)
{
    memset(pk, 0, sizeof *pk);
    cl_device_id dev = find_device(di);
    if (!dev) { snprintf(pk->note, sizeof pk->note, "device not found for the probes"); return; }
    if (!di->has_profiling) { snprintf(pk->note, sizeof pk->note, "no queue profiling: no peak probes"); return; }
    cl_int e;
    cl_context cx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
    if (e != CL_SUCCESS) { snprintf(pk->note, sizeof pk->note, "probe context: error %d", (int)e); return; }
    cl_command_queue q = clCreateCommandQueue(cx, dev, CL_QUEUE_PROFILING_ENABLE, &e);
    cl_program p = clCreateProgramWithSource(cx, 1, &probe_src, NULL, &e);
    if (e == CL_SUCCESS) e = clBuildProgram(p, 1, &dev, "", NULL, NULL);
    cl_kernel kf = NULL, kc = NULL;
    if (e == CL_SUCCESS) kf = clCreateKernel(p, "probe_fma", &e);
    if (e == CL_SUCCESS) kc = clCreateKernel(p, "probe_copy", &e);
    size_t gf = (size_t)(di->compute_units ? di->compute_units : 1) * 1024;
    if (gf < 8192) gf = 8192;
    size_t copy_bytes = quick ? ((size_t)16 << 20) : ((size_t)64 << 20);
    if (copy_bytes > di->max_alloc_size / 2) copy_bytes = (size_t)(di->max_alloc_size / 2);
    cl_mem out = NULL, a = NULL, b = NULL;
    if (e == CL_SUCCESS) out = clCreateBuffer(cx, CL_MEM_WRITE_ONLY, gf * sizeof(float), NULL, &e);
    if (e == CL_SUCCESS) a = clCreateBuffer(cx, CL_MEM_READ_WRITE, copy_bytes, NULL, &e);
    if (e == CL_SUCCESS) b = clCreateBuffer(cx, CL_MEM_READ_WRITE, copy_bytes, NULL, &e);
    if (e == CL_SUCCESS) {
        float fa = 0.999f, fb = 0.001f;
        cl_int iters = 256; /* short launches: fewer preemptions on a shared machine */
        clSetKernelArg(kf, 0, sizeof out, &out);
        clSetKernelArg(kf, 1, sizeof fa, &fa);
        clSetKernelArg(kf, 2, sizeof fb, &fb);
        clSetKernelArg(kf, 3, sizeof iters, &iters);
        float zero = 0;
        clEnqueueFillBuffer(q, a, &zero, sizeof zero, 0, copy_bytes, 0, NULL, NULL);
        clSetKernelArg(kc, 0, sizeof a, &a);
        clSetKernelArg(kc, 1, sizeof b, &b);
        /* CPUs: a contiguous 4 KiB block per work-item (streams); GPUs: one float4 per work-item
         * (coalesced) */
        cl_int per = di->type == WBCL_DEVICE_CPU ? 256 : 1;
        clSetKernelArg(kc, 2, sizeof per, &per);
        size_t lc = di->max_work_group_size >= 256 ? 256 : di->max_work_group_size;
        double tf = time_kernel(q, kf, gf, 0, quick ? 3 : 15);
        size_t gc = copy_bytes / 16 / (size_t)per;
        double tc = time_kernel(q, kc, per == 1 ? gc / lc * lc : gc, per == 1 ? lc : 0, quick ? 3 : 15);
        if (tf > 0) pk->gflops = 2.0 * 16 * 8 * iters * (double)gf / tf * 1e-9;
        if (tc > 0) pk->gbs = 2.0 * 16.0 * (double)gc * per / tc * 1e-9;
    } else {
        snprintf(pk->note, sizeof pk->note, "probe kernels failed: OpenCL error %d", (int)e);
    }
    if (out) clReleaseMemObject(out);
    if (a) clReleaseMemObject(a);
    if (b) clReleaseMemObject(b);
    if (kf) clReleaseKernel(kf);
    if (kc) clReleaseKernel(kc);
    if (p) clReleaseProgram(p);
    if (q) clReleaseCommandQueue(q);
    clReleaseContext(cx);
}

/* ---- results ---------------------------------------------------------------------------------- */
typedef enum { R_OK, R_FAIL, R_UNSUPPORTED, R_ERROR } row_status;
static const char *row_status_name[] = {"ok", "FAIL", "unsupported", "error"};

typedef struct row {
    size_t dev;           /* index into the device table */
    const bench_op *op;
    row_status status;
    char shape[96];
    double err, tol;
    double kernel_ms;     /* median; < 0: not available */
    double wall_ms;       /* median */
    double rate;          /* GFLOP/s or GB/s */
    int rate_is_flops;
    double frac_peak;     /* of the matching peak; < 0: unknown */
    char reason[512];
} row;

typedef struct device_rec { wbcl_device_info info; peak pk; } device_rec;

static void run_op(env *e, const bench_op *op, int reps, const peak *pk, row *r)
{
    op_case c;
    memset(&c, 0, sizeof c);
    r->op = op;
    r->kernel_ms = r->wall_ms = -1;
    r->frac_peak = -1;
    wbcl_context_set_gemm_backend(e->ctx, WBCL_GEMM_AUTO);
    wbcl_status st = op->prepare(e, &c, r->reason, sizeof r->reason);
    snprintf(r->shape, sizeof r->shape, "%s", c.shape);
    if (st) {
        r->status = st == WBCL_ERROR_UNSUPPORTED || st == WBCL_ERROR_DEVICE_LIMIT || st == WBCL_ERROR_BUILD
                        ? R_UNSUPPORTED : R_ERROR;
        return;
    }
    r->err = c.err;
    r->tol = c.tol;
    if (!(c.err <= c.tol)) {
        r->status = R_FAIL;
        snprintf(r->reason, sizeof r->reason, "relative error %.3g exceeds %.3g: not timed", c.err, c.tol);
        c.cleanup(c.state);
        return;
    }
    const wbcl_device_info *di = wbcl_context_device(e->ctx);
    double *wall = malloc((size_t)reps * sizeof *wall), *kern = malloc((size_t)reps * sizeof *kern);
    int have_kernel = di->has_profiling;
    if (!wall || !kern) st = WBCL_ERROR_OUT_OF_MEMORY;
    /* warm-up, then reps of wall time (untimed kernels), then reps with profiling */
    if (!st) st = c.call(e->ctx, c.state);
    if (!st) st = wbcl_context_finish(e->ctx);
    for (int i = 0; i < reps && !st; i++) {
        uint64_t t0 = now_ns();
        st = c.call(e->ctx, c.state);
        if (!st) st = wbcl_context_finish(e->ctx);
        wall[i] = (double)(now_ns() - t0) * 1e-6;
    }
    if (have_kernel && !st) {
        st = wbcl_context_set_timing(e->ctx, 1);
        for (int i = 0; i < reps && !st; i++) {
            wbcl_context_reset_kernel_ns(e->ctx);
            st = c.call(e->ctx, c.state);
            kern[i] = (double)wbcl_context_kernel_ns(e->ctx) * 1e-6;
        }
        wbcl_context_set_timing(e->ctx, 0);
    }
    if (st) {
        r->status = R_ERROR;
        msg(r->reason, sizeof r->reason, e, st);
    } else {
        r->status = R_OK;
        r->wall_ms = median(wall, reps);
        r->kernel_ms = have_kernel ? median(kern, reps) : -1;
        double t = (r->kernel_ms > 0 ? r->kernel_ms : r->wall_ms) * 1e-3;
        r->rate_is_flops = c.flops > 0;
        r->rate = (c.flops > 0 ? c.flops : c.bytes) / t * 1e-9;
        double pv = r->rate_is_flops ? pk->gflops : pk->gbs;
        r->frac_peak = pv > 0 ? r->rate / pv : -1;
    }
    free(wall);
    free(kern);
    c.cleanup(c.state);
}

/* ---- output ----------------------------------------------------------------------------------- */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static void csv_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
    fputc('"', f);
}

static void num(FILE *f, double v, const char *fmt)
{
    if (v < 0 || !isfinite(v)) fputs("", f);
    else fprintf(f, fmt, v);
}

static int write_csv(const char *path, const device_rec *devs, const row *rows, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "# wbcl-bench format %d\n", BENCH_FORMAT_VERSION);
    fprintf(f, "format_version,device_index,device,driver,op,family,shape,status,rel_err,tolerance,kernel_ms,wall_ms,"
               "rate,unit,fraction_of_peak,peak_gflops,peak_gbs,reason\n");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        const device_rec *d = &devs[r->dev];
        fprintf(f, "%d,%zu,", BENCH_FORMAT_VERSION, d->info.index);
        csv_str(f, d->info.name); fputc(',', f);
        csv_str(f, d->info.driver_version); fputc(',', f);
        fprintf(f, "%s,%s,", r->op->name, r->op->family);
        csv_str(f, r->shape);
        fprintf(f, ",%s,", row_status_name[r->status]);
        if (r->status == R_OK || r->status == R_FAIL) fprintf(f, "%.3g,%.3g", r->err, r->tol);
        else fputs(",", f);
        fputc(',', f); num(f, r->kernel_ms, "%.4f");
        fputc(',', f); num(f, r->wall_ms, "%.4f");
        fputc(',', f); num(f, r->status == R_OK ? r->rate : -1, "%.3f");
        fprintf(f, ",%s,", r->status != R_OK ? "" : r->rate_is_flops ? "GFLOP/s" : "GB/s");
        num(f, r->frac_peak, "%.4f");
        fputc(',', f); num(f, d->pk.gflops, "%.2f");
        fputc(',', f); num(f, d->pk.gbs, "%.2f");
        fputc(',', f); csv_str(f, r->reason);
        fputc('\n', f);
    }
    return fclose(f);
}

static void jnum(FILE *f, double v)
{
    if (v < 0 || !isfinite(v)) fputs("null", f);
    else fprintf(f, "%.6g", v);
}

static int write_json(const char *path, const device_rec *devs, size_t nd, const row *rows, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\n  \"format\": \"wbcl-bench\",\n  \"format_version\": %d,\n  \"devices\": [\n", BENCH_FORMAT_VERSION);
    for (size_t i = 0; i < nd; i++) {
        fprintf(f, "    {\"index\": %zu, \"name\": ", devs[i].info.index);
        json_str(f, devs[i].info.name);
        fputs(", \"vendor\": ", f); json_str(f, devs[i].info.vendor);
        fputs(", \"driver\": ", f); json_str(f, devs[i].info.driver_version);
        fputs(", \"platform\": ", f); json_str(f, devs[i].info.platform_name);
        fprintf(f, ", \"type\": \"%s\", \"peak_gflops\": ", wbcl_device_type_name(devs[i].info.type));
        jnum(f, devs[i].pk.gflops);
        fputs(", \"peak_gbs\": ", f); jnum(f, devs[i].pk.gbs);
        fprintf(f, "}%s\n", i + 1 < nd ? "," : "");
    }
    fputs("  ],\n  \"results\": [\n", f);
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        fprintf(f, "    {\"device_index\": %zu, \"op\": \"%s\", \"family\": \"%s\", \"shape\": ", devs[r->dev].info.index,
                r->op->name, r->op->family);
        json_str(f, r->shape);
        fprintf(f, ", \"status\": \"%s\", \"rel_err\": ", row_status_name[r->status]);
        jnum(f, r->status == R_OK || r->status == R_FAIL ? r->err : -1);
        fputs(", \"tolerance\": ", f); jnum(f, r->status == R_OK || r->status == R_FAIL ? r->tol : -1);
        fputs(", \"kernel_ms\": ", f); jnum(f, r->kernel_ms);
        fputs(", \"wall_ms\": ", f); jnum(f, r->wall_ms);
        fputs(", \"rate\": ", f); jnum(f, r->status == R_OK ? r->rate : -1);
        fprintf(f, ", \"unit\": %s", r->status != R_OK ? "null" : r->rate_is_flops ? "\"GFLOP/s\"" : "\"GB/s\"");
        fputs(", \"fraction_of_peak\": ", f); jnum(f, r->frac_peak);
        fputs(", \"reason\": ", f); json_str(f, r->reason);
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fputs("  ]\n}\n", f);
    return fclose(f);
}

static void xml_str(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* Horizontal bars: per operator, one bar per device, length = fraction of that device's peak
 * (FMA rate for FLOP-bound ops, copy bandwidth for the others), the rate printed beside it. */
static int write_svg(const char *path, const device_rec *devs, size_t nd, const row *rows, size_t n)
{
    static const char *colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1"};
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    size_t nops = N_OPS;
    double bar = 12, gap = 8, left = 190, width = 560, top = 50 + 18.0 * (double)nd;
    double height = top + (double)nops * ((double)nd * bar + gap) + 40;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
               "font-size=\"11\">\n", left + width + 160, height);
    fprintf(f, "<text x=\"10\" y=\"20\" font-size=\"14\">wbcl-bench: fraction of each device's measured peak "
               "(FMA rate or copy bandwidth), format %d</text>\n", BENCH_FORMAT_VERSION);
    for (size_t d = 0; d < nd; d++) {
        fprintf(f, "<rect x=\"10\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"26\" y=\"%.0f\">",
                32 + 18.0 * (double)d, colors[d % 7], 41 + 18.0 * (double)d);
        xml_str(f, devs[d].info.name);
        fprintf(f, " (driver ");
        xml_str(f, devs[d].info.driver_version);
        fprintf(f, "; peak %.1f GFLOP/s, %.1f GB/s)</text>\n", devs[d].pk.gflops, devs[d].pk.gbs);
    }
    for (int t = 0; t <= 4; t++) {
        double x = left + width * t / 4.0;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ccc\"/>"
                   "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d%%</text>\n",
                x, top - 4, x, height - 30, x, height - 16, t * 25);
    }
    for (size_t o = 0; o < nops; o++) {
        double y0 = top + (double)o * ((double)nd * bar + gap);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", left - 6,
                y0 + (double)nd * bar / 2 + 4, OPS[o].name);
        for (size_t d = 0; d < nd; d++) {
            const row *r = NULL;
            for (size_t i = 0; i < n; i++)
                if (rows[i].dev == d && rows[i].op == &OPS[o]) r = &rows[i];
            double y = y0 + (double)d * bar;
            if (!r) continue;
            if (r->status != R_OK) {
                fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" fill=\"#a00\">%s</text>\n", left + 4, y + bar - 2,
                        row_status_name[r->status]);
                continue;
            }
            double fr = r->frac_peak < 0 ? 0 : r->frac_peak > 1 ? 1 : r->frac_peak;
            fprintf(f, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\">%.3g %s</text>\n",
                    left, y, width * fr, bar - 2, colors[d % 7], left + width * fr + 4, y + bar - 3, r->rate,
                    r->rate_is_flops ? "GFLOP/s" : "GB/s");
        }
    }
    fputs("</svg>\n", f);
    return fclose(f);
}

static void print_table(const device_rec *d, const row *rows, size_t n)
{
    printf("\ndevice %zu: %s\n  vendor %s, driver %s, %s\n", d->info.index, d->info.name, d->info.vendor,
           d->info.driver_version, d->info.platform_name);
    if (d->pk.gflops > 0)
        printf("  measured peak: %.1f GFLOP/s (FMA probe), %.1f GB/s (copy probe)\n", d->pk.gflops, d->pk.gbs);
    else
        printf("  measured peak: unknown (%s)\n", d->pk.note);
    printf("  %-22s %-26s %-11s %9s %9s %10s %10s %12s %7s\n", "op", "shape", "status", "rel.err", "tol",
           "kernel ms", "wall ms", "rate", "%peak");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        if (r->status != R_OK) {
            printf("  %-22s %-26s %-11s %s\n", r->op->name, r->shape, row_status_name[r->status], r->reason);
            continue;
        }
        char kern[32] = "-", rate[32], fr[16] = "-";
        if (r->kernel_ms > 0) snprintf(kern, sizeof kern, "%.3f", r->kernel_ms);
        snprintf(rate, sizeof rate, "%.2f %s", r->rate, r->rate_is_flops ? "GF/s" : "GB/s");
        if (r->frac_peak >= 0) snprintf(fr, sizeof fr, "%.1f", 100 * r->frac_peak);
        printf("  %-22s %-26s %-11s %9.2e %9.2e %10s %10.3f %12s %7s\n", r->op->name, r->shape, "ok", r->err, r->tol,
               kern, r->wall_ms, rate, fr);
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: wbcl-bench [--device all|SEL] [--op SUBSTR] [--quick] [--reps N]\n"
            "                  [--csv FILE] [--json FILE] [--plot FILE.svg] [--list]\n"
            "  Runs every wbcl operator on each selected device: verifies it against the double-precision\n"
            "  reference, then reports the median kernel time (profiling events) and wall time, GFLOP/s or\n"
            "  GB/s, and the fraction of the device's measured peak (FMA and copy probe kernels).\n"
            "  --device all|SEL  all devices (default) or one selector (index, P:D, name substring, cpu, gpu)\n"
            "  --op SUBSTR       only operators whose name contains SUBSTR\n"
            "  --quick           small sizes (seconds, for tests and CI)\n"
            "  --reps N          timed repetitions per operator (default 5; median reported)\n"
            "  --csv/--json FILE machine-readable results (format version %d); --plot FILE.svg: chart\n"
            "  --list            list the operators and exit\n"
            "Exit status 0 when every supported operator verified, 1 otherwise, 2 for a bad command line.\n",
            BENCH_FORMAT_VERSION);
}

int main(int argc, char **argv)
{
    opts o = {"all", NULL, NULL, NULL, NULL, 0, 5};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--device") && has) o.device = argv[++i];
        else if (!strcmp(a, "--op") && has) o.only = argv[++i];
        else if (!strcmp(a, "--csv") && has) o.csv = argv[++i];
        else if (!strcmp(a, "--json") && has) o.json = argv[++i];
        else if (!strcmp(a, "--plot") && has) o.plot = argv[++i];
        else if (!strcmp(a, "--reps") && has) {
            char *end;
            long r = strtol(argv[++i], &end, 10);
            if (*end || r < 1 || r > 1000) { fprintf(stderr, "wbcl-bench: --reps must be 1..1000, got '%s'\n", argv[i]); return 2; }
            o.reps = (int)r;
        } else if (!strcmp(a, "--quick")) o.quick = 1;
        else if (!strcmp(a, "--list")) {
            for (size_t k = 0; k < N_OPS; k++) printf("%-24s %s\n", OPS[k].name, OPS[k].family);
            return 0;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else {
            fprintf(stderr, "wbcl-bench: %s '%s'\n", has || a[0] != '-' ? "unknown argument" : "missing value after", a);
            usage(stderr);
            return 2;
        }
    }
    size_t matched = 0;
    for (size_t k = 0; k < N_OPS; k++) matched += !o.only || strstr(OPS[k].name, o.only);
    if (!matched) { fprintf(stderr, "wbcl-bench: no operator matches '%s' (see --list)\n", o.only); return 2; }

    char err[2048] = "";
    wbcl_device_info *all = NULL;
    size_t nall = 0;
    if (wbcl_device_list(&all, &nall, err, sizeof err)) { fprintf(stderr, "wbcl-bench: %s\n", err); return 1; }
    if (err[0]) fprintf(stderr, "wbcl-bench: note: %s\n", err);
    device_rec *devs = calloc(nall, sizeof *devs);
    size_t nd = 0;
    if (!devs) { fprintf(stderr, "wbcl-bench: out of memory\n"); wbcl_device_list_free(all); return 1; }
    if (!strcmp(o.device, "all")) {
        for (size_t i = 0; i < nall; i++) devs[nd++].info = all[i];
    } else {
        size_t ch = 0;
        if (wbcl_device_select(all, nall, o.device, &ch, err, sizeof err)) {
            fprintf(stderr, "wbcl-bench: %s\n", err);
            free(devs); wbcl_device_list_free(all);
            return 1;
        }
        devs[nd++].info = all[ch];
    }
    wbcl_device_list_free(all);

    row *rows = calloc(nd * N_OPS, sizeof *rows);
    size_t nr = 0;
    int bad = 0;
    if (!rows) { fprintf(stderr, "wbcl-bench: out of memory\n"); free(devs); return 1; }
    for (size_t d = 0; d < nd; d++) {
        char sel[32];
        snprintf(sel, sizeof sel, "%zu", devs[d].info.index);
        measure_peak(&devs[d].info, o.quick, &devs[d].pk);
        env e = {NULL, o.quick, 0x5eed};
        wbcl_status st = wbcl_context_create(sel, &e.ctx, err, sizeof err);
        size_t first = nr;
        for (size_t k = 0; k < N_OPS; k++) {
            if (o.only && !strstr(OPS[k].name, o.only)) continue;
            row *r = &rows[nr++];
            r->dev = d;
            r->op = &OPS[k];
            if (st) {
                r->status = R_UNSUPPORTED;
                snprintf(r->reason, sizeof r->reason, "no context on this device: %s", err);
                continue;
            }
            e.seed = 0x5eed + k;
            run_op(&e, &OPS[k], o.reps, &devs[d].pk, r);
            if (r->status == R_FAIL || r->status == R_ERROR) bad = 1;
        }
        wbcl_context_destroy(e.ctx);
        print_table(&devs[d], rows + first, nr - first);
        fflush(stdout);
    }
    int rc = bad;
    if (o.csv && write_csv(o.csv, devs, rows, nr)) { fprintf(stderr, "wbcl-bench: cannot write '%s'\n", o.csv); rc = 1; }
    if (o.json && write_json(o.json, devs, nd, rows, nr)) { fprintf(stderr, "wbcl-bench: cannot write '%s'\n", o.json); rc = 1; }
    if (o.plot && write_svg(o.plot, devs, nd, rows, nr)) { fprintf(stderr, "wbcl-bench: cannot write '%s'\n", o.plot); rc = 1; }
    if (bad) fprintf(stderr, "wbcl-bench: some operators failed verification or failed to run (see the table)\n");
    free(rows);
    free(devs);
    return rc;
}
