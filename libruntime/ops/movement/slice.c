/* slice.c: slice (ONNX Slice: starts, ends, axes, steps with clamping) and split. Any dtype.
 *
 * Their int parameters may be literal int lists (the output shape is known at load) or
 * int32/int64 tensors read at run; then the output is usually dynamic, planned at bounds the
 * input's sizes cap (a slice or a part is never longer than the input). */
#include <inttypes.h>
#include <string.h>

#include "ops/movement/movement.h"
#include "ops/ops.h"

/* ---- slice ------------------------------------------------------------------------------ */

typedef struct slice_args {
    rt_tensor_value *x, *out;
    rt_mv_ints starts, ends, axes, steps;
} slice_args;

typedef struct slice_dims {
    int64_t start[RT_MAX_RANK], step[RT_MAX_RANK], count[RT_MAX_RANK];
} slice_dims;

/* ONNX's clamping of one axis of size dim: negative starts and ends count from the end, then
 * starts clamp to [0, dim] and ends to [0, dim]; for negative steps starts clamp to
 * [0, dim - 1] and ends to [-1, dim - 1]. */
static void slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
                       int64_t *count) {
    if (start < 0)
        start = start < -dim ? -1 : start + dim; /* no overflow: dim >= 0 */
    if (end < 0)
        end = end < -dim ? -1 : end + dim;
    uint64_t span, magnitude;
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        span = end > start ? (uint64_t)(end - start) : 0;
        magnitude = (uint64_t)step;
    } else {
        start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
        end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
        span = start > end ? (uint64_t)(start - end) : 0;
        magnitude = (uint64_t)0 - (uint64_t)step; /* step == INT64_MIN is fine in unsigned */
    }
    *first = start;
    *count = span == 0 ? 0 : (int64_t)((span - 1) / magnitude + 1);
}

/* Per-dimension start, step and count of the result for the current sizes and parameters. */
static rt_status slice_plan(rt_op_ctx *ctx, const slice_args *args, slice_dims *dims) {
    const rt_tensor_value *x = args->x;
    rt_status code = rt_op__shape_code(ctx);
    size_t n = args->starts.count;
    if (args->ends.count != n || (args->axes.present && args->axes.count != n) ||
        (args->steps.present && args->steps.count != n))
        return rt_op__fail(ctx, code,
                           "starts has %zu items, ends %zu, axes %zu, steps %zu; they must agree",
                           n, args->ends.count, args->axes.present ? args->axes.count : n,
                           args->steps.present ? args->steps.count : n);
    if (n > (size_t)x->rank)
        return rt_op__fail(ctx, code, "starts has %zu items, but x has rank %" PRId32, n, x->rank);
    bool seen[RT_MAX_RANK] = {false};
    for (int32_t d = 0; d < x->rank; d++) {
        dims->start[d] = 0;
        dims->step[d] = 1;
        dims->count[d] = x->sizes[d];
    }
    for (size_t i = 0; i < n; i++) {
        int64_t axis_item = args->axes.present ? rt_mv__ints_at(&args->axes, i) : (int64_t)i;
        int64_t step = args->steps.present ? rt_mv__ints_at(&args->steps, i) : 1;
        if (axis_item < -(int64_t)x->rank || axis_item >= (int64_t)x->rank)
            return rt_op__fail(ctx, code, "axes item %zu is %" PRId64 ", out of range for rank %"
                               PRId32, i, axis_item, x->rank);
        int32_t axis = (int32_t)(axis_item < 0 ? axis_item + x->rank : axis_item);
        if (seen[axis])
            return rt_op__fail(ctx, code, "axes names dimension %" PRId32 " twice", axis);
        if (step == 0)
            return rt_op__fail(ctx, code, "steps item %zu is 0; steps must be nonzero", i);
        seen[axis] = true;
        dims->step[axis] = step;
        slice_axis(x->sizes[axis], rt_mv__ints_at(&args->starts, i),
                   rt_mv__ints_at(&args->ends, i), step, &dims->start[axis], &dims->count[axis]);
    }
    return RT_OK;
}

