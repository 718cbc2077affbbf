/* conv.c: the conv2d and conv2d_act operators: 2-D convolution (cross-correlation, as in
 * PyTorch and ONNX) with stride, padding (symmetric or per side), dilation and groups. Here
 * the arguments are read and checked, one algorithm is chosen at load for the planned sizes
 * and its constant weights packed; the algorithms themselves are in kernels/. */
#include <inttypes.h>

#include <stdlib.h>
#include <string.h>

#include "ops/conv/conv.h"
#include "ops/matmul/gemm/gemm.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* Groups with few inputs per output (depthwise) stay on the bands, where a GEMM would have a
 * 1-row A. */
#define CONV_GEMM_MIN_DEPTH 16

static bool conv_uses_gemm(const rt_conv_args *args) {
    const conv_dims *d = &args->dims;
    return args->x->type == RT_F32 &&
           d->channels / d->groups * d->kernel_h * d->kernel_w >= CONV_GEMM_MIN_DEPTH;
}

/* Channel counts of x, w and bias against groups, for the current sizes. */
static rt_status conv_check_channels(rt_op_ctx *ctx, const rt_conv_args *args) {
    const conv_dims *d = &args->dims;
    RT_RETURN_IF_ERROR(rt_op__check_conv_groups(ctx, args->x, args->w, d->groups));
    char tw[RT_OP_SHAPE_TEXT];
    if (args->bias && args->bias->sizes[0] != d->out_channels)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "bias has %" PRId64 " elements, but w %s has %" PRId64
                           " output channels",
                           args->bias->sizes[0], rt_op__shape_text(args->w->sizes, 4, tw),
                           d->out_channels);
    return RT_OK;
}

rt_status rt_conv__read_args(rt_op_ctx *ctx, rt_conv_args *args, bool fused, size_t out_index) {
    conv_dims *d = &args->dims;
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "w", &args->w));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "bias", &args->bias));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 3, "stride", 1, d->stride));
    RT_RETURN_IF_ERROR(rt_op__padding(ctx, 4, "padding", d->pad));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 5, "dilation", 1, d->dilation));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 6, "groups", &d->groups));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, out_index, "out", &args->out));
    args->act = (rt_activation){RT_ACT_NONE, 0.0f, 0.0f};
    if (fused) {
        RT_RETURN_IF_ERROR(rt_op__activation(ctx, 7, &args->act));
        RT_RETURN_IF_ERROR(rt_op__check_type(ctx, args->x, "x", RT_F32));
    }
    if (d->groups < 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "groups must be >= 1, not %" PRId64, d->groups);
    RT_RETURN_IF_ERROR(rt_op__check_conv_tensors(ctx, args->x, args->w, args->bias, args->out));

    const int64_t *xs = args->x->sizes, *ws = args->w->sizes;
    d->batch = xs[0];
    d->channels = xs[1];
    d->height = xs[2];
    d->width = xs[3];
    d->out_channels = ws[0];
    d->kernel_h = ws[2];
    d->kernel_w = ws[3];
    RT_RETURN_IF_ERROR(conv_check_channels(ctx, args));
    RT_RETURN_IF_ERROR(rt_op__window_output(ctx, "height", d->height, d->pad[0], d->pad[2],
                                            d->kernel_h, d->stride[0], d->dilation[0], false,
                                            &d->out_h));
    return rt_op__window_output(ctx, "width", d->width, d->pad[1], d->pad[3], d->kernel_w,
                                d->stride[1], d->dilation[1], false, &d->out_w);
}

/* conv2d(x, w, bias, stride, padding, dilation, groups, out) and conv2d_act, which adds
 * (activation, lo, hi) before out. */
