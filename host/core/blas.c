/* CLBlast wrapper: status names and row-major strided batched SGEMM. */
#include "blas.h"

#include <clblast_c.h>

const char *wbcl__clblast_status_name(int code)
{
    switch (code) {
#define C_(x) case x: return #x;
        C_(CLBlastSuccess)
        C_(CLBlastOpenCLCompilerNotAvailable)
        C_(CLBlastTempBufferAllocFailure)
        C_(CLBlastOpenCLOutOfResources)
        C_(CLBlastOpenCLOutOfHostMemory)
        C_(CLBlastOpenCLBuildProgramFailure)
        C_(CLBlastInvalidValue)
        C_(CLBlastInvalidCommandQueue)
        C_(CLBlastInvalidMemObject)
        C_(CLBlastInvalidBinary)
        C_(CLBlastInvalidBuildOptions)
        C_(CLBlastInvalidProgram)
        C_(CLBlastInvalidProgramExecutable)
        C_(CLBlastInvalidKernelName)
        C_(CLBlastInvalidKernelDefinition)
        C_(CLBlastInvalidKernel)
        C_(CLBlastInvalidArgIndex)
        C_(CLBlastInvalidArgValue)
        C_(CLBlastInvalidArgSize)
        C_(CLBlastInvalidKernelArgs)
        C_(CLBlastInvalidLocalNumDimensions)
        C_(CLBlastInvalidLocalThreadsTotal)
        C_(CLBlastInvalidLocalThreadsDim)
        C_(CLBlastInvalidGlobalOffset)
        C_(CLBlastInvalidEventWaitList)
        C_(CLBlastInvalidEvent)
        C_(CLBlastInvalidOperation)
        C_(CLBlastInvalidBufferSize)
        C_(CLBlastInvalidGlobalWorkSize)
        C_(CLBlastNotImplemented)
        C_(CLBlastInvalidMatrixA)
        C_(CLBlastInvalidMatrixB)
        C_(CLBlastInvalidMatrixC)
        C_(CLBlastInvalidVectorX)
        C_(CLBlastInvalidVectorY)
        C_(CLBlastInvalidDimension)
        C_(CLBlastInvalidLeadDimA)
        C_(CLBlastInvalidLeadDimB)
        C_(CLBlastInvalidLeadDimC)
        C_(CLBlastInvalidIncrementX)
        C_(CLBlastInvalidIncrementY)
        C_(CLBlastInsufficientMemoryA)
        C_(CLBlastInsufficientMemoryB)
        C_(CLBlastInsufficientMemoryC)
        C_(CLBlastInsufficientMemoryX)
        C_(CLBlastInsufficientMemoryY)
        C_(CLBlastInsufficientMemoryTemp)
        C_(CLBlastInvalidBatchCount)
        C_(CLBlastInvalidOverrideKernel)
        C_(CLBlastMissingOverrideParameter)
        C_(CLBlastInvalidLocalMemUsage)
        C_(CLBlastNoHalfPrecision)
        C_(CLBlastNoDoublePrecision)
        C_(CLBlastInvalidVectorScalar)
        C_(CLBlastInsufficientMemoryScalar)
        C_(CLBlastDatabaseError)
        C_(CLBlastUnknownError)
        C_(CLBlastUnexpectedError)
#undef C_
    default: return "unknown CLBlast status";
    }
}

/* Status for a failed CLBlast call: allocation failures are device limits,
 * a failed kernel build is a build error, the rest OpenCL errors. */
static wbcl_status map_status(CLBlastStatusCode s)
{
    switch (s) {
    case CLBlastTempBufferAllocFailure:
    case CLBlastOpenCLOutOfResources:
    case CLBlastInvalidLocalMemUsage: return WBCL_ERROR_DEVICE_LIMIT;
    case CLBlastOpenCLOutOfHostMemory: return WBCL_ERROR_OUT_OF_MEMORY;
    case CLBlastOpenCLCompilerNotAvailable:
    case CLBlastOpenCLBuildProgramFailure: return WBCL_ERROR_BUILD;
    case CLBlastInvalidDimension:
    case CLBlastInvalidLeadDimA:
    case CLBlastInvalidLeadDimB:
    case CLBlastInvalidLeadDimC:
    case CLBlastInsufficientMemoryA:
    case CLBlastInsufficientMemoryB:
    case CLBlastInsufficientMemoryC: return WBCL_ERROR_SHAPE;
    default: return WBCL_ERROR_OPENCL;
    }
}

wbcl_status wbcl__blas_sgemm(wbcl_context *ctx, const char *op, int ta, int tb, size_t m, size_t n, size_t k,
                             float alpha, cl_mem A, size_t off_a, size_t lda, size_t stride_a, cl_mem B,
                             size_t off_b, size_t ldb, size_t stride_b, float beta, cl_mem C, size_t off_c,
                             size_t ldc, size_t stride_c, size_t batch)
{
    const CLBlastTranspose cta = ta ? CLBlastTransposeYes : CLBlastTransposeNo;
    const CLBlastTranspose ctb = tb ? CLBlastTransposeYes : CLBlastTransposeNo;
    uint64_t t0 = 0;
    if (ctx->timing) {
        cl_int e = clFinish(ctx->queue);
        if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "%s: clFinish before CLBlast", op);
        t0 = wbcl__now_ns();
    }
    CLBlastStatusCode s;
    if (batch == 1)
        s = CLBlastSgemm(CLBlastLayoutRowMajor, cta, ctb, m, n, k, alpha, A, off_a, lda, B, off_b, ldb, beta, C, off_c,
                         ldc, &ctx->queue, NULL);
    else
        s = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, cta, ctb, m, n, k, alpha, A, off_a, lda, stride_a, B,
                                       off_b, ldb, stride_b, beta, C, off_c, ldc, stride_c, batch, &ctx->queue, NULL);
    if (s != CLBlastSuccess)
        return wbcl__fail(ctx, map_status(s),
                          "%s: CLBlast SGEMM failed: %s (%d) [m=%zu n=%zu k=%zu batch=%zu ta=%d tb=%d on '%s']", op,
                          wbcl__clblast_status_name(s), (int)s, m, n, k, batch, ta != 0, tb != 0, ctx->info.name);
    if (ctx->timing) {
        cl_int e = clFinish(ctx->queue);
        if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "%s: clFinish after CLBlast", op);
        ctx->kernel_ns += wbcl__now_ns() - t0;
    }
    return WBCL_SUCCESS;
}
