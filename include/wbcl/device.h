/* wbcl — OpenCL device discovery, capabilities and selection.
 *
 * Devices are numbered in discovery order across all platforms (global index)
 * and also addressed as "platform:device". A platform whose ICD fails to
 * answer is skipped (noted in the error buffer) rather than failing the list. */
#ifndef WBCL_DEVICE_H
#define WBCL_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include "wbcl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wbcl_device_type {
    WBCL_DEVICE_OTHER = 0,
    WBCL_DEVICE_CPU = 1,
    WBCL_DEVICE_GPU = 2,
    WBCL_DEVICE_ACCELERATOR = 3
} wbcl_device_type;

/* Capabilities probed once per device. Strings are NUL-terminated, truncated to fit. */
typedef struct wbcl_device_info {
    size_t index;                /* global index across platforms                    */
    unsigned platform_index;     /* position of the platform                         */
    unsigned device_index;       /* position of the device within its platform       */
    wbcl_device_type type;
    char name[128];
    char vendor[128];
    char platform_name[128];
    char platform_version[128];
    char driver_version[128];
    char device_version[128];    /* "OpenCL 3.0 ..."                                */
    char opencl_c_version[128];  /* "OpenCL C 1.2 ..."                              */
    int cl_major, cl_minor;      /* parsed from device_version                      */
    unsigned compute_units;
    size_t max_work_group_size;
    size_t max_work_item_sizes[3];
    uint64_t local_mem_size;
    int local_mem_is_global;     /* CL_GLOBAL local memory (emulated, e.g. CPUs)     */
    uint64_t global_mem_size;
    uint64_t max_alloc_size;
    int has_fp16;                /* cl_khr_fp16                                      */
    int has_fp64;                /* cl_khr_fp64 or a double FP config                */
    int has_profiling;           /* queue profiling supported                        */
    unsigned native_vector_width_float; /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT: floats per SIMD
                                           register (16 on AVX-512 CPUs, 8 on AVX2, 4 on SSE/NEON) */
    int has_nv_compiler_options; /* cl_nv_compiler_options (NVIDIA's OpenCL): the build takes
                                    -cl-nv-maxrregcount=N (keys gemm.tiled.maxrreg, attention.maxrreg) */
} wbcl_device_info;

/* Lists every device of every platform. On success *infos is a malloc'd array
 * of *count entries (free with wbcl_device_list_free); *count may be 0 only if
 * WBCL_ERROR_NO_DEVICE is returned. Platforms that fail are skipped and
 * described in err (status still WBCL_SUCCESS if any device was found). */
wbcl_status wbcl_device_list(wbcl_device_info **infos, size_t *count, char *err, size_t errlen);
void wbcl_device_list_free(wbcl_device_info *infos);

/* Resolves a selector against a device list:
 *   NULL or ""     -> $WBCL_DEVICE if set, else the default (first GPU, else first device)
 *   "N"            -> global index N
 *   "P:D"          -> device D of platform P
 *   "cpu" / "gpu" / "accelerator" -> first device of that type
 *   anything else  -> first device whose name, vendor or platform name contains it
 *                     (case-insensitive)
 * Returns WBCL_ERROR_NO_DEVICE with a message listing the devices if none matches. */
wbcl_status wbcl_device_select(const wbcl_device_info *infos, size_t count, const char *selector,
                               size_t *chosen, char *err, size_t errlen);

/* "cpu", "gpu", "accelerator", "other". */
const char *wbcl_device_type_name(wbcl_device_type type);

#ifdef __cplusplus
}
#endif
#endif
