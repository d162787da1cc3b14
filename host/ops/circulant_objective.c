/* Shift-invariant ReduNet (include/wbcl/circulant.h): the rate-reduction objective (dR, R, Rc) of
 * features, from per-frequency log-determinants: wbcl_circulant_objective, and the sum that the
 * construction uses for its per-layer history (host/ops/circulant_fit.c). */
#include "circulant_internal.h"

#include <math.h>
#include <stdlib.h>

#include "buffers.h"

/* (dR, R, Rc) from the log-determinants ld ((K+1) P floats, host) and the group sizes cnt (K). */
void wbcl__circulant_objective_sum(const ws *w, const float *ld, const size_t *cnt, double out[3])
{
    const geom *g = &w->g;
    const size_t K = w->K;
    double R = 0.0, Rc = 0.0;
    for (size_t p = 0; p < g->P; p++) {
        const size_t q = p % g->Wh;
        const double wt = (q == 0 || 2 * q == g->W) ? 1.0 : 2.0;
        R += wt * ld[K * g->P + p];
        for (size_t j = 0; j < K; j++)
            if (cnt[j]) Rc += wt * ((double)cnt[j] / (double)g->m) * ld[j * g->P + p];
    }
    R /= 2.0 * (double)g->N;
    Rc /= 2.0 * (double)g->N;
    out[0] = R - Rc;
    out[1] = R;
    out[2] = Rc;
}

/* Objective of the spectra (lane layout) grouped by host labels (blocking). */
static wbcl_status objective_of(wbcl_context *ctx, const char *op, ws *w, const int *labels, float eps2, double out[3])
{
    const geom *g = &w->g;
    const size_t K = w->K, nb = (K + 1) * g->P;
    size_t *cnt = calloc(K, sizeof *cnt);
    float *alpha = malloc((K + 1) * sizeof *alpha);
    wbcl_status st = WBCL_SUCCESS;
    if (!cnt || !alpha) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
        goto done;
    }
    for (size_t b = 0; b < g->m; b++) cnt[labels[b]]++;
    for (size_t j = 0; j < K; j++) alpha[j] = cnt[j] ? (float)((double)g->C / ((double)cnt[j] * eps2)) : 0.0f;
    alpha[K] = (float)((double)g->C / ((double)g->m * eps2));
    if ((st = wbcl__write_buf(ctx, w->alpha, (K + 1) * sizeof(float), alpha, "alpha")) ||
        (st = wbcl__fill_int(ctx, w->info, -1, 2 * nb, "pivot info")) ||
        (st = wbcl__circulant_set_groups(ctx, w, labels)) ||
        (st = wbcl__circulant_enq_gram(ctx, w, w->mask, w->boff, w->blocks, w->zero, 0)) ||
        (st = wbcl__circulant_enq_shinv(ctx, w, w->alpha, NULL, w->ld, 0, w->info, 0, w->zero, 0)) ||
        (st = wbcl__read_buf(ctx, w->info, 0, 2 * nb * sizeof(int), w->info_h, "pivot info")) ||
        (st = wbcl__circulant_check_info(ctx, op, w, w->info_h, 0, "")) ||
        (st = wbcl__read_buf(ctx, w->ld, 0, nb * sizeof(float), w->ld_h, "log-determinants")))
        goto done;
    wbcl__circulant_objective_sum(w, w->ld_h, cnt, out);
done:
    free(cnt);
    free(alpha);
    return st;
}

wbcl_status wbcl_circulant_objective(wbcl_context *ctx, const wbcl_tensor *Z, const int *labels, int classes,
                                     float eps2, double *dR, double *R, double *Rc)
{
    static const char op[] = "wbcl_circulant_objective";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    geom g = {0};
    wbcl_status st;
    if ((st = wbcl__circulant_signal_geom(ctx, op, "Z", Z, &g)) || (st = wbcl__circulant_check_channels(ctx, op, g.C)))
        return st;
    if (!(eps2 > 0.0f) || !isfinite(eps2))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: eps2 = %g must be finite and > 0", op, (double)eps2);
    size_t *counts = malloc((size_t)(classes > 0 && classes <= MAX_CLASSES ? classes : 1) * sizeof *counts);
    if (!counts) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", op);
    st = wbcl__circulant_check_labels(ctx, op, labels, g.m, classes, 0, counts);
    free(counts);
    if (st) return st;
    ws w;
    double o[3];
    if ((st = wbcl__circulant_ws_alloc(ctx, &w, &g, (size_t)classes, NULL))) return st;
    if (!(st = wbcl__circulant_features_in(ctx, &w, Z, NULL, 0, 0, 0)) &&
        !(st = wbcl__circulant_enter(ctx, op, &w, 0)) && !(st = objective_of(ctx, op, &w, labels, eps2, o))) {
        if (dR) *dR = o[0];
        if (R) *R = o[1];
        if (Rc) *Rc = o[2];
    }
    wbcl__circulant_ws_free(&w);
    return st;
}
