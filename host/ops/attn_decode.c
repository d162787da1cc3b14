/* One-query softmax attention split over the keys (host/ops/attn_decode.h, cl/attn_decode.cl).
 *
 * Chunks: the n_k keys of each (batch, head) are split into chunks of `chunk` keys so that the
 * B·K·chunks work-items of the first kernel keep every compute unit busy (8 per unit on a CPU,
 * 32 on a GPU) without chunks so short that the partials' traffic (p + 2 floats per chunk)
 * matters: chunk = ceil(n_k·B·K / items) clamped to [32, 512] keys. */
#include "attn_decode.h"

#include <stdio.h>

#define FAMILY "attn_decode"
#define SCRATCH_PART 4 /* the chunks' partials; shares attention.c's packed-K slot (never both in one call) */
#define CH_MIN 32
#define CH_MAX 512

int wbcl__attention_decode_applies(const wbcl_context *ctx, const wbcl_attention_desc *d, const wbcl_tensor *q,
                                   const wbcl_tensor *k, const wbcl_tensor *v, const wbcl_tensor *o)
{
    const size_t pmax = ctx->variant == WBCL_VARIANT_GPU ? 64 : 256;
    return d->n_q == 1 && d->p <= pmax && q->dtype == WBCL_F32 && k->dtype == WBCL_F32 &&
           v->dtype == WBCL_F32 && o->dtype == WBCL_F32;
}

wbcl_status wbcl__attention_decode(wbcl_context *ctx, const wbcl_attention_desc *d, const wbcl_tensor *q,
                                   const wbcl_tensor *k, const wbcl_tensor *v, wbcl_tensor *o)
{
    const int gpu = ctx->variant == WBCL_VARIANT_GPU;
    const size_t p = d->p, BH = d->batch * d->heads, nk = d->n_k;
    const size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1, items = (gpu ? 32 : 8) * cu;
    size_t chunk = (nk * BH + items - 1) / items;
    chunk = chunk < CH_MIN ? CH_MIN : chunk > CH_MAX ? CH_MAX : chunk;
    const size_t nch = (nk + chunk - 1) / chunk;
    const int vw = p % 16 == 0 ? 16 : p % 8 == 0 ? 8 : p % 4 == 0 ? 4 : 1;
    char opts[64];
    snprintf(opts, sizeof opts, "-DAD_P=%zu -DAD_VW=%d", p, vw);
    wbcl_kern *kp, *kc;
    wbcl_status st = wbcl__kernel(ctx, FAMILY, opts, "wbcl_attn_decode_part", &kp);
    if (!st) st = wbcl__kernel(ctx, FAMILY, opts, "wbcl_attn_decode_combine", &kc);
    if (st) return st;
    cl_mem part;
    if ((st = wbcl__scratch(ctx, SCRATCH_PART, BH * nch * (p + 2) * sizeof(float), &part))) return st;

    const cl_uint H = (cl_uint)d->heads, BH_ = (cl_uint)BH, Nk = (cl_uint)nk, ch = (cl_uint)chunk,
                  nch_ = (cl_uint)nch;
    const float qscale = d->scale * 1.44269504088896340736f; /* scale * log2(e): exp2 in the kernels */
    cl_ulong qo = d->off_q, qsb = d->sb_q, qsh = d->sh_q;
    cl_ulong ko = d->off_k, ksb = d->sb_k, ksh = d->sh_k, ksn = d->sn_k;
    cl_ulong vo = d->off_v, vsb = d->sb_v, vsh = d->sh_v, vsn = d->sn_v;
    cl_ulong oo = d->off_o, osb = d->sb_o, osh = d->sh_o;
    cl_uint i = 0;
    WBCL_ARG(ctx, kp, i++, q->mem);
    WBCL_ARG(ctx, kp, i++, qo);
    WBCL_ARG(ctx, kp, i++, qsb);
    WBCL_ARG(ctx, kp, i++, qsh);
    WBCL_ARG(ctx, kp, i++, k->mem);
    WBCL_ARG(ctx, kp, i++, ko);
    WBCL_ARG(ctx, kp, i++, ksb);
    WBCL_ARG(ctx, kp, i++, ksh);
    WBCL_ARG(ctx, kp, i++, ksn);
    WBCL_ARG(ctx, kp, i++, v->mem);
    WBCL_ARG(ctx, kp, i++, vo);
    WBCL_ARG(ctx, kp, i++, vsb);
    WBCL_ARG(ctx, kp, i++, vsh);
    WBCL_ARG(ctx, kp, i++, vsn);
    WBCL_ARG(ctx, kp, i++, H);
    WBCL_ARG(ctx, kp, i++, BH_);
    WBCL_ARG(ctx, kp, i++, Nk);
    WBCL_ARG(ctx, kp, i++, ch);
    WBCL_ARG(ctx, kp, i++, qscale);
    WBCL_ARG(ctx, kp, i++, part);
    /* CPU: work-groups of one item (each loops over its keys); GPU: 32 chunks a group */
    const size_t l0 = gpu ? 32 : 1;
    const size_t g[2] = {(nch + l0 - 1) / l0 * l0, BH}, l[2] = {l0, 1};
    if ((st = wbcl__launch(ctx, kp, 2, g, l))) return st;

    i = 0;
    WBCL_ARG(ctx, kc, i++, part);
    WBCL_ARG(ctx, kc, i++, nch_);
    WBCL_ARG(ctx, kc, i++, H);
    WBCL_ARG(ctx, kc, i++, BH_);
    WBCL_ARG(ctx, kc, i++, o->mem);
    WBCL_ARG(ctx, kc, i++, oo);
    WBCL_ARG(ctx, kc, i++, osb);
    WBCL_ARG(ctx, kc, i++, osh);
    const size_t cl0 = p < 64 ? p : 64; /* one item per column of o */
    const size_t cg[2] = {(p + cl0 - 1) / cl0 * cl0, BH}, cl[2] = {cl0, 1};
    return wbcl__launch(ctx, kc, 2, cg, cl);
}
