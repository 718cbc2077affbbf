/* kernels/patches_f32.c: a convolution whose windows do not overlap (stride = kernel, no
 * padding or dilation, one group): a vision transformer's patch embedding.
 *
 * Every output pixel reads its own patch, so all images' patches form one matrix, [N * Ho * Wo,
 * C * kH * kW], each row a patch (C * kH runs of kW floats copied), and the convolution is one
 * GEMM with w^T (packed at load as B, the bias and activation in its epilogue), then a
 * transpose of each image's [Ho * Wo, O] result into out's [O, Ho * Wo]. The im2col path did a
 * GEMM per image with its columns packed each time: ViT's 8x8 patches of 3 x 32 x 32 images
 * into 32 channels, batch 3, took 40 us there, most of it in that copying. */
#include <string.h>

#include "ops/conv/conv.h"
#include "ops/matmul/gemm/gemm.h"

bool rt_conv__patches_fit(const conv_dims *d) {
    return d->groups == 1 && d->stride[0] == d->kernel_h && d->stride[1] == d->kernel_w &&
           d->dilation[0] == 1 && d->dilation[1] == 1 && d->pad[0] == 0 && d->pad[1] == 0 &&
           d->pad[2] == 0 && d->pad[3] == 0 && d->kernel_h * d->kernel_w > 1;
}

static int64_t depth_of(const conv_dims *d) { return d->channels * d->kernel_h * d->kernel_w; }

static size_t aligned(size_t floats) { return (floats * sizeof(float) + 63) / 64 * 64; }

size_t rt_conv__patches_weights_floats(const conv_dims *d) {
    return rt_gemm__f32_packed_b_floats(depth_of(d), d->out_channels);
}

static rt_gemm_f32_args weights_as_b(const conv_dims *d, const float *w) {
    int64_t depth = depth_of(d);
    return (rt_gemm_f32_args){.k = depth, .n = d->out_channels, .b = w, .b_row_stride = 1,
                              .b_col_stride = depth};
}

void rt_conv__patches_weights(const conv_dims *d, const float *w, float *packed) {
    rt_gemm_f32_args g = weights_as_b(d, w);
    rt_gemm__f32_pack_b(&g, packed);
}

size_t rt_conv__patches_scratch_bytes(const conv_dims *d, int32_t threads) {
    int64_t rows = d->batch * d->out_h * d->out_w;
    return aligned((size_t)(rows * depth_of(d))) + aligned((size_t)(rows * d->out_channels)) +
           rt_gemm__f32_scratch_bytes(0, d->out_channels, depth_of(d), threads);
}

void rt_conv__patches_f32(const conv_dims *d, const float *x, const float *packed_w,
                          const float *w, const float *bias, const rt_activation *act,
                          float *out, void *scratch, size_t scratch_bytes, int32_t threads) {
    int64_t plane = d->out_h * d->out_w, rows = d->batch * plane, depth = depth_of(d);
    int64_t kh = d->kernel_h, kw = d->kernel_w, o = d->out_channels;
    float *patches = scratch;
    float *result = (float *)((char *)scratch + aligned((size_t)(rows * depth)));
    char *gemm_scratch = (char *)result + aligned((size_t)(rows * o));
    for (int64_t n = 0; n < d->batch; n++)
        for (int64_t i = 0; i < d->out_h; i++)
            for (int64_t j = 0; j < d->out_w; j++) {
                float *row = patches + ((n * d->out_h + i) * d->out_w + j) * depth;
                for (int64_t c = 0; c < d->channels; c++)
                    for (int64_t r = 0; r < kh; r++)
                        memcpy(row + (c * kh + r) * kw,
                               x + ((n * d->channels + c) * d->height + i * kh + r) * d->width +
                                   j * kw,
                               (size_t)kw * sizeof(float));
            }
    rt_gemm_f32_args g = weights_as_b(d, w);
    g.m = rows;
    g.a = patches;
    g.a_row_stride = depth;
    g.a_col_stride = 1;
    g.c = result;
    g.c_row_stride = o;
    g.column_bias = bias;
    g.activation = *act;
    g.packed_b = packed_w;
    rt_gemm__f32(&g, gemm_scratch, scratch_bytes - (size_t)(gemm_scratch - (char *)scratch),
                 threads);
    for (int64_t n = 0; n < d->batch; n++)
        for (int64_t c = 0; c < o; c++)
            for (int64_t p = 0; p < plane; p++)
                out[(n * o + c) * plane + p] = result[(n * plane + p) * o + c];
}
