/* Core: devices, selection, contexts, tensors, programs, caches, threads, bad input. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "testutil.h"

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/wbcl-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

/* Runs x <- a*x + b through the "core" kernel family. */
static wbcl_status run_axpb(wbcl_context *ctx, wbcl_tensor *t, float a, float b)
{
    wbcl_kern *k;
    wbcl_status st = wbcl__kernel(ctx, "core", NULL, "wbcl_axpb", &k);
    if (st) return st;
    cl_uint n = (cl_uint)t->numel;
    WBCL_ARG(ctx, k, 0, t->mem);
    WBCL_ARG(ctx, k, 1, a);
    WBCL_ARG(ctx, k, 2, b);
    WBCL_ARG(ctx, k, 3, n);
    size_t g = n, l = 64;
    return wbcl__launch(ctx, k, 1, &g, &l);
}

/* Work-group sizes for kernels with reqd_work_group_size (the GPU-shaped attention kernel): the decision with
 * fake kernel limits (the wanted size when it fits, else the largest power of two within the limit, 0 when
 * nothing fits), and the real limit of a compiled kernel is positive and within the device's maximum. */
START_TEST(reqd_work_group_size_fit)
{
    static const size_t cases[][3] = {
        /* want, kernel limit, expected */
        {64, 256, 64}, {64, 64, 64}, {64, 63, 32}, {64, 48, 32}, {64, 32, 32}, {64, 3, 2},
        {64, 1, 1},    {64, 0, 0},   {256, 1024, 256}, {128, 100, 64}, {1, 1, 1}, {1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(wbcl__wg_fit(cases[i][0], cases[i][1]) == cases[i][2], "want %zu limit %zu: %zu, expected %zu",
                      cases[i][0], cases[i][1], wbcl__wg_fit(cases[i][0], cases[i][1]), cases[i][2]);
    wbcl_context *ctx = tu_context();
    wbcl_kern *k;
    ck_assert_int_eq(wbcl__kernel(ctx, "core", NULL, "wbcl_axpb", &k), WBCL_SUCCESS);
    size_t lim = 0;
    ck_assert_int_eq(wbcl__kernel_wg_limit(ctx, k, &lim), WBCL_SUCCESS);
    ck_assert_uint_ge(lim, 1);
    ck_assert_uint_le(lim, wbcl_context_device(ctx)->max_work_group_size);
    wbcl_context_destroy(ctx);
}
END_TEST

/* case-insensitive substring test (the selector's documented matching) */
static int contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return 1;
    }
    return n == 0;
}

