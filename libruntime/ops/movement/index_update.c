/* index_update.c: the assignments that lowered control flow (ONNX Loop and Scan) uses.
 *
 *   copy_into(x, index: int | tensor, axis: int, out)
 *     out[..., index, ...] = x along `axis`, collecting one iteration's result into a
 *     preallocated tensor: x has out's shape without that dimension. Or, x of out's rank,
 *     out[..., index:index + n, ...] = x with n its size along the axis: a block, as a KV
 *     cache is written at its current length. out keeps its sizes and every other slice; it
 *     is both read and written.
 *   assign(x, out)
 *     out = x, where x is dynamic and out holds a loop-carried value of one shape: x's
 *     current shape must be out's (static out) or fit out's bounds (dynamic out), checked at
 *     run. (copy asks at load that x's bounds fit out.)
 *
 * Any dtype. */
#include <inttypes.h>
#include <string.h>

#include "ops/movement/movement.h"
#include "ops/ops.h"

typedef struct copy_into_args {
    rt_tensor_value *x, *index, *out; /* index NULL: the literal */
    int64_t literal;
    int32_t axis;
} copy_into_args;

/* index: an int, or an int32/int64 tensor of one element. */
static rt_status parse_index(rt_op_ctx *ctx, copy_into_args *a) {
    const rt_value *v = ctx->args ? ctx->args[1] : NULL;
    a->index = NULL;
    if (v && v->kind == RT_VALUE_INT)
        return rt_op__int(ctx, 1, "index", &a->literal);
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "index", &a->index));
    if (!ctx->preparing)
        return RT_OK;
    RT_RETURN_IF_ERROR(
        rt_op__check_type_in(ctx, a->index, "index", RT_TYPES_INDEX, "int32 or int64"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, a->index, "index"));
    return rt_op__check_disjoint(ctx, a->out, "out", a->index, "index");
}

/* x must have out's shape without the axis, or out's shape with any size along it (a
 * block). A dynamic x is checked at run; prepare only asks that its bounds can hold that
 * shape. */
static rt_status check_x_shape(rt_op_ctx *ctx, const copy_into_args *a) {
    const rt_tensor_value *x = a->x, *out = a->out;
    bool block = x->rank == out->rank, bounds = ctx->preparing && x->dynamic;
    bool ok = block || x->rank == out->rank - 1;
    for (int32_t d = 0, k = 0; ok && d < out->rank; d++) {
        if (d == a->axis) {
            k += block;
            continue;
        }
        ok = bounds ? x->sizes[k] >= out->sizes[d] : x->sizes[k] == out->sizes[d];
        k++;
    }
    if (ok)
        return RT_OK;
    char tx[RT_OP_SHAPE_TEXT], to[RT_OP_SHAPE_TEXT];
    return rt_op__fail(ctx, rt_op__shape_code(ctx),
                       "x has %s %s; it must be out's shape %s without axis %" PRId32
                       " (or with any size along it)",
                       bounds ? "bounds" : "shape", rt_op__shape_text(x->sizes, x->rank, tx),
                       rt_op__shape_text(out->sizes, out->rank, to), a->axis);
}

rt_status rt_ops__copy_into_place(rt_op_ctx *ctx, const rt_tensor_value *x,
                                  const rt_tensor_value *out, int32_t axis, int64_t index,
                                  int64_t *start, int64_t *count) {
    int64_t size = out->sizes[axis], n = x->rank == out->rank ? x->sizes[axis] : 1;
    int64_t at = index < 0 ? index + size : index;
    if (x->rank < out->rank && (index < -size || index >= size))
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "index %" PRId64 " is out of range "
                           "for axis %" PRId32 " of out, of size %" PRId64 " (valid: %" PRId64
                           " to %" PRId64 ")", index, axis, size, -size, size - 1);
    if (at < 0 || at > size - n)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "a block of %" PRId64 " at index %"
                           PRId64 " does not fit axis %" PRId32 " of out, of size %" PRId64, n,
                           index, axis, size);
    *start = at;
    *count = n;
    return RT_OK;
}

static rt_status copy_into_setup(rt_op_ctx *ctx, copy_into_args *a) {
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 4));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &a->x));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "axis", &axis));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3, "out", &a->out));
    if (ctx->preparing) {
        RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, a->x, "x", a->out));
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, a->out, "out", a->x, "x"));
        if (a->out->rank < 1)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM, "out must have rank >= 1");
    }
    RT_RETURN_IF_ERROR(parse_index(ctx, a));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, a->out->rank, "axis", &a->axis));
    if (a->index && rt_tensor__numel(a->index) != 1)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "index must hold one element, not %"
                           PRId64, rt_tensor__numel(a->index));
    return check_x_shape(ctx, a);
}

rt_status rt_ops__copy_into_prepare(rt_op_ctx *ctx) {
    copy_into_args a;
    RT_RETURN_IF_ERROR(copy_into_setup(ctx, &a));
    int64_t start, count;
    if (a.index || a.x->dynamic)
        return RT_OK; /* read at run */
    return rt_ops__copy_into_place(ctx, a.x, a.out, a.axis, a.literal, &start, &count);
}

rt_status rt_ops__copy_into_run(rt_op_ctx *ctx) {
    copy_into_args a;
    RT_RETURN_IF_ERROR(copy_into_setup(ctx, &a));
    const rt_tensor_value *out = a.out;
    int64_t start, count;
    RT_RETURN_IF_ERROR(rt_ops__copy_into_place(ctx, a.x, out, a.axis,
                                               a.index ? rt_mv__index_at(a.index, 0) : a.literal,
                                               &start, &count));
    /* Row o of x (the dimensions before axis) lands at out[o, start:start + count]. */
    int64_t rows = 1, inner = 1, size = out->sizes[a.axis];
    for (int32_t d = 0; d < a.axis; d++)
        rows *= out->sizes[d];
    for (int32_t d = a.axis + 1; d < out->rank; d++)
        inner *= out->sizes[d];
    size_t bytes = (size_t)inner * out->elem_size;
    if (rows == 0 || bytes == 0 || count == 0)
        return RT_OK;
    rt_mv__copy_rows(ctx, (char *)out->data + (size_t)start * bytes, (size_t)size * bytes,
                     a.x->data, (size_t)count * bytes, rows, (size_t)count * bytes);
    return RT_OK;
}

/* ---- assign ----------------------------------------------------------------------------- */

rt_status rt_ops__assign_prepare(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 2));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "out", &out));
    RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, x, "x", out));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", x, "x"));
    bool ok = x->rank == out->rank;
    for (int32_t d = 0; ok && d < x->rank; d++)
        ok = x->dynamic || out->dynamic ? true : x->sizes[d] == out->sizes[d];
    if (ok)
        return RT_OK;
    char tx[RT_OP_SHAPE_TEXT], to[RT_OP_SHAPE_TEXT];
    return rt_op__fail(ctx, RT_INVALID_PROGRAM, "x has %s %s, which can never be out's shape %s",
                       x->dynamic ? "bounds" : "shape", rt_op__shape_text(x->sizes, x->rank, tx),
                       rt_op__shape_text(out->sizes, out->rank, to));
}

rt_status rt_ops__assign_run(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "out", &out));
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, out, "out", x->rank, x->sizes));
    size_t bytes = rt_tensor__nbytes(x);
    if (bytes > 0)
        memcpy(out->data, x->data, bytes);
    return RT_OK;
}
