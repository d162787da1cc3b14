/* wbcl-bench: the cross-device comparison. Runs every operator the library has on every
 * selected device, verifies each result against the double-precision reference (host/ref)
 * before timing it, and reports the median kernel time (OpenCL profiling events) and wall
 * time, GFLOP/s or GB/s, and the fraction of the device's measured peak (FMA rate and copy
 * bandwidth from two small probe kernels), with the device name and driver.
 *
 * Adding an operator: write a prepare function (make the inputs, run once, compare with the
 * reference, fill in the call to time and its FLOP or byte count) and add one line to wbcl_bench_ops[].
 *
 * Output formats: a readable table on stdout; --csv FILE and --json FILE carry the format
 * version (BENCH_FORMAT_VERSION); --plot FILE.svg draws the fraction of peak per operator,
 * one bar per device. Exit status: 0 if every supported operator verified, 1 if any result
 * was wrong or an operator failed unexpectedly, 2 for a bad command line. */
#define _POSIX_C_SOURCE 200809L
#include <CL/cl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wbcl/wbcl.h"
#include "bench_ops.h"

#define BENCH_FORMAT_VERSION 1

/* ---- options and per-run environment ------------------------------------------------------ */
typedef struct opts {
    const char *device;   /* "all" or a selector */
    const char *only;     /* comma-separated substrings of op names (an op matching any runs), or NULL */
    const char *variant;  /* --variant: "cpu", "gpu" or "auto", or NULL ($WBCL_VARIANT, else auto) */
    const char *csv, *json, *plot;
    int quick;            /* small sizes (tests, CI, valgrind) */
    int reps;
    int progress;         /* one stderr line per operator as it finishes */
} opts;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void msg(char *why, size_t len, env *e, wbcl_status st)
{
    snprintf(why, len, "%s: %s", wbcl_status_name(st), wbcl_context_last_error(e->ctx));
}

/* ---- peak probes (raw OpenCL on the same device) ----------------------------------------------- */
/* FMA probe: 8 independent chains of PW floats per work-item: float16 (one 512-bit register each on an
 * AVX-512 CPU, where PoCL does not vectorize across work-items of a kernel with a loop; GPU compilers
 * split the vectors into scalar registers), or the CPU's native width when it is 4 or 8 (AVX2: 8 float16
 * chains need all 16 ymm registers plus the operands and spill). 2 * PW * 8 FLOP per iteration. */
static const char *probe_src =
    "#define VT_(n) float##n\n"
    "#define VT(n) VT_(n)\n"
    "#define VST_(n) vstore##n\n"
    "#define VST(n) VST_(n)\n"
    "#define VLD_(n) vload##n\n"
    "#define VLD(n) VLD_(n)\n"
    "typedef VT(PW) pv;\n"
    "__kernel void probe_fma(__global float *out, float a, float b, int iters) {\n"
    "  size_t g = get_global_id(0);\n"
    "  float t[PW];\n"
    "  for (int i = 0; i < PW; i++) t[i] = (float)i * 1e-3f + (float)g * 1e-9f;\n"
    "  pv base = VLD(PW)(0, t);\n"
    "  pv x0 = base, x1 = base + 0.1f, x2 = base + 0.2f, x3 = base + 0.3f, x4 = base + 0.4f,\n"
    "     x5 = base + 0.5f, x6 = base + 0.6f, x7 = base + 0.7f;\n"
    "  for (int i = 0; i < iters; i++) {\n"
    "    x0 = fma(x0, (pv)a, (pv)b); x1 = fma(x1, (pv)a, (pv)b); x2 = fma(x2, (pv)a, (pv)b); x3 = fma(x3, (pv)a, (pv)b);\n"
    "    x4 = fma(x4, (pv)a, (pv)b); x5 = fma(x5, (pv)a, (pv)b); x6 = fma(x6, (pv)a, (pv)b); x7 = fma(x7, (pv)a, (pv)b);\n"
    "  }\n"
    "  pv s = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;\n"
    "  VST(PW)(s, 0, t);\n"
    "  float r = 0.f;\n"
    "  for (int i = 0; i < PW; i++) r += t[i];\n"
    "  out[g] = r;\n"
    "}\n"
    "__kernel void probe_copy(__global const float4 *in, __global float4 *out, int per) {\n"
    "  size_t g = get_global_id(0);\n"
    "  if (per == 1) { out[g] = in[g]; return; }\n"
    "  for (int i = 0; i < per; i++) out[g * per + i] = in[g * per + i];\n"
    "}\n";

