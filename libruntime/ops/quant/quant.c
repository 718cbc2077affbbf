/* quant.c: quantize_linear, dequantize_linear and dynamic_quantize_linear (ONNX's
 * QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear) for the integer types.
 *
 * A scale or zero point is per tensor (one element), per axis (1-D along `axis`) or blocked
 * (x's rank, `axis` cut into blocks of block_size). Arguments, checks, the parameters' views
 * and output sizes here; the loops (kernels/quantize.c) view x as [outer, length, inner] around
 * `axis` and walk it in runs along `inner`, where a parameter's index is fixed (per tensor, per
 * axis) or advances with the element (blocked). */
#include <string.h>

#include "ops/ops.h"
#include "ops/quant/quant.h"

/* ---- parameter layout ------------------------------------------------------------------- */

typedef rt_quant_layout qlayout; /* quant.h */
typedef rt_quant_param qparam;
typedef rt_quant_linear_job qjob;

/* Check one parameter against x (current sizes) and fill its view. */
static rt_status param_setup(rt_op_ctx *ctx, const rt_tensor_value *p, const char *what,
                             const rt_tensor_value *x, int64_t axis, int64_t block,
                             qparam *out) {
    out->data = p ? p->data : NULL;
    out->type = p ? p->type : RT_I32;
    out->single = true;
    if (!p)
        return RT_OK;
    /* The shapes are formatted only for a message: this runs on every call. */
    char tp[RT_OP_SHAPE_TEXT], tx[RT_OP_SHAPE_TEXT];
    if (rt_tensor__numel(p) == 1 && (p->rank <= 1 || (block > 0 && p->rank == x->rank)))
        return RT_OK;
    out->single = false;
    int32_t ax;
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, x->rank, "axis", &ax));
    if (block == 0) {
        if (p->rank != 1 || p->sizes[0] != x->sizes[ax])
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "%s %s must have one element or be 1-D of length %" PRId64
                               " (x %s along axis %" PRId32 ")",
                               what, rt_op__shape_text(p->sizes, p->rank, tp), x->sizes[ax],
                               rt_op__shape_text(x->sizes, x->rank, tx), ax);
        return RT_OK;
    }
    bool ok = p->rank == x->rank;
    for (int32_t d = 0; ok && d < x->rank; d++) {
        int64_t want = d == ax ? rt_op__ceil_div(x->sizes[d], block) : x->sizes[d];
        ok = p->sizes[d] == want;
    }
    if (!ok)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "%s %s must have x's shape %s with axis %" PRId32
                           " cut into blocks of %" PRId64,
                           what, rt_op__shape_text(p->sizes, p->rank, tp),
                           rt_op__shape_text(x->sizes, x->rank, tx), ax, block);
    return RT_OK;
}

static void layout_setup(const rt_tensor_value *x, int64_t axis, int64_t block,
                         const qparam *a, const qparam *b, qlayout *l) {
    l->block = block;
    l->outer = 1, l->length = 1, l->inner = rt_tensor__numel(x), l->blocks = 0;
    if (a->single && b->single)
        return; /* one run over all of x */
    int32_t ax = (int32_t)(axis < 0 ? axis + x->rank : axis); /* checked by param_setup */
    l->length = x->sizes[ax];
    l->outer = 1, l->inner = 1;
    for (int32_t d = 0; d < ax; d++)
        l->outer *= x->sizes[d];
    for (int32_t d = ax + 1; d < x->rank; d++)
        l->inner *= x->sizes[d];
    l->blocks = block > 0 ? rt_op__ceil_div(l->length, block) : 0;
}

/* ---- quantize_linear, dequantize_linear ------------------------------------------------- */

typedef struct qargs {
    rt_tensor_value *x, *scale, *zero, *out;
    int64_t axis, block;
    qjob job;
} qargs;

static rt_status check_tensors(rt_op_ctx *ctx, const qargs *q, bool quantize) {
    const rt_tensor_value *ints = quantize ? q->out : q->x;
    const rt_tensor_value *floats = quantize ? q->x : q->out;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, q->x, "x", quantize ? RT_TYPES_FLOAT
                                            : RT_QUANT_TYPES, quantize ? "float32 and float64"
                                            : RT_QUANT_TYPES_TEXT));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, q->out, "out", quantize ? RT_QUANT_TYPES
                                            : RT_TYPES_FLOAT, quantize ? RT_QUANT_TYPES_TEXT
                                            : "float32 and float64"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->scale, "scale", floats,
                                              quantize ? "x" : "out"));
    if (q->zero)
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->zero, "zero_point", ints,
                                                  quantize ? "out" : "x"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, q->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, q->out, "out"));
    RT_RETURN_IF_ERROR(rt_quant__check_read(ctx, q->x, "x", q->out));
    RT_RETURN_IF_ERROR(rt_quant__check_read(ctx, q->scale, "scale", q->out));
    return rt_quant__check_read(ctx, q->zero, "zero_point", q->out);
}

