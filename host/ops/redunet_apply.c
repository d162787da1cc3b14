/* Vector ReduNet (include/wbcl/redunet.h, SPEC.md §4.1): application (Algorithm 5.2) of a model
 * to features, and the objective (dR, R, Rc) of features grouped by labels. The steps they drive:
 * host/ops/redunet_layers.c. */
#include "redunet_internal.h"

#include <math.h>
#include <stdlib.h>

#include "buffers.h"

/* ---- apply ---------------------------------------------------------------------------------------- */

wbcl_status wbcl_redunet_apply(wbcl_context *ctx, const wbcl_redunet *net, const wbcl_tensor *X, wbcl_tensor *Z)
{
    static const char op[] = "wbcl_redunet_apply";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__redunet_check_net(ctx, op, net);
    if (st) return st;
    if ((st = wbcl__redunet_check_rows(ctx, op, "X", X))) return st;
    const size_t m = X->shape[0], d = X->shape[1], K = (size_t)net->K;
    if (d != (size_t)net->d) {
        char s[96];
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: X has shape %s but the model's dimension is d = %d", op,
                          wbcl__shape_str(s, sizeof s, X->ndim, X->shape), net->d);
    }
    if (!Z) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: Z is NULL", op);
    if ((st = wbcl__redunet_check_out(ctx, op, "Z", Z, m, d))) return st;
    const int fused = use_fused(d, K, net->params.impl);
    rd_work w;
    if ((st = wbcl__redunet_work_init(&w, ctx, op, m, d, K, fused, 0, 0))) goto done;
    if ((st = wbcl__redunet_enter(&w, X, "X", 1))) goto done;
    for (int l = 0; l < net->L && !st; l++)
        st = fused ? wbcl__redunet_fused_apply(&w, net->W[l], net->params.eta, net->params.lambda)
                   : wbcl__redunet_gemm_apply(&w, net->W[l], net->params.eta, net->params.lambda);
    if (!st) st = wbcl__redunet_copy_out(&w, Z);
    if (!st) st = wbcl_context_finish(ctx);
done:
    wbcl__redunet_work_free(&w);
    return st;
}

/* ---- objective ------------------------------------------------------------------------------------ */

wbcl_status wbcl_redunet_objective(wbcl_context *ctx, const wbcl_tensor *Z, const int *labels, int classes,
                                   float eps2, double *dR, double *R, double *Rc)
{
    static const char op[] = "wbcl_redunet_objective";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    wbcl_status st = wbcl__redunet_check_rows(ctx, op, "Z", Z);
    if (st) return st;
    const size_t m = Z->shape[0], d = Z->shape[1];
    if (!(eps2 > 0.0f) || !isfinite(eps2))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: eps2 = %g, must be positive and finite", op,
                          (double)eps2);
    if ((st = wbcl__redunet_check_classes(ctx, op, labels, m, classes, 0))) return st;
    const size_t K = (size_t)classes;
    const int fused = use_fused(d, K, WBCL_REDUNET_IMPL_AUTO);
    rd_work w;
    double h[3] = {0, 0, 0};
    if ((st = wbcl__redunet_work_init(&w, ctx, op, m, d, K, fused, 1, fused ? 1 : 0))) goto done;
    if ((st = wbcl__redunet_enter(&w, Z, "Z", 0))) goto done; /* the features as they are, checked for finiteness */
    if (fused) {
        if ((st = wbcl__redunet_upload_labels(&w, w.yhat, labels))) goto done;
        if ((st = wbcl__redunet_fused_gram(&w, w.yhat, K, K))) goto done;
        if ((st = wbcl__redunet_fused_finalize(&w, eps2, 0, NULL, 0))) goto done;
        float ld[WBCL_REDUNET_FUSED_MAX_CLASSES + 1];
        cl_int hc[WBCL_REDUNET_FUSED_MAX_CLASSES + 1];
        if ((st = wbcl__read_buf(ctx, w.ld, 0, (K + 1) * sizeof(float), ld, "the ReduNet objective"))) goto done;
        if ((st = wbcl__read_buf(ctx, w.hc, 0, (K + 1) * sizeof(cl_int), hc, "the ReduNet objective"))) goto done;
        if (hc[K]) {
            st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: a Cholesky factorization failed (Z not finite?)", op);
            goto done;
        }
        h[1] = 0.5 * ld[0];
        for (size_t j = 0; j < K; j++)
            if (hc[j]) h[2] += ((double)hc[j] / (double)m) * 0.5 * ld[1 + j];
        h[0] = h[1] - h[2];
    } else {
        if ((st = wbcl__redunet_gemm_groups(&w, labels, eps2))) goto done;
        if ((st = wbcl__redunet_gemm_logdets(&w, h))) goto done;
    }
    if (!isfinite(h[0])) {
        st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: the objective is not finite (Z has a non-finite entry?)", op);
        goto done;
    }
    if (dR) *dR = h[0];
    if (R) *R = h[1];
    if (Rc) *Rc = h[2];
done:
    wbcl__redunet_work_free(&w);
    return st;
}

