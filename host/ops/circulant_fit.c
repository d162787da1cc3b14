/* Shift-invariant ReduNet (include/wbcl/circulant.h): construction. wbcl_circulant_fit builds the
 * layers on one device; wbcl_circulant_fit_shard builds the same model over several participants
 * that each hold a shard of the samples. The pipeline they drive: host/ops/circulant_pipeline.c.
 * The fit reads nothing back inside its layer loop (unless a progress callback wants each layer's
 * objective): the predicted groups are built on the device (circ_groups), pivot info, log-determinants
 * and class counts of all layers are read and checked once at the end, before Z is written. */
#include "circulant_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buffers.h"

/* Fit's deferred checks and objective: the pivot info (2 batches per layer: construction, objective),
 * log-determinants (one batch per layer) and predicted class counts (K per layer) of layers l0..l1-1 are
 * read in one go; the first failure in layer order is reported, else hist gets (dR, R, Rc) per layer. */
typedef struct {
    cl_mem info, ld, cnt, same, ldc;
    int *info_h, *cnt_h, *same_h;
    float *ld_h, *ldc_h;
    size_t *cnt_z;
    size_t L;
    int reuse; /* objective of layer l skipped when its groups are the true ones: layer l+1's construction */
} fit_log;

static wbcl_status collect(wbcl_context *ctx, const char *op, ws *w, fit_log *f, size_t l0, size_t l1, double *hist)
{
    const size_t K = w->K, nb = (K + 1) * w->g.P, n = l1 - l0;
    cl_int e = clEnqueueReadBuffer(ctx->queue, f->info, CL_FALSE, 2 * l0 * 2 * nb * sizeof(int),
                                   2 * n * 2 * nb * sizeof(int), f->info_h, 0, NULL, NULL);
    if (e == CL_SUCCESS)
        e = clEnqueueReadBuffer(ctx->queue, f->ld, CL_FALSE, l0 * nb * sizeof(float), n * nb * sizeof(float), f->ld_h,
                                0, NULL, NULL);
    if (e == CL_SUCCESS && f->reuse)
        e = clEnqueueReadBuffer(ctx->queue, f->ldc, CL_FALSE, 0, f->L * nb * sizeof(float), f->ldc_h, 0, NULL, NULL);
    if (e == CL_SUCCESS)
        e = clEnqueueReadBuffer(ctx->queue, f->same, CL_FALSE, l0 * sizeof(int), n * sizeof(int), f->same_h, 0, NULL,
                                NULL);
    if (e == CL_SUCCESS)
        e = clEnqueueReadBuffer(ctx->queue, f->cnt, CL_TRUE, l0 * K * sizeof(int), n * K * sizeof(int), f->cnt_h, 0,
                                NULL, NULL);
    if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "%s: reading the layers' pivot info and objective", op);
    wbcl_status st;
    for (size_t i = 0; i < n; i++) {
        if ((st = wbcl__circulant_check_info(ctx, op, w, f->info_h + 2 * i * 2 * nb, (int)(l0 + i) + 1, "")) ||
            (st = wbcl__circulant_check_info(ctx, op, w, f->info_h + (2 * i + 1) * 2 * nb, (int)(l0 + i) + 1,
                                             " (objective)")))
            return st;
        for (size_t j = 0; j < K; j++) f->cnt_z[j] = (size_t)f->cnt_h[i * K + j];
        const size_t l = l0 + i;
        const int reused = f->reuse && f->same_h[i] && l + 1 < f->L;
        wbcl__circulant_objective_sum(w, reused ? f->ldc_h + (l + 1) * nb : f->ld_h + i * nb, f->cnt_z, hist + 3 * l);
    }
    return WBCL_SUCCESS;
}

/* The checks both fits start with: X's geometry (gx), the parameters, the lifting kernel (C output
 * channels, kh x kw; without one the features are X's own channels) and Z's shape; g is gx with C channels. */
