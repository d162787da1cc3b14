/* Tuned kernel parameters (include/wbcl/tuning.h) and wbcl-tune's engine (host/core/tuner.c): a
 * tuning run writes a table that a new context loads and whose kernels give the reference
 * results; corrupt, stale and out-of-limit tables are reported and ignored, never a failure.
 * Cost: the GEMM and attention programs of the defaults plus one non-default specialization
 * of each (a few PoCL compilations); everything else is parsing. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blas.h"
#include "internal.h"
#include "testutil.h"
#include "wbcl/wbcl.h"

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/wbcl-tune-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    fclose(f);
}

/* A context with no table at all: the defaults. */
static wbcl_context *plain_context(void)
{
    setenv("WBCL_TUNING", "off", 1);
    wbcl_context *ctx = tu_context();
    unsetenv("WBCL_TUNING");
    return ctx;
}

/* A context loading `path` through $WBCL_TUNING. */
static wbcl_context *context_with(const char *path)
{
    setenv("WBCL_TUNING", path, 1);
    wbcl_context *ctx = tu_context();
    unsetenv("WBCL_TUNING");
    return ctx;
}

/* The header of a valid table for ctx's device and variant, with one header line replaced
 * (key `swap`, NULL for none) by `swap_value`. */
static void header(const wbcl_context *ctx, char *buf, size_t len, const char *swap, const char *swap_value)
{
    const wbcl_device_info *d = wbcl_context_device(ctx);
    const char *keys[4] = {"device", "vendor", "driver", "variant"};
    const char *vals[4] = {d->name, d->vendor, d->driver_version, wbcl_variant_name(wbcl_context_variant(ctx))};
    size_t n = (size_t)snprintf(buf, len, "# test table\nformat = wbcl-tuning-1\n");
    for (int i = 0; i < 4; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s = %s\n", keys[i], swap && !strcmp(swap, keys[i]) ? swap_value : vals[i]);
}

/* The key = value lines of a table file, for comparing with what a context uses. */
typedef struct kv { char key[48]; long value; } kv;
static size_t read_params(const char *path, kv *out, size_t max)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    size_t n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        char key[48];
        long v;
        if (line[0] != '#' && sscanf(line, "%47[a-zA-Z0-9_.] = %ld", key, &v) == 2 && strchr(key, '.')) {
            snprintf(out[n].key, sizeof out[n].key, "%s", key);
            out[n++].value = v;
        }
    }
    fclose(f);
    return n;
}

/* The two checks below, GEMM (N, T) and fused attention (p = 64), against the double reference.
 * Tolerances: GEMM k = 67 terms of O(1) products, float32 rounding ~ k * 6e-8 of
 * the O(8) entries: atol = rtol = 1e-4 leaves margin and still catches any wrong index (O(1));
 * attention outputs are convex combinations of values in [-1, 1], online softmax in float32
 * with a 2^x polynomial of relative error ~2e-7: atol 1e-5, rtol 1e-4. */
/* C = A Bᵀ on 53 x 70 x 67 through ctx's GEMM backend: the status, and on success the reference product. */
static wbcl_status small_gemm(wbcl_context *ctx, const char *what)
{
    tu_rng r;
    tu_rng_seed(&r, 79);
    const size_t m = 53, n = 70, k = 67, sa[2] = {m, k}, sb[2] = {n, k}, sc[2] = {m, n};
    float *a = tu_random_f32(&r, m * k, -1, 1), *b = tu_random_f32(&r, n * k, -1, 1), *c = malloc(m * n * 4);
    double *ad = tu_to_f64(a, m * k), *bd = tu_to_f64(b, n * k), *cd = malloc(m * n * 8);
    wbcl_tensor *A, *B, *C;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sa, WBCL_F32, a, &A), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sb, WBCL_F32, b, &B), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sc, WBCL_F32, NULL, &C), WBCL_SUCCESS);
    const wbcl_status st = wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_TRANS, 1.0f, A, B, 0.0f, C);
    if (st == WBCL_SUCCESS) {
        ck_assert_int_eq(wbcl_tensor_read(ctx, C, c, m * n), WBCL_SUCCESS);
        wbcl_ref_gemm(0, 1, m, n, k, 1.0, ad, k, bd, k, 0.0, cd, n);
        tu_assert_close(c, cd, m * n, 1e-4, 1e-4, what);
    }
    wbcl_tensor_destroy(A);
    wbcl_tensor_destroy(B);
    wbcl_tensor_destroy(C);
    free(a), free(b), free(c), free(ad), free(bd), free(cd);
    return st;
}

