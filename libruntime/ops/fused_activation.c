/* fused_activation.c: activation epilogues over a run of floats: ReLU, clip and hardswish as
 * branch-free loops the compiler vectorises, the others through the vector math. */
#include "ops/fused_activation.h"

#include "core/multiversion.h"
#include "ops/elementwise/kernels/vmath.h"

RT_MULTIVERSION static void hardswish(float *x, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        float g = x[i] / 6.0f + 0.5f;
        x[i] = x[i] * (g < 0.0f ? 0.0f : g > 1.0f ? 1.0f : g);
    }
}

RT_MULTIVERSION void rt_activation__apply(const rt_activation *a, float *x, int64_t count) {
    switch (a->kind) {
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
    case RT_ACT_HARDSWISH: hardswish(x, count); return;
    case RT_ACT_SIGMOID: rt_vmath__kernel(RT_VMATH_SIGMOID)(x, x, (size_t)count); return;
    case RT_ACT_GELU: rt_vmath__kernel(RT_VMATH_GELU)(x, x, (size_t)count); return;
    case RT_ACT_SILU: rt_vmath__kernel(RT_VMATH_SILU)(x, x, (size_t)count); return;
    case RT_ACT_GELU_TANH: rt_vmath__kernel(RT_VMATH_GELU_TANH)(x, x, (size_t)count); return;
    default: return;
    }
}
