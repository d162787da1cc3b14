/* wbcl-run — the module registry and the helpers modules use.
 *
 * A module is one command of wbcl-run (`wbcl-run layernorm ...`). It is described by a
 * wbcl_run_module (name, summary, usage, accepted params/options, and a run function) and
 * listed in the table in registry.c. To add a family of modules:
 *   1. write tools/run/mod_<family>.c defining `const wbcl_run_module wbcl_mod_<name> = {...};`
 *      for each module (see mod_basic.c for the pattern);
 *   2. add one `X(<name>)` line per module to WBCL_RUN_MODULES in registry.c.
 * CMake globs every .c file in tools/run, so nothing else changes.
 *
 * main.c parses the command line, checks it against the descriptor (number of inputs, whether
 * --weights/--output/--verify are accepted, param and option names), opens the context and
 * calls run(). A run function:
 *   - reads its params first (wbcl_run_param_*), so bad values fail before any work;
 *   - loads inputs and weights (wbcl_run_input, wbcl_run_weight) as device tensors, with host
 *     copies when it verifies;
 *   - calls the library; on a failed call returns wbcl_run_check(r, status) (copies the
 *     context's message);
 *   - with r->verify, compares with the double reference (wbcl_run_verify);
 *   - writes its result LAST (wbcl_run_write_output*), so a failed run leaves --output alone;
 *   - returns 0 on success, non-zero after setting the reason (every helper below that fails
 *     has already set it; use wbcl_run_fail for the module's own checks).
 * Modules print only through wbcl_run_info (suppressed by --quiet) or plain stdout for their
 * main output; main prints the one-line error. */
#ifndef WBCL_RUN_REGISTRY_H
#define WBCL_RUN_REGISTRY_H

#include <stddef.h>
#include <stdio.h>

#include "wbcl/io.h"
#include "wbcl/wbcl.h"

#if defined(__GNUC__)
#define WBCL_RUN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define WBCL_RUN_PRINTF(a, b)
#endif

typedef struct wbcl_run wbcl_run;
typedef struct wbcl_run_par wbcl_run_par;

/* Whether a module takes --weights / --output. */
enum { WBCL_RUN_NONE = 0, WBCL_RUN_OPTIONAL = 1, WBCL_RUN_REQUIRED = 2 };

typedef struct wbcl_run_module {
    const char *name;    /* command name; later families use a prefix: "attn.tssa", "redunet.fit" */
    const char *summary; /* one line for --list */
    const char *usage;   /* text for `wbcl-run NAME --help`: inputs, weights, params, output */
    const char *const *params;  /* NULL-terminated names accepted by --param NAME=VALUE (NULL: none) */
    const char *const *options; /* NULL-terminated extra options `--NAME VALUE` the module reads with
                                   wbcl_run_option (e.g. "labels", "save", "log"); NULL: none */
    int min_inputs, max_inputs; /* how many --input files */
    int weights;                /* WBCL_RUN_NONE / _OPTIONAL / _REQUIRED: --weights */
    int output;                 /* WBCL_RUN_NONE / _OPTIONAL / _REQUIRED: --output */
    int can_verify;             /* accepts --verify */
    int (*run)(wbcl_run *r);    /* 0 on success; else non-zero with the reason set */
} wbcl_run_module;

/* The registry (registry.c). */
size_t wbcl_run_module_count(void);
const wbcl_run_module *wbcl_run_module_at(size_t i);
const wbcl_run_module *wbcl_run_module_find(const char *name); /* NULL if unknown */

/* A host float32 array of 1..4 dimensions (what inputs, weights and outputs look like on the
 * host). Free with wbcl_run_array_free; a zeroed struct is empty and free-safe. */
typedef struct wbcl_run_array {
    int ndim;
    size_t shape[WBCL_MAX_DIMS];
    size_t numel;
    float *data;
} wbcl_run_array;
void wbcl_run_array_free(wbcl_run_array *a);
/* Allocates a zero-filled array (sets the reason and returns non-zero on failure). */
int wbcl_run_array_alloc(wbcl_run *r, wbcl_run_array *a, int ndim, const size_t *shape);

typedef struct wbcl_run_kv {
    const char *name, *value;
} wbcl_run_kv;

#define WBCL_RUN_MAX_ARGS 64

/* Everything a module gets. Fields are read-only for modules except through the helpers. */
struct wbcl_run {
    const wbcl_run_module *mod;
    wbcl_context *ctx;            /* open on --device (or $WBCL_DEVICE / the default)   */
    const char *device;           /* --device as given, or NULL                         */
    const char *variant;          /* --variant: "cpu", "gpu" or "auto" (checked), or NULL */
    const char *weights_path;     /* --weights, or NULL                                  */
    const char *inputs[WBCL_RUN_MAX_ARGS];
    int n_inputs;
    const char *output_path;      /* --output, or NULL                                   */
    wbcl_run_kv params[WBCL_RUN_MAX_ARGS];
    int n_params;
    wbcl_run_kv options[WBCL_RUN_MAX_ARGS]; /* module-specific --NAME VALUE              */
    int n_options;
    int verify, quiet;
    wbcl_safetensors *weights;    /* opened on first use by wbcl_run_weight              */
    char err[4096];               /* the reason for failure                              */
    wbcl_run_par *par;            /* wbcl-run-mpi: this rank's part of the job; NULL in wbcl-run */
};

