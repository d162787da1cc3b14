/* wbcl — thin wrapper around CLBlast (internal, not installed).
 *
 * CLBlast compiles its kernels on the first call of a routine per device and
 * keeps them in a process-wide cache of its own (thread-safe, never freed
 * before exit): no setup or teardown is needed here. The first call is slow
 * (about 7 s cold on PoCL; PoCL's own POCL_CACHE_DIR makes later processes
 * fast). */
#ifndef WBCL_BLAS_H
#define WBCL_BLAS_H

#include "internal.h"

/* Constant name of a CLBlast status code ("CLBlastInvalidLeadDimA", ...). Never NULL. */
const char *wbcl__clblast_status_name(int code);

/* Row-major strided batched SGEMM through CLBlast on ctx's queue:
 *   C_b = alpha op(A_b) op(B_b) + beta C_b,  b < batch,
 * element (i, j) of stored A_b is A[off_a + b*stride_a + i*lda + j], likewise
 * B and C. The caller has validated everything (dimensions > 0, leading
 * dimensions >= stored widths, bounds). batch == 1 uses CLBlastSgemm,
 * otherwise CLBlastSgemmStridedBatched. `op` names the calling op in the
 * error message ("<op>: CLBlast SGEMM failed: <code name> (<code>)"). When
 * ctx->timing is on, the wall time of the call (with clFinish) is added to
 * the context's kernel time. */
wbcl_status wbcl__blas_sgemm(wbcl_context *ctx, const char *op, int ta, int tb, size_t m, size_t n, size_t k,
                             float alpha, cl_mem A, size_t off_a, size_t lda, size_t stride_a, cl_mem B,
                             size_t off_b, size_t ldb, size_t stride_b, float beta, cl_mem C, size_t off_c,
                             size_t ldc, size_t stride_c, size_t batch);

/* CLBlast kernel parameters a tuning table may set (include/wbcl/tuning.h): the keys
 * "clblast.xgemm.<NAME>" for the 16 parameters of CLBlast's Xgemm kernel, NAME as in
 * wbcl__clblast_xgemm_names (CLBlast's own names and order), and "clblast.gemm.min_indirect"
 * (GemmRoutine's XGEMM_MIN_INDIRECT_SIZE: m*n*k at or above its cube takes the Xgemm kernel,
 * below it the direct one). Applied by wbcl__blas_sgemm before each call (host/core/blas.c). */
#define WBCL_CLBLAST_XGEMM_N 16
#define WBCL_CLBLAST_NKEYS (WBCL_CLBLAST_XGEMM_N + 1)
extern const char *const wbcl__clblast_xgemm_names[WBCL_CLBLAST_XGEMM_N];
/* The full keys: "clblast.xgemm.<NAME>" in the order above, then "clblast.gemm.min_indirect". */
extern const char *const wbcl__clblast_keys[WBCL_CLBLAST_NKEYS];
/* CLBlast's current values of parameters `names` of `kernel` ("Xgemm", "GemmRoutine") on
 * `device` in single precision (host/core/clblast_params.cpp): 0, a negative CLBlast status, or
 * 1 if a name is not the kernel's. After an override these are the overriding values. */
int wbcl__clblast_retrieve(cl_device_id device, const char *kernel, size_t n, const char *const *names,
                           size_t *values);
/* CLBlast's own value (its database's, for ctx's device) of a clblast.* key; -1 if unknown. */
long wbcl__clblast_default(const wbcl_context *ctx, const char *key);
/* Makes ctx's clblast.* parameters (CLBlast's own for the keys it lacks) current on its device
 * now rather than at the next CLBlast call (the tuner: switching sets costs about a millisecond
 * of host time that a timed call should not include). */
void wbcl__clblast_apply(wbcl_context *ctx);
/* Checks a complete Xgemm set v (wbcl__clblast_xgemm_names order) against the constraints of
 * CLBlast's kernel and dev's limits: 0 if fine, else 1 with the reason in why. */
int wbcl__clblast_xgemm_check(const wbcl_device_info *dev, const long *v, char *why, size_t n);

#endif
