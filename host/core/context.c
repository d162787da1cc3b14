/* The context: device selection, queue, settings, scratch buffers. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "fft.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

wbcl_status wbcl__enumerate(cl_platform_id **plats_out, cl_device_id **devs_out, wbcl_device_info **infos_out,
                            size_t *count_out, char *err, size_t errlen);

static char *dup_str(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static char *default_cache_dir(void)
{
    const char *env = getenv("WBCL_CACHE_DIR");
    if (env && *env) return strcmp(env, "off") == 0 ? NULL : dup_str(env);
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char buf[4096];
    if (xdg && *xdg) snprintf(buf, sizeof buf, "%s/wbcl", xdg);
    else if (home && *home) snprintf(buf, sizeof buf, "%s/.cache/wbcl", home);
    else return NULL;
    return dup_str(buf);
}

/* Whether the driver keeps compiled kernels on disk itself, keyed like wbcl's cache (source and
 * options), so that wbcl's own binaries add nothing but their cost. PoCL does (its kernel cache,
 * POCL_CACHE_DIR, on unless POCL_KERNEL_CACHE=0), and there the cost is high: PoCL's
 * CL_PROGRAM_BINARIES compiles every kernel of the program for a generic work-group size, used or
 * not (perf/RESULTS.md, "Program cache": a cold `wbcl-run attn.softmax` took 25 s with wbcl's
 * cache written at exit and 6 s without; the warm run 0.06 s against 0.29 s). */
static int driver_caches_kernels(const wbcl_device_info *info)
{
    if (!strstr(info->platform_name, "Portable Computing Language")) return 0;
    const char *kc = getenv("POCL_KERNEL_CACHE");
    return !(kc && strcmp(kc, "0") == 0);
}

/* ---- kernel variants: names, $WBCL_VARIANT ---------------------------------------------------- */

static const char *const variant_names[] = {"auto", "cpu", "gpu"}; /* indexed by wbcl_variant */

const char *wbcl_variant_name(wbcl_variant v)
{
    return (int)v >= 0 && (size_t)v < sizeof variant_names / sizeof variant_names[0] ? variant_names[v] : NULL;
}

wbcl_status wbcl_variant_parse(const char *name, wbcl_variant *out)
{
    if (!name || !out) return WBCL_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < sizeof variant_names / sizeof variant_names[0]; i++) {
        const char *a = variant_names[i], *b = name;
        while (*a && *b && tolower((unsigned char)*a) == tolower((unsigned char)*b)) a++, b++;
        if (!*a && !*b) {
            *out = (wbcl_variant)i;
            return WBCL_SUCCESS;
        }
    }
    return WBCL_ERROR_INVALID_ARGUMENT;
}

static wbcl_variant variant_by_type(const wbcl_device_info *d)
{
    return d->type == WBCL_DEVICE_CPU ? WBCL_VARIANT_CPU : WBCL_VARIANT_GPU;
}

/* $WBCL_VARIANT as given (AUTO when unset or empty); the error names the variable and the choices. */
static wbcl_status env_variant(wbcl_variant *v, char *err, size_t errlen)
{
    const char *s = getenv("WBCL_VARIANT");
    *v = WBCL_VARIANT_AUTO;
    if (!s || !*s) return WBCL_SUCCESS;
    if (!wbcl_variant_parse(s, v)) return WBCL_SUCCESS;
    wbcl__msg(err, errlen, "WBCL_VARIANT='%.200s' is not a kernel variant: use cpu, gpu or auto (auto or unset: "
                           "by device type)", s);
    return WBCL_ERROR_INVALID_ARGUMENT;
}

