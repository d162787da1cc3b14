/* TSSA (ToST), non-causal and causal, the decode state and the layers
 * (include/wbcl/tssa.h). Kernels in cl/tssa.cl (family "tssa").
 *
 * Non-causal, 5 launches after validation:
 *   rowsq (block sums of w^2) -> norm_finish (1 / max(||w||, 1e-12) per channel)
 *   -> member (Pi, block sums of Pi w^2 and Pi) -> dots_finish (1 / (1 + dots))
 *   -> output (y = -w Pi a, one work-item per token row). GPU-variant contexts: the GPU-shaped
 *   kernels of the same passes (tssa_run_gpu; work buffers in scratch slots 2-5).
 * Causal, blocked (N > WBCL_TSSA_SEQ_MAX): rowsq -> scan S -> causal_member ->
 *   scan Q, scan P -> causal_output; with a state the scans start from the state's sums and
 *   write the totals back. Causal, short inputs and decode: causal_seq, one work-item per
 *   batch entry walking the tokens with Kahan-compensated state sums. GPU-variant contexts: the
 *   GPU-shaped causal kernels (causal_blocked_gpu, five launches; causal_step_gpu, one launch).
 * w is read three times and y written once: the op is bandwidth-bound (perf/bench_tssa.c). */
#include "attn_stats.h"
#include "buffers.h"
#include "checks.h"
#include "launch.h"
#include "model/model_internal.h"
#include "views.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/tssa.h"
#include "wbcl/weights.h"

#define FAMILY "tssa"
#define WBCL_TSSA_SEQ_MAX 24 /* causal inputs up to this many tokens take the sequential kernel */

struct wbcl_tssa_state {
    wbcl_context *ctx;
    size_t B, K, p, t;
    cl_mem S, cS, Q, cQ, P, cP; /* (B, K*p) x 4, (B, K) x 2 */
};

#define TRY(x)                     \
    do {                           \
        if ((st = (x))) goto done; \
    } while (0)

/* ---- GPU-shaped non-causal TSSA (cl/tssa.cl, "GPU-shaped") ------------------------------------
 * g_colsq -> g_norm_finish -> g_member -> g_dots_finish -> g_output, work-groups of 256 over equal
 * ranges of the flattened tokens, about 4 work-groups per compute unit. The batch
 * is taken in groups of entries whose w fits in WBCL_TSSA_GROUP_BYTES (environment; unset or 0: the
 * whole batch at once), so that the second and third reads of w may come from the device's cache. */
static size_t group_entries(size_t B, size_t per_entry)
{
    const char *env = getenv("WBCL_TSSA_GROUP_BYTES");
    size_t cap = env ? (size_t)strtoull(env, NULL, 10) : 0;
    if (!cap) return B;
    size_t g = cap / per_entry;
    return g < 1 ? 1 : g > B ? B : g;
}

static wbcl_status tssa_run_gpu(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hview *y,
                                const wbcl__hdims *dm, int al, size_t lx, cl_mem temp, cl_mem Pi_user)
{
    const size_t B = dm->B, K = dm->K, N = dm->N, p = dm->p, KP = K * p, tt = 256 / lx;
    const size_t Bg = group_entries(B, K * N * p * sizeof(float));
    const size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
    /* L tokens per work-group: about 4 work-groups per compute unit, whole tiles, at most N */
    size_t L = (Bg * N + 4 * cu - 1) / (4 * cu);
    L = (L + tt - 1) / tt * tt;
    if (L > N) L = N;
    const size_t G = (Bg * N + L - 1) / L;
    /* work buffers: the context's grow-only scratch slots 2-5 (TSSA calls no other op, so nothing
     * else uses them during the call), not per-call allocations: a fresh clCreateBuffer costs
     * tens of microseconds at first use on NVIDIA's driver */
    cl_mem part, partP, vec, Pi = Pi_user;
    wbcl_status st;
    if ((st = wbcl__scratch(ctx, 2, 2 * G * KP * sizeof(float), &part)) ||
        (st = wbcl__scratch(ctx, 3, 2 * G * K * sizeof(float), &partP)) ||
        (st = wbcl__scratch(ctx, 4, Bg * KP * sizeof(float), &vec)) ||
        (!Pi_user && (st = wbcl__scratch(ctx, 5, B * K * N * sizeof(float), &Pi))))
        return st;
    wbcl_kern *kc, *kn, *km, *kd, *ko;
    if ((st = wbcl__tssa_kernel(ctx, p, K, al, "wbcl_tssa_g_colsq", &kc)) ||
        (st = wbcl__tssa_kernel(ctx, p, K, al, "wbcl_tssa_g_norm_finish", &kn)) ||
        (st = wbcl__tssa_kernel(ctx, p, K, al, "wbcl_tssa_g_member", &km)) ||
        (st = wbcl__tssa_kernel(ctx, p, K, al, "wbcl_tssa_g_dots_finish", &kd)) ||
        (st = wbcl__tssa_kernel(ctx, p, K, al, "wbcl_tssa_g_output", &ko)))
        return st;
    cl_uint uN = (cl_uint)N, uL = (cl_uint)L;
    for (size_t b0 = 0; b0 < B; b0 += Bg) {
        const size_t nb = B - b0 < Bg ? B - b0 : Bg;
        const size_t Gb = (nb * N + L - 1) / L;
        cl_uint unb = (cl_uint)nb;
        cl_ulong pioff = (cl_ulong)(b0 * K * N);
        wbcl__hview wv = *w, yv = *y;
        wv.off += b0 * w->sb;
        yv.off += b0 * y->sb;
        const size_t lg[1] = {256}, gg[1] = {Gb * 256}, gf[1] = {nb * ((KP + 15) / 16) * 256}; /* finish: 16 channels per group */
        /* 1. sums of w^2 per range, 2. 1 / max(norm, 1e-12) */
        if ((st = wbcl__set_view(ctx, kc, 0, &wv))) return st;
        WBCL_ARG(ctx, kc, 5, unb);
        WBCL_ARG(ctx, kc, 6, uN);
        WBCL_ARG(ctx, kc, 7, uL);
        WBCL_ARG(ctx, kc, 8, part);
        if ((st = wbcl__launch(ctx, kc, 1, gg, lg))) return st;
        WBCL_ARG(ctx, kn, 0, part);
        WBCL_ARG(ctx, kn, 1, unb);
        WBCL_ARG(ctx, kn, 2, uN);
        WBCL_ARG(ctx, kn, 3, uL);
        WBCL_ARG(ctx, kn, 4, vec);
        if ((st = wbcl__launch(ctx, kn, 1, gf, lg))) return st;
        /* 3. Pi and the second moments per range, 4. a = 1 / (1 + dots) (into vec) */
        if ((st = wbcl__set_view(ctx, km, 0, &wv))) return st;
        WBCL_ARG(ctx, km, 5, unb);
        WBCL_ARG(ctx, km, 6, uN);
        WBCL_ARG(ctx, km, 7, uL);
        WBCL_ARG(ctx, km, 8, vec);
        WBCL_ARG(ctx, km, 9, temp);
        WBCL_ARG(ctx, km, 10, Pi);
        WBCL_ARG(ctx, km, 11, pioff);
        WBCL_ARG(ctx, km, 12, part);
        WBCL_ARG(ctx, km, 13, partP);
        if ((st = wbcl__launch(ctx, km, 1, gg, lg))) return st;
        WBCL_ARG(ctx, kd, 0, part);
        WBCL_ARG(ctx, kd, 1, partP);
        WBCL_ARG(ctx, kd, 2, unb);
        WBCL_ARG(ctx, kd, 3, uN);
        WBCL_ARG(ctx, kd, 4, uL);
        WBCL_ARG(ctx, kd, 5, vec);
        if ((st = wbcl__launch(ctx, kd, 1, gf, lg))) return st;
        /* 5. y = -w Pi a */
        if ((st = wbcl__set_view(ctx, ko, 0, &wv)) || (st = wbcl__set_view(ctx, ko, 5, &yv))) return st;
        WBCL_ARG(ctx, ko, 10, unb);
        WBCL_ARG(ctx, ko, 11, uN);
        WBCL_ARG(ctx, ko, 12, Pi);
        WBCL_ARG(ctx, ko, 13, pioff);
        WBCL_ARG(ctx, ko, 14, vec);
        const size_t vw = al ? 4 : 1, go[1] = {(nb * K * N * (p / vw) + 255) / 256 * 256};
        if ((st = wbcl__launch(ctx, ko, 1, go, lg))) return st;
    }
    return WBCL_SUCCESS;
}