/* ---- wbcl-run-mpi (tools/run-mpi/par.c; built with -DWBCL_MPI=ON) ----------------------------
 * The same modules run under `mpirun -np N wbcl-run-mpi MODULE ...`. Input 0 is split along its
 * first axis (rows of redunet.*, the batch of attn.*) into contiguous shards in rank order, or,
 * when its path contains "%r", each rank reads its own file (the rank number replaces "%r"; the
 * same for --labels). The output is gathered in rank order and written by rank 0. Modules see the
 * split only through these helpers and r->par. */
struct wbcl_run_par {
    int rank, size;
    int split_ndim;              /* input 0 is split only with at least this many dimensions    */
    int per_rank_files;          /* input 0 came from this rank's own file                      */
    size_t begin, count, total;  /* this rank's rows of input 0 (begin/total: 0 with own files) */
    /* redunet.fit: the construction over the ranks (wbcl_mpi_redunet_fit); 0 or the status */
    wbcl_status (*redunet_fit)(wbcl_run *r, const wbcl_tensor *X, const int *labels, int classes,
                               const wbcl_redunet_params *p, wbcl_redunet_progress_fn progress, void *user,
                               wbcl_tensor *Z, wbcl_redunet **out);
    /* redunet1d.fit / redunet2d.fit: the shift-invariant construction over the ranks
       (wbcl_mpi_circulant_fit; classes agreed on as the largest over the ranks); 0 or the status */
    wbcl_status (*circulant_fit)(wbcl_run *r, const wbcl_tensor *X, const wbcl_tensor *lift, const int *labels,
                                 int classes, const wbcl_circulant_params *p, wbcl_circulant_progress_fn progress,
                                 void *user, wbcl_tensor *Z, wbcl_circulant **out);
    /* Gathers the rows of `local` (first axis) in rank order; on rank 0 `full` receives them
       (free with wbcl_run_array_free). 0, or 1 with the reason set (on every rank). */
    int (*gather)(wbcl_run *r, const wbcl_run_array *local, wbcl_run_array *full);
    void *impl;                  /* par.c's state */
};

/* The path of a file for this rank: `path` with "%r" replaced by the rank (wbcl-run-mpi only;
 * otherwise path itself). buf holds the result when one is made. */
const char *wbcl_run_rank_path(const wbcl_run *r, const char *path, char *buf, size_t len);

/* ---- checks and the in-process entry point (exec.c) ----------------------------------------- */
/* Checks r's inputs, weights, output, verify, params and options against the module's
 * descriptor; 0, or 1 with the reason set. */
int wbcl_run_validate(wbcl_run *r, const wbcl_run_module *m);
/* The directory of path must exist and be writable and path must not be a directory (checked
 * before any work); creates nothing. 0, or 1 with the reason set. */
int wbcl_run_check_output_path(wbcl_run *r, const char *path);
/* Runs module `module` on the caller's context as `wbcl-run MODULE --input ... --weights W
 * --output O --param NAME=VALUE ... [--NAME VALUE ...] [--verify] --quiet` would (the same
 * checks and messages), printing nothing. inputs: n_inputs .npy paths; weights, output: paths
 * or NULL; names/values: n_params params; option_names/values: the module's own options
 * (without "--"). Returns 0, or 1 with the one-line reason in err (errlen bytes, may be 0).
 * The context is left open; the output file is written only on success. */
int wbcl_run_exec(wbcl_context *ctx, const char *module, int n_inputs, const char *const *inputs, const char *weights,
                  const char *output, int n_params, const char *const *names, const char *const *values,
                  int n_options, const char *const *option_names, const char *const *option_values, int verify,
                  char *err, size_t errlen);

/* ---- reporting ---------------------------------------------------------------------------- */
/* Sets the reason (one line, no "wbcl-run: " prefix) and returns 1. */
int wbcl_run_fail(wbcl_run *r, const char *fmt, ...) WBCL_RUN_PRINTF(2, 3);
/* 0 if st is WBCL_SUCCESS; otherwise copies the context's last error as the reason, returns 1. */
int wbcl_run_check(wbcl_run *r, wbcl_status st);
/* printf to stdout unless --quiet. */
void wbcl_run_info(const wbcl_run *r, const char *fmt, ...) WBCL_RUN_PRINTF(2, 3);
/* "(2, 3, 4)" */
const char *wbcl_run_shape_str(char *buf, size_t len, int ndim, const size_t *shape);

/* ---- params (--param NAME=VALUE) ----------------------------------------------------------- */
/* Each returns 0 and stores the value (the default when the param is absent), or sets a reason
 * naming the param and the bad value and returns 1. Numbers must parse completely and be finite. */
