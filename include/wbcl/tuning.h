/* wbcl — tuned kernel parameters: a per-device parameter table that a context loads at
 * creation, and the calls wbcl-tune (tools/wbcl-tune.c) uses to sweep and save it.
 *
 * Every op's kernels are compiled with parameters (register tile of the packed GEMM, queries
 * per register group of the fused attention, work-group sizes, ...). Their defaults come from
 * the device class (host/core/program.c, host/ops/attention.c). A parameter table replaces
 * some of them for one device.
 *
 * Where a new context takes its table from (the first one that is accepted):
 *   1. $WBCL_TUNING=path: that file ("off": no table at all, the defaults everywhere);
 *   2. the file for this device in the cache directory ($WBCL_CACHE_DIR, see context.h):
 *      <cache>/tuning/<device name>-<8 hex digits>.txt, the digits a hash of device name,
 *      vendor and driver version (wbcl_tuning_path gives the exact name); wbcl-tune writes it;
 *   3. a table compiled into the library for the devices measured by the project
 *      (host/core/tuning_tables.c, one text table per device in the format below), chosen
 *      when device name, vendor and driver version are equal to its header's;
 *   4. none: the defaults.
 * A table that is rejected as a whole (unreadable, corrupt, written for another device,
 * vendor, driver or kernel variant) leaves a note (wbcl_context_tuning_notes) and the next
 * source is tried. Inside an accepted table, a key that is unknown, malformed, duplicated,
 * or whose value violates a kernel constraint or a device limit (work-group size, local
 * memory, allowed vector widths, ranges) is dropped with a note: that parameter keeps its
 * default. Loading never fails a context.
 *
 * The file format (text, UTF-8/ASCII, one item a line; '#' starts a comment line, blank
 * lines are ignored; spaces around '=' are optional):
 *
 *     # anything
 *     format = wbcl-tuning-1          (first item, required)
 *     device = pthread-skylake-avx512 (required: CL_DEVICE_NAME, exactly)
 *     vendor = GenuineIntel           (required: CL_DEVICE_VENDOR, exactly)
 *     driver = 3.1                    (required: CL_DRIVER_VERSION, exactly)
 *     variant = cpu                   (required: the kernel variant the values are for)
 *     wbcl = 0.1.0                    (the library that wrote it; another version: a note,
 *                                      the values are validated as always)
 *     gemm.mr = 12                    (parameters: integer values, keys below)
 *     attention.p64.qb = 4
 *
 * Keys ("family.name"; attention keys may be scoped to one head dimension p as
 * "attention.pP.name", which wins over the unscoped key for that p):
 *   core.wg            work-group size of the 1-D elementwise kernels (-DWBCL_WG): 1..device max
 *   reduce.rows        CPU row-block reductions: rows streamed per work-item (-DWBCL_REDUCE_ROWS), 2..4096
 *   reduce.wg          GPU work-group reductions (-DWBCL_REDUCE_WG): a power of two <= device max,
 *                      4*wg bytes <= local memory
 *   gemm.mr, gemm.nr   packed GEMM register tile, rows x columns of C per work-item
 *                      (-DWBCL_GEMM_MR 1..16, -DWBCL_GEMM_NR 4, 8, 16, 32 or 64)
 *   gemm.a_block_kib   packed GEMM: KiB of packed A panels visited per block (L2 blocking), 16..65536;
 *                      a block never has fewer than 40 row panels (host/ops/gemm.c MIN_BLOCK_PANELS);
 *                      where 40 panels exceed twice this size (long k), tiles go in units of 4 x 4
 *                      or 8 x 2 panels whose A and B panels fit in twice this size, if any do
 *   gemm.backend       the GEMM backend of contexts on the device (wbcl_gemm_backend: 1 packed,
 *                      2 CLBlast, 3 tiled) unless one sets it explicitly; absent: packed on CPU
 *                      devices, tiled on GPUs that take it, CLBlast elsewhere. 3 needs work-groups
 *                      of 256 and 4352 bytes of local memory (checked at load); with tile
 *                      parameters the device cannot take (gemm.tiled.*), CLBlast is used
 *   gemm.tiled.tile    tiled GEMM (backend WBCL_GEMM_TILED, cl/gemm_tiled.cl): rows = columns of C
 *                      per work-group of 16 x 16 (-DWBCL_GT_TM = -DWBCL_GT_TN): 64 or 128; 0 or
 *                      absent: by the shape, 128 unless C has fewer 128 x 128 tiles than the device
 *                      has compute units, then 64
 *   gemm.tiled.tk      tiled GEMM: k per local-memory slice (-DWBCL_GT_TK): 8 (default), 16 or 32;
 *                      4 tk (2 tile + 8) bytes of local memory, checked when the GEMM runs
 *   gemm.tiled.db      tiled GEMM: 1 = two local-memory slices (one barrier per slice instead of two;
 *                      twice the local memory; -DWBCL_GT_DB); 0 (default) = one slice
 *   gemm.tiled.v4      tiled GEMM: 1 = float4 global loads of each operand whose stored rows are
 *                      whole float4s at 16-byte-aligned addresses (-DWBCL_GT_VA, _VB); 0 (default) =
 *                      scalar loads. (Before 2026-11-29 gemm.tiled.db = 1 set both; a table written
 *                      then with db = 1 now gets the two slices alone: add gemm.tiled.v4 = 1.)
 *   gemm.tiled.maxrreg tiled GEMM on NVIDIA's OpenCL: registers per work-item at most, passed to the build
 *                      as -cl-nv-maxrregcount (0, the default: the compiler's choice; 16..255). Only on
 *                      devices whose compiler takes NVIDIA's options (wbcl_device_info
 *                      has_nv_compiler_options): elsewhere a nonzero value is refused
 *                      (WBCL_ERROR_UNSUPPORTED; a table's key is noted and ignored)
 *   circulant.wg       GPU-variant shift-invariant ReduNet: 1 (default) the per-frequency Cholesky with a
 *                      work-group of 64 per matrix (C^2 complex floats of local memory) and the Gram
 *                      matrices with a work-group per frequency bin, where the device allows it, and
 *                      the normalization with a work-item per sample lane and chunk of bins; 0 one
 *                      matrix (one matrix row; 16 lanes) per work-item. Same results bit for bit; not
 *                      tuned by wbcl-tune (the CPU variant never reads it)
 *   attention.qb       CPU fused attention: queries per register group (-DWBCL_ATT_QB), 1..16; default
 *                      4 (on CPU devices with 16-float vectors, AVX-512, at every p, longer rows in
 *                      passes: attention.vc; elsewhere for rows of up to 4 vectors (p <= 64), 2 up to
 *                      8, else 1); where the native float vector is narrower than 16 (AVX2, NEON) 6 up
 *                      to p = 128 (with attention.sp 1 and attention.vc 1), else at most 2
 *   attention.g        CPU fused attention: register groups per work-item (-DWBCL_ATT_G), 1..16; default
 *                      4; where the native float vector is narrower than 16, 3 up to p = 128 (8 where
 *                      qb was lowered to 2)
 *   attention.vw       fused attention accumulator vector width (-DWBCL_ATT_VW): 4, 8 or 16
 *   attention.vc       CPU fused attention: accumulator vectors of a query's row per O += P V pass
 *                      (-DWBCL_ATT_VC), 1..16; one that does not divide the row's vectors is lowered to
 *                      the largest divisor; default the whole row, on devices whose native float vector
 *                      is narrower than 16 (AVX2, NEON) one vector a pass up to p = 128, 32 floats a
 *                      pass for longer rows; on CPU devices with 16-float vectors rows of more than 4
 *                      vectors in passes of the largest divisor up to 5 (p = 96: 3, p = 128: 4)
 *   attention.sp       CPU fused attention: 16-key score panels per pass of the score loop over p
 *                      (-DWBCL_ATT_SP): 2 both panels of a 32-key block (2 qb score vectors of 16 floats
 *                      live), 1 one after the other (qb live; the same results bit for bit); default,
 *                      unless set itself, from the qb in use: 1 where 2 qb vectors of 16 floats would
 *                      exceed 3/4 of the vector registers (384 bytes where the native float vector is
 *                      narrower than 16, i.e. qb > 3; 1536 elsewhere, qb > 12), else 2
 *   attention.bq       GPU fused attention: queries per work-group (-DWBCL_ATT_BQ), a power of two
 *                      <= device max
 *   attention.bk       GPU fused attention: keys per local-memory tile (-DWBCL_ATT_BK), 1..256,
 *                      2*bk*p floats within the local memory (scoped key: checked at load;
 *                      unscoped: halved at use until it fits that p)
 *   attention.tiled    GPU fused attention for p = 32, 64, 96 and 128: 1 the register-tiled kernel
 *                      (64 queries per work-group of 128, 32-key tiles at p <= 64, 16 above;
 *                      wbcl_attn_tiled_gpu), 0 the one-query-per-work-item kernel; 2 at p = 32
 *                      and 64 the register-tiled kernel's second form (64-key tiles, 4 x 8 score
 *                      tiles per work-item, row maxima kept per work-item; wbcl_attn_tiled2_gpu;
 *                      34 / 48 KiB of local memory, else the first form), at p = 96 and 128 the
 *                      same as 1; default 1 for p = 64 and 128 on GPU-variant contexts (measured
 *                      faster at p = 64 on an NVIDIA H200; 2 not yet measured), else 0; the tiled
 *                      ones need 128 work-items and 29-48 KiB of local memory, else the
 *                      one-query kernel runs
 *   attention.maxrreg  GPU-shaped fused attention kernels on NVIDIA's OpenCL: registers per work-item at
 *                      most (-cl-nv-maxrregcount; the CPU-shaped programs are built without it); 0, the
 *                      default: the compiler's choice; 16..255; refused elsewhere, as gemm.tiled.maxrreg
 *   clblast.xgemm.NAME CLBlast's Xgemm kernel (the GEMM backend WBCL_GEMM_CLBLAST, selected by
 *                      gemm.backend = 2 or explicitly), NAME one of CLBlast's 16: GEMMK KREG KWG
 *                      KWI MDIMA MDIMC MWG NDIMB NDIMC NWG SA SB STRM STRN VWM VWN. Keys missing from a table keep CLBlast's own
 *                      value for the device (its database; wbcl_context_param_get shows it as the
 *                      default); the set is checked as a whole (CLBlast's tuner constraints, the
 *                      device's work-group size and local memory) when CLBlast runs, and an invalid
 *                      set leaves a note and CLBlast's own values.
 *   clblast.gemm.min_indirect  CLBlast's XGEMM_MIN_INDIRECT_SIZE: a GEMM with m*n*k at or above its
 *                      cube runs the Xgemm kernel (with padding copies), a smaller one the direct
 *                      kernel. 0..2^20
 *                      CLBlast keeps these per device for the whole process; wbcl makes the calling
 *                      context's values current before each CLBlast call (and CLBlast's own again
 *                      for a context without keys), so contexts with different tables coexist.
 * Values in a table apply only while the context runs the table's kernel variant
 * (wbcl_context_set_variant to the other one: the defaults of that variant).
 *
 * WBCL_TUNING and the cache directory are read once, by wbcl_context_create. */