/* Non-causal TSSA on validated views; Pi_user may be NULL. Also used by nothing else. */
static wbcl_status tssa_run(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hview *y, const wbcl__hdims *dm,
                            cl_mem temp, cl_mem Pi_user)
{
    const int al = wbcl__hview_aligned(w, dm->p) && wbcl__hview_aligned(y, dm->p);
    size_t lx = wbcl__tssa_glx(ctx, dm->p, dm->K);
    if ((dm->K - 1) * w->sh + dm->p > 0xffffffffu) lx = 0; /* the GPU kernels' head offsets are 32-bit */
    if (lx) return tssa_run_gpu(ctx, w, y, dm, al, lx, temp, Pi_user);
    size_t rb, nblk, B = dm->B, K = dm->K, N = dm->N, p = dm->p, KP = K * p;
    wbcl__row_blocks(N, &rb, &nblk);
    cl_mem part = NULL, vec = NULL, partP = NULL, Pi = NULL;
    wbcl_status st;
    TRY(wbcl__tmp(ctx, B * nblk * KP, "wbcl_tssa: block partials", &part));
    TRY(wbcl__tmp(ctx, B * KP, "wbcl_tssa: channel statistics", &vec));
    TRY(wbcl__tmp(ctx, B * nblk * K, "wbcl_tssa: block sums of Pi", &partP));
    if (Pi_user) {
        Pi = Pi_user;
        clRetainMemObject(Pi);
    } else {
        TRY(wbcl__tmp(ctx, B * K * N, "wbcl_tssa: membership Pi", &Pi));
    }
    cl_uint uB = (cl_uint)B, uN = (cl_uint)N, uK = (cl_uint)K, up = (cl_uint)p, urb = (cl_uint)rb,
            unb = (cl_uint)nblk;
    wbcl_kern *k;
    /* 1. sum over tokens of w^2 per channel, 2. 1 / max(norm, 1e-12) */
    TRY(wbcl__inv_norms(ctx, w, dm, al, part, vec));
    /* 3. membership and the second moments (partials reuse `part`) */
    TRY(wbcl__tssa_kernel(ctx, dm->p, dm->K, al, "wbcl_tssa_member", &k));
    TRY(wbcl__set_view(ctx, k, 0, w));
    WBCL_ARG(ctx, k, 5, uB);
    WBCL_ARG(ctx, k, 6, uN);
    WBCL_ARG(ctx, k, 7, uK);
    WBCL_ARG(ctx, k, 8, up);
    WBCL_ARG(ctx, k, 9, urb);
    WBCL_ARG(ctx, k, 10, unb);
    WBCL_ARG(ctx, k, 11, vec);
    WBCL_ARG(ctx, k, 12, temp);
    WBCL_ARG(ctx, k, 13, Pi);
    WBCL_ARG(ctx, k, 14, part);
    WBCL_ARG(ctx, k, 15, partP);
    TRY(wbcl__launch_items(ctx, k, B * nblk));
    /* 4. a = 1 / (1 + dots) (into `vec`) */
    TRY(wbcl__tssa_kernel(ctx, dm->p, dm->K, al, "wbcl_tssa_dots_finish", &k));
    WBCL_ARG(ctx, k, 0, part);
    WBCL_ARG(ctx, k, 1, partP);
    WBCL_ARG(ctx, k, 2, uB);
    WBCL_ARG(ctx, k, 3, unb);
    WBCL_ARG(ctx, k, 4, uK);
    WBCL_ARG(ctx, k, 5, up);
    WBCL_ARG(ctx, k, 6, vec);
    TRY(wbcl__launch_items(ctx, k, B * KP));
    /* 5. y = -w Pi a */
    TRY(wbcl__tssa_kernel(ctx, dm->p, dm->K, al, "wbcl_tssa_output", &k));
    TRY(wbcl__set_view(ctx, k, 0, w));
    TRY(wbcl__set_view(ctx, k, 5, y));
    WBCL_ARG(ctx, k, 10, uB);
    WBCL_ARG(ctx, k, 11, uN);
    WBCL_ARG(ctx, k, 12, uK);
    WBCL_ARG(ctx, k, 13, up);
    WBCL_ARG(ctx, k, 14, Pi);
    WBCL_ARG(ctx, k, 15, vec);
    TRY(wbcl__launch_items(ctx, k, B * N));
done:
    wbcl__tmp_release(&part);
    wbcl__tmp_release(&vec);
    wbcl__tmp_release(&partP);
    wbcl__tmp_release(&Pi);
    return st;
}

/* ---- validation ------------------------------------------------------------------------------ */

static wbcl_status check_pi(wbcl_context *ctx, const char *op, const wbcl_tensor *Pi, const wbcl__hdims *dm,
                            const wbcl_tensor *w, const wbcl_tensor *y)
{
    if (!Pi) return WBCL_SUCCESS;
    size_t want[3] = {dm->B, dm->K, dm->N};
    wbcl_status st = wbcl__check_shape(ctx, Pi, op, "Pi", 3, want);
    if (!st) st = wbcl__check_distinct(ctx, op, Pi, "Pi", w, "w");
    if (!st) st = wbcl__check_distinct(ctx, op, Pi, "Pi", y, "y");
    return st;
}

static wbcl_status check_common(wbcl_context *ctx, const char *op, const wbcl_tensor *w, const wbcl_tensor *y,
                                const wbcl_tensor *temp, const wbcl__hdims *dm)
{
    wbcl_status st = wbcl__check_tensor(ctx, y, op, "y");
    if (!st) st = wbcl__check_same_shape(ctx, w, y, op, "w", "y");
    if (!st) st = wbcl__check_distinct(ctx, op, y, "y", w, "w");
    if (!st) st = wbcl__check_numel(ctx, temp, op, "temp", dm->K, "(K) or (K, 1)");
    if (st) return st;
    size_t sizes[4] = {dm->B * dm->N, dm->K * dm->p, dm->N, dm->B * dm->K};
    return wbcl__check_u32(ctx, op, 4, sizes);
}

