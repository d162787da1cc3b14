/* wbcl — moving between token layout (B, N, chunks*K*p) and per-head layout
 * (B, K, N, p): channel j = h*p + c of chunk `chunk` maps to head h, column c.
 * One work-item per element of the per-head tensor; consecutive work-items
 * touch consecutive columns on both sides (contiguous runs of p). */
__kernel void wbcl_split_heads(__global const float *x, __global float *y, const ulong B, const ulong N,
                               const ulong K, const ulong p, const ulong row_stride, const ulong col0)
{
    const ulong i = get_global_id(0);
    const ulong total = B * K * N * p;
    if (i >= total) return;
    const ulong c = i % p;
    const ulong n = (i / p) % N;
    const ulong h = (i / (p * N)) % K;
    const ulong b = i / (p * N * K);
    y[i] = x[(b * N + n) * row_stride + col0 + h * p + c];
}

__kernel void wbcl_merge_heads(__global const float *y, __global float *x, const ulong B, const ulong N,
                               const ulong K, const ulong p)
{
    const ulong i = get_global_id(0); /* index into x (B, N, K*p) */
    const ulong total = B * N * K * p;
    if (i >= total) return;
    const ulong c = i % p;
    const ulong h = (i / p) % K;
    const ulong n = (i / (p * K)) % N;
    const ulong b = i / (p * K * N);
    x[i] = y[((b * K + h) * N + n) * p + c];
}