/* slice(x, starts, ends, axes | none, steps | none, out) */
static rt_status slice_setup(rt_op_ctx *ctx, slice_args *args, slice_dims *dims) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 6));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 1, "starts", false, &args->starts));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 2, "ends", false, &args->ends));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 3, "axes", true, &args->axes));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 4, "steps", true, &args->steps));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 5, "out", &args->out));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, args->x, "x", RT_TYPES_ALL, "any dtype"));
    RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, args->x, "x", args->out));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", args->x, "x"));
    const rt_mv_ints *params[] = {&args->starts, &args->ends, &args->axes, &args->steps};
    for (size_t i = 0; i < 4; i++) {
        if (params[i]->tensor)
            RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", params[i]->tensor,
                                                     i == 0 ? "starts" : i == 1 ? "ends"
                                                                : i == 2 ? "axes" : "steps"));
        if (!rt_mv__ints_known(ctx, params[i])) {
            if (args->out->rank != args->x->rank)
                return rt_op__fail(ctx, RT_INVALID_PROGRAM, "out has rank %" PRId32
                                   ", but x has rank %" PRId32, args->out->rank, args->x->rank);
            return rt_mv__plan_at_bounds(ctx, args->out, "out");
        }
    }
    RT_RETURN_IF_ERROR(slice_plan(ctx, args, dims));
    return rt_op__set_output_sizes(ctx, args->out, "out", args->x->rank, dims->count);
}

rt_status rt_ops__slice_prepare(rt_op_ctx *ctx) {
    slice_args args;
    slice_dims dims;
    RT_RETURN_IF_ERROR(slice_setup(ctx, &args, &dims));
    ctx->scratch_bytes = rt_mv__maps_bytes(args.out->rank, args.out->bounds);
    return RT_OK;
}

rt_status rt_ops__slice_run(rt_op_ctx *ctx) {
    slice_args args;
    slice_dims dims;
    RT_RETURN_IF_ERROR(slice_setup(ctx, &args, &dims));
    const rt_tensor_value *x = args.x, *out = args.out;
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    int64_t *maps[RT_MAX_RANK];
    if (!rt_mv__maps_layout(ctx, out->rank, out->sizes, maps))
        return rt_op__fail(ctx, RT_INTERNAL, "the scratch planned at load is too small");
    int64_t strides[RT_MAX_RANK];
    rt_tensor__dense_strides(strides, x->rank, x->sizes, NULL);
    /* Every index start + i * step lies in [0, size): the products stay in range. */
    for (int32_t d = 0; d < out->rank; d++)
        for (int64_t i = 0; i < out->sizes[d]; i++)
            maps[d][i] = (dims.start[d] + i * dims.step[d]) * strides[d];
    rt_mv__map_copy(ctx, out->data, x->data, out->rank, out->sizes, maps, NULL, out->elem_size);
    return RT_OK;
}

/* For other backends (the CUDA one): the prepare of slice for the current sizes, and what it
 * reads from x. Parameters given as tensors must be readable here (on the host). */
rt_status rt_mv__slice_plan(rt_op_ctx *ctx, int64_t *start, int64_t *step) {
    slice_args args;
    slice_dims dims;
    RT_RETURN_IF_ERROR(slice_setup(ctx, &args, &dims));
    memcpy(start, dims.start, sizeof dims.start);
    memcpy(step, dims.step, sizeof dims.step);
    return RT_OK;
}

/* ---- split ------------------------------------------------------------------------------ */

typedef struct split_args {
    rt_tensor_value *x;
    size_t count;
    int32_t axis;
    rt_mv_ints sizes;
} split_args;

static rt_tensor_value *split_out(rt_op_ctx *ctx, size_t i) {
    return ctx->args[3 + i]->u.t;
}

/* Size of part i along the axis: sizes[i], or with no sizes ceil(dim / count) for every part
 * but the last, which takes the rest (ONNX num_outputs). */
static int64_t split_part(const split_args *args, int64_t dim, size_t i) {
    if (args->sizes.count > 0)
        return rt_mv__ints_at(&args->sizes, i);
    int64_t n = (int64_t)args->count;
    int64_t each = dim / n + (dim % n != 0);
    int64_t first = each * (int64_t)i; /* <= dim + n: no overflow */
    if (first >= dim)
        return 0;
    return dim - first < each ? dim - first : each;
}

