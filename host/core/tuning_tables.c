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
     * "Tuned parameters": attention's G = 4 won in all three runs; the GEMM tile and block
     * winners of the earlier runs did not repeat, so the GEMM keys are the defaults) */
    {"pocl-3.1-skylake-avx512-xeon-2.5ghz",
     "# wbcl kernel parameter table (include/wbcl/tuning.h)\n"
     "# written by wbcl-tune (budget 300 s, 7 call(s) per shape)\n"
     "# gemm: mr=12 nr=32 (default mr=12 nr=32)\n"
     "#   (8*197)x384->1536: default 19.389 ms, tuned 19.215 ms, x1.009\n"
     "#   (8*197)x1536->384: default 22.136 ms, tuned 22.184 ms, x0.998\n"
     "#   1024^3: default 23.074 ms, tuned 23.361 ms, x0.988\n"
     "# gemm L2 block: a_block_kib=1024 (default a_block_kib=1024)\n"
     "#   (8*197)x384->1536: default 23.044 ms, tuned 22.812 ms, x1.010\n"
     "#   (8*197)x1536->384: default 20.226 ms, tuned 17.682 ms, x1.144\n"
     "#   1024^3: default 11.720 ms, tuned 12.933 ms, x0.906\n"
     "# attention: qb=4 g=4 vw=16 (default qb=4 g=2 vw=16)\n"
     "#   BK 48 N 197 p 64: default 6.929 ms, tuned 6.809 ms, x1.018\n"
     "#   BK 8 N 1024 p 64: default 22.513 ms, tuned 19.295 ms, x1.167\n"
     "#   BK 4 N 4096 p 64: default 174.496 ms, tuned 150.568 ms, x1.159\n"
     "format = wbcl-tuning-1\n"
     "device = pthread-skylake-avx512-Intel(R) Xeon(R) Processor @ 2.50GHz\n"
     "vendor = GenuineIntel\n"
     "driver = 3.1+debian\n"
     "variant = cpu\n"
     "wbcl = 0.1.0\n"
     "gemm.mr = 12\n"
     "gemm.nr = 32\n"
     "gemm.a_block_kib = 1024\n"
     "attention.p64.qb = 4\n"
     "attention.p64.g = 4\n"
     "attention.p64.vw = 16\n"},
    /* the project's machine of 2026-11-27: PoCL 3.1 (Debian) on 2 cores of a Xeon that reports no clock in
     * its name (48 KB L1d, 2 MB L2 per core, AVX-512 with FP16: a newer part than the one above);
     * `wbcl-tune --op attention --budget 360 --reps 5` on a quiet machine (perf/RESULTS.md, sixth
     * session): G = 16 (64 queries share each K/V block) 1.12x at N = 4096, 0.97x at N = 197; the
     * paired run against PyTorch SDPA gave G = 16 1.00-1.01x, G = 4 0.93-0.96x there */
    {"pocl-3.1-skylake-avx512-xeon-48k-l1",
     "# wbcl kernel parameter table (include/wbcl/tuning.h)\n"
     "# written by wbcl-tune (budget 360 s, 5 call(s) per shape)\n"
     "# attention: qb=4 g=16 vw=16 (default qb=4 g=4 vw=16)\n"
     "#   BK 48 N 197 p 64: default 3.153 ms, tuned 3.241 ms, x0.973\n"
     "#   BK 8 N 1024 p 64: default 8.881 ms, tuned 8.876 ms, x1.001\n"
     "#   BK 4 N 4096 p 64: default 78.153 ms, tuned 69.730 ms, x1.121\n"
     "format = wbcl-tuning-1\n"
     "device = pthread-skylake-avx512-Intel(R) Xeon(R) Processor\n"
     "vendor = GenuineIntel\n"
     "driver = 3.1+debian\n"
     "variant = cpu\n"
     "wbcl = 0.1.0\n"
     "attention.p64.qb = 4\n"
     "attention.p64.g = 16\n"
     "attention.p64.vw = 16\n"},
    {NULL, NULL},
};

const char *wbcl__shipped_table(size_t i, const char **name)
{
    if (i >= sizeof tables / sizeof tables[0] || !tables[i].text) return NULL;
    if (name) *name = tables[i].name;
    return tables[i].text;
}
