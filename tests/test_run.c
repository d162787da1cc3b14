/* wbcl-run: the command-line runner, driven as a subprocess. Inputs are generated here with the
 * io API into a fresh mkdtemp directory; outputs are read back and compared with host/ref. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "wbcl/io.h"

#define TOOL WBCL_TOOLS_DIR "/wbcl-run"

static char dir[256];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/wbcl-test-run-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void remove_dir(void) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* dir/name, in one of a few rotating buffers */
static const char *P(const char *name)
{
    static char bufs[8][512];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, 512, "%s/%s", dir, name);
    return b;
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* ---- running the tool ------------------------------------------------------------------------- */

typedef struct result {
    int rc;
    char out[1 << 16];
    char err[1 << 14];
} result;

static void slurp(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Runs wbcl-run with the NULL-terminated arguments; captures stdout, stderr and the exit status. */
static result *run(const char *first, ...)
{
    static result res;
    const char *argv[64];
    int n = 0;
    argv[n++] = TOOL;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s/.stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/.stderr", dir);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fo < 0 || fe < 0) _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(TOOL, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "wbcl-run died (signal %d)", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    res.rc = WEXITSTATUS(status);
    ck_assert_msg(res.rc != 127 && res.rc != 126, "could not execute %s", TOOL);
    slurp(out_path, res.out, sizeof res.out);
    slurp(err_path, res.err, sizeof res.err);
    remove(out_path);
    remove(err_path);
    return &res;
}

#define assert_ok(res)                                                                                           \
    ck_assert_msg((res)->rc == 0 && (res)->err[0] == '\0', "exit %d, stderr: %s\nstdout: %s", (res)->rc, (res)->err, \
                  (res)->out)

/* Failed with exactly one line "wbcl-run: ..." on stderr that contains each needle. */
static void assert_fails_(const result *res, const char *const *needles, const char *where)
{
    ck_assert_msg(res->rc != 0, "%s: expected failure, got exit 0 (stdout: %s)", where, res->out);
    ck_assert_msg(!strncmp(res->err, "wbcl-run: ", 10), "%s: stderr does not start with 'wbcl-run: ': '%s'", where,
                  res->err);
    const char *nl = strchr(res->err, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "%s: stderr is not exactly one line: '%s'", where, res->err);
    for (size_t i = 0; needles[i]; i++)
        ck_assert_msg(strstr(res->err, needles[i]) != NULL, "%s: message '%s' does not mention '%s'", where,
                      res->err, needles[i]);
}
#define assert_fails(res, ...)                                                                                   \
    do {                                                                                                         \
        const char *const needles_[] = {__VA_ARGS__, NULL};                                                      \
        assert_fails_((res), needles_, #res " at line " _ck_str(__LINE__));                                    \
    } while (0)
#define _ck_str(x) _ck_str2(x)
#define _ck_str2(x) #x

/* ---- files ------------------------------------------------------------------------------------ */

static void write_npy(const char *path, wbcl_elem elem, int ndim, const size_t *shape, const double *values)
{
    wbcl_array a;
    char err[512];
    ck_assert_msg(wbcl_array_alloc(&a, elem, ndim, shape, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    size_t n = wbcl_array_numel(&a);
    for (size_t i = 0; i < n; i++) {
        switch (elem) {
        case WBCL_ELEM_F32: ((float *)a.data)[i] = (float)values[i]; break;
        case WBCL_ELEM_F64: ((double *)a.data)[i] = values[i]; break;
        case WBCL_ELEM_I32: ((int32_t *)a.data)[i] = (int32_t)values[i]; break;
        case WBCL_ELEM_I64: ((int64_t *)a.data)[i] = (int64_t)values[i]; break;
        default: ck_abort_msg("elem");
        }
    }
    ck_assert_msg(wbcl_npy_write(path, &a, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    wbcl_array_free(&a);
}

/* n random values in [lo, hi), rounded to the element type's precision (ints: integers). */
static double *values(tu_rng *g, size_t n, double lo, double hi, wbcl_elem elem)
{
    double *v = malloc(n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++) {
        double x = tu_uniform(g, lo, hi);
        if (elem == WBCL_ELEM_F32) x = (float)x;
        if (elem == WBCL_ELEM_I32 || elem == WBCL_ELEM_I64) x = floor(x);
        v[i] = x;
    }
    return v;
}

/* Writes a safetensors file of float32 tensors: n (name, ndim, shape, data) entries. */
static void write_st(const char *path, size_t n, const char *const *names, const int *ndims,
                     const size_t (*shapes)[4], const double *const *data)
{
    wbcl_array arr[8];
    const wbcl_array *ptrs[8];
    char err[512];
    for (size_t t = 0; t < n; t++) {
        ck_assert_int_eq(wbcl_array_alloc(&arr[t], WBCL_ELEM_F32, ndims[t], shapes[t], err, sizeof err), WBCL_SUCCESS);
        for (size_t i = 0; i < wbcl_array_numel(&arr[t]); i++) ((float *)arr[t].data)[i] = (float)data[t][i];
        ptrs[t] = &arr[t];
    }
    ck_assert_msg(wbcl_safetensors_write(path, n, names, ptrs, 0, NULL, NULL, err, sizeof err) == WBCL_SUCCESS, "%s",
                  err);
    for (size_t t = 0; t < n; t++) wbcl_array_free(&arr[t]);
}

/* Reads a float32 .npy result; checks its shape. Returns malloc'd data. */
static float *read_result(const char *path, int ndim, const size_t *shape)
{
    wbcl_array a;
    char err[512];
    ck_assert_msg(wbcl_npy_read(path, &a, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    ck_assert_int_eq(a.elem, WBCL_ELEM_F32);
    ck_assert_int_eq(a.ndim, ndim);
    for (int i = 0; i < ndim; i++) ck_assert_uint_eq(a.shape[i], shape[i]);
    float *f = NULL;
    ck_assert_int_eq(wbcl_array_to_f32(&a, &f, err, sizeof err), WBCL_SUCCESS);
    wbcl_array_free(&a);
    return f;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static int file_is(const char *path, const char *text)
{
    char buf[256];
    slurp(path, buf, sizeof buf);
    return !strcmp(buf, text);
}

/* ---- tests ------------------------------------------------------------------------------------ */

START_TEST(list_and_help)
{
    make_dir();
    result *r = run("--list", NULL);
    assert_ok(r);
    static const char *const mods[] = {"check", "layernorm", "gelu", "softmax", "gemm"};
    for (size_t i = 0; i < 5; i++) ck_assert_msg(strstr(r->out, mods[i]), "--list lacks %s: %s", mods[i], r->out);
    r = run("--help", NULL);
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "usage: wbcl-run"));
    r = run("layernorm", "--help", NULL);
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "eps"));
    ck_assert_ptr_nonnull(strstr(r->out, "'weight'"));
    ck_assert_ptr_nonnull(strstr(r->out, "'bias'"));
    r = run(NULL);
    assert_fails(r, "no module", "--list");
    remove_dir();
}
END_TEST

/* LayerNorm tolerance: the tool's own bound, (2d + 32) u times |gamma| (|x| + |mean|) / sigma + |beta|
 * (<= about 6 for these data: x in [-1, 2), gamma in [0.5, 1.5), beta in [-0.5, 0.5)), so
 * atol = (2*37 + 32) * 6e-8 * 6 = 4e-5; the kernels are typically 100x better. */
START_TEST(layernorm_matches_reference)
{
    make_dir();
    tu_rng g;
    tu_rng_seed(&g, 11);
    size_t rows = 5, d = 37, xs[2] = {rows, d};
    double *x = values(&g, rows * d, -1.0, 2.0, WBCL_ELEM_F32);
    double *gamma = values(&g, d, 0.5, 1.5, WBCL_ELEM_F32), *beta = values(&g, d, -0.5, 0.5, WBCL_ELEM_F32);
    write_npy(P("x.npy"), WBCL_ELEM_F32, 2, xs, x);
    const char *names[] = {"weight", "bias"};
    const int nd[] = {1, 1};
    const size_t shapes[][4] = {{d}, {d}};
    const double *data[] = {gamma, beta};
    write_st(P("ln.safetensors"), 2, names, nd, shapes, data);

    result *r = run("layernorm", "--weights", P("ln.safetensors"), "--input", P("x.npy"), "--output", P("y.npy"),
                    "--param", "eps=1e-3", "--verify", NULL);
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "verify: max abs err") && strstr(r->out, "): ok"), "no verify line: %s", r->out);
    float *y = read_result(P("y.npy"), 2, xs);
    double *want = malloc(rows * d * sizeof *want);
    wbcl_ref_layernorm(rows, d, x, gamma, beta, (double)1e-3f, want);
    tu_assert_close(y, want, rows * d, 4e-5, 0.0, "layernorm with weights");
    free(y);

    /* without weights, from a float64 3-D file, default eps */
    size_t x3[3] = {2, 3, 17};
    double *z = values(&g, 2 * 3 * 17, -3.0, 1.0, WBCL_ELEM_F64);
    write_npy(P("z.npy"), WBCL_ELEM_F64, 3, x3, z);
    r = run("--device", getenv("WBCL_TEST_DEVICE") ? getenv("WBCL_TEST_DEVICE") : "0", "layernorm", "--input",
            P("z.npy"), "--output", P("zy.npy"), "--verify", "--quiet", NULL);
    assert_ok(r);
    ck_assert_msg(r->out[0] == '\0', "--quiet printed: %s", r->out);
    y = read_result(P("zy.npy"), 3, x3);
    double *zf = malloc(102 * sizeof *zf);
    for (size_t i = 0; i < 102; i++) zf[i] = (float)z[i]; /* the tool computes on float32 */
    wbcl_ref_layernorm(6, 17, zf, NULL, NULL, (double)1e-5f, want);
    tu_assert_close(y, want, 102, 4e-5, 0.0, "layernorm without weights");
    free(y);
    free(zf);
    free(z);
    free(want);
    free(x);
    free(gamma);
    free(beta);
    remove_dir();
}
END_TEST

/* GELU: exact erf GELU, float64 input. Tolerance 64 u |x| (erf within 16 ulps, see mod_basic.c). */
START_TEST(gelu_matches_reference)
{
    make_dir();
    tu_rng g;
    tu_rng_seed(&g, 12);
    size_t n = 2 * 50, xs[2] = {2, 50};
    double *x = values(&g, n, -6.0, 6.0, WBCL_ELEM_F32); /* float values, stored as f8 */
    write_npy(P("x.npy"), WBCL_ELEM_F64, 2, xs, x);
    result *r = run("gelu", "--input", P("x.npy"), "--output", P("y.npy"), "--verify", NULL);
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "): ok"));
    float *y = read_result(P("y.npy"), 2, xs);
    double *want = malloc(n * sizeof *want);
    wbcl_ref_gelu(n, x, want);
    tu_assert_close(y, want, n, 64 * 6.0 * 6e-8, 0.0, "gelu");
    free(y);
    free(want);
    free(x);
    remove_dir();
}
END_TEST

/* Softmax of integer input (i4), 3-D. Outputs <= 1; tolerance (2d + 32) u = 4.2e-6 absolute. */
START_TEST(softmax_matches_reference)
{
    make_dir();
    tu_rng g;
    tu_rng_seed(&g, 13);
    size_t d = 19, n = 3 * 4 * d, xs[3] = {3, 4, d};
    double *x = values(&g, n, -8.0, 8.0, WBCL_ELEM_I32);
    write_npy(P("x.npy"), WBCL_ELEM_I32, 3, xs, x);
    result *r = run("softmax", "--input", P("x.npy"), "--output", P("y.npy"), "--verify", NULL);
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "): ok"));
    float *y = read_result(P("y.npy"), 3, xs);
    double *want = malloc(n * sizeof *want);
    wbcl_ref_softmax(n / d, d, x, want);
    tu_assert_close(y, want, n, (2.0 * (double)d + 32) * 6e-8, 0.0, "softmax");
    free(y);
    free(want);
    free(x);
    remove_dir();
}
END_TEST