/* heads view or tokens view of w, y */
static wbcl_status views(wbcl_context *ctx, const char *op, const wbcl_tensor *w, size_t heads, int tokens,
                         wbcl__hdims *dm)
{
    if (!tokens) return wbcl__check_heads(ctx, w, op, "w", dm);
    size_t B, N, D;
    wbcl_status st = wbcl__check_tokens(ctx, w, op, "w", &B, &N, &D);
    if (!st) st = wbcl__check_heads_divide(ctx, op, D, heads);
    if (st) return st;
    dm->B = B;
    dm->K = heads;
    dm->N = N;
    dm->p = D / heads;
    return WBCL_SUCCESS;
}

static wbcl_status tssa_entry(wbcl_context *ctx, const char *op, const wbcl_tensor *w, size_t heads, int tokens,
                              const wbcl_tensor *temp, wbcl_tensor *y, wbcl_tensor *Pi)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl__hdims dm;
    wbcl_status st = views(ctx, op, w, heads, tokens, &dm);
    if (!st) st = check_common(ctx, op, w, y, temp, &dm);
    if (!st) st = check_pi(ctx, op, Pi, &dm, w, y);
    if (st) return st;
    wbcl__hview vw = tokens ? wbcl__hview_tokens(w, dm.K, dm.p, 0, 1) : wbcl__hview_heads(w);
    wbcl__hview vy = tokens ? wbcl__hview_tokens(y, dm.K, dm.p, 0, 1) : wbcl__hview_heads(y);
    return tssa_run(ctx, &vw, &vy, &dm, temp->mem, Pi ? Pi->mem : NULL);
}

wbcl_status wbcl_tssa_heads(wbcl_context *ctx, const wbcl_tensor *w, const wbcl_tensor *temp, wbcl_tensor *y,
                            wbcl_tensor *Pi)
{
    return tssa_entry(ctx, "wbcl_tssa_heads", w, 0, 0, temp, y, Pi);
}

wbcl_status wbcl_tssa_tokens(wbcl_context *ctx, const wbcl_tensor *w, size_t heads, const wbcl_tensor *temp,
                             wbcl_tensor *y, wbcl_tensor *Pi)
{
    return tssa_entry(ctx, "wbcl_tssa_tokens", w, heads, 1, temp, y, Pi);
}

/* ---- the decode state ------------------------------------------------------------------------ */

wbcl_status wbcl_tssa_state_create(wbcl_context *ctx, size_t batch, size_t heads, size_t p, wbcl_tssa_state **out)
{
    static const char *op = "wbcl_tssa_state_create";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'out' is NULL", op);
    *out = NULL;
    if (batch == 0 || heads == 0 || p == 0)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: batch %zu, heads %zu, p %zu: all must be >= 1", op, batch,
                          heads, p);
    size_t kp, bkp;
    if (!wbcl__mul_ok(heads, p, &kp) || !wbcl__mul_ok(batch, kp, &bkp))
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: batch %zu x heads %zu x p %zu overflows", op, batch, heads, p);
    wbcl_tssa_state *s = calloc(1, sizeof *s);
    if (!s) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    s->ctx = ctx;
    s->B = batch;
    s->K = heads;
    s->p = p;
    wbcl_status st = wbcl__tmp(ctx, bkp, op, &s->S);
    if (!st) st = wbcl__tmp(ctx, bkp, op, &s->cS);
    if (!st) st = wbcl__tmp(ctx, bkp, op, &s->Q);
    if (!st) st = wbcl__tmp(ctx, bkp, op, &s->cQ);
    if (!st) st = wbcl__tmp(ctx, batch * heads, op, &s->P);
    if (!st) st = wbcl__tmp(ctx, batch * heads, op, &s->cP);
    if (!st) st = wbcl_tssa_state_reset(ctx, s);
    if (st) {
        wbcl_tssa_state_destroy(s);
        return st;
    }
    *out = s;
    return WBCL_SUCCESS;
}

void wbcl_tssa_state_destroy(wbcl_tssa_state *s)
{
    if (!s) return;
    wbcl__tmp_release(&s->S);
    wbcl__tmp_release(&s->cS);
    wbcl__tmp_release(&s->Q);
    wbcl__tmp_release(&s->cQ);
    wbcl__tmp_release(&s->P);
    wbcl__tmp_release(&s->cP);
    free(s);
}

wbcl_status wbcl_tssa_state_reset(wbcl_context *ctx, wbcl_tssa_state *s)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!s) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_tssa_state_reset: 'state' is NULL");
    if (s->ctx != ctx)
        return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "wbcl_tssa_state_reset: the state belongs to another context");
    size_t kp = s->B * s->K * s->p, k = s->B * s->K;
    wbcl_status st = wbcl__zero(ctx, s->S, kp);
    if (!st) st = wbcl__zero(ctx, s->cS, kp);
    if (!st) st = wbcl__zero(ctx, s->Q, kp);
    if (!st) st = wbcl__zero(ctx, s->cQ, kp);
    if (!st) st = wbcl__zero(ctx, s->P, k);
    if (!st) st = wbcl__zero(ctx, s->cP, k);
    if (!st) s->t = 0;
    return st;
}

size_t wbcl_tssa_state_position(const wbcl_tssa_state *s) { return s ? s->t : 0; }

wbcl_status wbcl_tssa_state_read(wbcl_context *ctx, const wbcl_tssa_state *s, float *S, float *Q, float *P)
{
    static const char *op = "wbcl_tssa_state_read";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!s) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'state' is NULL", op);
    if (s->ctx != ctx) return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: the state belongs to another context", op);
    size_t kp = s->B * s->K * s->p * sizeof(float), k = s->B * s->K * sizeof(float);
    cl_int e = CL_SUCCESS;
    if (S) e = clEnqueueReadBuffer(ctx->queue, s->S, CL_TRUE, 0, kp, S, 0, NULL, NULL);
    if (e == CL_SUCCESS && Q) e = clEnqueueReadBuffer(ctx->queue, s->Q, CL_TRUE, 0, kp, Q, 0, NULL, NULL);
    if (e == CL_SUCCESS && P) e = clEnqueueReadBuffer(ctx->queue, s->P, CL_TRUE, 0, k, P, 0, NULL, NULL);
    if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "%s: reading the state", op);
    return WBCL_SUCCESS;
}

/* ---- causal TSSA ------------------------------------------------------------------------------ */

static wbcl_status run_scan(wbcl_context *ctx, size_t p, size_t K, int al, cl_mem part, size_t B, size_t nblk, size_t cols,
                            cl_mem st_s, cl_mem st_c)
{
    wbcl_kern *k;
    wbcl_status st = wbcl__tssa_kernel(ctx, p, K, al, "wbcl_tssa_scan", &k);
    if (st) return st;
    cl_uint uB = (cl_uint)B, unb = (cl_uint)nblk, uc = (cl_uint)cols;
    cl_int has = st_s != NULL;
    cl_mem s = st_s ? st_s : part, c = st_c ? st_c : part; /* unused when has == 0 */
    WBCL_ARG(ctx, k, 0, part);
    WBCL_ARG(ctx, k, 1, uB);
    WBCL_ARG(ctx, k, 2, unb);
    WBCL_ARG(ctx, k, 3, uc);
    WBCL_ARG(ctx, k, 4, has);
    WBCL_ARG(ctx, k, 5, s);
    WBCL_ARG(ctx, k, 6, c);
    return wbcl__launch_items(ctx, k, B * cols);
}

