/* wbcl — dtype conversion of float16 storage (host/core/convert.c).
 *
 * half is a storage-only type in core OpenCL C 1.2: vload_half and vstore_half_rte read and
 * write `__global half *` without cl_khr_fp16 (spec 6.1.1.1, 6.12.7), so these kernels build on
 * every OpenCL 1.2 device. No half arithmetic is done anywhere in wbcl.
 * One work-item per 8 elements (vector loads/stores where the run is whole), global (ceil(n/8)).
 * OpenCL C 1.2. */

/* dst[dst_off + i] = (float)src[src_off + i], exact */
__kernel void wbcl_convert_f16_f32(__global const half *restrict src, const ulong src_off,
                                   __global float *restrict dst, const ulong dst_off, const ulong n)
{
    const ulong i = (ulong)get_global_id(0) * 8;
    if (i >= n) return;
    const __global half *s = src + src_off + i;
    __global float *d = dst + dst_off + i;
    if (i + 8 <= n) {
        vstore8(vload_half8(0, s), 0, d);
    } else {
        for (uint j = 0; j < (uint)(n - i); j++) d[j] = vload_half(j, s);
    }
}

/* dst[dst_off + i] = src[src_off + i] rounded to the nearest half, ties to even */
__kernel void wbcl_convert_f32_f16(__global const float *restrict src, const ulong src_off,
                                   __global half *restrict dst, const ulong dst_off, const ulong n)
{
    const ulong i = (ulong)get_global_id(0) * 8;
    if (i >= n) return;
    const __global float *s = src + src_off + i;
    __global half *d = dst + dst_off + i;
    if (i + 8 <= n) {
        vstore_half8_rte(vload8(0, s), 0, d);
    } else {
        for (uint j = 0; j < (uint)(n - i); j++) vstore_half_rte(s[j], j, d);
    }
}
