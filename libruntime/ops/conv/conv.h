/* conv.h: the convolution family: the shape of a 2-D convolution, the operators' shared setup
 * (conv.c, conv_pool.c) and the algorithms in kernels/, one file each, named by dtype. */
#ifndef RT_OPS_CONV_H
#define RT_OPS_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/fused_activation.h"
#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/pool/pool.h"

typedef struct conv_dims {
    int64_t batch, channels, height, width;     /* x */
    int64_t out_channels, kernel_h, kernel_w;   /* w */
    int64_t out_h, out_w;
    int64_t groups;
    int64_t stride[2], dilation[2];
    int64_t pad[4]; /* top, left, bottom, right */
} conv_dims;

/* Output positions o in [0, count) whose tap o * stride + offset falls in [0, size). */
static inline void rt_conv__output_range(int64_t offset, int64_t stride, int64_t size,
                                         int64_t count, int64_t *lo, int64_t *hi) {
    *lo = rt_op__ceil_div(-offset, stride);
    *hi = rt_op__floor_div(size - 1 - offset, stride) + 1;
    if (*lo < 0)
        *lo = 0;
    if (*hi > count)
        *hi = count;
}

/* A 1x1 kernel with stride 1 and no padding: each output pixel reads its own input pixel, so
 * x itself is the GEMM's B (or, transposed, its A), with nothing copied. Any groups. */
static inline bool rt_conv__is_pointwise(const conv_dims *d) {
    return d->kernel_h == 1 && d->kernel_w == 1 && d->stride[0] == 1 && d->stride[1] == 1 &&
           d->pad[0] == 0 && d->pad[1] == 0 && d->pad[2] == 0 && d->pad[3] == 0;
}

/* A convolution's operands as its op reads them (conv.c). */
typedef struct rt_conv_args {
    rt_tensor_value *x, *w, *bias, *out;
    conv_dims dims;
    rt_activation act; /* conv2d_act's; none for conv2d */
} rt_conv_args;

/* conv2d's arguments 0..6 (x, w, bias, stride, padding, dilation, groups), conv2d_act's
 * activation after them with `fused`, and out at out_index: checked, with the output's sizes
 * in dims, but out not sized (an op that pools the result gives out its own). */
rt_status rt_conv__read_args(rt_op_ctx *ctx, rt_conv_args *args, bool fused, size_t out_index);

/* conv2d's or (with `fused`) conv2d_act's whole argument list read, checked, out sized. */
rt_status rt_conv__setup(rt_op_ctx *ctx, rt_conv_args *args, bool fused);

/* How a convolution runs, chosen once by rt_conv__prepare (ctx->algorithm) from the planned
 * sizes and dtypes; run-time sizes within the bounds keep the choice valid. */
typedef enum rt_conv_algorithm {
    RT_CONV_BANDS = 0,  /* bands of output rows, one (channel, tap) at a time: f64, shallow f32 */
    RT_CONV_DEPTHWISE,  /* one input channel a group, padded planes (kernels/depthwise_f32.c) */
    RT_CONV_WINOGRAD,   /* F(4x4, 3x3), weights transformed at load (kernels/winograd_f32.c) */
    RT_CONV_PIXELS,     /* pointwise on a small plane, w^T packed at load (kernels/pixels_f32.c) */
    RT_CONV_DIRECT,     /* weights in tall panels at load (kernels/direct_f32.c); the GEMM for
                         * run-time sizes the direct kernel does not take */
    RT_CONV_GEMM,       /* im2col columns times the weights, packed at load when constant */
    RT_CONV_PATCHES,    /* windows that do not overlap: every image's patches in one GEMM with
                         * w^T packed at load (kernels/patches_f32.c) */
} rt_conv_algorithm;

/* At load: the algorithm (ctx->algorithm), the scratch it needs (ctx->scratch_bytes) and
 * constant weights packed for it (ctx->state). */
void rt_conv__prepare(rt_op_ctx *ctx, const rt_conv_args *args);

/* The weights rt_conv__prepare packed in tall panels for the direct kernel (conv_pool.c pools
 * in its bands); NULL when it chose another algorithm. */
const float *rt_conv__direct_weights(const rt_op_ctx *ctx);

/* The convolution into out ([N, O, Ho, Wo] densely, not args->out) by the algorithm
 * rt_conv__prepare chose, with scratch of the size it asked for. */
void rt_conv__compute(const rt_op_ctx *ctx, const rt_conv_args *args, void *out,
                      void *scratch, size_t scratch_bytes);

/* conv2d_act_max_pool2d's operands (conv_pool.c): the convolution's, and the max pool over
 * its result. */
typedef struct rt_conv_pool_args {
    rt_conv_args conv;
    rt_pool_dims pool;
} rt_conv_pool_args;

/* Its arguments read and checked, out sized (the CPU's and the CUDA backend's run). */
rt_status rt_conv_pool__setup(rt_op_ctx *ctx, rt_conv_pool_args *args);

/* Bytes of the unpooled float32 result, 64-byte aligned; 0 when it would not fit in memory. */
size_t rt_conv_pool__unpooled_bytes(const rt_conv_pool_args *args);