static wbcl_status causal_blocked(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hview *y,
                                  const wbcl__hdims *dm, cl_mem temp, cl_mem bias, size_t tmax, size_t t0,
                                  wbcl_tssa_state *state, cl_mem Pi_user)
{
    const int al = wbcl__hview_aligned(w, dm->p) && wbcl__hview_aligned(y, dm->p);
    size_t rb, nblk, B = dm->B, K = dm->K, N = dm->N, p = dm->p, KP = K * p;
    wbcl__row_blocks(N, &rb, &nblk);
    cl_mem part1 = NULL, part2 = NULL, partP = NULL, Pi = NULL;
    wbcl_status st;
    TRY(wbcl__tmp(ctx, B * nblk * KP, "wbcl_tssa_causal: block sums of w^2", &part1));
    TRY(wbcl__tmp(ctx, B * nblk * KP, "wbcl_tssa_causal: block sums of Pi w^2", &part2));
    TRY(wbcl__tmp(ctx, B * nblk * K, "wbcl_tssa_causal: block sums of Pi", &partP));
    if (Pi_user) {
        Pi = Pi_user;
        clRetainMemObject(Pi);
    } else {
        TRY(wbcl__tmp(ctx, B * K * N, "wbcl_tssa_causal: membership Pi", &Pi));
    }
    cl_uint uB = (cl_uint)B, uN = (cl_uint)N, uK = (cl_uint)K, up = (cl_uint)p, urb = (cl_uint)rb,
            unb = (cl_uint)nblk, ut0 = (cl_uint)t0, utm = (cl_uint)tmax;
    wbcl_kern *k;
    /* Build (or fetch) every kernel before the first scan writes the state, so
     * that a build failure leaves the state as it was (tssa.h). */
    TRY(wbcl__tssa_kernel(ctx, p, K, al, "wbcl_tssa_scan", &k));
    TRY(wbcl__tssa_kernel(ctx, p, K, al, "wbcl_tssa_causal_member", &k));
    TRY(wbcl__tssa_kernel(ctx, p, K, al, "wbcl_tssa_causal_output", &k));
    TRY(wbcl__rowsq(ctx, w, dm, al, rb, nblk, part1));
    TRY(run_scan(ctx, p, K, al, part1, B, nblk, KP, state ? state->S : NULL, state ? state->cS : NULL));
    TRY(wbcl__tssa_kernel(ctx, dm->p, dm->K, al, "wbcl_tssa_causal_member", &k));
    TRY(wbcl__set_view(ctx, k, 0, w));
    WBCL_ARG(ctx, k, 5, uB);
    WBCL_ARG(ctx, k, 6, uN);
    WBCL_ARG(ctx, k, 7, uK);
    WBCL_ARG(ctx, k, 8, up);
    WBCL_ARG(ctx, k, 9, urb);
    WBCL_ARG(ctx, k, 10, unb);
    WBCL_ARG(ctx, k, 11, ut0);
    WBCL_ARG(ctx, k, 12, part1);
    WBCL_ARG(ctx, k, 13, temp);
    WBCL_ARG(ctx, k, 14, bias);
    WBCL_ARG(ctx, k, 15, utm);
    WBCL_ARG(ctx, k, 16, Pi);
    WBCL_ARG(ctx, k, 17, part2);
    WBCL_ARG(ctx, k, 18, partP);
    TRY(wbcl__launch_items(ctx, k, B * nblk));
    TRY(run_scan(ctx, p, K, al, part2, B, nblk, KP, state ? state->Q : NULL, state ? state->cQ : NULL));
    TRY(run_scan(ctx, p, K, al, partP, B, nblk, K, state ? state->P : NULL, state ? state->cP : NULL));
    TRY(wbcl__tssa_kernel(ctx, dm->p, dm->K, al, "wbcl_tssa_causal_output", &k));
    TRY(wbcl__set_view(ctx, k, 0, w));
    TRY(wbcl__set_view(ctx, k, 5, y));
    WBCL_ARG(ctx, k, 10, uB);
    WBCL_ARG(ctx, k, 11, uN);
    WBCL_ARG(ctx, k, 12, uK);
    WBCL_ARG(ctx, k, 13, up);
    WBCL_ARG(ctx, k, 14, urb);
    WBCL_ARG(ctx, k, 15, unb);
    WBCL_ARG(ctx, k, 16, Pi);
    WBCL_ARG(ctx, k, 17, part2);
    WBCL_ARG(ctx, k, 18, partP);
    TRY(wbcl__launch_items(ctx, k, B * nblk));
done:
    wbcl__tmp_release(&part1);
    wbcl__tmp_release(&part2);
    wbcl__tmp_release(&partP);
    wbcl__tmp_release(&Pi);
    return st;
}

