/* fused_activation.c: activation epilogues over a run of floats, written as branch-free
 * loops the compiler vectorises (exp through fast_exp.h, no libm calls). */
#include "ops/fused_activation.h"

#include "core/multiversion.h"
#include "ops/fast_exp.h"

/* GELU's 1 + erf(z), z = x / sqrt 2, through erfc(|z|) with a relative error under 1.2e-7
 * (the Chebyshev fit of Numerical Recipes' erfcc): 2 - erfc(z) for z >= 0, erfc(-z) below,
 * so the tail of negative x keeps its relative accuracy instead of cancelling in 1 + erf. */
static inline float one_plus_erf(float z) {
    float a = fabsf(z);
    float t = 1.0f / (1.0f + 0.5f * a);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    float erfc = t * rt_fast_exp__f32(-a * a - 1.26551223f + t * p);
    return z >= 0.0f ? 2.0f - erfc : erfc;
}

RT_MULTIVERSION void rt_activation__apply(const rt_activation *a, float *x, int64_t count) {
    switch (a->kind) {
    case RT_ACT_NONE:
        return;
    case RT_ACT_RELU:
        for (int64_t i = 0; i < count; i++)
            x[i] = x[i] < 0.0f ? 0.0f : x[i];
        return;
    case RT_ACT_CLIP: {
        const float lo = a->lo, hi = a->hi;
        for (int64_t i = 0; i < count; i++) {
            float v = x[i];
            x[i] = v < lo ? lo : v > hi ? hi : v;
        }
        return;
    }
    case RT_ACT_SIGMOID:
        for (int64_t i = 0; i < count; i++)
            x[i] = 1.0f / (1.0f + rt_fast_exp__f32(-x[i]));
        return;
    case RT_ACT_GELU:
        for (int64_t i = 0; i < count; i++)
            x[i] = 0.5f * x[i] * one_plus_erf(x[i] * 0.70710678118654752f);
        return;
    default:
        for (int64_t i = 0; i < count; i++)
            x[i] = rt_activation__one(a, x[i]);
    }
}
