/* wbcl — dense matrix products.
 *
 * C = alpha * op(A) * op(B) + beta * C, row-major, float32 arithmetic.
 * A, B and C may each be WBCL_F32 or WBCL_F16 tensors, in any mix (see
 * tensor.h): half operands are widened exactly, products are accumulated in
 * float32, and a half C is read (beta != 0) and written once, rounded to
 * nearest even. Accuracy with half storage: the float32 bound of the result
 * plus one half rounding of C (2^-11 relative); relative to the unrounded
 * float32 inputs, each half operand adds up to 2^-11 (|A||B|)_ij.
 * Two backends (see wbcl_context_set_gemm_backend): wbcl's packed
 * register-tile kernel (the fast path on CPU devices) and CLBlast (the fast
 * path on GPUs). Both give the same results to float rounding. */
#ifndef WBCL_GEMM_H
#define WBCL_GEMM_H

#include <stddef.h>
#include "wbcl/status.h"
#include "wbcl/context.h"
#include "wbcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wbcl_transpose { WBCL_NO_TRANS = 0, WBCL_TRANS = 1 } wbcl_transpose;

/* Shapes: op(A) is (m, k), op(B) is (k, n), C is (m, n). A stored as (m, k),
 * or (k, m) when ta == WBCL_TRANS; likewise B. Each tensor is 2-D or has
 * leading batch dimensions (3-D: (batch, rows, cols); 4-D: (b0, b1, rows, cols)
 * with batch = b0*b1). A or B with no batch dimensions is shared by every
 * batch entry (e.g. a weight matrix); C carries the batch. C must not share
 * memory with A or B. beta == 0 ignores C's old contents (NaN included). */
wbcl_status wbcl_gemm(wbcl_context *ctx, wbcl_transpose ta, wbcl_transpose tb, float alpha, const wbcl_tensor *A,
                      const wbcl_tensor *B, float beta, wbcl_tensor *C);

/* Strided batched GEMM on the raw storage of tensors, for ops that multiply
 * parts of tensors (per-head slices, projections into a larger buffer).
 * All offsets, leading dimensions and strides are in elements, row-major:
 * element (i, j) of batch b of A is A[off_a + b*stride_a + i*lda + j] where
 * (i, j) index A as stored (i.e. before op()). stride 0 shares a matrix across
 * the batch. Every access is bounds-checked against the tensors' sizes. */
typedef struct wbcl_gemm_desc {
    wbcl_transpose ta, tb;
    size_t m, n, k, batch;
    float alpha, beta;
    size_t off_a, lda, stride_a;
    size_t off_b, ldb, stride_b;
    size_t off_c, ldc, stride_c;
} wbcl_gemm_desc;

wbcl_status wbcl_gemm_strided(wbcl_context *ctx, const wbcl_gemm_desc *desc, const wbcl_tensor *A,
                              const wbcl_tensor *B, wbcl_tensor *C);

#ifdef __cplusplus
}
#endif
#endif