static wbcl_status fit_geometry(wbcl_context *ctx, const char *op, const wbcl_tensor *X, const wbcl_tensor *lift,
                                const wbcl_circulant_params *params, const wbcl_tensor *Z, geom *gx_out, geom *g,
                                size_t *C_out, size_t *kh, size_t *kw)
{
    geom gx = {0};
    size_t C = 0;
    wbcl_status st;
    if ((st = wbcl__circulant_signal_geom(ctx, op, "X", X, &gx)) ||
        (st = wbcl__circulant_check_params(ctx, op, params)))
        return st;
    if (lift) {
        if ((st = wbcl__circulant_lift_geom(ctx, op, lift, &gx, &C, kh, kw))) return st;
    } else {
        C = gx.C;
    }
    if ((st = wbcl__circulant_check_channels(ctx, op, C))) return st;
    *gx_out = gx;
    *g = gx;
    g->C = C;
    *C_out = C;
    if (Z) {
        geom gz = {0};
        if ((st = wbcl__circulant_signal_geom(ctx, op, "Z", Z, &gz))) return st;
        if (gz.dims != g->dims || gz.m != g->m || gz.C != C || gz.H != g->H || gz.W != g->W) {
            char a[96];
            return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: Z has shape %s; expected (%zu, %zu, %s%zu)", op,
                              wbcl__shape_str(a, sizeof a, Z->ndim, Z->shape), g->m, C,
                              g->dims == 2 ? "H, " : "", g->W);
        }
    }
    return WBCL_SUCCESS;
}

