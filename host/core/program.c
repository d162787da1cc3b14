/* Programs: per-device parameter table, -D prelude, source lookup (embedded
 * or WBCL_KERNEL_DIR), in-memory cache, on-disk binary cache, prebuilt
 * binaries, kernels and launches. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BIN_MAGIC "WBCLBIN1"
#define CACHE_FORMAT "wbcl-program-cache-v1"

/* ---- parameter table --------------------------------------------------- */
void wbcl__params_init(wbcl_context *ctx)
{
    /* Per device class. CPUs: register tiles of MR x NR = 12 x 32 (24 zmm
     * accumulators of the 32 an AVX-512 core has; PERF-NOTES measured 8 x 32
     * on Zen 4, and 12 x 32 measured 1.03-1.07x faster than 8 x 32 at
     * n = 1024-2048 on this project's Xeon: perf/RESULTS.md), no local
     * memory, work-groups of >= 64 items. */
    static const wbcl_params cpu = {64, 12, 32, 16, 64, 64, 1024, 0, 8, 0, 0, 1, 0, 0};
    static const wbcl_params gpu = {256, 8, 32, 16, 1, 256, 1024, 0, 8, 0, 0, 1, 0, 0};
    static const wbcl_params acc = {64, 8, 32, 8, 1, 64, 1024, 0, 8, 0, 0, 1, 0, 0};
    wbcl_params p = ctx->variant == WBCL_VARIANT_CPU ? cpu
                  : ctx->info.type == WBCL_DEVICE_GPU ? gpu
                  : ctx->info.type == WBCL_DEVICE_CPU ? gpu : acc;
    /* the GEMM backend: packed on CPUs, tiled on GPUs, CLBlast elsewhere, unless the table says (gemm.backend) */
    p.gemm_backend = wbcl__gemm_backend_default(&ctx->info);
    if (ctx->info.type == WBCL_DEVICE_CPU) {
        /* The register tile must fit the SIMD register file (32 registers with
         * AVX-512, 16 with AVX2 and SSE): about 3/4 of the registers hold C.
         * 16 floats a register: 12 x 32 (24 zmm); 8: 6 x 16 (12 ymm); fewer:
         * 3 x 16 (12 xmm). Only the AVX-512 entry was measured here. */
        const unsigned vw = ctx->info.native_vector_width_float;
        if (vw && vw < 16) {
            p.gemm_mr = vw >= 8 ? 6 : 3;
            p.gemm_nr = 16;
        }
    }
    size_t maxwg = ctx->info.max_work_group_size ? ctx->info.max_work_group_size : 1;
    while ((size_t)p.wg_size > maxwg) p.wg_size /= 2;
    while ((size_t)p.reduce_wg > maxwg) p.reduce_wg /= 2;
    while ((size_t)(p.gemm_tile * p.gemm_tile) > maxwg) p.gemm_tile /= 2;
    if (p.wg_size < 1) p.wg_size = 1;
    if (p.reduce_wg < 1) p.reduce_wg = 1;
    if (p.gemm_tile < 1) p.gemm_tile = 1;
    /* tuned values (include/wbcl/tuning.h), validated against the device when they were loaded or set */
    static const struct { const char *key; size_t off; } tuned[] = {
        {"core.wg", offsetof(wbcl_params, wg_size)},          {"reduce.rows", offsetof(wbcl_params, reduce_rows)},
        {"reduce.wg", offsetof(wbcl_params, reduce_wg)},      {"gemm.mr", offsetof(wbcl_params, gemm_mr)},
        {"gemm.nr", offsetof(wbcl_params, gemm_nr)},          {"gemm.a_block_kib", offsetof(wbcl_params, gemm_a_block_kib)},
        {"gemm.tiled.tile", offsetof(wbcl_params, gemm_tiled)}, {"gemm.tiled.tk", offsetof(wbcl_params, gemm_tiled_k)},
        {"gemm.tiled.db", offsetof(wbcl_params, gemm_tiled_db)},    {"gemm.tiled.v4", offsetof(wbcl_params, gemm_tiled_v4)},
        {"gemm.tiled.maxrreg", offsetof(wbcl_params, gemm_tiled_maxrreg)},
        {"gemm.backend", offsetof(wbcl_params, gemm_backend)},
        {"circulant.wg", offsetof(wbcl_params, circulant_wg)},
    };
    for (size_t i = 0; i < sizeof tuned / sizeof tuned[0]; i++) {
        long v;
        if (wbcl__tuned_value(ctx, tuned[i].key, 0, &v, NULL)) *(int *)((char *)&p + tuned[i].off) = (int)v;
    }
    ctx->params = p;
    wbcl__gemm_backend_resolve(ctx);
}