/* GEMM through the tool: plain (B as int64), transposed with alpha (params listed after one
 * --param), and a batch of A with a shared B. Tolerance (2k + 8) u * max |alpha||A||B| with
 * entries below 1 in magnitude: (2*13 + 8) * 6e-8 * 13 = 2.7e-5. */
START_TEST(gemm_matches_reference)
{
    make_dir();
    tu_rng g;
    tu_rng_seed(&g, 14);
    size_t m = 7, n = 5, k = 13;
    double *a = values(&g, 3 * m * k, -1.0, 1.0, WBCL_ELEM_F32);
    double *bi = values(&g, k * n, -2.0, 2.0, WBCL_ELEM_I64); /* integers -2..1 */
    double *want = malloc(3 * m * n * sizeof *want);
    size_t as[2] = {m, k}, bs[2] = {k, n}, cs[2] = {m, n};
    write_npy(P("a.npy"), WBCL_ELEM_F32, 2, as, a);
    write_npy(P("b.npy"), WBCL_ELEM_I64, 2, bs, bi);
    result *r = run("gemm", "--input", P("a.npy"), "--input", P("b.npy"), "--output", P("c.npy"), "--verify", NULL);
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "): ok"));
    float *c = read_result(P("c.npy"), 2, cs);
    wbcl_ref_gemm(0, 0, m, n, k, 1.0, a, k, bi, n, 0.0, want, n);
    tu_assert_close(c, want, m * n, 2 * 2.7e-5, 0.0, "gemm NN");
    free(c);

    /* op(A) = A^T with A stored (k, m), op(B) = B^T with B stored (n, k) */
    size_t ats[2] = {k, m}, bts[2] = {n, k};
    double *bt = values(&g, k * n, -1.0, 1.0, WBCL_ELEM_F32);
    write_npy(P("at.npy"), WBCL_ELEM_F32, 2, ats, a);
    write_npy(P("bt.npy"), WBCL_ELEM_F32, 2, bts, bt);
    r = run("gemm", "--input", P("at.npy"), "--input", P("bt.npy"), "--output", P("ct.npy"), "--param", "ta=1",
            "tb=1", "alpha=0.5", "--verify", NULL);
    assert_ok(r);
    c = read_result(P("ct.npy"), 2, cs);
    wbcl_ref_gemm(1, 1, m, n, k, 0.5, a, m, bt, k, 0.0, want, n);
    tu_assert_close(c, want, m * n, 2.7e-5, 0.0, "gemm TT alpha");
    free(c);

    /* batch of 3 A's, one shared B */
    size_t abs_[3] = {3, m, k}, cbs[3] = {3, m, n};
    write_npy(P("ab.npy"), WBCL_ELEM_F32, 3, abs_, a);
    r = run("gemm", "--input", P("ab.npy"), "--input", P("b.npy"), "--output", P("cb.npy"), NULL);
    assert_ok(r);
    c = read_result(P("cb.npy"), 3, cbs);
    for (size_t p = 0; p < 3; p++) wbcl_ref_gemm(0, 0, m, n, k, 1.0, a + p * m * k, k, bi, n, 0.0, want + p * m * n, n);
    tu_assert_close(c, want, 3 * m * n, 2 * 2.7e-5, 0.0, "gemm batched");
    free(c);
    free(a);
    free(bi);
    free(bt);
    free(want);
    remove_dir();
}
END_TEST

