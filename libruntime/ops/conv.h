/* conv.h: the shape of a 2-D convolution, shared by the general kernels (conv.c) and the
 * depthwise one (conv_depthwise.c). */
#ifndef RT_OPS_CONV_H
#define RT_OPS_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/fused_activation.h"

typedef struct conv_dims {
    int64_t batch, channels, height, width;     /* x */
    int64_t out_channels, kernel_h, kernel_w;   /* w */
    int64_t out_h, out_w;
    int64_t groups;
    int64_t stride[2], dilation[2];
    int64_t pad[4]; /* top, left, bottom, right */
} conv_dims;

/* float32 convolutions where each output channel reads a single input channel (depthwise,
 * with any channel multiplier) and whose horizontal stride and reach are small enough for
 * rt_conv__depthwise_f32's row buffers. */
bool rt_conv__depthwise_fits(const conv_dims *d);

/* out = act(conv(x, w) + bias), bias may be NULL; up to `threads` threads. */
void rt_conv__depthwise_f32(const conv_dims *d, const float *x, const float *w,
                            const float *bias, const rt_activation *act, float *out,
                            int32_t threads);

#endif