wbcl_status wbcl_circulant_fit(wbcl_context *ctx, const wbcl_tensor *X, const wbcl_tensor *lift, const int *labels,
                               int classes, const wbcl_circulant_params *params, wbcl_circulant_progress_fn progress,
                               void *user, wbcl_tensor *Z, wbcl_circulant **out)
{
    static const char op[] = "wbcl_circulant_fit";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    *out = NULL;
    geom gx = {0}, g = {0};
    size_t C = 0, kh = 1, kw = 1;
    wbcl_status st;
    if ((st = fit_geometry(ctx, op, X, lift, params, Z, &gx, &g, &C, &kh, &kw))) return st;
    size_t *counts = malloc((size_t)(classes > 0 && classes <= MAX_CLASSES ? classes : 1) * sizeof *counts);
    if (!counts) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    if ((st = wbcl__circulant_check_labels(ctx, op, labels, g.m, classes, 1, counts))) {
        free(counts);
        return st;
    }
    const size_t K = (size_t)classes;
    float *lift_h = NULL, *alpha = malloc((K + 1) * sizeof *alpha), *gamma = malloc(K * sizeof *gamma);
    wbcl_circulant *net = NULL;
    ws w;
    fit_log f;
    memset(&w, 0, sizeof w);
    memset(&f, 0, sizeof f);
    const size_t L = (size_t)params->layers, nb = (K + 1) * g.P;
    f.info_h = malloc(2 * L * 2 * nb * sizeof *f.info_h);
    f.ld_h = malloc(L * nb * sizeof *f.ld_h);
    f.cnt_h = malloc(L * K * sizeof *f.cnt_h);
    f.cnt_z = malloc(K * sizeof *f.cnt_z);
    f.same_h = malloc(L * sizeof *f.same_h);
    f.ldc_h = malloc(L * nb * sizeof *f.ldc_h);
    f.L = L;
    f.reuse = progress == NULL;
    if (!alpha || !gamma || !f.info_h || !f.ld_h || !f.cnt_h || !f.cnt_z || !f.same_h || !f.ldc_h) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
        goto done;
    }
    if (lift) {
        lift_h = malloc(lift->numel * sizeof *lift_h);
        if (!lift_h) {
            st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
            goto done;
        }
        if ((st = wbcl_tensor_read(ctx, lift, lift_h, lift->numel))) goto done;
        for (size_t i = 0; i < lift->numel; i++)
            if (!isfinite(lift_h[i])) {
                st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: lifting kernel element %zu is not finite", op, i);
                goto done;
            }
    }
    if ((st = wbcl__circulant_new(ctx, g.dims, C, g.H, g.W, classes, params->layers, params, &net))) goto done;
    if ((st = wbcl__circulant_set_extra(net, NULL, lift_h, gx.C, kh, kw))) goto done;
    net->hist = calloc((size_t)params->layers * 3, sizeof *net->hist);
    if (!net->hist) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
        goto done;
    }
    if ((st = wbcl__circulant_ws_alloc(ctx, &w, &g, K, labels))) goto done;
    if ((st = wbcl__circulant_features_in(ctx, &w, X, lift ? lift->mem : NULL, gx.C, kh, kw)) ||
        (st = wbcl__circulant_enter(ctx, op, &w, 1)))
        goto done;
    for (size_t j = 0; j < K; j++) {
        alpha[j] = (float)((double)C / ((double)counts[j] * params->eps2));
        gamma[j] = (float)((double)counts[j] / (double)g.m);
    }
    alpha[K] = (float)((double)C / ((double)g.m * params->eps2));
    /* No read-back inside the loop (unless progress is wanted): pivots, log-determinants and the predicted
     * groups stay on the device and are checked and summed once at the end (collect), before Z is written. */
    if ((st = wbcl__buffer(ctx, 2 * L * 2 * nb * sizeof(int), "pivot info", &f.info)) ||
        (st = wbcl__buffer(ctx, L * nb * sizeof(float), "log-determinants", &f.ld)) ||
        (st = wbcl__buffer(ctx, L * K * sizeof(int), "class counts", &f.cnt)) ||
        (st = wbcl__buffer(ctx, L * sizeof(int), "group flags", &f.same)) ||
        (st = wbcl__buffer(ctx, L * nb * sizeof(float), "log-determinants", &f.ldc)) ||
        (st = wbcl__fill_int(ctx, f.info, -1, 2 * L * 2 * nb, "pivot info")) ||
        (st = wbcl__write_buf(ctx, w.alpha, (K + 1) * sizeof(float), alpha, "alpha")) ||
        (st = wbcl__circulant_set_groups(ctx, &w, labels)))
        goto done;
    for (size_t l = 0; l < L; l++) {
        cl_int e = clEnqueueWriteBuffer(ctx->queue, net->gam[l], CL_FALSE, 0, K * sizeof(float), gamma, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            st = wbcl__cl_fail(ctx, e, "%s: writing gamma", op);
            goto done;
        }
        /* the objective of layer l (on its output, grouped by prediction) is skipped on the device when the
         * predictions are the true labels and layer l+1 follows: its construction factors the same matrices
         * (collect takes those log-determinants) */
        const int skippable = f.reuse && l + 1 < L;
        if ((st = wbcl__circulant_enq_gram(ctx, &w, w.mask, w.boff, w.blocks, w.zero, 0)) ||
            (st = wbcl__circulant_enq_shinv(ctx, &w, w.alpha, net->ops[l], f.ldc, l * nb, f.info, 2 * l * 2 * nb,
                                            w.zero, 0)) ||
            (st = wbcl__circulant_apply_layer(ctx, &w, net->ops[l], net->gam[l], params)) ||
            (st = wbcl__circulant_enq_groups(ctx, &w, f.cnt, l * K, params->eps2, f.same, l)) ||
            (st = wbcl__circulant_enq_gram(ctx, &w, w.mask2, w.boff2, w.blocks2, skippable ? f.same : w.zero,
                                           skippable ? l : 0)) ||
            (st = wbcl__circulant_enq_shinv(ctx, &w, w.alpha2, NULL, f.ld, l * nb, f.info, (2 * l + 1) * 2 * nb,
                                            skippable ? f.same : w.zero, skippable ? l : 0)))
            goto done;
        memcpy(net->gamma + l * K, gamma, K * sizeof *gamma);
        if (progress) {
            if ((st = collect(ctx, op, &w, &f, l, l + 1, net->hist))) goto done;
            progress((int)l + 1, net->hist[3 * l], net->hist[3 * l + 1], net->hist[3 * l + 2], user);
        }
    }
    if (!progress && (st = collect(ctx, op, &w, &f, 0, L, net->hist))) goto done;
    if (Z) {
        if ((st = wbcl__circulant_leave(ctx, &w, w.Zr)) ||
            (st = wbcl__copy_buf(ctx, w.Zr, Z->mem, g.m * C * g.N * sizeof(float), "Z")))
            goto done;
    }
    if ((st = wbcl__finish(ctx, op))) goto done;
    *out = net;
    net = NULL;
