/* wbcl-tune: tuned kernel parameters for one device (include/wbcl/tuning.h). Sweeps the
 * tunable families' parameters, checks each candidate against the double reference before
 * timing it, and writes the winners to the device's parameter table (host/core/tuner.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/wbcl.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: wbcl-tune [--device SEL] [--op FAMILY] [--budget SECONDS] [--out FILE] [--reps N] [--quick]\n"
            "  Sweeps the kernel parameters of each tunable family on one device: candidates are\n"
            "  first checked against the double-precision reference on a small shape (a wrong one is\n"
            "  rejected and reported), then timed (wall-clock medians) on the CRATE/ToST shapes;\n"
            "  the winners go to the device's parameter table, which new contexts load.\n"
            "  --device SEL     device selector (index, P:D, name substring, cpu or gpu; default\n"
            "                   $WBCL_DEVICE, else the default device)\n"
            "  --op FAMILY      gemm (wbcl's packed kernel), gemm_tiled (wbcl's tiled GPU kernel),\n"
            "                   clblast (CLBlast's Xgemm parameters from its database entries for\n"
            "                   other devices, then its direct/indirect threshold), gemm_backend\n"
            "                   (which of the three the device's GEMM uses), attention (the\n"
            "                   fused kernel at p = 64, then 128 and 32) or all\n"
            "                   (default: gemm and attention where the packed kernel is the\n"
            "                   device's GEMM, i.e. on CPUs; clblast, gemm_tiled, gemm_backend\n"
            "                   and attention where it is not, i.e. on GPUs)\n"
            "  --budget SEC     wall-clock seconds for the sweep (default 120): no candidate starts\n"
            "                   past it; the defaults are always measured, and the final interleaved\n"
            "                   winner-against-default comparison runs after it\n"
            "  --out FILE       where to write the table (default: the device's file in the cache\n"
            "                   directory, $WBCL_CACHE_DIR or ~/.cache/wbcl, under tuning/)\n"
            "  --reps N         timed calls per shape and candidate (default 5)\n"
            "  --quick          tiny shapes (a test of the plumbing; timings meaningless)\n"
            "  A table in effect ($WBCL_TUNING=FILE, or the cache file) is ignored while tuning: the\n"
            "  sweep compares against the built-in defaults. wbcl-info shows the parameters in use.\n");
}

int main(int argc, char **argv)
{
    wbcl_tune_opts o;
    memset(&o, 0, sizeof o);
    o.budget_s = 120;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int more = i + 1 < argc;
        if (!strcmp(a, "--device") && more) o.device = argv[++i];
        else if (!strcmp(a, "--op") && more) o.family = argv[++i];
        else if (!strcmp(a, "--out") && more) o.out = argv[++i];
        else if ((!strcmp(a, "--budget") || !strcmp(a, "--reps")) && more) {
            char *end;
            const double v = strtod(argv[++i], &end);
            if (*end || !(v >= 0) || v > 1e7) {
                fprintf(stderr, "wbcl-tune: %s needs a non-negative number, got '%s'\n", a, argv[i]);
                return 2;
            }
            if (!strcmp(a, "--budget")) o.budget_s = v;
            else o.reps = (int)v;
        } else if (!strcmp(a, "--quick")) o.quick = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "wbcl-tune: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    char path[4096];
    return wbcl_tune_run(&o, stdout, path, sizeof path) == WBCL_SUCCESS ? 0 : 1;
}
