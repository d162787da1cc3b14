/* Vector ReduNet (include/wbcl/redunet.h, SPEC.md §4.1): construction (Algorithm 5.1).
 * wbcl_redunet_fit builds the layers on one device with either implementation (fused: the
 * objective read back every `report_every` layers; GEMM: yhat read back every layer);
 * wbcl_redunet_fit_shard builds them over several participants that each hold a shard of the rows,
 * the group statistics summed through a wbcl_redunet_comm. The steps they drive:
 * host/ops/redunet_layers.c. */
#include "redunet_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buffers.h"

#define FUSED_REPORT_EVERY 64

/* ---- fit ------------------------------------------------------------------------------------------ */

static wbcl_status fit_fused(rd_work *w, wbcl_redunet *net, const wbcl_redunet_params *p,
                             wbcl_redunet_progress_fn progress, void *user)
{
    wbcl_context *ctx = w->ctx;
    const size_t K = w->K, L = (size_t)net->L, K1 = K + 1;
    const size_t every = p->report_every > 0 ? (size_t)p->report_every : FUSED_REPORT_EVERY;
    float *ld = malloc(every * K1 * sizeof *ld);
    cl_int *hc = malloc(every * K1 * sizeof *hc);
    wbcl_status st = WBCL_SUCCESS;
    if (!ld || !hc) {
        st = wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", w->op);
        goto done;
    }
    /* layer 1 from the normalized input */
    if ((st = wbcl__redunet_fused_gram(w, w->yhat, 0, K))) goto done;
    if ((st = wbcl__redunet_fused_finalize(w, p->eps2, 1, net->W[0], (size_t)-1))) goto done;
    size_t done_upto = 0;
    for (size_t l = 0; l < L; l++) {
        const int last = l + 1 == L;
        if ((st = wbcl__redunet_fused_apply(w, net->W[l], p->eta, p->lambda))) goto done;
        if ((st = wbcl__redunet_fused_gram(w, w->yhat, last ? K : 0, last ? K : 2 * K))) goto done;
        if ((st = wbcl__redunet_fused_finalize(w, p->eps2, !last, last ? NULL : net->W[l + 1], l))) goto done;
        if (l + 1 - done_upto < every && !last) continue;
        /* read back layers [done_upto, l] */
        const size_t n = l + 1 - done_upto;
        if ((st = wbcl__read_buf(ctx, w->ld, done_upto * K1 * sizeof(float), n * K1 * sizeof(float), ld,
                                 "the ReduNet objective")))
            goto done;
        if ((st = wbcl__read_buf(ctx, w->hc, done_upto * K1 * sizeof(cl_int), n * K1 * sizeof(cl_int), hc,
                                 "the ReduNet objective")))
            goto done;
        for (size_t r = 0; r < n; r++) {
            const size_t layer = done_upto + r;
            const float *lr = ld + r * K1;
            const cl_int *hr = hc + r * K1;
            if (hr[K]) {
                const int q = hr[K] - 1;
                st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC,
                                "%s: layer %zu: the Cholesky factorization of %s%d failed (not positive definite or "
                                "not finite)",
                                w->op, layer + 1,
                                q == 0 ? "I + a Z^T Z (E, objective R)" : q <= (int)K ? "I + a_j Z_j^T Z_j, class j = "
                                                                                     : "the objective's group ",
                                q == 0 ? 0 : q <= (int)K ? q - 1 : q - (int)K - 1);
                goto done;
            }
            double R = 0.5 * lr[0], Rc = 0.0;
            for (size_t j = 0; j < K; j++)
                if (hr[j]) Rc += ((double)hr[j] / (double)w->m) * 0.5 * lr[1 + j];
            double *h = net->hist + 3 * layer;
            h[0] = R - Rc;
            h[1] = R;
            h[2] = Rc;
            if (!isfinite(h[0])) {
                st = wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: layer %zu: the objective is not finite", w->op,
                                layer + 1);
                goto done;
            }
            if (progress) progress((int)layer + 1, h[0], h[1], h[2], user);
        }
        done_upto = l + 1;
    }
