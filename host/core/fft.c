/* FFT wrapper: unitary batched real FFTs, a direct DFT for short signals and clFFT plans cached per context above (see fft.h). */
#include <clFFT.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "fft.h"
#include "launch.h"

typedef struct fft_plan {
    size_t H, W, batch;
    int inverse;
    clfftPlanHandle handle;
} fft_plan;

struct wbcl__fft_cache {
    fft_plan *plans;
    size_t n, cap;
};

static pthread_mutex_t fft_lock = PTHREAD_MUTEX_INITIALIZER;
static int fft_users; /* contexts holding a clfftSetup reference */

size_t wbcl__fft_bad_factor(size_t n)
{
    static const size_t primes[] = {2, 3, 5, 7, 11, 13};
    if (n == 0) return 0;
    for (size_t i = 0; i < sizeof primes / sizeof primes[0]; i++)
        while (n % primes[i] == 0) n /= primes[i];
    if (n == 1) return 0;
    for (size_t p = 17; p * p <= n; p += 2)
        if (n % p == 0) return p;
    return n;
}

wbcl_status wbcl__fft_check(wbcl_context *ctx, const char *op, size_t H, size_t W)
{
    size_t n[2] = {H, W};
    for (int i = 0; i < 2; i++) {
        size_t f = wbcl__fft_bad_factor(n[i]);
        if (f)
            return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED,
                              "%s: FFT length %zu has the prime factor %zu > 13 (clFFT supports lengths whose prime "
                              "factors are 2, 3, 5, 7, 11, 13)",
                              op, n[i], f);
        if (n[i] > (1u << 24))
            return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED, "%s: FFT length %zu too large", op, n[i]);
    }
    return WBCL_SUCCESS;
}

static wbcl_status fft_fail(wbcl_context *ctx, clfftStatus s, const char *what)
{
    if (s == CLFFT_NOTIMPLEMENTED)
        return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED, "clFFT %s: not implemented for this shape", what);
    if ((int)s < 0) return wbcl__cl_fail(ctx, (cl_int)s, "clFFT %s", what);
    return wbcl__fail(ctx, WBCL_ERROR_OPENCL, "clFFT %s: clFFT error %d", what, (int)s);
}

static wbcl_status fft_acquire(wbcl_context *ctx)
{
    if (ctx->fft) return WBCL_SUCCESS;
    struct wbcl__fft_cache *c = calloc(1, sizeof *c);
    if (!c) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "FFT plan cache: out of memory");
    pthread_mutex_lock(&fft_lock);
    clfftStatus s = CLFFT_SUCCESS;
    if (fft_users == 0) {
        clfftSetupData sd;
        s = clfftInitSetupData(&sd);
        if (s == CLFFT_SUCCESS) s = clfftSetup(&sd);
    }
    if (s == CLFFT_SUCCESS) fft_users++;
    pthread_mutex_unlock(&fft_lock);
    if (s != CLFFT_SUCCESS) {
        free(c);
        return fft_fail(ctx, s, "setup");
    }
    ctx->fft = c;
    return WBCL_SUCCESS;
}

void wbcl__fft_release(wbcl_context *ctx)
{
    if (!ctx || !ctx->fft) return;
    struct wbcl__fft_cache *c = ctx->fft;
    for (size_t i = 0; i < c->n; i++) clfftDestroyPlan(&c->plans[i].handle);
    free(c->plans);
    free(c);
    ctx->fft = NULL;
    pthread_mutex_lock(&fft_lock);
    if (--fft_users == 0) clfftTeardown();
    pthread_mutex_unlock(&fft_lock);
}