START_TEST(check_passes)
{
    make_dir();
    result *r = run("check", "--param", "size=64", "seed=3", NULL);
    assert_ok(r);
    static const char *const want[] = {"wbcl-run check on device", "driver", "packed", "clblast", "layernorm",
                                       "gelu", "softmax", "add", "reduce_rows", "reduce_cols", "cases ok"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(r->out, want[i]), "check output lacks '%s':\n%s", want[i], r->out);
    ck_assert_msg(!strstr(r->out, "FAIL") && !strstr(r->out, "ERROR"), "%s", r->out);
    r = run("check", "--input", "x.npy", NULL);
    assert_fails(r, "takes no --input");
    remove_dir();
}
END_TEST

START_TEST(bad_files)
{
    make_dir();
    /* missing input: names the file, no output created */
    result *r = run("gelu", "--input", P("nope.npy"), "--output", P("y.npy"), NULL);
    assert_fails(r, "nope.npy");
    ck_assert(!exists(P("y.npy")));
    /* garbage bytes */
    write_text(P("garbage.npy"), "this is not a numpy file at all, just bytes\n");
    r = run("softmax", "--input", P("garbage.npy"), "--output", P("y.npy"), NULL);
    assert_fails(r, "garbage.npy");
    ck_assert(!exists(P("y.npy")));
    /* 5 dimensions, and an empty array */
    size_t s5[5] = {1, 1, 1, 1, 2}, s0[2] = {0, 3};
    double v[2] = {1, 2};
    write_npy(P("five.npy"), WBCL_ELEM_F32, 5, s5, v);
    r = run("gelu", "--input", P("five.npy"), NULL);
    assert_fails(r, "five.npy", "(1, 1, 1, 1, 2)");
    write_npy(P("empty.npy"), WBCL_ELEM_F32, 2, s0, v);
    r = run("gelu", "--input", P("empty.npy"), NULL);
    assert_fails(r, "empty.npy", "(0, 3)");
    /* output in a directory that does not exist: clear error, nothing created */
    size_t xs[2] = {2, 4};
    double x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    write_npy(P("x.npy"), WBCL_ELEM_F32, 2, xs, x);
    r = run("gelu", "--input", P("x.npy"), "--output", P("nodir/y.npy"), NULL);
    assert_fails(r, "nodir", "does not exist");
    ck_assert(!exists(P("nodir")));
    r = run("gelu", "--input", P("x.npy"), "--output", dir, NULL);
    assert_fails(r, "is a directory");
    /* weights: missing file, wrong shape, missing key */
    r = run("layernorm", "--weights", P("none.safetensors"), "--input", P("x.npy"), NULL);
    assert_fails(r, "none.safetensors");
    const char *names[] = {"weight", "bias"};
    const int nd[] = {2, 1};
    const size_t shapes[][4] = {{3, 4}, {4}};
    double w[12] = {0};
    const double *data[] = {w, w};
    write_st(P("bad.safetensors"), 2, names, nd, shapes, data);
    r = run("layernorm", "--weights", P("bad.safetensors"), "--input", P("x.npy"), "--output", P("y.npy"), NULL);
    assert_fails(r, "bad.safetensors: 'weight' has shape (3, 4), expected (4)");
    ck_assert(!exists(P("y.npy")));
    const char *names2[] = {"norm.weight", "norm.bias"};
    const int nd2[] = {1, 1};
    const size_t shapes2[][4] = {{4}, {4}};
    write_st(P("other.safetensors"), 2, names2, nd2, shapes2, data);
    r = run("layernorm", "--weights", P("other.safetensors"), "--input", P("x.npy"), "--output", P("y.npy"), NULL);
    assert_fails(r, "other.safetensors", "missing tensor 'weight'", "norm.weight");
    ck_assert(!exists(P("y.npy")));
    r = run("gelu", "--weights", P("other.safetensors"), "--input", P("x.npy"), NULL);
    assert_fails(r, "takes no --weights");
    remove_dir();
}
END_TEST