done:
    free(ld);
    free(hc);
    return st;
}

static wbcl_status fit_gemm(rd_work *w, wbcl_redunet *net, const int *labels, const wbcl_redunet_params *p,
                            wbcl_redunet_progress_fn progress, void *user)
{
    wbcl_context *ctx = w->ctx;
    const size_t L = (size_t)net->L, m = w->m;
    wbcl_status st;
    if ((st = wbcl__redunet_gemm_groups(w, labels, p->eps2))) return st;
    if ((st = wbcl__redunet_gemm_construct(w, net->W[0], p->eps2))) return st;
    for (size_t l = 0; l < L; l++) {
        const int last = l + 1 == L;
        double *h = net->hist + 3 * l;
        if ((st = wbcl__redunet_gemm_apply(w, net->W[l], p->eta, p->lambda))) return st;
        if ((st = wbcl__read_buf(ctx, w->yhat, 0, m * sizeof(cl_int), w->yh, "the ReduNet estimated classes")))
            return st;
        /* when yhat == labels the next construction's matrices are the objective's */
        const int same = !memcmp(w->yh, labels, m * sizeof(int));
        if (!same || last) {
            if ((st = wbcl__redunet_gemm_groups(w, w->yh, p->eps2))) return st;
            if ((st = wbcl__redunet_gemm_logdets(w, h))) return st;
        }
        if (!last) {
            if ((st = wbcl__redunet_gemm_groups(w, labels, p->eps2))) return st;
            if (same && (st = wbcl__redunet_gemm_logdets(w, h))) return st;
            if ((st = wbcl__redunet_gemm_construct(w, net->W[l + 1], p->eps2))) return st;
        }
        if (!isfinite(h[0]))
            return wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: layer %zu: the objective is not finite", w->op, l + 1);
        if (progress) progress((int)l + 1, h[0], h[1], h[2], user);
    }
    return WBCL_SUCCESS;
}

wbcl_status wbcl_redunet_fit(wbcl_context *ctx, const wbcl_tensor *X, const int *labels, int classes,
                             const wbcl_redunet_params *params, wbcl_redunet_progress_fn progress, void *user,
                             wbcl_tensor *Z, wbcl_redunet **out)
{
    static const char op[] = "wbcl_redunet_fit";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    *out = NULL;
    wbcl_status st = wbcl__redunet_check_rows(ctx, op, "X", X);
    if (st) return st;
    const size_t m = X->shape[0], d = X->shape[1];
    if ((st = wbcl__redunet_check_params(ctx, op, params, 1))) return st;
    if (Z && (st = wbcl__redunet_check_out(ctx, op, "Z", Z, m, d))) return st;
    if ((st = wbcl__redunet_check_classes(ctx, op, labels, m, classes, 1))) return st;
    const size_t K = (size_t)classes;
    if ((st = wbcl__redunet_check_impl(ctx, op, params->impl, d, K))) return st;
    const int fused = use_fused(d, K, params->impl);

    wbcl_redunet *net = NULL;
    rd_work w;
    memset(&w, 0, sizeof w);
    if ((st = wbcl__redunet_model_new(ctx, op, params->layers, d, K, params, 1, &net))) return st;
    if ((st = wbcl__redunet_work_init(&w, ctx, op, m, d, K, fused, 1, fused ? (size_t)params->layers : 0))) goto fail;
    if ((st = wbcl__redunet_upload_labels(&w, w.y, labels))) goto fail;
    if ((st = wbcl__redunet_enter(&w, X, "X", 1))) goto fail;
    st = fused ? fit_fused(&w, net, params, progress, user) : fit_gemm(&w, net, labels, params, progress, user);
    if (st) goto fail;
    if ((st = wbcl__redunet_copy_out(&w, Z))) goto fail;
    if ((st = wbcl_context_finish(ctx))) goto fail;
    wbcl__redunet_work_free(&w);
    *out = net;
    return WBCL_SUCCESS;
fail:
    wbcl__redunet_work_free(&w);
    wbcl_redunet_destroy(net);
    return st;
}

