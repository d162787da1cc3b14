/* Operators for wbcl-bench and wbcl-info --export-binaries: see bench_ops.h. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ops.h"

/* ---- helpers ---------------------------------------------------------------------------- */
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

static wbcl_tensor *tens_dt(env *e, wbcl_status *st, wbcl_dtype dt, int nd, size_t a, size_t b, size_t c, size_t d,
                            const float *data)
{
    size_t s[4] = {a, b, c, d};
    wbcl_tensor *t = NULL;
    if (*st) return NULL;
    *st = wbcl_tensor_create(e->ctx, nd, s, dt, data, &t);
    return t;
}
static wbcl_tensor *tens(env *e, wbcl_status *st, int nd, size_t a, size_t b, size_t c, size_t d, const float *data)
{
    return tens_dt(e, st, WBCL_F32, nd, a, b, c, d, data);
}

/* float16 rows: the reference's inputs become the values as stored (rounded to nearest even) */
static void round_half(double *d, size_t n)
{
    for (size_t i = 0; i < n; i++) d[i] = wbcl_f16_to_f32(wbcl_f32_to_f16((float)d[i]));
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
/* dt WBCL_F16: A, B and C stored as float16 (fp32 compute); verified against the reference on
 * the half-rounded inputs, with the one rounding of C (2^-11 relative) added to the bound */
static wbcl_status gemm_prep(env *e, op_case *c, char *why, size_t wl, wbcl_gemm_backend be, wbcl_dtype dt)
{
    size_t n = e->quick ? 67 : 512, m = n, k = n;
    wbcl_status st = WBCL_SUCCESS;
    double *Ad = NULL, *Bd = NULL, *Cd = NULL;
    float *A = rnd(e, m * k, -1, 1, &Ad), *B = rnd(e, k * n, -1, 1, &Bd), *C = NULL;
    gemm_state *s = calloc(1, sizeof *s);
    Cd = calloc(m * n, sizeof *Cd);
    if (!A || !B || !s || !Cd) FAIL(WBCL_ERROR_OUT_OF_MEMORY);
    s->be = be;
    s->A = tens_dt(e, &st, dt, 2, m, k, 0, 0, A);
    s->B = tens_dt(e, &st, dt, 2, k, n, 0, 0, B);
    s->C = tens_dt(e, &st, dt, 2, m, n, 0, 0, NULL);
    if (st) goto done;
    TRY(gemm_call(e->ctx, s));
    TRY(readback(e, s->C, &C));
    if (dt == WBCL_F16) round_half(Ad, m * k), round_half(Bd, k * n);
    wbcl_ref_gemm(0, 0, m, n, k, 1.0, Ad, k, Bd, n, 0.0, Cd, n);
    c->err = relerr(C, Cd, m * n);
    c->tol = 1e-5 * sqrt((double)k) + (dt == WBCL_F16 ? ldexp(1, -11) : 0);
    c->flops = 2.0 * m * n * k;
    c->bytes = (dt == WBCL_F16 ? 2.0 : 4.0) * (m * k + k * n + m * n);
    snprintf(c->shape, sizeof c->shape, "m=n=k=%zu", n);
done:
    if (st) { msg(why, wl, e, st); if (s) gemm_free(s); s = NULL; }
    c->call = gemm_call; c->state = s; c->cleanup = gemm_free;
    free(A); free(B); free(C); free(Ad); free(Bd); free(Cd);
    return st;
}
static wbcl_status gemm_packed_prep(env *e, op_case *c, char *w, size_t l) { return gemm_prep(e, c, w, l, WBCL_GEMM_PACKED, WBCL_F32); }
static wbcl_status gemm_clblast_prep(env *e, op_case *c, char *w, size_t l) { return gemm_prep(e, c, w, l, WBCL_GEMM_CLBLAST, WBCL_F32); }
static wbcl_status gemm_packed_f16_prep(env *e, op_case *c, char *w, size_t l) { return gemm_prep(e, c, w, l, WBCL_GEMM_PACKED, WBCL_F16); }
static wbcl_status gemm_clblast_f16_prep(env *e, op_case *c, char *w, size_t l) { return gemm_prep(e, c, w, l, WBCL_GEMM_CLBLAST, WBCL_F16); }
static wbcl_status gemm_tiled_prep(env *e, op_case *c, char *w, size_t l) { return gemm_prep(e, c, w, l, WBCL_GEMM_TILED, WBCL_F32); }

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
/* dt WBCL_F16 (softmax and MSSA): q, k, v and o stored as float16, fp32 compute; verified against
 * the reference on the half-rounded inputs with o's rounding (2^-11 relative) added to the bound */
static wbcl_status att_prep_dt(env *e, op_case *c, char *why, size_t wl, int kind, wbcl_dtype dt)
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
    s->q = tens_dt(e, &st, dt, 4, B, K, N, p, q);
    s->k = tens_dt(e, &st, dt, 4, B, K, N, p, k);
    s->v = tens_dt(e, &st, dt, 4, B, K, N, p, v);
    s->o = tens_dt(e, &st, dt, 4, B, K, N, p, NULL);
    s->temp = tens(e, &st, 1, K, 0, 0, 0, tmp);
    s->bias = tens(e, &st, 2, K, N, 0, 0, bias);
    s->x = tens(e, &st, 3, B, N, K * p, 0, kind == A_SPLIT ? q : NULL);
    if (st) goto done;
    TRY(att_call(e->ctx, s));
    TRY(readback(e, kind == A_MERGE ? s->x : s->o, &o));
    if (dt == WBCL_F16) round_half(qd, n), round_half(kd, n), round_half(vd, n);
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
    if (dt == WBCL_F16) c->tol += ldexp(1, -11);
    c->flops = work;
    c->bytes = (dt == WBCL_F16 ? 2.0 : 4.0) * n * (kind == A_SOFTMAX || kind == A_CAUSAL || kind == A_XCA ? 4 : 2);
    snprintf(c->shape, sizeof c->shape, "B=%zu K=%zu N=%zu p=%zu%s", B, K, N, p, dt == WBCL_F16 ? " f16" : "");
done:
    if (st) { msg(why, wl, e, st); if (s) att_free(s); s = NULL; }
    c->call = att_call; c->state = s; c->cleanup = att_free;
    free(q); free(k); free(v); free(o); free(tmp); free(bias);
    free(qd); free(kd); free(vd); free(td); free(bd); free(od);
    return st;
}
static wbcl_status att_prep(env *e, op_case *c, char *why, size_t wl, int kind)
{
    return att_prep_dt(e, c, why, wl, kind, WBCL_F32);
}
static wbcl_status att_softmax_f16_prep(env *e, op_case *c, char *w, size_t l) { return att_prep_dt(e, c, w, l, A_SOFTMAX, WBCL_F16); }
static wbcl_status att_mssa_f16_prep(env *e, op_case *c, char *w, size_t l) { return att_prep_dt(e, c, w, l, A_MSSA, WBCL_F16); }
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

