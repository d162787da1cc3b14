/* wbcl — the context: one device, one in-order queue, its program cache and
 * the last error message. All device resources belong to a context; there is
 * no other global state. A context must be used by one thread at a time; two
 * contexts (on the same or different devices) may be used from two threads. */
#ifndef WBCL_CONTEXT_H
#define WBCL_CONTEXT_H

#include <stddef.h>
#include <stdint.h>
#include "wbcl/status.h"
#include "wbcl/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wbcl_context wbcl_context;

/* Opens a context on the device chosen by `selector` (see wbcl_device_select;
 * NULL honours $WBCL_DEVICE, then the default). On failure *out is NULL and
 * err (if given) holds the reason. Environment read here:
 *   WBCL_DEVICE       default selector
 *   WBCL_VARIANT      kernel variant family of the ops on any device: cpu, gpu, or auto (the
 *                     default; also when unset or empty): by device type, see wbcl_variant below.
 *                     Case-insensitive. Any other value makes this call fail with
 *                     WBCL_ERROR_INVALID_ARGUMENT and a message naming the variable.
 *   WBCL_KERNEL_DIR   directory whose <family>.cl files replace the embedded kernels
 *   WBCL_CACHE_DIR    on-disk program cache (default $XDG_CACHE_HOME/wbcl or ~/.cache/wbcl;
 *                     "off" disables it). Binaries found there are always used; the context
 *                     writes new ones at destroy unless the driver keeps compiled kernels on
 *                     disk itself: on PoCL (its kernel cache, POCL_CACHE_DIR, on unless
 *                     POCL_KERNEL_CACHE=0) it does not, because PoCL's binary export compiles
 *                     every kernel of a program, used or not (a cold start 4x slower), and PoCL
 *                     already keeps what was compiled. wbcl_context_save_cache writes anyway.
 *   WBCL_BINARY_DIR   directory of prebuilt program binaries (wbcl-info --export-binaries),
 *                     consulted first, read-only; keyed by the embedded kernels, so they are
 *                     used even when WBCL_KERNEL_DIR is set (which then serves only programs
 *                     the directory lacks)
 *   WBCL_TUNING       the kernel parameter table ("off": none); unset: the device's file in the
 *                     cache directory, else a table shipped for the device, else the defaults.
 *                     A bad table or key is ignored with a note, never a failure: wbcl/tuning.h
 *   WBCL_BUILD_LOG    set and not "0": each program compiled from source prints its options and
 *                     build log to stderr (NVIDIA's OpenCL: built with -cl-nv-verbose, ptxas's
 *                     registers, spills and stack per kernel, unless the driver's own cache
 *                     skips ptxas: CUDA_CACHE_DISABLE=1); cached programs print nothing */
wbcl_status wbcl_context_create(const char *selector, wbcl_context **out, char *err, size_t errlen);

/* Saves program binaries that were used but not yet cached (where the driver keeps no kernel
 * cache of its own: see WBCL_CACHE_DIR above), frees everything. NULL is a no-op. */
void wbcl_context_destroy(wbcl_context *ctx);

/* Message of the last failed call on this context ("" if none). Valid until the next call. */
const char *wbcl_context_last_error(const wbcl_context *ctx);

/* The device this context runs on. */
const wbcl_device_info *wbcl_context_device(const wbcl_context *ctx);

/* Waits until all enqueued work is done. */
wbcl_status wbcl_context_finish(wbcl_context *ctx);

/* Kernel variant family used by the ops: CPU-shaped (register tiles, row-block
 * reductions, no local memory) or GPU-shaped (local-memory tiles, work-group
 * reductions). AUTO picks by device type (CPU devices: CPU, all others: GPU).
 * Both families run on every device. A new context starts with
 * wbcl_variant_default (so $WBCL_VARIANT when set); wbcl_context_set_variant
 * overrides that for this context (AUTO: back to by device type, whatever
 * $WBCL_VARIANT says). */
typedef enum wbcl_variant { WBCL_VARIANT_AUTO = 0, WBCL_VARIANT_CPU = 1, WBCL_VARIANT_GPU = 2 } wbcl_variant;
wbcl_status wbcl_context_set_variant(wbcl_context *ctx, wbcl_variant variant);
wbcl_variant wbcl_context_variant(const wbcl_context *ctx); /* resolved: never AUTO */
/* "auto", "cpu", "gpu"; NULL for a value outside the enum. */
const char *wbcl_variant_name(wbcl_variant variant);
/* The reverse, case-insensitive ("GPU" too): WBCL_ERROR_INVALID_ARGUMENT (*out untouched) for
 * anything else. For tools' --variant options. */
wbcl_status wbcl_variant_parse(const char *name, wbcl_variant *out);
/* The variant a new context on `dev` starts with: $WBCL_VARIANT when it is cpu or gpu, else
 * (auto, unset, empty) by device type; never AUTO. Fails like wbcl_context_create, with the
 * same message in err, when $WBCL_VARIANT holds anything else. */