#ifndef WBCL_TUNING_H
#define WBCL_TUNING_H

#include <stddef.h>
#include <stdio.h>
#include "wbcl/status.h"
#include "wbcl/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a parameter's value in use came from. */
typedef enum wbcl_param_source {
    WBCL_PARAM_DEFAULT = 0, /* the built-in rule for the device class            */
    WBCL_PARAM_SHIPPED = 1, /* a table compiled into the library (3. above)       */
    WBCL_PARAM_CACHE = 2,   /* the device's file in the cache directory (2.)      */
    WBCL_PARAM_ENV = 3,     /* the file named by $WBCL_TUNING (1.)                */
    WBCL_PARAM_SET = 4      /* wbcl_context_set_param on this context             */
} wbcl_param_source;

/* "default", "shipped table", "cache file", "WBCL_TUNING", "set"; NULL outside the enum. */
const char *wbcl_param_source_name(wbcl_param_source s);

typedef struct wbcl_param_info {
    const char *key;          /* "gemm.mr", "attention.p64.qb", ...                      */
    const char *family;       /* "core", "reduce", "gemm", "attention"                   */
    long value;               /* in use on this context (attention: for head dim p below) */
    long default_value;       /* what the built-in rule gives                             */
    size_t p;                 /* attention keys: the head dimension value refers to       */
    wbcl_param_source source;
    const char *origin;       /* file path or table name; "" for default and set          */
    const char *doc;          /* one line: what the parameter is                          */
} wbcl_param_info;