/* ---- shift-invariant ReduNet (include/wbcl/circulant.h): lifting, construct, apply --------------- */
/* Sizes: 1-D m = 60 signals (K = 6 classes), C = 16 channels, T = 128; 2-D m = 32, K = 4, C = 8, 16 x 16.
 * (Smaller than the issue-6 benchmark's polar-MNIST size because the double reference takes the unitary DFT
 * by the O(N^2) definition; perf/bench_circulant.c measures that size against NumPy.) lambda = 50 keeps the
 * memberships away from saturation so the fp32-vs-double comparison measures the layer, not a softmax flip
 * (tests/test_circulant.c device_vs_reference, same tolerance argument). */
enum { CI_LIFT, CI_FIT, CI_APPLY };
typedef struct {
    int kind;
    wbcl_tensor *X, *Wt, *Z;
    int *labels, K;
    wbcl_circulant_params p;
    wbcl_circulant *net;
} circ_state;
static wbcl_status circ_call(wbcl_context *ctx, void *s_)
{
    circ_state *s = s_;
    if (s->kind == CI_LIFT) return wbcl_circulant_lift(ctx, s->X, s->Wt, s->Z);
    if (s->kind == CI_APPLY) return wbcl_circulant_apply(ctx, s->net, s->X, s->Z, NULL, NULL);
    wbcl_circulant *net = NULL;
    wbcl_status st = wbcl_circulant_fit(ctx, s->X, NULL, s->labels, s->K, &s->p, NULL, NULL, s->Z, &net);
    wbcl_circulant_destroy(net);
    return st;
}
static void circ_free(void *s_)
{
    circ_state *s = s_;
    wbcl_circulant_destroy(s->net);
    wbcl_tensor_destroy(s->X); wbcl_tensor_destroy(s->Wt); wbcl_tensor_destroy(s->Z);
    free(s->labels);
    free(s);
}
static wbcl_status circ_prep(env *e, op_case *c, char *why, size_t wl, int kind, int two_d)
{
    size_t m, C, H, W, K, Cin = 1, kh, kw;
    if (two_d) {
        m = e->quick ? 8 : 32; K = e->quick ? 2 : 4; C = e->quick ? 3 : 8; H = e->quick ? 6 : 16; W = e->quick ? 10 : 16;
        kh = kw = 3;
    } else {
        m = e->quick ? 9 : 60; K = e->quick ? 3 : 6; C = e->quick ? 4 : 16; H = 1; W = e->quick ? 30 : 128;
        kh = 1; kw = 5;
    }
    if (kind == CI_LIFT) { /* lifting: the input side of a network, more samples, Cin = 1 -> C channels */
        m = e->quick ? m : 100;
        C = two_d ? (e->quick ? 4 : 16) : (e->quick ? 5 : 20);
        if (two_d && !e->quick) H = W = 28;
        if (!two_d && !e->quick) W = 200;
    }
    size_t N = H * W, Wh = W / 2 + 1, P = H * Wh, nin = kind == CI_LIFT ? m * Cin * N : m * C * N;
    wbcl_status st = WBCL_SUCCESS;
    double *Xd = NULL, *Wd = NULL, *Zd = NULL;
    float *X = rnd(e, nin, -1, 1, &Xd), *Wt = rnd(e, C * Cin * kh * kw, -0.7, 1.3, &Wd), *Z = NULL;
    circ_state *s = calloc(1, sizeof *s);
    Zd = malloc(m * C * N * sizeof *Zd);
    if (!X || !Wt || !s || !Zd || !(s->labels = malloc(m * sizeof(int)))) FAIL(WBCL_ERROR_OUT_OF_MEMORY);
    for (size_t b = 0; b < m; b++) s->labels[b] = (int)(b % K);
    s->kind = kind;
    s->K = (int)K;
    s->p = wbcl_circulant_default_params();
    s->p.layers = 1;
    s->p.lambda = 50.0f;
    size_t cx = kind == CI_LIFT ? Cin : C;
    if (two_d) {
        s->X = tens(e, &st, 4, m, cx, H, W, X);
        s->Z = tens(e, &st, 4, m, C, H, W, NULL);
        if (kind == CI_LIFT) s->Wt = tens(e, &st, 4, C, Cin, kh, kw, Wt);
    } else {
        s->X = tens(e, &st, 3, m, cx, W, 0, X);
        s->Z = tens(e, &st, 3, m, C, W, 0, NULL);
        if (kind == CI_LIFT) s->Wt = tens(e, &st, 3, C, Cin, kw, 0, Wt);
    }
    if (st) goto done;
    if (kind == CI_APPLY)
        TRY(wbcl_circulant_fit(e->ctx, s->X, NULL, s->labels, s->K, &s->p, NULL, NULL, NULL, &s->net));
    TRY(circ_call(e->ctx, s));
    TRY(readback(e, s->Z, &Z));
    double lgN = log2((double)N), fft = 2.5 * (double)(m * C * N) * lgN; /* one real FFT of every channel */
    double apply = 8.0 * (double)(K + 1) * (double)(m * P * C * C) + 2 * fft; /* E^H v, C_j^H v; FFT in and out */
    /* construct: the per-class Gram matrices S_{j,p} (complex rank-m updates, 8 m P C^2) for the operators and
     * again for the objective's yhat groups; (K+1) complex Cholesky + inverse (4x the real C^3/3 + C^3) for the
     * operators and (K+1) Cholesky for the objective's logdets */
    double construct = 2.0 * 8.0 * (double)(m * P * C * C) +
                       (double)(K + 1) * (double)P * (16.0 / 3.0 + 4.0 / 3.0) * (double)(C * C * C);
    if (kind == CI_LIFT) {
        wbcl_ref_circ_lift(m, Cin, C, H, W, kh, kw, Xd, Wd, Zd);
        c->tol = 1e-5 * sqrt((double)(Cin * kh * kw)); /* a dot product of Cin kh kw fp32 terms */
        c->flops = 2.0 * (double)(m * C * Cin * kh * kw * N);
        c->bytes = 4.0 * (double)(nin + m * C * N);
        if (two_d) snprintf(c->shape, sizeof c->shape, "m=%zu C=%zu->%zu %zux%zu k=%zux%zu", m, Cin, C, H, W, kh, kw);
        else snprintf(c->shape, sizeof c->shape, "m=%zu C=%zu->%zu T=%zu k=%zu", m, Cin, C, W, kw);
    } else {
        memcpy(Zd, Xd, m * C * N * sizeof *Zd);
        if (wbcl_ref_circ_fit(m, C, H, W, K, 1, s->labels, s->p.eta, s->p.eps2, s->p.lambda, Zd, NULL, NULL, NULL,
                              NULL, NULL) != 0) {
            st = WBCL_ERROR_NUMERIC;
            snprintf(why, wl, "reference fit failed (empty class or not positive definite)");
            goto done_nomsg;
        }
        /* fp32 C x C solves with cond(I + a S_p) ~ 1e2-1e3 and the FFTs: ~1e-6; 1e-4 as test_circulant */
        c->tol = 1e-4;
        c->flops = kind == CI_FIT ? construct + apply : apply;
        c->bytes = 4.0 * (double)(2 * m * C * N) + 8.0 * (double)((K + 1) * P * C * C);
        if (two_d) snprintf(c->shape, sizeof c->shape, "m=%zu C=%zu %zux%zu K=%zu", m, C, H, W, K);
        else snprintf(c->shape, sizeof c->shape, "m=%zu C=%zu T=%zu K=%zu", m, C, W, K);
    }
    c->err = relerr(Z, Zd, m * C * N);
done:
    if (st) msg(why, wl, e, st);
done_nomsg:
    if (st) { if (s) circ_free(s); s = NULL; }
    c->call = circ_call; c->state = s; c->cleanup = circ_free;
    free(X); free(Wt); free(Z); free(Xd); free(Wd); free(Zd);
    return st;
}
#define CIRC(fn, kind, two_d) static wbcl_status fn(env *e, op_case *c, char *w, size_t l) { return circ_prep(e, c, w, l, kind, two_d); }
CIRC(circ_lift1_prep, CI_LIFT, 0)
CIRC(circ_lift2_prep, CI_LIFT, 1)
CIRC(circ_fit1_prep, CI_FIT, 0)
CIRC(circ_fit2_prep, CI_FIT, 1)
CIRC(circ_apply1_prep, CI_APPLY, 0)
CIRC(circ_apply2_prep, CI_APPLY, 1)