wbcl_status wbcl_variant_default(const wbcl_device_info *dev, wbcl_variant *out, char *err, size_t errlen);

/* GEMM backend:
 *   PACKED   our packed register-tile kernel (cl/gemm.cl), the CPU-shaped one;
 *   CLBLAST  CLBlast's SGEMM with the context's clblast.* parameters;
 *   TILED    our local-memory tiled kernel (cl/gemm_tiled.cl), GPU-shaped: work-groups of
 *            16 x 16 work-items over 128 x 128 tiles of C (64 x 64 where the 128-tiles would be
 *            fewer than the compute units), k in slices of 8 (gemm.tiled.tile, gemm.tiled.tk,
 *            gemm.tiled.db: double buffering, gemm.tiled.v4: float4 loads).
 *            Setting it fails with WBCL_ERROR_DEVICE_LIMIT on a device whose work-groups
 *            or local memory are too small for it;
 *   AUTO     the device's parameter table's gemm.backend (wbcl/tuning.h; wbcl-tune measures it),
 *            else packed on CPU devices, tiled on GPUs that take it (measured faster than CLBlast
 *            on an NVIDIA H200; on other GPUs not yet measured: `wbcl-tune --op gemm_backend`
 *            writes the device's choice), CLBlast elsewhere. A new context starts with AUTO;
 *            an explicit backend set here wins over the table until AUTO is set again.
 * All give the same results to rounding, for every shape, transpose and dtype. */
typedef enum wbcl_gemm_backend {
    WBCL_GEMM_AUTO = 0,
    WBCL_GEMM_PACKED = 1,
    WBCL_GEMM_CLBLAST = 2,
    WBCL_GEMM_TILED = 3
} wbcl_gemm_backend;
wbcl_status wbcl_context_set_gemm_backend(wbcl_context *ctx, wbcl_gemm_backend backend);
wbcl_gemm_backend wbcl_context_gemm_backend(const wbcl_context *ctx); /* resolved: never AUTO */

/* Packed weights kept between calls. On the packed GEMM backend, the weight matrices that modules
 * and models own (the MSSA, ISTA, TSSA, XCA and MHA layers, CRATE, ToST) are packed into the GEMM's
 * panels at their first use and the panels are kept until the module is destroyed, instead of being
 * packed again on every call (ToST-T at batch 1 on a CPU: a quarter of its time). Tensors the caller
 * creates are never kept, nor are the language models' weights (wbcl/lm.h: their decode steps read
 * the weights in place, so the panels would nearly double their memory for the prefill alone). The panels take about the weights' size again (twice for float16
 * weights); they count against this context's limit, by default a quarter of the device's global
 * memory. A weight whose panels would pass the limit is packed per call, as without the cache.
 * Lowering the limit frees kept panels (the most recent first) until it holds; 0 frees them all and
 * keeps none from then on. The results are the same either way. */
wbcl_status wbcl_context_set_weight_cache(wbcl_context *ctx, size_t max_bytes);
size_t wbcl_context_weight_cache_bytes(const wbcl_context *ctx); /* bytes of panels kept now */

/* Device timing for benchmarks. While enabled, every kernel the context
 * enqueues is waited for and its profiled duration added to a counter. */
wbcl_status wbcl_context_set_timing(wbcl_context *ctx, int enabled);
uint64_t wbcl_context_kernel_ns(const wbcl_context *ctx);  /* accumulated since last reset */
void wbcl_context_reset_kernel_ns(wbcl_context *ctx);       /* also resets the per-kernel figures */
/* The same per kernel: the i-th kernel object the context holds (i = 0, 1, ...), its name,
 * the profiled time and the number of its timed launches since the last reset. Returns 1,
 * or 0 past the last (outputs untouched; NULL outputs are skipped). A kernel built into
 * programs with different options (e.g. two GEMM tiles) is listed once per program. */
int wbcl_context_kernel_profile(const wbcl_context *ctx, size_t i, const char **name, uint64_t *ns,
                                uint64_t *launches);
/* Total time spent in clBuildProgram (source or binary) by this context, in ns. */
uint64_t wbcl_context_build_ns(const wbcl_context *ctx);

/* Writes the binaries of every program this context has built (after their
 * kernels ran at least once) into `dir`, named so that WBCL_BINARY_DIR=dir
 * loads them without compiling. Creates dir if needed. */
wbcl_status wbcl_context_export_binaries(wbcl_context *ctx, const char *dir);

/* Saves used programs to the on-disk cache now, on every device (destroy does it only where
 * the driver keeps no kernel cache of its own). Success when the cache is off. */
wbcl_status wbcl_context_save_cache(wbcl_context *ctx);

/* The kernel families built into the library ("aot", "attention", ..., "xca"), i = 0, 1, ...;
 * NULL past the last. ("common", the prelude every family includes, is not listed.) */
const char *wbcl_kernel_family(size_t i);

/* Builds (or loads) the program of a kernel family now, e.g. "gemm", "ops". */
wbcl_status wbcl_context_warm(wbcl_context *ctx, const char *family);

#ifdef __cplusplus
}
#endif
#endif
