/* IEEE binary16 <-> binary32 on the host: the one place wbcl converts halves outside kernels
 * (file readers, F16 tensor transfers, fills). */
#include "wbcl/io.h"

#include <math.h>
#include <string.h>

float wbcl_f16_to_f32(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f;
    unsigned mant = h & 0x3ffu;
    float v;
    if (exp == 0)
        v = ldexpf((float)mant, -24); /* zero or subnormal */
    else if (exp == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexpf((float)(mant | 0x400u), exp - 25);
    return sign ? -v : v;
}

/* Bit-level rounding of the binary32 significand, so the result does not depend on the host's
 * FPU rounding mode or on a compiler's _Float16 support. */
uint16_t wbcl_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t exp = (u >> 23) & 0xffu, mant = u & 0x7fffffu;
    if (exp == 0xff) /* inf stays inf; NaN stays a quiet NaN and keeps its top payload bits */
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
    const int e = (int)exp - 127; /* unbiased; binary32 subnormals (exp 0) are far below half's range */
    if (e > 15) return (uint16_t)(sign | 0x7c00u); /* >= 2^16: beyond 65520, the rounding boundary */
    if (e < -25) return sign;                       /* < 2^-25: below half the smallest subnormal */
    /* significand with the implicit bit, 24 bits; result keeps 11 (normal) or fewer (subnormal) */
    const uint32_t sig = mant | (exp ? 0x800000u : 0u);
    const int shift = e >= -14 ? 13 : 13 + (-14 - e); /* 13..24 bits dropped */
    uint32_t q = sig >> shift;
    const uint32_t rem = sig & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1u))) q++; /* round to nearest, ties to even */
    /* normal: q in [2^10, 2^11], exponent field e + 15; a carry to 2^11 bumps the exponent (and
     * 65520 and up become inf, 0x7c00) through the addition. subnormal: q < 2^10 with field 0;
     * a carry to 2^10 gives the smallest normal, again through the addition. */
    const uint32_t bits = e >= -14 ? ((uint32_t)(e + 15) << 10) + (q - 0x400u) : q;
    return (uint16_t)(sign | bits);
}