START_TEST(bad_command_lines)
{
    make_dir();
    size_t xs[2] = {2, 4};
    double x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    write_npy(P("x.npy"), WBCL_ELEM_F32, 2, xs, x);
    result *r = run("frobnicate", "--input", P("x.npy"), NULL);
    assert_fails(r, "unknown module 'frobnicate'", "--list", "layernorm");
    r = run("gelu", "--input", P("x.npy"), "--param", "foo=1", NULL);
    assert_fails(r, "unknown param 'foo'");
    r = run("layernorm", "--input", P("x.npy"), "--param", "foo=1", NULL);
    assert_fails(r, "unknown param 'foo'", "eps");
    r = run("layernorm", "--input", P("x.npy"), "--param", "eps=abc", NULL);
    assert_fails(r, "eps", "abc");
    r = run("layernorm", "--input", P("x.npy"), "--param", "eps=-1", NULL);
    assert_fails(r, "eps=-1", "> 0");
    r = run("layernorm", "--input", P("x.npy"), "--param", "eps", NULL);
    assert_fails(r, "NAME=VALUE");
    r = run("layernorm", "--input", P("x.npy"), "--param", "eps=1", "--param", "eps=2", NULL);
    assert_fails(r, "eps", "twice");
    r = run("gemm", "--input", P("x.npy"), "--input", P("x.npy"), "--param", "ta=2", NULL);
    assert_fails(r, "ta=2");
    r = run("gemm", "--input", P("x.npy"), "--input", P("x.npy"), "--param", "alpha=nan", NULL);
    assert_fails(r, "alpha");
    r = run("gemm", "--input", P("x.npy"), NULL);
    assert_fails(r, "gemm", "2 --input", "got 1");
    r = run("gelu", "--input", P("x.npy"), "--input", P("x.npy"), NULL);
    assert_fails(r, "gelu", "got 2");
    r = run("gelu", "--input", P("x.npy"), "--frob", "3", NULL);
    assert_fails(r, "--frob");
    r = run("gelu", "--input", NULL);
    assert_fails(r, "--input needs a value");
    r = run("gelu", "extra", "--input", P("x.npy"), NULL);
    assert_fails(r, "unexpected argument 'extra'");
    r = run("--device", "no-such-device-xyz", "gelu", "--input", P("x.npy"), NULL);
    assert_fails(r, "no-such-device-xyz");
    remove_dir();
}
END_TEST

