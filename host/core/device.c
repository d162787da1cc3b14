/* Device discovery, capability probe and selection. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *wbcl_device_type_name(wbcl_device_type t)
{
    switch (t) {
    case WBCL_DEVICE_CPU: return "cpu";
    case WBCL_DEVICE_GPU: return "gpu";
    case WBCL_DEVICE_ACCELERATOR: return "accelerator";
    default: return "other";
    }
}

static void str_info(cl_device_id d, cl_device_info what, char *dst, size_t n)
{
    dst[0] = 0;
    if (clGetDeviceInfo(d, what, n, dst, NULL) != CL_SUCCESS) dst[0] = 0;
    dst[n - 1] = 0;
}

static void probe(cl_platform_id p, cl_device_id d, wbcl_device_info *info)
{
    memset(info, 0, sizeof *info);
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof info->platform_name, info->platform_name, NULL);
    clGetPlatformInfo(p, CL_PLATFORM_VERSION, sizeof info->platform_version, info->platform_version, NULL);
    info->platform_name[sizeof info->platform_name - 1] = 0;
    info->platform_version[sizeof info->platform_version - 1] = 0;
    str_info(d, CL_DEVICE_NAME, info->name, sizeof info->name);
    str_info(d, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    str_info(d, CL_DRIVER_VERSION, info->driver_version, sizeof info->driver_version);
    str_info(d, CL_DEVICE_VERSION, info->device_version, sizeof info->device_version);
    str_info(d, CL_DEVICE_OPENCL_C_VERSION, info->opencl_c_version, sizeof info->opencl_c_version);
    if (sscanf(info->device_version, "OpenCL %d.%d", &info->cl_major, &info->cl_minor) != 2) {
        info->cl_major = 1;
        info->cl_minor = 0;
    }
    cl_device_type t = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof t, &t, NULL);
    info->type = (t & CL_DEVICE_TYPE_GPU) ? WBCL_DEVICE_GPU
               : (t & CL_DEVICE_TYPE_CPU) ? WBCL_DEVICE_CPU
               : (t & CL_DEVICE_TYPE_ACCELERATOR) ? WBCL_DEVICE_ACCELERATOR : WBCL_DEVICE_OTHER;
    cl_uint cu = 0;
    clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    info->compute_units = cu;
    cl_uint vw = 0;
    clGetDeviceInfo(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof vw, &vw, NULL);
    info->native_vector_width_float = vw;
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof info->max_work_group_size,
                    &info->max_work_group_size, NULL);
    cl_uint dims = 0;
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, sizeof dims, &dims, NULL);
    if (dims >= 3) {
        size_t sizes[16] = {0};
        if (dims > 16) dims = 16;
        clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof(size_t) * dims, sizes, NULL);
        memcpy(info->max_work_item_sizes, sizes, sizeof info->max_work_item_sizes);
    }
    cl_ulong u = 0;
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof u, &u, NULL);
    info->local_mem_size = u;
    cl_device_local_mem_type lt = CL_LOCAL;
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_TYPE, sizeof lt, &lt, NULL);
    info->local_mem_is_global = lt == CL_GLOBAL;
    u = 0;
    clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof u, &u, NULL);
    info->global_mem_size = u;
    u = 0;
    clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof u, &u, NULL);
    info->max_alloc_size = u;
    size_t extlen = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &extlen) == CL_SUCCESS && extlen) {
        char *ext = malloc(extlen + 1);
        if (ext && clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, extlen, ext, NULL) == CL_SUCCESS) {
            ext[extlen] = 0;
            info->has_fp16 = strstr(ext, "cl_khr_fp16") != NULL;
            info->has_fp64 = strstr(ext, "cl_khr_fp64") != NULL;
            info->has_nv_compiler_options = strstr(ext, "cl_nv_compiler_options") != NULL;
        }
        free(ext);
    }
    cl_device_fp_config fp = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp, &fp, NULL) == CL_SUCCESS && fp)
        info->has_fp64 = 1;
    cl_command_queue_properties qp = 0;
    clGetDeviceInfo(d, CL_DEVICE_QUEUE_PROPERTIES, sizeof qp, &qp, NULL);
    info->has_profiling = (qp & CL_QUEUE_PROFILING_ENABLE) != 0;
}

/* Enumerates (platform, device) handles in global order; also used by context.c. */
wbcl_status wbcl__enumerate(cl_platform_id **plats_out, cl_device_id **devs_out, wbcl_device_info **infos_out,
                            size_t *count_out, char *err, size_t errlen);

