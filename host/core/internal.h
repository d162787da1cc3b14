/* wbcl — internals shared by host/ files. Not installed, not public API.
 *
 * Conventions for op implementations (the files in host/ops):
 *   1. validate arguments with the wbcl__check_* helpers (they set the message);
 *   2. get kernels with wbcl__kernel(ctx, family, extra_options, name, &k);
 *   3. set arguments with WBCL_ARG / wbcl__set_arg, enqueue with wbcl__launch.
 * Every failure path calls wbcl__fail / wbcl__cl_fail, which record the
 * message in the context and return the status to propagate. */
#ifndef WBCL_INTERNAL_H
#define WBCL_INTERNAL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "wbcl/status.h"
#include "wbcl/device.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"

#if defined(__GNUC__)
#define WBCL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define WBCL_PRINTF(a, b)
#endif

/* ---- per-device-class kernel parameters (CLBlast-style table) ---------- */
typedef struct wbcl_params {
    int wg_size;      /* work-group size for 1-D elementwise kernels (0 = let runtime choose) */
    int gemm_mr;      /* packed GEMM: rows of C per work-item                    */
    int gemm_nr;      /* packed GEMM: columns of C per work-item (vector width)  */
    int gemm_tile;    /* GPU-shaped kernels: square local-memory tile edge       */
    int reduce_rows;  /* CPU row-block reductions: rows streamed per work-item   */
    int reduce_wg;    /* GPU work-group reductions: work-group size              */
    int gemm_a_block_kib; /* packed GEMM: KiB of packed A panels per block (L2)    */
    int gemm_tiled;   /* tiled GEMM (cl/gemm_tiled.cl): rows = columns of C per work-group, 64 or 128;
                       * 0 (the default): by the shape, wbcl__gemm_tiled_tile */
    int gemm_tiled_k; /* tiled GEMM: k per local-memory slice, 8, 16 or 32    */
    int gemm_tiled_db; /* tiled GEMM: 1 = two local-memory slices (one barrier per slice)   */
    int gemm_backend; /* the GEMM backend a context uses unless set explicitly (gemm.backend) */
    int circulant_wg; /* GPU variant, shift-invariant ReduNet: 1 = a work-group per matrix / bin (circulant.wg) */
    int gemm_tiled_maxrreg; /* tiled GEMM on NVIDIA's OpenCL: -cl-nv-maxrregcount (0: the compiler's choice) */
    int gemm_tiled_v4; /* tiled GEMM: 1 = float4 global loads of A and B where aligned (gemm.tiled.v4) */
} wbcl_params;

/* ---- tuned parameters (host/core/tuning.c; include/wbcl/tuning.h documents keys and files) ---- */
#define WBCL_TUNED_MAX 64
typedef struct wbcl__tuned {
    char key[48];     /* "gemm.mr", "attention.p64.qb" */
    long value;       /* validated against the kernels and the device */
    int source;       /* wbcl_param_source */
} wbcl__tuned;

/* ---- program cache --------------------------------------------------------- */
enum { WBCL_ORIGIN_SOURCE = 0, WBCL_ORIGIN_BINARY_DIR = 1, WBCL_ORIGIN_CACHE = 2 };

typedef struct wbcl_program {
    char *family;          /* "gemm", "ops", ...            */
    char *options;         /* full build options            */
    char key[33];          /* hex hash: cache file name     */
    cl_program program;
    int used;              /* a kernel of it was launched   */
    int saved;             /* binary on disk is current     */
    int origin;            /* WBCL_ORIGIN_*: where it came from */
    uint64_t build_ns;
} wbcl_program;

typedef struct wbcl_kern {
    cl_kernel kernel;
    wbcl_program *prog;
    char *name;
    uint64_t ns, launches; /* timed launches (wbcl_context_set_timing) since the last reset */
} wbcl_kern;