rt_status rt_conv__setup(rt_op_ctx *ctx, rt_conv_args *args, bool fused) {
    size_t out_index = fused ? 10 : 7;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, out_index + 1));
    RT_RETURN_IF_ERROR(rt_conv__read_args(ctx, args, fused, out_index));
    const conv_dims *d = &args->dims;
    int64_t sizes[4] = {d->batch, d->out_channels, d->out_h, d->out_w};
    return rt_op__set_output_sizes(ctx, args->out, "out", 4, sizes);
}

/* ctx->state: this header, then the weights (64-byte aligned, as the kernels load them). */
typedef enum conv_state_kind {
    CONV_STATE_PACKED = 1,
    CONV_STATE_WINOGRAD = 2,
    CONV_STATE_PIXELS = 3, /* w^T packed as B, for kernels/pixels_f32.c */
    CONV_STATE_DIRECT = 4, /* tall panels, for kernels/direct_f32.c */
    CONV_STATE_PATCHES = 5, /* w^T packed as B, for kernels/patches_f32.c */
} conv_state_kind;
#define CONV_STATE_HEADER 64

static float *conv_alloc_state(rt_op_ctx *ctx, conv_state_kind kind, size_t floats) {
    if (floats == 0 || floats > (SIZE_MAX - CONV_STATE_HEADER) / sizeof(float))
        return NULL;
    char *state = rt_op__alloc_state(ctx, CONV_STATE_HEADER + floats * sizeof(float));
    if (state == NULL)
        return NULL;
    *(int32_t *)state = kind;
    return (float *)(state + CONV_STATE_HEADER);
}

static const float *conv_state_weights(const rt_op_ctx *ctx, conv_state_kind kind) {
    const char *state = ctx->state;
    if (state == NULL || *(const int32_t *)state != (int32_t)kind)
        return NULL;
    return (const float *)(state + CONV_STATE_HEADER);
}

static const float *packed_weights(const rt_op_ctx *ctx) {
    return conv_state_weights(ctx, CONV_STATE_PACKED);
}

const float *rt_conv__direct_weights(const rt_op_ctx *ctx) {
    return conv_state_weights(ctx, CONV_STATE_DIRECT);
}

static const float *winograd_weights(const rt_op_ctx *ctx) {
    return conv_state_weights(ctx, CONV_STATE_WINOGRAD);
}

/* Constant weights of a pointwise convolution on a small plane, packed for kernels/pixels_f32.c
 * (then the run takes that path at any sizes, as for Winograd). */
static bool conv_prepare_pixels(rt_op_ctx *ctx, const rt_conv_args *args) {
    const conv_dims *d = &args->dims;
    if (args->x->type != RT_F32 || !rt_conv__pixels_pay(d))
        return false;
    float *weights = conv_alloc_state(ctx, CONV_STATE_PIXELS, rt_conv__pixels_weights_floats(d));
    if (weights == NULL)
        return false;
    rt_conv__pixels_weights(d, args->w->data, weights);
    ctx->scratch_bytes = rt_conv__pixels_scratch_bytes(d);
    return true;
}

/* Constant weights of a convolution over windows that do not overlap, packed for
 * kernels/patches_f32.c (then the run takes that path at any sizes). */
static bool conv_prepare_patches(rt_op_ctx *ctx, const rt_conv_args *args) {
    const conv_dims *d = &args->dims;
    if (args->x->type != RT_F32 || !rt_op__is_constant(args->w) || !rt_conv__patches_fit(d))
        return false;
    float *packed = conv_alloc_state(ctx, CONV_STATE_PATCHES,
                                     rt_conv__patches_weights_floats(d));
    if (packed == NULL)
        return false;
    rt_conv__patches_weights(d, args->w->data, packed);
    ctx->scratch_bytes = rt_conv__patches_scratch_bytes(d, rt_threadpool__hardware_threads());
    return true;
}

/* Constant weights packed once, for every call: in tall panels where the planned sizes take
 * the direct path (one group), else each group's [O/g, C/g*kH*kW] matrix as the GEMM's A.
 * RT_CONV_DIRECT when the panels were made; without them the direct kernel cannot run. */