/* Softmax attention B1 K2 N45 p64 on ctx, causal or not: the status, and on success the reference result. */
static wbcl_status small_attention(wbcl_context *ctx, int causal, const char *what)
{
    tu_rng r;
    tu_rng_seed(&r, 80);
    const size_t B = 1, K = 2, N = 45, p = 64, n = B * K * N * p, sh[4] = {B, K, N, p};
    float *h[3], *o = malloc(n * 4);
    double *d[3], *od = malloc(n * 8);
    wbcl_tensor *t[4];
    for (int i = 0; i < 3; i++) {
        h[i] = tu_random_f32(&r, n, -1, 1);
        d[i] = tu_to_f64(h[i], n);
        ck_assert_int_eq(wbcl_tensor_create(ctx, 4, sh, WBCL_F32, h[i], &t[i]), WBCL_SUCCESS);
    }
    ck_assert_int_eq(wbcl_tensor_create(ctx, 4, sh, WBCL_F32, NULL, &t[3]), WBCL_SUCCESS);
    const wbcl_status st = wbcl_attention_softmax_heads(ctx, t[0], t[1], t[2], 0.125f, causal, t[3]);
    if (st == WBCL_SUCCESS) {
        ck_assert_int_eq(wbcl_tensor_read(ctx, t[3], o, n), WBCL_SUCCESS);
        wbcl_ref_attention_heads(B, K, N, N, p, d[0], d[1], d[2], 0.125, causal, od);
        tu_assert_close(o, od, n, 1e-5, 1e-4, what);
    }
    for (int i = 0; i < 4; i++) wbcl_tensor_destroy(t[i]);
    for (int i = 0; i < 3; i++) free(h[i]), free(d[i]);
    free(o), free(od);
    return st;
}

/* Both on ctx, attention softmax and causal: each must run and give the reference. */
static void check_kernels(wbcl_context *ctx)
{
    ck_assert_int_eq(small_gemm(ctx, "GEMM with the table's parameters"), WBCL_SUCCESS);
    ck_assert_int_eq(small_attention(ctx, 0, "attention with the table's parameters"), WBCL_SUCCESS);
    ck_assert_int_eq(small_attention(ctx, 1, "causal attention with the table's parameters"), WBCL_SUCCESS);
}

/* A tuning run with no budget (the defaults measured, nothing else tried) on the tiny shapes
 * writes the device's file in the cache directory; a new context (no $WBCL_TUNING) loads it:
 * every parameter of the file is in use, from the cache file, and the kernels are right. */
START_TEST(tuning_run_writes_a_table_a_context_loads)
{
    make_tmpdir();
    setenv("WBCL_CACHE_DIR", tmpdir, 1);
    unsetenv("WBCL_TUNING");
    wbcl_tune_opts o;
    memset(&o, 0, sizeof o);
    o.budget_s = 0;
    o.quick = 1;
    char path[4096];
    ck_assert_int_eq(wbcl_tune_run(&o, NULL, path, sizeof path), WBCL_SUCCESS);
    ck_assert_msg(strncmp(path, tmpdir, strlen(tmpdir)) == 0, "table written to '%s', not the cache dir", path);
    kv p[32];
    const size_t np = read_params(path, p, 32);
    ck_assert_uint_ge(np, 4); /* gemm.mr, gemm.nr and the attention keys */

    wbcl_context *ctx = tu_context();
    char want[4096];
    ck_assert_int_eq(wbcl_tuning_path(ctx, want, sizeof want), WBCL_SUCCESS);
    ck_assert_str_eq(want, path);
    const char *origin;
    ck_assert_int_eq(wbcl_context_tuning_source(ctx, &origin), WBCL_PARAM_CACHE);
    ck_assert_str_eq(origin, path);
    ck_assert_str_eq(wbcl_context_tuning_notes(ctx), "");
    for (size_t i = 0; i < np; i++) {
        long v = -1;
        wbcl_param_source s = WBCL_PARAM_DEFAULT;
        ck_assert_int_eq(wbcl_context_param_get(ctx, p[i].key, &v, &s), WBCL_SUCCESS);
        ck_assert_msg(v == p[i].value && s == WBCL_PARAM_CACHE, "%s: in use %ld from %s, file %ld", p[i].key, v,
                      wbcl_param_source_name(s), p[i].value);
    }
    check_kernels(ctx);
    wbcl_context_destroy(ctx);
    unlink(path);
}
END_TEST

/* A table of non-default values (as a tuning run that found winners writes it), named by
 * $WBCL_TUNING: its values are in use, listed with their source, and the kernels built with
 * them agree with the reference. */
