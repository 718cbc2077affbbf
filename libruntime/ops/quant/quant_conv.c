/* quant_conv.c: conv_integer and qlinear_conv (ONNX ConvInteger and QLinearConv).
 *
 * 2-D cross-correlation of int8/uint8 x and w minus their zero points (x's per tensor, w's per
 * tensor or per output channel), summed in int32 with wrap-around; taps in the padding
 * contribute nothing (as if padded with x's zero point). conv_integer stores the int32 sums;
 * qlinear_conv adds an int32 bias and requantizes to int8/uint8. Shapes follow conv2d (its
 * conv_dims and output ranges, conv.h). Arguments, checks, output sizes and the tiling here;
 * the loops are in kernels/conv_int8.c, whose work items are tiles of one output plane summed
 * in a local buffer, so requantizing needs no scratch. */
#include <string.h>

#include "ops/conv/conv.h"
#include "ops/ops.h"
#include "ops/quant/quant.h"

typedef rt_quant_conv_job qconv_job; /* quant.h */

/* ---- checks ----------------------------------------------------------------------------- */

typedef struct qconv_args {
    rt_tensor_value *x, *w, *xz, *wz, *xs, *ws, *ys, *yz, *bias, *out;
    conv_dims dims;
    qconv_job job;
} qconv_args;

static rt_status check_tensors(rt_op_ctx *ctx, const qconv_args *q) {
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, q->x, "x", RT_QUANT8_TYPES, "int8 and uint8"));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, q->w, "w", RT_QUANT8_TYPES, "int8 and uint8"));
    if (q->xz)
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->xz, "x_zero_point", q->x, "x"));
    if (q->wz)
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->wz, "w_zero_point", q->w, "w"));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, q->x, "x", 4));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, q->w, "w", 4));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, q->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, q->out, "out"));
    const rt_tensor_value *inputs[9] = {q->x, q->w, q->xz, q->wz, q->xs, q->ws, q->ys, q->yz,
                                        q->bias};
    const char *names[9] = {"x", "w", "x_zero_point", "w_zero_point", "x_scale", "w_scale",
                            "y_scale", "y_zero_point", "bias"};
    for (int i = 0; i < 9; i++)
        RT_RETURN_IF_ERROR(rt_quant__check_read(ctx, inputs[i], names[i], q->out));
    return RT_OK;
}

/* The requantization parameters and bias of qlinear_conv. */
static rt_status check_scales(rt_op_ctx *ctx, const qconv_args *q) {
    RT_RETURN_IF_ERROR(rt_op__check_float(ctx, q->xs, "x_scale"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->ws, "w_scale", q->xs, "x_scale"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->ys, "y_scale", q->xs, "x_scale"));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, q->out, "out", RT_QUANT8_TYPES,
                                            "int8 and uint8"));
    if (q->yz)
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->yz, "y_zero_point", q->out, "out"));
    if (q->bias) {
        RT_RETURN_IF_ERROR(rt_op__check_type(ctx, q->bias, "bias", RT_I32));
        RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, q->bias, "bias", 1));
    }
    RT_RETURN_IF_ERROR(rt_quant__check_single(ctx, q->xs, "x_scale"));
    RT_RETURN_IF_ERROR(rt_quant__check_single(ctx, q->ys, "y_scale"));
    return rt_quant__check_single(ctx, q->yz, "y_zero_point");
}

/* A per-tensor or per-output-channel parameter (w_zero_point, w_scale, bias). */
static rt_status check_per_channel(rt_op_ctx *ctx, const rt_tensor_value *p, const char *what,
                                   int64_t channels, bool single_ok) {
    if (!p)
        return RT_OK;
    bool single = single_ok && p->rank <= 1 && rt_tensor__numel(p) == 1;
    if (single || (p->rank == 1 && p->sizes[0] == channels))
        return RT_OK;
    char text[RT_OP_SHAPE_TEXT];
    return rt_op__fail(ctx, rt_op__shape_code(ctx),
                       "%s has shape %s; it must %sbe 1-D with one element per output channel "
                       "(%" PRId64 ")",
                       what, rt_op__shape_text(p->sizes, p->rank, text),
                       single_ok ? "have one element or " : "", channels);
}

