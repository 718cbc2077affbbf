/* conv_transpose.c: the conv_transpose2d operator: 2-D transposed convolution (PyTorch's
 * conv_transpose2d, ONNX's ConvTranspose) with stride, padding (per side, possibly negative),
 * output padding, dilation and groups. float32 with enough input channels per group runs
 * through the GEMM, the rest tap by tap (kernels/transposed.c). */
#include <inttypes.h>

#include "ops/conv/conv.h"
#include "ops/matmul/gemm/gemm.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct convt_args {
    rt_tensor_value *x, *w, *bias, *out;
    rt_convt_dims dims;
} convt_args;

/* The GEMM's depth is the group's input channel count; below this the direct form wins. */
#define CONVT_GEMM_MIN_DEPTH 8

static bool convt_uses_gemm(const convt_args *a) {
    const rt_convt_dims *d = &a->dims;
    return a->x->type == RT_F32 && d->channels / d->groups >= CONVT_GEMM_MIN_DEPTH &&
           d->height * d->width > 0 && rt_conv__transpose_columns_bytes(d) != SIZE_MAX;
}

/* padding: [h, w] or [top, left, bottom, right], each in [-(2^31 - 1), 2^31 - 1]: a negative
 * padding adds output positions (ONNX derives such pads from output_shape). */
static rt_status convt_padding(rt_op_ctx *ctx, size_t index, int64_t out[4]) {
    const int64_t *items = NULL;
    size_t count = 0;
    RT_RETURN_IF_ERROR(rt_op__int_list(ctx, index, "padding", &items, &count));
    if (count != 2 && count != 4)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "padding must have 2 items (height, width) or 4 (top, left, bottom, "
                           "right), not %zu",
                           count);
    for (size_t i = 0; i < count; i++)
        if (items[i] < -RT_OP_MAX_WINDOW_PARAM || items[i] > RT_OP_MAX_WINDOW_PARAM)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                               "padding item %zu is %" PRId64 "; it must be in [%" PRId64
                               ", %" PRId64 "]",
                               i, items[i], -(int64_t)RT_OP_MAX_WINDOW_PARAM,
                               (int64_t)RT_OP_MAX_WINDOW_PARAM);
    for (size_t i = 0; i < 4; i++)
        out[i] = items[count == 4 ? i : i % 2];
    return RT_OK;
}

/* Channel counts of x, w and bias against groups, for the current sizes. */
static rt_status convt_check_channels(rt_op_ctx *ctx, const convt_args *a) {
    const rt_convt_dims *d = &a->dims;
    /* The shapes are formatted only for a message: this runs on every call. */
    char tx[RT_OP_SHAPE_TEXT], tw[RT_OP_SHAPE_TEXT];
#define TX rt_op__shape_text(a->x->sizes, 4, tx)
#define TW rt_op__shape_text(a->w->sizes, 4, tw)
    if (a->w->sizes[0] != d->channels)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "w %s must have one row per input channel of x %s", TW, TX);
    if (d->channels % d->groups != 0)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "groups %" PRId64 " must divide the input channels of x %s", d->groups,
                           TX);
    if (d->kernel_h < 1 || d->kernel_w < 1)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "w %s has an empty kernel", TW);
    /* Sizes beside a 0 can be anything; the kernels multiply these pairs. */
    int64_t product;
    if (!rt_op__mul(d->kernel_h, d->kernel_w, &product) ||
        !rt_op__mul(d->height, d->width, &product))
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "the kernel of w %s or the image of x %s has too many elements", TW, TX);
    if (a->bias && a->bias->sizes[0] != d->out_channels)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "bias has %" PRId64 " elements, but w %s and groups %" PRId64
                           " give %" PRId64 " output channels",
                           a->bias->sizes[0], TW, d->groups, d->out_channels);
#undef TX
#undef TW
    return RT_OK;
}

