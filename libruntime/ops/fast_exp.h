/* fast_exp.h: exp for float32 written so that loops calling it vectorise (no libm call, no
 * branches): Cody-Waite range reduction to r in [-ln2/2, ln2/2], a degree-6 polynomial (the
 * Cephes expf coefficients, about 1 ulp), and 2^n built in the exponent bits. */
#ifndef RT_OPS_FAST_EXP_H
#define RT_OPS_FAST_EXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float rt_fast_exp__f32(float x) {
    const float lowest = -87.33654f, highest = 88.72283f;
    /* Comparisons, not fminf/floorf: those are libm calls on baseline x86-64 and would stop the
     * loop from vectorising. A NaN x clamps to `lowest` here and is restored below. */
    float clamped = x >= lowest ? x : lowest;
    clamped = clamped <= highest ? clamped : highest;
    /* Round to nearest with the 1.5 * 2^23 trick (|v| < 2^22 here). */
    const float magic = 12582912.0f;
    float n = (clamped * 1.44269504088896341f + magic) - magic;
    float r = clamped - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float result = p * scale;
    result = x > highest ? INFINITY : result;
    result = x < lowest ? 0.0f : result; /* underflow, -inf included */
    return x == x ? result : x;          /* NaN stays NaN */
}

#endif
