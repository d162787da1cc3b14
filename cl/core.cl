/* wbcl — core kernels: a probe used to check that programs build and run. */
__kernel void wbcl_axpb(__global float *x, const float a, const float b, const uint n)
{
    const uint i = get_global_id(0);
    if (i < n) x[i] = a * x[i] + b;
}
