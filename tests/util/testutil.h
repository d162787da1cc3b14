/* Helpers shared by the Check suites: a context on the test device, random
 * data, comparisons with a stated tolerance, canary-guarded host buffers. */
#ifndef WBCL_TESTUTIL_H
#define WBCL_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "wbcl/wbcl.h"

/* Opens a context on $WBCL_TEST_DEVICE (else $WBCL_DEVICE, else the default);
 * fails the test with the error message if that is impossible. */
wbcl_context *tu_context(void);
/* dir/name in a scratch directory of this process (made on first use, removed with its files at
 * exit; each forked test has its own). Four buffers in turn: copy a path that must outlive three
 * more calls. */
const char *tu_tmp_path(const char *name);

/* Deterministic pseudo-random numbers (xorshift64*), uniform in [lo, hi). */
typedef struct { uint64_t s; } tu_rng;
void tu_rng_seed(tu_rng *r, uint64_t seed);
double tu_uniform(tu_rng *r, double lo, double hi);
double tu_normal(tu_rng *r);
float *tu_random_f32(tu_rng *r, size_t n, double lo, double hi); /* malloc'd */

/* Max |got - want| / (atol + rtol*|want|) over n elements; <= 1 means within tolerance.
 * Reports the worst index through *worst if not NULL. NaN in got counts as failure (inf ratio). */
double tu_max_ratio(const float *got, const double *want, size_t n, double atol, double rtol, size_t *worst);
/* ck_assert that got matches want within (atol, rtol), with a message naming what and the worst index. */
#define tu_assert_close(got, want, n, atol, rtol, what)                                                     \
    do {                                                                                                  \
        size_t w_ = 0;                                                                                    \
        double r_ = tu_max_ratio((got), (want), (n), (atol), (rtol), &w_);                                \
        ck_assert_msg(r_ <= 1.0, "%s: element %zu got %.9g want %.9g (ratio %.3g to tolerance)", (what), \
                      w_, (double)(got)[w_], (double)(want)[w_], r_);                                     \
    } while (0)

/* Host buffer of n floats followed by canary words; tu_canary_ok checks them. */
float *tu_guarded_alloc(size_t n);
int tu_canary_ok(const float *p, size_t n);
void tu_guarded_free(float *p);

double *tu_to_f64(const float *x, size_t n); /* malloc'd copy */

/* Launches of the kernel named `kernel` the context counted since timing was turned on (or
 * wbcl_context_reset_kernel_ns): which kernel ran, for tests of a dispatch. */
uint64_t tu_launches(const wbcl_context *ctx, const char *kernel);

/* Asserts a status and that the context's message contains `needle`. */
#define tu_assert_status(ctx, got, want, needle)                                                        \
    do {                                                                                                \
        wbcl_status g_ = (got);                                                                         \
        ck_assert_msg(g_ == (want), "status %s, expected %s (message: %s)", wbcl_status_name(g_),       \
                      wbcl_status_name(want), wbcl_context_last_error(ctx));                            \
        ck_assert_msg(strstr(wbcl_context_last_error(ctx), (needle)) != NULL,                           \
                      "message '%s' does not mention '%s'", wbcl_context_last_error(ctx), (needle));     \
    } while (0)

/* Runs a suite; returns the process exit status. */
int tu_run(Suite *s);

#endif