/* (de)quantize(x, scale, zero_point: tensor | none, axis: int, block_size: int, out) */
static rt_status q_setup(rt_op_ctx *ctx, qargs *q, bool quantize) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 6));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &q->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "scale", &q->scale));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "zero_point", &q->zero));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 3, "axis", &q->axis));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 4, "block_size", &q->block));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 5, "out", &q->out));
    if (q->block < 0)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "block_size must be >= 0, not %" PRId64,
                           q->block);
    RT_RETURN_IF_ERROR(check_tensors(ctx, q, quantize));

    qjob *job = &q->job;
    RT_RETURN_IF_ERROR(param_setup(ctx, q->scale, "scale", q->x, q->axis, q->block, &job->scale));
    RT_RETURN_IF_ERROR(param_setup(ctx, q->zero, "zero_point", q->x, q->axis, q->block,
                                   &job->zero));
    layout_setup(q->x, q->axis, q->block, &job->scale, &job->zero, &job->layout);
    rt_type float_type = quantize ? q->x->type : q->out->type;
    rt_type int_type = quantize ? q->out->type : q->x->type;
    job->kernel = rt_quant__linear_kernel(quantize, float_type, int_type);
    if (!job->kernel)
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for %s", rt_tensor__type_name(int_type));
    rt_quant__range(int_type, &job->lo, &job->hi);
    job->x = q->x->data;
    job->y = q->out->data;
    job->x_size = q->x->elem_size;
    job->y_size = q->out->elem_size;
    job->s_size = q->scale->elem_size;
    job->z_size = q->zero ? q->zero->elem_size : 0;
    return rt_op__set_output_sizes(ctx, q->out, "out", q->x->rank, q->x->sizes);
}

static rt_status q_run(rt_op_ctx *ctx, bool quantize) {
    qargs q;
    RT_RETURN_IF_ERROR(q_setup(ctx, &q, quantize));
    int64_t n = rt_tensor__numel(q.x);
    if (n > 0)
        rt_parallel__for(rt_op__threads(ctx), (size_t)n, rt_op__grain(4), rt_quant__linear_runs,
                         &q.job);
    return RT_OK;
}

rt_status rt_ops__quantize_linear_prepare(rt_op_ctx *ctx) {
    qargs q;
    return q_setup(ctx, &q, true);
}

rt_status rt_ops__quantize_linear_run(rt_op_ctx *ctx) { return q_run(ctx, true); }

rt_status rt_ops__dequantize_linear_prepare(rt_op_ctx *ctx) {
    qargs q;
    return q_setup(ctx, &q, false);
}

rt_status rt_ops__dequantize_linear_run(rt_op_ctx *ctx) { return q_run(ctx, false); }

/* ---- dynamic_quantize_linear ------------------------------------------------------------ */

typedef struct dql_args {
    rt_tensor_value *x, *y, *scale, *zero;
} dql_args;

static rt_status dql_check(rt_op_ctx *ctx, const dql_args *d) {
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, d->x, "x", RT_F32));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, d->y, "y", RT_U8));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, d->scale, "y_scale", RT_F32));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, d->zero, "y_zero_point", RT_U8));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, d->scale, "y_scale", 0));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, d->zero, "y_zero_point", 0));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, d->x, "x"));
    rt_tensor_value *outs[3] = {d->y, d->scale, d->zero};
    static const char *const names[3] = {"y", "y_scale", "y_zero_point"};
    return rt_op__check_outputs(ctx, outs, names, 3, d->x, "x");
}

/* dynamic_quantize_linear(x, y, y_scale, y_zero_point) */
static rt_status dql_setup(rt_op_ctx *ctx, dql_args *d) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 4));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &d->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "y", &d->y));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "y_scale", &d->scale));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3, "y_zero_point", &d->zero));
    RT_RETURN_IF_ERROR(dql_check(ctx, d));
    int64_t none[1] = {0};
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, d->scale, "y_scale", 0, none));
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, d->zero, "y_zero_point", 0, none));
    return rt_op__set_output_sizes(ctx, d->y, "y", d->x->rank, d->x->sizes);
}

rt_status rt_ops__dynamic_quantize_linear_prepare(rt_op_ctx *ctx) {
    dql_args d;
    return dql_setup(ctx, &d);
}

/* ONNX's formula, in float32 as its reference computes it:
 * scale = (max(0, max x) - min(0, min x)) / 255 (1 / 255 when both are 0),
 * zero_point = rint(clamp(0 - min / scale, 0, 255)), y = saturate(rint(x / scale) + zp). */
rt_status rt_ops__dynamic_quantize_linear_run(rt_op_ctx *ctx) {
    dql_args d;
    RT_RETURN_IF_ERROR(dql_setup(ctx, &d));
    int64_t n = rt_tensor__numel(d.x);
    float mn, mx;
    rt_quant__min_max_f32(d.x->data, n, &mn, &mx);
    float scale = (mx == mn ? 1.0f : mx - mn) / 255.0f;
    float zp = 0.0f - mn / scale;
    zp = zp > 255.0f ? 255.0f : zp < 0.0f ? 0.0f : zp;
    uint8_t zp8 = (uint8_t)rt_quant__saturate((double)rintf(zp), 0, 0, 255);
    *(float *)d.scale->data = scale;
    *(uint8_t *)d.zero->data = zp8;
    qjob job = {
        .kernel = rt_quant__linear_kernel(true, RT_F32, RT_U8),
        .layout = {.outer = 1, .length = 1, .inner = n},
        .scale = {.data = &scale, .type = RT_F32, .single = true},
        .zero = {.data = &zp8, .type = RT_U8, .single = true},
        .x = d.x->data,
        .y = d.y->data,
        .x_size = sizeof(float), .y_size = 1, .s_size = sizeof(float), .z_size = 1,
        .lo = 0, .hi = 255,
    };
    if (n > 0)
        rt_parallel__for(rt_op__threads(ctx), (size_t)n, rt_op__grain(4), rt_quant__linear_runs,
                         &job);
    return RT_OK;
}