/* A failing run leaves an existing --output file as it was: failures while validating, while
 * loading weights, and inside the library (mismatched GEMM shapes). */
START_TEST(failed_run_keeps_output)
{
    make_dir();
    const char *keep = "keep me\n";
    write_text(P("y.npy"), keep);
    size_t xs[2] = {2, 4}, bs[2] = {5, 6};
    double x[30] = {1, 2, 3, 4, 5, 6, 7, 8};
    write_npy(P("x.npy"), WBCL_ELEM_F32, 2, xs, x);
    write_npy(P("b.npy"), WBCL_ELEM_F32, 2, bs, x);
    result *r = run("layernorm", "--input", P("x.npy"), "--output", P("y.npy"), "--param", "eps=0", NULL);
    assert_fails(r, "eps");
    ck_assert(file_is(P("y.npy"), keep));
    const char *names[] = {"bias"};
    const int nd[] = {1};
    const size_t shapes[][4] = {{4}};
    const double *data[] = {x};
    write_st(P("w.safetensors"), 1, names, nd, shapes, data);
    r = run("layernorm", "--weights", P("w.safetensors"), "--input", P("x.npy"), "--output", P("y.npy"), NULL);
    assert_fails(r, "missing tensor 'weight'");
    ck_assert(file_is(P("y.npy"), keep));
    r = run("gemm", "--input", P("x.npy"), "--input", P("b.npy"), "--output", P("y.npy"), NULL);
    assert_fails(r, "(2, 4)", "(5, 6)");
    ck_assert(file_is(P("y.npy"), keep));
    /* and a successful run replaces it */
    r = run("gelu", "--input", P("x.npy"), "--output", P("y.npy"), NULL);
    assert_ok(r);
    ck_assert(!file_is(P("y.npy"), keep));
    remove_dir();
}
END_TEST

/* A NaN or an Inf in a weight that a module reads from --weights is refused as the library's loaders
 * refuse them (wbcl_weight_load): a failed run (exit 1), one line naming the file, the key, the value
 * and its flat index, and --output left alone (not created when absent, untouched when present).
 * The bad value sits in the first, a middle or the last key a module loads, and at the first or the
 * last flat index. Weights load before any kernel is built, so these runs compile nothing. */
