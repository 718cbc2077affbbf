/* conv_pool.c: conv2d_act_max_pool2d, a convolution whose result only a max pool reads (the
 * ONNX importer fuses Conv [+ activation] + MaxPool into it).
 *
 * The direct convolution pools each band's rows while they are in L1 (kernels/direct_f32.c), so the
 * unpooled result never goes to memory; any other convolution writes it into scratch and the
 * max pool reads it from there, which is what the two ops would have done. */
#include <inttypes.h>

#include "ops/conv/conv.h"
#include "ops/op_util.h"
#include "ops/ops.h"
#include "ops/pool/pool.h"

/* conv2d_act_max_pool2d(x, w, bias, stride, padding, dilation, groups, activation, lo, hi,
 *                       kernel, stride, padding, dilation, ceil_mode, out) */
rt_status rt_conv_pool__setup(rt_op_ctx *ctx, rt_conv_pool_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 16));
    RT_RETURN_IF_ERROR(rt_conv__read_args(ctx, &args->conv, true, 15));
    const conv_dims *d = &args->conv.dims;
    rt_pool_dims *pool = &args->pool;
    RT_RETURN_IF_ERROR(rt_pool__max_window(ctx, 10, d->out_h, d->out_w, pool));
    if (!rt_op__mul(d->batch, d->out_channels, &pool->planes))
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "the batch and channel sizes overflow");
    int64_t sizes[4] = {d->batch, d->out_channels, pool->out_h, pool->out_w};
    return rt_op__set_output_sizes(ctx, args->conv.out, "out", 4, sizes);
}

size_t rt_conv_pool__unpooled_bytes(const rt_conv_pool_args *args) {
    const conv_dims *d = &args->conv.dims;
    int64_t floats;
    if (!rt_op__mul(args->pool.planes, d->out_h, &floats) ||
        !rt_op__mul(floats, d->out_w, &floats) || (uint64_t)floats > SIZE_MAX / 8)
        return 0;
    return ((size_t)floats * sizeof(float) + 63) / 64 * 64;
}

/* Pooled in the direct convolution's bands: the weights were packed at load for it and the
 * shapes suit it. */
static bool pools_in_bands(const rt_op_ctx *ctx, const rt_conv_pool_args *args) {
    return ctx->algorithm == RT_CONV_DIRECT && rt_conv__direct_fits(&args->conv.dims, &args->pool);
}

rt_status rt_ops__conv2d_act_max_pool2d_prepare(rt_op_ctx *ctx) {
    rt_conv_pool_args args;
    RT_RETURN_IF_ERROR(rt_conv_pool__setup(ctx, &args));
    rt_conv__prepare(ctx, &args.conv);
    size_t bands = 0;
    if (pools_in_bands(ctx, &args)) {
        bands = rt_conv__direct_scratch_bytes(&args.conv.dims, &args.pool,
                                              rt_threadpool__hardware_threads());
        /* Sizes within the bounds may not suit the bands (rows too narrow for the kernel's
         * blocks): a dynamic input keeps scratch for the unpooled result too. */
        if (!args.conv.x->dynamic) {
            ctx->scratch_bytes = bands > ctx->scratch_bytes ? bands : ctx->scratch_bytes;
            return RT_OK;
        }
    }
    size_t unpooled = rt_conv_pool__unpooled_bytes(&args);
    if (unpooled == 0 || unpooled > SIZE_MAX / 2 - ctx->scratch_bytes)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "the convolution's result, %" PRId64 " x %" PRId64 " planes of %" PRId64
                           " x %" PRId64 ", is too large to hold",
                           args.conv.dims.batch, args.conv.dims.out_channels,
                           args.conv.dims.out_h, args.conv.dims.out_w);
    ctx->scratch_bytes += unpooled;
    ctx->scratch_bytes = bands > ctx->scratch_bytes ? bands : ctx->scratch_bytes;
    return RT_OK;
}

rt_status rt_ops__conv2d_act_max_pool2d_run(rt_op_ctx *ctx) {
    rt_conv_pool_args args;
    RT_RETURN_IF_ERROR(rt_conv_pool__setup(ctx, &args));
    const rt_conv_args *conv = &args.conv;
    if (rt_tensor__numel(conv->out) == 0)
        return RT_OK;
    if (pools_in_bands(ctx, &args)) {
        rt_conv__direct_f32(&conv->dims, conv->x->data, rt_conv__direct_weights(ctx),
                            conv->bias ? conv->bias->data : NULL, &conv->act, &args.pool,
                            conv->out->data, ctx->scratch, rt_op__slot_threads(ctx));
        return RT_OK;
    }
    /* The unpooled result first in scratch, the convolution's own scratch after it. */
    size_t unpooled = rt_conv_pool__unpooled_bytes(&args);
    float *result = ctx->scratch;
    const conv_dims *d = &conv->dims;
    if (d->out_h > 0 && d->out_w > 0 && args.pool.planes > 0)
        rt_conv__compute(ctx, conv, result, (char *)ctx->scratch + unpooled,
                         ctx->scratch_bytes - unpooled);
    rt_pool__max_f32(&args.pool, result, conv->out->data, rt_op__threads(ctx));
    return RT_OK;
}
