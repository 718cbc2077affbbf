/* fused_activation.h: activations applied in the epilogue of conv2d_act and linear_act, so a
 * convolution or linear layer and the activation after it write their output once. */
#ifndef RT_OPS_FUSED_ACTIVATION_H
#define RT_OPS_FUSED_ACTIVATION_H

#include <math.h>
#include <stdint.h>

typedef enum rt_fused_activation {
    RT_ACT_NONE = 0,
    RT_ACT_RELU = 1,
    RT_ACT_CLIP = 2,      /* min(max(x, lo), hi): ReLU6 and friends */
    RT_ACT_SIGMOID = 3,
    RT_ACT_GELU = 4,      /* exact form: x * (1 + erf(x / sqrt 2)) / 2 */
    RT_ACT_HARDSWISH = 5, /* x * clip(x / 6 + 1 / 2, 0, 1) */
    RT_ACT_COUNT
} rt_fused_activation;

typedef struct rt_activation {
    int32_t kind;
    float lo, hi;
} rt_activation;

static inline float rt_activation__one(const rt_activation *a, float x) {
    switch (a->kind) {
    case RT_ACT_RELU: return x < 0.0f ? 0.0f : x; /* NaN kept, as rt_activation__apply */
    case RT_ACT_CLIP: return x < a->lo ? a->lo : x > a->hi ? a->hi : x;
    case RT_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case RT_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case RT_ACT_HARDSWISH: {
        float g = x / 6.0f + 0.5f;
        return x * (g < 0.0f ? 0.0f : g > 1.0f ? 1.0f : g);
    }
    default: return x;
    }
}

/* Apply to `count` floats in place (fused_activation.c, vectorised where the CPU allows). NaN
 * passes through ReLU and clip as the unfused ops let it. */
void rt_activation__apply(const rt_activation *a, float *x, int64_t count);

#endif