wbcl_status wbcl_variant_default(const wbcl_device_info *dev, wbcl_variant *out, char *err, size_t errlen)
{
    if (!dev || !out) {
        wbcl__msg(err, errlen, "wbcl_variant_default: NULL %s", dev ? "output pointer" : "device");
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    wbcl_variant v;
    wbcl_status st = env_variant(&v, err, errlen);
    if (st) return st;
    *out = v == WBCL_VARIANT_AUTO ? variant_by_type(dev) : v;
    if (err && errlen) err[0] = 0;
    return WBCL_SUCCESS;
}

/* ---- the context -------------------------------------------------------------------------------- */

wbcl_status wbcl_context_create(const char *selector, wbcl_context **out, char *err, size_t errlen)
{
    if (!out) {
        wbcl__msg(err, errlen, "wbcl_context_create: NULL output pointer");
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    *out = NULL;
    wbcl_variant variant; /* checked before any OpenCL work: a bad value fails fast */
    wbcl_status st = env_variant(&variant, err, errlen);
    if (st) return st;
    cl_platform_id *plats = NULL;
    cl_device_id *devs = NULL;
    wbcl_device_info *infos = NULL;
    size_t n = 0, chosen = 0;
    st = wbcl__enumerate(&plats, &devs, &infos, &n, err, errlen);
    if (st) return st;
    st = wbcl_device_select(infos, n, selector, &chosen, err, errlen);
    if (st) {
        free(plats); free(devs); free(infos);
        return st;
    }
    wbcl_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        free(plats); free(devs); free(infos);
        wbcl__msg(err, errlen, "out of host memory creating a context");
        return WBCL_ERROR_OUT_OF_MEMORY;
    }
    ctx->platform = plats[chosen];
    ctx->device = devs[chosen];
    ctx->info = infos[chosen];
    free(plats); free(devs); free(infos);

    cl_int e;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->platform, 0};
    ctx->cl = clCreateContext(props, 1, &ctx->device, NULL, NULL, &e);
    if (e != CL_SUCCESS) {
        wbcl__msg(err, errlen, "clCreateContext on '%s' failed: %s (%d)", ctx->info.name, wbcl__cl_error_name(e), (int)e);
        free(ctx);
        return WBCL_ERROR_OPENCL;
    }
    ctx->queue = clCreateCommandQueue(ctx->cl, ctx->device,
                                      ctx->info.has_profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &e);
    if (e != CL_SUCCESS) {
        wbcl__msg(err, errlen, "clCreateCommandQueue on '%s' failed: %s (%d)", ctx->info.name,
                  wbcl__cl_error_name(e), (int)e);
        clReleaseContext(ctx->cl);
        free(ctx);
        return WBCL_ERROR_OPENCL;
    }
    ctx->variant = variant == WBCL_VARIANT_AUTO ? variant_by_type(&ctx->info) : variant;
    ctx->cache_dir = default_cache_dir();
    /* before anything that may record a message (the tuning load does when there is no cache dir) */
    ctx->last_error = calloc(1, 256);
    ctx->last_error_cap = ctx->last_error ? 256 : 0;
    wbcl__tuning_load(ctx); /* the device's parameter table (wbcl/tuning.h): never fails */
    if (ctx->last_error) ctx->last_error[0] = 0; /* a new context has no error */
    wbcl__params_init(ctx);
    ctx->cache_save_at_exit = !driver_caches_kernels(&ctx->info);
    const char *bd = getenv("WBCL_BINARY_DIR");
    if (bd && *bd) ctx->binary_dir = dup_str(bd);
    const char *kd = getenv("WBCL_KERNEL_DIR");
    if (kd && *kd) ctx->kernel_dir = dup_str(kd);
    const char *bl = getenv("WBCL_BUILD_LOG");
    ctx->build_log = bl && *bl && strcmp(bl, "0") != 0;
    if (!ctx->last_error || (bd && *bd && !ctx->binary_dir) || (kd && *kd && !ctx->kernel_dir) ||
        wbcl__pack_pool_create(ctx)) {
        wbcl_context_destroy(ctx);
        wbcl__msg(err, errlen, "out of host memory creating a context");
        return WBCL_ERROR_OUT_OF_MEMORY;
    }
    if (err && errlen) err[0] = 0;
    *out = ctx;
    return WBCL_SUCCESS;
}

void wbcl_context_destroy(wbcl_context *ctx)
{
    if (!ctx) return;
    if (ctx->queue) clFinish(ctx->queue);
    if (ctx->cl && ctx->cache_save_at_exit) wbcl_context_save_cache(ctx); /* best effort: failures are not errors */
    wbcl__programs_release(ctx);
    wbcl__fft_release(ctx);
    for (int i = 0; i < WBCL_SCRATCH_SLOTS; i++)
        if (ctx->scratch[i]) clReleaseMemObject(ctx->scratch[i]);
    if (ctx->queue) clReleaseCommandQueue(ctx->queue);
    if (ctx->cl) clReleaseContext(ctx->cl);
    wbcl__tuning_release(ctx);
    wbcl__pack_pool_release(ctx);
    free(ctx->cache_dir);
    free(ctx->binary_dir);
    free(ctx->kernel_dir);
    free(ctx->last_error);
    free(ctx);
}

const char *wbcl_context_last_error(const wbcl_context *ctx)
{
    if (!ctx || !ctx->last_error) return "";
    return ctx->last_error;
}

const wbcl_device_info *wbcl_context_device(const wbcl_context *ctx) { return ctx ? &ctx->info : NULL; }

wbcl_status wbcl_context_finish(wbcl_context *ctx)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    cl_int e = clFinish(ctx->queue);
    return e == CL_SUCCESS ? WBCL_SUCCESS : wbcl__cl_fail(ctx, e, "clFinish");
}