/* A zero-padded input plane split by horizontal stride phase (kernels/padded_f32.c): padded row i,
 * phase r, index j holds padded column stride * j + r, at i * row_floats + r * phase_len + j.
 * Phase rows carry at least 8 spare zeros, so an 8-wide load at the last output may run past
 * the row's real end, and a plane ends with 32 floats of slack, so a 32-wide block at the end
 * of the last row stays inside it. */
#define RT_CONV_PADDED_SLACK 32
typedef struct rt_conv_padded {
    int64_t rows;         /* height + pad top + pad bottom */
    int64_t phase_len;    /* floats per phase row, spare included, a multiple of 8 */
    int64_t row_floats;   /* stride * phase_len */
    int64_t plane_floats; /* rows * row_floats + 32, rounded up to 64 bytes */
} rt_conv_padded;

/* False when the sizes overflow or a plane would take over 64 MB. */
bool rt_conv__padded_layout(const conv_dims *d, rt_conv_padded *out);
/* Where tap (kh, kw) of output (oh, ow) reads, from oh's first window row, at index ow. */
int64_t rt_conv__tap_offset(const conv_dims *d, const rt_conv_padded *p, int64_t kh,
                            int64_t kw);
/* Copy plane x in. The padding and spare entries are zeroed only with `zero`: a buffer filled
 * before for the same dims still holds zeros there, as every fill writes the same places. */
void rt_conv__fill_padded(const conv_dims *d, const rt_conv_padded *p, const float *x,
                          float *buf, bool zero);
/* Zero everything of a plane but the places that hold x: cheaper than zeroing it all, and,
 * with a fill after, every float of the plane is written. */
void rt_conv__zero_padding(const conv_dims *d, const rt_conv_padded *p, float *buf);
/* The same for padded rows [row0, row1) only, the padding already zero. */
void rt_conv__fill_padded_rows(const conv_dims *d, const rt_conv_padded *p, const float *x,
                               float *buf, int64_t row0, int64_t row1);
/* A band of the plane: padded rows [row0, row1), zeros and data, at band (row row0 first),
 * then RT_CONV_PADDED_SLACK zeros, as a whole plane ends. */
void rt_conv__fill_padded_band(const conv_dims *d, const rt_conv_padded *p, const float *x,
                               float *band, int64_t row0, int64_t row1);

/* float32 convolutions where each output channel reads a single input channel (depthwise,
 * with any channel multiplier), with a horizontal stride of at most 4, at most 64 taps and a
 * padded plane of at most 64 MB: what rt_conv__depthwise_f32 takes. */
bool rt_conv__depthwise_fits(const conv_dims *d);

/* Scratch rt_conv__depthwise_f32 needs on up to `threads` threads (a padded plane each). */
size_t rt_conv__depthwise_scratch_bytes(const conv_dims *d, int32_t threads);

/* out = act(conv(x, w) + bias), bias may be NULL; up to `threads` threads. `scratch` holds
 * rt_conv__depthwise_scratch_bytes(d, threads) bytes, 64-byte aligned. */
void rt_conv__depthwise_f32(const conv_dims *d, const float *x, const float *w,
                            const float *bias, const rt_activation *act, float *out,
                            void *scratch, int32_t threads);

/* float32 convolutions with one group, a horizontal stride of at most 4, at least 16 taps in
 * all and output rows not much narrower than the GEMM kernel's NR: what rt_conv__direct_f32
 * takes (kernels/direct_f32.c). With `pool` (a float32 max pool of the result, its height and width
 * the convolution's output), also: not pointwise, and pooling windows that do not overlap in
 * height. */
bool rt_conv__direct_fits(const conv_dims *d, const rt_pool_dims *pool);

/* Scratch rt_conv__direct_f32 needs on up to `threads` threads (an offset table, and a band
 * buffer and with a pool a buffer of pooled rows for each thread). */
size_t rt_conv__direct_scratch_bytes(const conv_dims *d, const rt_pool_dims *pool,
                                     int32_t threads);

/* out = act(conv(x, w) + bias), bias may be NULL, with w packed by rt_gemm__f32_pack_a_tall
 * as an [out_channels, channels * kernel_h * kernel_w] matrix; up to `threads` threads. With
 * `pool`, out is the max pool of that ([N, O, pool->out_h, pool->out_w]). */
void rt_conv__direct_f32(const conv_dims *d, const float *x, const float *packed_w,
                         const float *bias, const rt_activation *act, const rt_pool_dims *pool,
                         float *out, void *scratch, int32_t threads);

/* ---- bands of output rows, float32 and float64 (kernels/bands.c) ----------------------- */

/* Any convolution of x's dtype (f32 or f64), one (input channel, tap) at a time; a float32
 * activation runs in a second pass. Needs no scratch. */
void rt_conv__bands(const conv_dims *d, rt_type type, const void *x, const void *w,
                    const void *bias, const rt_activation *act, void *out, int32_t threads);

/* ---- im2col and the GEMM (kernels/gemm_f32.c) ------------------------------------------- */