/* CPUs: the packed kernel. GPUs: wbcl's tiled kernel where the device takes its smallest form,
 * measured faster than CLBlast with its own parameters on an NVIDIA H200 at every size timed
 * (1024^3 0.77x cuBLAS against 0.72x, 2048^3 0.77x against 0.54x, 4096^3 0.71x against 0.60x:
 * perf/RESULTS.md, 2026-11-27, fourth session); a tuned table's gemm.backend decides per device.
 * Other devices (accelerators): CLBlast. */
wbcl_gemm_backend wbcl__gemm_backend_default(const wbcl_device_info *dev)
{
    char why[8];
    if (dev->type == WBCL_DEVICE_CPU) return WBCL_GEMM_PACKED;
    if (dev->type == WBCL_DEVICE_GPU && !wbcl__gemm_tiled_limits(dev, 64, 8, 0, why, sizeof why)) return WBCL_GEMM_TILED;
    return WBCL_GEMM_CLBLAST;
}

void wbcl__gemm_backend_resolve(wbcl_context *ctx)
{
    if (ctx->gemm_backend_explicit) return;
    wbcl_gemm_backend b = (wbcl_gemm_backend)ctx->params.gemm_backend;
    char why[8];
    /* the tiled backend (a table's, or the GPU default) with tile parameters the device cannot take
     * (gemm.tiled.tk and .db fixing more local memory than it has): CLBlast (the table's load
     * already refused gemm.backend = 3 on a device too small for any tile) */
    if (b == WBCL_GEMM_TILED &&
        wbcl__gemm_tiled_limits(&ctx->info, ctx->params.gemm_tiled, ctx->params.gemm_tiled_k, ctx->params.gemm_tiled_db,
                                why, sizeof why))
        b = WBCL_GEMM_CLBLAST;
    ctx->gemm_backend = b;
}

static void prelude(const wbcl_context *ctx, char *buf, size_t len)
{
    const wbcl_params *p = &ctx->params;
    int c12 = 0;
    int maj = 0, min = 0;
    if (sscanf(ctx->info.opencl_c_version, "OpenCL C %d.%d", &maj, &min) == 2) c12 = maj > 1 || (maj == 1 && min >= 2);
    /* -w: no warnings. PoCL's compiler prints a count of them to stderr on every build ("80 warnings
     * generated."), and on CPUs without AVX-512 every float16 argument of a built-in draws clang's
     * -Wpsabi note (an ABI remark, not a defect); a failing build's log still carries the errors */
    snprintf(buf, len,
             "%s-w -DWBCL_VARIANT_CPU=%d -DWBCL_VARIANT_GPU=%d -DWBCL_WG=%d -DWBCL_GEMM_MR=%d -DWBCL_GEMM_NR=%d "
             "-DWBCL_TILE=%d -DWBCL_REDUCE_ROWS=%d -DWBCL_REDUCE_WG=%d -DWBCL_HAS_FP64=%d -DWBCL_HAS_FP16=%d "
             "-DWBCL_SIMD=%u",
             c12 ? "-cl-std=CL1.2 " : "", ctx->variant == WBCL_VARIANT_CPU, ctx->variant == WBCL_VARIANT_GPU,
             p->wg_size, p->gemm_mr, p->gemm_nr, p->gemm_tile, p->reduce_rows, p->reduce_wg, ctx->info.has_fp64,
             ctx->info.has_fp16, ctx->info.native_vector_width_float);
    /* WBCL_BUILD_LOG on NVIDIA's OpenCL: ptxas reports each kernel's registers, spills and stack in the log
     * (a separate cache entry: the option is part of the key) */
    const size_t used = strlen(buf);
    if (ctx->build_log && ctx->info.has_nv_compiler_options && used < len)
        snprintf(buf + used, len - used, " -cl-nv-verbose");
}

void wbcl__append_regcap(const wbcl_context *ctx, int maxrreg, char *opts, size_t len)
{
    const size_t used = strlen(opts);
    if (maxrreg > 0 && ctx->info.has_nv_compiler_options && used < len)
        snprintf(opts + used, len - used, "%s-cl-nv-maxrregcount=%d", used ? " " : "", maxrreg);
}