static wbcl_status enumerate_locked(cl_platform_id **plats_out, cl_device_id **devs_out,
                                   wbcl_device_info **infos_out, size_t *count_out, char *err, size_t errlen);

/* The ICD loader's first clGetPlatformIDs is not thread-safe (seen with
 * ocl-icd 2.3: a second thread racing the first one gets no platforms), so
 * discovery is serialized by this process-wide lock: the one piece of global
 * state in wbcl, and it holds no data. */
static pthread_mutex_t enumerate_lock = PTHREAD_MUTEX_INITIALIZER;

wbcl_status wbcl__enumerate(cl_platform_id **plats_out, cl_device_id **devs_out, wbcl_device_info **infos_out,
                            size_t *count_out, char *err, size_t errlen)
{
    pthread_mutex_lock(&enumerate_lock);
    wbcl_status st = enumerate_locked(plats_out, devs_out, infos_out, count_out, err, errlen);
    pthread_mutex_unlock(&enumerate_lock);
    return st;
}

static wbcl_status enumerate_locked(cl_platform_id **plats_out, cl_device_id **devs_out,
                                   wbcl_device_info **infos_out, size_t *count_out, char *err, size_t errlen)
{
    *count_out = 0;
    if (plats_out) *plats_out = NULL;
    if (devs_out) *devs_out = NULL;
    *infos_out = NULL;
    cl_uint np = 0;
    cl_int e = clGetPlatformIDs(0, NULL, &np);
    if (e != CL_SUCCESS || np == 0) {
        wbcl__msg(err, errlen,
                  "no OpenCL platform found (%s): install an OpenCL driver, e.g. the Debian package "
                  "pocl-opencl-icd for the CPU",
                  e == CL_SUCCESS ? "0 platforms" : wbcl__cl_error_name(e));
        return WBCL_ERROR_NO_DEVICE;
    }
    cl_platform_id *plats = calloc(np, sizeof *plats);
    if (!plats) return WBCL_ERROR_OUT_OF_MEMORY;
    if ((e = clGetPlatformIDs(np, plats, NULL)) != CL_SUCCESS) {
        free(plats);
        wbcl__msg(err, errlen, "clGetPlatformIDs failed: %s", wbcl__cl_error_name(e));
        return WBCL_ERROR_NO_DEVICE;
    }
    size_t cap = 8, n = 0;
    cl_platform_id *P = malloc(cap * sizeof *P);
    cl_device_id *D = malloc(cap * sizeof *D);
    wbcl_device_info *I = malloc(cap * sizeof *I);
    char skipped[512] = "";
    wbcl_status st = WBCL_SUCCESS;
    if (!P || !D || !I) st = WBCL_ERROR_OUT_OF_MEMORY;
    for (cl_uint pi = 0; pi < np && !st; pi++) {
        cl_uint nd = 0;
        e = clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
        if (e != CL_SUCCESS || nd == 0) {
            if (e != CL_DEVICE_NOT_FOUND) {
                size_t used = strlen(skipped);
                snprintf(skipped + used, sizeof skipped - used, "%splatform %u skipped (%s)",
                         used ? "; " : "", pi, wbcl__cl_error_name(e));
            }
            continue;
        }
        cl_device_id *devs = calloc(nd, sizeof *devs);
        if (!devs) { st = WBCL_ERROR_OUT_OF_MEMORY; break; }
        if (clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, nd, devs, NULL) != CL_SUCCESS) {
            free(devs);
            continue;
        }
        for (cl_uint di = 0; di < nd; di++) {
            if (n == cap) {
                cap *= 2;
                cl_platform_id *P2 = realloc(P, cap * sizeof *P);
                if (P2) P = P2;
                cl_device_id *D2 = realloc(D, cap * sizeof *D);
                if (D2) D = D2;
                wbcl_device_info *I2 = realloc(I, cap * sizeof *I);
                if (I2) I = I2;
                if (!P2 || !D2 || !I2) { st = WBCL_ERROR_OUT_OF_MEMORY; break; }
            }
            P[n] = plats[pi];
            D[n] = devs[di];
            probe(plats[pi], devs[di], &I[n]);
            I[n].index = n;
            I[n].platform_index = pi;
            I[n].device_index = di;
            n++;
        }
        free(devs);
    }
    free(plats);
    if (!st && n == 0) {
        wbcl__msg(err, errlen, "no OpenCL device found%s%s", skipped[0] ? ": " : "", skipped);
        st = WBCL_ERROR_NO_DEVICE;
    }
    if (st) {
        free(P); free(D); free(I);
        if (st == WBCL_ERROR_OUT_OF_MEMORY) wbcl__msg(err, errlen, "out of host memory listing devices");
        return st;
    }
    if (skipped[0]) wbcl__msg(err, errlen, "%s", skipped);
    else if (err && errlen) err[0] = 0;
    if (plats_out) *plats_out = P; else free(P);
    if (devs_out) *devs_out = D; else free(D);
    *infos_out = I;
    *count_out = n;
    return WBCL_SUCCESS;
}