START_TEST(non_default_table_is_used_and_correct)
{
    make_tmpdir();
    wbcl_context *ctx = plain_context();
    long mr, qb;
    ck_assert_int_eq(wbcl_context_param_get(ctx, "gemm.mr", &mr, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p64.qb", &qb, NULL), WBCL_SUCCESS);
    const long mr2 = mr == 8 ? 6 : 8, qb2 = qb == 2 ? 3 : 2;
    ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.mr", mr2), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.p64.qb", qb2), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.p64.g", 1), WBCL_SUCCESS);
    char path[512];
    snprintf(path, sizeof path, "%s/sub/table.txt", tmpdir);
    ck_assert_int_eq(wbcl_context_save_params(ctx, path, "test table\nsecond line"), WBCL_SUCCESS);
    wbcl_context_destroy(ctx);

    ctx = context_with(path);
    ck_assert_int_eq(wbcl_context_tuning_source(ctx, NULL), WBCL_PARAM_ENV);
    ck_assert_str_eq(wbcl_context_tuning_notes(ctx), "");
    long v;
    wbcl_param_source s;
    ck_assert_int_eq(wbcl_context_param_get(ctx, "gemm.mr", &v, &s), WBCL_SUCCESS);
    ck_assert_int_eq(v, mr2);
    ck_assert_int_eq(s, WBCL_PARAM_ENV);
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p64.qb", &v, &s), WBCL_SUCCESS);
    ck_assert_int_eq(v, qb2);
    ck_assert_int_eq(s, WBCL_PARAM_ENV);
    /* scoped to p = 64: other head dimensions keep their default */
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p32.g", &v, &s), WBCL_SUCCESS);
    ck_assert_int_eq(s, WBCL_PARAM_DEFAULT);
    /* the listing shows the scoped entry with its origin */
    int listed = 0;
    wbcl_param_info pi;
    for (size_t i = 0; wbcl_context_param(ctx, i, &pi); i++)
        if (!strcmp(pi.key, "attention.p64.qb")) {
            listed = 1;
            ck_assert_int_eq(pi.value, qb2);
            ck_assert_int_eq(pi.source, WBCL_PARAM_ENV);
            ck_assert_str_eq(pi.origin, path);
        }
    ck_assert_msg(listed, "attention.p64.qb not listed by wbcl_context_param");
    check_kernels(ctx);
    /* the other kernel variant: the table (for this variant) no longer applies */
    const wbcl_variant other = wbcl_context_variant(ctx) == WBCL_VARIANT_CPU ? WBCL_VARIANT_GPU : WBCL_VARIANT_CPU;
    ck_assert_int_eq(wbcl_context_set_variant(ctx, other), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_param_get(ctx, "gemm.mr", &v, &s), WBCL_SUCCESS);
    ck_assert_int_eq(s, WBCL_PARAM_DEFAULT);
    wbcl_context_destroy(ctx);
}
END_TEST

/* Launches of the kernel `name` since the last reset (timing on). */
#define launches_of tu_launches

/* gemm.backend: a table picks a device's GEMM backend (issue 17: per device, decided by
 * measurement). A context's key, or a table file carrying it, selects the backend that runs
 * (the tiled kernel's launches counted, its product against the reference); an explicit
 * wbcl_context_set_gemm_backend wins over the key until it is set back to AUTO; resetting the
 * parameters restores the device-type default; values outside 1..3 are refused. */
START_TEST(gemm_backend_from_the_table)
{
    make_tmpdir();
    wbcl_context *ctx = plain_context();
    const wbcl_gemm_backend dflt = wbcl_context_gemm_backend(ctx);
    long v;
    ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.backend", WBCL_GEMM_TILED), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_gemm_backend(ctx), WBCL_GEMM_TILED);
    if (wbcl_context_device(ctx)->has_profiling) {
        ck_assert_int_eq(wbcl_context_set_timing(ctx, 1), WBCL_SUCCESS);
        wbcl_context_reset_kernel_ns(ctx);
        check_kernels(ctx);
        ck_assert_uint_eq(launches_of(ctx, "wbcl_gemm_tiled"), 1);
        ck_assert_uint_eq(launches_of(ctx, "wbcl_gemm_packed"), 0);
        ck_assert_int_eq(wbcl_context_set_timing(ctx, 0), WBCL_SUCCESS);
    }
    /* explicit wins over the key, AUTO gives the key back */
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_PACKED), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.backend", WBCL_GEMM_CLBLAST), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_gemm_backend(ctx), WBCL_GEMM_PACKED);
    ck_assert_int_eq(wbcl_context_param_get(ctx, "gemm.backend", &v, NULL), WBCL_SUCCESS);
    ck_assert_int_eq(v, WBCL_GEMM_PACKED); /* the value in use */
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_AUTO), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_gemm_backend(ctx), WBCL_GEMM_CLBLAST);
    /* out of range */
    tu_assert_status(ctx, wbcl_context_set_param(ctx, "gemm.backend", 4), WBCL_ERROR_INVALID_ARGUMENT, "gemm.backend");
    tu_assert_status(ctx, wbcl_context_set_param(ctx, "gemm.backend", 0), WBCL_ERROR_INVALID_ARGUMENT, "gemm.backend");
    ck_assert_int_eq(wbcl_context_gemm_backend(ctx), WBCL_GEMM_CLBLAST);
    /* a table file carrying the key */
    ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.backend", WBCL_GEMM_TILED), WBCL_SUCCESS);
    char path[512];
    snprintf(path, sizeof path, "%s/backend.txt", tmpdir);
    ck_assert_int_eq(wbcl_context_save_params(ctx, path, "gemm.backend test"), WBCL_SUCCESS);
    wbcl_context_destroy(ctx);
    ctx = context_with(path);
    ck_assert_str_eq(wbcl_context_tuning_notes(ctx), "");
    ck_assert_int_eq(wbcl_context_gemm_backend(ctx), WBCL_GEMM_TILED);
    wbcl_param_source s;
    ck_assert_int_eq(wbcl_context_param_get(ctx, "gemm.backend", &v, &s), WBCL_SUCCESS);
    ck_assert_int_eq(v, WBCL_GEMM_TILED);
    ck_assert_int_eq(s, WBCL_PARAM_ENV);
    check_kernels(ctx);
    ck_assert_int_eq(wbcl_context_reset_params(ctx), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_gemm_backend(ctx), dflt);
    wbcl_context_destroy(ctx);

    /* wbcl-tune --op gemm_backend: every backend checked against the reference and timed; the
     * table names one, which a new context then uses */
    wbcl_tune_opts o;
    memset(&o, 0, sizeof o);
    o.family = "gemm_backend";
    o.budget_s = 60;
    o.quick = 1;
    snprintf(path, sizeof path, "%s/backend-tuned.txt", tmpdir);
    o.out = path;
    ck_assert_int_eq(wbcl_tune_run(&o, NULL, NULL, 0), WBCL_SUCCESS);
    kv p[4];
    ck_assert_uint_eq(read_params(path, p, 4), 1);
    ck_assert_str_eq(p[0].key, "gemm.backend");
    ck_assert(p[0].value >= WBCL_GEMM_PACKED && p[0].value <= WBCL_GEMM_TILED);
    ctx = context_with(path);
    ck_assert_int_eq(wbcl_context_gemm_backend(ctx), (wbcl_gemm_backend)p[0].value);
    wbcl_context_destroy(ctx);
}
END_TEST

