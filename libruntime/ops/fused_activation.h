/* fused_activation.h: activations applied in the epilogue of conv2d_act and linear_act, so a
 * convolution or linear layer and the activation after it write their output once. */
#ifndef RT_OPS_FUSED_ACTIVATION_H
#define RT_OPS_FUSED_ACTIVATION_H

#include <stdint.h>

typedef enum rt_fused_activation {
    RT_ACT_NONE = 0,
    RT_ACT_RELU = 1,
    RT_ACT_CLIP = 2,      /* min(max(x, lo), hi): ReLU6 and friends */
    RT_ACT_SIGMOID = 3,
    RT_ACT_GELU = 4,      /* exact form: x * (1 + erf(x / sqrt 2)) / 2 */
    RT_ACT_HARDSWISH = 5, /* x * clip(x / 6 + 1 / 2, 0, 1) */
    RT_ACT_SILU = 6,      /* x * sigmoid(x) */
    RT_ACT_GELU_TANH = 7, /* tanh form: x * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2 */
    RT_ACT_COUNT
} rt_fused_activation;

typedef struct rt_activation {
    int32_t kind;
    float lo, hi;
} rt_activation;

/* Apply to `count` floats in place (fused_activation.c): the transcendental kinds through the
 * vector math of the unary ops (ops/elementwise/kernels/vmath.h), so a fused activation gives
 * the bits the separate op would. NaN passes through ReLU and clip as the unfused ops let it. */
void rt_activation__apply(const rt_activation *a, float *x, int64_t count);

/* One value, the same as rt_activation__apply gives it. */
static inline float rt_activation__one(const rt_activation *a, float x) {
    rt_activation__apply(a, &x, 1);
    return x;
}

#endif
