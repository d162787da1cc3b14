/* Start-up cost: how long a fresh process takes to reach its first GEMM
 * result (packed path), with cold and warm program caches.
 *
 *   bench_startup [--reps N] [--n N]     parent: runs the scenarios below
 *   bench_startup child [n]              one measurement (what the parent runs)
 *
 * The parent makes a temporary directory and runs itself as a child process
 * (fork + exec, a genuinely new process each time) in four scenarios:
 *   cold        empty WBCL_CACHE_DIR and empty POCL_CACHE_DIR
 *   warm        both caches as the cold run left them (median of N runs)
 *   wbcl only   warm WBCL_CACHE_DIR, a new empty POCL_CACHE_DIR each run:
 *               our binary cache alone (what shipping prebuilt binaries gives)
 *   pocl only   WBCL_CACHE_DIR=off, warm POCL_CACHE_DIR: PoCL's cache alone
 * and, for deployment (issue 7):
 *   source      WBCL_CACHE_DIR=off and a new empty POCL_CACHE_DIR each run: every
 *               start compiles from source (median of N)
 *   exported    WBCL_BINARY_DIR = binaries exported once by a child (the same
 *               calls wbcl-info --export-binaries makes), WBCL_CACHE_DIR=off, a new
 *               empty POCL_CACHE_DIR each run: the prebuilt-binary deployment path
 * For each it reports the time spent in clBuildProgram (wbcl_context_build_ns),
 * the wall time from the child's main() to the first GEMM result on the host
 * (context creation, tensor upload, build, kernel compile-on-first-launch,
 * run, read back), and the whole child process wall time as the parent sees
 * it (exec, dynamic loading, and saving the cache on exit included). The
 * first GEMM result is checked against a double-precision host product. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wbcl/wbcl.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* ---- child: one measurement, printed as one line ---------------------------------- */
static int child(int n)
{
    const double t0 = now_ms();
    const size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    if (!a || !b || !c) return 1;
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
        b[i] = (float)((i * 53) % 97) / 97.0f - 0.5f;
    }
    char err[1024];
    wbcl_context *ctx = NULL;
    wbcl_status st = wbcl_context_create(NULL, &ctx, err, sizeof err);
    if (st) {
        fprintf(stderr, "context: %s: %s\n", wbcl_status_name(st), err);
        return 1;
    }
    const double t_ctx = now_ms();
    size_t shape[2] = {(size_t)n, (size_t)n};
    wbcl_tensor *A = NULL, *B = NULL, *C = NULL;
    st = wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_PACKED);
    if (!st) st = wbcl_tensor_create(ctx, 2, shape, WBCL_F32, a, &A);
    if (!st) st = wbcl_tensor_create(ctx, 2, shape, WBCL_F32, b, &B);
    if (!st) st = wbcl_tensor_create(ctx, 2, shape, WBCL_F32, NULL, &C);
    if (!st) st = wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, A, B, 0.0f, C);
    if (!st) st = wbcl_tensor_read(ctx, C, c, nn);
    const double t_gemm = now_ms();
    if (st) {
        fprintf(stderr, "first GEMM: %s: %s\n", wbcl_status_name(st), wbcl_context_last_error(ctx));
        return 1;
    }
    const double build_ms = 1e-6 * (double)wbcl_context_build_ns(ctx);
    /* check (outside the timed window): max relative error vs double, every 8th row */
    double emax = 0, rmax = 0;
    for (int i = 0; i < n; i += 8)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < n; p++) s += (double)a[(size_t)i * n + p] * b[(size_t)p * n + j];
            double e = fabs(s - c[(size_t)i * n + j]);
            if (!(e <= emax)) emax = e;
            if (fabs(s) > rmax) rmax = fabs(s);
        }
    wbcl_tensor_destroy(A);
    wbcl_tensor_destroy(B);
    wbcl_tensor_destroy(C);
    const char *exp = getenv("WBCL_BENCH_EXPORT");
    if (exp && *exp && (st = wbcl_context_export_binaries(ctx, exp)) != WBCL_SUCCESS) {
        fprintf(stderr, "export: %s\n", wbcl_context_last_error(ctx));
        return 1;
    }
    const double t_d = now_ms();
    wbcl_context_destroy(ctx); /* saves used programs into WBCL_CACHE_DIR */
    const double t_end = now_ms();
    free(a); free(b); free(c);
    printf("build_ms=%.3f first_gemm_ms=%.3f context_ms=%.3f destroy_ms=%.3f rel_err=%.3g\n", build_ms, t_gemm - t0,
           t_ctx - t0, t_end - t_d, rmax > 0 ? emax / rmax : emax);
    return rmax > 0 && emax / rmax < 1e-5 ? 0 : 3;
}

/* ---- parent ------------------------------------------------------------------------ */
typedef struct { double build, first, ctx, destroy, proc; } sample;