typedef struct peak { double gflops, gbs; char note[160]; } peak;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static cl_device_id find_device(const wbcl_device_info *di)
{
    cl_uint np = 0;
    if (clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || di->platform_index >= np) return NULL;
    cl_platform_id *pl = malloc(np * sizeof *pl);
    cl_device_id dev = NULL;
    if (pl && clGetPlatformIDs(np, pl, NULL) == CL_SUCCESS) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(pl[di->platform_index], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) == CL_SUCCESS &&
            di->device_index < nd) {
            cl_device_id *ds = malloc(nd * sizeof *ds);
            if (ds && clGetDeviceIDs(pl[di->platform_index], CL_DEVICE_TYPE_ALL, nd, ds, NULL) == CL_SUCCESS)
                dev = ds[di->device_index];
            free(ds);
        }
    }
    free(pl);
    return dev;
}

/* Shortest profiled duration of one kernel launch over reps, in seconds: a peak is the best
 * the device does, and on a shared machine the median measures the neighbours too. */
static double time_kernel(cl_command_queue q, cl_kernel k, size_t global, size_t local, int reps)
{
    double t[16];
    if (reps > 16) reps = 16;
    for (int r = -1; r < reps; r++) {
        cl_event ev = NULL;
        if (clEnqueueNDRangeKernel(q, k, 1, NULL, &global, local ? &local : NULL, 0, NULL, &ev) != CL_SUCCESS) return -1;
        clWaitForEvents(1, &ev);
        cl_ulong a = 0, b = 0;
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL);
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
        clReleaseEvent(ev);
        if (r >= 0) t[r] = (double)(b - a) * 1e-9;
    }
    double best = t[0];
    for (int r = 1; r < reps; r++) best = t[r] < best ? t[r] : best;
    return best;
}