/* CLBlast's Xgemm parameters and its direct/indirect threshold from a context's keys
 * (clblast.*, host/core/blas.c): a context with a valid set runs CLBlast with it (CLBlast's
 * current values read back after the call) and gets the reference GEMM; a context without
 * keys on the same device gets CLBlast's own values back; an invalid set is noted and
 * CLBlast's values used; a table file carrying the keys is loaded without notes. One CLBlast
 * compilation per parameter set (a few seconds each on PoCL). */
static const long xg_set[WBCL_CLBLAST_XGEMM_N] = {0, 1, 16, 2, 8, 8, 32, 8, 8, 32, 1, 1, 0, 0, 2, 2};

static void clblast_current(wbcl_context *ctx, size_t *v)
{
    ck_assert_int_eq(wbcl__clblast_retrieve(ctx->device, "Xgemm", WBCL_CLBLAST_XGEMM_N, wbcl__clblast_xgemm_names, v),
                     0);
}

static void check_clblast_gemm(wbcl_context *ctx, const char *what)
{
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_CLBLAST), WBCL_SUCCESS);
    tu_rng r;
    tu_rng_seed(&r, 78);
    const size_t m = 53, n = 70, k = 67, sa[2] = {m, k}, sb[2] = {n, k}, sc[2] = {m, n};
    float *a = tu_random_f32(&r, m * k, -1, 1), *b = tu_random_f32(&r, n * k, -1, 1), *c0 = tu_random_f32(&r, m * n, -1, 1);
    float *c = malloc(m * n * 4);
    double *ad = tu_to_f64(a, m * k), *bd = tu_to_f64(b, n * k), *cd = tu_to_f64(c0, m * n);
    wbcl_tensor *A, *B, *C;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sa, WBCL_F32, a, &A), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sb, WBCL_F32, b, &B), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, sc, WBCL_F32, c0, &C), WBCL_SUCCESS);
    /* C = 0.5 A Bᵀ - 2 C: the transposed B and beta exercise the padding and the epilogue */
    ck_assert_int_eq(wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_TRANS, 0.5f, A, B, -2.0f, C), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_read(ctx, C, c, m * n), WBCL_SUCCESS);
    wbcl_ref_gemm(0, 1, m, n, k, 0.5, ad, k, bd, k, -2.0, cd, n);
    tu_assert_close(c, cd, m * n, 1e-4, 1e-4, what);
    wbcl_tensor_destroy(A);
    wbcl_tensor_destroy(B);
    wbcl_tensor_destroy(C);
    free(a), free(b), free(c0), free(c), free(ad), free(bd), free(cd);
}