done:
    clFinish(ctx->queue); /* no enqueued transfer may outlive the host arrays (error paths) */
    wbcl__tmp_release(&f.info);
    wbcl__tmp_release(&f.ld);
    wbcl__tmp_release(&f.cnt);
    wbcl__tmp_release(&f.same);
    wbcl__tmp_release(&f.ldc);
    free(f.same_h);
    free(f.ldc_h);
    free(f.info_h);
    free(f.ld_h);
    free(f.cnt_h);
    free(f.cnt_z);
    wbcl__circulant_ws_free(&w);
    wbcl_circulant_destroy(net);
    free(counts);
    free(lift_h);
    free(alpha);
    free(gamma);
    return st;
}

/* ---- construction over several participants (data parallel) ----------------------------------
 *
 * The construction sees the training samples only through per-frequency statistics: per layer the
 * group Gram matrices S_{j,p} (lower triangles; group K: every sample) and the group sizes. Each
 * participant computes them on its own shard with circ_gram, they are summed in double through
 * comm->sum (C(C+1)/2 complex entries per matrix, (K+1) P matrices: O(K C^2 T), whatever m), rounded
 * back to float and written over the local ones; every participant then factors the same matrices
 * (the same E_p, C_{j,p}), applies the layer to its own samples, and sums the statistics grouped by
 * yhat for the objective the same way. Two sums per layer, plus one of the geometry at the start and
 * the final agreement. With one participant whose sum leaves the buffer as it is, this is
 * wbcl_circulant_fit bit for bit (float -> double -> float is exact). */

typedef struct {
    const wbcl_redunet_comm *comm;
    int known; /* a sum reported a failure: no further calls */
    double *buf;
    float *S_h;
} shard_comm;

static wbcl_status shard_sum(wbcl_context *ctx, const char *op, shard_comm *sc, double *buf, size_t n)
{
    if (sc->comm->sum(buf, n, 0, sc->comm->user)) {
        sc->known = 1;
        return wbcl__fail(ctx, WBCL_ERROR_PEER, "%s: another participant failed (or the transport did)", op);
    }
    return WBCL_SUCCESS;
}

/* The shard fit's two steps on host labels / host alphas, with the pivot check right away (the
 * statistics are summed over the participants between them, so nothing is deferred here):
 * the per-frequency Gram matrices of the groups given by labels (sample-indexed) into w->S, and
 * M = alpha (I + alpha S)^-1 (M may be NULL: log-determinants only) with the log-determinants in
 * w->ld_h. layer: 0-based, named in a pivot failure. */
static wbcl_status shard_gram(wbcl_context *ctx, ws *w, const int *labels)
{
    wbcl_status st = wbcl__circulant_set_groups(ctx, w, labels);
    if (!st) st = wbcl__circulant_enq_gram(ctx, w, w->mask, w->boff, w->blocks, w->zero, 0);
    return st;
}

static wbcl_status shard_shinv(wbcl_context *ctx, const char *op, ws *w, const float *alpha_h, cl_mem M, int layer,
                               const char *stage)
{
    const size_t nb = (w->K + 1) * w->g.P;
    wbcl_status st;
    if ((st = wbcl__write_buf(ctx, w->alpha, (w->K + 1) * sizeof(float), alpha_h, "alpha")) ||
        (st = wbcl__fill_int(ctx, w->info, -1, 2 * nb, "pivot info")) ||
        (st = wbcl__circulant_enq_shinv(ctx, w, w->alpha, M, w->ld, 0, w->info, 0, w->zero, 0)) ||
        (st = wbcl__read_buf(ctx, w->info, 0, 2 * nb * sizeof(int), w->info_h, "pivot info")) ||
        (st = wbcl__circulant_check_info(ctx, op, w, w->info_h, layer + 1, stage)) ||
        (st = wbcl__read_buf(ctx, w->ld, 0, nb * sizeof(float), w->ld_h, "log-determinants")))
        return st;
    return WBCL_SUCCESS;
}