/* ---- fit on a shard (statistics summed through a wbcl_redunet_comm) -------------------------------- */

static wbcl_status peer_failed(rd_work *w)
{
    w->known = 1;
    return wbcl__fail(w->ctx, WBCL_ERROR_PEER, "%s: another participant failed (or the transport did)", w->op);
}

/* broadcast mode: the layer buffer W and the history row h from the root to everyone. */
static wbcl_status comm_share_layer(rd_work *w, wbcl_tensor *W, double *h)
{
    const wbcl_redunet_comm *c = w->comm;
    const size_t nf = layer_floats(w->d, w->K);
    float *buf = malloc(nf * sizeof *buf);
    if (!buf) return wbcl__fail(w->ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", w->op);
    wbcl_status st = WBCL_SUCCESS;
    if (W && c->root && (st = wbcl_tensor_read(w->ctx, W, buf, nf))) goto done;
    if (W && c->broadcast(buf, nf * sizeof *buf, 0, c->user)) {
        st = peer_failed(w);
        goto done;
    }
    if (W && !c->root && (st = wbcl_tensor_write(w->ctx, W, buf, nf))) goto done;
    if (h && c->broadcast(h, 3 * sizeof *h, 0, c->user)) st = peer_failed(w);
done:
    free(buf);
    return st;
}

/* The layer loop of fit_gemm with the statistics of both groupings summed every layer. */
static wbcl_status fit_comm(rd_work *w, wbcl_redunet *net, const int *labels, const wbcl_redunet_params *p,
                            wbcl_redunet_progress_fn progress, void *user)
{
    wbcl_context *ctx = w->ctx;
    const size_t L = (size_t)net->L, m = w->m;
    const int builds = !w->comm->broadcast || w->comm->root;
    wbcl_status st;
    if ((st = wbcl__redunet_gemm_groups(w, labels, p->eps2))) return st;
    for (size_t j = 0; j < w->K; j++) /* the totals are the same everywhere: every participant fails alike */
        if (!w->cnth[j]) {
            w->known = 1;
            return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT,
                              "%s: class %zu has no samples on any participant (empty classes are an error; labels "
                              "must cover 0..%zu)",
                              w->op, j, w->K - 1);
        }
    if (builds && (st = wbcl__redunet_gemm_construct(w, net->W[0], p->eps2))) return st;
    if (w->comm->broadcast && (st = comm_share_layer(w, net->W[0], NULL))) return st;
    for (size_t l = 0; l < L; l++) {
        const int last = l + 1 == L;
        double *h = net->hist + 3 * l;
        if ((st = wbcl__redunet_gemm_apply(w, net->W[l], p->eta, p->lambda))) return st;
        if ((st = wbcl__read_buf(ctx, w->yhat, 0, m * sizeof(cl_int), w->yh, "the ReduNet estimated classes")))
            return st;
        w->diff = 0;
        for (size_t i = 0; i < m; i++) w->diff += w->yh[i] != labels[i];
        if ((st = wbcl__redunet_gemm_groups(w, w->yh, p->eps2))) return st;
        w->diff = 0;
        if (builds && (st = wbcl__redunet_gemm_logdets(w, h))) return st;
        if (!last) {
            /* as in fit_gemm: when yhat equals the labels on every participant, the objective's
               summed statistics are the next construction's (one sum per layer instead of two) */
            if (w->diff_total != 0.0 && (st = wbcl__redunet_gemm_groups(w, labels, p->eps2))) return st;
            if (builds && (st = wbcl__redunet_gemm_construct(w, net->W[l + 1], p->eps2))) return st;
        }
        if (w->comm->broadcast && (st = comm_share_layer(w, last ? NULL : net->W[l + 1], h))) return st;
        if (!isfinite(h[0])) { /* the same history everywhere: every participant fails alike */
            w->known = 1;
            return wbcl__fail(ctx, WBCL_ERROR_NUMERIC, "%s: layer %zu: the objective is not finite", w->op, l + 1);
        }
        if (progress) progress((int)l + 1, h[0], h[1], h[2], user);
    }
    return WBCL_SUCCESS;
}

