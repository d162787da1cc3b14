/* Tests for include/wbcl/io.h: host arrays, .npy and safetensors. */
#define _XOPEN_SOURCE 700

#include <check.h>
#include <dirent.h>
#include <float.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wbcl/io.h"

#ifndef WBCL_TEST_DATA_DIR
#define WBCL_TEST_DATA_DIR "tests/data"
#endif
#define FIXTURE(name) WBCL_TEST_DATA_DIR "/io/" name

static char tmpdir[256]; /* created in main, inherited by the forked tests */

/* ---- helpers -------------------------------------------------------------------------------- */

static void tpath(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

static void write_bytes(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* Whole file into a malloc'd buffer (NULL if it does not exist). */
static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    fclose(f);
    *len = n;
    return buf;
}

static int contains(const unsigned char *buf, size_t len, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= len; ++i)
        if (memcmp(buf + i, s, n) == 0)
            return 1;
    return 0;
}

static int count_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            ++n;
    closedir(d);
    return n;
}

static void expect_err(wbcl_status got, wbcl_status want, const char *err, const char *needle,
                       const char *label)
{
    ck_assert_msg(got == want, "%s: status %d, want %d (%s)", label, (int)got, (int)want, err);
    ck_assert_msg(strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", label, err, needle);
    ck_assert_msg(strchr(err, '\n') == NULL, "%s: message has a newline", label);
}

/* .npy bytes: magic, version, header length, dict verbatim, then dlen bytes of 0x11. */
static size_t make_npy(unsigned char *out, size_t cap, int major, const char *dict, size_t dlen)
{
    size_t hl = strlen(dict), pre = major == 1 ? 10 : 12;
    ck_assert_uint_le(pre + hl + dlen, cap);
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)major;
    out[7] = 0;
    for (size_t i = 0; i < pre - 8; ++i)
        out[8 + i] = (unsigned char)(hl >> (8 * i));
    memcpy(out + pre, dict, hl);
    memset(out + pre + hl, 0x11, dlen);
    return pre + hl + dlen;
}

/* safetensors bytes: u64 LE length, json verbatim, dlen bytes of 0x22. */
static size_t make_st(unsigned char *out, size_t cap, const char *json, size_t dlen)
{
    size_t hl = strlen(json);
    ck_assert_uint_le(8 + hl + dlen, cap);
    for (int i = 0; i < 8; ++i)
        out[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(out + 8, json, hl);
    memset(out + 8 + hl, 0x22, dlen);
    return 8 + hl + dlen;
}

static void fill_pattern(wbcl_array *a, unsigned seed)
{
    unsigned char *p = a->data;
    for (size_t i = 0; i < a->nbytes; ++i)
        p[i] = (unsigned char)(seed * 31u + i * 7u + (i >> 3));
}

static void assert_same_array(const wbcl_array *a, const wbcl_array *b, const char *label)
{
    ck_assert_msg(a->elem == b->elem, "%s: elem %d vs %d", label, a->elem, b->elem);
    ck_assert_msg(a->ndim == b->ndim, "%s: ndim %d vs %d", label, a->ndim, b->ndim);
    for (int i = 0; i < a->ndim; ++i)
        ck_assert_msg(a->shape[i] == b->shape[i], "%s: dim %d", label, i);
    ck_assert_msg(a->nbytes == b->nbytes, "%s: nbytes %zu vs %zu", label, a->nbytes, b->nbytes);
    ck_assert_ptr_nonnull(b->data);
    ck_assert_msg(a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0, "%s: data", label);
}

static const wbcl_elem all_elems[] = {WBCL_ELEM_F32, WBCL_ELEM_F64, WBCL_ELEM_F16,
                                      WBCL_ELEM_BF16, WBCL_ELEM_I32, WBCL_ELEM_I64};

typedef struct shape_case {
    int ndim;
    size_t shape[4];
} shape_case;
static const shape_case shapes[] = {{0, {0}}, {1, {5}}, {4, {2, 1, 3, 2}}, {2, {0, 3}}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* ---- arrays --------------------------------------------------------------------------------- */

START_TEST(elem_sizes_and_names)
{
    static const size_t sz[] = {4, 8, 2, 2, 4, 8};
    static const char *nm[] = {"F32", "F64", "F16", "BF16", "I32", "I64"};
    for (int i = 0; i < 6; ++i) {
        ck_assert_uint_eq(wbcl_elem_size(all_elems[i]), sz[i]);
        ck_assert_str_eq(wbcl_elem_name(all_elems[i]), nm[i]);
    }
    ck_assert_uint_eq(wbcl_elem_size((wbcl_elem)99), 0);
    ck_assert_str_eq(wbcl_elem_name((wbcl_elem)99), "invalid");
}
END_TEST

START_TEST(array_alloc_free)
{
    wbcl_array a;
    size_t shape[2] = {2, 3};
    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_F64, 2, shape, NULL, 0), WBCL_SUCCESS);
    ck_assert_uint_eq(a.nbytes, 48);
    ck_assert_uint_eq(wbcl_array_numel(&a), 6);
    for (size_t i = 0; i < a.nbytes; ++i)
        ck_assert_int_eq(((unsigned char *)a.data)[i], 0);
    wbcl_array_free(&a);
    ck_assert_ptr_null(a.data);
    ck_assert_int_eq(a.ndim, 0);
    ck_assert_uint_eq(a.nbytes, 0);
    wbcl_array_free(&a);
    wbcl_array_free(NULL);

    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_I32, 0, NULL, NULL, 0), WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_array_numel(&a), 1);
    ck_assert_uint_eq(a.nbytes, 4);
    wbcl_array_free(&a);

    size_t empty[3] = {4, 0, 2};
    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_F32, 3, empty, NULL, 0), WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_array_numel(&a), 0);
    ck_assert_ptr_nonnull(a.data);
    wbcl_array_free(&a);
    ck_assert_uint_eq(wbcl_array_numel(NULL), 0);
}
END_TEST

START_TEST(array_alloc_errors)
{
    wbcl_array a;
    char err[256];
    size_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    size_t ovf[2] = {SIZE_MAX / 2, 3};
    size_t bovf[1] = {SIZE_MAX / 4 + 1};
    ck_assert_int_eq(wbcl_array_alloc(NULL, WBCL_ELEM_F32, 1, s9, err, sizeof err),
                     WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_F32, 9, s9, err, sizeof err), WBCL_ERROR_SHAPE);
    ck_assert_ptr_null(a.data);
    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_F32, -1, s9, err, sizeof err), WBCL_ERROR_SHAPE);
    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_F32, 2, NULL, err, sizeof err),
                     WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_array_alloc(&a, (wbcl_elem)42, 1, s9, err, sizeof err), WBCL_ERROR_DTYPE);
    expect_err(wbcl_array_alloc(&a, WBCL_ELEM_F32, 2, ovf, err, sizeof err), WBCL_ERROR_SHAPE, err,
               "overflow", "numel overflow");
    expect_err(wbcl_array_alloc(&a, WBCL_ELEM_F64, 1, bovf, err, sizeof err), WBCL_ERROR_SHAPE, err,
               "overflow", "byte overflow");
    ck_assert_ptr_null(a.data);
}
END_TEST

START_TEST(f16_decode)
{
    static const struct {
        uint16_t h;
        float f;
    } cases[] = {
        {0x3C00, 1.0f},           {0xC000, -2.0f},          {0x3800, 0.5f},
        {0x7BFF, 65504.0f},       {0x0400, 0x1p-14f},       {0x0001, 0x1p-24f},
        {0x03FF, 1023 * 0x1p-24f}, {0x8001, -0x1p-24f},     {0x3555, 0.333251953125f},
        {0x0000, 0.0f},           {0x7C00, INFINITY},       {0xFC00, -INFINITY},
    };
    wbcl_array a;
    size_t n = sizeof cases / sizeof cases[0] + 1;
    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_F16, 1, &n, NULL, 0), WBCL_SUCCESS);
    uint16_t *h = a.data;
    for (size_t i = 0; i + 1 < n; ++i) {
        h[i] = cases[i].h;
        ck_assert_msg(wbcl_f16_to_f32(cases[i].h) == cases[i].f, "0x%04x", cases[i].h);
    }
    h[n - 1] = 0x7E00; /* NaN */
    ck_assert(signbit(wbcl_f16_to_f32(0x8000)) && wbcl_f16_to_f32(0x8000) == 0.0f);
    float *f;
    ck_assert_int_eq(wbcl_array_to_f32(&a, &f, NULL, 0), WBCL_SUCCESS);
    for (size_t i = 0; i + 1 < n; ++i)
        ck_assert_msg(f[i] == cases[i].f, "to_f32 0x%04x -> %a", cases[i].h, (double)f[i]);
    ck_assert(isnan(f[n - 1]));
    free(f);
    wbcl_array_free(&a);
}
END_TEST

