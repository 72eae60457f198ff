/* IEEE binary16 and bfloat16 conversions in portable C (round to nearest even), used by the
 * CPU path: the same rounding as the device code's __float2half_rn and bf16_to_bits. */
#ifndef MSDA_HALF_H
#define MSDA_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t msda_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float msda_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float msda_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0) { /* zero or subnormal: man * 2^-24, exact in f32 */
        const float mag = (float)man * 0x1p-24f;
        return sign ? -mag : mag;
    }
    if (exp == 31) return msda_bits_f32(sign | 0x7f800000u | (man << 13));
    return msda_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t msda_f32_to_f16(float f) {
    const uint32_t x = msda_f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to infinity */
    if (ax < 0x38800000u) {                                   /* below 2^-14: subnormal or 0 */
        const uint32_t e = ax >> 23;
        if (e < 101) return sign; /* below 2^-26: rounds to zero */
        const uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e;
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = (ax - 0x38000000u) >> 13; /* rebias the exponent from 127 to 15 */
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++; /* a carry may reach infinity */
    return (uint16_t)(sign | r);
}

static inline float msda_bf16_to_f32(uint16_t b) { return msda_bits_f32((uint32_t)b << 16); }

static inline uint16_t msda_f32_to_bf16(float f) {
    uint32_t u = msda_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#endif /* MSDA_HALF_H */