static wbcl_status fit_shard_local(wbcl_context *ctx, const char *op, rd_work *w, const wbcl_tensor *X,
                                   const int *labels, int classes, const wbcl_redunet_params *params,
                                   const wbcl_redunet_comm *comm, wbcl_redunet_progress_fn progress, void *user,
                                   wbcl_tensor *Z, wbcl_redunet **net)
{
    wbcl_status st = wbcl__redunet_check_rows(ctx, op, "X", X);
    if (st) return st;
    const size_t m = X->shape[0], d = X->shape[1];
    if ((st = wbcl__redunet_check_params(ctx, op, params, 1))) return st;
    if (!comm->sum)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: comm->sum is NULL", op);
    if (params->impl == WBCL_REDUNET_IMPL_FUSED)
        return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED,
                          "%s: the construction over several participants uses the GEMM implementation, not FUSED",
                          op);
    if (Z && (st = wbcl__redunet_check_out(ctx, op, "Z", Z, m, d))) return st;
    if ((st = wbcl__redunet_check_classes(ctx, op, labels, m, classes, 0))) return st;
    const size_t K = (size_t)classes;
    wbcl_redunet_params p = *params;
    p.impl = WBCL_REDUNET_IMPL_GEMM;
    if ((st = wbcl__redunet_model_new(ctx, op, p.layers, d, K, &p, 1, net))) return st;
    if ((st = wbcl__redunet_work_init(w, ctx, op, m, d, K, 0, 1, 0))) return st;
    w->comm = comm;
    if ((st = wbcl__redunet_enter(w, X, "X", 1))) return st;
    if ((st = fit_comm(w, *net, labels, &p, progress, user))) return st;
    if ((st = wbcl__redunet_copy_out(w, Z))) return st;
    return wbcl_context_finish(ctx);
}

wbcl_status wbcl_redunet_fit_shard(wbcl_context *ctx, const wbcl_tensor *X, const int *labels, int classes,
                                   const wbcl_redunet_params *params, const wbcl_redunet_comm *comm,
                                   wbcl_redunet_progress_fn progress, void *user, wbcl_tensor *Z,
                                   wbcl_redunet **out)
{
    static const char op[] = "wbcl_redunet_fit_shard";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!comm) {
        if (!params) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: params is NULL", op);
        wbcl_redunet_params p = *params;
        if (p.impl == WBCL_REDUNET_IMPL_FUSED)
            return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED, "%s: uses the GEMM implementation, not FUSED", op);
        p.impl = WBCL_REDUNET_IMPL_GEMM;
        return wbcl_redunet_fit(ctx, X, labels, classes, &p, progress, user, Z, out);
    }
    if (!comm->sum) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: comm->sum is NULL", op);
    if (!out) { /* cannot even report: still agree, so that no participant waits */
        comm->sum(NULL, 0, 1, comm->user);
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: out is NULL", op);
    }
    *out = NULL;
    wbcl_redunet *net = NULL;
    rd_work w;
    memset(&w, 0, sizeof w);
    wbcl_status st = fit_shard_local(ctx, op, &w, X, labels, classes, params, comm, progress, user, Z, &net);
    const int known = w.known;
    wbcl__redunet_work_free(&w);
    /* the final agreement (or this participant's one failed call) */
    if (!known && comm->sum(NULL, 0, st != WBCL_SUCCESS, comm->user) && !st)
        st = wbcl__fail(ctx, WBCL_ERROR_PEER, "%s: another participant failed (or the transport did)", op);
    if (st) {
        wbcl_redunet_destroy(net);
        return st;
    }
    *out = net;
    return WBCL_SUCCESS;
}