START_TEST(bf16_decode)
{
    static const struct {
        uint16_t b;
        float f;
    } cases[] = {
        {0x3F80, 1.0f},     {0xC000, -2.0f},      {0x4049, 3.140625f}, {0x0001, 0x1p-133f},
        {0x0080, 0x1p-126f}, {0x7F7F, 0x1.FEp127f}, {0x7F80, INFINITY},  {0xFF80, -INFINITY},
    };
    wbcl_array a;
    size_t n = sizeof cases / sizeof cases[0] + 1;
    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_BF16, 1, &n, NULL, 0), WBCL_SUCCESS);
    uint16_t *b = a.data;
    for (size_t i = 0; i + 1 < n; ++i)
        b[i] = cases[i].b;
    b[n - 1] = 0x7FC0;
    float *f;
    ck_assert_int_eq(wbcl_array_to_f32(&a, &f, NULL, 0), WBCL_SUCCESS);
    for (size_t i = 0; i + 1 < n; ++i) {
        ck_assert_msg(f[i] == cases[i].f, "0x%04x -> %a", cases[i].b, (double)f[i]);
        ck_assert(wbcl_bf16_to_f32(cases[i].b) == cases[i].f);
    }
    ck_assert(isnan(f[n - 1]));
    free(f);
    wbcl_array_free(&a);
}
END_TEST

START_TEST(to_f32_conversions)
{
    wbcl_array a;
    size_t n = 6;
    float *f;
    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_F64, 1, &n, NULL, 0), WBCL_SUCCESS);
    double *d = a.data;
    d[0] = 1.5;
    d[1] = 1e300;
    d[2] = -1e300;
    d[3] = 0.1;
    d[4] = (double)FLT_MAX + 0x1p102; /* below the halfway point: rounds to FLT_MAX */
    d[5] = (double)FLT_MAX + 0x1p103; /* halfway: ties-to-even rounds to infinity */
    ck_assert_int_eq(wbcl_array_to_f32(&a, &f, NULL, 0), WBCL_SUCCESS);
    ck_assert(f[0] == 1.5f && f[1] == INFINITY && f[2] == -INFINITY && f[3] == 0.1f);
    ck_assert(f[4] == FLT_MAX && f[5] == INFINITY);
    free(f);
    wbcl_array_free(&a);

    n = 3;
    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_I32, 1, &n, NULL, 0), WBCL_SUCCESS);
    int32_t *i32 = a.data;
    i32[0] = -7;
    i32[1] = INT32_MAX;
    i32[2] = INT32_MIN;
    ck_assert_int_eq(wbcl_array_to_f32(&a, &f, NULL, 0), WBCL_SUCCESS);
    ck_assert(f[0] == -7.0f && f[1] == 2147483648.0f && f[2] == -2147483648.0f);
    free(f);
    wbcl_array_free(&a);

    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_I64, 1, &n, NULL, 0), WBCL_SUCCESS);
    int64_t *i64 = a.data;
    i64[0] = (int64_t)1 << 40;
    i64[1] = -3;
    i64[2] = INT64_MAX;
    ck_assert_int_eq(wbcl_array_to_f32(&a, &f, NULL, 0), WBCL_SUCCESS);
    ck_assert(f[0] == 0x1p40f && f[1] == -3.0f && f[2] == 0x1p63f);
    free(f);
    wbcl_array_free(&a);

    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_F32, 1, &n, NULL, 0), WBCL_SUCCESS);
    ((float *)a.data)[1] = -0.25f;
    ck_assert_int_eq(wbcl_array_to_f32(&a, &f, NULL, 0), WBCL_SUCCESS);
    ck_assert(f[0] == 0.0f && f[1] == -0.25f);
    free(f);
    wbcl_array_free(&a);
}
END_TEST

START_TEST(to_f32_errors)
{
    wbcl_array a;
    float *f = (float *)&a;
    char err[256];
    size_t n = 0;
    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_F16, 1, &n, NULL, 0), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_array_to_f32(&a, &f, NULL, 0), WBCL_SUCCESS);
    ck_assert_ptr_nonnull(f);
    free(f);
    ck_assert_int_eq(wbcl_array_to_f32(&a, NULL, err, sizeof err), WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_array_to_f32(NULL, &f, err, sizeof err), WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(f);
    wbcl_array bad = a;
    bad.nbytes = 2;
    ck_assert_int_eq(wbcl_array_to_f32(&bad, &f, err, sizeof err), WBCL_ERROR_INVALID_ARGUMENT);
    bad.nbytes = 0;
    bad.elem = (wbcl_elem)17;
    ck_assert_int_eq(wbcl_array_to_f32(&bad, &f, err, sizeof err), WBCL_ERROR_DTYPE);
    bad.elem = WBCL_ELEM_F32;
    bad.ndim = 12;
    ck_assert_int_eq(wbcl_array_to_f32(&bad, &f, err, sizeof err), WBCL_ERROR_SHAPE);
    wbcl_array_free(&a);
}
END_TEST

/* ---- npy ------------------------------------------------------------------------------------ */

START_TEST(npy_roundtrip)
{
    static const wbcl_elem npy_elems[] = {WBCL_ELEM_F32, WBCL_ELEM_F64, WBCL_ELEM_I32,
                                          WBCL_ELEM_I64};
    char path[512], err[512];
    for (size_t e = 0; e < 4; ++e)
        for (size_t s = 0; s < NSHAPES; ++s) {
            wbcl_array a, b;
            char label[64];
            snprintf(label, sizeof label, "%s shape#%zu", wbcl_elem_name(npy_elems[e]), s);
            ck_assert_int_eq(wbcl_array_alloc(&a, npy_elems[e], shapes[s].ndim, shapes[s].shape,
                                              NULL, 0),
                             WBCL_SUCCESS);
            fill_pattern(&a, (unsigned)(e * 10 + s));
            tpath(path, sizeof path, "rt.npy");
            ck_assert_msg(wbcl_npy_write(path, &a, err, sizeof err) == WBCL_SUCCESS, "%s: %s",
                          label, err);
            ck_assert_msg(wbcl_npy_read(path, &b, err, sizeof err) == WBCL_SUCCESS, "%s: %s",
                          label, err);
            assert_same_array(&a, &b, label);
            /* the in-memory reader sees the same bytes */
            size_t len;
            unsigned char *buf = slurp(path, &len);
            ck_assert_uint_eq(len % 64, a.nbytes % 64); /* header padded to 64 like numpy */
            wbcl_array_free(&b);
            ck_assert_int_eq(wbcl_npy_read_mem(buf, len, "x.npy", &b, err, sizeof err),
                             WBCL_SUCCESS);
            assert_same_array(&a, &b, label);
            free(buf);
            wbcl_array_free(&a);
            wbcl_array_free(&b);
        }
    unlink(path);
}
END_TEST