static void measure_peak(const wbcl_device_info *di, int quick, peak *pk)
{
    memset(pk, 0, sizeof *pk);
    cl_device_id dev = find_device(di);
    if (!dev) { snprintf(pk->note, sizeof pk->note, "device not found for the probes"); return; }
    if (!di->has_profiling) { snprintf(pk->note, sizeof pk->note, "no queue profiling: no peak probes"); return; }
    cl_int e;
    cl_context cx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
    if (e != CL_SUCCESS) { snprintf(pk->note, sizeof pk->note, "probe context: error %d", (int)e); return; }
    cl_command_queue q = clCreateCommandQueue(cx, dev, CL_QUEUE_PROFILING_ENABLE, &e);
    cl_program p = clCreateProgramWithSource(cx, 1, &probe_src, NULL, &e);
    const unsigned vw = di->native_vector_width_float;
    const int pw = di->type == WBCL_DEVICE_CPU && (vw == 4 || vw == 8) ? (int)vw : 16;
    char popts[32];
    snprintf(popts, sizeof popts, "-DPW=%d", pw);
    if (e == CL_SUCCESS) e = clBuildProgram(p, 1, &dev, popts, NULL, NULL);
    cl_kernel kf = NULL, kc = NULL;
    if (e == CL_SUCCESS) kf = clCreateKernel(p, "probe_fma", &e);
    if (e == CL_SUCCESS) kc = clCreateKernel(p, "probe_copy", &e);
    size_t gf = (size_t)(di->compute_units ? di->compute_units : 1) * 1024;
    if (gf < 8192) gf = 8192;
    size_t copy_bytes = quick ? ((size_t)16 << 20) : ((size_t)64 << 20);
    if (copy_bytes > di->max_alloc_size / 2) copy_bytes = (size_t)(di->max_alloc_size / 2);
    cl_mem out = NULL, a = NULL, b = NULL;
    if (e == CL_SUCCESS) out = clCreateBuffer(cx, CL_MEM_WRITE_ONLY, gf * sizeof(float), NULL, &e);
    if (e == CL_SUCCESS) a = clCreateBuffer(cx, CL_MEM_READ_WRITE, copy_bytes, NULL, &e);
    if (e == CL_SUCCESS) b = clCreateBuffer(cx, CL_MEM_READ_WRITE, copy_bytes, NULL, &e);
    if (e == CL_SUCCESS) {
        float fa = 0.999f, fb = 0.001f;
        cl_int iters = 256; /* short launches: fewer preemptions on a shared machine */
        clSetKernelArg(kf, 0, sizeof out, &out);
        clSetKernelArg(kf, 1, sizeof fa, &fa);
        clSetKernelArg(kf, 2, sizeof fb, &fb);
        clSetKernelArg(kf, 3, sizeof iters, &iters);
        float zero = 0;
        clEnqueueFillBuffer(q, a, &zero, sizeof zero, 0, copy_bytes, 0, NULL, NULL);
        clSetKernelArg(kc, 0, sizeof a, &a);
        clSetKernelArg(kc, 1, sizeof b, &b);
        /* CPUs: a contiguous 4 KiB block per work-item (streams); GPUs: one float4 per work-item
         * (coalesced) */
        cl_int per = di->type == WBCL_DEVICE_CPU ? 256 : 1;
        clSetKernelArg(kc, 2, sizeof per, &per);
        size_t lc = di->max_work_group_size >= 256 ? 256 : di->max_work_group_size;
        double tf = time_kernel(q, kf, gf, 0, quick ? 3 : 15);
        size_t gc = copy_bytes / 16 / (size_t)per;
        double tc = time_kernel(q, kc, per == 1 ? gc / lc * lc : gc, per == 1 ? lc : 0, quick ? 3 : 15);
        if (tf > 0) pk->gflops = 2.0 * pw * 8 * iters * (double)gf / tf * 1e-9;
        if (tc > 0) pk->gbs = 2.0 * 16.0 * (double)gc * per / tc * 1e-9;
    } else {
        snprintf(pk->note, sizeof pk->note, "probe kernels failed: OpenCL error %d", (int)e);
    }
    if (out) clReleaseMemObject(out);
    if (a) clReleaseMemObject(a);
    if (b) clReleaseMemObject(b);
    if (kf) clReleaseKernel(kf);
    if (kc) clReleaseKernel(kc);
    if (p) clReleaseProgram(p);
    if (q) clReleaseCommandQueue(q);
    clReleaseContext(cx);
}

/* ---- results ---------------------------------------------------------------------------------- */
typedef enum { R_OK, R_FAIL, R_UNSUPPORTED, R_ERROR } row_status;
static const char *row_status_name[] = {"ok", "FAIL", "unsupported", "error"};

typedef struct row {
    size_t dev;           /* index into the device table */
    const bench_op *op;
    row_status status;
    char shape[96];
    double err, tol;
    double kernel_ms;     /* median; < 0: not available */
    double wall_ms;       /* median */
    double rate;          /* GFLOP/s or GB/s */
    int rate_is_flops;
    double frac_peak;     /* of the matching peak; < 0: unknown */
    char reason[512];
} row;

typedef struct device_rec {
    wbcl_device_info info;
    peak pk;
    const char *variant; /* the kernel family its context ran ("cpu", "gpu"), NULL without a context */
} device_rec;