typedef struct bad_weight_case {
    const char *module, *heads;
    size_t n;                   /* tensors in the file                    */
    const char *names[4];
    int ndims[4];
    size_t shapes[4][4];
    size_t key, index;          /* where the bad value goes                */
    double value;
    const char *shown;          /* how the message prints it ("%g")         */
} bad_weight_case;

START_TEST(nonfinite_weights_refused)
{
    make_dir();
    static const bad_weight_case cases[] = {
        /* attn.tssa, d = 4, K = 2 */
        {"attn.tssa", "heads=2", 4, {"qkv.weight", "temp", "to_out.0.weight", "to_out.0.bias"}, {2, 2, 2, 1},
         {{4, 4}, {2, 1}, {4, 4}, {4}}, 0, 5, NAN, "nan"},
        {"attn.tssa", "heads=2", 4, {"qkv.weight", "temp", "to_out.0.weight", "to_out.0.bias"}, {2, 2, 2, 1},
         {{4, 4}, {2, 1}, {4, 4}, {4}}, 3, 3, INFINITY, "inf"},
        /* attn.xca, d = 4, K = 2 */
        {"attn.xca", "heads=2", 4, {"qkv.weight", "temperature", "proj.weight", "proj.bias"}, {2, 3, 2, 1},
         {{12, 4}, {2, 1, 1}, {4, 4}, {4}}, 1, 0, NAN, "nan"},
        {"attn.xca", "heads=2", 4, {"qkv.weight", "temperature", "proj.weight", "proj.bias"}, {2, 3, 2, 1},
         {{12, 4}, {2, 1, 1}, {4, 4}, {4}}, 0, 47, -INFINITY, "-inf"},
        /* attn.mssa (mod_attention.c), d = 4, K = 2 */
        {"attn.mssa", "heads=2", 3, {"qkv.weight", "to_out.0.weight", "to_out.0.bias"}, {2, 2, 1},
         {{4, 4}, {4, 4}, {4}}, 1, 15, INFINITY, "inf"},
    };
    const char *keep = "keep me\n";
    size_t xs[2] = {3, 4};
    double x[12], vals[4][48];
    for (size_t i = 0; i < 12; i++) x[i] = 0.25 * (double)(i % 5) - 0.5;
    write_npy(P("x.npy"), WBCL_ELEM_F32, 2, xs, x);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const bad_weight_case *k = &cases[c];
        const double *data[4];
        for (size_t t = 0; t < k->n; t++) {
            for (size_t i = 0; i < 48; i++) vals[t][i] = 0.1 * (double)(i % 7) - 0.3;
            data[t] = vals[t];
        }
        vals[k->key][k->index] = k->value;
        char wname[64], want[600];
        snprintf(wname, sizeof wname, "bad%zu.safetensors", c);
        const char *wpath = P(wname);
        write_st(wpath, k->n, k->names, k->ndims, k->shapes, data);
        snprintf(want, sizeof want, "%s: '%s' has a non-finite value (%s) at flat index %zu", wpath,
                 k->names[k->key], k->shown, k->index);
        /* odd cases: an existing output stays as it was; even cases: none is created */
        remove(P("y.npy"));
        if (c % 2) write_text(P("y.npy"), keep);
        result *r = run(k->module, "--weights", wpath, "--input", P("x.npy"), "--output", P("y.npy"), "--param",
                        k->heads, NULL);
        ck_assert_msg(r->rc == 1, "%s case %zu: exit %d (stderr: %s)", k->module, c, r->rc, r->err);
        assert_fails(r, want);
        if (c % 2) ck_assert_msg(file_is(P("y.npy"), keep), "%s case %zu: --output was changed", k->module, c);
        else ck_assert_msg(!exists(P("y.npy")), "%s case %zu: --output was created", k->module, c);
    }
    remove_dir();
}
END_TEST

/* redunet.fit then redunet.apply on the same rows, through files: the final features match the
 * double reference (host/ref) written from SPEC §4.1, the saved model replays construction exactly
 * (same kernels, same order: bit-identical features), the objective log has one row per layer, and
 * a fit without labels or with an empty class fails cleanly. Two well-separated Gaussians on S^2
 * (sigma 0.05): memberships are never ambiguous, so float32 tracks the double run; 5 layers of
 * float32 steps, each a few ulps per entry of unit-norm rows: 1e-4 absolute is ~100x the drift. */
/* Under mpirun the plain tool refuses to run the whole job on every rank and names wbcl-run-mpi. */
START_TEST(refuses_mpi_ranks)
{
    make_dir();
    ck_assert_int_eq(setenv("OMPI_COMM_WORLD_SIZE", "2", 1), 0);
    result *r = run("--list", NULL);
    ck_assert_int_eq(unsetenv("OMPI_COMM_WORLD_SIZE"), 0);
    assert_fails(r, "2 MPI ranks", "wbcl-run-mpi");
    ck_assert_int_eq(setenv("OMPI_COMM_WORLD_SIZE", "1", 1), 0); /* one rank: a plain run */
    r = run("--list", NULL);
    ck_assert_int_eq(unsetenv("OMPI_COMM_WORLD_SIZE"), 0);
    assert_ok(r);
    remove_dir();
}
END_TEST