START_TEST(device_list_and_select)
{
    wbcl_device_info *d = NULL;
    size_t n = 0, c = 99;
    char err[1024];
    ck_assert_int_eq(wbcl_device_list(&d, &n, err, sizeof err), WBCL_SUCCESS);
    ck_assert_uint_ge(n, 1);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(d[i].index, i);
        ck_assert(strlen(d[i].name) > 0);
        ck_assert_uint_ge(d[i].compute_units, 1);
        ck_assert_uint_ge(d[i].max_work_group_size, 1);
        ck_assert(d[i].max_alloc_size > 0 && d[i].max_alloc_size <= d[i].global_mem_size);
        ck_assert_int_ge(d[i].cl_major, 1);
    }
    ck_assert_int_eq(wbcl_device_select(d, n, "0", &c, err, sizeof err), WBCL_SUCCESS);
    ck_assert_uint_eq(c, 0);
    char pd[32];
    snprintf(pd, sizeof pd, "%u:%u", d[n - 1].platform_index, d[n - 1].device_index);
    ck_assert_int_eq(wbcl_device_select(d, n, pd, &c, err, sizeof err), WBCL_SUCCESS);
    ck_assert_uint_eq(c, n - 1);
    /* a name substring, in another case */
    char sub[8] = {0};
    for (int i = 0; i < 4 && d[0].name[i]; i++) sub[i] = (char)(d[0].name[i] ^ ((d[0].name[i] >= 'a' && d[0].name[i] <= 'z') ? 0x20 : 0));
    c = (size_t)-1;
    ck_assert_int_eq(wbcl_device_select(d, n, sub, &c, err, sizeof err), WBCL_SUCCESS);
    ck_assert_uint_lt(c, n);
    ck_assert_msg(contains_ci(d[c].name, sub) || contains_ci(d[c].vendor, sub) || contains_ci(d[c].platform_name, sub),
                  "selector '%s' chose device %zu '%s', which does not match it", sub, c, d[c].name);
    ck_assert_int_eq(wbcl_device_select(d, n, wbcl_device_type_name(d[0].type), &c, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(d[c].type, d[0].type);
    /* failures name the selector and list the devices */
    ck_assert_int_eq(wbcl_device_select(d, n, "no-such-device-xyz", &c, err, sizeof err), WBCL_ERROR_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(err, "no-such-device-xyz"));
    ck_assert_ptr_nonnull(strstr(err, d[0].name));
    ck_assert_int_eq(wbcl_device_select(d, n, "4096", &c, err, sizeof err), WBCL_ERROR_NO_DEVICE);
    ck_assert_int_eq(wbcl_device_select(d, n, "77:0", &c, err, sizeof err), WBCL_ERROR_NO_DEVICE);
    ck_assert_int_eq(wbcl_device_select(d, n, NULL, NULL, err, sizeof err), WBCL_ERROR_INVALID_ARGUMENT);
    /* the environment variable is honoured and named in errors */
    setenv("WBCL_DEVICE", "definitely-not-a-device", 1);
    ck_assert_int_eq(wbcl_device_select(d, n, NULL, &c, err, sizeof err), WBCL_ERROR_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(err, "WBCL_DEVICE"));
    wbcl_context *ctx = (wbcl_context *)0x1;
    ck_assert_int_eq(wbcl_context_create(NULL, &ctx, err, sizeof err), WBCL_ERROR_NO_DEVICE);
    ck_assert_ptr_null(ctx);
    unsetenv("WBCL_DEVICE");
    /* default: first GPU, else first device */
    size_t want = 0;
    for (size_t i = n; i-- > 0;)
        if (d[i].type == WBCL_DEVICE_GPU) want = i;
    ck_assert_int_eq(wbcl_device_select(d, n, "", &c, err, sizeof err), WBCL_SUCCESS);
    ck_assert_uint_eq(c, want);
    wbcl_device_list_free(d);
    wbcl_device_list_free(NULL);
}
END_TEST

START_TEST(tensor_roundtrip_fill_copy_reshape)
{
    wbcl_context *ctx = tu_context();
    tu_rng r;
    tu_rng_seed(&r, 1);
    size_t shape[4] = {3, 1, 7, 5};
    size_t n = 3 * 7 * 5;
    float *x = tu_random_f32(&r, n, -1, 1);
    wbcl_tensor *a = NULL, *b = NULL;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 4, shape, WBCL_F32, x, &a), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_ndim(a), 4);
    ck_assert_uint_eq(wbcl_tensor_dim(a, 2), 7);
    ck_assert_uint_eq(wbcl_tensor_dim(a, 4), 0);
    ck_assert_uint_eq(wbcl_tensor_numel(a), n);
    float *y = tu_guarded_alloc(n);
    ck_assert_int_eq(wbcl_tensor_read(ctx, a, y, n), WBCL_SUCCESS);
    ck_assert(memcmp(x, y, n * sizeof(float)) == 0);
    ck_assert(tu_canary_ok(y, n));
    /* created without data: zeros */
    size_t s2[2] = {n, 1};
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, s2, WBCL_F32, NULL, &b), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, b, y, n), WBCL_SUCCESS);
    for (size_t i = 0; i < n; i++) ck_assert(y[i] == 0.0f);
    ck_assert_int_eq(wbcl_tensor_copy(ctx, a, b), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, b, y, n), WBCL_SUCCESS);
    ck_assert(memcmp(x, y, n * sizeof(float)) == 0);
    ck_assert_int_eq(wbcl_tensor_fill(ctx, b, -2.5f), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, b, y, n), WBCL_SUCCESS);
    for (size_t i = 0; i < n; i++) ck_assert(y[i] == -2.5f);
    ck_assert_int_eq(wbcl_tensor_write(ctx, b, x, n), WBCL_SUCCESS);
    ck_assert_int_eq(run_axpb(ctx, b, 2.0f, 1.0f), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, b, y, n), WBCL_SUCCESS);
    for (size_t i = 0; i < n; i++) ck_assert(y[i] == 2.0f * x[i] + 1.0f);
    size_t s3[3] = {5, 7, 3};
    ck_assert_int_eq(wbcl_tensor_reshape(ctx, a, 3, s3), WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_tensor_dim(a, 0), 5);
    ck_assert(tu_canary_ok(y, n));
    wbcl_tensor_destroy(a);
    wbcl_tensor_destroy(b);
    wbcl_tensor_destroy(NULL);
    wbcl_context_destroy(ctx);
    wbcl_context_destroy(NULL);
    free(x);
    tu_guarded_free(y);
}
END_TEST