/* ---- hashing (FNV-1a, two 64-bit lanes) ----------------------------------- */
typedef struct { uint64_t a, b; } hash128;

static void hash_bytes(hash128 *h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ p[i]) * 0x100000001b3ull;
        h->b = (h->b ^ p[i]) * 0x100000001b3ull;
        h->b ^= h->b >> 29;
    }
    unsigned char sep = 0xff; /* field separator */
    h->a = (h->a ^ sep) * 0x100000001b3ull;
    h->b = (h->b ^ sep) * 0x100000001b3ull;
}

static void hash_str(hash128 *h, const char *s) { hash_bytes(h, s, strlen(s)); }

/* ---- sources ------------------------------------------------------------- */
/* Returns a malloc'd source: common.cl followed by <family>.cl. */
static wbcl_status load_source(wbcl_context *ctx, const char *family, char **out)
{
    *out = NULL;
    const char *names[2] = {"common", family};
    char *parts[2] = {NULL, NULL};
    size_t lens[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        if (ctx->kernel_dir) {
            struct stat sb;
            if (stat(ctx->kernel_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
                free(parts[0]);
                return wbcl__fail(ctx, WBCL_ERROR_IO, "WBCL_KERNEL_DIR '%s' is not a directory", ctx->kernel_dir);
            }
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.cl", ctx->kernel_dir, names[i]);
            parts[i] = wbcl__read_file(path, &lens[i]);
        }
        if (!parts[i]) {
            size_t len = 0;
            const char *src = wbcl__embedded_source(names[i], &len);
            if (!src) {
                free(parts[0]);
                return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "no kernel family '%s' in this build", names[i]);
            }
            parts[i] = malloc(len + 1);
            if (!parts[i]) { free(parts[0]); return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "out of host memory"); }
            memcpy(parts[i], src, len);
            parts[i][len] = 0;
            lens[i] = len;
        }
    }
    char *s = malloc(lens[0] + lens[1] + 64);
    if (!s) {
        free(parts[0]); free(parts[1]);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    size_t n = 0;
    memcpy(s + n, parts[0], lens[0]); n += lens[0];
    s[n++] = '\n';
    n += (size_t)sprintf(s + n, "#line 1 \"%s.cl\"\n", family);
    memcpy(s + n, parts[1], lens[1]); n += lens[1];
    s[n] = 0;
    free(parts[0]); free(parts[1]);
    *out = s;
    return WBCL_SUCCESS;
}

/* ---- binaries on disk -------------------------------------------------------- */
static unsigned char *load_binary(const char *dir, const char *key, size_t *len)
{
    if (!dir) return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, key);
    size_t n = 0;
    char *buf = wbcl__read_file(path, &n);
    if (!buf) return NULL;
    uint64_t blen = 0;
    if (n < 8 + 32 + 8 || memcmp(buf, BIN_MAGIC, 8) != 0 || memcmp(buf + 8, key, 32) != 0) { free(buf); return NULL; }
    memcpy(&blen, buf + 40, 8);
    if (blen == 0 || blen != n - 48) { free(buf); return NULL; }
    memmove(buf, buf + 48, (size_t)blen);
    *len = (size_t)blen;
    return (unsigned char *)buf;
}

static int save_binary(wbcl_context *ctx, const wbcl_program *p, const char *dir)
{
    size_t bsize = 0;
    if (clGetProgramInfo(p->program, CL_PROGRAM_BINARY_SIZES, sizeof bsize, &bsize, NULL) != CL_SUCCESS || !bsize)
        return -1;
    unsigned char *file = malloc(48 + bsize);
    if (!file) return -1;
    unsigned char *bin = file + 48;
    if (clGetProgramInfo(p->program, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) != CL_SUCCESS) {
        free(file);
        return -1;
    }
    memcpy(file, BIN_MAGIC, 8);
    memcpy(file + 8, p->key, 32);
    uint64_t b = bsize;
    memcpy(file + 40, &b, 8);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, p->key);
    int rc = wbcl__mkdir_p(dir) == 0 ? wbcl__write_file_atomic(path, file, 48 + bsize) : -1;
    free(file);
    (void)ctx;
    return rc;
}

static cl_int build(wbcl_context *ctx, cl_program prog, const char *options, uint64_t *ns)
{
    uint64_t t0 = wbcl__now_ns();
    cl_int e = clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL);
    *ns = wbcl__now_ns() - t0;
    ctx->build_ns += *ns;
    return e;
}