static wbcl_status causal_seq(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hview *y, const wbcl__hdims *dm,
                              cl_mem temp, cl_mem bias, size_t tmax, size_t t0, wbcl_tssa_state *state,
                              cl_mem Pi_user)
{
    const int al = wbcl__hview_aligned(w, dm->p) && wbcl__hview_aligned(y, dm->p);
    size_t B = dm->B, K = dm->K, N = dm->N, p = dm->p, KP = K * p;
    cl_mem Pi = NULL, bufs[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    wbcl_status st;
    if (state) {
        bufs[0] = state->S;
        bufs[1] = state->cS;
        bufs[2] = state->Q;
        bufs[3] = state->cQ;
        bufs[4] = state->P;
        bufs[5] = state->cP;
        for (int i = 0; i < 6; i++) clRetainMemObject(bufs[i]);
    } else {
        /* a fresh, zeroed state for this call: (B, KP) x 4 and (B, K) x 2 */
        for (int i = 0; i < 6; i++) {
            size_t n = i < 4 ? B * KP : B * K;
            TRY(wbcl__tmp(ctx, n, "wbcl_tssa_causal: prefix sums", &bufs[i]));
            TRY(wbcl__zero(ctx, bufs[i], n));
        }
    }
    if (Pi_user) {
        Pi = Pi_user;
        clRetainMemObject(Pi);
    } else {
        TRY(wbcl__tmp(ctx, B * K * N, "wbcl_tssa_causal: membership Pi", &Pi));
    }
    cl_uint uB = (cl_uint)B, uN = (cl_uint)N, uK = (cl_uint)K, up = (cl_uint)p, ut0 = (cl_uint)t0,
            utm = (cl_uint)tmax;
    wbcl_kern *k;
    TRY(wbcl__tssa_kernel(ctx, dm->p, dm->K, al, "wbcl_tssa_causal_seq", &k));
    TRY(wbcl__set_view(ctx, k, 0, w));
    TRY(wbcl__set_view(ctx, k, 5, y));
    WBCL_ARG(ctx, k, 10, uB);
    WBCL_ARG(ctx, k, 11, uN);
    WBCL_ARG(ctx, k, 12, uK);
    WBCL_ARG(ctx, k, 13, up);
    WBCL_ARG(ctx, k, 14, ut0);
    WBCL_ARG(ctx, k, 15, temp);
    WBCL_ARG(ctx, k, 16, bias);
    WBCL_ARG(ctx, k, 17, utm);
    WBCL_ARG(ctx, k, 18, Pi);
    for (cl_uint i = 0; i < 6; i++) WBCL_ARG(ctx, k, 19 + i, bufs[i]);
    {
        size_t g[1] = {B}, l[1] = {1};
        TRY(wbcl__launch(ctx, k, 1, g, l));
    }
done:
    for (int i = 0; i < 6; i++) wbcl__tmp_release(&bufs[i]);
    wbcl__tmp_release(&Pi);
    return st;
}

/* ---- GPU-shaped causal TSSA (cl/tssa.cl, "GPU-shaped causal") ---------------------------------
 * GPU-variant contexts (wbcl__tssa_glx != 0): prefill as a blocked scan in five launches
 * (gc_blocksq -> gc_scan S -> gc_member -> gc_scan Q,P -> gc_output), blocks of L tokens of one
 * batch entry, about 4 work-groups per compute unit; decode and inputs of <= WBCL_TSSA_SEQ_MAX tokens
 * in one launch of gc_step (a work-group per batch entry). Work buffers in scratch slots 2, 3, 5
 * (as tssa_run_gpu; TSSA calls no other op). WBCL_TSSA_CAUSAL_L (environment) sets L (rounded up
 * to whole tiles of 256 / LX tokens): the tests use it for many small blocks. */
#define GC_STEP_MAX_KP 2048 /* gc_step: at most 8 channels per work-item of 256 */

/* The causal GPU kernels live in their own program (-DWBCL_TSSA_CAUSAL=1, cl/tssa.cl), so that the
 * non-causal programs do not compile them; they read w element by element, so -DWBCL_TSSA_ALIGNED
 * is left out (one program per (p, K)). lx != 0 is wbcl__tssa_glx's choice. */
static wbcl_status gc_kernel(wbcl_context *ctx, size_t p, size_t K, size_t lx, const char *name, wbcl_kern **out)
{
    char opt[160];
    snprintf(opt, sizeof opt, "-DWBCL_TSSA_P=%zu -DWBCL_TSSA_K=%zu -DWBCL_TSSA_GLX=%zu -DWBCL_TSSA_CAUSAL=1", p, K, lx);
    return wbcl__kernel(ctx, "tssa", opt, name, out);
}

/* lanes per token row for the GPU-shaped causal kernels, 0 where they do not apply */
static size_t gc_lanes(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hview *y, const wbcl__hdims *dm)
{
    size_t lx = wbcl__tssa_glx(ctx, dm->p, dm->K);
    if (!lx) return 0;
    const size_t K = dm->K, p = dm->p, lim = 0xffffffffu;
    if ((K - 1) * w->sh + p > lim || (K - 1) * y->sh + p > lim) return 0; /* 32-bit head offsets */
    /* local memory of gc_member / gc_output (the larger: two tiles of (p + 1)-padded rows) */
    const size_t tt = 256 / lx, bytes = 4 * 2 * (tt * K * (p + 1) + tt * K);
    return bytes <= ctx->info.local_mem_size ? lx : 0;
}

static wbcl_status causal_step_gpu(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hview *y,
                                   const wbcl__hdims *dm, size_t lx, cl_mem temp, cl_mem bias, size_t tmax, size_t t0,
                                   wbcl_tssa_state *state, cl_mem Pi_user)
{
    const size_t B = dm->B, K = dm->K, N = dm->N, p = dm->p;
    cl_mem Pi = Pi_user;
    wbcl_kern *k;
    wbcl_status st;
    if ((!Pi_user && (st = wbcl__scratch(ctx, 5, B * K * N * sizeof(float), &Pi))) ||
        (st = gc_kernel(ctx, p, K, lx, "wbcl_tssa_gc_step", &k)))
        return st;
    cl_uint uB = (cl_uint)B, uN = (cl_uint)N, ut0 = (cl_uint)t0, utm = (cl_uint)tmax;
    cl_int has = state != NULL;
    /* without a state the sums start from zero and are not written: any buffer stands in */
    cl_mem sv[6] = {Pi, Pi, Pi, Pi, Pi, Pi};
    if (state) {
        sv[0] = state->S;
        sv[1] = state->cS;
        sv[2] = state->Q;
        sv[3] = state->cQ;
        sv[4] = state->P;
        sv[5] = state->cP;
    }
    if ((st = wbcl__set_view(ctx, k, 0, w)) || (st = wbcl__set_view(ctx, k, 5, y))) return st;
    WBCL_ARG(ctx, k, 10, uB);
    WBCL_ARG(ctx, k, 11, uN);
    WBCL_ARG(ctx, k, 12, ut0);
    WBCL_ARG(ctx, k, 13, temp);
    WBCL_ARG(ctx, k, 14, bias);
    WBCL_ARG(ctx, k, 15, utm);
    WBCL_ARG(ctx, k, 16, Pi);
    WBCL_ARG(ctx, k, 17, has);
    for (cl_uint i = 0; i < 6; i++) WBCL_ARG(ctx, k, 18 + i, sv[i]);
    const size_t lg[1] = {256}, gg[1] = {B * 256};
    return wbcl__launch(ctx, k, 1, gg, lg);
}

static wbcl_status gc_scan(wbcl_context *ctx, wbcl_kern *k, cl_mem part, size_t B, size_t nblk, size_t cols,
                           size_t split, cl_mem s1, cl_mem c1, cl_mem s2, cl_mem c2)
{
    cl_uint uB = (cl_uint)B, unb = (cl_uint)nblk, uc = (cl_uint)cols, us = (cl_uint)split;
    cl_int has = s1 != NULL;
    if (!has) s1 = c1 = s2 = c2 = part; /* not read */
    WBCL_ARG(ctx, k, 0, part);
    WBCL_ARG(ctx, k, 1, uB);
    WBCL_ARG(ctx, k, 2, unb);
    WBCL_ARG(ctx, k, 3, uc);
    WBCL_ARG(ctx, k, 4, us);
    WBCL_ARG(ctx, k, 5, has);
    WBCL_ARG(ctx, k, 6, s1);
    WBCL_ARG(ctx, k, 7, c1);
    WBCL_ARG(ctx, k, 8, s2);
    WBCL_ARG(ctx, k, 9, c2);
    const size_t lg[1] = {256}, gg[1] = {B * ((cols + 15) / 16) * 256};
    return wbcl__launch(ctx, k, 1, gg, lg);
}

static wbcl_status causal_blocked_gpu(wbcl_context *ctx, const wbcl__hview *w, const wbcl__hview *y,
                                      const wbcl__hdims *dm, size_t lx, cl_mem temp, cl_mem bias,
                                      size_t tmax, size_t t0, wbcl_tssa_state *state, cl_mem Pi_user)
{
    const size_t B = dm->B, K = dm->K, N = dm->N, p = dm->p, KP = K * p, tt = 256 / lx;
    const size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
    /* L tokens per block: about 4 work-groups per compute unit over the B * nblk blocks, whole tiles */
    const char *env = getenv("WBCL_TSSA_CAUSAL_L");
    size_t L = env && atol(env) > 0 ? (size_t)atol(env) : (B * N + 4 * cu - 1) / (4 * cu);
    if (L > N) L = N;
    L = (L + tt - 1) / tt * tt;
    const size_t nblk = (N + L - 1) / L;
    cl_mem part1, part2, Pi = Pi_user;
    wbcl_kern *kb, *ks, *km, *ko;
    wbcl_status st;
    /* every buffer and kernel before the first launch: a failure leaves the state as it was */
    if ((st = wbcl__scratch(ctx, 2, B * nblk * KP * sizeof(float), &part1)) ||
        (st = wbcl__scratch(ctx, 3, B * nblk * (KP + K) * sizeof(float), &part2)) ||
        (!Pi_user && (st = wbcl__scratch(ctx, 5, B * K * N * sizeof(float), &Pi))) ||
        (st = gc_kernel(ctx, p, K, lx, "wbcl_tssa_gc_blocksq", &kb)) ||
        (st = gc_kernel(ctx, p, K, lx, "wbcl_tssa_gc_scan", &ks)) ||
        (st = gc_kernel(ctx, p, K, lx, "wbcl_tssa_gc_member", &km)) ||
        (st = gc_kernel(ctx, p, K, lx, "wbcl_tssa_gc_output", &ko)))
        return st;
    cl_uint uB = (cl_uint)B, uN = (cl_uint)N, uL = (cl_uint)L, unb = (cl_uint)nblk, ut0 = (cl_uint)t0,
            utm = (cl_uint)tmax;
    const size_t lg[1] = {256}, gg[1] = {B * nblk * 256};
    /* 1. block sums of w^2, 2. their exclusive scan (from the state's S) */
    if ((st = wbcl__set_view(ctx, kb, 0, w))) return st;
    WBCL_ARG(ctx, kb, 5, uB);
    WBCL_ARG(ctx, kb, 6, uN);
    WBCL_ARG(ctx, kb, 7, uL);
    WBCL_ARG(ctx, kb, 8, unb);
    WBCL_ARG(ctx, kb, 9, part1);
    if ((st = wbcl__launch(ctx, kb, 1, gg, lg))) return st;
    if ((st = gc_scan(ctx, ks, part1, B, nblk, KP, KP, state ? state->S : NULL, state ? state->cS : NULL, NULL,
                      NULL)))
        return st;
    /* 3. S, Pi, block sums of Pi w^2 and Pi, 4. their scan (from the state's Q and P) */
    if ((st = wbcl__set_view(ctx, km, 0, w))) return st;
    WBCL_ARG(ctx, km, 5, uB);
    WBCL_ARG(ctx, km, 6, uN);
    WBCL_ARG(ctx, km, 7, uL);
    WBCL_ARG(ctx, km, 8, unb);
    WBCL_ARG(ctx, km, 9, ut0);
    WBCL_ARG(ctx, km, 10, part1);
    WBCL_ARG(ctx, km, 11, temp);
    WBCL_ARG(ctx, km, 12, bias);
    WBCL_ARG(ctx, km, 13, utm);
    WBCL_ARG(ctx, km, 14, Pi);
    WBCL_ARG(ctx, km, 15, part2);
    if ((st = wbcl__launch(ctx, km, 1, gg, lg))) return st;
    if (state)
        st = gc_scan(ctx, ks, part2, B, nblk, KP + K, KP, state->Q, state->cQ, state->P, state->cP);
    else
        st = gc_scan(ctx, ks, part2, B, nblk, KP + K, KP, NULL, NULL, NULL, NULL);
    if (st) return st;
    /* 5. y */
    if ((st = wbcl__set_view(ctx, ko, 0, w)) || (st = wbcl__set_view(ctx, ko, 5, y))) return st;
    WBCL_ARG(ctx, ko, 10, uB);
    WBCL_ARG(ctx, ko, 11, uN);
    WBCL_ARG(ctx, ko, 12, uL);
    WBCL_ARG(ctx, ko, 13, unb);
    WBCL_ARG(ctx, ko, 14, Pi);
    WBCL_ARG(ctx, ko, 15, part2);
    return wbcl__launch(ctx, ko, 1, gg, lg);
}

static wbcl_status causal_entry(wbcl_context *ctx, const char *op, const wbcl_tensor *w, size_t heads, int tokens,
                                const wbcl_tensor *temp, const wbcl_tensor *bias, wbcl_tssa_state *state,
                                wbcl_tensor *y, wbcl_tensor *Pi)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl__hdims dm;
    wbcl_status st = views(ctx, op, w, heads, tokens, &dm);
    if (!st) st = check_common(ctx, op, w, y, temp, &dm);
    if (!st) st = check_pi(ctx, op, Pi, &dm, w, y);
    if (!st) st = wbcl__check_tensor(ctx, bias, op, "denom_bias");
    if (st) return st;
    if (!((bias->ndim == 2) || (bias->ndim == 3 && bias->shape[2] == 1)) || bias->shape[0] != dm.K) {
        char s[128];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'denom_bias' has shape %s, expected (%zu, Tmax) or (%zu, Tmax, 1)",
                          op, wbcl__shape_str(s, sizeof s, bias->ndim, bias->shape), dm.K, dm.K);
    }
    size_t tmax = bias->shape[1], t0 = 0;
    if (state) {
        if (state->ctx != ctx)
            return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: 'state' belongs to another context", op);
        if (state->B != dm.B || state->K != dm.K || state->p != dm.p)
            return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                              "%s: 'state' is for batch %zu, %zu heads, p %zu but w has batch %zu, %zu heads, p %zu",
                              op, state->B, state->K, state->p, dm.B, dm.K, dm.p);
        t0 = state->t;
    }
    if (t0 > tmax || dm.N > tmax - t0)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: %zu tokens from position %zu exceed the %zu positions of 'denom_bias' (Tmax)", op, dm.N,
                          t0, tmax);
    wbcl__hview vw = tokens ? wbcl__hview_tokens(w, dm.K, dm.p, 0, 1) : wbcl__hview_heads(w);
    wbcl__hview vy = tokens ? wbcl__hview_tokens(y, dm.K, dm.p, 0, 1) : wbcl__hview_heads(y);
    cl_mem pm = Pi ? Pi->mem : NULL;
    const size_t lx = gc_lanes(ctx, &vw, &vy, &dm);
    if (lx && dm.N <= WBCL_TSSA_SEQ_MAX && dm.K * dm.p <= GC_STEP_MAX_KP)
        st = causal_step_gpu(ctx, &vw, &vy, &dm, lx, temp->mem, bias->mem, tmax, t0, state, pm);
    else if (lx && dm.N > WBCL_TSSA_SEQ_MAX)
        st = causal_blocked_gpu(ctx, &vw, &vy, &dm, lx, temp->mem, bias->mem, tmax, t0, state, pm);
    else if (dm.N <= WBCL_TSSA_SEQ_MAX)
        st = causal_seq(ctx, &vw, &vy, &dm, temp->mem, bias->mem, tmax, t0, state, pm);
    else
        st = causal_blocked(ctx, &vw, &vy, &dm, temp->mem, bias->mem, tmax, t0, state, pm);
    if (!st && state) state->t = t0 + dm.N;
    return st;
}