START_TEST(tensor_bad_input)
{
    wbcl_context *ctx = tu_context();
    wbcl_tensor *t = (wbcl_tensor *)0x1;
    size_t ok[2] = {4, 4};
    size_t zero[2] = {4, 0};
    size_t huge[4] = {SIZE_MAX / 2, 4, 1, 1};
    size_t big[1] = {(size_t)(wbcl_context_device(ctx)->max_alloc_size / sizeof(float)) + 1};
    tu_assert_status(ctx, wbcl_tensor_create(ctx, 0, ok, WBCL_F32, NULL, &t), WBCL_ERROR_SHAPE, "ndim 0");
    ck_assert_ptr_null(t);
    tu_assert_status(ctx, wbcl_tensor_create(ctx, 5, ok, WBCL_F32, NULL, &t), WBCL_ERROR_SHAPE, "ndim 5");
    tu_assert_status(ctx, wbcl_tensor_create(ctx, 2, zero, WBCL_F32, NULL, &t), WBCL_ERROR_SHAPE, "(4, 0)");
    tu_assert_status(ctx, wbcl_tensor_create(ctx, 2, NULL, WBCL_F32, NULL, &t), WBCL_ERROR_INVALID_ARGUMENT, "NULL");
    tu_assert_status(ctx, wbcl_tensor_create(ctx, 4, huge, WBCL_F32, NULL, &t), WBCL_ERROR_SHAPE, "overflows");
    tu_assert_status(ctx, wbcl_tensor_create(ctx, 1, big, WBCL_F32, NULL, &t), WBCL_ERROR_DEVICE_LIMIT,
                     "maximum allocation");
    tu_assert_status(ctx, wbcl_tensor_create(ctx, 2, ok, (wbcl_dtype)7, NULL, &t), WBCL_ERROR_DTYPE, "F32");
    tu_assert_status(ctx, wbcl_tensor_create(ctx, 2, ok, WBCL_F32, NULL, NULL), WBCL_ERROR_INVALID_ARGUMENT, "NULL");
    ck_assert_int_eq(wbcl_tensor_create(NULL, 2, ok, WBCL_F32, NULL, &t), WBCL_ERROR_INVALID_ARGUMENT);

    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, ok, WBCL_F32, NULL, &t), WBCL_SUCCESS);
    float buf[17];
    for (int i = 0; i < 17; i++) buf[i] = 42.0f;
    tu_assert_status(ctx, wbcl_tensor_read(ctx, t, buf, 17), WBCL_ERROR_SHAPE, "17");
    for (int i = 0; i < 17; i++) ck_assert(buf[i] == 42.0f); /* untouched */
    tu_assert_status(ctx, wbcl_tensor_read(ctx, t, NULL, 16), WBCL_ERROR_INVALID_ARGUMENT, "NULL");
    tu_assert_status(ctx, wbcl_tensor_read(ctx, NULL, buf, 16), WBCL_ERROR_INVALID_ARGUMENT, "NULL");
    tu_assert_status(ctx, wbcl_tensor_write(ctx, t, buf, 3), WBCL_ERROR_SHAPE, "3");
    size_t s3[1] = {15};
    tu_assert_status(ctx, wbcl_tensor_reshape(ctx, t, 1, s3), WBCL_ERROR_SHAPE, "15");
    ck_assert_uint_eq(wbcl_tensor_dim(t, 0), 4); /* shape unchanged */

    /* a tensor of another context */
    wbcl_context *other = tu_context();
    wbcl_tensor *u = NULL;
    ck_assert_int_eq(wbcl_tensor_create(other, 2, ok, WBCL_F32, NULL, &u), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_tensor_copy(ctx, u, t), WBCL_ERROR_CONTEXT_MISMATCH, "another context");
    size_t s5[1] = {5};
    wbcl_tensor *v = NULL;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s5, WBCL_F32, NULL, &v), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_tensor_copy(ctx, v, t), WBCL_ERROR_SHAPE, "5");
    wbcl_tensor_destroy(u);
    wbcl_tensor_destroy(v);
    wbcl_tensor_destroy(t);
    wbcl_context_destroy(other);
    wbcl_context_destroy(ctx);
}
END_TEST

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(broken_kernel_source_reports_build_log)
{
    make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/core.cl", tmpdir);
    write_text(path, "__kernel void wbcl_axpb(__global float *x) { this is not C; }\n");
    setenv("WBCL_KERNEL_DIR", tmpdir, 1);
    setenv("WBCL_CACHE_DIR", "off", 1);
    wbcl_context *ctx = tu_context();
    size_t s[1] = {8};
    wbcl_tensor *t = NULL;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s, WBCL_F32, NULL, &t), WBCL_SUCCESS);
    tu_assert_status(ctx, run_axpb(ctx, t, 1, 1), WBCL_ERROR_BUILD, "build log");
    ck_assert_ptr_nonnull(strstr(wbcl_context_last_error(ctx), "core"));
    ck_assert_ptr_nonnull(strstr(wbcl_context_last_error(ctx), "error"));
    wbcl_tensor_destroy(t);
    wbcl_context_destroy(ctx);
    /* a kernel dir that does not exist is an error, not a silent fallback */
    setenv("WBCL_KERNEL_DIR", "/nonexistent/wbcl-kernels", 1);
    ctx = tu_context();
    tu_assert_status(ctx, wbcl_context_warm(ctx, "core"), WBCL_ERROR_IO, "/nonexistent/wbcl-kernels");
    tu_assert_status(ctx, wbcl_context_warm(ctx, "no_such_family"), WBCL_ERROR_IO, "WBCL_KERNEL_DIR");
    wbcl_context_destroy(ctx);
    unsetenv("WBCL_KERNEL_DIR");
    ctx = tu_context();
    tu_assert_status(ctx, wbcl_context_warm(ctx, "no_such_family"), WBCL_ERROR_INVALID_ARGUMENT, "no_such_family");
    wbcl_context_destroy(ctx);
}
END_TEST