START_TEST(clblast_parameters_follow_the_context)
{
    make_tmpdir();
    wbcl_context *plain = plain_context(), *tuned = plain_context();
    size_t own[WBCL_CLBLAST_XGEMM_N], cur[WBCL_CLBLAST_XGEMM_N];
    clblast_current(plain, own);
    long v;
    wbcl_param_source src;
    ck_assert_int_eq(wbcl_context_param_get(plain, "clblast.xgemm.MWG", &v, &src), WBCL_SUCCESS);
    ck_assert_int_eq(v, (long)own[6]);
    ck_assert_int_eq(src, WBCL_PARAM_DEFAULT);
    int differs = 0;
    for (int i = 0; i < WBCL_CLBLAST_XGEMM_N; i++) differs |= (long)own[i] != xg_set[i];
    ck_assert_msg(differs, "the test's set equals CLBlast's own values on this device: pick another");
    char key[64];
    for (int i = 0; i < WBCL_CLBLAST_XGEMM_N; i++) {
        snprintf(key, sizeof key, "clblast.xgemm.%s", wbcl__clblast_xgemm_names[i]);
        ck_assert_int_eq(wbcl_context_set_param(tuned, key, xg_set[i]), WBCL_SUCCESS);
    }
    /* threshold 1: every size takes the Xgemm kernel the set configures */
    ck_assert_int_eq(wbcl_context_set_param(tuned, "clblast.gemm.min_indirect", 1), WBCL_SUCCESS);
    check_clblast_gemm(tuned, "CLBlast GEMM with the context's Xgemm set");
    clblast_current(tuned, cur);
    for (int i = 0; i < WBCL_CLBLAST_XGEMM_N; i++) ck_assert_int_eq((long)cur[i], xg_set[i]);
    ck_assert_str_eq(wbcl_context_tuning_notes(tuned), "");
    /* the context without keys, same device: CLBlast's own values again */
    check_clblast_gemm(plain, "CLBlast GEMM with CLBlast's own parameters");
    clblast_current(plain, cur);
    for (int i = 0; i < WBCL_CLBLAST_XGEMM_N; i++) ck_assert_int_eq(cur[i], own[i]);
    /* the set saved to a table and loaded by a new context: no notes, the set in use */
    char path[512];
    snprintf(path, sizeof path, "%s/clblast.txt", tmpdir);
    ck_assert_int_eq(wbcl_context_save_params(tuned, path, NULL), WBCL_SUCCESS);
    wbcl_context *loaded = context_with(path);
    ck_assert_str_eq(wbcl_context_tuning_notes(loaded), "");
    ck_assert_int_eq(wbcl_context_param_get(loaded, "clblast.xgemm.KWG", &v, &src), WBCL_SUCCESS);
    ck_assert_int_eq(v, xg_set[2]);
    ck_assert_int_eq(src, WBCL_PARAM_ENV);
    check_clblast_gemm(loaded, "CLBlast GEMM with the loaded table's Xgemm set");
    clblast_current(loaded, cur);
    for (int i = 0; i < WBCL_CLBLAST_XGEMM_N; i++) ck_assert_int_eq((long)cur[i], xg_set[i]);
    wbcl_context_destroy(loaded);
    /* each value in range, the set invalid (MWG 40 is no multiple of MDIMC*VWM = 16): noted,
     * CLBlast's own values used, results right */
    ck_assert_int_eq(wbcl_context_set_param(tuned, "clblast.xgemm.MWG", 40), WBCL_SUCCESS);
    check_clblast_gemm(tuned, "CLBlast GEMM after an invalid Xgemm set");
    clblast_current(tuned, cur);
    for (int i = 0; i < WBCL_CLBLAST_XGEMM_N; i++) ck_assert_int_eq(cur[i], own[i]);
    ck_assert_ptr_nonnull(strstr(wbcl_context_tuning_notes(tuned), "clblast.xgemm.* rejected"));
    ck_assert_ptr_nonnull(strstr(wbcl_context_tuning_notes(tuned), "MWG 40"));
    /* a value out of its own range is refused when set */
    ck_assert_int_eq(wbcl_context_set_param(tuned, "clblast.xgemm.VWM", 3), WBCL_ERROR_INVALID_ARGUMENT);
    wbcl_context_destroy(tuned);
    wbcl_context_destroy(plain);
}
END_TEST

/* wbcl-tune's clblast families (quick: CLBlast's own set and one other, then two thresholds)
 * write all 17 clblast.* keys; a context loading the table runs CLBlast with them, without
 * notes, and gets the reference GEMM. */
START_TEST(clblast_tuning_writes_a_set_a_context_uses)
{
    make_tmpdir();
    unsetenv("WBCL_TUNING");
    char out[512], path[4096];
    snprintf(out, sizeof out, "%s/clblast-tuned.txt", tmpdir);
    wbcl_tune_opts o;
    memset(&o, 0, sizeof o);
    o.family = "clblast";
    o.budget_s = 120;
    o.quick = 1;
    o.out = out;
    ck_assert_int_eq(wbcl_tune_run(&o, NULL, path, sizeof path), WBCL_SUCCESS);
    ck_assert_str_eq(path, out);
    kv p[32];
    const size_t np = read_params(path, p, 32);
    ck_assert_uint_eq(np, WBCL_CLBLAST_XGEMM_N + 1);
    wbcl_context *ctx = context_with(path);
    ck_assert_str_eq(wbcl_context_tuning_notes(ctx), "");
    check_clblast_gemm(ctx, "CLBlast GEMM with the tuned table");
    size_t cur[WBCL_CLBLAST_XGEMM_N];
    clblast_current(ctx, cur);
    for (size_t i = 0; i < np; i++)
        for (int j = 0; j < WBCL_CLBLAST_XGEMM_N; j++)
            if (!strcmp(p[i].key + 14, wbcl__clblast_xgemm_names[j]) && !strncmp(p[i].key, "clblast.xgemm.", 14))
                ck_assert_msg((long)cur[j] == p[i].value, "%s: CLBlast runs %zu, the table says %ld", p[i].key, cur[j],
                              p[i].value);
    wbcl_context_destroy(ctx);
    unlink(path);
}
END_TEST

/* Corrupt and stale tables are rejected as a whole with a note naming the file and the
 * reason; the context opens and uses another source (never $WBCL_TUNING's). */
