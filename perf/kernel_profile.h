/* perf/kernel_profile.h: prints the per-kernel device time a context
 * accumulated with wbcl_context_set_timing (wbcl_context_kernel_profile),
 * largest first, divided by `per` (e.g. the number of layers timed), as
 * "profile NAME MS LAUNCHES" lines plus a "profile sum" line. Every launch is
 * waited for while timing is on, so the sum excludes host gaps and
 * overlaps; compare kernels, not the sum with wall times. */
#ifndef WBCL_PERF_KERNEL_PROFILE_H
#define WBCL_PERF_KERNEL_PROFILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "wbcl/wbcl.h"

typedef struct kp_row { const char *name; uint64_t ns, launches; } kp_row;

static int kp_cmp(const void *a, const void *b)
{
    const kp_row *x = a, *y = b;
    return (y->ns > x->ns) - (y->ns < x->ns);
}

static void print_kernel_profile(const wbcl_context *ctx, FILE *f, double per)
{
    size_t n = 0;
    while (wbcl_context_kernel_profile(ctx, n, NULL, NULL, NULL)) n++;
    kp_row *r = calloc(n ? n : 1, sizeof *r);
    if (!r) {
        fprintf(f, "profile: out of memory for %zu rows\n", n);
        return;
    }
    for (size_t i = 0; i < n; i++) wbcl_context_kernel_profile(ctx, i, &r[i].name, &r[i].ns, &r[i].launches);
    qsort(r, n, sizeof *r, kp_cmp);
    double sum = 0;
    for (size_t i = 0; i < n && r[i].ns; i++) {
        fprintf(f, "profile %-28s %9.3f ms %8.1f launches\n", r[i].name, 1e-6 * (double)r[i].ns / per,
                (double)r[i].launches / per);
        sum += 1e-6 * (double)r[i].ns / per;
    }
    fprintf(f, "profile %-28s %9.3f ms\n", "sum", sum);
    free(r);
}

#endif