/* Scratch slot owners: 0 = packed A panels, 1 = packed B panels (host/ops/gemm.c); 4-7 = host/ops/linalg.c;
 * 2-3 = host/ops/ista.c and host/ops/measures.c (which call the GEMM and linalg ops); 4-5 = the packed K / V
 * of host/ops/attention.c; 2-5 = host/ops/tssa.c, 2-3 = the GPU path of host/ops/xca.c. A slot is held only
 * within one call: ops that share slots never call each other while holding them. */
#define WBCL_SCRATCH_SLOTS 8

struct wbcl_context {
    cl_platform_id platform;
    cl_device_id device;
    cl_context cl;
    cl_command_queue queue;
    wbcl_device_info info;
    wbcl_params params;
    wbcl_variant variant;           /* resolved */
    wbcl_gemm_backend gemm_backend; /* resolved */
    int gemm_backend_explicit;      /* set by wbcl_context_set_gemm_backend (not AUTO): the table's
                                     * gemm.backend no longer applies */
    int timing;
    uint64_t kernel_ns;
    uint64_t build_ns;
    char *last_error;               /* heap, grows to hold build logs */
    size_t last_error_cap;
    wbcl_program **programs;
    size_t n_programs, cap_programs;
    wbcl_kern **kerns;
    size_t n_kerns, cap_kerns;
    char *cache_dir;                /* NULL: disk cache off */
    int cache_save_at_exit;         /* destroy writes new binaries (0 where the driver keeps its own
                                       kernel cache: see driver_caches_kernels in context.c) */
    char *binary_dir;               /* NULL: none           */
    char *kernel_dir;               /* NULL: embedded only  */
    cl_mem scratch[WBCL_SCRATCH_SLOTS];
    size_t scratch_bytes[WBCL_SCRATCH_SLOTS];
    struct wbcl__fft_cache *fft;    /* clFFT plans (host/core/fft.c); NULL until the first FFT */
    int gemm_linear_mode;           /* wbcl__gemm_linear: 0 fused (default), 1 epilogue only, 2 unfused */
    wbcl__tuned tuned[WBCL_TUNED_MAX]; /* table values and set parameters (override the defaults) */
    size_t n_tuned;
    int tuning_source;              /* wbcl_param_source of the table loaded (0: none) */
    wbcl_variant tuning_variant;    /* the kernel variant the table is for */
    char *tuning_origin;            /* its path or name (heap; NULL: none) */
    int clblast_noted;              /* a note about this context's clblast.* keys was left (blas.c) */
    char *tuning_notes;             /* rejected tables and keys, one per line (heap; NULL: none) */
    struct wbcl__pack_pool *pack_pool; /* kept weight panels: bytes and limit (host/core/packed.c) */
    int build_log;                  /* WBCL_BUILD_LOG set: each program built from source prints its build log
                                       to stderr (NVIDIA: with -cl-nv-verbose, ptxas's registers and spills) */
};

struct wbcl_tensor {
    wbcl_context *ctx;
    cl_mem mem;
    int ndim;
    size_t shape[WBCL_MAX_DIMS];
    size_t numel;
    wbcl_dtype dtype;
    int constant;                 /* wbcl__tensor_constant: owned by a module, never written after it is made */
    struct wbcl__packed *packed;  /* its packed GEMM panels kept between calls (host/core/packed.c) */
};

/* ---- packed copies of constant weights (host/core/packed.c) ------------------ */
/* Marks a tensor that a module or model owns and never writes after making it (NULL: no-op): the packed
 * GEMM may keep its B panels between calls. Never for a tensor a caller can reach. */
void wbcl__tensor_constant(wbcl_tensor *t);
/* Frees the tensor's kept panels (its destroy, and every write through the tensor API). */
void wbcl__tensor_drop_packed(wbcl_tensor *t);
/* Undoes wbcl__tensor_constant and frees the panels (NULL: no-op): for an owner that keeps none, the LMs,
 * whose decode steps read the weights in place and whose memory the panels would nearly double. The same
 * for the layers an LM makes (their creators mark their weights constant). */