static void run_op(env *e, const bench_op *op, int reps, const peak *pk, row *r)
{
    op_case c;
    memset(&c, 0, sizeof c);
    r->op = op;
    r->kernel_ms = r->wall_ms = -1;
    r->frac_peak = -1;
    wbcl_context_set_gemm_backend(e->ctx, WBCL_GEMM_AUTO);
    wbcl_status st = op->prepare(e, &c, r->reason, sizeof r->reason);
    snprintf(r->shape, sizeof r->shape, "%s", c.shape);
    if (st) {
        r->status = st == WBCL_ERROR_UNSUPPORTED || st == WBCL_ERROR_DEVICE_LIMIT || st == WBCL_ERROR_BUILD
                        ? R_UNSUPPORTED : R_ERROR;
        return;
    }
    r->err = c.err;
    r->tol = c.tol;
    if (!(c.err <= c.tol)) {
        r->status = R_FAIL;
        snprintf(r->reason, sizeof r->reason, "relative error %.3g exceeds %.3g: not timed", c.err, c.tol);
        c.cleanup(c.state);
        return;
    }
    const wbcl_device_info *di = wbcl_context_device(e->ctx);
    double *wall = malloc((size_t)reps * sizeof *wall), *kern = malloc((size_t)reps * sizeof *kern);
    int have_kernel = di->has_profiling;
    if (!wall || !kern) st = WBCL_ERROR_OUT_OF_MEMORY;
    /* warm-up, then reps of wall time (untimed kernels), then reps with profiling */
    if (!st) st = c.call(e->ctx, c.state);
    if (!st) st = wbcl_context_finish(e->ctx);
    for (int i = 0; i < reps && !st; i++) {
        uint64_t t0 = now_ns();
        st = c.call(e->ctx, c.state);
        if (!st) st = wbcl_context_finish(e->ctx);
        wall[i] = (double)(now_ns() - t0) * 1e-6;
    }
    if (have_kernel && !st) {
        st = wbcl_context_set_timing(e->ctx, 1);
        for (int i = 0; i < reps && !st; i++) {
            wbcl_context_reset_kernel_ns(e->ctx);
            st = c.call(e->ctx, c.state);
            kern[i] = (double)wbcl_context_kernel_ns(e->ctx) * 1e-6;
        }
        wbcl_context_set_timing(e->ctx, 0);
    }
    if (st) {
        r->status = R_ERROR;
        msg(r->reason, sizeof r->reason, e, st);
    } else {
        r->status = R_OK;
        r->wall_ms = median(wall, reps);
        r->kernel_ms = have_kernel ? median(kern, reps) : -1;
        double t = (r->kernel_ms > 0 ? r->kernel_ms : r->wall_ms) * 1e-3;
        r->rate_is_flops = c.flops > 0;
        r->rate = (c.flops > 0 ? c.flops : c.bytes) / t * 1e-9;
        double pv = r->rate_is_flops ? pk->gflops : pk->gbs;
        r->frac_peak = pv > 0 ? r->rate / pv : -1;
    }
    free(wall);
    free(kern);
    c.cleanup(c.state);
}

/* ---- output ----------------------------------------------------------------------------------- */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static void csv_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
    fputc('"', f);
}

static void num(FILE *f, double v, const char *fmt)
{
    if (v < 0 || !isfinite(v)) fputs("", f);
    else fprintf(f, fmt, v);
}

static int write_csv(const char *path, const device_rec *devs, const row *rows, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "# wbcl-bench format %d\n", BENCH_FORMAT_VERSION);
    fprintf(f, "format_version,device_index,device,driver,op,family,shape,status,rel_err,tolerance,kernel_ms,wall_ms,"
               "rate,unit,fraction_of_peak,peak_gflops,peak_gbs,reason\n");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        const device_rec *d = &devs[r->dev];
        fprintf(f, "%d,%zu,", BENCH_FORMAT_VERSION, d->info.index);
        csv_str(f, d->info.name); fputc(',', f);
        csv_str(f, d->info.driver_version); fputc(',', f);
        fprintf(f, "%s,%s,", r->op->name, r->op->family);
        csv_str(f, r->shape);
        fprintf(f, ",%s,", row_status_name[r->status]);
        if (r->status == R_OK || r->status == R_FAIL) fprintf(f, "%.3g,%.3g", r->err, r->tol);
        else fputs(",", f);
        fputc(',', f); num(f, r->kernel_ms, "%.4f");
        fputc(',', f); num(f, r->wall_ms, "%.4f");
        fputc(',', f); num(f, r->status == R_OK ? r->rate : -1, "%.3f");
        fprintf(f, ",%s,", r->status != R_OK ? "" : r->rate_is_flops ? "GFLOP/s" : "GB/s");
        num(f, r->frac_peak, "%.4f");
        fputc(',', f); num(f, d->pk.gflops, "%.2f");
        fputc(',', f); num(f, d->pk.gbs, "%.2f");
        fputc(',', f); csv_str(f, r->reason);
        fputc('\n', f);
    }
    return fclose(f);
}

