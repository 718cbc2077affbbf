/* fused_activation.c: activation epilogues over a run of floats. ReLU and clip are plain
 * loops the compiler vectorises; the others go element by element. */
#include "ops/fused_activation.h"

#include "core/multiversion.h"

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
    default:
        for (int64_t i = 0; i < count; i++)
            x[i] = rt_activation__one(a, x[i]);
    }
}