START_TEST(redunet_fit_apply_cli)
{
    make_dir();
    const size_t per = 20, K = 2, d = 3, m = per * K, L = 5;
    float X[120];
    int y[40];
    ck_assert_int_eq(wbcl_redunet_gaussians(d, (int)K, per, 0.05, NULL, 7, X, y), WBCL_SUCCESS);
    double xd[120], yd[40];
    for (size_t i = 0; i < m * d; i++) xd[i] = X[i];
    for (size_t i = 0; i < m; i++) yd[i] = y[i];
    size_t xs[2] = {m, d}, ys[1] = {m};
    write_npy(P("x.npy"), WBCL_ELEM_F32, 2, xs, xd);
    write_npy(P("y.npy"), WBCL_ELEM_I64, 1, ys, yd);
    result *r = run("redunet.fit", "--input", P("x.npy"), "--labels", P("y.npy"), "--output", P("z.npy"), "--save",
                    P("m.safetensors"), "--log", P("obj.csv"), "--param", "layers=5", "--quiet", NULL);
    assert_ok(r);
    float *z = read_result(P("z.npy"), 2, xs);
    double ref[120];
    memcpy(ref, xd, sizeof ref);
    ck_assert_int_eq(wbcl_ref_redunet_fit(m, d, K, L, y, 0.5, 0.1, 500.0, ref, NULL, NULL, NULL, NULL), 0);
    tu_assert_close(z, ref, m * d, 1e-4, 0.0, "redunet.fit features vs double reference");
    /* the objective log: a header and L rows */
    char csv[4096];
    slurp(P("obj.csv"), csv, sizeof csv);
    size_t lines = 0;
    for (const char *c = csv; *c; c++) lines += *c == '\n';
    ck_assert_msg(lines == L + 1, "objective log has %zu lines, expected %zu:\n%s", lines, L + 1, csv);
    /* replay on the training rows */
    r = run("redunet.apply", "--model", P("m.safetensors"), "--input", P("x.npy"), "--output", P("z2.npy"), NULL);
    assert_ok(r);
    float *z2 = read_result(P("z2.npy"), 2, xs);
    ck_assert_msg(memcmp(z, z2, m * d * sizeof *z) == 0, "redunet.apply does not replay redunet.fit exactly");
    /* failures: no labels; an empty class (labels 0 and 2 only) */
    r = run("redunet.fit", "--input", P("x.npy"), "--output", P("z3.npy"), NULL);
    assert_fails(r, "--labels");
    for (size_t i = 0; i < m; i++) yd[i] = y[i] ? 2 : 0;
    write_npy(P("y2.npy"), WBCL_ELEM_I64, 1, ys, yd);
    r = run("redunet.fit", "--input", P("x.npy"), "--labels", P("y2.npy"), "--output", P("z3.npy"), NULL);
    assert_fails(r, "class 1");
    ck_assert(!exists(P("z3.npy")));
    free(z);
    free(z2);
    remove_dir();
}
END_TEST

/* ista: CRATE's FeedForward through files against the double reference. Outputs are ReLU of sums of
 * d + d*d products of values <= 1 in size; 1e-5 absolute bounds float32 rounding for d = 12. */
START_TEST(ista_cli)
{
    make_dir();
    tu_rng g;
    tu_rng_seed(&g, 31);
    const size_t rows = 7, d = 12;
    double *x = values(&g, rows * d, -1.0, 1.0, WBCL_ELEM_F32), *W = values(&g, d * d, -0.3, 0.3, WBCL_ELEM_F32);
    size_t xs[2] = {rows, d};
    write_npy(P("x.npy"), WBCL_ELEM_F32, 2, xs, x);
    const char *names[1] = {"weight"};
    const int nd[1] = {2};
    const size_t shp[1][4] = {{d, d}};
    const double *data[1] = {W};
    write_st(P("w.safetensors"), 1, names, nd, shp, data);
    result *r = run("ista", "--weights", P("w.safetensors"), "--input", P("x.npy"), "--output", P("y.npy"), NULL);
    assert_ok(r);
    float *yv = read_result(P("y.npy"), 2, xs);
    double want[84];
    wbcl_ref_crate_ista(rows, d, x, W, 0.1, 0.1, want);
    tu_assert_close(yv, want, rows * d, 1e-5, 0.0, "ista");
    for (size_t i = 0; i < rows * d; i++) ck_assert_msg(yv[i] >= 0.0f, "ista output %zu is negative", i);
    free(yv);
    free(x);
    free(W);
    remove_dir();
}
END_TEST