/* The program's build log (malloc'd, NUL-terminated), or NULL. */
static char *build_log_text(wbcl_context *ctx, cl_program prog)
{
    size_t n = 0;
    char *log = NULL;
    if (clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS && n) {
        log = malloc(n + 1);
        if (log && clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, n, log, NULL) == CL_SUCCESS)
            log[n] = 0;
        else { free(log); log = NULL; }
    }
    return log;
}

static wbcl_status build_log_fail(wbcl_context *ctx, cl_program prog, const char *family, const char *options, cl_int e)
{
    char *log = build_log_text(ctx, prog);
    wbcl_status st = wbcl__fail(ctx, WBCL_ERROR_BUILD,
                                "building kernel family '%s' for '%s' failed: %s (%d)\noptions: %s\nbuild log:\n%s",
                                family, ctx->info.name, wbcl__cl_error_name(e), (int)e, options, log ? log : "(none)");
    free(log);
    return st;
}

static cl_program from_binary(wbcl_context *ctx, const unsigned char *bin, size_t len, const char *options, uint64_t *ns)
{
    cl_int e, bs;
    cl_program prog = clCreateProgramWithBinary(ctx->cl, 1, &ctx->device, &len, &bin, &bs, &e);
    if (e != CL_SUCCESS || bs != CL_SUCCESS) {
        if (prog) clReleaseProgram(prog);
        return NULL;
    }
    if (build(ctx, prog, options, ns) != CL_SUCCESS) {
        clReleaseProgram(prog);
        return NULL;
    }
    return prog;
}

/* ---- program cache ------------------------------------------------------------ */
static hash128 program_hash(const wbcl_context *ctx, const char *family, const char *src, const char *options)
{
    hash128 h = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
    hash_str(&h, CACHE_FORMAT);
    hash_str(&h, family);
    hash_str(&h, src);
    hash_str(&h, options);
    hash_str(&h, ctx->info.name);
    hash_str(&h, ctx->info.vendor);
    hash_str(&h, ctx->info.driver_version);
    hash_str(&h, ctx->info.platform_version);
    hash_str(&h, ctx->info.device_version);
    return h;
}

