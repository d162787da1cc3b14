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

#endif