/* w->S (local, group sizes cnt[K+1] as doubles in/out) -> the sums over all participants, in w->S and cnt. */
/* The device keeps the (K+1) P matrices in blocks of CIRC_MW lanes (cl/circulant.cl, CI_MW): the real
 * part of element (c, d) of matrix t at S_AT(t, c, d), its imaginary part CIRC_MW floats later. Only the
 * lower triangles are summed; the upper ones are never read (the factorization uses the lower). */
#define CIRC_MW 16
#define S_AT(t, c, d) ((((t) / CIRC_MW * C + (c)) * C + (d)) * 2 * CIRC_MW + (t) % CIRC_MW)

static wbcl_status shard_sum_gram(wbcl_context *ctx, const char *op, shard_comm *sc, ws *w, double *cnt)
{
    const geom *g = &w->g;
    const size_t C = g->C, nb = (w->K + 1) * g->P, tri = C * (C + 1) / 2, CC = C * C;
    const size_t n = nb * tri * 2 + w->K + 1, nbl = (nb + CIRC_MW - 1) / CIRC_MW * CIRC_MW;
    wbcl_status st;
    if ((st = wbcl__read_buf(ctx, w->S, 0, nbl * CC * 2 * sizeof(float), sc->S_h, "per-frequency matrices"))) return st;
    double *b = sc->buf;
    for (size_t t = 0; t < nb; t++)
        for (size_t c = 0; c < C; c++)
            for (size_t d = 0; d <= c; d++) {
                const float *s = sc->S_h + S_AT(t, c, d);
                *b++ = s[0];
                *b++ = s[CIRC_MW];
            }
    memcpy(b, cnt, (w->K + 1) * sizeof *cnt);
    if ((st = shard_sum(ctx, op, sc, sc->buf, n))) return st;
    b = sc->buf;
    for (size_t t = 0; t < nb; t++)
        for (size_t c = 0; c < C; c++)
            for (size_t d = 0; d <= c; d++) {
                float *s = sc->S_h + S_AT(t, c, d);
                s[0] = (float)*b++;
                s[CIRC_MW] = (float)*b++;
            }
    memcpy(cnt, b, (w->K + 1) * sizeof *cnt);
    return wbcl__write_buf(ctx, w->S, nbl * CC * 2 * sizeof(float), sc->S_h, "per-frequency matrices");
}