/* lo <= v <= hi (pass -HUGE_VAL / HUGE_VAL for no bound); also |v| <= FLT_MAX. */
int wbcl_run_param_float(wbcl_run *r, const char *name, double def, double lo, double hi, float *out);
/* v > 0 (and finite, <= FLT_MAX): eps, step sizes. */
int wbcl_run_param_pos(wbcl_run *r, const char *name, double def, float *out);
/* An integer in [lo, hi]. */
int wbcl_run_param_int(wbcl_run *r, const char *name, long def, long lo, long hi, long *out);
/* 0/1, also false/true, no/yes, off/on. */
int wbcl_run_param_bool(wbcl_run *r, const char *name, int def, int *out);
/* One of the NULL-terminated choices (e.g. {"exp", "log", NULL}); *out points at the choice. */
int wbcl_run_param_choice(wbcl_run *r, const char *name, const char *def, const char *const *choices,
                          const char **out);
/* The raw value of a param, or NULL if not given. */
const char *wbcl_run_param_str(const wbcl_run *r, const char *name);
/* The value of a module-specific option (--NAME VALUE), or NULL if not given. */
const char *wbcl_run_option(const wbcl_run *r, const char *name);

/* ---- inputs, weights, outputs ------------------------------------------------------------- */
#define WBCL_RUN_ANY 0 /* in an expected shape: any extent */

/* Loads --input number i (0-based) as float32 (.npy of f4, f8, f2, i4 or i8; 1 to 4 dimensions,
 * no zero extent). `what` names it in messages ("A"). host (may be NULL) receives the host copy;
 * dev (may be NULL) a device tensor in r->ctx. On failure nothing is returned and the reason
 * names the file. */
int wbcl_run_input(wbcl_run *r, int i, const char *what, wbcl_run_array *host, wbcl_tensor **dev);

/* Loads tensor `key` of --weights, converted to float32, checking its shape against the expected
 * one (ndim entries; WBCL_RUN_ANY matches any extent; expected == NULL checks nothing):
 *   "W.safetensors: 'weight' has shape (3, 4), expected (4)".
 * A NaN or Inf (after the float32 conversion) fails as wbcl_weight_load does:
 *   "W.safetensors: 'weight' has a non-finite value (nan) at flat index 5".
 * Absent key (or no --weights): if required, fails ("W.safetensors: missing tensor 'weight'
 * (has: ...)" / "module 'x' needs --weights (tensor 'weight')"); if optional, returns 0 with
 * *dev = NULL and host->data = NULL. */
int wbcl_run_weight(wbcl_run *r, const char *key, int required, int ndim, const size_t *expected,
                    wbcl_run_array *host, wbcl_tensor **dev);

/* Creates a device tensor from a host array / reads a device tensor into a new host array. */
int wbcl_run_upload(wbcl_run *r, const wbcl_run_array *a, wbcl_tensor **dev);
int wbcl_run_download(wbcl_run *r, const wbcl_tensor *t, wbcl_run_array *out);

/* Writes the result to --output (atomically: an existing file is replaced only by a complete
 * one). Without --output, notes the shape on stdout (unless --quiet) and returns 0. Call last. */
int wbcl_run_write_output(wbcl_run *r, const wbcl_run_array *a);
int wbcl_run_write_output_tensor(wbcl_run *r, const wbcl_tensor *t);

/* ---- verification --------------------------------------------------------------------------- */
/* Error of got (float) against the reference want (double), n elements:
 *   max abs err = max |got - want|,  max rel err = max abs err / scale,
 * scale = the magnitude the computation's rounding error is proportional to (<= 0: max |want|).
 * Non-finite got where want is finite counts as infinite error. */
typedef struct wbcl_run_err {
    double max_abs, max_rel;
    size_t worst;
} wbcl_run_err;
wbcl_run_err wbcl_run_compare(const float *got, const double *want, size_t n, double scale);
/* Row by row (rows x cols): each row's rel err against row_scale[i] (NULL: the row's max |want|);
 * the result holds the largest of each. */
wbcl_run_err wbcl_run_compare_rows(const float *got, const double *want, size_t rows, size_t cols,
                                   const double *row_scale);
/* Prints the verify line for e (see below) and judges it against tol. n >= 1. */
int wbcl_run_verify_err(wbcl_run *r, const wbcl_run_err *e, const float *got, const double *want, double tol);

/* Prints "verify: max abs err X, max rel err Y (tolerance T): ok|FAIL" (the ok line is
 * suppressed by --quiet) and returns 0 if max rel err <= tol, else sets the reason and returns 1. */
int wbcl_run_verify(wbcl_run *r, const float *got, const double *want, size_t n, double scale, double tol);

/* malloc'd double copy of n floats (NULL -> reason set). */
double *wbcl_run_to_f64(wbcl_run *r, const float *x, size_t n);

/* Unit roundoff of float32, 2^-24: tolerances are multiples of it. */
#define WBCL_RUN_U32 5.9604644775390625e-8

#endif