/* ---- model forwards (include/wbcl/models.h): CRATE and ToST on the committed golden models ------------ */
/* The weights and images of tests/golden (PyTorch reference modules run in float64, make_models.py), the batch
 * replicated R times; every copy's logits are compared with the golden logits (the independent check: no host
 * double model exists). The models are small (CRATE d = 48, 2 layers, 32 x 32 images; ToST d = 48, 2 blocks,
 * patch 16, 64 x 64 images): the figure is dominated by launches, as a small edge model would be.
 * Golden directory: $WBCL_GOLDEN_DIR, else the source tree's tests/golden (compiled in); absent: an
 * "unsupported" row naming the path. */
#ifndef WBCL_BENCH_GOLDEN_DIR
#define WBCL_BENCH_GOLDEN_DIR "tests/golden"
#endif
typedef struct { wbcl_crate *crate; wbcl_tost *tost; wbcl_tensor *img, *out; } model_state;
static wbcl_status model_call(wbcl_context *ctx, void *s_)
{
    model_state *s = s_;
    return s->crate ? wbcl_crate_forward(ctx, s->crate, s->img, WBCL_MODEL_LOGITS, s->out, NULL)
                    : wbcl_tost_forward(ctx, s->tost, s->img, WBCL_MODEL_LOGITS, s->out, NULL);
}
static void model_free(void *s_)
{
    model_state *s = s_;
    wbcl_crate_destroy(s->crate); wbcl_tost_destroy(s->tost);
    wbcl_tensor_destroy(s->img); wbcl_tensor_destroy(s->out);
    free(s);
}
/* key of a safetensors file as floats; numel and shape out */
static wbcl_status st_floats(const wbcl_safetensors *f, const char *key, float **out, wbcl_array *shape, char *why,
                             size_t wl)
{
    wbcl_array a;
    wbcl_status st = wbcl_safetensors_get(f, key, &a, why, wl);
    if (st) return st;
    st = wbcl_array_to_f32(&a, out, why, wl);
    *shape = a;
    shape->data = NULL;
    wbcl_array_free(&a);
    return st;
}
static wbcl_status model_prep(env *e, op_case *c, char *why, size_t wl, int tost)
{
    const char *dir = getenv("WBCL_GOLDEN_DIR");
    if (!dir || !*dir) dir = WBCL_BENCH_GOLDEN_DIR;
    char wpath[1024], gpath[1024];
    snprintf(wpath, sizeof wpath, "%s/%s", dir, tost ? "tost16.safetensors" : "crate.safetensors");
    snprintf(gpath, sizeof gpath, "%s/%s", dir, tost ? "tost16_golden.safetensors" : "crate_golden.safetensors");
    wbcl_status st = WBCL_SUCCESS;
    wbcl_safetensors *gold = NULL;
    float *img = NULL, *logits = NULL, *big = NULL, *y = NULL;
    double *want = NULL;
    model_state *s = calloc(1, sizeof *s);
    if (!s) { snprintf(why, wl, "out of memory"); return WBCL_ERROR_OUT_OF_MEMORY; }
    FILE *probe = fopen(wpath, "rb");
    if (!probe || wbcl_safetensors_open(gpath, &gold, why, wl)) {
        if (probe) fclose(probe);
        snprintf(why, wl, "golden model files not found in '%s' (set WBCL_GOLDEN_DIR to the source tree's tests/golden)",
                 dir);
        free(s);
        return WBCL_ERROR_UNSUPPORTED;
    }
    fclose(probe);
    wbcl_array ish, lsh;
    if ((st = st_floats(gold, "image", &img, &ish, why, wl)) || (st = st_floats(gold, "logits", &logits, &lsh, why, wl)))
        goto done_nomsg;
    size_t B0 = ish.shape[0], per_img = ish.shape[1] * ish.shape[2] * ish.shape[3], classes = lsh.shape[1];
    size_t R = e->quick ? 1 : 16, B = R * B0;
    big = malloc(B * per_img * sizeof *big);
    want = malloc(B * classes * sizeof *want);
    if (!big || !want) FAIL(WBCL_ERROR_OUT_OF_MEMORY);
    for (size_t r = 0; r < R; r++) {
        memcpy(big + r * B0 * per_img, img, B0 * per_img * sizeof *big);
        for (size_t i = 0; i < B0 * classes; i++) want[r * B0 * classes + i] = logits[i];
    }
    size_t Hh = ish.shape[2], Ww = ish.shape[3], d = 48, hid = 0;
    double flops = 0;
    if (tost) {
        wbcl_tost_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.dim = d; cfg.depth = 2; cfg.heads = 4; cfg.patch = 16; cfg.cls_layers = 2;
        cfg.ln_eps = 1e-6f; cfg.bn_eps = 1e-5f; /* tests/test_models.c tost_cfg(16) */
        TRY(wbcl_tost_load_file(e->ctx, wpath, &cfg, &s->tost));
        const wbcl_tost_config *k = wbcl_tost_get_config(s->tost);
        hid = k->mlp_hidden;
        /* conv stack 3 -> d/8 -> d/4 -> d/2 -> d, 3x3 stride 2 (each maps n to ceil(n/2)) */
        size_t h = Hh, w = Ww, cin = 3;
        for (int j = 0; j < 4; j++) {
            size_t cout = d >> (3 - j);
            h = (h + 1) / 2; w = (w + 1) / 2;
            flops += 2.0 * (double)(B * h * w) * 9.0 * (double)(cin * cout);
            cin = cout;
        }
        double N = (double)(h * w), N1 = N + 1;
        /* blocks: TSSA projections (2 d x d), MLP (d x hid x 2) on N tokens */
        flops += (double)k->depth * (double)B * N * (4.0 * d * d + 4.0 * (double)(d * hid));
        /* class attention: qkv on N+1 tokens, one query, proj and MLP on the CLS row */
        flops += (double)k->cls_layers * (double)B * (6.0 * N1 * d * d + 4.0 * N1 * d + 2.0 * d * d + 4.0 * (double)(d * hid));
        flops += 2.0 * (double)(B * d * classes);
        snprintf(c->shape, sizeof c->shape, "ToST B=%zu %zux%zu d=%zu L=2", B, Hh, Ww, d);
    } else {
        wbcl_crate_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.dim = d; cfg.depth = 2; cfg.heads = 4; cfg.dim_head = 12; cfg.patch = 8; cfg.channels = 3;
        cfg.eta = 0.1f; cfg.lambd = 0.1f; cfg.ln_eps = 1e-5f; /* tests/test_models.c crate_cfg() */
        TRY(wbcl_crate_load_file(e->ctx, wpath, &cfg, &s->crate));
        double N = (double)((Hh / 8) * (Ww / 8)), N1 = N + 1, Kp = 48, pd = 8.0 * 8.0 * 3.0;
        flops += 2.0 * (double)B * N * pd * d; /* patch embedding */
        /* per layer: MSSA U projection and output projection (d x K p each), attention 4 (N+1)^2 K p,
         * ISTA x W, x W^T, (.) W: 3 d x d products */
        flops += 2.0 * (double)B * (4.0 * N1 * d * Kp + 4.0 * N1 * N1 * Kp + 6.0 * N1 * d * d);
        flops += 2.0 * (double)(B * d * classes);
        snprintf(c->shape, sizeof c->shape, "CRATE B=%zu %zux%zu d=%zu L=2", B, Hh, Ww, d);
    }
    s->img = tens(e, &st, 4, B, ish.shape[1], Hh, Ww, big);
    s->out = tens(e, &st, 2, B, classes, 0, 0, NULL);
    if (st) goto done;
    TRY(model_call(e->ctx, s));
    TRY(readback(e, s->out, &y));
    c->err = relerr(y, want, B * classes);
    /* tests/test_models.c bounds every traced stage by 2e-5 absolute (margin ~8x over the observed worst);
     * normwise 1e-4 over logits of magnitude ~1 is the same bound with the batch's replication */
    c->tol = 1e-4;
    c->flops = flops;
    c->bytes = 4.0 * (double)(B * per_img + B * classes);
done:
    if (st) msg(why, wl, e, st);
done_nomsg:
    if (st) { model_free(s); s = NULL; }
    c->call = model_call; c->state = s; c->cleanup = model_free;
    wbcl_safetensors_close(gold);
    free(img); free(logits); free(big); free(y); free(want);
    return st;
}
static wbcl_status crate_fwd_prep(env *e, op_case *c, char *w, size_t l) { return model_prep(e, c, w, l, 0); }
static wbcl_status tost_fwd_prep(env *e, op_case *c, char *w, size_t l) { return model_prep(e, c, w, l, 1); }