static wbcl_status fit_shard_local(wbcl_context *ctx, const char *op, shard_comm *sc, const wbcl_tensor *X,
                                   const wbcl_tensor *lift, const int *labels, int classes,
                                   const wbcl_circulant_params *params, wbcl_circulant_progress_fn progress,
                                   void *user, wbcl_tensor *Z, wbcl_circulant **out)
{
    geom gx = {0}, g = {0};
    size_t C = 0, kh = 1, kw = 1;
    wbcl_status st;
    if ((st = fit_geometry(ctx, op, X, lift, params, Z, &gx, &g, &C, &kh, &kw))) return st;
    size_t *counts = malloc((size_t)(classes > 0 && classes <= MAX_CLASSES ? classes : 1) * sizeof *counts);
    if (!counts) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    if ((st = wbcl__circulant_check_labels(ctx, op, labels, g.m, classes, 0, counts))) {
        free(counts);
        return st;
    }
    const size_t K = (size_t)classes, nb = (K + 1) * g.P;
    /* the geometry and the model settings must agree: sums of 1, x and x^2 over the participants */
    enum { NG = 12 };
    double geo[1 + 2 * NG];
    {
        const double v[NG] = {(double)g.dims,  (double)C,          (double)g.H,         (double)g.W,
                              (double)K,       (double)gx.C,       (double)kh,          (double)kw,
                              (double)params->layers, (double)params->eta, (double)params->eps2,
                              (double)params->lambda};
        geo[0] = 1.0;
        for (int i = 0; i < NG; i++) geo[1 + i] = v[i], geo[1 + NG + i] = v[i] * v[i];
    }
    double *cnt = malloc((K + 1) * sizeof *cnt);
    float *lift_h = NULL, *alpha = malloc((K + 1) * sizeof *alpha), *gamma = malloc(K * sizeof *gamma);
    int *yh = malloc(g.m * sizeof *yh);
    wbcl_circulant *net = NULL;
    ws w;
    memset(&w, 0, sizeof w);
    sc->S_h = malloc((nb + CIRC_MW - 1) / CIRC_MW * CIRC_MW * C * C * 2 * sizeof *sc->S_h);
    sc->buf = malloc((nb * (C * (C + 1) / 2) * 2 + K + 1) * sizeof *sc->buf);
    if (!cnt || !alpha || !gamma || !yh || !sc->S_h || !sc->buf) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
        goto done;
    }
    if ((st = shard_sum(ctx, op, sc, geo, sizeof geo / sizeof geo[0]))) goto done;
    for (int i = 0; i < NG; i++) { /* the variance over the participants is zero */
        const double mean = geo[1 + i] / geo[0];
        if (fabs(geo[1 + NG + i] / geo[0] - mean * mean) > 1e-9 * (1.0 + mean * mean)) {
            st = wbcl__fail(ctx, WBCL_ERROR_SHAPE,
                            "%s: the participants disagree on the geometry, classes, lifting kernel or parameters",
                            op);
            goto done;
        }
    }
    if (lift) {
        lift_h = malloc(lift->numel * sizeof *lift_h);
        if (!lift_h) {
            st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
            goto done;
        }
        if ((st = wbcl_tensor_read(ctx, lift, lift_h, lift->numel))) goto done;
        for (size_t i = 0; i < lift->numel; i++)
            if (!isfinite(lift_h[i])) {
                st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: lifting kernel element %zu is not finite", op, i);
                goto done;
            }
    }
    if ((st = wbcl__circulant_new(ctx, g.dims, C, g.H, g.W, classes, params->layers, params, &net))) goto done;
    if ((st = wbcl__circulant_set_extra(net, NULL, lift_h, gx.C, kh, kw))) goto done;
    net->hist = calloc((size_t)params->layers * 3, sizeof *net->hist);
    if (!net->hist) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
        goto done;
    }
    if ((st = wbcl__circulant_ws_alloc(ctx, &w, &g, K, labels))) goto done;
    if ((st = wbcl__circulant_features_in(ctx, &w, X, lift ? lift->mem : NULL, gx.C, kh, kw)) ||
        (st = wbcl__circulant_enter(ctx, op, &w, 1)))
        goto done;
    double m_all = 0.0;
    for (int l = 0; l < params->layers; l++) {
        for (size_t j = 0; j < K; j++) cnt[j] = (double)counts[j];
        cnt[K] = (double)g.m;
        if ((st = shard_gram(ctx, &w, labels)) || (st = shard_sum_gram(ctx, op, sc, &w, cnt))) goto done;
        if (l == 0) {
            for (size_t j = 0; j < K; j++)
                if (!cnt[j]) {
                    st = wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: class %zu has no samples on any participant",
                                    op, j);
                    goto done;
                }
            m_all = cnt[K];
            for (size_t j = 0; j < K; j++) {
                alpha[j] = (float)((double)C / (cnt[j] * params->eps2));
                gamma[j] = (float)(cnt[j] / m_all);
            }
            alpha[K] = (float)((double)C / (m_all * params->eps2));
        }
        if ((st = shard_shinv(ctx, op, &w, alpha, net->ops[l], l, "")) ||
            (st = wbcl__write_buf(ctx, net->gam[l], K * sizeof(float), gamma, "gamma")) ||
            (st = wbcl__circulant_apply_layer(ctx, &w, net->ops[l], net->gam[l], params)))
            goto done;
        memcpy(net->gamma + (size_t)l * K, gamma, K * sizeof *gamma);
        /* the objective of the output grouped by yhat, from the summed statistics */
        if ((st = wbcl__circulant_read_memberships(ctx, &w, yh, NULL))) goto done;
        for (size_t j = 0; j <= K; j++) cnt[j] = 0.0;
        for (size_t b = 0; b < g.m; b++) cnt[yh[b]] += 1.0;
        cnt[K] = (double)g.m;
        if ((st = shard_gram(ctx, &w, yh)) || (st = shard_sum_gram(ctx, op, sc, &w, cnt))) goto done;
        float al[MAX_CLASSES + 1];
        for (size_t j = 0; j < K; j++) al[j] = cnt[j] ? (float)((double)C / (cnt[j] * params->eps2)) : 0.0f;
        al[K] = (float)((double)C / (cnt[K] * params->eps2));
        if ((st = shard_shinv(ctx, op, &w, al, NULL, l, " (objective)"))) goto done;
        double R = 0.0, Rc = 0.0;
        for (size_t p = 0; p < g.P; p++) {
            const size_t q = p % g.Wh;
            const double wt = (q == 0 || 2 * q == g.W) ? 1.0 : 2.0;
            R += wt * w.ld_h[K * g.P + p];
            for (size_t j = 0; j < K; j++)
                if (cnt[j]) Rc += wt * (cnt[j] / cnt[K]) * w.ld_h[j * g.P + p];
        }
        R /= 2.0 * (double)g.N;
        Rc /= 2.0 * (double)g.N;
        double *h = net->hist + 3 * (size_t)l;
        h[0] = R - Rc;
        h[1] = R;
        h[2] = Rc;
        if (progress) progress(l + 1, h[0], h[1], h[2], user);
    }
    if (Z) {
        if ((st = wbcl__circulant_leave(ctx, &w, w.Zr)) ||
            (st = wbcl__copy_buf(ctx, w.Zr, Z->mem, g.m * C * g.N * sizeof(float), "Z")))
            goto done;
    }
    if ((st = wbcl__finish(ctx, op))) goto done;
    *out = net;
    net = NULL;