START_TEST(corrupt_and_stale_tables_are_reported_and_ignored)
{
    make_tmpdir();
    wbcl_context *base = plain_context();
    char hdr[2048], text[4096], path[512];
    struct { const char *name, *swap, *value, *body, *why; } cases[] = {
        {"garbage", NULL, NULL, NULL, "not 'key = value'"},
        {"binary", NULL, NULL, NULL, "NUL byte"},
        {"empty", NULL, NULL, NULL, "empty"},
        {"no-format", NULL, NULL, NULL, "format"},
        {"stale-driver", "driver", "0.0-stale", "gemm.mr = 8\n", "driver"},
        {"other-device", "device", "Some Other GPU", "gemm.mr = 8\n", "device"},
        {"other-vendor", "vendor", "Nobody Inc.", "gemm.mr = 8\n", "vendor"},
        {"other-variant", "variant", NULL, "gemm.mr = 8\n", "variant"},
        {"missing", NULL, NULL, NULL, "cannot read"},
    };
    const char *other_variant = wbcl_context_variant(base) == WBCL_VARIANT_CPU ? "gpu" : "cpu";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(path, sizeof path, "%s/%s.txt", tmpdir, cases[i].name);
        size_t len;
        if (!strcmp(cases[i].name, "garbage")) len = (size_t)snprintf(text, sizeof text, "format = wbcl-tuning-1\n\x7f\x45LF junk\n");
        else if (!strcmp(cases[i].name, "binary")) {
            memcpy(text, "format = wbcl-tuning-1\n\0\0\x01\x02", 27);
            len = 27;
        } else if (!strcmp(cases[i].name, "empty")) len = 0;
        else if (!strcmp(cases[i].name, "no-format")) len = (size_t)snprintf(text, sizeof text, "gemm.mr = 8\n");
        else if (!strcmp(cases[i].name, "missing")) len = (size_t)-1;
        else {
            header(base, hdr, sizeof hdr, cases[i].swap, cases[i].value ? cases[i].value : other_variant);
            len = (size_t)snprintf(text, sizeof text, "%s%s", hdr, cases[i].body);
        }
        if (len != (size_t)-1) write_text(path, text, len);
        wbcl_context *ctx = context_with(path);
        ck_assert_int_ne(wbcl_context_tuning_source(ctx, NULL), WBCL_PARAM_ENV);
        const char *notes = wbcl_context_tuning_notes(ctx);
        ck_assert_msg(strstr(notes, path) && strstr(notes, cases[i].why), "%s: notes '%s' lack the path or '%s'",
                      cases[i].name, notes, cases[i].why);
        wbcl_param_source s;
        ck_assert_int_eq(wbcl_context_param_get(ctx, "gemm.mr", NULL, &s), WBCL_SUCCESS);
        ck_assert_int_ne(s, WBCL_PARAM_ENV);
        wbcl_context_destroy(ctx);
    }
    wbcl_context_destroy(base);
}
END_TEST

/* Inside an accepted table, each malformed, unknown, duplicated or out-of-limit key is dropped
 * with a note naming it (its default stays), and the valid keys are used. The same values
 * given to wbcl_context_set_param fail with a message and change nothing. */