/* The i-th parameter of this context (i = 0, 1, ...): every key of the list above
 * (attention's unscoped keys shown for p = 64, the head dimension of the CRATE/ToST models),
 * then each head-dimension-scoped attention entry of the table. Returns 1, or 0 past the last.
 * Strings stay valid until the context changes its parameters or is destroyed. */
int wbcl_context_param(const wbcl_context *ctx, size_t i, wbcl_param_info *out);

/* The value in use for `key` ("gemm.mr", "attention.qb", "attention.p64.qb"; an attention
 * key without scope is resolved for p = 64) and where it came from (either output may be
 * NULL). WBCL_ERROR_INVALID_ARGUMENT for an unknown key. */
wbcl_status wbcl_context_param_get(const wbcl_context *ctx, const char *key, long *value, wbcl_param_source *source);

/* Sets one parameter on this context (source WBCL_PARAM_SET), after the same validation a
 * table's values get: an unknown key or a value that violates a kernel constraint or the
 * device's limits fails with WBCL_ERROR_INVALID_ARGUMENT (or WBCL_ERROR_DEVICE_LIMIT) and a
 * message naming key, value and rule; the parameter is then unchanged. Kernels built from
 * then on use it (programs built before stay cached under their own options). */
wbcl_status wbcl_context_set_param(wbcl_context *ctx, const char *key, long value);

