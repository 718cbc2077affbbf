/* pool.c: the max_pool2d and avg_pool2d operators over [N, C, H, W], with PyTorch's output
 * sizes (floor or ceil mode) and padding rules: arguments, checks and output sizes here, the
 * loops in kernels/ (work items are output rows). */
#include <inttypes.h>

#include "ops/op_util.h"
#include "ops/ops.h"
#include "ops/pool/pool.h"

typedef struct pool_args {
    rt_tensor_value *x, *out;
    rt_pool_dims dims;
} pool_args;

/* The output sizes for an input of height x width, once the window parameters are in d. */
static rt_status window_sizes(rt_op_ctx *ctx, int64_t height, int64_t width, rt_pool_dims *d) {
    d->height = height;
    d->width = width;
    RT_RETURN_IF_ERROR(rt_op__window_output(ctx, "height", d->height, d->pad[0], d->pad[2],
                                            d->kernel[0], d->stride[0], d->dilation[0],
                                            d->ceil_mode, &d->out_h));
    RT_RETURN_IF_ERROR(rt_op__window_output(ctx, "width", d->width, d->pad[1], d->pad[3],
                                            d->kernel[1], d->stride[1], d->dilation[1],
                                            d->ceil_mode, &d->out_w));
    d->out_plane = rt_op__mul_sat(d->out_h, d->out_w);
    return RT_OK;
}

/* Tensor checks and the output shape, once the window parameters are in args->dims. */
static rt_status pool_shape(rt_op_ctx *ctx, pool_args *args, uint32_t types,
                            const char *expected) {
    rt_pool_dims *d = &args->dims;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, args->x, "x", types, expected));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, args->out, "out", args->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, args->x, "x", 4));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, args->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, args->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, args->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", args->x, "x"));

    const int64_t *xs = args->x->sizes;
    if (!rt_op__mul(xs[0], xs[1], &d->planes))
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "the batch and channel sizes overflow");
    RT_RETURN_IF_ERROR(window_sizes(ctx, xs[2], xs[3], d));
    int64_t sizes[4] = {xs[0], xs[1], d->out_h, d->out_w};
    return rt_op__set_output_sizes(ctx, args->out, "out", 4, sizes);
}

void rt_pool__rows(const rt_pool_dims *d, rt_range_fn kernel, const void *x, void *out,
                   int32_t threads) {
    rt_pool_job job = {.dims = d, .x = x, .out = out};
    int64_t work = rt_op__mul_sat(d->out_w, rt_op__mul_sat(d->kernel[0], d->kernel[1]));
    rt_parallel__for(threads, (size_t)rt_op__mul_sat(d->planes, d->out_h), rt_op__grain(work),
                     kernel, &job);
}

static rt_status run_pool(rt_op_ctx *ctx, const pool_args *args, rt_range_fn kernel) {
    const rt_pool_dims *d = &args->dims;
    if (rt_tensor__numel(args->out) == 0)
        return RT_OK;
    if (!kernel)
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for dtype %s",
                           rt_tensor__type_name(args->x->type));
    rt_pool__rows(d, kernel, args->x->data, args->out->data, rt_op__threads(ctx));
    return RT_OK;
}

/* max_pool2d's (kernel, stride, padding, dilation, ceil_mode) from arguments first.. */
static rt_status max_window_params(rt_op_ctx *ctx, size_t first, rt_pool_dims *d) {
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, first, "kernel", 1, d->kernel));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, first + 1, "stride", 1, d->stride));
    RT_RETURN_IF_ERROR(rt_op__padding(ctx, first + 2, "padding", d->pad));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, first + 3, "dilation", 1, d->dilation));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, first + 4, "ceil_mode", &d->ceil_mode));
    d->count_include_pad = false;
    return RT_OK;
}

rt_status rt_pool__max_window(rt_op_ctx *ctx, size_t first, int64_t height, int64_t width,
                              rt_pool_dims *d) {
    RT_RETURN_IF_ERROR(max_window_params(ctx, first, d));
    return window_sizes(ctx, height, width, d);
}

/* max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, out) */
static rt_status max_pool_setup(rt_op_ctx *ctx, pool_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 7));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(max_window_params(ctx, 1, &args->dims));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 6, "out", &args->out));
    return pool_shape(ctx, args, RT_TYPES_NUMERIC, "float32, float64 and the integer types");
}

rt_status rt_ops__max_pool2d_prepare(rt_op_ctx *ctx) {
    pool_args args;
    return max_pool_setup(ctx, &args);
}

rt_status rt_ops__max_pool2d_run(rt_op_ctx *ctx) {
    pool_args args;
    RT_RETURN_IF_ERROR(max_pool_setup(ctx, &args));
    return run_pool(ctx, &args, rt_pool__max_kernel(args.x->type, &args.dims));
}

/* avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, out) */
static rt_status avg_pool_setup(rt_op_ctx *ctx, pool_args *args) {
    rt_pool_dims *d = &args->dims;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 7));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 1, "kernel", 1, d->kernel));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 2, "stride", 1, d->stride));
    RT_RETURN_IF_ERROR(rt_op__padding(ctx, 3, "padding", d->pad));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 4, "ceil_mode", &d->ceil_mode));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 5, "count_include_pad", &d->count_include_pad));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 6, "out", &args->out));
    d->dilation[0] = d->dilation[1] = 1;
    return pool_shape(ctx, args, RT_TYPES_FLOAT, "float32 and float64");
}

rt_status rt_ops__avg_pool2d_prepare(rt_op_ctx *ctx) {
    pool_args args;
    return avg_pool_setup(ctx, &args);
}

rt_status rt_ops__avg_pool2d_run(rt_op_ctx *ctx) {
    pool_args args;
    RT_RETURN_IF_ERROR(avg_pool_setup(ctx, &args));
    return run_pool(ctx, &args, rt_pool__avg_kernel(args.x->type));
}