/* ---- the operator table: one line per operator --------------------------------------------------- */
const bench_op wbcl_bench_ops[] = {
    {"gemm.packed", "gemm", gemm_packed_prep},
    {"gemm.clblast", "gemm", gemm_clblast_prep},
    {"gemm.tiled", "gemm", gemm_tiled_prep},
    {"gemm.packed.f16", "gemm", gemm_packed_f16_prep},
    {"gemm.clblast.f16", "gemm", gemm_clblast_f16_prep},
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
    {"attention.softmax.f16", "attention", att_softmax_f16_prep},
    {"attention.mssa.f16", "attention", att_mssa_f16_prep},
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
    {"circulant.lift_1d", "circulant", circ_lift1_prep},
    {"circulant.lift_2d", "circulant", circ_lift2_prep},
    {"circulant.construct_1d", "circulant", circ_fit1_prep},
    {"circulant.construct_2d", "circulant", circ_fit2_prep},
    {"circulant.apply_1d", "circulant", circ_apply1_prep},
    {"circulant.apply_2d", "circulant", circ_apply2_prep},
    {"model.crate_forward", "models", crate_fwd_prep},
    {"model.tost_forward", "models", tost_fwd_prep},
};
const size_t wbcl_bench_n_ops = sizeof wbcl_bench_ops / sizeof wbcl_bench_ops[0];