/* Forgets every table value and set parameter: the defaults everywhere (the notes stay). */
wbcl_status wbcl_context_reset_params(wbcl_context *ctx);

/* Notes about tables or keys rejected when this context loaded its parameters, one per line;
 * "" when there were none. */
const char *wbcl_context_tuning_notes(const wbcl_context *ctx);

/* The source of the table in use (WBCL_PARAM_DEFAULT: none) and its path or name ("" if none). */
wbcl_param_source wbcl_context_tuning_source(const wbcl_context *ctx, const char **origin);

/* The path of this device's file in the context's cache directory (see 2. above), into buf.
 * WBCL_ERROR_UNSUPPORTED when the cache is off (WBCL_CACHE_DIR=off, no HOME). */
wbcl_status wbcl_tuning_path(const wbcl_context *ctx, char *buf, size_t len);

/* Writes the context's parameters that do not come from the defaults (table values in use,
 * and every wbcl_context_set_param) as a table for this device and variant, to `path`
 * (directories created, the file replaced atomically). `comment` (may be NULL) is written as
 * '#' lines at the top. */
wbcl_status wbcl_context_save_params(wbcl_context *ctx, const char *path, const char *comment);

/* ---- the tuner (host/core/tuner.c; the command-line tool is wbcl-tune) ---- */
typedef struct wbcl_tune_opts {
    const char *device;  /* selector (wbcl_device_select); NULL: $WBCL_DEVICE, else the default */
    const char *family;  /* "gemm", "gemm_tiled", "clblast", "gemm_backend", "attention", or
                          * NULL / "all"                                                        */
    double budget_s;     /* wall-clock budget of the sweep: no candidate starts past it (the
                          * defaults are always measured; the final winner-against-default
                          * comparison, about 2 x reps calls per shape, runs after it)        */
    const char *out;     /* table to write; NULL: wbcl_tuning_path of the device               */
    int quick;           /* tiny shapes (tests): timings meaningless, the plumbing exercised   */
    int reps;            /* timed call pairs per shape and candidate (median); 0: 5 (quick: 1) */
} wbcl_tune_opts;

/* Sweeps the tunable parameters of the device's kernels, family by family, starting from the
 * built-in defaults (whatever table the device has): where the packed kernel is the device's
 * GEMM (CPUs) or when named ("gemm"), its gemm.mr x gemm.nr register tiles, then gemm.a_block_kib
 * with the winning tile (every later family is measured on top of the earlier winners); on GPUs or
 * when named ("clblast", "gemm_tiled", "gemm_backend"): CLBlast's
 * Xgemm set and threshold, the tiled GEMM's gemm.tiled.tile x gemm.tiled.tk x gemm.tiled.db (and
 * gemm.tiled.maxrreg 128 for the 128-tiles where the compiler takes NVIDIA's options),
 * then gemm.backend (each backend with those winners, on the same shapes); and
 * fused attention for head dimensions 64, 128 and 32, each its own family with keys scoped to it
 * (attention.p64.qb, .g, .vw, .vc, .sp on the CPU variant; .bq, .bk, .tiled on the GPU variant, and
 * .maxrreg 128 with each register-tiled form where the compiler takes NVIDIA's options). Each candidate is first run on a small shape and compared with
 * the double-precision reference (include/wbcl/ref.h; a wrong one is rejected and reported),
 * then timed against the default, interleaved call by call (medians of `reps` pairs), on the
 * CRATE/ToST shapes: GEMMs (8*197) x 384 -> 1536, (8*197) x 1536 -> 384 and 1024^3; attention
 * with B*K heads and N = 48 x 197, 8 x 1024, 4 x 4096 at p = 64, 8 x 1024 and 4 x 2048 at p = 128,
 * 8 x 1024 and 4 x 4096 at p = 32. A winner must beat the default by 2%
 * (or by the default's own spread against itself, if larger: the noise floor) on the geometric
 * mean over the shapes, and keep at least half that lead in a second measurement; otherwise the
 * default is kept. The winners of every family swept are written as the device's table
 * (wbcl_context_save_params). Progress and the summary (winner against default per shape) go
 * to `log` (may be NULL); the table's path to path_out (may be NULL). Fails, writing nothing,
 * if no context opens, the defaults themselves fail their check, or the file is not writable.
 * A candidate that leaves the context unusable (a faulting kernel) is rejected and a new context
 * takes the old one's place; where the driver refuses a new one in this process (NVIDIA's does),
 * the table of the families finished before is written, with a note, and WBCL_ERROR_OPENCL is
 * returned: the later families keep their defaults (tune them with `family` in a new process). */
wbcl_status wbcl_tune_run(const wbcl_tune_opts *opts, FILE *log, char *path_out, size_t path_len);

#ifdef __cplusplus
}
#endif
#endif
