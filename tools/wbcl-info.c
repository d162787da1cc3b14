/* wbcl-info: platforms, devices, capabilities, the default device, and the
 * kernel variants each device gets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/wbcl.h"
#include "bench_ops.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: wbcl-info [--device SEL] [--export-binaries DIR]\n"
               "  Lists OpenCL platforms and devices with the capabilities wbcl uses.\n"
               "  --device SEL           mark/select a device: index, P:D, name substring, cpu or gpu\n"
               "                         (default: $WBCL_DEVICE, else first GPU, else first device)\n"
               "  --export-binaries DIR  build every kernel family for the selected device, run every\n"
               "                         operator once (wbcl-bench's table, small sizes, verified) so\n"
               "                         its programs are complete, and save all program binaries in\n"
               "                         DIR; WBCL_BINARY_DIR=DIR then loads them without compiling\n"
               "  --export-size quick|full  sizes of that warm-up run (default quick; full = the\n"
               "                         wbcl-bench sizes, which adds their shape-specialized programs)\n"
               "  The kernel variants shown are those a new context gets: by device type, or CPU- or\n"
               "  GPU-shaped on every device under $WBCL_VARIANT=cpu|gpu (wbcl-run, wbcl-bench: --variant);\n"
               "  --export-binaries builds that family's programs.\n"
               "  The kernel parameters the selected device's contexts use are listed per family, each\n"
               "  with its source: default, shipped table, cache file, or the file $WBCL_TUNING names\n"
               "  (wbcl-tune writes these tables: include/wbcl/tuning.h), and any rejected table or key.\n");
}

/* The kernel parameters a context on device `chosen` uses, per family, with their source
 * (include/wbcl/tuning.h), and the notes about rejected tables or keys. */