/* Channel counts of x and w against groups, for the current sizes. */
static rt_status check_channels(rt_op_ctx *ctx, const qconv_args *q) {
    const conv_dims *d = &q->dims;
    RT_RETURN_IF_ERROR(rt_op__check_conv_groups(ctx, q->x, q->w, d->groups));
    RT_RETURN_IF_ERROR(rt_quant__check_single(ctx, q->xz, "x_zero_point"));
    RT_RETURN_IF_ERROR(check_per_channel(ctx, q->wz, "w_zero_point", d->out_channels, true));
    RT_RETURN_IF_ERROR(check_per_channel(ctx, q->ws, "w_scale", d->out_channels, true));
    return check_per_channel(ctx, q->bias, "bias", d->out_channels, false);
}

/* ---- ops -------------------------------------------------------------------------------- */

/* Tiles of up to RT_QUANT_CONV_TILE outputs. */
static void plan_tiles(qconv_job *job) {
    const conv_dims *d = job->d;
    job->tile_cols = d->out_w < RT_QUANT_CONV_COLS ? (d->out_w > 0 ? d->out_w : 1)
                                                   : RT_QUANT_CONV_COLS;
    job->tile_rows = RT_QUANT_CONV_TILE / job->tile_cols;
    job->row_tiles = (d->out_h + job->tile_rows - 1) / job->tile_rows;
    job->col_tiles = (d->out_w + job->tile_cols - 1) / job->tile_cols;
}

static void fill_job(const rt_op_ctx *ctx, qconv_args *q, bool requant) {
    qconv_job *job = &q->job;
    memset(job, 0, sizeof *job);
    job->d = &q->dims;
    job->x = q->x->data, job->w = q->w->data;
    job->x_type = q->x->type, job->w_type = q->w->type;
    job->x_zero = (int32_t)rt_quant__scalar_zero_point(ctx, q->xz);
    job->w_zero = q->wz;
    job->out = q->out->data, job->out_type = q->out->type;
    if (requant) {
        job->x_scale = q->xs->data, job->y_scale = q->ys->data;
        job->w_scale = q->ws;
        job->scale_type = q->xs->type;
        job->bias = q->bias ? q->bias->data : NULL;
        job->y_zero = rt_quant__scalar_zero_point(ctx, q->yz);
        rt_quant__range(q->out->type, &job->lo, &job->hi);
    }
    plan_tiles(job);
}

/* Shared by both ops once the arguments are read; `first_param` indexes stride. */
static rt_status qconv_setup(rt_op_ctx *ctx, qconv_args *q, size_t first_param, bool requant) {
    conv_dims *d = &q->dims;
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, first_param, "stride", 1, d->stride));
    RT_RETURN_IF_ERROR(rt_op__padding(ctx, first_param + 1, "padding", d->pad));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, first_param + 2, "dilation", 1, d->dilation));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, first_param + 3, "groups", &d->groups));
    if (d->groups < 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "groups must be >= 1, not %" PRId64, d->groups);
    if (requant)
        RT_RETURN_IF_ERROR(check_scales(ctx, q));
    else
        RT_RETURN_IF_ERROR(rt_op__check_type(ctx, q->out, "out", RT_I32));
    RT_RETURN_IF_ERROR(check_tensors(ctx, q));
    const int64_t *xs = q->x->sizes, *ws = q->w->sizes;
    d->batch = xs[0], d->channels = xs[1], d->height = xs[2], d->width = xs[3];
    d->out_channels = ws[0], d->kernel_h = ws[2], d->kernel_w = ws[3];
    RT_RETURN_IF_ERROR(check_channels(ctx, q));
    RT_RETURN_IF_ERROR(rt_op__window_output(ctx, "height", d->height, d->pad[0], d->pad[2],
                                            d->kernel_h, d->stride[0], d->dilation[0], false,
                                            &d->out_h));
    RT_RETURN_IF_ERROR(rt_op__window_output(ctx, "width", d->width, d->pad[1], d->pad[3],
                                            d->kernel_w, d->stride[1], d->dilation[1], false,
                                            &d->out_w));
    int64_t sizes[4] = {d->batch, d->out_channels, d->out_h, d->out_w};
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, q->out, "out", 4, sizes));
    fill_job(ctx, q, requant);
    return RT_OK;
}