/* (size - 1) * stride - pad_before - pad_after + dilation * (kernel - 1) + out_pad + 1. */
static rt_status convt_output(rt_op_ctx *ctx, const char *what, int64_t size, int64_t stride,
                              int64_t pad_before, int64_t pad_after, int64_t dilation,
                              int64_t kernel, int64_t out_pad, int64_t *out) {
    int64_t span, extent, total;
    bool ok = rt_op__mul(size, stride, &span) && rt_op__mul(dilation, kernel - 1, &extent) &&
              rt_op__add(span, extent, &total) && total < INT64_MAX / 2;
    if (!ok)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "the output %s overflows int64", what);
    /* All other terms are below 2^33 in magnitude. */
    int64_t length = total - stride + 1 + out_pad - pad_before - pad_after;
    if (length < 0)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "the output %s would be %" PRId64 " (input %" PRId64 ", padding %" PRId64
                           " + %" PRId64 ")",
                           what, length, size, pad_before, pad_after);
    *out = length;
    return RT_OK;
}

static rt_status convt_setup(rt_op_ctx *ctx, convt_args *a) {
    rt_convt_dims *d = &a->dims;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 9));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &a->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "w", &a->w));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "bias", &a->bias));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 3, "stride", 1, d->stride));
    RT_RETURN_IF_ERROR(convt_padding(ctx, 4, d->pad));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 5, "output_padding", 0, d->out_pad));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 6, "dilation", 1, d->dilation));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 7, "groups", &d->groups));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 8, "out", &a->out));
    if (d->groups < 1 || d->groups > RT_OP_MAX_WINDOW_PARAM)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "groups must be in [1, %" PRId64 "], not %" PRId64,
                           (int64_t)RT_OP_MAX_WINDOW_PARAM, d->groups);
    RT_RETURN_IF_ERROR(rt_op__check_conv_tensors(ctx, a->x, a->w, a->bias, a->out));

    const int64_t *xs = a->x->sizes, *ws = a->w->sizes;
    d->batch = xs[0];
    d->channels = xs[1];
    d->height = xs[2];
    d->width = xs[3];
    d->group_out = ws[1];
    d->kernel_h = ws[2];
    d->kernel_w = ws[3];
    if (!rt_op__mul(d->group_out, d->groups, &d->out_channels))
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "the output channel count overflows");
    RT_RETURN_IF_ERROR(convt_check_channels(ctx, a));
    RT_RETURN_IF_ERROR(convt_output(ctx, "height", d->height, d->stride[0], d->pad[0], d->pad[2],
                                    d->dilation[0], d->kernel_h, d->out_pad[0], &d->out_h));
    RT_RETURN_IF_ERROR(convt_output(ctx, "width", d->width, d->stride[1], d->pad[1], d->pad[3],
                                    d->dilation[1], d->kernel_w, d->out_pad[1], &d->out_w));
    int64_t sizes[4] = {d->batch, d->out_channels, d->out_h, d->out_w};
    return rt_op__set_output_sizes(ctx, a->out, "out", 4, sizes);
}

/* The GEMM form where the group has enough input channels and the columns fit: chosen once,
 * at load, for the planned sizes (smaller sizes at run fit the same scratch). */
enum { CONVT_DIRECT = 0, CONVT_GEMM = 1 };

rt_status rt_ops__conv_transpose2d_prepare(rt_op_ctx *ctx) {
    convt_args a;
    RT_RETURN_IF_ERROR(convt_setup(ctx, &a));
    const rt_convt_dims *d = &a.dims;
    ctx->algorithm = convt_uses_gemm(&a) ? CONVT_GEMM : CONVT_DIRECT;
    if (ctx->algorithm == CONVT_GEMM)
        ctx->scratch_bytes = rt_conv__transpose_columns_bytes(d) +
                             rt_gemm__f32_scratch_bytes(d->group_out * d->kernel_h * d->kernel_w,
                                                        d->height * d->width,
                                                        d->channels / d->groups,
                                                        rt_threadpool__hardware_threads());
    return RT_OK;
}

rt_status rt_ops__conv_transpose2d_run(rt_op_ctx *ctx) {
    convt_args a;
    RT_RETURN_IF_ERROR(convt_setup(ctx, &a));
    if (rt_tensor__numel(a.out) == 0)
        return RT_OK;
    /* An empty x (no columns to multiply) takes the direct form, which writes the bias. */
    bool gemm = ctx->algorithm == CONVT_GEMM && convt_uses_gemm(&a);
    rt_conv__transpose(&a.dims, a.x->type, a.x->data, a.w->data, a.bias ? a.bias->data : NULL,
                       a.out->data, gemm ? ctx->scratch : NULL, ctx->scratch_bytes,
                       gemm ? rt_op__slot_threads(ctx) : rt_op__threads(ctx));
    return RT_OK;
}
