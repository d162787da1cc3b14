/* Device-side dtype conversion between float32 and float16 storage (cl/convert.cl). Used by
 * wbcl_tensor_copy across dtypes and by the GEMM's CLBlast path for float16 operands. */
#include "internal.h"

wbcl_status wbcl__convert(wbcl_context *ctx, const char *op, cl_mem src, wbcl_dtype sd, size_t src_off, cl_mem dst,
                          wbcl_dtype dd, size_t dst_off, size_t n)
{
    if (!n) return WBCL_SUCCESS;
    if (sd == dd) {
        const size_t es = wbcl__dtype_size(sd);
        cl_int e = clEnqueueCopyBuffer(ctx->queue, src, dst, src_off * es, dst_off * es, n * es, 0, NULL, NULL);
        return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "%s: copying %zu elements", op, n);
    }
    if (!((sd == WBCL_F16 && dd == WBCL_F32) || (sd == WBCL_F32 && dd == WBCL_F16)))
        return wbcl__fail(ctx, WBCL_ERROR_DTYPE, "%s: no conversion from %s to %s", op, wbcl__dtype_name(sd),
                          wbcl__dtype_name(dd));
    wbcl_kern *k;
    wbcl_status st =
        wbcl__kernel(ctx, "convert", NULL, sd == WBCL_F16 ? "wbcl_convert_f16_f32" : "wbcl_convert_f32_f16", &k);
    if (st) return st;
    cl_ulong so = src_off, doff = dst_off, n_ = n;
    WBCL_ARG(ctx, k, 0, src);
    WBCL_ARG(ctx, k, 1, so);
    WBCL_ARG(ctx, k, 2, dst);
    WBCL_ARG(ctx, k, 3, doff);
    WBCL_ARG(ctx, k, 4, n_);
    size_t global = (n + 7) / 8, local = ctx->params.wg_size > 0 ? (size_t)ctx->params.wg_size : 64;
    return wbcl__launch(ctx, k, 1, &global, &local);
}