wbcl_status wbcl__program(wbcl_context *ctx, const char *family, const char *extra, wbcl_program **out)
{
    char options[1024];
    prelude(ctx, options, sizeof options);
    if (extra && *extra) {
        size_t used = strlen(options);
        if (used + 1 + strlen(extra) + 1 > sizeof options)
            return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "build options for '%s' too long", family);
        snprintf(options + used, sizeof options - used, " %s", extra);
    }
    for (size_t i = 0; i < ctx->n_programs; i++) {
        wbcl_program *p = ctx->programs[i];
        if (strcmp(p->family, family) == 0 && strcmp(p->options, options) == 0) {
            *out = p;
            return WBCL_SUCCESS;
        }
    }
    char *src = NULL;
    wbcl_status st = load_source(ctx, family, &src);
    if (st) return st;

    hash128 h = program_hash(ctx, family, src, options);
    /* Prebuilt binaries (WBCL_BINARY_DIR) are keyed by the kernels embedded in this library, so
     * that a deployment never compiles source, even when WBCL_KERNEL_DIR is set (the files there
     * are then used only for programs the binary directory lacks). */
    hash128 hb = h;
    if (ctx->kernel_dir && ctx->binary_dir) {
        char *esrc = NULL;
        char *kd = ctx->kernel_dir;
        ctx->kernel_dir = NULL;
        st = load_source(ctx, family, &esrc);
        ctx->kernel_dir = kd;
        if (st) { free(src); return st; }
        hb = program_hash(ctx, family, esrc, options);
        free(esrc);
    }

    wbcl_program *p = calloc(1, sizeof *p);
    if (!p) { free(src); return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "out of host memory"); }
    snprintf(p->key, sizeof p->key, "%016llx%016llx", (unsigned long long)h.a, (unsigned long long)h.b);
    p->family = malloc(strlen(family) + 1);
    p->options = malloc(strlen(options) + 1);
    if (!p->family || !p->options) {
        free(p->family); free(p->options); free(p); free(src);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    strcpy(p->family, family);
    strcpy(p->options, options);

    char bkey[33];
    snprintf(bkey, sizeof bkey, "%016llx%016llx", (unsigned long long)hb.a, (unsigned long long)hb.b);
    /* 1. prebuilt binaries, 2. disk cache, 3. source */
    const char *dirs[2] = {ctx->binary_dir, ctx->cache_dir};
    for (int d = 0; d < 2 && !p->program; d++) {
        size_t blen = 0;
        unsigned char *bin = load_binary(dirs[d], d == 0 ? bkey : p->key, &blen);
        if (bin) {
            p->program = from_binary(ctx, bin, blen, options, &p->build_ns);
            free(bin);
            if (p->program) {
                p->saved = 1;
                p->origin = d == 0 ? WBCL_ORIGIN_BINARY_DIR : WBCL_ORIGIN_CACHE;
            }
        }
    }
    if (!p->program) {
        cl_int e;
        const char *srcs[1] = {src};
        cl_program prog = clCreateProgramWithSource(ctx->cl, 1, srcs, NULL, &e);
        if (e != CL_SUCCESS) {
            free(p->family); free(p->options); free(p); free(src);
            return wbcl__cl_fail(ctx, e, "clCreateProgramWithSource for '%s'", family);
        }
        e = build(ctx, prog, options, &p->build_ns);
        if (e != CL_SUCCESS) {
            st = build_log_fail(ctx, prog, family, options, e);
            clReleaseProgram(prog);
            free(p->family); free(p->options); free(p); free(src);
            return st;
        }
        p->program = prog;
        if (ctx->build_log) {
            char *log = build_log_text(ctx, prog);
            fprintf(stderr, "wbcl: built '%s' for '%s' in %.0f ms\noptions: %s\nbuild log:\n%s\n", family,
                    ctx->info.name, (double)p->build_ns / 1e6, options, log && *log ? log : "(empty)");
            free(log);
        }
    }
    free(src);
    if (ctx->n_programs == ctx->cap_programs) {
        size_t cap = ctx->cap_programs ? 2 * ctx->cap_programs : 8;
        wbcl_program **np = realloc(ctx->programs, cap * sizeof *np);
        if (!np) {
            clReleaseProgram(p->program);
            free(p->family); free(p->options); free(p);
            return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "out of host memory");
        }
        ctx->programs = np;
        ctx->cap_programs = cap;
    }
    ctx->programs[ctx->n_programs++] = p;
    *out = p;
    return WBCL_SUCCESS;
}

wbcl_status wbcl__kernel(wbcl_context *ctx, const char *family, const char *extra, const char *name, wbcl_kern **out)
{
    wbcl_program *p;
    wbcl_status st = wbcl__program(ctx, family, extra, &p);
    if (st) return st;
    for (size_t i = 0; i < ctx->n_kerns; i++)
        if (ctx->kerns[i]->prog == p && strcmp(ctx->kerns[i]->name, name) == 0) {
            *out = ctx->kerns[i];
            return WBCL_SUCCESS;
        }
    cl_int e;
    cl_kernel k = clCreateKernel(p->program, name, &e);
    if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "clCreateKernel '%s' in family '%s'", name, family);
    wbcl_kern *kk = calloc(1, sizeof *kk);
    char *nm = malloc(strlen(name) + 1);
    if (ctx->n_kerns == ctx->cap_kerns && kk && nm) {
        size_t cap = ctx->cap_kerns ? 2 * ctx->cap_kerns : 16;
        wbcl_kern **nk = realloc(ctx->kerns, cap * sizeof *nk);
        if (nk) { ctx->kerns = nk; ctx->cap_kerns = cap; }
    }
    if (!kk || !nm || ctx->n_kerns == ctx->cap_kerns) {
        free(kk); free(nm);
        clReleaseKernel(k);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    strcpy(nm, name);
    kk->kernel = k;
    kk->prog = p;
    kk->name = nm;
    ctx->kerns[ctx->n_kerns++] = kk;
    *out = kk;
    return WBCL_SUCCESS;
}

void wbcl__programs_release(wbcl_context *ctx)
{
    for (size_t i = 0; i < ctx->n_kerns; i++) {
        clReleaseKernel(ctx->kerns[i]->kernel);
        free(ctx->kerns[i]->name);
        free(ctx->kerns[i]);
    }
    free(ctx->kerns);
    ctx->kerns = NULL;
    ctx->n_kerns = ctx->cap_kerns = 0;
    for (size_t i = 0; i < ctx->n_programs; i++) {
        clReleaseProgram(ctx->programs[i]->program);
        free(ctx->programs[i]->family);
        free(ctx->programs[i]->options);
        free(ctx->programs[i]);
    }
    free(ctx->programs);
    ctx->programs = NULL;
    ctx->n_programs = ctx->cap_programs = 0;
}