static void jnum(FILE *f, double v)
{
    if (v < 0 || !isfinite(v)) fputs("null", f);
    else fprintf(f, "%.6g", v);
}

static int write_json(const char *path, const device_rec *devs, size_t nd, const row *rows, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\n  \"format\": \"wbcl-bench\",\n  \"format_version\": %d,\n  \"devices\": [\n", BENCH_FORMAT_VERSION);
    for (size_t i = 0; i < nd; i++) {
        fprintf(f, "    {\"index\": %zu, \"name\": ", devs[i].info.index);
        json_str(f, devs[i].info.name);
        fputs(", \"vendor\": ", f); json_str(f, devs[i].info.vendor);
        fputs(", \"driver\": ", f); json_str(f, devs[i].info.driver_version);
        fputs(", \"platform\": ", f); json_str(f, devs[i].info.platform_name);
        fprintf(f, ", \"type\": \"%s\", \"variant\": ", wbcl_device_type_name(devs[i].info.type));
        if (devs[i].variant) json_str(f, devs[i].variant);
        else fputs("null", f);
        fputs(", \"peak_gflops\": ", f);
        jnum(f, devs[i].pk.gflops);
        fputs(", \"peak_gbs\": ", f); jnum(f, devs[i].pk.gbs);
        fprintf(f, "}%s\n", i + 1 < nd ? "," : "");
    }
    fputs("  ],\n  \"results\": [\n", f);
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        fprintf(f, "    {\"device_index\": %zu, \"op\": \"%s\", \"family\": \"%s\", \"shape\": ", devs[r->dev].info.index,
                r->op->name, r->op->family);
        json_str(f, r->shape);
        fprintf(f, ", \"status\": \"%s\", \"rel_err\": ", row_status_name[r->status]);
        jnum(f, r->status == R_OK || r->status == R_FAIL ? r->err : -1);
        fputs(", \"tolerance\": ", f); jnum(f, r->status == R_OK || r->status == R_FAIL ? r->tol : -1);
        fputs(", \"kernel_ms\": ", f); jnum(f, r->kernel_ms);
        fputs(", \"wall_ms\": ", f); jnum(f, r->wall_ms);
        fputs(", \"rate\": ", f); jnum(f, r->status == R_OK ? r->rate : -1);
        fprintf(f, ", \"unit\": %s", r->status != R_OK ? "null" : r->rate_is_flops ? "\"GFLOP/s\"" : "\"GB/s\"");
        fputs(", \"fraction_of_peak\": ", f); jnum(f, r->frac_peak);
        fputs(", \"reason\": ", f); json_str(f, r->reason);
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fputs("  ]\n}\n", f);
    return fclose(f);
}