static wbcl_status get_plan(wbcl_context *ctx, size_t batch, size_t H, size_t W, int inverse, clfftPlanHandle *out)
{
    wbcl_status st = wbcl__fft_check(ctx, "FFT", H, W);
    if (st) return st;
    if ((st = fft_acquire(ctx))) return st;
    struct wbcl__fft_cache *c = ctx->fft;
    for (size_t i = 0; i < c->n; i++) {
        fft_plan *p = &c->plans[i];
        if (p->H == H && p->W == W && p->batch == batch && p->inverse == inverse) {
            *out = p->handle;
            return WBCL_SUCCESS;
        }
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        fft_plan *np = realloc(c->plans, cap * sizeof *np);
        if (!np) return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "FFT plan cache: out of memory");
        c->plans = np;
        c->cap = cap;
    }
    size_t Wh = W / 2 + 1;
    clfftPlanHandle h;
    size_t lengths[2] = {W, H};
    clfftDim dim = H == 1 ? CLFFT_1D : CLFFT_2D;
    size_t rstride[2] = {1, W}, cstride[2] = {1, Wh};
    clfftStatus s = clfftCreateDefaultPlan(&h, ctx->cl, dim, lengths);
    if (s != CLFFT_SUCCESS) return fft_fail(ctx, s, "create plan");
    float scale = (float)(1.0 / sqrt((double)(H * W)));
    if ((s = clfftSetPlanPrecision(h, CLFFT_SINGLE)) || (s = clfftSetResultLocation(h, CLFFT_OUTOFPLACE)) ||
        (s = clfftSetLayout(h, inverse ? CLFFT_HERMITIAN_INTERLEAVED : CLFFT_REAL,
                            inverse ? CLFFT_REAL : CLFFT_HERMITIAN_INTERLEAVED)) ||
        (s = clfftSetPlanInStride(h, dim, inverse ? cstride : rstride)) ||
        (s = clfftSetPlanOutStride(h, dim, inverse ? rstride : cstride)) ||
        (s = clfftSetPlanDistance(h, inverse ? H * Wh : H * W, inverse ? H * W : H * Wh)) ||
        (s = clfftSetPlanBatchSize(h, batch)) || (s = clfftSetPlanScale(h, CLFFT_FORWARD, scale)) ||
        (s = clfftSetPlanScale(h, CLFFT_BACKWARD, scale)) || (s = clfftBakePlan(h, 1, &ctx->queue, NULL, NULL))) {
        clfftDestroyPlan(&h);
        return fft_fail(ctx, s, "plan setup/bake");
    }
    c->plans[c->n++] = (fft_plan){H, W, batch, inverse, h};
    *out = h;
    return WBCL_SUCCESS;
}

/* The direct DFT of cl/dft.cl: one program for every short shape, batch and direction. */
static wbcl_status run_direct(wbcl_context *ctx, size_t batch, size_t H, size_t W, int inverse, cl_mem in,
                              cl_mem out)
{
    const size_t per = H * (inverse ? W : W / 2 + 1), items = batch * per;
    if (H == 0 || W == 0) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "FFT: empty signal (H %zu, W %zu)", H, W);
    if (batch == 0) return WBCL_SUCCESS;
    if (batch > UINT32_MAX || items / batch != per)
        return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED, "FFT: batch %zu too large", batch);
    wbcl_kern *k;
    wbcl_status st = wbcl__kernel(ctx, "dft", NULL, inverse ? "wbcl_dft_c2r" : "wbcl_dft_r2c", &k);
    if (st) return st;
    cl_uint b = (cl_uint)batch, h = (cl_uint)H, w = (cl_uint)W;
    float scale = (float)(1.0 / sqrt((double)(H * W)));
    if ((st = wbcl__set_arg(ctx, k, 0, sizeof in, &in)) || (st = wbcl__set_arg(ctx, k, 1, sizeof out, &out)))
        return st;
    WBCL_ARG(ctx, k, 2, b);
    WBCL_ARG(ctx, k, 3, h);
    WBCL_ARG(ctx, k, 4, w);
    WBCL_ARG(ctx, k, 5, scale);
    return wbcl__launch_items(ctx, k, items);
}

static wbcl_status run(wbcl_context *ctx, size_t batch, size_t H, size_t W, int inverse, cl_mem in, cl_mem out)
{
    if (H * W <= WBCL_DFT_DIRECT_MAX) {
        wbcl_status st = wbcl__fft_check(ctx, "FFT", H, W);
        return st ? st : run_direct(ctx, batch, H, W, inverse, in, out);
    }
    clfftPlanHandle h = 0;
    wbcl_status st = get_plan(ctx, batch, H, W, inverse, &h);
    if (st) return st;
    cl_event ev = NULL;
    clfftStatus s = clfftEnqueueTransform(h, inverse ? CLFFT_BACKWARD : CLFFT_FORWARD, 1, &ctx->queue, 0, NULL,
                                          ctx->timing ? &ev : NULL, &in, &out, NULL);
    if (s != CLFFT_SUCCESS) return fft_fail(ctx, s, inverse ? "inverse transform" : "forward transform");
    if (ev) {
        cl_ulong t0 = 0, t1 = 0;
        if (clWaitForEvents(1, &ev) == CL_SUCCESS &&
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) == CL_SUCCESS &&
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS && t1 > t0)
            ctx->kernel_ns += (uint64_t)(t1 - t0);
        clReleaseEvent(ev);
    }
    return WBCL_SUCCESS;
}

wbcl_status wbcl__fft_forward(wbcl_context *ctx, size_t batch, size_t H, size_t W, cl_mem in, cl_mem out)
{
    return run(ctx, batch, H, W, 0, in, out);
}

wbcl_status wbcl__fft_inverse(wbcl_context *ctx, size_t batch, size_t H, size_t W, cl_mem in, cl_mem out)
{
    return run(ctx, batch, H, W, 1, in, out);
}