static void show_params(size_t chosen)
{
    char sel[32], err[1024] = "";
    snprintf(sel, sizeof sel, "%zu", chosen);
    wbcl_context *ctx = NULL;
    if (wbcl_context_create(sel, &ctx, err, sizeof err)) {
        printf("kernel parameters: no context on device %zu (%s)\n", chosen, err);
        return;
    }
    const char *origin;
    wbcl_param_source ts = wbcl_context_tuning_source(ctx, &origin);
    printf("kernel parameters of device %zu (%s variant), table: %s%s%s%s\n", chosen,
           wbcl_variant_name(wbcl_context_variant(ctx)), ts == WBCL_PARAM_DEFAULT ? "none (defaults)" : wbcl_param_source_name(ts),
           *origin ? " " : "", origin, getenv("WBCL_TUNING") ? "  [$WBCL_TUNING set]" : "");
    const char *family = "";
    wbcl_param_info pi;
    char xg[512] = "";  /* CLBlast's 16 Xgemm parameters, on one line */
    size_t xn = 0;
    int xg_tuned = 0;
    for (size_t i = 0; wbcl_context_param(ctx, i, &pi); i++) {
        if (strcmp(family, pi.family) != 0) {
            printf("  %s:\n", pi.family);
            family = pi.family;
        }
        if (strncmp(pi.key, "clblast.xgemm.", 14) == 0) {
            /* a value from a table is marked '*'; the others are CLBlast's own for this device */
            xn += (size_t)snprintf(xg + xn, sizeof xg - xn, " %s=%ld%s", pi.key + 14, pi.value,
                                   pi.source == WBCL_PARAM_DEFAULT ? "" : "*");
            xg_tuned |= pi.source != WBCL_PARAM_DEFAULT;
            if (xn >= sizeof xg) xn = sizeof xg - 1;
            if (strcmp(pi.key, "clblast.xgemm.VWN") == 0)
                printf("    clblast.xgemm         %s\n                          %s\n", xg,
                       xg_tuned ? "(*: from the table; the set is checked as a whole when CLBlast runs)"
                                : "CLBlast's own values for this device");
            continue;
        }
        if (!strcmp(pi.family, "clblast") && pi.source == WBCL_PARAM_DEFAULT) {
            printf("    %-22s %6ld  CLBlast's own\n", pi.key, pi.value);
            continue;
        }
        char val[64];
        snprintf(val, sizeof val, "%ld", pi.value);
        char p[32] = "";
        if (pi.p) snprintf(p, sizeof p, " (p = %zu)", pi.p);
        if (pi.source == WBCL_PARAM_DEFAULT)
            printf("    %-22s %6s  default%s\n", pi.key, val, p);
        else
            printf("    %-22s %6s  %s%s%s (default %ld)%s\n", pi.key, val, wbcl_param_source_name(pi.source),
                   *pi.origin ? ": " : "", pi.origin, pi.default_value, p);
    }
    const char *notes = wbcl_context_tuning_notes(ctx);
    if (*notes) {
        printf("  notes on the parameter tables:\n");
        for (const char *s = notes; *s;) {
            const char *e = strchr(s, '\n');
            size_t l = e ? (size_t)(e - s) : strlen(s);
            printf("    %.*s\n", (int)l, s);
            s += l + (e ? 1 : 0);
        }
    }
    wbcl_context_destroy(ctx);
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

int main(int argc, char **argv)
{
    const char *sel = NULL, *export_dir = NULL;
    int export_full = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) sel = argv[++i];
        else if (!strcmp(argv[i], "--export-binaries") && i + 1 < argc) export_dir = argv[++i];
        else if (!strcmp(argv[i], "--export-size") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(v, "full")) export_full = 1;
            else if (strcmp(v, "quick")) { fprintf(stderr, "wbcl-info: --export-size must be quick or full, got '%s'\n", v); return 2; }
        }
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else { fprintf(stderr, "wbcl-info: unknown argument '%s'\n", argv[i]); usage(stderr); return 2; }
    }
    char err[2048] = "";
    wbcl_device_info *dev = NULL;
    size_t n = 0;
    wbcl_status st = wbcl_device_list(&dev, &n, err, sizeof err);
    if (st) { fprintf(stderr, "wbcl-info: %s\n", err); return 1; }
    if (err[0]) fprintf(stderr, "wbcl-info: note: %s\n", err);
    size_t chosen = 0;
    st = wbcl_device_select(dev, n, sel, &chosen, err, sizeof err);
    if (st) { fprintf(stderr, "wbcl-info: %s\n", err); wbcl_device_list_free(dev); return 1; }
    /* the kernel family a context gets: $WBCL_VARIANT, else by device type (wbcl_variant_default) */
    const char *env_variant = getenv("WBCL_VARIANT");
    const int forced = env_variant && *env_variant;
    char verr[512] = "";
    wbcl_variant v0;
    int bad_variant = n && wbcl_variant_default(&dev[0], &v0, verr, sizeof verr) != WBCL_SUCCESS;
    if (bad_variant) fprintf(stderr, "wbcl-info: %s; contexts will not open\n", verr);
    unsigned last_platform = (unsigned)-1;
    for (size_t i = 0; i < n; i++) {
        const wbcl_device_info *d = &dev[i];
        if (d->platform_index != last_platform) {
            printf("platform %u: %s (%s)\n", d->platform_index, d->platform_name, d->platform_version);
            last_platform = d->platform_index;
        }
        printf("  device %zu (%u:%u)%s: %s\n", d->index, d->platform_index, d->device_index,
               i == chosen ? (sel || getenv("WBCL_DEVICE") ? " [selected]" : " [default]") : "", d->name);
        printf("    type %s, vendor %s, driver %s\n", wbcl_device_type_name(d->type), d->vendor, d->driver_version);
        printf("    %s, %s\n", d->device_version, d->opencl_c_version);
        printf("    compute units %u, max work-group %zu, work-item sizes %zu x %zu x %zu\n", d->compute_units,
               d->max_work_group_size, d->max_work_item_sizes[0], d->max_work_item_sizes[1], d->max_work_item_sizes[2]);
        printf("    global memory %.0f MiB, max allocation %.0f MiB, local memory %.0f KiB%s\n", mib(d->global_mem_size),
               mib(d->max_alloc_size), (double)d->local_mem_size / 1024.0, d->local_mem_is_global ? " (emulated in global)" : "");
        printf("    fp16 %s, fp64 %s, profiling %s, native float vector width %u\n", d->has_fp16 ? "yes" : "no",
               d->has_fp64 ? "yes" : "no", d->has_profiling ? "yes" : "no", d->native_vector_width_float);
        printf("    float16 tensors: storage via core vload_half/vstore_half (cl_khr_fp16 %s, not needed), "
               "float32 compute\n", d->has_fp16 ? "present" : "absent");
        if (d->has_nv_compiler_options)
            printf("    NVIDIA compiler options (cl_nv_compiler_options): register caps gemm.tiled.maxrreg and "
                   "attention.maxrreg; WBCL_BUILD_LOG=1 prints ptxas's registers per kernel\n");
        wbcl_variant v = WBCL_VARIANT_AUTO;
        char from[64] = "";
        if (!bad_variant) wbcl_variant_default(d, &v, NULL, 0);
        if (forced && !bad_variant) snprintf(from, sizeof from, " ($WBCL_VARIANT=%s)", env_variant);
        printf("    kernel variants: %s%s, GEMM by default via %s (a table's gemm.backend may pick another)\n",
               bad_variant ? "none (WBCL_VARIANT is invalid)" : v == WBCL_VARIANT_CPU ? "CPU-shaped ops" : "GPU-shaped ops",
               from, d->type == WBCL_DEVICE_CPU   ? "wbcl packed register-tile kernel"
                     : d->type == WBCL_DEVICE_GPU ? "wbcl tiled kernel (CLBlast where the device cannot take it)"
                                                  : "CLBlast");
        if (d->type == WBCL_DEVICE_CPU) /* the packed backend: models keep their weights' panels (context.h) */
            printf("    models' packed weight panels kept between calls: up to %.0f MiB by default (a quarter of the "
                   "global memory; wbcl_context_set_weight_cache)\n",
                   mib(d->global_mem_size / 4));
    }
    int rc = bad_variant;
    if (!bad_variant && n) show_params(chosen);
    if (export_dir && !bad_variant) {
        char sel_idx[32];
        snprintf(sel_idx, sizeof sel_idx, "%zu", chosen);
        wbcl_context *ctx = NULL;
        st = wbcl_context_create(sel_idx, &ctx, err, sizeof err);
        if (st) { fprintf(stderr, "wbcl-info: %s\n", err); rc = 1; }
        else {
            /* 1. every kernel family with its default options; families that only build with
             * shape-specific -D options (attention: the head dimension) come from step 2 */
            size_t nfam = 0, nspec = 0;
            for (const char *fam; (fam = wbcl_kernel_family(nfam)) != NULL; nfam++)
                if (wbcl_context_warm(ctx, fam) == WBCL_ERROR_BUILD) nspec++;
            /* 2. every operator once: its shape-specialized programs, and kernels that have run
             * (PoCL keeps the work-group code of a launched kernel in the binary) */
            size_t nops = 0, unsupported = 0;
            for (size_t k = 0; !st && k < wbcl_bench_n_ops; k++) {
                env e = {ctx, !export_full, 0x5eed + k};
                op_case c;
                char why[1024] = "";
                memset(&c, 0, sizeof c);
                wbcl_status os = wbcl_bench_ops[k].prepare(&e, &c, why, sizeof why);
                if (os == WBCL_ERROR_UNSUPPORTED || os == WBCL_ERROR_DEVICE_LIMIT) {
                    fprintf(stderr, "wbcl-info: note: %s not exported: %s\n", wbcl_bench_ops[k].name, why);
                    unsupported++;
                    continue;
                }
                if (os) { fprintf(stderr, "wbcl-info: %s: %s\n", wbcl_bench_ops[k].name, why); rc = 1; break; }
                if (!(c.err <= c.tol))
                    fprintf(stderr, "wbcl-info: warning: %s: relative error %.3g above %.3g\n", wbcl_bench_ops[k].name,
                            c.err, c.tol);
                c.cleanup(c.state);
                nops++;
            }
            if (!st && !rc) st = wbcl_context_export_binaries(ctx, export_dir);
            if (st) { fprintf(stderr, "wbcl-info: %s\n", wbcl_context_last_error(ctx)); rc = 1; }
            else if (!rc)
                printf("exported program binaries for '%s' to %s (%zu kernel families, %zu of them only\n"
                       "  shape-specialized; %zu operators run%s)\n",
                       dev[chosen].name, export_dir, nfam, nspec, nops, unsupported ? ", some unsupported" : "");
            wbcl_context_destroy(ctx);
        }
    }
    wbcl_device_list_free(dev);
    return rc;
}