void wbcl__tensor_transient(wbcl_tensor *t);
struct wbcl_tssa_causal_layer;
struct wbcl_ista_layer;
void wbcl__tssa_causal_layer_transient(struct wbcl_tssa_causal_layer *L);
void wbcl__ista_layer_transient(struct wbcl_ista_layer *l);
/* The view of B the panels were packed from, and the panel width. */
typedef struct wbcl__packed_key {
    int tb;
    size_t off, ld, n, k, nr;
} wbcl__packed_key;
/* For a constant t: 1 with *mem = panels packed earlier for key; 0 with *mem = a new buffer of bytes to
 * pack into (then wbcl__packed_done), or 0 with *mem = NULL: keep nothing (not constant, over the
 * context's limit, too many views, no memory), pack into scratch as usual. Records no error. */
int wbcl__packed_get(wbcl_context *ctx, wbcl_tensor *t, const wbcl__packed_key *key, size_t bytes, cl_mem *mem);
/* After packing into a buffer wbcl__packed_get gave: ok 1 keeps it, 0 (the launch failed) frees it. */
void wbcl__packed_done(wbcl_tensor *t, const wbcl__packed_key *key, int ok);
/* The context's byte count and limit (wbcl_context_set_weight_cache), shared with the entries. */
wbcl_status wbcl__pack_pool_create(wbcl_context *ctx);
void wbcl__pack_pool_release(wbcl_context *ctx);

/* ---- errors ------------------------------------------------------------- */
/* Records a formatted message in ctx (ctx may be NULL) and returns status. */
wbcl_status wbcl__fail(wbcl_context *ctx, wbcl_status status, const char *fmt, ...) WBCL_PRINTF(3, 4);
/* Records "<what>: <CL_ERROR_NAME> (<code>)" and returns a status mapped from the
 * OpenCL error (allocation failures -> WBCL_ERROR_DEVICE_LIMIT, else WBCL_ERROR_OPENCL). */
wbcl_status wbcl__cl_fail(wbcl_context *ctx, cl_int err, const char *fmt, ...) WBCL_PRINTF(3, 4);
const char *wbcl__cl_error_name(cl_int err);
/* Writes a message into a caller buffer (err may be NULL). */
void wbcl__msg(char *err, size_t errlen, const char *fmt, ...) WBCL_PRINTF(3, 4);
/* Formats a shape as "(2, 3, 4)" into buf. */
const char *wbcl__shape_str(char *buf, size_t len, int ndim, const size_t *shape);

/* ---- element types ------------------------------------------------------- */
/* Bytes per element of a tensor dtype (4 or 2; 0 outside the enum) and its name ("float32",
 * "float16", "invalid"). Every allocation, transfer and bounds check multiplies by this. */
size_t wbcl__dtype_size(wbcl_dtype d);
const char *wbcl__dtype_name(wbcl_dtype d);

/* ---- argument checks (set message, return status) ------------------------ */
/* NULL tensor pointer, tensor from another context, or a dtype other than float32: the check of
 * every op that computes on float32 storage only. The dtype message names the op, the argument
 * and the dtype, e.g. "wbcl_relu: tensor 'x' is float16; this operation supports float32 only". */
wbcl_status wbcl__check_tensor(wbcl_context *ctx, const wbcl_tensor *t, const char *op, const char *what);
/* The same for ops that read or write float16 storage too (computing in float32): any dtype. */
wbcl_status wbcl__check_tensor_any(wbcl_context *ctx, const wbcl_tensor *t, const char *op, const char *what);
/* a and b must have identical shapes. */
wbcl_status wbcl__check_same_shape(wbcl_context *ctx, const wbcl_tensor *a, const wbcl_tensor *b,
                                   const char *op, const char *an, const char *bn);
/* Checked size arithmetic: returns 0 on overflow. */
int wbcl__mul_ok(size_t a, size_t b, size_t *out);

/* ---- programs and kernels --------------------------------------------------- */
/* Device-class parameter table lookup (fills ctx->params): the defaults, then the tuned values
 * that apply (wbcl__tuned). */