static rt_conv_algorithm conv_pack_weights(rt_op_ctx *ctx, const rt_conv_args *args) {
    const conv_dims *d = &args->dims;
    int64_t group_out = d->out_channels / d->groups;
    int64_t depth = d->channels / d->groups * d->kernel_h * d->kernel_w;
    if (rt_conv__direct_fits(d, NULL)) {
        rt_gemm_f32_args w = {.m = d->out_channels, .k = depth, .a = args->w->data,
                              .a_row_stride = depth, .a_col_stride = 1};
        float *tall = conv_alloc_state(ctx, CONV_STATE_DIRECT,
                                       rt_gemm__f32_tall_a_floats(w.m, depth));
        if (tall == NULL)
            return RT_CONV_GEMM;
        rt_gemm__f32_pack_a_tall(&w, tall);
        return RT_CONV_DIRECT;
    }
    size_t per_group = rt_gemm__f32_packed_a_floats(group_out, depth);
    float *packed = conv_alloc_state(ctx, CONV_STATE_PACKED, per_group * (size_t)d->groups);
    if (packed == NULL)
        return RT_CONV_GEMM;
    for (int64_t g = 0; g < d->groups; g++) {
        rt_gemm_f32_args gemm = {
            .m = group_out, .k = depth,
            .a = (const float *)args->w->data + g * group_out * depth,
            .a_row_stride = depth, .a_col_stride = 1,
        };
        rt_gemm__f32_pack_a(&gemm, packed + (size_t)g * per_group);
    }
    return RT_CONV_GEMM;
}

/* RT_CONV_WINOGRAD=0 in the environment turns the Winograd path off (read at each load): for
 * results that round as the direct convolution's do. */
static bool winograd_allowed(void) {
    const char *setting = getenv("RT_CONV_WINOGRAD");
    return setting == NULL || strcmp(setting, "0") != 0;
}

/* Constant weights transformed for Winograd, when it pays for the planned sizes (then the
 * run takes it at any sizes: the state says which layout the weights are in). */
static bool conv_prepare_winograd(rt_op_ctx *ctx, const rt_conv_args *args) {
    const conv_dims *d = &args->dims;
    if (!winograd_allowed() || !rt_conv__winograd_pays(d))
        return false;
    size_t scratch = rt_conv__winograd_scratch_bytes(d, rt_threadpool__hardware_threads());
    if (scratch == 0)
        return false;
    size_t floats = rt_conv__winograd_weights_floats(d);
    float *weights = conv_alloc_state(ctx, CONV_STATE_WINOGRAD, floats);
    if (weights == NULL)
        return false;
    if (!rt_conv__winograd_weights(d, args->w->data, weights)) {
        /* memory ran out: the other paths, without it */
        rt_op__free_state(ctx, CONV_STATE_HEADER + floats * sizeof(float));
        return false;
    }
    ctx->scratch_bytes = scratch;
    return true;
}

void rt_conv__prepare(rt_op_ctx *ctx, const rt_conv_args *args) {
    if (args->x->type == RT_F32 && rt_conv__depthwise_fits(&args->dims)) {
        ctx->algorithm = RT_CONV_DEPTHWISE;
        ctx->scratch_bytes = rt_conv__depthwise_scratch_bytes(
            &args->dims, rt_threadpool__hardware_threads());
        return;
    }
    if (conv_prepare_patches(ctx, args)) {
        ctx->algorithm = RT_CONV_PATCHES;
        return;
    }
    ctx->algorithm = RT_CONV_BANDS;
    if (!conv_uses_gemm(args))
        return;
    if (rt_op__is_constant(args->w) && conv_prepare_winograd(ctx, args)) {
        ctx->algorithm = RT_CONV_WINOGRAD;
        return;
    }
    if (rt_op__is_constant(args->w) && conv_prepare_pixels(ctx, args)) {
        ctx->algorithm = RT_CONV_PIXELS;
        return;
    }
    const conv_dims *d = &args->dims;
    ctx->scratch_bytes = rt_conv__gemm_scratch_bytes(d, rt_threadpool__hardware_threads());
    size_t direct = rt_conv__direct_scratch_bytes(d, NULL, rt_threadpool__hardware_threads());
    if (rt_conv__direct_fits(d, NULL) && direct > ctx->scratch_bytes)
        ctx->scratch_bytes = direct;
    ctx->algorithm = rt_op__is_constant(args->w) ? conv_pack_weights(ctx, args) : RT_CONV_GEMM;
}