/* Runs `self child n` with the two cache variables set; parses its line. */
static int run_child2(const char *self, int n, const char *wbcl_dir, const char *pocl_dir, const char *bin_dir,
                      const char *export_dir, sample *out)
{
    int fd[2];
    if (pipe(fd) != 0) return -1;
    const double t0 = now_ms();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        setenv("WBCL_CACHE_DIR", wbcl_dir, 1);
        setenv("POCL_CACHE_DIR", pocl_dir, 1);
        if (bin_dir) setenv("WBCL_BINARY_DIR", bin_dir, 1);
        else unsetenv("WBCL_BINARY_DIR");
        if (export_dir) setenv("WBCL_BENCH_EXPORT", export_dir, 1);
        else unsetenv("WBCL_BENCH_EXPORT");
        char nb[32];
        snprintf(nb, sizeof nb, "%d", n);
        execl(self, self, "child", nb, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char line[512] = {0};
    size_t used = 0;
    ssize_t r;
    while (used + 1 < sizeof line && (r = read(fd[0], line + used, sizeof line - 1 - used)) > 0) used += (size_t)r;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    out->proc = now_ms() - t0;
    double err;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        sscanf(line, "build_ms=%lf first_gemm_ms=%lf context_ms=%lf destroy_ms=%lf rel_err=%lf", &out->build,
               &out->first, &out->ctx, &out->destroy, &err) != 5) {
        fprintf(stderr, "child failed (status %d): %s\n", status, line);
        return -1;
    }
    return 0;
}

static int run_child(const char *self, int n, const char *wbcl_dir, const char *pocl_dir, sample *out)
{
    return run_child2(self, n, wbcl_dir, pocl_dir, NULL, NULL, out);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double med(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void row(const char *name, const char *wbcl, const char *pocl, sample *s, int reps)
{
    double b[64], f[64], c[64], d[64], p[64];
    for (int i = 0; i < reps; i++) {
        b[i] = s[i].build;
        f[i] = s[i].first;
        c[i] = s[i].ctx;
        d[i] = s[i].destroy;
        p[i] = s[i].proc;
    }
    printf("| %s | %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f |\n", name, wbcl, pocl, reps, med(b, reps),
           med(c, reps), med(f, reps), med(d, reps), med(p, reps));
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "child") == 0) return child(argc >= 3 ? atoi(argv[2]) : 256);
    int reps = 5, n = 256;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps N] [--n N] | %s child [n]\n", argv[0], argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    if (n < 1) n = 256;
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        fprintf(stderr, "cannot find my own executable\n");
        return 1;
    }
    self[sl] = 0;
    char root[] = "/tmp/wbcl-startup-XXXXXX";
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    char wdir[512], pdir[512], tmp[512];
    snprintf(wdir, sizeof wdir, "%s/wbcl", root);
    snprintf(pdir, sizeof pdir, "%s/pocl", root);

    char err[512];
    wbcl_context *ctx = NULL;
    if (wbcl_context_create(NULL, &ctx, err, sizeof err) != WBCL_SUCCESS) {
        fprintf(stderr, "context: %s\n", err);
        return 1;
    }
    const wbcl_device_info *d = wbcl_context_device(ctx);
    printf("device: %s (%s, driver %s); first GEMM: %d x %d x %d, packed path\n\n", d->name, d->platform_name,
           d->driver_version, n, n, n);
    wbcl_context_destroy(ctx); /* built nothing: the scenario caches below start empty */
    printf("| scenario | WBCL_CACHE_DIR | POCL_CACHE_DIR | runs | clBuildProgram ms | context creation ms | "
           "main() to first GEMM result ms | context destroy (cache save) ms | process wall ms |\n"
           "|---|---|---|---|---|---|---|---|---|\n");
    fflush(stdout);
    sample s[64];
    if (run_child(self, n, wdir, pdir, &s[0])) return 1;
    row("cold", "empty", "empty", s, 1);
    fflush(stdout);
    for (int i = 0; i < reps; i++)
        if (run_child(self, n, wdir, pdir, &s[i])) return 1;
    row("warm", "warm", "warm", s, reps);
    fflush(stdout);
    for (int i = 0; i < reps; i++) {
        snprintf(tmp, sizeof tmp, "%s/pocl-empty-%d", root, i);
        if (run_child(self, n, wdir, tmp, &s[i])) return 1;
    }
    row("wbcl binary cache only", "warm", "empty", s, reps);
    fflush(stdout);
    for (int i = 0; i < reps; i++)
        if (run_child(self, n, "off", pdir, &s[i])) return 1;
    row("PoCL cache only", "off", "warm", s, reps);
    fflush(stdout);
    for (int i = 0; i < reps; i++) {
        snprintf(tmp, sizeof tmp, "%s/pocl-src-%d", root, i);
        if (run_child(self, n, "off", tmp, &s[i])) return 1;
    }
    row("source (no caches)", "off", "empty", s, reps);
    fflush(stdout);
    char bdir[512];
    snprintf(bdir, sizeof bdir, "%s/exported", root);
    snprintf(tmp, sizeof tmp, "%s/pocl-export", root);
    if (run_child2(self, n, "off", tmp, NULL, bdir, &s[0])) return 1; /* the export itself, not reported */
    for (int i = 0; i < reps; i++) {
        snprintf(tmp, sizeof tmp, "%s/pocl-bin-%d", root, i);
        if (run_child2(self, n, "off", tmp, bdir, NULL, &s[i])) return 1;
    }
    row("exported binaries (WBCL_BINARY_DIR)", "off", "empty", s, reps);
    nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
