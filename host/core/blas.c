/* CLBlast wrapper: status names, row-major strided batched SGEMM, and the CLBlast kernel
 * parameters a tuning table may set (keys clblast.*, include/wbcl/tuning.h). */
#include "blas.h"

#include <clblast_c.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

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

/* ---- CLBlast's kernel parameters ----------------------------------------------------------
 * CLBlast keeps its parameters per device for the whole process (CLBlastOverrideParameters),
 * while wbcl's tables belong to a context. So before each CLBlast call the parameters the
 * calling context wants (its clblast.* keys, CLBlast's own values for the keys it lacks) are
 * made current for the device if they are not, under one lock held until the call has been
 * enqueued: contexts with different tables on one device each get theirs. CLBlast's own
 * values are read (wbcl__clblast_retrieve) before wbcl first overrides them on a device and
 * are what "no key" restores. While no context in the process has set a clblast.* key, a call
 * costs one uncontended lock and a look-up of the keys, nothing of CLBlast's. */
const char *const wbcl__clblast_xgemm_names[WBCL_CLBLAST_XGEMM_N] = {
    "GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB",
    "NDIMC", "NWG", "SA", "SB", "STRM", "STRN", "VWM", "VWN"};
const char *const wbcl__clblast_keys[WBCL_CLBLAST_NKEYS] = {
    "clblast.xgemm.GEMMK", "clblast.xgemm.KREG",  "clblast.xgemm.KWG",  "clblast.xgemm.KWI",
    "clblast.xgemm.MDIMA", "clblast.xgemm.MDIMC", "clblast.xgemm.MWG",  "clblast.xgemm.NDIMB",
    "clblast.xgemm.NDIMC", "clblast.xgemm.NWG",   "clblast.xgemm.SA",   "clblast.xgemm.SB",
    "clblast.xgemm.STRM",  "clblast.xgemm.STRN",  "clblast.xgemm.VWM",  "clblast.xgemm.VWN",
    "clblast.gemm.min_indirect"};
#define NP WBCL_CLBLAST_NKEYS /* the Xgemm set, then GemmRoutine's XGEMM_MIN_INDIRECT_SIZE */
#define MAX_DEVICES 16

typedef struct clblast_dev {
    cl_device_id dev;
    int have_dflt, applied;
    size_t dflt[NP], cur[NP];
} clblast_dev;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static clblast_dev g_devs[MAX_DEVICES];
static int g_ndev, g_overridden; /* g_overridden: some device has wbcl's values */

/* The device's record, created (CLBlast's values read) on first use. NULL: more devices than
 * MAX_DEVICES. Under g_lock. */
static clblast_dev *dev_state(cl_device_id dev)
{
    for (int i = 0; i < g_ndev; i++)
        if (g_devs[i].dev == dev) return &g_devs[i];
    if (g_ndev == MAX_DEVICES) return NULL;
    clblast_dev *d = &g_devs[g_ndev++];
    memset(d, 0, sizeof *d);
    d->dev = dev;
    static const char *const routine[1] = {"XGEMM_MIN_INDIRECT_SIZE"};
    d->have_dflt = wbcl__clblast_retrieve(dev, "Xgemm", WBCL_CLBLAST_XGEMM_N, wbcl__clblast_xgemm_names, d->dflt) == 0 &&
                   wbcl__clblast_retrieve(dev, "GemmRoutine", 1, routine, d->dflt + WBCL_CLBLAST_XGEMM_N) == 0;
    return d;
}

long wbcl__clblast_default(const wbcl_context *ctx, const char *key)
{
    long v = -1;
    pthread_mutex_lock(&g_lock);
    clblast_dev *d = dev_state(ctx->device);
    for (int i = 0; d && d->have_dflt && i < NP; i++)
        if (!strcmp(wbcl__clblast_keys[i], key)) v = (long)d->dflt[i];
    pthread_mutex_unlock(&g_lock);
    return v;
}

int wbcl__clblast_xgemm_check(const wbcl_device_info *dev, const long *v, char *why, size_t n)
{
    enum { GEMMK, KREG, KWG, KWI, MDIMA, MDIMC, MWG, NDIMB, NDIMC, NWG, SA, SB, STRM, STRN, VWM, VWN };
    const long kdima = v[MDIMA] ? v[MDIMC] * v[NDIMC] / v[MDIMA] : 0, kdimb = v[NDIMB] ? v[MDIMC] * v[NDIMC] / v[NDIMB] : 0;
    /* the constraints of CLBlast's own Xgemm tuner (src/tuning/kernels/xgemm.hpp), then the device's limits */
    if (v[KWI] <= 0 || v[KWG] % v[KWI]) return wbcl__msg(why, n, "KWG %ld is not a multiple of KWI %ld", v[KWG], v[KWI]), 1;
    if (v[MWG] % (v[MDIMC] * v[VWM]) || v[MWG] % (v[MDIMA] * v[VWM]))
        return wbcl__msg(why, n, "MWG %ld is not a multiple of MDIMC*VWM and MDIMA*VWM (%ld, %ld)", v[MWG],
                         v[MDIMC] * v[VWM], v[MDIMA] * v[VWM]), 1;
    if (v[NWG] % (v[NDIMC] * v[VWN]) || v[NWG] % (v[NDIMB] * v[VWN]))
        return wbcl__msg(why, n, "NWG %ld is not a multiple of NDIMC*VWN and NDIMB*VWN (%ld, %ld)", v[NWG],
                         v[NDIMC] * v[VWN], v[NDIMB] * v[VWN]), 1;
    if (v[GEMMK] == 0 && (kdima <= 0 || kdimb <= 0 || v[KWG] % kdima || v[KWG] % kdimb))
        return wbcl__msg(why, n, "KWG %ld is not a multiple of MDIMC*NDIMC/MDIMA and MDIMC*NDIMC/NDIMB (%ld, %ld)",
                         v[KWG], kdima, kdimb), 1;
    if (v[GEMMK] == 1 && (v[KREG] % v[VWN] || v[MDIMC] != v[MDIMA] || v[NDIMC] != v[NDIMB]))
        return wbcl__msg(why, n, "GEMMK 1 needs KREG a multiple of VWN, MDIMA = MDIMC and NDIMB = NDIMC"), 1;
    if ((size_t)(v[MDIMC] * v[NDIMC]) > dev->max_work_group_size)
        return wbcl__msg(why, n, "MDIMC*NDIMC = %ld work-items exceed the device's maximum work-group size %zu",
                         v[MDIMC] * v[NDIMC], dev->max_work_group_size), 1;
    const unsigned long long lm = 4ull * (unsigned long long)(v[SA] * v[KWG] * v[MWG] + v[SB] * v[KWG] * v[NWG]);
    if (lm > dev->local_mem_size)
        return wbcl__msg(why, n, "the A and B tiles need %llu bytes of local memory, the device has %llu", lm,
                         (unsigned long long)dev->local_mem_size), 1;
    if (why && n) why[0] = 0;
    return 0;
}