static void xml_str(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* Horizontal bars: per operator, one bar per device, length = fraction of that device's peak
 * (FMA rate for FLOP-bound ops, copy bandwidth for the others), the rate printed beside it. */
static int write_svg(const char *path, const device_rec *devs, size_t nd, const row *rows, size_t n)
{
    static const char *colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1"};
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    size_t nops = wbcl_bench_n_ops;
    double bar = 12, gap = 8, left = 190, width = 560, top = 50 + 18.0 * (double)nd;
    double height = top + (double)nops * ((double)nd * bar + gap) + 40;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
               "font-size=\"11\">\n", left + width + 160, height);
    fprintf(f, "<text x=\"10\" y=\"20\" font-size=\"14\">wbcl-bench: fraction of each device's measured peak "
               "(FMA rate or copy bandwidth), format %d</text>\n", BENCH_FORMAT_VERSION);
    for (size_t d = 0; d < nd; d++) {
        fprintf(f, "<rect x=\"10\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"26\" y=\"%.0f\">",
                32 + 18.0 * (double)d, colors[d % 7], 41 + 18.0 * (double)d);
        xml_str(f, devs[d].info.name);
        fprintf(f, " (driver ");
        xml_str(f, devs[d].info.driver_version);
        fprintf(f, "; peak %.1f GFLOP/s, %.1f GB/s)</text>\n", devs[d].pk.gflops, devs[d].pk.gbs);
    }
    for (int t = 0; t <= 4; t++) {
        double x = left + width * t / 4.0;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ccc\"/>"
                   "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d%%</text>\n",
                x, top - 4, x, height - 30, x, height - 16, t * 25);
    }
    for (size_t o = 0; o < nops; o++) {
        double y0 = top + (double)o * ((double)nd * bar + gap);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", left - 6,
                y0 + (double)nd * bar / 2 + 4, wbcl_bench_ops[o].name);
        for (size_t d = 0; d < nd; d++) {
            const row *r = NULL;
            for (size_t i = 0; i < n; i++)
                if (rows[i].dev == d && rows[i].op == &wbcl_bench_ops[o]) r = &rows[i];
            double y = y0 + (double)d * bar;
            if (!r) continue;
            if (r->status != R_OK) {
                fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" fill=\"#a00\">%s</text>\n", left + 4, y + bar - 2,
                        row_status_name[r->status]);
                continue;
            }
            double fr = r->frac_peak < 0 ? 0 : r->frac_peak > 1 ? 1 : r->frac_peak;
            fprintf(f, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\">%.3g %s</text>\n",
                    left, y, width * fr, bar - 2, colors[d % 7], left + width * fr + 4, y + bar - 3, r->rate,
                    r->rate_is_flops ? "GFLOP/s" : "GB/s");
        }
    }
    fputs("</svg>\n", f);
    return fclose(f);
}

static void print_table(const device_rec *d, const row *rows, size_t n, const char *variant_from)
{
    printf("\ndevice %zu: %s\n  vendor %s, driver %s, %s\n", d->info.index, d->info.name, d->info.vendor,
           d->info.driver_version, d->info.platform_name);
    if (d->variant) printf("  kernel variant: %s-shaped (%s)\n", d->variant, variant_from);
    if (d->pk.gflops > 0)
        printf("  measured peak: %.1f GFLOP/s (FMA probe), %.1f GB/s (copy probe)\n", d->pk.gflops, d->pk.gbs);
    else
        printf("  measured peak: unknown (%s)\n", d->pk.note);
    printf("  %-22s %-26s %-11s %9s %9s %10s %10s %12s %7s\n", "op", "shape", "status", "rel.err", "tol",
           "kernel ms", "wall ms", "rate", "%peak");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        if (r->status != R_OK) {
            printf("  %-22s %-26s %-11s %s\n", r->op->name, r->shape, row_status_name[r->status], r->reason);
            continue;
        }
        char kern[32] = "-", rate[32], fr[16] = "-";
        if (r->kernel_ms > 0) snprintf(kern, sizeof kern, "%.3f", r->kernel_ms);
        snprintf(rate, sizeof rate, "%.2f %s", r->rate, r->rate_is_flops ? "GF/s" : "GB/s");
        if (r->frac_peak >= 0) snprintf(fr, sizeof fr, "%.1f", 100 * r->frac_peak);
        printf("  %-22s %-26s %-11s %9.2e %9.2e %10s %10.3f %12s %7s\n", r->op->name, r->shape, "ok", r->err, r->tol,
               kern, r->wall_ms, rate, fr);
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: wbcl-bench [--device all|SEL] [--variant cpu|gpu|auto] [--op SUBSTR] [--quick] [--reps N]\n"
            "                  [--progress] [--csv FILE] [--json FILE] [--plot FILE.svg] [--list]\n"
            "  Runs every wbcl operator on each selected device: verifies it against the double-precision\n"
            "  reference, then reports the median kernel time (profiling events) and wall time, GFLOP/s or\n"
            "  GB/s, and the fraction of the device's measured peak (FMA and copy probe kernels).\n"
            "  --device all|SEL  all devices (default) or one selector (index, P:D, name substring, cpu, gpu)\n"
            "  --variant V       kernel family of the ops on every device: cpu (CPU-shaped), gpu (GPU-shaped)\n"
            "                    or auto (by device type); overrides $WBCL_VARIANT (default: it, else auto)\n"
            "  --op SUBSTR[,..]  only operators whose name contains one of the comma-separated SUBSTRs\n"
            "  --quick           small sizes (seconds, for tests and CI)\n"
            "  --reps N          timed repetitions per operator (default 5; median reported)\n"
            "  --progress        a line on stderr as each operator finishes (status, seconds taken)\n"
            "  --csv/--json FILE machine-readable results (format version %d); --plot FILE.svg: chart\n"
            "  --list            list the operators and exit\n"
            "Exit status 0 when every supported operator verified, 1 otherwise, 2 for a bad command line.\n",
            BENCH_FORMAT_VERSION);
}