done:
    wbcl__circulant_ws_free(&w);
    wbcl_circulant_destroy(net);
    free(counts);
    free(cnt);
    free(lift_h);
    free(alpha);
    free(gamma);
    free(yh);
    free(sc->S_h);
    free(sc->buf);
    sc->S_h = NULL;
    sc->buf = NULL;
    return st;
}

wbcl_status wbcl_circulant_fit_shard(wbcl_context *ctx, const wbcl_tensor *X, const wbcl_tensor *lift,
                                     const int *labels, int classes, const wbcl_circulant_params *params,
                                     const wbcl_redunet_comm *comm, wbcl_circulant_progress_fn progress, void *user,
                                     wbcl_tensor *Z, wbcl_circulant **out)
{
    static const char op[] = "wbcl_circulant_fit_shard";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!comm) return wbcl_circulant_fit(ctx, X, lift, labels, classes, params, progress, user, Z, out);
    if (!comm->sum) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: comm->sum is NULL", op);
    if (!out) { /* cannot even report: still agree, so that no participant waits */
        comm->sum(NULL, 0, 1, comm->user);
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    }
    *out = NULL;
    shard_comm sc;
    memset(&sc, 0, sizeof sc);
    sc.comm = comm;
    wbcl_circulant *net = NULL;
    wbcl_status st = fit_shard_local(ctx, op, &sc, X, lift, labels, classes, params, progress, user, Z, &net);
    /* the final agreement (or this participant's one failed call) */
    if (!sc.known && comm->sum(NULL, 0, st != WBCL_SUCCESS, comm->user) && !st)
        st = wbcl__fail(ctx, WBCL_ERROR_PEER, "%s: another participant failed (or the transport did)", op);
    if (st) {
        wbcl_circulant_destroy(net);
        return st;
    }
    *out = net;
    return WBCL_SUCCESS;
}