START_TEST(out_of_limit_values_are_reported_and_ignored)
{
    make_tmpdir();
    wbcl_context *base = plain_context();
    const wbcl_device_info *d = wbcl_context_device(base);
    long mr0;
    ck_assert_int_eq(wbcl_context_param_get(base, "gemm.mr", &mr0, NULL), WBCL_SUCCESS);
    const long mr = mr0 == 8 ? 6 : 8;
    char hdr[2048], text[8192], path[512];
    header(base, hdr, sizeof hdr, NULL, NULL);
    /* local memory: 2 * 256 keys * p 4096 floats = 8 MiB of K/V tiles, beyond any device's half */
    snprintf(text, sizeof text,
             "%sgemm.mr = %ld\ngemm.mr = 3\ngemm.nr = 24\ncore.wg = %zu\nreduce.wg = 48\nattention.p64.vw = 5\n"
             "attention.p4096.bk = 256\nattention.p0.qb = 2\nattention.g = 17\ngemm.a_block_kib = 12x\n"
             "no.such.key = 1\n",
             hdr, mr, d->max_work_group_size + 1);
    snprintf(path, sizeof path, "%s/limits.txt", tmpdir);
    write_text(path, text, strlen(text));
    wbcl_context *ctx = context_with(path);
    ck_assert_int_eq(wbcl_context_tuning_source(ctx, NULL), WBCL_PARAM_ENV);
    long v;
    wbcl_param_source s;
    ck_assert_int_eq(wbcl_context_param_get(ctx, "gemm.mr", &v, &s), WBCL_SUCCESS);
    ck_assert_int_eq(v, mr); /* the first of the duplicated keys */
    ck_assert_int_eq(s, WBCL_PARAM_ENV);
    const char *notes = wbcl_context_tuning_notes(ctx);
    const char *keys[] = {"'gemm.mr' given twice", "'gemm.nr' = 24", "'core.wg'", "'reduce.wg' = 48",
                          "'attention.p64.vw' = 5", "'attention.p4096.bk' = 256", "'attention.p0.qb'",
                          "'attention.g' = 17", "'gemm.a_block_kib' = '12x'", "'no.such.key'", "local memory",
                          "maximum work-group size", "power of two"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(strstr(notes, keys[i]) != NULL, "notes lack \"%s\":\n%s", keys[i], notes);
    const char *dropped[] = {"gemm.nr", "core.wg", "reduce.wg", "attention.p64.vw", "attention.g", "gemm.a_block_kib"};
    for (size_t i = 0; i < sizeof dropped / sizeof dropped[0]; i++) {
        ck_assert_int_eq(wbcl_context_param_get(ctx, dropped[i], NULL, &s), WBCL_SUCCESS);
        ck_assert_msg(s == WBCL_PARAM_DEFAULT, "%s: source %s", dropped[i], wbcl_param_source_name(s));
    }
    wbcl_context_destroy(ctx);

    /* the API refuses the same values */
    tu_assert_status(base, wbcl_context_set_param(base, "gemm.nr", 24), WBCL_ERROR_INVALID_ARGUMENT, "gemm.nr");
    tu_assert_status(base, wbcl_context_set_param(base, "core.wg", (long)d->max_work_group_size + 1),
                     WBCL_ERROR_DEVICE_LIMIT, "maximum work-group size");
    tu_assert_status(base, wbcl_context_set_param(base, "attention.p4096.bk", 256), WBCL_ERROR_DEVICE_LIMIT,
                     "local memory");
    tu_assert_status(base, wbcl_context_set_param(base, "gemm.bogus", 1), WBCL_ERROR_INVALID_ARGUMENT, "gemm.bogus");
    ck_assert_int_eq(wbcl_context_param_get(base, "gemm.nr", NULL, &s), WBCL_SUCCESS);
    ck_assert_int_eq(s, WBCL_PARAM_DEFAULT);
    wbcl_context_destroy(base);
}
END_TEST

/* Every table shipped in the library (host/core/tuning_tables.c) loads cleanly: its keys under this
 * device's header (a shipped header names the device it was measured on) give no note, and every key
 * is used at the table's value (source WBCL_TUNING). A misspelt key or an out-of-range value in a
 * shipped table would otherwise only show as a note on the device it was written for. */
START_TEST(shipped_tables_load_cleanly)
{
    make_tmpdir();
    wbcl_context *base = plain_context();
    const char *name, *text;
    size_t tables = 0;
    for (size_t t = 0; (text = wbcl__shipped_table(t, &name)) != NULL; t++, tables++) {
        char hdr[2048], body[8192] = "", path[512];
        header(base, hdr, sizeof hdr, NULL, NULL);
        /* the table's key lines (a '.' in the key: not format, device, vendor, driver, variant, wbcl) */
        size_t bn = 0, nkeys = 0;
        for (const char *line = text; *line;) {
            const char *nl = strchr(line, '\n');
            const size_t len = nl ? (size_t)(nl - line) : strlen(line);
            const char *eq = memchr(line, '=', len), *dot = memchr(line, '.', len);
            /* register caps (*.maxrreg) are for NVIDIA's compiler: a device without its options refuses them */
            int cap_key = 0;
            for (const char *c = line; eq && c + 7 <= eq; c++) cap_key |= !strncmp(c, "maxrreg", 7);
            if (cap_key && !wbcl_context_device(base)->has_nv_compiler_options) eq = NULL;
            if (line[0] != '#' && eq && dot && dot < eq) {
                ck_assert_uint_lt(bn + len + 2, sizeof body);
                memcpy(body + bn, line, len);
                bn += len;
                body[bn++] = '\n';
                body[bn] = 0;
                nkeys++;
            }
            line += len + (nl ? 1 : 0);
        }
        ck_assert_msg(nkeys > 0, "shipped table %s has no keys", name);
        snprintf(path, sizeof path, "%s/shipped-%zu.txt", tmpdir, t);
        char all[10240];
        const size_t n = (size_t)snprintf(all, sizeof all, "%s%s", hdr, body);
        write_text(path, all, n);
        wbcl_context *ctx = context_with(path);
        const char *notes = wbcl_context_tuning_notes(ctx);
        ck_assert_msg(!notes || !*notes, "shipped table %s: notes '%s'", name, notes ? notes : "");
        kv want[64];
        const size_t nk = read_params(path, want, 64);
        ck_assert_uint_eq(nk, nkeys);
        for (size_t i = 0; i < nk; i++) {
            long v;
            wbcl_param_source src;
            ck_assert_int_eq(wbcl_context_param_get(ctx, want[i].key, &v, &src), WBCL_SUCCESS);
            ck_assert_msg(src == WBCL_PARAM_ENV && v == want[i].value, "shipped table %s: %s = %ld (source %s), want %ld",
                          name, want[i].key, v, wbcl_param_source_name(src), want[i].value);
        }
        wbcl_context_destroy(ctx);
    }
    ck_assert_uint_ge(tables, 3);
    wbcl_context_destroy(base);
}
END_TEST

/* The register caps gemm.tiled.maxrreg and attention.maxrreg (-cl-nv-maxrregcount: NVIDIA's compiler
 * only, cl_nv_compiler_options). On a device without the extension (PoCL) a cap is refused with a message
 * naming it, and 0 (no cap) is accepted; then the extension is pretended (ctx->info) so that a cap is
 * accepted, and PoCL, which takes no such option, refuses the build of the programs it reaches: the
 * build error names the option, which shows it was passed (on NVIDIA they build and give the reference).
 * The CPU-shaped attention program (pretended case only) and the packed GEMM are built without the cap
 * and give the reference; back at 0 the tiled GEMM and the GPU-shaped attention do too. Last:
 * attention.sp, not set itself, reports the source of the QB it follows where that QB moved it. */
START_TEST(register_caps_reach_only_their_programs)
{
    wbcl_context *ctx = plain_context();
    const int nv = wbcl_context_device(ctx)->has_nv_compiler_options;
    if (!nv) {
        tu_assert_status(ctx, wbcl_context_set_param(ctx, "gemm.tiled.maxrreg", 128), WBCL_ERROR_UNSUPPORTED,
                         "cl_nv_compiler_options");
        tu_assert_status(ctx, wbcl_context_set_param(ctx, "attention.p64.maxrreg", 128), WBCL_ERROR_UNSUPPORTED,
                         "cl_nv_compiler_options");
        ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.tiled.maxrreg", 0), WBCL_SUCCESS);
        ctx->info.has_nv_compiler_options = 1; /* pretended: PoCL refuses the option when it builds */
    }
    tu_assert_status(ctx, wbcl_context_set_param(ctx, "gemm.tiled.maxrreg", 8), WBCL_ERROR_INVALID_ARGUMENT, "16");
    tu_assert_status(ctx, wbcl_context_set_param(ctx, "gemm.tiled.maxrreg", 256), WBCL_ERROR_INVALID_ARGUMENT,
                     "gemm.tiled.maxrreg");
    ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.tiled.maxrreg", 128), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.p64.maxrreg", 96), WBCL_SUCCESS);
    long v;
    wbcl_param_source src;
    ck_assert_int_eq(wbcl_context_param_get(ctx, "gemm.tiled.maxrreg", &v, &src), WBCL_SUCCESS);
    ck_assert_int_eq(v, 128);
    ck_assert_int_eq(src, WBCL_PARAM_SET);
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p64.maxrreg", &v, &src), WBCL_SUCCESS);
    ck_assert_int_eq(v, 96);
    ck_assert_int_eq(src, WBCL_PARAM_SET);

    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_PACKED), WBCL_SUCCESS);
    ck_assert_int_eq(small_gemm(ctx, "packed GEMM beside a tiled-GEMM register cap"), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_TILED), WBCL_SUCCESS);
    if (nv) ck_assert_int_eq(small_gemm(ctx, "tiled GEMM within 128 registers"), WBCL_SUCCESS);
    else tu_assert_status(ctx, small_gemm(ctx, "tiled GEMM"), WBCL_ERROR_BUILD, "-cl-nv-maxrregcount=128");

    if (!nv) { /* the CPU-shaped program is built without the cap, or PoCL would refuse it (on NVIDIA
                * both builds succeed: nothing to tell apart, and no CPU-shaped compile spent on a GPU) */
        ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_CPU), WBCL_SUCCESS);
        ck_assert_int_eq(small_attention(ctx, 0, "CPU-shaped attention beside a register cap"), WBCL_SUCCESS);
    }
    ck_assert_int_eq(wbcl_context_set_variant(ctx, WBCL_VARIANT_GPU), WBCL_SUCCESS);
    if (nv) ck_assert_int_eq(small_attention(ctx, 0, "GPU-shaped attention within 96 registers"), WBCL_SUCCESS);
    else tu_assert_status(ctx, small_attention(ctx, 0, "GPU-shaped attention"), WBCL_ERROR_BUILD, "-cl-nv-maxrregcount=96");

    /* no cap: the same programs as ever */
    ck_assert_int_eq(wbcl_context_set_param(ctx, "gemm.tiled.maxrreg", 0), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.p64.maxrreg", 0), WBCL_SUCCESS);
    ck_assert_int_eq(small_gemm(ctx, "tiled GEMM, no register cap"), WBCL_SUCCESS);
    ck_assert_int_eq(small_attention(ctx, 0, "GPU-shaped attention, no register cap"), WBCL_SUCCESS);
    wbcl_context_destroy(ctx);

    /* attention.sp follows the QB in use unless set: QB set to a value that moves it */
    ctx = plain_context();
    long sp0;
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p64.sp", &sp0, &src), WBCL_SUCCESS);
    ck_assert_int_eq(src, WBCL_PARAM_DEFAULT);
    ck_assert_int_eq(wbcl_context_set_param(ctx, "attention.p64.qb", sp0 == 1 ? 2 : 16), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_param_get(ctx, "attention.p64.sp", &v, &src), WBCL_SUCCESS);
    ck_assert_int_eq(v, 3 - sp0);
    ck_assert_int_eq(src, WBCL_PARAM_SET);
    wbcl_context_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tune");
    TCase *tc = tcase_create("tune");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, tuning_run_writes_a_table_a_context_loads);
    tcase_add_test(tc, non_default_table_is_used_and_correct);
    tcase_add_test(tc, gemm_backend_from_the_table);
    tcase_add_test(tc, corrupt_and_stale_tables_are_reported_and_ignored);
    tcase_add_test(tc, out_of_limit_values_are_reported_and_ignored);
    tcase_add_test(tc, clblast_parameters_follow_the_context);
    tcase_add_test(tc, clblast_tuning_writes_a_set_a_context_uses);
    tcase_add_test(tc, shipped_tables_load_cleanly);
    tcase_add_test(tc, register_caps_reach_only_their_programs);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
