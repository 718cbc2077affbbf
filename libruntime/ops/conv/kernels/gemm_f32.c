/* gemm_f32.c: float32 convolution as a matrix product. Per (batch, group):
 * out[O/g, Ho*Wo] = w[O/g, C/g*kH*kW] @ columns[C/g*kH*kW, Ho*Wo] + bias, where columns holds
 * each output position's input patch (im2col). A 1x1 convolution with stride 1 and no padding
 * reads x itself as the columns. */
#include <string.h>

#include "ops/conv/conv.h"
#include "ops/matmul/gemm/gemm.h"
#include "ops/op_util.h"

static size_t columns_bytes(const conv_dims *d) {
    if (rt_conv__is_pointwise(d))
        return 0;
    size_t bytes = (size_t)(d->channels / d->groups * d->kernel_h * d->kernel_w) *
                   (size_t)(d->out_h * d->out_w) * sizeof(float);
    return (bytes + 63) / 64 * 64;
}

size_t rt_conv__gemm_scratch_bytes(const conv_dims *d, int32_t threads) {
    return columns_bytes(d) +
           rt_gemm__f32_scratch_bytes(d->out_channels / d->groups, d->out_h * d->out_w,
                                      d->channels / d->groups * d->kernel_h * d->kernel_w,
                                      threads);
}

typedef struct im2col_job {
    const conv_dims *d;
    const float *x; /* the group's first input channel of one image */
    float *columns;
} im2col_job;

/* Rows [begin, end) of the column matrix; row r is (channel, kh, kw) of the patch. */
static void im2col_rows(void *arg, size_t begin, size_t end) {
    const im2col_job *job = arg;
    const conv_dims *d = job->d;
    int64_t taps = d->kernel_h * d->kernel_w, plane = d->out_h * d->out_w;
    for (size_t r = begin; r < end; r++) {
        int64_t c = (int64_t)r / taps, kh = (int64_t)r % taps / d->kernel_w,
                kw = (int64_t)r % d->kernel_w;
        const float *xp = job->x + c * d->height * d->width;
        float *row = job->columns + (int64_t)r * plane;
        int64_t off_h = kh * d->dilation[0] - d->pad[0], off_w = kw * d->dilation[1] - d->pad[1];
        int64_t oh0, oh1, ow0, ow1;
        rt_conv__output_range(off_h, d->stride[0], d->height, d->out_h, &oh0, &oh1);
        rt_conv__output_range(off_w, d->stride[1], d->width, d->out_w, &ow0, &ow1);
        /* Each element is written once: zeros where the tap falls in the padding. */
        if (oh0 >= oh1 || ow0 >= ow1) {
            memset(row, 0, (size_t)plane * sizeof(float));
            continue;
        }
        memset(row, 0, (size_t)(oh0 * d->out_w) * sizeof(float));
        for (int64_t oh = oh0; oh < oh1; oh++) {
            const float *xr = xp + (oh * d->stride[0] + off_h) * d->width;
            float *out = row + oh * d->out_w;
            memset(out, 0, (size_t)ow0 * sizeof(float));
            if (d->stride[1] == 1)
                memcpy(out + ow0, xr + (ow0 + off_w), (size_t)(ow1 - ow0) * sizeof(float));
            else
                for (int64_t ow = ow0; ow < ow1; ow++)
                    out[ow] = xr[ow * d->stride[1] + off_w];
            memset(out + ow1, 0, (size_t)(d->out_w - ow1) * sizeof(float));
        }
        memset(row + oh1 * d->out_w, 0, (size_t)((d->out_h - oh1) * d->out_w) * sizeof(float));
    }
}

void rt_conv__gemm_f32(const conv_dims *d, const float *x, const float *w,
                       const float *packed_w, const float *bias, const rt_activation *act,
                       float *out, void *scratch, size_t scratch_bytes, int32_t threads) {
    int64_t group_in = d->channels / d->groups, group_out = d->out_channels / d->groups;
    int64_t depth = group_in * d->kernel_h * d->kernel_w, plane = d->out_h * d->out_w;
    size_t columns_size = columns_bytes(d);
    float *columns = scratch;
    void *gemm_scratch = (char *)scratch + columns_size;
    size_t packed_group = rt_gemm__f32_packed_a_floats(group_out, depth);
    for (int64_t n = 0; n < d->batch; n++) {
        for (int64_t g = 0; g < d->groups; g++) {
            const float *xg = x + (n * d->channels + g * group_in) * d->height * d->width;
            const float *b = xg;
            if (columns_size > 0) {
                im2col_job job = {d, xg, columns};
                rt_parallel__for(threads, (size_t)depth, rt_op__grain(plane), im2col_rows, &job);
                b = columns;
            }
            rt_gemm_f32_args gemm = {
                .m = group_out, .n = plane, .k = depth,
                .a = w + g * group_out * depth, .a_row_stride = depth, .a_col_stride = 1,
                .b = b, .b_row_stride = plane, .b_col_stride = 1,
                .c = out + (n * d->out_channels + g * group_out) * plane, .c_row_stride = plane,
                .row_bias = bias ? bias + g * group_out : NULL,
                .activation = *act,
                .packed_a = packed_w ? packed_w + (size_t)g * packed_group : NULL,
            };
            rt_gemm__f32(&gemm, gemm_scratch, scratch_bytes - columns_size, threads);
        }
    }
}