void wbcl__params_init(wbcl_context *ctx);
/* Loads the context's parameter table ($WBCL_TUNING, cache file, shipped table: tuning.h) into
 * ctx->tuned, with notes for what was rejected; never fails (out of memory: no table). Call
 * after ctx->info, ctx->variant and ctx->cache_dir are set, before wbcl__params_init. */
void wbcl__tuning_load(wbcl_context *ctx);
void wbcl__tuning_release(wbcl_context *ctx);
/* The tuned value of `key` ("gemm.mr", "attention.qb") that applies on this context: for
 * attention keys and p > 0 the scoped "attention.pP.name" first. Returns 1 and sets *value
 * (and *source if not NULL) when there is one, else 0. Table values apply only while the
 * context runs the table's variant; set values always. */
int wbcl__tuned_value(const wbcl_context *ctx, const char *key, size_t p, long *value, int *source);
/* Adds a line to the context's tuning notes (wbcl_context_tuning_notes, shown by wbcl-info). */
void wbcl__tuning_note(wbcl_context *ctx, const char *fmt, ...) WBCL_PRINTF(2, 3);
/* Fused attention's parameters for head dimension p (host/ops/attention.c): v[i] is the value of key
 * wbcl__att_keys[i] (qb, g, vw, bq, bk, tiled, vc, sp, maxrreg); with tuned = 0 the built-in rule only,
 * else with the tuned values applied. */
#define WBCL_ATT_NPARAMS 9
extern const char *const wbcl__att_keys[WBCL_ATT_NPARAMS];
void wbcl__attention_params(const wbcl_context *ctx, size_t p, int tuned, int v[WBCL_ATT_NPARAMS]);
/* wbcl_attention_softmax_strided with the caller's op name in its messages (host/ops/attention.c): other
 * operators whose attention is the softmax one (the CPU variant's AoT step) run its kernels. */
struct wbcl_attention_desc;
#define WBCL_ATT_P_MAX 4096 /* the attention kernels refuse larger head dimensions (private arrays) */
#define WBCL_ATT_N_MAX ((size_t)INT_MAX - 64) /* and more tokens (32-bit signed indices in the kernels) */
wbcl_status wbcl__attention(wbcl_context *ctx, const char *op, const struct wbcl_attention_desc *d,
                            const wbcl_tensor *q, const wbcl_tensor *k, const wbcl_tensor *v, wbcl_tensor *o);
/* Shipped tables (host/core/tuning_tables.c): the i-th table's name and text, NULL past the end. */
const char *wbcl__shipped_table(size_t i, const char **name);
/* The -D prelude common to every program of this context (static storage in ctx). */
/* Gets a cached kernel, building/loading its program on first use. `extra` are
 * additional build options (e.g. "-DTS=16"), may be NULL. */
wbcl_status wbcl__kernel(wbcl_context *ctx, const char *family, const char *extra, const char *name, wbcl_kern **out);
wbcl_status wbcl__program(wbcl_context *ctx, const char *family, const char *extra, wbcl_program **out);
void wbcl__programs_release(wbcl_context *ctx);
/* Appends " -cl-nv-maxrregcount=maxrreg" to the build options opts (capacity len) where maxrreg > 0 and the
 * device's compiler takes NVIDIA's options (cl_nv_compiler_options); otherwise leaves them as they are. */
void wbcl__append_regcap(const wbcl_context *ctx, int maxrreg, char *opts, size_t len);
/* Embedded kernel sources (generated at build time from the cl directory). */
const char *wbcl__embedded_source(const char *family, size_t *len);
/* Name of embedded kernel family i (alphabetical; "common" is the shared prelude), NULL past the end. */
const char *wbcl__embedded_family(size_t i);