static int count_bins(const char *dir, char *first, size_t len)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s/*.bin 2>/dev/null", dir);
    FILE *p = popen(cmd, "r");
    int n = 0;
    char line[512];
    while (p && fgets(line, sizeof line, p)) {
        if (n == 0 && first) {
            line[strcspn(line, "\n")] = 0;
            snprintf(first, len, "%s", line);
        }
        n++;
    }
    if (p) pclose(p);
    return n;
}

static wbcl_program *program_of(wbcl_context *ctx, const char *family)
{
    for (size_t i = 0; i < ctx->n_programs; i++)
        if (!strcmp(ctx->programs[i]->family, family)) return ctx->programs[i];
    return NULL;
}

START_TEST(disk_cache_and_prebuilt_binaries)
{
    make_tmpdir();
    char cache[300], bins[300], first[512];
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);
    snprintf(bins, sizeof bins, "%s/bins", tmpdir);
    setenv("WBCL_CACHE_DIR", cache, 1);
    size_t s[1] = {100};
    float y[100];
    /* 1st process-like context: builds from source; destroy saves it where the driver keeps no
     * kernel cache of its own, i.e. not on PoCL unless POCL_KERNEL_CACHE=0 (context.h) */
    wbcl_context *ctx = tu_context();
    const int pocl = strstr(wbcl_context_device(ctx)->platform_name, "Portable Computing Language") != NULL;
    const char *kc_env = getenv("POCL_KERNEL_CACHE");
    char kc_saved[64] = "";
    const char *kc = kc_env ? strncpy(kc_saved, kc_env, sizeof kc_saved - 1) : NULL;
    const int saves_at_exit = !pocl || (kc && !strcmp(kc, "0"));
    ck_assert_int_eq(ctx->cache_save_at_exit, saves_at_exit);
    wbcl_tensor *t = NULL;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s, WBCL_F32, NULL, &t), WBCL_SUCCESS);
    ck_assert_int_eq(run_axpb(ctx, t, 1, 3), WBCL_SUCCESS);
    ck_assert_int_eq(program_of(ctx, "core")->origin, WBCL_ORIGIN_SOURCE);
    ck_assert_int_eq(wbcl_context_export_binaries(ctx, bins), WBCL_SUCCESS);
    wbcl_tensor_destroy(t);
    wbcl_context_destroy(ctx);
    ck_assert_int_eq(count_bins(cache, first, sizeof first), saves_at_exit);
    ck_assert_int_eq(count_bins(bins, NULL, 0), 1);
    if (!saves_at_exit) {
        /* an explicit wbcl_context_save_cache writes on every device */
        ctx = tu_context();
        ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s, WBCL_F32, NULL, &t), WBCL_SUCCESS);
        ck_assert_int_eq(run_axpb(ctx, t, 1, 3), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_context_save_cache(ctx), WBCL_SUCCESS);
        wbcl_tensor_destroy(t);
        wbcl_context_destroy(ctx);
        ck_assert_int_eq(count_bins(cache, first, sizeof first), 1);
        /* with PoCL's kernel cache off, destroy writes wbcl's */
        setenv("POCL_KERNEL_CACHE", "0", 1);
        ctx = tu_context();
        ck_assert_int_eq(ctx->cache_save_at_exit, 1);
        wbcl_context_destroy(ctx);
        if (kc) setenv("POCL_KERNEL_CACHE", kc, 1);
        else unsetenv("POCL_KERNEL_CACHE");
    }
    /* 2nd: loads from the cache and computes the same */
    ctx = tu_context();
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s, WBCL_F32, NULL, &t), WBCL_SUCCESS);
    ck_assert_int_eq(run_axpb(ctx, t, 1, 3), WBCL_SUCCESS);
    ck_assert_int_eq(program_of(ctx, "core")->origin, WBCL_ORIGIN_CACHE);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t, y, 100), WBCL_SUCCESS);
    for (int i = 0; i < 100; i++) ck_assert(y[i] == 3.0f);
    wbcl_tensor_destroy(t);
    wbcl_context_destroy(ctx);
    /* a corrupted cache entry falls back to building from source */
    write_text(first, "WBCLBIN1 garbage garbage garbage garbage garbage garbage");
    ctx = tu_context();
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s, WBCL_F32, NULL, &t), WBCL_SUCCESS);
    ck_assert_int_eq(run_axpb(ctx, t, 2, 1), WBCL_SUCCESS);
    ck_assert_int_eq(program_of(ctx, "core")->origin, WBCL_ORIGIN_SOURCE);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t, y, 100), WBCL_SUCCESS);
    for (int i = 0; i < 100; i++) ck_assert(y[i] == 1.0f);
    wbcl_tensor_destroy(t);
    wbcl_context_destroy(ctx); /* rewrites the entry where destroy saves */
    /* prebuilt binaries are consulted first, with the disk cache off */
    setenv("WBCL_CACHE_DIR", "off", 1);
    setenv("WBCL_BINARY_DIR", bins, 1);
    ctx = tu_context();
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s, WBCL_F32, NULL, &t), WBCL_SUCCESS);
    ck_assert_int_eq(run_axpb(ctx, t, 1, 5), WBCL_SUCCESS);
    ck_assert_int_eq(program_of(ctx, "core")->origin, WBCL_ORIGIN_BINARY_DIR);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t, y, 100), WBCL_SUCCESS);
    for (int i = 0; i < 100; i++) ck_assert(y[i] == 5.0f);
    wbcl_tensor_destroy(t);
    wbcl_context_destroy(ctx);
    /* an unwritable cache directory is not an error for the computation */
    unsetenv("WBCL_BINARY_DIR");
    setenv("WBCL_CACHE_DIR", "/proc/wbcl-cannot-write-here", 1);
    ctx = tu_context();
    ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s, WBCL_F32, NULL, &t), WBCL_SUCCESS);
    ck_assert_int_eq(run_axpb(ctx, t, 1, 7), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, t, y, 100), WBCL_SUCCESS);
    ck_assert(y[0] == 7.0f);
    ck_assert_int_eq(wbcl_context_save_cache(ctx), WBCL_ERROR_IO);
    wbcl_tensor_destroy(t);
    wbcl_context_destroy(ctx);
}
END_TEST

