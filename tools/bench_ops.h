/* The operator table shared by wbcl-bench (which times it) and wbcl-info --export-binaries
 * (which runs every operator once to warm its programs before exporting them). One entry per
 * operator: a prepare function makes the inputs, runs the operator once, compares the result
 * with the double-precision reference (host/ref) and describes the call to time. */
#ifndef WBCL_BENCH_OPS_H
#define WBCL_BENCH_OPS_H
#include <stddef.h>
#include <stdint.h>
#include "wbcl/wbcl.h"

typedef struct env {
    wbcl_context *ctx;
    int quick;
    uint64_t seed;
} env;

/* What an operator's prepare function hands back. */
typedef struct op_case {
    wbcl_status (*call)(wbcl_context *ctx, void *state); /* the timed call */
    void *state;
    void (*cleanup)(void *state);
    char shape[96];       /* e.g. "m=n=k=512" */
    double flops;         /* per call; 0 when the op is bandwidth-bound */
    double bytes;         /* per call: minimum bytes read + written */
    double err, tol;      /* normwise relative error vs the reference, and the bound */
} op_case;

/* Returns WBCL_SUCCESS, or the failing status with the library's message in why
 * (WBCL_ERROR_UNSUPPORTED / _DEVICE_LIMIT / _BUILD: an "unsupported" row). */
typedef wbcl_status (*prepare_fn)(env *e, op_case *c, char *why, size_t whylen);

typedef struct bench_op {
    const char *name;
    const char *family;
    prepare_fn prepare;
} bench_op;

extern const bench_op wbcl_bench_ops[];
extern const size_t wbcl_bench_n_ops;

#endif