/* ---- linear layers on the GEMM (host/ops/gemm.c) ---------------------------------- */
/* Y (m, n) = act(X (m, k) Wᵀ + bias), W (n, k) row-major, X and Y contiguous from offset 0,
 * bias (n) or NULL, gelu 0/1 (exact GELU, wbcl_gelu* in cl/common.cl; needs a bias). On the
 * packed backend one kernel launch after packing W: bias and GELU in the GEMM's epilogue,
 * X read in place (WBCL_GEMM_EPILOGUE, WBCL_GEMM_A_ROWS in cl/gemm.cl). On the tiled backend
 * (modes 0, 1) bias and GELU are applied in the tiled kernel's store (WBCL_GT_EPI in
 * cl/gemm_tiled.cl). Otherwise (CLBlast, or ctx->gemm_linear_mode 2) the GEMM, then one pass
 * for bias and GELU. Validates like
 * wbcl_gemm_strided (shapes, sizes, Y distinct from X and W). */
/* Whether the tiled GEMM backend (WBCL_GEMM_TILED) with the context's gemm.tiled.* parameters fits the
 * device: work-groups of 256 and 4 tk (2 tile + 8) bytes of local memory. WBCL_ERROR_DEVICE_LIMIT (an
 * error naming the limit, prefixed with op) otherwise. host/ops/gemm.c. */
wbcl_status wbcl__gemm_tiled_fits(wbcl_context *ctx, const char *op);
/* ctx->gemm_backend from the parameters (gemm.backend, else by device type) unless it was set
 * explicitly; a tiled backend the device cannot take gives the default. host/core/program.c. */
void wbcl__gemm_backend_resolve(wbcl_context *ctx);
/* The same for any tile and tk on dev, without recording an error: the reason (unprefixed) in why. */
wbcl_status wbcl__gemm_tiled_limits(const wbcl_device_info *dev, int tile, int tk, int db, char *why, size_t n);
/* the tile the tiled GEMM runs for C of m x n (times batch): gemm.tiled.tile, or when it is 0, 128
 * unless the 128 x 128 tiles would be fewer than the device's compute units (or 128 does not fit), then 64 */
int wbcl__gemm_tiled_tile(const wbcl_context *ctx, size_t m, size_t n, size_t batch);
/* The backend a context on dev uses without a table key or an explicit choice: packed on CPU
 * devices, tiled on GPUs that take its smallest form, CLBlast elsewhere. */
wbcl_gemm_backend wbcl__gemm_backend_default(const wbcl_device_info *dev);
wbcl_status wbcl__gemm_linear(wbcl_context *ctx, const wbcl_tensor *X, size_t m, size_t k, const wbcl_tensor *W,
                              size_t n, const wbcl_tensor *bias, int gelu, wbcl_tensor *Y);
/* Up to WBCL_GEMV_ROWS rows (a decode step's projections) with X, W and Y in float32, mode 0: the
 * GEMV below instead (one pass over W, no packing). */
#define WBCL_GEMV_ROWS 8
/* The same contract after wbcl__gemm_linear's validation, m <= WBCL_GEMV_ROWS, float32 tensors
 * (host/ops/gemv.c, cl/gemv.cl). */
wbcl_status wbcl__gemv_linear(wbcl_context *ctx, const wbcl_tensor *X, size_t m, size_t k, const wbcl_tensor *W,
                              size_t n, const wbcl_tensor *bias, int gelu, wbcl_tensor *Y);
/* Benchmarks and tests: 0 = the fused path above (default; the GEMV for few rows), 1 = epilogue
 * but A packed as in wbcl_gemm (no in-place A), 2 = unfused (GEMM, then a bias/GELU pass). */
wbcl_status wbcl__gemm_set_linear_mode(wbcl_context *ctx, int mode);

/* ---- launching -------------------------------------------------------------- */
wbcl_status wbcl__set_arg(wbcl_context *ctx, wbcl_kern *k, cl_uint idx, size_t size, const void *value);
#define WBCL_ARG(ctx, k, idx, var)                                                       \
    do {                                                                                 \
        wbcl_status st_arg_ = wbcl__set_arg((ctx), (k), (idx), sizeof(var), &(var));     \
        if (st_arg_) return st_arg_;                                                     \
    } while (0)
