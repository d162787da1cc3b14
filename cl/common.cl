/* wbcl — prelude shared by every kernel family (prepended at build time).
 * The host defines WBCL_VARIANT_CPU / WBCL_VARIANT_GPU, WBCL_WG, WBCL_GEMM_MR,
 * WBCL_GEMM_NR, WBCL_TILE, WBCL_REDUCE_ROWS, WBCL_REDUCE_WG, WBCL_HAS_FP64,
 * WBCL_HAS_FP16, WBCL_SIMD (the device's native float vector width; see
 * host/core/program.c). OpenCL C 1.2 only; optional
 * extensions are enabled behind these capability flags. */
#if WBCL_HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#if WBCL_HAS_FP16
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#endif

/* Exact GELU x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), PyTorch's default (approximate='none'),
 * in the form PyTorch evaluates it. erf is a rational minimax fit on x clamped to [-4, 4]
 * (the coefficients of Eigen's float erf; erf(4) = 1 - 1.5e-8 rounds to 1 in float):
 * 11 FMAs and one division, no exp, no branch, so it vectorizes. Measured error of the GELU
 * against double precision: <= 2.5e-7 max(1, |x|) absolute (tests/test_gemm_linear.c), the size of
 * float rounding of 1 + erf. The erfc(z) = t exp(...) Chebyshev form the models used before
 * (relative error 1.2e-7) needed one exp and a division per element.
 * Defined for float, float4, float8, float16: wbcl_gelu1, wbcl_gelu4, ... */
#define WBCL_DEFINE_GELU(T, N)                                                                     \
    inline T wbcl_gelu##N(const T v)                                                               \
    {                                                                                              \
        const T x = clamp(v * (T)(0.70710678118654752f), (T)(-4.0f), (T)(4.0f));                  \
        const T x2 = x * x;                                                                        \
        T p = (T)(-2.72614225801306e-10f);                                                         \
        p = fma(p, x2, (T)(2.77068142495902e-08f));                                                \
        p = fma(p, x2, (T)(-2.10102402082508e-06f));                                               \
        p = fma(p, x2, (T)(-5.69250639462346e-05f));                                               \
        p = fma(p, x2, (T)(-7.34990630326855e-04f));                                               \
        p = fma(p, x2, (T)(-2.95459980854025e-03f));                                               \
        p = fma(p, x2, (T)(-1.60960333262415e-02f));                                               \
        T q = (T)(-1.45660718464996e-05f);                                                         \
        q = fma(q, x2, (T)(-2.13374055278905e-04f));                                               \
        q = fma(q, x2, (T)(-1.68282697438203e-03f));                                               \
        q = fma(q, x2, (T)(-7.37332916720468e-03f));                                               \
        q = fma(q, x2, (T)(-1.42647390514189e-02f));                                               \
        return 0.5f * v * (1.0f + (p * x) / q);                                                    \
    }
WBCL_DEFINE_GELU(float, 1)
WBCL_DEFINE_GELU(float4, 4)
WBCL_DEFINE_GELU(float8, 8)
WBCL_DEFINE_GELU(float16, 16)

/* Sum of the 16 lanes, halves first (the order every family's reductions use). */
inline float wbcl_hsum16(const float16 v)
{
    const float8 a = v.lo + v.hi;
    const float4 b = a.lo + a.hi;
    const float2 c = b.lo + b.hi;
    return c.x + c.y;
}