wbcl_status wbcl_tssa_causal_heads(wbcl_context *ctx, const wbcl_tensor *w, const wbcl_tensor *temp,
                                   const wbcl_tensor *denom_bias, wbcl_tssa_state *state, wbcl_tensor *y,
                                   wbcl_tensor *Pi)
{
    return causal_entry(ctx, "wbcl_tssa_causal_heads", w, 0, 0, temp, denom_bias, state, y, Pi);
}

wbcl_status wbcl_tssa_causal_tokens(wbcl_context *ctx, const wbcl_tensor *w, size_t heads, const wbcl_tensor *temp,
                                    const wbcl_tensor *denom_bias, wbcl_tssa_state *state, wbcl_tensor *y,
                                    wbcl_tensor *Pi)
{
    return causal_entry(ctx, "wbcl_tssa_causal_tokens", w, heads, 1, temp, denom_bias, state, y, Pi);
}

/* ---- layers --------------------------------------------------------------------------------- */

struct wbcl_tssa_layer {
    wbcl_context *ctx;
    size_t d, K;
    wbcl_tensor *W, *b, *temp, *Wo, *bo;
    wbcl_tensor *w, *y; /* work buffers */
};

struct wbcl_tssa_causal_layer {
    wbcl_context *ctx;
    size_t d, K, tmax;
    wbcl_tensor *W, *b, *temp, *bias, *Wo, *bo;
    wbcl_tensor *w, *y;
};