typedef struct { float out[1000]; wbcl_status st; } thread_job;

static void *thread_main(void *arg)
{
    thread_job *job = arg;
    char err[512];
    wbcl_context *ctx = NULL;
    job->st = wbcl_context_create(getenv("WBCL_TEST_DEVICE"), &ctx, err, sizeof err);
    if (job->st) return NULL;
    float x[1000];
    for (int i = 0; i < 1000; i++) x[i] = (float)i * 0.25f - 7.0f;
    size_t s[1] = {1000};
    wbcl_tensor *t = NULL;
    for (int rep = 0; rep < 20 && !job->st; rep++) {
        job->st = wbcl_tensor_create(ctx, 1, s, WBCL_F32, x, &t);
        if (!job->st) job->st = run_axpb(ctx, t, 1.5f, -0.5f);
        if (!job->st) job->st = wbcl_tensor_read(ctx, t, job->out, 1000);
        wbcl_tensor_destroy(t);
    }
    wbcl_context_destroy(ctx);
    return NULL;
}

START_TEST(two_contexts_in_two_threads)
{
    thread_job a, b;
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, thread_main, &a), 0);
    ck_assert_int_eq(pthread_create(&tb, NULL, thread_main, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert_int_eq(a.st, WBCL_SUCCESS);
    ck_assert_int_eq(b.st, WBCL_SUCCESS);
    for (int i = 0; i < 1000; i++) {
        float want = 1.5f * ((float)i * 0.25f - 7.0f) - 0.5f;
        ck_assert(a.out[i] == want && b.out[i] == want);
    }
}
END_TEST

START_TEST(context_settings)
{
    wbcl_context *ctx = tu_context();
    const wbcl_device_info *d = wbcl_context_device(ctx);
    ck_assert_ptr_nonnull(d);
    ck_assert_str_eq(wbcl_context_last_error(ctx), "");
    ck_assert_int_ne(wbcl_context_variant(ctx), WBCL_VARIANT_AUTO);
    ck_assert_int_ne(wbcl_context_gemm_backend(ctx), WBCL_GEMM_AUTO);
    tu_assert_status(ctx, wbcl_context_set_variant(ctx, (wbcl_variant)9), WBCL_ERROR_INVALID_ARGUMENT, "variant");
    tu_assert_status(ctx, wbcl_context_set_gemm_backend(ctx, (wbcl_gemm_backend)9), WBCL_ERROR_INVALID_ARGUMENT,
                     "backend");
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_variant(ctx), WBCL_VARIANT_GPU);
    if (d->has_profiling) {
        ck_assert_int_eq(wbcl_context_set_timing(ctx, 1), WBCL_SUCCESS);
        size_t s[1] = {1 << 16};
        wbcl_tensor *t = NULL;
        ck_assert_int_eq(wbcl_tensor_create(ctx, 1, s, WBCL_F32, NULL, &t), WBCL_SUCCESS);
        ck_assert_int_eq(run_axpb(ctx, t, 1, 1), WBCL_SUCCESS);
        ck_assert_int_eq(run_axpb(ctx, t, 2, 1), WBCL_SUCCESS);
        ck_assert(wbcl_context_kernel_ns(ctx) > 0);
        /* the per-kernel breakdown: the kernels launched add up to the total */
        const char *name = NULL;
        uint64_t ns = 0, launches = 0, sum = 0, nl = 0;
        size_t i = 0;
        for (; wbcl_context_kernel_profile(ctx, i, &name, &ns, &launches); i++) {
            ck_assert_ptr_nonnull(name);
            sum += ns;
            nl += launches;
        }
        ck_assert_uint_gt(i, 0);
        ck_assert_uint_eq(sum, wbcl_context_kernel_ns(ctx));
        ck_assert_uint_ge(nl, 2);
        ck_assert_int_eq(wbcl_context_kernel_profile(ctx, i, &name, &ns, &launches), 0);
        ck_assert_int_eq(wbcl_context_kernel_profile(NULL, 0, &name, &ns, &launches), 0);
        wbcl_context_reset_kernel_ns(ctx);
        ck_assert(wbcl_context_kernel_ns(ctx) == 0);
        for (i = 0; wbcl_context_kernel_profile(ctx, i, NULL, &ns, &launches); i++)
            ck_assert(ns == 0 && launches == 0);
        wbcl_tensor_destroy(t);
    }
    ck_assert_int_eq(wbcl_context_finish(ctx), WBCL_SUCCESS);
    ck_assert_str_eq(wbcl_status_name(WBCL_ERROR_BUILD), "WBCL_ERROR_BUILD");
    wbcl_context_destroy(ctx);
}
END_TEST