START_TEST(npy_write_f32_and_header_text)
{
    char path[512], err[512];
    const float v[6] = {1, 2, 3, 4, 5, 6};
    size_t shape[2] = {3, 2};
    tpath(path, sizeof path, "w32.npy");
    ck_assert_int_eq(wbcl_npy_write_f32(path, 2, shape, v, err, sizeof err), WBCL_SUCCESS);
    size_t len;
    unsigned char *buf = slurp(path, &len);
    ck_assert_uint_eq(len, 128 + 24);
    ck_assert(memcmp(buf + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }",
                     59) == 0);
    ck_assert_int_eq(buf[127], '\n');
    free(buf);
    wbcl_array a;
    ck_assert_int_eq(wbcl_npy_read(path, &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert(memcmp(a.data, v, sizeof v) == 0);
    wbcl_array_free(&a);

    size_t one = 4;
    ck_assert_int_eq(wbcl_npy_write_f32(path, 1, &one, v, err, sizeof err), WBCL_SUCCESS);
    buf = slurp(path, &len);
    ck_assert(contains(buf, len, "'shape': (4,), }"));
    free(buf);
    ck_assert_int_eq(wbcl_npy_write_f32(path, 0, NULL, v, err, sizeof err), WBCL_SUCCESS);
    buf = slurp(path, &len);
    ck_assert(contains(buf, len, "'shape': (), }"));
    free(buf);
    ck_assert_int_eq(wbcl_npy_read(path, &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(a.ndim, 0);
    ck_assert(((float *)a.data)[0] == 1.0f);
    wbcl_array_free(&a);

    expect_err(wbcl_npy_write_f32(path, 1, &one, NULL, err, sizeof err),
               WBCL_ERROR_INVALID_ARGUMENT, err, path, "NULL data");
    expect_err(wbcl_npy_write_f32(path, 9, shape, v, err, sizeof err), WBCL_ERROR_SHAPE, err,
               path, "9 dims");
    unlink(path);
}
END_TEST

START_TEST(npy_numpy_fixtures)
{
    wbcl_array a;
    char err[512];
    ck_assert_msg(wbcl_npy_read(FIXTURE("f32_2x3.npy"), &a, err, sizeof err) == WBCL_SUCCESS,
                  "%s", err);
    ck_assert(a.elem == WBCL_ELEM_F32 && a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3);
    for (int i = 0; i < 6; ++i)
        ck_assert(((float *)a.data)[i] == (float)i * 0.5f - 1.0f);
    wbcl_array_free(&a);

    ck_assert_int_eq(wbcl_npy_read(FIXTURE("f64_scalar.npy"), &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert(a.elem == WBCL_ELEM_F64 && a.ndim == 0 && a.nbytes == 8);
    ck_assert(((double *)a.data)[0] == 3.25);
    wbcl_array_free(&a);

    ck_assert_int_eq(wbcl_npy_read(FIXTURE("i32_1d.npy"), &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert(a.elem == WBCL_ELEM_I32 && a.ndim == 1 && a.shape[0] == 5);
    const int32_t *i32 = a.data;
    ck_assert(i32[0] == -1 && i32[2] == 7 && i32[3] == INT32_MAX && i32[4] == INT32_MIN);
    wbcl_array_free(&a);

    ck_assert_int_eq(wbcl_npy_read(FIXTURE("i64_4d.npy"), &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert(a.elem == WBCL_ELEM_I64 && a.ndim == 4 && a.shape[0] == 1 && a.shape[3] == 4);
    for (int64_t i = 0; i < 24; ++i)
        ck_assert(((int64_t *)a.data)[i] == (i - 5) * 1000000007);
    wbcl_array_free(&a);

    ck_assert_int_eq(wbcl_npy_read(FIXTURE("f16_1d.npy"), &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert(a.elem == WBCL_ELEM_F16 && a.shape[0] == 6);
    float *f;
    ck_assert_int_eq(wbcl_array_to_f32(&a, &f, NULL, 0), WBCL_SUCCESS);
    ck_assert(f[0] == 1.0f && f[1] == -2.0f && f[2] == 0.5f && f[3] == 65504.0f &&
              f[4] == 0x1p-24f && f[5] == INFINITY);
    free(f);
    wbcl_array_free(&a);

    ck_assert_int_eq(wbcl_npy_read(FIXTURE("f32_v2.npy"), &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert(a.ndim == 2 && a.shape[0] == 1 && a.shape[1] == 2 && ((float *)a.data)[1] == -2.5f);
    wbcl_array_free(&a);
    ck_assert_int_eq(wbcl_npy_read(FIXTURE("f32_v3.npy"), &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert(a.ndim == 1 && a.shape[0] == 3 && ((float *)a.data)[2] == 6.0f);
    wbcl_array_free(&a);
    ck_assert_int_eq(wbcl_npy_read(FIXTURE("f32_empty_0x3.npy"), &a, err, sizeof err),
                     WBCL_SUCCESS);
    ck_assert(a.ndim == 2 && a.shape[0] == 0 && a.shape[1] == 3 && a.nbytes == 0);
    wbcl_array_free(&a);

    expect_err(wbcl_npy_read(FIXTURE("f32_fortran.npy"), &a, err, sizeof err), WBCL_ERROR_FORMAT,
               err, "f32_fortran.npy", "fortran");
    ck_assert(strstr(err, "Fortran"));
    expect_err(wbcl_npy_read(FIXTURE("f32_bigendian.npy"), &a, err, sizeof err), WBCL_ERROR_DTYPE,
               err, "f32_bigendian.npy", "big-endian");
    ck_assert(strstr(err, ">f4"));
    expect_err(wbcl_npy_read(FIXTURE("bool_1d.npy"), &a, err, sizeof err), WBCL_ERROR_DTYPE, err,
               "bool_1d.npy", "bool");
    ck_assert_ptr_null(a.data);
}
END_TEST

/* Header dict spellings that must be accepted (all describe float32 (2, 3) except noted). */
static const char *good_dicts[] = {
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
    "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}",
    "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,3)}",
    "  { 'descr' : '<f4' ,\t'fortran_order' : False , 'shape' : ( 2 , 3 , ) , }   \n",
    "{'fortran_order': False, 'descr': '<f4', 'shape': (2L, 3L)}\n",
};

START_TEST(npy_header_variants)
{
    unsigned char buf[512];
    char err[512];
    wbcl_array a;
    size_t len = make_npy(buf, sizeof buf, 1, good_dicts[_i], 24);
    ck_assert_msg(wbcl_npy_read_mem(buf, len, "v.npy", &a, err, sizeof err) == WBCL_SUCCESS,
                  "variant %d: %s", _i, err);
    ck_assert(a.elem == WBCL_ELEM_F32 && a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3);
    wbcl_array_free(&a);
    len = make_npy(buf, sizeof buf, 2, good_dicts[_i], 24);
    ck_assert_int_eq(wbcl_npy_read_mem(buf, len, "v.npy", &a, err, sizeof err), WBCL_SUCCESS);
    wbcl_array_free(&a);
}
END_TEST

typedef struct bad_npy {
    const char *label;
    const char *dict;
    size_t dlen;
    wbcl_status want;
} bad_npy;

#define D(descr, order, shape) "{'descr': " descr ", 'fortran_order': " order ", 'shape': " shape ", }"
static const bad_npy bad_npys[] = {
    {"big-endian", D("'>f4'", "False", "(2,)"), 8, WBCL_ERROR_DTYPE},
    {"object", D("'|O'", "False", "(2,)"), 16, WBCL_ERROR_DTYPE},
    {"unicode", D("'<U3'", "False", "(1,)"), 12, WBCL_ERROR_DTYPE},
    {"complex", D("'<c8'", "False", "(1,)"), 8, WBCL_ERROR_DTYPE},
    {"no byte order", D("'f4'", "False", "(1,)"), 4, WBCL_ERROR_DTYPE},
    {"structured", D("[('a', '<f4'), ('b', '<i4')]", "False", "(1,)"), 8, WBCL_ERROR_DTYPE},
    {"fortran", D("'<f4'", "True", "(2, 3)"), 24, WBCL_ERROR_FORMAT},
    {"order not bool", D("'<f4'", "0", "(2,)"), 8, WBCL_ERROR_FORMAT},
    {"truncated data", D("'<f4'", "False", "(4,)"), 8, WBCL_ERROR_FORMAT},
    {"trailing bytes", D("'<f8'", "False", "(1,)"), 9, WBCL_ERROR_FORMAT},
    {"0-d truncated", D("'<f8'", "False", "()"), 4, WBCL_ERROR_FORMAT},
    {"bytes exceed file", D("'<f4'", "False", "(1000000,)"), 0, WBCL_ERROR_FORMAT},
    {"9 dims", D("'<f4'", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), 4, WBCL_ERROR_SHAPE},
    {"numel overflow", D("'<f4'", "False", "(4294967296, 4294967296, 2)"), 0, WBCL_ERROR_SHAPE},
    {"bytes overflow", D("'<f8'", "False", "(2305843009213693952,)"), 0, WBCL_ERROR_SHAPE},
    {"dim overflow", D("'<f4'", "False", "(99999999999999999999999,)"), 0, WBCL_ERROR_SHAPE},
    {"negative dim", D("'<f4'", "False", "(-1,)"), 0, WBCL_ERROR_SHAPE},
    {"int not tuple", D("'<f4'", "False", "(3)"), 12, WBCL_ERROR_FORMAT},
    {"shape list", D("'<f4'", "False", "[3]"), 12, WBCL_ERROR_FORMAT},
    {"float dim", D("'<f4'", "False", "(3.0,)"), 12, WBCL_ERROR_FORMAT},
    {"missing shape", "{'descr': '<f4', 'fortran_order': False}", 4, WBCL_ERROR_FORMAT},
    {"missing descr", "{'fortran_order': False, 'shape': (1,)}", 4, WBCL_ERROR_FORMAT},
    {"unknown key", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4,
     WBCL_ERROR_FORMAT},
    {"duplicate key", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4,
     WBCL_ERROR_FORMAT},
    {"missing comma", "{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", 4,
     WBCL_ERROR_FORMAT},
    {"garbage after dict", D("'<f4'", "False", "(1,)") " xyz", 4, WBCL_ERROR_FORMAT},
    {"not a dict", "hello world", 4, WBCL_ERROR_FORMAT},
    {"empty dict", "{}", 4, WBCL_ERROR_FORMAT},
    {"empty header", "", 4, WBCL_ERROR_FORMAT},
    {"unterminated string", "{'descr: '<f4', 'fortran_order': False, 'shape': (1,)}", 4,
     WBCL_ERROR_FORMAT},
    {"unclosed dict", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", 4,
     WBCL_ERROR_FORMAT},
    {"unclosed tuple", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,", 4,
     WBCL_ERROR_FORMAT},
    {"Falsey", D("'<f4'", "Falsey", "(1,)"), 4, WBCL_ERROR_FORMAT},
    {"escaped string", D("'<f\\x34'", "False", "(1,)"), 4, WBCL_ERROR_FORMAT},
};
#define NBAD_NPY ((int)(sizeof bad_npys / sizeof bad_npys[0]))

START_TEST(npy_malformed_header)
{
    const bad_npy *c = &bad_npys[_i];
    unsigned char buf[1024];
    char err[512];
    wbcl_array a;
    size_t len = make_npy(buf, sizeof buf, 1, c->dict, c->dlen);
    expect_err(wbcl_npy_read_mem(buf, len, "bad_case.npy", &a, err, sizeof err), c->want, err,
               "bad_case.npy", c->label);
    ck_assert_ptr_null(a.data);
    /* the same through a file, naming the path */
    char path[512];
    tpath(path, sizeof path, "bad_case_file.npy");
    write_bytes(path, buf, len);
    expect_err(wbcl_npy_read(path, &a, err, sizeof err), c->want, err, path, c->label);
    ck_assert_ptr_null(a.data);
    unlink(path);
}
END_TEST

START_TEST(npy_malformed_prefix)
{
    unsigned char buf[256];
    char err[512];
    wbcl_array a;
    const char *dict = D("'<f4'", "False", "(1,)");
    size_t len = make_npy(buf, sizeof buf, 1, dict, 4);

    expect_err(wbcl_npy_read_mem(buf, 0, "p.npy", &a, err, sizeof err), WBCL_ERROR_FORMAT, err,
               "p.npy", "empty");
    expect_err(wbcl_npy_read_mem(buf, 4, "p.npy", &a, err, sizeof err), WBCL_ERROR_FORMAT, err,
               "p.npy", "4 bytes");
    expect_err(wbcl_npy_read_mem(buf, 9, "p.npy", &a, err, sizeof err), WBCL_ERROR_FORMAT, err,
               "p.npy", "9 bytes");
    expect_err(wbcl_npy_read_mem(buf, 30, "p.npy", &a, err, sizeof err), WBCL_ERROR_FORMAT, err,
               "p.npy", "header cut");
    expect_err(wbcl_npy_read_mem("PK\3\4 not npy at all", 20, "p.npy", &a, err, sizeof err),
               WBCL_ERROR_FORMAT, err, "magic", "bad magic");
    buf[6] = 4; /* version 4.0 */
    expect_err(wbcl_npy_read_mem(buf, len, "p.npy", &a, err, sizeof err), WBCL_ERROR_FORMAT, err,
               "version", "v4");
    buf[6] = 1;
    buf[7] = 1; /* version 1.1 */
    expect_err(wbcl_npy_read_mem(buf, len, "p.npy", &a, err, sizeof err), WBCL_ERROR_FORMAT, err,
               "version", "v1.1");
    buf[7] = 0;
    buf[8] = 0xff; /* header length 0xff.. beyond the file */
    expect_err(wbcl_npy_read_mem(buf, len, "p.npy", &a, err, sizeof err), WBCL_ERROR_FORMAT, err,
               "beyond", "hlen beyond");
    len = make_npy(buf, sizeof buf, 2, dict, 4);
    buf[8] = buf[9] = buf[10] = buf[11] = 0xff; /* v2: 4 GiB header */
    expect_err(wbcl_npy_read_mem(buf, len, "p.npy", &a, err, sizeof err), WBCL_ERROR_FORMAT, err,
               "beyond", "v2 hlen");
    /* a header holding a NUL byte */
    len = make_npy(buf, sizeof buf, 1, dict, 4);
    buf[12] = '\0';
    expect_err(wbcl_npy_read_mem(buf, len, "p.npy", &a, err, sizeof err), WBCL_ERROR_FORMAT, err,
               "p.npy", "NUL");
    /* argument errors and no-message calls */
    ck_assert_int_eq(wbcl_npy_read_mem(NULL, 5, "p.npy", &a, err, sizeof err),
                     WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_npy_read_mem(buf, len, "p.npy", NULL, err, sizeof err),
                     WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_npy_read_mem(buf, 3, NULL, &a, NULL, 0), WBCL_ERROR_FORMAT);
    char small[8];
    ck_assert_int_eq(wbcl_npy_read_mem(buf, 3, "p.npy", &a, small, sizeof small),
                     WBCL_ERROR_FORMAT);
    ck_assert_uint_eq(strlen(small), 7);
    expect_err(wbcl_npy_read_mem(buf, 3, NULL, &a, err, sizeof err), WBCL_ERROR_FORMAT, err,
               "<memory>", "unnamed");
}
END_TEST

START_TEST(npy_read_io_errors)
{
    wbcl_array a;
    char err[512], path[512];
    tpath(path, sizeof path, "does_not_exist.npy");
    expect_err(wbcl_npy_read(path, &a, err, sizeof err), WBCL_ERROR_IO, err, path, "missing");
    expect_err(wbcl_npy_read(tmpdir, &a, err, sizeof err), WBCL_ERROR_IO, err, tmpdir, "dir");
    ck_assert_int_eq(wbcl_npy_read(NULL, &a, err, sizeof err), WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_npy_read(path, NULL, err, sizeof err), WBCL_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(npy_writer_never_clobbers)
{
    char err[512], path[600], sub[512];
    tpath(sub, sizeof sub, "clobber");
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    snprintf(path, sizeof path, "%s/keep.npy", sub);
    const float v[3] = {1, 2, 3};
    size_t n3 = 3;
    ck_assert_int_eq(wbcl_npy_write_f32(path, 1, &n3, v, err, sizeof err), WBCL_SUCCESS);
    size_t len0, len1;
    unsigned char *before = slurp(path, &len0);

    wbcl_array a;
    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_F16, 1, &n3, NULL, 0), WBCL_SUCCESS);
    expect_err(wbcl_npy_write(path, &a, err, sizeof err), WBCL_ERROR_DTYPE, err, path, "f16");
    wbcl_array_free(&a);
    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_F32, 1, &n3, NULL, 0), WBCL_SUCCESS);
    void *keep = a.data;
    a.data = NULL;
    expect_err(wbcl_npy_write(path, &a, err, sizeof err), WBCL_ERROR_INVALID_ARGUMENT, err, path,
               "NULL data");
    a.data = keep;
    a.nbytes = 8;
    expect_err(wbcl_npy_write(path, &a, err, sizeof err), WBCL_ERROR_INVALID_ARGUMENT, err, path,
               "nbytes");
    a.nbytes = 12;
    a.ndim = 9;
    expect_err(wbcl_npy_write(path, &a, err, sizeof err), WBCL_ERROR_SHAPE, err, path, "ndim");
    a.ndim = 1;
    expect_err(wbcl_npy_write(path, NULL, err, sizeof err), WBCL_ERROR_INVALID_ARGUMENT, err, path,
               "NULL array");

    unsigned char *after = slurp(path, &len1);
    ck_assert(len0 == len1 && memcmp(before, after, len0) == 0);
    free(after);
    ck_assert_int_eq(count_dir_entries(sub), 1);

    /* rename onto a directory fails: the directory stays, no temporary file is left */
    char dpath[700];
    snprintf(dpath, sizeof dpath, "%s/adir", sub);
    ck_assert_int_eq(mkdir(dpath, 0755), 0);
    expect_err(wbcl_npy_write(dpath, &a, err, sizeof err), WBCL_ERROR_IO, err, dpath, "dir");
    struct stat sb;
    ck_assert(stat(dpath, &sb) == 0 && S_ISDIR(sb.st_mode));
    ck_assert_int_eq(count_dir_entries(sub), 2);
    ck_assert_int_eq(rmdir(dpath), 0);

    /* a directory that does not exist */
    snprintf(dpath, sizeof dpath, "%s/nodir/x.npy", sub);
    expect_err(wbcl_npy_write(dpath, &a, err, sizeof err), WBCL_ERROR_IO, err, dpath, "nodir");

    /* success replaces the old file */
    ck_assert_int_eq(wbcl_npy_write(path, &a, err, sizeof err), WBCL_SUCCESS);
    wbcl_array b;
    ck_assert_int_eq(wbcl_npy_read(path, &b, err, sizeof err), WBCL_SUCCESS);
    ck_assert(((float *)b.data)[0] == 0.0f);
    ck_assert_int_eq(count_dir_entries(sub), 1);
    wbcl_array_free(&b);
    wbcl_array_free(&a);
    free(before);
    unlink(path);
    rmdir(sub);
}
END_TEST

/* ---- safetensors ---------------------------------------------------------------------------- */

START_TEST(st_roundtrip_all_dtypes)
{
    char path[512], err[512];
    enum { N = 6 * NSHAPES };
    wbcl_array arrs[N];
    const wbcl_array *ptrs[N];
    char names[N][32];
    const char *nameptrs[N];
    for (size_t e = 0; e < 6; ++e)
        for (size_t s = 0; s < NSHAPES; ++s) {
            size_t i = e * NSHAPES + s;
            ck_assert_int_eq(wbcl_array_alloc(&arrs[i], all_elems[e], shapes[s].ndim,
                                              shapes[s].shape, NULL, 0),
                             WBCL_SUCCESS);
            fill_pattern(&arrs[i], (unsigned)i);
            snprintf(names[i], sizeof names[i], "layer.%zu.%s", s, wbcl_elem_name(all_elems[e]));
            nameptrs[i] = names[i];
            ptrs[i] = &arrs[i];
        }
    const char *mk[] = {"format", "quote\"key"}, *mv[] = {"pt", "line\nbreak \\ \xc3\xbc"};
    tpath(path, sizeof path, "rt.safetensors");
    ck_assert_msg(wbcl_safetensors_write(path, N, nameptrs, ptrs, 2, mk, mv, err, sizeof err) ==
                      WBCL_SUCCESS,
                  "%s", err);

    for (int pass = 0; pass < 2; ++pass) {
        wbcl_safetensors *st = NULL;
        size_t len = 0;
        unsigned char *buf = NULL;
        if (pass == 0)
            ck_assert_msg(wbcl_safetensors_open(path, &st, err, sizeof err) == WBCL_SUCCESS, "%s",
                          err);
        else {
            buf = slurp(path, &len);
            ck_assert_int_eq(wbcl_safetensors_open_mem(buf, len, "m", &st, err, sizeof err),
                             WBCL_SUCCESS);
            free(buf); /* the reader keeps its own copy */
        }
        ck_assert_uint_eq(wbcl_safetensors_count(st), N);
        for (size_t i = 0; i < N; ++i) {
            ck_assert_str_eq(wbcl_safetensors_name(st, i), names[i]);
            wbcl_array b;
            ck_assert_msg(wbcl_safetensors_get(st, names[i], &b, err, sizeof err) == WBCL_SUCCESS,
                          "%s", err);
            assert_same_array(&arrs[i], &b, names[i]);
            wbcl_array_free(&b);
        }
        ck_assert_ptr_null(wbcl_safetensors_name(st, N));
        ck_assert_str_eq(wbcl_safetensors_metadata(st, "format"), "pt");
        ck_assert_str_eq(wbcl_safetensors_metadata(st, "quote\"key"), mv[1]);
        ck_assert_ptr_null(wbcl_safetensors_metadata(st, "absent"));
        wbcl_safetensors_close(st);
    }
    /* header length is a multiple of 8 and 8-byte dtypes come first in the data */
    size_t len;
    unsigned char *buf = slurp(path, &len);
    ck_assert_uint_eq(buf[0] % 8, 0);
    free(buf);
    for (size_t i = 0; i < N; ++i)
        wbcl_array_free(&arrs[i]);
    unlink(path);
}
END_TEST

START_TEST(st_python_fixture_and_prefixes)
{
    wbcl_safetensors *st;
    char err[512];
    ck_assert_msg(wbcl_safetensors_open(FIXTURE("weights.safetensors"), &st, err, sizeof err) ==
                      WBCL_SUCCESS,
                  "%s", err);
    ck_assert_uint_eq(wbcl_safetensors_count(st), 5);
    ck_assert(wbcl_safetensors_has(st, "qkv.weight"));
    ck_assert(wbcl_safetensors_has(st, "module.qkv.weight")); /* the query is stripped too */
    ck_assert(wbcl_safetensors_has(st, "proj.bias"));
    ck_assert(!wbcl_safetensors_has(st, "module.proj.bias.x"));
    ck_assert(!wbcl_safetensors_has(st, NULL) && !wbcl_safetensors_has(NULL, "qkv.weight"));
    int seen = 0;
    for (size_t i = 0; i < wbcl_safetensors_count(st); ++i) {
        const char *nm = wbcl_safetensors_name(st, i);
        ck_assert(strncmp(nm, "module.", 7) != 0 && strncmp(nm, "_orig_mod.", 10) != 0);
        seen += strcmp(nm, "proj.bias") == 0;
    }
    ck_assert_int_eq(seen, 1);
    ck_assert_str_eq(wbcl_safetensors_metadata(st, "format"), "np");
    ck_assert_str_eq(wbcl_safetensors_metadata(st, "note"), "wbcl fixture");

    wbcl_array a;
    float *f;
    ck_assert_int_eq(wbcl_safetensors_get(st, "qkv.weight", &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert(a.elem == WBCL_ELEM_F32 && a.ndim == 2 && a.shape[0] == 3 && a.shape[1] == 2);
    ck_assert(((float *)a.data)[5] == 5.0f);
    wbcl_array_free(&a);
    ck_assert_int_eq(wbcl_safetensors_get(st, "proj.bias", &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert(a.elem == WBCL_ELEM_F64 && ((double *)a.data)[1] == -0.5);
    wbcl_array_free(&a);
    ck_assert_int_eq(wbcl_safetensors_get(st, "half", &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_array_to_f32(&a, &f, NULL, 0), WBCL_SUCCESS);
    ck_assert(f[0] == 1.0f && f[1] == -2.0f && f[2] == 0x1p-24f);
    free(f);
    wbcl_array_free(&a);
    ck_assert_int_eq(wbcl_safetensors_get(st, "ids", &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert(a.elem == WBCL_ELEM_I64 && ((int64_t *)a.data)[3] == (int64_t)1 << 40);
    wbcl_array_free(&a);
    ck_assert_int_eq(wbcl_safetensors_get(st, "counts", &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert(a.elem == WBCL_ELEM_I32 && a.ndim == 0 && ((int32_t *)a.data)[0] == 7);
    wbcl_array_free(&a);

    expect_err(wbcl_safetensors_get(st, "blocks.0.attn.qkv.weight", &a, err, sizeof err),
               WBCL_ERROR_FORMAT, err, "missing tensor 'blocks.0.attn.qkv.weight'", "missing");
    ck_assert(strstr(err, "weights.safetensors"));
    ck_assert_ptr_null(a.data);
    ck_assert_int_eq(wbcl_safetensors_get(st, NULL, &a, err, sizeof err),
                     WBCL_ERROR_INVALID_ARGUMENT);
    wbcl_safetensors_close(st);
    wbcl_safetensors_close(NULL);
    ck_assert_uint_eq(wbcl_safetensors_count(NULL), 0);
    ck_assert_ptr_null(wbcl_safetensors_name(NULL, 0));
    ck_assert_ptr_null(wbcl_safetensors_metadata(NULL, "x"));

    ck_assert_int_eq(wbcl_safetensors_open(FIXTURE("with_bool.safetensors"), &st, err, sizeof err),
                     WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_safetensors_get(st, "w", &a, err, sizeof err), WBCL_SUCCESS);
    wbcl_array_free(&a);
    expect_err(wbcl_safetensors_get(st, "mask", &a, err, sizeof err), WBCL_ERROR_DTYPE, err,
               "'mask'", "bool");
    ck_assert(strstr(err, "BOOL") && strstr(err, "with_bool.safetensors"));
    wbcl_safetensors_close(st);
}
END_TEST

START_TEST(st_prefix_stripping)
{
    unsigned char buf[1024];
    char err[512];
    wbcl_safetensors *st;
    const char *json = "{\"_orig_mod.module._orig_mod.a\":{\"dtype\":\"F32\",\"shape\":[1],"
                       "\"data_offsets\":[0,4]},\"modulex.b\":{\"dtype\":\"F32\",\"shape\":[],"
                       "\"data_offsets\":[4,8]},\"module.\":{\"dtype\":\"I32\",\"shape\":[1],"
                       "\"data_offsets\":[8,12]}}";
    size_t len = make_st(buf, sizeof buf, json, 12);
    ck_assert_msg(wbcl_safetensors_open_mem(buf, len, "p.st", &st, err, sizeof err) ==
                      WBCL_SUCCESS,
                  "%s", err);
    ck_assert_str_eq(wbcl_safetensors_name(st, 0), "a");
    ck_assert_str_eq(wbcl_safetensors_name(st, 1), "modulex.b");
    ck_assert_str_eq(wbcl_safetensors_name(st, 2), "");
    ck_assert(wbcl_safetensors_has(st, "a") && wbcl_safetensors_has(st, "module.a"));
    ck_assert(!wbcl_safetensors_has(st, "b"));
    wbcl_safetensors_close(st);

    json = "{\"module.a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
    len = make_st(buf, sizeof buf, json, 8);
    expect_err(wbcl_safetensors_open_mem(buf, len, "dup.st", &st, err, sizeof err),
               WBCL_ERROR_FORMAT, err, "'module.a'", "dup after strip");
    ck_assert(strstr(err, "dup.st") && strstr(err, "duplicate"));
    ck_assert_ptr_null(st);
}
END_TEST

typedef struct bad_st {
    const char *label;
    const char *json;
    size_t dlen;
    wbcl_status want;
    const char *needle; /* besides the file name */
} bad_st;

#define T(dtype, shape, offs) "{\"k.w\":{\"dtype\":" dtype ",\"shape\":" shape ",\"data_offsets\":" offs "}}"
/* two entries: name, dtype, shape, data_offsets each */
#define E2(a, da, sa, oa, b, db, sb, ob)                                                           \
    "{\"" a "\":{\"dtype\":\"" da "\",\"shape\":" sa ",\"data_offsets\":" oa "},\"" b              \
    "\":{\"dtype\":\"" db "\",\"shape\":" sb ",\"data_offsets\":" ob "}}"
static const bad_st bad_sts[] = {
    {"invalid json", "{\"k.w\": {", 0, WBCL_ERROR_FORMAT, "JSON"},
    {"json array", "[1, 2, 3]", 0, WBCL_ERROR_FORMAT, "object"},
    {"trailing data", "{} {}", 0, WBCL_ERROR_FORMAT, "after"},
    {"entry not object", "{\"k.w\": 5}", 0, WBCL_ERROR_FORMAT, "'k.w'"},
    {"no dtype", "{\"k.w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, WBCL_ERROR_FORMAT, "'k.w'"},
    {"dtype number", T("4", "[1]", "[0,4]"), 4, WBCL_ERROR_FORMAT, "'k.w'"},
    {"unknown dtype", T("\"F33\"", "[1]", "[0,4]"), 4, WBCL_ERROR_DTYPE, "F33"},
    {"lowercase dtype", T("\"f32\"", "[1]", "[0,4]"), 4, WBCL_ERROR_DTYPE, "'k.w'"},
    {"no shape", "{\"k.w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, WBCL_ERROR_FORMAT, "'k.w'"},
    {"shape object", T("\"F32\"", "{}", "[0,4]"), 4, WBCL_ERROR_FORMAT, "'k.w'"},
    {"negative dim", T("\"F32\"", "[-1]", "[0,4]"), 4, WBCL_ERROR_SHAPE, "'k.w'"},
    {"fractional dim", T("\"F32\"", "[1.5]", "[0,4]"), 4, WBCL_ERROR_SHAPE, "'k.w'"},
    {"string dim", T("\"F32\"", "[\"1\"]", "[0,4]"), 4, WBCL_ERROR_SHAPE, "'k.w'"},
    {"huge dim", T("\"F32\"", "[1e300]", "[0,4]"), 4, WBCL_ERROR_SHAPE, "'k.w'"},
    {"9 dims", T("\"F32\"", "[1,1,1,1,1,1,1,1,1]", "[0,4]"), 4, WBCL_ERROR_SHAPE, "'k.w'"},
    {"numel overflow", T("\"F32\"", "[4294967296,4294967296,2]", "[0,4]"), 4, WBCL_ERROR_SHAPE, "'k.w'"},
    {"bytes overflow", T("\"F64\"", "[2305843009213693952]", "[0,4]"), 4, WBCL_ERROR_SHAPE, "'k.w'"},
    {"no offsets", "{\"k.w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, WBCL_ERROR_FORMAT, "'k.w'"},
    {"one offset", T("\"F32\"", "[1]", "[0]"), 4, WBCL_ERROR_FORMAT, "'k.w'"},
    {"three offsets", T("\"F32\"", "[1]", "[0,4,8]"), 4, WBCL_ERROR_FORMAT, "'k.w'"},
    {"negative offset", T("\"F32\"", "[1]", "[-4,0]"), 4, WBCL_ERROR_FORMAT, "'k.w'"},
    {"begin > end", T("\"F32\"", "[0]", "[4,0]"), 4, WBCL_ERROR_FORMAT, "'k.w'"},
    {"end beyond data", T("\"F32\"", "[2]", "[0,8]"), 4, WBCL_ERROR_FORMAT, "'k.w'"},
    {"size mismatch", T("\"F32\"", "[2]", "[0,4]"), 8, WBCL_ERROR_FORMAT, "'k.w'"},
    {"bool size mismatch", T("\"BOOL\"", "[2]", "[0,4]"), 8, WBCL_ERROR_FORMAT, "'k.w'"},
    {"duplicate key", "{\"k.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"k.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
     4, WBCL_ERROR_FORMAT, "'k.w'"},
    {"metadata not object", "{\"__metadata__\":[\"a\"]}", 0, WBCL_ERROR_FORMAT, "__metadata__"},
    {"metadata number", "{\"__metadata__\":{\"epoch\":3}}", 0, WBCL_ERROR_FORMAT, "'epoch'"},
    {"metadata twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, WBCL_ERROR_FORMAT,
     "__metadata__"},
    {"metadata dup key", "{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0, WBCL_ERROR_FORMAT, "'a'"},
};
#define NBAD_ST ((int)(sizeof bad_sts / sizeof bad_sts[0]))

typedef struct tiling_case {
    const char *label;
    const char *json;
    size_t dlen;
    const char *needles[4]; /* besides the file name; NULL-terminated */
} tiling_case;
static const tiling_case bad_tilings[] = {
    /* data_offsets must tile the data region exactly (the reference implementation's rule): no
     * overlap, no gap, no bytes before the first tensor or after the last; the messages name the
     * tensors involved with their offsets. Header order is not data order: some cases list the
     * later tensor first. */
    {"overlap", E2("second.w", "F32", "[2]", "[4,12]", "first.w", "F32", "[2]", "[0,8]"), 12,
     {"overlap", "'first.w' (data_offsets [0, 8])", "'second.w' (data_offsets [4, 12])"}},
    {"same bytes twice", E2("a.w", "F32", "[1]", "[0,4]", "b.w", "I32", "[1]", "[0,4]"), 4,
     {"overlap", "'a.w' (data_offsets [0, 4])", "'b.w' (data_offsets [0, 4])"}},
    {"empty tensor inside another",
     E2("whole", "F32", "[2]", "[0,8]", "empty", "F32", "[0]", "[4,4]"), 8,
     {"overlap", "'whole' (data_offsets [0, 8])", "'empty' (data_offsets [4, 4])"}},
    {"gap", E2("later.w", "F32", "[1]", "[8,12]", "early.w", "F32", "[1]", "[0,4]"), 12,
     {"gap between tensors 'early.w' (data_offsets [0, 4]) and 'later.w' (data_offsets [8, 12])",
      "bytes [4, 8)"}},
    {"first not at 0", E2("a.w", "F32", "[1]", "[4,8]", "b.w", "F32", "[1]", "[8,12]"), 12,
     {"'a.w' (data_offsets [4, 8])", "does not start at 0", "bytes [0, 4)"}},
    {"short coverage", E2("a.w", "F32", "[1]", "[0,4]", "b.w", "F32", "[1]", "[4,8]"), 12,
     {"cover 8 of the data region's 12 bytes", "'b.w' (data_offsets [4, 8])", "4 bytes"}},
    {"data without tensors", "{\"__metadata__\":{\"a\":\"b\"}}", 4, {"no tensors", "4 bytes"}},
};
#undef E2

/* The bytes (json header, dlen data bytes) are refused with `want`, from memory and from a file,
 * with a message naming the source and containing every needle (NULL-terminated). */
static void expect_st_refused(const char *label, const char *json, size_t dlen, wbcl_status want,
                              const char *const *needles)
{
    unsigned char buf[1024];
    char err[512], path[512];
    wbcl_safetensors *st = (wbcl_safetensors *)buf;
    size_t len = make_st(buf, sizeof buf, json, dlen);
    tpath(path, sizeof path, "bad_case_file.safetensors");
    write_bytes(path, buf, len);
    for (int pass = 0; pass < 2; ++pass) {
        const char *src = pass ? path : "bad_case.safetensors";
        wbcl_status got = pass ? wbcl_safetensors_open(path, &st, err, sizeof err)
                               : wbcl_safetensors_open_mem(buf, len, src, &st, err, sizeof err);
        expect_err(got, want, err, src, label);
        for (int k = 0; needles[k]; ++k)
            ck_assert_msg(strstr(err, needles[k]) != NULL, "%s: '%s' lacks '%s'", label, err,
                          needles[k]);
        ck_assert_ptr_null(st);
    }
    unlink(path);
}

START_TEST(st_malformed_header)
{
    const bad_st *c = &bad_sts[_i];
    const char *needles[2] = {c->needle, NULL};
    expect_st_refused(c->label, c->json, c->dlen, c->want, needles);
}
END_TEST

START_TEST(st_offsets_must_tile)
{
    const tiling_case *c = &bad_tilings[_i];
    expect_st_refused(c->label, c->json, c->dlen, WBCL_ERROR_FORMAT, c->needles);
}
END_TEST

START_TEST(st_malformed_length)
{
    unsigned char buf[256];
    char err[512];
    wbcl_safetensors *st;
    size_t len = make_st(buf, sizeof buf, "{}", 0);
    ck_assert_int_eq(wbcl_safetensors_open_mem(buf, len, "ok.st", &st, err, sizeof err),
                     WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_safetensors_count(st), 0);
    wbcl_safetensors_close(st);

    expect_err(wbcl_safetensors_open_mem(buf, 7, "s.st", &st, err, sizeof err), WBCL_ERROR_FORMAT,
               err, "s.st", "7 bytes");
    expect_err(wbcl_safetensors_open_mem(buf, 0, "s.st", &st, err, sizeof err), WBCL_ERROR_FORMAT,
               err, "s.st", "0 bytes");
    buf[0] = 3; /* header longer than the file */
    expect_err(wbcl_safetensors_open_mem(buf, len, "s.st", &st, err, sizeof err),
               WBCL_ERROR_FORMAT, err, "beyond", "N > size");
    memset(buf, 0xff, 8);
    expect_err(wbcl_safetensors_open_mem(buf, len, "s.st", &st, err, sizeof err),
               WBCL_ERROR_FORMAT, err, "beyond", "N = 2^64-1");
    memset(buf, 0, 8);
    expect_err(wbcl_safetensors_open_mem(buf, 8, "s.st", &st, err, sizeof err), WBCL_ERROR_FORMAT,
               err, "s.st", "N = 0");

    /* N just above 100 MB inside a buffer large enough: rejected before anything is copied */
    size_t big = 8 + 100000001;
    unsigned char *huge = calloc(big, 1);
    ck_assert_ptr_nonnull(huge);
    uint64_t n = 100000001;
    for (int i = 0; i < 8; ++i)
        huge[i] = (unsigned char)(n >> (8 * i));
    expect_err(wbcl_safetensors_open_mem(huge, big, "h.st", &st, err, sizeof err),
               WBCL_ERROR_FORMAT, err, "limit", "100 MB");
    free(huge);

    ck_assert_int_eq(wbcl_safetensors_open_mem(NULL, 8, "s.st", &st, err, sizeof err),
                     WBCL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(wbcl_safetensors_open_mem(buf, 8, "s.st", NULL, err, sizeof err),
                     WBCL_ERROR_INVALID_ARGUMENT);
    char path[512];
    tpath(path, sizeof path, "nope.safetensors");
    expect_err(wbcl_safetensors_open(path, &st, err, sizeof err), WBCL_ERROR_IO, err, path,
               "missing file");
    expect_err(wbcl_safetensors_open(tmpdir, &st, err, sizeof err), WBCL_ERROR_IO, err, tmpdir,
               "directory");
    write_bytes(path, "\x02\0\0\0", 4);
    expect_err(wbcl_safetensors_open(path, &st, err, sizeof err), WBCL_ERROR_FORMAT, err, path,
               "short file");
    unlink(path);
}
END_TEST

START_TEST(st_offsets_tiling_accepted)
{
    /* header order differs from data order; empty tensors sit on the chain (two at one offset,
     * one at the very end), as the reference accepts */
    const char *json =
        "{\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
        "\"z0\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
        "\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"z1\":{\"dtype\":\"F64\",\"shape\":[0,3],\"data_offsets\":[8,8]},"
        "\"z2\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[8,8]},"
        "\"z3\":{\"dtype\":\"BF16\",\"shape\":[2,0],\"data_offsets\":[12,12]}}";
    unsigned char buf[1024];
    char err[512];
    wbcl_safetensors *st;
    size_t len = make_st(buf, sizeof buf, json, 12);
    for (int i = 0; i < 12; ++i)
        buf[len - 12 + i] = (unsigned char)i;
    ck_assert_msg(wbcl_safetensors_open_mem(buf, len, "ok.st", &st, err, sizeof err) ==
                      WBCL_SUCCESS,
                  "%s", err);
    ck_assert_uint_eq(wbcl_safetensors_count(st), 6);
    wbcl_array a;
    ck_assert_int_eq(wbcl_safetensors_get(st, "c", &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert(((unsigned char *)a.data)[0] == 8 && ((unsigned char *)a.data)[3] == 11);
    wbcl_array_free(&a);
    ck_assert_int_eq(wbcl_safetensors_get(st, "a", &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert(((unsigned char *)a.data)[0] == 0 && ((unsigned char *)a.data)[7] == 7);
    wbcl_array_free(&a);
    ck_assert_int_eq(wbcl_safetensors_get(st, "z1", &a, err, sizeof err), WBCL_SUCCESS);
    ck_assert_uint_eq(a.nbytes, 0);
    wbcl_array_free(&a);
    wbcl_safetensors_close(st);

    /* the writer's files tile: several dtypes (reordered by element size in the data) */
    char path[512];
    wbcl_array w[3];
    const size_t s1[1] = {3}, s2[2] = {2, 0};
    ck_assert_int_eq(wbcl_array_alloc(&w[0], WBCL_ELEM_F16, 1, s1, NULL, 0), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_array_alloc(&w[1], WBCL_ELEM_F64, 1, s1, NULL, 0), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_array_alloc(&w[2], WBCL_ELEM_F32, 2, s2, NULL, 0), WBCL_SUCCESS);
    const wbcl_array *wp[3] = {&w[0], &w[1], &w[2]};
    const char *wn[3] = {"h", "d", "empty"};
    tpath(path, sizeof path, "tiled.safetensors");
    ck_assert_msg(wbcl_safetensors_write(path, 3, wn, wp, 0, NULL, NULL, err, sizeof err) ==
                      WBCL_SUCCESS,
                  "%s", err);
    ck_assert_msg(wbcl_safetensors_open(path, &st, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    ck_assert_uint_eq(wbcl_safetensors_count(st), 3);
    wbcl_safetensors_close(st);
    for (int i = 0; i < 3; ++i)
        wbcl_array_free(&w[i]);
    unlink(path);
}
END_TEST

START_TEST(st_writer_validation_and_no_clobber)
{
    char err[512], path[600], sub[512];
    tpath(sub, sizeof sub, "stclobber");
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    snprintf(path, sizeof path, "%s/w.safetensors", sub);
    wbcl_array a, bad;
    size_t n2 = 2;
    ck_assert_int_eq(wbcl_array_alloc(&a, WBCL_ELEM_BF16, 1, &n2, NULL, 0), WBCL_SUCCESS);
    bad = a;
    bad.nbytes = 3;
    const wbcl_array *one[1] = {&a}, *two[2] = {&a, &a}, *badp[1] = {&bad}, *nullp[1] = {NULL};
    const char *nm[1] = {"x"}, *nmnull[1] = {NULL}, *nmmeta[1] = {"__metadata__"};
    const char *nmutf[1] = {"bad\xff"}, *dup[2] = {"module.x", "x"};
    const char *mk[2] = {"a", "a"}, *mv[2] = {"1", "2"};

    struct {
        const char *label;
        size_t n;
        const char *const *names;
        const wbcl_array *const *arrs;
        size_t nm;
        wbcl_status want;
    } cases[] = {
        {"NULL name", 1, nmnull, one, 0, WBCL_ERROR_INVALID_ARGUMENT},
        {"__metadata__ name", 1, nmmeta, one, 0, WBCL_ERROR_INVALID_ARGUMENT},
        {"bad utf8", 1, nmutf, one, 0, WBCL_ERROR_INVALID_ARGUMENT},
        {"dup after strip", 2, dup, two, 0, WBCL_ERROR_INVALID_ARGUMENT},
        {"NULL array", 1, nm, nullp, 0, WBCL_ERROR_INVALID_ARGUMENT},
        {"inconsistent array", 1, nm, badp, 0, WBCL_ERROR_INVALID_ARGUMENT},
        {"dup meta key", 1, nm, one, 2, WBCL_ERROR_INVALID_ARGUMENT},
        {"NULL names", 1, NULL, one, 0, WBCL_ERROR_INVALID_ARGUMENT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        expect_err(wbcl_safetensors_write(path, cases[i].n, cases[i].names, cases[i].arrs,
                                          cases[i].nm, mk, mv, err, sizeof err),
                   cases[i].want, err, path, cases[i].label);
        ck_assert_msg(access(path, F_OK) != 0, "%s: created the file", cases[i].label);
        ck_assert_int_eq(count_dir_entries(sub), 0);
    }

    ck_assert_int_eq(wbcl_safetensors_write(path, 1, nm, one, 0, NULL, NULL, err, sizeof err),
                     WBCL_SUCCESS);
    size_t len0, len1;
    unsigned char *before = slurp(path, &len0);
    expect_err(wbcl_safetensors_write(path, 1, nm, badp, 0, NULL, NULL, err, sizeof err),
               WBCL_ERROR_INVALID_ARGUMENT, err, "'x'", "existing file");
    unsigned char *after = slurp(path, &len1);
    ck_assert(len0 == len1 && memcmp(before, after, len0) == 0);
    free(before);
    free(after);

    char dpath[700];
    snprintf(dpath, sizeof dpath, "%s/adir", sub);
    ck_assert_int_eq(mkdir(dpath, 0755), 0);
    expect_err(wbcl_safetensors_write(dpath, 1, nm, one, 0, NULL, NULL, err, sizeof err),
               WBCL_ERROR_IO, err, dpath, "onto dir");
    ck_assert_int_eq(count_dir_entries(sub), 2);
    rmdir(dpath);

    /* zero tensors, metadata only */
    ck_assert_int_eq(wbcl_safetensors_write(path, 0, NULL, NULL, 1, mk, mv, err, sizeof err),
                     WBCL_SUCCESS);
    wbcl_safetensors *st;
    ck_assert_int_eq(wbcl_safetensors_open(path, &st, err, sizeof err), WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_safetensors_count(st), 0);
    ck_assert_str_eq(wbcl_safetensors_metadata(st, "a"), "1");
    wbcl_safetensors_close(st);

    /* awkward names survive JSON escaping */
    const char *odd[2] = {"we\"ird\\na\nme\t\x01", "\xc3\xbcn\xc3\xaf.\xe2\x82\xac"};
    ck_assert_int_eq(wbcl_safetensors_write(path, 2, odd, two, 0, NULL, NULL, err, sizeof err),
                     WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_safetensors_open(path, &st, err, sizeof err), WBCL_SUCCESS);
    ck_assert_str_eq(wbcl_safetensors_name(st, 0), odd[0]);
    ck_assert_str_eq(wbcl_safetensors_name(st, 1), odd[1]);
    wbcl_safetensors_close(st);

    wbcl_array_free(&a);
    unlink(path);
    ck_assert_int_eq(count_dir_entries(sub), 0);
    rmdir(sub);
}
END_TEST

/* ---- main ----------------------------------------------------------------------------------- */

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static Suite *io_suite(void)
{
    Suite *s = suite_create("io");
    TCase *tc = tcase_create("array");
    tcase_add_test(tc, elem_sizes_and_names);
    tcase_add_test(tc, array_alloc_free);
    tcase_add_test(tc, array_alloc_errors);
    tcase_add_test(tc, f16_decode);
    tcase_add_test(tc, bf16_decode);
    tcase_add_test(tc, to_f32_conversions);
    tcase_add_test(tc, to_f32_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("npy");
    tcase_add_test(tc, npy_roundtrip);
    tcase_add_test(tc, npy_write_f32_and_header_text);
    tcase_add_test(tc, npy_numpy_fixtures);
    tcase_add_loop_test(tc, npy_header_variants, 0,
                        (int)(sizeof good_dicts / sizeof good_dicts[0]));
    tcase_add_loop_test(tc, npy_malformed_header, 0, NBAD_NPY);
    tcase_add_test(tc, npy_malformed_prefix);
    tcase_add_test(tc, npy_read_io_errors);
    tcase_add_test(tc, npy_writer_never_clobbers);
    suite_add_tcase(s, tc);

    tc = tcase_create("safetensors");
    tcase_add_test(tc, st_roundtrip_all_dtypes);
    tcase_add_test(tc, st_python_fixture_and_prefixes);
    tcase_add_test(tc, st_prefix_stripping);
    tcase_add_loop_test(tc, st_malformed_header, 0, NBAD_ST);
    tcase_add_test(tc, st_malformed_length);
    tcase_add_loop_test(tc, st_offsets_must_tile, 0,
                        (int)(sizeof bad_tilings / sizeof bad_tilings[0]));
    tcase_add_test(tc, st_offsets_tiling_accepted);
    tcase_add_test(tc, st_writer_validation_and_no_clobber);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/wbcl_test_io_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    SRunner *sr = srunner_create(io_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return failed != 0;
}