wbcl_status wbcl_context_save_cache(wbcl_context *ctx)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!ctx->cache_dir) return WBCL_SUCCESS;
    clFinish(ctx->queue);
    int failed = 0;
    for (size_t i = 0; i < ctx->n_programs; i++) {
        wbcl_program *p = ctx->programs[i];
        if (!p->used || p->saved) continue;
        if (save_binary(ctx, p, ctx->cache_dir) == 0) p->saved = 1;
        else failed = 1;
    }
    if (failed)
        return wbcl__fail(ctx, WBCL_ERROR_IO, "could not write program binaries to cache directory '%s'", ctx->cache_dir);
    return WBCL_SUCCESS;
}

wbcl_status wbcl_context_export_binaries(wbcl_context *ctx, const char *dir)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!dir || !*dir) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_context_export_binaries: no directory");
    if (wbcl__mkdir_p(dir) != 0) return wbcl__fail(ctx, WBCL_ERROR_IO, "cannot create directory '%s'", dir);
    clFinish(ctx->queue);
    for (size_t i = 0; i < ctx->n_programs; i++)
        if (save_binary(ctx, ctx->programs[i], dir) != 0)
            return wbcl__fail(ctx, WBCL_ERROR_IO, "could not write the binary of '%s' into '%s'",
                              ctx->programs[i]->family, dir);
    return WBCL_SUCCESS;
}

const char *wbcl_kernel_family(size_t i)
{
    size_t k = 0;
    for (size_t j = 0;; j++) {
        const char *f = wbcl__embedded_family(j);
        if (!f) return NULL;
        if (strcmp(f, "common") == 0) continue;
        if (k++ == i) return f;
    }
}

wbcl_status wbcl_context_warm(wbcl_context *ctx, const char *family)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!family) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "wbcl_context_warm: family is NULL");
    wbcl_program *p;
    return wbcl__program(ctx, family, NULL, &p);
}

/* ---- launching ------------------------------------------------------------------ */
wbcl_status wbcl__set_arg(wbcl_context *ctx, wbcl_kern *k, cl_uint idx, size_t size, const void *value)
{
    cl_int e = clSetKernelArg(k->kernel, idx, size, value);
    if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "clSetKernelArg %u of kernel '%s'", idx, k->name);
    return WBCL_SUCCESS;
}

size_t wbcl__wg_fit(size_t want, size_t kernel_limit)
{
    if (want <= kernel_limit) return want;
    size_t p = 1;
    if (!kernel_limit) return 0;
    while (p <= kernel_limit / 2) p *= 2;
    return p;
}

wbcl_status wbcl__kernel_wg_limit(wbcl_context *ctx, wbcl_kern *k, size_t *limit)
{
    *limit = 0;
    cl_int e = clGetKernelWorkGroupInfo(k->kernel, ctx->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof *limit, limit, NULL);
    if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "querying the work-group size limit of kernel '%s'", k->name);
    return WBCL_SUCCESS;
}

wbcl_status wbcl__launch(wbcl_context *ctx, wbcl_kern *k, cl_uint dims, const size_t *global, const size_t *local)
{
    size_t g[3];
    for (cl_uint i = 0; i < dims; i++) {
        g[i] = local ? wbcl__round_up(global[i], local[i]) : global[i];
        if (g[i] == 0) return WBCL_SUCCESS; /* nothing to do */
    }
    cl_event ev = NULL;
    cl_int e = clEnqueueNDRangeKernel(ctx->queue, k->kernel, dims, NULL, g, local, 0, NULL, ctx->timing ? &ev : NULL);
    if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "enqueueing kernel '%s'", k->name);
    k->prog->used = 1;
    if (ev) {
        e = clWaitForEvents(1, &ev);
        cl_ulong t0 = 0, t1 = 0;
        if (e == CL_SUCCESS) e = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
        if (e == CL_SUCCESS) e = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
        clReleaseEvent(ev);
        if (e != CL_SUCCESS) return wbcl__cl_fail(ctx, e, "profiling kernel '%s'", k->name);
        ctx->kernel_ns += t1 > t0 ? t1 - t0 : 0;
        k->ns += t1 > t0 ? t1 - t0 : 0;
        k->launches++;
    }
    return WBCL_SUCCESS;
}
