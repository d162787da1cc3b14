#define _XOPEN_SOURCE 700 /* mkdtemp, nftw */
#include "testutil.h"

#include <ftw.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

wbcl_context *tu_context(void)
{
    const char *sel = getenv("WBCL_TEST_DEVICE");
    char err[1024];
    wbcl_context *ctx = NULL;
    wbcl_status st = wbcl_context_create(sel, &ctx, err, sizeof err);
    ck_assert_msg(st == WBCL_SUCCESS, "cannot open a context: %s: %s", wbcl_status_name(st), err);
    return ctx;
}

static char tu_tmpdir[256];

static int tu_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void tu_tmp_cleanup(void)
{
    if (tu_tmpdir[0]) nftw(tu_tmpdir, tu_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *tu_tmp_path(const char *name)
{
    static char buf[4][512];
    static int i;
    i = (i + 1) % 4;
    if (!tu_tmpdir[0]) {
        snprintf(tu_tmpdir, sizeof tu_tmpdir, "/tmp/wbcl_test_XXXXXX");
        ck_assert(mkdtemp(tu_tmpdir) != NULL);
        atexit(tu_tmp_cleanup);
    }
    snprintf(buf[i], sizeof buf[i], "%s/%s", tu_tmpdir, name);
    return buf[i];
}

void tu_rng_seed(tu_rng *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull; if (!r->s) r->s = 1; }

static uint64_t next(tu_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

double tu_uniform(tu_rng *r, double lo, double hi) { return lo + (hi - lo) * ((double)(next(r) >> 11) / 9007199254740992.0); }

double tu_normal(tu_rng *r)
{
    double u1 = tu_uniform(r, 1e-300, 1.0), u2 = tu_uniform(r, 0.0, 1.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

float *tu_random_f32(tu_rng *r, size_t n, double lo, double hi)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) p[i] = (float)tu_uniform(r, lo, hi);
    return p;
}

double tu_max_ratio(const float *got, const double *want, size_t n, double atol, double rtol, size_t *worst)
{
    double best = 0.0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i];
        double r = isfinite(g) || (!isfinite(want[i]) && g == want[i])
                       ? fabs(g - want[i]) / (atol + rtol * fabs(want[i]))
                       : INFINITY;
        if (isnan(r)) r = (g == want[i]) ? 0.0 : INFINITY;
        if (r > best) {
            best = r;
            wi = i;
        }
    }
    if (worst) *worst = wi;
    return best;
}

#define CANARY 8
static const uint32_t canary_bits = 0xDEADBEEFu;

float *tu_guarded_alloc(size_t n)
{
    float *p = malloc((n + CANARY) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    memset(p, 0, n * sizeof *p);
    for (size_t i = 0; i < CANARY; i++) memcpy(&p[n + i], &canary_bits, 4);
    return p;
}

int tu_canary_ok(const float *p, size_t n)
{
    for (size_t i = 0; i < CANARY; i++)
        if (memcmp(&p[n + i], &canary_bits, 4) != 0) return 0;
    return 1;
}

void tu_guarded_free(float *p) { free(p); }

uint64_t tu_launches(const wbcl_context *ctx, const char *kernel)
{
    const char *name;
    uint64_t n, total = 0;
    for (size_t i = 0; wbcl_context_kernel_profile(ctx, i, &name, NULL, &n); i++)
        if (!strcmp(name, kernel)) total += n;
    return total;
}

double *tu_to_f64(const float *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