void wbcl_tssa_layer_destroy(wbcl_tssa_layer *L)
{
    if (!L) return;
    wbcl_tensor_destroy(L->W);
    wbcl_tensor_destroy(L->b);
    wbcl_tensor_destroy(L->temp);
    wbcl_tensor_destroy(L->Wo);
    wbcl_tensor_destroy(L->bo);
    wbcl_tensor_destroy(L->w);
    wbcl_tensor_destroy(L->y);
    free(L);
}

void wbcl_tssa_causal_layer_destroy(wbcl_tssa_causal_layer *L)
{
    if (!L) return;
    wbcl_tensor_destroy(L->W);
    wbcl_tensor_destroy(L->b);
    wbcl_tensor_destroy(L->temp);
    wbcl_tensor_destroy(L->bias);
    wbcl_tensor_destroy(L->Wo);
    wbcl_tensor_destroy(L->bo);
    wbcl_tensor_destroy(L->w);
    wbcl_tensor_destroy(L->y);
    free(L);
}

size_t wbcl_tssa_causal_layer_tmax(const wbcl_tssa_causal_layer *L) { return L ? L->tmax : 0; }

static wbcl_status layer_args(wbcl_context *ctx, const char *op, size_t d, size_t heads, void *out)
{
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'out' is NULL", op);
    if (d == 0) return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: dimension d must be >= 1", op);
    return wbcl__check_heads_divide(ctx, op, d, heads);
}

wbcl_status wbcl_tssa_layer_create(wbcl_context *ctx, size_t d, size_t heads, const float *W, const float *b,
                                   const float *temp, const float *Wo, const float *bo, wbcl_tssa_layer **out)
{
    static const char *op = "wbcl_tssa_layer_create";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = layer_args(ctx, op, d, heads, out);
    if (st) return st;
    *out = NULL;
    if (!W || !temp || !Wo)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: W, temp and Wo must not be NULL", op);
    wbcl_tssa_layer *L = calloc(1, sizeof *L);
    if (!L) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    L->ctx = ctx;
    L->d = d;
    L->K = heads;
    size_t dd[2] = {d, d}, kk[2] = {heads, 1};
    st = wbcl__from_host(ctx, W, 2, dd, op, "W", &L->W);
    if (!st) st = wbcl__from_host(ctx, b, 1, &d, op, "b", &L->b);
    if (!st) st = wbcl__from_host(ctx, temp, 2, kk, op, "temp", &L->temp);
    if (!st) st = wbcl__from_host(ctx, Wo, 2, dd, op, "Wo", &L->Wo);
    if (!st) st = wbcl__from_host(ctx, bo, 1, &d, op, "bo", &L->bo);
    if (st) {
        wbcl_tssa_layer_destroy(L);
        return st;
    }
    wbcl__tensor_constant(L->W); /* the packed GEMM may keep their panels (host/core/packed.c) */
    wbcl__tensor_constant(L->Wo);
    *out = L;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_tssa_layer_load(wbcl_context *ctx, const wbcl_safetensors *stf, const char *file, const char *prefix,
                                 size_t d, size_t heads, wbcl_tssa_layer **out)
{
    static const char *op = "wbcl_tssa_layer_load";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = layer_args(ctx, op, d, heads, out);
    if (st) return st;
    *out = NULL;
    if (!stf) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'st' (the safetensors file) is NULL", op);
    wbcl_tssa_layer *L = calloc(1, sizeof *L);
    if (!L) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    L->ctx = ctx;
    L->d = d;
    L->K = heads;
    size_t dd[2] = {d, d}, kk[2] = {heads, 1};
    st = wbcl_weight_load(ctx, stf, file, prefix, "qkv.weight", 2, dd, 1, &L->W);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "qkv.bias", 1, &d, 0, &L->b);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "temp", 2, kk, 1, &L->temp);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "to_out.0.weight", 2, dd, 1, &L->Wo);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "to_out.0.bias", 1, &d, 1, &L->bo);
    if (st) {
        wbcl_tssa_layer_destroy(L);
        return st;
    }
    wbcl__tensor_constant(L->W); /* the packed GEMM may keep their panels (host/core/packed.c) */
    wbcl__tensor_constant(L->Wo);
    *out = L;
    return WBCL_SUCCESS;
}

/* x (B, N, d) or (N, d) with d == layer d; out the same shape, not x */
static wbcl_status check_layer_io(wbcl_context *ctx, const char *op, const void *layer, size_t d,
                                  const wbcl_tensor *x, const wbcl_tensor *out, size_t *B, size_t *N)
{
    if (!layer) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'layer' is NULL", op);
    size_t D;
    wbcl_status st = wbcl__check_tokens(ctx, x, op, "x", B, N, &D);
    if (!st) st = wbcl__check_tensor(ctx, out, op, "out");
    if (st) return st;
    if (D != d) {
        char s[128];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: 'x' has shape %s but the layer's dimension is d = %zu", op,
                          wbcl__shape_str(s, sizeof s, x->ndim, x->shape), d);
    }
    st = wbcl__check_same_shape(ctx, x, out, op, "x", "out");
    if (!st) st = wbcl__check_distinct(ctx, op, out, "out", x, "x");
    return st;
}

wbcl_status wbcl_tssa_layer_forward(wbcl_context *ctx, wbcl_tssa_layer *L, const wbcl_tensor *x, wbcl_tensor *out)
{
    static const char *op = "wbcl_tssa_layer_forward";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t B, N;
    wbcl_status st = check_layer_io(ctx, op, L, L ? L->d : 0, x, out, &B, &N);
    if (st) return st;
    if (L->ctx != ctx) return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: the layer belongs to another context", op);
    if ((st = wbcl__work(ctx, &L->w, x, L->d)) || (st = wbcl__work(ctx, &L->y, x, L->d))) return st;
    if ((st = wbcl__linear(ctx, x, L->W, L->b, L->w))) return st;
    if ((st = wbcl_tssa_tokens(ctx, L->w, L->K, L->temp, L->y, NULL))) return st;
    return wbcl__linear(ctx, L->y, L->Wo, L->bo, out);
}