wbcl_status wbcl_device_list(wbcl_device_info **infos, size_t *count, char *err, size_t errlen)
{
    if (!infos || !count) {
        wbcl__msg(err, errlen, "wbcl_device_list: NULL output pointer");
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    return wbcl__enumerate(NULL, NULL, infos, count, err, errlen);
}

void wbcl_device_list_free(wbcl_device_info *infos) { free(infos); }

static int icontains(const char *hay, const char *needle)
{
    size_t hn = strlen(hay), nn = strlen(needle);
    if (nn == 0) return 1;
    for (size_t i = 0; i + nn <= hn; i++) {
        size_t j = 0;
        while (j < nn && tolower((unsigned char)hay[i + j]) == tolower((unsigned char)needle[j])) j++;
        if (j == nn) return 1;
    }
    return 0;
}

static int all_digits(const char *s, size_t n)
{
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return 0;
    return 1;
}

static void list_devices(char *buf, size_t len, const wbcl_device_info *I, size_t n)
{
    size_t used = 0;
    if (!buf || !len) return;
    buf[0] = 0;
    for (size_t i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%zu (%u:%u) %s [%s]", i ? ", " : "", i,
                                 I[i].platform_index, I[i].device_index, I[i].name,
                                 wbcl_device_type_name(I[i].type));
}

wbcl_status wbcl_device_select(const wbcl_device_info *I, size_t n, const char *sel, size_t *chosen,
                               char *err, size_t errlen)
{
    if (!I || !chosen) {
        wbcl__msg(err, errlen, "wbcl_device_select: NULL argument");
        return WBCL_ERROR_INVALID_ARGUMENT;
    }
    if (n == 0) {
        wbcl__msg(err, errlen, "no OpenCL device to select from");
        return WBCL_ERROR_NO_DEVICE;
    }
    const char *origin = "selector";
    if (!sel || !*sel) {
        sel = getenv("WBCL_DEVICE");
        origin = "WBCL_DEVICE";
    }
    if (!sel || !*sel) {
        for (size_t i = 0; i < n; i++)
            if (I[i].type == WBCL_DEVICE_GPU) { *chosen = i; return WBCL_SUCCESS; }
        *chosen = 0;
        return WBCL_SUCCESS;
    }
    size_t len = strlen(sel);
    const char *colon = strchr(sel, ':');
    if (all_digits(sel, len)) {
        unsigned long long idx = strtoull(sel, NULL, 10);
        if (idx < n) { *chosen = (size_t)idx; return WBCL_SUCCESS; }
    } else if (colon && all_digits(sel, (size_t)(colon - sel)) && all_digits(colon + 1, strlen(colon + 1))) {
        unsigned long p = strtoul(sel, NULL, 10), d = strtoul(colon + 1, NULL, 10);
        for (size_t i = 0; i < n; i++)
            if (I[i].platform_index == p && I[i].device_index == d) { *chosen = i; return WBCL_SUCCESS; }
    } else {
        static const struct { const char *word; wbcl_device_type type; } types[] = {
            {"cpu", WBCL_DEVICE_CPU}, {"gpu", WBCL_DEVICE_GPU}, {"accelerator", WBCL_DEVICE_ACCELERATOR}};
        int is_type = 0;
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            if (len == strlen(types[t].word) && icontains(types[t].word, sel)) {
                is_type = 1;
                for (size_t i = 0; i < n; i++)
                    if (I[i].type == types[t].type) { *chosen = i; return WBCL_SUCCESS; }
            }
        }
        if (!is_type)
            for (size_t i = 0; i < n; i++)
                if (icontains(I[i].name, sel) || icontains(I[i].vendor, sel) || icontains(I[i].platform_name, sel)) {
                    *chosen = i;
                    return WBCL_SUCCESS;
                }
    }
    char devs[1024];
    list_devices(devs, sizeof devs, I, n);
    wbcl__msg(err, errlen, "no device matches %s '%s'; devices: %s", origin, sel, devs);
    return WBCL_ERROR_NO_DEVICE;
}