/* --variant: the GPU-shaped kernels give the CPU-shaped ones' softmax within float32 rounding (both
 * also against the double reference, tolerance (2d + 32) u as above); the run says which family it
 * used; the option beats $WBCL_VARIANT, even a bad one; a bad value is a usage error (status 2).
 * One tiny softmax: the ops programs of both families are those check_passes builds anyway. */
START_TEST(variant_option)
{
    make_dir();
    const char *prev = getenv("WBCL_VARIANT");
    char *saved = prev ? strdup(prev) : NULL;
    ck_assert(!prev || saved);
    ck_assert_int_eq(unsetenv("WBCL_VARIANT"), 0);
    tu_rng g;
    tu_rng_seed(&g, 17);
    size_t d = 19, n = 2 * 3 * d, xs[3] = {2, 3, d};
    double *x = values(&g, n, -8.0, 8.0, WBCL_ELEM_F32);
    write_npy(P("x.npy"), WBCL_ELEM_F32, 3, xs, x);
    result *r = run("--variant", "cpu", "softmax", "--input", P("x.npy"), "--output", P("yc.npy"), NULL);
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "kernel variant: cpu-shaped (--variant cpu)"), "%s", r->out);
    r = run("softmax", "--variant=gpu", "--input", P("x.npy"), "--output", P("yg.npy"), NULL);
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "kernel variant: gpu-shaped (--variant gpu)"), "%s", r->out);
    float *yc = read_result(P("yc.npy"), 3, xs), *yg = read_result(P("yg.npy"), 3, xs);
    double *want = malloc(n * sizeof *want), *ycd = malloc(n * sizeof *ycd);
    ck_assert(want && ycd);
    wbcl_ref_softmax(n / d, d, x, want);
    const double tol = (2.0 * (double)d + 32) * 6e-8;
    tu_assert_close(yc, want, n, tol, 0.0, "softmax --variant cpu");
    tu_assert_close(yg, want, n, tol, 0.0, "softmax --variant gpu");
    for (size_t i = 0; i < n; i++) ycd[i] = yc[i];
    tu_assert_close(yg, ycd, n, 2 * tol, 0.0, "softmax --variant gpu against --variant cpu");

    /* the option overrides the environment, a bad value there included; without it that fails */
    ck_assert_int_eq(setenv("WBCL_VARIANT", "sideways", 1), 0);
    r = run("--variant", "auto", "--quiet", "softmax", "--input", P("x.npy"), NULL);
    assert_ok(r);
    r = run("softmax", "--input", P("x.npy"), NULL);
    assert_fails(r, "WBCL_VARIANT", "'sideways'", "cpu, gpu or auto");
    ck_assert_int_eq(setenv("WBCL_VARIANT", "gpu", 1), 0);
    r = run("softmax", "--input", P("x.npy"), NULL);
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "kernel variant: gpu-shaped ($WBCL_VARIANT=gpu)"), "%s", r->out);
    if (saved) ck_assert_int_eq(setenv("WBCL_VARIANT", saved, 1), 0);
    else ck_assert_int_eq(unsetenv("WBCL_VARIANT"), 0);
    free(saved);

    /* bad values: usage errors before any device work */
    r = run("--variant", "fast", "softmax", "--input", P("x.npy"), NULL);
    assert_fails(r, "--variant", "cpu, gpu or auto", "'fast'");
    ck_assert_int_eq(r->rc, 2);
    r = run("softmax", "--input", P("x.npy"), "--variant", NULL);
    assert_fails(r, "--variant needs a value");
    ck_assert_int_eq(r->rc, 2);
    r = run("--variant", "cpu", "--variant", "gpu", "softmax", "--input", P("x.npy"), NULL);
    assert_fails(r, "--variant given twice");
    r = run("--help", NULL);
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "--variant") && strstr(r->out, "$WBCL_VARIANT"), "--help: %s", r->out);
    free(yc);
    free(yg);
    free(ycd);
    free(want);
    free(x);
    remove_dir();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run");
    TCase *tc = tcase_create("run");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, list_and_help);
    tcase_add_test(tc, layernorm_matches_reference);
    tcase_add_test(tc, gelu_matches_reference);
    tcase_add_test(tc, softmax_matches_reference);
    tcase_add_test(tc, gemm_matches_reference);
    tcase_add_test(tc, check_passes);
    tcase_add_test(tc, bad_files);
    tcase_add_test(tc, bad_command_lines);
    tcase_add_test(tc, failed_run_keeps_output);
    tcase_add_test(tc, nonfinite_weights_refused);
    tcase_add_test(tc, refuses_mpi_ranks);
    tcase_add_test(tc, redunet_fit_apply_cli);
    tcase_add_test(tc, ista_cli);
    tcase_add_test(tc, variant_option);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
