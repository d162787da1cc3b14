/* Parameter tables shipped with the library (include/wbcl/tuning.h, source 3): one text table
 * per device the project measured, in the file format of tuning.h, chosen by a context whose
 * device name, vendor, driver version and kernel variant equal the table's header. Each was
 * written by wbcl-tune on that device; perf/RESULTS.md records tuned against default. Devices
 * not listed here (H200/H100, PoCL on AVX2, ...) keep the defaults until someone runs
 * wbcl-tune there and adds its output here. */
#include <stddef.h>

#include "internal.h"

static const struct { const char *name; const char *text; } tables[] = {
    /* this project's machine: PoCL 3.1 (Debian) on 2 cores of a Xeon with AVX-512, 2026-11-26;
     * `wbcl-tune --budget 300 --reps 7` on a machine shared with other jobs (perf/RESULTS.md,
     * "Tuned parameters": a second run picked the same winners) */
    {"pocl-3.1-skylake-avx512-xeon-2.5ghz",
     "# wbcl kernel parameter table (include/wbcl/tuning.h)\n"
     "# written by wbcl-tune (budget 300 s, 7 call(s) per shape)\n"
     "# gemm: mr=14 nr=32 (default mr=12 nr=32)\n"
     "#   (8*197)x384->1536: default 19.818 ms, tuned 20.008 ms, x0.990\n"
     "#   (8*197)x1536->384: default 32.037 ms, tuned 31.556 ms, x1.015\n"
     "#   1024^3: default 23.730 ms, tuned 22.398 ms, x1.059\n"
     "# attention: qb=4 g=4 vw=16 (default qb=4 g=2 vw=16)\n"
     "#   BK 48 N 197 p 64: default 13.892 ms, tuned 13.783 ms, x1.008\n"
     "#   BK 8 N 1024 p 64: default 41.853 ms, tuned 41.681 ms, x1.004\n"
     "#   BK 4 N 4096 p 64: default 464.368 ms, tuned 362.813 ms, x1.280\n"
     "format = wbcl-tuning-1\n"
     "device = pthread-skylake-avx512-Intel(R) Xeon(R) Processor @ 2.50GHz\n"
     "vendor = GenuineIntel\n"
     "driver = 3.1+debian\n"
     "variant = cpu\n"
     "wbcl = 0.1.0\n"
     "gemm.mr = 14\n"
     "gemm.nr = 32\n"
     "attention.p64.qb = 4\n"
     "attention.p64.g = 4\n"
     "attention.p64.vw = 16\n"},
    {NULL, NULL},
};

const char *wbcl__shipped_table(size_t i, const char **name)
{
    if (i >= sizeof tables / sizeof tables[0] || !tables[i].text) return NULL;
    if (name) *name = tables[i].name;
    return tables[i].text;
}