wbcl_status wbcl_context_set_variant(wbcl_context *ctx, wbcl_variant v)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (v == WBCL_VARIANT_AUTO) v = variant_by_type(&ctx->info);
    if (v != WBCL_VARIANT_CPU && v != WBCL_VARIANT_GPU)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_context_set_variant: unknown variant %d", (int)v);
    ctx->variant = v;
    wbcl__params_init(ctx);
    return WBCL_SUCCESS;
}

wbcl_variant wbcl_context_variant(const wbcl_context *ctx) { return ctx ? ctx->variant : WBCL_VARIANT_AUTO; }

wbcl_status wbcl_context_set_gemm_backend(wbcl_context *ctx, wbcl_gemm_backend b)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (b == WBCL_GEMM_AUTO) { /* the parameter table's gemm.backend, else by device type */
        ctx->gemm_backend_explicit = 0;
        wbcl__gemm_backend_resolve(ctx);
        return WBCL_SUCCESS;
    }
    if (b != WBCL_GEMM_PACKED && b != WBCL_GEMM_CLBLAST && b != WBCL_GEMM_TILED)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_context_set_gemm_backend: unknown backend %d", (int)b);
    if (b == WBCL_GEMM_TILED) {
        wbcl_status st = wbcl__gemm_tiled_fits(ctx, "wbcl_context_set_gemm_backend");
        if (st) return st;
    }
    ctx->gemm_backend = b;
    ctx->gemm_backend_explicit = 1;
    return WBCL_SUCCESS;
}

wbcl_gemm_backend wbcl_context_gemm_backend(const wbcl_context *ctx) { return ctx ? ctx->gemm_backend : WBCL_GEMM_AUTO; }

wbcl_status wbcl_context_set_timing(wbcl_context *ctx, int enabled)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (enabled && !ctx->info.has_profiling)
        return wbcl__fail(ctx, WBCL_ERROR_UNSUPPORTED, "device '%s' does not support queue profiling", ctx->info.name);
    ctx->timing = enabled != 0;
    return WBCL_SUCCESS;
}

uint64_t wbcl_context_kernel_ns(const wbcl_context *ctx) { return ctx ? ctx->kernel_ns : 0; }
void wbcl_context_reset_kernel_ns(wbcl_context *ctx)
{
    if (!ctx) return;
    ctx->kernel_ns = 0;
    for (size_t i = 0; i < ctx->n_kerns; i++) ctx->kerns[i]->ns = ctx->kerns[i]->launches = 0;
}

int wbcl_context_kernel_profile(const wbcl_context *ctx, size_t i, const char **name, uint64_t *ns,
                                uint64_t *launches)
{
    if (!ctx || i >= ctx->n_kerns) return 0;
    const wbcl_kern *k = ctx->kerns[i];
    if (name) *name = k->name;
    if (ns) *ns = k->ns;
    if (launches) *launches = k->launches;
    return 1;
}
uint64_t wbcl_context_build_ns(const wbcl_context *ctx) { return ctx ? ctx->build_ns : 0; }

wbcl_status wbcl__buffer(wbcl_context *ctx, size_t bytes, const char *what, cl_mem *out)
{
    *out = NULL;
    if (bytes == 0) bytes = 4;
    if (bytes > ctx->info.max_alloc_size)
        return wbcl__fail(ctx, WBCL_ERROR_DEVICE_LIMIT,
                          "%s: %zu bytes exceed the device's maximum allocation of %llu bytes (%s)", what, bytes,
                          (unsigned long long)ctx->info.max_alloc_size, ctx->info.name);
    cl_int e;
    cl_mem m = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, bytes, NULL, &e);
    if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "%s: clCreateBuffer of %zu bytes", what, bytes);
    *out = m;
    return WBCL_SUCCESS;
}

wbcl_status wbcl__scratch(wbcl_context *ctx, int slot, size_t bytes, cl_mem *out)
{
    if (slot < 0 || slot >= WBCL_SCRATCH_SLOTS)
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "internal: scratch slot %d out of range", slot);
    if (ctx->scratch[slot] && ctx->scratch_bytes[slot] >= bytes) {
        *out = ctx->scratch[slot];
        return WBCL_SUCCESS;
    }
    if (ctx->scratch[slot]) {
        /* the old buffer may still be in use by enqueued work: the queue is in
         * order and OpenCL retains it until that work completes */
        clReleaseMemObject(ctx->scratch[slot]);
        ctx->scratch[slot] = NULL;
        ctx->scratch_bytes[slot] = 0;
    }
    cl_mem m;
    wbcl_status st = wbcl__buffer(ctx, bytes, "scratch buffer", &m);
    if (st) return st;
    ctx->scratch[slot] = m;
    ctx->scratch_bytes[slot] = bytes;
    *out = m;
    return WBCL_SUCCESS;
}