/* $WBCL_VARIANT, read when a context is created: cpu / gpu force the kernel family on any device,
 * auto (and unset, empty) keep it by device type, anything else fails naming the variable and the
 * values; wbcl_context_set_variant still overrides it. No kernels run: contexts only. */
START_TEST(variant_from_environment)
{
    const char *prev = getenv("WBCL_VARIANT");
    char *saved = prev ? strdup(prev) : NULL;
    ck_assert(!prev || saved);
    char err[1024];
    wbcl_variant v = WBCL_VARIANT_AUTO;

    /* names, both ways */
    ck_assert_str_eq(wbcl_variant_name(WBCL_VARIANT_AUTO), "auto");
    ck_assert_str_eq(wbcl_variant_name(WBCL_VARIANT_CPU), "cpu");
    ck_assert_str_eq(wbcl_variant_name(WBCL_VARIANT_GPU), "gpu");
    ck_assert_ptr_null(wbcl_variant_name((wbcl_variant)3));
    ck_assert_int_eq(wbcl_variant_parse("GPU", &v), WBCL_SUCCESS);
    ck_assert_int_eq(v, WBCL_VARIANT_GPU);
    ck_assert_int_eq(wbcl_variant_parse("Auto", &v), WBCL_SUCCESS);
    ck_assert_int_eq(v, WBCL_VARIANT_AUTO);
    v = WBCL_VARIANT_CPU;
    ck_assert_int_eq(wbcl_variant_parse("gpux", &v), WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_variant_parse("", &v), WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_variant_parse(NULL, &v), WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(v, WBCL_VARIANT_CPU); /* untouched */

    /* auto: by device type (what every other suite relies on) */
    ck_assert_int_eq(setenv("WBCL_VARIANT", "auto", 1), 0);
    wbcl_context *ctx = tu_context();
    const wbcl_variant by_type = wbcl_context_device(ctx)->type == WBCL_DEVICE_CPU ? WBCL_VARIANT_CPU : WBCL_VARIANT_GPU;
    const wbcl_variant other = by_type == WBCL_VARIANT_CPU ? WBCL_VARIANT_GPU : WBCL_VARIANT_CPU;
    const wbcl_device_info dev = *wbcl_context_device(ctx);
    ck_assert_int_eq(wbcl_context_variant(ctx), by_type);
    wbcl_context_destroy(ctx);
    ck_assert_int_eq(setenv("WBCL_VARIANT", "", 1), 0); /* empty = unset, as for the other variables */
    ck_assert_int_eq(wbcl_variant_default(&dev, &v, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(v, by_type);
    ck_assert_int_eq(unsetenv("WBCL_VARIANT"), 0);
    ck_assert_int_eq(wbcl_variant_default(&dev, &v, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(v, by_type);

    /* the other family, forced (in capitals too), and set_variant overriding it afterwards */
    ck_assert_int_eq(setenv("WBCL_VARIANT", other == WBCL_VARIANT_GPU ? "GPU" : "CPU", 1), 0);
    ck_assert_int_eq(wbcl_variant_default(&dev, &v, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(v, other);
    ctx = tu_context();
    ck_assert_int_eq(wbcl_context_variant(ctx), other);
    ck_assert_int_eq(wbcl_context_set_variant(ctx, by_type), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_variant(ctx), by_type);
    ck_assert_int_eq(wbcl_context_set_variant(ctx, other), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_AUTO), WBCL_SUCCESS); /* by type, not the env */
    ck_assert_int_eq(wbcl_context_variant(ctx), by_type);
    wbcl_context_destroy(ctx);

    /* the device's own family, forced: the same as by type */
    ck_assert_int_eq(setenv("WBCL_VARIANT", wbcl_variant_name(by_type), 1), 0);
    ctx = tu_context();
    ck_assert_int_eq(wbcl_context_variant(ctx), by_type);
    ck_assert_int_eq(wbcl_context_set_variant(ctx, other), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_variant(ctx), other);
    wbcl_context_destroy(ctx);

    /* anything else: no context, and the message names the variable, the value and the choices */
    static const char *const bad[] = {"fast", "cpu ", "1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(setenv("WBCL_VARIANT", bad[i], 1), 0);
        ctx = (wbcl_context *)0x1;
        err[0] = 0;
        ck_assert_int_eq(wbcl_context_create(getenv("WBCL_TEST_DEVICE"), &ctx, err, sizeof err),
                         WBCL_ERROR_INVALID_ARGUMENT);
        ck_assert_ptr_null(ctx);
        char quoted[32];
        snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
        ck_assert_msg(strstr(err, "WBCL_VARIANT") && strstr(err, quoted) && strstr(err, "cpu, gpu or auto"),
                      "message for WBCL_VARIANT=%s: '%s'", bad[i], err);
        char err2[1024] = "";
        v = WBCL_VARIANT_CPU;
        ck_assert_int_eq(wbcl_variant_default(&dev, &v, err2, sizeof err2), WBCL_ERROR_INVALID_ARGUMENT);
        ck_assert_str_eq(err2, err);
        ck_assert_int_eq(v, WBCL_VARIANT_CPU);
    }
    ck_assert_int_eq(wbcl_variant_default(NULL, &v, err, sizeof err), WBCL_ERROR_INVALID_ARGUMENT);

    if (saved) ck_assert_int_eq(setenv("WBCL_VARIANT", saved, 1), 0);
    else ck_assert_int_eq(unsetenv("WBCL_VARIANT"), 0);
    free(saved);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("core");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, device_list_and_select);
    tcase_add_test(tc, reqd_work_group_size_fit);
    tcase_add_test(tc, tensor_roundtrip_fill_copy_reshape);
    tcase_add_test(tc, tensor_bad_input);
    tcase_add_test(tc, broken_kernel_source_reports_build_log);
    tcase_add_test(tc, disk_cache_and_prebuilt_binaries);
    tcase_add_test(tc, two_contexts_in_two_threads);
    tcase_add_test(tc, context_settings);
    tcase_add_test(tc, variant_from_environment);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
