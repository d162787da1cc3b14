/* Deployment: `wbcl-info --export-binaries DIR` saves every program for the device, and a
 * process with WBCL_BINARY_DIR=DIR runs the operators without compiling any source — checked by
 * pointing WBCL_KERNEL_DIR at kernels that do not compile and turning the disk cache off: the
 * ops still run and give the reference result, nothing is built from source (build time is
 * that of loading binaries), and a program the export does not contain fails with the build
 * error of the broken source (so the broken directory really is in use). */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define INFO WBCL_TOOLS_DIR "/wbcl-info"

static char root[256];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int count_bins(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t l = strlen(e->d_name);
        n += l > 4 && strcmp(e->d_name + l - 4, ".bin") == 0;
    }
    closedir(d);
    return n;
}

START_TEST(exported_binaries_need_no_source)
{
    snprintf(root, sizeof root, "/tmp/wbcl-test-deploy-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    char exp[512], broken[512], errlog[512];
    snprintf(exp, sizeof exp, "%s/binaries", root);
    snprintf(broken, sizeof broken, "%s/broken-kernels", root);
    snprintf(errlog, sizeof errlog, "%s/export.err", root);

    /* 1. export with the tool (every family, every operator once) */
    const char *dev = getenv("WBCL_TEST_DEVICE");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fo = open("/dev/null", O_WRONLY), fe = open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fo < 0 || fe < 0) _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        execl(INFO, INFO, "--device", dev && *dev ? dev : "0", "--export-binaries", exp, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "wbcl-info --export-binaries failed (status %d)",
                  status);
    int nbin = count_bins(exp);
    ck_assert_msg(nbin >= 14, "only %d program binaries exported", nbin);

    /* 2. broken sources for every family, the cache off, the export as binary directory */
    ck_assert_int_eq(mkdir(broken, 0700), 0);
    const char *fams[64];
    int nf = 0;
    fams[nf++] = "common";
    for (const char *f; nf < 64 && (f = wbcl_kernel_family((size_t)nf - 1)) != NULL;) fams[nf++] = f;
    ck_assert_int_ge(nf, 14);
    for (int i = 0; i < nf; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s.cl", broken, fams[i]);
        FILE *f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fputs("#error this kernel source is deliberately broken\n", f);
        fclose(f);
    }
    setenv("WBCL_KERNEL_DIR", broken, 1);
    setenv("WBCL_BINARY_DIR", exp, 1);
    setenv("WBCL_CACHE_DIR", "off", 1);
    wbcl_context *ctx = tu_context();

    /* GEMM (packed), layernorm, softmax attention, ISTA: all from the binaries, results right */
    enum { M = 67 };
    tu_rng rng;
    tu_rng_seed(&rng, 3);
    float *a = tu_random_f32(&rng, M * M, -1, 1), *b = tu_random_f32(&rng, M * M, -1, 1);
    float *c = malloc(M * M * sizeof *c);
    ck_assert_ptr_nonnull(c);
    size_t s2[2] = {M, M};
    wbcl_tensor *A = NULL, *B = NULL, *C = NULL;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, s2, WBCL_F32, a, &A), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, s2, WBCL_F32, b, &B), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 2, s2, WBCL_F32, NULL, &C), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_PACKED), WBCL_SUCCESS);
    wbcl_status st = wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, A, B, 0.0f, C);
    ck_assert_msg(st == WBCL_SUCCESS, "GEMM from exported binaries: %s", wbcl_context_last_error(ctx));
    ck_assert_int_eq(wbcl_tensor_read(ctx, C, c, M * M), WBCL_SUCCESS);
    double *ad = tu_to_f64(a, M * M), *bd = tu_to_f64(b, M * M), *cd = calloc(M * M, sizeof *cd);
    ck_assert_ptr_nonnull(cd);
    wbcl_ref_gemm(0, 0, M, M, M, 1.0, ad, M, bd, M, 0.0, cd, M);
    tu_assert_close(c, cd, M * M, 1e-5, 1e-4, "GEMM from exported binaries");
    st = wbcl_layernorm(ctx, A, NULL, NULL, 1e-5f, C);
    ck_assert_msg(st == WBCL_SUCCESS, "layernorm from exported binaries: %s", wbcl_context_last_error(ctx));
    ck_assert_int_eq(wbcl_tensor_read(ctx, C, c, M * M), WBCL_SUCCESS);
    wbcl_ref_layernorm(M, M, ad, NULL, NULL, 1e-5, cd);
    tu_assert_close(c, cd, M * M, 1e-5, 1e-4, "layernorm from exported binaries");
    /* attention with the head dimension wbcl-bench --quick uses (p = 16): a shape-specialized program */
    size_t sh[4] = {1, 2, 45, 16};
    wbcl_tensor *q = NULL, *o = NULL;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 4, sh, WBCL_F32, a, &q), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 4, sh, WBCL_F32, NULL, &o), WBCL_SUCCESS);
    st = wbcl_attention_mssa_heads(ctx, q, 0.25f, 0, o);
    ck_assert_msg(st == WBCL_SUCCESS, "MSSA from exported binaries: %s", wbcl_context_last_error(ctx));
    ck_assert_int_eq(wbcl_context_finish(ctx), WBCL_SUCCESS);
    /* loading binaries, not compiling: PERF-NOTES measures 5-20 ms per program from a binary vs
     * 0.5-1 s from source; allow 300 ms per program for a loaded machine, far below a compile */
    uint64_t build_ms = wbcl_context_build_ns(ctx) / 1000000;
    ck_assert_msg(build_ms < 4 * 300, "building took %llu ms: compiled from source?", (unsigned long long)build_ms);

    /* a program that was not exported (head dimension 24) must fall back to the broken source */
    size_t sx[4] = {1, 2, 45, 24};
    wbcl_tensor *q2 = NULL, *o2 = NULL;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 4, sx, WBCL_F32, NULL, &q2), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 4, sx, WBCL_F32, NULL, &o2), WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_attention_mssa_heads(ctx, q2, 0.25f, 0, o2), WBCL_ERROR_BUILD, "deliberately broken");

    wbcl_tensor *all[] = {A, B, C, q, o, q2, o2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wbcl_tensor_destroy(all[i]);
    wbcl_context_destroy(ctx);
    unsetenv("WBCL_KERNEL_DIR");
    unsetenv("WBCL_BINARY_DIR");
    free(a); free(b); free(c); free(ad); free(bd); free(cd);
    nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("deploy");
    TCase *tc = tcase_create("deploy");
    tcase_set_timeout(tc, 1500);
    tcase_add_test(tc, exported_binaries_need_no_source);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