static rt_status qconv_run(rt_op_ctx *ctx, qconv_args *q) {
    const conv_dims *d = &q->dims;
    if (rt_tensor__numel(q->out) == 0)
        return RT_OK;
    q->job.d = d;
    /* Bounded by the output's element count. */
    int64_t items = d->batch * d->out_channels * q->job.row_tiles * q->job.col_tiles;
    int64_t per_tile = rt_op__mul_sat(q->job.tile_rows, q->job.tile_cols);
    int64_t work = rt_op__mul_sat(per_tile, rt_op__mul_sat(d->channels / d->groups,
                                                           rt_op__mul_sat(d->kernel_h,
                                                                          d->kernel_w)));
    rt_parallel__for(rt_op__threads(ctx), (size_t)items, rt_op__grain(work),
                     rt_quant__conv_tiles, &q->job);
    return RT_OK;
}

/* conv_integer(x, w, x_zero_point: tensor | none, w_zero_point: tensor | none, stride,
 *              padding, dilation, groups, out) */
static rt_status conv_integer_setup(rt_op_ctx *ctx, qconv_args *q) {
    memset(q, 0, sizeof *q);
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 9));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &q->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "w", &q->w));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "x_zero_point", &q->xz));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 3, "w_zero_point", &q->wz));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 8, "out", &q->out));
    return qconv_setup(ctx, q, 4, false);
}

rt_status rt_ops__conv_integer_prepare(rt_op_ctx *ctx) {
    qconv_args q;
    return conv_integer_setup(ctx, &q);
}

rt_status rt_ops__conv_integer_run(rt_op_ctx *ctx) {
    qconv_args q;
    RT_RETURN_IF_ERROR(conv_integer_setup(ctx, &q));
    return qconv_run(ctx, &q);
}

/* qlinear_conv(x, x_scale, x_zero_point: tensor | none, w, w_scale,
 *              w_zero_point: tensor | none, y_scale, y_zero_point: tensor | none,
 *              bias: tensor | none, stride, padding, dilation, groups, out) */
static rt_status qlinear_conv_setup(rt_op_ctx *ctx, qconv_args *q) {
    memset(q, 0, sizeof *q);
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 14));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &q->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "x_scale", &q->xs));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "x_zero_point", &q->xz));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3, "w", &q->w));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 4, "w_scale", &q->ws));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 5, "w_zero_point", &q->wz));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 6, "y_scale", &q->ys));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 7, "y_zero_point", &q->yz));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 8, "bias", &q->bias));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 13, "out", &q->out));
    return qconv_setup(ctx, q, 9, true);
}

rt_status rt_ops__qlinear_conv_prepare(rt_op_ctx *ctx) {
    qconv_args q;
    return qlinear_conv_setup(ctx, &q);
}

rt_status rt_ops__qlinear_conv_run(rt_op_ctx *ctx) {
    qconv_args q;
    RT_RETURN_IF_ERROR(qlinear_conv_setup(ctx, &q));
    return qconv_run(ctx, &q);
}

rt_status rt_quant__conv_plan(rt_op_ctx *ctx, bool requant, rt_quant_conv_plan *plan) {
    qconv_args q;
    RT_RETURN_IF_ERROR(requant ? qlinear_conv_setup(ctx, &q) : conv_integer_setup(ctx, &q));
    const conv_dims *d = &q.dims;
    const qconv_job *job = &q.job;
    memset(plan, 0, sizeof *plan);
    plan->batch = d->batch, plan->channels = d->channels;
    plan->height = d->height, plan->width = d->width;
    plan->out_channels = d->out_channels, plan->kernel_h = d->kernel_h;
    plan->kernel_w = d->kernel_w, plan->out_h = d->out_h, plan->out_w = d->out_w;
    plan->groups = d->groups;
    memcpy(plan->stride, d->stride, sizeof plan->stride);
    memcpy(plan->dilation, d->dilation, sizeof plan->dilation);
    memcpy(plan->pad, d->pad, sizeof plan->pad);
    plan->x_type = job->x_type, plan->w_type = job->w_type;
    plan->scale_type = job->scale_type, plan->out_type = job->out_type;
    plan->x_zero = job->x_zero;
    plan->w_zero = job->w_zero, plan->w_scale = job->w_scale;
    plan->x_scale = job->x_scale, plan->y_scale = job->y_scale;
    plan->bias = job->bias;
    plan->y_zero = job->y_zero, plan->lo = job->lo, plan->hi = job->hi;
    return RT_OK;
}
