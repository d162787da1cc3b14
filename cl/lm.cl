/* wbcl — the decode-step projection of the causal language models (host/model/lm.c).
 *
 * y (rows, n) = x (rows, k) Wᵀ (+ bias), W (n, k) row-major, for the few rows of one decode step
 * (rows = the batch). The packed GEMM packs W on every call, which for one row costs several
 * times the product itself; here each work-item reads one row of W once, contiguously, and
 * dots it with every x row (x stays in cache): the step is one pass over the weights, which is
 * what bounds a decode step. Sums in four float lanes (float4 loads), combined at the end. */
__kernel void wbcl_lm_gemv(__global const float *x, __global const float *W, __global const float *bias,
                           const int has_bias, __global float *y, const uint rows, const uint n, const uint k)
{
    const uint j = get_global_id(0);
    if (j >= n) return;
    const __global float *w = W + (size_t)j * k;
    const uint k4 = k / 4;
    const float b = has_bias ? bias[j] : 0.0f;
    for (uint r = 0; r < rows; r++) {
        const __global float *xr = x + (size_t)r * k;
        float4 acc = (float4)(0.0f);
        for (uint i = 0; i < k4; i++) acc = fma(vload4(i, w), vload4(i, xr), acc);
        float s = (acc.x + acc.y) + (acc.z + acc.w);
        for (uint i = 4 * k4; i < k; i++) s = fma(w[i], xr[i], s);
        y[(size_t)r * n + j] = s + b;
    }
}