/* --op: does `name` contain one of the comma-separated substrings of `only` (NULL: every op)? */
static int op_selected(const char *only, const char *name)
{
    if (!only) return 1;
    for (const char *s = only; *s;) {
        const char *end = strchr(s, ',');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        for (const char *h = name; n && strlen(h) >= n; h++)
            if (!strncmp(h, s, n)) return 1;
        if (!end) break;
        s = end + 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    opts o = {"all", NULL, NULL, NULL, NULL, NULL, 0, 5, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--device") && has) o.device = argv[++i];
        else if (!strcmp(a, "--op") && has) o.only = argv[++i];
        else if (!strcmp(a, "--variant") && has) {
            wbcl_variant v;
            if (wbcl_variant_parse(argv[++i], &v)) {
                fprintf(stderr, "wbcl-bench: --variant must be cpu, gpu or auto, got '%s'\n", argv[i]);
                return 2;
            }
            o.variant = wbcl_variant_name(v);
        }
        else if (!strcmp(a, "--csv") && has) o.csv = argv[++i];
        else if (!strcmp(a, "--json") && has) o.json = argv[++i];
        else if (!strcmp(a, "--plot") && has) o.plot = argv[++i];
        else if (!strcmp(a, "--reps") && has) {
            char *end;
            long r = strtol(argv[++i], &end, 10);
            if (*end || r < 1 || r > 1000) { fprintf(stderr, "wbcl-bench: --reps must be 1..1000, got '%s'\n", argv[i]); return 2; }
            o.reps = (int)r;
        } else if (!strcmp(a, "--quick")) o.quick = 1;
        else if (!strcmp(a, "--progress")) o.progress = 1;
        else if (!strcmp(a, "--list")) {
            for (size_t k = 0; k < wbcl_bench_n_ops; k++) printf("%-24s %s\n", wbcl_bench_ops[k].name, wbcl_bench_ops[k].family);
            return 0;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else {
            fprintf(stderr, "wbcl-bench: %s '%s'\n", has || a[0] != '-' ? "unknown argument" : "missing value after", a);
            usage(stderr);
            return 2;
        }
    }
    size_t matched = 0;
    for (size_t k = 0; k < wbcl_bench_n_ops; k++) matched += op_selected(o.only, wbcl_bench_ops[k].name);
    if (!matched) { fprintf(stderr, "wbcl-bench: no operator matches '%s' (see --list)\n", o.only); return 2; }
    /* --variant reaches every context through $WBCL_VARIANT (read by wbcl_context_create); a bad
     * value there, without --variant, would leave every operator without a context: refuse it now */
    if (o.variant && setenv("WBCL_VARIANT", o.variant, 1)) { perror("wbcl-bench: setenv WBCL_VARIANT"); return 1; }
    const char *env_variant = getenv("WBCL_VARIANT");
    wbcl_variant ev = WBCL_VARIANT_AUTO;
    if (!o.variant && env_variant && *env_variant && wbcl_variant_parse(env_variant, &ev)) {
        fprintf(stderr, "wbcl-bench: WBCL_VARIANT='%s' is not a kernel variant: use cpu, gpu or auto (or --variant)\n",
                env_variant);
        return 1;
    }
    char variant_from[64] = "by device type";
    if (o.variant) snprintf(variant_from, sizeof variant_from, "--variant %s", o.variant);
    else if (env_variant && *env_variant) snprintf(variant_from, sizeof variant_from, "$WBCL_VARIANT=%s", wbcl_variant_name(ev));

    char err[2048] = "";
    wbcl_device_info *all = NULL;
    size_t nall = 0;
    if (wbcl_device_list(&all, &nall, err, sizeof err)) { fprintf(stderr, "wbcl-bench: %s\n", err); return 1; }
    if (err[0]) fprintf(stderr, "wbcl-bench: note: %s\n", err);
    device_rec *devs = calloc(nall, sizeof *devs);
    size_t nd = 0;
    if (!devs) { fprintf(stderr, "wbcl-bench: out of memory\n"); wbcl_device_list_free(all); return 1; }
    if (!strcmp(o.device, "all")) {
        for (size_t i = 0; i < nall; i++) devs[nd++].info = all[i];
    } else {
        size_t ch = 0;
        if (wbcl_device_select(all, nall, o.device, &ch, err, sizeof err)) {
            fprintf(stderr, "wbcl-bench: %s\n", err);
            free(devs); wbcl_device_list_free(all);
            return 1;
        }
        devs[nd++].info = all[ch];
    }
    wbcl_device_list_free(all);

    row *rows = calloc(nd * wbcl_bench_n_ops, sizeof *rows);
    size_t nr = 0;
    int bad = 0;
    if (!rows) { fprintf(stderr, "wbcl-bench: out of memory\n"); free(devs); return 1; }
    for (size_t d = 0; d < nd; d++) {
        char sel[32];
        snprintf(sel, sizeof sel, "%zu", devs[d].info.index);
        measure_peak(&devs[d].info, o.quick, &devs[d].pk);
        env e = {NULL, o.quick, 0x5eed};
        wbcl_status st = wbcl_context_create(sel, &e.ctx, err, sizeof err);
        if (!st) devs[d].variant = wbcl_variant_name(wbcl_context_variant(e.ctx));
        size_t first = nr;
        for (size_t k = 0; k < wbcl_bench_n_ops; k++) {
            if (!op_selected(o.only, wbcl_bench_ops[k].name)) continue;
            row *r = &rows[nr++];
            r->dev = d;
            r->op = &wbcl_bench_ops[k];
            if (st) {
                r->status = R_UNSUPPORTED;
                snprintf(r->reason, sizeof r->reason, "no context on this device: %.400s", err);
                continue;
            }
            e.seed = 0x5eed + k;
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            run_op(&e, &wbcl_bench_ops[k], o.reps, &devs[d].pk, r);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            if (r->status == R_FAIL || r->status == R_ERROR) bad = 1;
            if (o.progress)
                fprintf(stderr, "wbcl-bench: device %zu: %-22s %-11s %.1f s\n", devs[d].info.index, r->op->name,
                        row_status_name[r->status],
                        (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        }
        wbcl_context_destroy(e.ctx);
        print_table(&devs[d], rows + first, nr - first, variant_from);
        fflush(stdout);
    }
    int rc = bad;
    if (o.csv && write_csv(o.csv, devs, rows, nr)) { fprintf(stderr, "wbcl-bench: cannot write '%s'\n", o.csv); rc = 1; }
    if (o.json && write_json(o.json, devs, nd, rows, nr)) { fprintf(stderr, "wbcl-bench: cannot write '%s'\n", o.json); rc = 1; }
    if (o.plot && write_svg(o.plot, devs, nd, rows, nr)) { fprintf(stderr, "wbcl-bench: cannot write '%s'\n", o.plot); rc = 1; }
    if (bad) fprintf(stderr, "wbcl-bench: some operators failed verification or failed to run (see the table)\n");
    free(rows);
    free(devs);
    return rc;
}