wbcl_status wbcl_tssa_causal_layer_create(wbcl_context *ctx, size_t d, size_t heads, size_t tmax, const float *W,
                                          const float *b, const float *temp, const float *denom_bias,
                                          const float *Wo, const float *bo, wbcl_tssa_causal_layer **out)
{
    static const char *op = "wbcl_tssa_causal_layer_create";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = layer_args(ctx, op, d, heads, out);
    if (st) return st;
    *out = NULL;
    if (!W || !temp || !denom_bias || !Wo)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: W, temp, denom_bias and Wo must not be NULL", op);
    if (tmax == 0) return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: tmax must be >= 1", op);
    wbcl_tssa_causal_layer *L = calloc(1, sizeof *L);
    if (!L) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    L->ctx = ctx;
    L->d = d;
    L->K = heads;
    L->tmax = tmax;
    size_t dd[2] = {d, d}, kk[2] = {heads, 1}, kt[3] = {heads, tmax, 1};
    st = wbcl__from_host(ctx, W, 2, dd, op, "W", &L->W);
    if (!st) st = wbcl__from_host(ctx, b, 1, &d, op, "b", &L->b);
    if (!st) st = wbcl__from_host(ctx, temp, 2, kk, op, "temp", &L->temp);
    if (!st) st = wbcl__from_host(ctx, denom_bias, 3, kt, op, "denom_bias", &L->bias);
    if (!st) st = wbcl__from_host(ctx, Wo, 2, dd, op, "Wo", &L->Wo);
    if (!st) st = wbcl__from_host(ctx, bo, 1, &d, op, "bo", &L->bo);
    if (st) {
        wbcl_tssa_causal_layer_destroy(L);
        return st;
    }
    wbcl__tensor_constant(L->W); /* the packed GEMM may keep their panels (host/core/packed.c) */
    wbcl__tensor_constant(L->Wo);
    *out = L;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_tssa_causal_layer_load(wbcl_context *ctx, const wbcl_safetensors *stf, const char *file,
                                        const char *prefix, size_t d, size_t heads, wbcl_tssa_causal_layer **out)
{
    static const char *op = "wbcl_tssa_causal_layer_load";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = layer_args(ctx, op, d, heads, out);
    if (st) return st;
    *out = NULL;
    if (!stf) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: 'st' (the safetensors file) is NULL", op);
    if (!file) file = "weights";
    /* Tmax comes from the file: read denom_bias's shape first */
    char key[512];
    snprintf(key, sizeof key, "%sdenom_bias", prefix ? prefix : "");
    if (!wbcl_safetensors_has(stf, key)) return wbcl__fail(ctx, WBCL_ERROR_FORMAT, "%s: missing tensor '%s'", file, key);
    wbcl_array a;
    char err[512];
    if ((st = wbcl_safetensors_get(stf, key, &a, err, sizeof err))) return wbcl__fail(ctx, st, "%s", err);
    size_t tmax = a.ndim == 3 ? a.shape[1] : 0;
    if (a.ndim != 3 || a.shape[0] != heads || a.shape[2] != 1 || tmax == 0) {
        char s[160];
        st = wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: '%s' has shape %s, expected (%zu, Tmax, 1) with Tmax >= 1", file,
                        key, wbcl__shape_str(s, sizeof s, a.ndim, a.shape), heads);
        wbcl_array_free(&a);
        return st;
    }
    wbcl_array_free(&a);
    wbcl_tssa_causal_layer *L = calloc(1, sizeof *L);
    if (!L) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    L->ctx = ctx;
    L->d = d;
    L->K = heads;
    L->tmax = tmax;
    size_t dd[2] = {d, d}, kk[2] = {heads, 1}, kt[3] = {heads, tmax, 1};
    st = wbcl_weight_load(ctx, stf, file, prefix, "c_attn.weight", 2, dd, 1, &L->W);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "c_attn.bias", 1, &d, 0, &L->b);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "temp", 2, kk, 1, &L->temp);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "denom_bias", 3, kt, 1, &L->bias);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "c_proj.weight", 2, dd, 1, &L->Wo);
    if (!st) st = wbcl_weight_load(ctx, stf, file, prefix, "c_proj.bias", 1, &d, 0, &L->bo);
    if (st) {
        wbcl_tssa_causal_layer_destroy(L);
        return st;
    }
    wbcl__tensor_constant(L->W); /* the packed GEMM may keep their panels (host/core/packed.c) */
    wbcl__tensor_constant(L->Wo);
    *out = L;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_tssa_causal_layer_forward(wbcl_context *ctx, wbcl_tssa_causal_layer *L, const wbcl_tensor *x,
                                           wbcl_tssa_state *state, wbcl_tensor *out)
{
    static const char *op = "wbcl_tssa_causal_layer_forward";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    size_t B, N;
    wbcl_status st = check_layer_io(ctx, op, L, L ? L->d : 0, x, out, &B, &N);
    if (st) return st;
    if (L->ctx != ctx) return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: the layer belongs to another context", op);
    /* the checks the TSSA call would make on the state and Tmax, before any projection runs */
    size_t t0 = 0;
    if (state) {
        if (state->ctx != ctx)
            return wbcl__fail(ctx, WBCL_ERROR_CONTEXT_MISMATCH, "%s: 'state' belongs to another context", op);
        if (state->B != B || state->K != L->K || state->p != L->d / L->K)
            return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                              "%s: 'state' is for batch %zu, %zu heads, p %zu but x has batch %zu (layer: %zu heads, "
                              "p %zu)",
                              op, state->B, state->K, state->p, B, L->K, L->d / L->K);
        t0 = state->t;
    }
    if (t0 > L->tmax || N > L->tmax - t0)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                          "%s: %zu tokens from position %zu exceed the %zu positions of 'denom_bias' (Tmax)", op, N, t0,
                          L->tmax);
    if ((st = wbcl__work(ctx, &L->w, x, L->d)) || (st = wbcl__work(ctx, &L->y, x, L->d))) return st;
    if ((st = wbcl__linear(ctx, x, L->W, L->b, L->w))) return st;
    if ((st = wbcl_tssa_causal_tokens(ctx, L->w, L->K, L->temp, L->bias, state, L->y, NULL))) return st;
    return wbcl__linear(ctx, L->y, L->Wo, L->bo, out);
}

void wbcl__tssa_causal_layer_transient(wbcl_tssa_causal_layer *L)
{
    if (!L) return;
    wbcl__tensor_transient(L->W);
    wbcl__tensor_transient(L->Wo);
}

wbcl_status wbcl__tssa_layer_store_f16(wbcl_context *ctx, wbcl_tssa_layer *l)
{
    /* both projections go only through wbcl__linear (a GEMM) */
    wbcl_status st = wbcl__tensor_store_f16(ctx, &l->W);
    return st ? st : wbcl__tensor_store_f16(ctx, &l->Wo);
}
