/* Helpers the benchmarks share: a monotonic clock and the median of repeated timings.
 * Include after the feature-test macros (_POSIX_C_SOURCE) and <time.h>, <stdlib.h>. */
#ifndef WBCL_PERF_BENCH_UTIL_H
#define WBCL_PERF_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v in place. */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