static rt_status split_check_parts(rt_op_ctx *ctx, const split_args *args, int64_t dim) {
    rt_status code = rt_op__shape_code(ctx);
    if (args->sizes.count > 0 && args->sizes.count != args->count)
        return rt_op__fail(ctx, code, "sizes has %zu items for %zu outputs", args->sizes.count,
                           args->count);
    int64_t total = 0;
    for (size_t i = 0; i < args->count; i++) {
        int64_t part = split_part(args, dim, i);
        if (part < 0)
            return rt_op__fail(ctx, code, "sizes item %zu is %" PRId64 "; sizes must be >= 0", i,
                               part);
        if (!rt_op__add(total, part, &total))
            return rt_op__fail(ctx, code, "sizes overflow int64");
    }
    if (total != dim)
        return rt_op__fail(ctx, code, "sizes add up to %" PRId64 ", but x has %" PRId64
                           " along axis %" PRId32, total, dim, args->axis);
    return RT_OK;
}

/* split(x, axis: int, sizes, out_0, ..., out_{n-1}) */
static rt_status split_setup(rt_op_ctx *ctx, split_args *args) {
    int64_t axis;
    if (ctx->nargs < 4)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "expects x, axis, sizes and at least one output, but has %zu arguments",
                           ctx->nargs);
    args->count = ctx->nargs - 3;
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 2, "sizes", false, &args->sizes));
    const rt_tensor_value *x = args->x;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, x, "x", RT_TYPES_ALL, "any dtype"));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, x->rank, "axis", &args->axis));
    char what[RT_OP_ITEM_NAME];
    for (size_t i = 0; i < args->count; i++) {
        rt_tensor_value *out;
        rt_op__item_name(what, "out_", i, "");
        RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3 + i, what, &out));
        RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, x, "x", out));
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, what, x, "x"));
        if (args->sizes.tensor)
            RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, what, args->sizes.tensor,
                                                     "sizes"));
        for (size_t j = 0; j < i; j++)
            if (split_out(ctx, j) == out)
                return rt_op__fail(ctx, RT_INVALID_PROGRAM, "%s is also out_%zu", what, j);
    }
    if (!rt_mv__ints_known(ctx, &args->sizes)) {
        for (size_t i = 0; i < args->count; i++) {
            rt_op__item_name(what, "out_", i, "");
            RT_RETURN_IF_ERROR(rt_mv__plan_at_bounds(ctx, split_out(ctx, i), what));
        }
        return RT_OK;
    }
    RT_RETURN_IF_ERROR(split_check_parts(ctx, args, x->sizes[args->axis]));
    int64_t sizes[RT_MAX_RANK];
    memcpy(sizes, x->sizes, sizeof sizes);
    for (size_t i = 0; i < args->count; i++) {
        sizes[args->axis] = split_part(args, x->sizes[args->axis], i);
        rt_op__item_name(what, "out_", i, "");
        RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, split_out(ctx, i), what, x->rank, sizes));
    }
    return RT_OK;
}

rt_status rt_ops__split_prepare(rt_op_ctx *ctx) {
    split_args args;
    return split_setup(ctx, &args);
}

rt_status rt_ops__split_run(rt_op_ctx *ctx) {
    split_args args;
    RT_RETURN_IF_ERROR(split_setup(ctx, &args));
    const rt_tensor_value *x = args.x;
    if (rt_tensor__numel(x) == 0)
        return RT_OK;
    /* x is [outer, dim * inner]; part i takes a block of part_i * inner of every row. */
    int64_t outer = 1, inner = 1, dim = x->sizes[args.axis];
    for (int32_t d = 0; d < x->rank; d++) {
        if (d < args.axis)
            outer *= x->sizes[d];
        else if (d > args.axis)
            inner *= x->sizes[d];
    }
    size_t elem = x->elem_size;
    size_t row = (size_t)(dim * inner) * elem, offset = 0;
    for (size_t i = 0; i < args.count; i++) {
        size_t bytes = (size_t)(split_part(&args, dim, i) * inner) * elem;
        rt_mv__copy_rows(ctx, split_out(ctx, i)->data, bytes, (const char *)x->data + offset,
                         row, outer, bytes);
        offset += bytes;
    }
    return RT_OK;
}