/* The same where the caller has a clean-up label: st gets the status and control goes to `label`. */
#define WBCL_ARG_OR(st, label, ctx, k, idx, var)                                         \
    do {                                                                                 \
        if (((st) = wbcl__set_arg((ctx), (k), (idx), sizeof(var), &(var)))) goto label; \
    } while (0)
/* Enqueues an NDRange (local may be NULL); global sizes need not be multiples
 * of local: they are rounded up here (kernels must bounds-check). */
wbcl_status wbcl__launch(wbcl_context *ctx, wbcl_kern *k, cl_uint dims, const size_t *global, const size_t *local);
size_t wbcl__round_up(size_t x, size_t m);
/* Kernels compiled with reqd_work_group_size(want, 1, 1) can be launched only if the compiled kernel accepts
 * that many work-items: CL_KERNEL_WORK_GROUP_SIZE (kernel_limit), which register or local-memory use can make
 * smaller than the device's CL_DEVICE_MAX_WORK_GROUP_SIZE. Returns want if want <= kernel_limit, else the largest
 * power of two <= kernel_limit (the caller rebuilds the kernel for it), 0 if kernel_limit is 0 (the caller
 * takes its generic path). Pure: tests/test_core.c checks it with fake limits. */
size_t wbcl__wg_fit(size_t want, size_t kernel_limit);
/* CL_KERNEL_WORK_GROUP_SIZE of k on the context's device; a failure is recorded and returned. */
wbcl_status wbcl__kernel_wg_limit(wbcl_context *ctx, wbcl_kern *k, size_t *limit);

/* Element-wise dtype conversion on the device: dst[dst_off + i] = src[src_off + i] for i < n,
 * float16 -> float32 exactly (vload_half), float32 -> float16 rounding to nearest even
 * (vstore_half_rte), same dtype a plain copy. Offsets and n in elements. (host/core/convert.c) */
wbcl_status wbcl__convert(wbcl_context *ctx, const char *op, cl_mem src, wbcl_dtype sd, size_t src_off, cl_mem dst,
                          wbcl_dtype dd, size_t dst_off, size_t n);

/* Replaces *t (if not NULL and not already float16) by a float16 copy of it (same shape, values
 * rounded to nearest even), destroying the float32 original: the weight matrices of models loaded
 * with weight_dtype WBCL_F16. On failure *t is unchanged. (host/core/tensor.c) */
wbcl_status wbcl__tensor_store_f16(wbcl_context *ctx, wbcl_tensor **t);
/* The same for the matrices modules hand only to the GEMM (their projections): MSSA U and Wo,
 * the ISTA layer's W (or folded M), the TSSA layer's W and Wo. */
struct wbcl_mssa;
struct wbcl_ista_layer;
struct wbcl_tssa_layer;
wbcl_status wbcl__mssa_store_f16(wbcl_context *ctx, struct wbcl_mssa *m);
wbcl_status wbcl__ista_layer_store_f16(wbcl_context *ctx, struct wbcl_ista_layer *l);
wbcl_status wbcl__tssa_layer_store_f16(wbcl_context *ctx, struct wbcl_tssa_layer *l);

/* Reusable device scratch buffer for a slot (grow-only, owned by ctx). */
wbcl_status wbcl__scratch(wbcl_context *ctx, int slot, size_t bytes, cl_mem *out);
/* Creates a raw buffer, mapping allocation failures to WBCL_ERROR_DEVICE_LIMIT with a message. */
wbcl_status wbcl__buffer(wbcl_context *ctx, size_t bytes, const char *what, cl_mem *out);

/* ---- files (program cache) -------------------------------------------------- */
int wbcl__mkdir_p(const char *path);
/* Writes bytes atomically (temp file + rename). Returns 0 on success. */
int wbcl__write_file_atomic(const char *path, const void *data, size_t len);
/* Reads a whole file into a malloc'd buffer (+1 NUL byte). NULL on failure. */
char *wbcl__read_file(const char *path, size_t *len);

uint64_t wbcl__now_ns(void);

#endif