/* Makes the parameters ctx wants current on its device (see above). Under g_lock. A set that is
 * invalid here or that CLBlast refuses leaves a note (once per context) and CLBlast's values. */
static void sync_params(wbcl_context *ctx)
{
    long want[NP];
    int given = 0;
    for (int i = 0; i < NP; i++) {
        if (wbcl__tuned_value(ctx, wbcl__clblast_keys[i], 0, &want[i], NULL)) given |= i < WBCL_CLBLAST_XGEMM_N ? 1 : 2;
        else want[i] = -1;
    }
    if (!given && !g_overridden) return;
    clblast_dev *d = dev_state(ctx->device);
    char why[256] = "";
    if (!d) snprintf(why, sizeof why, "more than %d devices", MAX_DEVICES);
    else if (!d->have_dflt) snprintf(why, sizeof why, "CLBlast's own values could not be read on this device");
    if (*why) {
        if (given && !ctx->clblast_noted) wbcl__tuning_note(ctx, "clblast.* keys not applied: %s", why);
        ctx->clblast_noted = 1;
        return;
    }
    for (int i = 0; i < NP; i++)
        if (want[i] < 0) want[i] = (long)d->dflt[i];
    if ((given & 1) && wbcl__clblast_xgemm_check(&ctx->info, want, why, sizeof why)) {
        if (!ctx->clblast_noted) wbcl__tuning_note(ctx, "clblast.xgemm.* rejected on '%s': %s; CLBlast's values used",
                                                   ctx->info.name, why);
        ctx->clblast_noted = 1;
        for (int i = 0; i < WBCL_CLBLAST_XGEMM_N; i++) want[i] = (long)d->dflt[i];
    }
    /* CLBlastOverrideParameters takes const char ** (it only reads the names) */
    const char *routine[1] = {"XGEMM_MIN_INDIRECT_SIZE"}, *xgemm[WBCL_CLBLAST_XGEMM_N];
    memcpy(xgemm, wbcl__clblast_xgemm_names, sizeof xgemm);
    for (int part = 0; part < 2; part++) {
        const int lo = part ? WBCL_CLBLAST_XGEMM_N : 0, cnt = part ? 1 : WBCL_CLBLAST_XGEMM_N;
        const char *kernel = part ? "GemmRoutine" : "Xgemm", **names = part ? routine : xgemm;
        size_t v[WBCL_CLBLAST_XGEMM_N];
        int same = d->applied;
        for (int i = 0; i < cnt; i++) {
            v[i] = (size_t)want[lo + i];
            same &= d->cur[lo + i] == v[i];
        }
        if (same) continue;
        CLBlastStatusCode s = CLBlastOverrideParameters(ctx->device, kernel, CLBlastPrecisionSingle, (size_t)cnt, names, v);
        if (s != CLBlastSuccess) {
            if (!ctx->clblast_noted)
                wbcl__tuning_note(ctx, "CLBlast refused the %s parameters (%s); its own values used", kernel,
                                  wbcl__clblast_status_name(s));
            ctx->clblast_noted = 1;
            for (int i = 0; i < cnt; i++) v[i] = d->dflt[lo + i];
            s = CLBlastOverrideParameters(ctx->device, kernel, CLBlastPrecisionSingle, (size_t)cnt, names, v);
        }
        if (s == CLBlastSuccess)
            for (int i = 0; i < cnt; i++) d->cur[lo + i] = v[i];
    }
    d->applied = 1;
    g_overridden = 1;
}

void wbcl__clblast_apply(wbcl_context *ctx)
{
    pthread_mutex_lock(&g_lock);
    sync_params(ctx);
    pthread_mutex_unlock(&g_lock);
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
    pthread_mutex_lock(&g_lock);
    sync_params(ctx);
    if (batch == 1)
        s = CLBlastSgemm(CLBlastLayoutRowMajor, cta, ctb, m, n, k, alpha, A, off_a, lda, B, off_b, ldb, beta, C, off_c,
                         ldc, &ctx->queue, NULL);
    else
        s = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, cta, ctb, m, n, k, alpha, A, off_a, lda, stride_a, B,
                                       off_b, ldb, stride_b, beta, C, off_c, ldc, stride_c, batch, &ctx->queue, NULL);
    pthread_mutex_unlock(&g_lock);
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