size_t rt_conv__gemm_scratch_bytes(const conv_dims *d, int32_t threads);
/* packed_w: w packed per group by rt_gemm__f32_pack_a, or NULL (packed at each call). */
void rt_conv__gemm_f32(const conv_dims *d, const float *x, const float *w,
                       const float *packed_w, const float *bias, const rt_activation *act,
                       float *out, void *scratch, size_t scratch_bytes, int32_t threads);

/* ---- transposed convolution (conv_transpose.c, kernels/transposed.c) -------------------- */

typedef struct rt_convt_dims {
    int64_t batch, channels, height, width;   /* x */
    int64_t group_out, kernel_h, kernel_w;    /* w: [channels, group_out, kH, kW] */
    int64_t out_channels, out_h, out_w;
    int64_t groups;
    int64_t stride[2], dilation[2], out_pad[2];
    int64_t pad[4]; /* top, left, bottom, right */
} rt_convt_dims;

/* Bytes of the GEMM form's column buffer ([group_out * kH * kW, H * W] floats), SIZE_MAX where
 * they pass the cap that keeps huge images on the direct form. */
size_t rt_conv__transpose_columns_bytes(const rt_convt_dims *d);
/* With scratch (float32 only, at least the column bytes plus the GEMM's own scratch): the GEMM
 * form; with scratch NULL: the direct form, float32 or float64. */
void rt_conv__transpose(const rt_convt_dims *d, rt_type type, const void *x, const void *w,
                        const void *bias, void *out, void *scratch, size_t scratch_bytes,
                        int32_t threads);

/* ---- Winograd F(4x4, 3x3) (kernels/winograd_f32.c) ------------------------------------- */

/* Whether it takes these float32 sizes (one group, a 3x3 kernel, stride and dilation 1, at
 * least 8 channels in and out, buffers of bounded size) and, for them, does at most two
 * thirds of the direct convolution's work, or (rows too narrow for the direct kernel) less
 * than im2col's. */
bool rt_conv__winograd_pays(const conv_dims *d);

/* Floats the transformed weights take (0 when too many), and the transform of w
 * ([out_channels, channels, 3, 3]) into them; false when its working memory is not there. */
size_t rt_conv__winograd_weights_floats(const conv_dims *d);
bool rt_conv__winograd_weights(const conv_dims *d, const float *w, float *dst);

/* Scratch rt_conv__winograd_f32 needs on up to `threads` threads (a strip's buffers each). */
size_t rt_conv__winograd_scratch_bytes(const conv_dims *d, int32_t threads);

/* out = act(conv(x, w) + bias), bias may be NULL, with `weights` w transformed by
 * rt_conv__winograd_weights (w itself computes the few tiles whose Winograd outputs are not
 * finite); up to `threads` threads. */
void rt_conv__winograd_f32(const conv_dims *d, const float *x, const float *weights,
                           const float *w, const float *bias, const rt_activation *act,
                           float *out, void *scratch, int32_t threads);

/* ---- windows that do not overlap, patches as rows (kernels/patches_f32.c) -------------- */

/* Stride = kernel (larger than 1x1), no padding or dilation, one group. */
bool rt_conv__patches_fit(const conv_dims *d);
/* Constant weights as the GEMM's packed B (w^T), once at load. */
size_t rt_conv__patches_weights_floats(const conv_dims *d);
void rt_conv__patches_weights(const conv_dims *d, const float *w, float *packed);
/* Scratch for these (bound) sizes on up to `threads` threads. */
size_t rt_conv__patches_scratch_bytes(const conv_dims *d, int32_t threads);
/* out = act(conv(x, w) + bias), bias may be NULL, with `packed_w` from
 * rt_conv__patches_weights (w itself described for the GEMM alongside). */
void rt_conv__patches_f32(const conv_dims *d, const float *x, const float *packed_w,
                          const float *w, const float *bias, const rt_activation *act,
                          float *out, void *scratch, size_t scratch_bytes, int32_t threads);

/* ---- pointwise on small planes, pixels as rows (kernels/pixels_f32.c) ------------------- */

/* Whether it takes these float32 sizes: a 1x1 kernel, stride 1, no padding, one group, a plane
 * of at most 256 pixels, at least 64 output channels and 0.5 MB of weights. */
bool rt_conv__pixels_pay(const conv_dims *d);

/* Floats w^T packed as the GEMM's B takes, and the packing of w ([out_channels, channels, 1,
 * 1]) into them. */
size_t rt_conv__pixels_weights_floats(const conv_dims *d);
void rt_conv__pixels_weights(const conv_dims *d, const float *w, float *dst);

/* Scratch rt_conv__pixels_f32 needs (one image's x^T, packed; any number of threads). */
size_t rt_conv__pixels_scratch_bytes(const conv_dims *d);

/* out = act(conv(x, w) + bias), bias may be NULL, with `wt` from rt_conv__pixels_weights; up
 * to `threads` threads. */
void rt_conv__pixels_f32(const conv_dims *d, const float *x, const float *wt, const float *bias,
                         const rt_activation *act, float *out, void *scratch, int32_t threads);

#endif
