/* wbcl — prelude shared by every kernel family (prepended at build time).
 * The host defines WBCL_VARIANT_CPU / WBCL_VARIANT_GPU, WBCL_WG, WBCL_GEMM_MR,
 * WBCL_GEMM_NR, WBCL_TILE, WBCL_REDUCE_ROWS, WBCL_REDUCE_WG, WBCL_HAS_FP64,
 * WBCL_HAS_FP16 (see host/core/program.c). OpenCL C 1.2 only; optional
 * extensions are enabled behind these capability flags. */
#if WBCL_HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#if WBCL_HAS_FP16
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#endif