static rt_status conv_prepare(rt_op_ctx *ctx, bool fused) {
    rt_conv_args args;
    RT_RETURN_IF_ERROR(rt_conv__setup(ctx, &args, fused));
    rt_conv__prepare(ctx, &args);
    return RT_OK;
}

void rt_conv__compute(const rt_op_ctx *ctx, const rt_conv_args *args, void *out,
                      void *scratch, size_t scratch_bytes) {
    const conv_dims *d = &args->dims;
    const void *bias = args->bias ? args->bias->data : NULL;
    switch ((rt_conv_algorithm)ctx->algorithm) {
    case RT_CONV_DEPTHWISE:
        rt_conv__depthwise_f32(d, args->x->data, args->w->data, bias, &args->act, out, scratch,
                               rt_op__slot_threads(ctx));
        return;
    case RT_CONV_WINOGRAD:
        rt_conv__winograd_f32(d, args->x->data, winograd_weights(ctx),
                              args->w->data, bias, &args->act, out, scratch,
                              rt_op__slot_threads(ctx));
        return;
    case RT_CONV_PATCHES:
        rt_conv__patches_f32(d, args->x->data, conv_state_weights(ctx, CONV_STATE_PATCHES),
                             args->w->data, bias, &args->act, out, scratch, scratch_bytes,
                             rt_op__slot_threads(ctx));
        return;
    case RT_CONV_PIXELS:
        rt_conv__pixels_f32(d, args->x->data, conv_state_weights(ctx, CONV_STATE_PIXELS), bias,
                            &args->act, out, scratch, rt_op__threads(ctx));
        return;
    case RT_CONV_DIRECT:
        if (rt_conv__direct_fits(d, NULL)) {
            rt_conv__direct_f32(d, args->x->data, rt_conv__direct_weights(ctx), bias,
                                &args->act, NULL, out, scratch, rt_op__slot_threads(ctx));
            return;
        }
        /* fall through */
    case RT_CONV_GEMM:
        rt_conv__gemm_f32(d, args->x->data, args->w->data, packed_weights(ctx), bias,
                          &args->act, out, scratch, scratch_bytes, rt_op__slot_threads(ctx));
        return;
    case RT_CONV_BANDS:
        rt_conv__bands(d, args->x->type, args->x->data, args->w->data, bias, &args->act, out,
                       rt_op__threads(ctx));
        return;
    }
}

static rt_status conv_run(rt_op_ctx *ctx, bool fused) {
    rt_conv_args args;
    RT_RETURN_IF_ERROR(rt_conv__setup(ctx, &args, fused));
    if (rt_tensor__numel(args.out) > 0)
        rt_conv__compute(ctx, &args, args.out->data, ctx->scratch, ctx->scratch_bytes);
    return RT_OK;
}

rt_status rt_ops__conv2d_prepare(rt_op_ctx *ctx) { return conv_prepare(ctx, false); }

rt_status rt_ops__conv2d_run(rt_op_ctx *ctx) { return conv_run(ctx, false); }

rt_status rt_ops__conv2d_act_prepare(rt_op_ctx *ctx) { return conv_prepare(ctx, true); }

rt_status rt_ops__conv2d_act_run(rt_op_ctx *ctx) { return conv_run(ctx, true); }
