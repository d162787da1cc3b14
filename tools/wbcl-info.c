/* wbcl-info: platforms, devices, capabilities, the default device, and the
 * kernel variants each device gets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/wbcl.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: wbcl-info [--device SEL] [--export-binaries DIR]\n"
               "  Lists OpenCL platforms and devices with the capabilities wbcl uses.\n"
               "  --device SEL           mark/select a device: index, P:D, name substring, cpu or gpu\n"
               "                         (default: $WBCL_DEVICE, else first GPU, else first device)\n"
               "  --export-binaries DIR  build every kernel family for the selected device and save\n"
               "                         the binaries in DIR (load them with WBCL_BINARY_DIR=DIR)\n");
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

int main(int argc, char **argv)
{
    const char *sel = NULL, *export_dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) sel = argv[++i];
        else if (!strcmp(argv[i], "--export-binaries") && i + 1 < argc) export_dir = argv[++i];
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
        printf("    kernel variants: %s-shaped ops, GEMM via %s\n", d->type == WBCL_DEVICE_CPU ? "CPU" : "GPU",
               d->type == WBCL_DEVICE_CPU ? "wbcl packed register-tile kernel" : "CLBlast");
    }
    int rc = 0;
    if (export_dir) {
        char sel_idx[32];
        snprintf(sel_idx, sizeof sel_idx, "%zu", chosen);
        wbcl_context *ctx = NULL;
        st = wbcl_context_create(sel_idx, &ctx, err, sizeof err);
        if (st) { fprintf(stderr, "wbcl-info: %s\n", err); rc = 1; }
        else {
            static const char *families[] = {"core"};
            for (size_t f = 0; f < sizeof families / sizeof families[0] && !st; f++) st = wbcl_context_warm(ctx, families[f]);
            if (!st) st = wbcl_context_export_binaries(ctx, export_dir);
            if (st) { fprintf(stderr, "wbcl-info: %s\n", wbcl_context_last_error(ctx)); rc = 1; }
            else printf("exported program binaries for '%s' to %s\n", dev[chosen].name, export_dir);
            wbcl_context_destroy(ctx);
        }
    }
    wbcl_device_list_free(dev);
    return rc;
}
